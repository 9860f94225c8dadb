/*
 * sink.h - what the collector hands to every output. A sink is a table of
 * functions and a state it makes: the Chrome JSON writer, Perfetto's protobuf
 * writer, the statistics, the memory outputs and the SQLite database are each
 * one. Sinks know nothing of records, threads or the pool: they get finished
 * events, already decoded and paired, in the order the collector decodes them
 * (per thread in time order; threads one after another within a drain); a
 * span at its end, so children before their parent, unless the sink asks
 * for begins and ends (MLPROF__SINK_SLICES, below).
 *
 * Two kinds share the interface:
 *  - a trace sink (json, perfetto) turns events into bytes appended to
 *    out->sb; the collector owns the bytes: it spools them, compresses them
 *    when asked, and writes the file (head, spool, tail) at each dump;
 *  - a file sink (stats, memory, sqlite) keeps what it needs and writes its
 *    own file(s) in its dump function; it ignores out->sb.
 *
 * A dump that is not the last writes a tail after the spooled events: the
 * metadata and the spans still open, shown up to now. The tail is written to
 * another buffer and is not part of the stream: a sink brackets it with
 * tail_begin and tail_end and must leave its stream state (JSON's first
 * event, Perfetto's interned strings) as it found it, since the stream goes
 * on after the dump. Events in a tail have out->tail set.
 *
 * Every function is called under the control lock, never on the hot path;
 * any may be NULL.
 */
#ifndef MLPROF_SINK_H
#define MLPROF_SINK_H

#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

enum { MLPROF__OUT_TASK = 0, MLPROF__OUT_FRAME = 1 };

/* Arguments (args, args_len) are everywhere zero or more JSON object members
 * `"key":value`, joined by commas, without braces; values are JSON numbers,
 * strings, true/false/null, or (from GPU activity) nested objects. A sink
 * that wants them typed walks them with mlprof__args_next (sink.c).
 *
 * The collector's own task spans also come with their arguments typed
 * (targs, ntargs: what the program recorded, in its order, keys and strings
 * not escaped), so that a binary format writes them without parsing text.
 * Where targs is set, args is the same arguments as JSON text, or NULL when
 * no sink on asked for text (see MLPROF__SINK_NO_TEXT); where targs is NULL
 * (frames, instants, events modules produce), args is the only form. */
enum { MLPROF__ARG_INT = 0, MLPROF__ARG_DOUBLE = 1, MLPROF__ARG_STRING = 2 };

typedef struct mlprof__arg_out {
    const char *key;
    size_t key_len;
    int type;         /* MLPROF__ARG_INT, _DOUBLE, _STRING */
    int64_t i;
    double d;
    const char *s;    /* a string's bytes (not NUL-terminated) */
    size_t s_len;
} mlprof__arg_out;

/* A finished duration: a task (nested on its thread) or a frame (an async
 * slice, which may overlap others on its thread). */
typedef struct mlprof__span_out {
    const char *name;
    size_t name_len;
    const char *domain;
    int kind;             /* MLPROF__OUT_TASK or MLPROF__OUT_FRAME */
    uint64_t begin_ns, end_ns;
    pid_t pid, tid;
    const char *args;
    size_t args_len;
    const mlprof__arg_out *targs; /* the same typed, or NULL (see above) */
    size_t ntargs;
    uint64_t frame_id;    /* frames: unique id of this pass */
    int unfinished;       /* closed by the profiler, not by the program */
    /* for the sinks that aggregate */
    const void *id;       /* the handle that made it (rows are keyed by it), or NULL */
    uint64_t self_ns;     /* duration less its children's on the same stack */
    uint32_t depth;       /* spans open below it on its thread's stack when it began */
    const int64_t *hw;    /* sums of the span's counter arguments (perf.c's order), or NULL */
    unsigned hw_mask;     /* which of them it had */
} mlprof__span_out;

/* scope: MLPROF_SCOPE_GLOBAL (0), _PROCESS (1), _THREAD (2). */
typedef struct mlprof__instant_out {
    const char *name;
    size_t name_len;
    const char *domain;
    uint64_t ts_ns;
    int scope;
    pid_t pid, tid;
    const char *args;
    size_t args_len;
    const void *id;       /* the marker's handle, or NULL */
} mlprof__instant_out;

