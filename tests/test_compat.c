/*
 * test_compat.c - what scripts written for MXNet's and RAF's profilers need
 * from the C library: MXNet's configuration keys (accepted everywhere, mapped
 * onto mlprof's behaviour), dumps that leave the configured file alone
 * (mlprof_dump_to, mlprof_dump_string), RAF's memory profiler calls
 * (mlprof_mem_reset, mlprof_mem_trace) and RAF's macros (MLPROF_WITH,
 * MLPROF_WITH_GPU). check_trace.py (area "compat") runs it in three modes:
 * "main", then "env" and "file" with MXNet's keys in the MLPROF_*
 * environment and in a config file.
 *
 * usage: test_compat OUTDIR [main|env|file]
 */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "testutil.h"

int compat_off_run(void); /* test_compat_off.c: the macros under MLPROF_DISABLE */

static void expect_value(const char *key, const char *want)
{
    char buf[4200];
    CHECK_OK(mlprof_get_config(key, buf, sizeof buf));
    CHECK(strcmp(buf, want) == 0, "%s is \"%s\", want \"%s\"", key, buf, want);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---------------------------------------------------------- MXNet's keys */

/* Records one operator-class task and one user-class task, named after tag. */
static void record_operator(mlprof_domain *ops, const char *tag)
{
    char name[64];
    snprintf(name, sizeof name, "op_%s", tag);
    mlprof_span *op = mlprof_task_create(ops, name);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(op);
    mlprof_end(op);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    mlprof_span_destroy(op);
}

static void test_mxnet_keys(void)
{
    /* the defaults, as MXNet's */
    expect_value("profile_symbolic", "true");
    expect_value("profile_imperative", "true");
    expect_value("profile_process", "worker");
    expect_value("gpu_memory_profile_filename_prefix", "");

    /* set and read back, never "unknown" */
    CHECK_OK(mlprof_set_config("profile_process", "server"));
    expect_value("profile_process", "server");
    CHECK_OK(mlprof_set_config("profile_process", "worker"));
    int rc = mlprof_set_config("profile_process", "scheduler");
    CHECK(rc == MLPROF_EVALUE, "profile_process=scheduler: %s", mlprof_err_name(rc));
    CHECK(strstr(mlprof_last_error(), "profile_process") && strstr(mlprof_last_error(), "scheduler") &&
              strstr(mlprof_last_error(), "worker or server"),
          "the error names the key, the value and what is expected: %s", mlprof_last_error());
    expect_value("profile_process", "worker");
    rc = mlprof_set_config("profile_symbolic", "perhaps");
    CHECK(rc == MLPROF_EVALUE && strstr(mlprof_last_error(), "profile_symbolic"), "bad boolean: %s",
          mlprof_last_error());

    /* the mapping: operators are recorded while either kind is on */
    mlprof_domain *ops = mlprof_domain_create("compat_ops");
    CHECK_OK(mlprof_domain_set_class(ops, MLPROF_CLASS_OPERATOR));
    CHECK_OK(mlprof_set_config("filename", tu_path("keys.json")));
    CHECK_OK(mlprof_set_config("profile_symbolic", "0"));
    expect_value("profile_operator", "true"); /* imperative still on */
    record_operator(ops, "imperative_only");
    CHECK_OK(mlprof_set_config("profile_imperative", "false"));
    expect_value("profile_operator", "false");
    record_operator(ops, "neither");
    const char *both[] = {"profile_symbolic", "profile_imperative"};
    const char *on_off[] = {"1", "0"};
    CHECK_OK(mlprof_set_configs(2, both, on_off));
    expect_value("profile_operator", "true");
    record_operator(ops, "symbolic_only");
    CHECK_OK(mlprof_set_config("profile_operator", "0"));
    expect_value("profile_symbolic", "false");
    expect_value("profile_imperative", "false");
    record_operator(ops, "operator_off");
    CHECK_OK(mlprof_set_config("profile_operator", "1"));
    expect_value("profile_symbolic", "true");
    expect_value("profile_imperative", "true");
    record_operator(ops, "operator_on");
    CHECK_OK(mlprof_dump(1));

    /* the memory CSV at MXNet's prefix, with the pid */
    char csv[1200], want[1200], trace_csv[1200];
    snprintf(want, sizeof want, "%s-pid_%d.csv", tu_path("gpumem"), (int)getpid());
    snprintf(trace_csv, sizeof trace_csv, "%s", tu_path("prefix.memory.csv"));
    unlink(want);
    unlink(trace_csv);
    CHECK_OK(mlprof_set_config("filename", tu_path("prefix.json")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_config("gpu_memory_profile_filename_prefix", tu_path("gpumem")));
    expect_value("gpu_memory_profile_filename_prefix", tu_path("gpumem"));
    CHECK_OK(mlprof_output_path("memory_csv", csv, sizeof csv));
    CHECK(strcmp(csv, want) == 0, "memory_csv path %s, want %s", csv, want);
    static char block[4096];
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CUDA(0), block, sizeof block, "weights"));
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CUDA(0), block));
    CHECK_OK(mlprof_dump(1));
    char *text = tu_read_file(want);
    CHECK(text && strstr(text, "weights"), "the CSV at the prefix holds the block: %s", want);
    free(text);
    CHECK(!exists(trace_csv), "and none beside the trace: %s", trace_csv);
    /* a memory_csv of its own wins over the prefix */
    CHECK_OK(mlprof_set_config("memory_csv", tu_path("own.csv")));
    CHECK_OK(mlprof_output_path("memory_csv", csv, sizeof csv));
    CHECK(strcmp(csv, tu_path("own.csv")) == 0, "memory_csv set: %s", csv);
    CHECK_OK(mlprof_set_config("memory_csv", "auto"));
    CHECK_OK(mlprof_set_config("gpu_memory_profile_filename_prefix", ""));
    CHECK_OK(mlprof_output_path("memory_csv", csv, sizeof csv));
    CHECK(strcmp(csv, trace_csv) == 0, "prefix cleared: beside the trace again: %s", csv);
    CHECK_OK(mlprof_set_config("profile_memory", "0"));
    CHECK_OK(mlprof_clear());
}

