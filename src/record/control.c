/*
 * control.c - configuration (API, MLPROF_* environment, config file), the
 * run/stop/pause state, lazy thread-safe initialization, and the fork and exit
 * handlers. Every entry point here takes ctl_lock: none is on the hot path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../collect/collect.h"
#include "capture.h"
#include "produce.h"
#include "record.h"

/* ctl_lock checks its owner: a signal's dump that interrupted a thread
 * holding it learns so at once (EDEADLK) instead of waiting for itself */
mlprof__global mlprof__g = {
    .ctl_lock = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP,
    .reg_lock = PTHREAD_MUTEX_INITIALIZER,
    .scope_root = {.name = "", .full = "", .full_len = 0},
};

extern char **environ;

unsigned mlprof_version(void) { return MLPROF_VERSION_NUMBER; }
const char *mlprof_version_string(void) { return MLPROF_VERSION_STRING; }

/* ------------------------------------------------------ the configuration */

typedef enum {
    T_STR, T_BOOL, T_DOUBLE, T_INT, T_SIZE, T_CLOCK,
    T_MODULE,  /* a module's: checked by its lifecycle entry's parse_key */
    T_PROCESS, /* MXNet's profile_process: worker or server */
    T_FORMAT,  /* the trace's format */
    T_COMPRESS,
    T_MODE,    /* normal or ring */
    T_RANK,    /* an integer from 0, or empty */
    T_RANGE,   /* capture_range, checked by capture.c */
    T_SIGNAL   /* dump_signal, checked by capture.c */
} key_type;

typedef struct key_def {
    const char *name;
    key_type type;
    size_t offset;
    double min, max;   /* for numbers */
    const char *help;  /* what a good value looks like */
    size_t size;       /* T_MODULE: the field's size */
    size_t mask;       /* T_MODULE: 1 + the offset of the mask it parses into, 0 for none */
} key_def;

#define F(field) offsetof(mlprof__config, field)
#define SIZE(field) sizeof(((mlprof__config *)0)->field)
#define MASK(field) (1 + offsetof(mlprof__config, field))
static const key_def g_keys[] = {
    {"filename", T_STR, F(filename), 0, 0, "a file path"},
    {"profile_all", T_BOOL, F(profile_all), 0, 0, "a boolean"},
    {"profile_api", T_BOOL, F(profile_api), 0, 0, "a boolean"},
    {"profile_memory", T_BOOL, F(profile_memory), 0, 0, "a boolean"},
    {"profile_operator", T_BOOL, F(profile_operator), 0, 0, "a boolean"},
    /* MXNet's keys (set_config), mapped onto the nearest mlprof behaviour */
    {"profile_symbolic", T_BOOL, F(profile_symbolic), 0, 0, "a boolean"},
    {"profile_imperative", T_BOOL, F(profile_imperative), 0, 0, "a boolean"},
    {"profile_process", T_PROCESS, F(profile_process), 0, 0, "worker or server"},
    {"gpu_memory_profile_filename_prefix", T_STR, F(gpu_memory_profile_filename_prefix), 0, 0,
     "a path prefix, or empty for none"},
    {"aggregate_stats", T_BOOL, F(aggregate_stats), 0, 0, "a boolean"},
    {"continuous_dump", T_BOOL, F(continuous_dump), 0, 0, "a boolean"},
    {"dump_period", T_DOUBLE, F(dump_period), 0.001, 86400, "seconds, from 0.001 to 86400"},
    {"level", T_INT, F(level), 0, 9, "an integer from 0 to 9"},
    {"buffer_size", T_SIZE, F(buffer_size), 65536, 68719476736.0,
     "a size in bytes from 64K to 64G, such as 1048576, 512K, 64M or 1G"},
    {"max_trace_size", T_SIZE, F(max_trace_size), 0, 1e18,
     "a size in bytes such as 1048576, 512K, 64M or 1G, or 0 for no limit"},
    {"mode", T_MODE, F(mode), 0, 0,
     "one of normal (record from start to stop), ring (keep the last ring_size bytes or ring_seconds of events, "
     "written at a dump)"},
    {"ring_size", T_SIZE, F(ring_size), 0, 68719476736.0,
     "a size in bytes such as 4M, at most half of buffer_size, or 0 for half of buffer_size"},
    {"ring_seconds", T_DOUBLE, F(ring_seconds), 0, 86400, "seconds from 0 (no limit by age) to 86400"},
    {"ring_full_decode", T_BOOL, F(ring_full_decode), 0, 0, "a boolean"},
    {"stats_file", T_STR, F(stats_file), 0, 0, "a file path, auto (beside the trace), or empty for none"},
    {"stats_steps", T_INT, F(stats_steps), 0, 1000000,
     "an integer from 0 (no per-step rows) to 1000000: the last steps whose rows the statistics keep"},
    {"schedule", T_MODULE, F(schedule), 0, 0,
     "empty, or skip_first:N,wait:N,warmup:N,active:N,repeat:N (active at least 1; others default to 0)",
     SIZE(schedule), 0},
    {"format", T_FORMAT, F(format), 0, 0,
     "one of auto (by the filename: .pftrace and .perfetto-trace are perfetto, others json), json, perfetto"},
    {"compress", T_COMPRESS, F(compress), 0, 0, "one of auto (gzip when the filename ends in .gz), gzip, none"},
    {"sqlite_file", T_STR, F(sqlite_file), 0, 0, "a file path, \"auto\", or empty for none"},
    {"sqlite_library", T_STR, F(sqlite_library), 0, 0, "a shared library name or path"},
    {"zlib_library", T_STR, F(zlib_library), 0, 0, "a shared library name or path"},
    {"dump_at_exit", T_BOOL, F(dump_at_exit), 0, 0, "a boolean"},
    {"json_copy", T_BOOL, F(json_copy), 0, 0, "a boolean"},
    {"autostart", T_BOOL, F(autostart), 0, 0, "a boolean"},
    {"clock", T_CLOCK, F(clock), 0, 0, "one of auto, tsc, monotonic"},
    {"memory_sample_rate", T_INT, F(memory_sample_rate), 0, 1000000000,
     "an integer from 0 (no samples) to 1000000000"},
    {"memory_csv", T_STR, F(memory_csv), 0, 0, "a file path, \"auto\", or empty for none"},
    {"memory_svg", T_STR, F(memory_svg), 0, 0, "a file path, \"auto\", or empty for none"},
    {"memory_history", T_SIZE, F(memory_history), 1024, 1e9,
     "a number of blocks from 1K to 1000M, such as 65536, 512K or 4M"},
    {"memory_top", T_INT, F(memory_top), 0, 10000, "an integer from 0 to 10000"},
    {"counters", T_MODULE, F(counters), 0, 0,
     "a comma list of counters, such as cycles,instructions,task-clock,page-faults,rss,papi:PAPI_TOT_INS, "
     "or empty", SIZE(counters), 0},
    {"sampler", T_MODULE, F(sampler), 0, 0,
     "a comma list of sampler sources, such as cpu,rss,rapl,nvml,instructions, or empty", SIZE(sampler), 0},
    {"sampling", T_MODULE, F(sampling), 0, 0,
     "call stack samples per second of each thread's CPU time, an integer from 1 to 20000, or 0/off for none",
     SIZE(sampling), 0},
    {"sampling_unwind", T_MODULE, F(sampling_unwind), 0, 0,
     "auto (dwarf where libdw loads, else fp), dwarf (each sample's stack copy, unwound by the objects' CFI "
     "through libdw) or fp (the kernel's frame-pointer call chains)",
     SIZE(sampling_unwind), 0},
    {"sampling_stack", T_SIZE, F(sampling_stack), 1024, 65536,
     "a size in bytes from 1K to 64K, such as 8K, 16K or 32K: the user stack copied at each sample for "
     "sampling_unwind=dwarf (a deeper stack needs more; 64K means the kernel's most, 65528)"},
    {"sampling_source", T_MODULE, F(sampling_source), 0, 0,
     "one of auto (perf_event, or per-thread timer signals where perf_event is refused), perf, signal",
     SIZE(sampling_source), 0},
    {"sampler_period", T_DOUBLE, F(sampler_period), 0.0001, 3600, "seconds, from 0.0001 to 3600"},
    {"papi_library", T_STR, F(papi_library), 0, 0, "a shared library name or path"},
    {"nvml_library", T_STR, F(nvml_library), 0, 0, "a shared library name or path"},
    {"powercap_dir", T_STR, F(powercap_dir), 0, 0, "a directory"},
    {"hooks", T_MODULE, F(hooks), 0, 0,
     "a comma list of interposers (malloc, blas, dnnl, cuda, cublas, cudnn, itt, nvtx, mpi, nccl), all or none",
     SIZE(hooks), MASK(hooks_mask)},
    {"nccl_proxy", T_BOOL, F(nccl_proxy), 0, 0, "a boolean"},
    {"cuda_functions", T_MODULE, F(cuda_functions), 0, 0,
     "all, or a comma list of CUDA runtime functions such as cudaMalloc,cudaLaunchKernel", SIZE(cuda_functions),
     MASK(cuda_functions_mask)},
    {"gpu", T_MODULE, F(gpu), 0, 0, "off, on, all, or a comma list of kernel, memcpy, memset, sync, runtime, driver, launch",
     SIZE(gpu), MASK(gpu_mask)},
    {"gpu_functions", T_MODULE, F(gpu_functions), 0, 0,
     "empty for all, or a comma list of CUDA runtime and driver functions such as cudaLaunchKernel,cuMemAlloc",
     SIZE(gpu_functions), 0},
    {"gpu_details", T_MODULE, F(gpu_details), 0, 0,
     "empty, or a comma list of: occupancy, achieved_occupancy, branch_efficiency", SIZE(gpu_details),
     MASK(gpu_details_mask)},
    {"gpu_metrics", T_MODULE, F(gpu_metrics), 0, 0,
     "empty, or a comma list of CUPTI metrics (dram__bytes_read.sum, sm__warps_active.avg.pct_of_peak_sustained_active)"
     " and flops, flops_sp, flops_dp, flops_hp, dram, tensor, duration, roofline",
     SIZE(gpu_metrics), 0},
    {"gpu_metrics_batch", T_INT, F(gpu_metrics_batch), 1, 100000, "an integer from 1 to 100000"},
    {"gpu_buffer_size", T_SIZE, F(gpu_buffer_size), 1048576, 68719476736.0,
     "a size in bytes from 1M to 64G, such as 64M or 1G"},
    {"cupti_library", T_STR, F(cupti_library), 0, 0, "a shared library name or path, or empty to search"},
    {"clock_shift", T_MODULE, F(clock_shift), 0, 0,
     "test-only: OFFSET_NS[:DRIFT_PPB], integers (drift above -1e9 and below 1e9), or empty", SIZE(clock_shift), 0},
    {"rank", T_RANK, F(rank), 0, 0,
     "this process's rank in its job, an integer from 0, or empty to read it from the launcher's environment"},
    {"on_demand", T_BOOL, F(on_demand), 0, 0, "a boolean"},
    {"capture_range", T_RANGE, F(capture_range), 0, 0,
     "\"\" (none), cudaProfilerStart, nvtx:NAME or span:NAME (a name of 1 to 255 bytes)"},
    {"dump_signal", T_SIGNAL, F(dump_signal), 0, 0,
     "off, or a signal that writes the trace so far and lets the program go on: a name (USR2, SIGUSR2) or a "
     "number"},
};
#undef F
#define NKEYS (sizeof g_keys / sizeof g_keys[0])

