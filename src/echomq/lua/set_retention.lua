#!lua flags=allow-oom
-- set_retention: set (or clear) how much settled history the queue keeps.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  completed: keep the newest N completed jobs ('' or '0' = no count limit)
-- ARGV[2]  completed_age_ms: keep completed jobs younger than T ms ('' or '0' = none)
-- ARGV[3]  dead: keep the newest N dead jobs ('' or '0' = no count limit)
-- ARGV[4]  dead_age_ms: keep dead jobs younger than T ms ('' or '0' = none)
-- ARGV[5]  actor (optional; '' = none), written to the audit journal
-- Reply:   the number of settled jobs this call trimmed (at most 500 of each set and
--          rule: a larger excess is trimmed by later calls and by the transitions)
-- Refusals: EMQARG when a value is not a whole number >= 0 (checked before any write).
-- Writes:  meta fields keep_completed, keep_completed_ms, keep_dead, keep_dead_ms (HSET
--          when > 0, HDEL otherwise); `keeps` = '1' while any is set (deleted when none
--          is: enqueue reads it); the settled sets trimmed to the new retention
--          (rows, logs, error histories), and the kept jobs whose own keep_ms ran out;
--          one audit entry when a field changed or a
--          job was trimmed. Jobs enqueued from now on are kept while any of the four
--          is set (see enqueue); clearing the completed retention keeps no new
--          completions (those already kept stay until clean or remove takes them).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include history
local names = {'keep_completed', 'keep_completed_ms', 'keep_dead', 'keep_dead_ms'}
local vals = {}
for i = 1, 4 do
  local v = ARGV[i] or ''
  if v == '' then v = '0' end
  local x = tonumber(v)
  if not x or x < 0 or x ~= math.floor(x) or x >= 2^53 then
    return redis.error_reply('EMQARG ' .. names[i] .. ' must be a whole number >= 0')
  end
  vals[i] = x
end
local meta = B .. META
local before = redis.call('HMGET', meta, unpack(names))
local changed = 0
for i = 1, 4 do
  local was = tonumber(before[i]) or 0
  if vals[i] ~= was then
    changed = changed + 1
    if vals[i] > 0 then
      redis.call('HSET', meta, names[i], string.format('%d', vals[i]))
    else
      redis.call('HDEL', meta, names[i])
    end
  end
end
-- the marker enqueue reads (with the tombstones, in one EXISTS)
if vals[1] + vals[2] + vals[3] + vals[4] > 0 then
  if redis.call('EXISTS', B .. KEEPS) == 0 then redis.call('SET', B .. KEEPS, '1') end
else
  redis.call('DEL', B .. KEEPS)
end
local now = now_ms()
local function nz(x) if x > 0 then return x end return nil end
local trimmed = trim_settled(B .. COMPLETED, nz(vals[1]), nz(vals[2]), true, now, 500)
  + trim_settled(B .. DEAD, nz(vals[3]), nz(vals[4]), false, now, 500)
if changed > 0 or trimmed > 0 then
  audit('set_retention', cjson.encode({completed = vals[1], completed_age_ms = vals[2],
    dead = vals[3], dead_age_ms = vals[4]}), 'ok', trimmed, ARGV[5])
end
return trimmed
