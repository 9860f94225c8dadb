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
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../record/record.h"
#include "hw.h"

#define MAX_COUNTERS 8

typedef struct counter_def {
    const char *name;
    uint32_t type;
    uint64_t config;
} counter_def;

static const counter_def k_counters[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
};
#define NDEFS (sizeof k_counters / sizeof k_counters[0])
_Static_assert(NDEFS == MLPROF__HW_KNOWN, "hw.h counts the counters");

int mlprof__hw_index(const char *key, size_t len)
{
    for (size_t i = 0; i < NDEFS; i++) {
        /* strncmp stops at the name's end, so name[len] is inside it when it matched */
        if (strncmp(k_counters[i].name, key, len) == 0 && k_counters[i].name[len] == '\0')
            return (int)i;
    }
    return -1;
}

const char *mlprof__hw_name(int index)
{
    return index >= 0 && (size_t)index < NDEFS ? k_counters[index].name : "";
}

/* The counters of this run, and what became of opening them. */
static struct {
    const counter_def *def[MAX_COUNTERS];
    size_t n;
    int observer;               /* its id, or -1 */
    int failed[MAX_COUNTERS];   /* atomic: the errno of the first failure, or 0 */
    int said[MAX_COUNTERS];     /* atomic: the failure was logged */
    unsigned generation;        /* bumped at each start: threads reopen their counters */
} P = {.observer = -1};

static const counter_def *find_counter(const char *name, size_t len)
{
    int i = mlprof__hw_index(name, len);
    return i < 0 ? NULL : &k_counters[i];
}

static int mlprof__hw_parse(const char *spec, const counter_def **out, size_t *n, char *err, size_t len)
{
    *n = 0;
    for (const char *p = spec; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (!k)
            break;
        const counter_def *d = find_counter(p, k);
        if (!d) {
            snprintf(err, len, "unknown counter \"%.*s\" (one of cycles, instructions, cache-references, "
                               "cache-misses, branches, branch-misses, ref-cycles, task-clock, page-faults, "
                               "minor-faults, major-faults, context-switches, cpu-migrations)", (int)k, p);
            return -1;
        }
        for (size_t i = 0; i < *n; i++) {
            if (out[i] == d) {
                snprintf(err, len, "counter \"%s\" named twice", d->name);
                return -1;
            }
        }
        if (*n == MAX_COUNTERS) {
            snprintf(err, len, "more than %d counters", MAX_COUNTERS);
            return -1;
        }
        out[(*n)++] = d;
        p += k;
    }
    return 0;
}

/* Parses "cycles,instructions"; an unknown or repeated name is an error. */
int mlprof__hw_check(const char *spec, char *err, size_t len)
{
    const counter_def *defs[MAX_COUNTERS];
    size_t n;
    return mlprof__hw_parse(spec, defs, &n, err, len);
}

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

static void close_counters(void *arg)
{
    thread_counters *tc = arg;
    for (size_t i = 0; i < MAX_COUNTERS; i++) {
        if (tc->fd[i] >= 0)
            close(tc->fd[i]);
    }
    mlprof__free(tc);
}

static void make_key(void) { pthread_key_create(&g_close_key, close_counters); }

static const char *why(int err)
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
    a.exclude_kernel = 1; /* works at perf_event_paranoid 2; what user code costs */
    a.exclude_hv = 1;
    a.read_format = group == -2 ? 0 : PERF_FORMAT_GROUP;
    return (int)syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1, group == -2 ? -1 : group,
                        PERF_FLAG_FD_CLOEXEC);
}

static thread_counters *thread_open(void)
{
    thread_counters *tc = t_counters;
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
        int err = errno;
        int none = 0;
        __atomic_compare_exchange_n(&P.failed[i], &none, err, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        if (!__atomic_exchange_n(&P.said[i], 1, __ATOMIC_RELAXED))
            mlprof__log(MLPROF_LOG_WARN, "counter %s cannot be opened: %s; the other counters go on",
                        P.def[i]->name, why(err));
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
    if (!tc || !tc->opened || tc->generation != P.generation)
        return;
    uint64_t now[MAX_COUNTERS];
    read_all(tc, now);
    const span_counts *c = data;
    for (size_t i = 0; i < P.n; i++) {
        if (tc->fd[i] >= 0)
            mlprof_arg_int(P.def[i]->name, (int64_t)(now[i] - c->at_begin[i]));
    }
}

int mlprof__hw_start(void)
{
    if (P.observer >= 0 || !mlprof__g.cfg.counters[0])
        return MLPROF_OK;
    char err[400];
    if (mlprof__hw_parse(mlprof__g.cfg.counters, P.def, &P.n, err, sizeof err) != 0)
        return mlprof__fail(MLPROF_EVALUE, "counters: %s", err);
    memset(P.failed, 0, sizeof P.failed);
    memset(P.said, 0, sizeof P.said);
    P.generation++;
    mlprof_observer o = {sizeof o, "counters", sizeof(span_counts), NULL, on_begin, NULL, on_end};
    int id = mlprof__observer_register_locked(&o);
    if (id < 0)
        return id;
    P.observer = id;
    return MLPROF_OK;
}

void mlprof__hw_stop(void)
{
    if (P.observer < 0)
        return;
    mlprof__observer_unregister_locked(P.observer);
    P.observer = -1;
}

void mlprof__hw_other_data(mlprof__sb *out)
{
    if (!P.n)
        return;
    mlprof__sb_puts(out, ",\"counters\":[");
    for (size_t i = 0; i < P.n; i++)
        mlprof__sb_printf(out, "%s\"%s\"", i ? "," : "", P.def[i]->name);
    mlprof__sb_puts(out, "],\"counters_unavailable\":{");
    int first = 1;
    for (size_t i = 0; i < P.n; i++) {
        int err = __atomic_load_n(&P.failed[i], __ATOMIC_RELAXED);
        if (!err)
            continue;
        mlprof__sb_printf(out, "%s\"%s\":", first ? "" : ",", P.def[i]->name);
        const char *w = why(err);
        mlprof__sb_json_str(out, w, strlen(w));
        first = 0;
    }
    mlprof__sb_putc(out, '}');
}
