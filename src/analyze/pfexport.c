/*
 * pfexport.c - a trace model written as Perfetto's protobuf trace, through
 * the library's Perfetto sink: the analyzer's events are handed to it as the
 * collector hands a recording's (tracks, then per thread its slices' begins
 * and ends in time order, then instants, counters, flows and async slices,
 * then a tail with otherData), so the file is what a recording writes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/gz.h"
#include "../export/sink.h"
#include "flame.h"
#include "mlprof/mlprof.h"
#include "pfexport.h"

enum { FLUSH_AT = 4 << 20 };

/* pids and tids the trace gives that do not fit a pid_t (names, 64-bit
 * numbers), and the overlap tracks, are numbered from here up */
#define SYNTH_FIRST 0x7f000000

typedef struct id_slot {
    int64_t from;
    int32_t to;
    int used;
} id_slot;

typedef struct ex {
    const an_trace *t;
    const mlprof__sink_ops *ops;
    void *ps;
    mlprof__sb sb;
    mlprof__sink_out out;
    mlprof__wfile file;
    int failed; /* a write failed (file.error) */
    mlprof__sb args, name;
    id_slot *ids; /* open addressing, power of two */
    size_t ids_cap, ids_n;
    int32_t next_synth;
    int64_t shift; /* added to every time (ns_of) */
    an_pf_stats *st;
    mlprof__map multi; /* counters: find_multi_series */
} ex;

static void flush_if(ex *x, size_t above)
{
    if (x->sb.len <= above || x->failed || x->sb.failed)
        return;
    if (mlprof__wfile_write(&x->file, x->sb.data, x->sb.len) != 0)
        x->failed = 1;
    mlprof__sb_reset(&x->sb);
}

/* ---- pids and tids */

static size_t id_hash(int64_t v, size_t mask)
{
    uint64_t h = (uint64_t)v * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & mask;
}

static int ids_grow(ex *x)
{
    size_t cap = x->ids_cap ? x->ids_cap * 2 : 256;
    id_slot *n = mlprof__calloc(cap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < x->ids_cap; i++) {
        if (!x->ids[i].used)
            continue;
        size_t k = id_hash(x->ids[i].from, cap - 1);
        while (n[k].used)
            k = (k + 1) & (cap - 1);
        n[k] = x->ids[i];
    }
    mlprof__free(x->ids);
    x->ids = n;
    x->ids_cap = cap;
    return 0;
}

/* The pid_t that stands for id v: v itself when it fits and is a number
 * the trace gave, else the next synthetic one (the same each time). */
static pid_t map_id(ex *x, int64_t v)
{
    if (!an_is_named_id(v) && v != AN_PROCESS_TID && v >= INT32_MIN && v < SYNTH_FIRST)
        return (pid_t)v;
    if ((x->ids_n + 1) * 2 > x->ids_cap && ids_grow(x) != 0)
        return SYNTH_FIRST - 1; /* out of memory: one shared stand-in */
    size_t mask = x->ids_cap - 1, k = id_hash(v, mask);
    while (x->ids[k].used) {
        if (x->ids[k].from == v)
            return x->ids[k].to;
        k = (k + 1) & mask;
    }
    x->ids[k].used = 1;
    x->ids[k].from = v;
    x->ids[k].to = x->next_synth++;
    x->ids_n++;
    return x->ids[k].to;
}

/* A fresh synthetic id (an overlap track's tid). */
static pid_t new_id(ex *x) { return x->next_synth++; }

/* ---- events */

