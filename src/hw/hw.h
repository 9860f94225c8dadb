/*
 * hw.h - hardware and software counters (perf.c): the `counters` key's
 * names, the built-in observer that measures each span with them, and what
 * the trace says about those that could not be opened.
 */
#ifndef MLPROF_HW_H
#define MLPROF_HW_H

#include <stddef.h>

#include "../common/common.h"

/* Every counter mlprof knows, in a fixed order: the statistics keep sums of
 * the span arguments named after them. */
#define MLPROF__HW_KNOWN 13
/* The index of the counter named key (len bytes), or -1. */
int mlprof__hw_index(const char *key, size_t len);
const char *mlprof__hw_name(int index);

/* Checks a comma list of counter names; -1 with err naming the first bad one. */
int mlprof__hw_check(const char *spec, char *err, size_t len);
/* At a run's start (ctl_lock held, not yet running): registers the counter
 * observer when the counters key names any. */
int mlprof__hw_start(void);
/* At its stop (ctl_lock held, no longer running). */
void mlprof__hw_stop(void);
/* Appends ,"counters":[...],"counters_unavailable":{name: reason} to otherData. */
void mlprof__hw_other_data(mlprof__sb *out);

#endif /* MLPROF_HW_H */
