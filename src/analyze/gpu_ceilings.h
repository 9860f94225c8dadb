/*
 * gpu_ceilings.h - a GPU's ceilings for the roofline, measured with CUDA
 * kernels: the peak FMA rate per precision (fp64, fp32, fp16x2) and the
 * bandwidth of a triad (24 bytes per fp64 element, as the CPU's) held in L2
 * and in device memory, plus a curve of working sets. The kernels are PTX
 * that mlprof writes itself and the driver compiles for the GPU it has, all
 * through libcuda.so.1 loaded with dlopen: no CUDA toolkit is needed, and
 * where there is no driver or no GPU that is said.
 */
#ifndef MLPROF_ANALYZE_GPU_CEILINGS_H
#define MLPROF_ANALYZE_GPU_CEILINGS_H

#include <stdio.h>

#include "ceilings.h"

enum { GCE_MAX_COMPUTE = 4, GCE_MAX_LEVELS = 2, GCE_MAX_CURVE = 32 };

typedef struct gce_ceilings {
    char gpu[128];      /* the device's name */
    int device;         /* its ordinal */
    int cc_major, cc_minor;
    int sms;            /* multiprocessors */
    int driver;         /* cuDriverGetVersion: 12080 is 12.8 */
    double l2_bytes, mem_bytes;
    unsigned grid, block; /* the launch every kernel used */
    char when[32];
    int repeats;
    ce_point compute[GCE_MAX_COMPUTE]; /* "fp64", "fp32", "fp16" (threads: grid x block) */
    size_t ncompute;
    ce_point levels[GCE_MAX_LEVELS];   /* "L2", "DRAM" */
    size_t nlevels;
    ce_point curve[GCE_MAX_CURVE];     /* working sets doubling */
    size_t ncurve;
} gce_ceilings;

typedef struct gce_options {
    int device;          /* default 0 */
    int repeats;         /* default 5 */
    double seconds;      /* what one measurement aims at (default 0.02 s) */
    const char *library; /* the driver: NULL for $MLPROF_CUDA_LIBRARY, else libcuda.so.1 */
    FILE *progress;      /* where to say what is measured, or NULL */
} gce_options;

void gce_options_default(gce_options *o);

/* The kernels' PTX as the driver gets it (for `mlprof ceilings --gpu --ptx`,
 * and for ptxas in the tests). The caller frees it (mlprof__free); NULL out
 * of memory. */
char *gce_ptx(void);

/* Measures device o->device (a few seconds). Returns 0; 1 when there is no
 * driver or no such GPU (err says which); -1 when the driver failed
 * (err names the call and its error). */
int gce_measure(gce_ceilings *c, const gce_options *o, char *err, size_t len);

/* For a person; and as ceilings (ceilings.h, gpu set: the GPU's name as
 * cpu, a launch's threads as threads, the rest in the note), which JSON
 * (`mlprof ceilings --gpu --json`) ce_read reads back, for `mlprof roofline
 * --gpu-ceilings`. */
void gce_print(const gce_ceilings *c, mlprof__sb *out);
void gce_to_ceilings(const gce_ceilings *g, ce_ceilings *c);
void gce_write_json(const gce_ceilings *c, mlprof__sb *out);

#endif /* MLPROF_ANALYZE_GPU_CEILINGS_H */
