-- pause: close the claim gate of the whole queue. A field, not a move on any set, so
-- the backlog stays byte-for-byte as it was; idempotent.
-- KEYS[1]  the queue's meta hash emq:{q}:meta;  KEYS[2] the queue base emq:{q}:
-- ARGV     none
-- Reply:   1
-- Refusals: none.
-- Writes:  HSETNX meta paused 1 (an already paused queue is left exactly as it is);
--          event 'paused' only when the gate was open.
if redis.call('HSETNX', KEYS[1], 'paused', '1') == 1 then
  redis.call('PUBLISH', KEYS[2] .. 'events', '{"event":"paused"}')
end
return 1
