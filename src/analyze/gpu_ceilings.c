/*
 * gpu_ceilings.c - a GPU's ceilings from CUDA kernels (gpu_ceilings.h).
 *
 * The kernels are PTX written here (gce_ptx): the driver compiles PTX for
 * whatever GPU it runs, so one mlprof binary needs no nvcc and no fat binary.
 * Each FMA kernel runs FMA_CHAINS independent chains x = x * m + c per thread
 * (m = c = 0.5: x stays near 1, no denormals), FMA_UNROLL times per loop
 * step, and stores their sum, so that nothing is optimised away; with a full
 * GPU of resident warps that hides the FMA latency. An FMA is 2 FLOPs, and
 * a half2 FMA (fma.rn.f16x2) 4. Tensor cores are not measured: matrix
 * instructions outrun these roofs (say so where a roofline uses them).
 * The triad a[i] = b[i] + s * c[i] runs over fp64 arrays with a grid-stride
 * loop, `passes` times over the same elements (each thread the same ones,
 * so no pass races another), loads cached in L2 only (ld.global.cg): a
 * working set of a quarter of the L2 gives the L2's bandwidth, one of 8x the
 * L2 (at least 256 MiB) the device memory's; 24 bytes per element, as STREAM and
 * the CPU's ceilings count. Times are CUDA events around each launch.
 */
#include "gpu_ceilings.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FMA_CHAINS 8
#define FMA_UNROLL 16 /* 128 FMAs a loop step: its add, compare and branch cost 2% of the issue slots */
#define BLOCK 256

/* ------------------------------------------------------------------ PTX */

typedef struct fma_kind {
    const char *what;  /* "fp32" */
    const char *entry; /* the kernel's name */
    const char *reg;   /* the registers' type */
    const char *fma;   /* the instruction */
    const char *add;
    const char *st;    /* the store's type */
    int bytes;         /* per stored value */
    int flops;         /* per instruction */
} fma_kind;

static const fma_kind KINDS[] = {
    {"fp64", "mlprof_fma_f64", ".f64", "fma.rn.f64", "add.rn.f64", ".f64", 8, 2},
    {"fp32", "mlprof_fma_f32", ".f32", "fma.rn.f32", "add.rn.f32", ".f32", 4, 2},
    {"fp16", "mlprof_fma_f16x2", ".b32", "fma.rn.f16x2", "add.rn.f16x2", ".b32", 4, 4},
};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

static void ptx_fma(mlprof__sb *p, const fma_kind *k)
{
    /* params: out, iters, m, c (m and c as the registers' type) */
    mlprof__sb_printf(p,
                      ".visible .entry %s(.param .u64 out, .param .u32 iters, .param %s m, .param %s c)\n"
                      "{\n"
                      "  .reg .pred %%p;\n"
                      "  .reg %s %%x<%d>;\n"
                      "  .reg %s %%m, %%c;\n"
                      "  .reg .u32 %%i, %%n, %%r<4>;\n"
                      "  .reg .u64 %%o, %%d;\n"
                      "  ld.param.u64 %%o, [out];\n"
                      "  ld.param.u32 %%n, [iters];\n"
                      "  ld.param%s %%m, [m];\n"
                      "  ld.param%s %%c, [c];\n"
                      "  mov%s %%x0, %%m;\n",
                      k->entry, k->reg, k->reg, k->reg, FMA_CHAINS, k->reg, k->reg, k->reg, k->reg);
    for (int j = 1; j < FMA_CHAINS; j++) /* each chain from its own start */
        mlprof__sb_printf(p, "  %s %%x%d, %%x%d, %%c;\n", k->add, j, j - 1);
    mlprof__sb_puts(p, "  mov.u32 %i, 0;\n"
                       "  setp.eq.u32 %p, %n, 0;\n"
                       "  @%p bra $DONE;\n"
                       "$LOOP:\n");
    for (int u = 0; u < FMA_UNROLL; u++)
        for (int j = 0; j < FMA_CHAINS; j++)
            mlprof__sb_printf(p, "  %s %%x%d, %%x%d, %%m, %%c;\n", k->fma, j, j);
    mlprof__sb_puts(p, "  add.u32 %i, %i, 1;\n"
                       "  setp.lt.u32 %p, %i, %n;\n"
                       "  @%p bra $LOOP;\n"
                       "$DONE:\n");
    for (int j = 1; j < FMA_CHAINS; j++)
        mlprof__sb_printf(p, "  %s %%x0, %%x0, %%x%d;\n", k->add, j);
    mlprof__sb_printf(p,
                      "  mov.u32 %%r0, %%ctaid.x;\n"
                      "  mov.u32 %%r1, %%ntid.x;\n"
                      "  mov.u32 %%r2, %%tid.x;\n"
                      "  mad.lo.u32 %%r3, %%r0, %%r1, %%r2;\n"
                      "  mul.wide.u32 %%d, %%r3, %d;\n"
                      "  add.u64 %%d, %%d, %%o;\n"
                      "  st.global%s [%%d], %%x0;\n"
                      "  ret;\n"
                      "}\n\n",
                      k->bytes, k->st);
}

