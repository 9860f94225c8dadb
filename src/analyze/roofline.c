/*
 * roofline.c - operators against the machine's ceilings. Each group of the
 * operator table (an_group_rows) with FLOPs and bytes is a point: x its
 * arithmetic intensity (FLOPs / bytes), y its attained rate (FLOPs over its
 * total time, children included, as analyze's FLOPS column). Its roof is
 * min(peak of its precision, intensity x bandwidth of the level its bytes
 * per call fit in); the op is memory-bound when the bandwidth term is the
 * lower. The picture draws every level's slope and every peak on log-log
 * axes, points sized by their share of the placed operators' time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "roofline.h"

typedef struct op {
    const an_group_row *g;
    int64_t ns;           /* its time: the group's on the CPU, or its GPU work's (--gpu-ceilings) */
    const char *why_not;  /* NULL when placed */
    double ai, attained, roof, pct, spread, share;
    const ce_point *peak, *level;
    int memory_bound;
    const char *prec;     /* "fp32", "fp64", "fp16" (GPU) */
    const char *prec_src; /* the dtype argument's text, or NULL: assumed */
    double x, y, r;       /* in the picture */
} op;

/* ---------------------------------------------------------- precision */

/* The precisions whose compute peaks are drawn (a GPU's ceilings have fp16
 * too), and their colours. */
enum { NPRECS = 3 };
static const char *const k_precs[NPRECS] = {"fp32", "fp64", "fp16"};
static const char *const k_prec_colors[NPRECS] = {"#ff7f0e", "#e377c2", "#bcbd22"};

static const char *const k_dtype_keys[] = {"dtype", "input_type", "Input type", "precision", "data_type", NULL};

/* fp64 for doubles; fp16 for 16-bit floats where the ceilings have that
 * peak (a GPU's: half2 FMAs), else fp32, as for everything else (the text
 * says so). */
static const char *precision_of(const an_trace *t, const an_event *e, const ce_ceilings *c, const char **src)
{
    const an_arg *a = an_event_arg_any(t, e, k_dtype_keys);
    *src = a && a->str && a->str[0] ? a->str : NULL;
    if (!*src)
        return "fp32";
    if (strstr(*src, "64") || strcasestr(*src, "double"))
        return "fp64";
    /* Half, float16, fp16; not bfloat16, whose non-tensor rate is not half2's */
    if ((strcasestr(*src, "half") || strcasestr(*src, "float16") || strcasestr(*src, "fp16")) &&
        !strcasestr(*src, "bf") && ce_peak(c, "fp16", 1))
        return "fp16";
    return "fp32";
}

static double spread_of(const ce_point *p)
{
    return p && p->s.max > 0 ? (p->s.max - p->s.min) / p->s.max : 0;
}

/* The level whose cache holds bytes (per call), else the last (DRAM). */
static const ce_point *level_for(const ce_point *const *lv, size_t n, double bytes)
{
    for (size_t i = 0; i < n; i++)
        if (lv[i]->cache_bytes > 0 && bytes <= lv[i]->cache_bytes)
            return lv[i];
    return n ? lv[n - 1] : NULL;
}

static void place(const an_trace *t, const ce_ceilings *c, int all, const ce_point *const *lv, size_t nlv, op *p)
{
    const an_group_row *g = p->g;
    if (!g->flops_n || !g->bytes_n) {
        p->why_not = !g->flops_n && !g->bytes_n ? "no FLOPs nor bytes" : !g->flops_n ? "no FLOPs" : "no bytes";
        return;
    }
    if (!(g->flops > 0)) {
        p->why_not = "0 FLOPs";
        return;
    }
    if (!(g->bytes > 0)) {
        p->why_not = "0 bytes";
        return;
    }
    if (p->ns <= 0) {
        p->why_not = "no time";
        return;
    }
    p->prec = precision_of(t, g->first, c, &p->prec_src);
    p->peak = ce_peak(c, p->prec, all);
    if (!p->peak) { /* a file with one precision only */
        p->prec = strcmp(p->prec, "fp32") == 0 ? "fp64" : "fp32";
        p->peak = ce_peak(c, p->prec, all);
    }
    p->ai = g->flops / g->bytes;
    p->attained = g->flops / ((double)p->ns * 1e-9);
    /* on a GPU too: an H100 ran ReLUs of 17 MB a call at 1.3x its device
     * memory's roof, their operands still in its 50 MB L2 */
    p->level = level_for(lv, nlv, g->bytes / (double)g->bytes_n);
    double mem = p->level ? p->ai * p->level->s.max : INFINITY;
    double peak = p->peak ? p->peak->s.max : INFINITY;
    p->memory_bound = mem < peak;
    p->roof = p->memory_bound ? mem : peak;
    p->spread = spread_of(p->memory_bound ? p->level : p->peak);
    p->pct = 100 * p->attained / p->roof;
}

static int by_time(const void *pa, const void *pb)
{
    const op *a = pa, *b = pb;
    if (a->ns != b->ns)
        return a->ns > b->ns ? -1 : 1;
    return strcmp(a->g->name, b->g->name);
}

/* -------------------------------------------------------------- table */

static void put_cell_si(mlprof__sb *out, double v, const char *unit, int width)
{
    mlprof__sb tmp;
    mlprof__sb_init(&tmp);
    an_put_si(&tmp, v, unit);
    mlprof__sb_printf(out, "%*s", width, tmp.data ? tmp.data : "");
    mlprof__sb_free(&tmp);
}

