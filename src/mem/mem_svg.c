/*
 * mem_svg.c - the memory flow picture: for each device, memory in use over
 * time (used as an area, allocated as a line) above a time-by-address map with
 * one rectangle per block, coloured by scope, with a tooltip. The address axis
 * keeps only the ranges blocks and segments occupy (large gaps are cut and
 * marked), so that a heap and far-away mmap blocks share one readable axis.
 * Blocks too small to see (under about a pixel) are merged into 2-pixel cells
 * shaded by how much of the cell they fill, and the picture says how many;
 * at most MAX_RECTS blocks are drawn one by one (the largest), so the file
 * stays small whatever the number of blocks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mem_internal.h"

#define WIDTH 1280.0
#define LEFT 110.0    /* address labels */
#define RIGHT 270.0   /* legend */
#define PLOT_W (WIDTH - LEFT - RIGHT)
#define USAGE_H 110.0
#define FLOW_H 440.0
#define CELL 2.0      /* raster of merged small blocks, in pixels */
#define MAX_RECTS 6000
#define MAX_REGIONS 96
#define NCOLORS 12

static const char *const g_palette[NCOLORS] = {
    "#3b75af", "#ef8636", "#519e3e", "#c53a32", "#8d69b8", "#84584e",
    "#d57dbe", "#bcbd45", "#58bbcc", "#f2c14e", "#2f4b7c", "#9ad0a3"};
#define OTHER_COLOR "#b4b4b4"

/* ----------------------------------------------------------- text helpers */

static void xml_text(mlprof__sb *out, const char *s)
{
    if (s)
        mlprof__sb_xml(out, s, strlen(s));
}

/* A tick label for bytes: whole units where possible ("4 MiB", "512 KiB"). */
static void bytes_label(mlprof__sb *out, uint64_t v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    uint64_t x = v;
    while (u < 4 && x >= 1024 && x % 1024 == 0) {
        x /= 1024;
        u++;
    }
    if (x < 10240 || u == 4)
        mlprof__sb_printf(out, "%llu %s", (unsigned long long)x, units[u]);
    else
        mlprof__sb_bytes(out, v);
}

/* A time tick: the steps are 1, 2 or 5 times a power of ten, so whole
 * seconds, milliseconds or microseconds. */
static void time_label(mlprof__sb *out, double s, double step)
{
    if (step >= 1)
        mlprof__sb_printf(out, "%.0f s", s);
    else if (step >= 1e-3)
        mlprof__sb_printf(out, "%.0f ms", s * 1e3);
    else if (step >= 1e-6)
        mlprof__sb_printf(out, "%.0f us", s * 1e6);
    else
        mlprof__sb_printf(out, "%.3f us", s * 1e6);
}

