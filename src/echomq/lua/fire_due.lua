-- fire_due: make one occurrence of a due repeatable, once per slot.
-- The registry score is compared and set here (compare-and-set), so several workers
-- firing the same slot make one job; missed slots are skipped, never replayed.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  name;  ARGV[2] the slot the caller saw (the registry score)
-- ARGV[3]  the next slot for 'cron' (computed by the caller, after now); '' for
--          'every' (here: the first slot of the cadence after now)
-- ARGV[4]  the new job's id
-- Reply:   the new job id; 0 when the slot is no longer the registry's (fired by
--          someone else, re-registered, cancelled) or not due yet: nothing written.
-- Refusals: none as errors (0, checked before any write).
-- Writes:  the job row (state pending, attempts 0, payload, seq, name, group, priority,
--          max_attempts, backoff, repeat), INCRBY seq 1 (a fresh place: each
--          occurrence is a new arrival), pending|lane at its run_score (+ groups,
--          ring), one wake token,
--          ZADD repeat next, record count/last; event 'enqueued' (with repeat, slot).
local B = KEYS[1]
--! include keys
--! include common
--! include series
local name, slot, id = ARGV[1], tonumber(ARGV[2]), ARGV[4]
local rk = B .. REPEAT_RECORD .. name
local score = redis.call('ZSCORE', B .. REPEAT, name)
local now = now_ms()
if not score or tonumber(score) ~= slot or slot > now then return 0 end
local r = redis.call('HMGET', rk, 'kind', 'spec', 'payload', 'job_name', 'group',
  'priority', 'max_attempts', 'backoff')
if not r[1] then return 0 end
local next_run
if r[1] == 'every' then
  local every = tonumber(r[2])
  next_run = slot + every * (math.floor((now - slot) / every) + 1)
else
  next_run = tonumber(ARGV[3])
  if not next_run or next_run <= slot then return 0 end
end
local jk = B .. JOB .. id
-- each occurrence is a new arrival: a fresh place in the enqueue sequence
local seq = seq_at(take_seq(1), 0)
local f = {'state', 'pending', 'attempts', 0, 'payload', r[3] or '', 'seq', seq,
  'name', r[4] or name, 'repeat', name}
local g = r[5]
if g then f[#f + 1] = 'group'; f[#f + 1] = g end
local score = run_score(r[6], seq)
if r[6] then f[#f + 1] = 'priority'; f[#f + 1] = r[6] end
if r[7] then f[#f + 1] = 'max_attempts'; f[#f + 1] = r[7] end
if r[8] then f[#f + 1] = 'backoff'; f[#f + 1] = r[8] end
redis.call('HSET', jk, unpack(f))
if g then
  redis.call('ZADD', lane_key(g), score, id)
  redis.call('ZADD', B .. GINDEX, score, id)
  redis.call('SADD', B .. GROUPS, g)
  -- quiet: the one wake token below covers this job
  ring_sync(g, true)
else
  redis.call('ZADD', B .. PENDING, score, id)
end
push_wake(1)
redis.call('ZADD', B .. REPEAT, 'XX', next_run, name)
redis.call('HINCRBY', rk, 'count', 1)
redis.call('HSET', rk, 'last', slot)
emit(cjson.encode({event = 'enqueued', job = id, ['repeat'] = name, slot = slot}))
return id
