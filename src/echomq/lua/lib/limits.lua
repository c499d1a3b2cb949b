-- lib/limits: flow control decided inside the claim (spliced in by the loader; the
-- script defines `B` and includes lib/keys and lib/common first).
-- A rate limit is a sliding window log of the starts of the last `per` ms (scores =
-- the server's ms). A claim may start a job while fewer than `max` starts lie in the
-- window (now - per, now]; so no window of `per` ms ever holds more than `max` starts,
-- at any edge. A lane's log holds one entry per start (member id:token; at most `max`
-- live entries plus the expired ones not trimmed yet: each call trims a few more than
-- it adds); every log expires `per` ms after its last start, so an idle queue keeps
-- nothing.
-- The queue's own log (`rate`) holds one entry per claim call, not per start: member =
-- the running count of starts after the call (zero-padded, so ties of time order by
-- it), score = the call's time. The starts in a window ending now are the newest count
-- less the count at the newest entry before the window (0 when none: the log began at
-- 0), and the newest expired entry is kept as that base (a fresh log starts from 0);
-- so a busy queue writes and trims one entry per call, whatever the batch.
-- The queue's limit also spreads its starts: at most `burst` of them in any window of
-- `spread_span` ms, counted on the same log (a shorter window), so with a backlog the
-- starts come `burst` at a time all through the window, not all `max` at its start
-- (every window of `per` ms then holds between about max - burst and max starts).
-- burst = max is the plain sliding window.
-- A lane whose window is full (or that a handler blocked) leaves the ring for `gwait`
-- (score = when it may be served again); the claim brings due lanes back to the
-- ring's head, a bounded few a call, so a held lane is never passed over claim after
-- claim and gets its turn as soon as its window frees.

-- the separator inside a start's member (id:token) and a lane's limit (max:per): text
-- within a value, not a key's suffix
local SEP = ':'

-- meta `limits`: '1' while the queue has flow control the claim must apply (a rate, a
-- cap, a lanes' default, a handler's hold still ahead, a lane's own rate in grate or a
-- lane held in gwait). The claim reads the limits only when it is set, so a queue with
-- none pays one HEXISTS for them. Every writer of a limit sets it again from what is
-- there (set_limits, set_group_rate, rate_limited), and so does every worker's beat
-- (a limit an older client wrote without the flag is applied within a beat); the
-- claim drops it when it finds nothing left. Written only when it changes (a waiting
-- worker WATCHes meta).
local function limits_flag()
  local m = redis.call('HMGET', B .. META, 'rate_max', 'concurrency', 'group_rate_max',
    'limited_until', 'limits')
  local on = m[1] or m[2] or m[3] or (m[4] and tonumber(m[4]) > now_ms())
    or redis.call('EXISTS', B .. GRATE, B .. GWAIT) > 0
  if on and not m[5] then
    redis.call('HSET', B .. META, 'limits', '1')
  elseif m[5] and not on then
    redis.call('HDEL', B .. META, 'limits')
  end
end

-- the queue's limits from meta, one read: rate max/ms, concurrency, limited until,
-- the lanes' default rate max/ms, the rate's burst (each nil when unset)
local function limits_read()
  local f = redis.call('HMGET', B .. META, 'rate_max', 'rate_ms', 'concurrency',
    'limited_until', 'group_rate_max', 'group_rate_ms', 'rate_burst')
  return {tonumber(f[1]), tonumber(f[2]), tonumber(f[3]), tonumber(f[4]),
    tonumber(f[5]), tonumber(f[6]), tonumber(f[7])}
end

-- how many starts of log `key` lie in the window of `per` ms ending at now, after
-- trimming up to k expired ones from its oldest end
local function window_count(key, per, now, k)
  trim_before(key, now - per + 1, k)
  return redis.call('ZCOUNT', key, now - per + 1, '+inf')
end

-- when the window of log `key` (holding n starts, `extra` more about to be logged at
-- now) admits one more start under `max`: the start that must leave first is the
-- (n + extra - max)-th of the window (0-based, oldest first); it leaves at its time +
-- per. One read of one entry.
local function window_free_at(key, per, now, n, extra, max)
  local i = n + extra - max
  if i >= n then return now + per end
  local r = redis.call('ZRANGEBYSCORE', key, now - per + 1, '+inf', 'WITHSCORES',
    'LIMIT', i, 1)
  if #r == 0 then return now + per end
  return tonumber(r[2]) + per
