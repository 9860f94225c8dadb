/*
 * fmt.h - the number and JSON string formatting of the trace writers, as
 * functions that write at a pointer into room already reserved
 * (mlprof__sb_reserve) and return the end: a writer reserves once per event
 * and makes no call per field. sb.c's mlprof__sb_u64, _us, _json_str... are
 * these with a reserve around them, so both give the same bytes.
 */
#ifndef MLPROF_FMT_H
#define MLPROF_FMT_H

#include <stdint.h>
#include <string.h>

#include "common.h"

/* The writers are a few instructions each: inlined even where the compiler
 * would rather call them (a call costs as much as the string it copies). */
#if defined(__GNUC__)
#define MLPROF_I_FMT static inline __attribute__((always_inline))
#else
#define MLPROF_I_FMT static inline
#endif

/* The most bytes each writer writes. */
#define MLPROF__FMT_U64_MAX 20
#define MLPROF__FMT_I64_MAX 20
#define MLPROF__FMT_US_MAX 21 /* 17 digits (2^64 ns / 1000), '.', 3 digits */
/* a JSON string of n bytes: its quotes, and at most 6 bytes per byte ("\u001f", "\ufffd") */
#define MLPROF__FMT_JSON_STR_MAX(n) (6 * (size_t)(n) + 2)

extern const char mlprof__fmt_pairs[200];

MLPROF_I_FMT unsigned mlprof__fmt_digits32(uint32_t v)
{
    unsigned n = 1;
    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* For each byte: 0 when it goes into a JSON string as it is (printable ASCII
 * other than '"' and '\\'), else 1 (sb.c). */
extern const unsigned char mlprof__fmt_json_special_table[256];
MLPROF_I_FMT int mlprof__fmt_json_special(unsigned char c) { return mlprof__fmt_json_special_table[c]; }

/* Writes the digits of v in decimal: two a step, in 32 bits. */
MLPROF_I_FMT char *mlprof__fmt_u32(char *p, uint32_t u)
{
    char *end = p + mlprof__fmt_digits32(u);
    char *q = end;
    while (u >= 100) {
        unsigned d = u % 100 * 2;
        u /= 100;
        *--q = mlprof__fmt_pairs[d + 1];
        *--q = mlprof__fmt_pairs[d];
    }
    if (u >= 10) {
        *--q = mlprof__fmt_pairs[u * 2 + 1];
        *--q = mlprof__fmt_pairs[u * 2];
    } else {
        *--q = (char)('0' + u);
    }
    return end;
}

/* Writes v (below 10^8) as eight digits, zeros in front. */
MLPROF_I_FMT char *mlprof__fmt_8digits(char *p, uint32_t v)
{
    uint32_t hi = v / 10000, lo = v % 10000;
    memcpy(p, mlprof__fmt_pairs + hi / 100 * 2, 2);
    memcpy(p + 2, mlprof__fmt_pairs + hi % 100 * 2, 2);
    memcpy(p + 4, mlprof__fmt_pairs + lo / 100 * 2, 2);
    memcpy(p + 6, mlprof__fmt_pairs + lo % 100 * 2, 2);
    return p + 8;
}

/* Writes the digits of v in decimal. Above 32 bits (timestamps), its last
 * eight digits, then the rest: one 64-bit division instead of one per two
 * digits. */
MLPROF_I_FMT char *mlprof__fmt_u64(char *p, uint64_t v)
{
    if (v <= UINT32_MAX)
        return mlprof__fmt_u32(p, (uint32_t)v);
    uint64_t high = v / 100000000;
    uint32_t low = (uint32_t)(v % 100000000);
    if (high <= UINT32_MAX) {
        p = mlprof__fmt_u32(p, (uint32_t)high);
    } else { /* 2^64 has 20 digits: at most 4 above these 16 */
        p = mlprof__fmt_u32(p, (uint32_t)(high / 100000000));
        p = mlprof__fmt_8digits(p, (uint32_t)(high % 100000000));
    }
    return mlprof__fmt_8digits(p, low);
}

MLPROF_I_FMT char *mlprof__fmt_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return mlprof__fmt_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return mlprof__fmt_u64(p, (uint64_t)v);
}

