-- pause: close the claim gate of the whole queue. No set moves; idempotent.
-- KEYS[1]  the queue's meta hash emq:{q}:meta;  KEYS[2] the queue base emq:{q}:
-- Reply:   1
-- Refusals: none.
-- Writes:  HSET meta paused 1; event 'paused'.
redis.call('HSET', KEYS[1], 'paused', '1')
redis.call('PUBLISH', KEYS[2] .. 'events', '{"event":"paused"}')
return 1
