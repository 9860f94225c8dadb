/*
 * stats.c - aggregate statistics per domain: for durations and frames the
 * count, total, self (time not spent in nested spans), min, max and average;
 * for counters the samples, min, max, average and last value; for markers the
 * count. Printed as a table in the units a person reads, or as JSON in ns.
 * The sink mlprof__stats_sink keeps them (its state is an mlprof__stats) and
 * writes stats_file at each dump; mlprof_dumps reads them too.
 *
 * A program that marks training steps (mlprof_step) also gets the rows of
 * each step, the last stats_steps of them, after the whole trace's: events
 * count in the step their time falls in (steps.c keeps the steps' times).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../hw/hw.h"
#include "../mem/mem.h"
#include "../record/produce.h"
#include "../record/record.h"
#include "export.h"

typedef struct row {
    char *domain;
    char *name;
    int kind;
    uint64_t count;
    uint64_t total, self, min, max; /* durations, ns */
    double vmin, vmax, vsum, vlast; /* counters */
    uint64_t last_ns;               /* time of vlast: threads drain in any order */
    int64_t hw[MLPROF__HW_KNOWN];   /* durations: sums of the spans' hardware counters */
    unsigned hw_mask;
} row;

/* Rows by the address of the handle that produced them: most events come from
 * handles, and this spares formatting and hashing their names each time. */
typedef struct by_id {
    const void *id;
    row *r;
} by_id;

/* Rows of one scope: the whole trace, or one step. */
typedef struct table {
    by_id *ids;
    size_t ids_cap, ids_count;
    mlprof__map index; /* "kind\x1f domain \x1f name" -> row */
    row **rows;
    size_t nrows, cap;
} table;

/* The rows of one training step (steps.c's ranges): events go to the step
 * their time falls in. */
typedef struct group {
    uint64_t run, step;
    uint64_t begin_ns, end_ns; /* as steps.c says; 0: the run's start, under way */
    table t;
} group;

/* The statistics: a table per step, the last stats_steps of them, and one
 * for the rest (older steps folded into it, and events no step holds). A
 * program without mlprof_step has one step, 0, and pays nothing more. The
 * whole trace's rows are their sum, made when they are written. */
struct mlprof__stats {
    table rest;
    group **groups; /* by (run, step) */
    size_t ngroups, gcap;
    uint64_t folded; /* steps folded into rest */
    uint64_t first_run, first_step; /* the first step an event fell in (+1; 0: none yet) */
    /* the last step found: valid while steps.c's generation stays */
    uint64_t gen, lo, hi;
    group *last;
};

static void table_init(table *t) { memset(t, 0, sizeof *t), mlprof__map_init(&t->index); }

static void table_free(table *t)
{
    for (size_t i = 0; i < t->nrows; i++) {
        mlprof__free(t->rows[i]->domain);
        mlprof__free(t->rows[i]->name);
        mlprof__free(t->rows[i]);
    }
    mlprof__free(t->rows);
    mlprof__free(t->ids);
    mlprof__map_free(&t->index);
    table_init(t);
}

mlprof__stats *mlprof__stats_new(void)
{
    mlprof__stats *st = mlprof__calloc(1, sizeof *st);
    if (st)
        table_init(&st->rest);
    return st;
}

void mlprof__stats_reset(mlprof__stats *st)
{
    table_free(&st->rest);
    for (size_t i = 0; i < st->ngroups; i++) {
        table_free(&st->groups[i]->t);
        mlprof__free(st->groups[i]);
    }
    mlprof__free(st->groups);
    st->groups = NULL;
    st->ngroups = st->gcap = 0;
    st->folded = 0;
    st->first_run = st->first_step = 0;
    st->last = NULL;
}

void mlprof__stats_free(mlprof__stats *st)
{
    if (!st)
        return;
    mlprof__stats_reset(st);
    mlprof__free(st);
}

/* The index key of a row: "kind \x1f domain \x1f name", whole, whatever
 * the name's length (rows whose names share a long prefix stay apart). It
 * fits in buf (size n) most times; else it is allocated (*heap set). */
static char *row_key(char *buf, size_t n, int kind, const char *domain, const char *name,
                     size_t name_len, size_t *klen, int *heap)
{
    size_t dlen = strlen(domain);
    *klen = 1 + 1 + dlen + 1 + name_len;
    *heap = *klen > n;
    char *key = *heap ? mlprof__malloc(*klen) : buf;
    if (!key)
        return NULL;
    key[0] = (char)('0' + kind);
    key[1] = '\x1f';
    memcpy(key + 2, domain, dlen);
    key[2 + dlen] = '\x1f';
    memcpy(key + 3 + dlen, name, name_len);
    return key;
}

