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
-- Reply:   1
-- Refusals: none (the client gates the values).
-- Writes:  HSET/HDEL meta rate_max rate_ms | concurrency | group_rate_max group_rate_ms.
--          Clearing the rate also deletes the start log `rate` and a handler's hold
--          (limited_until). Setting or clearing the cap pushes wake tokens (capped) so
--          workers waiting on a full cap claim again. One audit entry (set_rate_limit,
--          clear_rate_limit, set_concurrency, clear_concurrency, set_group_rate_default
--          or clear_group_rate_default).
local B = KEYS[1]
--! include keys
--! include common
--! include audit
local which, a, b = ARGV[1], ARGV[2], ARGV[3]
local meta = B .. META
local verb, args
if which == 'rate' then
  if a == '' then
    redis.call('HDEL', meta, 'rate_max', 'rate_ms', 'limited_until')
    redis.call('DEL', B .. RATE)
    verb, args = 'clear_rate_limit', '{}'
  else
    redis.call('HSET', meta, 'rate_max', a, 'rate_ms', b)
    -- the log lives as long as the window it answers for
    redis.call('PEXPIRE', B .. RATE, b)
    verb = 'set_rate_limit'
    args = cjson.encode({max_jobs = tonumber(a), per_ms = tonumber(b)})
  end
elseif which == 'concurrency' then
  if a == '' then
    redis.call('HDEL', meta, 'concurrency')
    verb, args = 'clear_concurrency', '{}'
  else
    redis.call('HSET', meta, 'concurrency', a)
    verb, args = 'set_concurrency', cjson.encode({n = tonumber(a)})
  end
  push_wake(WAKE_CAP)
else
  if a == '' then
    redis.call('HDEL', meta, 'group_rate_max', 'group_rate_ms')
    verb, args = 'clear_group_rate_default', '{}'
  else
    redis.call('HSET', meta, 'group_rate_max', a, 'group_rate_ms', b)
    verb = 'set_group_rate_default'
    args = cjson.encode({max_jobs = tonumber(a), per_ms = tonumber(b)})
  end
end
audit(verb, args, 'ok', 1, ARGV[4], ARGV[5])
return 1
