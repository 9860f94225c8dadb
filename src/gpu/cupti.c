/*
 * cupti.c - libcupti, loaded with dlopen when the gpu key asks for GPU
 * activity: its buffers, the activity kinds turned on and off with the run,
 * the flush at each drain, and the names of the runtime and driver calls.
 *
 * CUPTI asks for buffers and hands them back full (or at a flush) on its own
 * threads or on the flushing one; full buffers wait in a queue until the next
 * drain converts them (activity.c). The bytes of buffers held are bounded by
 * gpu_buffer_size: a request beyond it gets none, and CUPTI drops and counts
 * those records. A queue more than half full wakes the continuous dump.
 *
 * CUPTI is given mlprof's clock (CLOCK_MONOTONIC) where it takes a timestamp
 * callback; otherwise its own clock (CLOCK_REALTIME) is converted through
 * points taken at each flush.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../record/produce.h"
#include "../hw/hw.h"
#include "../record/record.h"
#include "gpu_internal.h"

#define MAX_CBID 2048

typedef void (*buf_request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*buf_complete_fn)(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);
typedef uint64_t (*timestamp_fn)(void);

static struct {
    int tried, ok, forked;
    void *lib;
    char path[MLPROF__PATH_MAX];
    char load_error[1024];
    int (*register_callbacks)(buf_request_fn, buf_complete_fn);
    int (*enable)(uint32_t kind);
    int (*disable)(uint32_t kind);
    int (*flush_all)(uint32_t flag);
    int (*next_record)(uint8_t *, size_t, cupti_record **);
    int (*num_dropped)(void *ctx, uint32_t stream, size_t *n);
    int (*timestamp)(uint64_t *);
    int (*thread_id_type)(uint32_t);
    int (*timestamp_callback)(timestamp_fn);    /* CUDA 12.? and later */
    int (*callback_name)(uint32_t domain, uint32_t cbid, const char **name);
    int (*result_string)(int, const char **);
    int (*enable_runtime_api)(uint32_t cbid, uint8_t on); /* CUDA 12.6 and later */
    int (*enable_driver_api)(uint32_t cbid, uint8_t on);
    int registered;
    int own_clock; /* CUPTI reads mlprof's clock */

    unsigned kinds_on;       /* the MLPROF__GPU_* bits enabled now */
    int metrics_on;          /* the range profiler is running (counters.c) */
    unsigned per_function;   /* MLPROF__GPU_RUNTIME/DRIVER: calls enabled one by one */
    const char *names[3][MAX_CBID]; /* by domain and callback id (interned) */
    int names_read;
    mlprof__map interned;
    uint8_t fn_on[3][MAX_CBID];
    uint8_t launch_fn[3][MAX_CBID]; /* the driver's launching calls (MLPROF__GPU_LAUNCH) */
    int fn_all;

    pthread_mutex_t lock; /* the buffers: any thread */
    struct qbuf {
        uint8_t *data;
        size_t size, valid;
        struct qbuf *next;
    } *queue, **tail;
    size_t held, queued, buf_size, cap;
    uint64_t dropped, refused;
} K = {.lock = PTHREAD_MUTEX_INITIALIZER};

const char *mlprof__cupti_result(int rc)
{
    const char *s = NULL;
    if (K.result_string && K.result_string(rc, &s) == CUPTI_OK && s)
        return s;
    return "unknown CUPTI error";
}

int mlprof__cupti_no_driver(char *why, size_t len)
{
    if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL))
        return 0;
    snprintf(why, len, "no NVIDIA driver: libcuda.so.1 cannot be loaded (%.400s)", dlerror());
    return 1;
}

/* ------------------------------------------------------------- loading */

static void *open_lib(const char *name, int noload)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | (noload ? RTLD_NOLOAD : 0));
    if (h)
        snprintf(K.path, sizeof K.path, "%s", name);
    return h;
}

