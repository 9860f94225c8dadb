/*
 * test_memory_layers.c - the memory profiler when two layers report one
 * address: mlprof run's malloc interposer (the lower layer, recorded through
 * mlprof__mem_alloc_lower / mlprof__mem_free_lower as src/hook/malloc.c does)
 * and the program's own mlprof_mem_* calls on the same blocks, as
 * examples/cnn_infer.c makes them (weights from calloc reported with a tag, a
 * pool's segment from malloc reserved and carved into tensors). The clock is
 * the test's, so every figure is exact. Linked with the static library.
 *
 * 1. A correct program: no double free, no missed free, nothing unknown, and
 *    no byte counted twice (the peak of allocated is not the segment twice);
 *    the segment is no peak of used in the instant between malloc and the
 *    program's reserve, while a block of malloc's nobody takes over is.
 * 2. Real mistakes are still counted, each in its own layer: the program's
 *    second mlprof_mem_free, a second free() after the program's free, a
 *    second free() of a block the program never reported, an alloc over a
 *    live block; a program's free of a block only the interposer saw is an
 *    unknown free (as it is without the interposer) and leaves that block to
 *    its free().
 * 3. The CSV marks the interposer's blocks taken over by the program's report.
 */
#include "../src/mem/mem.h"
#include "../src/record/record.h"
#include "testutil.h"

#define CPU MLPROF_DEVICE_CPU
#define SEG 1048576u

static const void *at(uintptr_t a) { return (const void *)a; }

static mlprof_mem_info info(void)
{
    mlprof_mem_info i;
    memset(&i, 0xff, sizeof i);
    CHECK_OK(mlprof_mem_info_get(CPU, &i, sizeof i));
    return i;
}

#define PROBLEMS(i, unknown, dbl, implicit)                                                             \
    CHECK((i).unknown_frees == (unknown) && (i).double_frees == (dbl) && (i).implicit_frees == (implicit), \
          "line %d: unknown %llu double %llu implicit %llu", __LINE__, (unsigned long long)(i).unknown_frees, \
          (unsigned long long)(i).double_frees, (unsigned long long)(i).implicit_frees)

static void correct_program(void)
{
    const uintptr_t w = 0x10000, s = 0x200000;
    tu_set_now(1000);
    mlprof__mem_alloc_lower(CPU, at(w), 1728); /* calloc */
    tu_set_now(2000);
    mlprof_mem_alloc(CPU, at(w), 1728, "weights"); /* the program's report of it */
    mlprof_mem_info i = info();
    CHECK(i.used == 1728 && i.allocated == 1728 && i.live_blocks == 1, "weights once: %llu %llu %llu",
          (unsigned long long)i.used, (unsigned long long)i.allocated, (unsigned long long)i.live_blocks);
    PROBLEMS(i, 0, 0, 0);

    tu_set_now(3000);
    mlprof__mem_alloc_lower(CPU, at(s), SEG); /* the pool's segment from malloc */
    tu_set_now(4000);
    mlprof_mem_reserve(CPU, at(s), SEG);
    i = info();
    CHECK(i.used == 1728 && i.allocated == 1728 + SEG, "segment reserved: used %llu allocated %llu",
          (unsigned long long)i.used, (unsigned long long)i.allocated);
    for (uint64_t k = 0; k < 3; k++) { /* tensors, the first at the segment's start */
        tu_set_now(5000 + k * 1000);
        mlprof_mem_alloc(CPU, at(s), 4096 << k, "act");
        mlprof_mem_alloc(CPU, at(s + 65536), 512, "act");
        tu_set_now(5500 + k * 1000);
        mlprof_mem_free(CPU, at(s + 65536));
        mlprof_mem_free(CPU, at(s));
    }
    tu_set_now(9000);
    mlprof_mem_release(CPU, at(s));
    tu_set_now(10000);
    mlprof__mem_free_lower(CPU, at(s)); /* free(segment) */
    tu_set_now(11000);
    mlprof_mem_free(CPU, at(w));
    tu_set_now(12000);
    mlprof__mem_free_lower(CPU, at(w)); /* free(weights) */

    i = info();
    PROBLEMS(i, 0, 0, 0);
    CHECK(i.used == 0 && i.allocated == 0 && i.live_blocks == 0, "all given back: %llu %llu %llu",
          (unsigned long long)i.used, (unsigned long long)i.allocated, (unsigned long long)i.live_blocks);
    /* the segment was used as malloc's block only until the program reserved it: the peak of used is
     * the program's (weights, the largest tensor and a small one), not that instant */
    CHECK(i.peak_used == 1728 + (4096 << 2) + 512 && i.peak_used_ns == 7000, "peak used %llu at %llu",
          (unsigned long long)i.peak_used, (unsigned long long)i.peak_used_ns);
    CHECK(i.peak_allocated == 1728 + SEG, "the segment is counted once: peak allocated %llu",
          (unsigned long long)i.peak_allocated);
    /* 2 lower + 1 weights + 6 tensors; each ended once (the lower two when taken over) */
    CHECK(i.allocs == 9 && i.frees == 9 && i.reserves == 1 && i.releases == 1, "allocs %llu frees %llu",
          (unsigned long long)i.allocs, (unsigned long long)i.frees);
}

/* A block of malloc's that the program does not report next is used memory:
 * its peak counts, whatever comes after it. */
