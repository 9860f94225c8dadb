/*
 * bench_core.c - what recording costs. In one run: a begin/end pair while
 * recording and while disabled, the floor of two time-stamp counter reads and
 * two clock_gettime(CLOCK_MONOTONIC) calls, the recording pair with two
 * threads at once, and the bytes each event takes in the buffers; then the
 * memory profiler: an alloc/free record pair (with a tag), and what the
 * collector spends accounting each operation afterwards. Each figure
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

#define ROUNDS 21
#define PAIRS 200000 /* per round: 6.4 MB of records, well inside the buffer */

static mlprof_span *g_span;
static volatile uint64_t g_sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void pairs_macro(int n)
{
    for (int i = 0; i < n; i++) {
        MLPROF_BEGIN(g_span);
        MLPROF_END(g_span);
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

/* Best ns per pair over the rounds of one thread. */
#define THREAD_ROUNDS 15

static double best_of(void (*fn)(int))
{
    double best = 1e30;
    for (int r = 0; r < THREAD_ROUNDS; r++) {
        double t0 = now_ns();
        fn(PAIRS);
        double per = (now_ns() - t0) / PAIRS;
        if (per < best)
            best = per;
    }
    return best;
}

static void *thread_pairs(void *arg)
{
    double *out = arg;
    *out = best_of(pairs_macro);
    return NULL;
}

/* Two threads record at once, without clearing in between: 2 x 15 rounds of
 * 6.4 MB fit in the 256 MiB buffer configured in main. */
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

/* The measured loops, run in turns within each round so that every figure
 * sees the same machine; each keeps its best round. */
enum { M_DISABLED, M_TSC, M_CGT, M_ENABLED, M_MEM, M_OBSERVED, M_COUNTERS, M_RSS, M_PAPI, M_SAMPLED, M_COUNT };
/* What the counters and sampler keys are set to for the methods that measure them. */
static const char *const k_counters_of[M_COUNT] = {[M_COUNTERS] = "task-clock,page-faults", [M_RSS] = "rss",
                                                   [M_PAPI] = "papi:perf::TASK-CLOCK"};
static int slow_method(int m) { return m == M_COUNTERS || m == M_RSS || m == M_PAPI; }

static void nop_observe(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    (void)data;
}

int main(void)
{
    mlprof_set_config("buffer_size", "256M");
    mlprof_set_config("dump_at_exit", "false");
    mlprof_set_config("profile_memory", "true");
    mlprof_set_config("memory_history", "1K"); /* the accounting's own memory stays flat */
    g_span = mlprof_task_create(mlprof_domain_create("bench"), "pair");

    /* bytes per event: what a million pairs take of the pool, chunk headers included */
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

    double best[M_COUNT], mem_collect = 1e30;
    for (int m = 0; m < M_COUNT; m++)
        best[m] = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        for (int m = 0; m < M_COUNT; m++) {
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
            mlprof_set_state(m >= M_ENABLED ? MLPROF_STATE_RUN : MLPROF_STATE_STOP);
            double t0 = now_ns();
            switch (m) {
            case M_DISABLED: pairs_macro(PAIRS); break;
#if defined(__x86_64__) || defined(__i386__)
            case M_TSC: pairs_tsc(PAIRS); break;
#endif
            case M_CGT: pairs_clock_gettime(PAIRS); break;
            case M_ENABLED: pairs_macro(PAIRS); break;
            case M_MEM: pairs_mem(PAIRS); break;
            case M_OBSERVED:
            case M_COUNTERS:
            case M_RSS:
            case M_PAPI:
            case M_SAMPLED: pairs_macro(slow_method(m) ? PAIRS / 20 : PAIRS); break;
            default: break;
            }
            double per = (now_ns() - t0) / (slow_method(m) ? PAIRS / 20 : PAIRS);
            if (per < best[m])
                best[m] = per;
            if (m == M_MEM) {
                /* the collector's share: drain and account both operations of every pair */
                mlprof_mem_info info;
                t0 = now_ns();
                mlprof_mem_info_get(MLPROF_DEVICE_CPU, &info, sizeof info);
                per = (now_ns() - t0) / (2.0 * PAIRS);
                if (per < mem_collect)
                    mem_collect = per;
                if (info.unknown_frees || info.live_blocks)
                    fprintf(stderr, "bench: the memory accounting is off\n");
            }
            if (m >= M_ENABLED)
                mlprof_clear();
            if (m >= M_OBSERVED) {
                mlprof_set_state(MLPROF_STATE_STOP);
                if (obs >= 0)
                    mlprof_observer_unregister(obs);
                mlprof_set_config("counters", "");
                mlprof_set_config("sampler", "");
            }
        }
    }
    mlprof_set_state(MLPROF_STATE_RUN);
    double threads2 = two_threads();
    if (mlprof_dropped_events() != 0)
        fprintf(stderr, "bench: %llu events dropped: figures are not valid\n",
                (unsigned long long)mlprof_dropped_events());
    mlprof_set_state(MLPROF_STATE_STOP);
    mlprof_buffer_usage(&used, &capacity);
    mlprof_clear();
#if !defined(__x86_64__) && !defined(__i386__)
    best[M_TSC] = 0;
#endif

    double enabled = best[M_ENABLED], disabled = best[M_DISABLED], tsc = best[M_TSC];
    double cgt = best[M_CGT];
    printf("begin/end pair, recording       %7.2f ns\n", enabled);
    printf("begin/end pair, disabled        %7.2f ns\n", disabled);
    printf("two rdtsc (the floor)           %7.2f ns\n", tsc);
    printf("two clock_gettime(MONOTONIC)    %7.2f ns\n", cgt);
    printf("pair, 2 threads recording       %7.2f ns per pair per thread\n", threads2);
    printf("enabled / rdtsc floor           %7.2f x (target <= 1.5)\n", tsc > 0 ? enabled / tsc : 0);
    printf("bytes per event in the buffers  %7.2f\n", bytes_per_event);
    printf("memory alloc/free pair, tagged  %7.2f ns (%.1f bytes in the buffers)\n", best[M_MEM],
           bytes_per_mem_pair);
    printf("memory accounting (collector)   %7.2f ns per operation\n", mem_collect);
    printf("pair with a no-op observer      %7.2f ns\n", best[M_OBSERVED]);
    printf("pair with 2 perf counters       %7.2f ns (task-clock, page-faults: read() at begin and end)\n",
           best[M_COUNTERS]);
    printf("pair with the rss observer      %7.2f ns (a pread of /proc/self/statm at begin and end)\n", best[M_RSS]);
    printf("pair with 1 PAPI event          %7.2f ns (papi:perf::TASK-CLOCK; PAPI_read at begin and end)\n",
           best[M_PAPI]);
    printf("pair, sampler at 1 kHz beside   %7.2f ns (cpu, rss, task-clock of the process)\n", best[M_SAMPLED]);
    printf("memory: fixed at %llu MiB of buffers, %llu MiB in use before the last clear\n",
           (unsigned long long)(capacity >> 20), (unsigned long long)(used >> 20));
    printf("mlprof-bench: enabled_ns=%.2f disabled_ns=%.2f tsc_pair_ns=%.2f clock_gettime_pair_ns=%.2f "
           "threads2_enabled_ns=%.2f bytes_per_event=%.2f mem_pair_ns=%.2f mem_pair_bytes=%.1f "
           "mem_collect_ns=%.2f observed_ns=%.2f counters2_ns=%.2f rss_ns=%.2f papi1_ns=%.2f sampled_ns=%.2f\n",
           enabled, disabled, tsc, cgt, threads2, bytes_per_event, best[M_MEM], bytes_per_mem_pair,
           mem_collect, best[M_OBSERVED], best[M_COUNTERS], best[M_RSS], best[M_PAPI], best[M_SAMPLED]);
    return 0;
}
