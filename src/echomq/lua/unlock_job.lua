#!lua flags=allow-oom
-- unlock_job: clear a job's worker lock, only when it still carries this token.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token
-- Reply:   1 the lock was released; 0 no lock was held (it expired or was cleared)
-- Refusals: -1 no row (gone); EMQSTALE the lock carries another token. Both before
--          any write.
-- Writes:  DEL row:lock.
local B = KEYS[1]
--! include keys
local lk = KEYS[2] .. LOCK
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local held = redis.call('GET', lk)
if not held then return 0 end
if held ~= ARGV[2] then
  return redis.error_reply('EMQSTALE token ' .. ARGV[2] .. ' does not hold the lock')
end
redis.call('DEL', lk)
return 1
