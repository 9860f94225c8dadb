/*
 * produce.h - how modules hand the collector what they make, and how the
 * collector drives them, without either naming the other.
 *
 * The producer interface: events that come with their own times (GPU
 * activity, CUDA-event regions, the memory accounting's series and peaks,
 * the range profiler's ranges) are queued here, typed, by any thread at any
 * time (never the hot path); the collector drains the queue at each drain and
 * hands the events to the sinks. Ext tracks (a GPU stream, the regions) get a
 * synthetic thread id by name.
 *
 * The lifecycle table: each module is one mlprof__module entry (src/record/
 * modules.c lists them); control.c and the collector call every entry's
 * functions in table order and name no module.
 *
 * The wake-up and the drain: the collector registers what wakes its
 * continuous-dump thread and what drains every thread now; lower layers (the
 * pool, CUPTI's buffer callback, the memory API) call mlprof__wake and
 * mlprof__drain_now.
 */
#ifndef MLPROF_PRODUCE_H
#define MLPROF_PRODUCE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

/* ------------------------------------------------------------ the queue */

enum { MLPROF__EV_SPAN = 'X', MLPROF__EV_FLOW_START = 's', MLPROF__EV_FLOW_END = 'f',
       MLPROF__EV_INSTANT = 'i', MLPROF__EV_COUNTER = 'C' };

typedef struct mlprof__event {
    char type;    /* MLPROF__EV_* */
    char is_int;  /* counters: ivalue is exact */
    char scope;   /* instants: MLPROF_SCOPE_* */
    int tid;      /* the thread or synthetic track (mlprof__produce_track) */
    uint64_t begin_ns, end_ns; /* instants, counters and flow ends: begin_ns */
    uint64_t id;  /* a flow's */
    int64_t ivalue;
    double value;
    char *domain, *name, *args; /* owned by the queue; args: JSON members or NULL */
} mlprof__event;

/* A queue of typed events. The shared one (NULL in the calls below) is
 * bounded and locked; a caller's own (the collector's, for one drain or one
 * tail) is unbounded and not locked. */
typedef struct mlprof__produced {
    mlprof__event *q;
    size_t n, cap;
    size_t max;       /* 0: unbounded */
    uint64_t dropped; /* events refused (full, or out of memory) */
    int poked;
} mlprof__produced;

void mlprof__produced_init(mlprof__produced *p);
/* Frees the events and the array. */
void mlprof__produced_free(mlprof__produced *p);

/* A synthetic thread id for an ext track by its name (-1 when too many). */
int mlprof__produce_track(const char *name);
/* Calls fn for every ext track, in the order they were named. */
void mlprof__produce_tracks(void (*fn)(void *ctx, int tid, const char *name, uint32_t index), void *ctx);

/* Each queues an event (copied) into p (NULL: the shared queue); MLPROF_OK,
 * or MLPROF_ELIMIT / MLPROF_ENOMEM when refused (counted: the shared one's in
 * otherData.external_dropped). */
int mlprof__produce_span(mlprof__produced *p, int tid, const char *domain, const char *name, uint64_t begin_ns,
                         uint64_t end_ns, const char *args);
/* A flow from the slice on from_tid at from_ns to the slice that encloses
 * to_ns on to_tid (a launch to its kernel): both ends or none. */
int mlprof__produce_flow(mlprof__produced *p, uint64_t id, int from_tid, uint64_t from_ns, int to_tid,
                         uint64_t to_ns);
/* One end of a flow whose other end another process records (an MPI message:
 * the sender's 's', the receiver's 'f'; src/hook/mpi.c): ph 's' or 'f', bound
 * to the slice that encloses ns on tid, in category domain. */
int mlprof__produce_flow_end(mlprof__produced *p, char ph, uint64_t id, int tid, uint64_t ns, const char *domain,
                             const char *name);
int mlprof__produce_instant(mlprof__produced *p, int tid, int scope, const char *domain, const char *name,
                            uint64_t ts_ns, const char *args);
int mlprof__produce_counter(mlprof__produced *p, int tid, const char *domain, const char *name, uint64_t ts_ns,
                            int is_int, int64_t ivalue, double value);

/* Takes the shared queue's events (the caller frees them with
 * mlprof__produced_free). */
