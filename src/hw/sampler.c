/*
 * sampler.c - the sampler thread: every sampler_period seconds it reads the
 * sources that the sampler key names and records them as counter series in
 * domain "sampler" (written as Chrome counter events, and summed up in the
 * statistics as min, max, average and last). The deadlines are absolute, so
 * the rate does not drift with the time a sample takes; a deadline missed by
 * more than a period is skipped, not made up for with a burst.
 *
 * Also here: the "cpu" source, the process's CPU use in percent of one CPU
 * (user and system time of all its threads, from getrusage).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hw_internal.h"

#define MAX_SOURCES 16

typedef struct running_source {
    const mlprof__source *src;
    int arg;
    void *state;
} running_source;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int cond_ready;
    pthread_t thread;
    int running; /* a thread was started and not yet joined */
    int stop;
    uint64_t period_ns;
    size_t n;
    running_source s[MAX_SOURCES];
    uint64_t samples, skipped;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void close_sources(int after_fork)
{
    for (size_t i = 0; i < S.n; i++) {
        if (S.s[i].state)
            S.s[i].src->close(S.s[i].state, after_fork);
        S.s[i].state = NULL;
    }
}

static void *sampler_main(void *arg)
{
    (void)arg;
    mlprof_thread_set_name("mlprof sampler");
    mlprof_domain *d = mlprof_domain_create("sampler");
    size_t open = 0;
    for (size_t i = 0; i < S.n; i++) {
        S.s[i].state = S.s[i].src->open(d, &S.s[i].arg);
        open += S.s[i].state != NULL;
    }
    pthread_mutex_lock(&S.lock);
    uint64_t next = mlprof__clock_monotonic_ns() + S.period_ns;
    while (!S.stop && open) {
        struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
        if (pthread_cond_timedwait(&S.wake, &S.lock, &ts) == 0 || S.stop)
            continue; /* woken: asked to stop (or spuriously) */
        pthread_mutex_unlock(&S.lock);
        uint64_t now = mlprof__clock_monotonic_ns();
        for (size_t i = 0; i < S.n; i++) {
            if (S.s[i].state)
                S.s[i].src->sample(S.s[i].state, now);
        }
        pthread_mutex_lock(&S.lock);
        S.samples++;
        next += S.period_ns;
        if (now > next) { /* a period or more late: start again from now */
            S.skipped += (now - next) / S.period_ns + 1;
            next = now + S.period_ns;
        }
    }
    uint64_t late = S.skipped;
    pthread_mutex_unlock(&S.lock);
    close_sources(0);
    if (late)
        mlprof__log(MLPROF_LOG_WARN, "sampler: %llu samples were not taken on time and were skipped "
                                     "(sampler_period %g s is too short for its sources)",
                    (unsigned long long)late, (double)S.period_ns * 1e-9);
    return NULL;
}

/* The sampler key's items, as sources. */
static int add_sources(const char *spec)
{
    S.n = 0;
    for (const char *p = spec; *p && S.n < MAX_SOURCES;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t k = strcspn(p, ", ");
        if (!k)
            break;
        running_source *r = &S.s[S.n++];
        r->state = NULL;
        r->arg = mlprof__perf_find(p, k);
        if (r->arg >= 0)
            r->src = &mlprof__perf_source;
        else if (k == 3 && memcmp(p, "cpu", 3) == 0)
            r->src = &mlprof__cpu_source;
        else if (k == 3 && memcmp(p, "rss", 3) == 0)
            r->src = &mlprof__rss_source;
        else if (k == 4 && memcmp(p, "rapl", 4) == 0)
            r->src = &mlprof__rapl_source;
        else if (k == 4 && memcmp(p, "nvml", 4) == 0)
            r->src = &mlprof__nvml_source;
        else /* the key was checked when it was set */
            return mlprof__fail(MLPROF_EVALUE, "sampler: unknown source \"%.*s\"", (int)k, p);
        p += k;
    }
    return MLPROF_OK;
}