/* Run with MXNet's keys in the environment or in MLPROF_CONFIG: they are
 * taken (check_trace.py also checks that stderr has no "unknown"). */
static void test_keys_from_outside(void)
{
    expect_value("profile_symbolic", "false");
    expect_value("profile_imperative", "false");
    expect_value("profile_operator", "false");
    expect_value("profile_process", "server");
    char want[1200];
    snprintf(want, sizeof want, "%s", tu_path("outside"));
    expect_value("gpu_memory_profile_filename_prefix", want);
    mlprof_domain *ops = mlprof_domain_create("compat_ops");
    CHECK_OK(mlprof_domain_set_class(ops, MLPROF_CLASS_OPERATOR));
    CHECK_OK(mlprof_set_config("filename", tu_path("outside.json")));
    mlprof_span *user = mlprof_task_create(NULL, "user_outside");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(user);
    mlprof_end(user);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    record_operator(ops, "outside");
    CHECK_OK(mlprof_dump(1));
}

/* ------------------------------------------------ dumps beside the file */

/* The names in a folder, sorted, one a line (caller frees). */
static char *listing(const char *dir)
{
    char *names[256];
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < 256) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            names[n++] = strdup(e->d_name);
    }
    if (d)
        closedir(d);
    for (size_t i = 1; i < n; i++) /* a few names: insertion sort */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *out = calloc(1, len);
    for (size_t i = 0; i < n; i++) {
        strcat(out, names[i]);
        strcat(out, "\n");
        free(names[i]);
    }
    return out;
}

