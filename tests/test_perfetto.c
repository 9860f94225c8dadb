/*
 * test_perfetto.c - drives Perfetto's sink (src/export/perfetto.c) through
 * its table of functions, as the collector does, and writes what it produced
 * beside what it fed it, for perfetto_check.py to decode with protoc and
 * compare event by event:
 *
 *   dump1.pftrace  head, the stream so far, a tail (open spans, otherData)
 *   dump2.pftrace  head, the whole stream (more events after the first
 *                  dump), a second tail
 *   dump3.pftrace  after a reset: a new trace, on its own
 *   dumpN.expect.jsonl the events fed for that file, in order (JSON lines)
 *
 * It also checks here that a tail leaves the stream's state as it found it:
 * the stream written after a tail is byte for byte the stream written
 * without one.
 *
 * With --bench N it prints instead the bytes and nanoseconds (CPU time) per
 * span of this writer (driven as the collector drives it: a slice's begin
 * with typed arguments, then its end) and of the Chrome JSON writer on the
 * same N spans, with none, one and three arguments: the writers alone,
 * without the collector's decoding; --bench N json (or perfetto) runs one
 * writer alone, for perf stat.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/export/export.h"
#include "../src/export/sink.h"
#include "testutil.h"

#define PID 4242
#define TID_MAIN 4242
#define TID_WORKER 4243
#define TID_LATE 4244
#define TID_EXT 0x40000000

static const mlprof__sink_ops *ops = &mlprof__perfetto_sink;

/* A task slice begun (slice_begin) and not yet ended, as the collector
 * hands them: its expectation is written at its end. */
typedef struct open_slice {
    const char *name, *domain;
    uint64_t begin;
    pid_t tid;
    int seq;          /* the sequence its begin went to */
    char args[512];   /* the JSON of its arguments so far */
} open_slice;

/* One sink fed, and the expectations written as it goes. */
typedef struct feed {
    void *st;
    mlprof__sb stream, tail;
    mlprof__sb *expect; /* where the expectations go now */
    mlprof__sink_out out;
    open_slice open[8];
    int nopen;
} feed;

/* Expectations are JSON lines: one object per event fed. */
static void expect_begin(feed *f, const char *type)
{
    mlprof__sb_putc(f->expect, '\n');
    mlprof__sb_printf(f->expect, "{\"type\":\"%s\",\"seq\":%d", type, f->out.tail ? 2 : 1);
}

static void expect_str(feed *f, const char *key, const char *s, size_t n)
{
    mlprof__sb_printf(f->expect, ",\"%s\":", key);
    mlprof__sb_json_str(f->expect, s, n);
}

static void expect_args(feed *f, const char *args)
{
    mlprof__sb_puts(f->expect, ",\"args\":{");
    mlprof__sb_puts(f->expect, args ? args : "");
    mlprof__sb_puts(f->expect, "}}");
}

static void span(feed *f, int kind, const char *name, size_t name_len, const char *domain, uint64_t b,
                 uint64_t e, pid_t tid, const char *args, int unfinished)
{
    mlprof__span_out s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.name_len = name_len;
    s.domain = domain;
    s.kind = kind;
    s.begin_ns = b;
    s.end_ns = e;
    s.pid = PID;
    s.tid = tid;
    s.args = args;
    s.args_len = args ? strlen(args) : 0;
    s.frame_id = b;
    s.unfinished = unfinished;
    ops->span(f->st, &f->out, &s);
    expect_begin(f, kind == MLPROF__OUT_FRAME ? "frame" : "span");
    expect_str(f, "name", name, name_len);
    expect_str(f, "cat", domain, strlen(domain));
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"end\":%llu,\"pid\":%d,\"tid\":%d,\"unfinished\":%s",
                      (unsigned long long)b, (unsigned long long)e, PID, (int)tid, unfinished ? "true" : "false");
    expect_args(f, args);
}

/* The typed arguments of a slice, and their JSON for the expectation (as
 * the JSON writer shows them: invalid UTF-8 as U+FFFD). */
