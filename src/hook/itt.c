/*
 * itt.c - an ITT collector (hook "itt"): what oneDNN, OpenMP runtimes, TBB
 * and programs annotated with Intel's ITT API say about themselves, in the
 * trace. mlprof run points INTEL_LIBITTNOTIFY64 at the preload library; the
 * static part of ITT compiled into each such library loads it at its first
 * call and, since we export __itt_api_init, hands us its table of function
 * pointers to fill in (one table per library that carries a copy).
 *
 * What is filled in:
 *   __itt_domain_create, __itt_string_handle_create - our own objects, laid
 *     out as ITT's (flags set: calls on a domain whose flags are 0 never
 *     reach a collector);
 *   __itt_task_begin/end - a span in an mlprof domain of the same name, named
 *     by the string handle;
 *   __itt_frame_begin_v3/end_v3 - a frame named after the domain;
 *   __itt_marker - an instant (scope global, process or thread);
 *   __itt_thread_set_name, __itt_pause, __itt_resume;
 *   __itt_counter_create, _inc, _inc_delta, _set_value - a counter series.
 * Domains and string handles made by the static part before it loaded us
 * are read by their names (the same layout).
 *
 * The layouts (ITT 3.x, packed to 8 bytes) are written here from the ITT API's
 * documented headers: no ITT header is needed to build.
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct itt_domain {
    volatile int flags;
    const char *name;
    void *name_w;
    int extra1;
    void *extra2;
    struct itt_domain *next;
} itt_domain;

typedef struct itt_string {
    const char *str;
    void *str_w;
    int extra1;
    void *extra2;
    struct itt_string *next;
} itt_string;

typedef struct itt_id {
    unsigned long long d1, d2, d3;
} itt_id;

typedef struct itt_api_info {
    const char *name;
    void **func_ptr;
    void *init_func;
    void *null_func;
    int group;
} itt_api_info;

/* __itt_global up to its table: magic, three versions, three flags, the
 * mutex, the library handle, an error handler, the path pointer. */
typedef struct itt_global_head {
    unsigned char magic[8];
    unsigned long version_major, version_minor, version_build;
    volatile long api_initialized, mutex_initialized, atomic_counter;
    pthread_mutex_t mutex;
    void *lib;
    void *error_handler;
    const char **dll_path_ptr;
    itt_api_info *api_list;
} itt_global_head;

/* ------------------------------------------------------- our objects */

#define MAX_OBJECTS 4096

typedef struct itt_counter {
    mlprof_counter *counter;
} itt_counter;

static struct {
    pthread_mutex_t lock;
    itt_domain *domains;
    itt_string *strings;
    /* every domain seen, ours or the static part's, and its mlprof domain */
    struct {
        const void *itt;
        mlprof_domain *d;
        mlprof_span *frame;
    } map[MAX_OBJECTS];
    size_t nmap; /* atomic: entries below it are complete */
} T = {.lock = PTHREAD_MUTEX_INITIALIZER};

static char *copy(const char *s)
{
    return mlprof__strdup(s ? s : "");
}

static itt_domain *domain_create(const char *name)
{
    pthread_mutex_lock(&T.lock);
    itt_domain *d;
    for (d = T.domains; d; d = d->next) {
        if (strcmp(d->name, name ? name : "") == 0)
            break;
    }
    if (!d && (d = mlprof__calloc(1, sizeof *d)) != NULL) {
        d->name = copy(name);
        d->flags = 1;
        d->next = T.domains;
        T.domains = d;
    }
    pthread_mutex_unlock(&T.lock);
    return d;
}

static itt_string *string_create(const char *name)
{
    pthread_mutex_lock(&T.lock);
    itt_string *s;
    for (s = T.strings; s; s = s->next) {
        if (strcmp(s->str, name ? name : "") == 0)
            break;
    }
    if (!s && (s = mlprof__calloc(1, sizeof *s)) != NULL) {
        s->str = copy(name);
        s->next = T.strings;
        T.strings = s;
    }
    pthread_mutex_unlock(&T.lock);
    return s;
}

/* The mlprof domain of an ITT domain (found without a lock once known).
 * mlprof's handles are made before T.lock is taken, never under it: a lock
 * held across reg_lock would stay held in a child forked meanwhile. */
static size_t entry_of(const itt_domain *id)
{
    size_t n = __atomic_load_n(&T.nmap, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++) {
        if (T.map[i].itt == id)
            return i;
    }
    const char *name = id->name && id->name[0] ? id->name : "itt";
    mlprof_domain *d = mlprof_domain_create(name); /* the same domain for racing threads */
    mlprof_span *frame = d ? mlprof_frame_create(d, name) : NULL;
    pthread_mutex_lock(&T.lock);
    size_t i, have = T.nmap;
    for (i = 0; i < have && T.map[i].itt != id; i++) {
    }
    int used = 0;
    if (i == have && have < MAX_OBJECTS) {
        T.map[i].itt = id;
        T.map[i].d = d;
        T.map[i].frame = frame;
        __atomic_store_n(&T.nmap, have + 1, __ATOMIC_RELEASE);
        used = 1;
    }
    pthread_mutex_unlock(&T.lock);
    if (!used) /* another thread's entry won: this frame is reused by a later create */
        mlprof_span_destroy(frame);
    return i < MAX_OBJECTS ? i : MAX_OBJECTS;
}

static mlprof_domain *domain_of(const itt_domain *id)
{
    size_t i = entry_of(id);
    return i < MAX_OBJECTS ? T.map[i].d : NULL;
}

