-- enqueue: write one or more job rows and put each in its backlog.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  n, the number of jobs; then 11 fields per job:
--          id, payload, name, group, priority, max_attempts, delay_ms, run_at_ms,
--          dedup, check ('1' when the caller chose the id), backoff   ('' = absent)
-- Reply:   an array of n ids: the new job's id, or for a duplicate id / held dedup
--          key the id of the job that already holds it (nothing written for it).
-- Refusals: none.
-- Writes:  the row (state pending|scheduled, attempts 0), pending/lane/schedule,
--          groups + ring + wake for lanes, de:<dedup> (NX), wake; event 'enqueued'.
local B = KEYS[1]
--! include common
local n = tonumber(ARGV[1])
local out = {}
local flat = {}
local lanes = {}
local now = nil
local ready = 0
for i = 0, n - 1 do
  local a = 2 + i * 11
  local id, payload, name, g = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local prio, maxa, delay, runat = ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7]
  local dedup, check, backoff = ARGV[a + 8], ARGV[a + 9], ARGV[a + 10]
  local jk = B .. 'job:' .. id
  local holder = nil
  if check == '1' and redis.call('EXISTS', jk) == 1 then holder = id end
  if not holder and dedup ~= '' then
    -- SET NX GET: one command both takes the key and tells who holds it
    holder = redis.call('SET', B .. 'de:' .. dedup, id, 'NX', 'GET') or nil
  end
  if holder then
    out[#out + 1] = holder
  else
    local due = nil
    if runat ~= '' then
      due = tonumber(runat)
    elseif delay ~= '' and tonumber(delay) > 0 then
      now = now or now_ms()
      due = now + tonumber(delay)
    end
    local f = {'state', due and 'scheduled' or 'pending', 'attempts', 0, 'payload', payload}
    if name ~= '' then f[#f + 1] = 'name'; f[#f + 1] = name end
    if g ~= '' then f[#f + 1] = 'group'; f[#f + 1] = g end
    if prio ~= '0' then f[#f + 1] = 'priority'; f[#f + 1] = prio end
    if maxa ~= '' then f[#f + 1] = 'max_attempts'; f[#f + 1] = maxa end
    if dedup ~= '' then f[#f + 1] = 'dedup'; f[#f + 1] = dedup end
    if backoff ~= '' then f[#f + 1] = 'backoff'; f[#f + 1] = backoff end
    redis.call('HSET', jk, unpack(f))
    if due then
      redis.call('ZADD', B .. 'schedule', due, id)
    elseif g ~= '' then
      redis.call('ZADD', lane_key(g), prio, id)
      lanes[g] = true
      ready = ready + 1
    else
      flat[#flat + 1] = prio
      flat[#flat + 1] = id
      ready = ready + 1
    end
    emit(ev('enqueued', id))
    out[#out + 1] = id
  end
end
if #flat > 0 then redis.call('ZADD', B .. 'pending', unpack(flat)) end
for g in pairs(lanes) do
  redis.call('SADD', B .. 'groups', g)
  ring_sync(g)
end
if ready > 0 then push_wake(ready) end
return out
