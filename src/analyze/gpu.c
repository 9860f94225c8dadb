/*
 * gpu.c - kernels to the CPU operators that launched them, and the device-time
 * breakdown. A GPU event is linked to its launch by the runtime call with the
 * same correlation id (PyTorch's profiler writes one on both); failing that,
 * by a flow whose start lies in the launch and whose end binds to the kernel;
 * failing that, by the "External id" it shares with a CPU operator. The
 * operators around the launch on its thread give the bottom-level (innermost)
 * and top-level (outermost) operator of the kernel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../gpu/metrics.h"
#include "analyze.h"
#include "gpu.h"

static const char *const k_corr_keys[] = {"correlation", "correlation_id", "correlationId", NULL};
/* a copy whose own id is its driver call's, and the runtime call's beside it (mlprof's) */
static const char *const k_runtime_corr_keys[] = {"runtime_correlation", NULL};
static const char *const k_comm_words[] = {"nccl", "rccl", "allreduce", "all_reduce", "allgather", "all_gather",
                                           "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
                                           "sendrecv", NULL};

static int has_word(const char *s, const char *const *words)
{
    for (; *words; words++) {
        if (strcasestr(s, *words))
            return 1;
    }
    return 0;
}

int an_gpu_kind(const an_event *e)
{
    if (e->ph != 'X')
        return AN_GPU_NONE;
    const char *c = e->cat;
    if (strcasecmp(c, "gpu_memcpy") == 0 || strcasecmp(c, "gpu_memset") == 0 || strcasecmp(c, "memcpy") == 0 ||
        strcasecmp(c, "memset") == 0)
        return AN_GPU_MEMORY;
    /* MTIA's device-side activity (Kineto's "mtia_ccp_events") counts as a GPU's */
    if (strcasecmp(c, "kernel") != 0 && strcasecmp(c, "gpu_kernel") != 0 && strcasecmp(c, "mtia_ccp_events") != 0)
        return AN_GPU_NONE;
    if (strncasecmp(e->name, "Memcpy", 6) == 0 || strncasecmp(e->name, "Memset", 6) == 0)
        return AN_GPU_MEMORY;
    return has_word(e->name, k_comm_words) ? AN_GPU_COMM : AN_GPU_COMPUTE;
}

static int is_runtime(const an_event *e)
{
    return e->ph == 'X' && (strcasecmp(e->cat, "cuda_runtime") == 0 || strcasecmp(e->cat, "cuda_driver") == 0 ||
                            strcasecmp(e->cat, "runtime") == 0 || strcasecmp(e->cat, "driver") == 0 ||
                            strcasecmp(e->cat, "cuda_api") == 0 || strcasecmp(e->cat, "mtia_runtime") == 0);
}

static int has_int_arg(const an_trace *t, const an_event *e, const char *const *keys, int64_t *v)
{
    const an_arg *a = an_event_arg_any(t, e, keys);
    if (!a || a->type != AN_NUM)
        return 0;
    *v = a->is_int ? a->inum : an_to_i64(a->num);
    return 1;
}

/* ------------------------------------------------------ the innermost span */

/* The innermost duration on (pid, tid) that holds ts, or -1. */
static int32_t span_at(const an_trace *t, const size_t *sorted, size_t n, int64_t pid, int64_t tid, int64_t ts)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first span after (pid, tid, ts) */
        size_t mid = (lo + hi) / 2;
        const an_event *m = &t->ev[sorted[mid]];
        int before = m->pid < pid || (m->pid == pid && (m->tid < tid || (m->tid == tid && m->ts <= ts)));
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    int32_t k = (int32_t)sorted[lo - 1];
    if (t->ev[k].pid != pid || t->ev[k].tid != tid)
        return -1;
    while (k >= 0 && !(t->ev[k].ts <= ts && ts <= t->ev[k].ts + t->ev[k].dur))
        k = t->ev[k].parent;
    return k;
}

/* ---------------------------------------------------------------- linking */

static int map_put(mlprof__map *m, int64_t key, size_t value)
{
    mlprof__map_entry *e = mlprof__map_slot(m, (const char *)&key, sizeof key);
    if (!e)
        return -1;
    if (!e->value)
        e->value = (void *)(uintptr_t)(value + 1);
    return 0;
}

static int32_t map_find(const mlprof__map *m, int64_t key)
{
    void *v = mlprof__map_get(m, (const char *)&key, sizeof key);
    return v ? (int32_t)((uintptr_t)v - 1) : -1;
}

/* Event i was launched by the runtime call launch: the operators around it
 * (cpu_op spans when the trace has them) are its bottom and top. */
static void take_ops(const an_trace *t, an_gpu_links *l, size_t i, int32_t launch, int has_cpu_op)
{
    l->launch[i] = launch;
    for (int32_t k = launch; k >= 0; k = t->ev[k].parent) {
        if (k == launch && is_runtime(&t->ev[k]))
            continue;
        if (has_cpu_op && strcmp(t->ev[k].cat, "cpu_op") != 0)
            continue;
        if (l->bottom[i] < 0)
            l->bottom[i] = k;
        l->top[i] = k;
    }
}

static int is_range(const an_event *e)
{
    return e->ph == 'X' && strcasecmp(e->cat, "cuda_profiler_range") == 0;
}

/* A runtime or driver call that launches one kernel: cudaLaunchKernel,
 * cuLaunchKernel and their forms (cudaLaunchKernelExC, cuLaunchKernelEx,
 * _ptsz, cooperative launches); not a graph launch, which runs many. */
static int is_kernel_launch(const an_event *e)
{
    static const char *const prefixes[] = {"cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchCooperativeKernel",
                                           "cuLaunchCooperativeKernel", NULL};
    if (!is_runtime(e))
        return 0;
    if (strcmp(e->name, "cudaLaunch") == 0) /* CUDA 9's */
        return 1;
    for (const char *const *p = prefixes; *p; p++) {
        if (strncmp(e->name, *p, strlen(*p)) == 0)
            return 1;
    }
    return 0;
}

/* A range or a launch in the order they are matched: device, time, index. */
typedef struct in_order {
    int64_t group, ts;
    size_t i;
} in_order;

static int in_order_cmp(const void *pa, const void *pb)
{
    const in_order *a = pa, *b = pb;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int push_order(in_order **v, size_t *n, size_t *cap, int64_t group, int64_t ts, size_t i)
{
    in_order *p = mlprof__grow(*v, cap, *n, sizeof **v, 64);
    if (!p)
        return -1;
    *v = p;
    p[(*n)++] = (in_order){group, ts, i};
    return 0;
}

/* The counter ranges without a correlation id (PyTorch's): the i-th range of
 * a device takes the operators of the i-th kernel launch. Per device when
 * every launch says its device, else the trace's ranges in time order against
 * all its launches (HTA's rule); a device whose counts differ keeps none. */
static int link_ranges(an_trace *t, an_gpu_links *l, int has_cpu_op)
{
    static const char *const dev_keys[] = {"device", NULL};
    in_order *r = NULL, *k = NULL;
    size_t nr = 0, nk = 0, capr = 0, capk = 0;
    int launches_say_device = 1, several = 0, rc = 0;
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        int64_t v;
        if (is_range(e)) {
            l->ranges++;
            if (has_int_arg(t, e, k_corr_keys, &v) || an_event_arg(t, e, "op_stack")) {
                l->ranges_own++;
                continue;
            }
            int64_t dev = has_int_arg(t, e, dev_keys, &v) ? v : e->pid;
            several |= nr && dev != r[0].group;
            rc = push_order(&r, &nr, &capr, dev, e->ts, i);
        } else if (is_kernel_launch(e) && !(e->parent >= 0 && is_kernel_launch(&t->ev[e->parent]))) {
            l->kernel_launches++; /* a driver launch inside a runtime one is the same launch */
            int64_t dev = has_int_arg(t, e, dev_keys, &v) ? v : -1;
            launches_say_device &= dev >= 0;
            rc = push_order(&k, &nk, &capk, dev, e->ts, i);
        }
    }
    if (rc == 0 && nr) {
        if (!launches_say_device || !nk) { /* one order for the trace, or for its only device */
            int64_t g = several ? -1 : r[0].group;
            for (size_t j = 0; j < nr; j++)
                r[j].group = g;
            for (size_t j = 0; j < nk; j++)
                k[j].group = g;
        }
        mlprof__sort(r, nr, sizeof *r, in_order_cmp);
        mlprof__sort(k, nk, sizeof *k, in_order_cmp);
        size_t a = 0, b = 0;
        while (a < nr) {
            size_t a_end = a;
            while (a_end < nr && r[a_end].group == r[a].group)
                a_end++;
            while (b < nk && k[b].group < r[a].group)
                b++;
            size_t b_end = b;
            while (b_end < nk && k[b_end].group == r[a].group)
                b_end++;
            if (a_end - a == b_end - b) {
                for (size_t j = 0; j < a_end - a; j++)
                    take_ops(t, l, r[a + j].i, (int32_t)k[b + j].i, has_cpu_op);
                l->ranges_by_order += a_end - a;
            } else {
                l->ranges_unmatched += a_end - a;
                if (l->nmismatch < sizeof l->mismatch / sizeof l->mismatch[0])
                    l->mismatch[l->nmismatch] = (an_gpu_range_mismatch){r[a].group, a_end - a, b_end - b};
                l->nmismatch++;
            }
            a = a_end;
            b = b_end;
        }
    }
    mlprof__free(r);
    mlprof__free(k);
    return rc;
}

void an_gpu_links_free(an_gpu_links *l)
{
    mlprof__free(l->launch);
    mlprof__free(l->bottom);
    mlprof__free(l->top);
    mlprof__free(l->kind);
    memset(l, 0, sizeof *l);
}