static row *get_row(table *st, int kind, const char *domain, const char *name,
                    size_t name_len)
{
    char buf[256];
    size_t klen;
    int heap;
    char *key = row_key(buf, sizeof buf, kind, domain, name, name_len, &klen, &heap);
    if (!key)
        return NULL;
    mlprof__map_entry *e = mlprof__map_slot(&st->index, key, klen);
    if (heap)
        mlprof__free(key);
    if (!e)
        return NULL;
    if (e->value)
        return e->value;
    if (st->nrows == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 32;
        row **rows = mlprof__realloc(st->rows, cap * sizeof *rows);
        if (!rows)
            return NULL;
        st->rows = rows;
        st->cap = cap;
    }
    row *r = mlprof__calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->domain = mlprof__strdup(domain);
    r->name = mlprof__strndup(name, name_len);
    r->kind = kind;
    r->min = UINT64_MAX;
    r->vmin = INFINITY;
    r->vmax = -INFINITY;
    st->rows[st->nrows++] = r;
    e->value = r;
    return r;
}

static by_id *id_slot(by_id *ids, size_t cap, const void *id)
{
    size_t i = (size_t)(mlprof__hash(&id, sizeof id) & (cap - 1));
    while (ids[i].id && ids[i].id != id)
        i = (i + 1) & (cap - 1);
    return &ids[i];
}

/* The row of handle `id`, found by address, or by name the first time. */
static row *get_row_id(table *st, const void *id, int kind, const char *domain,
                       const char *name, size_t name_len)
{
    if (!id)
        return get_row(st, kind, domain, name, name_len);
    if (st->ids_cap) {
        by_id *e = id_slot(st->ids, st->ids_cap, id);
        if (e->id)
            return e->r;
    }
    row *r = get_row(st, kind, domain, name, name_len);
    if (!r)
        return NULL;
    if ((st->ids_count + 1) * 2 > st->ids_cap) {
        size_t cap = st->ids_cap ? st->ids_cap * 2 : 64;
        by_id *ids = mlprof__calloc(cap, sizeof *ids);
        if (!ids)
            return r;
        for (size_t i = 0; i < st->ids_cap; i++) {
            if (st->ids[i].id)
                *id_slot(ids, cap, st->ids[i].id) = st->ids[i];
        }
        mlprof__free(st->ids);
        st->ids = ids;
        st->ids_cap = cap;
    }
    by_id *e = id_slot(st->ids, st->ids_cap, id);
    e->id = id;
    e->r = r;
    st->ids_count++;
    return r;
}

/* ---------------------------------------------------------- the steps */

/* Adds src's sums into dst (a row of the same kind and name). */
static void row_add(row *dst, const row *src)
{
    dst->count += src->count;
    dst->total += src->total;
    dst->self += src->self;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
    dst->vsum += src->vsum;
    if (src->vmin < dst->vmin)
        dst->vmin = src->vmin;
    if (src->vmax > dst->vmax)
        dst->vmax = src->vmax;
    if (src->count && src->last_ns >= dst->last_ns) {
        dst->vlast = src->vlast;
        dst->last_ns = src->last_ns;
    }
    for (int i = 0; i < MLPROF__HW_KNOWN; i++)
        dst->hw[i] += src->hw[i];
    dst->hw_mask |= src->hw_mask;
}

/* Adds every row of src into dst; -1 when memory ran out. */
static int table_add(table *dst, const table *src)
{
    for (size_t i = 0; i < src->nrows; i++) {
        const row *r = src->rows[i];
        row *d = get_row(dst, r->kind, r->domain, r->name, strlen(r->name));
        if (!d)
            return -1;
        row_add(d, r);
    }
    return 0;
}

static int before(const group *g, uint64_t run, uint64_t step)
{
    return g->run < run || (g->run == run && g->step < step);
}

/* The group of (run, step), made if need be; NULL when it is older than
 * the groups kept (its events go to the rest) or memory ran out. */
static group *find_group(mlprof__stats *st, uint64_t run, uint64_t step, uint64_t keep)
{
    size_t i = st->ngroups;
    while (i > 0 && !before(st->groups[i - 1], run, step)) /* from the end: most events are recent */
        i--;
    /* groups[i..] are at or after (run, step), those before it before */
    if (i < st->ngroups && st->groups[i]->run == run && st->groups[i]->step == step)
        return st->groups[i];
    if (st->ngroups >= keep && i == 0)
        return NULL;
    if (st->ngroups == st->gcap) {
        size_t cap = st->gcap ? st->gcap * 2 : 8;
        group **gs = mlprof__realloc(st->groups, cap * sizeof *gs);
        if (!gs)
            return NULL;
        st->groups = gs;
        st->gcap = cap;
    }
    group *g = mlprof__calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->run = run;
    g->step = step;
    table_init(&g->t);
    memmove(st->groups + i + 1, st->groups + i, (st->ngroups - i) * sizeof *st->groups);
    st->groups[i] = g;
    st->ngroups++;
    while (st->ngroups > keep) { /* the oldest step goes into the rest */
        group *old = st->groups[0];
        if (table_add(&st->rest, &old->t) != 0)
            break; /* kept whole rather than lost */
        if (old == st->last)
            st->last = NULL;
        table_free(&old->t);
        mlprof__free(old);
        memmove(st->groups, st->groups + 1, (st->ngroups - 1) * sizeof *st->groups);
        st->ngroups--;
        st->folded++;
    }
    return g;
}

