/*
 * merge.h - several traces on one timeline (mlprof merge).
 */
#ifndef MLPROF_ANALYZE_MERGE_H
#define MLPROF_ANALYZE_MERGE_H

#include "trace.h"

enum { AN_ALIGN_SHARED = 0, AN_ALIGN_GIVEN = 1, AN_ALIGN_MARKER = 2, AN_ALIGN_STARTS = 3, AN_ALIGN_SYSTEM = 4,
       AN_ALIGN_CLOCK_SYNC = 5 };

/* A trace's otherData.clock_sync: its clock against the reference rank's,
 * as the ranks measured it (mlprof's MPI ping-pong):
 * reference(t) = t + offset_ns + drift_ppb * (t - at_ns) / 1e9. */
typedef struct an_clock_sync {
    int has;
    char method[32];       /* "mpi_pingpong" */
    int64_t offset_ns;     /* at at_ns */
    double drift_ppb;
    int64_t at_ns;         /* the first sample's time, on this trace's clock */
    int64_t bound_ns;      /* the worst error bound, or -1 */
    long long reference_rank;
} an_clock_sync;

/* Reads t's clock_sync into cs; 1 when it has one. */
int an_clock_sync_read(const an_trace *t, an_clock_sync *cs);
/* What is added to time t of that trace to put it on the reference clock. */
int64_t an_clock_sync_shift(const an_clock_sync *cs, int64_t t);

typedef struct an_merge_options {
    const char *const *labels;  /* one per input ("rank 0", a host), or NULL: the paths */
    const int64_t *offsets;     /* ns added to each input's times, or NULL */
    const char *sync_marker;    /* align the first event of this name in every input, or NULL */
    int same_clock;             /* the inputs share a clock: no shift */
    const size_t *same_as;      /* per input: 1 + the index of an earlier input that is the same process
                                   (its trace cut in parts by finished dumps: one process of the output),
                                   or 0; NULL: none is */
} an_merge_options;

/* What the merge needs of one input without its events, gathered by a
 * first pass that reads each input once (an_merge_summarize): its clocks,
 * rank and metadata, its pids, the largest of its link ids, where its sync
 * marker is. view is a trace without events whose path, otherData,
 * distributedInfo, deviceProperties, base time, clock and span are the
 * input's (copies held here), for the functions that read those of a trace. */
typedef struct an_merge_input {
    an_trace view;
    size_t nev;            /* its events, for a check that the second read is the same */
    long long rank;        /* distributedInfo.rank, or -1 */
    int has_marker;        /* the sync marker asked for is in it, at marker_ts */
    int64_t marker_ts;
    uint64_t max_link;     /* the largest magnitude of its numeric link arguments */
    int max_link_key;      /* which key holds it (merge.c's list), or -1 */
    int64_t *pids;         /* its distinct pids, in the order they first appear */
    size_t npids;
    char **pid_names;      /* per pid: for one given as a string (AN_NAMED_ID_FIRST down), its name */
    uint8_t *pid_gpu;      /* per pid: 1 when it is a GPU's track (Kineto's: pid = device number) */
    int64_t *devices;      /* the device numbers its events give ("device" arguments), in order */
    size_t ndevices;
    int64_t *named_tids;   /* its tids given as strings, and the small numbers (none of its */
    int64_t *tid_to;       /* own tids) the output gives them */
    size_t ntids;
} an_merge_input;

/* Fills s from t (o: NULL, or the options whose sync marker is looked for).
 * Returns 0, or -1 when out of memory (s freed). */
int an_merge_summarize(const an_trace *t, const an_merge_options *o, an_merge_input *s);
void an_merge_input_free(an_merge_input *s);

/* The clock sync that puts input i on the reference rank's clock, into cs:
 * its own (returns i); for an input with neither a rank nor a clock sync
 * (the launcher's trace beside its ranks' when mlprof run wraps torchrun or
 * mpirun), that of the lowest rank on its host's monotonic clock, which it
 * shares (returns that input); else -1, cs->has 0. */
long an_merge_input_sync(const an_merge_input *in, size_t n, size_t i, an_clock_sync *cs);

