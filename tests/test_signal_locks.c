/*
 * test_signal_locks.c - what the library does while another thread holds
 * reg_lock (as one does inside mlprof_domain_create and the other creates):
 * recording with a NULL domain takes no lock, and the fatal-signal handler
 * (what the preload installs) still writes the trace instead of waiting
 * forever. Linked against the static library to hold the lock itself; a
 * deadlock ends the test by SIGALRM, a failure, instead of hanging it.
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include "../src/record/record.h"
#include "testutil.h"

static sem_t g_held, g_release;
static volatile sig_atomic_t g_rc = 12345;

static void *holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mlprof__g.reg_lock);
    sem_post(&g_held);
    while (sem_wait(&g_release) != 0) {
    }
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return NULL;
}

static void on_term(int sig)
{
    g_rc = mlprof__dump_on_signal(sig);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    alarm(60); /* a hang is a failure (on any machine this takes well under a second) */
    const char *path = tu_path("signal_locks.json");
    remove(path);
    CHECK_OK(mlprof_set_config("filename", path));
    mlprof_domain *d = mlprof_domain_create("sig");
    mlprof_span *before = mlprof_task_create(d, "before");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(before);
    mlprof_end(before);
    mlprof_begin_dynamic(NULL, "first"); /* the default domain is made here */
    mlprof_end_dynamic(NULL);

    sem_init(&g_held, 0, 0);
    sem_init(&g_release, 0, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, holder, NULL) == 0, "pthread_create");
    while (sem_wait(&g_held) != 0) {
    }
    /* reg_lock is held from here on: recording must not wait for it */
    mlprof_begin_dynamic(NULL, "while_locked");
    mlprof_mark_dynamic(NULL, "mark_while_locked", MLPROF_SCOPE_THREAD);
    mlprof_end_dynamic(NULL);

    /* a fatal signal now: the trace is written, with the spans above */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    raise(SIGTERM);
    CHECK(g_rc == MLPROF_OK, "the handler's dump: %d", (int)g_rc);
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "recording stopped by the signal");
    sem_post(&g_release);
    pthread_join(th, NULL);

    char *trace = tu_read_file(path);
    CHECK(trace != NULL, "the trace %s is written", path);
    if (trace) {
        CHECK(strstr(trace, "\"before\"") != NULL, "the span before the lock");
        CHECK(strstr(trace, "\"while_locked\"") != NULL, "the NULL-domain span recorded under the lock");
        CHECK(strstr(trace, "\"mark_while_locked\"") != NULL, "the NULL-domain mark");
        free(trace);
    }
    return tu_finish("test_signal_locks");
}
