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
 * output. It streams: a first pass keeps a small summary of each input
 * (an_merge_input), from which all of that is decided; a second reads each
 * input again and writes its events to the output, flushed as it grows, so
 * that memory holds one input at a time.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/gz.h"
#include "analyze.h"
#include "flame.h"
#include "json.h"
#include "merge.h"
#include "pfexport.h"

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

static int same_clock(const an_merge_input *in, size_t n)
{
    char host0[256], host[256], dom[64];
    if (!an_other_data_str(&in[0].view, "host", host0, sizeof host0))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!an_other_data_str(&in[i].view, "host", host, sizeof host) || strcmp(host, host0) != 0)
            return 0;
        if (!an_other_data_str(&in[i].view, "clock_domain", dom, sizeof dom) ||
            strcmp(dom, "CLOCK_MONOTONIC") != 0)
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

/* ------------------------------------------------ the first pass: summaries */

static char *dup_or_null(const char *s, int *oom)
{
    if (!s)
        return NULL;
    char *d = mlprof__strdup(s);
    *oom |= !d;
    return d;
}

void an_merge_input_free(an_merge_input *s)
{
    mlprof__free((char *)s->view.path);
    mlprof__free((char *)s->view.other_data);
    mlprof__free((char *)s->view.distributed_info);
    mlprof__free((char *)s->view.device_props);
    for (size_t k = 0; s->pid_names && k < s->npids; k++)
        mlprof__free(s->pid_names[k]);
    mlprof__free(s->pid_names);
    mlprof__free(s->pid_gpu);
    mlprof__free(s->pids);
    mlprof__free(s->devices);
    mlprof__free(s->named_tids);
    mlprof__free(s->tid_to);
    memset(s, 0, sizeof *s);
}

/* Sets of numbers: a map whose keys are the 8 bytes of each. */
static int num_add(mlprof__map *m, int64_t v)
{
    mlprof__map_entry *e = mlprof__map_slot(m, (const char *)&v, sizeof v);
    if (!e)
        return -1;
    e->value = (void *)1;
    return 0;
}

static int num_has(const mlprof__map *m, int64_t v)
{
    return mlprof__map_get(m, (const char *)&v, sizeof v) != NULL;
}

/* Adds v to the list a[0..*n) unless it is there. */
static int list_add(int64_t **a, size_t *n, size_t *cap, int64_t v)
{
    for (size_t k = *n; k-- > 0;) {
        if ((*a)[k] == v)
            return 0;
    }
    int64_t *p = mlprof__grow(*a, cap, *n, sizeof *p, 8);
    if (!p)
        return -1;
    *a = p;
    p[(*n)++] = v;
    return 0;
}

/* Calls fn with the compact JSON of each element of the deviceProperties
 * array props (as a trace keeps it); stops at what is not such an array.
 * Returns 0, or fn's -1. */
static int each_device(const char *props, int (*fn)(void *ctx, const char *obj), void *ctx)
{
    an_input in;
    if (!props || an_input_open_mem(&in, "deviceProperties", props, strlen(props)) != 0)
        return 0;
    mlprof__sb raw;
    mlprof__sb_init(&raw);
    int rc = 0, more = an_json_open(&in, '[', "'['");
    while (rc == 0 && more == 1) {
        mlprof__sb_reset(&raw);
        if (an_json_skip(&in, &raw) != 0 || raw.failed || !raw.data)
            break;
        rc = fn(ctx, raw.data);
        more = an_json_next(&in, ']');
    }
    rc = raw.failed ? -1 : rc;
    mlprof__sb_free(&raw);
    an_input_close(&in);
    return rc;
}

/* A device's "id" (an integer), into *id; 0 when it has none. */
static int device_id(const char *obj, int64_t *id)
{
    size_t len;
    const char *v = an_json_member(obj, "id", &len);
    if (!v || !len)
        return 0;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end != v + len)
        return 0;
    *id = n;
    return 1;
}

typedef struct id_list {
    int64_t *v;
    size_t n, cap;
} id_list;

static int collect_device_id(void *ctx, const char *obj)
{
    id_list *l = ctx;
    int64_t id;
    return device_id(obj, &id) ? list_add(&l->v, &l->n, &l->cap, id) : 0;
}

/* The ids deviceProperties lists (held by *l, freed by the caller). */
static int listed_devices(const char *props, id_list *l)
{
    memset(l, 0, sizeof *l);
    return each_device(props, collect_device_id, l);
}

/* The devices of s: the numbers its events' "device" arguments give, and
 * which of its pids are GPUs' tracks. Kineto gives a GPU's events the
 * device's number as pid (and as "device"), and names a process for every
 * device it lists, with no events on those it did not use: a pid is a GPU's
 * when its events say that device, or when it has no events and
 * deviceProperties lists its number. with_events: how many of s's pids
 * (the first) have events. */
static int summarize_devices(const an_trace *t, an_merge_input *s, size_t with_events)
{
    const char *dk = mlprof__map_get(&t->strings, "device", 6);
    size_t cap = 0, hint = 0;
    for (size_t k = 0; dk && k < t->nev; k++) {
        const an_event *e = &t->ev[k];
        for (uint32_t a = 0; a < e->nargs; a++) {
            const an_arg *g = &t->args[e->args + a];
            if (g->key != dk || g->type != AN_NUM || !g->is_int || g->inum < 0)
                continue;
            if (list_add(&s->devices, &s->ndevices, &cap, g->inum) != 0)
                return -1;
            if (g->inum != e->pid)
                break;
            if (hint >= s->npids || s->pids[hint] != e->pid) {
                for (hint = 0; hint < s->npids && s->pids[hint] != e->pid;)
                    hint++;
            }
            if (hint < s->npids)
                s->pid_gpu[hint] = 1;
            break;
        }
    }
    id_list listed;
    if (listed_devices(t->device_props, &listed) != 0) {
        mlprof__free(listed.v);
        return -1;
    }
    for (size_t p = with_events; p < s->npids; p++) {
        for (size_t k = 0; k < listed.n && !s->pid_gpu[p]; k++)
            s->pid_gpu[p] = listed.v[k] == s->pids[p];
    }
    mlprof__free(listed.v);
    return 0;
}

/* The tids of t given as strings ("PyTorch Profiler"), each given the
 * smallest number from 0 that none of t's own tids is: kept apart from
 * every other thread, and a number that a double holds (the reader's are
 * near -2^62, which JavaScript's numbers round together). */
