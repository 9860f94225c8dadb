/*
 * mlprof.h - the public C API of libmlprof, the mlprof profiler library.
 *
 * One header is all a user includes. It has two layers:
 *   - exported functions over opaque handles (the ABI), documented below;
 *   - inline macros on top (MLPROF_BEGIN, MLPROF_ZONE, ...) that cost one load and
 *     one unlikely branch when the profiler is not recording. Define MLPROF_DISABLE
 *     before including this header to make every macro vanish at compile time.
 *
 * Thread-safety: unless a function says otherwise, every function may be called
 * from any thread at any time. Recording functions (begin/end, counters, markers,
 * arguments, scopes) take no lock, allocate nothing and make no system call once
 * a thread has recorded its first event.
 *
 * Forks: a process may fork at any time, from any thread, while other threads
 * record or create handles; the child goes on with its forking thread only,
 * its own trace (name.PID.ext) and its own per-span counters. Signals: the
 * recording calls are the only ones meant for a signal handler, on a thread
 * that has recorded before (its first event registers it); creating handles,
 * configuring, starting, stopping and dumping take locks and must not be
 * called from one; a handler's event that interrupts a record of its thread
 * is dropped and counted. Thread exit: spans recorded from a key destructor
 * are kept, without per-span counters once the thread's own were closed
 * (those that run after mlprof's own destructor too).
 * docs/ARCHITECTURE.md ("Threads, forks and signals") lists the locks.
 *
 * Errors: functions that can fail return an int status (MLPROF_OK or a negative
 * MLPROF_E* code) and set a per-thread message, read with mlprof_last_error().
 * Functions returning handles return NULL on failure and set the message.
 */
#ifndef MLPROF_MLPROF_H
#define MLPROF_MLPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ version */

#define MLPROF_VERSION_MAJOR 0
#define MLPROF_VERSION_MINOR 1
#define MLPROF_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, comparable with mlprof_version(). */
#define MLPROF_VERSION_NUMBER \
    (MLPROF_VERSION_MAJOR * 10000 + MLPROF_VERSION_MINOR * 100 + MLPROF_VERSION_PATCH)
#define MLPROF_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define MLPROF_API
#elif defined(__GNUC__)
#define MLPROF_API __attribute__((visibility("default")))
#else
#define MLPROF_API
#endif

/* The version of the library actually loaded, as MLPROF_VERSION_NUMBER. */
MLPROF_API unsigned mlprof_version(void);
/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". */
MLPROF_API const char *mlprof_version_string(void);

/* ------------------------------------------------------------------- errors */

/* One table gives the codes, their names and their messages. */
#define MLPROF_ERRNO_MAP(X)                                                       \
    X(OK, 0, "success")                                                           \
    X(EINVAL, -1, "invalid argument")                                             \
    X(EKEY, -2, "unknown configuration key")                                      \
    X(EVALUE, -3, "bad configuration value")                                      \
    X(ESTATE, -4, "not allowed in the profiler's current state")                  \
    X(EIO, -5, "input/output error")                                              \
    X(ENOMEM, -6, "out of memory")                                                \
    X(EPARSE, -7, "malformed input")                                              \
    X(EUNSUPPORTED, -8, "not supported on this system")                           \
    X(ELIMIT, -9, "a fixed limit was reached")

typedef enum mlprof_status {
#define MLPROF_I_ERRNO_ENUM(name, code, msg) MLPROF_##name = code,
    MLPROF_ERRNO_MAP(MLPROF_I_ERRNO_ENUM)
#undef MLPROF_I_ERRNO_ENUM
} mlprof_status;

/* The message for a status code ("unknown error" for a code not in the table). */
MLPROF_API const char *mlprof_strerror(int status);
/* The name of a status code, such as "MLPROF_EKEY". */
MLPROF_API const char *mlprof_err_name(int status);
/* The detailed message of the last error on the calling thread ("" if none).
 * It names the key, value, file and line involved. Valid until the next call
 * that fails on this thread. */
MLPROF_API const char *mlprof_last_error(void);

/* ------------------------------------------------------------ configuration */

