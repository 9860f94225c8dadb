/*
 * test_fork_locks.c - a child forked while other threads create handles
 * (MLPROF_ZONE's mlprof_task_once, domains, counters) can create and record
 * its own: no lock of the library stays held in it. Threads create and
 * destroy handles without pause while the main thread forks children one
 * after another; each child makes a zone's handle, a domain and a counter,
 * records, and exits. A child that has not exited after a generous wait is
 * hung: killed, and counted.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define CHILDREN 200
#define THREADS 2

static int g_stop;
static mlprof_domain *g_domain;

static void *creator(void *arg)
{
    (void)arg;
    unsigned n = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
        mlprof_span *slot = NULL; /* a fresh slot each time: the once-section every time */
        mlprof_span *s = mlprof_task_once(&slot, g_domain, "zone");
        mlprof_span_destroy(s); /* revived by the next create: no growth */
        if (++n % 4 == 0)
            mlprof_domain_create(n % 8 ? "busy" : "busy2");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("fork_locks.json")));
    g_domain = mlprof_domain_create("forks");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, creator, NULL) == 0, "pthread_create");
    int hung = 0, forks = 0;
    for (; forks < CHILDREN && !hung; forks++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            static mlprof_span *zone;
            mlprof_span *s = mlprof_task_once(&zone, g_domain, "child_zone");
            mlprof_domain *d = mlprof_domain_create("child");
            mlprof_counter *c = mlprof_counter_create(d, "child_counter");
            mlprof_begin(s);
            mlprof_counter_add(c, 1);
            mlprof_end(s);
            _exit(s && d && c ? 0 : 1); /* no trace: 200 of them would only cost time */
        }
        CHECK(pid > 0, "fork");
        if (pid > 0 && tu_wait_child(pid, 30) != 0)
            hung++;
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(hung == 0, "a child hung or failed (after %d forks)", forks);
    CHECK_OK(mlprof_dump(1));
    printf("forks=%d hung=%d\n", forks, hung);
    return tu_finish("test_fork_locks");
}