static void put_args_text(ex *x, const an_event *e)
{
    mlprof__sb *sb = &x->args;
    mlprof__sb_reset(sb);
    for (uint32_t k = 0; k < e->nargs; k++) {
        const an_arg *a = &x->t->args[e->args + k];
        if (sb->len)
            mlprof__sb_putc(sb, ',');
        mlprof__sb_json_str(sb, a->key, strlen(a->key));
        mlprof__sb_putc(sb, ':');
        if (a->type == AN_STR)
            mlprof__sb_json_str(sb, a->str, strlen(a->str));
        else if (a->type == AN_RAW)
            mlprof__sb_puts(sb, a->str);
        else if (a->is_int)
            mlprof__sb_i64(sb, a->inum);
        else if (isfinite(a->num))
            mlprof__sb_double(sb, a->num);
        else
            mlprof__sb_puts(sb, "null");
    }
}

/* A time as Perfetto's (unsigned) timestamp: shifted when the trace starts
 * before 0 (a merge lines traces up that way), so that nothing is cut. */
static uint64_t ns_of(const ex *x, int64_t v)
{
    int64_t t;
    if (__builtin_add_overflow(v, x->shift, &t))
        return v > 0 ? UINT64_MAX >> 1 : 0;
    return t > 0 ? (uint64_t)t : 0;
}

static void fill_span(ex *x, const an_event *e, pid_t pid, pid_t tid, int kind, mlprof__span_out *s)
{
    memset(s, 0, sizeof *s);
    s->name = e->name;
    s->name_len = strlen(e->name);
    s->domain = e->cat && e->cat[0] ? e->cat : NULL;
    s->kind = kind;
    s->begin_ns = ns_of(x, e->ts);
    s->end_ns = ns_of(x, e->ts + (e->dur > 0 ? e->dur : 0));
    s->pid = pid;
    s->tid = tid;
    put_args_text(x, e);
    s->args = x->args.data;
    s->args_len = x->args.len;
}

static void say_track(ex *x, int kind, pid_t pid, pid_t tid, const char *name)
{
    if (!x->ops->track)
        return;
    mlprof__track_out m = {kind, pid, tid, name, 0};
    x->ops->track(x->ps, &x->out, &m);
    x->st->tracks++;
}

/* Room for placing the durations of one track (put_track_slices), sized
 * once for the largest: n entries each (lane_start n + 1, stack 2 n). */
typedef struct lanes {
    uint32_t *lane;     /* each duration's lane */
    size_t *below;      /* the duration under it on its lane's stack, or NONE */
    size_t *top;        /* per lane: its innermost open duration, or NONE; then a cursor */
    size_t *by_lane;    /* the durations lane by lane, by start within a lane */
    size_t *lane_start; /* where each lane's run of by_lane begins */
    int64_t *stack;     /* the ends of the slices open as they are written, then which they are */
} lanes;

#define NONE ((size_t)-1)

static int64_t end_of(const an_event *e) { return e->ts + (e->dur > 0 ? e->dur : 0); }

/* The durations of one track: each placed on the first lane (the thread
 * itself, then its overlap tracks, as many as it takes) whose open slices
 * it nests in, then written lane by lane as begins and ends in time order.
 * order[from..to): the track's durations by start, the enclosing one first.
 * One sweep by start places them all: each lane keeps its stack of open
 * durations, dropping those that ended before the start it is asked about. */
