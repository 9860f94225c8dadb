/*
 * mpi_sync.c - each rank's clock measured against rank 0's over MPI, and the
 * MPI library's ABI as read at run time.
 *
 * Clock alignment (issue 20's contract, section 2): after MPI_Init, at every
 * mlprof_dist_sync() and before MPI_Finalize, each rank in turn plays
 * ping-pong with rank 0 on a private duplicate of MPI_COMM_WORLD and keeps the
 * exchange with the smallest round trip: rank 0's clock read between the two
 * messages is within half that round trip of the midpoint of this rank's two
 * readings. Ranks on one host are measured like the others (nothing assumes
 * they share a clock). The samples, the offset at the first, the drift between
 * the first and the last and the worst bound go in otherData.clock_sync, where
 * `mlprof merge` reads them. Samples measured elsewhere (mlprof.dist.sync()
 * over torch.distributed) come through mlprof_dist_clock_sample, the one
 * writer of clock_sync.
 *
 * Part of libmlprof and of the preload library alike; MPI is reached only by
 * name (PMPI_*), so a program without MPI pays nothing.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/produce.h"
#include "hook.h"
#include "mpi_internal.h"

/* ------------------------------------------------------------- the ABI */

/* What the two families put where the standard leaves it open. Open MPI's
 * handles are addresses of its predefined objects (found by name); MPICH's
 * (and its derivatives': Intel MPI, MVAPICH, Cray) are the constants of its
 * documented mpi.h, which it has kept since MPICH 3.1's ABI initiative.
 *
 *                       Open MPI (4.x, 5.x)          MPICH (3.1 and later)
 *   handles             pointers, 8 bytes            ints, 4 bytes
 *   MPI_Status          24 bytes: SOURCE, TAG,       20 bytes: count_lo,
 *                       ERROR, _cancelled, _ucount   count_hi_and_cancelled,
 *                                                    SOURCE, TAG, ERROR
 *   MPI_STATUS_IGNORE   (MPI_Status *)0              (MPI_Status *)1
 *   MPI_ANY_SOURCE      -1                           -2
 *   MPI_ANY_TAG         -1                           -1
 *   MPI_PROC_NULL       -2                           -1
 *   MPI_ROOT            -4                           -3
 *   MPI_IN_PLACE        (void *)1                    (void *)-1
 *   MPI_COMM_WORLD      &ompi_mpi_comm_world         0x44000000
 *   MPI_COMM_NULL       &ompi_mpi_comm_null          0x04000000
 *   MPI_REQUEST_NULL    &ompi_request_null           0x2c000000
 *   MPI_BYTE            &ompi_mpi_byte               0x4c00010d
 *
 * Open MPI is tested (Debian's 4.1); MPICH's column is from its mpi.h and
 * untested here. The MPI 5 standard ABI (MPICH's libmpi_abi.so: pointer
 * handles, a 32-byte status) is not in the table yet. */
static mlprof__mpi_abi g_abi;
static int g_abi_state; /* 0 not looked at, 1 known, -1 unknown library */
static pthread_mutex_t g_abi_lock = PTHREAD_MUTEX_INITIALIZER;

void *mlprof__mpi_fn(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (p)
        return p;
    p = mlprof__hook_real(name);
    if (p)
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}

/* A predefined object's address. The global scope first: a program that
 * names MPI_COMM_WORLD has its own copy of ompi_mpi_comm_world (a copy
 * relocation), which the library uses from then on, not the one in libmpi. */
static void *object(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        void *slot = NULL;
        p = mlprof__mpi_fn(&slot, name);
    }
    return p;
}

