/* native/schema.h: generated from src/echomq/schema.py by scripts/gen_schema.py; do not edit. */
#ifndef ECHOMQ_SCHEMA_H
#define ECHOMQ_SCHEMA_H

/* key suffixes: a queue's key is its base emq:{q}: followed by one of these */
#define EMQ_K_PENDING "pending"
#define EMQ_K_ACTIVE "active"
#define EMQ_K_SCHEDULE "schedule"
#define EMQ_K_DEAD "dead"
#define EMQ_K_META "meta"
#define EMQ_K_EVENTS "events"
#define EMQ_K_WAKE "wake"
#define EMQ_K_RING "ring"
#define EMQ_K_GROUPS "groups"
#define EMQ_K_LANENAMES "lanenames"
#define EMQ_K_GACTIVE "gactive"
#define EMQ_K_GINDEX "gindex"
#define EMQ_K_GLIMIT "glimit"
#define EMQ_K_GWEIGHT "gweight"
#define EMQ_K_GPAUSED "gpaused"
#define EMQ_K_GTURN "gturn"
#define EMQ_K_REPEAT "repeat"
#define EMQ_K_METRICS_COMPLETED "metrics:completed"
#define EMQ_K_METRICS_FAILED "metrics:failed"
#define EMQ_K_AUDIT "audit"
#define EMQ_K_SETTLED "settled"
#define EMQ_K_WORKERS "workers"
#define EMQ_K_CLAIMREQS "claimreqs"
#define EMQ_K_COMPLETED "completed"
#define EMQ_K_KEEPUNTIL "keepuntil"
#define EMQ_K_KEEPS "keeps"
#define EMQ_K_SEQ "seq"
#define EMQ_K_RATE "rate"
#define EMQ_K_GRATE "grate"
#define EMQ_K_GWAIT "gwait"
#define EMQ_K_DEDUPS "dedups"
#define EMQ_K_WAITING "waiting"
#define EMQ_K_OUTBOX "outbox"
#define EMQ_K_OUTMSG "outmsg"
#define EMQ_K_FLOWKEPT "flowkept"
#define EMQ_K_JOB "job:"
#define EMQ_K_LOGS ":logs"
#define EMQ_K_LOGTIMES ":logtimes"
#define EMQ_K_LOCK ":lock"
#define EMQ_K_ERRORS ":errors"
#define EMQ_K_DEPS ":deps"
#define EMQ_K_KIDS ":kids"
#define EMQ_K_KIDFAILS ":kidfails"
#define EMQ_K_DEDUP "de:"
#define EMQ_K_CLAIMREQ "claimreq:"
#define EMQ_K_WORKER "worker:"
#define EMQ_K_REPEAT_RECORD "repeat:"
#define EMQ_K_GSTARTS "gs:"
#define EMQ_K_HIST "hist:"
#define EMQ_K_LANE "g:"
#define EMQ_K_LANE_END ":pending"

/* the fields of a job's row */
#define EMQ_F_STATE "state"
#define EMQ_F_ATTEMPTS "attempts"
#define EMQ_F_PAYLOAD "payload"
#define EMQ_F_NAME "name"
#define EMQ_F_GROUP "group"
#define EMQ_F_PRIORITY "priority"
#define EMQ_F_SEQ "seq"
#define EMQ_F_MAX_ATTEMPTS "max_attempts"
#define EMQ_F_BACKOFF "backoff"
#define EMQ_F_DEDUP "dedup"
#define EMQ_F_DEDUP_MODE "dedup_mode"
#define EMQ_F_DEDUP_BEHIND "dedup_behind"
#define EMQ_F_PROGRESS "progress"
#define EMQ_F_LAST_ERROR "last_error"
#define EMQ_F_FAILURES "failures"
#define EMQ_F_STALLED "stalled"
#define EMQ_F_LOCK "lock"
#define EMQ_F_REPEAT "repeat"
#define EMQ_F_CANCEL "cancel"
#define EMQ_F_TRACE "trace"
#define EMQ_F_KEEP "keep"
#define EMQ_F_ENQUEUED_AT "enqueued_at"
#define EMQ_F_STARTED_AT "started_at"
#define EMQ_F_LAST_STARTED_AT "last_started_at"
#define EMQ_F_FINISHED_AT "finished_at"
#define EMQ_F_DIED_AT "died_at"
#define EMQ_F_RESULT "result"
#define EMQ_F_RERUN_AS "rerun_as"
#define EMQ_F_RERUN_OF "rerun_of"
#define EMQ_F_PARENT "parent"
#define EMQ_F_ON_FAIL "on_fail"
#define EMQ_F_CHILDREN "children"
#define EMQ_F_DUE "due"

