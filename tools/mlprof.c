/*
 * mlprof.c - the mlprof command. Each subcommand parses its options and calls
 * the analysis library (src/analyze), which the tests use too; no analysis
 * lives here. Exit status: 0 done, 1 the input was damaged (what could be read
 * is still reported, with a warning) or an output could not be written,
 * 2 a mistake on the command line, 3 (diff --fail-above) a regression.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/analyze/analyze.h"
#include "../src/analyze/json.h"
#include "../src/common/gz.h"
#include "../src/analyze/augment.h"
#include "../src/analyze/ceilings.h"
#include "../src/analyze/gpu_ceilings.h"
#include "../src/analyze/dist_ranks.h"
#include "../src/analyze/flame.h"
#include "../src/analyze/gpu.h"
#include "../src/analyze/merge.h"
#include "../src/analyze/pfexport.h"
#include "../src/analyze/ranks.h"
#include "../src/analyze/roofline.h"
#include "../src/analyze/sequences.h"
#include "../src/analyze/sqlite.h"
#include "capture.h"
#include "run.h"

#define PROG "mlprof"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " COMMAND [options]\n"
            "\n"
            "commands:\n"
            "  analyze TRACE   the operators that cost the most, and why (table, JSON, CSV)\n"
            "                  (TRACE may be a directory of ranks' traces: see its --help)\n"
            "  diff A B        per operator, what changed from run A to run B\n"
            "  merge A B ...   several processes' or hosts' traces on one timeline\n"
            "  kernels TRACE   GPU time: compute, communication, memory, idle; per operator\n"
            "  ranks TRACE...  a distributed job's ranks compared: compute, communication,\n"
            "                  idle, overlap, stragglers at each collective, load imbalance\n"
            "  augment TRACE -o OUT  the trace with launch queue and copy bandwidth counters\n"
            "  sequences TRACE the kernel sequences that recur on the GPU streams\n"
            "  export --sqlite OUT.db TRACE  the trace as an SQLite database to query\n"
            "  ceilings        this machine's peak FLOP/s and memory bandwidth, measured\n"
            "  roofline TRACE  every operator against those ceilings (table and SVG)\n"
            "  flame TRACE     the sampled call stacks (sampling key): folded or SVG flame graph\n"
            "  run -- CMD      profile an unmodified program (and what it starts)\n"
            "  capture PID     capture a running process that waits for it (run --on-demand)\n"
            "  help            this text; '" PROG " COMMAND --help' for a command's options\n"
            "\n"
            "Traces are Chrome trace event JSON files, plain or gzip: mlprof's own, and those\n"
            "of PyTorch's profiler, MXNet, RAF, MegEngine and other tools; and Perfetto's\n"
            "protobuf traces as mlprof writes them (.pftrace), told apart by their content.\n");
}

static void analyze_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " analyze TRACE|DIR [options]\n"
            "\n"
            "Groups the durations of a trace and shows where the time goes.\n"
            "\n"
            "DIR: a directory of a distributed job's traces, one per rank (PyTorch's\n"
            "*.pt.trace.json(.gz), mlprof's *.json; other files are skipped and named on\n"
            "standard error). Each rank is analysed alone, one after another, as if given\n"
            "by itself (ids never mix); one section per rank (JSON: an entry of \"ranks\";\n"
            "CSV: a first column \"rank\"), ordered by the rank in distributedInfo. A trace\n"
            "that says no rank (mlprof writes it when a launcher or the rank key gave one)\n"
            "is numbered after them in file-name order.\n"
            "\n"
            "  -t, --top N            rows to show (default 20; 0 for all)\n"
            "  --aggregate-by KEYS    comma list of: name (default), type (the category),\n"
            "                         op_type (the operator type: a \"type\", \"op_type\" or\n"
            "                         \"opr_type\" argument, else the name; what MegEngine's\n"
            "                         --aggregate-by type means), thread, process, none (one\n"
            "                         row per event), or an argument key: input_shape\n"
            "                         (also PyTorch's \"Input Dims\"), output_shape,\n"
            "                         input_type or dtype (PyTorch's \"Input type\"), or\n"
            "                         any other (a key no kept duration has is named on\n"
            "                         standard error, with the keys they have);\n"
            "                         for GPU events (--type kernel): bottom_op, top_op,\n"
            "                         op_stack (the CPU operators that launched them), launch\n"
            "  --aggregate F          how a group's times combine: sum (default), mean, max,\n"
            "                         min, count\n"
            "  --order-by [+]COLUMN   self (default), total (or time), count, name,\n"
            "                         cumulative, gpu_time, flops (or computation),\n"
            "                         flops_per_s, bytes (or memory, MegEngine's name),\n"
            "                         bandwidth, input_shapes, output_shapes; '+' for\n"
            "                         ascending\n"
            "  --min-time T           only durations of at least T: a bare number is in\n"
            "  --max-time T           seconds (1e-4, as MegEngine), or give a unit (ns, us,\n"
            "                         ms, s: 100us); and at most T\n"
            "  --type LIST            only these categories or operator types (comma list,\n"
            "                         or --type again): a duration is kept when a word is\n"
            "                         its category (cpu_op, kernel), its name, or the\n"
            "                         operator type in its \"type\", \"op_type\" or\n"
            "                         \"opr_type\" argument (ConvolutionForward,\n"
            "                         aten::conv2d); words with * ? [] are globs\n"
            "  --name PATTERN         only names matching a glob (* ? []) or containing it\n"
            "  --steps LIST           only the events of whole steps: PyTorch's\n"
            "                         ProfilerStep#N, else mlprof's frames; all, N, A-B or\n"
            "                         a comma list (3-5,8); all leaves out an incomplete\n"
            "                         last step and says so on standard error\n"
            "  --per-step             one table per step (of --steps, else of all)\n"
            "  --format F             table (default), json or csv\n"
            "  -o, --output FILE      write there instead of standard output\n"
            "\n"
            "A filter that keeps no duration is not an error: the table says so (JSON:\n"
            "filters_matching_nothing), and a line on standard error names the filter and\n"
            "what the trace has instead (its categories, operator types, names, longest or\n"
            "shortest duration). A trace's envelope (PyTorch's \"PyTorch Profiler (0)\",\n"
            "category Trace) is not an operator: it is left out, and the table says so\n"
            "(--type Trace shows it). A GPU user annotation (ProfilerStep#N as the GPU ran\n"
            "it, category gpu_user_annotation) is a row of its own: \"ProfilerStep#N (GPU)\".\n"
            "Exit status: 0 done (rows or none), 1 the trace is damaged\n"
            "(what was read before the damage is reported) or the output could not be\n"
            "written, 2 a mistake on the command line.\n");
}

static void bad_usage(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, PROG " %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PROG " %s --help'.\n", cmd);
    exit(2);
}

/* bad_usage for an option the command does not know, naming the nearest it
 * does (from its --help text). */
static void unknown_option(const char *cmd, const char *arg);

/* "1e-4" (seconds), "100us", "2.5 ms"; -1 when it is not a time. */
static int64_t parse_time(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || !isfinite(v))
        return -1;
    while (*end == ' ')
        end++;
    double scale = 1e9;
    if (strcmp(end, "ns") == 0)
        scale = 1;
    else if (strcmp(end, "us") == 0)
        scale = 1e3;
    else if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (*end && strcmp(end, "s") != 0)
        return -1;
    return (int64_t)llround(v * scale);
}

/* The value of an option given as "--opt value" or "--opt=value"; NULL if arg
 * is not that option. */
static const char *option_value(const char *cmd, int argc, char **argv, int *i, const char *lng,
                                const char *shrt)
{
    const char *arg = argv[*i];
    size_t n = strlen(lng);
    if (strncmp(arg, lng, n) == 0 && arg[n] == '=')
        return arg + n + 1;
    if (strcmp(arg, lng) != 0 && !(shrt && strcmp(arg, shrt) == 0))
        return NULL;
    if (*i + 1 >= argc)
        bad_usage(cmd, "option %s needs a value", lng);
    return argv[++*i];
}

/* Whether path is a trace this process read (said on stderr): no output is
 * ever written over one. */
static int output_is_input(const char *path)
{
    if (!an_input_was_read(path))
        return 0;
    fprintf(stderr, PROG ": %s is a trace this command read: its output is never written over an input "
                    "(choose another -o)\n", path);
    return 1;
}

static int write_output(const char *path, const mlprof__sb *text)
{
    if (!path || strcmp(path, "-") == 0) {
        /* a large write goes to the file at once and fails there, leaving
         * nothing for the flush to fail on: both are checked */
        size_t n = fwrite(text->data ? text->data : "", 1, text->len, stdout);
        if (n == text->len && fflush(stdout) == 0)
            return 0;
        fprintf(stderr, PROG ": cannot write the output to standard output: %s\n", strerror(errno));
        clearerr(stdout); /* said once: main's check finds nothing more */
        return 1;
    }
    if (output_is_input(path))
        return 1;
    if (mlprof__write_file_atomic(path, text->data ? text->data : "", text->len) != MLPROF_OK) {
        fprintf(stderr, PROG ": %s\n", mlprof_last_error());
        return 1;
    }
    return 0;
}

static void diff_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " diff A B [options]\n"
            "\n"
            "Compares two runs operator by operator: counts, times, the change and its\n"
            "percent, operators new in B or missing from it, the largest changes first.\n"
            "A and B may be directories of ranks' traces (as analyze DIR reads them):\n"
            "each rank of A is compared alone with the same rank of B, one section per\n"
            "rank; a rank in one run only is named; --fail-above counts every rank's.\n"
            "Each row's status (csv, json; the table shows the first three): new, missing,\n"
            "regressed (past --fail-above), changed, or unchanged (same time and count).\n"
            "\n"
            "  --total                compare total time (children included), not self time\n"
            "  --fail-above PCT       exit with status 3 when an operator present in both\n"
            "                         runs grew by more than PCT percent (for CI)\n"
            "  --min-delta T          ...and by at least T (default 0), so that tiny\n"
            "                         operators' noise does not fail a build\n"
            "  --steps LIST           compare only these whole steps of each run, as\n"
            "                         analyze --steps takes them (all, N, A-B, 3-5,8)\n"
            "  and these of analyze: -t/--top (default 20), --aggregate-by, --aggregate\n"
            "  (mean compares per-call times), --min-time, --max-time, --type, --name,\n"
            "  --format, -o/--output\n");
}

