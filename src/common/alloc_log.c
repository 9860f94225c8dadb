/*
 * alloc_log.c - the library's allocator hook, its log handler and the
 * per-thread last-error message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

static void *(*g_malloc)(size_t) = malloc;
static void *(*g_realloc)(void *, size_t) = realloc;
static void (*g_free)(void *) = free;

static void (*g_log_fn)(int, const char *, void *);
static void *g_log_user;

/* Global-dynamic TLS: this buffer is not on the hot path, and keeping it out
 * of the static TLS block leaves room for the one initial-exec variable. */
static __thread char t_error[1024];
__thread int mlprof__busy;
int mlprof__crashing;

int mlprof__lock_for_dump(pthread_mutex_t *m, int *gave_up)
{
    if (!__atomic_load_n(&mlprof__crashing, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(m);
        /* a test goes on after a crash's dump: the next one waits again */
        __atomic_store_n(gave_up, 0, __ATOMIC_RELAXED);
        return 0;
    }
    if (__atomic_load_n(gave_up, __ATOMIC_RELAXED))
        return pthread_mutex_trylock(m) == 0 ? 0 : -1;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 1;
    if (pthread_mutex_timedlock(m, &deadline) == 0)
        return 0;
    __atomic_store_n(gave_up, 1, __ATOMIC_RELAXED);
    return -1;
}

int mlprof_set_allocator(void *(*malloc_fn)(size_t), void *(*realloc_fn)(void *, size_t),
                         void (*free_fn)(void *))
{
    if (!malloc_fn || !realloc_fn || !free_fn)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_set_allocator: all three functions are required");
    g_malloc = malloc_fn;
    g_realloc = realloc_fn;
    g_free = free_fn;
    return MLPROF_OK;
}

void *mlprof__malloc(size_t n) { return g_malloc(n ? n : 1); }
void *mlprof__realloc(void *p, size_t n) { return g_realloc(p, n ? n : 1); }
void mlprof__free(void *p)
{
    if (p)
        g_free(p);
}

void *mlprof__calloc(size_t n, size_t size)
{
    if (size && n > (size_t)-1 / size)
        return NULL;
    void *p = mlprof__malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

char *mlprof__strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = mlprof__malloc(len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *mlprof__strdup(const char *s) { return mlprof__strndup(s, (size_t)-1); }

void mlprof_set_log_handler(void (*fn)(int, const char *, void *), void *user)
{
    g_log_user = user;
    __atomic_store_n(&g_log_fn, fn, __ATOMIC_RELEASE);
}

void mlprof__log(int level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    void (*fn)(int, const char *, void *) = __atomic_load_n(&g_log_fn, __ATOMIC_ACQUIRE);
    if (fn) {
        fn(level, msg, g_log_user);
        return;
    }
    static const char *const names[] = {"error: ", "warning: ", ""};
    int saved = errno;
    fprintf(stderr, "mlprof: %s%s\n", names[level >= 0 && level <= 2 ? level : 2], msg);
    errno = saved;
}

/* Where to cut s so that it keeps at most n bytes and whole UTF-8 characters. */
static size_t utf8_cut(const char *s, size_t n)
{
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

int mlprof__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof t_error) { /* say that it was cut, and cut between characters */
        size_t keep = utf8_cut(t_error, sizeof t_error - 4);
        memcpy(t_error + keep, "...", 4);
    }
    return code;
}

static mlprof__quoted_text shorten(const char *s, const char *quote)
{
    mlprof__quoted_text q;
    if (!s) {
        snprintf(q.s, sizeof q.s, "(null)");
        return q;
    }
    size_t n = strlen(s);
    if (n <= MLPROF__QUOTED_WHOLE) {
        snprintf(q.s, sizeof q.s, "%s%s%s", quote, s, quote);
        return q;
    }
    /* its start and its end, where paths and lists differ most */
    size_t head = utf8_cut(s, MLPROF__QUOTED_HEAD);
    size_t tail = n - MLPROF__QUOTED_TAIL;
    while (tail < n && ((unsigned char)s[tail] & 0xc0) == 0x80)
        tail++;
    snprintf(q.s, sizeof q.s, "%s%.*s...%s%s (%zu bytes)", quote, (int)head, s, s + tail, quote, n);
    return q;
}

mlprof__quoted_text mlprof__quoted(const char *s) { return shorten(s, "\""); }
mlprof__quoted_text mlprof__shortened(const char *s) { return shorten(s, ""); }

void mlprof__clear_error(void) { t_error[0] = '\0'; }

const char *mlprof_last_error(void) { return t_error; }

const char *mlprof_strerror(int status)
{
    switch (status) {
#define MLPROF_I_ERRNO_MSG(name, code, msg) \
    case code:                              \
        return msg;
        MLPROF_ERRNO_MAP(MLPROF_I_ERRNO_MSG)
#undef MLPROF_I_ERRNO_MSG
    }
    return "unknown error";
}

const char *mlprof_err_name(int status)
{
    switch (status) {
#define MLPROF_I_ERRNO_NAME(name, code, msg) \
    case code:                               \
        return "MLPROF_" #name;
        MLPROF_ERRNO_MAP(MLPROF_I_ERRNO_NAME)
#undef MLPROF_I_ERRNO_NAME
    }
    return "MLPROF_UNKNOWN";
}

void mlprof_free(void *p) { mlprof__free(p); }

/* What a starting thread reads before it says it runs (on its creator's stack). */
typedef struct thread_boot {
    void *(*fn)(void *);
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t ran;
    int running;
} thread_boot;

static void *thread_boot_main(void *p)
{
    thread_boot *b = p;
    void *(*fn)(void *) = b->fn;
    void *arg = b->arg;
    pthread_mutex_lock(&b->lock);
    b->running = 1;
    pthread_cond_signal(&b->ran);
    pthread_mutex_unlock(&b->lock); /* b is gone from here on */
    return fn(arg);
}

int mlprof__thread_start(pthread_t *t, int detached, void *(*fn)(void *), void *arg)
{
    /* a fault of the thread's own is delivered to it (a blocked one would
     * end the process without the crash handler that writes the trace) */
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS}; /* abort() unblocks its own */
    sigset_t all;
    sigfillset(&all);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    /* the new thread's mask is set through its attributes: the creator's own
     * never changes (a thread of the program blocking everything for a
     * moment would look to the signal sampler's rescan as if it blocked the
     * timer signal, and go unsampled) */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (detached)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    thread_boot b = {fn, arg, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    int rc = pthread_attr_setsigmask_np(&attr, &all);
    if (rc == 0)
        rc = pthread_create(t, &attr, thread_boot_main, &b);
#else /* no such attribute: the creator's mask, for as long as the start takes */
    sigset_t old;
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, &attr, thread_boot_main, &b);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
#endif
    pthread_attr_destroy(&attr);
    /* returns once the thread runs its own code: a fork that comes next
     * does not find it inside the thread library's (or a sanitizer's) start,
     * holding locks that the child would wait for in vain */
    pthread_mutex_lock(&b.lock);
    while (rc == 0 && !b.running)
        pthread_cond_wait(&b.ran, &b.lock);
    pthread_mutex_unlock(&b.lock);
    pthread_cond_destroy(&b.ran);
    pthread_mutex_destroy(&b.lock);
    return rc;
}

int mlprof__fork_gate(pthread_mutex_t *work, const pthread_t *worker, const char *what)
{
    if (worker && pthread_equal(*worker, pthread_self()))
        return 0; /* the fork is the worker's own (a handler of its): it is between nothing */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    int rc;
    while ((rc = pthread_mutex_timedlock(work, &until)) == EINTR) {
    }
    if (rc == 0)
        return 1;
    mlprof__log(MLPROF_LOG_WARN, "fork: %s did not finish its round within 2 s: the process forks while it "
                                 "works (%s)", what, strerror(rc));
    return 0;
}

size_t mlprof__edits(const char *a, size_t la, const char *b, size_t lb, size_t cap)
{
    enum { MAXLEN = 64 };
    if (la > MAXLEN || lb > MAXLEN || (la > lb ? la - lb : lb - la) > cap)
        return cap + 1;
    size_t d[MAXLEN + 1][MAXLEN + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb] > cap ? cap + 1 : d[la][lb];
}

const char *mlprof__nearest(const char *typed, const char *const *names, size_t n)
{
    size_t lt = strlen(typed), cap = lt < 6 ? 1 : 2, best = cap + 1;
    const char *near = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t e = mlprof__edits(typed, lt, names[i], strlen(names[i]), cap);
        if (e < best && e > 0)
            best = e, near = names[i];
    }
    return near;
}

