/*
 * collect.c - the collector. It drains every thread's chunks up to the
 * position that thread has published, decodes the records into spans (pairing
 * begins and ends on a per-thread stack, which also gives self time), instants
 * and counter samples, takes the events modules produced with their own times
 * (src/record/produce.h), and hands everything to the sinks (sinks.c): the
 * trace sink of this trace (JSON, or another format) turns events into bytes,
 * and the file sinks (statistics, memory outputs...) keep what they need.
 *
 * The trace's bytes are the collector's, whatever the format: they go to a
 * spool file (compressed as they go when the trace is gzip), and a dump
 * copies the spool into a temporary file beside the output, adds the tail
 * (metadata, spans still open, the footer; a gzip member of its own) and
 * renames it over the output, so that a complete trace is on disk at every
 * moment while memory stays bounded by the chunk pool.
 *
 * Modules are reached only through the lifecycle table (produce.h): the
 * collector names none of them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/gz.h"
#include "../export/export.h"
#include "../hw/stacks.h"
#include "../record/dist.h"
#include "../record/produce.h"
#include "../record/record.h"
#include "collect.h"
#include "sinks.h"

/* ------------------------------------------------------------ the state */

/* A typed argument of an open span: its key and string in the span's
 * ttext (offsets: the buffer moves as it grows). */
typedef struct open_arg {
    uint32_t key_off, key_len;
    int type; /* MLPROF__ARG_* */
    uint32_t s_off, s_len;
    int64_t i;
    double d;
} open_arg;

typedef struct open_span {
    const mlprof__handle *handle; /* NULL for a dynamic name */
    mlprof_domain *domain;
    char *dyn_name;
    uint64_t begin_ns;
    uint64_t child_ns;
    /* its arguments, in the forms the sinks on asked for when it began
     * (C.want_text, C.want_typed): JSON text, typed, or both */
    int text, typed;
    mlprof__sb args;
    open_arg *targs;
    size_t ntargs, targs_cap;
    mlprof__sb ttext;
    int64_t hw[MLPROF__ARG_SLOTS]; /* integer arguments named after counters */
    unsigned hw_mask;
    /* a slice sink's (MLPROF__SINK_SLICES) view of a task */
    int begun;           /* its begin is in the stream */
    int capped;          /* its begin found the trace at max_trace_size: left out, end too */
    int cut;             /* began before the ring's start: shown from there, marked cut_by_ring */
    size_t targs_begun;  /* typed arguments that went with the begin */
} open_span;

typedef struct span_stack {
    open_span *items;
    size_t depth, cap;
} span_stack;

/* One thread's decoding state; it outlives the thread so that its name and
 * open spans are still written after the thread has exited. */
typedef struct track {
    mlprof__thread *thread; /* NULL once the thread's record is freed */
    pid_t tid;
    uint32_t seq;
    char name[64];
    span_stack tasks;
    span_stack frames;
    mlprof__scope_node *scope;
    uint64_t last_ns;
    /* ring mode: an evicted chunk left spans open whose begins were not
     * handed to a slice sink (any depth, not only the top) */
    int unbegun;
    /* ring mode: the time of the last record of its oldest chunk (hl_chunk) */
    const mlprof__chunk *hl_chunk;
    uint64_t hl_ns;
    /* args go to the innermost open span, or to an instant just recorded */
    int instant_pending;
    const mlprof__handle *inst_handle; /* NULL for a run-time name */
    const char *inst_name;
    size_t inst_name_len;
    char inst_dyn[MLPROF__NAME_MAX + 1];
    mlprof_domain *inst_domain;
    uint64_t inst_ns;
    int inst_scope;
    mlprof__sb inst_args;
    int arg_to_frame; /* the last begin was a frame's */
    struct track *next;
} track;

/* A launch point a module asked about, with the module to answer. */
typedef struct lpoint {
    mlprof__launch_point p;
    const mlprof__module *m;
} lpoint;

/* A sink of the current trace. */
typedef struct sink {
    const mlprof__sink_entry *e;
    void *st;
    int on; /* takes events and is dumped */
    /* a file sink that MLPROF__SINK_RETRY whose output a finished dump
     * that wrote the trace could not write (nor any dump since): it waits
     * for the next dump, the trace being reset (last_finished) */
    int pending;
} sink;

#define SINKS_MAX 16

static struct {
    track *tracks;
    /* the sinks: the trace sink of this trace (chosen at its first drain),
     * and every file sink (made once) */
    sink trace;
    sink files[SINKS_MAX];
    size_t nfiles;
    int files_made;
    char trace_error[600]; /* why the trace cannot be written (no such format, no zlib) */
    /* the stream of this trace */
    int spool_fd;        /* unlinked temporary file holding the bytes so far, or -1 */
    uint64_t spool_size; /* bytes */
    int spool_linkable;  /* made with O_TMPFILE: a dump may link it as the trace file */
    int spool_published; /* it is the trace file a dump wrote: copied before it is written again */
    mlprof__sb buf;      /* bytes of events waiting to be written to the spool (plain) */
    uint64_t buf_events; /* events in buf */
    int compress;        /* the trace is gzip: the spool holds the compressed stream */
    mlprof__gz *gz;      /* its stream, or NULL when zlib could not be had */
    mlprof__sb zbuf;     /* compressed bytes the spool has not taken yet */
    uint64_t zbuf_events;
    int gz_failed;       /* the stream broke (out of memory): the trace cannot be written */
    /* the JSON copy of a trace in another format (Perfetto), for
     * mlprof_dump_string, which gives Chrome JSON whatever the file's format:
     * the JSON sink, fed every event the trace sink takes, its bytes spooled
     * to a file of their own. Its tail is written only for dump_string. */
    sink mirror;               /* .e set for such a trace; .on while it takes events */
    int mirror_fd;             /* unlinked temporary file, or -1 before its first bytes */
    uint64_t mirror_size;      /* bytes in it */
    mlprof__sb mirror_buf;     /* bytes waiting to be written to it */
    mlprof__sb *mirror_tail;   /* where its tail goes while dump_string writes one, else NULL */
    int mirror_failing;        /* its last write failed: the bytes wait in mirror_buf */
    int mirror_err;            /* why it broke (errno): mlprof_dump_string then fails for this trace */
    /* the spool could not be written (a full disk): buf keeps the events
     * for the next try, up to pending_max() bytes; past that they are lost */
    int spool_failing;
    int lost_errno;             /* why the last ones were lost */
    uint64_t unwritten;         /* events of this trace lost that way (otherData.unwritten_events) */
    uint64_t unwritten_said;    /* of them, those a dump has returned an error for */
    /* max_trace_size: the stream reached it and takes no more events
     * (trace_room); those left out since (otherData.capped_events) */
    int capped;
    uint64_t capped_events;
    /* mode=ring: records are decoded as their chunks are evicted, handing
     * nothing to the sinks (evicting), so that the spans they open stay on
     * the stacks; horizon_ns: the newest evicted record's time, the ring's
     * start; overwritten: the events evicted (otherData.overwritten_events) */
    int evicting;
    uint64_t horizon_raw; /* on the raw clock: the calibration may change from drain to drain */
    uint64_t horizon_ns;  /* the same as this drain converts it, like the records it decodes */
    uint64_t overwritten;
    int ring_said;
    uint64_t trace_drops_base;  /* mlprof__collect_dropped() when this trace began */
    uint64_t stats_drops_base;  /* ... and when the statistics were last reset */
    uint64_t frame_ids;
    /* what the sinks on want (set at each drain): the spans' arguments as
     * JSON text and/or typed; task spans as begins and ends (the trace sink) */
    int want_text, want_typed, slices;
    mlprof__arg_out *targ_out; /* a span's typed arguments as handed over */
    size_t targ_out_cap;
    mlprof__sb text_tmp;       /* a span's arguments as text, made from the typed ones */
    uint64_t unfinished;
    uint64_t unmatched_ends;
    /* the spans the profiler closed in the finished trace whose outputs
     * wait (sink.pending), for the statistics written again */
    uint64_t pending_unfinished;
    /* the last dump's error holds a failure not said on stderr (the trace's,
     * events lost), as opposed to outputs the sinks said */
    int error_unsaid;
    char continuous_said[1024]; /* the continuous dump's last error said, "" since it succeeded */
    /* frame ends that found no frame open on their thread: a frame may end on
     * another thread than the one that began it (NVTX start/end ranges); they
     * are matched once every thread of the drain has been read */
    struct {
        const mlprof__handle *h;
        uint64_t ns;
    } pending_end[256];
    size_t npending;
    uint64_t reported_drops; /* of trace_dropped(), those said on stderr */
    uint64_t corrupt;
    /* the launches of this drain whose CPU spans are looked up, by (tid, ns) */
    lpoint *lp;
    size_t nlp, lp_cap;
    uint64_t start_ns;
    /* a clear while running: records stamped before this raw time, published
     * after it by calls then in flight, are discarded; 0 when none */
    uint64_t cut_raw;
    /* continuous dump */
    pthread_t thread;
    int thread_running; /* atomic: read by wake() */
    int thread_stop;
    int poked;          /* atomic: a wake-up is pending */
    pthread_cond_t wake;
} C = {.spool_fd = -1, .mirror_fd = -1, .wake = PTHREAD_COND_INITIALIZER};

static void drain_all(int discard, int all_memory);
static int trace_room(void);
static void mirror_prepare(void);
static void mirror_drop(void);

/* ------------------------------------------------------------ the sinks */

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The trace sink for the configured format and filename; NULL with
 * C.trace_error set when the format has no sink in this build. */
static const mlprof__sink_entry *trace_entry(const char *path, int *gzip)
{
    const mlprof__config *c = &mlprof__g.cfg;
    size_t n = strlen(path);
    int gz_name = ends_with(path, n, ".gz");
    *gzip = strcmp(c->compress, "gzip") == 0 || (strcmp(c->compress, "auto") == 0 && gz_name);
    if (gz_name)
        n -= 3;
    const mlprof__sink_entry *fallback = NULL;
    for (size_t i = 0; i < mlprof__nsinks; i++) {
        const mlprof__sink_entry *e = &mlprof__sink_table[i];
        if (!e->format)
            continue;
        if (!fallback)
            fallback = e;
        if (strcmp(c->format, e->format) == 0)
            return e;
        if (strcmp(c->format, "auto") == 0) {
            char name[MLPROF__PATH_MAX];
            snprintf(name, sizeof name, "%.*s", (int)n, path);
            for (const char *const *s = e->suffixes; s && *s; s++)
                if (ends_with(name, n, *s))
                    return e;
        }
    }
    if (strcmp(c->format, "auto") == 0)
        return fallback;
    snprintf(C.trace_error, sizeof C.trace_error, "format=%s: this build of mlprof has no writer for it", c->format);
    return NULL;
}

/* The file sinks, made once (their state lasts across traces), and which of
 * them are on for this drain. */
static void files_prepare(void)
{
    if (!C.files_made) {
        C.files_made = 1;
        for (size_t i = 0; i < mlprof__nsinks && C.nfiles < SINKS_MAX; i++) {
            const mlprof__sink_entry *e = &mlprof__sink_table[i];
            if (e->format)
                continue;
            sink *s = &C.files[C.nfiles++];
            s->e = e;
            s->st = e->ops->create ? e->ops->create() : NULL;
            if (e->ops->create && !s->st) {
                mlprof__log(MLPROF_LOG_ERROR, "the %s output is off: out of memory", e->ops->name);
                C.nfiles--;
            }
        }
    }
    for (size_t i = 0; i < C.nfiles; i++)
        C.files[i].on = !C.files[i].e->on || C.files[i].e->on();
}

/* A trace in another format than JSON gets its JSON copy, started with it
 * (its head the copy's first bytes): mlprof_dump_string may be asked for
 * the trace at any time, and the events it would miss are gone once
 * drained. What it costs: the JSON sink's work on each event, its bytes in
 * a temporary file where the spool goes (beside the output, else TMPDIR or
 * /tmp), the arguments kept as text too. */
static void mirror_prepare(void)
{
    /* asked for only (json_copy): it costs a Perfetto dump the JSON text of every argument and as much again
     * in writing */
    if (!mlprof__g.cfg.json_copy || C.mirror.e || !C.trace.e || C.trace.e->ops == &mlprof__json_sink)
        return;
    const mlprof__sink_entry *e = NULL;
    for (size_t i = 0; i < mlprof__nsinks && !e; i++)
        if (mlprof__sink_table[i].ops == &mlprof__json_sink)
            e = &mlprof__sink_table[i];
    if (!e)
        return;
    C.mirror.e = e;
    C.mirror.st = e->ops->create ? e->ops->create() : NULL;
    if (e->ops->create && !C.mirror.st) {
        C.mirror_err = ENOMEM;
        return;
    }
    C.mirror.on = 1;
    if (e->ops->head)
        e->ops->head(C.mirror.st, &C.mirror_buf);
}

static void mirror_drop(void)
{
    if (C.mirror.e && C.mirror.e->ops->destroy && C.mirror.st)
        C.mirror.e->ops->destroy(C.mirror.st);
    memset(&C.mirror, 0, sizeof C.mirror);
    if (C.mirror_fd >= 0)
        close(C.mirror_fd);
    C.mirror_fd = -1;
    C.mirror_size = 0;
    mlprof__sb_free(&C.mirror_buf);
    C.mirror_tail = NULL;
    C.mirror_failing = 0;
    C.mirror_err = 0;
}

/* The trace sink of this trace, chosen at its first drain; its head opens
 * the stream. */
static void trace_prepare(void)
{
    if (C.trace.e)
        return;
    C.trace_error[0] = '\0'; /* a format without a writer: asked again, the key may have changed */
    char path[4200];
    mlprof__collect_trace_path(path, sizeof path);
    const mlprof__sink_entry *e = trace_entry(path, &C.compress);
    if (!e)
        return;
    void *st = e->ops->create ? e->ops->create() : NULL;
    if (e->ops->create && !st) {
        snprintf(C.trace_error, sizeof C.trace_error, "cannot start the %s trace: out of memory", e->ops->name);
        return;
    }
    C.trace.e = e;
    C.trace.st = st;
    C.trace.on = 1;
    /* level 1: about twice zlib's default speed for 8.6x against 12x on a trace */
    if (C.compress)
        mlprof__gz_library(mlprof__g.cfg.zlib_library);
    if (C.compress && !(C.gz = mlprof__gz_open(1)))
        snprintf(C.trace_error, sizeof C.trace_error, "cannot compress the trace with zlib: %s",
                 mlprof_last_error());
    if (e->ops->head)
        e->ops->head(st, &C.buf);
    mirror_prepare();
}

static void trace_drop(void)
{
    if (C.trace.e && C.trace.e->ops->destroy)
        C.trace.e->ops->destroy(C.trace.st);
    memset(&C.trace, 0, sizeof C.trace);
    mirror_drop();
    C.trace_error[0] = '\0';
    mlprof__gz_free(C.gz);
    C.gz = NULL;
    C.compress = 0;
    C.gz_failed = 0;
    mlprof__sb_reset(&C.zbuf);
    C.zbuf_events = 0;
}

/* What the sinks on ask of the decoder: set at each drain, read when a span
 * begins (the forms of its arguments kept) and when one is handed over. */
