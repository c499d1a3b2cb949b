-- obliterate: destroy a paused queue down to nothing, bounded by a per-call budget.
-- KEYS[1]  the queue base emq:{q}: (meta and every other key derived from it)
-- ARGV[1]  'force' or '';  ARGV[2] budget (jobs, then keys, per call)
-- ARGV[3]  'keep' to keep the audit journal, else '' (optional)
-- ARGV[4]  actor (optional; '' = none), written to the audit journal
-- Reply:   0 the queue is gone (no emq:{q}:* key left; with 'keep', but its journal);
--          1 work remains: call again
-- Refusals: EMQSTATE not paused; EMQSTATE active jobs present (unless forced).
--          Both are checked before the first write.
-- Writes:  in order, each step only once the one before is done, `budget` at most:
--          1. active (forced), pending, schedule, dead, every lane: each row with its
--             logs and lock, its dedup key released;
--          2. the repeat records (emq:{q}:repeat:<name>) named by the registry;
--          3. the named queue keys: metrics, lane structures, wake, the registry;
--          4. a sweep over every other key under the base (a dedup key or a log list
--             with no row, keys other modules added): SCAN MATCH emq:{q}:* from the
--             cursor kept in meta field `sweep`, deleting what it finds, `budget` keys
--             per call; SCAN returns only keys of this queue's slot-tagged prefix;
--          5. when a full pass is done, meta itself (the paused flag); event 'obliterated'.
--          Every call appends one audit entry (count = the jobs it deleted, outcome
--          more | gone). The journal emq:{q}:audit goes with the queue in the last step,
--          unless ARGV[3] is 'keep': then it survives, ending with the 'gone' entry that
--          names who obliterated the queue.
-- A producer writing into the queue while it is swept may leave keys the pass missed:
-- pause, stop producers, then obliterate.
local B = KEYS[1]
--! include common
--! include audit
local meta = B .. 'meta'
if not redis.call('HGET', meta, 'paused') then
  return redis.error_reply('EMQSTATE not paused')
end
local force = ARGV[1] == 'force'
if not force and redis.call('EXISTS', B .. 'active') == 1 then
  return redis.error_reply('EMQSTATE active jobs present')
end
local budget = tonumber(ARGV[2])
local jobs = 0
local journal = B .. 'audit'
local keep = ARGV[3] == 'keep'
-- buckets visited per SCAN step, and SCAN steps per call: bounded, cheap work
local SCAN_COUNT, SCAN_STEPS = 1000, 20

-- delete up to `budget` members of a job set; true when the budget is spent.
-- ZPOPMIN takes them off the head of the set in one pass (no second walk to ZREM
-- them), which keeps a large batch cache-friendly; the order does not matter here.
local function sweep(setkey)
  local popped = redis.call('ZPOPMIN', setkey, budget)
  if #popped == 0 then return false end
  for i = 1, #popped, 2 do delete_row(popped[i], B .. 'job:' .. popped[i]) end
  budget = budget - #popped / 2
  jobs = jobs + #popped / 2
  return budget <= 0
end

local function run()
  -- 1. the jobs
  for _, t in ipairs({'active', 'pending', 'schedule', 'dead'}) do
    if sweep(B .. t) then return 1 end
  end
  for _, g in ipairs(redis.call('SMEMBERS', B .. 'groups')) do
    if sweep(lane_key(g)) then return 1 end
  end

  -- 2. the repeat records, under the same budget
  local names = redis.call('ZPOPMIN', B .. 'repeat', budget)
  if #names > 0 then
    for i = 1, #names, 2 do redis.call('DEL', B .. 'repeat:' .. names[i]) end
    budget = budget - #names / 2
    if budget <= 0 then return 1 end
  end

  -- 3. the keys every queue may have, by name
  redis.call('DEL', B .. 'metrics:completed', B .. 'metrics:failed', B .. 'groups',
    B .. 'ring', B .. 'gactive', B .. 'glimit', B .. 'gweight', B .. 'gpaused',
    B .. 'gturn', B .. 'wake', B .. 'repeat')

  -- 4. the sweep. A step that finds more than the budget deletes `budget` of them and
  -- keeps its starting cursor, so the next call repeats it and sees the rest.
  local cursor = redis.call('HGET', meta, 'sweep') or '0'
  for _ = 1, SCAN_STEPS do
    local r = redis.call('SCAN', cursor, 'MATCH', B .. '*', 'COUNT', SCAN_COUNT)
    local found = {}
    for _, k in ipairs(r[2]) do
      if k ~= meta and k ~= journal then found[#found + 1] = k end
    end
    if #found > budget then
      for i = 1, budget do redis.call('DEL', found[i]) end
      redis.call('HSET', meta, 'sweep', cursor)
      return 1
    end
    for _, k in ipairs(found) do redis.call('DEL', k) end
    budget = budget - #found
    cursor = r[1]
    if cursor == '0' then
      -- 5. a full pass is done: nothing of the queue is left but meta (and the journal)
      redis.call('DEL', meta)
      if not keep then redis.call('DEL', journal) end
      emit('{"event":"obliterated"}')
      return 0
    end
    if budget <= 0 then break end
  end
  redis.call('HSET', meta, 'sweep', cursor)
  return 1
end

local left = run()
if left == 1 or keep then
  audit('obliterate', cjson.encode({force = force, budget = tonumber(ARGV[2])}),
    left == 0 and 'gone' or 'more', jobs, ARGV[4])
end
return left
