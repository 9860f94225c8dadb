/*
 * sqlite_sink.c - the trace as an SQLite database while it is recorded
 * (sqlite_file): the schema of `mlprof export --sqlite` (src/common/
 * sqlite_db.h), written from the collector's events instead of a trace file.
 *
 * Events are inserted as they come into a working database beside the
 * target ("TARGET.tmp-PID-XXXXXX", the name of mlprof's other temporary
 * files), inside a transaction that each dump commits. A dump publishes a
 * complete database at the target: VACUUM INTO a temporary file beside it,
 * which then gets what only that dump shows (the tail: spans still open,
 * metadata), the kernels' launches and operators, and is renamed over the
 * target. A failed publication is said and the working database kept, so
 * that the next dump has everything.
 *
 * A full disk: SQLite rolls a transaction back when a write fails (at the
 * COMMIT, or when its cache spills during an insert), and a working
 * database may not even be created. So every row also goes into a log in
 * memory until a COMMIT has made it part of the working database: the
 * transaction is committed each time the log reaches LOG_COMMIT bytes (and
 * at every dump), which bounds it. When a write fails, the transaction is
 * rolled back (the file holds what was committed), rows go on into the log
 * alone, and the database is tried again (opened if need be, a transaction
 * begun, the log written into it) at every dump and when the log has grown
 * twice as large since the last try. The log then holds at most
 * buffer_size bytes, as the collector keeps at most that much of a trace
 * that cannot be written: rows past it are lost, counted, said on stderr
 * and in the database's meta (rows_lost, rows_lost_reason, and
 * otherData's sqlite_rows_lost).
 *
 * Spans arrive when they end, children before their parent. Each thread
 * keeps, per depth of its stack, the id set aside for the span open there:
 * a child that ends takes its parent's id (setting it aside if none is yet),
 * and the parent uses it when it ends, so that every row is written once,
 * with its parent, and a span still open at a dump is shown with the id it
 * will keep. Flow ends are bound to the innermost span around them, which
 * ends after them: they wait on their thread until it does.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/sqlite_db.h"
#include "../record/produce.h"
#include "../record/record.h"
#include "export.h"

#define PATH_LEN 4200
#define RING 8 /* spans that ended last on a thread, for flow ends that come after their span */

/* A flow end waiting for the span around it to end. */
typedef struct point {
    uint64_t flow;
    char ph;
    uint64_t ts;
} point;

typedef struct ended {
    long long id;
    uint64_t begin, end;
    uint32_t depth;
} ended;

typedef struct thread_track {
    pid_t pid, tid;
    long long id;        /* its row in tracks */
    long long *reserved; /* per depth: the id set aside for the span open there, or 0 */
    size_t nreserved;
    ended ring[RING];
    unsigned nring;
    point *pending;
    size_t npending, cap;
} thread_track;

typedef struct half {
    uint64_t id;
    long long slice;
    char ph;
    char used;
} half;

typedef struct halves {
    half *slots;
    size_t cap, count; /* cap: a power of two, or 0 */
} halves;

/* A row of a tail, kept for the published copy only. */
typedef struct tail_row {
    int which, n;
    mlprof__sqlite_val v[11];
    char *text; /* the texts of v, one block */
} tail_row;

typedef struct sq_sink {
    pid_t pid; /* the process that made the working database */
    const mlprof__sqlite_api *api;
    char why[600];   /* SQLite could not be loaded: why */
    int said_missing;
    mlprof__sqlite_db w; /* the working database, when open */
    int open;
    int live;            /* open, in a transaction that holds every row of the log */
    char *work_path;
    int no_library;      /* SQLite could not be loaded: nothing is kept for it */
    int keep;            /* the last dump was final and failed: the reset keeps the file */
    mlprof__sb log;      /* the rows since the working database's last commit (log_put) */
    uint64_t log_rows;
    size_t retry_at;     /* not live: the log's size at which the database is tried again */
    int log_full;        /* a row did not fit: none goes in until the log is written (no args without their row) */
    int dumped;          /* no event since the last dump */
    char broken[600];    /* not live after a try: why the database cannot be written */
    long long next_id, next_track;
    mlprof__map threads;   /* (pid, tid) -> thread_track */
    mlprof__map counters;  /* pid, name -> track id */
    mlprof__map processes; /* pid -> 1 */
    halves halves;         /* flow ends waiting for their other end */
    int in_tail;
    tail_row *tail;
    size_t ntail, captail;
    uint64_t kernels; /* rows in kernels: their launches are linked at each dump */
    uint64_t lost;   /* rows that could not be written since the last dump */
    char err[400];   /* the first reason */
    uint64_t lost_total; /* and in the whole trace (the database's meta) */
    char lost_why[400];
    mlprof__sb key, val; /* scratch */
} sq_sink;

/* ------------------------------------------------------------ the target */

static int sink_on(void) { return mlprof__g.cfg.sqlite_file[0] != '\0'; }

/* This process (a forked child must not touch its parent's database): the
 * library's pid, set again in a child, without a system call per event. */
static pid_t self_pid(void) { return mlprof__g.pid ? mlprof__g.pid : getpid(); }

/* Where the database goes: sqlite_file, or at "auto" the trace's path
 * (trace_path, or the configured one when NULL) with its extension (and a
 * ".gz" after it) replaced by ".db". 1 (and "") at "auto" when the trace is
 * written in place (/dev/null: no file to name it after), else 0. */
static int target_path(const char *trace_path, char *buf, size_t len)
{
    const char *value = mlprof__g.cfg.sqlite_file;
    if (strcmp(value, "auto") != 0) {
        mlprof__expand_path(value, 1, buf, len);
        return 0;
    }
    char trace[PATH_LEN];
    if (trace_path)
        snprintf(trace, sizeof trace, "%s", trace_path);
    else
        mlprof__expand_path(mlprof__g.cfg.filename, 1, trace, sizeof trace);
    return mlprof__sink_auto_path(trace, ".db", buf, len);
}

/* --------------------------------------------------------------- writing */

static void note_error(sq_sink *st, const char *fmt, const char *detail)
{
    st->lost++;
    st->lost_total++;
    if (!st->err[0])
        snprintf(st->err, sizeof st->err, fmt, detail);
    if (!st->lost_why[0])
        snprintf(st->lost_why, sizeof st->lost_why, fmt, detail);
}

/* A copy of v's texts for a tail row. */
static int keep_row(sq_sink *st, int which, const mlprof__sqlite_val *v, int n)
{
    tail_row *g = mlprof__grow(st->tail, &st->captail, st->ntail, sizeof *st->tail, 16);
    if (!g)
        return -1;
    st->tail = g;
    tail_row *r = &st->tail[st->ntail];
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        if (v[k].type == 's' && v[k].s)
            total += (v[k].len < 0 ? strlen(v[k].s) : (size_t)v[k].len) + 1;
    }
    r->text = mlprof__malloc(total ? total : 1);
    if (!r->text)
        return -1;
    r->which = which;
    r->n = n;
    char *p = r->text;
    for (int k = 0; k < n; k++) {
        r->v[k] = v[k];
        if (v[k].type == 's' && v[k].s) {
            size_t len = v[k].len < 0 ? strlen(v[k].s) : (size_t)v[k].len;
            memcpy(p, v[k].s, len);
            p[len] = '\0';
            r->v[k].s = p;
            r->v[k].len = (int)len;
            p += len + 1;
        }
    }
    st->ntail++;
    return 0;
}

