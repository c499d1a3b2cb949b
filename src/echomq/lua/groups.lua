#!lua flags=no-writes
-- groups: one page of the queue's groups, each with its depth, in-flight count, limit,
-- weight, pause and rate limit. The set of groups grows with the tenants, so a call reads one
-- SSCAN page and the client walks the cursor (bounded work per call).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  the SSCAN cursor ('0' to start);  ARGV[2] the page size hint (COUNT)
-- Reply:   {next cursor ('0' when done), then 8 per group: name, depth, in_flight,
--          limit ('' = none), weight, paused (0|1), rate limit ('max_jobs:per_ms', ''
--          = none of its own), held until (server ms while its rate limit or a
--          handler holds it off the ring, else 0)}
-- Refusals: none. Read-only.
local B = KEYS[1]
--! include keys
local page = redis.call('SSCAN', B .. GROUPS, ARGV[1], 'COUNT', tonumber(ARGV[2]))
local out = {page[1]}
for _, g in ipairs(page[2]) do
  out[#out + 1] = g
  out[#out + 1] = redis.call('ZCARD', B .. LANE .. g .. LANE_END)
  out[#out + 1] = tonumber(redis.call('HGET', B .. GACTIVE, g) or '0')
  out[#out + 1] = redis.call('HGET', B .. GLIMIT, g) or ''
  out[#out + 1] = tonumber(redis.call('HGET', B .. GWEIGHT, g) or '1')
  out[#out + 1] = redis.call('SISMEMBER', B .. GPAUSED, g)
  out[#out + 1] = redis.call('HGET', B .. GRATE, g) or ''
  out[#out + 1] = tonumber(redis.call('ZSCORE', B .. GWAIT, g) or '0')
end
return out
