#!lua flags=allow-oom
-- retry: record a failure of an active job; schedule it again or dead-letter it.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token;  ARGV[3] error text;  ARGV[4] delay_ms
-- ARGV[5]  max_attempts override ('' = the row's, else ARGV[6]);  ARGV[6] default max
-- Reply:   'scheduled' (parked at now + delay_ms) or 'dead' (failures reached max)
-- Refusals: -1 no row (gone); EMQSTALE not active under this token.
-- Writes:  failures+1, last_error, ZREM active, lane slot back (+ ring), lock deleted,
--          schedule or dead (+ metrics:failed); event 'retrying' or 'dead'.
local B = KEYS[1]
--! include keys
--! include common
local id, token, err = ARGV[1], ARGV[2], ARGV[3]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group', 'max_attempts')
if not f then return refusal end
local maxa = tonumber(ARGV[5]) or tonumber(f[4]) or tonumber(ARGV[6])
local now = now_ms()
local failures = redis.call('HINCRBY', jk, 'failures', 1)
redis.call('ZREM', B .. ACTIVE, id)
redis.call('DEL', jk .. LOCK)
if f[3] then give_back(f[3]) end
if failures >= maxa then
  redis.call('HSET', jk, 'state', 'dead', 'last_error', err)
  redis.call('ZADD', B .. DEAD, now, id)
  count_metric(B .. METRICS_FAILED, 1, now)
  emit(cjson.encode({event = 'dead', job = id, error = err, failures = failures}))
  return 'dead'
end
local due = now + (tonumber(ARGV[4]) or 0)
redis.call('HSET', jk, 'state', 'scheduled', 'last_error', err)
redis.call('ZADD', B .. SCHEDULE, due, id)
emit(cjson.encode({event = 'retrying', job = id, error = err, failures = failures, due = due}))
return 'scheduled'