/*
 * Configuration keys (values are strings; booleans accept 1/0, true/false,
 * yes/no, on/off). The same keys are read, at the first call into the library,
 * from MLPROF_<KEY> environment variables (MLPROF_FILENAME, MLPROF_BUFFER_SIZE...)
 * and from the file named by MLPROF_CONFIG.
 *
 *   filename         trace output path; "%p" becomes the pid         "profile.json"
 *   profile_all      record every class of domain                    false
 *   profile_api      record domains of class MLPROF_CLASS_API        false
 *   profile_memory   record domains of class MLPROF_CLASS_MEMORY     false
 *   profile_operator record domains of class MLPROF_CLASS_OPERATOR   true
 *                    (setting it sets the two keys below to its value;
 *                    read, it is profile_symbolic || profile_imperative)
 *   profile_symbolic MXNet's symbolic operators: operators (the class
 *                    above) are recorded while this or the next is on true
 *   profile_imperative  MXNet's imperative operators (see above)     true
 *   profile_process  MXNet's kvstore role, "worker" or "server"; mlprof
 *                    profiles the process it is loaded in either way,
 *                    the value is kept for mlprof_get_config         worker
 *   gpu_memory_profile_filename_prefix  MXNet's: when not empty and
 *                    memory_csv is "auto", the memory CSV is written
 *                    to PREFIX-pid_PID.csv ("%p" expands in PREFIX)  "" (none)
 *   aggregate_stats  keep aggregate statistics for mlprof_dumps       true
 *   continuous_dump  rewrite a complete trace every dump_period      false
 *   dump_period      seconds between continuous dumps (> 0)          1.0
 *   level            record domains whose level is <= this (0..9)    1
 *   buffer_size      bytes of event buffers, e.g. 64M (64K..64G)     64M
 *   stats_file       also write the statistics table here at dump    "" (none)
 *                    (auto: the trace's name, .stats.txt for its
 *                    extension; this key, memory_csv, memory_svg and sqlite_file
 *                    may not name the trace's file nor each other's:
 *                    MLPROF_EVALUE; /dev/null and the like excepted)
 *   schedule         steps recorded (mlprof_step):                   "" (none)
 *                    skip_first:N,wait:N,warmup:N,active:N,repeat:N;
 *                    "%c" in file names is the cycle's number
 *   dump_at_exit     dump at process exit if anything was recorded   true
 *   autostart        start recording at the first call (env/file)    false
 *                    (ignored with on_demand or capture_range)
 *   on_demand        record nothing until `mlprof capture PID` asks  false
 *                    (a thread of mlprof's serves a Unix socket,
 *                    $XDG_RUNTIME_DIR/mlprof/PID.sock, else
 *                    /tmp/mlprof-UID/PID.sock, to its own user only);
 *                    each capture writes the filename with ".captureN"
 *                    before the extension, or "%c" replaced by N (the
 *                    process's captures counted from 1). Read at the
 *                    start (MLPROF_ON_DEMAND=1) or set later; turning it
 *                    off does not close the socket
 *   capture_range    record between the program's own markers, each  "" (none)
 *                    range a trace of its own (named as on_demand's):
 *                    "span:NAME" (a task, frame or event handle named
 *                    NAME: its begin starts recording, its end on the
 *                    same thread stops it), "nvtx:NAME" (an NVTX push
 *                    of that message to its pop; mlprof run),
 *                    "cudaProfilerStart" (to cudaProfilerStop; mlprof
 *                    run). The range's end writes the trace on the
 *                    thread that ends it
 *   clock            "tsc", "monotonic" or "auto"                    auto
 *   memory_sample_rate  a "memory used" sample in the trace every N
 *                    memory operations per device (0: none)          1
 *   memory_csv       one row per block; "auto": beside the trace
 *                    (profile.memory.csv), "" for none               auto
 *   memory_svg       the memory flow picture; "auto": beside the
 *                    trace (profile.memory_flow.svg), "" for none    auto
 *                    ("auto" names the file after the trace's: a trace
 *                    written in place, /dev/null, /dev/stdout or a
 *                    FIFO, has none, and the output is left out, said
 *                    once on stderr; so is sqlite_file's "auto")
 *   memory_history   freed blocks kept for the CSV, the picture and
 *                    the live set at the peak (more are counted)     1M
 *   memory_top       blocks listed in the peak report                10
 *   counters         measured per span by built-in observers and added
 *                    to it as arguments (comma list; taken at run start):
 *                    perf_event counters (cycles, instructions,
 *                    cache-references, cache-misses, branches,
 *                    branch-misses, ref-cycles, task-clock, page-faults,
 *                    minor-faults, major-faults, context-switches,
 *                    cpu-migrations; up to 8), "rss" (the change of the
 *                    resident set, bytes) and "papi:NAME" (PAPI events,
 *                    up to 8)                                        ""
 *   sampler          series written by a sampler thread (comma list):
 *                    cpu, rss, rapl, nvml and perf_event counters over
 *                    the whole process                               ""
 *   sampler_period   seconds between samples (0.0001..3600)          0.01
 *   sampling         call stacks of every thread sampled this many
 *                    times per second of its CPU time (1..20000, or
 *                    off) through perf_event; written as the trace's
 *                    stackFrames and samples (mlprof flame)          off
 *   sampling_source  how: perf (perf_event), signal (a user CPU-time
 *                    timer per thread sending a real-time signal the
 *                    program does not handle, stacks copied by the
 *                    handler and walked by mlprof's thread), or auto:
 *                    perf, and signal where perf_event is refused    auto
 *   papi_library     where PAPI is loaded from                       libpapi.so
 *   nvml_library     where NVML is loaded from               libnvidia-ml.so.1
 *   powercap_dir     where RAPL's powercap zones are  /sys/class/powercap
 *   hooks            the interposers of `mlprof run` (libmlprof_preload):
 *                    malloc, blas, dnnl, cuda, cublas, cudnn, itt,
 *                    nvtx, mpi, nccl; "all" or "none". mpi is in libmlprof
 *                    too: a program linked with -lmlprof before its
 *                    MPI library has its MPI calls recorded          all
 *   nccl_proxy       the NCCL profiler plugin (libmlprof_preload as
 *                    NCCL_PROFILER_PLUGIN) records NCCL's proxy
 *                    operations and steps too (many events)          0
 *   clock_shift      TEST-ONLY: "OFFSET_NS[:DRIFT_PPB]" shifts every
 *                    timestamp this process writes by OFFSET plus
 *                    DRIFT * (t - start) / 1e9, to test the clock
 *                    alignment of distributed runs; only while nothing
 *                    is recorded                                     ""
 *   cuda_functions   the CUDA runtime functions the cuda hook records:
 *                    "all" or names such as cudaMalloc,cudaMemcpy    all
 *
 * Domains of class MLPROF_CLASS_USER are always recorded while running.
 */

/* Sets one key. Errors: MLPROF_EKEY (unknown key), MLPROF_EVALUE (bad value;
 * a file of stats_file, memory_csv, memory_svg or sqlite_file that is the
 * trace's or another of these keys', which it would replace at each dump),
 * MLPROF_ESTATE (buffer_size after the first run; clock while running, or
 * after a run until mlprof_dump(1) or mlprof_clear()). */
MLPROF_API int mlprof_set_config(const char *key, const char *value);
/* Sets n keys at once, all or none: on error nothing is changed. */
MLPROF_API int mlprof_set_configs(int n, const char *const *keys, const char *const *values);
/* Copies the current value of key, as text, into buf (always NUL-terminated).
 * Errors: MLPROF_EKEY, MLPROF_ELIMIT when buf is too small (truncated). */
MLPROF_API int mlprof_get_config(const char *key, char *buf, size_t len);
/* Reads "key = value" lines from a file ('#' starts a comment). All or none:
 * the first error names the file, line and key, and nothing is changed.
 * Errors: MLPROF_EIO (cannot open or read it, or it is a directory),
 * MLPROF_EPARSE, MLPROF_EKEY, MLPROF_EVALUE, MLPROF_ESTATE. Long values are
 * quoted in messages by their start and end, with their length. */
MLPROF_API int mlprof_load_config(const char *path);

/* -------------------------------------------------------------------- state */

typedef enum mlprof_state { MLPROF_STATE_STOP = 0, MLPROF_STATE_RUN = 1 } mlprof_state;

/* Starts (MLPROF_STATE_RUN) or stops (MLPROF_STATE_STOP) recording. Stopping
 * keeps what was recorded until it is dumped or cleared. Stopping (and
 * mlprof_dump(1)) waits for the other threads that are inside a recording call
 * (their observer callbacks included) to leave it: once it returns, no event
 * is added to the run just stopped and no observer callback runs. So an
 * observer callback must not wait for the thread that stops recording. */
MLPROF_API int mlprof_set_state(int state);
MLPROF_API int mlprof_get_state(void);
/* Pause and resume recording while running; a paused profiler records nothing. */
MLPROF_API int mlprof_pause(void);
MLPROF_API int mlprof_resume(void);
MLPROF_API int mlprof_is_paused(void);

/* ------------------------------------------------------------------- steps */

/* Marks the boundary between two steps of the program's loop (call it at the
 * end of each training step, as torch.profiler's step()): the step that ends
 * becomes a span "ProfilerStep#N" on the calling thread, with an argument
 * "step", when it was recorded. Steps are numbered from 0, counted from the
 * start of the run (mlprof_set_state(MLPROF_STATE_RUN), autostart).
 * With the schedule key ("skip_first:N,wait:N,warmup:N,active:N,repeat:N",
 * torch.profiler.schedule's meaning; repeat 0: cycles until the end), the
 * steps decide what is recorded: nothing during skipped and wait steps
 * (mlprof is stopped there, and costs what disabled costs), warmup steps
 * recorded and then thrown away, and at the end of each cycle's last
 * active step a finished dump of that cycle's steps to the filename with
 * "%c" replaced by the cycle's number (from 0; without "%c" in the name
 * and with more than one cycle, ".cycleN" goes before the extension), the
 * statistics file likewise. A stop or a finished dump asked by the program
 * ends the schedule until the next start. Thread-safe; meant to be called
 * from one thread. Errors: those of the dump or state change it made (the
 * steps go on). */
MLPROF_API int mlprof_step(void);
/* The number of the step under way: the calls to mlprof_step since the run
 * started (mlprof_set_state(MLPROF_STATE_RUN) by the program). */
MLPROF_API uint64_t mlprof_step_number(void);
/* Called after each cycle of the schedule is written: the trace's path and
 * the cycle's number, on the thread that called mlprof_step (not called
 * when the dump failed). fn NULL: none. */
typedef void (*mlprof_trace_ready_fn)(const char *trace_path, int cycle, void *user);
MLPROF_API void mlprof_on_trace_ready(mlprof_trace_ready_fn fn, void *user);

