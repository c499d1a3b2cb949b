#!lua flags=no-writes
-- counts: jobs in every state (lanes counted in pending), the metrics and the pause.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     none
-- Reply:   {pending, active, scheduled, dead, completed, failed, paused(0|1), kept,
--          waiting_children}
--          (completed and failed: the metrics totals; kept: the completed jobs kept
--          as history, ZCARD completed; waiting_children: the flow parents waiting for
--          their children, ZCARD waiting, last so that older readers keep their indices)
-- Refusals: none. Read-only.
local B = KEYS[1]
--! include keys
-- every lane's jobs are in gindex too: the lanes are counted without walking them
local pending = redis.call('ZCARD', B .. PENDING) + redis.call('ZCARD', B .. GINDEX)
return {
  pending,
  redis.call('ZCARD', B .. ACTIVE),
  redis.call('ZCARD', B .. SCHEDULE),
  redis.call('ZCARD', B .. DEAD),
  tonumber(redis.call('HGET', B .. METRICS_COMPLETED, 'count') or '0'),
  tonumber(redis.call('HGET', B .. METRICS_FAILED, 'count') or '0'),
  redis.call('HEXISTS', B .. META, 'paused'),
  redis.call('ZCARD', B .. COMPLETED),
  redis.call('ZCARD', B .. WAITING),
}
