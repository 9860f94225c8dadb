/*
 * counters.c - per-kernel metrics through CUPTI's range profiler (CUDA 12.6
 * and later) and its profiler host API, for gpu_metrics and the measured
 * gpu_details (achieved_occupancy, branch_efficiency).
 *
 * The range profiler runs in auto range mode with kernel replay: every
 * kernel launched on a context while it is started becomes one range, its
 * counters collected by replaying the kernel as many times as the metrics
 * need passes. Ranges are numbered in launch order and carry no name but
 * their number, so mlprof subscribes to CUPTI's callbacks for the kernel
 * launches and keeps, per context, the launches in the order they came: the
 * i-th range of a batch is the i-th launch. Each launch is kept with its
 * correlation id (the runtime call's when the kernel was launched through
 * the runtime, as its activity record has), its thread and its times; the
 * collector looks up the CPU operators open at it, as for activity records.
 *
 * A context is set up at its first launch (on the launching thread, where it
 * is current): chip name, counter availability, the host object and its
 * configuration image for the metrics, the range profiler object and its
 * counter data image for gpu_metrics_batch ranges. When a batch is full, the
 * launching thread stops the profiler, decodes and evaluates the batch and
 * starts it again before its launch goes on, so no range is dropped; the
 * rest of a batch is evaluated at a stop, a pause, a final dump and before
 * the context is destroyed.
 *
 * Values are never given to a kernel on a guess. A batch's ranges are
 * matched to its launches only when their numbers agree (ranges and dropped
 * ones against launches that did not fail), when no launch of the batch
 * overlapped another thread's (the order of ranges would then not be known)
 * and when it holds no CUDA graph (a graph launches many kernels in one
 * call: each graph launch is a batch of its own). Any other batch is
 * counted in otherData.gpu.counters and said, not written.
 *
 * Nothing here runs unless gpu_metrics (or a measured detail) is set: the
 * callbacks and the replay make every launch far slower, as with Nsight
 * Compute. CUPTI takes one callback subscriber per process: when another
 * tool holds it, that is said and the activity records go on without
 * metrics.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../record/produce.h"
#include "../hw/hw.h"
#include "../record/record.h"
#include "cupti_prof_abi.h"
#include "gpu_internal.h"

#define MAX_CTX 64
#define MAX_NAMES 256
#define MAX_SAID 8

static const uint32_t k_runtime_launch[] = {MLPROF__CUPTI_RUNTIME_LAUNCHES};
static const uint32_t k_driver_launch[] = {MLPROF__CUPTI_DRIVER_LAUNCHES};
static const uint32_t k_runtime_graph[] = {MLPROF__CUPTI_RUNTIME_GRAPHS};
static const uint32_t k_driver_graph[] = {MLPROF__CUPTI_DRIVER_GRAPHS};

typedef int (*cupti_fn)(void *params);

/* One profiled launch: range i of its context's batch is launch i. */
typedef struct rlaunch {
    uint32_t seq;  /* mlprof's number, to find it again */
    uint32_t corr; /* the runtime call's id, else the driver call's */
    uint8_t graph, asked, failed;
    pid_t tid;
    uint64_t enter_ns, exit_ns;
    const char *symbol;     /* mangled, interned here */
    const char *op, *stack; /* the CPU spans open at the launch (activity.c's strings) */
} rlaunch;

/* A kernel whose counters were evaluated, waiting for the next drain: its
 * values are n (metric id, value) pairs from R.VI and R.V at `values`. */
typedef struct result {
    rlaunch l;
    uint32_t device, n;
    size_t values;
} result;

typedef struct rctx {
    void *ctx;
    uint32_t device;
    int state; /* 0 set up, stopped; 1 started; -1 failed */
    void *host, *object;
    uint8_t *config, *data;
    size_t config_size, data_size, passes;
    const char *names[MLPROF__GPU_MAX_METRICS]; /* the metrics this device knows */
    uint16_t ids[MLPROF__GPU_MAX_METRICS];      /* and their ids in R.names */
    size_t n;
    rlaunch *L;
    size_t nl, capl;
    int in_flight;   /* launches on it between their first callback and their last */
    int tainted;     /* launches overlapped across threads: the order of ranges is not known */
    size_t ran_over; /* launches seen after their kernel ran into a full batch */
} rctx;

static struct {
    pthread_mutex_t lock;  /* all but what setup guards: launching threads, control, collector */
    pthread_mutex_t setup; /* loading, initializing and subscribing (callbacks may wait on lock) */
    int loaded, failed, subscribed, running, forked;
    int prof_ready; /* cuptiProfilerInitialize: 1 done, -1 failed (at the first context) */
    struct avail {  /* counter availability by device: it cannot be read while a session runs there */
        uint32_t device;
        uint8_t *image;
    } avail[16];
    size_t navail;
    void *lib, *subscriber;
    char why[512];
    int (*subscribe)(void **, cupti_callback_fn, void *);
    int (*enable_callback)(uint32_t, void *, uint32_t, uint32_t);
    int (*device_id)(void *ctx, uint32_t *dev);
    cupti_fn prof_init, chip_name, availability;
    cupti_fn host_init, host_deinit, host_add, host_image_size, host_image, host_passes, host_evaluate;
    cupti_fn rp_enable, rp_disable, rp_start, rp_stop, rp_decode, rp_data_size, rp_data_init, rp_set_config,
        rp_data_info;
    int (*ctx_push)(void *);
    int (*ctx_pop)(void **);

    char names[MAX_NAMES][MLPROF__GPU_METRIC_LEN]; /* every metric ever asked for: results keep ids */
    size_t nnames;
    uint8_t refused[MAX_NAMES]; /* by a device: left out of otherData's list */
    mlprof__gpu_metric_set set; /* this run's */
    uint16_t set_ids[MLPROF__GPU_MAX_METRICS];
    size_t batch;
    char configured[MLPROF__GPU_KEY + 64]; /* what the contexts were set up for */
    rctx C[MAX_CTX];
    size_t nc;
    uint32_t seq;
    int in_flight; /* launches between their first callback and their last, all threads */
    mlprof__map symbols;

    result *R; /* evaluated since the last drain */
    size_t nr, capr;
    double *V;
    uint16_t *VI;
    size_t nv, capv, capvi;

