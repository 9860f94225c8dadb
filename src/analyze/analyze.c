/*
 * analyze.c - the operator table: durations filtered by kind, name and time,
 * grouped by any mix of name, category, thread, process and argument values,
 * their times combined (sum, mean, max, min or count), ordered by any column,
 * with cumulative percentages, FLOPs and FLOPS, bytes and bandwidth, and the
 * input and output shapes where the trace has them; and the steps
 * (ProfilerStep#N, or mlprof's frames) that any analysis can be restricted to.
 */
#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyze.h"
#include "cost.h"
#include "gpu.h"

static const char *const k_flops_keys[] = {"flops", "FLOPs", "flop", "computation", NULL};
static const char *const k_bytes_keys[] = {"bytes", "memory", "Bytes", NULL};
static const char *const k_in_keys[] = {"input_shape", "input_shapes", "Input Dims", "Input dims",
                                        "in_shapes", NULL};
static const char *const k_out_keys[] = {"output_shape", "output_shapes", "Output Dims",
                                         "Output dims", "out_shapes", NULL};
/* The arguments that name an operator's type where its name is an instance's
 * (MegEngine's graph operators: "conv2" of type "ConvolutionForward"). */
static const char *const k_type_keys[] = {"type", "op_type", "opr_type", NULL};

/* -------------------------------------------------------------- columns */

