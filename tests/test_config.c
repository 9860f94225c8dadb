/* test_config.c - every configuration key through the API, the environment
 * and a config file; every kind of error names its key, value, file or line. */
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static void expect_value(const char *key, const char *want)
{
    char buf[256];
    CHECK_OK(mlprof_get_config(key, buf, sizeof buf));
    CHECK(strcmp(buf, want) == 0, "%s is \"%s\", want \"%s\"", key, buf, want);
}

static void expect_error(const char *key, const char *value, int code)
{
    int rc = mlprof_set_config(key, value);
    CHECK(rc == code, "%s=%s gave %s, want %s", key, value, mlprof_err_name(rc), mlprof_err_name(code));
    const char *msg = mlprof_last_error();
    CHECK(strstr(msg, key) != NULL, "message names the key: %s", msg);
    if (code == MLPROF_EVALUE)
        CHECK(strstr(msg, value) != NULL, "message names the value: %s", msg);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_keys(void)
{
    static const char *const good[][3] = {
        {"filename", "out/%p.json", "out/%p.json"}, {"profile_all", "yes", "true"},
        {"profile_api", "ON", "true"},              {"profile_memory", "1", "true"},
        {"profile_operator", "off", "false"},       {"aggregate_stats", "true", "true"},
        {"continuous_dump", "0", "false"},          {"dump_period", "0.25", "0.25"},
        {"level", "3", "3"},                        {"buffer_size", "2M", "2097152"},
        {"stats_file", "", ""},                     {"dump_at_exit", "false", "false"},
        {"autostart", "no", "false"},               {"clock", "monotonic", "monotonic"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_OK(mlprof_set_config(good[i][0], good[i][1]));
        expect_value(good[i][0], good[i][2]);
    }
    CHECK_OK(mlprof_set_config("buffer_size", "65536"));
    expect_value("buffer_size", "65536");
    CHECK_OK(mlprof_set_config("buffer_size", "1GiB"));
    expect_value("buffer_size", "1073741824");

    expect_error("no_such_key", "1", MLPROF_EKEY);
    CHECK(!strstr(mlprof_last_error(), "did you mean"), "no key is near no_such_key: %s", mlprof_last_error());
    /* a near miss names the key meant: a typo, a letter left out or two swapped */
    static const char *const near[][2] = {
        {"sampleing", "sampling"}, {"bufer_size", "buffer_size"}, {"dump_peroid", "dump_period"}, {"hook", "hooks"}};
    for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
        char want[96];
        snprintf(want, sizeof want, "did you mean \"%s\"?", near[i][1]);
        CHECK(mlprof_set_config(near[i][0], "1") == MLPROF_EKEY && strstr(mlprof_last_error(), want),
              "%s: %s", near[i][0], mlprof_last_error());
    }
    static const char *const bad[][2] = {
        {"profile_all", "maybe"}, {"aggregate_stats", ""}, {"dump_period", "0"},
        {"dump_period", "-1"},    {"dump_period", "abc"},  {"dump_period", "1e9"},
        {"level", "10"},          {"level", "-1"},         {"level", "2.5"},
        {"buffer_size", "12"},    {"buffer_size", "1T"},   {"buffer_size", "abc"},
        {"buffer_size", "100G"},  {"clock", "fast"},       {"filename", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(bad[i][0], bad[i][1], MLPROF_EVALUE);
    CHECK(mlprof_set_config(NULL, "1") == MLPROF_EINVAL, "null key");

    /* all or none */
    const char *keys[] = {"level", "bogus"};
    const char *vals[] = {"7", "1"};
    CHECK(mlprof_set_configs(2, keys, vals) == MLPROF_EKEY, "set_configs with a bad key");
    expect_value("level", "3");
    const char *keys2[] = {"level", "dump_period"};
    const char *vals2[] = {"5", "2"};
    CHECK_OK(mlprof_set_configs(2, keys2, vals2));
    expect_value("level", "5");
    expect_value("dump_period", "2");

    char small[4];
    CHECK(mlprof_get_config("filename", small, sizeof small) == MLPROF_ELIMIT, "small buffer");
    CHECK(strcmp(small, "out") == 0, "truncated copy %s", small);
    CHECK(mlprof_get_config("nope", small, sizeof small) == MLPROF_EKEY, "get unknown key");
}

static void test_file(void)
{
    const char *good = tu_path("good.conf");
    write_file(good, "# a comment\n\nlevel = 2   # trailing comment\nfilename = \"trace with spaces.json\"\n"
                     "profile_api=true\n");
    CHECK_OK(mlprof_load_config(good));
    expect_value("level", "2");
    expect_value("filename", "trace with spaces.json");
    expect_value("profile_api", "true");

    /* a UTF-8 byte order mark before the first key, as some editors save files */
    const char *bom = tu_path("bom.conf");
    write_file(bom, "\xef\xbb\xbflevel = 1\n");
    CHECK_OK(mlprof_load_config(bom));
    expect_value("level", "1");
    CHECK_OK(mlprof_load_config(good));

    const char *bad = tu_path("bad.conf");
    write_file(bad, "level = 4\n\ndump_period = soon\n");
    CHECK(mlprof_load_config(bad) == MLPROF_EVALUE, "bad value in file");
    char want[1100];
    snprintf(want, sizeof want, "%s:3:", bad);
    CHECK(strstr(mlprof_last_error(), want) && strstr(mlprof_last_error(), "dump_period") &&
              strstr(mlprof_last_error(), "soon"),
          "names file, line, key and value: %s", mlprof_last_error());
    expect_value("level", "2"); /* all or none: line 1 was not applied */

    write_file(bad, "level = 1\nfrobnicate = 3\n");
    CHECK(mlprof_load_config(bad) == MLPROF_EKEY, "unknown key in file");
    snprintf(want, sizeof want, "%s:2:", bad);
    CHECK(strstr(mlprof_last_error(), want) && strstr(mlprof_last_error(), "frobnicate"),
          "%s", mlprof_last_error());

    write_file(bad, "level 1\n");
    CHECK(mlprof_load_config(bad) == MLPROF_EPARSE, "line without =");
    snprintf(want, sizeof want, "%s:1:", bad);
    CHECK(strstr(mlprof_last_error(), want) != NULL, "%s", mlprof_last_error());

    CHECK(mlprof_load_config(tu_path("missing.conf")) == MLPROF_EIO, "missing file");
    CHECK(strstr(mlprof_last_error(), "missing.conf") != NULL, "%s", mlprof_last_error());
}

/* A key that names a file of its own (stats_file, memory_csv, memory_svg,
 * sqlite_file) on the trace's file, or on another such key's, would have
 * its output replace that file at each dump: refused, naming the key and
 * the value, nothing changed; the same file through "./" or a link too.
 * Outputs written in place (/dev/null) may be shared. */
static void test_outputs(void)
{
    char same[1024], dotted[1024], alias[1024];
    snprintf(same, sizeof same, "%s", tu_path("same.json"));
    snprintf(dotted, sizeof dotted, "%s", tu_path("./same.json"));
    snprintf(alias, sizeof alias, "%s", tu_path("alias.json"));
    unlink(same);
    unlink(alias);
    CHECK(symlink("same.json", alias) == 0, "a link to the trace's file-to-be");
    CHECK_OK(mlprof_set_config("filename", same));
    static const char *const keys[] = {"stats_file", "memory_csv", "memory_svg", "sqlite_file"};
    static const char *const defaults[] = {"", "auto", "auto", ""};
    for (size_t i = 0; i < 4; i++) {
        const char *values[] = {same, dotted, alias};
        for (size_t v = 0; v < 3; v++) {
            expect_error(keys[i], values[v], MLPROF_EVALUE);
            CHECK(strstr(mlprof_last_error(), "filename") && strstr(mlprof_last_error(), "same.json"),
                  "the message names the trace's file: %s", mlprof_last_error());
            expect_value(keys[i], defaults[i]);
        }
    }
    /* the trace moved onto an output: refused the same way */
    CHECK_OK(mlprof_set_config("stats_file", tu_path("stats.txt")));
    expect_error("filename", tu_path("stats.txt"), MLPROF_EVALUE);
    CHECK(strstr(mlprof_last_error(), "stats_file") != NULL, "names the other key: %s", mlprof_last_error());
    expect_value("filename", same);
    /* both at once: refused, all or none; a swap in one call is fine */
    const char *k2[] = {"filename", "memory_csv"};
    const char *v2[] = {tu_path("both.json"), tu_path("both.json")};
    CHECK(mlprof_set_configs(2, k2, v2) == MLPROF_EVALUE, "filename and memory_csv on one file");
    expect_value("filename", same);
    const char *k3[] = {"filename", "stats_file"};
    const char *v3[] = {tu_path("stats.txt"), same};
    CHECK_OK(mlprof_set_configs(2, k3, v3));
    /* two outputs on one file */
    CHECK_OK(mlprof_set_config("memory_csv", tu_path("mem.out")));
    expect_error("memory_svg", tu_path("mem.out"), MLPROF_EVALUE);
    CHECK(strstr(mlprof_last_error(), "memory_csv") != NULL, "names the other key: %s", mlprof_last_error());
    /* in place: /dev/null takes the trace and the statistics alike */
    CHECK_OK(mlprof_set_config("filename", "/dev/null"));
    CHECK_OK(mlprof_set_config("stats_file", "/dev/null"));
    /* a config file: checked once every line is read, the error at the line
     * that set the key */
    const char *conf = tu_path("outputs.conf");
    char text[3000];
    snprintf(text, sizeof text, "stats_file = %s\nlevel = 2\nfilename = %s\n", tu_path("f.json"), tu_path("f.json"));
    write_file(conf, text);
    CHECK(mlprof_load_config(conf) == MLPROF_EVALUE, "a config file naming one file twice");
    char want[1100];
    snprintf(want, sizeof want, "%s:1:", conf);
    CHECK(strstr(mlprof_last_error(), want) && strstr(mlprof_last_error(), "stats_file"),
          "names the file, the line and the key: %s", mlprof_last_error());
    expect_value("filename", "/dev/null");
    snprintf(text, sizeof text, "stats_file = %s\nfilename = %s\n", same, tu_path("g.json"));
    write_file(conf, text); /* the trace moves away from what line 1 names */
    CHECK_OK(mlprof_load_config(conf));
    const char *k4[] = {"filename", "stats_file", "memory_csv", "memory_svg", "sqlite_file"};
    const char *v4[] = {"profile.json", "", "auto", "auto", ""};
    CHECK_OK(mlprof_set_configs(5, k4, v4));
    unlink(alias);
}

/* The environment is read at the first call: run a fresh copy of this program. */
static void test_environment(const char *self)
{
    const char *conf = tu_path("env.conf");
    write_file(conf, "dump_period = 2.5\nlevel = 6\n");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "MLPROF_CONFIG='%s' MLPROF_LEVEL=3 MLPROF_BUFFER_SIZE=abc MLPROF_BOGUS=1 "
             "MLPROF_PROFILE_API=yes '%s' '%s' env-child 2>&1",
             conf, self, tu_dir);
    FILE *p = popen(cmd, "r");
    char out[8192] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    CHECK(pclose(p) == 0, "child status");
    CHECK(strstr(out, "level=3") != NULL, "environment beats the file: %s", out);
    CHECK(strstr(out, "dump_period=2.5") != NULL, "file read: %s", out);
    CHECK(strstr(out, "profile_api=true") != NULL, "env bool: %s", out);
    CHECK(strstr(out, "buffer_size=67108864") != NULL, "bad value keeps the default: %s", out);
    CHECK(strstr(out, "MLPROF_BUFFER_SIZE") && strstr(out, "\"abc\""),
          "bad value reported naming the variable: %s", out);
    CHECK(strstr(out, "MLPROF_BOGUS") && strstr(out, "unknown configuration key"),
          "unknown variable reported: %s", out);
}

static int env_child(void)
{
    const char *keys[] = {"level", "dump_period", "profile_api", "buffer_size"};
    for (int i = 0; i < 4; i++) {
        char buf[64];
        mlprof_get_config(keys[i], buf, sizeof buf);
        printf("%s=%s\n", keys[i], buf);
    }
    return 0;
}

/* Classes and levels decide which domains record. */
static void test_gating(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("gating.json")));
    CHECK_OK(mlprof_set_config("level", "1"));
    CHECK_OK(mlprof_set_config("profile_all", "false"));
    CHECK_OK(mlprof_set_config("profile_api", "false"));
    CHECK_OK(mlprof_set_config("profile_operator", "true"));
    mlprof_domain *api = mlprof_domain_create("api");
    mlprof_domain *op = mlprof_domain_create("op");
    mlprof_domain *deep = mlprof_domain_create("deep");
    CHECK_OK(mlprof_domain_set_class(api, MLPROF_CLASS_API));
    CHECK_OK(mlprof_domain_set_class(op, MLPROF_CLASS_OPERATOR));
    CHECK_OK(mlprof_domain_set_level(deep, 2));
    CHECK(mlprof_domain_set_level(deep, 12) == MLPROF_EINVAL, "level range");
    CHECK(mlprof_domain_set_class(api, 9) == MLPROF_EINVAL, "class range");
    mlprof_span *sa = mlprof_task_create(api, "api_call");
    mlprof_span *so = mlprof_task_create(op, "op_call");
    mlprof_span *sd = mlprof_task_create(deep, "deep_call");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_set_config("clock", "tsc") == MLPROF_ESTATE, "clock is fixed while running");
    mlprof_span *all[] = {sa, so, sd};
    for (int round = 0; round < 3; round++) {
        if (round == 1)
            CHECK_OK(mlprof_set_config("profile_api", "true"));
        if (round == 2)
            CHECK_OK(mlprof_set_config("level", "2"));
        for (int i = 0; i < 3; i++) {
            mlprof_begin(all[i]);
            mlprof_end(all[i]);
        }
    }
    char *s = NULL;
    CHECK_OK(mlprof_dumps(&s, MLPROF_FORMAT_JSON, MLPROF_SORT_TOTAL, 0, 0));
    CHECK(s && strstr(s, "{\"name\":\"op_call\",\"count\":3,"), "operators always: %s", s);
    CHECK(s && strstr(s, "{\"name\":\"api_call\",\"count\":2,"), "api after profile_api: %s", s);
    CHECK(s && strstr(s, "{\"name\":\"deep_call\",\"count\":1,"), "level 2 after level=2: %s", s);
    free(s);
    CHECK_OK(mlprof_set_config("aggregate_stats", "false"));
    CHECK(mlprof_dumps(&s, 0, 0, 0, 0) == MLPROF_ESTATE, "no statistics when off");
    CHECK_OK(mlprof_dump(1));
}

