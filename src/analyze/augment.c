/*
 * augment.c - the launch queue and the copy bandwidth of each GPU stream over
 * time, and the trace written again with them as counter tracks. The series
 * are step functions: a sample at every change, the value holding until the
 * next one, as HTA's time series and Chrome's counters both mean them.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../common/gz.h"
#include "analyze.h"
#include "augment.h"
#include "gpu.h"
#include "json.h"

/* The categories of the calls that enqueue GPU work (CUDA's runtime and
 * driver APIs, Kineto's older names, ROCm's, MTIA's). */
static int is_runtime_call(const an_event *e)
{
    static const char *const cats[] = {"cuda_runtime", "cuda_driver", "runtime", "driver", "cuda_api",
                                       "mtia_runtime", NULL};
    if (e->ph != 'X')
        return 0;
    for (const char *const *c = cats; *c; c++) {
        if (strcasecmp(e->cat, *c) == 0)
            return 1;
    }
    return 0;
}

/* The number in a track name such as Kineto's "stream 7 ", or -1. */
static int64_t number_in_stream_name(const char *name)
{
    if (!name || strncasecmp(name, "stream", 6) != 0)
        return -1;
    const char *p = name + 6;
    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    int64_t n = 0;
    for (; *p >= '0' && *p <= '9' && n < ((int64_t)1 << 50); p++)
        n = n * 10 + (*p - '0');
    while (*p == ' ')
        p++;
    return *p ? -1 : n;
}

static int64_t stream_of(const an_trace *t, const an_event *e)
{
    static const char *const keys[] = {"stream", NULL};
    const an_arg *a = an_event_arg_any(t, e, keys);
    if (a && !a->str && a->is_int && a->inum >= 0)
        return a->inum;
    if (!an_is_named_id(e->tid))
        return e->tid;
    return number_in_stream_name(an_thread_name(t, e->pid, e->tid));
}

/* ------------------------------------------------------------- series */

typedef struct delta {
    uint32_t series;
    int32_t count; /* +1 a start, -1 an end (queue: a launch, an end) */
    int64_t ts;
    double value;  /* bandwidth: bytes per second starting or ending */
} delta;

static int delta_cmp(const void *pa, const void *pb)
{
    const delta *a = pa, *b = pb;
    if (a->series != b->series)
        return a->series < b->series ? -1 : 1;
    return a->ts < b->ts ? -1 : a->ts > b->ts;
}

typedef struct builder {
    an_augment *a;
    size_t series_cap, samples_cap;
    delta *d;
    size_t nd, dcap;
    mlprof__map index; /* (kind, pid, tid) -> series index + 1 */
} builder;

static int add_series(builder *b, int kind, const an_trace *t, const an_event *e, uint32_t *out)
{
    int64_t key[3] = {kind, e->pid, kind == AN_SERIES_BW_DEVICE ? 0 : e->tid};
    mlprof__map_entry *slot = mlprof__map_slot(&b->index, (const char *)key, sizeof key);
    if (!slot)
        return -1;
    if (!slot->value) {
        an_augment *a = b->a;
        an_aug_series *s = mlprof__grow(a->series, &b->series_cap, a->nseries, sizeof *s, 16);
        if (!s)
            return -1;
        a->series = s;
        memset(&s[a->nseries], 0, sizeof *s);
        s[a->nseries].kind = kind;
        s[a->nseries].pid = e->pid;
        s[a->nseries].tid = key[2];
        s[a->nseries].stream = kind == AN_SERIES_BW_DEVICE ? -1 : stream_of(t, e);
        slot->value = (void *)(uintptr_t)(++a->nseries);
    }
    *out = (uint32_t)((uintptr_t)slot->value - 1);
    return 0;
}

static int add_delta(builder *b, uint32_t series, int64_t ts, int32_t count, double value)
{
    delta *d = mlprof__grow(b->d, &b->dcap, b->nd, sizeof *d, 1024);
    if (!d)
        return -1;
    b->d = d;
    d[b->nd++] = (delta){series, count, ts, value};
    return 0;
}

static int add_sample(builder *b, int64_t ts, double value)
{
    an_augment *a = b->a;
    an_aug_sample *s = mlprof__grow(a->samples, &b->samples_cap, a->nsamples, sizeof *s, 1024);
    if (!s)
        return -1;
    a->samples = s;
    s[a->nsamples++] = (an_aug_sample){ts, value};
    return 0;
}