static int config_apply(mlprof__config *cfg, const key_def *k, const char *value);

static void config_defaults(mlprof__config *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->filename, "profile.json");
    c->profile_operator = 1;
    c->profile_symbolic = 1;
    c->profile_imperative = 1;
    strcpy(c->profile_process, "worker");
    strcpy(c->mode, "normal");
    c->aggregate_stats = 1;
    c->stats_steps = 100;
    c->dump_period = 1.0;
    c->level = 1;
    c->buffer_size = 64u << 20;
    c->dump_at_exit = 1;
    c->sampler_period = 0.01;
    strcpy(c->sampling, "off");
    strcpy(c->sampling_unwind, "auto");
    c->sampling_stack = 16384;
    strcpy(c->sampling_source, "auto");
    strcpy(c->papi_library, "libpapi.so");
    strcpy(c->nvml_library, "libnvidia-ml.so.1");
    strcpy(c->sqlite_library, "libsqlite3.so.0");
    strcpy(c->zlib_library, "libz.so.1");
    strcpy(c->powercap_dir, "/sys/class/powercap");
    strcpy(c->hooks, "all");
    strcpy(c->cuda_functions, "all");
    strcpy(c->gpu, "off");
    c->gpu_buffer_size = 64u << 20;
    c->gpu_metrics_batch = 512;
    strcpy(c->clock, "auto");
    strcpy(c->format, "auto");
    strcpy(c->compress, "auto");
    c->memory_sample_rate = 1;
    strcpy(c->memory_csv, "auto");
    strcpy(c->memory_svg, "auto");
    c->memory_history = 1u << 20;
    c->memory_top = 10;
    /* the masks the modules parse from their keys' default values */
    for (size_t i = 0; i < sizeof g_keys / sizeof g_keys[0]; i++) {
        if (g_keys[i].type != T_MODULE || !g_keys[i].mask)
            continue;
        char value[MLPROF__GPU_KEY];
        snprintf(value, sizeof value, "%s", (const char *)c + g_keys[i].offset);
        config_apply(c, &g_keys[i], value);
    }
}

static const key_def *find_key(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (strcmp(g_keys[i].name, name) == 0)
            return &g_keys[i];
    }
    return NULL;
}

/* " (did you mean \"KEY\"?)" for the key nearest an unknown name (at most
 * two edits, fewer for a short name), or "". */
static const char *key_hint(const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    const char *names[NKEYS];
    for (size_t i = 0; i < NKEYS; i++)
        names[i] = g_keys[i].name;
    const char *near = mlprof__nearest(name, names, NKEYS);
    if (near)
        snprintf(buf, len, " (did you mean \"%s\"?)", near);
    return buf;
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 1;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 1;
    }
    return 0;
}

static int parse_size(const char *v, double *out)
{
    char *end;
    errno = 0;
    double n = strtod(v, &end);
    if (end == v || errno || !(n >= 0))
        return 0;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0, end++; break;
    case 'M': mult = 1024.0 * 1024, end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024, end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (mult > 1 && (*end == 'b' || *end == 'B'))
        end++;
    if (*end != '\0')
        return 0;
    *out = n * mult;
    return 1;
}

