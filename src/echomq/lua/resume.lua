-- resume: open the claim gate again; the next claim serves the head of pending.
-- Idempotent: resuming a running queue changes nothing.
-- KEYS[1]  the queue base emq:{q}: (meta derived from it)
-- ARGV     none
-- Reply:   1
-- Refusals: none.
-- Writes:  HDEL meta paused; only when the gate was closed: HDEL meta sweep (an
--          interrupted obliterate's scan cursor: a later one must start a fresh pass),
--          wake tokens for the ready work (flat pending plus the groups on the ring,
--          capped) so idle workers come back, and event 'resumed'.
local B = KEYS[1]
--! include common
local meta = B .. 'meta'
if redis.call('HDEL', meta, 'paused') == 1 then
  redis.call('HDEL', meta, 'sweep')
  push_wake(redis.call('ZCARD', B .. 'pending') + redis.call('LLEN', B .. 'ring'))
  emit('{"event":"resumed"}')
end
return 1
