#!lua flags=allow-oom
-- cancel_repeat: remove a repeatable; jobs it already made are not touched.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   1 removed; 0 no such repeatable (nothing written)
-- Refusals: none.
-- Writes:  ZREM repeat, DEL repeat:<name>; event 'repeat_removed'; one audit entry
--          (none on a miss: nothing changed).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local name = ARGV[1]
if redis.call('ZREM', B .. REPEAT, name) == 0 then return 0 end
redis.call('DEL', B .. REPEAT_RECORD .. name)
emit(cjson.encode({event = 'repeat_removed', name = name}))
audit('cancel_repeat', cjson.encode({name = name}), 'ok', 1, ARGV[2])
return 1
