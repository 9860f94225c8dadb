/*
 * merge.c - several traces (processes, ranks, hosts) on one timeline. Each
 * input becomes process tracks of its own (pids that collide are renumbered),
 * named by its label; the ids that link its events (correlation ids, External
 * ids, flow and async ids) are moved apart from every other input's, so that
 * a kernel stays linked to its own rank's operator. Its times move by an
 * offset chosen from the clocks: the offsets given, else the first occurrence
 * of a sync marker they share, else none when every input says it was taken
 * on the same host's monotonic clock (mlprof's traces do), else the real-time
 * clock when every input says it is on it (PyTorch's profiler stamps with the
 * system clock, since its baseTimeNanoseconds when it gives one), else the
 * starts of the traces lined up (which is said loudly). The method, every
 * offset and each input's distributedInfo and deviceProperties go into the
 * output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "merge.h"

static const char *const k_methods[] = {"shared clock", "given offsets", "sync marker", "trace starts",
                                        "system clock", "clock sync"};

/* Argument keys whose values link events to each other: PyTorch's (Kineto's)
 * and mlprof's. */
static const char *const k_link_keys[] = {"correlation", "correlation_id", "correlationId", "runtime_correlation",
                                          "External id", "Ev Idx", "Python id", "Python parent id",
                                          "Sequence number", "Record function id", NULL};

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

/* The times of t are the host's real-time clock: mlprof's say so in
 * clock_domain, PyTorch's profiler (Kineto) always stamps with it and says
 * who wrote the file in its metadata (schemaVersion, traceName,
 * baseTimeNanoseconds, distributedInfo, deviceProperties). */
static int on_system_clock(const an_trace *t)
{
    char dom[64];
    if (an_other_data_str(t, "clock_domain", dom, sizeof dom))
        return strcmp(dom, "CLOCK_REALTIME") == 0;
    return t->system_clock;
}

/* ------------------------------------------------- measured clock sync */

/* A number member of a compact JSON object, or def. */
static double num_member(const char *obj, const char *key, double def)
{
    size_t len;
    const char *v = an_json_member(obj, key, &len);
    if (!v)
        return def;
    char *end;
    double d = strtod(v, &end);
    return end == v ? def : d;
}

int an_clock_sync_read(const an_trace *t, an_clock_sync *cs)
{
    memset(cs, 0, sizeof *cs);
    size_t len;
    const char *o = an_json_member(t->other_data, "clock_sync", &len);
    if (!o || *o != '{')
        return 0;
    const char *m = an_json_member(o, "method", &len);
    if (m && *m == '"' && len >= 2)
        snprintf(cs->method, sizeof cs->method, "%.*s", (int)(len - 2), m + 1);
    const char *samples = an_json_member(o, "samples", &len);
    if (samples && samples[0] == '[' && samples[1] == '{')
        cs->at_ns = (int64_t)num_member(samples + 1, "at_ns", 0);
    /* offsets and bounds are whole nanoseconds: read exactly, not through a double */
    const char *v = an_json_member(o, "offset_ns", &len);
    if (!v)
        return 0;
    cs->offset_ns = strtoll(v, NULL, 10);
    cs->drift_ppb = num_member(o, "drift_ppb", 0);
    v = an_json_member(o, "bound_ns", &len);
    cs->bound_ns = v ? strtoll(v, NULL, 10) : -1;
    cs->reference_rank = (long long)num_member(o, "reference_rank", -1);
    cs->has = 1;
    return 1;
}

