/*
 * activity.c - CUPTI's activity records into trace events.
 *
 * At each drain (ctl_lock held) cupti.c delivers CUPTI's buffers here:
 *   - runtime and driver calls become spans on the thread that made them
 *     (CUPTI gives the system thread id), and each is remembered by its
 *     correlation id as a launch, together with a point for the collector,
 *     which answers with the CPU spans open at that moment on that thread;
 *   - kernels, copies, memsets and synchronizations wait until the threads
 *     have been drained (mlprof__gpu_emit); then each is written with its
 *     launch's operators and a flow from the launch, on its device and
 *     stream's track. One whose launch has not come waits one more drain
 *     (the two come in different buffers), then goes out unlinked;
 *   - device and context records give what occupancy needs.
 * Timestamps go through the clock conversion (CUPTI's clock to mlprof's,
 * usually an identity since cupti.c gives CUPTI mlprof's clock).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../record/produce.h"
#include "../hw/hw.h"
#include "../record/record.h"
#include "gpu_internal.h"

#define MAX_DEVICES 64
#define MAX_CONTEXTS 256
#define LAUNCH_KEEP 4      /* drains a launch is remembered for (graphs launch many kernels) */
#define MAX_PENDING 4000000 /* GPU records waiting for their launch, at most */

enum { A_KERNEL, A_MEMCPY, A_MEMCPY_P2P, A_MEMSET, A_SYNC };

/* A runtime or driver call, by its correlation id. */
typedef struct launch {
    uint32_t corr;
    uint32_t gen;   /* the drain it came in */
    pid_t tid;
    uint64_t start_ns;
    const char *op;    /* innermost CPU span open at the call (interned), or NULL */
    const char *stack; /* "outer > ... > inner" (interned), or NULL */
} launch;

/* A GPU activity waiting to be written. */
typedef struct act {
    uint8_t type, age;
    uint8_t copy_kind, src_kind, dst_kind;
    uint32_t device, context, stream, corr, corr2;
    uint64_t start_ns, end_ns;
    uint64_t bytes;
    uint32_t value; /* memset value; sync type */
    uint32_t peer_src, peer_dst;
    int32_t grid[3], block[3];
    uint32_t registers, static_shared, dynamic_shared, local_per_thread, carveout;
    const char *name; /* kernels: demangled (interned) */
} act;

static struct {
    mlprof__gpu_clock clock;
    mlprof__gpu_device dev[MAX_DEVICES];
    uint8_t dev_known[MAX_DEVICES];
    char dev_name[MAX_DEVICES][64];
    struct {
        uint32_t ctx, dev;
    } ctx[MAX_CONTEXTS];
    size_t nctx;

    launch *L;
    size_t nl, capl;
    size_t nl_sorted; /* L[0..nl_sorted) is sorted by corr */
    uint32_t gen;

    mlprof__launch_point *pts;
    size_t npts, cappts;

    act *P;
    size_t np, capp;

    mlprof__map strings;   /* interned strings */
    mlprof__map demangled; /* mangled name -> interned demangled name */
    mlprof__map tracks;    /* (device, stream) -> ext track id + 1 */

    /* counts, for otherData */
    uint64_t records, kernels, memcpys, memsets, syncs, apis, linked, unlinked, incomplete;
    uint64_t no_times; /* records with neither start nor end */
    uint64_t cupti_dropped, refused, pending_dropped, unknown;
    uint64_t reported_lost, reported_incomplete, reported_no_times;
} G;

/* ------------------------------------------------------------- helpers */

static const char *intern(const char *s, size_t n)
{
    mlprof__map_entry *e = mlprof__map_slot(&G.strings, s, n);
    return e ? e->key : NULL;
}

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* The C++ runtime's demangler: the process's own, else libstdc++ loaded for it. */
static demangle_fn demangler(void)
{
    static int looked;
    static demangle_fn fn;
    if (!looked) {
        looked = 1;
        fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        if (!fn) {
            void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
            if (h)
                fn = (demangle_fn)dlsym(h, "__cxa_demangle");
        }
    }
    return fn;
}

