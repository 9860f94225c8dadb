/*
 * stats.c - aggregate statistics per domain: for durations and frames the
 * count, total, self (time not spent in nested spans), min, max and average;
 * for counters the samples, min, max, average and last value; for markers the
 * count. Printed as a table in the units a person reads, or as JSON in ns.
 * The sink mlprof__stats_sink keeps them (its state is an mlprof__stats) and
 * writes stats_file at each dump; mlprof_dumps reads them too.
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

struct mlprof__stats {
    by_id *ids;
    size_t ids_cap, ids_count;
    mlprof__map index; /* "kind\x1f domain \x1f name" -> row */
    row **rows;
    size_t nrows, cap;
};

mlprof__stats *mlprof__stats_new(void)
{
    mlprof__stats *st = mlprof__calloc(1, sizeof *st);
    if (st)
        mlprof__map_init(&st->index);
    return st;
}

void mlprof__stats_reset(mlprof__stats *st)
{
    for (size_t i = 0; i < st->nrows; i++) {
        mlprof__free(st->rows[i]->domain);
        mlprof__free(st->rows[i]->name);
        mlprof__free(st->rows[i]);
    }
    mlprof__free(st->rows);
    mlprof__free(st->ids);
    st->ids = NULL;
    st->ids_cap = st->ids_count = 0;
    mlprof__map_free(&st->index);
    st->rows = NULL;
    st->nrows = st->cap = 0;
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

static row *get_row(mlprof__stats *st, int kind, const char *domain, const char *name,
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
static row *get_row_id(mlprof__stats *st, const void *id, int kind, const char *domain,
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

void mlprof__stats_duration(mlprof__stats *st, const void *id, const char *domain, const char *name,
                            size_t name_len, int frame, uint64_t dur_ns, uint64_t self_ns, const int64_t *hw,
                            unsigned hw_mask)
{
    row *r = get_row_id(st, id, frame ? MLPROF__STAT_FRAME : MLPROF__STAT_DURATION, domain, name,
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
    row *r = get_row_id(st, id, MLPROF__STAT_COUNTER, domain, name, strlen(name));
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

void mlprof__stats_marker(mlprof__stats *st, const void *id, const char *domain, const char *name,
                          size_t name_len)
{
    row *r = get_row_id(st, id, MLPROF__STAT_MARKER, domain, name, name_len);
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

static row **sorted_rows(const mlprof__stats *st, int sort_by, int ascending)
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

static void format_table(row **rows, size_t n, mlprof__sb *out, int sort_by, int ascending,
                         const mlprof__stats_info *info)
{
    static const char *const sorts[] = {"total", "avg", "min", "max", "count", "self"};
    mlprof__sb_printf(out, "mlprof %s statistics (sorted by %s, %s)\n", MLPROF_VERSION_STRING,
                      sorts[sort_by], ascending ? "ascending" : "descending");
    if (n == 0)
        mlprof__sb_puts(out, "\n  (no events recorded)\n");
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

static void format_json(row **rows, size_t n, mlprof__sb *out, int sort_by, int ascending,
                        const mlprof__stats_info *info)
{
    static const char *const sorts[] = {"total", "avg", "min", "max", "count", "self"};
    static const char *const groups[] = {"durations", "frames", "counters", "markers"};
    mlprof__sb_printf(out, "{\"mlprof_version\":\"%s\",\"time_unit\":\"ns\",\"sort_by\":\"%s\",\"ascending\":%s",
                      MLPROF_VERSION_STRING, sorts[sort_by], ascending ? "true" : "false");
    mlprof__sb_printf(out, ",\"dropped_events\":%llu,\"unfinished_spans\":%llu,\"domains\":[",
                      (unsigned long long)(info ? info->dropped_events : 0),
                      (unsigned long long)(info ? info->unfinished_spans : 0));
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
    if (info && info->extra) {
        mlprof__sb_putc(out, ',');
        mlprof__sb_puts(out, info->extra);
    }
    mlprof__sb_puts(out, "}\n");
}

void mlprof__stats_format(const mlprof__stats *st, mlprof__sb *out, int format, int sort_by,
                          int ascending, const mlprof__stats_info *info)
{
    row **rows = sorted_rows(st, sort_by, ascending);
    if (!rows) {
        out->failed = 1;
        return;
    }
    if (format == MLPROF_FORMAT_JSON)
        format_json(rows, st->nrows, out, sort_by, ascending, info);
    else
        format_table(rows, st->nrows, out, sort_by, ascending, info);
    mlprof__free(rows);
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
        mlprof__stats_duration(st, s->id, s->domain, s->name, s->name_len, s->kind == MLPROF__OUT_FRAME,
                               s->end_ns - s->begin_ns, s->self_ns, s->hw_mask ? s->hw : NULL, s->hw_mask);
}

static void stats_instant(void *st, const mlprof__sink_out *out, const mlprof__instant_out *e)
{
    if (counting(out))
        mlprof__stats_marker(st, e->id, e->domain, e->name, e->name_len);
}

/* The program's counters are rows; the series modules produce with their own
 * times (memory in use, with no handle) are not. */
static void stats_counter(void *st, const mlprof__sink_out *out, const mlprof__counter_out *c)
{
    if (counting(out) && c->id)
        mlprof__stats_counter(st, c->id, c->domain, c->name, c->value, c->ts_ns);
}

/* stats_file: a table, or JSON when its name ends in .json. */
static int stats_dump(void *st, const mlprof__sink_dump *d)
{
    const char *file = mlprof__g.cfg.stats_file;
    if (!file[0])
        return MLPROF_OK;
    char path[4200];
    mlprof__expand_path(file, 1, path, sizeof path);
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    size_t n = strlen(path);
    int json = n > 5 && strcmp(path + n - 5, ".json") == 0;
    mlprof__stats_report(st, &sb, json, MLPROF_SORT_TOTAL, 0, d->stats_dropped, d->unfinished_spans, d->trace_path,
                         d->finished);
    int rc = mlprof__write_file_atomic(path, sb.data ? sb.data : "", sb.len);
    mlprof__sb_free(&sb);
    return rc;
}

const mlprof__sink_ops mlprof__stats_sink = {
    .name = "stats",
    .flags = MLPROF__SINK_NO_TEXT, /* self time, depth and hw, never the arguments */
    .create = stats_create,
    .destroy = stats_destroy,
    .span = stats_span,
    .instant = stats_instant,
    .counter = stats_counter,
    .dump = stats_dump,
};