static int load(char *why, size_t len)
{
    static const char *const names[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8",
                                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                                        "/usr/local/cuda/lib64/libcupti.so"};
    const char *want = mlprof__g.cfg.cupti_library;
    char err[512] = "";
    if (want[0]) {
        K.lib = open_lib(want, 0);
        if (!K.lib)
            snprintf(err, sizeof err, "%s", dlerror());
    } else {
        for (size_t i = 0; !K.lib && i < sizeof names / sizeof names[0]; i++) /* one the program has */
            K.lib = open_lib(names[i], 1);
        for (size_t i = 0; !K.lib && i < sizeof names / sizeof names[0]; i++) {
            K.lib = open_lib(names[i], 0);
            if (!K.lib && i == 0)
                snprintf(err, sizeof err, "%s", dlerror());
        }
    }
    if (!K.lib) {
        snprintf(why, len, "cannot load libcupti (%.600s); set cupti_library to its path (it comes with the CUDA toolkit "
                           "and with the nvidia-cuda-cupti Python package)", err[0] ? err : want);
        return -1;
    }
    struct {
        const char *name;
        void **fn;
        int optional;
    } table[] = {
        {"cuptiActivityRegisterCallbacks", (void **)&K.register_callbacks, 0},
        {"cuptiActivityEnable", (void **)&K.enable, 0},
        {"cuptiActivityDisable", (void **)&K.disable, 0},
        {"cuptiActivityFlushAll", (void **)&K.flush_all, 0},
        {"cuptiActivityGetNextRecord", (void **)&K.next_record, 0},
        {"cuptiActivityGetNumDroppedRecords", (void **)&K.num_dropped, 0},
        {"cuptiGetTimestamp", (void **)&K.timestamp, 0},
        {"cuptiGetCallbackName", (void **)&K.callback_name, 0},
        {"cuptiGetResultString", (void **)&K.result_string, 0},
        {"cuptiSetThreadIdType", (void **)&K.thread_id_type, 0},
        {"cuptiActivityRegisterTimestampCallback", (void **)&K.timestamp_callback, 1},
        {"cuptiActivityEnableRuntimeApi", (void **)&K.enable_runtime_api, 1},
        {"cuptiActivityEnableDriverApi", (void **)&K.enable_driver_api, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].fn = dlsym(K.lib, table[i].name);
        if (!*table[i].fn && !table[i].optional) {
            snprintf(why, len, "%.600s has no %s (CUPTI from CUDA 11 or later is needed)", K.path, table[i].name);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- buffers */

static void on_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    mlprof__busy++;
    *max_records = 0;
    *buffer = NULL;
    *size = 0;
    pthread_mutex_lock(&K.lock);
    size_t want = K.buf_size;
    int ok = K.held + want <= K.cap;
    if (ok)
        K.held += want;
    else
        K.refused++;
    pthread_mutex_unlock(&K.lock);
    if (ok) {
        *buffer = mlprof__malloc(want); /* 16-byte aligned; CUPTI needs 8 */
        if (*buffer) {
            *size = want;
        } else {
            pthread_mutex_lock(&K.lock);
            K.held -= want;
            K.refused++;
            pthread_mutex_unlock(&K.lock);
        }
    }
    mlprof__busy--;
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    mlprof__busy++;
    size_t lost = 0;
    if (K.num_dropped(ctx, stream, &lost) != CUPTI_OK)
        lost = 0;
    struct qbuf *q = valid ? mlprof__malloc(sizeof *q) : NULL;
    int poke = 0;
    pthread_mutex_lock(&K.lock);
    K.dropped += lost;
    if (q) {
        q->data = buffer;
        q->size = size;
        q->valid = valid;
        q->next = NULL;
        *K.tail = q;
        K.tail = &q->next;
        K.queued += size;
        poke = K.queued > K.cap / 2;
    } else {
        if (valid) /* no memory to queue it: its records are lost */
            K.refused++;
        K.held -= size;
    }
    pthread_mutex_unlock(&K.lock);
    if (!q)
        mlprof__free(buffer);
    if (poke)
        mlprof__wake();
    mlprof__busy--;
}

static uint64_t our_clock(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A point of the clock conversion: CUPTI's time between two readings of
 * ours; of three tries, the one read in the shortest time. */
static void clock_point(void)
{
    uint64_t best_c = 0, best_mid = 0, best_gap = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t c, a = our_clock();
        if (K.timestamp(&c) != CUPTI_OK)
            return;
        uint64_t b = our_clock();
        if (b - a < best_gap) {
            best_gap = b - a;
            best_c = c;
            best_mid = a + (b - a) / 2;
        }
    }
    mlprof__gpu_clock_point(best_c, best_mid);
}

void mlprof__cupti_flush(int discard, int final)
{
    if (!K.registered || K.forked)
        return;
    mlprof__busy++;
    clock_point();
    K.flush_all(final ? CUPTI_FLUSH_FORCED : 0);
    pthread_mutex_lock(&K.lock);
    struct qbuf *q = K.queue;
    K.queue = NULL;
    K.tail = &K.queue;
    K.queued = 0;
    uint64_t dropped = K.dropped, refused = K.refused;
    K.dropped = K.refused = 0;
    pthread_mutex_unlock(&K.lock);
    mlprof__gpu_count_lost(dropped, refused);
    size_t freed = 0;
    while (q) {
        struct qbuf *next = q->next;
        if (!discard)
            mlprof__gpu_take_buffer(q->data, q->valid);
        freed += q->size;
        mlprof__free(q->data);
        mlprof__free(q);
        q = next;
    }
    pthread_mutex_lock(&K.lock);
    K.held -= freed;
    pthread_mutex_unlock(&K.lock);
    mlprof__busy--;
}

int mlprof__cupti_next(uint8_t *buf, size_t valid, cupti_record **rec)
{
    return K.next_record(buf, valid, rec);
}

/* ------------------------------------------------------- function names */

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"; CUPTI's suffix is the
 * version that introduced the function, and users know the name without it. */
static size_t base_len(const char *s)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
        i--;
    if (i < n && i >= 2 && s[i - 1] == 'v' && s[i - 2] == '_')
        return i - 2;
    return n;
}

static void read_names(void)
{
    if (K.names_read)
        return;
    K.names_read = 1;
    for (uint32_t d = CUPTI_DOMAIN_DRIVER; d <= CUPTI_DOMAIN_RUNTIME; d++) {
        for (uint32_t id = 1; id < MAX_CBID; id++) {
            const char *name = NULL;
            if (K.callback_name(d, id, &name) != CUPTI_OK || !name || !*name)
                continue;
            mlprof__map_entry *e = mlprof__map_slot(&K.interned, name, base_len(name));
            K.names[d][id] = e ? e->key : NULL;
        }
    }
}

const char *mlprof__cupti_function(int domain, uint32_t cbid)
{
    if (domain < 1 || domain > 2 || cbid >= MAX_CBID)
        return NULL;
    read_names();
    return K.names[domain][cbid];
}

int mlprof__cupti_function_on(int domain, uint32_t cbid)
{
    if (K.fn_all)
        return 1;
    return domain >= 1 && domain <= 2 && cbid < MAX_CBID && K.fn_on[domain][cbid];
}

/* Marks the functions of gpu_functions; each name CUPTI does not know is said. */
static void choose_functions(void)
{
    memset(K.fn_on, 0, sizeof K.fn_on);
    const char *p = mlprof__g.cfg.gpu_functions;
    K.fn_all = !*p;
    if (K.fn_all)
        return;
    read_names();
    size_t n;
    while ((n = mlprof__list_item(&p)) != 0) {
        const char *item = p;
        p += n;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)n, item);
        size_t len = base_len(name);
        int found = 0;
        for (int d = CUPTI_DOMAIN_DRIVER; d <= CUPTI_DOMAIN_RUNTIME; d++) {
            for (uint32_t id = 1; id < MAX_CBID; id++) {
                const char *s = K.names[d][id];
                if (s && strlen(s) == len && strncmp(s, name, len) == 0) {
                    K.fn_on[d][id] = 1;
                    found = 1;
                }
            }
        }
        if (!found) {
            char what[160];
            snprintf(what, sizeof what, "gpu function %s", name);
            mlprof__hw_unavailable(what, "CUPTI knows no CUDA runtime or driver function of that name");
        }
    }
}