enum { C_KEY, C_COUNT, C_SELF, C_TOTAL, C_CUM, C_GPU, C_FLOPS, C_FLOPS_RATE, C_BYTES, C_BW, C_IN, C_OUT, C_N };

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
    {"gpu_time", "gpu", "gpu time"}, /* of the GPU work launched inside the operator */
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
                                  "gpu_time, flops, flops_per_s, bytes, bandwidth, input_shapes, output_shapes)",
                     col);
            return -1;
        }
    }
    if (o->type && !o->type[strspn(o->type, ",")]) {
        snprintf(errbuf, len, "--type: no category or operator type in \"%s\"", o->type);
        return -1;
    }
    if (!o->aggregate_by || !*o->aggregate_by) {
        snprintf(errbuf, len, "--aggregate-by: empty");
        return -1;
    }
    const char *by = o->aggregate_by;
    if (by[0] == ',' || by[strlen(by) - 1] == ',' || strstr(by, ",,")) {
        snprintf(errbuf, len, "--aggregate-by: an empty key in \"%s\"", by);
        return -1;
    }
    if (o->min_ns >= 0 && o->max_ns >= 0 && o->min_ns > o->max_ns) {
        snprintf(errbuf, len, "--min-time is above --max-time");
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- groups */

/* The time a group's FLOPS and bandwidth are over: its total time (a CPU
 * operator's own, a kernel's on the GPU); the GPU time of the work its calls
 * launched, when every call launched some (their CPU time is but the
 * launch's); none when only some did, or that work took no time. */
enum { RATE_TOTAL = 0, RATE_GPU = 1, RATE_NONE = 2 };
static const char *const k_rate_time[] = {"total", "gpu", NULL};

typedef struct group {
    const an_event *first;
    char *key;
    uint64_t count;
    int64_t self_sum, self_min, self_max, total_sum, total_min, total_max;
    double flops, bytes;
    uint64_t flops_n, bytes_n;
    int64_t gpu_sum, gpu_min, gpu_max; /* over its calls that launched GPU work, gpu_n of them */
    uint64_t gpu_n;
    int rate_time; /* RATE_* */
    const char *in_shape, *out_shape;
    int in_varied, out_varied;
    int64_t shape_ts; /* the call in_shape and out_shape are of: the earliest */
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

/* The argument keys that name one thing in several writers' words: any of
 * them, given to --aggregate-by, reads the first of them an event has (the one
 * given first). PyTorch writes "Input Dims" and "Input type". */
static const char *const k_in_type_keys[] = {"input_type", "input_types", "Input type", "dtype", NULL};
static const char *const *const k_alias_groups[] = {k_in_keys, k_out_keys, k_in_type_keys};

/* What a part of --aggregate-by reads. */
enum { K_NAME, K_CAT, K_THREAD, K_PROCESS, K_BOTTOM, K_TOP, K_STACK, K_LAUNCH, K_NONE, K_OPTYPE, K_ARG };

typedef struct key_part {
    int kind;
    const char *text;              /* as given */
    const char *const *aliases;    /* K_ARG: the group of keys it stands for, or NULL */
    an_keyset keys;                /* K_ARG: the keys it reads that the trace has, the given one first */
    uint64_t found;                /* K_ARG: kept durations that have one of them */
} key_part;

/* --aggregate-by resolved against one trace. */
typedef struct key_spec {
    char *text; /* the list, cut at its commas */
    key_part *parts;
    size_t n;
    const char *gpu_annotation; /* the trace's "gpu_user_annotation", or NULL */
    int links;                  /* some part asks for the operators that launched GPU events */
} key_spec;

static void key_spec_free(key_spec *ks)
{
    mlprof__free(ks->text);
    mlprof__free(ks->parts);
    memset(ks, 0, sizeof *ks);
}

static const char *const *alias_group(const char *key)
{
    for (size_t g = 0; g < sizeof k_alias_groups / sizeof k_alias_groups[0]; g++) {
        for (const char *const *k = k_alias_groups[g]; *k; k++) {
            if (strcmp(*k, key) == 0)
                return k_alias_groups[g];
        }
    }
    return NULL;
}

static int part_kind(const char *s)
{
    static const struct {
        const char *word;
        int kind;
    } words[] = {{"name", K_NAME},     {"type", K_CAT},       {"category", K_CAT}, {"cat", K_CAT},
                 {"thread", K_THREAD}, {"process", K_PROCESS}, {"bottom_op", K_BOTTOM}, {"top_op", K_TOP},
                 {"op_stack", K_STACK}, {"launch", K_LAUNCH}, {"none", K_NONE},    {"op_type", K_OPTYPE}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (strcmp(s, words[i].word) == 0)
            return words[i].kind;
    }
    return K_ARG;
}

/* Returns 0, or -1 (out of memory). */
static int key_spec_init(key_spec *ks, const an_trace *t, const char *by)
{
    memset(ks, 0, sizeof *ks);
    size_t len = strlen(by), n = 1;
    for (const char *p = by; *p; p++)
        n += *p == ',';
    ks->text = mlprof__malloc(len + 1);
    ks->parts = mlprof__calloc(n, sizeof *ks->parts);
    if (!ks->text || !ks->parts) {
        key_spec_free(ks);
        return -1;
    }
    memcpy(ks->text, by, len + 1);
    for (char *p = ks->text; p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        key_part *k = &ks->parts[ks->n++];
        k->text = p;
        k->kind = part_kind(p);
        ks->links |= k->kind == K_BOTTOM || k->kind == K_TOP || k->kind == K_STACK || k->kind == K_LAUNCH;
        if (k->kind == K_ARG) {
            /* the key given first, then the others of its group */
            const char *names[9] = {p};
            size_t m = 1;
            k->aliases = alias_group(p);
            for (const char *const *a = k->aliases; a && *a && m < 8; a++) {
                if (strcmp(*a, p) != 0)
                    names[m++] = *a;
            }
            names[m] = NULL;
            an_keyset_init(t, names, &k->keys);
        }
        p = comma ? comma + 1 : NULL;
    }
    ks->gpu_annotation = mlprof__map_get(&t->strings, "gpu_user_annotation", strlen("gpu_user_annotation"));
    return 0;
}

/* An event's name in a row's key: a GPU user annotation (the GPU side of a
 * record_function range, ProfilerStep#N) is not its CPU range, and says so. */
static void put_name(mlprof__sb *key, const key_spec *ks, const an_event *e)
{
    mlprof__sb_puts(key, e->name);
    if (ks->gpu_annotation && e->cat == ks->gpu_annotation)
        mlprof__sb_puts(key, " (GPU)");
}

/* The group key of e: its parts joined with " | ". */
static void group_key(const an_trace *t, const an_gpu_links *links, const an_event *e, size_t index,
                      key_spec *ks, mlprof__sb *key)
{
    mlprof__sb_reset(key);
    for (size_t i = 0; i < ks->n; i++) {
        key_part *part = &ks->parts[i];
        if (i)
            mlprof__sb_puts(key, " | ");
        switch (part->kind) {
        case K_NAME: put_name(key, ks, e); break;
        case K_CAT: mlprof__sb_puts(key, e->cat[0] ? e->cat : "(no category)"); break;
        case K_THREAD: {
            /* an id the trace gave as a name ("stream 7") is shown as that name */
            const char *tn = an_thread_name(t, e->pid, e->tid), *pn = an_process_name(t, e->pid);
            if (an_is_named_id(e->pid) && pn)
                mlprof__sb_puts(key, pn);
            else
                mlprof__sb_printf(key, "%lld", (long long)e->pid);
            if (an_is_named_id(e->tid) && tn)
                mlprof__sb_printf(key, ":%s", tn);
            else
                mlprof__sb_printf(key, ":%lld", (long long)e->tid);
            if (tn && !an_is_named_id(e->tid))
                mlprof__sb_printf(key, " (%s)", tn);
            break;
        }
        case K_PROCESS: {
            const char *pn = an_process_name(t, e->pid);
            if (an_is_named_id(e->pid) && pn)
                mlprof__sb_puts(key, pn);
            else
                mlprof__sb_printf(key, "%lld", (long long)e->pid);
            if (pn && !an_is_named_id(e->pid))
                mlprof__sb_printf(key, " (%s)", pn);
            break;
        }
        case K_BOTTOM:
        case K_TOP: {
            int32_t op = part->kind == K_BOTTOM ? links->bottom[index] : links->top[index];
            if (op >= 0)
                mlprof__sb_puts(key, t->ev[op].name);
            else if (!own_ops(t, e, part->text, key))
                mlprof__sb_puts(key, "(no operator)");
            break;
        }
        case K_STACK:
            if (links->bottom[index] >= 0 || !own_ops(t, e, part->text, key))
                an_gpu_op_stack(t, links, index, key);
            break;
        case K_LAUNCH: {
            int32_t r = links->launch[index];
            mlprof__sb_puts(key, r >= 0 ? t->ev[r].name : "(no launch)");
            break;
        }
        case K_NONE:
            put_name(key, ks, e);
            mlprof__sb_printf(key, "\x1f%zu", index); /* each event its own row */
            break;
        case K_OPTYPE: {
            /* the operator type: an argument's, else the name (MegEngine's --aggregate-by type) */
            const an_arg *a = an_event_arg_any(t, e, k_type_keys);
            if (a && a->type == AN_STR)
                mlprof__sb_puts(key, a->str);
            else
                put_name(key, ks, e);
            break;
        }
        default: {
            const an_arg *a = part->keys.n ? an_event_arg_in(t, e, &part->keys) : NULL;
            part->found += a != NULL;
            put_arg_value(key, a);
            break;
        }
        }
    }
}

/* -------------------------------------------------------------- filters */

static int name_matches(const char *pattern, const char *name)
{
    if (strpbrk(pattern, "*?["))
        return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

/* One word of --type: a category or an operator type, or a glob of either. */
typedef struct type_word {
    const char *text;
    const char *interned; /* the trace's copy, compared by pointer; NULL: the trace never names it */
    int glob;
    uint64_t kept; /* durations it keeps on its own */
} type_word;

/* The options' filters resolved against one trace, and what each keeps. */
typedef struct filter {
    const an_options *o;
    char *text; /* the --type list, cut at its commas */
    type_word *words;
    size_t nwords;
    an_keyset type_keys;
    uint64_t durations, kept;                  /* all durations; those every filter keeps */
    uint64_t by_type, by_name, by_min, by_max; /* those each filter keeps on its own */
    int64_t shortest, longest;
    const char *envelope_cat; /* the trace's "Trace", or NULL */
    uint64_t envelopes;       /* envelopes left out (not counted in durations) */
    const an_event *envelope; /* the first of them */
} filter;

static void filter_free(filter *f)
{
    mlprof__free(f->text);
    mlprof__free(f->words);
    memset(f, 0, sizeof *f);
}

/* Returns 0, or -1 (out of memory). */
static int filter_init(filter *f, const an_trace *t, const an_options *o)
{
    memset(f, 0, sizeof *f);
    f->o = o;
    f->shortest = INT64_MAX;
    f->longest = -1;
    f->envelope_cat = mlprof__map_get(&t->strings, "Trace", strlen("Trace"));
    an_keyset_init(t, k_type_keys, &f->type_keys);
    if (!o->type)
        return 0;
    size_t len = strlen(o->type);
    f->text = mlprof__malloc(len + 1);
    f->words = mlprof__calloc(len / 2 + 1, sizeof *f->words); /* n words take 2n - 1 bytes at least */
    if (!f->text || !f->words) {
        filter_free(f);
        return -1;
    }
    memcpy(f->text, o->type, len + 1);
    for (char *p = f->text; p;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        if (*p) {
            type_word *w = &f->words[f->nwords++];
            w->text = p;
            w->interned = mlprof__map_get(&t->strings, p, strlen(p));
            w->glob = strpbrk(p, "*?[") != NULL;
        }
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

/* The operator type e names in an argument (the first of k_type_keys it has,
 * as --aggregate-by op_type takes it), or NULL. */
static const char *type_arg(const an_trace *t, const filter *f, const an_event *e)
{
    const an_arg *a = f->type_keys.n ? an_event_arg_in(t, e, &f->type_keys) : NULL;
    return a && a->type == AN_STR ? a->str : NULL;
}

/* Whether w is e's category, its name, or type: the operator type an argument
 * of e gives (or NULL). */
static int word_matches(const type_word *w, const an_event *e, const char *type)
{
    if (!w->glob && !w->interned)
        return 0;
    if (w->glob)
        return fnmatch(w->text, e->cat, 0) == 0 || fnmatch(w->text, e->name, 0) == 0 ||
               (type && fnmatch(w->text, type, 0) == 0);
    return e->cat == w->interned || e->name == w->interned || type == w->interned;
}

/* Whether a pattern says something of what it matches: not "", "*", "**"...
 * which match every name and so name none in particular. */
static int says_something(const char *pattern)
{
    return pattern[strspn(pattern, "*")] != '\0';
}

/* Whether --type or --name names e itself (a word matches it, or the name).
 * A pattern that matches anything names no envelope: --name '*' keeps the
 * operators, not the profile's span around them. */
static int filter_names(const an_trace *t, const filter *f, const an_event *e)
{
    const char *type = f->nwords ? type_arg(t, f, e) : NULL;
    for (size_t k = 0; k < f->nwords; k++) {
        if (says_something(f->words[k].text) && word_matches(&f->words[k], e, type))
            return 1;
    }
    return f->o->name && says_something(f->o->name) && name_matches(f->o->name, e->name);
}

/* Whether every filter keeps e, counting what each keeps on its own. A trace's
 * envelope (PyTorch's "PyTorch Profiler (0)", category "Trace", which spans
 * the whole profile) is not an operator: it is left out, and counted, unless
 * --type or --name names it. */
static int filter_event(const an_trace *t, filter *f, const an_event *e)
{
    const an_options *o = f->o;
    if (e->ph != 'X')
        return 0;
    if (f->envelope_cat && e->cat == f->envelope_cat && !filter_names(t, f, e)) {
        if (!f->envelopes++)
            f->envelope = e;
        return 0;
    }
    int keep = 1;
    f->durations++;
    f->shortest = e->dur < f->shortest ? e->dur : f->shortest;
    f->longest = e->dur > f->longest ? e->dur : f->longest;
    if (o->min_ns >= 0) {
        if (e->dur >= o->min_ns)
            f->by_min++;
        else
            keep = 0;
    }
    if (o->max_ns >= 0) {
        if (e->dur <= o->max_ns)
            f->by_max++;
        else
            keep = 0;
    }
    if (f->nwords) {
        int any = 0;
        const char *type = type_arg(t, f, e);
        for (size_t k = 0; k < f->nwords; k++) {
            if (word_matches(&f->words[k], e, type)) {
                f->words[k].kept++;
                any = 1;
            }
        }
        if (any)
            f->by_type++;
        else
            keep = 0;
    }
    if (o->name) {
        if (name_matches(o->name, e->name))
            f->by_name++;
        else
            keep = 0;
    }
    f->kept += (uint64_t)keep;
    return keep;
}

/* A filter that keeps no duration on its own: its option and its value (a
 * time for --min-time and --max-time). */
typedef struct miss {
    const char *option, *value;
    int64_t ns;
} miss;

/* The i-th filter that keeps nothing, in the order --type's words, --name,
 * --min-time, --max-time; 0 past the last. */
static int filter_miss(const filter *f, size_t i, miss *m)
{
    const an_options *o = f->o;
    memset(m, 0, sizeof *m);
    for (size_t k = 0; k < f->nwords; k++) {
        if (!f->words[k].kept && i-- == 0) {
            m->option = "--type";
            m->value = f->words[k].text;
            return 1;
        }
    }
    if (o->name && !f->by_name && i-- == 0) {
        m->option = "--name";
        m->value = o->name;
    } else if (o->min_ns >= 0 && !f->by_min && i-- == 0) {
        m->option = "--min-time";
        m->ns = o->min_ns;
    } else if (o->max_ns >= 0 && !f->by_max && i-- == 0) {
        m->option = "--max-time";
        m->ns = o->max_ns;
    }
    return m->option != NULL;
}

/* '--type "conv"', or '--min-time 100.000 us'. */
static void put_filter(mlprof__sb *out, const char *option, const char *value, int64_t ns)
{
    mlprof__sb_printf(out, "%s ", option);
    if (value)
        mlprof__sb_printf(out, "\"%s\"", value);
    else
        an_put_duration(out, ns);
}

static void put_miss(mlprof__sb *out, const miss *m)
{
    put_filter(out, m->option, m->value, m->ns);
}

/* How often each category, operator type and name occurs among the durations:
 * what a note on a filter that keeps nothing offers instead. */
typedef struct tally {
    mlprof__map cats, types, names;
} tally;

static int tally_one(mlprof__map *m, const char *s)
{
    mlprof__map_entry *slot = mlprof__map_slot(m, s, strlen(s));
    if (!slot)
        return -1;
    slot->value = (void *)((uintptr_t)slot->value + 1);
    return 0;
}

static void tally_free(tally *y)
{
    mlprof__map_free(&y->cats);
    mlprof__map_free(&y->types);
    mlprof__map_free(&y->names);
}

/* Returns 0, or -1 (out of memory). */
static int tally_init(tally *y, const an_trace *t, const filter *f)
{
    mlprof__map_init(&y->cats);
    mlprof__map_init(&y->types);
    mlprof__map_init(&y->names);
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'X')
            continue;
        const char *type = type_arg(t, f, e);
        if (tally_one(&y->cats, e->cat) || tally_one(&y->types, type ? type : e->name) ||
            tally_one(&y->names, e->name))
            return -1;
    }
    return 0;
}

static int tally_cmp(const void *pa, const void *pb)
{
    const mlprof__map_entry *a = *(const mlprof__map_entry *const *)pa, *b = *(const mlprof__map_entry *const *)pb;
    uintptr_t x = (uintptr_t)a->value, y = (uintptr_t)b->value;
    return x != y ? (x > y ? -1 : 1) : strcmp(a->key, b->key);
}

/* "what: a (3), b (1)", the most frequent first, at most max of them. */
static void put_tally(mlprof__sb *out, const char *what, const mlprof__map *m, size_t max)
{
    const mlprof__map_entry **v = m->count ? mlprof__malloc(m->count * sizeof *v) : NULL;
    size_t n = 0;
    for (size_t i = 0; v && i < m->cap; i++) {
        if (m->slots[i].key)
            v[n++] = &m->slots[i];
    }
    mlprof__sort(v, n, sizeof *v, tally_cmp);
    mlprof__sb_printf(out, "; %s: ", what);
    for (size_t i = 0; i < n && i < max; i++)
        mlprof__sb_printf(out, "%s%s (%llu)", i ? ", " : "", v[i]->key[0] ? v[i]->key : "(none)",
                          (unsigned long long)(uintptr_t)v[i]->value);
    if (n > max)
        mlprof__sb_printf(out, " and %zu more", n - max);
    mlprof__free(v);
}

/* The edit distance of two short strings, ignoring case; SIZE_MAX for long ones. */
static size_t distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b), row[65];
    if (na > 64 || nb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* What the user may have meant by a filter word that matched nothing, from the
 * strings of the maps; written into buf ("" when nothing comes close). exact:
 * the word is compared whole (--type), else it may be part of a name. */
static void suggest(const char *word, int exact, const mlprof__map *const *maps, size_t nmaps, char *buf,
                    size_t len)
{
    buf[0] = '\0';
    size_t n = strlen(word), best = n / 5 ? n / 5 : 1, best_count = 0;
    int glob = strpbrk(word, "*?[") != NULL;
    char wide[300];
    snprintf(wide, sizeof wide, "%s%s%s", word[0] == '*' ? "" : "*", word, n && word[n - 1] == '*' ? "" : "*");
    for (size_t k = 0; k < nmaps; k++) {
        for (size_t i = 0; i < maps[k]->cap; i++) {
            const mlprof__map_entry *s = &maps[k]->slots[i];
            if (!s->key || !s->key[0])
                continue;
            uintptr_t count = (uintptr_t)s->value;
            if (glob || exact) {
                /* a glob that matches inside names, or ignoring case */
                if (fnmatch(wide, s->key, 0) == 0 && strcmp(wide, word) != 0) {
                    snprintf(buf, len, "%s", wide);
                    return;
                }
                if (glob && fnmatch(word, s->key, FNM_CASEFOLD) == 0) {
                    snprintf(buf, len, "%s", s->key);
                    return;
                }
            } else if (strcasestr(s->key, word)) {
                snprintf(buf, len, "%s", s->key);
                return;
            }
            size_t d = glob ? SIZE_MAX : distance(word, s->key);
            if (d < best || (d == best && d != SIZE_MAX && count > best_count)) {
                best = d;
                best_count = count;
                snprintf(buf, len, "%s", s->key);
            }
        }
    }
}

/* Lines (each ending in a newline) on the filters that keep nothing, and what
 * the trace has instead: its categories and operator types for --type, names
 * for --name, the longest or shortest duration for a time. Returns 0, or -1
 * (out of memory). */
static int filter_notes(const an_trace *t, const filter *f, mlprof__sb *notes)
{
    const an_options *o = f->o;
    miss m;
    if (!f->durations && filter_miss(f, 0, &m)) {
        mlprof__sb_printf(notes, "%s: the trace holds no durations (\"X\" events or \"B\"/\"E\" pairs), so ", t->path);
        for (size_t i = 0; filter_miss(f, i, &m); i++) {
            mlprof__sb_puts(notes, i ? ", " : "");
            put_miss(notes, &m);
        }
        mlprof__sb_puts(notes, " match nothing\n");
        return 0;
    }
    if (!filter_miss(f, 0, &m)) {
        if (f->kept || !f->durations || (!f->nwords && !o->name && o->min_ns < 0 && o->max_ns < 0))
            return 0;
        /* each keeps some; together, none */
        mlprof__sb_printf(notes, "%s: no duration passes all the filters together (of its %llu durations", t->path,
                          (unsigned long long)f->durations);
        const struct {
            int on;
            const char *option, *value;
            int64_t ns;
            uint64_t kept;
        } parts[] = {{f->nwords > 0, "--type", o->type, 0, f->by_type},
                     {o->name != NULL, "--name", o->name, 0, f->by_name},
                     {o->min_ns >= 0, "--min-time", NULL, o->min_ns, f->by_min},
                     {o->max_ns >= 0, "--max-time", NULL, o->max_ns, f->by_max}};
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            if (!parts[i].on)
                continue;
            mlprof__sb_puts(notes, ", ");
            put_filter(notes, parts[i].option, parts[i].value, parts[i].ns);
            mlprof__sb_printf(notes, " keeps %llu", (unsigned long long)parts[i].kept);
        }
        mlprof__sb_puts(notes, ")\n");
        return 0;
    }
    tally y;
    int rc = tally_init(&y, t, f);
    for (size_t i = 0; rc == 0 && filter_miss(f, i, &m); i++) {
        mlprof__sb_printf(notes, "%s: ", t->path);
        put_miss(notes, &m);
        if (strcmp(m.option, "--type") == 0 && strcmp(m.value, o->type) != 0)
            mlprof__sb_printf(notes, " (of \"%s\")", o->type);
        mlprof__sb_printf(notes, " matches none of its %llu durations", (unsigned long long)f->durations);
        char hint[300];
        if (strcmp(m.option, "--type") == 0) {
            put_tally(notes, "categories", &y.cats, 8);
            put_tally(notes, "operator types", &y.types, 8);
            const mlprof__map *maps[] = {&y.types, &y.cats, &y.names};
            suggest(m.value, 1, maps, 3, hint, sizeof hint);
        } else if (strcmp(m.option, "--name") == 0) {
            put_tally(notes, "names", &y.names, 8);
            const mlprof__map *maps[] = {&y.names};
            suggest(m.value, 0, maps, 1, hint, sizeof hint);
        } else {
            mlprof__sb_puts(notes, strcmp(m.option, "--min-time") == 0 ? "; the longest is " : "; the shortest is ");
            an_put_duration(notes, strcmp(m.option, "--min-time") == 0 ? f->longest : f->shortest);
            hint[0] = '\0';
        }
        if (hint[0])
            mlprof__sb_printf(notes, "; did you mean \"%s\"?", hint);
        mlprof__sb_putc(notes, '\n');
    }
    tally_free(&y);
    return rc;
}

/* For the table: under the header, a note per filter that keeps nothing; or,
 * when no duration is kept, why. */
static void put_misses_table(mlprof__sb *out, const filter *f)
{
    miss m;
    for (size_t i = 0; f->kept && filter_miss(f, i, &m); i++) {
        mlprof__sb_puts(out, "note: ");
        put_miss(out, &m);
        mlprof__sb_puts(out, " matches nothing\n");
    }
}

static void put_nothing_kept(mlprof__sb *out, const filter *f)
{
    miss m;
    mlprof__sb_puts(out, "(no durations match");
    if (!f->durations) {
        mlprof__sb_puts(out, ": the trace holds none");
    } else if (filter_miss(f, 0, &m)) {
        for (size_t i = 0; filter_miss(f, i, &m); i++) {
            mlprof__sb_puts(out, i ? "; " : ": ");
            put_miss(out, &m);
            mlprof__sb_puts(out, " matches nothing");
        }
    } else if (f->nwords || f->o->name || f->o->min_ns >= 0 || f->o->max_ns >= 0) {
        mlprof__sb_puts(out, ": no duration passes all the filters together");
    }
    mlprof__sb_puts(out, ")\n");
}

static void put_misses_json(mlprof__sb *out, const filter *f)
{
    miss m;
    mlprof__sb tmp;
    mlprof__sb_init(&tmp);
    mlprof__sb_puts(out, ",\"filters_matching_nothing\":[");
    for (size_t i = 0; filter_miss(f, i, &m); i++) {
        mlprof__sb_printf(out, "%s{\"option\":\"%s\",\"value\":", i ? "," : "", m.option);
        mlprof__sb_reset(&tmp);
        m.value ? mlprof__sb_puts(&tmp, m.value) : an_put_duration(&tmp, m.ns);
        mlprof__sb_json_str(out, tmp.data ? tmp.data : "", tmp.len);
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_putc(out, ']');
    mlprof__sb_free(&tmp);
}

/* The argument keys every event is asked for, interned once per table. */
typedef struct arg_keys {
    an_keyset flops, bytes, in, out, both;
    an_cost_keys cost; /* for the counts computed from shapes */
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
    an_cost_keys_init(t, &k->cost);
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

/* gpu: the GPU time of the work e launched, or -1 when it launched none. */
static void group_add(an_trace *t, arg_keys *keys, group *g, const an_event *e, int64_t gpu)
{
    if (!g->count) {
        g->first = e;
        g->self_min = g->total_min = g->gpu_min = INT64_MAX;
    }
    if (gpu >= 0) {
        g->gpu_n++;
        an_sum_add(&g->gpu_sum, gpu);
        g->gpu_min = gpu < g->gpu_min ? gpu : g->gpu_min;
        g->gpu_max = gpu > g->gpu_max ? gpu : g->gpu_max;
    }
    g->count++;
    an_sum_add(&g->self_sum, e->self);
    an_sum_add(&g->total_sum, e->dur);
    g->self_min = e->self < g->self_min ? e->self : g->self_min;
    g->self_max = e->self > g->self_max ? e->self : g->self_max;
    g->total_min = e->dur < g->total_min ? e->dur : g->total_min;
    g->total_max = e->dur > g->total_max ? e->dur : g->total_max;
    double f = an_arg_num(an_event_arg_in(t, e, &keys->flops), NAN);
    double b = an_arg_num(an_event_arg_in(t, e, &keys->bytes), NAN);
    if (isnan(f) || isnan(b)) { /* not recorded: from the shapes, where opcost knows the operator */
        double cf, cb;
        an_event_cost(t, &keys->cost, e, &cf, &cb);
        f = isnan(f) ? cf : f;
        b = isnan(b) ? cb : b;
    }
    if (!isnan(f)) {
        g->flops += f;
        g->flops_n++;
    }
    if (!isnan(b)) {
        g->bytes += b;
        g->bytes_n++;
    }
    const char *is, *os;
    event_shapes(t, keys, e, &is, &os);
    if (g->count == 1) {
        g->in_shape = is;
        g->out_shape = os;
        g->shape_ts = e->ts;
    } else {
        g->in_varied |= is != g->in_shape; /* interned: one pointer per text */
        g->out_varied |= os != g->out_shape;
        if (e->ts < g->shape_ts) { /* the earliest call's: the same whatever order the file holds them in */
            g->in_shape = is;
            g->out_shape = os;
            g->shape_ts = e->ts;
        }
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
    g->v[C_GPU] = g->gpu_n ? combine(how, g->gpu_sum, g->gpu_min, g->gpu_max, g->gpu_n) : NAN;
    /* rates over the whole time the operator ran, children included: a
     * convolution's FLOPs are done by its GEMM; for an operator that
     * launched GPU work, over that work's time (its CPU time is the launch's,
     * and its FLOPs over it a rate no device reaches) */
    double secs = (double)g->total_sum / 1e9;
    g->rate_time = RATE_TOTAL;
    if (g->gpu_n) {
        int all = g->gpu_n == g->count && g->gpu_sum > 0;
        g->rate_time = all ? RATE_GPU : RATE_NONE;
        secs = all ? (double)g->gpu_sum / 1e9 : 0;
    }
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

/* The groups of a trace's kept durations, each finished (its columns set). */
typedef struct group_table {
    mlprof__map index; /* key -> group number + 1; owns the keys */
    group *groups;
    size_t n, cap, kept;
    filter f;    /* what each filter kept */
    key_spec ks; /* the grouping, and what its argument keys found */
} group_table;

static void table_free(group_table *tab)
{
    filter_free(&tab->f);
    key_spec_free(&tab->ks);
    mlprof__free(tab->groups);
    mlprof__map_free(&tab->index);
    memset(tab, 0, sizeof *tab);
}

/* The i-th argument part of the grouping that no kept duration has, or NULL
 * past the last (none when nothing is kept: the filters' notes say why). */
static const key_part *missing_key(const group_table *tab, size_t i)
{
    for (size_t k = 0; tab->kept && k < tab->ks.n; k++) {
        const key_part *p = &tab->ks.parts[k];
        if (p->kind == K_ARG && !p->found && i-- == 0)
            return p;
    }
    return NULL;
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
    case C_GPU: isnan(v) ? mlprof__sb_putc(out, '-') : an_put_duration(out, (int64_t)llround(v)); break;
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
    an_put_duration(out, an_ns_between(t->t_min, t->t_max));
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
    if (t->note[0])
        mlprof__sb_printf(out, "note: %s\n", t->note);
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
        if ((c == C_KEY || c == C_IN || c == C_OUT) && width[c] > 60)
            width[c] = 60; /* PyTorch's shapes of a whole model's forward run to kilobytes */
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
            if ((c == C_KEY || c == C_IN || c == C_OUT) && tmp.len > width[c])
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

static void format_json(mlprof__sb *out, const an_trace *t, const an_options *o, const group_table *tab,
                        group **rows, size_t shown, const double *cum, int order, int asc)
{
    mlprof__sb_puts(out, "{\"trace\":");
    mlprof__sb_json_str(out, t->path, strlen(t->path));
    mlprof__sb_puts(out, ",\"writer\":");
    mlprof__sb_json_str(out, t->writer, strlen(t->writer));
    mlprof__sb_printf(out, ",\"events\":%zu,\"durations_kept\":%zu,\"span_ns\":%lld,\"aggregate_by\":", t->nev, tab->kept,
                      (long long)an_ns_between(t->t_min, t->t_max));
    mlprof__sb_json_str(out, o->aggregate_by, strlen(o->aggregate_by));
    mlprof__sb_printf(out, ",\"aggregate\":\"%s\",\"order_by\":\"%s\",\"ascending\":%s,\"partial\":%s",
                      k_how[o->aggregate], k_cols[order].name, asc ? "true" : "false", t->partial ? "true" : "false");
    if (t->partial) {
        mlprof__sb_puts(out, ",\"error\":");
        mlprof__sb_json_str(out, t->error, strlen(t->error));
    }
    mlprof__sb_printf(out, ",\"unmatched_ends\":%llu,\"unclosed_begins\":%llu",
                      (unsigned long long)t->unmatched_ends, (unsigned long long)t->unclosed_begins);
    put_misses_json(out, &tab->f);
    mlprof__sb_printf(out, ",\"envelopes_left_out\":%llu,\"grouping_keys_missing\":[",
                      (unsigned long long)tab->f.envelopes);
    const key_part *p;
    for (size_t i = 0; (p = missing_key(tab, i)) != NULL; i++) {
        if (i)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, p->text, strlen(p->text));
    }
    mlprof__sb_puts(out, "],\"rows\":[");
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
        mlprof__sb_puts(out, ",\"gpu_ns\":");
        json_num(out, g->v[C_GPU]);
        mlprof__sb_printf(out, ",\"gpu_calls\":%llu,\"rate_time\":", (unsigned long long)g->gpu_n);
        if (k_rate_time[g->rate_time])
            mlprof__sb_printf(out, "\"%s\"", k_rate_time[g->rate_time]);
        else
            mlprof__sb_puts(out, "null");
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
                         "bytes_per_s,input_shapes,output_shapes,gpu_ns,rate_time,shapes_vary\n");
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
        mlprof__sb_putc(out, ',');
        if (!isnan(g->v[C_GPU]))
            mlprof__sb_printf(out, "%.17g", g->v[C_GPU]);
        mlprof__sb_printf(out, ",%s,%s\n", k_rate_time[g->rate_time] ? k_rate_time[g->rate_time] : "",
                          g->in_varied || g->out_varied ? "true" : "false");
    }
}

/* A line saying that no row has the column the rows are ordered by, and which
 * arguments would give it; after the trace's path when t is given, else after
 * "note: ". */
static void put_order_note(mlprof__sb *out, const an_trace *t, const an_options *o, int col)
{
    if (col == C_GPU) {
        mlprof__sb_printf(out, "%s: --order-by %s: no row launched GPU work (kernels, copies, memsets); the rows "
                               "are in name order\n", t ? t->path : "note", o->order_by);
        return;
    }
    const char *const *keys = col == C_FLOPS || col == C_FLOPS_RATE ? k_flops_keys
                               : col == C_BYTES || col == C_BW      ? k_bytes_keys
                               : col == C_IN                        ? k_in_keys
                                                                    : k_out_keys;
    mlprof__sb_printf(out, "%s: --order-by %s: no row has %s (no kept duration has an argument ",
                      t ? t->path : "note", o->order_by, k_cols[col].name);
    for (size_t i = 0; keys[i]; i++)
        mlprof__sb_printf(out, "%s\"%s\"", i == 0 ? "" : keys[i + 1] ? ", " : " or ", keys[i]);
    mlprof__sb_puts(out, "); the rows are in name order\n");
}

static int build_table(an_trace *t, const an_options *o, group_table *tab)
{
    memset(tab, 0, sizeof *tab);
    mlprof__map_init(&tab->index);
    if (key_spec_init(&tab->ks, t, o->aggregate_by) != 0)
        return -1;
    /* the links for the grouping keys, and for the GPU time of the work
     * each operator launched (where the trace has GPU events) */
    int gpu_events = 0;
    for (size_t i = 0; i < t->nev && !gpu_events && !tab->ks.links; i++)
        gpu_events = an_gpu_kind(&t->ev[i]) != AN_GPU_NONE;
    an_gpu_links links, *lp = NULL;
    int64_t *gpu_ns = NULL; /* per event: an_gpu_op_times */
    if (tab->ks.links || gpu_events) {
        if (an_gpu_link(t, &links) != 0)
            return -1;
        lp = &links;
        if (an_gpu_op_times(t, lp, &gpu_ns) != 0) {
            an_gpu_links_free(lp);
            return -1;
        }
    } else {
        an_compute_self(t);
    }
    if (filter_init(&tab->f, t, o) != 0) {
        if (lp)
            an_gpu_links_free(lp);
        mlprof__free(gpu_ns);
        return -1;
    }
    mlprof__sb key;
    mlprof__sb_init(&key);
    arg_keys keys;
    arg_keys_init(t, &keys);
    int rc = 0;
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        const an_event *e = &t->ev[i];
        if (!filter_event(t, &tab->f, e))
            continue;
        tab->kept++;
        group_key(t, lp, e, i, &tab->ks, &key);
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
        group_add(t, &keys, &tab->groups[(uintptr_t)slot->value - 1], e, gpu_ns ? gpu_ns[i] : -1);
    }
    mlprof__sb_free(&key);
    mlprof__free(gpu_ns);
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

/* "the envelope "PyTorch Profiler (0)" (category Trace, 43.459 s) is left
 * out", or the count of them. */
static void put_envelopes(mlprof__sb *out, const filter *f)
{
    if (f->envelopes == 1) {
        mlprof__sb_printf(out, "the trace's envelope \"%s\" (category Trace, ", f->envelope->name);
        an_put_duration(out, f->envelope->dur);
        mlprof__sb_puts(out, ") is left out");
    } else {
        mlprof__sb_printf(out, "%llu trace envelopes (category Trace, such as \"%s\") are left out",
                          (unsigned long long)f->envelopes, f->envelope->name);
    }
    mlprof__sb_puts(out, ": an envelope spans the profile and is not an operator (--type Trace shows it)");
}

/* Under the table's header: the envelopes left out, the grouping keys no
 * kept duration has. */
static void put_table_notes(mlprof__sb *out, const group_table *tab)
{
    if (tab->f.envelopes) {
        mlprof__sb_puts(out, "note: ");
        put_envelopes(out, &tab->f);
        mlprof__sb_putc(out, '\n');
    }
    const key_part *p;
    for (size_t i = 0; (p = missing_key(tab, i)) != NULL; i++)
        mlprof__sb_printf(out, "note: --aggregate-by %s: no kept duration has this argument, so every row has "
                               "\"-\" there\n", p->text);
}

/* Lines on the grouping keys that no kept duration has, and the argument keys
 * the kept durations do have (most frequent first) with a near match. Returns
 * 0, or -1 (out of memory). */
static int missing_key_notes(const an_trace *t, const an_options *o, const group_table *tab, mlprof__sb *notes)
{
    if (!missing_key(tab, 0))
        return 0;
    /* the kept durations again, their argument keys counted: only when a key is missing */
    filter f;
    mlprof__map have;
    mlprof__map_init(&have);
    int rc = filter_init(&f, t, o);
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (!filter_event(t, &f, e))
            continue;
        for (uint32_t a = 0; rc == 0 && a < e->nargs; a++)
            rc = tally_one(&have, t->args[e->args + a].key);
    }
    const key_part *p;
    for (size_t i = 0; rc == 0 && (p = missing_key(tab, i)) != NULL; i++) {
        mlprof__sb_printf(notes, "%s: --aggregate-by %s: none of the %zu kept durations has an argument \"%s\"",
                          t->path, p->text, tab->kept, p->text);
        for (size_t k = 0, first = 1; p->aliases && p->aliases[k]; k++) {
            if (strcmp(p->aliases[k], p->text) != 0) {
                mlprof__sb_printf(notes, "%s\"%s\"", first ? " (nor " : ", ", p->aliases[k]);
                first = 0;
            }
        }
        mlprof__sb_puts(notes, p->aliases ? "), so every row has \"-\" there" : ", so every row has \"-\" there");
        if (have.count) {
            put_tally(notes, "their arguments", &have, 10);
            char hint[300];
            const mlprof__map *maps[] = {&have};
            suggest(p->text, 0, maps, 1, hint, sizeof hint);
            if (hint[0])
                mlprof__sb_printf(notes, "; did you mean \"%s\"?", hint);
        } else {
            mlprof__sb_puts(notes, "; they have no arguments");
        }
        mlprof__sb_putc(notes, '\n');
    }
    filter_free(&f);
    mlprof__map_free(&have);
    return rc;
}

/* What the output cannot say itself goes to the notes (standard error): the
 * filters that keep nothing, the grouping keys no duration has, and in CSV
 * (or diff) the envelopes left out. Returns 0, or -1 (out of memory). */
static int table_notes(const an_trace *t, const an_options *o, const group_table *tab, int envelopes,
                       mlprof__sb *notes)
{
    if (filter_notes(t, &tab->f, notes) != 0 || missing_key_notes(t, o, tab, notes) != 0)
        return -1;
    if (envelopes && tab->f.envelopes) {
        mlprof__sb_printf(notes, "%s: ", t->path);
        put_envelopes(notes, &tab->f);
        mlprof__sb_putc(notes, '\n');
    }
    return 0;
}

/* Under the table's header, where operators with FLOPs or bytes launched
 * GPU work: which time the rates are over, and why some rows have none. */
static void put_rate_note(mlprof__sb *out, group **rows, size_t n)
{
    size_t on_gpu = 0, none = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i]->flops_n && !rows[i]->bytes_n)
            continue;
        on_gpu += rows[i]->rate_time == RATE_GPU;
        none += rows[i]->rate_time == RATE_NONE;
    }
    if (!on_gpu && !none)
        return;
    mlprof__sb_puts(out, "note: FLOPS and bandwidth of operators that launched GPU work (kernels, copies, memsets) "
                         "are over that work's time (gpu time, durations summed), not their CPU time; the others' "
                         "over their total time\n");
    if (none)
        mlprof__sb_printf(out, "note: %zu row%s no FLOPS or bandwidth (\"-\"): only some of %s calls launched GPU "
                               "work, or that work took no time\n",
                          none, none == 1 ? " has" : "s have", none == 1 ? "its" : "their");
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
        int has_flops = 0, has_bytes = 0, has_in = 0, has_out = 0, has_gpu = 0, gpu_rates = 0;
        for (size_t i = 0; i < ngroups; i++) {
            has_gpu |= rows[i]->gpu_n > 0;
            gpu_rates |= rows[i]->gpu_n > 0 && (rows[i]->flops_n > 0 || rows[i]->bytes_n > 0);
            has_flops |= rows[i]->flops_n > 0;
            has_bytes |= rows[i]->bytes_n > 0;
            has_in |= rows[i]->in_shape != NULL;
            has_out |= rows[i]->out_shape != NULL;
        }
        /* ordered by a column no row has: the order falls back to the names; say so */
        int c = g_order_col, lacks = ngroups && ((c == C_FLOPS || c == C_FLOPS_RATE) ? !has_flops
                                                 : (c == C_BYTES || c == C_BW)       ? !has_bytes
                                                 : c == C_IN                         ? !has_in
                                                 : c == C_OUT                        ? !has_out
                                                 : c == C_GPU                        ? !has_gpu
                                                                                     : 0);
        if (lacks && o->notes)
            put_order_note(o->notes, t, o, c);
        int cols[C_N], ncols = 0;
        cols[ncols++] = C_KEY;
        cols[ncols++] = C_COUNT;
        cols[ncols++] = C_SELF;
        cols[ncols++] = C_TOTAL;
        cols[ncols++] = C_CUM;
        /* the time the rates of operators that launched GPU work are over */
        if (gpu_rates || g_order_col == C_GPU)
            cols[ncols++] = C_GPU;
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
            format_json(out, t, o, &tab, rows, shown, cum, g_order_col, g_order_asc);
        } else if (o->format == AN_CSV) {
            format_csv(out, rows, shown, cum);
        } else {
            print_header(out, t, o, kept, ngroups, g_order_col, g_order_asc);
            print_warnings(out, t, 0);
            put_misses_table(out, &tab.f);
            put_table_notes(out, &tab);
            if (lacks)
                put_order_note(out, NULL, o, c);
            if (gpu_rates)
                put_rate_note(out, rows, ngroups);
            mlprof__sb_putc(out, '\n');
            if (ngroups)
                format_table(out, rows, ngroups, shown, cum, cols, ncols, o->aggregate);
            else
                put_nothing_kept(out, &tab.f);
        }
        if (o->notes && table_notes(t, o, &tab, o->format == AN_CSV, o->notes) != 0)
            rc = -1;
    }
    mlprof__free(rows);
    mlprof__free(cum);
    table_free(&tab);
    return rc == 0 && !out->failed ? 0 : -1;
}