static void sinks_wants(void)
{
    unsigned any = 0, all = MLPROF__SINK_NO_TEXT;
    if (C.trace.e && C.trace.on) {
        any |= C.trace.e->ops->flags;
        all &= C.trace.e->ops->flags;
    }
    if (C.mirror.on) {
        any |= C.mirror.e->ops->flags;
        all &= C.mirror.e->ops->flags;
    }
    for (size_t i = 0; i < C.nfiles; i++)
        if (C.files[i].on) {
            any |= C.files[i].e->ops->flags;
            all &= C.files[i].e->ops->flags;
        }
    C.want_typed = (any & MLPROF__SINK_TYPED) != 0;
    C.want_text = !(all & MLPROF__SINK_NO_TEXT) || !C.want_typed; /* one form at least */
    C.slices = C.trace.e && C.trace.on && (C.trace.e->ops->flags & MLPROF__SINK_SLICES) &&
               C.trace.e->ops->slice_begin && C.trace.e->ops->slice_end;
}

static mlprof__stats *stats_of(void)
{
    for (size_t i = 0; i < C.nfiles; i++)
        if (C.files[i].e->ops == &mlprof__stats_sink)
            return C.files[i].st;
    return NULL;
}

/* Each call hands one event to every sink on: the trace sink appends to sb
 * (the stream's buffer, or a tail's; a tail without sb is dump_string's,
 * for the JSON copy alone), the JSON copy takes what the trace sink took
 * (to its own buffer, or its tail while dump_string writes one), the file
 * sinks get no buffer. */
#define TO_SINKS(op, in_tail, to, ev)                                                            \
    do {                                                                                         \
        mlprof__sink_out o_ = {(to), (in_tail)};                                                 \
        int took_ = 0;                                                                           \
        if (C.trace.e && C.trace.e->ops->op && (!(in_tail) || o_.sb)) {                          \
            if ((in_tail) || trace_room()) {                                                     \
                C.trace.e->ops->op(C.trace.st, &o_, (ev));                                       \
                if (!(in_tail))                                                                  \
                    C.buf_events++;                                                              \
                took_ = 1;                                                                       \
            } else {                                                                             \
                C.capped_events++;                                                               \
            }                                                                                    \
        }                                                                                        \
        if (C.mirror.on && C.mirror.e->ops->op && ((in_tail) ? C.mirror_tail != NULL : took_)) { \
            mlprof__sink_out m_ = {(in_tail) ? C.mirror_tail : &C.mirror_buf, (in_tail)};        \
            C.mirror.e->ops->op(C.mirror.st, &m_, (ev));                                         \
        }                                                                                        \
        o_.sb = NULL;                                                                            \
        for (size_t i_ = 0; i_ < C.nfiles; i_++)                                                 \
            if (C.files[i_].on && C.files[i_].e->ops->op)                                        \
                C.files[i_].e->ops->op(C.files[i_].st, &o_, (ev));                               \
    } while (0)

/* -------------------------------------------------------- the spool */

/* An unlinked temporary file in dir (a name for it only where O_TMPFILE is
 * not supported: *linkable then 0), or -1. */
static int spool_create(const char *dir, int *linkable)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    *linkable = fd >= 0;
    if (fd >= 0)
        return fd;
    char tmpl[4300];
    snprintf(tmpl, sizeof tmpl, "%s%s.mlprof-spool-XXXXXX", dir, dir[strlen(dir) - 1] == '/' ? "" : "/");
    fd = mkostemp(tmpl, O_CLOEXEC);
    if (fd >= 0)
        unlink(tmpl);
    return fd;
}

/* A new spool file: beside the output if possible (same file system: a
 * cheap copy), else TMPDIR or /tmp; never beside a device or FIFO
 * (/dev/null). Its descriptor, or -1 with errno. */
static int spool_new(int *linkable)
{
    char path[4200];
    mlprof__collect_trace_path(path, sizeof path);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        strcpy(dir, "./");
    struct stat st;
    int special = stat(path, &st) == 0 && !S_ISREG(st.st_mode);
    const char *dirs[] = {special ? NULL : dir, getenv("TMPDIR"), "/tmp/"};
    int err = 0, fd = -1;
    for (size_t i = 0; i < 3 && fd < 0; i++) {
        if (!dirs[i] || !*dirs[i])
            continue;
        fd = spool_create(dirs[i], linkable);
        if (fd < 0 && !err)
            err = errno; /* the reason that matters: where it belongs */
    }
    if (fd < 0)
        errno = err;
    return fd;
}

static int spool_open(void)
{
    if (C.spool_fd >= 0)
        return 0;
    C.spool_fd = spool_new(&C.spool_linkable);
    if (C.spool_fd < 0)
        return -1;
    C.spool_size = 0;
    C.spool_published = 0;
    return 0;
}

/* The spool became the trace file of the last dump: its bytes so far go to
 * a new spool, which takes the next ones (the file stays as written). Only a
 * dump that is not the last pays this copy; the last one paid none. */
static int spool_unpublish(void)
{
    int old = C.spool_fd, linkable = C.spool_linkable;
    uint64_t size = C.spool_size;
    C.spool_fd = -1;
    if (spool_open() != 0 || mlprof__copy_fd(old, C.spool_fd, size) != 0) {
        int err = errno;
        if (C.spool_fd >= 0)
            close(C.spool_fd);
        C.spool_fd = old;
        C.spool_size = size;
        C.spool_linkable = linkable;
        C.spool_published = 1;
        errno = err;
        return -1;
    }
    close(old);
    C.spool_size = size;
    return 0;
}

/* Bytes of events kept in memory while the spool cannot be written: as much
 * as the buffers hold, and 1 MiB at least. */
static size_t pending_max(void)
{
    uint64_t n = mlprof__g.cfg.buffer_size;
    return n < (1u << 20) ? (size_t)1 << 20 : (size_t)n;
}

/* A byte count as a person reads it ("64.0 MiB"). */
static void bytes_text(uint64_t n, char *buf, size_t len)
{
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__sb_bytes(&sb, n);
    snprintf(buf, len, "%s", sb.data && !sb.failed ? sb.data : "?");
    mlprof__sb_free(&sb);
}

/* Appends n bytes to the spool; 0, or -1 with errno. */
static int spool_append(const char *p, size_t n)
{
    if (spool_open() != 0 || (C.spool_published && spool_unpublish() != 0) ||
        mlprof__pwrite_all(C.spool_fd, p, n, C.spool_size) != 0)
        return -1;
    C.spool_size += n;
    return 0;
}

/* Compressed: the bytes the stream made and the spool has not taken go
 * first, then buf is compressed and goes after them. buf is compressed only
 * once what came before is in the spool, so that events lost to a full disk
 * (buf's) are never part of the stream: it stays whole. 0, or -1 with errno
 * (the spool cannot be written). */
static int spool_write_compressed(void)
{
    for (;;) {
        if (C.zbuf.len) {
            if (spool_append(C.zbuf.data, C.zbuf.len) != 0)
                return -1;
            mlprof__sb_reset(&C.zbuf);
            C.zbuf_events = 0;
        }
        if (!C.buf.len)
            return 0;
        if (C.gz_failed) { /* a broken stream takes nothing more */
            C.unwritten += C.buf_events;
            mlprof__sb_reset(&C.buf);
            C.buf_events = 0;
            return 0;
        }
        if (mlprof__gz_write(C.gz, C.buf.data, C.buf.len, &C.zbuf) != MLPROF_OK || C.zbuf.failed) {
            /* the stream is broken: what it held is lost with it */
            mlprof__log(MLPROF_LOG_ERROR, "the gzip trace cannot go on: %s", mlprof_last_error());
            C.gz_failed = 1;
            C.unwritten += C.buf_events;
            mlprof__sb_reset(&C.buf);
            C.buf_events = 0;
            return 0;
        }
        C.zbuf_events = C.buf_events;
        mlprof__sb_reset(&C.buf);
        C.buf_events = 0;
    }
}

/* The JSON copy's bytes to its file. When it cannot be written they wait,
 * as the trace's do, up to pending_max() bytes; past that the copy is
 * given up for this trace (said once; mlprof_dump_string then fails with
 * the reason), the trace file untouched. */
static void mirror_flush(void)
{
    if (!C.mirror.on || (!C.mirror_buf.len && !C.mirror_buf.failed))
        return;
    int err = ENOMEM;
    if (!C.mirror_buf.failed) {
        int linkable;
        if (C.mirror_fd < 0)
            C.mirror_fd = spool_new(&linkable);
        if (C.mirror_fd >= 0 &&
            mlprof__pwrite_all(C.mirror_fd, C.mirror_buf.data, C.mirror_buf.len, C.mirror_size) == 0) {
            C.mirror_size += C.mirror_buf.len;
            mlprof__sb_reset(&C.mirror_buf);
            C.mirror_failing = 0;
            return;
        }
        err = errno;
        C.mirror_failing = 1;
        if (C.mirror_buf.len <= pending_max())
            return;
    }
    C.mirror.on = 0;
    C.mirror_err = err;
    mlprof__sb_free(&C.mirror_buf);
    mlprof__log(MLPROF_LOG_ERROR,
                "the JSON copy of the trace, which mlprof_dump_string reads, cannot be written (%s): "
                "mlprof_dump_string fails until the trace ends; the trace file is not affected",
                strerror(err));
}

/* Writes the events formatted so far to the spool. When it cannot (a full
 * disk), they are kept for the next flush, or the dump writes them itself;
 * past pending_max() bytes they are lost: counted and said. */
static void spool_flush(void)
{
    mirror_flush();
    if (C.buf.len == 0 && C.zbuf.len == 0)
        return;
    /* a gzip trace without zlib spools its plain bytes: kept, though no dump can write them */
    int zipped = C.compress && C.gz;
    int rc = zipped ? spool_write_compressed() : spool_append(C.buf.data, C.buf.len);
    if (rc == 0) {
        if (C.spool_failing)
            mlprof__log(MLPROF_LOG_INFO, "the trace spool is written again: the events kept in memory are in it");
        C.spool_failing = 0;
        if (!zipped) {
            mlprof__sb_reset(&C.buf);
            C.buf_events = 0;
        }
        return;
    }
    int err = errno;
    char keep[32];
    bytes_text(pending_max(), keep, sizeof keep);
    if (!C.spool_failing)
        mlprof__log(MLPROF_LOG_ERROR,
                    "cannot write the trace spool: %s; the events are kept in memory (%s at most) until it can be",
                    strerror(err), keep);
    C.spool_failing = 1;
    if (C.buf.len <= pending_max())
        return;
    uint64_t n = C.buf_events;
    C.unwritten += n;
    C.lost_errno = err;
    mlprof__log(MLPROF_LOG_ERROR,
                "%llu events of the trace lost (%llu so far): the spool cannot be written (%s) and memory "
                "keeps %s of events at most",
                (unsigned long long)n, (unsigned long long)C.unwritten, strerror(err), keep);
    mlprof__sb_reset(&C.buf);
    C.buf_events = 0;
    if (C.spool_size == 0 && C.zbuf.len == 0 && C.trace.e) {
        /* the head was lost too: the stream starts again */
        if (C.trace.e->ops->reset)
            C.trace.e->ops->reset(C.trace.st);
        if (C.trace.e->ops->head)
            C.trace.e->ops->head(C.trace.st, &C.buf);
    } else if (C.trace.e && C.trace.e->ops->lost) {
        /* what the lost bytes said (Perfetto's interning) is said again */
        C.trace.e->ops->lost(C.trace.st, &C.buf);
    }
}

static void spool_reset(void)
{
    if (C.spool_fd >= 0)
        close(C.spool_fd);
    C.spool_fd = -1;
    C.spool_size = 0;
    C.spool_published = 0;
    mlprof__sb_reset(&C.buf);
    C.buf_events = 0;
    C.capped = 0;
    C.capped_events = 0;
}

/* The bytes of the trace's stream so far: spooled, compressed and waiting,
 * and formatted and waiting (for gzip an upper bound of what they will take
 * compressed, until a flush says). */
static uint64_t stream_bytes(void) { return C.spool_size + C.zbuf.len + C.buf.len; }

/* Ring mode: whether an event at ns is gone from the ring (decoded while
 * its chunk is evicted, or older than the ring's start though its thread's
 * chunk was kept): counted, not handed over. */
static int ring_gone(uint64_t ns)
{
    if (C.evicting || (C.horizon_ns && ns < C.horizon_ns)) {
        C.overwritten++;
        return 1;
    }
    return 0;
}

static void span_typed_arg(open_span *o, const char *key, size_t key_len, int type, int64_t i, double d,
                           const char *str, size_t str_len);

/* Ring mode: a span that began before the ring's start is shown from there,
 * marked (cut_by_ring: true): its begin was overwritten, its end was not. */
static void ring_cut(open_span *o)
{
    if (!C.horizon_ns || o->begin_ns >= C.horizon_ns)
        return;
    o->begin_ns = C.horizon_ns; /* one cut before a flush follows the ring's start, marked once */
    if (o->cut)
        return;
    o->cut = 1;
    if (o->text) {
        if (o->args.len)
            mlprof__sb_putc(&o->args, ',');
        mlprof__sb_puts(&o->args, "\"cut_by_ring\":true");
    }
    if (o->typed)
        span_typed_arg(o, "cut_by_ring", 11, MLPROF__ARG_INT, 1, 0, NULL, 0);
}

/* max_trace_size: whether the stream takes the next event. It stops at the
 * first event that finds it at the cap or past it, so it passes the cap by
 * the last event written at most (and a Perfetto slice begun before the cap
 * still gets its end, written past it); the tail comes on top. Once stopped
 * it stays so until the trace ends: a trace is whole up to a point in time,
 * not riddled with holes. Said once on stderr; otherData counts the rest. */
static int trace_room(void)
{
    uint64_t cap = mlprof__g.cfg.max_trace_size;
    if (C.capped)
        return 0;
    if (!cap || stream_bytes() < cap)
        return 1;
    /* gzip: the plain bytes waiting are far more than they will take; a
     * flush says how much room is really left (each one leaves less to
     * compress, so few are needed; below 4 KiB waiting the estimate will do) */
    if (C.compress && C.gz && !C.gz_failed && C.buf.len >= 4096) {
        spool_flush();
        if (stream_bytes() < cap)
            return 1;
    }
    C.capped = 1;
    char size[32];
    bytes_text(cap, size, sizeof size);
    mlprof__log(MLPROF_LOG_WARN,
                "the trace reached max_trace_size=%llu (%s): the events after it are left out of it "
                "(counted in otherData.capped_events)",
                (unsigned long long)cap, size);
    return 0;
}

/* ------------------------------------------------------------ tracks */

static void stack_clear(span_stack *s)
{
    for (size_t i = 0; i < s->depth; i++) {
        mlprof__free(s->items[i].dyn_name);
        s->items[i].dyn_name = NULL;
    }
    /* popped entries keep their argument buffers for reuse: free them all */
    for (size_t i = 0; i < s->cap; i++) {
        mlprof__sb_free(&s->items[i].args);
        mlprof__sb_free(&s->items[i].ttext);
        mlprof__free(s->items[i].targs);
        s->items[i].targs = NULL;
        s->items[i].ntargs = s->items[i].targs_cap = 0;
    }
    s->depth = 0;
}

static void track_free(track *tr)
{
    stack_clear(&tr->tasks);
    stack_clear(&tr->frames);
    mlprof__free(tr->tasks.items);
    mlprof__free(tr->frames.items);
    mlprof__sb_free(&tr->inst_args);
    mlprof__free(tr);
}

