/*
 * export.h - the sinks' helpers: Chrome trace event JSON for each decoded
 * span, instant and counter sample (chrome.c, used by json_sink.c), the
 * aggregate statistics (stats.c, the stats sink), and the memory outputs'
 * paths (memory_sink.c). They know nothing of records or threads: the
 * collector hands the sinks finished events (sink.h).
 */
#ifndef MLPROF_EXPORT_H
#define MLPROF_EXPORT_H

#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"
#include "sink.h"


/* Appends one event object (two for a frame: begin and end), each preceded
 * by ",\n" unless *first is set (which it then clears). */
void mlprof__chrome_span(mlprof__sb *out, int *first, const mlprof__span_out *s);
void mlprof__chrome_instant(mlprof__sb *out, int *first, const char *name, size_t name_len,
                            const char *domain, uint64_t ts_ns, int scope, pid_t pid, pid_t tid,
                            const char *args, size_t args_len);
/* One end of a flow: ph 's' (its start, bound to the slice enclosing ts on
 * that thread) or 'f' (its end, bound to the slice enclosing ts). */
void mlprof__chrome_flow(mlprof__sb *out, int *first, char ph, uint64_t id, const char *name, const char *domain,
                         uint64_t ts_ns, pid_t pid, pid_t tid);
void mlprof__chrome_counter(mlprof__sb *out, int *first, const char *name, const char *domain,
                            uint64_t ts_ns, double value, int is_int, int64_t ivalue, pid_t pid,
                            pid_t tid);
void mlprof__chrome_thread_meta(mlprof__sb *out, int *first, pid_t pid, pid_t tid,
                                const char *name, uint32_t sort_index);
void mlprof__chrome_process_meta(mlprof__sb *out, int *first, pid_t pid, const char *name);

/* ---- statistics */
typedef struct mlprof__stats mlprof__stats;

enum { MLPROF__STAT_DURATION = 0, MLPROF__STAT_FRAME = 1, MLPROF__STAT_COUNTER = 2,
       MLPROF__STAT_MARKER = 3 };

mlprof__stats *mlprof__stats_new(void);
void mlprof__stats_free(mlprof__stats *st);
void mlprof__stats_reset(mlprof__stats *st);
/* id: the address of the handle that made the event (rows are found by it),
 * or NULL for run-time names. */
/* hw: sums of the span's counter arguments (perf.c's order), hw_mask which
 * of them it had. */
/* ts_ns: when the event happened (a span's begin), which picks its step's
 * rows (stats_steps). */
void mlprof__stats_duration(mlprof__stats *st, uint64_t ts_ns, const void *id, const char *domain,
                            const char *name, size_t name_len, int frame, uint64_t dur_ns, uint64_t self_ns,
                            const int64_t *hw, unsigned hw_mask);
void mlprof__stats_counter(mlprof__stats *st, const void *id, const char *domain, const char *name,
                           double value, uint64_t ts_ns);
void mlprof__stats_marker(mlprof__stats *st, uint64_t ts_ns, const void *id, const char *domain,
                          const char *name, size_t name_len);

/* What the report says beside the rows. */
typedef struct mlprof__stats_info {
    uint64_t dropped_events;
    uint64_t unfinished_spans;
    const char *trace_path;
    /* more to report (the memory profiler's): text appended to the table, or a
     * JSON member ("key":value) added to the object; NULL for none */
    const char *extra;
} mlprof__stats_info;

/* Appends the statistics as a table (format 0) or JSON (1), rows sorted by
 * sort_by (mlprof_sort), descending unless ascending. */
void mlprof__stats_format(const mlprof__stats *st, mlprof__sb *out, int format, int sort_by,
                          int ascending, const mlprof__stats_info *info);
/* The statistics as mlprof_dumps and stats_file give them: with the memory
 * report when memory was recorded (final: the run has ended). */
void mlprof__stats_report(const mlprof__stats *st, mlprof__sb *out, int json, int sort_by, int ascending,
                          uint64_t dropped, uint64_t unfinished, const char *trace_path, int final);

/* ---- the memory outputs (memory_sink.c) */

/* Nonzero when the memory outputs are written: memory is profiled, or was
 * since the last clear. */
int mlprof__memory_outputs_on(void);
/* The path of a memory output: value is the key's ("" none, "auto" the
 * trace's path, trace_path or the configured one when NULL, with its
 * extension replaced by suffix, ".memory.csv" or ".memory_flow.svg"), else a
 * path of its own; "" when off. Returns 1 (and "") when value is "auto" and
 * the trace is written in place (/dev/null, /dev/stdout: no file to name it
 * after, see mlprof__sink_auto_skipped), else 0. */
int mlprof__memory_output_path(const char *value, const char *suffix, const char *trace_path, char *buf,
                               size_t len);

#endif /* MLPROF_EXPORT_H */
