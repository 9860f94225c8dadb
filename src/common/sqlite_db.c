/*
 * sqlite_db.c - libsqlite3 loaded with dlopen, and the schema and inserts of
 * mlprof's databases (sqlite_db.h), for the export command and the sink alike.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_db.h"

#define SQLITE_OPEN_READWRITE 0x2
#define SQLITE_OPEN_CREATE 0x4
#define SQLITE_OPEN_NOMUTEX 0x8000

static struct {
    pthread_mutex_t lock;
    int tried;
    void *lib;
    mlprof__sqlite_api api;
    char why[600];
} L = {PTHREAD_MUTEX_INITIALIZER};

static void load(const char *name)
{
    L.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!L.lib) {
        const char *e = dlerror();
        snprintf(L.why, sizeof L.why, "SQLite (%s, Debian's libsqlite3-0) cannot be loaded: %s", name,
                 e ? e : "not found");
        return;
    }
    mlprof__sqlite_api *a = &L.api;
    struct {
        void **fn;
        const char *sym;
    } const want[] = {
        {(void **)&a->open_v2, "sqlite3_open_v2"},       {(void **)&a->close, "sqlite3_close"},
        {(void **)&a->exec, "sqlite3_exec"},             {(void **)&a->prepare_v2, "sqlite3_prepare_v2"},
        {(void **)&a->bind_int64, "sqlite3_bind_int64"}, {(void **)&a->bind_double, "sqlite3_bind_double"},
        {(void **)&a->bind_text, "sqlite3_bind_text"},   {(void **)&a->bind_null, "sqlite3_bind_null"},
        {(void **)&a->step, "sqlite3_step"},             {(void **)&a->reset, "sqlite3_reset"},
        {(void **)&a->finalize, "sqlite3_finalize"},     {(void **)&a->errmsg, "sqlite3_errmsg"},
        {(void **)&a->column_int64, "sqlite3_column_int64"}, {(void **)&a->get_autocommit, "sqlite3_get_autocommit"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        *want[i].fn = dlsym(L.lib, want[i].sym);
        if (!*want[i].fn) {
            snprintf(L.why, sizeof L.why, "SQLite (%s, Debian's libsqlite3-0) cannot be loaded: it lacks %s", name,
                     want[i].sym);
            dlclose(L.lib);
            L.lib = NULL;
            return;
        }
    }
}

const mlprof__sqlite_api *mlprof__sqlite_load(const char *library, char *why, size_t len)
{
    pthread_mutex_lock(&L.lock);
    if (!L.tried) {
        L.tried = 1;
        const char *env = getenv("MLPROF_SQLITE_LIBRARY");
        load(library && *library ? library : env && *env ? env : "libsqlite3.so.0");
    }
    void *lib = L.lib;
    if (!lib && why && len)
        snprintf(why, len, "%s", L.why);
    pthread_mutex_unlock(&L.lock);
    return lib ? &L.api : NULL;
}

const char mlprof__sqlite_schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE processes(pid INTEGER PRIMARY KEY, name TEXT);"
    "CREATE TABLE threads(pid INTEGER, tid INTEGER, name TEXT, PRIMARY KEY(pid, tid));"
    "CREATE TABLE tracks(id INTEGER PRIMARY KEY, kind TEXT, pid INTEGER, tid INTEGER, name TEXT, series TEXT);"
    "CREATE TABLE slices(id INTEGER PRIMARY KEY, track_id INTEGER, name TEXT, category TEXT, ts_ns INTEGER,"
    " dur_ns INTEGER, depth INTEGER, parent_id INTEGER, self_ns INTEGER);"
    "CREATE TABLE instants(id INTEGER PRIMARY KEY, track_id INTEGER, name TEXT, category TEXT, ts_ns INTEGER,"
    " ph TEXT, scope TEXT, async_id INTEGER);"
    "CREATE TABLE args(event_id INTEGER, idx INTEGER, key TEXT, value TEXT, num REAL,"
    " PRIMARY KEY(event_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE counters(track_id INTEGER, ts_ns INTEGER, value REAL);"
    "CREATE TABLE flows(flow_id INTEGER, from_slice INTEGER, to_slice INTEGER);"
    "CREATE TABLE kernels(slice_id INTEGER PRIMARY KEY, kind TEXT, device INTEGER, stream INTEGER,"
    " correlation INTEGER, launch_id INTEGER, bottom_op_id INTEGER, top_op_id INTEGER, bottom_op TEXT,"
    " top_op TEXT, op_stack TEXT);"
    "CREATE TABLE memory_blocks(device_type INTEGER, device INTEGER, addr INTEGER, bytes INTEGER,"
    " alloc_ts_ns INTEGER, free_ts_ns INTEGER, alloc_id INTEGER, free_id INTEGER, slice_id INTEGER);";

const char mlprof__sqlite_indexes[] = "CREATE INDEX slices_ts ON slices(ts_ns);"
                                      "CREATE INDEX slices_name ON slices(name);"
                                      "CREATE INDEX slices_track ON slices(track_id, ts_ns);"
                                      "CREATE INDEX slices_parent ON slices(parent_id);"
                                      "CREATE INDEX instants_ts ON instants(ts_ns);"
                                      "CREATE INDEX instants_name ON instants(name);"
                                      "CREATE INDEX counters_track ON counters(track_id, ts_ns);"
                                      "CREATE INDEX counters_ts ON counters(ts_ns);"
                                      "CREATE INDEX tracks_name ON tracks(name);"
                                      "CREATE INDEX flows_from ON flows(from_slice);"
                                      "CREATE INDEX flows_to ON flows(to_slice);"
                                      "CREATE INDEX kernels_bottom ON kernels(bottom_op);"
                                      "CREATE INDEX memory_alloc ON memory_blocks(alloc_ts_ns);";

const char *const mlprof__sqlite_insert[MLPROF__SQ_N] = {
    "INSERT OR REPLACE INTO meta VALUES(?,?)",
    "INSERT OR REPLACE INTO processes VALUES(?,?)",
    "INSERT OR REPLACE INTO threads VALUES(?,?,?)",
    "INSERT OR REPLACE INTO tracks VALUES(?,?,?,?,?,?)",
    "INSERT INTO slices VALUES(?,?,?,?,?,?,?,?,?)",
    "INSERT INTO instants VALUES(?,?,?,?,?,?,?,?)",
    "INSERT INTO args VALUES(?,?,?,?,?)",
    "INSERT INTO counters VALUES(?,?,?)",
    "INSERT INTO flows VALUES(?,?,?)",
    "INSERT INTO kernels VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO memory_blocks VALUES(?,?,?,?,?,?,?,?,?)",
};

static int say(mlprof__sqlite_db *d, const char *doing, char *err, size_t len)
{
    if (err && len)
        snprintf(err, len, "%s: %s", doing, d->db ? d->api->errmsg(d->db) : "out of memory");
    return -1;
}

int mlprof__sqlite_db_exec(mlprof__sqlite_db *d, const char *sql, char *err, size_t len)
{
    if (d->api->exec(d->db, sql, NULL, NULL, NULL) != MLPROF__SQLITE_OK) {
        /* the start of a long script (the schema), so that SQLite's reason shows */
        char doing[64];
        snprintf(doing, sizeof doing, "%.48s%s", sql, strlen(sql) > 48 ? "..." : "");
        return say(d, doing, err, len);
    }
    return 0;
}