static track *track_for(mlprof__thread *t)
{
    if (t->track)
        return t->track;
    track *tr = mlprof__calloc(1, sizeof *tr);
    if (!tr)
        return NULL;
    tr->thread = t;
    tr->tid = t->tid;
    tr->seq = t->seq;
    tr->scope = &mlprof__g.scope_root; /* scope records move it; t->scope is the thread's own */
    /* keep the list in registration order for a stable track order */
    track **p = &C.tracks;
    while (*p && (*p)->seq < tr->seq)
        p = &(*p)->next;
    tr->next = *p;
    *p = tr;
    t->track = tr;
    return tr;
}

static void read_thread_name(track *tr)
{
    mlprof__thread *t = tr->thread;
    if (!t)
        return;
    /* The seqlock's reader (the writer is mlprof_thread_set_name). The first
     * load is an acquire: the name read after it is at least the one of the
     * even count it saw. The second load must come after the name's loads,
     * and a relaxed load may be satisfied early on aarch64 or POWER: each
     * name load is an acquire, which keeps every later load after it. If a
     * name load read a byte a writer stored (a release store, after its odd
     * increment), it synchronizes with that store, so the count loaded after
     * it is that odd one or later, and the copy is thrown away. No fence:
     * gcc's ThreadSanitizer refuses them; on x86 all of these are plain
     * moves. */
    for (int tries = 0; tries < 100; tries++) {
        unsigned s0 = __atomic_load_n(&t->name_seq, __ATOMIC_ACQUIRE);
        if (s0 & 1)
            continue;
        char tmp[64];
        for (size_t i = 0; i < sizeof tmp; i++)
            tmp[i] = __atomic_load_n(&t->name[i], __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&t->name_seq, __ATOMIC_RELAXED) == s0) {
            tmp[sizeof tmp - 1] = '\0';
            if (tmp[0])
                memcpy(tr->name, tmp, sizeof tmp);
            return;
        }
    }
}

/* --------------------------------------------------------- the decoder */

static const char *span_name(const open_span *o, size_t *len)
{
    const char *name = o->handle ? o->handle->name : o->dyn_name ? o->dyn_name : "";
    *len = strlen(name);
    return name;
}

/* The span's typed arguments from index `from`, as the sinks get them (in
 * C.targ_out, valid until the next call); NULL when it has none kept. */
static const mlprof__arg_out *typed_args(const open_span *o, size_t from, size_t *n)
{
    *n = 0;
    if (!o->typed || from >= o->ntargs)
        return NULL;
    size_t k = o->ntargs - from;
    if (k > C.targ_out_cap) {
        mlprof__arg_out *a = mlprof__realloc(C.targ_out, k * sizeof *a);
        if (!a)
            return NULL; /* out of memory: the sink goes without them */
        C.targ_out = a;
        C.targ_out_cap = k;
    }
    for (size_t i = 0; i < k; i++) {
        const open_arg *t = &o->targs[from + i];
        mlprof__arg_out *a = &C.targ_out[i];
        a->key = o->ttext.data + t->key_off;
        a->key_len = t->key_len;
        a->type = t->type;
        a->i = t->i;
        a->d = t->d;
        a->s = o->ttext.data + t->s_off;
        a->s_len = t->s_len;
    }
    *n = k;
    return C.targ_out;
}

/* The JSON text of a typed argument (as add_arg writes it), after a comma
 * unless sb is empty. */
static void arg_text(mlprof__sb *sb, const char *key, size_t key_len, int type, int64_t i, double d,
                     const char *str, size_t str_len)
{
    if (sb->len)
        mlprof__sb_putc(sb, ',');
    mlprof__sb_json_str(sb, key, key_len);
    mlprof__sb_putc(sb, ':');
    if (type == MLPROF__ARG_INT)
        mlprof__sb_i64(sb, i);
    else if (type == MLPROF__ARG_DOUBLE)
        mlprof__sb_double(sb, d);
    else
        mlprof__sb_json_str(sb, str, str_len);
}

/* Fills what every sink gets of span o: its arguments in the forms asked
 * for (the text made from the typed ones, once, when it was not kept). */
static void span_fill(mlprof__span_out *s, track *tr, const open_span *o, int frame)
{
    /* every field set, without a memset: this runs once or twice a span */
    s->name = span_name(o, &s->name_len);
    s->domain = o->domain->name;
    s->kind = frame ? MLPROF__OUT_FRAME : MLPROF__OUT_TASK;
    s->begin_ns = o->begin_ns;
    s->end_ns = 0;
    s->pid = mlprof__g.pid;
    s->tid = tr->tid;
    s->id = o->handle;
    s->frame_id = 0;
    s->unfinished = 0;
    s->self_ns = 0;
    s->depth = 0;
    s->hw = NULL;
    s->hw_mask = 0;
    s->targs = NULL;
    s->ntargs = 0;
    if (MLPROF_LIKELY(o->text)) {
        s->args = o->args.data;
        s->args_len = o->args.len;
    } else if (!C.want_text) {
        s->args = NULL;
        s->args_len = 0;
    } else {
        mlprof__sb_reset(&C.text_tmp);
        for (size_t i = 0; i < o->ntargs; i++) {
            const open_arg *t = &o->targs[i];
            arg_text(&C.text_tmp, o->ttext.data + t->key_off, t->key_len, t->type, t->i, t->d,
                     o->ttext.data + t->s_off, t->s_len);
        }
        s->args = C.text_tmp.data;
        s->args_len = C.text_tmp.len;
    }
    if (o->typed && !(s->targs = typed_args(o, 0, &s->ntargs)))
        s->ntargs = 0;
}

/* Hands task o's begin to the slice sink (into the stream, or a tail). */
static void hand_begin(track *tr, open_span *o, size_t depth, int tail, mlprof__sb *sb)
{
    if (C.evicting)
        return; /* handed over at its end, if that is kept */
    ring_cut(o);
    if (!tail && !trace_room()) {
        o->capped = 1; /* counted at its end, which is left out too */
        return;
    }
    mlprof__span_out s;
    span_fill(&s, tr, o, 0);
    s.depth = (uint32_t)depth;
    mlprof__sink_out out = {sb, tail};
    C.trace.e->ops->slice_begin(C.trace.st, &out, &s);
    if (!tail) {
        o->begun = 1;
        o->targs_begun = o->ntargs;
    }
}

/* Hands task o's end to the slice sink, with the arguments recorded after
 * its begin (s: the span as span_fill made it). */
static void hand_end(open_span *o, const mlprof__span_out *s, int tail, mlprof__sb *sb)
{
    mlprof__span_out e = *s; /* s->targs: all of them (span_fill) */
    size_t from = tail && !o->begun ? o->ntargs : o->targs_begun;
    e.targs = s->targs && s->ntargs > from ? s->targs + from : NULL;
    e.ntargs = e.targs ? s->ntargs - from : 0;
    mlprof__sink_out out = {sb, tail};
    C.trace.e->ops->slice_end(C.trace.st, &out, &e);
}

/* A slice sink gets the begin of the innermost task of tr once its
 * arguments are complete: at the thread's next record that is not an
 * argument, or before anything else is said of the span. */
static void flush_begin(track *tr)
{
    span_stack *s = &tr->tasks;
    if (!C.slices || !s->depth || C.evicting)
        return;
    if (tr->unbegun) { /* after an eviction: outermost first, so that slices nest */
        tr->unbegun = 0;
        for (size_t i = 0; i + 1 < s->depth; i++)
            if (!s->items[i].begun && !s->items[i].capped)
                hand_begin(tr, &s->items[i], i, 0, &C.buf);
    }
    if (!s->items[s->depth - 1].begun && !s->items[s->depth - 1].capped)
        hand_begin(tr, &s->items[s->depth - 1], s->depth - 1, 0, &C.buf);
}

/* Hands a finished span to the sinks (tail: a span still open, shown in a
 * dump's tail, appended to sb; a slice sink gets those from write_tail).
 * depth: spans open below it on its stack. */
static void emit_span(track *tr, open_span *o, uint64_t end_ns, uint64_t self_ns, int frame, int unfinished,
                      size_t depth, int tail, mlprof__sb *sb)
{
    if (!tail && ring_gone(end_ns))
        return;
    ring_cut(o);
    mlprof__span_out s;
    if (C.slices && !frame && !tail && !o->begun && !o->capped)
        hand_begin(tr, o, depth, 0, sb); /* closed by the profiler before its thread's next record */
    span_fill(&s, tr, o, frame);
    s.end_ns = end_ns < o->begin_ns ? o->begin_ns : end_ns;
    s.frame_id = ++C.frame_ids;
    s.unfinished = unfinished;
    s.self_ns = self_ns;
    s.depth = (uint32_t)depth;
    s.hw = o->hw_mask ? o->hw : NULL;
    s.hw_mask = o->hw_mask;
    mlprof__sink_out out = {sb, tail};
    int took = 0; /* by the trace's stream: the JSON copy takes it too */
    if (C.slices && !frame) {
        if (!tail && o->begun) { /* past max_trace_size too: its begin is in the file */
            hand_end(o, &s, 0, sb);
            C.buf_events++;
            took = 1;
        } else if (!tail) {
            C.capped_events++;
        }
    } else if (C.trace.e && C.trace.e->ops->span && (!tail || sb)) {
        if (tail || trace_room()) {
            C.trace.e->ops->span(C.trace.st, &out, &s);
            if (!tail)
                C.buf_events++;
            took = !tail;
        } else {
            C.capped_events++;
        }
    }
    if (C.mirror.on && (tail ? C.mirror_tail != NULL : took)) {
        mlprof__sink_out m = {tail ? C.mirror_tail : &C.mirror_buf, tail};
        C.mirror.e->ops->span(C.mirror.st, &m, &s);
    }
    out.sb = NULL;
    for (size_t i = 0; i < C.nfiles; i++)
        if (C.files[i].on && C.files[i].e->ops->span)
            C.files[i].e->ops->span(C.files[i].st, &out, &s);
}

/* Adds an argument to open span o in its typed form. */
static void span_typed_arg(open_span *o, const char *key, size_t key_len, int type, int64_t i, double d,
                           const char *str, size_t str_len)
{
    open_arg *a = mlprof__grow(o->targs, &o->targs_cap, o->ntargs, sizeof *a, 8);
    size_t off = o->ttext.len;
    if (!a || off + key_len + str_len > UINT32_MAX)
        return; /* out of memory: the argument is left out of the typed form */
    o->targs = a;
    mlprof__sb_put(&o->ttext, key, key_len);
    if (type == MLPROF__ARG_STRING)
        mlprof__sb_put(&o->ttext, str, str_len);
    if (o->ttext.failed)
        return;
    a = &o->targs[o->ntargs++];
    a->key_off = (uint32_t)off;
    a->key_len = (uint32_t)key_len;
    a->type = type;
    a->i = i;
    a->d = d;
    a->s_off = (uint32_t)(off + key_len);
    a->s_len = type == MLPROF__ARG_STRING ? (uint32_t)str_len : 0;
}

static void push_span(track *tr, span_stack *s, const mlprof__handle *h, mlprof_domain *d,
                      const char *dyn, size_t dyn_len, uint64_t ns)
{
    if (s->depth == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        open_span *items = mlprof__realloc(s->items, cap * sizeof *items);
        if (!items)
            return;
        memset(items + s->cap, 0, (cap - s->cap) * sizeof *items);
        s->items = items;
        s->cap = cap;
    }
    open_span *o = &s->items[s->depth++];
    o->handle = h;
    o->domain = d;
    o->dyn_name = dyn ? mlprof__strndup(dyn, dyn_len) : NULL;
    o->begin_ns = ns;
    o->child_ns = 0;
    o->hw_mask = 0;
    o->begun = 0;
    o->capped = 0;
    o->cut = 0;
    o->targs_begun = 0;
    o->text = C.want_text;
    o->typed = C.want_typed;
    mlprof__sb_reset(&o->args);
    mlprof__sb_reset(&o->ttext);
    o->ntargs = 0;
    if (tr->scope && tr->scope->full_len) {
        if (o->text) {
            mlprof__sb_puts(&o->args, "\"scope\":");
            mlprof__sb_json_str(&o->args, tr->scope->full, tr->scope->full_len);
        }
        if (o->typed)
            span_typed_arg(o, "scope", 5, MLPROF__ARG_STRING, 0, 0, tr->scope->full, tr->scope->full_len);
    }
}

/* Closes the top of the stack at end_ns. */
static void pop_span(track *tr, span_stack *s, uint64_t end_ns, int frame, int unfinished)
{
    open_span *o = &s->items[--s->depth];
    if (!C.evicting)
        ring_cut(o); /* a span the ring cut: its time, and so its self time, from the ring's start */
    uint64_t dur = end_ns > o->begin_ns ? end_ns - o->begin_ns : 0;
    uint64_t self = dur > o->child_ns ? dur - o->child_ns : 0;
    /* an evicted span lies before the ring's start, where its parent's kept
     * time does not reach: it is no child time of that */
    if (s->depth > 0 && !C.evicting)
        s->items[s->depth - 1].child_ns += dur;
    if (unfinished)
        C.unfinished++;
    emit_span(tr, o, end_ns, self, frame, unfinished, s->depth, 0, &C.buf);
    mlprof__free(o->dyn_name);
    o->dyn_name = NULL;
}

/* Ends the innermost span that matches; spans above it lost their end (a
 * drop, or ends out of order) and are closed with it. */
static void end_span(track *tr, span_stack *s, const mlprof__handle *h, mlprof_domain *dyn_domain,
                     uint64_t ns, int frame)
{
    size_t i = s->depth;
    while (i > 0) {
        const open_span *o = &s->items[i - 1];
        if (h ? o->handle == h : (o->handle == NULL && o->domain == dyn_domain))
            break;
        i--;
    }
    if (i == 0) {
        if (frame && h && C.npending < sizeof C.pending_end / sizeof C.pending_end[0]) {
            C.pending_end[C.npending].h = h;
            C.pending_end[C.npending++].ns = ns;
        } else {
            C.unmatched_ends++;
        }
        return;
    }
    while (s->depth > i)
        pop_span(tr, s, ns, frame, 1);
    pop_span(tr, s, ns, frame, 0);
}

static void flush_instant(track *tr)
{
    if (!tr->instant_pending)
        return;
    tr->instant_pending = 0;
    if (ring_gone(tr->inst_ns))
        return;
    mlprof__instant_out e = {tr->inst_name, tr->inst_name_len, tr->inst_domain->name, tr->inst_ns, tr->inst_scope,
                             mlprof__g.pid, tr->tid, tr->inst_args.data, tr->inst_args.len, tr->inst_handle};
    TO_SINKS(instant, 0, &C.buf, &e);
}

/* h: the marker's handle, or NULL for a run-time name (copied here). */
static void start_instant(track *tr, const mlprof__handle *h, mlprof_domain *d, const char *name,
                          size_t len, uint64_t ns, int scope)
{
    tr->inst_handle = h;
    if (!h) {
        memcpy(tr->inst_dyn, name, len);
        tr->inst_dyn[len] = '\0';
        name = tr->inst_dyn;
    }
    tr->instant_pending = 1;
    tr->inst_name = name;
    tr->inst_name_len = len;
    tr->inst_domain = d;
    tr->inst_ns = ns;
    tr->inst_scope = scope;
    mlprof__sb_reset(&tr->inst_args);
}

/* The span arguments go to when no instant takes them. */
static open_span *arg_span(track *tr)
{
    span_stack *s = tr->arg_to_frame && tr->frames.depth ? &tr->frames : &tr->tasks;
    return s->depth ? &s->items[s->depth - 1] : NULL;
}

