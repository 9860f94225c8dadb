/*
 * test_counters_fork.c - per-span perf_event counters in a forked child count
 * the child's own thread, not the parent's: the forking thread opened its
 * counters before the fork, then the child touches fresh pages in a span
 * while the parent waits for it (faulting nothing). check_trace.py (area
 * "counters_fork") reads the child's trace: its span has the child's faults,
 * counted by perf_event and, where PAPI counts here, by PAPI.
 */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define PAGES 256

static long thread_faults(void)
{
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return r.ru_minflt + r.ru_majflt;
}

static void touch(char *mem, size_t page)
{
    for (size_t i = 0; i < PAGES; i++)
        mem[i * page] = 1;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("counters_fork.json")));
    /* and the same through PAPI where it loads and counts (its perf_event component) */
    CHECK_OK(mlprof_set_config("counters", "page-faults,papi:perf::PAGE-FAULTS"));
    mlprof_domain *d = mlprof_domain_create("hw");
    mlprof_span *ps = mlprof_task_create(d, "parent_touch"), *cs = mlprof_task_create(d, "child_touch");
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *mem = mmap(NULL, 2 * PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED, "mmap");
    if (mem == MAP_FAILED)
        return tu_finish("test_counters_fork");
    madvise(mem, 2 * PAGES * page, MADV_NOHUGEPAGE); /* one fault per page */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    mlprof_begin(ps); /* this thread's counters are open from here on */
    touch(mem, page);
    mlprof_end(ps);

    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        long f0 = thread_faults();
        mlprof_begin(cs);
        touch(mem + PAGES * page, page); /* never touched in the parent: fresh pages */
        mlprof_end(cs);
        printf("child_kernel_faults=%ld\n", thread_faults() - f0);
        exit(0); /* its trace is written at exit */
    }
    CHECK(pid > 0, "fork");
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    CHECK_OK(mlprof_dump(1));
    printf("pages=%d child=%d\n", PAGES, (int)pid);
    munmap(mem, 2 * PAGES * page);
    return tu_finish("test_counters_fork");
}