static int detect(void)
{
    static void *slot;
    int (*version)(char *, int *) = (int (*)(char *, int *))mlprof__mpi_fn(&slot, "PMPI_Get_library_version");
    if (!version)
        return -1;
    static char text[8192]; /* MPI_MAX_LIBRARY_VERSION_STRING: 256 in Open MPI, 8192 in MPICH */
    int len = 0;
    if (version(text, &len) != 0)
        return -1;
    text[len > 0 && len < (int)sizeof text ? len : (int)sizeof text - 1] = '\0';
    mlprof__mpi_abi a;
    memset(&a, 0, sizeof a);
    if (strstr(text, "Open MPI")) {
        a = (mlprof__mpi_abi){.name = "openmpi", .handle_size = (int)sizeof(void *), .status_size = 24,
                              .source_offset = 0, .tag_offset = 4, .status_ignore = 0, .any_source = -1,
                              .any_tag = -1, .proc_null = -2, .root = -4, .in_place = 1,
                              .comm_world = (mlprof__mpi_h)object("ompi_mpi_comm_world"),
                              .comm_null = (mlprof__mpi_h)object("ompi_mpi_comm_null"),
                              .request_null = (mlprof__mpi_h)object("ompi_request_null"),
                              .byte = (mlprof__mpi_h)object("ompi_mpi_byte")};
        if (!a.comm_world || !a.comm_null || !a.request_null || !a.byte)
            return -1;
    } else if (strstr(text, "MPICH") || strstr(text, "Intel(R) MPI") || strstr(text, "MVAPICH")) {
        a = (mlprof__mpi_abi){.name = "mpich", .handle_size = 4, .status_size = 20, .source_offset = 8,
                              .tag_offset = 12, .status_ignore = 1, .any_source = -2, .any_tag = -1,
                              .proc_null = -1, .root = -3, .in_place = -1, .comm_world = 0x44000000,
                              .comm_null = 0x04000000, .request_null = 0x2c000000, .byte = 0x4c00010d};
    } else {
        mlprof__log(MLPROF_LOG_WARN, "mpi hook: unknown MPI library (%.60s): MPI calls are not recorded", text);
        return -1;
    }
    g_abi = a;
    return 1;
}

const mlprof__mpi_abi *mlprof__mpi_abi_get(void)
{
    int s = __atomic_load_n(&g_abi_state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        mlprof__busy++;
        pthread_mutex_lock(&g_abi_lock);
        if ((s = g_abi_state) == 0)
            __atomic_store_n(&g_abi_state, s = detect(), __ATOMIC_RELEASE);
        pthread_mutex_unlock(&g_abi_lock);
        mlprof__busy--;
    }
    return s > 0 ? &g_abi : NULL;
}

mlprof__mpi_h mlprof__mpi_handle_at(const mlprof__mpi_abi *abi, const void *array, int i)
{
    if (abi->handle_size == 4) {
        int32_t v;
        memcpy(&v, (const char *)array + 4 * (size_t)i, 4);
        return (mlprof__mpi_h)(uint32_t)v;
    }
    intptr_t v;
    memcpy(&v, (const char *)array + sizeof v * (size_t)i, sizeof v);
    return v;
}

/* ------------------------------------------------------ the ping-pong */

#define EXCHANGES 24 /* per rank and sample: the smallest round trip of these is kept */
#define MAX_SAMPLES 64
#define TAG_PING 0x6d6c7031
#define TAG_PONG 0x6d6c7032

typedef struct sample {
    uint64_t at_ns;   /* this rank's clock at the kept exchange's midpoint */
    int64_t offset;   /* rank 0's clock minus this rank's there */
    uint64_t rtt_ns;  /* the kept exchange's round trip */
    uint64_t bound_ns; /* how far the offset may be off: half the round trip, for a ping-pong */
    int exchanges;
} sample;

/* The samples, whoever measured them: the MPI ping-pong below, or a caller of
 * mlprof_dist_clock_sample (mlprof.dist.sync() over torch.distributed). One
 * writer of otherData.clock_sync for both, so that merge reads one format. */
static struct {
    pthread_mutex_t lock; /* the samples and what describes them */
    char method[32];      /* the samples' method ("mpi_pingpong"); "" before the first */
    int rank, size;       /* the measuring rank and its world, as the method knows them */
    sample s[MAX_SAMPLES];
    int n;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER, .rank = -1};

