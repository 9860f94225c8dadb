/*
 * fake_cuda.c - a stand-in for libcudart and libcublas with the functions
 * that mlprof run's CUDA interposers stand in front of, for testing without
 * a GPU: device memory is host memory, copies are memcpy, a launch calls
 * nothing, a GEMM does nothing, and the current device is 1. Its cuDNN
 * descriptors are fake_desc structs that the test program fills in and the
 * getters read back.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

int cudaGetDevice(int *dev)
{
    *dev = 1;
    return 0;
}
int cudaMalloc(void **p, size_t n) { return (*p = malloc(n)) ? 0 : 2; }
/* each does its work itself: a call to another of these would go through the interposers again */
int cudaMallocAsync(void **p, size_t n, void *stream) { return (void)stream, (*p = malloc(n)) ? 0 : 2; }
int cudaFree(void *p) { return free(p), 0; }
int cudaFreeAsync(void *p, void *stream) { return (void)stream, free(p), 0; }
int cudaMemcpy(void *dst, const void *src, size_t n, int kind) { return (void)kind, memcpy(dst, src, n), 0; }
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
    return (void)kind, (void)stream, memcpy(dst, src, n), 0;
}
int cudaMemset(void *p, int v, size_t n) { return memset(p, v, n), 0; }
int cudaMemsetAsync(void *p, int v, size_t n, void *stream) { return (void)stream, memset(p, v, n), 0; }
int cudaLaunchKernel(const void *func, dim3_ grid, dim3_ block, void **args, size_t shared, void *stream)
{
    (void)func, (void)grid, (void)block, (void)args, (void)shared, (void)stream;
    return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
int cudaProfilerStart(void) { return 0; }
int cudaProfilerStop(void) { return 0; }
int cudaStreamSynchronize(void *stream) { return (void)stream, 0; }
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)c, (void)ldc;
    return 0;
}
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at, int lda,
                 const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc, int compute, int algo)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)at, (void)lda, (void)b;
    (void)bt, (void)ldb, (void)beta, (void)c, (void)ct, (void)ldc, (void)compute, (void)algo;
    return 0;
}
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
                              int lda, long long sa, const float *b, int ldb, long long sb, const float *beta,
                              float *c, int ldc, long long sc, int batch)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)sa, (void)b;
    (void)ldb, (void)sb, (void)beta, (void)c, (void)ldc, (void)sc, (void)batch;
    return 0;
}

/* ------------------------------------------------------------- cuDNN */
int cudnnGetTensorNdDescriptor(const fake_desc *d, int req, int *type, int *n, int *dims, int *strides)
{
    *type = d->type;
    *n = d->n;
    for (int i = 0; i < d->n && i < req; i++) {
        dims[i] = d->dims[i];
        strides[i] = 1;
    }
    return 0;
}

int cudnnGetFilterNdDescriptor(const fake_desc *d, int req, int *type, int *format, int *n, int *dims)
{
    *format = 0;
    int strides[8];
    return cudnnGetTensorNdDescriptor(d, req, type, n, dims, strides);
}

int cudnnGetConvolutionNdDescriptor(const fake_desc *d, int req, int *n, int *pad, int *stride, int *dilation,
                                    int *mode, int *compute)
{
    *n = d->n;
    for (int i = 0; i < d->n && i < req; i++) {
        pad[i] = d->pad[i];
        stride[i] = d->stride[i];
        dilation[i] = d->dilation[i];
    }
    *mode = 1;
    *compute = 0;
    return 0;
}

int cudnnGetConvolutionGroupCount(const fake_desc *d, int *groups) { return *groups = d->groups, 0; }

int cudnnConvolutionForward(void *h, const void *alpha, const void *xd, const void *x, const void *wd,
                            const void *w, const void *cd, int algo, void *ws, size_t wsn, const void *beta,
                            const void *yd, void *y)
{
    (void)h, (void)alpha, (void)xd, (void)x, (void)wd, (void)w, (void)cd, (void)algo, (void)ws, (void)wsn;
    (void)beta, (void)yd, (void)y;
    return 0;
}

int cudnnBatchNormalizationForwardInference(void *h, int mode, const void *alpha, const void *beta, const void *xd,
                                            const void *x, const void *yd, void *y, const void *bnd,
                                            const void *scale, const void *bias, const void *mean, const void *var,
                                            double eps)
{
    (void)h, (void)mode, (void)alpha, (void)beta, (void)xd, (void)x, (void)yd, (void)y, (void)bnd, (void)scale;
    (void)bias, (void)mean, (void)var, (void)eps;
    return 0;
}

/* ------------------------------------------- cuDNN's graph (backend) API */
/* Descriptors that hold nothing: the hook notes what is set as it goes by.
 * The heuristics' results are the caller's configs, handed back as they are. */
typedef struct {
    int type;
} fake_backend_desc;

int cudnnBackendCreateDescriptor(int type, void **d)
{
    fake_backend_desc *b = calloc(1, sizeof *b);
    if (!b)
        return 4; /* CUDNN_STATUS_ALLOC_FAILED */
    b->type = type;
    *d = b;
    return 0;
}

