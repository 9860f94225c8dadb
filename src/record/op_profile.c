/*
 * op_profile.c - the op profiler (RAF's): one operator measured in
 * isolation. mlprof_op_profile warms a call up, chooses how many calls make
 * one repeat long enough against the clock, times repeats until their spread
 * is small or the budget is spent, and returns robust statistics (median,
 * quartiles, a distribution-free confidence interval of the median) and the
 * workspace the call needed, measured through the memory profiler. Results
 * are cached by a key the caller gives. See mlprof.h for the contract.
 *
 * The timing itself is plain: CLOCK_MONOTONIC (what Python's perf_counter and
 * torch.utils.benchmark read) around `inner` calls, or two CUDA events on the
 * caller's stream in GPU mode. Nothing here is on the recording hot path.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../hook/hook.h"
#include "../mem/mem.h"
#include "produce.h"
#include "record.h"

/* Set by the preload library's malloc interposer (src/hook/malloc.c); 0 in
 * libmlprof.so, which stands in front of nothing. */
int mlprof__malloc_interposed;

#define MAX_REPEATS_LIMIT 100000u
#define MAX_INNER 1000000000ull

/* ---------------------------------------------------------------- options */

void mlprof_op_options_init(mlprof_op_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->warmup_ms = 10;
    o->min_repeats = 10;
    o->max_repeats = 1000;
    o->budget_ms = 2000;
    o->stability = 0.05;
    o->min_repeat_us = 100;
    o->confidence = 0.95;
    o->workspace = 1;
    o->workspace_device = MLPROF_DEVICE_CPU;
    o->cudnn_algo = 0;
}

static int check_options(const mlprof_op_options *o)
{
    const char *bad = NULL;
    if (!(o->warmup_ms >= 0) || !(o->warmup_ms <= 86400e3)) /* a day at most: times in ns must fit */
        bad = "warmup_ms";
    else if (o->min_repeats < 1 || o->min_repeats > MAX_REPEATS_LIMIT)
        bad = "min_repeats";
    else if (o->max_repeats < o->min_repeats || o->max_repeats > MAX_REPEATS_LIMIT)
        bad = "max_repeats";
    else if (!(o->budget_ms > 0) || !(o->budget_ms <= 86400e3))
        bad = "budget_ms";
    else if (!(o->stability >= 0) || !isfinite(o->stability))
        bad = "stability";
    else if (!(o->min_repeat_us >= 0) || !(o->min_repeat_us <= 86400e6))
        bad = "min_repeat_us";
    else if (!(o->confidence > 0 && o->confidence < 1))
        bad = "confidence";
    else if (o->workspace_device < 0 || o->workspace_device > MLPROF_DEVICE_MAX)
        bad = "workspace_device";
    if (bad)
        return mlprof__fail(MLPROF_EINVAL,
                            "mlprof_op_profile: bad option %s (min_repeats 1 to %u, max_repeats at least "
                            "min_repeats, budget_ms above 0 and warmup_ms at most a day, confidence in (0, 1))",
                            bad, MAX_REPEATS_LIMIT);
    return MLPROF_OK;
}

