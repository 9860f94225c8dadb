/*
 * select.c - the hooks key: which interposers of mlprof run are on. Part of
 * every build of the library, so that the key is the same everywhere; only
 * libmlprof_preload.so has the interposers themselves.
 */
#include <stdio.h>
#include <string.h>

#include "../record/produce.h"
#include "hook.h"

static const struct {
    const char *name;
    unsigned bit;
} k_hooks[] = {
    {"malloc", MLPROF__HOOK_MALLOC},
    {"blas", MLPROF__HOOK_BLAS},
    {"dnnl", MLPROF__HOOK_DNNL},
    {"cuda", MLPROF__HOOK_CUDA},
    {"cublas", MLPROF__HOOK_CUBLAS},
    {"cudnn", MLPROF__HOOK_CUDNN},
    {"itt", MLPROF__HOOK_ITT},
    {"nvtx", MLPROF__HOOK_NVTX},
    {"mpi", MLPROF__HOOK_MPI},
    {"nccl", MLPROF__HOOK_NCCL},
};

const char *const mlprof__cuda_names[MLPROF__CUDA_NAMES] = {
    "cudaMalloc", "cudaMallocAsync", "cudaFree", "cudaFreeAsync", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemset",
    "cudaMemsetAsync", "cudaLaunchKernel", "cudaDeviceSynchronize", "cudaStreamSynchronize",
    "cudaEventSynchronize", "cudaGetDevice", "cublasSgemm_v2", "cublasDgemm_v2", "cublasGemmEx",
    "cublasSgemmStridedBatched", "cublasDgemmStridedBatched", "cublasGemmStridedBatchedEx", "cublasLtMatmul",
    "cublasLtMatrixLayoutGetAttribute", "cublasLtMatmulDescGetAttribute"};

int mlprof__cuda_functions_parse(const char *spec, unsigned *mask, char *err, size_t len)
{
    *mask = 0;
    const char *p = spec;
    for (size_t k; (k = mlprof__list_item(&p)) != 0; p += k) {
        int found = k == 3 && memcmp(p, "all", 3) == 0;
        if (found)
            *mask = (1u << MLPROF__CUDA_RUNTIME) - 1;
        for (int i = 0; i < MLPROF__CUDA_RUNTIME - 1 && !found; i++) { /* cudaGetDevice is ours */
            if (strlen(mlprof__cuda_names[i]) == k && memcmp(mlprof__cuda_names[i], p, k) == 0) {
                *mask |= 1u << i;
                found = 1;
            }
        }
        if (!found) {
            snprintf(err, len, "unknown CUDA runtime function \"%.*s\" (all, or of cudaMalloc, cudaMallocAsync, "
                               "cudaFree, cudaFreeAsync, cudaMemcpy, cudaMemcpyAsync, cudaMemset, cudaMemsetAsync, "
                               "cudaLaunchKernel, cudaDeviceSynchronize, cudaStreamSynchronize, "
                               "cudaEventSynchronize)", (int)k, p);
            return -1;
        }
    }
    return 0;
}

int mlprof__hooks_parse(const char *spec, unsigned *mask, char *err, size_t len)
{
    *mask = 0;
    const char *p = spec;
    for (size_t k; (k = mlprof__list_item(&p)) != 0; p += k) {
        unsigned bit = 0;
        if (k == 3 && memcmp(p, "all", 3) == 0)
            bit = MLPROF__HOOKS_ALL;
        else if (k == 4 && memcmp(p, "none", 4) == 0)
            bit = 0;
        else {
            for (size_t i = 0; i < sizeof k_hooks / sizeof k_hooks[0]; i++) {
                if (strlen(k_hooks[i].name) == k && memcmp(k_hooks[i].name, p, k) == 0)
                    bit = k_hooks[i].bit;
            }
            if (!bit) {
                snprintf(err, len, "unknown hook \"%.*s\" (one of malloc, blas, dnnl, cuda, cublas, cudnn, itt, nvtx, mpi, nccl; or all, none)", (int)k, p);
                return -1;
            }
        }
        *mask |= bit;
    }
    return 0;
}

/* ------------------------------------------------- the lifecycle entry */

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    if (strcmp(key, "hooks") == 0)
        return mlprof__hooks_parse(value, mask, why, len) == 0 ? 0 : -1;
    if (strcmp(key, "cuda_functions") == 0)
        return mlprof__cuda_functions_parse(value, mask, why, len) == 0 ? 0 : -1;
    return 1;
}

/* otherData.nccl, from the NCCL profiler plugin, and otherData.cudnn, from
 * the cuDNN graph API's hook, which only the preload library has
 * (nccl_plugin.c, cudnn_graph.c); weak, so libmlprof links without them. */
__attribute__((weak)) void mlprof__nccl_other_data(mlprof__sb *out);
__attribute__((weak)) void mlprof__cudnn_other_data(mlprof__sb *out);
static void other_data(mlprof__sb *out)
{
    if (mlprof__nccl_other_data)
        mlprof__nccl_other_data(out);
    if (mlprof__cudnn_other_data)
        mlprof__cudnn_other_data(out);
}

/* The interposers start with the process (libmlprof_preload.so); of the
 * table they need only their keys checked. */
const mlprof__module mlprof__hook_module = {
    .name = "hooks",
    .parse_key = parse_key,
    .other_data = other_data,
};