static void free_tail(sq_sink *st)
{
    for (size_t i = 0; i < st->ntail; i++)
        mlprof__free(st->tail[i].text);
    st->ntail = 0;
}

#define I(x) ((mlprof__sqlite_val){'i', (long long)(x), 0, NULL, 0})
#define D(x) ((mlprof__sqlite_val){'d', 0, (x), NULL, 0})
#define T(x, n) ((mlprof__sqlite_val){'s', 0, 0, (x), (int)(n)})
#define Z(x) ((mlprof__sqlite_val){'s', 0, 0, (x), -1})
#define N ((mlprof__sqlite_val){'n', 0, 0, NULL, 0})

/* ---------------------------------------------------------------- the log */

#define LOG_COMMIT ((size_t)4 << 20) /* a live database commits when the log is this large */
#define LOG_RETRY ((size_t)64 << 10) /* the least growth of the log between two tries */

/* The most the log holds while the database cannot be written: buffer_size. */
static size_t log_cap(void)
{
    uint64_t b = mlprof__g.cfg.buffer_size;
    return b > SIZE_MAX / 4 ? SIZE_MAX / 4 : (size_t)b;
}

static size_t log_commit(void)
{
    size_t most = log_cap() / 2;
    return most < LOG_COMMIT ? most : LOG_COMMIT;
}

/* A row at the log's end: its table and count, then each value as its type
 * ('i' and 'd': 8 bytes; 's': a 4-byte length and the bytes; 'n': none).
 * 0; 1 when the database is not live and the log would pass log_cap(); -1
 * out of memory. */
static int log_put(sq_sink *st, int which, const mlprof__sqlite_val *v, int n)
{
    size_t need = 2;
    for (int k = 0; k < n; k++) {
        need++;
        if (v[k].type == 'i' || v[k].type == 'd')
            need += 8;
        else if (v[k].type == 's' && v[k].s)
            need += 4 + (v[k].len < 0 ? strlen(v[k].s) : (size_t)v[k].len);
    }
    if (!st->live && (st->log_full || st->log.len + need > log_cap())) {
        st->log_full = 1;
        return 1;
    }
    if (st->log.len + need >= st->log.cap && st->log.cap > log_cap() / 2) {
        /* no more than the cap (and a row) in memory: not twice as much */
        size_t cap = st->log.len + need + 1 > log_cap() ? st->log.len + need + 1 : log_cap();
        char *g = mlprof__realloc(st->log.data, cap);
        if (!g)
            return -1;
        st->log.data = g;
        st->log.cap = cap;
    }
    if (!mlprof__sb_reserve(&st->log, need)) {
        st->log.failed = 0; /* what it holds is whole */
        return -1;
    }
    char *p = st->log.data + st->log.len;
    *p++ = (char)which;
    *p++ = (char)n;
    for (int k = 0; k < n; k++) {
        char t = v[k].type;
        if ((t != 'i' && t != 'd' && t != 's') || (t == 's' && !v[k].s))
            t = 'n';
        *p++ = t;
        if (t == 'i') {
            memcpy(p, &v[k].i, 8);
            p += 8;
        } else if (t == 'd') {
            memcpy(p, &v[k].d, 8);
            p += 8;
        } else if (t == 's') {
            uint32_t len = (uint32_t)(v[k].len < 0 ? strlen(v[k].s) : (size_t)v[k].len);
            memcpy(p, &len, 4);
            memcpy(p + 4, v[k].s, len);
            p += 4 + len;
        }
    }
    st->log.len += need;
    st->log_rows++;
    return 0;
}

/* The row at *at in the log (moved past it): its texts point into the log. */
static void log_get(const sq_sink *st, size_t *at, int *which, mlprof__sqlite_val *v, int *n)
{
    const char *p = st->log.data + *at;
    *which = (unsigned char)*p++;
    *n = (unsigned char)*p++;
    for (int k = 0; k < *n; k++) {
        v[k] = N;
        v[k].type = *p++;
        if (v[k].type == 'i') {
            memcpy(&v[k].i, p, 8);
            p += 8;
        } else if (v[k].type == 'd') {
            memcpy(&v[k].d, p, 8);
            p += 8;
        } else if (v[k].type == 's') {
            uint32_t len;
            memcpy(&len, p, 4);
            v[k].s = p + 4;
            v[k].len = (int)len;
            p += 4 + len;
        }
    }
    *at = (size_t)(p - st->log.data);
}

static void log_clear(sq_sink *st)
{
    if (st->log.cap > 2 * log_commit() + 4096) { /* what a full disk made it hold */
        mlprof__sb_free(&st->log);
        mlprof__sb_init(&st->log);
    } else {
        mlprof__sb_reset(&st->log);
    }
    st->log_rows = 0;
}

static int abandon(sq_sink *st, const char *why);
static int checkpoint(sq_sink *st);

/* Whether a write that failed with rc took the transaction with it (SQLite
 * rolled it back), or failed for the disk's or memory's sake: the rows then
 * wait in the log. Else SQLite refused that row alone. */
static int write_failed(sq_sink *st, int rc)
{
    int primary = rc & 0xff;
    return st->api->get_autocommit(st->w.db) || primary == 13 /* SQLITE_FULL */ || primary == 10 /* IOERR */ ||
           primary == 7 /* NOMEM */;
}

/* A row the log could not take (log_put's code) while the database cannot
 * be written: lost, counted with the reason. */
static void not_kept(sq_sink *st, int code)
{
    if (code < 0) {
        note_error(st, "%s", "out of memory");
        return;
    }
    char why[800];
    snprintf(why, sizeof why, "%s; the rows waiting for it filled buffer_size (%llu bytes) in memory",
             st->broken[0] ? st->broken : "the working database cannot be written",
             (unsigned long long)log_cap());
    note_error(st, "%s", why);
}

/* A row: into the working database and the log, or the log alone while the
 * database cannot be written; or kept for the published copy when it
 * belongs to a tail (now: rows that must stay, as names). */
static void put_row(sq_sink *st, int now, int which, const mlprof__sqlite_val *v, int n)
{
    if (st->in_tail && !now) {
        if (keep_row(st, which, v, n) != 0)
            note_error(st, "%s", "out of memory");
        return;
    }
    size_t mark = st->log.len;
    int logged = log_put(st, which, v, n);
    if (!st->live) {
        if (logged != 0)
            not_kept(st, logged);
        return;
    }
    int rc = mlprof__sqlite_db_put(&st->w, which, v, n);
    if (rc != 0) {
        char why[400];
        snprintf(why, sizeof why, "%s", st->api->errmsg(st->w.db));
        if (write_failed(st, rc)) { /* the rows since the last commit, this one too, wait in the log */
            abandon(st, why);
            if (logged != 0)
                not_kept(st, logged);
        } else {
            if (logged == 0) {
                st->log.len = mark;
                st->log_rows--;
            }
            note_error(st, "%s", why);
        }
        return;
    }
    if (logged != 0) { /* the log could not take it: committed now, or lost */
        if (checkpoint(st) != 0)
            note_error(st, "%s", "out of memory");
    } else if (st->log.len >= log_commit()) {
        checkpoint(st);
    }
}

