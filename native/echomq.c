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
 * See docs/native.md. The API is declared by hand in redismodule_min.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redismodule_min.h"

#define WAKE_CAP 64

typedef RedisModuleCallReply Rep;

/* a byte string: a pointer and a length (not NUL-terminated in general) */
typedef struct {
    const char *p;
    size_t n;
} Str;

/* one command's view of its queue: the context and the queue base emq:{q}: */
typedef struct {
    RedisModuleCtx *ctx;
    Str b;
    RedisModuleString *events; /* the events channel, made at the first event */
} Q;

static const Str NONE = {NULL, 0};

static int IN_CLUSTER; /* the server runs in cluster mode (fixed at its start), at load */

static Str S(const char *c) {
    Str s = {c, strlen(c)};
    return s;
}

static Str arg(RedisModuleString *s) {
    Str r;
    r.p = RedisModule_StringPtrLen(s, &r.n);
    return r;
}

static RedisModuleString *mkstr(RedisModuleCtx *ctx, Str s) {
    return RedisModule_CreateString(ctx, s.p ? s.p : "", s.n);
}

static int eq(Str a, Str b) { return a.p && b.p && a.n == b.n && memcmp(a.p, b.p, a.n) == 0; }

static int eqc(Str a, const char *c) { return eq(a, S(c)); }

/* Lua's %s: space, \t, \n, \v, \f, \r */
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* a .. b .. c, in memory freed when the command returns */
static Str cat3(Q *q, Str a, Str b, Str c) {
    size_t n = a.n + b.n + c.n;
    char *p = RedisModule_PoolAlloc(q->ctx, n + 1);
    if (a.n) memcpy(p, a.p, a.n);
    if (b.n) memcpy(p + a.n, b.p, b.n);
    if (c.n) memcpy(p + a.n + b.n, c.p, c.n);
    p[n] = '\0';
    Str r = {p, n};
    return r;
}

/* B .. suffix */
static Str K(Q *q, const char *suffix) { return cat3(q, q->b, S(suffix), NONE); }

static Str job_key(Q *q, Str id) { return cat3(q, q->b, S("job:"), id); }

static Str lane_key(Q *q, Str g) {
    Str head = cat3(q, q->b, S("g:"), g);
    return cat3(q, head, S(":pending"), NONE);
}

/* a number as the scripts hand it to a command: Lua's number -> "%.17g". An integral
 * value below 1e15 (a time in ms, a count, a token: nearly every one) prints as its
 * digits, which "%.17g" also gives, without the cost of a float format */
static Str digits(Q *q, double v, double below, const char *fmt) {
    char *p = RedisModule_PoolAlloc(q->ctx, 32);
    int n;
    if (v > -below && v < below && v == (double)(long long)v && (v != 0 || !signbit(v))) {
        char tmp[24];
        long long x = (long long)v;
        unsigned long long u = x < 0 ? (unsigned long long)(-x) : (unsigned long long)x;
        int k = 0;
        do {
            tmp[k++] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        n = 0;
        if (x < 0) p[n++] = '-';
        while (k) p[n++] = tmp[--k];
        p[n] = '\0';
    } else {
        n = snprintf(p, 32, fmt, v);
    }
    Str r = {p, (size_t)n};
    return r;
}

static Str num(Q *q, double v) { return digits(q, v, 1e15, "%.17g"); }

/* a number as Lua's tostring / `..` write it: "%.14g"; an integral value below 1e14
 * (14 digits) prints as its digits there too */
static Str num14(Q *q, double v) { return digits(q, v, 1e14, "%.14g"); }

/* Lua's tonumber on a string: 1 and *out when it is a number */
static int tonum(Str s, double *out) {
    char buf[64];
    if (!s.p || s.n == 0 || s.n >= sizeof(buf)) return 0;
    memcpy(buf, s.p, s.n);
    buf[s.n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end == buf) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (*end != '\0') return 0;
    *out = v;
    return 1;
}

/* ---- replies of RedisModule_Call ---- */

static int is_nil(Rep *r) { return r == NULL || RedisModule_CallReplyType(r) == REDISMODULE_REPLY_NULL; }

static long long rint_(Rep *r) {
    return r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER
               ? RedisModule_CallReplyInteger(r)
               : 0;
}

/* a bulk reply's bytes; NONE (p == NULL) for a nil */
static Str rstr(Rep *r) {
    Str s = NONE;
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING)
        s.p = RedisModule_CallReplyStringPtr(r, &s.n);
    return s;
}

static Rep *elem(Rep *r, size_t i) {
    if (!r || RedisModule_CallReplyType(r) != REDISMODULE_REPLY_ARRAY) return NULL;
    if (i >= RedisModule_CallReplyLength(r)) return NULL;
    return RedisModule_CallReplyArrayElement(r, i);
}

/* ---- the helpers of lib/common.lua, call for call ---- */

static long long now_ms(void) { return RedisModule_Milliseconds(); }

/* an event, as the script publishes it. Outside a cluster a PUBLISH, done as the
 * command does it through the key-less API (no command dispatch): the message to this
 * node's subscribers, then to the replicas (never to the AOF), as PUBLISH propagates
 * itself. In a cluster the scripts run in their sharded form (SPUBLISH: the queue's
 * shard alone hears it, where a PUBLISH would go to every node), and so does this: the
 * command, which propagates itself to the shard. */
static void emit(Q *q, Str json) {
    RedisModuleCtx *c = q->ctx;
    if (!q->events) q->events = mkstr(c, K(q, "events"));
    RedisModuleString *msg = mkstr(c, json);
    if (IN_CLUSTER) {
        RedisModule_Call(c, "SPUBLISH", "!ss", q->events, msg);
        return;
    }
    RedisModule_PublishMessage(c, q->events, msg);
    RedisModule_Replicate(c, "PUBLISH", "ssA", q->events, msg);
}

/* a row's field names, made once at load (with no context: never freed), so that a
 * key-API read or write makes no string for a name */
enum {
    F_STATE,
    F_ATTEMPTS,
    F_PAYLOAD,
    F_NAME,
    F_GROUP,
    F_DEDUP,
    F_KEEP,
    F_MAX_ATTEMPTS,
    F_STARTED_AT,
    F_LAST_STARTED_AT,
    F_FINISHED_AT,
    F_RESULT,
    F_ENQUEUED_AT,
    F_KEEP_COMPLETED, /* meta's retention */
    F_KEEP_COMPLETED_MS,
    F_KEEP_DEAD,
    F_KEEP_DEAD_MS,
    F_ACTIVE,    /* values of state */
    F_COMPLETED,
    F_COUNT
};
static const char *const FIELD_NAMES[F_COUNT] = {
    "state",          "attempts",          "payload",   "name",
    "group",          "dedup",             "keep",      "max_attempts",
    "started_at",     "last_started_at",   "finished_at", "result",
    "enqueued_at",    "keep_completed",    "keep_completed_ms", "keep_dead",
    "keep_dead_ms",   "active",            "completed"};
static RedisModuleString *FIELD[F_COUNT];

/* HMGET through the key API, as retention() reads: n <= 5 fields (FIELD indexes) of the
 * hash open at k into out, NONE for a missing field (or no hash: HMGET's nils, its
 * error counted alike); 1 when k holds a hash. A read: nothing to replicate. The
 * strings live until the command returns. */
static int hmget_open(RedisModuleKey *k, int n, const int *fields, Str *out) {
    for (int i = 0; i < n; i++) out[i] = NONE;
    if (!k || RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_HASH) return 0;
    /* one call for them all (each call checks the key again): HashGet stops at the
     * first NULL name, so the names past n are NULL */
    RedisModuleString *name[5] = {NULL, NULL, NULL, NULL, NULL}, *v[5] = {NULL};
    for (int i = 0; i < n && i < 5; i++) name[i] = FIELD[fields[i]];
    RedisModule_HashGet(k, REDISMODULE_HASH_NONE, name[0], &v[0], name[1], &v[1], name[2], &v[2],
                        name[3], &v[3], name[4], &v[4], NULL);
    for (int i = 0; i < n && i < 5; i++)
        if (v[i]) out[i] = arg(v[i]);
    return 1;
}

/* HSET key f v ... through the key API (n strings, field and value alternating),
 * replicated as the HSET it is; nothing when key holds another type (HSET's error) */