int64_t an_clock_sync_shift(const an_clock_sync *cs, int64_t t)
{
    if (!cs->has)
        return 0;
    /* reference(t) = t + offset + drift_ppb * (t - at) / 1e9, to the nearest ns */
    return cs->offset_ns + (int64_t)llround(cs->drift_ppb * (double)(t - cs->at_ns) / 1e9);
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
    /* measured by the ranks themselves (mlprof's MPI clock sync): before
     * anything assumed, since a clock said to be shared was checked there */
    size_t synced = 0;
    an_clock_sync cs;
    for (size_t i = 0; i < n; i++)
        synced += (size_t)an_clock_sync_read(in[i], &cs);
    if (n && synced == n && !o->same_clock) {
        *method = AN_ALIGN_CLOCK_SYNC;
        for (size_t i = 0; i < n; i++) {
            an_clock_sync_read(in[i], &cs);
            offset[i] = cs.offset_ns;
        }
        return 0;
    }
    if (o->same_clock || same_clock(in, n)) {
        *method = AN_ALIGN_SHARED;
        return 0;
    }
    int system = 1;
    for (size_t i = 0; i < n; i++)
        system &= on_system_clock(in[i]);
    if (system) { /* times since each one's base: the same clock once the bases are added */
        *method = AN_ALIGN_SYSTEM;
        for (size_t i = 0; i < n; i++)
            offset[i] = in[i]->base_time_ns - in[0]->base_time_ns;
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

/* The link keys of one input, by their interned pointers. */
typedef struct link_keys {
    const char *key[sizeof k_link_keys / sizeof *k_link_keys];
    size_t n;
} link_keys;

static void find_link_keys(const an_trace *t, link_keys *lk)
{
    lk->n = 0;
    for (const char *const *k = k_link_keys; *k; k++) {
        const char *p = mlprof__map_get(&t->strings, *k, strlen(*k));
        if (p)
            lk->key[lk->n++] = p;
    }
}

static int is_link_key(const link_keys *lk, const char *key)
{
    for (size_t k = 0; k < lk->n; k++) {
        if (lk->key[k] == key)
            return 1;
    }
    return 0;
}

/* How far apart the inputs' link ids are put: a power of ten above every one
 * of them, so that input i's id v becomes v + i * step (v - i * step when v is
 * negative), apart from every other input's and still readable. 0 when that
 * does not fit in 64 bits (the offending key in *key). */
static int64_t id_step(an_trace *const *in, size_t n, const char **key)
{
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        link_keys lk;
        find_link_keys(in[i], &lk);
        for (size_t a = 0; lk.n && a < in[i]->nargs; a++) {
            const an_arg *g = &in[i]->args[a];
            if (g->type != AN_NUM || !is_link_key(&lk, g->key) || (!g->is_int && !isfinite(g->num)))
                continue; /* NaN and infinities are written as null */
            double mag = g->is_int ? fabs((double)g->inum) : fabs(g->num);
            uint64_t m = g->is_int ? (g->inum < 0 ? 0 - (uint64_t)g->inum : (uint64_t)g->inum)
                         : mag < 9.2e18 ? (uint64_t)mag : UINT64_MAX;
            if (m > max) {
                max = m;
                *key = g->key;
            }
        }
    }
    uint64_t step = 10;
    while (step <= max) {
        if (step > UINT64_MAX / 10)
            return 0;
        step *= 10;
    }
    if (max > INT64_MAX || step > INT64_MAX || (uint64_t)(n - 1) > (INT64_MAX - max) / step)
        return 0;
    return (int64_t)step;
}

static void put_args(mlprof__sb *out, const an_trace *t, const an_event *e, const link_keys *lk, size_t input,
                     int64_t step)
{
    if (!e->nargs)
        return;
    int64_t shift = (int64_t)input * step;
    mlprof__sb_puts(out, ",\"args\":{");
    for (uint32_t k = 0; k < e->nargs; k++) {
        const an_arg *a = &t->args[e->args + k];
        int link = input && is_link_key(lk, a->key);
        if (k)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, a->key, strlen(a->key));
        mlprof__sb_putc(out, ':');
        if (a->type == AN_NUM && a->is_int)
            mlprof__sb_i64(out, link ? a->inum + (a->inum < 0 ? -shift : shift) : a->inum);
        else if (a->type == AN_NUM)
            mlprof__sb_double(out, link ? a->num + (double)(a->num < 0 ? -shift : shift) : a->num);
        else if (a->type == AN_RAW || strcmp(a->str, "true") == 0 || strcmp(a->str, "false") == 0 ||
                 strcmp(a->str, "null") == 0)
            mlprof__sb_puts(out, a->str); /* compact JSON, or a literal */
        else if (link) { /* a string id: the input's number before it, as flow ids have */
            mlprof__sb label;
            mlprof__sb_init(&label);
            mlprof__sb_printf(&label, "%zu:%s", input, a->str);
            mlprof__sb_json_str(out, label.data ? label.data : "", label.len);
            out->failed |= label.failed;
            mlprof__sb_free(&label);
        } else
            mlprof__sb_json_str(out, a->str, strlen(a->str));
    }
    mlprof__sb_putc(out, '}');
}

