/* EMQ.COMPLETE 2 base row id token [result] | 1 base id token result [...]:
 * complete.lua's twin. One job answers 1, -1 or EMQSTALE; a batch of triples is fenced
 * one by one and answers (id, reason) of those not done. The jobs done are settled with
 * each kind of write once for the call: a kept row stays as history, the others are
 * deleted and leave a tombstone. */
#include "echomq.h"

/* a job that passed its fence */
typedef struct {
    Str id, row, group, dedup, keep, result, parent, children;
    RedisModuleString *id_string;  /* the id, as the argument it came in */
    RedisModuleString *row_string; /* the row's name as a string */
} Done;

/* the ids a batch has taken so far: an open-addressing set (a batch may name a job
 * twice; its second triple is gone, as complete.lua's `seen` table says) */
typedef struct {
    Str *slot;
    size_t mask;
} Seen;

static Seen seen_new(RedisModuleCtx *ctx, size_t expected) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    Seen seen = {RedisModule_PoolAlloc(ctx, sizeof(Str) * cap), cap - 1};
    for (size_t i = 0; i < cap; i++) seen.slot[i] = NONE;
    return seen;
}

/* id's slot: where it is, or the empty one where it would go */
static Str *seen_slot(Seen *seen, Str id) {
    uint64_t hash = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < id.len; i++)
        hash = (hash ^ (unsigned char)id.ptr[i]) * 1099511628211ULL;
    for (size_t i = (size_t)hash & seen->mask;; i = (i + 1) & seen->mask)
        if (!seen->slot[i].ptr || str_eq(seen->slot[i], id)) return &seen->slot[i];
}

/* the triples of a batch, each fenced on its own; the refused ones (id, reason) into
 * refused (*out: how many strings), the jobs done into jobs (a flow child, a row with
 * `parent`, has its ending resolved by settle: flow.c; a flow parent, with `children`,
 * its :deps/:kids/:kidfails deleted with it) */
static long fence_batch(Queue *queue, Line *line, Done *jobs, Str *refused, long *out) {
    RedisModuleCtx *ctx = queue->ctx;
    long ndone = 0;
    Seen seen = seen_new(ctx, (size_t)(line->nargs / 3 + 1));
    for (int i = 0; i + 2 < line->nargs; i += 3) {
        Str id = arg_at(line, i), token = arg_at(line, i + 1), row = job_key(queue, id);
        static const int FIELDS[] = {FIELD_STATE, FIELD_ATTEMPTS, FIELD_GROUP, FIELD_DEDUP,
                                     FIELD_KEEP,  FIELD_PARENT,   FIELD_CHILDREN};
        Str fields[7];
        RedisModuleString *row_string = hmget(queue, row, 7, FIELDS, fields);
        Str state = fields[0], attempts = fields[1];
        const char *why = NULL;
        Str *taken = seen_slot(&seen, id);
        if (!state.ptr || str_eq_c(state, "completed") || taken->ptr)
            why = "gone";
        else if (!str_eq_c(state, "active") || !str_eq(attempts, token))
            why = "stale";
        if (why) {
            refused[(*out)++] = id;
            refused[(*out)++] = str_c(why);
            continue;
        }
        Str result = arg_at(line, i + 2);
        if (result.len == 0) result = NONE;
        *taken = id;
        Done done = {id,        row,           fields[2], fields[3], fields[4],
                     result,    fields[5],     fields[6], line->args[i],  row_string};
        jobs[ndone++] = done;
    }
    return ndone;
}

/* a kept completion: the row stays as history, in the completed set (and the index of
 * own keeps), the set trimmed; the lock goes in the trim's one DEL */
