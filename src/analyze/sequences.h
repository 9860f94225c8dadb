/*
 * sequences.h - the kernel sequences that recur on a trace's GPU streams
 * (mlprof sequences), the counterpart of Holistic Trace Analysis's frequent
 * CUDA kernel sequences.
 */
#ifndef MLPROF_ANALYZE_SEQUENCES_H
#define MLPROF_ANALYZE_SEQUENCES_H

#include "trace.h"

/* HTA's min_pattern_len and top_k defaults. */
#define AN_SEQ_DEFAULT_LENGTH 3
#define AN_SEQ_DEFAULT_TOP 5
#define AN_SEQ_MAX_LENGTH 64

/* The sequences of 2 to max_len consecutive GPU events (kernels, copies,
 * memsets, by name, in start order) on each stream that occur at least
 * twice, keyed also by the op stack of their first kernel (the CPU operators
 * around the runtime call that launched it): per length, from max_len down,
 * the top (0: all) by occurrences, then GPU time. Occurrences are counted
 * left to right without overlap on a stream (A A A A holds "A A" twice), so
 * that their GPU time (the sum of the kernels' durations) is time the stream
 * really spent. format: AN_TABLE, AN_JSON or AN_CSV. Returns 0, or -1 (out of
 * memory). */
int an_sequences(an_trace *t, int max_len, int top, int format, mlprof__sb *out);

#endif /* MLPROF_ANALYZE_SEQUENCES_H */