static void put_roofs(mlprof__sb *out, const ce_ceilings *c, int all, const ce_point *const *lv, size_t nlv)
{
    for (int i = 0, k = 0; i < NPRECS; i++) {
        const ce_point *p = ce_peak(c, k_precs[i], all);
        if (!p)
            continue;
        mlprof__sb_printf(out, "%s%s ", k++ ? ", " : "", k_precs[i]);
        an_put_si(out, p->s.max, "FLOP/s");
        mlprof__sb_printf(out, " (spread %.0f%%)", 100 * spread_of(p));
    }
    for (size_t i = 0; i < nlv; i++) {
        mlprof__sb_printf(out, ", %s ", lv[i]->what);
        an_put_si(out, lv[i]->s.max, "B/s");
        mlprof__sb_printf(out, " (%.0f%%)", 100 * spread_of(lv[i]));
    }
}

static void put_name(mlprof__sb *out, const char *name, int width)
{
    int n = (int)strlen(name);
    if (n > width)
        mlprof__sb_printf(out, "%.*s...", width - 3, name);
    else
        mlprof__sb_printf(out, "%-*s", width, name);
}

static void format_table(mlprof__sb *out, const an_trace *t, const ce_ceilings *c, const rf_options *ro,
                         const op *ops, size_t n, size_t placed, const ce_point *const *lv, size_t nlv)
{
    int all = !ro->one_thread;
    mlprof__sb_printf(out, "roofline of %s: %zu operator%s placed, %zu not placed\n", t->path, placed,
                      placed == 1 ? "" : "s", n - placed);
    if (c->gpu)
        mlprof__sb_printf(out, "ceilings of the GPU %s, best of %d (%s): ", c->cpu, c->repeats,
                          ro->ceilings ? ro->ceilings : "measured now");
    else
        mlprof__sb_printf(out, "ceilings of %s, %d thread%s, best of %d (%s): ", c->cpu, all ? c->threads : 1,
                          all && c->threads != 1 ? "s" : "", c->repeats, ro->ceilings ? ro->ceilings : "measured now");
    put_roofs(out, c, all, lv, nlv);
    mlprof__sb_puts(out, "\nroof: the peak of the op's precision, or its intensity times the bandwidth of the "
                         "level its bytes per call fit in\n");
    if (c->gpu)
        mlprof__sb_puts(out, "time: the GPU time of the kernels, copies and memsets launched inside each operator\n");
    int assumed = 0;
    for (size_t i = 0; i < n; i++)
        assumed += !ops[i].why_not && !ops[i].prec_src;
    if (assumed)
        mlprof__sb_printf(out, "note: %d operator%s no dtype argument: the fp32 roof is used\n", assumed,
                          assumed == 1 ? " has" : "s have");
    mlprof__sb_puts(out, "\n");
    if (!placed)
        mlprof__sb_puts(out, "(no operator placed: the reasons are below)\n");
    int w = 10;
    for (size_t i = 0; i < n; i++)
        if (!ops[i].why_not && (int)strlen(ops[i].g->name) > w)
            w = (int)strlen(ops[i].g->name);
    w = w > 40 ? 40 : w;
    if (placed)
        mlprof__sb_printf(out, "%-*s %7s %11s %6s %12s %11s %9s %15s %15s %9s  %s\n", w, "operator", "count", "time",
                      "share", "FLOPs", "bytes", "AI F/B", "attained", "roof", "% of roof", "bound");
    for (size_t i = 0; i < n; i++) {
        const op *p = &ops[i];
        if (p->why_not)
            continue;
        put_name(out, p->g->name, w);
        mlprof__sb_printf(out, " %7llu ", (unsigned long long)p->g->count);
        mlprof__sb tmp;
        mlprof__sb_init(&tmp);
        an_put_duration(&tmp, p->ns);
        mlprof__sb_printf(out, "%11s %5.1f%% ", tmp.data ? tmp.data : "", 100 * p->share);
        mlprof__sb_free(&tmp);
        put_cell_si(out, p->g->flops, "", 12);
        mlprof__sb_putc(out, ' ');
        put_cell_si(out, p->g->bytes, "B", 11);
        mlprof__sb_printf(out, " %9.3g ", p->ai);
        put_cell_si(out, p->attained, "FLOP/s", 15);
        mlprof__sb_putc(out, ' ');
        put_cell_si(out, p->roof, "FLOP/s", 15);
        mlprof__sb_printf(out, " %8.1f%%  %s (%s)%s%s\n", p->pct, p->memory_bound ? "memory" : "compute",
                          p->memory_bound ? p->level->what : p->prec,
                          p->pct <= 100           ? ""
                          : !p->memory_bound && c->gpu ? " [above the FMA roof: tensor cores?]"
                                                       : " [above its roof]",
                          !p->prec_src               ? " [fp32 assumed]"
                          : strcmp(p->prec, "fp32") == 0 && (strstr(p->prec_src, "16") || strcasestr(p->prec_src, "half"))
                              ? " [no 16-bit roof measured: fp32's]"
                              : "");
    }
    if (placed < n) {
        /* a line per reason, the first names of each (a real trace has hundreds) */
        enum { NAMES_SHOWN = 8 };
        mlprof__sb_printf(out, "\nnot placed (%zu):\n", n - placed);
        for (size_t i = 0; i < n; i++) {
            const char *why = ops[i].why_not;
            int first = why != NULL;
            for (size_t j = 0; j < i && first; j++)
                first = !(ops[j].why_not && strcmp(ops[j].why_not, why) == 0);
            if (!first)
                continue;
            size_t count = 0, shown = 0;
            for (size_t j = i; j < n; j++)
                count += ops[j].why_not && strcmp(ops[j].why_not, why) == 0;
            mlprof__sb_printf(out, "  %s (%zu):", why, count);
            for (size_t j = i; j < n && shown < NAMES_SHOWN; j++) {
                if (!ops[j].why_not || strcmp(ops[j].why_not, why) != 0)
                    continue;
                mlprof__sb_printf(out, "%s %s (%llu)", shown++ ? "," : "", ops[j].g->name,
                                  (unsigned long long)ops[j].g->count);
            }
            if (count > shown)
                mlprof__sb_printf(out, " and %zu more (--format json lists them)", count - shown);
            mlprof__sb_putc(out, '\n');
        }
    }
}