/* Parses value for key into cfg. Errors name the key and the value. */
static int config_apply(mlprof__config *cfg, const key_def *k, const char *value)
{
    void *field = (char *)cfg + k->offset;
    char *end;
    double d;
    int b;
    switch (k->type) {
    case T_STR:
        if (strlen(value) >= MLPROF__PATH_MAX)
            break;
        if (strcmp(k->name, "filename") == 0 && value[0] == '\0')
            break;
        strcpy(field, value);
        return MLPROF_OK;
    case T_CLOCK:
        if (strcmp(value, "auto") && strcmp(value, "tsc") && strcmp(value, "monotonic"))
            break;
        strcpy(field, value);
        return MLPROF_OK;
    case T_FORMAT:
        if (strcmp(value, "auto") && strcmp(value, "json") && strcmp(value, "perfetto"))
            break;
        strcpy(field, value);
        return MLPROF_OK;
    case T_COMPRESS:
        if (strcmp(value, "auto") && strcmp(value, "gzip") && strcmp(value, "none"))
            break;
        strcpy(field, value);
        return MLPROF_OK;
    case T_RANGE: {
        char why[200];
        if (mlprof__capture_range_check(value, why, sizeof why) != 0)
            break;
        strcpy(field, value);
        return MLPROF_OK;
    }
    case T_SIGNAL: {
        char why[200];
        if (mlprof__dump_signal_parse(value, why, sizeof why) < 0 || strlen(value) >= sizeof cfg->dump_signal)
            return mlprof__fail(MLPROF_EVALUE, "bad value %s for configuration key \"%s\": %s",
                                mlprof__quoted(value).s, k->name, why);
        strcpy(field, value);
        return MLPROF_OK;
    }
    case T_MODULE: {
        char why[600] = "";
        unsigned mask = 0;
        if (strlen(value) >= k->size)
            break;
        int rc = 1;
        for (size_t i = 0; i < mlprof__nmodules && rc == 1; i++)
            if (mlprof__modules[i]->parse_key)
                rc = mlprof__modules[i]->parse_key(k->name, value, &mask, why, sizeof why);
        if (rc != 0)
            return mlprof__fail(MLPROF_EVALUE, "bad value %s for configuration key \"%s\": %s",
                                mlprof__quoted(value).s, k->name, rc < 0 ? why : "no module checks it");
        strcpy(field, value);
        if (k->mask)
            *(unsigned *)((char *)cfg + k->mask - 1) = mask;
        return MLPROF_OK;
    }
    case T_RANK: {
        /* over the launcher's rank (src/record/dist.c) */
        errno = 0;
        long n = value[0] ? strtol(value, &end, 10) : 0;
        if (value[0] && (end == value || *end || errno || n < 0 || n > 99999999))
            break;
        if (value[0])
            snprintf(field, sizeof cfg->rank, "%ld", n);
        else
            *(char *)field = '\0';
        return MLPROF_OK;
    }
    case T_MODE:
        if (strcmp(value, "normal") && strcmp(value, "ring"))
            break;
        strcpy(field, value);
        return MLPROF_OK;
    case T_PROCESS:
        /* mlprof profiles the process it is loaded in, whichever MXNet calls it */
        if (strcmp(value, "worker") && strcmp(value, "server"))
            break;
        strcpy(field, value);
        return MLPROF_OK;
    case T_BOOL:
        if (!parse_bool(value, &b))
            break;
        *(int *)field = b;
        /* operators are recorded while either kind is: profile_operator sets
         * both, and follows them */
        if (field == &cfg->profile_operator)
            cfg->profile_symbolic = cfg->profile_imperative = b;
        else if (field == &cfg->profile_symbolic || field == &cfg->profile_imperative)
            cfg->profile_operator = cfg->profile_symbolic || cfg->profile_imperative;
        return MLPROF_OK;
    case T_INT: {
        errno = 0;
        long n = strtol(value, &end, 10);
        if (end == value || *end || errno || n < k->min || n > k->max)
            break;
        *(int *)field = (int)n;
        return MLPROF_OK;
    }
    case T_DOUBLE:
        errno = 0;
        d = strtod(value, &end);
        if (end == value || *end || errno || !isfinite(d) || d < k->min || d > k->max)
            break;
        *(double *)field = d;
        return MLPROF_OK;
    case T_SIZE:
        if (!parse_size(value, &d) || d < k->min || d > k->max)
            break;
        *(uint64_t *)field = (uint64_t)d;
        return MLPROF_OK;
    }
    return mlprof__fail(MLPROF_EVALUE, "bad value %s for configuration key \"%s\": expected %s",
                        mlprof__quoted(value).s, k->name, k->help);
}

/* Keys that cannot change once recording has begun. */
static int config_check_state(const key_def *k, const mlprof__config *next)
{
    const mlprof__config *cur = &mlprof__g.cfg;
    if (strcmp(k->name, "buffer_size") == 0 && mlprof__pool_ready() &&
        next->buffer_size != cur->buffer_size)
        return mlprof__fail(MLPROF_ESTATE,
                            "configuration key \"buffer_size\" cannot change after the first run "
                            "(the buffers are already allocated)");
    /* raw timestamps not yet converted would be read on the new clock */
    if ((strcmp(k->name, "clock") == 0 && strcmp(next->clock, cur->clock) != 0) ||
        (strcmp(k->name, "clock_shift") == 0 && strcmp(next->clock_shift, cur->clock_shift) != 0)) {
        if (mlprof__g.state == MLPROF_STATE_RUN)
            return mlprof__fail(MLPROF_ESTATE,
                                "configuration key \"%s\" cannot change while running", k->name);
        if (__atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE))
            return mlprof__fail(MLPROF_ESTATE,
                                "configuration key \"%s\" cannot change while events are recorded "
                                "and not yet dumped (mlprof_dump(1) or mlprof_clear() first)", k->name);
    }
    return MLPROF_OK;
}

/* The keys that name a file of their own beside the trace. */
static const char *const g_output_keys[] = {"stats_file", "memory_csv", "memory_svg", "sqlite_file"};
#define NOUTPUTS (sizeof g_output_keys / sizeof g_output_keys[0])

static int is_output_key(const char *name)
{
    if (strcmp(name, "filename") == 0)
        return 1;
    for (size_t i = 0; i < NOUTPUTS; i++)
        if (strcmp(name, g_output_keys[i]) == 0)
            return 1;
    return 0;
}

/* An output named by its key (not "auto", which derives a name of its own
 * from the trace's) that would land on the trace file or on another output:
 * written after the trace, it would replace it (a CSV where the trace was),
 * or one output the other. MLPROF_EVALUE naming the key and value. Outputs
 * written in place (/dev/null, /dev/stdout) take several writes and are
 * left alone. *bad_key: the key named, when not NULL. */
static int config_check_outputs(const mlprof__config *c, const char **bad_key)
{
    char trace[MLPROF__PATH_MAX + 64], paths[NOUTPUTS][MLPROF__PATH_MAX + 64];
    mlprof__expand_path(c->filename, 1, trace, sizeof trace);
    int trace_in_place = mlprof__out_in_place(trace);
    for (size_t i = 0; i < NOUTPUTS; i++) {
        const char *value = (const char *)c + find_key(g_output_keys[i])->offset;
        paths[i][0] = '\0';
        if (!value[0] || strcmp(value, "auto") == 0)
            continue;
        mlprof__expand_path(value, 1, paths[i], sizeof paths[i]);
        if (mlprof__out_in_place(paths[i]))
            continue;
        if (bad_key)
            *bad_key = g_output_keys[i];
        if (!trace_in_place && mlprof__same_file(paths[i], trace))
            return mlprof__fail(MLPROF_EVALUE,
                                "bad value %s for configuration key \"%s\": it is the trace's file (filename %s), "
                                "which it would replace; name another file",
                                mlprof__quoted(value).s, g_output_keys[i], mlprof__quoted(c->filename).s);
        for (size_t j = 0; j < i; j++)
            if (paths[j][0] && mlprof__same_file(paths[i], paths[j]))
                return mlprof__fail(MLPROF_EVALUE,
                                    "bad value %s for configuration key \"%s\": it is %s's file too, which one "
                                    "would replace; name another file",
                                    mlprof__quoted(value).s, g_output_keys[i], g_output_keys[j]);
    }
    return MLPROF_OK;
}

