/*
 * mpi.c - the `mpi` hook: MPI's point-to-point, collective and one-sided
 * calls as spans (domain "mpi", named after the function), through the
 * standard's profiling interface: each MPI_X here records and calls PMPI_X.
 *
 * Where it works: in libmlprof_preload.so (mlprof run), whose MPI_X come
 * before the MPI library's in the global scope, and in libmlprof.so itself,
 * for a program linked with it before the MPI library (`mpicc app.c -lmlprof`
 * puts -lmpi after it). In both it is on while the hooks key has `mpi` (it
 * does by default: a program that makes no MPI call never enters it). Each
 * wrapper calls PMPI_X, never the next MPI_X, so a program linked with
 * libmlprof and run under mlprof run records each call once.
 *
 * Arguments (issue 20's contract, section 4): bytes, peer (rank in
 * MPI_COMM_WORLD), root, tag, comm (an id every member computes alike),
 * comm_size, seq and request. A collective's seq counts the collectives of its
 * communicator; a message's counts the messages of its (comm, source,
 * destination, tag), which MPI delivers in order (non-overtaking), so the
 * n-th send of a stream is the n-th receive of it. The sender records the start
 * of a flow and the receiver its end with the same id, made of those five
 * values: `mlprof merge` links them across the ranks' traces.
 *
 * The communicator's id: MPI_COMM_WORLD's is 1; one made by MPI_Comm_dup,
 * _split, _split_type or _create mixes its parent's id, how many communicators
 * the parent had made before (the same on every member, since making one is
 * collective over the parent) and the lowest world rank among its members
 * (which tells apart the communicators one split makes); one met without its
 * making (MPI_COMM_SELF, a cartesian one) mixes its size and members.
 *
 * Messages and collectives are numbered whenever the hook is on, recording or
 * not (a rank paused, or one that starts later, numbers them as its peers do);
 * spans and flows are made only while recording. Per call: two clock reads
 * and a few table look-ups and ring writes, without locks or allocation
 * (bench/bench_mpi.py).
 *
 * Nonblocking collectives: MPI_Ibarrier, _Ibcast, _Ireduce, _Iallreduce,
 * _Iallgather and _Ialltoall. Not covered: the other nonblocking collectives,
 * persistent requests (MPI_Send_init, MPI_Start), matched probes (MPI_Mprobe,
 * MPI_Mrecv), and peers across an
 * intercommunicator (given as their rank in the remote group). A wildcard
 * receive takes its message's seq when it completes: while it is pending, a
 * receive posted later on the same stream numbers its messages one too early.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../record/produce.h"
#include "hook.h"
#include "mpi_internal.h"

#define EXPORT __attribute__((visibility("default")))

typedef mlprof__mpi_h H;

/* ------------------------------------------------------- the functions */

#define MPI_FUNCTIONS(X)                                                                                  \
    X(Init) X(Init_thread) X(Finalize) X(Send) X(Ssend) X(Bsend) X(Rsend) X(Recv) X(Isend) X(Issend)       \
    X(Irecv) X(Sendrecv) X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany)           \
    X(Testsome) X(Request_free) X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Allgather) X(Allgatherv)      \
    X(Gather) X(Gatherv) X(Scatter) X(Scatterv) X(Alltoall) X(Alltoallv) X(Reduce_scatter)                 \
    X(Reduce_scatter_block) X(Scan) X(Exscan) X(Ibarrier) X(Ibcast) X(Ireduce) X(Iallreduce) X(Iallgather)  \
    X(Ialltoall) X(Put) X(Get) X(Accumulate) X(Win_fence) X(Comm_dup)         \
    X(Comm_split) X(Comm_split_type) X(Comm_create) X(Comm_free)
#define HELPERS(X)                                                                                        \
    X(Type_size) X(Comm_size) X(Comm_rank) X(Comm_group) X(Group_translate_ranks) X(Group_free)            \
    X(Get_count) X(Win_get_group) X(Initialized)

#define ENUM(n) F_##n,
#define HELPER(n) P_##n,
enum { MPI_FUNCTIONS(ENUM) F_N, HELPERS(HELPER) P_N };
#undef HELPER
#undef ENUM
#define NAME(n) "MPI_" #n,
static const char *const k_names[P_N] = {MPI_FUNCTIONS(NAME) NULL, HELPERS(NAME)};
#undef NAME

static void *g_pmpi[P_N];
static mlprof_span *g_task[F_N];
static mlprof_domain *g_domain;

static void *pmpi(int f)
{
    void *p = __atomic_load_n(&g_pmpi[f], __ATOMIC_ACQUIRE);
    if (p)
        return p;
    char name[64] = "P";
    strcpy(name + 1, k_names[f]);
    p = mlprof__mpi_fn(&g_pmpi[f], name);
    if (!p) { /* the program called MPI_X: PMPI_X must exist */
        mlprof__log(MLPROF_LOG_ERROR, "%s was called, but no library defines %s", k_names[f], name);
        abort();
    }
    return p;
}

static mlprof_span *task(int f)
{
    mlprof_span *t = __atomic_load_n(&g_task[f], __ATOMIC_ACQUIRE);
    if (t)
        return t;
    mlprof_domain *d = __atomic_load_n(&g_domain, __ATOMIC_ACQUIRE);
    if (!d) {
        d = mlprof_domain_create("mpi"); /* the same domain whichever thread makes it */
        __atomic_store_n(&g_domain, d, __ATOMIC_RELEASE);
    }
    return mlprof_task_once(&g_task[f], d, k_names[f]);
}

/* The function types: every handle is an H, every MPI_Aint an intptr_t. */
typedef int fn_h(H);
typedef int fn_hp(H, void *);
typedef int fn_hip(H, int *);
typedef int fn_send(const void *, int, H, int, int, H);
typedef int fn_isend(const void *, int, H, int, int, H, void *);
typedef int fn_recv(void *, int, H, int, int, H, void *);
typedef int fn_irecv(void *, int, H, int, int, H, void *);
typedef int fn_sendrecv(const void *, int, H, int, int, void *, int, H, int, int, H, void *);
typedef int fn_wait(void *, void *);
typedef int fn_test(void *, int *, void *);
typedef int fn_waitall(int, void *, void *);
typedef int fn_waitany(int, void *, int *, void *);
typedef int fn_testall(int, void *, int *, void *);
typedef int fn_testany(int, void *, int *, int *, void *);
typedef int fn_waitsome(int, void *, int *, int *, void *);
typedef int fn_bcast(void *, int, H, int, H);
typedef int fn_reduce(const void *, void *, int, H, H, int, H);
typedef int fn_allreduce(const void *, void *, int, H, H, H);
typedef int fn_allgather(const void *, int, H, void *, int, H, H);
typedef int fn_allgatherv(const void *, int, H, void *, const int *, const int *, H, H);
typedef int fn_gather(const void *, int, H, void *, int, H, int, H);
typedef int fn_gatherv(const void *, int, H, void *, const int *, const int *, H, int, H);
typedef int fn_scatterv(const void *, const int *, const int *, H, void *, int, H, int, H);
typedef int fn_alltoallv(const void *, const int *, const int *, H, void *, const int *, const int *, H, H);
typedef int fn_rscatter(const void *, void *, const int *, H, H, H);
typedef int fn_put(const void *, int, H, int, intptr_t, int, H, H);
typedef int fn_acc(const void *, int, H, int, intptr_t, int, H, H, H);
typedef int fn_fence(int, H);
typedef int fn_split(H, int, int, void *);
typedef int fn_split_type(H, int, int, H, void *);
typedef int fn_translate(H, int, const int *, H, int *);
typedef int fn_get_count(const void *, H, int *);
typedef int fn_init(int *, char ***);
typedef int fn_init_thread(int *, char ***, int, int *);
typedef int fn_void(void);
typedef int fn_free(void *);

