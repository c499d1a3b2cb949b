-- worker_leave: a stopping worker takes itself out of the queue's registry (a crashed
-- one drops out when its record's ttl passes).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  worker id (hex)
-- Reply:   1 when the worker was registered, else 0.
-- Refusals: none.
-- Writes:  DEL worker:<wid>, ZREM workers wid.
local B = KEYS[1]
--! include keys
local gone = redis.call('DEL', B .. WORKER .. ARGV[1])
redis.call('ZREM', B .. WORKERS, ARGV[1])
return gone