/* Makes dir, empty (a run before this one left its files). */
static void fresh_dir(const char *dir)
{
    mkdir(dir, 0755);
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[2400];
    while (d && (e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink(path);
    }
    if (d)
        closedir(d);
}

static void record_n(mlprof_span *span, int n)
{
    for (int i = 0; i < n; i++) {
        mlprof_begin(span);
        mlprof_end(span);
    }
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_dump_to(void)
{
    char dir[1100], configured[1200], named[1200], path[1200];
    snprintf(dir, sizeof dir, "%s", tu_path("dumps"));
    fresh_dir(dir);
    snprintf(configured, sizeof configured, "%s/configured.json", dir);
    snprintf(named, sizeof named, "%s/named.json", dir);
    CHECK_OK(mlprof_set_config("filename", configured));
    mlprof_span *a = mlprof_task_create(NULL, "before_named");
    mlprof_span *b = mlprof_task_create(NULL, "after_named");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record_n(a, 3);

    /* the named file appears, nothing else */
    char *before = listing(dir);
    CHECK_OK(mlprof_dump_to(named, 0));
    char *after = listing(dir);
    CHECK(strcmp(after, "named.json\n") == 0 && strcmp(before, "") == 0, "only the named file: [%s] -> [%s]",
          before, after);
    free(before);
    free(after);
    char *first = tu_read_file(named);
    CHECK(first && tu_count(first, "\"before_named\"") == 3 && tu_count(first, "after_named") == 0,
          "the named dump holds what was recorded");
    expect_value("filename", configured);

    /* the named file again: it changes; the configured one is still not written */
    record_n(b, 2);
    CHECK_OK(mlprof_dump_to(named, 0));
    char *second = tu_read_file(named);
    CHECK(second && tu_count(second, "\"after_named\"") == 2 && tu_count(second, "\"before_named\"") == 3,
          "the second named dump holds everything since the start");
    CHECK(!exists(configured), "the configured file is not written by mlprof_dump_to");
    free(first);
    free(second);

    /* the configured dump, then a named one: the configured file is left as it was */
    CHECK_OK(mlprof_dump(0));
    char *conf1 = tu_read_file(configured);
    record_n(a, 1);
    snprintf(path, sizeof path, "%s/other_%%p.json", dir);
    CHECK_OK(mlprof_dump_to(path, 0));
    char expanded[1200];
    snprintf(expanded, sizeof expanded, "%s/other_%d.json", dir, (int)getpid());
    CHECK(exists(expanded), "%%p expanded in the named path: %s", expanded);
    char *conf2 = tu_read_file(configured);
    CHECK(conf1 && conf2 && strcmp(conf1, conf2) == 0, "the configured file is untouched by a named dump");
    free(conf1);
    free(conf2);

    /* a device is written in place */
    CHECK_OK(mlprof_dump_to("/dev/null", 0));
    struct stat st;
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is still a device");

    /* errors */
    int rc = mlprof_dump_to(NULL, 0);
    CHECK(rc == MLPROF_EINVAL, "no path: %s", mlprof_err_name(rc));
    rc = mlprof_dump_to("", 0);
    CHECK(rc == MLPROF_EINVAL, "empty path: %s", mlprof_err_name(rc));
    snprintf(path, sizeof path, "%s/no_such_folder/x.json", dir);
    rc = mlprof_dump_to(path, 0);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "no_such_folder"), "a folder that is not there: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());

    /* finished: the trace ends at the named file; the next one starts empty */
    snprintf(path, sizeof path, "%s/final.json", dir);
    CHECK_OK(mlprof_dump_to(path, 1));
    CHECK(mlprof_get_state() == MLPROF_STATE_STOP, "a finished named dump stops recording");
    char *fin = tu_read_file(path);
    CHECK(fin && strstr(fin, "\"finished\":true") && tu_count(fin, "\"before_named\"") == 4,
          "the finished trace is at the named path");
    free(fin);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record_n(b, 1);
    CHECK_OK(mlprof_dump_to(path, 1));
    fin = tu_read_file(path);
    CHECK(fin && tu_count(fin, "\"before_named\"") == 0 && tu_count(fin, "\"after_named\"") == 1,
          "the next trace starts empty");
    free(fin);

    /* the memory outputs at "auto" go beside the named path */
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    static char block[256];
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, block, sizeof block, "named_block"));
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, block));
    snprintf(path, sizeof path, "%s/raf.json", dir);
    CHECK_OK(mlprof_dump_to(path, 1));
    snprintf(path, sizeof path, "%s/raf.memory.csv", dir);
    char *csv = tu_read_file(path);
    CHECK(csv && strstr(csv, "named_block"), "the memory CSV beside the named trace: %s", path);
    free(csv);
    snprintf(path, sizeof path, "%s/raf.memory_flow.svg", dir);
    CHECK(exists(path), "the memory picture beside the named trace: %s", path);
    snprintf(path, sizeof path, "%s/configured.memory.csv", dir);
    CHECK(!exists(path), "none beside the configured trace: %s", path);
    CHECK_OK(mlprof_set_config("profile_memory", "0"));
    CHECK_OK(mlprof_clear());
    mlprof_span_destroy(a);
    mlprof_span_destroy(b);
}

