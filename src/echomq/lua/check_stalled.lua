#!lua flags=allow-oom
-- check_stalled: like reap, but count each expiry on the row's `stalled` counter and
-- dead-letter a job that has stalled more than max_stalled times (bounded).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  max_stalled;  ARGV[2] budget
-- Reply:   {recovered ids, dead ids}
-- Refusals: none.
-- Writes:  ZREM active, lock deleted, lane slot back, stalled+1, then pending|lane at
--          its run_score (its old place) (+ ring, wake) or dead (+ last_error, metrics:failed and
--          the history series and a grouped job's lane as retry writes them, dedup key
--          released); events 'stalled'/'dead'.
--          A kept row (field `keep`) going dead also gets died_at and the stall in its
--          error history; when any job went dead, `dead` is trimmed by the queue's dead
--          retention read from meta (at most 4 by count and 4 by age).
--          A flow child (field `parent`) going dead ends as `failed` (lib/flow
--          flow_ended): its parent resolved here by its policy, or an outbox entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include history
local maxs = tonumber(ARGV[1])
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', B .. ACTIVE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local back, dead = {}, {}
if #ids == 0 then return {back, dead} end
zrem_all(B .. ACTIVE, ids)
for _, id in ipairs(ids) do
  local jk = B .. JOB .. id
  local f = redis.call('HMGET', jk, 'group', 'priority', 'keep', 'attempts', 'seq', 'parent',
    'started_at', 'last_started_at', 'enqueued_at')
  redis.call('DEL', jk .. LOCK)
  local s = redis.call('HINCRBY', jk, 'stalled', 1)
  -- a job going dead wakes a worker if its slot re-rings the group; one going back
  -- is counted in the wake tokens pushed below
  if f[1] then give_back(f[1], s <= maxs) end
  if s > maxs then
    local err = 'stalled: lease expired ' .. s .. ' times'
    if f[3] then
      redis.call('HSET', jk, 'state', 'dead', 'last_error', err, 'died_at', now)
      record_error(jk, f[4] or '0', now, err)
    else
      redis.call('HSET', jk, 'state', 'dead', 'last_error', err)
    end
    redis.call('ZADD', B .. DEAD, now, id)
    -- death is an ending: the dedup key goes (lib/common release_dedup)
    local d = redis.call('HGET', jk, 'dedup')
    if d then release_dedup(id, d) end
    local wait, run = job_times(id, f[7], f[8], f[9], now)
    count_metric(B .. METRICS_FAILED, 1, now, wait, run, f[1], id)
    emit(cjson.encode({event = 'dead', job = id, error = err}))
    -- a flow child's death is its ending (the worker's beat relays after this call)
    if f[6] then
--! include flow
      flow_ended(id, jk, f[6], redis.call('HGET', jk, 'on_fail'), 'failed', err)
    end
    dead[#dead + 1] = id
  else
    make_ready(id, jk, f[1], run_score(f[2], f[5]))
    emit(ev('stalled', id))
    back[#back + 1] = id
  end
end
if #back > 0 then push_wake(#back) end
if #dead > 0 then
  -- the queue's dead retention (every dead job), read from meta
  local r = redis.call('HMGET', B .. META, 'keep_dead', 'keep_dead_ms')
  local count, age = tonumber(r[1]), tonumber(r[2])
  if count or age then trim_settled(B .. DEAD, count, age, false, now, TRIM_STEP) end
end
return {back, dead}
