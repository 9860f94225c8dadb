/*
 * pyframes_shim.c - a test-only stand-in for the timer-signal sampler, so
 * that src/hw/pyframes.c can be tested inside a real Python (loaded with
 * ctypes by tests/pyframes_check.py): a SIGPROF handler captures the
 * interrupted thread's Python frames (and, for the samples a thread asks
 * for with shim_raise, its native frames too); shim_dump resolves them
 * afterwards, interleaves, and writes one line per sample.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../src/hw/pyframes.h"

#define MAX_SAMPLES 8000
#define NATIVE_MAX 64
#define WORDS 400 /* tid, native count, natives, Python words */

int shim_init(char *why, int len);
int shim_init_nowait(char *why, int len);
int shim_start(int hz);
void shim_stop(void);
int shim_raise(void);
long shim_dump(const char *path);
int shim_count(void);
int shim_last_label(char *out, int len);
void shim_natives(int on);
double shim_bench(int iters);

static uint64_t g_samples[MAX_SAMPLES][WORDS];
static unsigned g_n;               /* atomic */
static unsigned long long g_cost[MAX_SAMPLES]; /* the capture's cost (ns) in each sample */
static volatile sig_atomic_t g_native_tid;  /* the thread in shim_raise */
static volatile sig_atomic_t g_native_all;  /* every sample takes its native frames too */

static unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void on_signal(int sig)
{
    (void)sig;
    unsigned i = __atomic_fetch_add(&g_n, 1, __ATOMIC_RELAXED);
    if (i >= MAX_SAMPLES)
        return;
    uint64_t *w = g_samples[i];
    int tid = (int)syscall(SYS_gettid);
    w[0] = (uint64_t)tid;
    w[1] = 0;
    if (g_native_tid == tid || g_native_all) {
        void *ips[NATIVE_MAX];
        int n = backtrace(ips, NATIVE_MAX); /* loaded by shim_init: no dlopen in here */
        for (int k = 0; k < n; k++)
            w[2 + k] = (uint64_t)(uintptr_t)ips[k];
        w[1] = (uint64_t)n;
    }
    size_t off = 2 + (size_t)w[1];
    unsigned long long t0 = now_ns(), t1 = now_ns(); /* the clock's own cost, taken off */
    size_t got = mlprof__pyframes_capture(w + off, WORDS - off);
    unsigned long long t2 = now_ns();
    g_cost[i] = (t2 - t1) - (t1 - t0 < t2 - t1 ? t1 - t0 : 0);
    if (got < WORDS - off)
        w[off + got] = 0; /* no capture: decode finds no magic */
}

static void setup(void)
{
    void *ips[4];
    backtrace(ips, 4); /* loads libgcc_s now, outside any handler */
    memset(g_samples, 0, sizeof g_samples); /* no page faults in the handler (nor in its cost) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
}

/* Sets the handler up and waits for init's answer (its self-test on a
 * thread of its own where the caller does not hold the GIL). */
int shim_init(char *why, int len)
{
    setup();
    return mlprof__pyframes_init(why, (size_t)len);
}

/* The same as mlprof's reader does it: never waits; asked again until it
 * answers. */
int shim_init_nowait(char *why, int len)
{
    static int once;
    if (!once++)
        setup();
    return mlprof__pyframes_init_nowait(why, (size_t)len);
}

int shim_start(int hz)
{
    struct itimerval it = {{0, 1000000 / hz}, {0, 1000000 / hz}};
    return setitimer(ITIMER_PROF, &it, NULL);
}

void shim_stop(void)
{
    struct itimerval it = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &it, NULL);
}

/* The capture's cost with warm caches, called in a loop from Python. */
double shim_bench(int iters)
{
    static uint64_t w[WORDS];
    unsigned long long t0 = now_ns();
    size_t got = 0;
    for (int i = 0; i < iters; i++)
        got += mlprof__pyframes_capture(w, WORDS);
    return got ? (double)(now_ns() - t0) / iters : -1;
}

/* Native frames in the timer's samples too (glibc's backtrace in the
 * handler: fine for a test whose program does not unwind meanwhile). */
void shim_natives(int on) { g_native_all = on; }

/* The leaf Python frame of the last sample, named now (as the reader does
 * a few milliseconds after a sample); returns the entries read again so far. */
int shim_last_label(char *out, int len)
{
    unsigned n = __atomic_load_n(&g_n, __ATOMIC_RELAXED);
    out[0] = '\0';
    if (!n || n > MAX_SAMPLES)
        return -1;
    const uint64_t *w = g_samples[n - 1];
    size_t nn = (size_t)w[1], used, cached, failed, reread;
    mlprof__pyframe py[1];
    if (mlprof__pyframes_decode(w + 2 + nn, WORDS - 2 - nn, py, 1, &used, NULL) != 1)
        return -1;
    mlprof__pyframes_label(&py[0], out, (size_t)len);
    mlprof__pyframes_stats(&cached, &failed, &reread);
    return (int)reread;
}

