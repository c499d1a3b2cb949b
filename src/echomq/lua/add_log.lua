-- add_log: append a line to a job's log list, optionally keeping only the newest.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the line;  ARGV[3] keep (0 = keep every line)
-- Reply:   the number of lines kept
-- Refusals: -1 no row (gone): nothing written.
-- Writes:  RPUSH row:logs, LTRIM to the last `keep` lines when keep > 0.
local B = KEYS[1]
--! include keys
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local lk = KEYS[2] .. LOGS
local n = redis.call('RPUSH', lk, ARGV[2])
local keep = tonumber(ARGV[3])
if keep > 0 and n > keep then
  redis.call('LTRIM', lk, -keep, -1)
  n = keep
end
return n
