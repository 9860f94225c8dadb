/*
 * run_thread_exit.c - threads that free memory on their way out, for the
 * malloc hook of `mlprof run`. Each of THREADS threads, one after the other,
 * allocates and frees a block of 11111 bytes, then leaves two frees for after
 * mlprof's own thread-exit handler: a failed dlsym (glibc frees the thread's
 * dlerror buffer after every key destructor ran) and a key destructor of its
 * own, created after mlprof's. With a small buffer, a recorder that took such
 * a late free for a new thread and never freed that record lost a chunk each
 * time, and the last threads' blocks went missing; run_check.py counts them in
 * the memory CSV, the late frees with them. A leak keeps a chunk for good, so
 * the short pauses that let the collector run on a busy machine hide none.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 1500
#define SIZE 11111

static pthread_key_t g_key;
static int g_have_key;

static void free_late(void *p) { free(p); }

static void *worker(void *arg)
{
    (void)arg;
    char *b = malloc(SIZE);
    if (!b)
        return NULL;
    memset(b, 1, SIZE);
    free(b);
    /* the dlerror buffer, freed after the key destructors */
    if (dlsym(RTLD_DEFAULT, "mlprof_test_no_such_symbol") != NULL)
        return NULL;
    if (g_have_key)
        pthread_setspecific(g_key, malloc(777));
    return NULL;
}

int main(void)
{
    /* a first thread records, so that mlprof's exit key exists before ours
     * (destructors run in the order of the keys) */
    pthread_t th;
    if (pthread_create(&th, NULL, worker, NULL) != 0)
        return 1;
    pthread_join(th, NULL);
    if (pthread_key_create(&g_key, free_late) != 0)
        return 1;
    g_have_key = 1;
    for (int i = 1; i < THREADS; i++) {
        if (pthread_create(&th, NULL, worker, NULL) != 0)
            return 1;
        pthread_join(th, NULL);
        /* a pause now and then lets mlprof's collector take back the chunks
         * on a loaded machine, where it may wait for a CPU while this loop
         * runs: the test is of leaks, which no pause hides */
        if (i % 64 == 0)
            usleep(5000);
    }
    printf("%d threads\n", THREADS);
    return 0;
}