static const char TRIAD_PTX[] =
    /* params: a, b, c, s, n (elements), passes */
    ".visible .entry mlprof_triad(.param .u64 a, .param .u64 b, .param .u64 c, .param .f64 s, .param .u64 n,\n"
    "                             .param .u32 passes)\n"
    "{\n"
    "  .reg .pred %q;\n"
    "  .reg .u32 %p, %np, %r<4>;\n"
    "  .reg .u64 %a, %b, %c, %n, %i, %i0, %stride, %t, %pa, %pb, %pc;\n"
    "  .reg .f64 %s, %vb, %vc, %va;\n"
    "  ld.param.u64 %a, [a];\n"
    "  ld.param.u64 %b, [b];\n"
    "  ld.param.u64 %c, [c];\n"
    "  ld.param.f64 %s, [s];\n"
    "  ld.param.u64 %n, [n];\n"
    "  ld.param.u32 %np, [passes];\n"
    "  mov.u32 %r0, %ctaid.x;\n"
    "  mov.u32 %r1, %ntid.x;\n"
    "  mov.u32 %r2, %tid.x;\n"
    "  mov.u32 %r3, %nctaid.x;\n"
    "  mul.wide.u32 %i0, %r0, %r1;\n"
    "  cvt.u64.u32 %t, %r2;\n"
    "  add.u64 %i0, %i0, %t;\n"
    "  mul.wide.u32 %stride, %r3, %r1;\n"
    "  mov.u32 %p, 0;\n"
    "$PASS:\n"
    "  setp.ge.u32 %q, %p, %np;\n"
    "  @%q bra $END;\n"
    "  mov.u64 %i, %i0;\n"
    "$ELEM:\n"
    "  setp.ge.u64 %q, %i, %n;\n"
    "  @%q bra $NEXT;\n"
    "  shl.b64 %t, %i, 3;\n"
    "  add.u64 %pb, %b, %t;\n"
    "  add.u64 %pc, %c, %t;\n"
    "  add.u64 %pa, %a, %t;\n"
    "  ld.global.cg.f64 %vb, [%pb];\n"
    "  ld.global.cg.f64 %vc, [%pc];\n"
    "  fma.rn.f64 %va, %s, %vc, %vb;\n"
    "  st.global.f64 [%pa], %va;\n"
    "  add.u64 %i, %i, %stride;\n"
    "  bra $ELEM;\n"
    "$NEXT:\n"
    "  add.u32 %p, %p, 1;\n"
    "  bra $PASS;\n"
    "$END:\n"
    "  ret;\n"
    "}\n";

