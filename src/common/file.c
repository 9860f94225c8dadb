/*
 * file.c - output files. A regular file is complete or absent, never torn:
 * it is written to a temporary file beside its final path and renamed over
 * it. What is not a regular file is never replaced: a FIFO or a character
 * device (/dev/null, a terminal) is written in place, a directory or a block
 * device is refused. /dev/stdout and its kin are written through the
 * descriptor they name. The temporary file's name holds the writer's pid, so
 * that one left by a process killed while writing is removed at the next
 * write to that path.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* A write to a pipe, FIFO or socket whose reader is gone raises SIGPIPE,
 * whose default action kills the program being profiled: around the write
 * the signal is blocked (this thread only), so that the write fails with
 * EPIPE and the dump says so; one the write raised is taken back, unless
 * one was pending already. */
unsigned long mlprof__progress;

int mlprof__write_all(int fd, const void *data, size_t n)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int blocked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old) == 0;
    int was_pending = blocked && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    const char *p = data;
    int rc = 0;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w > 0)
            __atomic_add_fetch(&mlprof__progress, 1, __ATOMIC_RELAXED);
        if (w == 0)
            errno = EIO; /* no progress and no reason given */
        if (w <= 0) {
            rc = -1;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (blocked) {
        int err = errno;
        if (rc != 0 && err == EPIPE && !was_pending) {
            const struct timespec none = {0, 0};
            while (sigtimedwait(&pipe_set, NULL, &none) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        errno = err;
    }
    return rc;
}

int mlprof__pwrite_all(int fd, const void *data, size_t n, uint64_t offset)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)offset);
        if (w < 0 && errno == EINTR)
            continue;
        if (w > 0)
            __atomic_add_fetch(&mlprof__progress, 1, __ATOMIC_RELAXED);
        if (w == 0)
            errno = EIO;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return 0;
}

/* ------------------------------------------- the path a write goes to */

/* The file that an existing path names, through symbolic links (whose
 * folder the temporary file must be made in, and which is renamed over);
 * a copy of path when it is no link; NULL when out of memory. */
static char *existing_target(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        return mlprof__strdup(path);
    char *real = realpath(path, NULL); /* the C library's memory */
    char *copy = mlprof__strdup(real ? real : path);
    free(real);
    return copy;
}

/* The file a path that does not exist yet would be: through dangling
 * symbolic links to it (a link made before the run), so that a link is
 * never replaced; NULL when out of memory. A relative target is taken from
 * the link's folder. */
static char *future_target(const char *path)
{
    char *cur = mlprof__strdup(path);
    for (int depth = 0; cur && depth < 40; depth++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        char target[PATH_MAX];
        ssize_t n = readlink(cur, target, sizeof target - 1);
        if (n <= 0)
            return cur;
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dir_len = target[0] != '/' && slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = mlprof__malloc(dir_len + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dir_len);
            memcpy(next + dir_len, target, (size_t)n + 1);
        }
        mlprof__free(cur);
        cur = next;
    }
    return cur; /* a loop of links: creating the file says so */
}

