/*
 * pftrace.c - Perfetto's protobuf trace into the analyzer's model. The file is
 * a Trace: packets (field 1), each a TracePacket, read one at a time through
 * the sliding buffer of input.c (plain or gzip), so that a file of any size
 * takes the buffer plus the model. Per packet sequence it keeps what the
 * writer leaves out of later packets (interned names, categories and
 * annotation names; trace_packet_defaults), cleared when a packet says so,
 * and its own clocks (ids 64..127, set by its clock snapshots: mlprof's
 * thread sequences time their packets as deltas on an incremental one).
 * Track descriptors place events on (pid, tid): thread tracks as the JSON's
 * threads, a named child of a thread track as that thread's async frames
 * ("b"/"e"), counter tracks as "C" events named after the track. Slices are
 * BEGIN/END pairs joined on a stack per track: that pairs both a writer that
 * writes each span whole when it ends (BEGIN and END one after the other, a
 * parent after its children) and one that writes in time order (B B E E).
 * The "otherData" instant of mlprof's tail is the trace's otherData.
 * PerfSample packets (sampled call stacks) resolve through their sequence's
 * interned callstacks, frames and function names into t->snodes and
 * t->ssamples, which mlprof flame reads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pftrace.h"

/* Field numbers, from Perfetto's protos (perfetto/protos/perfetto/trace/). */
enum {
    TRACE_PACKET = 1,
    /* TracePacket */
    P_CLOCK_SNAPSHOT = 6, P_TIMESTAMP = 8, P_SEQUENCE_ID = 10, P_TRACK_EVENT = 11, P_INTERNED = 12,
    P_SEQUENCE_FLAGS = 13, P_STATE_CLEARED = 41, P_PACKET_DROPPED = 42, P_COMPRESSED = 50,
    P_CLOCK_ID = 58, P_DEFAULTS = 59, P_TRACK_DESCRIPTOR = 60, P_PERF_SAMPLE = 66,
    /* PerfSample (profiling/profile_packet.proto) */
    PS_PID = 2, PS_TID = 3, PS_CALLSTACK = 4,
    /* TracePacketDefaults, TrackEventDefaults */
    D_CLOCK_ID = 58, D_TRACK_EVENT = 11, TD_TRACK_UUID = 11, TD_EXTRA_COUNTERS = 31,
    /* TrackEvent */
    E_CATEGORY_IIDS = 3, E_ANNOTATIONS = 4, E_TYPE = 9, E_NAME_IID = 10, E_TRACK_UUID = 11,
    E_EXTRA_COUNTER_VALUES = 12, E_CATEGORIES = 22, E_NAME = 23, E_COUNTER_VALUE = 30, E_EXTRA_COUNTERS = 31,
    E_FLOW_IDS_OLD = 36, E_TERMINATING_OLD = 42, E_DOUBLE_COUNTER_VALUE = 44, E_EXTRA_DOUBLE_COUNTERS = 45,
    E_EXTRA_DOUBLE_COUNTER_VALUES = 46, E_FLOW_IDS = 47, E_TERMINATING = 48,
    /* DebugAnnotation */
    A_NAME_IID = 1, A_BOOL = 2, A_UINT = 3, A_INT = 4, A_DOUBLE = 5, A_STRING = 6, A_POINTER = 7,
    A_NESTED = 8, A_LEGACY_JSON = 9, A_NAME = 10, A_DICT = 11, A_ARRAY = 12, A_STRING_IID = 17,
    /* DebugAnnotation.NestedValue */
    N_TYPE = 1, N_KEYS = 2, N_DICT_VALUES = 3, N_ARRAY_VALUES = 4, N_INT = 5, N_DOUBLE = 6, N_BOOL = 7, N_STRING = 8,
    /* InternedData */
    I_CATEGORIES = 1, I_NAMES = 2, I_ANNOTATION_NAMES = 3, I_STRING_VALUES = 29,
    I_FUNCTION_NAMES = 5, I_FRAMES = 6, I_CALLSTACKS = 7,
    /* Frame, Callstack (profiling/profile_common.proto) */
    F_IID = 1, F_FUNCTION_NAME = 2, CS_IID = 1, CS_FRAMES = 2,
    /* TrackDescriptor, ProcessDescriptor, ThreadDescriptor */
    T_UUID = 1, T_NAME = 2, T_PROCESS = 3, T_THREAD = 4, T_PARENT = 5, T_COUNTER = 8, T_STATIC_NAME = 10,
    PD_PID = 1, PD_NAME = 6, TH_PID = 1, TH_TID = 2, TH_NAME = 5, CD_CATEGORIES = 2,
    /* ClockSnapshot */
    C_CLOCKS = 1, C_CLOCK_ID = 1, C_CLOCK_TS = 2, C_CLOCK_INCREMENTAL = 3, C_CLOCK_UNIT = 4
};

enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };
enum { CLOCK_MONOTONIC_ID = 3, CLOCK_BOOTTIME_ID = 6, CLOCK_SEQ_FIRST = 64, CLOCK_SEQ_LAST = 127 };
#define SEQ_CLOCKS 4 /* sequence-scoped clocks kept per sequence */
enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_BYTES = 2, WT_FIXED32 = 5 };

#define MAX_PACKET ((uint64_t)1 << 30) /* larger: not a length, damage */
#define MAX_DEPTH 32                   /* nested annotations */

/* ------------------------------------------------------- wire format */

typedef struct pb {
    const uint8_t *p, *end;
} pb;

typedef struct field {
    uint32_t num;
    int wt;
    uint64_t v;          /* varint, fixed64, fixed32 */
    const uint8_t *data; /* bytes */
    size_t len;
} field;

