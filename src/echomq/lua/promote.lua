#!lua flags=allow-oom
-- promote: move due scheduled jobs to pending or their lane (bounded).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  budget: at most this many jobs per call
-- Reply:   the number moved (== budget means call again)
-- Refusals: none.
-- Writes:  ZREM schedule, state pending, ZADD pending|lane (score = run_score:
--          priority, then the seq its enqueue gave it),
--          ring for lanes, wake; event 'promoted'.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local ids = redis.call('ZRANGEBYSCORE', B .. SCHEDULE, '-inf', now_ms(),
  'LIMIT', 0, tonumber(ARGV[1]))
if #ids == 0 then return 0 end
zrem_all(B .. SCHEDULE, ids)
for _, id in ipairs(ids) do
  local jk = B .. JOB .. id
  local f = redis.call('HMGET', jk, 'group', 'priority', 'seq')
  make_ready(id, jk, f[1], run_score(f[2], f[3]))
  emit(ev('promoted', id))
end
push_wake(#ids)
return #ids
