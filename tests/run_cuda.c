/*
 * run_cuda.c - a CUDA-style program for mlprof run's interposers, linked
 * against fake_cuda.c on machines without a GPU: three device buffers, a
 * copy, a set, a kernel launch, waits, three cuBLAS GEMMs, a cuBLASLt
 * matmul, a cuDNN convolution and batch norm; one buffer is never freed.
 */
#include <stdio.h>
#include <string.h>

#include "fake_cuda.h"

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
