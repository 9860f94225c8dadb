/*
 * perfetto.c - Perfetto's own trace format: a stream of TracePackets
 * (protobuf), which ui.perfetto.dev and trace_processor load natively, with
 * names interned so that an event takes a few bytes. The contract with the
 * reader (src/analyze) is docs of the "How mlprof writes Perfetto's
 * protobuf trace"; in short:
 *
 *  - the file is a Trace: packets one after another as field 1, so a file cut
 *    between two packets is still a trace;
 *  - sequence 1 is the stream. head() writes its first packet (incremental
 *    state cleared, defaults: timestamps on CLOCK_MONOTONIC) and a clock
 *    snapshot (MONOTONIC, BOOTTIME, REALTIME; MONOTONIC is the trace's
 *    primary clock, so trace_processor keeps our timestamps as they are);
 *    every later packet that uses interned data or the defaults says it needs
 *    the incremental state; it holds every track descriptor and everything
 *    that is not a task slice;
 *  - each thread's task slices (slice_begin, slice_end: the collector hands
 *    them in record order per thread) are a sequence of their own,
 *    SEQ_THREADS (3) and up in order of first use, started before its first
 *    event with a packet that clears its state and sets its defaults
 *    (timestamps on its clock 64, TrackEvents on the thread's track: no
 *    track_uuid per event) and a clock snapshot that sets clock 64
 *    (sequence-scoped, incremental) to CLOCK_MONOTONIC's time of that first
 *    event. Its later packets do not set SEQ_NEEDS_INCREMENTAL_STATE (2
 *    bytes a packet: a slice without arguments takes 24, not 28): that flag lets a reader skip packets
 *    whose sequence lost its start, which a file written start first cannot
 *    (trace_processor reads the state whether the flag is there or not; a
 *    file cut between packets keeps every sequence's start before its
 *    events). Every later packet's timestamp is the delta from the previous
 *    one on that clock; a time before the previous (a clock stepping back) is
 *    written absolute with the packet's own timestamp_clock_id (MONOTONIC),
 *    which leaves the incremental clock where it was. A begin carries name,
 *    category and arguments; an end, nothing but the arguments recorded after
 *    its begin and "unfinished" when the profiler closed it (readers join an
 *    end's annotations to its slice's). Nothing is re-based at a drain or a
 *    dump: the stream is one until the trace ends;
 *  - the tail of a dump is sequence 2, cleared at each tail_begin, with its
 *    own interning: it never touches the stream's sequences, so the stream
 *    goes on after a dump that is not the last. Open tasks end there (and
 *    begin there too, when their begin was not handed over yet) on the
 *    thread's track, said in each event;
 *  - names, categories and argument names are interned per sequence, in the
 *    packet that first uses them; so are string argument values given typed
 *    (InternedData.debug_annotation_string_values, string_value_iid), up to
 *    STR_VALUES_MAX per sequence so that ids and paths do not grow the table
 *    without bound (past it they are written whole);
 *  - arguments come typed from the collector for its own spans (no parsing:
 *    int_value, double_value, string_value[_iid]); the others' JSON text is
 *    read here (scan_member) into the same annotations;
 *  - a span handed whole (frames, produced spans, a tail's) is a
 *    SLICE_BEGIN (name, category, arguments as debug annotations) and a
 *    SLICE_END, one right after the other, on the thread's track or on a
 *    child track of it named after the frame (frames); instants are INSTANTs
 *    on the thread or process track; counter samples are COUNTERs on a
 *    counter track per (pid, name); a flow's start is an INSTANT with
 *    flow_ids, its end one with terminating_flow_ids;
 *  - the footer is an INSTANT "otherData" (category "mlprof") on the process
 *    track at dump_ns, whose annotations are otherData's members;
 *  - the sampled call stacks (the sampling key) follow it in the tail: a
 *    PerfSample packet per sample (pid, tid, callstack_iid; user mode) at its
 *    time, with the profile entries it needs interned in the same packet
 *    (function names, mapping paths, mappings, frames, callstacks), which
 *    the UI shows as each thread's CPU samples with their stacks.
 *
 * Field numbers (Perfetto's protos/perfetto/trace/...; tests/proto has the
 * subset the tests decode with):
 *   Trace               packet 1
 *   TracePacket         timestamp 8, trusted_packet_sequence_id 10,
 *                       sequence_flags 13, interned_data 12, track_event 11,
 *                       clock_snapshot 6, timestamp_clock_id 58,
 *                       trace_packet_defaults 59, track_descriptor 60,
 *                       first_packet_on_sequence 87
 *   TracePacketDefaults timestamp_clock_id 58, track_event_defaults 11
 *   TrackEventDefaults  track_uuid 11
 *   ClockSnapshot       clocks 1 {clock_id 1, timestamp 2, is_incremental 3},
 *                       primary_trace_clock 2
 *   TrackDescriptor     uuid 1, name 2, process 3, thread 4, parent_uuid 5,
 *                       counter 8, sibling_order_rank 12
 *   ProcessDescriptor   pid 1, process_name 6
 *   ThreadDescriptor    pid 1, tid 2, thread_name 5
 *   CounterDescriptor   categories 2
 *   TrackEvent          category_iids 3, debug_annotations 4, type 9,
 *                       name_iid 10, track_uuid 11, name 23 (not interned),
 *                       counter_value 30, double_counter_value 44,
 *                       flow_ids 47, terminating_flow_ids 48
 *   DebugAnnotation     name_iid 1, bool_value 2, uint_value 3, int_value 4,
 *                       double_value 5, string_value 6, legacy_json_value 9,
 *                       name 10 (not interned), string_value_iid 17
 *   InternedData        event_categories 1, event_names 2,
 *                       debug_annotation_names 3 (each {iid 1, name 2}),
 *                       debug_annotation_string_values 29 ({iid 1, str 2}),
 *                       function_names 5, mapping_paths 17 ({iid 1, str 2}),
 *                       frames 6, callstacks 7, mappings 19
 *   TracePacket         perf_sample 66
 *   PerfSample          pid 2, tid 3, callstack_iid 4, cpu_mode 5
 *   (profiling/profile_packet.proto; Frame, Callstack, Mapping in
 *   profiling/profile_common.proto: at put_stacks)
 *
 * Track uuids are deterministic: a hash of (kind, pid, tid[, name]) cut to
 * 28 bits (4 bytes on the wire, the size that matters: two per span), the
 * next free value in the rare case of a collision within a trace. Thread
 * tracks and the collector's own tracks (GPU streams, regions) are one kind:
 * events name both by (pid, tid), and the collector may say which one a tid
 * is only at the tail.
 *
 * Names go out as the JSON writer shows them: bytes that are not valid UTF-8
 * become U+FFFD, one per byte. Argument names and string values are the
 * JSON's, unescaped.
 *
 * Everything here runs under the control lock; the tables grow with the
 * number of distinct names and tracks, never per event.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sink.h"

/* ---- wire format */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };
#define TAG(field, wt) (((field) << 3) | (wt))

enum {
    TYPE_SLICE_BEGIN = 1,
    TYPE_SLICE_END = 2,
    TYPE_INSTANT = 3,
    TYPE_COUNTER = 4
};

enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };
enum { CLOCK_ID_REALTIME = 1, CLOCK_ID_MONOTONIC = 3, CLOCK_ID_BOOTTIME = 6 };
enum { SEQ_STREAM = 1, SEQ_TAIL = 2, SEQ_THREADS = 3 };
/* the incremental clock of a thread's sequence (sequence-scoped ids: 64..127) */
enum { CLOCK_ID_THREAD = 64 };

static inline size_t varint_size(uint64_t v)
{
    /* 7 bits a byte: 1 + (bits - 1) / 7, without a loop */
    unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);
    return (bits * 9 + 64) / 64;
}

static inline char *put_varint(char *p, uint64_t v)
{
    if (v < 0x80) {
        *p = (char)v;
        return p + 1;
    }
    while (v >= 0x80) {
        *p++ = (char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static inline char *put_fixed64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (char)(v >> (8 * i));
    return p;
}

static inline char *put_tag(char *p, unsigned field, unsigned wt) { return put_varint(p, TAG(field, wt)); }

/* Room for n more bytes: 1, or 0 (out of memory, sb->failed set). */
static inline int room(mlprof__sb *sb, size_t n)
{
    if (MLPROF_LIKELY(!sb->failed && sb->cap > sb->len && n < sb->cap - sb->len))
        return 1;
    return mlprof__sb_reserve(sb, n);
}

static inline char *end_of(mlprof__sb *sb) { return sb->data + sb->len; }

static inline void set_end(mlprof__sb *sb, char *p)
{
    sb->len = (size_t)(p - sb->data);
    sb->data[sb->len] = '\0';
}

static void put_varint_field(mlprof__sb *sb, unsigned field, uint64_t v)
{
    if (!room(sb, 20))
        return;
    char *p = put_tag(end_of(sb), field, WT_VARINT);
    set_end(sb, put_varint(p, v));
}

static void put_bytes_field(mlprof__sb *sb, unsigned field, const void *data, size_t n)
{
    if (!room(sb, 20 + n))
        return;
    char *p = put_tag(end_of(sb), field, WT_LEN);
    p = put_varint(p, n);
    if (n)
        memcpy(p, data, n);
    set_end(sb, p + n);
}

/* A nested message: its tag and one byte kept for its length, which
 * close_len writes once the message is complete (moving it when the length
 * takes more than a byte). Returns where the length goes. */
static size_t open_len(mlprof__sb *sb, unsigned field)
{
    if (!room(sb, 8))
        return 0;
    char *p = put_tag(end_of(sb), field, WT_LEN);
    set_end(sb, p + 1);
    return sb->len - 1;
}

static void close_len(mlprof__sb *sb, size_t at)
{
    if (sb->failed)
        return;
    size_t n = sb->len - at - 1;
    size_t k = varint_size(n);
    if (k > 1) {
        if (!room(sb, k - 1))
            return;
        memmove(sb->data + at + k, sb->data + at + 1, n);
        sb->len += k - 1;
        sb->data[sb->len] = '\0';
    }
    put_varint(sb->data + at, n);
}

/* ---- text: UTF-8 as the JSON writer has it, and JSON strings unescaped */

/* Length of the valid UTF-8 character at s (n bytes left), or 0. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    uint32_t cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static const char replacement[3] = {(char)0xef, (char)0xbf, (char)0xbd}; /* U+FFFD */

/* Appends s as valid UTF-8: each byte that is not part of a valid character
 * becomes U+FFFD. */
static void put_utf8(mlprof__sb *sb, const char *s, size_t n)
{
    if (!room(sb, 3 * n))
        return;
    char *p = end_of(sb);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = u[i] < 0x80 ? 1 : utf8_char(u + i, n - i);
        if (len) {
            memcpy(p, u + i, len);
            p += len;
            i += len;
        } else {
            memcpy(p, replacement, 3);
            p += 3;
            i++;
        }
    }
    set_end(sb, p);
}

static int is_ascii_clean(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] >= 0x80)
            return 0;
    }
    return 1;
}

