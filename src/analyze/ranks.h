/*
 * ranks.h - a directory of traces, one per rank of a distributed job (what
 * PyTorch's profiler writes, one *.pt.trace.json(.gz) per rank): each rank
 * analysed alone, in rank order, and the stragglers across the ranks (which
 * rank starts each collective last, and by how much).
 */
#ifndef MLPROF_ANALYZE_RANKS_H
#define MLPROF_ANALYZE_RANKS_H

#include "analyze.h"

/* 1 when path names a directory (symbolic links followed), else 0. */
int an_is_directory(const char *path);

/* What an_ranks_run does besides the analysis of each rank. */
typedef struct an_ranks_options {
    int stragglers; /* add the stragglers across ranks (kernels) */
    int dist;       /* summarize each rank for mlprof ranks (an_dist_collect) */
} an_ranks_options;

/* Runs fn (through an_run_steps, so o->steps and o->per_step hold) on every
 * trace of dir, one rank at a time: a rank's trace is read, analysed and
 * freed before the next is read, so that the ranks' ids never mix and memory
 * holds one rank's trace at a time. Traces are the files named *.json or
 * *.json.gz (PyTorch's *.pt.trace.json.gz, mlprof's *.json); other entries
 * are skipped, each named in notes. A rank is read from the trace's
 * distributedInfo.rank. A trace without one beside traces that have one is
 * no rank (the launcher's, which mlprof run -- torchrun leaves among its
 * ranks' parts): it is left out, said in notes ("left out: PATH ..."), the
 * table and JSON's "left_out", unless it was read only in part (its rank
 * may be in the part lost). A trace without a rank that is kept takes the
 * next number after the ranks given, in file-name order, and notes says so. Ranks of different jobs
 * (an_jobs_differ: distributedInfo's job_id or world_size) are a warning in
 * notes, the table and JSON's "warnings". The output has one section (table: "== rank N: PATH ==";
 * JSON: an entry of "ranks"; CSV: a first column "rank") per rank, ordered by
 * rank. With ro->stragglers, a last section: each collective (a communication
 * kernel, as an_gpu_kind classes them; the k-th kernel of a name on one rank
 * is matched with the k-th of that name on every other rank that has the
 * name), its start on each rank on one clock (aligned as an_merge_offsets
 * aligns the inputs of merge: for PyTorch's, the hosts' real-time clock), the
 * rank that starts it last and by how much after the earliest; per rank how
 * often it was last, its total and mean lateness. CSV holds the ranks' rows
 * only (notes says so). *damaged is set when a trace was read only in part (a
 * warning in notes). Returns 0; or -1 with err set: dir cannot be listed,
 * holds no trace, two traces say the same rank, or out of memory. */
int an_ranks_run(const char *dir, const an_options *o, an_analysis_fn fn, const an_ranks_options *ro,
                 mlprof__sb *out, mlprof__sb *notes, int *damaged, char *err, size_t errlen);

/* mlprof diff DIR_A DIR_B: each rank of dir_a compared (an_diff) with the
 * same rank of dir_b, the ranks found as an_ranks_run finds them (every trace
 * is read once to learn its rank, then once more for its comparison: one pair
 * of traces in memory at a time). One section per rank (table: "== rank N: A
 * -> B =="; JSON: an entry of "ranks" with "a", "b" and "diff"; CSV: a first
 * column "rank"); a rank in one directory only is named in notes (and in the
 * table and JSON, with a null path for the other run). *regressions receives
 * the sum over the ranks. Returns 0; or -1 with err set (as an_ranks_run). */
int an_ranks_diff(const char *dir_a, const char *dir_b, const an_options *o, const an_diff_options *d,
                  mlprof__sb *out, mlprof__sb *notes, size_t *regressions, int *damaged, char *err, size_t errlen);

/* mlprof ranks: the ranks of one job compared (dist_ranks.h). paths: one
 * directory (its traces found, left out and numbered as an_ranks_run does:
 * entries that are not traces skipped, named in notes), several traces (each must be
 * a trace: one that is not is an error), or one merged trace (mlprof
 * merge's: its ranks and their processes as otherData.merge.inputs gives
 * them, else from the processes' names "rank N: ..."; a trace of one rank is
 * that rank alone). Each trace is read, summarized (an_dist_collect) and
 * freed before the next: memory holds one trace and every rank's summary (its
 * totals, and 48 bytes per collective call). The ranks' times are put on one
 * clock by an_merge_offsets, a measured clock sync's drift applied to each
 * time as merge applies it (a merged trace's are already). csv: the CSV
 * table (AN_DIST_CSV_*) with o->format AN_CSV. Ranks of different jobs
 * (an_jobs_differ; a merged trace's from its otherData.merge.inputs) are an
 * error naming them, unless any_job (then a warning, as an_ranks_run's).
 * Returns 0; or -1 with err set: nothing to read, a file that is not a
 * trace, ranks of different jobs, two traces that say the same rank, out of
 * memory. *damaged is set when a trace was read
 * only in part. */
int an_ranks_dist(const char *const *paths, size_t n, const an_options *o, int csv, int any_job, mlprof__sb *out,
                  mlprof__sb *notes, int *damaged, char *err, size_t errlen);

#endif /* MLPROF_ANALYZE_RANKS_H */
