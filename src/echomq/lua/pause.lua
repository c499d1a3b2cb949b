-- pause: close the claim gate of the whole queue. A field, not a move on any set, so
-- the backlog stays byte-for-byte as it was; idempotent.
-- KEYS[1]  the queue base emq:{q}: (meta and events derived from it)
-- ARGV     none
-- Reply:   1
-- Refusals: none.
-- Writes:  HSETNX meta paused 1 (an already paused queue is left exactly as it is);
--          event 'paused' only when the gate was open.
local B = KEYS[1]
if redis.call('HSETNX', B .. 'meta', 'paused', '1') == 1 then
  redis.call('PUBLISH', B .. 'events', '{"event":"paused"}')
end
return 1
