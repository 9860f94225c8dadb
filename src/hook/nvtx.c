/*
 * nvtx.c - an NVTX injection library (hook "nvtx"): the ranges, markers,
 * domains and thread names that PyTorch, CUDA libraries and annotated
 * programs emit through NVTX v3, in the trace. mlprof run points
 * NVTX_INJECTION64_PATH at the preload library; each copy of NVTX (every
 * library that includes its headers has its own) calls
 * InitializeInjectionNvtx2 once, and we put our functions in the slots of
 * its CORE and CORE2 tables; slots left alone become no-ops.
 *
 *   push/pop (nvtxRangePush*, nvtxDomainRangePushEx) - nested spans, in
 *     domain "nvtx" or the NVTX domain's name, with the payload and category
 *     as arguments; push returns the depth, pop the depth it leaves;
 *   start/end (nvtxRangeStart*, nvtxRangeEnd) - frames (async slices) named
 *     by the message; such a range may end on another thread (the collector
 *     matches a frame's end across threads);
 *   marks - instants on the thread; nvtxNameOsThreadA for the calling thread
 *     names it.
 *
 * The ids, layouts and signatures (NVTX 3) are written here from NVTX's
 * documented headers: no NVTX header is needed to build.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../record/capture.h"
#include "hook.h"

#define EXPORT __attribute__((visibility("default")))

typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table;
typedef struct nvtx_callbacks {
    size_t struct_size;
    int (*get_module_table)(int module, nvtx_table *out, unsigned *out_size);
} nvtx_callbacks;
typedef const void *(*nvtx_get_export_table)(uint32_t id);

enum { ETID_CALLBACKS = 1, MODULE_CORE = 1, MODULE_CORE2 = 5 };
enum { CORE_MARK_EX = 1, CORE_MARK_A = 2, CORE_START_EX = 4, CORE_START_A = 5, CORE_END = 7, CORE_PUSH_EX = 8,
       CORE_PUSH_A = 9, CORE_POP = 11, CORE_NAME_THREAD_A = 14 };
enum { CORE2_MARK_EX = 1, CORE2_START_EX = 2, CORE2_END = 3, CORE2_PUSH_EX = 4, CORE2_POP = 5,
       CORE2_REGISTER_STRING_A = 10, CORE2_CREATE_A = 12, CORE2_DESTROY = 14 };
enum { MSG_ASCII = 1, MSG_UNICODE = 2, MSG_REGISTERED = 3 };
enum { PAY_U64 = 1, PAY_I64 = 2, PAY_DOUBLE = 3, PAY_U32 = 4, PAY_I32 = 5, PAY_FLOAT = 6 };

typedef struct nvtx_attributes {
    uint16_t version, size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type, reserved0;
    union {
        uint64_t u64;
        int64_t i64;
        double d;
        uint32_t u32;
        int32_t i32;
        float f;
    } payload;
    int32_t message_type;
    union {
        const char *ascii;
        const void *unicode;
        const struct nvtx_string *registered;
    } message;
} nvtx_attributes;

/* What our handles point at. */
typedef struct nvtx_domain {
    mlprof_domain *d;
} nvtx_domain;
typedef struct nvtx_string {
    const char *text;
} nvtx_string;

static mlprof_domain *g_default;
static __thread int t_depth;

/* Start/end ranges: frames by message, kept by the id returned. */
#define MAX_RANGES 4096
static struct {
    pthread_mutex_t lock;
    mlprof_span *open[MAX_RANGES]; /* the frame of range id i + 1, or NULL */
    uint64_t next;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int on(void) { return mlprof__busy == 0 && (mlprof_active_flag & 1) && mlprof__hook_on(MLPROF__HOOK_NVTX); }

/* A thread of the parent's may have held R.lock at a fork (a leaf lock): the
 * child's is free. Registered before the lock is first taken. */
static void ranges_after_fork(void) { pthread_mutex_init(&R.lock, NULL); }
static void watch_forks(void) { pthread_atfork(NULL, NULL, ranges_after_fork); }
static void ranges_lock(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, watch_forks);
    pthread_mutex_lock(&R.lock);
}

