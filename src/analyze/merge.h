/*
 * merge.h - several traces on one timeline (mlprof merge).
 */
#ifndef MLPROF_ANALYZE_MERGE_H
#define MLPROF_ANALYZE_MERGE_H

#include "trace.h"

enum { AN_ALIGN_SHARED = 0, AN_ALIGN_GIVEN = 1, AN_ALIGN_MARKER = 2, AN_ALIGN_STARTS = 3 };

typedef struct an_merge_options {
    const char *const *labels;  /* one per input ("rank 0", a host), or NULL: the paths */
    const int64_t *offsets;     /* ns added to each input's times, or NULL */
    const char *sync_marker;    /* align the first event of this name in every input, or NULL */
    int same_clock;             /* the inputs share a clock: no shift */
} an_merge_options;

/* The shift of each input's times and how it was chosen (AN_ALIGN_*): given
 * offsets, then a sync marker, then a clock the inputs say they share (same
 * host, CLOCK_MONOTONIC), else the starts lined up. -1 with err set when an
 * input lacks the marker. */
int an_merge_offsets(an_trace *const *in, size_t n, const an_merge_options *o, int64_t *offset, int *method,
                     char *err, size_t errlen);
/* The merged trace as Chrome trace JSON: every input's events shifted, pids
 * that collide renumbered, process tracks named "LABEL: name", and the method
 * (also in *method) and offsets in otherData.merge. Returns 0, or -1 (err
 * set, or out of memory). */
int an_merge(an_trace *const *in, size_t n, const an_merge_options *o, mlprof__sb *out, int *method, char *err,
             size_t errlen);

#endif /* MLPROF_ANALYZE_MERGE_H */