const char *mlprof__gpu_kernel_name(const char *mangled)
{
    if (!mangled || !*mangled)
        return intern("(unnamed kernel)", 16);
    size_t n = strlen(mangled);
    void *got = mlprof__map_get(&G.demangled, mangled, n);
    if (got)
        return got;
    const char *name = NULL;
    demangle_fn fn = mangled[0] == '_' && mangled[1] == 'Z' ? demangler() : NULL;
    if (fn) {
        int status = -1;
        char *d = fn(mangled, NULL, NULL, &status);
        if (d && status == 0)
            name = intern(d, strlen(d));
        free(d); /* the demangler's malloc */
    }
    if (!name)
        name = intern(mangled, n);
    mlprof__map_entry *e = mlprof__map_slot(&G.demangled, mangled, n);
    if (e)
        e->value = (void *)name;
    return name;
}

static uint32_t device_of_context(uint32_t ctx)
{
    for (size_t i = 0; i < G.nctx; i++) {
        if (G.ctx[i].ctx == ctx)
            return G.ctx[i].dev;
    }
    return UINT32_MAX;
}

/* The track of a key pair, made with name the first time. */
static int track_of(uint32_t a, uint32_t b, const char *name)
{
    uint32_t key[2] = {a, b};
    void *v = mlprof__map_get(&G.tracks, (const char *)key, sizeof key);
    if (v)
        return (int)((intptr_t)v - 1);
    int tid = mlprof__produce_track(name);
    mlprof__map_entry *e = tid >= 0 ? mlprof__map_slot(&G.tracks, (const char *)key, sizeof key) : NULL;
    if (e)
        e->value = (void *)(intptr_t)(tid + 1);
    return tid;
}

static int gpu_track(uint32_t device, uint32_t stream)
{
    char name[64];
    if (device == UINT32_MAX)
        snprintf(name, sizeof name, "GPU synchronization");
    else
        snprintf(name, sizeof name, "GPU %u stream %u", device, stream);
    return track_of(device, stream, name);
}

int mlprof__gpu_counters_track(uint32_t device)
{
    char name[64];
    snprintf(name, sizeof name, "GPU %u kernel counters", device);
    return track_of(device, UINT32_MAX, name);
}

static uint64_t ts(uint64_t cupti_ns) { return mlprof__gpu_clock_convert(&G.clock, cupti_ns); }

/* ------------------------------------------------------- clock conversion */

void mlprof__gpu_clock_add(mlprof__gpu_clock *c, uint64_t src, uint64_t dst)
{
    if (c->points == 0) {
        c->src0 = c->src1 = src;
        c->dst0 = c->dst1 = dst;
    } else if (src > c->src0) {
        c->src1 = src;
        c->dst1 = dst;
    }
    c->points++;
}

uint64_t mlprof__gpu_clock_convert(const mlprof__gpu_clock *c, uint64_t src)
{
    if (c->points == 0)
        return src;
    double y;
    if (c->src1 - c->src0 < 1000000000u) {
        /* points less than a second apart: their noise (a microsecond) would
         * tilt a line more than the clocks drift; the latest offset */
        y = (double)c->dst1 + (double)(int64_t)(src - c->src1);
    } else {
        double slope = (double)(int64_t)(c->dst1 - c->dst0) / (double)(int64_t)(c->src1 - c->src0);
        y = (double)c->dst0 + (double)(int64_t)(src - c->src0) * slope;
    }
    return y <= 0 ? 0 : (uint64_t)(y + 0.5);
}

void mlprof__gpu_clock_point(uint64_t cupti_ns, uint64_t ns) { mlprof__gpu_clock_add(&G.clock, cupti_ns, ns); }

/* ------------------------------------------------------------ occupancy */

static uint32_t round_up(uint32_t v, uint32_t unit) { return unit ? (v + unit - 1) / unit * unit : v; }