/* The slot of an integer argument summed per span (a module's: the
 * counters measured on spans), or -1. */
static int arg_slot(const char *key, size_t len)
{
    MLPROF__FOR_MODULES(m) {
        int slot = m->arg_slot ? m->arg_slot(key, len) : -1;
        if (slot >= 0)
            return slot < MLPROF__ARG_SLOTS ? slot : -1;
    }
    return -1;
}

static inline double rec_double(const mlprof__rec *r)
{
    double v;
    memcpy(&v, &r->a, sizeof v);
    return v;
}

static void add_arg(track *tr, unsigned kind, const mlprof__rec *r, const char *text)
{
    mlprof__sb *args = &tr->inst_args;
    open_span *o = NULL;
    if (!tr->instant_pending) {
        o = arg_span(tr);
        if (!o)
            return;
        args = o->text ? &o->args : NULL;
        if (o->typed) /* first: the text's calls below need not keep o */
            span_typed_arg(o, text, MLPROF__REC_AUX(r->b),
                           kind == MLPROF__REC_ARG_I ? MLPROF__ARG_INT
                           : kind == MLPROF__REC_ARG_F ? MLPROF__ARG_DOUBLE : MLPROF__ARG_STRING,
                           (int64_t)r->a, rec_double(r), text + MLPROF__REC_AUX(r->b),
                           kind == MLPROF__REC_ARG_S ? (size_t)r->a : 0);
    }
    size_t klen = MLPROF__REC_AUX(r->b);
    if (o && kind == MLPROF__REC_ARG_I) {
        /* counters measured on the span (perf.c) are summed in the statistics */
        int hw = arg_slot(text, klen);
        if (hw >= 0) { /* the first of a span's values starts its sum: stack slots are reused */
            o->hw[hw] = (o->hw_mask >> hw & 1 ? o->hw[hw] : 0) + (int64_t)r->a;
            o->hw_mask |= 1u << hw;
        }
    }
    if (args) { /* the JSON text: an instant's, or a span's when a sink on reads it */
        if (args->len)
            mlprof__sb_putc(args, ',');
        mlprof__sb_json_str(args, text, klen);
        mlprof__sb_putc(args, ':');
        if (kind == MLPROF__REC_ARG_I)
            mlprof__sb_i64(args, (int64_t)r->a);
        else if (kind == MLPROF__REC_ARG_F)
            mlprof__sb_double(args, rec_double(r));
        else
            mlprof__sb_json_str(args, text + klen, (size_t)r->a);
    }
}

static void counter_sample(track *tr, const mlprof__rec *r, int is_int)
{
    const mlprof_counter *c = MLPROF__REC_PTR(r[0].b);
    uint64_t ns = mlprof__clock_to_ns(r[0].a);
    if (ring_gone(ns))
        return;
    int64_t iv = (int64_t)r[1].a;
    double v;
    if (is_int)
        v = (double)iv;
    else
        memcpy(&v, &r[1].a, sizeof v);
    mlprof__counter_out o = {c->h.name, c->h.domain->name, ns, v, is_int, iv, mlprof__g.pid, tr->tid, c};
    TO_SINKS(counter, 0, &C.buf, &o);
}

/* Slots taken by the record at r (1 + its inline text), or 0 when no record
 * the recorder writes looks like that: an unknown kind, a length beyond what
 * it writes, a handle record with no handle. The drain then counts the rest
 * of the segment as corrupt rather than decode garbage. (The recorder never
 * exposes unwritten bytes; this keeps a bug there from crashing the dump.) */
static size_t record_slots(const mlprof__rec *r)
{
    unsigned aux = MLPROF__REC_AUX(r->b);
    switch (MLPROF__REC_KIND(r->b)) {
    case MLPROF__REC_BEGIN:
    case MLPROF__REC_END:
    case MLPROF__REC_END_DYN:
        return MLPROF__REC_PTR(r->b) && aux == 0 ? 1 : 0;
    case MLPROF__REC_MARK:
        return MLPROF__REC_PTR(r->b) && aux <= MLPROF_SCOPE_THREAD ? 1 : 0;
    case MLPROF__REC_SCOPE_PUSH:
    case MLPROF__REC_SCOPE_POP:
        return MLPROF__REC_PTR(r->b) && aux == 0 ? 1 : 0;
    case MLPROF__REC_BEGIN_DYN:
        return MLPROF__REC_PTR(r->b) && aux <= MLPROF__NAME_MAX ? 1 + MLPROF__TEXT_SLOTS(aux) : 0;
    case MLPROF__REC_ARG_I:
    case MLPROF__REC_ARG_F:
        return aux <= MLPROF__KEY_MAX ? 1 + MLPROF__TEXT_SLOTS(aux) : 0;
    case MLPROF__REC_MARK_DYN:
        return MLPROF__REC_PTR(r->b) && (aux >> 8) <= MLPROF_SCOPE_THREAD && (aux & 0xff) <= MLPROF__NAME_MAX
                   ? 1 + MLPROF__TEXT_SLOTS(aux & 0xff) : 0;
    case MLPROF__REC_ARG_S:
        return aux <= MLPROF__KEY_MAX && r->a <= MLPROF__NAME_MAX ? 1 + MLPROF__TEXT_SLOTS(aux + r->a) : 0;
    case MLPROF__REC_COUNTER_I:
    case MLPROF__REC_COUNTER_F:
        /* the second slot is read only once the drain knows it is there */
        return MLPROF__REC_PTR(r->b) && aux == 0 ? 2 : 0;
    case MLPROF__REC_MEM:
        return 2; /* its second slot is checked by second_slot_ok */
    default:
        return 0;
    }
}

/* The second slot of a two-slot record, within the segment: what it says is
 * possible; returns the record's slots (0: corrupt). */
static size_t second_slot_ok(const mlprof__rec *r, size_t slots)
{
    switch (MLPROF__REC_KIND(r->b)) {
    case MLPROF__REC_COUNTER_I:
    case MLPROF__REC_COUNTER_F:
        return MLPROF__REC_KIND(r[1].b) == MLPROF__REC_VALUE ? slots : 0;
    case MLPROF__REC_MEM:
        return ((r[1].b >> 56) & ~(uint64_t)MLPROF__MEM_LOWER) <= MLPROF__MEM_RELEASE
                   ? 2 + MLPROF__TEXT_SLOTS((r[1].b >> 48) & 0xff) : 0;
    default:
        return slots;
    }
}

/* The slots of the record at r, which must end by limit; 0 when it cannot
 * be framed there (corrupt, or cut by limit). */
static size_t framed_slots(const mlprof__rec *r, const char *limit)
{
    size_t room = (size_t)(limit - (const char *)r), slots = record_slots(r);
    if (slots > 1 && room >= 2 * sizeof *r)
        slots = second_slot_ok(r, slots);
    return room < slots * sizeof *r ? 0 : slots;
}

static void mem_record(track *tr, const mlprof__rec *r, uint64_t ns)
{
    const char *op = NULL;
    size_t op_len = 0;
    if (tr->tasks.depth)
        op = span_name(&tr->tasks.items[tr->tasks.depth - 1], &op_len);
    MLPROF__FOR_MODULES(m) {
        if (m->memory_op)
            m->memory_op(ns, (int)MLPROF__REC_AUX(r[0].b), (unsigned)(r[1].b >> 56), r[1].a,
                         r[1].b & MLPROF__MEM_BYTES_MAX, MLPROF__REC_PTR(r[0].b), (const char *)(r + 2),
                         (size_t)((r[1].b >> 48) & 0xff), op, op_len, tr->tid);
    }
}

static void decode_one(track *tr, const mlprof__rec *r)
{
    unsigned kind = MLPROF__REC_KIND(r->b);
    const char *text = (const char *)(r + 1);
    void *ptr = MLPROF__REC_PTR(r->b);
    if (kind != MLPROF__REC_ARG_I && kind != MLPROF__REC_ARG_F && kind != MLPROF__REC_ARG_S) {
        flush_instant(tr);
        flush_begin(tr);
    }
    uint64_t ns = 0;
    if (kind <= MLPROF__REC_MARK_DYN || kind == MLPROF__REC_SCOPE_PUSH ||
        kind == MLPROF__REC_SCOPE_POP || kind == MLPROF__REC_MEM) {
        ns = mlprof__clock_to_ns(r->a);
        if (ns > tr->last_ns)
            tr->last_ns = ns;
    }
    switch (kind) {
    case MLPROF__REC_BEGIN: {
        const mlprof__handle *h = ptr;
        int frame = h->kind == MLPROF__SPAN_FRAME;
        push_span(tr, frame ? &tr->frames : &tr->tasks, h, h->domain, NULL, 0, ns);
        tr->arg_to_frame = frame;
        break;
    }
    case MLPROF__REC_END: {
        const mlprof__handle *h = ptr;
        int frame = h->kind == MLPROF__SPAN_FRAME;
        end_span(tr, frame ? &tr->frames : &tr->tasks, h, NULL, ns, frame);
        tr->arg_to_frame = 0;
        break;
    }
    case MLPROF__REC_BEGIN_DYN:
        push_span(tr, &tr->tasks, NULL, ptr, text, MLPROF__REC_AUX(r->b), ns);
        tr->arg_to_frame = 0;
        break;
    case MLPROF__REC_END_DYN:
        end_span(tr, &tr->tasks, NULL, ptr, ns, 0);
        tr->arg_to_frame = 0;
        break;
    case MLPROF__REC_COUNTER_I:
    case MLPROF__REC_COUNTER_F:
        counter_sample(tr, r, kind == MLPROF__REC_COUNTER_I);
        break;
    case MLPROF__REC_MARK: {
        const mlprof__handle *h = ptr;
        start_instant(tr, h, h->domain, h->name, strlen(h->name), ns, (int)MLPROF__REC_AUX(r->b));
        break;
    }
    case MLPROF__REC_MARK_DYN: {
        unsigned aux = MLPROF__REC_AUX(r->b);
        start_instant(tr, NULL, ptr, text, aux & 0xff, ns, (int)(aux >> 8));
        break;
    }
    case MLPROF__REC_ARG_I:
    case MLPROF__REC_ARG_F:
    case MLPROF__REC_ARG_S:
        add_arg(tr, kind, r, text);
        break;
    case MLPROF__REC_SCOPE_PUSH:
    case MLPROF__REC_SCOPE_POP:
        tr->scope = ptr;
        break;
    case MLPROF__REC_MEM:
        mem_record(tr, r, ns);
        break;
    default:
        C.corrupt++;
        break;
    }
}

/* ---------------------------------------------- the spans around launches */

static int lp_cmp(const void *pa, const void *pb)
{
    const mlprof__launch_point *a = &((const lpoint *)pa)->p, *b = &((const lpoint *)pb)->p;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    return a->ns < b->ns ? -1 : a->ns > b->ns;
}