void mlprof__produce_take(mlprof__produced *out);
/* Events the shared queue refused since the last mlprof__produce_forget. */
uint64_t mlprof__produce_dropped(void);
/* In a forked child, and when a trace is cleared: drops what is queued. */
void mlprof__produce_forget(int after_fork);

/* --------------------------------------------------- wake-up and drain */

/* Registered by the collector: wakes its continuous-dump thread (lock-free,
 * any thread, the hot path's pool included) and drains every thread now
 * (ctl_lock held). */
void mlprof__set_waker(void (*wake)(void));
void mlprof__set_drainer(void (*drain)(void));
/* Wakes the registered waker, if any. Lock-free. */
void mlprof__wake(void);
/* Drains every thread (ctl_lock held); nothing when no drainer is registered. */
void mlprof__drain_now(void);
/* Registered by control.c: writes the trace from a handler of a fatal
 * signal. mlprof__crash_dump calls it (MLPROF_ESTATE when none is). */
void mlprof__set_crash_dumper(int (*dump)(int sig));
int mlprof__crash_dump(int sig);

/* ------------------------------------------------------ the lifecycle */

/* A runtime call whose CPU operators a module wants: the spans open on
 * thread tid at time ns (the GPU launches). */
typedef struct mlprof__launch_point {
    pid_t tid;
    uint64_t ns;
    uint32_t index; /* the module's */
} mlprof__launch_point;

/* Span arguments the collector sums per span, at most (arg_slot's range). */
#define MLPROF__ARG_SLOTS 32

/* What a drain tells the modules. */
typedef struct mlprof__drain_info {
    int discard;              /* drop what was recorded */
    int final;                /* the trace ends: deliver everything */
    uint64_t upto_ns;         /* memory operations are accounted up to this time */
    mlprof__produced *events; /* the drain's own queue (account, tail) */
} mlprof__drain_info;

/* One module. Every function may be NULL; all are called with ctl_lock held
 * unless said. */
typedef struct mlprof__module {
    const char *name;
    /* checks the value of a configuration key of the module's: 1 when key
     * is not its own, 0 when value is good (*mask: what it parsed, for the
     * keys that keep one), -1 with why naming the bad item; any time */
    int (*parse_key)(const char *key, const char *value, unsigned *mask, char *why, size_t len);
    /* a run starts: before recording is on (observers register then) */
    int (*start)(void);
    /* recording is on: at a run's start and at resume */
    void (*resume)(void);
    /* recording is off: at pause and stop */
    void (*pause)(void);
    /* a run stops (after pause); what it started is asked to stop */
    void (*stop)(void);
    /* without ctl_lock, after stop: waits for its threads */
    void (*join)(void);
    /* without ctl_lock, before a final dump and at exit: stops its threads
     * and waits, so that their last events are in the trace */
    void (*quiesce)(void);
    /* at exit, before the final dump: measurements still running end */
    void (*finish)(void);
    /* before a fork (ctl_lock held, reg_lock not yet): the module's threads
     * stop between two rounds of their work and stay there until
     * fork_parent, so that none is inside malloc, libdw or dlopen while the
     * process forks (a sanitizer's allocator has no fork handler: its lock,
     * held by a thread the child has not, would hold the child up for
     * good); their rounds must not wait for ctl_lock */
    void (*fork_prepare)(void);
    /* in the parent after the fork: the threads go on */
    void (*fork_parent)(void);
    /* in a forked child; running: the child goes on recording */
    void (*after_fork)(int running);
    /* before the threads are drained: delivers what the module buffered;
     * *points receives the launches whose operators it wants (owned by the
     * module, valid until emit); returns how many */
    size_t (*flush)(const mlprof__drain_info *d, mlprof__launch_point **points);
    /* the collector's answer for one point: the spans open, outermost first */
    void (*launch_ops)(uint32_t index, const char *const *names, size_t depth);
    /* after the threads: queues the module's events (shared queue) */
    void (*emit)(const mlprof__drain_info *d);
    /* a memory record the collector decoded (op: MLPROF__MEM_*); op_name:
     * the innermost span open on its thread */
    void (*memory_op)(uint64_t ns, int device, unsigned op, uint64_t addr, uint64_t bytes, const void *scope,
                      const char *tag, size_t tag_len, const char *op_name, size_t op_len, pid_t tid);
    /* last in a drain: accounts up to d->upto_ns; samples go to d->events
     * unless d->discard */
    void (*account)(const mlprof__drain_info *d);
    /* the slot of a span argument named after a counter (summed per span;
     * below MLPROF__ARG_SLOTS), or -1 */
    int (*arg_slot)(const char *key, size_t len);
    /* events for a dump's tail only (rewritten at every dump) */
    void (*tail)(mlprof__produced *events);
    /* appends ,"key":value members to the trace's otherData */
    void (*other_data)(mlprof__sb *out);
    /* appends "key":value,\n top-level members of the JSON trace (the
     * sampled stacks' stackFrames and samples), rewritten at every dump */
    void (*trace_members)(mlprof__sb *out);
    /* at each dump: says on stderr what was lost since the last time */
    void (*report)(void);
    /* a new trace begins (after a finished dump, a clear, a fork) */
    void (*reset)(void);
    /* the statistics start again (a clear, mlprof_dumps with reset, a fork) */
    void (*clear)(void);
} mlprof__module;

