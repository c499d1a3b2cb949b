#!lua flags=allow-oom
-- pause: close the claim gate of the whole queue. A field, not a move on any set, so
-- the backlog stays byte-for-byte as it was; idempotent.
-- KEYS[1]  the queue base emq:{q}: (meta and events derived from it)
-- ARGV[1]  actor (optional; '' = none), written to the audit journal
-- Reply:   1
-- Refusals: none.
-- Writes:  HSETNX meta paused 1 (an already paused queue is left exactly as it is);
--          event 'paused' and one audit entry, only when the gate was open.
local B = KEYS[1]
--! include keys
--! include audit
local changed = redis.call('HSETNX', B .. META, 'paused', '1') == 1
if changed then
  redis.call('PUBLISH', B .. EVENTS, '{"event":"paused"}')
  audit('pause', '{}', 'ok', 1, ARGV[1])
end
return 1
