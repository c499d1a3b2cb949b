-- obs_queue: one queue's sizes for a metrics scrape (read-only, O(log n)).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     none
-- Reply:   {pending (flat), active, scheduled, dead, completed, failed, paused (0|1),
--           live groups, oldest flat pending id ('' = none), server time ms,
--           rate limited (0|1: no claim may start a job now: a full rate window, a
--           handler's hold or the concurrency cap), ms until a start is allowed (the
--           window's or the hold's; 0 for the cap or none), lanes held (gwait),
--           completed jobs kept as history (the completed set's size)}
-- Refusals: none.
-- Writes:  none.
local B = KEYS[1]
--! include keys
--! include oldest
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- flow control, read only (the claim trims the logs; lib/limits)
local m = redis.call('HMGET', B .. META, 'rate_max', 'rate_ms', 'concurrency', 'limited_until')
local limited, wait = 0, 0
local untl, cap, rmax, rms = tonumber(m[4]), tonumber(m[3]), tonumber(m[1]), tonumber(m[2])
if untl and untl > now then limited, wait = 1, untl - now end
if cap and redis.call('ZCARD', B .. ACTIVE) >= cap then limited = 1 end
if rmax and rms then
  local n = redis.call('ZCOUNT', B .. RATE, now - rms + 1, '+inf')
  if n >= rmax then
    local r = redis.call('ZRANGEBYSCORE', B .. RATE, now - rms + 1, '+inf', 'WITHSCORES',
      'LIMIT', n - rmax, 1)
    limited = 1
    if #r > 0 then wait = math.max(wait, tonumber(r[2]) + rms - now) end
  end
end
return {
  redis.call('ZCARD', B .. PENDING),
  redis.call('ZCARD', B .. ACTIVE),
  redis.call('ZCARD', B .. SCHEDULE),
  redis.call('ZCARD', B .. DEAD),
  redis.call('HGET', B .. METRICS_COMPLETED, 'count') or '0',
  redis.call('HGET', B .. METRICS_FAILED, 'count') or '0',
  redis.call('HEXISTS', B .. META, 'paused'),
  redis.call('SCARD', B .. GROUPS),
  oldest(B .. PENDING),
  now,
  limited,
  wait,
  redis.call('ZCARD', B .. GWAIT),
  redis.call('ZCARD', B .. COMPLETED),
}
