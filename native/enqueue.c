/* EMQ.ENQUEUE 1 base n w <per job...> <options...>: enqueue.lua's twin, n job rows
 * written into their backlog (pending, a group's lane, or the schedule). Per job w = 2
 * arguments (id payload) or w = 4 (id payload dedup chosen); w = 4 answers each job's id
 * or the id of the job that holds it, w = 2 the count written. Every argument that can
 * fail is checked before the first write. Each new job takes its place in the queue's
 * enqueue sequence (one INCRBY of the key seq for the call): a ready job's score is
 * priority * EMQ_SEQ_SPAN + seq, the run order. */
#include "echomq.h"

/* the options after the jobs; NONE for one left out */
typedef struct {
    Str priority, name, group, max_attempts, delay, run_at, backoff, trace, keep;
    int resent; /* the call is a re-send: a minted id is checked too */
} Options;

static Options options_at(Line *line, int at) {
    Options opts;
    opts.priority = opt_at(line, at);
    opts.name = opt_at(line, at + 1);
    opts.group = opt_at(line, at + 2);
    opts.max_attempts = opt_at(line, at + 3);
    opts.delay = opt_at(line, at + 4);
    opts.run_at = opt_at(line, at + 5);
    opts.backoff = opt_at(line, at + 6);
    opts.trace = opt_at(line, at + 7);
    opts.keep = opt_at(line, at + 8);
    opts.resent = str_eq_c(arg_at(line, at + 9), "1");
    return opts;
}

/* the refusal of the first numeric option that is not a finite number, else NULL */
static const char *bad_number(const Options *opts) {
    const Str numeric[] = {opts->priority, opts->max_attempts, opts->delay, opts->run_at,
                           opts->keep};
    static const char *const refusal[] = {
        "EMQARG priority is not a finite number", "EMQARG max_attempts is not a finite number",
        "EMQARG delay_ms is not a finite number", "EMQARG run_at_ms is not a finite number",
        "EMQARG keep_ms is not a finite number"};
    for (int i = 0; i < 5; i++) {
        double value;
        if (numeric[i].ptr && !(tonum(numeric[i], &value) && isfinite(value))) return refusal[i];
    }
    /* the run order's score holds the priority exactly only within this range */
    double priority;
    if (opts->priority.ptr && tonum(opts->priority, &priority) &&
        fabs(priority) > (double)EMQ_PRIORITY_MAX)
        return "EMQARG priority is not within -1048576..1048576";
    return NULL;
}

static RedisModuleString *mk(RedisModuleCtx *ctx, Str text) {
    return RedisModule_CreateString(ctx, text.ptr, text.len);
}

/* the row's fields, the same for every job but the payload (slot 5), its seq (slot 7)
 * and dedup; the count of strings in fields */
static int row_fields(Queue *queue, const Options *opts, int has_due, long long now,
                      RedisModuleString **fields) {
    RedisModuleCtx *ctx = queue->ctx;
    int n = 0;
    fields[n++] = mk(ctx, str_c(EMQ_F_STATE));
    fields[n++] = mk(ctx, str_c(has_due ? "scheduled" : "pending"));
    fields[n++] = mk(ctx, str_c(EMQ_F_ATTEMPTS));
    fields[n++] = mk(ctx, str_c("0"));
    fields[n++] = mk(ctx, str_c(EMQ_F_PAYLOAD));
    fields[n++] = NULL;
    fields[n++] = mk(ctx, str_c(EMQ_F_SEQ));
    fields[n++] = NULL;
    const struct {
        const char *field;
        Str value;
    } optional[] = {{EMQ_F_NAME, opts->name},         {EMQ_F_GROUP, opts->group},
                    {EMQ_F_PRIORITY, opts->priority}, {EMQ_F_MAX_ATTEMPTS, opts->max_attempts},
                    {EMQ_F_BACKOFF, opts->backoff},   {EMQ_F_TRACE, opts->trace}};
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
        if (!optional[i].value.ptr) continue;
        fields[n++] = mk(ctx, str_c(optional[i].field));
        fields[n++] = mk(ctx, optional[i].value);
    }
    if (opts->keep.ptr) {
        fields[n++] = field_name[FIELD_KEEP];
        fields[n++] = mk(ctx, opts->keep);
        fields[n++] = field_name[FIELD_ENQUEUED_AT];
        fields[n++] = mk(ctx, num(queue, (double)now));
    }
    return n;
}

