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
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

int an_input_open(an_input *in, const char *path)
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
    unsigned char magic[2];
    ssize_t n = pread(in->fd, magic, 2, 0);
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        if (zlib_load() != 0)
            return an_input_fail(in, "the file is gzip-compressed, and zlib (libz.so.1) cannot be loaded: %s",
                                 Z.why);
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
