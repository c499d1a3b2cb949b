-- bulk_reprocess: one bounded step of "reprocess every dead job matching a filter".
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  offset: the rank in dead (oldest death first) this step starts from (the cursor)
-- ARGV[2]  scan: the most dead members this step examines (its bound; a step also
--          stops after about 1 ms of server time, and the cursor carries on)
-- ARGV[3]  '1' for a dry run (count, write nothing), else ''
-- ARGV[4..8]  the filter: name, group, error substring, lowest id, highest id ('' = any)
-- ARGV[9]  actor (optional; '' = none), written to the audit journal
-- Reply:   {matched (reprocessed, or would be on a dry run), examined, next offset,
--          done (1 when the walk reached the end of dead)}
-- Refusals: none.
-- Writes:  (not on a dry run) for each match, as reprocess_job: ZREM dead, HDEL
--          last_error, state pending (counters kept), one INCRBY of seq for the step
--          and each row's seq (a fresh place: the back of its priority, as a new
--          arrival), a flat job to pending at its run_score, a grouped one to its lane
--          at the same score and the lanes' index (`groups`; a lane
--          that was empty joins the ring when it can be served, so the ring is never
--          searched); event 'reprocessed' per job; one wake token per job (capped); one
--          audit entry (verb reprocess_jobs) when any job moved.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include bulk
local off, scan, dry = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local f = bulk_filter(4)
local dead = B .. DEAD
local ids = redis.call('ZRANGE', dead, off, off + scan - 1)
local n, seen = 0, 0
local moved = {}  -- id, group, ... of the matches, moved after the walk
local over = slicer()
for i, id in ipairs(ids) do
  if over(i) then break end
  seen = i
  local ok, g = bulk_match(id, B .. JOB .. id, f)
  if ok then
    n = n + 1
    moved[#moved + 1] = id
    moved[#moved + 1] = g or false
  end
end
if not dry and n > 0 then
  -- one take of the enqueue sequence for the step: each job a fresh place, the back of
  -- its priority as a new arrival, in the order of their deaths
  local first = take_seq(n)
  for k = 1, #moved, 2 do
    local id, g = moved[k], moved[k + 1] or nil
    local jk = B .. JOB .. id
    local seq = seq_at(first, (k - 1) / 2)
    redis.call('ZREM', dead, id)
    redis.call('HDEL', jk, 'last_error')
    redis.call('HSET', jk, 'seq', seq)
    -- state pending, to pending or its lane (quiet: the wake tokens below cover it)
    make_ready(id, jk, g, run_score(redis.call('HGET', jk, 'priority'), seq))
    emit(ev('reprocessed', id))
  end
end
local done = (seen == #ids and #ids < scan) and 1 or 0
if not dry and n > 0 then
  push_wake(n)
  audit('reprocess_jobs', filter_json(f), done == 1 and 'done' or 'more', n, ARGV[9])
end
return {n, seen, dry and off + seen or off + seen - n, done}
