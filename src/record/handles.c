/*
 * handles.c - domains and the handles of tasks, frames, events, counters and
 * markers. Created once (under the registry lock), used often: the hot path
 * reads only a handle's `on` flag. Handles are never freed while records may
 * point at them; a destroyed handle is only marked, and reused by a later
 * create of the same name.
 *
 * Finding a domain by its name, or a destroyed handle to reuse, goes through
 * a hash index (below), so that creating the n-th handle costs the same as
 * the first: a program that names a handle per layer, per shape or per call
 * site makes hundreds of thousands. The index holds the domains and the
 * destroyed handles only: a live handle is never looked up (a create of a
 * live name makes another handle), so names created again and again without
 * a destroy do not lengthen any chain. The index and the lists are the
 * registry's, read and written under reg_lock only; the hot path and the
 * collector hold handle pointers and never look at either.
 */
#include <stddef.h>
#include <string.h>

#include "capture.h"

int mlprof__mem_on;

/* ---------------------------------------------------------- the name index */

/* A chained hash table of nodes linked through a field of theirs, at `link`
 * bytes into the node. Its buckets start as a small array of its own, so that
 * an insertion never fails: when a larger array cannot be allocated the chains
 * only grow longer. (reg) */
typedef struct {
    void **heads;
    size_t nbuckets; /* a power of two */
    size_t count;
    size_t link;
    uint64_t (*hash)(const void *node);
    void *first[16];
} name_index;

#define INDEX_LINK(ix, node) (*(void **)((char *)(node) + (ix)->link))

/* FNV-1a over the name from a seed that mixes in the rest of the key, then
 * a finalizer: names that differ in their last characters ("op1", "op2")
 * land in different buckets even in a small table. */
static uint64_t hash_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t domain_hash(const void *node) { return hash_key(0, ((const mlprof_domain *)node)->name); }

static uint64_t handle_key(int type, int kind, const mlprof_domain *domain, const char *name)
{
    return hash_key((uint64_t)(uintptr_t)domain ^ ((uint64_t)type << 56) ^ ((uint64_t)kind << 48), name);
}

static uint64_t handle_hash(const void *node)
{
    const mlprof__handle *h = node;
    return handle_key(h->type, h->kind, h->domain, h->name);
}

static name_index g_domain_index = {NULL, 0, 0, offsetof(mlprof_domain, bucket_next), domain_hash, {0}};
static name_index g_free_index = {NULL, 0, 0, offsetof(mlprof__handle, bucket_next), handle_hash, {0}};

static void **index_bucket(name_index *ix, uint64_t hash)
{
    if (!ix->heads) { /* the first use: its own buckets */
        ix->heads = ix->first;
        ix->nbuckets = sizeof ix->first / sizeof ix->first[0];
    }
    return &ix->heads[hash & (ix->nbuckets - 1)];
}

/* Doubles the buckets once there are as many nodes as buckets. */
static void index_grow(name_index *ix)
{
    size_t n = ix->nbuckets * 2;
    void **heads = mlprof__calloc(n, sizeof *heads);
    if (!heads)
        return; /* longer chains, still correct */
    for (size_t b = 0; b < ix->nbuckets; b++) {
        for (void *node = ix->heads[b], *next; node; node = next) {
            next = INDEX_LINK(ix, node);
            void **head = &heads[ix->hash(node) & (n - 1)];
            INDEX_LINK(ix, node) = *head;
            *head = node;
        }
    }
    if (ix->heads != ix->first)
        mlprof__free(ix->heads);
    ix->heads = heads;
    ix->nbuckets = n;
}

static void index_insert(name_index *ix, void *node)
{
    (void)index_bucket(ix, 0); /* sets up the first buckets on the first use */
    if (ix->count >= ix->nbuckets)
        index_grow(ix);
    void **head = index_bucket(ix, ix->hash(node));
    INDEX_LINK(ix, node) = *head;
    *head = node;
    ix->count++;
}

/* Unlinks the node that `at` points to (a bucket's head or a node's link). */
static void index_unlink(name_index *ix, void **at)
{
    void *node = *at;
    *at = INDEX_LINK(ix, node);
    INDEX_LINK(ix, node) = NULL;
    ix->count--;
}

static int domain_on(const mlprof_domain *d)
{
    const mlprof__config *c = &mlprof__g.cfg;
    if (d->level > c->level)
        return 0;
    switch (d->klass) {
    case MLPROF_CLASS_OPERATOR:
        return c->profile_all || c->profile_operator;
    case MLPROF_CLASS_API:
        return c->profile_all || c->profile_api;
    case MLPROF_CLASS_MEMORY:
        return c->profile_all || c->profile_memory;
    default:
        return 1;
    }
}

/* A handle's `on` byte: bit 0 while its domain records, bit 1 when it is a
 * span that a capture waits for (capture.h), whatever its domain. While a
 * trigger waits and nothing records, bit 0 is clear too, so that the macros
 * (which see the active flag set) stop at the handle and make no call. */
