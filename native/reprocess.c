/* EMQ.REPROCESS 4 row dead pending base id [actor]: reprocess_job.lua's twin, a dead
 * job back to its backlog (its lane when it has a group). Unlike the script it checks
 * dead membership with a read before its first write. */
#include "echomq.h"

/* the job back in its lane (and the lanes' index), its group known and on the ring */
static void back_to_lane(Queue *queue, Str id, Str group) {
    RedisModuleCtx *ctx = queue->ctx;
    Str lane = lane_key(queue, group), groups = queue_key(queue, EMQ_K_GROUPS),
        index = queue_key(queue, EMQ_K_GINDEX);
    RedisModule_Call(ctx, "ZADD", "!bcb", lane.ptr, lane.len, "0", id.ptr, id.len);
    RedisModule_Call(ctx, "ZADD", "!bcb", index.ptr, index.len, "0", id.ptr, id.len);
    RedisModule_Call(ctx, "SADD", "!bb", groups.ptr, groups.len, group.ptr, group.len);
    ring_sync(queue, group, 1);
}

int cmd_reprocess(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line line;
    if (!line_of(ctx, argv, argc, 4, 4, &line)) return REDISMODULE_OK;
    if (line.nargs < 1) return bad_args(ctx);
    Queue queue = {ctx, str_of(line.keys[3]), NULL};
    Str row = str_of(line.keys[0]), dead = str_of(line.keys[1]),
        pending = str_of(line.keys[2]), id = arg_at(&line, 0);
    if (reply_int(RedisModule_Call(ctx, "EXISTS", "!b", row.ptr, row.len)) == 0)
        return RedisModule_ReplyWithLongLong(ctx, -1);
    /* the check is a read: nothing is written for a job that is not dead */
    if (reply_is_nil(RedisModule_Call(ctx, "ZSCORE", "!bb", dead.ptr, dead.len, id.ptr, id.len)))
        return RedisModule_ReplyWithError(ctx, "EMQSTATE not dead");
    RedisModule_Call(ctx, "ZREM", "!bb", dead.ptr, dead.len, id.ptr, id.len);
    RedisModule_Call(ctx, "HDEL", "!bc", row.ptr, row.len, EMQ_F_LAST_ERROR);
    RedisModule_Call(ctx, "HSET", "!bcc", row.ptr, row.len, EMQ_F_STATE, "pending");
    Str group = reply_str(RedisModule_Call(ctx, "HGET", "!bc", row.ptr, row.len, EMQ_F_GROUP));
    if (group.ptr)
        back_to_lane(&queue, id, group);
    else
        RedisModule_Call(ctx, "ZADD", "!bcb", pending.ptr, pending.len, "0", id.ptr, id.len);
    push_wake(&queue, 1);
    emit(&queue, event_json(&queue, "reprocessed", id));
    Str args = cat3(&queue, str_c("{\"job\":"), json_str(&queue, id), str_c("}"));
    audit(&queue, "reprocess_job", args, "ok", 1, arg_at(&line, 1));
    return RedisModule_ReplyWithLongLong(ctx, 1);
}