int an_group_rows(an_trace *t, const an_options *o, an_group_row **rows, size_t *n, mlprof__sb *notes)
{
    group_table tab;
    *rows = NULL;
    *n = 0;
    int rc = build_table(t, o, &tab);
    an_group_row *r = rc == 0 && tab.n ? mlprof__calloc(tab.n, sizeof *r) : NULL;
    if (tab.n && !r)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < tab.n; i++) {
        const group *g = &tab.groups[i];
        r[i].name = an_intern(t, g->key, strlen(g->key));
        if (!r[i].name)
            rc = -1;
        r[i].first = g->first;
        r[i].count = g->count;
        r[i].self_ns = g->self_sum;
        r[i].total_ns = g->total_sum;
        r[i].flops = g->flops;
        r[i].flops_n = g->flops_n;
        r[i].bytes = g->bytes;
        r[i].bytes_n = g->bytes_n;
        r[i].gpu_ns = g->gpu_sum;
        r[i].gpu_calls = g->gpu_n;
    }
    if (rc == 0 && notes && table_notes(t, o, &tab, 1, notes) != 0)
        rc = -1;
    if (rc == 0) {
        *rows = r;
        *n = tab.n;
    } else {
        mlprof__free(r);
    }
    table_free(&tab);
    return rc;
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
    if (!r->a || !r->b)
        return !r->a ? "new" : "missing";
    if (r->regressed)
        return "regressed";
    return r->delta == 0 && r->a->count == r->b->count ? "unchanged" : "changed";
}

