-- fail_parent: an operator ends a flow parent that waits for its children: dead now.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] the error (its last_error);  ARGV[3] actor (optional; '' =
--          none), written to the audit journal
-- Reply:   1; 2 when the parent is itself a flow child whose parent is in another queue:
--          its ending was written to this queue's outbox (the client relays it now)
-- Refusals: -1 no row (gone); EMQSTATE not waiting (the job is not waiting_children).
--          Both before any write.
-- Writes:  (lib/flow flow_fail) ZREM waiting, ZADD dead, state dead, last_error (and
--          died_at for a kept row), its dedup key released, metrics:failed, event
--          'dead'; then its own ending (lib/flow flow_ended, outcome failed, value the
--          error): a parent in this queue resolves by the job's policy here, one in
--          another queue gets an outbox entry. Its children keep running; their endings
--          are recorded on it, changing no state. One audit entry.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include flow
--! include audit
local id, jk, err = ARGV[1], KEYS[2], ARGV[2]
local st = redis.call('HGET', jk, 'state')
if not st then return -1 end
if st ~= 'waiting_children' then return redis.error_reply('EMQSTATE not waiting') end
local gp, gpol = flow_fail(id, jk, err)
local relay = flow_ended(id, jk, gp, gpol, 'failed', err)
audit('fail_parent', cjson.encode({job = id, error = err}), 'ok', 1, ARGV[3])
if relay then return 2 end
return 1
