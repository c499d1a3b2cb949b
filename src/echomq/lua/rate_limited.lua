#!lua flags=allow-oom
-- rate_limited: a handler raised RateLimited (e.g. an HTTP 429): hand its active job
-- back where it came from and hold the queue, or only the job's lane, for a while.
-- Like release, the job is not failed: attempts (the token), failures and stalled are
-- kept, and it returns at its run_score (its old place in the run order), not at the
-- tail.
-- KEYS[1]  the queue base emq:{q}:;  KEYS[2] the row emq:{q}:job:<id>
-- ARGV[1]  job id;  ARGV[2] token (the attempts value the claim handed out)
-- ARGV[3]  retry_after_ms (how long to hold);  ARGV[4] 'g' (hold the job's lane only;
--          a job with no group holds the queue) or 'q' (the whole queue)
-- Reply:   1
-- Refusals: -1 no row (gone); EMQSTALE the job is not active under this token.
--          Both before any write.
-- Writes:  the hold first: a lane's, ZADD gwait GT (now + ms) (it leaves the ring, see
--          lib/limits); the queue's, meta limited_until = max(its value, now + ms).
--          Then ZREM active, lock deleted, the lane slot given back (once), state
--          pending, ZADD pending|lane at its run_score; no wake token (what it went back
--          to is held); meta `limits` (the claim's flag) set again from what is there
--          (lib/limits limits_flag); event 'rate_limited'.
local B = KEYS[1]
--! include keys
--! include common
--! include series
--! include limits
local id, token, ms, scope = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local jk = KEYS[2]
local f, refusal = fenced(jk, token, 'group', 'priority', 'seq')
if not f then return refusal end
local now = now_ms()
local until_ms = now + ms
local g = f[3]
if scope == 'g' and g then
  redis.call('ZADD', B .. GWAIT, 'GT', until_ms, g)
else
  local was = tonumber(redis.call('HGET', B .. META, 'limited_until') or '0')
  if until_ms > was then redis.call('HSET', B .. META, 'limited_until', until_ms) end
end
redis.call('ZREM', B .. ACTIVE, id)
redis.call('DEL', jk .. LOCK)
if g then give_back(g, true) end
make_ready(id, jk, g, run_score(f[4], f[5]))
-- a held lane leaves the ring (it may be on it, serving other jobs of the group)
if scope == 'g' and g then ring_sync(g, true) end
limits_flag()
emit('{"event":"rate_limited","job":"' .. id .. '","attempt":' .. token .. ',"ms":' .. ms .. '}')
return 1