/* The first launch point of thread tid. */
static size_t lp_first(pid_t tid)
{
    size_t lo = 0, hi = C.nlp;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (C.lp[mid].p.tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Tells the module that asked the spans open on tr now (the hooks' own
 * runtime calls left out: the operator is what called them). */
static void lp_answer(track *tr, const lpoint *p)
{
    const char *names[64];
    size_t n = 0;
    for (size_t i = 0; i < tr->tasks.depth && n < 64; i++) {
        const open_span *o = &tr->tasks.items[i];
        if (strcmp(o->domain->name, "cuda_runtime") == 0)
            continue;
        size_t len;
        names[n++] = span_name(o, &len);
    }
    if (p->m->launch_ops)
        p->m->launch_ops(p->p.index, names, n);
}

static void drain_records(mlprof__thread *t, track *tr, int discard, size_t *lp);

/* Consumes the records of one thread published so far. discard: skip them,
 * except memory operations, which keep the accounting of live blocks right. */
static void drain_thread(mlprof__thread *t, int discard)
{
    track *tr = track_for(t);
    if (tr && !discard)
        read_thread_name(tr);
    size_t lp = tr && C.nlp ? lp_first(tr->tid) : C.nlp;
    /* a call from before the records already read: what was open then is
     * gone (its record came late); it gets no operator rather than a wrong one */
    for (; lp < C.nlp && C.lp[lp].p.tid == tr->tid && C.lp[lp].p.ns < tr->last_ns; lp++) {
    }
    drain_records(t, tr, discard, &lp);
    /* launches after the last record: the spans open now were open then */
    for (; lp < C.nlp && C.lp[lp].p.tid == tr->tid; lp++)
        lp_answer(tr, &C.lp[lp]);
}

/* A record a clear while running discarded, though it came after: stamped
 * before the cut, or an argument of such a record. *cutting carries the
 * verdict from a record to the arguments that follow it on its thread. */
static int before_cut(const mlprof__rec *r, int *cutting)
{
    if (!C.cut_raw)
        return 0;
    unsigned kind = MLPROF__REC_KIND(r->b);
    if (kind == MLPROF__REC_ARG_I || kind == MLPROF__REC_ARG_F || kind == MLPROF__REC_ARG_S)
        return *cutting;
    *cutting = r->a < C.cut_raw;
    return *cutting;
}

static void drain_records(mlprof__thread *t, track *tr, int discard, size_t *lp)
{
    int cutting = 0;
    /* the chunks there now, no more: a thread that writes faster than its
     * records are decoded is not chased for ever (what it writes meanwhile
     * waits for the next drain; a stopped one has nothing more) */
    size_t chunks = 0;
    for (mlprof__chunk *c = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE); c;
         c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
        chunks++;
    for (;;) {
        mlprof__chunk *c = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);
        if (!c || (mlprof__dump_wanted() && !__atomic_load_n(&mlprof__crashing, __ATOMIC_ACQUIRE)))
            return; /* a signal's dump waits for the lock (this is not it): it drains the rest */
        __atomic_add_fetch(&mlprof__progress, 1, __ATOMIC_RELAXED);
        mlprof__chunk *next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
        char *limit;
        if (next) {
            limit = c->final_end;
        } else {
            limit = __atomic_load_n(&t->pos, __ATOMIC_ACQUIRE);
            if (limit < c->data || limit > c->end) {
                /* the thread moved on to a new chunk meanwhile: this one is sealed */
                next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
                if (!next)
                    return;
                limit = c->final_end;
            }
        }
        char *p = t->consumed;
        while (tr && p < limit) {
            const mlprof__rec *r = (const mlprof__rec *)p;
            size_t slots = framed_slots(r, limit);
            if (slots == 0) {
                /* garbage: what follows in the segment cannot be framed */
                C.corrupt++;
                break;
            }
            if (*lp < C.nlp && C.lp[*lp].p.tid == tr->tid && MLPROF__REC_KIND(r->b) <= MLPROF__REC_END_DYN) {
                uint64_t ns = mlprof__clock_to_ns(r->a); /* a begin or an end: launches before it */
                for (; *lp < C.nlp && C.lp[*lp].p.tid == tr->tid && C.lp[*lp].p.ns < ns; (*lp)++)
                    lp_answer(tr, &C.lp[*lp]);
            }
            if (!discard && !before_cut(r, &cutting))
                decode_one(tr, r);
            else if (MLPROF__REC_KIND(r->b) == MLPROF__REC_MEM)
                mem_record(tr, r, mlprof__clock_to_ns(r->a));
            p += slots * sizeof *r;
            /* while the spool fails, tried again at the end of the drain or at the bound */
            if ((C.buf.len > (1u << 20) && (!C.spool_failing || C.buf.len > pending_max())) ||
                (C.mirror_buf.len > (1u << 20) && (!C.mirror_failing || C.mirror_buf.len > pending_max())))
                spool_flush();
        }
        t->consumed = limit;
        if (!next)
            return;
        t->consumed = next->data;
        __atomic_store_n(&t->head, next, __ATOMIC_RELEASE);
        mlprof__pool_put(c);
        if (--chunks == 0)
            return;
    }
}

/* ------------------------------------------------ the flight recorder */

static int ring_mode(void) { return strcmp(mlprof__g.cfg.mode, "ring") == 0; }

/* Chunks the ring keeps: ring_size (half of the pool at most, so that
 * threads write on while the collector evicts), or half of the pool. */
static size_t ring_chunks(void)
{
    size_t count = mlprof__pool_chunk_count(), half = count / 2;
    uint64_t want = mlprof__g.cfg.ring_size / mlprof__pool_chunk_size();
    if (mlprof__g.cfg.ring_size && want > half && !C.ring_said) {
        C.ring_said = 1;
        mlprof__log(MLPROF_LOG_WARN,
                    "ring_size=%llu is more than half of buffer_size=%llu: the ring keeps half of it "
                    "(the other half takes what threads write while the oldest chunks are evicted)",
                    (unsigned long long)mlprof__g.cfg.ring_size, (unsigned long long)mlprof__g.cfg.buffer_size);
    }
    if (!mlprof__g.cfg.ring_size || want > half)
        want = half;
    return want < 2 ? 2 : (size_t)want;
}

static int rec_timed(unsigned kind)
{
    return kind <= MLPROF__REC_MARK_DYN || kind == MLPROF__REC_SCOPE_PUSH || kind == MLPROF__REC_SCOPE_POP ||
           kind == MLPROF__REC_MEM;
}

/* t's oldest chunk when it is sealed (the thread writes in a later one):
 * its segment [*from, *to); NULL otherwise. */
static mlprof__chunk *sealed_head(mlprof__thread *t, char **from, char **to)
{
    mlprof__chunk *c = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);
    if (!c || !__atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
        return NULL;
    *from = t->consumed;
    *to = c->final_end;
    return c;
}

/* The time of the last timed record of [p, limit), 0 if none. */
static uint64_t segment_last_ns(char *p, char *limit)
{
    uint64_t raw = 0;
    while (p < limit) {
        const mlprof__rec *r = (const mlprof__rec *)p;
        size_t slots = record_slots(r);
        if (slots > 1 && (size_t)(limit - p) >= 2 * sizeof *r)
            slots = second_slot_ok(r, slots);
        if (slots == 0 || (size_t)(limit - p) < slots * sizeof *r)
            break;
        if (rec_timed(MLPROF__REC_KIND(r->b)))
            raw = r->a;
        p += slots * sizeof *r;
    }
    return raw ? mlprof__clock_to_ns(raw) : 0;
}

/* Evicts t's sealed oldest chunk: decoded with nothing handed to the sinks
 * (its events counted as overwritten; the spans it opens stay on the stack,
 * to be shown cut at their end) and given back to the pool. */
static void evict_head(mlprof__thread *t, track *tr, mlprof__chunk *c, char *p, char *limit)
{
    int cutting = 0;
    uint64_t raw = 0;
    C.evicting = 1;
    while (tr && p < limit) {
        const mlprof__rec *r = (const mlprof__rec *)p;
        size_t slots = framed_slots(r, limit);
        if (slots == 0) {
            C.corrupt++;
            break;
        }
        if (!before_cut(r, &cutting))
            decode_one(tr, r);
        else if (MLPROF__REC_KIND(r->b) == MLPROF__REC_MEM)
            mem_record(tr, r, mlprof__clock_to_ns(r->a));
        if (rec_timed(MLPROF__REC_KIND(r->b)) && r->a > raw)
            raw = r->a;
        p += slots * sizeof *r;
    }
    C.evicting = 0;
    if (raw > C.horizon_raw) {
        C.horizon_raw = raw;
        C.horizon_ns = mlprof__clock_to_ns(raw);
    }
    if (tr)
        tr->unbegun = 1;
    mlprof__chunk *next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
    t->consumed = next->data;
    __atomic_store_n(&t->head, next, __ATOMIC_RELEASE);
    mlprof__pool_put(c);
}

/*
 * Ring mode's quick eviction: what evict_head does, without decoding every
 * record into the stacks. A thread recording flat out writes a record in a
 * few ns; a full decode takes several times that, so a collector decoding
 * what it evicts falls behind one such thread and the pool runs dry. Here a
 * walk keeps only where each span of the chunk began, on light stacks above
 * the thread's real ones, and counts what it overwrites: a span whose end is
 * in the chunk, an instant, a counter sample. Only the spans still open at
 * the chunk's end (a few: they are cut by the ring) are decoded, from their
 * begin and their arguments, onto the real stacks, as evict_head would have
 * left them. Ends of spans begun in earlier chunks, scopes and memory
 * records are applied as decoding does.
 */
typedef struct skim_span {
    const mlprof__rec *begin;  /* its begin record */
    const void *handle;        /* its handle, or NULL: a run-time name... */
    const void *domain;        /* ...of this domain */
    mlprof__scope_node *scope; /* the thread's scope at its begin */
} skim_span;

typedef struct skim_arg {
    uint32_t span; /* index in the spans */
    const mlprof__rec *r;
} skim_arg;

static struct {
    skim_span *spans;
    uint32_t *tasks, *frames; /* light stacks: indexes in spans */
    skim_arg *args;
    size_t cap; /* of each: records in a chunk at most */
} K;

static int skim_reserve(size_t records)
{
    if (records <= K.cap)
        return 0;
    skim_span *spans = mlprof__realloc(K.spans, records * sizeof *spans);
    if (spans)
        K.spans = spans;
    uint32_t *tasks = mlprof__realloc(K.tasks, records * sizeof *tasks);
    if (tasks)
        K.tasks = tasks;
    uint32_t *frames = mlprof__realloc(K.frames, records * sizeof *frames);
    if (frames)
        K.frames = frames;
    skim_arg *args = mlprof__realloc(K.args, records * sizeof *args);
    if (args)
        K.args = args;
    if (!spans || !tasks || !frames || !args)
        return -1;
    K.cap = records;
    return 0;
}

static int skim_match(const skim_span *k, const void *h, const void *dyn_domain)
{
    return h ? k->handle == h : (k->handle == NULL && k->domain == dyn_domain);
}

/* An end on a light stack (depth *n) above real stack s: ends the innermost
 * match as end_span does, counting what it closes as overwritten. */
static void skim_end(track *tr, span_stack *s, uint32_t *light, size_t *n, const mlprof__rec *r, int frame)
{
    const void *h = MLPROF__REC_KIND(r->b) == MLPROF__REC_END ? MLPROF__REC_PTR(r->b) : NULL;
    const void *dom = h ? NULL : MLPROF__REC_PTR(r->b);
    size_t i = *n;
    while (i > 0 && !skim_match(&K.spans[light[i - 1]], h, dom))
        i--;
    if (i > 0) { /* begun in this chunk: it and the spans left open above it */
        C.unfinished += *n - i;
        C.overwritten += *n - i + 1;
        *n = i - 1;
        return;
    }
    size_t j = s->depth;
    while (j > 0 && !(h ? s->items[j - 1].handle == h
                        : (s->items[j - 1].handle == NULL && s->items[j - 1].domain == dom)))
        j--;
    if (j > 0) { /* begun before: the light stack is left open above it */
        C.unfinished += *n;
        C.overwritten += *n;
        *n = 0;
    }
    end_span(tr, s, h, (mlprof_domain *)dom, mlprof__clock_to_ns(r->a), frame); /* evicting: counted */
}

static void evict_skim(mlprof__thread *t, track *tr, mlprof__chunk *c, char *p, char *limit)
{
    size_t nspans = 0, ntasks = 0, nframes = 0, nargs = 0;
    int cutting = 0, to_frame = tr->arg_to_frame;
    const mlprof__rec *mark = NULL; /* an instant of this chunk whose arguments may follow */
    uint64_t raw = 0;
    C.evicting = 1;
    while (p < limit) {
        const mlprof__rec *r = (const mlprof__rec *)p;
        size_t slots = framed_slots(r, limit);
        if (slots == 0) {
            C.corrupt++;
            break;
        }
        p += slots * sizeof *r;
        unsigned kind = MLPROF__REC_KIND(r->b);
        int arg = kind == MLPROF__REC_ARG_I || kind == MLPROF__REC_ARG_F || kind == MLPROF__REC_ARG_S;
        if (before_cut(r, &cutting)) {
            if (kind == MLPROF__REC_MEM)
                mem_record(tr, r, mlprof__clock_to_ns(r->a));
            continue;
        }
        if (rec_timed(kind) && r->a > raw)
            raw = r->a;
        if (arg) {
            const char *text = (const char *)(r + 1);
            if (tr->instant_pending) { /* the last chunk's instant */
                add_arg(tr, kind, r, text);
            } else if (!mark) {
                size_t *n = to_frame && (nframes || tr->frames.depth) ? &nframes : &ntasks;
                uint32_t *light = n == &nframes ? K.frames : K.tasks;
                if (*n) {
                    K.args[nargs].span = light[*n - 1];
                    K.args[nargs++].r = r;
                } else {
                    tr->arg_to_frame = to_frame;
                    add_arg(tr, kind, r, text); /* the real stack's top: as decoding does */
                }
            }
            continue;
        }
        if (tr->instant_pending)
            flush_instant(tr); /* evicting: counted */
        if (mark) {
            C.overwritten++;
            mark = NULL;
        }
        switch (kind) {
        case MLPROF__REC_BEGIN:
        case MLPROF__REC_BEGIN_DYN: {
            const mlprof__handle *h = kind == MLPROF__REC_BEGIN ? MLPROF__REC_PTR(r->b) : NULL;
            int frame = h && h->kind == MLPROF__SPAN_FRAME;
            K.spans[nspans] = (skim_span){r, h, h ? NULL : MLPROF__REC_PTR(r->b), tr->scope};
            if (frame)
                K.frames[nframes++] = (uint32_t)nspans;
            else
                K.tasks[ntasks++] = (uint32_t)nspans;
            nspans++;
            to_frame = frame;
            break;
        }
        case MLPROF__REC_END: {
            const mlprof__handle *h = MLPROF__REC_PTR(r->b);
            if (h->kind == MLPROF__SPAN_FRAME)
                skim_end(tr, &tr->frames, K.frames, &nframes, r, 1);
            else
                skim_end(tr, &tr->tasks, K.tasks, &ntasks, r, 0);
            to_frame = 0;
            break;
        }
        case MLPROF__REC_END_DYN:
            skim_end(tr, &tr->tasks, K.tasks, &ntasks, r, 0);
            to_frame = 0;
            break;
        case MLPROF__REC_MARK:
        case MLPROF__REC_MARK_DYN:
            mark = r;
            break;
        case MLPROF__REC_COUNTER_I:
        case MLPROF__REC_COUNTER_F:
            C.overwritten++;
            break;
        case MLPROF__REC_SCOPE_PUSH:
        case MLPROF__REC_SCOPE_POP:
            tr->scope = MLPROF__REC_PTR(r->b);
            break;
        case MLPROF__REC_MEM:
            mem_record(tr, r, mlprof__clock_to_ns(r->a));
            break;
        default:
            C.corrupt++;
            break;
        }
    }
    /* the spans still open: decoded onto the real stacks, outermost first,
     * with their arguments */
    mlprof__scope_node *scope = tr->scope;
    for (int f = 0; f < 2; f++) {
        uint32_t *light = f ? K.frames : K.tasks;
        size_t n = f ? nframes : ntasks;
        for (size_t i = 0; i < n; i++) {
            tr->scope = K.spans[light[i]].scope; /* the scope it began in, as decoding gives it */
            decode_one(tr, K.spans[light[i]].begin);
            for (size_t a = 0; a < nargs; a++) {
                if (K.args[a].span == light[i]) {
                    tr->arg_to_frame = f;
                    add_arg(tr, MLPROF__REC_KIND(K.args[a].r->b), K.args[a].r, (const char *)(K.args[a].r + 1));
                }
            }
        }
    }
    tr->scope = scope;
    tr->arg_to_frame = to_frame;
    if (mark) { /* its arguments may go on in the next chunk: left pending, as decoding does */
        decode_one(tr, mark);
        for (const char *q = (const char *)(mark + framed_slots(mark, limit)); q < limit;) {
            const mlprof__rec *r = (const mlprof__rec *)q;
            size_t slots = framed_slots(r, limit);
            if (!slots)
                break;
            decode_one(tr, r);
            q += slots * sizeof *r;
        }
    }
    C.evicting = 0;
    if (raw) {
        uint64_t ns = mlprof__clock_to_ns(raw);
        if (ns > tr->last_ns)
            tr->last_ns = ns;
        if (raw > C.horizon_raw) {
            C.horizon_raw = raw;
            C.horizon_ns = ns;
        }
    }
    tr->unbegun = 1;
    mlprof__chunk *next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
    t->consumed = next->data;
    __atomic_store_n(&t->head, next, __ATOMIC_RELEASE);
    mlprof__pool_put(c);
}

/* Ring mode: evicts the oldest chunks while the threads hold more than the
 * ring's size, or their records are older than ring_seconds. The oldest is
 * the thread's oldest sealed chunk whose last record is the oldest: each
 * eviction then moves the ring's start as little as it can (a chunk that
 * began earliest may end latest, its thread having slept in it). A thread's
 * chunk in writing is never evicted. */
static void ring_evict(void)
{
    if (!ring_mode() || !mlprof__pool_ready())
        return;
    files_prepare();
    trace_prepare();
    sinks_wants(); /* the spans that evicted records open keep the forms of arguments asked for */
    size_t keep = ring_chunks();
    uint64_t now = mlprof__clock_to_ns(mlprof__clock_raw());
    uint64_t age = (uint64_t)(mlprof__g.cfg.ring_seconds * 1e9);
    uint64_t oldest = mlprof__g.cfg.ring_seconds > 0 && now > age ? now - age : 0;
    /* at most the chunks held when it began: a thread writing faster than
     * chunks are evicted would keep ctl_lock here for ever, and a dump (a
     * flush) from another thread waiting */
    size_t budget = SIZE_MAX;
    for (;;) {
        mlprof__thread *best = NULL;
        track *best_tr = NULL;
        mlprof__chunk *best_c = NULL;
        char *from = NULL, *to = NULL;
        uint64_t best_ns = 0;
        /* the ring: every thread's chunks, the one it writes in included
         * (never evicted), so a thread's newest events always count */
        size_t held = 0;
        for (mlprof__thread *t = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE); t; t = t->next) {
            for (mlprof__chunk *c = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE); c;
                 c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
                held++;
            char *f, *e;
            mlprof__chunk *c = sealed_head(t, &f, &e);
            if (!c)
                continue;
            track *tr = track_for(t);
            uint64_t ns;
            if (tr && tr->hl_chunk == c) {
                ns = tr->hl_ns;
            } else {
                ns = segment_last_ns(f, e); /* once per chunk */
                if (tr) {
                    tr->hl_chunk = c;
                    tr->hl_ns = ns;
                }
            }
            if (!best || ns < best_ns) {
                best = t, best_tr = tr, best_c = c, from = f, to = e;
                best_ns = ns;
            }
        }
        if (!best)
            return;
        int over = held > keep;
        if (!over && (!oldest || best_ns >= oldest))
            return;
        if (budget == SIZE_MAX)
            budget = held;
        if (!budget--)
            return;
        if (best_tr && !mlprof__g.cfg.ring_full_decode && skim_reserve((size_t)(to - from) / sizeof(mlprof__rec)) == 0)
            evict_skim(best, best_tr, best_c, from, to);
        else
            evict_head(best, best_tr, best_c, from, to);
    }
}

