/* Settled jobs: the batched sorted-set writes, tombstones, row deletion, metrics, and
 * the opt-in history of lib/history.lua (retention, the transitions' trim, the error
 * history of a kept row). */
#include "echomq.h"

/* lib/common.lua's zadd_desc: one ZADD of the nstrings/2 pairs score, member in pairs, the
 * last pair first (the array is reversed in place), SLICE pairs a call. A batch's
 * members come in ascending order and a small sorted set is a listpack, placed by a scan
 * from the head: last-first, each lands at the head. The set written is the same. */
void zadd_desc(Queue *queue, Str key, RedisModuleString **pairs, size_t nstrings) {
    for (size_t i = 0, j = nstrings - 2; nstrings >= 4 && i < j; i += 2, j -= 2) {
        RedisModuleString *score = pairs[i], *member = pairs[i + 1];
        pairs[i] = pairs[j];
        pairs[i + 1] = pairs[j + 1];
        pairs[j] = score;
        pairs[j + 1] = member;
    }
    for (size_t i = 0; i < nstrings; i += 2 * SLICE)
        RedisModule_Call(queue->ctx, "ZADD", "!bv", key.ptr, key.len, pairs + i,
                         nstrings - i < 2 * SLICE ? nstrings - i : 2 * SLICE);
}

void zrem_all(Queue *queue, Str key, RedisModuleString **ids, size_t count) {
    for (size_t i = 0; i < count; i += SLICE)
        RedisModule_Call(queue->ctx, "ZREM", "!bv", key.ptr, key.len, ids + i,
                         count - i < SLICE ? count - i : SLICE);
}

/* the members of an id list reply, as strings */
static RedisModuleString **strings_of(Queue *queue, Reply *list, size_t count) {
    RedisModuleString **out = RedisModule_PoolAlloc(queue->ctx, sizeof(*out) * count);
    for (size_t i = 0; i < count; i++)
        out[i] = mkstr(queue->ctx, reply_str(reply_elem(list, i)));
    return out;
}

/* "(" .. ms: a score range's exclusive bound */
static Str before_ms(Queue *queue, double ms) {
    return cat3(queue, str_c("("), num14(queue, ms), NONE);
}

void trim_before(Queue *queue, Str key, double cut, long long k) {
    RedisModuleCtx *ctx = queue->ctx;
    Str upto = before_ms(queue, cut);
    long long due = reply_int(RedisModule_Call(ctx, "ZCOUNT", "!bcb", key.ptr, key.len, "-inf",
                                               upto.ptr, upto.len));
    if (due <= 0) return;
    Str last = num14(queue, (double)((due < k ? due : k) - 1));
    RedisModule_Call(ctx, "ZREMRANGEBYRANK", "!bcb", key.ptr, key.len, "0", last.ptr, last.len);
}

/* a tombstone for each of the count ids, stamped now; made: the ids as strings already
 * (NULL: made here); then the expired ones trimmed, 2 * count + 8 at most */
void tombstones(Queue *queue, Str *ids, RedisModuleString **made, size_t count,
                long long now) {
    RedisModuleCtx *ctx = queue->ctx;
    Str settled = queue_key(queue, EMQ_K_SETTLED);
    RedisModuleString *score = mkstr(ctx, num(queue, (double)now));
    RedisModuleString **pairs = RedisModule_PoolAlloc(ctx, sizeof(*pairs) * 2 * count);
    for (size_t i = 0; i < count; i++) {
        pairs[2 * i] = score;
        pairs[2 * i + 1] = made ? made[i] : mkstr(ctx, ids[i]);
    }
    zadd_desc(queue, settled, pairs, 2 * count);
    trim_before(queue, settled, (double)(now - SETTLED_MS), 2 * (long long)count + 8);
}

