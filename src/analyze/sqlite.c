/*
 * sqlite.c - the trace model written as an SQLite database. The schema, the
 * prepared inserts and the loading of libsqlite3 (dlopen: nothing of SQLite
 * is needed to build) are src/common/sqlite_db.c's, shared with the
 * library's sqlite sink. Everything is inserted in one transaction into a
 * fresh file (no journal on disk, no sync: a failed export leaves only a
 * temporary file, which is removed), and the indexes are built at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/sqlite_db.h"
#include "gpu.h"
#include "sqlite.h"

#define SQLITE_DONE MLPROF__SQLITE_DONE

/* libsqlite3's functions, once loaded */
static const mlprof__sqlite_api *S;

typedef struct ex {
    an_trace *t;
    mlprof__sqlite_db q;
    char *err;
    size_t errlen;
    const char *what; /* the file being written, for errors */
    int failed;
    /* thread tracks: (pid, tid) sorted, their id is their index + 1 */
    int64_t (*threads)[2];
    size_t nthreads, nprocesses;
    size_t next_track;
    size_t *sorted; /* the durations by track, start */
    size_t nsorted;
} ex;

static void fail(ex *x, const char *fmt, const char *detail)
{
    if (x->failed)
        return;
    x->failed = 1;
    char msg[400];
    snprintf(msg, sizeof msg, fmt, detail);
    snprintf(x->err, x->errlen, "%s: %s", x->what, msg);
}

static void db_fail(ex *x, const char *doing)
{
    if (x->failed)
        return;
    x->failed = 1;
    snprintf(x->err, x->errlen, "%s: %s: %s", x->what, doing, S->errmsg(x->q.db));
}

/* Binds values by their form: 'i' int64, 'd' double, 's' text (NULL: null),
 * 'n' null, then steps and resets the statement. */
static void row(ex *x, int which, const char *form, ...)
{
    if (x->failed)
        return;
    sqlite3_stmt *s = x->q.st[which];
    va_list ap;
    va_start(ap, form);
    for (int k = 0; form[k]; k++) {
        int col = k + 1;
        switch (form[k]) {
        case 'i':
            S->bind_int64(s, col, va_arg(ap, long long));
            break;
        case 'd':
            S->bind_double(s, col, va_arg(ap, double));
            break;
        case 's': {
            const char *v = va_arg(ap, const char *);
            if (v)
                S->bind_text(s, col, v, -1, NULL);
            else
                S->bind_null(s, col);
            break;
        }
        default:
            S->bind_null(s, col);
            break;
        }
    }
    va_end(ap);
    if (S->step(s) != SQLITE_DONE)
        db_fail(x, mlprof__sqlite_insert[which]);
    S->reset(s);
}

/* an optional integer: null when negative */
static void row_opt(ex *x, int which, int col, long long v)
{
    if (v < 0)
        S->bind_null(x->q.st[which], col);
    else
        S->bind_int64(x->q.st[which], col, v);
}

static int pair_cmp(const void *pa, const void *pb)
{
    const int64_t *a = pa, *b = pb;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : a[1] > b[1];
}

