/* test_fork.c - a forked child writes its own trace (name.PID.json), and the
 * parent's trace holds only the parent's events; the sampler thread, which
 * stays in the parent, is started again in the child. */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* The sanitizers' runtimes do not take a thread started in a forked child of
 * a threaded parent (TSan refuses; clang 14's ASan allocator can be left
 * locked by a parent thread): there the sampler stays off in this test. */

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("fork.json")));
    if (!TU_SANITIZED) {
        CHECK_OK(mlprof_set_config("sampler", "cpu"));
        CHECK_OK(mlprof_set_config("sampler_period", "0.005"));
    }
    mlprof_domain *d = mlprof_domain_create("fork");
    mlprof_span *ps = mlprof_task_create(d, "parent_work");
    mlprof_span *cs = mlprof_task_create(d, "child_work");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 0; i < 10; i++) {
        mlprof_begin(ps);
        mlprof_end(ps);
    }
    mlprof_begin(ps); /* open across the fork: the parent's, not the child's */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 7; i++) {
            mlprof_begin(cs);
            mlprof_end(cs);
        }
        struct timespec ts = {0, 60000000}; /* for the child's sampler */
        nanosleep(&ts, NULL);
        exit(0); /* the trace is written at exit */
    }
    CHECK(pid > 0, "fork");
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    mlprof_end(ps);
    CHECK_OK(mlprof_dump(1));
    printf("child=%d parent=%d sampler=%s\n", (int)pid, (int)getpid(), TU_SANITIZED ? "off" : "on");
    return tu_finish("test_fork");
}
