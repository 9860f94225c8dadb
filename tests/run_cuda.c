/*
 * run_cuda.c - a CUDA-style program for mlprof run's interposers, linked
 * against fake_cuda.c on machines without a GPU: three device buffers, a
 * copy, a set, a kernel launch, waits, and three cuBLAS GEMMs; one buffer is
 * never freed.
 */
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned x, y, z;
} dim3_;

int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
int cudaMemsetAsync(void *p, int v, size_t n, void *stream);
int cudaLaunchKernel(const void *func, dim3_ grid, dim3_ block, void **args, size_t shared, void *stream);
int cudaDeviceSynchronize(void);
int cudaStreamSynchronize(void *stream);
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at, int lda,
                 const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc, int compute, int algo);
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
                              int lda, long long sa, const float *b, int ldb, long long sb, const float *beta,
                              float *c, int ldc, long long sc, int batch);

typedef struct fake_desc { /* as fake_cuda.c reads it */
    int type, n;
    int dims[8];
    int pad[8], stride[8], dilation[8], groups;
} fake_desc;
int cudnnConvolutionForward(void *h, const void *alpha, const void *xd, const void *x, const void *wd,
                            const void *w, const void *cd, int algo, void *ws, size_t wsn, const void *beta,
                            const void *yd, void *y);
int cudnnBatchNormalizationForwardInference(void *h, int mode, const void *alpha, const void *beta, const void *xd,
                                            const void *x, const void *yd, void *y, const void *bnd,
                                            const void *scale, const void *bias, const void *mean, const void *var,
                                            double eps);

typedef struct fake_layout {
    unsigned type;
    unsigned long long rows, cols;
    int batch;
} fake_layout;
typedef struct fake_matmul_desc {
    int transa, transb;
} fake_matmul_desc;
int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *ad, const void *b, void *bd,
                   const void *beta, const void *c, void *cd, void *d, void *dd, const void *algo, void *ws, size_t wsn,
                   void *stream);

/* what nvcc's host stub of a kernel would be: a function whose symbol names it */
void vector_add_kernel(void);
void vector_add_kernel(void) {}

int main(void)
{
    void *a, *b, *c;
    if (cudaMalloc(&a, 1 << 20) || cudaMalloc(&b, 3 << 20) || cudaMalloc(&c, 4096))
        return 1;
    static char host[4096];
    memset(host, 7, sizeof host);
    cudaMemcpy(a, host, sizeof host, 1);  /* host to device */
    cudaMemsetAsync(b, 0, 3 << 20, NULL);
    dim3_ grid = {256, 2, 1}, block = {128, 1, 1};
    void *args[] = {&a, &b};
    cudaLaunchKernel((const void *)vector_add_kernel, grid, block, args, 1024, NULL);
    cudaStreamSynchronize(NULL);
    float one = 1, zero = 0;
    cublasSgemm_v2(NULL, 0, 1, 128, 64, 32, &one, a, 128, b, 64, &zero, c, 128);
    cublasGemmEx(NULL, 1, 0, 256, 256, 512, &one, a, 2, 512, b, 2, 512, &zero, c, 0, 256, 68, -1);
    cublasSgemmStridedBatched(NULL, 0, 0, 16, 16, 16, &one, a, 16, 256, b, 16, 256, &zero, c, 16, 256, 8);
    /* a 3x3 convolution 64 -> 128 channels, stride 2, 2 groups, over 8 images of 56x56 (float16) */
    fake_desc x = {2, 4, {8, 64, 56, 56}, {0}, {0}, {0}, 0}, w = {2, 4, {128, 32, 3, 3}, {0}, {0}, {0}, 0};
    fake_desc y = {2, 4, {8, 128, 28, 28}, {0}, {0}, {0}, 0};
    fake_desc conv = {0, 2, {0}, {1, 1}, {2, 2}, {1, 1}, 2};
    cudnnConvolutionForward(NULL, &one, &x, a, &w, b, &conv, 1, NULL, 0, &zero, &y, c);
    cudnnBatchNormalizationForwardInference(NULL, 1, &one, &zero, &y, c, &y, c, NULL, NULL, NULL, NULL, NULL, 1e-5);
    /* D[64x32] = op(A) B with A stored 128x64 and transposed (K = 128), bfloat16 in, float32 out, 4 of them */
    fake_layout la = {14, 128, 64, 4}, lb = {14, 128, 32, 4}, ld = {0, 64, 32, 4};
    fake_matmul_desc md = {1, 0};
    cublasLtMatmul(NULL, &md, &one, a, &la, b, &lb, &zero, c, &ld, c, &ld, NULL, NULL, 0, NULL);
    cudaDeviceSynchronize();
    cudaMemcpy(host, a, sizeof host, 2);  /* device to host */
    cudaFree(a);
    cudaFree(b); /* c is never freed */
    printf("done %d\n", host[0]);
    return 0;
}
