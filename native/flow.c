/* lib/flow.lua's twin for the endings EMQ.COMPLETE and EMQ.RETRY make: a flow child's
 * ending resolves its parent's dependency in the same step when the parent is in this
 * queue (resolve_dep: SREM :deps, the result or failure recorded, the policy applied, the
 * parent made ready or dead, a dead parent's own ending going up the tree in a loop), or
 * writes it to this queue's outbox (OUTBOX + OUTMSG, the JSON text lua-cjson writes) for
 * the relay. Every write is a '!' call: replicated as the command it is. */
#include "echomq.h"

/* this queue's name: the base is emq:{q}: */
static Str flow_queue(Queue *queue) {
    Str q = NONE;
    if (queue->base.len >= 7) {
        q.ptr = queue->base.ptr + 5;
        q.len = queue->base.len - 7;
    }
    return q;
}

/* 'queue:id' split at its first ':' (queue names hold none); 0 when there is none */
static int split_ref(Str ref, Str *q, Str *id) {
    const char *colon = ref.ptr ? memchr(ref.ptr, ':', ref.len) : NULL;
    if (!colon) return 0;
    q->ptr = ref.ptr;
    q->len = (size_t)(colon - ref.ptr);
    id->ptr = colon + 1;
    id->len = ref.len - q->len - 1;
    return 1;
}

static Str flow_ref(Queue *queue, Str q, Str id) { return cat3(queue, q, str_c(":"), id); }

static Str or_empty(Str text) { return text.ptr ? text : str_c(""); }

/* lib/flow's flow_outbox: once per child id (HSETNX), then its ZADD. The message is
 * cjson.encode({pq, pid, o, p, v}) in lua-cjson's key order for that table */
static void flow_outbox(Queue *queue, Str id, Str pq, Str pid, Str outcome, Str on_fail,
                        Str value) {
    RedisModuleCtx *ctx = queue->ctx;
    Str json = cat3(queue, str_c("{\"p\":"), json_str(queue, or_empty(on_fail)),
                    str_c(",\"pid\":"));
    json = cat3(queue, json, json_str(queue, pid), str_c(",\"v\":"));
    json = cat3(queue, json, json_str(queue, or_empty(value)), str_c(",\"o\":"));
    json = cat3(queue, json, json_str(queue, outcome), str_c(",\"pq\":"));
    json = cat3(queue, json, json_str(queue, pq), str_c("}"));
    Str outmsg = queue_key(queue, EMQ_K_OUTMSG);
    if (reply_int(RedisModule_Call(ctx, "HSETNX", "!bbb", outmsg.ptr, outmsg.len, id.ptr, id.len,
                                   json.ptr, json.len)) == 1) {
        Str outbox = queue_key(queue, EMQ_K_OUTBOX), now = num(queue, (double)now_ms());
        RedisModule_Call(ctx, "ZADD", "!bbb", outbox.ptr, outbox.len, now.ptr, now.len, id.ptr,
                         id.len);
    }
}

/* lib/flow's flow_release: a waiting parent becomes ready now, or at its due time */
static void flow_release(Queue *queue, Str pid, Str pk) {
    RedisModuleCtx *ctx = queue->ctx;
    Reply *f = RedisModule_Call(ctx, "HMGET", "!bcccc", pk.ptr, pk.len, EMQ_F_GROUP,
                                EMQ_F_PRIORITY, EMQ_F_SEQ, EMQ_F_DUE);
    Str waiting = queue_key(queue, EMQ_K_WAITING);
    RedisModule_Call(ctx, "ZREM", "!bb", waiting.ptr, waiting.len, pid.ptr, pid.len);
    double due;
    if (tonum(reply_str(reply_elem(f, 3)), &due) && due > (double)now_ms()) {
        Str schedule = queue_key(queue, EMQ_K_SCHEDULE), due_text = num(queue, due);
        RedisModule_Call(ctx, "HSET", "!bcc", pk.ptr, pk.len, EMQ_F_STATE, "scheduled");
        RedisModule_Call(ctx, "ZADD", "!bbb", schedule.ptr, schedule.len, due_text.ptr,
                         due_text.len, pid.ptr, pid.len);
    } else {
        double seq = 0;
        if (!tonum(reply_str(reply_elem(f, 2)), &seq)) seq = 0;
        Str score = num(queue, run_score(reply_str(reply_elem(f, 1)), seq));
        make_ready(queue, pid, pk, reply_str(reply_elem(f, 0)), score);
        push_wake(queue, 1);
    }
    emit(queue, event_json(queue, "waiting_done", pid));
}

