#!lua flags=allow-oom
-- lock_job: mark a claimed job as held by its worker (what remove_job honours).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token;  ARGV[3] ttl_ms (about two leases)
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTALE the job is not active under this token.
--          Both before any write.
-- Writes:  SET row:lock token PX ttl_ms (a re-lock by the holder extends it).
local B = KEYS[1]
--! include keys
--! include common
--! include series
local f, refusal = fenced(KEYS[2], ARGV[2])
if not f then return refusal end
redis.call('SET', KEYS[2] .. LOCK, ARGV[2], 'PX', tonumber(ARGV[3]))
return 1
