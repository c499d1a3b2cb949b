#!lua flags=no-writes
-- dedup_owner: who holds a dedup id, as an enqueue would see it.
-- KEYS[1]  the queue base emq:{q}: (the dedup key de:<id> derived from it)
-- ARGV[1]  the dedup id
-- Reply:   {owner id, its state, the key's mode, its window left in ms} or 0 when free:
--          no key, or a key whose job is gone (no row, or completed or dead) and that
--          is no throttle window (a TTL); such a stale key is left for the next
--          enqueue to take (a read writes nothing). A throttle window outliving its
--          job answers the job's id with state '' (gone). mode: the owner row's
--          dedup_mode ('' = simple); window: the key's PTTL, -1 when none.
-- Refusals: none.
-- Writes:  nothing.
local B = KEYS[1]
--! include keys
local dk = B .. DEDUP .. ARGV[1]
local holder = redis.call('GET', dk)
if not holder then return 0 end
local f = redis.call('HMGET', B .. JOB .. holder, 'state', 'dedup_mode')
local ttl = redis.call('PTTL', dk)
local gone = not f[1] or f[1] == 'completed' or f[1] == 'dead'
if gone and ttl < 0 then return 0 end
return {holder, gone and '' or f[1], f[2] or (ttl >= 0 and 'throttle' or ''), ttl}
