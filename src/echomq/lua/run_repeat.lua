-- run_repeat: make a repeatable due now (its caller then fires it with fire_due, so
-- the job is made by the one script that makes repeat jobs, once per slot).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   {slot, kind, spec}: the slot now set (server ms) and the cadence, for the
--          caller to compute a cron's next slot; {} when there is no such repeatable
--          or it is paused (nothing written: resume it first).
-- Refusals: none.
-- Writes:  ZADD repeat XX now; event 'repeat_due'; one audit entry. The cadence goes on
--          from this run: 'every' counts from now, 'cron' takes its next slot.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local name = ARGV[1]
local rk = B .. REPEAT_RECORD .. name
local r = redis.call('HMGET', rk, 'kind', 'spec', 'paused')
if not r[1] or r[3] or not redis.call('ZSCORE', B .. REPEAT, name) then return {} end
local now = now_ms()
redis.call('ZADD', B .. REPEAT, 'XX', now, name)
emit(cjson.encode({event = 'repeat_due', name = name, slot = now}))
audit('run_repeat', cjson.encode({name = name}), 'ok', 1, ARGV[2])
return {now, r[1], r[2]}
