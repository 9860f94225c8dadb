/*
 * test_op_profile.c - the op profiler (mlprof_op_profile): statistics on
 * known samples, a calibrated 200 us spin (median within 3%), a noisy op
 * flagged unstable, the cache (hits run nothing, reset empties), the
 * workspace of an op with a known scratch buffer (through mlprof_mem_*, and,
 * run again under the preload library with the malloc hook, of a plain
 * malloc), GPU mode against the fake CUDA runtime (whose events take exact
 * times) with cuDNN's workspace query, cold cache, errors and threads.
 *
 * Usage: test_op_profile OUTDIR [malloc]. "malloc" is the run under
 * LD_PRELOAD=libmlprof_preload.so MLPROF_HOOKS=malloc: only the plain-malloc
 * workspace is checked then.
 */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "fake_cuda.h"
#include "testutil.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static mlprof_op_options opts(void)
{
    mlprof_op_options o;
    mlprof_op_options_init(&o);
    return o;
}

/* ------------------------------------------------------------ statistics */

static void stats(void)
{
    double s[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    mlprof_op_result r;
    CHECK_OK(mlprof_op_stats(s, 10, 0.95, 0.05, &r));
    CHECK(r.median_us == 5.5 && r.min_us == 1 && r.max_us == 10 && r.mean_us == 5.5, "median %g", r.median_us);
    CHECK(r.q1_us == 3.25 && r.q3_us == 7.75 && r.iqr_us == 4.5, "q1 %g q3 %g", r.q1_us, r.q3_us);
    /* P(B <= 1) = 11/1024 for n = 10: [x(1), x(8)] covers 1 - 22/1024 */
    CHECK(r.ci_low_us == 2 && r.ci_high_us == 9, "ci %g..%g", r.ci_low_us, r.ci_high_us);
    CHECK(r.ci_level > 0.9785 && r.ci_level < 0.9786, "ci level %g", r.ci_level);
    CHECK(!r.stable && r.repeats == 10 && r.workspace == -1, "stable %d", r.stable);
    /* too few for 95%: the range, with what it covers (1 - 2/2^3) */
    double three[3] = {3, 1, 2};
    CHECK_OK(mlprof_op_stats(three, 3, 0.95, 0.05, &r));
    CHECK(r.ci_low_us == 1 && r.ci_high_us == 3 && r.ci_level == 0.75, "ci %g..%g at %g", r.ci_low_us,
          r.ci_high_us, r.ci_level);
    double same[4] = {7, 7, 7, 7};
    CHECK_OK(mlprof_op_stats(same, 4, 0.5, 0.0, &r));
    CHECK(r.stable && r.iqr_us == 0 && r.median_us == 7, "stable %d", r.stable);
    CHECK(mlprof_op_stats(s, 0, 0.95, 0.05, &r) == MLPROF_EINVAL, "n 0");
    CHECK(mlprof_op_stats(s, 10, 1.0, 0.05, &r) == MLPROF_EINVAL, "confidence 1");
}

/* ---------------------------------------------------------------- spin */

static int spin(void *user)
{
    uint64_t until = now_ns() + *(const uint64_t *)user;
    while (now_ns() < until) {
    }
    return 0;
}

/* The median of a 200 us spin within 3%. The spin measures wall time, so a
 * preempted spin is longer: the median ignores a few; on a machine so loaded
 * that most repeats are hit (flagged unstable), retried, then skipped. */
static void spin_200us(void)
{
    uint64_t ns = 200000;
    mlprof_op_call call = {.fn = spin, .user = &ns};
    mlprof_op_options o = opts();
    o.min_repeats = 20;
    o.max_repeats = 200;
    for (int attempt = 0; attempt < 4; attempt++) {
        mlprof_op_result r;
        CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
        int close = r.median_us > 194 && r.median_us < 206;
        if (close || (r.stable && attempt == 3)) {
            CHECK(close, "median %.2f us of a 200 us spin", r.median_us);
            CHECK(r.inner == 1, "inner %llu", (unsigned long long)r.inner);
            CHECK(r.min_us <= r.median_us && r.ci_low_us <= r.median_us && r.median_us <= r.ci_high_us,
                  "min %g ci %g..%g", r.min_us, r.ci_low_us, r.ci_high_us);
            CHECK(r.repeats >= 20 && r.repeats <= 200, "repeats %u", r.repeats);
            printf("spin 200 us: median %.2f us (min %.2f, IQR %.2f, CI %.2f..%.2f at %.3f), %u repeats%s\n",
                   r.median_us, r.min_us, r.iqr_us, r.ci_low_us, r.ci_high_us, r.ci_level, r.repeats,
                   r.stable ? "" : ", unstable");
            return;
        }
    }
    printf("spin 200 us: SKIPPED, the machine is too loaded for a steady spin (every attempt unstable)\n");
}

/* A fast op: inner grows so that a repeat lasts at least min_repeat_us. */
static int tiny(void *user)
{
    (*(volatile uint64_t *)user)++;
    return 0;
}

static void calibration(void)
{
    uint64_t count = 0;
    mlprof_op_call call = {.fn = tiny, .user = &count};
    mlprof_op_options o = opts();
    o.warmup_ms = 1;
    o.max_repeats = 20;
    mlprof_op_result r;
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(r.inner >= 100, "inner %llu for a call of a few ns", (unsigned long long)r.inner);
    CHECK(r.median_us < 1, "median %g us", r.median_us);
    CHECK(count >= r.inner * r.repeats, "calls %llu", (unsigned long long)count);
}

/* ---------------------------------------------------------------- noise */

static int noisy(void *user)
{
    unsigned *seed = user;
    *seed = *seed * 1103515245u + 12345u;
    long us = 50 + (long)((*seed >> 8) % 2000); /* 50 us to 2 ms */
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

static void noise(void)
{
    unsigned seed = 42;
    mlprof_op_call call = {.fn = noisy, .user = &seed};
    mlprof_op_options o = opts();
    o.warmup_ms = 1;
    o.min_repeats = 10;
    o.max_repeats = 40;
    o.min_repeat_us = 0; /* one call a repeat: the noise is not averaged away */
    mlprof_op_result r;
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(!r.stable, "random sleeps flagged stable (IQR %g, median %g)", r.iqr_us, r.median_us);
    CHECK(r.repeats == 40 || r.repeats >= 10, "repeats %u", r.repeats);
    CHECK(r.iqr_us > 0.05 * r.median_us, "IQR %g median %g", r.iqr_us, r.median_us);
}

/* ---------------------------------------------------------------- cache */

static void cache(void)
{
    uint64_t count = 0;
    mlprof_op_call call = {.fn = tiny, .user = &count};
    mlprof_op_options o = opts();
    o.warmup_ms = 0;
    o.max_repeats = 10;
    mlprof_op_cache_reset();
    CHECK(mlprof_op_cache_size() == 0, "size %zu", mlprof_op_cache_size());
    mlprof_op_result a, b;
    CHECK_OK(mlprof_op_profile("tiny;cpu;()", &call, &o, &a));
    uint64_t ran = count;
    CHECK(ran > 0 && !a.cached, "ran %llu", (unsigned long long)ran);
    CHECK(mlprof_op_cache_size() == 1, "size %zu", mlprof_op_cache_size());
    CHECK_OK(mlprof_op_profile("tiny;cpu;()", &call, &o, &b));
    CHECK(count == ran, "a cache hit ran the op %llu times", (unsigned long long)(count - ran));
    CHECK(b.cached && b.median_us == a.median_us && b.repeats == a.repeats, "cached %d", b.cached);
    CHECK_OK(mlprof_op_profile("tiny;cpu;(2)", &call, &o, &b));
    CHECK(count > ran && mlprof_op_cache_size() == 2, "size %zu", mlprof_op_cache_size());
    /* no key: never cached */
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &b));
    CHECK_OK(mlprof_op_profile("", &call, &o, &b));
    CHECK(mlprof_op_cache_size() == 2 && !b.cached, "size %zu", mlprof_op_cache_size());
    mlprof_op_cache_reset();
    CHECK(mlprof_op_cache_size() == 0, "size after reset %zu", mlprof_op_cache_size());
    ran = count;
    CHECK_OK(mlprof_op_profile("tiny;cpu;()", &call, &o, &b));
    CHECK(count > ran && !b.cached, "after reset the op ran again");
    mlprof_op_cache_reset();
}