int shim_count(void) { return (int)__atomic_load_n(&g_n, __ATOMIC_RELAXED); }

int shim_raise(void)
{
    g_native_tid = (int)syscall(SYS_gettid);
    int rc = raise(SIGPROF);
    g_native_tid = 0;
    return rc;
}

/* Whether a native frame's object is one of PyTorch's (its name is shown). */
static int torch_object(const char *o) { return strncmp(o, "libtorch", 8) == 0 || strncmp(o, "libc10", 6) == 0; }

static int by_value(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* One line a sample: TID, a tab, the frames root first separated by ';',
 * each "py:LABEL" or "c:SYMBOL"; then a last line with the costs. */
long shim_dump(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    unsigned n = g_n < MAX_SAMPLES ? g_n : MAX_SAMPLES;
    unsigned long long cold_ns = 0, warm_ns = 0, cold = 0, warm = 0;
    for (unsigned i = 0; i < n; i++) {
        const uint64_t *w = g_samples[i];
        size_t nn = (size_t)w[1], used;
        mlprof__pyframe py[MLPROF__PYFRAMES_MAX];
        char labels[MLPROF__PYFRAMES_MAX][300];
        size_t np = mlprof__pyframes_decode(w + 2 + nn, WORDS - 2 - nn, py, MLPROF__PYFRAMES_MAX, &used, NULL);
        for (size_t k = 0; k < np; k++) {
            size_t before, after, failed, reread;
            mlprof__pyframes_stats(&before, &failed, &reread);
            unsigned long long t0 = now_ns();
            mlprof__pyframes_label(&py[k], labels[k], sizeof labels[k]);
            unsigned long long t = now_ns() - t0;
            mlprof__pyframes_stats(&after, &failed, &reread);
            if (after > before)
                cold_ns += t, cold++;
            else
                warm_ns += t, warm++;
        }
        unsigned char is_eval[NATIVE_MAX];
        const char *names[NATIVE_MAX], *objects[NATIVE_MAX];
        for (size_t k = 0; k < nn; k++) {
            Dl_info di;
            names[k] = dladdr((void *)(uintptr_t)(w[2 + k] - (k > 0)), &di) && di.dli_sname ? di.dli_sname : "?";
            objects[k] = di.dli_fname ? strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 : di.dli_fname : "?";
            is_eval[k] = (unsigned char)mlprof__pyframes_is_eval(names[k]);
        }
        int32_t order[NATIVE_MAX + MLPROF__PYFRAMES_MAX];
        size_t no = mlprof__pyframes_interleave(is_eval, nn, py, np, order, sizeof order / sizeof order[0]);
        fprintf(f, "%llu\t", (unsigned long long)w[0]);
        for (size_t k = no; k-- > 0;) {
            if (order[k] >= 0)
                fprintf(f, "c:%s%s%s", names[order[k]], torch_object(objects[order[k]]) ? "@" : "",
                        torch_object(objects[order[k]]) ? objects[order[k]] : "");
            else
                fprintf(f, "py:%s%s", labels[-1 - order[k]], py[-1 - order[k]].entry ? " [entry]" : "");
            fputs(k ? ";" : "\n", f);
        }
        if (!no)
            fputc('\n', f);
        if (nn) { /* the reader's way: eval frames known by address, Python frames as tags */
            uint64_t tagged[NATIVE_MAX + MLPROF__PYFRAMES_MAX];
            size_t nt = mlprof__pyframes_tag(w + 2, nn, w + 2 + nn, WORDS - 2 - nn, tagged,
                                             sizeof tagged / sizeof tagged[0]);
            fputs("=tags\t", f);
            for (size_t k = nt; k-- > 0;) {
                char name[600];
                Dl_info di;
                if (mlprof__pyframes_is_tag(tagged[k]))
                    mlprof__pyframes_tag_name(tagged[k] - (k > 0), name, sizeof name);
                else
                    snprintf(name, sizeof name, "%s",
                             dladdr((void *)(uintptr_t)(tagged[k] - (k > 0)), &di) && di.dli_sname ? di.dli_sname : "?");
                fprintf(f, "%s%s%s", mlprof__pyframes_is_tag(tagged[k]) ? "py:" : "c:", name, k ? ";" : "\n");
            }
        }
    }
    /* the median: a mean would count the times the handler was preempted */
    qsort(g_cost, n, sizeof g_cost[0], by_value);
    unsigned long long g_ns = n ? g_cost[n / 2] * n : 0;
    fprintf(f, "#costs capture_ns %llu captures %llu resolve_cold_ns %llu cold %llu resolve_warm_ns %llu warm %llu\n",
            g_ns, (unsigned long long)n, cold_ns, cold, warm_ns, warm);
    fclose(f);
    return (long)n;
}