typedef struct mlprof__counter_out {
    const char *name;
    const char *domain;
    uint64_t ts_ns;
    double value;
    int is_int;           /* ivalue is exact */
    int64_t ivalue;
    pid_t pid, tid;
    const void *id;       /* the counter's handle, or NULL */
} mlprof__counter_out;

/* One end of a flow: ph 's' (its start, bound to the slice enclosing ts on
 * that track) or 'f' (its end, bound to the slice enclosing ts). */
typedef struct mlprof__flow_out {
    char ph;
    uint64_t id;
    const char *name;
    const char *domain;
    uint64_t ts_ns;
    pid_t pid, tid;
} mlprof__flow_out;

enum {
    MLPROF__TRACK_PROCESS = 0, /* tid == pid; name: the process's */
    MLPROF__TRACK_THREAD = 1,  /* a thread of the program */
    MLPROF__TRACK_EXT = 2      /* a track of events with their own times (a GPU stream, regions) */
};

/* A track's name and order. Said once per trace for each track, at the
 * latest in the tail; said again if its name changes. */
typedef struct mlprof__track_out {
    int kind;
    pid_t pid, tid;
    const char *name;
    uint32_t sort_index;
} mlprof__track_out;

/* The sampled call stacks of a trace (src/hw/stacks.c), for the formats that
 * write them from their parts rather than from trace_members' JSON: a tree
 * of frames, each a code address in one call path (so one function appears
 * once per path), and the samples, each naming its leaf frame. */
typedef struct mlprof__stack_frame_out {
    const char *name;     /* the function's, or OBJECT+0xOFFSET */
    const char *object;   /* the mapped file's path, "" when no mapping holds it */
    uint64_t map_start;   /* the mapping that holds the address: its range */
    uint64_t map_end;
    uint64_t map_offset;  /* its offset in the file */
    uint64_t rel_pc;      /* the address as an offset in the file: less map_start, plus map_offset */
    uint32_t parent;      /* its caller's index, 0 for a root */
    const char *file;     /* its source file (the object's debug info), or NULL */
    int line;             /* and line, where file is set */
    int inlined;          /* 1: a call the compiler inlined into its parent
                           * (the same address, rel_pc and mapping) */
} mlprof__stack_frame_out;

typedef struct mlprof__stack_sample_out {
    uint64_t ts_ns;       /* CLOCK_MONOTONIC, the trace's clock */
    pid_t tid;
    uint32_t frame;       /* its leaf */
    pid_t pid;            /* its process; 0: the stacks' own (a merged trace's samples are of several) */
} mlprof__stack_sample_out;

typedef struct mlprof__stacks_out {
    pid_t pid;
    const mlprof__stack_frame_out *frames; /* frames[1 .. nframes-1]; [0] unused */
    size_t nframes;
    const mlprof__stack_sample_out *samples;
    size_t nsamples;
} mlprof__stacks_out;

/* What a trace says about itself, at its end. other_data: JSON members
 * (as args above) that the JSON trace puts in "otherData": mlprof_version,
 * host, pid, clock, dropped_events, ... and each module's. */
typedef struct mlprof__trace_meta {
    pid_t pid;
    const char *process_name;
    const char *host;
    const char *clock;        /* the raw clock's name; times are CLOCK_MONOTONIC ns */
    uint64_t start_ns, dump_ns;
    int finished;
    const char *other_data;
    size_t other_data_len;
    /* the rank's distributedInfo as a JSON object ({"rank":R,...}, Kineto's
     * member), or NULL when no rank is known (src/record/dist.h) */
    const char *distributed_info;
    size_t distributed_info_len;
    /* top-level members ("key":value, each followed by ",\n") that the JSON
     * trace writes after traceEvents: the sampled stacks' stackFrames and
     * samples (src/hw/stacks.c); NULL when none */
    const char *trace_members;
    size_t trace_members_len;
    /* the same samples as parts (above), or NULL when none */
    const mlprof__stacks_out *stacks;
} mlprof__trace_meta;