static void plain_block_peak(void)
{
    const uintptr_t p = 0x700000, q = 0x800000;
    tu_set_now(30000);
    mlprof__mem_alloc_lower(CPU, at(p), 8 * SEG);
    tu_set_now(31000);
    mlprof__mem_free_lower(CPU, at(p)); /* the next operation: no take-over */
    tu_set_now(32000);
    mlprof_mem_alloc(CPU, at(q), 64, "other");
    mlprof_mem_free(CPU, at(q));
    mlprof_mem_info i = info();
    CHECK(i.peak_used >= 8 * SEG && i.peak_used_ns == 30000, "malloc's block is a peak: %llu at %llu",
          (unsigned long long)i.peak_used, (unsigned long long)i.peak_used_ns);
    tu_set_now(33000);
    mlprof__mem_alloc_lower(CPU, at(p), 16 * SEG); /* last of its batch: counted when reported */
    i = info();
    CHECK(i.peak_used >= 16 * SEG && i.peak_used_ns == 33000, "the last block's peak: %llu at %llu",
          (unsigned long long)i.peak_used, (unsigned long long)i.peak_used_ns);
    tu_set_now(34000);
    mlprof__mem_free_lower(CPU, at(p));
}

/* The op profiler's window peak, alike: a segment reserved right after malloc
 * gave it is no peak of the window; the tensor carved from it is. */
static void window_peak(void)
{
    const uintptr_t s = 0x900000;
    mlprof_mem_info i = info(); /* drained: the window starts from here */
    mlprof__mem_window_open();
    tu_set_now(40000);
    mlprof__mem_alloc_lower(CPU, at(s), 4 * SEG);
    tu_set_now(40100);
    mlprof_mem_reserve(CPU, at(s), 4 * SEG);
    tu_set_now(41000);
    mlprof_mem_alloc(CPU, at(s), 100, "act");
    (void)info(); /* drained again */
    uint64_t used = 0, peak = 0;
    mlprof__mem_window_close(CPU, &used, &peak);
    CHECK(used == i.used + 100 && peak == i.used + 100, "the window's peak is the tensor: used %llu peak %llu",
          (unsigned long long)used, (unsigned long long)peak);
    tu_set_now(42000);
    mlprof_mem_free(CPU, at(s));
    mlprof_mem_release(CPU, at(s));
    mlprof__mem_free_lower(CPU, at(s));
}

static void mistakes(void)
{
    const uintptr_t x = 0x300000, y = 0x400000, z = 0x500000, v = 0x600000;
    tu_set_now(20000);
    mlprof__mem_alloc_lower(CPU, at(x), 100);
    mlprof_mem_alloc(CPU, at(x), 100, "x");
    tu_set_now(21000);
    mlprof_mem_free(CPU, at(x));
    mlprof_mem_free(CPU, at(x)); /* the program's report freed twice */
    mlprof_mem_info i = info();
    PROBLEMS(i, 0, 1, 0);
    tu_set_now(22000);
    mlprof__mem_free_lower(CPU, at(x));
    mlprof__mem_free_lower(CPU, at(x)); /* free(x); free(x); */
    i = info();
    PROBLEMS(i, 0, 2, 0);

    tu_set_now(23000); /* plain malloc, never reported, freed twice */
    mlprof__mem_alloc_lower(CPU, at(y), 200);
    mlprof__mem_free_lower(CPU, at(y));
    mlprof__mem_free_lower(CPU, at(y));
    i = info();
    PROBLEMS(i, 0, 3, 0);

    tu_set_now(24000); /* reported twice without a free between */
    mlprof_mem_alloc(CPU, at(z), 300, "z");
    mlprof_mem_alloc(CPU, at(z), 300, "z");
    mlprof_mem_free(CPU, at(z));
    i = info();
    PROBLEMS(i, 0, 3, 1);

    tu_set_now(25000); /* freed by the program, never reported allocated by it */
    mlprof__mem_alloc_lower(CPU, at(v), 400);
    mlprof_mem_free(CPU, at(v));
    i = info();
    PROBLEMS(i, 1, 3, 1);
    CHECK(i.used == 400 && i.live_blocks == 1, "the malloc block is still there: %llu",
          (unsigned long long)i.used);
    tu_set_now(26000);
    mlprof__mem_free_lower(CPU, at(v));
    i = info();
    PROBLEMS(i, 1, 3, 1);
    CHECK(i.used == 0 && i.live_blocks == 0, "freed by free(): %llu", (unsigned long long)i.used);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", tu_path("layers.json")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_config("memory_csv", tu_path("layers.csv")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    correct_program();
    mistakes();
    plain_block_peak();
    window_peak();
    CHECK_OK(mlprof_dump(1));
    char *csv = tu_read_file(tu_path("layers.csv"));
    CHECK(csv != NULL, "the CSV is written");
    if (csv) {
        /* weights, segment, x, the window's segment */
        CHECK(tu_count(csv, ",taken over\n") == 4, "four blocks taken over:\n%s", csv);
        CHECK(tu_count(csv, ",overwritten\n") == 1, "one block allocated over (z):\n%s", csv);
        CHECK(tu_count(csv, ",weights,") == 1, "the weights' row:\n%s", csv);
        free(csv);
    }
    return tu_finish("test_memory_layers");
}