/* "list,more": --type given again adds to the list, as MegEngine's
 * profile_analyze appends. The joined list lives until the program ends. */
static const char *join_list(const char *list, const char *more)
{
    static char *joined;
    if (!list)
        return more;
    size_t n = strlen(list) + strlen(more) + 2;
    char *j = malloc(n);
    if (!j) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    snprintf(j, n, "%s,%s", list, more);
    free(joined); /* list itself, when --type came twice before */
    joined = j;
    return j;
}

/* Writes the notes of an analysis, each line after "mlprof CMD: ". */
static void print_notes(const char *cmd, const mlprof__sb *notes)
{
    for (size_t at = 0; at < notes->len;) {
        const char *line = notes->data + at;
        const char *nl = memchr(line, '\n', notes->len - at);
        size_t n = nl ? (size_t)(nl - line) : notes->len - at;
        fprintf(stderr, PROG " %s: %.*s\n", cmd, (int)n, line);
        at += n + 1;
    }
}

/* Parses the options analyze and diff share into o; returns 1 when argv[*i]
 * was one of them. */
static int common_option(const char *cmd, int argc, char **argv, int *i, an_options *o, const char **output)
{
    const char *v;
    if ((v = option_value(cmd, argc, argv, i, "--top", "-t"))) {
        char *end;
        long n = strtol(v, &end, 10);
        if (end == v || *end || n < 0 || n > 100000000)
            bad_usage(cmd, "--top: expected a count from 0, got \"%s\"", v);
        o->top = (int)n;
    } else if ((v = option_value(cmd, argc, argv, i, "--aggregate-by", NULL))) {
        o->aggregate_by = v;
    } else if ((v = option_value(cmd, argc, argv, i, "--aggregate", NULL))) {
        static const char *const how[] = {"sum", "mean", "max", "min", "count"};
        int k = 0;
        while (k < 5 && strcmp(v, how[k]) != 0)
            k++;
        if (k == 5)
            bad_usage(cmd, "--aggregate: expected sum, mean, max, min or count, got \"%s\"", v);
        o->aggregate = k;
    } else if ((v = option_value(cmd, argc, argv, i, "--min-time", NULL))) {
        if ((o->min_ns = parse_time(v)) < 0)
            bad_usage(cmd, "--min-time: expected a time such as 1e-4, 100us or 2ms, got \"%s\"", v);
    } else if ((v = option_value(cmd, argc, argv, i, "--max-time", NULL))) {
        if ((o->max_ns = parse_time(v)) < 0)
            bad_usage(cmd, "--max-time: expected a time such as 1e-4, 100us or 2ms, got \"%s\"", v);
    } else if ((v = option_value(cmd, argc, argv, i, "--type", NULL))) {
        o->type = join_list(o->type, v);
    } else if ((v = option_value(cmd, argc, argv, i, "--name", NULL))) {
        o->name = v;
    } else if ((v = option_value(cmd, argc, argv, i, "--format", NULL))) {
        if (strcmp(v, "table") == 0)
            o->format = AN_TABLE;
        else if (strcmp(v, "json") == 0)
            o->format = AN_JSON;
        else if (strcmp(v, "csv") == 0)
            o->format = AN_CSV;
        else
            bad_usage(cmd, "--format: expected table, json or csv, got \"%s\"", v);
    } else if ((v = option_value(cmd, argc, argv, i, "--output", "-o"))) {
        *output = v;
    } else {
        return 0;
    }
    return 1;
}

/* Reads a trace; a damaged one is kept with a warning (*damaged set). Returns
 * -1 when nothing could be read. */
static int read_trace(an_trace *t, const char *path, int *damaged)
{
    int rc = an_trace_read(t, path);
    if (t->note[0])
        fprintf(stderr, PROG ": note: %s\n", t->note);
    if (rc == 0)
        return 0;
    if (!t->partial) {
        fprintf(stderr, PROG ": %s\n", t->error);
        return -1;
    }
    fprintf(stderr, PROG ": warning: %s; using the %zu events read before it\n", t->error, t->nev);
    *damaged = 1;
    return 0;
}

/* Runs an analysis on every rank's trace in a directory (an_ranks_run), with
 * the stragglers across ranks for kernels. Exit status as main's. */
static int run_on_directory(const char *cmd, const char *dir, const char *output, an_analysis_fn analysis,
                            const an_options *o)
{
    mlprof__sb out, notes;
    mlprof__sb_init(&out);
    mlprof__sb_init(&notes);
    an_ranks_options ro = {strcmp(cmd, "kernels") == 0};
    int damaged = 0;
    char err[1200];
    int rc = an_ranks_run(dir, o, analysis, &ro, &out, &notes, &damaged, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, PROG " %s: %s\n", cmd, err);
    else
        rc = write_output(output, &out);
    if (o->notes)
        print_notes(cmd, o->notes);
    print_notes(cmd, &notes);
    mlprof__sb_free(&notes);
    mlprof__sb_free(&out);
    return rc != 0 || damaged ? 1 : 0;
}

/* Reads one trace, runs an analysis on it and writes what it says. Exit status
 * as main's. */
static int run_on_trace(const char *cmd, const char *path, const char *output,
                        int (*analysis)(an_trace *, const an_options *, mlprof__sb *), const an_options *o)
{
    if (an_is_directory(path))
        return run_on_directory(cmd, path, output, analysis, o);
    an_trace t;
    int damaged = 0;
    if (read_trace(&t, path, &damaged) != 0) {
        an_trace_free(&t);
        return 1;
    }
    mlprof__sb out;
    mlprof__sb_init(&out);
    mlprof__sb step_notes;
    mlprof__sb_init(&step_notes);
    int rc = an_run_steps(&t, o, analysis, &out, &step_notes);
    if (rc != 0)
        fprintf(stderr, PROG ": out of memory\n");
    else
        rc = write_output(output, &out);
    if (o->notes)
        print_notes(cmd, o->notes);
    print_notes(cmd, &step_notes);
    mlprof__sb_free(&step_notes);
    mlprof__sb_free(&out);
    an_trace_free(&t);
    return rc != 0 || damaged ? 1 : 0;
}

/* kernels' own options (HTA's thresholds, --csv-table), taken out of argv by cmd_kernels */
static an_gpu_options g_gpu_options;

static int kernels_analysis(an_trace *t, const an_options *o, mlprof__sb *out)
{
    return an_kernels_with(t, o->format, o->top, &g_gpu_options, out, o->notes);
}

/* The arguments of a command on one trace (analyze, kernels): --help, the
 * common options, --order-by where the command sorts its rows, the path.
 * Exits on --help (0) and on a mistake (2). */
static const char *one_trace_args(const char *cmd, int argc, char **argv, void (*help)(FILE *), int order_by,
                                  an_options *o, const char **output)
{
    const char *path = NULL, *v;
    an_options_default(o);
    *output = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            help(stdout);
            exit(0);
        }
        if (common_option(cmd, argc, argv, &i, o, output))
            continue;
        if (order_by && (v = option_value(cmd, argc, argv, &i, "--order-by", NULL)))
            o->order_by = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--steps", NULL)))
            o->steps = v;
        else if (strcmp(arg, "--per-step") == 0)
            o->per_step = 1;
        else if (arg[0] == '-' && arg[1])
            unknown_option(cmd, arg);
        else if (!path)
            path = arg;
        else
            bad_usage(cmd, "one trace at a time (\"%s\" is a second)", arg);
    }
    if (!path) {
        char which[64];
        snprintf(which, sizeof which, "which trace? (mlprof %s TRACE)", cmd);
        bad_usage(cmd, "%s", which);
    }
    char err[300];
    if (an_options_check_steps(o, err, sizeof err) != 0)
        bad_usage(cmd, "%s", err);
    return path;
}

static int cmd_analyze(int argc, char **argv)
{
    an_options o;
    const char *output;
    const char *path = one_trace_args("analyze", argc, argv, analyze_usage, 1, &o, &output);
    char err[300];
    if (an_options_check(&o, err, sizeof err) != 0)
        bad_usage("analyze", "%s", err);
    mlprof__sb notes;
    mlprof__sb_init(&notes);
    o.notes = &notes;
    int rc = run_on_trace("analyze", path, output, an_analyze, &o);
    mlprof__sb_free(&notes);
    return rc;
}

/* diff DIR_A DIR_B: rank by rank (an_ranks_diff). Exit status as cmd_diff's. */
static int diff_directories(const char *const paths[2], const char *output, an_options *o,
                            const an_diff_options *d)
{
    if (!an_is_directory(paths[0]) || !an_is_directory(paths[1]))
        bad_usage("diff", "%s", "give two traces or two directories of ranks' traces");
    mlprof__sb out, notes;
    mlprof__sb_init(&out);
    mlprof__sb_init(&notes);
    o->notes = &notes;
    size_t regressions = 0;
    int damaged = 0;
    char err[1200];
    int rc = an_ranks_diff(paths[0], paths[1], o, d, &out, &notes, &regressions, &damaged, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, PROG " diff: %s\n", err);
    else
        rc = write_output(output, &out);
    print_notes("diff", &notes);
    mlprof__sb_free(&out);
    mlprof__sb_free(&notes);
    if (rc != 0 || damaged)
        return 1;
    if (regressions) {
        fprintf(stderr, PROG ": %zu operators regressed by more than %g%%\n", regressions, d->fail_above_pct);
        return 3;
    }
    return 0;
}