/* A 1-2-5 step giving about n ticks over span. */
static double nice_step(double span, int n)
{
    if (!(span > 0))
        return 1;
    double raw = span / n;
    double p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* A power-of-two step in bytes giving at most n ticks over span. */
static uint64_t bytes_step(uint64_t span, int n)
{
    uint64_t step = 1;
    while (step < UINT64_MAX / 4 && span / step > (uint64_t)n)
        step *= 2;
    return step;
}

/* --------------------------------------------------------- the address axis */

typedef struct region {
    uint64_t lo, hi;  /* addresses */
    double y0, y1;    /* pixel rows: y1 (bottom, lo) > y0 (top, hi) */
} region;

typedef struct interval {
    uint64_t lo, hi;
} interval;

static int interval_cmp(const void *pa, const void *pb)
{
    const interval *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Ranges in use on a device, gaps over max(64 KiB, 2% of what is in use) cut. */
static size_t build_regions(int device, const mem_device *d, region *out, double top, double height)
{
    const mem_state *M = &mlprof__mem;
    size_t n = 0;
    for (size_t i = 0; i < M->nblocks; i++)
        n += M->blocks[i].device == device;
    n += d->nsegs;
    interval *iv = n ? mlprof__malloc(n * sizeof *iv) : NULL;
    if (!iv)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < M->nblocks; i++) {
        const mem_block *b = &M->blocks[i];
        if (b->device == device)
            iv[k++] = (interval){b->addr, b->addr + (b->bytes ? b->bytes : 1)};
    }
    for (size_t i = 0; i < d->nsegs; i++)
        iv[k++] = (interval){d->segs[i].addr, d->segs[i].addr + (d->segs[i].bytes ? d->segs[i].bytes : 1)};
    mlprof__sort(iv, k, sizeof *iv, interval_cmp);
    /* merge overlaps, then measure what is covered */
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && iv[i].lo <= iv[m - 1].hi) {
            if (iv[i].hi > iv[m - 1].hi)
                iv[m - 1].hi = iv[i].hi;
        } else {
            iv[m++] = iv[i];
        }
    }
    uint64_t covered = 0;
    for (size_t i = 0; i < m; i++)
        covered += iv[i].hi - iv[i].lo;
    uint64_t gap = covered / 50 > 65536 ? covered / 50 : 65536;
    size_t r = 0;
    for (size_t i = 0; i < m; i++) {
        if (r && iv[i].lo - iv[r - 1].hi <= gap)
            iv[r - 1].hi = iv[i].hi;
        else
            iv[r++] = iv[i];
    }
    /* too many: close the smallest gaps */
    while (r > MAX_REGIONS) {
        size_t best = 1;
        for (size_t i = 2; i < r; i++) {
            if (iv[i].lo - iv[i - 1].hi < iv[best].lo - iv[best - 1].hi)
                best = i;
        }
        iv[best - 1].hi = iv[best].hi;
        memmove(iv + best, iv + best + 1, (r - best - 1) * sizeof *iv);
        r--;
    }
    /* heights: by size, with a floor; breaks between them narrow as they multiply */
    double brk = r > 1 ? 8.0 < 96.0 / (double)(r - 1) ? 8.0 : 96.0 / (double)(r - 1) : 0;
    double avail = height - brk * (double)(r > 0 ? r - 1 : 0);
    uint64_t total = 0;
    for (size_t i = 0; i < r; i++)
        total += iv[i].hi - iv[i].lo;
    double minh = r <= 24 ? 6.0 : 2.0, small = 0;
    size_t nsmall = 0;
    for (size_t i = 0; i < r; i++) {
        double h = avail * (double)(iv[i].hi - iv[i].lo) / (double)total;
        if (h < minh) {
            nsmall++;
            small += (double)(iv[i].hi - iv[i].lo);
        }
    }
    double big_avail = avail - minh * (double)nsmall;
    double big_total = (double)total - small;
    double y = top + height; /* low addresses at the bottom */
    for (size_t i = 0; i < r; i++) {
        double share = avail * (double)(iv[i].hi - iv[i].lo) / (double)total;
        double h = share < minh ? minh : big_total > 0 ? big_avail * (double)(iv[i].hi - iv[i].lo) / big_total : minh;
        out[i].lo = iv[i].lo;
        out[i].hi = iv[i].hi;
        out[i].y1 = y;
        out[i].y0 = y - h;
        y -= h + brk;
    }
    mlprof__free(iv);
    return r;
}