/* Applies a parsed configuration. Caller holds ctl_lock. */
static void config_commit(const mlprof__config *next)
{
    int clock_changed = strcmp(next->clock, mlprof__g.cfg.clock) != 0;
    int shift_changed = strcmp(next->clock_shift, mlprof__g.cfg.clock_shift) != 0;
    int continuous_was = mlprof__g.cfg.continuous_dump;
    int ring_changed = strcmp(next->mode, mlprof__g.cfg.mode) != 0 || next->ring_size != mlprof__g.cfg.ring_size;
    /* under reg_lock too: handle and domain creation read the classes and
     * level there, from any thread (a capture's keys change from mlprof's) */
    pthread_mutex_lock(&mlprof__g.reg_lock);
    mlprof__g.cfg = *next;
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    if (clock_changed && mlprof__clock_mode != MLPROF__CLOCK_CUSTOM)
        mlprof__clock_init(next->clock);
    if (shift_changed)
        mlprof__clock_shift_set(next->clock_shift);
    mlprof__capture_configure();
    mlprof__update_flags();
    /* the collector's thread evicts for the ring: started, or its mark moved */
    if (((!continuous_was && next->continuous_dump) || ring_changed) && mlprof__g.state == MLPROF_STATE_RUN)
        mlprof__collect_start_continuous();
}

/* Puts `where` (a file and line) in front of the last error message. */
static int prefix_error(int rc, const char *where)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mlprof_last_error());
    return mlprof__fail(rc, "%s%s", where, msg);
}

static int set_configs_locked(int n, const char *const *keys, const char *const *values,
                              const char *where)
{
    mlprof__config next = mlprof__g.cfg;
    int outputs = 0; /* a key naming a file is set: they are checked together */
    for (int i = 0; i < n; i++) {
        if (!keys[i] || !values[i])
            return mlprof__fail(MLPROF_EINVAL, "%snull key or value", where);
        const key_def *k = find_key(keys[i]);
        char hint[96];
        if (!k)
            return mlprof__fail(MLPROF_EKEY, "%sunknown configuration key %s%s", where,
                                mlprof__quoted(keys[i]).s, key_hint(keys[i], hint, sizeof hint));
        /* profile_all is a shorthand that switches every class */
        int rc = config_apply(&next, k, values[i]);
        if (rc == MLPROF_OK)
            rc = config_check_state(k, &next);
        if (rc != MLPROF_OK)
            return where[0] ? prefix_error(rc, where) : rc;
        outputs |= is_output_key(k->name);
    }
    if (outputs) {
        int rc = config_check_outputs(&next, NULL);
        if (rc != MLPROF_OK)
            return where[0] ? prefix_error(rc, where) : rc;
    }
    config_commit(&next);
    return MLPROF_OK;
}

int mlprof_set_configs(int n, const char *const *keys, const char *const *values)
{
    mlprof__ensure_init();
    if (n < 0 || (n > 0 && (!keys || !values)))
        return mlprof__fail(MLPROF_EINVAL, "mlprof_set_configs: bad arguments");
    mlprof__ctl_lock();
    int rc = set_configs_locked(n, keys, values, "");
    mlprof__ctl_unlock();
    return rc;
}

int mlprof_set_config(const char *key, const char *value)
{
    return mlprof_set_configs(1, &key, &value);
}

int mlprof_get_config(const char *key, char *buf, size_t len)
{
    mlprof__ensure_init();
    const key_def *k = key ? find_key(key) : NULL;
    char hint[96];
    if (!k)
        return mlprof__fail(MLPROF_EKEY, "unknown configuration key %s%s", mlprof__quoted(key).s,
                            key ? key_hint(key, hint, sizeof hint) : "");
    if (!buf || len == 0)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_get_config: no buffer");
    mlprof__ctl_lock();
    const void *field = (const char *)&mlprof__g.cfg + k->offset;
    char tmp[4200];
    switch (k->type) {
    case T_STR:
    case T_CLOCK:
    case T_FORMAT:
    case T_COMPRESS:
    case T_MODE:
    case T_RANGE:
    case T_SIGNAL:
    case T_MODULE:
    case T_PROCESS:
    case T_RANK:
        snprintf(tmp, sizeof tmp, "%s", (const char *)field);
        break;
    case T_BOOL:
        snprintf(tmp, sizeof tmp, "%s", *(const int *)field ? "true" : "false");
        break;
    case T_INT:
        snprintf(tmp, sizeof tmp, "%d", *(const int *)field);
        break;
    case T_DOUBLE:
        snprintf(tmp, sizeof tmp, "%g", *(const double *)field);
        break;
    case T_SIZE:
        snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    }
    mlprof__ctl_unlock();
    size_t need = strlen(tmp);
    snprintf(buf, len, "%s", tmp);
    if (need >= len)
        return mlprof__fail(MLPROF_ELIMIT, "value of \"%s\" needs %zu bytes", key, need + 1);
    return MLPROF_OK;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Parses a config file into keys/values (caller frees with free_lines). */
static int read_config_file(const char *path, char ***keys, char ***values, int **lines, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return mlprof__fail(MLPROF_EIO, "cannot open config file %s: %s", mlprof__shortened(path).s,
                            strerror(errno));
    /* fopen opens a folder too; reading it then fails at once, which fgets
     * alone would take for an empty file */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return mlprof__fail(MLPROF_EIO, "cannot read config file %s: %s", mlprof__shortened(path).s,
                            strerror(EISDIR));
    }
    int cap = 0, count = 0, rc = MLPROF_OK, lineno = 0;
    char **k = NULL, **v = NULL;
    int *ln = NULL;
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = mlprof__fail(MLPROF_EPARSE, "%s:%d: line too long (over %zu bytes)", mlprof__shortened(path).s,
                              lineno, sizeof line - 2);
            break;
        }
        char *start = line;
        if (lineno == 1 && (unsigned char)line[0] == 0xef && (unsigned char)line[1] == 0xbb &&
            (unsigned char)line[2] == 0xbf)
            start += 3; /* a UTF-8 byte order mark, as some editors write it */
        char *hash = strchr(start, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(start);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = mlprof__fail(MLPROF_EPARSE, "%s:%d: expected \"key = value\", got %s", mlprof__shortened(path).s,
                              lineno, mlprof__quoted(s).s);
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        size_t vlen = strlen(val);
        if (vlen >= 2 && (val[0] == '"' || val[0] == '\'') && val[vlen - 1] == val[0]) {
            val[vlen - 1] = '\0';
            val++;
        }
        if (count == cap) {
            int grown = cap ? cap * 2 : 16;
            char **k2 = mlprof__realloc(k, (size_t)grown * sizeof *k);
            k = k2 ? k2 : k;
            char **v2 = mlprof__realloc(v, (size_t)grown * sizeof *v);
            v = v2 ? v2 : v;
            int *ln2 = mlprof__realloc(ln, (size_t)grown * sizeof *ln);
            ln = ln2 ? ln2 : ln;
            if (!k2 || !v2 || !ln2) {
                rc = mlprof__fail(MLPROF_ENOMEM, "%s:%d: out of memory", mlprof__shortened(path).s, lineno);
                break;
            }
            cap = grown;
        }
        k[count] = mlprof__strdup(key);
        v[count] = mlprof__strdup(val);
        ln[count] = lineno;
        count++;
        if (!k[count - 1] || !v[count - 1]) {
            rc = mlprof__fail(MLPROF_ENOMEM, "%s:%d: out of memory", mlprof__shortened(path).s, lineno);
            break;
        }
    }
    if (rc == MLPROF_OK && ferror(f))
        rc = mlprof__fail(MLPROF_EIO, "cannot read config file %s: %s", mlprof__shortened(path).s,
                          strerror(errno));
    fclose(f);
    *keys = k;
    *values = v;
    *lines = ln;
    *n = count;
    return rc;
}