    /* the collector's (ctl_lock): results being written, and the launches asked about */
    result *O;
    size_t no, capo;
    double *OV;
    uint16_t *OVI;
    size_t capov, capovi;
    struct ask {
        uint32_t seq;
        pid_t tid;
        uint64_t ns;
        const char *op, *stack;
    } *A;
    size_t na, capa;

    struct said {
        char what[200], why[512];
    } said[MAX_SAID]; /* what cannot be measured, said once the lock is let go */
    int nsaid;

    uint64_t measured, unmatched, graph_ranges, concurrent_ranges, mismatched, dropped, unmeasured;
    uint64_t failed_evals, lost, reported;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .setup = PTHREAD_MUTEX_INITIALIZER};

static __thread struct {
    uint32_t corr, depth;
    uint64_t enter_ns;
    int graph, pending; /* pending: a runtime launch whose driver call has not been seen */
    int driver_outer;   /* a driver launch outside any runtime call is in flight */
    const char *symbol;
    void *ctx;   /* the context of this thread's launch being recorded */
    int counted; /* and whether it is counted in flight there */
} t_rt;

static pid_t my_tid(void)
{
    static __thread pid_t tid;
    if (!tid)
        tid = (pid_t)syscall(SYS_gettid);
    return tid;
}

/* What cannot be measured, kept while R.lock is held (the log handler is
 * the user's, and may call mlprof), said by unlock(). */
static void say(const char *what, const char *why)
{
    if (R.nsaid == MAX_SAID)
        return;
    snprintf(R.said[R.nsaid].what, sizeof R.said[R.nsaid].what, "%s", what);
    snprintf(R.said[R.nsaid].why, sizeof R.said[R.nsaid].why, "%s", why);
    R.nsaid++;
}

static void unlock(void)
{
    struct said said[MAX_SAID];
    int n = R.nsaid;
    memcpy(said, R.said, (size_t)n * sizeof *said);
    R.nsaid = 0;
    pthread_mutex_unlock(&R.lock);
    for (int i = 0; i < n; i++)
        mlprof__hw_unavailable(said[i].what, said[i].why);
}

/* The context's driver functions, looked up when first needed: the process
 * has libcuda loaded once it has a context (libcupti does not link it). */
static int push(const rctx *c)
{
    if (!R.ctx_push) {
        void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        void *from = cuda ? cuda : R.lib; /* the tests' fake has them */
        R.ctx_pop = (int (*)(void **))dlsym(from, "cuCtxPopCurrent_v2");
        R.ctx_push = R.ctx_pop ? (int (*)(void *))dlsym(from, "cuCtxPushCurrent_v2") : NULL;
    }
    return R.ctx_push && R.ctx_push(c->ctx) == 0;
}

/* Makes c's context current around a call from another thread than its own
 * (a stop from the control thread): pop(push(c)). */
static void pop(int pushed)
{
    void *popped = NULL;
    if (pushed)
        R.ctx_pop(&popped);
}

/* The id of a metric name in R.names (added if new); -1 when full. */
static int name_id(const char *name)
{
    for (size_t i = 0; i < R.nnames; i++) {
        if (strcmp(R.names[i], name) == 0)
            return (int)i;
    }
    if (R.nnames == MAX_NAMES)
        return -1;
    snprintf(R.names[R.nnames], sizeof R.names[R.nnames], "%s", name);
    return (int)R.nnames++;
}

/* ------------------------------------------------------------- loading */

static int load(void *lib)
{
    struct {
        const char *name;
        void **fn;
    } table[] = {
        {"cuptiSubscribe", (void **)&R.subscribe},
        {"cuptiEnableCallback", (void **)&R.enable_callback},
        {"cuptiGetDeviceId", (void **)&R.device_id},
        {"cuptiProfilerInitialize", (void **)&R.prof_init},
        {"cuptiDeviceGetChipName", (void **)&R.chip_name},
        {"cuptiProfilerGetCounterAvailability", (void **)&R.availability},
        {"cuptiProfilerHostInitialize", (void **)&R.host_init},
        {"cuptiProfilerHostDeinitialize", (void **)&R.host_deinit},
        {"cuptiProfilerHostConfigAddMetrics", (void **)&R.host_add},
        {"cuptiProfilerHostGetConfigImageSize", (void **)&R.host_image_size},
        {"cuptiProfilerHostGetConfigImage", (void **)&R.host_image},
        {"cuptiProfilerHostGetNumOfPasses", (void **)&R.host_passes},
        {"cuptiProfilerHostEvaluateToGpuValues", (void **)&R.host_evaluate},
        {"cuptiRangeProfilerEnable", (void **)&R.rp_enable},
        {"cuptiRangeProfilerDisable", (void **)&R.rp_disable},
        {"cuptiRangeProfilerStart", (void **)&R.rp_start},
        {"cuptiRangeProfilerStop", (void **)&R.rp_stop},
        {"cuptiRangeProfilerDecodeData", (void **)&R.rp_decode},
        {"cuptiRangeProfilerGetCounterDataSize", (void **)&R.rp_data_size},
        {"cuptiRangeProfilerCounterDataImageInitialize", (void **)&R.rp_data_init},
        {"cuptiRangeProfilerSetConfig", (void **)&R.rp_set_config},
        {"cuptiRangeProfilerGetCounterDataInfo", (void **)&R.rp_data_info},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].fn = dlsym(lib, table[i].name);
        if (!*table[i].fn) {
            snprintf(R.why, sizeof R.why,
                     "libcupti has no %s: the range profiler needs CUPTI from CUDA 12.6 or later", table[i].name);
            return -1;
        }
    }
    R.lib = lib;
    mlprof__map_init(&R.symbols);
    return 0;
}

/* ------------------------------------------------------------ contexts */

/* Says why a context cannot be profiled; it is left alone from then on. */
static void ctx_fail(rctx *c, const char *call, int rc)
{
    char why[512];
    if (rc == CUPTI_ERR_INSUFFICIENT_PRIVILEGES)
        snprintf(why, sizeof why, "%s: %s (%d): GPU performance counters are for administrators only on this "
                                  "machine (NVreg_RestrictProfilingToAdminUsers=0 opens them to every user)",
                 call, mlprof__cupti_result(rc), rc);
    else
        snprintf(why, sizeof why, "%s failed on device %u: %s (%d)", call, c->device, mlprof__cupti_result(rc), rc);
    say("gpu metrics", why);
    c->state = -1;
}