int an_gpu_link(an_trace *t, an_gpu_links *l)
{
    memset(l, 0, sizeof *l);
    an_compute_self(t);
    size_t n = t->nev;
    l->launch = mlprof__malloc((n ? n : 1) * sizeof *l->launch);
    l->bottom = mlprof__malloc((n ? n : 1) * sizeof *l->bottom);
    l->top = mlprof__malloc((n ? n : 1) * sizeof *l->top);
    l->kind = mlprof__calloc(n ? n : 1, 1);
    size_t *sorted = mlprof__malloc((n ? n : 1) * sizeof *sorted);
    mlprof__map corr, flows, external;
    mlprof__map_init(&corr);
    mlprof__map_init(&flows);
    mlprof__map_init(&external);
    int rc = l->launch && l->bottom && l->top && l->kind && sorted ? 0 : -1;
    size_t nsorted = 0;
    int has_cpu_op = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const an_event *e = &t->ev[i];
        l->launch[i] = l->bottom[i] = l->top[i] = -1;
        l->kind[i] = (uint8_t)an_gpu_kind(e);
        int64_t v;
        if (e->ph == 'X')
            sorted[nsorted++] = i;
        if (is_runtime(e) && has_int_arg(t, e, k_corr_keys, &v))
            rc = map_put(&corr, v, i);
        if (e->ph == 's')
            rc = map_put(&flows, (int64_t)e->id, i);
        if (strcmp(e->cat, "cpu_op") == 0) {
            has_cpu_op = 1;
            static const char *const ext_keys[] = {"External id", NULL};
            if (has_int_arg(t, e, ext_keys, &v))
                rc = map_put(&external, v, i);
        }
    }
    if (rc == 0)
        an_sort_by_track(t, sorted, nsorted);
    /* flows: from a span on the CPU (the launch) to the GPU event they end in */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const an_event *f = &t->ev[i];
        if (f->ph != 'f' && f->ph != 't')
            continue;
        int32_t s = map_find(&flows, (int64_t)f->id);
        if (s < 0)
            continue;
        int32_t kernel = span_at(t, sorted, nsorted, f->pid, f->tid, f->ts);
        int32_t from = span_at(t, sorted, nsorted, t->ev[s].pid, t->ev[s].tid, t->ev[s].ts);
        if (kernel >= 0 && from >= 0 && l->kind[kernel] && l->launch[kernel] < 0)
            l->launch[kernel] = from;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!l->kind[i])
            continue;
        const an_event *e = &t->ev[i];
        l->gpu_events++;
        int64_t v;
        int32_t launch = has_int_arg(t, e, k_corr_keys, &v) ? map_find(&corr, v) : -1;
        if (launch < 0 && has_int_arg(t, e, k_runtime_corr_keys, &v))
            launch = map_find(&corr, v);
        if (launch >= 0) {
            l->by_correlation++;
        } else if (l->launch[i] >= 0) {
            launch = l->launch[i];
            l->by_flow++;
        } else {
            static const char *const ext_keys[] = {"External id", NULL};
            int32_t op = has_int_arg(t, e, ext_keys, &v) ? map_find(&external, v) : -1;
            if (op < 0) {
                l->unlinked++;
                continue;
            }
            l->by_external++; /* no runtime call names it: only the operator's External id */
            l->launch[i] = op; /* the operator itself stands for its launch */
            l->bottom[i] = l->top[i] = op;
            for (int32_t k = t->ev[op].parent; k >= 0; k = t->ev[k].parent) {
                if (strcmp(t->ev[k].cat, "cpu_op") == 0)
                    l->top[i] = k;
            }
            continue;
        }
        take_ops(t, l, i, launch, has_cpu_op);
    }
    if (rc == 0)
        rc = link_ranges(t, l, has_cpu_op);
    mlprof__free(sorted);
    mlprof__map_free(&corr);
    mlprof__map_free(&flows);
    mlprof__map_free(&external);
    if (rc != 0)
        an_gpu_links_free(l);
    return rc;
}

void an_gpu_op_stack(const an_trace *t, const an_gpu_links *l, size_t i, mlprof__sb *out)
{
    if (l->bottom[i] < 0) {
        mlprof__sb_puts(out, "(no operator)");
        return;
    }
    /* from the top down: collect the chain, then print it reversed */
    int32_t chain[64];
    int n = 0;
    for (int32_t k = l->bottom[i]; k >= 0 && n < 64; k = t->ev[k].parent) {
        if (strcmp(t->ev[k].cat, t->ev[l->bottom[i]].cat) == 0)
            chain[n++] = k;
        if (k == l->top[i])
            break;
    }
    for (int j = n - 1; j >= 0; j--) {
        mlprof__sb_puts(out, t->ev[chain[j]].name);
        if (j)
            mlprof__sb_puts(out, " > ");
    }
}

int an_gpu_op_times(const an_trace *t, const an_gpu_links *l, int64_t **out)
{
    *out = NULL;
    if (!l->gpu_events)
        return 0;
    int64_t *ns = mlprof__malloc(t->nev * sizeof *ns);
    if (!ns)
        return -1;
    for (size_t k = 0; k < t->nev; k++)
        ns[k] = -1;
    for (size_t i = 0; i < t->nev; i++) {
        if (l->kind[i] == AN_GPU_NONE)
            continue;
        int64_t d = t->ev[i].dur > 0 ? t->ev[i].dur : 0;
        /* every operator around the launch, a name nested in itself too
         * (aten::add in aten::add): as its FLOPs, bytes and total time, the
         * work counts for each, so a group's rate stays their ratio */
        for (int32_t k = l->bottom[i]; k >= 0; k = t->ev[k].parent) {
            ns[k] = (ns[k] < 0 ? 0 : ns[k]) + d;
            if (k == l->top[i])
                break;
        }
    }
    *out = ns;
    return 0;
}

/* ------------------------------------------------------------- breakdown */

typedef struct span {
    int64_t a, b;
} span;

static int span_cmp(const void *pa, const void *pb)
{
    const span *x = pa, *y = pb;
    return x->a < y->a ? -1 : x->a > y->a;
}

/* Sorts and merges spans in place; returns how many remain. */
static size_t span_union(span *s, size_t n)
{
    mlprof__sort(s, n, sizeof *s, span_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && s[i].a <= s[m - 1].b) {
            if (s[i].b > s[m - 1].b)
                s[m - 1].b = s[i].b;
        } else {
            s[m++] = s[i];
        }
    }
    return m;
}

static int64_t span_length(const span *s, size_t n)
{
    int64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += s[i].b - s[i].a;
    return t;
}

/* Length of the intersection of two merged lists. */
static int64_t span_overlap(const span *x, size_t nx, const span *y, size_t ny)
{
    int64_t t = 0;
    size_t i = 0, j = 0;
    while (i < nx && j < ny) {
        int64_t a = x[i].a > y[j].a ? x[i].a : y[j].a, b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a)
            t += b - a;
        if (x[i].b < y[j].b)
            i++;
        else
            j++;
    }
    return t;
}

typedef struct track_use {
    int64_t pid, tid; /* the track; tid unused for the whole device */
    int whole;        /* the whole device (every stream of pid), not one stream */
    int64_t device;   /* the device number its events give ("device"), -1 unknown, -2 several */
    int64_t stream;   /* a stream's number: its name's ("stream 7"), its tid, or its events' */
    int mtia;         /* holds MTIA activity */
    span *spans[4];   /* all, compute, communication, memory */
    size_t n[4], cap[4];
    int64_t time[4];  /* summed durations */
    uint64_t count[4];
    int64_t busy, span; /* once merged: time with an event running, first start to last end */
    int64_t uni[4];     /* once merged: time with an event of each kind running (the union) */
    size_t *ev, nev, capev; /* a stream's events (indices into t->ev) */
    int64_t idle[3];    /* a stream's idle time by cause (IDLE_*), and the gaps of each */
    uint64_t gaps[3];
    size_t lfirst, ln;  /* a device's launches: a slice of the sorted launch records */
} track_use;

static track_use *use_for(track_use **uses, size_t *n, size_t *cap, int64_t pid, int64_t tid, int whole)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*uses)[i].pid == pid && (*uses)[i].whole == whole && (whole || (*uses)[i].tid == tid))
            return &(*uses)[i];
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        track_use *u = mlprof__realloc(*uses, c * sizeof *u);
        if (!u)
            return NULL;
        *uses = u;
        *cap = c;
    }
    track_use *u = &(*uses)[(*n)++];
    memset(u, 0, sizeof *u);
    u->pid = pid;
    u->tid = whole ? 0 : tid;
    u->whole = whole;
    u->device = u->stream = -1;
    return u;
}

static int use_add(track_use *u, int kind, const an_event *e)
{
    for (int k = 0; k < 4; k++) {
        if (k && k != kind)
            continue;
        if (u->n[k] == u->cap[k]) {
            size_t c = u->cap[k] ? u->cap[k] * 2 : 256;
            span *s = mlprof__realloc(u->spans[k], c * sizeof *s);
            if (!s)
                return -1;
            u->spans[k] = s;
            u->cap[k] = c;
        }
        u->spans[k][u->n[k]++] = (span){e->ts, e->ts + e->dur};
        u->time[k] += e->dur;
        u->count[k]++;
    }
    return 0;
}

/* A duration right-aligned in 12 columns, then two spaces. */
static void put_duration_cell(mlprof__sb *out, int64_t ns)
{
    mlprof__sb tmp;
    mlprof__sb_init(&tmp);
    an_put_duration(&tmp, ns);
    mlprof__sb_printf(out, "%12s  ", tmp.data ? tmp.data : "");
    mlprof__sb_free(&tmp);
}

static void put_pct(mlprof__sb *out, int64_t part, int64_t whole)
{
    mlprof__sb_printf(out, "%5.1f%%", whole > 0 ? 100.0 * (double)part / (double)whole : 0.0);
}

/* The number in a stream's name ("stream 7", as Kineto names them), or -1. */
static int64_t stream_in_name(const char *name)
{
    if (!name)
        return -1;
    while (*name == ' ')
        name++;
    if (strncasecmp(name, "stream", 6) != 0)
        return -1;
    const char *p = name + 6;
    while (*p == ' ')
        p++;
    char *end;
    long long n = strtoll(p, &end, 10);
    if (end == p || n < 0)
        return -1;
    while (*end == ' ')
        end++;
    return *end ? -1 : (int64_t)n;
}

/* The device number of a device track: the one its events give, or, in a
 * PyTorch trace (whose device tracks have the device's number as pid), its
 * pid; -1 when neither says. */
static int64_t device_number(const an_trace *t, const track_use *u)
{
    if (u->device >= 0)
        return u->device;
    if (u->device == -1 && strcmp(t->writer, "pytorch") == 0 && u->pid >= 0 && u->pid < 65536)
        return u->pid;
    return -1;
}

/* The name deviceProperties gives device number dev, copied into buf; NULL
 * when it gives none. */
static const char *device_name(const an_trace *t, int64_t dev, char *buf, size_t len)
{
    const char *p = t->device_props;
    if (!p || dev < 0)
        return NULL;
    char want[32];
    snprintf(want, sizeof want, "\"id\":%lld", (long long)dev);
    size_t wl = strlen(want);
    /* each device is an object of its own: find its id, then the name in that object */
    for (const char *o = strchr(p, '{'); o; o = strchr(o + 1, '{')) {
        const char *close = strchr(o, '}');
        const char *id = strstr(o, want);
        if (!close || !id || id > close || (id[wl] >= '0' && id[wl] <= '9') || id[wl] == '.')
            continue;
        const char *nm = strstr(o, "\"name\":\"");
        if (!nm || nm > close)
            return NULL;
        nm += 8;
        size_t n = 0;
        while (nm[n] && nm[n] != '"' && n + 1 < len) {
            if (nm[n] == '\\')
                return NULL; /* an escaped name: not worth unquoting here */
            n++;
        }
        memcpy(buf, nm, n);
        buf[n] = '\0';
        return n ? buf : NULL;
    }
    return NULL;
}

