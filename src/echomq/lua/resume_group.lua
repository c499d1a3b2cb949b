#!lua flags=allow-oom
-- resume_group: serve a paused group again. Idempotent.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- ARGV[3]  request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   1
-- Refusals: none.
-- Writes:  SREM gpaused, the group rejoins the ring (+ wake) when it can be served;
--          event 'group_resumed'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
redis.call('SREM', B .. GPAUSED, ARGV[1])
ring_sync(ARGV[1])
emit(cjson.encode({event = 'group_resumed', group = ARGV[1]}))
audit('resume_group', cjson.encode({group = ARGV[1]}), 'ok', 1, ARGV[2], ARGV[3])
return 1
