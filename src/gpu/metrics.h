/*
 * metrics.h - the per-kernel metrics' names and what their values give
 * (metrics.c): pure functions, shared by the recorder (counters.c) and the
 * analyzer (src/analyze/gpu.c), so that a trace's raw metrics give the same
 * FLOPs and bytes in both.
 */
#ifndef MLPROF_GPU_METRICS_H
#define MLPROF_GPU_METRICS_H

#include <stddef.h>

#define MLPROF__GPU_MAX_METRICS 48
#define MLPROF__GPU_METRIC_LEN 128

/* The metrics the range profiler collects, aliases expanded. */
typedef struct mlprof__gpu_metric_set {
    char names[MLPROF__GPU_MAX_METRICS][MLPROF__GPU_METRIC_LEN];
    size_t n;
    int overflow; /* more than MLPROF__GPU_MAX_METRICS after expansion */
} mlprof__gpu_metric_set;

/* Whether every item of gpu_metrics is an alias or looks like a CUPTI
 * metric name (which CUPTI itself judges only when a GPU is there); -1 with
 * why naming the bad item. */
int mlprof__gpu_metrics_check(const char *value, char *why, size_t len);
/* gpu_metrics' items and gpu_details' measured details into *set, aliases
 * expanded, each metric once; gpu__time_duration.sum is added to any
 * non-empty set. */
void mlprof__gpu_metrics_expand(const char *value, unsigned details, mlprof__gpu_metric_set *set);

/* What one kernel's metric values give; NAN where they do not. */
typedef struct mlprof__gpu_derived {
    double flops;        /* FMA counted twice */
    double dram_bytes;   /* read + written */
    double gpu_ns;       /* gpu__time_duration.sum */
    double flops_per_s, dram_bytes_per_s, arithmetic_intensity;
    double achieved_occupancy, branch_efficiency; /* 0..1 */
} mlprof__gpu_derived;
/* values[i] belongs to set->names[i] (NAN: not measured); fallback_ns is the
 * kernel's time when gpu__time_duration.sum is missing. */
void mlprof__gpu_metrics_derive(const mlprof__gpu_metric_set *set, const double *values, double fallback_ns,
                                mlprof__gpu_derived *out);

#endif /* MLPROF_GPU_METRICS_H */
