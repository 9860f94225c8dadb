/*
 * mem_report.c - what the memory profiler tells a person: the peak report in
 * the statistics (a table or JSON: peak used against peak allocated, the
 * largest blocks live at the peak, the rows per scope, what was never freed)
 * and the per-block CSV.
 */
#include <stdlib.h>
#include <string.h>

#include "mem_internal.h"

static void count_phrase(mlprof__sb *out, int *first, uint64_t n, const char *one, const char *many)
{
    if (!n)
        return;
    mlprof__sb_printf(out, "%s%llu %s", *first ? "" : ", ", (unsigned long long)n, n == 1 ? one : many);
    *first = 0;
}

uint64_t mlprof__mem_problems(mlprof__sb *out, const mem_device *d)
{
    int first = 1;
    count_phrase(out, &first, d->unknown_frees, "free of an address not allocated (before recording, "
                 "while paused, or dropped)", "frees of addresses not allocated (before recording, "
                 "while paused, or dropped)");
    count_phrase(out, &first, d->double_frees, "double free", "double frees");
    count_phrase(out, &first, d->unknown_releases, "release of an unknown segment",
                 "releases of unknown segments");
    count_phrase(out, &first, d->implicit_frees, "block allocated over without a free",
                 "blocks allocated over without a free");
    return d->unknown_frees + d->double_frees + d->unknown_releases + d->implicit_frees;
}

/* ------------------------------------------------------- the peak set */

static const mem_block *g_sort_blocks;

static int by_bytes_desc(const void *pa, const void *pb)
{
    const mem_block *a = &g_sort_blocks[*(const size_t *)pa];
    const mem_block *b = &g_sort_blocks[*(const size_t *)pb];
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->seq_alloc < b->seq_alloc ? -1 : a->seq_alloc > b->seq_alloc;
}

typedef struct block_set {
    size_t *idx; /* into mlprof__mem.blocks, largest first */
    size_t n;
    uint64_t bytes;
} block_set;

/* The blocks of a device live at operation seq (MEM_LIVE: live now). */
static block_set blocks_live_at(int device, uint64_t seq)
{
    block_set s = {NULL, 0, 0};
    const mem_state *M = &mlprof__mem;
    size_t n = 0;
    for (size_t i = 0; i < M->nblocks; i++) {
        const mem_block *b = &M->blocks[i];
        if (b->device == device &&
            (seq == MEM_LIVE ? b->seq_free == MEM_LIVE : mlprof__mem_live_at(b, seq)))
            n++;
    }
    if (!n || !(s.idx = mlprof__malloc(n * sizeof *s.idx)))
        return s;
    for (size_t i = 0; i < M->nblocks; i++) {
        const mem_block *b = &M->blocks[i];
        if (b->device == device &&
            (seq == MEM_LIVE ? b->seq_free == MEM_LIVE : mlprof__mem_live_at(b, seq))) {
            s.idx[s.n++] = i;
            s.bytes += b->bytes;
        }
    }
    g_sort_blocks = M->blocks;
    mlprof__sort(s.idx, s.n, sizeof *s.idx, by_bytes_desc);
    return s;
}

static int scope_cmp(const void *pa, const void *pb)
{
    const mem_scope_stat *a = *(const mem_scope_stat *const *)pa;
    const mem_scope_stat *b = *(const mem_scope_stat *const *)pb;
    if (a->at_peak != b->at_peak)
        return a->at_peak > b->at_peak ? -1 : 1;
    if (a->peak != b->peak)
        return a->peak > b->peak ? -1 : 1;
    if (a->bytes_total != b->bytes_total)
        return a->bytes_total > b->bytes_total ? -1 : 1;
    return strcmp(mlprof__mem_scope_name(a->scope), mlprof__mem_scope_name(b->scope));
}

/* The scope rows of a device, with at_peak and leaks filled, largest first
 * (held at the peak, then their own peak, then all they allocated). */
