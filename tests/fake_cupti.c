/*
 * fake_cupti.c - a libcupti for machines without a GPU: the entry points
 * mlprof loads (activity buffers through the client's callbacks, enable and
 * disable, flush, the next-record walk, dropped counts, timestamps, callback
 * names), and fake_cupti_* functions with which a test writes the activity
 * records that CUPTI would, in CUPTI's layout (CUDA 13's record sizes, longer
 * than the prefixes mlprof reads, as a newer CUPTI's would be).
 *
 * FAKE_CUPTI_NO_TS_CALLBACK=1: no timestamp callback (CUPTI's own clock,
 * CLOCK_REALTIME, is then converted). FAKE_CUPTI_NO_DRIVER=1: enabling fails
 * as it does where no driver is installed.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/gpu/cupti_abi.h"
#include "../src/gpu/cupti_prof_abi.h"

/* Every function below is an entry point found with dlsym, by CUPTI's name
 * or by the test's: none has a header to declare it in. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#define API __attribute__((visibility("default")))

typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*complete_fn)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef uint64_t (*timestamp_fn)(void);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static request_fn g_request;
static complete_fn g_complete;
static timestamp_fn g_clock;
static uint8_t *g_buf;
static size_t g_size, g_used;
static size_t g_dropped;
static int g_enabled[64];
static int g_runtime_api[4096], g_driver_api[4096];
static int g_thread_type;

/* The sizes of CUDA 13's records of each kind. */
static size_t record_size(uint32_t kind)
{
    switch (kind) {
    case CUPTI_KIND_CONCURRENT_KERNEL:
    case CUPTI_KIND_KERNEL:
        return 256;
    case CUPTI_KIND_MEMCPY:
    case CUPTI_KIND_MEMCPY2:
        return 104;
    case CUPTI_KIND_MEMSET:
        return 80;
    case CUPTI_KIND_RUNTIME:
    case CUPTI_KIND_DRIVER:
        return 40;
    case CUPTI_KIND_SYNCHRONIZATION:
        return 56;
    case CUPTI_KIND_DEVICE:
        return 200;
    case CUPTI_KIND_CONTEXT:
        return 32;
    default:
        return 64;
    }
}

static uint64_t realtime(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---------------------------------------------------------- CUPTI's API */

API int cuptiActivityRegisterCallbacks(request_fn request, complete_fn complete)
{
    if (!request || !complete)
        return 1;
    g_request = request;
    g_complete = complete;
    return 0;
}

API int cuptiActivityRegisterTimestampCallback(timestamp_fn fn)
{
    const char *no = getenv("FAKE_CUPTI_NO_TS_CALLBACK");
    if (no && *no == '1')
        return 11; /* CUPTI_ERROR_API_NOT_IMPLEMENTED */
    g_clock = fn;
    return 0;
}

API int cuptiGetTimestamp(uint64_t *ts)
{
    *ts = g_clock ? g_clock() : realtime();
    return 0;
}

API int cuptiActivityEnable(uint32_t kind)
{
    const char *no = getenv("FAKE_CUPTI_NO_DRIVER");
    if (no && *no == '1')
        return 999;
    if (kind < 64)
        g_enabled[kind] = 1;
    return 0;
}

API int cuptiActivityDisable(uint32_t kind)
{
    if (kind < 64)
        g_enabled[kind] = 0;
    return 0;
}

API int cuptiActivityEnableRuntimeApi(uint32_t cbid, uint8_t on)
{
    if (cbid < 4096)
        g_runtime_api[cbid] = on;
    return 0;
}

API int cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t on)
{
    if (cbid < 4096)
        g_driver_api[cbid] = on;
    return 0;
}

API int cuptiSetThreadIdType(uint32_t type)
{
    g_thread_type = (int)type;
    return 0;
}

/* Hands the current buffer to the client. g_lock held. */
static void deliver(void)
{
    if (!g_buf)
        return;
    uint8_t *b = g_buf;
    size_t size = g_size, used = g_used;
    g_buf = NULL;
    g_size = g_used = 0;
    g_complete(NULL, 0, b, size, used);
}