/* Copies the path the trace is written to (filename with "%p" replaced by the
 * pid, and ".PID" added before the extension in a forked child, or in a
 * process started with the environment of one that writes that same path:
 * README, "Child processes") into buf.
 * Errors: MLPROF_ELIMIT when buf is too small (truncated). */
MLPROF_API int mlprof_trace_path(char *buf, size_t len);

/* Writes the trace to the configured filename (atomically: a temporary file,
 * then a rename). Every dump holds everything recorded since the start (or the
 * last clear). finished != 0 also stops recording and ends the trace: the next
 * run starts an empty one; the statistics are kept for mlprof_dumps. A dump
 * to the path a finished trace was written to, with no run and no clear since
 * (a second mlprof_dump(1)), leaves that file as it is rather than replace it
 * with an empty trace, and says so in the log. If the buffers overflowed, the number of dropped events is in the trace's metadata
 * and a warning goes to the log. A FIFO or device at the path is written in
 * place, never replaced. Errors: MLPROF_EIO (what could be written is left
 * untouched: the old file stays until the new one is complete; a finished
 * dump that fails keeps the trace for the next dump; events lost because the
 * disk stayed full are counted in otherData.unwritten_events), MLPROF_EINVAL
 * (an output that is the trace's file, through a link or mlprof_dump_to's
 * path: the trace is written, that output is not, the message names its key
 * and path). */
MLPROF_API int mlprof_dump(int finished);
/* Exactly mlprof_dump(finished), but to path ("%p" expanded, and ".PID"
 * added in a forked child, as for filename): a regular file is replaced
 * atomically, a FIFO or device written in place, and on MLPROF_EIO what
 * was there is kept. The configured filename is neither changed nor
 * written (RAF's dump(filename): that file, for that dump only). The
 * memory outputs whose key is "auto" go beside path (PATH_STEM.memory.csv,
 * PATH_STEM.memory_flow.svg; the CSV at gpu_memory_profile_filename_prefix
 * when that is set), those named by their key where named; stats_file, when
 * set, is written as at any dump. Errors: those of mlprof_dump, and
 * MLPROF_EINVAL (NULL or empty path, or one of 4096 bytes or more; or path
 * is the file of stats_file, memory_csv, memory_svg or sqlite_file: the
 * trace is written there, that output is not).
 * Takes the configuration lock: not from a signal handler. */
MLPROF_API int mlprof_dump_to(const char *path, int finished);
/* Does now what the exit handler would: when dump_at_exit is on and anything
 * was recorded since the last finished dump, stops recording and writes the
 * trace (a forked child's to NAME.PID.json). For a process about to end
 * without exit handlers: a forked child leaving through _exit() (the Python
 * module calls it for multiprocessing's children, which end in os._exit).
 * The exit handler then finds nothing left to write. MLPROF_OK when there
 * was nothing to write; else the errors of mlprof_dump, also said on stderr.
 * Takes the configuration lock: not from a signal handler. */
MLPROF_API int mlprof_exit_dump(void);
/* The trace recorded so far as mlprof_dump(0) would write it, as Chrome
 * JSON with otherData whatever the trace's format (spans still open shown up
 * to now, flagged unfinished), in *out, NUL-terminated (free it with
 * mlprof_free): a gzip trace is given plain, a Perfetto trace from a JSON
 * copy of its events that the collector keeps from its start when the key
 * json_copy was on then (in a temporary file beside the spool: the JSON's
 * bytes on disk, and the JSON writer's time at each drain); without it a
 * Perfetto trace gives MLPROF_EUNSUPPORTED, naming the key. Events the continuous dump already moved to
 * its spool are included. Writes no file (not the trace, not stats_file,
 * not the memory outputs) and changes nothing: the trace goes on, recording
 * or not, its file's stream as it was (RAF's get()). Errors: MLPROF_EINVAL
 * (out is NULL), MLPROF_ENOMEM, MLPROF_EIO (the spool or the JSON copy could
 * not be read back, or the copy could not be written: said on stderr, the
 * trace file unaffected), MLPROF_EUNSUPPORTED (above); *out is NULL on error. Takes the configuration
 * lock: not from a signal handler. */
MLPROF_API int mlprof_dump_string(char **out);

typedef enum mlprof_format { MLPROF_FORMAT_TABLE = 0, MLPROF_FORMAT_JSON = 1 } mlprof_format;
typedef enum mlprof_sort {
    MLPROF_SORT_TOTAL = 0,
    MLPROF_SORT_AVG = 1,
    MLPROF_SORT_MIN = 2,
    MLPROF_SORT_MAX = 3,
    MLPROF_SORT_COUNT = 4,
    MLPROF_SORT_SELF = 5
} mlprof_sort;

/* The aggregate statistics, per domain, as a table or JSON in *out (free it with
 * mlprof_free). Rows are sorted by sort_by, descending unless ascending != 0.
 * When memory was recorded, the memory profiler's report follows (in JSON, a
 * "memory" member). reset != 0 clears the statistics after printing them, and
 * starts the memory peaks again from the memory in use. */
MLPROF_API int mlprof_dumps(char **out, int format, int sort_by, int ascending, int reset);
/* Discards every recorded event and statistic (the state is unchanged). */
MLPROF_API int mlprof_clear(void);
/* Frees memory returned by the library (mlprof_dumps, mlprof_dump_string,
 * mlprof_mem_trace). */
MLPROF_API void mlprof_free(void *p);

/* The number of events dropped because the buffers were full, so far. */
MLPROF_API uint64_t mlprof_dropped_events(void);
/* Bytes of event buffers in use (chunks held by threads or waiting to be
 * drained) and their fixed capacity (buffer_size rounded to whole chunks);
 * both 0 before the first run. Lock-free. */
MLPROF_API void mlprof_buffer_usage(uint64_t *used_bytes, uint64_t *capacity_bytes);

/* ------------------------------------------------------------------ domains */

typedef struct mlprof_domain mlprof_domain;
typedef struct mlprof_span mlprof_span;       /* a task, a frame or an event */
typedef struct mlprof_counter mlprof_counter;
typedef struct mlprof_marker mlprof_marker;

/* What a domain records; profile_* keys switch classes on and off. */
typedef enum mlprof_class {
    MLPROF_CLASS_USER = 0,     /* always recorded while running */
    MLPROF_CLASS_OPERATOR = 1, /* profile_operator */
    MLPROF_CLASS_API = 2,      /* profile_api */
    MLPROF_CLASS_MEMORY = 3    /* profile_memory */
} mlprof_class;

/* Returns the domain of that name (created on first use; never destroyed).
 * A domain is the category of its events in the trace and a section of the
 * statistics. NULL name: the default domain "default". */
MLPROF_API mlprof_domain *mlprof_domain_create(const char *name);
/* Sets the class of a domain (see mlprof_class). */
MLPROF_API int mlprof_domain_set_class(mlprof_domain *domain, int klass);
/* Sets the level of a domain (0..9, default 1): it records only while the
 * "level" key is at least this. */
MLPROF_API int mlprof_domain_set_level(mlprof_domain *domain, int level);
MLPROF_API const char *mlprof_domain_name(const mlprof_domain *domain);

/* -------------------------------------------------- tasks, frames and events */

/*
 * Handles for durations. A task is a unit of work on one thread; tasks nest.
 * A frame is one numbered pass of a repeated period (a batch, an iteration):
 * it is shown on a track of its own and its statistics are per pass. An event
 * is a task in the default domain. Create handles once and begin/end them
 * often: begin and end are the hot path. A NULL domain means the default one.
 */
