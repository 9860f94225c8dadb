/*
 * fake_nccl.c - a stand-in for libnccl, for testing mlprof's nccl hook and
 * its NCCL profiler plugin without a GPU: the functions that the interposer
 * stands in front of (nothing is communicated: a collective only returns),
 * and, when NCCL_PROFILER_PLUGIN names a library, the plugin driven as
 * NCCL's ext-profiler documentation describes it:
 *
 * - at each communicator's creation the library is opened (the name as
 *   given, else libnccl-profiler-NAME.so; "none" or empty: no plugin), the
 *   newest ncclProfiler_vN it exports is taken, from FAKE_NCCL_PROFILER_VERSION
 *   (default 5) down to 1, and its init called (v4 and v5 with the
 *   communicator's name, hash, nodes, size and rank); a failing init disables it;
 * - calls made inside ncclGroupStart/End, or one alone (an implicit group),
 *   are launched at the group's end: the group event starts, then every
 *   collective and p2p event in the order of the calls, each collective
 *   numbered per communicator and function (seqNumber); then, if the
 *   activation mask asks, a proxy thread starts a ProxyOp per operation with
 *   two ProxySteps, whose states carry the bytes moved; then the events
 *   stop in the order they started (not nested), the group last;
 * - ncclCommDestroy calls finalize.
 *
 * FAKE_NCCL_LOG=FILE appends one line per plugin call, for the test to read.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/hook/nccl_internal.h"

typedef struct {
    char internal[128];
} ncclUniqueId;

typedef struct {
    int func; /* ncclFunc_t */
    size_t count;
    int dtype, root, peer;
    const void *sendbuff;
    void *recvbuff;
} task;

typedef struct comm {
    int rank, nranks, version, mask;
    uint64_t hash, seq[8];
    void *ctx;
    const void *plugin; /* the ncclProfiler_vN struct */
    task tasks[64];
    int ntasks;
} comm;

static const char *const k_funcs[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                      "AllReduce", "SendRecv", "Send",      "Recv"};
static const char *const k_dtypes[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",
                                       "ncclInt64",   "ncclUint64",  "ncclFloat16", "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16"};
static __thread int t_group;
static __thread comm *t_pending[16];
static __thread int t_npending;

static void say(const char *fmt, ...)
{
    const char *path = getenv("FAKE_NCCL_LOG");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

/* ------------------------------------------------------------ the plugin */

static void plugin_open(comm *c)
{
    const char *name = getenv("NCCL_PROFILER_PLUGIN");
    if (!name || !*name || strcmp(name, "none") == 0)
        return;
    /* the name as given (a path), then libnccl-profiler-NAME.so, as NCCL's loader tries them */
    char path[4096];
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(path, sizeof path, "libnccl-profiler-%s.so", name);
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        say("dlopen failed: %s", dlerror());
        return;
    }
    const char *max = getenv("FAKE_NCCL_PROFILER_VERSION");
    for (int v = max && *max ? atoi(max) : 5; v >= 1 && !c->plugin; v--) {
        char sym[32];
        snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
        say("dlsym %s", sym);
        if ((c->plugin = dlsym(lib, sym)) != NULL)
            c->version = v;
    }
    if (!c->plugin)
        return;
    int rc;
    if (c->version == 5) {
        const nccl_profiler_v5 *p = c->plugin;
        rc = p->init(&c->ctx, c->hash, &c->mask, "fake", 1, c->nranks, c->rank, logger);
    } else if (c->version == 4) {
        const nccl_profiler_v4 *p = c->plugin;
        rc = p->init(&c->ctx, &c->mask, "fake", c->hash, 1, c->nranks, c->rank, logger);
    } else {
        /* v1 to v3 share init's signature */
        const nccl_profiler_v1 *p = c->plugin;
        rc = p->init(&c->ctx, &c->mask);
    }
    say("init v%d rc %d mask %d", c->version, rc, c->mask);
    if (rc != 0)
        c->plugin = NULL;
}

