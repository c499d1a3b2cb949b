-- promote_job: run one scheduled job now (its due time no longer waited for).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTATE not scheduled (the ZREM on schedule is the
--          check, so nothing is written before it).
-- Writes:  ZREM schedule, state pending, ZADD pending|lane (score = run_score:
--          priority, then the seq its enqueue gave it), `groups`
--          and the ring for a lane; one wake token; event 'promoted'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local id, jk = ARGV[1], KEYS[2]
if redis.call('EXISTS', jk) == 0 then return -1 end
if redis.call('ZREM', B .. SCHEDULE, id) ~= 1 then
  return redis.error_reply('EMQSTATE not scheduled')
end
local r = redis.call('HMGET', jk, 'group', 'priority', 'seq')
make_ready(id, jk, r[1], run_score(r[2], r[3]))
push_wake(1)
emit(ev('promoted', id))
audit('promote_job', cjson.encode({job = id}), 'ok', 1, ARGV[2])
return 1