static long long thread_track(const ex *x, int64_t pid, int64_t tid)
{
    size_t lo = 0, hi = x->nthreads;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int64_t key[2] = {pid, tid};
        int c = pair_cmp(x->threads[mid], key);
        if (c == 0)
            return (long long)mid + 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int has_thread_track(char ph)
{
    return ph == 'X' || ph == 'i' || ph == 'n' || ph == 'b' || ph == 'e' || ph == 's' || ph == 't' || ph == 'f';
}

static void put_processes_threads(ex *x)
{
    an_trace *t = x->t;
    size_t cap = t->nev + t->nnames + 1;
    x->threads = mlprof__malloc(cap * sizeof *x->threads);
    int64_t *pids = mlprof__malloc(cap * sizeof *pids);
    if (!x->threads || !pids) {
        mlprof__free(pids);
        fail(x, "%s", "out of memory");
        return;
    }
    size_t n = 0, np = 0;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        pids[np++] = e->pid;
        if (has_thread_track(e->ph)) {
            x->threads[n][0] = e->pid;
            x->threads[n++][1] = e->tid;
        }
    }
    for (size_t i = 0; i < t->nnames; i++) {
        pids[np++] = t->names[i].pid;
        if (t->names[i].tid != AN_PROCESS_TID) {
            x->threads[n][0] = t->names[i].pid;
            x->threads[n++][1] = t->names[i].tid;
        }
    }
    mlprof__sort(x->threads, n, sizeof *x->threads, pair_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u == 0 || pair_cmp(x->threads[u - 1], x->threads[i]) != 0) {
            x->threads[u][0] = x->threads[i][0];
            x->threads[u++][1] = x->threads[i][1];
        }
    }
    x->nthreads = u;
    /* processes: the pids, sorted and unique */
    int64_t(*pp)[2] = mlprof__malloc((np ? np : 1) * sizeof *pp);
    if (!pp) {
        mlprof__free(pids);
        fail(x, "%s", "out of memory");
        return;
    }
    for (size_t i = 0; i < np; i++) {
        pp[i][0] = pids[i];
        pp[i][1] = 0;
    }
    mlprof__free(pids);
    mlprof__sort(pp, np, sizeof *pp, pair_cmp);
    for (size_t i = 0; i < np; i++) {
        if (i && pp[i][0] == pp[i - 1][0])
            continue;
        row(x, MLPROF__SQ_PROCESS, "is", (long long)pp[i][0], an_process_name(t, pp[i][0]));
        x->nprocesses++;
    }
    mlprof__free(pp);
    for (size_t i = 0; i < x->nthreads; i++) {
        const char *name = an_thread_name(t, x->threads[i][0], x->threads[i][1]);
        row(x, MLPROF__SQ_THREAD, "iis", (long long)x->threads[i][0], (long long)x->threads[i][1], name);
        row(x, MLPROF__SQ_TRACK, "isiisn", (long long)i + 1, "thread", (long long)x->threads[i][0],
            (long long)x->threads[i][1], name);
    }
    x->next_track = x->nthreads + 1;
}

/* The arguments of event id, in the trace's order (idx): keyed by the
 * event, so that an event's arguments are found without another index. */
static void put_args(ex *x, size_t id, const an_event *e)
{
    char buf[64];
    for (uint32_t k = 0; k < e->nargs && !x->failed; k++) {
        const an_arg *a = &x->t->args[e->args + k];
        sqlite3_stmt *s = x->q.st[MLPROF__SQ_ARG];
        S->bind_int64(s, 1, (long long)id);
        S->bind_int64(s, 2, (long long)k);
        S->bind_text(s, 3, a->key, -1, NULL);
        if (a->type == AN_NUM) {
            if (a->is_int)
                snprintf(buf, sizeof buf, "%lld", (long long)a->inum);
            else
                snprintf(buf, sizeof buf, "%.17g", a->num);
            S->bind_text(s, 4, buf, -1, NULL);
            if (a->is_int)
                S->bind_int64(s, 5, (long long)a->inum);
            else
                S->bind_double(s, 5, a->num);
        } else {
            S->bind_text(s, 4, a->str, -1, NULL);
            char *end;
            double v = a->type == AN_STR && *a->str ? strtod(a->str, &end) : 0;
            if (a->type == AN_STR && *a->str && !*end && end != a->str)
                S->bind_double(s, 5, v);
            else
                S->bind_null(s, 5);
        }
        if (S->step(s) != SQLITE_DONE)
            db_fail(x, mlprof__sqlite_insert[MLPROF__SQ_ARG]);
        S->reset(s);
    }
}

/* The innermost duration on (pid, tid) around ts, or -1. */
static int32_t slice_at(const ex *x, int64_t pid, int64_t tid, int64_t ts)
{
    const an_trace *t = x->t;
    size_t lo = 0, hi = x->nsorted;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const an_event *m = &t->ev[x->sorted[mid]];
        if (m->pid < pid || (m->pid == pid && (m->tid < tid || (m->tid == tid && m->ts <= ts))))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    int32_t k = (int32_t)x->sorted[lo - 1];
    if (t->ev[k].pid != pid || t->ev[k].tid != tid)
        return -1;
    while (k >= 0 && !(t->ev[k].ts <= ts && ts <= t->ev[k].ts + t->ev[k].dur))
        k = t->ev[k].parent;
    return k;
}

