/*
 * nccl_plugin.c - mlprof as an NCCL profiler plugin: libmlprof_preload.so
 * exports ncclProfiler_v5 down to _v1 (NCCL looks for the newest it knows
 * first), so NCCL_PROFILER_PLUGIN=/path/libmlprof_preload.so, which
 * `mlprof run` sets unless the environment names another plugin, makes NCCL
 * hand mlprof its own events.
 *
 * Why the preload library and not a library of its own: under mlprof run the
 * preload library is already loaded, so NCCL's dlopen of it returns the same
 * object: one recorder, one trace, and the interposer (nccl.c) beside it
 * knows at once when the plugin records, so that no call is recorded twice.
 * A second library would have to link libmlprof and be a second mlprof in the
 * process.
 *
 * Events: groups, collectives and point-to-point operations always; proxy
 * operations and steps (NCCL's proxy thread, one per channel and network
 * transfer: many) when the nccl_proxy key is on. Each is a span of domain
 * "nccl" on the thread that started it: ncclGroup, ncclAllReduce...
 * (NCCL's func with "nccl" before it, the interposer's names), ncclProxyOp,
 * ncclProxyStep. A collective carries op, bytes (count x the type's size),
 * dtype, count, root, comm (NCCL's commHash, as a signed 64-bit integer),
 * comm_size (v4, or from the interposer when the communicator was made
 * through ncclCommInitRank), rank, seq (NCCL's seqNumber, counted per
 * communicator and function), algo and proto; a p2p op, dtype, count, bytes,
 * peer, comm, comm_size and rank.
 *
 * NCCL starts and stops a group's collectives in the order it launches them
 * (start a, start b, stop a, stop b), and the proxy thread's events overlap,
 * so these are not the thread's begin and end records (which nest): the
 * start is kept in one of a fixed set of event slots, and at the stop the
 * span goes through the producers' queue with its two times. No lock and no
 * allocation until the stop; an event that finds no free slot is counted
 * (otherData.nccl.events_lost).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../record/produce.h"
#include "hook.h"
#include "nccl_internal.h"

#define EXPORT __attribute__((visibility("default")))

/* One communicator's context. */
typedef struct {
    int version;
    int nranks;   /* -1: not known */
    uint64_t hash; /* v4: from init; v1-v3: from each descriptor */
    int has_hash;
    int live;     /* counted in mlprof__nccl_plugin_live */
} context;

enum { K_GROUP, K_COLL, K_P2P, K_PROXY_OP, K_PROXY_STEP };

#define SLOTS 4096
typedef struct {
    int busy;
    char kind;
    int tid;
    uint64_t t0;
    const context *ctx;
    const char *func, *dtype, *algo, *proto; /* NCCL's strings: they live as long as the library */
    uint64_t hash, seq;
    int has_hash;
    size_t count;
    int root, peer, rank;
    int channel, steps, chunk, is_send, step;
    size_t trans;
} event;
static event g_ev[SLOTS];
static unsigned g_hint;
static uint64_t g_lost;
static int g_inits, g_version; /* what the last init was asked as (for otherData) */

static __thread int t_tid;
static int tid(void)
{
    if (!t_tid)
        t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}

