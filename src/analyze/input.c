/*
 * input.c - the bytes of a trace file, plain or gzip-compressed, through a
 * sliding buffer, with the position of every byte known (offset and line) so
 * that an error can name where it is. zlib is loaded with dlopen when a file
 * starts with the gzip magic: one build reads both, and a machine without
 * zlib gets a clear message instead of a missing library at start.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/gz.h"
#include "json.h"

#define BUF_SIZE (1u << 20)

typedef mlprof__zstream zstream; /* zlib's z_stream (gz.h) */

enum { ZI_OK = 0, ZI_STREAM_END = 1, ZI_BUF_ERROR = -5, ZI_MEM_ERROR = -4, ZI_GZIP_WINDOW = 16 + 15 };

/* The few zlib functions used, looked up once. inflate itself, not gzread:
 * gzread passes over bytes after the last member without a word, and says
 * that a file ends inside a member only to whoever asks gzerror. */
static struct {
    int tried;
    void *lib;
    const char *(*version)(void);
    int (*init)(zstream *, int, const char *, int);
    int (*inflate)(zstream *, int);
    int (*reset)(zstream *);
    int (*end)(zstream *);
    char why[256];
} Z;

static int zlib_load(void)
{
    if (Z.tried)
        return Z.lib ? 0 : -1;
    Z.tried = 1;
    Z.lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!Z.lib) {
        snprintf(Z.why, sizeof Z.why, "%s", dlerror());
        return -1;
    }
    *(void **)&Z.version = dlsym(Z.lib, "zlibVersion");
    *(void **)&Z.init = dlsym(Z.lib, "inflateInit2_");
    *(void **)&Z.inflate = dlsym(Z.lib, "inflate");
    *(void **)&Z.reset = dlsym(Z.lib, "inflateReset");
    *(void **)&Z.end = dlsym(Z.lib, "inflateEnd");
    if (!Z.version || !Z.init || !Z.inflate || !Z.reset || !Z.end) {
        snprintf(Z.why, sizeof Z.why, "libz.so.1 lacks the inflate functions");
        dlclose(Z.lib);
        Z.lib = NULL;
        return -1;
    }
    return 0;
}

#define GZ_IN_SIZE (1u << 18)

/* A gzip file being inflated: one member after another, as gzip reads a
 * file of several (mlprof's continuous dumps write them). */
typedef struct gz_reader {
    zstream s;
    int started;        /* inflateInit2_ succeeded: inflateEnd is owed */
    int member_end;     /* a member ended, and no other began yet */
    int file_end;       /* the file has no more bytes */
    uint64_t file_read; /* bytes of the file read so far */
    unsigned char in[GZ_IN_SIZE];
} gz_reader;

/* Reads more of the file after the avail_in bytes not yet inflated (moved to
 * the front). 0, or -1 with the reason in in->late. */
static int gz_more(an_input *in, gz_reader *g)
{
    if (g->s.avail_in)
        memmove(g->in, g->s.next_in, g->s.avail_in);
    g->s.next_in = g->in;
    for (;;) {
        ssize_t n = read(in->fd, g->in + g->s.avail_in, GZ_IN_SIZE - g->s.avail_in);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(in->late, sizeof in->late, "read error: %s", strerror(errno));
            return -1;
        }
        g->file_end = n == 0;
        g->s.avail_in += (unsigned)n;
        g->file_read += (uint64_t)n;
        return 0;
    }
}

static ssize_t gz_truncated(an_input *in, const gz_reader *g)
{
    snprintf(in->late, sizeof in->late, "truncated gzip: the file ends after %llu bytes, inside its compressed data",
             (unsigned long long)g->file_read);
    return -1;
}

/* Up to n bytes of the uncompressed data into out: the count, 0 after the
 * last member, or -1 with what is wrong in in->late (said once the data
 * before it is read: see an_input_fill). */