/* A varint at p (at most n bytes): its length, or 0 when it is cut or longer than 10 bytes. */
static size_t varint(const uint8_t *p, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The next field of a message: 1, 0 at its end, -1 when it is malformed. */
static int pb_next(pb *b, field *f)
{
    if (b->p >= b->end)
        return 0;
    uint64_t tag;
    size_t k = varint(b->p, (size_t)(b->end - b->p), &tag);
    if (!k || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        return -1;
    b->p += k;
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    f->data = NULL;
    f->len = 0;
    size_t left = (size_t)(b->end - b->p);
    switch (f->wt) {
    case WT_VARINT:
        k = varint(b->p, left, &f->v);
        if (!k)
            return -1;
        b->p += k;
        return 1;
    case WT_FIXED64:
        if (left < 8)
            return -1;
        f->v = le64(b->p);
        b->p += 8;
        return 1;
    case WT_FIXED32:
        if (left < 4)
            return -1;
        f->v = (uint64_t)b->p[0] | (uint64_t)b->p[1] << 8 | (uint64_t)b->p[2] << 16 | (uint64_t)b->p[3] << 24;
        b->p += 4;
        return 1;
    case WT_BYTES:
        k = varint(b->p, left, &f->v);
        if (!k || f->v > left - k)
            return -1;
        f->data = b->p + k;
        f->len = (size_t)f->v;
        b->p += k + f->len;
        return 1;
    default: /* groups (3, 4) and the unused 6, 7: no Perfetto message has them */
        return -1;
    }
}

static int is_bytes(const field *f) { return f->wt == WT_BYTES; }

/* The values of a repeated integer field: one, or several packed. Calls fn
 * with each; -1 when the packed bytes are malformed. */
static int each_int(const field *f, int fixed, int (*fn)(void *, uint64_t), void *arg)
{
    if (!is_bytes(f))
        return fn(arg, f->v);
    const uint8_t *p = f->data, *end = f->data + f->len;
    while (p < end) {
        uint64_t v;
        if (fixed) {
            if (end - p < 8)
                return -1;
            v = le64(p);
            p += 8;
        } else {
            size_t k = varint(p, (size_t)(end - p), &v);
            if (!k)
                return -1;
            p += k;
        }
        if (fn(arg, v) != 0)
            return -1;
    }
    return 0;
}

/* ----------------------------------------------------- integer map */

/* uint64 -> non-NULL pointer, open addressing. */
typedef struct u64map {
    uint64_t *keys;
    void **vals;
    size_t cap, n;
} u64map;

static size_t u64_slot(const u64map *m, uint64_t k)
{
    uint64_t h = k * 0x9e3779b97f4a7c15ull;
    size_t i = (size_t)(h ^ (h >> 29)) & (m->cap - 1);
    while (m->vals[i] && m->keys[i] != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static void *u64_get(const u64map *m, uint64_t k)
{
    return m->cap ? m->vals[u64_slot(m, k)] : NULL;
}

static int u64_put(u64map *m, uint64_t k, void *v)
{
    if (m->cap && m->vals[u64_slot(m, k)]) {
        m->vals[u64_slot(m, k)] = v;
        return 0;
    }
    if (2 * (m->n + 1) > m->cap) {
        u64map g = {NULL, NULL, m->cap ? 2 * m->cap : 64, 0};
        g.keys = mlprof__calloc(g.cap, sizeof *g.keys);
        g.vals = mlprof__calloc(g.cap, sizeof *g.vals);
        if (!g.keys || !g.vals) {
            mlprof__free(g.keys);
            mlprof__free(g.vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->vals[i]) {
                size_t s = u64_slot(&g, m->keys[i]);
                g.keys[s] = m->keys[i];
                g.vals[s] = m->vals[i];
                g.n++;
            }
        }
        mlprof__free(m->keys);
        mlprof__free(m->vals);
        *m = g;
    }
    size_t s = u64_slot(m, k);
    m->keys[s] = k;
    m->vals[s] = v;
    m->n++;
    return 0;
}

static void u64_clear(u64map *m)
{
    if (m->cap) {
        memset(m->vals, 0, m->cap * sizeof *m->vals);
        m->n = 0;
    }
}

static void u64_free(u64map *m)
{
    mlprof__free(m->keys);
    mlprof__free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ----------------------------------------------------------- state */

/* What a packet sequence has said for its later packets. */
typedef struct sequence {
    int valid;              /* cleared, and nothing dropped since */
    int has_clock, has_track;
    uint32_t clock;         /* trace_packet_defaults.timestamp_clock_id */
    uint64_t track;         /* track_event_defaults.track_uuid */
    uint64_t extra[8];      /* track_event_defaults.extra_counter_track_uuids */
    size_t nextra;
    u64map names, cats, ann_names, strings; /* iid -> interned string */
    u64map fnames, frames;  /* function names, frames (their function's name): iid -> interned string */
    u64map stacks;          /* callstack iid -> its leaf's node in t->snodes (as a pointer-sized integer) */
    /* its own clocks (ids 64..127) from its clock snapshots: the value last
     * read (an incremental clock's timestamps are deltas from it), and the
     * CLOCK_MONOTONIC time of `at` */
    struct {
        uint32_t id;
        int incremental;
        uint64_t unit;
        uint64_t at, last;
        int64_t mono_at;
    } sclk[SEQ_CLOCKS];
    size_t nsclk;
} sequence;

enum { K_NONE = 0, K_PROCESS, K_THREAD, K_COUNTER };

typedef struct track {
    uint64_t uuid, parent;
    int has_parent, kind;
    int64_t pid, tid;
    const char *name;  /* interned, or NULL */
    const char *cat;   /* a counter track's categories (CounterDescriptor), or NULL */
    int64_t named_tid; /* a track of its own (not a thread's): its tid, 0 until used */
    size_t *open;      /* slices begun, not yet ended: indices into t->ev */
    size_t nopen, capopen;
} track;

/* Where an event on a track goes. */
typedef struct place {
    int64_t pid, tid;
    int kind;  /* the track's */
    int frame; /* a child of a thread track: async begin/end ("b", "e") */
} place;

typedef struct reader {
    an_trace *t;
    an_input *in;
    u64map seqs, tracks;
    mlprof__sb big, raw, json;
    const char *value_key; /* "value", interned: a counter sample's argument */
    uint64_t packets, track_events;
    uint64_t next_frame_id;
    int64_t next_named;
    struct { uint32_t id; uint64_t ts; } clocks[16];
    size_t nclocks;
    /* left out, counted for t->note */
    uint64_t no_state, no_iid, no_track, other_types, compressed, bad_flows, no_clock;
    uint64_t packet_off; /* where the packet being read starts */
} reader;

static int fail(reader *r, int keep, const char *fmt, ...) MLPROF_I_PRINTF(3, 4);

static int fail(reader *r, int keep, const char *fmt, ...)
{
    an_trace *t = r->t;
    if (t->error[0])
        return -1;
    char msg[360];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mlprof__quoted_text path = mlprof__shortened(t->path);
    snprintf(t->error, sizeof t->error, "%.160s: %s%s", path.s, msg,
             r->in->compressed ? " (offsets in the uncompressed data)" : "");
    t->partial = keep;
    return -1;
}

/* The input could not be read (a read error, damaged gzip data). */
static int input_failed(reader *r)
{
    if (!r->t->error[0])
        snprintf(r->t->error, sizeof r->t->error, "%s", r->in->error);
    r->t->partial = 1;
    return -1;
}

static int oom(reader *r)
{
    return fail(r, 1, "out of memory after %llu packets", (unsigned long long)r->packets);
}

static sequence *seq_get(reader *r, uint32_t id)
{
    sequence *s = u64_get(&r->seqs, id);
    if (s)
        return s;
    s = mlprof__calloc(1, sizeof *s);
    if (s && u64_put(&r->seqs, id, s) != 0) {
        mlprof__free(s);
        s = NULL;
    }
    return s;
}

static void seq_clear(sequence *s)
{
    s->valid = 1;
    s->has_clock = s->has_track = 0;
    s->nextra = 0;
    u64_clear(&s->names);
    u64_clear(&s->cats);
    u64_clear(&s->ann_names);
    u64_clear(&s->strings);
    u64_clear(&s->fnames);
    u64_clear(&s->frames);
    u64_clear(&s->stacks);
}

static void seq_free(sequence *s)
{
    u64_free(&s->names);
    u64_free(&s->cats);
    u64_free(&s->ann_names);
    u64_free(&s->strings);
    u64_free(&s->fnames);
    u64_free(&s->frames);
    u64_free(&s->stacks);
    mlprof__free(s);
}

static track *track_get(reader *r, uint64_t uuid)
{
    track *tr = u64_get(&r->tracks, uuid);
    if (tr)
        return tr;
    tr = mlprof__calloc(1, sizeof *tr);
    if (tr && u64_put(&r->tracks, uuid, tr) != 0) {
        mlprof__free(tr);
        tr = NULL;
    }
    if (tr)
        tr->uuid = uuid;
    return tr;
}

/* ------------------------------------------------------ descriptors */

static int defaults(reader *r, sequence *s, const uint8_t *p, size_t n)
{
    pb b = {p, p + n}, e;
    field f, g;
    int rc;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == D_CLOCK_ID && !is_bytes(&f)) {
            s->clock = (uint32_t)f.v;
            s->has_clock = 1;
        } else if (f.num == D_TRACK_EVENT && is_bytes(&f)) {
            e = (pb){f.data, f.data + f.len};
            while ((rc = pb_next(&e, &g)) > 0) {
                if (g.num == TD_TRACK_UUID && !is_bytes(&g)) {
                    s->track = g.v;
                    s->has_track = 1;
                } else if (g.num == TD_EXTRA_COUNTERS && !is_bytes(&g) && s->nextra < 8) {
                    s->extra[s->nextra++] = g.v;
                }
            }
            if (rc < 0)
                return -1;
        }
    }
    (void)r;
    return rc;
}

/* iid -> name entries (EventName, EventCategory, DebugAnnotationName,
 * InternedString: iid 1, name or str 2) into m. */
static int intern_entries(reader *r, u64map *m, const uint8_t *p, size_t n)
{
    pb b = {p, p + n};
    field f;
    uint64_t iid = 0;
    const char *name = "";
    int rc;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == 1 && !is_bytes(&f)) {
            iid = f.v;
        } else if (f.num == 2 && is_bytes(&f)) {
            name = an_intern(r->t, (const char *)f.data, f.len);
            if (!name)
                return oom(r);
        }
    }
    if (rc < 0)
        return -1;
    return u64_put(m, iid, (void *)name) == 0 ? 0 : oom(r);
}

/* A Frame: its iid -> its function's name ("" when it names none the
 * sequence gave; the mapping and address are not kept: flame merges by name). */
static int intern_frame(reader *r, sequence *s, const uint8_t *p, size_t n)
{
    pb b = {p, p + n};
    field f;
    uint64_t iid = 0, fn = 0;
    int rc;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == F_IID && !is_bytes(&f))
            iid = f.v;
        else if (f.num == F_FUNCTION_NAME && !is_bytes(&f))
            fn = f.v;
    }
    if (rc < 0)
        return -1;
    const char *name = fn ? u64_get(&s->fnames, fn) : NULL;
    if (!name) {
        r->no_iid += fn != 0;
        name = "?";
    }
    return u64_put(&s->frames, iid, (void *)name) == 0 ? 0 : oom(r);
}