static uint8_t handle_flags(const mlprof__handle *h)
{
    if (h->destroyed)
        return 0;
    int trigger = mlprof__trigger_on && h->type == MLPROF__H_SPAN && strcmp(h->name, mlprof__trigger_name) == 0;
    int recording = __atomic_load_n(&mlprof__g.state, __ATOMIC_ACQUIRE) == MLPROF_STATE_RUN &&
                    !__atomic_load_n(&mlprof__g.paused, __ATOMIC_ACQUIRE);
    int on = h->domain->on && (recording || !mlprof__trigger_on);
    return (uint8_t)((on ? 1 : 0) | (trigger ? MLPROF__HANDLE_TRIGGER : 0));
}

/* Caller holds reg_lock. */
static void refresh_locked(void)
{
    for (mlprof_domain *d = mlprof__g.domains; d; d = d->next)
        __atomic_store_n(&d->on, (uint8_t)domain_on(d), __ATOMIC_RELAXED);
    for (mlprof__handle *h = mlprof__g.handles; h; h = h->next)
        __atomic_store_n(&h->on, handle_flags(h), __ATOMIC_RELAXED);
}

void mlprof__update_flags(void)
{
    pthread_mutex_lock(&mlprof__g.reg_lock);
    refresh_locked();
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    int on = mlprof__g.state == MLPROF_STATE_RUN && !mlprof__g.paused;
    int mem = on && (mlprof__g.cfg.profile_all || mlprof__g.cfg.profile_memory);
    __atomic_store_n(&mlprof__mem_on, mem, __ATOMIC_RELAXED);
    __atomic_store_n(&mlprof_active_flag, (on ? MLPROF__ACTIVE_RECORDING : 0) |
                                              (mlprof__trigger_on ? MLPROF__ACTIVE_TRIGGER : 0),
                     __ATOMIC_RELEASE);
}

static int fits_in_record(const void *p)
{
    return ((uintptr_t)p & ~(uintptr_t)MLPROF__PTR_MASK) == 0;
}

mlprof_domain *mlprof_domain_create(const char *name)
{
    mlprof__ensure_init();
    if (!name)
        name = "default";
    pthread_mutex_lock(&mlprof__g.reg_lock);
    mlprof_domain *d = *index_bucket(&g_domain_index, hash_key(0, name));
    while (d && strcmp(d->name, name) != 0)
        d = d->bucket_next;
    if (!d) {
        d = mlprof__calloc(1, sizeof *d);
        if (d && (d->name = mlprof__strdup(name)) != NULL && fits_in_record(d)) {
            d->klass = MLPROF_CLASS_USER;
            d->level = 1;
            d->on = (uint8_t)domain_on(d);
            d->next = mlprof__g.domains;
            mlprof__g.domains = d;
            index_insert(&g_domain_index, d);
        } else {
            if (d)
                mlprof__free(d->name);
            mlprof__free(d);
            d = NULL;
            mlprof__fail(MLPROF_ENOMEM, "cannot create domain \"%s\": out of memory", name);
        }
    }
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return d;
}

int mlprof_domain_set_class(mlprof_domain *d, int klass)
{
    if (!d || klass < MLPROF_CLASS_USER || klass > MLPROF_CLASS_MEMORY)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_domain_set_class: bad domain or class %d", klass);
    pthread_mutex_lock(&mlprof__g.reg_lock);
    d->klass = klass;
    refresh_locked();
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return MLPROF_OK;
}

int mlprof_domain_set_level(mlprof_domain *d, int level)
{
    if (!d || level < 0 || level > 9)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_domain_set_level: bad domain or level %d (0..9)",
                            level);
    pthread_mutex_lock(&mlprof__g.reg_lock);
    d->level = level;
    refresh_locked();
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return MLPROF_OK;
}

const char *mlprof_domain_name(const mlprof_domain *d) { return d ? d->name : ""; }

/* Takes a destroyed handle of that name, type and kind out of the index to
 * revive it, or allocates one of `size` bytes. Caller holds reg_lock; domain
 * is not NULL. */
static mlprof__handle *handle_create_locked(size_t size, int type, int kind, mlprof_domain *domain,
                                            const char *name)
{
    if (!name)
        name = "";
    mlprof__handle *h = NULL;
    for (void **at = index_bucket(&g_free_index, handle_key(type, kind, domain, name)); *at;
         at = (void **)&((mlprof__handle *)*at)->bucket_next) {
        mlprof__handle *c = *at;
        if (c->type == type && c->kind == kind && c->domain == domain && strcmp(c->name, name) == 0) {
            index_unlink(&g_free_index, at);
            c->destroyed = 0;
            h = c;
            break;
        }
    }
    if (!h) {
        h = mlprof__calloc(1, size);
        if (h && (h->name = mlprof__strdup(name)) != NULL && fits_in_record(h)) {
            h->type = (uint8_t)type;
            h->kind = (uint8_t)kind;
            h->domain = domain;
            h->next = mlprof__g.handles;
            mlprof__g.handles = h;
        } else {
            if (h)
                mlprof__free(h->name);
            mlprof__free(h);
            h = NULL;
            mlprof__fail(MLPROF_ENOMEM, "cannot create \"%s\": out of memory", name);
        }
    }
    if (h)
        __atomic_store_n(&h->on, handle_flags(h), __ATOMIC_RELAXED);
    return h;
}

