/*
 * produce.c - the producer queue, the ext tracks, the registered wake-up and
 * drain, and the output paths (see produce.h). It sits below the collector
 * and the modules: both call it, it calls neither.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "produce.h"
#include "record.h"

#define SHARED_MAX 1048576   /* events queued between two drains, at most */
#define TRACKS_MAX 256
#define TRACK_TID0 0x40000000 /* synthetic thread ids of the ext tracks */

static struct {
    pthread_mutex_t lock;
    mlprof__produced shared;
    char *track[TRACKS_MAX]; /* names; track i has tid TRACK_TID0 + i */
    size_t ntracks;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .shared = {.max = SHARED_MAX}};

static void (*g_wake)(void);
static void (*g_drain)(void);
static int (*g_crash)(int sig);

void mlprof__produced_init(mlprof__produced *p) { memset(p, 0, sizeof *p); }

static void event_free(mlprof__event *e)
{
    mlprof__free(e->domain);
    mlprof__free(e->name);
    mlprof__free(e->args);
}

void mlprof__produced_free(mlprof__produced *p)
{
    for (size_t i = 0; i < p->n; i++)
        event_free(&p->q[i]);
    mlprof__free(p->q);
    p->q = NULL;
    p->n = p->cap = 0;
}

/* ----------------------------------------------------------- tracks */

int mlprof__produce_track(const char *name)
{
    pthread_mutex_lock(&P.lock);
    size_t i;
    for (i = 0; i < P.ntracks && strcmp(P.track[i], name) != 0; i++) {
    }
    int tid = -1;
    if (i < P.ntracks)
        tid = TRACK_TID0 + (int)i;
    else if (P.ntracks < TRACKS_MAX && (P.track[P.ntracks] = mlprof__strdup(name)) != NULL)
        tid = TRACK_TID0 + (int)P.ntracks++;
    pthread_mutex_unlock(&P.lock);
    return tid;
}

void mlprof__produce_tracks(void (*fn)(void *ctx, int tid, const char *name, uint32_t index), void *ctx)
{
    pthread_mutex_lock(&P.lock);
    for (size_t i = 0; i < P.ntracks; i++)
        fn(ctx, TRACK_TID0 + (int)i, P.track[i], (uint32_t)i);
    pthread_mutex_unlock(&P.lock);
}

/* ------------------------------------------------------------ queue */

/* Queues n events (copied); all or none. The shared queue's lock held. */
static int push(mlprof__produced *p, const mlprof__event *ev, size_t n)
{
    while (p->n + n > p->cap && (p->max == 0 || p->cap < p->max)) {
        mlprof__event *q = mlprof__grow(p->q, &p->cap, p->cap, sizeof *q, 256);
        if (!q)
            break;
        p->q = q;
    }
    if (p->n + n > p->cap) {
        p->dropped += n;
        return MLPROF_ELIMIT;
    }
    size_t done;
    for (done = 0; done < n; done++) {
        mlprof__event *e = &p->q[p->n + done];
        *e = ev[done];
        int has_args = ev[done].args && *ev[done].args;
        e->domain = mlprof__strdup(ev[done].domain);
        e->name = mlprof__strdup(ev[done].name);
        e->args = has_args ? mlprof__strdup(ev[done].args) : NULL;
        if (!e->domain || !e->name || (has_args && !e->args)) {
            event_free(e);
            break;
        }
    }
    if (done < n) {
        for (size_t i = 0; i < done; i++)
            event_free(&p->q[p->n + i]);
        p->dropped += n;
        return MLPROF_ENOMEM;
    }
    p->n += n;
    return MLPROF_OK;
}

static int produce(mlprof__produced *p, const mlprof__event *ev, size_t n)
{
    if (p)
        return push(p, ev, n);
    pthread_mutex_lock(&P.lock);
    int rc = push(&P.shared, ev, n);
    int poke = P.shared.n > SHARED_MAX / 2 && !P.shared.poked; /* a drain soon, before it is full */
    if (poke)
        P.shared.poked = 1;
    pthread_mutex_unlock(&P.lock);
    if (poke)
        mlprof__wake();
    return rc;
}

int mlprof__produce_span(mlprof__produced *p, int tid, const char *domain, const char *name, uint64_t begin_ns,
                         uint64_t end_ns, const char *args)
{
    mlprof__event e = {.type = MLPROF__EV_SPAN, .tid = tid, .begin_ns = begin_ns,
                       .end_ns = end_ns > begin_ns ? end_ns : begin_ns, .domain = (char *)domain,
                       .name = (char *)name, .args = (char *)args};
    return produce(p, &e, 1);
}