static int hex4(const char *s, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d > 15)
            return 0;
        *v = (*v << 4) | d;
    }
    return 1;
}

static char *put_code_point(char *p, uint32_t cp)
{
    if (cp < 0x80) {
        *p++ = (char)cp;
    } else if (cp < 0x800) {
        *p++ = (char)(0xc0 | (cp >> 6));
        *p++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *p++ = (char)(0xe0 | (cp >> 12));
        *p++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *p++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *p++ = (char)(0xf0 | (cp >> 18));
        *p++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *p++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *p++ = (char)(0x80 | (cp & 0x3f));
    }
    return p;
}

/* Replaces out with the text of the JSON string body s (n bytes, between the
 * quotes): escapes decoded, a lone surrogate as U+FFFD. The result is never
 * longer than s. */
static void json_unescape(mlprof__sb *out, const char *s, size_t n)
{
    out->len = 0;
    out->failed = 0;
    if (!room(out, n))
        return;
    char *p = out->data;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            *p++ = s[i];
            continue;
        }
        char c = s[++i];
        uint32_t cp, lo;
        switch (c) {
        case 'b': *p++ = '\b'; break;
        case 'f': *p++ = '\f'; break;
        case 'n': *p++ = '\n'; break;
        case 'r': *p++ = '\r'; break;
        case 't': *p++ = '\t'; break;
        case 'u':
            if (i + 4 >= n || !hex4(s + i + 1, &cp)) {
                *p++ = c;
                break;
            }
            i += 4;
            if (cp >= 0xd800 && cp <= 0xdbff && i + 6 < n && s[i + 1] == '\\' && s[i + 2] == 'u' &&
                hex4(s + i + 3, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                i += 6;
            } else if (cp >= 0xd800 && cp <= 0xdfff) {
                cp = 0xfffd;
            }
            p = put_code_point(p, cp);
            break;
        default: *p++ = c; break; /* \" \\ \/ */
        }
    }
    set_end(out, p);
}

/* ---- tables: byte strings to numbers, keys kept in one arena */

typedef struct pf_slot {
    uint64_t hash;
    uint64_t val; /* 0: empty */
    uint32_t off, len;
} pf_slot;

typedef struct pf_table {
    pf_slot *slots;
    size_t cap, count;
    mlprof__sb keys;
} pf_table;

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t load32(const unsigned char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* Whether a and b (n bytes each) are equal: short keys compared with loads
 * that may overlap, not a call. */
static inline int same_bytes(const char *a, const char *b, size_t n)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    if (n >= 8 && n <= 16)
        return load64(x) == load64(y) && load64(x + n - 8) == load64(y + n - 8);
    if (n >= 4 && n < 8)
        return load32(x) == load32(y) && load32(x + n - 4) == load32(y + n - 4);
    if (n < 4) {
        for (size_t i = 0; i < n; i++) {
            if (x[i] != y[i])
                return 0;
        }
        return 1;
    }
    return memcmp(a, b, n) == 0;
}

/* Keys are short (names, argument names): the tail is read with loads that
 * may overlap rather than byte by byte. */
static uint64_t hash_bytes(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n > 8) {
        h = (h ^ load64(p)) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w;
    if (n == 8)
        w = load64(p);
    else if (n >= 4)
        w = load32(p) | (load32(p + n - 4) << 32);
    else if (n)
        w = (uint64_t)p[0] | ((uint64_t)p[n / 2] << 8) | ((uint64_t)p[n - 1] << 16);
    else
        w = 0;
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static pf_slot *table_find(const pf_table *t, const char *key, size_t n, uint64_t h)
{
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        pf_slot *s = &t->slots[i];
        if (!s->val || (s->hash == h && s->len == n && same_bytes(t->keys.data + s->off, key, n)))
            return s;
    }
}

static int table_grow(pf_table *t)
{
    size_t cap = t->cap ? 2 * t->cap : 64;
    pf_slot *slots = mlprof__calloc(cap, sizeof *slots);
    if (!slots)
        return 0;
    pf_table old = *t;
    t->slots = slots;
    t->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].val)
            *table_find(t, t->keys.data + old.slots[i].off, old.slots[i].len, old.slots[i].hash) = old.slots[i];
    }
    mlprof__free(old.slots);
    return 1;
}

/* The slot of key: its value, or 0 and a slot where table_add puts it; NULL
 * when out of memory. */
static pf_slot *table_slot(pf_table *t, const char *key, size_t n, uint64_t h)
{
    if ((t->count + 1) * 4 > t->cap * 3 && !table_grow(t))
        return NULL;
    return table_find(t, key, n, h);
}

static int table_add(pf_table *t, pf_slot *s, const char *key, size_t n, uint64_t h, uint64_t val)
{
    if (n > UINT32_MAX || t->keys.len > UINT32_MAX - n || !room(&t->keys, n))
        return 0;
    s->off = (uint32_t)t->keys.len;
    memcpy(t->keys.data + t->keys.len, key, n);
    t->keys.len += n;
    s->len = (uint32_t)n;
    s->hash = h;
    s->val = val;
    t->count++;
    return 1;
}

static void table_clear(pf_table *t)
{
    if (t->slots)
        memset(t->slots, 0, t->cap * sizeof *t->slots);
    t->count = 0;
    t->keys.len = 0;
    t->keys.failed = 0;
}

static void table_free(pf_table *t)
{
    mlprof__free(t->slots);
    mlprof__sb_free(&t->keys);
    memset(t, 0, sizeof *t);
}

/* ---- a sequence's interning */

enum { IN_NAME = 0, IN_CAT = 1, IN_ARG = 2, IN_STR = 3, IN_KINDS = 4 };
/* the InternedData field of each kind */
static const unsigned interned_field[IN_KINDS] = {2, 1, 3, 29};
/* string values interned per sequence at most: past it (values that are
 * rarely the same, ids, paths) they are written whole, and the table stays
 * bounded whatever the run */
#define STR_VALUES_MAX 4096

#define PCACHE 64
typedef struct pf_pcache {
    const char *p; /* the caller's pointer last seen for this entry */
    size_t len;
    uint32_t off;  /* the key in the table's arena */
    uint64_t iid;
} pf_pcache;

/* the argument name last seen at a position of the arguments */
#define RECENT 16
typedef struct pf_recent {
    uint64_t iid;
    size_t len;
    uint32_t off;
} pf_recent;

typedef struct pf_seq {
    uint32_t id;
    /* a thread's sequence: started (its first packets written), its
     * timestamps deltas on the incremental clock from last_ts */
    int thread, started;
    uint64_t last_ts;
    uint64_t uuid;        /* the thread's track: the sequence's default */
    pf_table in[IN_KINDS];
    /* names and categories come again and again from the same pointers (a
     * handle's name, a domain's): a look-up by pointer, checked against the
     * interned bytes, skips hashing them */
    pf_pcache cache[IN_KINDS][PCACHE];
    pf_recent recent[RECENT];
    /* the string values last seen at a position of the typed arguments (a
     * few each: a dtype cycles through a handful), tried before hashing */
    pf_recent recent_str[RECENT][4];
    unsigned char recent_next[RECENT];
} pf_seq;

static void seq_clear(pf_seq *q)
{
    for (int k = 0; k < IN_KINDS; k++)
        table_clear(&q->in[k]);
    memset(q->cache, 0, sizeof q->cache);
    memset(q->recent, 0, sizeof q->recent);
    memset(q->recent_str, 0, sizeof q->recent_str);
    memset(q->recent_next, 0, sizeof q->recent_next);
}

/* ---- tracks */

enum { TK_PROCESS = 0, TK_THREAD = 1, TK_FRAME = 2, TK_COUNTER = 3 };

typedef struct pf_track {
    uint64_t uuid;
    uint32_t parent;      /* index + 1 of the parent track, or 0 */
    int kind;
    pid_t pid, tid;
    char *name;           /* frames and counters: their name; else the last said, or NULL */
    char *domain;         /* counters: the first sample's domain */
    int ext;              /* a thread track that is one of the collector's own (a GPU stream) */
    int has_sort;
    uint32_t sort_index;
    int described;        /* in sequence 1 */
    unsigned tail_gen;    /* the tail it was described in */
    uint32_t tseq;        /* thread tracks: index + 1 of its sequence in tseqs, or 0 */
} pf_track;