static void put_track_slices(ex *x, const size_t *order, size_t from, size_t to, lanes *w)
{
    const an_trace *t = x->t;
    size_t n = to - from, nlanes = 0;
    for (size_t k = 0; k < n; k++) {
        const an_event *e = &t->ev[order[from + k]];
        int64_t end = end_of(e);
        size_t l = 0;
        for (; l < nlanes; l++) {
            size_t *top = &w->top[l];
            while (*top != NONE && end_of(&t->ev[order[from + *top]]) <= e->ts)
                *top = w->below[*top];
            if (*top == NONE || end <= end_of(&t->ev[order[from + *top]]))
                break; /* it nests in this lane's open slices */
        }
        if (l == nlanes)
            w->top[nlanes++] = NONE; /* it overlaps one in every lane without nesting: a new lane */
        w->lane[k] = (uint32_t)l;
        w->below[k] = w->top[l];
        w->top[l] = k;
    }
    /* lane by lane, each in start order (a stable counting sort) */
    memset(w->lane_start, 0, (nlanes + 1) * sizeof *w->lane_start);
    for (size_t k = 0; k < n; k++)
        w->lane_start[w->lane[k] + 1]++;
    for (size_t l = 0; l < nlanes; l++) {
        w->lane_start[l + 1] += w->lane_start[l];
        w->top[l] = w->lane_start[l]; /* the next free place of lane l */
    }
    for (size_t k = 0; k < n; k++)
        w->by_lane[w->top[w->lane[k]]++] = k;
    const an_event *first = &t->ev[order[from]];
    pid_t pid = map_id(x, first->pid), tid0 = map_id(x, first->tid);
    int64_t *stack = w->stack;
    for (size_t l = 0; l < nlanes; l++) {
        pid_t tid = tid0;
        if (l > 0) {
            tid = new_id(x);
            const char *tn = an_thread_name(t, first->pid, first->tid);
            mlprof__sb_reset(&x->name);
            if (tn)
                mlprof__sb_puts(&x->name, tn);
            else
                mlprof__sb_printf(&x->name, "thread %lld", (long long)first->tid);
            mlprof__sb_puts(&x->name, " (overlapping)");
            if (l > 1)
                mlprof__sb_printf(&x->name, " %zu", l);
            mlprof__sb_putc(&x->name, '\0');
            say_track(x, MLPROF__TRACK_THREAD, pid, tid, x->name.failed ? "overlapping" : x->name.data);
        }
        size_t depth = 0;
        mlprof__span_out s;
        for (size_t j = w->lane_start[l];; j++) {
            const an_event *e = j < w->lane_start[l + 1] ? &t->ev[order[from + w->by_lane[j]]] : NULL;
            /* the ends before this begin (all of them at the lane's end) */
            while (depth && (!e || stack[depth - 1] <= e->ts)) {
                const an_event *o = &t->ev[order[from + (size_t)stack[n + depth - 1]]];
                memset(&s, 0, sizeof s);
                s.name = o->name;
                s.name_len = strlen(o->name);
                s.domain = o->cat && o->cat[0] ? o->cat : NULL;
                s.begin_ns = ns_of(x, o->ts);
                s.end_ns = ns_of(x, stack[depth - 1]);
                s.pid = pid;
                s.tid = tid;
                x->ops->slice_end(x->ps, &x->out, &s);
                depth--;
            }
            if (!e)
                break;
            fill_span(x, e, pid, tid, MLPROF__OUT_TASK, &s);
            x->ops->slice_begin(x->ps, &x->out, &s);
            stack[depth] = end_of(e);
            stack[n + depth] = (int64_t)w->by_lane[j];
            depth++;
            x->st->slices++;
            if (l > 0)
                x->st->overlapping++;
            flush_if(x, FLUSH_AT);
        }
    }
}

static int put_slices(ex *x)
{
    const an_trace *t = x->t;
    size_t n = 0;
    for (size_t i = 0; i < t->nev; i++)
        n += t->ev[i].ph == 'X';
    if (!n)
        return 0;
    size_t *order = mlprof__malloc(n * sizeof *order);
    lanes w = {mlprof__malloc(n * sizeof *w.lane),    mlprof__malloc(n * sizeof *w.below),
               mlprof__malloc(n * sizeof *w.top),     mlprof__malloc(n * sizeof *w.by_lane),
               mlprof__malloc((n + 1) * sizeof *w.lane_start), mlprof__malloc(2 * n * sizeof *w.stack)};
    int rc = order && w.lane && w.below && w.top && w.by_lane && w.lane_start && w.stack ? 0 : -1;
    if (rc == 0) {
        n = 0;
        for (size_t i = 0; i < t->nev; i++)
            if (t->ev[i].ph == 'X')
                order[n++] = i;
        an_sort_by_track(t, order, n);
        for (size_t a = 0; a < n && !x->failed;) {
            size_t b = a + 1;
            const an_event *e = &t->ev[order[a]];
            while (b < n && t->ev[order[b]].pid == e->pid && t->ev[order[b]].tid == e->tid)
                b++;
            put_track_slices(x, order, a, b, &w);
            a = b;
        }
    }
    mlprof__free(order);
    mlprof__free(w.lane);
    mlprof__free(w.below);
    mlprof__free(w.top);
    mlprof__free(w.by_lane);
    mlprof__free(w.lane_start);
    mlprof__free(w.stack);
    return rc;
}

