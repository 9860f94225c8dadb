/*
 * bench_ring.c - what a begin/end pair costs in the flight recorder
 * (mode=ring), against the two-rdtsc floor and the same pair recording as
 * usual, measured in turns within each round in one process (each mode in a
 * fresh process of its own would not share the machine's state).
 *
 * A ring of 4 MiB in a 64 MiB pool: each ring round records 1 M pairs
 * (32 MiB of records, 8 times the ring), so the collector's thread evicts
 * the oldest chunks while the round runs; the pair is timed with that
 * eviction beside it, as a program sees it. Between rounds a dump writes the
 * ring (not timed) and everything starts from an empty pool. Times are the
 * recording thread's CPU time (wall time beside). The ordinary
 * pairs are timed the same way with the default mode, each round's records
 * cleared after it. Drops (the evictor fell behind by 60 MiB) are said: the
 * figure is then not valid. The last line is machine-readable.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "mlprof/mlprof.h"

#define ROUNDS 11
#define PAIRS 1000000

static mlprof_span *g_span;

/* The recording thread's CPU time: on a loaded machine (and beside the
 * collector's thread evicting) wall time counts the time it was descheduled. */
static double now_ns(void) { return bench_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static double wall_ns(void) { return bench_clock_ns(CLOCK_MONOTONIC); }

static void pairs(int n)
{
    for (int i = 0; i < n; i++) {
        MLPROF_BEGIN(g_span);
        MLPROF_END(g_span);
    }
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

static void config(const char *key, const char *value)
{
    if (mlprof_set_config(key, value) != MLPROF_OK) {
        fprintf(stderr, "bench_ring: %s=%s: %s\n", key, value, mlprof_last_error());
        exit(1);
    }
}

int main(void)
{
    char dir[] = "/tmp/mlprof-bench-ring-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_ring: mkdtemp");
        return 1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/ring.json", dir);
    config("filename", path);
    config("buffer_size", "64M");
    config("ring_size", "4M");
    config("stats_file", "");
    config("dump_at_exit", "false");
    g_span = mlprof_task_create(mlprof_domain_create("bench"), "pair");
    double ring[ROUNDS], plain[ROUNDS], tsc[ROUNDS], ring_wall[ROUNDS], plain_wall[ROUNDS], ring_min = 1e30, plain_min = 1e30, tsc_min = 1e30;
    uint64_t dropped = 0;
    /* warm: every chunk of the pool faulted in once */
    mlprof_set_state(MLPROF_STATE_RUN);
    pairs(PAIRS);
    mlprof_set_state(MLPROF_STATE_STOP);
    mlprof_clear();
    for (int r = 0; r < ROUNDS; r++) {
        config("mode", "ring");
        mlprof_set_state(MLPROF_STATE_RUN);
        double t0 = now_ns(), w0 = wall_ns();
        pairs(PAIRS);
        ring[r] = (now_ns() - t0) / PAIRS;
        ring_wall[r] = (wall_ns() - w0) / PAIRS;
        dropped += mlprof_dropped_events();
        if (mlprof_dump(1) != MLPROF_OK) { /* the ring written, the trace finished */
            fprintf(stderr, "bench_ring: dump: %s\n", mlprof_last_error());
            return 1;
        }
        config("mode", "normal");
        mlprof_set_state(MLPROF_STATE_RUN);
        t0 = now_ns();
        w0 = wall_ns();
        pairs(PAIRS);
        plain[r] = (now_ns() - t0) / PAIRS;
        plain_wall[r] = (wall_ns() - w0) / PAIRS;
        dropped += mlprof_dropped_events();
        mlprof_set_state(MLPROF_STATE_STOP);
        mlprof_clear();
        t0 = now_ns();
        bench_pairs_tsc(PAIRS);
        tsc[r] = (now_ns() - t0) / PAIRS;
        ring_min = ring[r] < ring_min ? ring[r] : ring_min;
        plain_min = plain[r] < plain_min ? plain[r] : plain_min;
        tsc_min = tsc[r] < tsc_min ? tsc[r] : tsc_min;
    }
    unlink(path);
    rmdir(dir);
    double rm = median(ring, ROUNDS), pm = median(plain, ROUNDS), tm = median(tsc, ROUNDS);
    double rw = median(ring_wall, ROUNDS), pw = median(plain_wall, ROUNDS);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0)
        load[0] = -1;
    printf("mlprof bench_ring: median of %d rounds of %d pairs (min), ns of the recording thread's CPU time a begin/end pair; load %.2f\n", ROUNDS,
           PAIRS, load[0]);
    printf("%-34s %8.2f ns (min %.2f)\n", "pair, ring mode (4 MiB ring)", rm, ring_min);
    printf("%-34s %8.2f ns (min %.2f)\n", "pair, recording as usual", pm, plain_min);
    printf("%-34s %8.2f ns (min %.2f)\n", "two rdtsc (the floor)", tm, tsc_min);
    printf("%-34s %8.2f x   (median over median; min over min %.2f x; target 1.5 x)\n", "ring / rdtsc floor",
           tm > 0 ? rm / tm : 0, tsc_min > 0 ? ring_min / tsc_min : 0);
    printf("%-34s %8.2f x\n", "ring / recording as usual", pm > 0 ? rm / pm : 0);
    printf("%-34s %8.2f ns ring, %.2f ns as usual (the collector's thread evicting beside it)\n", "  wall time",
           rw, pw);
    if (dropped)
        printf("bench_ring: %llu events dropped (the evictor fell behind): figures are not valid\n",
               (unsigned long long)dropped);
    printf("mlprof-bench-ring: ring_ns=%.2f plain_ns=%.2f tsc_pair_ns=%.2f ring_over_tsc=%.3f ring_wall_ns=%.2f "
           "plain_wall_ns=%.2f dropped=%llu load=%.2f\n",
           rm, pm, tm, tm > 0 ? rm / tm : 0, rw, pw, (unsigned long long)dropped, load[0]);
    return 0;
}