/* A flow's or an async event's ids, kept apart per input as "INPUT:ID";
 * but an MPI message's flow (category "mpi") links two ranks' traces, so
 * its id, the same in both, is kept as it is (src/hook/mpi.c). */
static void put_ids(mlprof__sb *out, const an_event *e, size_t input)
{
    unsigned long long id = (unsigned long long)e->id;
    if (strchr("stf", e->ph) && strcmp(e->cat, "mpi") == 0 && !(e->id_form & (AN_ID2_LOCAL | AN_ID2_GLOBAL)))
        mlprof__sb_printf(out, ",\"id\":%llu", id);
    else if (strchr("stfben", e->ph) && e->id_form & (AN_ID2_LOCAL | AN_ID2_GLOBAL))
        mlprof__sb_printf(out, ",\"id2\":{\"%s\":\"%zu:%llu\"}", e->id_form & AN_ID2_LOCAL ? "local" : "global",
                          input, id);
    else if (strchr("stfben", e->ph))
        mlprof__sb_printf(out, ",\"id\":\"%zu:%llu\"", input, id);
    if (e->ph == 'X' && e->id_form & AN_ID_BIND) {
        mlprof__sb_printf(out, ",\"bind_id\":\"%zu:%llu\"", input, id);
        if (e->id_form & AN_FLOW_IN)
            mlprof__sb_puts(out, ",\"flow_in\":true");
        if (e->id_form & AN_FLOW_OUT)
            mlprof__sb_puts(out, ",\"flow_out\":true");
    }
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

/* order[i]: input i's place when the inputs with a rank come first, by rank,
 * then the others as given. */
static void rank_order(an_trace *const *in, size_t n, size_t *order)
{
    for (size_t i = 0; i < n; i++) {
        long long ri = an_trace_rank(in[i]);
        size_t before = 0;
        for (size_t j = 0; j < n; j++) {
            long long rj = an_trace_rank(in[j]);
            if (j == i)
                continue;
            if (ri >= 0 ? rj >= 0 && (rj < ri || (rj == ri && j < i)) : rj >= 0 || j < i)
                before++;
        }
        order[i] = before;
    }
}

/* distributedInfo.world_size of a trace, or -1. */
static long long world_size(const an_trace *t)
{
    size_t len;
    const char *v = an_json_member(t->distributed_info, "world_size", &len);
    return v ? strtoll(v, NULL, 10) : -1;
}

long long an_merge_missing_ranks(an_trace *const *in, size_t n, mlprof__sb *list)
{
    long long world = -1;
    for (size_t i = 0; i < n; i++) {
        long long w = world_size(in[i]);
        if (w > world)
            world = w;
    }
    if (world <= 0 || world > 1000000)
        return -1;
    size_t missing = 0;
    for (long long r = 0; r < world; r++) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = an_trace_rank(in[i]) == r;
        if (!found)
            mlprof__sb_printf(list, "%s%lld", missing++ ? "," : "", r);
    }
    return world;
}

/* The label of input i: the one given, else its rank, else its path. */
static const char *input_label(const an_trace *t, const an_merge_options *o, size_t i, char *buf, size_t len)
{
    if (o->labels && o->labels[i])
        return o->labels[i];
    long long rank = an_trace_rank(t);
    if (rank < 0)
        return t->path;
    snprintf(buf, len, "rank %lld", rank);
    return buf;
}

/* One member "key":RAW (RAW: compact JSON as read), when raw is not NULL. */
static void put_raw(mlprof__sb *out, const char *sep, const char *key, const char *raw)
{
    if (!raw)
        return;
    mlprof__sb_printf(out, "%s\"%s\":", sep, key);
    mlprof__sb_puts(out, raw);
}

/* otherData.merge: the method, the id step and each input's offset, pids,
 * rank and metadata. */