/* The key of a counter ("C" events of one pid and name): "pid name". */
static const char *counter_key(ex *x, const an_event *e, size_t *len)
{
    mlprof__sb_reset(&x->name);
    mlprof__sb_printf(&x->name, "%lld ", (long long)e->pid);
    mlprof__sb_puts(&x->name, e->name);
    *len = x->name.len;
    return x->name.failed ? NULL : x->name.data;
}

/* Which counters have more than one series: a sample with several numeric
 * arguments, or samples whose one argument is not always the same key
 * ({used, free}, then {used} alone). Their tracks are each named "NAME KEY"
 * for every sample, so that one series stays on one track; a counter that
 * only ever says one key is a track named after the event. In x->multi:
 * "pid name" -> 1 + (several series), the first key's pointer kept apart. */
static int find_multi_series(ex *x)
{
    const an_trace *t = x->t;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'C')
            continue;
        const char *first = NULL;
        int numeric = 0, multi = 0;
        for (uint32_t k = 0; k < e->nargs; k++) {
            const an_arg *a = &t->args[e->args + k];
            if (a->type != AN_NUM || !isfinite(a->num))
                continue;
            multi |= numeric++ > 0;
            if (!first)
                first = a->key;
        }
        if (!first)
            continue;
        size_t len;
        const char *key = counter_key(x, e, &len);
        mlprof__map_entry *m = key ? mlprof__map_slot(&x->multi, key, len) : NULL;
        if (!m)
            return -1;
        if (!m->value) /* the first key seen: its sample's key, or several */
            m->value = multi ? (void *)"" : (void *)first;
        else if (*(const char *)m->value && (multi || strcmp((const char *)m->value, first) != 0))
            m->value = (void *)"";
    }
    return 0;
}

static void put_counter(ex *x, const an_event *e)
{
    size_t len;
    const char *key = counter_key(x, e, &len);
    const char *one = key ? mlprof__map_get(&x->multi, key, len) : NULL;
    int multi = !one || !*one;
    for (uint32_t k = 0; k < e->nargs; k++) {
        const an_arg *a = &x->t->args[e->args + k];
        if (a->type != AN_NUM || !isfinite(a->num)) {
            x->st->left_out++;
            continue;
        }
        /* a series per argument, as Chrome shows them: one alone is named after the event */
        mlprof__sb_reset(&x->name);
        mlprof__sb_puts(&x->name, e->name);
        if (multi) {
            mlprof__sb_putc(&x->name, ' ');
            mlprof__sb_puts(&x->name, a->key);
        }
        mlprof__sb_putc(&x->name, '\0');
        if (x->name.failed)
            return;
        mlprof__counter_out c = {x->name.data, e->cat && e->cat[0] ? e->cat : NULL, ns_of(x, e->ts), a->num,
                                 a->is_int, a->inum, map_id(x, e->pid), map_id(x, e->tid), NULL};
        x->ops->counter(x->ps, &x->out, &c);
        x->st->counters++;
    }
}

