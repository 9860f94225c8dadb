/*
 * test_formats_crash.c - a program that dies of a signal while mlprof
 * records it, run the way `mlprof run` runs one: libmlprof_preload.so in
 * LD_PRELOAD, configured by MLPROF_* variables (MLPROF_FILENAME names the
 * trace, and so its format). It links nothing of mlprof: the API comes from
 * the preloaded library through dlsym. It records SPANS spans named "op"
 * (argument i = 0..SPANS-1), half on a second thread that has exited, inside
 * a span "open at the crash" that never ends, then prints "recorded SPANS"
 * and dies: SIGNAL is segv (a write through a null
 * pointer) or abort. The preload's handler must write the trace before the
 * signal kills the process; formats_crash_check.py reads it.
 *
 * usage: test_formats_crash SPANS segv|abort
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct api {
    void *(*domain_create)(const char *);
    void *(*task_create)(void *, const char *);
    void (*begin)(void *);
    void (*end)(void *);
    void (*arg_int)(const char *, int64_t);
    void (*thread_set_name)(const char *);
} api;

static api g;
static void *g_dom;
static int g_spans;

static void *load(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "test_formats_crash: %s not found: is libmlprof_preload.so in LD_PRELOAD?\n", name);
        exit(2);
    }
    return f;
}

static void record(int from, int to)
{
    void *op = g.task_create(g_dom, "op");
    for (int i = from; i < to; i++) {
        g.begin(op);
        g.arg_int("i", i);
        g.end(op);
    }
}

static void *second_half(void *arg)
{
    (void)arg;
    g.thread_set_name("second");
    record(g_spans / 2, g_spans);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "segv") != 0 && strcmp(argv[2], "abort") != 0)) {
        fprintf(stderr, "usage: test_formats_crash SPANS segv|abort\n");
        return 2;
    }
    g_spans = atoi(argv[1]);
    *(void **)&g.domain_create = load("mlprof_domain_create");
    *(void **)&g.task_create = load("mlprof_task_create");
    *(void **)&g.begin = load("mlprof_begin");
    *(void **)&g.end = load("mlprof_end");
    *(void **)&g.arg_int = load("mlprof_arg_int");
    *(void **)&g.thread_set_name = load("mlprof_thread_set_name");
    g.thread_set_name("main");
    g_dom = g.domain_create("crash");
    void *open_span = g.task_create(g_dom, "open at the crash");
    g.begin(open_span);
    record(0, g_spans / 2);
    pthread_t th;
    if (pthread_create(&th, NULL, second_half, NULL) != 0 || pthread_join(th, NULL) != 0) {
        fprintf(stderr, "test_formats_crash: pthread_create failed\n");
        return 1;
    }
    printf("recorded %d\n", g_spans);
    fflush(stdout);
    if (strcmp(argv[2], "abort") == 0)
        abort();
    volatile int *volatile nowhere = NULL;
    *nowhere = 1;
    fprintf(stderr, "test_formats_crash: still alive after writing through a null pointer\n");
    return 1;
}