/* A queue's samples from its deltas d[0, n): the length after each time at
 * which it changes; the time at or above the limit. */
static int queue_samples(builder *b, an_aug_series *s, const delta *d, size_t n)
{
    an_augment *a = b->a;
    int64_t len = 0, full_since = 0;
    s->first = a->nsamples;
    for (size_t i = 0; i < n;) {
        int64_t ts = d[i].ts, before = len;
        for (; i < n && d[i].ts == ts; i++)
            len += d[i].count;
        if (len == before)
            continue;
        if (before < a->limit && len >= a->limit)
            full_since = ts;
        else if (before >= a->limit && len < a->limit)
            s->full_ns += ts - full_since;
        if (len > s->max_queue)
            s->max_queue = len;
        if (add_sample(b, ts, (double)len) != 0)
            return -1;
    }
    s->n = a->nsamples - s->first;
    a->full_ns += s->full_ns;
    return 0;
}

/* The 0/1 series of a queue that was full at some time. */
static int full_samples(builder *b, size_t queue)
{
    an_augment *a = b->a;
    an_aug_series *s = mlprof__grow(a->series, &b->series_cap, a->nseries, sizeof *s, 16);
    if (!s)
        return -1;
    a->series = s;
    an_aug_series *f = &s[a->nseries++];
    const an_aug_series *q = &s[queue];
    *f = *q;
    f->kind = AN_SERIES_FULL;
    f->first = a->nsamples;
    double was = 0;
    for (size_t k = 0; k < q->n; k++) {
        an_aug_sample smp = a->samples[q->first + k];
        double full = smp.value >= (double)a->limit ? 1 : 0;
        if (full == was)
            continue;
        was = full;
        if (add_sample(b, smp.ts, full) != 0)
            return -1;
    }
    f->n = a->nsamples - f->first;
    return 0;
}

/* A bandwidth's samples: the sum of the copies running, after each change;
 * the time some copy ran and the peak. */
static int bandwidth_samples(builder *b, an_aug_series *s, const delta *d, size_t n)
{
    an_augment *a = b->a;
    double sum = 0, last = 0;
    int64_t running = 0, busy_since = 0;
    s->first = a->nsamples;
    for (size_t i = 0; i < n;) {
        int64_t ts = d[i].ts, before = running;
        for (; i < n && d[i].ts == ts; i++) {
            running += d[i].count;
            sum += d[i].value;
        }
        if (running == 0)
            sum = 0; /* no rounding left over when nothing runs */
        if (before == 0 && running > 0)
            busy_since = ts;
        else if (before > 0 && running == 0)
            s->busy_ns += ts - busy_since;
        if (sum > s->peak_bps)
            s->peak_bps = sum;
        if (a->nsamples > s->first && sum == last)
            continue;
        last = sum;
        if (add_sample(b, ts, sum) != 0)
            return -1;
    }
    s->n = a->nsamples - s->first;
    return 0;
}

/* The bytes a copy or memset moved: its "bytes", else its bandwidth times
 * its duration; -1 when it says neither. */
static double copy_bytes(const an_trace *t, const an_event *e)
{
    static const char *const bytes_keys[] = {"bytes", "Bytes", "size", NULL};
    static const char *const bw_keys[] = {"memory bandwidth (GB/s)", NULL};
    double v = an_event_num(t, e, bytes_keys, -1);
    if (v >= 0)
        return v;
    v = an_event_num(t, e, bw_keys, -1);
    return v >= 0 ? v * (double)e->dur : -1;
}