static int summarize_named_tids(const an_trace *t, an_merge_input *s)
{
    size_t cap = 0;
    for (size_t k = 0; k < t->nev + t->nnames; k++) {
        int64_t tid = k < t->nev ? t->ev[k].tid : t->names[k - t->nev].tid;
        if (tid != AN_PROCESS_TID && an_is_named_id(tid) && list_add(&s->named_tids, &s->ntids, &cap, tid) != 0)
            return -1;
    }
    if (!s->ntids)
        return 0;
    s->tid_to = mlprof__calloc(s->ntids, sizeof *s->tid_to);
    mlprof__map own;
    mlprof__map_init(&own);
    int rc = s->tid_to ? 0 : -1;
    int64_t last = 0;
    for (size_t k = 0; rc == 0 && k < t->nev + t->nnames; k++) {
        int64_t tid = k < t->nev ? t->ev[k].tid : t->names[k - t->nev].tid;
        if (!an_is_named_id(tid) && (k == 0 || tid != last)) /* events come in runs of one thread */
            rc = num_add(&own, tid);
        last = tid;
    }
    int64_t next = 0;
    for (size_t k = 0; rc == 0 && k < s->ntids; k++) {
        while (num_has(&own, next))
            next++;
        s->tid_to[k] = next++;
    }
    mlprof__map_free(&own);
    return rc;
}

/* The largest magnitude of t's numeric link arguments, and which key (its
 * place in k_link_keys) holds it: -1 when none. */
static uint64_t max_link_id(const an_trace *t, int *key)
{
    const char *lk[sizeof k_link_keys / sizeof *k_link_keys];
    int idx[sizeof k_link_keys / sizeof *k_link_keys];
    size_t nlk = 0;
    for (int k = 0; k_link_keys[k]; k++) {
        const char *p = mlprof__map_get(&t->strings, k_link_keys[k], strlen(k_link_keys[k]));
        if (p) {
            lk[nlk] = p;
            idx[nlk++] = k;
        }
    }
    uint64_t max = 0;
    *key = -1;
    for (size_t a = 0; nlk && a < t->nargs; a++) {
        const an_arg *g = &t->args[a];
        if (g->type != AN_NUM || (!g->is_int && !isfinite(g->num)))
            continue; /* NaN and infinities are written as null */
        size_t k = 0;
        while (k < nlk && lk[k] != g->key) /* interned: one pointer per key */
            k++;
        if (k == nlk)
            continue;
        double mag = g->is_int ? fabs((double)g->inum) : fabs(g->num);
        uint64_t m = g->is_int ? (g->inum < 0 ? 0 - (uint64_t)g->inum : (uint64_t)g->inum)
                     : mag < 9.2e18 ? (uint64_t)mag : UINT64_MAX;
        if (m > max) {
            max = m;
            *key = idx[k];
        }
    }
    return max;
}

/* Adds pid to s's list unless it is there. */
static int add_pid(an_merge_input *s, size_t *cap, int64_t pid)
{
    for (size_t k = s->npids; k-- > 0;) {
        if (s->pids[k] == pid)
            return 0;
    }
    if (s->npids == *cap) {
        size_t nc = *cap ? 2 * *cap : 8;
        int64_t *p = mlprof__realloc(s->pids, nc * sizeof *p);
        if (!p)
            return -1;
        s->pids = p;
        *cap = nc;
    }
    s->pids[s->npids++] = pid;
    return 0;
}

int an_merge_summarize(const an_trace *t, const an_merge_options *o, an_merge_input *s)
{
    memset(s, 0, sizeof *s);
    int oom = 0;
    s->view.path = dup_or_null(t->path ? t->path : "", &oom);
    s->view.other_data = dup_or_null(t->other_data, &oom);
    s->view.distributed_info = dup_or_null(t->distributed_info, &oom);
    s->view.device_props = dup_or_null(t->device_props, &oom);
    s->view.base_time_ns = t->base_time_ns;
    s->view.system_clock = t->system_clock;
    s->view.t_min = t->t_min;
    s->view.t_max = t->t_max;
    s->view.writer = t->writer ? t->writer : "";
    s->view.format = t->format;
    s->nev = t->nev;
    s->rank = an_trace_rank(t);
    if (o && o->sync_marker)
        s->has_marker = find_marker(t, o->sync_marker, &s->marker_ts);
    s->max_link = max_link_id(t, &s->max_link_key);
    /* the pids in the order the output numbers them: events, then names */
    size_t cap = 0, with_events = 0;
    int64_t last = 0;
    int have_last = 0;
    for (size_t k = 0; !oom && k < t->nev + t->nnames; k++) {
        int64_t pid = k < t->nev ? t->ev[k].pid : t->names[k - t->nev].pid;
        if (k == t->nev)
            with_events = s->npids;
        if (have_last && pid == last)
            continue;
        oom |= add_pid(s, &cap, pid) != 0;
        last = pid;
        have_last = 1;
    }
    if (!t->nnames)
        with_events = s->npids;
    if (!oom && s->npids) {
        s->pid_names = mlprof__calloc(s->npids, sizeof *s->pid_names);
        s->pid_gpu = mlprof__calloc(s->npids, sizeof *s->pid_gpu);
        oom |= !s->pid_names || !s->pid_gpu;
    }
    for (size_t k = 0; !oom && k < s->npids; k++) {
        if (an_is_named_id(s->pids[k])) { /* its string: the process's name unless metadata renamed it */
            const char *name = an_process_name(t, s->pids[k]);
            s->pid_names[k] = mlprof__strdup(name ? name : "");
            oom |= !s->pid_names[k];
        }
    }
    if (!oom)
        oom |= summarize_devices(t, s, with_events) != 0 || summarize_named_tids(t, s) != 0;
    if (oom) {
        an_merge_input_free(s);
        return -1;
    }
    return 0;
}

/* An mlprof trace on its host's monotonic clock: its host into buf. */
static const char *monotonic_host(const an_trace *t, char *buf, size_t len)
{
    char dom[64];
    if (!an_other_data_str(t, "clock_domain", dom, sizeof dom) || strcmp(dom, "CLOCK_MONOTONIC") != 0)
        return NULL;
    return an_other_data_str(t, "host", buf, len);
}

long an_merge_input_sync(const an_merge_input *in, size_t n, size_t i, an_clock_sync *cs)
{
    if (an_clock_sync_read(&in[i].view, cs))
        return (long)i;
    char host[256], other[256];
    if (in[i].rank >= 0 || !monotonic_host(&in[i].view, host, sizeof host))
        return -1;
    long best = -1;
    for (size_t j = 0; j < n; j++) {
        if (j == i || in[j].rank < 0 || (best >= 0 && in[j].rank >= in[best].rank))
            continue;
        if (monotonic_host(&in[j].view, other, sizeof other) && strcmp(other, host) == 0 &&
            an_clock_sync_read(&in[j].view, cs))
            best = (long)j;
    }
    if (best >= 0)
        an_clock_sync_read(&in[best].view, cs);
    else
        memset(cs, 0, sizeof *cs);
    return best;
}