static void targs_json(char *out, size_t cap, const mlprof__arg_out *a, size_t n)
{
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    for (size_t i = 0; i < n; i++) {
        if (sb.len)
            mlprof__sb_putc(&sb, ',');
        mlprof__sb_json_str(&sb, a[i].key, a[i].key_len);
        mlprof__sb_putc(&sb, ':');
        if (a[i].type == MLPROF__ARG_INT)
            mlprof__sb_i64(&sb, a[i].i);
        else if (a[i].type == MLPROF__ARG_DOUBLE)
            mlprof__sb_double(&sb, a[i].d);
        else
            mlprof__sb_json_str(&sb, a[i].s, a[i].s_len);
    }
    snprintf(out, cap, "%s", sb.data ? sb.data : "");
    mlprof__sb_free(&sb);
}

/* A task's begin as the collector hands it to a slice sink: in the stream
 * on its thread's sequence (seq), in a tail on the tail's. */
static void slice_begin(feed *f, const char *name, const char *domain, uint64_t b, pid_t tid,
                        const mlprof__arg_out *a, size_t n, int seq)
{
    mlprof__span_out s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.name_len = strlen(name);
    s.domain = domain;
    s.begin_ns = b;
    s.pid = PID;
    s.tid = tid;
    s.targs = n ? a : NULL;
    s.ntargs = n;
    ops->slice_begin(f->st, &f->out, &s);
    open_slice *o = &f->open[f->nopen++];
    o->name = name;
    o->domain = domain;
    o->begin = b;
    o->tid = tid;
    o->seq = f->out.tail ? 2 : seq;
    targs_json(o->args, sizeof o->args, a, n);
}

/* The end of the innermost slice begun (late: arguments recorded after its
 * begin); keep: a tail's end, after which the stream goes on with it open. */
static void slice_end(feed *f, uint64_t e, const mlprof__arg_out *late, size_t n, int unfinished, int keep)
{
    open_slice *o = &f->open[f->nopen - 1];
    mlprof__span_out s;
    memset(&s, 0, sizeof s);
    s.name = o->name;
    s.name_len = strlen(o->name);
    s.domain = o->domain;
    s.begin_ns = o->begin;
    s.end_ns = e;
    s.pid = PID;
    s.tid = o->tid;
    s.targs = n ? late : NULL;
    s.ntargs = n;
    s.unfinished = unfinished;
    ops->slice_end(f->st, &f->out, &s);
    expect_begin(f, "span");
    f->expect->len -= 1; /* the sequence is the begin's */
    while (f->expect->len && f->expect->data[f->expect->len - 1] != ':')
        f->expect->len--;
    mlprof__sb_printf(f->expect, "%d", o->seq);
    expect_str(f, "name", o->name, strlen(o->name));
    expect_str(f, "cat", o->domain, strlen(o->domain));
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"end\":%llu,\"pid\":%d,\"tid\":%d,\"unfinished\":%s",
                      (unsigned long long)o->begin, (unsigned long long)e, PID, (int)o->tid,
                      unfinished ? "true" : "false");
    char more[512];
    targs_json(more, sizeof more, late, n);
    char all[1100];
    snprintf(all, sizeof all, "%s%s%s", o->args, o->args[0] && more[0] ? "," : "", more);
    expect_args(f, all);
    if (!keep)
        f->nopen--;
}

static void instant(feed *f, const char *name, const char *domain, uint64_t ts, int scope, pid_t tid,
                    const char *args)
{
    mlprof__instant_out e;
    memset(&e, 0, sizeof e);
    e.name = name;
    e.name_len = strlen(name);
    e.domain = domain;
    e.ts_ns = ts;
    e.scope = scope;
    e.pid = PID;
    e.tid = tid;
    e.args = args;
    e.args_len = args ? strlen(args) : 0;
    ops->instant(f->st, &f->out, &e);
    expect_begin(f, "instant");
    expect_str(f, "name", name, strlen(name));
    expect_str(f, "cat", domain, strlen(domain));
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"scope\":%d,\"pid\":%d,\"tid\":%d", (unsigned long long)ts, scope,
                      PID, (int)tid);
    expect_args(f, args);
}

