-- lib/keys: the one key schema of the scripts. Every key of a queue is its base B
-- (emq:{q}:, KEYS[1]) followed by one of these suffixes; echomq/keyspace.py builds
-- the same keys and a test holds the two to the same suffixes. Include it before
-- lib/common, whose helpers read these names. Only constant strings live here: the
-- loader puts each in place of its name (in the script and its spliced helpers), so a
-- name costs nothing per call (as a local it would be an upvalue of each helper).
local PENDING = 'pending'
local ACTIVE = 'active'
local SCHEDULE = 'schedule'
local DEAD = 'dead'
local META = 'meta'
local EVENTS = 'events'
local WAKE = 'wake'
local RING = 'ring'
local GROUPS = 'groups'
local GACTIVE = 'gactive'
local GINDEX = 'gindex'
local GLIMIT = 'glimit'
local GWEIGHT = 'gweight'
local GPAUSED = 'gpaused'
local GTURN = 'gturn'
local REPEAT = 'repeat'
local METRICS_COMPLETED = 'metrics:completed'
local METRICS_FAILED = 'metrics:failed'
local AUDIT = 'audit'
local SETTLED = 'settled'
local WORKERS = 'workers'
-- the claim records' index (rid -> expiry ms)
local CLAIMREQS = 'claimreqs'
-- opt-in history: kept completed jobs (score = finish ms), and the jobs kept by their
-- own keep_ms (score = the ms their keep runs out)
local COMPLETED = 'completed'
local KEEPUNTIL = 'keepuntil'
-- '1' while the queue has a retention (its limits live in meta)
local KEEPS = 'keeps'
-- a job's row: B .. JOB .. id
local JOB = 'job:'
-- the row's log list: row .. LOGS
local LOGS = ':logs'
-- the server time (ms) of each log line, aligned with LOGS at its newest end: row .. LOGTIMES
local LOGTIMES = ':logtimes'
-- the row's worker lock: row .. LOCK
local LOCK = ':lock'
-- a kept row's error history (a capped list): row .. ERRORS
local ERRORS = ':errors'
-- a dedup key: B .. DEDUP .. dedup_id
local DEDUP = 'de:'
-- a claim request's record: B .. CLAIMREQ .. rid
local CLAIMREQ = 'claimreq:'
-- a worker's registry record: B .. WORKER .. wid
local WORKER = 'worker:'
-- a repeatable's record: B .. REPEAT_RECORD .. name
local REPEAT_RECORD = 'repeat:'
-- a group's lane: B .. LANE .. group .. LANE_END
local LANE = 'g:'
local LANE_END = ':pending'
