/*
 * test_sinks.c - the collector's choice of trace sink and compression per
 * trace (keys format and compress, or the file name), the gzip spool read
 * back at every dump of a continuous trace, and a gzip trace without zlib.
 * Run with "nozlib" as the second argument: MLPROF_ZLIB_LIBRARY names a file
 * that is not there.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/common/gz.h"
#include "testutil.h"

static mlprof_domain *g_dom;
static mlprof_span *g_span, *g_open;

static void record(int n)
{
    for (int i = 0; i < n; i++) {
        mlprof_begin(g_span);
        mlprof_arg_int("i", i);
        mlprof_end(g_span);
    }
}

/* The file's bytes (its length in *len); NULL if it cannot be read. */
static char *read_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

/* A gzip file's text (plain, NUL-terminated); NULL when it is not whole gzip. */
static char *inflated(const char *path)
{
    size_t n;
    char *raw = read_bytes(path, &n);
    if (!raw)
        return NULL;
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    int rc = mlprof__gz_inflate(raw, n, &sb);
    free(raw);
    if (rc != MLPROF_OK || sb.failed) {
        fprintf(stderr, "%s: %s\n", path, mlprof_last_error());
        mlprof__sb_free(&sb);
        return NULL;
    }
    mlprof__sb_putc(&sb, '\0');
    return mlprof__sb_take(&sb);
}

static int is_gzip(const char *path)
{
    size_t n;
    unsigned char *p = (unsigned char *)read_bytes(path, &n);
    int yes = p && n > 2 && p[0] == 0x1f && p[1] == 0x8b;
    free(p);
    return yes;
}

/* The first byte of the file: '{' for JSON, 0x0a for a protobuf Trace. */
static int first_byte(const char *path)
{
    size_t n;
    unsigned char *p = (unsigned char *)read_bytes(path, &n);
    int b = p && n ? p[0] : -1;
    free(p);
    return b;
}

/* A finished trace of n spans written to name under the given keys. */
static void trace_to(const char *name, const char *format, const char *compress, int n)
{
    CHECK_OK(mlprof_set_config("filename", tu_path(name)));
    CHECK_OK(mlprof_set_config("format", format));
    CHECK_OK(mlprof_set_config("compress", compress));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record(n);
    CHECK_OK(mlprof_dump(1));
}

/* A whole JSON trace with n spans "s" and, open ones being shown, unfinished. */
static void check_json(const char *what, const char *text, int n, int open)
{
    CHECK(text != NULL, "%s: readable", what);
    if (!text)
        return;
    size_t len = strlen(text);
    CHECK(strncmp(text, "{\"traceEvents\":[\n", 17) == 0, "%s: the head: %.40s", what, text);
    CHECK(len > 4 && strcmp(text + len - 4, "}\n}\n") == 0, "%s: the footer", what);
    CHECK(tu_count(text, "\"name\":\"s\"") == n, "%s: %d spans, want %d", what, tu_count(text, "\"name\":\"s\""), n);
    CHECK(tu_count(text, "\"unfinished\":true") == open, "%s: %d open, want %d", what,
          tu_count(text, "\"unfinished\":true"), open);
}

/* Format and compression come from the keys, or at auto from the name. */
static void choice(void)
{
    trace_to("plain.json", "auto", "auto", 10);
    CHECK(first_byte(tu_path("plain.json")) == '{', "a .json name: JSON");

    trace_to("zipped.json.gz", "auto", "auto", 20);
    CHECK(is_gzip(tu_path("zipped.json.gz")), "a .json.gz name: gzip");
    char *text = inflated(tu_path("zipped.json.gz"));
    check_json("zipped.json.gz", text, 20, 0);
    free(text);

    trace_to("forced.json", "auto", "gzip", 5);
    CHECK(is_gzip(tu_path("forced.json")), "compress=gzip whatever the name");

    trace_to("plain.json.gz", "auto", "none", 5);
    CHECK(first_byte(tu_path("plain.json.gz")) == '{', "compress=none whatever the name");

    trace_to("proto.pftrace", "auto", "auto", 5);
    CHECK(first_byte(tu_path("proto.pftrace")) == 0x0a, "a .pftrace name: Perfetto's protobuf");
    trace_to("proto.perfetto-trace", "auto", "auto", 5);
    CHECK(first_byte(tu_path("proto.perfetto-trace")) == 0x0a, "a .perfetto-trace name: protobuf");

    trace_to("json_anyway.pftrace", "json", "auto", 5);
    CHECK(first_byte(tu_path("json_anyway.pftrace")) == '{', "format=json whatever the name");
    trace_to("proto_anyway.json", "perfetto", "auto", 5);
    CHECK(first_byte(tu_path("proto_anyway.json")) == 0x0a, "format=perfetto whatever the name");

    trace_to("proto.pftrace.gz", "auto", "auto", 5);
    text = inflated(tu_path("proto.pftrace.gz"));
    CHECK(text && (unsigned char)text[0] == 0x0a, "a .pftrace.gz name: protobuf in gzip");
    free(text);
}