int cudnnBackendDestroyDescriptor(void *d)
{
    free(d);
    return 0;
}

int cudnnBackendSetAttribute(void *d, int name, int type, int64_t count, const void *elems)
{
    (void)name, (void)type;
    return d && count > 0 && elems ? 0 : 3; /* CUDNN_STATUS_BAD_PARAM */
}

int cudnnBackendGetAttribute(void *d, int name, int type, int64_t req, int64_t *count, void *elems)
{
    if (!d || !count)
        return 3;
    *count = name == 202 && type == 15 && elems ? (req < 2 ? req : 2) : 0; /* ENGINEHEUR_RESULTS */
    return 0;
}

int cudnnBackendFinalize(void *d) { return d ? 0 : 3; }

int cudnnBackendExecute(void *h, void *plan, void *pack)
{
    (void)h, (void)pack;
    return plan ? 0 : 3;
}

/* ------------------------------------------------------------ cublasLt */
int cublasLtMatrixLayoutGetAttribute(const fake_layout *l, int attr, void *buf, size_t size, size_t *written)
{
    switch (attr) {
    case 0: if (size < 4) return 7; *(unsigned *)buf = l->type; *written = 4; return 0;
    case 2: if (size < 8) return 7; *(unsigned long long *)buf = l->rows; *written = 8; return 0;
    case 3: if (size < 8) return 7; *(unsigned long long *)buf = l->cols; *written = 8; return 0;
    case 5: if (size < 4) return 7; *(int *)buf = l->batch; *written = 4; return 0;
    default: return 7;
    }
}

int cublasLtMatmulDescGetAttribute(const fake_matmul_desc *d, int attr, void *buf, size_t size, size_t *written)
{
    if (size < 4 || (attr != 3 && attr != 4))
        return 7;
    *(int *)buf = attr == 3 ? d->transa : d->transb;
    *written = 4;
    return 0;
}

int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *ad, const void *b, void *bd,
                   const void *beta, const void *c, void *cd, void *d, void *dd, const void *algo, void *ws, size_t wsn,
                   void *stream)
{
    (void)h, (void)desc, (void)alpha, (void)a, (void)ad, (void)b, (void)bd, (void)beta, (void)c, (void)cd, (void)d;
    (void)dd, (void)algo, (void)ws, (void)wsn, (void)stream;
    return 0;
}

/* --------------------------------------------------------------- events */
/* An event completes when the host clock passes the time it was recorded
 * plus the GPU work queued before it (fake_cuda_gpu_busy). The time between
 * two events is the work queued between them only, not the host's time in
 * between, so that tests read exact GPU times however loaded the machine. */
typedef struct fake_event {
    double at_ms;   /* host time of completion */
    double busy_ms; /* GPU work queued before it, since the start */
} fake_event;

static double g_queued_ms; /* GPU work queued and not yet counted */
static int g_events;

static double host_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void fake_cuda_gpu_busy(double ms) { g_queued_ms += ms; }
int fake_cuda_events_alive(void) { return g_events; }

int cudaEventCreate(void **event)
{
    fake_event *e = calloc(1, sizeof *e);
    if (!e)
        return 2;
    g_events++;
    *event = e;
    return 0;
}

int cudaEventRecord(void *event, void *stream)
{
    (void)stream;
    static double gpu_free_at; /* when the fake GPU finishes what it was given */
    double now = host_ms();
    if (gpu_free_at < now)
        gpu_free_at = now;
    static double busy; /* all GPU work queued so far */
    gpu_free_at += g_queued_ms;
    busy += g_queued_ms;
    g_queued_ms = 0;
    ((fake_event *)event)->at_ms = gpu_free_at;
    ((fake_event *)event)->busy_ms = busy;
    return 0;
}

int cudaEventQuery(void *event) { return host_ms() >= ((fake_event *)event)->at_ms ? 0 : 600; }

int cudaEventSynchronize(void *event)
{
    while (cudaEventQuery(event) != 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

int cudaEventElapsedTime(float *ms, void *start, void *stop)
{
    if (cudaEventQuery(stop) != 0)
        return 600;
    *ms = (float)(((fake_event *)stop)->busy_ms - ((fake_event *)start)->busy_ms);
    return 0;
}

int cudaEventDestroy(void *event)
{
    g_events--;
    free(event);
    return 0;
}

/* --------------------------------------------- cuDNN's workspace query */
/* A size the test can predict: 1 KiB per image of x per algorithm number
 * plus one (the op profiler's cudnn_workspace). */
int cudnnGetConvolutionForwardWorkspaceSize(void *h, const fake_desc *xd, const fake_desc *wd, const fake_desc *cd,
                                            const fake_desc *yd, int algo, size_t *size)
{
    (void)h, (void)wd, (void)cd, (void)yd;
    if (algo < 0)
        return 3; /* CUDNN_STATUS_BAD_PARAM */
    *size = (size_t)xd->dims[0] * 1024 * (size_t)(algo + 1);
    return 0;
}