static void ctx_release(rctx *c)
{
    int pushed = push(c);
    if (c->object) {
        cupti_rp_object d = {MLPROF__CUPTI_SIZE(cupti_rp_object, object), NULL, c->object};
        R.rp_disable(&d);
    }
    if (c->host) {
        cupti_host_deinit d = {MLPROF__CUPTI_SIZE(cupti_host_deinit, host), NULL, c->host};
        R.host_deinit(&d);
    }
    pop(pushed);
    mlprof__free(c->config);
    mlprof__free(c->data);
    mlprof__free(c->L);
    memset(c, 0, sizeof *c);
}

/* A host object configured for metrics[0..n); 0, or CUPTI's error. */
static int host_for(const char *chip, const uint8_t *avail, const char **metrics, size_t n, void **host)
{
    cupti_host_init hi = {MLPROF__CUPTI_SIZE(cupti_host_init, host), NULL, CUPTI_PROFILER_RANGE_PROFILER, chip, avail,
                          NULL};
    int rc = R.host_init(&hi);
    if (rc != CUPTI_OK)
        return rc;
    cupti_host_add_metrics am = {MLPROF__CUPTI_SIZE(cupti_host_add_metrics, n), NULL, hi.host, metrics, n};
    rc = R.host_add(&am);
    if (rc != CUPTI_OK) {
        cupti_host_deinit d = {MLPROF__CUPTI_SIZE(cupti_host_deinit, host), NULL, hi.host};
        R.host_deinit(&d);
        return rc;
    }
    *host = hi.host;
    return CUPTI_OK;
}

/* The metrics this device knows: all of them, or, when CUPTI refuses the
 * list, each tried alone; each refused one is said. */
static int choose_metrics(rctx *c, const char *chip, const uint8_t *avail)
{
    const char *all[MLPROF__GPU_MAX_METRICS];
    for (size_t i = 0; i < R.set.n; i++)
        all[i] = R.names[R.set_ids[i]];
    int rc = host_for(chip, avail, all, R.set.n, &c->host);
    c->n = 0;
    for (size_t i = 0; i < R.set.n; i++) {
        void *h = NULL;
        int one = rc == CUPTI_OK ? CUPTI_OK : host_for(chip, avail, &all[i], 1, &h);
        if (h) {
            cupti_host_deinit d = {MLPROF__CUPTI_SIZE(cupti_host_deinit, host), NULL, h};
            R.host_deinit(&d);
        }
        if (one == CUPTI_OK) {
            c->names[c->n] = all[i];
            c->ids[c->n++] = R.set_ids[i];
            continue;
        }
        char what[200], why[300];
        snprintf(what, sizeof what, "gpu metric %s", all[i]);
        snprintf(why, sizeof why, "CUPTI does not know it on %s: %s (%d)", chip, mlprof__cupti_result(one), one);
        say(what, why);
        R.refused[R.set_ids[i]] = 1;
    }
    if (rc == CUPTI_OK)
        return 0;
    if (c->n)
        rc = host_for(chip, avail, c->names, c->n, &c->host);
    if (!c->n || rc != CUPTI_OK) {
        ctx_fail(c, "cuptiProfilerHostConfigAddMetrics", rc);
        return -1;
    }
    return 0;
}

/* Resets the counter data image and starts a batch. */
static int batch_start(rctx *c)
{
    cupti_rp_data_init di = {MLPROF__CUPTI_SIZE(cupti_rp_data_init, counter_data), NULL, c->object, c->data_size,
                             c->data};
    int rc = R.rp_data_init(&di);
    if (rc != CUPTI_OK) {
        ctx_fail(c, "cuptiRangeProfilerCounterDataImageInitialize", rc);
        return -1;
    }
    cupti_rp_set_config sc;
    memset(&sc, 0, sizeof sc);
    sc.size = MLPROF__CUPTI_SIZE(cupti_rp_set_config, target_nesting_level);
    sc.object = c->object;
    sc.config_size = c->config_size;
    sc.config = c->config;
    sc.counter_data_size = c->data_size;
    sc.counter_data = c->data;
    sc.range = CUPTI_AUTO_RANGE;
    sc.replay_mode = CUPTI_KERNEL_REPLAY;
    sc.max_ranges_per_pass = R.batch;
    sc.num_nesting_levels = 1;
    sc.min_nesting_level = 1;
    sc.pass_index = 0;
    sc.target_nesting_level = 1;
    rc = R.rp_set_config(&sc);
    if (rc != CUPTI_OK) {
        ctx_fail(c, "cuptiRangeProfilerSetConfig", rc);
        return -1;
    }
    cupti_rp_object st = {MLPROF__CUPTI_SIZE(cupti_rp_object, object), NULL, c->object};
    rc = R.rp_start(&st);
    if (rc != CUPTI_OK) {
        ctx_fail(c, "cuptiRangeProfilerStart", rc);
        return -1;
    }
    c->state = 1;
    c->nl = 0;
    c->tainted = c->in_flight > 0; /* another thread's launch may land in this batch or not */
    c->ran_over = 0;
    return 0;
}

/* The device's counter availability image, read at its first context (it
 * cannot be read while a session runs on the device); NULL when CUPTI
 * cannot give it, which the host API accepts for the chips it knows. */
static const uint8_t *availability(const rctx *c)
{
    for (size_t i = 0; i < R.navail; i++) {
        if (R.avail[i].device == c->device)
            return R.avail[i].image;
    }
    cupti_counter_avail ca = {MLPROF__CUPTI_SIZE(cupti_counter_avail, image), NULL, c->ctx, 0, NULL};
    int rc = R.availability(&ca);
    uint8_t *image = rc == CUPTI_OK && ca.image_size ? mlprof__malloc(ca.image_size) : NULL;
    if (image) {
        ca.image = image;
        rc = R.availability(&ca);
    }
    if (rc != CUPTI_OK) {
        mlprof__free(image);
        return NULL;
    }
    if (R.navail < sizeof R.avail / sizeof R.avail[0]) {
        R.avail[R.navail].device = c->device;
        R.avail[R.navail++].image = image;
    }
    return image;
}