/* The first duration on (pid, tid) that starts at ts or later, or -1. */
static int32_t slice_next(const ex *x, int64_t pid, int64_t tid, int64_t ts)
{
    const an_trace *t = x->t;
    size_t lo = 0, hi = x->nsorted;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const an_event *m = &t->ev[x->sorted[mid]];
        if (m->pid < pid || (m->pid == pid && (m->tid < tid || (m->tid == tid && m->ts < ts))))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == x->nsorted)
        return -1;
    const an_event *m = &t->ev[x->sorted[lo]];
    return m->pid == pid && m->tid == tid ? (int32_t)x->sorted[lo] : -1;
}

static void put_slices(ex *x, an_sqlite_stats *st)
{
    an_trace *t = x->t;
    int32_t *depth = mlprof__malloc((t->nev ? t->nev : 1) * sizeof *depth);
    if (!depth) {
        fail(x, "%s", "out of memory");
        return;
    }
    for (size_t i = 0; i < t->nev; i++)
        depth[i] = -1;
    for (size_t i = 0; i < t->nev; i++) {
        if (t->ev[i].ph != 'X' || depth[i] >= 0)
            continue;
        /* up to a known depth or the root, then down again */
        int32_t k = (int32_t)i, d = 0;
        while (t->ev[k].parent >= 0 && depth[t->ev[k].parent] < 0) {
            k = t->ev[k].parent;
            d++;
        }
        int32_t base = t->ev[k].parent >= 0 ? depth[t->ev[k].parent] + 1 : 0;
        for (k = (int32_t)i; k >= 0 && depth[k] < 0; k = t->ev[k].parent)
            depth[k] = base + d--;
    }
    for (size_t i = 0; i < t->nev && !x->failed; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph == 'X') {
            sqlite3_stmt *s = x->q.st[MLPROF__SQ_SLICE];
            S->bind_int64(s, 1, (long long)i);
            S->bind_int64(s, 2, thread_track(x, e->pid, e->tid));
            S->bind_text(s, 3, e->name, -1, NULL);
            S->bind_text(s, 4, e->cat, -1, NULL);
            S->bind_int64(s, 5, (long long)e->ts);
            S->bind_int64(s, 6, (long long)e->dur);
            S->bind_int64(s, 7, depth[i]);
            row_opt(x, MLPROF__SQ_SLICE, 8, e->parent);
            S->bind_int64(s, 9, (long long)e->self);
            if (S->step(s) != SQLITE_DONE)
                db_fail(x, mlprof__sqlite_insert[MLPROF__SQ_SLICE]);
            S->reset(s);
            st->slices++;
            put_args(x, i, e);
        } else if (e->ph == 'i' || e->ph == 'n' || e->ph == 'b' || e->ph == 'e') {
            char ph[2] = {e->ph, 0}, scope[2] = {e->scope, 0};
            sqlite3_stmt *s = x->q.st[MLPROF__SQ_INSTANT];
            row_opt(x, MLPROF__SQ_INSTANT, 8, e->ph == 'i' ? -1 : (long long)(e->id & INT64_MAX));
            S->bind_int64(s, 1, (long long)i);
            S->bind_int64(s, 2, thread_track(x, e->pid, e->tid));
            S->bind_text(s, 3, e->name, -1, NULL);
            S->bind_text(s, 4, e->cat, -1, NULL);
            S->bind_int64(s, 5, (long long)e->ts);
            S->bind_text(s, 6, ph, -1, NULL);
            if (e->scope)
                S->bind_text(s, 7, scope, -1, NULL);
            else
                S->bind_null(s, 7);
            if (S->step(s) != SQLITE_DONE)
                db_fail(x, mlprof__sqlite_insert[MLPROF__SQ_INSTANT]);
            S->reset(s);
            st->instants++;
            put_args(x, i, e);
        }
        st->args += (e->ph == 'X' || e->ph == 'i' || e->ph == 'n' || e->ph == 'b' || e->ph == 'e') ? e->nargs : 0;
    }
    mlprof__free(depth);
}