int mlprof__copy_fd(int from, int to, uint64_t n)
{
    off_t in = 0, left = (off_t)n;
    while (left > 0) {
        ssize_t k = copy_file_range(from, &in, to, NULL, (size_t)left, 0);
        if (k > 0) {
            left -= k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        break; /* not supported here: copy by hand */
    }
    char buf[1 << 16];
    while (left > 0) {
        /* no further than n: a spool a dump published holds that dump's tail after it */
        ssize_t k = pread(from, buf, (size_t)left < sizeof buf ? (size_t)left : sizeof buf, in);
        if (k == 0)
            errno = EIO; /* the file is shorter than what was written to it */
        if (k <= 0 || mlprof__write_all(to, buf, (size_t)k) != 0)
            return -1;
        in += k;
        left -= k;
    }
    return 0;
}

/* ------------------------------------ temporary files of dead processes */

/* The pid in a temporary file's name after "<path>.tmp-": "<pid>-XXXXXX",
 * "<pid>-XXXXXXl" (mlprof__out_adopt's link), or SQLite's files beside a
 * database being written there ("<pid>-XXXXXX-journal", "-wal", "-shm"),
 * or 0 when the name is not of that form. */
static pid_t temp_owner(const char *rest)
{
    char *end;
    errno = 0;
    long pid = strtol(rest, &end, 10);
    if (end == rest || *rest == '-' || *rest == '+' || errno || pid <= 0 || pid > INT_MAX || *end != '-')
        return 0;
    const char *x = end + 1, *tail = x + 6;
    if (strlen(x) < 6 || strspn(x, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") < 6)
        return 0;
    if (*tail && strcmp(tail, "l") != 0 && strcmp(tail, "-journal") != 0 && strcmp(tail, "-wal") != 0 &&
        strcmp(tail, "-shm") != 0)
        return 0;
    return (pid_t)pid;
}

/* How much of a final name's last component a temporary name keeps: all of
 * it, unless ".tmp-<pid>-XXXXXX" and adopt's "l" would pass NAME_MAX. */
#define TEMP_SUFFIX_MAX 24 /* ".tmp-" + 10 digits + "-XXXXXX" + "l", and one to spare */
static size_t temp_base_len(size_t base_len)
{
    return base_len + TEMP_SUFFIX_MAX > NAME_MAX ? NAME_MAX - TEMP_SUFFIX_MAX : base_len;
}

char *mlprof__temp_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash + 1 - path) : 0;
    size_t keep = temp_base_len(strlen(path + dir_len)), n = dir_len + keep + 40;
    char *t = mlprof__malloc(n);
    if (t)
        snprintf(t, n, "%.*s%.*s.tmp-%d-XXXXXX", (int)dir_len, path, (int)keep, path + dir_len, (int)getpid());
    return t;
}

/* The paths whose folder was searched already (by hash): once a process. */
static struct {
    pthread_mutex_t lock;
    pid_t pid;
    uint64_t done[32];
    size_t n, next;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int first_write_to(const char *path)
{
    uint64_t h = mlprof__hash(path, strlen(path));
    size_t cap = sizeof S.done / sizeof S.done[0];
    pthread_mutex_lock(&S.lock);
    if (S.pid != getpid()) { /* a forked child looks again */
        S.pid = getpid();
        S.n = S.next = 0;
    }
    int first = 1;
    for (size_t i = 0; i < S.n && first; i++)
        first = S.done[i] != h;
    if (first) {
        S.done[S.next++ % cap] = h;
        if (S.n < cap)
            S.n++;
    }
    pthread_mutex_unlock(&S.lock);
    return first;
}

/* Removes "<path>.tmp-<pid>-XXXXXX" of processes that no longer exist: the
 * temporary files of writes cut short by a kill. */
static void remove_stale_temps(const char *path)
{
    if (!first_write_to(path))
        return;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t base_len = temp_base_len(strlen(base));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, base_len) != 0 || strncmp(e->d_name + base_len, ".tmp-", 5) != 0)
            continue;
        pid_t pid = temp_owner(e->d_name + base_len + 5);
        if (pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH &&
            unlinkat(dirfd(d), e->d_name, 0) == 0)
            mlprof__log(MLPROF_LOG_INFO, "removed %s/%s, left by process %d killed while writing it", dir,
                        e->d_name, (int)pid);
    }
    closedir(d);
}

/* --------------------------------------------------------------- outputs */

/* The descriptor of this process that path names (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N), or -1. Such an output is written through the
 * descriptor itself, at its offset: a file a shell redirected output to is
 * added to, not replaced under the shell's feet nor written over. */
static int own_descriptor(const char *path)
{
    static const char *const std[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    for (int i = 0; i < 3; i++)
        if (strcmp(path, std[i]) == 0)
            return i;
    char mine[64];
    snprintf(mine, sizeof mine, "/proc/%d/fd/", (int)getpid());
    const char *prefixes[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", mine};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(path, prefixes[i], n) != 0 || path[n] < '0' || path[n] > '9')
            continue;
        char *end;
        long fd = strtol(path + n, &end, 10);
        return *end || fd > INT_MAX ? -1 : (int)fd;
    }
    return -1;
}

/* Opens what is not a regular file, to be written in place. */
static int open_in_place(mlprof__out *o, const struct stat *st)
{
    if (S_ISDIR(st->st_mode))
        return mlprof__fail(MLPROF_EIO, "cannot write %s: it is a directory", o->path);
    if (S_ISBLK(st->st_mode))
        return mlprof__fail(MLPROF_EIO, "cannot write %s: it is a block device (not overwritten)", o->path);
    /* not blocking: a FIFO with no reader is an error, not a wait */
    int fd = open(o->path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENXIO && S_ISFIFO(st->st_mode))
        return mlprof__fail(MLPROF_EIO, "cannot write %s: it is a FIFO and nothing reads it", o->path);
    if (fd < 0)
        return mlprof__fail(MLPROF_EIO, "cannot open %s: %s", o->path, strerror(errno));
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    o->fd = fd;
    return MLPROF_OK;
}

int mlprof__out_open(mlprof__out *o, const char *path)
{
    o->fd = -1;
    o->tmp = NULL;
    int own = own_descriptor(path);
    struct stat st;
    int exists = own < 0 && stat(path, &st) == 0;
    int in_place = own >= 0 || (exists && !S_ISREG(st.st_mode));
    /* what is written in place is opened by its own name: the kernel
     * follows its links (/dev/fd/1 to a pipe, through /proc) */
    o->path = in_place ? mlprof__strdup(path) : exists ? existing_target(path) : future_target(path);
    if (!o->path)
        return mlprof__fail(MLPROF_ENOMEM, "out of memory writing %s", path);
    int rc = MLPROF_OK;
    if (own >= 0) {
        o->fd = fcntl(own, F_DUPFD_CLOEXEC, 0);
        if (o->fd < 0)
            rc = mlprof__fail(MLPROF_EIO, "cannot write %s: %s", path, strerror(errno));
    } else if (in_place) {
        rc = open_in_place(o, &st);
    }
    if (in_place) {
        if (rc != MLPROF_OK) {
            mlprof__free(o->path);
            o->path = NULL;
        }
        return rc;
    }
    remove_stale_temps(o->path);
    o->tmp = mlprof__temp_name(o->path);
    if (!o->tmp) {
        mlprof__free(o->path);
        o->path = NULL;
        return mlprof__fail(MLPROF_ENOMEM, "out of memory writing %s", path);
    }
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd < 0) {
        rc = mlprof__fail(MLPROF_EIO, "cannot create %s: %s", o->tmp, strerror(errno));
        mlprof__free(o->tmp);
        mlprof__free(o->path);
        o->tmp = o->path = NULL;
        return rc;
    }
    /* mkostemp makes the file 0600; traces are meant to be shared like any output */
    fchmod(o->fd, 0644);
    return MLPROF_OK;
}

