/*
 * test_signal_busy.c - a fatal signal while another thread holds ctl_lock for
 * its own work (as the continuous dump does every few milliseconds): the
 * handler waits for the lock, a bounded time, and writes the trace, instead
 * of giving it up because the lock was taken at that instant. Linked against
 * the static library to hold the lock itself.
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "../src/record/record.h"
#include "testutil.h"

static sem_t g_held;
static volatile sig_atomic_t g_rc = 12345;

/* Holds ctl_lock a while, as the continuous dump holds it to drain or write. */
static void *holder(void *arg)
{
    (void)arg;
    mlprof__ctl_lock();
    sem_post(&g_held);
    struct timespec ms100 = {0, 100000000};
    nanosleep(&ms100, NULL);
    mlprof__ctl_unlock();
    return NULL;
}

static void on_term(int sig)
{
    g_rc = mlprof__dump_on_signal(sig);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    alarm(60); /* a hang is a failure */
    const char *path = tu_path("signal_busy.json");
    remove(path);
    CHECK_OK(mlprof_set_config("filename", path));
    mlprof_span *before = mlprof_task_create(mlprof_domain_create("sig"), "before");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(before);
    mlprof_end(before);

    sem_init(&g_held, 0, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, holder, NULL) == 0, "pthread_create");
    while (sem_wait(&g_held) != 0) {
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    raise(SIGTERM); /* ctl_lock is held by the other thread now */
    pthread_join(th, NULL);
    CHECK(g_rc == MLPROF_OK, "the handler's dump while another thread held the lock: %d", (int)g_rc);
    char *trace = tu_read_file(path);
    CHECK(trace != NULL, "the trace %s is written", path);
    if (trace) {
        CHECK(strstr(trace, "\"before\"") != NULL, "the span before the signal");
        free(trace);
    }
    return tu_finish("test_signal_busy");
}