/* ------------------------------------------------------------ workspace */

#define SCRATCH 123457u
#define OUTPUT 4096u

typedef struct ws_op {
    void *out;
    int plain; /* plain malloc, seen only by the preload's interposer */
} ws_op;

/* Leaves an output (freed in teardown) and uses a scratch buffer freed
 * before it returns: the workspace is the scratch. */
static int with_scratch(void *user)
{
    ws_op *w = user;
    if (!w->plain)
        mlprof_mem_free(MLPROF_DEVICE_CPU, w->out);
    free(w->out);
    w->out = malloc(OUTPUT);
    unsigned char *s = malloc(SCRATCH);
    if (!w->out || !s)
        return 1;
    if (!w->plain) {
        mlprof_mem_alloc(MLPROF_DEVICE_CPU, w->out, OUTPUT, "output");
        mlprof_mem_alloc(MLPROF_DEVICE_CPU, s, SCRATCH, "scratch");
    }
    memset(s, 1, SCRATCH);
    ((unsigned char *)w->out)[0] = s[SCRATCH - 1];
    if (!w->plain)
        mlprof_mem_free(MLPROF_DEVICE_CPU, s);
    free(s);
    return 0;
}

static int ws_teardown(void *user)
{
    ws_op *w = user;
    if (!w->plain)
        mlprof_mem_free(MLPROF_DEVICE_CPU, w->out);
    free(w->out);
    w->out = NULL;
    return 0;
}

