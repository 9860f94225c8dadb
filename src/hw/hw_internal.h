/*
 * hw_internal.h - between the files of src/hw: the registry of what could
 * not be opened (hw.c), the back-ends' entry points, and the sampler's
 * sources.
 */
#ifndef MLPROF_HW_INTERNAL_H
#define MLPROF_HW_INTERNAL_H

#include <stdint.h>

#include "../record/record.h"
#include "hw.h"

#define MLPROF__PAPI_NAME 64 /* bytes of a PAPI event name, with its NUL */
#define MLPROF__PERF_MAX 8   /* perf_event counters per span */

/* Records that `what` (a counter, a source) cannot be used and why; said on
 * stderr the first time in a run. Any thread, any time. */
void mlprof__hw_unavailable(const char *what, const char *reason);

/* ---------------------------------------------------------- perf.c */
/* The perf_event counter named key, or -1 (its slot in the statistics). */
int mlprof__perf_find(const char *key, size_t len);
const char *mlprof__perf_name(int index);
/* Why perf_event_open failed, in words a user can act on. */
const char *mlprof__perf_why(int err);
/* The per-span observer for these counters (indexes). */
int mlprof__perf_span_start(const int *counters, size_t n);
void mlprof__perf_span_stop(void);

/* One counter over the whole process: every thread that exists when it is
 * opened, and the threads they start. NULL when it cannot be opened (said). */
typedef struct mlprof__perf_proc mlprof__perf_proc;
mlprof__perf_proc *mlprof__perf_proc_open(int counter);
uint64_t mlprof__perf_proc_read(const mlprof__perf_proc *p);
void mlprof__perf_proc_close(mlprof__perf_proc *p);

/* ----------------------------------------------------------- rss.c */
/* The resident set of this process in bytes, or -1. */
int64_t mlprof__rss_bytes(void);
int mlprof__rss_span_start(void);
void mlprof__rss_span_stop(void);

/* ---------------------------------------------------------- papi.c */
/* Loads PAPI (the papi_library key) and registers the per-span observer for
 * these events; an event or a library that is missing is said, and the
 * others go on. */
int mlprof__papi_span_start(char (*names)[MLPROF__PAPI_NAME], size_t n);
void mlprof__papi_span_stop(void);

/* ------------------------------------------------------- sampler.c */
/* The sampler thread, for the sampler key (ctl_lock held, as hw.h's). */
int mlprof__sampler_start(void);
void mlprof__sampler_stop(void);
void mlprof__sampler_join(void);
void mlprof__sampler_after_fork(int running);
/* ,"sampler_period_s":..,"sampler_samples":..,"sampler_late":.. when it ran. */
void mlprof__sampler_other_data(mlprof__sb *out);

/* ------------------------------------------------------- samplers */
/* A source of series for the sampler thread. open() makes its counters in
 * domain d and returns its state, or NULL when it has nothing (said);
 * sample() reads and records (now: mlprof__clock_monotonic_ns); close() ends
 * it, with after_fork set in a child, where only memory and descriptors may
 * be let go of. */
typedef struct mlprof__source {
    const char *name;
    void *(*open)(mlprof_domain *d, const void *arg);
    void (*sample)(void *state, uint64_t now_ns);
    void (*close)(void *state, int after_fork);
} mlprof__source;

extern const mlprof__source mlprof__perf_source; /* arg: the counter's index */
extern const mlprof__source mlprof__cpu_source;
extern const mlprof__source mlprof__rss_source;
extern const mlprof__source mlprof__rapl_source;
extern const mlprof__source mlprof__nvml_source;

/* The change of a counter that wraps at max (RAPL's energy): now - before,
 * or the way around through max when it went past it once. */
uint64_t mlprof__wrap_delta(uint64_t before, uint64_t now, uint64_t max);

#endif /* MLPROF_HW_INTERNAL_H */
