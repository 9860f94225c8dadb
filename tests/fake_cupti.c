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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/gpu/cupti_abi.h"

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