/* The MPI side: the communicator is used by one thread at a time (collective). */
static struct {
    mlprof__mpi_h comm; /* our duplicate of MPI_COMM_WORLD, 0 before */
    int rank, size;
    int finalized;
} S = {.rank = -1};

typedef int send_fn(const void *, int, mlprof__mpi_h, int, int, mlprof__mpi_h);
typedef int recv_fn(void *, int, mlprof__mpi_h, int, int, mlprof__mpi_h, void *);
typedef int rank_fn(mlprof__mpi_h, int *);
typedef int dup_fn(mlprof__mpi_h, void *);
typedef int barrier_fn(mlprof__mpi_h);
typedef int flag_fn(int *);

static void *pmpi(const char *name)
{
    /* found once per name; the few of this file are looked up at each sample */
    return mlprof__hook_real(name);
}

/* One rank's exchanges with rank 0 (or rank 0's with it). */
static int pingpong(const mlprof__mpi_abi *abi, send_fn *send, recv_fn *recv, int peer, sample *out)
{
    uint64_t t[2] = {0, 0};
    uint64_t best_rtt = UINT64_MAX;
    void *status = (void *)abi->status_ignore;
    for (int i = 0; i < EXCHANGES; i++) {
        if (S.rank == 0) {
            if (recv(t, 8, abi->byte, peer, TAG_PING, S.comm, status) != 0)
                return -1;
            t[0] = mlprof_now_ns();
            if (send(t, 8, abi->byte, peer, TAG_PONG, S.comm) != 0)
                return -1;
            continue;
        }
        uint64_t t1 = mlprof_now_ns();
        if (send(&t1, 8, abi->byte, 0, TAG_PING, S.comm) != 0 || recv(t, 8, abi->byte, 0, TAG_PONG, S.comm, status) != 0)
            return -1;
        uint64_t t2 = mlprof_now_ns();
        if (t2 - t1 < best_rtt) {
            best_rtt = t2 - t1;
            out->at_ns = t1 + (t2 - t1) / 2;
            out->offset = (int64_t)(t[0] - out->at_ns);
            out->rtt_ns = best_rtt;
        }
    }
    out->exchanges = EXCHANGES;
    return 0;
}

/* One sample of every rank: collective over MPI_COMM_WORLD. */
static int take_sample(void)
{
    const mlprof__mpi_abi *abi = mlprof__mpi_abi_get();
    send_fn *send = (send_fn *)pmpi("PMPI_Send");
    recv_fn *recv = (recv_fn *)pmpi("PMPI_Recv");
    barrier_fn *barrier = (barrier_fn *)pmpi("PMPI_Barrier");
    if (!abi || !send || !recv || !barrier)
        return mlprof__fail(MLPROF_EUNSUPPORTED, "clock alignment over MPI: no usable MPI library");
    if (!S.comm) {
        rank_fn *rank = (rank_fn *)pmpi("PMPI_Comm_rank"), *size = (rank_fn *)pmpi("PMPI_Comm_size");
        dup_fn *dup = (dup_fn *)pmpi("PMPI_Comm_dup");
        intptr_t comm = 0;
        if (!rank || !size || !dup || dup(abi->comm_world, &comm) != 0)
            return mlprof__fail(MLPROF_EIO, "clock alignment over MPI: MPI_Comm_dup failed");
        S.comm = mlprof__mpi_handle_at(abi, &comm, 0);
        rank(S.comm, &S.rank);
        size(S.comm, &S.size);
    }
    sample got = {.at_ns = mlprof_now_ns()};
    int rc = 0;
    mlprof__busy++; /* our messages are not the program's */
    for (int peer = 1; peer < S.size && rc == 0; peer++) {
        if (S.rank == 0 || S.rank == peer)
            rc = pingpong(abi, send, recv, peer, &got);
    }
    if (rc == 0)
        rc = barrier(S.comm);
    mlprof__busy--;
    if (rc != 0)
        return mlprof__fail(MLPROF_EIO, "clock alignment over MPI: a message failed");
    if (S.rank == 0) { /* the reference: offset 0, exactly */
        got.offset = 0;
        got.rtt_ns = 0;
        got.exchanges = EXCHANGES * (S.size - 1);
    }
    return mlprof_dist_clock_sample("mpi_pingpong", S.rank, S.size, got.at_ns, got.offset, got.rtt_ns / 2,
                                    got.rtt_ns, got.exchanges);
}

