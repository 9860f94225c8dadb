/*
 * region.c - GPU-timed regions (RAF's WITH_CUDA_PROFILER): a block of code
 * timed on a CUDA stream with two CUDA events, so that a user sees the device
 * time of their own code. mlprof_gpu_region_begin records the first event,
 * _end the second; when both have completed (looked at before each drain,
 * waited for at a final dump) the region becomes a span on the track
 * "GPU regions", placed at the CPU time it began and lasting its GPU time
 * (cudaEventElapsedTime), with that time in milliseconds and the stream as
 * arguments (and the category and arguments given to
 * mlprof_gpu_region_begin_with, RAF's); the statistics count it under
 * domain "gpu_region".
 *
 * The CUDA runtime is the program's own: its functions are looked up in the
 * process (a program that links the runtime statically and exports nothing
 * cannot be seen; that is said). Declarations are written here from CUDA's
 * documented API; no CUDA header is needed to build.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../record/produce.h"
#include "gpu.h"
#include "../record/record.h"

enum { CUDA_SUCCESS = 0, CUDA_NOT_READY = 600 };

typedef int (*event_create_fn)(void **);
typedef int (*event_record_fn)(void *, void *);
typedef int (*event_query_fn)(void *);
typedef int (*event_elapsed_fn)(float *, void *, void *);
typedef int (*event_destroy_fn)(void *);

static struct {
    pthread_once_t once;
    int ok;
    event_create_fn create;
    event_record_fn record;
    event_query_fn query, sync, destroy;
    event_elapsed_fn elapsed;
} A = {.once = PTHREAD_ONCE_INIT};

struct mlprof_gpu_region {
    char name[128];
    char *category, *args; /* copied, or NULL */
    void *stream, *start, *stop;
    uint64_t begin_ns;
    struct mlprof_gpu_region *next;
};

/* Regions ended and waiting for their events. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mlprof_gpu_region *g_pending;

static void *find(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
    for (size_t i = 0; !f && i < sizeof libs / sizeof libs[0]; i++) {
        void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD); /* the runtime already in the process */
        if (h)
            f = dlsym(h, name);
    }
    return f;
}

/* A thread of the parent's may have held g_lock at a fork (a leaf lock, only
 * ever held for a list operation): the child's is free. */
static void regions_after_fork(void) { pthread_mutex_init(&g_lock, NULL); }

static void load(void)
{
    pthread_atfork(NULL, NULL, regions_after_fork); /* before any region can take g_lock */
    A.create = (event_create_fn)find("cudaEventCreate");
    A.record = (event_record_fn)find("cudaEventRecord");
    A.query = (event_query_fn)find("cudaEventQuery");
    A.sync = (event_query_fn)find("cudaEventSynchronize");
    A.destroy = (event_query_fn)find("cudaEventDestroy");
    A.elapsed = (event_elapsed_fn)find("cudaEventElapsedTime");
    A.ok = A.create && A.record && A.query && A.sync && A.destroy && A.elapsed;
}

static void region_free(mlprof_gpu_region *r)
{
    mlprof__free(r->category);
    mlprof__free(r->args);
    mlprof__free(r);
}

/* A copy of s cut at MLPROF__NAME_MAX bytes, as span arguments are; NULL for
 * NULL; *failed set when out of memory. */
static char *copy_arg(const char *s, int *failed)
{
    if (!s)
        return NULL;
    char *c = mlprof__strndup(s, strnlen(s, MLPROF__NAME_MAX));
    if (!c)
        *failed = 1;
    return c;
}

mlprof_gpu_region *mlprof_gpu_region_begin(const char *name, void *stream)
{
    return mlprof_gpu_region_begin_with(name, stream, NULL, NULL);
}