static void free_lines(char **k, char **v, int *ln, int n)
{
    for (int i = 0; i < n; i++) {
        mlprof__free(k[i]);
        mlprof__free(v[i]);
    }
    mlprof__free(k);
    mlprof__free(v);
    mlprof__free(ln);
}

static int load_config_locked(const char *path)
{
    char **k = NULL, **v = NULL;
    int *ln = NULL, n = 0;
    int rc = read_config_file(path, &k, &v, &ln, &n);
    if (rc == MLPROF_OK) {
        /* check each line alone first, so that the error names its line */
        mlprof__config scratch = mlprof__g.cfg;
        for (int i = 0; i < n && rc == MLPROF_OK; i++) {
            char where[256];
            snprintf(where, sizeof where, "%s:%d: ", mlprof__shortened(path).s, ln[i]);
            const key_def *def = find_key(k[i]);
            if (!def) {
                char hint[96];
                rc = mlprof__fail(MLPROF_EKEY, "%sunknown configuration key %s%s", where,
                                  mlprof__quoted(k[i]).s, key_hint(k[i], hint, sizeof hint));
                break;
            }
            rc = config_apply(&scratch, def, v[i]);
            if (rc == MLPROF_OK)
                rc = config_check_state(def, &scratch);
            if (rc != MLPROF_OK)
                prefix_error(rc, where);
        }
        /* the files the keys name, checked once every line is read (a line
         * may move the trace away from what an earlier one names); the
         * error names the last line that set the key, or the filename */
        int outputs = 0;
        for (int i = 0; i < n && rc == MLPROF_OK; i++)
            outputs |= is_output_key(k[i]);
        const char *bad = NULL;
        if (outputs && rc == MLPROF_OK && (rc = config_check_outputs(&scratch, &bad)) != MLPROF_OK) {
            int line = 0, fline = 0, oline = 0;
            for (int i = 0; i < n; i++) {
                if (strcmp(k[i], bad) == 0)
                    line = ln[i];
                else if (strcmp(k[i], "filename") == 0)
                    fline = ln[i];
                else if (is_output_key(k[i]))
                    oline = ln[i];
            }
            line = line ? line : fline ? fline : oline;
            char where[256];
            snprintf(where, sizeof where, "%s:%d: ", mlprof__shortened(path).s, line);
            prefix_error(rc, where);
        }
        if (rc == MLPROF_OK)
            config_commit(&scratch);
    }
    free_lines(k, v, ln, n);
    return rc;
}

int mlprof_load_config(const char *path)
{
    mlprof__ensure_init();
    if (!path)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_load_config: no path");
    mlprof__ctl_lock();
    int rc = load_config_locked(path);
    mlprof__ctl_unlock();
    return rc;
}

/* MLPROF_<KEY> variables. Errors cannot be returned from a lazy start, so they
 * are reported on stderr, naming the variable, and the key keeps its default. */
static int g_env_rejected; /* written once, by do_init */

int mlprof__env_rejected(void)
{
    mlprof__ensure_init();
    return g_env_rejected;
}

static void read_environment(void)
{
    const char *file = getenv("MLPROF_CONFIG");
    if (file && *file && load_config_locked(file) != MLPROF_OK) {
        mlprof__log(MLPROF_LOG_ERROR, "MLPROF_CONFIG: %s", mlprof_last_error());
        g_env_rejected++;
    }
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "MLPROF_", 7) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char key[64];
        size_t len = (size_t)(eq - (*e + 7));
        if (len >= sizeof key)
            len = sizeof key - 1;
        for (size_t i = 0; i < len; i++)
            key[i] = (char)tolower((unsigned char)(*e)[7 + i]);
        key[len] = '\0';
        if (strcmp(key, "config") == 0)
            continue;
        /* MLPROF_TRACE_OWNER: the run's first trace path, set by the library
         * (children.c); MLPROF_RUN_PART: mlprof run's name for each process's
         * trace (run_part_init); not keys */
        if (strcmp(key, "trace_owner") == 0 || strcmp(key, "run_part") == 0)
            continue;
        /* MLPROF_TORCH_*: the Python bindings' (mlprof.torch's native path and
         * its extension's path, torch.distributed tracing), not keys */
        if (strncmp(key, "torch_", 6) == 0)
            continue;
        /* the analyzer's CUDA library (gpu_ceilings.c), a test's switch
         * (pyframes.c): read where used, not keys */
        if (strcmp(key, "cuda_library") == 0 || strcmp(key, "pyframes_break_layout") == 0)
            continue;
        const key_def *k = find_key(key);
        if (!k && mlprof__in_run()) /* mlprof run said it once, for every process of the run */
            continue;
        if (!k) {
            char hint[96];
            mlprof__log(MLPROF_LOG_WARN, "ignoring %.*s: unknown configuration key \"%s\"%s",
                        (int)(eq - *e), *e, key, key_hint(key, hint, sizeof hint));
            /* a near miss of a key is a typo of it, not a variable of
             * something else's that shares the prefix */
            g_env_rejected += hint[0] != '\0';
            continue;
        }
        mlprof__config next = mlprof__g.cfg;
        if (config_apply(&next, k, eq + 1) != MLPROF_OK ||
            (is_output_key(k->name) && config_check_outputs(&next, NULL) != MLPROF_OK)) {
            mlprof__log(MLPROF_LOG_ERROR, "ignoring %.*s: %s", (int)(eq - *e), *e, mlprof_last_error());
            g_env_rejected++;
            continue;
        }
        mlprof__g.cfg = next;
    }
}

/* ------------------------------------------------------------------ state */

static int set_state_locked(int state);

/* The state and the pause flag are written under ctl_lock and read without
 * it (mlprof_get_state, mlprof_is_paused): atomic on both sides. */
static void store_state(int state) { __atomic_store_n(&mlprof__g.state, state, __ATOMIC_RELEASE); }
static void store_paused(int paused) { __atomic_store_n(&mlprof__g.paused, paused, __ATOMIC_RELEASE); }

/* ------------------------------------------------------ the modules */

/* Each calls one function of every module's lifecycle entry (produce.h), in
 * the table's order. */
static int modules_start(void)
{
    for (size_t i = 0; i < mlprof__nmodules; i++) {
        const mlprof__module *m = mlprof__modules[i];
        int rc = m->start ? m->start() : MLPROF_OK;
        if (rc == MLPROF_OK)
            continue;
        while (i-- > 0) /* those started before it stop again */
            if (mlprof__modules[i]->stop)
                mlprof__modules[i]->stop();
        return rc;
    }
    return MLPROF_OK;
}

/* args: the call's arguments, in parentheses */
#define EACH_MODULE(fn, args)                            \
    do {                                                 \
        for (size_t i_ = 0; i_ < mlprof__nmodules; i_++) \
            if (mlprof__modules[i_]->fn)                 \
                mlprof__modules[i_]->fn args;            \
    } while (0)

static void modules_resume(void) { EACH_MODULE(resume, ()); }
static void modules_pause(void) { EACH_MODULE(pause, ()); }
static void modules_join(void) { EACH_MODULE(join, ()); }
static void modules_quiesce(void) { EACH_MODULE(quiesce, ()); }

