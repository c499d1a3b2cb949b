-- set_group_limit: set (or clear) how many jobs of one group may be in flight at once.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] the limit (a positive integer) or '' to clear it
-- ARGV[3]  actor (optional; '' = none), written to the audit journal
-- ARGV[4]  request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   1
-- Refusals: none (the client gates the value).
-- Writes:  HSET/HDEL glimit; the ring follows (a raised limit re-rings + wakes); one audit
--          entry (verb set_group_limit, or clear_group_limit).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
if ARGV[2] == '' then
  redis.call('HDEL', B .. GLIMIT, ARGV[1])
else
  redis.call('HSET', B .. GLIMIT, ARGV[1], ARGV[2])
end
redis.call('SADD', B .. GROUPS, ARGV[1])
ring_sync(ARGV[1])
if ARGV[2] == '' then
  audit('clear_group_limit', cjson.encode({group = ARGV[1]}), 'ok', 1, ARGV[3], ARGV[4])
else
  audit('set_group_limit', cjson.encode({group = ARGV[1], limit = tonumber(ARGV[2])}), 'ok', 1,
    ARGV[3], ARGV[4])
end
return 1