static void json_num(mlprof__sb *out, const char *key, double v)
{
    mlprof__sb_printf(out, ",\"%s\":", key);
    if (isfinite(v))
        mlprof__sb_printf(out, "%.6g", v);
    else
        mlprof__sb_puts(out, "null");
}

static void format_json(mlprof__sb *out, const an_trace *t, const ce_ceilings *c, const rf_options *ro,
                        const op *ops, size_t n)
{
    mlprof__sb_puts(out, "{\"trace\":");
    mlprof__sb_json_str(out, t->path, strlen(t->path));
    mlprof__sb_puts(out, ",\"ceilings_file\":");
    if (ro->ceilings)
        mlprof__sb_json_str(out, ro->ceilings, strlen(ro->ceilings));
    else
        mlprof__sb_puts(out, "null");
    mlprof__sb_printf(out, ",\"threads\":%d,\"ceilings\":", ro->one_thread ? 1 : c->threads);
    ce_write_json(c, out);
    mlprof__sb_puts(out, ",\"placed\":[");
    for (size_t i = 0, k = 0; i < n; i++) {
        const op *p = &ops[i];
        if (p->why_not)
            continue;
        mlprof__sb_puts(out, k++ ? ",\n{\"name\":" : "\n{\"name\":");
        mlprof__sb_json_str(out, p->g->name, strlen(p->g->name));
        mlprof__sb_printf(out, ",\"count\":%llu,\"time_ns\":%lld", (unsigned long long)p->g->count,
                          (long long)p->ns);
        json_num(out, "share", p->share);
        json_num(out, "flops", p->g->flops);
        json_num(out, "bytes", p->g->bytes);
        json_num(out, "ai", p->ai);
        json_num(out, "attained", p->attained);
        json_num(out, "roof", p->roof);
        json_num(out, "percent_of_roof", 100 * p->attained / p->roof);
        json_num(out, "spread", p->spread);
        mlprof__sb_printf(out, ",\"bound\":\"%s\",\"level\":\"%s\",\"precision\":\"%s\",\"precision_from\":",
                          p->memory_bound ? "memory" : "compute", p->level ? p->level->what : "", p->prec);
        if (p->prec_src)
            mlprof__sb_json_str(out, p->prec_src, strlen(p->prec_src));
        else
            mlprof__sb_puts(out, "null");
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_puts(out, "],\n\"not_placed\":[");
    for (size_t i = 0, k = 0; i < n; i++) {
        if (!ops[i].why_not)
            continue;
        mlprof__sb_puts(out, k++ ? ",\n{\"name\":" : "\n{\"name\":");
        mlprof__sb_json_str(out, ops[i].g->name, strlen(ops[i].g->name));
        mlprof__sb_printf(out, ",\"count\":%llu,\"reason\":\"%s\"}", (unsigned long long)ops[i].g->count,
                          ops[i].why_not);
    }
    mlprof__sb_puts(out, "]}\n");
}

/* ---------------------------------------------------------------- SVG */

enum { SVG_W = 1220, SVG_H = 720, PX0 = 110, PX1 = 920, PY0 = 70, PY1 = 640 };

typedef struct axes {
    double lx0, lx1, ly0, ly1; /* log10 of the ranges */
} axes;

static double px(const axes *a, double v) { return PX0 + (log10(v) - a->lx0) / (a->lx1 - a->lx0) * (PX1 - PX0); }
static double py(const axes *a, double v) { return PY1 - (log10(v) - a->ly0) / (a->ly1 - a->ly0) * (PY1 - PY0); }

static const char *level_color(const char *what)
{
    return strcmp(what, "L1") == 0 ? "#2ca02c" : strcmp(what, "L2") == 0 ? "#17becf"
                                                : strcmp(what, "L3") == 0 ? "#9467bd"
                                                                          : "#8c564b";
}

static void put_xml(mlprof__sb *out, const char *s)
{
    mlprof__sb_xml(out, s, strlen(s));
}

static void put_decade(mlprof__sb *out, int e, const char *unit)
{
    static const char *const pre[] = {"", "K", "M", "G", "T", "P", "E"};
    if (e < 0) {
        mlprof__sb_printf(out, "%.*f%s", -e, pow(10, e), unit);
        return;
    }
    int p = e / 3 > 6 ? 6 : e / 3;
    mlprof__sb_printf(out, "%.0f %s%s", pow(10, e - 3 * p), pre[p], unit);
}

typedef struct box {
    double x0, y0, x1, y1;
} box;

static int overlaps(const box *a, const box *b)
{
    return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* The label of each point, where it hides no other label, no other point
 * and stays in the plot; a point whose label fits nowhere keeps its hover
 * text only. Returns how many were left unlabelled. */
static size_t put_labels(mlprof__sb *out, op **pts, size_t n, const box *also, size_t nalso)
{
    box *taken = mlprof__calloc(2 * n + nalso + 1, sizeof *taken);
    if (!taken)
        return n;
    size_t ntaken = 0, unlabelled = 0;
    for (size_t i = 0; i < nalso; i++)
        taken[ntaken++] = also[i];
    for (size_t i = 0; i < n; i++) /* point i's circle is taken[nalso + i] */
        taken[ntaken++] = (box){pts[i]->x - pts[i]->r, pts[i]->y - pts[i]->r, pts[i]->x + pts[i]->r,
                                pts[i]->y + pts[i]->r};
    for (size_t i = 0; i < n; i++) {
        const op *p = pts[i];
        char text[40];
        size_t len = strlen(p->g->name);
        if (len > 30)
            snprintf(text, sizeof text, "%.27s...", p->g->name);
        else
            snprintf(text, sizeof text, "%s", p->g->name);
        double w = 6.6 * (double)strlen(text), h = 13, r = p->r;
        /* candidates: right, left, above, below, then further out diagonally */
        const double dx[] = {r + 4, -r - 4 - w, -w / 2, -w / 2, r + 2, -r - 2 - w, r + 2, -r - 2 - w};
        const double dy[] = {-h / 2, -h / 2, -r - 3 - h, r + 3, -r - h, -r - h, r, r};
        int placed = 0;
        for (size_t k = 0; k < sizeof dx / sizeof dx[0] && !placed; k++) {
            box b = {p->x + dx[k], p->y + dy[k], p->x + dx[k] + w, p->y + dy[k] + h};
            if (b.x0 < PX0 + 2 || b.x1 > PX1 - 2 || b.y0 < PY0 + 2 || b.y1 > PY1 - 2)
                continue;
            int clash = 0;
            for (size_t j = 0; j < ntaken && !clash; j++)
                clash = j != nalso + i && overlaps(&b, &taken[j]);
            if (clash)
                continue;
            taken[ntaken++] = b;
            mlprof__sb_printf(out, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\">", b.x0, b.y1 - 3);
            put_xml(out, text);
            mlprof__sb_puts(out, "</text>\n");
            placed = 1;
        }
        unlabelled += !placed;
    }
    mlprof__free(taken);
    return unlabelled;
}

static void put_point(mlprof__sb *out, const op *p, int all, const ce_ceilings *c)
{
    mlprof__sb_printf(out,
                      "<circle class=\"op %s\" cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" data-ai=\"%.6g\" "
                      "data-attained=\"%.6g\" data-roof=\"%.6g\" data-spread=\"%.4g\"><title>",
                      p->memory_bound ? "memory" : "compute", p->x, p->y, p->r, p->ai, p->attained, p->roof,
                      p->spread);
    put_xml(out, p->g->name);
    mlprof__sb_printf(out, "\ncount %llu, time ", (unsigned long long)p->g->count);
    an_put_duration(out, p->ns);
    mlprof__sb_printf(out, " (%.1f%% of the placed operators')\nFLOPs ", 100 * p->share);
    an_put_si(out, p->g->flops, "");
    mlprof__sb_puts(out, ", bytes ");
    an_put_si(out, p->g->bytes, "B");
    mlprof__sb_printf(out, "\nintensity %.3g FLOP/byte\nattained ", p->ai);
    an_put_si(out, p->attained, "FLOP/s");
    mlprof__sb_printf(out, " = %.1f%% of the roof ", p->pct);
    an_put_si(out, p->roof, "FLOP/s");
    mlprof__sb_printf(out, "\n%s-bound (%s", p->memory_bound ? "memory" : "compute",
                      p->memory_bound ? p->level->what : p->prec);
    if (p->memory_bound)
        mlprof__sb_printf(out, " bandwidth, %d thread%s", all ? c->threads : 1, all && c->threads > 1 ? "s" : "");
    mlprof__sb_printf(out, "); precision %s%s</title></circle>\n", p->prec, p->prec_src ? "" : " (assumed)");
}

static void put_svg(mlprof__sb *out, const an_trace *t, const ce_ceilings *c, const rf_options *ro, op *ops,
                    size_t n, size_t nplaced, const ce_point *const *lv, size_t nlv)
{
    int all = !ro->one_thread;
    const ce_point *peaks[NPRECS];
    for (int i = 0; i < NPRECS; i++)
        peaks[i] = ce_peak(c, k_precs[i], all);
    double top = 0, fast_bw = 0, lo_ai = INFINITY, hi_ai = 0, lo_y = INFINITY, hi_y = 0;
    for (int i = 0; i < NPRECS; i++)
        if (peaks[i])
            top = fmax(top, peaks[i]->s.max);
    for (size_t i = 0; i < nlv; i++)
        fast_bw = fmax(fast_bw, lv[i]->s.max);
    for (size_t i = 0; i < n; i++) {
        if (ops[i].why_not)
            continue;
        lo_ai = fmin(lo_ai, ops[i].ai);
        hi_ai = fmax(hi_ai, ops[i].ai);
        lo_y = fmin(lo_y, ops[i].attained);
        hi_y = fmax(hi_y, ops[i].attained);
    }
    /* the ridges inside, with room; whole decades */
    double slow_bw = nlv ? lv[nlv - 1]->s.max : fast_bw;
    double ridge_lo = fast_bw > 0 ? top / fast_bw : 1, ridge_hi = slow_bw > 0 ? top / slow_bw : 1;
    axes a;
    a.lx0 = floor(log10(fmin(lo_ai / 2, ridge_lo / 4)));
    a.lx1 = ceil(log10(fmax(hi_ai * 2, ridge_hi * 4)));
    a.ly0 = floor(log10(fmin(lo_y / 2, top / 1e3)));
    a.ly1 = ceil(log10(fmax(hi_y, top) * 1.5));
    if (a.lx1 - a.lx0 < 2)
        a.lx1 = a.lx0 + 2;
    if (a.ly1 - a.ly0 < 2)
        a.ly0 = a.ly1 - 2;

    mlprof__sb_printf(out,
                      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "font-family=\"Helvetica, Arial, sans-serif\" data-x-range=\"%g %g\" data-y-range=\"%g %g\" "
                      "data-plot=\"%d %d %d %d\">\n",
                      SVG_W, SVG_H, SVG_W, SVG_H, pow(10, a.lx0), pow(10, a.lx1), pow(10, a.ly0), pow(10, a.ly1),
                      PX0, PY0, PX1, PY1);
    mlprof__sb_puts(out, "<style>\n"
                         " .grid{stroke:#ddd;stroke-width:1} .minor{stroke:#f0f0f0;stroke-width:1}\n"
                         " .tick{font-size:12px;fill:#444} .axis{font-size:14px;fill:#222}\n"
                         " .roof{stroke-width:2.2;fill:none} .rooflabel{font-size:12px;paint-order:stroke;stroke:white;stroke-width:3px}\n"
                         " .op{fill-opacity:.65;stroke:#333;stroke-width:.8} .op:hover{fill-opacity:1;stroke-width:2}\n"
                         " .memory{fill:#1f77b4} .compute{fill:#d62728}\n"
                         " .label{font-size:11px;fill:#222;paint-order:stroke;stroke:white;stroke-width:3px} .legend{font-size:12px;fill:#222}\n"
                         "</style>\n");
    mlprof__sb_printf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", SVG_W, SVG_H);
    mlprof__sb_puts(out, "<text x=\"110\" y=\"30\" font-size=\"18\" fill=\"#111\">Roofline: ");
    put_xml(out, t->path);
    mlprof__sb_puts(out, "</text>\n<text x=\"110\" y=\"50\" font-size=\"12\" fill=\"#555\">");
    put_xml(out, c->cpu);
    mlprof__sb_printf(out, ", %d thread%s; ceilings %s, best of %d", all ? c->threads : 1,
                      all && c->threads != 1 ? "s" : "", c->when, c->repeats);
    mlprof__sb_printf(out, "; %zu operators placed, %zu not placed</text>\n", nplaced, n - nplaced);

    /* grid: decades with labels, and the 2..9 between them */
    mlprof__sb_puts(out, "<g id=\"grid\">\n");
    for (int e = (int)a.lx0; e <= (int)a.lx1; e++) {
        double x = px(&a, pow(10, e));
        mlprof__sb_printf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x, PY0, x, PY1);
        mlprof__sb_printf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", x, PY1 + 18);
        put_decade(out, e, "");
        mlprof__sb_puts(out, "</text>\n");
        for (int m = 2; m < 10 && e < (int)a.lx1; m++) {
            double xm = px(&a, m * pow(10, e));
            mlprof__sb_printf(out, "<line class=\"minor\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", xm, PY0,
                              xm, PY1);
        }
    }
    for (int e = (int)a.ly0; e <= (int)a.ly1; e++) {
        double y = py(&a, pow(10, e));
        mlprof__sb_printf(out, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PX0, y, PX1, y);
        mlprof__sb_printf(out, "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", PX0 - 6, y + 4);
        put_decade(out, e, "FLOP/s");
        mlprof__sb_puts(out, "</text>\n");
        for (int m = 2; m < 10 && e < (int)a.ly1; m++) {
            double ym = py(&a, m * pow(10, e));
            mlprof__sb_printf(out, "<line class=\"minor\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PX0, ym,
                              PX1, ym);
        }
    }
    mlprof__sb_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
                      PX0, PY0, PX1 - PX0, PY1 - PY0);
    mlprof__sb_printf(out,
                      "<text class=\"axis\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">arithmetic intensity "
                      "(FLOPs per byte)</text>\n",
                      (PX0 + PX1) / 2, PY1 + 45);
    mlprof__sb_printf(out,
                      "<text class=\"axis\" transform=\"translate(20 %d) rotate(-90)\" text-anchor=\"middle\">"
                      "attained FLOP/s</text>\n</g>\n",
                      (PY0 + PY1) / 2);

    /* the roofs: each level's slope up to the highest peak, each peak from
     * the fastest level's ridge on */
    double ymin = pow(10, a.ly0), xmin = pow(10, a.lx0), xmax = pow(10, a.lx1);
    double angle = -atan(((PY1 - PY0) / (a.ly1 - a.ly0)) / ((PX1 - PX0) / (a.lx1 - a.lx0))) * 180 / M_PI;
    /* where the points will be, so that the slopes' labels keep off them */
    box *busy = mlprof__calloc(nplaced + CE_MAX_LEVELS + 1, sizeof *busy);
    size_t nbusy = 0;
    for (size_t i = 0; busy && i < n; i++) {
        op *p = &ops[i];
        if (p->why_not)
            continue;
        p->x = px(&a, p->ai);
        p->y = py(&a, p->attained);
        p->r = 3.5 + 22 * sqrt(p->share);
        busy[nbusy++] = (box){p->x - p->r - 2, p->y - p->r - 2, p->x + p->r + 2, p->y + p->r + 2};
    }
    mlprof__sb_puts(out, "<g id=\"roofs\">\n");
    for (size_t i = 0; i < nlv; i++) {
        double bw = lv[i]->s.max, x0 = fmax(xmin, ymin / bw), x1 = fmin(xmax, top / bw);
        if (!(x0 < x1) || !busy)
            continue;
        const char *col = level_color(lv[i]->what);
        mlprof__sb_printf(out,
                          "<line class=\"roof memory\" data-what=\"%s\" data-bandwidth=\"%.6g\" x1=\"%.2f\" "
                          "y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"><title>%s: ",
                          lv[i]->what, bw, px(&a, x0), py(&a, x0 * bw), px(&a, x1), py(&a, x1 * bw), col, lv[i]->what);
        an_put_si(out, bw, "B/s");
        mlprof__sb_printf(out, " (triad, median ");
        an_put_si(out, lv[i]->s.median, "B/s");
        mlprof__sb_printf(out, ", spread %.0f%%)</title></line>\n", 100 * spread_of(lv[i]));
        /* the label along the slope, where it covers no point and no other label */
        mlprof__sb tmp;
        mlprof__sb_init(&tmp);
        mlprof__sb_printf(&tmp, "%s ", lv[i]->what);
        an_put_si(&tmp, bw, "B/s");
        double w = 6.8 * (double)tmp.len, th = -angle * M_PI / 180;
        static const double fracs[] = {0.7, 0.55, 0.4, 0.25, 0.15, 0.85};
        double lx = 0;
        for (size_t k = 0; k < sizeof fracs / sizeof fracs[0]; k++) {
            lx = exp(log(x0) + fracs[k] * (log(x1) - log(x0)));
            double sx = px(&a, lx), sy = py(&a, lx * bw) - 5;
            box b = {sx, sy - w * sin(th) - 12, sx + w * cos(th), sy + 2};
            int clash = b.x1 > PX1 || b.y0 < PY0;
            for (size_t j = 0; j < nbusy && !clash; j++)
                clash = overlaps(&b, &busy[j]);
            if (!clash) {
                busy[nbusy++] = b;
                break;
            }
        }
        mlprof__sb_printf(out,
                          "<text class=\"rooflabel\" fill=\"%s\" transform=\"translate(%.1f %.1f) rotate(%.2f)\">",
                          col, px(&a, lx), py(&a, lx * bw) - 5, angle);
        put_xml(out, tmp.data ? tmp.data : "");
        mlprof__sb_puts(out, "</text>\n");
        mlprof__sb_free(&tmp);
    }
    const char *const *names = k_precs, *const *colors = k_prec_colors;
    for (int i = 0; i < NPRECS; i++) {
        if (!peaks[i])
            continue;
        double pk = peaks[i]->s.max, x0 = fmax(xmin, fast_bw > 0 ? pk / fast_bw : xmin);
        mlprof__sb_printf(out,
                          "<line class=\"roof compute\" data-what=\"%s\" data-peak=\"%.6g\" x1=\"%.2f\" y1=\"%.2f\" "
                          "x2=\"%d\" y2=\"%.2f\" stroke=\"%s\"><title>%s peak ",
                          names[i], pk, px(&a, x0), py(&a, pk), PX1, py(&a, pk), colors[i], names[i]);
        an_put_si(out, pk, "FLOP/s");
        mlprof__sb_printf(out, " (FMA, median ");
        an_put_si(out, peaks[i]->s.median, "FLOP/s");
        mlprof__sb_printf(out, ", spread %.0f%%)</title></line>\n", 100 * spread_of(peaks[i]));
        mlprof__sb_printf(out, "<text class=\"rooflabel\" fill=\"%s\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s peak ",
                          colors[i], PX1 - 6, py(&a, pk) - 6, names[i]);
        an_put_si(out, pk, "FLOP/s");
        mlprof__sb_puts(out, "</text>\n");
    }
    /* the one-thread peaks, dashed, for single-threaded operators */
    for (int i = 0; all && c->threads > 1 && !c->gpu && i < NPRECS; i++) {
        const ce_point *p1 = ce_peak(c, names[i], 0);
        if (!p1 || p1->threads != 1)
            continue;
        mlprof__sb_printf(out,
                          "<line class=\"roof one-thread\" data-what=\"%s\" x1=\"%d\" y1=\"%.2f\" x2=\"%d\" "
                          "y2=\"%.2f\" stroke=\"%s\" stroke-dasharray=\"6 4\" stroke-width=\"1.2\"><title>%s peak, "
                          "one thread: ",
                          names[i], PX0, py(&a, p1->s.max), PX1, py(&a, p1->s.max), colors[i], names[i]);
        an_put_si(out, p1->s.max, "FLOP/s");
        mlprof__sb_puts(out, "</title></line>\n");
    }
    mlprof__sb_puts(out, "</g>\n");

    /* the points, the largest drawn first (the small stay visible on top) */
    op **pts = mlprof__calloc(nplaced + 1, sizeof *pts);
    size_t np = 0;
    for (size_t i = 0; pts && i < n; i++) {
        op *p = &ops[i];
        if (p->why_not)
            continue;
        p->x = px(&a, p->ai);
        p->y = py(&a, p->attained);
        p->r = 3.5 + 22 * sqrt(p->share);
        pts[np++] = p;
    }
    mlprof__sb_puts(out, "<g id=\"points\">\n");
    for (size_t i = 0; i < np; i++)
        put_point(out, pts[i], all, c);
    mlprof__sb_puts(out, "</g>\n<g id=\"labels\">\n");
    /* the slopes' labels come after the points' boxes in busy */
    size_t unlabelled = pts && busy ? put_labels(out, pts, np, busy + nplaced, nbusy - nplaced) : 0;
    mlprof__sb_puts(out, "</g>\n");
    mlprof__free(pts);
    mlprof__free(busy);

    /* the legend, right of the plot */
    int lx = PX1 + 20, ly = PY0 + 10;
    if (c->gpu)
        mlprof__sb_printf(out, "<g id=\"legend\" class=\"legend\">\n<text x=\"%d\" y=\"%d\" font-weight=\"bold\">"
                               "ceilings (GPU)</text>\n", lx, ly);
    else
        mlprof__sb_printf(out, "<g id=\"legend\" class=\"legend\">\n<text x=\"%d\" y=\"%d\" font-weight=\"bold\">"
                               "ceilings (%d thread%s)</text>\n", lx, ly, all ? c->threads : 1,
                          all && c->threads != 1 ? "s" : "");
    ly += 20;
    for (int i = 0; i < NPRECS; i++) {
        if (!peaks[i])
            continue;
        mlprof__sb_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.2\"/>"
                               "<text x=\"%d\" y=\"%d\">%s FMA peak</text>\n",
                          lx, ly - 4, lx + 24, ly - 4, colors[i], lx + 30, ly, names[i]);
        ly += 18;
    }
    if (all && c->threads > 1 && !c->gpu) {
        mlprof__sb_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\" stroke-dasharray=\"6 4\"/>"
                               "<text x=\"%d\" y=\"%d\">peak on one thread</text>\n",
                          lx, ly - 4, lx + 24, ly - 4, lx + 30, ly);
        ly += 18;
    }
    for (size_t i = 0; i < nlv; i++) {
        mlprof__sb_printf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.2\"/>"
                               "<text x=\"%d\" y=\"%d\">%s bandwidth (triad)</text>\n",
                          lx, ly - 4, lx + 24, ly - 4, level_color(lv[i]->what), lx + 30, ly, lv[i]->what);
        ly += 18;
    }
    ly += 12;
    mlprof__sb_printf(out, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">operators</text>\n", lx, ly);
    ly += 20;
    mlprof__sb_printf(out, "<circle class=\"memory\" cx=\"%d\" cy=\"%d\" r=\"6\" fill-opacity=\".65\"/>"
                           "<text x=\"%d\" y=\"%d\">memory-bound</text>\n", lx + 12, ly - 4, lx + 30, ly);
    ly += 18;
    mlprof__sb_printf(out, "<circle class=\"compute\" cx=\"%d\" cy=\"%d\" r=\"6\" fill-opacity=\".65\"/>"
                           "<text x=\"%d\" y=\"%d\">compute-bound</text>\n", lx + 12, ly - 4, lx + 30, ly);
    ly += 18;
    mlprof__sb_printf(out, "<text x=\"%d\" y=\"%d\">area: share of time</text>\n", lx, ly);
    ly += 16;
    mlprof__sb_printf(out, "<text x=\"%d\" y=\"%d\">hover a point for details</text>\n", lx, ly);
    ly += 16;
    if (unlabelled) {
        mlprof__sb_printf(out, "<text x=\"%d\" y=\"%d\">%zu without a label (no room)</text>\n", lx, ly, unlabelled);
        ly += 16;
    }
    if (n > nplaced) {
        ly += 10;
        mlprof__sb_printf(out, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">not placed (%zu)</text>\n", lx, ly,
                          n - nplaced);
        ly += 16;
        for (size_t i = 0, k = 0; i < n && ly < SVG_H - 10; i++) {
            if (!ops[i].why_not)
                continue;
            mlprof__sb_printf(out, "<text x=\"%d\" y=\"%d\" font-size=\"11\">", lx, ly);
            if (++k == 12 && n - nplaced > 12) {
                mlprof__sb_printf(out, "and %zu more</text>\n", n - nplaced - 11);
                break;
            }
            char name[32];
            snprintf(name, sizeof name, "%s", ops[i].g->name);
            put_xml(out, name);
            mlprof__sb_printf(out, ": %s</text>\n", ops[i].why_not);
            ly += 14;
        }
    }
    mlprof__sb_puts(out, "</g>\n</svg>\n");
}