typedef struct pf_state {
    pf_seq seq[2];        /* the stream, the tail */
    pf_seq **tseqs;       /* the threads' task slices, sequences SEQ_THREADS + seq_base + index */
    size_t ntseqs, tseqs_cap;
    uint32_t seq_base;    /* thread sequences used before bytes were lost: never used again */
    /* the thread sequence last used, started, its track described: a
     * drain hands one thread's slices after another */
    pf_seq *cur_q;
    pid_t cur_pid, cur_tid;
    pf_table track_keys;  /* (kind, pid, tid[, name]) -> index + 1 */
    pf_table uuids;       /* uuids taken -> index + 1 */
    pf_track *tracks;
    size_t ntracks, tracks_cap;
    uint32_t last_thread; /* index + 1 of the last thread track looked up */
    unsigned tail_gen;
    mlprof__sb ev;        /* the TrackEvent being written */
    mlprof__sb interned;  /* its packet's new InternedData entries */
    mlprof__sb tmp;       /* unescaped text */
    mlprof__sb name_tmp;
} pf_state;

static pf_seq *seq_of(pf_state *st, const mlprof__sink_out *out)
{
    return &st->seq[out->tail ? 1 : 0];
}

/* ---- interning */

/* Records a new entry {iid, name} of kind in the packet's InternedData. */
static void note_interned(pf_state *st, int kind, uint64_t iid, const char *s, size_t n)
{
    size_t at = open_len(&st->interned, interned_field[kind]);
    put_varint_field(&st->interned, 1, iid);
    if (is_ascii_clean(s, n)) {
        put_bytes_field(&st->interned, 2, s, n);
    } else {
        size_t at2 = open_len(&st->interned, 2);
        put_utf8(&st->interned, s, n);
        close_len(&st->interned, at2);
    }
    close_len(&st->interned, at);
}

/* The iid of s (n bytes) in q's index of kind, interned now if new, and
 * where its bytes are kept (*off, in the index's arena); 0 when out of
 * memory (the caller then writes the string itself). */
static uint64_t intern_at(pf_state *st, pf_seq *q, int kind, const char *s, size_t n, uint32_t *off)
{
    pf_pcache *c = &q->cache[kind][((uintptr_t)s >> 3) & (PCACHE - 1)];
    pf_table *t = &q->in[kind];
    if (c->p == s && c->len == n && c->iid && same_bytes(t->keys.data + c->off, s, n)) {
        *off = c->off;
        return c->iid;
    }
    uint64_t h = hash_bytes(s, n);
    pf_slot *slot = table_slot(t, s, n, h);
    if (!slot)
        return 0;
    if (!slot->val) {
        if (kind == IN_STR && t->count >= STR_VALUES_MAX)
            return 0;
        if (!table_add(t, slot, s, n, h, t->count + 1))
            return 0;
        note_interned(st, kind, slot->val, s, n);
    }
    c->p = s;
    c->len = n;
    c->off = slot->off;
    c->iid = slot->val;
    *off = slot->off;
    return slot->val;
}

static uint64_t intern(pf_state *st, pf_seq *q, int kind, const char *s, size_t n)
{
    uint32_t off;
    return intern_at(st, q, kind, s, n, &off);
}

/* Writes a name (TrackEvent.name_iid 10, or name 23 when it cannot be
 * interned) into the event. */
static void put_event_name(pf_state *st, pf_seq *q, const char *s, size_t n)
{
    uint64_t iid = intern(st, q, IN_NAME, s, n);
    if (iid) {
        put_varint_field(&st->ev, 10, iid);
        return;
    }
    size_t at = open_len(&st->ev, 23);
    put_utf8(&st->ev, s, n);
    close_len(&st->ev, at);
}

/* The iid of a category: a domain's name, a string that lives as long as
 * the run, found by its address before its length is counted; 0 when it
 * cannot be interned. */
static uint64_t category_iid(pf_state *st, pf_seq *q, const char *domain)
{
    pf_pcache *c = &q->cache[IN_CAT][((uintptr_t)domain >> 3) & (PCACHE - 1)];
    if (c->p == domain && c->iid && same_bytes(q->in[IN_CAT].keys.data + c->off, domain, c->len) &&
        domain[c->len] == '\0')
        return c->iid;
    return intern(st, q, IN_CAT, domain, strlen(domain));
}

/* The category (TrackEvent.category_iids 3, or categories 22 when it cannot
 * be interned). */
static void put_category(pf_state *st, pf_seq *q, const char *domain)
{
    if (!domain)
        return;
    pf_pcache *c = &q->cache[IN_CAT][((uintptr_t)domain >> 3) & (PCACHE - 1)];
    uint64_t iid = 0;
    size_t n = 0;
    if (c->p == domain && c->iid && same_bytes(q->in[IN_CAT].keys.data + c->off, domain, c->len) &&
        domain[c->len] == '\0') {
        iid = c->iid;
    } else {
        n = strlen(domain);
        iid = intern(st, q, IN_CAT, domain, n);
    }
    if (iid) {
        put_varint_field(&st->ev, 3, iid);
        return;
    }
    size_t at = open_len(&st->ev, 22);
    put_utf8(&st->ev, domain, n);
    close_len(&st->ev, at);
}

/* ---- arguments as debug annotations */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* One member of the arguments' JSON text, read in one pass. */
enum { V_STRING, V_NESTED, V_INT, V_WORD };
typedef struct pf_member {
    const char *key;   /* without its quotes, still escaped when key_esc */
    size_t key_len;
    const char *val;   /* a string: its body without the quotes; else the text */
    size_t val_len;
    int kind;          /* V_STRING, V_NESTED (object, array), V_INT (an integer of up to 18
                        * digits: ival) or V_WORD (another number, true, false, null) */
    int key_esc, val_esc;
    int64_t ival;
} pf_member;

/* The index of the quote that closes the JSON string whose body starts at
 * s[i], or 0 if it does not close before n; *esc set when it holds an escape. */
static size_t string_close(const char *s, size_t n, size_t i, int *esc)
{
    for (; i < n; i++) {
        if (s[i] == '"')
            return i;
        if (s[i] == '\\') {
            *esc = 1;
            i++;
        }
    }
    return 0;
}

/* The next member of args at *pos (the text mlprof__args_next walks, with
 * the same rules): 1 and *pos moved past it, or 0 at the end. */
static int scan_member(const char *s, size_t n, size_t *pos, pf_member *m)
{
    size_t i = *pos;
    while (i < n && (s[i] == ',' || s[i] == ' ' || s[i] == '\n'))
        i++;
    if (i >= n || s[i] != '"')
        return 0;
    m->key_esc = m->val_esc = 0;
    size_t q = string_close(s, n, i + 1, &m->key_esc);
    if (!q || q + 2 >= n || s[q + 1] != ':')
        return 0;
    m->key = s + i + 1;
    m->key_len = q - i - 1;
    i = q + 2;
    char c = s[i];
    if (c == '"') {
        q = string_close(s, n, i + 1, &m->val_esc);
        if (!q)
            return 0;
        m->kind = V_STRING;
        m->val = s + i + 1;
        m->val_len = q - i - 1;
        *pos = q + 1;
        return 1;
    }
    size_t j = i;
    if (c == '{' || c == '[') {
        int depth = 0, esc;
        for (; j < n; j++) {
            char d = s[j];
            if (d == '"') {
                j = string_close(s, n, j + 1, &esc);
                if (!j)
                    return 0;
            } else if (d == '{' || d == '[') {
                depth++;
            } else if ((d == '}' || d == ']') && --depth == 0) {
                break;
            }
        }
        if (j >= n)
            return 0;
        m->kind = V_NESTED;
        m->val = s + i;
        m->val_len = j + 1 - i;
        *pos = j + 1;
        return 1;
    }
    /* most values are integers: read while scanned */
    size_t d = j + (c == '-');
    uint64_t x = 0;
    for (j = d; j < n && is_digit(s[j]); j++)
        x = x * 10 + (uint64_t)(s[j] - '0');
    if (j > d && j - d <= 18 && (j == n || s[j] == ',' || s[j] == '}' || s[j] == ']')) {
        m->kind = V_INT;
        m->ival = c == '-' ? -(int64_t)x : (int64_t)x;
        m->val = s + i;
        m->val_len = j - i;
        *pos = j;
        return 1;
    }
    while (j < n && s[j] != ',' && s[j] != '}' && s[j] != ']')
        j++;
    if (j == i)
        return 0;
    m->kind = V_WORD;
    m->val = s + i;
    m->val_len = j - i;
    *pos = j;
    return 1;
}

static char *put_len_bytes(char *p, unsigned field, const char *data, size_t n)
{
    p = put_tag(p, field, WT_LEN);
    p = put_varint(p, n);
    if (n)
        memcpy(p, data, n);
    return p + n;
}

/* Ends a debug annotation begun at at with two bytes kept for its tag and
 * length (one byte of length, the usual case; moved up when it needs more);
 * returns the end of the annotation. */
static char *close_annotation(char *at, char *p)
{
    size_t n = (size_t)(p - at - 2);
    at[0] = (char)TAG(4, WT_LEN);
    if (n < 0x80) {
        at[1] = (char)n;
        return p;
    }
    size_t k = varint_size(n);
    memmove(at + 1 + k, at + 2, n);
    put_varint(at + 1, n);
    return p + k - 1;
}

/* A number, true, false or null as the annotation's value (at most 11
 * bytes, or the text's length and 6): int_value when it is an integer that
 * int64 holds, uint_value when only uint64 does, else double_value; what is
 * not a number (null) is kept as JSON text. */