/* Counter series: one track per (process, name, argument key). */
static void put_counters(ex *x, an_sqlite_stats *st)
{
    an_trace *t = x->t;
    mlprof__map tracks;
    mlprof__map_init(&tracks);
    char key[512];
    for (size_t i = 0; i < t->nev && !x->failed; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'C')
            continue;
        for (uint32_t k = 0; k < e->nargs && !x->failed; k++) {
            const an_arg *a = &t->args[e->args + k];
            double v = an_arg_num(a, NAN);
            if (v != v) {
                st->counter_values_skipped++; /* not a number: no sample, counted */
                continue;
            }
            int n = snprintf(key, sizeof key, "%lld\x1f%s\x1f%s", (long long)e->pid, e->name, a->key);
            mlprof__map_entry *slot = mlprof__map_slot(&tracks, key, (size_t)n < sizeof key ? (size_t)n : sizeof key - 1);
            if (!slot) {
                fail(x, "%s", "out of memory");
                break;
            }
            if (!slot->value) {
                slot->value = (void *)(uintptr_t)x->next_track;
                row(x, MLPROF__SQ_TRACK, "isinss", (long long)x->next_track, "counter", (long long)e->pid, e->name, a->key);
                x->next_track++;
                st->tracks++;
            }
            row(x, MLPROF__SQ_COUNTER, "iid", (long long)(uintptr_t)slot->value, (long long)e->ts, v);
            st->counters++;
        }
    }
    mlprof__map_free(&tracks);
}

typedef struct flow_point {
    uint64_t id;
    const char *cat;
    int64_t ts;
    size_t index;
    int32_t slice;
    uint8_t role; /* 0 start, 1 step, 2 end */
} flow_point;

static int flow_cmp(const void *pa, const void *pb)
{
    const flow_point *a = pa, *b = pb;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    if (a->cat != b->cat)
        return (uintptr_t)a->cat < (uintptr_t)b->cat ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    /* at one time, a flow's start before its steps before its end, whatever
     * their order in the file (Kineto writes a sync's "f" before its "s") */
    if (a->role != b->role)
        return a->role < b->role ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Flows: Chrome's "s", "t", "f" events (matched by category and id), each
 * bound to the slice around it ("f" without "bp":"e" to the next slice that
 * starts on its thread), and durations that carry a bind_id with flow_out
 * and flow_in. One row per hop, in time order. */
static void put_flows(ex *x, an_sqlite_stats *st)
{
    an_trace *t = x->t;
    flow_point *p = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        flow_point f = {e->id, e->cat, e->ts, i, -1, 0};
        if (e->ph == 's' || e->ph == 't' || e->ph == 'f') {
            f.role = e->ph == 's' ? 0 : e->ph == 't' ? 1 : 2;
            if (e->ph == 'f' && !e->flow_enclosing) {
                f.slice = slice_next(x, e->pid, e->tid, e->ts);
                if (f.slice < 0)
                    f.slice = slice_at(x, e->pid, e->tid, e->ts);
            } else {
                f.slice = slice_at(x, e->pid, e->tid, e->ts);
            }
            if (f.slice < 0)
                st->flow_ends_unbound++;
        } else if (e->ph == 'X' && (e->id_form & AN_ID_BIND) && (e->id_form & (AN_FLOW_IN | AN_FLOW_OUT))) {
            int in = (e->id_form & AN_FLOW_IN) != 0, out = (e->id_form & AN_FLOW_OUT) != 0;
            f.role = in && out ? 1 : out ? 0 : 2;
            f.slice = (int32_t)i;
        } else {
            continue;
        }
        flow_point *g = mlprof__grow(p, &cap, n, sizeof *p, 256);
        if (!g) {
            mlprof__free(p);
            fail(x, "%s", "out of memory");
            return;
        }
        p = g;
        p[n++] = f;
    }
    mlprof__sort(p, n, sizeof *p, flow_cmp);
    for (size_t i = 1; i < n && !x->failed; i++) {
        const flow_point *a = &p[i - 1], *b = &p[i];
        if (a->id != b->id || a->cat != b->cat || a->role == 2 || b->role == 0)
            continue;
        sqlite3_stmt *s = x->q.st[MLPROF__SQ_FLOW];
        S->bind_int64(s, 1, (long long)(a->id & INT64_MAX));
        row_opt(x, MLPROF__SQ_FLOW, 2, a->slice);
        row_opt(x, MLPROF__SQ_FLOW, 3, b->slice);
        if (S->step(s) != SQLITE_DONE)
            db_fail(x, mlprof__sqlite_insert[MLPROF__SQ_FLOW]);
        S->reset(s);
        st->flows++;
    }
    mlprof__free(p);
}

