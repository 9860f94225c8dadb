/*
 * real.c - finding the function an interposer stands in front of. The next
 * definition after the preload library is what dlsym(RTLD_NEXT) gives, but
 * only among the objects of the global scope: a library that Python (or any
 * program) opened with RTLD_LOCAL, and what it loaded with it, is not there,
 * although its calls still come to us, since the global scope is searched
 * first. Then every loaded object is asked in turn, leaving out this one.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"

#define MAX_OBJECTS 1024
#define NAMES_BYTES 131072

/* The loaded objects' paths, gathered while the loader's list is held and
 * opened after it is let go (dlopen inside dl_iterate_phdr could deadlock). */
static struct {
    pthread_mutex_t lock;
    size_t n, used;
    const char *name[MAX_OBJECTS];
    char bytes[NAMES_BYTES];
} L = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int gather(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    size_t len = info->dlpi_name ? strlen(info->dlpi_name) : 0;
    if (!len || L.n == MAX_OBJECTS || L.used + len + 1 > NAMES_BYTES)
        return 0;
    memcpy(L.bytes + L.used, info->dlpi_name, len + 1);
    L.name[L.n++] = L.bytes + L.used;
    L.used += len + 1;
    return 0;
}

/* A thread of the parent's may have held L.lock at a fork (taken only around
 * the loader's walk): the child's is free. */
static void names_after_fork(void) { pthread_mutex_init(&L.lock, NULL); }
static void watch_forks(void) { pthread_atfork(NULL, NULL, names_after_fork); }

void *mlprof__hook_real(const char *name)
{
    mlprof__busy++; /* dlopen and dlsym may allocate */
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        Dl_info self;
        const void *base = dladdr((void *)mlprof__hook_real, &self) ? self.dli_fbase : NULL;
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, watch_forks);
        pthread_mutex_lock(&L.lock);
        L.n = L.used = 0;
        dl_iterate_phdr(gather, NULL);
        for (size_t i = 0; i < L.n && !f; i++) {
            void *h = dlopen(L.name[i], RTLD_LAZY | RTLD_NOLOAD);
            if (!h)
                continue;
            void *g = dlsym(h, name);
            Dl_info where;
            if (g && dladdr(g, &where) && where.dli_fbase != base)
                f = g;
            dlclose(h);
        }
        pthread_mutex_unlock(&L.lock);
    }
    mlprof__busy--;
    return f;
}

void *mlprof__hook_real_cached(void **slot, const char *name, int required)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (p)
        return p;
    p = mlprof__hook_real(name);
    if (!p && required) {
        mlprof__log(MLPROF_LOG_ERROR, "%s was called, but no library defines it", name);
        abort();
    }
    __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}