#define REAL(type, f) ((type *)pmpi(f))

/* ------------------------------------------------ per thread, per call */

static __thread int t_depth;
static __thread int t_tid;
static int g_ready;      /* MPI initialized and its ABI known: calls are recorded */
static int g_world_rank; /* this process's rank in MPI_COMM_WORLD */
static uint64_t g_flows_lost; /* flow ends the shared queue refused, or streams beyond the table */

static const mlprof__mpi_abi *abi(void) { return mlprof__mpi_abi_get(); }

/* Whether this call is a span: the hook is on, MPI is ready and the call is
 * not made by another MPI call of ours (or by mlprof itself). */
static int enter(void)
{
    return t_depth++ == 0 && mlprof__busy == 0 && mlprof__hook_on(MLPROF__HOOK_MPI) &&
           __atomic_load_n(&g_ready, __ATOMIC_ACQUIRE);
}

static void leave(int on, int f)
{
    if (on)
        mlprof_end(task(f));
    t_depth--;
}

static int tid(void)
{
    if (!t_tid)
        t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}

static int64_t type_size(H dt)
{
    int n = 0;
    REAL(fn_hip, P_Type_size)(dt, &n);
    return n;
}

/* ------------------------------------------------------ communicators */

#define COMMS 1024
#define TOMB ((H)1) /* no MPI library's handle */
#define WORLD_ID 1

typedef struct comm_info {
    H handle;      /* atomic: the key (0 empty, TOMB freed) */
    uint64_t id;
    int size, rank;
    int *world;    /* world rank of each member; NULL: the identity */
    int lowest;    /* the lowest world rank among the members */
    uint64_t coll; /* atomic: collectives so far */
    uint32_t made; /* atomic: communicators made from this one so far */
} comm_info;

static comm_info g_comms[COMMS];
static pthread_mutex_t g_comm_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
}

static size_t slot_of(H h, size_t n) { return (size_t)(mix(0, (uint64_t)h) % n); }

static comm_info *comm_find(H c)
{
    for (size_t i = slot_of(c, COMMS), k = 0; k < COMMS; k++, i = (i + 1) % COMMS) {
        H h = __atomic_load_n(&g_comms[i].handle, __ATOMIC_ACQUIRE);
        if (h == c)
            return &g_comms[i];
        if (h == 0)
            return NULL;
    }
    return NULL;
}

/* Fills in a communicator's members (ctl of g_comm_lock). */
static void comm_members(comm_info *ci, H c)
{
    const mlprof__mpi_abi *a = abi();
    REAL(fn_hip, P_Comm_size)(c, &ci->size);
    REAL(fn_hip, P_Comm_rank)(c, &ci->rank);
    ci->world = NULL;
    ci->lowest = 0;
    if (c == a->comm_world)
        return;
    intptr_t g = 0, wg = 0;
    int *in = malloc(2 * sizeof(int) * (size_t)(ci->size > 0 ? ci->size : 1));
    if (!in || REAL(fn_hp, P_Comm_group)(c, &g) != 0 || REAL(fn_hp, P_Comm_group)(a->comm_world, &wg) != 0) {
        free(in);
        ci->lowest = -1;
        return;
    }
    int *out = in + ci->size;
    for (int r = 0; r < ci->size; r++)
        in[r] = r;
    H gh = mlprof__mpi_handle_at(a, &g, 0), wgh = mlprof__mpi_handle_at(a, &wg, 0);
    REAL(fn_translate, P_Group_translate_ranks)(gh, ci->size, in, wgh, out);
    REAL(fn_free, P_Group_free)(&g);
    REAL(fn_free, P_Group_free)(&wg);
    memmove(in, out, sizeof(int) * (size_t)ci->size);
    ci->world = in;
    ci->lowest = ci->size ? in[0] : -1;
    for (int r = 1; r < ci->size; r++)
        if (in[r] >= 0 && in[r] < ci->lowest)
            ci->lowest = in[r];
}

/* The communicator's entry, made on first sight: parent_id/made say how it
 * was made (0: not seen, the id comes from its members). */