/* Given by R's rank identity (src/record/dist.c): a rank the program's own
 * clock samples say, where no launcher did. The weak one stands in while
 * dist.c is not linked. */
void mlprof__dist_set_sampled(int rank, int size);
__attribute__((weak)) void mlprof__dist_set_sampled(int rank, int size)
{
    (void)rank;
    (void)size;
}

int mlprof_dist_clock_sample(const char *method, int rank, int world_size, uint64_t at_ns, int64_t offset_ns,
                             uint64_t bound_ns, uint64_t rtt_ns, int exchanges)
{
    mlprof__ensure_init();
    if (!method || !*method || strlen(method) >= sizeof C.method || strpbrk(method, "\"\\") || rank < 0 ||
        world_size < 1 || rank >= world_size || exchanges < 0)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_dist_clock_sample: bad arguments (method \"%.40s\", rank %d of %d, "
                                           "%d exchanges)", method ? method : "(null)", rank, world_size, exchanges);
    pthread_mutex_lock(&C.lock);
    if (C.n && (strcmp(C.method, method) != 0 || C.rank != rank || C.size != world_size)) {
        pthread_mutex_unlock(&C.lock);
        /* one trace, one alignment: samples of two methods would mix two references */
        return mlprof__fail(MLPROF_ESTATE, "mlprof_dist_clock_sample: this trace's clock samples are %s's, rank %d "
                                           "of %d; refused one of %s, rank %d of %d", C.method, C.rank, C.size,
                            method, rank, world_size);
    }
    snprintf(C.method, sizeof C.method, "%s", method);
    C.rank = rank;
    C.size = world_size;
    if (C.n == MAX_SAMPLES) /* keep the first; the newest replaces the one before it */
        C.n--;
    C.s[C.n++] = (sample){at_ns, offset_ns, rtt_ns, bound_ns, exchanges};
    pthread_mutex_unlock(&C.lock);
    mlprof__dist_set_sampled(rank, world_size); /* where no launcher said who this is */
    return MLPROF_OK;
}

/* Given by R's rank identity (src/record/dist.c): refines the rank once MPI
 * knows it. The weak one stands in while dist.c is not linked. */
void mlprof__dist_set_mpi(int rank, int size);
__attribute__((weak)) void mlprof__dist_set_mpi(int rank, int size)
{
    (void)rank;
    (void)size;
}

void mlprof__mpi_sync_init(void)
{
    if (take_sample() != MLPROF_OK)
        mlprof__log(MLPROF_LOG_WARN, "%s", mlprof_last_error());
    else
        mlprof__dist_set_mpi(S.rank, S.size);
}

void mlprof__mpi_sync_finalize(void)
{
    if (!S.comm || S.finalized)
        return;
    if (take_sample() != MLPROF_OK)
        mlprof__log(MLPROF_LOG_WARN, "%s", mlprof_last_error());
    typedef int free_fn(void *);
    free_fn *comm_free = (free_fn *)pmpi("PMPI_Comm_free");
    intptr_t c = S.comm;
    if (comm_free)
        comm_free(&c);
    S.finalized = 1;
}