/* A run stops: what the modules started stops, then they stop recording. */
static void modules_stop(void)
{
    EACH_MODULE(stop, ());
    EACH_MODULE(pause, ());
}

/* ---- mlprof run's parts
 *
 * Under `mlprof run` each process's trace is a part in the run's folder,
 * named by MLPROF_RUN_PART (trace[.rankR].PID.json: the name the run also
 * gives as MLPROF_FILENAME), and the run merges the parts when the program
 * ends. A program may write its own traces where it says (MXNet's
 * set_config(filename=...) and dump(), RAF's dump(filename)), and may turn
 * dump_at_exit off (RAF's start()). So that the run's trace still holds
 * everything, every finished trace the process writes is also a part:
 *  - one written to its part's name before the end (a finished dump of the
 *    run's own name: the next would replace it) is renamed to a part of its
 *    own, trace[.rankR].PID.dN.json;
 *  - one written elsewhere is linked there under such a name (copied when
 *    it is on another file system);
 *  - at exit, what was recorded since is written to the part's name even
 *    when dump_at_exit is off (the program's own file is then not written).
 * The run merges a process's parts into one process (merge.c's same_as). */

static char g_run_part[MLPROF__PATH_MAX]; /* MLPROF_RUN_PART, or "" outside mlprof run */
static unsigned g_run_parts;              /* parts named .dN by this process */
static dev_t g_kept_dev;                  /* the file last kept as a part (not again) */
static ino_t g_kept_ino;

static void run_part_init(void)
{
    const char *v = getenv("MLPROF_RUN_PART");
    if (v && *v && strlen(v) < sizeof g_run_part)
        snprintf(g_run_part, sizeof g_run_part, "%s", v);
}

/* Read each time: mlprof run's own process sets it for the command it
 * starts, after its library has started (and at its exit says the run's
 * summary for it). */
int mlprof__in_run(void) { return getenv("MLPROF_RUN_PART") != NULL; }

/* Copies the file at from to a new file at to; 0 or -1 (errno). */
static int copy_to(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    struct stat st;
    int out = fstat(in, &st) == 0 ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
    int rc = out >= 0 ? mlprof__copy_fd(in, out, (uint64_t)st.st_size) : -1;
    int e = errno;
    close(in);
    if (out >= 0 && close(out) != 0 && rc == 0)
        rc = -1, e = errno;
    if (out >= 0 && rc != 0)
        unlink(to);
    errno = e;
    return rc;
}

/* Whether files a and b are in the same folder. */
static int same_folder(const char *a, const char *b)
{
    char da[MLPROF__PATH_MAX + 64], db[MLPROF__PATH_MAX + 64];
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a) + 1 : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s", sb ? (int)(sb - b) + 1 : 1, sb ? b : ".");
    struct stat x, y;
    return stat(da, &x) == 0 && stat(db, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* A finished trace was written to path (at_exit: by the exit handler or a
 * signal's): under mlprof run, made one of the run's parts if it is not
 * the part itself (see above). Takes no lock; from a signal handler too. */
static void run_part_keep(const char *path, int at_exit)
{
    if (!g_run_part[0])
        return;
    char own[MLPROF__PATH_MAX + 64], part[MLPROF__PATH_MAX + 96];
    mlprof__expand_path(g_run_part, 1, own, sizeof own);
    struct stat w, o;
    if (stat(path, &w) != 0 || !S_ISREG(w.st_mode) || (w.st_dev == g_kept_dev && w.st_ino == g_kept_ino))
        return; /* nothing there, not a file, or kept already (a dump with nothing new leaves it) */
    int same = stat(own, &o) == 0 && o.st_dev == w.st_dev && o.st_ino == w.st_ino;
    if (same && at_exit)
        return; /* the part itself, as the run expects it */
    if (!same && same_folder(path, own))
        return; /* a part of the run already (a capture's trace.PID.captureN.json) */
    size_t stem = strlen(own);
    if (stem > 5 && strcmp(own + stem - 5, ".json") == 0)
        stem -= 5;
    for (int tries = 0; tries < 1000; tries++) {
        snprintf(part, sizeof part, "%.*s.d%u.json", (int)stem, own, ++g_run_parts);
        int rc = same ? (access(part, F_OK) == 0 ? (errno = EEXIST, -1) : rename(own, part))
                      : link(path, part);
        if (rc != 0 && !same && errno != EEXIST)
            rc = copy_to(path, part); /* another file system, or no hard links there */
        if (rc == 0) {
            g_kept_dev = w.st_dev;
            g_kept_ino = w.st_ino;
            return;
        }
        if (errno != EEXIST)
            break;
    }
    mlprof__log(MLPROF_LOG_ERROR, "the trace %s is not in the run's trace: it could not be %s %s: %s", path,
                same ? "renamed to" : "linked or copied to", part, strerror(errno));
}

/* mlprof__collect_dump(to, finished), and a finished trace it wrote made a
 * part of mlprof run's trace too (run_part_keep; at_exit as there). */
static int dump_and_keep(const char *to, int finished, int at_exit)
{
    unsigned long before = mlprof__collect_finished(NULL, 0);
    int rc = mlprof__collect_dump(to, finished);
    char written[4200];
    if (finished && mlprof__collect_finished(written, sizeof written) != before)
        run_part_keep(written, at_exit);
    return rc;
}

/* What the exit handler writes: the trace, when dump_at_exit is on and
 * anything was recorded since the last finished dump; or the outputs that
 * dump could not write (the trace then stays as it was written). Under
 * mlprof run, what was recorded goes to the run's part whatever
 * dump_at_exit says (above). */
static int exit_dump(int before_exec)
{
    modules_quiesce(); /* the sampler's last samples are in the final dump */
    mlprof__ctl_lock();
    int at_exit = mlprof__g.cfg.dump_at_exit, to_part = !at_exit && g_run_part[0];
    int want = (at_exit || to_part) && __atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE);
    if (want) /* the kernels of the range profiler's last batches */
        EACH_MODULE(finish, ());
    /* before an exec, the next program writes the part's name again */
    int rc = want ? dump_and_keep(to_part ? g_run_part : NULL, 1, !before_exec)
             : at_exit ? mlprof__collect_retry_outputs() : MLPROF_OK;
    if (rc != MLPROF_OK)
        mlprof__log(MLPROF_LOG_ERROR, "dump %s failed: %s", before_exec ? "before exec" : "at exit",
                    mlprof_last_error());
    mlprof__collect_stop_continuous();
    mlprof__ctl_unlock();
    mlprof__collect_join_continuous();
    mlprof__children_settled(); /* written, said why not, or none was wanted */
    return rc;
}

static void at_exit(void)
{
    exit_dump(0);
    mlprof__children_report();
    mlprof__capture_exit_report();
}

int mlprof_exit_dump(void)
{
    mlprof__ensure_init();
    /* recording stops first, as at a finished dump: this process is about to
     * end, and its other threads must not record into the next trace */
    mlprof__ctl_lock();
    int recording = mlprof__g.state == MLPROF_STATE_RUN;
    mlprof__ctl_unlock();
    if (recording)
        mlprof_set_state(MLPROF_STATE_STOP);
    int rc = exit_dump(0);
    mlprof__children_report();
    return rc;
}

/* The preload's exec family (src/hook/exec.c): this process is about to
 * become another program, which (preloaded too) starts a trace of its own,
 * at the same path when it holds only the pid (mlprof run's part): what this
 * one recorded is written now, as at exit (under mlprof run, as a part of
 * its own). Not in a forked child: between a fork and an exec only what is
 * safe after a fork may run (its parent says what it loses). Returns
 * whether it was recording, for mlprof__exec_failed. */
int mlprof__before_exec(void)
{
    if (mlprof__g.forked_child)
        return 0;
    mlprof__ctl_lock();
    int recording = mlprof__g.state == MLPROF_STATE_RUN;
    int want = __atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE) &&
               (mlprof__g.cfg.dump_at_exit || g_run_part[0]);
    mlprof__ctl_unlock();
    if (!want)
        return 0;
    if (recording)
        mlprof_set_state(MLPROF_STATE_STOP);
    exit_dump(1);
    return recording;
}

