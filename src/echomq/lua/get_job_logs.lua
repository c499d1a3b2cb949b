#!lua flags=no-writes
-- get_job_logs: a job's log lines in append order.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV     none
-- Reply:   an array of lines ({} when none)
-- Refusals: -1 no row (gone). Read-only.
local B = KEYS[1]
--! include keys
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
return redis.call('LRANGE', KEYS[2] .. LOGS, 0, -1)
