/* The part of the Redis module API that echomq's module uses, declared by hand from
 * the public API reference (https://redis.io/docs/latest/develop/reference/modules/).
 * Only what echomq.c calls is here; every function is a pointer filled in at load time
 * through RedisModule_GetApi, the first word of the context the server hands
 * RedisModule_OnLoad. Targets the API of Redis 7.0 (key specs need 7.0). */
#ifndef ECHOMQ_REDISMODULE_MIN_H
#define ECHOMQ_REDISMODULE_MIN_H

#include <stddef.h>
#include <stdint.h>

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

/* RedisModule_CallReplyType */
#define REDISMODULE_REPLY_UNKNOWN -1
#define REDISMODULE_REPLY_STRING 0
#define REDISMODULE_REPLY_ERROR 1
#define REDISMODULE_REPLY_INTEGER 2
#define REDISMODULE_REPLY_ARRAY 3
#define REDISMODULE_REPLY_NULL 4

/* RedisModule_ReplyWithArray: the length is set later */
#define REDISMODULE_POSTPONED_LEN -1

/* key spec flags (RedisModuleCommandKeySpec.flags) */
#define REDISMODULE_CMD_KEY_RW (1ULL << 1)
#define REDISMODULE_CMD_KEY_ACCESS (1ULL << 4)
#define REDISMODULE_CMD_KEY_UPDATE (1ULL << 5)

/* RedisModule_OpenKey modes, RedisModule_HashGet flags, RedisModule_KeyType answers */
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)
#define REDISMODULE_HASH_NONE 0
#define REDISMODULE_HASH_CFIELDS (1 << 2)
#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_HASH 3
#define REDISMODULE_KEYTYPE_ZSET 5

/* RedisModule_GetContextFlags: the server runs in cluster mode */
#define REDISMODULE_CTX_FLAGS_CLUSTER (1 << 5)

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef struct RedisModuleCommand RedisModuleCommand;
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

typedef enum {
    REDISMODULE_KSPEC_BS_INVALID = 0,
    REDISMODULE_KSPEC_BS_UNKNOWN,
    REDISMODULE_KSPEC_BS_INDEX,
    REDISMODULE_KSPEC_BS_KEYWORD
} RedisModuleKeySpecBeginSearchType;

typedef enum {
    REDISMODULE_KSPEC_FK_OMITTED = 0,
    REDISMODULE_KSPEC_FK_UNKNOWN,
    REDISMODULE_KSPEC_FK_RANGE,
    REDISMODULE_KSPEC_FK_KEYNUM
} RedisModuleKeySpecFindKeysType;

typedef struct {
    const char *since;
    const char *changes;
} RedisModuleCommandHistoryEntry;

typedef struct {
    const char *notes;
    uint64_t flags;
    RedisModuleKeySpecBeginSearchType begin_search_type;
    union {
        struct {
            int pos;
        } index;
        struct {
            const char *keyword;
            int startfrom;
        } keyword;
    } bs;
    RedisModuleKeySpecFindKeysType find_keys_type;
    union {
        struct {
            int lastkey;
            int keystep;
            int limit;
        } range;
        struct {
            int keynumidx;
            int firstkey;
            int keystep;
        } keynum;
    } fk;
} RedisModuleCommandKeySpec;

/* Arguments are not described (args = NULL); the type is declared for its size only. */
typedef struct RedisModuleCommandArg {
    const char *name;
    int type;
    int key_spec_index;
    const char *token;
    const char *summary;
    const char *since;
    int flags;
    const char *deprecated_since;
    struct RedisModuleCommandArg *subargs;
} RedisModuleCommandArg;

typedef struct {
    int version;
    size_t sizeof_historyentry;
    size_t sizeof_keyspec;
    size_t sizeof_arg;
} RedisModuleCommandInfoVersion;

typedef struct {
    const RedisModuleCommandInfoVersion *version;
    const char *summary;
    const char *complexity;
    const char *since;
    RedisModuleCommandHistoryEntry *history;
    const char *tips;
    int arity;
    RedisModuleCommandKeySpec *key_specs;
    RedisModuleCommandArg *args;
} RedisModuleCommandInfo;

#define RM_API(ret, name, args) static ret(*RedisModule_##name) args
RM_API(int, GetApi, (const char *, void *));
RM_API(void, SetModuleAttribs, (RedisModuleCtx *, const char *, int, int));
RM_API(int, IsModuleNameBusy, (const char *));
RM_API(int, CreateCommand,
       (RedisModuleCtx *, const char *, RedisModuleCmdFunc, const char *, int, int, int));
