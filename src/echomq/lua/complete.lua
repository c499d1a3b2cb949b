#!lua flags=allow-oom
-- complete: settle an active job as done (token-fenced).
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token (the attempts value the claim handed out)
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTALE the job is not active under this token.
-- Writes:  ZREM active, lane slot back (+ ring), row/logs/lock deleted, dedup key
--          released, metrics:completed counted, the id's tombstone in `settled` (at
--          most 4 expired ones trimmed); event 'completed'. A repeat answers -1.
local B = KEYS[1]
--! include keys
--! include common
local id, token = ARGV[1], ARGV[2]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group', 'dedup')
if not f then return refusal end
redis.call('ZREM', B .. ACTIVE, id)
if f[3] then give_back(f[3]) end
delete_row(id, jk, f[4])
local now = now_ms()
tombstone(id, now)
count_metric(B .. METRICS_COMPLETED, 1, now)
emit(ev('completed', id))
return 1
