-- counts: jobs in every state (lanes counted in pending), the metrics and the pause.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     none
-- Reply:   {pending, active, scheduled, dead, completed, failed, paused(0|1)}
-- Refusals: none. Read-only.
local B = KEYS[1]
-- every lane's jobs are in gindex too: the lanes are counted without walking them
local pending = redis.call('ZCARD', B .. 'pending') + redis.call('ZCARD', B .. 'gindex')
return {
  pending,
  redis.call('ZCARD', B .. 'active'),
  redis.call('ZCARD', B .. 'schedule'),
  redis.call('ZCARD', B .. 'dead'),
  tonumber(redis.call('HGET', B .. 'metrics:completed', 'count') or '0'),
  tonumber(redis.call('HGET', B .. 'metrics:failed', 'count') or '0'),
  redis.call('HEXISTS', B .. 'meta', 'paused'),
}