MLPROF_API mlprof_span *mlprof_task_create(mlprof_domain *domain, const char *name);
MLPROF_API mlprof_span *mlprof_frame_create(mlprof_domain *domain, const char *name);
MLPROF_API mlprof_span *mlprof_event_create(const char *name);
/* Releases a handle. Events already recorded with it are kept. */
MLPROF_API void mlprof_span_destroy(mlprof_span *span);
MLPROF_API const char *mlprof_span_name(const mlprof_span *span);

/* Begins and ends a duration on the calling thread. end closes the innermost
 * open duration of this handle; durations must nest: spans opened after it and
 * still open are closed with it and flagged "unfinished". An end with nothing
 * to close (its begin came before the run, or was dropped) is ignored and
 * counted in the trace metadata (unmatched_ends). Spans still open when the
 * trace is finished are closed at the thread's last event, flagged unfinished.
 * No-ops when not recording. */
MLPROF_API void mlprof_begin(mlprof_span *span);
MLPROF_API void mlprof_end(mlprof_span *span);

/* Durations with a name known only at run time: the name is copied into the
 * buffer (up to 255 bytes). end_dynamic closes the innermost dynamic duration. */
MLPROF_API void mlprof_begin_dynamic(mlprof_domain *domain, const char *name);
MLPROF_API void mlprof_end_dynamic(mlprof_domain *domain);
/* Begins a duration with a run-time name, as mlprof_begin_dynamic, with two
 * string arguments: "category" and "args" (each left out when NULL; copied,
 * up to 255 bytes). The begin of MLPROF_WITH (RAF's WITH_BASE_PROFILER).
 * Returns the domain to end it with (mlprof_end_dynamic; the default domain
 * when domain is NULL), or NULL when nothing was begun (not recording, or
 * the domain is filtered out by its class or level): then there is nothing
 * to end, and the arguments went nowhere. Hot path: no lock, no allocation
 * (but for the first call with a NULL domain, which creates the default
 * domain). */
MLPROF_API mlprof_domain *mlprof_begin_with(mlprof_domain *domain, const char *name, const char *category,
                                            const char *args);

/* -------------------------------------------------------- counters, markers */

/* A named series of values (chrome "C" events), starting at 0. */
MLPROF_API mlprof_counter *mlprof_counter_create(mlprof_domain *domain, const char *name);
MLPROF_API void mlprof_counter_destroy(mlprof_counter *counter);
MLPROF_API void mlprof_counter_set(mlprof_counter *counter, int64_t value);
/* Adds delta (negative to decrement) atomically and records the new value.
 * The time and the value are taken together: the samples of a counter that
 * only grows, added to from any threads, rise with time. */
MLPROF_API void mlprof_counter_add(mlprof_counter *counter, int64_t delta);
/* Records a floating-point sample (power, utilization...). */
MLPROF_API void mlprof_counter_set_double(mlprof_counter *counter, double value);
/* The counter's current integer value. */
MLPROF_API int64_t mlprof_counter_value(const mlprof_counter *counter);

typedef enum mlprof_scope {
    MLPROF_SCOPE_GLOBAL = 0,
    MLPROF_SCOPE_PROCESS = 1,
    MLPROF_SCOPE_THREAD = 2
} mlprof_scope;

/* An instant in time (chrome "i" event) with a global, process or thread scope. */
MLPROF_API mlprof_marker *mlprof_marker_create(mlprof_domain *domain, const char *name);
MLPROF_API void mlprof_marker_destroy(mlprof_marker *marker);
MLPROF_API void mlprof_mark(mlprof_marker *marker, int scope);
/* The same with a run-time name (copied, up to 255 bytes). */
MLPROF_API void mlprof_mark_dynamic(mlprof_domain *domain, const char *name, int scope);

/* ---------------------------------------------------------------- arguments */

/*
 * Key/value arguments (shapes, dtypes, FLOPs, bytes) for the marker recorded
 * just before on the calling thread if nothing else was recorded since, else
 * for the innermost open duration of the thread (a frame just begun counts).
 * Keys are copied (up to 63 bytes), string values too (up to 255 bytes).
 * A NULL key records nothing and sets the last error (MLPROF_EINVAL); a NULL
 * string value is recorded as an empty string.
 */
MLPROF_API void mlprof_arg_int(const char *key, int64_t value);
MLPROF_API void mlprof_arg_double(const char *key, double value);
MLPROF_API void mlprof_arg_str(const char *key, const char *value);

/* ------------------------------------------------------------------- scopes */

/* Nested names for attributing work (and memory) to parts of a program: push
 * "model" then "conv1" and the current scope is "model:conv1:". Spans begun
 * inside a scope carry it as their "scope" argument. Per thread. */
MLPROF_API void mlprof_scope_push(const char *name);
MLPROF_API void mlprof_scope_pop(void);
/* The calling thread's current scope ("" at the top). */
MLPROF_API const char *mlprof_scope_current(void);

/* ---------------------------------------------------------------- observers */

/*
 * Observers are plug-ins called on the recording thread when a span begins,
 * when an argument is added to it, and when it ends: to read hardware
 * counters around it, to measure memory, to log. Each gets span_data_size
 * bytes of scratch per open span (zeroed at its begin) and may add arguments
 * to the span with mlprof_arg_* from on_begin and on_end (they land on the
 * span; arguments an observer adds do not call on_arg again). Spans of tasks,
 * frames, events and run-time names are observed, while recording.
 * Registering none costs nothing on the hot path. Register and unregister
 * only while stopped (MLPROF_ESTATE otherwise).
 */
typedef struct mlprof_span_info {
    const char *name;   /* the span's name (valid during the call) */
    const char *domain; /* its domain's name */
    int frame;          /* 1 for a frame */
    int depth;          /* observed spans open around it on this thread */
} mlprof_span_info;

enum { MLPROF_ARG_INT = 0, MLPROF_ARG_DOUBLE = 1, MLPROF_ARG_STRING = 2 };

typedef struct mlprof_arg_value {
    int type;      /* MLPROF_ARG_* */
    int64_t i;     /* MLPROF_ARG_INT */
    double d;      /* MLPROF_ARG_DOUBLE */
    const char *s; /* MLPROF_ARG_STRING (valid during the call) */
} mlprof_arg_value;

typedef struct mlprof_observer {
    size_t size;           /* sizeof(mlprof_observer) as the caller knows it */
    const char *name;      /* copied */
    size_t span_data_size; /* scratch bytes per open span, 0 to 256 */
    void *user;
    /* Any callback may be NULL. data: this span's scratch. */
    void (*on_begin)(void *user, const mlprof_span_info *span, void *data);
    void (*on_arg)(void *user, const mlprof_span_info *span, void *data, const char *key,
                   const mlprof_arg_value *value);
    void (*on_end)(void *user, const mlprof_span_info *span, void *data);
} mlprof_observer;

/* Registers an observer (copied; at most 8). Returns its id (>= 0), or
 * MLPROF_EINVAL (bad size or data size), MLPROF_ESTATE (running),
 * MLPROF_ELIMIT (too many). */
MLPROF_API int mlprof_observer_register(const mlprof_observer *observer);
/* Removes an observer. MLPROF_EINVAL (unknown id), MLPROF_ESTATE (running).
 * Once it returns, no callback of the observer runs (the stop waited for
 * them): its user data may be freed. */
