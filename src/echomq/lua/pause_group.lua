-- pause_group: hold one group back; its lane keeps its backlog. Idempotent.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group
-- Reply:   1
-- Refusals: none.
-- Writes:  SADD gpaused, SADD groups (so groups() lists a group paused before its
--          first job), the group leaves the ring; event 'group_paused'.
local B = KEYS[1]
--! include common
redis.call('SADD', B .. 'gpaused', ARGV[1])
redis.call('SADD', B .. 'groups', ARGV[1])
ring_sync(ARGV[1])
emit(cjson.encode({event = 'group_paused', group = ARGV[1]}))
return 1
