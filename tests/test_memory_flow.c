/*
 * test_memory_flow.c - 100,000 blocks from the real allocator (a small heap
 * and far-away mmap'd large blocks), in ten scopes, over 200 iterations of a
 * loop that keeps a few blocks each time: the picture must stay small and
 * readable (check_trace.py, area "memory_flow", parses it and counts what
 * the first line of the output says was made).
 */
#include "testutil.h"

/* Under a sanitizer each large block costs work over its whole size: TSan
 * clears its metadata at the free, ASan poisons and faults in its shadow. The
 * 4,000 large blocks of 200 iterations took most of a minute on a loaded
 * machine. There 40 iterations (20,000 blocks of the same sizes) test what
 * the sanitizers are there for, the same code paths with the collector beside
 * the recording thread; the plain build checks the picture of 100,000. */
#if TU_SANITIZED
#define ITERATIONS 40
#else
#define ITERATIONS 200
#endif
#define PER_ITERATION 500
#define KEPT 2

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", tu_path("flow.json")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_config("memory_sample_rate", "100"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    printf("blocks=%d kept=%d\n", ITERATIONS * PER_ITERATION, ITERATIONS * KEPT);
    static void *blocks[PER_ITERATION];
    static void *kept[ITERATIONS * KEPT];
    size_t nkept = 0;
    unsigned seed = 1;
    uint64_t now = 1000;
    uint64_t expect_live = 0, allocs = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        for (int j = 0; j < PER_ITERATION; j++) {
            char scope[16];
            snprintf(scope, sizeof scope, "layer%d", j / (PER_ITERATION / 10));
            mlprof_scope_push(scope);
            size_t size = (j % 25 == 24) ? (size_t)(256u << 10) + (size_t)(rand_r(&seed) % (4u << 20))
                                         : 16 + (size_t)(rand_r(&seed) % 4096);
            blocks[j] = malloc(size);
            tu_set_now(now += 1000);
            mlprof_mem_alloc(MLPROF_DEVICE_CPU, blocks[j], size, j % 25 == 24 ? "activation" : "small");
            allocs++;
            if (j < KEPT) {
                kept[nkept++] = blocks[j];
                expect_live += size;
                blocks[j] = NULL;
            }
            mlprof_scope_pop();
        }
        for (int j = PER_ITERATION - 1; j >= 0; j--) {
            if (!blocks[j])
                continue;
            tu_set_now(now += 200);
            mlprof_mem_free(MLPROF_DEVICE_CPU, blocks[j]);
            free(blocks[j]);
        }
    }
    mlprof_mem_info m;
    CHECK_OK(mlprof_mem_info_get(MLPROF_DEVICE_CPU, &m, sizeof m));
    CHECK(m.allocs == allocs && m.allocs == ITERATIONS * PER_ITERATION, "allocs %llu", (unsigned long long)m.allocs);
    CHECK(m.used == expect_live && m.live_blocks == nkept, "live %llu in %llu, expected %llu",
          (unsigned long long)m.used, (unsigned long long)m.live_blocks, (unsigned long long)expect_live);
    CHECK(m.unknown_frees == 0 && m.double_frees == 0 && m.implicit_frees == 0, "clean");
    CHECK_OK(mlprof_dump(1));
    for (size_t i = 0; i < nkept; i++)
        free(kept[i]);
    return tu_finish("test_memory_flow");
}