static const char *track_label(const an_trace *t, const track_use *u, char *buf, size_t len)
{
    if (u->whole) {
        int64_t dev = device_number(t, u);
        const char *pn = an_process_name(t, u->pid);
        if (dev >= 0)
            snprintf(buf, len, "%s %lld", u->mtia ? "MTIA" : "GPU", (long long)dev);
        else if (pn)
            snprintf(buf, len, "%s", pn);
        else if (an_is_named_id(u->pid))
            snprintf(buf, len, "device");
        else
            snprintf(buf, len, "device %lld", (long long)u->pid);
    } else {
        const char *tn = an_thread_name(t, u->pid, u->tid);
        size_t n = tn ? strlen(tn) : 0;
        while (n && tn[n - 1] == ' ') /* Kineto's "stream 7 " */
            n--;
        if (n)
            snprintf(buf, len, "%.*s", (int)n, tn);
        else if (u->stream >= 0)
            snprintf(buf, len, "stream %lld", (long long)u->stream);
        else
            snprintf(buf, len, "stream %lld", (long long)u->tid);
    }
    return buf;
}

static const char *const k_kind_names[] = {"", "compute", "communication", "memory"};

/* A pid, tid, device or stream number in JSON: null where the trace gave a
 * name instead (or nothing says). */
static void put_id_json(mlprof__sb *out, int64_t id)
{
    if (an_is_named_id(id) || id == -1)
        mlprof__sb_puts(out, "null");
    else
        mlprof__sb_printf(out, "%lld", (long long)id);
}

/* GPU time gathered by a name: a kernel's own, or its launching operator's. */
typedef struct gpu_row {
    const char *name;
    int kind;
    uint64_t count;
    int64_t time;
    int32_t bottom, top; /* the operators of its earliest launch (whatever order the file holds them in) */
    int64_t first_ts;    /* that launch's work's start */
} gpu_row;

static int gpu_row_cmp(const void *pa, const void *pb)
{
    const gpu_row *a = pa, *b = pb;
    if (a->time != b->time)
        return a->time > b->time ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The GPU events by kernel name, or (by_operator) by the name of the
 * bottom-level operator that launched them, largest time first. */
static int gpu_rows(const an_trace *t, const an_gpu_links *l, int by_operator, gpu_row **rows, size_t *n)
{
    mlprof__map by_name;
    mlprof__map_init(&by_name);
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < t->nev && rc == 0; i++) {
        if (!l->kind[i])
            continue;
        const an_event *e = &t->ev[i];
        const char *name = !by_operator ? e->name : l->bottom[i] >= 0 ? t->ev[l->bottom[i]].name : "(no operator)";
        mlprof__map_entry *slot = mlprof__map_slot(&by_name, name, strlen(name));
        if (!slot) {
            rc = -1;
            break;
        }
        if (!slot->value) {
            if (*n == cap) {
                size_t c = cap ? cap * 2 : 64;
                gpu_row *p = mlprof__realloc(*rows, c * sizeof *p);
                if (!p) {
                    rc = -1;
                    break;
                }
                *rows = p;
                cap = c;
            }
            (*rows)[*n] = (gpu_row){name, l->kind[i], 0, 0, l->bottom[i], l->top[i], e->ts};
            slot->value = (void *)(uintptr_t)(++*n);
        }
        gpu_row *k = &(*rows)[(uintptr_t)slot->value - 1];
        k->count++;
        k->time += e->dur;
        if (e->ts < k->first_ts) {
            k->first_ts = e->ts;
            k->bottom = l->bottom[i];
            k->top = l->top[i];
        }
    }
    mlprof__map_free(&by_name);
    if (rc == 0)
        mlprof__sort(*rows, *n, sizeof **rows, gpu_row_cmp);
    return rc;
}

/* ------------------------------------------------ per-kernel metrics */

/* One kernel's measured metrics, summed over its ranges. The rates take only
 * the ranges whose GPU time is known, over that time. */
typedef struct metric_row {
    const char *name;
    uint64_t count, n_gpu;
    double gpu_ns, flops, bytes, occupancy, branch;
    double timed_flops, timed_bytes; /* of the ranges with a GPU time */
    uint64_t n_flops, n_bytes, n_occupancy, n_branch, n_timed_flops, n_timed_bytes;
} metric_row;

static int metric_row_cmp(const void *pa, const void *pb)
{
    const metric_row *a = pa, *b = pb;
    if (a->gpu_ns != b->gpu_ns)
        return a->gpu_ns > b->gpu_ns ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* What one cuda_profiler_range event measured: mlprof's derived arguments
 * where it wrote them, else derived here from the raw metrics by the same
 * rules (a trace of PyTorch's profiler has only those). Its GPU time is its
 * gpu_time_ns or its gpu__time_duration.sum, never its dur: PyTorch spreads
 * the trace's span evenly over its ranges, so that dur is no kernel's time,
 * and rates over it would be invented. NaN where unknown. */
static void range_values(const an_trace *t, const an_event *e, mlprof__gpu_derived *d)
{
    mlprof__gpu_metric_set set;
    double values[MLPROF__GPU_MAX_METRICS];
    set.n = 0;
    for (uint32_t i = 0; i < e->nargs && set.n < MLPROF__GPU_MAX_METRICS; i++) {
        const an_arg *a = &t->args[e->args + i];
        if (a->type != AN_NUM || !strstr(a->key, "__") || strlen(a->key) >= MLPROF__GPU_METRIC_LEN)
            continue;
        strcpy(set.names[set.n], a->key);
        values[set.n++] = a->num;
    }
    static const char *const k_flops[] = {"flops", NULL}, *const k_bytes[] = {"bytes", NULL},
                             *const k_gpu[] = {"gpu_time_ns", NULL}, *const k_occ[] = {"achieved_occupancy", NULL},
                             *const k_branch[] = {"branch_efficiency", NULL};
    mlprof__gpu_derived raw;
    mlprof__gpu_metrics_derive(&set, values, NAN, &raw);
    double gpu_ns = an_arg_num(an_event_arg_any(t, e, k_gpu), raw.gpu_ns);
    if (!(gpu_ns > 0))
        gpu_ns = NAN;
    mlprof__gpu_metrics_derive(&set, values, gpu_ns, d); /* rates over the known GPU time only */
    d->gpu_ns = gpu_ns;
    d->flops = an_arg_num(an_event_arg_any(t, e, k_flops), d->flops);
    d->dram_bytes = an_arg_num(an_event_arg_any(t, e, k_bytes), d->dram_bytes);
    d->achieved_occupancy = an_arg_num(an_event_arg_any(t, e, k_occ), d->achieved_occupancy);
    d->branch_efficiency = an_arg_num(an_event_arg_any(t, e, k_branch), d->branch_efficiency);
}

/* The kernels' metrics (cuda_profiler_range events) by name, the most GPU
 * time first; 0 rows when the trace has none. */
static int metric_rows(const an_trace *t, metric_row **rows, size_t *n)
{
    mlprof__map index;
    mlprof__map_init(&index);
    size_t cap = 0;
    *rows = NULL;
    *n = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (!is_range(e))
            continue;
        mlprof__map_entry *slot = mlprof__map_slot(&index, e->name, strlen(e->name));
        metric_row *r = slot ? mlprof__grow(*rows, &cap, *n, sizeof **rows, 16) : NULL;
        if (!r) {
            rc = -1;
            break;
        }
        *rows = r;
        if (!slot->value) {
            memset(&r[*n], 0, sizeof r[*n]);
            r[*n].name = e->name;
            slot->value = (void *)(uintptr_t)(++*n);
        }
        metric_row *row = &r[(uintptr_t)slot->value - 1];
        mlprof__gpu_derived d;
        range_values(t, e, &d);
        row->count++;
#define SUM(field, v)              \
    if (!isnan(v)) {               \
        row->field += (v);         \
        row->n_##field++;          \
    }
        SUM(flops, d.flops);
        SUM(bytes, d.dram_bytes);
        SUM(occupancy, d.achieved_occupancy);
        SUM(branch, d.branch_efficiency);
        if (!isnan(d.gpu_ns)) {
            row->gpu_ns += d.gpu_ns;
            row->n_gpu++;
            SUM(timed_flops, d.flops);
            SUM(timed_bytes, d.dram_bytes);
        }
#undef SUM
    }
    mlprof__map_free(&index);
    if (rc == 0)
        mlprof__sort(*rows, *n, sizeof **rows, metric_row_cmp);
    return rc;
}

static double ratio(double a, uint64_t na, double b) { return na && b > 0 ? a / b : NAN; }

static void put_metric_json(mlprof__sb *out, const char *key, double v)
{
    if (isnan(v) || isinf(v))
        mlprof__sb_printf(out, ",\"%s\":null", key);
    else
        mlprof__sb_printf(out, ",\"%s\":%.10g", key, v);
}

static void put_metric_cell(mlprof__sb *out, double v, const char *fmt)
{
    if (isnan(v) || isinf(v))
        mlprof__sb_printf(out, " %9s", "-");
    else
        mlprof__sb_printf(out, fmt, v);
}

static void kernel_metrics(const metric_row *rows, size_t n, size_t shown, int format, mlprof__sb *out)
{
    for (size_t i = 0; i < shown; i++) {
        const metric_row *r = &rows[i];
        double gflops = ratio(r->timed_flops, r->n_timed_flops, r->gpu_ns);
        double gbps = ratio(r->timed_bytes, r->n_timed_bytes, r->gpu_ns);
        double ai = r->n_flops && r->n_bytes && r->bytes > 0 ? r->flops / r->bytes : NAN;
        double occ = r->n_occupancy ? r->occupancy / (double)r->n_occupancy : NAN;
        double branch = r->n_branch ? r->branch / (double)r->n_branch : NAN;
        if (format == AN_JSON) {
            mlprof__sb_puts(out, i ? ",{\"name\":" : "{\"name\":");
            mlprof__sb_json_str(out, r->name, strlen(r->name));
            mlprof__sb_printf(out, ",\"count\":%llu", (unsigned long long)r->count);
            put_metric_json(out, "gpu_time_ns", r->n_gpu ? r->gpu_ns : NAN);
            mlprof__sb_printf(out, ",\"timed\":%llu", (unsigned long long)r->n_gpu);
            put_metric_json(out, "flops", r->n_flops ? r->flops : NAN);
            put_metric_json(out, "bytes", r->n_bytes ? r->bytes : NAN);
            put_metric_json(out, "gflops", gflops);
            put_metric_json(out, "dram_gbps", gbps);
            put_metric_json(out, "arithmetic_intensity", ai);
            put_metric_json(out, "achieved_occupancy", occ);
            put_metric_json(out, "branch_efficiency", branch);
            mlprof__sb_putc(out, '}');
            continue;
        }
        if (i == 0)
            mlprof__sb_printf(out, "\nKernel metrics (CUPTI range profiler, per kernel; GPU time and rates only where a "
                                   "range measured gpu__time_duration):\n  %-40s %6s  %12s %9s %9s %9s %9s %9s\n",
                              "name", "count", "GPU time", "GFLOP/s", "GB/s", "FLOP/B", "occupancy", "branch");
        size_t len = strlen(r->name);
        mlprof__sb_printf(out, len > 40 ? "  %.37s..." : "  %-40s", r->name);
        mlprof__sb_printf(out, " %6llu  ", (unsigned long long)r->count);
        if (r->n_gpu)
            put_duration_cell(out, (int64_t)r->gpu_ns);
        else
            mlprof__sb_printf(out, "%12s  ", "-");
        put_metric_cell(out, gflops, " %9.1f"); /* FLOP per ns: GFLOP/s */
        put_metric_cell(out, gbps, " %9.1f");
        put_metric_cell(out, ai, " %9.3f");
        put_metric_cell(out, occ * 100, " %8.1f%%");
        put_metric_cell(out, branch * 100, " %8.1f%%");
        mlprof__sb_putc(out, '\n');
    }
    if (format != AN_JSON && shown < n)
        mlprof__sb_printf(out, "  (%zu more)\n", n - shown);
}

/* ------------------------------------------------ the ranges one by one */

/* Arguments of a range that are not counters: ids, and what mlprof derives. */
static int is_counter_key(const char *key)
{
    static const char *const not_counters[] = {
        "correlation", "correlation_id", "correlationId", "device", "stream", "context", "External id",
        "external id", "gpu_time_ns", "flops", "bytes", "gflops", "dram_gbps", "arithmetic_intensity",
        "achieved_occupancy", "branch_efficiency", "launch_ns", "cbid", "Ev Idx", NULL};
    for (const char *const *k = not_counters; *k; k++) {
        if (strcmp(key, *k) == 0)
            return 0;
    }
    return 1;
}

/* The counter ranges in time order, and the counters they hold: one column
 * per metric name, in the order first met. */
typedef struct range_table {
    size_t *idx, n;
    const char **metric;
    size_t nmetric;
} range_table;

static const an_trace *g_range_trace;

static int range_ts_cmp(const void *pa, const void *pb)
{
    const an_event *a = &g_range_trace->ev[*(const size_t *)pa], *b = &g_range_trace->ev[*(const size_t *)pb];
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1;
}

static void range_table_free(range_table *rt)
{
    mlprof__free(rt->idx);
    mlprof__free(rt->metric);
    memset(rt, 0, sizeof *rt);
}

static int range_table_make(const an_trace *t, range_table *rt)
{
    memset(rt, 0, sizeof *rt);
    mlprof__map seen;
    mlprof__map_init(&seen);
    size_t capi = 0, capm = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (!is_range(e))
            continue;
        size_t *p = mlprof__grow(rt->idx, &capi, rt->n, sizeof *rt->idx, 64);
        if (!p) {
            rc = -1;
            break;
        }
        rt->idx = p;
        p[rt->n++] = i;
        for (uint32_t k = 0; k < e->nargs; k++) {
            const an_arg *a = &t->args[e->args + k];
            if (a->type != AN_NUM || !is_counter_key(a->key))
                continue;
            mlprof__map_entry *slot = mlprof__map_slot(&seen, a->key, strlen(a->key));
            const char **m = slot ? mlprof__grow(rt->metric, &capm, rt->nmetric, sizeof *rt->metric, 16) : NULL;
            if (!m) {
                rc = -1;
                break;
            }
            rt->metric = m;
            if (!slot->value) {
                m[rt->nmetric++] = a->key;
                slot->value = (void *)(uintptr_t)rt->nmetric;
            }
        }
    }
    mlprof__map_free(&seen);
    if (rc == 0) {
        g_range_trace = t; /* one analysis at a time: the command runs one */
        mlprof__sort(rt->idx, rt->n, sizeof *rt->idx, range_ts_cmp);
    } else {
        range_table_free(rt);
    }
    return rc;
}

