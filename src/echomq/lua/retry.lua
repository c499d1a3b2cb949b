#!lua flags=allow-oom
-- retry: record a failure of an active job; schedule it again or dead-letter it.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token;  ARGV[3] error text;  ARGV[4] delay_ms
-- ARGV[5]  max_attempts override ('' = the row's, else ARGV[6]);  ARGV[6] default max
-- Reply:   'scheduled' (parked at now + delay_ms) or 'dead' (failures reached max);
--          'dead_relay': dead, and as a flow child its ending was written to this
--          queue's outbox (the parent is in another queue: relay now)
-- Refusals: -1 no row (gone) or a kept completed row; EMQSTALE not active under this
--          token.
-- Writes:  failures+1, last_error, ZREM active, lane slot back (+ ring), lock deleted,
--          schedule or dead (+ metrics:failed and the history series' dead count, wait
--          and run, lib/series count_metric; a grouped job's lane in the same key's
--          lanes' table, + lanenames when it takes a slot; its dedup key released), a wake token
--          under a concurrency cap (meta `concurrency`); event 'retrying' or 'dead'.
--          A kept row (field `keep`) also appends {attempt, time, error} to its capped
--          error history job:<id>:errors (newest 20), and gets died_at when it dies.
--          A job going dead trims `dead` by the queue's dead retention read from meta
--          (at most 4 by count and 4 by age: rows, logs, error histories).
--          A flow child (field `parent`) going dead ends as `failed` (lib/flow
--          flow_ended): its parent resolved here by its policy, or an outbox entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include history
local id, token, err = ARGV[1], ARGV[2], ARGV[3]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group', 'max_attempts', 'keep', 'parent', 'started_at',
  'last_started_at', 'enqueued_at')
if not f then return refusal end
local maxa = tonumber(ARGV[5]) or tonumber(f[4]) or tonumber(ARGV[6])
local now = now_ms()
local failures = redis.call('HINCRBY', jk, 'failures', 1)
redis.call('ZREM', B .. ACTIVE, id)
redis.call('DEL', jk .. LOCK)
if f[3] then give_back(f[3]) end
cap_freed(1)
if f[5] then record_error(jk, token, now, err) end
if failures >= maxa then
  if f[5] then
    redis.call('HSET', jk, 'state', 'dead', 'last_error', err, 'died_at', now)
  else
    redis.call('HSET', jk, 'state', 'dead', 'last_error', err)
  end
  redis.call('ZADD', B .. DEAD, now, id)
  -- death is an ending: the dedup key goes (lib/common release_dedup)
  local d = redis.call('HGET', jk, 'dedup')
  if d then release_dedup(id, d) end
  -- the queue's dead retention (every dead job, kept or not), read from meta
  local r = redis.call('HMGET', B .. META, 'keep_dead', 'keep_dead_ms')
  local count, age = tonumber(r[1]), tonumber(r[2])
  if count or age then trim_settled(B .. DEAD, count, age, false, now, TRIM_STEP) end
  local wait, run = job_times(id, f[7], f[8], f[9], now)
  count_metric(B .. METRICS_FAILED, 1, now, wait, run, f[3], id)
  emit(cjson.encode({event = 'dead', job = id, error = err, failures = failures}))
  -- a flow child's death is its ending: outcome failed, its error named
  if f[6] then
--! include flow
    local on_fail = redis.call('HGET', jk, 'on_fail')
    if flow_ended(id, jk, f[6], on_fail, 'failed', err) then return 'dead_relay' end
  end
  return 'dead'
end
local due = now + (tonumber(ARGV[4]) or 0)
redis.call('HSET', jk, 'state', 'scheduled', 'last_error', err)
redis.call('ZADD', B .. SCHEDULE, due, id)
emit(cjson.encode({event = 'retrying', job = id, error = err, failures = failures, due = due}))
return 'scheduled'
