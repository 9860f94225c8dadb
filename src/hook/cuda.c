/*
 * cuda.c - the CUDA runtime and cuBLAS, seen from the CPU (mlprof run).
 *
 * Runtime (hook "cuda"; which functions, the cuda_functions key):
 *   cudaMalloc, cudaMallocAsync, cudaFree, cudaFreeAsync - into the memory
 *     profiler, device cuda:N (the calling thread's current device), and as
 *     spans with their bytes;
 *   cudaMemcpy, cudaMemcpyAsync, cudaMemset, cudaMemsetAsync - spans with the
 *     bytes and the direction (HtoD, DtoH...);
 *   cudaLaunchKernel - a span named after the kernel when the host stub's
 *     symbol is exported (otherwise "cudaLaunchKernel"), with the kernel's
 *     symbol or address, grid, block, shared memory and stream;
 *   cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize;
 *   cudaProfilerStart, cudaProfilerStop - not recorded: with
 *     capture_range=cudaProfilerStart, each start..stop is one capture.
 * cuBLAS (hook "cublas"): cublasSgemm_v2, cublasDgemm_v2, cublasGemmEx, the
 *   strided batched forms and cublasLtMatmul (its shapes, types and batch
 *   read back from its layouts and descriptor) - spans with M, N, K, batch,
 *   types, FLOPs (2MNK per matrix) and the bytes of the matrices
 *   (mlprof/opcost.h).
 *
 * These are CPU-side times: what the call cost the thread (a launch, a
 * wait). What the GPU did is CUPTI's part. A program built with nvcc links
 * the runtime statically unless told -cudart shared: its calls never reach
 * an interposer. The declarations used are written here from CUDA's
 * documented API; no CUDA header is needed to build.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../record/capture.h"
#include "hook.h"
#include "mlprof/opcost.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct dim3_ {
    unsigned x, y, z;
} dim3_;

enum { F_MALLOC, F_MALLOC_ASYNC, F_FREE, F_FREE_ASYNC, F_MEMCPY, F_MEMCPY_ASYNC, F_MEMSET, F_MEMSET_ASYNC,
       F_LAUNCH, F_DEVICE_SYNC, F_STREAM_SYNC, F_EVENT_SYNC, F_GET_DEVICE,
       F_SGEMM, F_DGEMM, F_GEMM_EX, F_SGEMM_SB, F_DGEMM_SB, F_GEMM_SB_EX, F_LT_MATMUL, F_LT_LAYOUT_GET,
       F_LT_DESC_GET, F_N };
#define k_names mlprof__cuda_names /* select.c: the cuda_functions key checks names against it */
_Static_assert(F_N == MLPROF__CUDA_NAMES, "select.c names every function");
#define F_FIRST_CUBLAS F_SGEMM

static void *g_real[F_N];
static mlprof_span *g_task[F_N];
static mlprof_domain *g_runtime, *g_cublas;

void mlprof__hook_cuda_init(void)
{
    g_runtime = mlprof_domain_create("cuda_runtime");
    g_cublas = mlprof_domain_create("cublas");
    for (int i = 0; i < F_N; i++) {
        if (i != F_GET_DEVICE && i != F_LAUNCH && i != F_LT_LAYOUT_GET && i != F_LT_DESC_GET)
            g_task[i] = mlprof_task_create(i < F_FIRST_CUBLAS ? g_runtime : g_cublas, k_names[i]);
    }
}

static void *real(int f) { return mlprof__hook_real_cached(&g_real[f], k_names[f], 1); }

/* Whether this call of runtime function f (or of cuBLAS) is recorded. */
static int wanted(int f)
{
    if (mlprof__busy || !(mlprof_active_flag & 1))
        return 0;
    if (f >= F_FIRST_CUBLAS)
        return mlprof__hook_on(MLPROF__HOOK_CUBLAS);
    return mlprof__hook_on(MLPROF__HOOK_CUDA) &&
           (__atomic_load_n(&mlprof__g.cfg.cuda_functions_mask, __ATOMIC_RELAXED) >> f & 1);
}

static int current_device(void)
{
    int dev = 0;
    typedef int (*get_fn)(int *);
    mlprof__busy++;
    if (((get_fn)real(F_GET_DEVICE))(&dev) != 0)
        dev = 0;
    mlprof__busy--;
    return dev;
}

static const char *copy_kind(int kind)
{
    static const char *const names[] = {"HtoH", "HtoD", "DtoH", "DtoD", "default"};
    return kind >= 0 && kind <= 4 ? names[kind] : "?";
}