static mlprof__handle *handle_create(size_t size, int type, int kind, mlprof_domain *domain,
                                     const char *name)
{
    if (!domain)
        domain = mlprof_domain_create(NULL);
    if (!domain)
        return NULL;
    pthread_mutex_lock(&mlprof__g.reg_lock);
    mlprof__handle *h = handle_create_locked(size, type, kind, domain, name);
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return h;
}

static void handle_destroy(mlprof__handle *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&mlprof__g.reg_lock);
    if (!h->destroyed) { /* a second destroy must not index it twice */
        h->destroyed = 1;
        __atomic_store_n(&h->on, 0, __ATOMIC_RELAXED);
        index_insert(&g_free_index, h);
    }
    pthread_mutex_unlock(&mlprof__g.reg_lock);
}

mlprof_span *mlprof_task_create(mlprof_domain *domain, const char *name)
{
    return (mlprof_span *)handle_create(sizeof(mlprof_span), MLPROF__H_SPAN, MLPROF__SPAN_TASK,
                                        domain, name);
}

mlprof_span *mlprof_frame_create(mlprof_domain *domain, const char *name)
{
    return (mlprof_span *)handle_create(sizeof(mlprof_span), MLPROF__H_SPAN, MLPROF__SPAN_FRAME,
                                        domain, name);
}

mlprof_span *mlprof_event_create(const char *name)
{
    return (mlprof_span *)handle_create(sizeof(mlprof_span), MLPROF__H_SPAN, MLPROF__SPAN_EVENT,
                                        NULL, name);
}

void mlprof_span_destroy(mlprof_span *span) { handle_destroy(span ? &span->h : NULL); }

const char *mlprof_span_name(const mlprof_span *span) { return span ? span->h.name : ""; }

mlprof_span *mlprof_task_once(mlprof_span **slot, mlprof_domain *domain, const char *name)
{
    mlprof_span *span = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (span)
        return span;
    /* Racing threads get the same handle: creation returns the live handle of
     * that name only if destroyed, so the check and the creation are one
     * section under reg_lock. No lock of its own: one held across reg_lock
     * would be held forever in a child forked meanwhile (fork's prepare
     * handler takes reg_lock, not it). */
    if (!domain)
        domain = mlprof_domain_create(NULL);
    if (!domain)
        return NULL;
    pthread_mutex_lock(&mlprof__g.reg_lock);
    span = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!span) {
        span = (mlprof_span *)handle_create_locked(sizeof(mlprof_span), MLPROF__H_SPAN, MLPROF__SPAN_TASK,
                                                   domain, name);
        __atomic_store_n(slot, span, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mlprof__g.reg_lock);
    return span;
}

mlprof_counter *mlprof_counter_create(mlprof_domain *domain, const char *name)
{
    mlprof_counter *c = (mlprof_counter *)handle_create(sizeof(mlprof_counter), MLPROF__H_COUNTER,
                                                        0, domain, name);
    if (c)
        __atomic_store_n(&c->value, 0, __ATOMIC_RELAXED);
    return c;
}

void mlprof_counter_destroy(mlprof_counter *c) { handle_destroy(c ? &c->h : NULL); }

mlprof_marker *mlprof_marker_create(mlprof_domain *domain, const char *name)
{
    return (mlprof_marker *)handle_create(sizeof(mlprof_marker), MLPROF__H_MARKER, 0, domain, name);
}

void mlprof_marker_destroy(mlprof_marker *m) { handle_destroy(m ? &m->h : NULL); }

/* The default domain, created at the first call that needs it. */
static mlprof_domain *default_domain(void)
{
    static mlprof_domain *cached;
    mlprof_domain *d = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    if (!d) {
        d = mlprof_domain_create(NULL);
        __atomic_store_n(&cached, d, __ATOMIC_RELEASE);
    }
    return d;
}

/* MLPROF_WITH's begin (RAF's WITH_BASE_PROFILER): a span with a run-time
 * name and its two arguments. The domain's flag is read here, so that the
 * arguments never land on another span when the domain is filtered out. */
mlprof_domain *mlprof_begin_with(mlprof_domain *domain, const char *name, const char *category, const char *args)
{
    if (!(__atomic_load_n(&mlprof_active_flag, __ATOMIC_RELAXED) & MLPROF__ACTIVE_RECORDING))
        return NULL;
    if (!domain && !(domain = default_domain()))
        return NULL;
    if (!__atomic_load_n(&domain->on, __ATOMIC_RELAXED))
        return NULL;
    mlprof_begin_dynamic(domain, name);
    if (category)
        mlprof_arg_str("category", category);
    if (args)
        mlprof_arg_str("args", args);
    return domain;
}
