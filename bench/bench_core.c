/*
 * bench_core.c - what recording costs, each figure beside a floor or a peer
 * measured in the same run. The loops are run in turns within each round, so
 * that every figure sees the same machine, and each is given as the median of
 * the rounds with their minimum:
 *
 *  - a begin/end pair recording into chunks already used (steady), stopped,
 *    and filtered out by its domain's level (through the macros, and through
 *    the functions as their peer); two rdtsc and two
 *    clock_gettime(MONOTONIC) calls as the floors;
 *  - a pair while the process waits for an on-demand capture (on_demand=on,
 *    its listener thread idle), in a schedule's wait step, and while a
 *    capture_range span of another name is armed, each against the stopped
 *    pair;
 *  - the first fill: pairs into chunks never used, in fresh processes, with
 *    the default configuration and with continuous_dump (whose collector keeps
 *    chunks faulted in ahead), against the same process's steady pairs;
 *  - two threads recording at once, started together at a barrier, in CPU time
 *    per thread (CLOCK_THREAD_CPUTIME_ID: time the thread was descheduled does
 *    not count), against one thread;
 *  - the memory profiler's alloc/free record pair and the collector's share;
 *  - a pair with observers and counters, "not measured" (with the reason)
 *    where this machine cannot count them;
 *  - the start of a process: the same small program plain, initialising
 *    mlprof, starting and stopping recording, and writing its trace at exit.
 *
 * The last line is machine-readable.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "mlprof/mlprof.h"

extern char **environ;

#define ROUNDS 21
#define PAIRS 200000 /* per round: 6.4 MB of records, well inside the buffer */
#define THREAD_ROUNDS 15
#define THREAD_PAIRS 100000
#define FILL_ROUNDS 7
#define START_ROUNDS 25

static mlprof_span *g_span, *g_filtered;
static volatile uint64_t g_sink;

static double now_ns(void) { return bench_clock_ns(CLOCK_MONOTONIC); }

static double thread_cpu_ns(void) { return bench_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

typedef struct stat2 {
    double median, min;
} stat2;

static stat2 stats_of(const double *v, int n)
{
    double tmp[64];
    if (n > 64)
        n = 64;
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, bench_cmp_double);
    stat2 s = {n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2, tmp[0]};
    return s;
}

static void pairs_macro(int n)
{
    for (int i = 0; i < n; i++) {
        MLPROF_BEGIN(g_span);
        MLPROF_END(g_span);
    }
}

static void pairs_filtered(int n)
{
    for (int i = 0; i < n; i++) {
        MLPROF_BEGIN(g_filtered);
        MLPROF_END(g_filtered);
    }
}

/* The same through the functions, as a program that calls them does: the
 * peer of the macros' inline check. */
static void pairs_filtered_calls(int n)
{
    for (int i = 0; i < n; i++) {
        mlprof_begin(g_filtered);
        mlprof_end(g_filtered);
    }
}

/* 4096 addresses in turn, as a program reusing freed blocks */
static void pairs_mem(int n)
{
    static char arena[4096];
    for (int i = 0; i < n; i++) {
        const void *p = &arena[i & 4095];
        MLPROF_MEM_ALLOC(MLPROF_DEVICE_CPU, p, 256, "act");
        MLPROF_MEM_FREE(MLPROF_DEVICE_CPU, p);
    }
}

static void pairs_clock_gettime(int n)
{
    uint64_t acc = 0;
    struct timespec ts;
    for (int i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        acc += (uint64_t)ts.tv_nsec;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        acc += (uint64_t)ts.tv_nsec;
    }
    g_sink = acc;
}

/* ------------------------------------------------- what cannot be measured */

/* The library says "X cannot be measured: why" once a run for each counter it
 * cannot read; a figure taken then is not that counter's. */
static char g_unmeasured[512];
static int g_sampler_late; /* rounds in which the sampler at 1 kHz skipped samples */
static void on_log(int level, const char *msg, void *user)
{
    (void)user;
    if (strstr(msg, "cannot be measured")) {
        if (!g_unmeasured[0])
            snprintf(g_unmeasured, sizeof g_unmeasured, "%s", msg);
        return;
    }
    if (strstr(msg, "sampler") && strstr(msg, "skipped")) {
        g_sampler_late++;
        return;
    }
    if (level <= MLPROF_LOG_WARN)
        fprintf(stderr, "bench: mlprof: %s\n", msg);
}