static ssize_t gz_read(an_input *in, gz_reader *g, char *out, size_t n)
{
    for (;;) {
        if (g->s.avail_in < 2 && !g->file_end && gz_more(in, g) != 0)
            return -1;
        uint64_t at = g->file_read - g->s.avail_in; /* the offset in the file of the next byte */
        if (g->member_end) {
            if (g->s.avail_in == 0)
                return 0;
            if (g->s.avail_in < 2 || g->s.next_in[0] != 0x1f || g->s.next_in[1] != 0x8b) {
                snprintf(in->late, sizeof in->late,
                         "trailing garbage: the gzip data ends at byte offset %llu of the file, and bytes that are "
                         "not gzip follow",
                         (unsigned long long)at);
                return -1;
            }
            if (Z.reset(&g->s) != ZI_OK) {
                snprintf(in->late, sizeof in->late, "zlib's inflateReset failed");
                return -1;
            }
            g->member_end = 0;
        }
        if (g->s.avail_in == 0)
            return gz_truncated(in, g);
        g->s.next_out = (unsigned char *)out;
        g->s.avail_out = n > UINT_MAX ? UINT_MAX : (unsigned)n;
        unsigned had = g->s.avail_in;
        int zr = Z.inflate(&g->s, 0);
        size_t got = (size_t)(g->s.next_out - (unsigned char *)out);
        if (zr == ZI_STREAM_END) {
            g->member_end = 1;
        } else if (zr == ZI_MEM_ERROR) {
            snprintf(in->late, sizeof in->late, "out of memory inflating the gzip data");
            return got ? (ssize_t)got : -1;
        } else if (zr != ZI_OK && zr != ZI_BUF_ERROR) {
            snprintf(in->late, sizeof in->late, "gzip data is damaged near byte offset %llu of the file: %s",
                     (unsigned long long)(g->file_read - g->s.avail_in), g->s.msg ? g->s.msg : "a data error");
            return got ? (ssize_t)got : -1;
        }
        if (got)
            return (ssize_t)got;
        if (zr != ZI_STREAM_END && g->s.avail_in == had) { /* inflate needs more than the bytes at hand */
            if (g->file_end)
                return gz_truncated(in, g);
            if (gz_more(in, g) != 0)
                return -1;
        }
    }
}

/* zlib's allocations through mlprof's allocator hook */
static void *z_alloc(void *opaque, unsigned items, unsigned size)
{
    (void)opaque;
    return size && items > SIZE_MAX / size ? NULL : mlprof__malloc((size_t)items * size);
}

static void z_free(void *opaque, void *p)
{
    (void)opaque;
    mlprof__free(p);
}

/* Starts inflating in's file, whose first nhead bytes (the magic) were read
 * already when it is a pipe. */
static int gz_start(an_input *in, const unsigned char *head, size_t nhead)
{
    if (zlib_load() != 0)
        return an_input_fail(in, "the file is gzip-compressed, and zlib (libz.so.1) cannot be loaded: %s", Z.why);
    gz_reader *g = mlprof__calloc(1, sizeof *g);
    if (!g)
        return an_input_fail(in, "out of memory");
    in->gz = g;
    in->compressed = 1;
    g->s.zalloc = z_alloc;
    g->s.zfree = z_free;
    memcpy(g->in, head, nhead);
    g->s.next_in = g->in;
    g->s.avail_in = (unsigned)nhead;
    g->file_read = nhead;
    if (Z.init(&g->s, ZI_GZIP_WINDOW, Z.version(), (int)sizeof g->s) != ZI_OK)
        return an_input_fail(in, "cannot read it as gzip: zlib's inflateInit2_ failed");
    g->started = 1;
    return 0;
}

/* The first n bytes of in's file, at most: pread where it can, else read
 * (a pipe), the bytes then kept in in->buf as the first ones of the data;
 * *consumed says which. Returns the count, or -1 on a read error. */
