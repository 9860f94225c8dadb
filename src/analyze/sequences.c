/*
 * sequences.c - recurring runs of kernels on a GPU stream. Every window of
 * 2..N consecutive GPU events of a stream is a candidate, keyed by its
 * kernels' interned names and the op stack of its first kernel; a hash map
 * counts them in one pass per length.
 */
#include <string.h>

#include "analyze.h"
#include "gpu.h"
#include "sequences.h"

typedef struct seq_row {
    const char *const *names; /* the kernels' names of its first occurrence (into seq_ctx.names) */
    const char *stack;  /* the op stack of its first kernel */
    size_t first;       /* the position (in the sorted GPU events) of its first occurrence */
    size_t next_free;   /* the position after its last counted occurrence */
    size_t count;
    int64_t gpu_ns;
    int len;
} seq_row;

typedef struct seq_ctx {
    const an_trace *t;
    const an_gpu_links *l;
    size_t *ev;          /* GPU events, by stream and start */
    const char **names;  /* per position: its event's name */
    size_t n;
    const char **stack;  /* per position: the interned op stack of its event */
    seq_row *rows;
    size_t nrows, cap;
} seq_ctx;

/* A GPU event's place: its stream, its start, its index (for ties). */
typedef struct placed {
    int64_t pid, tid, ts;
    size_t i;
} placed;

static int placed_cmp(const void *pa, const void *pb)
{
    const placed *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int same_stream(const seq_ctx *c, size_t i, size_t j)
{
    const an_event *a = &c->t->ev[c->ev[i]], *b = &c->t->ev[c->ev[j]];
    return a->pid == b->pid && a->tid == b->tid;
}

/* Counts the windows of length len. */
static int count_length(seq_ctx *c, int len)
{
    mlprof__map m;
    mlprof__map_init(&m);
    const void *key[AN_SEQ_MAX_LENGTH + 1];
    int rc = 0;
    for (size_t j = 0; rc == 0 && j + (size_t)len <= c->n; j++) {
        if (!same_stream(c, j, j + (size_t)len - 1))
            continue;
        key[0] = c->stack[j];
        for (int k = 0; k < len; k++)
            key[k + 1] = c->t->ev[c->ev[j + (size_t)k]].name;
        mlprof__map_entry *e = mlprof__map_slot(&m, (const char *)key, (size_t)(len + 1) * sizeof key[0]);
        if (!e) {
            rc = -1;
            break;
        }
        if (!e->value) {
            seq_row *r = mlprof__grow(c->rows, &c->cap, c->nrows, sizeof *r, 256);
            if (!r) {
                rc = -1;
                break;
            }
            c->rows = r;
            r[c->nrows] = (seq_row){c->names + j, c->stack[j], j, 0, 0, 0, len};
            e->value = (void *)(uintptr_t)(++c->nrows);
        }
        seq_row *r = &c->rows[(uintptr_t)e->value - 1];
        if (j < r->next_free)
            continue; /* overlaps the occurrence counted before */
        r->count++;
        r->next_free = j + (size_t)len;
        for (int k = 0; k < len; k++)
            r->gpu_ns += c->t->ev[c->ev[j + (size_t)k]].dur;
    }
    mlprof__map_free(&m);
    return rc;
}

static int row_cmp(const void *pa, const void *pb)
{
    const seq_row *a = pa, *b = pb;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    if (a->gpu_ns != b->gpu_ns)
        return a->gpu_ns > b->gpu_ns ? -1 : 1;
    int s = strcmp(a->stack, b->stack);
    for (int k = 0; s == 0 && k < a->len; k++)
        s = strcmp(a->names[k], b->names[k]);
    return s;
}

static const char *op_name(const an_trace *t, int32_t i) { return i >= 0 ? t->ev[i].name : NULL; }

static void put_json_name(mlprof__sb *out, const char *s)
{
    if (s)
        mlprof__sb_json_str(out, s, strlen(s));
    else
        mlprof__sb_puts(out, "null");
}

static void put_row(const seq_ctx *c, const seq_row *r, int format, int first, mlprof__sb *out)
{
    const an_trace *t = c->t;
    size_t i0 = c->ev[r->first];
    const char *bottom = op_name(t, c->l->bottom[i0]), *top = op_name(t, c->l->top[i0]);
    const an_event *e0 = &t->ev[i0];
    if (format == AN_JSON) {
        mlprof__sb_printf(out, "%s{\"length\":%d,\"count\":%zu,\"gpu_time_ns\":%lld,\"kernels\":[", first ? "" : ",",
                          r->len, r->count, (long long)r->gpu_ns);
        for (int k = 0; k < r->len; k++) {
            if (k)
                mlprof__sb_putc(out, ',');
            put_json_name(out, t->ev[c->ev[r->first + (size_t)k]].name);
        }
        mlprof__sb_puts(out, "],\"op_stack\":");
        put_json_name(out, c->stack[r->first]);
        mlprof__sb_puts(out, ",\"bottom_op\":");
        put_json_name(out, bottom);
        mlprof__sb_puts(out, ",\"top_op\":");
        put_json_name(out, top);
        mlprof__sb_printf(out, ",\"first_pid\":%lld,\"first_tid\":%lld,\"first_ts_ns\":%lld}", (long long)e0->pid,
                          (long long)e0->tid, (long long)e0->ts);
        return;
    }
    if (format == AN_CSV) {
        mlprof__sb_printf(out, "%d,%zu,%lld,", r->len, r->count, (long long)r->gpu_ns);
        mlprof__sb sq;
        mlprof__sb_init(&sq);
        for (int k = 0; k < r->len; k++) {
            if (k)
                mlprof__sb_puts(&sq, " | ");
            mlprof__sb_puts(&sq, t->ev[c->ev[r->first + (size_t)k]].name);
        }
        mlprof__sb_csv(out, sq.data ? sq.data : "");
        mlprof__sb_free(&sq);
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, c->stack[r->first]);
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, bottom ? bottom : "");
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, top ? top : "");
        mlprof__sb_putc(out, '\n');
        return;
    }
    mlprof__sb_printf(out, "  %7zu  ", r->count);
    mlprof__sb d;
    mlprof__sb_init(&d);
    mlprof__sb_duration(&d, (uint64_t)r->gpu_ns);
    mlprof__sb_printf(out, "%12s  %s\n", d.data ? d.data : "", c->stack[r->first]);
    mlprof__sb_free(&d);
    for (int k = 0; k < r->len; k++)
        mlprof__sb_printf(out, "  %7s  %12s    %d. %s\n", "", "", k + 1, t->ev[c->ev[r->first + (size_t)k]].name);
}

