-- lib/oldest: the oldest candidate of a backlog without walking it (the metrics scrape).

-- The oldest id among the heads of the first and the last priority band of zset z
-- ('' when empty): ids are time-ordered, so a band's first member is its oldest.
local function oldest(z)
  local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if #first == 0 then return '' end
  local best = first[1]
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if last[2] ~= first[2] then
    local head = redis.call('ZRANGEBYSCORE', z, last[2], last[2], 'LIMIT', 0, 1)
    if head[1] and head[1] < best then best = head[1] end
  end
  return best
end