static void forget_thread(mlprof__thread *t)
{
    track *tr = t->track;
    if (tr)
        tr->thread = NULL;
}

/* --------------------------------- events that come with their own times */

/* Hands queued events to the sinks (or drops them). tail: into a dump's
 * tail, appended to sb. */
static void deliver(mlprof__produced *q, int discard, int tail, mlprof__sb *sb)
{
    for (size_t i = 0; i < q->n && !discard; i++) {
        const mlprof__event *e = &q->q[i];
        size_t args_len = e->args ? strlen(e->args) : 0;
        if (e->type == MLPROF__EV_SPAN) {
            mlprof__span_out so;
            memset(&so, 0, sizeof so);
            so.name = e->name;
            so.name_len = strlen(e->name);
            so.domain = e->domain;
            so.kind = MLPROF__OUT_TASK;
            so.begin_ns = e->begin_ns;
            so.end_ns = e->end_ns;
            so.pid = mlprof__g.pid;
            so.tid = e->tid;
            so.args = e->args;
            so.args_len = args_len;
            so.self_ns = e->end_ns - e->begin_ns;
            TO_SINKS(span, tail, sb, &so);
        } else if (e->type == MLPROF__EV_INSTANT) {
            mlprof__instant_out io = {e->name, strlen(e->name), e->domain, e->begin_ns, e->scope, mlprof__g.pid,
                                      e->tid, e->args, args_len, NULL};
            TO_SINKS(instant, tail, sb, &io);
        } else if (e->type == MLPROF__EV_COUNTER) {
            mlprof__counter_out co = {e->name, e->domain, e->begin_ns, e->value, e->is_int, e->ivalue,
                                      mlprof__g.pid, e->tid, NULL};
            TO_SINKS(counter, tail, sb, &co);
        } else {
            mlprof__flow_out fo = {e->type, e->id, e->name, e->domain, e->begin_ns, mlprof__g.pid, e->tid};
            TO_SINKS(flow, tail, sb, &fo);
        }
    }
    mlprof__produced_free(q);
}

/* The shared queue's events, into the trace and the sinks. */
static void drain_produced(int discard)
{
    mlprof__produced q;
    mlprof__produce_take(&q);
    deliver(&q, discard, 0, &C.buf);
}

/* Frame ends that came from another thread than their begin: each closes the
 * innermost frame of its handle open on another track, when it is that
 * track's innermost frame; otherwise it is unmatched. */
static void match_pending_ends(void)
{
    for (size_t k = 0; k < C.npending; k++) {
        track *found = NULL;
        for (track *tr = C.tracks; tr && !found; tr = tr->next) {
            span_stack *s = &tr->frames;
            if (s->depth && s->items[s->depth - 1].handle == C.pending_end[k].h)
                found = tr;
        }
        if (found)
            pop_span(found, &found->frames, C.pending_end[k].ns, 1, 0);
        else
            C.unmatched_ends++;
    }
    C.npending = 0;
}

/* Before the threads: each module delivers what it buffered and says which
 * launches it wants the CPU spans of. */
static void collect_points(const mlprof__drain_info *d)
{
    C.nlp = 0;
    MLPROF__FOR_MODULES(m) {
        mlprof__launch_point *pts = NULL;
        size_t n = m->flush ? m->flush(d, &pts) : 0;
        for (size_t i = 0; i < n; i++) {
            if (C.nlp == C.lp_cap) {
                lpoint *lp = mlprof__grow(C.lp, &C.lp_cap, C.nlp, sizeof *lp, 256);
                if (!lp)
                    break; /* those left get no operator */
                C.lp = lp;
            }
            C.lp[C.nlp].p = pts[i];
            C.lp[C.nlp++].m = m;
        }
    }
    mlprof__sort(C.lp, C.nlp, sizeof *C.lp, lp_cmp);
}

/* Drains every thread. Memory operations are accounted up to the time read
 * before the first thread was drained (or all of them, when everything is
 * over): one recorded later on another thread waits for the next drain, so
 * that operations are accounted in time order. */
static void drain_all(int discard, int all_memory)
{
    if (!mlprof__pool_ready())
        return;
    files_prepare(); /* so that no drain skips the statistics */
    trace_prepare();
    sinks_wants();
    mlprof__clock_sync();
    uint64_t watermark = all_memory ? UINT64_MAX : mlprof__clock_to_ns(mlprof__clock_raw());
    if (C.start_ns == 0) { /* when this trace began recording, on the events' clock (a custom one, shifted) */
        uint64_t run = __atomic_load_n(&mlprof__g.run_ns, __ATOMIC_RELAXED), now = mlprof_now_ns();
        C.start_ns = run && run < now ? run : now;
    }
    if (!discard)
        ring_evict(); /* a dump writes the ring: what the collector had no time to evict goes first */
    if (C.horizon_raw)
        C.horizon_ns = mlprof__clock_to_ns(C.horizon_raw);
    mlprof__produced mine;
    mlprof__produced_init(&mine);
    mlprof__drain_info d = {discard, all_memory, watermark, &mine};
    /* modules first: their launches are looked up while the threads are read */
    collect_points(&d);
    for (mlprof__thread *t = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE); t; t = t->next)
        drain_thread(t, discard);
    C.nlp = 0;
    match_pending_ends();
    MLPROF__FOR_MODULES(m) {
        if (m->emit)
            m->emit(&d);
    }
    drain_produced(discard);
    for (track *tr = C.tracks; tr; tr = tr->next)
        flush_instant(tr);
    MLPROF__FOR_MODULES(m) {
        if (m->account)
            m->account(&d);
    }
    deliver(&mine, discard, 0, &C.buf);
    if (discard) {
        mlprof__sb_reset(&C.buf);
        C.buf_events = 0;
    } else {
        spool_flush();
    }
    mlprof__threads_reap(forget_thread);
}

static void drain_now(void) { drain_all(0, 0); }

uint64_t mlprof__collect_dropped(void)
{
    uint64_t n = __atomic_load_n(&mlprof__g.dropped_exited, __ATOMIC_RELAXED);
    for (mlprof__thread *t = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE); t; t = t->next)
        n += __atomic_load_n(&t->dropped, __ATOMIC_RELAXED);
    return n;
}

/* Events dropped since the trace began (the start, a clear, or the last
 * finished dump), and since the statistics were last reset. */
static uint64_t trace_dropped(void) { return mlprof__collect_dropped() - C.trace_drops_base; }
static uint64_t stats_dropped(void) { return mlprof__collect_dropped() - C.stats_drops_base; }

/* ----------------------------------------------------------- the dump */

void mlprof__collect_trace_path(char *buf, size_t len)
{
    mlprof__expand_path(mlprof__g.cfg.filename, 1, buf, len);
}

/* The path of an output ("trace", "stats", "memory_csv", "memory_svg"), or -1. */
static int output_path(const char *what, char *buf, size_t len)
{
    const mlprof__config *c = &mlprof__g.cfg;
    if (strcmp(what, "trace") == 0)
        mlprof__collect_trace_path(buf, len);
    else if (strcmp(what, "stats") == 0 && strcmp(c->stats_file, "auto") == 0) {
        char trace[4200];
        mlprof__collect_trace_path(trace, sizeof trace);
        mlprof__sink_auto_path(trace, ".stats.txt", buf, len);
    } else if (strcmp(what, "stats") == 0)
        c->stats_file[0] ? mlprof__expand_path(c->stats_file, 1, buf, len) : (void)(buf[0] = '\0');
    else if (strcmp(what, "memory_csv") == 0)
        mlprof__memory_output_path(c->memory_csv, ".memory.csv", NULL, buf, len);
    else if (strcmp(what, "memory_svg") == 0)
        mlprof__memory_output_path(c->memory_svg, ".memory_flow.svg", NULL, buf, len);
    else
        return -1;
    return 0;
}

static int copy_out(const char *fn, const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    if (strlen(path) >= len)
        return mlprof__fail(MLPROF_ELIMIT, "%s: the path needs %zu bytes", fn, strlen(path) + 1);
    return MLPROF_OK;
}

int mlprof_trace_path(char *buf, size_t len)
{
    return mlprof_output_path("trace", buf, len);
}

int mlprof_output_path(const char *what, char *buf, size_t len)
{
    mlprof__ensure_init();
    if (!buf || !len)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_output_path: no buffer");
    buf[0] = '\0';
    char path[4200];
    mlprof__ctl_lock();
    int rc = what ? output_path(what, path, sizeof path) : -1;
    mlprof__ctl_unlock();
    if (rc != 0)
        return mlprof__fail(MLPROF_EINVAL,
                            "mlprof_output_path: unknown output \"%s\" (trace, stats, memory_csv, memory_svg)",
                            what ? what : "(null)");
    return copy_out("mlprof_output_path", path, buf, len);
}

static void host_name(char *buf, size_t len)
{
    if (gethostname(buf, len) != 0)
        snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
}

/* What a trace says about itself now: meta (its strings in pname, host and
 * other, which the caller frees). */
static void make_meta(mlprof__trace_meta *m, char *pname, size_t pname_len, char *host, size_t host_len,
                      mlprof__sb *other, int finished, uint64_t dropped, uint64_t now_ns)
{
    mlprof__process_name(pname, pname_len);
    host_name(host, host_len);
    mlprof__sb_puts(other, "\"mlprof_version\":\"" MLPROF_VERSION_STRING "\",\"host\":");
    mlprof__sb_json_str(other, host, strlen(host));
    mlprof__sb_printf(other, ",\"pid\":%d,\"process_name\":", (int)mlprof__g.pid);
    mlprof__sb_json_str(other, pname, strlen(pname));
    mlprof__sb_puts(other, ",\"clock\":");
    mlprof__sb_json_str(other, mlprof__clock_name(), strlen(mlprof__clock_name()));
    mlprof__sb_printf(other,
                      ",\"clock_domain\":\"CLOCK_MONOTONIC\",\"start_ns\":%llu,\"dump_ns\":%llu"
                      ",\"dropped_events\":%llu,\"external_dropped\":%llu,\"unwritten_events\":%llu"
                      ",\"unfinished_spans\":%llu,\"unmatched_ends\":%llu"
                      ",\"corrupt_records\":%llu,\"buffer_size\":%llu,\"chunk_size\":%zu"
                      ",\"finished\":%s",
                      (unsigned long long)C.start_ns, (unsigned long long)now_ns,
                      (unsigned long long)dropped, (unsigned long long)mlprof__produce_dropped(),
                      (unsigned long long)C.unwritten, (unsigned long long)C.unfinished,
                      (unsigned long long)C.unmatched_ends, (unsigned long long)C.corrupt,
                      (unsigned long long)mlprof__g.cfg.buffer_size, mlprof__pool_chunk_size(),
                      finished ? "true" : "false");
    if (ring_mode() || C.overwritten)
        mlprof__sb_printf(other, ",\"mode\":\"ring\",\"ring_size\":%llu,\"ring_seconds\":%g,\"ring_start_ns\":%llu"
                          ",\"overwritten_events\":%llu",
                          mlprof__pool_ready() ? (unsigned long long)(ring_chunks() * mlprof__pool_chunk_size()) : 0ull,
                          mlprof__g.cfg.ring_seconds, (unsigned long long)C.horizon_ns,
                          (unsigned long long)C.overwritten);
    if (mlprof__g.cfg.max_trace_size || C.capped_events)
        mlprof__sb_printf(other, ",\"max_trace_size\":%llu,\"capped_events\":%llu",
                          (unsigned long long)mlprof__g.cfg.max_trace_size, (unsigned long long)C.capped_events);
    MLPROF__FOR_MODULES(mod) {
        if (mod->other_data)
            mod->other_data(other);
    }
    /* distributedInfo after otherData's members, in the same buffer */
    size_t members = other->len;
    mlprof__dist_json(mlprof__dist_get(), other);
    /* then the modules' top-level members (the sampled stacks), same buffer */
    size_t dist_end = other->len;
    MLPROF__FOR_MODULES(mod) {
        if (mod->trace_members)
            mod->trace_members(other);
    }
    memset(m, 0, sizeof *m);
    if (dist_end > members) {
        m->distributed_info = other->data + members;
        m->distributed_info_len = dist_end - members;
    }
    if (other->len > dist_end) {
        m->trace_members = other->data + dist_end;
        m->trace_members_len = other->len - dist_end;
    }
    m->stacks = mlprof__stacks_view(); /* built by trace_members above */
    m->pid = mlprof__g.pid;
    m->process_name = pname;
    m->host = host;
    m->clock = mlprof__clock_name();
    m->start_ns = C.start_ns;
    m->dump_ns = now_ns;
    m->finished = finished;
    m->other_data = other->data ? other->data : "";
    m->other_data_len = members;
}

typedef struct tail_ctx {
    mlprof__sb *sb;
} tail_ctx;

static void ext_track_out(void *ctx, int tid, const char *name, uint32_t index)
{
    mlprof__sb *sb = ((tail_ctx *)ctx)->sb;
    mlprof__track_out t = {MLPROF__TRACK_EXT, mlprof__g.pid, tid, name, 1000000 + index};
    TO_SINKS(track, 1, sb, &t);
}

/* The tasks still open on tr, for a slice sink's tail: a begin for each
 * the stream has not had yet (only the innermost can be one), then an end
 * at now for each, innermost first. The stream's record of them is left as
 * it was. */
static void tail_slices(track *tr, uint64_t now_ns, mlprof__sb *sb)
{
    span_stack *s = &tr->tasks;
    for (size_t i = 0; i < s->depth; i++)
        if (!s->items[i].begun)
            hand_begin(tr, &s->items[i], i, 1, sb);
    for (size_t i = s->depth; i-- > 0;) {
        open_span *o = &s->items[i];
        mlprof__span_out so;
        span_fill(&so, tr, o, 0);
        so.end_ns = now_ns < o->begin_ns ? o->begin_ns : now_ns;
        so.unfinished = 1;
        so.depth = (uint32_t)i;
        hand_end(o, &so, 1, sb);
    }
}

/* The part after the spooled events, for every sink: metadata, the spans
 * still open (shown up to now), what modules show in a tail, the footer.
 * The trace sink's goes to sb (none when NULL), the JSON copy's to
 * mirror_sb (none when NULL: only mlprof_dump_string asks for it). */
