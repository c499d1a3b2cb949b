/* EMQ.CLAIM 1 base lease count side lockttl [rid [resent]]: claim.lua's twin, up to
 * count jobs leased from the flat backlog and the lanes' ring, alternating, starting
 * with the side named ("f": flat). Each claimed job answers five entries: id, payload,
 * token, name, group; then, when flow control held the claim back, one entry {scope,
 * ms} (limits.c). Unlike the script it reads the queue's pause itself. A claim with
 * a rid records what it claimed, so that a re-send answers the same jobs. */
#include "echomq.h"

typedef struct LaneLog LaneLog;

/* the claim loop's sources: the ring, and the ids popped ahead from pending */
typedef struct {
    Queue *queue;
    Str ring;
    int flat_dry, ring_dry;
    Str *ahead_ids;                 /* ids popped ahead from pending */
    RedisModuleString **ahead_made; /* the same, as the strings the range read made */
    size_t ahead_next, ahead_count;
    RedisModuleString *last; /* the id's string when pop_flat answered it (the claim loop
                              * clears it before each pop) */
    const Limits *lim;       /* the queue's limits (flow control) */
    long long now;
    LaneLog *logs; /* the limited lanes served by this call, their starts logged after */
    size_t nlogs, logs_cap;
} Claim;

/* a limited lane's starts made by this call (logged after the loop, with their tokens) */
struct LaneLog {
    Str group;
    double per;
    Str *members; /* id:token each */
    size_t count, cap;
};

/* the log of `group` among the call's (made when absent) */
static LaneLog *lane_log(Claim *claim, Str group, double per) {
    for (size_t i = 0; i < claim->nlogs; i++)
        if (str_eq(claim->logs[i].group, group)) return &claim->logs[i];
    RedisModuleCtx *ctx = claim->queue->ctx;
    if (claim->nlogs == claim->logs_cap) {
        size_t cap = claim->logs_cap ? claim->logs_cap * 2 : 8;
        LaneLog *more = RedisModule_PoolAlloc(ctx, sizeof(*more) * cap);
        if (claim->nlogs) memcpy(more, claim->logs, sizeof(*more) * claim->nlogs);
        claim->logs = more;
        claim->logs_cap = cap;
    }
    LaneLog *log = &claim->logs[claim->nlogs++];
    log->group = group;
    log->per = per;
    log->members = NULL;
    log->count = log->cap = 0;
    return log;
}

/* one more member of a growing list of strings */
static void push_member(RedisModuleCtx *ctx, Str **list, size_t *count, size_t *cap, Str item) {
    if (*count == *cap) {
        size_t more_cap = *cap ? *cap * 2 : 16;
        Str *more = RedisModule_PoolAlloc(ctx, sizeof(*more) * more_cap);
        if (*count) memcpy(more, *list, sizeof(*more) * *count);
        *list = more;
        *cap = more_cap;
    }
    (*list)[(*count)++] = item;
}

/* what a leased row answers: its new token (and as text), payload and name */
typedef struct {
    long long token;
    Str token_text, payload, name;
} Leased;

/* claim.lua's ahead(): 1 while the ring may serve the next, else what the batch still
 * wants (whole, at most 1000 a call) */
static long long ahead(Claim *claim, double count, long out) {
    if (!claim->ring_dry) return 1;
    double wanted = ceil(count - (double)out / 5);
    return wanted > 1000 ? 1000 : (long long)wanted;
}

/* claim.lua's pop_flat: `want` ids popped at once, the rest kept for the next calls.
 * ZPOPMIN's effect, done as a read of the head through the key API and one
 * ZREMRANGEBYRANK 0 n-1 (which replicates as itself): the same ids leave pending, and
 * no score is formatted into a reply and parsed back */
