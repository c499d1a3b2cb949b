#!lua flags=allow-oom
-- worker_beat: a worker's beat in the queue's registry, and the cancel requests for
-- the jobs it holds (both ride in the beat's one round trip).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  worker id (hex);  ARGV[2] the record's ttl in ms (a few beats)
-- ARGV[3]  n, the number of field/value pairs that follow
-- ARGV[4 .. 3+2n]  the record's fields: host, pid, queues, concurrency, jobs, ...
-- ARGV[4+2n ..]    pairs: job id, token (the jobs the worker holds)
-- Reply:   the ids among those pairs whose row carries a cancel request for that
--          token (`cancel` = the run's attempts); `{}` when none.
-- Refusals: none.
-- Writes:  HSET worker:<wid> fields + beat (server ms), `started` on the first beat,
--          PEXPIRE the record; ZADD workers beat wid (the index, score = last beat).
--          Upkeep a beat does for the queue, so nothing grows while it is idle (each
--          bounded, by time alone): index entries whose last beat is older than the
--          ttl (dead workers: their record expired) and the expired `settled`
--          tombstones, `claimreqs` entries and `dedups` entries (throttle windows
--          over), up to 64 each from the oldest end; the
--          index itself gets the longest ttl any beat gave it, so the entries of
--          workers that all died leave with it. Meta `limits`, the claim's flag, set
--          again from what is there (lib/limits limits_flag; written only when it
--          changes): a limit an older client wrote without it applies within a beat.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include limits
local wid, ttl, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local wk = B .. WORKER .. wid
local set = {'beat', now}
for i = 4, 3 + 2 * n do set[#set + 1] = ARGV[i] end
redis.call('HSET', wk, unpack(set))
redis.call('HSETNX', wk, 'started', now)
redis.call('PEXPIRE', wk, ttl)
local idx = B .. WORKERS
redis.call('ZADD', idx, now, wid)
if redis.call('PTTL', idx) < ttl then redis.call('PEXPIRE', idx, ttl) end
trim_before(idx, now - ttl, 64)
trim_before(B .. SETTLED, now - SETTLED_MS, 64)
trim_before(B .. CLAIMREQS, now, 64)
trim_before(B .. DEDUPS, now, 64)
limits_flag()
local out = {}
for i = 4 + 2 * n, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', B .. JOB .. id, 'cancel') == ARGV[i + 1] then out[#out + 1] = id end
end
return out
