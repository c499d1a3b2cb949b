#!lua flags=allow-oom
-- resolve_child: the relay's transition, in a PARENT's queue: apply children's endings
-- that were written to their own queue's outbox (lib/flow flow_ended), by child ref.
-- KEYS[1]  the queue base emq:{q}: (the PARENT's queue)
-- ARGV     quintuples, one per ending: child ref ('queue:id'), parent id, outcome
--          (schema.FLOW_OUTCOMES), the child's on_fail ('' = fail_parent), value
--          (completed: the result text; failed: the error; else '').
-- Reply:   {resolved, relay}: how many dependencies this call resolved (a ref no longer
--          in the parent's :deps, or a parent that is gone, resolves nothing), and 1
--          when a parent that went dead here wrote its own ending to this queue's
--          outbox (its parent is in yet another queue: relay this queue next), else 0.
-- Refusals: EMQARG when ARGV is not a whole number of quintuples (nothing written).
-- Writes:  per ending (lib/flow resolve_dep): SREM job:<pid>:deps ref; when it was
--          there: HSET :kids (completed) or :kidfails (otherwise, not for
--          remove_dependency); a waiting parent goes dead by fail_parent (ZREM waiting,
--          ZADD dead, last_error, metrics:failed, dedup released, event dead, and its own
--          ending up the tree: resolved here or written to this queue's outbox), or
--          becomes ready when its last dependency resolved or by continue (ZREM waiting,
--          pending/lane or schedule at its due time, a wake token, event waiting_done).
-- Idempotent: a repeat finds the refs gone from :deps and writes nothing (resend=True).
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include flow
if #ARGV % 5 ~= 0 then
  return redis.error_reply('EMQARG resolve_child takes quintuples')
end
local resolved, relay = 0, 0
for i = 1, #ARGV, 5 do
  local pk = B .. JOB .. ARGV[i + 1]
  local had = redis.call('SISMEMBER', pk .. DEPS, ARGV[i])
  if had == 1 then
    resolved = resolved + 1
    local on_fail = ARGV[i + 3]
    if on_fail == '' then on_fail = nil end
    if resolve_dep(ARGV[i + 1], ARGV[i], ARGV[i + 2], on_fail, ARGV[i + 4]) then
      relay = 1
    end
  end
end
return {resolved, relay}
