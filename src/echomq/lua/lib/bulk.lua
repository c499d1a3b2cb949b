-- lib/bulk: the filter and the bounded walk shared by the bulk verbs (spliced in by the
-- loader; the script defines `B`). A bulk step examines at most `scan` members of one
-- sorted set from rank `offset` on, in the set's order; the members it acts on leave
-- the set, the others stay, so the next step starts at offset + examined - acted (the
-- cursor). A dry run acts on none and answers how many it would have.

-- The time slice: a step (or a drain/obliterate call) stops early once it has run this
-- long, whatever its budget, so every call fits the server-time bound by construction;
-- the caller's cursor or "more" carries on. Checked every SLICE_EVERY members. The
-- bound is 10 ms of wall time on a shared 2-core machine: a call the kernel
-- deschedules part-way is charged the wait too, and a short burst after the server
-- slept on its socket is rarely cut, so the slice is well under the bound (1 ms: a
-- call's round trip costs about a tenth of that).
local SLICE_US = 1000
local SLICE_EVERY = 16

-- the server clock in microseconds (TIME advances inside a script)
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- a deadline checker: slice_over(i) is true once member i is past the slice's end
local function slicer()
  local stop = clock_us() + SLICE_US
  return function(i)
    return i % SLICE_EVERY == 0 and clock_us() >= stop
  end
end

-- The filter, read from ARGV[i .. i+4]: job name, group, a substring of the last error,
-- the lowest and the highest job id (a time range: ids sort in mint order); '' = any.
local function bulk_filter(i)
  local f = {name = ARGV[i], group = ARGV[i + 1], err = ARGV[i + 2], lo = ARGV[i + 3],
    hi = ARGV[i + 4]}
  f.row = f.name ~= '' or f.group ~= '' or f.err ~= ''
  return f
end

-- the filter as the audit journal records it
local function filter_json(f, extra)
  local t = extra or {}
  if f.name ~= '' then t.name = f.name end
  if f.group ~= '' then t.group = f.group end
  if f.err ~= '' then t.error = f.err end
  if f.lo ~= '' then t.id_from = f.lo end
  if f.hi ~= '' then t.id_to = f.hi end
  return cjson.encode(t)
end

-- whether job `id` (row jk) passes the filter; the row's group is returned too (the
-- caller needs it to act). A member whose row is gone never matches.
local function bulk_match(id, jk, f)
  if f.lo ~= '' and id < f.lo then return false end
  if f.hi ~= '' and id > f.hi then return false end
  local r = redis.call('HMGET', jk, 'name', 'group', 'last_error', 'state')
  if not r[4] then return false end
  if f.name ~= '' and r[1] ~= f.name then return false end
  if f.group ~= '' and r[2] ~= f.group then return false end
  if f.err ~= '' and not (r[3] and string.find(r[3], f.err, 1, true)) then return false end
  return true, r[2]
end

-- Pop up to k lane jobs off the lanes' index (`gindex` holds every lane's job, so the
-- lanes are found without walking the groups): each one leaves its lane and goes
-- with its row (logs, lock, dedup key). `emptied` (a table, or nil) collects the
-- groups whose lane this left empty. A member whose row or lane no longer holds it
-- (an index a pre-index client left stale) only leaves the index. Returns how many
-- members were popped and how many of them were jobs deleted. Each deletion is the
-- job's ending with `outcome` (drained, obliterated: lib/flow flow_drop, which the
-- including script includes before this lib).
local function drop_indexed(k, emptied, outcome)
  local popped = redis.call('ZPOPMIN', B .. GINDEX, k)
  local n = 0
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = B .. JOB .. id
    local r = redis.call('HMGET', jk, 'group')
    if r[1] then
      local lane = lane_key(r[1])
      if redis.call('ZREM', lane, id) == 1 then
        flow_drop(id, outcome)  -- lib/flow: the including script includes it first
        n = n + 1
        if emptied and redis.call('EXISTS', lane) == 0 then emptied[r[1]] = true end
      end
    end
  end
  return #popped / 2, n
end

-- a reply of integers as text (kept in an audit entry), and back
local function ints_text(t) return table.concat(t, ' ') end
local function text_ints(s)
  local out = {}
  for v in string.gmatch(s, '%S+') do out[#out + 1] = tonumber(v) end
  return out
end