static int cmd_diff(int argc, char **argv)
{
    const char *cmd = "diff";
    an_options o;
    an_options_default(&o);
    an_diff_options d = {0, -1, 0};
    const char *paths[2] = {NULL, NULL}, *output = NULL, *v;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            diff_usage(stdout);
            return 0;
        }
        if (common_option(cmd, argc, argv, &i, &o, &output))
            continue;
        if (strcmp(arg, "--total") == 0) {
            d.total = 1;
        } else if ((v = option_value(cmd, argc, argv, &i, "--fail-above", NULL))) {
            char *end;
            d.fail_above_pct = strtod(v, &end);
            if (end == v || (*end && strcmp(end, "%") != 0) || !(d.fail_above_pct >= 0))
                bad_usage(cmd, "--fail-above: expected a percentage such as 10, got \"%s\"", v);
        } else if ((v = option_value(cmd, argc, argv, &i, "--min-delta", NULL))) {
            if ((d.min_delta_ns = parse_time(v)) < 0)
                bad_usage(cmd, "--min-delta: expected a time such as 1e-4, 100us or 2ms, got \"%s\"", v);
        } else if ((v = option_value(cmd, argc, argv, &i, "--steps", NULL))) {
            o.steps = v;
        } else if (arg[0] == '-' && arg[1]) {
            unknown_option(cmd, arg);
        } else if (!paths[0]) {
            paths[0] = arg;
        } else if (!paths[1]) {
            paths[1] = arg;
        } else {
            bad_usage(cmd, "two traces (\"%s\" is a third)", arg);
        }
    }
    if (!paths[1])
        bad_usage(cmd, "%s", "which two traces? (mlprof diff A B)");
    char err[300];
    if (an_options_check(&o, err, sizeof err) != 0 || an_options_check_steps(&o, err, sizeof err) != 0)
        bad_usage(cmd, "%s", err);
    if (an_is_directory(paths[0]) || an_is_directory(paths[1]))
        return diff_directories(paths, output, &o, &d);
    an_trace a, b;
    int damaged = 0;
    int ra = read_trace(&a, paths[0], &damaged), rb = read_trace(&b, paths[1], &damaged);
    int rc = 1;
    size_t regressions = 0;
    if (ra == 0 && rb == 0) {
        mlprof__sb out, notes;
        mlprof__sb_init(&out);
        mlprof__sb_init(&notes);
        o.notes = &notes;
        rc = an_diff(&a, &b, &o, &d, &out, &regressions);
        if (rc != 0)
            fprintf(stderr, PROG ": out of memory\n");
        else
            rc = write_output(output, &out);
        print_notes(cmd, &notes);
        mlprof__sb_free(&out);
        mlprof__sb_free(&notes);
    }
    an_trace_free(&a);
    an_trace_free(&b);
    if (rc != 0 || damaged)
        return 1;
    if (regressions) {
        fprintf(stderr, PROG ": %zu operators regressed by more than %g%%\n", regressions, d.fail_above_pct);
        return 3;
    }
    return 0;
}

static void merge_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " merge TRACE TRACE... [-o OUT] [options]\n"
            "\n"
            "Puts several traces (processes, ranks, hosts) on one timeline, each on\n"
            "process tracks of its own, and writes a Chrome trace (standard output\n"
            "without -o). Times are aligned by the offsets or the sync marker given;\n"
            "else by the clock sync the ranks measured when every trace with a rank\n"
            "has one (otherData.clock_sync: offset and drift to the reference rank; the\n"
            "method and the worst error bound go into otherData.merge.clock_sync);\n"
            "else on the clock the traces share when they say they come from one host\n"
            "(mlprof's do); else on the real-time clock when every trace says it is on\n"
            "it (PyTorch's profiler's are: each one's baseTimeNanoseconds is added);\n"
            "else their starts are lined up, with a warning. The ids that link events\n"
            "(correlation, External id, flow and async ids) stay apart per trace: the\n"
            "first trace's as they were, the next ones' moved by a power of ten. The\n"
            "method, the offsets, the id offsets and each trace's rank, distributedInfo\n"
            "and deviceProperties are written into the output's otherData.merge (the\n"
            "lowest rank's distributedInfo also at the top level, where PyTorch's tools\n"
            "look for it). Ranks are labelled and ordered by their rank (a process named\n"
            "with its label already, by an earlier merge, is not labelled again); ranks\n"
            "below the world size that no trace is are listed in\n"
            "otherData.merge.missing_ranks, and said. A trace with no rank and no clock\n"
            "sync beside ranks that measured theirs (the launcher's, from mlprof run --\n"
            "torchrun) takes the clock sync of a rank on its host. Traces of different\n"
            "jobs (distributedInfo's job_id or world_size differ) are merged with a\n"
            "warning.\n"
            "The merge streams: each trace is read once for its clocks, ranks and ids,\n"
            "then again to write its events, one at a time; memory holds one trace and\n"
            "a few MiB of output, whatever the number of traces (the output file is\n"
            "written as it goes, under a temporary name renamed at the end).\n"
            "\n"
            "  --names L1,L2,...      a label per trace (\"rank 0,rank 1\"); default: the paths\n"
            "  --offsets T1,T2,...    time added to each trace (seconds, or with ns/us/ms/s)\n"
            "  --sync-marker NAME     align the first event named NAME of every trace\n"
            "  --same-clock           the traces share a clock: do not shift them\n"
            "  -o, --output FILE      where to write (atomically; gzip when FILE ends in .gz)\n");
}

/* Splits a comma list into n parts (the list is modified). Returns the count. */
static size_t split_list(char *list, char **parts, size_t max)
{
    size_t n = 0;
    for (char *p = list; p && n < max;) {
        parts[n++] = p;
        p = strchr(p, ',');
        if (p)
            *p++ = '\0';
    }
    return n;
}

/* What the merge could not do as asked: a clock sync in some traces only,
 * ranks of the job that no trace is. */
static void merge_warnings(const an_merge_input *in, size_t n, int method)
{
    size_t synced = 0;
    an_clock_sync cs;
    for (size_t i = 0; i < n; i++)
        synced += (size_t)an_clock_sync_read(&in[i].view, &cs);
    if (synced && method != AN_ALIGN_CLOCK_SYNC && method != AN_ALIGN_GIVEN && method != AN_ALIGN_MARKER)
        fprintf(stderr, PROG " merge: warning: only %zu of %zu traces have a clock_sync: it is not applied\n",
                synced, n);
    for (size_t i = 0; i < n && method == AN_ALIGN_CLOCK_SYNC; i++) {
        /* a trace without a rank beside the ranks' (the launcher's) */
        long from = an_merge_input_sync(in, n, i, &cs);
        if (from < 0)
            fprintf(stderr, PROG " merge: warning: %s has no rank and no clock_sync, and no rank shares its host's "
                            "clock: its start is lined up with the ranks' first\n",
                    in[i].view.path);
        else if ((size_t)from != i)
            fprintf(stderr, PROG " merge: note: %s has no rank and no clock_sync (the launcher?): it is put on the "
                            "clock of rank %lld, on its host\n",
                    in[i].view.path, in[from].rank);
    }
    mlprof__sb jobs;
    mlprof__sb_init(&jobs);
    if (an_merge_jobs_differ(in, n, &jobs))
        fprintf(stderr, PROG " merge: warning: the traces are of different jobs (their distributedInfo's job_id or "
                        "world_size differ): %s\n",
                jobs.data ? jobs.data : "");
    mlprof__sb_free(&jobs);
    mlprof__sb missing;
    mlprof__sb_init(&missing);
    long long world = an_merge_missing_ranks(in, n, &missing);
    if (world > 0 && missing.len)
        fprintf(stderr, PROG " merge: warning: rank%s %s of %lld missing (no trace says it is that rank)\n",
                strchr(missing.data, ',') ? "s" : "", missing.data, world);
    mlprof__sb_free(&missing);
}

static int cmd_merge(int argc, char **argv)
{
    const char *cmd = "merge";
    const char *output = NULL, *v, *names = NULL, *offsets = NULL;
    an_merge_options mo = {NULL, NULL, NULL, 0};
    const char **paths = calloc((size_t)argc, sizeof *paths);
    size_t npaths = 0;
    if (!paths)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            merge_usage(stdout);
            free(paths);
            return 0;
        }
        if ((v = option_value(cmd, argc, argv, &i, "--output", "-o")))
            output = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--names", NULL)))
            names = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--offsets", NULL)))
            offsets = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--sync-marker", NULL)))
            mo.sync_marker = v;
        else if (strcmp(arg, "--same-clock") == 0)
            mo.same_clock = 1;
        else if (arg[0] == '-' && arg[1])
            unknown_option(cmd, arg);
        else
            paths[npaths++] = arg;
    }
    if (npaths < 2)
        bad_usage(cmd, "%s", "which traces? (mlprof merge A B ... -o OUT)");
    if ((offsets != NULL) + (mo.sync_marker != NULL) + mo.same_clock > 1)
        bad_usage(cmd, "%s", "choose one of --offsets, --sync-marker and --same-clock");
    char *names_copy = names ? strdup(names) : NULL, *offsets_copy = offsets ? strdup(offsets) : NULL;
    char **labels = calloc(npaths + 1, sizeof *labels), **parts = calloc(npaths + 1, sizeof *parts);
    int64_t *off = calloc(npaths, sizeof *off);
    an_merge_input *sum = calloc(npaths, sizeof *sum);
    if (!labels || !parts || !off || !sum || (names && !names_copy) || (offsets && !offsets_copy))
        return 1;
    if (names_copy) {
        if (split_list(names_copy, labels, npaths + 1) != npaths)
            bad_usage(cmd, "--names: give one label per trace (%s)", names);
        mo.labels = (const char *const *)labels;
    }
    if (offsets_copy) {
        if (split_list(offsets_copy, parts, npaths + 1) != npaths)
            bad_usage(cmd, "--offsets: give one time per trace (%s)", offsets);
        for (size_t i = 0; i < npaths; i++) {
            const char *s = parts[i];
            int neg = *s == '-';
            int64_t t = parse_time(neg ? s + 1 : s);
            if (t < 0)
                bad_usage(cmd, "--offsets: expected times such as 0,1.5ms,-20us, got \"%s\"", s);
            off[i] = neg ? -t : t;
        }
        mo.offsets = off;
    }
    /* streamed: a first pass reads each trace for what the merge needs of it
     * (clocks, ranks, pids, ids), the second reads each again and writes its
     * events to the output; memory holds one trace at a time */
    int damaged = 0, rc = 0;
    size_t made = 0;
    an_trace **kept = calloc(npaths, sizeof *kept);
    for (; made < npaths && rc == 0 && kept; made++) {
        an_trace t;
        struct stat st;
        if (read_trace(&t, paths[made], &damaged) != 0)
            rc = 1;
        else if (an_merge_summarize(&t, &mo, &sum[made]) != 0) {
            fprintf(stderr, PROG " merge: out of memory\n");
            rc = 1;
        } else if (stat(paths[made], &st) != 0 || !S_ISREG(st.st_mode)) {
            /* a pipe (<(zcat ...)) or standard input is read once: kept whole */
            kept[made] = malloc(sizeof t);
            if (kept[made]) {
                *kept[made] = t;
                continue;
            }
            rc = 1;
        }
        an_trace_free(&t);
    }
    if (!kept)
        rc = 1;
    if (rc == 0 && output_is_input(output))
        rc = 1;
    if (rc == 0) {
        char err[600] = "";
        int method;
        if (an_merge_stream(sum, kept, npaths, &mo, output, &method, err, sizeof err) != 0) {
            fprintf(stderr, PROG " merge: %s\n", err[0] ? err : "out of memory");
            rc = 1;
        } else {
            if (method == AN_ALIGN_STARTS)
                fprintf(stderr, PROG " merge: warning: the traces do not say they share a clock; their starts "
                                "are lined up (give --offsets or --sync-marker to align them)\n");
            merge_warnings(sum, npaths, method);
        }
    }
    for (size_t i = 0; i < made; i++) {
        an_merge_input_free(&sum[i]);
        if (kept[i])
            an_trace_free(kept[i]);
        free(kept[i]);
    }
    free(kept);
    free(sum);
    free(labels);
    free(parts);
    free(off);
    free(names_copy);
    free(offsets_copy);
    free(paths);
    return rc != 0 || damaged ? 1 : 0;
}