int mlprof__gpu_occupancy_of(const mlprof__gpu_device *d, uint32_t threads, uint32_t registers,
                             uint32_t shared, uint32_t carveout, mlprof__gpu_occupancy *out)
{
    memset(out, 0, sizeof *out);
    if (!d->warp_size || !d->max_warps_per_sm || !d->max_blocks_per_sm || !d->max_registers_per_sm ||
        !threads || d->cc_major < 3)
        return -1;
    uint32_t warps = (threads + d->warp_size - 1) / d->warp_size;
    uint32_t partitions = d->cc_major == 6 && d->cc_minor == 0 ? 2 : 4;
    uint32_t smem_unit = d->cc_major >= 8 ? 128 : 256;
    uint32_t reserved = d->cc_major >= 8 ? 1024 : 0;

    uint32_t by_blocks = d->max_blocks_per_sm;
    uint32_t by_warps = d->max_warps_per_sm / warps;
    uint32_t by_regs = UINT32_MAX;
    if (registers) {
        uint32_t per_warp = round_up(registers * d->warp_size, 256);
        uint32_t per_block = per_warp * warps;
        if (registers > 255 || (d->max_registers_per_block && per_block > d->max_registers_per_block)) {
            by_regs = 0;
        } else {
            uint32_t warps_per_partition = d->max_registers_per_sm / partitions / per_warp;
            by_regs = warps_per_partition * partitions / warps;
        }
    }
    uint32_t by_smem = UINT32_MAX;
    uint32_t smem_sm = carveout ? carveout : d->max_shared_memory_per_sm;
    if (shared || reserved) {
        uint32_t per_block = round_up(shared + reserved, smem_unit);
        by_smem = per_block ? smem_sm / per_block : UINT32_MAX;
    }
    uint32_t blocks = by_blocks;
    out->limiter = "blocks";
    if (by_warps < blocks) {
        blocks = by_warps;
        out->limiter = "warps";
    }
    if (by_regs < blocks) {
        blocks = by_regs;
        out->limiter = "registers";
    }
    if (by_smem < blocks) {
        blocks = by_smem;
        out->limiter = "shared memory";
    }
    out->blocks_per_sm = blocks;
    out->warps_per_sm = blocks * warps;
    out->occupancy = (double)out->warps_per_sm / d->max_warps_per_sm;
    if (out->occupancy > 1)
        out->occupancy = 1;
    return 0;
}

/* ------------------------------------------------------------- records */

static void keep(const act *a)
{
    act *p = G.np < MAX_PENDING ? mlprof__grow(G.P, &G.capp, G.np, sizeof *G.P, 1024) : NULL;
    if (!p) {
        G.pending_dropped++;
        return;
    }
    G.P = p;
    G.P[G.np++] = *a;
}

/* Where and when: the fields every GPU record has under the same names. */
#define PLACE(a, r)                    \
    do {                               \
        (a).start_ns = (r)->start;     \
        (a).end_ns = (r)->end;         \
        (a).device = (r)->device_id;   \
        (a).context = (r)->context_id; \
        (a).stream = (r)->stream_id;   \
        (a).corr = (r)->correlation_id; \
    } while (0)

static void take_api(const cupti_api *r)
{
    int domain = r->kind == CUPTI_KIND_RUNTIME ? CUPTI_DOMAIN_RUNTIME : CUPTI_DOMAIN_DRIVER;
    G.apis++;
    uint64_t begin = ts(r->start), end = ts(r->end);
    pid_t tid = (pid_t)r->thread_id;
    if (mlprof__cupti_function_on(domain, r->cbid)) {
        const char *name = mlprof__cupti_function(domain, r->cbid);
        char unknown[48];
        if (!name) {
            snprintf(unknown, sizeof unknown, "%s function %u", domain == CUPTI_DOMAIN_RUNTIME ? "runtime" : "driver",
                     r->cbid);
            name = unknown;
        }
        char args[96];
        int n = snprintf(args, sizeof args, "\"correlation\":%u", r->correlation_id);
        if (r->return_value)
            snprintf(args + n, sizeof args - (size_t)n, ",\"error\":%u", r->return_value);
        mlprof__produce_span(NULL, tid, domain == CUPTI_DOMAIN_RUNTIME ? "cuda_runtime" : "cuda_driver", name, begin,
                             end, args);
    }
    launch *ls = mlprof__grow(G.L, &G.capl, G.nl, sizeof *G.L, 1024);
    if (ls)
        G.L = ls;
    if (!ls)
        return;
    launch *l = &G.L[G.nl];
    l->corr = r->correlation_id;
    l->gen = G.gen;
    l->tid = tid;
    l->start_ns = begin;
    l->op = l->stack = NULL;
    mlprof__gpu_add_point(tid, begin, (uint32_t)G.nl);
    G.nl++;
}

