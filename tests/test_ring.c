/*
 * test_ring.c - the flight recorder (mode=ring), for ring_check.py:
 * test_ring N [crash|threads]. Configured by the environment (MLPROF_MODE=ring,
 * MLPROF_RING_SIZE, MLPROF_AUTOSTART...) and given mlprof by LD_PRELOAD
 * (libmlprof.so, or libmlprof_preload.so for its crash handler), reached
 * through dlsym as test_formats_crash does. Records a span "outer" around N
 * spans "work" (their number as argument i) in spans "mid" of 1000 each (so
 * that the ring's start cuts two levels), and an instant "tick" every 100,
 * far more than the ring holds, then dumps; with crash, dies of SIGSEGV
 * instead, the outer span still open; with threads, a second thread records
 * spans "side" all along and 1000 more once the main thread is done. Prints "recorded K dropped D" first.
 *
 * test_ring N wait|own: for flushes (`mlprof capture --flush`, dump_signal).
 * Records the same loop without end, and after every N iterations since
 * started or asked, prints "ready I" (the iterations so far); reads commands
 * on standard input between iterations: "next" (N more, then "ready" again),
 * "quit" (or the end of the input: the outer span ends, then as above),
 * "count" (own: waits for one more SIGUSR2 than it last reported, a
 * minute at most, and prints "usr2 K", K received in all). With
 * own, the program handles SIGUSR2 itself, installed before its first call
 * of mlprof (libmlprof.so starts at it): mlprof must keep that handler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    void *(*domain_create)(const char *);
    void *(*task_create)(void *, const char *);
    void *(*marker_create)(void *, const char *);
    void (*begin)(void *);
    void (*end)(void *);
    void (*mark)(void *, int);
    void (*arg_int)(const char *, int64_t);
    uint64_t (*dropped_events)(void);
    int (*dump)(int);
    const char *(*last_error)(void);
} g;

static void *load(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "test_ring: %s not found: is libmlprof in LD_PRELOAD?\n", name);
        exit(2);
    }
    return f;
}

static void *g_dom;
static volatile sig_atomic_t g_usr2;

static void on_usr2(int sig)
{
    (void)sig;
    g_usr2++;
}

/* A command from standard input, if one is there: 'n'ext, 'q'uit, 'c'ount, or 0. */
static int command(void)
{
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 'q';
    return line[0];
}
static int g_done;
static long g_side;

static void *side(void *arg)
{
    (void)arg;
    void *s = g.task_create(g_dom, "side");
    /* on until the main thread is done, then 1000 more: the newest events
     * of the process, which the ring keeps whatever the scheduling was */
    long after = 0;
    while (after < 1000) {
        int done = __atomic_load_n(&g_done, __ATOMIC_ACQUIRE); /* before the span: it began after */
        g.begin(s);
        g.end(s);
        g_side++;
        after += done;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_ring N [crash|threads]\n");
        return 2;
    }
    long n = atol(argv[1]);
    int crash = argc > 2 && strcmp(argv[2], "crash") == 0;
    int threads = argc > 2 && strcmp(argv[2], "threads") == 0;
    int own = argc > 2 && strcmp(argv[2], "own") == 0;
    int wait = own || (argc > 2 && strcmp(argv[2], "wait") == 0);
    if (own) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr2;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, NULL);
    }
    *(void **)&g.domain_create = load("mlprof_domain_create");
    *(void **)&g.task_create = load("mlprof_task_create");
    *(void **)&g.marker_create = load("mlprof_marker_create");
    *(void **)&g.begin = load("mlprof_begin");
    *(void **)&g.end = load("mlprof_end");
    *(void **)&g.mark = load("mlprof_mark");
    *(void **)&g.arg_int = load("mlprof_arg_int");
    *(void **)&g.dropped_events = load("mlprof_dropped_events");
    *(void **)&g.dump = load("mlprof_dump");
    *(void **)&g.last_error = load("mlprof_last_error");
    g_dom = g.domain_create("ring");
    void *outer = g.task_create(g_dom, "outer");
    void *work = g.task_create(g_dom, "work");
    void *mid = g.task_create(g_dom, "mid");
    void *tick = g.marker_create(g_dom, "tick");
    pthread_t th;
    if (threads && pthread_create(&th, NULL, side, NULL) != 0)
        return 1;
    long recorded = 1; /* the outer span */
    g.begin(outer);
    long until = n;
    int counted = 0; /* SIGUSR2s reported ("count") */
    for (long i = 0; wait || i < n; i++) {
        if (wait && i == until) {
            printf("ready %ld\n", i);
            fflush(stdout);
        }
        if (wait && i % 1000 == 0 && i) {
            /* a writer that leaves the collector time to evict: one at full
             * speed, forever, outruns eviction, and a flush waits for it */
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
        if (wait && i % 1000 == 0 && i >= until) {
            int c = command();
            if (c == 'n') {
                until = i + n;
            } else if (c == 'c') {
                for (int k = 0; k < 600000 && g_usr2 <= counted; k++)
                    usleep(100); /* the signal is on its way: a minute at most */
                counted = g_usr2;
                printf("usr2 %d\n", counted);
                fflush(stdout);
            } else if (c == 'q') {
                break; /* between two mid spans */
            }
        }
        if (i % 1000 == 0)
            g.begin(mid);
        g.begin(work);
        g.arg_int("i", i);
        g.end(work);
        recorded++;
        if (i % 100 == 0) {
            g.mark(tick, 2 /* MLPROF_SCOPE_THREAD */);
            recorded++;
        }
        if (i % 1000 == 999 || (!wait && i == n - 1)) {
            g.end(mid);
            recorded++;
        }
    }
    if (threads) {
        __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        recorded += g_side;
    }
    if (!crash)
        g.end(outer); /* else open at the crash: in the tail, unfinished */
    printf("recorded %ld dropped %llu\n", recorded, (unsigned long long)g.dropped_events());
    fflush(stdout);
    if (crash) {
        volatile int *null = NULL;
        *null = 1; /* SIGSEGV: the preload's handler writes the trace */
    }
    if (g.dump(1) != 0) {
        fprintf(stderr, "test_ring: dump: %s\n", g.last_error());
        return 1;
    }
    return 0;
}
