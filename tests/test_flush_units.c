/*
 * test_flush_units.c - flushes of the flight recorder (mode=ring) from inside
 * a process linked with libmlprof, so that they run under ASan and TSan too
 * (tests/flush_check.py drives a preloaded program end to end):
 * - a thread records spans all along while this one asks for flushes over
 *   the capture socket, as `mlprof capture PID --flush` does, and raises
 *   dump_signal=USR2: each answer names its file, each file is a whole trace
 *   in ring mode, and the spans of a file are newer than the file's before;
 * - a signal the program handles itself keeps its handler (and writes no
 *   trace); dump_signal refuses KILL, SEGV and a name that is no signal.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static int g_stop;
static long g_spans;

static void *writer(void *arg)
{
    mlprof_span *t = arg;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < 200; i++) {
            mlprof_begin(t);
            mlprof_arg_int("n", __atomic_load_n(&g_spans, __ATOMIC_RELAXED));
            mlprof_end(t);
            __atomic_add_fetch(&g_spans, 1, __ATOMIC_RELAXED);
        }
        struct timespec ts = {0, 100000}; /* leaves the collector time to evict (see test_ring.c) */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Sends a flush request to this process's socket; the answer's line in out. */
static int ask_flush(const char *sock, const char *output, char *out, size_t len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(sock) >= sizeof addr.sun_path) {
        snprintf(out, len, "the socket's path is too long");
        return -1;
    }
    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        snprintf(out, len, "connect %.200s: %s", sock, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[1200];
    /* no "hello 1": the protocol of clients older than it, whose first line is the answer */
    int n = snprintf(req, sizeof req, "mlprof-capture 1\nflush 1\n%s%s%s\n", output ? "output " : "",
                     output ? output : "", output ? "\n" : "");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t at = 0;
    ssize_t r;
    while (at < len - 1 && (r = read(fd, out + at, len - 1 - at)) > 0) {
        at += (size_t)r;
        if (memchr(out, '\n', at))
            break;
    }
    out[at] = '\0';
    out[strcspn(out, "\n")] = '\0';
    close(fd);
    return 0;
}

/* The values of argument n of the finished spans "w" in a trace: first and
 * last, and its overwritten_events; 0, or -2 when it is not a whole trace
 * in ring mode. */
static int span_range(const char *path, long *first, long *last, long *overwritten)
{
    char *s = tu_read_file(path);
    if (!s)
        return -1;
    *first = *last = -1;
    for (const char *p = strstr(s, "\"name\":\"w\""); p; p = strstr(p + 1, "\"name\":\"w\"")) {
        const char *a = strstr(p, "\"n\":");
        const char *end = strchr(p, '}');
        if (!a || !end || a > end)
            continue;
        const char *u = strstr(p, "\"unfinished\"");
        if (u && u < end)
            continue; /* open at that flush: in the next file, whole */
        long v = strtol(a + 4, NULL, 10);
        if (*first < 0)
            *first = v;
        *last = v;
    }
    const char *over = strstr(s, "\"overwritten_events\":");
    *overwritten = over ? strtol(over + 21, NULL, 10) : -1;
    int ok = strstr(s, "\"mode\":\"ring\"") && strstr(s, "\"ring_start_ns\"") && strstr(s, "traceEvents");
    free(s);
    return ok ? 0 : -2;
}

