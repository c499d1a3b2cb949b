-- lib/keys: the scripts' key names, generated from src/echomq/schema.py by scripts/gen_schema.py; do not edit.
-- Every key of a queue is its base B (emq:{q}:, KEYS[1]) followed by one of these
-- suffixes. Include it before lib/common, whose helpers read these names. The
-- loader puts each constant in place of its name (in the script and its spliced
-- helpers), so a name costs nothing per call.
-- ready jobs; score = priority * SEQ_SPAN + seq (lower first)
local PENDING = 'pending'
-- leased jobs; score = lease deadline (server ms)
local ACTIVE = 'active'
-- delayed jobs; score = due time (ms)
local SCHEDULE = 'schedule'
-- dead-lettered jobs; score = time of death (ms)
local DEAD = 'dead'
-- queue settings (META_FIELDS)
local META = 'meta'
-- lifecycle events, JSON, one channel per queue
local EVENTS = 'events'
-- wake tokens (capped) idle workers block on
local WAKE = 'wake'
-- the groups that can be served now
local RING = 'ring'
-- every group that has a lane
local GROUPS = 'groups'
-- lanes in an hour's table; score = took a slot (ms)
local LANENAMES = 'lanenames'
-- per-group in-flight count
local GACTIVE = 'gactive'
-- the lanes' jobs, at their lane score (browsing across lanes)
local GINDEX = 'gindex'
-- per-group concurrency limit
local GLIMIT = 'glimit'
-- per-group weight
local GWEIGHT = 'gweight'
-- paused groups (the per-group gate)
local GPAUSED = 'gpaused'
-- per-group turns left in the ring's current round (weights)
local GTURN = 'gturn'
-- repeat registry; score = next run (ms); member = name
local REPEAT = 'repeat'
-- `count`: completed jobs, all time
local METRICS_COMPLETED = 'metrics:completed'
-- `count`: dead-lettered jobs, all time
local METRICS_FAILED = 'metrics:failed'
-- the operator verbs' journal (capped)
local AUDIT = 'audit'
-- tombstones of settled ids (60 s); score = settled at (ms)
local SETTLED = 'settled'
-- the worker registry; score = last beat (ms)
local WORKERS = 'workers'
-- the claim records' index (rid -> expiry ms)
local CLAIMREQS = 'claimreqs'
-- kept completed jobs (history); score = finish (ms)
local COMPLETED = 'completed'
-- jobs kept by their own keep_ms; score = keep's end
local KEEPUNTIL = 'keepuntil'
-- '1' while the queue has a retention (limits in meta)
local KEEPS = 'keeps'
-- the enqueue sequence: the last number taken (INCRBY)
local SEQ = 'seq'
-- the queue's start log (rate limit): id:token at start ms
local RATE = 'rate'
-- per-group rate limit, 'max_jobs:per_ms'
local GRATE = 'grate'
-- lanes held off the ring by a rate limit; score = free at (ms)
local GWAIT = 'gwait'
-- throttle windows: dedup id -> window end (ms), for obliterate
local DEDUPS = 'dedups'
-- parents waiting for their children; score = since (ms)
local WAITING = 'waiting'
-- children's endings to relay to another queue; id -> ms
local OUTBOX = 'outbox'
-- an outbox entry's message (JSON): child id -> ending
local OUTMSG = 'outmsg'
-- '1' once a kept flow parent completed: the history trim looks for parents
local FLOWKEPT = 'flowkept'
-- a job's row: B .. JOB .. id (ROW_FIELDS)
local JOB = 'job:'
-- the row's log lines, oldest first: row .. LOGS
local LOGS = ':logs'
-- the server time (ms) of each log line, aligned with LOGS at its newest end
local LOGTIMES = ':logtimes'
-- the row's worker lock (PX ttl): row .. LOCK
local LOCK = ':lock'
-- a kept row's error history (capped): row .. ERRORS
local ERRORS = ':errors'
-- a parent's unresolved children, 'queue:id': row .. DEPS
local DEPS = ':deps'
-- a parent's completed children: 'queue:id' -> result
local KIDS = ':kids'
-- a parent's children that ended otherwise: 'queue:id' -> {outcome, error} (JSON)
local KIDFAILS = ':kidfails'
-- a dedup key, holding its job's id: B .. DEDUP .. id
local DEDUP = 'de:'
-- a claim's record: B .. CLAIMREQ .. rid
local CLAIMREQ = 'claimreq:'
-- a worker's registry record: B .. WORKER .. wid
local WORKER = 'worker:'
-- a repeatable: B .. REPEAT_RECORD .. name
local REPEAT_RECORD = 'repeat:'
-- a lane's start log (rate limit): B .. GSTARTS .. g
local GSTARTS = 'gs:'
-- one hour of per-minute history (HIST_*): B .. HIST .. (ms // 3600000), 7 days
local HIST = 'hist:'
-- a group's lane: B .. LANE .. group .. LANE_END
local LANE = 'g:'
-- the end of a lane's key (see LANE)
local LANE_END = ':pending'
-- run order: a ready job's score is priority * SEQ_SPAN + seq (its enqueue
-- sequence, modulo SEQ_SPAN), with |priority| <= PRIORITY_MAX
local SEQ_SPAN = 4294967296
local PRIORITY_MAX = 1048576
-- a keep_last job held behind its running owner waits in the schedule at this score
local DEDUP_HOLD = 4503599627370496
-- the history series: a queue-hour's key, 60 minute slots (schema.HIST_FIELDS)
local HIST_SLOT_BITS = 101
local HIST_MARK = 7112
local HIST_MARK_ARG = '7112'
local HIST_KEEP_MS = 604800000
local HIST_WAIT_UNIT_MS = 4
local HIST_COMPLETED_AT = 0
local HIST_DEAD_AT = 20
local HIST_WAIT_AT = 36
local HIST_RUN_MS_AT = 70
local HIST_COMPLETED_T = 'u20'
local HIST_DEAD_T = 'u16'
local HIST_WAIT_T = 'u34'
local HIST_RUN_MS_T = 'u31'
-- the busiest lanes' table in the hour key (schema.HIST_LANE*)
local HIST_LANES = 8
-- the admission filter: a job id's mixed djb2 under this admits (schema.HIST_LANE_ADMIT)
local HIST_LANE_ADMIT_BELOW = 268435456
-- HIST_LANE_ADMIT_MIX's 16-bit halves (each product with a u32 exact in a double)
local HIST_LANE_ADMIT_MIX_HI = 40503
local HIST_LANE_ADMIT_MIX_LO = 31161
local HIST_LANES_AT = 6320
local HIST_LANE_HASH_AT = 6064
local HIST_LANE_HASH_BYTE = 758
-- the hashes' bytes as GETRANGE's text arguments (a number argument costs a format)
local HIST_LANE_HASH_FIRST_ARG = '758'
local HIST_LANE_HASH_LAST_ARG = '789'
local HIST_LANE_BITS = 99
-- each slot's offset of a sum, 4 digits a slot (the scripts cut the slot's out)
local HIST_LANE_ENDED_ARGS = '63206419651866176716681569147013'
local HIST_LANE_DEAD_ARGS = '63406439653866376736683569347033'
local HIST_LANE_WAIT_ARGS = '63556454655366526751685069497048'
local HIST_LANE_RUN_MS_ARGS = '63886487658666856784688369827081'
local HIST_LANE_ENDED_AT = 0
local HIST_LANE_DEAD_AT = 20
local HIST_LANE_WAIT_AT = 35
local HIST_LANE_RUN_MS_AT = 68
local HIST_LANE_HASH_T = 'u32'
local HIST_LANE_ENDED_T = 'u20'
local HIST_LANE_DEAD_T = 'u15'
local HIST_LANE_WAIT_T = 'u33'
local HIST_LANE_RUN_MS_T = 'u31'
