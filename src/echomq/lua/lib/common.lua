-- lib/common: helpers shared by the transition scripts (spliced in by the loader).
-- The including script defines `local B = <the queue base emq:{q}:>` first; every key
-- below derives from it, so a script touches nothing outside its queue's slot.
local WAKE_CAP = 64

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- the server clock in ms as now_ms's number and as the text a command is given: a
-- number argument costs the server a float format (%.17g) per argument, and the hot
-- paths write the time two or three times; the text is built from TIME's own digits
-- (seconds, then the microseconds' first three, zero-padded), the same characters
local function ms_text(sec, usec)
  return sec .. string.sub('00000' .. usec, -6, -4)
end
local function clock_text()
  local t = redis.call('TIME')
  return ms_text(t[1], t[2])
end
local function now_text()
  local s = clock_text()
  return tonumber(s), s
end

-- whether v reads as a finite number (an argument's check before any write)
local function finite(v)
  local x = tonumber(v)
  return x ~= nil and x == x and x ~= math.huge and x ~= -math.huge
end

local function emit(json)
  redis.call('PUBLISH', B .. EVENTS, json)
end

local function ev(name, id)
  return '{"event":"' .. name .. '","job":"' .. id .. '"}'
end

-- push up to n wake tokens, never past the cap: idle workers block on this list
local function push_wake(n)
  local wk = B .. WAKE
  local room = WAKE_CAP - redis.call('LLEN', wk)
  if n > room then n = room end
  if n == 1 then
    redis.call('RPUSH', wk, '1')  -- most calls: no argument table to build
  elseif n > 0 then
    local t = {}
    for i = 1, n do t[i] = '1' end
    redis.call('RPUSH', wk, unpack(t))
  end
end

local function lane_key(g)
  return B .. LANE .. g .. LANE_END
end

-- a group can be served now: work in its lane, not paused, not held by its rate
-- limit (gwait, lib/limits), under its limit
local function serveable(g)
  if redis.call('ZCARD', lane_key(g)) == 0 then return false end
  if redis.call('SISMEMBER', B .. GPAUSED, g) == 1 then return false end
  if redis.call('ZSCORE', B .. GWAIT, g) then return false end
  local lim = redis.call('HGET', B .. GLIMIT, g)
  if lim then
    local act = tonumber(redis.call('HGET', B .. GACTIVE, g) or '0')
    if act >= tonumber(lim) then return false end
  end
  return true
end

-- the token fence (law 6): read the row's state, attempts and the extra fields asked
-- for. Returns the fields, or nil and the refusal to return: -1 when there is no row,
-- EMQSTALE when the job is not active under `token`. Nothing is written either way.
-- (A kept completed row answers -1 too.)
local function fenced(jk, token, ...)
  local f = redis.call('HMGET', jk, 'state', 'attempts', ...)
  -- a kept completed row is no job to settle: a repeated complete answers gone, as
  -- it does when the row was deleted
  if not f[1] or f[1] == 'completed' then return nil, -1 end
  if f[1] ~= 'active' or f[2] ~= token then
    return nil, redis.error_reply('EMQSTALE token ' .. token .. ' is not current')
  end
  return f
end

-- forget a group that holds nothing: no lane, nothing in flight, no setting. The
-- groups set then lists only live groups, so the reads that walk it (counts, browse,
-- drain, groups) cost what the live groups cost, not every tenant ever seen. Every
-- path that gives a group work or a setting adds it back.
local function prune_group(g)
  if redis.call('EXISTS', lane_key(g)) == 0
    and not redis.call('HGET', B .. GACTIVE, g)
    and redis.call('HEXISTS', B .. GLIMIT, g) == 0
    and redis.call('HEXISTS', B .. GWEIGHT, g) == 0
    and redis.call('HEXISTS', B .. GRATE, g) == 0
    and not redis.call('ZSCORE', B .. GWAIT, g)
    and redis.call('SISMEMBER', B .. GPAUSED, g) == 0 then
    redis.call('SREM', B .. GROUPS, g)
  end
end

-- keep the ring law: a group is on the ring exactly once iff it can be served.
-- A group that (re)joins pushes a wake token so an idle worker comes for it, unless
-- `quiet`: the caller pushes one token per job it made ready and a second would only
-- wake a worker for nothing.
local function ring_sync(g, quiet)
  local ring = B .. RING
  local on = redis.call('LPOS', ring, g)
  if serveable(g) then
    if not on then
      redis.call('RPUSH', ring, g)
      if not quiet then push_wake(1) end
    end
  else
    if on then
      redis.call('LREM', ring, 0, g)
      redis.call('HDEL', B .. GTURN, g)
    end
    prune_group(g)
  end
end

-- a queue under a concurrency cap (meta `concurrency`, lib/limits) pushes a wake token
-- per slot an ending frees: a worker the cap held back waits on the wake list
local function cap_freed(n)
  if redis.call('HEXISTS', B .. META, 'concurrency') == 1 then push_wake(n) end
end

-- give back the lane slot a claim took (exactly once per claimed grouped job)
local function slot_back(g)
  if redis.call('HINCRBY', B .. GACTIVE, g, -1) <= 0 then
    redis.call('HDEL', B .. GACTIVE, g)
  end
end

-- give back the slot of a settled grouped job (complete, retry, delay) and re-ring the
-- group when that made it serveable, without searching the ring: freeing a slot can
-- only make a group serveable, and by the ring law it was on the ring before iff it
-- was serveable with one more job in flight, i.e. iff it was not at its limit then.
-- A re-ringed group pushes a wake token unless `quiet` (the caller pushes its own).
local function give_back(g, quiet)
  local left = redis.call('HINCRBY', B .. GACTIVE, g, -1)
  if left <= 0 then
    redis.call('HDEL', B .. GACTIVE, g)
    prune_group(g)
  end
  if left < 0 then
    -- there was no slot to give back: the counts were off before this call, so the
    -- law cannot be trusted to say where the group is; search the ring instead
    ring_sync(g)
    return
  end
  -- not serveable now: it was not before either, so it is not on the ring
  if not serveable(g) then return end
  local lim = redis.call('HGET', B .. GLIMIT, g)
  if lim and left + 1 >= tonumber(lim) then
    -- it was held at its limit, off the ring: this slot lets it back on
    redis.call('RPUSH', B .. RING, g)
    if not quiet then push_wake(1) end
  end
end

-- jobs were just added to the lane of g, which held `before` jobs. Adding work changes
-- nothing else a group's serveability reads, so a lane that already held jobs keeps
-- its place; an empty lane was off the ring by the law and joins now iff it can be
-- served. Either way the ring is never searched.
local function lane_grew(g, before, quiet)
  if before == 0 and serveable(g) then
    redis.call('RPUSH', B .. RING, g)
    if not quiet then push_wake(1) end
  end
end

-- Run order: a ready job's score in pending, its lane and gindex is its priority first,
-- then its enqueue sequence (the row's `seq`), so equal priorities run in enqueue order
-- whoever chose the id. Scores stay exact integers: |priority| <= PRIORITY_MAX and
-- seq < SEQ_SPAN. A row without `seq` (written before the field) reads 0.
local function run_score(prio, seq)
  return (tonumber(prio) or 0) * SEQ_SPAN + (tonumber(seq) or 0)
end

-- take n numbers of the queue's enqueue sequence (one write a call): the first, the
-- caller numbering its jobs first, first + 1, ... modulo SEQ_SPAN (seq_at)
local function take_seq(n)
  -- its own key, not a meta field: a waiting worker WATCHes meta (the pause gate), and
  -- a write there on every enqueue would abort the claim each wake-up brings
  return redis.call('INCRBY', B .. SEQ, n == 1 and '1' or n) - n
end
local function seq_at(first, i)
  return (first + i) % SEQ_SPAN
end

-- put a job (row jk) in the ready backlog: its lane when grouped, else pending.
-- A lane's job is also in `gindex`, the one index of every lane's jobs (same score),
-- which answers counts and pages of pending without walking the lanes.
-- The group is recorded too: a job enqueued with a delay reaches its lane only here,
-- and a lane missing from `groups` would be invisible to counts, drain and obliterate.
-- Every caller pushes one wake token per job it made ready, so the ring stays quiet.
-- A caller that freed the job's lane slot gives it back first (give_back), so the only
-- change left here is a lane that grew: the ring is never searched. `score` is the
-- job's run_score.
local function make_ready(id, jk, g, score)
  redis.call('HSET', jk, 'state', 'pending')
  if g then
    local lane = lane_key(g)
    local before = redis.call('ZCARD', lane)
    redis.call('ZADD', lane, score, id)
    redis.call('ZADD', B .. GINDEX, score, id)
    redis.call('SADD', B .. GROUPS, g)
    lane_grew(g, before, true)
  else
    redis.call('ZADD', B .. PENDING, score, id)
  end
end

-- a keep_last job `held` waits in the schedule (at DEDUP_HOLD) behind a running job:
-- let it go now, ready at its run_score, as promote would (its row drops dedup_behind)
local function unhold(held)
  local hk = B .. JOB .. held
  local f = redis.call('HMGET', hk, 'group', 'priority', 'seq')
  redis.call('ZREM', B .. SCHEDULE, held)
  redis.call('HDEL', hk, 'dedup_behind')
  make_ready(held, hk, f[1], run_score(f[2], f[3]))
  push_wake(1)
  emit(ev('promoted', held))
end

-- an ending of job id releases its dedup key d: deleted when it still names id (a newer
-- job may hold it now), unless it has a TTL (a throttle window: time ends it, not the
-- job); a held keep_last job that ends (removed) hands the key back to the running job
-- it waited behind; when the key names a keep_last job held behind id, that job is let
-- go instead and holds the key from now on. A job without dedup costs nothing.
local function release_dedup(id, d)
  local dk = B .. DEDUP .. d
  local holder = redis.call('GET', dk)
  if holder == id then
    if redis.call('PTTL', dk) < 0 then
      local owner = redis.call('HGET', B .. JOB .. id, 'dedup_behind')
      if owner and redis.call('EXISTS', B .. JOB .. owner) == 1 then
        redis.call('SET', dk, owner)
      else
        redis.call('DEL', dk)
      end
    end
  elseif holder and redis.call('HGET', B .. JOB .. holder, 'dedup_behind') == id then
    unhold(holder)
  end
end

-- delete a row with its logs (lines and their times), lock and error history; release its dedup key if it
-- still names it; a flow parent's row (field `children`) also its :deps, :kids and
-- :kidfails. A caller that already read the row's dedup and children fields passes
-- them (false when absent); with dedup nil both are read here.
local function delete_row(id, jk, dedup, kids)
  local d = dedup
  if d == nil then
    local f = redis.call('HMGET', jk, 'dedup', 'children')
    d, kids = f[1], f[2]
  end
  if d then release_dedup(id, d) end
  if kids then
    redis.call('DEL', jk, jk .. LOGS, jk .. LOCK, jk .. ERRORS, jk .. LOGTIMES,
      jk .. DEPS, jk .. KIDS, jk .. KIDFAILS)
  else
    redis.call('DEL', jk, jk .. LOGS, jk .. LOCK, jk .. ERRORS, jk .. LOGTIMES)
  end
end

-- ZREM many members in chunks that stay under Lua's unpack limit
local function zrem_all(key, ids)
  local i = 1
  while i <= #ids do
    local j = math.min(i + 499, #ids)
    redis.call('ZREM', key, unpack(ids, i, j))
    i = j + 1
  end
end

-- DEL many keys, 1000 a call (Lua's unpack limit)
local function del_all(keys)
  for i = 1, #keys, 1000 do
    redis.call('DEL', unpack(keys, i, math.min(i + 999, #keys)))
  end
end

-- One ZADD of the pairs score, member, ... in zs, the last pair first, in slices of 500
-- pairs (Lua's unpack limit). A batch's members come in ascending order (a ready
-- batch's scores ascend with its seqs; a scheduled one shares its score and its minted
-- ids ascend), and a small sorted set is a
-- listpack, where each member is placed by a scan from the head: sent last-first,
-- each lands at the head, so a batch of n costs n short scans instead of n^2/2 long
-- ones. The set written is the same in any order.
local function zadd_desc(key, zs)
  local n = #zs
  if n == 2 then
    redis.call('ZADD', key, zs[1], zs[2])
    return
  end
  local rz = {}
  for i = n - 1, 1, -2 do
    rz[n - i] = zs[i]
    rz[n - i + 1] = zs[i + 1]
  end
  for i = 1, n, 1000 do
    redis.call('ZADD', key, unpack(rz, i, math.min(i + 999, n)))
  end
end

-- Trim at most k members of zset `key` scored before `cut` (an index whose score is a
-- time), from its oldest end: one ZCOUNT, and one ZREMRANGEBYRANK when any are due (no
-- member crosses the wire). Bounded by k, and by time alone, never by the members.
local function trim_before(key, cut, k)
  -- a whole number goes as %d text: cheaper than the number's own format, same digits
  if type(cut) == 'number' and cut % 1 == 0 then cut = string.format('%d', cut) end
  local due = redis.call('ZCOUNT', key, '-inf', '(' .. cut)
  if due > 0 then
    redis.call('ZREMRANGEBYRANK', key, '0', string.format('%d', math.min(due, k) - 1))
  end
end

-- settled tombstones: complete and remove_job leave the ids they delete in `settled`
-- (score = server ms) for SETTLED_MS, and enqueue treats such an id as a duplicate, so
-- an enqueue re-sent after a lost reply cannot bring back a job that already ran. A
-- kept row needs none while it stays (enqueue sees the row); the trims and clean that
-- delete kept rows leave one for each row that settled less than SETTLED_MS before,
-- stamped at the deletion as remove_job's is (lib/history).
-- One ZADD for a call's ids (500 a slice), stamped `nows` (now as text, when the caller
-- has it) or `now`; then the expired ones are trimmed from the oldest end, a few more
-- than the call added (trim_before), so the index keeps up with any rate, whatever the
-- ids look like. An idle queue's are trimmed by the workers' beat (worker_beat).
local SETTLED_MS = 60000
local function tombstones(ids, now, nows)
  local sk = B .. SETTLED
  local zs, n = {}, #ids
  for i, id in ipairs(ids) do
    -- the last id first: see zadd_desc
    zs[2 * (n - i) + 1] = nows or now
    zs[2 * (n - i) + 2] = id
  end
  for i = 1, #zs, 1000 do
    redis.call('ZADD', sk, unpack(zs, i, math.min(i + 999, #zs)))
  end
  trim_before(sk, now - SETTLED_MS, 2 * n + 8)
end
-- one id (the one-by-one paths): tombstones' writes for {id}, without its tables
local function tombstone(id, now, nows)
  local sk = B .. SETTLED
  redis.call('ZADD', sk, nows or now, id)
  trim_before(sk, now - SETTLED_MS, 10)
end
local function settled_recently(id, now)
  local s = redis.call('ZSCORE', B .. SETTLED, id)
  return s ~= false and tonumber(s) >= now - SETTLED_MS
end
