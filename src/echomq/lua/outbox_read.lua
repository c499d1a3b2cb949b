#!lua flags=no-writes
-- outbox_read: the oldest entries of a queue's flow outbox (a read).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  n, the most entries to read (1..1000)
-- Reply:   a flat array child id, message (JSON {"pq","pid","o","p","v"}, lib/flow) for
--          up to n entries, oldest first; an id whose message is missing is left out.
-- Refusals: EMQARG n is not a count in 1..1000.
-- Writes:  none.
local B = KEYS[1]
--! include keys
local n = tonumber(ARGV[1])
if not n or n < 1 or n > 1000 or n ~= math.floor(n) then
  return redis.error_reply('EMQARG n must be a count in 1..1000')
end
local ids = redis.call('ZRANGE', B .. OUTBOX, 0, n - 1)
if #ids == 0 then return {} end
local msgs = redis.call('HMGET', B .. OUTMSG, unpack(ids))
local out = {}
for i, id in ipairs(ids) do
  if msgs[i] then
    out[#out + 1] = id
    out[#out + 1] = msgs[i]
  end
end
return out