/* The table an event at ts_ns counts in: its step's, or the rest. Looked up
 * again only when its time leaves the last step found or a step ends. */
static table *pick(mlprof__stats *st, uint64_t ts_ns)
{
    uint64_t keep = mlprof__g.cfg.stats_steps;
    if (!keep)
        return &st->rest;
    uint64_t gen = mlprof__steps_gen();
    if (st->last && gen == st->gen && ts_ns >= st->lo && ts_ns < st->hi)
        return &st->last->t;
    mlprof__step_range r;
    if (!mlprof__steps_find(ts_ns, &r))
        return &st->rest;
    if (!st->first_step || r.run < st->first_run || (r.run == st->first_run && r.step + 1 < st->first_step)) {
        st->first_run = r.run;
        st->first_step = r.step + 1;
    }
    group *g = find_group(st, r.run, r.step, keep);
    if (!g)
        return &st->rest;
    g->begin_ns = r.begin_ns;
    g->end_ns = r.end_ns;
    st->gen = gen;
    st->lo = r.begin_ns;
    st->hi = r.until_ns;
    st->last = g;
    return &g->t;
}

/* ------------------------------------------------------------ the rows */

void mlprof__stats_duration(mlprof__stats *st, uint64_t ts_ns, const void *id, const char *domain,
                            const char *name, size_t name_len, int frame, uint64_t dur_ns, uint64_t self_ns,
                            const int64_t *hw, unsigned hw_mask)
{
    row *r = get_row_id(pick(st, ts_ns), id, frame ? MLPROF__STAT_FRAME : MLPROF__STAT_DURATION, domain, name,
                        name_len);
    if (!r)
        return;
    r->count++;
    r->total += dur_ns;
    r->self += self_ns;
    for (int i = 0; hw_mask >> i; i++) {
        if (hw_mask >> i & 1)
            r->hw[i] += hw[i];
    }
    r->hw_mask |= hw_mask;
    if (dur_ns < r->min)
        r->min = dur_ns;
    if (dur_ns > r->max)
        r->max = dur_ns;
}

void mlprof__stats_counter(mlprof__stats *st, const void *id, const char *domain, const char *name,
                           double value, uint64_t ts_ns)
{
    row *r = get_row_id(pick(st, ts_ns), id, MLPROF__STAT_COUNTER, domain, name, strlen(name));
    if (!r)
        return;
    r->count++;
    r->vsum += value;
    if (ts_ns >= r->last_ns) {
        r->vlast = value;
        r->last_ns = ts_ns;
    }
    if (value < r->vmin)
        r->vmin = value;
    if (value > r->vmax)
        r->vmax = value;
}

void mlprof__stats_marker(mlprof__stats *st, uint64_t ts_ns, const void *id, const char *domain,
                          const char *name, size_t name_len)
{
    row *r = get_row_id(pick(st, ts_ns), id, MLPROF__STAT_MARKER, domain, name, name_len);
    if (r)
        r->count++;
}

/* ------------------------------------------------------------- sorting */

/* A row with its sort key; descending order sorts on the negated key, so the
 * comparison needs no context (qsort has no context argument in C11). */
typedef struct keyed {
    row *r;
    double key;
} keyed;

static double sort_value(const row *r, int sort_by)
{
    if (r->kind == MLPROF__STAT_COUNTER) {
        switch (sort_by) {
        case MLPROF_SORT_COUNT: return (double)r->count;
        case MLPROF_SORT_MIN: return r->vmin;
        case MLPROF_SORT_MAX: return r->vmax;
        case MLPROF_SORT_AVG: return r->count ? r->vsum / (double)r->count : 0;
        default: return r->vsum;
        }
    }
    switch (sort_by) {
    case MLPROF_SORT_AVG: return r->count ? (double)r->total / (double)r->count : 0;
    case MLPROF_SORT_MIN: return r->count ? (double)r->min : 0;
    case MLPROF_SORT_MAX: return (double)r->max;
    case MLPROF_SORT_COUNT: return (double)r->count;
    case MLPROF_SORT_SELF: return (double)r->self;
    default: return (double)r->total;
    }
}

static int compare_rows(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c = strcmp(a->r->domain, b->r->domain);
    if (c)
        return c;
    if (a->r->kind != b->r->kind)
        return a->r->kind - b->r->kind;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return strcmp(a->r->name, b->r->name);
}

static row **sorted_rows(const table *st, int sort_by, int ascending)
{
    size_t n = st->nrows ? st->nrows : 1;
    keyed *tmp = mlprof__malloc(n * sizeof *tmp);
    row **rows = mlprof__malloc(n * sizeof *rows);
    if (!tmp || !rows) {
        mlprof__free(tmp);
        mlprof__free(rows);
        return NULL;
    }
    for (size_t i = 0; i < st->nrows; i++) {
        double v = sort_value(st->rows[i], sort_by);
        tmp[i].r = st->rows[i];
        tmp[i].key = ascending ? v : -v;
    }
    qsort(tmp, st->nrows, sizeof *tmp, compare_rows);
    for (size_t i = 0; i < st->nrows; i++)
        rows[i] = tmp[i].r;
    mlprof__free(tmp);
    return rows;
}

