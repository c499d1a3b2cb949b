-- bulk_clean: one bounded step of "delete the dead (or kept completed) jobs that settled
-- more than T ago".
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  older_than_ms: a job qualifies when it died before now - older_than_ms
--          (server clock; dead's score is the time of death)
-- ARGV[2]  scan: the most jobs this step deletes (its bound; a step also stops after
--          about 1 ms of server time and answers more)
-- ARGV[3]  '1' for a dry run (answer how many qualify, write nothing), else ''
-- ARGV[4]  actor (optional; '' = none), written to the audit journal
-- ARGV[5]  the set: 'completed' (the jobs kept as history; score = finish time) or
--          'dead' ('' or omitted = dead)
-- ARGV[6]  rid, the step's request id ('' or omitted = none), kept in its audit entry
--          with the reply; ARGV[7] '1' on a re-send after a lost reply: a re-send whose
--          first run journaled answers that reply and writes nothing
-- Reply:   {deleted (or, on a dry run, how many qualify), more (1: call again)}
-- Refusals: none.
-- Writes:  (not on a dry run) the oldest qualifying dead jobs: ZREM dead, row, logs and
--          lock and error history deleted, dedup key released (a completed job also
--          leaves the keep index `keepuntil`); a job that settled less than 60 s ago
--          leaves its tombstone in `settled` (stamped now, as remove_job's); event
--          'removed' per job; one audit entry
--          (verb clean) when any job went.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include bulk
local rid = ARGV[6] or ''
if ARGV[7] == '1' then
  local first = journaled(rid)
  if first then return text_ints(first.reply) end
end
local which = ARGV[5] == 'completed' and 'completed' or 'dead'
local dead = which == 'completed' and B .. COMPLETED or B .. DEAD
local now = now_ms()
local cut = now - tonumber(ARGV[1])
if ARGV[3] == '1' then
  return {redis.call('ZCOUNT', dead, '-inf', '(' .. cut), 0}
end
local scan = tonumber(ARGV[2])
local found = redis.call('ZRANGE', dead, '-inf', '(' .. cut, 'BYSCORE', 'LIMIT', 0, scan)
-- the jobs that settled less than SETTLED_MS ago are tombstoned; found is oldest first,
-- so they are its members past the `old` that settled before (none when T >= 60 s)
local old = #found
if tonumber(ARGV[1]) < SETTLED_MS then
  old = redis.call('ZCOUNT', dead, '-inf', '(' .. (now - SETTLED_MS))
end
local ids, over = {}, slicer()
local fresh = {}
for i, id in ipairs(found) do
  if over(i) then break end
  ids[i] = id
  delete_row(id, B .. JOB .. id)
  if i > old then fresh[#fresh + 1] = id end
  emit(ev('removed', id))
end
zrem_all(dead, ids)
if which == 'completed' and #ids > 0 then zrem_all(B .. KEEPUNTIL, ids) end
if #fresh > 0 then tombstones(fresh, now) end
local more = (#found >= scan or #ids < #found) and 1 or 0
if #ids > 0 then
  audit('clean', cjson.encode({state = which, older_than_ms = tonumber(ARGV[1])}),
    more == 1 and 'more' or 'done', #ids, ARGV[4], rid, ints_text({#ids, more}))
end
return {#ids, more}