static void put_instant(ex *x, const an_event *e)
{
    int scope = e->scope == 'g' ? MLPROF_SCOPE_GLOBAL : e->scope == 'p' ? MLPROF_SCOPE_PROCESS : MLPROF_SCOPE_THREAD;
    put_args_text(x, e);
    mlprof__instant_out o = {e->name, strlen(e->name), e->cat && e->cat[0] ? e->cat : NULL, ns_of(x, e->ts), scope,
                             map_id(x, e->pid), map_id(x, e->tid), x->args.data, x->args.len, NULL};
    x->ops->instant(x->ps, &x->out, &o);
    x->st->instants++;
}

static void put_flow(ex *x, const an_event *e)
{
    if (e->ph == 't') {
        x->st->left_out++;
        return;
    }
    mlprof__flow_out f = {e->ph, e->id, e->name, e->cat && e->cat[0] ? e->cat : NULL, ns_of(x, e->ts),
                          map_id(x, e->pid), map_id(x, e->tid)};
    x->ops->flow(x->ps, &x->out, &f);
    x->st->flows++;
}

/* Async slices: a "b" joined to the latest open "b" of its process, id and
 * name when an "e" comes (nested ones end innermost first); a begin left
 * open is shown to the trace's end, marked unfinished. */
static int put_async(ex *x)
{
    const an_trace *t = x->t;
    size_t n = 0;
    for (size_t i = 0; i < t->nev; i++)
        n += t->ev[i].ph == 'b' || t->ev[i].ph == 'e';
    if (!n)
        return 0;
    mlprof__map open;
    mlprof__map_init(&open);
    uint8_t *ended = mlprof__calloc(t->nev, 1);
    size_t *below = mlprof__malloc(t->nev * sizeof *below); /* a begin's: the key's open begin before it */
    int rc = ended && below ? 0 : -1;
    mlprof__span_out s;
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'b' && e->ph != 'e')
            continue;
        struct {
            int64_t pid;
            uint64_t id;
            const char *name;
        } key;
        memset(&key, 0, sizeof key);
        key.pid = e->pid;
        key.id = e->id;
        key.name = e->name; /* interned: one pointer per name */
        mlprof__map_entry *slot = mlprof__map_slot(&open, (const char *)&key, sizeof key);
        if (!slot) {
            rc = -1;
            break;
        }
        size_t top = (size_t)(uintptr_t)slot->value; /* index + 1, or 0 */
        if (e->ph == 'b') {
            below[i] = top;
            slot->value = (void *)(uintptr_t)(i + 1);
            continue;
        }
        if (!top) {
            x->st->async_unmatched++; /* an end without a begin */
            continue;
        }
        const an_event *be = &t->ev[top - 1];
        ended[top - 1] = 1;
        slot->value = (void *)(uintptr_t)below[top - 1];
        fill_span(x, be, map_id(x, be->pid), map_id(x, be->tid), MLPROF__OUT_FRAME, &s);
        s.end_ns = ns_of(x, e->ts) > s.begin_ns ? ns_of(x, e->ts) : s.begin_ns;
        x->ops->span(x->ps, &x->out, &s);
        x->st->async_slices++;
        flush_if(x, FLUSH_AT);
    }
    int64_t last = t->t_max; /* the trace's end: the last event's */
    for (size_t i = 0; i < t->nev; i++)
        if (t->ev[i].ts + (t->ev[i].dur > 0 ? t->ev[i].dur : 0) > last)
            last = t->ev[i].ts + t->ev[i].dur;
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'b' || ended[i])
            continue;
        fill_span(x, e, map_id(x, e->pid), map_id(x, e->tid), MLPROF__OUT_FRAME, &s);
        s.end_ns = ns_of(x, last) > s.begin_ns ? ns_of(x, last) : s.begin_ns;
        s.unfinished = 1;
        x->ops->span(x->ps, &x->out, &s);
        x->st->async_slices++;
        x->st->async_unmatched++;
    }
    mlprof__free(ended);
    mlprof__free(below);
    mlprof__map_free(&open);
    return rc;
}