/* --------------------------------------------------------------- table */

static void pad_to(mlprof__sb *out, size_t start, size_t width, int right)
{
    size_t len = out->len - start;
    if (len >= width || out->failed)
        return;
    size_t pad = width - len;
    if (right) {
        /* shift the cell right */
        char tmp[256];
        if (len >= sizeof tmp)
            return;
        memcpy(tmp, out->data + start, len);
        out->len = start;
        for (size_t i = 0; i < pad; i++)
            mlprof__sb_putc(out, ' ');
        mlprof__sb_put(out, tmp, len);
    } else {
        for (size_t i = 0; i < pad; i++)
            mlprof__sb_putc(out, ' ');
    }
}

static void cell_text(mlprof__sb *out, const char *s, size_t width)
{
    size_t start = out->len;
    mlprof__sb_puts(out, s);
    pad_to(out, start, width, 0);
}

/* The widest name column; longer names are shown shortened in the middle. */
#define NAME_COLUMN 60

/* A row's name in a column of width: whole when it fits, else its start,
 * "..." and its end (where names that share a long prefix differ), cut at
 * UTF-8 character boundaries. The row keeps the whole name. */
static void cell_name(mlprof__sb *out, const char *name, size_t width)
{
    size_t n = strlen(name), room = width > 5 ? width - 2 : 3;
    if (n <= room) {
        cell_text(out, name, width);
        return;
    }
    size_t start = out->len;
    size_t head = (room - 3) / 2, tail = n - (room - 3 - head);
    while (head > 0 && ((unsigned char)name[head] & 0xc0) == 0x80)
        head--;
    while (tail < n && ((unsigned char)name[tail] & 0xc0) == 0x80)
        tail++;
    mlprof__sb_put(out, name, head);
    mlprof__sb_puts(out, "...");
    mlprof__sb_puts(out, name + tail);
    pad_to(out, start, width, 0);
}

static void cell_duration(mlprof__sb *out, uint64_t ns)
{
    size_t start = out->len;
    mlprof__sb_duration(out, ns);
    pad_to(out, start, 13, 1);
}

static void cell_count(mlprof__sb *out, uint64_t n)
{
    size_t start = out->len;
    mlprof__sb_u64(out, n);
    pad_to(out, start, 9, 1);
}

static void cell_value(mlprof__sb *out, double v)
{
    size_t start = out->len;
    if (v == floor(v) && fabs(v) < 1e15)
        mlprof__sb_printf(out, "%.0f", v);
    else
        mlprof__sb_printf(out, "%.4g", v);
    pad_to(out, start, 13, 1);
}

static size_t name_width(row **rows, size_t n, const char *domain)
{
    size_t w = 24;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i]->domain, domain) == 0 && strlen(rows[i]->name) + 2 > w)
            w = strlen(rows[i]->name) + 2;
    }
    return w > NAME_COLUMN ? NAME_COLUMN : w;
}

static void table_header(mlprof__sb *out, int kind, size_t w)
{
    static const char *const titles[] = {"Durations", "Frames", "Counters", "Markers"};
    mlprof__sb_printf(out, "  %s\n  ", titles[kind]);
    cell_text(out, "Name", w);
    if (kind == MLPROF__STAT_COUNTER)
        mlprof__sb_puts(out, "  Samples          Min          Max          Avg         Last\n");
    else if (kind == MLPROF__STAT_MARKER)
        mlprof__sb_puts(out, "    Count\n");
    else
        mlprof__sb_puts(out, "    Count        Total         Self          Min          Max          Avg\n");
}

static void table_row(mlprof__sb *out, const row *r, size_t w)
{
    mlprof__sb_puts(out, "  ");
    cell_name(out, r->name, w);
    cell_count(out, r->count);
    if (r->kind == MLPROF__STAT_COUNTER) {
        cell_value(out, r->vmin);
        cell_value(out, r->vmax);
        cell_value(out, r->count ? r->vsum / (double)r->count : 0);
        cell_value(out, r->vlast);
    } else if (r->kind != MLPROF__STAT_MARKER) {
        cell_duration(out, r->total);
        cell_duration(out, r->self);
        cell_duration(out, r->min);
        cell_duration(out, r->max);
        cell_duration(out, r->count ? (r->total + r->count / 2) / r->count : 0);
    }
    mlprof__sb_putc(out, '\n');
}

/* ------------------------------------------------------ counters per span */

enum { HW_CYCLES = 0, HW_INSTRUCTIONS = 1, HW_CACHE_REFS = 2, HW_CACHE_MISSES = 3, HW_BRANCHES = 4,
       HW_BRANCH_MISSES = 5, HW_TASK_CLOCK = 7 };

static int has_hw(const row *r, int i) { return r->hw_mask >> i & 1; }

/* Instructions per cycle and miss rates, where the row has both counters. */
static double hw_ratio(const row *r, int num, int den)
{
    return has_hw(r, num) && has_hw(r, den) && r->hw[den] > 0 ? (double)r->hw[num] / (double)r->hw[den] : NAN;
}

