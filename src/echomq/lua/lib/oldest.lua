-- lib/oldest: the oldest candidate of a backlog without walking it (the metrics scrape).

-- The oldest id among the heads of the first and the last priority band of zset z
-- ('' when empty). A band holds one priority p: the scores p * SEQ_SPAN ..
-- (p + 1) * SEQ_SPAN - 1, in enqueue order (lib/common run_score), so a band's head is
-- its longest waiting job; ids are time-ordered, so the older of two heads is the
-- smaller id.
local function oldest(z)
  local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if #first == 0 then return '' end
  local best = first[1]
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  local band = math.floor(tonumber(last[2]) / SEQ_SPAN)
  if band ~= math.floor(tonumber(first[2]) / SEQ_SPAN) then
    local head = redis.call('ZRANGEBYSCORE', z, band * SEQ_SPAN, '+inf', 'LIMIT', 0, 1)
    if head[1] and head[1] < best then best = head[1] end
  end
  return best
end
