/*
 * test_format.c - the exact bytes of the Chrome JSON writer (chrome.c) and of
 * sb.c's number and string formatting, which write every event of a trace
 * and were rewritten for speed: the fast paths (eight bytes at a time, one
 * reserve per event) must give what the plain ones gave. Strings with an
 * escape on each side of an eight-byte boundary, controls, DEL, valid and
 * broken UTF-8; numbers at their limits; every kind of event.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../src/export/export.h"

static int g_failures;

static void expect(const char *what, mlprof__sb *sb, const char *want)
{
    if (sb->failed || sb->len != strlen(want) || memcmp(sb->data, want, sb->len) != 0 || sb->data[sb->len]) {
        fprintf(stderr, "FAIL %s:\n  got  %.*s\n  want %s\n", what, (int)sb->len, sb->data ? sb->data : "", want);
        g_failures++;
    }
    mlprof__sb_reset(sb);
}

/* a literal and its length, NUL bytes inside included */
#define S(lit) lit, sizeof(lit) - 1

static void json_strings(mlprof__sb *sb)
{
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        {S(""), "\"\""},
        {S("relu"), "\"relu\""},
        {S("exactly8"), "\"exactly8\""},
        {S("sixteen_bytes_ok"), "\"sixteen_bytes_ok\""},
        {S("seven_\"quote_after"), "\"seven_\\\"quote_after\""},
        {S("eight__\"x"), "\"eight__\\\"x\""},
        {S("eight___\\y"), "\"eight___\\\\y\""},
        {S("tab\there\nnl\rcr"), "\"tab\\there\\nnl\\rcr\""},
        {S("\x01\x08\x0c\x1f"), "\"\\u0001\\u0008\\u000c\\u001f\""},
        {S("del\x7f ok"), "\"del\x7f ok\""},
        {S("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {S("long_plain\xc3\xa9_after_eight"), "\"long_plain\xc3\xa9_after_eight\""},
        {S("bad\xff\xc0\xed\xa0\x80"), "\"bad\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {S("cut\xe2\x82"), "\"cut\\ufffd\\ufffd\""},
        {S("nul\0in"), "\"nul\\u0000in\""},
        {S("12345678\"2345678\\"), "\"12345678\\\"2345678\\\\\""},
        {S("ab\""), "\"ab\\\"\""},
        {S("abc\n"), "\"abc\\n\""},
        {S("\tabcd"), "\"\\tabcd\""},
        {S("abcde\\f"), "\"abcde\\\\f\""},
        {S("0123456789\x01"), "\"0123456789\\u0001\""},
        {S("\x01" "123456789"), "\"\\u0001123456789\""},
        {S("\xc3\xa9t\xc3\xa9"), "\"\xc3\xa9t\xc3\xa9\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "json string %zu", i);
        mlprof__sb_json_str(sb, cases[i].in, cases[i].n);
        expect(what, sb, cases[i].out);
    }
    /* a NULL string of no bytes is an empty one */
    mlprof__sb_json_str(sb, NULL, 0);
    expect("json string NULL", sb, "\"\"");
}

static void numbers(mlprof__sb *sb)
{
    mlprof__sb_u64(sb, 0);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_u64(sb, 9);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_u64(sb, 10);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_u64(sb, 4294967295u);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_u64(sb, 4294967296u);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_u64(sb, UINT64_MAX);
    expect("u64", sb, "0 9 10 4294967295 4294967296 18446744073709551615");
    /* each side of the eight-digit groups */
    static const uint64_t edges[] = {99999999u,           100000000u,           1000000000000000ull,
                                     9999999999999999ull, 10000000000000000ull, 429496729600000000ull,
                                     9223372036854775808ull};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)edges[i]);
        mlprof__sb_u64(sb, edges[i]);
        expect("u64 edges", sb, want);
    }
    mlprof__sb_i64(sb, INT64_MIN);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_i64(sb, -1);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_i64(sb, INT64_MAX);
    expect("i64", sb, "-9223372036854775808 -1 9223372036854775807");
    mlprof__sb_us(sb, 0);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_us(sb, 7);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_us(sb, 1050);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_us(sb, 123456789012);
    mlprof__sb_putc(sb, ' ');
    mlprof__sb_us(sb, UINT64_MAX);
    expect("us", sb, "0.000 0.007 1.050 123456789.012 18446744073709551.615");
}