/* the fields of a queue's meta hash */
#define EMQ_F_PAUSED "paused"
#define EMQ_F_KEEP_COMPLETED "keep_completed"
#define EMQ_F_KEEP_COMPLETED_MS "keep_completed_ms"
#define EMQ_F_KEEP_DEAD "keep_dead"
#define EMQ_F_KEEP_DEAD_MS "keep_dead_ms"
#define EMQ_F_RATE_MAX "rate_max"
#define EMQ_F_RATE_MS "rate_ms"
#define EMQ_F_RATE_BURST "rate_burst"
#define EMQ_F_CONCURRENCY "concurrency"
#define EMQ_F_LIMITED_UNTIL "limited_until"
#define EMQ_F_GROUP_RATE_MAX "group_rate_max"
#define EMQ_F_GROUP_RATE_MS "group_rate_ms"
#define EMQ_F_LIMITS "limits"

/* run order: a ready job's score is priority * EMQ_SEQ_SPAN + seq (its enqueue
 * sequence, modulo EMQ_SEQ_SPAN), with |priority| <= EMQ_PRIORITY_MAX */
#define EMQ_SEQ_SPAN 4294967296LL
#define EMQ_PRIORITY_MAX 1048576LL
/* a keep_last job held behind its running owner waits in the schedule at this score */
#define EMQ_DEDUP_HOLD 4503599627370496LL
/* the history series: a queue-hour's key, 60 minute slots (schema.HIST_FIELDS) */
#define EMQ_HIST_SLOT_BITS 101LL
#define EMQ_HIST_MARK 7112LL
#define EMQ_HIST_KEEP_MS 604800000LL
#define EMQ_HIST_WAIT_UNIT_MS 4LL
#define EMQ_HIST_COMPLETED_AT 0LL
#define EMQ_HIST_DEAD_AT 20LL
#define EMQ_HIST_WAIT_AT 36LL
#define EMQ_HIST_RUN_MS_AT 70LL
#define EMQ_HIST_COMPLETED_T "u20"
#define EMQ_HIST_DEAD_T "u16"
#define EMQ_HIST_WAIT_T "u34"
#define EMQ_HIST_RUN_MS_T "u31"
/* the busiest lanes' table in the hour key (schema.HIST_LANE*) */
#define EMQ_HIST_LANES 8
/* the admission filter: a job id's mixed djb2 under this admits (HIST_LANE_ADMIT) */
#define EMQ_HIST_LANE_ADMIT_BELOW 268435456U
#define EMQ_HIST_LANE_ADMIT_MIX 2654435769U
#define EMQ_HIST_LANES_AT 6320LL
#define EMQ_HIST_LANE_HASH_AT 6064LL
#define EMQ_HIST_LANE_HASH_BYTE 758LL
#define EMQ_HIST_LANE_BITS 99LL
#define EMQ_HIST_LANE_ENDED_AT 0LL
#define EMQ_HIST_LANE_DEAD_AT 20LL
#define EMQ_HIST_LANE_WAIT_AT 35LL
#define EMQ_HIST_LANE_RUN_MS_AT 68LL
#define EMQ_HIST_LANE_HASH_T "u32"
#define EMQ_HIST_LANE_ENDED_T "u20"
#define EMQ_HIST_LANE_DEAD_T "u15"
#define EMQ_HIST_LANE_WAIT_T "u33"
#define EMQ_HIST_LANE_RUN_MS_T "u31"

#endif