/* ------------------------------------------------------------ memory */

typedef int (*malloc_fn)(void **, size_t);
typedef int (*malloc_async_fn)(void **, size_t, void *);
typedef int (*free_fn)(void *);
typedef int (*free_async_fn)(void *, void *);

EXPORT int cudaMalloc(void **p, size_t n);
EXPORT int cudaMallocAsync(void **p, size_t n, void *stream);
EXPORT int cudaFree(void *p);
EXPORT int cudaFreeAsync(void *p, void *stream);

static int after_malloc(int f, int rc, void **p, size_t n, int span)
{
    if (span) {
        mlprof_arg_int("bytes", (int64_t)n);
        mlprof_end(g_task[f]);
    }
    if (rc == 0 && p && *p && span)
        mlprof__mem_alloc_lower(MLPROF_DEVICE_CUDA(current_device()), *p, n);
    return rc;
}

EXPORT int cudaMalloc(void **p, size_t n)
{
    int span = wanted(F_MALLOC);
    if (span)
        mlprof_begin(g_task[F_MALLOC]);
    return after_malloc(F_MALLOC, ((malloc_fn)real(F_MALLOC))(p, n), p, n, span);
}

EXPORT int cudaMallocAsync(void **p, size_t n, void *stream)
{
    int span = wanted(F_MALLOC_ASYNC);
    if (span)
        mlprof_begin(g_task[F_MALLOC_ASYNC]);
    return after_malloc(F_MALLOC_ASYNC, ((malloc_async_fn)real(F_MALLOC_ASYNC))(p, n, stream), p, n, span);
}

static int before_free(int f, void *p)
{
    int span = wanted(f);
    if (span) {
        if (p)
            mlprof__mem_free_lower(MLPROF_DEVICE_CUDA(current_device()), p);
        mlprof_begin(g_task[f]);
    }
    return span;
}

EXPORT int cudaFree(void *p)
{
    int span = before_free(F_FREE, p);
    int rc = ((free_fn)real(F_FREE))(p);
    if (span)
        mlprof_end(g_task[F_FREE]);
    return rc;
}

EXPORT int cudaFreeAsync(void *p, void *stream)
{
    int span = before_free(F_FREE_ASYNC, p);
    int rc = ((free_async_fn)real(F_FREE_ASYNC))(p, stream);
    if (span)
        mlprof_end(g_task[F_FREE_ASYNC]);
    return rc;
}

/* ------------------------------------------------------ copies, sets */

typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*memcpy_async_fn)(void *, const void *, size_t, int, void *);
typedef int (*memset_fn)(void *, int, size_t);
typedef int (*memset_async_fn)(void *, int, size_t, void *);

EXPORT int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream);
EXPORT int cudaMemset(void *p, int v, size_t n);
EXPORT int cudaMemsetAsync(void *p, int v, size_t n, void *stream);

static int bytes_span(int f, size_t n, const char *kind)
{
    if (!wanted(f))
        return 0;
    mlprof_begin(g_task[f]);
    mlprof_arg_int("bytes", (int64_t)n);
    if (kind)
        mlprof_arg_str("kind", kind);
    return 1;
}

static int end_span(int f, int span, int rc)
{
    if (span)
        mlprof_end(g_task[f]);
    return rc;
}

EXPORT int cudaMemcpy(void *dst, const void *src, size_t n, int kind)
{
    int span = bytes_span(F_MEMCPY, n, copy_kind(kind));
    return end_span(F_MEMCPY, span, ((memcpy_fn)real(F_MEMCPY))(dst, src, n, kind));
}

EXPORT int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    int span = bytes_span(F_MEMCPY_ASYNC, n, copy_kind(kind));
    return end_span(F_MEMCPY_ASYNC, span, ((memcpy_async_fn)real(F_MEMCPY_ASYNC))(dst, src, n, kind, stream));
}

EXPORT int cudaMemset(void *p, int v, size_t n)
{
    int span = bytes_span(F_MEMSET, n, NULL);
    return end_span(F_MEMSET, span, ((memset_fn)real(F_MEMSET))(p, v, n));
}

EXPORT int cudaMemsetAsync(void *p, int v, size_t n, void *stream)
{
    int span = bytes_span(F_MEMSET_ASYNC, n, NULL);
    return end_span(F_MEMSET_ASYNC, span, ((memset_async_fn)real(F_MEMSET_ASYNC))(p, v, n, stream));
}