mlprof_gpu_region *mlprof_gpu_region_begin_with(const char *name, void *stream, const char *category,
                                                const char *args)
{
    mlprof__ensure_init();
    if (!(mlprof_active_flag & 1)) /* recording (bit 1: a capture waits for a span) */
        return NULL;
    pthread_once(&A.once, load);
    if (!A.ok) {
        mlprof__fail(MLPROF_EUNSUPPORTED, "mlprof_gpu_region_begin: no CUDA runtime in this process (a program "
                                          "linked with -cudart static exports none: link with -cudart shared)");
        return NULL;
    }
    mlprof_gpu_region *r = mlprof__calloc(1, sizeof *r);
    if (!r) {
        mlprof__fail(MLPROF_ENOMEM, "mlprof_gpu_region_begin: out of memory");
        return NULL;
    }
    snprintf(r->name, sizeof r->name, "%s", name ? name : "region");
    r->stream = stream;
    int failed = 0;
    r->category = copy_arg(category, &failed);
    r->args = copy_arg(args, &failed);
    if (failed) {
        region_free(r);
        mlprof__fail(MLPROF_ENOMEM, "mlprof_gpu_region_begin: out of memory");
        return NULL;
    }
    int rc;
    if ((rc = A.create(&r->start)) != CUDA_SUCCESS || (rc = A.create(&r->stop)) != CUDA_SUCCESS ||
        (rc = A.record(r->start, stream)) != CUDA_SUCCESS) {
        if (r->start)
            A.destroy(r->start);
        if (r->stop)
            A.destroy(r->stop);
        region_free(r);
        mlprof__fail(MLPROF_EIO, "mlprof_gpu_region_begin: CUDA error %d", rc);
        return NULL;
    }
    r->begin_ns = mlprof_now_ns();
    return r;
}

int mlprof_gpu_region_end(mlprof_gpu_region *r)
{
    if (!r)
        return MLPROF_OK; /* begun while not recording, or failed: nothing to end */
    int rc = A.record(r->stop, r->stream);
    if (rc != CUDA_SUCCESS) {
        A.destroy(r->start);
        A.destroy(r->stop);
        region_free(r);
        return mlprof__fail(MLPROF_EIO, "mlprof_gpu_region_end: CUDA error %d", rc);
    }
    pthread_mutex_lock(&g_lock);
    r->next = g_pending;
    g_pending = r;
    pthread_mutex_unlock(&g_lock);
    return MLPROF_OK;
}

/* One region whose events completed: its span. */
static void resolve(mlprof_gpu_region *r)
{
    float ms = 0;
    if (A.elapsed(&ms, r->start, r->stop) == CUDA_SUCCESS && ms >= 0) {
        mlprof__sb args;
        mlprof__sb_init(&args);
        mlprof__sb_printf(&args, "\"gpu_ms\":%.6f,\"stream\":\"%p\"", (double)ms, r->stream);
        if (r->category) {
            mlprof__sb_puts(&args, ",\"category\":");
            mlprof__sb_json_str(&args, r->category, strlen(r->category));
        }
        if (r->args) {
            mlprof__sb_puts(&args, ",\"args\":");
            mlprof__sb_json_str(&args, r->args, strlen(r->args));
        }
        int tid = mlprof__produce_track("GPU regions");
        if (args.failed)
            mlprof__log(MLPROF_LOG_ERROR, "GPU region \"%s\": out of memory; its span is lost", r->name);
        else if (tid >= 0)
            mlprof__produce_span(NULL, tid, "gpu_region", r->name, r->begin_ns,
                                 r->begin_ns + (uint64_t)((double)ms * 1e6), args.data);
        mlprof__sb_free(&args);
    }
    A.destroy(r->start);
    A.destroy(r->stop);
    region_free(r);
}

void mlprof__gpu_regions_resolve(int discard)
{
    pthread_mutex_lock(&g_lock);
    mlprof_gpu_region *r = g_pending, *keep = NULL;
    g_pending = NULL;
    pthread_mutex_unlock(&g_lock);
    while (r) {
        mlprof_gpu_region *next = r->next;
        if (discard) {
            A.destroy(r->start);
            A.destroy(r->stop);
            region_free(r);
        } else if (A.query(r->stop) == CUDA_SUCCESS ||
                   (!(mlprof_active_flag & 1) && A.sync(r->stop) == CUDA_SUCCESS)) { /* a final dump waits */
            resolve(r);
        } else {
            r->next = keep;
            keep = r;
        }
        r = next;
    }
    if (keep) {
        pthread_mutex_lock(&g_lock);
        mlprof_gpu_region *last = keep;
        while (last->next)
            last = last->next;
        last->next = g_pending;
        g_pending = keep;
        pthread_mutex_unlock(&g_lock);
    }
}
