/*
 * fake_libcuda.c - a CUDA driver with one made-up GPU, for `mlprof ceilings
 * --gpu` where there is none (src/analyze/gpu_ceilings.c). It runs nothing:
 * a launch advances a fake clock by the work it would do at known rates, and
 * events read that clock. The work is read from the PTX mlprof loads, not
 * from mlprof's own formulas: an FMA kernel's FLOPs are the fma instructions
 * between its $LOOP label and the branch back (2 FLOPs each, 4 for f16x2)
 * times the iterations and threads; the triad's bytes are its ld/st.global
 * f64 instructions (8 bytes each) times the elements and passes. So a test
 * that finds these rates in mlprof's output checks mlprof's FLOP and byte
 * counts against its kernels. Launches are checked: arguments inside
 * allocations, the grid not above what the GPU holds.
 *   GPU: "mlprof fake GPU", compute capability 9.0, 4 SMs of 2048 threads,
 *   L2 4 MiB, 1 GiB; FAKE_CUDA_DEVICES=0 makes it see none.
 *   Rates: fp64 10, fp32 20, fp16 40 TFLOP/s; the triad 5 TB/s within the
 *   L2, 1 TB/s beyond.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
#define OK 0
#define ERR_INVALID_VALUE 1
#define ERR_NOT_INITIALIZED 3
#define ERR_NO_DEVICE 100
#define ERR_INVALID_DEVICE 101
#define ERR_NOT_FOUND 500
#define ERR_LAUNCH 719

#define SMS 4
#define PER_SM 2048
#define L2 (4.0 * 1048576)
#define MEM (1024.0 * 1048576)

/* the driver's entry points, as mlprof looks them up */
CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int *v);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuDeviceGetName(char *name, int len, int dev);
CUresult cuDeviceGetAttribute(int *v, int attr, int dev);
CUresult cuDeviceTotalMem_v2(size_t *b, int dev);
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev);
CUresult cuDevicePrimaryCtxRelease_v2(int dev);
CUresult cuCtxSetCurrent(void *ctx);
CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals);
CUresult cuModuleUnload(void *mod);
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name);
CUresult cuMemAlloc_v2(unsigned long long *p, size_t size);
CUresult cuMemFree_v2(unsigned long long p);
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total);
CUresult cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n);
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **params, void **extra);
CUresult cuEventCreate(void **e, unsigned flags);
CUresult cuEventRecord(void *e, void *stream);
CUresult cuEventSynchronize(void *e);
CUresult cuEventElapsedTime_v2(float *ms, void *e0, void *e1);
CUresult cuEventDestroy_v2(void *e);
CUresult cuGetErrorString(CUresult rc, const char **s);

static int inited;
static double clock_s; /* the fake GPU's time */
static char *ptx;      /* what the module was loaded from */

typedef struct func {
    char name[64];
    double work; /* FLOPs or bytes per loop step of one thread */
    int triad;
} func;
static func funcs[8];
static int nfuncs;

typedef struct alloc {
    unsigned long long at;
    size_t size;
} alloc;
static alloc allocs[16];
static unsigned long long next_at = 0x100000000ull;

CUresult cuInit(unsigned flags)
{
    (void)flags;
    const char *n = getenv("FAKE_CUDA_DEVICES");
    if (n && atoi(n) == 0)
        return ERR_NO_DEVICE;
    inited = 1;
    return OK;
}

CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}

CUresult cuDeviceGetCount(int *n)
{
    *n = inited ? 1 : 0;
    return inited ? OK : ERR_NOT_INITIALIZED;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal != 0)
        return ERR_INVALID_DEVICE;
    *dev = 0;
    return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev)
{
    (void)dev;
    snprintf(name, (size_t)len, "mlprof fake GPU");
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    switch (attr) {
    case 16: *v = SMS; return OK;
    case 38: *v = (int)L2; return OK;
    case 39: *v = PER_SM; return OK;
    case 75: *v = 9; return OK;
    case 76: *v = 0; return OK;
    default: return ERR_INVALID_VALUE;
    }
}

CUresult cuDeviceTotalMem_v2(size_t *b, int dev)
{
    (void)dev;
    *b = (size_t)MEM;
    return OK;
}

static int ctx_refs;
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    (void)dev;
    ctx_refs++;
    *ctx = &ctx_refs;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
    (void)dev;
    ctx_refs--;
    return OK;
}
CUresult cuCtxSetCurrent(void *ctx)
{
    (void)ctx;
    return OK;
}

/* The work per loop step of each kernel in the PTX, counted from its text. */
static void read_ptx(void)
{
    nfuncs = 0;
    for (char *e = strstr(ptx, ".entry "); e && nfuncs < 8; e = strstr(e + 1, ".entry ")) {
        func *f = &funcs[nfuncs++];
        memset(f, 0, sizeof *f);
        sscanf(e + 7, "%63[A-Za-z0-9_]", f->name);
        char *end = strstr(e, "\n}\n");
        f->triad = strstr(f->name, "triad") != NULL;
        const char *from = strstr(e, f->triad ? "$ELEM:" : "$LOOP:");
        const char *to = from ? strstr(from, f->triad ? "bra $ELEM;" : "bra $LOOP;") : NULL;
        if (!from || !to || (end && to > end))
            continue;
        for (const char *p = from; p < to; p = strchr(p, '\n') + 1) {
            if (!f->triad && strncmp(p, "  fma.rn.f16x2 ", 15) == 0)
                f->work += 4;
            else if (!f->triad && strncmp(p, "  fma.rn.f", 10) == 0)
                f->work += 2;
            else if (f->triad && (strncmp(p, "  ld.global.cg.f64 ", 19) == 0 || strncmp(p, "  st.global.f64 ", 16) == 0))
                f->work += 8;
        }
    }
}

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *opts, void **vals)
{
    (void)n, (void)opts, (void)vals;
    free(ptx);
    size_t len = strlen(image) + 1;
    ptx = malloc(len);
    if (ptx)
        memcpy(ptx, image, len);
    if (!ptx || strncmp(ptx, ".version ", 9) != 0)
        return ERR_INVALID_VALUE;
    read_ptx();
    *mod = &funcs;
    return OK;
}
CUresult cuModuleUnload(void *mod)
{
    (void)mod;
    free(ptx);
    ptx = NULL;
    nfuncs = 0;
    return OK;
}
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    (void)mod;
    for (int i = 0; i < nfuncs; i++) {
        if (strcmp(funcs[i].name, name) == 0) {
            *fn = &funcs[i];
            return OK;
        }
    }
    return ERR_NOT_FOUND;
}

