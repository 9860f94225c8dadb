/*
 * gpu.h - GPU activity (src/gpu): what the configuration, the state changes
 * and the collector see of it.
 *
 * Keys:
 *   gpu            which CUPTI activities are recorded: kernel, memcpy,
 *                  memset, sync, runtime, driver; "on" for the first five,
 *                  "all", or "off" (the default)
 *   gpu_functions  the runtime and driver functions recorded (names such as
 *                  cudaLaunchKernel,cuMemcpyHtoD_v2); empty for all
 *   gpu_details    costlier details per kernel: occupancy (theoretical),
 *                  achieved_occupancy, branch_efficiency (measured)
 *   gpu_metrics    per-kernel metrics of CUPTI's range profiler (names such
 *                  as dram__bytes_read.sum, or flops, dram, roofline...)
 *   gpu_metrics_batch  kernels profiled between two decodings of the
 *                  counter data
 *   gpu_buffer_size  bytes of CUPTI buffers held at most (records beyond are
 *                  dropped by CUPTI, counted and said)
 *   cupti_library  the libcupti to load
 *
 * Kernels, copies and memsets go on one track per device and stream,
 * runtime and driver calls on the thread that made them, linked to what
 * they launched by a flow; the CPU spans open at the launch are written on
 * the kernel (op, op_stack).
 */
#ifndef MLPROF_GPU_H
#define MLPROF_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"
#include "../record/produce.h"

/* Bits of the gpu key. */
enum {
    MLPROF__GPU_KERNEL = 1 << 0,
    MLPROF__GPU_MEMCPY = 1 << 1,
    MLPROF__GPU_MEMSET = 1 << 2,
    MLPROF__GPU_SYNC = 1 << 3,
    MLPROF__GPU_RUNTIME = 1 << 4,
    MLPROF__GPU_DRIVER = 1 << 5,
    MLPROF__GPU_LAUNCH = 1 << 6, /* the driver calls that launch work (cuLaunchKernel, cuLaunchKernelEx,
                                    cuLaunchCooperativeKernel, cuGraphLaunch...): the kernels that
                                    cuBLASLt, CUTLASS or Triton launch through the driver get linked */
};
/* Bits of the gpu_details key. */
enum {
    MLPROF__GPU_OCCUPANCY = 1 << 0,          /* theoretical, from the launch */
    MLPROF__GPU_ACHIEVED_OCCUPANCY = 1 << 1, /* measured: the range profiler */
    MLPROF__GPU_BRANCH_EFFICIENCY = 1 << 2,  /* measured: the range profiler */
};
#define MLPROF__GPU_MEASURED_DETAILS (MLPROF__GPU_ACHIEVED_OCCUPANCY | MLPROF__GPU_BRANCH_EFFICIENCY)

/* Parses the value of gpu, gpu_details, gpu_functions or gpu_metrics (by
 * key name) into *mask (0 but for gpu and gpu_details); -1 with why naming
 * the bad item. */
int mlprof__gpu_parse(const char *key, const char *value, unsigned *mask, char *why, size_t len);

/* At a run's start and at resume (ctl_lock held): enables the configured
 * activities, loading libcupti the first time. What cannot be done is said
 * (counters_unavailable) and the run goes on. */
void mlprof__gpu_start(void);
/* At a stop and at pause: disables them; what was recorded is kept. */
void mlprof__gpu_stop(void);
/* At a stop, a pause and exit: stops the range profiler on every context
 * and evaluates what it measured, for the next drain (counters.c). */
void mlprof__gpu_counters_stop(void);
/* In a forked child: CUDA does not survive a fork; GPU activity is off. */
void mlprof__gpu_after_fork(void);

/* -------------------------------- the collector's, through mlprof__gpu_module */

/* The lifecycle entry (src/record/modules.c lists it): start and stop as
 * resume and pause, the range profiler's stop as finish, and the drain's
 * flush, launch_ops, emit, other_data, report and reset below. */
extern const mlprof__module mlprof__gpu_module;

/* Before the threads are drained: delivers CUPTI's buffers (all of them,
 * finished or not, when final) and turns them into events. *points receives
 * the calls whose operators are wanted (owned by src/gpu, valid until
 * mlprof__gpu_emit); returns how many. discard: drop everything. */
size_t mlprof__gpu_flush(int discard, int final, mlprof__launch_point **points);
/* The collector's answer for one point: the names of the spans open, the
 * outermost first (depth 0: none). */
void mlprof__gpu_launch_ops(uint32_t index, const char *const *names, size_t depth);
/* After the threads: writes the GPU activities with their launches and
 * operators, and the GPU-timed regions that completed. */
void mlprof__gpu_emit(int discard, int final);
/* src/gpu/region.c's part of mlprof__gpu_emit. */
void mlprof__gpu_regions_resolve(int discard);
/* Appends ,"gpu":{...}: what was recorded, dropped, left unlinked. */
void mlprof__gpu_other_data(mlprof__sb *out);
/* The range events of the kernels whose counters were decoded (called by
 * mlprof__gpu_emit, after the activities). */
void mlprof__gpu_counters_emit(int discard);
/* Appends ,"counters":{...} inside otherData.gpu. */
void mlprof__gpu_counters_other_data(mlprof__sb *out);
/* Says on stderr what was lost since the last time (at each dump). */
void mlprof__gpu_report(void);
/* A new trace begins (after a finished dump, or cleared). */
void mlprof__gpu_reset(void);

#endif /* MLPROF_GPU_H */
