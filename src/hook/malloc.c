/*
 * malloc.c - malloc, calloc, realloc, free, posix_memalign, aligned_alloc,
 * memalign and valloc, recorded into the memory profiler (device cpu) when
 * the malloc hook is on and profile_memory records.
 *
 * The real functions come from dlsym(RTLD_NEXT), which may itself call
 * calloc before it knows where calloc is: those few early requests are
 * served from a static arena, whose blocks are never given back. A thread
 * inside a hook or inside mlprof (mlprof__busy) is not recorded, so the
 * recorder's own allocations cannot recurse. An allocation is recorded after
 * it is made and a free before it is done, so that an address reused by
 * another thread always comes after its free in the record.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "hook.h"

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static size_t (*real_usable_size)(void *);

/* ------------------------------------------------------- the arena */

#define ARENA_BYTES 65536
static _Alignas(64) unsigned char g_arena[ARENA_BYTES];
static size_t g_arena_used; /* atomic */

static void *arena_alloc(size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    size_t at = __atomic_fetch_add(&g_arena_used, need, __ATOMIC_RELAXED);
    if (at + need > ARENA_BYTES)
        return NULL;
    return g_arena + at; /* zeroed: static storage, never reused */
}

static int in_arena(const void *p)
{
    return (const unsigned char *)p >= g_arena && (const unsigned char *)p < g_arena + ARENA_BYTES;
}

/* ------------------------------------------------------- resolving */

static int g_resolving;

static void resolve(void)
{
    if (__atomic_load_n(&real_free, __ATOMIC_ACQUIRE))
        return;
    g_resolving = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    real_usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    __atomic_store_n(&real_free, (void (*)(void *))dlsym(RTLD_NEXT, "free"), __ATOMIC_RELEASE);
    g_resolving = 0;
}

/* mlprof's own allocations go straight to the real functions. */
static void *own_malloc(size_t n)
{
    resolve();
    return real_malloc(n);
}
static void *own_realloc(void *p, size_t n)
{
    resolve();
    return real_realloc(p, n);
}
static void own_free(void *p)
{
    resolve();
    real_free(p);
}

void mlprof__hook_malloc_init(void)
{
    resolve();
    mlprof_set_allocator(own_malloc, own_realloc, own_free);
    __atomic_store_n(&mlprof__malloc_interposed, 1, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------ recording */

static inline int recording(void)
{
    return mlprof__busy == 0 && __atomic_load_n(&mlprof__mem_on, __ATOMIC_RELAXED) &&
           mlprof__hook_on(MLPROF__HOOK_MALLOC);
}

static inline void *allocated(void *p, size_t n)
{
    if (p && recording()) {
        mlprof__busy++;
        mlprof__mem_alloc_lower(MLPROF_DEVICE_CPU, p, n);
        mlprof__busy--;
    }
    return p;
}

static inline void freeing(void *p)
{
    if (p && recording()) {
        mlprof__busy++;
        mlprof__mem_free_lower(MLPROF_DEVICE_CPU, p);
        mlprof__busy--;
    }
}

/* -------------------------------------------------- the interposers */

EXPORT void *malloc(size_t n)
{
    if (MLPROF_UNLIKELY(!real_free)) {
        if (g_resolving)
            return arena_alloc(n);
        resolve();
    }
    return allocated(real_malloc(n), n);
}

EXPORT void *calloc(size_t n, size_t size)
{
    if (MLPROF_UNLIKELY(!real_free)) {
        if (g_resolving)
            return n && size > SIZE_MAX / n ? NULL : arena_alloc(n * size);
        resolve();
    }
    return allocated(real_calloc(n, size), n * size);
}

EXPORT void free(void *p)
{
    if (!p || in_arena(p))
        return;
    if (MLPROF_UNLIKELY(!real_free))
        resolve();
    freeing(p);
    real_free(p);
}

EXPORT void *realloc(void *p, size_t n)
{
    if (MLPROF_UNLIKELY(!real_free))
        resolve();
    if (in_arena(p)) { /* an early block moves to the real heap */
        void *q = malloc(n);
        if (q)
            memcpy(q, p, (size_t)(g_arena + ARENA_BYTES - (unsigned char *)p) < n
                             ? (size_t)(g_arena + ARENA_BYTES - (unsigned char *)p) : n);
        return q;
    }
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    freeing(p);
    void *q = real_realloc(p, n);
    if (!q) { /* p is still there, as it was */
        allocated(p, real_usable_size ? real_usable_size(p) : n);
        return NULL;
    }
    return allocated(q, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (MLPROF_UNLIKELY(!real_free))
        resolve();
    int rc = real_posix_memalign(out, align, n);
    if (rc == 0)
        allocated(*out, n);
    return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (MLPROF_UNLIKELY(!real_free))
        resolve();
    return allocated(real_aligned_alloc(align, n), n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    if (MLPROF_UNLIKELY(!real_free))
        resolve();
    return allocated(real_memalign(align, n), n);
}

EXPORT void *valloc(size_t n)
{
    if (MLPROF_UNLIKELY(!real_free))
        resolve();
    return allocated(real_valloc(n), n);
}
