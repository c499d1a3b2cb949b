-- resume_repeat: let a paused repeatable make jobs again, from its next slot after now
-- (the slots it missed while paused are skipped, as fire_due skips missed slots).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name;  ARGV[2] for 'cron' the first slot after now, computed by the caller
--          from the server's TIME ('' for 'every': here, the first slot of the cadence
--          at or after now, counted from the run it was paused before)
-- ARGV[3]  actor (optional; '' = none), written to the audit journal
-- Reply:   the next run in ms; 0 no such repeatable, or not paused (nothing written).
-- Refusals: none.
-- Writes:  ZADD repeat XX next, HDEL repeat:<name> paused; event 'repeat_resumed';
--          one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local name = ARGV[1]
local rk = B .. REPEAT_RECORD .. name
local r = redis.call('HMGET', rk, 'kind', 'spec', 'paused')
if not r[3] or not redis.call('ZSCORE', B .. REPEAT, name) then return 0 end
local next_run
if r[1] == 'every' then
  local was, every, now = tonumber(r[3]), tonumber(r[2]), now_ms()
  next_run = was
  if was < now then next_run = was + every * math.ceil((now - was) / every) end
else
  next_run = tonumber(ARGV[2])
  if not next_run then return redis.error_reply('EMQARG the next cron slot is required') end
end
redis.call('ZADD', B .. REPEAT, 'XX', next_run, name)
redis.call('HDEL', rk, 'paused')
emit(cjson.encode({event = 'repeat_resumed', name = name, next = next_run}))
audit('resume_repeat', cjson.encode({name = name}), 'ok', 1, ARGV[3])
return next_run