int settled_recently(Queue *queue, Str id, long long now) {
    Str settled = queue_key(queue, EMQ_K_SETTLED);
    Str score = reply_str(
        RedisModule_Call(queue->ctx, "ZSCORE", "!bb", settled.ptr, settled.len, id.ptr, id.len));
    double at;
    return score.ptr && tonum(score, &at) && at >= (double)(now - SETTLED_MS);
}

/* lib/common's make_ready: a job (row) in the ready backlog at score, its lane when
 * grouped (with the lanes' index and the groups set; an empty lane joins the ring,
 * quietly), else pending. The caller pushes the wake token */
void make_ready(Queue *queue, Str id, Str row, Str group, Str score) {
    RedisModuleCtx *ctx = queue->ctx;
    RedisModule_Call(ctx, "HSET", "!bcc", row.ptr, row.len, EMQ_F_STATE, "pending");
    if (group.ptr) {
        Str lane = lane_key(queue, group), index = queue_key(queue, EMQ_K_GINDEX),
            groups = queue_key(queue, EMQ_K_GROUPS);
        long long before = reply_int(RedisModule_Call(ctx, "ZCARD", "!b", lane.ptr, lane.len));
        RedisModule_Call(ctx, "ZADD", "!bbb", lane.ptr, lane.len, score.ptr, score.len, id.ptr,
                         id.len);
        RedisModule_Call(ctx, "ZADD", "!bbb", index.ptr, index.len, score.ptr, score.len, id.ptr,
                         id.len);
        RedisModule_Call(ctx, "SADD", "!bb", groups.ptr, groups.len, group.ptr, group.len);
        lane_grew(queue, group, before, 1);
    } else {
        Str pending = queue_key(queue, EMQ_K_PENDING);
        RedisModule_Call(ctx, "ZADD", "!bbb", pending.ptr, pending.len, score.ptr, score.len,
                         id.ptr, id.len);
    }
}

/* lib/common's unhold: a keep_last job held in the schedule (at EMQ_DEDUP_HOLD) behind a
 * running job is let go: ready at its run_score, as promote would make it */
void unhold(Queue *queue, Str held) {
    RedisModuleCtx *ctx = queue->ctx;
    Str row = job_key(queue, held), schedule = queue_key(queue, EMQ_K_SCHEDULE);
    Reply *fields = RedisModule_Call(ctx, "HMGET", "!bccc", row.ptr, row.len, EMQ_F_GROUP,
                                     EMQ_F_PRIORITY, EMQ_F_SEQ);
    Str group = reply_str(reply_elem(fields, 0));
    double seq = 0;
    if (!tonum(reply_str(reply_elem(fields, 2)), &seq)) seq = 0;
    Str score = num(queue, run_score(reply_str(reply_elem(fields, 1)), seq));
    RedisModule_Call(ctx, "ZREM", "!bb", schedule.ptr, schedule.len, held.ptr, held.len);
    RedisModule_Call(ctx, "HDEL", "!bc", row.ptr, row.len, EMQ_F_DEDUP_BEHIND);
    make_ready(queue, held, row, group, score);
    push_wake(queue, 1);
    emit(queue, event_json(queue, "promoted", held));
}

/* lib/common's release_dedup: an ending of job id deletes its dedup key when it still
 * names id, unless the key has a TTL (a throttle window); a held keep_last job hands it
 * back to the running job it waited behind; a keep_last job the key names that is held
 * behind id is let go instead */
