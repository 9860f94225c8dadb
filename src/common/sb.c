/*
 * sb.c - a growable string buffer, with the JSON and human-readable number
 * formatting that every writer of mlprof shares.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fmt.h"

void mlprof__sb_init(mlprof__sb *sb) { memset(sb, 0, sizeof *sb); }

void mlprof__sb_free(mlprof__sb *sb)
{
    mlprof__free(sb->data);
    mlprof__sb_init(sb);
}

void mlprof__sb_reset(mlprof__sb *sb)
{
    sb->len = 0;
    sb->failed = 0;
    if (sb->data)
        sb->data[0] = '\0';
}

int mlprof__sb_reserve(mlprof__sb *sb, size_t extra)
{
    if (sb->failed)
        return 0;
    if (MLPROF_LIKELY(extra < sb->cap - sb->len)) /* cap > len always holds once allocated */
        return 1;
    if (extra > SIZE_MAX / 4 - sb->len) {
        sb->failed = 1;
        return 0;
    }
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    char *p = mlprof__realloc(sb->data, cap);
    if (!p) {
        sb->failed = 1;
        return 0;
    }
    sb->data = p;
    sb->cap = cap;
    return 1;
}

void mlprof__sb_put(mlprof__sb *sb, const char *s, size_t n)
{
    if (!mlprof__sb_reserve(sb, n))
        return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void mlprof__sb_puts(mlprof__sb *sb, const char *s) { mlprof__sb_put(sb, s, strlen(s)); }

void mlprof__sb_putc(mlprof__sb *sb, char c)
{
    if (!mlprof__sb_reserve(sb, 1))
        return;
    sb->data[sb->len++] = c;
    sb->data[sb->len] = '\0';
}

void mlprof__sb_vprintf(mlprof__sb *sb, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0 || !mlprof__sb_reserve(sb, (size_t)n))
        return;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void mlprof__sb_printf(mlprof__sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mlprof__sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

const char mlprof__fmt_pairs[200] = {
#define MLPROF_I_PAIRS(t) t, '0', t, '1', t, '2', t, '3', t, '4', t, '5', t, '6', t, '7', t, '8', t, '9'
    MLPROF_I_PAIRS('0'), MLPROF_I_PAIRS('1'), MLPROF_I_PAIRS('2'), MLPROF_I_PAIRS('3'), MLPROF_I_PAIRS('4'),
    MLPROF_I_PAIRS('5'), MLPROF_I_PAIRS('6'), MLPROF_I_PAIRS('7'), MLPROF_I_PAIRS('8'), MLPROF_I_PAIRS('9'),
#undef MLPROF_I_PAIRS
};

const unsigned char mlprof__fmt_json_special_table[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10 */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x20 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x30 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x40 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* 0x50 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x60 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x70 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x80 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x90 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xa0 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xb0 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xc0 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xd0 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xe0 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0xf0 */
};

char *mlprof__fmt_json_rest(char *p, const unsigned char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (!mlprof__fmt_json_special(c)) {
            *p++ = (char)c;
            i++;
        } else if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
            i++;
        } else if (c < 0x20) {
            *p++ = '\\';
            if (c == '\n') {
                *p++ = 'n';
            } else if (c == '\t') {
                *p++ = 't';
            } else if (c == '\r') {
                *p++ = 'r';
            } else {
                memcpy(p, "u00", 3);
                p[3] = hex[c >> 4];
                p[4] = hex[c & 15];
                p += 5;
            }
            i++;
        } else {
            size_t len = utf8_seq_len(s + i, n - i);
            if (len == 0) {
                memcpy(p, "\\ufffd", 6);
                p += 6;
                i++;
            } else {
                memcpy(p, s + i, len);
                p += len;
                i += len;
            }
        }
    }
    return p;
}

void mlprof__sb_json_str(mlprof__sb *sb, const char *s, size_t n)
{
    if (n > (SIZE_MAX - 2) / 6 || !mlprof__sb_reserve(sb, MLPROF__FMT_JSON_STR_MAX(n))) {
        sb->failed = 1;
        return;
    }
    sb->len = (size_t)(mlprof__fmt_json_str(sb->data + sb->len, s, n) - sb->data);
    sb->data[sb->len] = '\0';
}

void mlprof__sb_u64(mlprof__sb *sb, uint64_t v)
{
    if (!mlprof__sb_reserve(sb, MLPROF__FMT_U64_MAX))
        return;
    sb->len = (size_t)(mlprof__fmt_u64(sb->data + sb->len, v) - sb->data);
    sb->data[sb->len] = '\0';
}

void mlprof__sb_i64(mlprof__sb *sb, int64_t v)
{
    if (!mlprof__sb_reserve(sb, MLPROF__FMT_I64_MAX + 1))
        return;
    sb->len = (size_t)(mlprof__fmt_i64(sb->data + sb->len, v) - sb->data);
    sb->data[sb->len] = '\0';
}

void mlprof__sb_us(mlprof__sb *sb, uint64_t ns)
{
    if (!mlprof__sb_reserve(sb, MLPROF__FMT_US_MAX))
        return;
    sb->len = (size_t)(mlprof__fmt_us(sb->data + sb->len, ns) - sb->data);
    sb->data[sb->len] = '\0';
}

/* Room for a member's comma, key and colon and a value of at most value_max
 * bytes; returns where the value goes, or NULL (the buffer failed). */
