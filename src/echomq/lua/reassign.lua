-- reassign: move a pending job to another group's lane ('' = the flat pending set).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the target group or '';  ARGV[3] actor (optional), for the audit
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTATE not pending. Both before any write.
-- Writes:  ZREM old lane|pending, ZADD new lane|pending (same score), row group,
--          groups, ring of both groups; event 'reassigned'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local id, jk, to = ARGV[1], KEYS[2], ARGV[2]
local f = redis.call('HMGET', jk, 'state', 'group')
if not f[1] then return -1 end
if f[1] ~= 'pending' then return redis.error_reply('EMQSTATE not pending') end
local from = f[2]
local src = from and lane_key(from) or (B .. PENDING)
local score = redis.call('ZSCORE', src, id) or '0'
redis.call('ZREM', src, id)
if from then redis.call('ZREM', B .. GINDEX, id) end
if to == '' then
  redis.call('HDEL', jk, 'group')
  redis.call('ZADD', B .. PENDING, score, id)
  push_wake(1)
else
  redis.call('HSET', jk, 'group', to)
  redis.call('ZADD', lane_key(to), score, id)
  redis.call('ZADD', B .. GINDEX, score, id)
  redis.call('SADD', B .. GROUPS, to)
  -- quiet: the one wake token below covers the job, whether or not the group rejoined
  ring_sync(to, true)
  push_wake(1)
end
if from then ring_sync(from) end
emit(cjson.encode({event = 'reassigned', job = id, group = to}))
audit('reassign', cjson.encode({job = id, group = to}), 'ok', 1, ARGV[3])
return 1
