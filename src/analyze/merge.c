/*
 * merge.c - several traces (processes, ranks, hosts) on one timeline. Each
 * input becomes process tracks of its own (pids that collide are renumbered),
 * named by its label; its times move by an offset chosen from the clocks:
 * none when every input says it was taken on the same host's monotonic clock
 * (mlprof's traces do), else the offsets given, else the first occurrence of
 * a sync marker they share, else the starts of the traces lined up (which is
 * said loudly). The method and every offset go into the output's otherData.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "merge.h"

static const char *const k_methods[] = {"shared clock", "given offsets", "sync marker", "trace starts"};

/* The first time the marker happens in t: an instant's time or a span's start. */
static int find_marker(const an_trace *t, const char *name, int64_t *ts)
{
    int found = 0;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (strcmp(e->name, name) == 0 && e->ph != 'U' && (!found || e->ts < *ts)) {
            *ts = e->ts;
            found = 1;
        }
    }
    return found;
}

static int same_clock(an_trace *const *in, size_t n)
{
    char host0[256], host[256], dom[64];
    if (!an_other_data_str(in[0], "host", host0, sizeof host0))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!an_other_data_str(in[i], "host", host, sizeof host) || strcmp(host, host0) != 0)
            return 0;
        if (!an_other_data_str(in[i], "clock_domain", dom, sizeof dom) || strcmp(dom, "CLOCK_MONOTONIC") != 0)
            return 0;
    }
    return 1;
}

int an_merge_offsets(an_trace *const *in, size_t n, const an_merge_options *o, int64_t *offset, int *method,
                     char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        offset[i] = 0;
    if (o->offsets) {
        *method = AN_ALIGN_GIVEN;
        for (size_t i = 0; i < n; i++)
            offset[i] = o->offsets[i];
        return 0;
    }
    if (o->sync_marker) {
        *method = AN_ALIGN_MARKER;
        int64_t ref = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t ts = 0;
            if (!find_marker(in[i], o->sync_marker, &ts)) {
                snprintf(err, errlen, "%s has no event named \"%s\" to align on", in[i]->path, o->sync_marker);
                return -1;
            }
            if (i == 0)
                ref = ts;
            offset[i] = ref - ts;
        }
        return 0;
    }
    if (o->same_clock || same_clock(in, n)) {
        *method = AN_ALIGN_SHARED;
        return 0;
    }
    *method = AN_ALIGN_STARTS;
    for (size_t i = 0; i < n; i++)
        offset[i] = in[0]->t_min - in[i]->t_min;
    return 0;
}

/* ------------------------------------------------------------- writing */

static void put_ts(mlprof__sb *out, const char *key, int64_t ns)
{
    mlprof__sb_puts(out, key);
    if (ns < 0) {
        mlprof__sb_putc(out, '-');
        ns = -ns;
    }
    mlprof__sb_us(out, (uint64_t)ns);
}

static void put_args(mlprof__sb *out, const an_trace *t, const an_event *e)
{
    if (!e->nargs)
        return;
    mlprof__sb_puts(out, ",\"args\":{");
    for (uint32_t k = 0; k < e->nargs; k++) {
        const an_arg *a = &t->args[e->args + k];
        if (k)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, a->key, strlen(a->key));
        mlprof__sb_putc(out, ':');
        if (a->type == AN_NUM && a->is_int)
            mlprof__sb_i64(out, a->inum);
        else if (a->type == AN_NUM)
            mlprof__sb_double(out, a->num);
        else if (a->type == AN_RAW || strcmp(a->str, "true") == 0 || strcmp(a->str, "false") == 0 ||
                 strcmp(a->str, "null") == 0)
            mlprof__sb_puts(out, a->str); /* compact JSON, or a literal */
        else
            mlprof__sb_json_str(out, a->str, strlen(a->str));
    }
    mlprof__sb_putc(out, '}');
}

static void begin_event(mlprof__sb *out, int *first)
{
    mlprof__sb_puts(out, *first ? "\n" : ",\n");
    *first = 0;
}

static void put_meta(mlprof__sb *out, int *first, const char *what, int64_t pid, int64_t tid, const char *key,
                     const char *sval, int64_t ival)
{
    begin_event(out, first);
    mlprof__sb_printf(out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"%s\":", what,
                      (long long)pid, (long long)tid, key);
    if (sval)
        mlprof__sb_json_str(out, sval, strlen(sval));
    else
        mlprof__sb_i64(out, ival);
    mlprof__sb_puts(out, "}}");
}

/* The pids of input i in the output: the same unless an earlier input used one. */
typedef struct pid_map {
    int64_t from, to;
    size_t input;
} pid_map;

static int64_t map_pid(pid_map *maps, size_t n, size_t input, int64_t pid)
{
    for (size_t k = 0; k < n; k++) {
        if (maps[k].input == input && maps[k].from == pid)
            return maps[k].to;
    }
    return pid;
}