static void ranks_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " ranks TRACE... | DIR | MERGED_TRACE [options]\n"
            "\n"
            "The ranks of a distributed job (MPI, torchrun, NCCL) side by side: per rank its\n"
            "compute, communication and idle time and their overlap; each collective\n"
            "matched across the ranks, which rank arrived last and how late the others\n"
            "were; the straggler of the run; the load imbalance between ranks.\n"
            "\n"
            "Inputs: one trace per rank (mlprof's, with the mpi hook's spans; PyTorch's\n"
            "profiler's), a directory of them (as analyze DIR reads it: other files are\n"
            "skipped and named), or one trace that mlprof merge made of them (its ranks\n"
            "and their processes as its otherData.merge says, else its processes' names\n"
            "\"rank N: ...\"). A trace's rank is its distributedInfo.rank. A trace\n"
            "without one beside traces that have one is not a rank (the launcher's, when\n"
            "mlprof run wraps torchrun or mpirun): it is left out, said in a line. When no\n"
            "trace says its rank, they are numbered in file-name order (said on standard\n"
            "error). Two traces of one rank are an error (the processes of one rank: give\n"
            "the job's merged trace), and so are traces of different jobs (their\n"
            "distributedInfo's job_id or world_size differ: a rank of an earlier job left\n"
            "in job.json.parts/), named with their jobs, unless --any-job. The ranks'\n"
            "times are put on one clock as merge aligns them:\n"
            "the offsets and drift the ranks measured (otherData.clock_sync) when every\n"
            "trace has them, else a clock they say they share, else the real-time clock\n"
            "PyTorch's traces are stamped with, else their starts lined up (said loudly);\n"
            "a merged trace's are already. Each trace is read, summarized and freed before\n"
            "the next: memory holds one trace, and per rank its totals and 48 bytes for\n"
            "each collective call.\n"
            "\n"
            "  -t, --top N            collectives listed one by one, furthest apart first\n"
            "                         (default 20; 0 for all)\n"
            "  --format F             table (default), json or csv\n"
            "  --csv-table WHAT       what csv writes: ranks (default: a row per rank) or\n"
            "                         collectives (a row per rank's call of each matched\n"
            "                         collective: arrival, late, wait, duration, bytes)\n"
            "  -o, --output FILE      write there instead of standard output\n"
            "  --any-job              compare traces of different jobs all the same (a warning\n"
            "                         on standard error, in the table and in JSON's warnings)\n"
            "\n"
            "%s"
            "\n"
            "Exit status: 0 done, 1 an input is not a trace, is damaged (what was read is\n"
            "used, with a warning), two say the same rank, the traces are of different\n"
            "jobs (without --any-job), or the output could not be written; 2 a mistake\n"
            "on the command line.\n",
            an_dist_help);
}

/* arg is the option lng (or shrt), with its value after '=' or not. */
static int is_option(const char *arg, const char *lng, const char *shrt)
{
    size_t n = strlen(lng);
    return strcmp(arg, lng) == 0 || (shrt && strcmp(arg, shrt) == 0) || (strncmp(arg, lng, n) == 0 && arg[n] == '=');
}

static int cmd_ranks(int argc, char **argv)
{
    const char *cmd = "ranks", *v;
    int csv = AN_DIST_CSV_RANKS, any_job = 0;
    an_options o;
    an_options_default(&o);
    const char *output = NULL;
    /* the traces are gathered at the front of argv itself: nothing to free when bad_usage exits */
    const char **paths = (const char **)argv;
    size_t npaths = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            ranks_usage(stdout);
            return 0;
        }
        if (is_option(arg, "--top", "-t") || is_option(arg, "--format", NULL) || is_option(arg, "--output", "-o")) {
            common_option(cmd, argc, argv, &i, &o, &output);
        } else if ((v = option_value(cmd, argc, argv, &i, "--csv-table", NULL))) {
            if (strcmp(v, "ranks") == 0)
                csv = AN_DIST_CSV_RANKS;
            else if (strcmp(v, "collectives") == 0)
                csv = AN_DIST_CSV_COLLECTIVES;
            else
                bad_usage(cmd, "--csv-table: expected ranks or collectives, got \"%s\"", v);
        } else if (strcmp(arg, "--any-job") == 0) {
            any_job = 1;
        } else if (arg[0] == '-' && arg[1]) {
            unknown_option(cmd, arg);
        } else {
            paths[npaths++] = arg;
        }
    }
    if (!npaths)
        bad_usage(cmd, "%s", "which traces? (mlprof ranks TRACE... | DIR | MERGED_TRACE)");
    /* one file given twice would be two ranks with the same events */
    for (size_t i = 0; i < npaths; i++) {
        struct stat si, sj;
        if (strcmp(paths[i], "-") == 0 || stat(paths[i], &si) != 0 || !S_ISREG(si.st_mode))
            continue;
        for (size_t j = 0; j < i; j++)
            if (strcmp(paths[j], "-") != 0 && stat(paths[j], &sj) == 0 && si.st_dev == sj.st_dev &&
                si.st_ino == sj.st_ino)
                bad_usage(cmd, "%s is given twice: each trace is one rank's", paths[i]);
    }
    mlprof__sb out, notes;
    mlprof__sb_init(&out);
    mlprof__sb_init(&notes);
    int damaged = 0;
    char err[1200];
    int rc = an_ranks_dist(paths, npaths, &o, csv, any_job, &out, &notes, &damaged, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, PROG " %s: %s\n", cmd, err);
    else
        rc = write_output(output, &out);
    print_notes(cmd, &notes);
    mlprof__sb_free(&notes);
    mlprof__sb_free(&out);
    return rc != 0 || damaged ? 1 : 0;
}

static void kernels_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " kernels TRACE|DIR [options]\n"
            "\n"
            "Where the GPU's time goes: per device, the time in compute, communication\n"
            "(NCCL) and memory (copies, memsets) kernels, their overlap, busy and idle time,\n"
            "per stream busy and idle time; and the GPU time of each CPU operator that\n"
            "launched kernels (linked by correlation id, else by flow events, else by\n"
            "their operator's External id; the header counts each way). Devices are\n"
            "named GPU N (MTIA N for MTIA's activity), with deviceProperties' name.\n"
            "\n"
            "CUPTI counter ranges (cuda_profiler_range events: PyTorch's profiler_metrics,\n"
            "mlprof's gpu metrics) are listed per kernel (FLOP/s and bandwidth) and one by\n"
            "one, with one column per counter found in them. Their dur is never GPU time\n"
            "(PyTorch spreads the trace's span evenly over them): GPU time and rates come\n"
            "only from a measured gpu__time_duration, else they are left blank. PyTorch's\n"
            "ranges carry no correlation id: they come in launch order, so the i-th range\n"
            "of a device takes the CPU operators (op stack, bottom and top) of the i-th\n"
            "kernel launch (cudaLaunchKernel, cuLaunchKernel and their forms); where a\n"
            "device's ranges and launches differ in number its ranges get none, and a line\n"
            "on standard error says so.\n"
            "\n"
            "DIR: a directory of traces, one per rank, each analysed alone as analyze DIR\n"
            "does, then the stragglers across ranks: each collective (NCCL kernel; the\n"
            "k-th kernel of a name on one rank is the k-th of that name on the others),\n"
            "the rank that starts it last and by how much after the earliest, on one clock\n"
            "(as merge aligns: PyTorch's traces share the hosts' real-time clock); per\n"
            "rank how often it was last, its total and mean lateness (table and JSON;\n"
            "the whole traces, whatever --steps).\n"
            "\n"
            "  -t, --top N            rows to show in each list (default 20; 0 for all)\n"
            "  --format F             table (default), json, or csv (the counter ranges one\n"
            "                         by one; the kernels by name when there are none)\n"
            "  -o, --output FILE      write there instead of standard output\n"
            "  --steps LIST           only the events of whole steps: PyTorch's\n"
            "                         ProfilerStep#N, else mlprof's frames; all, N, A-B or\n"
            "                         a comma list (3-5,8); all leaves out an incomplete\n"
            "                         last step and says so on standard error\n"
            "  --per-step             one report per step (of --steps, else of all)\n"
            "  --kernel-wait T        idle gaps shorter than T that the CPU did not cause\n"
            "                         are kernel wait, longer ones other (default 30ns,\n"
            "                         HTA's consecutive_kernel_delay)\n"
            "  --runtime-cutoff T     a launch call longer than T is a runtime outlier, a\n"
            "                         kernel shorter than its call (no longer than T) a\n"
            "                         short GPU kernel (default 50us, as HTA)\n"
            "  --launch-delay-cutoff T  a launch delay (kernel start less call start)\n"
            "                         longer than T is an outlier (default 100us, as HTA)\n"
            "  --csv-table WHAT       what --format csv writes: kernels, ranges, idle (per\n"
            "                         stream, by cause), launches (one row per launch) or\n"
            "                         overlap (per device); default: ranges, else kernels\n");
}