static int on(void) { return mlprof__busy == 0 && (mlprof_active_flag & 1) && mlprof__hook_on(MLPROF__HOOK_ITT); }

/* ------------------------------------------------------ the functions */

static void task_begin(const itt_domain *d, itt_id id, itt_id parent, const itt_string *name)
{
    (void)id;
    (void)parent;
    if (on() && d)
        mlprof_begin_dynamic(domain_of(d), name && name->str ? name->str : "task");
}

static void task_end(const itt_domain *d)
{
    if (on() && d)
        mlprof_end_dynamic(domain_of(d));
}

static void frame_begin(const itt_domain *d, itt_id *id)
{
    (void)id;
    size_t i = d && on() ? entry_of(d) : MAX_OBJECTS;
    if (i < MAX_OBJECTS)
        mlprof_begin(T.map[i].frame);
}

static void frame_end(const itt_domain *d, itt_id *id)
{
    (void)id;
    size_t i = d && on() ? entry_of(d) : MAX_OBJECTS;
    if (i < MAX_OBJECTS)
        mlprof_end(T.map[i].frame);
}

static void marker(const itt_domain *d, itt_id id, const itt_string *name, int scope)
{
    (void)id;
    if (!on() || !d)
        return;
    /* ITT: 1 global, 2 track group, 3 track, 4 task, 5 marker */
    int s = scope == 1 ? MLPROF_SCOPE_GLOBAL : scope == 2 || scope == 3 ? MLPROF_SCOPE_PROCESS : MLPROF_SCOPE_THREAD;
    mlprof_mark_dynamic(domain_of(d), name && name->str ? name->str : "marker", s);
}

static void thread_set_name(const char *name)
{
    if (name && mlprof__hook_on(MLPROF__HOOK_ITT))
        mlprof_thread_set_name(name);
}

static void pause_(void)
{
    if (mlprof__hook_on(MLPROF__HOOK_ITT))
        mlprof_pause();
}

static void resume_(void)
{
    if (mlprof__hook_on(MLPROF__HOOK_ITT))
        mlprof_resume();
}

static itt_counter *counter_create(const char *name, const char *domain)
{
    itt_counter *c = mlprof__calloc(1, sizeof *c);
    if (c)
        c->counter = mlprof_counter_create(mlprof_domain_create(domain && domain[0] ? domain : "itt"), name);
    return c;
}

static void counter_inc_delta(itt_counter *c, unsigned long long delta)
{
    if (c && on())
        mlprof_counter_add(c->counter, (int64_t)delta);
}

static void counter_inc(itt_counter *c) { counter_inc_delta(c, 1); }

static void counter_set_value(itt_counter *c, void *value)
{
    if (c && value && on()) /* a counter made by __itt_counter_create holds an unsigned 64-bit value */
        mlprof_counter_set(c->counter, (int64_t)*(const unsigned long long *)value);
}

/* --------------------------------------------------------- the table */

static const struct {
    const char *name;
    void *fn;
} k_ours[] = {
    {"__itt_domain_create", (void *)domain_create},
    {"__itt_string_handle_create", (void *)string_create},
    {"__itt_task_begin", (void *)task_begin},
    {"__itt_task_end", (void *)task_end},
    {"__itt_frame_begin_v3", (void *)frame_begin},
    {"__itt_frame_end_v3", (void *)frame_end},
    {"__itt_marker", (void *)marker},
    {"__itt_thread_set_name", (void *)thread_set_name},
    {"__itt_pause", (void *)pause_},
    {"__itt_resume", (void *)resume_},
    {"__itt_counter_create", (void *)counter_create},
    {"__itt_counter_inc", (void *)counter_inc},
    {"__itt_counter_inc_delta", (void *)counter_inc_delta},
    {"__itt_counter_set_value", (void *)counter_set_value},
};

/* fork: T.lock is taken in the prepare handler (a leaf lock: nothing is
 * taken under it), so the child gets the lists whole and the lock free. */
static void fork_prepare(void) { pthread_mutex_lock(&T.lock); }
static void fork_parent(void) { pthread_mutex_unlock(&T.lock); }
static void fork_child(void) { pthread_mutex_init(&T.lock, NULL); }
static void watch_forks(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

EXPORT void __itt_api_init(void *global, int groups);

EXPORT void __itt_api_init(void *global, int groups)
{
    (void)groups;
    static pthread_once_t forks_once = PTHREAD_ONCE_INIT;
    pthread_once(&forks_once, watch_forks);
    const itt_global_head *g = global;
    static const unsigned char magic[8] = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30};
    if (!g || memcmp(g->magic, magic, sizeof magic) != 0 || !g->api_list) {
        mlprof__log(MLPROF_LOG_WARN, "ITT: a library called __itt_api_init with a table we do not know; "
                                     "its annotations are not recorded");
        return;
    }
    size_t filled = 0;
    for (const itt_api_info *e = g->api_list; e->name; e++) {
        for (size_t i = 0; i < sizeof k_ours / sizeof k_ours[0]; i++) {
            if (e->func_ptr && strcmp(e->name, k_ours[i].name) == 0) {
                *e->func_ptr = k_ours[i].fn;
                filled++;
            }
        }
    }
    if (!filled)
        mlprof__log(MLPROF_LOG_WARN, "ITT: no function of ours in a library's table (ITT %lu.%lu?)",
                    g->version_major, g->version_minor);
}
