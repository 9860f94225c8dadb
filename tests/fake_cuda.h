/*
 * fake_cuda.h - the CUDA runtime, cuBLAS, cuBLASLt and cuDNN functions that
 * fake_cuda.c stands in for and run_cuda.c calls, declared as the real
 * libraries declare them (handles as void pointers), and the fake
 * descriptors the test program fills in and the fake getters read back.
 */
#ifndef MLPROF_FAKE_CUDA_H
#define MLPROF_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned x, y, z;
} dim3_;

/* a tensor, filter or convolution descriptor of the fake cuDNN */
typedef struct fake_desc {
    int type, n;
    int dims[8];
    int pad[8], stride[8], dilation[8], groups; /* a convolution's */
} fake_desc;

/* a cuBLASLt matrix layout and matmul descriptor of the fake */
typedef struct fake_layout {
    unsigned type;
    unsigned long long rows, cols;
    int batch;
} fake_layout;
typedef struct fake_matmul_desc {
    int transa, transb;
} fake_matmul_desc;

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
int cudaProfilerStart(void);
int cudaProfilerStop(void);
int cudaStreamSynchronize(void *stream);
int cudaEventSynchronize(void *event);
int cudaEventCreate(void **event);
int cudaEventRecord(void *event, void *stream);
int cudaEventQuery(void *event);
int cudaEventSynchronize(void *event);
int cudaEventElapsedTime(float *ms, void *start, void *stop);
int cudaEventDestroy(void *event);
/* the fake's own: work "on the GPU" takes ms more before the next event completes */
void fake_cuda_gpu_busy(double ms);
int fake_cuda_events_alive(void);
int cudnnGetConvolutionForwardWorkspaceSize(void *h, const fake_desc *xd, const fake_desc *wd, const fake_desc *cd,
                                            const fake_desc *yd, int algo, size_t *size);
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc);
int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a, int at, int lda,
                 const void *b, int bt, int ldb, const void *beta, void *c, int ct, int ldc, int compute, int algo);
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
                              int lda, long long sa, const float *b, int ldb, long long sb, const float *beta,
                              float *c, int ldc, long long sc, int batch);
int cublasLtMatrixLayoutGetAttribute(const fake_layout *l, int attr, void *buf, size_t size, size_t *written);
int cublasLtMatmulDescGetAttribute(const fake_matmul_desc *d, int attr, void *buf, size_t size, size_t *written);
int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *a, void *ad, const void *b, void *bd,
                   const void *beta, const void *c, void *cd, void *d, void *dd, const void *algo, void *ws, size_t wsn,
                   void *stream);
int cudnnGetTensorNdDescriptor(const fake_desc *d, int req, int *type, int *n, int *dims, int *strides);
int cudnnGetFilterNdDescriptor(const fake_desc *d, int req, int *type, int *format, int *n, int *dims);
int cudnnGetConvolutionNdDescriptor(const fake_desc *d, int req, int *n, int *pad, int *stride, int *dilation,
                                    int *mode, int *compute);
int cudnnGetConvolutionGroupCount(const fake_desc *d, int *groups);
int cudnnConvolutionForward(void *h, const void *alpha, const void *xd, const void *x, const void *wd,
                            const void *w, const void *cd, int algo, void *ws, size_t wsn, const void *beta,
                            const void *yd, void *y);
int cudnnBatchNormalizationForwardInference(void *h, int mode, const void *alpha, const void *beta, const void *xd,
                                            const void *x, const void *yd, void *y, const void *bnd,
                                            const void *scale, const void *bias, const void *mean, const void *var,
                                            double eps);
int cudnnBackendCreateDescriptor(int type, void **d);
int cudnnBackendDestroyDescriptor(void *d);
int cudnnBackendSetAttribute(void *d, int name, int type, int64_t count, const void *elems);
int cudnnBackendGetAttribute(void *d, int name, int type, int64_t req, int64_t *count, void *elems);
int cudnnBackendFinalize(void *d);
int cudnnBackendExecute(void *h, void *plan, void *pack);

#endif