static int collect(an_trace *t, const an_gpu_links *l, builder *b)
{
    an_augment *a = b->a;
    for (size_t i = 0; i < t->nev; i++) {
        const an_event *e = &t->ev[i];
        if (is_runtime_call(e))
            a->runtime_calls++;
        if (!l->kind[i])
            continue;
        a->gpu_events++;
        uint32_t s;
        int32_t launch = l->launch[i];
        if (launch < 0) {
            a->unlinked++;
        } else if (!is_runtime_call(&t->ev[launch])) {
            a->by_operator_only++;
        } else {
            int64_t end = a->until_start ? e->ts : e->ts + e->dur;
            if (end < t->ev[launch].ts)
                a->end_before_launch++;
            if (add_series(b, AN_SERIES_QUEUE, t, e, &s) != 0 || add_delta(b, s, t->ev[launch].ts, 1, 0) != 0 ||
                add_delta(b, s, end, -1, 0) != 0)
                return -1;
            a->series[s].events++;
            a->queued++;
        }
        if (l->kind[i] != AN_GPU_MEMORY)
            continue;
        a->copies++;
        double bytes = copy_bytes(t, e);
        if (bytes < 0) {
            a->copies_no_bytes++;
            continue;
        }
        if (e->dur <= 0) {
            a->copies_no_dur++;
            continue;
        }
        double bps = bytes * 1e9 / (double)e->dur;
        for (int kind = AN_SERIES_BW_STREAM; kind <= AN_SERIES_BW_DEVICE; kind++) {
            if (add_series(b, kind, t, e, &s) != 0 || add_delta(b, s, e->ts, 1, bps) != 0 ||
                add_delta(b, s, e->ts + e->dur, -1, -bps) != 0)
                return -1;
            a->series[s].events++;
            a->series[s].bytes += (uint64_t)llround(bytes);
        }
    }
    return 0;
}

int an_augment_compute(an_trace *t, int64_t limit, int until_start, an_augment *a)
{
    memset(a, 0, sizeof *a);
    a->until_start = until_start;
    a->limit = limit > 0 ? limit : AN_LAUNCH_QUEUE_LIMIT;
    a->span_ns = an_ns_between(t->t_min, t->t_max);
    an_gpu_links l;
    if (an_gpu_link(t, &l) != 0)
        return -1;
    builder b;
    memset(&b, 0, sizeof b);
    b.a = a;
    mlprof__map_init(&b.index);
    int rc = collect(t, &l, &b);
    an_gpu_links_free(&l);
    if (rc == 0)
        mlprof__sort(b.d, b.nd, sizeof *b.d, delta_cmp);
    size_t nseries = a->nseries;
    for (size_t i = 0; rc == 0 && i < b.nd;) {
        size_t j = i;
        while (j < b.nd && b.d[j].series == b.d[i].series)
            j++;
        an_aug_series *s = &a->series[b.d[i].series];
        rc = s->kind == AN_SERIES_QUEUE ? queue_samples(&b, s, b.d + i, j - i) : bandwidth_samples(&b, s, b.d + i, j - i);
        i = j;
    }
    for (size_t k = 0; rc == 0 && k < nseries; k++) {
        if (a->series[k].kind == AN_SERIES_QUEUE && a->series[k].max_queue >= a->limit)
            rc = full_samples(&b, k);
    }
    mlprof__free(b.d);
    mlprof__map_free(&b.index);
    if (rc != 0)
        an_augment_free(a);
    return rc;
}

void an_augment_free(an_augment *a)
{
    mlprof__free(a->series);
    mlprof__free(a->samples);
    a->series = NULL;
    a->samples = NULL;
    a->nseries = a->nsamples = 0;
}

/* ------------------------------------------------------------- report */

static void put_track_id(mlprof__sb *out, int64_t id, const char *name)
{
    if (an_is_named_id(id))
        mlprof__sb_json_str(out, name ? name : "", name ? strlen(name) : 0);
    else
        mlprof__sb_i64(out, id);
}

static void put_pid(mlprof__sb *out, const an_trace *t, int64_t pid)
{
    put_track_id(out, pid, an_process_name(t, pid));
}

static void put_tid(mlprof__sb *out, const an_trace *t, int64_t pid, int64_t tid)
{
    put_track_id(out, tid, an_thread_name(t, pid, tid));
}

/* A stream's id in the counter events and the report: its number, else its name. */
static void put_stream_id(mlprof__sb *out, const an_trace *t, const an_aug_series *s)
{
    if (s->stream >= 0)
        mlprof__sb_i64(out, s->stream);
    else
        put_tid(out, t, s->pid, s->tid);
}