CUresult cuMemAlloc_v2(unsigned long long *p, size_t size)
{
    for (int i = 0; i < 16; i++) {
        if (!allocs[i].size) {
            allocs[i] = (alloc){next_at, size};
            *p = next_at;
            next_at += (size + 0xfffff) & ~(unsigned long long)0xfffff;
            return OK;
        }
    }
    return 2; /* out of memory */
}
CUresult cuMemFree_v2(unsigned long long p)
{
    for (int i = 0; i < 16; i++) {
        if (allocs[i].size && allocs[i].at == p) {
            allocs[i].size = 0;
            return OK;
        }
    }
    return ERR_INVALID_VALUE;
}
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    *free_b = (size_t)(MEM * 0.9);
    *total = (size_t)MEM;
    return OK;
}
CUresult cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n)
{
    (void)v;
    for (int i = 0; i < 16; i++)
        if (allocs[i].size && p >= allocs[i].at && p + n <= allocs[i].at + allocs[i].size)
            return OK;
    return ERR_INVALID_VALUE;
}

/* [p, p + n) inside one allocation */
static int inside(unsigned long long p, double n)
{
    for (int i = 0; i < 16; i++)
        if (allocs[i].size && p >= allocs[i].at && p + n <= (double)(allocs[i].at + allocs[i].size))
            return 1;
    return 0;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *stream, void **params, void **extra)
{
    (void)shmem, (void)stream, (void)extra;
    const func *f = fn;
    double threads = (double)gx * gy * gz * bx * by * bz;
    if (!f || f->work <= 0 || threads <= 0 || threads > SMS * PER_SM || bx > 1024) {
        fprintf(stderr, "fake_libcuda: a bad launch of %s: %u x %u threads\n", f ? f->name : "?", gx, bx);
        return ERR_LAUNCH;
    }
    double secs;
    if (!f->triad) {
        unsigned long long out = *(unsigned long long *)params[0];
        unsigned iters = *(unsigned *)params[1];
        if (!inside(out, threads * 4)) {
            fprintf(stderr, "fake_libcuda: %s's output is not inside an allocation\n", f->name);
            return ERR_LAUNCH;
        }
        double rate = strstr(f->name, "f64") ? 10e12 : strstr(f->name, "f16") ? 40e12 : 20e12;
        secs = threads * iters * f->work / rate;
    } else {
        unsigned long long a = *(unsigned long long *)params[0], b = *(unsigned long long *)params[1],
                           c = *(unsigned long long *)params[2], n = *(unsigned long long *)params[4];
        unsigned passes = *(unsigned *)params[5];
        if (!inside(a, n * 8.0) || !inside(b, n * 8.0) || !inside(c, n * 8.0)) {
            fprintf(stderr, "fake_libcuda: the triad's arrays (%llu elements) are not inside an allocation\n", n);
            return ERR_LAUNCH;
        }
        double bytes = f->work * (double)n; /* one pass */
        secs = bytes * passes / (bytes <= L2 ? 5e12 : 1e12);
    }
    clock_s += secs + 3e-6; /* and a launch's latency, which the events around it see too */
    return OK;
}

/* At exit: what mlprof left (a context retained, memory, events): said on
 * stderr, which the test reads. */
static int live_events;
__attribute__((destructor)) static void left_behind(void)
{
    int mem = 0;
    for (int i = 0; i < 16; i++)
        mem += allocs[i].size != 0;
    if (ctx_refs || mem || live_events)
        fprintf(stderr, "fake_libcuda: left behind: %d context references, %d allocations, %d events\n", ctx_refs,
                mem, live_events);
}

typedef struct event {
    double at;
    int recorded;
} event;

CUresult cuEventCreate(void **e, unsigned flags)
{
    (void)flags;
    *e = calloc(1, sizeof(event));
    live_events += *e != NULL;
    return *e ? OK : 2;
}
CUresult cuEventRecord(void *e, void *stream)
{
    (void)stream;
    ((event *)e)->at = clock_s;
    ((event *)e)->recorded = 1;
    return OK;
}
CUresult cuEventSynchronize(void *e)
{
    return ((event *)e)->recorded ? OK : ERR_INVALID_VALUE;
}
CUresult cuEventElapsedTime_v2(float *ms, void *e0, void *e1)
{
    *ms = (float)((((event *)e1)->at - ((event *)e0)->at) * 1e3);
    return OK;
}
CUresult cuEventDestroy_v2(void *e)
{
    live_events -= e != NULL;
    free(e);
    return OK;
}
CUresult cuGetErrorString(CUresult rc, const char **s)
{
    *s = rc == ERR_LAUNCH ? "fake launch failure" : rc == ERR_NO_DEVICE ? "no CUDA-capable device is detected"
                                                                         : "fake error";
    return OK;
}
