/*
 * json.h - a streaming JSON reader for trace files: an input that slides a
 * buffer over a plain or gzip file and knows where each byte is, and a pull
 * tokenizer over it. Nothing holds more than the current token, so reading a
 * file of any size takes the buffer plus what the caller keeps.
 */
#ifndef MLPROF_ANALYZE_JSON_H
#define MLPROF_ANALYZE_JSON_H

#include <stdint.h>
#include <stddef.h>

#include "../common/common.h"

typedef struct an_input {
    const char *path;
    int fd;
    void *gz;             /* the inflate state (input.c) when the file is compressed */
    int compressed;
    char *buf;            /* NUL after the last byte read */
    size_t cap, len, pos; /* pos: the next byte to read */
    uint64_t base;        /* offset in the (uncompressed) data of buf[0] */
    uint64_t lines_before; /* newlines before buf[0] */
    uint64_t line_start;   /* offset where the line of buf[0] starts */
    int eof, failed;
    char error[600];      /* "path:line:column: what (at byte offset N)" */
    char late[300];       /* what is wrong past the data read (gzip cut short, damaged,
                           * garbage after it), said when the reader gets there */
} an_input;

/* Opens path ("-" is standard input). Returns 0, or -1 with in->error set. */
int an_input_open(an_input *in, const char *path);
/* Whether path is a regular file this process opened with an_input_open:
 * a command never writes its output over a trace it read. */
int an_input_was_read(const char *path);
/* Reads n bytes of memory (copied) as if they were the file called name. */
int an_input_open_mem(an_input *in, const char *name, const void *data, size_t n);
void an_input_close(an_input *in);
/* Moves what is left to the front of the buffer and reads more; returns the
 * bytes available from pos (0 at the end or after an error). */
size_t an_input_fill(an_input *in);
/* Says what in->late holds (a gzip file cut short, damaged, or followed by
 * bytes that are not gzip), if no error was said before: for a reader that
 * stops at the end of its data without asking for more. 0, or -1 when the
 * input failed. */
int an_input_finish(an_input *in);
/* The line of the byte at offset while it is still in the buffer, or 0 (a
 * place in the data the buffer has moved past). */
uint64_t an_input_line_of(const an_input *in, uint64_t offset);
/* Where the next byte is. */
void an_input_where(const an_input *in, uint64_t *offset, uint64_t *line, uint64_t *column);
/* Records the first error, with its place; returns -1. */
int an_input_fail(an_input *in, const char *fmt, ...) MLPROF_I_PRINTF(2, 3);

/* The next byte that is not white space (not consumed), or -1 at the end. */
static inline int an_json_peek(an_input *in)
{
    for (;;) {
        while (in->pos < in->len) {
            unsigned char c = (unsigned char)in->buf[in->pos];
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
                return c;
            in->pos++;
        }
        if (an_input_fill(in) == 0)
            return -1;
    }
}

/* Consumes c (after white space) or fails naming what was expected. */
int an_json_expect(an_input *in, char c, const char *what);
/* A string, at its opening quote: its bytes (escapes decoded, UTF-8) replace
 * out's contents. */
int an_json_string(an_input *in, mlprof__sb *out);
/* A number: *value, and *integer with *is_int when it has no fraction or
 * exponent and fits 64 bits. */
int an_json_number(an_input *in, double *value, int64_t *integer, int *is_int);
/* A time in microseconds as integer nanoseconds, exactly: the decimal digits
 * are shifted, not multiplied as a double (an epoch time with a fraction,
 * 1700000000123456.789, needs 19 digits), and rounded half away from zero at
 * the nanosecond. NaN, Infinity and values out of range read as the nearest
 * double would (0 when it does not fit). */
int an_json_time_ns(an_input *in, int64_t *ns);
/* The same from the n bytes of text s (a number written as a string):
 * 0, or -1 when s is not a plain decimal number or does not fit. */
int an_us_text_to_ns(const char *s, size_t n, int64_t *ns);
/* Whether a time fits 64-bit nanoseconds (about 292 years either way; the
 * trace model takes less, trace.h AN_TIME_LIMIT_NS). */
enum { AN_TIME_OK = 0, AN_TIME_NOT_FINITE = 1, AN_TIME_TOO_BIG = 2 };
/* an_json_time_ns that says in *fit whether the value fits (AN_TIME_*): a
 * NaN, an infinity or a value beyond the range reads as 0, which a reader
 * of durations must not take for a time. */
int an_json_time_ns_fit(an_input *in, int64_t *ns, int *fit);
/* Microseconds as a double into nanoseconds, rounded half away from zero:
 * AN_TIME_OK, or why it does not fit (*ns is then 0). */
int an_us_double_to_ns(double us, int64_t *ns);
/* Any value; when raw is not NULL, its compact JSON text is appended there. */
int an_json_skip(an_input *in, mlprof__sb *raw);
/* Opens an object or an array (open: '{' or '['; what names it in an error).
 * Returns 1 when members follow, 0 when it is empty (closed already), -1 on
 * an error. */
int an_json_open(an_input *in, char open, const char *what);
/* A member's name (into key) and the ':' after it. */
int an_json_key(an_input *in, mlprof__sb *key);
/* Between members or elements: consumes ',' and returns 1, or the closing
 * bracket and returns 0; -1 on an error. */
int an_json_next(an_input *in, char close);

#endif /* MLPROF_ANALYZE_JSON_H */