/* The counter metric of range e, NaN when it has none. */
static double range_counter(const an_trace *t, const an_event *e, const char *metric)
{
    for (uint32_t k = 0; k < e->nargs; k++) {
        const an_arg *a = &t->args[e->args + k];
        if (a->type == AN_NUM && strcmp(a->key, metric) == 0)
            return a->is_int ? (double)a->inum : a->num;
    }
    return NAN;
}

/* The operators of range i: by its launch, or its own (mlprof writes "op"
 * and "op_stack"); empty when neither. */
static void range_ops(const an_trace *t, const an_gpu_links *l, size_t i, mlprof__sb *stack, mlprof__sb *bottom,
                      mlprof__sb *top)
{
    mlprof__sb_reset(stack);
    mlprof__sb_reset(bottom);
    mlprof__sb_reset(top);
    if (l->bottom[i] >= 0) {
        an_gpu_op_stack(t, l, i, stack);
        mlprof__sb_puts(bottom, t->ev[l->bottom[i]].name);
        mlprof__sb_puts(top, t->ev[l->top[i]].name);
        return;
    }
    const an_event *e = &t->ev[i];
    const an_arg *st = an_event_arg(t, e, "op_stack"), *op = an_event_arg(t, e, "op");
    if (!st || st->type != AN_STR || !st->str[0])
        return;
    mlprof__sb_puts(stack, st->str);
    const char *sep = strstr(st->str, " > ");
    mlprof__sb_printf(top, "%.*s", (int)(sep ? (size_t)(sep - st->str) : strlen(st->str)), st->str);
    if (op && op->type == AN_STR && op->str[0]) {
        mlprof__sb_puts(bottom, op->str);
    } else {
        const char *last = st->str;
        while ((sep = strstr(last, " > ")) != NULL)
            last = sep + 3;
        mlprof__sb_puts(bottom, last);
    }
}

static const char *sb_str(const mlprof__sb *sb) { return sb->data ? sb->data : ""; }

static void put_json_or_null(mlprof__sb *out, const mlprof__sb *s)
{
    if (s->len)
        mlprof__sb_json_str(out, s->data, s->len);
    else
        mlprof__sb_puts(out, "null");
}

/* How the ranges got their operators, and what could not. */
static void range_summary(const an_gpu_links *l, int format, mlprof__sb *out)
{
    if (format == AN_JSON) {
        mlprof__sb_printf(out, "\"count\":%zu,\"with_their_own_operators\":%zu,\"by_launch_order\":%zu,"
                               "\"without_operators\":%zu,\"kernel_launches\":%zu,\"mismatches\":[",
                          l->ranges, l->ranges_own, l->ranges_by_order, l->ranges_unmatched, l->kernel_launches);
        size_t kept = l->nmismatch < 8 ? l->nmismatch : 8;
        for (size_t m = 0; m < kept; m++) {
            mlprof__sb_puts(out, m ? ",{\"device\":" : "{\"device\":");
            put_id_json(out, l->mismatch[m].device);
            mlprof__sb_printf(out, ",\"ranges\":%zu,\"launches\":%zu}", l->mismatch[m].ranges,
                              l->mismatch[m].launches);
        }
        mlprof__sb_putc(out, ']');
        return;
    }
    mlprof__sb_printf(out, "%zu ranges: %zu with their own operators (mlprof's), %zu given those of their kernel "
                           "launch by launch order (%zu launches), %zu without\n",
                      l->ranges, l->ranges_own, l->ranges_by_order, l->kernel_launches, l->ranges_unmatched);
}

/* One line of notes per device whose ranges and launches differ in number. */
static void range_notes(const an_trace *t, const an_gpu_links *l, mlprof__sb *notes)
{
    size_t kept = l->nmismatch < 8 ? l->nmismatch : 8;
    for (size_t m = 0; m < kept; m++) {
        const an_gpu_range_mismatch *x = &l->mismatch[m];
        mlprof__sb_printf(notes, "%s: ", t->path);
        if (x->device >= 0)
            mlprof__sb_printf(notes, "device %lld", (long long)x->device);
        else
            mlprof__sb_puts(notes, "the trace");
        mlprof__sb_printf(notes, " has %zu counter ranges but %zu kernel launches: their operators are unknown\n",
                          x->ranges, x->launches);
    }
    if (l->nmismatch > kept)
        mlprof__sb_printf(notes, "%s: %zu more devices whose counter ranges and kernel launches differ\n", t->path,
                          l->nmismatch - kept);
}

static void put_counter_value(mlprof__sb *out, double v, int format)
{
    if (isnan(v) || isinf(v)) {
        mlprof__sb_puts(out, format == AN_JSON ? "null" : format == AN_CSV ? "" : "             -");
        return;
    }
    if (format == AN_TABLE)
        mlprof__sb_printf(out, " %13.6g", v);
    else
        mlprof__sb_printf(out, "%.17g", v);
}

/* The ranges one by one, as HTA's counter dataframe: kernel, device, op
 * stack, bottom and top operator, then one column per metric. */
