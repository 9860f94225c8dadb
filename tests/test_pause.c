/* test_pause.c - run, pause, resume and stop: only what happens while running
 * and not paused is recorded. */
#include "testutil.h"

static mlprof_span *s;

static void record(int n, int tag)
{
    for (int i = 0; i < n; i++) {
        mlprof_begin(s);
        mlprof_arg_int("phase", tag);
        mlprof_end(s);
    }
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("pause.json")));
    mlprof_domain *d = mlprof_domain_create("pause");
    s = mlprof_task_create(d, "op");
    mlprof_counter *c = mlprof_counter_create(d, "n");
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "starts stopped");
    record(5, 0); /* before run: nothing */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_get_state() == MLPROF_STATE_RUN, "running");
    record(10, 1);
    CHECK_OK(mlprof_pause());
    CHECK(mlprof_is_paused(), "paused");
    CHECK(!MLPROF_I_ACTIVE(), "macros see the pause");
    record(10, 2);
    mlprof_counter_set(c, 42); /* the value changes, no sample is recorded */
    CHECK(mlprof_counter_value(c) == 42, "value kept while paused");
    CHECK_OK(mlprof_resume());
    CHECK(!mlprof_is_paused(), "resumed");
    record(10, 3);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    record(10, 4);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record(10, 5);
    mlprof_counter_add(c, 1);
    CHECK(mlprof_set_state(7) == MLPROF_EINVAL, "bad state");
    CHECK_OK(mlprof_dump(1));
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "dump(1) stops");
    return tu_finish("test_pause");
}