char *gce_ptx(void)
{
    mlprof__sb p;
    mlprof__sb_init(&p);
    /* PTX ISA 7.0 (CUDA 11.0 drivers and later); sm_75, the oldest GPU
     * CUDA 13 supports: the driver compiles it for newer ones */
    mlprof__sb_puts(&p, ".version 7.0\n.target sm_75\n.address_size 64\n\n");
    for (size_t i = 0; i < NKINDS; i++)
        ptx_fma(&p, &KINDS[i]);
    mlprof__sb_puts(&p, TRIAD_PTX);
    mlprof__sb_putc(&p, '\0');
    if (p.failed) {
        mlprof__sb_free(&p);
        return NULL;
    }
    return p.data; /* the caller frees it */
}

/* --------------------------------------------------------- the driver */

/* The CUDA driver API's types and numbers (cuda.h), for dlopen */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUevent, *CUstream;
typedef unsigned long long CUdeviceptr;
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR 39
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101

typedef struct drv {
    void *lib;
    CUresult (*init)(unsigned);
    CUresult (*driver_version)(int *);
    CUresult (*device_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_name)(char *, int, CUdevice);
    CUresult (*device_attr)(int *, int, CUdevice);
    CUresult (*total_mem)(size_t *, CUdevice);
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_release)(CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*module_load)(CUmodule *, const void *, unsigned, int *, void **);
    CUresult (*module_unload)(CUmodule);
    CUresult (*module_function)(CUfunction *, CUmodule, const char *);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*mem_info)(size_t *, size_t *);
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_sync)(CUevent);
    CUresult (*event_elapsed)(float *, CUevent, CUevent);
    CUresult (*event_destroy)(CUevent);
    CUresult (*error_string)(CUresult, const char **);
    CUevent e0, e1;
} drv;