/* the id that already holds this job's place (NONE: none, write it): the row itself or
 * its tombstone for a chosen id (always) or a minted one on a re-send, else the job
 * holding its dedup key (taken for it when free) */
static Str holder_of(Queue *queue, Str id, Str row, Str dedup, int check_id, int tombs,
                     long long now) {
    RedisModuleCtx *ctx = queue->ctx;
    if (check_id && (reply_int(RedisModule_Call(ctx, "EXISTS", "!b", row.ptr, row.len)) == 1 ||
                     (tombs && settled_recently(queue, id, now))))
        return id;
    if (!dedup.ptr) return NONE;
    Str key = cat3(queue, queue->base, str_c(EMQ_K_DEDUP), dedup);
    return reply_str(
        RedisModule_Call(ctx, "SET", "!bbcc", key.ptr, key.len, id.ptr, id.len, "NX", "GET"));
}

/* after the rows: one ZADD into the backlog (and the lanes' index), the group on the
 * ring, the wake-ups */
static void into_backlog(Queue *queue, const Options *opts, int has_due, Str dest,
                         RedisModuleString **pairs, int npairs) {
    RedisModuleCtx *ctx = queue->ctx;
    Str group = opts->group;
    long long lane_before = 0;
    if (group.ptr && !has_due && npairs > 0)
        lane_before = reply_int(RedisModule_Call(ctx, "ZCARD", "!b", dest.ptr, dest.len));
    if (npairs > 0) zadd_desc(queue, dest, pairs, (size_t)npairs);
    if (npairs > 0 && group.ptr && !has_due) { /* a lane's jobs are in the lanes' index too */
        Str index = queue_key(queue, EMQ_K_GINDEX);
        /* pairs: reversed by zadd_desc */
        RedisModule_Call(ctx, "ZADD", "!bv", index.ptr, index.len, pairs, (size_t)npairs);
    }
    long long written = npairs / 2;
    if (written > 0 && !has_due) {
        if (group.ptr) {
            Str groups = queue_key(queue, EMQ_K_GROUPS);
            RedisModule_Call(ctx, "SADD", "!bb", groups.ptr, groups.len, group.ptr, group.len);
            lane_grew(queue, group, lane_before, 1);
        }
        push_wake(queue, written);
    }
}

/* n and w: 1 and *njobs, *width when they are numbers and the line holds the jobs,
 * else 0 and the refusal sent */
static int check_shape(Queue *queue, Line *line, int *njobs, int *width) {
    RedisModuleCtx *ctx = queue->ctx;
    double jobs_arg, width_arg;
    if (!tonum(arg_at(line, 0), &jobs_arg) || !isfinite(jobs_arg) || jobs_arg < 0 ||
        !tonum(arg_at(line, 1), &width_arg) || (width_arg != 2 && width_arg != 4)) {
        RedisModule_ReplyWithError(ctx, "EMQARG n and w must be numbers (w 2 or 4)");
        return 0;
    }
    if ((double)line->nargs < 2 + jobs_arg * width_arg) {
        Str message = cat3(queue, str_c("EMQARG "), num14(queue, jobs_arg), str_c(" jobs need "));
        message = cat3(queue, message, num14(queue, 2 + jobs_arg * width_arg),
                       str_c(" arguments"));
        RedisModule_ReplyWithError(ctx, message.ptr);
        return 0;
    }
    *njobs = (int)jobs_arg;
    *width = (int)width_arg;
    return 1;
}

/* when the jobs are due: run_at, else now + delay when positive; 0 when run_at is no
 * number. *has_due = 0: ready now */
static int due_of(const Options *opts, long long now, int *has_due, double *due) {
    double delay = 0;
    *has_due = 0;
    *due = 0;
    if (opts->run_at.ptr) {
        *has_due = 1;
        return tonum(opts->run_at, due);
    }
    if (opts->delay.ptr && tonum(opts->delay, &delay) && delay > 0) {
        *has_due = 1;
        *due = (double)now + delay;
    }
    return 1;
}

/* the backlog the jobs go into and their base score there: the schedule at their due
 * time, else their group's lane or pending at priority * EMQ_SEQ_SPAN (each job adds
 * its seq: lib/common's run_score) */
