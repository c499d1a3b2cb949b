#!lua flags=allow-oom
-- check_stalled: like reap, but count each expiry on the row's `stalled` counter and
-- dead-letter a job that has stalled more than max_stalled times (bounded).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  max_stalled;  ARGV[2] budget
-- Reply:   {recovered ids, dead ids}
-- Refusals: none.
-- Writes:  ZREM active, lock deleted, lane slot back, stalled+1, then pending|lane
--          (+ ring, wake) or dead (+ last_error, metrics:failed); events 'stalled'/'dead'.
local B = KEYS[1]
--! include keys
--! include common
local maxs = tonumber(ARGV[1])
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', B .. ACTIVE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local back, dead = {}, {}
if #ids == 0 then return {back, dead} end
zrem_all(B .. ACTIVE, ids)
for _, id in ipairs(ids) do
  local jk = B .. JOB .. id
  local f = redis.call('HMGET', jk, 'group', 'priority')
  redis.call('DEL', jk .. LOCK)
  local s = redis.call('HINCRBY', jk, 'stalled', 1)
  -- a job going dead wakes a worker if its slot re-rings the group; one going back
  -- is counted in the wake tokens pushed below
  if f[1] then give_back(f[1], s <= maxs) end
  if s > maxs then
    local err = 'stalled: lease expired ' .. s .. ' times'
    redis.call('HSET', jk, 'state', 'dead', 'last_error', err)
    redis.call('ZADD', B .. DEAD, now, id)
    count_metric(B .. METRICS_FAILED, 1, now)
    emit(cjson.encode({event = 'dead', job = id, error = err}))
    dead[#dead + 1] = id
  else
    make_ready(id, jk, f[1], f[2] or 0)
    emit(ev('stalled', id))
    back[#back + 1] = id
  end
end
if #back > 0 then push_wake(#back) end
return {back, dead}
