/*
 * stacks_target.c - a program whose CPU time is known, for the sampled call
 * stacks (stacks_check.py): run with the sampling key, it spends 60%, 30% and
 * 10% of its main thread's CPU time in hot_a, hot_b and hot_c (hot_b inside
 * a span "span_b"), then spins at the bottom of a recursion RECURSE_DEPTH
 * deep, and starts a thread that spins in thread_fn and ends, all while
 * sampled; then it writes the trace. main calls each hot function through
 * its own phase function (phase_a, phase_b, phase_c). Built with frame
 * pointers (stacks_target), which the kernel's user call chains follow, and
 * without (stacks_target_nofp), which only a DWARF unwind follows.
 * Usage: stacks_target TRACE HZ MS [fork] [KEY=VALUE...], MS the CPU
 * milliseconds of the three hot functions together, then more
 * configuration keys. With "fork" it then forks while sampling: the child
 * spins in child_fn and writes its own trace (the filename with its pid, as
 * every forked child's), the parent spins in parent_fn meanwhile, waits for
 * it and writes its own. Before the trace, it spins 100 ms in hot_paused
 * while paused, and prints how much work its spins did (blocks of
 * iterations): a sampler's cost in the sampled threads shows as fewer.
 * STACKS_TARGET_HOLD=first|all: before the run, the program installs a
 * handler of its own on SIGRTMAX-2 (the timer-signal sampler's first
 * choice) or on every real-time signal up to it; at the end it checks that
 * its handler is still there and still runs (status 3 if not).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mlprof/mlprof.h"
#include "spin.h"

#define RECURSE_DEPTH 100

volatile uint64_t sink;
static uint64_t spins; /* blocks of iterations done (atomic: two threads spin) */
static volatile sig_atomic_t held_runs;

static void held_handler(int sig)
{
    (void)sig;
    held_runs++;
}

/* The program's own handler on hold=first: SIGRTMAX-2; all: SIGRTMIN..SIGRTMAX-2. */
static int hold_signals(const char *hold, int check)
{
    int lo = strcmp(hold, "all") == 0 ? SIGRTMIN : SIGRTMAX - 2;
    for (int sig = lo; sig <= SIGRTMAX - 2; sig++) {
        struct sigaction sa;
        if (!check) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = held_handler;
            if (sigaction(sig, &sa, NULL) != 0)
                return -1;
            continue;
        }
        if (sigaction(sig, NULL, &sa) != 0 || sa.sa_handler != held_handler) {
            fprintf(stderr, "stacks_target: signal %d lost the program's handler\n", sig);
            return -1;
        }
        sig_atomic_t before = held_runs;
        raise(sig);
        if (held_runs != before + 1) {
            fprintf(stderr, "stacks_target: the program's handler of signal %d did not run\n", sig);
            return -1;
        }
    }
    return 0;
}

/* external, so that the compiler keeps them whole and the symbol table names them */
void hot_a(uint64_t ns);
void hot_b(uint64_t ns);
void hot_c(uint64_t ns);
void phase_a(uint64_t ns);
void phase_b(uint64_t ns);
void phase_c(uint64_t ns);
void recurse(int depth);
void *thread_fn(void *arg);
void hot_paused(uint64_t ns);
void child_fn(void);
void parent_fn(void);

#define SPIN(ns) SPIN_CPU(ns, sink, __atomic_add_fetch(&spins, 1, __ATOMIC_RELAXED))

__attribute__((noinline)) void hot_a(uint64_t ns) { SPIN(ns); }
__attribute__((noinline)) void hot_b(uint64_t ns) { SPIN(ns); }
__attribute__((noinline)) void hot_c(uint64_t ns) { SPIN(ns); }
__attribute__((noinline)) void hot_paused(uint64_t ns) { SPIN(ns); }

/* Each hot function's only caller, between it and main: without frame
 * pointers, a stack that names phase_b between main and hot_b was unwound
 * by CFI (the leaf alone cannot tell). */
