/*
 * analyze.c - the operator table: durations filtered by kind, name and time,
 * grouped by any mix of name, category, thread, process and argument values,
 * their times combined (sum, mean, max, min or count), ordered by any column,
 * with cumulative percentages, FLOPs and FLOPS, bytes and bandwidth, and the
 * input and output shapes where the trace has them.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyze.h"
#include "gpu.h"

static const char *const k_flops_keys[] = {"flops", "FLOPs", "flop", "computation", NULL};
static const char *const k_bytes_keys[] = {"bytes", "memory", "Bytes", NULL};
static const char *const k_in_keys[] = {"input_shape", "input_shapes", "Input Dims", "Input dims",
                                        "in_shapes", NULL};
static const char *const k_out_keys[] = {"output_shape", "output_shapes", "Output Dims",
                                         "Output dims", "out_shapes", NULL};

/* -------------------------------------------------------------- columns */

enum { C_KEY, C_COUNT, C_SELF, C_TOTAL, C_CUM, C_FLOPS, C_FLOPS_RATE, C_BYTES, C_BW, C_IN, C_OUT, C_N };

static const struct {
    const char *name;  /* in JSON and CSV, and for --order-by */
    const char *alias; /* also accepted by --order-by */
    const char *title; /* in the table */
} k_cols[C_N] = {
    {"name", "key", "name"},
    {"count", "calls", "count"},
    {"self", "self_time", "self"},
    {"total", "time", "total"},
    {"cumulative", "cum", "cum %"},
    {"flops", "computation", "FLOPs"},
    {"flops_per_s", "FLOPS", "FLOPS"},
    {"bytes", "memory", "bytes"},
    {"bandwidth", "bytes_per_s", "bandwidth"},
    {"input_shapes", "in_shapes", "input shapes"},
    {"output_shapes", "out_shapes", "output shapes"},
};

static int column_of(const char *name)
{
    for (int c = 0; c < C_N; c++) {
        if (strcasecmp(name, k_cols[c].name) == 0 || strcasecmp(name, k_cols[c].alias) == 0)
            return c;
    }
    return -1;
}

void an_options_default(an_options *o)
{
    memset(o, 0, sizeof *o);
    o->top = 20;
    o->aggregate_by = "name";
    o->aggregate = AN_SUM;
    o->order_by = NULL;
    o->min_ns = o->max_ns = -1;
}