API int cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    pthread_mutex_lock(&g_lock);
    deliver();
    pthread_mutex_unlock(&g_lock);
    return 0;
}

API int cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, cupti_record **rec)
{
    size_t at = 0;
    if (*rec)
        at = (size_t)((uint8_t *)*rec - buf) + record_size((*rec)->kind);
    if (at + sizeof(cupti_record) > valid) {
        *rec = NULL;
        return CUPTI_ERR_MAX_LIMIT_REACHED;
    }
    *rec = (cupti_record *)(buf + at);
    return 0;
}

API int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *dropped)
{
    (void)ctx;
    (void)stream;
    *dropped = g_dropped;
    g_dropped = 0;
    return 0;
}

static const struct {
    int domain;
    uint32_t cbid;
    const char *name;
} k_names[] = {
    {2, 20, "cudaMalloc_v3020"},        {2, 31, "cudaMemcpy_v3020"},
    {2, 41, "cudaMemcpyAsync_v3020"},   {2, 51, "cudaMemset_v3020"},
    {2, 131, "cudaStreamSynchronize_v3020"}, {2, 211, "cudaLaunchKernel_v7000"},
    {2, 311, "cudaGraphLaunch_v10000"},
    {1, 279, "cuMemcpyHtoD_v2"},        {1, 307, "cuLaunchKernel"},
};

API int cuptiGetCallbackName(uint32_t domain, uint32_t cbid, const char **name)
{
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if ((uint32_t)k_names[i].domain == domain && k_names[i].cbid == cbid) {
            *name = k_names[i].name;
            return 0;
        }
    }
    return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
}

API int cuptiGetResultString(int rc, const char **s)
{
    *s = rc == 0 ? "CUPTI_SUCCESS" : rc == 999 ? "CUPTI_ERROR_UNKNOWN" : "CUPTI_ERROR_OTHER";
    return 0;
}

/* ------------------------------------------------------- for the tests */

/* Room for one record in the current buffer (a new one from the client when
 * full); NULL when the client gave none: the record is dropped and counted. */
static void *room(uint32_t kind)
{
    size_t n = record_size(kind);
    if (g_buf && g_used + n > g_size)
        deliver();
    if (!g_buf) {
        size_t max = 0;
        g_request(&g_buf, &g_size, &max);
        g_used = 0;
        if (!g_buf || g_size < n) {
            g_buf = NULL;
            g_dropped++;
            return NULL;
        }
    }
    void *p = g_buf + g_used;
    memset(p, 0, n);
    g_used += n;
    return p;
}

API uint64_t fake_cupti_now(void)
{
    uint64_t t;
    cuptiGetTimestamp(&t);
    return t;
}

API int fake_cupti_enabled(uint32_t kind) { return kind < 64 && g_enabled[kind]; }
API int fake_cupti_runtime_api_enabled(uint32_t cbid) { return cbid < 4096 && g_runtime_api[cbid]; }
API int fake_cupti_driver_api_enabled(uint32_t cbid) { return cbid < 4096 && g_driver_api[cbid]; }
API int fake_cupti_thread_id_type(void) { return g_thread_type; }

API void fake_cupti_drop(size_t n)
{
    pthread_mutex_lock(&g_lock);
    g_dropped += n;
    pthread_mutex_unlock(&g_lock);
}

/* Hands the current buffer back as if CUPTI's thread did (it was full). */
static void *complete_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_lock);
    deliver();
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

API void fake_cupti_complete_async(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, complete_main, NULL) == 0)
        pthread_join(t, NULL);
}

API void fake_cupti_api(int driver, uint32_t cbid, uint64_t start, uint64_t end, uint32_t tid, uint32_t corr)
{
    pthread_mutex_lock(&g_lock);
    cupti_api *r = room(driver ? CUPTI_KIND_DRIVER : CUPTI_KIND_RUNTIME);
    if (r) {
        r->kind = driver ? CUPTI_KIND_DRIVER : CUPTI_KIND_RUNTIME;
        r->cbid = cbid;
        r->start = start;
        r->end = end;
        r->process_id = 1;
        r->thread_id = tid;
        r->correlation_id = corr;
    }
    pthread_mutex_unlock(&g_lock);
}