typedef struct {
    uint8_t type;
    void *parent;
    const task *t;
    uint64_t seq;
    int step;
    const nccl_proxy_op_descr *op;
} generic;

/* One descriptor in the plugin's version, started. */
static void *start(comm *c, const generic *g)
{
    void *h = NULL;
    nccl_descr_v1 d1;
    nccl_descr_v2 d2;
    nccl_descr_v3 d3;
    nccl_descr_v4 d4;
    nccl_descr_v5 d5;
    memset(&d1, 0, sizeof d1), memset(&d2, 0, sizeof d2), memset(&d3, 0, sizeof d3), memset(&d4, 0, sizeof d4);
    memset(&d5, 0, sizeof d5);
    const task *t = g->t;
#define COMMON(D)                                                                                             \
    D.type = g->type, D.parentObj = g->parent, D.rank = c->rank;                                              \
    if (g->type == NCCL_PROF_PROXY_OP)                                                                        \
        D.proxyOp = *g->op;                                                                                   \
    if (g->type == NCCL_PROF_PROXY_STEP)                                                                      \
        D.proxyStep.step = g->step;
#define COLL_P2P(D, FUNC, DTYPE, HASH)                                                                        \
    if (g->type == NCCL_PROF_COLL) {                                                                          \
        HASH(D.coll)                                                                                          \
        D.coll.seqNumber = g->seq, D.coll.func = FUNC, D.coll.sendBuff = t->sendbuff;                         \
        D.coll.recvBuff = t->recvbuff, D.coll.count = t->count, D.coll.root = t->root;                        \
        D.coll.datatype = DTYPE;                                                                              \
    } else if (g->type == NCCL_PROF_P2P) {                                                                    \
        HASH(D.p2p)                                                                                           \
        D.p2p.func = FUNC, D.p2p.buff = t->recvbuff, D.p2p.datatype = DTYPE, D.p2p.count = t->count;          \
        D.p2p.peer = t->peer;                                                                                 \
    }
#define HASH(X) X.name = "fake", X.commHash = c->hash;
#define NOHASH(X)
    switch (c->version) {
    case 1:
        COMMON(d1)
        COLL_P2P(d1, (uint8_t)t->func, (uint8_t)t->dtype, HASH)
        if (g->type == NCCL_PROF_COLL)
            d1.coll.algo = 1, d1.coll.proto = 2;
        ((const nccl_profiler_v1 *)c->plugin)->startEvent(c->ctx, &h, &d1);
        break;
    case 2:
        COMMON(d2)
        COLL_P2P(d2, k_funcs[t->func], k_dtypes[t->dtype], HASH)
        if (g->type == NCCL_PROF_COLL)
            d2.coll.algo = "RING", d2.coll.proto = "SIMPLE";
        ((const nccl_profiler_v2 *)c->plugin)->startEvent(c->ctx, &h, &d2);
        break;
    case 3:
        COMMON(d3)
        COLL_P2P(d3, k_funcs[t->func], k_dtypes[t->dtype], HASH)
        if (g->type == NCCL_PROF_COLL)
            d3.coll.algo = "RING", d3.coll.proto = "SIMPLE";
        ((const nccl_profiler_v3 *)c->plugin)->startEvent(c->ctx, &h, &d3);
        break;
    case 5:
        COMMON(d5)
        COLL_P2P(d5, k_funcs[t->func], k_dtypes[t->dtype], NOHASH)
        if (g->type == NCCL_PROF_COLL)
            d5.coll.algo = "RING", d5.coll.proto = "SIMPLE", d5.coll.parentGroup = g->parent;
        ((const nccl_profiler_v5 *)c->plugin)->startEvent(c->ctx, &h, &d5);
        break;
    default:
        COMMON(d4)
        COLL_P2P(d4, k_funcs[t->func], k_dtypes[t->dtype], NOHASH)
        if (g->type == NCCL_PROF_COLL)
            d4.coll.algo = "RING", d4.coll.proto = "SIMPLE";
        ((const nccl_profiler_v4 *)c->plugin)->startEvent(c->ctx, &h, &d4);
        break;
    }
    say("start type %d handle %s", g->type, h ? "set" : "null");
    return h;
}

