-- unlock_job: clear a job's worker lock, only when it still carries this token.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token
-- Reply:   1 the lock was released; 0 no lock under this token (nothing changed)
-- Refusals: none.
-- Writes:  DEL row:lock.
local lk = KEYS[2] .. ':lock'
if redis.call('GET', lk) == ARGV[2] then
  redis.call('DEL', lk)
  return 1
end
return 0
