/*
 * clock.c - the profiler's clock. The hot path reads the CPU's time-stamp
 * counter where it is invariant (a few ns, no system call) and the collector
 * converts raw ticks to CLOCK_MONOTONIC nanoseconds by interpolating between
 * calibration points, so that all threads and processes of a machine share one
 * time base. Elsewhere, CLOCK_MONOTONIC is read directly.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "record.h"

int mlprof__clock_mode = MLPROF__CLOCK_MONOTONIC;

static uint64_t (*g_custom_fn)(void *);
static void *g_custom_user;

/* Calibration points, oldest first. Guarded by the collector (ctl_lock). */
#define MAX_SYNC 128
typedef struct sync_point {
    uint64_t raw;
    uint64_t ns;
} sync_point;
static sync_point g_sync[MAX_SYNC];
static int g_nsync;
static double g_init_rate; /* ticks per ns from the start-up calibration */

/* The test-only key clock_shift=OFFSET_NS[:DRIFT_PPB]: every timestamp this
 * process writes (records as they are converted, mlprof_now_ns, so the
 * producers and the clock alignment over MPI) becomes
 * t + OFFSET + DRIFT * (t - start) / 1e9, start being when the key took
 * effect. It stands for a rank whose clock is off, so that a test can check
 * that the alignment finds the offset and drift it was given. The sampler's
 * deadlines and CUPTI's timestamps stay on the real clock. Set while nothing is
 * recorded (control.c refuses it otherwise); read lock-free. */
static int64_t g_shift_off, g_shift_ppb;
static uint64_t g_shift_start;

int mlprof__clock_shift_parse(const char *spec, int64_t *offset_ns, int64_t *drift_ppb)
{
    char *end;
    *offset_ns = *drift_ppb = 0;
    if (!*spec)
        return 0;
    errno = 0;
    long long off = strtoll(spec, &end, 10);
    if (end == spec || errno || (*end && *end != ':'))
        return -1;
    long long ppb = 0;
    if (*end == ':') {
        const char *d = end + 1;
        ppb = strtoll(d, &end, 10);
        if (end == d || errno || *end || ppb <= -1000000000LL || ppb >= 1000000000LL)
            return -1; /* a clock must still move forward */
    }
    *offset_ns = off;
    *drift_ppb = ppb;
    return 0;
}

void mlprof__clock_shift_set(const char *spec)
{
    int64_t off, ppb;
    if (mlprof__clock_shift_parse(spec, &off, &ppb) != 0)
        off = ppb = 0; /* the key's check refused it already */
    __atomic_store_n(&g_shift_start, mlprof__clock_monotonic_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&g_shift_ppb, ppb, __ATOMIC_RELAXED);
    __atomic_store_n(&g_shift_off, off, __ATOMIC_RELAXED);
}

int mlprof__clock_shift_get(int64_t *offset_ns, int64_t *drift_ppb, uint64_t *start_ns)
{
    *offset_ns = __atomic_load_n(&g_shift_off, __ATOMIC_RELAXED);
    *drift_ppb = __atomic_load_n(&g_shift_ppb, __ATOMIC_RELAXED);
    *start_ns = __atomic_load_n(&g_shift_start, __ATOMIC_RELAXED);
    return *offset_ns != 0 || *drift_ppb != 0;
}

static uint64_t shifted(uint64_t t)
{
    int64_t off = __atomic_load_n(&g_shift_off, __ATOMIC_RELAXED);
    int64_t ppb = __atomic_load_n(&g_shift_ppb, __ATOMIC_RELAXED);
    if (MLPROF_LIKELY(off == 0 && ppb == 0))
        return t;
    uint64_t start = __atomic_load_n(&g_shift_start, __ATOMIC_RELAXED);
    double v = (double)t + (double)off + (double)ppb * ((double)t - (double)start) / 1e9;
    return v <= 0 ? 0 : (uint64_t)(v + 0.5);
}

uint64_t mlprof__clock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mlprof__clock_slow(void)
{
    if (mlprof__clock_mode == MLPROF__CLOCK_CUSTOM)
        return g_custom_fn(g_custom_user);
    return mlprof__clock_monotonic_ns();
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static int tsc_is_invariant(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}

/* One (tsc, monotonic) pair, the tightest of a few tries. */
static sync_point read_pair(void)
{
    sync_point best = {0, 0};
    uint64_t best_width = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t t0 = __builtin_ia32_rdtsc();
        uint64_t ns = mlprof__clock_monotonic_ns();
        uint64_t t1 = __builtin_ia32_rdtsc();
        if (t1 - t0 < best_width) {
            best_width = t1 - t0;
            best.raw = t0 + (t1 - t0) / 2;
            best.ns = ns;
        }
    }
    return best;
}
#else
static int tsc_is_invariant(void) { return 0; }
static sync_point read_pair(void)
{
    sync_point p = {0, 0};
    return p;
}
#endif

static void seg_drop(void);

static void add_sync(sync_point p)
{
    seg_drop();
    if (g_nsync == MAX_SYNC) {
        /* thin out: keep the first, every other point, and room for the new one */
        int n = 1;
        for (int i = 2; i < MAX_SYNC; i += 2)
            g_sync[n++] = g_sync[i];
        g_nsync = n;
    }
    if (g_nsync > 0 && p.raw <= g_sync[g_nsync - 1].raw)
        return;
    g_sync[g_nsync++] = p;
}