/* --------------------------------------------- the working database */

static void close_working(sq_sink *st, int remove_file)
{
    st->live = 0;
    if (st->open) {
        if (st->pid == self_pid())
            mlprof__sqlite_db_close(&st->w);
        /* else: a forked child leaves its parent's connection untouched */
        memset(&st->w, 0, sizeof st->w);
        st->open = 0;
    }
    if (st->work_path) {
        if (remove_file && st->pid == self_pid())
            unlink(st->work_path);
        mlprof__free(st->work_path);
        st->work_path = NULL;
    }
}

static void forget_all(sq_sink *st)
{
    for (size_t i = 0; i < st->threads.cap; i++) {
        thread_track *tt = st->threads.slots[i].key ? st->threads.slots[i].value : NULL;
        if (tt) {
            mlprof__free(tt->reserved);
            mlprof__free(tt->pending);
            mlprof__free(tt);
        }
    }
    mlprof__free(st->halves.slots);
    memset(&st->halves, 0, sizeof st->halves);
    mlprof__map_free(&st->threads);
    mlprof__map_free(&st->counters);
    mlprof__map_free(&st->processes);
    free_tail(st);
    st->kernels = 0;
    st->next_id = st->next_track = 1;
    st->in_tail = 0;
    log_clear(st);
    st->log_full = 0;
    st->retry_at = 0;
    st->broken[0] = '\0';
    st->lost_total = 0;
    st->lost_why[0] = '\0';
}

/* A forked child: its own database, from nothing (its parent's connection
 * and rows untouched). */
static void own(sq_sink *st)
{
    if (st->pid == self_pid())
        return;
    close_working(st, 0);
    forget_all(st);
    st->pid = self_pid();
}

/* Opens the working database beside the target: the tables and the
 * indexes, committed. 0, or -1 with the reason in why[len] (SQLite that
 * cannot be loaded: no_library set). */
static int open_working(sq_sink *st, char *why, size_t len)
{
    if (!st->api) {
        st->api = mlprof__sqlite_load(mlprof__g.cfg.sqlite_library, st->why, sizeof st->why);
        if (!st->api) {
            st->no_library = 1;
            snprintf(why, len, "%.500s", st->why);
            return -1;
        }
    }
    char target[PATH_LEN];
    target_path(NULL, target, sizeof target);
    st->work_path = mlprof__temp_name(target); /* fits NAME_MAX however long the target's name */
    if (!st->work_path) {
        snprintf(why, len, "out of memory");
        return -1;
    }
    int fd = mkostemp(st->work_path, O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "cannot create %s: %s", st->work_path, strerror(errno));
        mlprof__free(st->work_path);
        st->work_path = NULL;
        return -1;
    }
    close(fd);
    char e[512];
    /* a cache of 16 MiB: what the collector holds stays bounded while the
     * database grows on disk */
    if (mlprof__sqlite_db_open(&st->w, st->api, st->work_path, 1, 1, e, sizeof e) != 0 ||
        mlprof__sqlite_db_exec(&st->w, "PRAGMA cache_size=-16384", e, sizeof e) != 0) {
        mlprof__sqlite_db_close(&st->w);
        snprintf(why, len, "%.200s: %.300s", st->work_path, e);
        unlink(st->work_path);
        mlprof__free(st->work_path);
        st->work_path = NULL;
        return -1;
    }
    st->open = 1;
    return 0;
}

/* The database cannot be written now (why): rows wait in the log, and the
 * next try comes when it is twice as large, or at the next dump. -1. */
static int set_broken(sq_sink *st, const char *why)
{
    char copy[sizeof st->broken];
    snprintf(copy, sizeof copy, "%s", why);
    st->live = 0;
    snprintf(st->broken, sizeof st->broken, "%s", copy);
    st->retry_at = 2 * st->log.len + LOG_RETRY;
    return -1;
}

/* A write to the working database failed (why): its transaction is rolled
 * back if SQLite has not done it, so that the file holds what was committed
 * and the log everything after. -1. */
static int abandon(sq_sink *st, const char *why)
{
    char copy[sizeof st->broken];
    snprintf(copy, sizeof copy, "%.180s: %.400s", st->work_path ? st->work_path : "the working database", why);
    if (st->open && !st->api->get_autocommit(st->w.db)) {
        char ignored[200];
        mlprof__sqlite_db_exec(&st->w, "ROLLBACK", ignored, sizeof ignored);
    }
    return set_broken(st, copy);
}

/* The working database live: opened when it is not, a transaction begun,
 * the log written into it (a row SQLite refuses by itself is dropped and
 * counted). 0, or -1 with broken set and the rows still in the log. */
static int go_live(sq_sink *st)
{
    if (st->live)
        return 0;
    if (st->no_library)
        return -1;
    char why[512];
    if (!st->open) {
        if (!sink_on())
            return -1; /* no target to put it beside */
        if (open_working(st, why, sizeof why) != 0)
            return set_broken(st, why);
    }
    if (mlprof__sqlite_db_exec(&st->w, "BEGIN", why, sizeof why) != 0)
        return abandon(st, why);
    size_t at = 0, kept = 0;
    while (at < st->log.len) {
        size_t start = at;
        int which, n;
        mlprof__sqlite_val v[11];
        log_get(st, &at, &which, v, &n);
        int rc = mlprof__sqlite_db_put(&st->w, which, v, n);
        if (rc != 0) {
            snprintf(why, sizeof why, "%s", st->api->errmsg(st->w.db));
            if (write_failed(st, rc)) { /* the rows kept so far, then the rest */
                memmove(st->log.data + kept, st->log.data + start, st->log.len - start);
                st->log.len = kept + (st->log.len - start);
                return abandon(st, why);
            }
            note_error(st, "%s", why);
            st->log_rows--;
            continue;
        }
        if (kept != start)
            memmove(st->log.data + kept, st->log.data + start, at - start);
        kept += at - start;
    }
    st->log.len = kept;
    st->live = 1;
    st->log_full = 0;
    st->broken[0] = '\0';
    st->retry_at = 0;
    return st->log.len >= log_commit() ? checkpoint(st) : 0;
}

/* The transaction committed: the log is written, and emptied. 0, or -1
 * (abandoned: the rows wait in the log). */
static int commit_working(sq_sink *st)
{
    char why[512];
    if (mlprof__sqlite_db_exec(&st->w, "COMMIT", why, sizeof why) != 0)
        return abandon(st, why);
    log_clear(st);
    return 0;
}

static int begin_working(sq_sink *st)
{
    char why[512];
    if (mlprof__sqlite_db_exec(&st->w, "BEGIN", why, sizeof why) != 0)
        return abandon(st, why);
    return 0;
}

static int checkpoint(sq_sink *st)
{
    return commit_working(st) != 0 ? -1 : begin_working(st);
}

/* Whether an event can be handled: its rows go into the database, or wait
 * in the log while it cannot be written (tried again when the log has grown
 * enough). Without SQLite, the event is counted. */
