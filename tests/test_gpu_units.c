/*
 * test_gpu_units.c - the pure parts of src/gpu, linked from the static
 * library: the conversion of CUPTI's clock to mlprof's, and theoretical
 * occupancy against values worked out by hand from the CUDA occupancy
 * calculator's rules, and the per-kernel metrics' names, expansion and
 * derived values.
 */
#include <math.h>
#include <stdint.h>

#include "../src/gpu/gpu_internal.h"
#include "testutil.h"

static void clock_tests(void)
{
    mlprof__gpu_clock c = {0};
    CHECK(mlprof__gpu_clock_convert(&c, 12345) == 12345, "no point: as it is");
    /* CUPTI's clock: the wall clock, 1.7e18 ns, running 50 ppm fast */
    const uint64_t wall0 = 1700000000000000000ull, mono0 = 5000000000ull;
    mlprof__gpu_clock_add(&c, wall0, mono0);
    CHECK(mlprof__gpu_clock_convert(&c, wall0 + 1000) == mono0 + 1000, "one point: its offset");
    /* a second point 0.5 s later, 3 us off: still the latest offset, no tilt */
    mlprof__gpu_clock_add(&c, wall0 + 500000000ull, mono0 + 500000000ull + 3000);
    CHECK(mlprof__gpu_clock_convert(&c, wall0 + 500001000ull) == mono0 + 500004000ull, "under a second: offset");
    /* 10 s later: a line through the first and the last point */
    uint64_t span = 10000000000ull, drift = span / 20000; /* 50 ppm */
    mlprof__gpu_clock_add(&c, wall0 + span + drift, mono0 + span);
    uint64_t mid = mlprof__gpu_clock_convert(&c, wall0 + span / 2 + drift / 2);
    int64_t err = (int64_t)(mid - (mono0 + span / 2));
    CHECK(err > -2 && err < 2, "the drift is followed: %lld ns off in the middle", (long long)err);
    uint64_t before = mlprof__gpu_clock_convert(&c, wall0 - 1000000);
    CHECK(before < mono0 && mono0 - before > 999000 && mono0 - before < 1001000, "extrapolated before the first");
}

static void occupancy_tests(void)
{
    mlprof__gpu_device h100 = {9, 0, 32, 64, 32, 65536, 65536, 233472, 1024, 132};
    mlprof__gpu_device v100 = {7, 0, 32, 64, 32, 65536, 65536, 98304, 1024, 80};
    mlprof__gpu_occupancy o;
    CHECK(mlprof__gpu_occupancy_of(&h100, 256, 32, 0, 0, &o) == 0 && o.occupancy == 1.0 && o.blocks_per_sm == 8,
          "256 threads, 32 registers: full (%g, %u)", o.occupancy, o.blocks_per_sm);
    /* 64 threads: 2 warps a block, 32 blocks at most: 64 warps */
    CHECK(mlprof__gpu_occupancy_of(&h100, 64, 16, 0, 0, &o) == 0 && o.blocks_per_sm == 32 && o.occupancy == 1.0 &&
              !strcmp(o.limiter, "blocks"), "small blocks: the block limit (%u, %s)", o.blocks_per_sm, o.limiter);
    /* 32 threads: 1 warp, 32 blocks: 32 of 64 warps */
    CHECK(mlprof__gpu_occupancy_of(&h100, 32, 16, 0, 0, &o) == 0 && o.occupancy == 0.5, "one-warp blocks: half");
    /* 100 KiB of shared memory + 1 KiB reserved = 103424: 2 blocks of 228 KiB */
    CHECK(mlprof__gpu_occupancy_of(&h100, 128, 32, 100 * 1024, 0, &o) == 0 && o.blocks_per_sm == 2 &&
              !strcmp(o.limiter, "shared memory") && o.occupancy == 8.0 / 64,
          "shared memory bound (%u, %s)", o.blocks_per_sm, o.limiter);
    /* the same with the carveout the driver chose (132 KiB): 1 block */
    CHECK(mlprof__gpu_occupancy_of(&h100, 128, 32, 100 * 1024, 132 * 1024, &o) == 0 && o.blocks_per_sm == 1,
          "the executed carveout counts (%u)", o.blocks_per_sm);
    /* 255 registers: 8160 a warp rounds to 8192; 2 warps a sub-partition, 8 an SM: one 8-warp block */
    CHECK(mlprof__gpu_occupancy_of(&h100, 256, 255, 0, 0, &o) == 0 && o.blocks_per_sm == 1 &&
              !strcmp(o.limiter, "registers"), "255 registers (%u)", o.blocks_per_sm);
    CHECK(mlprof__gpu_occupancy_of(&h100, 1024, 128, 0, 0, &o) == 0 && o.blocks_per_sm == 0 && o.occupancy == 0,
          "more registers than a block may have: 0");
    /* V100: 256-byte units, nothing reserved: 48 KiB exactly twice in 96 KiB */
    CHECK(mlprof__gpu_occupancy_of(&v100, 256, 32, 48 * 1024, 0, &o) == 0 && o.blocks_per_sm == 2,
          "cc 7.0 shared memory (%u)", o.blocks_per_sm);
    mlprof__gpu_device unknown = {0};
    CHECK(mlprof__gpu_occupancy_of(&unknown, 256, 32, 0, 0, &o) == -1, "an unknown device: no answer");
}