int an_options_check(const an_options *o, char *errbuf, size_t len)
{
    if (o->order_by) {
        const char *col = o->order_by[0] == '+' || o->order_by[0] == '-' ? o->order_by + 1 : o->order_by;
        if (column_of(col) < 0) {
            snprintf(errbuf, len, "--order-by: unknown column \"%s\" (name, count, self, total, cumulative, "
                                  "flops, flops_per_s, bytes, bandwidth, input_shapes, output_shapes)", col);
            return -1;
        }
    }
    if (!o->aggregate_by || !*o->aggregate_by) {
        snprintf(errbuf, len, "--aggregate-by: empty");
        return -1;
    }
    if (o->min_ns >= 0 && o->max_ns >= 0 && o->min_ns > o->max_ns) {
        snprintf(errbuf, len, "--min-time is above --max-time");
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- groups */

typedef struct group {
    const an_event *first;
    char *key;
    uint64_t count;
    int64_t self_sum, self_min, self_max, total_sum, total_min, total_max;
    double flops, bytes;
    uint64_t flops_n, bytes_n;
    const char *in_shape, *out_shape;
    int in_varied, out_varied;
    double v[C_N]; /* the numeric columns, aggregated */
} group;

/* The operators a GPU event carries itself (mlprof writes "op" and
 * "op_stack" on kernels and metric ranges) where no launch links it:
 * "op_stack" whole, its first ("top_op") or last ("bottom_op") part; 0
 * when it has none. */
static int own_ops(const an_trace *t, const an_event *e, const char *part, mlprof__sb *key)
{
    const an_arg *stack = an_event_arg(t, e, "op_stack"), *op = an_event_arg(t, e, "op");
    const char *s = stack && stack->type == AN_STR ? stack->str : NULL;
    if (!s || !*s)
        return 0;
    if (strcmp(part, "op_stack") == 0) {
        mlprof__sb_puts(key, s);
    } else if (strcmp(part, "top_op") == 0) {
        const char *sep = strstr(s, " > ");
        mlprof__sb_printf(key, "%.*s", (int)(sep ? (size_t)(sep - s) : strlen(s)), s);
    } else if (op && op->type == AN_STR) {
        mlprof__sb_puts(key, op->str);
    } else {
        const char *last = s, *sep;
        while ((sep = strstr(last, " > ")) != NULL)
            last = sep + 3;
        mlprof__sb_puts(key, last);
    }
    return 1;
}

static void put_arg_value(mlprof__sb *out, const an_arg *a)
{
    if (!a)
        mlprof__sb_putc(out, '-');
    else if (a->type == AN_NUM && a->is_int)
        mlprof__sb_i64(out, a->inum);
    else if (a->type == AN_NUM)
        mlprof__sb_double(out, a->num);
    else
        mlprof__sb_puts(out, a->str);
}

/* The group key of e: its parts joined with " | ". */
static void group_key(const an_trace *t, const an_gpu_links *links, const an_event *e, size_t index,
                      const char *by, mlprof__sb *key)
{
    mlprof__sb_reset(key);
    const char *p = by;
    while (*p) {
        size_t n = strcspn(p, ",");
        char part[128];
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        if (key->len)
            mlprof__sb_puts(key, " | ");
        if (strcmp(part, "name") == 0) {
            mlprof__sb_puts(key, e->name);
        } else if (strcmp(part, "type") == 0 || strcmp(part, "category") == 0 || strcmp(part, "cat") == 0) {
            mlprof__sb_puts(key, e->cat[0] ? e->cat : "(no category)");
        } else if (strcmp(part, "thread") == 0) {
            const char *tn = an_thread_name(t, e->pid, e->tid);
            mlprof__sb_printf(key, "%lld:%lld", (long long)e->pid, (long long)e->tid);
            if (tn)
                mlprof__sb_printf(key, " (%s)", tn);
        } else if (strcmp(part, "process") == 0) {
            const char *pn = an_process_name(t, e->pid);
            mlprof__sb_printf(key, "%lld", (long long)e->pid);
            if (pn)
                mlprof__sb_printf(key, " (%s)", pn);
        } else if (links && (strcmp(part, "bottom_op") == 0 || strcmp(part, "top_op") == 0)) {
            int32_t op = part[0] == 'b' ? links->bottom[index] : links->top[index];
            if (op >= 0)
                mlprof__sb_puts(key, t->ev[op].name);
            else if (!own_ops(t, e, part, key))
                mlprof__sb_puts(key, "(no operator)");
        } else if (links && strcmp(part, "op_stack") == 0) {
            if (links->bottom[index] >= 0 || !own_ops(t, e, part, key))
                an_gpu_op_stack(t, links, index, key);
        } else if (links && strcmp(part, "launch") == 0) {
            int32_t r = links->launch[index];
            mlprof__sb_puts(key, r >= 0 ? t->ev[r].name : "(no launch)");
        } else if (strcmp(part, "none") == 0) {
            mlprof__sb_puts(key, e->name);
            mlprof__sb_printf(key, "\x1f%zu", index); /* each event its own row */
        } else {
            put_arg_value(key, an_event_arg(t, e, part));
        }
        p += n;
        if (*p == ',')
            p++;
    }
}

static int name_matches(const char *pattern, const char *name)
{
    if (strpbrk(pattern, "*?["))
        return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

static int in_list(const char *list, const char *word)
{
    size_t wn = strlen(word);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == wn && strncmp(p, word, n) == 0)
            return 1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int keep_event(const an_event *e, const an_options *o)
{
    if (e->ph != 'X')
        return 0;
    if (o->min_ns >= 0 && e->dur < o->min_ns)
        return 0;
    if (o->max_ns >= 0 && e->dur > o->max_ns)
        return 0;
    if (o->type && !in_list(o->type, e->cat))
        return 0;
    if (o->name && !name_matches(o->name, e->name))
        return 0;
    return 1;
}

/* The argument keys every event is asked for, interned once per table. */
typedef struct arg_keys {
    an_keyset flops, bytes, in, out, both;
} arg_keys;

static void arg_keys_init(const an_trace *t, arg_keys *k)
{
    /* RAF writes both shape lists in one string: "inputs|outputs" */
    static const char *const both_keys[] = {"args_string", NULL};
    an_keyset_init(t, k_flops_keys, &k->flops);
    an_keyset_init(t, k_bytes_keys, &k->bytes);
    an_keyset_init(t, k_in_keys, &k->in);
    an_keyset_init(t, k_out_keys, &k->out);
    an_keyset_init(t, both_keys, &k->both);
}

/* The input and output shapes of e (interned), from their own arguments or
 * from RAF's "inputs|outputs" string. */
static void event_shapes(an_trace *t, const arg_keys *keys, const an_event *e, const char **in, const char **out)
{
    const an_arg *a = an_event_arg_in(t, e, &keys->in), *b = an_event_arg_in(t, e, &keys->out);
    *in = a && a->str ? a->str : NULL;
    *out = b && b->str ? b->str : NULL;
    const an_arg *both = *in || *out ? NULL : an_event_arg_in(t, e, &keys->both);
    const char *bar = both && both->str ? strchr(both->str, '|') : NULL;
    if (bar) {
        size_t n = (size_t)(bar - both->str);
        while (n && both->str[n - 1] == ',')
            n--; /* RAF ends its input list with a comma */
        *in = an_intern(t, both->str, n);
        *out = an_intern(t, bar + 1, strlen(bar + 1));
    }
}

static void group_add(an_trace *t, const arg_keys *keys, group *g, const an_event *e)
{
    if (!g->count) {
        g->first = e;
        g->self_min = g->total_min = INT64_MAX;
    }
    g->count++;
    g->self_sum += e->self;
    g->total_sum += e->dur;
    g->self_min = e->self < g->self_min ? e->self : g->self_min;
    g->self_max = e->self > g->self_max ? e->self : g->self_max;
    g->total_min = e->dur < g->total_min ? e->dur : g->total_min;
    g->total_max = e->dur > g->total_max ? e->dur : g->total_max;
    double f = an_arg_num(an_event_arg_in(t, e, &keys->flops), NAN);
    if (!isnan(f)) {
        g->flops += f;
        g->flops_n++;
    }
    double b = an_arg_num(an_event_arg_in(t, e, &keys->bytes), NAN);
    if (!isnan(b)) {
        g->bytes += b;
        g->bytes_n++;
    }
    const char *is, *os;
    event_shapes(t, keys, e, &is, &os);
    if (g->count == 1) {
        g->in_shape = is;
        g->out_shape = os;
    } else {
        g->in_varied |= is != g->in_shape; /* interned: one pointer per text */
        g->out_varied |= os != g->out_shape;
    }
}

static double combine(int how, int64_t sum, int64_t min, int64_t max, uint64_t count)
{
    switch (how) {
    case AN_MEAN: return count ? (double)sum / (double)count : 0;
    case AN_MAX: return (double)max;
    case AN_MIN: return (double)min;
    default: return (double)sum;
    }
}

static void group_finish(group *g, int how)
{
    g->v[C_COUNT] = (double)g->count;
    g->v[C_SELF] = combine(how, g->self_sum, g->self_min, g->self_max, g->count);
    g->v[C_TOTAL] = combine(how, g->total_sum, g->total_min, g->total_max, g->count);
    double per = how == AN_MEAN && g->count ? 1.0 / (double)g->count : 1.0;
    g->v[C_FLOPS] = g->flops_n ? g->flops * per : NAN;
    g->v[C_BYTES] = g->bytes_n ? g->bytes * per : NAN;
    /* rates over the whole time the operator ran, children included: a
     * convolution's FLOPs are done by its GEMM */
    double secs = (double)g->total_sum / 1e9;
    g->v[C_FLOPS_RATE] = g->flops_n && secs > 0 ? g->flops / secs : NAN;
    g->v[C_BW] = g->bytes_n && secs > 0 ? g->bytes / secs : NAN;
}

static int g_order_col, g_order_asc;

static int group_cmp(const void *pa, const void *pb)
{
    const group *a = *(const group *const *)pa, *b = *(const group *const *)pb;
    int c = 0;
    if (g_order_col == C_KEY || g_order_col == C_IN || g_order_col == C_OUT) {
        const char *x = g_order_col == C_KEY ? a->key : g_order_col == C_IN ? a->in_shape : a->out_shape;
        const char *y = g_order_col == C_KEY ? b->key : g_order_col == C_IN ? b->in_shape : b->out_shape;
        c = strcmp(x ? x : "", y ? y : "");
    } else {
        double x = a->v[g_order_col], y = b->v[g_order_col];
        if (isnan(x) != isnan(y))
            return isnan(x) ? 1 : -1; /* rows without the value last, either way */
        c = x < y ? -1 : x > y ? 1 : 0;
    }
    if (!g_order_asc)
        c = -c;
    return c ? c : strcmp(a->key, b->key);
}

/* ------------------------------------------------------------- output */

void an_put_duration(mlprof__sb *out, int64_t ns)
{
    mlprof__sb_duration(out, ns > 0 ? (uint64_t)ns : 0);
}

void an_put_si(mlprof__sb *out, double v, const char *unit)
{
    static const char *const pre[] = {"", "K", "M", "G", "T", "P", "E"};
    int p = 0;
    while (fabs(v) >= 1000 && p < 6) {
        v /= 1000;
        p++;
    }
    mlprof__sb_printf(out, fabs(v) < 10 && p ? "%.2f %s%s" : fabs(v) < 100 && p ? "%.1f %s%s" : "%.0f %s%s", v,
                      pre[p], unit);
}

void an_put_bytes(mlprof__sb *out, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        u++;
    }
    mlprof__sb_printf(out, u == 0 ? "%.0f %s" : bytes < 10 ? "%.2f %s" : bytes < 100 ? "%.1f %s" : "%.0f %s", bytes,
                      units[u]);
}

static const char *shape_text(const char *s, int varied, char *buf, size_t len)
{
    if (!s)
        return "-";
    if (!varied)
        return s;
    snprintf(buf, len, "%s (and others)", s);
    return buf;
}

/* One cell's text. */
static void cell(mlprof__sb *out, const group *g, int c, int how, double cum)
{
    char tmp[300];
    double v = g->v[c];
    switch (c) {
    case C_KEY: mlprof__sb_puts(out, g->key); break;
    case C_COUNT: mlprof__sb_u64(out, g->count); break;
    case C_SELF:
    case C_TOTAL: an_put_duration(out, (int64_t)llround(v)); break;
    case C_CUM: mlprof__sb_printf(out, "%.1f%%", cum); break;
    case C_FLOPS: isnan(v) ? mlprof__sb_putc(out, '-') : an_put_si(out, v, "FLOP"); break;
    case C_FLOPS_RATE: isnan(v) ? mlprof__sb_putc(out, '-') : an_put_si(out, v, "FLOP/s"); break;
    case C_BYTES: isnan(v) ? mlprof__sb_putc(out, '-') : an_put_bytes(out, v); break;
    case C_BW:
        if (isnan(v)) {
            mlprof__sb_putc(out, '-');
        } else {
            an_put_bytes(out, v);
            mlprof__sb_puts(out, "/s");
        }
        break;
    case C_IN: mlprof__sb_puts(out, shape_text(g->in_shape, g->in_varied, tmp, sizeof tmp)); break;
    default: mlprof__sb_puts(out, shape_text(g->out_shape, g->out_varied, tmp, sizeof tmp)); break;
    }
    (void)how;
}

static const char *const k_how[] = {"sum", "mean", "max", "min", "count"};

static void print_header(mlprof__sb *out, const an_trace *t, const an_options *o, size_t kept, size_t groups,
                         int order, int asc)
{
    mlprof__sb_printf(out, "trace: %s%s%s%s\n", t->path, t->writer[0] ? " (written by " : "", t->writer,
                      t->writer[0] ? ")" : "");
    mlprof__sb_printf(out, "%zu durations kept of %zu events, over ", kept, t->nev);
    an_put_duration(out, t->t_max - t->t_min);
    mlprof__sb_printf(out, "; grouped by %s into %zu rows; times: %s; ordered by %s, %s\n", o->aggregate_by, groups,
                      k_how[o->aggregate], k_cols[order].name, asc ? "ascending" : "descending");
}

static void print_warnings(mlprof__sb *out, const an_trace *t, int json)
{
    if (json)
        return;
    if (t->partial)
        mlprof__sb_printf(out, "WARNING: %s; this covers the %zu events read before it\n", t->error, t->nev);
    if (t->unmatched_ends)
        mlprof__sb_printf(out, "note: %llu ends (\"E\") had no begin\n", (unsigned long long)t->unmatched_ends);
    if (t->unclosed_begins)
        mlprof__sb_printf(out, "note: %llu begins (\"B\") were never ended and are left out\n",
                          (unsigned long long)t->unclosed_begins);
}

static void format_table(mlprof__sb *out, group **rows, size_t n, size_t shown, const double *cum,
                         const int *cols, int ncols, int how)
{
    size_t width[C_N] = {0};
    mlprof__sb tmp;
    mlprof__sb_init(&tmp);
    for (int k = 0; k < ncols; k++) {
        int c = cols[k];
        width[c] = strlen(k_cols[c].title);
        for (size_t i = 0; i < shown; i++) {
            mlprof__sb_reset(&tmp);
            cell(&tmp, rows[i], c, how, cum[i]);
            if (tmp.len > width[c])
                width[c] = tmp.len;
        }
        if (c == C_KEY && width[c] > 60)
            width[c] = 60;
    }
    for (int k = 0; k < ncols; k++) {
        int c = cols[k];
        mlprof__sb_printf(out, c == C_KEY || c == C_IN || c == C_OUT ? "%s%-*s" : "%s%*s", k ? "  " : "",
                          (int)width[c], k_cols[c].title);
    }
    while (out->len && out->data[out->len - 1] == ' ')
        out->len--;
    mlprof__sb_putc(out, '\n');
    for (size_t i = 0; i < shown; i++) {
        for (int k = 0; k < ncols; k++) {
            int c = cols[k];
            mlprof__sb_reset(&tmp);
            cell(&tmp, rows[i], c, how, cum[i]);
            const char *s = tmp.data ? tmp.data : "";
            int left = c == C_KEY || c == C_IN || c == C_OUT;
            if (c == C_KEY && tmp.len > width[c])
                mlprof__sb_printf(out, "%s%.*s...", k ? "  " : "", (int)width[c] - 3, s);
            else
                mlprof__sb_printf(out, left ? "%s%-*s" : "%s%*s", k ? "  " : "", (int)width[c], s);
        }
        /* trailing blanks of the last column are noise */
        while (out->len && out->data[out->len - 1] == ' ')
            out->len--;
        mlprof__sb_putc(out, '\n');
    }
    if (shown < n)
        mlprof__sb_printf(out, "(%zu more rows; -t 0 shows all)\n", n - shown);
    mlprof__sb_free(&tmp);
}

static void json_num(mlprof__sb *out, double v)
{
    if (isnan(v))
        mlprof__sb_puts(out, "null");
    else
        mlprof__sb_double(out, v);
}

static void format_json(mlprof__sb *out, const an_trace *t, const an_options *o, group **rows, size_t shown,
                        const double *cum, size_t kept, int order, int asc)
{
    mlprof__sb_puts(out, "{\"trace\":");
    mlprof__sb_json_str(out, t->path, strlen(t->path));
    mlprof__sb_puts(out, ",\"writer\":");
    mlprof__sb_json_str(out, t->writer, strlen(t->writer));
    mlprof__sb_printf(out, ",\"events\":%zu,\"durations_kept\":%zu,\"span_ns\":%lld,\"aggregate_by\":", t->nev, kept,
                      (long long)(t->t_max - t->t_min));
    mlprof__sb_json_str(out, o->aggregate_by, strlen(o->aggregate_by));
    mlprof__sb_printf(out, ",\"aggregate\":\"%s\",\"order_by\":\"%s\",\"ascending\":%s,\"partial\":%s",
                      k_how[o->aggregate], k_cols[order].name, asc ? "true" : "false", t->partial ? "true" : "false");
    if (t->partial) {
        mlprof__sb_puts(out, ",\"error\":");
        mlprof__sb_json_str(out, t->error, strlen(t->error));
    }
    mlprof__sb_printf(out, ",\"unmatched_ends\":%llu,\"unclosed_begins\":%llu,\"rows\":[",
                      (unsigned long long)t->unmatched_ends, (unsigned long long)t->unclosed_begins);
    for (size_t i = 0; i < shown; i++) {
        const group *g = rows[i];
        if (i)
            mlprof__sb_putc(out, ',');
        mlprof__sb_puts(out, "\n{\"key\":");
        mlprof__sb_json_str(out, g->key, strlen(g->key));
        mlprof__sb_puts(out, ",\"name\":");
        mlprof__sb_json_str(out, g->first->name, strlen(g->first->name));
        mlprof__sb_puts(out, ",\"category\":");
        mlprof__sb_json_str(out, g->first->cat, strlen(g->first->cat));
        mlprof__sb_printf(out, ",\"count\":%llu,\"self_ns\":", (unsigned long long)g->count);
        json_num(out, g->v[C_SELF]);
        mlprof__sb_puts(out, ",\"total_ns\":");
        json_num(out, g->v[C_TOTAL]);
        mlprof__sb_printf(out, ",\"self_sum_ns\":%lld,\"total_sum_ns\":%lld,\"min_ns\":%lld,\"max_ns\":%lld,\"cumulative_percent\":",
                          (long long)g->self_sum, (long long)g->total_sum, (long long)g->total_min,
                          (long long)g->total_max);
        json_num(out, cum[i]);
        const char *names[] = {"flops", "flops_per_s", "bytes", "bytes_per_s"};
        const int cols[] = {C_FLOPS, C_FLOPS_RATE, C_BYTES, C_BW};
        for (int k = 0; k < 4; k++) {
            mlprof__sb_printf(out, ",\"%s\":", names[k]);
            json_num(out, g->v[cols[k]]);
        }
        mlprof__sb_puts(out, ",\"input_shapes\":");
        g->in_shape ? mlprof__sb_json_str(out, g->in_shape, strlen(g->in_shape)) : mlprof__sb_puts(out, "null");
        mlprof__sb_puts(out, ",\"output_shapes\":");
        g->out_shape ? mlprof__sb_json_str(out, g->out_shape, strlen(g->out_shape)) : mlprof__sb_puts(out, "null");
        mlprof__sb_printf(out, ",\"shapes_vary\":%s}", g->in_varied || g->out_varied ? "true" : "false");
    }
    mlprof__sb_puts(out, "\n]}\n");
}

static void format_csv(mlprof__sb *out, group **rows, size_t shown, const double *cum)
{
    mlprof__sb_puts(out, "name,category,count,self_ns,total_ns,cumulative_percent,flops,flops_per_s,bytes,"
                         "bytes_per_s,input_shapes,output_shapes\n");
    for (size_t i = 0; i < shown; i++) {
        const group *g = rows[i];
        mlprof__sb_csv(out, g->key);
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, g->first->cat);
        mlprof__sb_printf(out, ",%llu,", (unsigned long long)g->count);
        const int cols[] = {C_SELF, C_TOTAL, -1, C_FLOPS, C_FLOPS_RATE, C_BYTES, C_BW};
        for (int k = 0; k < 7; k++) {
            double v = cols[k] < 0 ? cum[i] : g->v[cols[k]];
            if (k)
                mlprof__sb_putc(out, ',');
            if (!isnan(v))
                mlprof__sb_printf(out, "%.17g", v);
        }
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, g->in_shape ? g->in_shape : "");
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, g->out_shape ? g->out_shape : "");
        mlprof__sb_putc(out, '\n');
    }
}