void release_dedup(Queue *queue, Str id, Str dedup) {
    RedisModuleCtx *ctx = queue->ctx;
    Str key = cat3(queue, queue->base, str_c(EMQ_K_DEDUP), dedup);
    Str holder = reply_str(RedisModule_Call(ctx, "GET", "!b", key.ptr, key.len));
    if (str_eq(holder, id)) {
        if (reply_int(RedisModule_Call(ctx, "PTTL", "!b", key.ptr, key.len)) >= 0) return;
        Str row = job_key(queue, id);
        Str owner = reply_str(
            RedisModule_Call(ctx, "HGET", "!bc", row.ptr, row.len, EMQ_F_DEDUP_BEHIND));
        Str owner_row = owner.ptr ? job_key(queue, owner) : NONE;
        if (owner.ptr &&
            reply_int(RedisModule_Call(ctx, "EXISTS", "!b", owner_row.ptr, owner_row.len)) == 1)
            RedisModule_Call(ctx, "SET", "!bb", key.ptr, key.len, owner.ptr, owner.len);
        else
            RedisModule_Call(ctx, "DEL", "!b", key.ptr, key.len);
    } else if (holder.ptr) {
        Str row = job_key(queue, holder);
        Str behind = reply_str(
            RedisModule_Call(ctx, "HGET", "!bc", row.ptr, row.len, EMQ_F_DEDUP_BEHIND));
        if (str_eq(behind, id)) unhold(queue, holder);
    }
}

/* delete a row with its logs (lines and their times), lock and error history; release
 * its dedup key if it still names it; a flow parent's row (kids: it has `children`)
 * also its :deps, :kids and :kidfails */
void delete_row(Queue *queue, Str id, Str row, Str dedup, int kids) {
    if (dedup.ptr) release_dedup(queue, id, dedup);
    Str logs = row_key(queue, row, EMQ_K_LOGS), lock = row_key(queue, row, EMQ_K_LOCK);
    Str errors = row_key(queue, row, EMQ_K_ERRORS), times = row_key(queue, row, EMQ_K_LOGTIMES);
    if (kids) {
        Str deps = row_key(queue, row, EMQ_K_DEPS), results = row_key(queue, row, EMQ_K_KIDS),
            fails = row_key(queue, row, EMQ_K_KIDFAILS);
        RedisModule_Call(queue->ctx, "DEL", "!bbbbbbbb", row.ptr, row.len, logs.ptr, logs.len,
                         lock.ptr, lock.len, errors.ptr, errors.len, times.ptr, times.len,
                         deps.ptr, deps.len, results.ptr, results.len, fails.ptr, fails.len);
        return;
    }
    RedisModule_Call(queue->ctx, "DEL", "!bbbbb", row.ptr, row.len, logs.ptr, logs.len, lock.ptr,
                     lock.len, errors.ptr, errors.len, times.ptr, times.len);
}

/* a job id's mint time (ids.py: the top 41 bits of the 63-bit snowflake, ms since the
 * ids' epoch), from its first 8 digits as lib/series' id_ms reads it (the last 3 weigh
 * under 0.06 ms), in a double */
static double id_ms(Str id) {
    double v = 0;
    for (size_t i = 3; i < 11 && i < id.len; i++) {
        int c = (unsigned char)id.ptr[i];
        c = c <= '9' ? c - '0' : c <= 'Z' ? c - 'A' + 10 : c - 'a' + 36;
        v = v * 62 + c;
    }
    return floor(v * 238328 / 4194304.0) + 1704067200000.0;
}

/* lib/series' job_times: an ending job's wait (enqueue, a kept row's enqueued_at or else
 * its id's time, to its first start; at most EMQ_HIST_KEEP_MS) and run (last start to now),
 * in ms; 0 and 0 for a row with no start time */
void job_times(Str id, Str started, Str last, Str enqueued, long long now, double *wait,
               double *run) {
    double s = 0, l = 0, e = 0;
    *wait = 0;
    *run = 0;
    if (!tonum(started, &s)) return;
    if (!tonum(enqueued, &e)) e = id_ms(id);
    if (!tonum(last, &l)) l = s;
    *wait = s - e > 0 ? s - e : 0;
    if (*wait > (double)EMQ_HIST_KEEP_MS) *wait = (double)EMQ_HIST_KEEP_MS;
    *run = (double)now - l > 0 ? (double)now - l : 0;
}

