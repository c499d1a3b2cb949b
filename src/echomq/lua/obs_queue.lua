-- obs_queue: one queue's sizes for a metrics scrape (read-only, O(log n)).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     none
-- Reply:   {pending (flat), active, scheduled, dead, completed, failed, paused (0|1),
--           live groups, oldest flat pending id ('' = none), server time ms,
--           completed jobs kept as history (the completed set's size)}
-- Refusals: none.
-- Writes:  none.
local B = KEYS[1]
--! include keys
--! include oldest
local t = redis.call('TIME')
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
  tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
  redis.call('ZCARD', B .. COMPLETED),
}