/* Takes kernels' own options out of argv into g_gpu_options; returns the new argc. */
static int kernels_own_options(int argc, char **argv)
{
    an_gpu_options_default(&g_gpu_options);
    int n = 1;
    for (int i = 1; i < argc; i++) {
        const char *v, *opt = NULL;
        int64_t *time = NULL;
        if ((v = option_value("kernels", argc, argv, &i, opt = "--kernel-wait", NULL)))
            time = &g_gpu_options.kernel_wait_ns;
        else if ((v = option_value("kernels", argc, argv, &i, opt = "--runtime-cutoff", NULL)))
            time = &g_gpu_options.runtime_cutoff_ns;
        else if ((v = option_value("kernels", argc, argv, &i, opt = "--launch-delay-cutoff", NULL)))
            time = &g_gpu_options.launch_delay_cutoff_ns;
        else if ((v = option_value("kernels", argc, argv, &i, "--csv-table", NULL))) {
            static const char *const what[] = {"kernels", "ranges", "idle", "launches", "overlap"};
            int k = 0;
            while (k < 5 && strcmp(v, what[k]) != 0)
                k++;
            if (k == 5)
                bad_usage("kernels", "--csv-table: expected kernels, ranges, idle, launches or overlap, got \"%s\"", v);
            g_gpu_options.csv = AN_GPU_CSV_KERNELS + k;
            continue;
        } else {
            argv[n++] = argv[i];
            continue;
        }
        if ((*time = parse_time(v)) < 0) {
            char what[200];
            snprintf(what, sizeof what, "%s: expected a time such as 30ns, 50us or 1e-4, got \"%.120s\"", opt, v);
            bad_usage("kernels", "%s", what);
        }
    }
    return n;
}

static int cmd_kernels(int argc, char **argv)
{
    an_options o;
    const char *output;
    argc = kernels_own_options(argc, argv);
    const char *path = one_trace_args("kernels", argc, argv, kernels_usage, 0, &o, &output);
    /* analyze's options that kernels would ignore: a filter must not be dropped without a word */
    const char *ignored = o.type                          ? "--type"
                          : o.name                        ? "--name"
                          : o.min_ns >= 0                 ? "--min-time"
                          : o.max_ns >= 0                 ? "--max-time"
                          : o.aggregate != AN_SUM         ? "--aggregate"
                          : strcmp(o.aggregate_by, "name") ? "--aggregate-by"
                                                          : NULL;
    if (ignored)
        bad_usage("kernels", "%s is an option of analyze; kernels takes every GPU event ('" PROG
                             " analyze TRACE --type kernel ...' filters them)", ignored);
    mlprof__sb notes;
    mlprof__sb_init(&notes);
    o.notes = &notes;
    int rc = run_on_trace("kernels", path, output, kernels_analysis, &o);
    mlprof__sb_free(&notes);
    return rc;
}

static void augment_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " augment TRACE -o OUT [options]\n"
            "\n"
            "Writes TRACE again to OUT with counter tracks (Chrome \"C\" events) added, as\n"
            "Holistic Trace Analysis's generate_trace_with_counters does, and prints a\n"
            "summary:\n"
            "  Queue Length       per stream: the kernels, copies and memsets launched by a\n"
            "                     runtime call (cudaLaunchKernel...) that has started, and\n"
            "                     not yet finished on the GPU; a sample at every change\n"
            "  Queue Full         per stream whose queue reached the limit: 1 while full\n"
            "  Memory Bandwidth   per stream (and per device, all streams): bytes per second\n"
            "                     of the copies and memsets running (their \"bytes\" spread\n"
            "                     evenly over their duration)\n"
            "The time blocked on a full queue is the time a stream's queue held the limit\n"
            "or more (the CPU's next launch on it blocks then), summed over streams, also\n"
            "as a share of the trace's span. Every other event and member of TRACE is\n"
            "kept (as compact JSON). OUT is gzip-compressed when its name ends in .gz;\n"
            "it is never TRACE itself. What the trace\n"
            "lacks for a series (runtime calls, correlation ids, bytes) is said on\n"
            "standard error.\n"
            "\n"
            "  -o, --output OUT       the augmented trace (required)\n"
            "  --queue-limit N        the launch queue's length that counts as full\n"
            "                         (default 1024, HTA's CUDA_MAX_LAUNCH_QUEUE_PER_STREAM)\n"
            "  --queue-until WHEN     end (default): a kernel leaves its queue when it ends;\n"
            "                         start: when it starts, as HTA counts it\n"
            "  --format F             the summary as table (default) or json\n");
}

/* A count from lo to hi, or bad usage. */
static long count_value(const char *cmd, const char *opt, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < lo || n > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: expected a count from %ld to %ld, got \"%%s\"", opt, lo, hi);
        bad_usage(cmd, msg, v);
    }
    return n;
}

static int cmd_augment(int argc, char **argv)
{
    const char *cmd = "augment", *path = NULL, *output = NULL, *v;
    int format = AN_TABLE;
    int64_t limit = AN_LAUNCH_QUEUE_LIMIT;
    int until_start = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            augment_usage(stdout);
            return 0;
        }
        if ((v = option_value(cmd, argc, argv, &i, "--output", "-o")))
            output = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--queue-limit", NULL)))
            limit = count_value(cmd, "--queue-limit", v, 1, 1000000000);
        else if ((v = option_value(cmd, argc, argv, &i, "--queue-until", NULL))) {
            if (strcmp(v, "start") != 0 && strcmp(v, "end") != 0)
                bad_usage(cmd, "--queue-until: expected start or end, got \"%s\"", v);
            until_start = strcmp(v, "start") == 0;
        }
        else if ((v = option_value(cmd, argc, argv, &i, "--format", NULL))) {
            if (strcmp(v, "table") != 0 && strcmp(v, "json") != 0)
                bad_usage(cmd, "--format: expected table or json, got \"%s\"", v);
            format = strcmp(v, "json") == 0 ? AN_JSON : AN_TABLE;
        } else if (arg[0] == '-' && arg[1])
            unknown_option(cmd, arg);
        else if (!path)
            path = arg;
        else
            bad_usage(cmd, "one trace at a time (\"%s\" is a second)", arg);
    }
    if (!path)
        bad_usage(cmd, "%s", "which trace? (mlprof augment TRACE -o OUT)");
    if (!output)
        bad_usage(cmd, "%s", "where to? (-o OUT: augment never writes over its input)");
    char why[300];
    if (an_augment_input_ok(path, why, sizeof why) != 0) {
        fprintf(stderr, PROG " augment: %s: %s\n", path, why);
        return 1;
    }
    an_trace t;
    if (an_trace_read(&t, path) != 0) {
        /* a damaged trace cannot be copied whole: no partial output */
        fprintf(stderr, PROG " augment: %s%s\n", t.error, t.partial ? "; nothing written" : "");
        an_trace_free(&t);
        return 1;
    }
    if (t.note[0])
        fprintf(stderr, PROG " augment: note: %s\n", t.note);
    an_augment a;
    if (an_augment_compute(&t, limit, until_start, &a) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        an_trace_free(&t);
        return 1;
    }
    char err[700];
    size_t written = 0;
    int rc = an_augment_write(&t, &a, path, output, &written, err, sizeof err) == 0 ? 0 : 1;
    if (rc != 0)
        fprintf(stderr, PROG " augment: %s\n", err);
    int gzip = mlprof__gz_name(output);
    mlprof__sb out, notes;
    mlprof__sb_init(&out);
    mlprof__sb_init(&notes);
    if (rc == 0) {
        an_augment_report(&t, &a, format, output, written, gzip, &out);
        if (strcmp(output, "-") == 0) { /* the trace is on standard output: the summary goes beside it */
            fwrite(out.data ? out.data : "", 1, out.len, stderr);
        } else {
            rc = write_output(NULL, &out);
        }
    }
    an_augment_notes(&t, &a, &notes);
    print_notes(cmd, &notes);
    mlprof__sb_free(&notes);
    mlprof__sb_free(&out);
    an_augment_free(&a);
    an_trace_free(&t);
    return rc;
}

static void sequences_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " sequences TRACE [options]\n"
            "\n"
            "The sequences of consecutive kernels (and copies, memsets) on a GPU stream\n"
            "that occur at least twice, as Holistic Trace Analysis's frequent CUDA kernel\n"
            "sequences: for each length from N down to 2, the most frequent, with their\n"
            "count, their total GPU time (the kernels' durations) and the CPU operators\n"
            "that launched the first kernel (its op stack, bottom and top op; a sequence\n"
            "launched from different op stacks is counted once per stack). Occurrences\n"
            "are counted left to right without overlap on a stream.\n"
            "\n"
            "  -n, --length N         the longest sequence (default 3, HTA's\n"
            "                         min_pattern_len; 2 to 64)\n"
            "  -t, --top N            sequences shown per length (default 5, HTA's top_k;\n"
            "                         0 for all)\n"
            "  --format F             table (default), json or csv\n"
            "  -o, --output FILE      write there instead of standard output\n");
}

