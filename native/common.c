/* The shared helpers of every verb: numbers as Lua writes them, command framing, the
 * row's field names, key API reads and writes (replicated as the commands they stand
 * for), the token fence, events, JSON and the operator journal. */
#include "echomq.h"

int in_cluster;

/* ---- numbers ---- */

/* a number as the scripts hand it to a command: Lua's number -> "%.17g". An integral
 * value below 1e15 (a time in ms, a count, a token: nearly every one) prints as its
 * digits, which "%.17g" also gives, without the cost of a float format */
static Str digits(Queue *queue, double value, double below, const char *format) {
    char *out = RedisModule_PoolAlloc(queue->ctx, 32);
    int len;
    if (value > -below && value < below && value == (double)(long long)value &&
        (value != 0 || !signbit(value))) {
        char reversed[24];
        long long whole = (long long)value;
        unsigned long long rest =
            whole < 0 ? (unsigned long long)(-whole) : (unsigned long long)whole;
        int count = 0;
        do {
            reversed[count++] = (char)('0' + rest % 10);
            rest /= 10;
        } while (rest);
        len = 0;
        if (whole < 0) out[len++] = '-';
        while (count) out[len++] = reversed[--count];
        out[len] = '\0';
    } else {
        len = snprintf(out, 32, format, value);
    }
    Str s = {out, (size_t)len};
    return s;
}

Str num(Queue *queue, double value) { return digits(queue, value, 1e15, "%.17g"); }

/* a number as Lua's tostring / `..` write it: "%.14g"; an integral value below 1e14
 * (14 digits) prints as its digits there too */
Str num14(Queue *queue, double value) { return digits(queue, value, 1e14, "%.14g"); }

/* Lua's tonumber on a string: 1 and *out when it is a number */
int tonum(Str text, double *out) {
    char buf[64];
    if (!text.ptr || text.len == 0 || text.len >= sizeof(buf)) return 0;
    memcpy(buf, text.ptr, text.len);
    buf[text.len] = '\0';
    char *end;
    double value = strtod(buf, &end);
    if (end == buf) return 0;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') end++;
    if (*end != '\0') return 0;
    *out = value;
    return 1;
}

/* ---- run order ---- */
/* take n numbers of the queue's enqueue sequence, one write (lib/common's take_seq):
 * the first; the caller numbers its jobs first, first + 1, ... modulo EMQ_SEQ_SPAN */
long long take_seq(Queue *queue, long long n) {
    Str key = queue_key(queue, EMQ_K_SEQ); /* not meta: a waiting worker WATCHes it */
    char count[24];
    int len = snprintf(count, sizeof(count), "%lld", n);
    return reply_int(
               RedisModule_Call(queue->ctx, "INCRBY", "!bb", key.ptr, key.len, count, (size_t)len)) -
           n;
}

/* ---- command framing: EMQ.<VERB> numkeys key... arg... ---- */

/* split argv; 0 and an error reply sent when numkeys is not in [min, max] */
int line_of(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int min, int max,
            Line *line) {
    if (argc < 2) {
        RedisModule_WrongArity(ctx);
        return 0;
    }
    double numkeys;
    if (!tonum(str_of(argv[1]), &numkeys) || numkeys < min || numkeys > max ||
        numkeys != floor(numkeys) || numkeys > argc - 2) {
        RedisModule_ReplyWithError(ctx, "ERR wrong number of keys for this echomq command");
        return 0;
    }
    line->nkeys = (int)numkeys;
    line->keys = argv + 2;
    line->args = argv + 2 + line->nkeys;
    line->nargs = argc - 2 - line->nkeys;
    return 1;
}

int bad_args(RedisModuleCtx *ctx) {
    return RedisModule_ReplyWithError(ctx, "ERR wrong arguments for this echomq command");
}

/* ---- the field names ---- */

/* made once at load (with no context: never freed), so that a key-API read or write
 * makes no string for a name; in the order of the FIELD_* enum */
static const char *const FIELD_TEXT[FIELD_COUNT] = {
    EMQ_F_STATE,          EMQ_F_ATTEMPTS,          EMQ_F_PAYLOAD,   EMQ_F_NAME,
    EMQ_F_GROUP,          EMQ_F_DEDUP,             EMQ_F_KEEP,      EMQ_F_MAX_ATTEMPTS,
    EMQ_F_STARTED_AT,     EMQ_F_LAST_STARTED_AT,   EMQ_F_FINISHED_AT, EMQ_F_RESULT,
    EMQ_F_ENQUEUED_AT,    EMQ_F_KEEP_COMPLETED,    EMQ_F_KEEP_COMPLETED_MS, EMQ_F_KEEP_DEAD,
    EMQ_F_KEEP_DEAD_MS,   EMQ_F_PAUSED,            EMQ_F_LIMITS,    EMQ_F_CONCURRENCY,
    "active",             "completed",             EMQ_F_PARENT,    EMQ_F_CHILDREN};