static void test_dump_string(void)
{
    char dir[1100], configured[1200];
    snprintf(dir, sizeof dir, "%s", tu_path("strings"));
    fresh_dir(dir);
    snprintf(configured, sizeof configured, "%s/configured.json", dir);
    CHECK_OK(mlprof_set_config("filename", configured));
    CHECK_OK(mlprof_set_config("stats_file", tu_path("strings/stats.txt")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    mlprof_span *op = mlprof_task_create(NULL, "string_op");
    mlprof_span *open = mlprof_task_create(NULL, "still_open");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record_n(op, 5);
    static char block[64];
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, block, sizeof block, "string_block"));
    mlprof_begin(open);

    char *before = listing(dir);
    char *text = NULL;
    CHECK_OK(mlprof_dump_string(&text));
    char *after = listing(dir);
    CHECK(strcmp(before, "") == 0 && strcmp(after, "") == 0, "no file written: [%s] -> [%s]", before, after);
    free(before);
    free(after);
    CHECK(mlprof_get_state() == MLPROF_STATE_RUN, "still recording");
    CHECK(text && tu_count(text, "\"string_op\"") == 5 && strstr(text, "\"still_open\"") &&
              strstr(text, "\"otherData\"") && strstr(text, "\"finished\":false"),
          "the string holds the events, the open span and otherData");
    if (text)
        write_text(tu_path("string.json"), text); /* read back by check_trace.py */
    mlprof_free(text);
    mlprof_end(open);
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, block));

    /* a second string goes on from the same trace */
    record_n(op, 1);
    text = NULL;
    CHECK_OK(mlprof_dump_string(&text));
    CHECK(text && tu_count(text, "\"string_op\"") == 6, "a later string holds everything since the start");
    mlprof_free(text);
    CHECK(mlprof_dump_string(NULL) == MLPROF_EINVAL, "out NULL");
    CHECK(!exists(configured) && !exists(tu_path("strings/stats.txt")), "still no file");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_set_config("stats_file", ""));
    CHECK_OK(mlprof_set_config("profile_memory", "0"));
    CHECK_OK(mlprof_clear());

    /* events the continuous dump moved to its spool are in the string */
    snprintf(configured, sizeof configured, "%s/continuous.json", dir);
    CHECK_OK(mlprof_set_config("filename", configured));
    CHECK_OK(mlprof_set_config("dump_period", "0.01"));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    mlprof_span *spooled = mlprof_task_create(NULL, "spooled_op");
    mlprof_span *later = mlprof_task_create(NULL, "later_op");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record_n(spooled, 100);
    int seen = 0;
    for (int tries = 0; tries < 3000 && seen < 100; tries++) { /* up to 30 s on a loaded machine */
        sleep_ms(10);
        char *on_disk = tu_read_file(configured);
        seen = on_disk ? tu_count(on_disk, "\"spooled_op\"") : 0;
        free(on_disk);
    }
    CHECK(seen == 100, "the continuous dump wrote the first events: %d", seen);
    record_n(later, 7);
    text = NULL;
    CHECK_OK(mlprof_dump_string(&text));
    CHECK(text && tu_count(text, "\"spooled_op\"") == 100 && tu_count(text, "\"later_op\"") == 7,
          "spooled and fresh events in the string: %d and %d", text ? tu_count(text, "\"spooled_op\"") : -1,
          text ? tu_count(text, "\"later_op\"") : -1);
    if (text)
        write_text(tu_path("string_continuous.json"), text);
    mlprof_free(text);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_set_config("continuous_dump", "0"));
    CHECK_OK(mlprof_dump(1));
    mlprof_span_destroy(op);
    mlprof_span_destroy(open);
    mlprof_span_destroy(spooled);
    mlprof_span_destroy(later);
}

/* ------------------------------------------------ RAF's memory profiler */

/* The rows of a memory trace after its two header lines (n of them), split
 * at commas (no field here needs quoting). */
