/*
 * common.h - small utilities shared by every module of libmlprof: the
 * replaceable allocator, logging and per-thread errors, a growable string
 * buffer with JSON escaping, a string-keyed hash map, and atomic file output.
 * Nothing here is on the recording hot path.
 */
#ifndef MLPROF_COMMON_H
#define MLPROF_COMMON_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlprof/mlprof.h"

#if defined(__GNUC__)
#define MLPROF_I_HIDDEN __attribute__((visibility("hidden")))
#define MLPROF_I_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define MLPROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define MLPROF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MLPROF_I_HIDDEN
#define MLPROF_I_PRINTF(f, a)
#define MLPROF_LIKELY(x) (x)
#define MLPROF_UNLIKELY(x) (x)
#endif

/* ---- allocation (through the hook set by mlprof_set_allocator) */
void *mlprof__malloc(size_t n);
void *mlprof__calloc(size_t n, size_t size);
void *mlprof__realloc(void *p, size_t n);
void mlprof__free(void *p);
char *mlprof__strdup(const char *s);
char *mlprof__strndup(const char *s, size_t n);

/* Above 0 while the calling thread works inside mlprof (holds its control
 * lock, or is one of its own threads): the interposers of mlprof run do not
 * record what it does then (the collector's own allocations). */
extern __thread int mlprof__busy;

/* 1 while the crash's dump runs (mlprof__dump_on_signal): the crashed
 * thread may hold one of mlprof's locks for good (mlprof's sampler thread,
 * inside libdw), so the dump's parts take their locks with a bound and
 * leave out, saying so, what they cannot reach (mlprof__lock_for_dump). */
extern int mlprof__crashing;
/* Locks m: outside a crash, as pthread_mutex_lock (0). In the crash's dump,
 * waits up to a second (another thread's short hold ends in that time), and
 * once that failed for *gave_up's caller, only tries (the holder is stuck):
 * -1 when m could not be had, and *gave_up is set. */
int mlprof__lock_for_dump(pthread_mutex_t *m, int *gave_up);

/* Starts one of mlprof's own threads with every signal blocked but the
 * faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS): the
 * program's signals (a process-directed ^C, SIGTERM, a timer) go to the
 * program's threads, whose handlers expect them there (a main thread in
 * pause() that never wakes, a trace-writing handler run on a thread that
 * holds mlprof's lock); a fault of the thread's own reaches the crash
 * handler that writes the trace. The caller's own mask is left alone.
 * Returns pthread_create's value, once the thread runs fn (not inside its
 * start, which a fork must not cut); detached: joined by no one. */
int mlprof__thread_start(pthread_t *t, int detached, void *(*fn)(void *), void *arg);

/* Edits (insert, delete, replace, swap of two neighbours) from a to b, up to
 * cap: cap + 1 when more. */
size_t mlprof__edits(const char *a, size_t la, const char *b, size_t lb, size_t cap);
/* The name of names[0..n) nearest to what a user typed (at most two edits,
 * one for a name under 6 letters), or NULL: for "did you mean" hints. */
const char *mlprof__nearest(const char *typed, const char *const *names, size_t n);
/* " (did you mean --X?)" when an option that help (a command's usage text)
 * lists is near the unknown option arg (its "=value" left out), else "". */
const char *mlprof__option_hint(const char *arg, void (*help)(FILE *), char *buf, size_t len);

/* Before a fork (pthread_atfork's prepare): waits, up to 2 s, for a thread
 * of mlprof's (worker: its id, read under ctl_lock) to be between two rounds of
 * its work, work being the mutex it holds through each, so that the fork
 * does not cut it inside malloc or libdw. 1 when work was taken (to be
 * unlocked after the fork); 0 when not: the fork is the worker's own, or
 * the round did not end in time (said, naming what). */
int mlprof__fork_gate(pthread_mutex_t *work, const pthread_t *worker, const char *what);

/* The next item of a comma (or space) separated list at *p: its length, 0
 * at the end; *p is moved to the item's start. The caller steps past it. */
static inline size_t mlprof__list_item(const char **p)
{
    while (**p == ',' || **p == ' ')
        (*p)++;
    return strcspn(*p, ", ");
}

/* Room for one more item in a growing array of n items with room for *cap:
 * the array itself, or a larger copy (doubled, from `first`; *cap updated),
 * or NULL when out of memory (the array is then unchanged). */
static inline void *mlprof__grow(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? 2 * *cap : first;
    void *p = mlprof__realloc(items, c * size);
    if (p)
        *cap = c;
    return p;
}

