/*
 * run_cuda.c - a CUDA-style program for mlprof run's interposers, linked
 * against fake_cuda.c on machines without a GPU: three device buffers, a
 * copy, a set, a kernel launch, waits, three cuBLAS GEMMs, a cuBLASLt
 * matmul, a cuDNN convolution and batch norm, and through cuDNN's graph API
 * (as PyTorch 2 does) the same convolution forward, fused with a ReLU, and
 * its filter's gradient, and a plan the hook cannot follow; one buffer is
 * never freed.
 */
#include <stdio.h>
#include <string.h>

#include "fake_cuda.h"

/* what nvcc's host stub of a kernel would be: a function whose symbol names it */
void vector_add_kernel(void);
void vector_add_kernel(void) {}

/* cuDNN 9's backend attribute and type numbers (cudnn_graph.h) */
enum { T_DATA_TYPE = 1, T_INT64 = 3, T_DESCRIPTOR = 15 };
enum { DESC_POINTWISE = 0, DESC_CONV = 1, DESC_ENGINE = 2, DESC_CFG = 3, DESC_HEUR = 4, DESC_PLAN = 5,
       DESC_OP_FWD = 10, DESC_OP_BWD_FILTER = 11, DESC_OP_POINTWISE = 13, DESC_GRAPH = 15, DESC_TENSOR = 17 };

static void *backend_desc(int type)
{
    void *d = NULL;
    cudnnBackendCreateDescriptor(type, &d);
    return d;
}

static void *backend_tensor(int64_t id, const int64_t dims[4])
{
    void *t = backend_desc(DESC_TENSOR);
    int32_t half = 2;
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}, align = 16;
    cudnnBackendSetAttribute(t, 901, T_DATA_TYPE, 1, &half);
    cudnnBackendSetAttribute(t, 902, T_INT64, 4, dims);
    cudnnBackendSetAttribute(t, 903, T_INT64, 4, strides);
    cudnnBackendSetAttribute(t, 906, T_INT64, 1, &id);
    cudnnBackendSetAttribute(t, 900, T_INT64, 1, &align);
    cudnnBackendFinalize(t);
    return t;
}

/* the convolution below, through the graph API as PyTorch 2.11 uses it (the
 * tensors, graphs and heuristics destroyed before the plans are made):
 * forward with a ReLU (its plan from the heuristics' config), the filter's
 * gradient (its plan from a config made of an engine), and a plan whose
 * config says nothing */
