/* test_threads.c - several threads each record a known number of events,
 * while the main thread drains concurrently; threads that exit keep their
 * events. check_trace.py counts them exactly in the trace. */
#include <pthread.h>

#include "testutil.h"

#define NTHREADS 4
#define PAIRS 5000

static mlprof_domain *d;
static mlprof_span *work;
static int running = NTHREADS;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "worker-%d", id);
    mlprof_thread_set_name(name);
    for (int i = 0; i < PAIRS; i++) {
        mlprof_begin(work);
        mlprof_arg_int("thread", id);
        mlprof_end(work);
    }
    __atomic_sub_fetch(&running, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("threads.json")));
    d = mlprof_domain_create("threads");
    work = mlprof_task_create(d, "work");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_thread_set_name("main-thread");
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    /* drain while they record: the collector and the writers run at once */
    while (__atomic_load_n(&running, __ATOMIC_ACQUIRE) > 0) {
        char *s = NULL;
        CHECK_OK(mlprof_dumps(&s, MLPROF_FORMAT_JSON, MLPROF_SORT_COUNT, 0, 0));
        free(s);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    /* every thread has exited: their events must all still be there */
    char *s = NULL;
    CHECK_OK(mlprof_dumps(&s, MLPROF_FORMAT_JSON, MLPROF_SORT_COUNT, 0, 0));
    char want[64];
    snprintf(want, sizeof want, "{\"name\":\"work\",\"count\":%d,", NTHREADS * PAIRS);
    CHECK(s && strstr(s, want), "stats count: %s", s);
    free(s);
    CHECK(mlprof_dropped_events() == 0, "no drops");
    CHECK_OK(mlprof_dump(1));
    return tu_finish("test_threads");
}
