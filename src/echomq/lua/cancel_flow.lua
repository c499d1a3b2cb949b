#!lua flags=allow-oom
-- cancel_flow: one queue's step of cancelling a flow (the plan reads the tree, then
-- calls this once per queue, the root's queue first, parents before their children).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  the flow's root ref 'queue:id' (journaled);  ARGV[2] actor ('' = none);
-- ARGV[3]  'root' when ARGV[5] is the root itself (it must be waiting_children; it
--          journals), 'first' for a call in a queue where no call journaled yet (it
--          journals when it changed something), 'more' for a later call in a queue
--          that has its entry (it journals nothing)
-- ARGV[4]  how many nodes the whole cancel visits in this queue (journaled)
-- ARGV[5..] the ids of this queue's nodes to cancel, each parent before its children
-- Reply:   {removed, cancelling, failed, relay, journaled}: jobs not yet started that
--          were removed (pending or scheduled), running jobs asked to stop (cancel_job's
--          request), waiting parents ended as dead ('cancelled by an operator'); relay 1
--          when an ending wrote an outbox entry (the client relays it), else 0;
--          journaled 1 when this call wrote the queue's audit entry. A row that is gone,
--          dead, completed, locked or already asked to stop is left as it is.
-- Refusals: with ARGV[3] = 'root': -1 the root has no row; EMQSTATE not waiting the root
--          is not waiting_children. Both before any write.
-- Writes:  a waiting parent: lib/flow flow_fail (ZREM waiting, ZADD dead, last_error,
--          dedup released, metrics:failed, event 'dead') and its ending (flow_ended,
--          outcome cancelled). A pending or scheduled job: its ending (flow_ended,
--          outcome cancelled: a parent here records it, one elsewhere gets an outbox
--          entry), ZREM pending/schedule and its lane + gindex, the row deleted (with a
--          parent's deps/kids/kidfails; its dedup key released), its tombstone, the
--          lane's ring place re-synced, event 'removed'. An active job: HSET cancel
--          <attempts>, event 'cancelling' (the worker stops it cooperatively: it goes
--          dead, its ending then recorded on its parent). The root's call, or the
--          first call of another queue that changed something: one audit entry
--          (`cancel_flow`, args {job = the root, nodes = ARGV[4]}, count the changes of
--          this call).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include flow
--! include audit
if ARGV[3] == 'root' then
  local st = redis.call('HGET', B .. JOB .. ARGV[5], 'state')
  if not st then return -1 end
  if st ~= 'waiting_children' then return redis.error_reply('EMQSTATE not waiting') end
end
local ERR = 'cancelled by an operator'
local removed, cancelling, failed, relay = 0, 0, 0, 0
local now = now_ms()
for i = 5, #ARGV do
  local id = ARGV[i]
  local jk = B .. JOB .. id
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'cancel', 'group', 'lock', 'parent',
    'on_fail', 'dedup', 'children')
  local st = f[1]
  if st == 'waiting_children' then
    local gp, gpol = flow_fail(id, jk, ERR)
    if flow_ended(id, jk, gp, gpol, 'cancelled', ERR) then relay = 1 end
    failed = failed + 1
  elseif (st == 'pending' or st == 'scheduled') and not f[5]
      and redis.call('EXISTS', jk .. LOCK) == 0 then
    if flow_ended(id, jk, f[6], f[7], 'cancelled', '') then relay = 1 end
    local g = f[4]
    redis.call('ZREM', B .. PENDING, id)
    redis.call('ZREM', B .. SCHEDULE, id)
    if g then
      redis.call('ZREM', lane_key(g), id)
      redis.call('ZREM', B .. GINDEX, id)
    end
    delete_row(id, jk, f[8] or false, f[9] or false)
    tombstone(id, now)
    if g then ring_sync(g) end
    emit(ev('removed', id))
    removed = removed + 1
  elseif st == 'active' and f[3] ~= f[2] then
    redis.call('HSET', jk, 'cancel', f[2])
    emit(cjson.encode({event = 'cancelling', job = id, attempt = tonumber(f[2])}))
    cancelling = cancelling + 1
  end
end
local n, journaled = removed + cancelling + failed, 0
if ARGV[3] == 'root' or (ARGV[3] == 'first' and n > 0) then
  audit('cancel_flow', cjson.encode({job = ARGV[1], nodes = tonumber(ARGV[4])}), 'ok', n,
    ARGV[2])
  journaled = 1
end
return {removed, cancelling, failed, relay, journaled}