/* lib/flow's flow_fail: a waiting parent goes dead; its own parent and policy out */
static void flow_fail(Queue *queue, Str pid, Str pk, Str err, Str *gp, Str *gpol) {
    RedisModuleCtx *ctx = queue->ctx;
    long long now = now_ms();
    Str stamp = num(queue, (double)now);
    Reply *f = RedisModule_Call(ctx, "HMGET", "!bcccc", pk.ptr, pk.len, EMQ_F_DEDUP, EMQ_F_KEEP,
                                EMQ_F_PARENT, EMQ_F_ON_FAIL);
    Str waiting = queue_key(queue, EMQ_K_WAITING), dead = queue_key(queue, EMQ_K_DEAD);
    RedisModule_Call(ctx, "ZREM", "!bb", waiting.ptr, waiting.len, pid.ptr, pid.len);
    if (reply_str(reply_elem(f, 1)).ptr)
        RedisModule_Call(ctx, "HSET", "!bcccbcb", pk.ptr, pk.len, EMQ_F_STATE, "dead",
                         EMQ_F_LAST_ERROR, err.ptr, err.len, EMQ_F_DIED_AT, stamp.ptr, stamp.len);
    else
        RedisModule_Call(ctx, "HSET", "!bcccb", pk.ptr, pk.len, EMQ_F_STATE, "dead",
                         EMQ_F_LAST_ERROR, err.ptr, err.len);
    RedisModule_Call(ctx, "ZADD", "!bbb", dead.ptr, dead.len, stamp.ptr, stamp.len, pid.ptr,
                     pid.len);
    Str dedup = reply_str(reply_elem(f, 0));
    if (dedup.ptr) release_dedup(queue, pid, dedup);
    /* a parent that never ran: no wait or run to add */
    count_metric(queue, EMQ_K_METRICS_FAILED, 1, now, 0, 0, NULL, 0);
    /* cjson.encode({event = 'dead', job = pid, error = err}), lua-cjson's key order */
    Str json = cat3(queue, str_c("{\"error\":"), json_str(queue, err),
                    str_c(",\"event\":\"dead\",\"job\":"));
    emit(queue, cat3(queue, json, json_str(queue, pid), str_c("}")));
    *gp = reply_str(reply_elem(f, 2));
    *gpol = reply_str(reply_elem(f, 3));
}

/* lib/flow's resolve_dep, in the parent's queue (this one); 1 when it wrote an outbox
 * entry (a parent gone dead by fail_parent whose own parent is in another queue) */
static int resolve_dep(Queue *queue, Str pid, Str ref, Str outcome, Str on_fail, Str value) {
    RedisModuleCtx *ctx = queue->ctx;
    Str q = flow_queue(queue);
    while (pid.ptr) {
        Str pk = job_key(queue, pid), deps = row_key(queue, pk, EMQ_K_DEPS);
        if (reply_int(RedisModule_Call(ctx, "SREM", "!bb", deps.ptr, deps.len, ref.ptr,
                                       ref.len)) == 0)
            return 0;
        Str pol = or_empty(on_fail);
        value = or_empty(value);
        int completed = str_eq_c(outcome, "completed");
        int deduplicated = str_eq_c(outcome, "deduplicated");
        if (completed) {
            Str kids = row_key(queue, pk, EMQ_K_KIDS);
            RedisModule_Call(ctx, "HSET", "!bbb", kids.ptr, kids.len, ref.ptr, ref.len,
                             value.ptr, value.len);
        } else if (!str_eq_c(pol, "remove_dependency") || deduplicated) {
            /* cjson.encode({outcome = ..., error = ...}), lua-cjson's key order */
            Str kidfails = row_key(queue, pk, EMQ_K_KIDFAILS);
            Str json = cat3(queue, str_c("{\"outcome\":"), json_str(queue, outcome),
                            str_c(",\"error\":"));
            json = cat3(queue, json, json_str(queue, value), str_c("}"));
            RedisModule_Call(ctx, "HSET", "!bbb", kidfails.ptr, kidfails.len, ref.ptr, ref.len,
                             json.ptr, json.len);
        }
        Str state =
            reply_str(RedisModule_Call(ctx, "HGET", "!bc", pk.ptr, pk.len, EMQ_F_STATE));
        if (!str_eq_c(state, "waiting_children")) return 0;
        int fails = !completed && !deduplicated;
        if (fails && (pol.len == 0 || str_eq_c(pol, "fail_parent"))) {
            Str err = cat3(queue, str_c("child "), ref, str_c(" "));
            err = cat3(queue, err, outcome, str_c(": "));
            err = cat3(queue, err, value, NONE);
            Str gp, gpol, gq, gid;
            flow_fail(queue, pid, pk, err, &gp, &gpol);
            if (!gp.ptr || !split_ref(gp, &gq, &gid)) return 0;
            /* the parent's death is its own ending: up the tree */
            if (!str_eq(gq, q)) {
                flow_outbox(queue, pid, gq, gid, str_c("failed"), gpol, err);
                return 1;
            }
            ref = flow_ref(queue, q, pid);
            pid = gid;
            outcome = str_c("failed");
            on_fail = gpol;
            value = err;
        } else {
            if (fails && str_eq_c(pol, "continue"))
                flow_release(queue, pid, pk);
            else if (reply_int(RedisModule_Call(ctx, "SCARD", "!b", deps.ptr, deps.len)) == 0)
                flow_release(queue, pid, pk);
            pid = NONE;
        }
    }
    return 0;
}

int flow_ended(Queue *queue, Str id, Str parent, Str on_fail, const char *outcome, Str value) {
    Str pq, pid;
    if (!parent.ptr || !split_ref(parent, &pq, &pid)) return 0;
    if (str_eq(pq, flow_queue(queue)))
        return resolve_dep(queue, pid, flow_ref(queue, pq, id), str_c(outcome), on_fail, value);
    flow_outbox(queue, id, pq, pid, str_c(outcome), on_fail, value);
    return 1;
}

/* the row's `on_fail` (NONE = fail_parent) */
Str flow_policy(Queue *queue, Str row) {
    return reply_str(RedisModule_Call(queue->ctx, "HGET", "!bc", row.ptr, row.len, EMQ_F_ON_FAIL));
}