/* Sets a context up for the metrics (on a thread where it is current). */
static int ctx_setup(rctx *c)
{
    int rc = R.device_id(c->ctx, &c->device);
    if (rc != CUPTI_OK) {
        ctx_fail(c, "cuptiGetDeviceId", rc);
        return -1;
    }
    cupti_chip_name cn = {MLPROF__CUPTI_SIZE(cupti_chip_name, chip), NULL, c->device, NULL};
    rc = R.chip_name(&cn);
    if (rc != CUPTI_OK || !cn.chip) {
        ctx_fail(c, "cuptiDeviceGetChipName", rc);
        return -1;
    }
    if (choose_metrics(c, cn.chip, availability(c)) != 0)
        return -1;
    cupti_host_config_image ci = {MLPROF__CUPTI_SIZE(cupti_host_config_image, image_size), NULL, c->host, 0, NULL};
    rc = R.host_image_size(&ci);
    c->config = rc == CUPTI_OK && ci.image_size ? mlprof__malloc(ci.image_size) : NULL;
    if (c->config) {
        ci.size = MLPROF__CUPTI_SIZE(cupti_host_config_image, image);
        ci.image = c->config;
        rc = R.host_image(&ci);
        c->config_size = ci.image_size;
    }
    if (rc != CUPTI_OK || !c->config) {
        ctx_fail(c, "cuptiProfilerHostGetConfigImage", rc);
        return -1;
    }
    cupti_host_passes hp = {MLPROF__CUPTI_SIZE(cupti_host_passes, passes), NULL, c->config_size, c->config, 0};
    if (R.host_passes(&hp) == CUPTI_OK)
        c->passes = hp.passes;
    cupti_rp_enable en = {MLPROF__CUPTI_SIZE(cupti_rp_enable, object), NULL, c->ctx, NULL};
    rc = R.rp_enable(&en);
    if (rc != CUPTI_OK) {
        ctx_fail(c, "cuptiRangeProfilerEnable", rc);
        return -1;
    }
    c->object = en.object;
    cupti_rp_data_size ds = {MLPROF__CUPTI_SIZE(cupti_rp_data_size, counter_data_size),
                             NULL,
                             c->object,
                             c->names,
                             c->n,
                             R.batch,
                             (uint32_t)R.batch,
                             0};
    rc = R.rp_data_size(&ds);
    c->data = rc == CUPTI_OK && ds.counter_data_size ? mlprof__malloc(ds.counter_data_size) : NULL;
    c->data_size = ds.counter_data_size;
    if (!c->data) {
        ctx_fail(c, "cuptiRangeProfilerGetCounterDataSize", rc);
        return -1;
    }
    return 0;
}

static rctx *ctx_find(void *ctx)
{
    for (size_t i = 0; ctx && i < R.nc; i++) {
        if (R.C[i].ctx == ctx)
            return &R.C[i];
    }
    return NULL;
}

/* The context of a launch, set up and started at its first one. */
static rctx *ctx_get(void *ctx)
{
    rctx *c = ctx_find(ctx);
    if (c || !ctx)
        return c;
    if (R.nc == MAX_CTX) {
        say("gpu metrics", "more than 64 CUDA contexts: the kernels of the others are not measured");
        return NULL;
    }
    if (!R.prof_ready) { /* at the first context: CUPTI's profiler wants the driver initialized */
        cupti_prof_init pi = {MLPROF__CUPTI_SIZE(cupti_prof_init, priv), NULL};
        int rc = R.prof_init(&pi);
        R.prof_ready = rc == CUPTI_OK ? 1 : -1;
        if (rc != CUPTI_OK) {
            char why[300];
            snprintf(why, sizeof why, "cuptiProfilerInitialize failed: %s (%d)", mlprof__cupti_result(rc), rc);
            say("gpu metrics", why);
        }
    }
    if (R.prof_ready < 0)
        return NULL;
    c = &R.C[R.nc++];
    memset(c, 0, sizeof *c);
    c->ctx = ctx;
    if (ctx_setup(c) == 0)
        batch_start(c);
    return c;
}

/* Every started batch: a launch in flight on another thread, its context
 * not known, may land in any of them. */
static void taint_all(void)
{
    for (size_t i = 0; i < R.nc; i++) {
        if (R.C[i].state == 1)
            R.C[i].tainted = 1;
    }
}

/* ---------------------------------------------------------- evaluation */

/* p with room for need items of size (at least doubled), or NULL. */
static void *reserve(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = *cap * 2 > need ? *cap * 2 : need;
    void *q = mlprof__realloc(p, c * size);
    if (q)
        *cap = c;
    return q;
}

static void keep_result(const rctx *c, const rlaunch *l, const double *values)
{
    result *r = reserve(R.R, &R.capr, R.nr + 1, sizeof *R.R);
    if (r)
        R.R = r;
    double *v = r ? reserve(R.V, &R.capv, R.nv + c->n, sizeof *R.V) : NULL;
    if (v)
        R.V = v;
    uint16_t *vi = v ? reserve(R.VI, &R.capvi, R.nv + c->n, sizeof *R.VI) : NULL;
    if (!vi) {
        R.lost++;
        return;
    }
    R.VI = vi;
    result *out = &R.R[R.nr++];
    out->l = *l;
    out->device = c->device;
    out->values = R.nv;
    out->n = (uint32_t)c->n;
    for (size_t i = 0; i < c->n; i++) {
        R.V[R.nv + i] = values[i];
        R.VI[R.nv + i] = c->ids[i];
    }
    R.nv += c->n;
    R.measured++;
}

/* Stops the batch, decodes it and matches its ranges to its launches:
 * only when their numbers agree, no graph is among them and no launch
 * overlapped another thread's; otherwise the batch is counted, not guessed. */
