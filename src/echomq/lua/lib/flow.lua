-- lib/flow: a flow child's ending resolves its parent's dependency (issue 27).
-- Include after keys and common. The including script defines B, the queue base.
--
-- The contract every ending script keeps (complete, retry to dead, the stalled check to
-- dead, remove, bulk remove, drain, drain of a lane, obliterate, enqueue deduplicated,
-- cancel_flow, release_parent/fail_parent for a parent that is itself a child):
--
--   flow_ended(id, jk, parent, on_fail, outcome, value)
--     id, jk:   the child's id and row key (the row may be read, it is not yet deleted)
--     parent:   the row's `parent` field ('queue:id'), or nil/false: then nothing happens
--               and nothing is read (a job of no flow costs nothing more)
--     on_fail:  the row's `on_fail` field (nil = fail_parent)
--     outcome:  one of schema.FLOW_OUTCOMES: completed | failed | removed | drained |
--               obliterated | cancelled | missing | deduplicated
--     value:    completed: the result text ('' none); failed: the error text; else ''
--   When the parent is in this queue (same base), the dependency is resolved here, in
--   the same atomic step (resolve_dep); otherwise the ending is written to this queue's
--   outbox (OUTBOX + OUTMSG, keyed by the child id: written once) and a relay applies it
--   to the parent's queue with the resolve_child transition, idempotent by child ref.
--   Returns true when an outbox entry was written (the caller may tell its client to
--   relay now).
--
--   resolve_dep(pid, ref, outcome, on_fail, value)   (returns true when it wrote an
--     outbox entry: see below)
--     In the parent's queue (B is the parent's base): SREM the ref from job:<pid>:deps;
--     0 removed = already resolved or no such parent: nothing else is written
--     (idempotent). Else record (KIDS for completed, KIDFAILS otherwise unless
--     remove_dependency) and apply the policy: fail_parent on a non-completed outcome
--     (except deduplicated) ends a waiting parent as dead, naming the child and its error
--     (and that is the parent's own ending: resolved up the tree in a loop); continue
--     makes a waiting parent ready at once; when the last dependency resolves, a waiting
--     parent becomes ready (pending or its lane, or the schedule if it asked for a delay)
--     in the same step, with a wake token.
--
-- A parent's row: state waiting_children, in WAITING (score = since), :deps holding the
-- refs of its unresolved children (every queue's), field `children`; field `due` when
-- it was enqueued with a delay (it becomes ready no earlier: the schedule at `due`).
-- resolve_dep returns true when it wrote an outbox entry: a parent that went dead by
-- fail_parent and is itself a child of a parent in another queue (its own ending).
-- Chains of parents in this queue are resolved in a loop (no recursion: the loader
-- splices a definition only after the ones it uses).
-- Also here for the operator verbs (release_parent, fail_parent): flow_release(pid, pk)
-- makes a waiting parent ready (ZREM waiting; pending/lane, or the schedule at `due`;
-- wake; event waiting_done) and flow_fail(pid, pk, err) makes it dead (ZREM waiting,
-- dead, last_error, dedup released, metrics failed, event dead) and returns its own
-- `parent` and `on_fail` fields for the caller to call flow_ended with (outcome failed).
-- flow_drop(id, outcome) deletes a row as an ending (drain, drain_group, bulk remove,
-- obliterate): flow_ended for a child, then lib/common delete_row (a parent's :deps,
-- :kids, :kidfails with it), one HMGET of dedup/children/parent/on_fail for both.
-- A script that includes lib/bulk and uses drop_indexed includes this lib before it.
-- The relay (Python, echomq.flows.relay): outbox_read (oldest first, bounded), then
-- resolve_child in each parent queue, then outbox_done (ZREM/HDEL by child id).

-- The helpers live inside flow_lib(), made when a flow's job ends: every definition
-- a script carries costs a closure on every call, and the scripts that include this
-- lib are the hot paths (complete, retry), where a job of no flow makes only the two
-- closures flow_lib and flow_ended.
local function flow_lib()
  -- this queue's name: B is emq:{q}:
  local function flow_queue()
    return string.sub(B, 6, -3)
  end

  -- a child's ref in its parent's :deps, 'queue:id' (queue names hold no ':')
  local function flow_ref(q, id)
    return string.format('%s:%s', q, id)
  end

  -- write child id's ending to this queue's outbox, once per child id (NX: a second
  -- ending of the same child, e.g. a dead child later removed, is already on its way or
  -- relayed; the relay's resolve is idempotent by ref anyway)
  local function flow_outbox(id, pq, pid, outcome, on_fail, value)
    if redis.call('HSETNX', B .. OUTMSG, id, cjson.encode({pq = pq, pid = pid, o = outcome,
        p = on_fail or '', v = value or ''})) == 1 then
      redis.call('ZADD', B .. OUTBOX, now_text(), id)
    end
  end

  -- a waiting parent's children are resolved (or `continue`): it becomes ready now, or
  -- at its due time when it was enqueued with a delay
  local function flow_release(pid, pk)
    local f = redis.call('HMGET', pk, 'group', 'priority', 'seq', 'due')
    redis.call('ZREM', B .. WAITING, pid)
    local due = tonumber(f[4])
    if due and due > now_text() then
      redis.call('HSET', pk, 'state', 'scheduled')
      redis.call('ZADD', B .. SCHEDULE, due, pid)
    else
      make_ready(pid, pk, f[1], run_score(f[2], f[3]))
      push_wake(1)
    end
    emit(ev('waiting_done', pid))
  end

  -- a waiting parent goes dead (fail_parent): its ending. Returns its own parent and
  -- policy (nil when it is no child)
  local function flow_fail(pid, pk, err)
    local now = now_text()
    local f = redis.call('HMGET', pk, 'dedup', 'keep', 'parent', 'on_fail')
    redis.call('ZREM', B .. WAITING, pid)
    if f[2] then
      redis.call('HSET', pk, 'state', 'dead', 'last_error', err, 'died_at', now)
    else
      redis.call('HSET', pk, 'state', 'dead', 'last_error', err)
    end
    redis.call('ZADD', B .. DEAD, now, pid)
    if f[1] then release_dedup(pid, f[1]) end
    count_metric(B .. METRICS_FAILED, 1, now)
    emit(cjson.encode({event = 'dead', job = pid, error = err}))
    return f[3], f[4]
  end

  local function resolve_dep(pid, ref, outcome, on_fail, value)
    local q = flow_queue()
    while pid do
      local pk = B .. JOB .. pid
      if redis.call('SREM', pk .. DEPS, ref) == 0 then return false end
      local pol = on_fail or ''
      if outcome == 'completed' then
        redis.call('HSET', pk .. KIDS, ref, value or '')
      elseif pol ~= 'remove_dependency' or outcome == 'deduplicated' then
        redis.call('HSET', pk .. KIDFAILS, ref,
          cjson.encode({outcome = outcome, error = value or ''}))
      end
      if redis.call('HGET', pk, 'state') ~= 'waiting_children' then return false end
      local fails = outcome ~= 'completed' and outcome ~= 'deduplicated'
      if fails and (pol == '' or pol == 'fail_parent') then
        local err = string.format('child %s %s: %s', ref, outcome, value or '')
        local gp, gpol = flow_fail(pid, pk, err)
        if not gp then return false end
        -- the parent's death is its own ending: up the tree
        local gq, gid = string.match(gp, '^([^:]*):(.*)$')
        if gq ~= q then
          flow_outbox(pid, gq, gid, 'failed', gpol, err)
          return true
        end
        ref, pid, outcome, on_fail, value = flow_ref(q, pid), gid, 'failed', gpol, err
      else
        if (fails and pol == 'continue') or redis.call('SCARD', pk .. DEPS) == 0 then
          flow_release(pid, pk)
        end
        pid = nil
      end
    end
    return false
  end

  local function flow_ended(id, jk, parent, on_fail, outcome, value)
    if not parent then return false end
    local pq, pid = string.match(parent, '^([^:]*):(.*)$')
    if not pq then return false end
    if pq == flow_queue() then
      return resolve_dep(pid, flow_ref(pq, id), outcome, on_fail, value)
    end
    flow_outbox(id, pq, pid, outcome, on_fail, value)
    return true
  end

  -- delete job id's row as an ending with `outcome` (drain, drain of a lane, bulk
  -- removal, obliterate): a flow child resolves its parent first (flow_ended), a flow
  -- parent's :deps/:kids/:kidfails go with its row (lib/common delete_row). One HMGET
  -- in place of delete_row's own. Returns true when an outbox entry was written.
  local function flow_drop(id, outcome)
    local jk = B .. JOB .. id
    local r = redis.call('HMGET', jk, 'dedup', 'children', 'parent', 'on_fail')
    local relay = false
    if r[3] then relay = flow_ended(id, jk, r[3], r[4], outcome, '') end
    delete_row(id, jk, r[1], r[2])
    return relay
  end
  return {ended = flow_ended, resolve = resolve_dep, release = flow_release, fail = flow_fail,
    drop = flow_drop}
end

local function flow_ended(id, jk, parent, on_fail, outcome, value)
  if not parent then return false end
  return flow_lib().ended(id, jk, parent, on_fail, outcome, value)
end

local function resolve_dep(pid, ref, outcome, on_fail, value)
  return flow_lib().resolve(pid, ref, outcome, on_fail, value)
end

local function flow_drop(id, outcome)
  return flow_lib().drop(id, outcome)
end

local function flow_release(pid, pk)
  return flow_lib().release(pid, pk)
end

local function flow_fail(pid, pk, err)
  return flow_lib().fail(pid, pk, err)
end