static mem_scope_stat **scope_rows(int device, const block_set *peak, const block_set *live,
                                   size_t *count)
{
    mem_state *M = &mlprof__mem;
    size_t n = 0;
    for (size_t i = 0; i < M->scopes.cap; i++) {
        mem_scope_stat *st = M->scopes.slots[i].key ? M->scopes.slots[i].value : NULL;
        if (st && st->device == device) {
            st->at_peak = st->leaked_blocks = st->leaked_bytes = 0;
            n++;
        }
    }
    *count = 0;
    mem_scope_stat **rows = n ? mlprof__malloc(n * sizeof *rows) : NULL;
    if (!rows)
        return NULL;
    for (size_t i = 0; i < M->scopes.cap; i++) {
        mem_scope_stat *st = M->scopes.slots[i].key ? M->scopes.slots[i].value : NULL;
        if (st && st->device == device)
            rows[(*count)++] = st;
    }
    /* the blocks of the two sets, added to their scope's row */
    for (int which = 0; which < 2; which++) {
        const block_set *set = which ? live : peak;
        for (size_t i = 0; i < set->n; i++) {
            const mem_block *b = &M->blocks[set->idx[i]];
            char key[sizeof(int) + sizeof b->scope];
            int dev = device;
            memcpy(key, &dev, sizeof dev);
            memcpy(key + sizeof dev, &b->scope, sizeof b->scope);
            mem_scope_stat *st = mlprof__map_get(&M->scopes, key, sizeof key);
            if (!st)
                continue;
            if (which) {
                st->leaked_blocks++;
                st->leaked_bytes += b->bytes;
            } else {
                st->at_peak += b->bytes;
            }
        }
    }
    mlprof__sort(rows, *count, sizeof *rows, scope_cmp);
    return rows;
}


/* ------------------------------------------------------------ the table */

static void pad(mlprof__sb *out, size_t start, size_t width, int right)
{
    size_t len = out->len - start;
    if (len >= width || out->failed)
        return;
    size_t n = width - len;
    for (size_t i = 0; i < n; i++)
        mlprof__sb_putc(out, ' ');
    if (right && !out->failed) {
        memmove(out->data + start + n, out->data + start, len);
        memset(out->data + start, ' ', n);
    }
}

static void cell_bytes(mlprof__sb *out, uint64_t bytes, size_t width)
{
    size_t start = out->len;
    mlprof__sb_bytes(out, bytes);
    pad(out, start, width, 1);
}

static void cell_text(mlprof__sb *out, const char *s, size_t width)
{
    size_t start = out->len;
    size_t n = strlen(s);
    if (n > width - 1) {
        mlprof__sb_put(out, s, width - 4);
        mlprof__sb_puts(out, "...");
    } else {
        mlprof__sb_puts(out, s);
    }
    pad(out, start, width, 0);
}

static void cell_time(mlprof__sb *out, uint64_t ns, uint64_t origin, size_t width)
{
    size_t start = out->len;
    mlprof__sb_duration(out, ns > origin ? ns - origin : 0);
    pad(out, start, width, 1);
}

static void cell_count(mlprof__sb *out, uint64_t n, size_t width)
{
    size_t start = out->len;
    mlprof__sb_u64(out, n);
    pad(out, start, width, 1);
}

static void table_blocks(mlprof__sb *out, const block_set *set, size_t top, uint64_t origin, int live)
{
    const mem_state *M = &mlprof__mem;
    mlprof__sb_puts(out, "         bytes  scope                     tag                   span                   allocated at");
    mlprof__sb_puts(out, live ? "\n" : "     freed at\n");
    for (size_t i = 0; i < set->n && i < top; i++) {
        const mem_block *b = &M->blocks[set->idx[i]];
        mlprof__sb_puts(out, "  ");
        cell_bytes(out, b->bytes, 12);
        mlprof__sb_puts(out, "  ");
        cell_text(out, mlprof__mem_scope_name(b->scope), 26);
        cell_text(out, b->tag ? b->tag : "-", 22);
        cell_text(out, b->op ? b->op : "-", 22);
        cell_time(out, b->t_alloc, origin, 13);
        if (!live) {
            if (b->seq_free == MEM_LIVE) {
                mlprof__sb_puts(out, "    (not freed)");
            } else {
                mlprof__sb_putc(out, ' ');
                cell_time(out, b->t_free, origin, 12);
            }
        }
        mlprof__sb_putc(out, '\n');
    }
}