static int range_rows(const an_trace *t, const an_gpu_links *l, const range_table *rt, size_t shown, int format,
                      mlprof__sb *out)
{
    mlprof__sb stack, bottom, top;
    mlprof__sb_init(&stack);
    mlprof__sb_init(&bottom);
    mlprof__sb_init(&top);
    if (format == AN_CSV) {
        mlprof__sb_puts(out, "index,device,name,op_stack,bottom_op,top_op");
        for (size_t m = 0; m < rt->nmetric; m++) {
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, rt->metric[m]);
        }
        mlprof__sb_putc(out, '\n');
    } else if (format == AN_TABLE) {
        mlprof__sb_puts(out, "\nCounter ranges (cuda_profiler_range), one per kernel launch, in time order:\n  ");
        range_summary(l, format, out);
        for (size_t m = 0; m < rt->nmetric; m++)
            mlprof__sb_printf(out, "  [%zu] %s\n", m + 1, rt->metric[m]);
        mlprof__sb_printf(out, "  %5s  %-40s %-24s %-24s", "#", "name", "bottom operator", "top operator");
        for (size_t m = 0; m < rt->nmetric; m++) {
            char h[32];
            snprintf(h, sizeof h, "[%zu]", m + 1);
            mlprof__sb_printf(out, " %13s", h);
        }
        mlprof__sb_putc(out, '\n');
    } else {
        mlprof__sb_puts(out, ",\"counter_ranges\":{");
        range_summary(l, format, out);
        mlprof__sb_puts(out, ",\"metrics\":[");
        for (size_t m = 0; m < rt->nmetric; m++) {
            if (m)
                mlprof__sb_putc(out, ',');
            mlprof__sb_json_str(out, rt->metric[m], strlen(rt->metric[m]));
        }
        mlprof__sb_puts(out, "],\"rows\":[");
    }
    static const char *const dev_keys[] = {"device", NULL};
    for (size_t j = 0; j < shown; j++) {
        size_t i = rt->idx[j];
        const an_event *e = &t->ev[i];
        int64_t dev;
        if (!has_int_arg(t, e, dev_keys, &dev))
            dev = e->pid;
        range_ops(t, l, i, &stack, &bottom, &top);
        if (format == AN_CSV) {
            mlprof__sb_printf(out, "%zu,", j);
            if (!an_is_named_id(dev))
                mlprof__sb_printf(out, "%lld", (long long)dev);
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, e->name);
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, sb_str(&stack));
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, sb_str(&bottom));
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, sb_str(&top));
            for (size_t m = 0; m < rt->nmetric; m++) {
                mlprof__sb_putc(out, ',');
                put_counter_value(out, range_counter(t, e, rt->metric[m]), format);
            }
            mlprof__sb_putc(out, '\n');
        } else if (format == AN_TABLE) {
            size_t n = strlen(e->name);
            mlprof__sb_printf(out, "  %5zu  ", j);
            mlprof__sb_printf(out, n > 40 ? "%.37s..." : "%-40s", e->name);
            mlprof__sb_printf(out, bottom.len > 24 ? " %.21s..." : " %-24s", bottom.len ? sb_str(&bottom) : "-");
            mlprof__sb_printf(out, top.len > 24 ? " %.21s..." : " %-24s", top.len ? sb_str(&top) : "-");
            for (size_t m = 0; m < rt->nmetric; m++)
                put_counter_value(out, range_counter(t, e, rt->metric[m]), format);
            mlprof__sb_putc(out, '\n');
        } else {
            mlprof__sb_printf(out, "%s{\"index\":%zu,\"device\":", j ? "," : "", j);
            put_id_json(out, dev);
            mlprof__sb_puts(out, ",\"name\":");
            mlprof__sb_json_str(out, e->name, strlen(e->name));
            mlprof__sb_puts(out, ",\"op_stack\":");
            put_json_or_null(out, &stack);
            mlprof__sb_puts(out, ",\"bottom_op\":");
            put_json_or_null(out, &bottom);
            mlprof__sb_puts(out, ",\"top_op\":");
            put_json_or_null(out, &top);
            mlprof__sb_puts(out, ",\"counters\":{");
            for (size_t m = 0; m < rt->nmetric; m++) {
                if (m)
                    mlprof__sb_putc(out, ',');
                mlprof__sb_json_str(out, rt->metric[m], strlen(rt->metric[m]));
                mlprof__sb_putc(out, ':');
                put_counter_value(out, range_counter(t, e, rt->metric[m]), format);
            }
            mlprof__sb_puts(out, "}}");
        }
    }
    if (format == AN_JSON)
        mlprof__sb_printf(out, "],\"rows_shown\":%zu}", shown);
    else if (format == AN_TABLE && shown < rt->n)
        mlprof__sb_printf(out, "  (%zu more)\n", rt->n - shown);
    int failed = stack.failed || bottom.failed || top.failed;
    mlprof__sb_free(&stack);
    mlprof__sb_free(&bottom);
    mlprof__sb_free(&top);
    return failed ? -1 : 0;
}

/* The kernels by name as CSV: what --format csv writes for a trace without
 * counter ranges. */
static void kernels_csv(const an_trace *t, const gpu_row *rows, size_t shown, mlprof__sb *out)
{
    mlprof__sb_puts(out, "name,kind,count,time_ns,bottom_op,top_op\n");
    for (size_t i = 0; i < shown; i++) {
        const gpu_row *k = &rows[i];
        mlprof__sb_csv(out, k->name);
        mlprof__sb_printf(out, ",%s,%llu,%lld,", k_kind_names[k->kind], (unsigned long long)k->count,
                          (long long)k->time);
        if (k->bottom >= 0)
            mlprof__sb_csv(out, t->ev[k->bottom].name);
        mlprof__sb_putc(out, ',');
        if (k->top >= 0)
            mlprof__sb_csv(out, t->ev[k->top].name);
        mlprof__sb_putc(out, '\n');
    }
}

/* ------------------------------------------------ HTA's analyses */

void an_gpu_options_default(an_gpu_options *o)
{
    memset(o, 0, sizeof *o);
    o->kernel_wait_ns = 30;             /* HTA's consecutive_kernel_delay */
    o->runtime_cutoff_ns = 50000;       /* HTA's runtime_cutoff: 50 us */
    o->launch_delay_cutoff_ns = 100000; /* HTA's launch_delay_cutoff: 100 us */
    o->csv = AN_GPU_CSV_DEFAULT;
}

enum { IDLE_HOST = 0, IDLE_KERNEL = 1, IDLE_OTHER = 2 };
static const char *const k_idle_keys[] = {"host_wait", "kernel_wait", "other"};

/* The runtime call that launched GPU event i, or -1 when it has none (linked
 * by an External id only, or not at all). */
static int32_t launch_call(const an_trace *t, const an_gpu_links *l, size_t i)
{
    int32_t k = l->launch[i];
    return k >= 0 && is_runtime(&t->ev[k]) ? k : -1;
}

/* The idle time of one stream, gap by gap in start order: a gap is the time
 * from the end of the stream's events so far to the next start (events that
 * overlap leave none), so the gaps add up to the stream's span less its busy
 * time. Its cause, as HTA's idle time breakdown: host wait when the next
 * event's runtime call started after that end (the CPU had not enqueued it
 * yet), else kernel wait when the gap is under kernel_wait_ns, else other. */
static int stream_idle(const an_trace *t, const an_gpu_links *l, track_use *s, int64_t kernel_wait_ns)
{
    in_order *v = mlprof__malloc((s->nev ? s->nev : 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t j = 0; j < s->nev; j++)
        v[j] = (in_order){0, t->ev[s->ev[j]].ts, s->ev[j]};
    mlprof__sort(v, s->nev, sizeof *v, in_order_cmp);
    int64_t end = 0;
    for (size_t j = 0; j < s->nev; j++) {
        const an_event *e = &t->ev[v[j].i];
        if (j && e->ts > end) {
            int64_t gap = e->ts - end;
            int32_t call = launch_call(t, l, v[j].i);
            int c = call >= 0 && t->ev[call].ts > end ? IDLE_HOST : gap < kernel_wait_ns ? IDLE_KERNEL : IDLE_OTHER;
            s->idle[c] += gap;
            s->gaps[c]++;
        }
        if (j == 0 || e->ts + e->dur > end)
            end = e->ts + e->dur;
    }
    mlprof__free(v);
    return 0;
}

/* One launch: a GPU event and the runtime call that launched it. */
typedef struct launch_rec {
    int64_t pid;           /* the device's track */
    size_t kernel;         /* the GPU event */
    int32_t call;          /* its runtime call */
    int memory;            /* a cudaMemcpyAsync or cudaMemsetAsync */
    int64_t delay, cpu, gpu; /* kernel start - call start; call's and kernel's durations */
} launch_rec;

/* 1: a call that launches one kernel (CUDA's forms, HIP's); 2: an
 * asynchronous copy or memset (HTA's memory events); 0: neither (a graph
 * launch runs many kernels: its delay is no one kernel's). */
static int launch_kind(const an_event *e)
{
    static const char *const hip[] = {"hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel",
                                      "hipExtModuleLaunchKernel", NULL};
    static const char *const mem[] = {"cudaMemcpyAsync", "cudaMemsetAsync", "hipMemcpyAsync", "hipMemsetAsync",
                                      NULL};
    if (!is_runtime(e))
        return 0;
    if (is_kernel_launch(e))
        return 1;
    for (const char *const *p = hip; *p; p++) {
        if (strncmp(e->name, *p, strlen(*p)) == 0)
            return 1;
    }
    for (const char *const *p = mem; *p; p++) {
        if (strncmp(e->name, *p, strlen(*p)) == 0)
            return 2;
    }
    return 0;
}

static int launch_by_device(const void *pa, const void *pb)
{
    const launch_rec *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->kernel < b->kernel ? -1 : a->kernel > b->kernel;
}

static int launch_by_delay(const void *pa, const void *pb)
{
    const launch_rec *a = pa, *b = pb;
    if (a->delay != b->delay)
        return a->delay > b->delay ? -1 : 1;
    return a->kernel < b->kernel ? -1 : a->kernel > b->kernel;
}

static int launch_by_cpu(const void *pa, const void *pb)
{
    const launch_rec *a = pa, *b = pb;
    if (a->cpu != b->cpu)
        return a->cpu > b->cpu ? -1 : 1;
    return a->kernel < b->kernel ? -1 : a->kernel > b->kernel;
}

static int launch_by_time(const void *pa, const void *pb)
{
    const launch_rec *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->kernel < b->kernel ? -1 : a->kernel > b->kernel; /* t->ev is in time order */
}

/* Every launch of the trace, by device. */
static int launches_make(const an_trace *t, const an_gpu_links *l, launch_rec **recs, size_t *n)
{
    size_t cap = 0;
    *recs = NULL;
    *n = 0;
    for (size_t i = 0; i < t->nev; i++) {
        if (!l->kind[i])
            continue;
        int32_t call = launch_call(t, l, i);
        int kind = call >= 0 ? launch_kind(&t->ev[call]) : 0;
        if (!kind)
            continue;
        launch_rec *p = mlprof__grow(*recs, &cap, *n, sizeof **recs, 256);
        if (!p)
            return -1;
        *recs = p;
        const an_event *k = &t->ev[i], *c = &t->ev[call];
        p[(*n)++] = (launch_rec){k->pid, i, call, kind == 2, k->ts - c->ts, c->dur, k->dur};
    }
    mlprof__sort(*recs, *n, sizeof **recs, launch_by_device);
    return 0;
}

static int i64_cmp(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

/* A distribution: mean, extremes and percentiles interpolated linearly
 * between the closest ranks (pandas' describe, which HTA's frames give). */
typedef struct dist {
    double mean, p50, p90, p99;
    int64_t min, max, sum;
} dist;

static double quantile(const int64_t *v, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n)
        return (double)v[n - 1];
    return (double)v[lo] + ((double)v[lo + 1] - (double)v[lo]) * (pos - (double)lo);
}

static void dist_of(int64_t *v, size_t n, dist *d)
{
    memset(d, 0, sizeof *d);
    if (!n)
        return;
    mlprof__sort(v, n, sizeof *v, i64_cmp);
    for (size_t i = 0; i < n; i++)
        d->sum += v[i];
    d->mean = (double)d->sum / (double)n;
    d->min = v[0];
    d->max = v[n - 1];
    d->p50 = quantile(v, n, 0.50);
    d->p90 = quantile(v, n, 0.90);
    d->p99 = quantile(v, n, 0.99);
}

/* A device's launch statistics. */
typedef struct launch_stats {
    size_t n, memory, short_kernels, runtime_outliers, delay_outliers;
    dist delay, cpu, gpu;
} launch_stats;

static int launch_stats_of(const launch_rec *r, size_t n, const an_gpu_options *go, launch_stats *s)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    int64_t *v = mlprof__malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < n; i++) {
        s->memory += (size_t)r[i].memory;
        s->short_kernels += r[i].cpu <= go->runtime_cutoff_ns && r[i].gpu < r[i].cpu;
        s->runtime_outliers += r[i].cpu > go->runtime_cutoff_ns;
        s->delay_outliers += r[i].delay > go->launch_delay_cutoff_ns;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = r[i].delay;
    dist_of(v, n, &s->delay);
    for (size_t i = 0; i < n; i++)
        v[i] = r[i].cpu;
    dist_of(v, n, &s->cpu);
    for (size_t i = 0; i < n; i++)
        v[i] = r[i].gpu;
    dist_of(v, n, &s->gpu);
    mlprof__free(v);
    return 0;
}