/* The pixel row of an address (which lies in one of the regions). */
static double addr_y(const region *rg, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rg[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const region *r = &rg[lo ? lo - 1 : 0];
    if (addr < r->lo)
        return r->y1;
    if (addr >= r->hi)
        return r->y0;
    return r->y1 - (r->y1 - r->y0) * (double)(addr - r->lo) / (double)(r->hi - r->lo);
}

/* ------------------------------------------------------------- colours */

typedef struct scope_rank {
    const mlprof__scope_node *scope;
    uint64_t weight;
} scope_rank;

static int rank_cmp(const void *pa, const void *pb)
{
    const scope_rank *a = pa, *b = pb;
    if (a->weight != b->weight)
        return a->weight > b->weight ? -1 : 1;
    return strcmp(mlprof__mem_scope_name(a->scope), mlprof__mem_scope_name(b->scope));
}

typedef struct colours {
    scope_rank *ranks; /* scopes by the most they held at once, over all devices */
    size_t n;
} colours;

static colours rank_scopes(void)
{
    colours c = {NULL, 0};
    const mem_state *M = &mlprof__mem;
    c.ranks = M->scopes.count ? mlprof__calloc(M->scopes.count, sizeof *c.ranks) : NULL;
    if (!c.ranks)
        return c;
    for (size_t i = 0; i < M->scopes.cap; i++) {
        const mem_scope_stat *st = M->scopes.slots[i].key ? M->scopes.slots[i].value : NULL;
        if (!st)
            continue;
        size_t j = 0;
        while (j < c.n && c.ranks[j].scope != st->scope)
            j++;
        if (j == c.n)
            c.ranks[c.n++].scope = st->scope;
        c.ranks[j].weight += st->peak ? st->peak : st->bytes_total ? 1 : 0;
    }
    mlprof__sort(c.ranks, c.n, sizeof *c.ranks, rank_cmp);
    return c;
}

/* The colour class of a scope: 0..NCOLORS-1, or NCOLORS for "other". */
static int colour_of(const colours *c, const mlprof__scope_node *scope)
{
    for (size_t i = 0; i < c->n && i < NCOLORS; i++) {
        if (c->ranks[i].scope == scope)
            return (int)i;
    }
    return NCOLORS;
}

/* --------------------------------------------------------------- drawing */

typedef struct view {
    uint64_t t0, t1; /* time range (ns) */
    double x0, w;    /* plot left and width */
} view;

static double time_x(const view *v, uint64_t ns)
{
    if (ns <= v->t0)
        return v->x0;
    if (ns >= v->t1)
        return v->x0 + v->w;
    return v->x0 + v->w * (double)(ns - v->t0) / (double)(v->t1 - v->t0);
}

/* The time ticks: vertical grid lines over [y_top, y_bottom] (behind what a
 * panel draws next), or (labels) the tick labels and the axis title below y_bottom. */
static void time_ticks(mlprof__sb *out, const view *v, double y_top, double y_bottom, int labels)
{
    double span = (double)(v->t1 - v->t0) / 1e9;
    double step = nice_step(span, 8);
    for (int i = 0; i <= 100; i++) {
        double s = step * i;
        if (s > span * 1.0001)
            break;
        double x = v->x0 + v->w * s / span;
        if (!labels) {
            mlprof__sb_printf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x,
                              y_top, x, y_bottom);
            continue;
        }
        mlprof__sb_printf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x,
                          y_bottom + 14);
        time_label(out, s, step);
        mlprof__sb_puts(out, "</text>\n");
    }
    if (labels)
        mlprof__sb_printf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time since recording began</text>\n",
                          v->x0 + v->w / 2, y_bottom + 30);
    else
        mlprof__sb_putc(out, '\n');
}

static void usage_panel(mlprof__sb *out, const mem_device *d, const view *v, double top)
{
    uint64_t ymax = d->peak_allocated > d->peak_used ? d->peak_allocated : d->peak_used;
    if (!ymax)
        ymax = 1;
    uint64_t step = bytes_step(ymax, 4);
    uint64_t top_val = (ymax + step - 1) / step * step;
    double bottom = top + USAGE_H;
    mlprof__sb_printf(out, "<rect class=\"panel\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
                      v->x0, top, v->w, USAGE_H);
    time_ticks(out, v, top, bottom, 0);
    for (uint64_t t = 0; t <= top_val; t += step) {
        double y = bottom - USAGE_H * (double)t / (double)top_val;
        mlprof__sb_printf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", v->x0, y,
                          v->x0 + v->w, y);
        mlprof__sb_printf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", v->x0 - 6, y + 4);
        bytes_label(out, t);
        mlprof__sb_puts(out, "</text>\n");
    }
    mlprof__sb_printf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-90 %.1f %.1f)\" text-anchor=\"middle\">in use</text>\n",
                      v->x0 - 80, top + USAGE_H / 2, v->x0 - 80, top + USAGE_H / 2);
    /* the buckets as steps: each bucket's highest value over its width */
    for (int series = 0; series < 2; series++) {
        if (series == 1 && !d->pooled)
            break;
        mlprof__sb_printf(out, series ? "<path class=\"allocated\" d=\"" : "<path class=\"used\" d=\"M%.1f %.1f", v->x0, bottom);
        uint64_t prev = 0;
        int started = 0;
        for (size_t i = 0; i < MEM_BUCKETS; i++) {
            const mem_bucket *b = &d->buckets[i];
            uint64_t ts = d->bucket_t0 + d->bucket_w * i;
            if (ts > v->t1)
                break;
            uint64_t val = b->set ? (series ? b->allocated : b->used) : prev;
            double xa = time_x(v, ts), xb = time_x(v, ts + d->bucket_w);
            double y = bottom - USAGE_H * (double)val / (double)top_val;
            if (!started && series) {
                mlprof__sb_printf(out, "M%.1f %.1f", xa, y);
                started = 1;
            }
            mlprof__sb_printf(out, "L%.1f %.1fL%.1f %.1f", xa, y, xb, y);
            if (b->set)
                prev = series ? b->last_allocated : b->last_used;
        }
        /* then the value held to the end */
        double y = bottom - USAGE_H * (double)(series ? d->allocated : d->used) / (double)top_val;
        mlprof__sb_printf(out, "L%.1f %.1f", v->x0 + v->w, y);
        if (!series)
            mlprof__sb_printf(out, "L%.1f %.1fZ", v->x0 + v->w, bottom);
        mlprof__sb_puts(out, "\"/>\n");
    }
    mlprof__sb_printf(out, "<text class=\"key\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\"><tspan class=\"usedkey\">&#9632;</tspan> used",
                      v->x0 + v->w, top - 6);
    if (d->pooled)
        mlprof__sb_puts(out, "  <tspan class=\"allockey\">&#8212;</tspan> allocated (reserved by the pool)");
    mlprof__sb_puts(out, "</text>\n");
}