static void counter_int(feed *f, const char *name, const char *domain, uint64_t ts, int64_t v)
{
    mlprof__counter_out c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.domain = domain;
    c.ts_ns = ts;
    c.value = (double)v;
    c.is_int = 1;
    c.ivalue = v;
    c.pid = PID;
    c.tid = TID_MAIN;
    ops->counter(f->st, &f->out, &c);
    expect_begin(f, "counter");
    expect_str(f, "name", name, strlen(name));
    expect_str(f, "cat", domain, strlen(domain));
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"pid\":%d,\"int\":true,\"value\":%lld}", (unsigned long long)ts, PID,
                      (long long)v);
}

static void counter_double(feed *f, const char *name, const char *domain, uint64_t ts, double v)
{
    mlprof__counter_out c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.domain = domain;
    c.ts_ns = ts;
    c.value = v;
    c.pid = PID;
    c.tid = TID_WORKER;
    ops->counter(f->st, &f->out, &c);
    expect_begin(f, "counter");
    expect_str(f, "name", name, strlen(name));
    expect_str(f, "cat", domain, strlen(domain));
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"pid\":%d,\"int\":false,\"value\":", (unsigned long long)ts, PID);
    mlprof__sb_double(f->expect, v);
    mlprof__sb_putc(f->expect, '}');
}

static void flow(feed *f, char ph, uint64_t id, const char *name, const char *domain, uint64_t ts, pid_t tid)
{
    mlprof__flow_out fl = {ph, id, name, domain, ts, PID, tid};
    ops->flow(f->st, &f->out, &fl);
    expect_begin(f, ph == 's' ? "flow_start" : "flow_end");
    expect_str(f, "name", name, strlen(name));
    expect_str(f, "cat", domain, strlen(domain));
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"pid\":%d,\"tid\":%d,\"id\":%llu}", (unsigned long long)ts, PID,
                      (int)tid, (unsigned long long)id);
}

static void track(feed *f, int kind, pid_t tid, const char *name, uint32_t sort_index)
{
    mlprof__track_out t = {kind, PID, tid, name, sort_index};
    ops->track(f->st, &f->out, &t);
    expect_begin(f, "track");
    mlprof__sb_printf(f->expect, ",\"kind\":%d,\"pid\":%d,\"tid\":%d,\"sort_index\":%u", kind, PID, (int)tid,
                      sort_index);
    expect_str(f, "name", name, strlen(name));
    mlprof__sb_putc(f->expect, '}');
}

/* ---- the scenario */

/* A name longer than a one-byte length, and arguments that take a packet
 * past 127 bytes: the lengths written after their message are moved. */
static char long_name[300];
static char long_args[1024];