int mlprof_dist_sync(void)
{
    mlprof__ensure_init();
    flag_fn *initialized = (flag_fn *)pmpi("PMPI_Initialized"), *finalized = (flag_fn *)pmpi("PMPI_Finalized");
    int on = 0, off = 0;
    if (!initialized || !finalized)
        return mlprof__fail(MLPROF_EUNSUPPORTED, "mlprof_dist_sync: no MPI library in this process");
    initialized(&on);
    finalized(&off);
    if (!on || off || S.finalized)
        return mlprof__fail(MLPROF_ESTATE, "mlprof_dist_sync: MPI is not initialized (or already finalized)");
    return take_sample();
}

/* ------------------------------------------------------- the module */

static void other_data(mlprof__sb *out)
{
    pthread_mutex_lock(&C.lock);
    if (C.n == 0) {
        pthread_mutex_unlock(&C.lock);
        return;
    }
    const sample *first = &C.s[0], *last = &C.s[C.n - 1];
    double drift = 0;
    if (C.n > 1 && last->at_ns > first->at_ns)
        drift = (double)(last->offset - first->offset) * 1e9 / (double)(last->at_ns - first->at_ns);
    uint64_t bound = 0;
    mlprof__sb_printf(out, ",\"clock_sync\":{\"method\":\"%s\",\"reference_rank\":0,\"rank\":%d,"
                           "\"world_size\":%d,\"samples\":[", C.method, C.rank, C.size);
    for (int i = 0; i < C.n; i++) {
        const sample *s = &C.s[i];
        mlprof__sb_printf(out, "%s{\"at_ns\":%llu,\"offset_ns\":%lld,\"bound_ns\":%llu,\"rtt_ns\":%llu,\"exchanges\":%d}",
                          i ? "," : "", (unsigned long long)s->at_ns, (long long)s->offset,
                          (unsigned long long)s->bound_ns, (unsigned long long)s->rtt_ns, s->exchanges);
        if (s->bound_ns > bound)
            bound = s->bound_ns;
    }
    mlprof__sb_printf(out, "],\"offset_ns\":%lld,\"drift_ppb\":%.0f,\"bound_ns\":%llu}", (long long)first->offset,
                      drift, (unsigned long long)bound);
    pthread_mutex_unlock(&C.lock);
}

/* The injected shift (test-only), so that a test can compute the true
 * offsets; written whether or not MPI ran. */
static void shift_data(mlprof__sb *out)
{
    int64_t off, ppb;
    uint64_t start;
    if (mlprof__clock_shift_get(&off, &ppb, &start))
        mlprof__sb_printf(out, ",\"clock_shift\":{\"offset_ns\":%lld,\"drift_ppb\":%lld,\"start_ns\":%llu}",
                          (long long)off, (long long)ppb, (unsigned long long)start);
}

static void all_data(mlprof__sb *out)
{
    shift_data(out);
    other_data(out);
    uint64_t lost = mlprof__mpi_lost();
    if (lost)
        mlprof__sb_printf(out, ",\"mpi_flows_lost\":%llu", (unsigned long long)lost);
}

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    (void)mask;
    if (strcmp(key, "clock_shift") != 0)
        return 1;
    int64_t off, ppb;
    if (mlprof__clock_shift_parse(value, &off, &ppb) == 0)
        return 0;
    snprintf(why, len, "expected OFFSET_NS or OFFSET_NS:DRIFT_PPB (integers; drift above -1e9 and below 1e9)");
    return -1;
}

/* The messages' flow ends, before the drain takes the producers' queue. */
static size_t flush(const mlprof__drain_info *d, mlprof__launch_point **points)
{
    (void)points;
    mlprof__mpi_flush(d->discard);
    return 0;
}

/* A forked child is not a rank of the job: its trace carries no alignment. */
static void after_fork(int running)
{
    (void)running;
    pthread_mutex_init(&C.lock, NULL);
    C.n = 0;
    C.method[0] = '\0';
    S.comm = 0;
    mlprof__mpi_after_fork();
}

const mlprof__module mlprof__clock_sync_module = {
    .name = "clock_sync",
    .parse_key = parse_key,
    .other_data = all_data,
    .flush = flush,
    .after_fork = after_fork,
};
