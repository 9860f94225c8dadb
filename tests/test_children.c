/*
 * test_children.c - the processes a recording program starts keep their
 * traces, or their loss is said (src/record/children.c). The parent records
 * and starts, one after another:
 *   a: forked, records, calls mlprof_exit_dump() and leaves by _exit: its
 *      trace is written (children.A.json);
 *   b: forked, records and leaves by _exit: no trace, and the parent says
 *      that b recorded and wrote none;
 *   c: forked, records, waits, and is stopped by SIGTERM: its trace is
 *      written by the handler and it still dies of SIGTERM;
 *   d: forked, records nothing and leaves by _exit: nothing to say;
 *   s: forked and exec'd (this program again, "spawned"), with the parent's
 *      environment and MLPROF_FILENAME naming the parent's trace: it writes
 *      children.S.json, says so once, and the parent's children.json stays
 *      the parent's;
 *   t: exec'd the same way ("term_in_dump"), stopped by SIGTERM while it is
 *      inside a dump of its own (holding mlprof's lock: its log handler,
 *      called under it, waits for the signal): the trace is written once the
 *      dump lets the lock go, and t dies of SIGTERM, without an error.
 * check_trace.py (area_children) reads the files and the messages.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static mlprof_domain *g_d;

static void work(const char *name, int n)
{
    mlprof_span *s = mlprof_task_create(g_d, name);
    for (int i = 0; i < n; i++) {
        mlprof_begin(s);
        mlprof_end(s);
    }
}

static int exited_with(pid_t pid, int code)
{
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

static int g_ready = -1;

/* t's log handler, called under mlprof's lock: says so, then waits for the
 * SIGTERM (whose handler returns at once: the dump waits for the lock) */
static void wait_for_term(int level, const char *message, void *user)
{
    (void)user;
    fprintf(stderr, "mlprof: %s\n", message); /* as without a handler: check_trace.py reads them */
    if (level != MLPROF_LOG_WARN || !strstr(message, "dropped") || g_ready < 0)
        return;
    /* SIGTERM is held until the wait begins: one that came before it would
     * leave the wait waiting */
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &old);
    if (write(g_ready, "x", 1) != 1)
        _exit(1);
    close(g_ready);
    g_ready = -1;
    sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* t: records more than its 64 KiB buffer holds, so that its dump warns */
static int term_in_dump(const char *fd)
{
    g_ready = atoi(fd);
    g_d = mlprof_domain_create("children");
    mlprof_set_log_handler(wait_for_term, NULL);
    work("t_work", 20000);
    mlprof_dump(0);
    return 3; /* the SIGTERM ends it first */
}

/* the exec'd child: configured by the environment alone */
static int spawned(void)
{
    g_d = mlprof_domain_create("children");
    CHECK(mlprof_get_state() == MLPROF_STATE_RUN, "MLPROF_AUTOSTART started it");
    work("spawned_work", 4);
    return tu_finish("test_children spawned");
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (argc > 2 && strcmp(argv[2], "spawned") == 0)
        return spawned();
    if (argc > 3 && strcmp(argv[2], "term_in_dump") == 0)
        return term_in_dump(argv[3]);
    CHECK_OK(mlprof_set_config("filename", tu_path("children.json")));
    g_d = mlprof_domain_create("children");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    work("parent_work", 2);

    fflush(stdout);
    pid_t a = fork();
    if (a == 0) {
        work("a_work", 3);
        _exit(mlprof_exit_dump() == MLPROF_OK ? 0 : 1);
    }
    CHECK(a > 0 && exited_with(a, 0), "child a");

    pid_t b = fork();
    if (b == 0) {
        work("b_work", 3);
        _exit(0);
    }
    CHECK(b > 0 && exited_with(b, 0), "child b");

    int ready[2];
    CHECK(pipe(ready) == 0, "pipe");
    pid_t c = fork();
    if (c == 0) {
        work("c_work", 5);
        close(ready[0]);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    char x;
    CHECK(read(ready[0], &x, 1) == 1, "child c recorded");
    close(ready[0]);
    kill(c, SIGTERM);
    int status = 0;
    CHECK(waitpid(c, &status, 0) == c && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
          "child c still dies of SIGTERM (status %d)", status);

    pid_t d = fork();
    if (d == 0)
        _exit(0);
    CHECK(d > 0 && exited_with(d, 0), "child d");

    /* i: stopped by SIGTERM the instant it is forked, before it ran a line:
     * the signal waits for the child's fork handler, and its trace is
     * written by the handler it installs */
    fflush(stdout);
    pid_t i = fork();
    if (i == 0) {
        work("i_work", 1);
        for (;;)
            pause();
    }
    kill(i, SIGTERM);
    status = 0;
    CHECK(waitpid(i, &status, 0) == i && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
          "child i dies of SIGTERM (status %d)", status);

    pid_t s = fork();
    if (s == 0) {
        /* a script's child started anew: the run's configuration in the environment */
        setenv("MLPROF_FILENAME", tu_path("children.json"), 1);
        setenv("MLPROF_AUTOSTART", "1", 1);
        execl("/proc/self/exe", argv[0], tu_dir, "spawned", (char *)NULL);
        _exit(127);
    }
    CHECK(s > 0 && exited_with(s, 0), "child s");

    CHECK(pipe(ready) == 0, "pipe");
    pid_t t = fork();
    if (t == 0) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", ready[1]);
        close(ready[0]);
        setenv("MLPROF_FILENAME", tu_path("children.json"), 1);
        setenv("MLPROF_AUTOSTART", "1", 1);
        setenv("MLPROF_BUFFER_SIZE", "65536", 1);
        execl("/proc/self/exe", argv[0], tu_dir, "term_in_dump", fd, (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    CHECK(read(ready[0], &x, 1) == 1, "child t is inside its dump");
    close(ready[0]);
    kill(t, SIGTERM);
    CHECK(waitpid(t, &status, 0) == t && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
          "child t dies of SIGTERM (status %d)", status);

    work("parent_work", 1);
    CHECK_OK(mlprof_dump(1));
    printf("a=%d b=%d c=%d d=%d s=%d t=%d i=%d parent=%d\n", (int)a, (int)b, (int)c, (int)d, (int)s, (int)t, (int)i,
           (int)getpid());
    return tu_finish("test_children");
}