static void stream_part1(feed *f)
{
    /* children before their parent, as the collector writes them (at their end) */
    span(f, MLPROF__OUT_TASK, "inner", 5, "dom", 2000, 3000, TID_MAIN, "\"i\":7,\"neg\":-12", 0);
    span(f, MLPROF__OUT_TASK, "outer", 5, "dom", 1000, 5000, TID_MAIN,
         "\"int\":123456789012,\"dbl\":0.25,\"exp\":1.5e+300,\"str\":\"he said \\\"hi\\\"\\n\\u00e9\\ud83d\\ude00\","
         "\"yes\":true,\"no\":false,\"nothing\":null,\"nested\":{\"a\":[1,2,{\"b\":\"c\"}]},\"list\":[1,\"x\"],"
         "\"big\":18446744073709551615,\"min\":-9223372036854775808,\"esc\\\"key\":1,\"unicode key \\u00fc\":2",
         0);
    span(f, MLPROF__OUT_TASK, "outer", 5, "dom", 6000, 6500, TID_MAIN, NULL, 0);
    span(f, MLPROF__OUT_TASK, "bad\xff name", 9, "dom", 6600, 6700, TID_MAIN, "\"k\":1", 0);
    span(f, MLPROF__OUT_TASK, long_name, strlen(long_name), "other domain", 6800, 6900, TID_MAIN,
         "\"a1\":\"0123456789012345678901234567890123456789\",\"a2\":\"0123456789012345678901234567890123456789\","
         "\"a3\":\"0123456789012345678901234567890123456789\",\"a4\":1.0e-7",
         0);
    span(f, MLPROF__OUT_TASK, "long args", 9, "dom", 6910, 6920, TID_MAIN, long_args, 0);
    span(f, MLPROF__OUT_TASK, "cut short", 9, "dom", 7000, 7100, TID_WORKER, "\"i\":1", 1);
    /* frames: a track of their own per (thread, name), under the thread's */
    span(f, MLPROF__OUT_FRAME, "step", 4, "train", 1500, 4500, TID_MAIN, "\"n\":1", 0);
    span(f, MLPROF__OUT_FRAME, "epoch", 5, "train", 1200, 5500, TID_MAIN, NULL, 0);
    span(f, MLPROF__OUT_FRAME, "step", 4, "train", 4600, 4800, TID_MAIN, "\"n\":2", 0);
    /* instants of each scope */
    instant(f, "mark", "dom", 2500, MLPROF_SCOPE_THREAD, TID_WORKER, "\"why\":\"because\"");
    instant(f, "mark", "dom", 2600, MLPROF_SCOPE_PROCESS, TID_MAIN, NULL);
    instant(f, "everyone", "dom", 2700, MLPROF_SCOPE_GLOBAL, TID_WORKER, "\"n\":3.5");
    /* counters, integer and not */
    counter_int(f, "bytes", "mem", 1000, 0);
    counter_int(f, "bytes", "mem", 2000, 1048576);
    counter_int(f, "bytes", "mem", 3000, -5);
    counter_double(f, "temperature", "gpu", 1500, 61.25);
    counter_double(f, "temperature", "gpu", 2500, 1e-3);
    /* a flow from the main thread to the worker */
    flow(f, 's', 77, "handoff", "dom", 2500, TID_MAIN);
    flow(f, 'f', 77, "handoff", "dom", 7050, TID_WORKER);
    /* a thread named in the stream, a GPU stream and its events */
    track(f, MLPROF__TRACK_THREAD, TID_WORKER, "worker", 2);
    span(f, MLPROF__OUT_TASK, "kernel", 6, "gpu", 3000, 3400, TID_EXT, "\"grid\":[1,2,3],\"stream\":7", 0);
    track(f, MLPROF__TRACK_EXT, TID_EXT, "GPU 0 stream 7", 1000000);
    span(f, MLPROF__OUT_TASK, "kernel", 6, "gpu", 3500, 3900, TID_EXT, "\"grid\":[4,5,6],\"stream\":7", 0);
    /* task slices in record order on the worker's sequence (the first: 3):
     * typed arguments (a repeated string interned once, a key and a value
     * that are not valid UTF-8), an end with arguments recorded after its
     * begin, a clock that steps back (absolute timestamps), and one left
     * open for the tail */
    static const mlprof__arg_out a1[] = {
        {.key = "batch", .key_len = 5, .type = MLPROF__ARG_INT, .i = -7},
        {.key = "lr", .key_len = 2, .type = MLPROF__ARG_DOUBLE, .d = 0.125},
        {.key = "dtype", .key_len = 5, .type = MLPROF__ARG_STRING, .s = "float32", .s_len = 7},
        {.key = "k\xc3\xa9\xff", .key_len = 4, .type = MLPROF__ARG_STRING, .s = "b\xff" "d\"q", .s_len = 5},
    };
    static const mlprof__arg_out a2[] = {
        {.key = "dtype", .key_len = 5, .type = MLPROF__ARG_STRING, .s = "float32", .s_len = 7},
        {.key = "bytes", .key_len = 5, .type = MLPROF__ARG_INT, .i = 1 << 24},
    };
    static const mlprof__arg_out late[] = {{.key = "late", .key_len = 4, .type = MLPROF__ARG_INT, .i = 1}};
    slice_begin(f, "sl outer", "dom", 7200, TID_WORKER, a1, 4, 3);
    slice_begin(f, "sl inner", "dom", 7210, TID_WORKER, a2, 2, 3);
    slice_end(f, 7300, NULL, 0, 0, 0);
    slice_end(f, 7400, late, 1, 0, 0);
    slice_begin(f, "sl back", "dom", 7350, TID_WORKER, NULL, 0, 3);
    slice_end(f, 7360, NULL, 0, 0, 0);
    slice_begin(f, "sl main", "dom", 7500, TID_MAIN, a2, 2, 4);
    slice_end(f, 7500 + 200000, NULL, 0, 1, 0);
    slice_begin(f, "sl open", "dom", 7600, TID_WORKER, a2, 1, 3);
}

