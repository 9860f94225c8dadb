/*
 * test_handles.c - creating handles and domains by name, many of them: what a
 * create returns (a new handle for a live name, the destroyed one of that
 * name and kind again) stays the same however many exist. 100k distinct task
 * handles are made, destroyed and made again: each comes back at the same
 * address; a second create of a live name is another handle; a destroyed task
 * is not revived as a frame, a counter or a marker, nor in another domain;
 * 20k domains are found again by name. (Made to run in well under a second;
 * when every create looked at every handle it took minutes.)
 */
#include "testutil.h"

#define HANDLES 100000
#define DOMAINS 20000

static mlprof_span *g_tasks[HANDLES];
static mlprof_span *g_again[HANDLES];
static mlprof_domain *g_domains[DOMAINS];

static const char *name_of(char *buf, size_t len, int i)
{
    snprintf(buf, len, "op%d", i);
    return buf;
}

static int by_address(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t)*(mlprof_span *const *)x, b = (uintptr_t)*(mlprof_span *const *)y;
    return a < b ? -1 : a > b;
}

/* 1 when no two of the n handles are the same */
static int distinct(mlprof_span **a, int n)
{
    mlprof_span **s = malloc((size_t)n * sizeof *s);
    if (!s)
        return 0;
    memcpy(s, a, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, by_address);
    int ok = 1;
    for (int i = 1; i < n && ok; i++)
        ok = s[i] != s[i - 1];
    free(s);
    return ok;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    char name[32];
    mlprof_domain *d = mlprof_domain_create("many");
    mlprof_domain *other = mlprof_domain_create("other");
    CHECK(d && other && d != other, "two domains");

    int bad_name = 0, nulls = 0;
    for (int i = 0; i < HANDLES; i++) {
        g_tasks[i] = mlprof_task_create(d, name_of(name, sizeof name, i));
        nulls += !g_tasks[i];
        bad_name += g_tasks[i] && strcmp(mlprof_span_name(g_tasks[i]), name) != 0;
    }
    CHECK(nulls == 0 && bad_name == 0, "%d handles made, %d NULL, %d misnamed", HANDLES, nulls, bad_name);
    CHECK(distinct(g_tasks, HANDLES), "every distinct name is its own handle");

    /* a live name created again: another handle, not the live one */
    int shared = 0;
    for (int i = 0; i < HANDLES; i++) {
        g_again[i] = mlprof_task_create(d, name_of(name, sizeof name, i));
        shared += g_again[i] == g_tasks[i];
    }
    CHECK(shared == 0, "a create of a live name makes another handle (%d shared)", shared);

    /* destroyed: the same name comes back at the same address (its twin is live) */
    for (int i = 0; i < HANDLES; i++)
        mlprof_span_destroy(g_tasks[i]);
    int moved = 0;
    for (int i = 0; i < HANDLES; i++)
        moved += mlprof_task_create(d, name_of(name, sizeof name, i)) != g_tasks[i];
    CHECK(moved == 0, "destroyed handles revived at their address (%d moved)", moved);

    /* both handles of each name destroyed: two creates give back the two */
    for (int i = 0; i < HANDLES; i++) {
        mlprof_span_destroy(g_again[i]);
        mlprof_span_destroy(g_tasks[i]);
    }
    int lost = 0;
    for (int i = 0; i < HANDLES; i++) {
        mlprof_span *a = mlprof_task_create(d, name_of(name, sizeof name, i));
        mlprof_span *b = mlprof_task_create(d, name);
        lost += !((a == g_tasks[i] && b == g_again[i]) || (a == g_again[i] && b == g_tasks[i]));
    }
    CHECK(lost == 0, "the two destroyed handles of each name revived (%d names not)", lost);

    /* a handle destroyed twice is revived once */
    mlprof_span *twice = mlprof_task_create(d, "twice");
    mlprof_span_destroy(twice);
    mlprof_span_destroy(twice);
    mlprof_span *first = mlprof_task_create(d, "twice");
    mlprof_span *then = mlprof_task_create(d, "twice");
    CHECK(first == twice && then != twice, "a double destroy does not hand the handle out twice");

    /* the kind, the type and the domain are part of the name */
    mlprof_span *task = mlprof_task_create(d, "kinds");
    mlprof_span_destroy(task);
    mlprof_span *frame = mlprof_frame_create(d, "kinds");
    mlprof_counter *counter = mlprof_counter_create(d, "kinds");
    mlprof_marker *marker = mlprof_marker_create(d, "kinds");
    mlprof_span *elsewhere = mlprof_task_create(other, "kinds");
    CHECK((void *)frame != (void *)task && (void *)counter != (void *)task && (void *)marker != (void *)task &&
              elsewhere != task,
          "a destroyed task is revived as a task of its domain only");
    CHECK(mlprof_task_create(d, "kinds") == task, "and as that");
    mlprof_counter_destroy(counter);
    CHECK(mlprof_counter_create(d, "kinds") == counter, "a destroyed counter is revived");
    mlprof_marker_destroy(marker);
    CHECK(mlprof_marker_create(d, "kinds") == marker, "a destroyed marker is revived");
    mlprof_span *event = mlprof_event_create("kinds");
    mlprof_span_destroy(event);
    CHECK(mlprof_event_create("kinds") == event, "a destroyed event is revived");

    /* domains: one per name, found again */
    int dnull = 0, dbad = 0;
    for (int i = 0; i < DOMAINS; i++) {
        snprintf(name, sizeof name, "dom%d", i);
        g_domains[i] = mlprof_domain_create(name);
        dnull += !g_domains[i];
        dbad += g_domains[i] && strcmp(mlprof_domain_name(g_domains[i]), name) != 0;
    }
    CHECK(dnull == 0 && dbad == 0, "%d domains, %d NULL, %d misnamed", DOMAINS, dnull, dbad);
    int dmoved = 0;
    for (int i = 0; i < DOMAINS; i++) {
        snprintf(name, sizeof name, "dom%d", i);
        dmoved += mlprof_domain_create(name) != g_domains[i];
    }
    CHECK(dmoved == 0, "a domain's name finds it again (%d not)", dmoved);
    CHECK(mlprof_domain_create("many") == d, "the first domain too");

    /* revived handles record, under their names */
    CHECK_OK(mlprof_set_config("filename", tu_path("handles.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(g_tasks[HANDLES - 1]);
    mlprof_end(g_tasks[HANDLES - 1]);
    mlprof_begin(task);
    mlprof_end(task);
    char *json = NULL;
    CHECK_OK(mlprof_dump_string(&json));
    snprintf(name, sizeof name, "\"op%d\"", HANDLES - 1);
    CHECK(json && strstr(json, name) && strstr(json, "\"kinds\""), "the revived handles' spans are in the trace");
    mlprof_free(json);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    return tu_finish("test_handles");
}
