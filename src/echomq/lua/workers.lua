-- workers: the live workers of the queue's registry, newest beat first (bounded), and
-- a bounded trim of the index entries whose record has expired (dead workers).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  n, the most records answered;  ARGV[2] t, the most stale index entries
--          (the oldest beats) checked and trimmed
-- Reply:   {now_ms, wid, {field, value, ...}, wid, {...}, ...}: live records only.
-- Refusals: none.
-- Writes:  ZREM workers for each entry read (the newest n, the oldest t) whose record
--          is gone: a worker whose ttl passed disappears from the index on read.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local idx = B .. WORKERS
local out = {now_ms()}
for _, wid in ipairs(redis.call('ZREVRANGE', idx, 0, tonumber(ARGV[1]) - 1)) do
  local rec = redis.call('HGETALL', B .. WORKER .. wid)
  if #rec == 0 then
    redis.call('ZREM', idx, wid)
  else
    out[#out + 1] = wid; out[#out + 1] = rec
  end
end
for _, wid in ipairs(redis.call('ZRANGE', idx, 0, tonumber(ARGV[2]) - 1)) do
  if redis.call('EXISTS', B .. WORKER .. wid) == 0 then redis.call('ZREM', idx, wid) end
end
return out
