/*
 * metrics.c - the per-kernel metrics that gpu_metrics and gpu_details ask
 * for: the names users may write (CUPTI's own, such as dram__bytes_read.sum,
 * or mlprof's short ones, such as flops), their expansion into the list the
 * range profiler collects, and what is derived from the values of one kernel
 * (FLOPs, DRAM bytes, achieved FLOP/s and bandwidth, arithmetic intensity,
 * achieved occupancy, branch efficiency). Pure functions: test_gpu_units
 * checks them without CUPTI.
 *
 * The metric names are Nsight Compute's, as NVIDIA's table from nvprof's
 * metrics gives them: flop_count_sp is fadd + fmul + 2 * ffma of
 * smsp__sass_thread_inst_executed_op_*_pred_on.sum (an FMA is two FLOPs),
 * achieved_occupancy is sm__warps_active.avg.pct_of_peak_sustained_active,
 * branch_efficiency is smsp__sass_average_branch_targets_threads_uniform.pct.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../common/common.h"
#include "gpu.h"
#include "metrics.h"

#define SASS_OP "smsp__sass_thread_inst_executed_op_"
#define M_DURATION "gpu__time_duration.sum"
#define M_DRAM_READ "dram__bytes_read.sum"
#define M_DRAM_WRITE "dram__bytes_write.sum"
#define M_DRAM "dram__bytes.sum"
#define M_WARPS_ACTIVE "sm__warps_active.avg.pct_of_peak_sustained_active"
#define M_BRANCH "smsp__sass_average_branch_targets_threads_uniform.pct"

static const struct {
    const char *alias;
    const char *metrics[10];
} k_aliases[] = {
    {"flops", {SASS_OP "dadd_pred_on.sum", SASS_OP "dmul_pred_on.sum", SASS_OP "dfma_pred_on.sum",
               SASS_OP "fadd_pred_on.sum", SASS_OP "fmul_pred_on.sum", SASS_OP "ffma_pred_on.sum",
               SASS_OP "hadd_pred_on.sum", SASS_OP "hmul_pred_on.sum", SASS_OP "hfma_pred_on.sum"}},
    {"flops_dp", {SASS_OP "dadd_pred_on.sum", SASS_OP "dmul_pred_on.sum", SASS_OP "dfma_pred_on.sum"}},
    {"flops_sp", {SASS_OP "fadd_pred_on.sum", SASS_OP "fmul_pred_on.sum", SASS_OP "ffma_pred_on.sum"}},
    {"flops_hp", {SASS_OP "hadd_pred_on.sum", SASS_OP "hmul_pred_on.sum", SASS_OP "hfma_pred_on.sum"}},
    {"dram", {M_DRAM_READ, M_DRAM_WRITE}},
    {"tensor", {"sm__inst_executed_pipe_tensor.sum"}},
    {"duration", {M_DURATION}},
    {"achieved_occupancy", {M_WARPS_ACTIVE}},
    {"branch_efficiency", {M_BRANCH}},
};
#define NALIASES (sizeof k_aliases / sizeof k_aliases[0])

static int alias_of(const char *item, size_t n)
{
    for (size_t i = 0; i < NALIASES; i++) {
        if (strlen(k_aliases[i].alias) == n && strncmp(k_aliases[i].alias, item, n) == 0)
            return (int)i;
    }
    if (n == 8 && strncmp(item, "roofline", 8) == 0)
        return -2;
    return -1;
}

/* CUPTI's metric names: unit__counter.rollup[.submetric], lower case. */
static int metric_name_ok(const char *s, size_t n)
{
    if (n < 4 || n >= MLPROF__GPU_METRIC_LEN)
        return 0;
    int has_unit = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return 0;
        if (c == '_' && i + 1 < n && s[i + 1] == '_' && i > 0)
            has_unit = 1;
    }
    return has_unit;
}

int mlprof__gpu_metrics_check(const char *value, char *why, size_t len)
{
    const char *p = value;
    size_t n, count = 0;
    while ((n = mlprof__list_item(&p)) != 0) {
        const char *item = p;
        p += n;
        if (alias_of(item, n) == -1 && !metric_name_ok(item, n)) {
            snprintf(why, len,
                     "\"%.*s\" is neither a CUPTI metric name (such as dram__bytes_read.sum or "
                     "sm__warps_active.avg.pct_of_peak_sustained_active) nor one of flops, flops_sp, flops_dp, "
                     "flops_hp, dram, tensor, duration, roofline, achieved_occupancy, branch_efficiency",
                     (int)(n > 200 ? 200 : n), item);
            return -1;
        }
        count++;
    }
    if (count > MLPROF__GPU_MAX_METRICS) {
        snprintf(why, len, "more than %d metrics", MLPROF__GPU_MAX_METRICS);
        return -1;
    }
    return 0;
}