/* A small block's share of the raster. */
typedef struct cell {
    float cover;  /* pixel area covered */
    float best;   /* the largest contribution, whose colour the cell takes */
    uint16_t colour;
    uint32_t blocks;
} cell;

typedef struct raster {
    cell *cells;
    int cols, rows;
    double x0, y0;
} raster;

static void raster_add(raster *r, double xa, double xb, double ya, double yb, int colour)
{
    int c0 = (int)((xa - r->x0) / CELL), c1 = (int)((xb - r->x0) / CELL);
    int r0 = (int)((ya - r->y0) / CELL), r1 = (int)((yb - r->y0) / CELL);
    if (c0 < 0) c0 = 0;
    if (r0 < 0) r0 = 0;
    if (c1 >= r->cols) c1 = r->cols - 1;
    if (r1 >= r->rows) r1 = r->rows - 1;
    if (c1 < c0 || r1 < r0)
        return;
    double area = (xb - xa) * (yb - ya);
    if (area < 0.01)
        area = 0.01; /* a block with a lifetime or size of zero still shows */
    float per = (float)(area / (double)((c1 - c0 + 1) * (r1 - r0 + 1)));
    for (int y = r0; y <= r1; y++) {
        for (int x = c0; x <= c1; x++) {
            cell *c = &r->cells[(size_t)y * (size_t)r->cols + (size_t)x];
            c->cover += per;
            c->blocks++;
            if (per > c->best) {
                c->best = per;
                c->colour = (uint16_t)colour;
            }
        }
    }
}

/* Runs of cells of one colour and shade, as rectangles; returns how many. */
static size_t raster_emit(mlprof__sb *out, const raster *r)
{
    size_t rects = 0;
    const double full = CELL * CELL;
    for (int y = 0; y < r->rows; y++) {
        int x = 0;
        while (x < r->cols) {
            const cell *c = &r->cells[(size_t)y * (size_t)r->cols + (size_t)x];
            if (c->blocks == 0) {
                x++;
                continue;
            }
            int shade = c->cover >= full * 0.5f ? 3 : c->cover >= full * 0.2f ? 2 : 1;
            int start = x;
            uint64_t blocks = 0;
            while (x < r->cols) {
                const cell *e = &r->cells[(size_t)y * (size_t)r->cols + (size_t)x];
                int sh = e->cover >= full * 0.5f ? 3 : e->cover >= full * 0.2f ? 2 : 1;
                if (!e->blocks || e->colour != c->colour || sh != shade)
                    break;
                blocks += e->blocks;
                x++;
            }
            mlprof__sb_printf(out, "<rect class=\"s%d m%d\" x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\"><title>parts of %llu blocks too small to draw one by one</title></rect>\n",
                              c->colour, shade, r->x0 + start * CELL, r->y0 + y * CELL, (x - start) * CELL, CELL,
                              (unsigned long long)blocks);
            rects++;
        }
    }
    return rects;
}

static void block_title(mlprof__sb *out, const mem_block *b, uint64_t origin)
{
    mlprof__sb_puts(out, "<title>");
    xml_text(out, b->tag ? b->tag : "block");
    mlprof__sb_puts(out, ": ");
    mlprof__sb_bytes(out, b->bytes);
    mlprof__sb_puts(out, "\nscope: ");
    xml_text(out, mlprof__mem_scope_name(b->scope));
    if (b->op) {
        mlprof__sb_puts(out, "\nspan: ");
        xml_text(out, b->op);
    }
    mlprof__sb_puts(out, "\nalive: ");
    mlprof__sb_duration(out, b->t_alloc > origin ? b->t_alloc - origin : 0);
    mlprof__sb_puts(out, " to ");
    if (b->seq_free == MEM_LIVE) {
        mlprof__sb_puts(out, "the end (not freed)");
    } else {
        mlprof__sb_duration(out, b->t_free > origin ? b->t_free - origin : 0);
        mlprof__sb_puts(out, " (");
        mlprof__sb_duration(out, b->t_free > b->t_alloc ? b->t_free - b->t_alloc : 0);
        mlprof__sb_putc(out, ')');
    }
    mlprof__sb_printf(out, "\naddress: 0x%llx, thread %d</title>", (unsigned long long)b->addr, (int)b->tid);
}

