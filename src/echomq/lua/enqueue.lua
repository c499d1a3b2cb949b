-- enqueue: write one or more job rows and put each in its backlog.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  n, the number of jobs;  ARGV[2] w, the fields per job: 2 or 4
-- ARGV[3 .. 2+n*w]  per job: id, payload; with w = 4 also dedup ('' = none) and
--          check ('1' when the caller chose the id). A checked id that has a row, or is
--          in `settled` (completed or removed in the last 60 s, the tombstone), is a
--          duplicate. A chosen id is always checked; a minted one only on a re-send
--          (option `resent`): a minted id is fresh, so only a re-sent call whose first
--          run landed can meet it again, and a first send skips the reads.
-- ARGV[3+n*w ..]  options shared by every job, in this order; '' or omitted = absent:
--          priority, name, group, max_attempts, delay_ms, run_at_ms, backoff,
--          trace (the producer's W3C trace context, written to the row's `trace`),
--          keep_ms (keep this job's history: its row stays keep_ms after it completes),
--          resent ('1' when this call is a re-send after a lost reply, set by the
--          transport: every id is checked, so a re-sent enqueue whose first run landed
--          writes nothing),
--          dedup_mode (of every job's dedup id: '' = simple, throttle, debounce,
--          keep_last), dedup_ttl (throttle: the window in ms, the key's PX)
-- Dedup:   a job's dedup key de:<dedup> holds the id of the job that owns it. A key
--          whose owner is gone (no row, or its row completed or dead) is free and taken
--          over (self-healing), unless it has a TTL (a throttle window). When the owner
--          lives (pending, scheduled, active), by mode:
--          simple, throttle: the owner's id is answered, nothing written;
--          debounce: a waiting owner (pending or scheduled) gets this job's payload and,
--            when scheduled, its due time pushed to now + delay_ms; its id answered.
--            A running owner keeps its run: this job is new and takes the key;
--          keep_last: a waiting owner gets this job's payload (newest wins); a running
--            one gets this job held behind it: new, in the schedule at DEDUP_HOLD with
--            `dedup_behind` = the owner, taking the key; the owner's ending lets it go
--            (lib/common release_dedup). A held job whose owner is gone is let go here.
--          A replaced payload publishes 'replaced'. A throttle key is listed in
--          `dedups` (its window's end) for obliterate; expired entries trimmed (8).
-- Reads:   one EXISTS of `settled` and `keeps` (the latter named twice, so the count
--          tells both apart): the tombstones are read only when there are any, and a
--          queue with a retention (`keeps`, set by set_retention) keeps the jobs
--          enqueued from then on. A queue without history makes no other read.
-- Reply:   w = 4: an array of n ids, the new job's id or, for a duplicate id / held
--          dedup key, the id of the job that already holds it (nothing written for it).
--          w = 2 (minted ids, no dedup): the number of jobs written (duplicates skipped).
-- Refusals: EMQARG when n or w is not a number, fewer than n jobs' arguments came, or
--          a numeric option (priority, max_attempts, delay_ms, run_at_ms) is not a
--          finite number, or priority is past +-PRIORITY_MAX (2**20), or dedup_mode is
--          none of the modes, or a throttle's dedup_ttl is no positive number; checked before
--          the first write, so a refused call writes nothing (the client checks the
--          same before sending).
-- Writes:  the row (state pending|scheduled, attempts 0, seq), pending/lane/schedule
--          (a ready job's score: priority * SEQ_SPAN + seq, lib/common run_score), one
--          INCRBY seq (the enqueue sequence) by the number of jobs written (none when nothing is),
--          groups + ring + wake for lanes, de:<dedup> (NX), wake; event 'enqueued'.
--          A kept job's row also gets `keep` (its keep_ms, or 0: as the queue's
--          retention says) and `enqueued_at` (server ms). An id whose row is still
--          kept (a completed job in history) is a duplicate like any existing row.
local B = KEYS[1]
--! include keys
--! include common
--! include series
-- check, then write: every argument that can fail is read before the first write
-- (one job of width 2 is most calls: known by its text, as a tonumber of a string is a
-- strtod, about 1,300 server instructions each)
local n = ARGV[1] == '1' and 1 or tonumber(ARGV[1])
local w = ARGV[2] == '2' and 2 or tonumber(ARGV[2])
if not (finite(n) and n >= 0 and (w == 2 or w == 4)) then
  return redis.error_reply('EMQARG n and w must be numbers (w 2 or 4)')
end
local o = 3 + n * w
if #ARGV < o - 1 then
  return redis.error_reply('EMQARG ' .. n .. ' jobs need ' .. (o - 1) .. ' arguments')
end
-- the options shared by every job, read and checked only when any came (most calls
-- send none, and the checks would find nothing to check)
local prio, name, g, maxa, delay, runat, backoff, trace, keep
local resent, mode, dttl = false, '', ''
if #ARGV >= o then
  prio, name, g, maxa = ARGV[o], ARGV[o + 1], ARGV[o + 2], ARGV[o + 3]
  delay, runat, backoff = ARGV[o + 4], ARGV[o + 5], ARGV[o + 6]
  trace = ARGV[o + 7]
  keep = ARGV[o + 8]
  resent = ARGV[o + 9] == '1'
  mode, dttl = ARGV[o + 10] or '', ARGV[o + 11] or ''
  if prio == '' then prio = nil end
  if name == '' then name = nil end
  if g == '' then g = nil end
  if maxa == '' then maxa = nil end
  if delay == '' then delay = nil end
  if runat == '' then runat = nil end
  if backoff == '' then backoff = nil end
  if trace == '' then trace = nil end
  if keep == '' then keep = nil end

  -- the numeric options, each read only when given (no table built for a call with none)
  local bad = (prio and not finite(prio) and 'priority')
    or (maxa and not finite(maxa) and 'max_attempts')
    or (delay and not finite(delay) and 'delay_ms')
    or (runat and not finite(runat) and 'run_at_ms')
    or (keep and not finite(keep) and 'keep_ms')
  if bad then
    return redis.error_reply('EMQARG ' .. bad .. ' is not a finite number')
  end
  -- the run order's score holds the priority exactly only within this range
  if prio and math.abs(tonumber(prio)) > PRIORITY_MAX then
    return redis.error_reply('EMQARG priority is not within -PRIORITY_MAX..PRIORITY_MAX')
  end
  if mode == 'simple' then mode = '' end
  if not (mode == '' or mode == 'throttle' or mode == 'debounce'
      or mode == 'keep_last') then
    return redis.error_reply('EMQARG dedup_mode is not a mode')
  end
  if mode == 'throttle' and not (finite(dttl) and tonumber(dttl) >= 1
      and math.floor(tonumber(dttl)) == tonumber(dttl)) then
    return redis.error_reply('EMQARG dedup_ttl is not a positive number')
  end
end

-- one read for two questions: settled tombstones (1) and the queue's retention (2)
local seen = redis.call('EXISTS', B .. SETTLED, B .. KEEPS, B .. KEEPS)
-- history: a job asked for it, or the queue keeps it
if not keep and seen >= 2 then keep = '0' end
local delayed = not runat and delay and tonumber(delay) > 0
-- the server clock, read once, only when something needs it
local now, nows = nil, nil
if delayed or mode == 'throttle' then
  now, nows = now_text()
elseif keep then
  nows = clock_text()  -- the number only if a duplicate check needs it
end

local due = nil
if runat then
  due = tonumber(runat)
elseif delayed then
  due = now + tonumber(delay)
end

-- the row's fields are the same for every job but the payload (slot 6) and its
-- place in the enqueue sequence (slot 8); numbers go as text (a number argument costs
-- the server a float format each)
local f = {'state', due and 'scheduled' or 'pending', 'attempts', '0', 'payload', '',
  'seq', '0'}
if name then f[#f + 1] = 'name'; f[#f + 1] = name end
if g then f[#f + 1] = 'group'; f[#f + 1] = g end
if prio then f[#f + 1] = 'priority'; f[#f + 1] = prio end
if maxa then f[#f + 1] = 'max_attempts'; f[#f + 1] = maxa end
if backoff then f[#f + 1] = 'backoff'; f[#f + 1] = backoff end
if trace then f[#f + 1] = 'trace'; f[#f + 1] = trace end
if keep then
  f[#f + 1] = 'keep'; f[#f + 1] = keep
  f[#f + 1] = 'enqueued_at'; f[#f + 1] = nows
end
local nf = #f

-- a scheduled job's score is its due time; a ready one's its run_score (priority,
-- then seq). A delayed job takes its seq here too: when due it keeps the place its
-- enqueue gave it, ahead of the jobs enqueued after it.
local dest, base = B .. SCHEDULE, due
if not due then
  dest = g and lane_key(g) or B .. PENDING
  base = run_score(prio, 0)
end

local out = (w == 4) and {} or nil
-- the tombstones are read only when there are any (most queues settle nothing lately),
-- and only for an id checked (the clock then read once)
local function duplicate(id, jk)
  if redis.call('EXISTS', jk) == 1 then return true end
  if seen % 2 == 0 then return false end
  if not now then now = nows and tonumber(nows) or now_ms() end
  return settled_recently(id, now)
end
-- take dedup key dk (of dedup id d) for job id (its argument slot a), by the mode (see
-- Dedup in the header): nil when this job takes it (free, or its owner gone), else the
-- owner that stays, after the mode's writes to it (a replaced payload, a pushed due)
-- (made for the long form only, w = 4: the short form has no dedup ids)
local long = w == 4
local here = long and {}    -- id -> argument slot: jobs of this call that took a key
local payload = long and {} -- argument slot -> the payload's slot (a newer job's, by mode)
local behind = long and {}  -- argument slot -> the running owner it is held behind
local take = long and function(dk, d, id, a)
  local px = mode == 'throttle'
  -- SET NX GET: one command both takes the key and tells who holds it
  local held
  if px then
    held = redis.call('SET', dk, id, 'NX', 'PX', dttl, 'GET')
  else
    held = redis.call('SET', dk, id, 'NX', 'GET')
  end
  local st, after = nil, nil
  if held and here[held] then
    st = 'pending'  -- taken earlier in this call: its row is written below
  elseif held then
    local hf = redis.call('HMGET', B .. JOB .. held, 'state', 'dedup_behind')
    st, after = hf[1], hf[2]
  end
  if held and (not st or st == 'completed' or st == 'dead') then
    -- the owner is gone: the key is free (self-healing) unless a throttle window
    if redis.call('PTTL', dk) >= 0 then return held end
    if px then redis.call('SET', dk, id, 'PX', dttl) else redis.call('SET', dk, id) end
    held = nil
  end
  if not held then
    if px then
      local zk = B .. DEDUPS
      redis.call('ZADD', zk, now + tonumber(dttl), d)
      trim_before(zk, now, 8)
    end
    here[id] = a
    return nil
  end
  if mode == '' or mode == 'throttle' then return held end
  if after and redis.call('EXISTS', B .. JOB .. after) == 0 then
    unhold(held)  -- held behind a job that is gone: let it go (self-healing)
    st, after = 'pending', nil
  end
  if st == 'active' then
    redis.call('SET', dk, id)
    if mode == 'keep_last' then behind[a] = held end
    here[id] = a
    return nil
  end
  -- a waiting owner: the newest payload wins; a debounce pushes its due time
  if here[held] then
    payload[here[held]] = a + 1
  else
    redis.call('HSET', B .. JOB .. held, 'payload', ARGV[a + 1])
    if mode == 'debounce' and due and st == 'scheduled' and not after then
      redis.call('ZADD', B .. SCHEDULE, 'XX', due, held)
    end
    emit(ev('replaced', held))
  end
  return held
end

-- first which jobs are new (the argument slot of each), then one take of the
-- sequence for them all, then their rows
local fresh = {}
for i = 0, n - 1 do
  local a = 3 + i * w
  local id = ARGV[a]
  local holder = nil
  if (resent or (w == 4 and ARGV[a + 3] == '1')) and duplicate(id, B .. JOB .. id) then
    holder = id
  end
  if w == 4 then
    local dedup = ARGV[a + 2]
    if not holder and dedup ~= '' then holder = take(B .. DEDUP .. dedup, dedup, id, a) end
    out[#out + 1] = holder or id
  end
  if not holder then fresh[#fresh + 1] = a end
end

local zs = {}
local first = #fresh > 0 and take_seq(#fresh) or 0
for k, a in ipairs(fresh) do
  local id = ARGV[a]
  local jk = B .. JOB .. id
  local seq = seq_at(first, k - 1)
  local seqs = string.format('%d', seq)  -- formatted once: the row's and the score
  f[6] = ARGV[long and payload[a] or a + 1]
  f[8] = seqs
  local dedup = w == 4 and ARGV[a + 2] or ''
  if dedup ~= '' then
    local row = {unpack(f)}
    row[#row + 1] = 'dedup'; row[#row + 1] = dedup
    if mode ~= '' then row[#row + 1] = 'dedup_mode'; row[#row + 1] = mode end
    if long and behind[a] then
      -- held behind its running owner: in the schedule past any due time
      row[2] = 'scheduled'
      row[#row + 1] = 'dedup_behind'; row[#row + 1] = behind[a]
    end
    redis.call('HSET', jk, unpack(row))
  else
    redis.call('HSET', jk, unpack(f))
  end
  if long and behind[a] then
    redis.call('ZADD', B .. SCHEDULE, DEDUP_HOLD, id)
  else
    zs[#zs + 1] = due and base or (base == 0 and seqs or base + seq)
    zs[#zs + 1] = id
  end
  emit(ev('enqueued', id))
end

-- one ZADD for the lot (zadd_desc: last first, in slices; the scores ascend with seq)
local nz = #zs
-- a lane's depth before: an empty lane joins the ring without searching it
local lane_before = (g and not due and nz > 0) and redis.call('ZCARD', dest) or nil
if nz > 0 then zadd_desc(dest, zs) end
-- a lane's jobs are also in gindex, the index of every lane's jobs (same score)
if lane_before then zadd_desc(B .. GINDEX, zs) end
local written = nz / 2
if written > 0 and not due then
  if g then
    redis.call('SADD', B .. GROUPS, g)
    lane_grew(g, lane_before, true)
  end
  push_wake(written)
end
if w == 4 then return out end
return written
