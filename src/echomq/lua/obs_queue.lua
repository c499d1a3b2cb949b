#!lua flags=no-writes
-- obs_queue: one queue's sizes for a metrics scrape (read-only, O(log n)).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     none
-- Reply:   {pending (flat), active, scheduled, dead, completed, failed, paused (0|1),
--           live groups, oldest flat pending id ('' = none), server time ms,
--           rate limited (0|1: no claim may start a job now: a full rate window, a
--           handler's hold or the concurrency cap), ms until a start is allowed (the
--           window's or the hold's; 0 for the cap or none), lanes held (gwait), starts in
--           the rate window ending now (0 without a rate limit), completed jobs kept as
--           history (the completed set's size), flow parents waiting for their
--           children (the waiting set's size)}
-- Refusals: none.
-- Writes:  none.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include limits
--! include oldest
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- flow control, read only (the claim trims the logs; lib/limits)
local m = redis.call('HMGET', B .. META, 'rate_max', 'rate_ms', 'concurrency', 'limited_until')
local limited, wait, starts = 0, 0, 0
local untl, cap, rmax, rms = tonumber(m[4]), tonumber(m[3]), tonumber(m[1]), tonumber(m[2])
if untl and untl > now then limited, wait = 1, untl - now end
if cap and redis.call('ZCARD', B .. ACTIVE) >= cap then limited = 1 end
if rmax and rms then
  -- the queue's counted log (lib/limits): the running count less the window's base
  local last = count_last(B .. RATE)
  starts = last - count_at(B .. RATE, now - rms)
  if starts >= rmax then
    limited = 1
    wait = math.max(wait, counted_free_at(B .. RATE, rms, now, last, last, rmax) - now)
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
  starts,
  redis.call('ZCARD', B .. COMPLETED),
  redis.call('ZCARD', B .. WAITING),
}