const char *mlprof__option_hint(const char *arg, void (*help)(FILE *), char *buf, size_t len)
{
    buf[0] = '\0';
    char *text = NULL;
    size_t size = 0;
    FILE *f = help ? open_memstream(&text, &size) : NULL;
    if (!f)
        return buf;
    help(f);
    fclose(f);
    /* the options the text names: --word, each once, ended in place */
    enum { MAX_OPTIONS = 128 };
    const char *names[MAX_OPTIONS] = {NULL};
    size_t n = 0;
    for (char *p = text; p && (p = strstr(p, "--")) && n < MAX_OPTIONS;) {
        char *q = p + 2;
        while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '-' || *q == '_')
            q++;
        char after = *q; /* not a '-': no option starts there */
        *q = '\0';
        int seen = q - p <= 2 || (p > text && p[-1] != ' ' && p[-1] != '\n' && p[-1] != '[' && p[-1] != '(');
        for (size_t i = 0; !seen && i < n; i++)
            seen = strcmp(names[i], p) == 0;
        if (!seen)
            names[n++] = p;
        p = after ? q + 1 : q;
    }
    size_t arg_len = strcspn(arg, "=");
    char typed[80];
    snprintf(typed, sizeof typed, "%.*s", (int)(arg_len < sizeof typed ? arg_len : sizeof typed - 1), arg);
    const char *near = mlprof__nearest(typed, names, n);
    if (near)
        snprintf(buf, len, " (did you mean %s?)", near);
    free(text);
    return buf;
}
