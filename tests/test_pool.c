/* test_pool.c - the chunk pool under threads that come and go, and the state
 * read while another thread changes it.
 *
 * usage: test_pool OUTDIR [continuous | state]
 *
 * 1. Before the first run, reader threads call mlprof_get_state,
 *    mlprof_is_paused and mlprof_buffer_usage without a pause while the main
 *    thread starts (the pool is set up then), pauses, resumes and stops: the
 *    readers see only valid states and never more buffer in use than the
 *    capacity or than what was recorded (a few chunks). ThreadSanitizer sees
 *    no race.
 * 2. 5,000 threads (2,048 under a sanitizer), a few at a time, each record
 *    10 spans and exit: with the default buffer, none of them is dropped
 *    (an exited thread's chunk is not kept whole until the next drain).
 *    check_trace.py counts them in the trace.
 * 3. A span filtered out by its domain's level, through the macros, records
 *    nothing, and a NULL handle is a no-op.
 */
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

/* Under a sanitizer a thread's start and end cost milliseconds: fewer
 * threads, still twice as many as the default pool has chunks (1024), which
 * is what made them drop. */
#if TU_SANITIZED
#define SHORT_THREADS 2048
#else
#define SHORT_THREADS 5000
#endif
#define AT_ONCE 4
#define SPANS 10
/* the readers' bound on the buffer in use while at most two threads record a
 * few pairs: a few chunks (64 KiB each with the default buffer) */
#define FEW_CHUNKS_BYTES (16u << 16)

static mlprof_span *g_short;
static int g_stop_readers;
static int g_reader_failures;
static uint64_t g_reads;
static uint64_t g_progress[2]; /* each reader's readings so far */

static void reader_fail(const char *what, uint64_t a, uint64_t b)
{
    if (__atomic_fetch_add(&g_reader_failures, 1, __ATOMIC_RELAXED) < 5)
        fprintf(stderr, "reader: %s (%llu, %llu)\n", what, (unsigned long long)a, (unsigned long long)b);
}

/* One reader asks for the state, the other for the pause flag: the two words
 * are neighbours, and ThreadSanitizer remembers only a few accesses to each
 * 8 bytes, so that two readers of both would hide the writes from it. */
static void *reader(void *arg)
{
    int reads_state = arg != NULL;
    uint64_t n = 0, max_used = 0;
    while (!__atomic_load_n(&g_stop_readers, __ATOMIC_ACQUIRE)) {
        int state = reads_state ? mlprof_get_state() : MLPROF_STATE_STOP;
        int paused = reads_state ? 0 : mlprof_is_paused();
        uint64_t used = UINT64_MAX, capacity = UINT64_MAX;
        mlprof_buffer_usage(&used, &capacity);
        if (state != MLPROF_STATE_STOP && state != MLPROF_STATE_RUN)
            reader_fail("bad state", (uint64_t)state, 0);
        if (paused != 0 && paused != 1)
            reader_fail("bad paused flag", (uint64_t)paused, 0);
        if (used > capacity)
            reader_fail("used > capacity", used, capacity);
        if (used > FEW_CHUNKS_BYTES)
            reader_fail("more in use than was recorded", used, capacity);
        if (used > max_used)
            max_used = used;
        n++;
        __atomic_store_n(&g_progress[reads_state], n, __ATOMIC_RELAXED);
    }
    __atomic_add_fetch(&g_reads, n, __ATOMIC_RELAXED);
    return NULL;
}

static void record_pairs(int n)
{
    for (int i = 0; i < n; i++) {
        MLPROF_BEGIN(g_short);
        MLPROF_END(g_short);
    }
}

static void *side_recorder(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_stop_readers, __ATOMIC_ACQUIRE)) {
        record_pairs(1);
        usleep(100);
    }
    return NULL;
}

/* Waits until both readers have read again: on a loaded machine a reader
 * may not run at all while the main thread goes through its changes, which
 * would leave them untested without saying so. */