/* The node of name under parent in t's stack tree, made when new; 0 when out of memory. */
static uint32_t stack_node(reader *r, uint32_t parent, const char *name)
{
    an_trace *t = r->t;
    unsigned char key[sizeof parent + sizeof name];
    memcpy(key, &parent, sizeof parent);
    memcpy(key + sizeof parent, &name, sizeof name); /* names are interned: one pointer each */
    mlprof__map_entry *e = mlprof__map_slot(&t->snode_index, (const char *)key, sizeof key);
    if (!e)
        return 0;
    if (e->value)
        return (uint32_t)(uintptr_t)e->value;
    if (!t->nsnodes)
        t->nsnodes = 1; /* node 0: none */
    an_stack_node *g = mlprof__grow(t->snodes, &t->snodecap, t->nsnodes, sizeof *g, 1024);
    if (!g || t->nsnodes >= UINT32_MAX)
        return 0;
    t->snodes = g;
    uint32_t id = (uint32_t)t->nsnodes++;
    g[id] = (an_stack_node){parent, name};
    e->value = (void *)(uintptr_t)id;
    return id;
}

/* A Callstack: its frames, outermost first, as a path in t's stack tree. */
static int intern_callstack(reader *r, sequence *s, const uint8_t *p, size_t n)
{
    pb b = {p, p + n};
    field f;
    uint64_t iid = 0;
    uint32_t node = 0;
    int rc, missing = 0;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == CS_IID && !is_bytes(&f)) {
            iid = f.v;
        } else if (f.num == CS_FRAMES) {
            /* one by one as declared; packed too, as other writers may */
            pb q = is_bytes(&f) ? (pb){f.data, f.data + f.len} : (pb){NULL, NULL};
            uint64_t v = f.v;
            do {
                if (is_bytes(&f)) {
                    size_t k = varint(q.p, (size_t)(q.end - q.p), &v);
                    if (!k)
                        return -1;
                    q.p += k;
                }
                const char *name = u64_get(&s->frames, v);
                if (!name) {
                    missing = 1;
                    name = "?";
                }
                if (!(node = stack_node(r, node, name)))
                    return oom(r);
            } while (is_bytes(&f) && q.p < q.end);
        }
    }
    if (rc < 0)
        return -1;
    r->no_iid += missing;
    return node && u64_put(&s->stacks, iid, (void *)(uintptr_t)node) != 0 ? oom(r) : 0;
}

static int interned(reader *r, sequence *s, const uint8_t *p, size_t n)
{
    /* names first, frames then, callstacks last: each may name the one
     * before in the same message, in whatever order its fields come */
    for (int pass = 0; pass < 3; pass++) {
        pb b = {p, p + n};
        field f;
        int rc;
        while ((rc = pb_next(&b, &f)) > 0) {
            if (!is_bytes(&f))
                continue;
            if (pass == 0) {
                u64map *m = f.num == I_NAMES ? &s->names : f.num == I_CATEGORIES ? &s->cats
                          : f.num == I_ANNOTATION_NAMES ? &s->ann_names : f.num == I_STRING_VALUES ? &s->strings
                          : f.num == I_FUNCTION_NAMES ? &s->fnames : NULL;
                if (m && intern_entries(r, m, f.data, f.len) != 0)
                    return -1;
            } else if (pass == 1 && f.num == I_FRAMES) {
                if (intern_frame(r, s, f.data, f.len) != 0)
                    return -1;
            } else if (pass == 2 && f.num == I_CALLSTACKS) {
                if (intern_callstack(r, s, f.data, f.len) != 0)
                    return -1;
            }
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A PerfSample at mono: on its callstack's node (a sample whose callstack
 * the sequence never gave is counted as an unknown iid). */
static int perf_sample(reader *r, sequence *s, const uint8_t *p, size_t n, int64_t mono)
{
    pb b = {p, p + n};
    field f;
    int64_t pid = 0, tid = 0;
    uint64_t cs = 0;
    int rc;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (is_bytes(&f))
            continue;
        if (f.num == PS_PID)
            pid = (int64_t)(uint32_t)f.v;
        else if (f.num == PS_TID)
            tid = (int64_t)(uint32_t)f.v;
        else if (f.num == PS_CALLSTACK)
            cs = f.v;
    }
    if (rc < 0)
        return -1;
    uint32_t node = (uint32_t)(uintptr_t)u64_get(&s->stacks, cs);
    if (!node) {
        r->no_iid++;
        return 0;
    }
    an_trace *t = r->t;
    an_stack_sample *g = mlprof__grow(t->ssamples, &t->ssamplecap, t->nssamples, sizeof *g, 1024);
    if (!g)
        return oom(r);
    t->ssamples = g;
    g[t->nssamples++] = (an_stack_sample){pid, tid, mono, node};
    return 0;
}

/* pid, tid and name of a ProcessDescriptor or ThreadDescriptor. */
static int pid_tid_name(reader *r, const field *d, int thread, int64_t *pid, int64_t *tid, const char **name)
{
    pb b = {d->data, d->data + d->len};
    field f;
    int rc;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == 1 && !is_bytes(&f))
            *pid = (int32_t)(uint32_t)f.v;
        else if (thread && f.num == TH_TID && !is_bytes(&f))
            *tid = (int32_t)(uint32_t)f.v;
        else if (f.num == (thread ? TH_NAME : PD_NAME) && is_bytes(&f) &&
                 !(*name = an_intern(r->t, (const char *)f.data, f.len)))
            return oom(r);
    }
    return rc;
}

/* A CounterDescriptor's categories, joined by commas as the JSON's "cat":
 * the category of the track's samples that name none. */
static int counter_categories(reader *r, track *tr, const field *d)
{
    pb b = {d->data, d->data + d->len};
    field f;
    int rc, n = 0;
    mlprof__sb_reset(&r->raw);
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num != CD_CATEGORIES || !is_bytes(&f))
            continue;
        if (n++)
            mlprof__sb_putc(&r->raw, ',');
        mlprof__sb_put(&r->raw, (const char *)f.data, f.len);
    }
    if (rc < 0)
        return -1;
    if (n && !(tr->cat = an_intern(r->t, r->raw.data, r->raw.len)))
        return oom(r);
    return 0;
}

static int descriptor(reader *r, const uint8_t *p, size_t n)
{
    pb b = {p, p + n};
    field f, process = {0}, thread = {0}, counter = {0};
    uint64_t uuid = 0, parent = 0;
    int has_parent = 0, rc;
    const char *name = NULL;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == T_UUID && !is_bytes(&f))
            uuid = f.v;
        else if (f.num == T_PARENT && !is_bytes(&f))
            parent = f.v, has_parent = 1;
        else if ((f.num == T_NAME || f.num == T_STATIC_NAME) && is_bytes(&f) &&
                 !(name = an_intern(r->t, (const char *)f.data, f.len)))
            return oom(r);
        else if (f.num == T_PROCESS && is_bytes(&f))
            process = f;
        else if (f.num == T_THREAD && is_bytes(&f))
            thread = f;
        else if (f.num == T_COUNTER && is_bytes(&f))
            counter = f;
    }
    if (rc < 0)
        return -1;
    track *tr = track_get(r, uuid);
    if (!tr)
        return oom(r);
    if (has_parent)
        tr->parent = parent, tr->has_parent = 1;
    if (name)
        tr->name = name;
    const char *pname = NULL;
    if (thread.data) {
        int64_t pid = 0, tid = 0;
        if (pid_tid_name(r, &thread, 1, &pid, &tid, &pname) != 0)
            return -1;
        tr->kind = K_THREAD;
        tr->pid = pid;
        tr->tid = tid;
        if (!pname)
            pname = name; /* a GPU stream: its track's name */
        if (pname && an_trace_add_name(r->t, pid, tid, pname) != 0)
            return oom(r);
    } else if (process.data) {
        int64_t pid = 0, tid = 0;
        if (pid_tid_name(r, &process, 0, &pid, &tid, &pname) != 0)
            return -1;
        tr->kind = K_PROCESS;
        tr->pid = tr->tid = pid;
        if (pname && an_trace_add_name(r->t, pid, AN_PROCESS_TID, pname) != 0)
            return oom(r);
    } else if (counter.data) {
        tr->kind = K_COUNTER;
        return counter_categories(r, tr, &counter);
    }
    return 0;
}

/* Where events on tr go: a thread's track, a process's, a counter's (on
 * the process or thread of its parent), a thread's frames, or a track of its
 * own, numbered and named as JSON's named tids are. */
