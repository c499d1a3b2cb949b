-- lib/audit: the operator journal (spliced in by the loader; the script defines `B` and
-- includes lib/keys first).
-- Every operator verb's script appends one entry to the capped per-queue stream
-- emq:{q}:audit after its last check, so a refused call writes none and a done call
-- cannot miss it; a call that changed nothing writes none either. The entry id is the
-- server's clock (XADD *); its fields: verb, args (JSON), outcome (ok | more | done |
-- gone), count, actor (set by the caller as the script's optional trailing ARGV; ''
-- when absent).
-- A verb the transport may send again after a lost reply (transport.RESEND) passes
-- its call's request id `rid` (the same on every send of one call): the entry records
-- it as field `req`, and a send whose id one of the newest AUDIT_RECENT entries
-- already carries journals nothing (a re-send follows its first send at once), so
-- one act is one entry.
-- A verb that is not idempotent by itself (remove_job, a bulk step) answers its re-send
-- from its entry: `journaled(rid)` finds the first run's entry, and the entry keeps the
-- call's `reply` (text) when the verb needs more than "it ran" to answer again.
local AUDIT_CAP = 10000
local AUDIT_RECENT = 16

-- the fields of the entry request `rid` wrote among the newest AUDIT_RECENT, or nil
local function journaled(rid)
  if not rid or rid == '' then return nil end
  for _, e in ipairs(redis.call('XREVRANGE', B .. AUDIT, '+', '-', 'COUNT', AUDIT_RECENT)) do
    local f = e[2]
    for i = 1, #f - 1, 2 do
      if f[i] == 'req' and f[i + 1] == rid then
        local out = {}
        for j = 1, #f - 1, 2 do out[f[j]] = f[j + 1] end
        return out
      end
    end
  end
  return nil
end

local function audit(verb, args, outcome, count, actor, rid, reply)
  local key = B .. AUDIT
  if rid and rid ~= '' then
    if journaled(rid) then return end
    if reply then
      redis.call('XADD', key, 'MAXLEN', '~', AUDIT_CAP, '*', 'verb', verb, 'args', args,
        'outcome', outcome, 'count', count, 'actor', actor or '', 'req', rid, 'reply', reply)
      return
    end
    redis.call('XADD', key, 'MAXLEN', '~', AUDIT_CAP, '*', 'verb', verb, 'args', args,
      'outcome', outcome, 'count', count, 'actor', actor or '', 'req', rid)
    return
  end
  redis.call('XADD', key, 'MAXLEN', '~', AUDIT_CAP, '*', 'verb', verb,
    'args', args, 'outcome', outcome, 'count', count, 'actor', actor or '')
end