static void workspace(int plain)
{
    ws_op w = {NULL, plain};
    mlprof_op_call call = {.fn = with_scratch, .teardown = ws_teardown, .user = &w};
    mlprof_op_options o = opts();
    o.warmup_ms = 0;
    o.min_repeats = 3;
    o.max_repeats = 5;
    mlprof_op_result r;
    if (!plain) {
        /* not recording: not measured */
        CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
        CHECK(r.workspace == -1 && r.workspace_from == 0, "workspace %lld", (long long)r.workspace);
    }
    CHECK_OK(mlprof_set_config("profile_memory", "true"));
    CHECK_OK(mlprof_set_config("filename", tu_path("op_profile.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(r.workspace == SCRATCH, "workspace %lld, want %u", (long long)r.workspace, SCRATCH);
    CHECK(r.workspace_from & MLPROF_OP_WS_MEMPROF, "from %u", r.workspace_from);
    if (plain)
        CHECK(r.workspace_from & MLPROF_OP_WS_MALLOC, "from %u: the malloc interposer not seen", r.workspace_from);
    else
        CHECK(!(r.workspace_from & MLPROF_OP_WS_MALLOC), "from %u", r.workspace_from);
    printf("workspace (%s): %lld bytes\n", plain ? "plain malloc" : "mlprof_mem_alloc", (long long)r.workspace);
    /* a second profile measures the same: nothing left from the first */
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(r.workspace == SCRATCH, "again: workspace %lld", (long long)r.workspace);
    o.workspace = 0;
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(r.workspace == -1, "workspace off: %lld", (long long)r.workspace);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
}

/* ------------------------------------------------------------------ GPU */

static int gpu_op(void *user)
{
    fake_cuda_gpu_busy(*(const double *)user);
    return 0;
}

static void gpu(void)
{
    double ms = 0.2;
    mlprof_op_call call = {.fn = gpu_op, .user = &ms};
    mlprof_op_options o = opts();
    o.gpu = 1;
    o.warmup_ms = 1;
    o.max_repeats = 30;
    fake_desc x = {.n = 4, .dims = {3, 8, 32, 32}}, wd = {.n = 4}, cd = {.n = 2}, y = {.n = 4};
    o.cudnn_handle = &o;
    o.cudnn_x = &x;
    o.cudnn_w = &wd;
    o.cudnn_conv = &cd;
    o.cudnn_y = &y;
    o.cudnn_algo = 2;
    int events = fake_cuda_events_alive();
    mlprof_op_result r;
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    /* the fake's events take exactly the work queued between them */
    CHECK(r.median_us > 199.99 && r.median_us < 200.01, "GPU median %g us", r.median_us);
    CHECK(r.iqr_us < 0.01 && r.stable && r.repeats == 10, "iqr %g stable %d repeats %u", r.iqr_us, r.stable,
          r.repeats);
    CHECK(r.inner == 1, "inner %llu", (unsigned long long)r.inner);
    CHECK(r.cudnn_workspace == 3 * 1024 * 3, "cudnn workspace %lld", (long long)r.cudnn_workspace);
    CHECK(fake_cuda_events_alive() == events, "events leaked: %d", fake_cuda_events_alive() - events);
    /* a short kernel: several calls a repeat, each sample still one call's */
    ms = 0.01;
    o.cudnn_algo = -1; /* refused by cuDNN: not reported */
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(r.inner >= 10 && r.median_us > 9.99 && r.median_us < 10.01, "inner %llu median %g",
          (unsigned long long)r.inner, r.median_us);
    CHECK(r.cudnn_workspace == -1, "cudnn workspace %lld", (long long)r.cudnn_workspace);
}

/* ----------------------------------------------------- cold cache, errors */

typedef struct counts {
    int setups, teardowns, fail_at;
    volatile uint64_t calls;
} counts;

static int c_setup(void *u) { return ((counts *)u)->setups++, 0; }
static int c_teardown(void *u) { return ((counts *)u)->teardowns++, 0; }
static int c_call(void *u)
{
    counts *c = u;
    return ++c->calls == (uint64_t)c->fail_at ? 7 : 0;
}
static int c_call_n(void *u, uint64_t n)
{
    counts *c = u;
    for (uint64_t i = 0; i < n; i++)
        c->calls++;
    return 0;
}

static void cold_and_errors(void)
{
    counts c = {0};
    mlprof_op_call call = {.fn = c_call, .setup = c_setup, .teardown = c_teardown, .user = &c};
    mlprof_op_options o = opts();
    o.warmup_ms = 0;
    o.max_repeats = 12;
    o.cold_cache = 1;
    o.flush_bytes = 8 << 20; /* this machine's LLC may be hundreds of MiB */
    mlprof_op_result r;
    CHECK_OK(mlprof_op_profile(NULL, &call, &o, &r));
    CHECK(r.inner == 1 && r.repeats >= 10, "cold: inner %llu repeats %u", (unsigned long long)r.inner, r.repeats);
    CHECK(c.setups == c.teardowns && c.setups >= (int)r.repeats + 1, "setups %d teardowns %d", c.setups,
          c.teardowns);

    /* fn_n: the loop in the caller's hands */
    counts n = {0};
    mlprof_op_call batch = {.fn_n = c_call_n, .user = &n};
    o = opts();
    o.warmup_ms = 0;
    o.max_repeats = 10;
    CHECK_OK(mlprof_op_profile(NULL, &batch, &o, &r));
    CHECK(r.inner > 1 && n.calls >= r.inner * r.repeats, "fn_n: inner %llu calls %llu",
          (unsigned long long)r.inner, (unsigned long long)n.calls);

    c = (counts){.fail_at = 3};
    o.max_repeats = 10;
    CHECK(mlprof_op_profile("failing", &call, &o, &r) == MLPROF_EIO, "a failing call");
    CHECK(strstr(mlprof_last_error(), "returned 7") != NULL, "message: %s", mlprof_last_error());
    CHECK(c.setups == c.teardowns, "a failed call is torn down too: setups %d teardowns %d", c.setups, c.teardowns);
    CHECK(mlprof_op_cache_size() == 0, "a failure cached");
    CHECK(mlprof_op_profile(NULL, NULL, &o, &r) == MLPROF_EINVAL, "no call");
    mlprof_op_call none = {0};
    CHECK(mlprof_op_profile(NULL, &none, &o, &r) == MLPROF_EINVAL, "no fn");
    o.min_repeats = 0;
    CHECK(mlprof_op_profile(NULL, &call, &o, &r) == MLPROF_EINVAL, "min_repeats 0");
    CHECK(strstr(mlprof_last_error(), "min_repeats") != NULL, "message: %s", mlprof_last_error());
    o = opts();
    o.max_repeats = 5;
    o.min_repeats = 6;
    CHECK(mlprof_op_profile(NULL, &call, &o, &r) == MLPROF_EINVAL, "max < min");
    o = opts();
    o.budget_ms = 0;
    CHECK(mlprof_op_profile(NULL, &call, &o, &r) == MLPROF_EINVAL, "budget 0");
    o.budget_ms = 1e300; /* would not fit in ns */
    CHECK(mlprof_op_profile(NULL, &call, &o, &r) == MLPROF_EINVAL, "budget 1e300");
    double with_nan[3] = {1, NAN, 2};
    CHECK(mlprof_op_stats(with_nan, 3, 0.95, 0.05, &r) == MLPROF_EINVAL &&
              strstr(mlprof_last_error(), "sample 1") != NULL,
          "a NaN sample is refused: %s", mlprof_last_error());
    /* budget: stops before min_repeats */
    uint64_t spin_ns = 2000000;
    mlprof_op_call slow = {.fn = spin, .user = &spin_ns};
    o = opts();
    o.warmup_ms = 0;
    o.min_repeats = 1000;
    o.max_repeats = 1000;
    o.budget_ms = 20;
    CHECK_OK(mlprof_op_profile(NULL, &slow, &o, &r));
    CHECK(r.repeats >= 1 && r.repeats < 1000, "budget: %u repeats", r.repeats);
}

/* -------------------------------------------------------------- threads */

static void *profiler_thread(void *arg)
{
    uint64_t count = 0;
    mlprof_op_call call = {.fn = tiny, .user = &count};
    mlprof_op_options o = opts();
    o.warmup_ms = 0;
    o.max_repeats = 10;
    char key[32];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "op%d", i % 5 + (int)(intptr_t)arg * 3);
        mlprof_op_result r;
        if (mlprof_op_profile(key, &call, &o, &r) != MLPROF_OK)
            return (void *)1;
        if (i == 10 && arg == 0)
            mlprof_op_cache_reset();
        (void)mlprof_op_cache_size();
    }
    return NULL;
}

/* Workspace runs from two threads while both also time repeats that
 * allocate: one window at a time, no race (TSan). The figures are not
 * checked: every thread's memory counts in a window, so the other thread's
 * frees and allocations meanwhile move it either way. */
static void *workspace_thread(void *arg)
{
    (void)arg;
    ws_op w = {NULL, 0};
    mlprof_op_call call = {.fn = with_scratch, .teardown = ws_teardown, .user = &w};
    mlprof_op_options o = opts();
    o.warmup_ms = 0;
    o.min_repeats = 3;
    o.max_repeats = 5;
    for (int i = 0; i < 5; i++) {
        mlprof_op_result r;
        if (mlprof_op_profile(NULL, &call, &o, &r) != MLPROF_OK || r.workspace < 0 ||
            !(r.workspace_from & MLPROF_OP_WS_MEMPROF)) {
            fprintf(stderr, "workspace thread: %s, workspace %lld from %u\n", mlprof_last_error(),
                    (long long)r.workspace, r.workspace_from);
            return (void *)1;
        }
    }
    return NULL;
}

static void threads(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("op_threads.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t ws[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&ws[i], NULL, workspace_thread, NULL);
    for (int i = 0; i < 2; i++) {
        void *rc;
        pthread_join(ws[i], &rc);
        CHECK(rc == NULL, "workspace thread %d failed", i);
    }
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));

    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, profiler_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 3; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        CHECK(rc == NULL, "thread %d failed: %s", i, mlprof_last_error());
    }
    CHECK(mlprof_op_cache_size() <= 11, "size %zu", mlprof_op_cache_size());
    mlprof_op_cache_reset();
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (argc > 2 && strcmp(argv[2], "malloc") == 0) {
        workspace(1);
        return tu_finish("op_profile (malloc)");
    }
    stats();
    spin_200us();
    calibration();
    noise();
    cache();
    workspace(0);
    gpu();
    cold_and_errors();
    threads();
    return tu_finish("op_profile");
}