static void put_signed_duration(mlprof__sb *out, double ns)
{
    mlprof__sb_putc(out, ns < 0 ? '-' : '+');
    an_put_duration(out, (int64_t)llround(fabs(ns)));
}

static int diff_tables(an_trace *ta, an_trace *tb, const an_options *o, const an_diff_options *d, mlprof__sb *out,
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
    if (rc == 0 && o->notes && (table_notes(ta, o, &A, 1, o->notes) != 0 || table_notes(tb, o, &B, 1, o->notes) != 0))
        rc = -1;
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
        size_t w = 5; /* "(all)" */
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
            if (r && strcmp(diff_status(r), "changed") != 0 && strcmp(diff_status(r), "unchanged") != 0)
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

/* ----------------------------------------------------------------- steps */

/* Where one step ran on one thread: a ProfilerStep#N range (PyTorch's
 * profiler marks each step() so), or one of mlprof's frames. */
typedef struct step_win {
    int64_t pid, tid, ts, end;
    int64_t number;
    const char *name; /* a frame's (interned) */
    size_t step; /* index into steps.s */
    int unfinished;
} step_win;

typedef struct step_info {
    int64_t number;
    int64_t ts, end;  /* the span of its windows */
    int unfinished;   /* a window was still open when the trace was written */
    int chosen;
    size_t events;    /* events that fall in it */
} step_info;

typedef struct steps {
    const char *source; /* "ProfilerStep#N", or the name of the frames */
    int frames;
    step_info *s;       /* by number */
    size_t n;
    step_win *w;        /* by pid, tid, start */
    step_win *by_pid;   /* the same with tid 0, by pid, start */
    step_win *by_time;  /* with pid and tid 0, by start */
    size_t nw;
    int64_t longest;    /* the longest window, ns */
    int32_t *of;        /* per event: the step it falls in, or -1 */
    int64_t incomplete; /* the last step when it is judged incomplete, else -1 */
    int64_t median;     /* the median span of the other steps, ns */
} steps;

static void steps_free(steps *st)
{
    mlprof__free(st->s);
    mlprof__free(st->w);
    mlprof__free(st->by_pid);
    mlprof__free(st->by_time);
    mlprof__free(st->of);
    memset(st, 0, sizeof *st);
}

/* N of "ProfilerStep#N" (HTA's pattern: "ProfilerStep", "#" and digits, blanks
 * allowed around the "#"); 0 when the name is not a step's. */
static int step_number(const char *name, int64_t *n)
{
    if (strncmp(name, "ProfilerStep", 12) != 0)
        return 0;
    const char *p = name + 12;
    p += strspn(p, " \t");
    if (*p++ != '#')
        return 0;
    p += strspn(p, " \t");
    if (!isdigit((unsigned char)*p))
        return 0;
    *n = strtoll(p, NULL, 10);
    return 1;
}

static int win_cmp_track(const void *pa, const void *pb)
{
    const step_win *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static int win_cmp_number(const void *pa, const void *pb)
{
    const step_win *a = pa, *b = pb;
    if (a->number != b->number)
        return a->number < b->number ? -1 : 1;
    return win_cmp_track(pa, pb);
}

static int add_window(steps *st, size_t *cap, const step_win *w)
{
    if (st->nw == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        step_win *n = mlprof__realloc(st->w, c * sizeof *n);
        if (!n)
            return -1;
        st->w = n;
        *cap = c;
    }
    st->w[st->nw++] = *w;
    return 0;
}

/* PyTorch's ProfilerStep#N ranges on the CPU (their GPU annotations are not
 * windows: GPU work belongs to the step that launched it). */
static int collect_profiler_steps(const an_trace *t, steps *st, size_t *cap)
{
    const char *gpu_annotation = mlprof__map_get(&t->strings, "gpu_user_annotation", strlen("gpu_user_annotation"));
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        step_win w = {.pid = e->pid, .tid = e->tid, .ts = e->ts, .end = e->ts + e->dur};
        if (e->ph != 'X' || (gpu_annotation && e->cat == gpu_annotation) || !step_number(e->name, &w.number))
            continue;
        if (add_window(st, cap, &w) != 0)
            return -1;
    }
    st->source = "ProfilerStep#N";
    return 0;
}

/* mlprof's frames: async begin/end pairs ("b", "e") of one id. The most
 * frequent frame name makes the steps; on each thread its passes are steps
 * 1, 2, ... in the order they began. */
static int collect_frames(const an_trace *t, steps *st, size_t *cap)
{
    mlprof__map open, names;
    mlprof__map_init(&open);
    mlprof__map_init(&names);
    int rc = 0;
    char key[96];
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        const an_event *e = &t->ev[i];
        if (e->ph != 'b' && e->ph != 'e')
            continue;
        snprintf(key, sizeof key, "%lld:%llu:%p", (long long)e->pid, (unsigned long long)e->id, (const void *)e->name);
        mlprof__map_entry *slot = mlprof__map_slot(&open, key, strlen(key));
        if (!slot) {
            rc = -1;
        } else if (e->ph == 'b') {
            slot->value = (void *)(uintptr_t)(i + 1);
        } else if (slot->value) {
            const an_event *b = &t->ev[(uintptr_t)slot->value - 1];
            const an_arg *u = an_event_arg(t, b, "unfinished");
            step_win w = {.pid = b->pid, .tid = b->tid, .ts = b->ts, .end = e->ts,
                          .name = b->name,
                          .unfinished = u && (u->type == AN_NUM ? u->num != 0 : strcmp(u->str, "true") == 0)};
            slot->value = NULL;
            rc = add_window(st, cap, &w) != 0 || tally_one(&names, b->name) != 0 ? -1 : 0;
        }
    }
    /* the most frequent name */
    const char *best = NULL;
    uintptr_t most = 0;
    for (size_t i = 0; i < names.cap; i++) {
        const mlprof__map_entry *s = &names.slots[i];
        if (s->key && ((uintptr_t)s->value > most || ((uintptr_t)s->value == most && best && strcmp(s->key, best) < 0))) {
            most = (uintptr_t)s->value;
            best = s->key;
        }
    }
    const char *chosen = best ? mlprof__map_get(&t->strings, best, strlen(best)) : NULL;
    size_t kept = 0;
    for (size_t i = 0; i < st->nw; i++) {
        if (st->w[i].name == chosen)
            st->w[kept++] = st->w[i];
    }
    st->nw = kept;
    mlprof__sort(st->w, st->nw, sizeof *st->w, win_cmp_track);
    for (size_t i = 0; i < st->nw; i++) {
        int same = i && st->w[i].pid == st->w[i - 1].pid && st->w[i].tid == st->w[i - 1].tid;
        st->w[i].number = same ? st->w[i - 1].number + 1 : 1;
    }
    st->source = chosen;
    st->frames = 1;
    mlprof__map_free(&open);
    mlprof__map_free(&names);
    return rc;
}