static void events(mlprof__sb *sb)
{
    int first = 1;
    mlprof__span_out s;
    memset(&s, 0, sizeof s);
    s.name = "conv\"2d";
    s.name_len = 7;
    s.domain = "ops";
    s.kind = MLPROF__OUT_TASK;
    s.begin_ns = 1000123456;
    s.end_ns = 1000223457;
    s.pid = 42;
    s.tid = -7;
    s.args = "\"batch\":3,\"dtype\":\"f32\"";
    s.args_len = strlen(s.args);
    mlprof__chrome_span(sb, &first, &s);
    expect("span", sb,
           "{\"ph\":\"X\",\"name\":\"conv\\\"2d\",\"cat\":\"ops\",\"pid\":42,\"tid\":-7,\"ts\":1000123.456,"
           "\"dur\":100.001,\"args\":{\"batch\":3,\"dtype\":\"f32\"}}");
    s.unfinished = 1;
    s.args_len = 0;
    s.domain = NULL;
    mlprof__chrome_span(sb, &first, &s);
    expect("span unfinished, no domain", sb,
           ",\n{\"ph\":\"X\",\"name\":\"conv\\\"2d\",\"pid\":42,\"tid\":-7,\"ts\":1000123.456,\"dur\":100.001,"
           "\"args\":{\"unfinished\":true}}");
    s.kind = MLPROF__OUT_FRAME;
    s.domain = "d";
    s.frame_id = 18446744073709551615u;
    s.args = "\"k\":1";
    s.args_len = 5;
    mlprof__chrome_span(sb, &first, &s);
    expect("frame", sb,
           ",\n{\"ph\":\"b\",\"name\":\"conv\\\"2d\",\"cat\":\"d\",\"pid\":42,\"tid\":-7,\"id\":\"18446744073709551615\","
           "\"ts\":1000123.456,\"args\":{\"k\":1,\"unfinished\":true}},\n"
           "{\"ph\":\"e\",\"name\":\"conv\\\"2d\",\"cat\":\"d\",\"pid\":42,\"tid\":-7,\"id\":\"18446744073709551615\","
           "\"ts\":1000223.457}");
    mlprof__chrome_instant(sb, &first, "mark", 4, "dom", 5, 2, 1, 2, NULL, 0);
    mlprof__chrome_instant(sb, &first, "mark", 4, NULL, 5, 9, 1, 2, "\"a\":\"b\"", 7);
    expect("instants", sb,
           ",\n{\"ph\":\"i\",\"name\":\"mark\",\"cat\":\"dom\",\"pid\":1,\"tid\":2,\"ts\":0.005,\"s\":\"t\"},\n"
           "{\"ph\":\"i\",\"name\":\"mark\",\"pid\":1,\"tid\":2,\"ts\":0.005,\"s\":\"p\",\"args\":{\"a\":\"b\"}}");
    mlprof__chrome_flow(sb, &first, 's', 77, "launch", "cuda", 2000, 3, 4);
    mlprof__chrome_flow(sb, &first, 'f', 77, "launch", "cuda", 3000, 3, 5);
    expect("flows", sb,
           ",\n{\"ph\":\"s\",\"name\":\"launch\",\"cat\":\"cuda\",\"pid\":3,\"tid\":4,\"ts\":2.000,\"id\":77},\n"
           "{\"ph\":\"f\",\"name\":\"launch\",\"cat\":\"cuda\",\"pid\":3,\"tid\":5,\"ts\":3.000,\"id\":77,\"bp\":\"e\"}");
    mlprof__chrome_counter(sb, &first, "mem", "m", 1001, 0, 1, -5, 6, 6);
    mlprof__chrome_counter(sb, &first, "power", "m", 1001, 0.1, 0, 0, 6, 6);
    mlprof__chrome_counter(sb, &first, "bad", "m", 1001, NAN, 0, 0, 6, 6);
    expect("counters", sb,
           ",\n{\"ph\":\"C\",\"name\":\"mem\",\"cat\":\"m\",\"pid\":6,\"tid\":6,\"ts\":1.001,\"args\":{\"value\":-5}},\n"
           "{\"ph\":\"C\",\"name\":\"power\",\"cat\":\"m\",\"pid\":6,\"tid\":6,\"ts\":1.001,\"args\":{\"value\":0.1}},\n"
           "{\"ph\":\"C\",\"name\":\"bad\",\"cat\":\"m\",\"pid\":6,\"tid\":6,\"ts\":1.001,\"args\":{\"value\":null}}");
    mlprof__chrome_thread_meta(sb, &first, 6, 8, "worker \"1\"", 3);
    mlprof__chrome_process_meta(sb, &first, 6, "train.py");
    expect("metadata", sb,
           ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":6,\"tid\":8,\"args\":{\"name\":\"worker \\\"1\\\"\"}},\n"
           "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":6,\"tid\":8,\"args\":{\"sort_index\":3}},\n"
           "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":6,\"tid\":6,\"args\":{\"name\":\"train.py\"}}");
}

