/*
 * flame.c - mlprof flame: a trace's sampled call stacks (stackFrames and
 * samples, Chrome's JSON trace format) merged by function name into one
 * tree, written as folded stacks ("a;b;c count", what flamegraph.pl and
 * speedscope read) or as an SVG flame graph with a small inline script
 * (hover: name, samples, share; click: zoom into that frame; reset). With a
 * span name, only the samples taken on a thread while such a span was open
 * on it: a sample belongs to the spans whose [ts, ts+dur] holds its time on
 * its thread (the trace's own events, same clock), so an op opens into the
 * functions that ran inside it. A Perfetto protobuf trace (pftrace.c) gives
 * the same from its PerfSample packets: its stack tree's nodes become frames
 * here, its slices the spans. A frame's source file and line (the sampling
 * key writes them in JSON where debug info has them) are in the SVG's hover
 * text (the lines a function's frames span); with lines set, frames are
 * told apart by line too ("hot (file.c:52)").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame.h"
#include "../export/sink.h"
#include "json.h"
#include "pftrace.h"
#include "trace.h"

typedef struct sframe {
    char *id, *name, *parent; /* as the trace says; parent may be NULL */
    char *file;               /* its "file" member, or NULL */
    long line;                /* its "line", or 0 */
    long pidx;                /* parent's index after sorting, or -1 */
    long node;                /* its node in the name tree, or -1 (not made yet), -2 (a loop) */
} sframe;

typedef struct sample {
    int64_t pid, tid, ts;
    char *sf;
    double weight;
} sample;

typedef struct span {
    int64_t pid, tid, ts, end;
} span;

typedef struct node {
    const char *name; /* the frame's, owned by the frames */
    long parent, child, sibling;
    const char *file; /* its frames' source file, "" when they differ, NULL for none */
    long lo, hi;      /* the lines its frames name */
    double total, self;
} node;

struct an_flame {
    sframe *fr;
    size_t nfr, cfr;
    sample *sm;
    size_t nsm, csm;
    span *sp;
    size_t nsp, csp;
    node *nd; /* nd[0]: the root, "all" */
    size_t nnd, cnd;
    uint64_t used, all;
};

static int by_id(const void *a, const void *b) { return strcmp(((const sframe *)a)->id, ((const sframe *)b)->id); }

static long find_frame(const an_flame *f, const char *id)
{
    size_t lo = 0, hi = f->nfr;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->fr[mid].id, id);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* An id or a number, as text (ids are strings or numbers in traces). */
static int read_id(an_input *in, mlprof__sb *val, char **out)
{
    if (an_json_peek(in) == '"') {
        if (an_json_string(in, val) != 0)
            return -1;
    } else {
        mlprof__sb_reset(val);
        if (an_json_skip(in, val) != 0)
            return -1;
    }
    *out = mlprof__strndup(val->data ? val->data : "", val->len);
    return *out ? 0 : -1;
}

static int read_frames(an_input *in, an_flame *f, mlprof__sb *key, mlprof__sb *val)
{
    int more = an_json_open(in, '{', "'{' to start stackFrames");
    while (more == 1) {
        sframe fr = {NULL, NULL, NULL, NULL, 0, -1, -1};
        if (an_json_key(in, key) != 0)
            return -1;
        fr.id = mlprof__strndup(key->data ? key->data : "", key->len);
        int m = an_json_open(in, '{', "'{' to start a stack frame");
        while (m == 1) {
            if (an_json_key(in, key) != 0)
                break;
            if (key->len == 4 && memcmp(key->data, "name", 4) == 0) {
                if (read_id(in, val, &fr.name) != 0)
                    break;
            } else if (key->len == 6 && memcmp(key->data, "parent", 6) == 0) {
                if (read_id(in, val, &fr.parent) != 0)
                    break;
            } else if (key->len == 4 && memcmp(key->data, "file", 4) == 0 && an_json_peek(in) == '"') {
                if (read_id(in, val, &fr.file) != 0)
                    break;
            } else if (key->len == 4 && memcmp(key->data, "line", 4) == 0 && an_json_peek(in) != '"') {
                double v;
                int64_t iv;
                int is_int;
                if (an_json_number(in, &v, &iv, &is_int) != 0)
                    break;
                fr.line = is_int ? (long)iv : (long)v;
            } else if (an_json_skip(in, NULL) != 0) {
                break;
            }
            m = an_json_next(in, '}');
        }
        sframe *g = mlprof__grow(f->fr, &f->cfr, f->nfr, sizeof *g, 256);
        if (m < 0 || in->failed || !g || !fr.id) {
            mlprof__free(fr.id);
            mlprof__free(fr.name);
            mlprof__free(fr.parent);
            mlprof__free(fr.file);
            return -1;
        }
        f->fr = g;
        if (!fr.name)
            fr.name = mlprof__strdup("?");
        g[f->nfr++] = fr;
        more = an_json_next(in, '}');
    }
    return more < 0 ? -1 : 0;
}

