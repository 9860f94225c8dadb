/*
 * papi.c - PAPI events per span ("papi:NAME" in the counters key): preset
 * events (PAPI_TOT_INS, PAPI_L1_DCM) and native ones (perf::TASK-CLOCK),
 * by their PAPI names. libpapi is loaded with dlopen (the papi_library key),
 * so that one build runs with and without it. Each thread gets its own event
 * set at its first span, started once and read at each span's begin and end;
 * the difference becomes an argument of the span named after the event.
 *
 * The few PAPI declarations needed are written here from its documented
 * API, so that building needs no PAPI header.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hw_internal.h"

#define PAPI_OK 0
#define PAPI_NULL (-1)
#define PAPI_ENOEVNT (-7)
#define PAPI_ECMP_DISABLED (-25)
#define PAPI_NOT_INITED 0
#define PAPI_LIB_VERSION 21
#define PAPI_VERSION(maj, min) (((maj) << 24) | ((min) << 16))
#define PAPI_VERSION_MAJOR(v) (((v) >> 24) & 0xff)

/* The start of PAPI_component_info_t as PAPI 7.0's papi.h declares it:
 * name[PAPI_MAX_STR_LEN], short_name[PAPI_MIN_STR_LEN],
 * description[PAPI_MAX_STR_LEN], version, support_version and kernel_version
 * [PAPI_MIN_STR_LEN], disabled_reason[PAPI_HUGE_STR_LEN], then int disabled
 * (0 or the error its initialisation gave), with PAPI_MIN_STR_LEN 64,
 * PAPI_MAX_STR_LEN 128 and PAPI_HUGE_STR_LEN 1024. PAPI 5 and 6 declared
 * disabled_reason[PAPI_MAX_STR_LEN], so it is read from a PAPI 7 only. */
typedef struct papi7_component_head {
    char name[128];
    char short_name[64];
    char description[128];
    char version[64];
    char support_version[64];
    char kernel_version[64];
    char disabled_reason[1024];
    int disabled;
} papi7_component_head;

typedef struct papi_api {
    void *lib;
    int (*library_init)(int);
    int (*is_initialized)(void);
    int (*thread_init)(unsigned long (*)(void));
    int (*create_eventset)(int *);
    int (*add_named_event)(int, const char *);
    int (*start)(int);
    int (*read)(int, long long *);
    int (*stop)(int, long long *);
    int (*cleanup_eventset)(int);
    int (*destroy_eventset)(int *);
    int (*unregister_thread)(void);
    char *(*strerror)(int);
    /* optional: only to say why an event cannot be added */
    int (*get_opt)(int, void *);
    int (*num_components)(void);
    const void *(*get_component_info)(int);
    int (*event_name_to_code)(const char *, int *);
    int (*get_event_component)(int);
} papi_api;

static papi_api A;         /* loaded once, kept: PAPI cannot be unloaded safely */
static int g_loaded;       /* 1 loaded, -1 failed for good */
static int g_major;        /* the library's major version, 0 where it does not say */
static char g_load_error[2 * MLPROF__PATH_MAX];
static char g_tried[MLPROF__PATH_MAX]; /* the papi_library that failed */

static struct {
    char (*names)[MLPROF__PAPI_NAME]; /* hw.c's list for this run (the statistics' slots) */
    size_t n;
    int observer;
    unsigned generation;
} P = {.observer = -1};

static unsigned long thread_id(void) { return (unsigned long)pthread_self(); }

static const char *papi_error(int rc)
{
    const char *s = A.strerror ? A.strerror(rc) : NULL;
    return s ? s : "unknown PAPI error";
}

static int try_open(const char *path)
{
    A.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    return A.lib != NULL;
}

static int failed(void)
{
    if (A.lib)
        dlclose(A.lib);
    memset(&A, 0, sizeof A);
    snprintf(g_tried, sizeof g_tried, "%s", mlprof__g.cfg.papi_library);
    g_loaded = -1;
    return -1;
}

/* dlopen and PAPI_library_init, once (again if papi_library changed after a
 * failure); 0, or -1 with g_load_error set. */