/* ------------------------------------------------------- child processes */

/* The children's files: one folder, no subfolders. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[4096];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    if (rmdir(dir) != 0)
        fprintf(stderr, "bench: could not remove %s\n", dir);
}

/* Runs this program with args; its wall time in ns, and its first line of
 * output in line (when given). Exits on failure. */
static double spawn_self(const char *const *args, char *line, size_t len)
{
    char *argv[8];
    int n = 0;
    argv[n++] = (char *)"/proc/self/exe";
    for (; args[n - 1] && n < 7; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    int fds[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (line) {
        if (pipe(fds) != 0) {
            perror("bench: pipe");
            exit(1);
        }
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid;
    double t0 = now_ns();
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "bench: cannot start %s: %s\n", argv[0], strerror(rc));
        exit(1);
    }
    if (line) {
        close(fds[1]);
        FILE *f = fdopen(fds[0], "r");
        if (!f || !fgets(line, (int)len, f))
            line[0] = '\0';
        if (f)
            fclose(f);
    }
    int status;
    waitpid(pid, &status, 0);
    double t = now_ns() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench: %s %s failed (status %d)\n", argv[1], argv[2] ? argv[2] : "", status);
        exit(1);
    }
    return t;
}

/* The first fill of a fresh pool, then the same pairs again into its chunks
 * (mlprof_clear gave them back): prints both in ns a pair. */
static int child_fill(const char *dir)
{
    mlprof_set_config("buffer_size", "256M");
    mlprof_set_config("dump_at_exit", "false");
    if (dir) { /* the collector runs, and keeps chunks faulted in ahead */
        char path[4096];
        snprintf(path, sizeof path, "%s/fill.json", dir);
        mlprof_set_config("filename", path);
        mlprof_set_config("continuous_dump", "true");
    }
    g_span = mlprof_task_create(mlprof_domain_create("bench"), "pair");
    if (mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK)
        return 1;
    double t0 = now_ns();
    pairs_macro(PAIRS);
    double first = (now_ns() - t0) / PAIRS;
    mlprof_set_state(MLPROF_STATE_STOP);
    mlprof_clear();
    mlprof_set_state(MLPROF_STATE_RUN);
    t0 = now_ns();
    pairs_macro(PAIRS);
    double steady = (now_ns() - t0) / PAIRS;
    mlprof_set_state(MLPROF_STATE_STOP);
    printf("%.3f %.3f %llu\n", first, steady, (unsigned long long)mlprof_dropped_events());
    return 0;
}

/* A short program's life: nothing, mlprof's initialisation, a run started and
 * stopped, and the same with the trace written at exit. */
static int child_start(const char *what, const char *dir)
{
    if (strcmp(what, "plain") == 0)
        return 0;
    if (strcmp(what, "init") == 0)
        return mlprof_get_state() == MLPROF_STATE_STOP ? 0 : 1;
    int dump = strcmp(what, "start-stop-dump") == 0;
    if (dump) {
        char path[4096];
        snprintf(path, sizeof path, "%s/start.json", dir);
        mlprof_set_config("filename", path);
    } else {
        mlprof_set_config("dump_at_exit", "false");
    }
    mlprof_span *s = mlprof_task_create(mlprof_domain_create("bench"), "main");
    if (mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK)
        return 1;
    MLPROF_BEGIN(s);
    MLPROF_END(s);
    return mlprof_set_state(MLPROF_STATE_STOP) == MLPROF_OK ? 0 : 1;
}

static int child_main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[2], "fill") == 0)
        return child_fill(argc >= 4 ? argv[3] : NULL);
    if (argc >= 3 && strcmp(argv[2], "start") == 0 && argc >= 5)
        return child_start(argv[3], argv[4]);
    fprintf(stderr, "bench: bad child arguments\n");
    return 2;
}

/* ------------------------------------------------------------ two threads */

static pthread_barrier_t g_barrier;
static double g_thread_cpu[2][THREAD_ROUNDS], g_thread_wall[2][THREAD_ROUNDS];

static void *thread_pairs(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < THREAD_ROUNDS; r++) {
        pthread_barrier_wait(&g_barrier); /* both start each round together */
        double c0 = thread_cpu_ns(), w0 = now_ns();
        pairs_macro(THREAD_PAIRS);
        g_thread_cpu[id][r] = (thread_cpu_ns() - c0) / THREAD_PAIRS;
        g_thread_wall[id][r] = (now_ns() - w0) / THREAD_PAIRS;
    }
    return NULL;
}