static int read_samples(an_input *in, an_flame *f, mlprof__sb *key, mlprof__sb *val)
{
    int more = an_json_open(in, '[', "'[' to start samples");
    while (more == 1) {
        sample s = {0, 0, 0, NULL, 1};
        int m = an_json_open(in, '{', "'{' to start a sample");
        while (m == 1) {
            double v;
            int64_t iv;
            int is_int;
            if (an_json_key(in, key) != 0)
                break;
            int rc;
            if (key->len == 2 && memcmp(key->data, "sf", 2) == 0)
                rc = read_id(in, val, &s.sf);
            else if (key->len == 2 && memcmp(key->data, "ts", 2) == 0)
                rc = an_json_time_ns(in, &s.ts);
            else if (key->len == 3 && (memcmp(key->data, "tid", 3) == 0 || memcmp(key->data, "pid", 3) == 0) &&
                     an_json_peek(in) != '"') {
                rc = an_json_number(in, &v, &iv, &is_int);
                *(key->data[0] == 't' ? &s.tid : &s.pid) = is_int ? iv : (int64_t)v;
            } else if (key->len == 6 && memcmp(key->data, "weight", 6) == 0 && an_json_peek(in) != '"') {
                rc = an_json_number(in, &s.weight, &iv, &is_int);
            } else {
                rc = an_json_skip(in, NULL);
            }
            if (rc != 0)
                break;
            m = an_json_next(in, '}');
        }
        sample *g = mlprof__grow(f->sm, &f->csm, f->nsm, sizeof *g, 1024);
        if (m < 0 || in->failed || !g) {
            mlprof__free(s.sf);
            return -1;
        }
        f->sm = g;
        if (s.sf)
            g[f->nsm++] = s;
        more = an_json_next(in, ']');
    }
    return more < 0 ? -1 : 0;
}

/* The complete spans named span ('X' events), for the filter. */
/* A frame (an async slice, "b" then "e" of one id, as mlprof writes its
 * frames) of the name --span gives: open since its "b", by (pid, id). */
typedef struct open_frame {
    int64_t pid, tid, ts;
    char id[64];
} open_frame;

static int read_events(an_input *in, an_flame *f, const char *want, mlprof__sb *key, mlprof__sb *val)
{
    open_frame *open = NULL;
    size_t nopen = 0, copen = 0;
    int rc_all = 0;
    int more = an_json_open(in, '[', "'[' to start traceEvents");
    while (more == 1) {
        span s = {0, 0, 0, -1};
        int named = 0, complete = 0;
        char ph = 0, id[64] = "";
        int m = an_json_open(in, '{', "'{' to start an event");
        while (m == 1) {
            double v;
            int64_t iv;
            int is_int, rc;
            if (an_json_key(in, key) != 0)
                break;
            if (key->len == 4 && memcmp(key->data, "name", 4) == 0 && an_json_peek(in) == '"') {
                rc = an_json_string(in, val);
                named = rc == 0 && val->len == strlen(want) && memcmp(val->data, want, val->len) == 0;
            } else if (key->len == 2 && memcmp(key->data, "ph", 2) == 0 && an_json_peek(in) == '"') {
                rc = an_json_string(in, val);
                ph = rc == 0 && val->len == 1 ? val->data[0] : 0;
                complete = ph == 'X';
            } else if (key->len == 2 && memcmp(key->data, "id", 2) == 0) {
                mlprof__sb_reset(val);
                rc = an_json_skip(in, val); /* a number or a string: its text names it */
                snprintf(id, sizeof id, "%.*s", (int)(val->len < 63 ? val->len : 63), val->data ? val->data : "");
            } else if (key->len == 2 && memcmp(key->data, "ts", 2) == 0) {
                rc = an_json_time_ns(in, &s.ts);
            } else if (key->len == 3 && memcmp(key->data, "dur", 3) == 0) {
                rc = an_json_time_ns(in, &s.end);
            } else if (key->len == 3 && (memcmp(key->data, "tid", 3) == 0 || memcmp(key->data, "pid", 3) == 0) &&
                       an_json_peek(in) != '"') {
                rc = an_json_number(in, &v, &iv, &is_int);
                *(key->data[0] == 't' ? &s.tid : &s.pid) = is_int ? iv : (int64_t)v;
            } else {
                rc = an_json_skip(in, NULL);
            }
            if (rc != 0)
                break;
            m = an_json_next(in, '}');
        }
        if (m < 0 || in->failed) {
            rc_all = -1;
            break;
        }
        if (named && ph == 'b') { /* a frame begins: its span when its "e" comes */
            open_frame *g = mlprof__grow(open, &copen, nopen, sizeof *g, 16);
            if (!g) {
                rc_all = -1;
                break;
            }
            open = g;
            open[nopen] = (open_frame){s.pid, s.tid, s.ts, ""};
            snprintf(open[nopen++].id, sizeof open->id, "%s", id);
            complete = 0;
        } else if (named && ph == 'e') {
            size_t k = nopen;
            while (k-- > 0 && !(open[k].pid == s.pid && strcmp(open[k].id, id) == 0)) {
            }
            if (k < nopen) { /* the innermost open one of that id: on the thread that began it */
                s = (span){open[k].pid, open[k].tid, open[k].ts, s.ts - open[k].ts};
                open[k] = open[--nopen];
                complete = 1;
            }
        }
        if (named && complete && s.end >= 0) {
            span *g = mlprof__grow(f->sp, &f->csp, f->nsp, sizeof *g, 256);
            if (!g) {
                rc_all = -1;
                break;
            }
            f->sp = g;
            s.end += s.ts;
            g[f->nsp++] = s;
        }
        more = an_json_next(in, ']');
    }
    mlprof__free(open);
    return rc_all < 0 || more < 0 ? -1 : 0;
}

