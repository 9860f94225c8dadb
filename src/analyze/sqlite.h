/*
 * sqlite.h - `mlprof export --sqlite`: a trace model written as an SQLite
 * database a user can query, in the schema of src/common/sqlite_db.h (the
 * library's sqlite sink writes the same), with libsqlite3 loaded as it says.
 * Times are in ns, as the trace gives them; a pid or tid the trace gives as
 * a name is numbered from AN_NAMED_ID_FIRST down, its name in threads.
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
