#!lua flags=allow-oom
-- delay: move an active job back to the schedule without counting a failure.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token;  ARGV[3] delay_ms
-- Reply:   the due time in ms (server clock)
-- Refusals: -1 no row (gone); EMQSTALE not active under this token.
-- Writes:  ZREM active, lane slot back (+ ring), lock deleted, state scheduled,
--          ZADD schedule; event 'delayed'.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local id, token = ARGV[1], ARGV[2]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group')
if not f then return refusal end
local due = now_ms() + tonumber(ARGV[3])
redis.call('ZREM', B .. ACTIVE, id)
redis.call('DEL', jk .. LOCK)
if f[3] then give_back(f[3]) end
redis.call('HSET', jk, 'state', 'scheduled')
redis.call('ZADD', B .. SCHEDULE, due, id)
emit('{"event":"delayed","job":"' .. id .. '","due":' .. due .. '}')
return due