/* The groups of a trace's kept durations, each finished (its columns set). */
typedef struct group_table {
    mlprof__map index; /* key -> group number + 1; owns the keys */
    group *groups;
    size_t n, cap, kept;
} group_table;

static void table_free(group_table *tab)
{
    mlprof__free(tab->groups);
    mlprof__map_free(&tab->index);
    memset(tab, 0, sizeof *tab);
}

/* Whether the grouping asks for the operators that launched GPU events. */
static int wants_links(const char *by)
{
    return strstr(by, "bottom_op") || strstr(by, "top_op") || strstr(by, "op_stack") || strstr(by, "launch");
}

static int build_table(an_trace *t, const an_options *o, group_table *tab)
{
    memset(tab, 0, sizeof *tab);
    mlprof__map_init(&tab->index);
    an_gpu_links links, *lp = NULL;
    if (wants_links(o->aggregate_by)) {
        if (an_gpu_link(t, &links) != 0)
            return -1;
        lp = &links;
    } else {
        an_compute_self(t);
    }
    mlprof__sb key;
    mlprof__sb_init(&key);
    arg_keys keys;
    arg_keys_init(t, &keys);
    int rc = 0;
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        const an_event *e = &t->ev[i];
        if (!keep_event(e, o))
            continue;
        tab->kept++;
        group_key(t, lp, e, i, o->aggregate_by, &key);
        mlprof__map_entry *slot = mlprof__map_slot(&tab->index, key.data ? key.data : "", key.len);
        if (!slot) {
            rc = -1;
            break;
        }
        if (!slot->value) {
            if (tab->n == tab->cap) {
                size_t c = tab->cap ? tab->cap * 2 : 256;
                group *g = mlprof__realloc(tab->groups, c * sizeof *g);
                if (!g) {
                    rc = -1;
                    break;
                }
                tab->groups = g;
                tab->cap = c;
            }
            memset(&tab->groups[tab->n], 0, sizeof *tab->groups);
            tab->groups[tab->n].key = slot->key;
            slot->value = (void *)(uintptr_t)(tab->n + 1);
            tab->n++;
        }
        group_add(t, &keys, &tab->groups[(uintptr_t)slot->value - 1], e);
    }
    mlprof__sb_free(&key);
    if (lp)
        an_gpu_links_free(lp);
    for (size_t i = 0; i < tab->n; i++) {
        /* a row's key shows without the event number of --aggregate-by none */
        char *unit = strchr(tab->groups[i].key, '\x1f');
        if (unit)
            *unit = '\0';
        group_finish(&tab->groups[i], o->aggregate);
    }
    return rc;
}