static long long arg_int(const an_trace *t, const an_event *e, const an_keyset *ks)
{
    const an_arg *a = an_event_arg_in(t, e, ks);
    double v = a ? an_arg_num(a, -1) : -1;
    return v >= 0 ? (long long)an_to_i64(v) : -1;
}

static void put_kernels(ex *x, an_sqlite_stats *st)
{
    an_trace *t = x->t;
    an_gpu_links l;
    if (an_gpu_link(t, &l) != 0) {
        fail(x, "%s", "out of memory");
        return;
    }
    static const char *const dev_names[] = {"device", NULL}, *const stream_names[] = {"stream", NULL},
                             *const corr_names[] = {"correlation", "correlation_id", "correlationId", NULL};
    an_keyset dev, stream, corr;
    an_keyset_init(t, dev_names, &dev);
    an_keyset_init(t, stream_names, &stream);
    an_keyset_init(t, corr_names, &corr);
    static const char *const kinds[] = {"", "compute", "communication", "memory"};
    mlprof__sb stack;
    mlprof__sb_init(&stack);
    for (size_t i = 0; i < t->nev && !x->failed; i++) {
        if (!l.kind[i] || t->ev[i].ph != 'X')
            continue;
        const an_event *e = &t->ev[i];
        long long s = arg_int(t, e, &stream);
        if (s < 0 && !an_is_named_id(e->tid))
            s = e->tid;
        stack.len = 0;
        if (l.bottom[i] >= 0)
            an_gpu_op_stack(t, &l, i, &stack);
        sqlite3_stmt *q = x->q.st[MLPROF__SQ_KERNEL];
        S->bind_int64(q, 1, (long long)i);
        S->bind_text(q, 2, kinds[l.kind[i] & 3], -1, NULL);
        row_opt(x, MLPROF__SQ_KERNEL, 3, arg_int(t, e, &dev));
        row_opt(x, MLPROF__SQ_KERNEL, 4, s);
        row_opt(x, MLPROF__SQ_KERNEL, 5, arg_int(t, e, &corr));
        row_opt(x, MLPROF__SQ_KERNEL, 6, l.launch[i]);
        row_opt(x, MLPROF__SQ_KERNEL, 7, l.bottom[i]);
        row_opt(x, MLPROF__SQ_KERNEL, 8, l.top[i]);
        if (l.bottom[i] >= 0) {
            S->bind_text(q, 9, t->ev[l.bottom[i]].name, -1, NULL);
            S->bind_text(q, 10, t->ev[l.top[i]].name, -1, NULL);
            S->bind_text(q, 11, stack.data ? stack.data : "", (int)stack.len, NULL);
        } else {
            S->bind_null(q, 9);
            S->bind_null(q, 10);
            S->bind_null(q, 11);
        }
        if (S->step(q) != SQLITE_DONE)
            db_fail(x, mlprof__sqlite_insert[MLPROF__SQ_KERNEL]);
        S->reset(q);
        st->kernels++;
    }
    mlprof__sb_free(&stack);
    an_gpu_links_free(&l);
}

typedef struct mem_block {
    long long type, device, addr, bytes, alloc_ts, free_ts, alloc_id, free_id, slice;
} mem_block;

/* Memory blocks from PyTorch's "[memory]" instants (Addr, Bytes: negative
 * for a free, Device Type, Device Id): an allocation is a block until the
 * free of its address on its device. */
