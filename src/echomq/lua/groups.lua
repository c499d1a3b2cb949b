-- groups: every group with its depth, in-flight count, limit, weight and pause.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     none
-- Reply:   a flat array, 6 per group: name, depth, in_flight, limit ('' = none),
--          weight, paused (0|1); sorted by name
-- Refusals: none. Read-only.
local B = KEYS[1]
local names = redis.call('SMEMBERS', B .. 'groups')
table.sort(names)
local out = {}
for _, g in ipairs(names) do
  out[#out + 1] = g
  out[#out + 1] = redis.call('ZCARD', B .. 'g:' .. g .. ':pending')
  out[#out + 1] = tonumber(redis.call('HGET', B .. 'gactive', g) or '0')
  out[#out + 1] = redis.call('HGET', B .. 'glimit', g) or ''
  out[#out + 1] = tonumber(redis.call('HGET', B .. 'gweight', g) or '1')
  out[#out + 1] = redis.call('SISMEMBER', B .. 'gpaused', g)
end
return out