/* The members the collector writes a span's arguments with give the bytes
 * of the calls they replace. */
static void members(mlprof__sb *sb)
{
    static const char *const keys[] = {"batch", "k", "", "needs \"escaping\"\n", "a_key_longer_than_eight"};
    static const double doubles[] = {0.5, -3.0, 1e300, 0.1, 123456.789};
    mlprof__sb want;
    mlprof__sb_init(&want);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t klen = strlen(keys[k]);
        for (int kind = 0; kind < 3; kind++) {
            for (int i = 0; i < 5; i++) {
                const char *str = keys[(k + (size_t)i) % 5];
                int64_t iv = i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : (int64_t)i * -77;
                if (want.len)
                    mlprof__sb_putc(&want, ',');
                mlprof__sb_json_str(&want, keys[k], klen);
                mlprof__sb_putc(&want, ':');
                if (kind == 0) {
                    mlprof__sb_i64(&want, iv);
                    mlprof__sb_member_i64(sb, keys[k], klen, iv);
                } else if (kind == 1) {
                    mlprof__sb_json_str(&want, str, strlen(str));
                    mlprof__sb_member_str(sb, keys[k], klen, str, strlen(str));
                } else {
                    mlprof__sb_double(&want, doubles[i]);
                    mlprof__sb_member_double(sb, keys[k], klen, doubles[i]);
                }
            }
        }
    }
    mlprof__sb_member_str(sb, "nothing", 7, NULL, 0); /* a NULL value of no bytes: "" */
    mlprof__sb_puts(&want, ",\"nothing\":\"\"");
    expect("members", sb, want.data);
    mlprof__sb_free(&want);
}

/* A long name full of characters to escape: the room reserved for an event
 * is its worst case, and the buffer grows to it. */
static void worst_case(mlprof__sb *sb)
{
    char name[3000];
    memset(name, 0x01, sizeof name);
    int first = 1;
    mlprof__chrome_instant(sb, &first, name, sizeof name, NULL, 0, 0, 0, 0, NULL, 0);
    size_t want = strlen("{\"ph\":\"i\",\"name\":\"\",\"pid\":0,\"tid\":0,\"ts\":0.000,\"s\":\"g\"}") + 6 * sizeof name;
    if (sb->failed || sb->len != want) {
        fprintf(stderr, "FAIL worst case: %zu bytes, want %zu\n", sb->len, want);
        g_failures++;
    }
    mlprof__sb_reset(sb);
}

int main(void)
{
    mlprof__sb sb;
    mlprof__sb_init(&sb);
    json_strings(&sb);
    numbers(&sb);
    events(&sb);
    members(&sb);
    worst_case(&sb);
    mlprof__sb_free(&sb);
    if (g_failures) {
        fprintf(stderr, "%d failure(s)\n", g_failures);
        return 1;
    }
    printf("format: all checks passed\n");
    return 0;
}