/* The shift of each input's times and how it was chosen (AN_ALIGN_*): given
 * offsets, then a sync marker, then the clock sync every input measured, or
 * every input with a rank (those without one take a rank's as
 * an_merge_input_sync says, else their start is lined up with the earliest
 * of the others; offset[i]: its offset at its first sample; an_merge adds
 * the drift per event), then a clock the inputs say they share (same
 * host, CLOCK_MONOTONIC), then the real-time clock when every input says it is
 * on it (PyTorch's profiler traces; each one's baseTimeNanoseconds is added,
 * so that the times are those of the first input's base), else the starts
 * lined up. -1 with err set when an input lacks the marker (the summaries
 * must then have been made with the marker's options). */
int an_merge_offsets(const an_merge_input *in, size_t n, const an_merge_options *o, int64_t *offset, int *method,
                     char *err, size_t errlen);
/* The merged trace as Chrome trace JSON: every input's events shifted (with
 * a clock sync, each end by the shift at its own time), pids that collide
 * renumbered, process tracks named "LABEL: name" (LABEL: the one given, else
 * "rank N" from distributedInfo, else the path; a GPU's "LABEL: GPU N (name)";
 * a name that starts with "LABEL: " already, or with any "rank M: " where
 * LABEL is made of the rank, is kept as it is: a trace merged before)
 * and sorted by rank; pids and tids given as strings numbered (a double holds
 * the numbers: JavaScript's viewers read them so) and named by their strings;
 * devices that collide renumbered too, in the events' "device" and in the
 * top-level deviceProperties, which holds every input's, so that each GPU
 * keeps its own name; strings written whole (a NUL as \u0000); and the
 * method (also in *method), offsets, the clock sync's method and worst bound
 * and the missing ranks in otherData.merge. The ids that link
 * events stay apart per input: flow and async ids (id, id2, bind_id) become
 * "INPUT:ID" strings, and the numeric link arguments (correlation, External
 * id, Ev Idx, Python id...) of input i are moved by i times a power of ten
 * above all of them (id_step in otherData.merge). Each input's rank,
 * distributedInfo, deviceProperties, baseTimeNanoseconds, pids and devices
 * (its numbers, the output's) are kept in otherData.merge.inputs; at the top
 * level, where PyTorch's tools look for them, are the lowest rank's
 * distributedInfo (the first input's that has one when none says a rank),
 * the first input's baseTimeNanoseconds and every input's deviceProperties
 * (as above). The inputs are written one after
 * another, in the order given. Returns 0, or -1 (err set, or out of
 * memory). This one holds every input and the output in memory. */
int an_merge(an_trace *const *in, size_t n, const an_merge_options *o, mlprof__sb *out, int *method, char *err,
             size_t errlen);
/* Whether output names a Perfetto trace (.pftrace, .perfetto-trace, either
 * with .gz): the merge is then written as Chrome JSON beside it, exported to
 * it (pfexport.h) and removed. */
int an_merge_perfetto_name(const char *output);
/* The same output, streamed: in holds the summaries of a first pass
 * (an_merge_summarize); each input is read again from its path, its events
 * written and the trace freed before the next, so that memory holds one
 * input and a few MiB of output. kept: NULL, or per input the trace itself
 * when it cannot be read twice (a pipe, standard input), else NULL. output: a path, written atomically (a
 * temporary file renamed at the end; removed on any error), or NULL or "-"
 * for standard output; gzip when it ends in .gz, Perfetto's protobuf for a
 * Perfetto name (an_merge_perfetto_name). An input that reads differently the second time
 * (changed meanwhile) is an error. Returns 0, or -1 with err set. */
int an_merge_stream(const an_merge_input *in, an_trace *const *kept, size_t n, const an_merge_options *o,
                    const char *output, int *method, char *err, size_t errlen);

/* The world size the inputs' distributedInfo gives (the largest), or -1;
 * the ranks below it that no input is, comma-separated, into list. */
long long an_merge_missing_ranks(const an_merge_input *in, size_t n, mlprof__sb *list);

/* Whether the inputs are of different jobs (an_jobs_differ on their
 * distributedInfo: job_id, world_size): 1 with them described in desc, each
 * named by its path; else 0 (also when out of memory). */
int an_merge_jobs_differ(const an_merge_input *in, size_t n, mlprof__sb *desc);

#endif /* MLPROF_ANALYZE_MERGE_H */