static void cell_si(mlprof__sb *out, double v, size_t width)
{
    size_t start = out->len;
    static const char *const pre[] = {"", "K", "M", "G", "T", "P"};
    int p = 0;
    while (fabs(v) >= 1000 && p < 5) {
        v /= 1000;
        p++;
    }
    mlprof__sb_printf(out, p ? "%.3g%s" : "%.0f%s", v, pre[p]);
    pad_to(out, start, width, 1);
}

/* A ratio right-aligned in width columns (as a percentage), or "-". */
static void cell_ratio(mlprof__sb *out, double v, size_t width, int percent)
{
    size_t start = out->len;
    if (isnan(v))
        mlprof__sb_putc(out, '-');
    else if (percent)
        mlprof__sb_printf(out, "%.2f%%", 100 * v);
    else
        mlprof__sb_printf(out, "%.2f", v);
    pad_to(out, start, width, 1);
}

/* After a domain's tables: the counters its spans were measured with (sums),
 * and what they give: instructions per cycle, cache and branch miss rates. */
static void hw_table(mlprof__sb *out, row **rows, size_t n, const char *domain, size_t w)
{
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i]->domain, domain) == 0 && rows[i]->kind <= MLPROF__STAT_FRAME)
            mask |= rows[i]->hw_mask;
    }
    if (!mask)
        return;
    int ipc = (mask >> HW_CYCLES & 1) && (mask >> HW_INSTRUCTIONS & 1);
    int cmiss = (mask >> HW_CACHE_REFS & 1) && (mask >> HW_CACHE_MISSES & 1);
    int bmiss = (mask >> HW_BRANCHES & 1) && (mask >> HW_BRANCH_MISSES & 1);
    mlprof__sb_puts(out, "  Counters (sums over the spans)\n  ");
    cell_text(out, "Name", w);
    for (int i = 0; i < MLPROF__HW_KNOWN; i++) {
        if (mask >> i & 1) {
            size_t start = out->len;
            mlprof__sb_puts(out, mlprof__hw_name(i));
            pad_to(out, start, strlen(mlprof__hw_name(i)) > 11 ? strlen(mlprof__hw_name(i)) + 2 : 13, 1);
        }
    }
    mlprof__sb_printf(out, "%s%s%s\n", ipc ? "      IPC" : "", cmiss ? "  cache miss" : "", bmiss ? "  branch miss" : "");
    for (size_t k = 0; k < n; k++) {
        const row *r = rows[k];
        if (strcmp(r->domain, domain) != 0 || r->kind > MLPROF__STAT_FRAME || !r->hw_mask)
            continue;
        mlprof__sb_puts(out, "  ");
        cell_name(out, r->name, w);
        for (int i = 0; i < MLPROF__HW_KNOWN; i++) {
            if (!(mask >> i & 1))
                continue;
            size_t width = strlen(mlprof__hw_name(i)) > 11 ? strlen(mlprof__hw_name(i)) + 2 : 13;
            if (!has_hw(r, i)) {
                size_t start = out->len;
                mlprof__sb_putc(out, '-');
                pad_to(out, start, width, 1);
            } else if (i == HW_TASK_CLOCK) {
                size_t start = out->len;
                mlprof__sb_duration(out, r->hw[i] > 0 ? (uint64_t)r->hw[i] : 0);
                pad_to(out, start, width, 1);
            } else {
                cell_si(out, (double)r->hw[i], width);
            }
        }
        if (ipc)
            cell_ratio(out, hw_ratio(r, HW_INSTRUCTIONS, HW_CYCLES), 9, 0);
        if (cmiss)
            cell_ratio(out, hw_ratio(r, HW_CACHE_MISSES, HW_CACHE_REFS), 12, 1);
        if (bmiss)
            cell_ratio(out, hw_ratio(r, HW_BRANCH_MISSES, HW_BRANCHES), 13, 1);
        mlprof__sb_putc(out, '\n');
    }
}

/* The domains' tables of these rows. */
static void table_body(row **rows, size_t n, mlprof__sb *out)
{
    const char *domain = NULL;
    int kind = -1;
    size_t w = 24;
    for (size_t i = 0; i < n; i++) {
        const row *r = rows[i];
        if (!domain || strcmp(domain, r->domain) != 0) {
            if (domain)
                hw_table(out, rows, n, domain, w);
            domain = r->domain;
            kind = -1;
            w = name_width(rows, n, domain);
            mlprof__sb_printf(out, "\nDomain: %s\n", domain);
        }
        if (r->kind != kind) {
            kind = r->kind;
            table_header(out, kind, w);
        }
        table_row(out, r, w);
    }
    if (domain)
        hw_table(out, rows, n, domain, w);
}

/* ---------------------------------------------------- rows of each step */

/* The steps whose events are in the totals only: those before the oldest
 * step kept (of its run; steps of earlier runs, as folded). */
