/*
 * nccl.c - the `nccl` hook of libmlprof_preload.so: NCCL's host calls as
 * spans (domain "nccl"), by interposition, for an NCCL that has no profiler
 * plugin interface (before 2.23) or runs without mlprof's plugin
 * (nccl_plugin.c).
 *
 * Spans: ncclAllReduce, ncclBroadcast (and ncclBcast), ncclReduce,
 * ncclAllGather, ncclReduceScatter, ncclSend, ncclRecv, each with op (NCCL's
 * name of the function: AllReduce...), bytes (count x the type's size, count
 * as the call takes it: per rank for AllGather and ReduceScatter), dtype
 * (ncclFloat32...), count, root or peer, comm, comm_size, rank, and for the
 * collectives seq: the number of the collective among those of its function
 * on its communicator, from 0, as NCCL numbers them for its profiler plugin
 * (comm->seqNumber[func]). A group (ncclGroupStart to the outermost
 * ncclGroupEnd) is one span, ncclGroup, around its calls; ncclCommInitRank
 * and ncclCommSplit are spans too.
 *
 * comm: an id every member computes alike without communicating: a hash of
 * the ncclUniqueId that ncclCommInitRank receives (the same bytes on every
 * rank); for ncclCommSplit a mix of the parent's id, how many splits the
 * parent made before and the color. Not covered: ncclCommInitAll (one
 * process, several devices), whose communicators have no id in common.
 *
 * Never twice: while mlprof's profiler plugin has a communicator with
 * collective events on (mlprof__nccl_plugin_live), NCCL's own events are
 * recorded there, and these functions only forward, but for the collectives
 * of one-rank communicators, which NCCL never shows its profiler. Both are in this one
 * library, so the flag is shared without any lookup.
 *
 * The spans are the thread's own begin and end records (no lock, no
 * allocation): NCCL requires a group's calls on the thread that opened it,
 * so they nest. The communicators are kept in a fixed table, filled at their
 * creation under a mutex and read without one.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "../record/produce.h"
#include "hook.h"
#include "nccl_internal.h"

#define EXPORT __attribute__((visibility("default")))

int mlprof__nccl_plugin_live;
__thread int mlprof__nccl_init_nranks, mlprof__nccl_init_rank;

/* ----------------------------------------------------- NCCL's data types */

/* ncclDataType_t by value: ncclInt8 = 0 ... ncclBfloat16 = 9, then the
 * 8-bit floats of later versions. */
static const struct {
    const char *name;
    int size;
} k_types[] = {{"ncclInt8", 1},    {"ncclUint8", 1},   {"ncclInt32", 4},   {"ncclUint32", 4},
               {"ncclInt64", 8},   {"ncclUint64", 8},  {"ncclFloat16", 2}, {"ncclFloat32", 4},
               {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1}};
#define NTYPES (int)(sizeof k_types / sizeof k_types[0])

const char *mlprof__nccl_dtype_name(int dtype) { return dtype >= 0 && dtype < NTYPES ? k_types[dtype].name : NULL; }
int mlprof__nccl_dtype_size_of(int dtype) { return dtype >= 0 && dtype < NTYPES ? k_types[dtype].size : 0; }
int mlprof__nccl_dtype_size(const char *name)
{
    for (int i = 0; name && i < NTYPES; i++) {
        if (strcmp(k_types[i].name, name) == 0)
            return k_types[i].size;
    }
    return 0;
}

/* ---------------------------------------------------------- the calls */

/* ncclFunc_t's order, which the seq counters follow. */
enum { F_BROADCAST, F_REDUCE, F_ALLGATHER, F_REDUCESCATTER, F_ALLREDUCE, F_SENDRECV, F_SEND, F_RECV, NFUNC };
static const char *const k_ops[NFUNC] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                         "AllReduce", "SendRecv", "Send",      "Recv"};

enum { S_BROADCAST, S_REDUCE, S_ALLGATHER, S_REDUCESCATTER, S_ALLREDUCE, S_SEND, S_RECV, S_GROUP, S_INIT,
       S_SPLIT, S_N };