typedef struct mlprof__sink_out {
    mlprof__sb *sb; /* trace sinks append here */
    int tail;       /* inside tail_begin .. tail_end */
} mlprof__sink_out;

/* The outputs a dump could not write (collect.c gathers them for the error
 * it returns, which names every one): the first one's code and message, the
 * keys of all. */
typedef struct mlprof__sink_failures {
    int n;             /* outputs that failed */
    int rc;            /* the first one's code */
    char first[800];   /* its message, starting with its key */
    char keys[256];    /* the keys of all, in order, ", " between */
    int unsaid;        /* some of them were not said on stderr */
} mlprof__sink_failures;

/* What a file sink's dump gets. */
typedef struct mlprof__sink_dump {
    const char *trace_path;   /* where the trace goes (file sinks put theirs beside it at "auto") */
    int finished;
    /* NULL when the dump only writes again the outputs of sinks that
     * MLPROF__SINK_RETRY that a finished dump could not write */
    const mlprof__trace_meta *meta;
    /* where the outputs that fail are told (mlprof__sink_failed, mlprof__sink_wrote) */
    mlprof__sink_failures *failures;
    /* for the statistics' report */
    uint64_t stats_dropped;    /* events dropped since the statistics were last reset */
    uint64_t unfinished_spans; /* spans of the trace closed by the profiler */
} mlprof__sink_dump;

/* What a sink asks of the collector (mlprof__sink_ops.flags). */
enum {
    /* reads no span's args text (it reads targs, or no arguments at all):
     * when every sink on says so, the collector does not build the text */
    MLPROF__SINK_NO_TEXT = 1,
    /* takes the collector's task spans as slice_begin and slice_end in
     * record order per thread, instead of span once each has ended (see
     * slice_begin below); frames and produced spans still come to span */
    MLPROF__SINK_SLICES = 2,
    /* reads targs: the collector keeps its spans' arguments typed */
    MLPROF__SINK_TYPED = 4,
    /* a file sink whose state outlives the trace (no reset: the statistics,
     * the memory accounting): when a finished dump wrote the trace but not
     * its file(s), the next dump writes them again (a retry with nothing
     * recorded since, the dump at exit) while the trace stays as written */
    MLPROF__SINK_RETRY = 8
};

typedef struct mlprof__sink_ops {
    const char *name;
    unsigned flags; /* MLPROF__SINK_* */
    void *(*create)(void);
    void (*destroy)(void *st);
    /* a new trace: the start, after a finished dump, a clear */
    void (*reset)(void *st);
    /* trace sinks: the bytes before the first event of the file */
    void (*head)(void *st, mlprof__sb *sb);
    void (*span)(void *st, const mlprof__sink_out *out, const mlprof__span_out *s);
    /* MLPROF__SINK_SLICES: a task span's begin and end, per thread in time
     * order (threads one after another within a drain, as above). A begin
     * comes once its arguments are complete: at its thread's next record
     * that is not an argument (so it may wait for the next drain); end_ns,
     * self_ns and unfinished are then not known (0). The end comes with
     * begin_ns and everything span gets, its targs being only the arguments
     * recorded after the begin was handed over (rare: after a counter
     * sample). In a dump's tail, a span still open whose begin is in the
     * stream gets only its end (at the dump's time, unfinished); one whose
     * begin was not handed over yet gets both; the stream goes on after the
     * tail as if neither had been said (the real end comes later). */
    void (*slice_begin)(void *st, const mlprof__sink_out *out, const mlprof__span_out *s);
    void (*slice_end)(void *st, const mlprof__sink_out *out, const mlprof__span_out *s);
    void (*instant)(void *st, const mlprof__sink_out *out, const mlprof__instant_out *e);
    void (*counter)(void *st, const mlprof__sink_out *out, const mlprof__counter_out *c);
    void (*flow)(void *st, const mlprof__sink_out *out, const mlprof__flow_out *f);
    void (*track)(void *st, const mlprof__sink_out *out, const mlprof__track_out *t);
    void (*tail_begin)(void *st, const mlprof__sink_out *out);
    void (*tail_end)(void *st, const mlprof__sink_out *out, const mlprof__trace_meta *m);
    /* file sinks: write the file(s); MLPROF_OK or an error said with mlprof__fail */
    int (*dump)(void *st, const mlprof__sink_dump *d);
    /* trace sinks: bytes of the stream after its head were lost (a full disk
     * for longer than memory could wait): what the sink said in them (Perfetto's
     * interned strings, sequence defaults and clocks, track descriptors) no
     * longer holds; it starts its stream state again, writing what readers
     * need from here on into sb. NULL: a sink whose events stand alone (JSON). */
    void (*lost)(void *st, mlprof__sb *sb);
} mlprof__sink_ops;