/* The tag (or the size) written inside a block wide and tall enough. */
static void block_label(mlprof__sb *out, const mem_block *b, double x, double y, double w, double h)
{
    mlprof__sb text;
    mlprof__sb_init(&text);
    if (b->tag) {
        mlprof__sb_puts(&text, b->tag);
        mlprof__sb_putc(&text, ' ');
    }
    mlprof__sb_bytes(&text, b->bytes);
    size_t fit = (size_t)((w - 6) / 5.8);
    if (text.data && text.len > fit) {
        if (fit < 4) {
            mlprof__sb_free(&text);
            return;
        }
        text.len = fit - 3;
        while (text.len > 0 && ((unsigned char)text.data[text.len] & 0xc0) == 0x80)
            text.len--; /* whole characters only */
        mlprof__sb_puts(&text, "...");
    }
    mlprof__sb_printf(out, "<text class=\"in\" x=\"%.1f\" y=\"%.1f\">", x + 3, y + (h < 24 ? h / 2 + 4 : 13));
    xml_text(out, text.data);
    mlprof__sb_puts(out, "</text>\n");
    mlprof__sb_free(&text);
}

typedef struct placed {
    size_t idx;
    double area;
} placed;

static int placed_cmp(const void *pa, const void *pb)
{
    const placed *a = pa, *b = pb;
    if (a->area != b->area)
        return a->area > b->area ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int placed_idx_cmp(const void *pa, const void *pb)
{
    const placed *a = pa, *b = pb;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

typedef struct flow_counts {
    size_t blocks, drawn, merged, cells;
} flow_counts;

static flow_counts flow_panel(mlprof__sb *out, int device, const mem_device *d, const view *v, double top,
                              const colours *col, uint64_t origin)
{
    flow_counts fc = {0, 0, 0, 0};
    const mem_state *M = &mlprof__mem;
    region rg[MAX_REGIONS];
    size_t nr = build_regions(device, d, rg, top, FLOW_H);
    mlprof__sb_printf(out, "<rect class=\"panel\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
                      v->x0, top, v->w, FLOW_H);
    /* the address axis: each region's base, offsets inside tall ones, and cuts */
    double label_y = top + FLOW_H + 20;
    for (size_t i = 0; i < nr; i++) {
        const region *r = &rg[i];
        double h = r->y1 - r->y0;
        mlprof__sb_printf(out, "<rect class=\"region\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
                          v->x0, r->y0, v->w, h);
        if (r->y1 <= label_y - 11) { /* labels of thin ranges would overlap */
            mlprof__sb_printf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">0x%llx</text>\n",
                              v->x0 - 6, r->y1 - 1, (unsigned long long)r->lo);
            label_y = r->y1;
        }
        if (h >= 60) {
            uint64_t step = bytes_step(r->hi - r->lo, (int)(h / 36));
            for (uint64_t off = step; off < r->hi - r->lo; off += step) {
                double y = r->y1 - h * (double)off / (double)(r->hi - r->lo);
                if (y - r->y0 < 12)
                    break;
                mlprof__sb_printf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                                  v->x0, y, v->x0 + v->w, y);
                mlprof__sb_printf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">+", v->x0 - 6, y + 4);
                bytes_label(out, off);
                mlprof__sb_puts(out, "</text>\n");
            }
        }
        if (i + 1 < nr && r->y0 - rg[i + 1].y1 >= 4)
            mlprof__sb_printf(out, "<path class=\"cut\" d=\"M%.1f %.1fl6 -4l6 4l6 -4M%.1f %.1fl6 -4l6 4l6 -4\"/>\n",
                              v->x0 - 9, r->y0 - 2, v->x0 + v->w - 9, r->y0 - 2);
    }
    mlprof__sb_printf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" transform=\"rotate(-90 %.1f %.1f)\" text-anchor=\"middle\">address (unused ranges cut)</text>\n",
                      v->x0 - 96, top + FLOW_H / 2, v->x0 - 96, top + FLOW_H / 2);
    time_ticks(out, v, top, top + FLOW_H, 0);
    /* the pool's segments, behind the blocks */
    for (size_t i = 0; i < d->nsegs; i++) {
        const mem_segment *s = &d->segs[i];
        double xa = time_x(v, s->t_reserve), xb = time_x(v, s->t_release ? s->t_release : v->t1);
        double ya = addr_y(rg, nr, s->addr + s->bytes), yb = addr_y(rg, nr, s->addr);
        mlprof__sb_printf(out, "<rect class=\"segment\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>segment reserved by the pool: ",
                          xa, ya, xb - xa > 0.5 ? xb - xa : 0.5, yb - ya > 0.5 ? yb - ya : 0.5);
        mlprof__sb_bytes(out, s->bytes);
        mlprof__sb_printf(out, " at 0x%llx</title></rect>\n", (unsigned long long)s->addr);
    }
    /* blocks big enough to see, the largest first, up to MAX_RECTS */
    placed *pl = NULL;
    size_t npl = 0;
    for (size_t i = 0; i < M->nblocks; i++)
        fc.blocks += M->blocks[i].device == device;
    if (fc.blocks)
        pl = mlprof__malloc(fc.blocks * sizeof *pl);
    raster ra;
    ra.cols = (int)(v->w / CELL) + 1;
    ra.rows = (int)(FLOW_H / CELL) + 1;
    ra.x0 = v->x0;
    ra.y0 = top;
    ra.cells = mlprof__calloc((size_t)ra.cols * (size_t)ra.rows, sizeof *ra.cells);
    if ((fc.blocks && !pl) || !ra.cells) { /* none kept (memory_history) is no failure */
        mlprof__free(pl);
        mlprof__free(ra.cells);
        out->failed = 1;
        return fc;
    }
    for (size_t i = 0; i < M->nblocks; i++) {
        const mem_block *b = &M->blocks[i];
        if (b->device != device)
            continue;
        double xa = time_x(v, b->t_alloc), xb = time_x(v, b->seq_free == MEM_LIVE ? v->t1 : b->t_free);
        double ya = addr_y(rg, nr, b->addr + b->bytes), yb = addr_y(rg, nr, b->addr);
        if (xb - xa >= 1.5 && yb - ya >= 1.5)
            pl[npl++] = (placed){i, (xb - xa) * (yb - ya)};
        else
            raster_add(&ra, xa, xb, ya, yb, colour_of(col, b->scope));
    }
    mlprof__sort(pl, npl, sizeof *pl, placed_cmp);
    for (size_t k = MAX_RECTS; k < npl; k++) {
        const mem_block *b = &M->blocks[pl[k].idx];
        double xa = time_x(v, b->t_alloc), xb = time_x(v, b->seq_free == MEM_LIVE ? v->t1 : b->t_free);
        raster_add(&ra, xa, xb, addr_y(rg, nr, b->addr + b->bytes), addr_y(rg, nr, b->addr),
                   colour_of(col, b->scope));
    }
    fc.drawn = npl < MAX_RECTS ? npl : MAX_RECTS;
    fc.merged = fc.blocks - fc.drawn;
    fc.cells = raster_emit(out, &ra);
    /* drawn in allocation order, so that later blocks lie on top */
    size_t nkeep = fc.drawn;
    mlprof__sort(pl, nkeep, sizeof *pl, placed_idx_cmp);
    for (size_t a = 0; a < nkeep; a++) {
        const mem_block *b = &M->blocks[pl[a].idx];
        double xa = time_x(v, b->t_alloc), xb = time_x(v, b->seq_free == MEM_LIVE ? v->t1 : b->t_free);
        double ya = addr_y(rg, nr, b->addr + b->bytes), yb = addr_y(rg, nr, b->addr);
        mlprof__sb_printf(out, "<rect class=\"s%d %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\">",
                          colour_of(col, b->scope), b->seq_free == MEM_LIVE ? "live" : "b", xa, ya, xb - xa,
                          yb - ya);
        block_title(out, b, origin);
        mlprof__sb_puts(out, "</rect>\n");
        if (xb - xa >= 48 && yb - ya >= 13)
            block_label(out, b, xa, ya, xb - xa, yb - ya);
    }
    mlprof__free(pl);
    mlprof__free(ra.cells);
    return fc;
}