/* ------------------------------------------------------------- on, off */

static const struct {
    unsigned bit;
    uint32_t kind;
} k_kinds[] = {
    {MLPROF__GPU_KERNEL, CUPTI_KIND_CONCURRENT_KERNEL}, {MLPROF__GPU_MEMCPY, CUPTI_KIND_MEMCPY},
    {MLPROF__GPU_MEMCPY, CUPTI_KIND_MEMCPY2},           {MLPROF__GPU_MEMSET, CUPTI_KIND_MEMSET},
    {MLPROF__GPU_SYNC, CUPTI_KIND_SYNCHRONIZATION},     {MLPROF__GPU_RUNTIME, CUPTI_KIND_RUNTIME},
    {MLPROF__GPU_DRIVER, CUPTI_KIND_DRIVER},        {MLPROF__GPU_LAUNCH, CUPTI_KIND_DRIVER},
};

static void no_gpu(const char *why)
{
    mlprof__hw_unavailable("gpu activity", why);
}

/* Turns the calls of one API on or off function by function (those of
 * table: what gpu_functions chose, or the driver's launching calls); 0 when
 * this CUPTI cannot. */
static int api_by_function(int domain, uint8_t (*table)[MAX_CBID], int on)
{
    int (*fn)(uint32_t, uint8_t) = domain == CUPTI_DOMAIN_RUNTIME ? K.enable_runtime_api : K.enable_driver_api;
    if (!fn)
        return 0;
    for (uint32_t id = 1; id < MAX_CBID; id++) {
        if (table[domain][id] && fn(id, (uint8_t)on) != CUPTI_OK) {
            for (uint32_t back = 1; on && back < id; back++) /* none left on half way */
                if (table[domain][back])
                    fn(back, 0);
            return 0;
        }
    }
    return 1;
}

