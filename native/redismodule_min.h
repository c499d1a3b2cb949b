/* The part of the Redis module API that echomq's module uses, declared by hand from
 * the public API reference (https://redis.io/docs/latest/develop/reference/modules/).
 * Only what the module's files call is here; every function is a pointer filled in at
 * load time through RedisModule_GetApi, the first word of the context the server hands
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
#define REDISMODULE_KEYTYPE_STRING 1
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

/* The module API functions echomq calls, each listed once as X(return type, name,
 * parameters): the function pointers are declared from this list, and
 * RedisModule_Init (module.c) fills them in from it through RedisModule_GetApi. */
#define REDISMODULE_API(X)                                                                  \
    X(void, SetModuleAttribs, (RedisModuleCtx *, const char *, int, int))                 \
    X(int, CreateCommand,                                                                 \
      (RedisModuleCtx *, const char *, RedisModuleCmdFunc, const char *, int, int, int))  \
    X(RedisModuleCommand *, GetCommand, (RedisModuleCtx *, const char *))                 \
    X(int, SetCommandInfo, (RedisModuleCommand *, const RedisModuleCommandInfo *))        \
    X(void, AutoMemory, (RedisModuleCtx *))                                               \
    X(RedisModuleCallReply *, Call, (RedisModuleCtx *, const char *, const char *, ...))  \
    X(int, CallReplyType, (RedisModuleCallReply *))                                       \
    X(long long, CallReplyInteger, (RedisModuleCallReply *))                              \
    X(const char *, CallReplyStringPtr, (RedisModuleCallReply *, size_t *))               \
    X(size_t, CallReplyLength, (RedisModuleCallReply *))                                  \
    X(RedisModuleCallReply *, CallReplyArrayElement, (RedisModuleCallReply *, size_t))    \
    X(int, ReplyWithLongLong, (RedisModuleCtx *, long long))                              \
    X(int, ReplyWithError, (RedisModuleCtx *, const char *))                              \
    X(int, ReplyWithArray, (RedisModuleCtx *, long))                                      \
    X(void, ReplySetArrayLength, (RedisModuleCtx *, long))                                \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx *, const char *, size_t))               \
    X(int, ReplyWithSimpleString, (RedisModuleCtx *, const char *))                       \
    X(int, ReplyWithCallReply, (RedisModuleCtx *, RedisModuleCallReply *))                \
    X(int, WrongArity, (RedisModuleCtx *))                                                \
    X(const char *, StringPtrLen, (const RedisModuleString *, size_t *))                  \
    X(long long, Milliseconds, (void))                                                    \
    X(void *, PoolAlloc, (RedisModuleCtx *, size_t))                                      \
    X(RedisModuleString *, CreateString, (RedisModuleCtx *, const char *, size_t))        \
    X(void, Log, (RedisModuleCtx *, const char *, const char *, ...))                     \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx *, RedisModuleString *, int))            \
    X(void, CloseKey, (RedisModuleKey *))                                                 \
    X(int, KeyType, (RedisModuleKey *))                                                   \
    X(size_t, ValueLength, (RedisModuleKey *))                                            \
    X(char *, StringDMA, (RedisModuleKey *, size_t *, int))                               \
    X(int, HashGet, (RedisModuleKey *, int, ...))                                         \
    X(int, HashSet, (RedisModuleKey *, int, ...))                                         \
    X(int, Replicate, (RedisModuleCtx *, const char *, const char *, ...))                \
    X(int, PublishMessage, (RedisModuleCtx *, RedisModuleString *, RedisModuleString *))  \
    X(int, GetContextFlags, (RedisModuleCtx *))                                           \
    X(int, DeleteKey, (RedisModuleKey *))                                                 \
    X(int, ZsetAdd, (RedisModuleKey *, double, RedisModuleString *, int *))               \
    X(int, ZsetFirstInScoreRange, (RedisModuleKey *, double, double, int, int))           \
    X(int, ZsetRangeEndReached, (RedisModuleKey *))                                       \
    X(RedisModuleString *, ZsetRangeCurrentElement, (RedisModuleKey *, double *))         \
    X(int, ZsetRangeNext, (RedisModuleKey *))                                             \
    X(void, ZsetRangeStop, (RedisModuleKey *))

/* Fetched when the server has it, and used only then (RedisModule_Init). */
#define REDISMODULE_API_OPTIONAL(X) X(int, IsModuleNameBusy, (const char *))

/* The pointers: defined in the one file that defines REDISMODULE_MAIN (module.c) before
 * including this header, declared everywhere else. GetApi, the loader of the others, is
 * the first word of the context the server hands RedisModule_OnLoad. */
#ifdef REDISMODULE_MAIN
#define REDISMODULE_EXTERN
#else
#define REDISMODULE_EXTERN extern
#endif
#define REDISMODULE_DECLARE_API(ret, name, args) REDISMODULE_EXTERN ret(*RedisModule_##name) args;
REDISMODULE_EXTERN int (*RedisModule_GetApi)(const char *, void *);
REDISMODULE_API(REDISMODULE_DECLARE_API)
REDISMODULE_API_OPTIONAL(REDISMODULE_DECLARE_API)
#undef REDISMODULE_DECLARE_API

#endif
