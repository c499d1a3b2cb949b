-- update_data: replace a job's payload, in any state.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the new payload text;  ARGV[3] actor (optional), for the audit
-- ARGV[4]  request id (optional; the same on a re-send), so a re-sent call journals once
-- Reply:   1
-- Refusals: -1 no row (gone): nothing written.
-- Writes:  HSET row payload; event 'updated'; one audit entry (args: job, the payload's
--          size in bytes: the payload itself is not journaled).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
redis.call('HSET', KEYS[2], 'payload', ARGV[2])
emit(ev('updated', ARGV[1]))
audit('update_data', cjson.encode({job = ARGV[1], bytes = #ARGV[2]}), 'ok', 1, ARGV[3], ARGV[4])
return 1