MLPROF_API int mlprof_observer_unregister(int id);

/* ------------------------------------------------------------------- memory */

/*
 * The memory profiler. A device is a number from 0 to MLPROF_DEVICE_MAX: 0 is
 * the CPU ("cpu"), MLPROF_DEVICE_CUDA(n) is CUDA device n ("cuda:n"); others
 * are named "device N" unless named with mlprof_mem_device_name.
 *
 * "Used" is the bytes of live blocks (alloc without free yet). "Allocated" is
 * what the program holds from the system: the segments a pool reserved
 * (mlprof_mem_reserve) plus every live block that lies outside any reserved
 * segment. Without a pool both are equal; with one, their ratio shows how much
 * of the pool is put to use (fragmentation, caching).
 *
 * Each allocation records the calling thread's scope (mlprof_scope_push), the
 * innermost span open on the thread, and an optional tag (a tensor's name,
 * copied, up to 255 bytes). Recorded while running, not paused, and with
 * profile_memory (or profile_all) on; the hot path is the same as a span's:
 * no lock, no allocation. Accounting happens in the collector, in time order
 * over all threads, so a block may be freed on another thread than the one
 * that allocated it. Record an allocation after the memory is obtained and a
 * free before it is given back, so that reuse of an address keeps its order.
 *
 * Results: in the statistics (mlprof_dumps, stats_file: peak report, top live
 * blocks at the peak, per-scope rows, leaks), in the trace (counter series
 * "memory used (DEVICE)" and, with a pool, "memory allocated (DEVICE)", one
 * sample every memory_sample_rate operations, and an instant at each device's
 * peak), and at each dump in memory_csv (one row per block) and memory_svg
 * (the memory flow picture: time against address).
 *
 * Frees and releases of unknown addresses (allocated before recording began,
 * while paused, or lost to a full buffer), double frees, and allocations over
 * a live block (its free was missed; it is taken as freed then) are counted
 * and reported, never fatal. Under mlprof run, whose malloc (and cudaMalloc)
 * interposer records every block as well, reporting a block you got from
 * malloc, or reserving it as a segment, takes the interposer's record of it
 * over: it is counted once, and your mlprof_mem_free then free() is no double
 * free. Errors: MLPROF_EINVAL for a bad device.
 */
#define MLPROF_DEVICE_CPU 0
#define MLPROF_DEVICE_CUDA(n) (1 + (n)) /* n from 0 to 63 */
#define MLPROF_DEVICE_MAX 1023

MLPROF_API int mlprof_mem_alloc(int device, const void *addr, uint64_t bytes, const char *tag);
MLPROF_API int mlprof_mem_free(int device, const void *addr);
/* A pool takes a segment from the system, or gives it back (by its start). */
MLPROF_API int mlprof_mem_reserve(int device, const void *addr, uint64_t bytes);
MLPROF_API int mlprof_mem_release(int device, const void *addr);
/* Names a device in every output ("cuda:0", "pinned", "arena"; up to 31 bytes). */
MLPROF_API int mlprof_mem_device_name(int device, const char *name);

/* What the memory profiler has seen on a device so far. Figures are exact
 * totals since the start (or the last clear / mlprof_dumps reset, which start
 * the peaks again from the memory in use then). */
typedef struct mlprof_mem_info {
    uint64_t used, peak_used;           /* bytes */
    uint64_t allocated, peak_allocated; /* bytes */
    uint64_t peak_used_ns;              /* time of the peak (mlprof_now_ns clock), 0 if none */
    uint64_t live_blocks;
    uint64_t allocs, frees, reserves, releases;
    uint64_t unknown_frees;    /* free of an address that is not live */
    uint64_t double_frees;     /* ... that was freed before and not allocated again */
    uint64_t unknown_releases; /* release of an address that is not a reserved segment */
    uint64_t implicit_frees;   /* alloc over a live block: its free was missed */
} mlprof_mem_info;

/* Collects what was recorded so far and fills *info for device; size is
 * sizeof(mlprof_mem_info) as the caller knows it (fields beyond are left
 * alone). Errors: MLPROF_EINVAL (bad device, NULL info). */
MLPROF_API int mlprof_mem_info_get(int device, mlprof_mem_info *info, size_t size);

/* Starts the memory profiler's figures again on every device (RAF's
 * memory_profiler.reset): what was recorded so far is accounted first, then
 * the peaks start from the memory in use now, the counts and each device's
 * memory trace (mlprof_mem_trace) are emptied, and freed blocks are
 * forgotten; live blocks and held segments are kept, so that their frees
 * and releases still match. The trace's events, the span statistics and the
 * state are left alone. mlprof_clear and mlprof_dumps(reset) do the same.
 * Always MLPROF_OK. Takes the configuration lock: not from a signal handler. */
MLPROF_API int mlprof_mem_reset(void);
/* The device's memory trace as text in *out (free it with mlprof_free; RAF's
 * memory_profiler.get_memory_trace): a first line "# memory trace of NAME:
 * N operations since the start or the last reset", followed, when more
 * operations happened than memory_history keeps, by "; the K earliest are
 * left out (memory_history=M keeps the last ones)"; then the CSV header
 *   time_ms,op,bytes,used_mb,allocated_mb,span,scope,tag
 * and one row per operation kept, in time order: milliseconds since the
 * trace began recording, alloc/free/reserve/release, its bytes (a free's:
 * the block's; 0 for a free of an unknown address), the device's used and
 * allocated memory after it in MB (2^20 bytes; allocated counts reserved
 * segments, see above), the innermost span open on the thread then, its
 * scope, and the block's tag (CSV quoting where needed). A device with no
 * operation gives the two header lines. Errors: MLPROF_EINVAL (bad device,
 * NULL out), MLPROF_ENOMEM; *out is NULL on error. Takes the configuration
 * lock: not from a signal handler. */
MLPROF_API int mlprof_mem_trace(int device, char **out);

/* Copies the path an output is written to: what is "trace", "stats",
 * "memory_csv" or "memory_svg". "" when that output is off (an output at
 * "auto" beside a trace written in place included). Errors:
 * MLPROF_EINVAL (unknown what), MLPROF_ELIMIT (buf too small; truncated). */
MLPROF_API int mlprof_output_path(const char *what, char *buf, size_t len);

/* --------------------------------------------------------- GPU-timed regions */

/* A block of code timed on a CUDA stream with two CUDA events (RAF's
 * WITH_CUDA_PROFILER): begin records the first on stream (NULL: the default
 * stream), end the second. Once both have completed, the region appears as a
 * span on the trace's "GPU regions" track (at the CPU time it began, lasting
 * its GPU time; args gpu_ms and stream) and in the statistics under domain
 * "gpu_region". begin returns NULL while not recording, and on error (no CUDA
 * runtime in the process: MLPROF_EUNSUPPORTED, see mlprof_last_error); end
 * accepts NULL. Uses the program's own CUDA runtime. */
typedef struct mlprof_gpu_region mlprof_gpu_region;
MLPROF_API mlprof_gpu_region *mlprof_gpu_region_begin(const char *name, void *stream);
/* The same, with the region's span carrying string arguments "category" and
 * "args" (each left out when NULL; copied, up to 255 bytes): the begin of
 * MLPROF_WITH_GPU. Errors as mlprof_gpu_region_begin, and MLPROF_ENOMEM. */
MLPROF_API mlprof_gpu_region *mlprof_gpu_region_begin_with(const char *name, void *stream, const char *category,
                                                           const char *args);