/* the ending's fields lib/series' job_times reads, from the row (key API) */
void row_times(Queue *queue, Str id, Str row, long long now, double *wait, double *run) {
    static const int FIELDS[] = {FIELD_STARTED_AT, FIELD_LAST_STARTED_AT, FIELD_ENQUEUED_AT};
    Str times[3];
    hmget(queue, row, 3, FIELDS, times);
    job_times(id, times[0], times[1], times[2], now, wait, run);
}

/* lib/series' count_metric: count jobs that ended now (metric_key: EMQ_K_METRICS_*) with
 * their summed wait and run: the metric's total and the minute's slot of the queue-hour's
 * history key (its expiry on its first write); lanes (grouped endings: each its jobs,
 * wait and run) in the same key's busiest lanes' table, by the same BITFIELD */
void count_metric(Queue *queue, const char *metric_key, long long count, long long now,
                  double wait, double run, const LaneEnd *lanes, size_t nlanes) {
    RedisModuleCtx *ctx = queue->ctx;
    Str key = queue_key(queue, metric_key);
    Str count_text = num14(queue, (double)count);
    RedisModule_Call(ctx, "HINCRBY", "!bcb", key.ptr, key.len, "count", count_text.ptr,
                     count_text.len);
    long long hour = now / 3600000;
    long long at = (now / 60000) % 60 * EMQ_HIST_SLOT_BITS;
    int completed = strcmp(metric_key, EMQ_K_METRICS_COMPLETED) == 0;
    Str hist = queue_key(queue, EMQ_K_HIST);
    hist = cat3(queue, hist, num(queue, (double)hour), NONE);
    double units = floor((wait + EMQ_HIST_WAIT_UNIT_MS / 2.0) / (double)EMQ_HIST_WAIT_UNIT_MS);
    Str col_at = num(queue, (double)(at + (completed ? EMQ_HIST_COMPLETED_AT : EMQ_HIST_DEAD_AT))),
        wait_at = num(queue, (double)(at + EMQ_HIST_WAIT_AT)),
        run_at = num(queue, (double)(at + EMQ_HIST_RUN_MS_AT)), units_text = num(queue, units),
        run_text = num(queue, run), mark = num(queue, (double)EMQ_HIST_MARK);
    RedisModuleString **ops = NULL;
    size_t nops = 0;
    if (nlanes > 0) {
        ops = RedisModule_PoolAlloc(ctx, sizeof(*ops) * 20 * nlanes);
        nops = lane_ops(queue, hist, ops, lanes, nlanes, !completed, now);
    }
    RedisModuleCallReply *r = RedisModule_Call(
        ctx, "BITFIELD", "!bccccbbccbbccbbccbcv", hist.ptr, hist.len, "OVERFLOW", "SAT",
        "INCRBY", completed ? EMQ_HIST_COMPLETED_T : EMQ_HIST_DEAD_T, col_at.ptr, col_at.len,
        count_text.ptr, count_text.len, "INCRBY", EMQ_HIST_WAIT_T, wait_at.ptr, wait_at.len,
        units_text.ptr, units_text.len, "INCRBY", EMQ_HIST_RUN_MS_T, run_at.ptr, run_at.len,
        run_text.ptr, run_text.len, "SET", "u1", mark.ptr, mark.len, "1", ops, nops);
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY &&
        RedisModule_CallReplyLength(r) == 4 + nops / 4 &&
        RedisModule_CallReplyInteger(RedisModule_CallReplyArrayElement(r, 3)) == 0) {
        Str until = num(queue, (double)((hour + 1) * 3600000 + EMQ_HIST_KEEP_MS));
        RedisModule_Call(ctx, "PEXPIREAT", "!bb", hist.ptr, hist.len, until.ptr, until.len);
    }
}

/* ---- lib/history.lua: the opt-in history ---- */

/* the queue's retention of its completed set (completed = 1) or its dead set; read
 * through the key API (OpenKey, HashGet): a read needs no replication, and the hot path
 * of a kept completion skips a command's dispatch for it (HMGET's answer) */