static int by_thread_time(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Whether a span of the filter was open on s's thread at its time. */
static int in_span(const an_flame *f, const sample *s)
{
    /* the last span of that thread starting at or before ts; spans of one
     * name nest rarely, so its predecessors are looked at too, briefly */
    size_t lo = 0, hi = f->nsp;
    span key = {s->pid, s->tid, s->ts, 0};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_thread_time(&f->sp[mid], &key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo, seen = 0; k-- > 0 && seen < 64; seen++) {
        const span *p = &f->sp[k];
        if (p->pid != s->pid || p->tid != s->tid)
            break;
        if (s->ts >= p->ts && s->ts <= p->end)
            return 1;
    }
    return 0;
}

/* A frame's source line into its node's file and line range. */
static void node_place(node *d, const sframe *fr)
{
    if (!fr->file || fr->line <= 0)
        return;
    if (!d->file) {
        d->file = fr->file;
        d->lo = d->hi = fr->line;
    } else if (d->file[0] && strcmp(d->file, fr->file) != 0) {
        d->file = ""; /* several files (inlined code, or --lines off and names alike) */
    } else {
        d->lo = fr->line < d->lo ? fr->line : d->lo;
        d->hi = fr->line > d->hi ? fr->line : d->hi;
    }
}

/* The file's last part (the hover text and --lines names are short). */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* With lines: a frame's name gets its file and line, so that the tree
 * tells a function's lines apart. */
static int name_lines(an_flame *f)
{
    for (size_t k = 0; k < f->nfr; k++) {
        sframe *fr = &f->fr[k];
        if (!fr->file || fr->line <= 0)
            continue;
        size_t len = strlen(fr->name) + strlen(base_name(fr->file)) + 32;
        char *name = mlprof__malloc(len);
        if (!name)
            return -1;
        snprintf(name, len, "%s (%s:%ld)", fr->name, base_name(fr->file), fr->line);
        mlprof__free(fr->name);
        fr->name = name;
    }
    return 0;
}

/* The name tree's node for frame k (made with its ancestors), or -1. */
static long frame_node(an_flame *f, long k, int depth)
{
    sframe *fr = &f->fr[k];
    if (fr->node >= 0)
        return fr->node;
    if (fr->node == -2 || depth > 4096) /* a parent chain that loops */
        return -1;
    fr->node = -2;
    long parent = fr->pidx >= 0 ? frame_node(f, fr->pidx, depth + 1) : 0;
    if (parent < 0)
        return fr->node = -1;
    for (long c = f->nd[parent].child; c >= 0; c = f->nd[c].sibling) {
        if (strcmp(f->nd[c].name, fr->name) == 0) {
            node_place(&f->nd[c], fr);
            return fr->node = c;
        }
    }
    node *g = mlprof__grow(f->nd, &f->cnd, f->nnd, sizeof *g, 1024);
    if (!g)
        return fr->node = -1;
    f->nd = g;
    long id = (long)f->nnd++;
    g[id] = (node){.name = fr->name, .parent = parent, .child = -1, .sibling = g[parent].child};
    node_place(&g[id], fr);
    g[parent].child = id;
    return fr->node = id;
}

/* Text of an unsigned number, owned. */
static char *id_text(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return mlprof__strdup(b);
}

/* A Perfetto trace's samples (its PerfSample packets, pftrace.c) into f:
 * its stack nodes as frames, its slices named span_name as the spans. 0,
 * 1 when it has no samples, -1 with err. */
static int read_pftrace(an_flame *f, const char *path, const char *span_name, char *err, size_t errlen)
{
    an_trace t;
    if (an_trace_read(&t, path) != 0) {
        snprintf(err, errlen, "%s", t.error);
        an_trace_free(&t);
        return -1;
    }
    int rc = t.nssamples ? 0 : 1;
    for (size_t k = 1; rc == 0 && k < t.nsnodes; k++) {
        sframe *g = mlprof__grow(f->fr, &f->cfr, f->nfr, sizeof *g, 256);
        if (!g) {
            rc = -1;
            break;
        }
        f->fr = g;
        sframe fr = {id_text(k), mlprof__strdup(t.snodes[k].name),
                     t.snodes[k].parent ? id_text(t.snodes[k].parent) : NULL, NULL, 0, -1, -1};
        g[f->nfr++] = fr;
        if (!fr.id || !fr.name || (t.snodes[k].parent && !fr.parent))
            rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < t.nssamples; i++) {
        sample *g = mlprof__grow(f->sm, &f->csm, f->nsm, sizeof *g, 1024);
        if (!g) {
            rc = -1;
            break;
        }
        f->sm = g;
        const an_stack_sample *s = &t.ssamples[i];
        g[f->nsm] = (sample){s->pid, s->tid, s->ts, id_text(s->node), 1};
        if (!g[f->nsm++].sf)
            rc = -1;
    }
    for (size_t i = 0; rc == 0 && span_name && i < t.nev; i++) {
        const an_event *e = &t.ev[i];
        if ((e->ph != 'X' && e->ph != 'b') || strcmp(e->name, span_name) != 0)
            continue;
        span sp = {e->pid, e->tid, e->ts, e->ts + e->dur};
        if (e->ph == 'b') { /* a frame: to its "e" of the same process and id */
            size_t k = i + 1;
            while (k < t.nev && !(t.ev[k].ph == 'e' && t.ev[k].pid == e->pid && t.ev[k].id == e->id &&
                                  strcmp(t.ev[k].name, span_name) == 0))
                k++;
            if (k == t.nev)
                continue;
            sp.end = t.ev[k].ts;
        }
        span *g = mlprof__grow(f->sp, &f->csp, f->nsp, sizeof *g, 256);
        if (!g) {
            rc = -1;
            break;
        }
        f->sp = g;
        g[f->nsp++] = sp;
    }
    if (rc < 0)
        snprintf(err, errlen, "out of memory");
    an_trace_free(&t);
    return rc;
}

an_flame *an_flame_read(const char *path, const char *span_name, int lines, char *err, size_t errlen)
{
    an_flame *f = mlprof__calloc(1, sizeof *f);
    an_input in;
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (an_input_open(&in, path) != 0) {
        snprintf(err, errlen, "%s", in.error);
        mlprof__free(f);
        return NULL;
    }
    mlprof__sb key, val;
    mlprof__sb_init(&key);
    mlprof__sb_init(&val);
    int seen = 0, rc = 0, more = 0;
    int proto = an_pftrace_detect(&in, path);
    if (proto) {
        an_input_close(&in);
        rc = read_pftrace(f, path, span_name, err, errlen); /* err set when -1 */
        seen = rc == 0 ? 3 : 0;
        if (rc > 0)
            rc = 0; /* no samples: said below */
    } else {
        more = an_json_open(&in, '{', "'{' to start the trace (a JSON object with stackFrames and samples)");
    }
    while (more == 1 && rc == 0) {
        if (an_json_key(&in, &key) != 0) {
            rc = -1;
            break;
        }
        if (key.len == 11 && memcmp(key.data, "stackFrames", 11) == 0)
            rc = read_frames(&in, f, &key, &val), seen |= 1;
        else if (key.len == 7 && memcmp(key.data, "samples", 7) == 0)
            rc = read_samples(&in, f, &key, &val), seen |= 2;
        else if (span_name && key.len == 11 && memcmp(key.data, "traceEvents", 11) == 0)
            rc = read_events(&in, f, span_name, &key, &val);
        else
            rc = an_json_skip(&in, NULL);
        if (rc == 0)
            more = an_json_next(&in, '}');
    }
    if (more < 0)
        rc = -1;
    if (rc != 0 && !proto)
        snprintf(err, errlen, "%s", in.error[0] ? in.error : "out of memory");
    else if (rc == 0 && seen != 3)
        snprintf(err, errlen, "%s: no sampled call stacks (no stackFrames and samples, or PerfSample packets: "
                              "record with the sampling key, mlprof run --sample HZ)", path), rc = -1;
    if (!proto)
        an_input_close(&in);
    mlprof__sb_free(&key);
    mlprof__sb_free(&val);
    /* the tree: frames by id, then each sample's path */
    if (rc == 0 && f->nfr)
        qsort(f->fr, f->nfr, sizeof *f->fr, by_id);
    for (size_t k = 0; rc == 0 && k < f->nfr; k++)
        f->fr[k].pidx = f->fr[k].parent ? find_frame(f, f->fr[k].parent) : -1;
    if (rc == 0 && f->nsp)
        qsort(f->sp, f->nsp, sizeof *f->sp, by_thread_time);
    if (rc == 0 && lines && name_lines(f) != 0)
        rc = -1, snprintf(err, errlen, "out of memory");
    if (rc == 0 && !(f->nd = mlprof__calloc(1, sizeof *f->nd)))
        rc = -1, snprintf(err, errlen, "out of memory");
    if (rc == 0) {
        f->nnd = f->cnd = 1;
        f->nd[0] = (node){.name = "all", .parent = -1, .child = -1, .sibling = -1};
    }
    for (size_t i = 0; rc == 0 && i < f->nsm; i++) {
        const sample *s = &f->sm[i];
        f->all++;
        if (span_name && !in_span(f, s))
            continue;
        long k = find_frame(f, s->sf);
        long n = k >= 0 ? frame_node(f, k, 0) : -1;
        if (n < 0)
            continue; /* a frame the trace does not define */
        f->used++;
        f->nd[n].self += s->weight;
        for (long p = n; p >= 0; p = f->nd[p].parent)
            f->nd[p].total += s->weight;
    }
    if (rc != 0) {
        an_flame_free(f);
        return NULL;
    }
    return f;
}

int an_flame_stacks(const an_flame *f, an_flame_map_fn map, void *ctx, mlprof__stack_frame_out **frames,
                    size_t *nframes, mlprof__stack_sample_out **samples, size_t *nsamples, size_t *skipped)
{
    *frames = mlprof__calloc(f->nfr + 1, sizeof **frames);
    *samples = mlprof__calloc(f->nsm ? f->nsm : 1, sizeof **samples);
    *nframes = *nsamples = *skipped = 0;
    if (!*frames || !*samples) {
        mlprof__free(*frames);
        mlprof__free(*samples);
        *frames = NULL;
        *samples = NULL;
        return -1;
    }
    for (size_t k = 0; k < f->nfr; k++) { /* frame k is [k + 1] */
        const sframe *fr = &f->fr[k];
        (*frames)[k + 1] = (mlprof__stack_frame_out){.name = fr->name, .object = "", .file = fr->file,
                                                     .line = (int)fr->line,
                                                     .parent = fr->pidx >= 0 ? (uint32_t)fr->pidx + 1 : 0};
    }
    *nframes = f->nfr + 1;
    for (size_t i = 0; i < f->nsm; i++) {
        const sample *s = &f->sm[i];
        long k = find_frame(f, s->sf);
        if (k < 0) {
            ++*skipped;
            continue;
        }
        (*samples)[(*nsamples)++] = (mlprof__stack_sample_out){(uint64_t)map(ctx, 1, s->ts), (pid_t)map(ctx, 2, s->tid),
                                                               (uint32_t)k + 1, (pid_t)map(ctx, 0, s->pid)};
    }
    return 0;
}

void an_flame_free(an_flame *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nfr; i++) {
        mlprof__free(f->fr[i].id);
        mlprof__free(f->fr[i].name);
        mlprof__free(f->fr[i].parent);
        mlprof__free(f->fr[i].file);
    }
    for (size_t i = 0; i < f->nsm; i++)
        mlprof__free(f->sm[i].sf);
    mlprof__free(f->fr);
    mlprof__free(f->sm);
    mlprof__free(f->sp);
    mlprof__free(f->nd);
    mlprof__free(f);
}

