#!lua flags=allow-oom
-- resume: open the claim gate again; the next claim serves the head of pending.
-- Idempotent: resuming a running queue changes nothing.
-- KEYS[1]  the queue base emq:{q}: (meta derived from it)
-- ARGV[1]  actor (optional; '' = none), written to the audit journal
-- Reply:   1
-- Refusals: none.
-- Writes:  HDEL meta paused; only when the gate was closed: HDEL meta sweep and lanes
--          (an interrupted obliterate's cursors: a later one must start a fresh pass),
--          wake tokens for the ready work (flat pending plus the groups on the ring,
--          capped) so idle workers come back, event 'resumed' and one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local meta = B .. META
local changed = redis.call('HDEL', meta, 'paused') == 1
if changed then
  redis.call('HDEL', meta, 'sweep', 'lanes')
  push_wake(redis.call('ZCARD', B .. PENDING) + redis.call('LLEN', B .. RING))
  emit('{"event":"resumed"}')
  audit('resume', '{}', 'ok', 1, ARGV[1])
end
return 1
