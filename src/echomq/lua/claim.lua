#!lua flags=allow-oom
-- claim: lease up to `count` ready jobs, alternating flat pending and the lane ring.
-- The queue-wide pause is NOT read here: the claim function reads meta.paused in its
-- own round trip first (the separate gate), so this transition carries no pause logic.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  lease_ms;  ARGV[2] count;  ARGV[3] 'f' (flat first) or 'g' (lanes first)
-- ARGV[4]  lock ttl in ms: when > 0 the job's :lock key is set to its token
-- ARGV[5]  rid, the claim request id (text; '' or omitted = none). A call with a rid
--          that claimed any job records their ids (space-separated) in claimreq:<rid>
--          with PX 60000 and indexes the rid in the zset `claimreqs` (score = its expiry
--          in ms), so that obliterate finds the records without scanning the keyspace; up
--          to 8 expired entries are trimmed from the index's oldest end (by time).
-- ARGV[6]  '1' when this call is a re-send after a lost reply (the transport sets it;
--          '' or omitted = a first send, whose fresh rid has no record to read). Only a
--          re-send reads claimreq:<rid>: when the record exists (the first run ran),
--          nothing new is claimed and the reply lists the jobs recorded there that are
--          still active, each with its row's current attempts as token, in order.
-- Reply:   a flat array, 5 entries per job: id, payload, token, name, group ('' = none);
--          then, when flow control held the claim back (lib/limits), one more entry:
--          {scope, ms}. scope 'rate' (the queue's rate window is full: no start for ms),
--          'blocked' (a handler's RateLimited holds the queue for ms), 'concurrency'
--          (the queue's cap is reached: ms 0, a slot frees with a wake token) or
--          'lanes' (fewer jobs than asked, and a held lane is due again in ms). A
--          re-send's answer carries none.
-- Refusals: none (an empty array when nothing is ready).
-- Limits:  only when meta's flag `limits` is set (one HEXISTS; lib/limits
--          limits_flag): then read from meta in one HMGET (rate_max/rate_ms/rate_burst,
--          concurrency, limited_until, group_rate_max/group_rate_ms) before anything is
--          popped (a flagged queue with none of rate, cap or lanes' default set, no grate
--          and no gwait left drops the flag: HDEL meta limits), and
--          counted in the same step as the pops: the queue's start log `rate` (one
--          entry per call: member = the running count of starts, zero-padded, score =
--          the call's ms; its window of rate_ms and a spreading window for rate_burst)
--          and each limited lane's `gs:<group>` (member id:token, score = start ms);
--          lanes held by a full window or a handler wait in `gwait` off the ring, and
--          up to 32 due ones return to the ring's head first. Without the flag no
--          limit is read and nothing of flow control is written.
-- Writes:  ZPOPMIN pending|lane (pending: a batch in one ZPOPMIN when the ring is
--          empty, its length read once before the loop; else one at a time, in
--          turns), attempts + 1 and state active (one HSET), ZADD active
--          deadline (one for the batch, after the loop), gactive/ring/gturn for lanes, the :lock key, claimreq:<rid>; event 'active'.
--          Every row also gets started_at on its first claim (token 1) and
--          last_started_at on every later one, in the same HSET (the first claim
--          writes one time, not the same time twice: a reader takes started_at when
--          last_started_at is absent); the ending reads them for the history series.
local B = KEYS[1]
--! include keys
--! include common
--! include series
-- flow control's helpers (lib/limits), made only for a queue whose meta says it has
-- some (`limits`): each helper is a closure made anew on every call that defines it
local function limits_lib()
--! include limits
  return {read = limits_read, window_count = window_count,
    window_free_at = window_free_at, log_starts = log_starts, spread_span = spread_span,
    count_at = count_at, count_last = count_last, counted_trim = counted_trim,
    counted_free_at = counted_free_at, counted_log = counted_log, lane_rate = lane_rate,
    park_head = park_head, unpark = unpark, lanes_wait = lanes_wait, SEP = SEP}
end
local lease = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local side = ARGV[3]
local lockttl = tonumber(ARGV[4])
local rid = ARGV[5] or ''
if rid ~= '' and ARGV[6] == '1' then
  local seen = redis.call('GET', B .. CLAIMREQ .. rid)
  if seen then
    -- a repeat of a request that ran: answer what it claimed, claim nothing new
    local again = {}
    for id in string.gmatch(seen, '%S+') do
      local f = redis.call('HMGET', B .. JOB .. id, 'state', 'attempts', 'payload',
        'name', 'group')
      if f[1] == 'active' then
        again[#again + 1] = id
        again[#again + 1] = f[3] or ''
        again[#again + 1] = tonumber(f[2])
        again[#again + 1] = f[4] or ''
        again[#again + 1] = f[5] or ''
      end
    end
    return again
  end
end
local now, nows = now_text()
-- flow control: the queue's limits, before anything is popped (lib/limits), read only
-- when meta's flag `limits` is set; L holds the helpers then (nil: no limit anywhere)
local L, lim = nil, {}
if redis.call('HEXISTS', B .. META, 'limits') == 1 then
  L = limits_lib()
  lim = L.read()
end
if lim[4] and lim[4] > now then return {{'blocked', lim[4] - now}} end
local asked = count
local in_act, in_win  -- the queue's active count and rate window count, when limited
local burst, span, in_span  -- the rate's burst, its spreading window (ms) and count
local last  -- the rate log's running count of starts (lib/limits)
if lim[3] then
  in_act = redis.call('ZCARD', B .. ACTIVE)
  if in_act >= lim[3] then return {{'concurrency', 0}} end
  count = math.min(count, lim[3] - in_act)
end
-- ms until the rate's windows admit one more start, given `made` starts of this call
local rate_wait
if lim[1] and lim[2] then
  rate_wait = function(made)
    local at = now
    if in_win + made >= lim[1] then
      at = L.counted_free_at(B .. RATE, lim[2], now, last, last + made, lim[1])
    end
    if in_span and in_span + made >= burst then
      at = math.max(at, L.counted_free_at(B .. RATE, span, now, last, last + made, burst))
    end
    return at - now
  end
  L.counted_trim(B .. RATE, lim[2], now, 8)
  last = L.count_last(B .. RATE)
  in_win = last - L.count_at(B .. RATE, now - lim[2])
  burst = math.min(lim[7] or lim[1], lim[1])
  if burst < lim[1] then
    span = L.spread_span(burst, lim[2], lim[1])
    in_span = last - L.count_at(B .. RATE, now - span)
  end
  local w = rate_wait(0)
  if w > 0 then return {{'rate', w}} end
  count = math.min(count, lim[1] - in_win, in_span and burst - in_span or count)
end
if L then
  L.unpark(now, 32)
  if not (lim[1] or lim[3] or lim[5])
      and redis.call('EXISTS', B .. GRATE, B .. GWAIT) == 0 then
    -- nothing left to apply (a handler's hold ran out, the last held lane came back):
    -- the flag goes, and the next claims read no limits
    redis.call('HDEL', B .. META, 'limits')
  end
end
-- the text the server would format from the number, made once for the batch: a
-- whole number's digits by %d (the float format %.17g costs the server about 2,800
-- instructions more, for the same characters)
local deadline = now + lease
deadline = string.format(deadline % 1 == 0 and '%d' or '%.17g', deadline)
local ring = B .. RING
local out = {}
local act = {}  -- deadline, id, ...: one ZADD active for the batch, after the loop
local flat_dry, ring_dry = false, false
local ring_len  -- the ring's length read before the loop, taken by the first pop_lane

-- the head of pending; `want` ids are popped at once (the rest kept for the next
-- calls) when the batch will take that many: one ZPOPMIN for a batch
local buf, bi = {}, 1
-- pops 1 while the ring may serve the next one, else what the batch still wants
-- (whole, at most 1000 a call): worked out here, where a function for it would be one
-- more closure made on every call
local function pop_flat()
  if bi <= #buf then bi = bi + 1; return buf[bi - 1] end
  if flat_dry then return nil end
  local want = ring_dry and math.min(math.ceil(count - #out / 5), 1000) or 1
  -- (one job: no count, so no number to format; the same reply)
  local r
  if want == 1 then
    r = redis.call('ZPOPMIN', B .. PENDING)
  else
    r = redis.call('ZPOPMIN', B .. PENDING, want)
  end
  if #r == 0 then flat_dry = true; return nil end
  buf, bi = {}, 2
  for i = 1, #r, 2 do buf[#buf + 1] = r[i] end
  if #buf < want then flat_dry = true end
  return buf[1]
end

local lanestarts = L and {}  -- group -> starts this call made in its limited lane
local function pop_lane()
  if ring_dry then return nil end
  local len = ring_len or redis.call('LLEN', ring)
  ring_len = nil
  for _ = 1, len do
    local g = redis.call('LINDEX', ring, 0)
    if not g then break end
    if not serveable(g) then
      -- defensive: a group that cannot be served leaves the ring
      redis.call('LPOP', ring)
      redis.call('HDEL', B .. GTURN, g)
    else
      local rmax, rper
      if L then rmax, rper = L.lane_rate(g, lim) end
      local sk, n, p = nil, 0, 0
      if rmax and rper then
        -- n starts logged in its window, p more made by this call (logged after)
        sk = B .. GSTARTS .. g
        n, p = L.window_count(sk, rper, now, 8), lanestarts[g] or 0
      end
      if sk and n + p >= rmax then
        -- its window is full (a limit lowered, or a lane brought back early): held
        L.park_head(g, L.window_free_at(sk, rper, now, n, p, rmax))
      else
        local r = redis.call('ZPOPMIN', lane_key(g))
        redis.call('ZREM', B .. GINDEX, r[1])
        redis.call('HINCRBY', B .. GACTIVE, g, 1)
        if sk then lanestarts[g] = p + 1 end
        if sk and n + p + 1 >= rmax then
          -- this start fills its window: held off the ring, from its head, until the
          -- window frees (the start is logged by the claim loop, with its token)
          L.park_head(g, L.window_free_at(sk, rper, now, n, p + 1, rmax))
        elseif not serveable(g) then
          -- the lane emptied or hit its limit: leave the ring from its head (O(1),
          -- where an LREM would walk a ring of many tenants)
          redis.call('LPOP', ring)
          redis.call('HDEL', B .. GTURN, g)
        else
          -- a weighted group keeps the head of the ring for `weight` claims per turn
          local w = tonumber(redis.call('HGET', B .. GWEIGHT, g) or '1')
          if w <= 1 or redis.call('HINCRBY', B .. GTURN, g, 1) >= w then
            if w > 1 then redis.call('HDEL', B .. GTURN, g) end
            redis.call('LMOVE', ring, ring, 'LEFT', 'RIGHT')
          end
        end
        return r[1], g, sk and rper
      end
    end
  end
  ring_dry = true
  return nil
end

local lanelogs = L and {}  -- a limited lane's group -> {per, id:token, ...}, logged after

-- for a batch, the ring's length, read once before the loop (nothing above the loop
-- moves it after here): an empty ring lets the flat side pop the whole batch in one
-- ZPOPMIN, and a full one's first pop_lane takes this read instead of its own (a claim
-- of one job pops once and reads it only if pending is empty, as pop_lane does)
if count > 1 then
  ring_len = redis.call('LLEN', ring)
  ring_dry = ring_len == 0
end

while #out < count * 5 do
  local id, g, gper
  if side == 'f' then
    id = pop_flat()
    if not id then id, g, gper = pop_lane() end
  else
    id, g, gper = pop_lane()
    if not id then id = pop_flat() end
  end
  if not id then break end
  local jk = B .. JOB .. id
  -- one read and one write of the row: the new token is attempts + 1
  local f = redis.call('HMGET', jk, 'attempts', 'payload', 'name')
  local tok = (tonumber(f[1]) or 0) + 1
  -- the token as text, formatted once (a number argument is formatted on each use)
  local toks = tok == 1 and '1' or tostring(tok)
  if tok == 1 then
    redis.call('HSET', jk, 'attempts', toks, 'state', 'active', 'started_at', nows)
  else
    redis.call('HSET', jk, 'attempts', toks, 'state', 'active', 'last_started_at', nows)
  end
  act[#act + 1] = deadline
  act[#act + 1] = id
  if lockttl > 0 then redis.call('SET', jk .. LOCK, toks, 'PX', ARGV[4]) end
  out[#out + 1] = id
  out[#out + 1] = f[2] or ''
  out[#out + 1] = tok
  out[#out + 1] = f[3] or ''
  out[#out + 1] = g or ''
  if gper then
    -- a start in a limited lane's log (member id:token)
    local l = lanelogs[g]
    if not l then l = {gper}; lanelogs[g] = l end
    l[#l + 1] = id .. L.SEP .. toks
  end
  emit('{"event":"active","job":"' .. id .. '","attempt":' .. toks .. '}')
  side = (side == 'f') and 'g' or 'f'
end
if #act > 0 then zadd_desc(B .. ACTIVE, act) end
-- the starts, in the queue's log (one entry) and each limited lane's (lib/limits)
local held = nil
local started = #out / 5
if in_win then
  local w = rate_wait(started)
  if started > 0 then L.counted_log(B .. RATE, last, started, nows, lim[2]) end
  if w > 0 then held = {'rate', w} end
end
if lanelogs then
  for g, l in pairs(lanelogs) do
    L.log_starts(B .. GSTARTS .. g, {unpack(l, 2)}, nows, l[1])
  end
end
if not held and in_act and in_act + started >= lim[3] then held = {'concurrency', 0} end
if not held and L and started < asked then
  local w = L.lanes_wait(now)
  if w then held = {'lanes', w} end
end
if rid ~= '' and #out > 0 then
  local got = {}
  for i = 1, #out, 5 do got[#got + 1] = out[i] end
  redis.call('SET', B .. CLAIMREQ .. rid, table.concat(got, ' '), 'PX', '60000')
  local ix = B .. CLAIMREQS
  redis.call('ZADD', ix, now + 60000, rid)
  -- the index entries whose record expired, a few from the oldest end (lib/common)
  trim_before(ix, nows, 8)
end
if held then out[#out + 1] = held end
return out