int mlprof__out_commit(mlprof__out *o, int ok)
{
    int rc = MLPROF_OK;
    if (close(o->fd) != 0 && ok) {
        rc = mlprof__fail(MLPROF_EIO, "cannot write %s: %s", o->path, strerror(errno));
        ok = 0;
    }
    if (ok && o->tmp && rename(o->tmp, o->path) != 0) {
        rc = mlprof__fail(MLPROF_EIO, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(errno));
        ok = 0;
    }
    if (!ok) {
        if (o->tmp)
            unlink(o->tmp);
        if (rc == MLPROF_OK)
            rc = MLPROF_EIO;
    }
    mlprof__free(o->tmp);
    mlprof__free(o->path);
    o->fd = -1;
    o->tmp = o->path = NULL;
    return rc;
}

int mlprof__out_adopt(mlprof__out *o, int fd)
{
    if (!o->tmp) {
        errno = EINVAL;
        return -1;
    }
    /* linked under a name of its own first, so that o keeps its temporary
     * file until fd's is in place: "<tmp>l" is still one of ours for
     * remove_stale_temps */
    char proc[64], *linked = mlprof__malloc(strlen(o->tmp) + 2);
    if (!linked) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    sprintf(linked, "%sl", o->tmp);
    int rc = linkat(AT_FDCWD, proc, AT_FDCWD, linked, AT_SYMLINK_FOLLOW);
    if (rc == 0 && rename(linked, o->tmp) != 0) {
        int err = errno;
        unlink(linked);
        errno = err;
        rc = -1;
    }
    mlprof__free(linked);
    return rc;
}

/* ------------------------------------------------- what a path names */

int mlprof__out_in_place(const char *path)
{
    struct stat st;
    return own_descriptor(path) >= 0 || (stat(path, &st) == 0 && !S_ISREG(st.st_mode));
}

/* The file a write to path would make, when nothing is there yet: through
 * dangling links (mlprof__out_open's target), its folder made absolute and
 * free of links, "." and ".." (kept as written when it does not exist);
 * NULL when out of memory. */
static char *future_file(const char *path)
{
    char *target = future_target(path);
    if (!target)
        return NULL;
    char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    char *dir = !slash ? mlprof__strdup(".") : mlprof__strndup(target, slash == target ? 1 : (size_t)(slash - target));
    char *real = dir ? realpath(dir, NULL) : NULL; /* the C library's memory */
    const char *folder = real ? real : dir;
    char *out = NULL;
    if (folder) {
        size_t n = strlen(folder) + strlen(base) + 2;
        if ((out = mlprof__malloc(n)) != NULL)
            snprintf(out, n, "%s%s%s", folder, strcmp(folder, "/") == 0 ? "" : "/", base);
    }
    free(real);
    mlprof__free(dir);
    mlprof__free(target);
    return out;
}

int mlprof__same_file(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) /* hard links and symbolic links alike */
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea != eb)
        return 0;
    char *wa = future_file(a), *wb = future_file(b);
    int same = wa && wb && strcmp(wa, wb) == 0;
    mlprof__free(wa);
    mlprof__free(wb);
    return same;
}

int mlprof__write_file_atomic(const char *path, const char *data, size_t len)
{
    mlprof__out o;
    int rc = mlprof__out_open(&o, path);
    if (rc != MLPROF_OK)
        return rc;
    int ok = mlprof__write_all(o.fd, data, len) == 0;
    if (!ok)
        mlprof__fail(MLPROF_EIO, "cannot write %s: %s", o.path, strerror(errno));
    return mlprof__out_commit(&o, ok);
}
