/* test_counters_markers.c - counter series (set, add, subtract, doubles) and
 * markers of every scope, with arguments. */
#include "testutil.h"

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("counters.json")));
    mlprof_domain *d = mlprof_domain_create("cm");
    mlprof_counter *c = mlprof_counter_create(d, "images");
    mlprof_counter *p = mlprof_counter_create(d, "power_w");
    mlprof_marker *g = mlprof_marker_create(d, "global_mark");
    mlprof_marker *pr = mlprof_marker_create(d, "process_mark");
    mlprof_marker *t = mlprof_marker_create(d, "thread_mark");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 1; i <= 5; i++)
        mlprof_counter_add(c, 8);      /* 8 16 24 32 40 */
    mlprof_counter_add(c, -50);        /* -10 */
    mlprof_counter_set(c, 7);          /* 7 */
    MLPROF_COUNTER_ADD(c, 1);          /* 8 */
    MLPROF_COUNTER_SET(c, 100);        /* 100 */
    mlprof_counter_set_double(p, 0.5);
    mlprof_counter_set_double(p, 1e-7);
    mlprof_counter_set_double(p, 250.125);
    CHECK(mlprof_counter_value(c) == 100, "value");
    mlprof_mark(g, MLPROF_SCOPE_GLOBAL);
    mlprof_arg_str("why", "checkpoint");
    mlprof_mark(pr, MLPROF_SCOPE_PROCESS);
    MLPROF_MARK(t, MLPROF_SCOPE_THREAD);
    mlprof_arg_int("step", 3);
    mlprof_mark(t, 99); /* an unknown scope is a process marker */
    mlprof_mark_dynamic(d, "dynamic mark", MLPROF_SCOPE_GLOBAL);
    mlprof_counter_destroy(c);
    mlprof_counter_add(c, 1); /* destroyed: the value moves, nothing is recorded */
    CHECK_OK(mlprof_dump(1));
    return tu_finish("test_counters_markers");
}
