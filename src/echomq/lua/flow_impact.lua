#!lua flags=no-writes
-- flow_impact: what a drain or an obliterate of this queue does to flows (a bounded read).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  budget: the most backlog jobs examined (1..10000): pending, its lanes'
--          index (gindex), the schedule, then active and dead, each from its oldest end
-- Reply:   {waiting, examined, backlog, children, elsewhere}: the flow parents waiting
--          here (ZCARD waiting: a drain or an obliterate removes them; their children
--          keep running), the jobs examined, the jobs there were to examine, those
--          examined that are flow children (a `parent` field), and of those the ones
--          whose parent is in another queue (their ending reaches it through the outbox)
-- Refusals: EMQARG budget is not a count in 1..10000.
-- Writes:  none.
local B = KEYS[1]
--! include keys
local budget = tonumber(ARGV[1])
if not budget or budget < 1 or budget > 10000 or budget ~= math.floor(budget) then
  return redis.error_reply('EMQARG budget must be a count in 1..10000')
end
local here = string.format('%s:', string.sub(B, 6, -3))
local examined, backlog, children, elsewhere = 0, 0, 0, 0
for _, set in ipairs({PENDING, GINDEX, SCHEDULE, ACTIVE, DEAD}) do
  local key = B .. set
  backlog = backlog + redis.call('ZCARD', key)
  local left = budget - examined
  if left > 0 then
    for _, id in ipairs(redis.call('ZRANGE', key, 0, left - 1)) do
      examined = examined + 1
      local p = redis.call('HGET', B .. JOB .. id, 'parent')
      if p then
        children = children + 1
        if string.sub(p, 1, #here) ~= here then elsewhere = elsewhere + 1 end
      end
    end
  end
end
return {redis.call('ZCARD', B .. WAITING), examined, backlog, children, elsewhere}