static mlprof_domain *domain_of(const nvtx_domain *h)
{
    if (h && h->d)
        return h->d;
    if (!__atomic_load_n(&g_default, __ATOMIC_ACQUIRE))
        __atomic_store_n(&g_default, mlprof_domain_create("nvtx"), __ATOMIC_RELEASE);
    return g_default;
}

static const char *message(const nvtx_attributes *a)
{
    if (!a)
        return "range";
    if (a->message_type == MSG_ASCII && a->message.ascii)
        return a->message.ascii;
    if (a->message_type == MSG_REGISTERED && a->message.registered && a->message.registered->text)
        return a->message.registered->text;
    return a->message_type == MSG_UNICODE ? "(wide-character message)" : "range";
}

/* The payload and category of an event, as arguments of what was just begun. */
static void attributes(const nvtx_attributes *a)
{
    if (!a || a->size < 48)
        return;
    switch (a->payload_type) {
    case PAY_U64: mlprof_arg_int("payload", (int64_t)a->payload.u64); break;
    case PAY_I64: mlprof_arg_int("payload", a->payload.i64); break;
    case PAY_U32: mlprof_arg_int("payload", a->payload.u32); break;
    case PAY_I32: mlprof_arg_int("payload", a->payload.i32); break;
    case PAY_DOUBLE: mlprof_arg_double("payload", a->payload.d); break;
    case PAY_FLOAT: mlprof_arg_double("payload", a->payload.f); break;
    default: break;
    }
    if (a->category)
        mlprof_arg_int("category", a->category);
}

/* ---------------------------------------------------------- push, pop */

static int push(const nvtx_domain *h, const char *name, const nvtx_attributes *a)
{
    mlprof__capture_nvtx(name ? name : ""); /* capture_range=nvtx:NAME starts before the range */
    if (!on())
        return -1;
    mlprof_begin_dynamic(domain_of(h), name);
    attributes(a);
    return t_depth++;
}

static int pop(const nvtx_domain *h)
{
    int depth = -1;
    if (on() && t_depth > 0) {
        mlprof_end_dynamic(domain_of(h));
        depth = --t_depth;
    }
    mlprof__capture_nvtx(NULL); /* and stops after it */
    return depth;
}

static int push_a(const char *msg) { return push(NULL, msg ? msg : "range", NULL); }
static int push_ex(const nvtx_attributes *a) { return push(NULL, message(a), a); }
static int pop_core(void) { return pop(NULL); }
static int domain_push_ex(const nvtx_domain *h, const nvtx_attributes *a) { return push(h, message(a), a); }
static int domain_pop(const nvtx_domain *h) { return pop(h); }

/* ---------------------------------------------------------- start, end */

static uint64_t start(const nvtx_domain *h, const char *name, const nvtx_attributes *a)
{
    if (!on())
        return 0;
    mlprof_span *frame = mlprof_frame_create(domain_of(h), name);
    if (!frame)
        return 0;
    ranges_lock();
    uint64_t id = 0;
    for (uint64_t k = 0; k < MAX_RANGES && !id; k++) {
        uint64_t i = (R.next + k) % MAX_RANGES;
        if (!R.open[i]) {
            R.open[i] = frame;
            R.next = i + 1;
            id = i + 1;
        }
    }
    pthread_mutex_unlock(&R.lock);
    if (id) {
        mlprof_begin(frame);
        attributes(a);
    }
    return id;
}

static void end(uint64_t id)
{
    if (!id || id > MAX_RANGES)
        return;
    ranges_lock();
    mlprof_span *frame = R.open[id - 1];
    R.open[id - 1] = NULL;
    pthread_mutex_unlock(&R.lock);
    if (frame) {
        if (on())
            mlprof_end(frame);
        mlprof_span_destroy(frame); /* the next range of its name takes it up again */
    }
}