static void stream_label(const an_trace *t, const an_aug_series *s, char *buf, size_t len)
{
    const char *pn = an_process_name(t, s->pid);
    char dev[64];
    if (an_is_named_id(s->pid))
        snprintf(dev, sizeof dev, "%s", pn ? pn : "device");
    else if (strcmp(t->writer, "pytorch") == 0 && s->pid >= 0 && s->pid < 65536)
        snprintf(dev, sizeof dev, "GPU %lld", (long long)s->pid); /* PyTorch's device tracks: pid = device */
    else
        snprintf(dev, sizeof dev, "pid %lld", (long long)s->pid);
    if (s->kind == AN_SERIES_BW_DEVICE) {
        snprintf(buf, len, "%s (all streams)", dev);
        return;
    }
    if (s->stream >= 0) {
        snprintf(buf, len, "%s stream %lld", dev, (long long)s->stream);
        return;
    }
    const char *tn = an_thread_name(t, s->pid, s->tid);
    snprintf(buf, len, "%s %s", dev, tn ? tn : "stream ?");
}

static double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0; }

static void report_json(const an_trace *t, const an_augment *a, const char *out_path, size_t counter_events,
                        int gzip, mlprof__sb *out)
{
    mlprof__sb_puts(out, "{\"trace\":");
    mlprof__sb_json_str(out, t->path ? t->path : "", t->path ? strlen(t->path) : 0);
    mlprof__sb_puts(out, ",\"output\":");
    mlprof__sb_json_str(out, out_path ? out_path : "", out_path ? strlen(out_path) : 0);
    mlprof__sb_printf(out, ",\"output_gzip\":%s", gzip ? "true" : "false");
    mlprof__sb_printf(out, ",\"queue_until\":\"%s\"", a->until_start ? "start" : "end");
    mlprof__sb_printf(out, ",\"counter_events\":%zu,\"queue_limit\":%lld,\"span_ns\":%lld", counter_events,
                      (long long)a->limit, (long long)a->span_ns);
    mlprof__sb_printf(out, ",\"blocked_on_full_queue_ns\":%lld,\"blocked_on_full_queue_pct\":", (long long)a->full_ns);
    mlprof__sb_double(out, pct(a->full_ns, a->span_ns));
    mlprof__sb_printf(out,
                      ",\"gpu_events\":%zu,\"runtime_calls\":%zu,\"queued\":%zu,\"unlinked\":%zu,"
                      "\"linked_by_operator_only\":%zu,\"end_before_launch\":%zu,\"copies\":%zu,"
                      "\"copies_without_bytes\":%zu,\"copies_without_duration\":%zu",
                      a->gpu_events, a->runtime_calls, a->queued, a->unlinked, a->by_operator_only,
                      a->end_before_launch, a->copies, a->copies_no_bytes, a->copies_no_dur);
    static const char *const lists[] = {"queues", "", "bandwidth", "device_bandwidth"};
    for (int kind = AN_SERIES_QUEUE; kind <= AN_SERIES_BW_DEVICE; kind++) {
        if (kind == AN_SERIES_FULL)
            continue;
        mlprof__sb_printf(out, ",\"%s\":[", lists[kind]);
        int first = 1;
        for (size_t k = 0; k < a->nseries; k++) {
            const an_aug_series *s = &a->series[k];
            if (s->kind != kind)
                continue;
            mlprof__sb_puts(out, first ? "{\"pid\":" : ",{\"pid\":");
            first = 0;
            put_pid(out, t, s->pid);
            if (kind != AN_SERIES_BW_DEVICE) {
                mlprof__sb_puts(out, ",\"tid\":");
                put_tid(out, t, s->pid, s->tid);
                mlprof__sb_puts(out, ",\"stream\":");
                put_stream_id(out, t, s);
            }
            if (kind == AN_SERIES_QUEUE) {
                mlprof__sb_printf(out, ",\"launches\":%zu,\"max_queue_length\":%lld,\"full_ns\":%lld,\"full_pct\":",
                                  s->events, (long long)s->max_queue, (long long)s->full_ns);
                mlprof__sb_double(out, pct(s->full_ns, a->span_ns));
            } else {
                mlprof__sb_printf(out, ",\"copies\":%zu,\"bytes\":%llu,\"busy_ns\":%lld,\"mean_bytes_per_s\":",
                                  s->events, (unsigned long long)s->bytes, (long long)s->busy_ns);
                mlprof__sb_double(out, s->busy_ns > 0 ? (double)s->bytes * 1e9 / (double)s->busy_ns : 0);
                mlprof__sb_puts(out, ",\"peak_bytes_per_s\":");
                mlprof__sb_double(out, s->peak_bps);
            }
            mlprof__sb_printf(out, ",\"samples\":%zu}", s->n);
        }
        mlprof__sb_putc(out, ']');
    }
    mlprof__sb_puts(out, "}\n");
}