static void add(mlprof__gpu_metric_set *set, const char *name, size_t n)
{
    if (n >= MLPROF__GPU_METRIC_LEN)
        return;
    for (size_t i = 0; i < set->n; i++) {
        if (strlen(set->names[i]) == n && strncmp(set->names[i], name, n) == 0)
            return;
    }
    if (set->n >= MLPROF__GPU_MAX_METRICS) {
        set->overflow = 1;
        return;
    }
    memcpy(set->names[set->n], name, n);
    set->names[set->n][n] = '\0';
    set->n++;
}

static void add_alias(mlprof__gpu_metric_set *set, int a)
{
    for (size_t j = 0; j < 10 && k_aliases[a].metrics[j]; j++)
        add(set, k_aliases[a].metrics[j], strlen(k_aliases[a].metrics[j]));
}

void mlprof__gpu_metrics_expand(const char *value, unsigned details, mlprof__gpu_metric_set *set)
{
    memset(set, 0, sizeof *set);
    const char *p = value;
    size_t n;
    while ((n = mlprof__list_item(&p)) != 0) {
        const char *item = p;
        p += n;
        int a = alias_of(item, n);
        if (a == -2) {
            add_alias(set, alias_of("flops", 5));
            add_alias(set, alias_of("dram", 4));
        } else if (a >= 0) {
            add_alias(set, a);
        } else {
            add(set, item, n);
        }
    }
    if (details & MLPROF__GPU_ACHIEVED_OCCUPANCY)
        add(set, M_WARPS_ACTIVE, strlen(M_WARPS_ACTIVE));
    if (details & MLPROF__GPU_BRANCH_EFFICIENCY)
        add(set, M_BRANCH, strlen(M_BRANCH));
    if (set->n) /* the kernel's own time on the GPU: the rates' denominator, and the range's length */
        add(set, M_DURATION, strlen(M_DURATION));
}

/* The FLOPs one executed instruction of a SASS op metric counts: 2 for an
 * FMA, 1 for an add or a multiply, 0 for any other metric. These are the
 * CUDA cores' floating-point instructions: tensor core work is not in them
 * (sm__inst_executed_pipe_tensor.sum counts its instructions). */
static int flop_weight(const char *name)
{
    /* smsp__ only: the sm__ rollup of the same instructions would count them twice */
    if (strncmp(name, SASS_OP, strlen(SASS_OP)) != 0)
        return 0;
    const char *p = name + strlen(SASS_OP);
    if (p[0] != 'd' && p[0] != 'f' && p[0] != 'h')
        return 0;
    p++;
    int w = strncmp(p, "fma", 3) == 0 ? 2 : (strncmp(p, "add", 3) == 0 || strncmp(p, "mul", 3) == 0) ? 1 : 0;
    if (!w || strcmp(p + 3, "_pred_on.sum") != 0)
        return 0;
    return w;
}

void mlprof__gpu_metrics_derive(const mlprof__gpu_metric_set *set, const double *values, double fallback_ns,
                                mlprof__gpu_derived *out)
{
    out->flops = out->dram_bytes = out->gpu_ns = NAN;
    out->flops_per_s = out->dram_bytes_per_s = out->arithmetic_intensity = NAN;
    out->achieved_occupancy = out->branch_efficiency = NAN;
    double read = NAN, write = NAN, total = NAN;
    for (size_t i = 0; i < set->n; i++) {
        const char *m = set->names[i];
        double v = values[i];
        if (isnan(v))
            continue;
        int w = flop_weight(m);
        if (w)
            out->flops = (isnan(out->flops) ? 0 : out->flops) + w * v;
        else if (strcmp(m, M_DRAM_READ) == 0)
            read = v;
        else if (strcmp(m, M_DRAM_WRITE) == 0)
            write = v;
        else if (strcmp(m, M_DRAM) == 0)
            total = v;
        else if (strcmp(m, M_DURATION) == 0)
            out->gpu_ns = v;
        else if (strcmp(m, M_WARPS_ACTIVE) == 0)
            out->achieved_occupancy = v / 100.0;
        else if (strcmp(m, M_BRANCH) == 0)
            out->branch_efficiency = v / 100.0;
    }
    if (!isnan(total))
        out->dram_bytes = total;
    else if (!isnan(read) && !isnan(write)) /* one of them alone would pass for the traffic */
        out->dram_bytes = read + write;
    double ns = !isnan(out->gpu_ns) && out->gpu_ns > 0 ? out->gpu_ns : fallback_ns;
    if (ns > 0 && !isnan(out->flops))
        out->flops_per_s = out->flops / (ns * 1e-9);
    if (ns > 0 && !isnan(out->dram_bytes))
        out->dram_bytes_per_s = out->dram_bytes / (ns * 1e-9);
    if (!isnan(out->flops) && !isnan(out->dram_bytes) && out->dram_bytes > 0)
        out->arithmetic_intensity = out->flops / out->dram_bytes;
}