static event *slot_take(void)
{
    unsigned h = __atomic_fetch_add(&g_hint, 1, __ATOMIC_RELAXED);
    for (unsigned k = 0; k < SLOTS; k++) {
        event *e = &g_ev[(h + k) % SLOTS];
        int free_ = 0;
        if (!__atomic_load_n(&e->busy, __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&e->busy, &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return e;
    }
    __atomic_add_fetch(&g_lost, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* ------------------------------------------------------------ init */

static int recording(void)
{
    return mlprof__hook_on(MLPROF__HOOK_NCCL) && __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED);
}

static nccl_result init_any(int version, void **ctxp, int *mask, uint64_t hash, int has_hash, int nranks)
{
    *ctxp = NULL;
    *mask = 0;
    if (!mlprof__hook_on(MLPROF__HOOK_NCCL))
        return NCCL_INTERNAL_ERROR; /* NCCL then runs without a plugin, and the interposer (off too) records nothing */
    mlprof__busy++;
    context *c = mlprof__malloc(sizeof *c);
    mlprof__busy--;
    if (!c)
        return NCCL_INTERNAL_ERROR;
    c->version = version;
    c->hash = hash;
    c->has_hash = has_hash;
    c->nranks = nranks > 0 ? nranks : mlprof__nccl_init_nranks > 0 ? mlprof__nccl_init_nranks : -1;
    c->live = 1;
    *mask = NCCL_PROF_GROUP | NCCL_PROF_COLL | NCCL_PROF_P2P;
    if (mlprof__g.cfg.nccl_proxy)
        *mask |= NCCL_PROF_PROXY_OP | NCCL_PROF_PROXY_STEP;
    __atomic_add_fetch(&mlprof__nccl_plugin_live, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&g_inits, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&g_version, version, __ATOMIC_RELAXED);
    *ctxp = c;
    return NCCL_OK;
}

static nccl_result init_v1(void **ctx, int *mask) { return init_any(1, ctx, mask, 0, 0, 0); }
static nccl_result init_v2(void **ctx, int *mask) { return init_any(2, ctx, mask, 0, 0, 0); }
static nccl_result init_v3(void **ctx, int *mask) { return init_any(3, ctx, mask, 0, 0, 0); }
static nccl_result init_v4(void **ctx, int *mask, const char *name, uint64_t hash, int nnodes, int nranks, int rank,
                           nccl_logger log)
{
    (void)name, (void)nnodes, (void)rank, (void)log;
    return init_any(4, ctx, mask, hash, 1, nranks);
}

static nccl_result init_v5(void **ctx, uint64_t id, int *mask, const char *name, int nnodes, int nranks, int rank,
                           nccl_logger log)
{
    (void)name, (void)nnodes, (void)rank, (void)log;
    return init_any(5, ctx, mask, id, 1, nranks);
}

static nccl_result finalize(void *ctx)
{
    context *c = ctx;
    if (!c)
        return NCCL_OK;
    if (c->live)
        __atomic_sub_fetch(&mlprof__nccl_plugin_live, 1, __ATOMIC_ACQ_REL);
    mlprof__busy++;
    mlprof__free(c);
    mlprof__busy--;
    return NCCL_OK;
}

/* ------------------------------------------------------------ events */

/* What every version's start fills: the kind, and whether it is recorded. */
static event *start(void *ctx, void **handle, uint64_t type, void *parent, int rank)
{
    (void)parent;
    *handle = NULL;
    int kind = type == NCCL_PROF_GROUP ? K_GROUP : type == NCCL_PROF_COLL ? K_COLL : type == NCCL_PROF_P2P ? K_P2P
               : type == NCCL_PROF_PROXY_OP ? K_PROXY_OP : type == NCCL_PROF_PROXY_STEP ? K_PROXY_STEP : -1;
    if (kind < 0 || !ctx || !recording())
        return NULL;
    event *e = slot_take();
    if (!e)
        return NULL;
    const context *c = ctx;
    memset((char *)e + sizeof e->busy, 0, sizeof *e - sizeof e->busy);
    e->kind = (char)kind;
    e->tid = tid();
    e->ctx = c;
    e->rank = rank;
    e->root = e->peer = -1;
    e->hash = c->hash;
    e->has_hash = c->has_hash;
    e->t0 = mlprof_now_ns();
    *handle = e;
    return e;
}

static void proxy_fields(event *e, const nccl_proxy_op_descr *op, int step)
{
    if (e->kind == K_PROXY_OP) {
        e->channel = op->channelId;
        e->peer = op->peer;
        e->steps = op->nSteps;
        e->chunk = op->chunkSize;
        e->is_send = op->isSend;
    }
    e->step = step;
}

#define START_COMMON(D)                                                                                       \
    event *e = start(ctx, handle, (D)->type, (D)->parentObj, (D)->rank);                                      \
    if (!e)                                                                                                   \
        return NCCL_OK;                                                                                       \
    if (e->kind == K_PROXY_OP || e->kind == K_PROXY_STEP)                                                      \
        proxy_fields(e, &(D)->proxyOp, (D)->proxyStep.step);

static nccl_result start_v1(void *ctx, void **handle, nccl_descr_v1 *d)
{
    static const char *const funcs[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                        "AllReduce", "SendRecv", "Send",      "Recv"};
    START_COMMON(d)
    if (e->kind == K_COLL) {
        e->func = d->coll.func < 8 ? funcs[d->coll.func] : NULL;
        e->dtype = mlprof__nccl_dtype_name(d->coll.datatype);
        e->hash = d->coll.commHash, e->has_hash = 1;
        e->seq = d->coll.seqNumber;
        e->count = d->coll.count;
        e->root = d->coll.root;
    } else if (e->kind == K_P2P) {
        e->func = d->p2p.func < 8 ? funcs[d->p2p.func] : NULL;
        e->dtype = mlprof__nccl_dtype_name(d->p2p.datatype);
        e->hash = d->p2p.commHash, e->has_hash = 1;
        e->count = d->p2p.count;
        e->peer = d->p2p.peer;
    }
    return NCCL_OK;
}

/* v2 and v3 name the same fields alike (v2 has trafficBytes more). */
#define START_V23(D)                                                                                          \
    START_COMMON(D)                                                                                           \
    if (e->kind == K_COLL) {                                                                                  \
        e->func = (D)->coll.func, e->dtype = (D)->coll.datatype;                                              \
        e->hash = (D)->coll.commHash, e->has_hash = 1;                                                        \
        e->seq = (D)->coll.seqNumber, e->count = (D)->coll.count, e->root = (D)->coll.root;                   \
        e->algo = (D)->coll.algo, e->proto = (D)->coll.proto;                                                 \
    } else if (e->kind == K_P2P) {                                                                            \
        e->func = (D)->p2p.func, e->dtype = (D)->p2p.datatype;                                                \
        e->hash = (D)->p2p.commHash, e->has_hash = 1;                                                         \
        e->count = (D)->p2p.count, e->peer = (D)->p2p.peer;                                                   \
    }                                                                                                         \
    return NCCL_OK;

static nccl_result start_v2(void *ctx, void **handle, nccl_descr_v2 *d) { START_V23(d) }
static nccl_result start_v3(void *ctx, void **handle, nccl_descr_v3 *d) { START_V23(d) }

static nccl_result start_v4(void *ctx, void **handle, nccl_descr_v4 *d)
{
    START_COMMON(d)
    if (e->kind == K_COLL) {
        e->func = d->coll.func, e->dtype = d->coll.datatype;
        e->seq = d->coll.seqNumber, e->count = d->coll.count, e->root = d->coll.root;
        e->algo = d->coll.algo, e->proto = d->coll.proto;
    } else if (e->kind == K_P2P) {
        e->func = d->p2p.func, e->dtype = d->p2p.datatype;
        e->count = d->p2p.count, e->peer = d->p2p.peer;
    }
    return NCCL_OK;
}

/* v5: the type is 64 bits wide (only the launch's events are asked for). */
static nccl_result start_v5(void *ctx, void **handle, nccl_descr_v5 *d)
{
    *handle = NULL;
    if (d->type > NCCL_PROF_NET_PLUGIN)
        return NCCL_OK;
    START_COMMON(d)
    if (e->kind == K_COLL) {
        e->func = d->coll.func, e->dtype = d->coll.datatype;
        e->seq = d->coll.seqNumber, e->count = d->coll.count, e->root = d->coll.root;
        e->algo = d->coll.algo, e->proto = d->coll.proto;
    } else if (e->kind == K_P2P) {
        e->func = d->p2p.func, e->dtype = d->p2p.datatype;
        e->count = d->p2p.count, e->peer = d->p2p.peer;
    }
    return NCCL_OK;
}

/* The span's arguments, built on the stack: NCCL's strings are short names
 * (AllReduce, ncclFloat32, RING), so 640 bytes always hold them. */
typedef struct {
    char b[640];
    size_t n;
} args_buf;

static void add(args_buf *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(args_buf *a, const char *fmt, ...)
{
    if (a->n >= sizeof a->b - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(a->b + a->n, sizeof a->b - a->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        a->n = a->n + (size_t)k < sizeof a->b ? a->n + (size_t)k : sizeof a->b - 1;
}

/* A name NCCL gives, as a JSON string: at most 63 bytes of it, and a byte
 * that would need escaping (never in NCCL's names) written as '?'. */
static void add_word(args_buf *a, const char *key, const char *s)
{
    if (!s)
        return;
    char w[64];
    size_t i = 0;
    for (; s[i] && i < sizeof w - 1; i++)
        w[i] = s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20 ? '?' : s[i];
    w[i] = 0;
    add(a, ",\"%s\":\"%s\"", key, w);
}

static nccl_result stop(void *handle)
{
    event *e = handle;
    if (!e)
        return NCCL_OK;
    uint64_t t1 = mlprof_now_ns();
    args_buf args;
    args.n = 0;
    args.b[0] = 0;
    add(&args, "\"rank\":%d", e->rank);
    char name[80];
    if (e->kind == K_GROUP) {
        snprintf(name, sizeof name, "ncclGroup");
    } else if (e->kind == K_COLL || e->kind == K_P2P) {
        snprintf(name, sizeof name, "nccl%.64s", e->func ? e->func : "Unknown");
        add_word(&args, "op", e->func);
        add_word(&args, "dtype", e->dtype);
        add(&args, ",\"count\":%llu,\"bytes\":%llu", (unsigned long long)e->count,
            (unsigned long long)e->count * (unsigned long long)mlprof__nccl_dtype_size(e->dtype));
        if (e->kind == K_COLL) {
            add(&args, ",\"seq\":%llu", (unsigned long long)e->seq);
            if (e->func && (!strcmp(e->func, "Broadcast") || !strcmp(e->func, "Reduce")))
                add(&args, ",\"root\":%d", e->root);
            add_word(&args, "algo", e->algo);
            add_word(&args, "proto", e->proto);
        } else {
            add(&args, ",\"peer\":%d", e->peer);
        }
    } else if (e->kind == K_PROXY_OP) {
        snprintf(name, sizeof name, "ncclProxyOp");
        add(&args, ",\"channel\":%d,\"peer\":%d,\"steps\":%d,\"chunk_size\":%d,\"send\":%d", e->channel, e->peer,
            e->steps, e->chunk, e->is_send);
        if (e->trans)
            add(&args, ",\"bytes\":%llu", (unsigned long long)e->trans);
    } else {
        snprintf(name, sizeof name, "ncclProxyStep");
        add(&args, ",\"step\":%d", e->step);
        if (e->trans)
            add(&args, ",\"bytes\":%llu", (unsigned long long)e->trans);
    }
    if (e->has_hash && e->kind != K_PROXY_OP && e->kind != K_PROXY_STEP)
        add(&args, ",\"comm\":%lld", (long long)e->hash);
    if (e->ctx->nranks > 0 && e->kind != K_PROXY_OP && e->kind != K_PROXY_STEP)
        add(&args, ",\"comm_size\":%d", e->ctx->nranks);
    int tid_ = e->tid;
    uint64_t t0 = e->t0;
    __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE);
    mlprof__busy++; /* the queue's copies are mlprof's memory */
    if (mlprof__produce_span(NULL, tid_, "nccl", name, t0, t1, args.b) != MLPROF_OK)
        __atomic_add_fetch(&g_lost, 1, __ATOMIC_RELAXED);
    mlprof__busy--;
    return NCCL_OK;
}

static nccl_result state_v1(void *handle, int state, nccl_state_args_v1 *args)
{
    event *e = handle;
    (void)state;
    if (e && args && e->kind == K_PROXY_OP)
        e->trans = args->proxyOp.transSize;
    return NCCL_OK;
}

static nccl_result state_v4(void *handle, int state, nccl_state_args_v4 *args)
{
    event *e = handle;
    (void)state;
    if (e && args && e->kind == K_PROXY_STEP)
        e->trans = args->proxyStep.transSize;
    return NCCL_OK;
}

EXPORT nccl_profiler_v5 ncclProfiler_v5 = {"mlprof", init_v5, start_v5, stop, state_v4, finalize};
EXPORT nccl_profiler_v4 ncclProfiler_v4 = {"mlprof", init_v4, start_v4, stop, state_v4, finalize};
EXPORT nccl_profiler_v3 ncclProfiler_v3 = {"mlprof", init_v3, start_v3, stop, state_v1, finalize};
EXPORT nccl_profiler_v2 ncclProfiler_v2 = {"mlprof", init_v2, start_v2, stop, state_v1, finalize};
EXPORT nccl_profiler_v1 ncclProfiler_v1 = {"mlprof", init_v1, start_v1, stop, state_v1, finalize};

/* ---------------------------------------------------------- otherData */

/* What the trace says of the plugin: the version NCCL took and what was
 * lost. select.c's module calls it (weak there: libmlprof has no plugin). */
void mlprof__nccl_other_data(mlprof__sb *out)
{
    int inits = __atomic_load_n(&g_inits, __ATOMIC_RELAXED);
    uint64_t lost = __atomic_load_n(&g_lost, __ATOMIC_RELAXED);
    if (!inits && !lost)
        return;
    mlprof__sb_printf(out, ",\"nccl\":{\"plugin_version\":%d,\"communicators\":%d,\"events_lost\":%llu}",
                      __atomic_load_n(&g_version, __ATOMIC_RELAXED), inits, (unsigned long long)lost);
}