static void hset_kv(Q *q, RedisModuleString *key, RedisModuleString **fv, size_t n) {
    RedisModuleKey *k = RedisModule_OpenKey(q->ctx, key, REDISMODULE_READ | REDISMODULE_WRITE);
    if (!k) return;
    int t = RedisModule_KeyType(k);
    if (t == REDISMODULE_KEYTYPE_HASH || t == REDISMODULE_KEYTYPE_EMPTY) {
        /* the first three pairs in one call (the list ends at the first NULL name),
         * any more a call each */
        RedisModuleString *p[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
        for (size_t i = 0; i < n && i < 6; i++) p[i] = fv[i];
        RedisModule_HashSet(k, REDISMODULE_HASH_NONE, p[0], p[1], p[2], p[3], p[4], p[5], NULL);
        for (size_t i = 6; i + 1 < n; i += 2)
            RedisModule_HashSet(k, REDISMODULE_HASH_NONE, fv[i], fv[i + 1], NULL);
        RedisModule_Replicate(q->ctx, "HSET", "sv", key, fv, n);
    }
    RedisModule_CloseKey(k);
}

/* ZADD key score member through the key API, replicated as the ZADD it is; nothing
 * when key holds another type */
static void zadd_one(Q *q, Str key, long long score, Str score_text, RedisModuleString *m) {
    RedisModuleCtx *c = q->ctx;
    RedisModuleString *ks = mkstr(c, key);
    RedisModuleKey *k = RedisModule_OpenKey(c, ks, REDISMODULE_READ | REDISMODULE_WRITE);
    if (!k) return;
    int t = RedisModule_KeyType(k);
    if (t == REDISMODULE_KEYTYPE_ZSET || t == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_ZsetAdd(k, (double)score, m, NULL);
        RedisModule_Replicate(c, "ZADD", "sbs", ks, score_text.p, score_text.n, m);
    }
    RedisModule_CloseKey(k);
}

/* hmget_open on the key named key, opened for the read and closed; the key's name as
 * a string, for a write that follows */
static RedisModuleString *hmget(Q *q, Str key, int n, const int *fields, Str *out) {
    RedisModuleString *ks = mkstr(q->ctx, key);
    RedisModuleKey *k = RedisModule_OpenKey(q->ctx, ks, REDISMODULE_READ);
    hmget_open(k, n, fields, out);
    if (k) RedisModule_CloseKey(k);
    return ks;
}

static Str ev(Q *q, const char *name, Str id) {
    Str head = cat3(q, S("{\"event\":\""), S(name), S("\",\"job\":\""));
    return cat3(q, head, id, S("\"}"));
}

static void push_wake(Q *q, long long n) {
    Str wk = K(q, "wake");
    long long room = WAKE_CAP - rint_(RedisModule_Call(q->ctx, "LLEN", "!b", wk.p, wk.n));
    if (n > room) n = room;
    if (n > 0) {
        RedisModuleString *one = RedisModule_CreateString(q->ctx, "1", 1);
        RedisModuleString *v[WAKE_CAP];
        for (long long i = 0; i < n; i++) v[i] = one;
        RedisModule_Call(q->ctx, "RPUSH", "!bv", wk.p, wk.n, v, (size_t)n);
    }
}

static int serveable(Q *q, Str g) {
    Str lane = lane_key(q, g), gp = K(q, "gpaused"), gl = K(q, "glimit");
    RedisModuleCtx *c = q->ctx;
    if (rint_(RedisModule_Call(c, "ZCARD", "!b", lane.p, lane.n)) == 0) return 0;
    if (rint_(RedisModule_Call(c, "SISMEMBER", "!bb", gp.p, gp.n, g.p, g.n)) == 1) return 0;
    Str lim = rstr(RedisModule_Call(c, "HGET", "!bb", gl.p, gl.n, g.p, g.n));
    if (lim.p) {
        Str ga = K(q, "gactive");
        Str a = rstr(RedisModule_Call(c, "HGET", "!bb", ga.p, ga.n, g.p, g.n));
        double act = 0, l = 0;
        if (a.p) tonum(a, &act);
        tonum(lim, &l);
        if (act >= l) return 0;
    }
    return 1;
}

static void prune_group(Q *q, Str g) {
    RedisModuleCtx *c = q->ctx;
    Str lane = lane_key(q, g), ga = K(q, "gactive"), gl = K(q, "glimit"), gw = K(q, "gweight"),
        gp = K(q, "gpaused"), gs = K(q, "groups");
    if (rint_(RedisModule_Call(c, "EXISTS", "!b", lane.p, lane.n)) == 0 &&
        is_nil(RedisModule_Call(c, "HGET", "!bb", ga.p, ga.n, g.p, g.n)) &&
        rint_(RedisModule_Call(c, "HEXISTS", "!bb", gl.p, gl.n, g.p, g.n)) == 0 &&
        rint_(RedisModule_Call(c, "HEXISTS", "!bb", gw.p, gw.n, g.p, g.n)) == 0 &&
        rint_(RedisModule_Call(c, "SISMEMBER", "!bb", gp.p, gp.n, g.p, g.n)) == 0)
        RedisModule_Call(c, "SREM", "!bb", gs.p, gs.n, g.p, g.n);
}

static void ring_sync(Q *q, Str g, int quiet) {
    RedisModuleCtx *c = q->ctx;
    Str ring = K(q, "ring");
    int on = !is_nil(RedisModule_Call(c, "LPOS", "!bb", ring.p, ring.n, g.p, g.n));
    if (serveable(q, g)) {
        if (!on) {
            RedisModule_Call(c, "RPUSH", "!bb", ring.p, ring.n, g.p, g.n);
            if (!quiet) push_wake(q, 1);
        }
    } else {
        if (on) {
            Str gt = K(q, "gturn");
            RedisModule_Call(c, "LREM", "!bcb", ring.p, ring.n, "0", g.p, g.n);
            RedisModule_Call(c, "HDEL", "!bb", gt.p, gt.n, g.p, g.n);
        }
        prune_group(q, g);
    }
}

static void give_back(Q *q, Str g, int quiet) {
    RedisModuleCtx *c = q->ctx;
    Str ga = K(q, "gactive");
    long long left = rint_(RedisModule_Call(c, "HINCRBY", "!bbc", ga.p, ga.n, g.p, g.n, "-1"));
    if (left <= 0) {
        RedisModule_Call(c, "HDEL", "!bb", ga.p, ga.n, g.p, g.n);
        prune_group(q, g);
    }
    if (left < 0) {
        ring_sync(q, g, 0);
        return;
    }
    if (!serveable(q, g)) return;
    Str gl = K(q, "glimit");
    Str lim = rstr(RedisModule_Call(c, "HGET", "!bb", gl.p, gl.n, g.p, g.n));
    double l = 0;
    if (lim.p && tonum(lim, &l) && (double)(left + 1) >= l) {
        Str ring = K(q, "ring");
        RedisModule_Call(c, "RPUSH", "!bb", ring.p, ring.n, g.p, g.n);
        if (!quiet) push_wake(q, 1);
    }
}

static void lane_grew(Q *q, Str g, long long before, int quiet) {
    if (before == 0 && serveable(q, g)) {
        Str ring = K(q, "ring");
        RedisModule_Call(q->ctx, "RPUSH", "!bb", ring.p, ring.n, g.p, g.n);
        if (!quiet) push_wake(q, 1);
    }
}

/* release a dedup key if it still names job id (a newer job may hold it now) */
static void release_dedup(Q *q, Str id, Str dedup) {
    RedisModuleCtx *c = q->ctx;
    Str dk = cat3(q, q->b, S("de:"), dedup);
    Str holder = rstr(RedisModule_Call(c, "GET", "!b", dk.p, dk.n));
    if (eq(holder, id)) RedisModule_Call(c, "DEL", "!b", dk.p, dk.n);
}

/* delete a row with its logs (lines and their times), lock and error history; release
 * its dedup key if it still names it */
static void delete_row(Q *q, Str id, Str jk, Str dedup) {
    RedisModuleCtx *c = q->ctx;
    if (dedup.p) release_dedup(q, id, dedup);
    Str logs = cat3(q, jk, S(":logs"), NONE), lock = cat3(q, jk, S(":lock"), NONE);
    Str errs = cat3(q, jk, S(":errors"), NONE), times = cat3(q, jk, S(":logtimes"), NONE);
    RedisModule_Call(c, "DEL", "!bbbbb", jk.p, jk.n, logs.p, logs.n, lock.p, lock.n, errs.p,
                     errs.n, times.p, times.n);
}

static void count_metric(Q *q, const char *which, long long n, long long now) {
    RedisModuleCtx *c = q->ctx;
    Str mk = cat3(q, q->b, S("metrics:"), S(which));
    Str ns = num14(q, (double)n);
    RedisModule_Call(c, "HINCRBY", "!bcb", mk.p, mk.n, "count", ns.p, ns.n);
    double minute = floor((double)now / 60000.0);
    Str m = num14(q, minute);
    if (rint_(RedisModule_Call(c, "HINCRBY", "!bbb", mk.p, mk.n, m.p, m.n, ns.p, ns.n)) == n) {
        Str old = num14(q, minute - 1440);
        RedisModule_Call(c, "HDEL", "!bb", mk.p, mk.n, old.p, old.n);
    }
}

/* settled tombstones (lib/common.lua): complete leaves the ids it deleted in `settled`
 * (score = server ms) for SETTLED_MS, one ZADD a call; each id ending in 0-7 (about one
 * in eight) lets the call trim 32 expired ones; enqueue treats a recent one as a
 * duplicate */
#define SETTLED_MS 60000
#define SLICE 500 /* members per ZADD/ZREM, as lib/common.lua slices them */

/* lib/common.lua's zadd_desc: one ZADD of the n/2 pairs score, member in zs, the last
 * pair first (the array is reversed in place), SLICE pairs a call. A batch's members
 * come in ascending order and a small sorted set is a listpack, placed by a scan from
 * the head: last-first, each lands at the head. The set written is the same. */
static void zadd_desc(Q *q, Str key, RedisModuleString **zs, size_t n) {
    for (size_t i = 0, j = n - 2; n >= 4 && i < j; i += 2, j -= 2) {
        RedisModuleString *s = zs[i], *m = zs[i + 1];
        zs[i] = zs[j];
        zs[i + 1] = zs[j + 1];
        zs[j] = s;
        zs[j + 1] = m;
    }
    for (size_t i = 0; i < n; i += 2 * SLICE)
        RedisModule_Call(q->ctx, "ZADD", "!bv", key.p, key.n, zs + i,
                         n - i < 2 * SLICE ? n - i : 2 * SLICE);
}

static void zrem_all(Q *q, Str key, RedisModuleString **ids, size_t n) {
    for (size_t i = 0; i < n; i += SLICE)
        RedisModule_Call(q->ctx, "ZREM", "!bv", key.p, key.n, ids + i,
                         n - i < SLICE ? n - i : SLICE);
}

/* made: the ids as strings already (NULL: made here) */
static void tombstones(Q *q, Str *ids, RedisModuleString **made, size_t n, long long now) {
    RedisModuleCtx *c = q->ctx;
    Str sk = K(q, "settled");
    RedisModuleString *score = mkstr(c, num(q, (double)now));
    RedisModuleString **zs = RedisModule_PoolAlloc(c, sizeof(*zs) * 2 * n);
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        zs[2 * i] = score;
        zs[2 * i + 1] = made ? made[i] : mkstr(c, ids[i]);
        char last = ids[i].n ? ids[i].p[ids[i].n - 1] : 0;
        if (last >= '0' && last <= '7') hits++;
    }
    zadd_desc(q, sk, zs, 2 * n);
    if (!hits) return;
    Str upto = cat3(q, S("("), num14(q, (double)(now - SETTLED_MS)), NONE);
    Str lim = num14(q, (double)(32 * hits));
    Rep *old = RedisModule_Call(c, "ZRANGE", "!bcbcccb", sk.p, sk.n, "-inf", upto.p, upto.n,
                                "BYSCORE", "LIMIT", "0", lim.p, lim.n);
    size_t m = old && RedisModule_CallReplyType(old) == REDISMODULE_REPLY_ARRAY
                   ? RedisModule_CallReplyLength(old)
                   : 0;
    if (!m) return;
    RedisModuleString **v = RedisModule_PoolAlloc(c, sizeof(*v) * m);
    for (size_t i = 0; i < m; i++) v[i] = mkstr(c, rstr(elem(old, i)));
    zrem_all(q, sk, v, m);
}