static char *put_word(char *p, const char *v, size_t n)
{
    size_t i = v[0] == '-' ? 1 : 0, j = i;
    uint64_t x = 0;
    while (j < n && j - i < 18 && is_digit(v[j]))
        x = x * 10 + (uint64_t)(v[j++] - '0');
    if (j == n && j > i) {
        p = put_tag(p, 4, WT_VARINT);
        return put_varint(p, i ? (uint64_t)-(int64_t)x : x);
    }
    if (n == 4 && memcmp(v, "true", 4) == 0)
        return put_varint(put_tag(p, 2, WT_VARINT), 1);
    if (n == 5 && memcmp(v, "false", 5) == 0)
        return put_varint(put_tag(p, 2, WT_VARINT), 0);
    char buf[64];
    if (n >= sizeof buf || !(i < n && is_digit(v[i])))
        return put_len_bytes(p, 9, v, n);
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *end;
    int integer = 1;
    for (size_t k = i; k < n; k++)
        integer &= is_digit(v[k]);
    errno = 0;
    if (integer && i) {
        long long y = strtoll(buf, &end, 10);
        if (errno == 0 && *end == '\0')
            return put_varint(put_tag(p, 4, WT_VARINT), (uint64_t)y);
    } else if (integer) {
        unsigned long long y = strtoull(buf, &end, 10);
        if (errno == 0 && *end == '\0')
            return put_varint(put_tag(p, y > INT64_MAX ? 3 : 4, WT_VARINT), y);
    }
    double d = strtod(buf, &end);
    if (*end != '\0')
        return put_len_bytes(p, 9, v, n);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return put_fixed64(put_tag(p, 5, WT_I64), bits);
}

/* The iid of an argument's name (JSON-escaped when esc). Arguments come in
 * the same order event after event: the name last seen at this position is
 * tried first, without hashing. 0 when it cannot be interned (*name, *n
 * then say what to write in its place). */
static uint64_t arg_name_iid(pf_state *st, pf_seq *q, unsigned index, const char **name, size_t *n, int esc)
{
    if (esc) {
        json_unescape(&st->name_tmp, *name, *n);
        *name = st->name_tmp.data ? st->name_tmp.data : "";
        *n = st->name_tmp.len;
    }
    pf_recent *r = &q->recent[index & (RECENT - 1)];
    const pf_table *t = &q->in[IN_ARG];
    if (r->iid && r->len == *n && same_bytes(t->keys.data + r->off, *name, *n))
        return r->iid;
    uint32_t off;
    uint64_t iid = intern_at(st, q, IN_ARG, *name, *n, &off);
    if (iid) {
        r->iid = iid;
        r->len = *n;
        r->off = off;
    }
    return iid;
}

/* Each member of args (JSON "key":value, comma-separated) as one
 * TrackEvent.debug_annotations, written in one pass with room made once: a
 * member of L bytes of text takes at most 37 + L bytes here, and one takes
 * at least 4 bytes of text. */
static void put_args(pf_state *st, pf_seq *q, const char *args, size_t len)
{
    mlprof__sb *ev = &st->ev;
    if (!len || !room(ev, 32 + 16 * len))
        return;
    char *p = end_of(ev);
    size_t pos = 0;
    pf_member m;
    for (unsigned index = 0; scan_member(args, len, &pos, &m); index++) {
        char *at = p;
        p += 2; /* the tag, and a byte for the length */
        const char *key = m.key;
        size_t key_len = m.key_len;
        uint64_t iid = arg_name_iid(st, q, index, &key, &key_len, m.key_esc);
        if (iid)
            p = put_varint(put_tag(p, 1, WT_VARINT), iid);
        else
            p = put_len_bytes(p, 10, key, key_len);
        if (m.kind == V_STRING && !m.val_esc) {
            p = put_len_bytes(p, 6, m.val, m.val_len);
        } else if (m.kind == V_STRING) {
            json_unescape(&st->tmp, m.val, m.val_len);
            p = put_len_bytes(p, 6, st->tmp.data, st->tmp.len);
        } else if (m.kind == V_NESTED) {
            p = put_len_bytes(p, 9, m.val, m.val_len);
        } else if (m.kind == V_INT) {
            p = put_varint(put_tag(p, 4, WT_VARINT), (uint64_t)m.ival);
        } else {
            p = put_word(p, m.val, m.val_len);
        }
        p = close_annotation(at, p);
    }
    set_end(ev, p);
}

/* s (*n bytes) as valid UTF-8, as the JSON writer has it: s itself when it
 * is ASCII, else a copy in tmp with each invalid byte as U+FFFD. */
static const char *clean_text(mlprof__sb *tmp, const char *s, size_t *n)
{
    if (is_ascii_clean(s, *n))
        return s;
    tmp->len = 0;
    tmp->failed = 0;
    put_utf8(tmp, s, *n);
    if (tmp->failed || !tmp->data) {
        *n = 0;
        return "";
    }
    *n = tmp->len;
    return tmp->data;
}

/* The iid of string value s (n bytes) of the argument at position index,
 * interned now if new (as clean UTF-8); 0 when it cannot be (out of memory,
 * or the sequence's table is full). */
static uint64_t str_iid(pf_state *st, pf_seq *q, unsigned index, const char *s, size_t n)
{
    pf_recent *r = q->recent_str[index & (RECENT - 1)];
    const char *keys = q->in[IN_STR].keys.data;
    for (int k = 0; k < 4; k++)
        if (r[k].iid && r[k].len == n && same_bytes(keys + r[k].off, s, n))
            return r[k].iid;
    size_t cn = n;
    const char *c = clean_text(&st->tmp, s, &cn);
    uint32_t off;
    uint64_t iid = intern_at(st, q, IN_STR, c, cn, &off);
    if (iid && c == s) { /* remembered only when the bytes are the interned ones */
        pf_recent *e = &r[q->recent_next[index & (RECENT - 1)]++ & 3];
        e->iid = iid;
        e->len = n;
        e->off = off;
    }
    return iid;
}

/* The collector's typed arguments as TrackEvent.debug_annotations, without
 * parsing: integers as int_value, doubles as double_value, strings interned
 * in q (string_value_iid, up to STR_VALUES_MAX of them) or whole. */
static void put_targs(pf_state *st, pf_seq *q, const mlprof__arg_out *a, size_t n)
{
    mlprof__sb *ev = &st->ev;
    size_t need = 0;
    for (size_t i = 0; i < n; i++)
        need += 40 + 3 * a[i].key_len + (a[i].type == MLPROF__ARG_STRING ? 3 * a[i].s_len : 0);
    if (!n || !room(ev, need))
        return;
    char *p = end_of(ev);
    for (size_t i = 0; i < n; i++) {
        char *at = p;
        p += 2; /* the tag, and a byte for the length */
        size_t klen = a[i].key_len;
        const char *key = a[i].key;
        /* the name last seen here, byte for byte: interned text is clean UTF-8, so is this */
        pf_recent *r = &q->recent[i & (RECENT - 1)];
        uint64_t iid = 0;
        if (r->iid && r->len == klen && same_bytes(q->in[IN_ARG].keys.data + r->off, key, klen)) {
            iid = r->iid;
        } else {
            key = clean_text(&st->name_tmp, key, &klen);
            iid = arg_name_iid(st, q, (unsigned)i, &key, &klen, 0);
        }
        if (iid)
            p = put_varint(put_tag(p, 1, WT_VARINT), iid);
        else
            p = put_len_bytes(p, 10, key, klen);
        if (a[i].type == MLPROF__ARG_INT) {
            p = put_varint(put_tag(p, 4, WT_VARINT), (uint64_t)a[i].i);
        } else if (a[i].type == MLPROF__ARG_DOUBLE) {
            uint64_t bits;
            memcpy(&bits, &a[i].d, sizeof bits);
            p = put_fixed64(put_tag(p, 5, WT_I64), bits);
        } else {
            size_t vlen = a[i].s_len;
            uint64_t siid = str_iid(st, q, (unsigned)i, a[i].s, vlen);
            const char *v = a[i].s;
            if (!siid)
                v = clean_text(&st->tmp, v, &vlen);
            if (siid)
                p = put_varint(put_tag(p, 17, WT_VARINT), siid);
            else
                p = put_len_bytes(p, 6, v, vlen);
        }
        p = close_annotation(at, p);
    }
    set_end(ev, p);
}

/* A span's arguments: typed when the collector gave them so, else its text. */
static void put_span_args(pf_state *st, pf_seq *q, const mlprof__span_out *s)
{
    if (s->targs)
        put_targs(st, q, s->targs, s->ntargs);
    else
        put_args(st, q, s->args, s->args_len);
}

static void put_annotation_name(pf_state *st, pf_seq *q, const char *key, size_t n)
{
    uint64_t iid = intern(st, q, IN_ARG, key, n);
    if (iid)
        put_varint_field(&st->ev, 1, iid);
    else
        put_bytes_field(&st->ev, 10, key, n);
}

static void put_bool_annotation(pf_state *st, pf_seq *q, const char *name, int value)
{
    size_t at = open_len(&st->ev, 4);
    put_annotation_name(st, q, name, strlen(name));
    put_varint_field(&st->ev, 2, (uint64_t)value);
    close_len(&st->ev, at);
}

/* ---- packets */


static void write_event_packet(mlprof__sb *sb, const pf_seq *q, uint64_t ts, const mlprof__sb *in,
                               const mlprof__sb *ev);

/* One TracePacket of q's sequence at ts, with the InternedData gathered in
 * st->interned and the TrackEvent in ev (both then emptied). */
static void put_event_packet(pf_state *st, mlprof__sb *sb, const pf_seq *q, uint64_t ts, mlprof__sb *ev)
{
    mlprof__sb *in = &st->interned;
    if (ev->failed || in->failed)
        sb->failed = 1; /* out of memory: the file says so (truncated), not a half packet */
    else
        write_event_packet(sb, q, ts, in, ev);
    ev->len = in->len = 0;
    ev->failed = in->failed = 0;
}

/* Bytes of a packet's head after its tag and length: timestamp, sequence id
 * and the flag saying it needs the sequence's interned state. */
static size_t packet_head_size(const pf_seq *q, uint64_t ts)
{
    return 1 + varint_size(ts) + 1 + varint_size(q->id) + 1 + 1;
}