API void fake_cupti_kernel(const char *name, uint32_t device, uint32_t stream, uint32_t corr, uint64_t start,
                           uint64_t end, const int32_t grid[3], const int32_t block[3], uint16_t registers,
                           int32_t static_shared, int32_t dynamic_shared, uint32_t carveout)
{
    pthread_mutex_lock(&g_lock);
    cupti_kernel *r = room(CUPTI_KIND_CONCURRENT_KERNEL);
    if (r) {
        r->kind = CUPTI_KIND_CONCURRENT_KERNEL;
        r->registers_per_thread = registers;
        r->start = start;
        r->end = end;
        r->completed = end;
        r->device_id = device;
        r->context_id = 1;
        r->stream_id = stream;
        memcpy(r->grid, grid, sizeof r->grid);
        memcpy(r->block, block, sizeof r->block);
        r->static_shared_memory = static_shared;
        r->dynamic_shared_memory = dynamic_shared;
        r->correlation_id = corr;
        r->name = name;
        r->shared_memory_executed = carveout;
    }
    pthread_mutex_unlock(&g_lock);
}

API void fake_cupti_memcpy(uint8_t copy_kind, uint8_t src, uint8_t dst, uint64_t bytes, uint32_t device,
                           uint32_t stream, uint32_t corr, uint32_t runtime_corr, uint64_t start, uint64_t end)
{
    pthread_mutex_lock(&g_lock);
    cupti_memcpy *r = room(CUPTI_KIND_MEMCPY);
    if (r) {
        r->kind = CUPTI_KIND_MEMCPY;
        r->copy_kind = copy_kind;
        r->src_kind = src;
        r->dst_kind = dst;
        r->bytes = bytes;
        r->start = start;
        r->end = end;
        r->device_id = device;
        r->context_id = 1;
        r->stream_id = stream;
        r->correlation_id = corr;
        r->runtime_correlation_id = runtime_corr;
    }
    pthread_mutex_unlock(&g_lock);
}

API void fake_cupti_memset(uint64_t bytes, uint32_t value, uint32_t device, uint32_t stream, uint32_t corr,
                           uint64_t start, uint64_t end)
{
    pthread_mutex_lock(&g_lock);
    cupti_memset *r = room(CUPTI_KIND_MEMSET);
    if (r) {
        r->kind = CUPTI_KIND_MEMSET;
        r->value = value;
        r->bytes = bytes;
        r->start = start;
        r->end = end;
        r->device_id = device;
        r->context_id = 1;
        r->stream_id = stream;
        r->correlation_id = corr;
        r->memory_kind = 3; /* device */
    }
    pthread_mutex_unlock(&g_lock);
}

API void fake_cupti_sync(uint32_t type, uint32_t context, uint32_t stream, uint32_t corr, uint64_t start,
                         uint64_t end)
{
    pthread_mutex_lock(&g_lock);
    cupti_sync *r = room(CUPTI_KIND_SYNCHRONIZATION);
    if (r) {
        r->kind = CUPTI_KIND_SYNCHRONIZATION;
        r->type = type;
        r->start = start;
        r->end = end;
        r->correlation_id = corr;
        r->context_id = context;
        r->stream_id = stream;
    }
    pthread_mutex_unlock(&g_lock);
}