static const char *const k_span_names[S_N] = {"ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter",
                                              "ncclAllReduce", "ncclSend",   "ncclRecv",      "ncclGroup",
                                              "ncclCommInitRank", "ncclCommSplit"};
static mlprof_span *g_span[S_N];
static mlprof_domain *g_domain;

static mlprof_span *span(int s)
{
    mlprof_span *t = __atomic_load_n(&g_span[s], __ATOMIC_ACQUIRE);
    if (t)
        return t;
    mlprof_domain *d = __atomic_load_n(&g_domain, __ATOMIC_ACQUIRE);
    if (!d) {
        d = mlprof_domain_create("nccl");
        __atomic_store_n(&g_domain, d, __ATOMIC_RELEASE);
    }
    return mlprof_task_once(&g_span[s], d, k_span_names[s]);
}

/* --------------------------------------------------- the communicators */

#define COMMS 256 /* a power of two */
typedef struct {
    void *comm; /* the ncclComm_t; NULL: free */
    uint64_t id, splits;
    int rank, size;
    uint64_t seq[NFUNC];
} comm_info;
static comm_info g_comms[COMMS];
static pthread_mutex_t g_comms_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t slot_of(const void *comm) { return (uint32_t)(((uintptr_t)comm >> 4) * 0x9E3779B1u) & (COMMS - 1); }

static comm_info *comm_get(void *comm)
{
    if (!comm)
        return NULL;
    for (uint32_t i = slot_of(comm), k = 0; k < COMMS; k++, i = (i + 1) & (COMMS - 1)) {
        void *c = __atomic_load_n(&g_comms[i].comm, __ATOMIC_ACQUIRE);
        if (c == comm)
            return &g_comms[i];
        if (!c)
            return NULL;
    }
    return NULL;
}

/* A communicator made: its entry filled before it is published. A pointer
 * that NCCL reuses after ncclCommDestroy takes its old entry over. */
static void comm_add(void *comm, uint64_t id, int rank, int size)
{
    if (!comm)
        return;
    pthread_mutex_lock(&g_comms_lock);
    comm_info *ci = comm_get(comm);
    for (uint32_t i = slot_of(comm), k = 0; !ci && k < COMMS; k++, i = (i + 1) & (COMMS - 1)) {
        void *c = g_comms[i].comm;
        if (!c || c == (void *)(uintptr_t)1) /* free, or a destroyed one's */
            ci = &g_comms[i];
    }
    if (ci) {
        ci->id = id & INT64_MAX; /* a positive number in the trace */
        ci->rank = rank;
        ci->size = size;
        ci->splits = 0;
        memset(ci->seq, 0, sizeof ci->seq);
        __atomic_store_n(&ci->comm, comm, __ATOMIC_RELEASE);
    } else {
        mlprof__log(MLPROF_LOG_WARN, "nccl hook: more than %d communicators; the others' calls have no comm", COMMS);
    }
    pthread_mutex_unlock(&g_comms_lock);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

/* -------------------------------------------------------- the wrappers */

static __thread int t_depth;    /* inside one of ours: NCCL calling itself is not a second span */
static __thread int t_group;    /* ncclGroupStart depth */
static __thread int t_group_on; /* the outermost group is a span */

/* Whether this call is recorded here: the hook is on, the plugin does not
 * record NCCL's events, and mlprof is not the caller. */
static int on(void)
{
    return mlprof__busy == 0 && mlprof__hook_on(MLPROF__HOOK_NCCL) &&
           !__atomic_load_n(&mlprof__nccl_plugin_live, __ATOMIC_ACQUIRE);
}

static void *real(void **slot, const char *name) { return mlprof__hook_real_cached(slot, name, 1); }
#define REAL(type, name)                                                                                    \
    ({                                                                                                      \
        static void *slot_;                                                                                 \
        (type *)real(&slot_, name);                                                                         \
    })

static void data_args(int f, size_t count, int dtype, comm_info *ci)
{
    const char *name = mlprof__nccl_dtype_name(dtype);
    mlprof_arg_str("op", k_ops[f]);
    mlprof_arg_int("bytes", (int64_t)count * mlprof__nccl_dtype_size_of(dtype));
    if (name)
        mlprof_arg_str("dtype", name);
    else
        mlprof_arg_int("dtype", dtype);
    mlprof_arg_int("count", (int64_t)count);
    if (ci) {
        mlprof_arg_int("comm", (int64_t)ci->id);
        mlprof_arg_int("comm_size", ci->size);
        mlprof_arg_int("rank", ci->rank);
    }
}

/* A collective: numbered whenever the hook is on (a paused rank numbers
 * them as its peers do), a span while recording. On a communicator of one
 * rank NCCL runs it as a local copy and returns before its profiler hears of
 * it (NCCL 2.28 seen on an H200: the plugin loaded, no collective event), so
 * those are recorded here even while the plugin is live. */
static int coll_begin(int s, int f, size_t count, int dtype, int root, void *comm)
{
    if (t_depth++ || mlprof__busy || !mlprof__hook_on(MLPROF__HOOK_NCCL))
        return 0;
    comm_info *ci = comm_get(comm);
    if (__atomic_load_n(&mlprof__nccl_plugin_live, __ATOMIC_ACQUIRE) && !(ci && ci->size == 1))
        return 0;
    uint64_t seq = ci ? __atomic_fetch_add(&ci->seq[f], 1, __ATOMIC_RELAXED) : 0;
    if (!__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED))
        return 0;
    mlprof_begin(span(s));
    data_args(f, count, dtype, ci);
    if (root >= 0)
        mlprof_arg_int("root", root);
    if (ci)
        mlprof_arg_int("seq", (int64_t)seq);
    return 1;
}