static Str pop_flat(Claim *claim, long long want) {
    if (claim->ahead_next < claim->ahead_count) {
        claim->last = claim->ahead_made[claim->ahead_next];
        return claim->ahead_ids[claim->ahead_next++];
    }
    if (claim->flat_dry) return NONE;
    RedisModuleCtx *ctx = claim->queue->ctx;
    Str pending = queue_key(claim->queue, EMQ_K_PENDING);
    RedisModuleKey *open = RedisModule_OpenKey(ctx, mkstr(ctx, pending), REDISMODULE_READ);
    size_t n = 0;
    if (open && RedisModule_KeyType(open) == REDISMODULE_KEYTYPE_ZSET) {
        size_t len = RedisModule_ValueLength(open);
        size_t cap = (size_t)want < len ? (size_t)want : len;
        claim->ahead_ids = RedisModule_PoolAlloc(ctx, sizeof(Str) * (cap ? cap : 1));
        claim->ahead_made =
            RedisModule_PoolAlloc(ctx, sizeof(RedisModuleString *) * (cap ? cap : 1));
        RedisModule_ZsetFirstInScoreRange(open, -HUGE_VAL, HUGE_VAL, 0, 0);
        while (n < cap && !RedisModule_ZsetRangeEndReached(open)) {
            claim->ahead_made[n] = RedisModule_ZsetRangeCurrentElement(open, NULL);
            claim->ahead_ids[n] = str_of(claim->ahead_made[n]);
            n++;
            RedisModule_ZsetRangeNext(open);
        }
        RedisModule_ZsetRangeStop(open);
    }
    if (open) RedisModule_CloseKey(open);
    if (n == 0) {
        claim->flat_dry = 1;
        return NONE;
    }
    Str last = num14(claim->queue, (double)(n - 1));
    RedisModule_Call(ctx, "ZREMRANGEBYRANK", "!bcb", pending.ptr, pending.len, "0", last.ptr,
                     last.len);
    if ((long long)n < want) claim->flat_dry = 1;
    claim->ahead_count = n;
    claim->ahead_next = 1;
    claim->last = claim->ahead_made[0];
    return claim->ahead_ids[0];
}

/* the group at the ring's head leaves it, its turn count with it */
static void drop_head(Queue *queue, Str ring, Str turns, Str group) {
    RedisModule_Call(queue->ctx, "LPOP", "!b", ring.ptr, ring.len);
    RedisModule_Call(queue->ctx, "HDEL", "!bb", turns.ptr, turns.len, group.ptr, group.len);
}

/* the group served one more: to the ring's tail once it had its weight's turns */
static void take_turn(Queue *queue, Str ring, Str turns, Str group) {
    RedisModuleCtx *ctx = queue->ctx;
    Str weights = queue_key(queue, EMQ_K_GWEIGHT);
    Str weight_text = reply_str(
        RedisModule_Call(ctx, "HGET", "!bb", weights.ptr, weights.len, group.ptr, group.len));
    double weight = 1;
    if (weight_text.ptr) tonum(weight_text, &weight);
    if (weight <= 1 || (double)reply_int(RedisModule_Call(ctx, "HINCRBY", "!bbc", turns.ptr,
                                                          turns.len, group.ptr, group.len,
                                                          "1")) >= weight) {
        if (weight > 1)
            RedisModule_Call(ctx, "HDEL", "!bb", turns.ptr, turns.len, group.ptr, group.len);
        RedisModule_Call(ctx, "LMOVE", "!bbcc", ring.ptr, ring.len, ring.ptr, ring.len, "LEFT",
                         "RIGHT");
    }
}

/* claim.lua's pop_lane: the next id of the first serveable group on the ring (*group_out:
 * its group; *per_out: its rate window when it is limited, else 0); groups found not
 * serveable leave the ring; a limited lane whose window is (or this start makes it)
 * full is held in gwait */