static int place_of(reader *r, track *tr, place *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->kind = tr->kind;
    if (tr->kind == K_THREAD || tr->kind == K_PROCESS) {
        pl->pid = tr->pid;
        pl->tid = tr->tid;
        return 0;
    }
    const track *up = tr;
    for (int depth = 0; depth < 8 && up->has_parent; depth++) {
        up = u64_get(&r->tracks, up->parent);
        if (!up)
            break;
        if (up->kind == K_THREAD || up->kind == K_PROCESS) {
            pl->pid = up->pid;
            pl->tid = up->tid;
            pl->frame = tr->kind == K_NONE && up->kind == K_THREAD && depth == 0;
            break;
        }
    }
    if (!up || (up->kind != K_THREAD && up->kind != K_PROCESS))
        pl->tid = pl->pid;
    if (tr->kind == K_COUNTER || pl->frame)
        return 0;
    if (up && up->kind == K_THREAD) /* below a child of a thread: the thread's frames too */
        return pl->frame = 1, 0;
    if (!tr->named_tid) {
        tr->named_tid = AN_NAMED_ID_FIRST - ++r->next_named;
        char fallback[48];
        snprintf(fallback, sizeof fallback, "track %llu", (unsigned long long)tr->uuid);
        const char *name = tr->name ? tr->name : an_intern(r->t, fallback, strlen(fallback));
        if (!name || an_trace_add_name(r->t, pl->pid, tr->named_tid, name) != 0)
            return oom(r);
    }
    pl->tid = tr->named_tid;
    return 0;
}

/* A time on global clock id as CLOCK_MONOTONIC, the JSON's clock, through
 * the last clock snapshot that has both; as it is when none does. */
static int64_t to_monotonic(const reader *r, uint32_t id, uint64_t ts)
{
    if (id == CLOCK_MONOTONIC_ID)
        return (int64_t)ts;
    const uint64_t *from = NULL, *to = NULL;
    for (size_t i = 0; i < r->nclocks; i++) {
        if (r->clocks[i].id == id)
            from = &r->clocks[i].ts;
        if (r->clocks[i].id == CLOCK_MONOTONIC_ID)
            to = &r->clocks[i].ts;
    }
    if (!from || !to)
        return (int64_t)ts;
    return (int64_t)(ts - *from + *to);
}

/* A ClockSnapshot. One that sets clocks of its sequence (64..127) ties each
 * to CLOCK_MONOTONIC (through a global clock it reads beside them) and
 * leaves the trace's global snapshot as it was; any other replaces it. */
static int clock_snapshot(reader *r, sequence *s, const uint8_t *p, size_t n)
{
    pb b = {p, p + n}, c;
    field f, g;
    int rc;
    struct { uint32_t id; uint64_t ts, unit; int inc; } got[16];
    size_t ngot = 0, scoped = 0;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num != C_CLOCKS || !is_bytes(&f))
            continue;
        uint32_t id = 0;
        uint64_t ts = 0, unit = 1;
        int inc = 0;
        c = (pb){f.data, f.data + f.len};
        while ((rc = pb_next(&c, &g)) > 0) {
            if (g.num == C_CLOCK_ID && !is_bytes(&g))
                id = (uint32_t)g.v;
            else if (g.num == C_CLOCK_TS && !is_bytes(&g))
                ts = g.v;
            else if (g.num == C_CLOCK_INCREMENTAL && !is_bytes(&g))
                inc = g.v != 0;
            else if (g.num == C_CLOCK_UNIT && !is_bytes(&g) && g.v)
                unit = g.v;
        }
        if (rc < 0)
            return -1;
        if (ngot < 16) {
            got[ngot].id = id;
            got[ngot].ts = ts;
            got[ngot].unit = unit;
            got[ngot++].inc = inc;
            scoped += id >= CLOCK_SEQ_FIRST && id <= CLOCK_SEQ_LAST;
        }
    }
    if (rc < 0)
        return -1;
    if (!scoped) {
        r->nclocks = 0;
        for (size_t i = 0; i < ngot; i++) {
            r->clocks[r->nclocks].id = got[i].id;
            r->clocks[r->nclocks++].ts = got[i].ts;
        }
        return 0;
    }
    /* the global clock read beside them: MONOTONIC if there, else the first */
    int64_t mono = 0;
    int have = 0;
    for (size_t i = 0; i < ngot && !have; i++)
        if (got[i].id == CLOCK_MONOTONIC_ID)
            mono = (int64_t)got[i].ts, have = 1;
    for (size_t i = 0; i < ngot && !have; i++)
        if (got[i].id < CLOCK_SEQ_FIRST)
            mono = to_monotonic(r, got[i].id, got[i].ts), have = 1;
    for (size_t i = 0; i < ngot; i++) {
        if (got[i].id < CLOCK_SEQ_FIRST || got[i].id > CLOCK_SEQ_LAST)
            continue;
        size_t k = 0;
        while (k < s->nsclk && s->sclk[k].id != got[i].id)
            k++;
        if (k == s->nsclk) {
            if (s->nsclk == SEQ_CLOCKS)
                continue; /* more than a writer needs: its timestamps stay unknown */
            s->nsclk++;
        }
        s->sclk[k].id = got[i].id;
        s->sclk[k].incremental = got[i].inc;
        s->sclk[k].unit = got[i].unit;
        s->sclk[k].at = s->sclk[k].last = got[i].ts;
        s->sclk[k].mono_at = have ? mono : (int64_t)(got[i].ts * got[i].unit);
    }
    return 0;
}

/* The CLOCK_MONOTONIC time of a packet's timestamp ts on clock id of
 * sequence s (an incremental clock moves on by it); 0 and *ok cleared when
 * the sequence never said what its clock id is. */
static int64_t packet_time(const reader *r, sequence *s, uint32_t id, uint64_t ts, int *ok)
{
    *ok = 1;
    if (id < CLOCK_SEQ_FIRST || id > CLOCK_SEQ_LAST)
        return to_monotonic(r, id, ts);
    for (size_t k = 0; k < s->nsclk; k++) {
        if (s->sclk[k].id != id)
            continue;
        uint64_t v = s->sclk[k].incremental ? s->sclk[k].last + ts : ts;
        s->sclk[k].last = v;
        return s->sclk[k].mono_at + (int64_t)((v - s->sclk[k].at) * s->sclk[k].unit);
    }
    *ok = 0;
    return 0;
}

/* ------------------------------------------------------ annotations */

/* A DebugAnnotation, decoded but not yet converted. */
typedef struct annot {
    const char *key;
    int kind; /* the value's field number, 0 when it has none */
    uint64_t v;
    const uint8_t *data;
    size_t len;
    int missing_iid;
} annot;

static int annot_read(reader *r, const sequence *s, const uint8_t *p, size_t n, annot *a)
{
    pb b = {p, p + n};
    field f;
    int rc;
    memset(a, 0, sizeof *a);
    a->key = "";
    while ((rc = pb_next(&b, &f)) > 0) {
        switch (f.num) {
        case A_NAME_IID:
            a->key = u64_get(&s->ann_names, f.v);
            if (!a->key) {
                a->key = "";
                a->missing_iid = 1;
            }
            break;
        case A_NAME:
            if (is_bytes(&f) && !(a->key = an_intern(r->t, (const char *)f.data, f.len)))
                return oom(r);
            break;
        case A_BOOL: case A_UINT: case A_INT: case A_DOUBLE: case A_POINTER:
            if (is_bytes(&f))
                break; /* not a value of its type: none */
            a->kind = (int)f.num;
            a->v = f.v;
            break;
        case A_STRING_IID: {
            const char *str = u64_get(&s->strings, f.v);
            a->kind = A_STRING;
            a->data = (const uint8_t *)(str ? str : "");
            a->len = str ? strlen(str) : 0;
            a->missing_iid |= !str;
            break;
        }
        case A_STRING: case A_NESTED: case A_LEGACY_JSON:
            if (!is_bytes(&f))
                break;
            a->kind = (int)f.num;
            a->data = f.data;
            a->len = f.len;
            break;
        case A_DICT: case A_ARRAY: /* repeated: the value is the whole annotation */
            a->kind = (int)f.num;
            a->data = p;
            a->len = n;
            break;
        default: break;
        }
    }
    return rc;
}

static void put_json_text(reader *r, const uint8_t *p, size_t n, mlprof__sb *out);

