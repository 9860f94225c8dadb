/*
 * record.h - the recorder's data as the collector sees it: the 16-byte record
 * format, per-thread chunk lists, the handles, the clock and the shared
 * configuration. The collector (src/collect) reads records through this
 * header only; nothing here is public ABI.
 */
#ifndef MLPROF_RECORD_H
#define MLPROF_RECORD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

/* ------------------------------------------------------------- the records */

/*
 * Every record is 16 bytes: `a` is a timestamp (raw clock units) or a value,
 * `b` packs the kind (bits 58..63), a 10-bit auxiliary field (bits 48..57)
 * and a 48-bit pointer or payload (bits 0..47). Variable-length bytes (names,
 * keys, string values) follow in whole 16-byte slots. A record and its bytes
 * are reserved together, so they never straddle two chunks.
 */
typedef struct mlprof__rec {
    uint64_t a;
    uint64_t b;
} mlprof__rec;

enum mlprof__kind {
    MLPROF__REC_BEGIN = 1,       /* a=ts, ptr=span */
    MLPROF__REC_END = 2,         /* a=ts, ptr=span */
    MLPROF__REC_BEGIN_DYN = 3,   /* a=ts, ptr=domain, aux=name length; name bytes */
    MLPROF__REC_END_DYN = 4,     /* a=ts, ptr=domain */
    MLPROF__REC_COUNTER_I = 5,   /* a=ts, ptr=counter; next slot a=int64 value */
    MLPROF__REC_COUNTER_F = 6,   /* a=ts, ptr=counter; next slot a=double bits */
    MLPROF__REC_MARK = 7,        /* a=ts, ptr=marker, aux=scope */
    MLPROF__REC_MARK_DYN = 8,    /* a=ts, ptr=domain, aux=scope<<8|length; name bytes */
    MLPROF__REC_ARG_I = 9,       /* a=int64, aux=key length; key bytes */
    MLPROF__REC_ARG_F = 10,      /* a=double bits, aux=key length; key bytes */
    MLPROF__REC_ARG_S = 11,      /* a=value length, aux=key length; key then value bytes */
    MLPROF__REC_SCOPE_PUSH = 12, /* a=ts, ptr=scope node */
    MLPROF__REC_SCOPE_POP = 13,  /* a=ts */
    MLPROF__REC_VALUE = 14,      /* the second slot of a counter record */
    MLPROF__REC_MEM = 15         /* a=ts, aux=device, ptr=scope node; then a=address,
                                    b=bytes (bits 0..47) | tag length (48..55) | op (56..57)
                                    | MLPROF__MEM_LOWER (58); tag bytes */
};

/* The op of a memory record (bits 56..57 of its second slot). */
enum { MLPROF__MEM_ALLOC = 0, MLPROF__MEM_FREE = 1, MLPROF__MEM_RESERVE = 2,
       MLPROF__MEM_RELEASE = 3 };
/* Bit 58 of the second slot, or'ed into the op: the operation was seen by an
 * interposer of mlprof run (malloc, cudaMalloc), below whatever the program
 * reports itself through mlprof_mem_*. The memory profiler lets the program's
 * own report of the same address take such a block over (src/mem/mem.c). */
#define MLPROF__MEM_LOWER 4u
#define MLPROF__MEM_KIND(op) ((op) & 3u)
/* The interposers' alloc and free: mlprof_mem_alloc and mlprof_mem_free with
 * MLPROF__MEM_LOWER. */
int mlprof__mem_alloc_lower(int device, const void *addr, uint64_t bytes);
int mlprof__mem_free_lower(int device, const void *addr);
#define MLPROF__MEM_BYTES_MAX ((UINT64_C(1) << 48) - 1)

#define MLPROF__PTR_MASK ((UINT64_C(1) << 48) - 1)
#define MLPROF__REC_B(kind, aux, ptr) \
    (((uint64_t)(kind) << 58) | ((uint64_t)(aux) << 48) | ((uint64_t)(uintptr_t)(ptr)))
