#!lua flags=no-writes
-- flow_nodes: a read of flow nodes in one queue, for flow() (the operator's tree view).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  the most children refs this call returns in all (1..10000; flows/tree.py
--          sends at most 100 ids a call);
-- ARGV[2..] job ids of this queue
-- Reply:   per id, in order, an array {state, parent, on_fail, children, name,
--          last_error, ndeps, nkids, nfails, deps, kids, kidfails}: the row's fields
--          (nil when absent; state nil = no row), the sizes of its :deps, :kids and
--          :kidfails, then its children's refs: deps a list of refs, kids and kidfails
--          flat lists ref, value (a result or {outcome, error} JSON, cut to 200 bytes).
--          The refs are whole when they fit what is left of ARGV[1], else a sample of
--          that many (SRANDMEMBER / HRANDFIELD: bounded, no walk of a large set).
-- Refusals: EMQARG ARGV[1] is not a count in 1..10000.
-- Writes:  none.
local B = KEYS[1]
--! include keys
local left = tonumber(ARGV[1])
if not left or left < 1 or left > 10000 or left ~= math.floor(left) then
  return redis.error_reply('EMQARG budget must be a count in 1..10000')
end
local CUT = 200
local function cut_pairs(flat)
  for i = 2, #flat, 2 do
    if #flat[i] > CUT then flat[i] = string.sub(flat[i], 1, CUT) end
  end
  return flat
end
local out = {}
for i = 2, #ARGV do
  local jk = B .. JOB .. ARGV[i]
  local f = redis.call('HMGET', jk, 'state', 'parent', 'on_fail', 'children', 'name',
    'last_error')
  local nd = redis.call('SCARD', jk .. DEPS)
  local nk = redis.call('HLEN', jk .. KIDS)
  local nf = redis.call('HLEN', jk .. KIDFAILS)
  local deps, kids, fails = {}, {}, {}
  if nd > 0 and left > 0 then
    if nd <= left then deps = redis.call('SMEMBERS', jk .. DEPS)
    else deps = redis.call('SRANDMEMBER', jk .. DEPS, left) end
    left = left - #deps
  end
  if nk > 0 and left > 0 then
    if nk <= left then kids = redis.call('HGETALL', jk .. KIDS)
    else kids = redis.call('HRANDFIELD', jk .. KIDS, left, 'WITHVALUES') end
    left = left - #kids / 2
  end
  if nf > 0 and left > 0 then
    if nf <= left then fails = redis.call('HGETALL', jk .. KIDFAILS)
    else fails = redis.call('HRANDFIELD', jk .. KIDFAILS, left, 'WITHVALUES') end
    left = left - #fails / 2
  end
  if f[6] and #f[6] > CUT then f[6] = string.sub(f[6], 1, CUT) end
  out[#out + 1] = {f[1], f[2], f[3], f[4], f[5], f[6], nd, nk, nf, deps, cut_pairs(kids),
    cut_pairs(fails)}
end
return out