int mlprof__sqlite_db_open(mlprof__sqlite_db *d, const mlprof__sqlite_api *api, const char *path, int create,
                           int indexes, char *err, size_t len)
{
    memset(d, 0, sizeof *d);
    d->api = api;
    int rc = 0;
    if (api->open_v2(path, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
        MLPROF__SQLITE_OK)
        rc = say(d, "cannot open", err, len);
    if (rc == 0)
        rc = mlprof__sqlite_db_exec(d,
                                    "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF;"
                                    " PRAGMA locking_mode=EXCLUSIVE; PRAGMA cache_size=-65536;"
                                    " PRAGMA temp_store=MEMORY;",
                                    err, len);
    if (rc == 0 && create)
        rc = mlprof__sqlite_db_exec(d, mlprof__sqlite_schema, err, len);
    if (rc == 0 && create && indexes)
        rc = mlprof__sqlite_db_exec(d, mlprof__sqlite_indexes, err, len);
    for (int i = 0; rc == 0 && i < MLPROF__SQ_N; i++) {
        if (api->prepare_v2(d->db, mlprof__sqlite_insert[i], -1, &d->st[i], NULL) != MLPROF__SQLITE_OK)
            rc = say(d, mlprof__sqlite_insert[i], err, len);
    }
    if (rc != 0)
        mlprof__sqlite_db_close(d);
    return rc;
}

int mlprof__sqlite_db_close(mlprof__sqlite_db *d)
{
    if (!d->api)
        return 0;
    for (int i = 0; i < MLPROF__SQ_N; i++) {
        if (d->st[i])
            d->api->finalize(d->st[i]);
        d->st[i] = NULL;
    }
    int rc = 0;
    if (d->db && d->api->close(d->db) != MLPROF__SQLITE_OK)
        rc = -1;
    d->db = NULL;
    return rc;
}

int mlprof__sqlite_db_put(mlprof__sqlite_db *d, int which, const mlprof__sqlite_val *v, int n)
{
    const mlprof__sqlite_api *S = d->api;
    sqlite3_stmt *s = d->st[which];
    for (int k = 0; k < n; k++) {
        int col = k + 1;
        switch (v[k].type) {
        case 'i':
            S->bind_int64(s, col, v[k].i);
            break;
        case 'd':
            S->bind_double(s, col, v[k].d);
            break;
        case 's':
            if (v[k].s)
                S->bind_text(s, col, v[k].s, v[k].len, NULL);
            else
                S->bind_null(s, col);
            break;
        default:
            S->bind_null(s, col);
            break;
        }
    }
    int rc = S->step(s);
    S->reset(s);
    return rc == MLPROF__SQLITE_DONE ? 0 : rc;
}