static comm_info *comm_add(H c, uint64_t parent_id, uint32_t made)
{
    mlprof__busy++; /* the translation table is mlprof's memory */
    pthread_mutex_lock(&g_comm_lock);
    comm_info *ci = comm_find(c);
    size_t i = slot_of(c, COMMS), k = 0;
    for (; !ci && k < COMMS; k++, i = (i + 1) % COMMS) {
        H h = g_comms[i].handle;
        if (h != 0 && h != TOMB)
            continue;
        ci = &g_comms[i];
        comm_members(ci, c);
        if (c == abi()->comm_world)
            ci->id = WORLD_ID;
        else if (parent_id)
            ci->id = mix(mix(parent_id, made), (uint64_t)ci->lowest);
        else {
            ci->id = mix(0x6d706963u, (uint64_t)ci->size);
            for (int r = 0; r < ci->size; r++)
                ci->id = mix(ci->id, (uint64_t)(ci->world ? ci->world[r] : r));
        }
        ci->id &= (1ull << 52) - 1; /* exact in a JSON double */
        ci->coll = 0;
        ci->made = 0;
        __atomic_store_n(&ci->handle, c, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_comm_lock);
    mlprof__busy--;
    return ci;
}

/* A communicator's entry; NULL only when the table is full (then the calls
 * on it are spans without comm, seq or flows). */
static comm_info *comm_get(H c)
{
    c = mlprof__mpi_norm(abi(), c);
    comm_info *ci = comm_find(c);
    return ci ? ci : comm_add(c, 0, 0);
}

static void comm_drop(H c)
{
    mlprof__busy++;
    pthread_mutex_lock(&g_comm_lock);
    comm_info *ci = comm_find(mlprof__mpi_norm(abi(), c));
    if (ci) {
        free(ci->world);
        ci->world = NULL;
        __atomic_store_n(&ci->handle, TOMB, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_comm_lock);
    mlprof__busy--;
}

static int world_of(const comm_info *ci, int r)
{
    if (!ci || !ci->world || r < 0 || r >= ci->size)
        return r;
    return ci->world[r];
}

/* A communicator newly made from parent (collective over it). */
static void comm_made(H parent, const void *out)
{
    const mlprof__mpi_abi *a = abi();
    if (!a || !__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE))
        return;
    H c = mlprof__mpi_handle_at(a, out, 0);
    if (c == a->comm_null)
        return;
    comm_info *p = comm_get(parent);
    uint32_t made = p ? __atomic_add_fetch(&p->made, 1, __ATOMIC_RELAXED) : 0;
    comm_drop(c); /* a handle the library reuses is a new communicator */
    comm_add(c, p ? p->id : 0, made);
}

/* ------------------------------------------------------ message streams */

#define STREAMS 16384

static uint64_t g_stream_key[STREAMS]; /* atomic: 0 empty */
static uint64_t g_stream_next[STREAMS];

static uint64_t stream_key(uint64_t comm, int src, int dst, int tag)
{
    return mix(mix(mix(mix(0x70327032u, comm), (uint64_t)(uint32_t)src), (uint64_t)(uint32_t)dst),
               (uint64_t)(uint32_t)tag) | 1;
}

/* The next message number of a stream (lock-free); UINT64_MAX when the table
 * is full. */
static uint64_t stream_next(uint64_t key)
{
    for (size_t i = key % STREAMS, k = 0; k < STREAMS; k++, i = (i + 1) % STREAMS) {
        uint64_t cur = __atomic_load_n(&g_stream_key[i], __ATOMIC_ACQUIRE);
        if (cur == 0) {
            uint64_t zero = 0;
            if (__atomic_compare_exchange_n(&g_stream_key[i], &zero, key, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                cur = key;
            else
                cur = zero;
        }
        if (cur == key)
            return __atomic_fetch_add(&g_stream_next[i], 1, __ATOMIC_RELAXED);
    }
    __atomic_add_fetch(&g_flows_lost, 1, __ATOMIC_RELAXED);
    return UINT64_MAX;
}

static uint64_t flow_id(uint64_t key, uint64_t seq) { return mix(key, seq) & ((1ull << 52) - 1); }

/* Flow ends wait in a ring per thread (one producer, the thread; one
 * consumer, the drain, under the control lock), so that a message costs its
 * thread no lock and no allocation; the clock_sync module's flush hands them
 * to the producers' queue at each drain. A full ring (many messages between
 * two drains) sends the end straight to that queue. */
#define RING 8192

typedef struct flow_end {
    uint64_t id, ns;
    char ph;
} flow_end;

typedef struct flow_ring {
    struct flow_ring *next; /* the list of every thread's ring, never shortened */
    uint32_t head;          /* atomic: written by the thread */
    uint32_t tail;          /* atomic: written by the drain */
    int tid;
    flow_end e[RING];
} flow_ring;

static flow_ring *g_rings; /* atomic list head */
static __thread flow_ring *t_ring;

static void flow_now(const flow_end *f, int thread)
{
    mlprof__busy++;
    if (mlprof__produce_flow_end(NULL, f->ph, f->id, thread, f->ns, "mpi", "MPI message") != MLPROF_OK)
        __atomic_add_fetch(&g_flows_lost, 1, __ATOMIC_RELAXED);
    mlprof__busy--;
}

static flow_ring *ring(void)
{
    if (t_ring)
        return t_ring;
    mlprof__busy++;
    flow_ring *r = mlprof__calloc(1, sizeof *r);
    mlprof__busy--;
    if (!r)
        return NULL;
    r->tid = tid();
    r->next = __atomic_load_n(&g_rings, __ATOMIC_ACQUIRE);
    while (!__atomic_compare_exchange_n(&g_rings, &r->next, r, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
    return t_ring = r;
}

/* One end of a message's flow, bound to the span around ns; only while the
 * spans are recorded (the numbering above goes on while they are not, so that
 * a rank paused or started later still numbers its messages as its peers do). */
static void flow(char ph, uint64_t id, uint64_t ns)
{
    if (!__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED) ||
        !__atomic_load_n((const unsigned char *)(const void *)task(F_Send), __ATOMIC_RELAXED))
        return;
    flow_end f = {id, ns, ph};
    flow_ring *r = ring();
    uint32_t h = r ? r->head : 0;
    if (!r || h - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >= RING) {
        flow_now(&f, tid());
        return;
    }
    r->e[h % RING] = f;
    __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}

/* The drain's side (ctl_lock held): every ring emptied into the queue, or
 * dropped when the drain discards. */
void mlprof__mpi_flush(int discard)
{
    for (flow_ring *r = __atomic_load_n(&g_rings, __ATOMIC_ACQUIRE); r; r = r->next) {
        uint32_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), t = r->tail;
        for (; !discard && t != h; t++)
            flow_now(&r->e[t % RING], r->tid);
        __atomic_store_n(&r->tail, h, __ATOMIC_RELEASE);
    }
}

/* ------------------------------------------------------------ requests */

#define REQUESTS 8192

typedef struct req_info {
    int recv;
    int coll;         /* a nonblocking collective's: its seq is the collective's */
    int peer, tag;    /* world rank and tag; a receive's may be wildcards */
    int comm_peer;    /* the peer's rank in comm */
    comm_info *ci;
    int64_t bytes;    /* a send's */
    uint64_t seq;     /* UINT64_MAX: taken at completion */
    uint64_t number;  /* the request argument */
} req_info;

/* A slot of the table: the key apart, so that filling in the rest never
 * touches it. */
typedef struct req_slot {
    H handle; /* atomic: the key (0 empty, TOMB done) */
    req_info info;
} req_slot;

static req_slot g_reqs[REQUESTS];
static uint64_t g_req_number; /* atomic */

static req_slot *req_find(H r)
{
    for (size_t i = slot_of(r, REQUESTS), k = 0; k < REQUESTS; k++, i = (i + 1) % REQUESTS) {
        H h = __atomic_load_n(&g_reqs[i].handle, __ATOMIC_ACQUIRE);
        if (h == r)
            return &g_reqs[i];
        if (h == 0)
            return NULL;
    }
    return NULL;
}

/* Remembers a nonblocking call's request until its completion. */
static void req_add(H r, const req_info *info)
{
    r = mlprof__mpi_norm(abi(), r);
    if (r == 0 || r == TOMB || r == abi()->request_null)
        return;
    for (size_t i = slot_of(r, REQUESTS), k = 0; k < REQUESTS; k++, i = (i + 1) % REQUESTS) {
        H h = __atomic_load_n(&g_reqs[i].handle, __ATOMIC_ACQUIRE);
        if ((h == 0 || h == TOMB) &&
            __atomic_compare_exchange_n(&g_reqs[i].handle, &h, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            g_reqs[i].info = *info;
            return;
        }
    }
    __atomic_add_fetch(&g_flows_lost, 1, __ATOMIC_RELAXED);
}

/* Takes a completed request's entry out (copied to *out); 0 when not ours. */
static int req_take(H r, req_info *out)
{
    req_slot *slot = req_find(mlprof__mpi_norm(abi(), r));
    if (!slot)
        return 0;
    *out = slot->info;
    __atomic_store_n(&slot->handle, TOMB, __ATOMIC_RELEASE);
    return 1;
}

/* --------------------------------------------------------- the spans */

static void comm_args(const comm_info *ci)
{
    if (!ci)
        return;
    mlprof_arg_int("comm", (int64_t)ci->id);
    mlprof_arg_int("comm_size", ci->size);
}

/* A send: its span's arguments; *id the flow's, 0 for none (MPI_PROC_NULL). */
static void send_args(int count, H dt, int dest, int tag, H comm, uint64_t *id, int64_t *bytes_out,
                      comm_info **ci_out, uint64_t *seq_out)
{
    comm_info *ci = comm_get(comm);
    int64_t bytes = count * type_size(dt);
    mlprof_arg_int("bytes", bytes);
    *id = 0;
    *seq_out = UINT64_MAX;
    if (bytes_out)
        *bytes_out = bytes;
    if (ci_out)
        *ci_out = ci;
    if (dest == abi()->proc_null)
        return;
    int peer = world_of(ci, dest);
    mlprof_arg_int("peer", peer);
    mlprof_arg_int("tag", tag);
    comm_args(ci);
    if (!ci)
        return;
    uint64_t key = stream_key(ci->id, g_world_rank, peer, tag);
    uint64_t seq = stream_next(key);
    if (seq == UINT64_MAX)
        return;
    mlprof_arg_int("seq", (int64_t)seq);
    *seq_out = seq;
    *id = flow_id(key, seq);
}

static int status_int(const void *status, int off)
{
    int v;
    memcpy(&v, (const char *)status + off, sizeof v);
    return v;
}

/* A receive that completed (status: the library's): the span's arguments
 * and the flow's end. seq is the one taken at its post, or UINT64_MAX. */
static void recv_done(comm_info *ci, const void *status, uint64_t seq, uint64_t ns, int args)
{
    const mlprof__mpi_abi *a = abi();
    int src = status_int(status, a->source_offset), tag = status_int(status, a->tag_offset);
    if (src == a->proc_null)
        return;
    int n = 0;
    REAL(fn_get_count, P_Get_count)(status, a->byte, &n);
    int peer = world_of(ci, src);
    if (args) {
        mlprof_arg_int("bytes", n);
        mlprof_arg_int("peer", peer);
        mlprof_arg_int("tag", tag);
        comm_args(ci);
    }
    if (!ci)
        return;
    uint64_t key = stream_key(ci->id, peer, g_world_rank, tag);
    if (seq == UINT64_MAX)
        seq = stream_next(key);
    if (seq == UINT64_MAX)
        return;
    if (args)
        mlprof_arg_int("seq", (int64_t)seq);
    flow('f', flow_id(key, seq), ns);
}

static uint64_t mid(uint64_t a, uint64_t b) { return a + (b - a) / 2; }

/* The status to hand the library: the caller's, or ours when it ignores it. */
typedef struct status_buf {
    char bytes[64];
} status_buf;

static void *status_or(void *user, status_buf *own)
{
    return (intptr_t)user == abi()->status_ignore ? own->bytes : user;
}

/* ----------------------------------------------------- point-to-point */

static int blocking_send(int f, const void *buf, int count, H dt, int dest, int tag, H comm)
{
    int on = enter();
    uint64_t id = 0, seq, t0 = 0;
    if (on) {
        mlprof_begin(task(f));
        send_args(count, dt, dest, tag, comm, &id, NULL, NULL, &seq);
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_send, f)(buf, count, dt, dest, tag, comm);
    if (on && id)
        flow('s', id, mid(t0, mlprof_now_ns()));
    leave(on, f);
    return rc;
}

EXPORT fn_send MPI_Send, MPI_Ssend, MPI_Bsend, MPI_Rsend;
EXPORT int MPI_Send(const void *b, int n, H dt, int dest, int tag, H c) { return blocking_send(F_Send, b, n, dt, dest, tag, c); }
EXPORT int MPI_Ssend(const void *b, int n, H dt, int dest, int tag, H c) { return blocking_send(F_Ssend, b, n, dt, dest, tag, c); }
EXPORT int MPI_Bsend(const void *b, int n, H dt, int dest, int tag, H c) { return blocking_send(F_Bsend, b, n, dt, dest, tag, c); }
EXPORT int MPI_Rsend(const void *b, int n, H dt, int dest, int tag, H c) { return blocking_send(F_Rsend, b, n, dt, dest, tag, c); }

static int nonblocking_send(int f, const void *buf, int count, H dt, int dest, int tag, H comm, void *req)
{
    int on = enter();
    uint64_t id = 0, seq = UINT64_MAX, t0 = 0;
    req_info info = {.recv = 0};
    if (on) {
        mlprof_begin(task(f));
        send_args(count, dt, dest, tag, comm, &id, &info.bytes, &info.ci, &seq);
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_isend, f)(buf, count, dt, dest, tag, comm, req);
    if (on) {
        info.peer = world_of(info.ci, dest);
        info.comm_peer = dest;
        info.tag = tag;
        info.seq = seq;
        info.number = __atomic_add_fetch(&g_req_number, 1, __ATOMIC_RELAXED);
        mlprof_arg_int("request", (int64_t)info.number);
        if (rc == 0)
            req_add(mlprof__mpi_handle_at(abi(), req, 0), &info);
        if (id)
            flow('s', id, mid(t0, mlprof_now_ns()));
    }
    leave(on, f);
    return rc;
}

EXPORT fn_isend MPI_Isend, MPI_Issend;
EXPORT int MPI_Isend(const void *b, int n, H dt, int dest, int tag, H c, void *r) { return nonblocking_send(F_Isend, b, n, dt, dest, tag, c, r); }
EXPORT int MPI_Issend(const void *b, int n, H dt, int dest, int tag, H c, void *r) { return nonblocking_send(F_Issend, b, n, dt, dest, tag, c, r); }

EXPORT fn_recv MPI_Recv;
EXPORT int MPI_Recv(void *buf, int count, H dt, int src, int tag, H comm, void *status)
{
    int on = enter();
    status_buf own;
    void *st = on ? status_or(status, &own) : status;
    uint64_t t0 = 0;
    if (on) {
        mlprof_begin(task(F_Recv));
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_recv, F_Recv)(buf, count, dt, src, tag, comm, st);
    if (on && rc == 0)
        recv_done(comm_get(comm), st, UINT64_MAX, mid(t0, mlprof_now_ns()), 1);
    leave(on, F_Recv);
    return rc;
}

EXPORT fn_irecv MPI_Irecv;
EXPORT int MPI_Irecv(void *buf, int count, H dt, int src, int tag, H comm, void *req)
{
    int on = enter();
    if (on)
        mlprof_begin(task(F_Irecv));
    int rc = REAL(fn_irecv, F_Irecv)(buf, count, dt, src, tag, comm, req);
    if (on) {
        const mlprof__mpi_abi *a = abi();
        req_info info = {.recv = 1, .ci = comm_get(comm), .comm_peer = src, .tag = tag, .seq = UINT64_MAX};
        info.peer = world_of(info.ci, src);
        comm_args(info.ci);
        if (src != a->any_source && src != a->proc_null) {
            mlprof_arg_int("peer", info.peer);
            /* a receive of one stream takes its number now: receives posted
             * on one stream are matched in the order they were posted */
            if (tag != a->any_tag && info.ci)
                info.seq = stream_next(stream_key(info.ci->id, info.peer, g_world_rank, tag));
        }
        if (tag != a->any_tag)
            mlprof_arg_int("tag", tag);
        info.number = __atomic_add_fetch(&g_req_number, 1, __ATOMIC_RELAXED);
        mlprof_arg_int("request", (int64_t)info.number);
        if (rc == 0)
            req_add(mlprof__mpi_handle_at(a, req, 0), &info);
    }
    leave(on, F_Irecv);
    return rc;
}

EXPORT fn_sendrecv MPI_Sendrecv;
EXPORT int MPI_Sendrecv(const void *sbuf, int scount, H sdt, int dest, int stag, void *rbuf, int rcount, H rdt,
                        int src, int rtag, H comm, void *status)
{
    int on = enter();
    status_buf own;
    void *st = on ? status_or(status, &own) : status;
    uint64_t id = 0, seq, t0 = 0;
    int64_t sent = 0;
    if (on) {
        mlprof_begin(task(F_Sendrecv));
        send_args(scount, sdt, dest, stag, comm, &id, &sent, NULL, &seq);
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_sendrecv, F_Sendrecv)(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, src, rtag, comm, st);
    if (on) {
        uint64_t t = mid(t0, mlprof_now_ns());
        if (id)
            flow('s', id, t);
        const mlprof__mpi_abi *a = abi();
        if (rc == 0 && status_int(st, a->source_offset) != a->proc_null) {
            /* the receive's side under names of its own: bytes and peer are the send's */
            comm_info *ci = comm_get(comm);
            int n = 0, rsrc = status_int(st, a->source_offset), rt = status_int(st, a->tag_offset);
            REAL(fn_get_count, P_Get_count)(st, a->byte, &n);
            int peer = world_of(ci, rsrc);
            mlprof_arg_int("recv_bytes", n);
            mlprof_arg_int("recv_peer", peer);
            mlprof_arg_int("recv_tag", rt);
            if (ci) {
                uint64_t key = stream_key(ci->id, peer, g_world_rank, rt);
                uint64_t rseq = stream_next(key);
                if (rseq != UINT64_MAX) {
                    mlprof_arg_int("recv_seq", (int64_t)rseq);
                    flow('f', flow_id(key, rseq), t);
                }
            }
        }
    }
    leave(on, F_Sendrecv);
    return rc;
}

/* ---------------------------------------------------------- completion */

/* One request completed (info: ours from its post): its arguments and, for
 * a receive, the flow's end. */
static void completed(const req_info *info, const void *status, uint64_t ns, int one)
{
    if (one)
        mlprof_arg_int("request", (int64_t)info->number);
    if (info->coll) {
        if (one) {
            mlprof_arg_int("bytes", info->bytes);
            comm_args(info->ci);
            mlprof_arg_int("seq", (int64_t)info->seq);
        }
        return;
    }
    if (info->recv) {
        if (status)
            recv_done(info->ci, status, info->seq, ns, one);
        return;
    }
    if (one) {
        mlprof_arg_int("bytes", info->bytes);
        mlprof_arg_int("peer", info->peer);
        mlprof_arg_int("tag", info->tag);
        if (info->seq != UINT64_MAX)
            mlprof_arg_int("seq", (int64_t)info->seq);
        comm_args(info->ci);
    }
}

EXPORT fn_wait MPI_Wait;
EXPORT int MPI_Wait(void *req, void *status)
{
    int on = enter();
    status_buf own;
    void *st = on ? status_or(status, &own) : status;
    H r = 0;
    uint64_t t0 = 0;
    if (on) {
        mlprof_begin(task(F_Wait));
        r = mlprof__mpi_handle_at(abi(), req, 0);
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_wait, F_Wait)(req, st);
    req_info info;
    if (on && rc == 0 && req_take(r, &info))
        completed(&info, st, mid(t0, mlprof_now_ns()), 1);
    leave(on, F_Wait);
    return rc;
}

EXPORT fn_test MPI_Test;
EXPORT int MPI_Test(void *req, int *flag, void *status)
{
    int on = enter();
    status_buf own;
    void *st = on ? status_or(status, &own) : status;
    H r = 0;
    uint64_t t0 = 0;
    if (on) {
        mlprof_begin(task(F_Test));
        r = mlprof__mpi_handle_at(abi(), req, 0);
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_test, F_Test)(req, flag, st);
    req_info info;
    if (on && rc == 0 && *flag && req_take(r, &info))
        completed(&info, st, mid(t0, mlprof_now_ns()), 1);
    leave(on, F_Test);
    return rc;
}

/* The arrays a multiple completion needs: the requests as they were (the
 * library sets the completed ones to MPI_REQUEST_NULL) and statuses when the
 * caller ignores them (array: the call takes an array of statuses). On the
 * stack for up to LOCAL requests. */
#define LOCAL 64
typedef struct many {
    H local_req[LOCAL];
    char local_status[LOCAL * 32];
    H *req;
    char *status;   /* ours, or NULL: the caller's */
    void *statuses; /* what the library is given */
} many;

static void many_end(many *m);

static int many_begin(many *m, int count, const void *reqs, void *statuses, int array)
{
    const mlprof__mpi_abi *a = abi();
    m->req = m->local_req;
    m->status = NULL;
    m->statuses = statuses;
    if (count <= 0)
        return 0;
    int ignored = array && (intptr_t)statuses == a->status_ignore;
    mlprof__busy++;
    if (count > LOCAL) {
        m->req = malloc(sizeof(H) * (size_t)count);
        if (ignored)
            m->status = malloc((size_t)a->status_size * (size_t)count);
    } else if (ignored) {
        m->status = m->local_status;
    }
    mlprof__busy--;
    if (!m->req || (ignored && !m->status)) {
        many_end(m);
        return -1;
    }
    for (int i = 0; i < count; i++)
        m->req[i] = mlprof__mpi_handle_at(a, reqs, i);
    if (ignored)
        m->statuses = m->status;
    return 0;
}

/* Request i completed; its status is the i-th (or slot's) of the array. */
static void many_done(many *m, int i, int slot, uint64_t ns, int one, int64_t *bytes)
{
    req_info info;
    if (!req_take(m->req[i], &info))
        return;
    const char *st = m->statuses ? (const char *)m->statuses + (size_t)abi()->status_size * (size_t)slot : NULL;
    completed(&info, st, ns, one);
    if (!info.recv)
        *bytes += info.bytes;
    else if (st) {
        int n = 0;
        REAL(fn_get_count, P_Get_count)(st, abi()->byte, &n);
        *bytes += n;
    }
}

static void many_end(many *m)
{
    mlprof__busy++;
    if (m->req != m->local_req)
        free(m->req);
    if (m->status != m->local_status)
        free(m->status);
    mlprof__busy--;
}

/* A multiple completion's span: the requests completed and their bytes. */
static void many_args(int n, int64_t bytes)
{
    mlprof_arg_int("completed", n);
    mlprof_arg_int("bytes", bytes);
}

EXPORT fn_waitall MPI_Waitall;
EXPORT int MPI_Waitall(int count, void *reqs, void *statuses)
{
    int on = enter();
    many m;
    uint64_t t0 = 0;
    if (on && many_begin(&m, count, reqs, statuses, 1) != 0)
        on = 0; /* no memory: the call only */
    if (on) {
        mlprof_begin(task(F_Waitall));
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_waitall, F_Waitall)(count, reqs, on ? m.statuses : statuses);
    if (on) {
        uint64_t t = mid(t0, mlprof_now_ns());
        int64_t bytes = 0;
        for (int i = 0; i < count && rc == 0; i++)
            many_done(&m, i, i, t, 0, &bytes);
        many_args(count, bytes);
        many_end(&m);
    }
    leave(on, F_Waitall);
    return rc;
}

EXPORT fn_testall MPI_Testall;
EXPORT int MPI_Testall(int count, void *reqs, int *flag, void *statuses)
{
    int on = enter();
    many m;
    uint64_t t0 = 0;
    if (on && many_begin(&m, count, reqs, statuses, 1) != 0)
        on = 0;
    if (on) {
        mlprof_begin(task(F_Testall));
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_testall, F_Testall)(count, reqs, flag, on ? m.statuses : statuses);
    if (on) {
        uint64_t t = mid(t0, mlprof_now_ns());
        int64_t bytes = 0;
        for (int i = 0; i < count && rc == 0 && *flag; i++)
            many_done(&m, i, i, t, 0, &bytes);
        many_args(rc == 0 && *flag ? count : 0, bytes);
        many_end(&m);
    }
    leave(on, F_Testall);
    return rc;
}

/* MPI_Waitany and MPI_Testany: one request of the array, or none
 * (MPI_UNDEFINED, a negative index here). */
static int any(int f, int count, void *reqs, int *index, int *flag, void *status)
{
    int on = enter();
    many m;
    status_buf own;
    void *st = on ? status_or(status, &own) : status;
    uint64_t t0 = 0;
    /* the one status is st, not an array: many_begin is told of none to replace */
    if (on && many_begin(&m, count, reqs, NULL, 0) != 0)
        on = 0;
    if (on) {
        mlprof_begin(task(f));
        t0 = mlprof_now_ns();
    }
    int rc = f == F_Waitany ? REAL(fn_waitany, f)(count, reqs, index, st)
                            : REAL(fn_testany, f)(count, reqs, index, flag, st);
    if (on) {
        int64_t bytes = 0;
        int done = rc == 0 && (!flag || *flag) && *index >= 0 && *index < count;
        if (done) {
            m.statuses = st;
            many_done(&m, *index, 0, mid(t0, mlprof_now_ns()), 0, &bytes);
            mlprof_arg_int("index", *index);
        }
        many_args(done, bytes);
        many_end(&m);
    }
    leave(on, f);
    return rc;
}

EXPORT fn_waitany MPI_Waitany;
EXPORT int MPI_Waitany(int count, void *reqs, int *index, void *status)
{
    return any(F_Waitany, count, reqs, index, NULL, status);
}
EXPORT fn_testany MPI_Testany;
EXPORT int MPI_Testany(int count, void *reqs, int *index, int *flag, void *status)
{
    return any(F_Testany, count, reqs, index, flag, status);
}

static int some(int f, int incount, void *reqs, int *outcount, int *indices, void *statuses)
{
    int on = enter();
    many m;
    uint64_t t0 = 0;
    if (on && many_begin(&m, incount, reqs, statuses, 1) != 0)
        on = 0;
    if (on) {
        mlprof_begin(task(f));
        t0 = mlprof_now_ns();
    }
    int rc = REAL(fn_waitsome, f)(incount, reqs, outcount, indices, on ? m.statuses : statuses);
    if (on) {
        uint64_t t = mid(t0, mlprof_now_ns());
        int64_t bytes = 0, n = rc == 0 && *outcount > 0 ? *outcount : 0;
        for (int k = 0; k < n; k++)
            if (indices[k] >= 0 && indices[k] < incount)
                many_done(&m, indices[k], k, t, 0, &bytes);
        many_args((int)n, bytes);
        many_end(&m);
    }
    leave(on, f);
    return rc;
}

EXPORT fn_waitsome MPI_Waitsome, MPI_Testsome;
EXPORT int MPI_Waitsome(int incount, void *reqs, int *outcount, int *indices, void *statuses)
{
    return some(F_Waitsome, incount, reqs, outcount, indices, statuses);
}
EXPORT int MPI_Testsome(int incount, void *reqs, int *outcount, int *indices, void *statuses)
{
    return some(F_Testsome, incount, reqs, outcount, indices, statuses);
}

EXPORT fn_free MPI_Request_free;
EXPORT int MPI_Request_free(void *req)
{
    const mlprof__mpi_abi *a = __atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) ? abi() : NULL;
    req_info info;
    if (a) /* a send freed before it completes still went out; its entry goes */
        req_take(mlprof__mpi_handle_at(a, req, 0), &info);
    return REAL(fn_free, F_Request_free)(req);
}

/* ---------------------------------------------------------- collectives */

/* A collective's span: its communicator, number, bytes and root. */
static uint64_t coll_begin_ci(int f, comm_info *ci, int64_t bytes, int root)
{
    uint64_t seq = ci ? __atomic_fetch_add(&ci->coll, 1, __ATOMIC_RELAXED) : 0;
    mlprof_begin(task(f));
    mlprof_arg_int("bytes", bytes);
    comm_args(ci);
    if (ci)
        mlprof_arg_int("seq", (int64_t)seq);
    if (root >= 0)
        mlprof_arg_int("root", world_of(ci, root));
    return seq;
}

static void coll_begin(int f, H comm, int64_t bytes, int root) { coll_begin_ci(f, comm_get(comm), bytes, root); }

static int in_place(const void *buf) { return (intptr_t)buf == abi()->in_place; }
static int comm_size(H comm)
{
    comm_info *ci = comm_get(comm);
    return ci ? ci->size : 0;
}
static int comm_rank(H comm)
{
    comm_info *ci = comm_get(comm);
    return ci ? ci->rank : -1;
}
static int64_t sum(const int *counts, int n)
{
    int64_t s = 0;
    for (int i = 0; counts && i < n; i++)
        s += counts[i];
    return s;
}

#define COLL(f, bytes, root, call)                                                                        \
    do {                                                                                                  \
        int on_ = enter();                                                                                \
        if (on_)                                                                                          \
            coll_begin(f, comm, (bytes), (root));                                                         \
        int rc_ = (call);                                                                                 \
        leave(on_, f);                                                                                    \
        return rc_;                                                                                       \
    } while (0)

/* bytes: what this rank sends (a root its whole buffer), or, for a rank that
 * only receives (MPI_Bcast, MPI_Scatter off the root), what it receives. */
EXPORT fn_h MPI_Barrier;
EXPORT int MPI_Barrier(H comm) { COLL(F_Barrier, 0, -1, REAL(fn_h, F_Barrier)(comm)); }

EXPORT fn_bcast MPI_Bcast;
EXPORT int MPI_Bcast(void *buf, int count, H dt, int root, H comm)
{
    COLL(F_Bcast, count * type_size(dt), root, REAL(fn_bcast, F_Bcast)(buf, count, dt, root, comm));
}

EXPORT fn_reduce MPI_Reduce;
EXPORT int MPI_Reduce(const void *s, void *r, int count, H dt, H op, int root, H comm)
{
    COLL(F_Reduce, count * type_size(dt), root, REAL(fn_reduce, F_Reduce)(s, r, count, dt, op, root, comm));
}

EXPORT fn_allreduce MPI_Allreduce, MPI_Scan, MPI_Exscan, MPI_Reduce_scatter_block;
EXPORT int MPI_Allreduce(const void *s, void *r, int count, H dt, H op, H comm)
{
    COLL(F_Allreduce, count * type_size(dt), -1, REAL(fn_allreduce, F_Allreduce)(s, r, count, dt, op, comm));
}
EXPORT int MPI_Scan(const void *s, void *r, int count, H dt, H op, H comm)
{
    COLL(F_Scan, count * type_size(dt), -1, REAL(fn_allreduce, F_Scan)(s, r, count, dt, op, comm));
}
EXPORT int MPI_Exscan(const void *s, void *r, int count, H dt, H op, H comm)
{
    COLL(F_Exscan, count * type_size(dt), -1, REAL(fn_allreduce, F_Exscan)(s, r, count, dt, op, comm));
}
EXPORT int MPI_Reduce_scatter_block(const void *s, void *r, int count, H dt, H op, H comm)
{
    COLL(F_Reduce_scatter_block, count * type_size(dt) * comm_size(comm), -1,
         REAL(fn_allreduce, F_Reduce_scatter_block)(s, r, count, dt, op, comm));
}

EXPORT fn_rscatter MPI_Reduce_scatter;
EXPORT int MPI_Reduce_scatter(const void *s, void *r, const int *counts, H dt, H op, H comm)
{
    COLL(F_Reduce_scatter, sum(counts, comm_size(comm)) * type_size(dt), -1,
         REAL(fn_rscatter, F_Reduce_scatter)(s, r, counts, dt, op, comm));
}

EXPORT fn_allgather MPI_Allgather, MPI_Alltoall;
EXPORT int MPI_Allgather(const void *s, int sc, H sdt, void *r, int rc, H rdt, H comm)
{
    COLL(F_Allgather, in_place(s) ? rc * type_size(rdt) : sc * type_size(sdt), -1,
         REAL(fn_allgather, F_Allgather)(s, sc, sdt, r, rc, rdt, comm));
}
EXPORT int MPI_Alltoall(const void *s, int sc, H sdt, void *r, int rc, H rdt, H comm)
{
    COLL(F_Alltoall, (in_place(s) ? rc * type_size(rdt) : sc * type_size(sdt)) * comm_size(comm), -1,
         REAL(fn_allgather, F_Alltoall)(s, sc, sdt, r, rc, rdt, comm));
}

EXPORT fn_allgatherv MPI_Allgatherv;
EXPORT int MPI_Allgatherv(const void *s, int sc, H sdt, void *r, const int *rcs, const int *displs, H rdt, H comm)
{
    COLL(F_Allgatherv,
         in_place(s) ? (comm_rank(comm) >= 0 ? rcs[comm_rank(comm)] : 0) * type_size(rdt) : sc * type_size(sdt), -1,
         REAL(fn_allgatherv, F_Allgatherv)(s, sc, sdt, r, rcs, displs, rdt, comm));
}

EXPORT fn_gather MPI_Gather, MPI_Scatter;
EXPORT int MPI_Gather(const void *s, int sc, H sdt, void *r, int rc, H rdt, int root, H comm)
{
    COLL(F_Gather, in_place(s) ? rc * type_size(rdt) : sc * type_size(sdt), root,
         REAL(fn_gather, F_Gather)(s, sc, sdt, r, rc, rdt, root, comm));
}
EXPORT int MPI_Scatter(const void *s, int sc, H sdt, void *r, int rc, H rdt, int root, H comm)
{
    COLL(F_Scatter, comm_rank(comm) == root ? sc * type_size(sdt) * comm_size(comm) : rc * type_size(rdt), root,
         REAL(fn_gather, F_Scatter)(s, sc, sdt, r, rc, rdt, root, comm));
}

EXPORT fn_gatherv MPI_Gatherv;
EXPORT int MPI_Gatherv(const void *s, int sc, H sdt, void *r, const int *rcs, const int *displs, H rdt, int root,
                       H comm)
{
    COLL(F_Gatherv,
         in_place(s) ? (comm_rank(comm) >= 0 ? rcs[comm_rank(comm)] : 0) * type_size(rdt) : sc * type_size(sdt),
         root, REAL(fn_gatherv, F_Gatherv)(s, sc, sdt, r, rcs, displs, rdt, root, comm));
}

EXPORT fn_scatterv MPI_Scatterv;
EXPORT int MPI_Scatterv(const void *s, const int *scs, const int *displs, H sdt, void *r, int rc, H rdt, int root,
                        H comm)
{
    COLL(F_Scatterv,
         comm_rank(comm) == root ? sum(scs, comm_size(comm)) * type_size(sdt) : rc * type_size(rdt), root,
         REAL(fn_scatterv, F_Scatterv)(s, scs, displs, sdt, r, rc, rdt, root, comm));
}

EXPORT fn_alltoallv MPI_Alltoallv;
EXPORT int MPI_Alltoallv(const void *s, const int *scs, const int *sd, H sdt, void *r, const int *rcs,
                         const int *rd, H rdt, H comm)
{
    COLL(F_Alltoallv,
         in_place(s) ? sum(rcs, comm_size(comm)) * type_size(rdt) : sum(scs, comm_size(comm)) * type_size(sdt), -1,
         REAL(fn_alltoallv, F_Alltoallv)(s, scs, sd, sdt, r, rcs, rd, rdt, comm));
}

/* Nonblocking collectives: numbered with the blocking ones (MPI orders both
 * alike on every member); their completion in MPI_Wait or MPI_Test gets the
 * collective's comm, seq and bytes. */
#define ICOLL(f, nbytes, rootr, call)                                                                       \
    do {                                                                                                  \
        int on_ = enter();                                                                                \
        comm_info *ci_ = NULL;                                                                            \
        uint64_t seq_ = 0;                                                                                \
        int64_t b_ = 0;                                                                                   \
        if (on_) {                                                                                        \
            b_ = (nbytes);                                                                                 \
            ci_ = comm_get(comm);                                                                         \
            seq_ = coll_begin_ci(f, ci_, b_, (rootr));                                                     \
        }                                                                                                 \
        int rc_ = (call);                                                                                 \
        if (on_) {                                                                                        \
            req_info info_ = {.coll = 1, .ci = ci_, .bytes = b_, .seq = seq_,                             \
                              .number = __atomic_add_fetch(&g_req_number, 1, __ATOMIC_RELAXED)};          \
            mlprof_arg_int("request", (int64_t)info_.number);                                             \
            if (rc_ == 0 && ci_)                                                                          \
                req_add(mlprof__mpi_handle_at(abi(), req, 0), &info_);                                    \
        }                                                                                                 \
        leave(on_, f);                                                                                    \
        return rc_;                                                                                       \
    } while (0)

typedef int fn_ibarrier(H, void *);
typedef int fn_ibcast(void *, int, H, int, H, void *);
typedef int fn_ireduce(const void *, void *, int, H, H, int, H, void *);
typedef int fn_iallreduce(const void *, void *, int, H, H, H, void *);
typedef int fn_iallgather(const void *, int, H, void *, int, H, H, void *);

EXPORT fn_ibarrier MPI_Ibarrier;
EXPORT int MPI_Ibarrier(H comm, void *req) { ICOLL(F_Ibarrier, 0, -1, REAL(fn_ibarrier, F_Ibarrier)(comm, req)); }

EXPORT fn_ibcast MPI_Ibcast;
EXPORT int MPI_Ibcast(void *buf, int count, H dt, int root, H comm, void *req)
{
    ICOLL(F_Ibcast, count * type_size(dt), root, REAL(fn_ibcast, F_Ibcast)(buf, count, dt, root, comm, req));
}

EXPORT fn_ireduce MPI_Ireduce;
EXPORT int MPI_Ireduce(const void *s, void *r, int count, H dt, H op, int root, H comm, void *req)
{
    ICOLL(F_Ireduce, count * type_size(dt), root,
          REAL(fn_ireduce, F_Ireduce)(s, r, count, dt, op, root, comm, req));
}

EXPORT fn_iallreduce MPI_Iallreduce;
EXPORT int MPI_Iallreduce(const void *s, void *r, int count, H dt, H op, H comm, void *req)
{
    ICOLL(F_Iallreduce, count * type_size(dt), -1,
          REAL(fn_iallreduce, F_Iallreduce)(s, r, count, dt, op, comm, req));
}

EXPORT fn_iallgather MPI_Iallgather, MPI_Ialltoall;
EXPORT int MPI_Iallgather(const void *s, int sc, H sdt, void *r, int rc, H rdt, H comm, void *req)
{
    ICOLL(F_Iallgather, in_place(s) ? rc * type_size(rdt) : sc * type_size(sdt), -1,
          REAL(fn_iallgather, F_Iallgather)(s, sc, sdt, r, rc, rdt, comm, req));
}
EXPORT int MPI_Ialltoall(const void *s, int sc, H sdt, void *r, int rc, H rdt, H comm, void *req)
{
    ICOLL(F_Ialltoall, (in_place(s) ? rc * type_size(rdt) : sc * type_size(sdt)) * comm_size(comm), -1,
          REAL(fn_iallgather, F_Ialltoall)(s, sc, sdt, r, rc, rdt, comm, req));
}

/* ----------------------------------------------------------- one-sided */

/* The world rank of a window's rank: through the window's group, per call. */
static int win_peer(H win, int target)
{
    const mlprof__mpi_abi *a = abi();
    intptr_t g = 0, wg = 0;
    int out = target;
    if (target < 0 || REAL(fn_hp, P_Win_get_group)(win, &g) != 0)
        return target;
    if (REAL(fn_hp, P_Comm_group)(a->comm_world, &wg) == 0) {
        REAL(fn_translate, P_Group_translate_ranks)(mlprof__mpi_handle_at(a, &g, 0), 1, &target,
                                                    mlprof__mpi_handle_at(a, &wg, 0), &out);
        REAL(fn_free, P_Group_free)(&wg);
    }
    REAL(fn_free, P_Group_free)(&g);
    return out;
}

static void rma_begin(int f, int count, H dt, int target, H win)
{
    int64_t bytes = count * type_size(dt);
    int peer = win_peer(win, target);
    mlprof_begin(task(f));
    mlprof_arg_int("bytes", bytes);
    mlprof_arg_int("peer", peer);
}

EXPORT fn_put MPI_Put, MPI_Get;
EXPORT int MPI_Put(const void *o, int oc, H odt, int target, intptr_t disp, int tc, H tdt, H win)
{
    int on = enter();
    if (on)
        rma_begin(F_Put, oc, odt, target, win);
    int rc = REAL(fn_put, F_Put)(o, oc, odt, target, disp, tc, tdt, win);
    leave(on, F_Put);
    return rc;
}
EXPORT int MPI_Get(const void *o, int oc, H odt, int target, intptr_t disp, int tc, H tdt, H win)
{
    int on = enter();
    if (on)
        rma_begin(F_Get, oc, odt, target, win);
    int rc = REAL(fn_put, F_Get)(o, oc, odt, target, disp, tc, tdt, win);
    leave(on, F_Get);
    return rc;
}

EXPORT fn_acc MPI_Accumulate;
EXPORT int MPI_Accumulate(const void *o, int oc, H odt, int target, intptr_t disp, int tc, H tdt, H op, H win)
{
    int on = enter();
    if (on)
        rma_begin(F_Accumulate, oc, odt, target, win);
    int rc = REAL(fn_acc, F_Accumulate)(o, oc, odt, target, disp, tc, tdt, op, win);
    leave(on, F_Accumulate);
    return rc;
}

EXPORT fn_fence MPI_Win_fence;
EXPORT int MPI_Win_fence(int assertion, H win)
{
    int on = enter();
    if (on)
        mlprof_begin(task(F_Win_fence));
    int rc = REAL(fn_fence, F_Win_fence)(assertion, win);
    leave(on, F_Win_fence);
    return rc;
}

/* ------------------------------------------------------- communicators */

EXPORT fn_hp MPI_Comm_dup;
EXPORT int MPI_Comm_dup(H comm, void *out)
{
    int rc = REAL(fn_hp, F_Comm_dup)(comm, out);
    if (rc == 0)
        comm_made(comm, out);
    return rc;
}

EXPORT fn_split MPI_Comm_split;
EXPORT int MPI_Comm_split(H comm, int color, int key, void *out)
{
    int rc = REAL(fn_split, F_Comm_split)(comm, color, key, out);
    if (rc == 0)
        comm_made(comm, out);
    return rc;
}

EXPORT fn_split_type MPI_Comm_split_type;
EXPORT int MPI_Comm_split_type(H comm, int type, int key, H info, void *out)
{
    int rc = REAL(fn_split_type, F_Comm_split_type)(comm, type, key, info, out);
    if (rc == 0)
        comm_made(comm, out);
    return rc;
}

typedef int fn_create(H, H, void *);
EXPORT fn_create MPI_Comm_create;
EXPORT int MPI_Comm_create(H comm, H group, void *out)
{
    int rc = REAL(fn_create, F_Comm_create)(comm, group, out);
    if (rc == 0)
        comm_made(comm, out);
    return rc;
}

EXPORT fn_free MPI_Comm_free;
EXPORT int MPI_Comm_free(void *comm)
{
    if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) && abi())
        comm_drop(mlprof__mpi_handle_at(abi(), comm, 0));
    return REAL(fn_free, F_Comm_free)(comm);
}

/* ------------------------------------------------------- start and end */

/* After MPI_Init: the ABI, this rank, the clock's first sample. */
static void started(void)
{
    mlprof__ensure_init();
    const mlprof__mpi_abi *a = abi();
    if (!a || !mlprof__hook_on(MLPROF__HOOK_MPI))
        return;
    int rank = 0;
    REAL(fn_hip, P_Comm_rank)(a->comm_world, &rank);
    g_world_rank = rank;
    __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
    mlprof__mpi_sync_init();
}

EXPORT fn_init MPI_Init;
EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = REAL(fn_init, F_Init)(argc, argv);
    if (rc == 0)
        started();
    return rc;
}

EXPORT fn_init_thread MPI_Init_thread;
EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = REAL(fn_init_thread, F_Init_thread)(argc, argv, required, provided);
    if (rc == 0)
        started();
    return rc;
}

EXPORT fn_void MPI_Finalize;
EXPORT int MPI_Finalize(void)
{
    if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) {
        mlprof__mpi_sync_finalize();
        __atomic_store_n(&g_ready, 0, __ATOMIC_RELEASE); /* nothing after this is MPI's */
    }
    return REAL(fn_void, F_Finalize)();
}

/* In a forked child (not a rank: MPI is not to be used there), from the
 * clock_sync module: nothing more is recorded, and the forking thread's
 * cached tid was its parent's. */
void mlprof__mpi_after_fork(void)
{
    __atomic_store_n(&g_ready, 0, __ATOMIC_RELEASE);
    t_tid = 0;
    mlprof__mpi_flush(1); /* the parent's messages are in the parent's trace */
}

/* Flow ends lost (the shared queue full, or a table full): said in otherData. */
uint64_t mlprof__mpi_lost(void) { return __atomic_load_n(&g_flows_lost, __ATOMIC_RELAXED); }