static int p2p_begin(int s, int f, size_t count, int dtype, int peer, void *comm)
{
    if (t_depth++ || !on() || !__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED))
        return 0;
    mlprof_begin(span(s));
    data_args(f, count, dtype, comm_get(comm));
    mlprof_arg_int("peer", peer);
    return 1;
}

static int done(int recorded, int s, int rc)
{
    if (recorded) {
        if (rc != NCCL_OK)
            mlprof_arg_int("error", rc);
        mlprof_end(span(s));
    }
    t_depth--;
    return rc;
}

typedef int fn_allreduce(const void *, void *, size_t, int, int, void *, void *);
typedef int fn_bcast(const void *, void *, size_t, int, int, void *, void *);
typedef int fn_bcast_old(void *, size_t, int, int, void *, void *);
typedef int fn_reduce(const void *, void *, size_t, int, int, int, void *, void *);
typedef int fn_allgather(const void *, void *, size_t, int, void *, void *);
typedef int fn_send(const void *, size_t, int, int, void *, void *);
typedef int fn_recv(void *, size_t, int, int, void *, void *);
typedef int fn_void(void);
typedef struct {
    char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
} nccl_unique_id;
typedef int fn_init(void **, int, nccl_unique_id, int);
typedef int fn_init_config(void **, int, nccl_unique_id, int, void *);
typedef int fn_split(void *, int, int, void **, void *);
typedef int fn_comm(void *);
typedef int fn_comm_int(void *, int *);

/* NCCL's API (nccl.h), every handle a pointer, every enum an int. */
int ncclAllReduce(const void *, void *, size_t, int, int, void *, void *);
int ncclBroadcast(const void *, void *, size_t, int, int, void *, void *);
int ncclBcast(void *, size_t, int, int, void *, void *);
int ncclReduce(const void *, void *, size_t, int, int, int, void *, void *);
int ncclAllGather(const void *, void *, size_t, int, void *, void *);
int ncclReduceScatter(const void *, void *, size_t, int, int, void *, void *);
int ncclSend(const void *, size_t, int, int, void *, void *);
int ncclRecv(void *, size_t, int, int, void *, void *);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclCommInitRank(void **, int, nccl_unique_id, int);
int ncclCommInitRankConfig(void **, int, nccl_unique_id, int, void *);
int ncclCommSplit(void *, int, int, void **, void *);
int ncclCommDestroy(void *);
int ncclCommAbort(void *);

