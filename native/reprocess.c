/* EMQ.REPROCESS 4 row dead pending base id [actor]: reprocess_job.lua's twin, a dead
 * job back to its backlog (its lane when it has a group) at a fresh place in the enqueue
 * sequence. Unlike the script it checks dead membership with a read before its first
 * write. */
#include "echomq.h"

/* the job back in its lane (and the lanes' index) at score, its group known and on the
 * ring */
static void back_to_lane(Queue *queue, Str id, Str group, Str score) {
    RedisModuleCtx *ctx = queue->ctx;
    Str lane = lane_key(queue, group), groups = queue_key(queue, EMQ_K_GROUPS),
        index = queue_key(queue, EMQ_K_GINDEX);
    RedisModule_Call(ctx, "ZADD", "!bbb", lane.ptr, lane.len, score.ptr, score.len, id.ptr,
                     id.len);
    RedisModule_Call(ctx, "ZADD", "!bbb", index.ptr, index.len, score.ptr, score.len, id.ptr,
                     id.len);
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
    /* a fresh place in the enqueue sequence: the back of its priority, a new arrival */
    double seq = (double)(take_seq(&queue, 1) % EMQ_SEQ_SPAN);
    Str seq_text = num(&queue, seq);
    RedisModule_Call(ctx, "HSET", "!bcccb", row.ptr, row.len, EMQ_F_STATE, "pending", EMQ_F_SEQ,
                     seq_text.ptr, seq_text.len);
    Reply *fields =
        RedisModule_Call(ctx, "HMGET", "!bcc", row.ptr, row.len, EMQ_F_GROUP, EMQ_F_PRIORITY);
    Str group = reply_str(reply_elem(fields, 0));
    Str score = num(&queue, run_score(reply_str(reply_elem(fields, 1)), seq));
    if (group.ptr)
        back_to_lane(&queue, id, group, score);
    else
        RedisModule_Call(ctx, "ZADD", "!bbb", pending.ptr, pending.len, score.ptr, score.len,
                         id.ptr, id.len);
    push_wake(&queue, 1);
    emit(&queue, event_json(&queue, "reprocessed", id));
    Str args = cat3(&queue, str_c("{\"job\":"), json_str(&queue, id), str_c("}"));
    audit(&queue, "reprocess_job", args, "ok", 1, arg_at(&line, 1));
    return RedisModule_ReplyWithLongLong(ctx, 1);
}
