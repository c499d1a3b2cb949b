#!lua flags=allow-oom
-- drain: delete the pending backlog (flat and every lane) and, when asked, the schedule,
-- at most `budget` jobs per call. Active jobs and the repeat registry are not touched.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  '1' to include the schedule set, else '';  ARGV[2] budget (jobs per call; a
--          call also stops after about 1 ms of server time and answers "more")
-- ARGV[3]  actor (optional; '' = none), written to the audit journal
-- Reply:   {drained in this call, more (1 when the budget was spent: call again)}
-- Refusals: none.
-- Writes:  ZPOPMIN from pending, the lanes' index `gindex` (each job then leaves its
--          lane) and schedule; each row deleted with its logs and lock, its dedup key
--          released when it still names the job; a lane left empty leaves the ring; the settled tombstones (`settled`) deleted; event 'drained'
--          with the count (when any); flow parents waiting for their children
--          (`waiting`) are drained too, with their :deps/:kids/:kidfails; a flow
--          child drained is its ending, outcome drained (lib/flow: its parent
--          resolved by its policy, or an outbox entry); one audit entry
--          per call that drained any (count = this call's, outcome more | done).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include flow
--! include bulk
local left = tonumber(ARGV[2])
local total = 0
-- a call also stops after about a slice of server time (then it answers "more")
local over, cut = slicer(), false

-- delete up to `left` jobs of one backlog set, from its head; returns how many went.
-- ZPOPMIN takes them off in one pass (no second walk to ZREM them).
local function wipe(setkey, lane)
  local n = 0
  while left > 0 and not cut do
    local popped = redis.call('ZPOPMIN', setkey, math.min(left, 64))
    for i = 1, #popped, 2 do
      flow_drop(popped[i], 'drained')
      if lane then redis.call('ZREM', B .. GINDEX, popped[i]) end
    end
    local k = #popped / 2
    left, total, n = left - k, total + k, n + k
    -- a call that deleted nothing never stops early: the walk over empty lanes
    -- always reaches its end, so a drain always finishes
    if k == 0 then break end
    if over(SLICE_EVERY) then cut = true end
    if k < 64 then break end
  end
  return n
end

wipe(B .. PENDING)
-- flow parents waiting for their children are backlog too (their children keep
-- running; their endings find no parent)
wipe(B .. WAITING)
-- the lanes' jobs, found through their index: no walk over the groups. A lane that
-- still holds jobs keeps its place on the ring (what it serves did not change), so
-- only a lane this left empty is synced, batch by batch (inside the slice).
while left > 0 and not cut do
  local k, emptied = math.min(left, 64), {}
  local popped, n = drop_indexed(k, emptied, 'drained')
  for g in pairs(emptied) do ring_sync(g) end
  -- a stale member (no job behind it) costs budget too, so the call stays bounded
  left, total = left - popped, total + n
  if popped < k then break end
  if over(SLICE_EVERY) then cut = true end
end
-- then lanes the index does not know (a queue written before it: see reindex); for an
-- indexed queue every lane is empty by now, and a drained group has left `groups`
-- unless it keeps settings, so this pass costs a read per such group, once
if left > 0 and not cut then
  for _, g in ipairs(redis.call('SMEMBERS', B .. GROUPS)) do
    -- only a lane that lost jobs can have changed its place on the ring
    if wipe(lane_key(g), true) > 0 then ring_sync(g) end
    if left <= 0 or cut then break end
  end
end
if left > 0 and not cut and ARGV[1] == '1' then wipe(B .. SCHEDULE) end
if total > 0 then emit('{"event":"drained","count":' .. total .. '}') end
-- the settled tombstones go with the backlog (the wire contract: drain deletes them);
-- UNLINK: a busy queue's minute of tombstones is freed off the server's main thread
redis.call('UNLINK', B .. SETTLED)
local more = left <= 0 or cut
if total > 0 then
    audit('drain', cjson.encode({include_schedule = ARGV[1] == '1', budget = tonumber(ARGV[2])}),
    more and 'more' or 'done', total, ARGV[3])
end
return {total, more and 1 or 0}
