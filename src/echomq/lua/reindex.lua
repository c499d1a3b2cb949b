#!lua flags=allow-oom
-- reindex: one bounded step of rebuilding the lanes' index `gindex` (every lane's job,
-- same score), which counts, browse, drain and obliterate read instead of walking the
-- lanes. A queue written before the index existed has lanes the index misses; a
-- client of that time that claimed or removed a lane job left the index a stale
-- member. Two phases, resumable from the cursor this step answers:
--   lanes: every lane (groups by SSCAN page, a page's groups in name order, a lane by
--          rank) adds its jobs to the index at their lane score (ZADD CH: a member at
--          another score is re-scored);
--   index: the index by rank; a member whose row names no group or whose group's lane
--          does not hold it is stale and leaves the index.
-- Idempotent: a second run finds nothing to do. A job that moves while the walk runs
-- keeps the index itself (every transition does), but a member removed ahead of the
-- walk's rank shifts the rest down, so a concurrent walk may pass over as many; a
-- second run finds what the first missed.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  phase: 'lanes' | 'index'
-- ARGV[2]  lanes: the SSCAN cursor of `groups` whose page this step starts in; else ''
-- ARGV[3]  lanes: the group of that page to start at ('' = its first); else ''
-- ARGV[4]  the rank to start at: in that group's lane (lanes) or in the index (index)
-- ARGV[5]  scan: the most members this step examines (its bound; a step also stops
--          after about 1 ms of server time, and the cursor carries on)
-- ARGV[6]  '1' for a dry run (count, write nothing), else ''
-- ARGV[7]  actor (optional; '' = none), written to the audit journal
-- Reply:   {added (lane jobs added to or re-scored in the index; on a dry run, that
--          would be), removed (stale members, or would be), examined, phase, page,
--          group, offset (where the next step starts), done (1 when the walk is over)}
-- Refusals: none (the arguments are gated by the client).
-- Writes:  (not on a dry run) ZADD CH / ZREM on gindex only; one audit entry (verb
--          reindex, count = added + removed) per step that changed the index.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include audit
--! include bulk
local phase, page, from, off = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local left, dry = tonumber(ARGV[5]), ARGV[6] == '1'
local idx = B .. GINDEX
local over, cut = slicer(), false
local added, removed, seen, done = 0, 0, 0, 0

-- index lane g from rank o on; returns the rank reached and whether the lane is done
local function index_lane(g, o)
  local lane = lane_key(g)
  while left > 0 do
    local k = math.min(left, 64)
    local r = redis.call('ZRANGE', lane, o, o + k - 1, 'WITHSCORES')
    local n = #r / 2
    if n > 0 then
      if dry then
        for i = 1, #r, 2 do
          local s = redis.call('ZSCORE', idx, r[i])
          if not s or tonumber(s) ~= tonumber(r[i + 1]) then added = added + 1 end
        end
      else
        local args = {}
        for i = 1, #r, 2 do
          args[#args + 1] = r[i + 1]
          args[#args + 1] = r[i]
        end
        added = added + redis.call('ZADD', idx, 'CH', unpack(args))
      end
    end
    seen, left, o = seen + n, left - n, o + n
    if n < k then return o, true end
    if over(SLICE_EVERY) then
      cut = true
      return o, false
    end
  end
  return o, false
end

if phase == 'lanes' then
  while left > 0 and not cut do
    local r = redis.call('SSCAN', B .. GROUPS, page, 'COUNT', 100)
    local names = r[2]
    table.sort(names)
    local stopped = false
    for _, g in ipairs(names) do
      if g >= from then
        local o, finished = index_lane(g, g == from and off or 0)
        if not finished then
          from, off, stopped = g, o, true
          break
        end
      end
    end
    if stopped then break end
    from, off = '', 0
    page = r[1]
    if page == '0' then
      phase = 'index'
      break
    end
    if over(SLICE_EVERY) then cut = true end
  end
end

if phase == 'index' then
  page, from = '', ''
  while left > 0 and not cut do
    local k = math.min(left, 64)
    local r = redis.call('ZRANGE', idx, off, off + k - 1)
    local stale = {}
    for _, id in ipairs(r) do
      local g = redis.call('HGET', B .. JOB .. id, 'group')
      if not (g and redis.call('ZSCORE', lane_key(g), id)) then stale[#stale + 1] = id end
    end
    if not dry and #stale > 0 then redis.call('ZREM', idx, unpack(stale)) end
    removed, seen, left = removed + #stale, seen + #r, left - #r
    -- the members removed leave the ranks after them one lower
    off = off + #r - (dry and 0 or #stale)
    if #r < k then
      done = 1
      break
    end
    if over(SLICE_EVERY) then cut = true end
  end
end

if not dry and added + removed > 0 then
  audit('reindex', cjson.encode({added = added, removed = removed}),
    done == 1 and 'done' or 'more', added + removed, ARGV[7])
end
return {added, removed, seen, phase, page, from, off, done}