/* Writes a packet's tag and length (body bytes), then the head above. */
static char *put_packet_head(char *p, size_t body, const pf_seq *q, uint64_t ts)
{
    p = put_tag(p, 1, WT_LEN);
    p = put_varint(p, body);
    p = put_tag(p, 8, WT_VARINT);
    p = put_varint(p, ts);
    p = put_tag(p, 10, WT_VARINT);
    p = put_varint(p, q->id);
    p = put_tag(p, 13, WT_VARINT);
    *p++ = SEQ_NEEDS_INCREMENTAL_STATE;
    return p;
}

static void write_event_packet(mlprof__sb *sb, const pf_seq *q, uint64_t ts, const mlprof__sb *in,
                               const mlprof__sb *ev)
{
    size_t body = packet_head_size(q, ts) + 1 + varint_size(ev->len) + ev->len;
    if (in->len)
        body += 1 + varint_size(in->len) + in->len;
    if (!room(sb, 1 + 10 + body))
        return;
    char *p = put_packet_head(end_of(sb), body, q, ts);
    if (in->len) {
        p = put_tag(p, 12, WT_LEN);
        p = put_varint(p, in->len);
        memcpy(p, in->data, in->len);
        p += in->len;
    }
    p = put_tag(p, 11, WT_LEN);
    p = put_varint(p, ev->len);
    memcpy(p, ev->data, ev->len);
    p += ev->len;
    set_end(sb, p);
}

/* A TrackEvent of type on the track uuid, without name: a slice's end. */
static void put_bare_event(mlprof__sb *sb, const pf_seq *q, uint64_t ts, int type, uint64_t uuid)
{
    size_t ev = 2 + 1 + varint_size(uuid);
    size_t body = packet_head_size(q, ts) + 1 + varint_size(ev) + ev;
    if (!room(sb, 1 + 10 + body))
        return;
    char *p = put_packet_head(end_of(sb), body, q, ts);
    p = put_tag(p, 11, WT_LEN);
    p = put_varint(p, ev);
    p = put_tag(p, 9, WT_VARINT);
    *p++ = (char)type;
    p = put_tag(p, 11, WT_VARINT);
    p = put_varint(p, uuid);
    set_end(sb, p);
}

/* A packet of a thread's sequence at ts: the timestamp a delta on its
 * incremental clock from the sequence's last, or, for a time before that
 * (a clock that stepped back), absolute on CLOCK_MONOTONIC (which leaves
 * the incremental clock where it was); then the sequence (no flags: see
 * the head of this file), the InternedData in `in` and the TrackEvent in ev
 * (no track: the sequence's default). */
static void write_thread_packet(mlprof__sb *sb, pf_seq *q, uint64_t ts, const mlprof__sb *in,
                                const mlprof__sb *ev)
{
    int absolute = ts < q->last_ts;
    uint64_t v = absolute ? ts : ts - q->last_ts;
    size_t body = 1 + varint_size(v) + (absolute ? 3 : 0) + 1 + varint_size(q->id) + 1 + varint_size(ev->len) +
                  ev->len;
    if (in->len)
        body += 1 + varint_size(in->len) + in->len;
    if (!room(sb, 1 + 10 + body))
        return;
    char *p = put_tag(end_of(sb), 1, WT_LEN);
    p = put_varint(p, body);
    p = put_tag(p, 8, WT_VARINT);
    p = put_varint(p, v);
    if (absolute) {
        p = put_tag(p, 58, WT_VARINT); /* timestamp_clock_id: this packet's own */
        *p++ = CLOCK_ID_MONOTONIC;
    } else {
        q->last_ts = ts;
    }
    p = put_tag(p, 10, WT_VARINT);
    p = put_varint(p, q->id);
    if (in->len) {
        p = put_tag(p, 12, WT_LEN);
        p = put_varint(p, in->len);
        memcpy(p, in->data, in->len);
        p += in->len;
    }
    p = put_tag(p, 11, WT_LEN);
    p = put_varint(p, ev->len);
    memcpy(p, ev->data, ev->len);
    p += ev->len;
    set_end(sb, p);
}

/* The TrackEvent in st->ev as a packet of thread sequence q (both buffers
 * then emptied). */
static void put_thread_event(pf_state *st, mlprof__sb *sb, pf_seq *q, uint64_t ts)
{
    mlprof__sb *in = &st->interned, *ev = &st->ev;
    if (ev->failed || in->failed)
        sb->failed = 1;
    else
        write_thread_packet(sb, q, ts, in, ev);
    ev->len = in->len = 0;
    ev->failed = in->failed = 0;
}

/* A slice's end on a thread's sequence, without arguments: the commonest
 * packet, written at once (8 bytes when the delta takes 2). */
static void put_thread_end(mlprof__sb *sb, pf_seq *q, uint64_t ts)
{
    static const mlprof__sb none;
    if (ts < q->last_ts || !room(sb, 32)) {
        char end[2] = {(char)TAG(9, WT_VARINT), TYPE_SLICE_END};
        mlprof__sb ev = {.data = end, .len = 2, .cap = 2};
        write_thread_packet(sb, q, ts, &none, &ev);
        return;
    }
    uint64_t v = ts - q->last_ts;
    q->last_ts = ts;
    size_t body = 1 + varint_size(v) + 1 + varint_size(q->id) + 2 + 2;
    char *p = put_tag(end_of(sb), 1, WT_LEN);
    p = put_varint(p, body);
    p = put_tag(p, 8, WT_VARINT);
    p = put_varint(p, v);
    p = put_tag(p, 10, WT_VARINT);
    p = put_varint(p, q->id);
    p = put_tag(p, 11, WT_LEN);
    *p++ = 2;
    p = put_tag(p, 9, WT_VARINT);
    *p++ = TYPE_SLICE_END;
    set_end(sb, p);
}

/* The first packet of a sequence (or, first 0, the one that starts its
 * state again after packets were lost): its incremental state cleared, and
 * the defaults (timestamps on CLOCK_MONOTONIC). */
static void put_sequence_start(mlprof__sb *sb, uint32_t id, int first)
{
    size_t at = open_len(sb, 1);
    put_varint_field(sb, 10, id);
    put_varint_field(sb, 13, SEQ_INCREMENTAL_STATE_CLEARED);
    if (first)
        put_varint_field(sb, 87, 1); /* first_packet_on_sequence */
    size_t d = open_len(sb, 59);
    put_varint_field(sb, 58, CLOCK_ID_MONOTONIC);
    close_len(sb, d);
    close_len(sb, at);
}

