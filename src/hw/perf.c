/*
 * perf.c - hardware and software counters per span through Linux
 * perf_event_open. The `counters` key names them; at each run start a
 * built-in observer is registered that opens them on each thread at its
 * first span (the system calls happen then, once), reads them at the span's
 * begin and end, and adds the differences to the span as arguments. A counter
 * that cannot be opened (no PMU in a virtual machine, perf_event_paranoid) is
 * said once on stderr and in the trace's metadata, and the others go on.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../record/record.h"
#include "hw_internal.h"

#define MAX_COUNTERS MLPROF__PERF_MAX

typedef struct counter_def {
    const char *name;
    size_t len; /* strlen(name) */
    uint32_t type;
    uint64_t config;
    int in_kernel; /* counted only in the kernel (the scheduler's events): opened without exclude_kernel */
} counter_def;

#define COUNTER(name, type, config) {name, sizeof(name) - 1, type, config, 0}
#define KERNEL_COUNTER(name, type, config) {name, sizeof(name) - 1, type, config, 1}
static const counter_def k_counters[] = {
    COUNTER("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    COUNTER("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
    COUNTER("cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES),
    COUNTER("cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES),
    COUNTER("branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
    COUNTER("branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES),
    COUNTER("ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES),
    COUNTER("task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
    COUNTER("page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS),
    COUNTER("minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN),
    COUNTER("major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ),
    /* a switch or a migration happens in the scheduler: with the kernel
     * excluded they count 0 for ever; where perf_event_paranoid forbids the
     * kernel, they cannot be opened, and say so */
    KERNEL_COUNTER("context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES),
    KERNEL_COUNTER("cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS),
};
#undef COUNTER
#undef KERNEL_COUNTER
#define NDEFS (sizeof k_counters / sizeof k_counters[0])
_Static_assert(NDEFS == MLPROF__HW_PERF, "hw.h counts the counters");

int mlprof__perf_find(const char *key, size_t len)
{
    /* the collector asks this for every integer argument of every span:
     * the length rules out most keys without comparing bytes */
    for (size_t i = 0; i < NDEFS; i++) {
        if (k_counters[i].len == len && memcmp(k_counters[i].name, key, len) == 0)
            return (int)i;
    }
    return -1;
}

const char *mlprof__perf_name(int index)
{
    return index >= 0 && (size_t)index < NDEFS ? k_counters[index].name : "";
}

/* The counters measured per span in this run. */
static struct {
    const counter_def *def[MAX_COUNTERS];
    size_t n;
    int observer;               /* its id, or -1 */
    unsigned generation;        /* bumped at each start: threads reopen their counters */
} P = {.observer = -1};

/* ---------------------------------------------------------- per thread */

/* A thread's counters: as many as will go into one group (read with one
 * system call), the others each on its own. */
typedef struct thread_counters {
    int fd[MAX_COUNTERS]; /* -1: not open on this thread */
    int slot[MAX_COUNTERS]; /* its place in the group's read, or -1 when read alone */
    int leader;             /* the group's fd, or -1 */
    int grouped;            /* counters in the group */
    int opened;
    unsigned generation;
} thread_counters;

static __thread thread_counters *t_counters;
static pthread_key_t g_close_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
/* What t_counters points at once the thread's counters are closed at its
 * exit: a span recorded by a later key destructor gets no counters (opening
 * them again would leak them, as the destructors may not run again). */
static thread_counters k_gone;

static void close_counters(void *arg)
{
    thread_counters *tc = arg;
    t_counters = &k_gone; /* before the free: nothing reaches the block after it */
    for (size_t i = 0; i < MAX_COUNTERS; i++) {
        if (tc->fd[i] >= 0)
            close(tc->fd[i]);
    }
    mlprof__free(tc);
}

static void make_key(void) { pthread_key_create(&g_close_key, close_counters); }

const char *mlprof__perf_why(int err)
{
    switch (err) {
    case ENOENT:
    case EOPNOTSUPP:
        return "this machine does not count it (no hardware PMU, as in most virtual machines)";
    case EACCES:
    case EPERM:
        return "not permitted (lower /proc/sys/kernel/perf_event_paranoid, or run with CAP_PERFMON)";
    case ENOSYS:
        return "the kernel has no perf_event_open";
    case EMFILE:
    case ENFILE:
        return "too many open files";
    default:
        return strerror(err);
    }
}

/* group: the leader's fd, -1 to lead a new group, -2 for a counter read alone. */
static int open_counter(const counter_def *d, int group)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = d->type;
    a.config = d->config;
    a.exclude_kernel = !d->in_kernel; /* works at perf_event_paranoid 2; what user code costs */
    a.exclude_hv = 1;
    a.read_format = group == -2 ? 0 : PERF_FORMAT_GROUP;
    return (int)syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1, group == -2 ? -1 : group,
                        PERF_FLAG_FD_CLOEXEC);
}

static thread_counters *thread_open(void)
{
    thread_counters *tc = t_counters;
    if (tc == &k_gone)
        return NULL;
    if (tc && tc->generation == P.generation)
        return tc;
    if (tc) { /* counters of an earlier run: another list, maybe */
        for (size_t i = 0; i < MAX_COUNTERS; i++) {
            if (tc->fd[i] >= 0)
                close(tc->fd[i]);
        }
    } else {
        tc = mlprof__calloc(1, sizeof *tc);
        if (!tc)
            return NULL;
        pthread_once(&g_key_once, make_key);
        pthread_setspecific(g_close_key, tc);
    }
    tc->generation = P.generation;
    tc->opened = tc->grouped = 0;
    tc->leader = -1;
    for (size_t i = 0; i < MAX_COUNTERS; i++) {
        tc->fd[i] = -1;
        tc->slot[i] = -1;
    }
    for (size_t i = 0; i < P.n; i++) {
        /* hardware counters go into one group, read with one call; software
         * ones each alone (in a group, the kernel counts page faults as 0) */
        int fd = -1;
        if (P.def[i]->type == PERF_TYPE_HARDWARE) {
            fd = open_counter(P.def[i], tc->leader);
            if (fd >= 0) {
                if (tc->leader < 0)
                    tc->leader = fd;
                tc->slot[i] = tc->grouped++;
            }
        } else {
            fd = open_counter(P.def[i], -2);
        }
        tc->fd[i] = fd;
        if (fd >= 0) {
            tc->opened++;
            continue;
        }
        mlprof__hw_unavailable(P.def[i]->name, mlprof__perf_why(errno));
    }
    t_counters = tc;
    return tc;
}

static void read_all(const thread_counters *tc, uint64_t *v)
{
    uint64_t group[1 + MAX_COUNTERS]; /* PERF_FORMAT_GROUP: the count, then the values */
    ssize_t want = (ssize_t)((1 + (size_t)tc->grouped) * sizeof group[0]);
    int have_group = tc->leader >= 0 && read(tc->leader, group, sizeof group) == want;
    for (size_t i = 0; i < P.n; i++) {
        if (tc->fd[i] < 0)
            v[i] = 0;
        else if (tc->slot[i] >= 0)
            v[i] = have_group ? group[1 + tc->slot[i]] : 0;
        else if (read(tc->fd[i], &v[i], sizeof v[i]) != (ssize_t)sizeof v[i])
            v[i] = 0;
    }
}

/* ------------------------------------------------------------ observer */

typedef struct span_counts {
    uint64_t at_begin[MAX_COUNTERS];
} span_counts;

static void on_begin(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    thread_counters *tc = thread_open();
    if (tc && tc->opened)
        read_all(tc, ((span_counts *)data)->at_begin);
}

static void on_end(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    thread_counters *tc = t_counters;
    if (!tc || tc == &k_gone || !tc->opened || tc->generation != P.generation)
        return;
    uint64_t now[MAX_COUNTERS];
    read_all(tc, now);
    const span_counts *c = data;
    for (size_t i = 0; i < P.n; i++) {
        if (tc->fd[i] >= 0)
            mlprof_arg_int(P.def[i]->name, (int64_t)(now[i] - c->at_begin[i]));
    }
}

int mlprof__perf_span_start(const int *counters, size_t n)
{
    if (P.observer >= 0)
        return MLPROF_OK;
    P.n = n < MAX_COUNTERS ? n : MAX_COUNTERS;
    for (size_t i = 0; i < P.n; i++)
        P.def[i] = &k_counters[counters[i]];
    P.generation++;
    return mlprof__hw_observer_on(&P.observer, "counters", sizeof(span_counts), on_begin, on_end);
}

void mlprof__perf_span_stop(void) { mlprof__hw_observer_off(&P.observer); }

void mlprof__perf_after_fork(void)
{
    /* The forking thread's descriptors count the parent's thread: a new
     * generation makes it close them and open its own at its next span. */
    P.generation++;
}

/* ------------------------------------------------- the whole process */

#define PROC_MAX_FDS 1024

struct mlprof__perf_proc {
    int counter;
    size_t n;
    int fd[]; /* one per thread that existed at the open; each inherits */
};

mlprof__perf_proc *mlprof__perf_proc_open(int counter)
{
    char what[64];
    snprintf(what, sizeof what, "%s (sampler)", k_counters[counter].name);
    DIR *dir = opendir("/proc/self/task");
    if (!dir) {
        mlprof__hw_unavailable(what, "cannot list this process's threads in /proc/self/task");
        return NULL;
    }
    size_t cap = 16;
    mlprof__perf_proc *p = mlprof__calloc(1, sizeof *p + cap * sizeof(int));
    int err = 0;
    size_t skipped = 0;
    struct dirent *e;
    while (p && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (p->n == PROC_MAX_FDS) {
            skipped++;
            continue;
        }
        if (p->n == cap) {
            mlprof__perf_proc *bigger = mlprof__realloc(p, sizeof *p + 2 * cap * sizeof(int));
            if (!bigger)
                break;
            p = bigger;
            cap *= 2;
        }
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = k_counters[counter].type;
        a.config = k_counters[counter].config;
        a.exclude_kernel = !k_counters[counter].in_kernel;
        a.exclude_hv = 1;
        a.inherit = 1; /* and the threads it starts */
        int fd = (int)syscall(SYS_perf_event_open, &a, atoi(e->d_name), -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd >= 0)
            p->fd[p->n++] = fd;
        else if (errno != ESRCH) /* a thread that has just ended does not matter */
            err = errno;
    }
    closedir(dir);
    if (p && p->n && !err && !skipped) {
        p->counter = counter;
        return p;
    }
    if (p && p->n) { /* some threads only: count them, and say so */
        char why_[200];
        snprintf(why_, sizeof why_, "counted on %zu of this process's threads only (%s)", p->n,
                 skipped ? "too many threads" : mlprof__perf_why(err));
        mlprof__hw_unavailable(what, why_);
        p->counter = counter;
        return p;
    }
    mlprof__hw_unavailable(what, p ? mlprof__perf_why(err ? err : ESRCH) : "out of memory");
    mlprof__perf_proc_close(p);
    return NULL;
}

uint64_t mlprof__perf_proc_read(const mlprof__perf_proc *p)
{
    uint64_t sum = 0, v;
    for (size_t i = 0; i < p->n; i++) {
        if (read(p->fd[i], &v, sizeof v) == (ssize_t)sizeof v)
            sum += v;
    }
    return sum;
}

void mlprof__perf_proc_close(mlprof__perf_proc *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        close(p->fd[i]);
    mlprof__free(p);
}

/* The sampler's series of one counter: its rate per second ("instructions/s"),
 * task-clock as the number of CPUs kept busy. */
typedef struct perf_series {
    mlprof__perf_proc *proc;
    mlprof__rate rate;
} perf_series;

static void *perf_series_open(mlprof_domain *d, const void *arg)
{
    int counter = *(const int *)arg;
    perf_series *s = mlprof__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->proc = mlprof__perf_proc_open(counter);
    if (!s->proc) {
        mlprof__free(s);
        return NULL;
    }
    const counter_def *c = &k_counters[counter];
    int busy = c->type == PERF_TYPE_SOFTWARE && c->config == PERF_COUNT_SW_TASK_CLOCK; /* ns per ns */
    char name[64];
    snprintf(name, sizeof name, busy ? "%s (CPUs)" : "%s/s", c->name);
    mlprof__rate_start(&s->rate, d, name, busy ? 1e-9 : 1, 0, mlprof__perf_proc_read(s->proc));
    return s;
}

static void perf_series_sample(void *state, uint64_t now_ns)
{
    perf_series *s = state;
    (void)now_ns;
    mlprof__rate_put(&s->rate, mlprof__perf_proc_read(s->proc));
}

static void perf_series_close(void *state, int after_fork)
{
    perf_series *s = state;
    mlprof__rate_end(&s->rate, after_fork);
    mlprof__perf_proc_close(s->proc);
    mlprof__free(s);
}

const mlprof__source mlprof__perf_source = {"perf", perf_series_open, perf_series_sample, perf_series_close};