EXPORT int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, void *comm,
                         void *stream)
{
    int r = coll_begin(S_ALLREDUCE, F_ALLREDUCE, count, datatype, -1, comm);
    return done(r, S_ALLREDUCE,
                REAL(fn_allreduce, "ncclAllReduce")(sendbuff, recvbuff, count, datatype, op, comm, stream));
}

EXPORT int ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, int datatype, int root, void *comm,
                         void *stream)
{
    int r = coll_begin(S_BROADCAST, F_BROADCAST, count, datatype, root, comm);
    return done(r, S_BROADCAST,
                REAL(fn_bcast, "ncclBroadcast")(sendbuff, recvbuff, count, datatype, root, comm, stream));
}

EXPORT int ncclBcast(void *buff, size_t count, int datatype, int root, void *comm, void *stream)
{
    int r = coll_begin(S_BROADCAST, F_BROADCAST, count, datatype, root, comm);
    return done(r, S_BROADCAST, REAL(fn_bcast_old, "ncclBcast")(buff, count, datatype, root, comm, stream));
}

EXPORT int ncclReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, int root, void *comm,
                      void *stream)
{
    int r = coll_begin(S_REDUCE, F_REDUCE, count, datatype, root, comm);
    return done(r, S_REDUCE,
                REAL(fn_reduce, "ncclReduce")(sendbuff, recvbuff, count, datatype, op, root, comm, stream));
}

EXPORT int ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, int datatype, void *comm,
                         void *stream)
{
    int r = coll_begin(S_ALLGATHER, F_ALLGATHER, sendcount, datatype, -1, comm);
    return done(r, S_ALLGATHER,
                REAL(fn_allgather, "ncclAllGather")(sendbuff, recvbuff, sendcount, datatype, comm, stream));
}

EXPORT int ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, int datatype, int op,
                             void *comm, void *stream)
{
    int r = coll_begin(S_REDUCESCATTER, F_REDUCESCATTER, recvcount, datatype, -1, comm);
    return done(r, S_REDUCESCATTER,
                REAL(fn_allreduce, "ncclReduceScatter")(sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
}

EXPORT int ncclSend(const void *sendbuff, size_t count, int datatype, int peer, void *comm, void *stream)
{
    int r = p2p_begin(S_SEND, F_SEND, count, datatype, peer, comm);
    return done(r, S_SEND, REAL(fn_send, "ncclSend")(sendbuff, count, datatype, peer, comm, stream));
}

EXPORT int ncclRecv(void *recvbuff, size_t count, int datatype, int peer, void *comm, void *stream)
{
    int r = p2p_begin(S_RECV, F_RECV, count, datatype, peer, comm);
    return done(r, S_RECV, REAL(fn_recv, "ncclRecv")(recvbuff, count, datatype, peer, comm, stream));
}

EXPORT int ncclGroupStart(void)
{
    if (t_group++ == 0 && !t_depth && on() && __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED)) {
        mlprof_begin(span(S_GROUP));
        t_group_on = 1;
    }
    return REAL(fn_void, "ncclGroupStart")();
}

EXPORT int ncclGroupEnd(void)
{
    int rc = REAL(fn_void, "ncclGroupEnd")();
    if (t_group > 0 && --t_group == 0 && t_group_on) {
        t_group_on = 0;
        if (rc != NCCL_OK)
            mlprof_arg_int("error", rc);
        mlprof_end(span(S_GROUP));
    }
    return rc;
}

/* The communicator's making: a span (never the plugin's), and the entry the
 * calls on it read. The plugin's v1-v3 init, called from inside, learns its
 * size from the thread-locals. */
static int comm_made(int recorded, int s, int rc, void **comm, uint64_t id, int rank, int nranks)
{
    if (rc == NCCL_OK && comm && *comm)
        comm_add(*comm, id, rank, nranks);
    if (recorded) {
        mlprof_arg_int("comm", (int64_t)(id & INT64_MAX));
        mlprof_arg_int("comm_size", nranks);
        mlprof_arg_int("rank", rank);
    }
    mlprof__nccl_init_nranks = mlprof__nccl_init_rank = 0;
    return done(recorded, s, rc);
}

static int init_begin(int nranks, int rank)
{
    mlprof__nccl_init_nranks = nranks;
    mlprof__nccl_init_rank = rank;
    if (t_depth++ || mlprof__busy || !mlprof__hook_on(MLPROF__HOOK_NCCL) ||
        !__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED))
        return 0;
    mlprof_begin(span(S_INIT));
    return 1;
}

