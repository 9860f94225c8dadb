/*
 * test_memory_threads.c - several threads allocate at once, wait for each
 * other, then each frees the blocks of its neighbour, while the collector
 * drains concurrently (continuous dump). The accounting must be exact: every
 * block is live at the barrier, so the peak is their total; every free finds
 * its block although another thread allocated it; nothing is unknown.
 */
#include <pthread.h>

#include "testutil.h"

#define NTHREADS 4
#define PER_THREAD 20000

static pthread_barrier_t g_barrier;

static const void *block_addr(int thread, int j)
{
    return (const void *)(((uintptr_t)(thread + 1) << 32) | ((uintptr_t)j * 64));
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    char scope[32];
    snprintf(scope, sizeof scope, "worker%d", me);
    mlprof_scope_push(scope);
    for (int j = 0; j < PER_THREAD; j++)
        mlprof_mem_alloc(MLPROF_DEVICE_CPU, block_addr(me, j), 8 * (uint64_t)(me + 1), "t");
    pthread_barrier_wait(&g_barrier);
    int other = (me + 1) % NTHREADS;
    for (int j = 0; j < PER_THREAD; j++)
        mlprof_mem_free(MLPROF_DEVICE_CPU, block_addr(other, j));
    mlprof_scope_pop();
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("memory_threads.json")));
    CHECK_OK(mlprof_set_config("stats_file", tu_path("memory_threads_stats.json")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    CHECK_OK(mlprof_set_config("dump_period", "0.02"));
    CHECK_OK(mlprof_set_config("memory_sample_rate", "1000"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_barrier_init(&g_barrier, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    mlprof_mem_info m;
    CHECK_OK(mlprof_mem_info_get(MLPROF_DEVICE_CPU, &m, sizeof m));
    uint64_t dropped = mlprof_dropped_events();
    CHECK(dropped == 0, "no drops (%llu): the totals below need every record",
          (unsigned long long)dropped);
    uint64_t total = 0;
    for (int i = 0; i < NTHREADS; i++)
        total += (uint64_t)PER_THREAD * 8 * (uint64_t)(i + 1);
    CHECK(m.allocs == NTHREADS * PER_THREAD && m.frees == NTHREADS * PER_THREAD,
          "allocs %llu frees %llu", (unsigned long long)m.allocs, (unsigned long long)m.frees);
    CHECK(m.peak_used == total, "peak %llu, expected %llu (all live at the barrier)",
          (unsigned long long)m.peak_used, (unsigned long long)total);
    CHECK(m.used == 0 && m.live_blocks == 0, "all freed: %llu in %llu", (unsigned long long)m.used,
          (unsigned long long)m.live_blocks);
    CHECK(m.unknown_frees == 0 && m.double_frees == 0 && m.implicit_frees == 0,
          "unknown %llu double %llu implicit %llu", (unsigned long long)m.unknown_frees,
          (unsigned long long)m.double_frees, (unsigned long long)m.implicit_frees);
    CHECK_OK(mlprof_dump(1));
    printf("peak=%llu total=%llu\n", (unsigned long long)m.peak_used, (unsigned long long)total);
    return tu_finish("test_memory_threads");
}
