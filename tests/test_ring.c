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
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    for (long i = 0; i < n; i++) {
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
        if (i % 1000 == 999 || i == n - 1) {
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