/* The driver's calls that launch GPU work, by name: cuLaunch* (kernels,
 * cooperative kernels, host functions) and cuGraphLaunch*. */
static void choose_launches(void)
{
    memset(K.launch_fn, 0, sizeof K.launch_fn);
    read_names();
    for (uint32_t id = 1; id < MAX_CBID; id++) {
        const char *s = K.names[CUPTI_DOMAIN_DRIVER][id];
        if (s && (strncmp(s, "cuLaunch", 8) == 0 || strncmp(s, "cuGraphLaunch", 13) == 0))
            K.launch_fn[CUPTI_DOMAIN_DRIVER][id] = 1;
    }
}

static int enable_kind(uint32_t kind, char *why, size_t len)
{
    int rc = K.enable(kind);
    if (rc == CUPTI_OK)
        return 0;
    if (!mlprof__cupti_no_driver(why, len))
        snprintf(why, len, "cuptiActivityEnable(%u) failed: %s (%d)", kind, mlprof__cupti_result(rc), rc);
    return -1;
}

int mlprof__gpu_metrics_wanted(void)
{
    return mlprof__g.cfg.gpu_metrics[0] || (mlprof__g.cfg.gpu_details_mask & MLPROF__GPU_MEASURED_DETAILS);
}

/* The activity kinds of the gpu key on, libcupti loaded. */
static void start_activity(unsigned want)
{
    char why[1024];
    K.cap = mlprof__g.cfg.gpu_buffer_size;
    K.buf_size = K.cap / 8 < (4u << 20) ? K.cap / 8 : (4u << 20);
    if (K.buf_size < 65536)
        K.buf_size = 65536;
    if (!K.registered) {
        /* before any kind is enabled, so that every record has our clock */
        K.own_clock = K.timestamp_callback && K.timestamp_callback(our_clock) == CUPTI_OK;
        int rc = K.register_callbacks(on_request, on_complete);
        if (rc != CUPTI_OK) {
            snprintf(why, sizeof why, "cuptiActivityRegisterCallbacks failed: %s (%d)", mlprof__cupti_result(rc), rc);
            no_gpu(why);
            return;
        }
        K.registered = 1;
    }
    choose_functions();
    choose_launches();
    if (enable_kind(CUPTI_KIND_DEVICE, why, sizeof why) != 0 || enable_kind(CUPTI_KIND_CONTEXT, why, sizeof why) != 0) {
        no_gpu(why);
        return;
    }
    if (K.thread_id_type(CUPTI_THREAD_ID_SYSTEM) != CUPTI_OK)
        mlprof__hw_unavailable("gpu thread ids", "CUPTI cannot give system thread ids: calls go on tracks of their own");
    K.per_function = 0;
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++) {
        if (!(want & k_kinds[i].bit))
            continue;
        uint32_t kind = k_kinds[i].kind;
        if (k_kinds[i].bit == MLPROF__GPU_LAUNCH) {
            if ((K.kinds_on & MLPROF__GPU_DRIVER) && !(K.per_function & MLPROF__GPU_DRIVER))
                continue; /* every driver call is on (the DRIVER kind comes first in k_kinds) */
            if (!api_by_function(CUPTI_DOMAIN_DRIVER, K.launch_fn, 1)) {
                mlprof__hw_unavailable("gpu driver launches", "this CUPTI cannot turn driver calls on one by one "
                                       "(cuptiActivityEnableDriverApi): kernels launched through the driver API "
                                       "(cuBLASLt, CUTLASS, Triton) are not linked to their launch (gpu=all links "
                                       "them, with every driver call)");
                continue;
            }
            K.per_function |= k_kinds[i].bit;
            K.kinds_on |= k_kinds[i].bit;
            continue;
        }
        if ((kind == CUPTI_KIND_RUNTIME || kind == CUPTI_KIND_DRIVER) && !K.fn_all &&
            api_by_function(kind == CUPTI_KIND_RUNTIME ? CUPTI_DOMAIN_RUNTIME : CUPTI_DOMAIN_DRIVER, K.fn_on, 1)) {
            K.per_function |= k_kinds[i].bit;
            K.kinds_on |= k_kinds[i].bit;
            continue;
        }
        if (enable_kind(kind, why, sizeof why) != 0) {
            char what[64];
            snprintf(what, sizeof what, "gpu activity kind %u", kind);
            mlprof__hw_unavailable(what, why);
            continue;
        }
        K.kinds_on |= k_kinds[i].bit;
    }
    clock_point();
}

