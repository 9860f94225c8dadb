/*
 * rss.c - the resident set size of the process, from /proc/self/statm: per
 * span as its change (the built-in "rss" observer, an argument in bytes that
 * may be negative), and as the sampler's "rss" series.
 *
 * Reading statm is a system call (about a microsecond or two), paid only by
 * those who ask for rss. One descriptor serves every thread: pread at 0
 * makes the kernel produce the file anew each time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hw_internal.h"

static int g_fd = -1;       /* /proc/self/statm, opened once */
static int g_fd_pid;        /* the process it was opened in */
static long g_page;

static int statm_fd(void)
{
    int fd = __atomic_load_n(&g_fd, __ATOMIC_ACQUIRE);
    if (fd >= 0 && __atomic_load_n(&g_fd_pid, __ATOMIC_RELAXED) == mlprof__g.pid)
        return fd;
    /* first use, or a forked child: its own file (the parent's still reads the parent) */
    int fresh = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fresh < 0)
        return -1;
    g_page = sysconf(_SC_PAGESIZE);
    int old = fd;
    if (__atomic_compare_exchange_n(&g_fd, &old, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&g_fd_pid, mlprof__g.pid, __ATOMIC_RELAXED);
        return fresh;
    }
    close(fresh); /* another thread was first */
    return old;
}

int64_t mlprof__rss_bytes(void)
{
    int fd = statm_fd();
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    if (got <= 0)
        return -1;
    buf[got] = '\0';
    /* "size resident shared text lib data dt", in pages */
    char *end;
    strtoull(buf, &end, 10);
    unsigned long long resident = strtoull(end, NULL, 10);
    return (int64_t)resident * g_page;
}

/* ------------------------------------------------------- per span */

static int g_observer = -1;

static void on_begin(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    *(int64_t *)data = mlprof__rss_bytes();
}

static void on_end(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    int64_t before = *(const int64_t *)data;
    int64_t now = mlprof__rss_bytes();
    if (before >= 0 && now >= 0)
        mlprof_arg_int("rss", now - before);
}

int mlprof__rss_span_start(void)
{
    if (mlprof__rss_bytes() < 0) {
        mlprof__hw_unavailable("rss", "cannot read /proc/self/statm");
        return MLPROF_OK;
    }
    return mlprof__hw_observer_on(&g_observer, "rss", sizeof(int64_t), on_begin, on_end);
}

void mlprof__rss_span_stop(void) { mlprof__hw_observer_off(&g_observer); }

/* ------------------------------------------------------ the series */

static void *rss_open(mlprof_domain *d, const void *arg)
{
    (void)arg;
    if (mlprof__rss_bytes() < 0) {
        mlprof__hw_unavailable("rss (sampler)", "cannot read /proc/self/statm");
        return NULL;
    }
    return mlprof_counter_create(d, "rss");
}

static void rss_sample(void *state, uint64_t now_ns)
{
    (void)now_ns;
    int64_t v = mlprof__rss_bytes();
    if (v >= 0)
        mlprof_counter_set(state, v);
}

static void rss_close(void *state, int after_fork)
{
    if (!after_fork)
        mlprof_counter_destroy(state);
}

const mlprof__source mlprof__rss_source = {"rss", rss_open, rss_sample, rss_close};