static int trace_rows(const char *text, char rows[][8][64], int max)
{
    const char *p = strchr(text, '\n');
    p = p ? strchr(p + 1, '\n') : NULL;
    int n = 0;
    while (p && p[1] && n < max) {
        p++;
        int f = 0;
        size_t k = 0;
        memset(rows[n], 0, sizeof rows[n]);
        for (; *p && *p != '\n'; p++) {
            if (*p == ',' && f < 7) {
                f++;
                k = 0;
            } else if (k < 63) {
                rows[n][f][k++] = *p;
            }
        }
        n++;
        if (!*p)
            break;
    }
    return n;
}

static void expect_row(char row[8][64], const char *time, const char *op, const char *bytes, const char *used,
                       const char *alloc, const char *span, const char *scope, const char *tag)
{
    const char *want[8] = {time, op, bytes, used, alloc, span, scope, tag};
    for (int i = 0; i < 8; i++)
        CHECK(strcmp(row[i], want[i]) == 0, "field %d is \"%s\", want \"%s\" (%s %s)", i, row[i], want[i], op,
              bytes);
}

static void test_memory_profiler(void)
{
    const int gpu = MLPROF_DEVICE_CUDA(0);
    CHECK_OK(mlprof_set_clock(tu_clock, NULL));
    CHECK_OK(mlprof_set_config("filename", tu_path("memprof.json")));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_config("memory_history", "1024"));
    mlprof_span *layer = mlprof_task_create(NULL, "layer1");
    static char pool[4 << 20];
    char *w = pool, *x = pool + (1 << 20);
    tu_set_now(1000000); /* the trace begins at 1 ms */
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_scope_push("model");
    tu_set_now(2000000);
    mlprof_begin(layer);
    CHECK_OK(mlprof_mem_reserve(gpu, pool, sizeof pool));
    tu_set_now(3000000);
    CHECK_OK(mlprof_mem_alloc(gpu, w, 1 << 20, "w"));
    tu_set_now(4500000);
    CHECK_OK(mlprof_mem_alloc(gpu, x, 512 << 10, "x"));
    tu_set_now(5000000);
    mlprof_end(layer);
    mlprof_scope_pop();
    tu_set_now(6000000);
    CHECK_OK(mlprof_mem_free(gpu, w));
    CHECK_OK(mlprof_mem_free(gpu, (void *)0x1234)); /* never allocated */

    char *text = NULL;
    CHECK_OK(mlprof_mem_trace(gpu, &text));
    CHECK(text && strncmp(text, "# memory trace of cuda:0: 5 operations since the start or the last reset\n"
                                "time_ms,op,bytes,used_mb,allocated_mb,span,scope,tag\n", 126) == 0,
          "the header lines: %s", text);
    if (text)
        write_text(tu_path("mem_trace.txt"), text); /* read back by check_trace.py */
    static char rows[2048][8][64];
    int n = text ? trace_rows(text, rows, 2048) : 0;
    CHECK(n == 5, "five operations: %d", n);
    if (n == 5) {
        expect_row(rows[0], "1.000000", "reserve", "4194304", "0.000000", "4.000000", "layer1", "model:", "");
        expect_row(rows[1], "2.000000", "alloc", "1048576", "1.000000", "4.000000", "layer1", "model:", "w");
        expect_row(rows[2], "3.500000", "alloc", "524288", "1.500000", "4.000000", "layer1", "model:", "x");
        expect_row(rows[3], "5.000000", "free", "1048576", "0.500000", "4.000000", "", "", "w");
        expect_row(rows[4], "5.000000", "free", "0", "0.500000", "4.000000", "", "", "");
    }
    mlprof_free(text);
    mlprof_mem_info info;
    CHECK_OK(mlprof_mem_info_get(gpu, &info, sizeof info));
    CHECK(info.peak_used == (3u << 19) && info.peak_allocated == sizeof pool && info.allocated != info.used,
          "peaks before the reset: used %llu allocated %llu", (unsigned long long)info.peak_used,
          (unsigned long long)info.peak_allocated);

    /* the reset: peaks from the memory in use, the trace emptied, the rest kept */
    char *events_before = NULL, *events_after = NULL, *stats = NULL;
    CHECK_OK(mlprof_dump_string(&events_before));
    CHECK_OK(mlprof_mem_reset());
    CHECK_OK(mlprof_mem_info_get(gpu, &info, sizeof info));
    CHECK(info.peak_used == (512u << 10) && info.used == (512u << 10) && info.peak_allocated == sizeof pool &&
              info.allocs == 0 && info.unknown_frees == 0 && info.live_blocks == 1,
          "after the reset: peak %llu used %llu allocs %llu", (unsigned long long)info.peak_used,
          (unsigned long long)info.used, (unsigned long long)info.allocs);
    CHECK_OK(mlprof_mem_trace(gpu, &text));
    CHECK(text && strstr(text, ": 0 operations since") && trace_rows(text, rows, 2048) == 0, "the trace emptied: %s",
          text);
    mlprof_free(text);
    CHECK_OK(mlprof_dump_string(&events_after));
    CHECK(events_before && events_after && tu_count(events_after, "\"layer1\"") == 1 &&
              tu_count(events_after, "\"memory used (cuda:0)\"") == tu_count(events_before, "\"memory used (cuda:0)\""),
          "the trace's events are kept");
    mlprof_free(events_before);
    mlprof_free(events_after);
    CHECK_OK(mlprof_dumps(&stats, MLPROF_FORMAT_TABLE, MLPROF_SORT_TOTAL, 0, 0));
    CHECK(stats && strstr(stats, "layer1"), "the span statistics are kept");
    mlprof_free(stats);
    tu_set_now(7000000);
    CHECK_OK(mlprof_mem_free(gpu, x)); /* a block from before the reset still matches */
    CHECK_OK(mlprof_mem_trace(gpu, &text));
    n = text ? trace_rows(text, rows, 2048) : 0;
    CHECK(n == 1, "one operation since the reset: %d", n);
    if (n == 1)
        expect_row(rows[0], "6.000000", "free", "524288", "0.000000", "4.000000", "", "", "x");
    mlprof_free(text);

    /* bounded by memory_history, and said */
    for (int i = 0; i < 1500; i++) {
        CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, pool + i, 16, "small"));
        CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, pool + i));
    }
    CHECK_OK(mlprof_mem_trace(MLPROF_DEVICE_CPU, &text));
    n = text ? trace_rows(text, rows, 2048) : 0;
    CHECK(n == 1024 && strstr(text, ": 3000 operations since the start or the last reset; the 1976 earliest are "
                                    "left out (memory_history=1024 keeps the last ones)\n"),
          "the last 1024 of 3000 kept, the rest said: %d rows, %.200s", n, text ? text : "");
    if (n == 1024)
        CHECK(strcmp(rows[1023][1], "free") == 0 && strcmp(rows[1022][1], "alloc") == 0 &&
                  strcmp(rows[1022][3], "0.000015") == 0,
              "the last ones are kept: %s %s", rows[1022][1], rows[1022][3]);
    mlprof_free(text);
    CHECK_OK(mlprof_mem_trace(MLPROF_DEVICE_CUDA(5), &text));
    CHECK(text && strstr(text, "# memory trace of cuda:5: 0 operations") && trace_rows(text, rows, 2048) == 0,
          "a device never used: %s", text);
    mlprof_free(text);
    int rc = mlprof_mem_trace(-1, &text);
    CHECK(rc == MLPROF_EINVAL && text == NULL, "bad device: %s", mlprof_err_name(rc));
    rc = mlprof_mem_trace(MLPROF_DEVICE_MAX + 1, &text);
    CHECK(rc == MLPROF_EINVAL, "bad device: %s", mlprof_err_name(rc));
    rc = mlprof_mem_trace(0, NULL);
    CHECK(rc == MLPROF_EINVAL, "out NULL: %s", mlprof_err_name(rc));

    /* cuda:0's freed blocks are all gone from the history now: its picture
     * is still drawn (it once failed as "out of memory") */
    CHECK_OK(mlprof_dump(1));
    CHECK_OK(mlprof_set_clock(NULL, NULL));
    CHECK_OK(mlprof_set_config("profile_memory", "0"));
    CHECK_OK(mlprof_set_config("memory_history", "1M"));
    mlprof_span_destroy(layer);
}