uint64_t an_flame_samples(const an_flame *f) { return f->used; }
uint64_t an_flame_all_samples(const an_flame *f) { return f->all; }

/* A name as a folded-stack element: ';' separates frames, so it becomes ':'. */
static void put_folded_name(mlprof__sb *out, const char *name)
{
    for (const char *p = name; *p; p++)
        mlprof__sb_putc(out, *p == ';' ? ':' : *p == '\n' ? ' ' : *p);
}

static void folded_path(const an_flame *f, long n, mlprof__sb *out)
{
    if (f->nd[n].parent > 0) {
        folded_path(f, f->nd[n].parent, out);
        mlprof__sb_putc(out, ';');
    }
    put_folded_name(out, f->nd[n].name);
}

int an_flame_folded(const an_flame *f, mlprof__sb *out)
{
    for (size_t n = 1; n < f->nnd; n++) {
        if (f->nd[n].self <= 0)
            continue;
        folded_path(f, (long)n, out);
        mlprof__sb_printf(out, " %.0f\n", f->nd[n].self);
    }
    return out->failed ? -1 : 0;
}

/* ------------------------------------------------------------------ SVG */

#define SVG_W 1200.0
#define ROW 17.0
#define PAD_TOP 40.0
#define PAD_BOTTOM 30.0

