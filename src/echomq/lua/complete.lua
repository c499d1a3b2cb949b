#!lua flags=allow-oom
-- complete: settle an active job as done (token-fenced).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token (the attempts value the claim handed out)
-- ARGV[3]  the handler's result, serialized (optional; kept only on a kept row)
-- Reply:   1
-- Refusals: -1 no row (gone), or the row is a kept completed one; EMQSTALE the job is
--          not active under this token.
-- Writes:  ZREM active, lane slot back (+ ring), row/logs/lock deleted, dedup key
--          released, metrics:completed counted, the id's tombstone in `settled` (expired
--          ones trimmed by one call in about eight, lib/common); event 'completed'. A repeat answers -1.
--          A kept row (field `keep`) whose job or queue keeps completed history stays
--          instead: state completed, finished_at, result (ARGV[3] when sent); lock
--          deleted, dedup key released; ZADD completed (score = now), keepuntil (now +
--          its keep_ms) when it asked for its own; then `completed` is trimmed by the
--          queue's retention read from meta (at most 4 past the count, 4 past the age,
--          and, when this job has its own keep_ms, 4 whose own keep ran out: each row
--          with its logs and error history).
local B = KEYS[1]
--! include keys
--! include common
--! include history
local id, token = ARGV[1], ARGV[2]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group', 'dedup', 'keep')
if not f then return refusal end
redis.call('ZREM', B .. ACTIVE, id)
if f[3] then give_back(f[3]) end
local now = now_ms()
local own, count, age = 0, nil, nil
if f[5] then
  -- a kept row: its own keep_ms, and the queue's completed retention from meta
  own = tonumber(f[5]) or 0
  local r = redis.call('HMGET', B .. META, 'keep_completed', 'keep_completed_ms')
  count, age = tonumber(r[1]), tonumber(r[2])
end
if own > 0 or count or age then
  -- kept: the row stays as history; the dedup key goes as for a deleted row
  local d = f[4]
  if d and redis.call('GET', B .. DEDUP .. d) == id then redis.call('DEL', B .. DEDUP .. d) end
  if ARGV[3] then
    redis.call('HSET', jk, 'state', 'completed', 'finished_at', now, 'result', ARGV[3])
  else
    redis.call('HSET', jk, 'state', 'completed', 'finished_at', now)
  end
  redis.call('ZADD', B .. COMPLETED, now, id)
  if own > 0 then redis.call('ZADD', B .. KEEPUNTIL, now + own, id) end
  -- the lock goes in the trim's one DEL
  trim_settled(B .. COMPLETED, count, age, own > 0, now, TRIM_STEP, {jk .. LOCK})
else
  delete_row(id, jk, f[4])
end
tombstone(id, now)
count_metric(B .. METRICS_COMPLETED, 1, now)
emit(ev('completed', id))
return 1