/* A NestedValue as JSON. */
static int nested_json(const uint8_t *p, size_t n, mlprof__sb *out, int depth)
{
    pb b = {p, p + n};
    field f;
    int rc, type = 0, has = 0;
    while ((rc = pb_next(&b, &f)) > 0) {
        if (f.num == N_TYPE && !is_bytes(&f))
            type = (int)f.v;
    }
    if (rc < 0 || depth > MAX_DEPTH)
        return -1;
    b = (pb){p, p + n};
    if (type == 1 || type == 2) {
        pb keys = {p, p + n};
        field k;
        mlprof__sb_putc(out, type == 1 ? '{' : '[');
        while (pb_next(&b, &f) > 0) {
            if (f.num != (uint32_t)(type == 1 ? N_DICT_VALUES : N_ARRAY_VALUES) || !is_bytes(&f))
                continue;
            if (has++)
                mlprof__sb_putc(out, ',');
            if (type == 1) {
                int found = 0;
                while (!found && pb_next(&keys, &k) > 0)
                    found = k.num == N_KEYS && is_bytes(&k);
                mlprof__sb_json_str(out, found ? (const char *)k.data : "", found ? k.len : 0);
                mlprof__sb_putc(out, ':');
            }
            if (nested_json(f.data, f.len, out, depth + 1) != 0)
                return -1;
        }
        mlprof__sb_putc(out, type == 1 ? '}' : ']');
        return 0;
    }
    while (pb_next(&b, &f) > 0) {
        has = 1;
        if (f.num == N_INT)
            mlprof__sb_i64(out, (int64_t)f.v);
        else if (f.num == N_DOUBLE && f.wt == WT_FIXED64) {
            double d;
            memcpy(&d, &f.v, sizeof d);
            mlprof__sb_double(out, d);
        } else if (f.num == N_BOOL)
            mlprof__sb_puts(out, f.v ? "true" : "false");
        else if (f.num == N_STRING && is_bytes(&f))
            mlprof__sb_json_str(out, (const char *)f.data, f.len);
        else
            has = 0;
        if (has)
            return 0;
    }
    mlprof__sb_puts(out, "null");
    return 0;
}

static int annot_json(reader *r, const sequence *s, const annot *a, mlprof__sb *out, int depth);

/* The entries (A_DICT) or items (A_ARRAY) of an annotation as JSON. */
static int container_json(reader *r, const sequence *s, const annot *a, mlprof__sb *out, int depth)
{
    pb b = {a->data, a->data + a->len};
    field f;
    int n = 0;
    if (depth > MAX_DEPTH)
        return -1;
    mlprof__sb_putc(out, a->kind == A_DICT ? '{' : '[');
    while (pb_next(&b, &f) > 0) {
        if (f.num != (uint32_t)a->kind || !is_bytes(&f))
            continue;
        annot item;
        if (annot_read(r, s, f.data, f.len, &item) < 0)
            return -1;
        if (n++)
            mlprof__sb_putc(out, ',');
        if (a->kind == A_DICT) {
            mlprof__sb_json_str(out, item.key, strlen(item.key));
            mlprof__sb_putc(out, ':');
        }
        if (annot_json(r, s, &item, out, depth + 1) != 0)
            return -1;
    }
    mlprof__sb_putc(out, a->kind == A_DICT ? '}' : ']');
    return 0;
}

/* An annotation's value as JSON text (otherData, and nested arguments). */
static int annot_json(reader *r, const sequence *s, const annot *a, mlprof__sb *out, int depth)
{
    double d;
    switch (a->kind) {
    case A_BOOL: mlprof__sb_puts(out, a->v ? "true" : "false"); return 0;
    case A_UINT: mlprof__sb_u64(out, a->v); return 0;
    case A_INT: mlprof__sb_i64(out, (int64_t)a->v); return 0;
    case A_DOUBLE:
        memcpy(&d, &a->v, sizeof d);
        mlprof__sb_double(out, d);
        return 0;
    case A_POINTER: mlprof__sb_printf(out, "\"0x%llx\"", (unsigned long long)a->v); return 0;
    case A_STRING: mlprof__sb_json_str(out, (const char *)a->data, a->len); return 0;
    case A_LEGACY_JSON: put_json_text(r, a->data, a->len, out); return 0;
    case A_NESTED: return nested_json(a->data, a->len, out, depth);
    case A_DICT: case A_ARRAY: return container_json(r, s, a, out, depth);
    default: mlprof__sb_puts(out, "null"); return 0;
    }
}

/* JSON text as the JSON reader keeps it (compact); text that is not JSON
 * as a string. */
static void put_json_text(reader *r, const uint8_t *p, size_t n, mlprof__sb *out)
{
    an_input in;
    mlprof__sb_reset(&r->raw);
    int ok = an_input_open_mem(&in, "", p, n) == 0 && an_json_skip(&in, &r->raw) == 0 && an_json_peek(&in) < 0;
    an_input_close(&in);
    if (ok)
        mlprof__sb_put(out, r->raw.data ? r->raw.data : "", r->raw.len);
    else
        mlprof__sb_json_str(out, (const char *)p, n);
}

/* legacy_json_value: the JSON text of a member's value, read as read_args
 * (trace.c) reads it; text that is not JSON as a string. */
static int legacy_arg(reader *r, const annot *a, an_arg *arg)
{
    an_trace *t = r->t;
    an_input in;
    int c = an_input_open_mem(&in, "", a->data, a->len) == 0 ? an_json_peek(&in) : -1;
    int rc = -1;
    mlprof__sb_reset(&r->raw);
    if (c == '"') {
        rc = an_json_string(&in, &r->raw);
        arg->type = AN_STR;
    } else if (c >= 0 && strchr("{[tfn", c)) {
        rc = an_json_skip(&in, &r->raw);
        arg->type = AN_RAW;
    } else if (c >= 0) {
        int is_int;
        rc = an_json_number(&in, &arg->num, &arg->inum, &is_int);
        arg->is_int = (uint8_t)is_int;
        arg->type = AN_NUM;
    }
    if (rc == 0 && an_json_peek(&in) >= 0)
        rc = -1;
    an_input_close(&in);
    if (rc != 0) { /* not JSON: its text */
        memset(arg, 0, sizeof *arg);
        arg->key = a->key;
        arg->type = AN_STR;
        arg->str = an_intern(t, (const char *)a->data, a->len);
    } else if (arg->type != AN_NUM) {
        arg->str = an_intern(t, r->raw.data, r->raw.len);
    }
    return arg->type == AN_NUM || arg->str ? 0 : oom(r);
}

/* The annotation as an argument, typed as the JSON reader types the same
 * member: numbers, strings, and arrays, objects, true, false and null as
 * compact JSON. */
static int annot_arg(reader *r, const sequence *s, const annot *a, an_arg *arg)
{
    an_trace *t = r->t;
    memset(arg, 0, sizeof *arg);
    arg->key = a->key;
    double d;
    switch (a->kind) {
    case A_INT:
        arg->inum = (int64_t)a->v;
        arg->num = (double)arg->inum;
        arg->is_int = 1;
        return 0;
    case A_UINT:
        arg->num = (double)a->v;
        arg->is_int = a->v <= INT64_MAX;
        arg->inum = arg->is_int ? (int64_t)a->v : 0;
        return 0;
    case A_DOUBLE:
        memcpy(&d, &a->v, sizeof d);
        arg->num = d;
        return 0;
    case A_BOOL:
        arg->type = AN_RAW;
        arg->str = a->v ? "true" : "false";
        break;
    case A_STRING:
        arg->type = AN_STR;
        arg->str = (const char *)a->data;
        break;
    case A_LEGACY_JSON:
        return legacy_arg(r, a, arg);
    case A_POINTER: case A_NESTED: case A_DICT: case A_ARRAY:
        mlprof__sb_reset(&r->json);
        if (annot_json(r, s, a, &r->json, 0) != 0)
            return fail(r, 1, "the packet at byte offset %llu has a debug annotation nested too deep or malformed",
                        (unsigned long long)r->packet_off);
        arg->type = a->kind == A_POINTER ? AN_STR : AN_RAW;
        if (a->kind == A_POINTER) /* its text, without the quotes */
            arg->str = an_intern(t, r->json.data + 1, r->json.len - 2);
        else
            arg->str = an_intern(t, r->json.data ? r->json.data : "", r->json.len);
        return arg->str ? 0 : oom(r);
    default:
        arg->type = AN_RAW;
        arg->str = "null";
        return 0;
    }
    arg->str = an_intern(t, arg->str, a->kind == A_STRING ? a->len : strlen(arg->str));
    return arg->str ? 0 : oom(r);
}

