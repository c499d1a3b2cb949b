#!lua flags=allow-oom
-- extend_lock: move the lease deadline of active jobs forward (token-fenced, per job).
-- KEYS[1]  the queue base emq:{q}:
-- ARGV[1]  lease_ms;  ARGV[2] lock ttl ms (0 = leave :lock keys alone)
-- ARGV[3..] pairs: job id, token
-- Reply:   a flat array of (id, reason) for each job NOT extended; reason 'gone' or
--          'stale'. An empty array means every lease moved.
-- Refusals: none as errors: each pair is fenced on its own.
-- Writes:  ZADD active XX deadline, PEXPIRE :lock for the extended jobs.
local B = KEYS[1]
--! include keys
--! include common
--! include series
local deadline = now_ms() + tonumber(ARGV[1])
local lockttl = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local jk = B .. JOB .. id
  local f = redis.call('HMGET', jk, 'state', 'attempts')
  if not f[1] then
    out[#out + 1] = id; out[#out + 1] = 'gone'
  elseif f[1] ~= 'active' or f[2] ~= token then
    out[#out + 1] = id; out[#out + 1] = 'stale'
  else
    redis.call('ZADD', B .. ACTIVE, 'XX', deadline, id)
    if lockttl > 0 then redis.call('PEXPIRE', jk .. LOCK, lockttl) end
  end
end
return out