#define MLPROF__REC_KIND(b) ((unsigned)((b) >> 58))
#define MLPROF__REC_AUX(b) ((unsigned)(((b) >> 48) & 0x3ff))
#define MLPROF__REC_PTR(b) ((void *)(uintptr_t)((b) & MLPROF__PTR_MASK))
/* Slots needed for n bytes of inline text. */
#define MLPROF__TEXT_SLOTS(n) (((n) + 15) / 16)

#define MLPROF__NAME_MAX 255 /* dynamic names and string values */
#define MLPROF__KEY_MAX 63   /* argument keys */

/* ------------------------------------------------------------- the handles */

struct mlprof_domain {
    char *name;
    int klass;
    int level;
    uint8_t on; /* recorded under the current configuration */
    struct mlprof_domain *next;
    struct mlprof_domain *bucket_next; /* (reg) the next in its bucket of the name index */
};

enum mlprof__span_kind { MLPROF__SPAN_TASK = 0, MLPROF__SPAN_FRAME = 1, MLPROF__SPAN_EVENT = 2 };

/* Tasks, frames, events, counters and markers share this head, so that one
 * list holds every handle and one flag tells the hot path whether to record. */
typedef struct mlprof__handle {
    uint8_t on;       /* read on the hot path: the domain records */
    uint8_t type;     /* MLPROF__H_* */
    uint8_t kind;     /* span kind */
    uint8_t destroyed;
    mlprof_domain *domain;
    char *name;
    struct mlprof__handle *next; /* every handle, for configuration changes */
    struct mlprof__handle *bucket_next; /* (reg) while destroyed: the next in its bucket of
                                            the index of destroyed handles (handles.c) */
} mlprof__handle;

/* the public macros read `on` as the handle's first byte (MLPROF_I_HANDLE_ON) */
_Static_assert(offsetof(mlprof__handle, on) == 0 && sizeof(((mlprof__handle *)0)->on) == 1,
               "a handle's on flag is its first byte: part of the ABI");

enum { MLPROF__H_SPAN = 1, MLPROF__H_COUNTER = 2, MLPROF__H_MARKER = 3 };

struct mlprof_span {
    mlprof__handle h;
};

struct mlprof_counter {
    mlprof__handle h;
    int64_t value; /* atomic */
};

struct mlprof_marker {
    mlprof__handle h;
};

/* A node of the scope tree: "model:conv1:" is conv1 under model. Nodes are
 * never freed, so records may point at them. */
typedef struct mlprof__scope_node {
    struct mlprof__scope_node *parent;
    struct mlprof__scope_node *children; /* atomic list head */
    struct mlprof__scope_node *sibling;
    char *name;      /* this level's name */
    char *full;      /* "model:conv1:" */
    size_t full_len;
} mlprof__scope_node;

/* --------------------------------------------------- chunks and threads */

/* A thread's part of a chunk (a segment): the whole chunk, or the tail of one
 * that an exited thread left. Its header is written when a thread takes it. */
typedef struct mlprof__chunk {
    struct mlprof__chunk *next; /* atomic: the thread's next segment, set when this one is sealed */
    char *final_end;            /* end of the data once sealed */
    char *end;                  /* end of the chunk: the room for data */
    char data[];
} mlprof__chunk;

typedef struct mlprof__thread {
    /* written by the owning thread on the hot path (see recorder.c on signals) */
    char *pos; /* atomic (release): next free byte; everything before is published */
    char *end;
    int busy;  /* owner's: a record is being written (a signal handler then drops its own) */
    mlprof__chunk *cur;
    uint64_t dropped;   /* atomic, written by the owner only */
    mlprof__scope_node *scope;
    unsigned scope_depth_dropped;

    /* read by the collector */
    mlprof__chunk *head;  /* oldest chunk not yet consumed (collector's) */
    char *consumed;       /* position reached in head (collector's) */
    pid_t tid;
    uint32_t seq;         /* registration order, for stable track order */
    int exited;           /* atomic */
    int late;             /* made after its exit handler ran: reaped once its id is gone */
    unsigned name_seq;    /* seqlock over name */
    char name[64];
    void *track;          /* the collector's per-thread state */
    void *obs;            /* the observers' stack of open spans (observe.c), owner's */
    unsigned inside;      /* atomic, owner writes: recording calls it is in (the stop fence) */
    struct mlprof__thread *next; /* atomic list of every thread */
} mlprof__thread;