int mlprof__produce_flow(mlprof__produced *p, uint64_t id, int from_tid, uint64_t from_ns, int to_tid,
                         uint64_t to_ns)
{
    mlprof__event e[2] = {{.type = MLPROF__EV_FLOW_START, .tid = from_tid, .begin_ns = from_ns, .end_ns = from_ns,
                           .id = id, .domain = "gpu_launch", .name = "launch"},
                          {.type = MLPROF__EV_FLOW_END, .tid = to_tid, .begin_ns = to_ns, .end_ns = to_ns,
                           .id = id, .domain = "gpu_launch", .name = "launch"}};
    return produce(p, e, 2);
}

int mlprof__produce_flow_end(mlprof__produced *p, char ph, uint64_t id, int tid, uint64_t ns, const char *domain,
                             const char *name)
{
    mlprof__event e = {.type = ph == 's' ? MLPROF__EV_FLOW_START : MLPROF__EV_FLOW_END, .tid = tid,
                       .begin_ns = ns, .end_ns = ns, .id = id, .domain = (char *)domain, .name = (char *)name};
    return produce(p, &e, 1);
}

int mlprof__produce_instant(mlprof__produced *p, int tid, int scope, const char *domain, const char *name,
                            uint64_t ts_ns, const char *args)
{
    mlprof__event e = {.type = MLPROF__EV_INSTANT, .scope = (char)scope, .tid = tid, .begin_ns = ts_ns,
                       .end_ns = ts_ns, .domain = (char *)domain, .name = (char *)name, .args = (char *)args};
    return produce(p, &e, 1);
}

int mlprof__produce_counter(mlprof__produced *p, int tid, const char *domain, const char *name, uint64_t ts_ns,
                            int is_int, int64_t ivalue, double value)
{
    mlprof__event e = {.type = MLPROF__EV_COUNTER, .is_int = (char)(is_int != 0), .tid = tid, .begin_ns = ts_ns,
                       .end_ns = ts_ns, .ivalue = ivalue, .value = is_int ? (double)ivalue : value,
                       .domain = (char *)domain, .name = (char *)name};
    return produce(p, &e, 1);
}

void mlprof__produce_take(mlprof__produced *out)
{
    pthread_mutex_lock(&P.lock);
    *out = P.shared;
    out->max = 0;
    out->dropped = 0;
    P.shared.q = NULL;
    P.shared.n = P.shared.cap = 0;
    P.shared.poked = 0;
    pthread_mutex_unlock(&P.lock);
}

uint64_t mlprof__produce_dropped(void)
{
    pthread_mutex_lock(&P.lock);
    uint64_t n = P.shared.dropped;
    pthread_mutex_unlock(&P.lock);
    return n;
}

void mlprof__produce_forget(int after_fork)
{
    if (after_fork)
        pthread_mutex_init(&P.lock, NULL);
    mlprof__produced q;
    mlprof__produce_take(&q);
    mlprof__produced_free(&q);
    if (after_fork) {
        pthread_mutex_lock(&P.lock);
        P.shared.dropped = 0;
        pthread_mutex_unlock(&P.lock);
    }
}

/* --------------------------------------------------- wake-up and drain */

void mlprof__set_waker(void (*wake)(void)) { __atomic_store_n(&g_wake, wake, __ATOMIC_RELEASE); }
void mlprof__set_drainer(void (*drain)(void)) { __atomic_store_n(&g_drain, drain, __ATOMIC_RELEASE); }

void mlprof__wake(void)
{
    void (*wake)(void) = __atomic_load_n(&g_wake, __ATOMIC_ACQUIRE);
    if (wake)
        wake();
}

void mlprof__drain_now(void)
{
    void (*drain)(void) = __atomic_load_n(&g_drain, __ATOMIC_ACQUIRE);
    if (drain)
        drain();
}

void mlprof__set_crash_dumper(int (*dump)(int sig)) { __atomic_store_n(&g_crash, dump, __ATOMIC_RELEASE); }

int mlprof__crash_dump(int sig)
{
    int (*dump)(int) = __atomic_load_n(&g_crash, __ATOMIC_ACQUIRE);
    return dump ? dump(sig) : MLPROF_ESTATE;
}

/* ------------------------------------------------------------ paths */

/* Where the extension of a file name starts (".json.gz" whole), or n. */
static size_t extension_at(const char *path, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    static const char gz[] = ".json.gz";
    size_t k = sizeof gz - 1;
    if (n >= k && (size_t)(path + n - base) > k && strcmp(path + n - k, gz) == 0)
        return n - k;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? (size_t)(dot - path) : n;
}

