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
 * - mode=ring set while recording, and a mode that does not exist;
 * - the quick eviction (only the spans the ring cuts decoded) gives the
 *   trace the full decode of every evicted record gives, byte for byte, on
 *   a run with nested and run-time-named spans, frames, arguments given
 *   late, instants with arguments, counters and spans left open.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
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

/* A run on the hand-moved clock, with ring_seconds=1: what is evicted is
 * what is older than a second at the dump, whenever the collector runs. */
static char *structured_run(int full, char **stats)
{
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("mode", "ring"));
    CHECK_OK(mlprof_set_config("ring_size", "0"));
    CHECK_OK(mlprof_set_config("ring_seconds", "1"));
    CHECK_OK(mlprof_set_config("ring_full_decode", full ? "true" : "false"));
    mlprof_domain *d = mlprof_domain_create("quick");
    mlprof_span *outer = mlprof_task_create(d, "outer"), *mid = mlprof_task_create(d, "mid"),
                *work = mlprof_task_create(d, "work"), *frame = mlprof_frame_create(d, "frame");
    mlprof_marker *tick = mlprof_marker_create(d, "tick");
    mlprof_counter *ctr = mlprof_counter_create(d, "ctr");
    uint64_t t = 1000000000ull;
    tu_set_now(t);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_scope_push("A");
    mlprof_begin(outer);
    mlprof_arg_str("what", "the whole run");
    mlprof_scope_push("B"); /* outer keeps scope A: cut by the ring, it must show A */
    for (long i = 0; i < 20000; i++) {
        tu_set_now(t += 100000); /* 0.1 ms a step: 2 s in all */
        if (i % 500 == 0)
            mlprof_begin(frame);
        if (i % 50 == 0) {
            mlprof_begin(mid);
            mlprof_arg_int("m", i / 50);
        }
        mlprof_begin(work);
        mlprof_arg_int("i", i);
        mlprof_arg_double("x", (double)i / 4);
        tu_set_now(t += 10000);
        mlprof_begin_dynamic(d, i % 3 ? "dyn_a" : "dyn_b");
        mlprof_arg_str("s", i % 2 ? "odd" : "even");
        mlprof_end_dynamic(d);
        if (i % 10 == 0) {
            mlprof_mark(tick, MLPROF_SCOPE_THREAD);
            mlprof_arg_int("t", i);
        }
        if (i % 7 == 0)
            mlprof_counter_set(ctr, i);
        mlprof_end(work);
        if (i % 50 == 25)
            mlprof_arg_int("late", i); /* to mid, after its children */
        if (i % 50 == 49)
            mlprof_end(mid);
        if (i % 500 == 499)
            mlprof_end(frame);
    }
    tu_set_now(t += 100000);
    mlprof_scope_pop();
    mlprof_end(outer); /* ended: its self time is counted in the statistics */
    mlprof_scope_pop();
    mlprof_begin(outer);
    tu_set_now(t += 1000);
    char *json = NULL;
    CHECK_OK(mlprof_dump_string(&json)); /* the second outer still open */
    CHECK_OK(mlprof_dumps(stats, MLPROF_FORMAT_JSON, MLPROF_SORT_TOTAL, 0, 0));
    mlprof_end(outer);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("ring_seconds", "0"));
    CHECK_OK(mlprof_set_clock(NULL, NULL));
    return json;
}

/* One structured run in a fresh process (test_ring_units OUTDIR full|quick),
 * so that both runs' chunks begin alike; its trace to OUTDIR/quick_MODE.json. */
static int structured_main(const char *mode)
{
    char *stats = NULL;
    char *json = structured_run(strcmp(mode, "full") == 0, &stats);
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, k ? "quick_%s_stats.json" : "quick_%s.json", mode);
        FILE *f = fopen(tu_path(name), "w");
        const char *text = k ? stats : json;
        CHECK(f && text, "%s: cannot write", name);
        if (f && text)
            fputs(text, f);
        if (f)
            fclose(f);
    }
    mlprof_free(json);
    mlprof_free(stats);
    return tu_finish(mode);
}

/* Replaces in s (in place, one pass) every "pid":PID and "tid":PID by
 * "pid":0 and "tid":0: the two runs are two processes. */