static const char other_data1[] = "\"mlprof_version\":\"0.0.test\",\"host\":\"testhost\",\"pid\":4242,"
                                  "\"clock\":\"monotonic\",\"dropped_events\":0,\"finished\":false";
static const char other_data2[] = "\"mlprof_version\":\"0.0.test\",\"host\":\"testhost\",\"pid\":4242,"
                                  "\"clock\":\"monotonic\",\"dropped_events\":3,\"finished\":true,"
                                  "\"memory\":{\"peak\":123}";

static void tail_end(feed *f, const char *other, uint64_t dump_ns, int finished)
{
    mlprof__trace_meta m;
    memset(&m, 0, sizeof m);
    m.pid = PID;
    m.process_name = "perfetto test";
    m.host = "testhost";
    m.clock = "monotonic";
    m.start_ns = 1000;
    m.dump_ns = dump_ns;
    m.finished = finished;
    m.other_data = other;
    m.other_data_len = strlen(other);
    ops->tail_end(f->st, &f->out, &m);
    expect_begin(f, "other_data");
    mlprof__sb_printf(f->expect, ",\"ts\":%llu,\"pid\":%d,\"process_name\":\"perfetto test\"",
                      (unsigned long long)dump_ns, PID);
    expect_args(f, other);
}

/* The tail of the first dump: metadata, the spans still open, the footer. */
static void tail1(feed *f)
{
    f->out.sb = &f->tail;
    f->out.tail = 1;
    ops->tail_begin(f->st, &f->out);
    track(f, MLPROF__TRACK_PROCESS, PID, "perfetto test", 0);
    track(f, MLPROF__TRACK_THREAD, TID_MAIN, "main", 1);
    track(f, MLPROF__TRACK_THREAD, TID_WORKER, "worker", 2);
    /* open: a task of a thread the stream has not described yet, a frame, and
     * names the stream has not interned yet (it must intern them itself later) */
    span(f, MLPROF__OUT_TASK, "still open", 10, "late domain", 8000, 9000, TID_LATE, "\"late arg\":1", 1);
    span(f, MLPROF__OUT_FRAME, "step", 4, "train", 8500, 9000, TID_MAIN, "\"n\":3", 1);
    /* a slice sink's open tasks: one begun in the stream gets its end here;
     * one begun after the last drain, both (in the tail's sequence) */
    static const mlprof__arg_out a3[] = {{.key = "x", .key_len = 1, .type = MLPROF__ARG_DOUBLE, .d = -2.5}};
    slice_begin(f, "sl tail only", "dom", 8700, TID_WORKER, a3, 1, 2);
    slice_end(f, 9000, NULL, 0, 1, 0);
    slice_end(f, 9000, NULL, 0, 1, 1);
    track(f, MLPROF__TRACK_EXT, TID_EXT, "GPU 0 stream 7", 1000000);
    tail_end(f, other_data1, 9000, 0);
    f->out.sb = &f->stream;
    f->out.tail = 0;
}