static void peak_marker(mlprof__sb *out, const mem_device *d, const view *v, double top, double bottom)
{
    if (!d->peak_ns)
        return;
    double x = time_x(v, d->peak_ns);
    mlprof__sb_printf(out, "<line class=\"peak\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, top - 4, x,
                      bottom);
    int right = x > v->x0 + v->w * 0.75;
    mlprof__sb_printf(out, "<text class=\"peaklabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak ", right ? x - 4 : x + 4,
                      top + 10, right ? "end" : "start");
    mlprof__sb_bytes(out, d->peak_used);
    mlprof__sb_puts(out, "</text>\n");
}

static void legend(mlprof__sb *out, const colours *col, double x, double y)
{
    mlprof__sb_printf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\">scope (most held at once)</text>\n", x, y);
    y += 8;
    size_t shown = col->n < NCOLORS ? col->n : NCOLORS;
    for (size_t i = 0; i < shown; i++) {
        y += 18;
        mlprof__sb_printf(out, "<rect class=\"s%zu\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\"/>", i, x, y - 10);
        mlprof__sb_printf(out, "<text class=\"key\" x=\"%.1f\" y=\"%.1f\">", x + 18, y);
        const char *name = mlprof__mem_scope_name(col->ranks[i].scope);
        size_t n = strlen(name);
        if (n > 26) {
            /* the end of a long scope, from a character's first byte */
            const char *end = name + n - 23;
            while (((unsigned char)*end & 0xc0) == 0x80)
                end++;
            mlprof__sb_puts(out, "...");
            xml_text(out, end);
        } else {
            xml_text(out, name);
        }
        mlprof__sb_puts(out, " <tspan class=\"dim\">");
        mlprof__sb_bytes(out, col->ranks[i].weight);
        mlprof__sb_puts(out, "</tspan></text>\n");
    }
    if (col->n > NCOLORS) {
        y += 18;
        mlprof__sb_printf(out, "<rect class=\"s%d\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\"/>", NCOLORS, x, y - 10);
        mlprof__sb_printf(out, "<text class=\"key\" x=\"%.1f\" y=\"%.1f\">%zu other scopes</text>\n", x + 18, y,
                          col->n - NCOLORS);
    }
    y += 30;
    mlprof__sb_printf(out, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\">pale cells: blocks too small to</text>", x, y);
    mlprof__sb_printf(out, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\">draw, merged (darker = fuller)</text>\n", x, y + 14);
    mlprof__sb_printf(out, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\">outlined: never freed</text>\n", x, y + 28);
    mlprof__sb_printf(out, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\">hover a block for its details</text>\n", x, y + 42);
}

