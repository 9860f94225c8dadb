/*
 * test_observers.c - observers written here: one counts its calls and keeps
 * the begin time in its per-span scratch to add the span's length as an
 * argument at its end; one only counts. Checks what they see (names, depths,
 * frames, arguments, not marker arguments), what they add (in the trace,
 * read back by check_trace.py), two threads at once, and the errors.
 */
#include <pthread.h>

#include "testutil.h"

typedef struct counts {
    int begins, ends, args, frames;
    int64_t flops_seen;
    int max_depth;
    int own_args_seen; /* arguments the observer added itself, seen again: must stay 0 */
    int bad_scratch;   /* an end that found another span's scratch: must stay 0 */
} counts;

static counts g_a, g_b;
static __thread counts t_counts;

typedef struct scratch {
    uint64_t begin_ns;
    int depth;
} scratch;

static void a_begin(void *user, const mlprof_span_info *span, void *data)
{
    counts *c = user;
    scratch *s = data;
    __atomic_add_fetch(&c->begins, 1, __ATOMIC_RELAXED);
    t_counts.begins++;
    if (span->frame)
        __atomic_add_fetch(&c->frames, 1, __ATOMIC_RELAXED);
    int seen = __atomic_load_n(&c->max_depth, __ATOMIC_RELAXED);
    while (span->depth > seen &&
           !__atomic_compare_exchange_n(&c->max_depth, &seen, span->depth, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    s->begin_ns = mlprof_now_ns();
    s->depth = span->depth;
    mlprof_arg_str("observed_by", "a"); /* lands on the span just begun */
}

static void a_arg(void *user, const mlprof_span_info *span, void *data, const char *key,
                  const mlprof_arg_value *v)
{
    counts *c = user;
    (void)span;
    (void)data;
    __atomic_add_fetch(&c->args, 1, __ATOMIC_RELAXED);
    if (strcmp(key, "flops") == 0 && v->type == MLPROF_ARG_INT)
        __atomic_add_fetch(&c->flops_seen, v->i, __ATOMIC_RELAXED);
    if (strcmp(key, "observed_by") == 0 || strcmp(key, "span_ns") == 0)
        __atomic_add_fetch(&c->own_args_seen, 1, __ATOMIC_RELAXED);
}

static void a_end(void *user, const mlprof_span_info *span, void *data)
{
    counts *c = user;
    scratch *s = data;
    __atomic_add_fetch(&c->ends, 1, __ATOMIC_RELAXED);
    t_counts.ends++;
    if (s->depth != span->depth) /* the scratch must be the span's own */
        __atomic_add_fetch(&c->bad_scratch, 1, __ATOMIC_RELAXED);
    mlprof_arg_int("span_ns", (int64_t)(mlprof_now_ns() - s->begin_ns));
}

static void b_begin(void *user, const mlprof_span_info *span, void *data)
{
    (void)span;
    (void)data;
    __atomic_add_fetch(&((counts *)user)->begins, 1, __ATOMIC_RELAXED);
}

static void b_end(void *user, const mlprof_span_info *span, void *data)
{
    (void)span;
    (void)data;
    __atomic_add_fetch(&((counts *)user)->ends, 1, __ATOMIC_RELAXED);
}

static mlprof_domain *g_dom;
static int g_thread_miscount;
static mlprof_span *g_outer, *g_inner, *g_frame;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        mlprof_begin(g_outer);
        mlprof_begin(g_inner);
        mlprof_arg_int("flops", 2);
        mlprof_end(g_inner);
        mlprof_end(g_outer);
    }
    if (t_counts.begins != 2000 || t_counts.ends != 2000)
        __atomic_add_fetch(&g_thread_miscount, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("observers.json")));
    g_dom = mlprof_domain_create("obs");
    g_outer = mlprof_task_create(g_dom, "outer");
    g_inner = mlprof_task_create(g_dom, "inner");
    g_frame = mlprof_frame_create(g_dom, "step");
    mlprof_marker *mark = mlprof_marker_create(g_dom, "mark");

    /* errors first */
    mlprof_observer bad = {.size = 8};
    CHECK(mlprof_observer_register(&bad) == MLPROF_EINVAL, "a size too small");
    CHECK(mlprof_observer_register(NULL) == MLPROF_EINVAL, "no observer");
    mlprof_observer big = {.size = sizeof big, .span_data_size = 1000};
    CHECK(mlprof_observer_register(&big) == MLPROF_EINVAL, "too much scratch");
    CHECK(mlprof_observer_unregister(5) == MLPROF_EINVAL, "unknown id");
    int ids[8];
    mlprof_observer nop = {.size = sizeof nop, .name = "nop"};
    for (int i = 0; i < 8; i++)
        ids[i] = mlprof_observer_register(&nop);
    CHECK(mlprof_observer_register(&nop) == MLPROF_ELIMIT, "eight at most");
    for (int i = 0; i < 8; i++)
        CHECK_OK(mlprof_observer_unregister(ids[i]));

    mlprof_observer a = {sizeof a, "test a", sizeof(scratch), &g_a, a_begin, a_arg, a_end};
    /* an observer compiled against an older header: no on_arg, no on_end */
    mlprof_observer b = {offsetof(mlprof_observer, on_arg), "test b", 0, &g_b, b_begin, NULL, b_end};
    int ida = mlprof_observer_register(&a), idb = mlprof_observer_register(&b);
    CHECK(ida >= 0 && idb >= 0, "registered %d %d", ida, idb);

    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_observer_register(&a) == MLPROF_ESTATE, "not while running");
    tu_set_now(1000);
    mlprof_begin(g_frame);
    mlprof_begin(g_outer);
    tu_set_now(1100);
    mlprof_begin(g_inner);
    mlprof_arg_int("flops", 40);
    mlprof_arg_double("ratio", 0.5);
    mlprof_arg_str("shape", "[2,2]");
    tu_set_now(1350);
    mlprof_end(g_inner); /* span_ns = 250 */
    mlprof_mark(mark, MLPROF_SCOPE_THREAD);
    mlprof_arg_int("flops", 1000000); /* the marker's: not observed */
    mlprof_begin_dynamic(g_dom, "dynamic");
    tu_set_now(1400);
    mlprof_end_dynamic(g_dom);
    tu_set_now(2000);
    mlprof_end(g_outer); /* span_ns = 1000 */
    mlprof_end(g_frame);
    mlprof_end(g_inner); /* nothing open: no callback */
    CHECK(g_a.begins == 4 && g_a.ends == 4, "a: %d begins, %d ends", g_a.begins, g_a.ends);
    CHECK(g_a.args == 3 && g_a.flops_seen == 40, "a: %d args, flops %lld", g_a.args, (long long)g_a.flops_seen);
    CHECK(g_a.frames == 1 && g_a.max_depth == 2, "a: frames %d, depth %d", g_a.frames, g_a.max_depth);
    CHECK(g_a.own_args_seen == 0, "its own arguments are not observed");
    CHECK(g_b.begins == 4 && g_b.ends == 0, "b (old size) begins %d, ends %d", g_b.begins, g_b.ends);
    CHECK_OK(mlprof_dump(1));

    /* two threads at once, on the real clock */
    CHECK_OK(mlprof_set_clock(NULL, NULL));
    memset(&g_a, 0, sizeof g_a);
    CHECK_OK(mlprof_set_config("filename", tu_path("observers_threads.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK(g_a.begins == 4000 && g_a.ends == 4000 && g_a.flops_seen == 4000, "threads: %d %d %lld", g_a.begins,
          g_a.ends, (long long)g_a.flops_seen);
    CHECK(g_thread_miscount == 0, "each thread saw its own 2000 begins and ends");
    CHECK(g_a.bad_scratch == 0 && g_a.own_args_seen == 0, "scratch %d, own arguments %d", g_a.bad_scratch,
          g_a.own_args_seen);
    CHECK_OK(mlprof_dump(1));
    CHECK(mlprof_observer_unregister(ida) == MLPROF_OK && mlprof_observer_unregister(idb) == MLPROF_OK,
          "unregistered");
    return tu_finish("test_observers");
}