static void stream_part2(feed *f)
{
    static const mlprof__arg_out a4[] = {
        {.key = "dtype", .key_len = 5, .type = MLPROF__ARG_STRING, .s = "bfloat16", .s_len = 8}};
    slice_begin(f, "sl after", "dom", 9450, TID_WORKER, a4, 1, 3); /* inside "sl open" */
    slice_end(f, 9460, NULL, 0, 0, 0);
    slice_end(f, 9470, NULL, 0, 0, 0); /* "sl open" */
    span(f, MLPROF__OUT_TASK, "still open", 10, "late domain", 8000, 9500, TID_LATE, "\"late arg\":1,\"i\":2", 0);
    span(f, MLPROF__OUT_TASK, "outer", 5, "dom", 9600, 9700, TID_MAIN, "\"i\":3", 0);
    span(f, MLPROF__OUT_FRAME, "step", 4, "train", 8500, 9800, TID_MAIN, "\"n\":3", 0);
    track(f, MLPROF__TRACK_THREAD, TID_LATE, "late thread", 3);
    instant(f, "after", "dom", 9900, MLPROF_SCOPE_THREAD, TID_LATE, "\"new arg\":\"v\"");
    counter_int(f, "bytes", "mem", 9950, 42);
}

static void tail2(feed *f)
{
    f->out.sb = &f->tail;
    f->out.tail = 1;
    ops->tail_begin(f->st, &f->out);
    track(f, MLPROF__TRACK_PROCESS, PID, "perfetto test", 0);
    track(f, MLPROF__TRACK_THREAD, TID_MAIN, "main", 1);
    track(f, MLPROF__TRACK_THREAD, TID_WORKER, "worker", 2);
    track(f, MLPROF__TRACK_THREAD, TID_LATE, "late thread", 3);
    track(f, MLPROF__TRACK_EXT, TID_EXT, "GPU 0 stream 7", 1000000);
    tail_end(f, other_data2, 10000, 1);
    f->out.sb = &f->stream;
    f->out.tail = 0;
}

static int write_bytes(const char *dir, const char *name, const mlprof__sb *parts[], int n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror(path);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (parts[i]->len && fwrite(parts[i]->data, 1, parts[i]->len, fp) != parts[i]->len) {
            perror(path);
            fclose(fp);
            return 0;
        }
    }
    return fclose(fp) == 0;
}

static void feed_init(feed *f, mlprof__sb *expect)
{
    memset(f, 0, sizeof *f);
    f->st = ops->create();
    f->out.sb = &f->stream;
    f->expect = expect;
}

static void feed_free(feed *f)
{
    ops->destroy(f->st);
    mlprof__sb_free(&f->stream);
    mlprof__sb_free(&f->tail);
}

/* A slice of a buffer, to write a part of it. */
static mlprof__sb part(const mlprof__sb *sb, size_t len)
{
    mlprof__sb p = *sb;
    p.len = len;
    return p;
}