static Str backlog_of(Queue *queue, const Options *opts, int has_due, double due, double *base) {
    if (has_due) {
        *base = due;
        return queue_key(queue, EMQ_K_SCHEDULE);
    }
    *base = run_score(opts->priority, 0);
    return opts->group.ptr ? lane_key(queue, opts->group) : queue_key(queue, EMQ_K_PENDING);
}

int cmd_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line line;
    if (!line_of(ctx, argv, argc, 1, 1, &line)) return REDISMODULE_OK;
    Queue queue = {ctx, str_of(line.keys[0]), NULL};
    /* check, then write: every argument that can fail is read before the first write */
    int njobs, width;
    if (!check_shape(&queue, &line, &njobs, &width)) return REDISMODULE_OK;
    Options opts = options_at(&line, 2 + njobs * width);
    const char *refusal = bad_number(&opts);
    if (refusal) return RedisModule_ReplyWithError(ctx, refusal);
    /* one read for two questions: settled tombstones (1) and the queue's retention (2,
     * `keeps` named twice) */
    Str settled = queue_key(&queue, EMQ_K_SETTLED), keeps = queue_key(&queue, EMQ_K_KEEPS);
    long long seen = reply_int(RedisModule_Call(ctx, "EXISTS", "!bbb", settled.ptr, settled.len,
                                                keeps.ptr, keeps.len, keeps.ptr, keeps.len));
    /* history: a job asked for it, or the queue keeps it */
    if (!opts.keep.ptr && seen >= 2) opts.keep = str_c("0");
    long long now = now_ms(); /* the server clock, read once */
    int has_due;
    double due;
    if (!due_of(&opts, now, &has_due, &due)) return bad_args(ctx);
    RedisModuleString *fields[32];
    int nfields = row_fields(&queue, &opts, has_due, now, fields);
    RedisModuleString *dedup_field = mk(ctx, str_c(EMQ_F_DEDUP));
    double base;
    Str dest = backlog_of(&queue, &opts, has_due, due, &base);
    RedisModuleString **pairs =
        RedisModule_PoolAlloc(ctx, sizeof(*pairs) * (size_t)(2 * njobs + 1));
    int *fresh = RedisModule_PoolAlloc(ctx, sizeof(*fresh) * (size_t)(njobs + 1));
    int nfresh = 0, npairs = 0;
    int tombs = seen % 2 == 1; /* the tombstones are read only when there are any */
    /* first which jobs are new (the argument slot of each), then one take of the
     * sequence for them all, then their rows */
    if (width == 4) RedisModule_ReplyWithArray(ctx, njobs);
    for (int i = 0; i < njobs; i++) {
        int at = 2 + i * width;
        Str id = arg_at(&line, at), row = job_key(&queue, id);
        Str dedup = width == 4 ? opt_at(&line, at + 2) : NONE;
        int chosen = width == 4 && str_eq_c(arg_at(&line, at + 3), "1");
        Str holder = holder_of(&queue, id, row, dedup, opts.resent || chosen, tombs, now);
        if (width == 4) {
            Str who = holder.ptr ? holder : id;
            RedisModule_ReplyWithStringBuffer(ctx, who.ptr, who.len);
        }
        if (!holder.ptr) fresh[nfresh++] = at;
    }
    long long first = nfresh > 0 ? take_seq(&queue, nfresh) : 0;
    RedisModuleString *due_score = has_due ? mk(ctx, num(&queue, base)) : NULL;
    for (int k = 0; k < nfresh; k++) {
        int at = fresh[k];
        Str id = arg_at(&line, at), row = job_key(&queue, id);
        Str dedup = width == 4 ? opt_at(&line, at + 2) : NONE;
        double seq = (double)((first + k) % EMQ_SEQ_SPAN);
        fields[5] = line.args[at + 1];
        fields[7] = mk(ctx, num(&queue, seq));
        int count = nfields;
        if (dedup.ptr) {
            fields[nfields] = dedup_field;
            fields[nfields + 1] = mk(ctx, dedup);
            count = nfields + 2;
        }
        RedisModule_Call(ctx, "HSET", "!bv", row.ptr, row.len, fields, (size_t)count);
        pairs[npairs++] = has_due ? due_score : mk(ctx, num(&queue, base + seq));
        pairs[npairs++] = line.args[at];
        emit(&queue, event_json(&queue, "enqueued", id));
    }
    into_backlog(&queue, &opts, has_due, dest, pairs, npairs);
    if (width == 4) return REDISMODULE_OK;
    return RedisModule_ReplyWithLongLong(ctx, npairs / 2);
}