static void forget_pid(char *s, pid_t pid)
{
    char num[24];
    size_t nlen = (size_t)snprintf(num, sizeof num, "%d", (int)pid);
    char *w = s;
    for (const char *r = s; *r;) {
        if ((strncmp(r, "\"pid\":", 6) == 0 || strncmp(r, "\"tid\":", 6) == 0) && strncmp(r + 6, num, nlen) == 0 &&
            !(r[6 + nlen] >= '0' && r[6 + nlen] <= '9')) {
            memmove(w, r, 6);
            w[6] = '0';
            w += 7;
            r += 6 + nlen;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static char *structured_child(const char *self, const char *mode)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", self, tu_path(""), mode, (char *)NULL);
        _exit(127);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the %s run failed: status %d", mode, status);
    char name[64];
    snprintf(name, sizeof name, "quick_%s.json", mode);
    char *json = tu_read_file(tu_path(name));
    if (json)
        forget_pid(json, pid);
    return json;
}

/* The trace less what differs between two runs: from "otherData" on, all
 * but overwritten_events and ring_start_ns. */
static void compare_quick(const char *self)
{
    char *full = structured_child(self, "full"), *quick = structured_child(self, "quick");
    if (full && quick) {
        const char *fo = strstr(full, "\"otherData\""), *qo = strstr(quick, "\"otherData\"");
        CHECK(fo && qo, "otherData in both");
        if (fo && qo) {
            size_t fl = (size_t)(fo - full), ql = (size_t)(qo - quick);
            size_t same = 0;
            while (same < fl && same < ql && full[same] == quick[same])
                same++;
            CHECK(fl == ql && same == fl, "the events differ from byte %zu: full \"%.200s\" quick \"%.200s\"", same,
                  full + (same > 100 ? same - 100 : 0), quick + (same > 100 ? same - 100 : 0));
            uint64_t fover = other_u64(full, "overwritten_events"), qover = other_u64(quick, "overwritten_events");
            CHECK(fover == qover && fover > 0 && fover != UINT64_MAX, "overwritten: full %llu, quick %llu",
                  (unsigned long long)fover, (unsigned long long)qover);
            CHECK(other_u64(full, "ring_start_ns") == other_u64(quick, "ring_start_ns"), "ring_start_ns differs");
            CHECK(strstr(quick, "\"cut_by_ring\":true") && strstr(quick, "\"what\":\"the whole run\""),
                  "the outer span is cut, with its argument");
            CHECK(strstr(quick, "\"scope\":\"A:\",\"what\":\"the whole run\"") != NULL,
                  "the cut outer span keeps the scope it began in (A, not A:B)");
            printf("quick eviction: %zu bytes of events as the full decode's, %llu overwritten\n", fl,
                   (unsigned long long)qover);
        }
    }
    free(full);
    free(quick);
    /* the statistics too: self times of the spans the ring cut count from
     * its start, and only the children kept (the same both ways) */
    char *fs = tu_read_file(tu_path("quick_full_stats.json")), *qs = tu_read_file(tu_path("quick_quick_stats.json"));
    CHECK(fs && qs && strcmp(fs, qs) == 0, "the statistics differ between the full and the quick eviction");
    const char *ob = qs ? strstr(qs, "\"name\":\"outer\"") : NULL;
    CHECK(ob != NULL, "outer in the statistics");
    if (ob) {
        unsigned long long total = strtoull(strstr(ob, "\"total_ns\":") + 11, NULL, 10);
        unsigned long long own = strtoull(strstr(ob, "\"self_ns\":") + 10, NULL, 10);
        CHECK(own <= total && total > 0, "outer: self %llu ns, total %llu ns", own, total);
    }
    free(fs);
    free(qs);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (argc > 2)
        return structured_main(argv[2]);
    CHECK_OK(mlprof_set_config("filename", tu_path("ring_units.json")));
    CHECK_OK(mlprof_set_config("buffer_size", "16M"));
    CHECK_OK(mlprof_set_config("stats_file", ""));
    CHECK_OK(mlprof_set_config("dump_at_exit", "false"));
    by_age();
    two_threads();
    while_running();
    compare_quick(argv[0]);
    return tu_finish("test_ring_units");
}