static int ready(sq_sink *st)
{
    if (!sink_on())
        return 0;
    own(st);
    /* tried again as the log grows; and, when it is full, at the first event
     * after a dump, so that no row is refused once the disk has room again */
    if (!st->live && !st->no_library && (st->log.len >= st->retry_at || (st->log_full && st->dumped)))
        go_live(st);
    st->dumped = 0;
    if (st->no_library) {
        st->lost++;
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------- tracks and names */

static void process_seen(sq_sink *st, pid_t pid)
{
    int64_t key = pid;
    mlprof__map_entry *e = mlprof__map_slot(&st->processes, (const char *)&key, sizeof key);
    if (!e) {
        note_error(st, "%s", "out of memory");
        return;
    }
    if (e->value)
        return;
    e->value = (void *)1;
    mlprof__sqlite_val v[] = {I(pid), N};
    put_row(st, 1, MLPROF__SQ_PROCESS, v, 2);
}

static thread_track *thread_of(sq_sink *st, pid_t pid, pid_t tid)
{
    int64_t key[2] = {pid, tid};
    mlprof__map_entry *e = mlprof__map_slot(&st->threads, (const char *)key, sizeof key);
    if (!e) {
        note_error(st, "%s", "out of memory");
        return NULL;
    }
    if (e->value)
        return e->value;
    thread_track *tt = mlprof__calloc(1, sizeof *tt);
    if (!tt) {
        note_error(st, "%s", "out of memory");
        return NULL;
    }
    tt->pid = pid;
    tt->tid = tid;
    tt->id = st->next_track++;
    e->value = tt;
    process_seen(st, pid);
    mlprof__sqlite_val th[] = {I(pid), I(tid), N};
    put_row(st, 1, MLPROF__SQ_THREAD, th, 3);
    mlprof__sqlite_val tr[] = {I(tt->id), Z("thread"), I(pid), I(tid), N, N};
    put_row(st, 1, MLPROF__SQ_TRACK, tr, 6);
    return tt;
}

static void sq_track(void *p, const mlprof__sink_out *out, const mlprof__track_out *t)
{
    (void)out;
    sq_sink *st = p;
    if (!ready(st))
        return;
    if (t->kind == MLPROF__TRACK_PROCESS) {
        process_seen(st, t->pid);
        mlprof__sqlite_val v[] = {I(t->pid), Z(t->name)};
        put_row(st, 1, MLPROF__SQ_PROCESS, v, 2);
        return;
    }
    thread_track *tt = thread_of(st, t->pid, t->tid);
    if (!tt)
        return;
    mlprof__sqlite_val th[] = {I(t->pid), I(t->tid), Z(t->name)};
    put_row(st, 1, MLPROF__SQ_THREAD, th, 3);
    mlprof__sqlite_val tr[] = {I(tt->id), Z("thread"), I(t->pid), I(t->tid), Z(t->name), N};
    put_row(st, 1, MLPROF__SQ_TRACK, tr, 6);
}

/* ------------------------------------------------------------- arguments */

static unsigned hex4(const char *s)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v = v * 16 + (unsigned)(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0);
    }
    return v;
}

static void put_utf8(mlprof__sb *sb, unsigned c)
{
    char b[4];
    int n;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xc0 | (c >> 6));
        b[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xe0 | (c >> 12));
        b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (c >> 18));
        b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    mlprof__sb_put(sb, b, (size_t)n);
}

/* The text of a JSON string's inside (s, n bytes, still escaped) into sb. */
static void unescape(mlprof__sb *sb, const char *s, size_t n)
{
    mlprof__sb_reset(sb);
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            mlprof__sb_putc(sb, s[i]);
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': mlprof__sb_putc(sb, '\n'); break;
        case 't': mlprof__sb_putc(sb, '\t'); break;
        case 'r': mlprof__sb_putc(sb, '\r'); break;
        case 'b': mlprof__sb_putc(sb, '\b'); break;
        case 'f': mlprof__sb_putc(sb, '\f'); break;
        case 'u': {
            if (i + 4 >= n) {
                mlprof__sb_putc(sb, '?');
                i = n;
                break;
            }
            unsigned cp = hex4(s + i + 1);
            i += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < n && s[i + 1] == '\\' && s[i + 2] == 'u') {
                unsigned lo = hex4(s + i + 3);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    i += 6;
                }
            }
            if (cp >= 0xd800 && cp < 0xe000)
                cp = 0xfffd;
            put_utf8(sb, cp);
            break;
        }
        default: mlprof__sb_putc(sb, c); break;
        }
    }
    mlprof__sb_putc(sb, '\0');
    sb->len--;
}

/* What the GPU columns of a kernel take from its arguments. */
typedef struct gpu_args {
    long long device, stream, correlation;
} gpu_args;

/* A number's text as `mlprof export` writes it (an integer as such, else
 * the shortest form that reads back) into st->val; its value in *num. */
static int number(sq_sink *st, const char *s, size_t n, double *num, long long *inum, int *is_int)
{
    char tmp[80];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    char *end;
    *is_int = 0;
    if (!strpbrk(tmp, ".eEIN")) {
        errno = 0;
        long long v = strtoll(tmp, &end, 10);
        if (errno == 0 && end == tmp + n) {
            *inum = v;
            *num = (double)v;
            *is_int = 1;
            mlprof__sb_reset(&st->val);
            mlprof__sb_printf(&st->val, "%lld", v);
            return 0;
        }
    }
    double v = strtod(tmp, &end);
    if (end != tmp + n)
        return -1;
    *num = v;
    mlprof__sb_reset(&st->val);
    mlprof__sb_printf(&st->val, "%.17g", v);
    return 0;
}

static int key_is(const mlprof__sb *key, const char *const *names)
{
    for (; *names; names++) {
        if (strcmp(key->data, *names) == 0)
            return 1;
    }
    return 0;
}

/* One row of args per member of args (idx in their order), then
 * "unfinished": true when the profiler closed the span (as the JSON trace
 * has it). Fills g (when not NULL) with the GPU columns found. */
static void put_args(sq_sink *st, long long id, const char *args, size_t len, int unfinished, gpu_args *g)
{
    static const char *const dev_keys[] = {"device", NULL}, *const stream_keys[] = {"stream", NULL},
                             *const corr_keys[] = {"correlation", "correlation_id", "correlationId", NULL};
    size_t pos = 0;
    int idx = 0;
    mlprof__arg_view a;
    while (args && mlprof__args_next(args, len, &pos, &a)) {
        unescape(&st->key, a.key, a.key_len);
        double num = 0;
        long long inum = 0;
        int is_int = 0, has_num = 0;
        char c = a.value_len ? a.value[0] : 0;
        if (c == '"') {
            unescape(&st->val, a.value + 1, a.value_len >= 2 ? a.value_len - 2 : 0);
            char *end;
            const char *s = st->val.data ? st->val.data : "";
            double v = *s ? strtod(s, &end) : 0;
            if (*s && !*end && end != s) {
                num = v;
                has_num = 1;
            }
        } else if (c == '{' || c == '[' || c == 't' || c == 'f' || c == 'n') {
            mlprof__sb_reset(&st->val);
            mlprof__sb_put(&st->val, a.value, a.value_len);
        } else if (number(st, a.value, a.value_len, &num, &inum, &is_int) == 0) {
            has_num = 1;
        } else {
            mlprof__sb_reset(&st->val);
            mlprof__sb_put(&st->val, a.value, a.value_len);
        }
        if (st->key.failed || st->val.failed) {
            note_error(st, "%s", "out of memory");
            return;
        }
        const char *key = st->key.data ? st->key.data : "";
        const char *val = st->val.data ? st->val.data : "";
        mlprof__sqlite_val v[] = {I(id), I(idx), T(key, st->key.len), T(val, st->val.len),
                                  has_num ? (is_int ? I(inum) : D(num)) : N};
        put_row(st, 0, MLPROF__SQ_ARG, v, 5);
        idx++;
        if (g && has_num && num >= 0 && st->key.data) {
            long long iv = is_int ? inum : (long long)(num + 0.5);
            if (key_is(&st->key, dev_keys) && g->device < 0)
                g->device = iv;
            else if (key_is(&st->key, stream_keys) && g->stream < 0)
                g->stream = iv;
            else if (key_is(&st->key, corr_keys) && g->correlation < 0)
                g->correlation = iv;
        }
    }
    if (unfinished) {
        mlprof__sqlite_val v[] = {I(id), I(idx), Z("unfinished"), Z("true"), N};
        put_row(st, 0, MLPROF__SQ_ARG, v, 5);
    }
}