static char *member_start(mlprof__sb *sb, const char *key, size_t key_len, size_t value_max)
{
    if (key_len > SIZE_MAX / 16 || value_max > SIZE_MAX / 4 ||
        !mlprof__sb_reserve(sb, 2 + MLPROF__FMT_JSON_STR_MAX(key_len) + value_max)) {
        sb->failed = 1;
        return NULL;
    }
    char *p = sb->data + sb->len;
    if (sb->len)
        *p++ = ',';
    p = mlprof__fmt_json_str(p, key, key_len);
    *p++ = ':';
    return p;
}

static void member_end(mlprof__sb *sb, char *p)
{
    sb->len = (size_t)(p - sb->data);
    sb->data[sb->len] = '\0';
}

void mlprof__sb_member_i64(mlprof__sb *sb, const char *key, size_t key_len, int64_t v)
{
    char *p = member_start(sb, key, key_len, MLPROF__FMT_I64_MAX);
    if (p)
        member_end(sb, mlprof__fmt_i64(p, v));
}

void mlprof__sb_member_str(mlprof__sb *sb, const char *key, size_t key_len, const char *s, size_t n)
{
    char *p = n <= SIZE_MAX / 32 ? member_start(sb, key, key_len, MLPROF__FMT_JSON_STR_MAX(n)) : NULL;
    if (p)
        member_end(sb, mlprof__fmt_json_str(p, s, n));
    else
        sb->failed = 1;
}

void mlprof__sb_member_double(mlprof__sb *sb, const char *key, size_t key_len, double v)
{
    char *p = member_start(sb, key, key_len, 0);
    if (!p)
        return;
    member_end(sb, p);
    mlprof__sb_double(sb, v); /* the shortest form: snprintf's, rare in a trace */
}

void mlprof__sb_double(mlprof__sb *sb, double v)
{
    if (!isfinite(v)) {
        mlprof__sb_puts(sb, "null");
        return;
    }
    if (fabs(v) < 9.0e15 && v == (double)(int64_t)v) { /* the range first: the cast needs it */
        mlprof__sb_i64(sb, (int64_t)v);
        return;
    }
    char tmp[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    mlprof__sb_puts(sb, tmp);
}

void mlprof__sb_duration(mlprof__sb *sb, uint64_t ns)
{
    if (ns < 1000)
        mlprof__sb_printf(sb, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        mlprof__sb_printf(sb, "%.3f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        mlprof__sb_printf(sb, "%.3f ms", (double)ns / 1e6);
    else
        mlprof__sb_printf(sb, "%.3f s", (double)ns / 1e9);
}

char *mlprof__sb_take(mlprof__sb *sb)
{
    if (!sb->data && !sb->failed)
        mlprof__sb_reserve(sb, 0);
    char *p = sb->data;
    if (p)
        p[sb->len] = '\0';
    mlprof__sb_init(sb);
    return p;
}

/* U+FFFD, put where a byte is not valid UTF-8 or a character cannot be written */
static const char replacement[] = "\xef\xbf\xbd";

/* Whether the valid UTF-8 character at s (len bytes) is one XML 1.0 allows
 * as text: among the controls only tab, line feed and carriage return;
 * neither U+FFFE nor U+FFFF. */
static int xml_allows(const unsigned char *s, size_t len)
{
    if (s[0] < 0x20)
        return s[0] == '\t' || s[0] == '\n' || s[0] == '\r';
    return !(len == 3 && s[0] == 0xef && s[1] == 0xbf && (s[2] == 0xbe || s[2] == 0xbf));
}

void mlprof__sb_xml(mlprof__sb *sb, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] >= 0x20 && s[run] < 0x80 && !strchr("&<>\"'", s[run]))
            run++;
        if (run > i) {
            mlprof__sb_put(sb, str + i, run - i);
            i = run;
            continue;
        }
        switch (s[i]) {
        case '&': mlprof__sb_puts(sb, "&amp;"); i++; continue;
        case '<': mlprof__sb_puts(sb, "&lt;"); i++; continue;
        case '>': mlprof__sb_puts(sb, "&gt;"); i++; continue;
        case '"': mlprof__sb_puts(sb, "&quot;"); i++; continue;
        case '\'': mlprof__sb_puts(sb, "&apos;"); i++; continue;
        default: break;
        }
        size_t len = utf8_seq_len(s + i, n - i);
        if (len == 0) {
            mlprof__sb_puts(sb, replacement); /* one for each stray byte */
            i++;
        } else if (!xml_allows(s + i, len)) {
            mlprof__sb_puts(sb, replacement); /* one for the whole character */
            i += len;
        } else {
            mlprof__sb_put(sb, str + i, len);
            i += len;
        }
    }
}

void mlprof__sb_csv(mlprof__sb *sb, const char *str)
{
    if (!str)
        return;
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    int quote = strpbrk(str, ",\"\n\r") != NULL;
    if (quote)
        mlprof__sb_putc(sb, '"');
    size_t i = 0;
    while (i < n) {
        size_t len = utf8_seq_len(s + i, n - i);
        if (len == 0) {
            mlprof__sb_puts(sb, replacement);
            i++;
            continue;
        }
        if (s[i] == '"')
            mlprof__sb_putc(sb, '"');
        mlprof__sb_put(sb, str + i, len);
        i += len;
    }
    if (quote)
        mlprof__sb_putc(sb, '"');
}

void mlprof__sb_bytes(mlprof__sb *out, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        mlprof__sb_printf(out, "%llu B", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    mlprof__sb_printf(out, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
}