int mlprof__clock_init(const char *mode)
{
    int want_tsc = strcmp(mode, "monotonic") != 0;
    g_nsync = 0;
    seg_drop();
    if (mlprof__clock_mode == MLPROF__CLOCK_CUSTOM)
        return MLPROF_OK;
    if (!want_tsc || !tsc_is_invariant()) {
        if (strcmp(mode, "tsc") == 0)
            mlprof__log(MLPROF_LOG_WARN, "clock=tsc: no invariant time-stamp counter here, using CLOCK_MONOTONIC");
        mlprof__clock_mode = MLPROF__CLOCK_MONOTONIC;
        return MLPROF_OK;
    }
    /* A short start-up calibration gives the rate until later points refine it. */
    sync_point p0 = read_pair();
    uint64_t until = p0.ns + 2000000;
    while (mlprof__clock_monotonic_ns() < until) {
    }
    sync_point p1 = read_pair();
    g_init_rate = (double)(p1.raw - p0.raw) / (double)(p1.ns - p0.ns);
    add_sync(p0);
    add_sync(p1);
    __atomic_store_n(&mlprof__clock_mode, MLPROF__CLOCK_TSC, __ATOMIC_RELEASE);
    return MLPROF_OK;
}

int mlprof_set_clock(uint64_t (*fn)(void *), void *user)
{
    mlprof__ensure_init();
    mlprof__ctl_lock();
    int rc = MLPROF_OK;
    if (mlprof__g.state == MLPROF_STATE_RUN) {
        rc = mlprof__fail(MLPROF_ESTATE, "mlprof_set_clock: stop the profiler first");
    } else if (__atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE)) {
        /* their raw timestamps would be converted on the new clock */
        rc = mlprof__fail(MLPROF_ESTATE, "mlprof_set_clock: events are recorded and not yet dumped "
                                         "(mlprof_dump(1) or mlprof_clear() first)");
    } else if (fn) {
        g_custom_fn = fn;
        g_custom_user = user;
        mlprof__clock_mode = MLPROF__CLOCK_CUSTOM;
        g_nsync = 0;
        seg_drop();
    } else {
        mlprof__clock_mode = MLPROF__CLOCK_MONOTONIC;
        mlprof__clock_init(mlprof__g.cfg.clock);
    }
    mlprof__ctl_unlock();
    return rc;
}

void mlprof__clock_sync(void)
{
    if (mlprof__clock_mode == MLPROF__CLOCK_TSC)
        add_sync(read_pair());
}

static uint64_t to_ns(uint64_t raw);

uint64_t mlprof__clock_to_ns(uint64_t raw) { return shifted(to_ns(raw)); }

/* The segment the last conversion used, with its rate as ns per tick: the
 * timestamps of a dump come in runs within one segment (mostly past the last
 * point), each then a subtraction and a multiplication instead of a search
 * and two divisions. Dropped whenever the points change (seg_drop). */
static struct {
    int valid;
    uint64_t lo, hi; /* raw in [lo, hi) uses it */
    uint64_t a_ns;
    double ns_per_tick;
} g_seg;

static void seg_drop(void) { g_seg.valid = 0; }

static uint64_t to_ns(uint64_t raw)
{
    if (mlprof__clock_mode != MLPROF__CLOCK_TSC || g_nsync == 0)
        return raw;
    if (!(g_seg.valid && raw >= g_seg.lo && raw < g_seg.hi)) {
        /* find the last point at or before raw */
        int lo = 0, hi = g_nsync - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (g_sync[mid].raw <= raw)
                lo = mid;
            else
                hi = mid - 1;
        }
        const sync_point *a = &g_sync[lo];
        double rate;
        if (lo + 1 < g_nsync && raw >= a->raw) {
            const sync_point *b = &g_sync[lo + 1];
            rate = (double)(b->raw - a->raw) / (double)(b->ns - a->ns);
        } else if (g_nsync >= 2) {
            const sync_point *first = &g_sync[0], *last = &g_sync[g_nsync - 1];
            rate = (double)(last->raw - first->raw) / (double)(last->ns - first->ns);
        } else {
            rate = g_init_rate;
        }
        if (!(rate > 0))
            rate = 1.0;
        if (raw < a->raw) { /* before the first point: not kept */
            double ns = (double)a->ns - (double)(a->raw - raw) / rate;
            return ns <= 0 ? 0 : (uint64_t)(ns + 0.5);
        }
        g_seg.lo = a->raw;
        g_seg.hi = lo + 1 < g_nsync ? g_sync[lo + 1].raw : UINT64_MAX;
        g_seg.a_ns = a->ns;
        g_seg.ns_per_tick = 1.0 / rate;
        g_seg.valid = 1;
    }
    double ns = (double)g_seg.a_ns + (double)(raw - g_seg.lo) * g_seg.ns_per_tick;
    return (uint64_t)(ns + 0.5);
}

uint64_t mlprof_now_ns(void)
{
    /* the converted tick clock is CLOCK_MONOTONIC, so read that directly: the
     * calibration points belong to the collector */
    if (mlprof__clock_mode == MLPROF__CLOCK_CUSTOM)
        return shifted(g_custom_fn(g_custom_user));
    return shifted(mlprof__clock_monotonic_ns());
}

const char *mlprof__clock_name(void)
{
    switch (mlprof__clock_mode) {
    case MLPROF__CLOCK_TSC:
        return "tsc (calibrated to CLOCK_MONOTONIC)";
    case MLPROF__CLOCK_CUSTOM:
        return "custom";
    default:
        return "CLOCK_MONOTONIC";
    }
}

double mlprof__clock_rate_hz(void)
{
    if (mlprof__clock_mode != MLPROF__CLOCK_TSC || g_nsync < 2)
        return 1e9;
    const sync_point *first = &g_sync[0], *last = &g_sync[g_nsync - 1];
    return 1e9 * (double)(last->raw - first->raw) / (double)(last->ns - first->ns);
}