/* Ends a region (any thread; NULL is accepted and does nothing). Errors:
 * MLPROF_EIO (CUDA refused the event; the region is dropped). */
MLPROF_API int mlprof_gpu_region_end(mlprof_gpu_region *region);

/* ---------------------------------------------------------- the op profiler */

/*
 * One operator measured in isolation (RAF's op profiler): mlprof_op_profile
 * runs a call on its inputs, warms it up for warmup_ms, then times repeats
 * until the measurement is stable (the interquartile range of the repeats,
 * divided by their median, at most `stability`, once min_repeats are in) or
 * max_repeats or budget_ms is reached (budget_ms stops it even below
 * min_repeats, after one repeat at least). Each repeat runs the call `inner`
 * times back to back, inner chosen after the warm-up so that a repeat lasts
 * at least min_repeat_us and a thousand times the clock's resolution and
 * the cost of reading it; a repeat's time divided by inner is one sample.
 *
 * setup and teardown, when given, run before and after each repeat (and
 * around the warm-up and the workspace run), untimed: fresh inputs, or a
 * state to restore. cold_cache writes over a buffer twice the size of the
 * last-level cache (from sysfs) before each repeat, and makes inner 1, so
 * that every timed call starts with the caches holding none of its data.
 *
 * GPU mode (gpu != 0): each repeat is timed with two CUDA events recorded on
 * stream (NULL: the default stream) around the calls, the time the device
 * took; the process's own CUDA runtime is used (MLPROF_EUNSUPPORTED without
 * one). With a cuDNN handle and the four descriptors of a forward
 * convolution, cudnn_workspace is what cudnnGetConvolutionForwardWorkspaceSize
 * asks for with cudnn_algo (-1 when not asked or refused).
 *
 * The workspace: one more call, untimed, after the warm-up, while the memory
 * profiler accounts the memory of workspace_device: the highest memory used
 * during the call, less what was in use before it or after it, whichever is
 * more (the inputs, and the outputs it leaves), is what the call needed
 * beyond them. The memory profiler sees mlprof_mem_alloc/free, and, under
 * `mlprof run` (the preload library with the malloc hook), every malloc;
 * workspace_from says which (MLPROF_OP_WS_*). It records only while running
 * with profile_memory on: otherwise workspace is -1. Every thread's memory
 * counts (what other threads allocate meanwhile too); one workspace run at a
 * time in the process (others wait).
 *
 * key, when not NULL or "", names the call in the cache (op name, shapes,
 * dtypes, device, options: what makes two calls the same is the caller's to
 * say): a key seen before returns the result kept, with `cached` set,
 * without running anything. Thread-safe; the call itself may run on several
 * threads at once if they profile at the same time.
 *
 * The call returns 0; anything else stops the profile with MLPROF_EIO (the
 * call's number in mlprof_last_error). Errors: MLPROF_EINVAL (no call, bad
 * options), MLPROF_EUNSUPPORTED (GPU mode without CUDA), MLPROF_ENOMEM.
 */
typedef struct mlprof_op_call {
    int (*fn)(void *user);                 /* one call of the op */
    /* instead of fn: n calls in a row, for a caller whose loop is cheaper in
     * its own language (Python); n is at least 1 */
    int (*fn_n)(void *user, uint64_t n);
    int (*setup)(void *user);    /* before each repeat, untimed; may be NULL */
    int (*teardown)(void *user); /* after each repeat, untimed; may be NULL */
    void *user;
} mlprof_op_call;

typedef struct mlprof_op_options {
    double warmup_ms;     /* 10 */
    uint32_t min_repeats; /* 10 */
    uint32_t max_repeats; /* 1000 (at most 100000) */
    double budget_ms;     /* 2000 */
    double stability;     /* 0.05: IQR / median at most this is stable */
    double min_repeat_us; /* 100: a repeat lasts at least this */
    double confidence;    /* 0.95: level of the median's confidence interval */
    int cold_cache;       /* 0 */
    uint64_t flush_bytes; /* 0: twice the last-level cache (sysfs; 64 MiB if unknown) */
    int workspace;        /* 1: measure the workspace */
    int workspace_device; /* MLPROF_DEVICE_CPU */
    int gpu;              /* 0: host clock; 1: CUDA events on stream */
    void *stream;
    void *cudnn_handle, *cudnn_x, *cudnn_w, *cudnn_conv, *cudnn_y; /* cudnnConvolutionForward's */
    int cudnn_algo;
} mlprof_op_options;

/* Where the workspace figure came from. */
#define MLPROF_OP_WS_MEMPROF 1u /* the memory profiler was recording (mlprof_mem_*) */
#define MLPROF_OP_WS_MALLOC 2u  /* ... and the malloc interposer of mlprof run was on */

typedef struct mlprof_op_result {
    double median_us, min_us, max_us, mean_us; /* per call */
    double q1_us, q3_us, iqr_us;
    double ci_low_us, ci_high_us; /* confidence interval of the median, from order statistics */
    double ci_level;              /* its coverage (binomial, exact; 0 with too few repeats) */
    uint32_t repeats;
    uint64_t inner;    /* calls per repeat */
    int stable;        /* iqr_us / median_us <= stability */
    int cached;        /* returned from the cache, nothing run */
    int64_t workspace; /* bytes; -1 not measured */
    unsigned workspace_from;  /* MLPROF_OP_WS_* */
    int64_t cudnn_workspace;  /* bytes; -1 not asked */
} mlprof_op_result;

/* The defaults above. */
MLPROF_API void mlprof_op_options_init(mlprof_op_options *opt);
/* Profiles call (opt NULL: the defaults) into *res. */
MLPROF_API int mlprof_op_profile(const char *key, const mlprof_op_call *call, const mlprof_op_options *opt,
                                 mlprof_op_result *res);
/* The statistics alone, from samples (microseconds each, n >= 1, left
 * unsorted): what mlprof_op_profile fills except repeats, inner, cached and
 * the workspace, with the interval at `confidence`. For callers that time
 * themselves. MLPROF_EINVAL for n 0 or NULL pointers. */
MLPROF_API int mlprof_op_stats(const double *samples_us, uint32_t n, double confidence, double stability,
                               mlprof_op_result *res);
/* Empties the cache, and how many results it holds (RAF's ResetCache and
 * GetCacheSize). */
MLPROF_API void mlprof_op_cache_reset(void);
MLPROF_API size_t mlprof_op_cache_size(void);

/* ---------------------------------------------------------- threads, process */

/* Names the calling thread (up to 63 bytes) and the process in the trace. */
MLPROF_API void mlprof_thread_set_name(const char *name);
MLPROF_API void mlprof_process_set_name(const char *name);

/* ------------------------------------------------------------ clock, hooks */

/* Nanoseconds on the profiler's clock (CLOCK_MONOTONIC, shared by processes). */
MLPROF_API uint64_t mlprof_now_ns(void);
/* Replaces the clock by fn (nanoseconds), for tests and replays; NULL restores
 * the built-in clock. Only while stopped and with nothing recorded that is not
 * yet dumped: MLPROF_ESTATE while running, and after a run until mlprof_dump(1)
 * or mlprof_clear() (those records' timestamps are on the old clock). */
MLPROF_API int mlprof_set_clock(uint64_t (*fn)(void *user), void *user);

