/* The lanes and their ring (lib/common.lua's helpers, call for call): the wake list,
 * whether a group can be served, and the ring's upkeep when a lane grows or a job of a
 * group settles. */
#include "echomq.h"

/* up to count wake-ups on the wake list, which holds at most WAKE_CAP */
void push_wake(Queue *queue, long long count) {
    Str wake = queue_key(queue, EMQ_K_WAKE);
    long long room =
        WAKE_CAP - reply_int(RedisModule_Call(queue->ctx, "LLEN", "!b", wake.ptr, wake.len));
    if (count > room) count = room;
    if (count > 0) {
        RedisModuleString *one = RedisModule_CreateString(queue->ctx, "1", 1);
        RedisModuleString *ones[WAKE_CAP];
        for (long long i = 0; i < count; i++) ones[i] = one;
        RedisModule_Call(queue->ctx, "RPUSH", "!bv", wake.ptr, wake.len, ones, (size_t)count);
    }
}

/* lib/common.lua's cap_freed: under a concurrency cap (meta `concurrency`) a wake token
 * per slot an ending frees, for the workers the cap held back */
void cap_freed(Queue *queue, long long count) {
    /* read through the key API: no command dispatched for the (usual) answer "none" */
    static const int FIELDS[] = {FIELD_CONCURRENCY};
    Str cap;
    hmget(queue, queue_key(queue, EMQ_K_META), 1, FIELDS, &cap);
    if (cap.ptr) push_wake(queue, count);
}

/* the group's lane has jobs, the group is not paused and is under its limit */
int serveable(Queue *queue, Str group) {
    RedisModuleCtx *ctx = queue->ctx;
    Str lane = lane_key(queue, group), paused = queue_key(queue, EMQ_K_GPAUSED),
        limits = queue_key(queue, EMQ_K_GLIMIT);
    if (reply_int(RedisModule_Call(ctx, "ZCARD", "!b", lane.ptr, lane.len)) == 0) return 0;
    if (reply_int(RedisModule_Call(ctx, "SISMEMBER", "!bb", paused.ptr, paused.len, group.ptr,
                                   group.len)) == 1)
        return 0;
    /* held off the ring by its rate limit or a handler's block (lib/limits.lua) */
    Str held = queue_key(queue, EMQ_K_GWAIT);
    if (!reply_is_nil(
            RedisModule_Call(ctx, "ZSCORE", "!bb", held.ptr, held.len, group.ptr, group.len)))
        return 0;
    Str limit = reply_str(
        RedisModule_Call(ctx, "HGET", "!bb", limits.ptr, limits.len, group.ptr, group.len));
    if (limit.ptr) {
        Str actives = queue_key(queue, EMQ_K_GACTIVE);
        Str active = reply_str(
            RedisModule_Call(ctx, "HGET", "!bb", actives.ptr, actives.len, group.ptr, group.len));
        double in_hand = 0, most = 0;
        if (active.ptr) tonum(active, &in_hand);
        tonum(limit, &most);
        if (in_hand >= most) return 0;
    }
    return 1;
}

