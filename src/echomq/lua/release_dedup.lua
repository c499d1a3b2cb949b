#!lua flags=allow-oom
-- release_dedup: the operator frees one dedup id, whoever holds it, whatever its mode.
-- KEYS[1]  the queue base emq:{q}: (the dedup key de:<id> and `dedups` derived from it)
-- ARGV[1]  the dedup id;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   the id of the job the key named (it keeps running or waiting: only the key
--          goes), or 0 when the key was free
-- Refusals: none.
-- Writes:  DEL de:<id> (a throttle window too), ZREM `dedups` <id>; a keep_last job the
--          key named that was held behind a running job is let go (ready now, as its
--          owner's ending would have), since nothing would name it any more; one
--          audit entry (outcome ok | free).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local d = ARGV[1]
local dk = B .. DEDUP .. d
local holder = redis.call('GET', dk)
redis.call('DEL', dk)
redis.call('ZREM', B .. DEDUPS, d)
if holder and redis.call('HGET', B .. JOB .. holder, 'dedup_behind') then unhold(holder) end
audit('release_dedup', cjson.encode({dedup = d}), holder and 'ok' or 'free', holder and 1 or 0,
  ARGV[2])
return holder or 0