/* ------------------------------------------------------ RAF's macros */

static int with_return(mlprof_domain *d, int x)
{
    MLPROF_WITH(d, "returns", "cat_ret", NULL, {
        if (x)
            return 7;
    });
    return 0;
}

static void test_with(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("with.json")));
    mlprof_domain *raf = mlprof_domain_create("raf");
    mlprof_domain *ops = mlprof_domain_create("raf_ops");
    CHECK_OK(mlprof_domain_set_class(ops, MLPROF_CLASS_OPERATOR));
    CHECK_OK(mlprof_set_config("profile_operator", "0"));
    int runs = 0;
    /* stopped: the code runs, nothing is recorded */
    MLPROF_WITH(raf, "while_stopped", NULL, NULL, runs++;);
    CHECK(runs == 1, "the code runs while stopped: %d", runs);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    char name[32], count[32];
    int n = 3;
    snprintf(name, sizeof name, "request_%d", n);
    snprintf(count, sizeof count, "Count: %d", n);
    runs = 0;
    MLPROF_WITH(raf, name, "MemoryRequest", count, {
        for (int i = 0, m = n; i < m; ++i) /* commas in the code */
            runs++;
        MLPROF_WITH(NULL, "inner", NULL, "nested", { runs++; });
    });
    CHECK(runs == 4, "the code ran once: %d", runs);
    /* two on one line */
    MLPROF_WITH(raf, "a", NULL, NULL, runs++;); MLPROF_WITH(raf, "b", NULL, NULL, runs++;);
    CHECK(runs == 6, "both ran: %d", runs);
    CHECK(with_return(raf, 1) == 7 && with_return(raf, 0) == 0, "return from inside");
    for (int i = 0; i < 5; i++)
        MLPROF_WITH(raf, "loop", NULL, NULL, {
            if (i == 0)
                continue;
            if (i == 2)
                break; /* the loop around the macro */
            runs++;
        });
    CHECK(runs == 7, "continue and break act on the loop around: %d", runs);
    MLPROF_WITH(raf, "jumps", NULL, NULL, { goto after; });
    runs += 100;