static size_t find(const mlprof__gpu_metric_set *set, const char *name)
{
    for (size_t i = 0; i < set->n; i++) {
        if (!strcmp(set->names[i], name))
            return i;
    }
    return SIZE_MAX;
}

static void metrics_tests(void)
{
    char why[512];
    CHECK(mlprof__gpu_metrics_check("flops,dram__bytes_read.sum,roofline", why, sizeof why) == 0, "good names");
    CHECK(mlprof__gpu_metrics_check("flops,Dram", why, sizeof why) == -1 && strstr(why, "\"Dram\""),
          "a bad name is named: %s", why);
    CHECK(mlprof__gpu_metrics_check("dram_bytes", why, sizeof why) == -1, "no unit__counter: refused");

    mlprof__gpu_metric_set set;
    mlprof__gpu_metrics_expand("", 0, &set);
    CHECK(set.n == 0, "nothing asked: no metrics, not even the duration");
    mlprof__gpu_metrics_expand("roofline,dram__bytes_read.sum", MLPROF__GPU_ACHIEVED_OCCUPANCY, &set);
    /* 9 FLOP counters, 2 DRAM, the warps, the duration; the repeated read once */
    CHECK(set.n == 13 && !set.overflow, "roofline expanded, each metric once (%zu)", set.n);
    CHECK(find(&set, "sm__warps_active.avg.pct_of_peak_sustained_active") != SIZE_MAX &&
              find(&set, "gpu__time_duration.sum") == set.n - 1,
          "the detail's metric, and the duration last");

    double v[MLPROF__GPU_MAX_METRICS];
    for (size_t i = 0; i < set.n; i++)
        v[i] = 0;
    v[find(&set, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")] = 1000;
    v[find(&set, "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum")] = 10;
    v[find(&set, "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum")] = 5;
    v[find(&set, "dram__bytes_read.sum")] = 3000;
    v[find(&set, "dram__bytes_write.sum")] = 1000;
    v[find(&set, "gpu__time_duration.sum")] = 2000; /* 2 us */
    v[find(&set, "sm__warps_active.avg.pct_of_peak_sustained_active")] = 37.5;
    mlprof__gpu_derived d;
    mlprof__gpu_metrics_derive(&set, v, 999999, &d);
    CHECK(d.flops == 2025, "an FMA is two FLOPs, an add one, at every precision (%g)", d.flops);
    CHECK(d.dram_bytes == 4000 && d.gpu_ns == 2000, "DRAM bytes read and written; the GPU time");
    CHECK(fabs(d.flops_per_s - 2025 / 2e-6) < 1 && fabs(d.dram_bytes_per_s - 2e9) < 1,
          "rates over the GPU time, not the fallback (%g, %g)", d.flops_per_s, d.dram_bytes_per_s);
    CHECK(fabs(d.arithmetic_intensity - 2025.0 / 4000) < 1e-12 && d.achieved_occupancy == 0.375 &&
              isnan(d.branch_efficiency), "intensity, occupancy as a fraction, branch efficiency not measured");

    /* no duration measured: the fallback; no DRAM: no intensity */
    mlprof__gpu_metrics_expand("flops_sp", 0, &set);
    for (size_t i = 0; i < set.n; i++)
        v[i] = NAN;
    v[find(&set, "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum")] = 500;
    mlprof__gpu_metrics_derive(&set, v, 1000, &d);
    CHECK(set.n == 4 && d.flops == 500 && fabs(d.flops_per_s - 5e8) < 1e-3 && isnan(d.dram_bytes) &&
              isnan(d.arithmetic_intensity) && isnan(d.gpu_ns), "the fallback time; what is missing is NAN");

    /* DRAM read alone is not the traffic; the sm__ rollup of an op is not counted twice */
    mlprof__gpu_metrics_expand("dram__bytes_read.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,"
                               "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 0, &set);
    v[0] = 4096;
    v[1] = v[2] = 100;
    v[3] = 1000;
    mlprof__gpu_metrics_derive(&set, v, 0, &d);
    CHECK(set.n == 4 && isnan(d.dram_bytes) && d.flops == 200, "partial DRAM: none; FMAs once (%g)", d.flops);

    /* more than the set holds */
    char many[4096] = "";
    for (int i = 0; i < 60; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sunit__c%d.sum", i ? "," : "", i);
    CHECK(mlprof__gpu_metrics_check(many, why, sizeof why) == -1, "more than 48 metrics refused: %s", why);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    clock_tests();
    occupancy_tests();
    metrics_tests();
    return tu_finish("test_gpu_units");
}
