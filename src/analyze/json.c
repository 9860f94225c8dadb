/*
 * json.c - the pull tokenizer of the trace reader. Strings are copied in runs
 * between escapes; numbers are gathered into a small buffer and converted
 * once. Errors name what was expected, where (see an_input_fail).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define MAX_DEPTH 256

/* At least n bytes available from pos, if the file has them. */
static int have(an_input *in, size_t n)
{
    if (in->len - in->pos >= n)
        return 1;
    an_input_fill(in);
    return in->len - in->pos >= n;
}

int an_json_expect(an_input *in, char c, const char *what)
{
    int got = an_json_peek(in);
    if (got == c) {
        in->pos++;
        return 0;
    }
    if (got < 0)
        return an_input_fail(in, "the file ends where %s was expected", what);
    return an_input_fail(in, "expected %s, found '%c'", what, got);
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static void put_utf8(mlprof__sb *out, unsigned cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18);
        b[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        b[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    mlprof__sb_put(out, b, n);
}

static int escape(an_input *in, mlprof__sb *out)
{
    if (!have(in, 2))
        return an_input_fail(in, "the file ends inside a string");
    char c = in->buf[in->pos + 1];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
        mlprof__sb_putc(out, to[k - from]);
        in->pos += 2;
        return 0;
    }
    if (c != 'u')
        return an_input_fail(in, "bad escape '\\%c' in a string", c);
    unsigned cp;
    if (!have(in, 6) || hex4(in->buf + in->pos + 2, &cp) != 0)
        return an_input_fail(in, "bad \\u escape in a string");
    in->pos += 6;
    if (cp >= 0xd800 && cp < 0xdc00) { /* a surrogate pair */
        unsigned lo;
        if (have(in, 6) && in->buf[in->pos] == '\\' && in->buf[in->pos + 1] == 'u' &&
            hex4(in->buf + in->pos + 2, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
            in->pos += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else {
            cp = 0xfffd;
        }
    } else if (cp >= 0xdc00 && cp < 0xe000) {
        cp = 0xfffd;
    }
    put_utf8(out, cp);
    return 0;
}

/* Bytes that end a run of plain string bytes: the quote, the backslash and
 * control characters. */
static const unsigned char k_string_stop[256] = {
    [0] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1, [9] = 1, [10] = 1,
    [11] = 1, [12] = 1, [13] = 1, [14] = 1, [15] = 1, [16] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1,
    [21] = 1, [22] = 1, [23] = 1, [24] = 1, [25] = 1, [26] = 1, [27] = 1, [28] = 1, [29] = 1, [30] = 1,
    [31] = 1, ['"'] = 1, ['\\'] = 1};

int an_json_string(an_input *in, mlprof__sb *out)
{
    mlprof__sb_reset(out);
    if (an_json_expect(in, '"', "a string") != 0)
        return -1;
    for (;;) {
        size_t start = in->pos, i = start;
        const char *b = in->buf;
        while (i < in->len && !k_string_stop[(unsigned char)b[i]])
            i++;
        mlprof__sb_put(out, b + start, i - start);
        in->pos = i;
        if (i == in->len) {
            if (an_input_fill(in) == 0)
                return an_input_fail(in, "the file ends inside a string");
            continue;
        }
        if (b[i] == '"') {
            in->pos++;
            return out->failed ? an_input_fail(in, "out of memory") : 0;
        }
        if (b[i] == '\\') {
            if (escape(in, out) != 0)
                return -1;
            continue;
        }
        return an_input_fail(in, "a control character (0x%02x) inside a string", (unsigned char)b[i]);
    }
}

static int number_char(int c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Gathers a number's text into tmp; also NaN and Infinity, which some writers emit. */
static int number_text(an_input *in, char *tmp, size_t size, size_t *n)
{
    *n = 0;
    if (an_json_peek(in) < 0)
        return an_input_fail(in, "the file ends where a number was expected");
    static const char *const words[] = {"NaN", "Infinity", "-Infinity"};
    char c0 = in->buf[in->pos];
    int maybe_word = c0 == 'N' || c0 == 'I' || (c0 == '-' && (in->pos + 1 >= in->len || in->buf[in->pos + 1] == 'I'));
    for (size_t w = 0; maybe_word && w < 3; w++) {
        size_t len = strlen(words[w]);
        if (have(in, len) && strncmp(in->buf + in->pos, words[w], len) == 0) {
            memcpy(tmp, in->buf + in->pos, len);
            tmp[len] = '\0';
            in->pos += len;
            *n = len;
            return 0;
        }
    }
    for (;;) {
        while (in->pos < in->len && number_char((unsigned char)in->buf[in->pos])) {
            if (*n + 1 >= size)
                return an_input_fail(in, "a number longer than %zu characters", size - 1);
            tmp[(*n)++] = in->buf[in->pos++];
        }
        if (in->pos < in->len || an_input_fill(in) == 0)
            break;
    }
    tmp[*n] = '\0';
    if (*n == 0)
        return an_input_fail(in, "expected a value, found '%c'", in->pos < in->len ? in->buf[in->pos] : '?');
    return 0;
}

/* Plain decimals (at most 15 significant digits, no exponent), the numbers of
 * nearly every trace: a 64-bit mantissa divided once by an exact power of
 * ten is the correctly rounded double, as strtod would give. 0 when tmp is
 * not such a number. */
static int fast_decimal(const char *tmp, size_t n, double *value, int64_t *integer, int *is_int)
{
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13,
                                   1e14, 1e15};
    const char *p = tmp, *end = tmp + n;
    int neg = *p == '-';
    p += neg;
    if (p == end || *p < '0' || *p > '9' || (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9'))
        return 0;
    uint64_t mant = 0;
    int digits = 0, frac = -1;
    for (; p < end; p++) {
        if (*p >= '0' && *p <= '9') {
            mant = mant * 10 + (uint64_t)(*p - '0');
            if (mant || frac >= 0)
                digits++;
            if (frac >= 0)
                frac++;
        } else if (*p == '.' && frac < 0 && p + 1 < end) {
            frac = 0;
        } else {
            return 0;
        }
    }
    if (digits > 15 || frac == 0 || frac > 15)
        return 0;
    double v = frac > 0 ? (double)mant / pow10[frac] : (double)mant;
    *value = neg ? -v : v;
    *is_int = frac < 0;
    *integer = neg ? -(int64_t)mant : (int64_t)mant;
    if (frac > 0)
        *integer = (int64_t)*value;
    return 1;
}

/* The length of the number at the read position when it lies whole in the
 * buffer (most do, and are read in place), else 0. */
static size_t number_in_place(const an_input *in)
{
    size_t i = in->pos;
    while (i < in->len && number_char((unsigned char)in->buf[i]))
        i++;
    return i < in->len ? i - in->pos : 0;
}

int an_json_number(an_input *in, double *value, int64_t *integer, int *is_int)
{
    size_t len = number_in_place(in);
    if (len && fast_decimal(in->buf + in->pos, len, value, integer, is_int)) {
        in->pos += len;
        return 0;
    }
    char tmp[80];
    size_t n;
    if (number_text(in, tmp, sizeof tmp, &n) != 0)
        return -1;
    if (fast_decimal(tmp, n, value, integer, is_int))
        return 0;
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (end != tmp + n)
        return an_input_fail(in, "bad number \"%s\"", tmp);
    *value = v;
    *is_int = 0;
    if (!strpbrk(tmp, ".eEIN")) {
        errno = 0;
        long long iv = strtoll(tmp, &end, 10);
        if (errno == 0 && end == tmp + n) {
            *integer = iv;
            *is_int = 1;
        }
    }
    if (!*is_int)
        *integer = isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0;
    return 0;
}

/* How many decimal digits [p, end) starts with. */
static size_t digit_run(const char *p, const char *end)
{
    size_t n = 0;
    while (p + n < end && p[n] >= '0' && p[n] <= '9')
        n++;
    return n;
}

int an_us_text_to_ns(const char *s, size_t n, int64_t *ns)
{
    const char *p = s, *end = s + n;
    int neg = p < end && *p == '-';
    p += neg;
    const char *ip = p;
    size_t ni = digit_run(p, end);
    p += ni;
    const char *fp = p;
    size_t nf = 0;
    if (p < end && *p == '.') {
        fp = ++p;
        nf = digit_run(p, end);
        p += nf;
    }
    if (ni + nf == 0)
        return -1;
    long exp10 = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = p < end && *p == '-';
        p += p < end && (*p == '-' || *p == '+');
        size_t ne = digit_run(p, end);
        if (ne == 0)
            return -1;
        for (size_t k = 0; k < ne; k++) {
            if (exp10 < 100000)
                exp10 = exp10 * 10 + (p[k] - '0');
        }
        p += ne;
        exp10 = eneg ? -exp10 : exp10;
    }
    if (p != end)
        return -1;
    /* the digits ni + nf long, the point after the first ni + exp10 + 3 of them */
    long point = (long)ni + exp10 + 3, total = (long)(ni + nf);
    uint64_t acc = 0;
    for (long k = 0; k < point; k++) {
        int d = k < total ? (k < (long)ni ? ip[k] : fp[k - (long)ni]) - '0' : 0;
        if (acc > (UINT64_C(0x7fffffffffffffff) - (uint64_t)d) / 10)
            return -1;
        acc = acc * 10 + (uint64_t)d;
        if (k >= total && acc == 0)
            break; /* zeros after zeros */
    }
    /* rounded half away from zero at the nanosecond: the next digit decides */
    if (point >= 0 && point < total) {
        int next = (point < (long)ni ? ip[point] : fp[point - (long)ni]) - '0';
        acc += next >= 5;
    }
    if (acc > UINT64_C(0x7fffffffffffffff))
        return -1;
    *ns = neg ? -(int64_t)acc : (int64_t)acc;
    return 0;
}

int an_us_double_to_ns(double us, int64_t *ns)
{
    double v = us * 1000.0;
    *ns = 0;
    if (isnan(v) || isinf(v))
        return AN_TIME_NOT_FINITE;
    if (!(v > -9.2e18 && v < 9.2e18))
        return AN_TIME_TOO_BIG;
    *ns = (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
    return AN_TIME_OK;
}

int an_json_time_ns_fit(an_input *in, int64_t *ns, int *fit)
{
    *fit = AN_TIME_OK;
    size_t len = number_in_place(in);
    if (len && an_us_text_to_ns(in->buf + in->pos, len, ns) == 0) {
        in->pos += len;
        return 0;
    }
    char tmp[80];
    size_t n;
    if (number_text(in, tmp, sizeof tmp, &n) != 0)
        return -1;
    if (an_us_text_to_ns(tmp, n, ns) == 0)
        return 0;
    /* what the exact reading refuses (NaN, Infinity, out of range), as the
     * nearest double */
    char *end;
    double v = strtod(tmp, &end);
    if (end != tmp + n)
        return an_input_fail(in, "bad number \"%s\"", tmp);
    *fit = an_us_double_to_ns(v, ns);
    return 0;
}

int an_json_time_ns(an_input *in, int64_t *ns)
{
    int fit;
    return an_json_time_ns_fit(in, ns, &fit);
}

static int literal(an_input *in, const char *word, mlprof__sb *raw)
{
    size_t n = strlen(word);
    if (!have(in, n) || strncmp(in->buf + in->pos, word, n) != 0)
        return an_input_fail(in, "expected a value");
    in->pos += n;
    if (raw)
        mlprof__sb_put(raw, word, n);
    return 0;
}

static int skip(an_input *in, mlprof__sb *raw, mlprof__sb *tmp, int depth)
{
    if (depth > MAX_DEPTH)
        return an_input_fail(in, "values nested deeper than %d", MAX_DEPTH);
    int c = an_json_peek(in);
    if (c == '"') {
        if (an_json_string(in, tmp) != 0)
            return -1;
        if (raw)
            mlprof__sb_json_str(raw, tmp->data ? tmp->data : "", tmp->len);
        return 0;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        in->pos++;
        if (raw)
            mlprof__sb_putc(raw, (char)c);
        if (an_json_peek(in) == close) {
            in->pos++;
            if (raw)
                mlprof__sb_putc(raw, close);
            return 0;
        }
        int more;
        do {
            if (c == '{') {
                if (an_json_key(in, tmp) != 0)
                    return -1;
                if (raw) {
                    mlprof__sb_json_str(raw, tmp->data ? tmp->data : "", tmp->len);
                    mlprof__sb_putc(raw, ':');
                }
            }
            if (skip(in, raw, tmp, depth + 1) != 0)
                return -1;
            more = an_json_next(in, close);
            if (more < 0)
                return -1;
            if (raw)
                mlprof__sb_putc(raw, more ? ',' : close);
        } while (more);
        return 0;
    }
    if (c == 't')
        return literal(in, "true", raw);
    if (c == 'f')
        return literal(in, "false", raw);
    if (c == 'n')
        return literal(in, "null", raw);
    char num[80];
    size_t n;
    if (number_text(in, num, sizeof num, &n) != 0)
        return -1;
    if (raw)
        mlprof__sb_put(raw, num, n);
    return 0;
}

int an_json_skip(an_input *in, mlprof__sb *raw)
{
    mlprof__sb tmp;
    mlprof__sb_init(&tmp);
    int rc = skip(in, raw, &tmp, 0);
    mlprof__sb_free(&tmp);
    return rc;
}

int an_json_open(an_input *in, char open, const char *what)
{
    if (an_json_expect(in, open, what) != 0)
        return -1;
    if (an_json_peek(in) == (open == '{' ? '}' : ']')) {
        in->pos++;
        return 0;
    }
    return 1;
}

int an_json_key(an_input *in, mlprof__sb *key)
{
    if (an_json_string(in, key) != 0)
        return -1;
    return an_json_expect(in, ':', "':' after a member name");
}

int an_json_next(an_input *in, char close)
{
    int c = an_json_peek(in);
    if (c == ',') {
        in->pos++;
        return 1;
    }
    if (c == close) {
        in->pos++;
        return 0;
    }
    if (c < 0)
        return an_input_fail(in, "the file ends where ',' or '%c' was expected", close);
    return an_input_fail(in, "expected ',' or '%c', found '%c'", close, c);
}