/* The test-only clock_shift key: checked like any key, refused while
 * running, and the shift is in mlprof_now_ns (the records' timestamps are
 * checked end to end by mpi_check.py). */
static void test_clock_shift(void)
{
    CHECK(mlprof_set_config("clock_shift", "12x") == MLPROF_EVALUE, "clock_shift 12x");
    CHECK(mlprof_set_config("clock_shift", "5:1000000000") == MLPROF_EVALUE, "a drift that stops the clock");
    CHECK(mlprof_set_config("clock_shift", "5:") == MLPROF_EVALUE, "clock_shift 5:");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    CHECK_OK(mlprof_set_config("clock_shift", "3600000000000:-5000"));
    uint64_t shifted = mlprof_now_ns();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t after = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    /* an hour ahead; the drift adds at most 5 us per second since the key was set */
    CHECK(shifted >= before + 3600000000000u - 1000000 && shifted <= after + 3600000000000u,
          "now %llu, monotonic %llu..%llu", (unsigned long long)shifted, (unsigned long long)before,
          (unsigned long long)after);
    char v[64];
    CHECK_OK(mlprof_get_config("clock_shift", v, sizeof v));
    CHECK(strcmp(v, "3600000000000:-5000") == 0, "read back: %s", v);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK(mlprof_set_config("clock_shift", "0") == MLPROF_ESTATE, "clock_shift is fixed while running");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK(mlprof_set_config("clock_shift", "") == MLPROF_ESTATE, "not with a run's records undumped");
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("clock_shift", ""));
    clock_gettime(CLOCK_MONOTONIC, &ts);
    before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    CHECK(mlprof_now_ns() >= before && mlprof_now_ns() < before + 3600000000000u, "no shift once empty");
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (argc > 2 && strcmp(argv[2], "env-child") == 0)
        return env_child();
    test_keys();
    test_file();
    test_outputs();
    test_environment(argv[0]);
    test_gating();
    test_clock_shift();
    return tu_finish("test_config");
}