static void table_device(mlprof__sb *out, int device, const mem_device *d, int final)
{
    uint64_t origin = mlprof__mem_origin();
    size_t top = (size_t)mlprof__g.cfg.memory_top;
    mlprof__sb_printf(out, "\nMemory: %s\n", d->name);
    mlprof__sb_puts(out, "  peak used       ");
    mlprof__sb_bytes(out, d->peak_used);
    if (d->peak_ns) {
        mlprof__sb_puts(out, " at ");
        mlprof__sb_duration(out, d->peak_ns > origin ? d->peak_ns - origin : 0);
        mlprof__sb_puts(out, " (with ");
        mlprof__sb_bytes(out, d->alloc_at_peak);
        mlprof__sb_puts(out, " allocated then)");
    }
    mlprof__sb_puts(out, "\n  peak allocated  ");
    mlprof__sb_bytes(out, d->peak_allocated);
    if (d->peak_alloc_ns) {
        mlprof__sb_puts(out, " at ");
        mlprof__sb_duration(out, d->peak_alloc_ns > origin ? d->peak_alloc_ns - origin : 0);
    }
    if (d->peak_allocated)
        mlprof__sb_printf(out, "\n  used/allocated  %.1f%% (peak used over peak allocated%s)",
                          100.0 * (double)d->peak_used / (double)d->peak_allocated,
                          d->pooled ? "" : "; no pool reserved memory, so they are equal");
    mlprof__sb_puts(out, "\n  now             ");
    mlprof__sb_bytes(out, d->used);
    mlprof__sb_printf(out, " used in %llu blocks, ", (unsigned long long)d->live_blocks);
    mlprof__sb_bytes(out, d->allocated);
    mlprof__sb_printf(out, " allocated\n  operations      %llu allocs, %llu frees, %llu reserves, %llu releases\n",
                      (unsigned long long)d->allocs, (unsigned long long)d->frees,
                      (unsigned long long)d->reserves, (unsigned long long)d->releases);
    size_t mark = out->len;
    mlprof__sb_puts(out, "  WARNING: ");
    if (mlprof__mem_problems(out, d))
        mlprof__sb_putc(out, '\n');
    else
        out->len = mark;
    block_set peak = blocks_live_at(device, d->peak_seq);
    block_set live = blocks_live_at(device, MEM_LIVE);
    if (peak.n) {
        mlprof__sb_printf(out, "\n  Live at the peak: %zu blocks, ", peak.n);
        mlprof__sb_bytes(out, peak.bytes);
        mlprof__sb_printf(out, "%s; the largest %zu:\n",
                          d->peak_set_incomplete ? " (incomplete: memory_history was exceeded)" : "",
                          peak.n < top ? peak.n : top);
        table_blocks(out, &peak, top, origin, 0);
    }
    size_t nrows;
    mem_scope_stat **rows = scope_rows(device, &peak, &live, &nrows);
    if (rows && nrows) {
        mlprof__sb_printf(out, "\n  By scope                          at peak     own peak  allocated in all    allocs     frees  %s\n",
                          final ? "never freed" : "  live now");
        for (size_t i = 0; i < nrows; i++) {
            const mem_scope_stat *st = rows[i];
            mlprof__sb_puts(out, "  ");
            cell_text(out, mlprof__mem_scope_name(st->scope), 30);
            cell_bytes(out, st->at_peak, 11);
            cell_bytes(out, st->peak, 13);
            cell_bytes(out, st->bytes_total, 18);
            cell_count(out, st->allocs, 10);
            cell_count(out, st->frees, 10);
            cell_bytes(out, st->leaked_bytes, 13);
            mlprof__sb_putc(out, '\n');
        }
    }
    mlprof__free(rows);
    if (live.n) {
        mlprof__sb_printf(out, "\n  %s: %zu blocks, ", final ? "Never freed (leaks)" : "Live now", live.n);
        mlprof__sb_bytes(out, live.bytes);
        mlprof__sb_printf(out, "; the largest %zu:\n", live.n < top ? live.n : top);
        table_blocks(out, &live, top, origin, 1);
    }
    mlprof__free(peak.idx);
    mlprof__free(live.idx);
}