/* The exec failed: this program goes on, recording again if it was. */
void mlprof__exec_failed(int was_recording)
{
    if (was_recording)
        mlprof_set_state(MLPROF_STATE_RUN);
}

/* The signals whose handlers write the trace (the SIGTERM of a child of the
 * run, the preload's SIGTERM, SIGHUP, SIGINT and SIGQUIT) are held across a
 * fork: in the child, one that came before fork_child had made ctl_lock its
 * own again would find the lock held by a thread that is not there and wait
 * for it in vain (5 s, then no trace); held, it comes once the child is
 * ready, its handler in place. The forking thread's mask, kept per thread. */
static __thread sigset_t t_fork_mask;
static __thread int t_fork_masked;

static void fork_prepare(void)
{
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGHUP);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGQUIT);
    t_fork_masked = pthread_sigmask(SIG_BLOCK, &held, &t_fork_mask) == 0;
    pthread_mutex_lock(&mlprof__g.ctl_lock);
    /* the child's memory accounting starts from the parent's as it is now:
     * allocations not drained yet would be dropped with the parent's
     * records (mlprof__pool_reset_after_fork), and the child's frees of
     * them counted as frees of addresses never allocated */
    if (__atomic_load_n(&mlprof__mem_on, __ATOMIC_RELAXED))
        mlprof__drain_now();
    EACH_MODULE(fork_prepare, ()); /* their threads between two rounds */
    pthread_mutex_lock(&mlprof__g.reg_lock);
}

static void fork_unmask(void)
{
    if (t_fork_masked) {
        t_fork_masked = 0;
        pthread_sigmask(SIG_SETMASK, &t_fork_mask, NULL);
    }
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    EACH_MODULE(fork_parent, ());
    pthread_mutex_unlock(&mlprof__g.ctl_lock);
    fork_unmask();
    mlprof__term_if_pending();
}

static void fork_child(void)
{
    pthread_mutexattr_t checked;
    pthread_mutexattr_init(&checked);
    pthread_mutexattr_settype(&checked, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&mlprof__g.reg_lock, NULL);
    pthread_mutex_init(&mlprof__g.ctl_lock, &checked);
    pthread_mutexattr_destroy(&checked);
    mlprof__g.pid = getpid();
    mlprof__g.forked_child = 1;
    mlprof__children_after_fork(mlprof__g.state == MLPROF_STATE_RUN);
    /* the child's own trace is written at its exit if it goes on recording */
    __atomic_store_n(&mlprof__g.recorded, mlprof__g.state == MLPROF_STATE_RUN, __ATOMIC_RELAXED);
    mlprof__thread_after_fork();
    mlprof__pool_reset_after_fork();
    mlprof__collect_after_fork();
    EACH_MODULE(after_fork, (mlprof__g.state == MLPROF_STATE_RUN));
    mlprof__capture_after_fork();
    if (mlprof__g.state == MLPROF_STATE_RUN)
        mlprof__collect_start_continuous();
    fork_unmask(); /* a signal that came meanwhile is handled now */
}

static void do_init(void)
{
    mlprof__ctl_lock();
    config_defaults(&mlprof__g.cfg);
    mlprof__g.pid = getpid();
    mlprof__children_init();
    mlprof__collect_init();
    mlprof__set_crash_dumper(mlprof__dump_on_signal);
    read_environment();
    run_part_init();
    mlprof__clock_init(mlprof__g.cfg.clock);
    mlprof__clock_shift_set(mlprof__g.cfg.clock_shift);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atexit(at_exit);
    /* a process waiting for captures starts stopped, autostart or not */
    int waits = mlprof__g.cfg.on_demand || mlprof__g.cfg.capture_range[0];
    if (mlprof__g.cfg.autostart && !waits && set_state_locked(MLPROF_STATE_RUN) != MLPROF_OK)
        mlprof__log(MLPROF_LOG_ERROR, "autostart: %s", mlprof_last_error());
    mlprof__capture_configure();
    mlprof__update_flags();
    mlprof__ctl_unlock();
}

void mlprof__ensure_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, do_init);
}

static int set_state_locked(int state)
{
    if (state != MLPROF_STATE_RUN && state != MLPROF_STATE_STOP)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_set_state: bad state %d (0 = stop, 1 = run)", state);
    if (state == mlprof__g.state)
        return MLPROF_OK;
    if (state == MLPROF_STATE_RUN && mlprof__steps_hold())
        return MLPROF_OK; /* the schedule starts with steps it does not record */
    if (state == MLPROF_STATE_STOP)
        mlprof__steps_stopped();
    if (state == MLPROF_STATE_RUN) {
        int rc = mlprof__pool_init(mlprof__g.cfg.buffer_size);
        if (rc != MLPROF_OK)
            return rc;
        rc = modules_start(); /* observers only while stopped: before the state changes */
        if (rc != MLPROF_OK)
            return rc;
        mlprof__recorder_fence_init();
        mlprof__children_recording(); /* before the first event: a forked child's slot */
        store_state(MLPROF_STATE_RUN);
        store_paused(0);
        modules_resume();
        if (!__atomic_load_n(&mlprof__g.run_ns, __ATOMIC_RELAXED)) /* read without the lock by mlprof_step */
            __atomic_store_n(&mlprof__g.run_ns, mlprof_now_ns(), __ATOMIC_RELAXED);
        __atomic_store_n(&mlprof__g.recorded, 1, __ATOMIC_RELEASE);
        mlprof__update_flags();
        mlprof__capture_recording(); /* a flight recorder answers flushes from now on */
        return mlprof__collect_start_continuous();
    }
    store_state(MLPROF_STATE_STOP);
    mlprof__update_flags();
    /* calls that saw the flag still set end before observers go and the
     * trace is read: none records after the stop returns */
    mlprof__recorder_quiesce();
    modules_stop();
    mlprof__collect_stop_continuous();
    return MLPROF_OK;
}

int mlprof_set_state(int state)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    int rc = set_state_locked(state);
    mlprof__ctl_unlock();
    modules_join();
    mlprof__collect_join_continuous();
    return rc;
}

int mlprof_get_state(void)
{
    mlprof__ensure_init();
    return __atomic_load_n(&mlprof__g.state, __ATOMIC_ACQUIRE);
}

static int set_paused(int paused)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    store_paused(paused);
    mlprof__update_flags();
    if (mlprof__g.state == MLPROF_STATE_RUN) {
        if (paused)
            modules_pause();
        else
            modules_resume();
    }
    mlprof__ctl_unlock();
    return MLPROF_OK;
}

int mlprof_pause(void) { return set_paused(1); }
int mlprof_resume(void) { return set_paused(0); }

int mlprof_is_paused(void)
{
    mlprof__ensure_init();
    return __atomic_load_n(&mlprof__g.paused, __ATOMIC_ACQUIRE);
}