extern const mlprof__module *const mlprof__modules[];
extern const size_t mlprof__nmodules;

#define MLPROF__FOR_MODULES(m)                                                                            \
    for (const mlprof__module *const *m##_it = mlprof__modules, *m;                                       \
         m##_it < mlprof__modules + mlprof__nmodules && ((m = *m##_it), 1); m##_it++)

/* ---------------------------------------------------------- the paths */

/* A configured path with "%p" replaced by the pid, "%r" by the rank ("norank"
 * when none is known), "%h" by the host name, "%c" by the schedule's cycle
 * (steps.c: ".cycleN" goes before the extension when a schedule has several
 * and the name has no "%c") and "%%" by "%". Unless
 * fork_suffix is 0 (a prefix that gets the pid after it): when a rank is
 * known and the world is not one process, a name without "%r" gets ".rankR"
 * before its extension (name.rank3.json, name.rank3.json.gz), so the ranks of
 * a job never overwrite each other's files; in a forked child, which must
 * not overwrite its parent's files, and in a process whose trace path another
 * process of the run took (children.c), ".PID" goes before the extension
 * unless the name holds "%p". */
void mlprof__expand_path(const char *name, int fork_suffix, char *buf, size_t len);
/* The configured trace's path before a forked child's .PID (and a
 * schedule's .cycleN): the path a process of a run claims. 1 when the name
 * holds %p (no other process has that path). */
int mlprof__trace_base_path(char *buf, size_t len);

/* children.c: the processes the program starts, and their traces. */
/* At the start: the table of forked children (shared memory), and the trace
 * path the environment says another process of the run writes. */
void mlprof__children_init(void);
/* In a forked child, from the fork handler, before anything records in it. */
void mlprof__children_after_fork(int recording);
/* The process starts recording (ctl_lock held): the first of a run claims its
 * trace's path; a child of the run gets SIGTERM's handler, a forked one its
 * slot. */
void mlprof__children_recording(void);
/* A finished trace was written, or the exit handler ran (which writes it or
 * says why not): a forked child's parent has nothing to report of it. */
void mlprof__children_settled(void);
/* A forked child is about to run another program (1), or its exec failed
 * (0): the preload's exec family (src/hook/exec.c). */
void mlprof__children_exec(int going);
/* control.c, for the same: before an exec, a process that is not a forked
 * child writes what it recorded (as at exit; under mlprof run as a part of
 * its own); returns whether it was recording. After an exec that failed,
 * it records again if it was. */
int mlprof__before_exec(void);
void mlprof__exec_failed(int was_recording);
/* Says which forked children of this process ended having recorded events
 * and written no trace; each once. */
void mlprof__children_report(void);
/* 1 when path (relative to the working folder, or absolute) is the trace
 * path that another process of the run, whose environment this one
 * inherited, claimed. */
int mlprof__children_name_taken(const char *path);
/* Says once that this process's trace goes to path instead of the claimed one. */
void mlprof__children_say_renamed(const char *path);
/* &this forked child's slot's recorded flag, or NULL: the recorder sets it
 * when a thread takes its first chunk. */
extern int *mlprof__child_recorded;
/* The program's name for the trace: mlprof_process_set_name's, else argv[0]
 * without its folder. */
void mlprof__process_name(char *buf, size_t len);

#endif /* MLPROF_PRODUCE_H */