Retention retention(Queue *queue, int completed) {
    Retention out = {0, 0, 0, 0};
    RedisModuleKey *meta = RedisModule_OpenKey(
        queue->ctx, mkstr(queue->ctx, queue_key(queue, EMQ_K_META)), REDISMODULE_READ);
    if (!meta) return out;
    if (RedisModule_KeyType(meta) == REDISMODULE_KEYTYPE_HASH) {
        RedisModuleString *count_field =
            field_name[completed ? FIELD_KEEP_COMPLETED : FIELD_KEEP_DEAD];
        RedisModuleString *age_field =
            field_name[completed ? FIELD_KEEP_COMPLETED_MS : FIELD_KEEP_DEAD_MS];
        RedisModuleString *count = NULL, *age = NULL;
        RedisModule_HashGet(meta, REDISMODULE_HASH_NONE, count_field, &count, age_field, &age,
                            NULL);
        if (count) out.has_count = tonum(str_of(count), &out.count);
        if (age) out.has_age = tonum(str_of(age), &out.age);
    }
    RedisModule_CloseKey(meta);
    return out;
}

/* lib/history.lua's trim_settled: the keys to delete in one DEL, the jobs dropped, those
 * of them that settled less than SETTLED_MS ago (tombstoned, stamped now) */
typedef struct {
    Queue *queue;
    Str setkey;
    int completed; /* the completed set: keys collected; dead: delete_row per job */
    int flows;     /* completed: a kept flow parent completed here (flowkept); -1 unread */
    RedisModuleString **keys;
    size_t nkeys, keys_cap;
    Str *fresh;
    size_t nfresh, fresh_cap;
    long long gone;
} Trim;

static void trim_key(Trim *trim, Str key) {
    if (trim->nkeys == trim->keys_cap) {
        size_t cap = trim->keys_cap ? trim->keys_cap * 2 : 16;
        RedisModuleString **grown = RedisModule_PoolAlloc(trim->queue->ctx, sizeof(*grown) * cap);
        if (trim->nkeys) memcpy(grown, trim->keys, sizeof(*grown) * trim->nkeys);
        trim->keys = grown;
        trim->keys_cap = cap;
    }
    trim->keys[trim->nkeys++] = RedisModule_CreateString(trim->queue->ctx, key.ptr, key.len);
}

static void trim_fresh(Trim *trim, Str id) {
    if (trim->nfresh == trim->fresh_cap) {
        size_t cap = trim->fresh_cap ? trim->fresh_cap * 2 : 16;
        Str *grown = RedisModule_PoolAlloc(trim->queue->ctx, sizeof(*grown) * cap);
        if (trim->nfresh) memcpy(grown, trim->fresh, sizeof(*grown) * trim->nfresh);
        trim->fresh = grown;
        trim->fresh_cap = cap;
    }
    trim->fresh[trim->nfresh++] = id;
}

static void trim_flush(Trim *trim) {
    RedisModuleCtx *ctx = trim->queue->ctx;
    if (trim->nkeys == 1) { /* a kept completion's lock alone: no command to dispatch */
        RedisModuleKey *open = RedisModule_OpenKey(ctx, trim->keys[0], REDISMODULE_WRITE);
        if (open && RedisModule_KeyType(open) != REDISMODULE_KEYTYPE_EMPTY) {
            RedisModule_DeleteKey(open);
            /* replicated as the DEL it stands for; DEL of no key propagates nothing */
            RedisModule_Replicate(ctx, "DEL", "s", trim->keys[0]);
        }
        if (open) RedisModule_CloseKey(open);
    } else if (trim->nkeys > 1) {
        RedisModule_Call(ctx, "DEL", "!v", trim->keys, trim->nkeys);
    }
    trim->nkeys = 0;
}

/* drop the jobs of an id list reply, oldest first; the last `young` of them leave a
 * tombstone, or, when `settled_at` is not NULL, those whose ZMSCORE entry is at or
 * after `recent`; returns how many */
