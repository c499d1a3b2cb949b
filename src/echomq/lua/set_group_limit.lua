-- set_group_limit: set (or clear) how many jobs of one group may be in flight at once.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] the limit (a positive integer) or '' to clear it
-- Reply:   1
-- Refusals: none (the client gates the value).
-- Writes:  HSET/HDEL glimit; the ring follows (a raised limit re-rings + wakes).
local B = KEYS[1]
--! include common
if ARGV[2] == '' then
  redis.call('HDEL', B .. 'glimit', ARGV[1])
else
  redis.call('HSET', B .. 'glimit', ARGV[1], ARGV[2])
end
redis.call('SADD', B .. 'groups', ARGV[1])
ring_sync(ARGV[1])
return 1
