-- lock_job: mark a claimed job as held by its worker (what remove_job honours).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token;  ARGV[3] ttl_ms (about two leases)
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTALE the job is not active under this token.
--          Both before any write.
-- Writes:  SET row:lock token PX ttl_ms (a re-lock by the holder extends it).
local f = redis.call('HMGET', KEYS[2], 'state', 'attempts')
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
if f[1] ~= 'active' or f[2] ~= ARGV[2] then
  return redis.error_reply('EMQSTALE token ' .. ARGV[2] .. ' is not current')
end
redis.call('SET', KEYS[2] .. ':lock', ARGV[2], 'PX', tonumber(ARGV[3]))
return 1