/* an_flame_stacks' map: a sample's pid (0), time (1) and tid (2) as the export gives them */
static int64_t stack_map(void *ctx, int what, int64_t v)
{
    ex *x = ctx;
    return what == 1 ? (int64_t)ns_of(x, v) : map_id(x, v);
}

static void put_tail(ex *x)
{
    const an_trace *t = x->t;
    x->ops->tail_begin(x->ps, &x->out);
    mlprof__trace_meta m;
    memset(&m, 0, sizeof m);
    int64_t pid = t->nev ? t->ev[0].pid : 0;
    m.pid = map_id(x, pid);
    m.process_name = an_process_name(t, pid);
    char host[256];
    m.host = an_other_data_str(t, "host", host, sizeof host);
    m.clock = "imported";
    m.start_ns = ns_of(x, t->t_min);
    m.dump_ns = ns_of(x, t->t_max);
    m.finished = 1;
    /* otherData's members, and where the events came from */
    mlprof__sb_reset(&x->args);
    mlprof__sb_puts(&x->args, "\"exported_from\":");
    mlprof__sb_json_str(&x->args, t->path ? t->path : "", t->path ? strlen(t->path) : 0);
    mlprof__sb_puts(&x->args, ",\"writer\":");
    mlprof__sb_json_str(&x->args, t->writer ? t->writer : "", t->writer ? strlen(t->writer) : 0);
    /* the JSON's top-level members the analyzer reads, kept for it (trace.c reads them back) */
    if (t->device_props) {
        mlprof__sb_puts(&x->args, ",\"deviceProperties\":");
        mlprof__sb_puts(&x->args, t->device_props);
    }
    if (t->distributed_info && !(t->other_data && strstr(t->other_data, "\"distributed_rank\":"))) {
        mlprof__sb_puts(&x->args, ",\"distributedInfo\":");
        mlprof__sb_puts(&x->args, t->distributed_info);
    }
    if (t->base_time_ns)
        mlprof__sb_printf(&x->args, ",\"baseTimeNanoseconds\":%lld", (long long)t->base_time_ns);
    if (t->system_clock)
        mlprof__sb_puts(&x->args, ",\"exported_system_clock\":true");
    if (x->shift)
        mlprof__sb_printf(&x->args, ",\"exported_time_shift_ns\":%lld", (long long)x->shift);
    size_t od = t->other_data ? strlen(t->other_data) : 0;
    if (od > 2 && t->other_data[0] == '{' && t->other_data[od - 1] == '}') {
        mlprof__sb_putc(&x->args, ',');
        mlprof__sb_put(&x->args, t->other_data + 1, od - 2);
    }
    m.other_data = x->args.data;
    m.other_data_len = x->args.len;
    /* the sampled call stacks (a JSON trace's stackFrames and samples, a
     * Perfetto trace's PerfSample packets), read again from the file by
     * flame.c: PerfSample packets of their processes, on the export's times */
    an_flame *fl = NULL;
    mlprof__stack_frame_out *frames = NULL;
    mlprof__stack_sample_out *samples = NULL;
    mlprof__stacks_out stacks;
    if (t->json_stacks == 3 || t->nssamples) {
        char err[700];
        size_t nf = 0, ns = 0, skipped = 0;
        if (!t->path || strcmp(t->path, "-") == 0) {
            x->st->stacks_unread = 1; /* standard input: read once */
        } else if (!(fl = an_flame_read(t->path, NULL, 0, err, sizeof err))) {
            x->st->stacks_unread = 1;
        } else if (an_flame_stacks(fl, stack_map, x, &frames, &nf, &samples, &ns, &skipped) != 0) {
            x->st->stacks_unread = 1;
        } else {
            stacks = (mlprof__stacks_out){m.pid, frames, nf, samples, ns};
            m.stacks = &stacks;
            x->st->stack_samples = ns;
            x->st->left_out += skipped;
        }
    }
    x->ops->tail_end(x->ps, &x->out, &m);
    mlprof__free(frames);
    mlprof__free(samples);
    if (fl)
        an_flame_free(fl);
}

