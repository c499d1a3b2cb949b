#!lua flags=allow-oom
-- reprocess_job: move one dead job back to the ready backlog (the seed's @reprocess2).
-- KEYS[1]  the row emq:{q}:job:<id>;  KEYS[2] dead;  KEYS[3] pending;  KEYS[4] the base
-- ARGV[1]  job id;  ARGV[2] actor (optional: the seed's line without it still works),
--          written to the audit journal
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTATE not dead (the ZREM on dead is the check, so
--          nothing is written before it).
-- Writes:  ZREM dead, HDEL last_error, state pending; attempts/failures/stalled kept;
--          INCRBY seq 1 and the row's seq: a fresh place, the back of its
--          priority as a new arrival; a flat job to pending at its run_score
--          (priority, then seq); a grouped one to its lane at the same score,
--          `groups`, and the ring when its lane can be served; one wake token;
--          event 'reprocessed'; one audit entry. The pause is not read here: on a paused queue the job
--          waits in pending until a claim after resume.
local B = KEYS[4]
--! include keys
--! include common
--! include series
--! include audit
local jk, id = KEYS[1], ARGV[1]
if redis.call('EXISTS', jk) == 0 then return -1 end
if redis.call('ZREM', KEYS[2], id) ~= 1 then
  return redis.error_reply('EMQSTATE not dead')
end
redis.call('HDEL', jk, 'last_error')
-- a fresh place in the enqueue sequence: back of its priority, as a new arrival
local seq = seq_at(take_seq(1), 0)
redis.call('HSET', jk, 'state', 'pending', 'seq', seq)
local r = redis.call('HMGET', jk, 'group', 'priority')
local g, score = r[1], run_score(r[2], seq)
if g then
  redis.call('ZADD', lane_key(g), score, id)
  redis.call('ZADD', B .. GINDEX, score, id)
  redis.call('SADD', B .. GROUPS, g)
  -- quiet: the one wake token below covers this job
  ring_sync(g, true)
else
  redis.call('ZADD', KEYS[3], score, id)
end
push_wake(1)
emit(ev('reprocessed', id))
audit('reprocess_job', cjson.encode({job = id}), 'ok', 1, ARGV[2])
return 1