static uint64_t steps_folded(const mlprof__stats *st)
{
    if (!st->ngroups || !st->first_step)
        return st->folded;
    const group *g = st->groups[0];
    return g->run == st->first_run ? g->step + 1 - st->first_step : st->folded;
}

/* The per-step rows are shown when the program marked steps: more than one
 * step, or one that mlprof_step ended or that is not the first. */
static int has_steps(const mlprof__stats *st)
{
    return st->ngroups > 1 || steps_folded(st) ||
           (st->ngroups == 1 && (st->groups[0]->step != 0 || st->groups[0]->end_ns != 0));
}

/* A step's bounds as the trace shows them: step 0 began with the run. */
static uint64_t group_begin(const group *g)
{
    uint64_t run = __atomic_load_n(&mlprof__g.run_ns, __ATOMIC_RELAXED);
    return g->begin_ns ? g->begin_ns : run;
}

static int many_runs(const mlprof__stats *st)
{
    return st->ngroups > 1 && st->groups[0]->run != st->groups[st->ngroups - 1]->run;
}

static void steps_table(const mlprof__stats *st, mlprof__sb *out, int sort_by, int ascending)
{
    mlprof__sb_printf(out, "\nPer step (the last %zu step%s", st->ngroups, st->ngroups == 1 ? "" : "s");
    uint64_t folded = steps_folded(st);
    if (folded)
        mlprof__sb_printf(out, "; %llu older step%s counted in the totals only, stats_steps keeps more",
                          (unsigned long long)folded, folded == 1 ? " is" : "s are");
    mlprof__sb_puts(out, ")\n");
    int runs = many_runs(st);
    for (size_t i = 0; i < st->ngroups; i++) {
        const group *g = st->groups[i];
        mlprof__sb_printf(out, "\n== Step %llu", (unsigned long long)g->step);
        if (runs)
            mlprof__sb_printf(out, " of run %llu", (unsigned long long)g->run);
        uint64_t begin = group_begin(g);
        if (!g->end_ns) {
            mlprof__sb_puts(out, ": under way when written");
        } else if (begin && g->end_ns >= begin) {
            mlprof__sb_puts(out, ": ");
            mlprof__sb_duration(out, g->end_ns - begin);
        }
        mlprof__sb_puts(out, " ==\n");
        row **rows = sorted_rows(&g->t, sort_by, ascending);
        if (!rows) {
            out->failed = 1;
            return;
        }
        table_body(rows, g->t.nrows, out);
        mlprof__free(rows);
    }
}

static void format_table(const mlprof__stats *st, row **rows, size_t n, mlprof__sb *out, int sort_by,
                         int ascending, const mlprof__stats_info *info)
{
    static const char *const sorts[] = {"total", "avg", "min", "max", "count", "self"};
    mlprof__sb_printf(out, "mlprof %s statistics (sorted by %s, %s)\n", MLPROF_VERSION_STRING,
                      sorts[sort_by], ascending ? "ascending" : "descending");
    if (n == 0)
        mlprof__sb_puts(out, "\n  (no events recorded)\n");
    table_body(rows, n, out);
    if (has_steps(st))
        steps_table(st, out, sort_by, ascending);
    if (info && info->dropped_events)
        mlprof__sb_printf(out, "\nWARNING: %llu events were dropped (buffers full); totals are low.\n",
                          (unsigned long long)info->dropped_events);
    if (info && info->unfinished_spans)
        mlprof__sb_printf(out, "note: %llu spans were still open and were closed by the profiler.\n",
                          (unsigned long long)info->unfinished_spans);
    if (info && info->extra)
        mlprof__sb_puts(out, info->extra);
}

/* ---------------------------------------------------------------- JSON */

static void json_row(mlprof__sb *out, const row *r)
{
    mlprof__sb_puts(out, "{\"name\":");
    mlprof__sb_json_str(out, r->name, strlen(r->name));
    mlprof__sb_puts(out, ",\"count\":");
    mlprof__sb_u64(out, r->count);
    if (r->kind == MLPROF__STAT_COUNTER) {
        mlprof__sb_puts(out, ",\"min\":");
        mlprof__sb_double(out, r->vmin);
        mlprof__sb_puts(out, ",\"max\":");
        mlprof__sb_double(out, r->vmax);
        mlprof__sb_puts(out, ",\"avg\":");
        mlprof__sb_double(out, r->count ? r->vsum / (double)r->count : 0);
        mlprof__sb_puts(out, ",\"last\":");
        mlprof__sb_double(out, r->vlast);
    } else if (r->kind != MLPROF__STAT_MARKER) {
        mlprof__sb_printf(out, ",\"total_ns\":%llu,\"self_ns\":%llu,\"min_ns\":%llu,\"max_ns\":%llu,\"avg_ns\":",
                          (unsigned long long)r->total, (unsigned long long)r->self,
                          (unsigned long long)(r->count ? r->min : 0), (unsigned long long)r->max);
        mlprof__sb_double(out, r->count ? (double)r->total / (double)r->count : 0);
        if (r->hw_mask) {
            mlprof__sb_puts(out, ",\"counters\":{");
            int first = 1;
            for (int i = 0; i < MLPROF__HW_KNOWN; i++) {
                if (!has_hw(r, i))
                    continue;
                mlprof__sb_printf(out, "%s\"%s\":", first ? "" : ",", mlprof__hw_name(i));
                mlprof__sb_i64(out, r->hw[i]);
                first = 0;
            }
            mlprof__sb_putc(out, '}');
            static const struct {
                const char *key;
                int num, den;
            } derived[] = {{"ipc", HW_INSTRUCTIONS, HW_CYCLES},
                           {"cache_miss_rate", HW_CACHE_MISSES, HW_CACHE_REFS},
                           {"branch_miss_rate", HW_BRANCH_MISSES, HW_BRANCHES}};
            for (size_t d = 0; d < 3; d++) {
                double v = hw_ratio(r, derived[d].num, derived[d].den);
                if (!isnan(v)) {
                    mlprof__sb_printf(out, ",\"%s\":", derived[d].key);
                    mlprof__sb_double(out, v);
                }
            }
        }
    }
    mlprof__sb_putc(out, '}');
}