/* ----------------------------------------------------------- events */

typedef struct ids {
    uint64_t v[8];
    size_t n;
    uint64_t more; /* beyond v: counted */
} ids;

static int add_id(void *arg, uint64_t v)
{
    ids *d = arg;
    if (d->n < 8)
        d->v[d->n++] = v;
    else
        d->more++;
    return 0;
}

/* What a TrackEvent says, gathered before it becomes events. */
typedef struct te {
    int type;
    const char *name, *cat;
    int has_track;
    uint64_t track;
    int has_counter, counter_double;
    uint64_t counter;
    ids flows, terminating, extra_tracks, extra_values, extra_dtracks, extra_dvalues;
    int missing_iid;
} te;

static an_event *new_event(reader *r, const te *e, const place *pl, int64_t ts, char ph)
{
    an_trace *t = r->t;
    an_event *ev = mlprof__grow(t->ev, &t->evcap, t->nev, sizeof *t->ev, 1024);
    if (!ev)
        return NULL;
    t->ev = ev;
    ev = &t->ev[t->nev++];
    memset(ev, 0, sizeof *ev);
    ev->name = e->name;
    ev->cat = e->cat;
    ts = an_time_clamp(ts); /* a time beyond what the model holds (trace.h) */
    ev->ts = ts;
    ev->pid = pl->pid;
    ev->tid = pl->tid;
    ev->parent = -1;
    ev->args = (uint32_t)t->nargs;
    ev->ph = ph;
    if (ts < t->t_min)
        t->t_min = ts;
    if (ts > t->t_max)
        t->t_max = ts;
    return ev;
}

static an_arg *new_arg(an_trace *t)
{
    an_arg *a = mlprof__grow(t->args, &t->argcap, t->nargs, sizeof *t->args, 1024);
    if (!a)
        return NULL;
    t->args = a;
    return &t->args[t->nargs++];
}

/* The debug annotations of the event (body p, n) appended to t->args; their
 * number into *count. */
static int parse_args(reader *r, const sequence *s, const uint8_t *p, size_t n, uint32_t *count)
{
    pb b = {p, p + n};
    field f;
    *count = 0;
    while (pb_next(&b, &f) > 0) {
        if (f.num != E_ANNOTATIONS || !is_bytes(&f))
            continue;
        annot a;
        an_arg arg;
        if (annot_read(r, s, f.data, f.len, &a) < 0 || annot_arg(r, s, &a, &arg) != 0)
            return -1;
        an_arg *slot = new_arg(r->t);
        if (!slot)
            return oom(r);
        *slot = arg;
        (*count)++;
    }
    return 0;
}

/* ... as the arguments of t->ev[ei], the last event. */
static int event_args(reader *r, const sequence *s, const uint8_t *p, size_t n, size_t ei)
{
    r->t->ev[ei].args = (uint32_t)r->t->nargs;
    return parse_args(r, s, p, n, &r->t->ev[ei].nargs);
}

/* mlprof's footer: the members of otherData as its annotations. */
static int other_data(reader *r, const sequence *s, const uint8_t *p, size_t n)
{
    pb b = {p, p + n};
    field f;
    mlprof__sb *j = &r->json;
    mlprof__sb_reset(j);
    mlprof__sb_putc(j, '{');
    int members = 0;
    mlprof__sb value;
    mlprof__sb_init(&value);
    while (pb_next(&b, &f) > 0) {
        if (f.num != E_ANNOTATIONS || !is_bytes(&f))
            continue;
        annot a;
        mlprof__sb_reset(&value);
        if (annot_read(r, s, f.data, f.len, &a) < 0 || annot_json(r, s, &a, &value, 0) != 0) {
            mlprof__sb_free(&value);
            return fail(r, 1, "the otherData packet at byte offset %llu is malformed",
                        (unsigned long long)r->packet_off);
        }
        if (members++)
            mlprof__sb_putc(j, ',');
        mlprof__sb_json_str(j, a.key, strlen(a.key));
        mlprof__sb_putc(j, ':');
        mlprof__sb_put(j, value.data ? value.data : "", value.len);
    }
    mlprof__sb_free(&value);
    mlprof__sb_putc(j, '}');
    if (j->failed)
        return oom(r);
    r->t->other_data = an_intern(r->t, j->data, j->len);
    if (!r->t->other_data)
        return oom(r);
    if (strstr(r->t->other_data, "\"mlprof_version\""))
        r->t->writer = "mlprof";
    return 0;
}

/* A counter sample: a "C" event named after its track, its value as "value". */
static int counter_event(reader *r, const te *e, track *tr, int64_t ts, uint64_t raw, int dbl)
{
    place pl;
    if (place_of(r, tr, &pl) != 0)
        return -1;
    te named = *e;
    named.name = tr->name ? tr->name : "";
    if (!named.cat[0] && tr->cat)
        named.cat = tr->cat;
    an_event *ev = new_event(r, &named, &pl, ts, 'C');
    an_arg *a = ev ? new_arg(r->t) : NULL;
    if (!a)
        return oom(r);
    memset(a, 0, sizeof *a);
    a->key = r->value_key;
    if (dbl) {
        double d;
        memcpy(&d, &raw, sizeof d);
        a->num = d;
        /* written as JSON, a whole double reads back as an integer */
        a->is_int = fabs(d) < 9.0e15 && d == (double)(int64_t)d;
        a->inum = a->is_int ? (int64_t)d : 0;
    } else {
        a->inum = (int64_t)raw;
        a->num = (double)a->inum;
        a->is_int = 1;
    }
    r->t->ev[r->t->nev - 1].nargs = 1;
    return 0;
}

/* Values for extra counter tracks, sampled with the event. */
static int extra_counters(reader *r, const sequence *s, const te *e, int64_t ts)
{
    for (int dbl = 0; dbl < 2; dbl++) {
        const ids *tracks = dbl ? &e->extra_dtracks : &e->extra_tracks;
        const ids *values = dbl ? &e->extra_dvalues : &e->extra_values;
        for (size_t i = 0; i < values->n; i++) {
            uint64_t uuid;
            if (i < tracks->n)
                uuid = tracks->v[i];
            else if (!dbl && !tracks->n && i < s->nextra)
                uuid = s->extra[i];
            else {
                r->no_track++;
                continue;
            }
            track *tr = u64_get(&r->tracks, uuid);
            if (!tr) {
                r->no_track++;
                continue;
            }
            te plain = *e;
            plain.cat = "";
            if (counter_event(r, &plain, tr, ts, values->v[i], dbl) != 0)
                return -1;
        }
    }
    return 0;
}

static int slice_end(reader *r, const sequence *s, const te *e, track *tr, const place *pl, int64_t ts,
                     const uint8_t *p, size_t n)
{
    an_trace *t = r->t;
    if (!tr->nopen) {
        t->unmatched_ends++;
        return 0;
    }
    size_t bi = tr->open[--tr->nopen];
    ts = an_time_clamp(ts);
    if (ts > t->t_max)
        t->t_max = ts;
    if (pl->frame) { /* an async end: an "e" of the begin's name and id */
        te same = *e;
        same.name = t->ev[bi].name;
        same.cat = t->ev[bi].cat;
        an_event *ev = new_event(r, &same, pl, ts, 'e');
        if (!ev)
            return oom(r);
        ev->pid = t->ev[bi].pid;
        ev->tid = t->ev[bi].tid;
        ev->id = t->ev[bi].id;
        return event_args(r, s, p, n, t->nev - 1);
    }
    an_event *b = &t->ev[bi];
    b->ph = 'X';
    b->dur = ts > b->ts ? ts - b->ts : 0;
    /* the end's arguments join the begin's */
    size_t first = t->nargs;
    uint32_t extra;
    if (parse_args(r, s, p, n, &extra) != 0)
        return -1;
    b = &t->ev[bi];
    if (extra && b->args + b->nargs != first) { /* not next to the begin's: both move to the end */
        size_t moved = t->nargs;
        for (uint32_t i = 0; i < b->nargs + extra; i++) {
            an_arg *a = new_arg(t);
            if (!a)
                return oom(r);
            *a = t->args[i < b->nargs ? b->args + i : first + (i - b->nargs)];
        }
        b->args = (uint32_t)moved;
    }
    b->nargs += extra;
    return 0;
}

static int add_flow(reader *r, const te *e, const place *pl, int64_t ts, uint64_t id, char ph)
{
    an_event *ev = new_event(r, e, pl, ts, ph);
    if (!ev)
        return oom(r);
    ev->id = id;
    ev->flow_enclosing = ph == 'f';
    return 0;
}