/* ------------------------------------------------------------- the clock */

enum { MLPROF__CLOCK_TSC = 0, MLPROF__CLOCK_MONOTONIC = 1, MLPROF__CLOCK_CUSTOM = 2 };
extern int mlprof__clock_mode;
uint64_t mlprof__clock_slow(void);

static inline uint64_t mlprof__clock_raw(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (MLPROF_LIKELY(mlprof__clock_mode == MLPROF__CLOCK_TSC))
        return __builtin_ia32_rdtsc();
#endif
    return mlprof__clock_slow();
}

/* Initializes the clock for the configured mode ("auto", "tsc", "monotonic"). */
int mlprof__clock_init(const char *mode);
/* Adds a calibration point (raw, CLOCK_MONOTONIC ns); called at the start of
 * every drain so that raw timestamps convert by interpolation. */
void mlprof__clock_sync(void);
/* Converts a raw timestamp to nanoseconds on CLOCK_MONOTONIC. */
uint64_t mlprof__clock_to_ns(uint64_t raw);
uint64_t mlprof__clock_monotonic_ns(void);
/* The test-only clock_shift key (clock.c): parses "OFFSET_NS[:DRIFT_PPB]"
 * (-1 when bad), applies it from now on, and reads it back (nonzero when a
 * shift is on). */
int mlprof__clock_shift_parse(const char *spec, int64_t *offset_ns, int64_t *drift_ppb);
void mlprof__clock_shift_set(const char *spec);
int mlprof__clock_shift_get(int64_t *offset_ns, int64_t *drift_ppb, uint64_t *start_ns);
const char *mlprof__clock_name(void);
/* Ticks per second of the raw clock (for the metadata). */
double mlprof__clock_rate_hz(void);

/* -------------------------------------------------------- configuration */

#define MLPROF__PATH_MAX 4096
#define MLPROF__GPU_KEY 1024