int an_merge_offsets(const an_merge_input *in, size_t n, const an_merge_options *o, int64_t *offset, int *method,
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
            if (!in[i].has_marker) {
                snprintf(err, errlen, "%s has no event named \"%s\" to align on", in[i].view.path, o->sync_marker);
                return -1;
            }
            if (i == 0)
                ref = in[i].marker_ts;
            offset[i] = ref - in[i].marker_ts;
        }
        return 0;
    }
    /* measured by the ranks themselves (mlprof's MPI clock sync): before
     * anything assumed, since a clock said to be shared was checked there */
    size_t synced = 0, ranked = 0, ranked_synced = 0;
    an_clock_sync cs;
    for (size_t i = 0; i < n; i++) {
        int has = an_clock_sync_read(&in[i].view, &cs);
        synced += (size_t)has;
        ranked += in[i].rank >= 0;
        ranked_synced += (size_t)has && in[i].rank >= 0;
    }
    /* every input, or every rank: a trace without a rank beside them (the
     * launcher's, when mlprof run wraps torchrun or mpirun) takes the clock
     * sync of a rank on its host, else its start is lined up with theirs */
    if (n && (synced == n || (ranked && ranked_synced == ranked)) && !o->same_clock) {
        *method = AN_ALIGN_CLOCK_SYNC;
        int64_t first = INT64_MAX;
        size_t unaligned = 0;
        for (size_t i = 0; i < n; i++) {
            if (an_merge_input_sync(in, n, i, &cs) < 0) {
                unaligned++;
                continue;
            }
            offset[i] = cs.offset_ns;
            int64_t start = in[i].view.t_min + an_clock_sync_shift(&cs, in[i].view.t_min);
            if (start < first)
                first = start;
        }
        for (size_t i = 0; unaligned && i < n; i++) {
            if (an_merge_input_sync(in, n, i, &cs) < 0)
                offset[i] = first - in[i].view.t_min;
        }
        return 0;
    }
    if (o->same_clock || same_clock(in, n)) {
        *method = AN_ALIGN_SHARED;
        return 0;
    }
    int system = 1;
    for (size_t i = 0; i < n; i++)
        system &= on_system_clock(&in[i].view);
    if (system) { /* times since each one's base: the same clock once the bases are added */
        *method = AN_ALIGN_SYSTEM;
        for (size_t i = 0; i < n; i++)
            offset[i] = in[i].view.base_time_ns - in[0].view.base_time_ns;
        return 0;
    }
    *method = AN_ALIGN_STARTS;
    for (size_t i = 0; i < n; i++)
        offset[i] = in[0].view.t_min - in[i].view.t_min;
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
static int64_t id_step(const an_merge_input *in, size_t n, const char **key)
{
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i].max_link > max) {
            max = in[i].max_link;
            *key = k_link_keys[in[i].max_link_key];
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

/* The strings of one trace that hold a NUL ("k\u0000ey", read from an
 * escape): the reader interns them whole, with their length, but a C string
 * of them ends at the NUL. By address, to be found from the pointers events
 * keep. */
typedef struct nul_str {
    const char *s;
    size_t len;
} nul_str;

typedef struct str_lens {
    nul_str *v;
    size_t n;
} str_lens;

static int by_address(const void *pa, const void *pb)
{
    uintptr_t a = (uintptr_t)((const nul_str *)pa)->s, b = (uintptr_t)((const nul_str *)pb)->s;
    return a < b ? -1 : a > b;
}

static int find_nul_strings(const an_trace *t, str_lens *l)
{
    memset(l, 0, sizeof *l);
    size_t cap = 0;
    for (size_t k = 0; k < t->strings.cap; k++) {
        const mlprof__map_entry *e = &t->strings.slots[k];
        if (!e->key || strlen(e->key) == e->key_len)
            continue;
        nul_str *v = mlprof__grow(l->v, &cap, l->n, sizeof *v, 8);
        if (!v)
            return -1;
        l->v = v;
        l->v[l->n++] = (nul_str){e->key, e->key_len};
    }
    mlprof__sort(l->v, l->n, sizeof *l->v, by_address);
    return 0;
}

/* The length of s, one of the trace's strings: past any NUL it holds. */
static size_t str_len(const str_lens *l, const char *s)
{
    if (l->n) {
        nul_str key = {s, 0};
        const nul_str *f = bsearch(&key, l->v, l->n, sizeof *l->v, by_address);
        if (f)
            return f->len;
    }
    return strlen(s);
}

static void put_str(mlprof__sb *out, const str_lens *l, const char *s)
{
    mlprof__sb_json_str(out, s, str_len(l, s));
}

/* The pids of input i in the output: the same unless an earlier input used
 * one; one given as a string is given a number too. */
typedef struct pid_map {
    int64_t from, to;
    size_t input;
    int folded; /* the process of an earlier input (an_merge_options.same_as): named there */
} pid_map;

/* The output pid of pid in maps[0..n) (one input's, which are contiguous);
 * *hint: the last one found, tried first, since events come in runs of one
 * process. */
static int64_t map_pid(const pid_map *maps, size_t n, size_t *hint, int64_t pid)
{
    if (*hint < n && maps[*hint].from == pid)
        return maps[*hint].to;
    for (size_t k = 0; k < n; k++) {
        if (maps[k].from == pid) {
            *hint = k;
            return maps[k].to;
        }
    }
    return pid;
}

/* The output tid of one of input s's tids: its own number, or for one given
 * as a string the one the summary chose. */
static int64_t map_tid(const an_merge_input *s, int64_t tid)
{
    if (tid == AN_PROCESS_TID || !an_is_named_id(tid))
        return tid;
    for (size_t k = 0; k < s->ntids; k++) {
        if (s->named_tids[k] == tid)
            return s->tid_to[k];
    }
    return tid;
}

/* What writing one input needs: where its pids, devices and tids go, and
 * the lengths of its strings that hold a NUL. */
typedef struct input_out {
    const an_trace *t;
    size_t input;
    const an_merge_input *s;
    const pid_map *maps;
    size_t nm, hint;
    const int64_t *dev_to;  /* the output number of each of s->devices */
    const char *dev_key;    /* t's "device" (interned), or NULL */
    str_lens lens;
} input_out;

/* The output number of device d of the input (d when it has no such device). */
static int64_t map_device(const input_out *w, int64_t d)
{
    for (size_t k = 0; k < w->s->ndevices; k++) {
        if (w->s->devices[k] == d)
            return w->dev_to[k];
    }
    return d;
}

static void put_args(mlprof__sb *out, const input_out *w, const an_event *e, const link_keys *lk, int64_t step)
{
    if (!e->nargs)
        return;
    const an_trace *t = w->t;
    size_t input = w->input;
    int64_t shift = (int64_t)input * step;
    mlprof__sb_puts(out, ",\"args\":{");
    for (uint32_t k = 0; k < e->nargs; k++) {
        const an_arg *a = &t->args[e->args + k];
        int link = input && is_link_key(lk, a->key);
        if (k)
            mlprof__sb_putc(out, ',');
        put_str(out, &w->lens, a->key);
        mlprof__sb_putc(out, ':');
        size_t len = a->type == AN_NUM ? 0 : str_len(&w->lens, a->str);
        if (a->type == AN_NUM && a->is_int && a->key == w->dev_key) /* the device, as deviceProperties numbers it */
            mlprof__sb_i64(out, map_device(w, a->inum));
        else if (a->type == AN_NUM && a->is_int)
            mlprof__sb_i64(out, link ? a->inum + (a->inum < 0 ? -shift : shift) : a->inum);
        else if (a->type == AN_NUM)
            mlprof__sb_double(out, link ? a->num + (double)(a->num < 0 ? -shift : shift) : a->num);
        else if (a->type == AN_RAW)
            mlprof__sb_puts(out, a->str); /* compact JSON: an array, object or literal */
        else if (link) { /* a string id: the input's number before it, as flow ids have */
            mlprof__sb label;
            mlprof__sb_init(&label);
            mlprof__sb_printf(&label, "%zu:", input);
            mlprof__sb_put(&label, a->str, len);
            mlprof__sb_json_str(out, label.data ? label.data : "", label.len);
            out->failed |= label.failed;
            mlprof__sb_free(&label);
        } else
            mlprof__sb_json_str(out, a->str, len);
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

/* A metadata event: its argument key is the string sval (slen bytes), or
 * the number ival when sval is NULL. */
static void put_meta(mlprof__sb *out, int *first, const char *what, int64_t pid, int64_t tid, const char *key,
                     const char *sval, size_t slen, int64_t ival)
{
    begin_event(out, first);
    mlprof__sb_printf(out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%lld,\"args\":{\"%s\":", what,
                      (long long)pid, (long long)tid, key);
    if (sval)
        mlprof__sb_json_str(out, sval, slen);
    else
        mlprof__sb_i64(out, ival);
    mlprof__sb_puts(out, "}}");
}

/* Whether a process's name (len bytes) carries its label already, as a
 * trace merged before names its processes: "LABEL: ...", or, where the label
 * is the one made of the input's rank ("rank N"), any rank's ("rank M: ...":
 * a merged trace of several ranks keeps each one's). */
static int labelled(const char *name, size_t len, const char *label, int rank_label)
{
    size_t n = strlen(label);
    if (len > n + 1 && memcmp(name, label, n) == 0 && name[n] == ':' && name[n + 1] == ' ')
        return 1;
    if (!rank_label || len < 8 || memcmp(name, "rank ", 5) != 0)
        return 0;
    size_t k = 5;
    while (k < len && name[k] >= '0' && name[k] <= '9')
        k++;
    return k > 5 && k + 1 < len && name[k] == ':' && name[k + 1] == ' ';
}

/* The names of one input's tracks: each process says which input it came
 * from, a GPU's also which of that input's GPUs it is; its threads keep
 * their names. sort: its first process's sort index (the ranks in rank
 * order, whatever the order of the inputs). */
static void put_names(mlprof__sb *out, input_out *io, const char *label_i, int rank_label, int64_t sort,
                      int *first)
{
    const an_trace *t = io->t;
    for (size_t m = 0; m < io->nm; m++) {
        int64_t from = io->maps[m].from, to = io->maps[m].to;
        if (io->maps[m].folded)
            continue; /* named by the input its process was first in */
        const char *pname = an_process_name(t, from);
        mlprof__sb label;
        mlprof__sb_init(&label);
        int already = pname && labelled(pname, str_len(&io->lens, pname), label_i, rank_label);
        if (!already) {
            mlprof__sb_puts(&label, label_i);
            mlprof__sb_puts(&label, ": ");
        }
        if (already) { /* merged before: kept as it is */
            mlprof__sb_put(&label, pname, str_len(&io->lens, pname));
        } else if (io->s->pid_gpu[m]) { /* Kineto's names every device's process as the program */
            char gpu[32];
            snprintf(gpu, sizeof gpu, "GPU %lld", (long long)from);
            mlprof__sb_puts(&label, gpu);
            if (pname && strcmp(pname, gpu) != 0) {
                mlprof__sb_puts(&label, " (");
                mlprof__sb_put(&label, pname, str_len(&io->lens, pname));
                mlprof__sb_putc(&label, ')');
            }
        } else if (pname) {
            mlprof__sb_put(&label, pname, str_len(&io->lens, pname));
        } else {
            mlprof__sb_printf(&label, "pid %lld", (long long)from);
        }
        put_meta(out, first, "process_name", to, 0, "name", label.data ? label.data : "", label.len, 0);
        out->failed |= label.failed;
        mlprof__sb_free(&label);
        put_meta(out, first, "process_sort_index", to, 0, "sort_index", NULL, 0, sort + (int64_t)m);
    }
    size_t hint = 0;
    for (size_t k = 0; k < t->nnames; k++) {
        const an_name *nm = &t->names[k];
        if (nm->tid != AN_PROCESS_TID)
            put_meta(out, first, "thread_name", map_pid(io->maps, io->nm, &hint, nm->pid), map_tid(io->s, nm->tid),
                     "name", nm->name, str_len(&io->lens, nm->name), 0);
    }
}

/* order[i]: input i's place when the inputs with a rank come first, by rank,
 * then the others as given. */
static void rank_order(const an_merge_input *in, size_t n, size_t *order)
{
    for (size_t i = 0; i < n; i++) {
        long long ri = in[i].rank;
        size_t before = 0;
        for (size_t j = 0; j < n; j++) {
            long long rj = in[j].rank;
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

long long an_merge_missing_ranks(const an_merge_input *in, size_t n, mlprof__sb *list)
{
    long long world = -1;
    for (size_t i = 0; i < n; i++) {
        long long w = world_size(&in[i].view);
        if (w > world)
            world = w;
    }
    if (world <= 0 || world > 1000000)
        return -1;
    size_t missing = 0;
    for (long long r = 0; r < world; r++) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = in[i].rank == r;
        if (!found)
            mlprof__sb_printf(list, "%s%lld", missing++ ? "," : "", r);
    }
    return world;
}

int an_merge_jobs_differ(const an_merge_input *in, size_t n, mlprof__sb *desc)
{
    char(*buf)[128] = mlprof__calloc(n ? n : 1, sizeof *buf);
    const char **job = mlprof__calloc(n ? n : 1, sizeof *job), **what = mlprof__calloc(n ? n : 1, sizeof *what);
    long long *world = mlprof__calloc(n ? n : 1, sizeof *world);
    int differ = 0;
    if (buf && job && what && world) {
        for (size_t i = 0; i < n; i++) {
            job[i] = an_dist_info_job_id(in[i].view.distributed_info, buf[i], sizeof buf[i]);
            world[i] = an_dist_info_world_size(in[i].view.distributed_info);
            what[i] = in[i].view.path;
        }
        differ = an_jobs_differ(job, world, what, n, desc);
    }
    mlprof__free(buf);
    mlprof__free(job);
    mlprof__free(what);
    mlprof__free(world);
    return differ;
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

/* The numbers the output gives the inputs' devices: per input (dev_at[i]
 * on), one for each of its devices, and all of them as a set. */
typedef struct numbering {
    int64_t *dev_to;
    mlprof__map used;
} numbering;

/* Picks the next number from *next up that is in neither set. */
static int64_t fresh(int64_t *next, const mlprof__map *a, const mlprof__map *b)
{
    while (num_has(a, *next) || num_has(b, *next))
        ++*next;
    return (*next)++;
}

/* Numbers every input's pids and devices for the output, in the order the
 * inputs are given: a number is kept unless an earlier input's output has
 * it; then, as a pid given as a string (which has no number that a double
 * holds), it takes a fresh one that no input has: pids from 1000000 up,
 * devices from 0 up (a device's number names its GPU, as "GPU 8", and finds
 * its deviceProperties). An input that is a later part of an earlier one's
 * process (same_as, or NULL) takes that input's numbers for the pids and
 * devices both have. maps: every (input, pid) pair, one input's together
 * (map_at[i] on); nb: the devices'. */
static int number_inputs(const an_merge_input *in, size_t n, const size_t *same_as, numbering *nb, pid_map **maps,
                         size_t *map_at, size_t *dev_at)
{
    mlprof__map raw_pids, out_pids, raw_devs;
    mlprof__map_init(&raw_pids);
    mlprof__map_init(&out_pids);
    mlprof__map_init(&raw_devs);
    size_t npid = 0, ndev = 0;
    for (size_t i = 0; i < n; i++) {
        npid += in[i].npids;
        ndev += in[i].ndevices;
    }
    *maps = mlprof__calloc(npid ? npid : 1, sizeof **maps);
    nb->dev_to = mlprof__calloc(ndev ? ndev : 1, sizeof *nb->dev_to);
    int rc = *maps && nb->dev_to ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        for (size_t k = 0; rc == 0 && k < in[i].npids; k++) {
            if (!an_is_named_id(in[i].pids[k]))
                rc = num_add(&raw_pids, in[i].pids[k]);
        }
        for (size_t k = 0; rc == 0 && k < in[i].ndevices; k++)
            rc = num_add(&raw_devs, in[i].devices[k]);
        id_list listed; /* those it lists but has no events on keep their number where it is free */
        memset(&listed, 0, sizeof listed);
        rc = rc == 0 ? listed_devices(in[i].view.device_props, &listed) : rc;
        for (size_t k = 0; rc == 0 && k < listed.n; k++)
            rc = num_add(&raw_devs, listed.v[k]);
        mlprof__free(listed.v);
    }
    int64_t next_pid = 1000000, next_dev = 0;
    size_t nmap = 0, nd = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t j = same_as && same_as[i] && same_as[i] - 1 < i ? same_as[i] - 1 : i; /* the process's first */
        map_at[i] = nmap;
        for (size_t k = 0; rc == 0 && k < in[i].npids; k++) {
            int64_t pid = in[i].pids[k], to = pid;
            size_t m = map_at[j];
            while (j != i && m < map_at[j + 1] && (*maps)[m].from != pid)
                m++;
            if (j != i && m < map_at[j + 1]) { /* the same process as in input j */
                (*maps)[nmap++] = (pid_map){pid, (*maps)[m].to, i, 1};
                continue;
            }
            if (an_is_named_id(pid) || num_has(&out_pids, pid))
                to = fresh(&next_pid, &raw_pids, &out_pids);
            rc = num_add(&out_pids, to);
            (*maps)[nmap++] = (pid_map){pid, to, i, 0};
        }
        dev_at[i] = nd;
        for (size_t k = 0; rc == 0 && k < in[i].ndevices; k++) {
            int64_t d = in[i].devices[k], to = d;
            size_t m = dev_at[j];
            while (j != i && m < dev_at[j + 1] && in[j].devices[m - dev_at[j]] != d)
                m++;
            if (j != i && m < dev_at[j + 1]) { /* the same process's GPU */
                nb->dev_to[nd++] = nb->dev_to[m];
                continue;
            }
            if (num_has(&nb->used, d))
                to = fresh(&next_dev, &raw_devs, &nb->used);
            rc = num_add(&nb->used, to);
            nb->dev_to[nd++] = to;
        }
    }
    map_at[n] = nmap;
    dev_at[n] = nd;
    mlprof__map_free(&raw_pids);
    mlprof__map_free(&out_pids);
    mlprof__map_free(&raw_devs);
    return rc;
}

/* Writing the merged deviceProperties: every input's devices, each under
 * the number the output gives it, and saying whose it is. */
typedef struct device_writer {
    mlprof__sb *out;
    const an_merge_input *s;
    const int64_t *dev_to;
    const numbering *nb;
    mlprof__map written;
    size_t input;
    const char *label;
    int first;
} device_writer;

static int put_device(void *ctx, const char *obj)
{
    device_writer *w = ctx;
    mlprof__sb *out = w->out;
    int64_t id = 0, to = 0;
    int has_id = device_id(obj, &id);
    if (has_id) {
        size_t k = 0;
        while (k < w->s->ndevices && w->s->devices[k] != id)
            k++;
        /* one its events do not use: kept only where no device of the output has its number */
        if (k == w->s->ndevices && num_has(&w->nb->used, id))
            return 0;
        to = k < w->s->ndevices ? w->dev_to[k] : id;
        if (num_has(&w->written, to))
            return 0;
        if (num_add(&w->written, to) != 0)
            return -1;
    }
    mlprof__sb_puts(out, w->first ? "" : ",");
    w->first = 0;
    size_t n = strlen(obj), len = 0;
    if (obj[0] != '{' || n < 2 || obj[n - 1] != '}') {
        mlprof__sb_puts(out, obj);
        return 0;
    }
    const char *v = has_id ? an_json_member(obj, "id", &len) : NULL;
    if (v) { /* compact JSON: the number replaced where it stands */
        mlprof__sb_put(out, obj, (size_t)(v - obj));
        mlprof__sb_i64(out, to);
        mlprof__sb_put(out, v + len, (size_t)(obj + n - 1 - (v + len)));
    } else {
        mlprof__sb_put(out, obj, n - 1);
    }
    mlprof__sb_printf(out, "%s\"merge_input\":%zu,\"merge_label\":", n > 2 ? "," : "", w->input);
    mlprof__sb_json_str(out, w->label, strlen(w->label));
    if (v)
        mlprof__sb_printf(out, ",\"merge_device\":%lld", (long long)id);
    mlprof__sb_putc(out, '}');
    return 0;
}

/* The top-level deviceProperties, where the analyzer and PyTorch's tools
 * find a device by the number its events give ("device"): each input's
 * devices under their output numbers, with merge_input, merge_label and
 * merge_device (its number in that input); a device it lists but does not
 * use is kept when its number is free. Nothing when no input has any. */
static int put_devices(mlprof__sb *out, const an_merge_input *in, size_t n, const an_merge_options *o,
                       const numbering *nb, const size_t *dev_at)
{
    mlprof__sb list;
    mlprof__sb_init(&list);
    device_writer w = {&list, NULL, NULL, nb, {NULL, 0, 0}, 0, "", 1};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char buf[64];
        w.s = &in[i];
        w.dev_to = nb->dev_to + dev_at[i];
        w.input = i;
        w.label = input_label(&in[i].view, o, i, buf, sizeof buf);
        rc = each_device(in[i].view.device_props, put_device, &w);
    }
    if (rc == 0 && !w.first) {
        mlprof__sb_puts(out, "\"deviceProperties\":[");
        mlprof__sb_put(out, list.data, list.len);
        mlprof__sb_puts(out, "],\n");
    }
    rc = rc == 0 && list.failed ? -1 : rc;
    mlprof__sb_free(&list);
    mlprof__map_free(&w.written);
    return rc;
}

/* otherData.merge: the method, the id step and each input's offset, pids,
 * rank and metadata. */
static void put_merge_data(mlprof__sb *out, const an_merge_input *in, size_t n, const an_merge_options *o,
                           const int64_t *offset, const an_clock_sync *cs, int method, int64_t step,
                           const pid_map *maps, size_t nmap, const int64_t *dev_to, const size_t *dev_at)
{
    mlprof__sb_printf(out, "\"merge\":{\"method\":\"%s\"", k_methods[method]);
    if (method == AN_ALIGN_CLOCK_SYNC) { /* how well the ranks' clocks were aligned: the worst bound */
        int64_t worst = 0;
        int known = 1;
        size_t any = n;
        for (size_t i = 0; i < n; i++) {
            if (!cs[i].has)
                continue; /* a launcher's trace whose start was lined up */
            any = any < n ? any : i;
            known &= cs[i].bound_ns >= 0;
            if (cs[i].bound_ns > worst)
                worst = cs[i].bound_ns;
        }
        const an_clock_sync *c0 = &cs[any < n ? any : 0];
        mlprof__sb_puts(out, ",\"clock_sync\":{\"method\":");
        mlprof__sb_json_str(out, c0->method, strlen(c0->method));
        if (c0->reference_rank >= 0)
            mlprof__sb_printf(out, ",\"reference_rank\":%lld", c0->reference_rank);
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
        mlprof__sb_json_str(out, in[i].view.path, strlen(in[i].view.path));
        mlprof__sb_puts(out, ",\"label\":");
        const char *label = input_label(&in[i].view, o, i, buf, sizeof buf);
        mlprof__sb_json_str(out, label, strlen(label));
        if (an_other_data_str(&in[i].view, "host", host, sizeof host)) {
            mlprof__sb_puts(out, ",\"host\":");
            mlprof__sb_json_str(out, host, strlen(host));
        }
        if (in[i].rank >= 0)
            mlprof__sb_printf(out, ",\"rank\":%lld", in[i].rank);
        mlprof__sb_printf(out, ",\"offset_ns\":%lld,\"id_offset\":%lld,\"events\":%zu", (long long)offset[i],
                          (long long)i * (long long)step, in[i].nev);
        if (method == AN_ALIGN_CLOCK_SYNC) { /* a launcher's trace: on a rank's clock, or lined up */
            an_clock_sync own;
            long from = an_merge_input_sync(in, n, i, &own);
            if (from < 0)
                mlprof__sb_puts(out, ",\"aligned_by\":\"start\"");
            else if ((size_t)from != i)
                mlprof__sb_printf(out, ",\"clock_sync_of_rank\":%lld", in[from].rank);
        }
        if (cs[i].has) {
            mlprof__sb_puts(out, ",\"drift_ppb\":");
            mlprof__sb_double(out, cs[i].drift_ppb);
            mlprof__sb_printf(out, ",\"clock_sync_at_ns\":%lld", (long long)cs[i].at_ns);
            if (cs[i].bound_ns >= 0)
                mlprof__sb_printf(out, ",\"bound_ns\":%lld", (long long)cs[i].bound_ns);
        }
        if (in[i].view.base_time_ns)
            mlprof__sb_printf(out, ",\"baseTimeNanoseconds\":%lld", (long long)in[i].view.base_time_ns);
        put_raw(out, ",", "distributedInfo", in[i].view.distributed_info);
        put_raw(out, ",", "deviceProperties", in[i].view.device_props);
        /* each pid as the input gave it (a string as that string) and the one the output gives it */
        mlprof__sb_puts(out, ",\"pids\":{");
        int f = 1;
        for (size_t m = 0, k = 0; m < nmap; m++) {
            if (maps[m].input != i)
                continue;
            mlprof__sb_puts(out, f ? "" : ",");
            const char *name = k < in[i].npids && in[i].pid_names ? in[i].pid_names[k] : NULL;
            if (name)
                mlprof__sb_json_str(out, name, strlen(name));
            else
                mlprof__sb_printf(out, "\"%lld\"", (long long)maps[m].from);
            mlprof__sb_printf(out, ":%lld", (long long)maps[m].to);
            f = 0;
            k++;
        }
        mlprof__sb_putc(out, '}');
        if (in[i].ndevices) { /* and its devices: the number its events give, the output's */
            mlprof__sb_puts(out, ",\"devices\":{");
            for (size_t k = 0; k < in[i].ndevices; k++)
                mlprof__sb_printf(out, "%s\"%lld\":%lld", k ? "," : "", (long long)in[i].devices[k],
                                  (long long)dev_to[dev_at[i] + k]);
            mlprof__sb_putc(out, '}');
        }
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_puts(out, "]}");
}

/* ------------------------------------------------- the second pass */

/* Where the output goes: out, and when file is set the file it is flushed to
 * every FLUSH_AT bytes, so that a merge of many large inputs holds a few MiB
 * of it. */
enum { FLUSH_AT = 4 << 20 };

typedef struct writer {
    mlprof__sb *out;
    mlprof__wfile *file; /* NULL: all of it kept in out */
    const char *name;    /* for messages */
    int error;           /* errno of the write that failed, or 0 */
} writer;

static int flush(writer *w)
{
    if (!w->file || w->error || w->out->failed || !w->out->len)
        return w->error || w->out->failed ? -1 : 0;
    if (mlprof__wfile_write(w->file, w->out->data, w->out->len) != 0) {
        w->error = w->file->error;
        return -1;
    }
    mlprof__sb_reset(w->out);
    return 0;
}

/* Input i's trace for the second pass: the one given (loaded[i]), or read
 * again from its path (into *own) as the first pass read it. NULL with err
 * set. */
static const an_trace *second_read(const an_merge_input *s, an_trace *const *loaded, size_t i, an_trace *own,
                                   char *err, size_t errlen)
{
    if (loaded && loaded[i])
        return loaded[i];
    /* a damaged file gives the events before the damage, as it did the first time */
    if (an_trace_read(own, s->view.path) != 0 && !own->partial) {
        snprintf(err, errlen, "%s", own->error);
        an_trace_free(own);
        return NULL;
    }
    if (own->nev != s->nev) {
        snprintf(err, errlen, "%s changed while it was merged: %zu events, then %zu", s->view.path, s->nev,
                 own->nev);
        an_trace_free(own);
        return NULL;
    }
    return own;
}

static void put_events(mlprof__sb *out, writer *w, input_out *io, const an_clock_sync *cs, int64_t offset,
                       int64_t step, int *first)
{
    const an_trace *t = io->t;
    link_keys lk;
    find_link_keys(t, &lk);
    for (size_t k = 0; k < t->nev && !w->error; k++) {
        const an_event *e = &t->ev[k];
        if (e->ph == 'U')
            continue;
        begin_event(out, first);
        mlprof__sb_puts(out, "{\"name\":");
        put_str(out, &io->lens, e->name);
        if (e->cat[0]) {
            mlprof__sb_puts(out, ",\"cat\":");
            put_str(out, &io->lens, e->cat);
        }
        mlprof__sb_printf(out, ",\"ph\":\"%c\",\"pid\":%lld,\"tid\":%lld", e->ph,
                          (long long)map_pid(io->maps, io->nm, &io->hint, e->pid), (long long)map_tid(io->s, e->tid));
        if (cs->has) { /* the drift too: each end moves by the shift at its own time */
            int64_t b = e->ts + an_clock_sync_shift(cs, e->ts);
            put_ts(out, ",\"ts\":", b);
            if (e->ph == 'X')
                put_ts(out, ",\"dur\":", e->ts + e->dur + an_clock_sync_shift(cs, e->ts + e->dur) - b);
        } else {
            put_ts(out, ",\"ts\":", e->ts + offset);
            if (e->ph == 'X')
                put_ts(out, ",\"dur\":", e->dur);
        }
        put_ids(out, e, io->input);
        if (e->ph == 'f' && e->flow_enclosing)
            mlprof__sb_puts(out, ",\"bp\":\"e\"");
        if (e->ph == 'i')
            mlprof__sb_printf(out, ",\"s\":\"%c\"", e->scope ? e->scope : 't');
        put_args(out, io, e, &lk, step);
        mlprof__sb_putc(out, '}');
        if (out->len >= FLUSH_AT)
            flush(w);
    }
}

/* Where one input's sampled stacks go: its pids and times, as its events'. */
typedef struct stack_map {
    const pid_map *maps;
    size_t nm, hint;
    const an_clock_sync *cs;
    int64_t offset;
} stack_map;

static int64_t map_stack(void *ctx, int what, int64_t v)
{
    stack_map *m = ctx;
    if (what == 0)
        return map_pid(m->maps, m->nm, &m->hint, v);
    return m->cs->has ? v + an_clock_sync_shift(m->cs, v) : v + m->offset;
}

/* The inputs' stackFrames and samples (the sampling key's), each input's
 * frame ids prefixed with its index when there are several; written only
 * when some input has them. */
static int put_stacks(mlprof__sb *out, const an_merge_input *in, size_t n, const pid_map *maps,
                      const size_t *map_at, const an_clock_sync *cs, const int64_t *offset, char *err, size_t errlen)
{
    mlprof__sb part[2];
    long got[2] = {0, 0};
    int rc = 0;
    for (int which = 0; which < 2; which++) {
        mlprof__sb_init(&part[which]);
        int first = 1;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            char prefix[32] = "";
            if (n > 1)
                snprintf(prefix, sizeof prefix, "%zu.", i);
            stack_map m = {maps + map_at[i], map_at[i + 1] - map_at[i], 0, &cs[i], offset[i]};
            long k = an_flame_copy(in[i].view.path, which, prefix, map_stack, &m, &part[which], &first, err, errlen);
            if (k < 0)
                rc = -1;
            else
                got[which] += k;
        }
    }
    if (rc == 0 && got[0] && got[1]) {
        mlprof__sb_puts(out, "\"stackFrames\":{");
        mlprof__sb_put(out, part[0].data, part[0].len);
        mlprof__sb_puts(out, "},\n\"samples\":[");
        mlprof__sb_put(out, part[1].data, part[1].len);
        mlprof__sb_puts(out, "],\n");
    }
    for (int which = 0; which < 2; which++) {
        out->failed |= part[which].failed;
        mlprof__sb_free(&part[which]);
    }
    return rc;
}

/* The merge, from the inputs' summaries; each input's events from
 * loaded[i], or read again from its path when loaded is NULL. */
static int merge(const an_merge_input *in, size_t n, an_trace *const *loaded, const an_merge_options *o,
                 writer *w, int *method_out, char *err, size_t errlen)
{
    if (!n) {
        snprintf(err, errlen, "no trace to merge");
        return -1;
    }
    mlprof__sb *out = w->out;
    int64_t *offset = mlprof__calloc(n, sizeof *offset);
    an_clock_sync *cs = mlprof__calloc(n, sizeof *cs);
    size_t *order = mlprof__calloc(n, sizeof *order), *map_at = mlprof__calloc(n + 1, sizeof *map_at);
    size_t *dev_at = mlprof__calloc(n + 1, sizeof *dev_at);
    pid_map *maps = NULL;
    numbering nb = {NULL, {NULL, 0, 0}};
    int rc = offset && cs && order && map_at && dev_at ? 0 : -1;
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    int method = 0;
    if (rc == 0 && an_merge_offsets(in, n, o, offset, &method, err, errlen) != 0)
        rc = -1;
    const char *big_key = "";
    int64_t step = rc == 0 ? id_step(in, n, &big_key) : 0;
    if (rc == 0 && !step) {
        snprintf(err, errlen, "the ids under \"%s\" are too large to keep %zu inputs' apart in 64 bits", big_key,
                 n);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n && method == AN_ALIGN_CLOCK_SYNC; i++)
        an_merge_input_sync(in, n, i, &cs[i]);
    if (rc == 0)
        rank_order(in, n, order);
    /* every (input, pid) pair, given an output pid: one input's together */
    if (rc == 0 && number_inputs(in, n, o->same_as, &nb, &maps, map_at, dev_at) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    size_t nmap = rc == 0 ? map_at[n] : 0;
    int first = 1;
    if (rc == 0)
        mlprof__sb_puts(out, "{\"traceEvents\":[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        an_trace own;
        const an_trace *t = second_read(&in[i], loaded, i, &own, err, errlen);
        if (!t) {
            rc = -1;
            break;
        }
        input_out io = {t, i, &in[i], maps + map_at[i], map_at[i + 1] - map_at[i], 0, nb.dev_to + dev_at[i],
                        mlprof__map_get(&t->strings, "device", 6), {NULL, 0}};
        if (find_nul_strings(t, &io.lens) != 0)
            out->failed = 1;
        put_events(out, w, &io, &cs[i], offset[i], step, &first);
        char buf[64];
        put_names(out, &io, input_label(&in[i].view, o, i, buf, sizeof buf),
                  !(o->labels && o->labels[i]) && an_trace_rank(&in[i].view) >= 0,
                  (int64_t)order[i] * 1000000 + (int64_t)map_at[i], &first);
        mlprof__free(io.lens.v);
        if (t == &own)
            an_trace_free(&own);
        if (flush(w) != 0)
            rc = -1;
    }
    if (rc == 0) {
        mlprof__sb_printf(out, "\n],\n\"displayTimeUnit\":\"ms\",\n");
        if (put_stacks(out, in, n, maps, map_at, cs, offset, err, errlen) != 0)
            rc = -1;
    }
    if (rc == 0) {
        /* where PyTorch's tools look for them: the first input's, whose times these are */
        if (in[0].view.base_time_ns)
            mlprof__sb_printf(out, "\"baseTimeNanoseconds\":%lld,\n", (long long)in[0].view.base_time_ns);
        /* the lowest rank's, else the first input's that has one */
        size_t info = n;
        for (size_t i = 0; i < n; i++) {
            if (!in[i].view.distributed_info)
                continue;
            if (info == n || (in[i].rank >= 0 && (in[info].rank < 0 || in[i].rank < in[info].rank)))
                info = i;
        }
        if (info < n) {
            put_raw(out, "", "distributedInfo", in[info].view.distributed_info);
            mlprof__sb_puts(out, ",\n");
        }
        if (put_devices(out, in, n, o, &nb, dev_at) != 0)
            out->failed = 1;
        mlprof__sb_printf(out, "\"otherData\":{\"mlprof_version\":\"%s\",", MLPROF_VERSION_STRING);
        /* still one host's monotonic clock, unshifted: said as its inputs say it, so
         * that this output merges with (or is compared to) other traces of that host
         * on the shared clock, as mlprof run's per-rank files are */
        char host[256];
        if (method == AN_ALIGN_SHARED && same_clock(in, n) &&
            an_other_data_str(&in[0].view, "host", host, sizeof host)) {
            mlprof__sb_puts(out, "\"host\":");
            mlprof__sb_json_str(out, host, strlen(host));
            mlprof__sb_puts(out, ",\"clock_domain\":\"CLOCK_MONOTONIC\",");
        }
        put_merge_data(out, in, n, o, offset, cs, method, step, maps, nmap, nb.dev_to, dev_at);
        mlprof__sb_puts(out, "}\n}\n");
        if (flush(w) != 0)
            rc = -1;
    }
    if (rc == 0 && out->failed) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (w->error) /* said last: the cause of what failed */
        snprintf(err, errlen, "cannot write %s: %s", w->name, strerror(w->error));
    *method_out = method;
    mlprof__free(cs);
    mlprof__free(order);
    mlprof__free(map_at);
    mlprof__free(dev_at);
    mlprof__free(maps);
    mlprof__free(nb.dev_to);
    mlprof__map_free(&nb.used);
    mlprof__free(offset);
    return rc;
}

int an_merge(an_trace *const *in, size_t n, const an_merge_options *o, mlprof__sb *out, int *method, char *err,
             size_t errlen)
{
    an_merge_input *s = mlprof__calloc(n ? n : 1, sizeof *s);
    int rc = s ? 0 : -1;
    size_t made = 0;
    for (; rc == 0 && made < n; made++) {
        if (an_merge_summarize(in[made], o, &s[made]) != 0)
            rc = -1;
    }
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    writer w = {out, NULL, "", 0};
    if (rc == 0)
        rc = merge(s, n, in, o, &w, method, err, errlen);
    for (size_t i = 0; s && i < made; i++)
        an_merge_input_free(&s[i]);
    mlprof__free(s);
    return rc;
}

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && strcmp(s + n - m, end) == 0;
}

int an_merge_perfetto_name(const char *output)
{
    if (!output)
        return 0;
    static const char *const perfetto[] = {".pftrace", ".perfetto-trace", ".pftrace.gz", ".perfetto-trace.gz"};
    for (size_t i = 0; i < sizeof perfetto / sizeof *perfetto; i++)
        if (ends_with(output, perfetto[i]))
            return 1;
    return 0;
}

/* A Perfetto output: the merged JSON written to a temporary file beside it,
 * read back and exported (pfexport.c), then removed. */
static int merge_to_perfetto(const an_merge_input *in, an_trace *const *kept, size_t n, const an_merge_options *o,
                             const char *output, int *method, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp-%d-merged.json", output, (int)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "%s: the path is too long", output);
        return -1;
    }
    int rc = an_merge_stream(in, kept, n, o, tmp, method, err, errlen);
    if (rc == 0) {
        an_trace t;
        if (an_trace_read(&t, tmp) != 0) {
            snprintf(err, errlen, "%s", t.error);
            rc = -1;
        } else {
            an_pf_stats st;
            rc = an_perfetto_export(&t, output, &st, err, errlen);
        }
        an_trace_free(&t);
    }
    unlink(tmp);
    return rc;
}

int an_merge_stream(const an_merge_input *in, an_trace *const *kept, size_t n, const an_merge_options *o,
                    const char *output, int *method, char *err, size_t errlen)
{
    mlprof__sb out;
    mlprof__sb_init(&out);
    if (an_merge_perfetto_name(output))
        return merge_to_perfetto(in, kept, n, o, output, method, err, errlen);
    mlprof__wfile file; /* OUT.gz is gzip */
    if (mlprof__wfile_open(&file, output, -1) != MLPROF_OK) {
        snprintf(err, errlen, "%s", mlprof_last_error());
        return -1;
    }
    writer w = {&out, &file, file.is_stdout ? "standard output" : file.o.path, 0};
    int rc = merge(in, n, kept, o, &w, method, err, errlen);
    mlprof__sb_free(&out);
    /* a file is complete or absent: the temporary one removed on error */
    if (mlprof__wfile_close(&file, rc == 0) != MLPROF_OK && rc == 0) {
        snprintf(err, errlen, "%s", mlprof_last_error());
        rc = -1;
    }
    return rc;
}