/* ------------------------------------------------------------------ flows */

/* The flow ends bound while their other end is not: an open-addressing
 * table by flow id, emptied as flows complete (linear probing, deletion by
 * shifting back), so that it holds only the flows in flight. */
static size_t half_find(const halves *h, uint64_t id)
{
    size_t mask = h->cap - 1;
    for (size_t i = mlprof__hash(&id, sizeof id) & mask;; i = (i + 1) & mask) {
        if (!h->slots[i].used || h->slots[i].id == id)
            return i;
    }
}

static int half_room(halves *h)
{
    if (h->cap && (h->count + 1) * 4 < h->cap * 3)
        return 0;
    size_t cap = h->cap ? h->cap * 2 : 64;
    half *old = h->slots;
    size_t old_cap = h->cap;
    h->slots = mlprof__calloc(cap, sizeof *h->slots);
    if (!h->slots) {
        h->slots = old;
        return -1;
    }
    h->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].used)
            h->slots[half_find(h, old[i].id)] = old[i];
    }
    mlprof__free(old);
    return 0;
}

static void half_remove(halves *h, size_t i)
{
    size_t mask = h->cap - 1;
    h->slots[i].used = 0;
    h->count--;
    for (size_t j = (i + 1) & mask; h->slots[j].used; j = (j + 1) & mask) {
        size_t home = mlprof__hash(&h->slots[j].id, sizeof h->slots[j].id) & mask;
        /* moves back when its home is not in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            h->slots[i] = h->slots[j];
            h->slots[j].used = 0;
            i = j;
        }
    }
}

/* One end of flow id is bound to slice (or -1: to none); with both, the
 * flow's row, from its start to its end (as `mlprof export` pairs them). */
static void bind_end(sq_sink *st, uint64_t id, char ph, long long slice)
{
    halves *h = &st->halves;
    if (h->cap) {
        size_t i = half_find(h, id);
        if (h->slots[i].used && h->slots[i].ph != ph) {
            long long from = ph == 's' ? slice : h->slots[i].slice, to = ph == 's' ? h->slots[i].slice : slice;
            mlprof__sqlite_val v[] = {I(id & INT64_MAX), from >= 0 ? I(from) : N, to >= 0 ? I(to) : N};
            put_row(st, 0, MLPROF__SQ_FLOW, v, 3);
            half_remove(h, i);
            return;
        }
    }
    if (half_room(h) != 0) {
        note_error(st, "%s", "out of memory");
        return;
    }
    size_t i = half_find(h, id);
    if (!h->slots[i].used)
        h->count++;
    h->slots[i] = (half){id, slice, ph, 1};
}

/* A span [begin, end] at depth ended on tt: the flow ends waiting inside it
 * are bound to it; those before it at depth 0 are inside nothing. */
static void bind_waiting(sq_sink *st, thread_track *tt, long long id, uint64_t begin, uint64_t end, uint32_t depth)
{
    size_t keep = 0;
    for (size_t i = 0; i < tt->npending; i++) {
        point pt = tt->pending[i];
        if (pt.ts >= begin && pt.ts <= end)
            bind_end(st, pt.flow, pt.ph, id);
        else if (depth == 0 && pt.ts < begin)
            bind_end(st, pt.flow, pt.ph, -1);
        else
            tt->pending[keep++] = pt;
    }
    tt->npending = keep;
    tt->ring[tt->nring % RING] = (ended){id, begin, end, depth};
    tt->nring++;
}

static void sq_flow(void *p, const mlprof__sink_out *out, const mlprof__flow_out *f)
{
    sq_sink *st = p;
    if (out->tail || !ready(st))
        return; /* a flow is written once its ends are bound, in the stream */
    thread_track *tt = thread_of(st, f->pid, f->tid);
    if (!tt)
        return;
    /* a span that ended already around it (GPU activity may come after its flow's end) */
    const ended *best = NULL;
    for (unsigned i = 0; i < RING && i < tt->nring; i++) {
        const ended *e = &tt->ring[i];
        if (e->begin <= f->ts_ns && f->ts_ns <= e->end && (!best || e->depth > best->depth))
            best = e;
    }
    if (best) {
        bind_end(st, f->id, f->ph, best->id);
        return;
    }
    point *g = mlprof__grow(tt->pending, &tt->cap, tt->npending, sizeof *g, 8);
    if (!g) {
        note_error(st, "%s", "out of memory");
        return;
    }
    tt->pending = g;
    tt->pending[tt->npending++] = (point){f->id, f->ph, f->ts_ns};
}

/* ---------------------------------------------------------------- events */

static const char *gpu_kind(const char *cat, const char *name, size_t name_len)
{
    static const char *const comm[] = {"nccl", "rccl", "allreduce", "all_reduce", "allgather", "all_gather",
                                       "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
                                       "sendrecv", NULL};
    if (!cat)
        return NULL;
    if (strcasecmp(cat, "gpu_memcpy") == 0 || strcasecmp(cat, "gpu_memset") == 0 || strcasecmp(cat, "memcpy") == 0 ||
        strcasecmp(cat, "memset") == 0)
        return "memory";
    if (strcasecmp(cat, "kernel") != 0 && strcasecmp(cat, "gpu_kernel") != 0 && strcasecmp(cat, "mtia_ccp_events") != 0)
        return NULL;
    if (name_len >= 6 && (strncasecmp(name, "Memcpy", 6) == 0 || strncasecmp(name, "Memset", 6) == 0))
        return "memory";
    char buf[512];
    size_t n = name_len < sizeof buf - 1 ? name_len : sizeof buf - 1;
    memcpy(buf, name, n);
    buf[n] = '\0';
    for (const char *const *w = comm; *w; w++) {
        if (strcasestr(buf, *w))
            return "communication";
    }
    return "compute";
}

/* The ids of a task that ends at depth on tt, and of its parent (0: none). */
static void task_ids(sq_sink *st, thread_track *tt, uint32_t depth, int tail, long long *id, long long *parent)
{
    if (tt->nreserved <= depth) {
        size_t n = depth + 8;
        long long *r = mlprof__realloc(tt->reserved, n * sizeof *r);
        if (!r) {
            *id = st->next_id++;
            *parent = 0;
            note_error(st, "%s", "out of memory");
            return;
        }
        memset(r + tt->nreserved, 0, (n - tt->nreserved) * sizeof *r);
        tt->reserved = r;
        tt->nreserved = n;
    }
    if (!tt->reserved[depth])
        tt->reserved[depth] = st->next_id++;
    *id = tt->reserved[depth];
    *parent = 0;
    if (depth > 0) {
        if (!tt->reserved[depth - 1])
            tt->reserved[depth - 1] = st->next_id++;
        *parent = tt->reserved[depth - 1];
    }
    if (!tail) { /* it ended: what was open above it ended before it */
        for (size_t k = depth; k < tt->nreserved && tt->reserved[k]; k++)
            tt->reserved[k] = 0;
    }
}

static void sq_span(void *p, const mlprof__sink_out *out, const mlprof__span_out *s)
{
    sq_sink *st = p;
    if (!ready(st))
        return;
    thread_track *tt = thread_of(st, s->pid, s->tid);
    if (!tt)
        return;
    const char *cat = s->domain ? s->domain : "";
    if (s->kind == MLPROF__OUT_FRAME) { /* an async pair, as the JSON trace has it */
        long long b = st->next_id++, e = st->next_id++;
        mlprof__sqlite_val vb[] = {I(b), I(tt->id), T(s->name, s->name_len), Z(cat), I(s->begin_ns), Z("b"), N,
                                   I(s->frame_id & INT64_MAX)};
        put_row(st, 0, MLPROF__SQ_INSTANT, vb, 8);
        put_args(st, b, s->args, s->args_len, s->unfinished, NULL);
        mlprof__sqlite_val ve[] = {I(e), I(tt->id), T(s->name, s->name_len), Z(cat), I(s->end_ns), Z("e"), N,
                                   I(s->frame_id & INT64_MAX)};
        put_row(st, 0, MLPROF__SQ_INSTANT, ve, 8);
        return;
    }
    long long id, parent;
    task_ids(st, tt, s->depth, out->tail, &id, &parent);
    mlprof__sqlite_val v[] = {I(id), I(tt->id), T(s->name, s->name_len), Z(cat), I(s->begin_ns),
                              I(s->end_ns - s->begin_ns), I(s->depth), parent ? I(parent) : N, I(s->self_ns)};
    put_row(st, 0, MLPROF__SQ_SLICE, v, 9);
    const char *kind = gpu_kind(s->domain, s->name, s->name_len);
    gpu_args g = {-1, -1, -1};
    put_args(st, id, s->args, s->args_len, s->unfinished, kind ? &g : NULL);
    if (kind) {
        if (g.stream < 0)
            g.stream = s->tid;
        mlprof__sqlite_val k[] = {I(id), Z(kind), g.device >= 0 ? I(g.device) : N, I(g.stream),
                                  g.correlation >= 0 ? I(g.correlation) : N, N, N, N, N, N, N};
        put_row(st, 0, MLPROF__SQ_KERNEL, k, 11);
        st->kernels++;
    }
    if (!out->tail)
        bind_waiting(st, tt, id, s->begin_ns, s->end_ns, s->depth);
}

static void sq_instant(void *p, const mlprof__sink_out *out, const mlprof__instant_out *e)
{
    (void)out;
    sq_sink *st = p;
    if (!ready(st))
        return;
    thread_track *tt = thread_of(st, e->pid, e->tid);
    if (!tt)
        return;
    static const char *const scopes[] = {"g", "p", "t"};
    long long id = st->next_id++;
    mlprof__sqlite_val v[] = {I(id), I(tt->id), T(e->name, e->name_len), Z(e->domain ? e->domain : ""), I(e->ts_ns),
                              Z("i"), Z(scopes[e->scope >= 0 && e->scope <= 2 ? e->scope : 1]), N};
    put_row(st, 0, MLPROF__SQ_INSTANT, v, 8);
    put_args(st, id, e->args, e->args_len, 0, NULL);
}

static void sq_counter(void *p, const mlprof__sink_out *out, const mlprof__counter_out *c)
{
    (void)out;
    sq_sink *st = p;
    if (!ready(st))
        return;
    char key[600];
    int n = snprintf(key, sizeof key, "%d\x1f%s", (int)c->pid, c->name ? c->name : "");
    size_t klen = (size_t)n < sizeof key ? (size_t)n : sizeof key - 1;
    mlprof__map_entry *e = mlprof__map_slot(&st->counters, key, klen);
    if (!e) {
        note_error(st, "%s", "out of memory");
        return;
    }
    if (!e->value) {
        long long track = st->next_track++;
        e->value = (void *)(uintptr_t)track;
        process_seen(st, c->pid);
        mlprof__sqlite_val tr[] = {I(track), Z("counter"), I(c->pid), N, Z(c->name ? c->name : ""), Z("value")};
        put_row(st, 1, MLPROF__SQ_TRACK, tr, 6);
    }
    mlprof__sqlite_val v[] = {I((uintptr_t)e->value), I(c->ts_ns), D(c->is_int ? (double)c->ivalue : c->value)};
    put_row(st, 0, MLPROF__SQ_COUNTER, v, 3);
}

static void sq_tail_begin(void *p, const mlprof__sink_out *out)
{
    (void)out;
    sq_sink *st = p;
    free_tail(st);
    st->in_tail = 1;
}

static void sq_tail_end(void *p, const mlprof__sink_out *out, const mlprof__trace_meta *m)
{
    (void)out;
    (void)m;
    sq_sink *st = p;
    st->in_tail = 0;
}

/* ------------------------------------------------------------ publishing */

/* The kernels' launches (the runtime call with their correlation id, else
 * the span their flow starts in) and the operators around those, as
 * `mlprof kernels` links them; on the published copy, from its rows. */
static const char k_link_kernels[] =
    "CREATE TEMP TABLE rt AS SELECT a.num AS corr, min(s.id) AS id FROM args a JOIN slices s ON s.id = a.event_id"
    " WHERE a.key IN ('correlation', 'correlation_id', 'correlationId') AND a.num IS NOT NULL"
    " AND lower(s.category) IN ('cuda_runtime', 'cuda_driver', 'runtime', 'driver', 'cuda_api', 'mtia_runtime')"
    " GROUP BY a.num;"
    "CREATE INDEX temp.rt_corr ON rt(corr);"
    "UPDATE kernels SET launch_id = coalesce("
    " (SELECT id FROM rt WHERE rt.corr = kernels.correlation),"
    " (SELECT rt.id FROM args a JOIN rt ON rt.corr = a.num WHERE a.event_id = kernels.slice_id"
    "  AND a.key = 'runtime_correlation'),"
    " (SELECT f.from_slice FROM flows f WHERE f.to_slice = kernels.slice_id AND f.from_slice IS NOT NULL LIMIT 1));"
    "CREATE TEMP TABLE chain AS WITH RECURSIVE up(kid, sid, lvl) AS ("
    " SELECT slice_id, launch_id, 0 FROM kernels WHERE launch_id IS NOT NULL"
    " UNION ALL SELECT up.kid, s.parent_id, up.lvl + 1 FROM up JOIN slices s ON s.id = up.sid"
    " WHERE s.parent_id IS NOT NULL)"
    " SELECT up.kid, up.sid, up.lvl, s.name, s.category FROM up JOIN slices s ON s.id = up.sid"
    " WHERE NOT (up.lvl = 0 AND lower(s.category) IN ('cuda_runtime', 'cuda_driver', 'runtime', 'driver',"
    " 'cuda_api', 'mtia_runtime'))"
    " AND (s.category = 'cpu_op' OR NOT EXISTS (SELECT 1 FROM slices WHERE category = 'cpu_op'));"
    "CREATE INDEX temp.chain_kid ON chain(kid, lvl);"
    "UPDATE kernels SET bottom_op_id = (SELECT sid FROM chain WHERE kid = slice_id ORDER BY lvl LIMIT 1),"
    " top_op_id = (SELECT sid FROM chain WHERE kid = slice_id ORDER BY lvl DESC LIMIT 1)"
    " WHERE launch_id IS NOT NULL;"
    "UPDATE kernels SET bottom_op = (SELECT name FROM slices WHERE id = bottom_op_id),"
    " top_op = (SELECT name FROM slices WHERE id = top_op_id),"
    " op_stack = (SELECT group_concat(name, ' > ') FROM (SELECT c.name FROM chain c WHERE c.kid = slice_id"
    "  AND c.category = (SELECT category FROM slices WHERE id = bottom_op_id) ORDER BY c.lvl DESC))"
    " WHERE bottom_op_id IS NOT NULL;"
    "DROP TABLE temp.chain; DROP TABLE temp.rt;";

/* The meta rows; with rows of the trace lost, how many and why, in meta and
 * in otherData (sqlite_rows_lost). */
static void put_meta(const sq_sink *st, mlprof__sqlite_db *db, const char *trace_path, const mlprof__trace_meta *m,
                     int *failed)
{
    char num[3][32];
    const char *kv[][2] = {
        {"trace", trace_path},  {"writer", "mlprof"},      {"schema_version", "1"}, {"host", m ? m->host : NULL},
        {"clock", m ? m->clock : NULL}, {"process_name", m ? m->process_name : NULL},
        {"start_ns", NULL},     {"dump_ns", NULL},         {"pid", NULL},
    };
    if (m) {
        snprintf(num[0], sizeof num[0], "%llu", (unsigned long long)m->start_ns);
        snprintf(num[1], sizeof num[1], "%llu", (unsigned long long)m->dump_ns);
        snprintf(num[2], sizeof num[2], "%d", (int)m->pid);
        kv[6][1] = num[0];
        kv[7][1] = num[1];
        kv[8][1] = num[2];
    }
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        if (!kv[i][1])
            continue;
        mlprof__sqlite_val v[] = {Z(kv[i][0]), Z(kv[i][1])};
        if (mlprof__sqlite_db_put(db, MLPROF__SQ_META, v, 2) != 0)
            *failed = 1;
    }
    if (st->lost_total) {
        char count[32];
        snprintf(count, sizeof count, "%llu", (unsigned long long)st->lost_total);
        mlprof__sqlite_val n[] = {Z("rows_lost"), Z(count)}, w[] = {Z("rows_lost_reason"), Z(st->lost_why)};
        if (mlprof__sqlite_db_put(db, MLPROF__SQ_META, n, 2) != 0 ||
            mlprof__sqlite_db_put(db, MLPROF__SQ_META, w, 2) != 0)
            *failed = 1;
    }
    if (m && m->other_data) {
        mlprof__sb sb;
        mlprof__sb_init(&sb);
        mlprof__sb_putc(&sb, '{');
        mlprof__sb_put(&sb, m->other_data, m->other_data_len);
        if (st->lost_total)
            mlprof__sb_printf(&sb, "%s\"sqlite_rows_lost\":%llu", m->other_data_len ? "," : "",
                              (unsigned long long)st->lost_total);
        mlprof__sb_putc(&sb, '}');
        mlprof__sqlite_val v[] = {Z("other_data"), T(sb.data ? sb.data : "{}", sb.data ? sb.len : 2)};
        if (sb.failed || mlprof__sqlite_db_put(db, MLPROF__SQ_META, v, 2) != 0)
            *failed = 1;
        mlprof__sb_free(&sb);
    }
}

/* The self times of the tail's spans (still open: the collector knows
 * their children only as they end), from their children's rows on the copy:
 * their duration less their children's. */
static int tail_self_times(sq_sink *st, mlprof__sqlite_db *c, char *why, size_t len)
{
    const mlprof__sqlite_api *S = st->api;
    sqlite3_stmt *u = NULL;
    if (S->prepare_v2(c->db,
                      "UPDATE slices SET self_ns = max(0, dur_ns - coalesce((SELECT sum(k.dur_ns) FROM slices k"
                      " WHERE k.parent_id = slices.id), 0)) WHERE id = ?",
                      -1, &u, NULL) != MLPROF__SQLITE_OK) {
        snprintf(why, len, "%s", S->errmsg(c->db));
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < st->ntail; i++) {
        if (st->tail[i].which != MLPROF__SQ_SLICE)
            continue;
        S->bind_int64(u, 1, st->tail[i].v[0].i);
        if (S->step(u) != MLPROF__SQLITE_DONE) {
            snprintf(why, len, "%s", S->errmsg(c->db));
            rc = -1;
        }
        S->reset(u);
    }
    S->finalize(u);
    return rc;
}

/* The working database, committed, copied to a temporary file beside
 * target, completed there (the tail, the meta, the kernels) and renamed
 * over target. MLPROF_OK or an error (message set). */
static int publish(sq_sink *st, const char *target, const mlprof__sink_dump *d)
{
    const mlprof__sqlite_api *S = st->api;
    mlprof__out o;
    int rc = mlprof__out_open(&o, target);
    if (rc != MLPROF_OK)
        return rc;
    if (!o.tmp) {
        mlprof__out_commit(&o, 0);
        return mlprof__fail(MLPROF_EIO, "sqlite_file %s: not a regular file; a database is written only to one",
                            target);
    }
    char why[512] = "";
    sqlite3_stmt *vac = NULL;
    int ok = S->prepare_v2(st->w.db, "VACUUM INTO ?", -1, &vac, NULL) == MLPROF__SQLITE_OK;
    if (ok) {
        S->bind_text(vac, 1, o.tmp, -1, NULL);
        ok = S->step(vac) == MLPROF__SQLITE_DONE;
    }
    if (!ok)
        snprintf(why, sizeof why, "VACUUM INTO: %s", S->errmsg(st->w.db));
    if (vac)
        S->finalize(vac);
    mlprof__sqlite_db c;
    if (ok && mlprof__sqlite_db_open(&c, S, o.tmp, 0, 0, why, sizeof why) != 0)
        ok = 0;
    /* the copy gets only the tail and the kernels' links: a small cache */
    if (ok && mlprof__sqlite_db_exec(&c, "PRAGMA cache_size=-4096", why, sizeof why) != 0) {
        mlprof__sqlite_db_close(&c);
        ok = 0;
    }
    if (ok) {
        int failed = mlprof__sqlite_db_exec(&c, "BEGIN", why, sizeof why) != 0;
        for (size_t i = 0; !failed && i < st->ntail; i++) {
            if (mlprof__sqlite_db_put(&c, st->tail[i].which, st->tail[i].v, st->tail[i].n) != 0) {
                snprintf(why, sizeof why, "%s", S->errmsg(c.db));
                failed = 1;
            }
        }
        if (!failed)
            failed = tail_self_times(st, &c, why, sizeof why) != 0;
        if (!failed) {
            put_meta(st, &c, d->trace_path, d->meta, &failed);
            if (failed)
                snprintf(why, sizeof why, "meta: %s", S->errmsg(c.db));
        }
        if (!failed && st->kernels)
            failed = mlprof__sqlite_db_exec(&c, k_link_kernels, why, sizeof why) != 0;
        if (!failed)
            failed = mlprof__sqlite_db_exec(&c, "COMMIT", why, sizeof why) != 0;
        if (mlprof__sqlite_db_close(&c) != 0 && !failed) {
            snprintf(why, sizeof why, "cannot close it");
            failed = 1;
        }
        ok = !failed;
    }
    if (!ok) {
        mlprof__fail(MLPROF_EIO, "sqlite_file %s: cannot write %s: %s", target, o.tmp, why);
        mlprof__out_commit(&o, 0);
        return MLPROF_EIO;
    }
    return mlprof__out_commit(&o, 1);
}

static int dump_once(sq_sink *st, const mlprof__sink_dump *d);

static int sq_write(void *p, const mlprof__sink_dump *d)
{
    sq_sink *st = p;
    int rc = dump_once(st, d);
    st->dumped = 1;
    return rc;
}

static int dump_once(sq_sink *st, const mlprof__sink_dump *d)
{
    if (!sink_on()) {
        close_working(st, 1);
        forget_all(st);
        return MLPROF_OK;
    }
    own(st);
    go_live(st); /* a dump tries again */
    if (st->no_library) {
        if (!st->said_missing)
            mlprof__log(MLPROF_LOG_ERROR, "sqlite_file: %s; no database written", st->why);
        st->said_missing = 1;
        st->lost = 0; /* all of them: what the message says */
        log_clear(st);
        return mlprof__fail(MLPROF_EUNSUPPORTED, "sqlite_file: %s", st->why);
    }
    if (d->finished) { /* flow ends still waiting are inside no span */
        for (size_t i = 0; i < st->threads.cap; i++) {
            thread_track *tt = st->threads.slots[i].key ? st->threads.slots[i].value : NULL;
            for (size_t k = 0; tt && k < tt->npending; k++)
                bind_end(st, tt->pending[k].flow, tt->pending[k].ph, -1);
            if (tt)
                tt->npending = 0;
        }
    }
    char target[PATH_LEN];
    if (target_path(d->trace_path, target, sizeof target)) {
        /* a dump to /dev/null (mlprof_dump_to): no database this time; the
         * rows wait in the working one (or the log) for the next dump, or go
         * with the trace when it ends */
        mlprof__sink_note_skipped("sqlite_file", d->trace_path);
        free_tail(st);
        if (d->finished) {
            close_working(st, 1);
            forget_all(st);
        }
        return MLPROF_OK;
    }
    int rc = mlprof__sink_path_check(d, "sqlite_file", mlprof__g.cfg.sqlite_file, target);
    if (rc != MLPROF_OK) {
        /* said already; the rows are kept as for a database that cannot be
         * written: for the next dump, or (finished) left in the working
         * database, which the reset names */
        free_tail(st);
        st->keep = d->finished;
        return rc;
    }
    int written = 0;
    if (!st->live || commit_working(st) != 0) {
        /* the database cannot be written (a full disk): the rows since its
         * last commit wait in the log */
        rc = mlprof__fail(MLPROF_EIO, "sqlite_file %s: %s; %llu rows wait in memory", target, st->broken,
                          (unsigned long long)st->log_rows);
    } else {
        rc = publish(st, target, d);
        written = rc == MLPROF_OK;
        if (begin_working(st) != 0 && rc == MLPROF_OK)
            rc = mlprof__fail(MLPROF_EIO, "sqlite_file %s: %s", target, st->broken);
    }
    if (rc != MLPROF_OK)
        mlprof__log(MLPROF_LOG_ERROR, "%s (the events are kept%s)", mlprof_last_error(),
                    d->finished ? "" : " for the next dump");
    free_tail(st);
    /* rows lost since the last dump, and at the end all of the trace's */
    uint64_t lost = d->finished ? st->lost_total : st->lost;
    if (lost) {
        const char *why = d->finished ? st->lost_why : st->err;
        mlprof__log(MLPROF_LOG_ERROR, "sqlite_file %s: %llu rows could not be written: %s", target,
                    (unsigned long long)lost, why);
        int lrc = mlprof__fail(MLPROF_EIO, "sqlite_file %s: %llu rows could not be written: %s", target,
                               (unsigned long long)lost, why);
        if (rc == MLPROF_OK)
            rc = lrc;
    }
    st->lost = 0;
    st->err[0] = '\0';
    if (d->finished && written) {
        close_working(st, 1);
        forget_all(st);
    }
    /* a finished trace is reset next, written or not: its working database
     * is then left where it is, for the user to take */
    st->keep = d->finished && !written;
    return rc;
}

/* Every failure of sq_write is said on stderr there; the dump's error names it. */
static int sq_dump(void *p, const mlprof__sink_dump *d)
{
    return mlprof__sink_failed(d, "sqlite_file", sq_write(p, d), 1);
}

/* ------------------------------------------------------------- lifecycle */

static void *sq_create(void)
{
    sq_sink *st = mlprof__calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->pid = self_pid();
    st->next_id = st->next_track = 1;
    mlprof__map_init(&st->threads);
    mlprof__map_init(&st->counters);
    mlprof__map_init(&st->processes);
    mlprof__sb_init(&st->key);
    mlprof__sb_init(&st->val);
    mlprof__sb_init(&st->log);
    return st;
}

static void sq_reset(void *p)
{
    sq_sink *st = p;
    if (st->keep && st->pid == self_pid()) {
        /* the rows that wait in the log: into the file left, or lost */
        if (go_live(st) == 0)
            commit_working(st);
        if (st->log_rows)
            mlprof__log(MLPROF_LOG_ERROR, "sqlite_file: %llu rows of the trace could not be written and are lost: %s",
                        (unsigned long long)st->log_rows,
                        st->broken[0] ? st->broken : "the working database cannot be written");
        if (st->work_path)
            mlprof__log(MLPROF_LOG_ERROR, "sqlite_file: the events of the trace %sare kept in %s (an SQLite database)",
                        st->log_rows ? "written before those " : "", st->work_path);
    }
    close_working(st, !st->keep);
    st->keep = 0;
    forget_all(st);
    st->lost = 0;
    st->err[0] = '\0';
}

static void sq_destroy(void *p)
{
    sq_sink *st = p;
    if (!st)
        return;
    sq_reset(st);
    mlprof__free(st->tail);
    mlprof__sb_free(&st->log);
    mlprof__sb_free(&st->key);
    mlprof__sb_free(&st->val);
    mlprof__free(st);
}

const mlprof__sink_ops mlprof__sqlite_sink = {
    .name = "sqlite",
    .create = sq_create,
    .destroy = sq_destroy,
    .reset = sq_reset,
    .span = sq_span,
    .instant = sq_instant,
    .counter = sq_counter,
    .flow = sq_flow,
    .track = sq_track,
    .tail_begin = sq_tail_begin,
    .tail_end = sq_tail_end,
    .dump = sq_dump,
};