int mlprof__sampler_start(void)
{
    const mlprof__config *c = &mlprof__g.cfg;
    pthread_mutex_lock(&S.lock);
    int busy = S.running;
    if (!busy)
        S.period_ns = S.samples = S.skipped = 0; /* what otherData says of this run */
    pthread_mutex_unlock(&S.lock);
    if (busy || !c->sampler[0])
        return MLPROF_OK;
    if (!S.cond_ready) {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&S.wake, &attr);
        pthread_condattr_destroy(&attr);
        S.cond_ready = 1;
    }
    int rc = add_sources(c->sampler);
    if (rc != MLPROF_OK)
        return rc;
    S.period_ns = (uint64_t)(c->sampler_period * 1e9);
    S.stop = 0;
    rc = pthread_create(&S.thread, NULL, sampler_main, NULL);
    if (rc != 0)
        return mlprof__fail(MLPROF_EIO, "cannot start the sampler thread: %s", strerror(rc));
    S.running = 1;
    return MLPROF_OK;
}

void mlprof__sampler_stop(void)
{
    pthread_mutex_lock(&S.lock);
    if (S.running) {
        S.stop = 1;
        pthread_cond_signal(&S.wake);
    }
    pthread_mutex_unlock(&S.lock);
}

void mlprof__sampler_join(void)
{
    pthread_mutex_lock(&S.lock);
    int join = S.running && S.stop;
    pthread_t th = S.thread;
    if (join)
        S.running = 0;
    pthread_mutex_unlock(&S.lock);
    if (join)
        pthread_join(th, NULL);
}

void mlprof__sampler_after_fork(int running)
{
    pthread_mutex_init(&S.lock, NULL);
    S.cond_ready = 0; /* made again at the next start */
    if (!S.running)
        return;
    /* the thread stayed in the parent: what it had open is let go of here */
    S.running = 0;
    close_sources(1);
    if (running && mlprof__sampler_start() != MLPROF_OK)
        mlprof__log(MLPROF_LOG_ERROR, "sampler in the forked child: %s", mlprof_last_error());
}

void mlprof__sampler_other_data(mlprof__sb *out)
{
    pthread_mutex_lock(&S.lock);
    if (S.period_ns)
        mlprof__sb_printf(out, ",\"sampler_period_s\":%g,\"sampler_samples\":%llu,\"sampler_late\":%llu",
                          (double)S.period_ns * 1e-9, (unsigned long long)S.samples,
                          (unsigned long long)S.skipped);
    pthread_mutex_unlock(&S.lock);
}

/* ------------------------------------------------------------- cpu */

typedef struct cpu_series {
    mlprof_counter *counter;
    uint64_t last_cpu_ns, last_ns;
} cpu_series;

static uint64_t process_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

static void *cpu_open(mlprof_domain *d, const void *arg)
{
    (void)arg;
    cpu_series *s = mlprof__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->counter = mlprof_counter_create(d, "cpu (%)");
    s->last_cpu_ns = process_cpu_ns();
    s->last_ns = mlprof__clock_monotonic_ns();
    return s;
}

static void cpu_sample(void *state, uint64_t now_ns)
{
    cpu_series *s = state;
    uint64_t cpu = process_cpu_ns();
    if (now_ns > s->last_ns && cpu >= s->last_cpu_ns)
        mlprof_counter_set_double(s->counter, 100.0 * (double)(cpu - s->last_cpu_ns) / (double)(now_ns - s->last_ns));
    s->last_cpu_ns = cpu;
    s->last_ns = now_ns;
}

static void cpu_close(void *state, int after_fork)
{
    cpu_series *s = state;
    if (!after_fork)
        mlprof_counter_destroy(s->counter);
    mlprof__free(s);
}

const mlprof__source mlprof__cpu_source = {"cpu", cpu_open, cpu_sample, cpu_close};
