/*
 * test_own_threads.c - mlprof's own threads (the continuous dump, the
 * sampler, the call-stack reader) stay out of the program's way:
 *  - they block every signal, so that a process-directed signal (^C from a
 *    terminal, SIGTERM from a launcher) reaches a thread of the program: a
 *    main thread waiting in pause() for its handler is woken, and a handler
 *    that writes the trace never runs on a thread holding mlprof's lock;
 *  - a fork while they work finds them between two rounds: children forked
 *    one after another all record and exit (a child stuck on a lock that a
 *    parent thread held at the fork is killed after a generous wait and
 *    counted). Not under TSan, which refuses the threads that a forked
 *    child of a threaded parent starts.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif
#ifndef TU_TSAN
#define TU_TSAN 0
#endif

#define CHILDREN 60

static volatile sig_atomic_t g_handled_tid;

static void on_usr1(int sig)
{
    (void)sig;
    g_handled_tid = (sig_atomic_t)syscall(SYS_gettid);
}

/* Reads the thread's name and blocked-signal mask; 0 when both were read. */
static int thread_info(const char *tid, char *name, size_t len, unsigned long long *blocked)
{
    char path[128], buf[4096];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(name, (int)len, f))
        name[0] = '\0';
    fclose(f);
    name[strcspn(name, "\n")] = '\0';
    snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    int found = 0;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "SigBlk: %llx", blocked) == 1)
            found = 1;
    fclose(f);
    return found ? 0 : -1;
}

static int has(unsigned long long mask, int sig) { return (int)((mask >> (sig - 1)) & 1); }

/* Every thread of mlprof's blocks the program's signals; returns which of
 * the expected ones were seen (bit 0 the dump thread, bit 1 the sampler). */
static unsigned check_masks(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGPIPE};
    unsigned seen = 0;
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL, "opendir /proc/self/task");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char name[64];
        unsigned long long blocked = 0;
        if (e->d_name[0] == '.' || thread_info(e->d_name, name, sizeof name, &blocked) != 0)
            continue;
        if (strncmp(name, "mlprof", 6) != 0)
            continue;
        seen |= strcmp(name, "mlprof dump") == 0 ? 1u : strcmp(name, "mlprof sampler") == 0 ? 2u : 0u;
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            CHECK(has(blocked, sigs[i]), "thread %s (\"%s\") does not block signal %d (SigBlk %llx)", e->d_name,
                  name, sigs[i], blocked);
        printf("thread %s \"%s\": SigBlk %llx\n", e->d_name, name, blocked);
    }
    closedir(d);
    return seen;
}

/* A process-directed signal that the main thread blocks waits for it: no
 * thread of mlprof's takes it meanwhile. */
static void check_delivery(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    g_handled_tid = 0;
    kill(getpid(), SIGUSR1);
    struct timespec ts = {0, 50000000}; /* for another thread to take it, if one could */
    nanosleep(&ts, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* still pending: handled here, now */
    long self = syscall(SYS_gettid);
    CHECK(g_handled_tid == (sig_atomic_t)self, "SIGUSR1 sent to the process was handled on thread %d, not on the "
                                               "main thread %ld (the only one of the program)",
          (int)g_handled_tid, self);
}

static void spin_ms(long ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("own_threads.json")));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    CHECK_OK(mlprof_set_config("dump_period", "3600"));
    CHECK_OK(mlprof_set_config("sampler", "cpu,rss"));
    CHECK_OK(mlprof_set_config("sampler_period", "0.005"));
    CHECK_OK(mlprof_set_config("sampling", "997"));
    CHECK_OK(mlprof_set_config("sampling_source", "signal"));
    mlprof_domain *d = mlprof_domain_create("own");
    mlprof_span *s = mlprof_task_create(d, "work");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(s);
    spin_ms(30);
    mlprof_end(s);
    unsigned seen = check_masks();
    CHECK((seen & 3u) == 3u, "the threads \"mlprof dump\" and \"mlprof sampler\" were not both found (%u)", seen);
    check_delivery();

    int hung = 0, forks = 0;
    if (TU_TSAN) {
        printf("forks: not checked: TSan refuses the threads a forked child of a threaded parent starts\n");
    } else {
        for (; forks < CHILDREN && !hung; forks++) {
            spin_ms(2); /* the sampler and the reader are at work (the signal sampler samples this thread) */
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                mlprof_begin(s);
                spin_ms(2);
                mlprof_end(s);
                /* stopped (its threads joined) and cleared: no trace, 60 of them would only cost time */
                _exit(mlprof_set_state(MLPROF_STATE_STOP) == MLPROF_OK && mlprof_clear() == MLPROF_OK ? 0 : 1);
            }
            CHECK(pid > 0, "fork");
            if (pid > 0 && tu_wait_child(pid, 60) != 0)
                hung++;
        }
        CHECK(hung == 0, "a child hung or failed (after %d forks)", forks);
    }
    CHECK_OK(mlprof_dump(1));
    printf("forks=%d hung=%d\n", forks, hung);
    return tu_finish("test_own_threads");
}