/* The index of the window that holds ts among those of w (sorted by pid, tid,
 * start) on track (pid, tid), the latest begun; -1 when none. */
static int64_t window_at(const steps *st, const step_win *w, int64_t pid, int64_t tid, int64_t ts)
{
    size_t lo = 0, hi = st->nw;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const step_win *m = &w[mid];
        int le = m->pid != pid ? m->pid < pid : m->tid != tid ? m->tid < tid : m->ts <= ts;
        if (le)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo; k-- > 0;) {
        if (w[k].pid != pid || w[k].tid != tid || w[k].ts < ts - st->longest)
            break;
        if (ts < w[k].end)
            return (int64_t)w[k].step;
    }
    return -1;
}

/* The step an event at ts on (pid, tid) falls in: a window of its own thread,
 * else of its process, else any (a GPU event that no launch links). */
static int32_t step_at(const steps *st, int64_t pid, int64_t tid, int64_t ts)
{
    int64_t s = window_at(st, st->w, pid, tid, ts);
    if (s < 0)
        s = window_at(st, st->by_pid, pid, 0, ts);
    if (s < 0)
        s = window_at(st, st->by_time, 0, 0, ts);
    return (int32_t)s;
}

/* The step of event e (or of the launch of a GPU event): counter samples
 * and process-scoped instants belong to the process, not to the thread that
 * happened to record them (Perfetto's protobuf keeps no thread for them:
 * the same trace in both formats has the same steps), global instants to
 * any process. */