static void put_rows(const seq_ctx *c, int max_len, int top, int format, mlprof__sb *out)
{
    const an_trace *t = c->t;
    if (format == AN_JSON) {
        mlprof__sb_puts(out, "{\"trace\":");
        put_json_name(out, t->path ? t->path : "");
        mlprof__sb_printf(out, ",\"max_length\":%d,\"top\":%d,\"gpu_events\":%zu,\"sequences\":[", max_len, top,
                          c->n);
    } else if (format == AN_CSV) {
        mlprof__sb_puts(out, "length,count,gpu_time_ns,kernels,op_stack,bottom_op,top_op\n");
    } else {
        mlprof__sb_printf(out,
                          "Frequent kernel sequences: %zu GPU events; runs of consecutive kernels on a stream, "
                          "counted without overlap, with the op stack of their first kernel\n",
                          c->n);
    }
    int first = 1;
    size_t i = 0;
    for (int len = max_len; len >= 2; len--) {
        if (format == AN_TABLE)
            mlprof__sb_printf(out, "\nLength %d:\n  %7s  %12s  %s\n", len, "count", "GPU time",
                              "launched by (op stack of the first kernel), then the kernels");
        int shown = 0;
        for (; i < c->nrows && c->rows[i].len == len; i++) {
            if (c->rows[i].count < 2 || (top > 0 && shown >= top))
                continue;
            put_row(c, &c->rows[i], format, first, out);
            first = 0;
            shown++;
        }
        if (format == AN_TABLE && !shown)
            mlprof__sb_puts(out, "  (no sequence of this length occurs twice)\n");
    }
    if (format == AN_JSON)
        mlprof__sb_puts(out, "]}\n");
}

int an_sequences(an_trace *t, int max_len, int top, int format, mlprof__sb *out)
{
    if (max_len < 2)
        max_len = 2;
    if (max_len > AN_SEQ_MAX_LENGTH)
        max_len = AN_SEQ_MAX_LENGTH;
    an_gpu_links l;
    if (an_gpu_link(t, &l) != 0)
        return -1;
    seq_ctx c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.l = &l;
    placed *p = mlprof__malloc((t->nev ? t->nev : 1) * sizeof *p);
    int rc = p ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        if (l.kind[i])
            p[c.n++] = (placed){t->ev[i].pid, t->ev[i].tid, t->ev[i].ts, i};
    }
    if (rc == 0) {
        mlprof__sort(p, c.n, sizeof *p, placed_cmp);
        c.ev = mlprof__malloc((c.n ? c.n : 1) * sizeof *c.ev);
        c.names = mlprof__malloc((c.n ? c.n : 1) * sizeof *c.names);
        c.stack = mlprof__malloc((c.n ? c.n : 1) * sizeof *c.stack);
        rc = c.ev && c.names && c.stack ? 0 : -1;
    }
    for (size_t j = 0; rc == 0 && j < c.n; j++) {
        c.ev[j] = p[j].i;
        c.names[j] = t->ev[p[j].i].name;
    }
    mlprof__free(p);
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    for (size_t j = 0; rc == 0 && j < c.n; j++) {
        mlprof__sb_reset(&sb);
        an_gpu_op_stack(t, &l, c.ev[j], &sb);
        c.stack[j] = sb.failed ? NULL : an_intern(t, sb.data ? sb.data : "", sb.len);
        if (!c.stack[j])
            rc = -1;
    }
    mlprof__sb_free(&sb);
    for (int len = 2; rc == 0 && len <= max_len; len++)
        rc = count_length(&c, len);
    if (rc == 0) {
        mlprof__sort(c.rows, c.nrows, sizeof *c.rows, row_cmp);
        put_rows(&c, max_len, top, format, out);
    }
    mlprof__free(c.rows);
    mlprof__free(c.names);
    mlprof__free(c.stack);
    mlprof__free(c.ev);
    an_gpu_links_free(&l);
    return rc == 0 && !out->failed ? 0 : -1;
}
