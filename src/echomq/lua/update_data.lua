-- update_data: replace a job's payload, in any state.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the new payload text
-- Reply:   1
-- Refusals: -1 no row (gone): nothing written.
-- Writes:  HSET row payload; event 'updated'.
local B = KEYS[1]
--! include common
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
redis.call('HSET', KEYS[2], 'payload', ARGV[2])
emit(ev('updated', ARGV[1]))
return 1
