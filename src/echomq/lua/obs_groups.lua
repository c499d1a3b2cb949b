#!lua flags=no-writes
-- obs_groups: one SSCAN page of a queue's groups for a metrics scrape (read-only).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  the cursor ('0' to start);  ARGV[2] the COUNT hint
-- Reply:   {next cursor ('0' when done), then per group: name, lane depth,
--           in flight, oldest lane id ('' = none)}
-- Refusals: none.
-- Writes:  none.
local B = KEYS[1]
--! include keys
--! include oldest
local page = redis.call('SSCAN', B .. GROUPS, ARGV[1], 'COUNT', tonumber(ARGV[2]))
local out = {page[1]}
for _, g in ipairs(page[2]) do
  local lane = B .. LANE .. g .. LANE_END
  out[#out + 1] = g
  out[#out + 1] = redis.call('ZCARD', lane)
  out[#out + 1] = tonumber(redis.call('HGET', B .. GACTIVE, g) or '0')
  out[#out + 1] = oldest(lane)
end
return out