static void put_num_json(mlprof__sb *out, double v)
{
    if (v == (double)(int64_t)v)
        mlprof__sb_printf(out, "%lld", (long long)v);
    else
        mlprof__sb_printf(out, "%.3f", v);
}

static void put_dist_json(mlprof__sb *out, const char *key, const dist *d, size_t n)
{
    mlprof__sb_printf(out, ",\"%s\":", key);
    if (!n) {
        mlprof__sb_puts(out, "null");
        return;
    }
    mlprof__sb_printf(out, "{\"sum\":%lld,\"mean\":", (long long)d->sum);
    put_num_json(out, d->mean);
    mlprof__sb_printf(out, ",\"min\":%lld,\"p50\":", (long long)d->min);
    put_num_json(out, d->p50);
    mlprof__sb_puts(out, ",\"p90\":");
    put_num_json(out, d->p90);
    mlprof__sb_puts(out, ",\"p99\":");
    put_num_json(out, d->p99);
    mlprof__sb_printf(out, ",\"max\":%lld}", (long long)d->max);
}

static void put_launch_json(const an_trace *t, mlprof__sb *out, const launch_rec *r)
{
    const an_event *k = &t->ev[r->kernel], *c = &t->ev[r->call];
    mlprof__sb_puts(out, "{\"kernel\":");
    mlprof__sb_json_str(out, k->name, strlen(k->name));
    mlprof__sb_puts(out, ",\"launch\":");
    mlprof__sb_json_str(out, c->name, strlen(c->name));
    mlprof__sb_printf(out, ",\"call_ts_ns\":%lld,\"kernel_ts_ns\":%lld,\"cpu_duration_ns\":%lld,\"gpu_duration_ns\":%lld,"
                           "\"launch_delay_ns\":%lld}",
                      (long long)c->ts, (long long)k->ts, (long long)r->cpu, (long long)r->gpu, (long long)r->delay);
}

/* The outliers of one kind, worst first, at most top (0: all): r is the
 * device's slice, reordered. */
static size_t outliers_first(launch_rec *r, size_t n, int by_delay, int64_t cutoff, int top)
{
    mlprof__sort(r, n, sizeof *r, by_delay ? launch_by_delay : launch_by_cpu);
    size_t k = 0;
    while (k < n && (by_delay ? r[k].delay : r[k].cpu) > cutoff && (top <= 0 || k < (size_t)top))
        k++;
    return k;
}

static void launches_json(const an_trace *t, launch_rec *r, size_t n, const an_gpu_options *go, int top,
                          mlprof__sb *out, int *rc)
{
    launch_stats s;
    if (launch_stats_of(r, n, go, &s) != 0) {
        *rc = -1;
        return;
    }
    mlprof__sb_printf(out, ",\"launches\":{\"count\":%zu,\"kernel_launches\":%zu,\"memory_launches\":%zu", s.n,
                      s.n - s.memory, s.memory);
    put_dist_json(out, "launch_delay_ns", &s.delay, s.n);
    put_dist_json(out, "cpu_duration_ns", &s.cpu, s.n);
    put_dist_json(out, "gpu_duration_ns", &s.gpu, s.n);
    mlprof__sb_printf(out, ",\"short_gpu_kernels\":%zu,\"runtime_outliers\":%zu,\"launch_delay_outliers\":%zu",
                      s.short_kernels, s.runtime_outliers, s.delay_outliers);
    for (int by_delay = 1; by_delay >= 0; by_delay--) {
        size_t k = outliers_first(r, n, by_delay,
                                  by_delay ? go->launch_delay_cutoff_ns : go->runtime_cutoff_ns, top);
        mlprof__sb_puts(out, by_delay ? ",\"launch_delay_outlier_rows\":[" : ",\"runtime_outlier_rows\":[");
        for (size_t j = 0; j < k; j++) {
            if (j)
                mlprof__sb_putc(out, ',');
            put_launch_json(t, out, &r[j]);
        }
        mlprof__sb_putc(out, ']');
    }
    mlprof__sb_putc(out, '}');
    mlprof__sort(r, n, sizeof *r, launch_by_time);
}

static void put_dist_row(mlprof__sb *out, const char *what, const dist *d)
{
    mlprof__sb_printf(out, "    %-14s", what);
    put_duration_cell(out, (int64_t)llround(d->mean));
    put_duration_cell(out, d->min);
    put_duration_cell(out, (int64_t)llround(d->p50));
    put_duration_cell(out, (int64_t)llround(d->p90));
    put_duration_cell(out, (int64_t)llround(d->p99));
    mlprof__sb tmp;
    mlprof__sb_init(&tmp);
    an_put_duration(&tmp, d->max);
    mlprof__sb_printf(out, "%12s\n", tmp.data ? tmp.data : ""); /* no trailing blanks */
    mlprof__sb_free(&tmp);
}

static void launches_table(const an_trace *t, launch_rec *r, size_t n, const an_gpu_options *go, int top,
                           mlprof__sb *out, int *rc)
{
    if (!n)
        return;
    launch_stats s;
    if (launch_stats_of(r, n, go, &s) != 0) {
        *rc = -1;
        return;
    }
    mlprof__sb_printf(out, "  launches: %zu (%zu kernel, %zu copy or memset); launch delay is kernel start less "
                           "call start\n    %-14s%12s  %12s  %12s  %12s  %12s  %12s\n",
                      s.n, s.n - s.memory, s.memory, "", "mean", "min", "p50", "p90", "p99", "max");
    put_dist_row(out, "launch delay", &s.delay);
    put_dist_row(out, "call (CPU)", &s.cpu);
    put_dist_row(out, "kernel (GPU)", &s.gpu);
    mlprof__sb_printf(out, "    outliers: %zu short GPU kernels (call at most ", s.short_kernels);
    an_put_duration(out, go->runtime_cutoff_ns);
    mlprof__sb_printf(out, ", kernel shorter than its call), %zu calls over ", s.runtime_outliers);
    an_put_duration(out, go->runtime_cutoff_ns);
    mlprof__sb_printf(out, ", %zu launch delays over ", s.delay_outliers);
    an_put_duration(out, go->launch_delay_cutoff_ns);
    mlprof__sb_puts(out, "\n");
    for (int by_delay = 1; by_delay >= 0; by_delay--) {
        size_t k = outliers_first(r, n, by_delay,
                                  by_delay ? go->launch_delay_cutoff_ns : go->runtime_cutoff_ns, top);
        if (!k)
            continue;
        mlprof__sb_printf(out, "    %s, worst first:\n      %12s  %12s  %12s  %-24s %s\n",
                          by_delay ? "launch delay outliers" : "runtime outliers (long calls)", "delay", "call",
                          "kernel", "call name", "kernel name");
        for (size_t j = 0; j < k; j++) {
            mlprof__sb_puts(out, "      ");
            put_duration_cell(out, r[j].delay);
            put_duration_cell(out, r[j].cpu);
            put_duration_cell(out, r[j].gpu);
            const char *cn = t->ev[r[j].call].name, *kn = t->ev[r[j].kernel].name;
            mlprof__sb_printf(out, strlen(cn) > 24 ? "%.21s... " : "%-24s ", cn);
            mlprof__sb_printf(out, strlen(kn) > 60 ? "%.57s...\n" : "%s\n", kn);
        }
    }
    mlprof__sort(r, n, sizeof *r, launch_by_time);
}

static double comm_overlapped_pct(const track_use *d, int64_t cc)
{
    return d->uni[AN_GPU_COMM] > 0 ? 100.0 * (double)cc / (double)d->uni[AN_GPU_COMM] : NAN;
}