static int settled_recently(Q *q, Str id, long long now) {
    Str sk = K(q, "settled");
    Str sc = rstr(RedisModule_Call(q->ctx, "ZSCORE", "!bb", sk.p, sk.n, id.p, id.n));
    double v;
    return sc.p && tonum(sc, &v) && v >= (double)(now - SETTLED_MS);
}

/* ---- lib/history.lua: the opt-in history ---- */

#define TRIM_STEP 4
#define ERRORS_CAP 20

/* the queue's retention of one settled set: count and age (has_* = 0 when unset) */
typedef struct {
    int has_count, has_age;
    double count, age;
} Retain;

/* read through the key API (OpenKey, HashGet): a read needs no replication, and the
 * hot path of a kept completion skips a command's dispatch for it (HMGET's answer) */
static Retain retention(Q *q, const char *which) {
    Retain out = {0, 0, 0, 0};
    RedisModuleKey *k = RedisModule_OpenKey(q->ctx, mkstr(q->ctx, K(q, "meta")), REDISMODULE_READ);
    if (!k) return out;
    if (RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_HASH) {
        int done = strcmp(which, "completed") == 0;
        RedisModuleString *f1 = FIELD[done ? F_KEEP_COMPLETED : F_KEEP_DEAD];
        RedisModuleString *f2 = FIELD[done ? F_KEEP_COMPLETED_MS : F_KEEP_DEAD_MS];
        RedisModuleString *v1 = NULL, *v2 = NULL;
        RedisModule_HashGet(k, REDISMODULE_HASH_NONE, f1, &v1, f2, &v2, NULL);
        if (v1) out.has_count = tonum(arg(v1), &out.count);
        if (v2) out.has_age = tonum(arg(v2), &out.age);
    }
    RedisModule_CloseKey(k);
    return out;
}

/* ZCARD through the key API, as retention() reads: 0 for no key (or not a sorted set,
 * where ZCARD's error would count as none too) */
static long long zcard(Q *q, Str key) {
    RedisModuleKey *k = RedisModule_OpenKey(q->ctx, mkstr(q->ctx, key), REDISMODULE_READ);
    if (!k) return 0;
    long long n =
        RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_ZSET ? (long long)RedisModule_ValueLength(k) : 0;
    RedisModule_CloseKey(k);
    return n;
}

/* lib/history.lua's trim_settled: the keys to delete in one DEL, the jobs dropped, those
 * of them that settled less than SETTLED_MS ago (tombstoned, stamped now) */
typedef struct {
    Q *q;
    Str setkey;
    int done; /* the completed set: keys collected; dead: delete_row per job */
    RedisModuleString **keys;
    size_t nkeys, cap;
    Str *fresh;
    size_t nfresh, fcap;
    long long gone;
} Trim;

static void trim_key(Trim *t, Str k) {
    if (t->nkeys == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        RedisModuleString **grown = RedisModule_PoolAlloc(t->q->ctx, sizeof(*grown) * cap);
        if (t->nkeys) memcpy(grown, t->keys, sizeof(*grown) * t->nkeys);
        t->keys = grown;
        t->cap = cap;
    }
    t->keys[t->nkeys++] = RedisModule_CreateString(t->q->ctx, k.p, k.n);
}

static void trim_fresh(Trim *t, Str id) {
    if (t->nfresh == t->fcap) {
        size_t cap = t->fcap ? t->fcap * 2 : 16;
        Str *grown = RedisModule_PoolAlloc(t->q->ctx, sizeof(*grown) * cap);
        if (t->nfresh) memcpy(grown, t->fresh, sizeof(*grown) * t->nfresh);
        t->fresh = grown;
        t->fcap = cap;
    }
    t->fresh[t->nfresh++] = id;
}

static void trim_flush(Trim *t) {
    if (t->nkeys == 1) { /* a kept completion's lock alone: no command to dispatch */
        RedisModuleKey *k = RedisModule_OpenKey(t->q->ctx, t->keys[0], REDISMODULE_WRITE);
        if (k && RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY) {
            RedisModule_DeleteKey(k);
            /* replicated as the DEL it stands for; DEL of no key propagates nothing */
            RedisModule_Replicate(t->q->ctx, "DEL", "s", t->keys[0]);
        }
        if (k) RedisModule_CloseKey(k);
    } else if (t->nkeys > 1) {
        RedisModule_Call(t->q->ctx, "DEL", "!v", t->keys, t->nkeys);
    }
    t->nkeys = 0;
}

/* drop the jobs of an id list reply, oldest first; the last `young` of them leave a
 * tombstone, or, when `flags` is not NULL, those whose ZMSCORE entry is at or after
 * `recent`; returns how many */
static size_t trim_drop(Trim *t, Rep *ids, size_t young, Rep *flags, double recent) {
    Q *q = t->q;
    RedisModuleCtx *c = q->ctx;
    size_t n = ids && RedisModule_CallReplyType(ids) == REDISMODULE_REPLY_ARRAY
                   ? RedisModule_CallReplyLength(ids)
                   : 0;
    if (n == 0) return 0;
    RedisModuleString **v = RedisModule_PoolAlloc(c, sizeof(*v) * n);
    for (size_t i = 0; i < n; i++) {
        Str id = rstr(elem(ids, i)), jk = job_key(q, id);
        int y;
        if (flags) {
            Str at = rstr(elem(flags, i));
            double w;
            y = at.p && tonum(at, &w) && w >= recent;
        } else {
            y = i + young >= n;
        }
        if (y) trim_fresh(t, id);
        if (t->done) {
            trim_key(t, jk);
            trim_key(t, cat3(q, jk, S(":logs"), NONE));
            trim_key(t, cat3(q, jk, S(":lock"), NONE));
            trim_key(t, cat3(q, jk, S(":errors"), NONE));
            trim_key(t, cat3(q, jk, S(":logtimes"), NONE));
            if (t->nkeys >= 1000) trim_flush(t);
        } else {
            /* lib/common's delete_row reads the row's dedup field when not handed one */
            Str d = rstr(RedisModule_Call(c, "HGET", "!bc", jk.p, jk.n, "dedup"));
            delete_row(q, id, jk, d);
        }
        v[i] = RedisModule_CreateString(c, id.p, id.n);
    }
    RedisModule_Call(c, "ZREM", "!bv", t->setkey.p, t->setkey.n, v, n);
    t->gone += (long long)n;
    return n;
}

/* of the k oldest members of the set, how many settled less than SETTLED_MS ago */
static size_t young_of(Trim *t, Rep *ids, long long now) {
    size_t k = ids && RedisModule_CallReplyType(ids) == REDISMODULE_REPLY_ARRAY
                   ? RedisModule_CallReplyLength(ids)
                   : 0;
    if (k == 0) return 0;
    Str upto = cat3(t->q, S("("), num14(t->q, (double)(now - SETTLED_MS)), NONE);
    long long old = rint_(RedisModule_Call(t->q->ctx, "ZCOUNT", "!bcb", t->setkey.p,
                                           t->setkey.n, "-inf", upto.p, upto.n));
    return (long long)k > old ? k - (size_t)old : 0;
}

