/*
 * test_counters.c - perf_event counters per span, on work whose counts are
 * known: touching 256 fresh pages (page faults), spinning for a measured
 * thread CPU time (task clock), a loop of known length (instructions, where
 * the machine has a PMU). It prints what it measured itself; check_trace.py
 * (area "counters") compares that with the spans' arguments in the trace.
 */
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define PAGES 256

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK(mlprof_set_config("counters", "cycles,bogus") == MLPROF_EVALUE, "an unknown counter");
    CHECK(strstr(mlprof_last_error(), "unknown counter \"bogus\"") != NULL, "named: %s", mlprof_last_error());
    CHECK(mlprof_set_config("counters", "task-clock,task-clock") == MLPROF_EVALUE, "a counter twice");
    CHECK_OK(mlprof_set_config("filename", tu_path("counters_trace.json")));
    CHECK_OK(mlprof_set_config("stats_file", tu_path("counters_stats.json")));
    CHECK_OK(mlprof_set_config("counters", "task-clock,page-faults,context-switches,instructions,cycles"));
    char buf[128];
    CHECK_OK(mlprof_get_config("counters", buf, sizeof buf));
    CHECK(strcmp(buf, "task-clock,page-faults,context-switches,instructions,cycles") == 0, "get %s", buf);
    mlprof_domain *d = mlprof_domain_create("hw");
    mlprof_span *touch = mlprof_task_create(d, "touch"), *spin = mlprof_task_create(d, "spin");
    mlprof_span *loop = mlprof_task_create(d, "loop"), *nap = mlprof_task_create(d, "nap");
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap");
    madvise(mem, PAGES * page, MADV_NOHUGEPAGE); /* one fault per page, not one per huge page */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    /* the kernel's own count of this thread's faults, around the same loop (under a
     * sanitizer, its shadow memory faults too) */
    struct rusage r0, r1;
    mlprof_begin(touch);
    getrusage(RUSAGE_THREAD, &r0);
    for (size_t i = 0; i < PAGES; i++)
        mem[i * page] = 1;
    getrusage(RUSAGE_THREAD, &r1);
    mlprof_end(touch);
    long kernel_faults = (r1.ru_minflt - r0.ru_minflt) + (r1.ru_majflt - r0.ru_majflt);

    mlprof_begin(spin);
    uint64_t c0 = thread_cpu_ns();
    volatile uint64_t x = 0;
    while (thread_cpu_ns() - c0 < 30000000u)
        x++;
    uint64_t cpu = thread_cpu_ns() - c0;
    mlprof_end(spin);

    /* 10 million iterations of a loop whose instructions are known: three each
     * where it is written in assembly, so the count can be checked tightly */
    uint64_t acc = 0, n = 10000000u;
    int per_iteration = 0;
    mlprof_begin(loop);
#if defined(__x86_64__)
    __asm__ volatile("1: add %1, %0\n\tdec %1\n\tjnz 1b" : "+r"(acc), "+r"(n) : : "cc");
    per_iteration = 3;
#elif defined(__aarch64__)
    __asm__ volatile("1: add %0, %0, %1\n\tsubs %1, %1, #1\n\tb.ne 1b" : "+r"(acc), "+r"(n) : : "cc");
    per_iteration = 3;
#else
    for (; n; n--)
        __asm__ volatile("" : "+r"(acc) : "r"(n));
#endif
    mlprof_end(loop);
    CHECK(acc == 50000005000000u, "the loop ran: %llu", (unsigned long long)acc);

    /* a sleep gives the CPU away: one context switch at least (counted in the
     * kernel's scheduler, where the counter must look) */
    mlprof_begin(nap);
    usleep(2000);
    mlprof_end(nap);

    CHECK_OK(mlprof_dump(1));
    printf("pages=%d kernel_faults=%ld spin_thread_cpu_ns=%llu loop_iterations=10000000 per_iteration=%d\n",
           PAGES, kernel_faults, (unsigned long long)cpu, per_iteration);
    munmap(mem, PAGES * page);
    return tu_finish("test_counters");
}
