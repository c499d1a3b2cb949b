/* Flow control inside the claim: lib/limits.lua's helpers, call for call (see that file
 * for the why). A rate limit is a sliding window log, a sorted set of starts (member
 * id:token, score = the server's ms); a lane whose window is full leaves the ring for
 * gwait (score = when it may be served again) and the claim brings it back to the
 * ring's head when due. */
#include "echomq.h"

/* the queue's limits from meta, one HMGET (each absent or not a number: unset) */
Limits limits_read(Queue *queue) {
    Str meta = queue_key(queue, EMQ_K_META);
    Reply *reply = RedisModule_Call(queue->ctx, "HMGET", "!bccccccc", meta.ptr, meta.len,
                                    EMQ_F_RATE_MAX, EMQ_F_RATE_MS, EMQ_F_CONCURRENCY,
                                    EMQ_F_LIMITED_UNTIL, EMQ_F_GROUP_RATE_MAX, EMQ_F_GROUP_RATE_MS,
                                    EMQ_F_RATE_BURST);
    Limits lim;
    lim.on = 1;
    for (int i = 0; i < LIM_COUNT; i++) {
        lim.value[i] = 0;
        lim.has[i] = tonum(reply_str(reply_elem(reply, (size_t)i)), &lim.value[i]);
    }
    return lim;
}

/* the starts of log `key` in the window of `per` ms ending at now, after trimming up to
 * k expired ones from its oldest end */
long long window_count(Queue *queue, Str key, double per, long long now, long long k) {
    trim_before(queue, key, (double)now - per + 1, k);
    Str low = num(queue, (double)now - per + 1);
    return reply_int(RedisModule_Call(queue->ctx, "ZCOUNT", "!bbc", key.ptr, key.len, low.ptr,
                                      low.len, "+inf"));
}

/* when the window (n starts logged, `extra` more made at now) admits one more start under
 * max: the (n + extra - max)-th start of the window leaves first, at its time + per */
double window_free_at(Queue *queue, Str key, double per, long long now, long long n,
                      long long extra, double max) {
    long long i = n + extra - (long long)max;
    if (i >= n) return (double)now + per;
    Str low = num(queue, (double)now - per + 1), at = num14(queue, (double)i);
    Reply *reply = RedisModule_Call(queue->ctx, "ZRANGEBYSCORE", "!bbcccbc", key.ptr, key.len,
                                    low.ptr, low.len, "+inf", "WITHSCORES", "LIMIT", at.ptr,
                                    at.len, "1");
    double score = 0;
    if (reply_len(reply) < 2 || !tonum(reply_str(reply_elem(reply, 1)), &score))
        return (double)now + per;
    return score + per;
}

/* the starts (members id:token) logged at now in `key`, the log kept `per` ms */
void log_starts(Queue *queue, Str key, Str *members, size_t count, long long now, double per) {
    RedisModuleCtx *ctx = queue->ctx;
    RedisModuleString **pairs = RedisModule_PoolAlloc(ctx, sizeof(*pairs) * 2 * count);
    RedisModuleString *stamp = mkstr(ctx, num(queue, (double)now));
    for (size_t i = 0; i < count; i++) {
        pairs[2 * i] = stamp;
        pairs[2 * i + 1] = mkstr(ctx, members[i]);
    }
    zadd_desc(queue, key, pairs, 2 * count);
    Str ttl = num(queue, per);
    RedisModule_Call(ctx, "PEXPIRE", "!bb", key.ptr, key.len, ttl.ptr, ttl.len);
}

