#!lua flags=allow-oom
-- drain_group: delete one group's pending lane, at most `budget` jobs per call.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  group;  ARGV[2] budget (a call also stops after about 1 ms of server time
--          and answers more);  ARGV[3] actor (optional), for the audit journal
-- Reply:   {drained in this call, more (1 when the budget or the time was spent)}
-- Refusals: none.
-- Writes:  ZREM lane, rows + logs deleted, dedup released, ring; event 'drained';
--          a flow child's deletion is its ending, outcome drained (lib/flow);
--          one audit entry per call that drained any (outcome more | done).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include flow
--! include bulk
local g = ARGV[1]
local lane = lane_key(g)
local found = redis.call('ZRANGE', lane, 0, tonumber(ARGV[2]) - 1)
local ids, over = {}, slicer()
for i, id in ipairs(found) do
  if over(i) then break end
  ids[i] = id
  flow_drop(id, 'drained')
end
zrem_all(lane, ids)
zrem_all(B .. GINDEX, ids)
ring_sync(g)
if #ids > 0 then
  emit(cjson.encode({event = 'drained', group = g, count = #ids}))
end
local more = #found >= tonumber(ARGV[2]) or #ids < #found
if #ids > 0 then
  audit('drain_group', cjson.encode({group = g, budget = tonumber(ARGV[2])}),
    more and 'more' or 'done', #ids, ARGV[3])
end
return {#ids, more and 1 or 0}
