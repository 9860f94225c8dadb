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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

#define BUF_SIZE (1u << 20)

/* the few zlib functions used, looked up once */
static struct {
    int tried;
    void *lib;
    void *(*gzdopen)(int, const char *);
    int (*gzread)(void *, void *, unsigned);
    int (*gzclose)(void *);
    const char *(*gzerror)(void *, int *);
    int (*gzbuffer)(void *, unsigned);
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
    *(void **)&Z.gzdopen = dlsym(Z.lib, "gzdopen");
    *(void **)&Z.gzread = dlsym(Z.lib, "gzread");
    *(void **)&Z.gzclose = dlsym(Z.lib, "gzclose");
    *(void **)&Z.gzerror = dlsym(Z.lib, "gzerror");
    *(void **)&Z.gzbuffer = dlsym(Z.lib, "gzbuffer");
    if (!Z.gzdopen || !Z.gzread || !Z.gzclose || !Z.gzerror) {
        snprintf(Z.why, sizeof Z.why, "libz.so.1 lacks the gz* functions");
        dlclose(Z.lib);
        Z.lib = NULL;
        return -1;
    }
    return 0;
}

/* Standard input that is a pipe has no offset to read its first bytes at:
 * they are read, and kept for whoever reads the data next. */
typedef struct feeder {
    int from, to;
    unsigned char head[2];
    size_t nhead;
} feeder;

/* zlib's reader must see the gzip magic read from a pipe: a thread of its
 * own gives it a pipe that says those bytes again, then the rest of the
 * input. It ends when the input does or when the reader closes its end
 * (EPIPE: SIGPIPE is blocked here), and frees itself (detached: an input
 * that never ends must not keep an_input_close waiting). */
static void *feed(void *arg)
{
    feeder *f = arg;
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, NULL);
    int ok = mlprof__write_all(f->to, f->head, f->nhead) == 0;
    char buf[1 << 16];
    while (ok) {
        ssize_t n = read(f->from, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ok = mlprof__write_all(f->to, buf, (size_t)n) == 0;
    }
    close(f->to);
    close(f->from);
    mlprof__free(f);
    return NULL;
}

/* A descriptor that reads head, then the rest of fd (which it takes), or -1. */
static int prefixed(int fd, const unsigned char *head, size_t nhead)
{
    int p[2];
    feeder *f = mlprof__malloc(sizeof *f);
    if (!f || pipe2(p, O_CLOEXEC) != 0) {
        mlprof__free(f);
        return -1;
    }
    f->from = fd;
    f->to = p[1];
    memcpy(f->head, head, nhead);
    f->nhead = nhead;
    pthread_t t;
    if (pthread_create(&t, NULL, feed, f) != 0) {
        close(p[0]);
        close(p[1]);
        mlprof__free(f);
        return -1;
    }
    pthread_detach(t);
    return p[0];
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
    if (gzip) {
        if (zlib_load() != 0)
            return an_input_fail(in, "the file is gzip-compressed, and zlib (libz.so.1) cannot be loaded: %s",
                                 Z.why);
        if (consumed) {
            int fd = prefixed(in->fd, magic, 2);
            if (fd < 0)
                return an_input_fail(in, "cannot read gzip from a pipe: %s", strerror(errno));
            in->fd = fd;
        }
        in->gz = Z.gzdopen(in->fd, "rb");
        if (!in->gz)
            return an_input_fail(in, "cannot read it as gzip");
        in->fd = -1; /* gzclose closes it */
        if (Z.gzbuffer)
            Z.gzbuffer(in->gz, 1u << 18);
        in->compressed = 1;
    }
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
    if (in->gz)
        Z.gzclose(in->gz);
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

size_t an_input_fill(an_input *in)
{
    if (in->eof || in->failed)
        return in->len - in->pos;
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
            n = Z.gzread(in->gz, in->buf + in->len, (unsigned)(in->cap - in->len));
            if (n < 0) {
                int code;
                an_input_fail(in, "gzip data is damaged: %s", Z.gzerror(in->gz, &code));
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
    return in->len - in->pos;
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