static Str pop_lane(Claim *claim, Str *group_out, double *per_out) {
    Queue *queue = claim->queue;
    RedisModuleCtx *ctx = queue->ctx;
    if (claim->ring_dry) return NONE;
    Str ring = claim->ring, turns = queue_key(queue, EMQ_K_GTURN);
    long long len = reply_int(RedisModule_Call(ctx, "LLEN", "!b", ring.ptr, ring.len));
    for (long long i = 0; i < len; i++) {
        Str group = reply_str(RedisModule_Call(ctx, "LINDEX", "!bc", ring.ptr, ring.len, "0"));
        if (!group.ptr) break;
        if (!serveable(queue, group)) {
            drop_head(queue, ring, turns, group);
            continue;
        }
        double rmax = 0, rper = 0;
        int limited = lane_rate(queue, group, claim->lim, &rmax, &rper);
        Str starts = NONE;
        long long logged = 0, made = 0; /* starts in its window: logged, made by this call */
        if (limited) {
            starts = cat3(queue, queue->base, str_c(EMQ_K_GSTARTS), group);
            logged = window_count(queue, starts, rper, claim->now, 8);
            for (size_t k = 0; k < claim->nlogs; k++)
                if (str_eq(claim->logs[k].group, group)) made = (long long)claim->logs[k].count;
        }
        if (limited && (double)(logged + made) >= rmax) {
            /* its window is full (a limit lowered, or a lane brought back early) */
            park_head(queue, group,
                      window_free_at(queue, starts, rper, claim->now, logged, made, rmax));
            continue;
        }
        Str lane = lane_key(queue, group), actives = queue_key(queue, EMQ_K_GACTIVE);
        Str id = reply_str(
            reply_elem(RedisModule_Call(ctx, "ZPOPMIN", "!b", lane.ptr, lane.len), 0));
        Str index = queue_key(queue, EMQ_K_GINDEX); /* the lanes' index follows the lane */
        RedisModule_Call(ctx, "ZREM", "!bb", index.ptr, index.len, id.ptr, id.len);
        RedisModule_Call(ctx, "HINCRBY", "!bbc", actives.ptr, actives.len, group.ptr, group.len,
                         "1");
        if (limited) lane_log(claim, group, rper); /* its start, logged by the loop */
        if (limited && (double)(logged + made + 1) >= rmax)
            park_head(queue, group,
                      window_free_at(queue, starts, rper, claim->now, logged, made + 1, rmax));
        else if (!serveable(queue, group))
            drop_head(queue, ring, turns, group);
        else
            take_turn(queue, ring, turns, group);
        *group_out = group;
        *per_out = limited ? rper : 0;
        return id;
    }
    claim->ring_dry = 1;
    return NONE;
}

/* five reply entries for a leased job */
static void reply_job(RedisModuleCtx *ctx, Str id, Str payload, long long token, Str name,
                      Str group) {
    RedisModule_ReplyWithStringBuffer(ctx, id.ptr, id.len);
    RedisModule_ReplyWithStringBuffer(ctx, payload.ptr ? payload.ptr : "", payload.len);
    RedisModule_ReplyWithLongLong(ctx, token);
    RedisModule_ReplyWithStringBuffer(ctx, name.ptr ? name.ptr : "", name.len);
    RedisModule_ReplyWithStringBuffer(ctx, group.ptr ? group.ptr : "", group.len);
}

/* a repeat of a request that ran: answer what it claimed (the ids, space-separated, of
 * its record) that is still active, claim nothing new */
static int answer_repeat(Queue *queue, Str record) {
    RedisModuleCtx *ctx = queue->ctx;
    long out = 0;
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
    size_t i = 0;
    while (i < record.len) {
        while (i < record.len && is_space(record.ptr[i])) i++;
        size_t start = i;
        while (i < record.len && !is_space(record.ptr[i])) i++;
        if (i == start) break;
        Str id = {record.ptr + start, i - start};
        static const int FIELDS[] = {FIELD_STATE, FIELD_ATTEMPTS, FIELD_PAYLOAD, FIELD_NAME,
                                     FIELD_GROUP};
        Str fields[5];
        hmget(queue, job_key(queue, id), 5, FIELDS, fields);
        if (!str_eq_c(fields[0], "active")) continue;
        double token = 0;
        tonum(fields[1], &token);
        reply_job(ctx, id, fields[2], (long long)token, fields[3], fields[4]);
        out += 5;
    }
    RedisModule_ReplySetArrayLength(ctx, out);
    return REDISMODULE_OK;
}

/* the row of a popped job made active: HMGET attempts payload name, then one HSET,
 * through the key API: the row opened once, the HSET replicated as the command (a
 * replica without the module holds the same row) */
