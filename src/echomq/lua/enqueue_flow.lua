#!lua flags=allow-oom
-- enqueue_flow: write one queue's part of a flow (a tree of jobs) in one atomic step.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  n, the number of jobs of this part; ARGV[2] '1' when the caller chose ids
--          (every id is then checked: a row or a recent tombstone refuses the part);
--          then per job, parents before their
--          children (the client orders them), 13 fields and the job's child refs:
--          id, payload, parent ('queue:id', '' = none), on_fail ('' = fail_parent),
--          dedup ('' = none; leaves only), name, group, priority, max_attempts,
--          delay_ms, backoff, keep_ms ('' = absent each), k (its children), then k
--          refs 'queue:id' of its children (every queue's).
-- Reply:   {relay, id or owner, ...}: relay 1 when a deduplicated child's ending was
--          written to this queue's outbox (its parent is in another queue), else 0;
--          then per job its id, or for a job whose dedup id is held by a live job the
--          owner's id (nothing written for it; its parent resolves it as
--          `deduplicated`).
-- Refusals: EMQARG a chosen id that has a row or settled in the last 60 s (the part
--          writes nothing); EMQARG when the arguments do not parse (a count, a number that is not
--          finite, a priority past PRIORITY_MAX); checked before the first write (the
--          client checks the same before sending).
-- Writes:  per job: the row (attempts 0, payload, seq, its options, `parent`/`on_fail`
--          on a child, `children` on a parent, `keep`/`enqueued_at` when kept);
--          a parent: state waiting_children, job:<id>:deps (its children's refs),
--          WAITING (score now), and `due` when it has a delay; a leaf: pending, its
--          lane (+ gindex, groups, ring) or the schedule (delay) as enqueue does;
--          one INCRBY seq for the part; de:<dedup> (NX; a key whose owner is gone is
--          taken over); a wake token per ready job; event 'enqueued' per job.
--          A deduplicated child is its own ending: lib/flow flow_ended, outcome
--          deduplicated, value the owner's id.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include flow
local n = tonumber(ARGV[1])
if not (finite(n) and n >= 0) then return redis.error_reply('EMQARG n is not a count') end
-- parse and check everything first
local jobs = {}
local a = 3
for i = 1, n do
  if #ARGV < a + 12 then return redis.error_reply('EMQARG too few arguments') end
  local j = {}
  for k = 0, 11 do
    local v = ARGV[a + k]
    if v == '' then v = nil end
    j[k + 1] = v
  end
  j[2] = ARGV[a + 1]  -- the payload may be ''
  local k = tonumber(ARGV[a + 12])
  if not (finite(k) and k >= 0 and #ARGV >= a + 12 + k) then
    return redis.error_reply('EMQARG a job\'s child refs do not parse')
  end
  for _, x in ipairs({j[8], j[9], j[10], j[12]}) do
    if not finite(x) then return redis.error_reply('EMQARG an option is not a finite number') end
  end
  if j[8] and math.abs(tonumber(j[8])) > PRIORITY_MAX then
    return redis.error_reply('EMQARG priority is not within -PRIORITY_MAX..PRIORITY_MAX')
  end
  j.refs = a + 13
  j.k = k
  jobs[i] = j
  a = a + 13 + k
end

local now, nows = now_text()
if ARGV[2] == '1' then
  for _, j in ipairs(jobs) do
    if redis.call('EXISTS', B .. JOB .. j[1]) == 1 or settled_recently(j[1], now) then
      return redis.error_reply('EMQARG job ' .. j[1] .. ' exists')
    end
  end
end
local kept = redis.call('EXISTS', B .. KEEPS) == 1
local out = {0}
local written = {}
local dups = {}  -- deduplicated jobs: resolved once every row of the part is written
for _, j in ipairs(jobs) do
  local id = j[1]
  local owner = nil
  if j[5] then
    local dk = B .. DEDUP .. j[5]
    local held = redis.call('SET', dk, id, 'NX', 'GET')
    if held then
      local st = redis.call('HGET', B .. JOB .. held, 'state')
      if (not st or st == 'completed' or st == 'dead') and redis.call('PTTL', dk) < 0 then
        redis.call('SET', dk, id)  -- its owner is gone: the key is free (self-healing)
      else
        owner = held
      end
    end
  end
  if owner then
    out[#out + 1] = owner
    j.owner = owner
    dups[#dups + 1] = j
  else
    out[#out + 1] = id
    written[#written + 1] = j
  end
end

local first = #written > 0 and take_seq(#written) or 0
local ready = 0
for i, j in ipairs(written) do
  local id = j[1]
  local jk = B .. JOB .. id
  local seq = seq_at(first, i - 1)
  local due = j[10] and tonumber(j[10]) > 0 and now + tonumber(j[10]) or nil
  local state = 'pending'
  if j.k > 0 then state = 'waiting_children' elseif due then state = 'scheduled' end
  local f = {'state', state, 'attempts', 0, 'payload', j[2], 'seq', seq}
  local names = {'parent', 'on_fail', 'dedup', 'name', 'group', 'priority', 'max_attempts'}
  for x, name in ipairs(names) do
    local v = j[x + 2]
    if v then f[#f + 1] = name; f[#f + 1] = v end
  end
  if j[11] then f[#f + 1] = 'backoff'; f[#f + 1] = j[11] end
  local keep = j[12] or (kept and '0') or nil
  if keep then
    f[#f + 1] = 'keep'; f[#f + 1] = keep
    f[#f + 1] = 'enqueued_at'; f[#f + 1] = nows
  end
  if j.k > 0 then
    f[#f + 1] = 'children'; f[#f + 1] = j.k
    if due then f[#f + 1] = 'due'; f[#f + 1] = due end
  end
  redis.call('HSET', jk, unpack(f))
  if j.k > 0 then
    for s = j.refs, j.refs + j.k - 1, 500 do
      redis.call('SADD', jk .. DEPS, unpack(ARGV, s, math.min(s + 499, j.refs + j.k - 1)))
    end
    redis.call('ZADD', B .. WAITING, now, id)
  elseif due then
    redis.call('ZADD', B .. SCHEDULE, due, id)
  else
    make_ready(id, jk, j[7], run_score(j[8], seq))
    ready = ready + 1
  end
  emit(ev('enqueued', id))
end
if ready > 0 then push_wake(ready) end
for _, j in ipairs(dups) do
  if flow_ended(j[1], nil, j[3], j[4], 'deduplicated', j.owner) then out[1] = 1 end
end
return out