static ssize_t peek(an_input *in, unsigned char *out, size_t n, int *consumed)
{
    *consumed = 0;
    ssize_t k = pread(in->fd, out, n, 0);
    if (k >= 0 || errno != ESPIPE)
        return k;
    *consumed = 1;
    size_t got = 0;
    while (got < n) {
        k = read(in->fd, out + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* The regular files opened as inputs (an_input_was_read) */
static struct {
    pthread_mutex_t lock;
    struct read_file {
        dev_t dev;
        ino_t ino;
    } *files;
    size_t n, cap;
} g_read = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static void note_read(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    pthread_mutex_lock(&g_read.lock);
    int known = 0;
    for (size_t i = 0; i < g_read.n && !known; i++)
        known = g_read.files[i].dev == st.st_dev && g_read.files[i].ino == st.st_ino;
    struct read_file *f = known ? NULL : mlprof__grow(g_read.files, &g_read.cap, g_read.n, sizeof *f, 16);
    if (f) { /* out of memory: not noted, which only loses the check */
        g_read.files = f;
        g_read.files[g_read.n].dev = st.st_dev;
        g_read.files[g_read.n++].ino = st.st_ino;
    }
    pthread_mutex_unlock(&g_read.lock);
}

int an_input_was_read(const char *path)
{
    struct stat st;
    if (!path || strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    pthread_mutex_lock(&g_read.lock);
    int found = 0;
    for (size_t i = 0; i < g_read.n && !found; i++)
        found = g_read.files[i].dev == st.st_dev && g_read.files[i].ino == st.st_ino;
    pthread_mutex_unlock(&g_read.lock);
    return found;
}

static int open_input(an_input *in, const char *path)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    in->path = path;
    in->buf = mlprof__malloc(BUF_SIZE + 1);
    if (!in->buf)
        return an_input_fail(in, "out of memory");
    in->cap = BUF_SIZE;
    in->fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
    if (in->fd < 0)
        return an_input_fail(in, "cannot open: %s", strerror(errno));
    note_read(in->fd);
    unsigned char magic[2];
    int consumed;
    ssize_t n = peek(in, magic, 2, &consumed);
    if (n < 0)
        return an_input_fail(in, "read error: %s", strerror(errno));
    int gzip = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (consumed && !gzip) { /* the plain data's first bytes */
        memcpy(in->buf, magic, (size_t)n);
        in->len = (size_t)n;
        in->buf[in->len] = '\0';
    }
    if (gzip)
        return gz_start(in, magic, consumed ? (size_t)n : 0);
    return 0;
}

/* On failure what was taken is given back (the error stays in in->error):
 * a caller need not close an input that did not open. */
int an_input_open(an_input *in, const char *path)
{
    int rc = open_input(in, path);
    if (rc != 0)
        an_input_close(in);
    return rc;
}

int an_input_open_mem(an_input *in, const char *name, const void *data, size_t n)
{
    memset(in, 0, sizeof *in);
    in->fd = -1;
    in->path = name;
    in->buf = mlprof__malloc(n + 1);
    if (!in->buf)
        return an_input_fail(in, "out of memory");
    memcpy(in->buf, data, n);
    in->buf[n] = '\0';
    in->cap = in->len = n;
    in->eof = 1; /* all of it is in the buffer */
    return 0;
}

void an_input_close(an_input *in)
{
    gz_reader *g = in->gz;
    if (g && g->started)
        Z.end(&g->s);
    mlprof__free(g);
    if (in->fd >= 0)
        close(in->fd);
    mlprof__free(in->buf);
    in->gz = NULL;
    in->fd = -1;
    in->buf = NULL;
}

static size_t count_newlines(const char *p, size_t n)
{
    size_t lines = 0;
    const char *end = p + n;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        lines++;
        p++;
    }
    return lines;
}

/* What is wrong with a gzip file beyond the data read so far (cut short,
 * damaged, followed by garbage) is said once the reader has taken all the
 * data before it: at the place where the good data ends, and only after the
 * events there were read. */
static void say_late(an_input *in)
{
    if (in->late[0] && !in->failed && in->pos >= in->len)
        an_input_fail(in, "%s", in->late);
}

int an_input_finish(an_input *in)
{
    if (in->late[0] && !in->failed)
        an_input_fail(in, "%s", in->late);
    return in->failed ? -1 : 0;
}

size_t an_input_fill(an_input *in)
{
    if (in->eof || in->failed) {
        say_late(in);
        return in->len - in->pos;
    }
    /* keep what is not consumed; what is, moves into the counts */
    in->lines_before += count_newlines(in->buf, in->pos);
    const char *nl = in->pos ? memrchr(in->buf, '\n', in->pos) : NULL;
    if (nl)
        in->line_start = in->base + (uint64_t)(nl - in->buf) + 1;
    memmove(in->buf, in->buf + in->pos, in->len - in->pos);
    in->base += in->pos;
    in->len -= in->pos;
    in->pos = 0;
    while (in->len < in->cap) {
        ssize_t n;
        if (in->gz) {
            n = gz_read(in, in->gz, in->buf + in->len, in->cap - in->len);
            if (n < 0) {
                in->eof = 1; /* in->late says why, when the data before it is read */
                break;
            }
        } else {
            n = read(in->fd, in->buf + in->len, in->cap - in->len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                an_input_fail(in, "read error: %s", strerror(errno));
                break;
            }
        }
        if (n == 0) {
            in->eof = 1;
            break;
        }
        in->len += (size_t)n;
        if (in->len - in->pos >= 65536)
            break; /* enough to go on: keep the loop short for pipes */
    }
    in->buf[in->len] = '\0';
    say_late(in);
    return in->len - in->pos;
}

uint64_t an_input_line_of(const an_input *in, uint64_t offset)
{
    if (offset < in->base || offset > in->base + in->len)
        return 0;
    return in->lines_before + count_newlines(in->buf, (size_t)(offset - in->base)) + 1;
}

void an_input_where(const an_input *in, uint64_t *offset, uint64_t *line, uint64_t *column)
{
    size_t pos = in->pos < in->len ? in->pos : in->len;
    *offset = in->base + pos;
    *line = in->lines_before + count_newlines(in->buf, pos) + 1;
    const char *nl = pos ? memrchr(in->buf, '\n', pos) : NULL;
    uint64_t start = nl ? in->base + (uint64_t)(nl - in->buf) + 1 : in->line_start;
    *column = *offset - start + 1;
}

int an_input_fail(an_input *in, const char *fmt, ...)
{
    if (in->failed)
        return -1;
    in->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!in->buf || (in->fd < 0 && !in->gz && in->base == 0 && in->len == 0)) {
        snprintf(in->error, sizeof in->error, "%s: %s", in->path, msg);
    } else {
        uint64_t off, line, col;
        an_input_where(in, &off, &line, &col);
        snprintf(in->error, sizeof in->error, "%s:%llu:%llu: %s (at byte offset %llu%s)", in->path,
                 (unsigned long long)line, (unsigned long long)col, msg, (unsigned long long)off,
                 in->compressed ? " of the uncompressed data" : "");
    }
    return -1;
}