/* the transitions' trim (step <= TRIM_STEP); set_retention's larger step is a script */
static long long trim_settled(Q *q, Str setkey, Retain r, int own, long long now, int step,
                              Str extra) {
    RedisModuleCtx *c = q->ctx;
    Trim t = {q, setkey, eq(setkey, K(q, "completed")), NULL, 0, 0, NULL, 0, 0, 0};
    if (extra.p) trim_key(&t, extra);
    Str st = num(q, step);
    if (r.has_count && r.count > 0) {
        /* past the count in batches of b (see lib/history.lua) */
        double over = (double)zcard(q, setkey) - r.count;
        if (over > 0) {
            double b = floor(r.count / 16);
            if (b < 1) b = 1;
            if (b > 32) b = 32;
            Str hi = num(q, (over < step ? over : step) + b - 2);
            Rep *ids = RedisModule_Call(c, "ZRANGE", "!bcb", setkey.p, setkey.n, "0", hi.p, hi.n);
            trim_drop(&t, ids, young_of(&t, ids, now), NULL, 0);
        }
    }
    if (r.has_age && r.age > 0) {
        Str upto = cat3(q, S("("), num14(q, (double)now - r.age), NONE);
        Rep *ids = RedisModule_Call(c, "ZRANGE", "!bcbcccb", setkey.p, setkey.n, "-inf", upto.p,
                                    upto.n, "BYSCORE", "LIMIT", "0", st.p, st.n);
        trim_drop(&t, ids, r.age < SETTLED_MS ? young_of(&t, ids, now) : 0, NULL, 0);
    }
    if (own) {
        /* index entries go whatever their rows hold (a row removed another way); the
         * index's scores are keep-until times, the finish times are in the set */
        Str ku = K(q, "keepuntil"), ns = num(q, (double)now);
        Rep *ids = RedisModule_Call(c, "ZRANGE", "!bcbcccb", ku.p, ku.n, "-inf", ns.p, ns.n,
                                    "BYSCORE", "LIMIT", "0", st.p, st.n);
        size_t n = ids && RedisModule_CallReplyType(ids) == REDISMODULE_REPLY_ARRAY
                       ? RedisModule_CallReplyLength(ids)
                       : 0;
        if (n > 0) {
            RedisModuleString **v = RedisModule_PoolAlloc(c, sizeof(*v) * n);
            for (size_t i = 0; i < n; i++) v[i] = mkstr(c, rstr(elem(ids, i)));
            Rep *at = RedisModule_Call(c, "ZMSCORE", "!bv", setkey.p, setkey.n, v, n);
            trim_drop(&t, ids, 0, at, (double)(now - SETTLED_MS));
            RedisModule_Call(c, "ZREM", "!bv", ku.p, ku.n, v, n);
        }
    }
    trim_flush(&t);
    if (t.nfresh > 0) tombstones(q, t.fresh, NULL, t.nfresh, now);
    return t.gone;
}

static Str json_str(Q *q, Str s);

static void record_error(Q *q, Str jk, Str attempt, long long now, Str err) {
    Str ek = cat3(q, jk, S(":errors"), NONE);
    Str j = cat3(q, S("{\"attempt\":"), attempt, S(",\"time\":"));
    j = cat3(q, j, num14(q, (double)now), S(",\"error\":"));
    j = cat3(q, j, json_str(q, err), S("}"));
    RedisModule_Call(q->ctx, "RPUSH", "!bb", ek.p, ek.n, j.p, j.n);
    Str lo = num14(q, -(double)ERRORS_CAP);
    RedisModule_Call(q->ctx, "LTRIM", "!bbc", ek.p, ek.n, lo.p, lo.n, "-1");
}

/* ---- JSON text as lua-cjson writes it ---- */

static Str json_str(Q *q, Str s) {
    char *p = RedisModule_PoolAlloc(q->ctx, s.n * 6 + 3);
    size_t o = 0;
    p[o++] = '"';
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        const char *esc = NULL;
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '/': esc = "\\/"; break;
        case '\b': esc = "\\b"; break;
        case '\t': esc = "\\t"; break;
        case '\n': esc = "\\n"; break;
        case '\f': esc = "\\f"; break;
        case '\r': esc = "\\r"; break;
        default: break;
        }
        if (esc) {
            size_t l = strlen(esc);
            memcpy(p + o, esc, l);
            o += l;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(p + o, 7, "\\u%04x", ch);
        } else {
            p[o++] = (char)ch;
        }
    }
    p[o++] = '"';
    Str r = {p, o};
    return r;
}

/* lib/audit.lua: one entry in the capped operator journal emq:{q}:audit */
static void audit(Q *q, const char *verb, Str args, const char *outcome, long long count,
                  Str actor) {
    Str ak = K(q, "audit"), n = num14(q, (double)count);
    if (!actor.p) actor = S("");
    RedisModule_Call(q->ctx, "XADD", "!bcccccccbcccbcb", ak.p, ak.n, "MAXLEN", "~", "10000", "*",
                     "verb", verb, "args", args.p, args.n, "outcome", outcome, "count", n.p, n.n,
                     "actor", actor.p, actor.n);
}

/* ---- command framing: EMQ.<VERB> numkeys key... arg... ---- */

typedef struct {
    RedisModuleString **keys;
    int nkeys;
    RedisModuleString **args;
    int nargs;
} Line;

/* split argv; 0 and an error reply sent when numkeys is not in [min, max] */
static int line_of(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int min, int max,
                   Line *l) {
    if (argc < 2) {
        RedisModule_WrongArity(ctx);
        return 0;
    }
    double nk;
    if (!tonum(arg(argv[1]), &nk) || nk < min || nk > max || nk != floor(nk) ||
        nk > argc - 2) {
        RedisModule_ReplyWithError(ctx, "ERR wrong number of keys for this echomq command");
        return 0;
    }
    l->nkeys = (int)nk;
    l->keys = argv + 2;
    l->args = argv + 2 + l->nkeys;
    l->nargs = argc - 2 - l->nkeys;
    return 1;
}

static Str A(Line *l, int i) { return i < l->nargs ? arg(l->args[i]) : NONE; }

static int bad_args(RedisModuleCtx *ctx) {
    return RedisModule_ReplyWithError(ctx, "ERR wrong arguments for this echomq command");
}

/* ---- EMQ.REPROCESS 4 row dead pending base id ---- */

static int cmd_reprocess(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line l;
    if (!line_of(ctx, argv, argc, 4, 4, &l)) return REDISMODULE_OK;
    if (l.nargs < 1) return bad_args(ctx);
    Q q = {ctx, arg(l.keys[3]), NULL};
    Str jk = arg(l.keys[0]), dead = arg(l.keys[1]), pending = arg(l.keys[2]), id = A(&l, 0);
    if (rint_(RedisModule_Call(ctx, "EXISTS", "!b", jk.p, jk.n)) == 0)
        return RedisModule_ReplyWithLongLong(ctx, -1);
    /* the check is a read: nothing is written for a job that is not dead */
    if (is_nil(RedisModule_Call(ctx, "ZSCORE", "!bb", dead.p, dead.n, id.p, id.n)))
        return RedisModule_ReplyWithError(ctx, "EMQSTATE not dead");
    RedisModule_Call(ctx, "ZREM", "!bb", dead.p, dead.n, id.p, id.n);
    RedisModule_Call(ctx, "HDEL", "!bc", jk.p, jk.n, "last_error");
    RedisModule_Call(ctx, "HSET", "!bcc", jk.p, jk.n, "state", "pending");
    Str g = rstr(RedisModule_Call(ctx, "HGET", "!bc", jk.p, jk.n, "group"));
    if (g.p) {
        Str lane = lane_key(&q, g), gs = K(&q, "groups"), gi = K(&q, "gindex");
        RedisModule_Call(ctx, "ZADD", "!bcb", lane.p, lane.n, "0", id.p, id.n);
        RedisModule_Call(ctx, "ZADD", "!bcb", gi.p, gi.n, "0", id.p, id.n); /* the lanes' index */
        RedisModule_Call(ctx, "SADD", "!bb", gs.p, gs.n, g.p, g.n);
        ring_sync(&q, g, 1);
    } else {
        RedisModule_Call(ctx, "ZADD", "!bcb", pending.p, pending.n, "0", id.p, id.n);
    }
    push_wake(&q, 1);
    emit(&q, ev(&q, "reprocessed", id));
    audit(&q, "reprocess_job", cat3(&q, S("{\"job\":"), json_str(&q, id), S("}")), "ok", 1,
          A(&l, 1));
    return RedisModule_ReplyWithLongLong(ctx, 1);
}

/* ---- EMQ.CLAIM 1 base lease count side lockttl [rid [resent]] ---- */

typedef struct {
    Q *q;
    Str ring;
    int flat_dry, ring_dry;
    Str *buf; /* ids popped ahead from pending */
    RedisModuleString **made; /* the same, as the strings the range read made */
    size_t bi, bn;
    RedisModuleString *last; /* the id's string when pop_flat answered it (the claim loop
                              * clears it before each pop) */
} Claim;

/* claim.lua's ahead(): 1 while the ring may serve the next, else what the batch still
 * wants (whole, at most 1000 a call) */
static long long ahead(Claim *c, double count, long out) {
    if (!c->ring_dry) return 1;
    double w = ceil(count - (double)out / 5);
    return w > 1000 ? 1000 : (long long)w;
}

/* claim.lua's pop_flat: `want` ids popped at once, the rest kept for the next calls.
 * ZPOPMIN's effect, done as a read of the head through the key API and one
 * ZREMRANGEBYRANK 0 n-1 (which replicates as itself): the same ids leave pending, and
 * no score is formatted into a reply and parsed back */
