/* echomq's server module: native twins of the transition scripts.
 *
 * Each EMQ.<VERB> command takes the same KEYS and ARGV as the Lua script of that verb
 * (`EMQ.<VERB> numkeys key... arg...`, the sha replaced by the command name) and runs the
 * same sequence of commands through RedisModule_Call, so its replies, refusals, events
 * and writes are the script's. Every call carries the '!' flag: the commands it ran are
 * what the server propagates (wrapped in MULTI/EXEC), never the EMQ.* command itself,
 * so a replica or AOF without this module holds the same data, server times included.
 *
 * The differences from the scripts, by design:
 * - EMQ.CLAIM reads the queue's `paused` field itself (the pause read folded in): a
 *   paused queue answers an empty array in one round trip.
 * - EMQ.REPROCESS checks dead membership with a read (ZSCORE) before its first write.
 *
 * This header holds what the files share: the types, the small helpers every verb uses
 * (inline, so the split into files costs no call), and the declarations of the shared
 * helpers of common.c, lanes.c, history.c and flow.c (lib/flow.lua's twin). One file
 * per verb (claim.c, complete.c, enqueue.c, retry.c, extend.c, reprocess.c); module.c
 * registers them. Key suffixes and field names come from schema.h. See docs/native.md.
 */
#ifndef ECHOMQ_H
#define ECHOMQ_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redismodule_min.h"
#include "schema.h"

typedef RedisModuleCallReply Reply;

/* a byte string: a pointer and a length (not NUL-terminated in general) */
typedef struct {
    const char *ptr;
    size_t len;
} Str;

/* one command's view of its queue: the context and the queue base emq:{q}: */
typedef struct {
    RedisModuleCtx *ctx;
    Str base;
    RedisModuleString *events; /* the events channel, made at the first event */
} Queue;

/* a command's line after its name: numkeys key... arg... */
typedef struct {
    RedisModuleString **keys;
    int nkeys;
    RedisModuleString **args;
    int nargs;
} Line;

/* the queue's retention of one settled set: count and age (has_* = 0 when unset) */
typedef struct {
    int has_count, has_age;
    double count, age;
} Retention;

static const Str NONE = {NULL, 0};

/* the server runs in cluster mode (fixed at its start), read at load */
extern int in_cluster;

/* ---- strings ---- */

static inline Str str_c(const char *text) {
    Str s = {text, strlen(text)};
    return s;
}

static inline Str str_of(RedisModuleString *string) {
    Str s;
    s.ptr = RedisModule_StringPtrLen(string, &s.len);
    return s;
}

static inline RedisModuleString *mkstr(RedisModuleCtx *ctx, Str text) {
    return RedisModule_CreateString(ctx, text.ptr ? text.ptr : "", text.len);
}

static inline int str_eq(Str left, Str right) {
    return left.ptr && right.ptr && left.len == right.len &&
           memcmp(left.ptr, right.ptr, left.len) == 0;
}

static inline int str_eq_c(Str value, const char *text) { return str_eq(value, str_c(text)); }

