/*
 * capture_target.c - a program for capture_check.py to capture while it runs.
 * Each iteration is a frame "step" holding a span named "iter N", and a
 * training step (mlprof_step after it); an
 * observer (called only for what is recorded) notes every N recorded, so the
 * program itself says which iterations its captures hold. At the end it
 * writes them, one a line, to SEEN.
 *
 * usage: capture_target SEEN STOPFILE [loop | tree | range]
 *   loop   iterate until STOPFILE exists (at most 10 minutes)
 *   tree   the same in a forked child too (its own socket: mlprof capture
 *          --tree), which writes SEEN.child
 *   range  40 iterations, with a span "window" around iterations 10-14 and
 *          25-29 (capture_range=span:window)
 */
#include <mlprof/mlprof.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long g_seen[1 << 20];
static size_t g_nseen;
static volatile double g_work;

static void on_begin(void *user, const mlprof_span_info *span, void *data)
{
    (void)user, (void)data;
    if (strncmp(span->name, "iter ", 5) == 0 && g_nseen < sizeof g_seen / sizeof g_seen[0])
        g_seen[g_nseen++] = atol(span->name + 5);
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void iteration(mlprof_span *step, mlprof_domain *d, long i)
{
    char name[32];
    snprintf(name, sizeof name, "iter %ld", i);
    MLPROF_BEGIN(step);
    if (MLPROF_I_ACTIVE())
        mlprof_begin_dynamic(d, name);
    for (int k = 0; k < 2000; k++)
        g_work += k * 0.5;
    if (MLPROF_I_ACTIVE())
        mlprof_end_dynamic(d);
    MLPROF_END(step);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: capture_target SEEN STOPFILE [loop|range|cuda]\n");
        return 2;
    }
    const char *mode = argc > 3 ? argv[3] : "loop";
    mlprof_observer o = {sizeof o, "seen", 0, NULL, on_begin, NULL, NULL};
    if (mlprof_observer_register(&o) < 0) {
        fprintf(stderr, "capture_target: %s\n", mlprof_last_error());
        return 1;
    }
    mlprof_domain *d = mlprof_domain_create("target");
    mlprof_span *step = mlprof_frame_create(d, "step");
    mlprof_span *window = mlprof_task_create(d, "window");
    pid_t child = 0;
    char seen_path[4200];
    snprintf(seen_path, sizeof seen_path, "%s", argv[1]);
    if (strcmp(mode, "tree") == 0) {
        fflush(stdout);
        child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0)
            snprintf(seen_path, sizeof seen_path, "%s.child", argv[1]);
    }
    if (child >= 0 && (child > 0 || strcmp(mode, "tree") != 0)) {
        printf("ready %d %d\n", (int)getpid(), (int)child);
        fflush(stdout);
    }
    if (strcmp(mode, "loop") == 0 || strcmp(mode, "tree") == 0) {
        for (long i = 0; i < 300000 && access(argv[2], F_OK) != 0; i++) {
            iteration(step, d, i);
            mlprof_step();
            pause_ms(2);
        }
    } else {
        for (long i = 0; i < 40; i++) {
            if (i == 10 || i == 25)
                MLPROF_BEGIN(window);
            iteration(step, d, i);
            if (i == 14 || i == 29)
                MLPROF_END(window);
        }
    }
    int status = 0;
    if (child > 0 && (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        fprintf(stderr, "capture_target: the child failed (status %d)\n", status);
        return 1;
    }
    FILE *f = fopen(seen_path, "w");
    if (!f) {
        perror(seen_path);
        return 1;
    }
    for (size_t k = 0; k < g_nseen; k++)
        fprintf(f, "%ld\n", g_seen[k]);
    fclose(f);
    return 0;
}
