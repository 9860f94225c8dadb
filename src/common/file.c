/*
 * file.c - atomic output files: every file mlprof writes is complete or
 * absent, never torn, because it is written to a temporary file beside its
 * final path and renamed over it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int mlprof__write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int mlprof__atomic_open(const char *path, char **tmp_path)
{
    size_t len = strlen(path);
    char *tmp = mlprof__malloc(len + 16);
    if (!tmp) {
        mlprof__fail(MLPROF_ENOMEM, "out of memory writing %s", path);
        return -1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp-XXXXXX", 12);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        mlprof__fail(MLPROF_EIO, "cannot create %s: %s", tmp, strerror(errno));
        mlprof__free(tmp);
        return -1;
    }
    /* mkostemp makes the file 0600; traces are meant to be shared like any output */
    fchmod(fd, 0644);
    *tmp_path = tmp;
    return fd;
}

int mlprof__atomic_commit(int fd, char *tmp_path, const char *path, int ok)
{
    int rc = MLPROF_OK;
    if (close(fd) != 0 && ok) {
        rc = mlprof__fail(MLPROF_EIO, "cannot write %s: %s", tmp_path, strerror(errno));
        ok = 0;
    }
    if (ok && rename(tmp_path, path) != 0) {
        rc = mlprof__fail(MLPROF_EIO, "cannot rename %s to %s: %s", tmp_path, path, strerror(errno));
        ok = 0;
    }
    if (!ok) {
        unlink(tmp_path);
        if (rc == MLPROF_OK)
            rc = MLPROF_EIO;
    }
    mlprof__free(tmp_path);
    return rc;
}

int mlprof__write_file_atomic(const char *path, const char *data, size_t len)
{
    char *tmp;
    int fd = mlprof__atomic_open(path, &tmp);
    if (fd < 0)
        return MLPROF_EIO;
    int ok = mlprof__write_all(fd, data, len) == 0;
    if (!ok)
        mlprof__fail(MLPROF_EIO, "cannot write %s: %s", tmp, strerror(errno));
    return mlprof__atomic_commit(fd, tmp, path, ok);
}
