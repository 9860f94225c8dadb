/* test_signal_record.c - recording from a signal handler on the thread it
 * interrupts (what a CPU sampler does).
 *
 * A worker records spans in a loop, each with an argument (its index) and a
 * run-time-named span inside it, while a timer aimed at that thread fires
 * every 20 microseconds, until the handler ran a few thousand times; the handler records a run-time-named mark and a
 * counter sample. Either may interrupt the other's record between its
 * reservation and its publication. The trace must hold every one of the
 * worker's spans with the right index, no corrupt record, and of the
 * handler's events exactly those not counted as dropped (a handler that
 * interrupts a record drops its own, counted). check_trace.py reads the trace
 * and the counts this program writes (signal_record.counts).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* the worker loops until the handler ran CALLS times (or MAX_LOOPS) */
#define CALLS 3000
#define MAX_LOOPS 1000000
#define TIMER_NS 20000 /* faster starves the worker on a loaded machine */

static mlprof_domain *g_dom;
static mlprof_span *g_outer;
static mlprof_counter *g_ticks;
static volatile sig_atomic_t g_calls; /* handler runs, on the worker only */
static volatile sig_atomic_t g_armed;
static int g_loops;

static void on_tick(int sig)
{
    (void)sig;
    if (!g_armed)
        return;
    int saved = errno;
    g_calls++;
    /* two slots of name text and a two-slot record: the longer the record,
     * the more a torn publication would show */
    mlprof_mark_dynamic(g_dom, "tick from the signal handler", MLPROF_SCOPE_THREAD);
    mlprof_counter_set(g_ticks, g_calls);
    errno = saved;
}

static void *worker(void *arg)
{
    (void)arg;
    mlprof_thread_set_name("signalled");
    /* the first event registers the thread: not from the handler */
    mlprof_begin(g_outer);
    mlprof_end(g_outer);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGRTMIN;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) {
        CHECK(0, "timer_create: %s", strerror(errno));
        return NULL;
    }
    struct itimerspec its = {{0, TIMER_NS}, {0, TIMER_NS}};
    g_armed = 1;
    CHECK(timer_settime(timer, 0, &its, NULL) == 0, "timer_settime: %s", strerror(errno));
    int i;
    for (i = 0; i < MAX_LOOPS && g_calls < CALLS; i++) {
        mlprof_begin(g_outer);
        mlprof_arg_int("i", i);
        mlprof_begin_dynamic(g_dom, "inner span with a run-time name");
        mlprof_arg_str("key", "a string value long enough for two slots");
        mlprof_end_dynamic(g_dom);
        mlprof_end(g_outer);
    }
    timer_delete(timer);
    g_armed = 0;
    g_loops = i;
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("signal_record.json")));
    CHECK_OK(mlprof_set_config("buffer_size", "268435456")); /* the worker's records all fit */
    g_dom = mlprof_domain_create("signals");
    g_outer = mlprof_task_create(g_dom, "outer");
    g_ticks = mlprof_counter_create(g_dom, "ticks");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tick;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGRTMIN, &sa, NULL) == 0, "sigaction");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, NULL);
    uint64_t dropped = mlprof_dropped_events();
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    printf("signal_record: %d loops, %d handler calls, %llu events dropped\n", g_loops, (int)g_calls,
           (unsigned long long)dropped);
    CHECK(g_calls > 0, "the timer fired");
    FILE *f = fopen(tu_path("signal_record.counts"), "w");
    CHECK(f != NULL, "counts file");
    if (f) {
        fprintf(f, "%d %d %llu\n", g_loops + 1, (int)g_calls, (unsigned long long)dropped);
        fclose(f);
    }
    return tu_finish("signal_record");
}