static void write_tail(mlprof__sb *sb, mlprof__sb *mirror_sb, const mlprof__trace_meta *m)
{
    mlprof__sink_out out = {sb, 1};
    mlprof__sink_out fout = {NULL, 1};
    mlprof__sink_out mout = {mirror_sb, 1};
    C.mirror_tail = C.mirror.on ? mirror_sb : NULL;
    if (sb && C.trace.e && C.trace.e->ops->tail_begin)
        C.trace.e->ops->tail_begin(C.trace.st, &out);
    if (C.mirror_tail && C.mirror.e->ops->tail_begin)
        C.mirror.e->ops->tail_begin(C.mirror.st, &mout);
    for (size_t i = 0; i < C.nfiles; i++)
        if (C.files[i].on && C.files[i].e->ops->tail_begin)
            C.files[i].e->ops->tail_begin(C.files[i].st, &fout);
    mlprof__track_out pt = {MLPROF__TRACK_PROCESS, m->pid, m->pid, m->process_name, 0};
    TO_SINKS(track, 1, sb, &pt);
    for (track *tr = C.tracks; tr; tr = tr->next) {
        char tname[80];
        if (tr->name[0])
            snprintf(tname, sizeof tname, "%s", tr->name);
        else if (tr->tid == mlprof__g.pid)
            snprintf(tname, sizeof tname, "main");
        else
            snprintf(tname, sizeof tname, "thread %d", (int)tr->tid);
        mlprof__track_out tt = {MLPROF__TRACK_THREAD, m->pid, tr->tid, tname, tr->seq};
        TO_SINKS(track, 1, sb, &tt);
        if (m->finished)
            continue;
        /* spans still open: shown up to now, written for real when they end */
        for (int f = 0; f < 2; f++) {
            span_stack *s = f ? &tr->frames : &tr->tasks;
            for (size_t i = 0; i < s->depth; i++)
                emit_span(tr, &s->items[i], m->dump_ns, 0, f, 1, i, 1, sb);
        }
        if (C.slices && sb) /* a slice sink: the begins the stream has not, then every end, innermost first */
            tail_slices(tr, m->dump_ns, sb);
    }
    tail_ctx ctx = {sb};
    mlprof__produce_tracks(ext_track_out, &ctx);
    mlprof__produced q;
    mlprof__produced_init(&q);
    MLPROF__FOR_MODULES(mod) {
        if (mod->tail)
            mod->tail(&q);
    }
    deliver(&q, 0, 1, sb);
    if (sb && C.trace.e && C.trace.e->ops->tail_end)
        C.trace.e->ops->tail_end(C.trace.st, &out, m);
    if (C.mirror_tail && C.mirror.e->ops->tail_end)
        C.mirror.e->ops->tail_end(C.mirror.st, &mout, m);
    C.mirror_tail = NULL;
    for (size_t i = 0; i < C.nfiles; i++)
        if (C.files[i].on && C.files[i].e->ops->tail_end)
            C.files[i].e->ops->tail_end(C.files[i].st, &fout, m);
}

/* Makes the spool itself the trace file, with the bytes it could not take
 * and the tail written after its own (not counted in spool_size: the next
 * events go where they begin, in a copy: spool_unpublish). Most traces are
 * dumped once, at their end: they are written once, not spooled and copied.
 * 0; or -1 when it cannot be linked there (the caller copies it). */
static int publish_spool(mlprof__out *o, const mlprof__sb *pending, const mlprof__sb *tail)
{
    if (C.spool_fd < 0 || !C.spool_linkable || !o->tmp)
        return -1;
    /* the last dump's file, with nothing spooled since: it is never written again */
    if (C.spool_published && spool_unpublish() != 0)
        return -1;
    uint64_t at = C.spool_size, end = at + pending->len + tail->len;
    if ((pending->len && mlprof__pwrite_all(C.spool_fd, pending->data, pending->len, at) != 0) ||
        mlprof__pwrite_all(C.spool_fd, tail->data, tail->len, at + pending->len) != 0 ||
        ftruncate(C.spool_fd, (off_t)end) != 0)
        return -1;
    fchmod(C.spool_fd, 0644); /* a trace is shared like any output, as mlprof__out_open makes it */
    if (mlprof__out_adopt(o, C.spool_fd) != 0) {
        if (errno != ENOMEM)
            C.spool_linkable = 0; /* another file system, no /proc: copied from now on */
        return -1;
    }
    C.spool_published = 1;
    return 0;
}

static void close_open_spans(void)
{
    for (track *tr = C.tracks; tr; tr = tr->next) {
        while (tr->frames.depth)
            pop_span(tr, &tr->frames, tr->last_ns, 1, 1);
        while (tr->tasks.depth)
            pop_span(tr, &tr->tasks, tr->last_ns, 0, 1);
    }
    spool_flush();
}

static void reset_trace(void)
{
    while (C.tracks) {
        track *tr = C.tracks;
        C.tracks = tr->next;
        if (tr->thread)
            tr->thread->track = NULL;
        track_free(tr);
    }
    spool_reset();
    trace_drop(); /* the next trace chooses its format again */
    for (size_t i = 0; i < C.nfiles; i++)
        if (C.files[i].e->ops->reset)
            C.files[i].e->ops->reset(C.files[i].st);
    C.spool_failing = 0;
    C.unwritten = C.unwritten_said = 0;
    C.trace_drops_base = mlprof__collect_dropped();
    C.reported_drops = 0;
    C.unfinished = C.unmatched_ends = C.corrupt = 0;
    C.horizon_raw = C.horizon_ns = C.overwritten = 0;
    C.start_ns = 0;
    C.cut_raw = 0;
    MLPROF__FOR_MODULES(m) {
        if (m->reset)
            m->reset();
    }
    __atomic_store_n(&mlprof__g.run_ns, mlprof__g.state == MLPROF_STATE_RUN ? mlprof_now_ns() : 0, __ATOMIC_RELAXED);
}

/* The statistics start again (a clear, mlprof_dumps with reset, a fork). */
static void clear_stats(void)
{
    MLPROF__FOR_MODULES(m) {
        if (m->clear)
            m->clear();
    }
    mlprof__stats *st = stats_of();
    if (st)
        mlprof__stats_reset(st);
    C.stats_drops_base = mlprof__collect_dropped();
}

/* The trace's tail as the file ends with it: plain, or a gzip member of its
 * own after the stream's end (concatenated members are one .gz). */
static int tail_bytes(const mlprof__trace_meta *m, mlprof__sb *out)
{
    mlprof__sb tail;
    mlprof__sb_init(&tail);
    write_tail(&tail, NULL, m);
    int rc = tail.failed ? MLPROF_ENOMEM : MLPROF_OK;
    if (rc == MLPROF_OK && C.compress) {
        rc = mlprof__gz_end_copy(C.gz, out);
        if (rc == MLPROF_OK)
            rc = mlprof__gz_member(tail.data ? tail.data : "", tail.len, out);
    } else if (rc == MLPROF_OK) {
        mlprof__sb_put(out, tail.data ? tail.data : "", tail.len);
    }
    mlprof__sb_free(&tail);
    if (rc == MLPROF_OK && out->failed)
        rc = MLPROF_ENOMEM;
    return rc;
}

/* Why this trace cannot be written at all, or MLPROF_OK. */
static int trace_writable(const char *what)
{
    if (C.trace_error[0])
        return mlprof__fail(MLPROF_EUNSUPPORTED, "%s: %s; the events are kept", what, C.trace_error);
    if (C.gz_failed)
        return mlprof__fail(MLPROF_EIO, "%s: the gzip stream of the trace broke (out of memory)", what);
    if (!C.trace.e)
        return mlprof__fail(MLPROF_ESTATE, "%s: no trace has begun", what);
    return MLPROF_OK;
}

/* Before the tail of a gzip trace: what waits in buf goes into the stream
 * (its bytes into zbuf, which the spool takes later), so that the file is
 * spool + zbuf + the stream's end + the tail. */
static int compress_pending(void)
{
    if (!C.compress || !C.buf.len)
        return MLPROF_OK;
    size_t before = C.zbuf.len;
    int rc = mlprof__gz_write(C.gz, C.buf.data, C.buf.len, &C.zbuf);
    if (rc != MLPROF_OK || C.zbuf.failed) {
        C.zbuf.len = before;
        C.zbuf.failed = 0;
        C.gz_failed = 1; /* a stream that failed is unusable */
        return mlprof__fail(MLPROF_ENOMEM, "cannot compress the trace: %s", mlprof_last_error());
    }
    C.zbuf_events += C.buf_events;
    mlprof__sb_reset(&C.buf);
    C.buf_events = 0;
    return MLPROF_OK;
}

/* Writes the trace file: the spool (the head at its start), the bytes the
 * spool could not take, the tail. */
static int write_trace(const char *path, const mlprof__trace_meta *m)
{
    int rc = trace_writable("cannot write the trace");
    if (rc == MLPROF_OK)
        rc = compress_pending();
    if (rc != MLPROF_OK)
        return rc;
    mlprof__out o;
    rc = mlprof__out_open(&o, path);
    if (rc != MLPROF_OK)
        return rc;
    mlprof__sb tail;
    mlprof__sb_init(&tail);
    rc = tail_bytes(m, &tail);
    const mlprof__sb *pending = C.compress ? &C.zbuf : &C.buf;
    if (rc != MLPROF_OK) {
        rc = mlprof__fail(rc, "cannot write the trace %s: %s", o.path,
                          rc == MLPROF_ENOMEM ? "out of memory" : mlprof_last_error());
    } else if (publish_spool(&o, pending, &tail) == 0) {
        /* written */
    } else if ((C.spool_size && mlprof__copy_fd(C.spool_fd, o.fd, C.spool_size) != 0) ||
               (pending->len && mlprof__write_all(o.fd, pending->data, pending->len) != 0) ||
               mlprof__write_all(o.fd, tail.data, tail.len) != 0) {
        rc = mlprof__fail(MLPROF_EIO, "cannot write the trace %s: %s", o.path, strerror(errno));
    }
    mlprof__sb_free(&tail);
    int crc = mlprof__out_commit(&o, rc == MLPROF_OK);
    return rc != MLPROF_OK ? rc : crc;
}

/* MLPROF_EIO when events of the trace were lost because the spool could not
 * be written: new ones since the last dump, or any in a finished trace. */
static int lost_events(int finished)
{
    if (C.unwritten == 0 || (!finished && C.unwritten == C.unwritten_said))
        return MLPROF_OK;
    C.unwritten_said = C.unwritten;
    return mlprof__fail(MLPROF_EIO,
                        "%llu events of the trace were lost: its spool could not be written (%s) for longer "
                        "than memory could keep them (otherData.unwritten_events)",
                        (unsigned long long)C.unwritten, strerror(C.lost_errno));
}

/* The file sinks' files: every one on, or (retry) only those whose outputs
 * wait (sink.pending). keep: a failed output of a sink that
 * MLPROF__SINK_RETRY waits from now on, the trace being written and reset
 * (a finished dump, a retry); one that waited already goes on waiting until
 * a dump writes it. The failures are gathered in *f; the first one's code. */
static int dump_files(const char *path, int finished, const mlprof__trace_meta *m, mlprof__sink_failures *f,
                      int retry, int keep)
{
    mlprof__sink_dump d;
    memset(&d, 0, sizeof d);
    memset(f, 0, sizeof *f);
    d.trace_path = path;
    d.finished = finished;
    d.meta = m;
    d.failures = f;
    d.stats_dropped = stats_dropped();
    d.unfinished_spans = retry ? C.pending_unfinished : C.unfinished;
    for (size_t i = 0; i < C.nfiles; i++) {
        sink *s = &C.files[i];
        const mlprof__sink_ops *ops = s->e->ops;
        if (retry && !s->pending)
            continue;
        if (!s->on || !ops->dump) {
            s->pending = 0; /* off now: it has nothing to write */
            continue;
        }
        int told = f->n;
        int src = ops->dump(s->st, &d);
        if (src != MLPROF_OK && f->n == told) /* a sink that did not tell which output */
            mlprof__sink_failed(&d, ops->name, src, 0);
        s->pending = src != MLPROF_OK && (ops->flags & MLPROF__SINK_RETRY) && (keep || s->pending);
    }
    if (keep && !retry)
        C.pending_unfinished = C.unfinished;
    return f->n ? f->rc : MLPROF_OK;
}

/* The path a finished trace was last written to; "" after a clear. */
static char last_finished[4200];
static unsigned long finished_written; /* finished traces written (mlprof__collect_finished) */

unsigned long mlprof__collect_finished(char *path, size_t len)
{
    if (path)
        snprintf(path, len, "%s", last_finished);
    return finished_written;
}

/* Whether outputs of the finished trace at last_finished wait (sink.pending). */
static int outputs_pending(void)
{
    for (size_t i = 0; i < C.nfiles && last_finished[0]; i++)
        if (C.files[i].pending)
            return 1;
    return 0;
}

/* The dump's result: the trace's error (rc, msg) or else the first output's,
 * naming every other output that failed. */
static int dump_error(int rc, const char *msg, const mlprof__sink_failures *f)
{
    const char *keys = f->keys;
    int more = f->n;
    if (rc == MLPROF_OK) {
        if (!f->n)
            return MLPROF_OK;
        rc = f->rc;
        msg = f->first;
        more--;
        const char *comma = strchr(keys, ','); /* the first one's key is in its message */
        keys = comma ? comma + 2 : "";
    }
    if (more <= 0)
        return mlprof__fail(rc, "%s", msg);
    /* the keys at the end, where a long message would be cut */
    char tail[400];
    snprintf(tail, sizeof tail, " (and %d more output%s not written: %s)", more, more == 1 ? "" : "s", keys);
    int room = 1000 - (int)strlen(tail);
    return mlprof__fail(rc, "%.*s%s", room > 0 ? room : 0, msg, tail);
}

/* The outputs of the finished trace at last_finished that it could not
 * write, written now; the trace is left as it is. */
static int retry_outputs(void)
{
    mlprof__log(MLPROF_LOG_INFO,
                "nothing recorded since the trace %s was written: it is kept as it is; the outputs it could not "
                "write are written again",
                last_finished);
    files_prepare();
    mlprof__sink_failures failed;
    dump_files(last_finished, 1, NULL, &failed, 1, 1);
    C.error_unsaid = failed.unsaid;
    return dump_error(MLPROF_OK, "", &failed);
}

int mlprof__collect_retry_outputs(void) { return outputs_pending() ? retry_outputs() : MLPROF_OK; }