/* Distributed runs: measures again this rank's clock against rank 0's over
 * MPI (ping-pong on a private duplicate of MPI_COMM_WORLD, the exchange with
 * the smallest round trip kept) and adds the sample to the trace's
 * otherData.clock_sync, which `mlprof merge` uses to put the ranks on one
 * timeline. The samples taken after MPI_Init and before MPI_Finalize (by the
 * mpi hook) need no call; take more in a long run whose clocks drift
 * unevenly. Collective: every rank of MPI_COMM_WORLD must call it, from one
 * thread each. MLPROF_OK; MLPROF_EUNSUPPORTED when no MPI library is loaded
 * (or it is neither Open MPI nor an MPICH), MLPROF_ESTATE when MPI is not
 * initialized or already finalized, MLPROF_EIO when a message failed. */
MLPROF_API int mlprof_dist_sync(void);
/* One sample of this rank's clock against the reference rank's (rank 0),
 * measured by the caller over its own communication (mlprof.dist.sync() does
 * it over torch.distributed): at_ns is this rank's clock (mlprof_now_ns) at
 * the measurement, offset_ns the reference's clock minus this one's there,
 * bound_ns how far off the offset may be (half the round trip of a
 * ping-pong), rtt_ns that round trip and exchanges how many were tried. The
 * samples go in otherData.clock_sync as the mpi hook's do (the first gives the
 * offset, the first and last the drift, the worst bound_ns the bound), and
 * `mlprof merge` applies them. A trace takes the samples of one method and
 * one rank: MLPROF_ESTATE for another; MLPROF_EINVAL for a method that is
 * empty, longer than 31 bytes or has quotes or backslashes, or a rank outside
 * 0..world_size-1. Up to 64 samples: the first is kept, the newest replaces
 * the one before it. */
MLPROF_API int mlprof_dist_clock_sample(const char *method, int rank, int world_size, uint64_t at_ns,
                                        int64_t offset_ns, uint64_t bound_ns, uint64_t rtt_ns, int exchanges);

/* The allocator the library uses for its own memory (never on the hot path).
 * Call before any other function; all three must be given. */
MLPROF_API int mlprof_set_allocator(void *(*malloc_fn)(size_t),
                                    void *(*realloc_fn)(void *, size_t),
                                    void (*free_fn)(void *));

typedef enum mlprof_log_level { MLPROF_LOG_ERROR = 0, MLPROF_LOG_WARN = 1, MLPROF_LOG_INFO = 2 } mlprof_log_level;
/* Where the library's messages go (default: stderr, prefixed "mlprof: ").
 * NULL restores the default. */
MLPROF_API void mlprof_set_log_handler(void (*fn)(int level, const char *message, void *user),
                                       void *user);

/* -------------------------------------------------------------- the macros */

/* Nonzero while events are being recorded (running and not paused), and
 * while a capture waits for a span to begin (capture_range=span:NAME, mlprof
 * capture --frames): then the handles but that span's read as off, so the
 * macros still stop at the handle. Read by the macros below: one load and
 * one branch when off (a process waiting for an on-demand capture is off). */
MLPROF_API extern int mlprof_active_flag;

#if defined(__GNUC__) || defined(__clang__)
#define MLPROF_I_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MLPROF_I_ACTIVE() MLPROF_I_UNLIKELY(__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED))
#else
#define MLPROF_I_UNLIKELY(x) (x)
#define MLPROF_I_ACTIVE() (mlprof_active_flag)
#endif

#define MLPROF_I_CAT2(a, b) a##b
#define MLPROF_I_CAT(a, b) MLPROF_I_CAT2(a, b)
#ifdef __COUNTER__
#define MLPROF_I_UNIQUE(prefix) MLPROF_I_CAT(prefix, MLPROF_I_CAT(__LINE__, MLPROF_I_CAT(_, __COUNTER__)))
#else
#define MLPROF_I_UNIQUE(prefix) MLPROF_I_CAT(prefix, __LINE__)
#endif

/* Returns *slot, creating the task (domain, name) there on first use; safe
 * when threads race on it. Used by MLPROF_ZONE. */
MLPROF_API mlprof_span *mlprof_task_once(mlprof_span **slot, mlprof_domain *domain,
                                         const char *name);

#ifndef MLPROF_DISABLE

/* The first byte of a span's or a marker's handle is nonzero while its domain
 * records under the configuration (level and classes). Part of the ABI: the
 * macros read it inline, so that a span filtered out costs what a stopped one
 * does (a load and a branch) rather than a call. */
#if defined(__GNUC__) || defined(__clang__)
#define MLPROF_I_HANDLE_ON(h) __atomic_load_n((const unsigned char *)(const void *)(h), __ATOMIC_RELAXED)
#else
#define MLPROF_I_HANDLE_ON(h) (*(const volatile unsigned char *)(const void *)(h))
#endif
static inline void mlprof_i_begin(mlprof_span *span)
{
    if (span && MLPROF_I_HANDLE_ON(span))
        mlprof_begin(span);
}
static inline void mlprof_i_end(mlprof_span *span)
{
    if (span && MLPROF_I_HANDLE_ON(span))
        mlprof_end(span);
}
static inline void mlprof_i_mark(mlprof_marker *marker, int scope)
{
    if (marker && MLPROF_I_HANDLE_ON(marker))
        mlprof_mark(marker, scope);
}

/* Expressions: usable anywhere a void expression is. */
#define MLPROF_BEGIN(span) (MLPROF_I_ACTIVE() ? mlprof_i_begin(span) : (void)0)
#define MLPROF_END(span) (MLPROF_I_ACTIVE() ? mlprof_i_end(span) : (void)0)
#define MLPROF_COUNTER_SET(c, v) (MLPROF_I_ACTIVE() ? mlprof_counter_set((c), (v)) : (void)0)
#define MLPROF_COUNTER_ADD(c, d) (MLPROF_I_ACTIVE() ? mlprof_counter_add((c), (d)) : (void)0)
#define MLPROF_MARK(m, scope) (MLPROF_I_ACTIVE() ? mlprof_i_mark((m), (scope)) : (void)0)
#define MLPROF_ARG_INT(k, v) (MLPROF_I_ACTIVE() ? mlprof_arg_int((k), (v)) : (void)0)
#define MLPROF_ARG_DOUBLE(k, v) (MLPROF_I_ACTIVE() ? mlprof_arg_double((k), (v)) : (void)0)
#define MLPROF_ARG_STR(k, v) (MLPROF_I_ACTIVE() ? mlprof_arg_str((k), (v)) : (void)0)
#define MLPROF_MEM_ALLOC(dev, p, n, tag) \
    (MLPROF_I_ACTIVE() ? (void)mlprof_mem_alloc((dev), (p), (n), (tag)) : (void)0)
#define MLPROF_MEM_FREE(dev, p) (MLPROF_I_ACTIVE() ? (void)mlprof_mem_free((dev), (p)) : (void)0)

#if defined(__GNUC__) || defined(__clang__)
static inline mlprof_span *mlprof_i_zone_begin(mlprof_span **slot, mlprof_domain *domain,
                                               const char *name)
{
    if (!MLPROF_I_ACTIVE())
        return (mlprof_span *)0;
    mlprof_span *span = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!span)
        span = mlprof_task_once(slot, domain, name);
    if (!span || !MLPROF_I_HANDLE_ON(span))
        return (mlprof_span *)0; /* filtered out: no end either */
    mlprof_begin(span);
    return span;
}
static inline void mlprof_i_zone_end(mlprof_span **zone)
{
    if (*zone)
        mlprof_end(*zone);
}
static inline void mlprof_i_scope_end(int *pushed)
{
    if (*pushed)
        mlprof_scope_pop();
}
static inline int mlprof_i_scope_begin(const char *name)
{
    mlprof_scope_push(name);
    return 1;
}
#define MLPROF_I_ZONE(site, zone, domain, name)                                             \
    static mlprof_span *site;                                                               \
    mlprof_span *zone __attribute__((cleanup(mlprof_i_zone_end), unused)) =                 \
        mlprof_i_zone_begin(&site, (domain), (name))