static uint64_t start_a(const char *msg) { return start(NULL, msg ? msg : "range", NULL); }
static uint64_t start_ex(const nvtx_attributes *a) { return start(NULL, message(a), a); }
static uint64_t domain_start_ex(const nvtx_domain *h, const nvtx_attributes *a) { return start(h, message(a), a); }
static void domain_end(const nvtx_domain *h, uint64_t id)
{
    (void)h;
    end(id);
}

/* -------------------------------------------------------- marks, names */

static void mark(const nvtx_domain *h, const char *name)
{
    if (on())
        mlprof_mark_dynamic(domain_of(h), name, MLPROF_SCOPE_THREAD);
}

static void mark_a(const char *msg) { mark(NULL, msg ? msg : "mark"); }
static void mark_ex(const nvtx_attributes *a) { mark(NULL, message(a)); }
static void domain_mark_ex(const nvtx_domain *h, const nvtx_attributes *a) { mark(h, message(a)); }

static void name_thread_a(uint32_t tid, const char *name)
{
    if (name && tid == (uint32_t)syscall(SYS_gettid) && mlprof__hook_on(MLPROF__HOOK_NVTX))
        mlprof_thread_set_name(name);
}

static nvtx_domain *domain_create_a(const char *name)
{
    nvtx_domain *h = mlprof__calloc(1, sizeof *h);
    if (h)
        h->d = mlprof_domain_create(name && name[0] ? name : "nvtx");
    return h;
}

static void domain_destroy(nvtx_domain *h)
{
    (void)h; /* kept: records may still name its domain */
}

static nvtx_string *register_string_a(const nvtx_domain *h, const char *text)
{
    (void)h;
    nvtx_string *s = mlprof__calloc(1, sizeof *s);
    if (s && !(s->text = mlprof__strdup(text ? text : ""))) {
        mlprof__free(s);
        s = NULL;
    }
    return s;
}

/* ------------------------------------------------------------- entry */

static void put(nvtx_table t, unsigned size, unsigned id, void *fn)
{
    if (id < size && t[id])
        *t[id] = (nvtx_fn)fn;
}

EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table get);

EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table get)
{
    const nvtx_callbacks *cb = get ? get(ETID_CALLBACKS) : NULL;
    if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_table)
        return 0;
    nvtx_table t;
    unsigned n = 0;
    if (cb->get_module_table(MODULE_CORE, &t, &n) && t) {
        put(t, n, CORE_MARK_EX, (void *)mark_ex);
        put(t, n, CORE_MARK_A, (void *)mark_a);
        put(t, n, CORE_START_EX, (void *)start_ex);
        put(t, n, CORE_START_A, (void *)start_a);
        put(t, n, CORE_END, (void *)end);
        put(t, n, CORE_PUSH_EX, (void *)push_ex);
        put(t, n, CORE_PUSH_A, (void *)push_a);
        put(t, n, CORE_POP, (void *)pop_core);
        put(t, n, CORE_NAME_THREAD_A, (void *)name_thread_a);
    }
    if (cb->get_module_table(MODULE_CORE2, &t, &n) && t) {
        put(t, n, CORE2_MARK_EX, (void *)domain_mark_ex);
        put(t, n, CORE2_START_EX, (void *)domain_start_ex);
        put(t, n, CORE2_END, (void *)domain_end);
        put(t, n, CORE2_PUSH_EX, (void *)domain_push_ex);
        put(t, n, CORE2_POP, (void *)domain_pop);
        put(t, n, CORE2_REGISTER_STRING_A, (void *)register_string_a);
        put(t, n, CORE2_CREATE_A, (void *)domain_create_a);
        put(t, n, CORE2_DESTROY, (void *)domain_destroy);
    }
    return 1;
}