static uint64_t read_clock(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_clock(mlprof__sb *sb, unsigned id, uint64_t ns)
{
    size_t at = open_len(sb, 1);
    put_varint_field(sb, 1, id);
    put_varint_field(sb, 2, ns);
    close_len(sb, at);
}

/* Declares the trace's clock: MONOTONIC (our timestamps) and BOOTTIME read
 * together (BOOTTIME between two MONOTONIC readings, their middle kept),
 * REALTIME beside them; MONOTONIC is the primary clock, so readers keep the
 * timestamps as they are. */
static void put_clock_snapshot(mlprof__sb *sb, uint32_t seq)
{
    uint64_t m0 = read_clock(CLOCK_MONOTONIC);
    uint64_t boot = read_clock(CLOCK_BOOTTIME);
    uint64_t m1 = read_clock(CLOCK_MONOTONIC);
    uint64_t real = read_clock(CLOCK_REALTIME);
    size_t at = open_len(sb, 1);
    put_varint_field(sb, 10, seq);
    size_t cs = open_len(sb, 6);
    put_clock(sb, CLOCK_ID_MONOTONIC, m0 + (m1 - m0) / 2);
    put_clock(sb, CLOCK_ID_BOOTTIME, boot);
    put_clock(sb, CLOCK_ID_REALTIME, real);
    put_varint_field(sb, 2, CLOCK_ID_MONOTONIC); /* primary_trace_clock */
    close_len(sb, cs);
    close_len(sb, at);
}

/* The first packets of a thread's sequence, before its first event at ts:
 * its state cleared with the defaults (timestamps on its incremental clock,
 * track events on the thread's track), then a clock snapshot that sets the
 * incremental clock to ts, when CLOCK_MONOTONIC reads ts. */
static void put_thread_sequence_start(mlprof__sb *sb, pf_seq *q, uint64_t ts)
{
    size_t at = open_len(sb, 1);
    put_varint_field(sb, 10, q->id);
    put_varint_field(sb, 13, SEQ_INCREMENTAL_STATE_CLEARED);
    put_varint_field(sb, 87, 1); /* first_packet_on_sequence */
    size_t d = open_len(sb, 59);
    put_varint_field(sb, 58, CLOCK_ID_THREAD);
    size_t e = open_len(sb, 11); /* track_event_defaults */
    put_varint_field(sb, 11, q->uuid);
    close_len(sb, e);
    close_len(sb, d);
    close_len(sb, at);
    at = open_len(sb, 1);
    put_varint_field(sb, 10, q->id);
    size_t cs = open_len(sb, 6);
    put_clock(sb, CLOCK_ID_MONOTONIC, ts);
    size_t c = open_len(sb, 1);
    put_varint_field(sb, 1, CLOCK_ID_THREAD);
    put_varint_field(sb, 2, ts);
    put_varint_field(sb, 3, 1); /* is_incremental */
    close_len(sb, c);
    close_len(sb, cs);
    close_len(sb, at);
    q->last_ts = ts;
}

/* ---- tracks */

static void put_text_field(mlprof__sb *sb, unsigned field, const char *s)
{
    size_t n = strlen(s);
    if (is_ascii_clean(s, n)) {
        put_bytes_field(sb, field, s, n);
        return;
    }
    size_t at = open_len(sb, field);
    put_utf8(sb, s, n);
    close_len(sb, at);
}

static void put_descriptor(pf_state *st, mlprof__sb *sb, const pf_seq *q, const pf_track *t)
{
    size_t at = open_len(sb, 1);
    put_varint_field(sb, 10, q->id);
    size_t d = open_len(sb, 60);
    put_varint_field(sb, 1, t->uuid);
    if (t->parent)
        put_varint_field(sb, 5, st->tracks[t->parent - 1].uuid);
    if (t->name && t->kind != TK_PROCESS && (t->kind != TK_THREAD || t->ext))
        put_text_field(sb, 2, t->name);
    if (t->kind == TK_PROCESS) {
        size_t p = open_len(sb, 3);
        put_varint_field(sb, 1, (uint64_t)(int64_t)t->pid);
        if (t->name)
            put_text_field(sb, 6, t->name);
        close_len(sb, p);
    } else if (t->kind == TK_THREAD) {
        size_t p = open_len(sb, 4);
        put_varint_field(sb, 1, (uint64_t)(int64_t)t->pid);
        put_varint_field(sb, 2, (uint64_t)(int64_t)t->tid);
        if (t->name)
            put_text_field(sb, 5, t->name);
        close_len(sb, p);
    } else if (t->kind == TK_COUNTER) {
        size_t p = open_len(sb, 8);
        if (t->domain)
            put_text_field(sb, 2, t->domain);
        close_len(sb, p);
    }
    if (t->has_sort)
        put_varint_field(sb, 12, (uint64_t)(int64_t)(int32_t)t->sort_index);
    close_len(sb, d);
    close_len(sb, at);
}

/* Makes sure track i (index + 1) is described in q's sequence before an
 * event uses it: in the stream once, in each tail once (without marking the
 * stream's state). */
static void describe(pf_state *st, mlprof__sb *sb, const pf_seq *q, uint32_t i)
{
    pf_track *t = &st->tracks[i - 1];
    int tail = q->id == SEQ_TAIL;
    if (tail ? t->tail_gen == st->tail_gen : t->described)
        return;
    if (t->parent)
        describe(st, sb, q, t->parent);
    t = &st->tracks[i - 1];
    put_descriptor(st, sb, q, t);
    if (tail)
        t->tail_gen = st->tail_gen;
    else
        t->described = 1;
}

static uint64_t pick_uuid(pf_state *st, uint64_t h, uint32_t index1)
{
    uint64_t u = (h >> 20) & 0x0fffffff;
    for (;; u = (u + 1) & 0x0fffffff) {
        if (!u)
            continue;
        char key[8];
        memcpy(key, &u, 8);
        uint64_t kh = hash_bytes(key, 8);
        pf_slot *s = table_slot(&st->uuids, key, 8, kh);
        if (!s)
            return 0;
        if (s->val)
            continue; /* taken by another track of this trace */
        if (!table_add(&st->uuids, s, key, 8, kh, index1))
            return 0;
        return u;
    }
}

/* The track of (kind, pid, tid[, name]), made if new: index + 1, or 0 when
 * out of memory (sb is then marked failed). */
static uint32_t track_of(pf_state *st, mlprof__sb *sb, int kind, pid_t pid, pid_t tid, const char *name,
                         size_t name_len, uint32_t parent)
{
    char stack[256];
    size_t klen = 1 + 2 * sizeof(pid_t) + name_len;
    char *key = klen <= sizeof stack ? stack : mlprof__malloc(klen);
    if (!key) {
        sb->failed = 1;
        return 0;
    }
    key[0] = (char)kind;
    memcpy(key + 1, &pid, sizeof pid);
    memcpy(key + 1 + sizeof pid, &tid, sizeof tid);
    if (name_len)
        memcpy(key + 1 + 2 * sizeof pid, name, name_len);
    uint64_t h = hash_bytes(key, klen);
    uint32_t found = 0;
    pf_slot *s = table_slot(&st->track_keys, key, klen, h);
    if (s && s->val) {
        found = (uint32_t)s->val;
    } else if (s) {
        pf_track *tracks = mlprof__grow(st->tracks, &st->tracks_cap, st->ntracks, sizeof *tracks, 16);
        if (tracks) {
            st->tracks = tracks;
            pf_track *t = &tracks[st->ntracks];
            memset(t, 0, sizeof *t);
            t->kind = kind;
            t->pid = pid;
            t->tid = tid;
            t->parent = parent;
            if (name)
                t->name = mlprof__strndup(name, name_len);
            uint32_t index1 = (uint32_t)st->ntracks + 1;
            t->uuid = (!name || t->name) ? pick_uuid(st, h, index1) : 0;
            if (t->uuid && table_add(&st->track_keys, s, key, klen, h, index1)) {
                st->ntracks++;
                found = index1;
            } else {
                mlprof__free(t->name);
            }
        }
    }
    if (key != stack)
        mlprof__free(key);
    if (!found)
        sb->failed = 1;
    return found;
}

static uint32_t process_track(pf_state *st, mlprof__sb *sb, pid_t pid)
{
    return track_of(st, sb, TK_PROCESS, pid, pid, NULL, 0, 0);
}

static uint32_t thread_track(pf_state *st, mlprof__sb *sb, pid_t pid, pid_t tid)
{
    uint32_t last = st->last_thread;
    if (last && st->tracks[last - 1].pid == pid && st->tracks[last - 1].tid == tid)
        return last;
    uint32_t proc = process_track(st, sb, pid);
    if (!proc)
        return 0;
    uint32_t t = track_of(st, sb, TK_THREAD, pid, tid, NULL, 0, proc);
    if (t)
        st->last_thread = t;
    return t;
}

/* The sequence of thread track t (index + 1), made if new and started in
 * sb before its first event, at ts; NULL when out of memory. */
static pf_seq *thread_seq(pf_state *st, mlprof__sb *sb, uint32_t t, uint64_t ts)
{
    pf_seq *q;
    uint32_t i = st->tracks[t - 1].tseq;
    if (i) {
        q = st->tseqs[i - 1];
    } else {
        pf_seq **seqs = mlprof__grow(st->tseqs, &st->tseqs_cap, st->ntseqs, sizeof *seqs, 16);
        q = seqs && st->ntseqs < UINT32_MAX - SEQ_THREADS - st->seq_base ? mlprof__calloc(1, sizeof *q) : NULL;
        if (!q) {
            sb->failed = 1;
            return NULL;
        }
        st->tseqs = seqs;
        q->id = (uint32_t)(SEQ_THREADS + st->seq_base + st->ntseqs);
        q->thread = 1;
        q->uuid = st->tracks[t - 1].uuid;
        st->tseqs[st->ntseqs++] = q;
        st->tracks[t - 1].tseq = (uint32_t)st->ntseqs;
    }
    if (!q->started) {
        put_thread_sequence_start(sb, q, ts);
        q->started = 1;
    }
    return q;
}

/* The track an event goes on, described in its sequence: index + 1, or 0. */
static uint32_t use_track(pf_state *st, const mlprof__sink_out *out, uint32_t t)
{
    if (t)
        describe(st, out->sb, seq_of(st, out), t);
    return t;
}

/* ---- the sink */

static void *pf_create(void)
{
    pf_state *st = mlprof__calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->seq[0].id = SEQ_STREAM;
    st->seq[1].id = SEQ_TAIL;
    return st;
}

static void forget_tracks(pf_state *st)
{
    for (size_t i = 0; i < st->ntseqs; i++) {
        for (int k = 0; k < IN_KINDS; k++)
            table_free(&st->tseqs[i]->in[k]);
        mlprof__free(st->tseqs[i]);
    }
    st->ntseqs = 0;
    st->cur_q = NULL;
    for (size_t i = 0; i < st->ntracks; i++) {
        mlprof__free(st->tracks[i].name);
        mlprof__free(st->tracks[i].domain);
    }
    st->ntracks = 0;
    st->last_thread = 0;
    table_clear(&st->track_keys);
    table_clear(&st->uuids);
}

static void pf_destroy(void *vst)
{
    pf_state *st = vst;
    if (!st)
        return;
    forget_tracks(st);
    mlprof__free(st->tseqs);
    mlprof__free(st->tracks);
    table_free(&st->track_keys);
    table_free(&st->uuids);
    for (int s = 0; s < 2; s++) {
        for (int k = 0; k < IN_KINDS; k++)
            table_free(&st->seq[s].in[k]);
    }
    mlprof__sb_free(&st->ev);
    mlprof__sb_free(&st->interned);
    mlprof__sb_free(&st->tmp);
    mlprof__sb_free(&st->name_tmp);
    mlprof__free(st);
}

/* A new trace: nothing interned, no track described (a new file starts with
 * head again). */
static void pf_reset(void *vst)
{
    pf_state *st = vst;
    st->seq_base = 0;
    seq_clear(&st->seq[0]);
    seq_clear(&st->seq[1]);
    forget_tracks(st);
    st->tail_gen = 0;
}

static void pf_head(void *vst, mlprof__sb *sb)
{
    (void)vst;
    put_sequence_start(sb, SEQ_STREAM, 1);
    put_clock_snapshot(sb, SEQ_STREAM);
}

/* Packets were lost after the head: interning, defaults, clock bases and
 * track descriptors they held are unknown to a reader. Everything is said
 * again from here: sequence 1 cleared anew, thread sequences and tracks
 * forgotten (each starts again, cleared, at its next event). A slice whose
 * begin was lost ends without one, which readers skip. */
static void pf_lost(void *vst, mlprof__sb *sb)
{
    pf_state *st = vst;
    uint32_t used = st->seq_base + (uint32_t)st->ntseqs;
    pf_reset(st);
    st->seq_base = used; /* new thread sequences: their first packets are first */
    put_sequence_start(sb, SEQ_STREAM, 0);
    put_clock_snapshot(sb, SEQ_STREAM);
}

/* A SLICE_BEGIN of span s on track uuid, with its name, category and
 * arguments, in q's sequence (the stream's or a tail's: timestamps
 * absolute, the track said). */
static void put_span_begin(pf_state *st, mlprof__sb *sb, pf_seq *q, uint64_t uuid, const mlprof__span_out *s,
                           int unfinished)
{
    mlprof__sb *ev = &st->ev;
    if (room(ev, 32)) {
        char *p = put_tag(end_of(ev), 9, WT_VARINT);
        *p++ = TYPE_SLICE_BEGIN;
        p = put_tag(p, 11, WT_VARINT);
        set_end(ev, put_varint(p, uuid));
    }
    put_event_name(st, q, s->name, s->name_len);
    put_category(st, q, s->domain);
    put_span_args(st, q, s);
    if (unfinished)
        put_bool_annotation(st, q, "unfinished", 1);
    put_event_packet(st, sb, q, s->begin_ns, ev);
}

/* A span whole (a frame, a span a module produced, or any span of a sink
 * driven without slices): its begin and its end one after the other, on
 * sequence 1 (or the tail's), the end's track said. */
static void pf_span(void *vst, const mlprof__sink_out *out, const mlprof__span_out *s)
{
    pf_state *st = vst;
    pf_seq *q = seq_of(st, out);
    uint32_t t = thread_track(st, out->sb, s->pid, s->tid);
    if (t && s->kind == MLPROF__OUT_FRAME)
        t = track_of(st, out->sb, TK_FRAME, s->pid, s->tid, s->name, s->name_len, t);
    if (!use_track(st, out, t))
        return;
    uint64_t uuid = st->tracks[t - 1].uuid;
    put_span_begin(st, out->sb, q, uuid, s, s->unfinished);
    put_bare_event(out->sb, q, s->end_ns, TYPE_SLICE_END, uuid);
}

/* The sequence of thread (pid, tid) in the stream, started, its track
 * described; NULL when out of memory. */
static pf_seq *slice_seq(pf_state *st, const mlprof__sink_out *out, pid_t pid, pid_t tid, uint64_t ts)
{
    if (st->cur_q && st->cur_pid == pid && st->cur_tid == tid)
        return st->cur_q;
    uint32_t t = use_track(st, out, thread_track(st, out->sb, pid, tid));
    pf_seq *q = t ? thread_seq(st, out->sb, t, ts) : NULL;
    if (q) {
        st->cur_q = q;
        st->cur_pid = pid;
        st->cur_tid = tid;
    }
    return q;
}

/* A task's begin. In the stream: on its thread's sequence, the track and
 * the timestamp's base left to the sequence. In a tail: on the tail's
 * sequence, as pf_span writes it. */
static void pf_slice_begin(void *vst, const mlprof__sink_out *out, const mlprof__span_out *s)
{
    pf_state *st = vst;
    if (out->tail) {
        uint32_t t = use_track(st, out, thread_track(st, out->sb, s->pid, s->tid));
        if (t)
            put_span_begin(st, out->sb, seq_of(st, out), st->tracks[t - 1].uuid, s, 0);
        return;
    }
    pf_seq *q = slice_seq(st, out, s->pid, s->tid, s->begin_ns);
    if (!q)
        return;
    mlprof__sb *ev = &st->ev;
    uint64_t name = intern(st, q, IN_NAME, s->name, s->name_len);
    uint64_t cat = s->domain ? category_iid(st, q, s->domain) : 0;
    if (name && (cat || !s->domain) && room(ev, 32)) { /* the usual case, written at once */
        char *p = put_tag(end_of(ev), 9, WT_VARINT);
        *p++ = TYPE_SLICE_BEGIN;
        p = put_varint(put_tag(p, 10, WT_VARINT), name);
        if (cat)
            p = put_varint(put_tag(p, 3, WT_VARINT), cat);
        set_end(ev, p);
    } else {
        if (room(ev, 8)) {
            char *p = put_tag(end_of(ev), 9, WT_VARINT);
            *p++ = TYPE_SLICE_BEGIN;
            set_end(ev, p);
        }
        put_event_name(st, q, s->name, s->name_len);
        put_category(st, q, s->domain);
    }
    put_span_args(st, q, s);
    put_thread_event(st, out->sb, q, s->begin_ns);
}

/* A task's end: with the arguments recorded after its begin and, when the
 * profiler closed it, "unfinished" (readers join an end's annotations to
 * its slice's). */
static void pf_slice_end(void *vst, const mlprof__sink_out *out, const mlprof__span_out *s)
{
    pf_state *st = vst;
    pf_seq *q;
    uint64_t uuid = 0;
    if (out->tail) {
        uint32_t t = use_track(st, out, thread_track(st, out->sb, s->pid, s->tid));
        if (!t)
            return;
        q = seq_of(st, out);
        uuid = st->tracks[t - 1].uuid;
    } else {
        q = slice_seq(st, out, s->pid, s->tid, s->end_ns);
        if (!q)
            return;
        if (!s->ntargs && !s->unfinished) {
            put_thread_end(out->sb, q, s->end_ns);
            return;
        }
    }
    mlprof__sb *ev = &st->ev;
    if (room(ev, 16)) {
        char *p = put_tag(end_of(ev), 9, WT_VARINT);
        *p++ = TYPE_SLICE_END;
        if (out->tail) {
            p = put_tag(p, 11, WT_VARINT);
            p = put_varint(p, uuid);
        }
        set_end(ev, p);
    }
    if (s->targs)
        put_targs(st, q, s->targs, s->ntargs);
    if (s->unfinished)
        put_bool_annotation(st, q, "unfinished", 1);
    if (out->tail)
        put_event_packet(st, out->sb, q, s->end_ns, ev);
    else
        put_thread_event(st, out->sb, q, s->end_ns);
}

/* An INSTANT named name on track t at ts, with args; flow: 0, or the id of
 * the flow it starts (field 47) or ends (48). */
static void put_instant(pf_state *st, const mlprof__sink_out *out, uint32_t t, uint64_t ts, const char *name,
                        size_t name_len, const char *domain, const char *args, size_t args_len,
                        unsigned flow_field, uint64_t flow_id)
{
    pf_seq *q = seq_of(st, out);
    mlprof__sb *ev = &st->ev;
    if (room(ev, 48)) {
        char *p = put_tag(end_of(ev), 9, WT_VARINT);
        *p++ = TYPE_INSTANT;
        p = put_tag(p, 11, WT_VARINT);
        p = put_varint(p, st->tracks[t - 1].uuid);
        if (flow_field) {
            p = put_tag(p, flow_field, WT_I64);
            p = put_fixed64(p, flow_id);
        }
        set_end(ev, p);
    }
    put_event_name(st, q, name, name_len);
    put_category(st, q, domain);
    put_args(st, q, args, args_len);
    put_event_packet(st, out->sb, q, ts, ev);
}

static void pf_instant(void *vst, const mlprof__sink_out *out, const mlprof__instant_out *e)
{
    pf_state *st = vst;
    uint32_t t = e->scope == MLPROF_SCOPE_THREAD ? thread_track(st, out->sb, e->pid, e->tid)
                                                 : process_track(st, out->sb, e->pid);
    if (!use_track(st, out, t))
        return;
    put_instant(st, out, t, e->ts_ns, e->name, e->name_len, e->domain, e->args, e->args_len, 0, 0);
}

static void pf_flow(void *vst, const mlprof__sink_out *out, const mlprof__flow_out *f)
{
    pf_state *st = vst;
    uint32_t t = use_track(st, out, thread_track(st, out->sb, f->pid, f->tid));
    if (!t)
        return;
    const char *name = f->name ? f->name : "flow";
    put_instant(st, out, t, f->ts_ns, name, strlen(name), f->domain, NULL, 0, f->ph == 'f' ? 48 : 47, f->id);
}

static void pf_counter(void *vst, const mlprof__sink_out *out, const mlprof__counter_out *c)
{
    pf_state *st = vst;
    uint32_t proc = process_track(st, out->sb, c->pid);
    uint32_t t = proc ? track_of(st, out->sb, TK_COUNTER, c->pid, c->pid, c->name, strlen(c->name), proc) : 0;
    if (!t)
        return;
    pf_track *tr = &st->tracks[t - 1];
    if (!tr->domain && c->domain)
        tr->domain = mlprof__strdup(c->domain); /* NULL when out of memory: said without it */
    use_track(st, out, t);
    mlprof__sb *ev = &st->ev;
    if (!room(ev, 40))
        return;
    char *p = put_tag(end_of(ev), 9, WT_VARINT);
    *p++ = TYPE_COUNTER;
    p = put_tag(p, 11, WT_VARINT);
    p = put_varint(p, st->tracks[t - 1].uuid);
    if (c->is_int) {
        p = put_tag(p, 30, WT_VARINT);
        p = put_varint(p, (uint64_t)c->ivalue);
    } else {
        uint64_t bits;
        memcpy(&bits, &c->value, sizeof bits);
        p = put_tag(p, 44, WT_I64);
        p = put_fixed64(p, bits);
    }
    set_end(ev, p);
    put_event_packet(st, out->sb, seq_of(st, out), c->ts_ns, ev);
}

/* A track's name or order said: its descriptor again, with them. In a tail
 * the stream's record of the track is left as it was. */
static void pf_track_said(void *vst, const mlprof__sink_out *out, const mlprof__track_out *m)
{
    pf_state *st = vst;
    uint32_t t = m->kind == MLPROF__TRACK_PROCESS ? process_track(st, out->sb, m->pid)
                                                  : thread_track(st, out->sb, m->pid, m->tid);
    if (!t)
        return;
    pf_seq *q = seq_of(st, out);
    pf_track copy = st->tracks[t - 1];
    copy.name = (char *)(m->name ? m->name : copy.name);
    copy.ext = copy.ext || m->kind == MLPROF__TRACK_EXT;
    copy.has_sort = m->kind != MLPROF__TRACK_PROCESS;
    copy.sort_index = m->sort_index;
    if (copy.parent)
        describe(st, out->sb, q, copy.parent);
    put_descriptor(st, out->sb, q, &copy);
    pf_track *tr = &st->tracks[t - 1];
    if (out->tail) {
        tr->tail_gen = st->tail_gen;
        return;
    }
    if (m->name && (!tr->name || strcmp(tr->name, m->name) != 0)) {
        char *name = mlprof__strdup(m->name);
        if (name) {
            mlprof__free(tr->name);
            tr->name = name;
        }
    }
    tr->ext = copy.ext;
    tr->has_sort = copy.has_sort;
    tr->sort_index = copy.sort_index;
    tr->described = 1;
}

static void pf_tail_begin(void *vst, const mlprof__sink_out *out)
{
    pf_state *st = vst;
    seq_clear(&st->seq[1]);
    st->tail_gen++;
    if (!st->tail_gen)
        st->tail_gen = 1; /* 0 means never described in a tail */
    put_sequence_start(out->sb, SEQ_TAIL, 1);
}

/* ---- sampled call stacks */

/* An entry's iid in a table of this tail's profile interning, or 0 with
 * *fresh set once it is given the next one (*next); -1 out of memory. */
static int64_t profile_iid(pf_table *t, const char *key, size_t n, uint64_t *next, int *fresh)
{
    uint64_t h = hash_bytes(key, n);
    pf_slot *slot = table_slot(t, key, n, h);
    if (!slot)
        return -1;
    *fresh = !slot->val;
    if (slot->val)
        return (int64_t)slot->val;
    if (!table_add(t, slot, key, n, h, *next))
        return -1;
    return (int64_t)(*next)++;
}

/* The sampled call stacks as Perfetto's CPU profile: one PerfSample packet
 * per sample, in the tail's sequence (so rewritten whole at every dump, as
 * the JSON's samples are), at its time on CLOCK_MONOTONIC (the sequence's
 * default clock), with the interned entries its call stack needs that this
 * tail has not given yet, in the same packet. Frame and callstack iids are
 * the frame tree's indices: a callstack is its leaf's path from the root. */
static void put_stacks(pf_state *st, mlprof__sb *sb, const pf_seq *q, const mlprof__stacks_out *v)
{
    /* per frame: 1 its Frame is interned, 2 its Callstack too */
    unsigned char *said = mlprof__calloc(v->nframes ? v->nframes : 1, 1);
    uint32_t *path = mlprof__malloc((v->nframes ? v->nframes : 1) * sizeof *path);
    pf_table names = {0}, maps = {0};
    uint64_t next_name = 1, next_map = 1;
    mlprof__sb in;
    mlprof__sb_init(&in);
    if (!said || !path)
        sb->failed = 1;
    for (size_t i = 0; i < v->nsamples && !sb->failed; i++) {
        const mlprof__stack_sample_out *sm = &v->samples[i];
        if (!sm->frame || sm->frame >= v->nframes)
            continue;
        size_t depth = 0;
        for (uint32_t k = sm->frame; k && depth < v->nframes; k = v->frames[k].parent)
            path[depth++] = k; /* leaf first */
        in.len = 0;
        for (size_t d = depth; d-- > 0;) {
            uint32_t k = path[d];
            const mlprof__stack_frame_out *f = &v->frames[k];
            if (said[k])
                continue;
            int fresh = 0;
            /* InternedData.function_names 5: InternedString {iid 1, str 2} */
            int64_t fn = profile_iid(&names, f->name, strlen(f->name), &next_name, &fresh);
            if (fn < 0) {
                in.failed = 1; /* out of memory: no packet that names what is not interned */
                break;
            }
            if (fresh) {
                size_t at = open_len(&in, 5);
                put_varint_field(&in, 1, (uint64_t)fn);
                put_text_field(&in, 2, f->name);
                close_len(&in, at);
            }
            /* a mapping per (start, path); InternedData.mapping_paths 17
             * (InternedString) gives its path, a single component without
             * the leading '/' that readers put before each one */
            char key[4096];
            size_t plen = strlen(f->object), klen;
            if (plen > sizeof key - 8)
                plen = sizeof key - 8;
            memcpy(key, &f->map_start, 8);
            memcpy(key + 8, f->object, plen);
            klen = 8 + plen;
            int64_t m = profile_iid(&maps, key, klen, &next_map, &fresh);
            if (m < 0) {
                in.failed = 1;
                break;
            }
            if (fresh) {
                const char *comp = f->object[0] == '/' ? f->object + 1 : f->object[0] ? f->object : "[unknown]";
                size_t at = open_len(&in, 17);
                put_varint_field(&in, 1, (uint64_t)m);
                put_text_field(&in, 2, comp);
                close_len(&in, at);
                /* InternedData.mappings 19: Mapping {iid 1, start 4, end 5,
                 * path_string_ids 7, exact_offset 8 (this mapping's offset
                 * in the file)}; start_offset 3 left 0, as Perfetto says for
                 * native objects; no build id (iid 0: none). Frame.rel_pc
                 * is then the offset in the file, what symbolizers read */
                at = open_len(&in, 19);
                put_varint_field(&in, 1, (uint64_t)m);
                /* an address no mapping holds (a frame walk that ran
                 * into data) gets one mapping over the whole address
                 * space, its rel_pc the address itself */
                int none = !f->object[0];
                put_varint_field(&in, 4, none ? 0 : f->map_start);
                put_varint_field(&in, 5, none ? UINT64_MAX : f->map_end);
                put_varint_field(&in, 7, (uint64_t)m);
                put_varint_field(&in, 8, f->map_offset);
                close_len(&in, at);
            }
            /* InternedData.frames 6: Frame {iid 1, function_name_id 2,
             * mapping_id 3, rel_pc 4} */
            size_t at = open_len(&in, 6);
            put_varint_field(&in, 1, k);
            put_varint_field(&in, 2, (uint64_t)fn);
            put_varint_field(&in, 3, (uint64_t)m);
            put_varint_field(&in, 4, f->rel_pc);
            close_len(&in, at);
            said[k] = 1;
        }
        if (!in.failed && said[sm->frame] < 2) {
            /* InternedData.callstacks 7: Callstack {iid 1, frame_ids 2},
             * the root first; not packed (the field is not declared so,
             * and trace_processor's decoder reads it one by one) */
            size_t at = open_len(&in, 7);
            put_varint_field(&in, 1, sm->frame);
            for (size_t d = depth; d-- > 0;)
                put_varint_field(&in, 2, path[d]);
            close_len(&in, at);
            said[sm->frame] = 2;
        }
        if (in.failed || names.keys.failed || maps.keys.failed) {
            sb->failed = 1;
            break;
        }
        /* TracePacket: timestamp 8, trusted_packet_sequence_id 10,
         * sequence_flags 13, interned_data 12, perf_sample 66 =
         * PerfSample {pid 2, tid 3, callstack_iid 4, cpu_mode 5 (2: user)};
         * no cpu 1: the sampler does not ask which CPU ran the thread */
        size_t pk = open_len(sb, 1);
        put_varint_field(sb, 8, sm->ts_ns);
        put_varint_field(sb, 10, q->id);
        put_varint_field(sb, 13, SEQ_NEEDS_INCREMENTAL_STATE);
        if (in.len)
            put_bytes_field(sb, 12, in.data, in.len);
        size_t ps = open_len(sb, 66);
        put_varint_field(sb, 2, (uint64_t)(uint32_t)(sm->pid ? sm->pid : v->pid));
        put_varint_field(sb, 3, (uint64_t)(uint32_t)sm->tid);
        put_varint_field(sb, 4, sm->frame);
        put_varint_field(sb, 5, 2);
        close_len(sb, ps);
        close_len(sb, pk);
    }
    (void)st;
    mlprof__sb_free(&in);
    table_free(&names);
    table_free(&maps);
    mlprof__free(said);
    mlprof__free(path);
}

/* The footer: the process described with its final name, and otherData as
 * the annotations of an INSTANT "otherData" at dump_ns. */
static void pf_tail_end(void *vst, const mlprof__sink_out *out, const mlprof__trace_meta *m)
{
    pf_state *st = vst;
    mlprof__sink_out o = *out;
    o.tail = 1;
    uint32_t t = process_track(st, o.sb, m->pid);
    if (!t)
        return;
    pf_seq *q = seq_of(st, &o);
    if (st->tracks[t - 1].tail_gen != st->tail_gen) {
        pf_track copy = st->tracks[t - 1];
        if (m->process_name)
            copy.name = (char *)m->process_name;
        put_descriptor(st, o.sb, q, &copy);
        st->tracks[t - 1].tail_gen = st->tail_gen;
    }
    put_instant(st, &o, t, m->dump_ns, "otherData", 9, "mlprof", m->other_data, m->other_data_len, 0, 0);
    if (m->stacks)
        put_stacks(st, o.sb, q, m->stacks);
}

const mlprof__sink_ops mlprof__perfetto_sink = {
    .name = "perfetto",
    .create = pf_create,
    .destroy = pf_destroy,
    .reset = pf_reset,
    .head = pf_head,
    .flags = MLPROF__SINK_NO_TEXT | MLPROF__SINK_TYPED | MLPROF__SINK_SLICES,
    .span = pf_span,
    .slice_begin = pf_slice_begin,
    .slice_end = pf_slice_end,
    .instant = pf_instant,
    .counter = pf_counter,
    .flow = pf_flow,
    .track = pf_track_said,
    .tail_begin = pf_tail_begin,
    .tail_end = pf_tail_end,
    .lost = pf_lost,
};