/* Declares a task (domain, literal name) that lasts until the end of the
 * enclosing block. A declaration: several may share a line or a block. The
 * handle is made at the first use of each site, so the domain and name of a
 * site must not change between calls. gcc and clang only (cleanup attribute). */
#define MLPROF_ZONE(domain, name) \
    MLPROF_I_ZONE(MLPROF_I_UNIQUE(mlprof_i_site_), MLPROF_I_UNIQUE(mlprof_i_zone_), domain, name)
/* Pushes a scope until the end of the enclosing block. */
#define MLPROF_SCOPE(name)                                                                   \
    int MLPROF_I_UNIQUE(mlprof_i_scope_) __attribute__((cleanup(mlprof_i_scope_end), unused)) = \
        mlprof_i_scope_begin(name)
static inline void mlprof_i_gpu_region_end(mlprof_gpu_region **region)
{
    mlprof_gpu_region_end(*region);
}
/* Times the rest of the enclosing block on a CUDA stream (RAF's
 * WITH_CUDA_PROFILER): a GPU region from here to the closing brace. */
#define MLPROF_GPU_REGION(name, stream)                                                         \
    mlprof_gpu_region *MLPROF_I_UNIQUE(mlprof_i_gpu_)                                          \
        __attribute__((cleanup(mlprof_i_gpu_region_end), unused)) =                            \
            (MLPROF_I_ACTIVE() ? mlprof_gpu_region_begin((name), (stream)) : (mlprof_gpu_region *)0)

static inline void mlprof_i_with_end(mlprof_domain **domain)
{
    if (*domain)
        mlprof_end_dynamic(*domain);
}
#define MLPROF_I_WITH(v, domain, name, category, args, ...)                                           \
    __extension__({                                                                                  \
        mlprof_domain *v __attribute__((cleanup(mlprof_i_with_end), unused)) =                       \
            MLPROF_I_ACTIVE() ? mlprof_begin_with((domain), (name), (category), (args)) : (mlprof_domain *)0; \
        { __VA_ARGS__ }                                                                               \
        (void)0;                                                                                      \
    })
/*
 * Runs code (the last argument, commas and all) inside a span (RAF's
 * WITH_BASE_PROFILER): domain (NULL: the default one), a run-time name
 * (copied, as mlprof_begin_dynamic), and the span's string arguments
 * "category" and "args" (NULL: left out). A statement:
 *
 *     MLPROF_WITH(mem, op->name, "MemoryRequest", count_text, {
 *         for (int i = 0; i < n; i++) request_memory(req, i);
 *     });
 *
 * The code runs exactly once, recording or not; the four other arguments
 * are evaluated only while recording. However the code is left (its end,
 * return, break or continue of a loop around the macro, goto), the span
 * ends there: break and continue act on the enclosing loop as if the code
 * were written without the macro. Nests; several may share a line. Not
 * recording, it costs one load and one predictable branch. gcc and clang
 * only (a statement expression and the cleanup attribute).
 */
#define MLPROF_WITH(domain, name, category, args, ...) \
    MLPROF_I_WITH(MLPROF_I_UNIQUE(mlprof_i_with_), domain, name, category, args, __VA_ARGS__)
#define MLPROF_I_WITH_GPU(v, stream, name, category, args, ...)                                        \
    __extension__({                                                                                   \
        mlprof_gpu_region *v __attribute__((cleanup(mlprof_i_gpu_region_end), unused)) =             \
            MLPROF_I_ACTIVE() ? mlprof_gpu_region_begin_with((name), (stream), (category), (args))      \
                              : (mlprof_gpu_region *)0;                                               \
        { __VA_ARGS__ }                                                                                \
        (void)0;                                                                                       \
    })
/* The same, timed on a CUDA stream (RAF's WITH_CUDA_PROFILER): the code is
 * a GPU region (mlprof_gpu_region_begin_with; stream NULL is the default
 * stream) whose span on the "GPU regions" track carries category and args.
 * Without a CUDA runtime in the process the code runs and nothing is
 * recorded (mlprof_last_error says why). */
#define MLPROF_WITH_GPU(stream, name, category, args, ...) \
    MLPROF_I_WITH_GPU(MLPROF_I_UNIQUE(mlprof_i_with_gpu_), stream, name, category, args, __VA_ARGS__)
#endif /* __GNUC__ */

#else /* MLPROF_DISABLE */

/* The arguments stay evaluated-free but "used", so that -Wunused stays quiet. */
#define MLPROF_BEGIN(span) ((void)sizeof(span))
#define MLPROF_END(span) ((void)sizeof(span))
#define MLPROF_COUNTER_SET(c, v) ((void)sizeof(c), (void)sizeof(v))
#define MLPROF_COUNTER_ADD(c, d) ((void)sizeof(c), (void)sizeof(d))
#define MLPROF_MARK(m, scope) ((void)sizeof(m), (void)sizeof(scope))
#define MLPROF_ARG_INT(k, v) ((void)sizeof(k), (void)sizeof(v))
#define MLPROF_ARG_DOUBLE(k, v) ((void)sizeof(k), (void)sizeof(v))
#define MLPROF_ARG_STR(k, v) ((void)sizeof(k), (void)sizeof(v))
#define MLPROF_MEM_ALLOC(dev, p, n, tag) \
    ((void)sizeof(dev), (void)sizeof(p), (void)sizeof(n), (void)sizeof(tag))
#define MLPROF_MEM_FREE(dev, p) ((void)sizeof(dev), (void)sizeof(p))
#define MLPROF_ZONE(domain, name) _Static_assert(sizeof(domain) && sizeof(name), "mlprof zone")
#define MLPROF_SCOPE(name) _Static_assert(sizeof(name), "mlprof scope")
#define MLPROF_GPU_REGION(name, stream) _Static_assert(sizeof(name) && sizeof(stream), "mlprof gpu region")
/* The code still runs, once; nothing else is evaluated. */
#if defined(__GNUC__) || defined(__clang__)
#define MLPROF_I_WITH_OFF(a, b, c, d, ...) \
    __extension__({ (void)sizeof(a), (void)sizeof(b), (void)sizeof(c), (void)sizeof(d); { __VA_ARGS__ } (void)0; })
#else
#define MLPROF_I_WITH_OFF(a, b, c, d, ...) \
    if (1) { (void)sizeof(a), (void)sizeof(b), (void)sizeof(c), (void)sizeof(d); { __VA_ARGS__ } } else ((void)0)
#endif
#define MLPROF_WITH(domain, name, category, args, ...) MLPROF_I_WITH_OFF(domain, name, category, args, __VA_ARGS__)
#define MLPROF_WITH_GPU(stream, name, category, args, ...) \
    MLPROF_I_WITH_OFF(stream, name, category, args, __VA_ARGS__)

#endif /* MLPROF_DISABLE */

#ifdef __cplusplus
}
#endif

#endif /* MLPROF_MLPROF_H */