static size_t trim_drop(Trim *trim, Reply *ids, size_t young, Reply *settled_at, double recent) {
    Queue *queue = trim->queue;
    RedisModuleCtx *ctx = queue->ctx;
    size_t n = reply_len(ids);
    if (n == 0) return 0;
    RedisModuleString **dropped = RedisModule_PoolAlloc(ctx, sizeof(*dropped) * n);
    for (size_t i = 0; i < n; i++) {
        Str id = reply_str(reply_elem(ids, i)), row = job_key(queue, id);
        int is_young;
        if (settled_at) {
            Str at = reply_str(reply_elem(settled_at, i));
            double when;
            is_young = at.ptr && tonum(at, &when) && when >= recent;
        } else {
            is_young = i + young >= n;
        }
        if (is_young) trim_fresh(trim, id);
        if (trim->completed) {
            trim_key(trim, row);
            trim_key(trim, row_key(queue, row, EMQ_K_LOGS));
            trim_key(trim, row_key(queue, row, EMQ_K_LOCK));
            trim_key(trim, row_key(queue, row, EMQ_K_ERRORS));
            trim_key(trim, row_key(queue, row, EMQ_K_LOGTIMES));
            /* a kept flow parent's children's results go with it: looked for only in a
             * queue where one completed (flowkept), by the row's `children` */
            if (trim->flows < 0) {
                Str flag = queue_key(queue, EMQ_K_FLOWKEPT);
                trim->flows =
                    reply_int(RedisModule_Call(ctx, "EXISTS", "!b", flag.ptr, flag.len)) == 1;
            }
            if (trim->flows && reply_int(RedisModule_Call(ctx, "HEXISTS", "!bc", row.ptr, row.len,
                                                          EMQ_F_CHILDREN)) == 1) {
                trim_key(trim, row_key(queue, row, EMQ_K_DEPS));
                trim_key(trim, row_key(queue, row, EMQ_K_KIDS));
                trim_key(trim, row_key(queue, row, EMQ_K_KIDFAILS));
            }
            if (trim->nkeys >= 1000) trim_flush(trim);
        } else {
            /* lib/common's delete_row reads the row's dedup and children fields when not
             * handed them (a dead flow parent's :deps/:kids/:kidfails go with it) */
            Reply *f = RedisModule_Call(ctx, "HMGET", "!bcc", row.ptr, row.len, EMQ_F_DEDUP,
                                        EMQ_F_CHILDREN);
            delete_row(queue, id, row, reply_str(reply_elem(f, 0)),
                       reply_str(reply_elem(f, 1)).ptr != NULL);
        }
        dropped[i] = RedisModule_CreateString(ctx, id.ptr, id.len);
    }
    RedisModule_Call(ctx, "ZREM", "!bv", trim->setkey.ptr, trim->setkey.len, dropped, n);
    trim->gone += (long long)n;
    return n;
}

/* of the oldest members of the set in ids, how many settled less than SETTLED_MS ago */
static size_t young_of(Trim *trim, Reply *ids, long long now) {
    size_t oldest = reply_len(ids);
    if (oldest == 0) return 0;
    Str upto = before_ms(trim->queue, (double)(now - SETTLED_MS));
    long long old = reply_int(RedisModule_Call(trim->queue->ctx, "ZCOUNT", "!bcb",
                                               trim->setkey.ptr, trim->setkey.len, "-inf",
                                               upto.ptr, upto.len));
    return (long long)oldest > old ? oldest - (size_t)old : 0;
}

/* the jobs past the count, in batches of b (see lib/history.lua) */
static void trim_by_count(Trim *trim, Retention limits, long long now, int step) {
    double over = (double)zcard(trim->queue, trim->setkey) - limits.count;
    if (over <= 0) return;
    double batch = floor(limits.count / 16);
    if (batch < 1) batch = 1;
    if (batch > 32) batch = 32;
    Str last = num(trim->queue, (over < step ? over : step) + batch - 2);
    Reply *ids = RedisModule_Call(trim->queue->ctx, "ZRANGE", "!bcb", trim->setkey.ptr,
                                  trim->setkey.len, "0", last.ptr, last.len);
    trim_drop(trim, ids, young_of(trim, ids, now), NULL, 0);
}

