/*
 * bench_core.c - what recording costs. In one run: a begin/end pair while
 * recording and while disabled, the floor of two time-stamp counter reads and
 * two clock_gettime(CLOCK_MONOTONIC) calls, the recording pair with two
 * threads at once, and the bytes each event takes in the buffers. Each figure
 * is the best of several rounds (the least disturbed by the rest of the
 * machine). The last line is machine-readable.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mlprof/mlprof.h"

#define ROUNDS 15
#define PAIRS 200000 /* per round: 6.4 MB of records, well inside the buffer */

static mlprof_span *g_span;
static volatile uint64_t g_sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static void pairs_macro(int n)
{
    for (int i = 0; i < n; i++) {
        MLPROF_BEGIN(g_span);
        MLPROF_END(g_span);
    }
}

#if defined(__x86_64__) || defined(__i386__)
static void pairs_tsc(int n)
{
    uint64_t acc = 0;
    for (int i = 0; i < n; i++) {
        acc += __builtin_ia32_rdtsc();
        acc += __builtin_ia32_rdtsc();
    }
    g_sink = acc;
}
#endif

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

/* Best ns per pair over the rounds; the buffers are emptied between rounds. */
static double best_of(void (*fn)(int), int clear_between)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        fn(PAIRS);
        double per = (now_ns() - t0) / PAIRS;
        if (per < best)
            best = per;
        if (clear_between)
            mlprof_clear();
    }
    return best;
}

static void *thread_pairs(void *arg)
{
    double *out = arg;
    *out = best_of(pairs_macro, 0);
    return NULL;
}

/* Two threads record at once; each clears nothing (a round is 6.4 MB each,
 * 15 rounds fit in the 256 MiB buffer configured below). */
static double two_threads(void)
{
    pthread_t th[2];
    double per[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thread_pairs, &per[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return (per[0] + per[1]) / 2;
}

int main(void)
{
    mlprof_set_config("buffer_size", "256M");
    mlprof_set_config("dump_at_exit", "false");
    mlprof_set_config("aggregate_stats", "true");
    g_span = mlprof_task_create(mlprof_domain_create("bench"), "pair");

    double disabled = best_of(pairs_macro, 0);
#if defined(__x86_64__) || defined(__i386__)
    double tsc = best_of(pairs_tsc, 0);
#else
    double tsc = 0;
#endif
    double cgt = best_of(pairs_clock_gettime, 0);

    /* bytes per event: the pool's pages are committed on first touch, so the
     * resident set grows by what the records take (chunk headers included) */
    mlprof_set_state(MLPROF_STATE_RUN);
    long rss0 = rss_kib();
    const int measured = 1000000;
    pairs_macro(measured);
    double bytes_per_event = (double)(rss_kib() - rss0) * 1024.0 / (2.0 * measured);
    mlprof_clear();

    double enabled = best_of(pairs_macro, 1);
    double threads2 = two_threads();
    if (mlprof_dropped_events() != 0)
        fprintf(stderr, "bench: %llu events dropped: figures are not valid\n",
                (unsigned long long)mlprof_dropped_events());
    mlprof_set_state(MLPROF_STATE_STOP);
    mlprof_clear();
    long rss_end = rss_kib();

    printf("begin/end pair, recording       %7.2f ns\n", enabled);
    printf("begin/end pair, disabled        %7.2f ns\n", disabled);
    printf("two rdtsc (the floor)           %7.2f ns\n", tsc);
    printf("two clock_gettime(MONOTONIC)    %7.2f ns\n", cgt);
    printf("pair, 2 threads recording       %7.2f ns per pair per thread\n", threads2);
    printf("enabled / rdtsc floor           %7.2f x (target <= 1.5)\n", tsc > 0 ? enabled / tsc : 0);
    printf("bytes per event in the buffers    %7.2f\n", bytes_per_event);
    printf("memory: a fixed 256 MiB buffer; resident %ld KiB after %d recorded pairs\n", rss_end,
           measured + ROUNDS * 3 * PAIRS);
    printf("mlprof-bench: enabled_ns=%.2f disabled_ns=%.2f tsc_pair_ns=%.2f clock_gettime_pair_ns=%.2f "
           "threads2_enabled_ns=%.2f bytes_per_event=%.2f\n",
           enabled, disabled, tsc, cgt, threads2, bytes_per_event);
    return 0;
}