static void put_merge_data(mlprof__sb *out, an_trace *const *in, size_t n, const an_merge_options *o,
                           const int64_t *offset, const an_clock_sync *cs, int method, int64_t step,
                           const pid_map *maps, size_t nmap)
{
    mlprof__sb_printf(out, "\"merge\":{\"method\":\"%s\"", k_methods[method]);
    if (method == AN_ALIGN_CLOCK_SYNC) { /* how well the ranks' clocks were aligned: the worst bound */
        int64_t worst = 0;
        int known = 1;
        for (size_t i = 0; i < n; i++) {
            known &= cs[i].bound_ns >= 0;
            if (cs[i].bound_ns > worst)
                worst = cs[i].bound_ns;
        }
        mlprof__sb_puts(out, ",\"clock_sync\":{\"method\":");
        mlprof__sb_json_str(out, cs[0].method, strlen(cs[0].method));
        if (cs[0].reference_rank >= 0)
            mlprof__sb_printf(out, ",\"reference_rank\":%lld", cs[0].reference_rank);
        if (known)
            mlprof__sb_printf(out, ",\"worst_bound_ns\":%lld", (long long)worst);
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb missing;
    mlprof__sb_init(&missing);
    long long world = an_merge_missing_ranks(in, n, &missing);
    if (world > 0) {
        mlprof__sb_printf(out, ",\"world_size\":%lld,\"missing_ranks\":[", world);
        mlprof__sb_put(out, missing.data ? missing.data : "", missing.len);
        mlprof__sb_putc(out, ']');
        out->failed |= missing.failed;
    }
    mlprof__sb_free(&missing);
    if (method == AN_ALIGN_MARKER) {
        mlprof__sb_puts(out, ",\"sync_marker\":");
        mlprof__sb_json_str(out, o->sync_marker, strlen(o->sync_marker));
    }
    mlprof__sb_printf(out, ",\"id_step\":%lld,\"inputs\":[", (long long)step);
    for (size_t i = 0; i < n; i++) {
        char host[256], buf[64];
        mlprof__sb_puts(out, i ? ",{\"path\":" : "{\"path\":");
        mlprof__sb_json_str(out, in[i]->path, strlen(in[i]->path));
        mlprof__sb_puts(out, ",\"label\":");
        const char *label = input_label(in[i], o, i, buf, sizeof buf);
        mlprof__sb_json_str(out, label, strlen(label));
        if (an_other_data_str(in[i], "host", host, sizeof host)) {
            mlprof__sb_puts(out, ",\"host\":");
            mlprof__sb_json_str(out, host, strlen(host));
        }
        if (an_trace_rank(in[i]) >= 0)
            mlprof__sb_printf(out, ",\"rank\":%lld", an_trace_rank(in[i]));
        mlprof__sb_printf(out, ",\"offset_ns\":%lld,\"id_offset\":%lld,\"events\":%zu", (long long)offset[i],
                          (long long)i * (long long)step, in[i]->nev);
        if (cs[i].has) {
            mlprof__sb_puts(out, ",\"drift_ppb\":");
            mlprof__sb_double(out, cs[i].drift_ppb);
            mlprof__sb_printf(out, ",\"clock_sync_at_ns\":%lld", (long long)cs[i].at_ns);
            if (cs[i].bound_ns >= 0)
                mlprof__sb_printf(out, ",\"bound_ns\":%lld", (long long)cs[i].bound_ns);
        }
        if (in[i]->base_time_ns)
            mlprof__sb_printf(out, ",\"baseTimeNanoseconds\":%lld", (long long)in[i]->base_time_ns);
        put_raw(out, ",", "distributedInfo", in[i]->distributed_info);
        put_raw(out, ",", "deviceProperties", in[i]->device_props);
        mlprof__sb_puts(out, ",\"pids\":{");
        int f = 1;
        for (size_t m = 0; m < nmap; m++) {
            if (maps[m].input != i)
                continue;
            mlprof__sb_printf(out, "%s\"%lld\":%lld", f ? "" : ",", (long long)maps[m].from, (long long)maps[m].to);
            f = 0;
        }
        mlprof__sb_puts(out, "}}");
    }
    mlprof__sb_puts(out, "]}");
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
    an_clock_sync *cs = mlprof__calloc(n, sizeof *cs);
    size_t *order = mlprof__calloc(n, sizeof *order);
    if (!cs || !order) {
        mlprof__free(cs);
        mlprof__free(order);
        mlprof__free(offset);
        return -1;
    }
    for (size_t i = 0; i < n && method == AN_ALIGN_CLOCK_SYNC; i++)
        an_clock_sync_read(in[i], &cs[i]);
    rank_order(in, n, order);
    const char *big_key = "";
    int64_t step = id_step(in, n, &big_key);
    if (!step) {
        snprintf(err, errlen, "the ids under \"%s\" are too large to keep %zu inputs' apart in 64 bits", big_key,
                 n);
        mlprof__free(cs);
        mlprof__free(order);
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
        mlprof__free(cs);
        mlprof__free(order);
        mlprof__free(offset);
        return -1;
    }
    int first = 1;
    mlprof__sb_puts(out, "{\"traceEvents\":[");
    for (size_t i = 0; i < n; i++) {
        const an_trace *t = in[i];
        link_keys lk;
        find_link_keys(t, &lk);
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
            if (cs[i].has) { /* the drift too: each end moves by the shift at its own time */
                int64_t b = e->ts + an_clock_sync_shift(&cs[i], e->ts);
                put_ts(out, ",\"ts\":", b);
                if (e->ph == 'X')
                    put_ts(out, ",\"dur\":", e->ts + e->dur + an_clock_sync_shift(&cs[i], e->ts + e->dur) - b);
            } else {
                put_ts(out, ",\"ts\":", e->ts + offset[i]);
                if (e->ph == 'X')
                    put_ts(out, ",\"dur\":", e->dur);
            }
            put_ids(out, e, i);
            if (e->ph == 'f' && e->flow_enclosing)
                mlprof__sb_puts(out, ",\"bp\":\"e\"");
            if (e->ph == 'i')
                mlprof__sb_printf(out, ",\"s\":\"%c\"", e->scope ? e->scope : 't');
            put_args(out, t, e, &lk, i, step);
            mlprof__sb_putc(out, '}');
        }
        /* the tracks' names: each process says which input it came from */
        char buf[64];
        const char *label_i = input_label(t, o, i, buf, sizeof buf);
        for (size_t m = 0; m < nmap; m++) {
            if (maps[m].input != i)
                continue;
            const char *pname = an_process_name(t, maps[m].from);
            mlprof__sb label;
            mlprof__sb_init(&label);
            mlprof__sb_puts(&label, label_i);
            if (pname)
                mlprof__sb_printf(&label, ": %s", pname);
            else
                mlprof__sb_printf(&label, ": pid %lld", (long long)maps[m].from);
            put_meta(out, &first, "process_name", maps[m].to, 0, "name", label.data, 0);
            /* the ranks in rank order, whatever the order of the inputs */
            put_meta(out, &first, "process_sort_index", maps[m].to, 0, "sort_index", NULL,
                     (int64_t)order[i] * 1000000 + (int64_t)m);
            mlprof__sb_free(&label);
        }
        for (size_t k = 0; k < t->nnames; k++) {
            if (t->names[k].tid != AN_PROCESS_TID)
                put_meta(out, &first, "thread_name", map_pid(maps, nmap, i, t->names[k].pid), t->names[k].tid,
                         "name", t->names[k].name, 0);
        }
    }
    mlprof__sb_printf(out, "\n],\n\"displayTimeUnit\":\"ms\",\n");
    /* where PyTorch's tools look for them: the first input's, whose times these are */
    const an_trace *t0 = in[0];
    if (t0->base_time_ns)
        mlprof__sb_printf(out, "\"baseTimeNanoseconds\":%lld,\n", (long long)t0->base_time_ns);
    for (size_t i = 0; i < n; i++) {
        if (in[i]->distributed_info) {
            put_raw(out, "", "distributedInfo", in[i]->distributed_info);
            mlprof__sb_puts(out, ",\n");
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (in[i]->device_props) {
            put_raw(out, "", "deviceProperties", in[i]->device_props);
            mlprof__sb_puts(out, ",\n");
            break;
        }
    }
    mlprof__sb_printf(out, "\"otherData\":{\"mlprof_version\":\"%s\",", MLPROF_VERSION_STRING);
    /* still one host's monotonic clock, unshifted: said as its inputs say it, so
     * that this output merges with (or is compared to) other traces of that host
     * on the shared clock, as mlprof run's per-rank files are */
    char host[256];
    if (method == AN_ALIGN_SHARED && same_clock(in, n) && an_other_data_str(in[0], "host", host, sizeof host)) {
        mlprof__sb_puts(out, "\"host\":");
        mlprof__sb_json_str(out, host, strlen(host));
        mlprof__sb_puts(out, ",\"clock_domain\":\"CLOCK_MONOTONIC\",");
    }
    put_merge_data(out, in, n, o, offset, cs, method, step, maps, nmap);
    mlprof__sb_puts(out, "}\n}\n");
    *method_out = method;
    mlprof__free(cs);
    mlprof__free(order);
    mlprof__free(maps);
    mlprof__free(offset);
    return out->failed ? -1 : 0;
}
