#!lua flags=no-writes
-- fire_due_list: list the repeatables due now (a read; the fire script re-checks each).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  budget: at most this many
-- Reply:   {now_ms, then 4 entries per due repeatable: name, slot (its registry
--          score), kind, spec}
-- Refusals: none.
-- Writes:  none.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local now = now_ms()
local out = {now}
local due = redis.call('ZRANGEBYSCORE', B .. REPEAT, '-inf', now, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #due, 2 do
  local f = redis.call('HMGET', B .. REPEAT_RECORD .. due[i], 'kind', 'spec')
  out[#out + 1] = due[i]
  out[#out + 1] = due[i + 1]
  out[#out + 1] = f[1] or ''
  out[#out + 1] = f[2] or ''
end
return out