static void take_kernel(const cupti_kernel *r)
{
    act a;
    memset(&a, 0, sizeof a);
    a.type = A_KERNEL;
    PLACE(a, r);
    memcpy(a.grid, r->grid, sizeof a.grid);
    memcpy(a.block, r->block, sizeof a.block);
    a.registers = r->registers_per_thread;
    a.static_shared = (uint32_t)r->static_shared_memory;
    a.dynamic_shared = (uint32_t)r->dynamic_shared_memory;
    a.local_per_thread = r->local_memory_per_thread;
    a.carveout = r->shared_memory_executed;
    a.name = mlprof__gpu_kernel_name(r->name);
    G.kernels++;
    keep(&a);
}

/* A copy; a peer-to-peer one shares the plain one's fields up to the stream
 * (test_cupti_layout checks both), then has its devices before its id. */
static void take_copy(const cupti_record *rec)
{
    const cupti_memcpy *r = (const cupti_memcpy *)rec;
    act a;
    memset(&a, 0, sizeof a);
    a.type = A_MEMCPY;
    PLACE(a, r);
    a.copy_kind = r->copy_kind;
    a.src_kind = r->src_kind;
    a.dst_kind = r->dst_kind;
    a.bytes = r->bytes;
    a.corr2 = r->runtime_correlation_id;
    if (rec->kind == CUPTI_KIND_MEMCPY2) {
        const cupti_memcpy_p2p *p = (const cupti_memcpy_p2p *)rec;
        a.type = A_MEMCPY_P2P;
        a.corr = p->correlation_id;
        a.corr2 = 0;
        a.peer_src = p->src_device_id;
        a.peer_dst = p->dst_device_id;
    }
    G.memcpys++;
    keep(&a);
}

static void take_memset(const cupti_memset *r)
{
    act a;
    memset(&a, 0, sizeof a);
    a.type = A_MEMSET;
    PLACE(a, r);
    a.bytes = r->bytes;
    a.value = r->value;
    a.dst_kind = (uint8_t)r->memory_kind;
    G.memsets++;
    keep(&a);
}

static void take_sync(const cupti_sync *r)
{
    act a;
    memset(&a, 0, sizeof a);
    a.type = A_SYNC;
    a.value = r->type;
    a.start_ns = r->start;
    a.end_ns = r->end;
    a.context = r->context_id;
    a.device = device_of_context(r->context_id);
    a.stream = r->stream_id;
    a.corr = r->correlation_id;
    G.syncs++;
    keep(&a);
}

static void take_device(const cupti_device *r)
{
    if (r->id >= MAX_DEVICES)
        return;
    mlprof__gpu_device *d = &G.dev[r->id];
    d->cc_major = r->cc_major;
    d->cc_minor = r->cc_minor;
    d->warp_size = r->threads_per_warp;
    d->max_warps_per_sm = r->max_warps_per_sm;
    d->max_blocks_per_sm = r->max_blocks_per_sm;
    d->max_registers_per_sm = r->max_registers_per_sm;
    d->max_registers_per_block = r->max_registers_per_block;
    d->max_shared_memory_per_sm = r->max_shared_memory_per_sm;
    d->max_threads_per_block = r->max_threads_per_block;
    d->multiprocessors = r->multiprocessors;
    snprintf(G.dev_name[r->id], sizeof G.dev_name[r->id], "%s", r->name ? r->name : "");
    G.dev_known[r->id] = 1;
}

static void take_context(const cupti_context *r)
{
    for (size_t i = 0; i < G.nctx; i++) {
        if (G.ctx[i].ctx == r->context_id) {
            G.ctx[i].dev = r->device_id;
            return;
        }
    }
    if (G.nctx < MAX_CONTEXTS) {
        G.ctx[G.nctx].ctx = r->context_id;
        G.ctx[G.nctx++].dev = r->device_id;
    }
}