static void await_readers(void)
{
    uint64_t seen[2];
    for (int i = 0; i < 2; i++)
        seen[i] = __atomic_load_n(&g_progress[i], __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        while (__atomic_load_n(&g_progress[i], __ATOMIC_RELAXED) == seen[i])
            usleep(50);
}

static void state_while_read(void)
{
    uint64_t used = 1, capacity = 1;
    mlprof_buffer_usage(&used, &capacity);
    CHECK(used == 0 && capacity == 0, "before the first run: used %llu, capacity %llu",
          (unsigned long long)used, (unsigned long long)capacity);
    pthread_t readers[2], side;
    for (int i = 0; i < 2; i++)
        pthread_create(&readers[i], NULL, reader, i ? &g_reads : NULL);
    pthread_create(&side, NULL, side_recorder, NULL);
    await_readers(); /* the readers are at work before the pool exists */
    for (int round = 0; round < 50; round++) {
        CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
        record_pairs(10);
        if (round % 10 == 0)
            await_readers(); /* some readings fall while it runs, whatever the load */
        CHECK_OK(mlprof_pause());
        CHECK_OK(mlprof_resume());
        record_pairs(10);
        CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    }
    __atomic_store_n(&g_stop_readers, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(readers[i], NULL);
    pthread_join(side, NULL);
    CHECK(g_reader_failures == 0, "%d wrong readings (see above)", g_reader_failures);
    CHECK(g_reads > 0, "the readers read");
    mlprof_buffer_usage(&used, &capacity);
    CHECK(capacity == 64u << 20, "the default buffer: capacity %llu", (unsigned long long)capacity);
    CHECK_OK(mlprof_clear());
    printf("state and usage read %llu times while changed\n", (unsigned long long)g_reads);
}

/* The same readers, started while running, and slower changes: where
 * ThreadSanitizer reliably sees a write of the state or the pause flag that
 * is not atomic (in a process of its own: it misses them later in a busy one,
 * its history being short). */
static void state_while_read_slowly(void)
{
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t readers[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&readers[i], NULL, reader, i ? &g_reads : NULL);
    for (int round = 0; round < 5; round++) {
        usleep(2000);
        await_readers();
        CHECK_OK(mlprof_pause());
        usleep(2000);
        await_readers();
        CHECK_OK(mlprof_resume());
    }
    usleep(2000);
    await_readers();
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    usleep(2000);
    await_readers();
    __atomic_store_n(&g_stop_readers, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(readers[i], NULL);
    CHECK(g_reader_failures == 0, "%d wrong readings (see above)", g_reader_failures);
    CHECK(g_reads > 0, "the readers read");
}

static void *short_thread(void *arg)
{
    (void)arg;
    record_pairs(SPANS);
    return NULL;
}

static void short_lived_threads(void)
{
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 0; i < SHORT_THREADS; i += AT_ONCE) {
        pthread_t th[AT_ONCE];
        int made = 0;
        for (; made < AT_ONCE; made++) {
            if (pthread_create(&th[made], NULL, short_thread, NULL) != 0)
                break;
        }
        CHECK(made == AT_ONCE, "thread %d: pthread_create failed", i + made);
        for (int k = 0; k < made; k++)
            pthread_join(th[k], NULL);
    }
    uint64_t used = 0, capacity = 0;
    mlprof_buffer_usage(&used, &capacity);
    CHECK(mlprof_dropped_events() == 0, "%llu events dropped of %d (%llu of %llu bytes in use)",
          (unsigned long long)mlprof_dropped_events(), 2 * SHORT_THREADS * SPANS,
          (unsigned long long)used, (unsigned long long)capacity);
    printf("short_threads=%d spans=%d\n", SHORT_THREADS, SHORT_THREADS * SPANS);
    printf("short threads: %llu of %llu bytes in use before the dump\n", (unsigned long long)used,
           (unsigned long long)capacity);
}

static void filtered_spans(void)
{
    mlprof_domain *deep = mlprof_domain_create("pool_deep");
    CHECK_OK(mlprof_domain_set_level(deep, 5)); /* above the default level 1 */
    mlprof_span *filtered = mlprof_task_create(deep, "filtered");
    mlprof_span *none = NULL;
    for (int i = 0; i < 100; i++) {
        MLPROF_BEGIN(filtered);
        MLPROF_END(filtered);
        MLPROF_BEGIN(none);
        MLPROF_END(none);
    }
    CHECK_OK(mlprof_set_config("level", "5"));
    MLPROF_BEGIN(filtered); /* on again: recorded */
    MLPROF_END(filtered);
    CHECK_OK(mlprof_set_config("level", "1"));
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    const char *mode = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "state") == 0) {
        CHECK_OK(mlprof_set_config("dump_at_exit", "false"));
        state_while_read_slowly();
        return tu_finish("test_pool state");
    }
    int continuous = strcmp(mode, "continuous") == 0;
    CHECK_OK(mlprof_set_config("filename", tu_path(continuous ? "pool_continuous.json" : "pool.json")));
    CHECK_OK(mlprof_set_config("continuous_dump", continuous ? "true" : "false"));
    g_short = mlprof_task_create(mlprof_domain_create("pool"), "short");
    state_while_read();
    short_lived_threads();
    filtered_spans();
    CHECK_OK(mlprof_dump(1));
    return tu_finish(continuous ? "test_pool continuous" : "test_pool");
}