end

-- log starts (member id:token each, in `ms`) at now in log `key`, kept `per` ms
local function log_starts(key, ms, nows, per)
  local zs = {}
  for i = 1, #ms do
    zs[2 * i - 1] = nows
    zs[2 * i] = ms[i]
  end
  zadd_desc(key, zs)
  redis.call('PEXPIRE', key, per)
end

-- the spreading window: 90% of the burst's share of the window (floor, at least 1 ms).
-- Its share exactly would make it the binding limit, and each wake-up's latency would
-- then add up, chunk after chunk; a little shorter, the window of `per` ms binds in the
-- steady state, and it repeats the previous window's starts one window later.
local function spread_span(burst, per, max)
  return math.max(1, math.floor(burst * per * 9 / (max * 10)))
end

-- ---- the queue's counted log (one entry per call; see above) ----

local COUNT_FMT = '%015d'

-- the running count at the newest entry of `key` at or before time t (0 when none)
local function count_at(key, t)
  local r = redis.call('ZREVRANGEBYSCORE', key, t, '-inf', 'LIMIT', 0, 1)
  return tonumber(r[1] or 0)
end

-- the newest running count of `key` (0 for an empty log)
local function count_last(key)
  local r = redis.call('ZRANGE', key, -1, -1)
  return tonumber(r[1] or 0)
end

-- trim up to k expired entries (time <= now - per) from the oldest end, keeping the
-- newest expired one: the base the window's count is read against
local function counted_trim(key, per, now, k)
  local due = redis.call('ZCOUNT', key, '-inf', now - per)
  if due > 1 then redis.call('ZREMRANGEBYRANK', key, 0, math.min(due - 1, k) - 1) end
end

-- when a window of `w` ms admits one more start under `max`, `total` starts counted
-- (`last` of them logged, the rest made now): the start numbered total - max + 1 must
-- leave it, at its entry's time + w (one of this call's: now + w). Its entry is found
-- by a binary search over the ranks (both the times and the counts ascend with rank):
-- a few reads of one entry, on the path of a full window only.
local function counted_free_at(key, w, now, last, total, max)
  local s = total - max + 1
  if s > last then return now + w end
  local lo, hi = 0, redis.call('ZCARD', key) - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('ZRANGE', key, mid, mid)[1]) >= s then hi = mid else lo = mid + 1 end
  end
  local at = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  return tonumber(at[2]) + w
end

-- log one call's `made` starts (the running count last + made) at now, kept `per` ms
local function counted_log(key, last, made, nows, per)
  redis.call('ZADD', key, nows, string.format(COUNT_FMT, last + made))
  redis.call('PEXPIRE', key, per)
end

-- a lane's rate limit: its own (grate, 'max:per') or the queue's default; nil if none
local function lane_rate(g, lim)
  local r = redis.call('HGET', B .. GRATE, g)
  if r then
    local m, p = string.match(r, '^(%d+):(%d+)$')
    return tonumber(m), tonumber(p)
  end
  return lim[5], lim[6]
end

-- the lane of g, at the ring's head, leaves it until `at` (ms): into gwait, its turn
-- count dropped (a parked lane is not serveable, so no path rings it meanwhile)
local function park_head(g, at)
  redis.call('LPOP', B .. RING)
  redis.call('HDEL', B .. GTURN, g)
  redis.call('ZADD', B .. GWAIT, at, g)
end

-- up to k lanes whose wait ended leave gwait; each that can be served goes to the
-- ring's head (the earliest due first), so its turn is not lost behind the lanes
-- served while it waited
local function unpark(now, k)
  local gw = B .. GWAIT
  local due = redis.call('ZRANGEBYSCORE', gw, '-inf', now, 'LIMIT', 0, k)
  if #due == 0 then return end
  redis.call('ZREM', gw, unpack(due))
  for i = #due, 1, -1 do
    if serveable(due[i]) then
      redis.call('LPUSH', B .. RING, due[i])
    else
      prune_group(due[i])
    end
  end
end

-- ms until the first held lane may be served again, or nil when none is held
local function lanes_wait(now)
  local r = redis.call('ZRANGE', B .. GWAIT, 0, 0, 'WITHSCORES')
  if #r == 0 then return nil end
  return math.max(1, tonumber(r[2]) - now)
end