/* ------------------------------------------------------------- the JSON */

static void json_block(mlprof__sb *out, const mem_block *b)
{
    const char *scope = mlprof__mem_scope_name(b->scope);
    mlprof__sb_printf(out, "{\"bytes\":%llu,\"address\":\"0x%llx\",\"scope\":",
                      (unsigned long long)b->bytes, (unsigned long long)b->addr);
    mlprof__sb_json_str(out, scope, strlen(scope));
    mlprof__sb_puts(out, ",\"tag\":");
    if (b->tag)
        mlprof__sb_json_str(out, b->tag, strlen(b->tag));
    else
        mlprof__sb_puts(out, "null");
    mlprof__sb_puts(out, ",\"span\":");
    if (b->op)
        mlprof__sb_json_str(out, b->op, strlen(b->op));
    else
        mlprof__sb_puts(out, "null");
    mlprof__sb_printf(out, ",\"tid\":%d,\"alloc_ns\":%llu,\"free_ns\":", (int)b->tid,
                      (unsigned long long)b->t_alloc);
    if (b->seq_free == MEM_LIVE)
        mlprof__sb_puts(out, "null}");
    else
        mlprof__sb_printf(out, "%llu}", (unsigned long long)b->t_free);
}

static void json_blocks(mlprof__sb *out, const char *key, const block_set *set, size_t top)
{
    mlprof__sb_printf(out, ",\"%s\":{\"blocks\":%zu,\"bytes\":%llu,\"largest\":[", key, set->n,
                      (unsigned long long)set->bytes);
    for (size_t i = 0; i < set->n && i < top; i++) {
        if (i)
            mlprof__sb_putc(out, ',');
        json_block(out, &mlprof__mem.blocks[set->idx[i]]);
    }
    mlprof__sb_puts(out, "]}");
}

static void json_device(mlprof__sb *out, int device, const mem_device *d, int final)
{
    size_t top = (size_t)mlprof__g.cfg.memory_top;
    mlprof__sb_printf(out, "{\"device\":%d,\"name\":", device);
    mlprof__sb_json_str(out, d->name, strlen(d->name));
    mlprof__sb_printf(out,
                      ",\"used\":%llu,\"peak_used\":%llu,\"peak_used_ns\":%llu,\"allocated_at_peak\":%llu"
                      ",\"allocated\":%llu,\"peak_allocated\":%llu,\"peak_allocated_ns\":%llu"
                      ",\"used_over_allocated\":",
                      (unsigned long long)d->used, (unsigned long long)d->peak_used,
                      (unsigned long long)d->peak_ns, (unsigned long long)d->alloc_at_peak,
                      (unsigned long long)d->allocated, (unsigned long long)d->peak_allocated,
                      (unsigned long long)d->peak_alloc_ns);
    mlprof__sb_double(out, d->peak_allocated ? (double)d->peak_used / (double)d->peak_allocated : 0);
    mlprof__sb_printf(out,
                      ",\"pooled\":%s,\"live_blocks\":%llu,\"allocs\":%llu,\"frees\":%llu,\"reserves\":%llu"
                      ",\"releases\":%llu,\"unknown_frees\":%llu,\"double_frees\":%llu"
                      ",\"unknown_releases\":%llu,\"implicit_frees\":%llu,\"peak_set_complete\":%s",
                      d->pooled ? "true" : "false", (unsigned long long)d->live_blocks,
                      (unsigned long long)d->allocs, (unsigned long long)d->frees,
                      (unsigned long long)d->reserves, (unsigned long long)d->releases,
                      (unsigned long long)d->unknown_frees, (unsigned long long)d->double_frees,
                      (unsigned long long)d->unknown_releases, (unsigned long long)d->implicit_frees,
                      d->peak_set_incomplete ? "false" : "true");
    block_set peak = blocks_live_at(device, d->peak_seq);
    block_set live = blocks_live_at(device, MEM_LIVE);
    json_blocks(out, "at_peak", &peak, top);
    json_blocks(out, final ? "never_freed" : "live", &live, top);
    size_t nrows;
    mem_scope_stat **rows = scope_rows(device, &peak, &live, &nrows);
    mlprof__sb_puts(out, ",\"scopes\":[");
    if (rows) {
        for (size_t i = 0; i < nrows; i++) {
            const mem_scope_stat *st = rows[i];
            const char *name = mlprof__mem_scope_name(st->scope);
            if (i)
                mlprof__sb_putc(out, ',');
            mlprof__sb_puts(out, "{\"scope\":");
            mlprof__sb_json_str(out, name, strlen(name));
            mlprof__sb_printf(out,
                              ",\"at_peak\":%llu,\"peak\":%llu,\"live\":%llu,\"bytes\":%llu,\"allocs\":%llu"
                              ",\"frees\":%llu,\"live_blocks\":%llu}",
                              (unsigned long long)st->at_peak, (unsigned long long)st->peak,
                              (unsigned long long)st->live, (unsigned long long)st->bytes_total,
                              (unsigned long long)st->allocs, (unsigned long long)st->frees,
                              (unsigned long long)st->leaked_blocks);
        }
    }
    mlprof__sb_puts(out, "]}");
    mlprof__free(rows);
    mlprof__free(peak.idx);
    mlprof__free(live.idx);
}