int mlprof__collect_dump(const char *to, int finished)
{
    char path[4200];
    if (to)
        mlprof__expand_path(to, 1, path, sizeof path);
    else
        mlprof__collect_trace_path(path, sizeof path);
    /* nothing recorded since a finished trace was written there (a second
     * dump(1), MXNet's dump_profile after dump): an empty trace would take
     * the place of that one, so the file is left as it is */
    if (!__atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE) && mlprof__g.state == MLPROF_STATE_STOP &&
        strcmp(path, last_finished) == 0) {
        /* but outputs of it that it could not write are written now:
         * what they hold outlived the trace's reset (MLPROF__SINK_RETRY) */
        if (outputs_pending())
            return retry_outputs();
        C.error_unsaid = 0;
        mlprof__log(MLPROF_LOG_INFO, "nothing recorded since the trace %s was written: it is kept as it is", path);
        return MLPROF_OK;
    }
    mlprof__children_say_renamed(path);
    files_prepare();
    trace_prepare();
    drain_all(0, finished);
    if (finished)
        close_open_spans();
    uint64_t dropped = trace_dropped();
    if (dropped > C.reported_drops) {
        mlprof__log(MLPROF_LOG_WARN,
                    "%llu events dropped because the buffers were full (buffer_size=%llu); %s",
                    (unsigned long long)dropped, (unsigned long long)mlprof__g.cfg.buffer_size,
                    ring_mode() ? "the ring's collector fell behind the threads by half of buffer_size: raise "
                                  "buffer_size (the ring stays ring_size)"
                    : mlprof__g.cfg.continuous_dump
                        ? "continuous_dump is on, so the threads filled their buffers faster than the collector "
                          "drained them: raise buffer_size"
                        : "raise buffer_size or turn on continuous_dump");
        C.reported_drops = dropped;
    }
    MLPROF__FOR_MODULES(m) {
        if (m->report)
            m->report();
    }
    char pname[160], host[256];
    mlprof__sb other;
    mlprof__sb_init(&other);
    mlprof__trace_meta meta;
    make_meta(&meta, pname, sizeof pname, host, sizeof host, &other, finished, dropped,
              mlprof_now_ns()); /* open spans end here: the events' clock */
    /* the first error is the one returned, with its message */
    char msg[1024] = "";
    int rc = write_trace(path, &meta);
    int written = rc == MLPROF_OK;
    if (!written)
        snprintf(msg, sizeof msg, "%s", mlprof_last_error());
    int lrc = lost_events(finished);
    if (written && lrc != MLPROF_OK) {
        rc = lrc;
        snprintf(msg, sizeof msg, "%s", mlprof_last_error());
    }
    mlprof__sink_failures failed;
    dump_files(path, finished, &meta, &failed, 0, finished && written);
    mlprof__sb_free(&other);
    /* a finished trace starts anew once written; one that could not be is
     * kept whole for the next dump (a retry, or the one at exit). Its
     * outputs that could not be written wait (sink.pending) for the next
     * dump, which writes them even with nothing recorded since: what they
     * hold outlives the trace (MLPROF__SINK_RETRY) */
    if (finished && written) {
        snprintf(last_finished, sizeof last_finished, "%s", path);
        finished_written++;
        reset_trace();
        __atomic_store_n(&mlprof__g.recorded, 0, __ATOMIC_RELEASE);
        mlprof__children_settled(); /* a forked child's parent has nothing to report of it */
    }
    /* the outputs that failed were said by their sinks; the trace's error is not */
    C.error_unsaid = rc != MLPROF_OK || failed.unsaid;
    return dump_error(rc, msg, &failed);
}

/* A flush of the ring (`mlprof capture --flush`, dump_signal): what it wrote
 * is not written again, so the next dump of this flight recorder holds the
 * ring as it is then and nothing older than this flush. The spans open now
 * stay on their stacks (their ends would be unmatched otherwise): in the
 * next file they are shown from the flush, cut_by_ring, a slice sink getting
 * their begins again from a stream of its own. A flush that could not be
 * written keeps everything for the next dump. */
int mlprof__collect_flush(const char *to)
{
    if (!ring_mode())
        return mlprof__collect_dump(to, 0);
    uint64_t raw = mlprof__clock_raw(); /* before the drain: records stamped later come after it */
    int rc = mlprof__collect_dump(to, 0);
    if (rc != MLPROF_OK)
        return rc;
    if (raw > C.horizon_raw) {
        C.horizon_raw = raw;
        C.horizon_ns = mlprof__clock_to_ns(raw);
    }
    for (track *tr = C.tracks; tr; tr = tr->next) {
        for (int k = 0; k < 2; k++) {
            span_stack *st = k ? &tr->frames : &tr->tasks;
            for (size_t i = 0; i < st->depth; i++) {
                open_span *o = &st->items[i];
                o->begun = 0;
                o->capped = 0;
                o->targs_begun = 0; /* ring_cut shows them from the new start */
                o->child_ns = 0;    /* their children so far are in the file just written */
            }
        }
        if (tr->tasks.depth)
            tr->unbegun = 1;
    }
    spool_reset();
    trace_drop(); /* the next stream starts with its own head */
    C.overwritten = 0; /* each file counts what went since the one before */
    return MLPROF_OK;
}

/* Appends the first size bytes of the spool file fd to out. */
static int read_spool(int fd, uint64_t size, mlprof__sb *out)
{
    char buf[1 << 16];
    uint64_t at = 0;
    while (at < size) {
        size_t want = size - at < sizeof buf ? (size_t)(size - at) : sizeof buf;
        ssize_t n = pread(fd, buf, want, (off_t)at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO; /* the spool is shorter than what was written to it */
            return -1;
        }
        mlprof__sb_put(out, buf, (size_t)n);
        at += (uint64_t)n;
    }
    return 0;
}

/* dump_string of a trace in another format: its JSON copy, and a tail for
 * it (the trace sink's stream and state untouched). */
static int mirror_string(const mlprof__trace_meta *meta, mlprof__sb *sb)
{
    if (C.mirror_err)
        return mlprof__fail(C.mirror_err == ENOMEM ? MLPROF_ENOMEM : MLPROF_EIO,
                            "mlprof_dump_string: the JSON copy of this %s trace could not be kept (%s); the trace "
                            "file is not affected",
                            C.trace.e->format, strerror(C.mirror_err));
    if (C.mirror_size && read_spool(C.mirror_fd, C.mirror_size, sb) != 0)
        return mlprof__fail(MLPROF_EIO, "mlprof_dump_string: cannot read the trace's JSON copy back: %s",
                            strerror(errno));
    mlprof__sb_put(sb, C.mirror_buf.data ? C.mirror_buf.data : "", C.mirror_buf.len);
    write_tail(NULL, sb, meta);
    return MLPROF_OK;
}

/* dump_string of a JSON trace: its spool (inflated when gzip), what waits,
 * and a tail. */
static int spool_string(const mlprof__trace_meta *meta, mlprof__sb *sb)
{
    if (C.spool_size && read_spool(C.spool_fd, C.spool_size, sb) != 0)
        return mlprof__fail(MLPROF_EIO, "mlprof_dump_string: cannot read the trace spool: %s", strerror(errno));
    if (C.compress) {
        /* the stream so far, ended here, as plain text; then what waits in
         * buf and the tail, which are plain already */
        mlprof__sb_put(sb, C.zbuf.data ? C.zbuf.data : "", C.zbuf.len);
        mlprof__sb plain;
        mlprof__sb_init(&plain);
        int rc = mlprof__gz_end_copy(C.gz, sb);
        if (rc == MLPROF_OK)
            rc = mlprof__gz_inflate(sb->data ? sb->data : "", sb->len, &plain);
        mlprof__sb_free(sb);
        *sb = plain;
        if (rc != MLPROF_OK)
            return mlprof__fail(rc, "mlprof_dump_string: cannot read the gzip trace back: %s", mlprof_last_error());
    }
    mlprof__sb_put(sb, C.buf.data ? C.buf.data : "", C.buf.len); /* what the spool could not take */
    write_tail(sb, NULL, meta);
    return MLPROF_OK;
}

int mlprof__collect_dump_string(char **out)
{
    files_prepare();
    trace_prepare();
    drain_all(0, 0);
    /* Chrome JSON whatever the file's format: a JSON trace is read back from
     * its spool, another from its JSON copy */
    int rc = C.mirror.e ? MLPROF_OK : trace_writable("mlprof_dump_string");
    if (rc != MLPROF_OK)
        return rc;
    if (!C.mirror.e && C.trace.e && C.trace.e->ops != &mlprof__json_sink)
        return mlprof__fail(MLPROF_EUNSUPPORTED,
                            "mlprof_dump_string: the trace is written as %s, and no JSON copy of it is kept: set "
                            "json_copy=1 before recording (or format=json)",
                            C.trace.e->format);
    char pname[160], host[256];
    mlprof__sb other;
    mlprof__sb_init(&other);
    mlprof__trace_meta meta;
    make_meta(&meta, pname, sizeof pname, host, sizeof host, &other, 0, trace_dropped(),
              mlprof_now_ns());
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    rc = C.mirror.e ? mirror_string(&meta, &sb) : spool_string(&meta, &sb);
    mlprof__sb_free(&other);
    if (rc == MLPROF_OK && sb.failed)
        rc = mlprof__fail(MLPROF_ENOMEM, "mlprof_dump_string: out of memory");
    if (rc != MLPROF_OK) {
        mlprof__sb_free(&sb);
        return rc;
    }
    *out = mlprof__sb_take(&sb);
    return *out ? MLPROF_OK : mlprof__fail(MLPROF_ENOMEM, "mlprof_dump_string: out of memory");
}

int mlprof__collect_dumps(char **out, int format, int sort_by, int ascending, int reset)
{
    if (!mlprof__g.cfg.aggregate_stats)
        return mlprof__fail(MLPROF_ESTATE, "mlprof_dumps: aggregate_stats is off");
    files_prepare();
    mlprof__stats *st = stats_of();
    if (!st)
        return mlprof__fail(MLPROF_ENOMEM, "mlprof_dumps: out of memory");
    drain_all(0, 0);
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    mlprof__stats_report(st, &sb, format == MLPROF_FORMAT_JSON, sort_by, ascending, stats_dropped(), C.unfinished,
                         NULL, 0);
    if (sb.failed) {
        mlprof__sb_free(&sb);
        return mlprof__fail(MLPROF_ENOMEM, "mlprof_dumps: out of memory");
    }
    *out = mlprof__sb_take(&sb);
    if (reset)
        clear_stats();
    return MLPROF_OK;
}

/* No output waits any longer (a clear: what they held is gone; a fork). */
static void forget_pending(void)
{
    for (size_t i = 0; i < C.nfiles; i++)
        C.files[i].pending = 0;
}

void mlprof__collect_clear(void)
{
    last_finished[0] = '\0'; /* a dump after a clear writes the empty trace asked for */
    forget_pending();
    /* the calls in flight now publish after the drain: their records are
     * stamped before this (a stopped profiler has none, the stop waited) */
    uint64_t cut = mlprof__g.state == MLPROF_STATE_RUN ? mlprof__clock_raw() : 0;
    drain_all(1, 0);
    reset_trace();
    C.cut_raw = cut;
    clear_stats();
    __atomic_store_n(&mlprof__g.recorded, mlprof__g.state == MLPROF_STATE_RUN, __ATOMIC_RELEASE);
}

void mlprof__collect_after_fork(void)
{
    /* the parent's tracks, spool and statistics are the parent's to write;
     * its live blocks are the child's too, so the memory profiler keeps them */
    reset_trace();
    clear_stats();
    forget_pending();
    mlprof__sink_forget_said();
    C.continuous_said[0] = '\0';
    mlprof__produce_forget(1);
    C.reported_drops = 0;
    C.thread_running = 0;
    C.thread_stop = 0;
    C.poked = 0;
    pthread_cond_init(&C.wake, NULL);
}

/* ------------------------------------------------- the continuous dump */

/* The lower layers' wake-up (mlprof__wake): a thread that takes a chunk from
 * a pool more than half used, a full CUPTI queue. Lock-free. */
static void wake(void)
{
    if (__atomic_load_n(&C.thread_running, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&C.poked, 1, __ATOMIC_ACQ_REL))
        pthread_cond_signal(&C.wake);
}

void mlprof__collect_init(void)
{
    mlprof__set_waker(wake);
    mlprof__set_drainer(drain_now);
}

static void deadline_in(struct timespec *ts, uint64_t ns)
{
    clock_gettime(CLOCK_REALTIME, ts);
    uint64_t total = (uint64_t)ts->tv_nsec + ns;
    ts->tv_sec += (time_t)(total / 1000000000u);
    ts->tv_nsec = (long)(total % 1000000000u);
}

static void *continuous_main(void *arg)
{
    (void)arg;
    /* a thread of mlprof's own, by that name: the samplers leave it out */
    pthread_setname_np(pthread_self(), "mlprof dump");
    mlprof__ctl_lock();
    uint64_t next_dump = mlprof__clock_monotonic_ns() + (uint64_t)(mlprof__g.cfg.dump_period * 1e9);
    while (!C.thread_stop) {
        if (!mlprof__g.cfg.continuous_dump && !ring_mode()) {
            /* turned off while running: idle until it is on again
             * (mlprof__collect_start_continuous wakes it) or stopped */
            pthread_cond_wait(&C.wake, &mlprof__g.ctl_lock);
            next_dump = mlprof__clock_monotonic_ns() + (uint64_t)(mlprof__g.cfg.dump_period * 1e9);
            continue;
        }
        /* wake often enough to drain before the pool fills, write every period */
        struct timespec ts;
        deadline_in(&ts, 10000000);
        pthread_cond_timedwait(&C.wake, &mlprof__g.ctl_lock, &ts);
        if (C.thread_stop || (!mlprof__g.cfg.continuous_dump && !ring_mode()))
            continue;
        uint64_t now = mlprof__clock_monotonic_ns();
        if (ring_mode()) {
            ring_evict(); /* the ring is written at a dump only */
        } else if (now >= next_dump) {
            /* what fails the same way at every period is said once (the
             * outputs said by their sinks are not said again), and again
             * when it changes; its end is said too */
            if (mlprof__collect_dump(NULL, 0) != MLPROF_OK) {
                char text[sizeof C.continuous_said];
                mlprof__failure_text(mlprof_last_error(), text, sizeof text);
                if (C.error_unsaid && strcmp(text, C.continuous_said) != 0)
                    mlprof__log(MLPROF_LOG_ERROR, "continuous dump: %s", mlprof_last_error());
                snprintf(C.continuous_said, sizeof C.continuous_said, "%s", C.error_unsaid ? text : "");
            } else if (C.continuous_said[0]) {
                mlprof__log(MLPROF_LOG_INFO, "continuous dump: the trace is written again");
                C.continuous_said[0] = '\0';
            }
            next_dump = now + (uint64_t)(mlprof__g.cfg.dump_period * 1e9);
        } else if (mlprof__pool_free_count() * 2 < mlprof__pool_chunk_count()) {
            drain_all(0, 0);
        }
        mlprof__pool_keep_warm(); /* the next chunks taken are faulted in already */
        __atomic_store_n(&C.poked, 0, __ATOMIC_RELEASE);
        if (__atomic_load_n(&mlprof__term_pending, __ATOMIC_ACQUIRE)) {
            /* a SIGTERM that came in the section above waits for the lock */
            mlprof__ctl_unlock();
            mlprof__ctl_lock();
        }
    }
    mlprof__ctl_unlock();
    return NULL;
}

int mlprof__collect_start_continuous(void)
{
    /* ring mode: the thread evicts when a thread taking a chunk finds the
     * pool past the ring's size (or every 10 ms for ring_seconds) */
    mlprof__pool_set_high_water(ring_mode() ? ring_chunks() : 0);
    if (!mlprof__g.cfg.continuous_dump && !ring_mode())
        return MLPROF_OK;
    if (C.thread_running) { /* idle since continuous_dump went off, or working */
        pthread_cond_broadcast(&C.wake);
        return MLPROF_OK;
    }
    C.thread_stop = 0;
    int rc = mlprof__thread_start(&C.thread, 0, continuous_main, NULL);
    if (rc != 0)
        return mlprof__fail(MLPROF_EIO, "cannot start the continuous dump thread: %s", strerror(rc));
    __atomic_store_n(&C.thread_running, 1, __ATOMIC_RELEASE);
    return MLPROF_OK;
}

void mlprof__collect_stop_continuous(void)
{
    if (!C.thread_running)
        return;
    C.thread_stop = 1;
    pthread_cond_broadcast(&C.wake);
}

void mlprof__collect_join_continuous(void)
{
    mlprof__ctl_lock();
    int join = C.thread_running && C.thread_stop;
    pthread_t th = C.thread;
    if (join)
        __atomic_store_n(&C.thread_running, 0, __ATOMIC_RELEASE);
    mlprof__ctl_unlock();
    if (join)
        pthread_join(th, NULL);
}

