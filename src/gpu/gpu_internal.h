/*
 * gpu_internal.h - between the files of src/gpu: the CUPTI loader (cupti.c),
 * the conversion of activity records into trace events (activity.c), and the
 * pure helpers that the tests check directly (clock conversion, occupancy).
 */
#ifndef MLPROF_GPU_INTERNAL_H
#define MLPROF_GPU_INTERNAL_H

#include <stdint.h>

#include "cupti_abi.h"
#include "gpu.h"

/* ------------------------------------------------------------ cupti.c */

/* Walks the records of a buffer: libcupti's cuptiActivityGetNextRecord
 * (*rec NULL the first time); 0 while there is one. */
int mlprof__cupti_next(uint8_t *buf, size_t valid, cupti_record **rec);
/* The name of a runtime (domain 2) or driver (1) function by its callback
 * id, without CUPTI's version suffix ("cudaLaunchKernel"); NULL if unknown. */
const char *mlprof__cupti_function(int domain, uint32_t cbid);
/* Delivers CUPTI's buffers to mlprof__gpu_take_buffer (or frees them, when
 * discard), after a flush of everything finished (final: of everything). */
void mlprof__cupti_flush(int discard, int final);
/* CUPTI's name of a result code. */
const char *mlprof__cupti_result(int rc);
/* 1, with why, when no NVIDIA driver can be loaded. */
int mlprof__cupti_no_driver(char *why, size_t len);
/* Whether per-kernel metrics are asked for (gpu_metrics, measured details). */
int mlprof__gpu_metrics_wanted(void);
/* Appends ,"cupti_library":...,"cupti_clock":... */
void mlprof__cupti_other_data(mlprof__sb *out);
/* Whether a call is recorded under gpu_functions. */
int mlprof__cupti_function_on(int domain, uint32_t cbid);

/* ---------------------------------------------------------- activity.c */

/* Converts one buffer's records (called by cupti.c's flush). */
void mlprof__gpu_take_buffer(uint8_t *buf, size_t valid);
/* Adds a point (CUPTI's clock, mlprof's clock) to the clock conversion. */
void mlprof__gpu_clock_point(uint64_t cupti_ns, uint64_t ns);
/* Records lost in CUPTI (its count of dropped records, and the buffers it
 * asked for while gpu_buffer_size was held). */
void mlprof__gpu_count_lost(uint64_t dropped, uint64_t refused);

/* The conversion from CUPTI's timestamps to mlprof's clock: a straight line
 * through the first and the last point taken once they are a second apart
 * (the clocks' drift), the latest point's offset before. */
typedef struct mlprof__gpu_clock {
    uint64_t src0, dst0, src1, dst1;
    int points;
} mlprof__gpu_clock;
void mlprof__gpu_clock_add(mlprof__gpu_clock *c, uint64_t src, uint64_t dst);
uint64_t mlprof__gpu_clock_convert(const mlprof__gpu_clock *c, uint64_t src);

/* Theoretical occupancy of a launch on a device (from the CUDA occupancy
 * calculator's rules: registers allocated per warp in units of 256 across 4
 * sub-partitions, shared memory in units of 256 bytes before compute
 * capability 8 and 128 from it, with 1 KiB reserved per block from 8). */
typedef struct mlprof__gpu_device {
    uint32_t cc_major, cc_minor;
    uint32_t warp_size, max_warps_per_sm, max_blocks_per_sm;
    uint32_t max_registers_per_sm, max_registers_per_block;
    uint32_t max_shared_memory_per_sm, max_threads_per_block, multiprocessors;
} mlprof__gpu_device;
typedef struct mlprof__gpu_occupancy {
    double occupancy;   /* active warps over the SM's maximum, 0..1 */
    uint32_t blocks_per_sm;
    uint32_t warps_per_sm;
    const char *limiter; /* "warps", "blocks", "registers", "shared memory" */
} mlprof__gpu_occupancy;
/* threads: per block; shared: static + dynamic bytes per block; carveout:
 * shared memory per SM configured for the launch (0: the device's maximum).
 * Returns 0, or -1 when the device is not known well enough. */
int mlprof__gpu_occupancy_of(const mlprof__gpu_device *d, uint32_t threads, uint32_t registers,
                             uint32_t shared, uint32_t carveout, mlprof__gpu_occupancy *out);

#include "metrics.h"

/* ---------------------------------------------------------- counters.c */

/* With gpu_metrics (or a measured detail) set, at the start of a run and
 * at resume: loads the profiler's functions from libcupti (lib), subscribes
 * to context creation and kernel launches, and starts the range profiler on
 * every context. What cannot be done is said and the run goes on. */
void mlprof__gpu_counters_start(void *lib);
/* Points for the collector: the launches whose counters were evaluated;
 * appended through mlprof__gpu_add_point. */
void mlprof__gpu_counters_points(void);
/* The collector's answer for a point of counters.c. */
void mlprof__gpu_counters_ops(uint32_t index, const char *ops, const char *stack);
void mlprof__gpu_counters_after_fork(void);
void mlprof__gpu_counters_report(void);
void mlprof__gpu_counters_reset(void);

/* A launch point's index with this bit set belongs to counters.c. */
#define MLPROF__GPU_ASK_BIT 0x80000000u
/* activity.c: a point whose answer goes to counters.c (its index there). */
void mlprof__gpu_add_point(pid_t tid, uint64_t ns, uint32_t index);
/* activity.c: a kernel's name demangled and interned. */
const char *mlprof__gpu_kernel_name(const char *mangled);
/* activity.c: the track of a device's kernel counters. */
int mlprof__gpu_counters_track(uint32_t device);

#endif /* MLPROF_GPU_INTERNAL_H */