/* ---------------------------------------------------------- launches */

typedef int (*launch_fn)(const void *, dim3_, dim3_, void **, size_t, void *);
EXPORT int cudaLaunchKernel(const void *func, dim3_ grid, dim3_ block, void **args, size_t shared, void *stream);

EXPORT int cudaLaunchKernel(const void *func, dim3_ grid, dim3_ block, void **args, size_t shared, void *stream)
{
    int span = wanted(F_LAUNCH);
    if (span) {
        /* the host stub's symbol names the kernel */
        Dl_info where;
        const char *sym = dladdr(func, &where) && where.dli_sname && where.dli_saddr == func ? where.dli_sname : NULL;
        char text[48];
        mlprof_begin_dynamic(g_runtime, sym ? sym : "cudaLaunchKernel");
        if (sym) {
            mlprof_arg_str("kernel", sym);
        } else {
            snprintf(text, sizeof text, "%p", func);
            mlprof_arg_str("kernel", text);
        }
        snprintf(text, sizeof text, "[%u,%u,%u]", grid.x, grid.y, grid.z);
        mlprof_arg_str("grid", text);
        snprintf(text, sizeof text, "[%u,%u,%u]", block.x, block.y, block.z);
        mlprof_arg_str("block", text);
        mlprof_arg_int("shared_bytes", (int64_t)shared);
        mlprof_arg_int("stream", (int64_t)(uintptr_t)stream);
        mlprof_arg_str("launch", "cudaLaunchKernel");
    }
    int rc = ((launch_fn)real(F_LAUNCH))(func, grid, block, args, shared, stream);
    if (span)
        mlprof_end_dynamic(g_runtime);
    return rc;
}

/* ------------------------------------------------------------ waits */

typedef int (*sync_fn)(void);
typedef int (*sync_on_fn)(void *);
EXPORT int cudaDeviceSynchronize(void);
EXPORT int cudaStreamSynchronize(void *stream);
EXPORT int cudaEventSynchronize(void *event);

EXPORT int cudaDeviceSynchronize(void)
{
    int span = wanted(F_DEVICE_SYNC);
    if (span)
        mlprof_begin(g_task[F_DEVICE_SYNC]);
    return end_span(F_DEVICE_SYNC, span, ((sync_fn)real(F_DEVICE_SYNC))());
}

EXPORT int cudaStreamSynchronize(void *stream)
{
    int span = wanted(F_STREAM_SYNC);
    if (span)
        mlprof_begin(g_task[F_STREAM_SYNC]);
    return end_span(F_STREAM_SYNC, span, ((sync_on_fn)real(F_STREAM_SYNC))(stream));
}

EXPORT int cudaEventSynchronize(void *event)
{
    int span = wanted(F_EVENT_SYNC);
    if (span)
        mlprof_begin(g_task[F_EVENT_SYNC]);
    return end_span(F_EVENT_SYNC, span, ((sync_on_fn)real(F_EVENT_SYNC))(event));
}

/* ------------------------------------------------------------ capture range */

EXPORT int cudaProfilerStart(void);
EXPORT int cudaProfilerStop(void);

/* Whichever of mlprof and the runtime answers, the program's call is passed on
 * (another profiler may be waiting for it too). */
EXPORT int cudaProfilerStart(void)
{
    static void *real_start;
    mlprof__capture_cuda_profiler(1);
    sync_fn fn = (sync_fn)mlprof__hook_real_cached(&real_start, "cudaProfilerStart", 0);
    return fn ? fn() : 0;
}

EXPORT int cudaProfilerStop(void)
{
    static void *real_stop;
    sync_fn fn = (sync_fn)mlprof__hook_real_cached(&real_stop, "cudaProfilerStop", 0);
    int rc = fn ? fn() : 0;
    mlprof__capture_cuda_profiler(0);
    return rc;
}

/* ------------------------------------------------------------ cuBLAS */

/* cudaDataType: its size in bytes and name. */
static int64_t data_size(int t)
{
    switch (t) {
    case 0: case 6: case 10: return 4; /* R_32F, C_16F, R_32I */
    case 1: case 4: return 8;          /* R_64F, C_32F */
    case 5: return 16;                 /* C_64F */
    case 2: case 7: case 14: return 2; /* R_16F, C_8I, R_16BF */
    case 3: case 8: case 28: case 29: return 1; /* R_8I, R_8U, R_8F_E4M3, R_8F_E5M2 */
    default: return 0;
    }
}