static void put_memory(ex *x, an_sqlite_stats *st)
{
    an_trace *t = x->t;
    static const char *const addr_n[] = {"Addr", NULL}, *const bytes_n[] = {"Bytes", NULL},
                             *const type_n[] = {"Device Type", NULL}, *const dev_n[] = {"Device Id", NULL};
    an_keyset ka, kb, kt, kd;
    an_keyset_init(t, addr_n, &ka);
    an_keyset_init(t, bytes_n, &kb);
    an_keyset_init(t, type_n, &kt);
    an_keyset_init(t, dev_n, &kd);
    if (!ka.n || !kb.n)
        return;
    mem_block *b = NULL;
    size_t n = 0, cap = 0;
    mlprof__map live;
    mlprof__map_init(&live);
    char key[96];
    for (size_t i = 0; i < t->nev && !x->failed; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'i' || strcmp(e->name, "[memory]") != 0)
            continue;
        const an_arg *aa = an_event_arg_in(t, e, &ka), *ab = an_event_arg_in(t, e, &kb);
        if (!aa || !ab)
            continue;
        long long addr = (long long)an_to_i64(an_arg_num(aa, 0)), bytes = (long long)an_to_i64(an_arg_num(ab, 0));
        const an_arg *at = an_event_arg_in(t, e, &kt), *ad = an_event_arg_in(t, e, &kd);
        long long type = at ? (long long)an_to_i64(an_arg_num(at, -1)) : -1;
        long long dev = ad ? (long long)an_to_i64(an_arg_num(ad, -1)) : -1;
        int kn = snprintf(key, sizeof key, "%lld:%lld:%lld", type, dev, addr);
        mlprof__map_entry *slot = mlprof__map_slot(&live, key, (size_t)kn);
        if (!slot) {
            fail(x, "%s", "out of memory");
            break;
        }
        if (bytes < 0) {
            if (slot->value) {
                mem_block *m = &b[(uintptr_t)slot->value - 1];
                m->free_ts = e->ts;
                m->free_id = (long long)i;
                slot->value = NULL;
            }
            continue;
        }
        mem_block *g = mlprof__grow(b, &cap, n, sizeof *b, 256);
        if (!g) {
            fail(x, "%s", "out of memory");
            break;
        }
        b = g;
        b[n] = (mem_block){type, dev, addr, bytes, e->ts, -1, (long long)i, -1, slice_at(x, e->pid, e->tid, e->ts)};
        slot->value = (void *)(uintptr_t)(++n);
    }
    for (size_t i = 0; i < n && !x->failed; i++) {
        sqlite3_stmt *s = x->q.st[MLPROF__SQ_MEMORY];
        row_opt(x, MLPROF__SQ_MEMORY, 1, b[i].type);
        row_opt(x, MLPROF__SQ_MEMORY, 2, b[i].device);
        S->bind_int64(s, 3, b[i].addr);
        S->bind_int64(s, 4, b[i].bytes);
        S->bind_int64(s, 5, b[i].alloc_ts);
        row_opt(x, MLPROF__SQ_MEMORY, 6, b[i].free_id < 0 ? -1 : b[i].free_ts);
        S->bind_int64(s, 7, b[i].alloc_id);
        row_opt(x, MLPROF__SQ_MEMORY, 8, b[i].free_id);
        row_opt(x, MLPROF__SQ_MEMORY, 9, b[i].slice);
        if (S->step(s) != SQLITE_DONE)
            db_fail(x, mlprof__sqlite_insert[MLPROF__SQ_MEMORY]);
        S->reset(s);
        st->memory_blocks++;
    }
    mlprof__map_free(&live);
    mlprof__free(b);
}

static void put_meta(ex *x, const char *trace_path)
{
    const an_trace *t = x->t;
    char buf[64];
    row(x, MLPROF__SQ_META, "ss", "trace", trace_path);
    row(x, MLPROF__SQ_META, "ss", "writer", t->writer ? t->writer : "");
    snprintf(buf, sizeof buf, "%lld", (long long)t->base_time_ns);
    row(x, MLPROF__SQ_META, "ss", "base_time_ns", buf);
    snprintf(buf, sizeof buf, "%lld", (long long)t->t_min);
    row(x, MLPROF__SQ_META, "ss", "t_min_ns", buf);
    snprintf(buf, sizeof buf, "%lld", (long long)t->t_max);
    row(x, MLPROF__SQ_META, "ss", "t_max_ns", buf);
    row(x, MLPROF__SQ_META, "ss", "schema_version", "1");
    if (t->other_data)
        row(x, MLPROF__SQ_META, "ss", "other_data", t->other_data);
    if (t->distributed_info)
        row(x, MLPROF__SQ_META, "ss", "distributed_info", t->distributed_info);
}