static int cmd_sequences(int argc, char **argv)
{
    const char *cmd = "sequences", *path = NULL, *output = NULL, *v;
    int format = AN_TABLE, length = AN_SEQ_DEFAULT_LENGTH, top = AN_SEQ_DEFAULT_TOP;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            sequences_usage(stdout);
            return 0;
        }
        if ((v = option_value(cmd, argc, argv, &i, "--output", "-o")))
            output = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--length", "-n")))
            length = (int)count_value(cmd, "--length", v, 2, AN_SEQ_MAX_LENGTH);
        else if ((v = option_value(cmd, argc, argv, &i, "--top", "-t")))
            top = (int)count_value(cmd, "--top", v, 0, 100000000);
        else if ((v = option_value(cmd, argc, argv, &i, "--format", NULL))) {
            format = strcmp(v, "table") == 0 ? AN_TABLE : strcmp(v, "json") == 0 ? AN_JSON
                                                         : strcmp(v, "csv") == 0  ? AN_CSV
                                                                                  : -1;
            if (format < 0)
                bad_usage(cmd, "--format: expected table, json or csv, got \"%s\"", v);
        } else if (arg[0] == '-' && arg[1])
            unknown_option(cmd, arg);
        else if (!path)
            path = arg;
        else
            bad_usage(cmd, "one trace at a time (\"%s\" is a second)", arg);
    }
    if (!path)
        bad_usage(cmd, "%s", "which trace? (mlprof sequences TRACE)");
    an_trace t;
    int damaged = 0;
    if (read_trace(&t, path, &damaged) != 0) {
        an_trace_free(&t);
        return 1;
    }
    mlprof__sb out;
    mlprof__sb_init(&out);
    int rc = an_sequences(&t, length, top, format, &out);
    if (rc != 0)
        fprintf(stderr, PROG ": out of memory\n");
    else
        rc = write_output(output, &out);
    mlprof__sb_free(&out);
    an_trace_free(&t);
    return rc != 0 || damaged ? 1 : 0;
}

static void export_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " export --sqlite OUT.db TRACE\n"
            "       " PROG " export --perfetto OUT.pftrace TRACE\n"
            "\n"
            "--perfetto writes TRACE (any trace analyze reads: mlprof's, PyTorch's...) as\n"
            "Perfetto's protobuf trace, as mlprof writes one while recording (interned names,\n"
            "typed arguments, a sequence per thread), gzip when OUT ends in .gz: smaller and\n"
            "quicker to load in ui.perfetto.dev and trace_processor than JSON. Slices nest\n"
            "on a Perfetto track: a duration that overlaps one of its thread's without\n"
            "nesting goes to a track beside it, \"THREAD (overlapping)\", its times kept.\n"
            "Flow steps (\"t\") and counter values that are not numbers are left out, counted.\n"
            "\n"
            "--sqlite writes TRACE (any trace analyze reads, plain or gzip) as an SQLite database:\n"
            "  processes(pid, name), threads(pid, tid, name),\n"
            "  tracks(id, kind thread|counter, pid, tid, name, series),\n"
            "  slices(id, track_id, name, category, ts_ns, dur_ns, depth, parent_id, self_ns)\n"
            "    (self_ns as analyze computes it),\n"
            "  instants(id, track_id, name, category, ts_ns, ph i|n|b|e, scope, async_id),\n"
            "  args(event_id, idx, key, value, num): of a slice or an instant, num when the\n"
            "    value is a number,\n"
            "  counters(track_id, ts_ns, value), flows(flow_id, from_slice, to_slice),\n"
            "  kernels(slice_id, kind, device, stream, correlation, launch_id, bottom_op_id,\n"
            "    top_op_id, bottom_op, top_op, op_stack): linked as kernels links them,\n"
            "  memory_blocks(device_type, device, addr, bytes, alloc_ts_ns, free_ts_ns,\n"
            "    alloc_id, free_id, slice_id): PyTorch's [memory] instants paired by address\n"
            "    (mlprof's own memory series are counters), meta(key, value).\n"
            "Times are in ns. OUT is written beside itself and renamed: never half written;\n"
            "an OUT that exists is replaced only when it is a regular file, never TRACE.\n"
            "SQLite is loaded at run time (libsqlite3.so.0, Debian's libsqlite3-0; the\n"
            "environment variable MLPROF_SQLITE_LIBRARY names another file).\n"
            "Exit status: 0 done, 1 the trace is damaged or OUT could not be written\n"
            "(nothing is left at OUT), 2 a mistake on the command line.\n");
}

static int export_perfetto(const char *path, const char *output, an_trace *t)
{
    an_pf_stats st;
    char err[1200];
    int rc = an_perfetto_export(t, output, &st, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, PROG " export: %s\n", err);
        return 1;
    }
    /* the trace itself on standard output (-): the summary goes with the notes */
    FILE *say = strcmp(output, "-") == 0 ? stderr : stdout;
    fprintf(say, "%s: %zu slices, %zu async slices, %zu instants, %zu counter samples, %zu flow events on %zu "
                 "tracks, %zu sampled call stacks; %lld bytes (from %s)\n",
            output, st.slices, st.async_slices, st.instants, st.counters, st.flows, st.tracks, st.stack_samples,
            st.bytes, path);
    if (st.stacks_unread)
        fprintf(stderr, PROG " export: the trace's sampled call stacks are left out: they are read from the file "
                        "again, which standard input cannot be (give the trace's path)\n");
    if (st.shift_ns)
        fprintf(stderr, PROG " export: the trace starts %lld ns before 0 (a merge lines traces up so): every time is "
                        "shifted by that much, since Perfetto's are unsigned (otherData.exported_time_shift_ns)\n",
                (long long)st.shift_ns);
    if (st.unended)
        fprintf(stderr, PROG " export: %zu begins (\"B\") were never ended: left out, as analyze leaves them out\n",
                st.unended);
    if (st.overlapping)
        fprintf(stderr, PROG " export: %zu durations overlap one of their thread's without nesting: each is on "
                        "a track of its own beside the thread's (\"(overlapping)\")\n", st.overlapping);
    if (st.async_unmatched)
        fprintf(stderr, PROG " export: %zu async events without their other end: a begin is shown to the "
                        "trace's end (unfinished), an end alone is left out\n", st.async_unmatched);
    if (st.left_out)
        fprintf(stderr, PROG " export: %zu events or values left out (flow steps \"t\", counter values that "
                        "are not numbers)\n", st.left_out);
    return fflush(stdout) != 0 ? 1 : 0;
}

static int cmd_export(int argc, char **argv)
{
    const char *cmd = "export", *path = NULL, *output = NULL, *v;
    int perfetto = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            export_usage(stdout);
            return 0;
        }
        if ((v = option_value(cmd, argc, argv, &i, "--sqlite", NULL)) ||
            (v = option_value(cmd, argc, argv, &i, "--perfetto", NULL))) {
            if (output)
                bad_usage(cmd, "%s", "one format at a time (--sqlite or --perfetto)");
            output = v;
            perfetto = strncmp(arg, "--perfetto", 10) == 0;
        } else if (arg[0] == '-' && arg[1]) {
            unknown_option(cmd, arg);
        } else if (!path) {
            path = arg;
        } else {
            bad_usage(cmd, "one trace at a time (\"%s\" is a second)", arg);
        }
    }
    if (!output)
        bad_usage(cmd, "%s", "which format? (mlprof export --sqlite OUT.db TRACE, or --perfetto OUT.pftrace)");
    if (!path)
        bad_usage(cmd, "which trace? (mlprof export --sqlite|--perfetto %s TRACE)", output);
    if (strcmp(path, output) == 0)
        bad_usage(cmd, "%s: that is the trace itself; choose another file", output);
    an_trace t;
    if (an_trace_read(&t, path) != 0) {
        /* a damaged trace would make an output that looks whole: none is written */
        fprintf(stderr, PROG " export: %s%s\n", t.error, t.partial ? "; nothing written" : "");
        an_trace_free(&t);
        return 1;
    }
    if (t.note[0])
        fprintf(stderr, PROG " export: note: %s\n", t.note);
    if (output_is_input(output)) {
        an_trace_free(&t);
        return 1;
    }
    if (perfetto) {
        int prc = export_perfetto(path, output, &t);
        an_trace_free(&t);
        return prc;
    }
    an_sqlite_stats st;
    char err[1200];
    int rc = an_sqlite_export(&t, path, output, &st, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, PROG " export: %s\n", err);
    } else {
        printf("%s: %zu slices, %zu instants, %zu args, %zu counter samples on %zu counter tracks, %zu flows, "
               "%zu kernels, %zu memory blocks, %zu threads, %zu processes; %lld bytes\n",
               output, st.slices, st.instants, st.args, st.counters, st.tracks - st.threads, st.flows, st.kernels,
               st.memory_blocks, st.threads, st.processes, st.bytes);
        if (st.counter_values_skipped)
            fprintf(stderr, PROG " export: %zu counter values are not numbers: left out of counters\n",
                    st.counter_values_skipped);
        if (st.flow_ends_unbound)
            fprintf(stderr, PROG " export: %zu flow events lie on no slice of their thread: their flows keep a "
                            "NULL end\n", st.flow_ends_unbound);
        if (fflush(stdout) != 0)
            rc = 1;
    }
    an_trace_free(&t);
    return rc != 0 ? 1 : 0;
}