typedef struct mlprof__config {
    char filename[MLPROF__PATH_MAX];
    char stats_file[MLPROF__PATH_MAX];
    char schedule[128]; /* steps.c: "skip_first:N,wait:N,warmup:N,active:N,repeat:N" or "" */
    char sqlite_file[MLPROF__PATH_MAX]; /* the SQLite sink's database: a path, "auto" or empty */
    char sqlite_library[MLPROF__PATH_MAX]; /* the libsqlite3 it loads with dlopen */
    char zlib_library[MLPROF__PATH_MAX];   /* the zlib it loads with dlopen for compress */
    char format[16];                    /* auto, json, perfetto */
    char compress[8];                   /* auto, gzip, none */
    char memory_csv[MLPROF__PATH_MAX];
    char memory_svg[MLPROF__PATH_MAX];
    uint64_t memory_history;
    int memory_sample_rate;
    int memory_top;
    char counters[256]; /* measured per span (src/hw) */
    char sampler[256];  /* series written by the sampler thread */
    double sampler_period;
    char sampling[16]; /* call stacks sampled per second of CPU time (src/hw/stacks.c), or off */
    char sampling_unwind[16]; /* auto, dwarf (stack copies unwound by CFI, src/hw/unwind.c), fp (kernel chains) */
    uint64_t sampling_stack;  /* bytes of user stack copied at each sample for dwarf */
    char sampling_source[8]; /* auto, perf (perf_event) or signal (src/hw/sigsample.c) */
    char papi_library[MLPROF__PATH_MAX];
    char nvml_library[MLPROF__PATH_MAX];
    char powercap_dir[MLPROF__PATH_MAX];
    char hooks[128];     /* interposers of mlprof run (src/hook) */
    unsigned hooks_mask; /* parsed, read by the hooks */
    int nccl_proxy;      /* the NCCL plugin asks for proxy operations and steps too */
    char cuda_functions[512];
    unsigned cuda_functions_mask; /* bit i: mlprof__cuda_names[i] is recorded */
    char gpu[MLPROF__GPU_KEY];           /* CUPTI activities (src/gpu) */
    unsigned gpu_mask;                   /* parsed: MLPROF__GPU_* */
    char gpu_functions[MLPROF__GPU_KEY]; /* runtime and driver calls recorded; empty: all */
    char gpu_details[MLPROF__GPU_KEY];
    unsigned gpu_details_mask;
    char gpu_metrics[MLPROF__GPU_KEY]; /* range profiler metrics, aliases unexpanded */
    int gpu_metrics_batch;             /* ranges per counter data image */
    uint64_t gpu_buffer_size;
    char cupti_library[MLPROF__PATH_MAX];
    int profile_all;
    int profile_api;
    int profile_memory;
    int profile_operator;   /* profile_symbolic || profile_imperative, kept in step */
    int profile_symbolic;   /* MXNet's two kinds of operators: both map onto */
    int profile_imperative; /* the operator class (MLPROF_CLASS_OPERATOR) */
    char profile_process[16];                                   /* "worker" or "server": this process */
    char gpu_memory_profile_filename_prefix[MLPROF__PATH_MAX]; /* memory_csv "auto" goes to PREFIX-pid_PID.csv */
    int aggregate_stats;
    int stats_steps; /* stats.c: per-step rows for the last stats_steps steps; 0 none */
    int continuous_dump;
    double dump_period;
    int level;
    uint64_t buffer_size;
    uint64_t max_trace_size; /* bytes of events a trace's file takes at most; 0: no limit */
    char mode[16];           /* "normal" or "ring" (the flight recorder, collect.c) */
    uint64_t ring_size;      /* ring: bytes of records kept; 0: half of buffer_size */
    double ring_seconds;     /* ring: age of the oldest records kept; 0: no limit */
    int ring_full_decode;    /* ring: decode every evicted record (collect.c's evict_head), not only the cut spans */
    int dump_at_exit;
    int json_copy;           /* keep a Chrome JSON copy of a trace in another format, for mlprof_dump_string */
    int autostart;
    char clock[16];
    char clock_shift[64]; /* test-only: OFFSET_NS[:DRIFT_PPB] added to every timestamp */
    char rank[16]; /* this process's rank (src/record/dist.c); "" for the launcher's */
    int on_demand;           /* listen for `mlprof capture PID` (capture.c) */
    char capture_range[256]; /* record between the program's own markers (capture.c) */
    char dump_signal[16];    /* a signal that writes the trace so far (capture.c); "" or "off": none */
} mlprof__config;

/* The shared state of the library. Fields marked (ctl) are guarded by ctl_lock. */
typedef struct mlprof__global {
    pthread_mutex_t ctl_lock;  /* configuration, state, dumps */
    pthread_mutex_t reg_lock;  /* handle and domain registration */
    mlprof__config cfg;        /* (ctl) */
    int state;                 /* (ctl) MLPROF_STATE_*; stored atomically, read without the lock */
    int paused;                /* (ctl) the same */
    int recorded;              /* atomic: anything recorded since the last final dump */
    int forked_child;          /* this process is a fork of the one that started */
    pid_t pid;
    char process_name[128];    /* (ctl) */
    mlprof_domain *domains;    /* (reg) */
    mlprof__handle *handles;   /* (reg) */
    mlprof__thread *threads;   /* atomic list head */
    uint32_t thread_seq;       /* atomic */
    mlprof__scope_node scope_root;
    uint64_t dropped_exited;   /* atomic: drops of threads whose records were freed, and of
                                  threads that could not register (mlprof__thread_self) */
    uint64_t run_ns;           /* (ctl) when this trace began recording, 0 before; atomic: read without ctl */
} mlprof__global;