static void keep_row(Queue *queue, Done *job, double own, Retention limits, long long now) {
    RedisModuleCtx *ctx = queue->ctx;
    Str lock = row_key(queue, job->row, EMQ_K_LOCK), stamp = num(queue, (double)now);
    RedisModuleString *pairs[6] = {field_name[FIELD_STATE],       field_name[VALUE_COMPLETED],
                                   field_name[FIELD_FINISHED_AT], mkstr(ctx, stamp),
                                   field_name[FIELD_RESULT],      NULL};
    if (job->result.ptr) pairs[5] = mkstr(ctx, job->result);
    hset_kv(queue, job->row_string, pairs, job->result.ptr ? 6 : 4);
    Str completed = queue_key(queue, EMQ_K_COMPLETED);
    zadd_one(queue, completed, now, stamp, job->id_string);
    if (own > 0) {
        Str keepuntil = queue_key(queue, EMQ_K_KEEPUNTIL), until = num(queue, (double)now + own);
        RedisModule_Call(ctx, "ZADD", "!bbb", keepuntil.ptr, keepuntil.len, until.ptr, until.len,
                         job->id.ptr, job->id.len);
    }
    trim_settled(queue, completed, limits, own > 0, now, TRIM_STEP, lock);
}

/* the row and its keys, to delete in one DEL (a flow parent's: its :deps, :kids and
 * :kidfails too) */
static size_t add_row_keys(Queue *queue, Str row, int parent, RedisModuleString **keys) {
    RedisModuleCtx *ctx = queue->ctx;
    keys[0] = mkstr(ctx, row);
    keys[1] = mkstr(ctx, row_key(queue, row, EMQ_K_LOGS));
    keys[2] = mkstr(ctx, row_key(queue, row, EMQ_K_LOCK));
    keys[3] = mkstr(ctx, row_key(queue, row, EMQ_K_ERRORS));
    keys[4] = mkstr(ctx, row_key(queue, row, EMQ_K_LOGTIMES));
    if (!parent) return 5;
    keys[5] = mkstr(ctx, row_key(queue, row, EMQ_K_DEPS));
    keys[6] = mkstr(ctx, row_key(queue, row, EMQ_K_KIDS));
    keys[7] = mkstr(ctx, row_key(queue, row, EMQ_K_KIDFAILS));
    return 8;
}

/* complete.lua's writes, each kind once for the call; 1 when a flow child's ending
 * wrote an outbox entry (the client relays) */
static int settle(Queue *queue, Done *jobs, size_t ndone) {
    RedisModuleCtx *ctx = queue->ctx;
    Str active = queue_key(queue, EMQ_K_ACTIVE);
    RedisModuleString **ids = RedisModule_PoolAlloc(ctx, sizeof(*ids) * ndone);
    Str *id_list = RedisModule_PoolAlloc(ctx, sizeof(*id_list) * ndone);
    for (size_t i = 0; i < ndone; i++) {
        id_list[i] = jobs[i].id;
        ids[i] = jobs[i].id_string;
    }
    zrem_all(queue, active, ids, ndone);
    for (size_t i = 0; i < ndone; i++)
        if (jobs[i].group.ptr) give_back(queue, jobs[i].group, 0);
    int relay = 0; /* an outbox entry was written (a flow child, its parent elsewhere) */
    for (size_t i = 0; i < ndone; i++)
        if (jobs[i].parent.ptr &&
            flow_ended(queue, jobs[i].id, jobs[i].parent, flow_policy(queue, jobs[i].row),
                       "completed", jobs[i].result))
            relay = 1;
    long long now = now_ms();
    double waits = 0, runs = 0; /* the jobs' summed wait and run (the history series) */
    int retention_read = 0; /* the queue's completed retention, read on the first kept row */
    Retention queue_limits = {0, 0, 0, 0};
    RedisModuleString **rows = RedisModule_PoolAlloc(ctx, sizeof(*rows) * 8 * ndone);
    double *job_wait = RedisModule_PoolAlloc(ctx, sizeof(*job_wait) * 2 * ndone),
           *job_run = job_wait + ndone; /* each job's, for its lane's sums */
    size_t nrows = 0, ngone = 0;
    for (size_t i = 0; i < ndone; i++) {
        Done *job = &jobs[i];
        double wait, run;
        row_times(queue, job->id, job->row, now, &wait, &run);
        waits += wait;
        runs += run;
        job_wait[i] = wait;
        job_run[i] = run;
        double own = 0;
        Retention limits = {0, 0, 0, 0};
        if (job->keep.ptr) {
            if (!tonum(job->keep, &own)) own = 0;
            if (!retention_read) {
                queue_limits = retention(queue, 1);
                retention_read = 1;
            }
            limits = queue_limits;
        }
        if (job->dedup.ptr) release_dedup(queue, job->id, job->dedup);
        if (own > 0 || limits.has_count || limits.has_age) {
            /* a kept flow parent: the completed set's trim will look for its children's
             * results (flowkept) */
            if (job->children.ptr) {
                Str flag = queue_key(queue, EMQ_K_FLOWKEPT);
                RedisModule_Call(ctx, "SET", "!bc", flag.ptr, flag.len, "1");
            }
            keep_row(queue, job, own, limits, now);
        } else {
            nrows += add_row_keys(queue, job->row, job->children.ptr != NULL, rows + nrows);
            /* a deleted row leaves its tombstone; a kept one stays */
            ids[ngone] = job->id_string;
            id_list[ngone++] = job->id;
        }
    }
    for (size_t i = 0; i < nrows; i += 1000)
        RedisModule_Call(ctx, "DEL", "!v", rows + i, nrows - i < 1000 ? nrows - i : 1000);
    if (ngone > 0) tombstones(queue, id_list, ids, ngone, now);
    /* the busiest lanes: each lane once, in the order its first job came, with its
     * jobs' counts and sums (as complete.lua's batch gathers them) */
    size_t nlanes = 0;
    LaneEnd *lanes = NULL;
    for (size_t i = 0; i < ndone; i++) {
        if (!jobs[i].group.ptr) continue;
        if (!lanes) lanes = RedisModule_PoolAlloc(ctx, sizeof(*lanes) * ndone);
        size_t k = 0;
        while (k < nlanes && !str_eq(lanes[k].group, jobs[i].group)) k++;
        if (k == nlanes) lanes[nlanes++] = (LaneEnd){jobs[i].group, 0, 0, 0, jobs[i].id};
        lanes[k].n += 1;
        lanes[k].wait += job_wait[i];
        lanes[k].run += job_run[i];
    }
    count_metric(queue, EMQ_K_METRICS_COMPLETED, (long long)ndone, now, waits, runs, lanes,
                 nlanes);
    cap_freed(queue, (long long)ndone);
    for (size_t i = 0; i < ndone; i++) emit(queue, event_json(queue, "completed", jobs[i].id));
    return relay;
}