static Leased lease_row(Queue *queue, Str row, long long now) {
    RedisModuleCtx *ctx = queue->ctx;
    RedisModuleString *row_string = mkstr(ctx, row);
    RedisModuleKey *open =
        RedisModule_OpenKey(ctx, row_string, REDISMODULE_READ | REDISMODULE_WRITE);
    static const int FIELDS[] = {FIELD_ATTEMPTS, FIELD_PAYLOAD, FIELD_NAME};
    Str fields[3];
    int is_hash = hmget_open(open, 3, FIELDS, fields);
    double attempts = 0;
    if (fields[0].ptr && !tonum(fields[0], &attempts)) attempts = 0;
    long long token = (long long)attempts + 1;
    Str token_text = num(queue, (double)token);
    if (open && (is_hash || RedisModule_KeyType(open) == REDISMODULE_KEYTYPE_EMPTY)) {
        RedisModuleString *token_string = mkstr(ctx, token_text),
                          *attempts_field = field_name[FIELD_ATTEMPTS],
                          *state_field = field_name[FIELD_STATE],
                          *active = field_name[VALUE_ACTIVE];
        /* every row's timeline start, in the same HSET (the history series reads it) */
        RedisModuleString *when =
            field_name[token == 1 ? FIELD_STARTED_AT : FIELD_LAST_STARTED_AT];
        RedisModuleString *stamp = mkstr(ctx, num(queue, (double)now));
        RedisModule_HashSet(open, REDISMODULE_HASH_NONE, attempts_field, token_string,
                            state_field, active, when, stamp, NULL);
        RedisModule_Replicate(ctx, "HSET", "sssssss", row_string, attempts_field, token_string,
                              state_field, active, when, stamp);
    }
    if (open) RedisModule_CloseKey(open);
    Leased leased = {token, token_text, fields[1], fields[2]};
    return leased;
}

/* the claim's record under claimreq:<rid> (its ids, space-separated) and in the
 * records' index (rid -> expiry); up to 8 expired entries trimmed from the index's
 * oldest end (by time, whatever the rid) */
static void record_request(Queue *queue, Str rid, Str record_key, Str claimed, long long now) {
    RedisModuleCtx *ctx = queue->ctx;
    RedisModule_Call(ctx, "SET", "!bbcc", record_key.ptr, record_key.len, claimed.ptr,
                     claimed.len, "PX", "60000");
    Str index = queue_key(queue, EMQ_K_CLAIMREQS), expiry = num(queue, (double)now + 60000);
    RedisModule_Call(ctx, "ZADD", "!bbb", index.ptr, index.len, expiry.ptr, expiry.len, rid.ptr,
                     rid.len);
    trim_before(queue, index, (double)now, 8);
}

/* the claim loop: up to count jobs leased, one side then the other from flat (1: pending
 * first), their entries sent into the open reply array, their leases in one ZADD active
 * after the loop; the count of entries. *claimed (when not NULL): their ids,
 * space-separated, for the request's record */
static long lease_jobs(Queue *queue, int flat, double count, double lease, double lockttl,
                       long long now, Str *claimed, const Limits *lim) {
    RedisModuleCtx *ctx = queue->ctx;
    Claim claim = {
        .queue = queue, .ring = queue_key(queue, EMQ_K_RING), .lim = lim, .now = now};
    /* deadline, id, ...: one ZADD active for the batch, after the loop */
    size_t nleased = 0, cap = 64;
    RedisModuleString **leases = RedisModule_PoolAlloc(ctx, sizeof(*leases) * cap);
    RedisModuleString *deadline = mkstr(ctx, num(queue, (double)now + lease));
    long out = 0;
    while ((double)out < count * 5) {
        Str id, group = NONE;
        double per = 0;
        claim.last = NULL; /* set by pop_flat when the id is its */
        if (flat) {
            id = pop_flat(&claim, ahead(&claim, count, out));
            if (!id.ptr) id = pop_lane(&claim, &group, &per);
        } else {
            id = pop_lane(&claim, &group, &per);
            if (!id.ptr) id = pop_flat(&claim, ahead(&claim, count, out));
        }
        if (!id.ptr) break;
        Str row = job_key(queue, id);
        Leased leased = lease_row(queue, row, now);
        if (nleased + 2 > cap) {
            RedisModuleString **more = RedisModule_PoolAlloc(ctx, sizeof(*leases) * cap * 2);
            memcpy(more, leases, sizeof(*leases) * nleased);
            leases = more;
            cap *= 2;
        }
        leases[nleased++] = deadline;
        leases[nleased++] = claim.last ? claim.last : mkstr(ctx, id);
        if (lockttl > 0) {
            Str lock = row_key(queue, row, EMQ_K_LOCK), ttl = num(queue, lockttl);
            RedisModule_Call(ctx, "SET", "!bbcb", lock.ptr, lock.len, leased.token_text.ptr,
                             leased.token_text.len, "PX", ttl.ptr, ttl.len);
        }
        reply_job(ctx, id, leased.payload, leased.token, leased.name, group);
        out += 5;
        if (per > 0) { /* a start in a limited lane's log (member id:token) */
            LaneLog *log = lane_log(&claim, group, per);
            Str member = cat3(queue, id, str_c(":"), leased.token_text);
            push_member(ctx, &log->members, &log->count, &log->cap, member);
        }
        if (claimed)
            *claimed = claimed->ptr ? cat3(queue, *claimed, str_c(" "), id)
                                    : cat3(queue, id, NONE, NONE);
        Str head = cat3(queue, str_c("{\"event\":\"active\",\"job\":\""), id,
                        str_c("\",\"attempt\":"));
        emit(queue, cat3(queue, head, num14(queue, (double)leased.token), str_c("}")));
        flat = !flat;
    }
    if (nleased > 0) zadd_desc(queue, queue_key(queue, EMQ_K_ACTIVE), leases, nleased);
    for (size_t i = 0; i < claim.nlogs; i++) {
        LaneLog *log = &claim.logs[i];
        Str key = cat3(queue, queue->base, str_c(EMQ_K_GSTARTS), log->group);
        if (log->count > 0) log_starts(queue, key, log->members, log->count, now, log->per);
    }
    return out;
}