/* An H100 SXM as CUPTI describes it. */
API void fake_cupti_device_h100(uint32_t id, uint32_t context)
{
    pthread_mutex_lock(&g_lock);
    cupti_device *r = room(CUPTI_KIND_DEVICE);
    if (r) {
        r->kind = CUPTI_KIND_DEVICE;
        r->global_memory_size = 80ull << 30;
        r->threads_per_warp = 32;
        r->multiprocessors = 132;
        r->max_warps_per_sm = 64;
        r->max_blocks_per_sm = 32;
        r->max_shared_memory_per_sm = 233472; /* 228 KiB */
        r->max_registers_per_sm = 65536;
        r->max_registers_per_block = 65536;
        r->max_shared_memory_per_block = 49152;
        r->max_threads_per_block = 1024;
        r->cc_major = 9;
        r->cc_minor = 0;
        r->id = id;
        r->name = "NVIDIA H100 80GB HBM3";
    }
    cupti_context *c = room(CUPTI_KIND_CONTEXT);
    if (c) {
        c->kind = CUPTI_KIND_CONTEXT;
        c->context_id = context;
        c->device_id = id;
    }
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------- callbacks and the profiler */
/*
 * The range profiler as its documentation describes it, in auto range mode:
 * while an object is started, every kernel launched on its context adds one
 * range to the counter data image (dropped and counted when the image is
 * full); the values of a range are those the test gave for the kernel's
 * name (fake_cupti_kernel_values). Contexts are fake_ctx pointers.
 * FAKE_CUPTI_SUBSCRIBED=1: another client holds the callback subscription.
 */
typedef struct fake_ctx {
    uint32_t device;
} fake_ctx;

#define IMAGE_MAGIC 0x46414b45u
typedef struct {
    uint32_t magic, capacity, ranges, metrics;
    char names[16][128];
    double values[]; /* capacity * metrics */
} image_head;

typedef struct {
    fake_ctx *ctx;
    const uint8_t *config;
    image_head *image;
    int started;
    size_t dropped;
} fake_rp;

static cupti_callback_fn g_cb;
static int g_subscribed;
static uint8_t g_cb_on[4][1024];
static fake_rp *g_rp[8];
static int g_rp_n;
static int g_decodes;
static struct {
    char name[128];
    double v[7]; /* fma, add, mul, dram read, dram write, duration ns, warps % */
    double branch;
} g_kv[16];
static int g_nkv;

static const char *const k_known[] = {
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "gpu__time_duration.sum", "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__sass_average_branch_targets_threads_uniform.pct", "sm__inst_executed_pipe_tensor.sum",
};

static int known(const char *m)
{
    for (size_t i = 0; i < sizeof k_known / sizeof k_known[0]; i++) {
        if (strcmp(k_known[i], m) == 0)
            return 1;
    }
    return 0;
}

/* The value of metric m for a kernel (single precision: the f* ops). */
static double value_of(const char *kernel, const char *m)
{
    for (int i = 0; i < g_nkv; i++) {
        if (!kernel || strcmp(g_kv[i].name, kernel) != 0)
            continue;
        if (strstr(m, "_ffma_pred_on"))
            return g_kv[i].v[0];
        if (strstr(m, "_fadd_pred_on"))
            return g_kv[i].v[1];
        if (strstr(m, "_fmul_pred_on"))
            return g_kv[i].v[2];
        if (!strcmp(m, "dram__bytes_read.sum"))
            return g_kv[i].v[3];
        if (!strcmp(m, "dram__bytes_write.sum"))
            return g_kv[i].v[4];
        if (!strcmp(m, "gpu__time_duration.sum"))
            return g_kv[i].v[5];
        if (strstr(m, "warps_active"))
            return g_kv[i].v[6];
        if (strstr(m, "branch_targets"))
            return g_kv[i].branch;
        return 0;
    }
    return 0;
}

API int cuptiSubscribe(void **sub, cupti_callback_fn cb, void *ud)
{
    (void)ud;
    const char *other = getenv("FAKE_CUPTI_SUBSCRIBED");
    if ((other && *other == '1') || g_subscribed)
        return CUPTI_ERR_MULTIPLE_SUBSCRIBERS;
    g_cb = cb;
    g_subscribed = 1;
    *sub = &g_cb;
    return 0;
}

API int cuptiEnableCallback(uint32_t enable, void *sub, uint32_t domain, uint32_t cbid)
{
    if (sub != &g_cb || domain > 3 || cbid >= 1024)
        return 1;
    g_cb_on[domain][cbid] = (uint8_t)enable;
    return 0;
}

API int cuptiGetDeviceId(void *ctx, uint32_t *dev)
{
    if (!ctx)
        return 1;
    *dev = ((fake_ctx *)ctx)->device;
    return 0;
}

/* The driver's: where the fake libcupti is, a driver is (see counters.c). */
API int cuDriverGetVersion(int *version)
{
    *version = 13000;
    return 0;
}

API int cuptiProfilerInitialize(cupti_prof_init *p)
{
    if (p->size != MLPROF__CUPTI_SIZE(cupti_prof_init, priv))
        return 1;
    return 0;
}

API int cuptiDeviceGetChipName(cupti_chip_name *p)
{
    if (p->size != MLPROF__CUPTI_SIZE(cupti_chip_name, chip))
        return 1;
    p->chip = "GH100";
    return 0;
}

API int cuptiProfilerGetCounterAvailability(cupti_counter_avail *p)
{
    if (!p->context)
        return 1;
    for (int i = 0; i < g_rp_n; i++) { /* as CUPTI: not while a session runs on the device */
        if (g_rp[i]->started && g_rp[i]->ctx->device == ((fake_ctx *)p->context)->device)
            return 1;
    }
    if (!p->image) {
        p->image_size = 64;
        return 0;
    }
    memset(p->image, 0xab, p->image_size);
    return 0;
}

typedef struct {
    size_t n;
    char names[16][128];
} fake_host;

API int cuptiProfilerHostInitialize(cupti_host_init *p)
{
    if (strcmp(p->chip, "GH100") != 0 || (p->availability && p->availability[0] != 0xab))
        return 1;
    p->host = calloc(1, sizeof(fake_host));
    return p->host ? 0 : 1;
}

API int cuptiProfilerHostDeinitialize(cupti_host_deinit *p)
{
    free(p->host);
    return 0;
}

API int cuptiProfilerHostConfigAddMetrics(cupti_host_add_metrics *p)
{
    fake_host *h = p->host;
    for (size_t i = 0; i < p->n; i++) {
        if (!known(p->metrics[i]))
            return CUPTI_ERR_INVALID_METRIC_NAME;
    }
    if (h->n + p->n > 16)
        return 1;
    for (size_t i = 0; i < p->n && h->n < 16; i++)
        snprintf(h->names[h->n++], 128, "%s", p->metrics[i]);
    return 0;
}

API int cuptiProfilerHostGetConfigImageSize(cupti_host_config_image *p)
{
    p->image_size = sizeof(fake_host);
    return 0;
}

API int cuptiProfilerHostGetConfigImage(cupti_host_config_image *p)
{
    if (p->image_size < sizeof(fake_host))
        return 1;
    memcpy(p->image, p->host, sizeof(fake_host));
    return 0;
}

API int cuptiProfilerHostGetNumOfPasses(cupti_host_passes *p)
{
    const fake_host *h = (const fake_host *)p->image;
    size_t sass = 0;
    for (size_t i = 0; i < h->n; i++)
        sass += strstr(h->names[i], "sass") != NULL;
    p->passes = 1 + sass;
    return 0;
}

API int cuptiProfilerHostEvaluateToGpuValues(cupti_host_evaluate *p)
{
    const image_head *im = (const image_head *)p->counter_data;
    if (im->magic != IMAGE_MAGIC || p->range >= im->ranges)
        return 1;
    for (size_t i = 0; i < p->n; i++) {
        p->values[i] = NAN;
        for (uint32_t j = 0; j < im->metrics; j++) {
            if (strcmp(im->names[j], p->metrics[i]) == 0)
                p->values[i] = im->values[p->range * im->metrics + j];
        }
    }
    return 0;
}

API int cuptiRangeProfilerEnable(cupti_rp_enable *p)
{
    if (!p->context || g_rp_n == 8)
        return 1;
    fake_rp *rp = calloc(1, sizeof *rp);
    rp->ctx = p->context;
    g_rp[g_rp_n++] = rp;
    p->object = rp;
    return 0;
}

API int cuptiRangeProfilerDisable(cupti_rp_object *p)
{
    for (int i = 0; i < g_rp_n; i++) {
        if (g_rp[i] == p->object) {
            free(g_rp[i]);
            g_rp[i] = g_rp[--g_rp_n];
            return 0;
        }
    }
    return 1;
}

API int cuptiRangeProfilerGetCounterDataSize(cupti_rp_data_size *p)
{
    if (p->max_range_tree_nodes < p->max_ranges)
        return 1;
    p->counter_data_size = sizeof(image_head) + p->max_ranges * p->n * sizeof(double);
    return 0;
}

API int cuptiRangeProfilerCounterDataImageInitialize(cupti_rp_data_init *p)
{
    fake_rp *rp = p->object;
    image_head *im = (image_head *)p->counter_data;
    memset(im, 0, sizeof *im);
    im->magic = IMAGE_MAGIC;
    /* the capacity and metrics are in the size mlprof asked for */
    (void)rp;
    return 0;
}

API int cuptiRangeProfilerSetConfig(cupti_rp_set_config *p)
{
    fake_rp *rp = p->object;
    const fake_host *h = (const fake_host *)p->config;
    image_head *im = (image_head *)p->counter_data;
    if (p->size != MLPROF__CUPTI_SIZE(cupti_rp_set_config, target_nesting_level) || p->range != CUPTI_AUTO_RANGE ||
        p->replay_mode != CUPTI_KERNEL_REPLAY || im->magic != IMAGE_MAGIC || rp->started)
        return 1;
    im->metrics = (uint32_t)h->n;
    for (size_t i = 0; i < h->n; i++)
        memcpy(im->names[i], h->names[i], 128);
    im->capacity = (uint32_t)((p->counter_data_size - sizeof(image_head)) / (sizeof(double) * (h->n ? h->n : 1)));
    rp->config = p->config;
    rp->image = im;
    return 0;
}

API int cuptiRangeProfilerStart(cupti_rp_object *p)
{
    fake_rp *rp = p->object;
    if (!rp->image || rp->started)
        return 1;
    rp->started = 1;
    return 0;
}

API int cuptiRangeProfilerStop(cupti_rp_stop *p)
{
    fake_rp *rp = p->object;
    if (!rp->started)
        return 1;
    rp->started = 0;
    p->all_passes_submitted = 1;
    return 0;
}

API int cuptiRangeProfilerDecodeData(cupti_rp_decode *p)
{
    fake_rp *rp = p->object;
    p->ranges_dropped = rp->dropped;
    rp->dropped = 0;
    g_decodes++;
    return 0;
}

API int cuptiRangeProfilerGetCounterDataInfo(cupti_rp_data_info *p)
{
    const image_head *im = (const image_head *)p->counter_data;
    if (im->magic != IMAGE_MAGIC)
        return 1;
    p->ranges = im->ranges;
    return 0;
}

/* ------------------------------------------------- for the tests, again */

API void *fake_cupti_context(uint32_t device)
{
    static fake_ctx pool[8];
    static int used;
    if (used == 8)
        return NULL;
    pool[used].device = device;
    return &pool[used++];
}

API void fake_cupti_kernel_values(const char *name, double fma, double add, double mul, double dram_read,
                                  double dram_write, double duration_ns, double warps_pct, double branch_pct)
{
    if (g_nkv == 16)
        return;
    snprintf(g_kv[g_nkv].name, 128, "%s", name);
    double v[7] = {fma, add, mul, dram_read, dram_write, duration_ns, warps_pct};
    memcpy(g_kv[g_nkv].v, v, sizeof v);
    g_kv[g_nkv].branch = branch_pct;
    g_nkv++;
}

static void callback(uint32_t domain, uint32_t cbid, uint32_t site, void *ctx, const char *symbol, uint32_t corr,
                     int rv)
{
    if (!g_cb || domain > 3 || cbid >= 1024 || !g_cb_on[domain][cbid])
        return;
    cupti_callback_data d;
    memset(&d, 0, sizeof d);
    d.function_return_value = site == CUPTI_SITE_EXIT ? &rv : NULL;
    d.site = site;
    d.symbol_name = symbol;
    d.context = ctx;
    d.correlation_id = corr;
    g_cb(NULL, domain, cbid, &d);
}

/* The kernel's ranges on ctx, where its range profiler is started. */
static void run_kernel(void *ctx, const char *symbol, int ranges)
{
    for (int i = 0; i < g_rp_n; i++) {
        fake_rp *rp = g_rp[i];
        if (rp->ctx != ctx || !rp->started)
            continue;
        for (int k = 0; k < ranges; k++) {
            image_head *im = rp->image;
            if (im->ranges == im->capacity) {
                rp->dropped++;
                continue;
            }
            for (uint32_t j = 0; j < im->metrics; j++)
                im->values[im->ranges * im->metrics + j] = value_of(symbol, im->names[j]);
            im->ranges++;
        }
    }
}

/* A launch of kernel symbol on ctx. how: 0 through the runtime, with the
 * driver's callback inside; 1 through the runtime, no driver callback (the
 * runtime's context is NULL at the entry, as before its lazy creation); 2
 * through the driver alone; 3 a graph of `ranges` kernels (runtime); 4 a
 * runtime launch that fails; 5 a launch into a capturing stream (no kernel
 * runs). */
API void fake_cupti_launch(void *ctx, int how, const char *symbol, uint32_t corr, int ranges)
{
    uint32_t rt = how == 3 ? 311 : 211, drv = 307;
    int runtime = how != 2, driver = how == 0 || how == 2 || how == 5;
    if (runtime)
        callback(2, rt, CUPTI_SITE_ENTER, how == 1 ? NULL : ctx, how == 3 ? NULL : symbol, corr, 0);
    if (driver)
        callback(1, drv, CUPTI_SITE_ENTER, ctx, symbol, corr + 1000, 0);
    if (how != 4 && how != 5)
        run_kernel(ctx, symbol, how == 3 ? ranges : 1);
    if (driver)
        callback(1, drv, CUPTI_SITE_EXIT, ctx, symbol, corr + 1000, 0);
    if (runtime)
        callback(2, rt, CUPTI_SITE_EXIT, ctx, how == 3 ? NULL : symbol, corr, how == 4 ? 1 : 0);
}

/* The first half of a VIA_RUNTIME launch (its entry callbacks), and the
 * second (the kernel and the exits): another thread may launch between. */
API void fake_cupti_launch_half(void *ctx, const char *symbol, uint32_t corr, int second)
{
    if (!second) {
        callback(2, 211, CUPTI_SITE_ENTER, ctx, symbol, corr, 0);
        callback(1, 307, CUPTI_SITE_ENTER, ctx, symbol, corr + 1000, 0);
        return;
    }
    run_kernel(ctx, symbol, 1);
    callback(1, 307, CUPTI_SITE_EXIT, ctx, symbol, corr + 1000, 0);
    callback(2, 211, CUPTI_SITE_EXIT, ctx, symbol, corr, 0);
}

API void fake_cupti_context_destroy(void *ctx)
{
    if (g_cb && g_cb_on[CUPTI_DOMAIN_RESOURCE][CUPTI_RESOURCE_CONTEXT_DESTROY_STARTING]) {
        cupti_resource_data r = {ctx, NULL, NULL};
        g_cb(NULL, CUPTI_DOMAIN_RESOURCE, CUPTI_RESOURCE_CONTEXT_DESTROY_STARTING, &r);
    }
}

API int fake_cupti_profilers(void) { return g_rp_n; }
API int fake_cupti_started(void *ctx)
{
    for (int i = 0; i < g_rp_n; i++) {
        if (g_rp[i]->ctx == ctx)
            return g_rp[i]->started;
    }
    return -1;
}
API int fake_cupti_decodes(void) { return g_decodes; }
