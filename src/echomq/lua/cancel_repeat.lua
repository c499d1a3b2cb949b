-- cancel_repeat: remove a repeatable; jobs it already made are not touched.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name
-- Reply:   1 removed; 0 no such repeatable (nothing written)
-- Refusals: none.
-- Writes:  ZREM repeat, DEL repeat:<name>; event 'repeat_removed'.
local B = KEYS[1]
--! include common
local name = ARGV[1]
if redis.call('ZREM', B .. 'repeat', name) == 0 then return 0 end
redis.call('DEL', B .. 'repeat:' .. name)
emit(cjson.encode({event = 'repeat_removed', name = name}))
return 1
