-- lib/history: the opt-in history (spliced in by the loader; the script defines `B` and
-- includes lib/keys and lib/common first).
-- A queue keeps history while its retention is set (meta fields keep_completed,
-- keep_completed_ms, keep_dead, keep_dead_ms, with the marker key `keeps`), and one job
-- when its enqueue asked for keep_ms. Enqueue stamps such a job's row with `keep` (its
-- keep_ms, or 0 for "as the queue says") and `enqueued_at`; every later transition
-- reads `keep` with the row fields it already reads, so a job that is not kept costs no
-- extra server call. The scripts read the retention's limits from meta themselves, only
-- on a kept job's completion or a job's death.
-- Trimming is bounded: each rule (past the count, past the age, a job's own keep ran
-- out) removes at most `step` jobs per call (TRIM_STEP per transition), the count rule
-- in a transition up to a batch of 31 more (trim_settled).
local TRIM_STEP = 4
-- the error history of a kept job keeps its newest ERRORS_CAP entries
local ERRORS_CAP = 20

-- trim a settled set (B .. COMPLETED or B .. DEAD) by its retention: past the newest
-- `count`, up to `step` jobs settled before now - `age`, and with `own` up to `step`
-- completed jobs whose own keep_ms ran out (the keep index). Past the count, a
-- transition (step <= TRIM_STEP) reads the set's size (ZCARD) and, when it holds more
-- than `count`, drops the oldest min(over, step) + b - 1, b = count // 16 clamped to
-- 1..32: a deep retention trims once in b transitions, b jobs at a time (one read, one
-- ZREM, one DEL and one ZADD of tombstones for b jobs), and never holds more than
-- `count` after a transition (between count - b + 1 and count in the steady state); a
-- shallow one (count < 32) is exact. A larger step (set_retention) reads by rank from
-- the end. Each job goes with its row, logs (and their times), lock and error history;
-- a dead job also releases its dedup key (a kept completed job released its own when
-- it completed). One that settled less than SETTLED_MS ago leaves a tombstone stamped
-- now (`nows`: now as text, when the caller has it), as remove_job does. `extra`: a key
-- the caller wants deleted in the same DEL (complete: the job's lock). Returns how many
-- jobs went.
local function trim_settled(setkey, count, age, own, now, step, extra, nows)
  -- the common case first, before any table or closure is made: a transition on a
  -- set within its count (and no other rule) has nothing to drop
  local over = nil
  if count and count > 0 and step <= TRIM_STEP then
    over = redis.call('ZCARD', setkey) - count
    if over <= 0 and not (age and age > 0) and not own then
      if extra then redis.call('DEL', extra) end
      return 0
    end
  end
  local done = setkey == B .. COMPLETED
  local keys = {extra}
  local gone = 0
  local fresh = {}  -- the dropped ids that settled less than SETTLED_MS ago
  local recent = now - SETTLED_MS
  -- drop `ids`; `young` says which leave a tombstone: a table of flags, or a number n
  -- when ids are oldest first (the last n of them)
  local function drop(ids, young)
    local n = #ids
    for i, id in ipairs(ids) do
      local y
      if type(young) == 'table' then y = young[i] else y = i > n - young end
      if y then fresh[#fresh + 1] = id end
      local jk = B .. JOB .. id
      if done then
        keys[#keys + 1] = jk
        keys[#keys + 1] = jk .. LOGS
        keys[#keys + 1] = jk .. LOCK
        keys[#keys + 1] = jk .. ERRORS
        keys[#keys + 1] = jk .. LOGTIMES
        -- a kept flow parent's children's results go with it (no read for them)
        keys[#keys + 1] = jk .. DEPS
        keys[#keys + 1] = jk .. KIDS
        keys[#keys + 1] = jk .. KIDFAILS
        if #keys >= 1000 then
          redis.call('DEL', unpack(keys))
          keys = {}
        end
      else
        delete_row(id, jk)
      end
    end
    if n > 0 then redis.call('ZREM', setkey, unpack(ids)) end
    gone = gone + n
  end
  -- of k ids, the oldest of the set, how many settled less than SETTLED_MS ago
  local function young_of(k)
    if k == 0 then return 0 end
    return math.max(k - redis.call('ZCOUNT', setkey, '-inf', '(' .. recent), 0)
  end
  if count and count > 0 then
    if over then
      if over > 0 then
        local b = math.min(math.max(math.floor(count / 16), 1), 32)
        local ids = redis.call('ZRANGE', setkey, 0, math.min(over, step) + b - 2)
        drop(ids, young_of(#ids))
      end
    else
      local r = redis.call('ZRANGE', setkey, -(count + step), -(count + 1), 'WITHSCORES')
      local ids, young = {}, {}
      for i = 1, #r, 2 do
        ids[#ids + 1] = r[i]
        young[#young + 1] = tonumber(r[i + 1]) >= recent
      end
      drop(ids, young)
    end
  end
  if age and age > 0 then
    local ids = redis.call('ZRANGE', setkey, '-inf', '(' .. (now - age), 'BYSCORE',
      'LIMIT', 0, step)
    drop(ids, age < SETTLED_MS and young_of(#ids) or 0)
  end
  if own then
    local ku = B .. KEEPUNTIL
    -- index entries go whatever their rows hold (a row removed another way); the
    -- index's scores are keep-until times, the finish times are in the set
    local ids = redis.call('ZRANGE', ku, '-inf', now, 'BYSCORE', 'LIMIT', 0, step)
    if #ids > 0 then
      local young = {}
      for i, at in ipairs(redis.call('ZMSCORE', setkey, unpack(ids))) do
        young[i] = at ~= false and tonumber(at) >= recent
      end
      drop(ids, young)
      redis.call('ZREM', ku, unpack(ids))
    end
  end
  if #keys > 0 then redis.call('DEL', unpack(keys)) end
  if #fresh > 0 then tombstones(fresh, now, nows) end
  return gone
end

-- one failure of a kept job in its capped error history, as JSON text
local function record_error(jk, attempt, now, err)
  local ek = jk .. ERRORS
  redis.call('RPUSH', ek, '{"attempt":' .. attempt .. ',"time":' .. now .. ',"error":'
    .. cjson.encode(err) .. '}')
  redis.call('LTRIM', ek, -ERRORS_CAP, -1)
end
