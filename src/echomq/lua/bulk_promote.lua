-- bulk_promote: one bounded step of "promote every scheduled job matching a filter now".
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  offset: the rank in schedule (soonest first) this step starts from (the cursor)
-- ARGV[2]  scan: the most members this step examines (its bound; a step also stops
--          after about 1 ms of server time, and the cursor carries on)
-- ARGV[3]  '1' for a dry run (count, write nothing), else ''
-- ARGV[4..8]  the filter: name, group, error substring, lowest id, highest id
-- ARGV[9]  actor (optional; '' = none), written to the audit journal
-- Reply:   {matched (promoted, or would be), examined, next offset, done}
-- Refusals: none.
-- Writes:  (not on a dry run) for each match, as promote does for a due job: ZREM
--          schedule, state pending, ZADD pending|lane (score = run_score:
--          priority, then the seq its enqueue gave it), `groups` and
--          the ring for a lane; event 'promoted' per job; one wake token per job (capped);
--          one audit entry (verb promote_jobs) when any job moved.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include bulk
local off, scan, dry = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local f = bulk_filter(4)
local sched = B .. SCHEDULE
local ids = redis.call('ZRANGE', sched, off, off + scan - 1)
local moved, seen = {}, 0
local over = slicer()
for i, id in ipairs(ids) do
  if over(i) then break end
  seen = i
  if bulk_match(id, B .. JOB .. id, f) then moved[#moved + 1] = id end
end
local n = #moved
if not dry and n > 0 then
  zrem_all(sched, moved)
  for _, id in ipairs(moved) do
    local jk = B .. JOB .. id
    local r = redis.call('HMGET', jk, 'group', 'priority', 'seq')
    make_ready(id, jk, r[1], run_score(r[2], r[3]))
    emit(ev('promoted', id))
  end
  push_wake(n)
end
local done = (seen == #ids and #ids < scan) and 1 or 0
if not dry and n > 0 then
  audit('promote_jobs', filter_json(f), done == 1 and 'done' or 'more', n, ARGV[9])
end
return {n, seen, dry and off + seen or off + seen - n, done}
