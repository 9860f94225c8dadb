/*
 * ceilings.h - what this machine can do at best, measured: the peak
 * floating-point rate (FMA kernels per precision, one thread and all
 * threads) and the memory bandwidth at each level of the hierarchy (a
 * STREAM-like triad over working sets from L1 to DRAM), each measured
 * several times with its spread; kept in a JSON file keyed by the CPU model
 * and the thread count. `mlprof ceilings` prints them, `mlprof roofline`
 * draws operators against them.
 */
#ifndef MLPROF_ANALYZE_CEILINGS_H
#define MLPROF_ANALYZE_CEILINGS_H

#include <stddef.h>

#include "../common/common.h"

/* Several measurements of one rate: the lowest, the median, the highest. */
typedef struct ce_stat {
    double min, median, max;
} ce_stat;

/* One measured rate: a compute peak ("fp64", "fp32"; FLOP/s), a memory level
 * ("L1", "L2", "L3", "DRAM"; bytes/s) or a point of the bandwidth curve
 * (what: "" ; bytes/s). bytes: the working set of all threads together (0
 * for a compute peak); cache_bytes: the level's size as sysfs gives it (per
 * instance; 0 for DRAM and compute). */
typedef struct ce_point {
    char what[8];
    int threads;
    double bytes, cache_bytes;
    ce_stat s;
} ce_point;

enum { CE_MAX_COMPUTE = 8, CE_MAX_LEVELS = 16, CE_MAX_CURVE = 48 };

typedef struct ce_ceilings {
    char cpu[128];  /* the CPU model, from /proc/cpuinfo */
    int threads;    /* the CPUs this process may run on: "all threads" */
    char isa[16];   /* the FMA kernels used: avx512f, avx2+fma or scalar */
    char when[32];  /* when measured, UTC, ISO 8601 */
    int repeats;    /* measurements per rate */
    int pinned;     /* 1 when the threads could be pinned to their CPUs */
    char note[256]; /* what the measurement could not do as asked, or "" */
    double load;    /* the 1-minute load average when measured, -1 unknown: other work lowers the rates */
    int gpu;        /* 1: a GPU's (mlprof ceilings --gpu): cpu names the GPU, threads are a launch's, and
                       the roofline holds operators' GPU work to them */
    ce_point compute[CE_MAX_COMPUTE];
    size_t ncompute;
    ce_point levels[CE_MAX_LEVELS]; /* each level with 1 thread and all threads */
    size_t nlevels;
    ce_point curve[CE_MAX_CURVE];   /* one thread, working sets doubling */
    size_t ncurve;
} ce_ceilings;

typedef struct ce_options {
    int repeats;          /* measurements per rate (default 5) */
    double max_bytes;     /* the largest working set (0: 4x the last-level cache, at least 64 MiB,
                             at most 1 GiB and a quarter of the free memory) */
    double seconds;       /* the time one measurement aims at (default 0.03 s) */
    FILE *progress;       /* where to say what is being measured, or NULL */
} ce_options;

void ce_options_default(ce_options *o);

/* A note (into out, with a newline) when c was measured on a busy machine:
 * a load average above half its threads. Nothing otherwise. */
void ce_load_note(const ce_ceilings *c, mlprof__sb *out);

/* This machine's CPU model and the number of CPUs this process may use. */
void ce_machine(char *cpu, size_t len, int *threads);

/* Measures everything (a few seconds). Returns 0, or -1 with the reason in
 * err (out of memory, no thread could start). Not thread-safe with itself. */
int ce_measure(ce_ceilings *c, const ce_options *o, char *err, size_t len);

/* The file the ceilings of (cpu, threads) are cached in:
 * $XDG_CACHE_HOME/mlprof/ceilings-<16 hex digits>.json, else
 * $HOME/.cache/mlprof/...; the digits are a hash of the CPU model, the thread
 * count and the file format's version. Returns 0, or -1 (no HOME). */
int ce_cache_path(const char *cpu, int threads, char *buf, size_t len);

/* The ceilings as JSON, and read back from a file (a clear error naming the
 * file and the member on bad input). ce_read returns 0, or -1 with err set. */
void ce_write_json(const ce_ceilings *c, mlprof__sb *out);
int ce_read(ce_ceilings *c, const char *path, char *err, size_t len);
/* The same from n bytes of memory read as the file called name. */
int ce_read_mem(ce_ceilings *c, const char *name, const void *data, size_t n, char *err, size_t len);
/* Writes the JSON to path (atomically; the folder is made). 0 or -1 + err. */
int ce_save(const ce_ceilings *c, const char *path, char *err, size_t len);

/* n measurements of one rate as min, median, max (v is sorted). */
ce_stat ce_stat_of(double *v, int n);
/* For tables of rates: v with an SI prefix and unit in 11 columns; a size
 * in binary units; a row "min  median  max  spread%\n". */
void ce_put_si(mlprof__sb *out, double v, const char *unit);
void ce_put_size(mlprof__sb *out, double bytes);
void ce_put_stat_row(mlprof__sb *out, const ce_stat *s, const char *unit);

/* The peaks, levels and curve as tables, each min/median/max and spread
 * (a GPU's without thread counts). */
void ce_print_tables(const ce_ceilings *c, mlprof__sb *out);
/* The ceilings for a person: a header, then the tables. */
void ce_print(const ce_ceilings *c, mlprof__sb *out);

/* The compute peak of a precision ("fp32", "fp64") with one thread
 * (threads 1) or all, or NULL. */
const ce_point *ce_peak(const ce_ceilings *c, const char *precision, int all_threads);
/* The memory levels with one thread or all, in order from L1 to DRAM: up to
 * max pointers into c; returns how many. */
size_t ce_levels(const ce_ceilings *c, int all_threads, const ce_point **out, size_t max);

/* Cached ceilings when the cache holds this machine's, else measured (and
 * cached; a cache that cannot be written is said on progress, not an error).
 * refresh: measure even when cached. *from receives the file used or written
 * ("" when none). Returns 0, or -1 with err set. */
int ce_get(ce_ceilings *c, const ce_options *o, int refresh, char *from, size_t from_len, char *err, size_t len);

#endif /* MLPROF_ANALYZE_CEILINGS_H */