/* qsort that takes an empty array as it is (qsort's pointer may not be NULL). */
static inline void mlprof__sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* ---- logging and errors */
void mlprof__log(int level, const char *fmt, ...) MLPROF_I_PRINTF(2, 3);
/* Sets the calling thread's last error message and returns code. */
int mlprof__fail(int code, const char *fmt, ...) MLPROF_I_PRINTF(2, 3);
/* A string as an error message quotes it: "whole" when short, else its start
 * and end around "..." and its length, as "/very/long/pa...file.json" (5000
 * bytes), so that what the message says after it (the key) is not cut off.
 * C11 keeps the returned array alive until the end of the full expression:
 * mlprof__fail(rc, "bad %s", mlprof__quoted(value).s) is fine. */
#define MLPROF__QUOTED_WHOLE 120
#define MLPROF__QUOTED_HEAD 80
#define MLPROF__QUOTED_TAIL 32
typedef struct mlprof__quoted_text {
    char s[MLPROF__QUOTED_HEAD + MLPROF__QUOTED_TAIL + 48];
} mlprof__quoted_text;
mlprof__quoted_text mlprof__quoted(const char *s);
/* The same without the quotes, for paths: /very/long/pa...file.json (5000 bytes). */
mlprof__quoted_text mlprof__shortened(const char *s);
/* Clears the calling thread's last error message. */
void mlprof__clear_error(void);

/* ---- growable string buffer */
typedef struct mlprof__sb {
    char *data;
    size_t len;
    size_t cap;
    int failed; /* an allocation failed: contents are truncated */
} mlprof__sb;

void mlprof__sb_init(mlprof__sb *sb);
void mlprof__sb_free(mlprof__sb *sb);
void mlprof__sb_reset(mlprof__sb *sb);
/* Room for extra more bytes (and the terminating NUL) after len: 1, or 0
 * when the buffer failed (out of memory). Lets a writer fill data directly. */
int mlprof__sb_reserve(mlprof__sb *sb, size_t extra);
void mlprof__sb_put(mlprof__sb *sb, const char *s, size_t n);
void mlprof__sb_puts(mlprof__sb *sb, const char *s);
void mlprof__sb_putc(mlprof__sb *sb, char c);
void mlprof__sb_printf(mlprof__sb *sb, const char *fmt, ...) MLPROF_I_PRINTF(2, 3);
void mlprof__sb_vprintf(mlprof__sb *sb, const char *fmt, va_list ap);
/* Appends s (n bytes) as a quoted JSON string: escapes quotes, backslashes and
 * control characters; replaces bytes that are not valid UTF-8 with U+FFFD. */
void mlprof__sb_json_str(mlprof__sb *sb, const char *s, size_t n);
/* Appends s (n bytes) as XML text or an attribute's value: & < > " ' as
 * entities; bytes that are not valid UTF-8, and characters XML 1.0 does not
 * allow (controls other than tab and line breaks, U+FFFE, U+FFFF), as U+FFFD. */
void mlprof__sb_xml(mlprof__sb *sb, const char *s, size_t n);
/* Appends s as a CSV field: as it is, or quoted (quotes doubled) when it holds
 * a comma, a quote or a line break (RFC 4180); bytes that are not valid UTF-8
 * as U+FFFD. NULL is an empty field. */
void mlprof__sb_csv(mlprof__sb *sb, const char *s);
/* Append one JSON object member, "key":value (key_len bytes of key, escaped
 * as mlprof__sb_json_str does), preceded by a comma unless sb is empty: a
 * span's arguments as the collector gathers them, with one reserve for the
 * member. The bytes are those of the calls they replace (putc, json_str,
 * putc ':', then i64, json_str or double). */
void mlprof__sb_member_i64(mlprof__sb *sb, const char *key, size_t key_len, int64_t v);
void mlprof__sb_member_str(mlprof__sb *sb, const char *key, size_t key_len, const char *s, size_t n);
void mlprof__sb_member_double(mlprof__sb *sb, const char *key, size_t key_len, double v);
/* Appends a nanosecond count as microseconds with three decimals ("12.345"). */
void mlprof__sb_us(mlprof__sb *sb, uint64_t ns);
void mlprof__sb_i64(mlprof__sb *sb, int64_t v);
void mlprof__sb_u64(mlprof__sb *sb, uint64_t v);
/* Appends a double as JSON (finite: shortest round-trip form; else null). */
void mlprof__sb_double(mlprof__sb *sb, double v);
/* Appends a duration in the unit a person reads: "812 ns", "3.250 us",
 * "12.402 ms", "1.503 s". */
void mlprof__sb_duration(mlprof__sb *sb, uint64_t ns);
/* Bytes in B, KiB, MiB, GiB or TiB with three figures: "5.72 MiB". */
void mlprof__sb_bytes(mlprof__sb *sb, uint64_t bytes);
/* Takes ownership of the buffer's bytes (NUL-terminated); the buffer is reset. */
char *mlprof__sb_take(mlprof__sb *sb);

