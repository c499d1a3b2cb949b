#!lua flags=allow-oom
-- complete: settle active jobs as done (token-fenced, each job on its own).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id> (the one-job form)
-- ARGV     with KEYS[2]: ARGV[1] job id; ARGV[2] token (the attempts value the claim
--          handed out); ARGV[3] the handler's result, serialized (optional; kept only
--          on a kept row).
--          Without KEYS[2] (the batch form): triples id, token, result ('' = none),
--          at most 500 a call (the client's chunk); each row is B .. 'job:' .. id.
-- Reply:   the one-job form: 1, or 2 when the job was a flow child whose ending was
--          written to this queue's outbox (its parent is in another queue: relay now).
--          The batch form: a flat array of (id, reason) for each
--          job NOT completed, reason 'gone' (no row, a kept completed row, or an id
--          listed twice: gone the second time) or 'stale' (not active under that
--          token); empty when every job was completed; then the pair ('', 'relay')
--          when a flow child's ending was written to the outbox.
-- Refusals: the one-job form: -1 no row (gone), or the row is a kept completed one;
--          EMQSTALE the job is not active under this token. The batch form refuses
--          nothing as an error: each job is fenced on its own, all before any write.
-- Writes:  per job completed: ZREM active (one for the call), lane slot back (+ ring),
--          row/logs/lock/error history deleted (one DEL for the call), dedup key
--          released, its tombstone in `settled` (one ZADD for the call; expired ones
--          trimmed from the oldest end, by time, lib/common; a kept row leaves none: it
--          stays, and its trim leaves one later); metrics:completed counted
--          once by the number completed, with the history series (lib/series
--          count_metric: the minute's slot of hist:<hour>, completed + n and the jobs'
--          summed wait and run read from their rows' started_at, last_started_at and
--          enqueued_at; its expiry on the key's first write); a grouped job's lane in
--          the same key's busiest lanes' table (lib/series lane_ops: one GETRANGE of
--          the slots' hashes, the lane's slot written in the same BITFIELD, a batch once
--          per lane; a lane taking a slot over reads the endeds (BITFIELD_RO) and is
--          ZADDed to lanenames, trimming up to 8 names past their age); under a concurrency cap
--          (meta `concurrency`) one wake token per job; event 'completed' per job, in order. A repeat
--          answers -1 / 'gone'.
--          A flow child (field `parent`): its ending, outcome completed with the
--          result sent (lib/flow flow_ended): its parent resolved in this step when in
--          this queue, else an outbox entry. A flow parent's row (field `children`)
--          deleted with its :deps, :kids, :kidfails.
--          A kept row (field `keep`) whose job or queue keeps completed history stays
--          instead: state completed, finished_at, result (when sent); lock deleted,
--          dedup key released; ZADD completed (score = now), keepuntil (now + its
--          keep_ms) when it asked for its own; then `completed` is trimmed by the
--          queue's retention read from meta (once a call; past the count in batches of
--          up to 32 once the set holds more than the count, at most 4 past the age,
--          and, when this job has its own keep_ms, 4 whose own keep ran out: each row
--          with its logs and error history, and a tombstone for one that completed in
--          the last 60 s; lib/history). A kept flow parent (field `children`) sets
--          `flowkept`, after which the trim deletes a trimmed parent's :deps, :kids and
--          :kidfails too.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include history
-- a kept row stays as history: state completed, finished_at, result (when sent),
-- indexed in `completed` (and `keepuntil` for its own keep_ms); then the completed
-- set is trimmed a bounded amount, the lock going in the trim's one DEL
local function keep_completed(id, jk, result, own, count, age, now, nows)
  if result then
    redis.call('HSET', jk, 'state', 'completed', 'finished_at', nows, 'result', result)
  else
    redis.call('HSET', jk, 'state', 'completed', 'finished_at', nows)
  end
  local done = B .. COMPLETED
  redis.call('ZADD', done, nows, id)
  if own > 0 then redis.call('ZADD', B .. KEEPUNTIL, now + own, id) end
  trim_settled(done, count, age, own > 0, now, TRIM_STEP, jk .. LOCK, nows)
end
if #KEYS >= 2 then
  -- the one-job form, written straight (no tables: it is the one-by-one hot path);
  -- the same writes, in the same order, as the batch form below makes for one job
  local id, token = ARGV[1], ARGV[2]
  local jk = KEYS[2]
  local f, refusal = fenced(jk, token, 'group', 'dedup', 'keep', 'parent', 'children',
    'started_at', 'last_started_at', 'enqueued_at')
  if not f then return refusal end
  -- a flow child: its parent's dependency resolves (here, or through the outbox). The
  -- flow lib is spliced in this branch (at column 0, as the loader wants it): its
  -- closures, and the read of its policy, are made for a flow's job only
  local relay = false
  if f[6] then
--! include flow
    local on_fail = redis.call('HGET', jk, 'on_fail')
    relay = flow_ended(id, jk, f[6], on_fail, 'completed', ARGV[3] or '')
  end
  redis.call('ZREM', B .. ACTIVE, id)
  if f[3] then give_back(f[3]) end
  local now, nows = now_text()
  local wait, run = job_times(id, f[8], f[9], f[10], now)
  local own, count, age = 0, nil, nil
  if f[5] then
    own = tonumber(f[5]) or 0
    local r = redis.call('HMGET', B .. META, 'keep_completed', 'keep_completed_ms')
    count, age = tonumber(r[1]), tonumber(r[2])
  end
  if own > 0 or count or age then
    if f[4] then release_dedup(id, f[4]) end
    -- a kept flow parent: the history trim will look for its children's results
    if f[7] then redis.call('SET', B .. FLOWKEPT, '1') end
    keep_completed(id, jk, ARGV[3], own, count, age, now, nows)
  else
    delete_row(id, jk, f[4], f[7])
    tombstone(id, now, nows)
  end
  count_metric(B .. METRICS_COMPLETED, 1, now, wait, run, f[3], id)
  cap_freed(1)
  emit(ev('completed', id))
  if relay then return 2 end
  return 1
end
-- the batch form: each job to complete is {id, row, group, dedup, keep, result,
-- parent, children, started_at, last_started_at, enqueued_at}
local jobs = {}
local out = {}
do
  local seen = {}
  for i = 1, #ARGV - 2, 3 do
    local id, token = ARGV[i], ARGV[i + 1]
    local jk = B .. JOB .. id
    local f = redis.call('HMGET', jk, 'state', 'attempts', 'group', 'dedup', 'keep',
      'parent', 'children', 'started_at', 'last_started_at', 'enqueued_at')
    if not f[1] or f[1] == 'completed' or seen[id] then
      out[#out + 1] = id; out[#out + 1] = 'gone'
    elseif f[1] ~= 'active' or f[2] ~= token then
      out[#out + 1] = id; out[#out + 1] = 'stale'
    else
      seen[id] = true
      local res = ARGV[i + 2]
      if res == '' then res = nil end
      jobs[#jobs + 1] = {id, jk, f[3], f[4], f[5], res, f[6], f[7], f[8], f[9], f[10]}
    end
  end
  if #jobs == 0 then return out end
end
local ids = {}
for i, j in ipairs(jobs) do ids[i] = j[1] end
zrem_all(B .. ACTIVE, ids)
for _, j in ipairs(jobs) do
  if j[3] then give_back(j[3]) end
end
local now, nows = now_text()
local relay = false  -- an outbox entry was written (a flow child, parent elsewhere)
for _, j in ipairs(jobs) do
  if j[7] then
--! include flow
    local on_fail = redis.call('HGET', j[2], 'on_fail')
    if flow_ended(j[1], j[2], j[7], on_fail, 'completed', j[6] or '') then relay = true end
  end
end
local retain = nil  -- the queue's completed retention, read on the first kept row
local rows = {}  -- the deleted rows' keys: one DEL for the call
local gone = {}  -- their ids, for the tombstones
local waits, runs = 0, 0  -- the jobs' summed wait and run (the history series)
-- per lane {name, jobs, wait, run, its first job's id (the admission filter)}, in first-seen order
local lanes, lane_of = nil, nil
for _, j in ipairs(jobs) do
  local id, jk = j[1], j[2]
  local w, r = job_times(id, j[9], j[10], j[11], now)
  waits, runs = waits + w, runs + r
  if j[3] then
    if not lanes then lanes, lane_of = {}, {} end
    local sums = lane_of[j[3]]
    if not sums then
      sums = {j[3], 0, 0, 0, id}
      lane_of[j[3]] = sums
      lanes[#lanes + 1] = sums
    end
    sums[2], sums[3], sums[4] = sums[2] + 1, sums[3] + w, sums[4] + r
  end
  local own, count, age = 0, nil, nil
  if j[5] then
    -- a kept row: its own keep_ms, and the queue's completed retention from meta
    own = tonumber(j[5]) or 0
    if not retain then
      local r = redis.call('HMGET', B .. META, 'keep_completed', 'keep_completed_ms')
      retain = {tonumber(r[1]), tonumber(r[2])}
    end
    count, age = retain[1], retain[2]
  end
  if j[4] then release_dedup(id, j[4]) end
  if own > 0 or count or age then
    -- kept: the row stays as history (a flow parent: the trim will look for its
    -- children's results)
    if j[8] then redis.call('SET', B .. FLOWKEPT, '1') end
    keep_completed(id, jk, j[6], own, count, age, now, nows)
  else
    rows[#rows + 1] = jk; rows[#rows + 1] = jk .. LOGS
    rows[#rows + 1] = jk .. LOCK; rows[#rows + 1] = jk .. ERRORS
    rows[#rows + 1] = jk .. LOGTIMES
    if j[8] then
      rows[#rows + 1] = jk .. DEPS; rows[#rows + 1] = jk .. KIDS
      rows[#rows + 1] = jk .. KIDFAILS
    end
    gone[#gone + 1] = id
  end
end
if #rows > 0 then del_all(rows) end
if #gone > 0 then tombstones(gone, now, nows) end
count_metric(B .. METRICS_COMPLETED, #jobs, now, waits, runs, lanes)
cap_freed(#jobs)
for _, id in ipairs(ids) do emit(ev('completed', id)) end
if relay then out[#out + 1] = ''; out[#out + 1] = 'relay' end
return out