/* The CSV tables of --csv-table idle, launches and overlap. */
static void hta_csv(const an_trace *t, const track_use *uses, size_t nuse, const launch_rec *recs, size_t nrec,
                    const an_gpu_options *go, mlprof__sb *out)
{
    char label[200], slabel[200];
    if (go->csv == AN_GPU_CSV_IDLE) {
        mlprof__sb_puts(out, "device,stream,stream_name,events,busy_ns,idle_ns,host_wait_ns,kernel_wait_ns,other_ns,"
                             "host_wait_gaps,kernel_wait_gaps,other_gaps\n");
    } else if (go->csv == AN_GPU_CSV_LAUNCHES) {
        mlprof__sb_puts(out, "device,stream,kernel,launch,memory,call_ts_ns,kernel_ts_ns,cpu_duration_ns,"
                             "gpu_duration_ns,launch_delay_ns,short_gpu_kernel,runtime_outlier,launch_delay_outlier\n");
    } else {
        mlprof__sb_puts(out, "device,compute_summed_ns,communication_summed_ns,memory_summed_ns,compute_union_ns,"
                             "communication_union_ns,memory_union_ns,busy_ns,span_ns,compute_communication_ns,"
                             "compute_memory_ns,communication_memory_ns,communication_overlapped_pct\n");
    }
    for (size_t u = 0; u < nuse; u++) {
        const track_use *d = &uses[u];
        if (!d->whole)
            continue;
        track_label(t, d, label, sizeof label);
        if (go->csv == AN_GPU_CSV_OVERLAP) {
            int64_t cc = span_overlap(d->spans[1], d->n[1], d->spans[2], d->n[2]);
            mlprof__sb_csv(out, label);
            mlprof__sb_printf(out, ",%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,", (long long)d->time[1],
                              (long long)d->time[2], (long long)d->time[3], (long long)d->uni[1],
                              (long long)d->uni[2], (long long)d->uni[3], (long long)d->busy, (long long)d->span,
                              (long long)cc,
                              (long long)span_overlap(d->spans[1], d->n[1], d->spans[3], d->n[3]),
                              (long long)span_overlap(d->spans[2], d->n[2], d->spans[3], d->n[3]));
            double pct = comm_overlapped_pct(d, cc);
            if (!isnan(pct))
                mlprof__sb_printf(out, "%.2f", pct);
            mlprof__sb_putc(out, '\n');
            continue;
        }
        if (go->csv == AN_GPU_CSV_IDLE) {
            for (size_t s = 0; s < nuse; s++) {
                const track_use *st = &uses[s];
                if (st->pid != d->pid || st->whole)
                    continue;
                mlprof__sb_csv(out, label);
                mlprof__sb_putc(out, ',');
                if (st->stream >= 0)
                    mlprof__sb_printf(out, "%lld", (long long)st->stream);
                mlprof__sb_putc(out, ',');
                mlprof__sb_csv(out, track_label(t, st, slabel, sizeof slabel));
                mlprof__sb_printf(out, ",%llu,%lld,%lld,%lld,%lld,%lld,%llu,%llu,%llu\n",
                                  (unsigned long long)st->count[0], (long long)st->busy,
                                  (long long)(st->span - st->busy), (long long)st->idle[0], (long long)st->idle[1],
                                  (long long)st->idle[2], (unsigned long long)st->gaps[0],
                                  (unsigned long long)st->gaps[1], (unsigned long long)st->gaps[2]);
            }
            continue;
        }
        for (size_t j = d->lfirst; j < d->lfirst + d->ln && j < nrec; j++) {
            const launch_rec *r = &recs[j];
            const an_event *k = &t->ev[r->kernel], *c = &t->ev[r->call];
            const track_use *st = NULL;
            for (size_t s = 0; s < nuse && !st; s++) {
                if (!uses[s].whole && uses[s].pid == k->pid && uses[s].tid == k->tid)
                    st = &uses[s];
            }
            mlprof__sb_csv(out, label);
            mlprof__sb_putc(out, ',');
            if (st && st->stream >= 0)
                mlprof__sb_printf(out, "%lld", (long long)st->stream);
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, k->name);
            mlprof__sb_putc(out, ',');
            mlprof__sb_csv(out, c->name);
            mlprof__sb_printf(out, ",%d,%lld,%lld,%lld,%lld,%lld,%d,%d,%d\n", r->memory, (long long)c->ts,
                              (long long)k->ts, (long long)r->cpu, (long long)r->gpu, (long long)r->delay,
                              r->cpu <= go->runtime_cutoff_ns && r->gpu < r->cpu, r->cpu > go->runtime_cutoff_ns,
                              r->delay > go->launch_delay_cutoff_ns);
        }
    }
}

int an_kernels(an_trace *t, int format, int top, mlprof__sb *out, mlprof__sb *notes)
{
    an_gpu_options go;
    an_gpu_options_default(&go);
    return an_kernels_with(t, format, top, &go, out, notes);
}