static int load(void)
{
    const char *path = mlprof__g.cfg.papi_library;
    if (g_loaded > 0 || (g_loaded < 0 && strcmp(g_tried, path) == 0))
        return g_loaded > 0 ? 0 : -1;
    /* Debian's runtime package has only the versioned names */
    static const char *const fallbacks[] = {"libpapi.so.7.1", "libpapi.so.7.0", "libpapi.so.7", "libpapi.so.6.0",
                                            "libpapi.so.5"};
    char first_error[MLPROF__PATH_MAX];
    if (!try_open(path)) {
        const char *e = dlerror();
        snprintf(first_error, sizeof first_error, "%s", e ? e : "not found");
        if (strcmp(path, "libpapi.so") == 0) {
            for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0] && !A.lib; i++)
                try_open(fallbacks[i]);
        }
    }
    if (!A.lib) {
        snprintf(g_load_error, sizeof g_load_error,
                 "cannot load PAPI: %s (not installed? on Debian: apt-get install libpapi7.0)", first_error);
        return failed();
    }
    struct {
        void **slot;
        const char *name;
    } fns[] = {
        {(void **)&A.library_init, "PAPI_library_init"},
        {(void **)&A.is_initialized, "PAPI_is_initialized"},
        {(void **)&A.thread_init, "PAPI_thread_init"},
        {(void **)&A.create_eventset, "PAPI_create_eventset"},
        {(void **)&A.add_named_event, "PAPI_add_named_event"},
        {(void **)&A.start, "PAPI_start"},
        {(void **)&A.read, "PAPI_read"},
        {(void **)&A.stop, "PAPI_stop"},
        {(void **)&A.cleanup_eventset, "PAPI_cleanup_eventset"},
        {(void **)&A.destroy_eventset, "PAPI_destroy_eventset"},
        {(void **)&A.unregister_thread, "PAPI_unregister_thread"},
        {(void **)&A.strerror, "PAPI_strerror"},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if ((*fns[i].slot = dlsym(A.lib, fns[i].name)) == NULL) {
            snprintf(g_load_error, sizeof g_load_error, "the PAPI library %s has no %s", path, fns[i].name);
            return failed();
        }
    }
    if (A.is_initialized() == PAPI_NOT_INITED) {
        /* the version the caller was built for must match the library's;
         * without its header, try those that exist */
        int rc = -1;
        for (int maj = 7; maj >= 5 && rc < 0; maj--) {
            for (int min = 3; min >= 0 && rc < 0; min--)
                rc = A.library_init(PAPI_VERSION(maj, min));
        }
        if (rc < 0) {
            snprintf(g_load_error, sizeof g_load_error, "PAPI_library_init: %s", papi_error(rc));
            return failed();
        }
        if ((rc = A.thread_init(thread_id)) != PAPI_OK) {
            snprintf(g_load_error, sizeof g_load_error, "PAPI_thread_init: %s", papi_error(rc));
            return failed();
        }
    }
    struct {
        void **slot;
        const char *name;
    } optional[] = {
        {(void **)&A.get_opt, "PAPI_get_opt"},
        {(void **)&A.num_components, "PAPI_num_components"},
        {(void **)&A.get_component_info, "PAPI_get_component_info"},
        {(void **)&A.event_name_to_code, "PAPI_event_name_to_code"},
        {(void **)&A.get_event_component, "PAPI_get_event_component"},
    };
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++)
        *optional[i].slot = dlsym(A.lib, optional[i].name);
    int version = A.get_opt ? A.get_opt(PAPI_LIB_VERSION, NULL) : 0;
    g_major = version > 0 ? PAPI_VERSION_MAJOR(version) : 0;
    g_loaded = 1;
    return 0;
}

/* Why PAPI could not add an event: its error, and, where that is an event
 * not found or a component disabled, the reason PAPI gives for disabling the
 * event's component. A name PAPI does not know at all is taken for one of
 * the CPU component's (component 0, perf_event on Linux: its native events
 * are those that a disabled component no longer lists). */
static void add_failure(int rc, const char *event, char *out, size_t len)
{
    snprintf(out, len, "%s", papi_error(rc));
    if ((rc != PAPI_ENOEVNT && rc != PAPI_ECMP_DISABLED) || g_major != 7 || !A.num_components ||
        !A.get_component_info)
        return;
    int cidx = 0, code;
    if (A.event_name_to_code && A.get_event_component && A.event_name_to_code(event, &code) == PAPI_OK) {
        int c = A.get_event_component(code);
        if (c >= 0)
            cidx = c;
    }
    if (cidx >= A.num_components())
        return;
    const papi7_component_head *ci = A.get_component_info(cidx);
    if (!ci || !ci->disabled)
        return;
    int name_len = (int)strnlen(ci->name, sizeof ci->name);
    int why_len = (int)strnlen(ci->disabled_reason, sizeof ci->disabled_reason);
    snprintf(out, len, "%s (PAPI's %.*s component is disabled: %.*s)", papi_error(rc), name_len, ci->name,
             why_len > 0 ? why_len : 9, why_len > 0 ? ci->disabled_reason : "no reason");
}