void mlprof__gpu_take_buffer(uint8_t *buf, size_t valid)
{
    cupti_record *r = NULL;
    while (mlprof__cupti_next(buf, valid, &r) == 0 && r) {
        G.records++;
        switch (r->kind) {
        case CUPTI_KIND_RUNTIME:
        case CUPTI_KIND_DRIVER:
            take_api((const cupti_api *)r);
            break;
        case CUPTI_KIND_KERNEL:
        case CUPTI_KIND_CONCURRENT_KERNEL:
            take_kernel((const cupti_kernel *)r);
            break;
        case CUPTI_KIND_MEMCPY:
        case CUPTI_KIND_MEMCPY2:
            take_copy(r);
            break;
        case CUPTI_KIND_MEMSET:
            take_memset((const cupti_memset *)r);
            break;
        case CUPTI_KIND_SYNCHRONIZATION:
            take_sync((const cupti_sync *)r);
            break;
        case CUPTI_KIND_DEVICE:
            take_device((const cupti_device *)r);
            break;
        case CUPTI_KIND_CONTEXT:
            take_context((const cupti_context *)r);
            break;
        default:
            G.unknown++;
            break;
        }
    }
}

void mlprof__gpu_count_lost(uint64_t dropped, uint64_t refused)
{
    G.cupti_dropped += dropped;
    G.refused += refused;
}

/* --------------------------------------------------- the collector's side */

void mlprof__gpu_launch_ops(uint32_t index, const char *const *names, size_t depth)
{
    if (depth == 0)
        return;
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    for (size_t i = 0; i < depth; i++) {
        if (i)
            mlprof__sb_puts(&sb, " > ");
        mlprof__sb_puts(&sb, names[i]);
    }
    const char *stack = sb.data ? intern(sb.data, sb.len) : NULL;
    const char *op = intern(names[depth - 1], strlen(names[depth - 1]));
    mlprof__sb_free(&sb);
    if (index & MLPROF__GPU_ASK_BIT) {
        mlprof__gpu_counters_ops(index, op, stack);
    } else if (index < G.nl) {
        G.L[index].stack = stack;
        G.L[index].op = op;
    }
}

void mlprof__gpu_add_point(pid_t tid, uint64_t ns, uint32_t index)
{
    mlprof__launch_point *ps = mlprof__grow(G.pts, &G.cappts, G.npts, sizeof *G.pts, 1024);
    if (!ps)
        return;
    G.pts = ps;
    G.pts[G.npts].tid = tid;
    G.pts[G.npts].ns = ns;
    G.pts[G.npts].index = index;
    G.npts++;
}

static int launch_cmp(const void *pa, const void *pb)
{
    const launch *a = pa, *b = pb;
    if (a->corr != b->corr)
        return a->corr < b->corr ? -1 : 1;
    return a->gen < b->gen ? -1 : a->gen > b->gen; /* a repeated id: the newest last */
}

