/*
 * hw.h - counters and samplers (src/hw): what the rest of the library sees.
 *
 * Two configuration keys choose them:
 *   counters  measured per span by built-in observers and added to the span
 *             as arguments: perf_event counters by name, "rss" (the change of
 *             the resident set), and PAPI events as "papi:NAME";
 *   sampler   series written every sampler_period seconds by a thread of
 *             ours: perf_event counters counted over the whole process,
 *             "cpu", "rss", "rapl" (power) and "nvml" (GPUs).
 * What cannot be opened is said once on stderr and listed in the trace's
 * otherData.counters_unavailable; everything else goes on.
 */
#ifndef MLPROF_HW_H
#define MLPROF_HW_H

#include <stddef.h>

#include "../common/common.h"

/* The statistics keep sums of span arguments named after counters, in these
 * slots: the perf_event counters in a fixed order, then "rss", then the PAPI
 * events of the current run. */
#define MLPROF__HW_PERF 13
#define MLPROF__HW_RSS 13
#define MLPROF__HW_PAPI 14
#define MLPROF__HW_PAPI_MAX 8
#define MLPROF__HW_KNOWN (MLPROF__HW_PAPI + MLPROF__HW_PAPI_MAX)

/* The slot of the counter named key (len bytes), or -1. */
int mlprof__hw_index(const char *key, size_t len);
const char *mlprof__hw_name(int index);

/* Check the counters and sampler keys' values: -1 with err naming the first
 * bad item. */
int mlprof__hw_check(const char *spec, char *err, size_t len);
int mlprof__hw_check_sampler(const char *spec, char *err, size_t len);

/* At a run's start (ctl_lock held, not yet running): registers the observers
 * and starts the sampler thread. */
int mlprof__hw_start(void);
/* At its stop (ctl_lock held, no longer running): unregisters the observers
 * and asks the sampler to stop; mlprof__hw_join, called without ctl_lock,
 * waits for it. */
void mlprof__hw_stop(void);
void mlprof__hw_join(void);
/* At exit and before a final dump, without ctl_lock: stops the sampler
 * and waits for it, so that its last samples and reports are in the trace. */
void mlprof__hw_quiesce(void);
/* In a forked child: the sampler thread is gone; its counters are closed and
 * it starts again when recording goes on. */
void mlprof__hw_after_fork(int running);
/* Records that `what` (a counter, a source, GPU activity) cannot be used
 * and why; said on stderr the first time in a run and listed in
 * otherData.counters_unavailable. Any thread, any time. */
void mlprof__hw_unavailable(const char *what, const char *reason);
/* Appends ,"counters":[...],"sampler":[...],"counters_unavailable":{...}. */
void mlprof__hw_other_data(mlprof__sb *out);

#endif /* MLPROF_HW_H */