/* a lane's rate limit: its own (grate, "max:per") or the queue's default; 1 when set */
int lane_rate(Queue *queue, Str group, const Limits *lim, double *max, double *per) {
    if (!lim->on) return 0; /* no flag: grate is empty and no default is set */
    Str rates = queue_key(queue, EMQ_K_GRATE);
    Str own = reply_str(
        RedisModule_Call(queue->ctx, "HGET", "!bb", rates.ptr, rates.len, group.ptr, group.len));
    if (own.ptr) {
        /* lua: string.match(r, '^(%d+):(%d+)$'); anything else limits nothing */
        size_t colon = 0;
        while (colon < own.len && own.ptr[colon] != ':') colon++;
        if (colon == 0 || colon + 1 >= own.len) return 0;
        for (size_t i = 0; i < own.len; i++)
            if (i != colon && (own.ptr[i] < '0' || own.ptr[i] > '9')) return 0;
        Str head = {own.ptr, colon}, tail = {own.ptr + colon + 1, own.len - colon - 1};
        return tonum(head, max) && tonum(tail, per);
    }
    if (!lim->has[LIM_GROUP_RATE_MAX] || !lim->has[LIM_GROUP_RATE_MS]) return 0;
    *max = lim->value[LIM_GROUP_RATE_MAX];
    *per = lim->value[LIM_GROUP_RATE_MS];
    return 1;
}

/* the group at the ring's head leaves it until `at`: into gwait, its turn count dropped */
void park_head(Queue *queue, Str group, double at) {
    RedisModuleCtx *ctx = queue->ctx;
    Str ring = queue_key(queue, EMQ_K_RING), turns = queue_key(queue, EMQ_K_GTURN),
        held = queue_key(queue, EMQ_K_GWAIT), score = num(queue, at);
    RedisModule_Call(ctx, "LPOP", "!b", ring.ptr, ring.len);
    RedisModule_Call(ctx, "HDEL", "!bb", turns.ptr, turns.len, group.ptr, group.len);
    RedisModule_Call(ctx, "ZADD", "!bbb", held.ptr, held.len, score.ptr, score.len, group.ptr,
                     group.len);
}

/* up to k lanes whose wait ended leave gwait; each that can be served goes to the ring's
 * head (the earliest due first) */
void unpark(Queue *queue, long long now, long long k) {
    RedisModuleCtx *ctx = queue->ctx;
    Str held = queue_key(queue, EMQ_K_GWAIT), ring = queue_key(queue, EMQ_K_RING);
    Str upto = num(queue, (double)now), most = num14(queue, (double)k);
    Reply *due = RedisModule_Call(ctx, "ZRANGEBYSCORE", "!bcbccb", held.ptr, held.len, "-inf",
                                  upto.ptr, upto.len, "LIMIT", "0", most.ptr, most.len);
    size_t n = reply_len(due);
    if (n == 0) return;
    RedisModuleString **groups = RedisModule_PoolAlloc(ctx, sizeof(*groups) * n);
    for (size_t i = 0; i < n; i++) groups[i] = mkstr(ctx, reply_str(reply_elem(due, i)));
    RedisModule_Call(ctx, "ZREM", "!bv", held.ptr, held.len, groups, n);
    for (size_t i = n; i-- > 0;) {
        Str group = str_of(groups[i]);
        if (serveable(queue, group))
            RedisModule_Call(ctx, "LPUSH", "!bb", ring.ptr, ring.len, group.ptr, group.len);
        else
            prune_group(queue, group);
    }
}

/* ms until the first held lane may be served again (at least 1), or -1 when none is */
long long lanes_wait(Queue *queue, long long now) {
    Str held = queue_key(queue, EMQ_K_GWAIT);
    Reply *first = RedisModule_Call(queue->ctx, "ZRANGE", "!bccc", held.ptr, held.len, "0", "0",
                                    "WITHSCORES");
    double at = 0;
    if (reply_len(first) < 2 || !tonum(reply_str(reply_elem(first, 1)), &at)) return -1;
    long long wait = (long long)at - now;
    return wait < 1 ? 1 : wait;
}

/* the claim reply's trailing entry: {scope, ms} */
void reply_hold(RedisModuleCtx *ctx, const char *scope, long long ms) {
    RedisModule_ReplyWithArray(ctx, 2);
    RedisModule_ReplyWithStringBuffer(ctx, scope, strlen(scope));
    RedisModule_ReplyWithLongLong(ctx, ms);
}