static void batch_finish(rctx *c)
{
    if (c->state != 1)
        return;
    int pushed = push(c);
    cupti_rp_stop sp;
    memset(&sp, 0, sizeof sp);
    sp.size = MLPROF__CUPTI_SIZE(cupti_rp_stop, all_passes_submitted);
    sp.object = c->object;
    int rc = R.rp_stop(&sp);
    cupti_rp_decode dd = {MLPROF__CUPTI_SIZE(cupti_rp_decode, ranges_dropped), NULL, c->object, 0};
    if (rc == CUPTI_OK)
        rc = R.rp_decode(&dd);
    cupti_rp_data_info info = {MLPROF__CUPTI_SIZE(cupti_rp_data_info, ranges), NULL, c->data, c->data_size, 0};
    if (rc == CUPTI_OK)
        rc = R.rp_data_info(&info);
    c->state = 0;
    /* launches that failed made no range */
    size_t nl = 0, graphs = 0;
    for (size_t i = 0; i < c->nl; i++) {
        if (!c->L[i].failed) {
            graphs += c->L[i].graph;
            c->L[nl++] = c->L[i];
        }
    }
    c->nl = 0;
    if (rc != CUPTI_OK) {
        pop(pushed);
        R.unmeasured += nl;
        ctx_fail(c, "cuptiRangeProfilerStop or DecodeData", rc);
        return;
    }
    R.dropped += dd.ranges_dropped;
    if (graphs || c->tainted || info.ranges + dd.ranges_dropped != nl + c->ran_over) {
        R.unmatched += info.ranges;
        if (graphs)
            R.graph_ranges += info.ranges;
        else if (c->tainted)
            R.concurrent_ranges += info.ranges;
        else
            R.mismatched++;
        R.unmeasured += nl - graphs;
        pop(pushed);
        return;
    }
    double values[MLPROF__GPU_MAX_METRICS];
    for (size_t i = 0; i < info.ranges && i < nl; i++) { /* the rest were dropped, in launch order */
        cupti_host_evaluate ev = {MLPROF__CUPTI_SIZE(cupti_host_evaluate, values),
                                  NULL,
                                  c->host,
                                  c->data,
                                  c->data_size,
                                  i,
                                  c->names,
                                  c->n,
                                  values};
        if (R.host_evaluate(&ev) != CUPTI_OK)
            R.failed_evals++;
        else
            keep_result(c, &c->L[i], values);
    }
    pop(pushed);
}

/* Ends the batch and begins the next, on a started context. */
static void batch_rotate(rctx *c)
{
    batch_finish(c);
    if (c->state == 0 && R.running)
        batch_start(c);
}

/* ------------------------------------------------------------ callbacks */

static int in(uint32_t cbid, const uint32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == cbid)
            return 1;
    }
    return 0;
}
#define IN(cbid, ids) in(cbid, ids, sizeof ids / sizeof ids[0])

/* A launch on ctx: the next range of its batch (R.lock held). ran: its
 * kernel has already run (seen only at the runtime call's exit). */
static void add_launch(void *ctx, uint32_t corr, const char *symbol, int graph, uint64_t enter_ns, int ran)
{
    if (!R.running)
        return;
    int fresh = ctx_find(ctx) == NULL;
    rctx *c = ctx_get(ctx);
    if (!c || c->state < 0)
        return;
    if (fresh && ran) { /* set up after its kernel ran: not measured */
        R.unmeasured++;
        return;
    }
    if (ran && R.in_flight > 1) /* it ran while others were in flight, their contexts not known */
        c->tainted = 1;
    if (c->state == 0 && batch_start(c) != 0)
        return;
    if (ran && c->nl >= R.batch) { /* its range fell beyond the full batch */
        c->ran_over++;
        R.unmeasured++;
        return;
    }
    /* a graph's kernels are a batch of their own; so is a full batch */
    if (c->nl >= R.batch || (c->nl && (graph || c->L[c->nl - 1].graph))) {
        batch_rotate(c);
        if (c->state != 1)
            return;
    }
    rlaunch *L = reserve(c->L, &c->capl, c->nl + 1, sizeof *c->L);
    if (!L) {
        R.unmeasured++;
        c->tainted = 1; /* its range will come, its launch is not kept */
        return;
    }
    c->L = L;
    if (!ran && c->in_flight++ > 0) /* in flight on c until its exit: another's now makes the order unknown */
        c->tainted = 1;
    t_rt.ctx = ctx;
    t_rt.counted = !ran;
    rlaunch *l = &c->L[c->nl++];
    memset(l, 0, sizeof *l);
    l->seq = ++R.seq;
    l->corr = corr;
    l->graph = (uint8_t)graph;
    l->tid = my_tid();
    l->enter_ns = enter_ns;
    if (symbol && *symbol) {
        mlprof__map_entry *e = mlprof__map_slot(&R.symbols, symbol, strlen(symbol));
        l->symbol = e ? e->key : NULL;
    }
}

/* The exit of this thread's launch recorded on t_rt.ctx: its end time and
 * failure; a graph's batch is ended at once. */
static void end_launch(uint64_t exit_ns, int failed)
{
    rctx *c = ctx_find(t_rt.ctx);
    if (c && t_rt.counted && c->in_flight > 0)
        c->in_flight--;
    t_rt.ctx = NULL;
    t_rt.counted = 0;
    pid_t tid = my_tid();
    for (size_t i = c ? c->nl : 0; i > 0; i--) {
        rlaunch *l = &c->L[i - 1];
        if (l->tid != tid)
            continue;
        l->exit_ns = exit_ns;
        l->failed = (uint8_t)failed;
        if (l->graph && c->state == 1)
            batch_rotate(c);
        return;
    }
}

static int call_failed(const cupti_callback_data *d)
{
    return d->function_return_value && *(const int *)d->function_return_value != 0;
}

static void on_launch(uint32_t domain, uint32_t cbid, const cupti_callback_data *d)
{
    int runtime = domain == CUPTI_DOMAIN_RUNTIME;
    int graph = runtime ? IN(cbid, k_runtime_graph) : IN(cbid, k_driver_graph);
    uint64_t now = mlprof_now_ns();
    pthread_mutex_lock(&R.lock);
    if (d->site == CUPTI_SITE_ENTER) {
        if (runtime) {
            /* taken here where a context is current; else (the runtime makes
             * it lazily) at the driver call inside, or at this call's exit */
            if (t_rt.depth++ == 0) {
                R.in_flight++; /* an outermost launch call of this thread */
                t_rt.corr = d->correlation_id;
                t_rt.graph = graph;
                t_rt.enter_ns = now;
                t_rt.pending = d->context == NULL;
                t_rt.symbol = d->symbol_name;
                if (d->context)
                    add_launch(d->context, d->correlation_id, d->symbol_name, graph, now, 0);
            }
        } else if (t_rt.depth && t_rt.pending) {
            t_rt.pending = 0;
            add_launch(d->context, t_rt.corr, d->symbol_name ? d->symbol_name : t_rt.symbol, t_rt.graph,
                       t_rt.enter_ns, 0);
        } else if (!t_rt.depth && !t_rt.driver_outer) {
            t_rt.driver_outer = 1;
            R.in_flight++;
            add_launch(d->context, d->correlation_id, d->symbol_name, graph, now, 0);
        }
    } else if (runtime && t_rt.depth && --t_rt.depth == 0) {
        if (t_rt.pending) { /* no driver callback came inside: the launch is known only now */
            t_rt.pending = 0;
            add_launch(d->context, t_rt.corr, d->symbol_name ? d->symbol_name : t_rt.symbol, t_rt.graph,
                       t_rt.enter_ns, 1);
        }
        end_launch(now, call_failed(d));
        R.in_flight--;
    } else if (!runtime && !t_rt.depth && t_rt.driver_outer) {
        t_rt.driver_outer = 0;
        end_launch(now, call_failed(d));
        R.in_flight--;
    }
    unlock();
}