void mlprof__gpu_start(void)
{
    unsigned want = mlprof__g.cfg.gpu_mask;
    int metrics = mlprof__gpu_metrics_wanted();
    if ((!want && !metrics) || K.kinds_on || K.metrics_on)
        return;
    if (K.forked) {
        no_gpu("not in a forked child (CUDA does not survive fork)");
        if (metrics)
            mlprof__hw_unavailable("gpu metrics", "not in a forked child (CUDA does not survive fork)");
        return;
    }
    if (!K.tried) {
        K.tried = 1;
        mlprof__map_init(&K.interned);
        K.tail = &K.queue;
        K.ok = load(K.load_error, sizeof K.load_error) == 0;
    }
    if (!K.ok) { /* said again in every run's trace */
        if (want)
            no_gpu(K.load_error);
        if (metrics)
            mlprof__hw_unavailable("gpu metrics", K.load_error);
        return;
    }
    if (want)
        start_activity(want);
    if (metrics) {
        mlprof__gpu_counters_start(K.lib);
        K.metrics_on = 1;
    }
}

void mlprof__gpu_stop(void)
{
    if (K.metrics_on) {
        mlprof__gpu_counters_stop();
        K.metrics_on = 0;
    }
    if (!K.kinds_on || K.forked)
        return;
    for (size_t i = 0; i < sizeof k_kinds / sizeof k_kinds[0]; i++) {
        uint32_t kind = k_kinds[i].kind;
        if (!(K.kinds_on & k_kinds[i].bit))
            continue;
        if (K.per_function & k_kinds[i].bit)
            api_by_function(kind == CUPTI_KIND_RUNTIME ? CUPTI_DOMAIN_RUNTIME : CUPTI_DOMAIN_DRIVER,
                            k_kinds[i].bit == MLPROF__GPU_LAUNCH ? K.launch_fn : K.fn_on, 0);
        else
            K.disable(kind);
    }
    K.kinds_on = 0;
}

