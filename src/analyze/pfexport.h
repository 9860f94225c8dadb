/*
 * pfexport.h - `mlprof export --perfetto`: any trace the analyzer reads
 * (Chrome JSON from mlprof, PyTorch/Kineto or others, plain or gzip) written
 * as Perfetto's protobuf trace by the library's own Perfetto sink
 * (src/export/perfetto.c), so that it is the same format a recording run
 * writes: interned names, typed arguments, a sequence per thread.
 *
 * Perfetto's slices nest on their track; a trace's durations need not (a
 * PyTorch operator may end a microsecond after its parent). A duration that
 * overlaps one on its thread without nesting goes to a track of its own
 * beside the thread's ("NAME (overlapping)"), with its times as they are.
 */
#ifndef MLPROF_ANALYZE_PFEXPORT_H
#define MLPROF_ANALYZE_PFEXPORT_H

#include "trace.h"

typedef struct an_pf_stats {
    size_t slices, instants, counters, flows, async_slices, tracks;
    size_t overlapping;     /* durations moved to an overlap track (above) */
    size_t async_unmatched; /* async begins without an end (shown to the trace's end) and ends without a begin */
    size_t left_out;        /* events of kinds Perfetto's track events do not hold (flow steps "t"),
                             * and counter values that are not numbers */
    size_t unended;         /* begins ("B") never ended: left out, as analyze leaves them out */
    int64_t shift_ns;       /* added to every time: the trace starts before 0, and Perfetto's times are unsigned */
    size_t stack_samples;   /* sampled call stacks written (PerfSample packets) */
    int stacks_unread;      /* the trace has sampled stacks that could not be read again (standard input) */
    long long bytes;        /* the file's size */
} an_pf_stats;

/* Writes t at out (gzip when it ends in .gz), through a temporary file
 * renamed over it at the end (a file that exists is replaced only when it is
 * a regular file). Returns 0, or -1 with the error in err. */
int an_perfetto_export(const an_trace *t, const char *out, an_pf_stats *st, char *err, size_t errlen);

#endif /* MLPROF_ANALYZE_PFEXPORT_H */
