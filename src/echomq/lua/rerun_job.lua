-- rerun_job: run a completed or dead job again as a new job, a copy; the old row stays
-- as it is (its history, its error) but for a link to the copy.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id (the original);  ARGV[2] the copy's id (minted by the caller, fresh);
-- ARGV[3]  actor (optional; '' = none), written to the audit journal
-- Reply:   the copy's id. A call whose original already links to ARGV[2] (a re-send
--          after a lost reply) answers it again and writes nothing.
-- Refusals: -1 no row (gone: never enqueued, removed, or a completed job its queue does
--          not keep); EMQSTATE not finished (pending, scheduled or active: it has not
--          run to its end); EMQARG the copy's id already has a row. All read before the
--          first write: a refused call writes nothing.
-- Writes:  the copy's row: state pending, attempts 0, a fresh seq (INCRBY seq 1: the back
--          of its priority, as a new arrival), the original's payload, name, group,
--          priority, max_attempts, backoff and keep (not its dedup id: the copy takes
--          no dedup key; not its repeatable, trace, counters, progress, logs or result),
--          `rerun_of` = the original's id; a kept copy (the original had `keep`, or the
--          queue has a retention) also gets `enqueued_at`. The copy goes to pending at
--          its run_score, or to its lane (gindex, groups, the ring when its lane can be
--          served). The original's row gets `rerun_as` = the copy's id (the newest copy,
--          when it is rerun again). One wake token; event 'enqueued' of the copy; one
--          audit entry. The pause is not read: on a paused queue the copy waits in
--          pending until a claim after resume.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
local jk, id, nid = KEYS[2], ARGV[1], ARGV[2]
local f = redis.call('HMGET', jk, 'state', 'rerun_as', 'payload', 'name', 'group',
  'priority', 'max_attempts', 'backoff', 'keep')
if not f[1] then return -1 end
-- a re-send whose first run landed: the link says so
if f[2] == nid then return nid end
if f[1] ~= 'completed' and f[1] ~= 'dead' then
  return redis.error_reply('EMQSTATE not finished')
end
local nk = B .. JOB .. nid
if redis.call('EXISTS', nk) == 1 then
  return redis.error_reply('EMQARG the copy id ' .. nid .. ' has a row')
end
-- every check passed: write
local g, prio, keep = f[5], f[6], f[9]
if not keep and redis.call('EXISTS', B .. KEEPS) == 1 then keep = '0' end
local seq = seq_at(take_seq(1), 0)
local row = {'state', 'pending', 'attempts', 0, 'payload', f[3] or '', 'seq', seq,
  'rerun_of', id}
local opt = {{'name', f[4]}, {'group', g}, {'priority', prio}, {'max_attempts', f[7]},
  {'backoff', f[8]}}
for _, o in ipairs(opt) do
  if o[2] then row[#row + 1] = o[1]; row[#row + 1] = o[2] end
end
if keep then
  row[#row + 1] = 'keep'; row[#row + 1] = keep
  row[#row + 1] = 'enqueued_at'; row[#row + 1] = clock_text()
end
redis.call('HSET', nk, unpack(row))
make_ready(nid, nk, g, run_score(prio, seq))
redis.call('HSET', jk, 'rerun_as', nid)
push_wake(1)
emit(ev('enqueued', nid))
audit('rerun_job', cjson.encode({job = id, copy = nid}), 'ok', 1, ARGV[3])
return nid