int cmd_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line line;
    if (!line_of(ctx, argv, argc, 1, 2, &line)) return REDISMODULE_OK;
    Queue queue = {ctx, str_of(line.keys[0]), NULL};
    if (line.nkeys >= 2) { /* one job: 1, -1 or EMQSTALE */
        if (line.nargs < 2) return bad_args(ctx);
        Str id = arg_at(&line, 0), token = arg_at(&line, 1), row = str_of(line.keys[1]);
        Str fields[7]; /* state attempts group dedup keep parent children */
        RedisModuleString *row_string = NULL;
        if (!fenced(&queue, row, token, FIELD_GROUP, FIELD_DEDUP, FIELD_KEEP, fields,
                    &row_string))
            return REDISMODULE_OK;
        Done job = {id,        row,          fields[2],  fields[3], fields[4],
                    arg_at(&line, 2), NONE, fields[6], line.args[0], row_string};
        /* a flow child: its ending first, as complete.lua's one-job form makes it */
        int relay = fields[5].ptr && flow_ended(&queue, id, fields[5], flow_policy(&queue, row),
                                                "completed", job.result);
        settle(&queue, &job, 1);
        return RedisModule_ReplyWithLongLong(ctx, relay ? 2 : 1);
    }
    Done *jobs = RedisModule_PoolAlloc(ctx, sizeof(*jobs) * (size_t)(line.nargs / 3 + 1));
    Str *refused = RedisModule_PoolAlloc(ctx, sizeof(*refused) * (size_t)(line.nargs + 2));
    long out = 0;
    long ndone = fence_batch(&queue, &line, jobs, refused, &out);
    int relay = ndone > 0 && settle(&queue, jobs, (size_t)ndone);
    RedisModule_ReplyWithArray(ctx, out + (relay ? 2 : 0));
    for (long i = 0; i < out; i++)
        RedisModule_ReplyWithStringBuffer(ctx, refused[i].ptr, refused[i].len);
    if (relay) {
        RedisModule_ReplyWithStringBuffer(ctx, "", 0);
        RedisModule_ReplyWithStringBuffer(ctx, "relay", 5);
    }
    return REDISMODULE_OK;
}