/* ------------------------------------------------------------- statistics */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-quantile of sorted x, interpolated linearly between order
 * statistics (numpy's default, which torch.utils.benchmark reports). */
static double quantile(const double *x, uint32_t n, double p)
{
    double h = (double)(n - 1) * p;
    uint32_t lo = (uint32_t)h;
    if (lo + 1 >= n)
        return x[n - 1];
    return x[lo] + (h - lo) * (x[lo + 1] - x[lo]);
}

/* The confidence interval of the median from order statistics, which needs no
 * assumption on the distribution (timings are skewed, never normal): the
 * number of samples below the true median is Binomial(n, 1/2), so
 * [x(j), x(n-1-j)] (0-based) covers it with probability 1 - 2 P(B <= j).
 * The widest-coverage j that still reaches `level` is taken; with too few
 * samples for that (n <= 5 at 95%), the range, with its smaller coverage. */
static void median_ci(const double *x, uint32_t n, double level, mlprof_op_result *r)
{
    /* log P(B = j), from j = 0 up in logs (2^-n underflows past n = 1074);
     * no lgamma, whose sign goes to a global (signgam) that threads share */
    double lpmf = -(double)n * log(2.0);
    double cdf = 0; /* P(B <= j) */
    uint32_t best = UINT32_MAX;
    double best_cover = 0;
    for (uint32_t j = 0; 2 * j + 1 < n || (n == 1 && j == 0); j++) {
        if (j > 0)
            lpmf += log((double)(n - j + 1)) - log((double)j);
        cdf += exp(lpmf);
        double cover = 1 - 2 * cdf;
        if (cover < level)
            break;
        best = j;
        best_cover = cover;
    }
    if (best == UINT32_MAX) {
        r->ci_low_us = x[0];
        r->ci_high_us = x[n - 1];
        r->ci_level = n > 1 ? 1 - ldexp(1.0, 1 - (int)n) : 0; /* 1 - 2 P(B <= 0) */
        return;
    }
    r->ci_low_us = x[best];
    r->ci_high_us = x[n - 1 - best];
    r->ci_level = best_cover;
}

/* Fills the statistics of r from the n samples in sorted. */
static void stats_sorted(const double *s, uint32_t n, double level, double stability, mlprof_op_result *r)
{
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += s[i];
    r->min_us = s[0];
    r->max_us = s[n - 1];
    r->mean_us = sum / n;
    r->median_us = quantile(s, n, 0.5);
    r->q1_us = quantile(s, n, 0.25);
    r->q3_us = quantile(s, n, 0.75);
    r->iqr_us = r->q3_us - r->q1_us;
    r->stable = r->median_us > 0 ? r->iqr_us <= stability * r->median_us : r->iqr_us <= 0;
    median_ci(s, n, level, r);
}

int mlprof_op_stats(const double *samples_us, uint32_t n, double confidence, double stability,
                    mlprof_op_result *res)
{
    if (!samples_us || !res || n == 0)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_op_stats: no samples");
    if (!(confidence > 0 && confidence < 1))
        return mlprof__fail(MLPROF_EINVAL, "mlprof_op_stats: confidence must be in (0, 1)");
    for (uint32_t i = 0; i < n; i++)
        if (!isfinite(samples_us[i]))
            return mlprof__fail(MLPROF_EINVAL, "mlprof_op_stats: sample %u is not a finite number", i);
    double *s = mlprof__malloc((size_t)n * sizeof *s);
    if (!s)
        return mlprof__fail(MLPROF_ENOMEM, "mlprof_op_stats: out of memory");
    memcpy(s, samples_us, (size_t)n * sizeof *s);
    mlprof__sort(s, n, sizeof *s, cmp_double);
    memset(res, 0, sizeof *res);
    stats_sorted(s, n, confidence, stability, res);
    res->repeats = n;
    res->workspace = -1;
    res->cudnn_workspace = -1;
    mlprof__free(s);
    return MLPROF_OK;
}

/* ------------------------------------------------------------------ CUDA */

typedef int (*ev_create_fn)(void **);
typedef int (*ev_record_fn)(void *, void *);
typedef int (*ev_one_fn)(void *);
typedef int (*ev_elapsed_fn)(float *, void *, void *);
typedef int (*cudnn_ws_fn)(void *, void *, void *, void *, void *, int, size_t *);

static struct {
    pthread_once_t once;
    ev_create_fn create;
    ev_record_fn record;
    ev_one_fn sync, destroy, stream_sync;
    ev_elapsed_fn elapsed;
    cudnn_ws_fn cudnn_ws;
} C = {.once = PTHREAD_ONCE_INIT};

/* The program's own runtime (as the GPU regions find it): a symbol in the
 * process, or a library already loaded. A runtime of our own choosing would
 * be another context than the one the call's stream belongs to. */
static void *find_in(const char *const *libs, size_t nlibs, const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    for (size_t i = 0; !f && i < nlibs; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            f = dlsym(h, name);
            dlclose(h); /* NOLOAD took a reference of its own */
        }
    }
    return f;
}