static int32_t event_step(const steps *st, const an_event *e)
{
    int64_t s = -1;
    if (e->ph == 'C' || (e->ph == 'i' && e->scope == 'p'))
        s = window_at(st, st->by_pid, e->pid, 0, e->ts);
    else if (!(e->ph == 'i' && e->scope == 'g'))
        return step_at(st, e->pid, e->tid, e->ts);
    return (int32_t)(s >= 0 ? s : window_at(st, st->by_time, 0, 0, e->ts));
}

/* Flow events belong to no step: they link a launch to its kernel. */
static int is_flow(char ph)
{
    return ph == 's' || ph == 't' || ph == 'f';
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

/* The last step is incomplete when a window of it was still open when the
 * trace was written (mlprof's "unfinished"), or when it ran less than half
 * the median of the others: PyTorch's profiler used without a schedule ends
 * the ProfilerStep that its last step() began where the profiler stops. */
static int judge_last(steps *st)
{
    st->incomplete = -1;
    if (!st->n)
        return 0;
    step_info *last = &st->s[st->n - 1];
    if (st->n > 1) {
        int64_t *spans = mlprof__malloc((st->n - 1) * sizeof *spans);
        if (!spans)
            return -1;
        for (size_t i = 0; i + 1 < st->n; i++)
            spans[i] = st->s[i].end - st->s[i].ts;
        mlprof__sort(spans, st->n - 1, sizeof *spans, cmp_i64);
        st->median = spans[(st->n - 2) / 2];
        mlprof__free(spans);
    }
    if (last->unfinished || (st->n > 1 && 2 * (last->end - last->ts) < st->median))
        st->incomplete = (int64_t)(st->n - 1);
    return 0;
}

/* Finds the steps of t and the step of every event: a CPU event falls in the
 * step whose window holds its start (HTA's rule), a GPU event in the step of
 * the runtime call that launched it. Returns 0, or -1 (out of memory). */
static int steps_find(an_trace *t, steps *st)
{
    memset(st, 0, sizeof *st);
    st->incomplete = -1;
    size_t cap = 0;
    if (collect_profiler_steps(t, st, &cap) != 0)
        return -1;
    if (!st->nw && collect_frames(t, st, &cap) != 0)
        return -1;
    if (!st->nw)
        return 0;
    mlprof__sort(st->w, st->nw, sizeof *st->w, win_cmp_number);
    st->s = mlprof__calloc(st->nw, sizeof *st->s);
    st->by_pid = mlprof__malloc(st->nw * sizeof *st->by_pid);
    st->by_time = mlprof__malloc(st->nw * sizeof *st->by_time);
    st->of = mlprof__malloc((t->nev ? t->nev : 1) * sizeof *st->of);
    if (!st->s || !st->by_pid || !st->by_time || !st->of)
        return -1;
    for (size_t i = 0; i < st->nw; i++) {
        step_win *w = &st->w[i];
        if (!st->n || st->s[st->n - 1].number != w->number) {
            step_info *s = &st->s[st->n++];
            s->number = w->number;
            s->ts = w->ts;
            s->end = w->end;
        }
        step_info *s = &st->s[st->n - 1];
        s->ts = w->ts < s->ts ? w->ts : s->ts;
        s->end = w->end > s->end ? w->end : s->end;
        s->unfinished |= w->unfinished;
        w->step = st->n - 1;
        st->longest = w->end - w->ts > st->longest ? w->end - w->ts : st->longest;
    }
    for (size_t i = 0; i < st->nw; i++) {
        st->by_pid[i] = st->w[i];
        st->by_pid[i].tid = 0;
        st->by_time[i] = st->by_pid[i];
        st->by_time[i].pid = 0;
    }
    mlprof__sort(st->w, st->nw, sizeof *st->w, win_cmp_track);
    mlprof__sort(st->by_pid, st->nw, sizeof *st->by_pid, win_cmp_track);
    mlprof__sort(st->by_time, st->nw, sizeof *st->by_time, win_cmp_track);
    if (judge_last(st) != 0)
        return -1;
    an_gpu_links links;
    if (an_gpu_link(t, &links) != 0)
        return -1;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        int32_t r = links.launch[i];
        const an_event *at = links.kind[i] != AN_GPU_NONE && r >= 0 ? &t->ev[r] : e;
        st->of[i] = is_flow(e->ph) ? -1 : event_step(st, at);
        if (st->of[i] >= 0)
            st->s[st->of[i]].events++;
    }
    an_gpu_links_free(&links);
    return 0;
}