__attribute__((noinline)) void phase_a(uint64_t ns)
{
    hot_a(ns);
    sink += 1; /* not a tail call */
}
__attribute__((noinline)) void phase_b(uint64_t ns)
{
    hot_b(ns);
    sink += 2;
}
__attribute__((noinline)) void phase_c(uint64_t ns)
{
    hot_c(ns);
    sink += 3;
}

__attribute__((noinline)) void recurse(int depth)
{
    if (depth > 1)
        recurse(depth - 1);
    else
        SPIN(150000000ull);
    sink += (uint64_t)depth; /* not a tail call */
}

__attribute__((noinline)) void *thread_fn(void *arg)
{
    (void)arg;
    SPIN(200000000ull);
    return NULL;
}

__attribute__((noinline)) void child_fn(void) { SPIN(300000000ull); }
__attribute__((noinline)) void parent_fn(void) { SPIN(300000000ull); }

/* Forks while sampling: 0 when both sides did their part and the child wrote its trace. */
static int fork_part(void)
{
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        child_fn();
        if (mlprof_dump(1) != MLPROF_OK) {
            fprintf(stderr, "stacks_target (forked child): %s\n", mlprof_last_error());
            _exit(1);
        }
        _exit(0);
    }
    parent_fn();
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "stacks_target: the forked child failed (status 0x%x)\n", status);
        return 1;
    }
    printf("child %d\n", (int)child);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: stacks_target TRACE HZ MS [fork] [KEY=VALUE...]\n");
        return 2;
    }
    uint64_t total = (uint64_t)atol(argv[3]) * 1000000ull;
    const char *hold = getenv("STACKS_TARGET_HOLD");
    if (hold && *hold && hold_signals(hold, 0) != 0) {
        perror("stacks_target: sigaction");
        return 1;
    }
    if (mlprof_set_config("filename", argv[1]) != MLPROF_OK || mlprof_set_config("sampling", argv[2]) != MLPROF_OK) {
        fprintf(stderr, "stacks_target: %s\n", mlprof_last_error());
        return 1;
    }
    int forking = 0;
    for (int i = 4; i < argc; i++) { /* fork, more keys: sampling_unwind=fp, sampling_stack=8K */
        char key[64];
        if (strcmp(argv[i], "fork") == 0) {
            forking = 1;
            continue;
        }
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
            fprintf(stderr, "stacks_target: expected KEY=VALUE, got \"%s\"\n", argv[i]);
            return 2;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
        if (mlprof_set_config(key, eq + 1) != MLPROF_OK) {
            fprintf(stderr, "stacks_target: %s\n", mlprof_last_error());
            return 1;
        }
    }
    if (mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
        fprintf(stderr, "stacks_target: %s\n", mlprof_last_error());
        return 1;
    }
    mlprof_span *span_b = mlprof_task_create(NULL, "span_b");
    for (int round = 0; round < 20; round++) { /* interleaved: no share depends on when */
        phase_a(total * 6 / 200);
        mlprof_begin(span_b);
        phase_b(total * 3 / 200);
        mlprof_end(span_b);
        phase_c(total / 200);
    }
    recurse(RECURSE_DEPTH);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_fn, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    if (forking && fork_part() != 0)
        return 1;
    if (mlprof_pause() != MLPROF_OK) /* nothing recorded while paused */
        return 1;
    hot_paused(100000000ull);
    if (mlprof_resume() != MLPROF_OK)
        return 1;
    if (mlprof_dump(1) != MLPROF_OK) {
        fprintf(stderr, "stacks_target: %s\n", mlprof_last_error());
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("stacks_target: %llu spin blocks; process CPU %.3f s\n", (unsigned long long)spins,
           (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
               ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6);
    if (hold && *hold && hold_signals(hold, 1) != 0)
        return 3;
    return 0;
}
