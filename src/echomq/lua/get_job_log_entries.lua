#!lua flags=no-writes
-- get_job_log_entries: a job's log lines with the server times they were written.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  tail: the newest N lines only (optional; 0 or absent = every line)
-- Reply:   {lines, times, count}: the lines oldest first (row:logs), the times in ms
--          (row:logtimes, the same range), and how many lines the job has in all.
--          The two lists are aligned at their newest end: lines written before the
--          times were kept have none, so `times` may be shorter than `lines` (the
--          caller pads it at the front). One script, so both are read at one instant.
-- Refusals: -1 no row (gone). Read-only.
local B = KEYS[1]
--! include keys
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local lk, tk = KEYS[2] .. LOGS, KEYS[2] .. LOGTIMES
local tail = tonumber(ARGV[1] or '0') or 0
local from = 0
if tail > 0 then from = -tail end
return {
  redis.call('LRANGE', lk, from, -1),
  redis.call('LRANGE', tk, from, -1),
  redis.call('LLEN', lk),
}
