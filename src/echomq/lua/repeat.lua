-- repeat: register (or update) a repeatable: its cadence and the job it makes.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name;  ARGV[2] kind 'every' or 'cron';  ARGV[3] every_ms or the cron text
-- ARGV[4]  first run: for 'every' the delay from now in ms (server clock); for 'cron'
--          the absolute ms of the first slot, computed by the caller from server TIME
-- ARGV[5]  payload (serialized);  ARGV[6] job name;  ARGV[7] group;  ARGV[8] priority
-- ARGV[9]  max_attempts;  ARGV[10] backoff spec   ('' = absent for 6..10)
-- ARGV[11] actor (optional; '' = none), written to the audit journal
-- ARGV[12] request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   the next run in ms. A record that already has this same cadence keeps its
--          next run and counters (re-registering at every worker start fires nothing
--          early), and stays paused if it was (pause_repeat); a new or changed cadence
--          is scheduled at the first run, unpaused.
-- Refusals: none (the caller gates the name and the cadence).
-- Writes:  repeat:<name> hash replaced (count/last kept), ZADD repeat; event
--          'repeat_added'; one audit entry (args: name, kind, spec).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local name, kind, spec = ARGV[1], ARGV[2], ARGV[3]
local rk = B .. REPEAT_RECORD .. name
local old = redis.call('HMGET', rk, 'kind', 'spec', 'count', 'last', 'paused')
local next_run = redis.call('ZSCORE', B .. REPEAT, name)
local same = old[1] == kind and old[2] == spec and next_run
if not same then
  if kind == 'every' then
    next_run = now_ms() + tonumber(ARGV[4])
  else
    next_run = tonumber(ARGV[4])
  end
end
next_run = tonumber(next_run)
redis.call('DEL', rk)
local f = {'kind', kind, 'spec', spec, 'payload', ARGV[5], 'count', old[3] or '0'}
if old[4] then f[#f + 1] = 'last'; f[#f + 1] = old[4] end
if same and old[5] then f[#f + 1] = 'paused'; f[#f + 1] = old[5] end
local opt = {'job_name', 'group', 'priority', 'max_attempts', 'backoff'}
for i, k in ipairs(opt) do
  if ARGV[5 + i] ~= '' then f[#f + 1] = k; f[#f + 1] = ARGV[5 + i] end
end
redis.call('HSET', rk, unpack(f))
redis.call('ZADD', B .. REPEAT, next_run, name)
emit(cjson.encode({event = 'repeat_added', name = name, next = next_run}))
audit('repeat', cjson.encode({name = name, kind = kind, spec = spec}), 'ok', 1, ARGV[11], ARGV[12])
return next_run