/* "domains":[...] of these rows. */
static void json_domains(row **rows, size_t n, mlprof__sb *out)
{
    static const char *const groups[] = {"durations", "frames", "counters", "markers"};
    mlprof__sb_puts(out, "\"domains\":[");
    size_t i = 0;
    while (i < n) {
        const char *domain = rows[i]->domain;
        if (i)
            mlprof__sb_putc(out, ',');
        mlprof__sb_puts(out, "{\"name\":");
        mlprof__sb_json_str(out, domain, strlen(domain));
        for (int kind = 0; kind < 4; kind++) {
            mlprof__sb_printf(out, ",\"%s\":[", groups[kind]);
            int first = 1;
            for (size_t j = i; j < n && strcmp(rows[j]->domain, domain) == 0; j++) {
                if (rows[j]->kind != kind)
                    continue;
                if (!first)
                    mlprof__sb_putc(out, ',');
                first = 0;
                json_row(out, rows[j]);
            }
            mlprof__sb_putc(out, ']');
        }
        mlprof__sb_putc(out, '}');
        while (i < n && strcmp(rows[i]->domain, domain) == 0)
            i++;
    }
    mlprof__sb_putc(out, ']');
}

/* "steps":[{"step":N,"run":R,"begin_ns":..,"end_ns":..|null,"domains":[..]},..],"steps_folded":N */
static void json_steps(const mlprof__stats *st, mlprof__sb *out, int sort_by, int ascending)
{
    mlprof__sb_puts(out, ",\"steps\":[");
    for (size_t i = 0; i < st->ngroups; i++) {
        const group *g = st->groups[i];
        mlprof__sb_printf(out, "%s{\"step\":%llu,\"run\":%llu,\"begin_ns\":%llu,\"end_ns\":", i ? "," : "",
                          (unsigned long long)g->step, (unsigned long long)g->run,
                          (unsigned long long)group_begin(g));
        if (g->end_ns)
            mlprof__sb_u64(out, g->end_ns);
        else
            mlprof__sb_puts(out, "null");
        mlprof__sb_putc(out, ',');
        row **rows = sorted_rows(&g->t, sort_by, ascending);
        if (!rows) {
            out->failed = 1;
            return;
        }
        json_domains(rows, g->t.nrows, out);
        mlprof__free(rows);
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_printf(out, "],\"steps_folded\":%llu", (unsigned long long)steps_folded(st));
}

static void format_json(const mlprof__stats *st, row **rows, size_t n, mlprof__sb *out, int sort_by,
                        int ascending, const mlprof__stats_info *info)
{
    static const char *const sorts[] = {"total", "avg", "min", "max", "count", "self"};
    mlprof__sb_printf(out, "{\"mlprof_version\":\"%s\",\"time_unit\":\"ns\",\"sort_by\":\"%s\",\"ascending\":%s",
                      MLPROF_VERSION_STRING, sorts[sort_by], ascending ? "true" : "false");
    mlprof__sb_printf(out, ",\"dropped_events\":%llu,\"unfinished_spans\":%llu,",
                      (unsigned long long)(info ? info->dropped_events : 0),
                      (unsigned long long)(info ? info->unfinished_spans : 0));
    json_domains(rows, n, out);
    if (has_steps(st))
        json_steps(st, out, sort_by, ascending);
    if (info && info->extra) {
        mlprof__sb_putc(out, ',');
        mlprof__sb_puts(out, info->extra);
    }
    mlprof__sb_puts(out, "}\n");
}

/* The whole trace's rows: the rest and every step's, summed (no copy when
 * one table holds them all). NULL when memory ran out. */
static const table *whole(const mlprof__stats *st, table *tmp)
{
    if (st->ngroups == 0)
        return &st->rest;
    if (st->ngroups == 1 && st->rest.nrows == 0)
        return &st->groups[0]->t;
    table_init(tmp);
    if (table_add(tmp, &st->rest) != 0)
        return NULL;
    for (size_t i = 0; i < st->ngroups; i++) {
        if (table_add(tmp, &st->groups[i]->t) != 0)
            return NULL;
    }
    return tmp;
}

void mlprof__stats_format(const mlprof__stats *st, mlprof__sb *out, int format, int sort_by,
                          int ascending, const mlprof__stats_info *info)
{
    table tmp;
    table_init(&tmp);
    const table *all = whole(st, &tmp);
    row **rows = all ? sorted_rows(all, sort_by, ascending) : NULL;
    if (!rows) {
        out->failed = 1;
        table_free(&tmp);
        return;
    }
    if (format == MLPROF_FORMAT_JSON)
        format_json(st, rows, all->nrows, out, sort_by, ascending, info);
    else
        format_table(st, rows, all->nrows, out, sort_by, ascending, info);
    mlprof__free(rows);
    table_free(&tmp);
}

/* ----------------------------------------------------------- the report */

void mlprof__stats_report(const mlprof__stats *st, mlprof__sb *out, int json, int sort_by, int ascending,
                          uint64_t dropped, uint64_t unfinished, const char *trace_path, int final)
{
    mlprof__sb mem;
    mlprof__sb_init(&mem);
    if (mlprof__mem_any()) {
        if (json)
            mlprof__sb_puts(&mem, "\"memory\":");
        mlprof__mem_report(&mem, json, final);
    }
    mlprof__stats_info info = {dropped, unfinished, trace_path, mem.len ? mem.data : NULL};
    mlprof__stats_format(st, out, json, sort_by, ascending, &info);
    if (mem.failed)
        out->failed = 1;
    mlprof__sb_free(&mem);
}

/* --------------------------------------------------------- the sink */

/* Rows are counted while aggregate_stats is on; spans still open, shown in a
 * dump's tail, are not rows (they are counted when they end). */
static int counting(const mlprof__sink_out *out) { return !out->tail && mlprof__g.cfg.aggregate_stats; }

static void *stats_create(void) { return mlprof__stats_new(); }
static void stats_destroy(void *st) { mlprof__stats_free(st); }

static void stats_span(void *st, const mlprof__sink_out *out, const mlprof__span_out *s)
{
    if (counting(out))
        mlprof__stats_duration(st, s->begin_ns, s->id, s->domain, s->name, s->name_len, s->kind == MLPROF__OUT_FRAME,
                               s->end_ns - s->begin_ns, s->self_ns, s->hw_mask ? s->hw : NULL, s->hw_mask);
}

static void stats_instant(void *st, const mlprof__sink_out *out, const mlprof__instant_out *e)
{
    if (counting(out))
        mlprof__stats_marker(st, e->ts_ns, e->id, e->domain, e->name, e->name_len);
}

/* The program's counters are rows; the series modules produce with their own
 * times (memory in use, with no handle) are not. */
static void stats_counter(void *st, const mlprof__sink_out *out, const mlprof__counter_out *c)
{
    if (counting(out) && c->id)
        mlprof__stats_counter(st, c->id, c->domain, c->name, c->value, c->ts_ns);
}

/* stats_file: a table, or JSON when its name ends in .json; at "auto" the
 * trace's name with .stats.txt for its extension (a table). */
static int stats_dump(void *st, const mlprof__sink_dump *d)
{
    const char *file = mlprof__g.cfg.stats_file;
    if (!file[0])
        return MLPROF_OK;
    char path[4200];
    if (strcmp(file, "auto") != 0) {
        mlprof__expand_path(file, 1, path, sizeof path);
    } else if (mlprof__sink_auto_path(d->trace_path, ".stats.txt", path, sizeof path)) {
        mlprof__sink_note_skipped("stats_file", d->trace_path);
        return MLPROF_OK;
    }
    int rc = mlprof__sink_path_check(d, "stats_file", file, path);
    if (rc != MLPROF_OK) /* said by the check; kept for the next dump and mlprof_dumps */
        return mlprof__sink_failed(d, "stats_file", rc, 1);
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    size_t n = strlen(path);
    int json = n > 5 && strcmp(path + n - 5, ".json") == 0;
    mlprof__stats_report(st, &sb, json, MLPROF_SORT_TOTAL, 0, d->stats_dropped, d->unfinished_spans, d->trace_path,
                         d->finished);
    rc = sb.failed ? mlprof__fail(MLPROF_ENOMEM, "cannot write %s: out of memory", path)
                   : mlprof__write_file_atomic(path, sb.data ? sb.data : "", sb.len);
    mlprof__sb_free(&sb);
    return mlprof__sink_wrote(d, "stats_file", path, rc);
}

const mlprof__sink_ops mlprof__stats_sink = {
    .name = "stats",
    /* self time, depth and hw, never the arguments; the statistics outlive
     * the trace (reset by a clear only): a stats_file that could not be
     * written is written again at the next dump */
    .flags = MLPROF__SINK_NO_TEXT | MLPROF__SINK_RETRY,
    .create = stats_create,
    .destroy = stats_destroy,
    .span = stats_span,
    .instant = stats_instant,
    .counter = stats_counter,
    .dump = stats_dump,
};
