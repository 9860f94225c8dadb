/*
 * op_profile.c - the op profiler from C: a naive single-precision matrix
 * product that packs B into a transposed scratch buffer (its workspace),
 * profiled warm and with a cold cache, then asked again by the same key (a
 * cache hit: nothing runs). The workspace is measured while the memory
 * profiler records (profile_memory): the scratch is reported through
 * mlprof_mem_alloc. (Under `mlprof run` with the malloc hook the plain malloc
 * alone would do: see tests/test_op_profile.c.)
 *
 *   ./op_profile [N]          (N = 128 by default)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlprof/mlprof.h"

typedef struct gemm {
    int n;
    const float *a, *b;
    float *c;
} gemm;

static int matmul(void *user)
{
    gemm *g = user;
    int n = g->n;
    if (n < 1)
        return 1;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *bt = malloc(bytes); /* B transposed: the call's workspace */
    if (!bt)
        return 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            bt[(size_t)j * n + i] = g->b[(size_t)i * n + j];
    /* recorded once written (GCC takes a const pointer to memory not yet
     * written as a read); nothing else allocates in between */
    mlprof_mem_alloc(MLPROF_DEVICE_CPU, bt, bytes, "B^T");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int k = 0; k < n; k++)
                s += g->a[(size_t)i * n + k] * bt[(size_t)j * n + k];
            g->c[(size_t)i * n + j] = s;
        }
    mlprof_mem_free(MLPROF_DEVICE_CPU, bt);
    free(bt);
    return 0;
}

static void show(const char *what, const mlprof_op_result *r)
{
    printf("%-22s median %9.2f us  [%.2f, %.2f] at %.3f  min %9.2f  IQR %7.2f  %4u x %llu calls  %s%s",
           what, r->median_us, r->ci_low_us, r->ci_high_us, r->ci_level, r->min_us, r->iqr_us, r->repeats,
           (unsigned long long)r->inner, r->stable ? "stable" : "unstable", r->cached ? ", cached" : "");
    if (r->workspace >= 0)
        printf("  workspace %lld bytes%s\n", (long long)r->workspace,
               r->workspace_from & MLPROF_OP_WS_MALLOC ? " (malloc hook)" : "");
    else
        printf("  workspace not measured\n");
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 128;
    if (n < 1 || n > 4096) {
        fprintf(stderr, "op_profile: N must be 1 to 4096, not %s\n", argv[1]);
        return 2;
    }
    size_t count = (size_t)n * n;
    float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b), *c = malloc(count * sizeof *c);
    if (!a || !b || !c)
        return 1;
    for (size_t i = 0; i < count; i++) {
        a[i] = (float)(i % 7) * 0.5f;
        b[i] = (float)(i % 5) * 0.25f;
    }
    gemm g = {n, a, b, c};
    mlprof_op_call call = {.fn = matmul, .user = &g};
    mlprof_set_config("profile_memory", "true"); /* the workspace needs the memory profiler */
    mlprof_set_config("filename", "op_profile_trace.json");
    mlprof_set_state(MLPROF_STATE_RUN);

    char key[96];
    snprintf(key, sizeof key, "naive_sgemm;%dx%d;float32;cpu", n, n);
    mlprof_op_options o;
    mlprof_op_options_init(&o);
    mlprof_op_result r;
    int rc = mlprof_op_profile(key, &call, &o, &r);
    if (rc != MLPROF_OK) {
        fprintf(stderr, "op_profile: %s\n", mlprof_last_error());
        return 1;
    }
    show("warm", &r);
    double warm_us = r.median_us;
    rc = mlprof_op_profile(key, &call, &o, &r);
    show("again (same key)", &r);
    o.cold_cache = 1;
    strncat(key, ";cold", sizeof key - strlen(key) - 1);
    rc = rc ? rc : mlprof_op_profile(key, &call, &o, &r);
    if (rc == MLPROF_OK)
        show("cold cache", &r);
    printf("cache: %zu results; %.1f GFLOP/s warm\n", mlprof_op_cache_size(),
           2.0 * n * n * (double)n / (warm_us * 1e3));
    mlprof_op_cache_reset();
    mlprof_set_state(MLPROF_STATE_STOP);
    free(a);
    free(b);
    free(c);
    return rc == MLPROF_OK ? 0 : 1;
}