static int max_depth(const an_flame *f, long n)
{
    int d = 0;
    for (long c = f->nd[n].child; c >= 0; c = f->nd[c].sibling) {
        if (f->nd[c].total > 0) {
            int k = max_depth(f, c) + 1;
            d = k > d ? k : d;
        }
    }
    return d;
}

/* Children in name order, so that a graph does not depend on sample order. */
static int by_name(const void *a, const void *b, void *ctx)
{
    const an_flame *f = ctx;
    return strcmp(f->nd[*(const long *)a].name, f->nd[*(const long *)b].name);
}

static const an_flame *g_sort_flame; /* qsort has no context argument in C11 */
static int by_name_q(const void *a, const void *b) { return by_name(a, b, (void *)g_sort_flame); }

/* A Python frame's name ends in "(FILE.py:LINE)" or "(FILE.py)". */
static int python_frame(const char *name)
{
    size_t n = strlen(name);
    if (n < 5 || name[n - 1] != ')')
        return 0;
    size_t i = n - 1;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
        i--;
    if (i < n - 1 && i > 0 && name[i - 1] == ':')
        i--;
    return i >= 4 && memcmp(name + i - 3, ".py", 3) == 0 && memchr(name, '(', i - 3) != NULL;
}

static void put_frame(const an_flame *f, long n, double x, int depth, int height_rows, mlprof__sb *out)
{
    const node *d = &f->nd[n];
    double total = f->nd[0].total;
    double w = d->total / total * SVG_W;
    double y = PAD_TOP + (double)(height_rows - 1 - depth) * ROW;
    /* warm colors by the name, stable from run to run; Python frames
     * ("train (main.py:12)", src/hw/pyframes.c) in cool ones */
    unsigned h = 2166136261u;
    for (const char *p = d->name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    int r = 205 + (int)(h % 50), g = 80 + (int)((h >> 8) % 130), b = 30 + (int)((h >> 16) % 40);
    if (python_frame(d->name))
        r = 60 + (int)(h % 50), g = 150 + (int)((h >> 8) % 70), b = 200 + (int)((h >> 16) % 55);
    mlprof__sb_printf(out, "<g class=\"f\" data-x=\"%.6f\" data-w=\"%.6f\" data-d=\"%d\" data-n=\"%.0f\"><title>", x,
                      w, depth, d->total);
    mlprof__sb_xml(out, d->name, strlen(d->name));
    mlprof__sb_printf(out, " (%.0f samples, %.2f%%)", d->total, 100.0 * d->total / total);
    if (d->file && d->file[0]) { /* after the counts: the script's label is what precedes them */
        mlprof__sb_putc(out, ' ');
        mlprof__sb_xml(out, base_name(d->file), strlen(base_name(d->file)));
        if (d->lo == d->hi)
            mlprof__sb_printf(out, ":%ld", d->lo);
        else
            mlprof__sb_printf(out, ":%ld-%ld", d->lo, d->hi);
    }
    mlprof__sb_printf(out, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                           "fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
                      x, y, w, ROW - 1, r, g, b, x + 3, y + ROW - 5);
    size_t fit = w > 20 ? (size_t)((w - 6) / 7) : 0; /* about 7 pixels a character */
    size_t len = strlen(d->name);
    if (fit >= len)
        mlprof__sb_xml(out, d->name, len);
    else if (fit > 2) {
        mlprof__sb_xml(out, d->name, fit - 2);
        mlprof__sb_puts(out, "..");
    }
    mlprof__sb_puts(out, "</text></g>\n");
    size_t nc = 0;
    for (long c = d->child; c >= 0; c = f->nd[c].sibling)
        nc += f->nd[c].total > 0;
    if (!nc)
        return;
    long *kids = mlprof__malloc(nc * sizeof *kids);
    if (!kids) {
        out->failed = 1;
        return;
    }
    nc = 0;
    for (long c = d->child; c >= 0; c = f->nd[c].sibling) {
        if (f->nd[c].total > 0)
            kids[nc++] = c;
    }
    g_sort_flame = f;
    qsort(kids, nc, sizeof *kids, by_name_q);
    for (size_t i = 0; i < nc; i++) {
        put_frame(f, kids[i], x, depth + 1, height_rows, out);
        x += f->nd[kids[i]].total / total * SVG_W;
    }
    mlprof__free(kids);
}

static const char k_script[] =
    "<script><![CDATA[\n"
    "var W=1200,frames=document.querySelectorAll('g.f'),info=document.getElementById('info');\n"
    "function label(g,w){var t=g.querySelector('text'),n=g.querySelector('title').textContent;\n"
    " n=n.substring(0,n.lastIndexOf(' (',n.lastIndexOf(' samples, ')));var fit=Math.floor((w-6)/7);\n"
    " t.textContent=w<20?'':fit>=n.length?n:fit>2?n.substring(0,fit-2)+'..':'';}\n"
    "function zoom(g){var x0=+g.dataset.x,w0=+g.dataset.w,d0=+g.dataset.d;\n"
    " frames.forEach(function(h){var x=+h.dataset.x,w=+h.dataset.w,d=+h.dataset.d,r=h.querySelector('rect'),\n"
    "  t=h.querySelector('text');var inside=d>=d0&&x>=x0-1e-6&&x+w<=x0+w0+1e-6,\n"
    "  above=d<d0&&x<=x0+1e-6&&x+w>=x0+w0-1e-6;\n"
    "  if(!inside&&!above){h.style.display='none';return;}h.style.display='';\n"
    "  var nx=inside?(x-x0)/w0*W:0,nw=inside?w/w0*W:W;r.setAttribute('x',nx);r.setAttribute('width',nw);\n"
    "  t.setAttribute('x',nx+3);h.style.opacity=above?0.6:1;label(h,nw);});}\n"
    "frames.forEach(function(g){\n"
    " g.addEventListener('click',function(){zoom(g);});\n"
    " g.addEventListener('mouseover',function(){info.textContent=g.querySelector('title').textContent;});\n"
    " g.addEventListener('mouseout',function(){info.textContent=' ';});});\n"
    "document.getElementById('reset').addEventListener('click',function(){zoom(frames[0]);});\n"
    "]]></script>\n";

int an_flame_svg(const an_flame *f, const char *title, mlprof__sb *out)
{
    int depth = max_depth(f, 0) + 1;
    double height = PAD_TOP + depth * ROW + PAD_BOTTOM;
    mlprof__sb_printf(out,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                      "viewBox=\"0 0 %.0f %.0f\" font-family=\"Verdana, sans-serif\" font-size=\"12\">\n"
                      "<style>g.f{cursor:pointer}g.f:hover rect{stroke:#000;stroke-width:0.7}"
                      "text{pointer-events:none;fill:#000}#reset{cursor:pointer;fill:#1a5fb4}</style>\n"
                      "<rect width=\"100%%\" height=\"100%%\" fill=\"#fdfaf3\"/>\n"
                      "<text x=\"%.0f\" y=\"20\" text-anchor=\"middle\" font-size=\"16\">",
                      SVG_W, height, SVG_W, height, SVG_W / 2);
    mlprof__sb_xml(out, title, strlen(title));
    mlprof__sb_printf(out,
                      "</text>\n<text id=\"reset\" x=\"10\" y=\"20\">Reset zoom</text>\n"
                      "<text x=\"%.0f\" y=\"20\" text-anchor=\"end\" fill=\"#555\">%llu samples; click a frame to "
                      "zoom</text>\n",
                      SVG_W - 10, (unsigned long long)f->used);
    if (f->nd[0].total > 0)
        put_frame(f, 0, 0, 0, depth, out);
    mlprof__sb_printf(out, "<text id=\"info\" x=\"10\" y=\"%.0f\"> </text>\n", height - 10);
    mlprof__sb_puts(out, k_script);
    mlprof__sb_puts(out, "</svg>\n");
    return out->failed ? -1 : 0;
}

/* ----------------------------------------------------------- the merge */

static void put_prefixed(mlprof__sb *out, const char *prefix, const mlprof__sb *id)
{
    mlprof__sb both;
    mlprof__sb_init(&both);
    mlprof__sb_puts(&both, prefix);
    mlprof__sb_put(&both, id->data ? id->data : "", id->len);
    mlprof__sb_json_str(out, both.data ? both.data : "", both.len);
    out->failed |= both.failed;
    mlprof__sb_free(&both);
}

/* An id (string or number) into val, as text. */
static int read_id_text(an_input *in, mlprof__sb *val)
{
    if (an_json_peek(in) == '"')
        return an_json_string(in, val);
    mlprof__sb_reset(val);
    return an_json_skip(in, val);
}

static int copy_frames(an_input *in, const char *prefix, mlprof__sb *out, int *first, long *n, mlprof__sb *key,
                       mlprof__sb *val)
{
    int more = an_json_open(in, '{', "'{' to start stackFrames");
    while (more == 1) {
        if (an_json_key(in, key) != 0)
            return -1;
        if (!*first)
            mlprof__sb_puts(out, ",\n");
        *first = 0;
        put_prefixed(out, prefix, key);
        mlprof__sb_puts(out, ":{");
        int m = an_json_open(in, '{', "'{' to start a stack frame"), members = 0;
        while (m == 1) {
            if (an_json_key(in, key) != 0)
                return -1;
            if (members++)
                mlprof__sb_putc(out, ',');
            mlprof__sb_json_str(out, key->data ? key->data : "", key->len);
            mlprof__sb_putc(out, ':');
            if (key->len == 6 && memcmp(key->data, "parent", 6) == 0) {
                if (read_id_text(in, val) != 0)
                    return -1;
                put_prefixed(out, prefix, val);
            } else if (an_json_skip(in, out) != 0) {
                return -1;
            }
            m = an_json_next(in, '}');
        }
        if (m < 0)
            return -1;
        mlprof__sb_putc(out, '}');
        (*n)++;
        more = an_json_next(in, '}');
    }
    return more < 0 ? -1 : 0;
}

static int copy_samples(an_input *in, const char *prefix, an_flame_map_fn map, void *ctx, mlprof__sb *out,
                        int *first, long *n, mlprof__sb *key, mlprof__sb *val)
{
    int more = an_json_open(in, '[', "'[' to start samples");
    while (more == 1) {
        if (!*first)
            mlprof__sb_puts(out, ",\n");
        *first = 0;
        mlprof__sb_putc(out, '{');
        int m = an_json_open(in, '{', "'{' to start a sample"), members = 0;
        while (m == 1) {
            double v;
            int64_t iv, ns;
            int is_int;
            if (an_json_key(in, key) != 0)
                return -1;
            if (members++)
                mlprof__sb_putc(out, ',');
            mlprof__sb_json_str(out, key->data ? key->data : "", key->len);
            mlprof__sb_putc(out, ':');
            if (key->len == 2 && memcmp(key->data, "sf", 2) == 0) {
                if (read_id_text(in, val) != 0)
                    return -1;
                put_prefixed(out, prefix, val);
            } else if (key->len == 2 && memcmp(key->data, "ts", 2) == 0) {
                if (an_json_time_ns(in, &ns) != 0)
                    return -1;
                ns = map(ctx, 1, ns);
                if (ns < 0) {
                    mlprof__sb_putc(out, '-');
                    ns = -ns;
                }
                mlprof__sb_us(out, (uint64_t)ns);
            } else if (key->len == 3 && memcmp(key->data, "pid", 3) == 0 && an_json_peek(in) != '"') {
                if (an_json_number(in, &v, &iv, &is_int) != 0)
                    return -1;
                mlprof__sb_i64(out, map(ctx, 0, is_int ? iv : (int64_t)v));
            } else if (an_json_skip(in, out) != 0) {
                return -1;
            }
            m = an_json_next(in, '}');
        }
        if (m < 0)
            return -1;
        mlprof__sb_putc(out, '}');
        (*n)++;
        more = an_json_next(in, ']');
    }
    return more < 0 ? -1 : 0;
}

/* an_flame_copy for a Perfetto trace: its stack nodes as stackFrames
 * members (name and parent; the object is not in its frames' names), its
 * PerfSample packets as samples, in the JSON's shape. */
static long copy_pftrace(const char *path, int which, const char *prefix, an_flame_map_fn map, void *ctx,
                         mlprof__sb *out, int *first, char *err, size_t errlen)
{
    an_trace t;
    if (an_trace_read(&t, path) != 0) {
        snprintf(err, errlen, "%s", t.error);
        an_trace_free(&t);
        return -1;
    }
    mlprof__sb id;
    mlprof__sb_init(&id);
    long n = 0;
    for (size_t k = 1; !which && t.nssamples && k < t.nsnodes; k++, n++) {
        mlprof__sb_puts(out, *first ? "" : ",\n");
        *first = 0;
        mlprof__sb_reset(&id);
        mlprof__sb_printf(&id, "%zu", k);
        put_prefixed(out, prefix, &id);
        mlprof__sb_puts(out, ":{\"name\":");
        mlprof__sb_json_str(out, t.snodes[k].name, strlen(t.snodes[k].name));
        if (t.snodes[k].parent) {
            mlprof__sb_reset(&id);
            mlprof__sb_printf(&id, "%u", t.snodes[k].parent);
            mlprof__sb_puts(out, ",\"parent\":");
            put_prefixed(out, prefix, &id);
        }
        mlprof__sb_putc(out, '}');
    }
    for (size_t i = 0; which && i < t.nssamples; i++, n++) {
        const an_stack_sample *s = &t.ssamples[i];
        mlprof__sb_puts(out, *first ? "{\"cpu\":0,\"pid\":" : ",\n{\"cpu\":0,\"pid\":");
        *first = 0;
        mlprof__sb_i64(out, map(ctx, 0, s->pid));
        mlprof__sb_puts(out, ",\"tid\":");
        mlprof__sb_i64(out, s->tid);
        mlprof__sb_puts(out, ",\"ts\":");
        int64_t ns = map(ctx, 1, s->ts);
        if (ns < 0) {
            mlprof__sb_putc(out, '-');
            ns = -ns;
        }
        mlprof__sb_us(out, (uint64_t)ns);
        mlprof__sb_reset(&id);
        mlprof__sb_printf(&id, "%u", s->node);
        mlprof__sb_puts(out, ",\"name\":\"cpu-clock\",\"sf\":");
        put_prefixed(out, prefix, &id);
        mlprof__sb_puts(out, ",\"weight\":1}");
    }
    if (id.failed || out->failed) {
        snprintf(err, errlen, "out of memory");
        n = -1;
    }
    mlprof__sb_free(&id);
    an_trace_free(&t);
    return n;
}

long an_flame_copy(const char *path, int which, const char *prefix, an_flame_map_fn map, void *ctx, mlprof__sb *out,
                   int *first, char *err, size_t errlen)
{
    an_input in;
    if (an_input_open(&in, path) != 0) {
        snprintf(err, errlen, "%s", in.error);
        return -1;
    }
    long n = 0;
    int rc = 0;
    if (an_json_peek(&in) != '{') { /* a Perfetto trace: its PerfSample packets, or nothing */
        int proto = an_pftrace_detect(&in, path);
        an_input_close(&in);
        return proto ? copy_pftrace(path, which, prefix, map, ctx, out, first, err, errlen) : 0;
    }
    mlprof__sb key, val;
    mlprof__sb_init(&key);
    mlprof__sb_init(&val);
    const char *want = which ? "samples" : "stackFrames";
    int more = an_json_open(&in, '{', "'{' to start the trace");
    while (more == 1 && rc == 0) {
        if (an_json_key(&in, &key) != 0) {
            rc = -1;
            break;
        }
        if (key.len == strlen(want) && memcmp(key.data, want, key.len) == 0)
            rc = which ? copy_samples(&in, prefix, map, ctx, out, first, &n, &key, &val)
                       : copy_frames(&in, prefix, out, first, &n, &key, &val);
        else
            rc = an_json_skip(&in, NULL);
        if (rc == 0)
            more = an_json_next(&in, '}');
    }
    if (more < 0 || rc != 0) {
        snprintf(err, errlen, "%s", in.error[0] ? in.error : "out of memory");
        n = -1;
    }
    an_input_close(&in);
    mlprof__sb_free(&key);
    mlprof__sb_free(&val);
    return n;
}