/* the queue's rate windows as the claim read them (claim.lua's rate_wait) */
typedef struct {
    Queue *queue;
    Str log;
    double per, max;
    long long now, in_win;
    double span, burst;
    long long in_span; /* -1: no spreading window (burst = max) */
    long long last;    /* the log's running count of starts */
} RateWindows;

/* ms until the rate's windows admit one more start, given `made` starts of this call */
static long long rate_wait(const RateWindows *w, long long made) {
    double at = (double)w->now;
    long long total = w->last + made;
    if ((double)(w->in_win + made) >= w->max)
        at = counted_free_at(w->queue, w->log, w->per, w->now, w->last, total, w->max);
    if (w->in_span >= 0 && (double)(w->in_span + made) >= w->burst) {
        double span_at =
            counted_free_at(w->queue, w->log, w->span, w->now, w->last, total, w->burst);
        if (span_at > at) at = span_at;
    }
    return (long long)at - w->now;
}

/* a claim held back before anything was popped: only its {scope, ms} entry */
static int hold_only(RedisModuleCtx *ctx, const char *scope, long long ms) {
    RedisModule_ReplyWithArray(ctx, 1);
    reply_hold(ctx, scope, ms);
    return REDISMODULE_OK;
}

int cmd_claim(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line line;
    if (!line_of(ctx, argv, argc, 1, 1, &line)) return REDISMODULE_OK;
    if (line.nargs < 4) return bad_args(ctx);
    Queue queue = {ctx, str_of(line.keys[0]), NULL};
    double lease, count, lockttl;
    if (!tonum(arg_at(&line, 0), &lease) || !tonum(arg_at(&line, 1), &count) ||
        !tonum(arg_at(&line, 3), &lockttl))
        return bad_args(ctx);
    int flat = str_eq_c(arg_at(&line, 2), "f");
    /* the pause read, folded in (a paused queue answers empty, nothing touched), and in
     * the same HMGET the flag that says whether the queue has limits to read */
    Str meta = queue_key(&queue, EMQ_K_META), gate[2];
    static const int GATE[] = {FIELD_PAUSED, FIELD_LIMITS};
    hmget(&queue, meta, 2, GATE, gate); /* the key API: no command dispatched */
    if (gate[0].ptr) return RedisModule_ReplyWithArray(ctx, 0);
    int flagged = gate[1].ptr != NULL;
    Str rid = arg_at(&line, 4), record_key = NONE;
    if (rid.ptr && rid.len > 0) record_key = cat3(&queue, queue.base, str_c(EMQ_K_CLAIMREQ), rid);
    /* only a re-send reads the record: a first send's rid is fresh */
    if (record_key.ptr && str_eq_c(arg_at(&line, 5), "1")) {
        Str record =
            reply_str(RedisModule_Call(ctx, "GET", "!b", record_key.ptr, record_key.len));
        if (record.ptr) return answer_repeat(&queue, record);
    }
    long long now = now_ms();
    /* flow control: the queue's limits, before anything is popped (limits.c), read
     * only when meta's flag `limits` is set (lib/limits.lua's limits_flag) */
    Limits lim;
    memset(&lim, 0, sizeof(lim));
    if (flagged) lim = limits_read(&queue);
    if (lim.has[LIM_LIMITED_UNTIL] && lim.value[LIM_LIMITED_UNTIL] > (double)now)
        return hold_only(ctx, "blocked", (long long)lim.value[LIM_LIMITED_UNTIL] - now);
    double asked = count;
    long long in_act = -1, in_win = -1;
    double cap = lim.value[LIM_CONCURRENCY], rmax = lim.value[LIM_RATE_MAX],
           rper = lim.value[LIM_RATE_MS];
    Str rate = queue_key(&queue, EMQ_K_RATE);
    if (lim.has[LIM_CONCURRENCY]) {
        in_act = zcard(&queue, queue_key(&queue, EMQ_K_ACTIVE));
        if ((double)in_act >= cap) return hold_only(ctx, "concurrency", 0);
        if (cap - (double)in_act < count) count = cap - (double)in_act;
    }
    RateWindows windows = {&queue, rate, rper, rmax, now, 0, 0, 0, -1, 0};
    if (lim.has[LIM_RATE_MAX] && lim.has[LIM_RATE_MS]) {
        /* the queue's counted log: one entry per call (limits.c) */
        counted_trim(&queue, rate, rper, now, 8);
        windows.last = count_last(&queue, rate);
        in_win = windows.last - count_at(&queue, rate, (double)now - rper);
        windows.in_win = in_win;
        double burst = lim.has[LIM_RATE_BURST] ? lim.value[LIM_RATE_BURST] : rmax;
        if (burst > rmax) burst = rmax;
        if (burst < rmax) {
            /* the spreading window: at most burst starts in ceil(burst * per / max) ms */
            double span = floor(burst * rper * 9 / (rmax * 10)); /* limits.lua's spread_span */
            windows.span = span < 1 ? 1 : span;
            windows.burst = burst;
            windows.in_span = windows.last - count_at(&queue, rate, (double)now - windows.span);
        }
        long long wait = rate_wait(&windows, 0);
        if (wait > 0) return hold_only(ctx, "rate", wait);
        if (rmax - (double)in_win < count) count = rmax - (double)in_win;
        if (windows.in_span >= 0 && windows.burst - (double)windows.in_span < count)
            count = windows.burst - (double)windows.in_span;
    }
    if (lim.on) {
        unpark(&queue, now, 32);
        if (!lim.has[LIM_RATE_MAX] && !lim.has[LIM_CONCURRENCY] &&
            !lim.has[LIM_GROUP_RATE_MAX]) {
            /* nothing left to apply: the flag goes (claim.lua) */
            Str rates = queue_key(&queue, EMQ_K_GRATE), held = queue_key(&queue, EMQ_K_GWAIT);
            if (reply_int(RedisModule_Call(ctx, "EXISTS", "!bb", rates.ptr, rates.len, held.ptr,
                                           held.len)) == 0)
                RedisModule_Call(ctx, "HDEL", "!bc", meta.ptr, meta.len, EMQ_F_LIMITS);
        }
    }
    Str claimed = NONE;
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
    long out = lease_jobs(&queue, flat, count, lease, lockttl, now,
                          record_key.ptr ? &claimed : NULL, &lim);
    /* the starts, in the queue's log (the lanes' are logged by the loop) */
    const char *held = NULL;
    long long wait = 0;
    long long started = out / 5;
    if (in_win >= 0) {
        long long rate_left = rate_wait(&windows, started);
        if (started > 0) counted_log(&queue, rate, windows.last, started, now, rper);
        if (rate_left > 0) {
            held = "rate";
            wait = rate_left;
        }
    }
    if (!held && in_act >= 0 && (double)(in_act + started) >= cap) held = "concurrency";
    if (!held && lim.on && (double)started < asked) {
        long long lanes = lanes_wait(&queue, now);
        if (lanes >= 0) {
            held = "lanes";
            wait = lanes;
        }
    }
    if (record_key.ptr && out > 0) record_request(&queue, rid, record_key, claimed, now);
    if (held) {
        reply_hold(ctx, held, wait);
        out += 1;
    }
    RedisModule_ReplySetArrayLength(ctx, out);
    return REDISMODULE_OK;
}
