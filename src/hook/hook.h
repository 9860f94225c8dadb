/*
 * hook.h - the interposers of libmlprof_preload.so (mlprof run): which are on
 * (the hooks key), how they find the functions they stand in front of, and
 * the guard that keeps mlprof's own work out of what they record.
 */
#ifndef MLPROF_HOOK_H
#define MLPROF_HOOK_H

#include <stddef.h>

#include "../record/record.h"

/* The hooks key: one bit each. */
enum {
    MLPROF__HOOK_MALLOC = 1u << 0,
    MLPROF__HOOK_BLAS = 1u << 1,
    MLPROF__HOOK_DNNL = 1u << 2,
    MLPROF__HOOK_CUDA = 1u << 3,
    MLPROF__HOOK_CUBLAS = 1u << 4,
    MLPROF__HOOK_CUDNN = 1u << 5,
    MLPROF__HOOK_ITT = 1u << 6,
    MLPROF__HOOK_NVTX = 1u << 7,
    MLPROF__HOOK_MPI = 1u << 8, /* mpi.c: also in libmlprof itself */
    MLPROF__HOOK_NCCL = 1u << 9, /* nccl.c and the profiler plugin, nccl_plugin.c */
};
#define MLPROF__HOOKS_ALL                                                                                \
    (MLPROF__HOOK_MALLOC | MLPROF__HOOK_BLAS | MLPROF__HOOK_DNNL | MLPROF__HOOK_CUDA | MLPROF__HOOK_CUBLAS | \
     MLPROF__HOOK_CUDNN | MLPROF__HOOK_ITT | MLPROF__HOOK_NVTX | MLPROF__HOOK_MPI | MLPROF__HOOK_NCCL)

/* The functions of cuda.c, in its order: first the CUDA runtime's (those the
 * cuda_functions key chooses among, cudaGetDevice excepted), then cuBLAS's. */
#define MLPROF__CUDA_NAMES 22
#define MLPROF__CUDA_RUNTIME 13
extern const char *const mlprof__cuda_names[MLPROF__CUDA_NAMES];
/* Parses the cuda_functions key: "all", or runtime function names. */
int mlprof__cuda_functions_parse(const char *spec, unsigned *mask, char *err, size_t len);

/* Parses "malloc,blas" (or "all", "none", ""); -1 with err naming a bad item. */
int mlprof__hooks_parse(const char *spec, unsigned *mask, char *err, size_t len);

/* The hooks that are on now (the hooks key as parsed when it was set). */
static inline int mlprof__hook_on(unsigned which)
{
    return (__atomic_load_n(&mlprof__g.cfg.hooks_mask, __ATOMIC_RELAXED) & which) != 0;
}

/* Set while a thread is inside a hook or inside mlprof: what it does then
 * (an allocation by the recorder, a BLAS call made by a BLAS call) is not
 * recorded again. Initial-exec TLS: reading it never allocates. */
extern __thread int mlprof__hook_busy __attribute__((tls_model("initial-exec")));

/* The next definition of a function after ours: dlsym(RTLD_NEXT), or, for a
 * library opened with RTLD_LOCAL (Python extension modules and what they
 * load), a search of every loaded object. NULL when there is none. */
void *mlprof__hook_real(const char *name);
/* The same, found once and kept in *slot. A function the program called must
 * exist (required: said, then abort); a helper that is missing gives NULL. */
void *mlprof__hook_real_cached(void **slot, const char *name, int required);

/* Per-file set-up, run by the preload library's constructor. */
void mlprof__hook_malloc_init(void);
/* Set by mlprof__hook_malloc_init: this copy of the library stands in front of
 * malloc, so the memory profiler sees every allocation while the malloc hook
 * is on (the op profiler says so about its workspace). */
extern int mlprof__malloc_interposed;
void mlprof__hook_blas_init(void);
void mlprof__hook_dnnl_init(void);
void mlprof__hook_cuda_init(void);
void mlprof__hook_cudnn_init(void);
void mlprof__hook_exec_init(void);
/* cudnn.c and cudnn_graph.c: a cudnnDataType_t's name; the arguments of an
 * execution plan's span (nothing for a plan not followed). */
const char *mlprof__cudnn_type_name(int t);
void mlprof__cudnn_arg_dims(const char *key, const int *dims, int n); /* "[a,b,...]" */
void mlprof__cudnn_plan_args(const void *plan);
void mlprof__cudnn_other_data(mlprof__sb *out);

#endif /* MLPROF_HOOK_H */