after:
    CHECK(runs == 7, "goto out of the code: %d", runs);
    if (runs == 7)
        MLPROF_WITH(raf, "unbraced_if", NULL, NULL, runs++;);
    else
        runs = -1;
    CHECK(runs == 8, "the body of an unbraced if, with an else: %d", runs);
    /* a filtered domain: the code runs, its arguments go nowhere */
    MLPROF_WITH(raf, "outer_filtered", NULL, NULL, {
        MLPROF_WITH(ops, "filtered", "cat_x", "args_x", runs++;);
    });
    CHECK(runs == 9, "the filtered code ran: %d", runs);
    CHECK(mlprof_begin_with(ops, "filtered", "c", "a") == NULL, "nothing begun in a filtered domain");
    mlprof_domain *got = mlprof_begin_with(NULL, "by_hand", "c", NULL);
    CHECK(got == mlprof_domain_create(NULL), "the default domain");
    mlprof_end_dynamic(got);

    /* the GPU form, nested in the CPU one */
    MLPROF_WITH(raf, "around_gpu", NULL, NULL, {
        MLPROF_WITH_GPU((void *)0x9, "gpu_block", "CudaCat", "Count: 1", {
            fake_cuda_gpu_busy(25.0);
            runs++;
        });
    });
    CHECK(runs == 10, "the GPU code ran: %d", runs);
    CHECK(compat_off_run() == 3, "under MLPROF_DISABLE the code runs once");
    CHECK_OK(mlprof_dump(1));
    CHECK(fake_cuda_events_alive() == 0, "every CUDA event destroyed: %d", fake_cuda_events_alive());
    /* stopped: the GPU form's code runs too */
    MLPROF_WITH_GPU(NULL, "gpu_stopped", NULL, NULL, runs++;);
    CHECK(runs == 11, "the GPU code runs while stopped: %d", runs);
    CHECK_OK(mlprof_set_config("profile_operator", "1"));
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    const char *mode = argc > 2 ? argv[2] : "main";
    if (strcmp(mode, "env") == 0 || strcmp(mode, "file") == 0) {
        test_keys_from_outside();
        return tu_finish(mode);
    }
    test_mxnet_keys();
    test_dump_to();
    test_dump_string();
    test_memory_profiler();
    test_with();
    return tu_finish("test_compat");
}
