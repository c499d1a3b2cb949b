#!lua flags=allow-oom
-- set_group_rate: set (or clear) one lane's rate limit: at most max_jobs claims of the
-- group start in any window of per_ms ms (its own; it wins over the queue's default).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] max_jobs ('' = clear);  ARGV[3] per_ms ('' when clearing)
-- ARGV[4]  actor (optional; '' = none), written to the audit journal
-- ARGV[5]  request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   1
-- Refusals: none (the client gates the values).
-- Writes:  HSET/HDEL grate; clearing deletes the lane's start log gs:<group>; the lane
--          leaves gwait (the next claim reads its window again and holds it anew if
--          it is full), meta `limits` (the claim's flag) is set again from what is
--          there (lib/limits limits_flag), and the ring follows (re-ringed with a
--          wake token when it can be served); one audit entry (set_group_rate_limit
--          or clear_group_rate_limit).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include limits
--! include audit
local g = ARGV[1]
if ARGV[2] == '' then
  redis.call('HDEL', B .. GRATE, g)
  redis.call('DEL', B .. GSTARTS .. g)
else
  redis.call('HSET', B .. GRATE, g, ARGV[2] .. SEP .. ARGV[3])
  redis.call('SADD', B .. GROUPS, g)
end
redis.call('ZREM', B .. GWAIT, g)
limits_flag()
ring_sync(g)
if ARGV[2] == '' then
  audit('clear_group_rate_limit', cjson.encode({group = g}), 'ok', 1, ARGV[4], ARGV[5])
else
  audit('set_group_rate_limit', cjson.encode({group = g, max_jobs = tonumber(ARGV[2]),
    per_ms = tonumber(ARGV[3])}), 'ok', 1, ARGV[4], ARGV[5])
end
return 1