static void on_resource(uint32_t cbid, const cupti_resource_data *d)
{
    if (cbid != CUPTI_RESOURCE_CONTEXT_DESTROY_STARTING)
        return;
    pthread_mutex_lock(&R.lock);
    rctx *c = ctx_find(d->context);
    if (c) {
        batch_finish(c);
        ctx_release(c);
        *c = R.C[--R.nc]; /* launches and results are copies: nothing points into a context */
    }
    unlock();
}

static void on_callback(void *userdata, uint32_t domain, uint32_t cbid, const void *data)
{
    (void)userdata;
    if (R.forked || !data)
        return;
    mlprof__busy++;
    if (domain == CUPTI_DOMAIN_RESOURCE)
        on_resource(cbid, data);
    else if (domain == CUPTI_DOMAIN_RUNTIME || domain == CUPTI_DOMAIN_DRIVER)
        on_launch(domain, cbid, data);
    mlprof__busy--;
}

/* ------------------------------------------------------------- on, off */

static int subscribe(void)
{
    int rc = R.subscribe(&R.subscriber, on_callback, NULL);
    if (rc == CUPTI_ERR_MULTIPLE_SUBSCRIBERS) {
        snprintf(R.why, sizeof R.why, "another CUPTI client of this process (torch.profiler, Nsight, a tool loaded "
                                      "with CUDA_INJECTION64_PATH) holds CUPTI's only callback subscription");
        return -1;
    }
    if (rc != CUPTI_OK) {
        snprintf(R.why, sizeof R.why, "cuptiSubscribe failed: %s (%d)", mlprof__cupti_result(rc), rc);
        return -1;
    }
    struct {
        uint32_t domain;
        const uint32_t *ids;
        size_t n;
    } lists[] = {
        {CUPTI_DOMAIN_RUNTIME, k_runtime_launch, sizeof k_runtime_launch / sizeof k_runtime_launch[0]},
        {CUPTI_DOMAIN_RUNTIME, k_runtime_graph, sizeof k_runtime_graph / sizeof k_runtime_graph[0]},
        {CUPTI_DOMAIN_DRIVER, k_driver_launch, sizeof k_driver_launch / sizeof k_driver_launch[0]},
        {CUPTI_DOMAIN_DRIVER, k_driver_graph, sizeof k_driver_graph / sizeof k_driver_graph[0]},
    };
    rc = R.enable_callback(1, R.subscriber, CUPTI_DOMAIN_RESOURCE, CUPTI_RESOURCE_CONTEXT_DESTROY_STARTING);
    for (size_t i = 0; rc == CUPTI_OK && i < sizeof lists / sizeof lists[0]; i++) {
        for (size_t j = 0; rc == CUPTI_OK && j < lists[i].n; j++) {
            rc = R.enable_callback(1, R.subscriber, lists[i].domain, lists[i].ids[j]);
            if (rc != CUPTI_OK && j > 0) /* all but cudaLaunchKernel, cuLaunchKernel and the first graph launch */
                rc = CUPTI_OK;           /* an id this (older) CUPTI does not have: its launches are not seen */
        }
    }
    if (rc != CUPTI_OK) {
        snprintf(R.why, sizeof R.why, "cuptiEnableCallback failed: %s (%d)", mlprof__cupti_result(rc), rc);
        return -1;
    }
    return 0;
}

/* Whether an NVIDIA driver is installed (else no launch would ever come,
 * and nothing would say why). The tests' fake libcupti stands for one by
 * having the driver's cuDriverGetVersion. */
static int has_driver(char *why, size_t len)
{
    return !mlprof__cupti_no_driver(why, len) || dlsym(R.lib, "cuDriverGetVersion") != NULL;
}

/* Loads and subscribes once (not under R.lock: CUPTI may wait for
 * callbacks in progress, and they take R.lock); 0 when ready. CUPTI's
 * profiler is initialized at the first context, once the driver is. */
static int setup_once(void *lib)
{
    pthread_mutex_lock(&R.setup);
    if (!R.loaded) {
        R.loaded = 1;
        R.failed = load(lib) != 0;
    }
    if (!R.failed && !R.subscribed && !has_driver(R.why, sizeof R.why))
        R.failed = 1;
    if (!R.failed && !R.subscribed) {
        R.failed = subscribe() != 0;
        R.subscribed = !R.failed;
    }
    int failed = R.failed;
    char why[sizeof R.why];
    memcpy(why, R.why, sizeof why);
    pthread_mutex_unlock(&R.setup);
    if (failed) /* said again in every run's trace */
        mlprof__hw_unavailable("gpu metrics", why);
    return failed ? -1 : 0;
}

/* This run's metric set, when it differs from what the contexts were set
 * up for: they are set up again at their next launch (R.lock held). */
static void choose_set(const mlprof__gpu_metric_set *set)
{
    char configured[sizeof R.configured];
    snprintf(configured, sizeof configured, "%.1024s|%u|%d", mlprof__g.cfg.gpu_metrics,
             mlprof__g.cfg.gpu_details_mask & MLPROF__GPU_MEASURED_DETAILS, mlprof__g.cfg.gpu_metrics_batch);
    if (strcmp(configured, R.configured) == 0)
        return;
    for (size_t i = 0; i < R.nc; i++) {
        batch_finish(&R.C[i]);
        ctx_release(&R.C[i]);
    }
    R.nc = 0;
    R.set = *set;
    size_t n = 0;
    for (size_t i = 0; i < set->n; i++) {
        int id = name_id(set->names[i]);
        if (id < 0) {
            say("gpu metrics", "more than 256 metric names in one process: the newest are left out");
            continue;
        }
        R.refused[id] = 0;
        if (n != i)
            memcpy(R.set.names[n], set->names[i], sizeof set->names[i]);
        R.set_ids[n++] = (uint16_t)id;
    }
    R.set.n = n;
    R.batch = (size_t)mlprof__g.cfg.gpu_metrics_batch;
    memcpy(R.configured, configured, sizeof configured);
    if (set->overflow)
        say("gpu metrics", "more than 48 metrics once the short names are expanded: the last ones are left out");
}