static void stop(comm *c, void *h)
{
    if (h)
        ((const nccl_profiler_v1 *)c->plugin)->stopEvent(h); /* the same place in every version */
}

static void state(comm *c, void *h, size_t bytes)
{
    if (!h)
        return;
    if (c->version >= 4) {
        nccl_state_args_v4 a;
        memset(&a, 0, sizeof a);
        a.proxyStep.transSize = bytes;
        ((const nccl_profiler_v4 *)c->plugin)->recordEventState(h, 10 /* ProxyStepRecvWait */, &a);
    } else {
        nccl_state_args_v1 a;
        memset(&a, 0, sizeof a);
        a.proxyOp.transSize = bytes;
        a.proxyOp.steps = 2;
        ((const nccl_profiler_v1 *)c->plugin)->recordEventState(h, 2 /* ProxyOpSendTransmitted */, &a);
    }
}

typedef struct {
    comm *c;
    void **parents;
} proxy_work;

/* The proxy thread: one ProxyOp per operation, with two steps. */
static void *proxy(void *arg)
{
    proxy_work *w = arg;
    comm *c = w->c;
    for (int i = 0; i < c->ntasks; i++) {
        const task *t = &c->tasks[i];
        nccl_proxy_op_descr op = {getpid(), (uint8_t)i, t->peer >= 0 ? t->peer : (c->rank + 1) % c->nranks, 2,
                                  4096, t->func != 7};
        generic g = {NCCL_PROF_PROXY_OP, w->parents[i], t, 0, 0, &op};
        void *h = start(c, &g);
        for (int s = 0; s < 2; s++) {
            generic gs = {NCCL_PROF_PROXY_STEP, h, t, 0, s, &op};
            void *hs = (c->mask & NCCL_PROF_PROXY_STEP) ? start(c, &gs) : NULL;
            state(c, hs, 1000 + (size_t)s);
            stop(c, hs);
        }
        if (c->version < 4)
            state(c, h, 2001);
        stop(c, h);
    }
    return NULL;
}

static void launch(comm *c)
{
    void *group = NULL, *h[64] = {0};
    if (c->plugin && (c->mask & NCCL_PROF_GROUP)) {
        generic g = {NCCL_PROF_GROUP, NULL, &c->tasks[0], 0, 0, NULL};
        group = start(c, &g);
    }
    for (int i = 0; i < c->ntasks; i++) {
        const task *t = &c->tasks[i];
        int is_p2p = t->func == 6 || t->func == 7;
        uint64_t seq = is_p2p ? 0 : c->seq[t->func]++;
        int type = is_p2p ? NCCL_PROF_P2P : NCCL_PROF_COLL;
        if (c->plugin && (c->mask & type)) {
            generic g = {(uint8_t)type, group, t, seq, 0, NULL};
            h[i] = start(c, &g);
        }
    }
    if (c->plugin && (c->mask & NCCL_PROF_PROXY_OP)) {
        pthread_t th;
        proxy_work w = {c, h};
        if (pthread_create(&th, NULL, proxy, &w) == 0)
            pthread_join(th, NULL);
    }
    for (int i = 0; i < c->ntasks; i++)
        stop(c, h[i]);
    if (group)
        stop(c, group);
    c->ntasks = 0;
}

static int enqueue(comm *c, task t)
{
    if (!c || c->ntasks == 64)
        return 4; /* ncclInvalidArgument */
    if (c->nranks == 1 && t.func < 6)
        return 0; /* as NCCL: a local copy, before any task, group, number or profiler event */
    c->tasks[c->ntasks++] = t;
    if (t_group == 0) {
        launch(c);
        return 0;
    }
    for (int i = 0; i < t_npending; i++) {
        if (t_pending[i] == c)
            return 0;
    }
    if (t_npending < 16)
        t_pending[t_npending++] = c;
    return 0;
}

