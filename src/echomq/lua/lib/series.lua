-- lib/series: the history series and the busiest lanes' table in it (schema.HIST_*;
-- spliced in by the loader; the script defines `B` and includes lib/keys and lib/common
-- first): an ending job's wait and run (job_times) and count_metric, which counts them
-- in the queue-hour's key.

-- The history series (schema.HIST_*). A job's id carries its mint time (ids.py: the
-- top 41 bits of the 63-bit snowflake are ms since ID_EPOCH_MS; a double keeps them).
local ID_EPOCH_MS = 1704067200000
local function b62(c)
  if c <= 57 then return c - 48 elseif c <= 90 then return c - 55 end
  return c - 61
end
local function id_ms(id)
  -- the first 8 of the 11 digits (one string.byte call): the last 3 weigh under 0.06 ms
  local c1, c2, c3, c4, c5, c6, c7, c8 = string.byte(id, 4, 11)
  local v = ((((((b62(c1) * 62 + b62(c2)) * 62 + b62(c3)) * 62 + b62(c4)) * 62 + b62(c5))
    * 62 + b62(c6)) * 62 + b62(c7)) * 62 + b62(c8)
  return math.floor(v * 238328 / 4194304) + ID_EPOCH_MS
end

-- an ending job's wait (its enqueue, `enq` = a kept row's enqueued_at or else its id's
-- time, to its first start `started`) and run (its last start, `last` or `started`, to
-- now) in ms; 0 and 0 for a row with no start time (claimed before these fields); a
-- wait at most HIST_KEEP_MS
local function job_times(id, started, last, enq, now)
  local s = tonumber(started)
  if not s then return 0, 0 end
  local wait = s - (tonumber(enq) or id_ms(id))
  local run = now - (tonumber(last) or s)
  -- a caller's own id not minted from a clock (its time years back) counts no more
  -- than the series keeps
  if wait > HIST_KEEP_MS then wait = HIST_KEEP_MS end
  if wait < 0 then wait = 0 end
  if run < 0 then run = 0 end
  return wait, run
end

