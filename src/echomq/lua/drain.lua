-- drain: delete the pending backlog (flat and every lane) and, when asked, the schedule,
-- at most `budget` jobs per call. Active jobs and the repeat registry are not touched.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  '1' to include the schedule set, else '';  ARGV[2] budget
-- Reply:   {drained in this call, more (1 when the budget was spent: call again)}
-- Refusals: none.
-- Writes:  ZREM from pending/lanes/schedule, rows + logs + locks deleted, dedup keys
--          released, emptied lanes leave the ring; event 'drained' with the count.
local B = KEYS[1]
--! include common
local left = tonumber(ARGV[2])
local total = 0

local function wipe(setkey)
  if left <= 0 then return end
  local ids = redis.call('ZRANGE', setkey, 0, left - 1)
  for _, id in ipairs(ids) do delete_row(id, B .. 'job:' .. id) end
  zrem_all(setkey, ids)
  left = left - #ids
  total = total + #ids
end

wipe(B .. 'pending')
for _, g in ipairs(redis.call('SMEMBERS', B .. 'groups')) do
  wipe(lane_key(g))
  ring_sync(g)
end
if ARGV[1] == '1' then wipe(B .. 'schedule') end
if total > 0 then emit('{"event":"drained","count":' .. total .. '}') end
return {total, left <= 0 and 1 or 0}