static void exec(ex *x, const char *sql)
{
    if (!x->failed && S->exec(x->q.db, sql, NULL, NULL, NULL) != MLPROF__SQLITE_OK)
        db_fail(x, sql);
}

static int export_to(an_trace *t, const char *trace_path, const char *out, an_sqlite_stats *st, char *err,
                     size_t len);

int an_sqlite_export(an_trace *t, const char *trace_path, const char *out, an_sqlite_stats *st, char *err,
                     size_t len)
{
    memset(st, 0, sizeof *st);
    struct stat so;
    /* a symbolic link is followed: the file it names is replaced, as
     * mlprof's other outputs do */
    char *resolved = NULL;
    if (lstat(out, &so) == 0 && S_ISLNK(so.st_mode))
        resolved = realpath(out, NULL);
    int rc = export_to(t, trace_path, resolved ? resolved : out, st, err, len);
    free(resolved);
    return rc;
}

static int export_to(an_trace *t, const char *trace_path, const char *out, an_sqlite_stats *st, char *err,
                     size_t len)
{
    struct stat so, si;
    if (stat(out, &so) == 0) {
        if (!S_ISREG(so.st_mode)) {
            snprintf(err, len, "%s: exists and is not a regular file (%s); not replaced", out,
                     S_ISDIR(so.st_mode) ? "a directory" : "a device, FIFO or socket");
            return -1;
        }
        if (stat(trace_path, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            snprintf(err, len, "%s: is the trace itself; the export never writes over its input", out);
            return -1;
        }
    }
    S = mlprof__sqlite_load(NULL, err, len);
    if (!S)
        return -1;
    size_t tn = strlen(out) + 32;
    char *tmp = mlprof__malloc(tn);
    if (!tmp) {
        snprintf(err, len, "out of memory");
        return -1;
    }
    snprintf(tmp, tn, "%s.tmp-%d-XXXXXX", out, (int)getpid());
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, len, "%s: cannot create a file beside it: %s", out, strerror(errno));
        mlprof__free(tmp);
        return -1;
    }
    /* the permissions a new file gets (mkstemp's are 0600) */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) {
        snprintf(err, len, "%s: cannot set the permissions of %s: %s", out, tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        mlprof__free(tmp);
        return -1;
    }
    close(fd);
    ex x = {.t = t, .err = err, .errlen = len, .what = out};
    char why[380];
    if (mlprof__sqlite_db_open(&x.q, S, tmp, 1, 0, why, sizeof why) != 0)
        fail(&x, "%s", why);
    exec(&x, "BEGIN");
    if (!x.failed) {
        an_compute_self(t); /* the self times and parents `mlprof analyze` uses */
        x.sorted = mlprof__malloc((t->nev ? t->nev : 1) * sizeof *x.sorted);
        if (!x.sorted)
            fail(&x, "%s", "out of memory");
        for (size_t i = 0; x.sorted && i < t->nev; i++) {
            if (t->ev[i].ph == 'X')
                x.sorted[x.nsorted++] = i;
        }
        if (x.sorted)
            an_sort_by_track(t, x.sorted, x.nsorted);
    }
    put_meta(&x, trace_path);
    if (!x.failed)
        put_processes_threads(&x);
    st->processes = x.nprocesses;
    st->threads = x.nthreads;
    st->tracks = x.nthreads;
    if (!x.failed)
        put_slices(&x, st);
    if (!x.failed)
        put_counters(&x, st);
    if (!x.failed)
        put_flows(&x, st);
    if (!x.failed)
        put_kernels(&x, st);
    if (!x.failed)
        put_memory(&x, st);
    exec(&x, mlprof__sqlite_indexes);
    exec(&x, "COMMIT");
    if (mlprof__sqlite_db_close(&x.q) != 0)
        fail(&x, "%s", "cannot close the database");
    mlprof__free(x.sorted);
    mlprof__free(x.threads);
    if (!x.failed && rename(tmp, out) != 0) {
        snprintf(err, len, "%s: cannot rename %s to it: %s", out, tmp, strerror(errno));
        x.failed = 1;
    }
    if (x.failed)
        unlink(tmp);
    else if (stat(out, &so) == 0)
        st->bytes = (long long)so.st_size;
    mlprof__free(tmp);
    return x.failed ? -1 : 0;
}