int an_kernels_with(an_trace *t, int format, int top, const an_gpu_options *go, mlprof__sb *out, mlprof__sb *notes)
{
    an_gpu_links l;
    if (an_gpu_link(t, &l) != 0)
        return -1;
    track_use *uses = NULL;
    size_t nuse = 0, capuse = 0;
    int rc = 0;
    int64_t all_kernel_time = 0;
    static const char *const k_device_keys[] = {"device", NULL}, *const k_stream_keys[] = {"stream", NULL};
    an_keyset dev_keys, stream_keys;
    an_keyset_init(t, k_device_keys, &dev_keys);
    an_keyset_init(t, k_stream_keys, &stream_keys);
    for (size_t i = 0; rc == 0 && i < t->nev; i++) {
        if (!l.kind[i])
            continue;
        const an_event *e = &t->ev[i];
        track_use *dev = use_for(&uses, &nuse, &capuse, e->pid, 0, 1);
        track_use *str = dev ? use_for(&uses, &nuse, &capuse, e->pid, e->tid, 0) : NULL;
        dev = dev ? use_for(&uses, &nuse, &capuse, e->pid, 0, 1) : NULL; /* the array may have moved */
        size_t *evp = str ? mlprof__grow(str->ev, &str->capev, str->nev, sizeof *str->ev, 64) : NULL;
        if (evp) {
            str->ev = evp;
            evp[str->nev++] = i;
        }
        if (!dev || !str || !evp || use_add(dev, l.kind[i], e) != 0 || use_add(str, l.kind[i], e) != 0) {
            rc = -1;
            break;
        }
        if (str->count[0] == 1) { /* a new stream: its number, from its name first */
            str->stream = stream_in_name(an_thread_name(t, e->pid, e->tid));
            if (str->stream < 0 && !an_is_named_id(e->tid))
                str->stream = e->tid;
        }
        const an_arg *a = an_event_arg_in(t, e, &stream_keys);
        if (str->stream < 0 && a && a->type == AN_NUM && a->num >= 0)
            str->stream = an_to_i64(a->num);
        a = an_event_arg_in(t, e, &dev_keys);
        int64_t d = a && a->type == AN_NUM && a->num >= 0 ? an_to_i64(a->num) : -1;
        if (d >= 0 && dev->device != -2)
            dev->device = dev->device == -1 || dev->device == d ? d : -2;
        if (strcasecmp(e->cat, "mtia_ccp_events") == 0)
            dev->mtia = 1;
        all_kernel_time += e->dur;
    }
    gpu_row *optimes = NULL;
    size_t nop = 0;
    if (rc == 0 && gpu_rows(t, &l, 1, &optimes, &nop) != 0)
        rc = -1;
    size_t shown_ops = top > 0 && (size_t)top < nop ? (size_t)top : nop;

    /* the kernels by name, each with the operators of its earliest launch */
    gpu_row *krows = NULL;
    size_t nk = 0;
    if (rc == 0 && gpu_rows(t, &l, 0, &krows, &nk) != 0)
        rc = -1;
    size_t shown_k = top > 0 && (size_t)top < nk ? (size_t)top : nk;
    metric_row *mrows = NULL;
    size_t nm = 0;
    if (rc == 0 && metric_rows(t, &mrows, &nm) != 0)
        rc = -1;
    size_t shown_m = top > 0 && (size_t)top < nm ? (size_t)top : nm;
    range_table rt;
    memset(&rt, 0, sizeof rt);
    if (rc == 0 && range_table_make(t, &rt) != 0)
        rc = -1;
    size_t shown_r = top > 0 && (size_t)top < rt.n ? (size_t)top : rt.n;
    if (rc == 0 && notes)
        range_notes(t, &l, notes);

    for (size_t u = 0; rc == 0 && u < nuse; u++) {
        track_use *x = &uses[u];
        for (int k = 0; k < 4; k++) {
            x->n[k] = span_union(x->spans[k], x->n[k]);
            x->uni[k] = span_length(x->spans[k], x->n[k]);
        }
        x->busy = x->uni[0];
        x->span = x->n[0] ? x->spans[0][x->n[0] - 1].b - x->spans[0][0].a : 0;
        if (!x->whole && stream_idle(t, &l, x, go->kernel_wait_ns) != 0)
            rc = -1;
    }
    launch_rec *recs = NULL;
    size_t nrec = 0;
    if (rc == 0 && launches_make(t, &l, &recs, &nrec) != 0)
        rc = -1;
    for (size_t u = 0, j = 0; rc == 0 && u < nuse; u++) { /* each device's slice of the launches */
        track_use *x = &uses[u];
        if (!x->whole)
            continue;
        for (j = 0; j < nrec && recs[j].pid != x->pid; j++)
            ;
        x->lfirst = j;
        while (j < nrec && recs[j].pid == x->pid)
            j++;
        x->ln = j - x->lfirst;
    }
    char label[200];
    if (rc == 0 && format == AN_CSV) {
        if (go->csv == AN_GPU_CSV_IDLE || go->csv == AN_GPU_CSV_LAUNCHES || go->csv == AN_GPU_CSV_OVERLAP)
            hta_csv(t, uses, nuse, recs, nrec, go, out);
        else if (go->csv == AN_GPU_CSV_RANGES || (go->csv == AN_GPU_CSV_DEFAULT && rt.n))
            rc = range_rows(t, &l, &rt, shown_r, format, out);
        else
            kernels_csv(t, krows, shown_k, out);
    } else if (rc == 0 && format == AN_JSON) {
        mlprof__sb_puts(out, "{\"trace\":");
        mlprof__sb_json_str(out, t->path, strlen(t->path));
        mlprof__sb_printf(out, ",\"gpu_events\":%zu,\"linked_by_correlation\":%zu,\"linked_by_flow\":%zu,"
                               "\"linked_by_external_id\":%zu,\"unlinked\":%zu,\"kernel_time_ns\":%lld,\"thresholds\":{\"kernel_wait_ns\":%lld,"
                               "\"runtime_cutoff_ns\":%lld,\"launch_delay_cutoff_ns\":%lld},\"devices\":[",
                          l.gpu_events, l.by_correlation, l.by_flow, l.by_external, l.unlinked,
                          (long long)all_kernel_time,
                          (long long)go->kernel_wait_ns, (long long)go->runtime_cutoff_ns,
                          (long long)go->launch_delay_cutoff_ns);
        int firstd = 1;
        for (size_t u = 0; u < nuse; u++) {
            const track_use *d = &uses[u];
            if (!d->whole)
                continue;
            int64_t busy = d->busy, span_all = d->span;
            mlprof__sb_printf(out, "%s{\"pid\":", firstd ? "" : ",");
            put_id_json(out, d->pid);
            mlprof__sb_puts(out, ",\"name\":");
            firstd = 0;
            track_label(t, d, label, sizeof label);
            mlprof__sb_json_str(out, label, strlen(label));
            int64_t devno = device_number(t, d);
            mlprof__sb_puts(out, ",\"device\":");
            put_id_json(out, devno);
            char dname[200];
            const char *dn = device_name(t, devno, dname, sizeof dname);
            mlprof__sb_puts(out, ",\"device_name\":");
            dn ? mlprof__sb_json_str(out, dn, strlen(dn)) : mlprof__sb_puts(out, "null");
            mlprof__sb_printf(out,
                              ",\"compute_ns\":%lld,\"communication_ns\":%lld,\"memory_ns\":%lld,\"kernels\":%llu,"
                              "\"busy_ns\":%lld,\"span_ns\":%lld,\"idle_ns\":%lld,\"overlap_compute_communication_ns\":%lld",
                              (long long)d->time[1], (long long)d->time[2], (long long)d->time[3],
                              (unsigned long long)d->count[0], (long long)busy, (long long)span_all,
                              (long long)(span_all - busy),
                              (long long)span_overlap(d->spans[1], d->n[1], d->spans[2], d->n[2]));
            /* the sums above count overlapping kernels twice; the union counts time */
            int64_t cc = span_overlap(d->spans[1], d->n[1], d->spans[2], d->n[2]);
            mlprof__sb_printf(out,
                              ",\"union_ns\":{\"compute\":%lld,\"communication\":%lld,\"memory\":%lld},"
                              "\"overlap_ns\":{\"compute_communication\":%lld,\"compute_memory\":%lld,"
                              "\"communication_memory\":%lld},\"communication_overlapped_pct\":",
                              (long long)d->uni[1], (long long)d->uni[2], (long long)d->uni[3], (long long)cc,
                              (long long)span_overlap(d->spans[1], d->n[1], d->spans[3], d->n[3]),
                              (long long)span_overlap(d->spans[2], d->n[2], d->spans[3], d->n[3]));
            double pct = comm_overlapped_pct(d, cc);
            if (isnan(pct))
                mlprof__sb_puts(out, "null");
            else
                mlprof__sb_printf(out, "%.2f", pct);
            launches_json(t, recs ? recs + d->lfirst : NULL, d->ln, go, top, out, &rc);
            mlprof__sb_puts(out, ",\"streams\":[");
            int firsts = 1;
            for (size_t s = 0; s < nuse; s++) {
                const track_use *st = &uses[s];
                if (st->pid != d->pid || st->whole)
                    continue;
                int64_t sb = st->busy, ss = st->span;
                mlprof__sb_printf(out, "%s{\"tid\":", firsts ? "" : ",");
                put_id_json(out, st->tid);
                mlprof__sb_puts(out, ",\"stream\":");
                put_id_json(out, st->stream);
                mlprof__sb_puts(out, ",\"name\":");
                firsts = 0;
                track_label(t, st, label, sizeof label);
                mlprof__sb_json_str(out, label, strlen(label));
                mlprof__sb_printf(out, ",\"kernels\":%llu,\"busy_ns\":%lld,\"idle_ns\":%lld,\"idle_breakdown\":{",
                                  (unsigned long long)st->count[0], (long long)sb, (long long)(ss - sb));
                for (int c = 0; c < 3; c++)
                    mlprof__sb_printf(out, "%s\"%s_ns\":%lld,\"%s_gaps\":%llu", c ? "," : "", k_idle_keys[c],
                                      (long long)st->idle[c], k_idle_keys[c], (unsigned long long)st->gaps[c]);
                mlprof__sb_puts(out, "}}");
            }
            mlprof__sb_puts(out, "]}");
        }
        mlprof__sb_puts(out, "],\"operators\":[");
        for (size_t i = 0; i < shown_ops; i++) {
            mlprof__sb_puts(out, i ? ",{\"name\":" : "{\"name\":");
            mlprof__sb_json_str(out, optimes[i].name, strlen(optimes[i].name));
            mlprof__sb_printf(out, ",\"gpu_time_ns\":%lld,\"kernels\":%llu}", (long long)optimes[i].time,
                              (unsigned long long)optimes[i].count);
        }
        mlprof__sb_puts(out, "],\"kernels\":[");
        for (size_t i = 0; i < shown_k; i++) {
            const gpu_row *k = &krows[i];
            mlprof__sb_puts(out, i ? ",{\"name\":" : "{\"name\":");
            mlprof__sb_json_str(out, k->name, strlen(k->name));
            mlprof__sb_printf(out, ",\"kind\":\"%s\",\"count\":%llu,\"time_ns\":%lld,\"bottom_op\":",
                              k_kind_names[k->kind], (unsigned long long)k->count, (long long)k->time);
            const char *bo = k->bottom >= 0 ? t->ev[k->bottom].name : NULL;
            const char *to = k->top >= 0 ? t->ev[k->top].name : NULL;
            bo ? mlprof__sb_json_str(out, bo, strlen(bo)) : mlprof__sb_puts(out, "null");
            mlprof__sb_puts(out, ",\"top_op\":");
            to ? mlprof__sb_json_str(out, to, strlen(to)) : mlprof__sb_puts(out, "null");
            mlprof__sb_putc(out, '}');
        }
        mlprof__sb_puts(out, "],\"kernel_metrics\":[");
        kernel_metrics(mrows, nm, shown_m, format, out);
        mlprof__sb_putc(out, ']');
        rc = range_rows(t, &l, &rt, shown_r, format, out);
        mlprof__sb_puts(out, "}\n");
    } else if (rc == 0) {
        mlprof__sb_printf(out, "trace: %s\n%zu GPU events: %zu linked to their launch by correlation id, %zu by "
                               "flow, %zu to their operator by External id, %zu not linked\n",
                          t->path, l.gpu_events, l.by_correlation, l.by_flow, l.by_external, l.unlinked);
        if (!l.gpu_events)
            mlprof__sb_puts(out, "(no kernels, copies or memsets in this trace)\n");
        for (size_t u = 0; u < nuse; u++) {
            const track_use *d = &uses[u];
            if (!d->whole)
                continue;
            int64_t busy = d->busy, span_all = d->span;
            int64_t kt = d->time[1] + d->time[2] + d->time[3];
            mlprof__sb_printf(out, "\n%s: %llu GPU events, busy ", track_label(t, d, label, sizeof label),
                              (unsigned long long)d->count[0]);
            an_put_duration(out, busy);
            mlprof__sb_puts(out, " of ");
            an_put_duration(out, span_all);
            mlprof__sb_puts(out, " (idle ");
            an_put_duration(out, span_all - busy);
            mlprof__sb_puts(out, ", ");
            put_pct(out, span_all - busy, span_all);
            mlprof__sb_puts(out, ")\n");
            char dname[200];
            const char *dn = device_name(t, device_number(t, d), dname, sizeof dname);
            if (dn)
                mlprof__sb_printf(out, "  device: %s\n", dn);
            mlprof__sb_printf(out, "  %-14s %6s  %12s  %6s  %12s  %s\n", "kind", "events", "summed", "share",
                              "union", "of busy");
            for (int k = 1; k < 4; k++) {
                mlprof__sb_printf(out, "  %-14s %6llu  ", k_kind_names[k], (unsigned long long)d->count[k]);
                put_duration_cell(out, d->time[k]);
                put_pct(out, d->time[k], kt);
                mlprof__sb_puts(out, "  ");
                put_duration_cell(out, d->uni[k]);
                put_pct(out, d->uni[k], busy);
                mlprof__sb_putc(out, '\n');
            }
            mlprof__sb_puts(out, "  (summed: the events' durations added, overlapping ones counted twice; union: "
                                 "time with one running)\n");
            int64_t cc = span_overlap(d->spans[1], d->n[1], d->spans[2], d->n[2]);
            if ((d->count[1] != 0) + (d->count[2] != 0) + (d->count[3] != 0) > 1) {
                mlprof__sb_puts(out, "  overlap (both kinds running): compute and communication ");
                an_put_duration(out, cc);
                mlprof__sb_puts(out, ", compute and memory ");
                an_put_duration(out, span_overlap(d->spans[1], d->n[1], d->spans[3], d->n[3]));
                mlprof__sb_puts(out, ", communication and memory ");
                an_put_duration(out, span_overlap(d->spans[2], d->n[2], d->spans[3], d->n[3]));
                mlprof__sb_putc(out, '\n');
            }
            if (d->count[2]) {
                mlprof__sb_printf(out, "  communication overlapped by compute: %.2f%% of its time (", comm_overlapped_pct(d, cc));
                an_put_duration(out, cc);
                mlprof__sb_puts(out, " of ");
                an_put_duration(out, d->uni[2]);
                mlprof__sb_puts(out, ")\n");
            }
            for (size_t s = 0; s < nuse; s++) {
                const track_use *st = &uses[s];
                if (st->pid != d->pid || st->whole)
                    continue;
                int64_t sb = st->busy, ss = st->span;
                mlprof__sb_printf(out, "  %s: %llu events, busy ", track_label(t, st, label, sizeof label),
                                  (unsigned long long)st->count[0]);
                an_put_duration(out, sb);
                mlprof__sb_puts(out, ", idle ");
                an_put_duration(out, ss - sb);
                mlprof__sb_puts(out, " between them");
                if (ss - sb > 0) {
                    static const char *const why[] = {"host wait", "kernel wait", "other"};
                    for (int c = 0; c < 3; c++) {
                        mlprof__sb_printf(out, "%s%s ", c ? ", " : ": ", why[c]);
                        an_put_duration(out, st->idle[c]);
                        mlprof__sb_printf(out, " (%llu)", (unsigned long long)st->gaps[c]);
                    }
                }
                mlprof__sb_putc(out, '\n');
            }
            launches_table(t, recs ? recs + d->lfirst : NULL, d->ln, go, top, out, &rc);
        }
        if (nop) {
            mlprof__sb_puts(out, "\nGPU time by the operator that launched it (bottom level):\n");
            for (size_t i = 0; i < shown_ops; i++) {
                mlprof__sb_printf(out, "  %-40s %6llu  ", optimes[i].name, (unsigned long long)optimes[i].count);
                put_duration_cell(out, optimes[i].time);
                put_pct(out, optimes[i].time, all_kernel_time);
                mlprof__sb_putc(out, '\n');
            }
            if (shown_ops < nop)
                mlprof__sb_printf(out, "  (%zu more)\n", nop - shown_ops);
        }
        if (nk) {
            mlprof__sb_printf(out, "\nTop kernels:\n  %-40s %-13s %6s  %12s  %-24s  %s\n", "name", "kind", "count",
                              "time", "bottom operator", "top operator");
            for (size_t i = 0; i < shown_k; i++) {
                const gpu_row *k = &krows[i];
                size_t n = strlen(k->name);
                mlprof__sb_printf(out, n > 40 ? "  %.37s..." : "  %-40s", k->name);
                mlprof__sb_printf(out, " %-13s %6llu  ", k_kind_names[k->kind], (unsigned long long)k->count);
                put_duration_cell(out, k->time);
                mlprof__sb_printf(out, "%-24s  %s\n", k->bottom >= 0 ? t->ev[k->bottom].name : "-",
                                  k->top >= 0 ? t->ev[k->top].name : "-");
            }
        }
        kernel_metrics(mrows, nm, shown_m, format, out);
        if (rt.n)
            rc = range_rows(t, &l, &rt, shown_r, format, out);
    }
    for (size_t u = 0; u < nuse; u++) {
        for (int k = 0; k < 4; k++)
            mlprof__free(uses[u].spans[k]);
        mlprof__free(uses[u].ev);
    }
    mlprof__free(uses);
    mlprof__free(recs);
    mlprof__free(optimes);
    mlprof__free(krows);
    mlprof__free(mrows);
    range_table_free(&rt);
    an_gpu_links_free(&l);
    return rc == 0 && !out->failed ? 0 : -1;
}