static int scenario(const char *dir)
{
    memset(long_name, 'L', sizeof long_name - 1);
    memcpy(long_name, "long name ", 10);
    /* annotations longer than 127 bytes: plain, escaped, nested */
    char *a = long_args;
    a += sprintf(a, "\"plain\":\"%0200d\",\"escaped\":\"", 7);
    for (int i = 0; i < 40; i++)
        a += sprintf(a, "\\u00e9\\t");
    a += sprintf(a, "\",\"nested\":[0");
    for (int i = 1; i < 60; i++)
        a += sprintf(a, ",%d", i);
    sprintf(a, "]");
    enum { E_PART1, E_TAIL1, E_PART2, E_TAIL2, E_NEW, E_TAIL3, E_PLAIN, E_N };
    mlprof__sb ex[E_N];
    for (int i = 0; i < E_N; i++)
        mlprof__sb_init(&ex[i]);

    feed f, plain;
    feed_init(&f, &ex[E_PART1]);
    feed_init(&plain, &ex[E_PLAIN]);
    CHECK(f.st && plain.st, "create");
    if (!f.st || !plain.st)
        return tu_finish("perfetto");
    ops->reset(f.st);
    mlprof__sb head;
    mlprof__sb_init(&head);
    ops->head(f.st, &head);
    CHECK(head.len > 0 && !head.failed, "head: %zu bytes", head.len);

    stream_part1(&f);
    size_t part1_len = f.stream.len;
    f.expect = &ex[E_TAIL1];
    tail1(&f);
    CHECK(f.stream.len == part1_len, "the tail wrote nothing into the stream");
    mlprof__sb tail1_bytes = f.tail;
    mlprof__sb_init(&f.tail);
    f.expect = &ex[E_PART2];
    stream_part2(&f);
    f.expect = &ex[E_TAIL2];
    tail2(&f);
    CHECK(!f.stream.failed && !f.tail.failed && !tail1_bytes.failed, "no allocation failed");

    /* the same stream without the first tail: the same bytes */
    stream_part1(&plain);
    stream_part2(&plain);
    CHECK(plain.stream.len == f.stream.len && memcmp(plain.stream.data, f.stream.data, f.stream.len) == 0,
          "a tail changed the stream after it: %zu bytes with it, %zu without", f.stream.len, plain.stream.len);

    mlprof__sb s1 = part(&f.stream, part1_len);
    const mlprof__sb *d1[] = {&head, &s1, &tail1_bytes};
    CHECK(write_bytes(dir, "dump1.pftrace", d1, 3), "dump1.pftrace written");
    const mlprof__sb *e1[] = {&ex[E_PART1], &ex[E_TAIL1]};
    CHECK(write_bytes(dir, "dump1.expect.jsonl", e1, 2), "dump1.expect.jsonl written");
    const mlprof__sb *d2[] = {&head, &f.stream, &f.tail};
    CHECK(write_bytes(dir, "dump2.pftrace", d2, 3), "dump2.pftrace written");
    const mlprof__sb *e2[] = {&ex[E_PART1], &ex[E_PART2], &ex[E_TAIL2]};
    CHECK(write_bytes(dir, "dump2.expect.jsonl", e2, 3), "dump2.expect.jsonl written");

    /* a new trace after a reset: it stands on its own (names interned again) */
    ops->reset(f.st);
    mlprof__sb_reset(&head);
    mlprof__sb_reset(&f.stream);
    mlprof__sb_reset(&f.tail);
    ops->head(f.st, &head);
    f.expect = &ex[E_NEW];
    span(&f, MLPROF__OUT_TASK, "outer", 5, "dom", 20000, 21000, TID_MAIN, "\"i\":9", 0);
    counter_double(&f, "temperature", "gpu", 20500, 70.5);
    f.expect = &ex[E_TAIL3];
    tail2(&f);
    const mlprof__sb *d3[] = {&head, &f.stream, &f.tail};
    CHECK(write_bytes(dir, "dump3.pftrace", d3, 3), "dump3.pftrace written");
    const mlprof__sb *e3[] = {&ex[E_NEW], &ex[E_TAIL3]};
    CHECK(write_bytes(dir, "dump3.expect.jsonl", e3, 2), "dump3.expect.jsonl written");

    mlprof__sb_free(&head);
    mlprof__sb_free(&tail1_bytes);
    for (int i = 0; i < E_N; i++)
        mlprof__sb_free(&ex[i]);
    feed_free(&f);
    feed_free(&plain);
    return tu_finish("perfetto");
}

/* ---- --bench: bytes and time per span, this writer against the JSON one */

/* CPU time: on a loaded machine, time spent waiting for a core is not the
 * writer's */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Writes n spans (args made by make_args) with JSON (json != 0) or this
 * sink; the bytes and seconds they took. The buffer is emptied every 4096
 * spans, as the collector's spool is, so that both write to warm memory. */