int an_analyze(an_trace *t, const an_options *o, mlprof__sb *out)
{
    group_table tab;
    int rc = build_table(t, o, &tab);
    group *groups = tab.groups;
    size_t ngroups = tab.n, kept = tab.kept;
    group **rows = ngroups ? mlprof__malloc(ngroups * sizeof *rows) : NULL;
    double *cum = ngroups ? mlprof__malloc(ngroups * sizeof *cum) : NULL;
    if (ngroups && (!rows || !cum))
        rc = -1;
    if (rc == 0) {
        double all = 0;
        for (size_t i = 0; i < ngroups; i++)
            rows[i] = &groups[i];
        int primary = o->aggregate == AN_COUNT ? C_COUNT : C_SELF;
        const char *ob = o->order_by;
        g_order_asc = ob && ob[0] == '+';
        g_order_col = ob ? column_of(ob[0] == '+' || ob[0] == '-' ? ob + 1 : ob) : primary;
        if (g_order_col < 0)
            g_order_col = primary;
        mlprof__sort(rows, ngroups, sizeof *rows, group_cmp);
        for (size_t i = 0; i < ngroups; i++)
            all += rows[i]->v[primary];
        double run = 0;
        for (size_t i = 0; i < ngroups; i++) {
            run += rows[i]->v[primary];
            cum[i] = all > 0 ? 100.0 * run / all : 0;
        }
        size_t shown = o->top > 0 && (size_t)o->top < ngroups ? (size_t)o->top : ngroups;
        int has_flops = 0, has_bytes = 0, has_in = 0, has_out = 0;
        for (size_t i = 0; i < ngroups; i++) {
            has_flops |= rows[i]->flops_n > 0;
            has_bytes |= rows[i]->bytes_n > 0;
            has_in |= rows[i]->in_shape != NULL;
            has_out |= rows[i]->out_shape != NULL;
        }
        int cols[C_N], ncols = 0;
        cols[ncols++] = C_KEY;
        cols[ncols++] = C_COUNT;
        cols[ncols++] = C_SELF;
        cols[ncols++] = C_TOTAL;
        cols[ncols++] = C_CUM;
        if (has_flops) {
            cols[ncols++] = C_FLOPS;
            cols[ncols++] = C_FLOPS_RATE;
        }
        if (has_bytes) {
            cols[ncols++] = C_BYTES;
            cols[ncols++] = C_BW;
        }
        if (has_in)
            cols[ncols++] = C_IN;
        if (has_out)
            cols[ncols++] = C_OUT;
        if (o->format == AN_JSON) {
            format_json(out, t, o, rows, shown, cum, kept, g_order_col, g_order_asc);
        } else if (o->format == AN_CSV) {
            format_csv(out, rows, shown, cum);
        } else {
            print_header(out, t, o, kept, ngroups, g_order_col, g_order_asc);
            print_warnings(out, t, 0);
            mlprof__sb_putc(out, '\n');
            if (ngroups)
                format_table(out, rows, ngroups, shown, cum, cols, ncols, o->aggregate);
            else
                mlprof__sb_puts(out, "(no durations match)\n");
        }
    }
    mlprof__free(rows);
    mlprof__free(cum);
    table_free(&tab);
    return rc == 0 && !out->failed ? 0 : -1;
}

