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
-- out) removes at most `step` jobs per call (TRIM_STEP per transition).
local TRIM_STEP = 4
-- the error history of a kept job keeps its newest ERRORS_CAP entries
local ERRORS_CAP = 20

-- trim a settled set (B .. COMPLETED or B .. DEAD) by its retention: up to `step` jobs
-- past the newest `count` (one read by rank from the end: nothing when the set holds no
-- more than `count`), up to `step` settled before now - `age`, and with `own` up to
-- `step` completed jobs whose own keep_ms ran out (the keep index). Each goes with its
-- row, logs (and their times), lock and error history; a dead job also releases its dedup key (a kept
-- completed job released its own when it completed). `extra`: keys the caller wants
-- deleted in the same DEL (complete: the job's lock). Returns how many jobs went.
local function trim_settled(setkey, count, age, own, now, step, extra)
  local done = setkey == B .. COMPLETED
  local keys = extra or {}
  local gone = 0
  local function drop(ids)
    for _, id in ipairs(ids) do
      local jk = B .. JOB .. id
      if done then
        keys[#keys + 1] = jk
        keys[#keys + 1] = jk .. LOGS
        keys[#keys + 1] = jk .. LOCK
        keys[#keys + 1] = jk .. ERRORS
        keys[#keys + 1] = jk .. LOGTIMES
        if #keys >= 1000 then
          redis.call('DEL', unpack(keys))
          keys = {}
        end
      else
        delete_row(id, jk)
      end
    end
    if #ids > 0 then redis.call('ZREM', setkey, unpack(ids)) end
    gone = gone + #ids
    return ids
  end
  if count and count > 0 then
    drop(redis.call('ZRANGE', setkey, -(count + step), -(count + 1)))
  end
  if age and age > 0 then
    drop(redis.call('ZRANGE', setkey, '-inf', '(' .. (now - age), 'BYSCORE', 'LIMIT', 0, step))
  end
  if own then
    local ku = B .. KEEPUNTIL
    -- index entries go whatever their rows hold (a row removed another way)
    local ids = drop(redis.call('ZRANGE', ku, '-inf', now, 'BYSCORE', 'LIMIT', 0, step))
    if #ids > 0 then redis.call('ZREM', ku, unpack(ids)) end
  end
  if #keys > 0 then redis.call('DEL', unpack(keys)) end
  return gone
end

-- one failure of a kept job in its capped error history, as JSON text
local function record_error(jk, attempt, now, err)
  local ek = jk .. ERRORS
  redis.call('RPUSH', ek, '{"attempt":' .. attempt .. ',"time":' .. now .. ',"error":'
    .. cjson.encode(err) .. '}')
  redis.call('LTRIM', ek, -ERRORS_CAP, -1)
end