RedisModuleString *field_name[FIELD_COUNT];

void field_names_init(void) {
    for (int i = 0; i < FIELD_COUNT; i++)
        field_name[i] = RedisModule_CreateString(NULL, FIELD_TEXT[i], strlen(FIELD_TEXT[i]));
}

/* ---- key API reads and writes ---- */

/* HMGET through the key API, as retention() reads: count <= 7 fields (FIELD_* indexes) of
 * the hash open at key into out, NONE for a missing field (or no hash: HMGET's nils,
 * its error counted alike); 1 when key holds a hash. A read: nothing to replicate. The
 * strings live until the command returns. */
int hmget_open(RedisModuleKey *key, int count, const int *fields, Str *out) {
    for (int i = 0; i < count; i++) out[i] = NONE;
    if (!key || RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_HASH) return 0;
    /* one call for them all (each call checks the key again): HashGet stops at the
     * first NULL name, so the names past count are NULL */
    RedisModuleString *name[7] = {NULL}, *value[7] = {NULL};
    for (int i = 0; i < count && i < 7; i++) name[i] = field_name[fields[i]];
    RedisModule_HashGet(key, REDISMODULE_HASH_NONE, name[0], &value[0], name[1], &value[1],
                        name[2], &value[2], name[3], &value[3], name[4], &value[4], name[5],
                        &value[5], name[6], &value[6], NULL);
    for (int i = 0; i < count && i < 7; i++)
        if (value[i]) out[i] = str_of(value[i]);
    return 1;
}

/* hmget_open on the key named key, opened for the read and closed; the key's name as
 * a string, for a write that follows */
RedisModuleString *hmget(Queue *queue, Str key, int count, const int *fields, Str *out) {
    RedisModuleString *name = mkstr(queue->ctx, key);
    RedisModuleKey *open = RedisModule_OpenKey(queue->ctx, name, REDISMODULE_READ);
    hmget_open(open, count, fields, out);
    if (open) RedisModule_CloseKey(open);
    return name;
}

/* HSET key f v ... through the key API (nstrings strings, field and value alternating),
 * replicated as the HSET it is; nothing when key holds another type (HSET's error) */
