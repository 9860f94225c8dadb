/* test_macros.c - the macros behave like statements and declarations: two
 * zones on one line, zones in unbraced branches, expression macros in
 * conditionals, and (in test_macros2.c, another translation unit) the same
 * macros compiled away by MLPROF_DISABLE. */
#include "testutil.h"

int macros_disabled_unit(mlprof_domain *d, mlprof_span *s); /* test_macros2.c */

static mlprof_domain *d;

static int two_on_a_line(void)
{
    MLPROF_ZONE(d, "first"); MLPROF_ZONE(d, "second"); MLPROF_SCOPE("s1"); MLPROF_SCOPE("s2");
    return strcmp(mlprof_scope_current(), "s1:s2:") == 0;
}

static void unbraced(int flag, mlprof_span *s)
{
    if (flag)
        MLPROF_BEGIN(s);
    else
        MLPROF_ARG_INT("never", 1);
    if (flag)
        MLPROF_END(s);
    int x = flag ? (MLPROF_ARG_INT("k", 1), 1) : 0;
    (void)x;
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_config("filename", tu_path("macros.json")));
    d = mlprof_domain_create("macros");
    mlprof_span *s = mlprof_task_create(d, "unbraced");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    for (int i = 0; i < 3; i++)
        CHECK(two_on_a_line(), "scopes from the macros: %s", mlprof_scope_current());
    CHECK(strcmp(mlprof_scope_current(), "") == 0, "scopes popped: %s", mlprof_scope_current());
    unbraced(1, s);
    CHECK(macros_disabled_unit(d, s) == 42, "disabled unit ran");
    char *js = NULL;
    CHECK_OK(mlprof_dumps(&js, MLPROF_FORMAT_JSON, MLPROF_SORT_TOTAL, 0, 0));
    CHECK(js && strstr(js, "{\"name\":\"first\",\"count\":3,"), "first zone: %s", js);
    CHECK(js && strstr(js, "{\"name\":\"second\",\"count\":3,"), "second zone: %s", js);
    CHECK(js && strstr(js, "{\"name\":\"unbraced\",\"count\":1,"), "unbraced: %s", js);
    CHECK(js && !strstr(js, "disabled_zone"), "disabled zone absent: %s", js);
    free(js);
    CHECK_OK(mlprof_dump(1));
    return tu_finish("test_macros");
}
