/* EMQ.EXTEND 1 base lease lockttl id token [id token ...]: extend_lock.lua's twin, each
 * job's lease deadline (and lock) moved forward when its token is current; the reply
 * lists (id, reason) of the others. */
#include "echomq.h"

int cmd_extend(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    RedisModule_AutoMemory(ctx);
    Line line;
    if (!line_of(ctx, argv, argc, 1, 1, &line)) return REDISMODULE_OK;
    if (line.nargs < 2) return bad_args(ctx);
    Queue queue = {ctx, str_of(line.keys[0]), NULL};
    double lease, lockttl;
    if (!tonum(arg_at(&line, 0), &lease) || !tonum(arg_at(&line, 1), &lockttl))
        return bad_args(ctx);
    Str deadline = num(&queue, (double)now_ms() + lease), ttl = num(&queue, lockttl);
    Str active = queue_key(&queue, EMQ_K_ACTIVE);
    long out = 0;
    RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
    for (int i = 2; i < line.nargs; i += 2) {
        Str id = arg_at(&line, i), token = arg_at(&line, i + 1);
        Str row = job_key(&queue, id);
        static const int FIELDS[] = {FIELD_STATE, FIELD_ATTEMPTS};
        Str fields[2];
        hmget(&queue, row, 2, FIELDS, fields);
        Str state = fields[0], attempts = fields[1];
        const char *why = NULL;
        if (!state.ptr)
            why = "gone";
        else if (!str_eq_c(state, "active") || !str_eq(attempts, token))
            why = "stale";
        if (why) {
            RedisModule_ReplyWithStringBuffer(ctx, id.ptr, id.len);
            RedisModule_ReplyWithStringBuffer(ctx, why, strlen(why));
            out += 2;
            continue;
        }
        RedisModule_Call(ctx, "ZADD", "!bcbb", active.ptr, active.len, "XX", deadline.ptr,
                         deadline.len, id.ptr, id.len);
        if (lockttl > 0) {
            Str lock = row_key(&queue, row, EMQ_K_LOCK);
            RedisModule_Call(ctx, "PEXPIRE", "!bb", lock.ptr, lock.len, ttl.ptr, ttl.len);
        }
    }
    RedisModule_ReplySetArrayLength(ctx, out);
    return REDISMODULE_OK;
}