void hset_kv(Queue *queue, RedisModuleString *key, RedisModuleString **pairs,
             size_t nstrings) {
    RedisModuleKey *open =
        RedisModule_OpenKey(queue->ctx, key, REDISMODULE_READ | REDISMODULE_WRITE);
    if (!open) return;
    int type = RedisModule_KeyType(open);
    if (type == REDISMODULE_KEYTYPE_HASH || type == REDISMODULE_KEYTYPE_EMPTY) {
        /* the first three pairs in one call (the list ends at the first NULL name),
         * any more a call each */
        RedisModuleString *first[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
        for (size_t i = 0; i < nstrings && i < 6; i++) first[i] = pairs[i];
        RedisModule_HashSet(open, REDISMODULE_HASH_NONE, first[0], first[1], first[2], first[3],
                            first[4], first[5], NULL);
        for (size_t i = 6; i + 1 < nstrings; i += 2)
            RedisModule_HashSet(open, REDISMODULE_HASH_NONE, pairs[i], pairs[i + 1], NULL);
        RedisModule_Replicate(queue->ctx, "HSET", "sv", key, pairs, nstrings);
    }
    RedisModule_CloseKey(open);
}

/* ZADD key score member through the key API, replicated as the ZADD it is; nothing
 * when key holds another type */
void zadd_one(Queue *queue, Str key, long long score, Str score_text, RedisModuleString *member) {
    RedisModuleCtx *ctx = queue->ctx;
    RedisModuleString *name = mkstr(ctx, key);
    RedisModuleKey *open = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    if (!open) return;
    int type = RedisModule_KeyType(open);
    if (type == REDISMODULE_KEYTYPE_ZSET || type == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_ZsetAdd(open, (double)score, member, NULL);
        RedisModule_Replicate(ctx, "ZADD", "sbs", name, score_text.ptr, score_text.len, member);
    }
    RedisModule_CloseKey(open);
}

/* ZCARD through the key API, as retention() reads: 0 for no key (or not a sorted set,
 * where ZCARD's error would count as none too) */
long long zcard(Queue *queue, Str key) {
    RedisModuleKey *open =
        RedisModule_OpenKey(queue->ctx, mkstr(queue->ctx, key), REDISMODULE_READ);
    if (!open) return 0;
    long long n = RedisModule_KeyType(open) == REDISMODULE_KEYTYPE_ZSET
                      ? (long long)RedisModule_ValueLength(open)
                      : 0;
    RedisModule_CloseKey(open);
    return n;
}

/* ---- the token fence: HMGET state attempts <extra...> ---- */

/* 1 and the row's fields (state, attempts, then the three extra FIELD_* indexes) when
 * fenced; 0 when a refusal has been sent. *row_string (when not NULL): the row's name
 * as a string */
int fenced(Queue *queue, Str row, Str token, int extra1, int extra2, int extra3, Str *fields,
           RedisModuleString **row_string) {
    const int wanted[] = {FIELD_STATE, FIELD_ATTEMPTS, extra1, extra2, extra3, FIELD_PARENT,
                          FIELD_CHILDREN};
    RedisModuleString *made = hmget(queue, row, 7, wanted, fields);
    if (row_string) *row_string = made;
    Str state = fields[0], attempts = fields[1];
    /* a kept completed row is no job to settle: gone, as a deleted row */
    if (!state.ptr || str_eq_c(state, "completed")) {
        RedisModule_ReplyWithLongLong(queue->ctx, -1);
        return 0;
    }
    if (!str_eq_c(state, "active") || !str_eq(attempts, token)) {
        Str message = cat3(queue, str_c("EMQSTALE token "), token, str_c(" is not current"));
        RedisModule_ReplyWithError(queue->ctx, message.ptr);
        return 0;
    }
    return 1;
}

/* ---- events ---- */

/* an event, as the script publishes it. Outside a cluster a PUBLISH, done as the
 * command does it through the key-less API (no command dispatch): the message to this
 * node's subscribers, then to the replicas (never to the AOF), as PUBLISH propagates
 * itself. In a cluster the scripts run in their sharded form (SPUBLISH: the queue's
 * shard alone hears it, where a PUBLISH would go to every node), and so does this: the
 * command, which propagates itself to the shard. */
void emit(Queue *queue, Str json) {
    RedisModuleCtx *ctx = queue->ctx;
    if (!queue->events) queue->events = mkstr(ctx, queue_key(queue, EMQ_K_EVENTS));
    RedisModuleString *message = mkstr(ctx, json);
    if (in_cluster) {
        RedisModule_Call(ctx, "SPUBLISH", "!ss", queue->events, message);
        return;
    }
    RedisModule_PublishMessage(ctx, queue->events, message);
    RedisModule_Replicate(ctx, "PUBLISH", "ssA", queue->events, message);
}

/* {"event":"<event>","job":"<id>"} */
Str event_json(Queue *queue, const char *event, Str id) {
    Str head = cat3(queue, str_c("{\"event\":\""), str_c(event), str_c("\",\"job\":\""));
    return cat3(queue, head, id, str_c("\"}"));
}

/* ---- JSON text as lua-cjson writes it ---- */

Str json_str(Queue *queue, Str text) {
    char *out = RedisModule_PoolAlloc(queue->ctx, text.len * 6 + 3);
    size_t at = 0;
    out[at++] = '"';
    for (size_t i = 0; i < text.len; i++) {
        unsigned char ch = (unsigned char)text.ptr[i];
        const char *escape = NULL;
        switch (ch) {
        case '"': escape = "\\\""; break;
        case '\\': escape = "\\\\"; break;
        case '/': escape = "\\/"; break;
        case '\b': escape = "\\b"; break;
        case '\t': escape = "\\t"; break;
        case '\n': escape = "\\n"; break;
        case '\f': escape = "\\f"; break;
        case '\r': escape = "\\r"; break;
        default: break;
        }
        if (escape) {
            size_t len = strlen(escape);
            memcpy(out + at, escape, len);
            at += len;
        } else if (ch < 0x20 || ch == 0x7f) {
            at += (size_t)snprintf(out + at, 7, "\\u%04x", ch);
        } else {
            out[at++] = (char)ch;
        }
    }
    out[at++] = '"';
    Str json = {out, at};
    return json;
}

/* lib/audit.lua: one entry in the capped operator journal emq:{q}:audit */
void audit(Queue *queue, const char *verb, Str args, const char *outcome, long long count,
           Str actor) {
    Str journal = queue_key(queue, EMQ_K_AUDIT), counted = num14(queue, (double)count);
    if (!actor.ptr) actor = str_c("");
    RedisModule_Call(queue->ctx, "XADD", "!bcccccccbcccbcb", journal.ptr, journal.len, "MAXLEN",
                     "~", "10000", "*", "verb", verb, "args", args.ptr, args.len, "outcome",
                     outcome, "count", counted.ptr, counted.len, "actor", actor.ptr, actor.len);
}
