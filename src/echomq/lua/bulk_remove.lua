-- bulk_remove: one bounded step of "remove every job of a state matching a filter".
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  the state: pending | scheduled | dead | completed (the kept history; active
--          is refused: its jobs are held)
-- ARGV[2]  for pending, the lane's group ('' = the flat pending set); else ''
-- ARGV[3]  offset: the rank this step starts from in the set's order (the cursor)
-- ARGV[4]  scan: the most members this step examines (its bound; a step also stops
--          after about 1 ms of server time, and the cursor carries on)
-- ARGV[5]  '1' for a dry run (count, write nothing), else ''
-- ARGV[6..10]  the filter: name, group, error substring, lowest id, highest id
-- ARGV[11] actor (optional; '' = none), written to the audit journal
-- ARGV[12] rid, the step's request id ('' or omitted = none), kept in its audit entry
--          with the reply; ARGV[13] '1' on a re-send after a lost reply: a re-send whose
--          first run journaled answers that reply and writes nothing (a first run that
--          removed nothing journaled nothing, and its re-send is that step again)
-- Reply:   {matched (removed, or would be), examined, next offset, done, locked (matching
--          jobs skipped because a worker holds them: a `lock` field or a :lock key)}
-- Refusals: EMQLOCK for state active (every active job is held by a worker); EMQARG
--          for another unknown state (a malformed argument). Both before any write.
-- Writes:  (not on a dry run) for each unlocked match, as remove_job: ZREM from the set
--          (completed: and from the keep index), the row, logs and lock deleted, its
--          dedup key released, its tombstone in `settled` (one ZADD for the step); a
--          lane that lost jobs has its place on the ring re-synced; event 'removed' per
--          job; one audit entry (verb remove_jobs) when any job went. A flow child removed
--          is its ending, outcome removed (lib/flow flow_drop); a parent goes with its
--          :deps/:kids/:kidfails.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include flow
--! include bulk
local rid = ARGV[12] or ''
if ARGV[13] == '1' then
  local first = journaled(rid)
  if first then return text_ints(first.reply) end
end
local sets = {pending = PENDING, scheduled = SCHEDULE, dead = DEAD, completed = COMPLETED}
if ARGV[1] == 'active' then
  return redis.error_reply('EMQLOCK active jobs are held by their workers')
end
if not sets[ARGV[1]] then return redis.error_reply('EMQARG unknown state ' .. ARGV[1]) end
local lane = ARGV[1] == 'pending' and ARGV[2] ~= '' and ARGV[2] or nil
local key = lane and lane_key(lane) or (B .. sets[ARGV[1]])
local off, scan, dry = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local f = bulk_filter(6)
local ids = redis.call('ZRANGE', key, off, off + scan - 1)
local n, locked, gone, seen = 0, 0, {}, 0
local over = slicer()
for i, id in ipairs(ids) do
  if over(i) then break end
  seen = i
  local jk = B .. JOB .. id
  if bulk_match(id, jk, f) then
    if redis.call('HEXISTS', jk, 'lock') == 1 or redis.call('EXISTS', jk .. LOCK) == 1 then
      locked = locked + 1
    else
      n = n + 1
      gone[#gone + 1] = id
      if not dry then
        flow_drop(id, 'removed')
        emit(ev('removed', id))
      end
    end
  end
end
if not dry and n > 0 then
  zrem_all(key, gone)
  if lane then zrem_all(B .. GINDEX, gone) end
  if ARGV[1] == 'completed' then zrem_all(B .. KEEPUNTIL, gone) end
  if lane then ring_sync(lane) end
  -- as remove_job: an enqueue re-sent after a lost reply cannot bring one back
  tombstones(gone, now_ms())
end
local done = (seen == #ids and #ids < scan) and 1 or 0
local reply = {n, seen, dry and off + seen or off + seen - n, done, locked}
if not dry and n > 0 then
  audit('remove_jobs', filter_json(f, {state = ARGV[1], lane = lane}),
    done == 1 and 'done' or 'more', n, ARGV[11], rid, ints_text(reply))
end
return reply