void mlprof__gpu_after_fork(void)
{
    K.forked = 1;
    K.kinds_on = 0;
    K.metrics_on = 0;
    mlprof__gpu_counters_after_fork();
    pthread_mutex_init(&K.lock, NULL);
    K.queue = NULL; /* the parent's buffers: their memory is the child's copy, never handed back */
    K.tail = &K.queue;
    K.queued = K.held = 0;
}

/* ----------------------------------------------------------- the keys */

static int item_is(const char *item, size_t n, const char *word)
{
    return strlen(word) == n && strncmp(item, word, n) == 0;
}

int mlprof__gpu_parse(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    static const struct {
        const char *name;
        unsigned bits;
    } kinds[] = {{"kernel", MLPROF__GPU_KERNEL}, {"memcpy", MLPROF__GPU_MEMCPY}, {"memset", MLPROF__GPU_MEMSET},
                 {"sync", MLPROF__GPU_SYNC},     {"runtime", MLPROF__GPU_RUNTIME}, {"driver", MLPROF__GPU_DRIVER},
                 {"launch", MLPROF__GPU_LAUNCH},
                 {"on", MLPROF__GPU_KERNEL | MLPROF__GPU_MEMCPY | MLPROF__GPU_MEMSET | MLPROF__GPU_SYNC |
                            MLPROF__GPU_RUNTIME | MLPROF__GPU_LAUNCH},
                 {"all", 0x7f},
                 {"off", 0},
                 {"none", 0}};
    int is_gpu = strcmp(key, "gpu") == 0, is_details = strcmp(key, "gpu_details") == 0;
    *mask = 0;
    if (strcmp(key, "gpu_metrics") == 0)
        return mlprof__gpu_metrics_check(value, why, len);
    const char *p = value;
    size_t n;
    while ((n = mlprof__list_item(&p)) != 0) {
        const char *item = p;
        p += n;
        if (is_gpu) {
            size_t i;
            for (i = 0; i < sizeof kinds / sizeof kinds[0] && !item_is(item, n, kinds[i].name); i++) {
            }
            if (i == sizeof kinds / sizeof kinds[0]) {
                snprintf(why, len, "unknown GPU activity \"%.*s\" (known: kernel, memcpy, memset, sync, runtime, "
                                   "driver, launch; on, all, off)", (int)n, item);
                return -1;
            }
            *mask |= kinds[i].bits;
        } else if (is_details) {
            if (item_is(item, n, "occupancy")) {
                *mask |= MLPROF__GPU_OCCUPANCY;
            } else if (item_is(item, n, "achieved_occupancy")) {
                *mask |= MLPROF__GPU_ACHIEVED_OCCUPANCY;
            } else if (item_is(item, n, "branch_efficiency")) {
                *mask |= MLPROF__GPU_BRANCH_EFFICIENCY;
            } else {
                snprintf(why, len, "unknown GPU detail \"%.*s\" (known: occupancy, achieved_occupancy, "
                                   "branch_efficiency)", (int)n, item);
                return -1;
            }
        } else {
            int ok = n >= 3 && item[0] == 'c' && item[1] == 'u' && n < 128;
            for (size_t i = 0; ok && i < n; i++)
                ok = (item[i] >= 'a' && item[i] <= 'z') || (item[i] >= 'A' && item[i] <= 'Z') ||
                     (item[i] >= '0' && item[i] <= '9') || item[i] == '_';
            if (!ok) {
                snprintf(why, len, "\"%.*s\" is not the name of a CUDA runtime or driver function (cudaX or cuX)",
                         (int)n, item);
                return -1;
            }
        }
    }
    return 0;
}

void mlprof__cupti_other_data(mlprof__sb *out)
{
    mlprof__sb_puts(out, ",\"cupti_library\":");
    mlprof__sb_json_str(out, K.ok ? K.path : "", K.ok ? strlen(K.path) : 0);
    mlprof__sb_printf(out, ",\"cupti_clock\":\"%s\"", K.own_clock ? "mlprof" : "converted");
}
