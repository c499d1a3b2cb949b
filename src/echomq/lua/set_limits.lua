#!lua flags=allow-oom
-- set_limits: set or clear one of the queue's flow control settings (meta fields read
-- by the claim, lib/limits): its rate limit, its concurrency cap, or every lane's
-- default rate limit.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  which: 'rate' | 'concurrency' | 'group_rate'
-- ARGV[2]  max_jobs (rate, group_rate) or the cap (concurrency); '' = clear
-- ARGV[3]  per_ms (rate, group_rate; '' otherwise)
-- ARGV[4]  actor (optional; '' = none), written to the audit journal
-- ARGV[5]  request id (optional; the same on a re-send), so a re-sent call journals once
-- ARGV[6]  rate only: burst, the most starts at once (1 .. max_jobs; lib/limits)
-- Reply:   1
-- Refusals: none (the client gates the values).
-- Writes:  HSET/HDEL meta rate_max rate_ms rate_burst | concurrency | group_rate_max
--          group_rate_ms.
--          Clearing the rate also deletes the start log `rate` and a handler's hold
--          (limited_until). Setting or clearing the cap pushes wake tokens (capped) so
--          workers waiting on a full cap claim again. One audit entry (set_rate_limit,
--          clear_rate_limit, set_concurrency, clear_concurrency, set_group_rate_default
--          or clear_group_rate_default). Then meta `limits`, the claim's flag, set
--          again from what is there (lib/limits limits_flag).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include limits
--! include audit
local which, a, b, actor, rid = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local meta = B .. META
local function rate_args(burst)
  return cjson.encode({max_jobs = tonumber(a), per_ms = tonumber(b), burst = burst})
end
if which == 'rate' then
  if a == '' then
    redis.call('HDEL', meta, 'rate_max', 'rate_ms', 'rate_burst', 'limited_until')
    redis.call('DEL', B .. RATE)
    audit('clear_rate_limit', '{}', 'ok', 1, actor, rid)
  else
    redis.call('HSET', meta, 'rate_max', a, 'rate_ms', b, 'rate_burst', ARGV[6])
    -- the log lives as long as the window it answers for
    redis.call('PEXPIRE', B .. RATE, b)
    audit('set_rate_limit', rate_args(tonumber(ARGV[6])), 'ok', 1, actor, rid)
  end
elseif which == 'concurrency' then
  if a == '' then
    redis.call('HDEL', meta, 'concurrency')
    audit('clear_concurrency', '{}', 'ok', 1, actor, rid)
  else
    redis.call('HSET', meta, 'concurrency', a)
    audit('set_concurrency', cjson.encode({n = tonumber(a)}), 'ok', 1, actor, rid)
  end
  push_wake(WAKE_CAP)
elseif a == '' then
  redis.call('HDEL', meta, 'group_rate_max', 'group_rate_ms')
  audit('clear_group_rate_default', '{}', 'ok', 1, actor, rid)
else
  redis.call('HSET', meta, 'group_rate_max', a, 'group_rate_ms', b)
  audit('set_group_rate_default', rate_args(), 'ok', 1, actor, rid)
end
limits_flag()
return 1
