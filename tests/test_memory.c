/*
 * test_memory.c - the memory profiler on scripted allocation patterns whose
 * answers are known: peaks of used and allocated, the live set at the peak,
 * per-scope totals, leaks, unknown and double frees, a pool's segments, the
 * sample rate. The clock is the test's, so every time is exact. It writes the
 * traces, the statistics (JSON and table), the CSV and the picture; the
 * Python side (check_trace.py, area "memory") reads them back.
 */
#include "testutil.h"

#define CPU MLPROF_DEVICE_CPU
#define GPU MLPROF_DEVICE_CUDA(0)

static const void *at(uintptr_t a) { return (const void *)a; }

static mlprof_mem_info info(int device)
{
    mlprof_mem_info i;
    memset(&i, 0xff, sizeof i);
    CHECK_OK(mlprof_mem_info_get(device, &i, sizeof i));
    return i;
}

static void write_text(const char *name, const char *text)
{
    FILE *f = fopen(tu_path(name), "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Phase 1: a CPU pattern with scopes and tags, and a pool on the GPU. */
static void patterns(void)
{
    mlprof_domain *dom = mlprof_domain_create("mem_test");
    mlprof_span *fwd = mlprof_task_create(dom, "conv1_fwd");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    /* blocks side by side from 0x100000: A 100, B 300, C 500, D 200, E 1000 */
    const uintptr_t base = 0x100000;
    mlprof_scope_push("model");
    mlprof_scope_push("conv1");
    tu_set_now(1000);
    mlprof_begin(fwd);
    CHECK_OK(mlprof_mem_alloc(CPU, at(base), 100, "w1")); /* A */
    tu_set_now(2000);
    CHECK_OK(mlprof_mem_alloc(CPU, at(base + 100), 300, "act1")); /* B */
    mlprof_end(fwd);
    mlprof_scope_pop();
    mlprof_scope_push("conv2");
    tu_set_now(3000);
    MLPROF_MEM_ALLOC(CPU, at(base + 400), 500, "act2"); /* C: 900 used */
    tu_set_now(4000);
    MLPROF_MEM_FREE(CPU, at(base + 100)); /* B: 600 */
    tu_set_now(5000);
    mlprof_mem_alloc(CPU, at(base + 900), 200, "d"); /* D: 800 */
    tu_set_now(6000);
    mlprof_mem_free(CPU, at(base + 400)); /* C: 300 */
    tu_set_now(7000);
    mlprof_mem_alloc(CPU, at(base + 1100), 1000, "big"); /* E: 1300, the peak */
    tu_set_now(8000);
    mlprof_mem_free(CPU, at(base + 1100)); /* E: 300 */
    mlprof_scope_pop();
    tu_set_now(9000);
    mlprof_mem_free(CPU, at(0x999999)); /* unknown */
    tu_set_now(10000);
    mlprof_mem_free(CPU, at(base + 1100)); /* E again: a double free */
    tu_set_now(11000);
    mlprof_mem_alloc(CPU, at(base), 50, "f"); /* over A, still live: A's free was missed */
    mlprof_mem_free(CPU, NULL);               /* free(NULL): nothing */
    mlprof_scope_pop();

    mlprof_mem_info c = info(CPU);
    CHECK(c.peak_used == 1300 && c.peak_used_ns == 7000, "peak %llu at %llu",
          (unsigned long long)c.peak_used, (unsigned long long)c.peak_used_ns);
    CHECK(c.peak_allocated == 1300, "no pool: allocated is used (%llu)", (unsigned long long)c.peak_allocated);
    CHECK(c.used == 250 && c.allocated == 250 && c.live_blocks == 2, "now %llu/%llu in %llu",
          (unsigned long long)c.used, (unsigned long long)c.allocated, (unsigned long long)c.live_blocks);
    CHECK(c.allocs == 6 && c.frees == 3, "allocs %llu frees %llu", (unsigned long long)c.allocs,
          (unsigned long long)c.frees);
    CHECK(c.unknown_frees == 1 && c.double_frees == 1 && c.implicit_frees == 1,
          "unknown %llu double %llu implicit %llu", (unsigned long long)c.unknown_frees,
          (unsigned long long)c.double_frees, (unsigned long long)c.implicit_frees);

    /* the pool: a 1 MiB segment with two blocks in it, one block outside */
    CHECK_OK(mlprof_mem_device_name(MLPROF_DEVICE_CUDA(1), "spare"));
    tu_set_now(12000);
    CHECK_OK(mlprof_mem_reserve(GPU, at(0x7000000), 1048576));
    tu_set_now(13000);
    mlprof_mem_alloc(GPU, at(0x7000000), 409600, "G");
    tu_set_now(14000);
    mlprof_mem_alloc(GPU, at(0x7000000 + 409600), 300000, "H");
    tu_set_now(15000);
    mlprof_mem_alloc(GPU, at(0x9000000), 100000, "I"); /* outside: allocated grows too */
    tu_set_now(16000);
    mlprof_mem_free(GPU, at(0x7000000));
    tu_set_now(17000);
    mlprof_mem_reserve(GPU, at(0x8000000), 2097152);
    tu_set_now(18000);
    mlprof_mem_release(GPU, at(0x8000000));
    tu_set_now(19000);
    mlprof_mem_release(GPU, at(0x1234));
    tu_set_now(20000);
    mlprof_mem_free(GPU, at(0x7000000 + 409600));
    mlprof_mem_free(GPU, at(0x9000000));

    mlprof_mem_info g = info(GPU);
    CHECK(g.peak_used == 809600 && g.peak_used_ns == 15000, "gpu peak used %llu at %llu",
          (unsigned long long)g.peak_used, (unsigned long long)g.peak_used_ns);
    CHECK(g.peak_allocated == 3245728, "gpu peak allocated %llu", (unsigned long long)g.peak_allocated);
    CHECK(g.used == 0 && g.allocated == 1048576 && g.live_blocks == 0, "gpu now %llu/%llu",
          (unsigned long long)g.used, (unsigned long long)g.allocated);
    CHECK(g.reserves == 2 && g.releases == 1 && g.unknown_releases == 1, "segments %llu %llu %llu",
          (unsigned long long)g.reserves, (unsigned long long)g.releases,
          (unsigned long long)g.unknown_releases);

    /* a device never used reads as zeros; bad arguments are errors */
    mlprof_mem_info z = info(42);
    CHECK(z.allocs == 0 && z.peak_used == 0, "empty device");
    CHECK(mlprof_mem_alloc(MLPROF_DEVICE_MAX + 1, at(1), 1, NULL) == MLPROF_EINVAL, "bad device");
    CHECK(strstr(mlprof_last_error(), "bad device") != NULL, "message: %s", mlprof_last_error());
    CHECK(mlprof_mem_alloc(-1, at(1), 1, NULL) == MLPROF_EINVAL, "negative device");
    CHECK(mlprof_mem_info_get(CPU, NULL, 0) == MLPROF_EINVAL, "NULL info");
    CHECK(mlprof_mem_device_name(CPU, "") == MLPROF_EINVAL, "empty name");
    char path[64];
    CHECK(mlprof_output_path("nonsense", path, sizeof path) == MLPROF_EINVAL, "unknown output");
    CHECK(mlprof_output_path("memory_svg", path, 4) == MLPROF_ELIMIT, "short buffer");

    char *json = NULL, *table = NULL;
    CHECK_OK(mlprof_dumps(&json, MLPROF_FORMAT_JSON, MLPROF_SORT_TOTAL, 0, 0));
    CHECK_OK(mlprof_dumps(&table, MLPROF_FORMAT_TABLE, MLPROF_SORT_TOTAL, 0, 0));
    write_text("stats.json", json ? json : "");
    write_text("stats.txt", table ? table : "");
    mlprof_free(json);
    mlprof_free(table);
    /* the final dump's statistics call what is left leaks */
    CHECK_OK(mlprof_set_config("stats_file", tu_path("final_stats.json")));
    CHECK_OK(mlprof_dump(1));
    CHECK_OK(mlprof_set_config("stats_file", ""));
}

/* Phase 2: the sample rate, on a clean slate. */
static void sample_rate(void)
{
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("filename", tu_path("memory_rate.json")));
    CHECK_OK(mlprof_set_config("memory_sample_rate", "10"));
    CHECK_OK(mlprof_set_config("memory_csv", ""));
    CHECK_OK(mlprof_set_config("memory_svg", tu_path("rate_flow.svg")));
    CHECK(mlprof_set_config("memory_sample_rate", "-1") == MLPROF_EVALUE, "negative rate");
    CHECK(strstr(mlprof_last_error(), "memory_sample_rate") != NULL, "names the key: %s",
          mlprof_last_error());
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    const int dev = 100; /* past the CUDA range: "device 100" */
    for (uintptr_t i = 0; i < 1000; i++) {
        tu_set_now(100000 + i * 10);
        mlprof_mem_alloc(dev, at(0x500000 + i * 16), 16, NULL);
    }
    for (uintptr_t i = 0; i < 1000; i++) {
        tu_set_now(200000 + i * 10);
        mlprof_mem_free(dev, at(0x500000 + i * 16));
    }
    mlprof_mem_info r = info(dev);
    CHECK(r.peak_used == 16000 && r.used == 0 && r.allocs == 1000 && r.frees == 1000,
          "rate device: peak %llu", (unsigned long long)r.peak_used);
    char path[512];
    CHECK_OK(mlprof_output_path("memory_csv", path, sizeof path));
    CHECK(path[0] == '\0', "csv off: \"%s\"", path);
    CHECK_OK(mlprof_dump(1));
}

/* Phase 3: names that are not valid UTF-8, or that hold the characters XML
 * and CSV give a meaning to: the picture must stay well-formed XML, the CSV
 * valid UTF-8 (check_trace.py reads both with strict parsers). */
static void hostile_names(void)
{
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("filename", tu_path("memory_names.json")));
    CHECK_OK(mlprof_set_config("memory_sample_rate", "1"));
    CHECK_OK(mlprof_set_config("memory_csv", tu_path("names.csv")));
    CHECK_OK(mlprof_set_config("memory_svg", tu_path("names_flow.svg")));
    const int dev = 101;
    CHECK_OK(mlprof_mem_device_name(dev, "bad\xff\xfe<dev>&\"x\"\x01"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_scope_push("sc\xc3(\x80pe,\"q\"");
    tu_set_now(300000);
    CHECK_OK(mlprof_mem_alloc(dev, at(0x600000), 4096, "tag\xe2\x82<&>'\x7f\x1b\xef\xbf\xbf end"));
    tu_set_now(301000);
    CHECK_OK(mlprof_mem_alloc(dev, at(0x700000), 8192, "ok \xc3\xa9"));
    tu_set_now(302000);
    CHECK_OK(mlprof_mem_free(dev, at(0x600000)));
    mlprof_scope_pop();
    CHECK_OK(mlprof_dump(1));
}

/* Defect: a block freed, its address taken again while recording was off
 * (unseen) and freed after it resumed, was called a double free: the
 * tombstone of the first free outlived the gap. A free after a gap is an
 * unknown one; a free twice with recording on is still a double free. */
static void free_after_a_gap(void)
{
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("filename", tu_path("memory_gap.json")));
    CHECK_OK(mlprof_set_config("memory_csv", "")); /* the files of hostile_names stay as they are */
    CHECK_OK(mlprof_set_config("memory_svg", ""));
    CHECK_OK(mlprof_set_config("stats_file", "auto")); /* memory_gap.stats.txt, not a file named "auto" */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    tu_set_now(400000);
    CHECK_OK(mlprof_mem_alloc(CPU, at(0x880000), 64, "a"));
    tu_set_now(401000);
    CHECK_OK(mlprof_mem_free(CPU, at(0x880000)));
    CHECK_OK(mlprof_dump(1)); /* stops: the program goes on unseen (0x880000 taken again) */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    tu_set_now(500000);
    CHECK_OK(mlprof_mem_free(CPU, at(0x880000)));
    tu_set_now(501000);
    CHECK_OK(mlprof_mem_alloc(CPU, at(0x990000), 64, "b"));
    tu_set_now(502000);
    CHECK_OK(mlprof_mem_free(CPU, at(0x990000)));
    tu_set_now(503000);
    CHECK_OK(mlprof_mem_free(CPU, at(0x990000))); /* twice while recording: a double free */
    mlprof_mem_info c = info(CPU);
    CHECK(c.unknown_frees == 1 && c.double_frees == 1, "after a gap: unknown %llu double %llu",
          (unsigned long long)c.unknown_frees, (unsigned long long)c.double_frees);
    CHECK_OK(mlprof_dump(1));
    char stats[1200];
    snprintf(stats, sizeof stats, "%s", tu_path("memory_gap.stats.txt"));
    CHECK(access(stats, F_OK) == 0 && access("auto", F_OK) != 0, "stats_file=auto wrote %s, not ./auto", stats);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", tu_path("memory.json")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    char path[512];
    CHECK_OK(mlprof_output_path("memory_csv", path, sizeof path));
    CHECK(strcmp(path, tu_path("memory.memory.csv")) == 0, "auto csv path %s", path);
    CHECK_OK(mlprof_output_path("memory_svg", path, sizeof path));
    CHECK(strcmp(path, tu_path("memory.memory_flow.svg")) == 0, "auto svg path %s", path);
    /* stats_file=auto: beside the trace as the memory outputs (it wrote a file named "auto") */
    CHECK_OK(mlprof_set_config("stats_file", "auto"));
    CHECK_OK(mlprof_output_path("stats", path, sizeof path));
    CHECK(strcmp(path, tu_path("memory.stats.txt")) == 0, "auto stats path %s", path);
    CHECK_OK(mlprof_set_config("filename", "/dev/null"));
    CHECK_OK(mlprof_output_path("stats", path, sizeof path));
    CHECK(path[0] == '\0', "no auto stats beside a trace written in place: %s", path);
    CHECK_OK(mlprof_set_config("filename", tu_path("memory.json")));
    /* off without profile_memory: nothing is counted */
    CHECK_OK(mlprof_set_config("profile_memory", "0"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_mem_alloc(CPU, at(0x42), 8, NULL);
    CHECK(info(CPU).allocs == 0, "profile_memory off records nothing");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    patterns();
    sample_rate();
    hostile_names();
    free_after_a_gap();

    return tu_finish("test_memory");
}
