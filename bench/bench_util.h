/*
 * bench_util.h - what the C benchmarks share: a clock read in ns, the order
 * of doubles for qsort, and the floor they measure against (two reads of the
 * time-stamp counter).
 */
#ifndef MLPROF_BENCH_UTIL_H
#define MLPROF_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

static inline double bench_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Where the floor's reads go, so that they are made. */
static volatile uint64_t bench_tsc_sink __attribute__((unused));

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n pairs of rdtsc: the least a begin/end pair that reads the clock twice
 * can cost (nothing elsewhere than x86: 0). */
static inline void bench_pairs_tsc(int n)
{
#if defined(__x86_64__) || defined(__i386__)
    uint64_t acc = 0;
    for (int i = 0; i < n; i++) {
        acc += __builtin_ia32_rdtsc();
        acc += __builtin_ia32_rdtsc();
    }
    bench_tsc_sink = acc;
#else
    (void)n;
#endif
}

#endif