/* A gzip trace dumped while it goes on: each dump a whole .gz whose text is
 * the trace so far, the open span shown; mlprof_dump_string gives the same
 * text, plain. */
static void continuous(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("cont.json.gz")));
    CHECK_OK(mlprof_set_config("format", "auto"));
    CHECK_OK(mlprof_set_config("compress", "auto"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(g_open);
    for (int round = 1; round <= 3; round++) {
        record(1000);
        CHECK_OK(mlprof_dump(0));
        char what[64];
        snprintf(what, sizeof what, "dump %d", round);
        char *text = inflated(tu_path("cont.json.gz"));
        check_json(what, text, 1000 * round, 1);
        char *str = NULL;
        CHECK_OK(mlprof_dump_string(&str));
        snprintf(what, sizeof what, "dump_string %d", round);
        check_json(what, str, 1000 * round, 1);
        free(text);
        mlprof_free(str);
    }
    mlprof_end(g_open);
    CHECK_OK(mlprof_dump(1));
    char *text = inflated(tu_path("cont.json.gz"));
    check_json("the final dump", text, 3000, 0);
    CHECK(text && tu_count(text, "\"name\":\"open\"") == 1, "the span that was open, once");
    free(text);
}

/* mlprof_dump_string's text, checked as a whole JSON trace. */
static void check_string(const char *what, int n, int open)
{
    char *str = NULL;
    CHECK_OK(mlprof_dump_string(&str));
    check_json(what, str, n, open);
    mlprof_free(str);
}

/* mlprof_dump_string gives Chrome JSON whatever the file's format (RAF's
 * get() and MegEngine's get_profile() parse it): a Perfetto trace, chosen by
 * name or by key, gzip or not, answers from the JSON copy the collector
 * keeps beside it with json_copy on (without, it refuses, naming the key),
 * the open span shown; its file stays protobuf, dumped in
 * between or not, and a new trace starts its copy anew. A gzip JSON trace
 * answers plain text. With continuous_dump too: whenever its thread drains,
 * the answer is the same. */
static void string_any_format(void)
{
    /* without json_copy a Perfetto trace keeps no JSON: dump_string says so, the trace is still written */
    CHECK_OK(mlprof_set_config("filename", tu_path("nocopy.pftrace")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record(10);
    char *none = NULL;
    CHECK(mlprof_dump_string(&none) == MLPROF_EUNSUPPORTED && none == NULL &&
              strstr(mlprof_last_error(), "json_copy=1"),
          "dump_string of a Perfetto trace without json_copy: %s", mlprof_last_error());
    CHECK_OK(mlprof_dump(1));
    CHECK(first_byte(tu_path("nocopy.pftrace")) == 0x0a, "the Perfetto trace is written without a copy");

    CHECK_OK(mlprof_set_config("json_copy", "1"));
    static const char *const cases[][4] = {
        {"str.pftrace", "auto", "auto", "0"},
        {"str.pftrace.gz", "auto", "auto", "0"},
        {"str_key.json", "perfetto", "auto", "0"},
        {"str_cont.pftrace", "auto", "auto", "1"},
        {"str.json.gz", "auto", "auto", "0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *name = cases[i][0];
        int perfetto = strstr(name, ".pftrace") || strcmp(cases[i][1], "perfetto") == 0;
        int gz = strstr(name, ".gz") != NULL;
        char what[128];
        CHECK_OK(mlprof_set_config("filename", tu_path(name)));
        CHECK_OK(mlprof_set_config("format", cases[i][1]));
        CHECK_OK(mlprof_set_config("compress", cases[i][2]));
        CHECK_OK(mlprof_set_config("continuous_dump", cases[i][3]));
        CHECK_OK(mlprof_set_config("dump_period", "0.001"));
        CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
        mlprof_begin(g_open);
        record(1500);
        snprintf(what, sizeof what, "%s: dump_string before any dump", name);
        check_string(what, 1500, 1);
        CHECK_OK(mlprof_dump(0));
        record(500);
        snprintf(what, sizeof what, "%s: dump_string after a dump", name);
        check_string(what, 2000, 1);
        mlprof_end(g_open);
        CHECK_OK(mlprof_dump(1));
        CHECK_OK(mlprof_set_config("continuous_dump", "0"));
        if (gz) {
            char *text = inflated(tu_path(name));
            CHECK(text && (perfetto ? (unsigned char)text[0] == 0x0a : text[0] == '{'), "%s: gzip of the format", name);
            free(text);
        } else {
            CHECK(first_byte(tu_path(name)) == (perfetto ? 0x0a : '{'), "%s: the file keeps its format", name);
        }
        CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
        record(10);
        snprintf(what, sizeof what, "%s: dump_string of the next trace", name);
        check_string(what, 10, 0);
        CHECK_OK(mlprof_dump(1));
    }
    CHECK_OK(mlprof_set_config("json_copy", "0"));
}

/* No zlib: a gzip trace cannot be written; the dump says why, naming zlib,
 * and writes nothing; a plain trace still can be. */
static void no_zlib(void)
{
    remove(tu_path("nozlib.json.gz")); /* an earlier run's, which would pass for this one's */
    CHECK_OK(mlprof_set_config("filename", tu_path("nozlib.json.gz")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record(10);
    int rc = mlprof_dump(0);
    CHECK(rc != MLPROF_OK, "the dump fails: %s", mlprof_err_name(rc));
    CHECK(strstr(mlprof_last_error(), "zlib") != NULL, "the message names zlib: %s", mlprof_last_error());
    FILE *f = fopen(tu_path("nozlib.json.gz"), "rb");
    CHECK(f == NULL, "no file written");
    if (f)
        fclose(f);
    rc = mlprof_dump(1);
    CHECK(rc != MLPROF_OK, "the final dump fails too: the events are kept, not written as something else");
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("filename", tu_path("nozlib.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record(7);
    CHECK_OK(mlprof_dump(1));
    char *text = tu_read_file(tu_path("nozlib.json"));
    check_json("plain after a clear", text, 7, 0);
    free(text);
}

/* The memory outputs at "auto" take the trace's name less its extension, and
 * less ".gz" before it: mem.json.gz gives mem.memory.csv, as mem.json does. */
static void memory_beside_gz(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("mem.json.gz")));
    CHECK_OK(mlprof_set_config("format", "auto"));
    CHECK_OK(mlprof_set_config("compress", "auto"));
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    static char block[64];
    CHECK_OK(mlprof_mem_alloc(0, block, sizeof block, "block"));
    CHECK_OK(mlprof_mem_free(0, block));
    CHECK_OK(mlprof_dump(1));
    CHECK(access(tu_path("mem.memory.csv"), F_OK) == 0, "mem.json.gz: the memory CSV is mem.memory.csv");
    CHECK(access(tu_path("mem.memory_flow.svg"), F_OK) == 0, "mem.json.gz: the picture is mem.memory_flow.svg");
    CHECK(access(tu_path("mem.json.memory.csv"), F_OK) != 0, "mem.json.gz: no mem.json.memory.csv");
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    int nozlib = argc > 2 && strcmp(argv[2], "nozlib") == 0;
    if (nozlib)
        setenv("MLPROF_ZLIB_LIBRARY", "/nonexistent/libz.so.1", 1);
    CHECK_OK(mlprof_set_config("dump_at_exit", "false"));
    g_dom = mlprof_domain_create("sinks");
    g_span = mlprof_task_create(g_dom, "s");
    g_open = mlprof_task_create(g_dom, "open");
    if (nozlib) {
        no_zlib();
        return tu_finish("test_sinks nozlib");
    }
    choice();
    continuous();
    memory_beside_gz();
    string_any_format();
    return tu_finish("test_sinks");
}
