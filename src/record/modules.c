/*
 * modules.c - the lifecycle table: one line per module (produce.h). Control
 * and the collector call the entries in this order (otherData's members come
 * in it too).
 */
#include "produce.h"

extern const mlprof__module mlprof__mem_module; /* src/mem: the memory accounting */
extern const mlprof__module mlprof__hw_module;  /* src/hw: counters per span, the sampler */
extern const mlprof__module mlprof__gpu_module; /* src/gpu: CUPTI activity, regions, range profiler */
extern const mlprof__module mlprof__hook_module; /* src/hook: which interposers of mlprof run are on */
extern const mlprof__module mlprof__steps_module; /* src/record/steps.c: steps and the schedule */
extern const mlprof__module mlprof__clock_sync_module; /* src/hook/mpi_sync.c: clock alignment over MPI */
extern const mlprof__module mlprof__stacks_module; /* src/hw/stacks.c: sampled call stacks */
extern const mlprof__module mlprof__dist_module; /* src/record/dist.c: the rank, in otherData */

const mlprof__module *const mlprof__modules[] = {
    &mlprof__mem_module,
    &mlprof__hw_module,
    &mlprof__gpu_module,
    &mlprof__hook_module,
    &mlprof__steps_module,
    &mlprof__clock_sync_module,
    &mlprof__dist_module,
    &mlprof__stacks_module,
};
const size_t mlprof__nmodules = sizeof mlprof__modules / sizeof mlprof__modules[0];