static void report_table(const an_trace *t, const an_augment *a, const char *out_path, size_t counter_events,
                         int gzip, mlprof__sb *out)
{
    char label[200];
    mlprof__sb_printf(out, "%s: %zu counter events added", out_path ? out_path : "(not written)", counter_events);
    mlprof__sb_puts(out, gzip ? " (gzip)\n\n" : "\n\n");
    mlprof__sb_printf(out, "Launch queue per stream (launched by a runtime call, not yet %s; full at %lld):\n",
                      a->until_start ? "started" : "finished", (long long)a->limit);
    mlprof__sb_printf(out, "  %-32s %10s %8s %14s %7s\n", "stream", "launches", "longest", "time full", "% span");
    int any = 0;
    for (size_t k = 0; k < a->nseries; k++) {
        const an_aug_series *s = &a->series[k];
        if (s->kind != AN_SERIES_QUEUE)
            continue;
        any = 1;
        stream_label(t, s, label, sizeof label);
        mlprof__sb full;
        mlprof__sb_init(&full);
        mlprof__sb_duration(&full, (uint64_t)s->full_ns);
        mlprof__sb_printf(out, "  %-32.32s %10zu %8lld %14s %6.2f%%\n", label, s->events, (long long)s->max_queue,
                          full.data ? full.data : "", pct(s->full_ns, a->span_ns));
        mlprof__sb_free(&full);
    }
    if (!any)
        mlprof__sb_puts(out, "  (none: no GPU event launched by a runtime call)\n");
    mlprof__sb_puts(out, "\nCopy and memset bandwidth:\n");
    mlprof__sb_printf(out, "  %-32s %8s %12s %12s %12s %12s\n", "stream", "copies", "bytes", "busy", "mean GB/s",
                      "peak GB/s");
    any = 0;
    for (int kind = AN_SERIES_BW_STREAM; kind <= AN_SERIES_BW_DEVICE; kind++) {
        for (size_t k = 0; k < a->nseries; k++) {
            const an_aug_series *s = &a->series[k];
            if (s->kind != kind)
                continue;
            any = 1;
            stream_label(t, s, label, sizeof label);
            mlprof__sb busy;
            mlprof__sb_init(&busy);
            mlprof__sb_duration(&busy, (uint64_t)s->busy_ns);
            mlprof__sb_printf(out, "  %-32.32s %8zu %12llu %12s %12.3f %12.3f\n", label, s->events,
                              (unsigned long long)s->bytes, busy.data ? busy.data : "",
                              s->busy_ns > 0 ? (double)s->bytes / (double)s->busy_ns : 0, s->peak_bps / 1e9);
            mlprof__sb_free(&busy);
        }
    }
    if (!any)
        mlprof__sb_puts(out, "  (none: no copy or memset with its bytes and a duration)\n");
    mlprof__sb_puts(out, "\nTime blocked on a full launch queue: ");
    mlprof__sb_duration(out, (uint64_t)a->full_ns);
    mlprof__sb_printf(out, " (%.2f%% of the trace's span, summed over streams)\n", pct(a->full_ns, a->span_ns));
}

void an_augment_report(const an_trace *t, const an_augment *a, int format, const char *out_path,
                       size_t counter_events, int gzip, mlprof__sb *out)
{
    if (format == AN_JSON)
        report_json(t, a, out_path, counter_events, gzip, out);
    else
        report_table(t, a, out_path, counter_events, gzip, out);
}

