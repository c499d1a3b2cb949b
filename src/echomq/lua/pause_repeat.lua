-- pause_repeat: stop a repeatable making jobs, keeping its record and its next run.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   1 paused; 0 no such repeatable, or paused already (nothing written).
-- Refusals: none.
-- Writes:  HSET repeat:<name> paused <its next run>, ZADD repeat XX <far future> (no
--          slot is ever due while paused); event 'repeat_paused'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
-- a score no slot reaches (2^53 - 1 ms: past the year 285,000)
local NEVER = 9007199254740991
local name = ARGV[1]
local rk = B .. REPEAT_RECORD .. name
local score = redis.call('ZSCORE', B .. REPEAT, name)
if not score or redis.call('HEXISTS', rk, 'paused') == 1 then return 0 end
redis.call('HSET', rk, 'paused', score)
redis.call('ZADD', B .. REPEAT, 'XX', NEVER, name)
emit(cjson.encode({event = 'repeat_paused', name = name}))
audit('pause_repeat', cjson.encode({name = name}), 'ok', 1, ARGV[2])
return 1