/* mlprof_dump and mlprof_dump_to: path NULL is the configured filename. */
static int dump(const char *path, int finished)
{
    mlprof__ensure_init();
    if (finished) /* the sampler's last samples and reports go into the trace */
        modules_quiesce();
    mlprof__ctl_lock();
    if (finished) {
        mlprof__steps_stopped();
        store_state(MLPROF_STATE_STOP);
        mlprof__update_flags();
        mlprof__recorder_quiesce(); /* nothing in flight joins the next trace */
        modules_stop();
        mlprof__collect_stop_continuous();
    }
    int rc = dump_and_keep(path, finished, 0);
    mlprof__ctl_unlock();
    modules_join();
    mlprof__collect_join_continuous();
    mlprof__children_report();
    return rc;
}

int mlprof_dump(int finished) { return dump(NULL, finished); }

int mlprof_dump_to(const char *path, int finished)
{
    mlprof__ensure_init();
    if (!path || !path[0])
        return mlprof__fail(MLPROF_EINVAL, "mlprof_dump_to: %s path", path ? "an empty" : "no");
    if (strlen(path) >= MLPROF__PATH_MAX)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_dump_to: the path %s is longer than %d bytes",
                            mlprof__shortened(path).s, MLPROF__PATH_MAX - 1);
    return dump(path, finished);
}

int mlprof_dump_string(char **out)
{
    mlprof__ensure_init();
    if (!out)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_dump_string: out is NULL");
    *out = NULL;
    mlprof__ctl_lock();
    int rc = mlprof__collect_dump_string(out);
    mlprof__ctl_unlock();
    return rc;
}

int mlprof__dump_waiting;

/* Whether thread tid is one of mlprof's own ("mlprof dump", "mlprof
 * sampler"...: named so by mlprof__thread_start's callers). */
static int own_thread(pid_t tid)
{
    char path[64] = "/proc/self/task/", digits[16];
    size_t n = 0, at = strlen(path);
    do
        digits[n++] = (char)('0' + tid % 10);
    while ((tid /= 10) && n < sizeof digits);
    while (n)
        path[at++] = digits[--n];
    memcpy(path + at, "/comm", 6);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char comm[8];
    ssize_t k = read(fd, comm, sizeof comm);
    close(fd);
    return k >= 7 && memcmp(comm, "mlprof ", 7) == 0;
}

/* The process is about to die of a signal and its trace is written first:
 * the program's other threads (a busy program's go on running) yield the
 * CPU to the thread that writes it, by the lowest priority there is. On two
 * cores, eight busy threads left as they were stretched a 1 s dump to 8 s.
 * mlprof's own threads keep theirs: the continuous dump may hold the lock
 * the dump waits for. Raw system calls only (/proc/self/task read with
 * getdents64): this runs in a signal handler. */
static void yield_to_dump(void)
{
    pid_t self = (pid_t)syscall(SYS_gettid);
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            pid_t tid = 0;
            for (const char *c = name; *c >= '0' && *c <= '9'; c++)
                tid = tid * 10 + (*c - '0');
            if (tid > 0 && tid != self && !own_thread(tid))
                setpriority(PRIO_PROCESS, (id_t)tid, 19);
            off += reclen;
        }
    }
    close(fd);
}

/* quiet: a SIGTERM that stops a child of the run, which may wait for the
 * interrupted thread to leave mlprof's lock (MLPROF__LATER) and says nothing
 * when the trace is written */
static int signal_dump(int sig, int quiet)
{
    /* Recording stops at once: threads that go on writing (a busy program's
     * eight allocating threads) must not grow what the dump will drain
     * while it waits for the lock. */
    __atomic_store_n(&mlprof__mem_on, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mlprof_active_flag, 0, __ATOMIC_RELEASE);
    yield_to_dump();
    /* Another thread holding the lock for its own work (the continuous dump
     * drains or writes every few milliseconds) lets it go soon: wait for it,
     * and say so, so that a long drain stops at its next chunk
     * (mlprof__dump_waiting) rather than at its end. The crash itself
     * holding it never does: the wait is bounded. The interrupted thread
     * holding it is known at once (EDEADLK). */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    __atomic_add_fetch(&mlprof__dump_waiting, 1, __ATOMIC_ACQ_REL);
    int locked = pthread_mutex_timedlock(&mlprof__g.ctl_lock, &deadline);
    __atomic_sub_fetch(&mlprof__dump_waiting, 1, __ATOMIC_ACQ_REL);
    if (locked == EDEADLK && quiet)
        return MLPROF__LATER;
    mlprof__capture_on_crash();
    if (locked != 0) {
        if (locked == EDEADLK)
            mlprof__log(MLPROF_LOG_ERROR, "killed by signal %d (%s) inside mlprof, which held its lock: the trace is "
                        "not written", sig, strsignal(sig));
        else
            mlprof__log(MLPROF_LOG_ERROR, "killed by signal %d while mlprof's lock was held for 5 s: the trace is not "
                        "written", sig);
        mlprof__children_settled(); /* said: a forked child's parent need not */
        return MLPROF_ESTATE;
    }
    mlprof__busy++;
    int want = __atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE);
    /* recording went off above without mlprof__update_flags: it takes
     * reg_lock, which the interrupted thread (or another, for good) may
     * hold; the handles' own flags do not matter once the active flag is
     * clear */
    store_state(MLPROF_STATE_STOP);
    /* the crashed thread may hold a lock of the sampler's for good (a crash
     * inside libdw on its reader): the dump's parts wait for them with a
     * bound (mlprof__lock_for_dump) */
    __atomic_store_n(&mlprof__crashing, 1, __ATOMIC_RELEASE);
    int rc = want ? dump_and_keep(NULL, 1, 1) : MLPROF_OK;
    __atomic_store_n(&mlprof__crashing, 0, __ATOMIC_RELEASE);
    if (want && (rc != MLPROF_OK || !quiet))
        mlprof__log(rc == MLPROF_OK ? MLPROF_LOG_WARN : MLPROF_LOG_ERROR, "killed by signal %d (%s): %s", sig,
                    strsignal(sig), rc == MLPROF_OK ? "the trace up to it is written" : mlprof_last_error());
    mlprof__ctl_unlock();
    mlprof__children_settled();
    return rc;
}

int mlprof__dump_on_signal(int sig) { return signal_dump(sig, 0); }
int mlprof__dump_on_term(int sig) { return signal_dump(sig, 1); }

int mlprof_dumps(char **out, int format, int sort_by, int ascending, int reset)
{
    mlprof__ensure_init();
    if (!out)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_dumps: out is NULL");
    *out = NULL;
    if (format != MLPROF_FORMAT_TABLE && format != MLPROF_FORMAT_JSON)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_dumps: bad format %d (0 = table, 1 = json)", format);
    if (sort_by < MLPROF_SORT_TOTAL || sort_by > MLPROF_SORT_SELF)
        return mlprof__fail(MLPROF_EINVAL,
                            "mlprof_dumps: bad sort_by %d (total, avg, min, max, count, self)", sort_by);
    mlprof__ctl_lock();
    int rc = mlprof__collect_dumps(out, format, sort_by, ascending, reset);
    mlprof__ctl_unlock();
    return rc;
}

int mlprof_clear(void)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    mlprof__collect_clear();
    /* stopped and cleared: a forked child has nothing left to write, and
     * its parent nothing to say of it, unless it records again */
    if (mlprof__g.state == MLPROF_STATE_STOP)
        mlprof__children_settled();
    mlprof__ctl_unlock();
    return MLPROF_OK;
}

uint64_t mlprof_dropped_events(void)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    uint64_t n = mlprof__collect_dropped();
    mlprof__ctl_unlock();
    return n;
}

void mlprof_process_set_name(const char *name)
{
    mlprof__ensure_init();
    if (!name)
        return;
    mlprof__ctl_lock();
    snprintf(mlprof__g.process_name, sizeof mlprof__g.process_name, "%s", name);
    mlprof__ctl_unlock();
}
