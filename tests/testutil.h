/*
 * testutil.h - the few helpers every C test of mlprof uses: checks that count
 * and report failures with their line, an injectable clock, temporary paths,
 * and a summary line ("N passed, M failed") that ctest's log shows.
 */
#ifndef MLPROF_TESTUTIL_H
#define MLPROF_TESTUTIL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "mlprof/mlprof.h"

/* 1 in a build under ASan or TSan, whose runtimes make some work slow (thread
 * starts, large blocks), keep a thread of their own and refuse threads in a
 * forked child of a threaded parent: the tests that meet this say so. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

static int tu_passed, tu_failed;

#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (cond) {                                                      \
            tu_passed++;                                                 \
        } else {                                                         \
            tu_failed++;                                                 \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                \
            fputc('\n', stderr);                                         \
        }                                                                \
    } while (0)

#define CHECK_OK(expr)                                                              \
    do {                                                                            \
        int tu_rc_ = (expr);                                                        \
        CHECK(tu_rc_ == MLPROF_OK, "%s -> %s: %s", #expr, mlprof_err_name(tu_rc_), \
              mlprof_last_error());                                                 \
    } while (0)

static inline int tu_finish(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, tu_passed, tu_failed);
    return tu_failed ? 1 : 0;
}

/* A clock the test moves by hand: mlprof_set_clock(tu_clock, NULL). */
static uint64_t tu_now;
static inline uint64_t tu_clock(void *user)
{
    (void)user;
    return __atomic_load_n(&tu_now, __ATOMIC_RELAXED);
}
static inline void tu_set_now(uint64_t ns) { __atomic_store_n(&tu_now, ns, __ATOMIC_RELAXED); }

/* Path of a file in the test's output folder (argv[1], or "."). */
static const char *tu_dir = ".";
static inline const char *tu_path(const char *name)
{
    static char buf[8][1024];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 1024, "%s/%s", tu_dir, name);
    return p;
}

static inline void tu_init(int argc, char **argv)
{
    if (argc > 1)
        tu_dir = argv[1];
}

/* Reads a whole file (caller frees); NULL if it cannot. */
static inline char *tu_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p)
        p[n] = '\0';
    fclose(f);
    return p;
}

#if defined(_GNU_SOURCE) || (defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 199309L)
/* Waits for a forked child: 0 once it exited with status 0; -1 if it failed,
 * or had not exited after seconds (a hang, not a slow machine: killed). */
static inline int tu_wait_child(pid_t pid, int seconds)
{
    int status = 0;
    struct timespec ms = {0, 1000000};
    for (int waited = 0; waited < seconds * 1000; waited++) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
        nanosleep(&ms, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}
#endif

/* Occurrences of needle in hay. */
static inline int tu_count(const char *hay, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = hay; p && (p = strstr(p, needle)) != NULL; p += len)
        n++;
    return n;
}

#endif