/* "3-5,8" or "all": syntax only. Returns 0, or -1 with the error in errbuf. */
static int check_step_list(const char *spec, char *errbuf, size_t len)
{
    if (strcmp(spec, "all") == 0)
        return 0;
    const char *p = spec;
    do {
        char *end;
        if (!isdigit((unsigned char)*p))
            break;
        long long a = strtoll(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char)p[1]))
                break;
            b = strtoll(p + 1, &end, 10);
            p = end;
            if (b < a) {
                snprintf(errbuf, len, "--steps: %lld-%lld runs backwards in \"%s\"", a, b, spec);
                return -1;
            }
        }
        if (!*p)
            return 0;
    } while (*p++ == ',');
    snprintf(errbuf, len, "--steps: expected all, N, A-B or a comma list of them (3-5,8), got \"%s\"", spec);
    return -1;
}

/* Marks the steps the list names; counts the numbers it names that the trace
 * lacks into *absent (the first in *first_absent). all: every step but an
 * incomplete last one; a number names even that one. */
static void choose_steps(steps *st, const char *spec, int *last_named, uint64_t *absent, int64_t *first_absent)
{
    *last_named = 0;
    *absent = 0;
    if (strcmp(spec, "all") == 0) {
        for (size_t i = 0; i < st->n; i++)
            st->s[i].chosen = (int64_t)i != st->incomplete;
        return;
    }
    for (const char *p = spec; *p;) {
        char *end;
        long long a = strtoll(p, &end, 10), b = a;
        if (*end == '-')
            b = strtoll(end + 1, &end, 10);
        /* the steps are in number order: those in [a, b], and the first gap */
        uint64_t present = 0;
        long long next = a; /* the lowest number of the range not met yet */
        int gap = 0;
        for (size_t k = 0; k < st->n; k++) {
            if (st->s[k].number < a || st->s[k].number > b)
                continue;
            st->s[k].chosen = 1;
            *last_named |= (int64_t)k == st->incomplete;
            present++;
            gap |= st->s[k].number != next;
            if (!gap)
                next++;
        }
        if ((uint64_t)(b - a) + 1 > present) {
            if (!*absent)
                *first_absent = next;
            *absent += (uint64_t)(b - a) + 1 - present;
        }
        p = *end == ',' ? end + 1 : end;
    }
}

/* "ProfilerStep#7" or "batch 3". */
static void put_step_name(mlprof__sb *out, const steps *st, const step_info *s)
{
    if (st->frames)
        mlprof__sb_printf(out, "%s %lld", st->source, (long long)s->number);
    else
        mlprof__sb_printf(out, "ProfilerStep#%lld", (long long)s->number);
}

/* "ProfilerStep#551-552, 560", "batch 1-3" */
static void put_step_numbers(mlprof__sb *out, const steps *st)
{
    int first = 1;
    size_t chosen = 0;
    for (size_t i = 0; i < st->n; i++)
        chosen += (size_t)st->s[i].chosen;
    if (!chosen) {
        mlprof__sb_puts(out, "none");
        return;
    }
    if (st->frames)
        mlprof__sb_printf(out, "%s ", st->source);
    else
        mlprof__sb_puts(out, "ProfilerStep#");
    for (size_t i = 0; i < st->n; i++) {
        if (!st->s[i].chosen)
            continue;
        size_t j = i;
        while (j + 1 < st->n && st->s[j + 1].chosen && st->s[j + 1].number == st->s[j].number + 1)
            j++;
        mlprof__sb_printf(out, "%s%lld", first ? "" : ", ", (long long)st->s[i].number);
        if (j > i)
            mlprof__sb_printf(out, "-%lld", (long long)st->s[j].number);
        first = 0;
        i = j;
    }
    if (first)
        mlprof__sb_puts(out, "none");
}

/* The lines the steps give on standard error. */
static void step_notes(const an_trace *t, const steps *st, const char *spec, int last_named, uint64_t absent,
                       int64_t first_absent, mlprof__sb *notes)
{
    /* the incomplete last step is worth a word when all were asked for (it is left out) or it was named */
    if (st->incomplete >= 0 && (strcmp(spec, "all") == 0 || last_named)) {
        const step_info *s = &st->s[st->incomplete];
        mlprof__sb_printf(notes, "%s: --steps: ", t->path);
        put_step_name(notes, st, s);
        mlprof__sb_puts(notes, ", the last step, ");
        mlprof__sb_puts(notes, last_named ? "is taken as asked, though incomplete: " : "is left out as incomplete: ");
        if (s->unfinished) {
            mlprof__sb_puts(notes, "it was still open when the trace was written");
        } else {
            mlprof__sb_puts(notes, "it ran ");
            an_put_duration(notes, s->end - s->ts);
            mlprof__sb_puts(notes, " against ");
            an_put_duration(notes, st->median);
            mlprof__sb_puts(notes, " for the others (the median), so the profiler stopped inside it");
        }
        if (!last_named)
            mlprof__sb_printf(notes, "; --steps %lld takes it", (long long)s->number);
        mlprof__sb_putc(notes, '\n');
    }
    if (absent) {
        mlprof__sb_printf(notes, "%s: --steps %s: the trace has no step %lld", t->path, spec, (long long)first_absent);
        if (absent > 1)
            mlprof__sb_printf(notes, " (nor %llu more of those named)", (unsigned long long)(absent - 1));
        mlprof__sb_printf(notes, "; its steps are %lld to %lld (%zu)\n", (long long)st->s[0].number,
                          (long long)st->s[st->n - 1].number, st->n);
    }
}

/* A copy of t that shares its strings and arguments and holds the events of
 * the chosen steps (or of step only, when it is not -1), and every flow event
 * (a launch and its kernel link through them). Returns 0, or -1 (out of
 * memory). */
static int restrict_trace(const an_trace *t, const steps *st, int64_t only, an_trace *c)
{
    size_t n = 0;
    for (size_t i = 0; i < st->n; i++)
        n += (only >= 0 ? (int64_t)i == only : st->s[i].chosen) ? st->s[i].events : 0;
    for (size_t i = 0; i < t->nev; i++)
        n += (size_t)is_flow(t->ev[i].ph);
    *c = *t;
    c->ev = mlprof__malloc((n ? n : 1) * sizeof *c->ev);
    if (!c->ev)
        return -1;
    c->nev = 0;
    c->evcap = n ? n : 1;
    c->t_min = INT64_MAX;
    c->t_max = INT64_MIN;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        int32_t s = st->of[i];
        int flow = is_flow(e->ph);
        if (!flow && (s < 0 || (only >= 0 ? s != only : !st->s[s].chosen)))
            continue;
        c->ev[c->nev++] = *e;
        if (!flow) {
            c->t_min = e->ts < c->t_min ? e->ts : c->t_min;
            c->t_max = e->ts + e->dur > c->t_max ? e->ts + e->dur : c->t_max;
        }
    }
    if (c->t_min > c->t_max)
        c->t_min = c->t_max = 0;
    return 0;
}

