/*
 * test_ring_units.c - the flight recorder (mode=ring) from inside a process
 * linked with libmlprof, so that it runs under ASan and TSan too:
 * - ring_seconds on a clock moved by hand: 10000 spans, one a millisecond,
 *   with ring_seconds=2 keep the last 2 s (the last ones, no gap, from a
 *   chunk boundary at most a chunk before the window) and count the rest;
 * - two threads recording at once into a 256 KiB ring while the collector's
 *   thread evicts beside them: overwritten + kept = recorded, and what a
 *   thread has kept is its last spans (the ring keeps the process's last
 *   events: a thread that ended earlier may have none left);
 * - mode=ring set while recording, and a mode that does not exist.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The values of argument i of the spans named name in a JSON trace, in
 * order; their count. */
static size_t spans_named(const char *json, const char *name, long *out, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "\"name\":\"%s\"", name);
    size_t n = 0;
    for (const char *p = strstr(json, key); p; p = strstr(p + 1, key)) {
        const char *end = strchr(p, '}');
        const char *a = strstr(p, "\"i\":");
        if (out && n < cap)
            out[n] = a && end && a < end ? strtol(a + 4, NULL, 10) : -1;
        n++;
    }
    return n;
}

static uint64_t other_u64(const char *json, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(json, k);
    return p ? strtoull(p + strlen(k), NULL, 10) : UINT64_MAX;
}

#define SPANS 10000

static void by_age(void)
{
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("mode", "ring"));
    CHECK_OK(mlprof_set_config("ring_seconds", "2"));
    mlprof_span *w = mlprof_task_create(mlprof_domain_create("age"), "w");
    tu_set_now(1000000000ull);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (long i = 0; i < SPANS; i++) {
        tu_set_now(1000000000ull + (uint64_t)i * 1000000u);
        mlprof_begin(w);
        mlprof_arg_int("i", i);
        tu_set_now(1000000000ull + (uint64_t)i * 1000000u + 100000u);
        mlprof_end(w);
    }
    char *json = NULL;
    CHECK_OK(mlprof_dump_string(&json));
    if (json) {
        static long got[SPANS];
        size_t n = spans_named(json, "w", got, SPANS);
        uint64_t over = other_u64(json, "overwritten_events");
        CHECK(n > 0 && got[n - 1] == SPANS - 1, "the last span kept: %ld", n ? got[n - 1] : -1);
        int contiguous = 1;
        for (size_t k = 1; k < n; k++)
            contiguous &= got[k] == got[k - 1] + 1;
        CHECK(contiguous, "the spans kept have a gap");
        /* the window: the last 2 s (spans 8000 on); the chunk across its
         * start keeps older ones, a chunk's worth at most (a span takes
         * three 16-byte records) */
        long first = n ? got[0] : -1;
        long per_chunk = (long)(other_u64(json, "chunk_size") / 48);
        CHECK(first <= 8000 && first >= 8000 - per_chunk, "the first span kept: %ld (%ld a chunk)", first,
              per_chunk);
        CHECK(over + n == SPANS, "overwritten %llu + kept %zu != %d", (unsigned long long)over, n, SPANS);
        printf("ring_seconds=2: spans %ld to %d kept (%zu), %llu overwritten\n", first, SPANS - 1, n,
               (unsigned long long)over);
        mlprof_free(json);
    }
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_clock(NULL, NULL));
    CHECK_OK(mlprof_set_config("ring_seconds", "0"));
}

#define PER_THREAD 100000

static void *writer(void *arg)
{
    mlprof_span *s = arg;
    for (long i = 0; i < PER_THREAD; i++) {
        mlprof_begin(s);
        mlprof_arg_int("i", i);
        mlprof_end(s);
    }
    return NULL;
}

static void two_threads(void)
{
    CHECK_OK(mlprof_set_config("ring_size", "256K"));
    mlprof_domain *d = mlprof_domain_create("threads");
    mlprof_span *a = mlprof_task_create(d, "a"), *b = mlprof_task_create(d, "b");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, writer, a) == 0, "thread");
    CHECK(pthread_create(&tb, NULL, writer, b) == 0, "thread");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    char *json = NULL;
    CHECK_OK(mlprof_dump_string(&json));
    if (json) {
        static long ga[PER_THREAD], gb[PER_THREAD];
        size_t na = spans_named(json, "a", ga, PER_THREAD), nb = spans_named(json, "b", gb, PER_THREAD);
        uint64_t over = other_u64(json, "overwritten_events"), dropped = mlprof_dropped_events();
        CHECK(dropped == 0, "%llu dropped in a 16 MiB pool", (unsigned long long)dropped);
        CHECK(over + na + nb == 2 * PER_THREAD, "overwritten %llu + kept %zu + %zu != %d", (unsigned long long)over,
              na, nb, 2 * PER_THREAD);
        CHECK(na + nb < PER_THREAD / 2, "kept %zu + %zu: the ring kept far more than its size", na, nb);
        /* the ring holds the process's last events: the thread that ended
         * first may have none left, but what a thread has is its last ones */
        CHECK(na + nb > 0, "nothing kept");
        CHECK(!na || (ga[na - 1] == PER_THREAD - 1 && ga[0] == PER_THREAD - (long)na),
              "thread a's spans kept are not its last ones: %zu, from %ld to %ld", na, na ? ga[0] : -1,
              na ? ga[na - 1] : -1);
        CHECK(!nb || (gb[nb - 1] == PER_THREAD - 1 && gb[0] == PER_THREAD - (long)nb),
              "thread b's spans kept are not its last ones: %zu, from %ld to %ld", nb, nb ? gb[0] : -1,
              nb ? gb[nb - 1] : -1);
        printf("two threads: %zu + %zu kept, %llu overwritten\n", na, nb, (unsigned long long)over);
        mlprof_free(json);
    }
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_clear());
}

/* mode=ring set while recording: the collector's thread starts evicting
 * then, and the trace is the ring's from that point. */
static void while_running(void)
{
    CHECK_OK(mlprof_set_config("mode", "normal"));
    mlprof_span *c = mlprof_task_create(mlprof_domain_create("late"), "c");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(mlprof_set_config("mode", "ring"));
    char v[16];
    CHECK_OK(mlprof_get_config("mode", v, sizeof v));
    CHECK(strcmp(v, "ring") == 0, "mode reads %s", v);
    writer(c);
    char *json = NULL;
    CHECK_OK(mlprof_dump_string(&json));
    if (json) {
        static long got[PER_THREAD];
        size_t n = spans_named(json, "c", got, PER_THREAD);
        uint64_t over = other_u64(json, "overwritten_events");
        CHECK(n && got[n - 1] == PER_THREAD - 1 && got[0] == PER_THREAD - (long)n,
              "the spans kept are not the last ones: %zu", n);
        CHECK(over + n == PER_THREAD, "overwritten %llu + kept %zu != %d", (unsigned long long)over, n, PER_THREAD);
        mlprof_free(json);
    }
    CHECK(mlprof_set_config("mode", "circular") == MLPROF_EVALUE, "mode=circular accepted");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_clear());
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("ring_units.json")));
    CHECK_OK(mlprof_set_config("buffer_size", "16M"));
    CHECK_OK(mlprof_set_config("stats_file", ""));
    CHECK_OK(mlprof_set_config("dump_at_exit", "false"));
    by_age();
    two_threads();
    while_running();
    return tu_finish("test_ring_units");
}