static const launch *find_launch(uint32_t corr)
{
    if (!corr)
        return NULL;
    size_t lo = 0, hi = G.nl;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (G.L[mid].corr <= corr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && G.L[lo - 1].corr == corr ? &G.L[lo - 1] : NULL;
}

static const char *const k_copy_kinds[CUPTI_MEMCPY_KINDS] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                                              "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
static const char *const k_mem_kinds[CUPTI_MEMORY_KINDS] = {"Unknown", "Pageable", "Pinned",        "Device",
                                                             "Array",   "Managed",  "Device Static", "Managed Static"};
static const char *const k_sync_kinds[CUPTI_SYNC_KINDS] = {"Synchronize", "Event Sync", "Stream Wait Event",
                                                            "Stream Sync", "Context Sync"};

static const char *pick(const char *const *names, size_t n, unsigned i) { return i < n ? names[i] : names[0]; }

/* Writes one GPU activity with what is known of its launch. */
static void write_act(const act *a, const launch *l)
{
    mlprof__sb args;
    mlprof__sb_init(&args);
    char name[96];
    const char *n = name, *domain;
    uint64_t begin = ts(a->start_ns), end = ts(a->end_ns);
    uint64_t dur = end > begin ? end - begin : 0;
    mlprof__sb_printf(&args, "\"device\":%d,\"stream\":%u,\"correlation\":%u", a->device == UINT32_MAX ? -1 : (int)a->device,
                      a->stream, a->corr);
    switch (a->type) {
    case A_KERNEL: {
        n = a->name;
        domain = "kernel";
        uint32_t threads = (uint32_t)(a->block[0] * a->block[1] * a->block[2]);
        mlprof__sb_printf(&args,
                          ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"registers_per_thread\":%u"
                          ",\"shared_memory\":%u,\"static_shared_memory\":%u,\"dynamic_shared_memory\":%u"
                          ",\"local_memory_per_thread\":%u",
                          a->grid[0], a->grid[1], a->grid[2], a->block[0], a->block[1], a->block[2], a->registers,
                          a->static_shared + a->dynamic_shared, a->static_shared, a->dynamic_shared,
                          a->local_per_thread);
        mlprof__gpu_occupancy occ;
        if ((mlprof__g.cfg.gpu_details_mask & MLPROF__GPU_OCCUPANCY) && a->device < MAX_DEVICES &&
            G.dev_known[a->device] &&
            mlprof__gpu_occupancy_of(&G.dev[a->device], threads, a->registers, a->static_shared + a->dynamic_shared,
                                     a->carveout, &occ) == 0) {
            uint32_t sms = G.dev[a->device].multiprocessors;
            uint64_t blocks = (uint64_t)a->grid[0] * (uint64_t)a->grid[1] * (uint64_t)a->grid[2];
            mlprof__sb_printf(&args, ",\"theoretical_occupancy\":%.4f,\"blocks_per_sm\":%u,\"occupancy_limiter\":\"%s\"",
                              occ.occupancy, occ.blocks_per_sm, occ.limiter);
            if (sms)
                mlprof__sb_printf(&args, ",\"waves\":%.3f",
                                  occ.blocks_per_sm ? (double)blocks / ((double)occ.blocks_per_sm * sms) : 0.0);
        }
        break;
    }
    case A_MEMCPY:
    case A_MEMCPY_P2P:
        domain = "gpu_memcpy";
        snprintf(name, sizeof name, "Memcpy %s (%s -> %s)", pick(k_copy_kinds, CUPTI_MEMCPY_KINDS, a->copy_kind),
                 pick(k_mem_kinds, CUPTI_MEMORY_KINDS, a->src_kind), pick(k_mem_kinds, CUPTI_MEMORY_KINDS, a->dst_kind));
        mlprof__sb_printf(&args, ",\"bytes\":%llu,\"kind\":\"%s\",\"bandwidth_gbps\":%.3f", (unsigned long long)a->bytes,
                          pick(k_copy_kinds, CUPTI_MEMCPY_KINDS, a->copy_kind), dur ? (double)a->bytes / (double)dur : 0.0);
        if (a->type == A_MEMCPY_P2P)
            mlprof__sb_printf(&args, ",\"src_device\":%u,\"dst_device\":%u", a->peer_src, a->peer_dst);
        else if (a->corr2 && a->corr2 != a->corr) /* its own id is the driver call's: the runtime's too */
            mlprof__sb_printf(&args, ",\"runtime_correlation\":%u", a->corr2);
        break;
    case A_MEMSET:
        domain = "gpu_memset";
        snprintf(name, sizeof name, "Memset (%s)", pick(k_mem_kinds, CUPTI_MEMORY_KINDS, a->dst_kind));
        mlprof__sb_printf(&args, ",\"bytes\":%llu,\"value\":%u,\"bandwidth_gbps\":%.3f", (unsigned long long)a->bytes,
                          a->value, dur ? (double)a->bytes / (double)dur : 0.0);
        break;
    default:
        domain = "cuda_sync";
        n = pick(k_sync_kinds, CUPTI_SYNC_KINDS, a->value);
        break;
    }
    if (l && l->op) {
        mlprof__sb_puts(&args, ",\"op\":");
        mlprof__sb_json_str(&args, l->op, strlen(l->op));
        mlprof__sb_puts(&args, ",\"op_stack\":");
        mlprof__sb_json_str(&args, l->stack, strlen(l->stack));
    }
    int tid;
    if (a->type == A_SYNC) /* a wait of the CPU: inside the call that waited, on its thread */
        tid = l ? l->tid : gpu_track(UINT32_MAX, 0);
    else
        tid = gpu_track(a->device, a->stream);
    if (tid >= 0) {
        mlprof__produce_span(NULL, tid, domain, n, begin, end, args.data);
        if (l && a->type != A_SYNC)
            mlprof__produce_flow(NULL, ((uint64_t)(mlprof__g.pid & 0xfffff) << 32) | a->corr, l->tid, l->start_ns, tid,
                                 begin);
    }
    mlprof__sb_free(&args);
}

size_t mlprof__gpu_flush(int discard, int final, mlprof__launch_point **points)
{
    G.npts = 0;
    mlprof__cupti_flush(discard, final);
    mlprof__gpu_counters_points();
    *points = G.pts;
    return G.npts;
}

void mlprof__gpu_emit(int discard, int final)
{
    mlprof__gpu_regions_resolve(discard);
    if (G.nl > G.nl_sorted)
        mlprof__sort(G.L, G.nl, sizeof *G.L, launch_cmp);
    G.nl_sorted = G.nl;
    size_t kept = 0;
    int api_on = (mlprof__g.cfg.gpu_mask & (MLPROF__GPU_RUNTIME | MLPROF__GPU_DRIVER | MLPROF__GPU_LAUNCH)) != 0;
    for (size_t i = 0; i < G.np; i++) {
        act *a = &G.P[i];
        if (discard)
            continue;
        if (a->start_ns == 0 && a->end_ns == 0 && mlprof__gpu_metrics_wanted()) {
            /* CUPTI gives the kernels its range profiler measures no times
             * (seen on an H100, CUDA 13): not records still running */
            G.no_times++;
            continue;
        }
        if (a->start_ns == 0 || a->end_ns < a->start_ns) { /* still running at a forced flush */
            G.incomplete++;
            continue;
        }
        const launch *l = find_launch(a->corr);
        if (!l && a->corr2)
            l = find_launch(a->corr2);
        if (!l && api_on && !final && a->age == 0) {
            a->age = 1; /* its launch may come in the next buffer */
            G.P[kept++] = *a;
            continue;
        }
        if (l)
            G.linked++;
        else if (api_on)
            G.unlinked++;
        write_act(a, l);
    }
    G.np = kept;
    /* launches are kept a few drains: a graph launch has many kernels */
    G.gen++;
    size_t w = 0;
    for (size_t i = 0; i < G.nl; i++) {
        if (!discard && G.L[i].gen + LAUNCH_KEEP > G.gen)
            G.L[w++] = G.L[i];
    }
    G.nl = G.nl_sorted = w;
    G.npts = 0;
    mlprof__gpu_counters_emit(discard);
}

/* --------------------------------------------------------------- reports */

void mlprof__gpu_other_data(mlprof__sb *out)
{
    if (!mlprof__g.cfg.gpu_mask && !G.records && !mlprof__gpu_metrics_wanted())
        return;
    mlprof__sb_printf(out,
                      ",\"gpu\":{\"records\":%llu,\"kernels\":%llu,\"memcpys\":%llu,\"memsets\":%llu,\"syncs\":%llu"
                      ",\"api_calls\":%llu,\"linked\":%llu,\"unlinked\":%llu,\"incomplete\":%llu,\"without_times\":%llu"
                      ",\"dropped_by_cupti\":%llu,\"buffers_refused\":%llu,\"dropped_pending\":%llu"
                      ",\"unknown_records\":%llu,\"clock_points\":%d",
                      (unsigned long long)G.records, (unsigned long long)G.kernels, (unsigned long long)G.memcpys,
                      (unsigned long long)G.memsets, (unsigned long long)G.syncs, (unsigned long long)G.apis,
                      (unsigned long long)G.linked, (unsigned long long)G.unlinked, (unsigned long long)G.incomplete,
                      (unsigned long long)G.no_times, (unsigned long long)G.cupti_dropped, (unsigned long long)G.refused,
                      (unsigned long long)G.pending_dropped, (unsigned long long)G.unknown, G.clock.points);
    mlprof__cupti_other_data(out);
    mlprof__sb_puts(out, ",\"devices\":[");
    int first = 1;
    for (int i = 0; i < MAX_DEVICES; i++) {
        if (!G.dev_known[i])
            continue;
        const mlprof__gpu_device *d = &G.dev[i];
        mlprof__sb_printf(out, "%s{\"id\":%d,\"name\":", first ? "" : ",", i);
        mlprof__sb_json_str(out, G.dev_name[i], strlen(G.dev_name[i]));
        mlprof__sb_printf(out, ",\"compute_capability\":\"%u.%u\",\"multiprocessors\":%u}", d->cc_major, d->cc_minor,
                          d->multiprocessors);
        first = 0;
    }
    mlprof__sb_puts(out, "]");
    mlprof__gpu_counters_other_data(out);
    mlprof__sb_putc(out, '}');
}

void mlprof__gpu_report(void)
{
    mlprof__gpu_counters_report();
    uint64_t lost = G.cupti_dropped + G.pending_dropped;
    if (lost > G.reported_lost) {
        mlprof__log(MLPROF_LOG_WARN,
                    "%llu GPU activity records were lost (%llu dropped by CUPTI, %llu buffers refused at "
                    "gpu_buffer_size, %llu over the pending limit): raise gpu_buffer_size or dump more often",
                    (unsigned long long)(lost - G.reported_lost), (unsigned long long)G.cupti_dropped,
                    (unsigned long long)G.refused, (unsigned long long)G.pending_dropped);
        G.reported_lost = lost;
    }
    if (G.incomplete > G.reported_incomplete) {
        mlprof__log(MLPROF_LOG_WARN,
                    "%llu GPU activities were still running at the final dump and are not in the trace: "
                    "synchronize the device before mlprof_dump(1)",
                    (unsigned long long)(G.incomplete - G.reported_incomplete));
        G.reported_incomplete = G.incomplete;
    }
    if (G.no_times > G.reported_no_times) {
        mlprof__log(MLPROF_LOG_WARN,
                    "%llu GPU activity records came from CUPTI without start and end times, as it gives the "
                    "kernels its range profiler measures (gpu_metrics), and are not on the timeline: each kernel's "
                    "GPU time is in its metrics", (unsigned long long)(G.no_times - G.reported_no_times));
        G.reported_no_times = G.no_times;
    }
}

void mlprof__gpu_reset(void)
{
    G.np = G.nl = G.nl_sorted = G.npts = 0;
    G.records = G.kernels = G.memcpys = G.memsets = G.syncs = G.apis = 0;
    G.linked = G.unlinked = G.incomplete = G.no_times = G.cupti_dropped = G.refused = G.pending_dropped = G.unknown = 0;
    G.reported_lost = G.reported_incomplete = G.reported_no_times = 0;
    mlprof__gpu_counters_reset();
}

/* ------------------------------------------------- the lifecycle entry */

static void after_fork(int running)
{
    (void)running; /* CUDA does not survive a fork: off in the child either way */
    mlprof__gpu_after_fork();
}

static size_t flush(const mlprof__drain_info *d, mlprof__launch_point **points)
{
    return mlprof__gpu_flush(d->discard, d->final, points);
}

static void emit(const mlprof__drain_info *d) { mlprof__gpu_emit(d->discard, d->final); }

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    if (strcmp(key, "gpu") != 0 && strcmp(key, "gpu_functions") != 0 && strcmp(key, "gpu_details") != 0 &&
        strcmp(key, "gpu_metrics") != 0)
        return 1;
    return mlprof__gpu_parse(key, value, mask, why, len) == 0 ? 0 : -1;
}

const mlprof__module mlprof__gpu_module = {
    .name = "gpu",
    .parse_key = parse_key,
    .resume = mlprof__gpu_start,
    .pause = mlprof__gpu_stop,
    .finish = mlprof__gpu_counters_stop,
    .after_fork = after_fork,
    .flush = flush,
    .launch_ops = mlprof__gpu_launch_ops,
    .emit = emit,
    .other_data = mlprof__gpu_other_data,
    .report = mlprof__gpu_report,
    .reset = mlprof__gpu_reset,
};
