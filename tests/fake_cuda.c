/*
 * fake_cuda.c - a stand-in for libcudart and libcublas with the functions
 * that mlprof run's CUDA interposers stand in front of, for testing without
 * a GPU: device memory is host memory, copies are memcpy, a launch calls
 * nothing, a GEMM does nothing, and the current device is 1.
 */
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned x, y, z;
} dim3_;

int cudaGetDevice(int *dev);
int cudaMalloc(void **p, size_t n);
int cudaMallocAsync(void **p, size_t n, void *stream);
int cudaFree(void *p);
int cudaFreeAsync(void *p, void *stream);
int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream);
int cudaMemset(void *p, int v, size_t n);
int cudaMemsetAsync(void *p, int v, size_t n, void *stream);
int cudaLaunchKernel(const void *func, dim3_ grid, dim3_ block, void **args, size_t shared, void *stream);
int cudaDeviceSynchronize(void);
int cudaStreamSynchronize(void *stream);
int cudaEventSynchronize(void *event);
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at, int lda,
                 const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc, int compute, int algo);
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
                              int lda, long long sa, const float *b, int ldb, long long sb, const float *beta,
                              float *c, int ldc, long long sc, int batch);

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
int cudaStreamSynchronize(void *stream) { return (void)stream, 0; }
int cudaEventSynchronize(void *event) { return (void)event, 0; }
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