int mlprof__mem_write_svg(const char *path, const char *title)
{
    const mem_state *M = &mlprof__mem;
    uint64_t origin = mlprof__mem_origin();
    uint64_t end = mlprof_now_ns();
    int ndev = 0;
    const mem_device *d;
    for (int i = -1; (d = mlprof__mem_next_used(&i)) != NULL;) {
        ndev++;
        if (d->last_ns > end)
            end = d->last_ns;
    }
    for (size_t i = 0; i < M->nblocks; i++) {
        if (M->blocks[i].seq_free != MEM_LIVE && M->blocks[i].t_free > end)
            end = M->blocks[i].t_free;
    }
    if (end <= origin)
        end = origin + 1000;
    view v = {origin, end, LEFT, PLOT_W};
    const double dev_h = 36 + USAGE_H + 14 + FLOW_H + 40 + 30;
    double height = 70 + dev_h * ndev + 10;
    colours col = rank_scopes();

    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__sb *out = &sb;
    mlprof__sb_printf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                           "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\">\n",
                      WIDTH, height, WIDTH, height);
    mlprof__sb_puts(out, "<style>\n"
                         "text{font-size:11px;fill:#333}.title{font-size:17px;font-weight:bold}.sub{font-size:12px;fill:#555}"
                         ".devtitle{font-size:14px;font-weight:bold}.tick{font-size:10px;fill:#666}.label{font-size:11px;fill:#444}"
                         ".key{font-size:11px}.dim{fill:#888;font-size:10px}"
                         ".panel{fill:#fbfbfb;stroke:#ccc}.region{fill:#f3f4f6}.grid{stroke:#e2e2e2;stroke-width:1}"
                         ".cut{fill:none;stroke:#999}.segment{fill:#e4ebf5;stroke:#9fb3cf;stroke-dasharray:3 2}"
                         ".used{fill:#3b75af;fill-opacity:.35;stroke:#3b75af}.allocated{fill:none;stroke:#333;stroke-width:1.2}"
                         ".usedkey{fill:#3b75af}.allockey{fill:#333}"
                         ".peak{stroke:#d62728;stroke-dasharray:5 3;stroke-width:1.3}.peaklabel{fill:#d62728;font-weight:bold}"
                         ".b{stroke:#fff;stroke-width:.6}.live{stroke:#222;stroke-width:.8}.in{font-size:10px;fill:#fff;pointer-events:none}.m1{fill-opacity:.3}.m2{fill-opacity:.55}.m3{fill-opacity:.85}\n");
    for (int i = 0; i < NCOLORS; i++)
        mlprof__sb_printf(out, ".s%d{fill:%s}", i, g_palette[i]);
    mlprof__sb_printf(out, ".s%d{fill:%s}\n</style>\n", NCOLORS, OTHER_COLOR);
    mlprof__sb_printf(out, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", WIDTH, height);
    mlprof__sb_puts(out, "<text class=\"title\" x=\"20\" y=\"28\">Memory flow: ");
    xml_text(out, title);
    mlprof__sb_puts(out, "</text>\n");

    double y = 70;
    size_t total_blocks = 0, total_drawn = 0, total_merged = 0, total_cells = 0;
    for (int i = -1; (d = mlprof__mem_next_used(&i)) != NULL;) {
        mlprof__sb_printf(out, "<text class=\"devtitle\" x=\"%.1f\" y=\"%.1f\">", LEFT, y + 14);
        xml_text(out, d->name);
        mlprof__sb_puts(out, "</text><text class=\"sub\" x=\"");
        mlprof__sb_printf(out, "%.1f\" y=\"%.1f\">peak used ", LEFT + 12 + 9 * (double)strlen(d->name), y + 14);
        mlprof__sb_bytes(out, d->peak_used);
        if (d->peak_ns) {
            mlprof__sb_puts(out, " at ");
            mlprof__sb_duration(out, d->peak_ns > origin ? d->peak_ns - origin : 0);
        }
        mlprof__sb_puts(out, " · peak allocated ");
        mlprof__sb_bytes(out, d->peak_allocated);
        if (d->peak_allocated)
            mlprof__sb_printf(out, " · used/allocated %.0f%%", 100.0 * (double)d->peak_used / (double)d->peak_allocated);
        mlprof__sb_printf(out, " · %llu allocations", (unsigned long long)d->allocs);
        if (d->live_blocks)
            mlprof__sb_printf(out, ", %llu not freed", (unsigned long long)d->live_blocks);
        mlprof__sb_puts(out, "</text>\n");
        double utop = y + 36;
        usage_panel(out, d, &v, utop);
        double ftop = utop + USAGE_H + 14;
        flow_counts fc = flow_panel(out, i, d, &v, ftop, &col, origin);
        time_ticks(out, &v, utop, ftop + FLOW_H, 1);
        peak_marker(out, d, &v, utop, ftop + FLOW_H);
        mlprof__sb_printf(out, "<text class=\"dim\" x=\"%.1f\" y=\"%.1f\">%zu blocks: %zu drawn one by one, %zu too small to see merged into %zu cells",
                          LEFT, ftop + FLOW_H + 52, fc.blocks, fc.drawn, fc.merged, fc.cells);
        if (d->peak_set_incomplete || M->history_dropped)
            mlprof__sb_printf(out, "; %llu freed blocks not kept (memory_history) are missing",
                              (unsigned long long)M->history_dropped);
        size_t mark = out->len;
        mlprof__sb_puts(out, "; ");
        if (!mlprof__mem_problems(out, d))
            out->len = mark;
        mlprof__sb_puts(out, "</text>\n");
        total_blocks += fc.blocks;
        total_drawn += fc.drawn;
        total_merged += fc.merged;
        total_cells += fc.cells;
        y += dev_h;
    }
    mlprof__sb_printf(out, "<text class=\"sub\" x=\"20\" y=\"48\">%d device%s · %zu blocks · time by address, one rectangle per block, coloured by scope</text>\n",
                      ndev, ndev == 1 ? "" : "s", total_blocks);
    legend(out, &col, LEFT + PLOT_W + 24, 106);
    mlprof__sb_printf(out, "<!-- mlprof memory flow: blocks=%zu drawn=%zu merged=%zu cells=%zu -->\n</svg>\n",
                      total_blocks, total_drawn, total_merged, total_cells);
    mlprof__free(col.ranks);
    int rc = sb.failed ? mlprof__fail(MLPROF_ENOMEM, "memory flow picture: out of memory")
                       : mlprof__write_file_atomic(path, sb.data, sb.len);
    mlprof__sb_free(&sb);
    return rc;
}
