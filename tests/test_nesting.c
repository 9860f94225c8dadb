/* test_nesting.c - durations nest on their thread: self time, dynamic names,
 * arguments on the right span, scopes, ends out of order and spans left open.
 * check_trace.py reads the trace back and checks it event by event. */
#include "testutil.h"

static void at(uint64_t ns) { tu_set_now(ns); }

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", tu_path("nesting.json")));
    mlprof_domain *d = mlprof_domain_create("nest");
    mlprof_span *A = mlprof_task_create(d, "A"), *B = mlprof_task_create(d, "B");
    mlprof_span *C = mlprof_task_create(d, "C"), *X = mlprof_task_create(d, "X");
    mlprof_span *Y = mlprof_task_create(d, "Y"), *Z = mlprof_task_create(d, "Z");
    mlprof_span *E = mlprof_event_create("E");
    CHECK(strcmp(mlprof_span_name(A), "A") == 0, "span name");
    CHECK(strcmp(mlprof_domain_name(d), "nest") == 0, "domain name");
    CHECK(mlprof_domain_create("nest") == d, "same domain for the same name");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    /* A{ B{ C } dyn{} } with arguments at each level */
    at(1000); mlprof_begin(A);
    mlprof_arg_str("input_shape", "[8,3,32,32]");
    at(1100); mlprof_begin(B);
    mlprof_arg_int("flops", 123456789012LL);
    at(1200); mlprof_begin(C);
    mlprof_arg_double("ratio", 0.25);
    at(1300); mlprof_end(C);
    mlprof_arg_int("after_c", 1); /* goes to B, the innermost open span */
    at(1400); mlprof_end(B);
    at(1500); mlprof_begin_dynamic(d, "dyn \"quoted\"\nname");
    at(1600); mlprof_end_dynamic(d);
    at(2000); mlprof_end(A);

    /* scopes: nested names carried by the spans begun inside */
    mlprof_scope_push("model");
    mlprof_scope_push("conv1:");
    CHECK(strcmp(mlprof_scope_current(), "model:conv1:") == 0, "scope %s", mlprof_scope_current());
    at(3000); mlprof_begin(E);
    at(3100); mlprof_end(E);
    mlprof_scope_pop();
    CHECK(strcmp(mlprof_scope_current(), "model:") == 0, "scope %s", mlprof_scope_current());
    mlprof_scope_pop();
    mlprof_scope_pop(); /* one pop too many: ignored */
    CHECK(strcmp(mlprof_scope_current(), "") == 0, "scope %s", mlprof_scope_current());
    {
        MLPROF_SCOPE("block");
        CHECK(strcmp(mlprof_scope_current(), "block:") == 0, "scope %s", mlprof_scope_current());
    }
    CHECK(strcmp(mlprof_scope_current(), "") == 0, "scope after block %s", mlprof_scope_current());

    /* ends out of order: X{ Y{ } } ended as X then Y */
    at(4000); mlprof_begin(X);
    at(4100); mlprof_begin(Y);
    at(4200); mlprof_end(X); /* Y lost its end: closed here, flagged unfinished */
    at(4300); mlprof_end(Y); /* nothing open: counted as unmatched */

    /* left open: closed at the last timestamp when the trace is finished */
    at(5000); mlprof_begin(Z);
    at(5500); mlprof_begin(A);
    at(5600); mlprof_end(A);
    CHECK_OK(mlprof_dump(1));
    return tu_finish("test_nesting");
}
