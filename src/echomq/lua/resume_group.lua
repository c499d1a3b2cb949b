-- resume_group: serve a paused group again. Idempotent.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group
-- Reply:   1
-- Refusals: none.
-- Writes:  SREM gpaused, the group rejoins the ring (+ wake) when it can be served;
--          event 'group_resumed'.
local B = KEYS[1]
--! include common
redis.call('SREM', B .. 'gpaused', ARGV[1])
ring_sync(ARGV[1])
emit(cjson.encode({event = 'group_resumed', group = ARGV[1]}))
return 1
