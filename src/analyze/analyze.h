/*
 * analyze.h - the analyses the mlprof command runs on a trace model: the
 * operator table of `mlprof analyze` (filters, grouping, aggregation, order,
 * derived FLOPS and bandwidth: over an operator's total time, or over the
 * GPU time of the work its calls launched) written as a table, JSON or CSV.
 */
#ifndef MLPROF_ANALYZE_ANALYZE_H
#define MLPROF_ANALYZE_ANALYZE_H

#include "trace.h"

enum { AN_SUM = 0, AN_MEAN = 1, AN_MAX = 2, AN_MIN = 3, AN_COUNT = 4 };
enum { AN_TABLE = 0, AN_JSON = 1, AN_CSV = 2 };

typedef struct an_options {
    int top;                  /* rows shown; 0: all */
    const char *aggregate_by; /* comma list of name, type (category), thread, process, none,
                                 op_type, bottom_op, top_op, op_stack, launch, or argument
                                 keys; input_shape, output_shape and input_type (dtype)
                                 read the first of their writers' names an event has
                                 (PyTorch's "Input Dims", "Input type"). A GPU user
                                 annotation's name reads "NAME (GPU)" */
    int aggregate;            /* AN_SUM...: how a group's times combine */
    const char *order_by;     /* a column; "+column" for ascending */
    int64_t min_ns, max_ns;   /* duration filter; -1: none */
    const char *type;         /* comma list of words, or NULL: a duration is kept when one is
                                 its category, its name or the operator type an argument gives
                                 ("type", "op_type", "opr_type"); words with * ? [ are globs */
    const char *name;         /* a glob (or substring) the names must match, or NULL */
    int format;
    mlprof__sb *notes;        /* when not NULL, receives a line (the trace's path first) for
                                 each filter that keeps no duration, saying what the trace
                                 has instead, or one when the filters keep nothing together */
    const char *steps;        /* NULL: the whole trace; "all", "N", "A-B" or a comma list of
                                 them: only the events of these whole steps (an_run_steps) */
    int per_step;             /* one result per step (an_run_steps) */
} an_options;

void an_options_default(an_options *o);
/* Checks the options (an unknown column or grouping key is an error naming
 * it, as is a --type list without a word). Returns 0, or -1 with the error
 * in errbuf. */
int an_options_check(const an_options *o, char *errbuf, size_t len);
/* The operator table. A filter that keeps nothing is no error: the table
 * (or the JSON's "filters_matching_nothing") says so, and o->notes says what
 * the trace has; likewise a grouping key that no kept duration has
 * ("grouping_keys_missing"), with the argument keys they do have. A trace's
 * envelope (category "Trace": PyTorch's "PyTorch Profiler (0)") is not an
 * operator: it is left out unless --type or --name names it, and the table
 * ("envelopes_left_out"; in CSV o->notes) says so. Returns 0, or -1 (out of
 * memory). */
int an_analyze(an_trace *t, const an_options *o, mlprof__sb *out);

/* One group of the operator table, for analyses built on it (the
 * roofline): its name (interned in the trace), its first event, and sums
 * over its events. flops_n, bytes_n: how many of them carry FLOPs, bytes;
 * gpu_calls: how many launched GPU work (kernels, copies, memsets), whose
 * GPU time (an_gpu_op_times) gpu_ns sums. */
typedef struct an_group_row {
    const char *name;
    const an_event *first;
    uint64_t count, flops_n, bytes_n, gpu_calls;
    int64_t self_ns, total_ns, gpu_ns; /* sums */
    double flops, bytes;               /* sums over the events that carry them */
} an_group_row;

/* The groups of an_analyze (the same filters and --aggregate-by), in the
 * trace's order of first appearance: *rows (free with mlprof__free), *n.
 * notes (when not NULL) receives what the filters and keys found wanting, as
 * for an_analyze. Returns 0, or -1 (out of memory). */
int an_group_rows(an_trace *t, const an_options *o, an_group_row **rows, size_t *n, mlprof__sb *notes);

/* An analysis of one trace: an_analyze, an_kernels' command... */
typedef int (*an_analysis_fn)(an_trace *t, const an_options *o, mlprof__sb *out);

/* Checks o->steps ("all", "3-5", "2,4", "3-5,8"). Returns 0, or -1 with the
 * error in errbuf. */
int an_options_check_steps(const an_options *o, char *errbuf, size_t len);
/* Runs fn on the whole trace, or, with o->steps or o->per_step, on the events
 * of whole steps: PyTorch's ProfilerStep#N ranges (HTA's definition: a CPU
 * event belongs to the step whose range holds its start, any thread of the
 * process; a GPU event to the step of the runtime call that launched it, else
 * by its start), or else mlprof's frames (the passes of the most frequent
 * frame name, numbered 1, 2... on each thread). "all" leaves out an
 * incomplete last step (still open when the trace was written, or shorter
 * than half the median of the others: PyTorch's profiler without a schedule
 * stops inside its last ProfilerStep); naming it by number takes it. With
 * per_step, one result per chosen step: tables one after another, JSON
 * {"steps":..,"per_step":[{"step":N,..,"analysis":..}]}, CSV with a first
 * column "step"; else JSON {"steps":..,"analysis":..}. A trace without
 * steps is analysed whole, in the same shape ("analysis", an empty
 * "per_step", an empty "step" column) and notes says so. notes receives what
 * was left out and why, and step numbers the trace lacks. fn may intern
 * strings in t. Returns 0, or -1 (out of memory, or fn's failure). */
int an_run_steps(an_trace *t, const an_options *o, an_analysis_fn fn, mlprof__sb *out, mlprof__sb *notes);

/* What `mlprof diff` compares: self time (or total time with total), combined
 * by the options' aggregate; an operator regressed when it grew by more than
 * fail_above_pct percent (off when negative) and by at least min_delta_ns. */
typedef struct an_diff_options {
    int total;
    double fail_above_pct;
    int64_t min_delta_ns;
} an_diff_options;

/* Per operator (group), the change from run a to run b: counts, times, new
 * and missing operators, sorted by the size of the change. *regressions
 * receives how many regressed. With o->steps, each run is restricted to those
 * of its steps (as an_run_steps chooses them; o->notes says what each left
 * out). Returns 0, or -1 (out of memory). */
int an_diff(an_trace *a, an_trace *b, const an_options *o, const an_diff_options *d, mlprof__sb *out,
            size_t *regressions);

/* Durations in the unit a person reads, and amounts with SI prefixes. */
void an_put_duration(mlprof__sb *out, int64_t ns);
void an_put_si(mlprof__sb *out, double v, const char *unit);
void an_put_bytes(mlprof__sb *out, double bytes);

#endif /* MLPROF_ANALYZE_ANALYZE_H */
