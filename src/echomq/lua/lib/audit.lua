-- lib/audit: the operator journal (spliced in by the loader; the script defines `B` and
-- includes lib/keys first).
-- Every operator verb's script appends one entry to the capped per-queue stream
-- emq:{q}:audit after its last check, so a refused call writes none and a done call
-- cannot miss it; a call that changed nothing writes none either. The entry id is the
-- server's clock (XADD *); its fields: verb, args (JSON), outcome (ok | more | done |
-- gone), count, actor (set by the caller as the script's optional trailing ARGV; ''
-- when absent).
local AUDIT_CAP = 10000

local function audit(verb, args, outcome, count, actor)
  redis.call('XADD', B .. AUDIT, 'MAXLEN', '~', AUDIT_CAP, '*', 'verb', verb,
    'args', args, 'outcome', outcome, 'count', count, 'actor', actor or '')
end