static void ceilings_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " ceilings [options]\n"
            "\n"
            "Measures this machine's ceilings: the peak FLOP/s of FMA kernels (fp64, fp32;\n"
            "the widest vectors the CPU has: AVX-512, AVX2+FMA, else scalar) on one thread\n"
            "and on all the threads this process may use (pinned), and the bandwidth of a\n"
            "STREAM triad (24 bytes, 2 FLOPs per element) at each cache level sysfs lists\n"
            "and DRAM, plus a curve of working sets doubling from 8 KiB. Each rate is\n"
            "measured several times: min, median, max and spread are shown; roofs use max.\n"
            "The result is cached in $XDG_CACHE_HOME/mlprof/ceilings-HASH.json (else\n"
            "~/.cache/mlprof/), HASH of the CPU model and the thread count, and reused.\n"
            "\n"
            "With --gpu, a GPU's instead, from CUDA kernels (PTX mlprof writes, compiled by\n"
            "the driver; libcuda.so.1, or $MLPROF_CUDA_LIBRARY, loaded at run time): FMA\n"
            "peaks in fp64, fp32 and fp16x2 (no tensor cores) and the triad's bandwidth in\n"
            "L2 and device memory, plus a curve; measured each time (a few seconds).\n"
            "\n"
            "  --gpu              measure a GPU (not cached)\n"
            "  --device N         which GPU (default 0)\n"
            "  --ptx              print the GPU kernels' PTX and stop\n"
            "  --refresh          measure even when cached (and cache the new result)\n"
            "  --json             the ceilings as JSON (the cache file's format)\n"
            "  -o, --output FILE  write there instead of standard output\n"
            "  --repeats N        measurements per rate (default 5; implies --refresh)\n"
            "  --max-size BYTES   the DRAM working set (default 4x the last-level cache, 64\n"
            "                     MiB to 1 GiB, at most a quarter of free memory; implies\n"
            "                     --refresh; K, M, G suffixes)\n"
            "Exit status: 0 done, 1 the measurement or the output failed, 2 a mistake on\n"
            "the command line, 3 (--gpu) no NVIDIA driver or no such GPU.\n");
}

/* "64M", "1G", "1048576": bytes, or -1. */
static double parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0) || !isfinite(v))
        return -1;
    double k = *end == 'K' || *end == 'k' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1;
    if (k != 1)
        end++;
    if (*end == 'i')
        end++;
    if (*end == 'B')
        end++;
    return *end ? -1 : v * k;
}

static int cmd_ceilings(int argc, char **argv)
{
    const char *cmd = "ceilings", *output = NULL, *v;
    int refresh = 0, json = 0, gpu = 0, ptx = 0, asked_refresh = 0;
    ce_options co;
    ce_options_default(&co);
    co.progress = stderr;
    gce_options go;
    gce_options_default(&go);
    go.progress = stderr;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            ceilings_usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--refresh") == 0) {
            refresh = asked_refresh = 1;
        } else if (strcmp(argv[i], "--gpu") == 0) {
            gpu = 1;
        } else if (strcmp(argv[i], "--ptx") == 0) {
            ptx = 1;
        } else if ((v = option_value(cmd, argc, argv, &i, "--device", NULL))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 0 || n > 1023)
                bad_usage(cmd, "--device: expected a GPU's number from 0, got \"%s\"", v);
            go.device = (int)n;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if ((v = option_value(cmd, argc, argv, &i, "--output", "-o"))) {
            output = v;
        } else if ((v = option_value(cmd, argc, argv, &i, "--repeats", NULL))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > 63)
                bad_usage(cmd, "--repeats: expected a count from 1 to 63, got \"%s\"", v);
            co.repeats = go.repeats = (int)n;
            refresh = 1;
        } else if ((v = option_value(cmd, argc, argv, &i, "--max-size", NULL))) {
            double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
            if ((co.max_bytes = parse_size(v)) < 65536 || (mem > 0 && co.max_bytes > mem / 2))
                bad_usage(cmd, "--max-size: expected a size from 64K to half of this machine's memory, such as 256M, "
                               "got \"%s\"", v);
            refresh = 1;
        } else {
            unknown_option(cmd, argv[i]);
        }
    }
    if (!gpu && go.device != 0)
        bad_usage(cmd, "%s", "--device chooses a GPU: with --gpu");
    if (gpu && (asked_refresh || co.max_bytes > 0))
        bad_usage(cmd, "%s", asked_refresh ? "--refresh: the GPU's ceilings are measured each time, not cached"
                                           : "--max-size is the CPU's DRAM working set: not with --gpu");
    mlprof__sb out;
    if (ptx || gpu) {
        mlprof__sb_init(&out);
        char err[1400];
        int rc = 0;
        if (ptx) {
            char *text = gce_ptx();
            if (text)
                mlprof__sb_puts(&out, text);
            else
                out.failed = 1;
            mlprof__free(text);
        } else {
            gce_ceilings *g = mlprof__calloc(1, sizeof *g);
            if (!g || (rc = gce_measure(g, &go, err, sizeof err)) != 0) {
                fprintf(stderr, PROG " ceilings --gpu: %s\n", g ? err : "out of memory");
                mlprof__free(g);
                mlprof__sb_free(&out);
                return rc == 1 ? 3 : 1;
            }
            if (json)
                gce_write_json(g, &out);
            else
                gce_print(g, &out);
            mlprof__free(g);
        }
        rc = out.failed ? 1 : write_output(output, &out);
        mlprof__sb_free(&out);
        return rc;
    }
    ce_ceilings c;
    char from[4096], err[700];
    if (ce_get(&c, &co, refresh, from, sizeof from, err, sizeof err) != 0) {
        fprintf(stderr, PROG " ceilings: %s\n", err);
        return 1;
    }
    mlprof__sb_init(&out);
    if (json) {
        ce_write_json(&c, &out);
    } else {
        ce_print(&c, &out);
        if (from[0])
            mlprof__sb_printf(&out, "\ncached in %s (--refresh measures again)\n", from);
    }
    int rc = out.failed ? 1 : write_output(output, &out);
    mlprof__sb_free(&out);
    return rc;
}

static void roofline_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " roofline TRACE [-o roofline.svg] [--ceilings FILE] [options]\n"
            "\n"
            "Places every operator of TRACE (grouped as analyze groups them) by its\n"
            "arithmetic intensity (FLOPs per byte, from its events' \"flops\" and \"bytes\"\n"
            "arguments) and its attained FLOP/s (FLOPs over its total time, children\n"
            "included) against this machine's ceilings (" PROG " ceilings): the cached\n"
            "ones, else measured now, or those of --ceilings FILE. Writes an SVG (log-log\n"
            "axes, every level's bandwidth slope and every peak, points sized by their\n"
            "share of time, hover for details) and prints a table: time, FLOPs, bytes,\n"
            "intensity, attained, roof, %% of roof, memory- or compute-bound.\n"
            "An operator's roof is the peak of its precision (its \"dtype\" argument;\n"
            "fp32 when it has none, and the table says so) or its intensity times the\n"
            "bandwidth of the level its bytes per call fit in, whichever is lower.\n"
            "Operators without FLOPs or bytes are listed as not placed, and so are those\n"
            "that launched GPU work (their CPU time is the launch's).\n"
            "With --gpu-ceilings FILE (" PROG " ceilings --gpu --json), the GPU's roofline\n"
            "instead: the operators that launched GPU work, each timed by the kernels,\n"
            "copies and memsets launched inside it, against that GPU's peaks (fp16 too)\n"
            "and bandwidths; operators are grouped by name.\n"
            "\n"
            "  -o, --output FILE  the SVG (default roofline.svg)\n"
            "  --ceilings FILE    ceilings from this file (" PROG " ceilings --json)\n"
            "  --gpu-ceilings FILE  a GPU's ceilings (" PROG " ceilings --gpu --json)\n"
            "  --refresh          measure the ceilings again\n"
            "  --one-thread       the one-thread roofs (default: all threads')\n"
            "  --format F         the table as table (default) or json\n"
            "  and analyze's --aggregate-by, --type, --name, --min-time, --max-time\n"
            "Exit status: 0 done, 1 the trace or the ceilings file is unreadable, no\n"
            "operator could be placed, or the SVG could not be written, 2 a mistake on\n"
            "the command line.\n");
}

