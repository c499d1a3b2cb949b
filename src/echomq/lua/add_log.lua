-- add_log: append a line to a job's log list, with the server time it was written,
-- optionally keeping only the newest.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the line;  ARGV[3] keep (0 = keep every line)
-- Reply:   the number of lines kept
-- Refusals: -1 no row (gone): nothing written.
-- Writes:  RPUSH row:logs (the line) and RPUSH row:logtimes (the server time in ms, from
--          TIME); with keep > 0, LTRIM both to their last `keep` entries. The two lists
--          are aligned at their newest end: lines appended before the times existed
--          have no time (the times list is shorter), so a trim keeps them aligned.
local B = KEYS[1]
--! include keys
--! include common
--! include series
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local lk, tk = KEYS[2] .. LOGS, KEYS[2] .. LOGTIMES
local now = now_ms()
local n = redis.call('RPUSH', lk, ARGV[2])
redis.call('RPUSH', tk, now)
local keep = tonumber(ARGV[3])
if keep > 0 and n > keep then
  redis.call('LTRIM', lk, -keep, -1)
  redis.call('LTRIM', tk, -keep, -1)
  n = keep
end
return n