static int track_event(reader *r, sequence *s, const uint8_t *p, size_t n, int64_t ts)
{
    an_trace *t = r->t;
    pb b = {p, p + n};
    field f;
    te e;
    memset(&e, 0, sizeof e);
    e.name = e.cat = "";
    int rc, ncats = 0;
    mlprof__sb_reset(&r->raw);
    while ((rc = pb_next(&b, &f)) > 0) {
        switch (f.num) {
        case E_TYPE: e.type = (int)f.v; break;
        case E_TRACK_UUID: e.track = f.v, e.has_track = 1; break;
        case E_NAME_IID:
            e.name = u64_get(&s->names, f.v);
            if (!e.name)
                e.missing_iid = 1, e.name = "";
            break;
        case E_NAME:
            if (is_bytes(&f) && !(e.name = an_intern(t, (const char *)f.data, f.len)))
                return oom(r);
            break;
        case E_CATEGORY_IIDS: case E_CATEGORIES: {
            ids c = {{0}, 0, 0};
            if (f.num == E_CATEGORIES) {
                if (!is_bytes(&f))
                    break;
                if (ncats++)
                    mlprof__sb_putc(&r->raw, ',');
                mlprof__sb_put(&r->raw, (const char *)f.data, f.len);
                break;
            }
            if (each_int(&f, 0, add_id, &c) != 0)
                return -1;
            for (size_t i = 0; i < c.n; i++) {
                const char *cat = u64_get(&s->cats, c.v[i]);
                if (!cat) {
                    e.missing_iid = 1;
                    continue;
                }
                if (ncats++)
                    mlprof__sb_putc(&r->raw, ',');
                mlprof__sb_puts(&r->raw, cat);
            }
            break;
        }
        case E_COUNTER_VALUE: case E_DOUBLE_COUNTER_VALUE:
            e.has_counter = 1;
            e.counter = f.v;
            e.counter_double = f.num == E_DOUBLE_COUNTER_VALUE;
            break;
        case E_FLOW_IDS: case E_FLOW_IDS_OLD:
            if (each_int(&f, f.num == E_FLOW_IDS, add_id, &e.flows) != 0)
                return -1;
            break;
        case E_TERMINATING: case E_TERMINATING_OLD:
            if (each_int(&f, f.num == E_TERMINATING, add_id, &e.terminating) != 0)
                return -1;
            break;
        case E_EXTRA_COUNTERS:
            if (each_int(&f, 0, add_id, &e.extra_tracks) != 0)
                return -1;
            break;
        case E_EXTRA_COUNTER_VALUES:
            if (each_int(&f, 0, add_id, &e.extra_values) != 0)
                return -1;
            break;
        case E_EXTRA_DOUBLE_COUNTERS:
            if (each_int(&f, 0, add_id, &e.extra_dtracks) != 0)
                return -1;
            break;
        case E_EXTRA_DOUBLE_COUNTER_VALUES:
            if (each_int(&f, 1, add_id, &e.extra_dvalues) != 0)
                return -1;
            break;
        case E_ANNOTATIONS: { /* names first: an unknown iid leaves the packet out */
            annot a;
            if (is_bytes(&f) && annot_read(r, s, f.data, f.len, &a) == 0 && a.missing_iid)
                e.missing_iid = 1;
            break;
        }
        default: break;
        }
    }
    if (rc < 0)
        return -1;
    if (e.missing_iid) {
        r->no_iid++;
        return 0;
    }
    if (ncats && !(e.cat = an_intern(t, r->raw.data, r->raw.len)))
        return oom(r);
    r->track_events++;
    if (e.extra_values.n + e.extra_dvalues.n && extra_counters(r, s, &e, ts) != 0)
        return -1;
    uint64_t uuid = e.has_track ? e.track : s->has_track ? s->track : 0;
    track *tr = u64_get(&r->tracks, uuid);
    place pl;
    if (!tr && uuid == 0 && e.type == TYPE_INSTANT) { /* the trace-global track */
        memset(&pl, 0, sizeof pl);
    } else if (!tr) {
        r->no_track++;
        return 0;
    } else if (place_of(r, tr, &pl) != 0) {
        return -1;
    }
    size_t before = t->nev;
    switch (e.type) {
    case TYPE_SLICE_BEGIN: {
        an_event *ev = new_event(r, &e, &pl, ts, pl.frame ? 'b' : 'U');
        if (!ev)
            return oom(r);
        if (pl.frame) {
            ev->id = ++r->next_frame_id;
        } else if (e.flows.n || e.terminating.n) { /* flows bound to this slice */
            ev->id = e.flows.n ? e.flows.v[0] : e.terminating.v[0];
            ev->id_form = (uint8_t)(AN_ID_BIND | (e.flows.n ? AN_FLOW_OUT : 0) | (e.terminating.n ? AN_FLOW_IN : 0));
            r->bad_flows += e.flows.n + e.terminating.n - 1 + e.flows.more + e.terminating.more;
        }
        size_t *open = mlprof__grow(tr->open, &tr->capopen, tr->nopen, sizeof *tr->open, 16);
        if (!open)
            return oom(r);
        tr->open = open;
        tr->open[tr->nopen++] = before;
        return event_args(r, s, p, n, before);
    }
    case TYPE_SLICE_END: return slice_end(r, s, &e, tr, &pl, ts, p, n);
    case TYPE_INSTANT:
        if (e.flows.n || e.terminating.n) {
            for (size_t i = 0; i < e.flows.n; i++)
                if (add_flow(r, &e, &pl, ts, e.flows.v[i], 's') != 0)
                    return -1;
            for (size_t i = 0; i < e.terminating.n; i++)
                if (add_flow(r, &e, &pl, ts, e.terminating.v[i], 'f') != 0)
                    return -1;
            r->bad_flows += e.flows.more + e.terminating.more;
            return 0;
        }
        if (tr && tr->kind == K_PROCESS && strcmp(e.name, "otherData") == 0 && strcmp(e.cat, "mlprof") == 0)
            return other_data(r, s, p, n);
        {
            an_event *ev = new_event(r, &e, &pl, ts, 'i');
            if (!ev)
                return oom(r);
            ev->scope = !tr ? 'g' : pl.kind == K_PROCESS ? 'p' : 't';
        }
        return event_args(r, s, p, n, before);
    case TYPE_COUNTER:
        if (!e.has_counter) {
            r->other_types++;
            return 0;
        }
        return counter_event(r, &e, tr, ts, e.counter, e.counter_double);
    default:
        r->other_types++;
        return 0;
    }
}

/* ----------------------------------------------------------- packets */

static int packet(reader *r, const uint8_t *p, size_t n)
{
    pb b = {p, p + n};
    field f, event = {0}, desc = {0}, idata = {0}, defs = {0}, snap = {0}, psample = {0};
    uint32_t seq_id = 0, flags = 0, clock = 0;
    int has_clock = 0, has_ts = 0, cleared = 0, dropped = 0, compressed = 0, rc;
    uint64_t ts = 0;
    while ((rc = pb_next(&b, &f)) > 0) {
        switch (f.num) {
        case P_TIMESTAMP: ts = f.v, has_ts = 1; break;
        case P_CLOCK_ID: clock = (uint32_t)f.v, has_clock = 1; break;
        case P_SEQUENCE_ID: seq_id = (uint32_t)f.v; break;
        case P_SEQUENCE_FLAGS: flags = (uint32_t)f.v; break;
        case P_STATE_CLEARED: cleared |= f.v != 0; break;
        case P_PACKET_DROPPED: dropped |= f.v != 0; break;
        case P_COMPRESSED: compressed = 1; break;
        case P_TRACK_EVENT: event = f; break;
        case P_TRACK_DESCRIPTOR: desc = f; break;
        case P_INTERNED: idata = f; break;
        case P_DEFAULTS: defs = f; break;
        case P_CLOCK_SNAPSHOT: snap = f; break;
        case P_PERF_SAMPLE: psample = f; break;
        default: break;
        }
    }
    if (rc < 0)
        return -1;
    sequence *s = seq_get(r, seq_id);
    if (!s)
        return oom(r);
    if (cleared || (flags & SEQ_INCREMENTAL_STATE_CLEARED))
        seq_clear(s);
    else if (dropped)
        s->valid = 0; /* what it interned before the loss may be gone with it */
    if ((flags & SEQ_NEEDS_INCREMENTAL_STATE) && !s->valid) {
        r->no_state++;
        return 0;
    }
    if (compressed) {
        r->compressed++;
        return 0;
    }
    if ((defs.data && is_bytes(&defs) && defaults(r, s, defs.data, defs.len) != 0) ||
        (idata.data && is_bytes(&idata) && interned(r, s, idata.data, idata.len) != 0) ||
        (snap.data && is_bytes(&snap) && clock_snapshot(r, s, snap.data, snap.len) != 0) ||
        (desc.data && is_bytes(&desc) && descriptor(r, desc.data, desc.len) != 0))
        return -1;
    uint32_t id = has_clock ? clock : s->has_clock ? s->clock : CLOCK_BOOTTIME_ID;
    int known = 1;
    int64_t mono = has_ts ? packet_time(r, s, id, ts, &known) : to_monotonic(r, id, ts);
    if (psample.data && is_bytes(&psample) && has_ts) {
        if (!known) {
            r->no_clock++;
            return 0;
        }
        return perf_sample(r, s, psample.data, psample.len, mono);
    }
    if (!event.data || !is_bytes(&event))
        return 0;
    if (!known) { /* a clock of its sequence that no snapshot set */
        r->no_clock++;
        return 0;
    }
    return track_event(r, s, event.data, event.len, mono);
}