RM_API(RedisModuleCommand *, GetCommand, (RedisModuleCtx *, const char *));
RM_API(int, SetCommandInfo, (RedisModuleCommand *, const RedisModuleCommandInfo *));
RM_API(void, AutoMemory, (RedisModuleCtx *));
RM_API(RedisModuleCallReply *, Call, (RedisModuleCtx *, const char *, const char *, ...));
RM_API(int, CallReplyType, (RedisModuleCallReply *));
RM_API(long long, CallReplyInteger, (RedisModuleCallReply *));
RM_API(const char *, CallReplyStringPtr, (RedisModuleCallReply *, size_t *));
RM_API(size_t, CallReplyLength, (RedisModuleCallReply *));
RM_API(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply *, size_t));
RM_API(int, ReplyWithLongLong, (RedisModuleCtx *, long long));
RM_API(int, ReplyWithError, (RedisModuleCtx *, const char *));
RM_API(int, ReplyWithArray, (RedisModuleCtx *, long));
RM_API(void, ReplySetArrayLength, (RedisModuleCtx *, long));
RM_API(int, ReplyWithStringBuffer, (RedisModuleCtx *, const char *, size_t));
RM_API(int, ReplyWithSimpleString, (RedisModuleCtx *, const char *));
RM_API(int, ReplyWithCallReply, (RedisModuleCtx *, RedisModuleCallReply *));
RM_API(int, WrongArity, (RedisModuleCtx *));
RM_API(const char *, StringPtrLen, (const RedisModuleString *, size_t *));
RM_API(long long, Milliseconds, (void));
RM_API(void *, PoolAlloc, (RedisModuleCtx *, size_t));
RM_API(RedisModuleString *, CreateString, (RedisModuleCtx *, const char *, size_t));
RM_API(void, Log, (RedisModuleCtx *, const char *, const char *, ...));
RM_API(RedisModuleKey *, OpenKey, (RedisModuleCtx *, RedisModuleString *, int));
RM_API(void, CloseKey, (RedisModuleKey *));
RM_API(int, KeyType, (RedisModuleKey *));
RM_API(size_t, ValueLength, (RedisModuleKey *));
RM_API(int, HashGet, (RedisModuleKey *, int, ...));
RM_API(int, HashSet, (RedisModuleKey *, int, ...));
RM_API(int, Replicate, (RedisModuleCtx *, const char *, const char *, ...));
RM_API(int, PublishMessage, (RedisModuleCtx *, RedisModuleString *, RedisModuleString *));
RM_API(int, GetContextFlags, (RedisModuleCtx *));
RM_API(int, DeleteKey, (RedisModuleKey *));
RM_API(int, ZsetAdd, (RedisModuleKey *, double, RedisModuleString *, int *));
RM_API(int, ZsetFirstInScoreRange, (RedisModuleKey *, double, double, int, int));
RM_API(int, ZsetRangeEndReached, (RedisModuleKey *));
RM_API(RedisModuleString *, ZsetRangeCurrentElement, (RedisModuleKey *, double *));
RM_API(int, ZsetRangeNext, (RedisModuleKey *));
RM_API(void, ZsetRangeStop, (RedisModuleKey *));
#undef RM_API

#define RM_GET(name)                                                                     \
    if (RedisModule_GetApi("RedisModule_" #name, (void *)&RedisModule_##name) != 0)      \
    return REDISMODULE_ERR

/* What the reference's RedisModule_Init does: fetch GetApi from the context, then
 * every function this module uses, then register the module's name. */
static int RedisModule_Init(RedisModuleCtx *ctx, const char *name, int ver, int apiver) {
    void *getapi = ((void **)ctx)[0];
    *(void **)&RedisModule_GetApi = getapi;
    RM_GET(SetModuleAttribs);
    RM_GET(CreateCommand);
    RM_GET(GetCommand);
    RM_GET(SetCommandInfo);
    RM_GET(AutoMemory);
    RM_GET(Call);
    RM_GET(CallReplyType);
    RM_GET(CallReplyInteger);
    RM_GET(CallReplyStringPtr);
    RM_GET(CallReplyLength);
    RM_GET(CallReplyArrayElement);
    RM_GET(ReplyWithLongLong);
    RM_GET(ReplyWithError);
    RM_GET(ReplyWithArray);
    RM_GET(ReplySetArrayLength);
    RM_GET(ReplyWithStringBuffer);
    RM_GET(ReplyWithSimpleString);
    RM_GET(ReplyWithCallReply);
    RM_GET(WrongArity);
    RM_GET(StringPtrLen);
    RM_GET(Milliseconds);
    RM_GET(PoolAlloc);
    RM_GET(CreateString);
    RM_GET(Log);
    RM_GET(OpenKey);
    RM_GET(CloseKey);
    RM_GET(KeyType);
    RM_GET(ValueLength);
    RM_GET(HashGet);
    RM_GET(HashSet);
    RM_GET(Replicate);
    RM_GET(PublishMessage);
    RM_GET(GetContextFlags);
    RM_GET(DeleteKey);
    RM_GET(ZsetAdd);
    RM_GET(ZsetFirstInScoreRange);
    RM_GET(ZsetRangeEndReached);
    RM_GET(ZsetRangeCurrentElement);
    RM_GET(ZsetRangeNext);
    RM_GET(ZsetRangeStop);
    if (RedisModule_GetApi("RedisModule_IsModuleNameBusy", (void *)&RedisModule_IsModuleNameBusy) ==
            0 &&
        RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, ver, apiver);
    return REDISMODULE_OK;
}
#undef RM_GET

#endif