extern mlprof__global mlprof__g;

/* Writes the trace from a handler of a fatal signal (best effort: nothing
 * when the lock is held). */
int mlprof__dump_on_signal(int sig);
/* The same for a SIGTERM that stops a child of the run (children.c): says
 * nothing when the trace is written, as an exit would not. */
int mlprof__dump_on_term(int sig);
/* mlprof__dump_on_term's answer when the interrupted thread holds ctl_lock:
 * the dump waits until it lets it go (mlprof__term_if_pending). */
#define MLPROF__LATER 1
/* Signal handlers waiting for ctl_lock to write the trace (control.c): a
 * drain that holds the lock stops at its next chunk and lets them have it
 * (what it leaves, their dump drains). */
extern int mlprof__dump_waiting;
/* Whether this is a process of mlprof run (its MLPROF_RUN_PART: control.c),
 * whose summary says for the whole run what each process would say alone. */
int mlprof__in_run(void);
static inline int mlprof__dump_wanted(void) { return __atomic_load_n(&mlprof__dump_waiting, __ATOMIC_RELAXED) != 0; }
/* A SIGTERM deferred so (children.c): its signal number, else 0. */
extern int mlprof__term_pending;
void mlprof__term_now(void);
/* From a handler about to write the trace for signal sig: if that stops
 * moving for 10 s (or takes a minute), the process dies of sig anyway,
 * said on stderr. */
void mlprof__dump_deadline(int sig);
/* After ctl_lock is let go: a SIGTERM that waited for it writes the trace and
 * ends the process now. One load otherwise. */
static inline void mlprof__term_if_pending(void)
{
    if (__builtin_expect(__atomic_load_n(&mlprof__term_pending, __ATOMIC_ACQUIRE) != 0, 0))
        mlprof__term_now();
}

/* ctl_lock, marking the thread busy inside mlprof while it is held. */
static inline void mlprof__ctl_lock(void)
{
    mlprof__busy++;
    pthread_mutex_lock(&mlprof__g.ctl_lock);
}
static inline void mlprof__ctl_unlock(void)
{
    pthread_mutex_unlock(&mlprof__g.ctl_lock);
    mlprof__busy--;
    mlprof__term_if_pending();
}
/* Nonzero while memory operations are recorded (running, not paused, and
 * profile_memory or profile_all on). Read on the hot path. */
extern int mlprof__mem_on;

/* steps.c, for control.c: a run starts (ctl_lock held): with a schedule, its
 * steps are counted from 0, and 1 says that step 0 is not recorded (the
 * state stays stopped); 0 for a start as usual. A stop or a finished dump
 * that the program asked for ends the schedule. Neither acts on the changes
 * the schedule makes itself. */
int mlprof__steps_hold(void);
void mlprof__steps_stopped(void);
/* Marks the calling thread's next state changes and dumps as not the
 * program's (capture.c's captures): the steps go on counting. */
void mlprof__steps_internal(int on);
/* The cycle of the schedule whose files are written now, or -1; *has_many:
 * the schedule has more than one cycle (its files need their number). */
int mlprof__steps_cycle(int *has_many);
/* For the statistics' per-step rows: the step of this run whose time holds
 * ts_ns (mlprof_now_ns's clock). A step runs from begin_ns (0 for step 0:
 * from the run's start) to end_ns (its mlprof_step; 0 while under way), and
 * what happens before the next one begins (until_ns; UINT64_MAX for the step
 * under way) is its own. 0 when ts_ns is older than the steps kept. */
typedef struct mlprof__step_range {
    uint64_t run, step, begin_ns, end_ns, until_ns;
} mlprof__step_range;
int mlprof__steps_find(uint64_t ts_ns, mlprof__step_range *out);
/* Changes whenever a step ends or a run starts: a range found before stays
 * true while it does not. */
uint64_t mlprof__steps_gen(void);

