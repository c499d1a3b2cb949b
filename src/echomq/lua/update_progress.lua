-- update_progress: write a job's progress, then publish it on the events channel.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the progress text;  ARGV[3] 'json' when ARGV[2] is JSON
--          text (a number, list or object), 'str' when it is a plain string
-- Reply:   1
-- Refusals: -1 no row (gone): nothing written, nothing published.
-- Writes:  HSET row progress; PUBLISH {"event":"progress","job":id,"progress":value}.
local B = KEYS[1]
--! include keys
--! include common
--! include series
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
redis.call('HSET', KEYS[2], 'progress', ARGV[2])
local value = ARGV[2]
if ARGV[3] ~= 'json' then value = cjson.encode(value) end
emit('{"event":"progress","job":"' .. ARGV[1] .. '","progress":' .. value .. '}')
return 1