/* the jobs older than the age */
static void trim_by_age(Trim *trim, Retention limits, long long now, Str step) {
    Str upto = before_ms(trim->queue, (double)now - limits.age);
    Reply *ids = RedisModule_Call(trim->queue->ctx, "ZRANGE", "!bcbcccb", trim->setkey.ptr,
                                  trim->setkey.len, "-inf", upto.ptr, upto.len, "BYSCORE",
                                  "LIMIT", "0", step.ptr, step.len);
    trim_drop(trim, ids, limits.age < SETTLED_MS ? young_of(trim, ids, now) : 0, NULL, 0);
}

/* the jobs whose own keep ran out: index entries go whatever their rows hold (a row
 * removed another way); the index's scores are keep-until times, the finish times are
 * in the set */
static void trim_own_keeps(Trim *trim, long long now, Str step) {
    Queue *queue = trim->queue;
    RedisModuleCtx *ctx = queue->ctx;
    Str keepuntil = queue_key(queue, EMQ_K_KEEPUNTIL), upto = num(queue, (double)now);
    Reply *ids = RedisModule_Call(ctx, "ZRANGE", "!bcbcccb", keepuntil.ptr, keepuntil.len, "-inf",
                                  upto.ptr, upto.len, "BYSCORE", "LIMIT", "0", step.ptr, step.len);
    size_t n = reply_len(ids);
    if (n == 0) return;
    RedisModuleString **members = strings_of(queue, ids, n);
    Reply *at = RedisModule_Call(ctx, "ZMSCORE", "!bv", trim->setkey.ptr, trim->setkey.len,
                                 members, n);
    trim_drop(trim, ids, 0, at, (double)(now - SETTLED_MS));
    RedisModule_Call(ctx, "ZREM", "!bv", keepuntil.ptr, keepuntil.len, members, n);
}

/* the transitions' trim (step <= TRIM_STEP; set_retention's larger step is a script);
 * own: the settled job kept itself (keep_ms), extra: one more key for the one DEL */
long long trim_settled(Queue *queue, Str setkey, Retention limits, int own, long long now,
                       int step, Str extra) {
    Trim trim = {.queue = queue,
                 .setkey = setkey,
                 .completed = str_eq(setkey, queue_key(queue, EMQ_K_COMPLETED)),
                 .flows = -1};
    if (extra.ptr) trim_key(&trim, extra);
    Str step_text = num(queue, step);
    if (limits.has_count && limits.count > 0) trim_by_count(&trim, limits, now, step);
    if (limits.has_age && limits.age > 0) trim_by_age(&trim, limits, now, step_text);
    if (own) trim_own_keeps(&trim, now, step_text);
    trim_flush(&trim);
    if (trim.nfresh > 0) tombstones(queue, trim.fresh, NULL, trim.nfresh, now);
    return trim.gone;
}

/* a kept row's error history: one JSON entry, the list capped at ERRORS_CAP */
void record_error(Queue *queue, Str row, Str attempt, long long now, Str error) {
    Str key = row_key(queue, row, EMQ_K_ERRORS);
    Str json = cat3(queue, str_c("{\"attempt\":"), attempt, str_c(",\"time\":"));
    json = cat3(queue, json, num14(queue, (double)now), str_c(",\"error\":"));
    json = cat3(queue, json, json_str(queue, error), str_c("}"));
    RedisModule_Call(queue->ctx, "RPUSH", "!bb", key.ptr, key.len, json.ptr, json.len);
    Str from = num14(queue, -(double)ERRORS_CAP);
    RedisModule_Call(queue->ctx, "LTRIM", "!bbc", key.ptr, key.len, from.ptr, from.len, "-1");
}
