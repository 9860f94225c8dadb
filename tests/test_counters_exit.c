/*
 * test_counters_exit.c - a span recorded from a thread-specific destructor
 * that runs after the per-span counters' own (their key is older): the
 * thread's counters are gone by then, and the span must neither use their
 * freed state (AddressSanitizer: heap-use-after-free) nor close descriptors
 * that are no longer its. check_trace.py (area "counters_exit") reads the
 * trace: every late span is there, without counts.
 *
 * The order matters: glibc runs the destructors of a thread's keys by key
 * index, and a key takes the lowest free index. The recorder's key must come
 * after the test's (after its destructor the thread records nothing more), the
 * counters' before it: two placeholder keys hold low indexes while the
 * recorder makes its key, and are deleted for the counters' and the test's.
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

#define THREADS 16

static mlprof_span *g_work, *g_late;
static pthread_key_t g_late_key;
static int g_devnull = -1;

static void late(void *arg)
{
    (void)arg;
    mlprof_begin(g_late);
    mlprof_end(g_late);
}

static void *worker(void *arg)
{
    (void)arg;
    mlprof_begin(g_work); /* opens this thread's counters */
    mlprof_end(g_work);
    pthread_setspecific(g_late_key, &g_late_key);
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    pthread_key_t hold[2];
    CHECK(pthread_key_create(&hold[0], NULL) == 0 && pthread_key_create(&hold[1], NULL) == 0, "placeholders");
    CHECK_OK(mlprof_set_config("filename", tu_path("counters_exit.json")));
    mlprof_domain *d = mlprof_domain_create("hw");
    g_work = mlprof_task_create(d, "work");
    g_late = mlprof_task_create(d, "late");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN)); /* no counters yet: the recorder's key only */
    mlprof_begin(g_work);
    mlprof_end(g_work);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    pthread_key_delete(hold[0]);
    pthread_key_delete(hold[1]);
    CHECK_OK(mlprof_set_config("counters", "task-clock,page-faults"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(g_work); /* the counters' key is made here, in the first placeholder's place */
    mlprof_end(g_work);
    CHECK(pthread_key_create(&g_late_key, late) == 0, "pthread_key_create"); /* the second's */
    CHECK(g_late_key == hold[1], "the test's key runs before the recorder's (%u, %u)", (unsigned)g_late_key,
          (unsigned)hold[1]);
    g_devnull = open("/dev/null", O_RDONLY);
    for (int i = 0; i < THREADS; i++) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, worker, NULL) == 0, "pthread_create");
        pthread_join(th, NULL);
    }
    /* a descriptor of the program's, never the counters', stays open */
    CHECK(g_devnull >= 0 && fcntl(g_devnull, F_GETFD) >= 0, "the program's descriptor is open");
    CHECK_OK(mlprof_dump(1));
    printf("threads=%d\n", THREADS);
    return tu_finish("test_counters_exit");
}