void mlprof__gpu_counters_start(void *lib)
{
    mlprof__gpu_metric_set set;
    mlprof__gpu_metrics_expand(mlprof__g.cfg.gpu_metrics, mlprof__g.cfg.gpu_details_mask, &set);
    if (!set.n || R.forked || setup_once(lib) != 0)
        return;
    pthread_mutex_lock(&R.lock);
    choose_set(&set);
    R.running = 1;
    for (size_t i = 0; i < R.nc; i++) { /* contexts set up in an earlier run */
        rctx *c = &R.C[i];
        if (c->state == 0) {
            int pushed = push(c);
            batch_start(c);
            pop(pushed);
        }
    }
    unlock();
}

void mlprof__gpu_counters_stop(void)
{
    pthread_mutex_lock(&R.lock);
    R.running = 0;
    if (R.in_flight) /* a launch in flight may or may not be in the batch */
        taint_all();
    for (size_t i = 0; i < R.nc; i++)
        batch_finish(&R.C[i]);
    unlock();
}

void mlprof__gpu_counters_after_fork(void)
{
    /* CUDA does not survive fork; the parent's launches and results are its own */
    R.forked = 1;
    R.running = 0;
    R.nc = R.nr = R.nv = R.no = R.na = 0;
    R.in_flight = 0;
    t_rt.ctx = NULL;
    t_rt.counted = 0;
    t_rt.depth = 0;
    t_rt.driver_outer = t_rt.pending = 0;
    R.nsaid = 0;
    pthread_mutex_init(&R.lock, NULL);
    pthread_mutex_init(&R.setup, NULL);
}

/* ------------------------------------------------------ the collector's */

static void ask(rlaunch *l)
{
    if (l->asked)
        return;
    struct ask *a = reserve(R.A, &R.capa, R.na + 1, sizeof *R.A);
    if (!a)
        return;
    R.A = a;
    l->asked = 1;
    R.A[R.na].seq = l->seq;
    R.A[R.na].tid = l->tid;
    R.A[R.na].ns = l->enter_ns;
    R.A[R.na].op = R.A[R.na].stack = NULL;
    R.na++;
}

static int result_cmp(const void *pa, const void *pb)
{
    const result *a = pa, *b = pb;
    return a->l.seq < b->l.seq ? -1 : a->l.seq > b->l.seq;
}

void mlprof__gpu_counters_points(void)
{
    R.na = 0;
    pthread_mutex_lock(&R.lock);
    /* the results evaluated since the last drain become the collector's */
    result *o = reserve(R.O, &R.capo, R.nr, sizeof *R.O);
    if (o)
        R.O = o;
    double *ov = o ? reserve(R.OV, &R.capov, R.nv, sizeof *R.OV) : NULL;
    if (ov)
        R.OV = ov;
    uint16_t *ovi = ov ? reserve(R.OVI, &R.capovi, R.nv, sizeof *R.OVI) : NULL;
    if (ovi) {
        R.OVI = ovi;
        if (R.nr)
            memcpy(R.O, R.R, R.nr * sizeof *R.R);
        if (R.nv) {
            memcpy(R.OV, R.V, R.nv * sizeof *R.V);
            memcpy(R.OVI, R.VI, R.nv * sizeof *R.VI);
        }
        R.no = R.nr;
    } else {
        R.lost += R.nr;
        R.no = 0;
    }
    R.nr = R.nv = 0;
    mlprof__sort(R.O, R.no, sizeof *R.O, result_cmp); /* contexts' results interleave */
    /* the operators of every launch not asked about yet, measured or not */
    for (size_t i = 0; i < R.no; i++)
        ask(&R.O[i].l);
    for (size_t i = 0; i < R.nc; i++) {
        for (size_t j = 0; j < R.C[i].nl; j++)
            ask(&R.C[i].L[j]);
    }
    unlock();
    for (size_t i = 0; i < R.na; i++)
        mlprof__gpu_add_point(R.A[i].tid, R.A[i].ns, (uint32_t)i | MLPROF__GPU_ASK_BIT);
}

void mlprof__gpu_counters_ops(uint32_t index, const char *op, const char *stack)
{
    index &= ~MLPROF__GPU_ASK_BIT;
    if (index < R.na) {
        R.A[index].op = op;
        R.A[index].stack = stack;
    }
}

/* The launch numbered seq among n of them, stride bytes apart, numbers
 * growing along the array. */
