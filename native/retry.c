/* EMQ.RETRY 1|2 base [row] id token error delay_ms max_override default_max: retry.lua's
 * twin, a failure recorded; the job scheduled again, or dead when out of attempts. */
#include "echomq.h"

/* dead: the row's state and error, the dead set, its trim, the metric, the event */
static int dead_letter(Queue *queue, Str id, Str row, Str error, int kept, long long now,
                       Str failures, Str id_json, Str error_json, Str parent, Str group) {
    RedisModuleCtx *ctx = queue->ctx;
    Str dead = queue_key(queue, EMQ_K_DEAD), stamp = num(queue, (double)now);
    if (kept)
        RedisModule_Call(ctx, "HSET", "!bcccbcb", row.ptr, row.len, EMQ_F_STATE, "dead",
                         EMQ_F_LAST_ERROR, error.ptr, error.len, EMQ_F_DIED_AT, stamp.ptr,
                         stamp.len);
    else
        RedisModule_Call(ctx, "HSET", "!bcccb", row.ptr, row.len, EMQ_F_STATE, "dead",
                         EMQ_F_LAST_ERROR, error.ptr, error.len);
    RedisModule_Call(ctx, "ZADD", "!bbb", dead.ptr, dead.len, stamp.ptr, stamp.len, id.ptr,
                     id.len);
    /* death is an ending: the dedup key goes */
    Str dedup = reply_str(RedisModule_Call(ctx, "HGET", "!bc", row.ptr, row.len, EMQ_F_DEDUP));
    if (dedup.ptr) release_dedup(queue, id, dedup);
    Retention limits = retention(queue, 0);
    if (limits.has_count || limits.has_age)
        trim_settled(queue, dead, limits, 0, now, TRIM_STEP, NONE);
    double wait, run;
    row_times(queue, id, row, now, &wait, &run);
    LaneEnd lane = {group, 1, wait, run, id};
    count_metric(queue, EMQ_K_METRICS_FAILED, 1, now, wait, run, &lane, group.ptr ? 1 : 0);
    /* lua-cjson's key order for this table (its hash order, fixed for these keys) */
    Str json = cat3(queue, str_c("{\"error\":"), error_json, str_c(",\"failures\":"));
    json = cat3(queue, json, failures, str_c(",\"event\":\"dead\",\"job\":"));
    json = cat3(queue, json, id_json, str_c("}"));
    emit(queue, json);
    /* a flow child's death is its ending: outcome failed, its error named */
    if (parent.ptr &&
        flow_ended(queue, id, parent, flow_policy(queue, row), "failed", error))
        return RedisModule_ReplyWithStringBuffer(ctx, "dead_relay", 10);
    return RedisModule_ReplyWithStringBuffer(ctx, "dead", 4);
}

/* scheduled again, due after the delay */
static int reschedule(Queue *queue, Str id, Str row, Str error, double delay, long long now,
                      Str failures, Str id_json, Str error_json) {
    RedisModuleCtx *ctx = queue->ctx;
    double due = (double)now + delay;
    Str schedule = queue_key(queue, EMQ_K_SCHEDULE), due_text = num(queue, due);
    RedisModule_Call(ctx, "HSET", "!bcccb", row.ptr, row.len, EMQ_F_STATE, "scheduled",
                     EMQ_F_LAST_ERROR, error.ptr, error.len);
    RedisModule_Call(ctx, "ZADD", "!bbb", schedule.ptr, schedule.len, due_text.ptr, due_text.len,
                     id.ptr, id.len);
    Str json = cat3(queue, str_c("{\"error\":"), error_json, str_c(",\"due\":"));
    json = cat3(queue, json, num14(queue, due), str_c(",\"failures\":"));
    json = cat3(queue, json, failures, str_c(",\"event\":\"retrying\",\"job\":"));
    json = cat3(queue, json, id_json, str_c("}"));
    emit(queue, json);
    return RedisModule_ReplyWithStringBuffer(ctx, "scheduled", 9);
}

/* one-job verbs: KEYS[1] = base, and the row KEYS[2] when declared (else derived) */
static Str row_of(Queue *queue, Line *line, Str id) {
    return line->nkeys >= 2 ? str_of(line->keys[1]) : job_key(queue, id);
}

int cmd_retry(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line line;
    if (!line_of(ctx, argv, argc, 1, 2, &line)) return REDISMODULE_OK;
    if (line.nargs < 4) return bad_args(ctx);
    Queue queue = {ctx, str_of(line.keys[0]), NULL};
    Str id = arg_at(&line, 0), token = arg_at(&line, 1), error = arg_at(&line, 2);
    Str row = row_of(&queue, &line, id);
    Str fields[7]; /* state attempts group max_attempts keep parent children */
    if (!fenced(&queue, row, token, FIELD_GROUP, FIELD_MAX_ATTEMPTS, FIELD_KEEP, fields, NULL))
        return REDISMODULE_OK;
    double max_attempts;
    if (!tonum(arg_at(&line, 4), &max_attempts) && !tonum(fields[3], &max_attempts) &&
        !tonum(arg_at(&line, 5), &max_attempts))
        return bad_args(ctx);
    long long now = now_ms();
    long long failures = reply_int(
        RedisModule_Call(ctx, "HINCRBY", "!bcc", row.ptr, row.len, EMQ_F_FAILURES, "1"));
    Str active = queue_key(&queue, EMQ_K_ACTIVE), lock = row_key(&queue, row, EMQ_K_LOCK);
    RedisModule_Call(ctx, "ZREM", "!bb", active.ptr, active.len, id.ptr, id.len);
    RedisModule_Call(ctx, "DEL", "!b", lock.ptr, lock.len);
    Str group = fields[2];
    if (group.ptr) give_back(&queue, group, 0);
    cap_freed(&queue, 1);
    int kept = fields[4].ptr != NULL;
    if (kept) record_error(&queue, row, token, now, error);
    Str failures_text = num14(&queue, (double)failures);
    Str id_json = json_str(&queue, id), error_json = json_str(&queue, error);
    if ((double)failures >= max_attempts)
        return dead_letter(&queue, id, row, error, kept, now, failures_text, id_json, error_json,
                           fields[5], group);
    double delay = 0;
    if (!tonum(arg_at(&line, 3), &delay)) delay = 0;
    return reschedule(&queue, id, row, error, delay, now, failures_text, id_json, error_json);
}
