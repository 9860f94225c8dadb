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
    /* held by the thread through opening its sources, each round and the
     * closing, never while it waits: a fork waits for it (its sources read
     * files and allocate, which the forked child must not find half done) */
    pthread_mutex_t work;
    pthread_cond_t wake;
    int cond_ready;
    pthread_t thread;
    int running; /* a thread was started and not yet joined */
    int stop;
    uint64_t period_ns;
    size_t n;
    running_source s[MAX_SOURCES];
    uint64_t samples, skipped;
    int active; /* recording is on (the module's resume, until its pause) */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_MUTEX_INITIALIZER};

static void close_sources(int after_fork)
{
    for (size_t i = 0; i < S.n; i++) {
        if (S.s[i].state)
            S.s[i].src->close(S.s[i].state, after_fork);
        S.s[i].state = NULL;
    }
}

/* The samples go into the trace now: running, not paused. */
static int recording(void)
{
    return __atomic_load_n(&mlprof__g.state, __ATOMIC_ACQUIRE) == MLPROF_STATE_RUN &&
           !__atomic_load_n(&mlprof__g.paused, __ATOMIC_ACQUIRE);
}

static void *sampler_main(void *arg)
{
    (void)arg;
    mlprof__busy = 1; /* a thread of mlprof's own: mlprof run's hooks leave it alone */
    pthread_mutex_lock(&S.work); /* first: naming the thread allocates */
    mlprof_thread_set_name("mlprof sampler");
    pthread_setname_np(pthread_self(), "mlprof sampler"); /* and the call-stack samplers */
    mlprof_domain *d = mlprof_domain_create("sampler");
    size_t open = 0;
    for (size_t i = 0; i < S.n; i++) {
        S.s[i].state = S.s[i].src->open(d, &S.s[i].arg);
        open += S.s[i].state != NULL;
    }
    pthread_mutex_unlock(&S.work);
    pthread_mutex_lock(&S.lock);
    uint64_t next = mlprof__clock_monotonic_ns() + S.period_ns;
    while (!S.stop && open) {
        /* The thread starts before the state says running: rounds begin
         * once recording is on (the module's resume), so that none is
         * half in the trace, and the first comes a period after. */
        if (!S.active) {
            pthread_cond_wait(&S.wake, &S.lock);
            next = mlprof__clock_monotonic_ns() + S.period_ns;
            continue;
        }
        struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
        if (pthread_cond_timedwait(&S.wake, &S.lock, &ts) == 0 || S.stop || !S.active)
            continue; /* woken: asked to stop or to wait (or spuriously) */
        pthread_mutex_unlock(&S.lock);
        pthread_mutex_lock(&S.work);
        /* a final dump and the exit stop this thread before recording
         * stops; a stop or pause the program asks for while a round is
         * under way may leave that round half in the trace */
        int counted = recording();
        uint64_t now = mlprof__clock_monotonic_ns();
        for (size_t i = 0; i < S.n; i++) {
            if (S.s[i].state)
                S.s[i].src->sample(S.s[i].state, now);
        }
        pthread_mutex_unlock(&S.work);
        pthread_mutex_lock(&S.lock);
        S.samples += (uint64_t)counted;
        next += S.period_ns;
        if (now > next) { /* a period or more late: start again from now */
            S.skipped += (now - next) / S.period_ns + 1;
            next = now + S.period_ns;
        }
    }
    uint64_t late = S.skipped;
    pthread_mutex_unlock(&S.lock);
    pthread_mutex_lock(&S.work);
    close_sources(0);
    pthread_mutex_unlock(&S.work);
    if (late)
        mlprof__log(MLPROF_LOG_WARN, "sampler: %llu samples were not taken on time and were skipped "
                                     "(sampler_period %g s is too short for its sources)",
                    (unsigned long long)late, (double)S.period_ns * 1e-9);
    return NULL;
}

/* The sampler key's items, as sources. */
static void add_sources(const mlprof__hw_item *items, size_t n)
{
    static const mlprof__source *const by_kind[] = {&mlprof__perf_source, &mlprof__rss_source, NULL,
                                                    &mlprof__cpu_source, &mlprof__rapl_source,
                                                    &mlprof__nvml_source};
    S.n = 0;
    for (size_t i = 0; i < n && S.n < MAX_SOURCES; i++) {
        if (!by_kind[items[i].kind])
            continue;
        running_source *r = &S.s[S.n++];
        r->src = by_kind[items[i].kind];
        r->arg = items[i].perf;
        r->state = NULL;
    }
}

/* Starts the thread over the sources in S. */
static int launch(void)
{
    if (!S.cond_ready) {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&S.wake, &attr);
        pthread_condattr_destroy(&attr);
        S.cond_ready = 1;
    }
    S.stop = 0;
    int rc = mlprof__thread_start(&S.thread, 0, sampler_main, NULL);
    if (rc != 0)
        return mlprof__fail(MLPROF_EIO, "cannot start the sampler thread: %s", strerror(rc));
    S.running = 1;
    return MLPROF_OK;
}

int mlprof__sampler_start(const mlprof__hw_item *items, size_t n)
{
    pthread_mutex_lock(&S.lock);
    int busy = S.running;
    if (!busy)
        S.period_ns = S.samples = S.skipped = 0; /* what otherData says of this run */
    pthread_mutex_unlock(&S.lock);
    if (busy || !n)
        return MLPROF_OK;
    add_sources(items, n);
    S.period_ns = (uint64_t)(mlprof__g.cfg.sampler_period * 1e9);
    S.active = 0; /* a run starts: recording comes on after this (the module's resume) */
    return launch();
}

void mlprof__sampler_resume(void)
{
    pthread_mutex_lock(&S.lock);
    S.active = 1;
    if (S.running)
        pthread_cond_signal(&S.wake);
    pthread_mutex_unlock(&S.lock);
}

void mlprof__sampler_pause(void)
{
    pthread_mutex_lock(&S.lock);
    S.active = 0;
    pthread_mutex_unlock(&S.lock);
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

static int g_fork_gated; /* fork_prepare took S.work (ctl_lock held from there to fork_parent) */
void mlprof__sampler_fork_prepare(void)
{
    g_fork_gated = mlprof__fork_gate(&S.work, &S.thread, "the sampler thread");
}
void mlprof__sampler_fork_parent(void)
{
    if (g_fork_gated)
        pthread_mutex_unlock(&S.work);
    g_fork_gated = 0;
}

void mlprof__sampler_after_fork(int running)
{
    pthread_mutex_init(&S.lock, NULL);
    pthread_mutex_init(&S.work, NULL); /* taken by the fork (for a thread the child has not) */
    S.cond_ready = 0; /* made again at the next start */
    if (!S.running)
        return;
    /* the thread stayed in the parent: what it had open is let go of here */
    S.running = 0;
    S.active = running;
    close_sources(1);
    if (running && launch() != MLPROF_OK)
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
    mlprof__rate *r = mlprof__calloc(1, sizeof *r);
    if (r) /* CPU nanoseconds per nanosecond, in percent */
        mlprof__rate_start(r, d, "cpu (%)", 100e-9, 0, process_cpu_ns());
    return r;
}

static void cpu_sample(void *state, uint64_t now_ns)
{
    (void)now_ns;
    mlprof__rate_put(state, process_cpu_ns());
}

static void cpu_close(void *state, int after_fork)
{
    mlprof__rate_end(state, after_fork);
    mlprof__free(state);
}

const mlprof__source mlprof__cpu_source = {"cpu", cpu_open, cpu_sample, cpu_close};