void an_augment_notes(const an_trace *t, const an_augment *a, mlprof__sb *notes)
{
    const char *p = t->path ? t->path : "trace";
    if (a->gpu_events == 0) {
        mlprof__sb_printf(notes, "%s: no GPU activity (kernels, copies, memsets): no counters to add\n", p);
        return;
    }
    if (a->runtime_calls == 0)
        mlprof__sb_printf(notes,
                          "%s: no runtime calls (categories cuda_runtime, cuda_driver, Runtime): no launch queue, "
                          "only the bandwidth of copies\n",
                          p);
    else if (a->unlinked)
        mlprof__sb_printf(notes,
                          "%s: %zu of %zu GPU events have no correlation id (nor flow) matching a runtime call: "
                          "left out of the launch queues\n",
                          p, a->unlinked, a->gpu_events);
    if (a->by_operator_only)
        mlprof__sb_printf(notes,
                          "%s: %zu GPU events are linked to their CPU operator only (External id), not to a runtime "
                          "call: left out of the launch queues\n",
                          p, a->by_operator_only);
    if (a->end_before_launch)
        mlprof__sb_printf(notes, "%s: %zu GPU events %s before their runtime call starts (clocks apart?)\n", p,
                          a->end_before_launch, a->until_start ? "start" : "end");
    if (a->copies_no_bytes)
        mlprof__sb_printf(notes,
                          "%s: %zu of %zu copies and memsets give no \"bytes\" (nor bandwidth): left out of the "
                          "bandwidth\n",
                          p, a->copies_no_bytes, a->copies);
    if (a->copies_no_dur)
        mlprof__sb_printf(notes, "%s: %zu copies and memsets last 0 ns: no bandwidth, left out of it\n", p,
                          a->copies_no_dur);
}

/* ------------------------------------------------------------- writing */

typedef struct writer {
    mlprof__wfile o; /* OUT.gz is gzip */
    mlprof__sb buf;
    int failed;
} writer;

static void flush_if(writer *w, size_t above)
{
    if (w->buf.len <= above || w->failed)
        return;
    if (w->buf.failed || mlprof__wfile_write(&w->o, w->buf.data, w->buf.len) != 0)
        w->failed = w->buf.failed ? ENOMEM : w->o.error;
    mlprof__sb_reset(&w->buf);
}

static void put_us(mlprof__sb *out, int64_t ns)
{
    if (ns < 0) {
        mlprof__sb_putc(out, '-');
        ns = ns == INT64_MIN ? INT64_MAX : -ns;
    }
    mlprof__sb_us(out, (uint64_t)ns);
}

static const char *const k_series_names[] = {"Queue Length", "Queue Full", "Memory Bandwidth",
                                             "Memory Bandwidth (device)"};
static const char *const k_series_keys[] = {"Queue Length", "Queue Full", "bytes/s", "bytes/s"};