static void bench_one(int json, long n, int nargs, double *bytes, double *secs)
{
    void *st = ops->create();
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__sink_out out = {&sb, 0};
    int first = 1;
    /* the arguments made before the clock starts: 4096 different ones */
    enum { NARGS = 4096 };
    static const char *const dtypes[] = {"float32", "bfloat16", "int8", "float16"};
    static char args[NARGS][96];
    static size_t args_len[NARGS];
    static mlprof__arg_out targs[NARGS][3]; /* the same typed, as the collector hands them to Perfetto */
    for (long i = 0; i < NARGS; i++) {
        int len;
        mlprof__arg_out *t = targs[i];
        t[0] = (mlprof__arg_out){.key = nargs == 1 ? "i" : "batch", .key_len = nargs == 1 ? 1 : 5,
                                 .type = MLPROF__ARG_INT, .i = nargs == 1 ? i * 7 : i};
        t[1] = (mlprof__arg_out){.key = "bytes", .key_len = 5, .type = MLPROF__ARG_INT, .i = (i & 1023) * 4096};
        t[2] = (mlprof__arg_out){.key = "dtype", .key_len = 5, .type = MLPROF__ARG_STRING, .s = dtypes[i & 3],
                                 .s_len = strlen(dtypes[i & 3])};
        if (nargs == 0)
            len = 0;
        else if (nargs == 1)
            len = snprintf(args[i], sizeof args[i], "\"i\":%ld", i * 7);
        else
            len = snprintf(args[i], sizeof args[i], "\"batch\":%ld,\"bytes\":%ld,\"dtype\":\"%s\"", i,
                           (i & 1023) * 4096, dtypes[i & 3]);
        args_len[i] = (size_t)len;
    }
    uint64_t base = 86400ull * 1000000000ull * 3 + 123456789; /* a machine up for three days */
    double total = 0;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        mlprof__span_out s;
        memset(&s, 0, sizeof s);
        s.name = "pair";
        s.name_len = 4;
        s.domain = "bench";
        s.kind = MLPROF__OUT_TASK;
        s.begin_ns = base + (uint64_t)i * 1500;
        s.end_ns = s.begin_ns + 1000 + (uint64_t)(i & 255);
        s.pid = 123456;
        s.tid = 123456 + (pid_t)((i >> 12) & 3); /* threads one after another, as drained */
        s.args = args[i & (NARGS - 1)];
        s.args_len = args_len[i & (NARGS - 1)];
        if (json) {
            mlprof__chrome_span(&sb, &first, &s);
        } else { /* as the collector drives it: a begin with typed arguments, an end */
            s.args = NULL;
            s.targs = nargs ? targs[i & (NARGS - 1)] : NULL;
            s.ntargs = (size_t)nargs;
            ops->slice_begin(st, &out, &s);
            s.targs = NULL;
            s.ntargs = 0;
            ops->slice_end(st, &out, &s);
        }
        if ((i & 4095) == 4095) {
            total += (double)sb.len;
            sb.len = 0;
        }
    }
    *secs = now_s() - t0;
    *bytes = total + (double)sb.len;
    mlprof__sb_free(&sb);
    ops->destroy(st);
}

/* which: 0 both, 1 JSON only, 2 protobuf only (to count instructions with perf stat) */
static int bench(long n, int which)
{
    if (which) {
        double b, t;
        for (int nargs = 0; nargs <= 3; nargs += 1 + (nargs == 1)) {
            bench_one(which == 1, n, nargs, &b, &t);
            printf("%s, %d argument(s): %.1f bytes, %.1f ns per span\n", which == 1 ? "JSON" : "protobuf", nargs,
                   b / (double)n, 1e9 * t / (double)n);
        }
        return 0;
    }
    printf("%-34s %10s %10s\n", "spans", "bytes/span", "ns/span");
    for (int nargs = 0; nargs <= 3; nargs += 1 + (nargs == 1)) {
        double jb, js, pb, ps;
        for (int round = 0; round < 2; round++) { /* the first round warms up */
            bench_one(1, n, nargs, &jb, &js);
            bench_one(0, n, nargs, &pb, &ps);
        }
        printf("JSON, %d argument%s %*s %10.1f %10.1f\n", nargs, nargs != 1 ? "s" : " ", 18, "", jb / (double)n,
               1e9 * js / (double)n);
        printf("Perfetto protobuf, %d argument%s %*s %10.1f %10.1f\n", nargs, nargs != 1 ? "s" : " ", 5, "",
               pb / (double)n, 1e9 * ps / (double)n);
        printf("ratio (JSON / protobuf) %*s %10.2fx %9.2fx\n", 11, "", jb / pb, js / ps);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--bench") == 0)
        return bench(atol(argv[2]), argc > 3 ? (strcmp(argv[3], "json") == 0 ? 1 : 2) : 0);
    if (argc != 2) {
        fprintf(stderr, "usage: test_perfetto OUT_DIR | --bench SPANS [json|perfetto]\n");
        return 2;
    }
    return scenario(argv[1]);
}
