-- group_weight: how many jobs of one group a claim serves per turn of the ring.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] the weight (a positive integer; 1 clears it)
-- Reply:   1
-- Refusals: none (the client gates the value).
-- Writes:  HSET/HDEL gweight, HDEL gturn.
local B = KEYS[1]
if ARGV[2] == '1' then
  redis.call('HDEL', B .. 'gweight', ARGV[1])
else
  redis.call('HSET', B .. 'gweight', ARGV[1], ARGV[2])
end
redis.call('HDEL', B .. 'gturn', ARGV[1])
redis.call('SADD', B .. 'groups', ARGV[1])
return 1