/* ------------------------------------------------------------------ diff */

typedef struct diff_row {
    const char *key;
    const group *a, *b; /* NULL when the operator is missing from that run */
    double ta, tb;      /* the compared time, ns */
    double delta, pct;  /* pct: NAN for a new or missing operator */
    int regressed;
} diff_row;

static int diff_cmp(const void *pa, const void *pb)
{
    const diff_row *a = pa, *b = pb;
    double x = fabs(a->delta), y = fabs(b->delta);
    if (x != y)
        return x > y ? -1 : 1;
    return strcmp(a->key, b->key);
}

static const char *diff_status(const diff_row *r)
{
    return !r->a ? "new" : !r->b ? "missing" : r->regressed ? "regressed" : "changed";
}

static void put_signed_duration(mlprof__sb *out, double ns)
{
    mlprof__sb_putc(out, ns < 0 ? '-' : '+');
    an_put_duration(out, (int64_t)llround(fabs(ns)));
}

int an_diff(an_trace *ta, an_trace *tb, const an_options *o, const an_diff_options *d, mlprof__sb *out,
            size_t *regressions)
{
    group_table A, B;
    *regressions = 0;
    int rc = build_table(ta, o, &A);
    if (build_table(tb, o, &B) != 0)
        rc = -1;
    int col = d->total ? C_TOTAL : C_SELF;
    diff_row *rows = A.n + B.n ? mlprof__calloc(A.n + B.n, sizeof *rows) : NULL;
    size_t n = 0;
    if (A.n + B.n && !rows)
        rc = -1;
    double sum_a = 0, sum_b = 0;
    for (size_t i = 0; rc == 0 && i < A.n + B.n; i++) {
        int from_b = i >= A.n;
        const group *g = from_b ? &B.groups[i - A.n] : &A.groups[i];
        const mlprof__map *other = from_b ? &A.index : &B.index;
        void *v = mlprof__map_get(other, g->key, strlen(g->key));
        const group *h = v ? &(from_b ? A.groups : B.groups)[(uintptr_t)v - 1] : NULL;
        if (from_b && h)
            continue; /* met from A's side already */
        diff_row *r = &rows[n++];
        r->key = g->key;
        r->a = from_b ? NULL : g;
        r->b = from_b ? g : h;
        r->ta = r->a ? r->a->v[col] : 0;
        r->tb = r->b ? r->b->v[col] : 0;
        r->delta = r->tb - r->ta;
        r->pct = r->a && r->b && r->ta > 0 ? 100.0 * r->delta / r->ta : NAN;
        r->regressed = r->a && r->b && d->fail_above_pct >= 0 && r->ta > 0 && r->pct > d->fail_above_pct &&
                       r->delta >= (double)d->min_delta_ns;
        *regressions += (size_t)r->regressed;
        sum_a += r->ta;
        sum_b += r->tb;
    }
    if (rc == 0)
        mlprof__sort(rows, n, sizeof *rows, diff_cmp);
    size_t shown = o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
    const char *what = d->total ? "total" : "self";
    if (rc == 0 && o->format == AN_JSON) {
        mlprof__sb_puts(out, "{\"a\":");
        mlprof__sb_json_str(out, ta->path, strlen(ta->path));
        mlprof__sb_puts(out, ",\"b\":");
        mlprof__sb_json_str(out, tb->path, strlen(tb->path));
        mlprof__sb_printf(out, ",\"compared\":\"%s\",\"aggregate\":\"%s\",\"aggregate_by\":", what,
                          k_how[o->aggregate]);
        mlprof__sb_json_str(out, o->aggregate_by, strlen(o->aggregate_by));
        mlprof__sb_printf(out, ",\"total_a_ns\":%.0f,\"total_b_ns\":%.0f,\"regressions\":%zu,\"partial\":%s,\"rows\":[",
                          sum_a, sum_b, *regressions, ta->partial || tb->partial ? "true" : "false");
        for (size_t i = 0; i < shown; i++) {
            const diff_row *r = &rows[i];
            mlprof__sb_puts(out, i ? ",\n{\"key\":" : "\n{\"key\":");
            mlprof__sb_json_str(out, r->key, strlen(r->key));
            mlprof__sb_printf(out, ",\"status\":\"%s\",\"count_a\":%llu,\"count_b\":%llu,\"time_a_ns\":%.0f"
                                   ",\"time_b_ns\":%.0f,\"delta_ns\":%.0f,\"delta_percent\":",
                              diff_status(r), (unsigned long long)(r->a ? r->a->count : 0),
                              (unsigned long long)(r->b ? r->b->count : 0), r->ta, r->tb, r->delta);
            json_num(out, r->pct);
            mlprof__sb_putc(out, '}');
        }
        mlprof__sb_puts(out, "\n]}\n");
    } else if (rc == 0 && o->format == AN_CSV) {
        mlprof__sb_puts(out, "name,status,count_a,count_b,time_a_ns,time_b_ns,delta_ns,delta_percent\n");
        for (size_t i = 0; i < shown; i++) {
            const diff_row *r = &rows[i];
            mlprof__sb_csv(out, r->key);
            mlprof__sb_printf(out, ",%s,%llu,%llu,%.0f,%.0f,%.0f,", diff_status(r),
                              (unsigned long long)(r->a ? r->a->count : 0),
                              (unsigned long long)(r->b ? r->b->count : 0), r->ta, r->tb, r->delta);
            if (!isnan(r->pct))
                mlprof__sb_printf(out, "%.6g", r->pct);
            mlprof__sb_putc(out, '\n');
        }
    } else if (rc == 0) {
        mlprof__sb_printf(out, "diff: %s -> %s\ncompared: %s time (%s) grouped by %s; %zu operators, sorted by the size of the change\n",
                          ta->path, tb->path, what, k_how[o->aggregate], o->aggregate_by, n);
        if (ta->partial || tb->partial)
            mlprof__sb_printf(out, "WARNING: %s\n", ta->partial ? ta->error : tb->error);
        mlprof__sb_putc(out, '\n');
        size_t w = 4;
        for (size_t i = 0; i < shown; i++)
            w = strlen(rows[i].key) > w ? strlen(rows[i].key) : w;
        w = w > 50 ? 50 : w;
        char head_a[16], head_b[16];
        snprintf(head_a, sizeof head_a, "%s A", what);
        snprintf(head_b, sizeof head_b, "%s B", what);
        mlprof__sb_printf(out, "%-*s  %8s  %8s  %12s  %12s  %13s  %9s\n", (int)w, "name", "count A", "count B",
                          head_a, head_b, "change", "change %");
        mlprof__sb tmp;
        mlprof__sb_init(&tmp);
        for (size_t i = 0; i <= shown; i++) {
            const diff_row *r = i < shown ? &rows[i] : NULL;
            const char *key = r ? r->key : "(all)";
            mlprof__sb_printf(out, strlen(key) > w ? "%-*.*s..." : "%-*.*s", (int)w - (strlen(key) > w ? 3 : 0),
                              (int)w - (strlen(key) > w ? 3 : 0), key);
            if (r) {
                mlprof__sb_reset(&tmp);
                r->a ? mlprof__sb_u64(&tmp, r->a->count) : mlprof__sb_putc(&tmp, '-');
                mlprof__sb_printf(out, "  %8s", tmp.data);
                mlprof__sb_reset(&tmp);
                r->b ? mlprof__sb_u64(&tmp, r->b->count) : mlprof__sb_putc(&tmp, '-');
                mlprof__sb_printf(out, "  %8s", tmp.data);
            } else {
                mlprof__sb_printf(out, "  %8s  %8s", "", "");
            }
            double xa = r ? r->ta : sum_a, xb = r ? r->tb : sum_b;
            for (int k = 0; k < 2; k++) {
                mlprof__sb_reset(&tmp);
                int present = !r || (k ? r->b != NULL : r->a != NULL);
                present ? an_put_duration(&tmp, (int64_t)llround(k ? xb : xa)) : mlprof__sb_putc(&tmp, '-');
                mlprof__sb_printf(out, "  %12s", tmp.data);
            }
            mlprof__sb_reset(&tmp);
            put_signed_duration(&tmp, xb - xa);
            mlprof__sb_printf(out, "  %13s", tmp.data);
            double pct = r ? r->pct : xa > 0 ? 100.0 * (xb - xa) / xa : NAN;
            if (!isnan(pct))
                mlprof__sb_printf(out, "  %+8.1f%%", pct);
            else
                mlprof__sb_printf(out, "  %9s", "");
            if (r && strcmp(diff_status(r), "changed") != 0)
                mlprof__sb_printf(out, "  %s", diff_status(r));
            mlprof__sb_putc(out, '\n');
            if (i + 1 == shown && shown < n)
                mlprof__sb_printf(out, "(%zu more rows; -t 0 shows all)\n", n - shown);
        }
        mlprof__sb_free(&tmp);
        if (d->fail_above_pct >= 0)
            mlprof__sb_printf(out, "\n%zu operators regressed by more than %.4g%%%s\n", *regressions,
                              d->fail_above_pct, d->min_delta_ns > 0 ? " (and by at least --min-delta)" : "");
    }
    mlprof__free(rows);
    table_free(&A);
    table_free(&B);
    return rc == 0 && !out->failed ? 0 : -1;
}