static int load_driver(drv *d, const char *library, char *err, size_t len)
{
    const char *env = getenv("MLPROF_CUDA_LIBRARY");
    const char *name = library ? library : env && env[0] ? env : "libcuda.so.1";
    d->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!d->lib) {
        const char *e = dlerror();
        snprintf(err, len, "no NVIDIA driver: %s cannot be loaded (%s)", name, e ? e : "not found");
        return 1;
    }
    struct {
        void **slot;
        const char *name, *older; /* older: the name before a _v2, where it may be all there is */
    } fns[] = {
        {(void **)&d->init, "cuInit", NULL},
        {(void **)&d->driver_version, "cuDriverGetVersion", NULL},
        {(void **)&d->device_count, "cuDeviceGetCount", NULL},
        {(void **)&d->device_get, "cuDeviceGet", NULL},
        {(void **)&d->device_name, "cuDeviceGetName", NULL},
        {(void **)&d->device_attr, "cuDeviceGetAttribute", NULL},
        {(void **)&d->total_mem, "cuDeviceTotalMem_v2", NULL},
        {(void **)&d->ctx_retain, "cuDevicePrimaryCtxRetain", NULL},
        {(void **)&d->ctx_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
        {(void **)&d->ctx_set, "cuCtxSetCurrent", NULL},
        {(void **)&d->module_load, "cuModuleLoadDataEx", NULL},
        {(void **)&d->module_unload, "cuModuleUnload", NULL},
        {(void **)&d->module_function, "cuModuleGetFunction", NULL},
        {(void **)&d->mem_alloc, "cuMemAlloc_v2", NULL},
        {(void **)&d->mem_free, "cuMemFree_v2", NULL},
        {(void **)&d->mem_info, "cuMemGetInfo_v2", NULL},
        {(void **)&d->memset8, "cuMemsetD8_v2", NULL},
        {(void **)&d->launch, "cuLaunchKernel", NULL},
        {(void **)&d->event_create, "cuEventCreate", NULL},
        {(void **)&d->event_record, "cuEventRecord", NULL},
        {(void **)&d->event_sync, "cuEventSynchronize", NULL},
        {(void **)&d->event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime"},
        {(void **)&d->event_destroy, "cuEventDestroy_v2", NULL},
        {(void **)&d->error_string, "cuGetErrorString", NULL},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(d->lib, fns[i].name);
        if (!*fns[i].slot && fns[i].older)
            *fns[i].slot = dlsym(d->lib, fns[i].older);
        if (!*fns[i].slot) {
            snprintf(err, len, "%s has no %s: a CUDA driver older than 11.0?", name, fns[i].name);
            dlclose(d->lib);
            d->lib = NULL;
            return -1;
        }
    }
    return 0;
}

/* Says what call failed with which error; -1. */
static int failed(const drv *d, const char *call, CUresult rc, char *err, size_t len)
{
    const char *what = NULL;
    if (d->error_string(rc, &what) != 0 || !what)
        what = "unknown error";
    snprintf(err, len, "%s failed: %s (CUresult %d)", call, what, rc);
    return -1;
}

#define CU(call, args)                                                                                     \
    do {                                                                                                   \
        CUresult rc_ = d->call args;                                                                       \
        if (rc_ != 0)                                                                                      \
            return failed(d, #call, rc_, err, len);                                                        \
    } while (0)

/* One launch, timed by events on the default stream: its seconds. */
static int timed(drv *d, CUfunction f, unsigned grid, void **params, double *secs, char *err, size_t len)
{
    float ms = 0;
    CU(event_record, (d->e0, NULL));
    CU(launch, (f, grid, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL));
    CU(event_record, (d->e1, NULL));
    CU(event_sync, (d->e1));
    CU(event_elapsed, (&ms, d->e0, d->e1));
    *secs = ms / 1e3;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ measuring */

typedef struct run {
    drv *d;
    const gce_options *o;
    unsigned grid;
    CUmodule mod;
} run;

/* A count of loop steps that took secs, scaled towards target seconds: at
 * least doubled, at most max. */
static unsigned grow_count(unsigned n, double secs, double target, unsigned max)
{
    double want = secs > 0 ? n * target / secs : n * 64.0;
    if (want < 2.0 * n)
        want = 2.0 * n;
    return want > max ? max : (unsigned)want;
}

/* One kernel's rate: *count (a parameter of its launch: the loop steps or
 * passes, at most max) grown until a launch takes about o->seconds, then
 * o->repeats launches, each rate work * count / seconds. */
static int measured_rate(run *r, CUfunction f, void **params, unsigned *count, unsigned max, double work,
                         ce_stat *out, char *err, size_t len)
{
    double secs = 0, rates[64];
    for (int tries = 0; tries < 8; tries++) {
        if (timed(r->d, f, r->grid, params, &secs, err, len) != 0)
            return -1;
        if (secs >= r->o->seconds / 2 || *count >= max)
            break;
        *count = grow_count(*count, secs, r->o->seconds, max);
    }
    for (int i = 0; i < r->o->repeats; i++) {
        if (timed(r->d, f, r->grid, params, &secs, err, len) != 0)
            return -1;
        rates[i] = secs > 0 ? work * *count / secs : 0;
    }
    *out = ce_stat_of(rates, r->o->repeats);
    return 0;
}

/* The FMA peak of one kind: iterations calibrated to o->seconds, then
 * o->repeats launches. */
static int measure_fma(run *r, const fma_kind *k, CUdeviceptr out, ce_point *pt, char *err, size_t len)
{
    drv *d = r->d;
    CUfunction f;
    CU(module_function, (&f, r->mod, k->entry));
    union {
        double f64;
        float f32;
        uint32_t b32;
    } m, c;
    if (strcmp(k->reg, ".f64") == 0)
        m.f64 = c.f64 = 0.5;
    else if (strcmp(k->reg, ".f32") == 0)
        m.f32 = c.f32 = 0.5f;
    else
        m.b32 = c.b32 = 0x38003800u; /* 0.5 in both halves */
    unsigned iters = 64;
    void *params[] = {&out, &iters, &m, &c};
    double threads = (double)r->grid * BLOCK;
    memset(pt, 0, sizeof *pt);
    snprintf(pt->what, sizeof pt->what, "%s", k->what);
    pt->threads = (int)threads;
    return measured_rate(r, f, params, &iters, 1u << 30, threads * FMA_UNROLL * FMA_CHAINS * k->flops, &pt->s, err,
                         len);
}

/* The triad's bandwidth over bytes (the three arrays together). */
static int measure_triad(run *r, CUfunction f, CUdeviceptr base, double bytes, ce_point *pt, char *err, size_t len)
{
    /* a whole number of elements per thread: with a remainder, the threads
     * that have one more would run the last part of every pass alone */
    unsigned long long threads = r->grid * (unsigned long long)BLOCK, n = (unsigned long long)(bytes / 24);
    n = n < threads ? threads : n / threads * threads;
    CUdeviceptr a = base, b = base + n * 8, c = base + 2 * n * 8;
    double s = 3.0;
    unsigned passes = 1;
    void *params[] = {&a, &b, &c, &s, &n, &passes};
    double secs = 0;
    if (timed(r->d, f, r->grid, params, &secs, err, len) != 0) /* the first touch */
        return -1;
    memset(pt, 0, sizeof *pt);
    pt->threads = (int)threads;
    pt->bytes = 24.0 * (double)n;
    return measured_rate(r, f, params, &passes, 1u << 20, 24.0 * (double)n, &pt->s, err, len);
}

void gce_options_default(gce_options *o)
{
    memset(o, 0, sizeof *o);
    o->repeats = 5;
    o->seconds = 0.02;
}

static void say(const gce_options *o, const char *what)
{
    if (o->progress) {
        fprintf(o->progress, "mlprof ceilings --gpu: %s\n", what);
        fflush(o->progress);
    }
}

static int measure_on(run *r, gce_ceilings *c, char *err, size_t len)
{
    drv *d = r->d;
    const gce_options *o = r->o;
    char *ptx = gce_ptx();
    if (!ptx) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    char log[8192] = "";
    int opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    CUresult rc = d->module_load(&r->mod, ptx, 2, opts, vals);
    mlprof__free(ptx);
    if (rc != 0) {
        failed(d, "cuModuleLoadDataEx (the kernels' PTX)", rc, err, len);
        size_t at = strlen(err);
        snprintf(err + at, len - at, "%s%.600s", log[0] ? ": " : "", log);
        return -1;
    }
    size_t free_b = 0, total_b = 0;
    CU(mem_info, (&free_b, &total_b));
    /* the largest working set: 8x the L2, at least 256 MiB, at most a
     * quarter of what is free */
    double top = 8 * c->l2_bytes;
    if (top < 256.0 * 1048576)
        top = 256.0 * 1048576;
    if (top > free_b / 4.0)
        top = free_b / 4.0;
    CUdeviceptr buf = 0, out = 0;
    CU(mem_alloc, (&out, (size_t)r->grid * BLOCK * 8));
    CUresult arc = d->mem_alloc(&buf, (size_t)top + 3 * 8 * (size_t)r->grid * BLOCK);
    if (arc != 0) {
        d->mem_free(out);
        return failed(d, "cuMemAlloc_v2", arc, err, len);
    }
    int ret = 0;
    if ((rc = d->memset8(buf, 0, (size_t)top)) != 0)
        ret = failed(d, "cuMemsetD8_v2", rc, err, len);
    for (size_t i = 0; ret == 0 && i < NKINDS; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s FMA peak", KINDS[i].what);
        say(o, what);
        ret = measure_fma(r, &KINDS[i], out, &c->compute[c->ncompute], err, len);
        c->ncompute += ret == 0;
    }
    CUfunction triad = NULL;
    if (ret == 0 && (rc = d->module_function(&triad, r->mod, "mlprof_triad")) != 0)
        ret = failed(d, "cuModuleGetFunction", rc, err, len);
    /* L2: a quarter of it (some GPUs split it in two partitions) */
    struct {
        const char *what;
        double bytes;
    } lv[] = {{"L2", c->l2_bytes / 4}, {"DRAM", top}};
    for (size_t i = 0; ret == 0 && i < 2; i++) {
        if (lv[i].bytes < 65536)
            continue; /* no L2 size said */
        char what[64];
        snprintf(what, sizeof what, "triad in %s", lv[i].what);
        say(o, what);
        ret = measure_triad(r, triad, buf, lv[i].bytes, &c->levels[c->nlevels], err, len);
        if (ret == 0) {
            snprintf(c->levels[c->nlevels].what, sizeof c->levels[0].what, "%s", lv[i].what);
            c->levels[c->nlevels].cache_bytes = i == 0 ? c->l2_bytes : 0;
            c->nlevels++;
        }
    }
    say(o, "triad curve");
    /* from one element per thread, doubling */
    for (double ws = 24.0 * r->grid * BLOCK; ret == 0 && ws <= top && c->ncurve < GCE_MAX_CURVE; ws *= 2)
        if ((ret = measure_triad(r, triad, buf, ws, &c->curve[c->ncurve], err, len)) == 0)
            c->ncurve++;
    d->mem_free(buf);
    d->mem_free(out);
    return ret;
}

int gce_measure(gce_ceilings *c, const gce_options *o, char *err, size_t len)
{
    memset(c, 0, sizeof *c);
    drv dv, *d = &dv;
    memset(d, 0, sizeof *d);
    int rc = load_driver(d, o->library, err, len);
    if (rc != 0)
        return rc;
    int n = 0, ret = 0;
    CUresult cr = d->init(0);
    if (cr == CUDA_ERROR_NO_DEVICE || (cr == 0 && (d->device_count(&n) != 0 || n == 0))) {
        snprintf(err, len, "no GPU: the CUDA driver sees no device");
        ret = 1;
        goto out;
    }
    if (cr != 0) {
        ret = failed(d, "cuInit", cr, err, len);
        goto out;
    }
    if (o->device < 0 || o->device >= n) {
        snprintf(err, len, "no GPU %d: the CUDA driver sees %d (0 to %d)", o->device, n, n - 1);
        ret = 1;
        goto out;
    }
    CUdevice dev;
    CUcontext ctx = NULL;
    int sms = 0, l2 = 0, per_sm = 0;
    size_t mem = 0;
    if ((cr = d->device_get(&dev, o->device)) != 0 || (cr = d->device_name(c->gpu, sizeof c->gpu, dev)) != 0 ||
        (cr = d->device_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) != 0 ||
        (cr = d->device_attr(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)) != 0 ||
        (cr = d->device_attr(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev)) != 0 ||
        (cr = d->device_attr(&c->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) != 0 ||
        (cr = d->device_attr(&c->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) != 0 ||
        (cr = d->total_mem(&mem, dev)) != 0 || (cr = d->driver_version(&c->driver)) != 0) {
        ret = failed(d, "querying the device", cr, err, len);
        goto out;
    }
    c->device = o->device;
    c->sms = sms;
    c->l2_bytes = l2;
    c->mem_bytes = (double)mem;
    c->repeats = o->repeats;
    c->block = BLOCK;
    /* every SM full of resident warps */
    c->grid = (unsigned)(sms > 0 ? sms : 1) * (unsigned)(per_sm >= BLOCK ? per_sm / BLOCK : 1);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(c->when, sizeof c->when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if ((cr = d->ctx_retain(&ctx, dev)) != 0 || (cr = d->ctx_set(ctx)) != 0) {
        ret = failed(d, ctx ? "cuCtxSetCurrent" : "cuDevicePrimaryCtxRetain", cr, err, len);
        if (ctx)
            d->ctx_release(dev);
        goto out;
    }
    if ((cr = d->event_create(&d->e0, 0)) != 0 || (cr = d->event_create(&d->e1, 0)) != 0) {
        ret = failed(d, "cuEventCreate", cr, err, len);
    } else {
        run r = {d, o, c->grid, NULL};
        double t0 = now_s();
        ret = measure_on(&r, c, err, len);
        if (r.mod)
            d->module_unload(r.mod);
        if (o->progress && ret == 0)
            fprintf(o->progress, "mlprof ceilings --gpu: measured in %.1f s\n", now_s() - t0);
    }
    if (d->e0)
        d->event_destroy(d->e0);
    if (d->e1)
        d->event_destroy(d->e1);
    d->ctx_set(NULL);
    d->ctx_release(dev);
out:
    /* libcuda stays loaded: the driver's own threads may outlive cuInit's
     * caller, and unloading it under them is not safe */
    return ret;
}

/* ------------------------------------------------------------- printing */

void gce_print(const gce_ceilings *c, mlprof__sb *out)
{
    mlprof__sb_printf(out, "GPU %d: %s (compute capability %d.%d, %d SMs, L2 ", c->device, c->gpu, c->cc_major,
                      c->cc_minor, c->sms);
    ce_put_size(out, c->l2_bytes);
    mlprof__sb_puts(out, ", memory ");
    ce_put_size(out, c->mem_bytes);
    mlprof__sb_printf(out, "), driver %d.%d, launches of %u x %u threads, measured %s, %d times each\n",
                      c->driver / 1000, c->driver % 1000 / 10, c->grid, c->block, c->when, c->repeats);
    ce_ceilings *t = mlprof__malloc(sizeof *t);
    if (!t) {
        out->failed = 1;
        return;
    }
    gce_to_ceilings(c, t);
    ce_print_tables(t, out);
    mlprof__free(t);
}

_Static_assert((int)GCE_MAX_COMPUTE <= (int)CE_MAX_COMPUTE && (int)GCE_MAX_LEVELS <= (int)CE_MAX_LEVELS &&
                   (int)GCE_MAX_CURVE <= (int)CE_MAX_CURVE,
               "a GPU's ceilings fit a ce_ceilings");

void gce_to_ceilings(const gce_ceilings *g, ce_ceilings *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->cpu, sizeof c->cpu, "%s", g->gpu);
    c->gpu = 1;
    c->threads = (int)(g->grid * g->block);
    snprintf(c->isa, sizeof c->isa, "ptx");
    snprintf(c->when, sizeof c->when, "%s", g->when);
    c->repeats = g->repeats;
    c->load = -1;
    snprintf(c->note, sizeof c->note,
             "GPU %d, compute capability %d.%d, %d SMs, L2 %.0f bytes, memory %.0f bytes, driver %d; an FMA is 2 "
             "FLOPs, a half2 FMA 4; no tensor cores",
             g->device, g->cc_major, g->cc_minor, g->sms, g->l2_bytes, g->mem_bytes, g->driver);
    memcpy(c->compute, g->compute, g->ncompute * sizeof *c->compute);
    c->ncompute = g->ncompute;
    memcpy(c->levels, g->levels, g->nlevels * sizeof *c->levels);
    c->nlevels = g->nlevels;
    memcpy(c->curve, g->curve, g->ncurve * sizeof *c->curve);
    c->ncurve = g->ncurve;
}

void gce_write_json(const gce_ceilings *g, mlprof__sb *out)
{
    ce_ceilings *c = mlprof__malloc(sizeof *c);
    if (!c) {
        out->failed = 1;
        return;
    }
    gce_to_ceilings(g, c);
    ce_write_json(c, out);
    mlprof__free(c);
}
