#!lua flags=allow-oom
-- remove_job: delete one job in any state, unless a worker holds it.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] a dedup id to release when it names this job ('' = none)
-- ARGV[3]  actor (optional; '' = none), written to the audit journal
-- ARGV[4]  rid, the call's request id ('' or omitted = none), kept in its audit entry;
--          ARGV[5] '1' when the call is a re-send after a lost reply (the transport
--          sets it): a re-send whose first run journaled answers 1 and writes nothing
-- Reply:   1
-- Refusals: -1 no row (gone); EMQLOCK a :lock key or a lock field is present.
--          Both before any write.
-- Writes:  ZREM from pending/active/schedule/dead/completed (+ keepuntil) and its
--          lane; an in-flight grouped
--          job gives its lane slot back; the lane's place on the ring is re-synced;
--          row, logs, lock, error history deleted; the row's dedup key and ARGV[2]'s
--          released as every ending releases them (lib/common release_dedup: when
--          they name this job and are no throttle window; a keep_last job held
--          behind this one is let go); the id's tombstone in `settled` (expired ones trimmed
--          from the oldest end, by time, lib/common). Event 'removed'; one audit entry.
--          A flow parent (field `children`): ZREM waiting, its :deps/:kids/:kidfails
--          deleted (its children keep running; their endings find no parent). A flow
--          child (field `parent`): its ending, outcome removed (lib/flow flow_ended:
--          its parent resolved here by its policy, or an outbox entry).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include flow
local id, jk, rid = ARGV[1], KEYS[2], ARGV[4] or ''
if ARGV[5] == '1' and journaled(rid) then return 1 end
if redis.call('EXISTS', jk) == 0 then return -1 end
local f = redis.call('HMGET', jk, 'group', 'lock', 'keep', 'parent', 'on_fail', 'children')
if f[2] or redis.call('EXISTS', jk .. LOCK) == 1 then
  return redis.error_reply('EMQLOCK job ' .. id .. ' is locked')
end
local g = f[1]
local was_active = redis.call('ZREM', B .. ACTIVE, id) == 1
redis.call('ZREM', B .. PENDING, id)
redis.call('ZREM', B .. SCHEDULE, id)
redis.call('ZREM', B .. DEAD, id)
if f[3] then
  -- a kept row (history): it may be in completed and in the keep index
  redis.call('ZREM', B .. COMPLETED, id)
  redis.call('ZREM', B .. KEEPUNTIL, id)
end
if g then
  redis.call('ZREM', lane_key(g), id)
  redis.call('ZREM', B .. GINDEX, id)
  -- the slot the claim took is given back exactly once, here
  if was_active then slot_back(g) end
end
-- a flow parent leaves the waiting set; a flow child's removal is its ending
if f[6] then redis.call('ZREM', B .. WAITING, id) end
if f[4] then flow_ended(id, jk, f[4], f[5], 'removed', '') end
if ARGV[2] ~= '' then release_dedup(id, ARGV[2]) end
delete_row(id, jk)
tombstone(id, now_ms())
if g then ring_sync(g) end
emit(ev('removed', id))
audit('remove_job', cjson.encode({job = id}), 'ok', 1, ARGV[3], rid)
return 1