static const char *data_name(int t)
{
    switch (t) {
    case 0: return "float32";
    case 1: return "float64";
    case 2: return "float16";
    case 14: return "bfloat16";
    case 3: return "int8";
    case 10: return "int32";
    case 28: return "float8_e4m3";
    case 29: return "float8_e5m2";
    default: return "other";
    }
}

static char op_char(int op) { return op == 0 ? 'N' : op == 1 ? 'T' : op == 2 ? 'C' : '?'; }

static int gemm_span(int f, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t batch, int at, int bt, int ct)
{
    if (!wanted(f))
        return 0;
    char trans[3] = {op_char(ta), op_char(tb), '\0'};
    mlprof_begin(g_task[f]);
    mlprof_arg_int("M", m);
    mlprof_arg_int("N", n);
    mlprof_arg_int("K", k);
    if (batch != 1)
        mlprof_arg_int("batch", batch);
    mlprof_arg_str("trans", trans);
    mlprof_arg_str("dtype", data_name(at));
    if (ct != at)
        mlprof_arg_str("out_dtype", data_name(ct));
    /* beta is not read (it may be a device pointer): C counted once, as written */
    mlprof_opcost c;
    if (mlprof_opcost_gemm(batch, m, n, k, data_size(at), data_size(bt), data_size(ct), 0, &c) == 0) {
        mlprof_arg_int("flops", c.flops);
        mlprof_arg_int("bytes", c.bytes);
    }
    return 1;
}

typedef int (*sgemm_fn)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
                        const float *, float *, int);
typedef int (*dgemm_fn)(void *, int, int, int, int, int, const double *, const double *, int, const double *, int,
                        const double *, double *, int);
typedef int (*gemm_ex_fn)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int,
                          int, const void *, void *, int, int, int, int);
typedef int (*sgemm_sb_fn)(void *, int, int, int, int, int, const float *, const float *, int, long long,
                           const float *, int, long long, const float *, float *, int, long long, int);
typedef int (*dgemm_sb_fn)(void *, int, int, int, int, int, const double *, const double *, int, long long,
                           const double *, int, long long, const double *, double *, int, long long, int);
typedef int (*gemm_sb_ex_fn)(void *, int, int, int, int, int, const void *, const void *, int, int, long long,
                             const void *, int, int, long long, const void *, void *, int, int, long long, int, int,
                             int);

EXPORT int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                          const float *b, int ldb, const float *beta, float *c, int ldc);
EXPORT int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a,
                          int lda, const double *b, int ldb, const double *beta, double *c, int ldc);
EXPORT int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at,
                        int lda, const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc,
                        int compute, int algo);
EXPORT int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                                     const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                                     const float *beta, float *c, int ldc, long long sc, int batch);
EXPORT int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                                     const double *a, int lda, long long sa, const double *b, int ldb,
                                     long long sb, const double *beta, double *c, int ldc, long long sc, int batch);
EXPORT int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                      const void *a, int at, int lda, long long sa, const void *b, int bt, int ldb,
                                      long long sb, const void *beta, void *c, int ct, int ldc, long long sc,
                                      int batch, int compute, int algo);

EXPORT int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                          const float *b, int ldb, const float *beta, float *c, int ldc)
{
    int span = gemm_span(F_SGEMM, ta, tb, m, n, k, 1, 0, 0, 0);
    return end_span(F_SGEMM, span, ((sgemm_fn)real(F_SGEMM))(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
}

EXPORT int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a,
                          int lda, const double *b, int ldb, const double *beta, double *c, int ldc)
{
    int span = gemm_span(F_DGEMM, ta, tb, m, n, k, 1, 1, 1, 1);
    return end_span(F_DGEMM, span, ((dgemm_fn)real(F_DGEMM))(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
}

EXPORT int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at,
                        int lda, const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc,
                        int compute, int algo)
{
    int span = gemm_span(F_GEMM_EX, ta, tb, m, n, k, 1, at, bt, ct);
    return end_span(F_GEMM_EX, span, ((gemm_ex_fn)real(F_GEMM_EX))(h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb,
                                                                   beta, c, ct, ldc, compute, algo));
}

EXPORT int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                                     const float *a, int lda, long long sa, const float *b, int ldb, long long sb,
                                     const float *beta, float *c, int ldc, long long sc, int batch)
{
    int span = gemm_span(F_SGEMM_SB, ta, tb, m, n, k, batch, 0, 0, 0);
    return end_span(F_SGEMM_SB, span, ((sgemm_sb_fn)real(F_SGEMM_SB))(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb,
                                                                      sb, beta, c, ldc, sc, batch));
}

EXPORT int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                                     const double *a, int lda, long long sa, const double *b, int ldb,
                                     long long sb, const double *beta, double *c, int ldc, long long sc, int batch)
{
    int span = gemm_span(F_DGEMM_SB, ta, tb, m, n, k, batch, 1, 1, 1);
    return end_span(F_DGEMM_SB, span, ((dgemm_sb_fn)real(F_DGEMM_SB))(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb,
                                                                      sb, beta, c, ldc, sc, batch));
}

