/* test_record_internals.c - the recorder's thread list, the pool's accounting
 * and the collector's guard against garbage, checked from inside (linked with
 * the static library, whose internals record.h describes).
 *
 * 1. Reaping: a thread that exits after every other thread registered sits at
 *    the head of the thread list; a dump must free its record like any other.
 *    Then a thousand threads start and exit, from four spawners, while the main
 *    thread dumps (the head taken while threads are pushed): at the end, no
 *    exited thread is left in the list. Meanwhile a reader checks
 *    mlprof_buffer_usage: never more than the capacity, whole chunks only.
 * 2. After the exit handler: a key destructor that runs after the recorder's
 *    records a span; it is in the trace, and the late record made for it is
 *    freed once the thread is gone.
 * 3. Garbage: records that no recorder writes (unknown kind, a length beyond
 *    any, a handle record without its handle, a counter without its value)
 *    published into a thread's chunk are counted as corrupt and the rest of the
 *    segment skipped: the dump does not crash, and the good spans before them
 *    are in the trace.
 */
#include <pthread.h>
#include <unistd.h>

#include "../src/record/record.h"
#include "testutil.h"

static mlprof_domain *g_dom;
static mlprof_span *g_span;

static void *one_span(void *arg)
{
    (void)arg;
    mlprof_begin(g_span);
    mlprof_end(g_span);
    return NULL;
}

/* Threads in the list that have exited (after a dump has reaped). */
static int exited_in_list(int *total)
{
    int n = 0, all = 0;
    for (mlprof__thread *t = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        all++;
        n += __atomic_load_n(&t->exited, __ATOMIC_ACQUIRE) != 0;
    }
    if (total)
        *total = all;
    return n;
}

static void head_reaped(void)
{
    mlprof_begin(g_span); /* the main thread registers first */
    mlprof_end(g_span);
    pthread_t th;
    pthread_create(&th, NULL, one_span, NULL);
    pthread_join(th, NULL);
    /* the exited thread is the head of the list now */
    CHECK(__atomic_load_n(&mlprof__g.threads->exited, __ATOMIC_ACQUIRE) == 1, "the exited thread is the head");
    CHECK_OK(mlprof_dump(0));
    int total = 0;
    int left = exited_in_list(&total);
    CHECK(left == 0, "%d exited threads still listed after a dump (of %d)", left, total);
}

static int g_stop;
static int g_bad_usage;

#define PER_SPAWNER 250 /* each thread keeps a track in the trace: not too many */
static int g_spawners_left;

static void *spawner(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER_SPAWNER; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, one_span, NULL) == 0)
            pthread_join(th, NULL);
    }
    __atomic_sub_fetch(&g_spawners_left, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *usage_reader(void *arg)
{
    (void)arg;
    size_t chunk = mlprof__pool_chunk_size();
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        uint64_t used = 0, capacity = 0;
        mlprof_buffer_usage(&used, &capacity);
        size_t free_chunks = mlprof__pool_free_count();
        if (used > capacity || (chunk && used % chunk) || free_chunks > mlprof__pool_chunk_count()) {
            if (__atomic_fetch_add(&g_bad_usage, 1, __ATOMIC_RELAXED) < 5)
                fprintf(stderr, "usage: %llu used of %llu, %zu chunks free of %zu\n",
                        (unsigned long long)used, (unsigned long long)capacity, free_chunks,
                        mlprof__pool_chunk_count());
        }
    }
    return NULL;
}

static void churn_reaped(void)
{
    enum { SPAWNERS = 4 };
    pthread_t sp[SPAWNERS], rd;
    pthread_create(&rd, NULL, usage_reader, NULL);
    g_spawners_left = SPAWNERS;
    for (int i = 0; i < SPAWNERS; i++)
        pthread_create(&sp[i], NULL, spawner, NULL);
    int dumps = 0;
    while (__atomic_load_n(&g_spawners_left, __ATOMIC_ACQUIRE) > 0) {
        CHECK_OK(mlprof_dump(0));
        dumps++;
        usleep(500);
    }
    for (int i = 0; i < SPAWNERS; i++)
        pthread_join(sp[i], NULL);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(rd, NULL);
    printf("record_internals: %d threads started and exited during %d dumps\n", SPAWNERS * PER_SPAWNER, dumps);
    CHECK_OK(mlprof_dump(0));
    int total = 0;
    int left = exited_in_list(&total);
    CHECK(left == 0, "%d exited threads still listed after the churn (of %d)", left, total);
    CHECK(g_bad_usage == 0, "%d impossible buffer usage readings", g_bad_usage);
}

/* ------------------------------------------------- after the exit handler */

#define LATE_THREADS 20
static mlprof_span *g_late;
static pthread_key_t g_late_key;