/* Nanoseconds as microseconds with three decimals: "12.345". */
MLPROF_I_FMT char *mlprof__fmt_us(char *p, uint64_t ns)
{
    unsigned frac = (unsigned)(ns % 1000);
    p = mlprof__fmt_u64(p, ns / 1000);
    p[0] = '.';
    p[1] = (char)('0' + frac / 100);
    p[2] = mlprof__fmt_pairs[frac % 100 * 2];
    p[3] = mlprof__fmt_pairs[frac % 100 * 2 + 1];
    return p + 4;
}

/* Copies a text known to need no escaping (n bytes). */
MLPROF_I_FMT char *mlprof__fmt_raw(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* The slow part of a JSON string: from the first byte that is not plain
 * ASCII on (sb.c). */
char *mlprof__fmt_json_rest(char *p, const unsigned char *s, size_t n);

/* Nonzero when one of the bytes in w needs more than a copy: a control
 * (below 0x20), '"', '\\' or a byte of a multi-byte character. The tests
 * for a zero byte and for a byte below n (n <= 128) from "Bit Twiddling
 * Hacks", written out: (x - 0x01..) & ~x & 0x80.. is nonzero exactly when a
 * byte of x is zero. ones is 0x01 in every byte of the word. */
#define MLPROF_I_WORD_SPECIAL(w, ones)                                                                        \
    (((w) | (((w) - (ones) * 0x20) & ~(w)) | ((((w) ^ ((ones) * '"')) - (ones)) & ~((w) ^ ((ones) * '"'))) |  \
      ((((w) ^ ((ones) * '\\')) - (ones)) & ~((w) ^ ((ones) * '\\')))) &                                    \
     ((ones) * 0x80))

MLPROF_I_FMT uint64_t mlprof__fmt_word_special(uint64_t w)
{
    return MLPROF_I_WORD_SPECIAL(w, (uint64_t)0x0101010101010101ull);
}

MLPROF_I_FMT uint32_t mlprof__fmt_word32_special(uint32_t w)
{
    return MLPROF_I_WORD_SPECIAL(w, (uint32_t)0x01010101u);
}

/* s (n bytes) as a quoted JSON string, as mlprof__sb_json_str says; needs
 * room for MLPROF__FMT_JSON_STR_MAX(n) bytes. Strings that need no escaping
 * (nearly all: names, keys, categories) are copied a word at a time, the last
 * word overlapping the one before it rather than byte by byte. */
MLPROF_I_FMT char *mlprof__fmt_json_str(char *p, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    *p++ = '"';
    if (n >= 8) {
        uint64_t w;
        for (; i + 8 <= n; i += 8, p += 8) {
            memcpy(&w, s + i, 8);
            if (mlprof__fmt_word_special(w))
                goto slow;
            memcpy(p, &w, 8);
        }
        if (i < n) { /* the last 8 bytes, some of them copied already */
            memcpy(&w, s + n - 8, 8);
            if (mlprof__fmt_word_special(w))
                goto slow;
            memcpy(p - (i - (n - 8)), &w, 8);
            p += n - i;
        }
    } else if (n >= 4) { /* two words of 4, overlapping when n < 8 */
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        if (mlprof__fmt_word32_special(a) | mlprof__fmt_word32_special(b))
            goto slow;
        memcpy(p, &a, 4);
        memcpy(p + n - 4, &b, 4);
        p += n;
    } else {
        for (; i < n; i++) {
            if (mlprof__fmt_json_special(s[i]))
                goto slow;
            *p++ = (char)s[i];
        }
    }
    *p++ = '"';
    return p;
slow:
    p = mlprof__fmt_json_rest(p, s + i, n - i);
    *p++ = '"';
    return p;
}

#endif /* MLPROF_FMT_H */