void mlprof__mem_report(mlprof__sb *out, int json, int final)
{
    if (json) {
        mlprof__sb_printf(out, "{\"final\":%s,\"origin_ns\":%llu,\"late_events\":%llu,\"history_dropped\":%llu,\"devices\":[",
                          final ? "true" : "false", (unsigned long long)mlprof__mem_origin(),
                          (unsigned long long)mlprof__mem.late,
                          (unsigned long long)mlprof__mem.history_dropped);
    }
    int first = 1;
    const mem_device *d;
    for (int i = -1; (d = mlprof__mem_next_used(&i)) != NULL;) {
        if (json) {
            if (!first)
                mlprof__sb_putc(out, ',');
            json_device(out, i, d, final);
        } else {
            table_device(out, i, d, final);
        }
        first = 0;
    }
    if (json) {
        mlprof__sb_puts(out, "]}");
        return;
    }
    if (mlprof__mem.late)
        mlprof__sb_printf(out, "\n  note: %llu memory operations arrived after later ones were accounted.\n",
                          (unsigned long long)mlprof__mem.late);
    if (mlprof__mem.history_dropped)
        mlprof__sb_printf(out, "\n  note: %llu freed blocks were not kept (memory_history); totals and "
                               "peaks are exact, the block lists may miss them.\n",
                          (unsigned long long)mlprof__mem.history_dropped);
}

/* ------------------------------------------------------------- the CSV */

static void csv_seconds(mlprof__sb *out, uint64_t ns, uint64_t origin)
{
    uint64_t rel = ns > origin ? ns - origin : 0;
    mlprof__sb_printf(out, "%llu.%09llu", (unsigned long long)(rel / 1000000000u),
                      (unsigned long long)(rel % 1000000000u));
}