int an_merge(an_trace *const *in, size_t n, const an_merge_options *o, mlprof__sb *out, int *method_out,
             char *err, size_t errlen)
{
    int64_t *offset = mlprof__calloc(n, sizeof *offset);
    if (!offset)
        return -1;
    int method;
    if (an_merge_offsets(in, n, o, offset, &method, err, errlen) != 0) {
        mlprof__free(offset);
        return -1;
    }
    /* every (input, pid) pair, given an output pid */
    size_t nmap = 0, cap = 64;
    pid_map *maps = mlprof__malloc(cap * sizeof *maps);
    int64_t next_free = 1000000;
    for (size_t i = 0; maps && i < n; i++) {
        for (size_t k = 0; k < in[i]->nev + in[i]->nnames; k++) {
            int64_t pid = k < in[i]->nev ? in[i]->ev[k].pid : in[i]->names[k - in[i]->nev].pid;
            int known = 0, taken = 0;
            for (size_t m = 0; m < nmap; m++) {
                known |= maps[m].input == i && maps[m].from == pid;
                taken |= maps[m].to == pid && maps[m].input != i;
            }
            if (known)
                continue;
            if (nmap == cap) {
                pid_map *p = mlprof__realloc(maps, 2 * cap * sizeof *maps);
                if (!p)
                    break;
                maps = p;
                cap *= 2;
            }
            maps[nmap++] = (pid_map){pid, taken ? next_free++ : pid, i};
        }
    }
    if (!maps) {
        mlprof__free(offset);
        return -1;
    }
    int first = 1;
    mlprof__sb_puts(out, "{\"traceEvents\":[");
    for (size_t i = 0; i < n; i++) {
        const an_trace *t = in[i];
        for (size_t k = 0; k < t->nev; k++) {
            const an_event *e = &t->ev[k];
            if (e->ph == 'U')
                continue;
            begin_event(out, &first);
            mlprof__sb_puts(out, "{\"name\":");
            mlprof__sb_json_str(out, e->name, strlen(e->name));
            if (e->cat[0]) {
                mlprof__sb_puts(out, ",\"cat\":");
                mlprof__sb_json_str(out, e->cat, strlen(e->cat));
            }
            mlprof__sb_printf(out, ",\"ph\":\"%c\",\"pid\":%lld,\"tid\":%lld", e->ph,
                              (long long)map_pid(maps, nmap, i, e->pid), (long long)e->tid);
            put_ts(out, ",\"ts\":", e->ts + offset[i]);
            if (e->ph == 'X')
                put_ts(out, ",\"dur\":", e->dur);
            if (strchr("stfben", e->ph)) /* ids stay unique per input */
                mlprof__sb_printf(out, ",\"id\":\"%zu:%llu\"", i, (unsigned long long)e->id);
            if (e->ph == 'f' && e->flow_enclosing)
                mlprof__sb_puts(out, ",\"bp\":\"e\"");
            if (e->ph == 'i')
                mlprof__sb_printf(out, ",\"s\":\"%c\"", e->scope ? e->scope : 't');
            put_args(out, t, e);
            mlprof__sb_putc(out, '}');
        }
        /* the tracks' names: each process says which input it came from */
        for (size_t m = 0; m < nmap; m++) {
            if (maps[m].input != i)
                continue;
            const char *pname = an_process_name(t, maps[m].from);
            mlprof__sb label;
            mlprof__sb_init(&label);
            mlprof__sb_puts(&label, o->labels && o->labels[i] ? o->labels[i] : t->path);
            if (pname)
                mlprof__sb_printf(&label, ": %s", pname);
            else
                mlprof__sb_printf(&label, ": pid %lld", (long long)maps[m].from);
            put_meta(out, &first, "process_name", maps[m].to, 0, "name", label.data, 0);
            put_meta(out, &first, "process_sort_index", maps[m].to, 0, "sort_index", NULL, (int64_t)(i * 1000 + m));
            mlprof__sb_free(&label);
        }
        for (size_t k = 0; k < t->nnames; k++) {
            if (t->names[k].tid >= 0 || t->names[k].tid < -1)
                put_meta(out, &first, "thread_name", map_pid(maps, nmap, i, t->names[k].pid), t->names[k].tid,
                         "name", t->names[k].name, 0);
        }
    }
    mlprof__sb_printf(out, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"mlprof_version\":\"%s\","
                           "\"merge\":{\"method\":\"%s\"",
                      MLPROF_VERSION_STRING, k_methods[method]);
    if (method == AN_ALIGN_MARKER) {
        mlprof__sb_puts(out, ",\"sync_marker\":");
        mlprof__sb_json_str(out, o->sync_marker, strlen(o->sync_marker));
    }
    mlprof__sb_puts(out, ",\"inputs\":[");
    for (size_t i = 0; i < n; i++) {
        char host[256];
        mlprof__sb_puts(out, i ? ",{\"path\":" : "{\"path\":");
        mlprof__sb_json_str(out, in[i]->path, strlen(in[i]->path));
        mlprof__sb_puts(out, ",\"label\":");
        const char *label = o->labels && o->labels[i] ? o->labels[i] : in[i]->path;
        mlprof__sb_json_str(out, label, strlen(label));
        if (an_other_data_str(in[i], "host", host, sizeof host)) {
            mlprof__sb_puts(out, ",\"host\":");
            mlprof__sb_json_str(out, host, strlen(host));
        }
        mlprof__sb_printf(out, ",\"offset_ns\":%lld,\"events\":%zu,\"pids\":{", (long long)offset[i], in[i]->nev);
        int f = 1;
        for (size_t m = 0; m < nmap; m++) {
            if (maps[m].input != i)
                continue;
            mlprof__sb_printf(out, "%s\"%lld\":%lld", f ? "" : ",", (long long)maps[m].from, (long long)maps[m].to);
            f = 0;
        }
        mlprof__sb_puts(out, "}}");
    }
    mlprof__sb_puts(out, "]}}\n}\n");
    *method_out = method;
    mlprof__free(maps);
    mlprof__free(offset);
    return out->failed ? -1 : 0;
}