static Str pop_flat(Claim *c, long long want) {
    if (c->bi < c->bn) {
        c->last = c->made[c->bi];
        return c->buf[c->bi++];
    }
    if (c->flat_dry) return NONE;
    RedisModuleCtx *ctx = c->q->ctx;
    Str pk = K(c->q, "pending");
    RedisModuleKey *k = RedisModule_OpenKey(ctx, mkstr(ctx, pk), REDISMODULE_READ);
    size_t n = 0;
    if (k && RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_ZSET) {
        size_t len = RedisModule_ValueLength(k);
        size_t cap = (size_t)want < len ? (size_t)want : len;
        c->buf = RedisModule_PoolAlloc(ctx, sizeof(*c->buf) * (cap ? cap : 1));
        c->made = RedisModule_PoolAlloc(ctx, sizeof(*c->made) * (cap ? cap : 1));
        RedisModule_ZsetFirstInScoreRange(k, -HUGE_VAL, HUGE_VAL, 0, 0);
        while (n < cap && !RedisModule_ZsetRangeEndReached(k)) {
            c->made[n] = RedisModule_ZsetRangeCurrentElement(k, NULL);
            c->buf[n] = arg(c->made[n]);
            n++;
            RedisModule_ZsetRangeNext(k);
        }
        RedisModule_ZsetRangeStop(k);
    }
    if (k) RedisModule_CloseKey(k);
    if (n == 0) {
        c->flat_dry = 1;
        return NONE;
    }
    Str last = num14(c->q, (double)(n - 1));
    RedisModule_Call(ctx, "ZREMRANGEBYRANK", "!bcb", pk.p, pk.n, "0", last.p, last.n);
    if ((long long)n < want) c->flat_dry = 1;
    c->bn = n;
    c->bi = 1;
    c->last = c->made[0];
    return c->buf[0];
}

static Str pop_lane(Claim *c, Str *gout) {
    Q *q = c->q;
    RedisModuleCtx *ctx = q->ctx;
    if (c->ring_dry) return NONE;
    Str ring = c->ring, gt = K(q, "gturn");
    long long len = rint_(RedisModule_Call(ctx, "LLEN", "!b", ring.p, ring.n));
    for (long long i = 0; i < len; i++) {
        Str g = rstr(RedisModule_Call(ctx, "LINDEX", "!bc", ring.p, ring.n, "0"));
        if (!g.p) break;
        if (!serveable(q, g)) {
            RedisModule_Call(ctx, "LPOP", "!b", ring.p, ring.n);
            RedisModule_Call(ctx, "HDEL", "!bb", gt.p, gt.n, g.p, g.n);
            continue;
        }
        Str lane = lane_key(q, g), ga = K(q, "gactive");
        Str id = rstr(elem(RedisModule_Call(ctx, "ZPOPMIN", "!b", lane.p, lane.n), 0));
        Str gi = K(q, "gindex"); /* the lanes' index follows the lane */
        RedisModule_Call(ctx, "ZREM", "!bb", gi.p, gi.n, id.p, id.n);
        RedisModule_Call(ctx, "HINCRBY", "!bbc", ga.p, ga.n, g.p, g.n, "1");
        if (!serveable(q, g)) {
            RedisModule_Call(ctx, "LPOP", "!b", ring.p, ring.n);
            RedisModule_Call(ctx, "HDEL", "!bb", gt.p, gt.n, g.p, g.n);
        } else {
            Str gw = K(q, "gweight");
            Str ws = rstr(RedisModule_Call(ctx, "HGET", "!bb", gw.p, gw.n, g.p, g.n));
            double w = 1;
            if (ws.p) tonum(ws, &w);
            if (w <= 1 ||
                (double)rint_(RedisModule_Call(ctx, "HINCRBY", "!bbc", gt.p, gt.n, g.p, g.n, "1")) >=
                    w) {
                if (w > 1) RedisModule_Call(ctx, "HDEL", "!bb", gt.p, gt.n, g.p, g.n);
                RedisModule_Call(ctx, "LMOVE", "!bbcc", ring.p, ring.n, ring.p, ring.n, "LEFT",
                                 "RIGHT");
            }
        }
        *gout = g;
        return id;
    }
    c->ring_dry = 1;
    return NONE;
}

static int cmd_claim(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line l;
    if (!line_of(ctx, argv, argc, 1, 1, &l)) return REDISMODULE_OK;
    if (l.nargs < 4) return bad_args(ctx);
    Q q = {ctx, arg(l.keys[0]), NULL};
    double lease, count, lockttl;
    if (!tonum(A(&l, 0), &lease) || !tonum(A(&l, 1), &count) || !tonum(A(&l, 3), &lockttl))
        return bad_args(ctx);
    int flat = eqc(A(&l, 2), "f");
    /* the pause read, folded in: a paused queue answers empty, nothing touched */
    Str meta = K(&q, "meta");
    if (rint_(RedisModule_Call(ctx, "HEXISTS", "!bc", meta.p, meta.n, "paused")) == 1)
        return RedisModule_ReplyWithArray(ctx, 0);
    Str rid = A(&l, 4), ridkey = NONE;
    if (rid.p && rid.n > 0) ridkey = cat3(&q, q.b, S("claimreq:"), rid);
    /* only a re-send reads the record: a first send's rid is fresh */
    if (ridkey.p && eqc(A(&l, 5), "1")) {
        Str seen = rstr(RedisModule_Call(ctx, "GET", "!b", ridkey.p, ridkey.n));
        if (seen.p) {
            /* a repeat of a request that ran: answer what it claimed, claim nothing new */
            long again = 0;
            RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
            size_t i = 0;
            while (i < seen.n) {
                while (i < seen.n && is_space(seen.p[i])) i++;
                size_t start = i;
                while (i < seen.n && !is_space(seen.p[i])) i++;
                if (i == start) break;
                Str id = {seen.p + start, i - start};
                Str jk = job_key(&q, id);
                static const int FIELDS[] = {F_STATE, F_ATTEMPTS, F_PAYLOAD, F_NAME, F_GROUP};
                Str f[5];
                hmget(&q, jk, 5, FIELDS, f);
                if (eqc(f[0], "active")) {
                    Str pay = f[2], nm = f[3], gr = f[4];
                    double t = 0;
                    tonum(f[1], &t);
                    RedisModule_ReplyWithStringBuffer(ctx, id.p, id.n);
                    RedisModule_ReplyWithStringBuffer(ctx, pay.p ? pay.p : "", pay.n);
                    RedisModule_ReplyWithLongLong(ctx, (long long)t);
                    RedisModule_ReplyWithStringBuffer(ctx, nm.p ? nm.p : "", nm.n);
                    RedisModule_ReplyWithStringBuffer(ctx, gr.p ? gr.p : "", gr.n);
                    again += 5;
                }
            }
            RedisModule_ReplySetArrayLength(ctx, again);
            return REDISMODULE_OK;
        }
    }
    long long now = now_ms();
    Str deadline = num(&q, (double)now + lease);
    Str active = K(&q, "active");
    Claim c = {&q, K(&q, "ring"), 0, 0, NULL, NULL, 0, 0, NULL};
    /* deadline, id, ...: one ZADD active for the batch, after the loop */
    size_t nact = 0, cap = 64;
    RedisModuleString **act = RedisModule_PoolAlloc(ctx, sizeof(*act) * cap);
    RedisModuleString *dl = mkstr(ctx, deadline);
    Str got = NONE; /* the claimed ids, space-separated, for claimreq:<rid> */
    long out = 0;
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
    while ((double)out < count * 5) {
        Str id, g = NONE;
        c.last = NULL; /* set by pop_flat when the id is its */
        if (flat) {
            id = pop_flat(&c, ahead(&c, count, out));
            if (!id.p) id = pop_lane(&c, &g);
        } else {
            id = pop_lane(&c, &g);
            if (!id.p) id = pop_flat(&c, ahead(&c, count, out));
        }
        if (!id.p) break;
        /* HMGET attempts payload name keep, then one HSET, through the key API: the
         * row opened once, the HSET replicated as the command (a replica without the
         * module holds the same row) */
        Str jk = job_key(&q, id);
        RedisModuleString *jks = mkstr(ctx, jk);
        RedisModuleKey *row = RedisModule_OpenKey(ctx, jks, REDISMODULE_READ | REDISMODULE_WRITE);
        static const int FIELDS[] = {F_ATTEMPTS, F_PAYLOAD, F_NAME, F_KEEP};
        Str f[4];
        int is_hash = hmget_open(row, 4, FIELDS, f);
        double a = 0;
        if (f[0].p && !tonum(f[0], &a)) a = 0;
        long long tok = (long long)a + 1;
        Str toks = num(&q, (double)tok);
        if (row && (is_hash || RedisModule_KeyType(row) == REDISMODULE_KEYTYPE_EMPTY)) {
            RedisModuleString *tv = mkstr(ctx, toks), *at = FIELD[F_ATTEMPTS],
                              *st = FIELD[F_STATE], *active = FIELD[F_ACTIVE];
            if (!f[3].p) {
                RedisModule_HashSet(row, REDISMODULE_HASH_NONE, at, tv, st, active, NULL);
                RedisModule_Replicate(ctx, "HSET", "sssss", jks, at, tv, st, active);
            } else {
                /* a kept row: its timeline, in the same HSET */
                RedisModuleString *when = FIELD[tok == 1 ? F_STARTED_AT : F_LAST_STARTED_AT];
                RedisModuleString *ns = mkstr(ctx, num(&q, (double)now));
                RedisModule_HashSet(row, REDISMODULE_HASH_NONE, at, tv, st, active, when, ns,
                                    NULL);
                RedisModule_Replicate(ctx, "HSET", "sssssss", jks, at, tv, st, active, when, ns);
            }
        }
        if (row) RedisModule_CloseKey(row);
        if (nact + 2 > cap) {
            RedisModuleString **more = RedisModule_PoolAlloc(ctx, sizeof(*act) * cap * 2);
            memcpy(more, act, sizeof(*act) * nact);
            act = more;
            cap *= 2;
        }
        act[nact++] = dl;
        act[nact++] = c.last ? c.last : mkstr(ctx, id);
        if (lockttl > 0) {
            Str lk = cat3(&q, jk, S(":lock"), NONE), ttl = num(&q, lockttl);
            RedisModule_Call(ctx, "SET", "!bbcb", lk.p, lk.n, toks.p, toks.n, "PX", ttl.p, ttl.n);
        }
        Str payload = f[1], name = f[2];
        RedisModule_ReplyWithStringBuffer(ctx, id.p, id.n);
        RedisModule_ReplyWithStringBuffer(ctx, payload.p ? payload.p : "", payload.n);
        RedisModule_ReplyWithLongLong(ctx, tok);
        RedisModule_ReplyWithStringBuffer(ctx, name.p ? name.p : "", name.n);
        RedisModule_ReplyWithStringBuffer(ctx, g.p ? g.p : "", g.n);
        out += 5;
        if (ridkey.p) got = got.p ? cat3(&q, got, S(" "), id) : cat3(&q, id, NONE, NONE);
        Str t14 = num14(&q, (double)tok);
        Str head = cat3(&q, S("{\"event\":\"active\",\"job\":\""), id, S("\",\"attempt\":"));
        emit(&q, cat3(&q, head, t14, S("}")));
        flat = !flat;
    }
    if (nact > 0) zadd_desc(&q, active, act, nact);
    if (ridkey.p && out > 0) {
        RedisModule_Call(ctx, "SET", "!bbcc", ridkey.p, ridkey.n, got.p, got.n, "PX", "60000");
        /* the records' index (rid -> expiry); a rid starting 0 or 1 trims 32 expired */
        Str ix = K(&q, "claimreqs"), exp = num(&q, (double)now + 60000);
        RedisModule_Call(ctx, "ZADD", "!bbb", ix.p, ix.n, exp.p, exp.n, rid.p, rid.n);
        if (rid.p[0] == '0' || rid.p[0] == '1') {
            Str upto = cat3(&q, S("("), num14(&q, (double)now), NONE);
            Rep *old = RedisModule_Call(ctx, "ZRANGE", "!bcbcccc", ix.p, ix.n, "-inf", upto.p,
                                        upto.n, "BYSCORE", "LIMIT", "0", "32");
            size_t n = old && RedisModule_CallReplyType(old) == REDISMODULE_REPLY_ARRAY
                           ? RedisModule_CallReplyLength(old)
                           : 0;
            if (n > 32) n = 32;
            if (n > 0) {
                RedisModuleString *v[32];
                for (size_t i = 0; i < n; i++) {
                    Str m = rstr(elem(old, i));
                    v[i] = RedisModule_CreateString(ctx, m.p, m.n);
                }
                RedisModule_Call(ctx, "ZREM", "!bv", ix.p, ix.n, v, n);
            }
        }
    }
    RedisModule_ReplySetArrayLength(ctx, out);
    return REDISMODULE_OK;
}

