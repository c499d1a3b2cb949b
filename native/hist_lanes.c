/* native/hist_lanes.c: lib/series' busiest lanes' table in the queue-hour's history
 * key (schema.HIST_LANE*): the lane's slot found and its writes made for the BITFIELD
 * that count_metric (history.c) sends. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "echomq.h"

/* lib/series' lane_pat: djb2 of a lane's name, 32 bits, never 0 (an empty slot's) */
static uint32_t lane_hash(Str group) {
    uint32_t h = 5381;
    for (size_t i = 0; i < group.len; i++) h = h * 33 + (unsigned char)group.ptr[i];
    return h ? h : 1;
}

/* lib/series' admission filter (schema.hist_lane_admits): the job id's djb2, mixed by
 * Fibonacci hashing (djb2's low bits are its bytes' sum), under 2^32 / HIST_LANE_ADMIT */
static int lane_admits(Str id) {
    return (uint32_t)(lane_hash(id) * EMQ_HIST_LANE_ADMIT_MIX) < EMQ_HIST_LANE_ADMIT_BELOW;
}

/* a non-negative integer's decimal text as a string (ctx NULL: never freed) */
static RedisModuleString *llstr(RedisModuleCtx *ctx, long long v) {
    char rev[24], out[24];
    int n = 0, len = 0;
    unsigned long long u = v > 0 ? (unsigned long long)v : 0;
    do {
        rev[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n) out[len++] = rev[--n];
    return RedisModule_CreateString(ctx, out, (size_t)len);
}

/* strings made once for the life of the process (no context: never freed) */
static RedisModuleString *forever(const char *text) {
    return RedisModule_CreateString(NULL, text, strlen(text));
}

/* lib/series' lane_ops: the busiest lanes' writes for the hour key (schema.HIST_LANE*),
 * appended to ops (the BITFIELD that counts the minute): the slots' hashes read in
 * place (key API; the scripts' GETRANGE); each lane adds to its slot, else takes the first
 * empty one, else, if its job id admits it (lane_admits), takes over the fewest-ended (the first of equals; the endeds read then, once: one BITFIELD_RO),
 * starting it afresh; a lane taking a slot is ZADDed to lanenames and trims up to 8 names
 * past their age (trim_before). Returns the number of ops written */
size_t lane_ops(Queue *queue, Str hist, RedisModuleString **ops, const LaneEnd *lanes,
                       size_t nlanes, int dead, long long now) {
    static RedisModuleString *gets[3 * EMQ_HIST_LANES], *incrby, *set, *hash_t, *types[4], *zero,
        *one, *hash_at[EMQ_HIST_LANES], *sum_at[4][EMQ_HIST_LANES];
    RedisModuleCtx *ctx = queue->ctx;
    if (!incrby) {
        incrby = forever("INCRBY");
        set = forever("SET");
        zero = forever("0");
        hash_t = forever(EMQ_HIST_LANE_HASH_T);
        const char *names[4] = {EMQ_HIST_LANE_ENDED_T, EMQ_HIST_LANE_DEAD_T,
                                EMQ_HIST_LANE_WAIT_T, EMQ_HIST_LANE_RUN_MS_T};
        for (int t = 0; t < 4; t++) types[t] = forever(names[t]);
        one = forever("1");
        /* every slot's offsets, made once (formatting them per ending costs more) */
        static const long long SUM_AT[4] = {EMQ_HIST_LANE_ENDED_AT, EMQ_HIST_LANE_DEAD_AT,
                                            EMQ_HIST_LANE_WAIT_AT, EMQ_HIST_LANE_RUN_MS_AT};
        for (int i = 0; i < EMQ_HIST_LANES; i++) {
            hash_at[i] = llstr(NULL, EMQ_HIST_LANE_HASH_AT + 32LL * i);
            for (int t = 0; t < 4; t++)
                sum_at[t][i] = llstr(NULL, EMQ_HIST_LANES_AT + i * EMQ_HIST_LANE_BITS + SUM_AT[t]);
        }
        RedisModuleString *get = forever("GET");
        for (int i = 0; i < EMQ_HIST_LANES; i++) {
            gets[3 * i] = get;
            gets[3 * i + 1] = types[0];
            gets[3 * i + 2] = llstr(NULL, EMQ_HIST_LANES_AT + i * EMQ_HIST_LANE_BITS +
                                              EMQ_HIST_LANE_ENDED_AT);
        }
    }
    /* each slot's hash (big-endian, as BITFIELD's u32); all empty for a new key or one
     * of the first layout, which ends before the table */
    long long cur[EMQ_HIST_LANES] = {0};
    RedisModuleKey *open = RedisModule_OpenKey(ctx, mkstr(ctx, hist), REDISMODULE_READ);
    if (open && RedisModule_KeyType(open) == REDISMODULE_KEYTYPE_STRING) {
        /* read in place (the scripts' GETRANGE): no command, no copy */
        size_t len = 0;
        const unsigned char *all = (const unsigned char *)RedisModule_StringDMA(open, &len,
                                                                                REDISMODULE_READ);
        if (all && len >= (size_t)(EMQ_HIST_LANE_HASH_BYTE + 4 * EMQ_HIST_LANES))
            for (int i = 0; i < EMQ_HIST_LANES; i++) {
                const unsigned char *b = all + EMQ_HIST_LANE_HASH_BYTE + 4 * i;
                cur[i] = ((long long)b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
            }
    }
    if (open) RedisModule_CloseKey(open);
    /* the endeds, read only when a lane must take over a slot; until then this call's own
     * changes: fresh slots taken over (their old count gone), delta added */
    long long ended[EMQ_HIST_LANES] = {0}, delta[EMQ_HIST_LANES] = {0};
    int fresh[EMQ_HIST_LANES] = {0}, have_ended = 0;
    Str names = queue_key(queue, EMQ_K_LANENAMES), stamp = num(queue, (double)now);
    size_t n = 0;
    for (size_t k = 0; k < nlanes; k++) {
        long long h = lane_hash(lanes[k].group), m = lanes[k].n;
        int pick = -1, empty = -1;
        for (int i = 0; i < EMQ_HIST_LANES; i++) {
            if (cur[i] == h) {
                pick = i;
                break;
            }
            if (cur[i] == 0 && empty < 0) empty = i;
        }
        /* not admitted: no lane writes, no endings read, no name (the minute counts it) */
        if (pick < 0 && empty < 0 && !lane_admits(lanes[k].id)) continue;
        double units = floor((lanes[k].wait + EMQ_HIST_WAIT_UNIT_MS / 2.0) /
                             (double)EMQ_HIST_WAIT_UNIT_MS);
        RedisModuleString *by = m == 1 ? one : llstr(ctx, m), *wait = llstr(ctx, (long long)units),
                          *run = llstr(ctx, (long long)lanes[k].run);
#define OP(verb, type, off, value)                                                             \
    do {                                                                                       \
        ops[n++] = (verb);                                                                     \
        ops[n++] = (type);                                                                     \
        ops[n++] = (off);                                                                      \
        ops[n++] = (value);                                                                    \
    } while (0)
        if (pick >= 0) {
            OP(incrby, types[0], sum_at[0][pick], by);
            OP(incrby, types[2], sum_at[2][pick], wait);
            OP(incrby, types[3], sum_at[3][pick], run);
            if (dead) OP(incrby, types[1], sum_at[1][pick], by);
            delta[pick] += m;
            /* the count as the server will hold it (saturating), for a later takeover */
            if (have_ended) ended[pick] = ended[pick] + m < 1048575 ? ended[pick] + m : 1048575;
        } else {
            int i = empty;
            if (i < 0) {
                if (!have_ended) {
                    Reply *got = RedisModule_Call(ctx, "BITFIELD_RO", "bv", hist.ptr, hist.len,
                                                  gets, (size_t)(3 * EMQ_HIST_LANES));
                    for (int s = 0; s < EMQ_HIST_LANES; s++) {
                        long long was = 0;
                        if (got && RedisModule_CallReplyType(got) == REDISMODULE_REPLY_ARRAY &&
                            RedisModule_CallReplyLength(got) == EMQ_HIST_LANES)
                            was = RedisModule_CallReplyInteger(
                                RedisModule_CallReplyArrayElement(got, s));
                        long long v = (fresh[s] ? 0 : was) + delta[s];
                        ended[s] = v < 1048575 ? v : 1048575;
                    }
                    have_ended = 1;
                }
                i = 0;
                for (int s = 1; s < EMQ_HIST_LANES; s++)
                    if (ended[s] < ended[i]) i = s;
            }
            OP(set, hash_t, hash_at[i], llstr(ctx, h));
            OP(set, types[0], sum_at[0][i], by);
            OP(set, types[1], sum_at[1][i], dead ? by : zero);
            OP(set, types[2], sum_at[2][i], wait);
            OP(set, types[3], sum_at[3][i], run);
            RedisModule_Call(ctx, "ZADD", "!bbb", names.ptr, names.len, stamp.ptr, stamp.len,
                             lanes[k].group.ptr, lanes[k].group.len);
            /* the names no hour key keeps any longer go, a few per name written: bounded
             * whatever the churn (lib/common trim_before's twin) */
            trim_before(queue, names, (double)(now - EMQ_HIST_KEEP_MS - 3600000LL), 8);
            cur[i] = h;
            fresh[i] = 1;
            delta[i] = m;
            if (have_ended) ended[i] = m < 1048575 ? m : 1048575;
        }
#undef OP
    }
    return n;
}
