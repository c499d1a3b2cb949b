-- resume: open the claim gate again; claims serve the head of pending. Idempotent.
-- KEYS[1]  the queue's meta hash emq:{q}:meta;  KEYS[2] the queue base emq:{q}:
-- Reply:   1
-- Refusals: none.
-- Writes:  HDEL meta paused, a wake token for idle workers; event 'resumed'.
local B = KEYS[2]
--! include common
redis.call('HDEL', KEYS[1], 'paused')
push_wake(1)
emit('{"event":"resumed"}')
return 1