/* ---- the token fence: HMGET state attempts <extra...> ---- */

/* 1 and the reply when fenced; 0 when a refusal has been sent. *jks (when not NULL):
 * the row's name as a string */
static int fenced(Q *q, Str jk, Str token, int x1, int x2, int x3, Str *f,
                  RedisModuleString **jks) {
    const int fields[] = {F_STATE, F_ATTEMPTS, x1, x2, x3};
    RedisModuleString *made = hmget(q, jk, 5, fields, f);
    if (jks) *jks = made;
    Str state = f[0], attempts = f[1];
    /* a kept completed row is no job to settle: gone, as a deleted row */
    if (!state.p || eqc(state, "completed")) {
        RedisModule_ReplyWithLongLong(q->ctx, -1);
        return 0;
    }
    if (!eqc(state, "active") || !eq(attempts, token)) {
        Str head = cat3(q, S("EMQSTALE token "), token, S(" is not current"));
        RedisModule_ReplyWithError(q->ctx, head.p);
        return 0;
    }
    return 1;
}

/* one-job verbs: KEYS[1] = base, and the row KEYS[2] when declared (else derived) */
static Str row_of(Q *q, Line *l, Str id) {
    return l->nkeys >= 2 ? arg(l->keys[1]) : job_key(q, id);
}

/* ---- EMQ.COMPLETE 2 base row id token [result] | 1 base id token result [...] ---- */

typedef struct {
    Str id, jk, g, dedup, keep, result;
    RedisModuleString *ids; /* the id, as the argument it came in */
    RedisModuleString *jks; /* the row's name as a string */
} Done;

/* the ids a batch has taken so far: an open-addressing set (a batch may name a job
 * twice; its second triple is gone, as complete.lua's `seen` table says) */
typedef struct {
    Str *slot;
    size_t mask;
} Seen;

static Seen seen_new(RedisModuleCtx *ctx, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    Seen s = {RedisModule_PoolAlloc(ctx, sizeof(Str) * cap), cap - 1};
    for (size_t i = 0; i < cap; i++) s.slot[i] = NONE;
    return s;
}

/* id's slot: where it is, or the empty one where it would go */
static Str *seen_slot(Seen *s, Str id) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < id.n; i++) h = (h ^ (unsigned char)id.p[i]) * 1099511628211ULL;
    for (size_t i = (size_t)h & s->mask;; i = (i + 1) & s->mask)
        if (!s->slot[i].p || eq(s->slot[i], id)) return &s->slot[i];
}

static int cmd_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line l;
    if (!line_of(ctx, argv, argc, 1, 2, &l)) return REDISMODULE_OK;
    Q q = {ctx, arg(l.keys[0]), NULL};
    Done *jobs;
    size_t nd = 0;
    int batch = l.nkeys < 2;
    long out = 0;
    if (!batch) { /* one job: 1, -1 or EMQSTALE */
        if (l.nargs < 2) return bad_args(ctx);
        Str id = A(&l, 0), token = A(&l, 1), jk = arg(l.keys[1]);
        Str f[5];
        RedisModuleString *jks = NULL;
        if (!fenced(&q, jk, token, F_GROUP, F_DEDUP, F_KEEP, f, &jks)) return REDISMODULE_OK;
        jobs = RedisModule_PoolAlloc(ctx, sizeof(*jobs));
        Done d = {id, jk, f[2], f[3], f[4], A(&l, 2), l.args[0], jks};
        jobs[nd++] = d;
    } else { /* triples, each fenced on its own; (id, reason) of those not done */
        jobs = RedisModule_PoolAlloc(ctx, sizeof(*jobs) * (size_t)(l.nargs / 3 + 1));
        Seen seen = seen_new(ctx, (size_t)(l.nargs / 3 + 1));
        RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
        for (int i = 0; i + 2 < l.nargs; i += 3) {
            Str id = A(&l, i), token = A(&l, i + 1), jk = job_key(&q, id);
            static const int FIELDS[] = {F_STATE, F_ATTEMPTS, F_GROUP, F_DEDUP, F_KEEP};
            Str f[5];
            RedisModuleString *jks = hmget(&q, jk, 5, FIELDS, f);
            Str state = f[0], attempts = f[1];
            const char *why = NULL;
            Str *taken = seen_slot(&seen, id);
            if (!state.p || eqc(state, "completed") || taken->p)
                why = "gone";
            else if (!eqc(state, "active") || !eq(attempts, token))
                why = "stale";
            if (why) {
                RedisModule_ReplyWithStringBuffer(ctx, id.p, id.n);
                RedisModule_ReplyWithStringBuffer(ctx, why, strlen(why));
                out += 2;
                continue;
            }
            Str res = A(&l, i + 2);
            if (res.n == 0) res = NONE;
            *taken = id;
            Done d = {id, jk, f[2], f[3], f[4], res, l.args[i], jks};
            jobs[nd++] = d;
        }
        if (nd == 0) {
            RedisModule_ReplySetArrayLength(ctx, out);
            return REDISMODULE_OK;
        }
    }
    /* complete.lua's writes, each kind once for the call */
    Str active = K(&q, "active");
    RedisModuleString **ids = RedisModule_PoolAlloc(ctx, sizeof(*ids) * nd);
    Str *idv = RedisModule_PoolAlloc(ctx, sizeof(*idv) * nd);
    for (size_t i = 0; i < nd; i++) {
        idv[i] = jobs[i].id;
        ids[i] = jobs[i].ids;
    }
    zrem_all(&q, active, ids, nd);
    for (size_t i = 0; i < nd; i++)
        if (jobs[i].g.p) give_back(&q, jobs[i].g, 0);
    long long now = now_ms();
    int retained = 0; /* the queue's completed retention, read on the first kept row */
    Retain r = {0, 0, 0, 0};
    RedisModuleString **rows = RedisModule_PoolAlloc(ctx, sizeof(*rows) * 5 * nd);
    size_t nr = 0, ngone = 0;
    for (size_t i = 0; i < nd; i++) {
        Done *d = &jobs[i];
        double own = 0;
        Retain rr = {0, 0, 0, 0};
        if (d->keep.p) {
            if (!tonum(d->keep, &own)) own = 0;
            if (!retained) {
                r = retention(&q, "completed");
                retained = 1;
            }
            rr = r;
        }
        if (d->dedup.p) release_dedup(&q, d->id, d->dedup);
        if (own > 0 || rr.has_count || rr.has_age) {
            /* kept: the row stays as history */
            Str lock = cat3(&q, d->jk, S(":lock"), NONE), ns = num(&q, (double)now);
            RedisModuleString *fv[6] = {FIELD[F_STATE],       FIELD[F_COMPLETED],
                                        FIELD[F_FINISHED_AT], mkstr(ctx, ns),
                                        FIELD[F_RESULT],      NULL};
            if (d->result.p) fv[5] = mkstr(ctx, d->result);
            hset_kv(&q, d->jks, fv, d->result.p ? 6 : 4);
            Str done = K(&q, "completed");
            zadd_one(&q, done, now, ns, d->ids);
            if (own > 0) {
                Str ku = K(&q, "keepuntil"), until = num(&q, (double)now + own);
                RedisModule_Call(ctx, "ZADD", "!bbb", ku.p, ku.n, until.p, until.n, d->id.p,
                                 d->id.n);
            }
            /* the lock goes in the trim's one DEL */
            trim_settled(&q, done, rr, own > 0, now, TRIM_STEP, lock);
        } else {
            rows[nr++] = mkstr(ctx, d->jk);
            rows[nr++] = mkstr(ctx, cat3(&q, d->jk, S(":logs"), NONE));
            rows[nr++] = mkstr(ctx, cat3(&q, d->jk, S(":lock"), NONE));
            rows[nr++] = mkstr(ctx, cat3(&q, d->jk, S(":errors"), NONE));
            rows[nr++] = mkstr(ctx, cat3(&q, d->jk, S(":logtimes"), NONE));
            /* a deleted row leaves its tombstone; a kept one stays */
            ids[ngone] = d->ids;
            idv[ngone++] = d->id;
        }
    }
    for (size_t i = 0; i < nr; i += 1000)
        RedisModule_Call(ctx, "DEL", "!v", rows + i, nr - i < 1000 ? nr - i : 1000);
    if (ngone > 0) tombstones(&q, idv, ids, ngone, now);
    count_metric(&q, "completed", (long long)nd, now);
    for (size_t i = 0; i < nd; i++) emit(&q, ev(&q, "completed", jobs[i].id));
    if (batch) {
        RedisModule_ReplySetArrayLength(ctx, out);
        return REDISMODULE_OK;
    }
    return RedisModule_ReplyWithLongLong(ctx, 1);
}