-- a lane's hash in the hour's table (schema.HIST_LANE_HASH_AT): djb2 of its name's
-- bytes, 32 bits, never 0 (0 marks an empty slot); answers its 4 bytes as the table
-- holds them (big-endian, BITFIELD's u32) and the number. One function, not three: each
-- helper costs every call of the script a closure, flat endings too
local function lane_pat(g)
  -- the bytes in one call (a call per byte costs more than the arithmetic)
  local h, b = 5381, {string.byte(g, 1, -1)}
  -- the modulo once every 4 bytes: h * 33^4 + ... stays under 2^53, exact in a double
  for i = 1, #b do
    h = h * 33 + b[i]
    if i % 4 == 0 then h = h % 4294967296 end
  end
  h = h % 4294967296
  if h == 0 then h = 1 end
  local b4 = h % 256
  local x = (h - b4) / 256
  local b3 = x % 256
  x = (x - b3) / 256
  local b2 = x % 256
  return string.char((x - b2) / 256, b2, b3, b4), h
end

-- the slot (1-based) whose hash is the 4 bytes `pat` in the hashes' bytes, or nil: a
-- plain find (one C call), taken only at a slot's boundary
local function slot_of(raw, pat)
  local at = 1
  while true do
    local p = string.find(raw, pat, at, true)
    if not p then return nil end
    if (p - 1) % 4 == 0 then return (p + 3) / 4 end
    at = p + 1
  end
end

-- the busiest lanes' writes for the hour key hk, appended to ops (count_metric's
-- BITFIELD, after its minute's operations): lanes is one lane's name (its figures the
-- metric's) or a list of {name, n, wait, run}; dead: whether the endings are deaths.
-- raw: the slots' hashes' bytes (count_metric's GETRANGE); each lane adds to its slot,
-- else takes the first empty one, else, if its job id admits it (id: the one lane's job;
-- a listed lane's 5th: its first job's; schema.hist_lane_admits), takes over the
-- fewest-ended (the first of equals; the endeds read then, once), starting it afresh;
-- a lane not admitted writes nothing here (the minute counts its endings).
-- A lane that takes a slot is named in LANENAMES (score now), and trims up to 8 of the
-- names older than the series keeps (trim_before: bounded per call)
local function lane_ops(hk, raw, ops, lanes, n, wait, run, dead, now, id)
  local fmt = string.format
  -- the endeds, read only when a lane must take over a slot; until then this call's
  -- own changes: `fresh` slots taken over (their old count gone), `delta` added
  local ended, fresh, delta = nil, {}, {}
  if type(lanes) == 'string' then lanes = {{lanes, n, wait, run, id}} end
  for _, lane in ipairs(lanes) do
    local g, m = lane[1], lane[2]
    local pat, h = lane_pat(g)
    local pick = slot_of(raw, pat)
    local empty = not pick and slot_of(raw, '\0\0\0\0')
    local admit = pick or empty
    if not admit then
      -- the admission filter: the job id's djb2 times HIST_LANE_ADMIT_MIX mod 2^32 (by
      -- its 16-bit halves: each product under 2^53, exact in a double)
      local _, x = lane_pat(lane[5])
      admit = (x * HIST_LANE_ADMIT_MIX_LO + x * HIST_LANE_ADMIT_MIX_HI % 65536 * 65536)
        % 4294967296 < HIST_LANE_ADMIT_BELOW
    end
    local by = m == 1 and '1' or fmt('%d', m)
    local units = fmt('%d', math.floor((lane[3] + HIST_WAIT_UNIT_MS / 2) / HIST_WAIT_UNIT_MS))
    local ms = fmt('%d', lane[4])
    local j = #ops
    if not admit then
      -- not admitted: no lane writes, no endings read, no name
    elseif pick then
      local s = HIST_LANES_AT + (pick - 1) * HIST_LANE_BITS
      ops[j + 1], ops[j + 2], ops[j + 3], ops[j + 4] = 'INCRBY', HIST_LANE_ENDED_T,
        fmt('%d', s + HIST_LANE_ENDED_AT), by
      ops[j + 5], ops[j + 6], ops[j + 7], ops[j + 8] = 'INCRBY', HIST_LANE_WAIT_T,
        fmt('%d', s + HIST_LANE_WAIT_AT), units
      ops[j + 9], ops[j + 10], ops[j + 11], ops[j + 12] = 'INCRBY', HIST_LANE_RUN_MS_T,
        fmt('%d', s + HIST_LANE_RUN_MS_AT), ms
      if dead then
        ops[j + 13], ops[j + 14], ops[j + 15], ops[j + 16] = 'INCRBY', HIST_LANE_DEAD_T,
          fmt('%d', s + HIST_LANE_DEAD_AT), by
      end
      delta[pick] = (delta[pick] or 0) + m
      -- the count as the server will hold it (saturating), for a later takeover
      if ended then ended[pick] = math.min(ended[pick] + m, 1048575) end
    else
      local i = empty
      if not i then
        if not ended then
          local get = {}
          for k = 1, HIST_LANES do
            get[3 * k - 2], get[3 * k - 1] = 'GET', HIST_LANE_ENDED_T
            get[3 * k] = HIST_LANES_AT + (k - 1) * HIST_LANE_BITS + HIST_LANE_ENDED_AT
          end
          ended = redis.call('BITFIELD_RO', hk, unpack(get))
          for k = 1, HIST_LANES do
            ended[k] = math.min((fresh[k] and 0 or ended[k]) + (delta[k] or 0), 1048575)
          end
        end
        i = 1
        for k = 2, HIST_LANES do
          if ended[k] < ended[i] then i = k end
        end
      end
      local s = HIST_LANES_AT + (i - 1) * HIST_LANE_BITS
      ops[j + 1], ops[j + 2], ops[j + 3], ops[j + 4] = 'SET', HIST_LANE_HASH_T,
        fmt('%d', HIST_LANE_HASH_AT + 32 * (i - 1)), fmt('%d', h)
      ops[j + 5], ops[j + 6], ops[j + 7], ops[j + 8] = 'SET', HIST_LANE_ENDED_T,
        fmt('%d', s + HIST_LANE_ENDED_AT), by
      ops[j + 9], ops[j + 10], ops[j + 11], ops[j + 12] = 'SET', HIST_LANE_DEAD_T,
        fmt('%d', s + HIST_LANE_DEAD_AT), dead and by or '0'
      ops[j + 13], ops[j + 14], ops[j + 15], ops[j + 16] = 'SET', HIST_LANE_WAIT_T,
        fmt('%d', s + HIST_LANE_WAIT_AT), units
      ops[j + 17], ops[j + 18], ops[j + 19], ops[j + 20] = 'SET', HIST_LANE_RUN_MS_T,
        fmt('%d', s + HIST_LANE_RUN_MS_AT), ms
      redis.call('ZADD', B .. LANENAMES, fmt('%d', now), g)
      -- the names no hour key keeps any longer go, a few per name written (lib/common
      -- trim_before: bounded whatever the churn, and it keeps up with any rate)
      trim_before(B .. LANENAMES, now - HIST_KEEP_MS - 3600000, 8)
      raw = string.sub(raw, 1, 4 * i - 4) .. pat .. string.sub(raw, 4 * i + 1)
      fresh[i], delta[i] = true, m
      if ended then ended[i] = math.min(m, 1048575) end
    end
  end
end

-- count n jobs that ended now (mk: B .. METRICS_COMPLETED or METRICS_FAILED, the dead)
-- with their summed wait and run (ms): the metric's all-time `count`, the minute's slot
-- of the queue-hour's history key (schema.HIST_FIELDS: completed or dead + n, the wait
-- in HIST_WAIT_UNIT_MS units (rounded), the run in ms; saturating), the key's expiry on
-- its first write (the marker bit's old value 0: PEXPIREAT the hour's end +
-- HIST_KEEP_MS). lanes (grouped endings only): the busiest lanes' table of the same key
-- (lane_ops; id: the one job's id, for the admission filter), written by the same BITFIELD. Every number argument costs the server a
-- format: the constants go as text, '1' for one job (the hot path)
local function count_metric(mk, n, now, wait, run, lanes, id)
  -- one job (the hot path) counts by the text '1': a number argument costs a format
  local by = n == 1 and '1' or n
  redis.call('HINCRBY', mk, 'count', by)
  local hour = math.floor(now / 3600000)
  local at = math.floor(now / 60000) % 60 * HIST_SLOT_BITS
  local hk = B .. HIST .. hour
  -- the offsets and sums as %d text: a number argument would be formatted as %.17g
  local fmt = string.format
  local wsum = fmt('%d', math.floor((wait + HIST_WAIT_UNIT_MS / 2) / HIST_WAIT_UNIT_MS))
  local rsum = fmt('%d', run)
  local done = mk == B .. METRICS_COMPLETED
  local r
  -- the slots' hashes' bytes: one GETRANGE (a BITFIELD GET per slot costs the server
  -- far more); '' for a new key or one of the first layout (which ends before the
  -- table) reads as all empty
  local raw = lanes and redis.call('GETRANGE', hk, HIST_LANE_HASH_FIRST_ARG,
    HIST_LANE_HASH_LAST_ARG)
  if raw and #raw ~= 4 * HIST_LANES then raw = string.rep('\0', 4 * HIST_LANES) end
  -- the hot path: one job whose lane holds a slot: its sums go in the minute's call as
  -- written here (an ops table and unpack cost more), the offsets cut from text
  local pick = type(lanes) == 'string' and slot_of(raw, (lane_pat(lanes)))
  if not pick and type(lanes) == 'string' and not slot_of(raw, '\0\0\0\0') then
    -- one job, its lane in no slot and none empty: the admission filter (lane_ops'),
    -- decided here so that a lane not admitted costs a flat ending's call
    local _, x = lane_pat(id)
    if (x * HIST_LANE_ADMIT_MIX_LO + x * HIST_LANE_ADMIT_MIX_HI % 65536 * 65536)
      % 4294967296 >= HIST_LANE_ADMIT_BELOW then
      lanes = nil
    end
  end
  if pick then
    local sub, k = string.sub, 4 * pick
    if done then
      r = redis.call('BITFIELD', hk, 'OVERFLOW', 'SAT', 'INCRBY', HIST_COMPLETED_T,
        fmt('%d', at + HIST_COMPLETED_AT), by, 'INCRBY', HIST_WAIT_T,
        fmt('%d', at + HIST_WAIT_AT), wsum, 'INCRBY', HIST_RUN_MS_T,
        fmt('%d', at + HIST_RUN_MS_AT), rsum, 'SET', 'u1', HIST_MARK_ARG, '1',
        'INCRBY', HIST_LANE_ENDED_T, sub(HIST_LANE_ENDED_ARGS, k - 3, k), by,
        'INCRBY', HIST_LANE_WAIT_T, sub(HIST_LANE_WAIT_ARGS, k - 3, k), wsum,
        'INCRBY', HIST_LANE_RUN_MS_T, sub(HIST_LANE_RUN_MS_ARGS, k - 3, k), rsum)
    else
      r = redis.call('BITFIELD', hk, 'OVERFLOW', 'SAT', 'INCRBY', HIST_DEAD_T,
        fmt('%d', at + HIST_DEAD_AT), by, 'INCRBY', HIST_WAIT_T,
        fmt('%d', at + HIST_WAIT_AT), wsum, 'INCRBY', HIST_RUN_MS_T,
        fmt('%d', at + HIST_RUN_MS_AT), rsum, 'SET', 'u1', HIST_MARK_ARG, '1',
        'INCRBY', HIST_LANE_ENDED_T, sub(HIST_LANE_ENDED_ARGS, k - 3, k), by,
        'INCRBY', HIST_LANE_WAIT_T, sub(HIST_LANE_WAIT_ARGS, k - 3, k), wsum,
        'INCRBY', HIST_LANE_RUN_MS_T, sub(HIST_LANE_RUN_MS_ARGS, k - 3, k), rsum,
        'INCRBY', HIST_LANE_DEAD_T, sub(HIST_LANE_DEAD_ARGS, k - 3, k), by)
    end
  elseif lanes then
    local ops = {'OVERFLOW', 'SAT',
      'INCRBY', done and HIST_COMPLETED_T or HIST_DEAD_T,
      fmt('%d', at + (done and HIST_COMPLETED_AT or HIST_DEAD_AT)), by,
      'INCRBY', HIST_WAIT_T, fmt('%d', at + HIST_WAIT_AT), wsum,
      'INCRBY', HIST_RUN_MS_T, fmt('%d', at + HIST_RUN_MS_AT), rsum,
      'SET', 'u1', HIST_MARK_ARG, '1'}
    lane_ops(hk, raw, ops, lanes, n, wait, run, not done, now, id)
    r = redis.call('BITFIELD', hk, unpack(ops))
  elseif done then
    r = redis.call('BITFIELD', hk, 'OVERFLOW', 'SAT', 'INCRBY', HIST_COMPLETED_T,
      fmt('%d', at + HIST_COMPLETED_AT), by, 'INCRBY', HIST_WAIT_T,
      fmt('%d', at + HIST_WAIT_AT), wsum, 'INCRBY', HIST_RUN_MS_T,
      fmt('%d', at + HIST_RUN_MS_AT), rsum, 'SET', 'u1', HIST_MARK_ARG, '1')
  else
    r = redis.call('BITFIELD', hk, 'OVERFLOW', 'SAT', 'INCRBY', HIST_DEAD_T,
      fmt('%d', at + HIST_DEAD_AT), by, 'INCRBY', HIST_WAIT_T,
      fmt('%d', at + HIST_WAIT_AT), wsum, 'INCRBY', HIST_RUN_MS_T,
      fmt('%d', at + HIST_RUN_MS_AT), rsum, 'SET', 'u1', HIST_MARK_ARG, '1')
  end
  if r[4] == 0 then
    redis.call('PEXPIREAT', hk, (hour + 1) * 3600000 + HIST_KEEP_MS)
  end
end
