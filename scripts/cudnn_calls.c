/*
 * scripts/cudnn_calls.c - a diagnostic preload for a GPU machine: prints
 * cuDNN's graph-API calls (descriptors made, attributes set and read,
 * finalized, destroyed, executed) one line each on stderr, so that what a
 * framework does can be compared with what src/hook/cudnn_graph.c expects.
 * Not part of mlprof: built and used by hand,
 *   cc -O1 -shared -fPIC -o /tmp/cudnn_calls.so scripts/cudnn_calls.c -ldl
 *   LD_PRELOAD=/tmp/cudnn_calls.so python3 model.py 2>calls.txt
 * CUDNN_CALLS_MAX (default 3000) bounds the lines.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long lines = -1, max_lines;

static int say(void)
{
    if (lines < 0) {
        const char *m = getenv("CUDNN_CALLS_MAX");
        max_lines = m ? atol(m) : 3000;
        lines = 0;
    }
    return lines++ < max_lines;
}

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) { /* loaded by a library that was itself dlopen'ed: not in the global scope */
        void *h = dlopen("libcudnn.so.9", RTLD_LAZY | RTLD_NOLOAD);
        f = h ? dlsym(h, name) : NULL;
    }
    if (!f) {
        fprintf(stderr, "cudnn_calls: no %s\n", name);
        abort();
    }
    return f;
}

/* the elements: descriptors (type 15) as pointers, int64 (3) as numbers, else the first 4 bytes */
static void elems(int type, int64_t n, const void *e)
{
    for (int64_t i = 0; e && i < n && i < 6; i++) {
        if (type == 15)
            fprintf(stderr, " %p", ((void *const *)e)[i]);
        else if (type == 3)
            fprintf(stderr, " %lld", (long long)((const int64_t *)e)[i]);
        else if (i == 0)
            fprintf(stderr, " 0x%x", *(const unsigned *)e);
    }
}

int cudnnBackendCreateDescriptor(int type, void **d)
{
    static int (*f)(int, void **);
    if (!f)
        f = (int (*)(int, void **))next("cudnnBackendCreateDescriptor");
    int rc = f(type, d);
    pthread_mutex_lock(&lock);
    if (say())
        fprintf(stderr, "create type %d -> %p rc %d\n", type, d ? *d : NULL, rc);
    pthread_mutex_unlock(&lock);
    return rc;
}

int cudnnBackendSetAttribute(void *d, int name, int type, int64_t n, const void *e)
{
    static int (*f)(void *, int, int, int64_t, const void *);
    if (!f)
        f = (int (*)(void *, int, int, int64_t, const void *))next("cudnnBackendSetAttribute");
    int rc = f(d, name, type, n, e);
    pthread_mutex_lock(&lock);
    if (say()) {
        fprintf(stderr, "set %p attr %d type %d n %lld rc %d:", d, name, type, (long long)n, rc);
        elems(type, n, e);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int cudnnBackendGetAttribute(void *d, int name, int type, int64_t req, int64_t *n, void *e)
{
    static int (*f)(void *, int, int, int64_t, int64_t *, void *);
    if (!f)
        f = (int (*)(void *, int, int, int64_t, int64_t *, void *))next("cudnnBackendGetAttribute");
    int rc = f(d, name, type, req, n, e);
    pthread_mutex_lock(&lock);
    if (say()) {
        fprintf(stderr, "get %p attr %d type %d req %lld got %lld rc %d:", d, name, type, (long long)req,
                n ? (long long)*n : -1LL, rc);
        elems(type, n && *n < req ? *n : req, e);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

#define ONE(fn, verb)                                                                                             \
    int fn(void *d)                                                                                               \
    {                                                                                                             \
        static int (*f)(void *);                                                                                  \
        if (!f)                                                                                                   \
            f = (int (*)(void *))next(#fn);                                                                       \
        int rc = f(d);                                                                                            \
        pthread_mutex_lock(&lock);                                                                                \
        if (say())                                                                                                \
            fprintf(stderr, verb " %p rc %d\n", d, rc);                                                           \
        pthread_mutex_unlock(&lock);                                                                              \
        return rc;                                                                                                \
    }
ONE(cudnnBackendFinalize, "finalize")
ONE(cudnnBackendDestroyDescriptor, "destroy")

int cudnnBackendExecute(void *h, void *plan, void *pack)
{
    static int (*f)(void *, void *, void *);
    if (!f)
        f = (int (*)(void *, void *, void *))next("cudnnBackendExecute");
    int rc = f(h, plan, pack);
    pthread_mutex_lock(&lock);
    if (say())
        fprintf(stderr, "execute %p rc %d\n", plan, rc);
    pthread_mutex_unlock(&lock);
    return rc;
}
