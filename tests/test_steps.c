/* test_steps.c - training steps and the schedule (src/record/steps.c): the
 * traces and callbacks of a schedule's cycles, steps without a schedule,
 * back-to-back cycles, a stop by the program ending the schedule, and bad
 * schedules. Each mode runs in a process of its own; check_trace.py's
 * area_steps reads the traces back with a JSON parser.
 *
 * usage: test_steps OUTDIR schedule|plain|back_to_back|stopped|bad|per_step */
#include <pthread.h>
#include <string.h>

#include "testutil.h"

static mlprof_span *g_work;
static int g_ready_calls;

/* The callback says what it got, for the checker. */
static void ready(const char *path, int cycle, void *user)
{
    CHECK(user == &g_ready_calls, "the callback gets its user pointer");
    g_ready_calls++;
    printf("ready cycle=%d path=%s state=%d\n", cycle, path, mlprof_get_state());
}

/* n steps, each one span "work" with its step number; what the state was
 * during each step goes to stdout as a string of 0 and 1. */
static void loop(int n)
{
    char states[256];
    for (int i = 0; i < n && i < 255; i++) {
        states[i] = (char)('0' + mlprof_get_state());
        mlprof_begin(g_work);
        mlprof_arg_int("step", i);
        mlprof_end(g_work);
        CHECK_OK(mlprof_step());
    }
    states[n < 255 ? n : 255] = '\0';
    printf("states=%s\n", states);
}

static void setup(const char *file, const char *schedule)
{
    g_work = mlprof_task_create(mlprof_domain_create("steps"), "work");
    CHECK_OK(mlprof_set_config("filename", tu_path(file)));
    CHECK_OK(mlprof_set_config("schedule", schedule));
    mlprof_on_trace_ready(ready, &g_ready_calls);
}

/* issue 21's figure: 20 steps, skip_first 2, wait 1, warmup 1, active 2,
 * repeat 3: three traces of two steps each, the callback called three times */
static void mode_schedule(void)
{
    setup("sched.json", "skip_first:2,wait:1,warmup:1,active:2,repeat:3");
    CHECK_OK(mlprof_set_config("stats_file", tu_path("sched_stats.txt")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "the first steps are skipped: stopped");
    loop(20);
    CHECK(g_ready_calls == 3, "the callback called once a cycle: %d", g_ready_calls);
    CHECK(mlprof_step_number() == 20, "20 steps counted: %llu", (unsigned long long)mlprof_step_number());
}

/* no schedule: every step recorded while running is a ProfilerStep#N span */
static void mode_plain(void)
{
    setup("plain.json", "");
    CHECK_OK(mlprof_set_config("stats_file", tu_path("plain_stats.txt")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    loop(5);
    CHECK_OK(mlprof_dump(1));
    CHECK(g_ready_calls == 0, "no callback without a schedule");
}

/* step i's work: i + 1 spans "work" */
static void *step_work(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (int j = 0; j <= i; j++) {
        mlprof_begin(g_work);
        mlprof_arg_int("step", i);
        mlprof_end(g_work);
    }
    return NULL;
}

/* per-step rows: 5 steps, step i with i + 1 spans on the main thread and
 * as many on a thread of its own; stats_steps 3 keeps the last three steps'
 * rows and folds the first two into the totals */
static void mode_per_step(void)
{
    setup("per_step.json", "");
    CHECK_OK(mlprof_set_config("stats_file", tu_path("per_step_stats.json")));
    CHECK_OK(mlprof_set_config("stats_steps", "3"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 0; i < 5; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, step_work, (void *)(intptr_t)i) == 0, "thread");
        step_work((void *)(intptr_t)i);
        pthread_join(t, NULL);
        CHECK_OK(mlprof_step());
    }
    CHECK_OK(mlprof_dump(1));
    CHECK(mlprof_set_config("stats_steps", "-1") == MLPROF_EVALUE && strstr(mlprof_last_error(), "stats_steps"),
          "a bad stats_steps is refused, naming the key: %s", mlprof_last_error());
}

/* no wait, no warmup, two cycles back to back, %c in the name */
static void mode_back_to_back(void)
{
    setup("b2b_%c.json", "active:2,repeat:2");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_get_state() == MLPROF_STATE_RUN, "step 0 is active: running");
    loop(6);
    CHECK(g_ready_calls == 2, "two cycles: %d", g_ready_calls);
}

/* the program stops during the schedule: the schedule ends, its steps are
 * plain steps after that, and a new start arms it again from step 0 */
static void mode_stopped(void)
{
    setup("stopped.json", "wait:1,active:1");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    loop(2); /* wait, active: cycle 0 written */
    CHECK(g_ready_calls == 1, "cycle 0 written: %d", g_ready_calls);
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "wait step of cycle 1: stopped");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN)); /* armed again: step 0 is a wait step */
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "armed again: its first step waits");
    loop(1);
    CHECK(mlprof_get_state() == MLPROF_STATE_RUN, "then records");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP)); /* the program's own stop */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "a start arms it again");
    CHECK_OK(mlprof_set_config("schedule", ""));
}

static void mode_bad(void)
{
    static const char *const bad[][2] = {
        {"wait:1", "active must be at least 1"},
        {"active:0", "active must be at least 1"},
        {"active:2,pause:1", "unknown item \"pause\""},
        {"active:x", "active: \"x\" is not a count"},
        {"active:-1", "active: \"-1\" is not a count"},
        {"active:1,active:2", "active given twice"},
        {"active:1,", "a comma ends it"},
        {"active", "\"active\" is not name:count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = mlprof_set_config("schedule", bad[i][0]);
        CHECK(rc == MLPROF_EVALUE && strstr(mlprof_last_error(), bad[i][1]) &&
                  strstr(mlprof_last_error(), "\"schedule\""),
              "%s: %s: %s", bad[i][0], mlprof_err_name(rc), mlprof_last_error());
    }
    char value[128];
    CHECK_OK(mlprof_get_config("schedule", value, sizeof value));
    CHECK(value[0] == '\0', "a bad value changes nothing: \"%s\"", value);
    CHECK_OK(mlprof_set_config("schedule", "skip_first:1,wait:0,warmup:0,active:1,repeat:0"));
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 2 ? argv[2] : "";
    static const struct {
        const char *name;
        void (*fn)(void);
    } modes[] = {{"schedule", mode_schedule}, {"plain", mode_plain}, {"back_to_back", mode_back_to_back},
                 {"stopped", mode_stopped},   {"bad", mode_bad},     {"per_step", mode_per_step}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(mode, modes[i].name) == 0) {
            modes[i].fn();
            char label[64];
            snprintf(label, sizeof label, "test_steps %s", mode);
            return tu_finish(label);
        }
    }
    fprintf(stderr, "usage: test_steps OUTDIR schedule|plain|back_to_back|stopped|bad|per_step\n");
    return 2;
}