static void two_threads(void)
{
    pthread_barrier_init(&g_barrier, NULL, 2);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thread_pairs, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_barrier);
}

/* ------------------------------------------------------------------ main */

enum { M_DISABLED, M_FILTERED, M_FILTERED_CALL, M_TSC, M_CGT, M_ON_DEMAND, M_ARMED, M_WAIT_STEP, M_ENABLED, M_MEM, M_OBSERVED, M_COUNTERS, M_RSS, M_PAPI,
       M_SAMPLED, M_COUNT };
/* What the counters and sampler keys are set to for the methods that measure them. */
static const char *const k_counters_of[M_COUNT] = {[M_COUNTERS] = "task-clock,page-faults", [M_RSS] = "rss",
                                                   [M_PAPI] = "papi:perf::TASK-CLOCK"};
static int slow_method(int m) { return m == M_COUNTERS || m == M_RSS || m == M_PAPI; }
static int recording_method(int m) { return m == M_FILTERED || m == M_FILTERED_CALL || m >= M_ENABLED; }

static void nop_observe(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    (void)data;
}

static double g_round[M_COUNT][ROUNDS], g_mem_collect[ROUNDS], g_enabled_cpu[ROUNDS];
static char g_not_measured[M_COUNT][512];

static void run_method(int m, int r)
{
    /* observers and counters are set up while stopped, and taken away after */
    int obs = -1;
    mlprof_set_state(MLPROF_STATE_STOP);
    if (m == M_OBSERVED) {
        mlprof_observer o = {sizeof o, "nop", 16, NULL, nop_observe, NULL, nop_observe};
        obs = mlprof_observer_register(&o);
    }
    if (k_counters_of[m])
        mlprof_set_config("counters", k_counters_of[m]);
    if (m == M_SAMPLED) { /* the sampler thread at 1 kHz beside the recording one */
        mlprof_set_config("sampler", "cpu,rss,task-clock");
        mlprof_set_config("sampler_period", "0.001");
    }
    if (m == M_ON_DEMAND) /* the first time starts the listener thread; it stays, idle */
        mlprof_set_config("on_demand", "1");
    if (m == M_ARMED) /* a span trigger armed: other spans stop at their handle, as filtered ones */
        mlprof_set_config("capture_range", "span:bench_never_begun");
    if (m == M_WAIT_STEP) /* a schedule's wait step: started, and the schedule keeps it stopped */
        mlprof_set_config("schedule", "wait:1000000000,active:1");
    g_unmeasured[0] = '\0';
    mlprof_set_state(recording_method(m) || m == M_WAIT_STEP ? MLPROF_STATE_RUN : MLPROF_STATE_STOP);
    int n = slow_method(m) ? PAIRS / 20 : PAIRS;
    double c0 = thread_cpu_ns();
    double t0 = now_ns();
    switch (m) {
    case M_DISABLED: pairs_macro(n); break;
    case M_FILTERED: pairs_filtered(n); break;
    case M_FILTERED_CALL: pairs_filtered_calls(n); break;
    case M_TSC: bench_pairs_tsc(n); break;
    case M_CGT: pairs_clock_gettime(n); break;
    case M_MEM: pairs_mem(n); break;
    default: pairs_macro(n); break;
    }
    g_round[m][r] = (now_ns() - t0) / n;
    if (m == M_ON_DEMAND)
        mlprof_set_config("on_demand", "0");
    if (m == M_ARMED)
        mlprof_set_config("capture_range", "");
    if (m == M_WAIT_STEP) {
        mlprof_set_state(MLPROF_STATE_STOP);
        mlprof_set_config("schedule", "");
    }
    if (m == M_ENABLED) /* the peer of the two threads' figure */
        g_enabled_cpu[r] = (thread_cpu_ns() - c0) / n;
    if (g_unmeasured[0] && !g_not_measured[m][0])
        snprintf(g_not_measured[m], sizeof g_not_measured[m], "%s", g_unmeasured);
    if (m == M_MEM) {
        /* the collector's share: drain and account both operations of every pair */
        mlprof_mem_info info;
        t0 = now_ns();
        mlprof_mem_info_get(MLPROF_DEVICE_CPU, &info, sizeof info);
        g_mem_collect[r] = (now_ns() - t0) / (2.0 * n);
        if (info.unknown_frees || info.live_blocks)
            fprintf(stderr, "bench: the memory accounting is off\n");
    }
    if (recording_method(m))
        mlprof_clear();
    if (m >= M_OBSERVED) {
        mlprof_set_state(MLPROF_STATE_STOP);
        if (obs >= 0)
            mlprof_observer_unregister(obs);
        mlprof_set_config("counters", "");
        mlprof_set_config("sampler", "");
    }
}

