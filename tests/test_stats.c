/* test_stats.c - the statistics math, checked exactly on durations from an
 * injected clock: count, total, self, min, max, avg, counters, sorting, reset. */
#include "testutil.h"

static mlprof_domain *d;
static mlprof_span *A, *B;

static void at(uint64_t ns, void (*fn)(mlprof_span *), mlprof_span *s)
{
    tu_set_now(ns);
    fn(s);
}

static char *stats(int format, int sort, int asc)
{
    char *s = NULL;
    CHECK_OK(mlprof_dumps(&s, format, sort, asc, 0));
    return s ? s : calloc(1, 1);
}

/* Position of needle in hay, or -1. */
static long pos(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    return p ? p - hay : -1;
}

static void check_order(int sort, int asc, const char *first, const char *second)
{
    char *s = stats(MLPROF_FORMAT_JSON, sort, asc);
    long a = pos(s, first), b = pos(s, second);
    CHECK(a >= 0 && b >= 0 && a < b, "sort %d asc %d: %s should come before %s in %s", sort, asc,
          first, second, s);
    free(s);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", tu_path("stats_trace.json")));
    d = mlprof_domain_create("d");
    A = mlprof_task_create(d, "A");
    B = mlprof_task_create(d, "B");
    mlprof_span *F = mlprof_frame_create(d, "F");
    mlprof_counter *C = mlprof_counter_create(d, "C");
    mlprof_marker *M = mlprof_marker_create(d, "M");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    at(500, mlprof_begin, F);
    at(1000, mlprof_begin, A);
    at(1100, mlprof_begin, B);
    at(1350, mlprof_end, B);
    at(1400, mlprof_begin, B);
    at(1500, mlprof_end, B);
    at(2000, mlprof_end, A);
    at(2500, mlprof_end, F);
    at(3000, mlprof_begin, A);
    at(3010, mlprof_end, A);
    tu_set_now(4000);
    mlprof_counter_set(C, 5);
    mlprof_counter_add(C, 3);
    mlprof_counter_add(C, -2);
    mlprof_mark(M, MLPROF_SCOPE_THREAD);
    mlprof_mark(M, MLPROF_SCOPE_THREAD);
    CHECK(mlprof_counter_value(C) == 6, "counter value %lld", (long long)mlprof_counter_value(C));

    char *js = stats(MLPROF_FORMAT_JSON, MLPROF_SORT_TOTAL, 0);
    CHECK(strstr(js, "{\"name\":\"A\",\"count\":2,\"total_ns\":1010,\"self_ns\":660,\"min_ns\":10,"
                     "\"max_ns\":1000,\"avg_ns\":505}") != NULL, "A row in %s", js);
    CHECK(strstr(js, "{\"name\":\"B\",\"count\":2,\"total_ns\":350,\"self_ns\":350,\"min_ns\":100,"
                     "\"max_ns\":250,\"avg_ns\":175}") != NULL, "B row in %s", js);
    CHECK(strstr(js, "\"frames\":[{\"name\":\"F\",\"count\":1,\"total_ns\":2000,\"self_ns\":2000,"
                     "\"min_ns\":2000,\"max_ns\":2000,\"avg_ns\":2000}]") != NULL, "F row in %s", js);
    CHECK(strstr(js, "{\"name\":\"C\",\"count\":3,\"min\":5,\"max\":8,\"avg\":6.333333333333333,"
                     "\"last\":6}") != NULL, "C row in %s", js);
    CHECK(strstr(js, "\"markers\":[{\"name\":\"M\",\"count\":2}]") != NULL, "M row in %s", js);
    free(js);

    /* every sort key, both directions */
    check_order(MLPROF_SORT_TOTAL, 0, "\"A\"", "\"B\"");
    check_order(MLPROF_SORT_TOTAL, 1, "\"B\"", "\"A\"");
    check_order(MLPROF_SORT_AVG, 1, "\"B\"", "\"A\"");
    check_order(MLPROF_SORT_AVG, 0, "\"A\"", "\"B\"");
    check_order(MLPROF_SORT_MIN, 1, "\"A\"", "\"B\"");
    check_order(MLPROF_SORT_MIN, 0, "\"B\"", "\"A\"");
    check_order(MLPROF_SORT_MAX, 0, "\"A\"", "\"B\"");
    check_order(MLPROF_SORT_MAX, 1, "\"B\"", "\"A\"");
    check_order(MLPROF_SORT_SELF, 0, "\"A\"", "\"B\"");
    check_order(MLPROF_SORT_SELF, 1, "\"B\"", "\"A\"");
    /* equal counts: ties are broken by name */
    check_order(MLPROF_SORT_COUNT, 0, "\"A\"", "\"B\"");
    check_order(MLPROF_SORT_COUNT, 1, "\"A\"", "\"B\"");

    /* the table, in units a person reads */
    char *table = stats(MLPROF_FORMAT_TABLE, MLPROF_SORT_TOTAL, 0);
    CHECK(strstr(table, "Domain: d") != NULL, "%s", table);
    CHECK(strstr(table, "1.010 us") != NULL && strstr(table, "660 ns") != NULL &&
              strstr(table, "505 ns") != NULL && strstr(table, "2.000 us") != NULL,
          "units in %s", table);
    CHECK(pos(table, "  A ") < pos(table, "  B "), "A before B in %s", table);
    free(table);

    /* bad arguments */
    char *s = NULL;
    CHECK(mlprof_dumps(&s, 7, 0, 0, 0) == MLPROF_EINVAL, "bad format");
    CHECK(strstr(mlprof_last_error(), "format") != NULL, "%s", mlprof_last_error());
    CHECK(mlprof_dumps(&s, 0, 42, 0, 0) == MLPROF_EINVAL, "bad sort");
    CHECK(mlprof_dumps(NULL, 0, 0, 0, 0) == MLPROF_EINVAL, "null out");

    /* reset clears the statistics, not the trace */
    CHECK_OK(mlprof_dumps(&s, MLPROF_FORMAT_JSON, 0, 0, 1));
    free(s);
    s = stats(MLPROF_FORMAT_JSON, 0, 0);
    CHECK(strstr(s, "\"domains\":[]") != NULL, "after reset: %s", s);
    free(s);
    at(5000, mlprof_begin, A);
    at(5007, mlprof_end, A);
    s = stats(MLPROF_FORMAT_JSON, 0, 0);
    CHECK(strstr(s, "{\"name\":\"A\",\"count\":1,\"total_ns\":7,") != NULL, "after reset: %s", s);
    free(s);

    /* names that differ only after their first 600 bytes are separate rows */
    {
        char n1[700], n2[700];
        memset(n1, 'x', 650);
        memcpy(n2, n1, 650);
        strcpy(n1 + 650, "-one");
        strcpy(n2 + 650, "-two");
        mlprof_span *L1 = mlprof_task_create(d, n1), *L2 = mlprof_task_create(d, n2);
        CHECK(L1 && L2 && L1 != L2, "two long-named tasks");
        CHECK_OK(mlprof_dumps(&s, MLPROF_FORMAT_JSON, 0, 0, 1));
        free(s);
        at(6000, mlprof_begin, L1);
        at(6010, mlprof_end, L1);
        at(6020, mlprof_begin, L2);
        at(6050, mlprof_end, L2);
        at(6060, mlprof_begin, L2);
        at(6100, mlprof_end, L2);
        s = stats(MLPROF_FORMAT_JSON, 0, 0);
        char want1[800], want2[800];
        snprintf(want1, sizeof want1, "{\"name\":\"%s\",\"count\":1,\"total_ns\":10,", n1);
        snprintf(want2, sizeof want2, "{\"name\":\"%s\",\"count\":2,\"total_ns\":70,", n2);
        CHECK(strstr(s, want1) != NULL, "row of the first long name (count 1, 10 ns) in %s", s);
        CHECK(strstr(s, want2) != NULL, "row of the second long name (count 2, 70 ns) in %s", s);
        free(s);
        /* the table shortens them in the middle, so that their ends still tell them apart */
        table = stats(MLPROF_FORMAT_TABLE, MLPROF_SORT_TOTAL, 0);
        CHECK(strstr(table, "x...x") != NULL && strstr(table, "x-one ") != NULL && strstr(table, "x-two ") != NULL,
              "shortened names in %s", table);
        CHECK(strstr(table, n1) == NULL, "a 654-byte name is shortened in the table: %s", table);
        free(table);
    }

    /* the trace keeps every event, with exact microsecond timestamps */
    CHECK_OK(mlprof_dump(1));
    char *trace = tu_read_file(tu_path("stats_trace.json"));
    CHECK(trace != NULL, "trace written");
    if (trace) {
        CHECK(strstr(trace, "\"name\":\"A\",\"cat\":\"d\"") != NULL, "A in trace");
        CHECK(strstr(trace, "\"ts\":1.000,\"dur\":1.000") != NULL, "A's first pass");
        CHECK(strstr(trace, "\"ts\":1.100,\"dur\":0.250") != NULL, "B's first pass");
        CHECK(strstr(trace, "\"ts\":5.000,\"dur\":0.007") != NULL, "A after reset");
        CHECK(tu_count(trace, "\"ph\":\"X\"") == 8, "eight durations");
        CHECK(tu_count(trace, "\"ph\":\"b\"") == 1 && tu_count(trace, "\"ph\":\"e\"") == 1, "frame");
        free(trace);
    }
    return tu_finish("test_stats");
}
