-- obliterate: destroy a paused queue down to nothing, bounded by a per-call budget.
-- KEYS[1]  the queue's meta hash emq:{q}:meta;  KEYS[2] the queue base emq:{q}:
-- ARGV[1]  'force' or '';  ARGV[2] budget (jobs per call)
-- Reply:   0 the queue is gone (no emq:{q}:* key left); 1 work remains: call again
-- Refusals: EMQSTATE not paused; EMQSTATE active jobs present (unless forced).
--          Both are checked before the first write.
-- Writes:  deletes active (forced), pending, schedule, dead, every lane, each row with
--          its logs and lock (dedup keys released), then the repeat records, and once
--          every set is empty: metrics, lane structures, wake, repeat registry, meta.
local meta = KEYS[1]
local B = KEYS[2]
--! include common
if not redis.call('HGET', meta, 'paused') then
  return redis.error_reply('EMQSTATE not paused')
end
local force = ARGV[1] == 'force'
if not force and redis.call('EXISTS', B .. 'active') == 1 then
  return redis.error_reply('EMQSTATE active jobs present')
end
local budget = tonumber(ARGV[2])

-- delete up to `budget` members of a job set; true when the budget is spent
local function sweep(setkey)
  local ids = redis.call('ZRANGE', setkey, 0, budget - 1)
  if #ids == 0 then return false end
  for _, id in ipairs(ids) do delete_row(id, B .. 'job:' .. id) end
  zrem_all(setkey, ids)
  budget = budget - #ids
  return budget <= 0
end

for _, t in ipairs({'active', 'pending', 'schedule', 'dead'}) do
  if sweep(B .. t) then return 1 end
end
for _, g in ipairs(redis.call('SMEMBERS', B .. 'groups')) do
  if sweep(lane_key(g)) then return 1 end
end
-- the repeat records, under the same budget
local names = redis.call('ZRANGE', B .. 'repeat', 0, budget - 1)
if #names > 0 then
  for _, nm in ipairs(names) do redis.call('DEL', B .. 'repeat:' .. nm) end
  zrem_all(B .. 'repeat', names)
  budget = budget - #names
  if budget <= 0 then return 1 end
end
redis.call('DEL', B .. 'metrics:completed', B .. 'metrics:failed', B .. 'groups',
  B .. 'ring', B .. 'gactive', B .. 'glimit', B .. 'gweight', B .. 'gpaused',
  B .. 'gturn', B .. 'wake', B .. 'repeat', B .. 'repeat:lock', meta)
emit('{"event":"obliterated"}')
return 0
