/* EMQ.ENQUEUE 1 base n w <per job...> <options...>: enqueue.lua's twin, n job rows
 * written into their backlog (pending, a group's lane, or the schedule). Per job w = 2
 * arguments (id payload) or w = 4 (id payload dedup chosen); w = 4 answers each job's id
 * or the id of the job that holds it, w = 2 the count written. Every argument that can
 * fail is checked before the first write. Each new job takes its place in the queue's
 * enqueue sequence (one INCRBY of the key seq for the call): a ready job's score is
 * priority * EMQ_SEQ_SPAN + seq, the run order. The dedup modes (simple, throttle,
 * debounce, keep_last) as the script's header says, command for command. */
#include "echomq.h"

/* the options after the jobs; NONE for one left out */
typedef struct {
    Str priority, name, group, max_attempts, delay, run_at, backoff, trace, keep;
    int resent; /* the call is a re-send: a minted id is checked too */
    Str mode;   /* the dedup mode: NONE = simple */
    Str ttl;    /* a throttle's window (ms) */
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
    opts.mode = opt_at(line, at + 10);
    if (str_eq_c(opts.mode, "simple")) opts.mode = NONE;
    opts.ttl = opt_at(line, at + 11);
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
    Str mode = opts->mode;
    if (mode.ptr && !str_eq_c(mode, "throttle") && !str_eq_c(mode, "debounce") &&
        !str_eq_c(mode, "keep_last"))
        return "EMQARG dedup_mode is not a mode";
    double ttl;
    if (str_eq_c(mode, "throttle") && !(opts->ttl.ptr && tonum(opts->ttl, &ttl) &&
                                         isfinite(ttl) && ttl >= 1 && floor(ttl) == ttl))
        return "EMQARG dedup_ttl is not a positive number";
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

/* one call's dedup bookkeeping, per job (by its index in the call) */
typedef struct {
    const Options *opts;
    int has_due;
    double due;
    long long now;
    int *payload_of; /* the argument slot of the job's payload (a newer job's, by mode) */
    Str *behind;     /* the running owner a keep_last job is held behind (NONE: none) */
    int *took;       /* the jobs of this call that took a key, by index */
    int ntook;
} Dedups;

/* the index of the job of this call with id that took a key, or -1 */
static int taken_here(Dedups *dd, Line *line, int width, Str id) {
    for (int k = 0; k < dd->ntook; k++)
        if (str_eq(arg_at(line, 2 + dd->took[k] * width), id)) return dd->took[k];
    return -1;
}

/* a dedup key's SET for job id: NX GET when nx, with PX for a throttle */
static Str set_key(Queue *queue, Str key, Str id, const Options *opts, int nx) {
    RedisModuleCtx *ctx = queue->ctx;
    int px = str_eq_c(opts->mode, "throttle");
    Reply *reply;
    if (px && nx)
        reply = RedisModule_Call(ctx, "SET", "!bbcbcc", key.ptr, key.len, id.ptr, id.len, "PX",
                                 opts->ttl.ptr, opts->ttl.len, "NX", "GET");
    else if (px)
        reply = RedisModule_Call(ctx, "SET", "!bbcb", key.ptr, key.len, id.ptr, id.len, "PX",
                                 opts->ttl.ptr, opts->ttl.len);
    else if (nx)
        reply =
            RedisModule_Call(ctx, "SET", "!bbcc", key.ptr, key.len, id.ptr, id.len, "NX", "GET");
    else
        reply = RedisModule_Call(ctx, "SET", "!bb", key.ptr, key.len, id.ptr, id.len);
    return reply_str(reply);
}

/* enqueue.lua's take: the dedup key of job i (id, dedup) for it; NONE when it takes the
 * key (free, or its owner gone), else the owner that stays, after its mode's writes */
static Str take(Queue *queue, Dedups *dd, Line *line, int width, int i, Str id, Str dedup) {
    RedisModuleCtx *ctx = queue->ctx;
    const Options *opts = dd->opts;
    Str key = cat3(queue, queue->base, str_c(EMQ_K_DEDUP), dedup);
    Str held = set_key(queue, key, id, opts, 1);
    Str state = NONE, after = NONE;
    int here = held.ptr ? taken_here(dd, line, width, held) : -1;
    if (here >= 0) {
        state = str_c("pending"); /* taken earlier in this call: its row is written below */
    } else if (held.ptr) {
        Str row = job_key(queue, held);
        Reply *fields = RedisModule_Call(ctx, "HMGET", "!bcc", row.ptr, row.len, EMQ_F_STATE,
                                         EMQ_F_DEDUP_BEHIND);
        state = reply_str(reply_elem(fields, 0));
        after = reply_str(reply_elem(fields, 1));
    }
    if (held.ptr && (!state.ptr || str_eq_c(state, "completed") || str_eq_c(state, "dead"))) {
        /* the owner is gone: the key is free (self-healing) unless a throttle window */
        if (reply_int(RedisModule_Call(ctx, "PTTL", "!b", key.ptr, key.len)) >= 0) return held;
        set_key(queue, key, id, opts, 0);
        held = NONE;
    }
    if (!held.ptr) {
        if (str_eq_c(opts->mode, "throttle")) {
            Str index = queue_key(queue, EMQ_K_DEDUPS);
            Str end = num(queue, (double)dd->now + strtod(opts->ttl.ptr, NULL));
            RedisModule_Call(ctx, "ZADD", "!bbb", index.ptr, index.len, end.ptr, end.len,
                             dedup.ptr, dedup.len);
            trim_before(queue, index, (double)dd->now, 8);
        }
        dd->took[dd->ntook++] = i;
        return NONE;
    }
    if (!opts->mode.ptr || str_eq_c(opts->mode, "throttle")) return held;
    if (after.ptr) {
        Str owner = job_key(queue, after);
        if (reply_int(RedisModule_Call(ctx, "EXISTS", "!b", owner.ptr, owner.len)) == 0) {
            unhold(queue, held); /* held behind a job that is gone: let it go */
            state = str_c("pending");
            after = NONE;
        }
    }
    if (str_eq_c(state, "active")) {
        set_key(queue, key, id, opts, 0);
        if (str_eq_c(opts->mode, "keep_last")) dd->behind[i] = held;
        dd->took[dd->ntook++] = i;
        return NONE;
    }
    /* a waiting owner: the newest payload wins; a debounce pushes its due time */
    int at = 2 + i * width;
    if (here >= 0) {
        dd->payload_of[here] = at + 1;
    } else {
        Str row = job_key(queue, held), text = arg_at(line, at + 1);
        RedisModule_Call(ctx, "HSET", "!bcb", row.ptr, row.len, EMQ_F_PAYLOAD, text.ptr,
                         text.len);
        if (str_eq_c(opts->mode, "debounce") && dd->has_due && str_eq_c(state, "scheduled") &&
            !after.ptr) {
            Str schedule = queue_key(queue, EMQ_K_SCHEDULE), due = num(queue, dd->due);
            RedisModule_Call(ctx, "ZADD", "!bcbb", schedule.ptr, schedule.len, "XX", due.ptr,
                             due.len, held.ptr, held.len);
        }
        emit(queue, event_json(queue, "replaced", held));
    }
    return held;
}

/* the id that already holds this job's place (NONE: none, write it): the row itself or
 * its tombstone for a chosen id (always) or a minted one on a re-send, else the job
 * holding its dedup key (taken for it when free) */
static Str holder_of(Queue *queue, Dedups *dd, Line *line, int width, int i, int check_id,
                     int tombs) {
    RedisModuleCtx *ctx = queue->ctx;
    int at = 2 + i * width;
    Str id = arg_at(line, at), row = job_key(queue, id);
    Str dedup = width == 4 ? opt_at(line, at + 2) : NONE;
    if (check_id && (reply_int(RedisModule_Call(ctx, "EXISTS", "!b", row.ptr, row.len)) == 1 ||
                     (tombs && settled_recently(queue, id, dd->now))))
        return id;
    if (!dedup.ptr) return NONE;
    return take(queue, dd, line, width, i, id, dedup);
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
    Dedups dd = {&opts, has_due, due, now, NULL, NULL, NULL, 0};
    dd.payload_of = RedisModule_PoolAlloc(ctx, sizeof(int) * (size_t)(njobs + 1));
    dd.behind = RedisModule_PoolAlloc(ctx, sizeof(Str) * (size_t)(njobs + 1));
    dd.took = RedisModule_PoolAlloc(ctx, sizeof(int) * (size_t)(njobs + 1));
    for (int i = 0; i < njobs; i++) {
        dd.payload_of[i] = 2 + i * width + 1;
        dd.behind[i] = NONE;
    }
    RedisModuleString *mode_field = mk(ctx, str_c(EMQ_F_DEDUP_MODE));
    RedisModuleString *behind_field = mk(ctx, str_c(EMQ_F_DEDUP_BEHIND));
    /* first which jobs are new (the argument slot of each), then one take of the
     * sequence for them all, then their rows */
    if (width == 4) RedisModule_ReplyWithArray(ctx, njobs);
    for (int i = 0; i < njobs; i++) {
        int at = 2 + i * width;
        Str id = arg_at(&line, at);
        int chosen = width == 4 && str_eq_c(arg_at(&line, at + 3), "1");
        Str holder = holder_of(&queue, &dd, &line, width, i, opts.resent || chosen, tombs);
        if (width == 4) {
            Str who = holder.ptr ? holder : id;
            RedisModule_ReplyWithStringBuffer(ctx, who.ptr, who.len);
        }
        if (!holder.ptr) fresh[nfresh++] = at;
    }
    long long first = nfresh > 0 ? take_seq(&queue, nfresh) : 0;
    RedisModuleString *due_score = has_due ? mk(ctx, num(&queue, base)) : NULL;
    RedisModuleString *state = fields[1];
    for (int k = 0; k < nfresh; k++) {
        int at = fresh[k], i = (at - 2) / width;
        Str id = arg_at(&line, at), row = job_key(&queue, id);
        Str dedup = width == 4 ? opt_at(&line, at + 2) : NONE;
        double seq = (double)((first + k) % EMQ_SEQ_SPAN);
        fields[5] = line.args[dd.payload_of[i]];
        fields[7] = mk(ctx, num(&queue, seq));
        int count = nfields;
        if (dedup.ptr) {
            fields[count++] = dedup_field;
            fields[count++] = mk(ctx, dedup);
            if (opts.mode.ptr) {
                fields[count++] = mode_field;
                fields[count++] = mk(ctx, opts.mode);
            }
            if (dd.behind[i].ptr) {
                /* held behind its running owner: in the schedule past any due time */
                fields[1] = mk(ctx, str_c("scheduled"));
                fields[count++] = behind_field;
                fields[count++] = mk(ctx, dd.behind[i]);
            }
        }
        RedisModule_Call(ctx, "HSET", "!bv", row.ptr, row.len, fields, (size_t)count);
        fields[1] = state;
        if (dd.behind[i].ptr) {
            Str schedule = queue_key(&queue, EMQ_K_SCHEDULE);
            Str hold = num(&queue, (double)EMQ_DEDUP_HOLD);
            RedisModule_Call(ctx, "ZADD", "!bbb", schedule.ptr, schedule.len, hold.ptr, hold.len,
                             id.ptr, id.len);
        } else {
            pairs[npairs++] = has_due ? due_score : mk(ctx, num(&queue, base + seq));
            pairs[npairs++] = line.args[at];
        }
        emit(&queue, event_json(&queue, "enqueued", id));
    }
    into_backlog(&queue, &opts, has_due, dest, pairs, npairs);
    if (width == 4) return REDISMODULE_OK;
    return RedisModule_ReplyWithLongLong(ctx, npairs / 2);
}