EXPORT int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                      const void *a, int at, int lda, long long sa, const void *b, int bt, int ldb,
                                      long long sb, const void *beta, void *c, int ct, int ldc, long long sc,
                                      int batch, int compute, int algo)
{
    int span = gemm_span(F_GEMM_SB_EX, ta, tb, m, n, k, batch, at, bt, ct);
    return end_span(F_GEMM_SB_EX, span,
                    ((gemm_sb_ex_fn)real(F_GEMM_SB_EX))(h, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb,
                                                        beta, c, ct, ldc, sc, batch, compute, algo));
}

/* cublasLtMatmul: D = op(A) op(B) (+ C). D is M x N; K is op(A)'s columns. */
typedef int lt_matmul_fn(void *, void *, const void *, const void *, void *, const void *, void *, const void *,
                         const void *, void *, void *, void *, const void *, void *, size_t, void *);
typedef int lt_get_fn(void *, int, void *, size_t, size_t *);
EXPORT lt_matmul_fn cublasLtMatmul;

enum { LAYOUT_TYPE = 0, LAYOUT_ROWS = 2, LAYOUT_COLS = 3, LAYOUT_BATCH = 5, DESC_TRANSA = 3, DESC_TRANSB = 4 };

static int lt_get(int f, void *obj, int attr, void *buf, size_t size)
{
    size_t written = 0;
    memset(buf, 0, size);
    return obj && ((lt_get_fn *)real(f))(obj, attr, buf, size, &written) == 0;
}

EXPORT int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *ad, const void *b, void *bd,
                          const void *beta, const void *c, void *cd, void *d, void *dd, const void *algo, void *ws,
                          size_t wsn, void *stream)
{
    int span = 0;
    if (wanted(F_LT_MATMUL)) {
        uint64_t a_rows, a_cols, d_rows, d_cols;
        uint32_t at, bt, dt;
        int32_t ta = 0, tb = 0, batch = 1;
        if (lt_get(F_LT_LAYOUT_GET, ad, LAYOUT_ROWS, &a_rows, sizeof a_rows) &&
            lt_get(F_LT_LAYOUT_GET, ad, LAYOUT_COLS, &a_cols, sizeof a_cols) &&
            lt_get(F_LT_LAYOUT_GET, dd, LAYOUT_ROWS, &d_rows, sizeof d_rows) &&
            lt_get(F_LT_LAYOUT_GET, dd, LAYOUT_COLS, &d_cols, sizeof d_cols) &&
            lt_get(F_LT_LAYOUT_GET, ad, LAYOUT_TYPE, &at, sizeof at) &&
            lt_get(F_LT_LAYOUT_GET, bd, LAYOUT_TYPE, &bt, sizeof bt) &&
            lt_get(F_LT_LAYOUT_GET, dd, LAYOUT_TYPE, &dt, sizeof dt)) {
            lt_get(F_LT_LAYOUT_GET, dd, LAYOUT_BATCH, &batch, sizeof batch);
            lt_get(F_LT_DESC_GET, desc, DESC_TRANSA, &ta, sizeof ta);
            lt_get(F_LT_DESC_GET, desc, DESC_TRANSB, &tb, sizeof tb);
            int64_t k = (int64_t)(ta == 0 ? a_cols : a_rows);
            span = gemm_span(F_LT_MATMUL, ta, tb, (int64_t)d_rows, (int64_t)d_cols, k, batch > 0 ? batch : 1,
                             (int)at, (int)bt, (int)dt);
        } else {
            mlprof_begin(g_task[F_LT_MATMUL]); /* layouts that cannot be read: the call alone */
            span = 1;
        }
    }
    return end_span(F_LT_MATMUL, span,
                    ((lt_matmul_fn *)real(F_LT_MATMUL))(h, desc, alpha, a, ad, b, bd, beta, c, cd, d, dd, algo, ws, wsn,
                                                        stream));
}
