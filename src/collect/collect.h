/*
 * collect.h - the collector: drains the threads' records, decodes them into
 * spans, instants and counter samples, takes the modules' produced events,
 * and drives the sinks (sinks.c), spooling the trace sink's bytes. Only
 * control.c (the API) calls it. Every function here is called with ctl_lock
 * held, except mlprof__collect_join_continuous and mlprof__collect_init.
 */
#ifndef MLPROF_COLLECT_H
#define MLPROF_COLLECT_H

#include <stdint.h>

/* Drains every thread, then writes the trace to path (NULL: the configured
 * filename; "%p" expanded in either), stats_file, and the memory outputs
 * (at "auto": beside that path). finished != 0 ends the trace: the next run
 * starts an empty one, once the trace is written (a trace that could not be
 * is kept whole for the next dump). The outputs it could not write wait for
 * the next dump, which writes them even with nothing recorded since, the
 * trace then left as it is. The error names every output that failed. */
int mlprof__collect_dump(const char *path, int finished);
/* Ring mode: writes the ring to path as mlprof__collect_dump(path, 0) does,
 * then starts the trace's stream anew while recording goes on, the ring's
 * start moved to now: the next dump holds only what comes after. In normal
 * mode: mlprof__collect_dump(path, 0). */
int mlprof__collect_flush(const char *path);
/* The outputs (stats_file, the memory files) that the last finished dump
 * wrote its trace without, and that no dump has written since, written now
 * beside that trace, which is left as it is: the dump at exit with nothing
 * recorded since. MLPROF_OK when none waits. */
int mlprof__collect_retry_outputs(void);
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
/* Registers the collector's wake-up and drain with the lower layer
 * (mlprof__set_waker, mlprof__set_drainer); once, at the library's start. */
void mlprof__collect_init(void);
/* In a forked child: forget the parent's trace and statistics. */
void mlprof__collect_after_fork(void);
/* The path the trace is written to (with %p and the fork suffix applied). */
void mlprof__collect_trace_path(char *buf, size_t len);
/* How many finished traces this process wrote so far, and (path, when not
 * NULL) where the last of them went. */
unsigned long mlprof__collect_finished(char *path, size_t len);

#endif /* MLPROF_COLLECT_H */