static rlaunch *by_seq(rlaunch *L, size_t n, size_t stride, uint32_t seq)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        rlaunch *l = (rlaunch *)((char *)L + mid * stride);
        if (l->seq == seq)
            return l;
        if (l->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void put(mlprof__sb *sb, const char *key, double v, const char *fmt)
{
    if (isnan(v) || isinf(v))
        return;
    mlprof__sb_printf(sb, ",\"%s\":", key);
    mlprof__sb_printf(sb, fmt, v);
}

static void write_result(const result *r, const double *values, const uint16_t *ids)
{
    static mlprof__gpu_metric_set set; /* the collector's, under ctl_lock: too large for its stack */
    set.n = 0;
    for (uint32_t i = 0; i < r->n; i++)
        memcpy(set.names[set.n++], R.names[ids[i]], MLPROF__GPU_METRIC_LEN);
    uint64_t launch_ns = r->l.exit_ns > r->l.enter_ns ? r->l.exit_ns - r->l.enter_ns : 0;
    mlprof__gpu_derived d;
    mlprof__gpu_metrics_derive(&set, values, (double)launch_ns, &d);
    mlprof__sb args;
    mlprof__sb_init(&args);
    const char *name = mlprof__gpu_kernel_name(r->l.symbol);
    mlprof__sb_printf(&args, "\"device\":%u,\"correlation\":%u,\"kernel\":", r->device, r->l.corr);
    mlprof__sb_json_str(&args, name, strlen(name));
    for (size_t i = 0; i < set.n; i++) {
        if (!isnan(values[i]) && !isinf(values[i]))
            mlprof__sb_printf(&args, ",\"%s\":%.17g", set.names[i], values[i]);
    }
    put(&args, "gpu_time_ns", d.gpu_ns, "%.0f");
    put(&args, "flops", d.flops, "%.17g");
    put(&args, "bytes", d.dram_bytes, "%.17g");
    put(&args, "gflops", d.flops_per_s / 1e9, "%.3f");
    put(&args, "dram_gbps", d.dram_bytes_per_s / 1e9, "%.3f");
    put(&args, "arithmetic_intensity", d.arithmetic_intensity, "%.4f");
    put(&args, "achieved_occupancy", d.achieved_occupancy, "%.4f");
    put(&args, "branch_efficiency", d.branch_efficiency, "%.4f");
    if (launch_ns)
        mlprof__sb_printf(&args, ",\"launch_ns\":%llu", (unsigned long long)launch_ns);
    if (r->l.op) {
        mlprof__sb_puts(&args, ",\"op\":");
        mlprof__sb_json_str(&args, r->l.op, strlen(r->l.op));
        mlprof__sb_puts(&args, ",\"op_stack\":");
        mlprof__sb_json_str(&args, r->l.stack, strlen(r->l.stack));
    }
    /* the range starts at the launch and lasts the kernel's own GPU time, so
     * that FLOPs and bytes over its length are the kernel's rates */
    uint64_t dur = !isnan(d.gpu_ns) && d.gpu_ns > 0 ? (uint64_t)d.gpu_ns : launch_ns;
    int tid = mlprof__gpu_counters_track(r->device);
    if (tid >= 0 && !args.failed)
        mlprof__produce_span(NULL, tid, "cuda_profiler_range", name, r->l.enter_ns, r->l.enter_ns + dur, args.data);
    else
        R.lost++;
    mlprof__sb_free(&args);
}

void mlprof__gpu_counters_emit(int discard)
{
    /* the answers go to the launches, measured or still in a batch */
    pthread_mutex_lock(&R.lock);
    for (size_t i = 0; i < R.na; i++) {
        if (!R.A[i].op)
            continue;
        rlaunch *l = R.no ? by_seq(&R.O[0].l, R.no, sizeof *R.O, R.A[i].seq) : NULL;
        for (size_t c = 0; !l && c < R.nc; c++)
            l = by_seq(R.C[c].L, R.C[c].nl, sizeof *R.C[c].L, R.A[i].seq);
        for (size_t j = 0; !l && j < R.nr; j++) /* evaluated meanwhile: among the new results */
            l = R.R[j].l.seq == R.A[i].seq ? &R.R[j].l : NULL;
        if (l) {
            l->op = R.A[i].op;
            l->stack = R.A[i].stack;
        }
    }
    pthread_mutex_unlock(&R.lock);
    R.na = 0;
    for (size_t i = 0; i < R.no && !discard; i++)
        write_result(&R.O[i], &R.OV[R.O[i].values], &R.OVI[R.O[i].values]);
    R.no = 0;
}

/* --------------------------------------------------------------- reports */

void mlprof__gpu_counters_other_data(mlprof__sb *out)
{
    pthread_mutex_lock(&R.lock);
    if (!R.subscribed) {
        pthread_mutex_unlock(&R.lock);
        return;
    }
    mlprof__sb_puts(out, ",\"counters\":{\"metrics\":[");
    for (size_t i = 0, first = 1; i < R.set.n; i++) {
        if (R.refused[R.set_ids[i]])
            continue;
        if (!first)
            mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, R.set.names[i], strlen(R.set.names[i]));
        first = 0;
    }
    size_t passes = 0;
    for (size_t i = 0; i < R.nc; i++)
        passes = R.C[i].passes > passes ? R.C[i].passes : passes;
    mlprof__sb_printf(out,
                      "],\"passes\":%zu,\"batch\":%zu,\"kernels_measured\":%llu,\"ranges_unmatched\":%llu"
                      ",\"graph_ranges\":%llu,\"concurrent_ranges\":%llu,\"batches_mismatched\":%llu"
                      ",\"ranges_dropped\":%llu,\"launches_unmeasured\":%llu,\"evaluations_failed\":%llu"
                      ",\"results_lost\":%llu}",
                      passes, R.batch, (unsigned long long)R.measured, (unsigned long long)R.unmatched,
                      (unsigned long long)R.graph_ranges, (unsigned long long)R.concurrent_ranges,
                      (unsigned long long)R.mismatched, (unsigned long long)R.dropped,
                      (unsigned long long)R.unmeasured, (unsigned long long)R.failed_evals,
                      (unsigned long long)R.lost);
    pthread_mutex_unlock(&R.lock);
}

void mlprof__gpu_counters_report(void)
{
    pthread_mutex_lock(&R.lock);
    uint64_t bad = R.unmatched + R.dropped + R.unmeasured + R.failed_evals + R.lost;
    uint64_t fresh = bad > R.reported ? bad - R.reported : 0;
    R.reported = bad;
    uint64_t unmatched = R.unmatched, graph = R.graph_ranges, concurrent = R.concurrent_ranges,
             mismatched = R.mismatched, dropped = R.dropped, unmeasured = R.unmeasured, failed = R.failed_evals,
             lost = R.lost;
    pthread_mutex_unlock(&R.lock);
    if (fresh)
        mlprof__log(MLPROF_LOG_WARN,
                    "GPU metrics: some kernels are not measured, or not matched to their launch: %llu ranges not "
                    "matched (%llu of CUDA graphs, %llu of launches overlapping on several threads, %llu batches "
                    "whose ranges and launches differ in number), %llu ranges dropped by CUPTI, %llu launches "
                    "without a range, %llu evaluations failed, %llu results lost for memory",
                    (unsigned long long)unmatched, (unsigned long long)graph, (unsigned long long)concurrent,
                    (unsigned long long)mismatched, (unsigned long long)dropped, (unsigned long long)unmeasured,
                    (unsigned long long)failed, (unsigned long long)lost);
}

void mlprof__gpu_counters_reset(void)
{
    pthread_mutex_lock(&R.lock);
    R.measured = R.unmatched = R.graph_ranges = R.concurrent_ranges = R.mismatched = 0;
    R.dropped = R.unmeasured = R.failed_evals = R.lost = R.reported = 0;
    pthread_mutex_unlock(&R.lock);
}
