-- cancel_job: ask the worker running an active job to stop it (cooperative). The
-- worker sees the request on its next beat (worker_beat answers it), its handler's
-- `job.cancelled` turns true, and a handler that then raises sends the job to dead
-- with the error "JobCancelled: cancelled by an operator".
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   1 the request was written; 0 it was already made for this run (nothing
--          written, nothing journaled).
-- Refusals: -1 no row (gone); EMQSTATE not active (pending, scheduled or dead: nothing
--          runs to cancel).
-- Writes:  HSET row cancel <attempts> (the current run's token, so a later run of the
--          job is not cancelled by it); event 'cancelling'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local id, jk = ARGV[1], KEYS[2]
local f = redis.call('HMGET', jk, 'state', 'attempts', 'cancel')
if not f[1] then return -1 end
if f[1] ~= 'active' then return redis.error_reply('EMQSTATE not active') end
if f[3] == f[2] then return 0 end
redis.call('HSET', jk, 'cancel', f[2])
emit(cjson.encode({event = 'cancelling', job = id, attempt = tonumber(f[2])}))
audit('cancel_job', cjson.encode({job = id}), 'ok', 1, ARGV[2])
return 1