static void graph_api(void)
{
    static const int64_t xd[4] = {8, 64, 56, 56}, wd[4] = {128, 32, 3, 3}, yd[4] = {8, 128, 28, 28};
    void *x = backend_tensor(1, xd), *w = backend_tensor(2, wd), *y = backend_tensor(3, yd), *r = backend_tensor(4, yd);
    void *conv = backend_desc(DESC_CONV);
    int64_t two = 2, pad[2] = {1, 1}, stride[2] = {2, 2}, dil[2] = {1, 1};
    cudnnBackendSetAttribute(conv, 106, T_INT64, 1, &two);
    cudnnBackendSetAttribute(conv, 105, T_INT64, 2, pad);
    cudnnBackendSetAttribute(conv, 104, T_INT64, 2, pad);
    cudnnBackendSetAttribute(conv, 103, T_INT64, 2, stride);
    cudnnBackendSetAttribute(conv, 102, T_INT64, 2, dil);
    cudnnBackendFinalize(conv);
    void *fwd = backend_desc(DESC_OP_FWD), *relu = backend_desc(DESC_OP_POINTWISE), *pw = backend_desc(DESC_POINTWISE);
    cudnnBackendSetAttribute(fwd, 704, T_DESCRIPTOR, 1, &x);
    cudnnBackendSetAttribute(fwd, 703, T_DESCRIPTOR, 1, &w);
    cudnnBackendSetAttribute(fwd, 705, T_DESCRIPTOR, 1, &y);
    cudnnBackendSetAttribute(fwd, 702, T_DESCRIPTOR, 1, &conv);
    cudnnBackendFinalize(fwd);
    cudnnBackendFinalize(pw);
    cudnnBackendSetAttribute(relu, 750, T_DESCRIPTOR, 1, &pw);
    cudnnBackendSetAttribute(relu, 751, T_DESCRIPTOR, 1, &y);
    cudnnBackendSetAttribute(relu, 753, T_DESCRIPTOR, 1, &r);
    cudnnBackendFinalize(relu);
    void *bwd = backend_desc(DESC_OP_BWD_FILTER);
    cudnnBackendSetAttribute(bwd, 716, T_DESCRIPTOR, 1, &x);
    cudnnBackendSetAttribute(bwd, 715, T_DESCRIPTOR, 1, &w);
    cudnnBackendSetAttribute(bwd, 717, T_DESCRIPTOR, 1, &y);
    cudnnBackendSetAttribute(bwd, 714, T_DESCRIPTOR, 1, &conv);
    cudnnBackendFinalize(bwd);
    void *made[] = {x, w, y, r, conv, pw};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        cudnnBackendDestroyDescriptor(made[i]);

    void *graph = backend_desc(DESC_GRAPH), *ops[2] = {relu, fwd}; /* the convolution found wherever it is */
    cudnnBackendSetAttribute(graph, 801, T_DESCRIPTOR, 2, ops);
    cudnnBackendFinalize(graph);
    void *heur = backend_desc(DESC_HEUR), *cfgs[3] = {backend_desc(DESC_CFG), backend_desc(DESC_CFG), NULL};
    cudnnBackendSetAttribute(heur, 201, T_DESCRIPTOR, 1, &graph);
    cudnnBackendFinalize(heur);
    int64_t got = 0;
    cudnnBackendGetAttribute(heur, 202, T_DESCRIPTOR, 2, &got, cfgs);
    void *graph2 = backend_desc(DESC_GRAPH), *engine = backend_desc(DESC_ENGINE);
    cudnnBackendSetAttribute(graph2, 801, T_DESCRIPTOR, 1, &bwd);
    cudnnBackendFinalize(graph2);
    cudnnBackendSetAttribute(engine, 1300, T_DESCRIPTOR, 1, &graph2);
    cudnnBackendFinalize(engine);
    void *cfg2 = backend_desc(DESC_CFG);
    cudnnBackendSetAttribute(cfg2, 300, T_DESCRIPTOR, 1, &engine);
    cudnnBackendFinalize(cfg2);
    void *gone[] = {fwd, relu, bwd, graph, heur, graph2, engine};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        cudnnBackendDestroyDescriptor(gone[i]);

    void *plan = backend_desc(DESC_PLAN), *plan2 = backend_desc(DESC_PLAN);
    cudnnBackendSetAttribute(plan, 401, T_DESCRIPTOR, 1, &cfgs[1]);
    cudnnBackendFinalize(plan);
    cudnnBackendSetAttribute(plan2, 401, T_DESCRIPTOR, 1, &cfg2);
    cudnnBackendFinalize(plan2);
    void *cfg3 = backend_desc(DESC_CFG), *plan3 = backend_desc(DESC_PLAN);
    cudnnBackendSetAttribute(plan3, 401, T_DESCRIPTOR, 1, &cfg3);
    cudnnBackendFinalize(plan3);

    for (int i = 0; i < 2; i++)
        cudnnBackendExecute(NULL, plan, NULL);
    cudnnBackendExecute(NULL, plan2, NULL);
    cudnnBackendExecute(NULL, plan3, NULL);
    void *all[] = {plan, plan2, plan3, cfgs[0], cfgs[1], cfg2, cfg3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        cudnnBackendDestroyDescriptor(all[i]);
}

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
    graph_api();
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