/* ---------------------------------------------------------- per thread */

typedef struct papi_thread {
    int set;                       /* the event set, or PAPI_NULL */
    int at[MLPROF__HW_PAPI_MAX];   /* the event's place in a read, or -1 */
    int count;                     /* events in the set */
    unsigned generation;
} papi_thread;

static __thread papi_thread *t_papi;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void drop_set(papi_thread *t)
{
    if (t->set == PAPI_NULL)
        return;
    long long ignored[MLPROF__HW_PAPI_MAX];
    if (t->count)
        A.stop(t->set, ignored);
    A.cleanup_eventset(t->set);
    A.destroy_eventset(&t->set);
    t->set = PAPI_NULL;
}

/* What t_papi points at once the thread's set is gone at its exit: a span
 * recorded by a later key destructor gets no counts. */
static papi_thread k_gone = {.set = PAPI_NULL};

static void thread_gone(void *arg)
{
    papi_thread *t = arg;
    t_papi = &k_gone; /* before the free: nothing reaches the block after it */
    drop_set(t);
    A.unregister_thread();
    mlprof__free(t);
}

static void make_key(void) { pthread_key_create(&g_key, thread_gone); }

static papi_thread *thread_open(void)
{
    papi_thread *t = t_papi;
    if (t == &k_gone)
        return NULL;
    if (t && t->generation == P.generation)
        return t;
    if (!t) {
        t = mlprof__calloc(1, sizeof *t);
        if (!t)
            return NULL;
        t->set = PAPI_NULL;
        pthread_once(&g_key_once, make_key);
        pthread_setspecific(g_key, t);
        t_papi = t;
    }
    drop_set(t); /* an earlier run's events */
    t->generation = P.generation;
    t->count = 0;
    int rc = A.create_eventset(&t->set);
    if (rc != PAPI_OK) {
        t->set = PAPI_NULL;
        mlprof__hw_unavailable("papi", papi_error(rc));
        return t;
    }
    for (size_t i = 0; i < P.n; i++) {
        t->at[i] = -1;
        rc = A.add_named_event(t->set, P.names[i]);
        if (rc == PAPI_OK) {
            t->at[i] = t->count++;
            continue;
        }
        char what[MLPROF__PAPI_NAME + 8], why[1400];
        snprintf(what, sizeof what, "papi:%s", P.names[i]);
        add_failure(rc, P.names[i], why, sizeof why);
        mlprof__hw_unavailable(what, why);
    }
    if (t->count && (rc = A.start(t->set)) != PAPI_OK) {
        mlprof__hw_unavailable("papi", papi_error(rc));
        t->count = 0;
    }
    return t;
}

typedef struct papi_span {
    long long at_begin[MLPROF__HW_PAPI_MAX];
} papi_span;

static void on_begin(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    papi_thread *t = thread_open();
    if (t && t->count && A.read(t->set, ((papi_span *)data)->at_begin) != PAPI_OK)
        t->count = 0; /* broken; stop trying on this thread */
}

static void on_end(void *user, const mlprof_span_info *span, void *data)
{
    (void)user;
    (void)span;
    papi_thread *t = t_papi;
    long long now[MLPROF__HW_PAPI_MAX];
    if (!t || t == &k_gone || !t->count || t->generation != P.generation || A.read(t->set, now) != PAPI_OK)
        return;
    const papi_span *s = data;
    for (size_t i = 0; i < P.n; i++) {
        if (t->at[i] >= 0)
            mlprof_arg_int(P.names[i], now[t->at[i]] - s->at_begin[t->at[i]]);
    }
}

int mlprof__papi_span_start(char (*names)[MLPROF__PAPI_NAME], size_t n)
{
    if (P.observer >= 0)
        return MLPROF_OK;
    if (load() != 0) {
        mlprof__hw_unavailable("papi", g_load_error);
        return MLPROF_OK;
    }
    P.n = n < MLPROF__HW_PAPI_MAX ? n : MLPROF__HW_PAPI_MAX;
    P.names = names;
    P.generation++;
    return mlprof__hw_observer_on(&P.observer, "papi", sizeof(papi_span), on_begin, on_end);
}

void mlprof__papi_span_stop(void) { mlprof__hw_observer_off(&P.observer); }

void mlprof__papi_after_fork(void)
{
    /* The forking thread's event set counts the parent's thread: a new
     * generation makes it drop the set and make its own at its next span. */
    P.generation++;
}
