/*
 * sqlite_db.h - the SQLite database mlprof writes, shared by `mlprof export
 * --sqlite` (src/analyze/sqlite.c, from a trace file) and the library's
 * sqlite sink (src/export/sqlite_sink.c, from the events as they are
 * recorded): one schema, one set of prepared inserts, one loader.
 *
 * libsqlite3 (libsqlite3.so.0, Debian's libsqlite3-0) is loaded with dlopen
 * the first time a database is wanted, never linked: one build runs
 * everywhere, a program that does not ask for a database never loads it, and
 * a machine without it gets a message that names the library.
 * The library's sqlite_library key (MLPROF_SQLITE_LIBRARY in the
 * environment), and MLPROF_SQLITE_LIBRARY for the command, name another file
 * to load (the tests name one that is not there to see the message).
 *
 * Schema (times in ns):
 *   processes(pid, name)
 *   threads(pid, tid, name)
 *   tracks(id, kind 'thread'|'counter', pid, tid, name, series)
 *   slices(id, track_id, name, category, ts_ns, dur_ns, depth, parent_id, self_ns)
 *   instants(id, track_id, name, category, ts_ns, ph, scope, async_id)
 *   args(event_id, idx, key, value, num): of a slice or an instant (its id),
 *        idx its place among them; num when the value is a number
 *   counters(track_id, ts_ns, value)
 *   flows(flow_id, from_slice, to_slice)
 *   kernels(slice_id, kind, device, stream, correlation, launch_id,
 *           bottom_op_id, top_op_id, bottom_op, top_op, op_stack)
 *   memory_blocks(device_type, device, addr, bytes, alloc_ts_ns, free_ts_ns,
 *                 alloc_id, free_id, slice_id)
 *   meta(key, value)
 * Slices and instants share one space of ids (args.event_id is either).
 *
 * Apart from loading, nothing here is thread-safe by itself: the library
 * calls it under its control lock, the command from its one thread.
 */
#ifndef MLPROF_SQLITE_DB_H
#define MLPROF_SQLITE_DB_H

#include <stddef.h>

#define MLPROF__SQLITE_OK 0
#define MLPROF__SQLITE_ROW 100
#define MLPROF__SQLITE_DONE 101

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

/* The functions of libsqlite3 that mlprof calls (their C API, declared here
 * so that nothing of SQLite is needed to build). */
typedef struct mlprof__sqlite_api {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close)(sqlite3 *);
    int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_int64)(sqlite3_stmt *, int, long long);
    int (*bind_double)(sqlite3_stmt *, int, double);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*bind_null)(sqlite3_stmt *, int);
    int (*step)(sqlite3_stmt *);
    int (*reset)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    const char *(*errmsg)(sqlite3 *);
    long long (*column_int64)(sqlite3_stmt *, int);
    int (*get_autocommit)(sqlite3 *); /* nonzero: no transaction is open (one SQLite rolled back, too) */
} mlprof__sqlite_api;

/* The library's functions, loaded once a process (the first call chooses
 * the file: library, else MLPROF_SQLITE_LIBRARY, else libsqlite3.so.0);
 * NULL when it cannot be loaded, with why (naming the file and Debian's
 * package) in why[len]. Thread-safe. */
const mlprof__sqlite_api *mlprof__sqlite_load(const char *library, char *why, size_t len);

/* The statements, one a table, that mlprof__sqlite_db prepares. */
enum {
    MLPROF__SQ_META, MLPROF__SQ_PROCESS, MLPROF__SQ_THREAD, MLPROF__SQ_TRACK, MLPROF__SQ_SLICE,
    MLPROF__SQ_INSTANT, MLPROF__SQ_ARG, MLPROF__SQ_COUNTER, MLPROF__SQ_FLOW, MLPROF__SQ_KERNEL,
    MLPROF__SQ_MEMORY, MLPROF__SQ_N
};
/* INSERT INTO <table> VALUES(?,...), by MLPROF__SQ_*; processes, threads and
 * tracks (which a sink may be told again, with a new name) replace their row. */
extern const char *const mlprof__sqlite_insert[MLPROF__SQ_N];
/* The CREATE TABLE statements, and the indexes on time and name. */
extern const char mlprof__sqlite_schema[];
extern const char mlprof__sqlite_indexes[];

/* An open database with its inserts prepared. */
typedef struct mlprof__sqlite_db {
    const mlprof__sqlite_api *api;
    sqlite3 *db;
    sqlite3_stmt *st[MLPROF__SQ_N];
} mlprof__sqlite_db;

/* Opens (creating) the database file at path for a single writer: no
 * journal on disk, no sync (a database is published whole by a rename, so a
 * file being written is never the one read), the tables created when create
 * is set, the indexes too when indexes is set, and the inserts prepared.
 * Returns 0, or -1 with the reason in err[len] (the database closed). */
int mlprof__sqlite_db_open(mlprof__sqlite_db *d, const mlprof__sqlite_api *api, const char *path, int create,
                           int indexes, char *err, size_t len);
/* Runs sql; 0, or -1 with "doing: SQLite's message" in err[len]. */
int mlprof__sqlite_db_exec(mlprof__sqlite_db *d, const char *sql, char *err, size_t len);
/* Finalizes the statements and closes; 0, or -1 when SQLite could not close. */
int mlprof__sqlite_db_close(mlprof__sqlite_db *d);

/* One value for a row: 'i' integer, 'd' real, 's' text (s, len bytes; len
 * -1: up to its NUL; s NULL: null), 'n' null. */
typedef struct mlprof__sqlite_val {
    char type;
    long long i;
    double d;
    const char *s;
    int len;
} mlprof__sqlite_val;

/* Binds n values to statement which, steps and resets it. 0, or the SQLite
 * result code of the step. */
int mlprof__sqlite_db_put(mlprof__sqlite_db *d, int which, const mlprof__sqlite_val *v, int n);

#endif /* MLPROF_SQLITE_DB_H */
