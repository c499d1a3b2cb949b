-- browse: a page of job ids in one state, newest first (score desc, then id desc).
-- For pending, the flat set and every lane are merged.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  set name (pending | active | schedule | dead);  ARGV[2] n;  ARGV[3] offset
-- Reply:   an array of at most n ids
-- Refusals: none. Read-only.
local B = KEYS[1]
local n, off = tonumber(ARGV[2]), tonumber(ARGV[3])
local sets = {B .. ARGV[1]}
if ARGV[1] == 'pending' then
  for _, g in ipairs(redis.call('SMEMBERS', B .. 'groups')) do
    sets[#sets + 1] = B .. 'g:' .. g .. ':pending'
  end
end
if #sets == 1 then
  return redis.call('ZRANGE', sets[1], off, off + n - 1, 'REV')
end
local rows = {}
for _, k in ipairs(sets) do
  local r = redis.call('ZRANGE', k, 0, off + n - 1, 'REV', 'WITHSCORES')
  for i = 1, #r, 2 do rows[#rows + 1] = {r[i], tonumber(r[i + 1])} end
end
table.sort(rows, function(a, b)
  if a[2] ~= b[2] then return a[2] > b[2] end
  return a[1] > b[1]
end)
local out = {}
for i = off + 1, math.min(off + n, #rows) do out[#out + 1] = rows[i][1] end
return out