/* ------------------------------------------------------------- driver */

/* What all threads reach is at least what one reaches: a figure of all
 * threads measured below one thread's (another program had a core) is
 * raised to it. Returns how many were. */
static int raise_to_one_thread(ce_ceilings *c)
{
    int raised = 0;
    ce_point *lists[2] = {c->compute, c->levels};
    size_t counts[2] = {c->ncompute, c->nlevels};
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < counts[l]; i++) {
            ce_point *all = &lists[l][i];
            if (all->threads == 1)
                continue;
            for (size_t k = 0; k < counts[l]; k++) {
                const ce_point *one = &lists[l][k];
                if (one->threads == 1 && strcmp(one->what, all->what) == 0 && one->s.max > all->s.max) {
                    all->s.max = one->s.max;
                    all->s.median = fmax(all->s.median, one->s.median);
                    all->s.min = fmax(all->s.min, one->s.min);
                    raised++;
                }
            }
        }
    return raised;
}

int rf_roofline(an_trace *t, const an_options *o, const ce_ceilings *measured, const rf_options *ro,
                mlprof__sb *table, mlprof__sb *svg, mlprof__sb *notes, size_t *placed, size_t *on_gpu)
{
    ce_ceilings eff = *measured, *c = &eff;
    int raised = ro->one_thread || c->gpu ? 0 : raise_to_one_thread(c);
    an_group_row *rows;
    size_t n;
    *placed = 0;
    if (an_group_rows(t, o, &rows, &n, notes) != 0)
        return -1;
    op *ops = n ? mlprof__calloc(n, sizeof *ops) : NULL;
    if (n && !ops) {
        mlprof__free(rows);
        return -1;
    }
    int all = !ro->one_thread;
    const ce_point *lv[CE_MAX_LEVELS];
    size_t nlv = ce_levels(c, all, lv, CE_MAX_LEVELS);
    /* the operators around the launch of GPU work (kernels, copies, memsets):
     * on the CPU's roofline not placed (their CPU time is not what their
     * work took, and the ceilings are the CPU's); on a GPU's, placed with the
     * time of that work (an_gpu_op_times, as analyze's FLOPS) */
    size_t on_gpu_count = 0, cpu_count = 0;
    double time = 0;
    for (size_t i = 0; i < n; i++) {
        ops[i].g = &rows[i];
        int on = rows[i].gpu_calls > 0;
        on_gpu_count += on;
        ops[i].ns = c->gpu ? (on ? rows[i].gpu_ns : 0) : rows[i].total_ns;
        if (on && !c->gpu) {
            ops[i].why_not = "launched GPU work";
            continue;
        }
        if (on && c->gpu && rows[i].gpu_calls != rows[i].count) { /* FLOPs and time would cover different calls */
            ops[i].why_not = "some calls launched no GPU work";
            continue;
        }
        if (!on && c->gpu) {
            ops[i].ns = rows[i].total_ns;
            place(t, c, all, lv, nlv, &ops[i]); /* for its reason where it has no FLOPs or bytes either */
            if (!ops[i].why_not) {
                ops[i].why_not = "no GPU work";
                cpu_count++;
            }
            ops[i].ns = 0; /* not a GPU time: out of the order by time */
            continue;
        }
        place(t, c, all, lv, nlv, &ops[i]);
        if (!ops[i].why_not) {
            (*placed)++;
            time += (double)ops[i].ns;
        }
    }
    for (size_t i = 0; i < n; i++)
        ops[i].share = !ops[i].why_not && time > 0 ? (double)ops[i].ns / time : 0;
    mlprof__sort(ops, n, sizeof *ops, by_time);
    if (on_gpu)
        *on_gpu = on_gpu_count;
    if (!nlv && notes)
        mlprof__sb_printf(notes, "the ceilings have no %s bandwidth: no memory roof, every operator is held to its "
                                 "compute peak only\n", all ? "all-thread" : "one-thread");
    if (on_gpu_count && !c->gpu && notes)
        mlprof__sb_printf(notes, "%zu operator%s launched GPU kernels, copies or memsets: not placed (their CPU time is "
                                 "not their work's, and the ceilings are this CPU's; mlprof roofline --gpu-ceilings "
                                 "places them against a GPU's)\n",
                          on_gpu_count, on_gpu_count == 1 ? "" : "s");
    if (c->gpu && notes) {
        mlprof__sb_printf(notes, "GPU roofline: each operator's time is that of the GPU work (kernels, copies, "
                                 "memsets) launched inside it; %zu operator%s "
                                 "with FLOPs and bytes launched none and %s not placed\n",
                          cpu_count, cpu_count == 1 ? "" : "s", cpu_count == 1 ? "is" : "are");
        size_t over = 0;
        for (size_t i = 0; i < n; i++)
            over += !ops[i].why_not && !ops[i].memory_bound && ops[i].pct > 100;
        mlprof__sb_printf(notes, "the GPU's peaks are FMA peaks without tensor cores: matrix operators on tensor "
                                 "cores (fp16, bf16, tf32) can exceed them%s",
                          over ? "" : "\n");
        if (over)
            mlprof__sb_printf(notes, ", as %zu operator%s here\n", over, over == 1 ? " does" : "s do");
    }
    if (notes)
        ce_load_note(c, notes);
    if (raised && notes)
        mlprof__sb_printf(notes, "%d all-thread ceiling%s measured below the one-thread one (a loaded machine?): "
                                 "raised to it (mlprof ceilings --refresh measures again)\n", raised,
                          raised == 1 ? " was" : "s were");
    if (o->format == AN_JSON)
        format_json(table, t, c, ro, ops, n);
    else
        format_table(table, t, c, ro, ops, n, *placed, lv, nlv);
    if (svg && *placed)
        put_svg(svg, t, c, ro, ops, n, *placed, lv, nlv);
    mlprof__free(ops);
    mlprof__free(rows);
    return table->failed || (svg && svg->failed) ? -1 : 0;
}
