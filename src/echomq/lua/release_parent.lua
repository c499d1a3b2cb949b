-- release_parent: an operator lets a flow parent run now, before its children are done.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] actor (optional; '' = none), written to the audit journal
-- Reply:   the number of dependencies still unresolved (their children keep running;
--          their endings are recorded on the parent as they come, changing no state)
-- Refusals: -1 no row (gone); EMQSTATE not waiting (the job is not waiting_children).
--          Both before any write.
-- Writes:  (lib/flow flow_release) ZREM waiting; pending or its lane (run_score), or the
--          schedule at the row's `due` when it was enqueued with a delay still ahead;
--          a wake token; event 'waiting_done'; one audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include flow
--! include audit
local id, jk = ARGV[1], KEYS[2]
local st = redis.call('HGET', jk, 'state')
if not st then return -1 end
if st ~= 'waiting_children' then return redis.error_reply('EMQSTATE not waiting') end
flow_release(id, jk)
local left = redis.call('SCARD', jk .. DEPS)
audit('release_parent', cjson.encode({job = id, unresolved = left}), 'ok', 1, ARGV[2])
return left
