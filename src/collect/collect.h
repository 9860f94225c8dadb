/*
 * collect.h - the collector: drains the threads' records, decodes them into
 * spans, instants and counter samples, and drives the sinks (the Chrome trace
 * spool and the statistics). Every function here is called with ctl_lock held,
 * except mlprof__collect_join_continuous.
 */
#ifndef MLPROF_COLLECT_H
#define MLPROF_COLLECT_H

#include <stdint.h>

/* Drains every thread, then writes the trace to path (NULL: the configured
 * filename; "%p" expanded in either), stats_file, and the memory outputs
 * (at "auto": beside that path). finished != 0 ends the trace: the next run
 * starts an empty one. */
int mlprof__collect_dump(const char *path, int finished);
/* Drains every thread and returns in *out the trace as mlprof__collect_dump(
 * NULL, 0) would write it; no file is written, the trace goes on. */
int mlprof__collect_dump_string(char **out);
/* Drains every thread and prints the statistics. */
int mlprof__collect_dumps(char **out, int format, int sort_by, int ascending, int reset);
/* Drains and discards everything recorded, and the statistics. */
void mlprof__collect_clear(void);
/* Events dropped so far (buffers full), over all threads. */
uint64_t mlprof__collect_dropped(void);
/* Starts the continuous-dump thread if continuous_dump is on and none runs. */
int mlprof__collect_start_continuous(void);
/* Asks the continuous-dump thread to stop; join it after releasing ctl_lock. */
void mlprof__collect_stop_continuous(void);
void mlprof__collect_join_continuous(void);
/* Called by a thread that takes a chunk from a pool more than half used: wakes
 * the continuous-dump thread (once, until it has drained). Lock-free. */
void mlprof__collect_poke(void);
/* In a forked child: forget the parent's trace and statistics. */
void mlprof__collect_after_fork(void);
/* The path the trace is written to (with %p and the fork suffix applied). */
void mlprof__collect_trace_path(char *buf, size_t len);

/* Events that come with their own times, on tracks of their own (GPU
 * streams, CUDA-event regions): any thread, any time, never the hot path.
 * A track's synthetic thread id by its name (-1 when there are too many). */
int mlprof__ext_track(const char *name);
/* Queues a duration for the next drain (copied); MLPROF_ELIMIT when the queue
 * is full (counted as otherData.external_dropped). */
int mlprof__ext_span(int tid, const char *domain, const char *name, uint64_t begin_ns, uint64_t end_ns,
                     const char *args);
/* Queues a flow from a slice on from_tid (at from_ns) to the slice that
 * encloses to_ns on to_tid (a launch to its kernel). */
int mlprof__ext_flow(uint64_t id, int from_tid, uint64_t from_ns, int to_tid, uint64_t to_ns);

#endif /* MLPROF_COLLECT_H */