/* The sinks (each defined in its own file of src/export). */
extern const mlprof__sink_ops mlprof__json_sink;     /* json_sink.c: Chrome trace event JSON */
extern const mlprof__sink_ops mlprof__perfetto_sink; /* perfetto.c: Perfetto's TracePacket stream */
extern const mlprof__sink_ops mlprof__stats_sink;    /* stats.c: the statistics (stats_file) */
extern const mlprof__sink_ops mlprof__memory_sink;   /* memory_sink.c: memory CSV and SVG */
extern const mlprof__sink_ops mlprof__sqlite_sink;   /* sqlite_sink.c: a SQLite database (sqlite_file) */

/* A file sink's output that would land on the trace file (filename, or
 * mlprof_dump_to's path): written after the trace, it would replace it.
 * MLPROF_EINVAL naming key, value and path (said on stderr too, once per
 * key and path), and the sink writes nothing there; else MLPROF_OK. Outputs
 * written in place (/dev/null, /dev/stdout) are not checked. */
int mlprof__sink_path_check(const mlprof__sink_dump *d, const char *key, const char *value, const char *path);
/* An output at "auto" is named after the trace's file (PATH_STEM.memory.csv,
 * PATH_STEM.db): when the trace is written in place (/dev/null, /dev/stdout,
 * a FIFO) there is no such file to put it beside, and it is not written.
 * mlprof__sink_auto_skipped says whether that is so for trace_path;
 * mlprof__sink_note_skipped says it on stderr, once per key and path. */
int mlprof__sink_auto_skipped(const char *trace_path);
void mlprof__sink_note_skipped(const char *key, const char *trace_path);
/* The name of an output at "auto": trace_path with its extension (and a
 * ".gz" after it) replaced by suffix (run.json.gz, ".db": run.db), in buf;
 * 1 (and "") when the trace is written in place (above), else 0. */
int mlprof__sink_auto_path(const char *trace_path, const char *suffix, char *buf, size_t len);

/* A file sink's output (key: its configuration key) could not be written:
 * the error (code rc, message mlprof_last_error()) joins the dump's
 * failures, which the collector returns as one error naming them all; said:
 * it is said on stderr already. Returns rc, the message left as it was. */
int mlprof__sink_failed(const mlprof__sink_dump *d, const char *key, int rc, int said);
/* A file sink wrote its output (key) to path, with result rc (MLPROF_OK, or
 * an error said with mlprof__fail). A failure joins the dump's failures and
 * is said on stderr, unless it is what was said last for that key: an output
 * that fails the same way at every dump (a continuous dump's period) is said
 * once, and again when the reason changes; the write that succeeds after it
 * is said too. Returns rc, the message left as it was. */
int mlprof__sink_wrote(const mlprof__sink_dump *d, const char *key, const char *path, int rc);
/* An error message less the names of temporary files (NAME.tmp-PID-XXXXXX,
 * a new one at each try), which would make one failure differ at each dump:
 * what is compared to say a failure once. */
void mlprof__failure_text(const char *msg, char *out, size_t len);
/* Forgets what was said of each output's failures (a forked child). */
void mlprof__sink_forget_said(void);

/* Walks args: returns 1 and the next member (key without its quotes, still
 * JSON-escaped; value as its JSON text) and moves *pos past it; 0 at the end
 * or on text that is not such members. */
typedef struct mlprof__arg_view {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} mlprof__arg_view;
int mlprof__args_next(const char *args, size_t len, size_t *pos, mlprof__arg_view *a);

#endif /* MLPROF_SINK_H */