static void print_stat(const char *what, stat2 s, const char *unit)
{
    printf("%-34s %8.2f %s (min %.2f)\n", what, s.median, unit, s.min);
}

static void print_method(const char *what, int m, const char *detail)
{
    if (g_not_measured[m][0]) {
        printf("%-34s not measured: %s\n", what, g_not_measured[m]);
        return;
    }
    stat2 s = stats_of(g_round[m], ROUNDS);
    printf("%-34s %8.2f ns (min %.2f; %s)\n", what, s.median, s.min, detail);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    char dir[] = "/tmp/mlprof-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench: mkdtemp");
        return 1;
    }

    /* fresh processes first, before this one has a pool: their first fill,
     * and what a short process pays for mlprof */
    double fill_first[2][FILL_ROUNDS], fill_steady[2][FILL_ROUNDS];
    unsigned long long fill_dropped = 0;
    for (int r = 0; r < FILL_ROUNDS; r++) {
        for (int k = 0; k < 2; k++) {
            const char *args[] = {"--child", "fill", k ? dir : NULL, NULL};
            char line[128];
            spawn_self(args, line, sizeof line);
            unsigned long long dropped = 0;
            if (sscanf(line, "%lf %lf %llu", &fill_first[k][r], &fill_steady[k][r], &dropped) != 3) {
                fprintf(stderr, "bench: the fill child said \"%s\"\n", line);
                return 1;
            }
            fill_dropped += dropped;
        }
    }
    static const char *const start_modes[] = {"plain", "init", "start-stop", "start-stop-dump"};
    enum { NSTART = 4 };
    double start_ns[NSTART][START_ROUNDS];
    for (int r = 0; r < START_ROUNDS; r++) {
        for (int k = 0; k < NSTART; k++) {
            const char *args[] = {"--child", "start", start_modes[k], dir, NULL};
            start_ns[k][r] = spawn_self(args, NULL, 0);
        }
    }

    mlprof_set_log_handler(on_log, NULL);
    mlprof_set_config("buffer_size", "256M");
    mlprof_set_config("dump_at_exit", "false");
    mlprof_set_config("profile_memory", "true");
    mlprof_set_config("memory_history", "1K"); /* the accounting's own memory stays flat */
    g_span = mlprof_task_create(mlprof_domain_create("bench"), "pair");
    mlprof_domain *deep = mlprof_domain_create("bench_deep");
    mlprof_domain_set_level(deep, 5); /* above the configured level 1: filtered out */
    g_filtered = mlprof_task_create(deep, "filtered");

    /* bytes per event: what a million pairs take of the pool, chunk headers
     * included; this also leaves those chunks faulted in for the rounds */
    mlprof_set_state(MLPROF_STATE_RUN);
    const int measured = 1000000;
    pairs_macro(measured);
    uint64_t used = 0, capacity = 0;
    mlprof_buffer_usage(&used, &capacity);
    double bytes_per_event = (double)used / (2.0 * measured);
    mlprof_clear();
    pairs_mem(measured);
    mlprof_buffer_usage(&used, &capacity);
    double bytes_per_mem_pair = (double)used / measured;
    mlprof_clear();

    for (int r = 0; r < ROUNDS; r++) {
        for (int m = 0; m < M_COUNT; m++)
            run_method(m, r);
    }

    /* two threads: what they record fits in the chunks used so far */
    mlprof_set_state(MLPROF_STATE_RUN);
    pairs_macro(2 * THREAD_ROUNDS * THREAD_PAIRS);
    mlprof_clear();
    two_threads();
    if (mlprof_dropped_events() != 0 || fill_dropped != 0)
        fprintf(stderr, "bench: %llu events dropped: figures are not valid\n",
                (unsigned long long)(mlprof_dropped_events() + fill_dropped));
    mlprof_set_state(MLPROF_STATE_STOP);
    mlprof_buffer_usage(&used, &capacity);
    mlprof_clear();

    stat2 enabled = stats_of(g_round[M_ENABLED], ROUNDS), disabled = stats_of(g_round[M_DISABLED], ROUNDS);
    stat2 filtered_call = stats_of(g_round[M_FILTERED_CALL], ROUNDS);
    stat2 filtered = stats_of(g_round[M_FILTERED], ROUNDS), tsc = stats_of(g_round[M_TSC], ROUNDS);
    stat2 cgt = stats_of(g_round[M_CGT], ROUNDS), mem = stats_of(g_round[M_MEM], ROUNDS);
    stat2 on_demand = stats_of(g_round[M_ON_DEMAND], ROUNDS), armed = stats_of(g_round[M_ARMED], ROUNDS);
    stat2 wait_step = stats_of(g_round[M_WAIT_STEP], ROUNDS);
    stat2 mem_collect = stats_of(g_mem_collect, ROUNDS);
    stat2 enabled_cpu = stats_of(g_enabled_cpu, ROUNDS);
    stat2 t_cpu[2], t_wall[2];
    for (int i = 0; i < 2; i++) {
        t_cpu[i] = stats_of(g_thread_cpu[i], THREAD_ROUNDS);
        t_wall[i] = stats_of(g_thread_wall[i], THREAD_ROUNDS);
    }
    stat2 ff[2], fs[2];
    for (int k = 0; k < 2; k++) {
        ff[k] = stats_of(fill_first[k], FILL_ROUNDS);
        fs[k] = stats_of(fill_steady[k], FILL_ROUNDS);
    }
    stat2 st[NSTART];
    for (int k = 0; k < NSTART; k++) {
        st[k] = stats_of(start_ns[k], START_ROUNDS);
        st[k].median /= 1e3;
        st[k].min /= 1e3;
    }
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = -1;

    printf("mlprof bench_core: median of %d rounds (min), ns a begin/end pair unless said; load %.2f\n",
           ROUNDS, load[0]);
    print_stat("pair, recording (steady)", enabled, "ns");
    print_stat("pair, stopped", disabled, "ns");
    print_stat("pair, filtered out by level", filtered, "ns");
    print_stat("  the same, calling the functions", filtered_call, "ns");
    print_stat("two rdtsc (the floor)", tsc, "ns");
    print_stat("two clock_gettime(MONOTONIC)", cgt, "ns");
    printf("%-34s %8.2f x   (median over median; min over min %.2f x)\n", "recording / rdtsc floor",
           tsc.median > 0 ? enabled.median / tsc.median : 0, tsc.min > 0 ? enabled.min / tsc.min : 0);
    printf("%-34s %8.2f x   (the macros check the handle inline; %.2f x through the functions)\n",
           "filtered / stopped", disabled.median > 0 ? filtered.median / disabled.median : 0,
           disabled.median > 0 ? filtered_call.median / disabled.median : 0);
    print_stat("pair, waiting for on-demand", on_demand, "ns");
    printf("%-34s %8.2f x   (min over min %.2f x; on_demand=on, recording nothing until captured)\n",
           "on-demand waiting / stopped", disabled.median > 0 ? on_demand.median / disabled.median : 0,
           disabled.min > 0 ? on_demand.min / disabled.min : 0);
    print_stat("pair, in a schedule's wait step", wait_step, "ns");
    printf("%-34s %8.2f x   (min over min %.2f x; schedule=wait:N,active:1, outside the active steps)\n",
           "wait step / stopped", disabled.median > 0 ? wait_step.median / disabled.median : 0,
           disabled.min > 0 ? wait_step.min / disabled.min : 0);
    print_stat("pair, capture_range span armed", armed, "ns");
    printf("%-34s %8.2f x   (capture_range=span:OTHER waiting: the macros stop at the handle)\n", "armed / stopped",
           disabled.median > 0 ? armed.median / disabled.median : 0);
    printf("first fill, fresh process (median of %d; %d pairs into chunks never used):\n", FILL_ROUNDS, PAIRS);
    static const char *const fill_names[2] = {"  default configuration", "  continuous_dump"};
    for (int k = 0; k < 2; k++)
        printf("%-34s %8.2f ns (min %.2f); then steady %.2f ns (min %.2f): %.2f x\n", fill_names[k],
               ff[k].median, ff[k].min, fs[k].median, fs[k].min,
               fs[k].median > 0 ? ff[k].median / fs[k].median : 0);
    printf("pair, 2 threads at once (CPU time of each thread, median of %d rounds started at a barrier):\n",
           THREAD_ROUNDS);
    for (int i = 0; i < 2; i++)
        printf("  thread %d                         %8.2f ns CPU (min %.2f; wall %.2f): %.2f x one thread's %.2f\n",
               i, t_cpu[i].median, t_cpu[i].min, t_wall[i].median,
               enabled_cpu.median > 0 ? t_cpu[i].median / enabled_cpu.median : 0, enabled_cpu.median);
    printf("%-34s %8.2f\n", "bytes per event in the buffers", bytes_per_event);
    printf("%-34s %8.2f ns (min %.2f; %.1f bytes in the buffers)\n", "memory alloc/free pair, tagged",
           mem.median, mem.min, bytes_per_mem_pair);
    print_stat("memory accounting (collector)", mem_collect, "ns an operation");
    print_method("pair with a no-op observer", M_OBSERVED, "one call each at begin and end");
    print_method("pair with 2 perf counters", M_COUNTERS, "task-clock, page-faults: read() at begin and end");
    print_method("pair with the rss observer", M_RSS, "a pread of /proc/self/statm at begin and end");
    print_method("pair with 1 PAPI event", M_PAPI, "papi:perf::TASK-CLOCK; PAPI_read at begin and end");
    print_method("pair, sampler at 1 kHz beside", M_SAMPLED, "cpu, rss, task-clock of the process");
    if (g_sampler_late)
        printf("  (the sampler skipped samples in %d of %d rounds: 1 ms is too short for it here)\n",
               g_sampler_late, ROUNDS);
    printf("start of a process (median of %d, us; the same program linked with libmlprof):\n", START_ROUNDS);
    static const char *const start_names[NSTART] = {"  plain (mlprof not called)", "  mlprof initialised",
                                                    "  a run started and stopped", "  the same, trace written at exit"};
    for (int k = 0; k < NSTART; k++) {
        printf("%-34s %8.0f us (min %.0f)", start_names[k], st[k].median, st[k].min);
        if (k)
            printf(": %+.0f us over plain", st[k].median - st[0].median);
        printf("\n");
    }
    printf("memory: fixed at %llu MiB of buffers, %llu MiB in use before the last clear\n",
           (unsigned long long)(capacity >> 20), (unsigned long long)(used >> 20));
    printf("mlprof-bench: enabled_ns=%.2f enabled_min_ns=%.2f disabled_ns=%.2f filtered_ns=%.2f filtered_call_ns=%.2f tsc_pair_ns=%.2f "
           "clock_gettime_pair_ns=%.2f first_fill_ns=%.2f first_fill_continuous_ns=%.2f "
           "threads2_cpu_ns=%.2f,%.2f bytes_per_event=%.2f mem_pair_ns=%.2f mem_pair_bytes=%.1f "
           "mem_collect_ns=%.2f observed_ns=%.2f counters2_ns=%.2f rss_ns=%.2f papi1_ns=%.2f sampled_ns=%.2f "
           "start_plain_us=%.0f start_init_us=%.0f start_run_us=%.0f start_dump_us=%.0f load=%.2f "
           "on_demand_ns=%.2f capture_armed_ns=%.2f wait_step_ns=%.2f\n",
           enabled.median, enabled.min, disabled.median, filtered.median, filtered_call.median, tsc.median, cgt.median, ff[0].median,
           ff[1].median, t_cpu[0].median, t_cpu[1].median, bytes_per_event, mem.median, bytes_per_mem_pair,
           mem_collect.median, stats_of(g_round[M_OBSERVED], ROUNDS).median,
           g_not_measured[M_COUNTERS][0] ? -1.0 : stats_of(g_round[M_COUNTERS], ROUNDS).median,
           g_not_measured[M_RSS][0] ? -1.0 : stats_of(g_round[M_RSS], ROUNDS).median,
           g_not_measured[M_PAPI][0] ? -1.0 : stats_of(g_round[M_PAPI], ROUNDS).median,
           g_not_measured[M_SAMPLED][0] ? -1.0 : stats_of(g_round[M_SAMPLED], ROUNDS).median, st[0].median,
           st[1].median, st[2].median, st[3].median, load[0], on_demand.median, armed.median,
           wait_step.median);
    remove_dir(dir);
    return 0;
}
