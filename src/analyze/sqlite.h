/*
 * sqlite.h - `mlprof export --sqlite`: a trace model written as an SQLite
 * database a user can query. libsqlite3 (libsqlite3.so.0, Debian's
 * libsqlite3-0) is loaded with dlopen when an export starts: one build runs
 * everywhere, and a machine without it gets a message naming the library.
 * MLPROF_SQLITE_LIBRARY, when set, names the library to load instead (the
 * tests point it at a file that is not there to see the message).
 *
 * Schema (times in ns, as the trace gives them; a pid or tid the trace gives
 * as a name is numbered from AN_NAMED_ID_FIRST down, its name in threads):
 *   processes(pid, name)
 *   threads(pid, tid, name)
 *   tracks(id, kind 'thread'|'counter', pid, tid, name, series)
 *   slices(id, track_id, name, category, ts_ns, dur_ns, depth, parent_id, self_ns)
 *   instants(id, track_id, name, category, ts_ns, ph, scope, flow_id)
 *   args(event_id, idx, key, value, num): of a slice or an instant (its id),
 *        idx its place among them; num when the value is a number
 *   counters(track_id, ts_ns, value)
 *   flows(flow_id, from_slice, to_slice)
 *   kernels(slice_id, kind, device, stream, correlation, launch_id,
 *           bottom_op_id, top_op_id, bottom_op, top_op, op_stack)
 *   memory_blocks(device_type, device, addr, bytes, alloc_ts_ns, free_ts_ns,
 *                 alloc_id, free_id, slice_id)
 *   meta(key, value)
 */
#ifndef MLPROF_ANALYZE_SQLITE_H
#define MLPROF_ANALYZE_SQLITE_H

#include "trace.h"

typedef struct an_sqlite_stats {
    size_t processes, threads, tracks, slices, instants, args, counters, flows, kernels, memory_blocks;
    size_t flow_ends_unbound; /* flow events on no slice: their flow row keeps a NULL end */
    size_t counter_values_skipped; /* counter arguments that are not numbers: no sample */
    long long bytes;          /* the database's size */
} an_sqlite_stats;

/* Writes t as a database at out (through a temporary file beside it, renamed
 * over it at the end: a file that exists is replaced only when it is a
 * regular file, and never when it is trace_path itself; a symbolic link is
 * followed). Computes self times
 * and GPU links in t. Returns 0, or -1 with the error in err. */
int an_sqlite_export(an_trace *t, const char *trace_path, const char *out, an_sqlite_stats *st, char *err,
                     size_t len);

#endif /* MLPROF_ANALYZE_SQLITE_H */