/* ---- string-keyed hash map (keys are copied) */
typedef struct mlprof__map_entry {
    char *key;
    size_t key_len;
    uint64_t hash;
    void *value;
} mlprof__map_entry;

typedef struct mlprof__map {
    mlprof__map_entry *slots;
    size_t cap;   /* a power of two, or 0 */
    size_t count;
} mlprof__map;

uint64_t mlprof__hash(const void *data, size_t n);
void mlprof__map_init(mlprof__map *m);
/* Frees the map and its keys; values are the caller's (free them first). */
void mlprof__map_free(mlprof__map *m);
void *mlprof__map_get(const mlprof__map *m, const char *key, size_t key_len);
/* Returns the slot of key, inserting it with a NULL value if absent; NULL on
 * allocation failure. */
mlprof__map_entry *mlprof__map_slot(mlprof__map *m, const char *key, size_t key_len);

/* ---- files */
/* Writes the bytes of a file as mlprof__out_open and mlprof__out_commit do.
 * Returns MLPROF_OK, MLPROF_EIO or MLPROF_ENOMEM (message set). */
int mlprof__write_file_atomic(const char *path, const char *data, size_t len);
/* An output being written. A regular file (or none yet) is written to a
 * temporary file beside it, "<path>.tmp-<pid>-XXXXXX", renamed over it at the
 * end: complete or absent, never torn. What is not a regular file is never
 * replaced: a FIFO or a character device is written in place (a FIFO that
 * nothing reads is an error, not a wait), a directory or a block device is
 * refused; /dev/stdout, /dev/fd/N and /proc/self/fd/N are written through
 * the descriptor itself (at its offset). A symbolic link is followed: the
 * file it names is written. */
typedef struct mlprof__out {
    int fd;     /* where to write */
    char *path; /* the file written (links followed), for messages */
    char *tmp;  /* the temporary file, or NULL when written in place */
} mlprof__out;
/* Opens path for writing; the first time in a process, temporary files of
 * path left by processes that no longer exist (killed while writing) are
 * removed. Returns MLPROF_OK, MLPROF_EIO or MLPROF_ENOMEM (message set). */
int mlprof__out_open(mlprof__out *o, const char *path);
/* Finishes a write: closes the file and renames the temporary file over the
 * path, or removes it when ok is 0. Returns MLPROF_OK or MLPROF_EIO. */
int mlprof__out_commit(mlprof__out *o, int ok);
/* Makes the file open as fd the one that mlprof__out_commit renames over the
 * path, in place of o's temporary file (which o->fd still names, unlinked,
 * until the commit closes it): a file made with O_TMPFILE in the path's
 * directory, linked through /proc/self/fd. Saves copying a file that is
 * already written. 0; or -1 with errno (o unchanged: written in place, another
 * file system, no /proc, a file that was never O_TMPFILE), and the caller
 * writes o->fd as usual. */
int mlprof__out_adopt(mlprof__out *o, int fd);
/* Nonzero when a write to path goes in place rather than to a file of its
 * own (mlprof__out_open): /dev/stdout and its kin, or an existing path that
 * is not a regular file (/dev/null, a FIFO, a terminal). */
int mlprof__out_in_place(const char *path);
/* Nonzero when writes to a and b would land in the same file: the same
 * existing file (through links, hard or symbolic), or the same path once
 * dangling links are followed and the folder made absolute
 * ("./out.json", "out.json", "/cwd/out.json"). */
int mlprof__same_file(const char *a, const char *b);
/* Writes all n bytes to fd (retrying short writes and EINTR); 0 or -1 with
 * errno saying why (a full disk: ENOSPC, never a short count). */
int mlprof__write_all(int fd, const void *data, size_t n);
/* Copies the first n bytes of the file open as from (from its start) into
 * to, at to's offset: copy_file_range where the kernel can, else by hand.
 * 0, or -1 with errno (EIO: the file is shorter than n). */
int mlprof__copy_fd(int from, int to, uint64_t n);
/* Work done (bytes written, records drained), counted so that a signal's
 * dump that is slow but moving is not taken for one that hangs
 * (mlprof__dump_deadline). */
extern unsigned long mlprof__progress;
/* The same at offset, with pwrite. */
int mlprof__pwrite_all(int fd, const void *data, size_t n, uint64_t offset);
/* "<path>.tmp-<pid>-XXXXXX" for mkstemp, its last component shortened to
 * fit NAME_MAX (a long final name), as file.c's stale-file sweep expects;
 * NULL when out of memory. */
char *mlprof__temp_name(const char *path);

#endif /* MLPROF_COMMON_H */