/* A destructor of a key made after the recorder's: it runs after the
 * recorder's own, which marked the thread exited. */
static void late_span(void *arg)
{
    (void)arg;
    mlprof_begin(g_late);
    mlprof_end(g_late);
}

static void *late_thread(void *arg)
{
    (void)arg;
    mlprof_begin(g_span);
    mlprof_end(g_span);
    pthread_setspecific(g_late_key, &g_late_key);
    return NULL;
}

static int late_in_list(void)
{
    int n = 0;
    for (mlprof__thread *t = __atomic_load_n(&mlprof__g.threads, __ATOMIC_ACQUIRE); t; t = t->next)
        n += t->late;
    return n;
}

static void late_recorded(void)
{
    CHECK(pthread_key_create(&g_late_key, late_span) == 0, "pthread_key_create");
    for (int i = 0; i < LATE_THREADS; i++) {
        pthread_t th;
        pthread_create(&th, NULL, late_thread, NULL);
        pthread_join(th, NULL);
    }
    /* a joined thread's id may outlive the join for a moment in the kernel:
     * dump until the late records are gone (at most 10 s on a loaded machine) */
    int left = -1;
    for (int tries = 0; tries < 1000 && left != 0; tries++) {
        if (tries)
            usleep(10000);
        CHECK_OK(mlprof_dump(0));
        left = late_in_list();
    }
    CHECK(left == 0, "%d late records of exited threads still listed", left);
}

/* ---------------------------------------------------------------- garbage */

static const mlprof__rec g_garbage[][2] = {
    {{0, MLPROF__REC_B(0, 0, 0)}, {0, 0}},                                       /* kind 0 */
    {{0, MLPROF__REC_B(63, 0, 0)}, {0, 0}},                                      /* kind 63 */
    {{0, MLPROF__REC_B(MLPROF__REC_BEGIN, 0, 0)}, {0, 0}},                       /* no span */
    {{0, MLPROF__REC_B(MLPROF__REC_MARK, 0, 0)}, {0, 0}},                        /* no marker */
    {{UINT64_C(1) << 40, MLPROF__REC_B(MLPROF__REC_ARG_S, 3, 0)}, {0, 0}},       /* a 1 TB string */
    {{0, MLPROF__REC_B(MLPROF__REC_ARG_I, 1000, 0)}, {0, 0}},                    /* a 1000-byte key */
    {{0, MLPROF__REC_B(MLPROF__REC_COUNTER_I, 0, 0)}, {0, 0}},                   /* no counter */
    {{0, MLPROF__REC_B(MLPROF__REC_VALUE, 0, 0)}, {0, 0}},                       /* a lone value */
};
#define NGARBAGE (sizeof g_garbage / sizeof g_garbage[0])

/* Publishes one garbage record after a good span, then a span that the
 * collector must skip with the rest of the segment. */
static void *garbage_thread(void *arg)
{
    size_t which = (size_t)(uintptr_t)arg;
    mlprof_begin(g_span);
    mlprof_end(g_span);
    mlprof__thread *t = mlprof__thread_self();
    if (!t || (size_t)(t->end - t->pos) < sizeof g_garbage[0] + 64) {
        CHECK(0, "room in the chunk for the garbage");
        return NULL;
    }
    memcpy(t->pos, g_garbage[which], sizeof g_garbage[which]);
    __atomic_store_n(&t->pos, t->pos + sizeof g_garbage[which], __ATOMIC_RELEASE);
    mlprof_begin(g_span);
    mlprof_end(g_span);
    return NULL;
}

static void garbage_counted(void)
{
    for (size_t i = 0; i < NGARBAGE; i++) {
        pthread_t th;
        pthread_create(&th, NULL, garbage_thread, (void *)(uintptr_t)i);
        pthread_join(th, NULL);
    }
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_dump(1));
    char *text = tu_read_file(tu_path("record_internals.json"));
    CHECK(text != NULL, "the trace was written");
    if (!text)
        return;
    const char *c = strstr(text, "\"corrupt_records\":");
    unsigned long long corrupt = c ? strtoull(c + strlen("\"corrupt_records\":"), NULL, 10) : 0;
    CHECK(corrupt == NGARBAGE, "%llu corrupt records counted, %zu written", corrupt, NGARBAGE);
    int late = tu_count(text, "\"name\":\"late\"");
    CHECK(late == LATE_THREADS, "%d spans recorded after the exit handler in the trace, %d recorded", late,
          LATE_THREADS);
    free(text);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("record_internals.json")));
    g_dom = mlprof_domain_create("internals");
    g_span = mlprof_task_create(g_dom, "span");
    g_late = mlprof_task_create(g_dom, "late");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    head_reaped();
    churn_reaped();
    late_recorded();
    garbage_counted();
    return tu_finish("record_internals");
}
