/*
 * trace.h - the analyzer's model of a trace, whoever wrote it: duration
 * events (complete "X" events, and "B"/"E" pairs joined into them), instants,
 * counter samples, flows and async events, with their arguments; process and
 * thread names. Strings are interned: a trace of millions of events holds each
 * name, category and shape once. Times are integer nanoseconds.
 */
#ifndef MLPROF_ANALYZE_TRACE_H
#define MLPROF_ANALYZE_TRACE_H

#include <stdint.h>
#include <stddef.h>

#include "../common/common.h"

/* A double as an integer, rounded; 0 when it is not finite or out of range
 * (a cast would be undefined there). */
static inline int64_t an_to_i64(double v)
{
    if (!(v > -9.2e18 && v < 9.2e18))
        return 0;
    return (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
}

/* The times a trace model holds: |t| < 2^62 ns (146 years either side of
 * 0; Kineto's epoch times are 1.8e18 in 2026), each event's end too, so
 * that the difference of any two fits int64. The JSON reader leaves events
 * beyond it out, counted; the Perfetto reader clamps to it (an_time_clamp). */
#define AN_TIME_LIMIT_NS ((int64_t)1 << 62)
static inline int64_t an_time_clamp(int64_t t)
{
    return t >= AN_TIME_LIMIT_NS ? AN_TIME_LIMIT_NS - 1 : t <= -AN_TIME_LIMIT_NS ? -AN_TIME_LIMIT_NS + 1 : t;
}

/* b - a, or INT64_MAX when it does not fit (times span most of int64: a
 * damaged or hostile trace); 0 when b < a would overflow the other way. */
static inline int64_t an_ns_between(int64_t a, int64_t b)
{
    int64_t d;
    if (__builtin_sub_overflow(b, a, &d))
        return b > a ? INT64_MAX : 0;
    return d;
}

/* *acc += v, held at INT64_MAX/MIN instead of overflowing (sums of many
 * long durations in a damaged trace). */
static inline void an_sum_add(int64_t *acc, int64_t v)
{
    if (__builtin_add_overflow(*acc, v, acc))
        *acc = v > 0 ? INT64_MAX : INT64_MIN;
}

enum { AN_NUM = 0, AN_STR = 1, AN_RAW = 2 }; /* RAW: an array, object, true, false or null, as compact JSON */

typedef struct an_arg {
    const char *key;
    const char *str; /* AN_STR, AN_RAW (interned); NULL for a number */
    double num;
    int64_t inum;
    uint8_t type;
    uint8_t is_int;
} an_arg;

typedef struct an_event {
    const char *name, *cat; /* interned; "" when absent */
    int64_t ts, dur;        /* ns; dur 0 for instants */
    int64_t self;           /* ns: dur less the children on its thread (an_compute_self) */
    int64_t pid, tid;
    uint64_t id;            /* flow and async id (a string id is hashed) */
    uint32_t args, nargs;   /* into an_trace.args */
    int32_t parent;         /* enclosing duration on its thread, or -1 (an_compute_self) */
    char ph;                /* 'X' for every duration, 'i', 'C', 's', 't', 'f', 'b', 'e', 'n' */
    uint8_t flow_enclosing; /* a flow end that binds to the enclosing slice ("bp":"e") */
    char scope;             /* an instant's "s": 'g', 'p' or 't' (0 when not given) */
    uint8_t id_form;        /* where id came from and what it binds (AN_ID_*) */
} an_event;

/* an_event.id_form: an async id given as "id2" {"local": ...} or {"global":
 * ...}, and a duration's flow binding ("bind_id", with "flow_in" and
 * "flow_out"), whose id is then the bind_id. 0: a plain "id" or none. */
enum { AN_ID2_LOCAL = 1, AN_ID2_GLOBAL = 2, AN_ID_BIND = 4, AN_FLOW_IN = 8, AN_FLOW_OUT = 16 };

/* A pid or tid given as a name ("stream 7") is numbered from AN_NAMED_ID_FIRST
 * down, far below any id a writer gives and below -1, the tid under which a
 * process's own name is kept: a name never takes a number that means
 * something else. */
#define AN_NAMED_ID_FIRST (-((int64_t)1 << 62))
static inline int an_is_named_id(int64_t id) { return id <= AN_NAMED_ID_FIRST; }
/* The tid under which a process's own name is kept among the names: none a
 * trace gives (a thread numbered -1 is a thread, named by its thread_name). */
#define AN_PROCESS_TID INT64_MIN

typedef struct an_name {
    int64_t pid, tid; /* tid is -1 for a process name */
    const char *name;
} an_name;

/* Sampled call stacks read from Perfetto's PerfSample packets (pftrace.c):
 * a tree of frames, each a function's name under its caller, and the
 * samples on it. A JSON trace's stackFrames and samples are read by
 * flame.c itself, not into this. */
typedef struct an_stack_node {
    uint32_t parent; /* 0: a root (node 0 is unused) */
    const char *name; /* interned */
} an_stack_node;

typedef struct an_stack_sample {
    int64_t pid, tid, ts; /* ts: ns, the events' clock */
    uint32_t node;        /* its leaf */
} an_stack_sample;

typedef struct an_trace {
    const char *path;
    an_event *ev;
    size_t nev, evcap;
    an_arg *args;
    size_t nargs, argcap;
    an_name *names;
    size_t nnames, namecap;
    mlprof__map strings;
    const char *other_data;  /* "otherData" as compact JSON, or NULL */
    const char *device_props; /* "deviceProperties" (PyTorch), or NULL */
    const char *distributed_info; /* "distributedInfo" (PyTorch: rank, world size), or NULL */
    int64_t base_time_ns;    /* "baseTimeNanoseconds": the times are since this epoch time (0: none) */
    int system_clock;        /* its metadata says the times are the host's real-time clock (Kineto's) */
    const char *writer;      /* "mlprof", "pytorch", or "" when unknown */
    uint64_t unmatched_ends, unclosed_begins;
    uint64_t skipped;        /* events left out (t->note says which and why) */
    int64_t t_min, t_max;    /* the span of the events, ns */
    int partial;             /* reading stopped at an error; the events before it are kept */
    char error[600];
    const char *format;      /* "json", or "perfetto" (Perfetto's protobuf TracePackets, pftrace.h) */
    char note[1024];         /* what the reader left out and why ("" when nothing): said with the output */
    an_stack_node *snodes;   /* Perfetto's sampled stacks (above); snodes[0] unused */
    size_t nsnodes, snodecap;
    an_stack_sample *ssamples;
    size_t nssamples, ssamplecap;
    mlprof__map snode_index; /* (parent, name) -> node: the reader's */
    int json_stacks;         /* a JSON trace's stackFrames (1) and samples (2) are there (flame.c reads them) */
} an_trace;

/* Reads a Chrome trace event file (a JSON object with traceEvents, or a bare
 * array, whose closing bracket may be missing), or Perfetto's protobuf trace
 * (pftrace.h: told apart by its content), plain or gzip. Returns 0; or -1 with
 * t->error naming the file, the byte offset (and for JSON the line and
 * column), the events read before the problem kept (t->partial). */
int an_trace_read(an_trace *t, const char *path);
/* The same from memory (n bytes, copied; not gzip), named name in errors. */
int an_trace_read_mem(an_trace *t, const char *name, const void *data, size_t n);
void an_trace_free(an_trace *t);
/* The value of member key in the compact JSON object obj (as otherData is
 * kept): a pointer to its text and its length in *len, or NULL. */
const char *an_json_member(const char *obj, const char *key, size_t *len);
/* The rank of a distributed job's trace (distributedInfo.rank), or -1 when it has none. */
long long an_trace_rank(const an_trace *t);
/* Of a distributedInfo object (compact JSON, as kept; NULL: none): its
 * world_size, or -1; and its job id (mlprof's job_id: the launcher's job,
 * TORCHELASTIC_RUN_ID, Slurm's job and step...) into buf, or NULL when it
 * says none (absent or empty; PyTorch's profiler writes none). */
long long an_dist_info_world_size(const char *info);
const char *an_dist_info_job_id(const char *info, char *buf, size_t len);
/* Whether n traces are of different jobs: two that say different job ids
 * (job[i]: NULL when it says none), or different world sizes (world[i]: -1
 * when it says none). When they are: 1, and desc receives one group per job
 * and world size with its traces as what[i] names them ("job 42, world size
 * 2: A, B; job 7, world size 3: C"). Else 0. */
int an_jobs_differ(const char *const *job, const long long *world, const char *const *what, size_t n,
                   mlprof__sb *desc);
/* Interns s (n bytes); NULL when out of memory. */
const char *an_intern(an_trace *t, const char *s, size_t n);
/* Names a thread (tid AN_PROCESS_TID: the process); a later name replaces an
 * earlier one. Returns 0, or -1 when out of memory. */
int an_trace_add_name(an_trace *t, int64_t pid, int64_t tid, const char *name);

/* The argument key of e, or NULL. */
const an_arg *an_event_arg(const an_trace *t, const an_event *e, const char *key);
/* The first of several keys that e has. */
const an_arg *an_event_arg_any(const an_trace *t, const an_event *e, const char *const *keys);
/* A numeric argument, or def. */
double an_event_num(const an_trace *t, const an_event *e, const char *const *keys, double def);

/* Argument keys looked up by their interned pointers: for analyses that ask
 * every event for the same few keys. */
typedef struct an_keyset {
    const char *key[8]; /* those of the names that occur in the trace, in order */
    size_t n;
} an_keyset;
void an_keyset_init(const an_trace *t, const char *const *names, an_keyset *ks);
/* The argument of e under the first key of ks it has, or NULL. */
const an_arg *an_event_arg_in(const an_trace *t, const an_event *e, const an_keyset *ks);
/* Its value as a number (strings holding a number count), or def. */
double an_arg_num(const an_arg *a, double def);
/* A string member of otherData ("host", "clock_domain"...), copied into buf;
 * returns buf, or NULL when the trace has no such member. */
const char *an_other_data_str(const an_trace *t, const char *key, char *buf, size_t len);
/* The name of a thread ("name" metadata), or NULL. */
const char *an_thread_name(const an_trace *t, int64_t pid, int64_t tid);
const char *an_process_name(const an_trace *t, int64_t pid);

/* Sorts indices of events by track (pid, tid), then start, longest first. */
void an_sort_by_track(const an_trace *t, size_t *idx, size_t n);
/* Fills self and parent of every duration: events nest on their (pid, tid)
 * track by time; a child's time is taken from its parent's self time. */
void an_compute_self(an_trace *t);

#endif /* MLPROF_ANALYZE_TRACE_H */