int mlprof__mem_write_csv(const char *path)
{
    const mem_state *M = &mlprof__mem;
    uint64_t origin = mlprof__mem_origin();
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__sb_puts(&sb, "device,address,bytes,scope,tag,span,thread,from_s,to_s,lifetime_s,"
                         "trace_from_us,trace_to_us,end\n");
    for (size_t i = 0; i < M->nblocks; i++) {
        const mem_block *b = &M->blocks[i];
        const mem_device *d = M->devs[b->device];
        int live = b->seq_free == MEM_LIVE;
        mlprof__sb_csv(&sb, d->name);
        mlprof__sb_printf(&sb, ",0x%llx,%llu,", (unsigned long long)b->addr,
                          (unsigned long long)b->bytes);
        mlprof__sb_csv(&sb, b->scope && b->scope->full_len ? b->scope->full : "");
        mlprof__sb_putc(&sb, ',');
        mlprof__sb_csv(&sb, b->tag);
        mlprof__sb_putc(&sb, ',');
        mlprof__sb_csv(&sb, b->op);
        mlprof__sb_printf(&sb, ",%d,", (int)b->tid);
        csv_seconds(&sb, b->t_alloc, origin);
        mlprof__sb_putc(&sb, ',');
        if (!live)
            csv_seconds(&sb, b->t_free, origin);
        mlprof__sb_putc(&sb, ',');
        if (!live)
            csv_seconds(&sb, b->t_free, b->t_alloc);
        mlprof__sb_putc(&sb, ',');
        mlprof__sb_us(&sb, b->t_alloc);
        mlprof__sb_putc(&sb, ',');
        if (!live)
            mlprof__sb_us(&sb, b->t_free);
        mlprof__sb_puts(&sb, live ? ",live\n"
                             : b->implicit ? ",overwritten\n"
                             : b->taken ? ",taken over\n" /* by the program's report of it */
                                        : ",freed\n");
    }
    int rc = sb.failed ? mlprof__fail(MLPROF_ENOMEM, "memory CSV: out of memory")
                       : mlprof__write_file_atomic(path, sb.data ? sb.data : "", sb.len);
    mlprof__sb_free(&sb);
    return rc;
}

/* ---------------------------------------------------- the memory trace */

/* Bytes in MB as RAF gives them (1 MB = 2^20 bytes), six decimals: a byte shows. */
static void trace_mb(mlprof__sb *out, uint64_t bytes)
{
    mlprof__sb_printf(out, "%llu.%06llu", (unsigned long long)(bytes >> 20),
                      (unsigned long long)(((bytes & 0xfffff) * 1000000 + (1u << 19)) >> 20));
}

int mlprof__mem_trace_text(int device, mlprof__sb *out)
{
    static const char *const kinds[] = {"alloc", "free", "reserve", "release"};
    if (device < 0 || device > MLPROF_DEVICE_MAX)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_mem_trace: bad device %d (0 to %d)", device, MLPROF_DEVICE_MAX);
    const mem_device *d = mlprof__mem.devs[device];
    uint64_t total = d ? d->trace_total : 0, kept = d ? d->trace_n : 0;
    char name[32];
    if (d)
        snprintf(name, sizeof name, "%s", d->name);
    else if (device == MLPROF_DEVICE_CPU)
        snprintf(name, sizeof name, "cpu");
    else if (device <= MLPROF_DEVICE_CUDA(63))
        snprintf(name, sizeof name, "cuda:%d", device - MLPROF_DEVICE_CUDA(0));
    else
        snprintf(name, sizeof name, "device %d", device);
    mlprof__sb_printf(out, "# memory trace of %s: %llu operations since the start or the last reset", name,
                      (unsigned long long)total);
    if (total > kept)
        mlprof__sb_printf(out, "; the %llu earliest are left out (memory_history=%llu keeps the last ones)",
                          (unsigned long long)(total - kept), (unsigned long long)mlprof__g.cfg.memory_history);
    mlprof__sb_puts(out, "\ntime_ms,op,bytes,used_mb,allocated_mb,span,scope,tag\n");
    uint64_t origin = mlprof__mem_origin();
    for (size_t i = 0; i < kept; i++) {
        const mem_trace_op *t = mlprof__mem_trace_at(d, i);
        uint64_t rel = t->ns > origin ? t->ns - origin : 0;
        mlprof__sb_printf(out, "%llu.%06llu,%s,%llu,", (unsigned long long)(rel / 1000000u),
                          (unsigned long long)(rel % 1000000u), kinds[t->kind & 3], (unsigned long long)t->bytes);
        trace_mb(out, t->used);
        mlprof__sb_putc(out, ',');
        trace_mb(out, t->allocated);
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, t->op);
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, t->scope && t->scope->full_len ? t->scope->full : "");
        mlprof__sb_putc(out, ',');
        mlprof__sb_csv(out, t->tag);
        mlprof__sb_putc(out, '\n');
    }
    return out->failed ? mlprof__fail(MLPROF_ENOMEM, "mlprof_mem_trace: out of memory") : MLPROF_OK;
}