/* Puts text into sb at byte at. */
static void sb_insert(mlprof__sb *sb, size_t at, const char *text)
{
    mlprof__sb out;
    mlprof__sb_init(&out);
    mlprof__sb_put(&out, sb->data, at);
    mlprof__sb_puts(&out, text);
    mlprof__sb_put(&out, sb->data + at, sb->len - at);
    if (out.failed) {
        sb->failed = 1;
        mlprof__sb_free(&out);
        return;
    }
    mlprof__sb_free(sb);
    *sb = out;
}

/* name with its %p, %c, %r, %h and %% expanded and, for a trace, the rank's
 * suffix (fork_suffix), into sb. Sets *had_pid and *had_cycle when the name
 * held them. */
static void expand_base(const char *name, int fork_suffix, int cycle, mlprof__sb *sb, int *had_pid,
                        int *had_cycle)
{
    const mlprof__dist *d = mlprof__dist_get();
    int had_rank = 0;
    *had_pid = *had_cycle = 0;
    for (const char *p = name; *p; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            mlprof__sb_printf(sb, "%d", (int)mlprof__g.pid);
            *had_pid = 1;
            p++;
        } else if (p[0] == '%' && p[1] == 'c') { /* the schedule's cycle (steps.c) */
            mlprof__sb_printf(sb, "%d", cycle < 0 ? 0 : cycle);
            *had_cycle = 1;
            p++;
        } else if (p[0] == '%' && p[1] == 'r') {
            char rank[16];
            mlprof__dist_rank_str(d, rank, sizeof rank);
            mlprof__sb_puts(sb, rank);
            had_rank = 1;
            p++;
        } else if (p[0] == '%' && p[1] == 'h') {
            for (const char *h = d->host; *h; h++) /* a host name never makes a folder */
                mlprof__sb_putc(sb, *h == '/' ? '_' : *h);
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            mlprof__sb_putc(sb, '%');
            p++;
        } else {
            mlprof__sb_putc(sb, *p);
        }
    }
    if (fork_suffix && !had_rank && mlprof__dist_name_ranks(d) && sb->data) {
        /* the ranks of a job never overwrite each other's files: name.rankR.ext */
        char tail[32];
        snprintf(tail, sizeof tail, ".rank%d", d->rank);
        sb_insert(sb, extension_at(sb->data, sb->len), tail);
    }
}

int mlprof__trace_base_path(char *buf, size_t len)
{
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    int had_pid, had_cycle, many;
    expand_base(mlprof__g.cfg.filename, 1, mlprof__steps_cycle(&many), &sb, &had_pid, &had_cycle);
    snprintf(buf, len, "%s", sb.data && !sb.failed ? sb.data : mlprof__g.cfg.filename);
    mlprof__sb_free(&sb);
    return had_pid;
}

/* This process writes its files under NAME.PID: a forked child, or one
 * whose trace path another process of the run took (children.c). */
static int pid_suffix(void)
{
    if (mlprof__g.forked_child)
        return 1;
    char base[MLPROF__PATH_MAX];
    mlprof__trace_base_path(base, sizeof base);
    return mlprof__children_name_taken(base);
}

void mlprof__expand_path(const char *name, int fork_suffix, char *buf, size_t len)
{
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    int had_pid, had_cycle, many;
    int cycle = mlprof__steps_cycle(&many);
    expand_base(name, fork_suffix, cycle, &sb, &had_pid, &had_cycle);
    if (cycle >= 0 && many && !had_cycle && sb.data) {
        /* the cycles of a schedule must not overwrite each other: name.cycleN.ext */
        size_t stem = extension_at(sb.data, sb.len);
        char tail[64];
        snprintf(tail, sizeof tail, ".cycle%d", cycle);
        sb_insert(&sb, stem, tail);
    }
    if (fork_suffix && !had_pid && sb.data && pid_suffix()) {
        /* a forked child must not overwrite its parent's trace, nor a process
         * started with another's environment that one's: name.PID.ext */
        const char *base = strrchr(sb.data, '/');
        base = base ? base + 1 : sb.data;
        const char *dot = strrchr(base, '.');
        size_t stem = dot && dot != base ? (size_t)(dot - sb.data) : sb.len;
        snprintf(buf, len, "%.*s.%d%s", (int)stem, sb.data, (int)mlprof__g.pid, sb.data + stem);
    } else {
        snprintf(buf, len, "%s", sb.data ? sb.data : name);
    }
    mlprof__sb_free(&sb);
}

void mlprof__process_name(char *buf, size_t len)
{
    extern char *program_invocation_short_name; /* glibc */
    if (mlprof__g.process_name[0])
        snprintf(buf, len, "%s", mlprof__g.process_name);
    else if (program_invocation_short_name && program_invocation_short_name[0])
        snprintf(buf, len, "%s", program_invocation_short_name);
    else
        snprintf(buf, len, "process %d", (int)mlprof__g.pid);
}