int an_perfetto_export(const an_trace *t, const char *out, an_pf_stats *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    ex x;
    memset(&x, 0, sizeof x);
    x.t = t;
    x.st = st;
    x.ops = &mlprof__perfetto_sink;
    x.next_synth = SYNTH_FIRST;
    x.shift = t->t_min < 0 ? (t->t_min == INT64_MIN ? INT64_MAX : -t->t_min) : 0;
    st->shift_ns = x.shift;
    for (size_t i = 0; i < t->nev; i++)
        st->unended += t->ev[i].ph == 'U'; /* as analyze, which counts them apart */
    mlprof__sb_init(&x.sb);
    mlprof__sb_init(&x.args);
    mlprof__sb_init(&x.name);
    mlprof__map_init(&x.multi);
    x.out.sb = &x.sb;
    x.out.tail = 0;
    if (mlprof__wfile_open(&x.file, out, -1) != MLPROF_OK) {
        snprintf(err, errlen, "%s", mlprof_last_error());
        return -1;
    }
    x.ps = x.ops->create();
    int rc = x.ps ? 0 : -1;
    if (rc == 0) {
        x.ops->reset(x.ps);
        x.ops->head(x.ps, &x.sb);
        /* the names first: every track is described with its name at its first event */
        for (size_t i = 0; i < t->nnames; i++) {
            const an_name *nm = &t->names[i];
            if (nm->tid == AN_PROCESS_TID)
                say_track(&x, MLPROF__TRACK_PROCESS, map_id(&x, nm->pid), map_id(&x, nm->pid), nm->name);
            else
                say_track(&x, MLPROF__TRACK_THREAD, map_id(&x, nm->pid), map_id(&x, nm->tid), nm->name);
        }
        rc = put_slices(&x);
    }
    if (rc == 0)
        rc = find_multi_series(&x);
    for (size_t i = 0; rc == 0 && i < t->nev && !x.failed; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph == 'i' || e->ph == 'n')
            put_instant(&x, e);
        else if (e->ph == 'C')
            put_counter(&x, e);
        else if (e->ph == 's' || e->ph == 't')
            put_flow(&x, e);
        flush_if(&x, FLUSH_AT);
    }
    /* the flows' ends after every start: a reader pairs them in time order,
     * and one that ends at its start's time, before it in the file (Kineto
     * writes a sync's "f" before its "s"), would end nothing */
    for (size_t i = 0; rc == 0 && i < t->nev && !x.failed; i++) {
        if (t->ev[i].ph == 'f')
            put_flow(&x, &t->ev[i]);
        flush_if(&x, FLUSH_AT);
    }
    if (rc == 0)
        rc = put_async(&x);
    if (rc == 0)
        put_tail(&x);
    if (rc == 0 && (x.sb.failed || x.args.failed))
        rc = -1;
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    flush_if(&x, 0);
    if (x.failed && rc == 0) {
        snprintf(err, errlen, "cannot write %s: %s", out, strerror(x.file.error));
        rc = -1;
    }
    st->bytes = 0;
    if (mlprof__wfile_close(&x.file, rc == 0) != MLPROF_OK && rc == 0) {
        snprintf(err, errlen, "%s", mlprof_last_error());
        rc = -1;
    }
    struct stat sbuf;
    if (rc == 0 && out && strcmp(out, "-") != 0 && stat(out, &sbuf) == 0)
        st->bytes = (long long)sbuf.st_size;
    if (x.ps)
        x.ops->destroy(x.ps);
    mlprof__sb_free(&x.sb);
    mlprof__sb_free(&x.args);
    mlprof__sb_free(&x.name);
    mlprof__map_free(&x.multi); /* its values point into the trace */
    mlprof__free(x.ids);
    return rc;
}