/* forget a group that holds nothing any more */
void prune_group(Queue *queue, Str group) {
    RedisModuleCtx *ctx = queue->ctx;
    Str lane = lane_key(queue, group), actives = queue_key(queue, EMQ_K_GACTIVE),
        limits = queue_key(queue, EMQ_K_GLIMIT), weights = queue_key(queue, EMQ_K_GWEIGHT),
        paused = queue_key(queue, EMQ_K_GPAUSED), groups = queue_key(queue, EMQ_K_GROUPS),
        rates = queue_key(queue, EMQ_K_GRATE), held = queue_key(queue, EMQ_K_GWAIT);
    if (reply_int(RedisModule_Call(ctx, "EXISTS", "!b", lane.ptr, lane.len)) == 0 &&
        reply_is_nil(RedisModule_Call(ctx, "HGET", "!bb", actives.ptr, actives.len, group.ptr,
                                      group.len)) &&
        reply_int(RedisModule_Call(ctx, "HEXISTS", "!bb", limits.ptr, limits.len, group.ptr,
                                   group.len)) == 0 &&
        reply_int(RedisModule_Call(ctx, "HEXISTS", "!bb", weights.ptr, weights.len, group.ptr,
                                   group.len)) == 0 &&
        reply_int(RedisModule_Call(ctx, "SISMEMBER", "!bb", paused.ptr, paused.len, group.ptr,
                                   group.len)) == 0 &&
        reply_int(RedisModule_Call(ctx, "HEXISTS", "!bb", rates.ptr, rates.len, group.ptr,
                                   group.len)) == 0 &&
        reply_is_nil(
            RedisModule_Call(ctx, "ZSCORE", "!bb", held.ptr, held.len, group.ptr, group.len)))
        RedisModule_Call(ctx, "SREM", "!bb", groups.ptr, groups.len, group.ptr, group.len);
}

/* the group on the ring when serveable, off it (and pruned) when not */
void ring_sync(Queue *queue, Str group, int quiet) {
    RedisModuleCtx *ctx = queue->ctx;
    Str ring = queue_key(queue, EMQ_K_RING);
    int on_ring = !reply_is_nil(
        RedisModule_Call(ctx, "LPOS", "!bb", ring.ptr, ring.len, group.ptr, group.len));
    if (serveable(queue, group)) {
        if (!on_ring) {
            RedisModule_Call(ctx, "RPUSH", "!bb", ring.ptr, ring.len, group.ptr, group.len);
            if (!quiet) push_wake(queue, 1);
        }
    } else {
        if (on_ring) {
            Str turns = queue_key(queue, EMQ_K_GTURN);
            RedisModule_Call(ctx, "LREM", "!bcb", ring.ptr, ring.len, "0", group.ptr, group.len);
            RedisModule_Call(ctx, "HDEL", "!bb", turns.ptr, turns.len, group.ptr, group.len);
        }
        prune_group(queue, group);
    }
}

/* a job of the group left its hands: one fewer active, back on the ring when the group
 * was at its limit */
void give_back(Queue *queue, Str group, int quiet) {
    RedisModuleCtx *ctx = queue->ctx;
    Str actives = queue_key(queue, EMQ_K_GACTIVE);
    long long left = reply_int(RedisModule_Call(ctx, "HINCRBY", "!bbc", actives.ptr,
                                                actives.len, group.ptr, group.len, "-1"));
    if (left <= 0) {
        RedisModule_Call(ctx, "HDEL", "!bb", actives.ptr, actives.len, group.ptr, group.len);
        prune_group(queue, group);
    }
    if (left < 0) {
        ring_sync(queue, group, 0);
        return;
    }
    if (!serveable(queue, group)) return;
    Str limits = queue_key(queue, EMQ_K_GLIMIT);
    Str limit = reply_str(
        RedisModule_Call(ctx, "HGET", "!bb", limits.ptr, limits.len, group.ptr, group.len));
    double most = 0;
    if (limit.ptr && tonum(limit, &most) && (double)(left + 1) >= most) {
        Str ring = queue_key(queue, EMQ_K_RING);
        RedisModule_Call(ctx, "RPUSH", "!bb", ring.ptr, ring.len, group.ptr, group.len);
        if (!quiet) push_wake(queue, 1);
    }
}

/* the lane had `before` jobs and grew: an empty lane's group joins the ring */
void lane_grew(Queue *queue, Str group, long long before, int quiet) {
    if (before == 0 && serveable(queue, group)) {
        Str ring = queue_key(queue, EMQ_K_RING);
        RedisModule_Call(queue->ctx, "RPUSH", "!bb", ring.ptr, ring.len, group.ptr, group.len);
        if (!quiet) push_wake(queue, 1);
    }
}