static void cuda_load(void)
{
    static const char *const rt[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
    static const char *const dnn[] = {"libcudnn.so", "libcudnn.so.9", "libcudnn.so.8"};
    size_t nrt = sizeof rt / sizeof rt[0];
    C.create = (ev_create_fn)find_in(rt, nrt, "cudaEventCreate");
    C.record = (ev_record_fn)find_in(rt, nrt, "cudaEventRecord");
    C.sync = (ev_one_fn)find_in(rt, nrt, "cudaEventSynchronize");
    C.destroy = (ev_one_fn)find_in(rt, nrt, "cudaEventDestroy");
    C.stream_sync = (ev_one_fn)find_in(rt, nrt, "cudaStreamSynchronize");
    C.elapsed = (ev_elapsed_fn)find_in(rt, nrt, "cudaEventElapsedTime");
    C.cudnn_ws = (cudnn_ws_fn)find_in(dnn, sizeof dnn / sizeof dnn[0], "cudnnGetConvolutionForwardWorkspaceSize");
}

static int cuda_ok(void)
{
    pthread_once(&C.once, cuda_load);
    return C.create && C.record && C.sync && C.destroy && C.stream_sync && C.elapsed;
}

/* ------------------------------------------------------------ cold cache */

/* The size of the last-level cache of cpu0, from sysfs (the highest level
 * whose type is Data or Unified); 0 when unknown. */
static size_t llc_bytes(void)
{
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], buf[64];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = fopen(path, "re");
        if (!f)
            break;
        int data = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!(f = fopen(path, "re")))
            continue;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!data || !(f = fopen(path, "re")))
            continue;
        unsigned long long v = 0;
        char unit = 0;
        int got = fscanf(f, "%llu%c", &v, &unit);
        fclose(f);
        if (got < 1)
            continue;
        if (unit == 'K')
            v <<= 10;
        else if (unit == 'M')
            v <<= 20;
        else if (unit == 'G')
            v <<= 30;
        if (level > best_level) {
            best_level = level;
            best = (size_t)v;
        }
    }
    return best;
}

/* Twice the last-level cache (64 MiB when sysfs does not say), mapped
 * directly: not a malloc that the memory profiler or the call would see. */
typedef struct flusher {
    unsigned char *buf;
    size_t len;
    unsigned char round;
} flusher;

static int flusher_open(flusher *f, uint64_t want)
{
    size_t llc = llc_bytes();
    f->len = want ? (size_t)want : llc ? 2 * llc : (size_t)64 << 20;
    void *p = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return mlprof__fail(MLPROF_ENOMEM, "mlprof_op_profile: cold_cache: cannot map %zu bytes: %s", f->len,
                            strerror(errno));
    f->buf = p;
    return MLPROF_OK;
}

/* Writes over every byte (a new value each time, so that no line is left
 * clean and shared): what the call touched is evicted. */
static void flusher_run(flusher *f)
{
    memset(f->buf, ++f->round, f->len);
    __asm__ __volatile__("" : : "r"(f->buf) : "memory"); /* the stores stay */
}

static void flusher_close(flusher *f)
{
    if (f->buf)
        munmap(f->buf, f->len);
}

/* ------------------------------------------------------------- the runs */

typedef struct runner {
    const mlprof_op_call *call;
    const mlprof_op_options *opt;
    void *ev_start, *ev_stop;
    flusher flush;
} runner;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int called(int rc, const char *what)
{
    if (rc != 0)
        return mlprof__fail(MLPROF_EIO, "mlprof_op_profile: the %s returned %d", what, rc);
    return MLPROF_OK;
}

static int calls(const runner *r, uint64_t n)
{
    const mlprof_op_call *c = r->call;
    if (c->fn_n)
        return called(c->fn_n(c->user, n), "call");
    for (uint64_t i = 0; i < n; i++) {
        int rc = c->fn(c->user);
        if (rc != 0)
            return called(rc, "call");
    }
    return MLPROF_OK;
}

static int setup(runner *r)
{
    if (r->call->setup) {
        int rc = called(r->call->setup(r->call->user), "setup");
        if (rc != MLPROF_OK)
            return rc;
    }
    if (r->opt->cold_cache)
        flusher_run(&r->flush);
    return MLPROF_OK;
}

static int teardown(runner *r)
{
    return r->call->teardown ? called(r->call->teardown(r->call->user), "teardown") : MLPROF_OK;
}

/* One repeat of n calls, set up and torn down: its time in *ns (the host's,
 * or the device's between two events on the stream in GPU mode). */