/* Makes sure the library is initialized (environment, config file, fork and
 * exit handlers). Safe to call often: one load when done. */
void mlprof__ensure_init(void);
/* How many MLPROF_* variables (and MLPROF_CONFIG's file) the initialization
 * ignored for a bad value or as a near miss of a key (each said on stderr,
 * naming it): mlprof run refuses to start a command with them. */
int mlprof__env_rejected(void);
/* Recomputes every handle's and domain's `on` flag and the active flag from
 * the configuration and state. Caller holds ctl_lock. */
void mlprof__update_flags(void);

/* ------------------------------------------------------ observers */

/* Registered observers; the recorder calls the functions below only when
 * this is not zero. */
extern int mlprof__obs_count;
/* A span began (handle; or NULL with the domain for a run-time name), ended,
 * got an argument; a marker was recorded (the arguments after it are its). */
void mlprof__observe_begin(const void *handle, const mlprof_domain *domain, const char *name, int frame);
void mlprof__observe_end(const void *handle, const mlprof_domain *domain);
void mlprof__observe_arg(const char *key, const mlprof_arg_value *value);
void mlprof__observe_mark(void);
/* Register and unregister with ctl_lock held and the state checked (for the
 * built-in observers, at a run's start and stop). */
int mlprof__observer_register_locked(const mlprof_observer *observer);
int mlprof__observer_unregister_locked(int id);
/* Frees a thread's observer stack. */
void mlprof__observe_thread_free(mlprof__thread *t);

/* ------------------------------------------------------ chunk pool */

/* Maps the arena at the first run; nothing in it is touched. Caller holds
 * ctl_lock. */
int mlprof__pool_init(uint64_t buffer_size);
int mlprof__pool_ready(void);
size_t mlprof__pool_chunk_size(void);
size_t mlprof__pool_chunk_count(void);
/* Chunks neither held by threads nor waiting for the collector. */
size_t mlprof__pool_free_count(void);
/* Chunks in use past which a thread taking one wakes the collector
 * (mlprof__wake); 0: half of the pool, as at the start. */
void mlprof__pool_set_high_water(size_t chunks);
/* The collector is done with a segment: its chunk goes back to the free list
 * once no other segment of it is in use. */
void mlprof__pool_put(mlprof__chunk *c);
/* A segment with room for at least `bytes`, or NULL when the pool is
 * exhausted, not set up yet, or its chunks are smaller than that. Lock-free;
 * the recording thread's slow path. */
mlprof__chunk *mlprof__pool_get(size_t bytes);
/* An exited thread's last segment, written up to pos: the rest of its chunk
 * is listed for the next thread that needs room. Called by that thread. */
void mlprof__pool_retire(mlprof__chunk *c, const char *pos);
/* Keeps a few chunks in the free list faulted in and touched, so that a
 * thread taking one does not pay for the first touch of its pages. From the
 * collector's side (the continuous dump's thread). */
void mlprof__pool_keep_warm(void);
/* After fork: every chunk free again, no thread owns one. */
void mlprof__pool_reset_after_fork(void);

/* The calling thread's record (registers it if needed: after its exit handler
 * ran, as a late record that the collector frees once the thread is gone);
 * NULL, counted as a dropped event, if out of memory or in a signal handler
 * that interrupted the registration. */
mlprof__thread *mlprof__thread_self(void);
/* Frees threads that have exited and whose records are all consumed. Caller
 * holds ctl_lock and is the only consumer. */
void mlprof__threads_reap(void (*forget)(mlprof__thread *));
/* The stop fence (recorder.c): set up at the first run; after the active and
 * memory flags are cleared, waits until no other thread is inside a recording
 * call, so that observers may change and no record is published late. Caller
 * holds ctl_lock. */
void mlprof__recorder_fence_init(void);
void mlprof__recorder_quiesce(void);
/* In a forked child: forget the parent's threads; the caller's record starts empty. */
void mlprof__thread_after_fork(void);

#endif /* MLPROF_RECORD_H */
