#!lua flags=allow-oom
-- release: hand an active job back to the ready backlog (a worker shutting down).
-- The job is not failed: attempts (the token), failures and stalled are kept, so the
-- next claim serves it with attempts + 1 and the released holder's token is stale.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token (the attempts value the claim handed out)
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTALE the job is not active under this token.
--          Both before any write.
-- Writes:  ZREM active, lock deleted, a grouped job's lane slot given back (once),
--          state pending, ZADD pending|lane at its run_score (its old place)
--          (+ ring), one wake token;
--          event 'released'.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local id, token = ARGV[1], ARGV[2]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group', 'priority', 'seq')
if not f then return refusal end
redis.call('ZREM', B .. ACTIVE, id)
redis.call('DEL', jk .. LOCK)
if f[3] then give_back(f[3], true) end
make_ready(id, jk, f[3], run_score(f[4], f[5]))
push_wake(1)
emit('{"event":"released","job":"' .. id .. '","attempt":' .. token .. '}')
return 1
