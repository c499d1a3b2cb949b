-- lib/flow: a flow child's ending resolves its parent's dependency (issue 27).
-- Include after keys and common. The including script defines B, the queue base.
--
-- The contract every ending script keeps (complete, retry to dead, the stalled check to
-- dead, remove, bulk remove, drain, drain of a lane, obliterate, enqueue deduplicated,
-- cancel_flow, release_parent/fail_parent for a parent that is itself a child):
--
--   flow_ended(id, jk, parent, on_fail, outcome, value)
--     id, jk:   the child's id and row key (the row may be read, it is not yet deleted)
--     parent:   the row's `parent` field ('queue:id'), or nil/false: then nothing happens
--               and nothing is read (a job of no flow costs nothing more)
--     on_fail:  the row's `on_fail` field (nil = fail_parent)
--     outcome:  one of schema.FLOW_OUTCOMES: completed | failed | removed | drained |
--               obliterated | cancelled | missing | deduplicated
--     value:    completed: the result text ('' none); failed: the error text; else ''
--   When the parent is in this queue (same base), the dependency is resolved here, in
--   the same atomic step (resolve_dep); otherwise the ending is written to this queue's
--   outbox (OUTBOX + OUTMSG, keyed by the child id: written once) and a relay applies it
--   to the parent's queue with the resolve_child transition, idempotent by child ref.
--   Returns true when an outbox entry was written (the caller may tell its client to
--   relay now).
--
--   resolve_dep(pid, ref, outcome, on_fail, value)
--     In the parent's queue (B is the parent's base): SREM the ref from job:<pid>:deps;
--     0 removed = already resolved or no such parent: nothing else is written
--     (idempotent). Else record (KIDS for completed, KIDFAILS otherwise unless
--     remove_dependency) and apply the policy: fail_parent on a non-completed outcome
--     (except deduplicated) ends a waiting parent as dead, naming the child and its error
--     (and that is the parent's own ending: flow_ended for it, recursively); continue
--     makes a waiting parent ready at once; when the last dependency resolves, a waiting
--     parent becomes ready (pending or its lane, or the schedule if it asked for a delay)
--     in the same step, with a wake token.
--
-- This file is the contract; issue 27's core (helper h-27a) writes the bodies.
local function resolve_dep(pid, ref, outcome, on_fail, value)
  return false
end

local function flow_ended(id, jk, parent, on_fail, outcome, value)
  if not parent then return false end
  return false
end