/* ---- the queue's counted log: one entry per call (limits.lua's count_*) ---- */

/* the running count at the newest entry of `key` at or before time t (0 when none) */
long long count_at(Queue *queue, Str key, double t) {
    Str upto = num(queue, t);
    Reply *r = RedisModule_Call(queue->ctx, "ZREVRANGEBYSCORE", "!bbcccc", key.ptr, key.len,
                                upto.ptr, upto.len, "-inf", "LIMIT", "0", "1");
    double n = 0;
    if (reply_len(r) < 1 || !tonum(reply_str(reply_elem(r, 0)), &n)) return 0;
    return (long long)n;
}

/* the newest running count of `key` (0 for an empty log) */
long long count_last(Queue *queue, Str key) {
    Reply *r = RedisModule_Call(queue->ctx, "ZRANGE", "!bcc", key.ptr, key.len, "-1", "-1");
    double n = 0;
    if (reply_len(r) < 1 || !tonum(reply_str(reply_elem(r, 0)), &n)) return 0;
    return (long long)n;
}

/* up to k expired entries (time <= now - per) trimmed from the oldest end, the newest
 * expired one kept: the base the window's count is read against */
void counted_trim(Queue *queue, Str key, double per, long long now, long long k) {
    Str upto = num(queue, (double)now - per);
    long long due = reply_int(RedisModule_Call(queue->ctx, "ZCOUNT", "!bcb", key.ptr, key.len,
                                               "-inf", upto.ptr, upto.len));
    if (due <= 1) return;
    Str last = num14(queue, (double)((due - 1 < k ? due - 1 : k) - 1));
    RedisModule_Call(queue->ctx, "ZREMRANGEBYRANK", "!bcb", key.ptr, key.len, "0", last.ptr,
                     last.len);
}

/* the entry at `rank`: its running count, and its time in *score (when not NULL) */
static long long count_rank(Queue *queue, Str key, long long rank, double *score) {
    Str at = num14(queue, (double)rank);
    Reply *r = score ? RedisModule_Call(queue->ctx, "ZRANGE", "!bbbc", key.ptr, key.len, at.ptr,
                                        at.len, at.ptr, at.len, "WITHSCORES")
                     : RedisModule_Call(queue->ctx, "ZRANGE", "!bbb", key.ptr, key.len, at.ptr,
                                        at.len, at.ptr, at.len);
    double n = 0;
    tonum(reply_str(reply_elem(r, 0)), &n);
    if (score && !tonum(reply_str(reply_elem(r, 1)), score)) *score = 0;
    return (long long)n;
}

/* when a window of w ms admits one more start under max, total starts counted (last of
 * them logged): the start numbered total - max + 1 leaves it at its entry's time + w */
double counted_free_at(Queue *queue, Str key, double w, long long now, long long last,
                       long long total, double max) {
    long long s = total - (long long)max + 1;
    if (s > last) return (double)now + w;
    long long lo = 0, hi = zcard(queue, key) - 1;
    while (lo < hi) {
        long long mid = (lo + hi) / 2;
        if (count_rank(queue, key, mid, NULL) >= s)
            hi = mid;
        else
            lo = mid + 1;
    }
    double score = 0;
    count_rank(queue, key, lo, &score);
    return score + w;
}

/* one call's `made` starts logged at now (the running count last + made), kept per ms */
void counted_log(Queue *queue, Str key, long long last, long long made, long long now,
                 double per) {
    char member[32];
    int len = snprintf(member, sizeof(member), "%015lld", last + made);
    Str stamp = num(queue, (double)now), ttl = num(queue, per);
    RedisModule_Call(queue->ctx, "ZADD", "!bbb", key.ptr, key.len, stamp.ptr, stamp.len, member,
                     (size_t)len);
    RedisModule_Call(queue->ctx, "PEXPIRE", "!bb", key.ptr, key.len, ttl.ptr, ttl.len);
}