/* ---- EMQ.RETRY 1|2 base [row] id token error delay_ms max_override default_max ---- */

static int cmd_retry(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line l;
    if (!line_of(ctx, argv, argc, 1, 2, &l)) return REDISMODULE_OK;
    if (l.nargs < 4) return bad_args(ctx);
    Q q = {ctx, arg(l.keys[0]), NULL};
    Str id = A(&l, 0), token = A(&l, 1), err = A(&l, 2), jk = row_of(&q, &l, id);
    Str f[5];
    if (!fenced(&q, jk, token, F_GROUP, F_MAX_ATTEMPTS, F_KEEP, f, NULL)) return REDISMODULE_OK;
    double maxa;
    if (!tonum(A(&l, 4), &maxa) && !tonum(f[3], &maxa) && !tonum(A(&l, 5), &maxa))
        return bad_args(ctx);
    long long now = now_ms();
    long long failures = rint_(RedisModule_Call(ctx, "HINCRBY", "!bcc", jk.p, jk.n, "failures", "1"));
    Str active = K(&q, "active"), lock = cat3(&q, jk, S(":lock"), NONE);
    RedisModule_Call(ctx, "ZREM", "!bb", active.p, active.n, id.p, id.n);
    RedisModule_Call(ctx, "DEL", "!b", lock.p, lock.n);
    Str g = f[2];
    if (g.p) give_back(&q, g, 0);
    int kept = f[4].p != NULL;
    if (kept) record_error(&q, jk, token, now, err);
    Str fs = num14(&q, (double)failures);
    Str job = json_str(&q, id), error = json_str(&q, err);
    if ((double)failures >= maxa) {
        Str dead = K(&q, "dead"), ns = num(&q, (double)now);
        if (kept)
            RedisModule_Call(ctx, "HSET", "!bcccbcb", jk.p, jk.n, "state", "dead", "last_error",
                             err.p, err.n, "died_at", ns.p, ns.n);
        else
            RedisModule_Call(ctx, "HSET", "!bcccb", jk.p, jk.n, "state", "dead", "last_error",
                             err.p, err.n);
        RedisModule_Call(ctx, "ZADD", "!bbb", dead.p, dead.n, ns.p, ns.n, id.p, id.n);
        Retain r = retention(&q, "dead");
        if (r.has_count || r.has_age) trim_settled(&q, dead, r, 0, now, TRIM_STEP, NONE);
        count_metric(&q, "failed", 1, now);
        /* lua-cjson's key order for this table (its hash order, fixed for these keys) */
        Str j = cat3(&q, S("{\"error\":"), error, S(",\"failures\":"));
        j = cat3(&q, j, fs, S(",\"event\":\"dead\",\"job\":"));
        j = cat3(&q, j, job, S("}"));
        emit(&q, j);
        return RedisModule_ReplyWithStringBuffer(ctx, "dead", 4);
    }
    double delay = 0;
    if (!tonum(A(&l, 3), &delay)) delay = 0;
    double due = (double)now + delay;
    Str sched = K(&q, "schedule"), ds = num(&q, due);
    RedisModule_Call(ctx, "HSET", "!bcccb", jk.p, jk.n, "state", "scheduled", "last_error", err.p,
                     err.n);
    RedisModule_Call(ctx, "ZADD", "!bbb", sched.p, sched.n, ds.p, ds.n, id.p, id.n);
    Str j = cat3(&q, S("{\"error\":"), error, S(",\"due\":"));
    j = cat3(&q, j, num14(&q, due), S(",\"failures\":"));
    j = cat3(&q, j, fs, S(",\"event\":\"retrying\",\"job\":"));
    j = cat3(&q, j, job, S("}"));
    emit(&q, j);
    return RedisModule_ReplyWithStringBuffer(ctx, "scheduled", 9);
}

/* ---- EMQ.EXTEND 1 base lease lockttl id token [id token ...] ---- */

static int cmd_extend(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line l;
    if (!line_of(ctx, argv, argc, 1, 1, &l)) return REDISMODULE_OK;
    if (l.nargs < 2) return bad_args(ctx);
    Q q = {ctx, arg(l.keys[0]), NULL};
    double lease, lockttl;
    if (!tonum(A(&l, 0), &lease) || !tonum(A(&l, 1), &lockttl)) return bad_args(ctx);
    Str deadline = num(&q, (double)now_ms() + lease), ttl = num(&q, lockttl);
    Str active = K(&q, "active");
    long out = 0;
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
    for (int i = 2; i < l.nargs; i += 2) {
        Str id = A(&l, i), token = A(&l, i + 1);
        Str jk = job_key(&q, id);
        static const int FIELDS[] = {F_STATE, F_ATTEMPTS};
        Str f[2];
        hmget(&q, jk, 2, FIELDS, f);
        Str state = f[0], attempts = f[1];
        if (!state.p) {
            RedisModule_ReplyWithStringBuffer(ctx, id.p, id.n);
            RedisModule_ReplyWithStringBuffer(ctx, "gone", 4);
            out += 2;
        } else if (!eqc(state, "active") || !eq(attempts, token)) {
            RedisModule_ReplyWithStringBuffer(ctx, id.p, id.n);
            RedisModule_ReplyWithStringBuffer(ctx, "stale", 5);
            out += 2;
        } else {
            RedisModule_Call(ctx, "ZADD", "!bcbb", active.p, active.n, "XX", deadline.p,
                             deadline.n, id.p, id.n);
            if (lockttl > 0) {
                Str lk = cat3(&q, jk, S(":lock"), NONE);
                RedisModule_Call(ctx, "PEXPIRE", "!bb", lk.p, lk.n, ttl.p, ttl.n);
            }
        }
    }
    RedisModule_ReplySetArrayLength(ctx, out);
    return REDISMODULE_OK;
}

/* ---- EMQ.ENQUEUE 1 base n w <per job...> <options...> ---- */

static RedisModuleString *mk(RedisModuleCtx *ctx, Str s) {
    return RedisModule_CreateString(ctx, s.p, s.n);
}

static Str opt(Line *l, int i) {
    Str s = A(l, i);
    return (s.p && s.n > 0) ? s : NONE;
}

