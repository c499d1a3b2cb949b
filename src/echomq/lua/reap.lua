#!lua flags=allow-oom
-- reap: return jobs whose lease expired to pending or their lane (bounded).
-- The attempts token is kept, so the old holder's token is stale after the next claim.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  budget
-- Reply:   the number returned (== budget means call again)
-- Refusals: none.
-- Writes:  ZREM active, lock deleted, lane slot back (give_back), state pending, ZADD pending|lane
--          (at its run_score: the place its enqueue gave it),
--          ring, wake; event 'stalled'.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local ids = redis.call('ZRANGEBYSCORE', B .. ACTIVE, '-inf', now_ms(),
  'LIMIT', 0, tonumber(ARGV[1]))
if #ids == 0 then return 0 end
zrem_all(B .. ACTIVE, ids)
for _, id in ipairs(ids) do
  local jk = B .. JOB .. id
  local f = redis.call('HMGET', jk, 'group', 'priority', 'seq')
  redis.call('DEL', jk .. LOCK)
  if f[1] then give_back(f[1], true) end
  make_ready(id, jk, f[1], run_score(f[2], f[3]))
  emit(ev('stalled', id))
end
push_wake(#ids)
return #ids
