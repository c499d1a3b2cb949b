#!lua flags=allow-oom
-- pause_group: hold one group back; its lane keeps its backlog. Idempotent.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- ARGV[3]  request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   1
-- Refusals: none.
-- Writes:  SADD gpaused, SADD groups (so groups() lists a group paused before its
--          first job), the group leaves the ring; event 'group_paused'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
redis.call('SADD', B .. GPAUSED, ARGV[1])
redis.call('SADD', B .. GROUPS, ARGV[1])
ring_sync(ARGV[1])
emit(cjson.encode({event = 'group_paused', group = ARGV[1]}))
audit('pause_group', cjson.encode({group = ARGV[1]}), 'ok', 1, ARGV[2], ARGV[3])
return 1