/* Runs fn on the copy; what it interns goes back to t's strings. */
static int run_restricted(an_trace *t, const steps *st, int64_t only, const an_options *o, an_analysis_fn fn,
                          mlprof__sb *out)
{
    an_trace c;
    if (restrict_trace(t, st, only, &c) != 0)
        return -1;
    int rc = fn(&c, o, out);
    t->strings = c.strings; /* the map may have grown (and moved) while fn interned */
    mlprof__free(c.ev);
    return rc;
}

/* The steps as JSON: {"source":..,"chosen":[..],"left_out":[..],"incomplete":N|null} */
static void put_steps_json(mlprof__sb *out, const steps *st)
{
    mlprof__sb_puts(out, "{\"source\":");
    mlprof__sb_json_str(out, st->source, strlen(st->source));
    for (int chosen = 1; chosen >= 0; chosen--) {
        mlprof__sb_puts(out, chosen ? ",\"chosen\":[" : ",\"left_out\":[");
        int first = 1;
        for (size_t i = 0; i < st->n; i++) {
            if (st->s[i].chosen == chosen) {
                mlprof__sb_printf(out, "%s%lld", first ? "" : ",", (long long)st->s[i].number);
                first = 0;
            }
        }
        mlprof__sb_putc(out, ']');
    }
    mlprof__sb_puts(out, ",\"incomplete\":");
    if (st->incomplete >= 0)
        mlprof__sb_i64(out, st->s[st->incomplete].number);
    else
        mlprof__sb_puts(out, "null");
    mlprof__sb_putc(out, '}');
}

/* CSV rows with a first column, the step's number (empty when s is NULL; the
 * header once). */
static void put_csv_with_step(mlprof__sb *out, const mlprof__sb *csv, const step_info *s, int header)
{
    const char *p = csv->data ? csv->data : "";
    const char *end = p + csv->len;
    for (int line = 0; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        if (line == 0 && header)
            mlprof__sb_puts(out, "step,");
        if (line > 0 && s)
            mlprof__sb_printf(out, "%lld,", (long long)s->number);
        else if (line > 0)
            mlprof__sb_putc(out, ',');
        if (line > 0 || header)
            mlprof__sb_put(out, p, n);
        p += n;
    }
}

int an_options_check_steps(const an_options *o, char *errbuf, size_t len)
{
    return o->steps ? check_step_list(o->steps, errbuf, len) : 0;
}

int an_run_steps(an_trace *t, const an_options *o, an_analysis_fn fn, mlprof__sb *out, mlprof__sb *notes)
{
    if (!o->steps && !o->per_step)
        return fn(t, o, out);
    steps st;
    if (steps_find(t, &st) != 0) {
        steps_free(&st);
        return -1;
    }
    if (!st.n) {
        /* the whole trace, in the shape the steps' output has */
        mlprof__sb_printf(notes, "%s: --steps: the trace has no ProfilerStep#N range and no mlprof frame, so "
                                 "the whole trace is analysed\n", t->path);
        steps_free(&st);
        mlprof__sb whole;
        mlprof__sb_init(&whole);
        int rc = fn(t, o, &whole);
        if (o->format == AN_JSON) {
            mlprof__sb_puts(out, "{\"steps\":{\"source\":null,\"chosen\":[],\"left_out\":[],\"incomplete\":null},"
                                 "\"analysis\":\n");
            mlprof__sb_put(out, whole.data ? whole.data : "", whole.len);
            mlprof__sb_puts(out, o->per_step ? ",\"per_step\":[]}\n" : "}\n");
        } else if (o->format == AN_CSV && o->per_step) {
            put_csv_with_step(out, &whole, NULL, 1);
        } else {
            if (o->format == AN_TABLE)
                mlprof__sb_puts(out, "steps: none (no ProfilerStep#N range, no mlprof frame): the whole trace\n");
            mlprof__sb_put(out, whole.data ? whole.data : "", whole.len);
        }
        mlprof__sb_free(&whole);
        return rc != 0 || out->failed ? -1 : 0;
    }
    const char *spec = o->steps ? o->steps : "all";
    int last_named;
    uint64_t absent;
    int64_t first_absent = 0;
    choose_steps(&st, spec, &last_named, &absent, &first_absent);
    step_notes(t, &st, spec, last_named, absent, first_absent, notes);
    size_t chosen = 0, events = 0;
    for (size_t i = 0; i < st.n; i++) {
        chosen += (size_t)st.s[i].chosen;
        events += st.s[i].chosen ? st.s[i].events : 0;
    }
    int rc = 0;
    mlprof__sb one;
    mlprof__sb_init(&one);
    if (o->format == AN_JSON)
        mlprof__sb_puts(out, "{\"steps\":");
    if (o->format == AN_JSON)
        put_steps_json(out, &st);
    else if (o->format == AN_TABLE) {
        mlprof__sb_printf(out, "steps: %zu of %zu (", chosen, st.n);
        put_step_numbers(out, &st);
        mlprof__sb_printf(out, "), %zu events; ", events);
        mlprof__sb_puts(out, st.frames ? "an event falls in the frame of its thread (else of its process) that "
                                         "holds its start\n"
                                       : "a CPU event falls in the step that holds its start, a GPU event in "
                                         "the step of its launch\n");
    }
    if (!o->per_step) {
        if (o->format == AN_JSON)
            mlprof__sb_puts(out, ",\"analysis\":\n");
        if (!chosen && o->format == AN_TABLE) /* said on stderr too: which steps there are */
            mlprof__sb_printf(out, "(no step chosen: --steps %s names none of the trace's)\n", spec);
        else
            rc = run_restricted(t, &st, -1, o, fn, out);
        if (o->format == AN_JSON)
            mlprof__sb_puts(out, "}\n");
    } else {
        if (o->format == AN_JSON)
            mlprof__sb_puts(out, ",\"per_step\":[");
        int first = 1;
        for (size_t i = 0; i < st.n && rc == 0; i++) {
            const step_info *s = &st.s[i];
            if (!s->chosen)
                continue;
            mlprof__sb_reset(&one);
            rc = run_restricted(t, &st, (int64_t)i, o, fn, &one);
            if (o->format == AN_JSON) {
                mlprof__sb_printf(out, "%s\n{\"step\":%lld,\"name\":\"", first ? "" : ",", (long long)s->number);
                put_step_name(out, &st, s);
                mlprof__sb_printf(out, "\",\"start_ns\":%lld,\"dur_ns\":%lld,\"events\":%zu,\"analysis\":\n",
                                  (long long)s->ts, (long long)(s->end - s->ts), s->events);
                mlprof__sb_put(out, one.data ? one.data : "", one.len);
                mlprof__sb_putc(out, '}');
            } else if (o->format == AN_CSV) {
                put_csv_with_step(out, &one, s, first);
            } else {
                mlprof__sb_puts(out, "\n== ");
                put_step_name(out, &st, s);
                mlprof__sb_puts(out, ": ");
                an_put_duration(out, s->end - s->ts);
                mlprof__sb_printf(out, ", %zu events ==\n", s->events);
                mlprof__sb_put(out, one.data ? one.data : "", one.len);
            }
            first = 0;
        }
        if (o->format == AN_JSON)
            mlprof__sb_puts(out, "\n]}\n");
        else if (o->format == AN_TABLE && first)
            mlprof__sb_puts(out, "(no step chosen)\n");
    }
    mlprof__sb_free(&one);
    steps_free(&st);
    return rc != 0 || out->failed || notes->failed ? -1 : 0;
}

/* A copy of t holding the chosen steps' events (o->steps), the notes saying
 * what was left out; *copied is 0 when the trace has no steps (then the notes
 * say so and t is to be used whole). Returns 0, or -1 (out of memory). */
static int steps_copy(an_trace *t, const an_options *o, an_trace *c, int *copied, mlprof__sb *notes)
{
    *copied = 0;
    steps st;
    int rc = steps_find(t, &st);
    if (rc == 0 && !st.n) {
        mlprof__sb_printf(notes, "%s: --steps: the trace has no ProfilerStep#N range and no mlprof frame, so the "
                                 "whole trace is compared\n", t->path);
    } else if (rc == 0) {
        int last_named;
        uint64_t absent;
        int64_t first_absent = 0;
        choose_steps(&st, o->steps, &last_named, &absent, &first_absent);
        step_notes(t, &st, o->steps, last_named, absent, first_absent, notes);
        rc = restrict_trace(t, &st, -1, c);
        *copied = rc == 0;
    }
    steps_free(&st);
    return rc;
}

int an_diff(an_trace *ta, an_trace *tb, const an_options *o, const an_diff_options *d, mlprof__sb *out,
            size_t *regressions)
{
    *regressions = 0;
    if (!o->steps)
        return diff_tables(ta, tb, o, d, out, regressions);
    /* both runs restricted to the steps, each as its own trace says them */
    mlprof__sb local;
    mlprof__sb_init(&local);
    mlprof__sb *notes = o->notes ? o->notes : &local;
    an_trace ca, cb;
    int copied_a = 0, copied_b = 0;
    int rc = steps_copy(ta, o, &ca, &copied_a, notes);
    if (rc == 0)
        rc = steps_copy(tb, o, &cb, &copied_b, notes);
    if (rc == 0)
        rc = diff_tables(copied_a ? &ca : ta, copied_b ? &cb : tb, o, d, out, regressions);
    if (copied_a) {
        ta->strings = ca.strings; /* the map may have grown (and moved) while the diff interned */
        mlprof__free(ca.ev);
    }
    if (copied_b) {
        tb->strings = cb.strings;
        mlprof__free(cb.ev);
    }
    mlprof__sb_free(&local);
    return rc;
}