static int cmd_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line l;
    if (!line_of(ctx, argv, argc, 1, 1, &l)) return REDISMODULE_OK;
    Q q = {ctx, arg(l.keys[0]), NULL};
    /* check, then write: every argument that can fail is read before the first write */
    double nd, wd;
    if (!tonum(A(&l, 0), &nd) || !isfinite(nd) || nd < 0 || !tonum(A(&l, 1), &wd) ||
        (wd != 2 && wd != 4))
        return RedisModule_ReplyWithError(ctx, "EMQARG n and w must be numbers (w 2 or 4)");
    int n = (int)nd, w = (int)wd;
    if ((double)l.nargs < 2 + nd * wd) {
        Str m = cat3(&q, S("EMQARG "), num14(&q, nd), S(" jobs need "));
        m = cat3(&q, m, num14(&q, 2 + nd * wd), S(" arguments"));
        return RedisModule_ReplyWithError(ctx, m.p);
    }
    int o = 2 + n * w;
    Str prio = opt(&l, o), name = opt(&l, o + 1), g = opt(&l, o + 2), maxa = opt(&l, o + 3),
        delay = opt(&l, o + 4), runat = opt(&l, o + 5), backoff = opt(&l, o + 6),
        trace = opt(&l, o + 7), keep = opt(&l, o + 8);
    int resent = eqc(A(&l, o + 9), "1");
    const Str numeric[] = {prio, maxa, delay, runat, keep};
    static const char *const refusal[] = {
        "EMQARG priority is not a finite number", "EMQARG max_attempts is not a finite number",
        "EMQARG delay_ms is not a finite number", "EMQARG run_at_ms is not a finite number",
        "EMQARG keep_ms is not a finite number"};
    for (int k = 0; k < 5; k++) {
        double x;
        if (numeric[k].p && !(tonum(numeric[k], &x) && isfinite(x)))
            return RedisModule_ReplyWithError(ctx, refusal[k]);
    }
    /* one read for two questions: settled tombstones (1) and the queue's retention (2,
     * `keeps` named twice) */
    Str sk = K(&q, "settled"), kk = K(&q, "keeps");
    long long seen =
        rint_(RedisModule_Call(ctx, "EXISTS", "!bbb", sk.p, sk.n, kk.p, kk.n, kk.p, kk.n));
    /* history: a job asked for it, or the queue keeps it */
    if (!keep.p && seen >= 2) keep = S("0");
    long long now = now_ms(); /* the server clock, read once */
    int has_due = 0;
    double due = 0, dv = 0;
    if (runat.p) {
        has_due = 1;
        if (!tonum(runat, &due)) return bad_args(ctx);
    } else if (delay.p && tonum(delay, &dv) && dv > 0) {
        has_due = 1;
        due = (double)now + dv;
    }
    /* the row's fields, the same for every job but the payload (slot 5) and dedup */
    RedisModuleString *f[32];
    int nf = 0;
    f[nf++] = mk(ctx, S("state"));
    f[nf++] = mk(ctx, S(has_due ? "scheduled" : "pending"));
    f[nf++] = mk(ctx, S("attempts"));
    f[nf++] = mk(ctx, S("0"));
    f[nf++] = mk(ctx, S("payload"));
    f[nf++] = NULL;
    if (name.p) { f[nf++] = mk(ctx, S("name")); f[nf++] = mk(ctx, name); }
    if (g.p) { f[nf++] = mk(ctx, S("group")); f[nf++] = mk(ctx, g); }
    if (prio.p) { f[nf++] = mk(ctx, S("priority")); f[nf++] = mk(ctx, prio); }
    if (maxa.p) { f[nf++] = mk(ctx, S("max_attempts")); f[nf++] = mk(ctx, maxa); }
    if (backoff.p) { f[nf++] = mk(ctx, S("backoff")); f[nf++] = mk(ctx, backoff); }
    if (trace.p) { f[nf++] = mk(ctx, S("trace")); f[nf++] = mk(ctx, trace); }
    if (keep.p) {
        f[nf++] = FIELD[F_KEEP];
        f[nf++] = mk(ctx, keep);
        f[nf++] = FIELD[F_ENQUEUED_AT];
        f[nf++] = mk(ctx, num(&q, (double)now));
    }
    RedisModuleString *dedup_field = mk(ctx, S("dedup"));
    Str dest, score;
    if (has_due) {
        dest = K(&q, "schedule");
        score = num(&q, due);
    } else if (g.p) {
        dest = lane_key(&q, g);
        score = prio.p ? prio : S("0");
    } else {
        dest = K(&q, "pending");
        score = prio.p ? prio : S("0");
    }
    RedisModuleString *scores = mk(ctx, score);
    RedisModuleString **zs = RedisModule_PoolAlloc(ctx, sizeof(*zs) * (size_t)(2 * n + 1));
    int nz = 0;
    /* the tombstones are read only when there are any */
    int tombs = seen % 2 == 1;
    long long tomb_now = now;
    if (w == 4) RedisModule_ReplyWithArray(ctx, n);
    for (int i = 0; i < n; i++) {
        int a = 2 + i * w;
        Str id = A(&l, a), jk = job_key(&q, id);
        Str holder = NONE, dedup = NONE;
        /* a chosen id is always checked, a minted one only on a re-send */
        if (resent || (w == 4 && eqc(A(&l, a + 3), "1"))) {
            if (rint_(RedisModule_Call(ctx, "EXISTS", "!b", jk.p, jk.n)) == 1 ||
                (tombs && settled_recently(&q, id, tomb_now)))
                holder = id;
        }
        if (w == 4) {
            dedup = opt(&l, a + 2);
            if (!holder.p && dedup.p) {
                Str dk = cat3(&q, q.b, S("de:"), dedup);
                holder = rstr(
                    RedisModule_Call(ctx, "SET", "!bbcc", dk.p, dk.n, id.p, id.n, "NX", "GET"));
            }
            Str who = holder.p ? holder : id;
            RedisModule_ReplyWithStringBuffer(ctx, who.p, who.n);
        }
        if (!holder.p) {
            f[5] = l.args[a + 1];
            int cnt = nf;
            if (dedup.p) {
                f[nf] = dedup_field;
                f[nf + 1] = mk(ctx, dedup);
                cnt = nf + 2;
            }
            RedisModule_Call(ctx, "HSET", "!bv", jk.p, jk.n, f, (size_t)cnt);
            zs[nz++] = scores;
            zs[nz++] = l.args[a];
            emit(&q, ev(&q, "enqueued", id));
        }
    }
    long long lane_before = 0;
    if (g.p && !has_due && nz > 0)
        lane_before = rint_(RedisModule_Call(ctx, "ZCARD", "!b", dest.p, dest.n));
    if (nz > 0) zadd_desc(&q, dest, zs, (size_t)nz);
    if (nz > 0 && g.p && !has_due) { /* a lane's jobs are in the lanes' index too */
        Str gi = K(&q, "gindex");
        RedisModule_Call(ctx, "ZADD", "!bv", gi.p, gi.n, zs, (size_t)nz); /* zs: reversed */
    }
    long long written = nz / 2;
    if (written > 0 && !has_due) {
        if (g.p) {
            Str gs = K(&q, "groups");
            RedisModule_Call(ctx, "SADD", "!bb", gs.p, gs.n, g.p, g.n);
            lane_grew(&q, g, lane_before, 1);
        }
        push_wake(&q, written);
    }
    if (w == 4) return REDISMODULE_OK;
    return RedisModule_ReplyWithLongLong(ctx, written);
}

/* ---- registration ---- */

static const RedisModuleCommandInfoVersion INFO_VERSION = {
    1, sizeof(RedisModuleCommandHistoryEntry), sizeof(RedisModuleCommandKeySpec),
    sizeof(RedisModuleCommandArg)};

/* `numkeys key...` right after the command name, as EVALSHA has them after the sha */
static RedisModuleCommandKeySpec KEYSPECS[] = {
    {"the queue's keys, numkeys of them; more keys of the queue derive from the base",
     REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_UPDATE,
     REDISMODULE_KSPEC_BS_INDEX,
     {.index = {1}},
     REDISMODULE_KSPEC_FK_KEYNUM,
     {.keynum = {0, 1, 1}}},
    {0}};

typedef struct {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    const char *summary;
} Verb;

static const Verb VERBS[] = {
    {"emq.reprocess", cmd_reprocess, "write", "echomq: move a dead job back to the backlog"},
    {"emq.claim", cmd_claim, "write", "echomq: lease ready jobs (pause read folded in)"},
    {"emq.complete", cmd_complete, "write", "echomq: settle an active job as done"},
    {"emq.retry", cmd_retry, "write", "echomq: record a failure; schedule or dead-letter"},
    {"emq.extend", cmd_extend, "write", "echomq: move lease deadlines forward"},
    {"emq.enqueue", cmd_enqueue, "write deny-oom", "echomq: write job rows into their backlog"},
};

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "echomq", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    for (int i = 0; i < F_COUNT; i++)
        FIELD[i] = RedisModule_CreateString(NULL, FIELD_NAMES[i], strlen(FIELD_NAMES[i]));
    IN_CLUSTER = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) != 0;
    for (size_t i = 0; i < sizeof(VERBS) / sizeof(VERBS[0]); i++) {
        const Verb *v = &VERBS[i];
        if (RedisModule_CreateCommand(ctx, v->name, v->fn, v->flags, 0, 0, 0) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
        RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, v->name);
        RedisModuleCommandInfo info;
        memset(&info, 0, sizeof(info));
        info.version = &INFO_VERSION;
        info.summary = v->summary;
        info.since = "1.0.0";
        info.arity = -3;
        info.key_specs = KEYSPECS;
        if (!cmd || RedisModule_SetCommandInfo(cmd, &info) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