EXPORT int ncclCommInitRank(void **comm, int nranks, nccl_unique_id commId, int rank)
{
    int r = init_begin(nranks, rank);
    int rc = REAL(fn_init, "ncclCommInitRank")(comm, nranks, commId, rank);
    return comm_made(r, S_INIT, rc, comm, fnv(FNV0, commId.internal, sizeof commId.internal), rank, nranks);
}

EXPORT int ncclCommInitRankConfig(void **comm, int nranks, nccl_unique_id commId, int rank, void *config)
{
    int r = init_begin(nranks, rank);
    int rc = REAL(fn_init_config, "ncclCommInitRankConfig")(comm, nranks, commId, rank, config);
    return comm_made(r, S_INIT, rc, comm, fnv(FNV0, commId.internal, sizeof commId.internal), rank, nranks);
}

EXPORT int ncclCommSplit(void *comm, int color, int key, void **newcomm, void *config)
{
    comm_info *parent = comm_get(comm);
    uint64_t id = 0;
    if (parent) { /* splits are collective over the parent: every member counts them alike */
        uint64_t n = __atomic_fetch_add(&parent->splits, 1, __ATOMIC_RELAXED);
        id = fnv(fnv(fnv(FNV0, &parent->id, sizeof parent->id), &n, sizeof n), &color, sizeof color);
    }
    int recorded = !t_depth && !mlprof__busy && mlprof__hook_on(MLPROF__HOOK_NCCL) &&
                   __atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED);
    t_depth++;
    if (recorded)
        mlprof_begin(span(S_SPLIT));
    int rc = REAL(fn_split, "ncclCommSplit")(comm, color, key, newcomm, config);
    int rank = -1, size = -1;
    if (rc == NCCL_OK && newcomm && *newcomm) { /* NCCL_SPLIT_NOCOLOR gives no communicator */
        static void *s_rank, *s_count;
        fn_comm_int *get_rank = (fn_comm_int *)mlprof__hook_real_cached(&s_rank, "ncclCommUserRank", 0);
        fn_comm_int *get_count = (fn_comm_int *)mlprof__hook_real_cached(&s_count, "ncclCommCount", 0);
        if (get_rank)
            get_rank(*newcomm, &rank);
        if (get_count)
            get_count(*newcomm, &size);
    }
    return comm_made(recorded, S_SPLIT, rc, newcomm, id, rank, size);
}

/* A destroyed communicator's pointer may come back for another one. */
static void comm_gone(void *comm)
{
    pthread_mutex_lock(&g_comms_lock);
    comm_info *ci = comm_get(comm);
    if (ci) /* keep the probe chain: mark it with a pointer no communicator has */
        __atomic_store_n(&ci->comm, (void *)(uintptr_t)1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_comms_lock);
}

EXPORT int ncclCommDestroy(void *comm)
{
    comm_gone(comm);
    return REAL(fn_comm, "ncclCommDestroy")(comm);
}

EXPORT int ncclCommAbort(void *comm)
{
    comm_gone(comm);
    return REAL(fn_comm, "ncclCommAbort")(comm);
}