/* The calls of one repeat, timed; setup and teardown are the caller's. */
static int timed_calls(runner *r, uint64_t n, uint64_t *ns)
{
    if (r->opt->gpu) {
        if (C.record(r->ev_start, r->opt->stream) != 0)
            return mlprof__fail(MLPROF_EIO, "mlprof_op_profile: cudaEventRecord failed");
        int rc = calls(r, n);
        if (rc != MLPROF_OK)
            return rc;
        float ms = 0;
        if (C.record(r->ev_stop, r->opt->stream) != 0 || C.sync(r->ev_stop) != 0 ||
            C.elapsed(&ms, r->ev_start, r->ev_stop) != 0)
            return mlprof__fail(MLPROF_EIO, "mlprof_op_profile: timing with CUDA events failed");
        *ns = ms > 0 ? (uint64_t)((double)ms * 1e6 + 0.5) : 0;
        return MLPROF_OK;
    }
    uint64_t t0 = mono_ns();
    int rc = calls(r, n);
    uint64_t t1 = mono_ns();
    if (rc == MLPROF_OK)
        *ns = t1 - t0;
    return rc;
}

/* One repeat of n calls, set up and torn down (torn down also when a call
 * failed: what setup made is the caller's to release): its time in *ns (the
 * host's, or the device's between two events on the stream in GPU mode). */
static int repeat(runner *r, uint64_t n, uint64_t *ns)
{
    int rc = setup(r);
    if (rc != MLPROF_OK)
        return rc;
    rc = timed_calls(r, n, ns);
    int trc = teardown(r);
    return rc != MLPROF_OK ? rc : trc;
}

/* The shortest a repeat may be: min_repeat_us, and a thousand times the
 * clock's resolution and the cost of reading it twice, so that neither is
 * more than 0.1% of a sample. */