/* ------------------------------------------------------------- the API */

int ncclGetUniqueId(ncclUniqueId *id);
int ncclCommInitRank(comm **out, int nranks, ncclUniqueId id, int rank);
int ncclCommDestroy(comm *c);
int ncclCommSplit(comm *c, int color, int key, comm **out, void *config);
int ncclCommCount(const comm *c, int *n);
int ncclCommUserRank(const comm *c, int *r);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, comm *c, void *st);
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, comm *c, void *st);
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, comm *c, void *st);
int ncclAllGather(const void *s, void *r, size_t n, int dt, comm *c, void *st);
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, comm *c, void *st);
int ncclSend(const void *s, size_t n, int dt, int peer, comm *c, void *st);
int ncclRecv(void *r, size_t n, int dt, int peer, comm *c, void *st);

int ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "fake-%d", (int)getpid());
    return 0;
}

int ncclCommInitRank(comm **out, int nranks, ncclUniqueId id, int rank)
{
    comm *c = calloc(1, sizeof *c);
    if (!c)
        return 1;
    c->rank = rank;
    c->nranks = nranks;
    for (size_t i = 0; i < sizeof id.internal; i++)
        c->hash = c->hash * 31 + (unsigned char)id.internal[i];
    plugin_open(c);
    *out = c;
    return 0;
}

/* Every rank in the same color: the new communicator has the parent's ranks. */
int ncclCommSplit(comm *c, int color, int key, comm **out, void *config)
{
    (void)key, (void)config;
    comm *n = calloc(1, sizeof *n);
    if (!n)
        return 1;
    n->rank = c->rank;
    n->nranks = c->nranks;
    n->hash = c->hash * 131 + (uint64_t)color + 1;
    plugin_open(n);
    *out = n;
    return 0;
}

int ncclCommDestroy(comm *c)
{
    if (c && c->plugin) {
        ((const nccl_profiler_v1 *)c->plugin)->finalize(c->ctx);
        say("finalize");
    }
    free(c);
    return 0;
}

int ncclCommCount(const comm *c, int *n) { return *n = c->nranks, 0; }
int ncclCommUserRank(const comm *c, int *r) { return *r = c->rank, 0; }

int ncclGroupStart(void)
{
    t_group++;
    return 0;
}

int ncclGroupEnd(void)
{
    if (t_group == 0)
        return 5; /* ncclInvalidUsage */
    if (--t_group == 0) {
        for (int i = 0; i < t_npending; i++)
            launch(t_pending[i]);
        t_npending = 0;
    }
    return 0;
}

int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, comm *c, void *st)
{
    (void)op, (void)st;
    return enqueue(c, (task){4, n, dt, -1, -1, s, r});
}
int ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, comm *c, void *st)
{
    (void)st;
    return enqueue(c, (task){0, n, dt, root, -1, s, r});
}
int ncclReduce(const void *s, void *r, size_t n, int dt, int op, int root, comm *c, void *st)
{
    (void)op, (void)st;
    return enqueue(c, (task){1, n, dt, root, -1, s, r});
}
int ncclAllGather(const void *s, void *r, size_t n, int dt, comm *c, void *st)
{
    (void)st;
    return enqueue(c, (task){2, n, dt, -1, -1, s, r});
}
int ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, comm *c, void *st)
{
    (void)op, (void)st;
    return enqueue(c, (task){3, n, dt, -1, -1, s, r});
}
int ncclSend(const void *s, size_t n, int dt, int peer, comm *c, void *st)
{
    (void)st;
    return enqueue(c, (task){6, n, dt, -1, peer, s, NULL});
}
int ncclRecv(void *r, size_t n, int dt, int peer, comm *c, void *st)
{
    (void)st;
    return enqueue(c, (task){7, n, dt, -1, peer, NULL, r});
}