/* Lua's %s: space, \t, \n, \v, \f, \r */
static inline int is_space(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* first .. second .. third, in memory freed when the command returns */
static inline Str cat3(Queue *queue, Str first, Str second, Str third) {
    size_t len = first.len + second.len + third.len;
    char *out = RedisModule_PoolAlloc(queue->ctx, len + 1);
    if (first.len) memcpy(out, first.ptr, first.len);
    if (second.len) memcpy(out + first.len, second.ptr, second.len);
    if (third.len) memcpy(out + first.len + second.len, third.ptr, third.len);
    out[len] = '\0';
    Str s = {out, len};
    return s;
}

/* ---- keys (suffixes from schema.h) ---- */

/* the queue's key B .. suffix */
static inline Str queue_key(Queue *queue, const char *suffix) {
    return cat3(queue, queue->base, str_c(suffix), NONE);
}

/* a job's row: B .. job: .. id */
static inline Str job_key(Queue *queue, Str id) {
    return cat3(queue, queue->base, str_c(EMQ_K_JOB), id);
}

/* a key of a job's row: row .. suffix (:lock, :logs, ...) */
static inline Str row_key(Queue *queue, Str row, const char *suffix) {
    return cat3(queue, row, str_c(suffix), NONE);
}

/* a group's lane: B .. g: .. group .. :pending */
static inline Str lane_key(Queue *queue, Str group) {
    Str head = cat3(queue, queue->base, str_c(EMQ_K_LANE), group);
    return cat3(queue, head, str_c(EMQ_K_LANE_END), NONE);
}

/* ---- replies of RedisModule_Call ---- */

static inline int reply_is_nil(Reply *reply) {
    return reply == NULL || RedisModule_CallReplyType(reply) == REDISMODULE_REPLY_NULL;
}

static inline long long reply_int(Reply *reply) {
    return reply && RedisModule_CallReplyType(reply) == REDISMODULE_REPLY_INTEGER
               ? RedisModule_CallReplyInteger(reply)
               : 0;
}

/* a bulk reply's bytes; NONE (ptr == NULL) for a nil */
static inline Str reply_str(Reply *reply) {
    Str s = NONE;
    if (reply && RedisModule_CallReplyType(reply) == REDISMODULE_REPLY_STRING)
        s.ptr = RedisModule_CallReplyStringPtr(reply, &s.len);
    return s;
}

/* an array reply's length; 0 for any other reply */
static inline size_t reply_len(Reply *reply) {
    return reply && RedisModule_CallReplyType(reply) == REDISMODULE_REPLY_ARRAY
               ? RedisModule_CallReplyLength(reply)
               : 0;
}

static inline Reply *reply_elem(Reply *reply, size_t index) {
    if (!reply || RedisModule_CallReplyType(reply) != REDISMODULE_REPLY_ARRAY) return NULL;
    if (index >= RedisModule_CallReplyLength(reply)) return NULL;
    return RedisModule_CallReplyArrayElement(reply, index);
}

static inline long long now_ms(void) { return RedisModule_Milliseconds(); }

/* ---- command framing (common.c) ---- */

/* the line's argument at index; NONE past its end */
static inline Str arg_at(Line *line, int index) {
    return index < line->nargs ? str_of(line->args[index]) : NONE;
}

/* the argument at index when given and not empty, else NONE (an option left out) */
static inline Str opt_at(Line *line, int index) {
    Str value = arg_at(line, index);
    return (value.ptr && value.len > 0) ? value : NONE;
}

int line_of(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int min, int max,
            Line *line);
int bad_args(RedisModuleCtx *ctx);

/* ---- numbers (common.c) ---- */

Str num(Queue *queue, double value);
Str num14(Queue *queue, double value);
int tonum(Str text, double *out);

/* ---- run order (common.c) ---- */

/* lib/common's run_score: a ready job's score, priority * EMQ_SEQ_SPAN + seq (a
 * priority that is absent or no number reads 0) */
static inline double run_score(Str priority, double seq) {
    double value = 0;
    if (!priority.ptr || !tonum(priority, &value)) value = 0;
    return value * (double)EMQ_SEQ_SPAN + seq;
}
long long take_seq(Queue *queue, long long n);

/* ---- a row's field names, made once at load (common.c) ---- */

enum {
    FIELD_STATE,
    FIELD_ATTEMPTS,
    FIELD_PAYLOAD,
    FIELD_NAME,
    FIELD_GROUP,
    FIELD_DEDUP,
    FIELD_KEEP,
    FIELD_MAX_ATTEMPTS,
    FIELD_STARTED_AT,
    FIELD_LAST_STARTED_AT,
    FIELD_FINISHED_AT,
    FIELD_RESULT,
    FIELD_ENQUEUED_AT,
    FIELD_KEEP_COMPLETED, /* meta's retention */
    FIELD_KEEP_COMPLETED_MS,
    FIELD_KEEP_DEAD,
    FIELD_KEEP_DEAD_MS,
    FIELD_PAUSED, /* meta's pause, flow control flag and cap (claim's gate, cap_freed) */
    FIELD_LIMITS,
    FIELD_CONCURRENCY,
    VALUE_ACTIVE, /* values of state */
    VALUE_COMPLETED,
    FIELD_PARENT, /* a flow's fields (a child's ending: flow.c; a parent's keys) */
    FIELD_CHILDREN,
    FIELD_COUNT
};
extern RedisModuleString *field_name[FIELD_COUNT];
void field_names_init(void);

/* ---- key API reads and writes (common.c) ---- */

int hmget_open(RedisModuleKey *key, int count, const int *fields, Str *out);
RedisModuleString *hmget(Queue *queue, Str key, int count, const int *fields, Str *out);
void hset_kv(Queue *queue, RedisModuleString *key, RedisModuleString **pairs,
             size_t nstrings);
void zadd_one(Queue *queue, Str key, long long score, Str score_text, RedisModuleString *member);
long long zcard(Queue *queue, Str key);

/* ---- events, JSON, the journal (common.c) ---- */

void emit(Queue *queue, Str json);
Str event_json(Queue *queue, const char *event, Str id);
Str json_str(Queue *queue, Str text);
void audit(Queue *queue, const char *verb, Str args, const char *outcome, long long count,
           Str actor);

/* ---- lanes and the ring (lanes.c) ---- */

#define WAKE_CAP 64

/* ---- flow control (limits.c; lib/limits.lua) ---- */
enum {
    LIM_RATE_MAX,
    LIM_RATE_MS,
    LIM_CONCURRENCY,
    LIM_LIMITED_UNTIL,
    LIM_GROUP_RATE_MAX,
    LIM_GROUP_RATE_MS,
    LIM_RATE_BURST,
    LIM_COUNT
};
typedef struct {
    double value[LIM_COUNT];
    int has[LIM_COUNT];
    int on; /* meta's flag `limits` was set, so the limits were read (else none is set) */
} Limits;
Limits limits_read(Queue *queue);
long long window_count(Queue *queue, Str key, double per, long long now, long long k);
double window_free_at(Queue *queue, Str key, double per, long long now, long long n,
                      long long extra, double max);
void log_starts(Queue *queue, Str key, Str *members, size_t count, long long now, double per);
int lane_rate(Queue *queue, Str group, const Limits *lim, double *max, double *per);
void park_head(Queue *queue, Str group, double at);
void unpark(Queue *queue, long long now, long long k);
long long lanes_wait(Queue *queue, long long now);
void reply_hold(RedisModuleCtx *ctx, const char *scope, long long ms);
long long count_at(Queue *queue, Str key, double t);
long long count_last(Queue *queue, Str key);
void counted_trim(Queue *queue, Str key, double per, long long now, long long k);
double counted_free_at(Queue *queue, Str key, double w, long long now, long long last,
                       long long total, double max);
void counted_log(Queue *queue, Str key, long long last, long long made, long long now,
                 double per);
void prune_group(Queue *queue, Str group);

void push_wake(Queue *queue, long long count);
void cap_freed(Queue *queue, long long count);
int serveable(Queue *queue, Str group);
void ring_sync(Queue *queue, Str group, int quiet);
void give_back(Queue *queue, Str group, int quiet);
void lane_grew(Queue *queue, Str group, long long before, int quiet);

/* ---- settled rows, tombstones, retention, metrics (history.c) ---- */

/* settled tombstones (lib/common.lua): complete leaves the ids it deleted in `settled`
 * (score = server ms) for SETTLED_MS, one ZADD a call, then trims up to 2n + 8 expired
 * ones from the oldest end (by time, whatever the ids); enqueue treats a recent one as
 * a duplicate */
#define SETTLED_MS 60000
#define SLICE 500 /* members per ZADD/ZREM, as lib/common.lua slices them */
#define TRIM_STEP 4
#define ERRORS_CAP 20

void zadd_desc(Queue *queue, Str key, RedisModuleString **pairs, size_t nstrings);
/* lib/common.lua's trim_before: at most k members of zset key scored before cut, from its
 * oldest end (one ZCOUNT, one ZREMRANGEBYRANK when any are due) */
void trim_before(Queue *queue, Str key, double cut, long long k);
void zrem_all(Queue *queue, Str key, RedisModuleString **ids, size_t count);
void tombstones(Queue *queue, Str *ids, RedisModuleString **made, size_t count,
                long long now);
int settled_recently(Queue *queue, Str id, long long now);
void unhold(Queue *queue, Str held);
void make_ready(Queue *queue, Str id, Str row, Str group, Str score);
void release_dedup(Queue *queue, Str id, Str dedup);
void delete_row(Queue *queue, Str id, Str row, Str dedup, int kids);
/* a lane's endings for the hour's busiest lanes' table: its group, jobs, wait and run,
 * and its (first) job's id for the admission filter */
typedef struct {
    Str group;
    long long n;
    double wait, run;
    Str id;
} LaneEnd;
void count_metric(Queue *queue, const char *metric_key, long long count, long long now,
                  double wait, double run, const LaneEnd *lanes, size_t nlanes);
size_t lane_ops(Queue *queue, Str hist, RedisModuleString **ops, const LaneEnd *lanes,
                size_t nlanes, int dead, long long now);
void job_times(Str id, Str started, Str last, Str enqueued, long long now, double *wait,
               double *run);
void row_times(Queue *queue, Str id, Str row, long long now, double *wait, double *run);
Retention retention(Queue *queue, int completed);
long long trim_settled(Queue *queue, Str setkey, Retention limits, int own, long long now,
                       int step, Str extra);
void record_error(Queue *queue, Str row, Str attempt, long long now, Str error);

/* ---- the token fence (common.c) ---- */

/* fields: 7 (state, attempts, the three extras, then parent and children) */
int fenced(Queue *queue, Str row, Str token, int extra1, int extra2, int extra3, Str *fields,
           RedisModuleString **row_string);

/* ---- flows (flow.c; lib/flow.lua) ---- */

/* a flow child's ending (parent: its row's `parent`, NONE = no flow: nothing happens):
 * resolved in this step when the parent is in this queue, else an outbox entry; 1 when
 * an outbox entry was written (the client relays) */
int flow_ended(Queue *queue, Str id, Str parent, Str on_fail, const char *outcome, Str value);
/* the row's `on_fail` field (NONE = fail_parent) */
Str flow_policy(Queue *queue, Str row);

/* ---- the verbs: EMQ.<VERB> numkeys key... arg... ---- */

int cmd_reprocess(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cmd_claim(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cmd_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cmd_retry(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cmd_extend(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int cmd_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