static uint64_t repeat_target_ns(const mlprof_op_options *o)
{
    struct timespec res;
    uint64_t r = clock_getres(CLOCK_MONOTONIC, &res) == 0
                     ? (uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec
                     : 1000;
    uint64_t cost = UINT64_MAX;
    for (int i = 0; i < 32; i++) {
        uint64_t a = mono_ns(), b = mono_ns();
        if (b - a < cost)
            cost = b - a;
    }
    uint64_t floor_ns = 1000 * (r > cost ? r : cost);
    uint64_t want = (uint64_t)(o->min_repeat_us * 1e3);
    return want > floor_ns ? want : floor_ns;
}

/* Warm-up for warmup_ms of host time (one call at least; in GPU mode each
 * call waited for, so that the device's time counts), then the calls per
 * repeat: grown until a repeat reaches the target, from how long the last
 * one took. Cold-cache runs keep 1: a second call would find the cache warm. */
static int warm_and_calibrate(runner *r, uint64_t *inner)
{
    const mlprof_op_options *o = r->opt;
    uint64_t end = mono_ns() + (uint64_t)(o->warmup_ms * 1e6);
    do {
        int rc = setup(r);
        if (rc != MLPROF_OK)
            return rc;
        rc = calls(r, 1);
        if (rc == MLPROF_OK && o->gpu && C.stream_sync(o->stream) != 0)
            rc = mlprof__fail(MLPROF_EIO, "mlprof_op_profile: cudaStreamSynchronize failed");
        int trc = teardown(r); /* after a failed call too */
        if (rc == MLPROF_OK)
            rc = trc;
        if (rc != MLPROF_OK)
            return rc;
    } while (mono_ns() < end);
    *inner = 1;
    if (o->cold_cache)
        return MLPROF_OK;
    uint64_t target = repeat_target_ns(o), n = 1;
    for (;;) {
        uint64_t t;
        int rc = repeat(r, n, &t);
        if (rc != MLPROF_OK)
            return rc;
        if (t >= target || n >= MAX_INNER)
            break;
        /* aim 20% past the target; at most ten times more per step, since the
         * first calls may have been slower or faster than the later ones */
        double grow = t > 0 ? 1.2 * (double)target / (double)t : 10;
        if (grow > 10)
            grow = 10;
        uint64_t next = (uint64_t)ceil((double)n * grow);
        n = next > n ? next : n + 1;
        if (n > MAX_INNER)
            n = MAX_INNER;
    }
    *inner = n;
    return MLPROF_OK;
}

/* ------------------------------------------------------------ workspace */

/* One workspace run at a time: the window is the memory profiler's, one for
 * the process. A call that profiles another op from inside itself measures
 * no workspace for the inner one (it would wait for itself). */
static pthread_mutex_t g_ws_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int t_in_window;
static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

/* A thread of the parent's may have held either lock at a fork (the
 * workspace lock around a whole call): the child's are free. A window left
 * open then only keeps raising a peak that the next open starts again. */
static void op_after_fork(void)
{
    pthread_mutex_init(&g_ws_lock, NULL);
    pthread_mutex_init(&g_cache_lock, NULL);
    t_in_window = 0;
}
static void op_fork_setup(void) { pthread_atfork(NULL, NULL, op_after_fork); }

static int measure_workspace(runner *r, mlprof_op_result *res)
{
    const mlprof_op_options *o = r->opt;
    if (!o->workspace || t_in_window || !__atomic_load_n(&mlprof__mem_on, __ATOMIC_RELAXED))
        return MLPROF_OK; /* stays -1: not measured */
    pthread_mutex_lock(&g_ws_lock);
    t_in_window = 1;
    int rc = setup(r);
    if (rc != MLPROF_OK)
        goto out;
    uint64_t before, after, peak;
    mlprof__ctl_lock();
    mlprof__drain_now(); /* what came before is accounted: the window starts from it */
    mlprof__mem_used(o->workspace_device, &before);
    mlprof__mem_window_open();
    mlprof__ctl_unlock();
    rc = calls(r, 1);
    if (rc == MLPROF_OK && o->gpu && C.stream_sync(o->stream) != 0)
        rc = mlprof__fail(MLPROF_EIO, "mlprof_op_profile: cudaStreamSynchronize failed");
    mlprof__ctl_lock();
    mlprof__drain_now();
    mlprof__mem_window_close(o->workspace_device, &after, &peak);
    int still_on = __atomic_load_n(&mlprof__mem_on, __ATOMIC_RELAXED);
    mlprof__ctl_unlock();
    if (rc == MLPROF_OK)
        rc = teardown(r);
    if (rc != MLPROF_OK || !still_on) /* recording stopped meanwhile: the figure is not whole */
        goto out;
    uint64_t base = before > after ? before : after;
    res->workspace = peak > base ? (int64_t)(peak - base) : 0;
    res->workspace_from = MLPROF_OP_WS_MEMPROF;
    if (__atomic_load_n(&mlprof__malloc_interposed, __ATOMIC_ACQUIRE) && mlprof__hook_on(MLPROF__HOOK_MALLOC) &&
        o->workspace_device == MLPROF_DEVICE_CPU)
        res->workspace_from |= MLPROF_OP_WS_MALLOC;
out:
    t_in_window = 0;
    pthread_mutex_unlock(&g_ws_lock);
    return rc;
}

static void cudnn_workspace(const mlprof_op_options *o, mlprof_op_result *res)
{
    if (!o->cudnn_handle || !o->cudnn_x || !o->cudnn_w || !o->cudnn_conv || !o->cudnn_y)
        return;
    pthread_once(&C.once, cuda_load);
    size_t n = 0;
    if (C.cudnn_ws && C.cudnn_ws(o->cudnn_handle, o->cudnn_x, o->cudnn_w, o->cudnn_conv, o->cudnn_y, o->cudnn_algo,
                                 &n) == 0)
        res->cudnn_workspace = (int64_t)n;
}

/* ---------------------------------------------------------------- cache */

static mlprof__map g_cache; /* key -> mlprof_op_result (ours) */

static int cache_get(const char *key, mlprof_op_result *res)
{
    pthread_mutex_lock(&g_cache_lock);
    const mlprof_op_result *hit = mlprof__map_get(&g_cache, key, strlen(key));
    if (hit) {
        *res = *hit;
        res->cached = 1;
    }
    pthread_mutex_unlock(&g_cache_lock);
    return hit != NULL;
}

/* Keeps the first result for a key: two threads that profiled the same key
 * at once got results equally good, and the one kept is the one given out. */
static void cache_put(const char *key, const mlprof_op_result *res)
{
    mlprof_op_result *copy = mlprof__malloc(sizeof *copy);
    if (!copy)
        return; /* not kept: the next call measures again */
    *copy = *res;
    pthread_mutex_lock(&g_cache_lock);
    mlprof__map_entry *e = mlprof__map_slot(&g_cache, key, strlen(key));
    if (e && !e->value) {
        e->value = copy;
        copy = NULL;
    }
    pthread_mutex_unlock(&g_cache_lock);
    mlprof__free(copy);
}

void mlprof_op_cache_reset(void)
{
    pthread_once(&g_fork_once, op_fork_setup);
    pthread_mutex_lock(&g_cache_lock);
    for (size_t i = 0; i < g_cache.cap; i++) {
        if (g_cache.slots[i].key)
            mlprof__free(g_cache.slots[i].value);
    }
    mlprof__map_free(&g_cache);
    mlprof__map_init(&g_cache);
    pthread_mutex_unlock(&g_cache_lock);
}

size_t mlprof_op_cache_size(void)
{
    pthread_mutex_lock(&g_cache_lock);
    size_t n = g_cache.count;
    pthread_mutex_unlock(&g_cache_lock);
    return n;
}

/* -------------------------------------------------------------- profile */

/* The repeats: until stable (checked at min_repeats, then each time a tenth
 * more are in, so that sorting stays cheap at many repeats), max_repeats, or
 * the budget. */
static int measure(runner *r, uint64_t inner, mlprof_op_result *res)
{
    const mlprof_op_options *o = r->opt;
    double *samples = mlprof__malloc((size_t)o->max_repeats * sizeof *samples);
    double *sorted = mlprof__malloc((size_t)o->max_repeats * sizeof *sorted);
    int rc = MLPROF_OK;
    if (!samples || !sorted) {
        rc = mlprof__fail(MLPROF_ENOMEM, "mlprof_op_profile: out of memory");
        goto out;
    }
    uint64_t deadline = mono_ns() + (uint64_t)(o->budget_ms * 1e6);
    uint32_t n = 0, next_check = o->min_repeats;
    for (;;) {
        uint64_t ns;
        if ((rc = repeat(r, inner, &ns)) != MLPROF_OK)
            goto out;
        samples[n++] = (double)ns / 1e3 / (double)inner;
        if (n >= o->max_repeats || mono_ns() >= deadline)
            break;
        if (n >= next_check) {
            memcpy(sorted, samples, n * sizeof *sorted);
            mlprof__sort(sorted, n, sizeof *sorted, cmp_double);
            stats_sorted(sorted, n, o->confidence, o->stability, res);
            if (res->stable)
                break;
            next_check = n + (n / 10 > 1 ? n / 10 : 1);
        }
    }
    memcpy(sorted, samples, n * sizeof *sorted);
    mlprof__sort(sorted, n, sizeof *sorted, cmp_double);
    stats_sorted(sorted, n, o->confidence, o->stability, res);
    res->repeats = n;
out:
    mlprof__free(samples);
    mlprof__free(sorted);
    return rc;
}

int mlprof_op_profile(const char *key, const mlprof_op_call *call, const mlprof_op_options *opt,
                      mlprof_op_result *res)
{
    mlprof__ensure_init();
    pthread_once(&g_fork_once, op_fork_setup);
    if (!call || (!call->fn && !call->fn_n) || !res)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_op_profile: no call (fn or fn_n) or no result");
    mlprof_op_options defaults;
    if (!opt) {
        mlprof_op_options_init(&defaults);
        opt = &defaults;
    }
    int rc = check_options(opt);
    if (rc != MLPROF_OK)
        return rc;
    if (key && *key && cache_get(key, res))
        return MLPROF_OK;
    if (opt->gpu && !cuda_ok())
        return mlprof__fail(MLPROF_EUNSUPPORTED,
                            "mlprof_op_profile: gpu mode needs the CUDA runtime in the process (cudaEventCreate "
                            "and the event functions were not found)");

    mlprof_op_result out;
    memset(&out, 0, sizeof out);
    out.workspace = -1;
    out.cudnn_workspace = -1;
    runner r = {.call = call, .opt = opt};
    if (opt->cold_cache && (rc = flusher_open(&r.flush, opt->flush_bytes)) != MLPROF_OK)
        return rc;
    if (opt->gpu && (C.create(&r.ev_start) != 0 || C.create(&r.ev_stop) != 0)) {
        rc = mlprof__fail(MLPROF_EIO, "mlprof_op_profile: cudaEventCreate failed");
        goto out;
    }
    uint64_t inner = 1;
    if ((rc = warm_and_calibrate(&r, &inner)) != MLPROF_OK)
        goto out;
    if ((rc = measure_workspace(&r, &out)) != MLPROF_OK)
        goto out;
    cudnn_workspace(opt, &out);
    if ((rc = measure(&r, inner, &out)) != MLPROF_OK)
        goto out;
    out.inner = inner;
    *res = out;
    if (key && *key)
        cache_put(key, &out);
out:
    if (r.ev_start)
        C.destroy(r.ev_start);
    if (r.ev_stop)
        C.destroy(r.ev_stop);
    flusher_close(&r.flush);
    return rc;
}