static int cmd_roofline(int argc, char **argv)
{
    const char *cmd = "roofline", *path = NULL, *svg_path = NULL, *ceil_path = NULL, *gpu_path = NULL, *v;
    int refresh = 0;
    an_options o;
    an_options_default(&o);
    rf_options ro = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            roofline_usage(stdout);
            return 0;
        }
        if (common_option(cmd, argc, argv, &i, &o, &svg_path))
            continue;
        if ((v = option_value(cmd, argc, argv, &i, "--ceilings", NULL)))
            ceil_path = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--gpu-ceilings", NULL)))
            gpu_path = v;
        else if (strcmp(arg, "--refresh") == 0)
            refresh = 1;
        else if (strcmp(arg, "--one-thread") == 0)
            ro.one_thread = 1;
        else if (arg[0] == '-' && arg[1])
            unknown_option(cmd, arg);
        else if (!path)
            path = arg;
        else
            bad_usage(cmd, "one trace at a time (\"%s\" is a second)", arg);
    }
    if (!path)
        bad_usage(cmd, "%s", "which trace? (mlprof roofline TRACE)");
    if (o.format == AN_CSV)
        bad_usage(cmd, "%s", "--format: table or json");
    if (ceil_path && refresh)
        bad_usage(cmd, "%s", "--ceilings and --refresh: choose one");
    if (gpu_path && (ceil_path || refresh || ro.one_thread))
        bad_usage(cmd, "%s", "--gpu-ceilings places GPU work against a GPU's ceilings: not with --ceilings, "
                             "--refresh or --one-thread (the CPU's)");
    if (gpu_path && (o.min_ns >= 0 || o.max_ns >= 0))
        bad_usage(cmd, "%s", "--gpu-ceilings times each operator by all its calls' GPU work: not with --min-time "
                             "or --max-time");
    if (gpu_path && o.aggregate_by && strcmp(o.aggregate_by, "name") != 0)
        bad_usage(cmd, "--gpu-ceilings groups operators by name (their GPU time is summed by name), not by \"%s\"",
                  o.aggregate_by);
    char err[700];
    if (an_options_check(&o, err, sizeof err) != 0)
        bad_usage(cmd, "%s", err);
    if (!svg_path)
        svg_path = "roofline.svg";

    /* the trace first: a missing one is said before a measurement of seconds */
    an_trace t;
    int damaged = 0;
    if (read_trace(&t, path, &damaged) != 0) {
        an_trace_free(&t);
        return 1;
    }
    ce_ceilings c;
    char from[4096];
    if (ceil_path || gpu_path) {
        const char *opt = gpu_path ? "--gpu-ceilings" : "--ceilings", *file = gpu_path ? gpu_path : ceil_path;
        int bad = ce_read(&c, file, err, sizeof err) != 0;
        if (!bad && c.gpu != !!gpu_path) {
            snprintf(err, sizeof err, "%s: %s", file,
                     c.gpu ? "a GPU's ceilings (mlprof ceilings --gpu): give them as --gpu-ceilings"
                           : "a CPU's ceilings: --gpu-ceilings takes those of mlprof ceilings --gpu --json");
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, PROG " roofline: %s: %s\n", opt, err);
            an_trace_free(&t);
            return 1;
        }
        snprintf(from, sizeof from, "%s", file);
    } else {
        ce_options co;
        ce_options_default(&co);
        co.progress = stderr;
        if (ce_get(&c, &co, refresh, from, sizeof from, err, sizeof err) != 0) {
            fprintf(stderr, PROG " roofline: the ceilings: %s\n", err);
            an_trace_free(&t);
            return 1;
        }
    }
    ro.ceilings = from[0] ? from : NULL;

    mlprof__sb table, svg, notes;
    mlprof__sb_init(&table);
    mlprof__sb_init(&svg);
    mlprof__sb_init(&notes);
    size_t placed = 0, on_gpu = 0;
    int rc = rf_roofline(&t, &o, &c, &ro, &table, &svg, &notes, &placed, &on_gpu);
    if (rc != 0) {
        fprintf(stderr, PROG " roofline: out of memory\n");
        rc = 1;
    } else {
        rc = write_output(NULL, &table);
        if (!placed && gpu_path) {
            fprintf(stderr, PROG " roofline: %s: no operator that launched GPU work carries both FLOPs and bytes "
                                 "(said below): nothing to place, no SVG written\n", path);
            rc = 1;
        } else if (!placed && on_gpu) {
            fprintf(stderr, PROG " roofline: %s: the operators with FLOPs and bytes launched GPU work (said below): "
                                 "nothing to place against this CPU, no SVG written\n", path);
            rc = 1;
        } else if (!placed) {
            fprintf(stderr,
                    PROG " roofline: %s: no operator carries both FLOPs and bytes (arguments \"flops\" and "
                         "\"bytes\", or FLOPs/flop/computation and memory/Bytes): nothing to place, no SVG written\n",
                    path);
            rc = 1;
        } else if (output_is_input(svg_path)) {
            rc = 1;
        } else if (mlprof__write_file_atomic(svg_path, svg.data, svg.len) != MLPROF_OK) {
            fprintf(stderr, PROG " roofline: %s\n", mlprof_last_error());
            rc = 1;
        } else {
            fprintf(stderr, PROG " roofline: wrote %s\n", svg_path);
        }
    }
    print_notes(cmd, &notes);
    mlprof__sb_free(&table);
    mlprof__sb_free(&svg);
    mlprof__sb_free(&notes);
    an_trace_free(&t);
    return rc != 0 || damaged ? 1 : 0;
}

static void flame_usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " flame TRACE [--folded] [-o OUT] [--span NAME] [--lines]\n"
            "\n"
            "The call stacks sampled in TRACE (recorded with the sampling key, or\n"
            "mlprof run --sample HZ; any trace with Chrome's stackFrames and samples),\n"
            "merged by function name:\n"
            "  --folded      folded stacks, one line per stack: root;...;leaf COUNT\n"
            "                (flamegraph.pl, speedscope and inferno read them)\n"
            "  -o OUT        where to write (default: flame.svg, or standard output with\n"
            "                --folded); without --folded an SVG flame graph: hover for a\n"
            "                frame's samples, share and source lines (where the trace has\n"
            "                them), click to zoom, \"Reset zoom\" to go back\n"
            "  --span NAME   only the samples taken on a thread while a span NAME was open\n"
            "                on it: a task, or a frame (from its thread's begin to its\n"
            "                end); the function view of one operator or iteration\n"
            "  --lines       a function's frames split by source line: \"f (file.c:12)\"\n"
            "                (frames the trace gives a file and line)\n"
            "Exit status: 0 done, 1 no samples (said) or the trace is damaged, 2 usage.\n");
}

static int cmd_flame(int argc, char **argv)
{
    const char *cmd = "flame", *path = NULL, *output = NULL, *span = NULL, *v;
    int folded = 0, lines = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            flame_usage(stdout);
            return 0;
        }
        if (strcmp(arg, "--folded") == 0)
            folded = 1;
        else if (strcmp(arg, "--lines") == 0)
            lines = 1;
        else if ((v = option_value(cmd, argc, argv, &i, "--output", "-o")))
            output = v;
        else if ((v = option_value(cmd, argc, argv, &i, "--span", NULL)))
            span = v;
        else if (arg[0] == '-' && arg[1])
            unknown_option(cmd, arg);
        else if (!path)
            path = arg;
        else
            bad_usage(cmd, "one trace at a time (\"%s\" is a second)", arg);
    }
    if (!path)
        bad_usage(cmd, "%s", "which trace? (mlprof flame TRACE)");
    char err[700];
    an_flame *f = an_flame_read(path, span, lines, err, sizeof err);
    if (!f) {
        fprintf(stderr, PROG " flame: %s\n", err);
        return 1;
    }
    if (!an_flame_samples(f)) {
        if (span)
            fprintf(stderr, PROG " flame: %s: none of its %llu samples was taken inside a span \"%s\"\n", path,
                    (unsigned long long)an_flame_all_samples(f), span);
        else
            fprintf(stderr, PROG " flame: %s: no samples\n", path);
        an_flame_free(f);
        return 1;
    }
    mlprof__sb out;
    mlprof__sb_init(&out);
    char title[600];
    snprintf(title, sizeof title, "%s%s%s", path, span ? ", inside " : "", span ? span : "");
    int rc = folded ? an_flame_folded(f, &out) : an_flame_svg(f, title, &out);
    if (rc != 0) {
        fprintf(stderr, PROG " flame: out of memory\n");
        rc = 1;
    } else {
        if (!folded && !output)
            output = "flame.svg";
        rc = write_output(output, &out);
        if (rc == 0 && output && strcmp(output, "-") != 0)
            fprintf(stderr, PROG " flame: wrote %s (%llu of %llu samples)\n", output,
                    (unsigned long long)an_flame_samples(f), (unsigned long long)an_flame_all_samples(f));
    }
    mlprof__sb_free(&out);
    an_flame_free(f);
    return rc;
}

static const struct command_help {
    const char *name;
    void (*usage)(FILE *);
} k_command_help[] = {
    {"analyze", analyze_usage},     {"diff", diff_usage},         {"merge", merge_usage},
    {"ranks", ranks_usage},         {"kernels", kernels_usage},   {"augment", augment_usage},
    {"sequences", sequences_usage}, {"export", export_usage},     {"ceilings", ceilings_usage},
    {"roofline", roofline_usage},   {"flame", flame_usage},
};
#define NCOMMAND_HELP (sizeof k_command_help / sizeof k_command_help[0])

static void unknown_option(const char *cmd, const char *arg)
{
    void (*help)(FILE *) = NULL;
    for (size_t i = 0; i < NCOMMAND_HELP; i++)
        if (strcmp(k_command_help[i].name, cmd) == 0)
            help = k_command_help[i].usage;
    char hint[96];
    fprintf(stderr, PROG " %s: unknown option \"%s\"%s\nTry '" PROG " %s --help'.\n", cmd, arg,
            mlprof__option_hint(arg, help, hint, sizeof hint), cmd);
    exit(2);
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf(PROG " %s\n", mlprof_version_string());
        return 0;
    }
    if (strcmp(cmd, "analyze") == 0)
        return cmd_analyze(argc - 1, argv + 1);
    if (strcmp(cmd, "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);
    if (strcmp(cmd, "merge") == 0)
        return cmd_merge(argc - 1, argv + 1);
    if (strcmp(cmd, "kernels") == 0)
        return cmd_kernels(argc - 1, argv + 1);
    if (strcmp(cmd, "ranks") == 0)
        return cmd_ranks(argc - 1, argv + 1);
    if (strcmp(cmd, "augment") == 0)
        return cmd_augment(argc - 1, argv + 1);
    if (strcmp(cmd, "sequences") == 0)
        return cmd_sequences(argc - 1, argv + 1);
    if (strcmp(cmd, "ceilings") == 0)
        return cmd_ceilings(argc - 1, argv + 1);
    if (strcmp(cmd, "roofline") == 0)
        return cmd_roofline(argc - 1, argv + 1);
    if (strcmp(cmd, "export") == 0)
        return cmd_export(argc - 1, argv + 1);
    if (strcmp(cmd, "flame") == 0)
        return cmd_flame(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return mlprof_cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "capture") == 0)
        return mlprof_cmd_capture(argc - 1, argv + 1);
    static const char *const commands[] = {"analyze", "diff",   "merge", "kernels", "ranks", "augment",
                                           "sequences", "export", "ceilings", "roofline", "flame", "run",
                                           "capture",   "help"};
    const char *near = mlprof__nearest(cmd, commands, sizeof commands / sizeof commands[0]);
    if (near)
        fprintf(stderr, PROG ": unknown command \"%s\" (did you mean \"%s\"?)\n", cmd, near);
    else
        fprintf(stderr, PROG ": unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}

static int g_status; /* what main returns: kept for check_stdout */

/* At exit (from main, or a command's exit() after its --help): what was
 * printed to standard output and could not be written is said, and the
 * status says it unless it says a failure already. */
static void check_stdout(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return;
    fprintf(stderr, PROG ": cannot write the output to standard output: %s\n", strerror(errno ? errno : EIO));
    _exit(g_status ? g_status : 1);
}

int main(int argc, char **argv)
{
    atexit(check_stdout);
    g_status = dispatch(argc, argv);
    return g_status;
}