static volatile sig_atomic_t g_usr1;
static void on_usr1(int sig)
{
    (void)sig;
    g_usr1++;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    /* the socket's folder: this test's own, short (a socket's path is) */
    char rt[] = "/tmp/mlprof-flush-units-XXXXXX";
    if (!mkdtemp(rt)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("XDG_RUNTIME_DIR", rt, 1);

    /* a signal of the program's, installed before mlprof starts */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);

    CHECK(mlprof_set_config("dump_signal", "KILL") == MLPROF_EVALUE && strstr(mlprof_last_error(), "dump_signal"),
          "dump_signal=KILL: %s", mlprof_last_error());
    CHECK(mlprof_set_config("dump_signal", "SIGSEGV") == MLPROF_EVALUE, "dump_signal=SIGSEGV accepted");
    CHECK(mlprof_set_config("dump_signal", "NOPE") == MLPROF_EVALUE && strstr(mlprof_last_error(), "dump_signal"),
          "dump_signal=NOPE: %s", mlprof_last_error());
    /* an earlier run's files would be taken for this one's */
    const char *old[] = {"flush.json", "flush.flush1.json", "second.json", "flush.flush3.json", "flush.flush4.json"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        unlink(tu_path(old[i]));
    CHECK_OK(mlprof_set_config("filename", tu_path("flush.json")));
    CHECK_OK(mlprof_set_config("mode", "ring"));
    CHECK_OK(mlprof_set_config("ring_size", "256K"));
    CHECK_OK(mlprof_set_config("buffer_size", "16M"));
    CHECK_OK(mlprof_set_config("stats_file", ""));
    CHECK_OK(mlprof_set_config("dump_signal", "SIGUSR2"));
    mlprof_domain *d = mlprof_domain_create("flush");
    mlprof_span *w = mlprof_task_create(d, "w");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t th;
    pthread_create(&th, NULL, writer, w);

    char sock[200];
    snprintf(sock, sizeof sock, "%s/mlprof/%d.sock", rt, (int)getpid());
    long before = -1;
    for (int k = 1; k <= 3; k++) {
        long want = __atomic_load_n(&g_spans, __ATOMIC_RELAXED) + 20000;
        while (__atomic_load_n(&g_spans, __ATOMIC_RELAXED) < want) /* past the ring's size since the last */
            usleep(1000);
        char expect[1100], answer[1200] = "";
        if (k < 3) {
            const char *o = k == 2 ? tu_path("second.json") : NULL;
            snprintf(expect, sizeof expect, "%s", o ? o : tu_path("flush.flush1.json"));
            CHECK(ask_flush(sock, o, answer, sizeof answer) == 0, "flush %d: %s", k, answer);
            char ok[1200];
            snprintf(ok, sizeof ok, "ok %s", expect);
            CHECK(strcmp(answer, ok) == 0, "flush %d answered \"%s\", not \"%s\"", k, answer, ok);
        } else {
            /* dump_signal: the listener writes it, this thread goes on */
            snprintf(expect, sizeof expect, "%s", tu_path("flush.flush3.json")); /* N counts -o too */
            raise(SIGUSR2);
            for (int i = 0; i < 120000 && access(expect, F_OK) != 0; i++)
                usleep(1000);
        }
        long first, last, over;
        int rc = span_range(expect, &first, &last, &over);
        CHECK(rc == 0 && first >= 0, "%s: rc %d, spans %ld..%ld", expect, rc, first, last);
        CHECK(first > before, "%s: spans from %ld, the file before ended at %ld", expect, first, before);
        /* 20000 spans since the file before, far more than the ring holds */
        CHECK(over > 0, "%s: nothing overwritten: not a ring", expect);
        before = last;
    }

    /* the program's SIGUSR1 stays the program's */
    CHECK_OK(mlprof_set_config("dump_signal", "USR1"));
    struct sigaction cur;
    sigaction(SIGUSR1, NULL, &cur);
    CHECK(cur.sa_handler == on_usr1, "the program's SIGUSR1 handler was replaced");
    raise(SIGUSR1);
    CHECK(g_usr1 == 1, "the program's handler saw %d signals", (int)g_usr1);
    /* dump_signal off gives the default back where mlprof had it */
    CHECK_OK(mlprof_set_config("dump_signal", "off"));

    /* recording went on after the last flush: the exit trace has what came since */
    long more = __atomic_load_n(&g_spans, __ATOMIC_RELAXED) + 1000;
    while (__atomic_load_n(&g_spans, __ATOMIC_RELAXED) < more)
        usleep(1000);
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK_OK(mlprof_dump(1));
    long first, last, over;
    CHECK(span_range(tu_path("flush.json"), &first, &last, &over) == 0 && first > before,
          "the exit trace: spans from %ld, the last flush ended at %ld", first, before);
    CHECK(access(tu_path("flush.flush4.json"), F_OK) != 0, "a SIGUSR1 of the program's wrote a trace");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    unlink(sock);
    char dir[200];
    snprintf(dir, sizeof dir, "%s/mlprof", rt);
    rmdir(dir);
    rmdir(rt);
    return tu_finish("flush_units");
}