static size_t put_counters(writer *w, const an_trace *t, const an_augment *a, int first)
{
    size_t n = 0;
    for (size_t k = 0; k < a->nseries; k++) {
        const an_aug_series *s = &a->series[k];
        for (size_t i = 0; i < s->n; i++) {
            const an_aug_sample *smp = &a->samples[s->first + i];
            mlprof__sb_puts(&w->buf, first && n == 0 ? "\n" : ",\n");
            mlprof__sb_printf(&w->buf, "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":", k_series_names[s->kind]);
            put_pid(&w->buf, t, s->pid);
            if (s->kind != AN_SERIES_BW_DEVICE) {
                mlprof__sb_puts(&w->buf, ",\"tid\":");
                put_tid(&w->buf, t, s->pid, s->tid);
                mlprof__sb_puts(&w->buf, ",\"id\":");
                put_stream_id(&w->buf, t, s);
            }
            mlprof__sb_puts(&w->buf, ",\"ts\":");
            put_us(&w->buf, smp->ts);
            mlprof__sb_printf(&w->buf, ",\"args\":{\"%s\":", k_series_keys[s->kind]);
            mlprof__sb_double(&w->buf, smp->value);
            mlprof__sb_puts(&w->buf, "}}");
            n++;
            flush_if(w, 1u << 20);
        }
    }
    return n;
}

/* The events array, at its '[': each event copied, then the counters. The
 * closing bracket may be missing at the end of the file (an unfinished
 * trace), as the reader allows. */
static int copy_events(writer *w, an_input *in, const an_trace *t, const an_augment *a, size_t *written)
{
    int more = an_json_open(in, '[', "the traceEvents array");
    if (more < 0)
        return -1;
    size_t events = 0;
    mlprof__sb_putc(&w->buf, '[');
    while (more == 1) {
        if (an_json_peek(in) < 0 && !in->failed)
            break; /* "[..., " and the end of the file */
        mlprof__sb_puts(&w->buf, events ? ",\n" : "\n");
        if (an_json_skip(in, &w->buf) != 0)
            return -1;
        events++;
        flush_if(w, 1u << 20);
        if (an_json_peek(in) < 0 && !in->failed)
            break;
        more = an_json_next(in, ']');
        if (more < 0)
            return -1;
    }
    *written = put_counters(w, t, a, events == 0);
    mlprof__sb_puts(&w->buf, "\n]");
    return 0;
}

static int copy_trace(writer *w, an_input *in, const an_trace *t, const an_augment *a, size_t *written)
{
    int c = an_json_peek(in);
    if (c == '[')
        return copy_events(w, in, t, a, written);
    if (c != '{')
        return an_input_fail(in, "a trace is a JSON object or array");
    int more = an_json_open(in, '{', "the trace object");
    if (more < 0)
        return -1;
    mlprof__sb key;
    mlprof__sb_init(&key);
    int members = 0, events = 0, rc = 0;
    mlprof__sb_putc(&w->buf, '{');
    while (rc == 0 && more == 1) {
        if ((rc = an_json_key(in, &key)) != 0)
            break;
        mlprof__sb_puts(&w->buf, members++ ? ",\n" : "\n");
        mlprof__sb_json_str(&w->buf, key.data ? key.data : "", key.len);
        mlprof__sb_putc(&w->buf, ':');
        if (!events && key.len == 11 && memcmp(key.data, "traceEvents", 11) == 0 && an_json_peek(in) == '[') {
            events = 1;
            rc = copy_events(w, in, t, a, written);
        } else {
            rc = an_json_skip(in, &w->buf);
        }
        if (rc == 0 && an_json_peek(in) < 0 && !in->failed && events)
            break; /* an unfinished trace: the events were last */
        if (rc == 0)
            more = an_json_next(in, '}');
        if (more < 0)
            rc = -1;
    }
    mlprof__sb_free(&key);
    if (rc != 0)
        return -1;
    if (!events) {
        mlprof__sb_puts(&w->buf, members ? ",\n\"traceEvents\":[" : "\n\"traceEvents\":[");
        *written = put_counters(w, t, a, 1);
        mlprof__sb_puts(&w->buf, "\n]");
    }
    mlprof__sb_puts(&w->buf, "\n}");
    return 0;
}

int an_augment_input_ok(const char *in_path, char *err, size_t errlen)
{
    struct stat st;
    if (strcmp(in_path, "-") == 0 || (stat(in_path, &st) == 0 && !S_ISREG(st.st_mode))) {
        snprintf(err, errlen, "augment reads the trace twice: give a file, not %s",
                 strcmp(in_path, "-") == 0 ? "standard input" : "a pipe or device");
        return -1;
    }
    return 0;
}

int an_augment_write(const an_trace *t, const an_augment *a, const char *in_path, const char *out_path,
                     size_t *written, char *err, size_t errlen)
{
    *written = 0;
    if (t->format && strcmp(t->format, "perfetto") == 0) {
        snprintf(err, errlen, "%s is a Perfetto protobuf trace: augment writes its counters into Chrome JSON traces "
                              "only (record the run with format json)", in_path);
        return -1;
    }
    if (an_augment_input_ok(in_path, err, errlen) != 0)
        return -1;
    struct stat si, so;
    if (stat(in_path, &si) == 0 && stat(out_path, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        snprintf(err, errlen, "%s is the input trace: augment never writes over its input", out_path);
        return -1;
    }
    an_input in;
    if (an_input_open(&in, in_path) != 0) {
        snprintf(err, errlen, "%s", in.error);
        an_input_close(&in);
        return -1;
    }
    writer w;
    memset(&w, 0, sizeof w);
    mlprof__sb_init(&w.buf);
    if (mlprof__wfile_open(&w.o, out_path, -1) != MLPROF_OK) {
        snprintf(err, errlen, "%s", mlprof_last_error());
        an_input_close(&in);
        mlprof__sb_free(&w.buf);
        return -1;
    }
    int rc = copy_trace(&w, &in, t, a, written);
    if (rc != 0)
        snprintf(err, errlen, "%s", in.error);
    if (rc == 0) {
        mlprof__sb_putc(&w.buf, '\n');
        flush_if(&w, 0);
        if (w.failed) {
            snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(w.failed));
            rc = -1;
        }
    }
    if (mlprof__wfile_close(&w.o, rc == 0) != MLPROF_OK && rc == 0) {
        snprintf(err, errlen, "%s", mlprof_last_error());
        rc = -1;
    }
    an_input_close(&in);
    mlprof__sb_free(&w.buf);
    return rc;
}
