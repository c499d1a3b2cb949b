/* The module's entry: the API loaded from the list in redismodule_min.h, the field
 * names made, the EMQ.* commands registered with their key specs. */
#define REDISMODULE_MAIN
#include "echomq.h"

/* What the reference's RedisModule_Init does: fetch GetApi from the context, then
 * every function this module uses (REDISMODULE_API), then register the module's name. */
static int RedisModule_Init(RedisModuleCtx *ctx, const char *name, int ver, int apiver) {
    void *getapi = ((void **)ctx)[0];
    *(void **)&RedisModule_GetApi = getapi;
#define REDISMODULE_LOAD_API(ret, fn, args)                                                  \
    if (RedisModule_GetApi("RedisModule_" #fn, (void *)&RedisModule_##fn) != 0)            \
        return REDISMODULE_ERR;
    REDISMODULE_API(REDISMODULE_LOAD_API)
#undef REDISMODULE_LOAD_API
    if (RedisModule_GetApi("RedisModule_IsModuleNameBusy", (void *)&RedisModule_IsModuleNameBusy) ==
            0 &&
        RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
    return REDISMODULE_OK;
}

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
    RedisModuleCmdFunc handler;
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

/* one verb's command and its info (summary, arity, key specs) */
static int register_verb(RedisModuleCtx *ctx, const Verb *verb) {
    if (RedisModule_CreateCommand(ctx, verb->name, verb->handler, verb->flags, 0, 0, 0) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleCommand *command = RedisModule_GetCommand(ctx, verb->name);
    RedisModuleCommandInfo info;
    memset(&info, 0, sizeof(info));
    info.version = &INFO_VERSION;
    info.summary = verb->summary;
    info.since = "1.0.0";
    info.arity = -3;
    info.key_specs = KEYSPECS;
    if (!command || RedisModule_SetCommandInfo(command, &info) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv,
                                                              int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "echomq", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    field_names_init();
    in_cluster = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) != 0;
    for (size_t i = 0; i < sizeof(VERBS) / sizeof(VERBS[0]); i++)
        if (register_verb(ctx, &VERBS[i]) == REDISMODULE_ERR) return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
