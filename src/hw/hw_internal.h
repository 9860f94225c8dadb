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

/* One item of the counters or sampler key. */
enum { MLPROF__K_PERF, MLPROF__K_RSS, MLPROF__K_PAPI, MLPROF__K_CPU, MLPROF__K_RAPL, MLPROF__K_NVML };
typedef struct mlprof__hw_item {
    int kind;
    int perf;                          /* MLPROF__K_PERF: the counter */
    char papi[MLPROF__PAPI_NAME];      /* MLPROF__K_PAPI: the event */
} mlprof__hw_item;
#define MLPROF__HW_ITEMS (MLPROF__PERF_MAX + 1 + MLPROF__HW_PAPI_MAX + 3)

/* Registers a built-in observer (ctl_lock held, stopped) into *id unless it
 * is there (*id >= 0); off takes it away and sets *id to -1. */
typedef void (*mlprof__span_fn)(void *user, const mlprof_span_info *span, void *data);
int mlprof__hw_observer_on(int *id, const char *name, size_t data_size, mlprof__span_fn begin,
                           mlprof__span_fn end);
void mlprof__hw_observer_off(int *id);

/* A series of the rate of a growing count: each put records
 * scale * (value - last) / seconds since the last; wrap, when not 0, is where
 * the count goes back to 0 (RAPL's energy). */
typedef struct mlprof__rate {
    mlprof_counter *counter;
    uint64_t last, last_ns, wrap;
    double scale;
} mlprof__rate;
void mlprof__rate_start(mlprof__rate *r, mlprof_domain *d, const char *name, double scale, uint64_t wrap,
                        uint64_t value);
/* The time of a rate's sample is read here, after its value and right
 * before its record: the span each value covers is the span between the
 * records' times, so that value x span adds up to what the count grew by,
 * whatever delays the sampler met (a sampler descheduled between one clock
 * reading for all sources and the records made its series disagree with
 * the process's CPU clock by a tenth on a loaded machine). */
void mlprof__rate_put(mlprof__rate *r, uint64_t value);
void mlprof__rate_end(mlprof__rate *r, int after_fork);


/* ---------------------------------------------------------- perf.c */
/* The perf_event counter named key, or -1 (its slot in the statistics). */
int mlprof__perf_find(const char *key, size_t len);
const char *mlprof__perf_name(int index);
/* Why perf_event_open failed, in words a user can act on. */
const char *mlprof__perf_why(int err);
/* The per-span observer for these counters (indexes). */
int mlprof__perf_span_start(const int *counters, size_t n);
void mlprof__perf_span_stop(void);
/* In a forked child: the threads' counters are the parent's; reopened at the next span. */
void mlprof__perf_after_fork(void);

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
 * these events (kept, not copied: hw.c's list for the run); an event or a
 * library that is missing is said, and the others go on. */
int mlprof__papi_span_start(char (*names)[MLPROF__PAPI_NAME], size_t n);
void mlprof__papi_span_stop(void);
/* In a forked child: the threads' event sets are the parent's; made again at the next span. */
void mlprof__papi_after_fork(void);

/* ------------------------------------------------------- sampler.c */
/* The sampler thread for these sources (ctl_lock held, as hw.h's). */
int mlprof__sampler_start(const mlprof__hw_item *items, size_t n);
void mlprof__sampler_stop(void);
/* Recording is on / off: the sampler's rounds run only while it is on. */
void mlprof__sampler_resume(void);
void mlprof__sampler_pause(void);
void mlprof__sampler_join(void);
/* Around a fork: the thread waits between two rounds. */
void mlprof__sampler_fork_prepare(void);
void mlprof__sampler_fork_parent(void);
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

extern const mlprof__source mlprof__perf_source; /* arg: an int, the counter's index */
extern const mlprof__source mlprof__cpu_source;
extern const mlprof__source mlprof__rss_source;
extern const mlprof__source mlprof__rapl_source;
extern const mlprof__source mlprof__nvml_source;


#endif /* MLPROF_HW_INTERNAL_H */
