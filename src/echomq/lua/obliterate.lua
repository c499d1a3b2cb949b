#!lua flags=allow-oom
-- obliterate: destroy a paused queue down to nothing, bounded by a per-call budget.
-- KEYS[1]  the queue base emq:{q}: (meta and every other key derived from it)
-- ARGV[1]  'force' or '';  ARGV[2] budget (jobs, then keys, per call; a call also stops
--          after about 1 ms of server time and answers 1)
-- ARGV[3]  flags, comma separated (optional): 'keep' keeps the audit journal; 'sweep'
--          also scans for keys no registry names (SCAN MATCH emq:{q}:*, which walks the
--          whole keyspace: a recovery tool, not the default)
-- ARGV[4]  actor (optional; '' = none), written to the audit journal
-- Reply:   0 the queue is gone (no emq:{q}:* key left; with 'keep', but its journal);
--          1 work remains: call again
-- Refusals: EMQSTATE not paused; EMQSTATE active jobs present (unless forced).
--          Both are checked before the first write.
-- Writes:  in order, each step only once the one before is done, `budget` at most:
--          1. active (forced), pending, schedule, dead, completed (kept history),
--             the lanes' jobs through their
--             index `gindex` (no walk over the groups), then any lane the index does not
--             know (a queue written before it), found by SSCAN of `groups` from the
--             cursor kept in meta field `lanes`: each row with its logs, lock and error
--             history, its dedup key released; then the flow parents waiting for
--             their children (`waiting`), each with its :deps/:kids/:kidfails. Each
--             deletion is the job's ending, outcome obliterated (lib/flow flow_drop: a
--             flow child's parent in this queue resolved here, in another queue
--             through the outbox; step 3 waits (answers 1) until the outbox is empty:
--             the client relays it between calls);
--          2. the repeat records (emq:{q}:repeat:<name>) named by the registry, then
--             the throttle windows' dedup keys (de:<id>) named by their index
--             `dedups`, then the claim records (claimreq:<rid>) named by their index
--             `claimreqs`;
--          3. the named queue keys (UNLINK: a big one is freed off the main thread):
--             metrics, lane structures (and gindex), wake, the registry, the settled
--             tombstones, the workers registry, the keep index and the retention marker,
--             the flow control keys (rate, grate, gwait; a lane's gs:<group> with its
--             lane in step 1), the history series (hist:<hour> for each hour of
--             the last 7 days and two more: derived from the server clock; lanenames),
--             the flow keys
--             (waiting, outbox, outmsg, flowkept);
--          4. only with 'sweep': every other key under the base (an orphan dedup key or
--             log list, keys other modules added), by SCAN MATCH from the cursor kept
--             in meta field `sweep`, `budget` keys per call;
--          5. meta itself (the paused flag); event 'obliterated'.
--          Without 'sweep' every key is found from the queue's own sets and registries,
--          never by scanning the keyspace: a call costs the same beside a queue of any
--          size. Keys no registry names are then left: a worker's beat
--          (worker:<wid>) expires on its own within a minute; an orphan needs 'sweep'.
--          Every call appends one audit entry (count = the jobs it deleted, outcome
--          more | gone). The journal emq:{q}:audit goes with the queue in the last step,
--          unless ARGV[3] is 'keep': then it survives, ending with the 'gone' entry that
--          names who obliterated the queue.
-- A producer writing into the queue while it is obliterated may leave keys behind:
-- pause, stop producers, then obliterate.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include flow
--! include bulk
local meta = B .. META
if not redis.call('HGET', meta, 'paused') then
  return redis.error_reply('EMQSTATE not paused')
end
local force = ARGV[1] == 'force'
if not force and redis.call('EXISTS', B .. ACTIVE) == 1 then
  return redis.error_reply('EMQSTATE active jobs present')
end
local budget = tonumber(ARGV[2])
local jobs = 0
local journal = B .. AUDIT
local flags = ',' .. (ARGV[3] or '') .. ','
local keep = flags:find(',keep,', 1, true) ~= nil
local scan_all = flags:find(',sweep,', 1, true) ~= nil

-- delete up to `budget` members of a job set; true when the budget is spent.
-- ZPOPMIN takes them off the head of the set in one pass (no second walk to ZREM
-- them), which keeps a large batch cache-friendly; the order does not matter here.
-- A call also stops after about a slice of server time (it answers "more"), so each
-- call fits the bound whatever its budget.
local over = slicer()
local function sweep(setkey, lane)
  while budget > 0 do
    local popped = redis.call('ZPOPMIN', setkey, math.min(budget, 64))
    if #popped == 0 then return false end
    for i = 1, #popped, 2 do
      flow_drop(popped[i], 'obliterated')
      if lane then redis.call('ZREM', B .. GINDEX, popped[i]) end
    end
    budget = budget - #popped / 2
    jobs = jobs + #popped / 2
    if over(SLICE_EVERY) then return true end
  end
  return true
end

-- the lanes' jobs through their index; true when the budget or the slice is spent
local function sweep_indexed()
  while budget > 0 do
    local k = math.min(budget, 64)
    local popped, n = drop_indexed(k, nil, 'obliterated')
    budget, jobs = budget - popped, jobs + n
    if popped < k then return false end
    if over(SLICE_EVERY) then return true end
  end
  return true
