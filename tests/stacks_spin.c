/*
 * stacks_spin.c - a program that knows nothing of mlprof, for the sampled
 * call stacks under `mlprof run --sample` (stacks_check.py): it spins in
 * spin_fn for MS milliseconds of CPU time, then ends as asked: it returns
 * (exit), or raises SIGTERM (term), SIGSEGV (segv) or SIGKILL (kill) on
 * itself, so that what a trace keeps of a killed program can be checked.
 * With "sleep", it sleeps 2 s more after spinning and before dying, so that
 * a continuous dump runs in between. Built with frame pointers.
 * Usage: stacks_spin MS [exit|term|segv|kill] [sleep]
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t sink;

void spin_fn(uint64_t ns);

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) void spin_fn(uint64_t ns)
{
    uint64_t c0 = thread_cpu_ns(), x = sink;
    while (thread_cpu_ns() - c0 < ns) {
        for (int i = 0; i < 200000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        sink = x;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: stacks_spin MS [exit|term|segv|kill] [sleep]\n");
        return 2;
    }
    spin_fn((uint64_t)atol(argv[1]) * 1000000ull);
    const char *how = argc > 2 ? argv[2] : "exit";
    if (argc > 3 && strcmp(argv[3], "sleep") == 0)
        sleep(2);
    if (strcmp(how, "term") == 0)
        raise(SIGTERM);
    else if (strcmp(how, "kill") == 0)
        raise(SIGKILL);
    else if (strcmp(how, "segv") == 0)
        *(volatile int *)(uintptr_t)(sink & 1) = 0; /* address 0 or 1: a real fault, not one the compiler sees */
    return 0;
}