/* Makes n bytes at in->pos contiguous: in the input's buffer, or copied into
 * big when the packet is larger than it. NULL when the data ends first. */
static const uint8_t *take(reader *r, size_t n)
{
    an_input *in = r->in;
    size_t avail = in->len - in->pos;
    while (avail < n && !in->eof && !in->failed) {
        size_t before = avail;
        avail = an_input_fill(in);
        if (avail == before && in->pos == 0 && in->len == in->cap)
            break; /* the buffer is full: the packet does not fit */
    }
    if (avail >= n) {
        const uint8_t *p = (const uint8_t *)in->buf + in->pos;
        in->pos += n;
        return p;
    }
    if (in->eof || in->failed)
        return NULL;
    mlprof__sb_reset(&r->big);
    while (r->big.len < n) {
        avail = in->len - in->pos;
        if (!avail && (avail = an_input_fill(in)) == 0)
            return NULL;
        size_t k = avail < n - r->big.len ? avail : n - r->big.len;
        mlprof__sb_put(&r->big, in->buf + in->pos, k);
        in->pos += k;
        if (r->big.failed)
            return NULL;
    }
    return (const uint8_t *)r->big.data;
}

/* At least want bytes in the buffer from pos, or all that is left. */
static size_t ensure(an_input *in, size_t want)
{
    size_t avail = in->len - in->pos;
    while (avail < want && !in->eof && !in->failed)
        avail = an_input_fill(in);
    return avail;
}

static void set_note(reader *r)
{
    an_trace *t = r->t;
    mlprof__sb note;
    mlprof__sb_init(&note);
    struct { uint64_t n; const char *what; } left[] = {
        {r->no_state, "needed the incremental state of a sequence that had not cleared it (its start was cut off)"},
        {r->no_iid, "named interned strings their sequence never gave"},
        {r->no_track, "were on a track never described"},
        {r->other_types, "were track events of a type mlprof does not read"},
        {r->compressed, "were compressed packets (compressed_packets), not read"},
        {r->bad_flows, "were flow ids beyond the first on a slice"},
        {r->no_clock, "were timed on a clock of their sequence that no clock snapshot set"},
    };
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        if (left[i].n)
            mlprof__sb_printf(&note, "%s%llu packets %s", note.len ? "; " : "", (unsigned long long)left[i].n,
                              left[i].what);
    }
    if (note.len)
        snprintf(t->note, sizeof t->note, "%s: left out: %s", mlprof__shortened(t->path).s, note.data);
    mlprof__sb_free(&note);
}

int an_pftrace_read(an_trace *t, an_input *in)
{
    reader r;
    memset(&r, 0, sizeof r);
    r.t = t;
    r.in = in;
    t->format = "perfetto";
    mlprof__sb_init(&r.big);
    mlprof__sb_init(&r.raw);
    mlprof__sb_init(&r.json);
    r.value_key = an_intern(t, "value", 5);
    int rc = r.value_key ? 0 : oom(&r);
    while (rc == 0) {
        size_t avail = ensure(in, 11);
        if (in->failed) {
            rc = input_failed(&r);
            break;
        }
        if (!avail)
            break;
        const uint8_t *p = (const uint8_t *)in->buf + in->pos;
        r.packet_off = in->base + in->pos;
        unsigned long long off = (unsigned long long)r.packet_off;
        if (p[0] != (TRACE_PACKET << 3 | WT_BYTES)) {
            rc = fail(&r, 1, "not a Perfetto trace packet at byte offset %llu: byte 0x%02x where a packet (field 1, "
                      "0x0a) begins%s", off, p[0], r.packets ? "" : " (is this a protobuf trace?)");
            break;
        }
        uint64_t len;
        size_t k = varint(p + 1, avail - 1, &len);
        if (!k && in->eof && avail < 11) {
            rc = fail(&r, 1, "the file ends inside the packet at byte offset %llu (cut at byte offset %llu): read "
                      "up to the last whole packet", off, (unsigned long long)(in->base + in->len));
            break;
        }
        if (!k || len > MAX_PACKET) {
            rc = fail(&r, 1, "the packet at byte offset %llu has no valid length (damaged data)", off);
            break;
        }
        in->pos += 1 + k;
        const uint8_t *body = take(&r, (size_t)len);
        if (!body) {
            if (in->failed)
                rc = input_failed(&r);
            else if (r.big.failed)
                rc = oom(&r);
            else
                rc = fail(&r, 1, "the file ends inside the packet at byte offset %llu (%llu bytes, cut at byte "
                          "offset %llu): read up to the last whole packet",
                          off, (unsigned long long)len, (unsigned long long)(in->base + in->len));
            break;
        }
        if (packet(&r, body, (size_t)len) != 0) {
            if (!t->error[0])
                fail(&r, 1, "the packet at byte offset %llu is not a valid TracePacket (damaged data)", off);
            rc = -1;
            break;
        }
        r.packets++;
    }
    /* slices begun and never ended (the file was cut): not durations */
    for (size_t i = 0; i < r.tracks.cap; i++) {
        track *tr = r.tracks.vals[i];
        if (!tr)
            continue;
        for (size_t j = 0; j < tr->nopen; j++) {
            if (t->ev[tr->open[j]].ph == 'U')
                t->unclosed_begins++;
        }
        mlprof__free(tr->open);
        mlprof__free(tr);
    }
    for (size_t i = 0; i < r.seqs.cap; i++) {
        if (r.seqs.vals[i])
            seq_free(r.seqs.vals[i]);
    }
    if (rc == 0 && !r.track_events && !t->other_data) {
        mlprof__quoted_text path = mlprof__shortened(t->path);
        snprintf(t->error, sizeof t->error, "%s: not a trace: none of its %llu protobuf packets is a track event",
                 path.s, (unsigned long long)r.packets);
        rc = -1;
    }
    if (rc != 0 && !r.packets)
        t->partial = 0; /* nothing was read */
    set_note(&r);
    u64_free(&r.tracks);
    u64_free(&r.seqs);
    mlprof__sb_free(&r.big);
    mlprof__sb_free(&r.raw);
    mlprof__sb_free(&r.json);
    return rc;
}

/* ---------------------------------------------------------- detection */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The first packet at p (n bytes) decodes, and another or the end follows it. */
static int first_packet_decodes(const uint8_t *p, size_t n, int eof)
{
    uint64_t len;
    size_t k = varint(p + 1, n - 1, &len);
    if (!k || len > n - 1 - k)
        return 0;
    pb b = {p + 1 + k, p + 1 + k + len};
    field f;
    int rc;
    while ((rc = pb_next(&b, &f)) > 0) {
    }
    size_t next = 1 + k + (size_t)len;
    return rc == 0 && (next < n ? p[next] == 0x0a : eof);
}

int an_pftrace_detect(an_input *in, const char *path)
{
    size_t n = ensure(in, 4096);
    const uint8_t *p = (const uint8_t *)in->buf + in->pos;
    int named = ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace") ||
                ends_with(path, ".pftrace.gz") || ends_with(path, ".perfetto-trace.gz");
    if (!n)
        return 0;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t'))
        i++;
    int json_start = i < n && (p[i] == '{' || p[i] == '[');
    if (p[0] != 0x0a)
        return named && !json_start;
    return !json_start || first_packet_decodes(p, n, in->eof);
}