end

-- lanes the index does not know, one SSCAN page of `groups` at a time from the cursor
-- in meta field `lanes` ('done' once the pass is over). A page cut short is read again
-- by the next call (its lanes emptied so far cost a pop each). The slice is checked
-- between pages too, and a page always ends, so the pass always reaches its end.
local function sweep_lanes()
  local cursor = redis.call('HGET', meta, 'lanes') or '0'
  if cursor == 'done' then return false end
  repeat
    local r = redis.call('SSCAN', B .. GROUPS, cursor, 'COUNT', 64)
    for _, g in ipairs(r[2]) do
      -- a lane's rate log goes with it (one expires by itself `per_ms` after its
      -- last start anyway)
      redis.call('DEL', B .. GSTARTS .. g)
      if sweep(lane_key(g), true) then
        redis.call('HSET', meta, 'lanes', cursor)
        return true
      end
    end
    cursor = r[1]
    if cursor ~= '0' and over(SLICE_EVERY) then
      redis.call('HSET', meta, 'lanes', cursor)
      return true
    end
  until cursor == '0'
  redis.call('HSET', meta, 'lanes', 'done')
  return false
end

local function run()
  -- 1. the jobs
  for _, t in ipairs({ACTIVE, PENDING, SCHEDULE, DEAD, COMPLETED, WAITING}) do
    if sweep(B .. t) then return 1 end
  end
  if sweep_indexed() or sweep_lanes() then return 1 end

  -- 2. the repeat records, under the same budget
  local names = redis.call('ZPOPMIN', B .. REPEAT, budget)
  if #names > 0 then
    for i = 1, #names, 2 do redis.call('DEL', B .. REPEAT_RECORD .. names[i]) end
    budget = budget - #names / 2
    if budget <= 0 then return 1 end
  end
  -- the throttle windows (a window outlives its job: no row names its key)
  local windows = redis.call('ZPOPMIN', B .. DEDUPS, budget)
  if #windows > 0 then
    for i = 1, #windows, 2 do redis.call('DEL', B .. DEDUP .. windows[i]) end
    budget = budget - #windows / 2
    if budget <= 0 then return 1 end
  end
  local rids = redis.call('ZPOPMIN', B .. CLAIMREQS, budget)
  if #rids > 0 then
    for i = 1, #rids, 2 do redis.call('DEL', B .. CLAIMREQ .. rids[i]) end
    budget = budget - #rids / 2
    if budget <= 0 then return 1 end
  end

  -- flow children's endings for parents in other queues wait for their relay (the
  -- client relays between calls): the outbox goes only once empty
  if redis.call('EXISTS', B .. OUTBOX) == 1 then return 1 end

  -- 3. the keys every queue may have, by name
  redis.call('UNLINK', B .. METRICS_COMPLETED, B .. METRICS_FAILED, B .. GROUPS,
    B .. RING, B .. GACTIVE, B .. GLIMIT, B .. GWEIGHT, B .. GPAUSED,
    B .. GTURN, B .. WAKE, B .. REPEAT, B .. GINDEX, B .. SETTLED, B .. WORKERS,
    B .. KEEPUNTIL, B .. KEEPS, B .. SEQ, B .. RATE, B .. GRATE, B .. GWAIT, B .. DEDUPS,
    B .. WAITING, B .. OUTBOX, B .. OUTMSG, B .. FLOWKEPT, B .. LANENAMES)
  -- the history series: an hour's key expires HIST_KEEP_MS after its hour ends, so the
  -- keys that can exist are those of the hours since then, derived from the clock
  do
    local hour = math.floor(now_ms() / 3600000)
    local hk = {}
    for h = hour - HIST_KEEP_MS / 3600000 - 1, hour + 1 do hk[#hk + 1] = B .. HIST .. h end
    redis.call('UNLINK', unpack(hk))
  end

  -- 4. with 'sweep' only: a scan for keys no registry names. A step that finds more
  -- than the budget deletes `budget` of them and keeps its starting cursor, so the
  -- next call repeats it and sees the rest.
  if scan_all then
    local cursor = redis.call('HGET', meta, 'sweep') or '0'
    for _ = 1, 20 do
      local r = redis.call('SCAN', cursor, 'MATCH', B .. '*', 'COUNT', 1000)
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
      if cursor == '0' then break end
      if budget <= 0 then
        redis.call('HSET', meta, 'sweep', cursor)
        return 1
      end
    end
    if cursor ~= '0' then
      redis.call('HSET', meta, 'sweep', cursor)
      return 1
    end
  end

  -- 5. nothing of the queue is left but meta (and the journal)
  redis.call('DEL', meta)
  if not keep then redis.call('DEL', journal) end
  emit('{"event":"obliterated"}')
  return 0
end

local left = run()
if left == 1 or keep then
  audit('obliterate', cjson.encode({force = force, budget = tonumber(ARGV[2])}),
    left == 0 and 'gone' or 'more', jobs, ARGV[4])
end
return left
