-- set_group_weight: how many jobs of one group a claim serves per turn of the ring.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] the weight (a positive integer; 1 clears it)
-- ARGV[3]  actor (optional; '' = none), written to the audit journal
-- ARGV[4]  request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   1
-- Refusals: none (the client gates the value).
-- Writes:  HSET/HDEL gweight, HDEL gturn; groups (added with a weight, forgotten when
--          clearing it leaves the group holding nothing); one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
redis.call('HDEL', B .. GTURN, ARGV[1])
if ARGV[2] == '1' then
  redis.call('HDEL', B .. GWEIGHT, ARGV[1])
  prune_group(ARGV[1])
else
  redis.call('HSET', B .. GWEIGHT, ARGV[1], ARGV[2])
  redis.call('SADD', B .. GROUPS, ARGV[1])
end
audit('set_group_weight', cjson.encode({group = ARGV[1], weight = tonumber(ARGV[2])}), 'ok', 1,
  ARGV[3], ARGV[4])
return 1
