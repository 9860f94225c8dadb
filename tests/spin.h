/*
 * spin.h - CPU-time spins for the sampling tests (stacks_target.c,
 * test_stacks_perfetto.c): SPIN_CPU(ns, sink, each) spins for ns of this
 * thread's CPU time in its caller's frame mostly (the clock is read once per
 * many iterations, so samples inside the vDSO, which has no frame pointer to
 * follow, are rare), running the statement each after every block.
 */
#ifndef MLPROF_TESTS_SPIN_H
#define MLPROF_TESTS_SPIN_H

#include <stdint.h>
#include <time.h>

static inline uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define SPIN_CPU(ns, sink, each)                                                                             \
    do {                                                                                                     \
        uint64_t c0_ = thread_cpu_ns(), x_ = (sink);                                                         \
        while (thread_cpu_ns() - c0_ < (ns)) {                                                               \
            for (int i_ = 0; i_ < 200000; i_++)                                                              \
                x_ = x_ * 6364136223846793005ull + 1442695040888963407ull;                                   \
            (sink) = x_;                                                                                     \
            each;                                                                                            \
        }                                                                                                    \
    } while (0)

#endif /* MLPROF_TESTS_SPIN_H */
