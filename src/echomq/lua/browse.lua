#!lua flags=no-writes
-- browse: a page of job ids in one state, bounded whatever the queue's size.
-- Newest first (score desc, then id desc; the default) or in run order (score asc, then
-- id asc: the order claims take a set, the schedule soonest first). For pending, the
-- flat set and every lane form one order: every lane's job is also in `gindex` (the
-- index of all lanes, same score), so a page merges two sorted sets, never the lanes.
-- The merge finds where the page starts in each set by a binary search on ranks
-- (O(log^2 N) reads by rank), then reads n from each: no call walks `offset` members.
-- (Run order across lanes is priority then enqueue order; the ring decides the exact
-- interleave between groups at claim time.)
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  set name (pending | active | schedule | dead);  ARGV[2] n;  ARGV[3] offset
-- ARGV[4]  'run' for run order, else '' or 'newest' (optional)
-- Reply:   an array of at most n ids
-- Refusals: none. Read-only.
local B = KEYS[1]
--! include keys
local n, off = tonumber(ARGV[2]), tonumber(ARGV[3])
local rev = ARGV[4] ~= 'run'
local a = B .. ARGV[1]

local function range(key, i, j)
  if rev then return redis.call('ZRANGE', key, i, j, 'REV', 'WITHSCORES') end
  return redis.call('ZRANGE', key, i, j, 'WITHSCORES')
end

if ARGV[1] ~= 'pending' then
  local r = range(a, off, off + n - 1)
  local out = {}
  for i = 1, #r, 2 do out[#out + 1] = r[i] end
  return out
end

local b = B .. GINDEX
local na, nb = redis.call('ZCARD', a), redis.call('ZCARD', b)
-- whether member x (id, score) comes before y in the page's order
local function before(xi, xs, yi, ys)
  if xs ~= ys then
    if rev then return xs > ys end
    return xs < ys
  end
  if rev then return xi > yi end
  return xi < yi
end
local function at(key, i)
  local r = range(key, i, i)
  return r[1], tonumber(r[2])
end
-- i = how many of the first `off` members of the merged order come from a
local k = math.min(off, na + nb)
local lo, hi = math.max(0, k - nb), math.min(k, na)
while lo < hi do
  local i = math.floor((lo + hi) / 2)
  local ai, as = at(a, i)
  local bi, bs = at(b, k - i - 1)
  if before(ai, as, bi, bs) then lo = i + 1 else hi = i end
end
local ra, rb = range(a, lo, lo + n - 1), range(b, k - lo, k - lo + n - 1)
local out, x, y = {}, 1, 1
while #out < n and (x <= #ra or y <= #rb) do
  if y > #rb or (x <= #ra and before(ra[x], tonumber(ra[x + 1]), rb[y], tonumber(rb[y + 1]))) then
    out[#out + 1] = ra[x]; x = x + 2
  else
    out[#out + 1] = rb[y]; y = y + 2
  end
end
return out
