/* test_writes.c - the collector's write path when writing goes wrong: a full
 * disk (RLIMIT_FSIZE makes writes past a size fail with EFBIG, as ENOSPC
 * would), then room again; final dumps that fail and are retried; outputs
 * that are FIFOs, device nodes or symbolic links; continuous_dump turned off
 * and on; dropped events of one trace only; temporary files of a killed
 * process; memory outputs while memory profiling is off; outputs that would
 * replace the trace, and outputs named after a trace that is no file;
 * statistics and memory files that a finished dump could not write.
 *
 * usage: test_writes OUTDIR MODE. Each mode runs in a process of its own
 * (check_trace.py's area_writes runs them in turn and reads the traces). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static mlprof_domain *domain;

/* n spans named name; every drain_every spans a dump(0) (0: none), whose
 * last result is returned (MLPROF_OK if none). */
static int record(const char *name, int n, int drain_every)
{
    if (!domain)
        domain = mlprof_domain_create("writes");
    mlprof_span *s = mlprof_task_create(domain, name);
    int rc = MLPROF_OK;
    for (int i = 0; i < n; i++) {
        mlprof_begin(s);
        mlprof_end(s);
        if (drain_every && (i + 1) % drain_every == 0)
            rc = mlprof_dump(0);
    }
    return rc;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static mode_t file_type(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

/* Files whose names match pattern. */
static int count_matches(const char *pattern)
{
    glob_t g;
    int n = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

/* ------------------------------------------------------------ a full disk */

static struct rlimit original_fsize;

/* Writes past bytes fail with EFBIG (SIGXFSZ ignored), as on a full disk. */
static void limit_file_size(rlim_t bytes)
{
    struct rlimit r = original_fsize;
    r.rlim_cur = bytes;
    CHECK(setrlimit(RLIMIT_FSIZE, &r) == 0, "setrlimit: %s", strerror(errno));
}

static void room_again(void)
{
    CHECK(setrlimit(RLIMIT_FSIZE, &original_fsize) == 0, "setrlimit: %s", strerror(errno));
}

/* Defect: events formatted while the spool could not be written were thrown
 * away and the spool began with a stray ","; the dump said OK. */
static void mode_full(void)
{
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &original_fsize);
    CHECK_OK(mlprof_set_config("filename", tu_path("full.json")));
    CHECK_OK(mlprof_set_config("buffer_size", "256K"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    /* full from the start: not one event reaches the spool */
    limit_file_size(4096);
    CHECK_OK(record("a", 1000, 0));
    CHECK(mlprof_dump(0) == MLPROF_EIO, "the first dump to a full disk fails");
    room_again();
    CHECK_OK(mlprof_dump(0));
    long size = file_size(tu_path("full.json"));
    CHECK(size > 0, "first trace written");

    /* the disk fills: the spool and the trace (beside it) cannot grow */
    limit_file_size((rlim_t)size);
    int rc = record("b", 5000, 500);
    CHECK(rc == MLPROF_EIO, "a dump to a full disk fails: %s", mlprof_err_name(rc));
    CHECK(strstr(mlprof_last_error(), "File too large") != NULL, "the reason: %s", mlprof_last_error());
    CHECK(file_size(tu_path("full.json")) == size, "the old trace is left as it was");
    char *old = tu_read_file(tu_path("full.json"));
    CHECK(old && tu_count(old, "\"name\":\"a\"") == 1000 && tu_count(old, "\"name\":\"b\"") == 0,
          "the old trace holds the first events");
    free(old);

    /* room again: everything kept in memory is written */
    room_again();
    CHECK_OK(record("c", 1000, 0));
    CHECK_OK(mlprof_set_config("filename", tu_path("full_1.json")));
    CHECK_OK(mlprof_dump(0));
    size = file_size(tu_path("full_1.json"));

    /* full for longer than memory may hold (1 MiB here): the excess is lost, and counted */
    limit_file_size((rlim_t)size);
    rc = record("d", 20000, 500);
    CHECK(rc == MLPROF_EIO, "full again: %s", mlprof_err_name(rc));
    room_again();
    CHECK_OK(record("e", 1000, 0));
    CHECK_OK(mlprof_set_config("filename", tu_path("full_2.json")));
    rc = mlprof_dump(1);
    CHECK(rc == MLPROF_EIO, "the final dump says that events were lost: %s", mlprof_err_name(rc));
    CHECK(strstr(mlprof_last_error(), "lost") && strstr(mlprof_last_error(), "File too large"),
          "with the reason: %s", mlprof_last_error());
    CHECK(file_size(tu_path("full_2.json")) > size, "the trace is written all the same");

    /* a final dump to a full disk keeps everything for a retry */
    CHECK_OK(mlprof_set_config("filename", tu_path("full_3.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(record("f", 1000, 0));
    limit_file_size(4096);
    rc = mlprof_dump(1);
    CHECK(rc == MLPROF_EIO, "final dump to a full disk: %s", mlprof_err_name(rc));
    room_again();
    CHECK_OK(mlprof_dump(1));
    char *t = tu_read_file(tu_path("full_3.json"));
    CHECK(t && tu_count(t, "\"name\":\"f\"") == 1000, "the retry writes all 1000 spans: %d",
          t ? tu_count(t, "\"name\":\"f\"") : -1);
    free(t);
}

/* Defect: a final dump that failed after its temporary file was made reset
 * the trace anyway: a retry wrote nothing. */
static void mode_final(void)
{
    const char *dir = tu_path("adir");
    mkdir(dir, 0755);
    CHECK_OK(mlprof_set_config("filename", dir));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(record("g", 100, 0));
    mlprof_span *open = mlprof_task_create(domain, "open_g");
    mlprof_begin(open);
    int rc = mlprof_dump(1);
    CHECK(rc == MLPROF_EIO, "a directory is no trace file: %s", mlprof_err_name(rc));
    CHECK(strstr(mlprof_last_error(), "adir") != NULL, "the message names it: %s", mlprof_last_error());
    CHECK(file_type(dir) == S_IFDIR, "the directory is left alone");
    char pattern[1100];
    snprintf(pattern, sizeof pattern, "%s.tmp-*", dir);
    CHECK(count_matches(pattern) == 0, "no temporary file left beside it");
    CHECK_OK(mlprof_set_config("filename", tu_path("final.json")));
    CHECK_OK(mlprof_dump(1));
    char *t = tu_read_file(tu_path("final.json"));
    CHECK(t && tu_count(t, "\"name\":\"g\"") == 100 && tu_count(t, "\"name\":\"open_g\"") == 1,
          "the retry writes what the failed dump had");
    free(t);
}

/* ------------------------------------------------------- special files */

/* Reads a FIFO until its writer closes it (or 30 s pass without one). */
typedef struct fifo_reader {
    const char *path;
    int fd;
    char *data;
    size_t len;
    int eof;
    pthread_t th;
} fifo_reader;

static void *reader_main(void *arg)
{
    fifo_reader *r = arg;
    double deadline = now_s() + 30;
    size_t cap = 0;
    while (now_s() < deadline) {
        struct pollfd p = {r->fd, POLLIN, 0};
        int n = poll(&p, 1, 100);
        if (n <= 0)
            continue;
        char buf[65536];
        ssize_t k = read(r->fd, buf, sizeof buf);
        if (k == 0) {
            r->eof = 1;
            break;
        }
        if (k < 0)
            continue;
        if (r->len + (size_t)k + 1 > cap) {
            cap = 2 * (r->len + (size_t)k + 1);
            r->data = realloc(r->data, cap);
        }
        memcpy(r->data + r->len, buf, (size_t)k);
        r->len += (size_t)k;
        r->data[r->len] = '\0';
    }
    close(r->fd);
    return NULL;
}

static void reader_start(fifo_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    unlink(path);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo %s: %s", path, strerror(errno));
    /* a reader is there before the dump opens it */
    r->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK(r->fd >= 0, "open %s: %s", path, strerror(errno));
    pthread_create(&r->th, NULL, reader_main, r);
}

static void reader_finish(fifo_reader *r, const char *starts, const char *keep_as)
{
    pthread_join(r->th, NULL);
    CHECK(r->eof && r->data && strncmp(r->data, starts, strlen(starts)) == 0,
          "%s read whole through its FIFO (eof %d): %.40s", r->path, r->eof, r->data ? r->data : "(nothing)");
    CHECK(file_type(r->path) == S_IFIFO, "%s is still a FIFO", r->path);
    if (keep_as && r->data) {
        FILE *f = fopen(tu_path(keep_as), "wb");
        if (f) {
            fwrite(r->data, 1, r->len, f);
            fclose(f);
        }
    }
    free(r->data);
}

/* A character device made here (never the machine's own /dev nodes, which a
 * build without the fix would replace). 0 when it cannot be: not root, or a
 * file system mounted nodev. */
static int make_device(const char *path, unsigned minor)
{
    unlink(path);
    if (mknod(path, S_IFCHR | 0666, makedev(1, minor)) != 0) {
        printf("device nodes: skipped: mknod %s: %s\n", path, strerror(errno));
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        printf("device nodes: skipped: open %s: %s\n", path, strerror(errno));
        unlink(path);
        return 0;
    }
    close(fd);
    return 1;
}

static int is_device(const char *path, unsigned minor)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, minor);
}

/* Defect: a device node (or FIFO) at the output's path was replaced by a
 * regular file holding the trace. */
static void mode_special(void)
{
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(record("h", 100, 0));
    int block;
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, &block, sizeof block, "block"));
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, &block));

    /* a FIFO with no reader: refused at once, not waited on, and left alone */
    const char *lonely = tu_path("lonely.fifo");
    unlink(lonely);
    CHECK(mkfifo(lonely, 0644) == 0, "mkfifo: %s", strerror(errno));
    CHECK_OK(mlprof_set_config("filename", lonely));
    CHECK_OK(mlprof_set_config("memory_csv", ""));
    CHECK_OK(mlprof_set_config("memory_svg", ""));
    int rc = mlprof_dump(0);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "lonely.fifo"), "FIFO without a reader: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());
    CHECK(file_type(lonely) == S_IFIFO, "still a FIFO");

    /* a symbolic link: the file it points to is written, the link stays */
    const char *link = tu_path("link.json"), *target = tu_path("link_target.json");
    unlink(link);
    unlink(target);
    CHECK(symlink("link_target.json", link) == 0, "symlink: %s", strerror(errno));
    CHECK_OK(mlprof_set_config("filename", link));
    CHECK_OK(mlprof_dump(0));
    CHECK(file_type(link) == S_IFLNK, "the link is still a link");
    CHECK(file_type(target) == S_IFREG && file_size(target) > 0, "its target holds the trace");

    /* /dev/fd/N on a file (a shell's redirection): written through N, after
     * what N wrote before it, and the file stays the one N has open */
    const char *redirected = tu_path("redirected.txt");
    int fd = open(redirected, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    struct stat before, after;
    CHECK(fd >= 0 && write(fd, "before\n", 7) == 7 && fstat(fd, &before) == 0, "a redirected file");
    char fd_path[64];
    snprintf(fd_path, sizeof fd_path, "/dev/fd/%d", fd);
    CHECK_OK(mlprof_set_config("filename", fd_path));
    CHECK_OK(mlprof_dump(0));
    CHECK(write(fd, "after\n", 6) == 6, "written after");
    close(fd);
    CHECK(stat(redirected, &after) == 0 && after.st_ino == before.st_ino, "the same file");
    char *text = tu_read_file(redirected);
    size_t n = text ? strlen(text) : 0;
    CHECK(text && strncmp(text, "before\n{\"traceEvents\":[", 23) == 0 && n > 8 &&
              strcmp(text + n - 8, "}\nafter\n") == 0,
          "the trace between what was written before and after: %.30s", text ? text : "(none)");
    free(text);

    /* device nodes: written in place; a full device is an error */
    const char *null_dev = tu_path("null.dev"), *full_dev = tu_path("full.dev");
    if (geteuid() == 0 && make_device(null_dev, 3) && make_device(full_dev, 7)) {
        CHECK_OK(mlprof_set_config("filename", null_dev));
        CHECK_OK(mlprof_set_config("stats_file", null_dev));
        CHECK_OK(mlprof_dump(0));
        CHECK(is_device(null_dev, 3), "a copy of /dev/null is still that device");
        CHECK_OK(mlprof_set_config("stats_file", ""));
        CHECK_OK(mlprof_set_config("filename", full_dev));
        rc = mlprof_dump(0);
        CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "No space left on device"),
              "a copy of /dev/full: %s: %s", mlprof_err_name(rc), mlprof_last_error());
        CHECK(is_device(full_dev, 7), "a copy of /dev/full is still that device");
        unlink(null_dev);
        unlink(full_dev);
    } else if (geteuid() != 0) {
        /* nobody but root may add a file to /dev: the node itself is safe to try */
        CHECK_OK(mlprof_set_config("filename", "/dev/full"));
        rc = mlprof_dump(0);
        CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "No space left on device"),
              "/dev/full: %s: %s", mlprof_err_name(rc), mlprof_last_error());
        printf("device nodes: not root: /dev/full only\n");
    }

    /* every output through FIFOs that a reader empties */
    fifo_reader trace, stats, csv, svg;
    reader_start(&trace, tu_path("trace.fifo"));
    reader_start(&stats, tu_path("stats.fifo"));
    reader_start(&csv, tu_path("csv.fifo"));
    reader_start(&svg, tu_path("svg.fifo"));
    CHECK_OK(mlprof_set_config("filename", trace.path));
    CHECK_OK(mlprof_set_config("stats_file", stats.path));
    CHECK_OK(mlprof_set_config("memory_csv", csv.path));
    CHECK_OK(mlprof_set_config("memory_svg", svg.path));
    CHECK_OK(mlprof_dump(1));
    reader_finish(&trace, "{\"traceEvents\":[", "fifo_trace.json");
    reader_finish(&stats, "", NULL);
    reader_finish(&csv, "device,", NULL);
    reader_finish(&svg, "<", "fifo_flow.svg");
}

/* ---------------------------------------------------- continuous dumps */

/* Waits (60 s at most: a guard, not a measure) until the trace on disk holds
 * a span named name. */
static int wait_for_span(const char *path, const char *name)
{
    char needle[128];
    snprintf(needle, sizeof needle, "\"name\":\"%s\"", name);
    for (double deadline = now_s() + 60; now_s() < deadline; sleep_s(0.01)) {
        char *t = tu_read_file(path);
        int found = t && strstr(t, needle);
        free(t);
        if (found)
            return 1;
    }
    return 0;
}

/* Defect: continuous_dump turned off then on while running: its thread had
 * exited but stayed marked running, and no dump came again. */
static void mode_toggle(void)
{
    const char *path = tu_path("toggle.json");
    unlink(path);
    CHECK_OK(mlprof_set_config("filename", path));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    CHECK_OK(mlprof_set_config("dump_period", "0.02"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("before", 10, 0);
    CHECK(wait_for_span(path, "before"), "periodic dumps write the trace");

    CHECK_OK(mlprof_set_config("continuous_dump", "0"));
    sleep_s(0.3); /* the background thread sees it */
    record("while_off", 10, 0);
    sleep_s(0.3);
    char *t = tu_read_file(path);
    CHECK(t && !strstr(t, "\"name\":\"while_off\""), "no periodic dump while it is off");
    free(t);

    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    record("after", 10, 0);
    CHECK(wait_for_span(path, "after"), "periodic dumps again once it is back on");

    /* off and on at once, then across a stop and a start */
    CHECK_OK(mlprof_set_config("continuous_dump", "0"));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    record("again", 10, 0);
    CHECK(wait_for_span(path, "again"), "off and on at once");
    CHECK_OK(mlprof_set_config("continuous_dump", "0"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("restarted", 10, 0);
    CHECK(wait_for_span(path, "restarted"), "off while stopped, on, then started");
    CHECK_OK(mlprof_dump(1));
}

/* ------------------------------------------------------- dropped events */

/* Defect: otherData.dropped_events of a trace counted the drops of the
 * traces before it. Prints the first trace's drops for check_trace.py. */
static void mode_drops(void)
{
    CHECK_OK(mlprof_set_config("buffer_size", "64K"));
    CHECK_OK(mlprof_set_config("filename", tu_path("drops1.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("x", 20000, 0); /* 20000 pairs do not fit in 64 KiB */
    uint64_t dropped = mlprof_dropped_events();
    CHECK(dropped > 0, "drops in the first trace");
    printf("dropped=%llu\n", (unsigned long long)dropped);
    CHECK_OK(mlprof_dump(1));

    /* a finished trace, a clear, and a trace that lost nothing */
    CHECK_OK(mlprof_clear());
    CHECK_OK(mlprof_set_config("filename", tu_path("drops2.json")));
    CHECK_OK(mlprof_set_config("stats_file", tu_path("drops2_stats.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("y", 10, 0);
    CHECK_OK(mlprof_dump(1));

    /* drops, then a clear while running: the rest of the trace lost nothing */
    CHECK_OK(mlprof_set_config("stats_file", ""));
    CHECK_OK(mlprof_set_config("filename", tu_path("drops3.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("x", 20000, 0);
    CHECK(mlprof_dropped_events() > dropped, "drops again");
    CHECK_OK(mlprof_clear());
    record("z", 10, 0);
    CHECK_OK(mlprof_dump(1));
}

/* ------------------------------------------- a process killed mid-dump */

static char kill_pattern[1100];
static int kill_armed;

/* Once armed, the first allocation of mlprof while its temporary file
 * exists (the dump is writing it) kills the process. */
static void kill_if_writing(void)
{
    if (!__atomic_load_n(&kill_armed, __ATOMIC_RELAXED))
        return;
    if (count_matches(kill_pattern) > 0)
        kill(getpid(), SIGKILL);
}

static void *kill_malloc(size_t n)
{
    kill_if_writing();
    return malloc(n);
}

static void *kill_realloc(void *p, size_t n)
{
    kill_if_writing();
    return realloc(p, n);
}

static void mode_killed(void)
{
    CHECK_OK(mlprof_set_allocator(kill_malloc, kill_realloc, free));
    snprintf(kill_pattern, sizeof kill_pattern, "%s.tmp-*", tu_path("killed.json"));
    CHECK_OK(mlprof_set_config("filename", tu_path("killed.json")));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("k", 1000, 0);
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    __atomic_store_n(&kill_armed, 1, __ATOMIC_RELAXED);
    mlprof_dump(0);
    CHECK(0, "the dump was not killed while writing its temporary file");
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s: %s", path, strerror(errno));
    if (f)
        fclose(f);
}

/* Defect: temporary files of a process killed during a dump stayed beside
 * the trace for good. Run after mode killed. */
static void mode_stale(void)
{
    const char *path = tu_path("killed.json");
    char pattern[1100], name[1200];
    snprintf(pattern, sizeof pattern, "%s.tmp-*", path);
    CHECK(count_matches(pattern) == 1, "the killed process left its temporary file: %d", count_matches(pattern));
    /* one more of a process that is gone, one of a live process (ours: the
     * parent's, check_trace.py), a file that only looks alike, and the
     * temporary file of another output */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    snprintf(name, sizeof name, "%s.tmp-%d-Ab12Cd", path, (int)child);
    touch(name);
    /* and the link mlprof__out_adopt makes, "<tmp>l", of the same dead process,
     * and the files SQLite keeps beside a database written there */
    snprintf(name, sizeof name, "%s.tmp-%d-Ab12Cdl", path, (int)child);
    touch(name);
    snprintf(name, sizeof name, "%s.tmp-%d-Ab12Cd-journal", path, (int)child);
    touch(name);
    snprintf(name, sizeof name, "%s.tmp-%d-Ab12Cd-wal", path, (int)child);
    touch(name);
    char live[1200], notes[1200], other[1200], odd[1200];
    snprintf(odd, sizeof odd, "%s.tmp-%d-Ab12Cd-notes", path, (int)child); /* not SQLite's: kept */
    touch(odd);
    snprintf(live, sizeof live, "%s.tmp-%d-Ef34Gh", path, (int)getppid());
    snprintf(notes, sizeof notes, "%s.tmp-notes", path);
    snprintf(other, sizeof other, "%s.tmp-%d-Ij56Kl", tu_path("other.json"), (int)child);
    touch(live);
    touch(notes);
    touch(other);
    CHECK_OK(mlprof_set_config("filename", path));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("s", 10, 0);
    CHECK_OK(mlprof_dump(1));
    CHECK(count_matches(pattern) == 3, "only the live process's file and the look-alikes are left: %d",
          count_matches(pattern));
    CHECK(access(live, F_OK) == 0 && access(notes, F_OK) == 0 && access(other, F_OK) == 0 &&
              access(odd, F_OK) == 0,
          "the others are kept");
    unlink(live);
    unlink(notes);
    unlink(other);
    unlink(odd);
}

/* Defects: a trace written into a pipe whose reader was gone killed the
 * program with SIGPIPE; a final name of 241-255 bytes could never be
 * written, its temporary name passing NAME_MAX. */
static void mode_pipe_long(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    close(fds[0]); /* nobody reads */
    char path[1200];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[1]);
    CHECK_OK(mlprof_set_config("filename", path));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("p", 100, 0);
    int rc = mlprof_dump(0);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "Broken pipe") != NULL,
          "the dump into a pipe nobody reads fails, and the program lives: %d %s", rc, mlprof_last_error());
    sigset_t pending;
    CHECK(sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 0, "no SIGPIPE left pending");
    close(fds[1]);
    /* the same spans, kept, go to a file whose name is 250 bytes long */
    char name[256];
    memset(name, 'n', 245);
    snprintf(name + 245, sizeof name - 245, ".json");
    snprintf(path, sizeof path, "%s", tu_path(name));
    CHECK_OK(mlprof_set_config("filename", path));
    CHECK_OK(mlprof_dump(1));
    CHECK(access(path, F_OK) == 0, "a 250-byte name is written: %s", mlprof_last_error());
    printf("long=%s\n", name);
}

/* ------------------------------------------------- memory outputs, off */

/* Defect: with memory profiling off, mlprof_output_path still gave the
 * memory files' paths, which were never written (cnn_infer then failed). */
static void mode_memoff(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("memoff.json")));
    char path[1024];
    CHECK_OK(mlprof_output_path("memory_svg", path, sizeof path));
    CHECK(path[0] == '\0', "no memory picture while memory profiling is off: \"%s\"", path);
    CHECK_OK(mlprof_output_path("memory_csv", path, sizeof path));
    CHECK(path[0] == '\0', "no memory table while memory profiling is off: \"%s\"", path);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("m", 10, 0);
    CHECK_OK(mlprof_dump(1));
    CHECK(access(tu_path("memoff.memory.csv"), F_OK) != 0, "no memory table written");

    /* on, with nothing recorded: the files named are written */
    CHECK_OK(mlprof_set_config("profile_memory", "1"));
    CHECK_OK(mlprof_output_path("memory_csv", path, sizeof path));
    CHECK(strcmp(path, tu_path("memoff.memory.csv")) == 0, "the table's path: \"%s\"", path);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("m", 10, 0);
    CHECK_OK(mlprof_dump(1));
    CHECK(access(path, F_OK) == 0, "an empty memory table is written: %s", path);
    CHECK_OK(mlprof_output_path("memory_svg", path, sizeof path));
    CHECK(access(path, F_OK) == 0, "an empty memory picture is written: %s", path);
}

/* The messages the library logs, for the checks on what it says. */
static char logged[16384];
static void log_into(int level, const char *message, void *user)
{
    (void)level;
    (void)user;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", message);
    fprintf(stderr, "mlprof: %s\n", message);
}

/* Whether the trace at path is a whole JSON trace with spans named name. */
static int whole_trace(const char *path, const char *name)
{
    char *t = tu_read_file(path), needle[64];
    snprintf(needle, sizeof needle, "\"name\":\"%s\"", name);
    size_t n = t ? strlen(t) : 0;
    int ok = t && strncmp(t, "{\"traceEvents\":[", 16) == 0 && n > 4 && strcmp(t + n - 4, "}\n}\n") == 0 &&
             strstr(t, needle);
    free(t);
    return ok;
}

/* Defects: an output named on the trace's file (mlprof_dump_to's path, or
 * a link to it) replaced the trace with a CSV, an SVG, a database or the
 * statistics, and the dump succeeded. Now that output is refused
 * (MLPROF_EINVAL, naming the key and the path), the trace written. And at
 * "auto", the memory outputs and the database were named after a trace
 * written in place: /dev/null.memory.csv made in /dev (or the dump failing
 * where /dev is not writable); now they are left out, said once. */
static void mode_outputs(void)
{
    mlprof_set_log_handler(log_into, NULL);
    const char *k[] = {"filename", "profile_memory", "memory_csv", "memory_svg", "stats_file", "sqlite_file"};
    const char *names[] = {"o.json", NULL, "o.csv", "o.svg", "o.txt", "o.db"};
    char paths[6][1024];
    const char *v[6];
    for (int i = 0; i < 6; i++) {
        snprintf(paths[i], sizeof paths[i], "%s", names[i] ? tu_path(names[i]) : "1");
        v[i] = paths[i];
    }
    const char *trace = v[0];
    CHECK_OK(mlprof_set_configs(6, k, v));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("o", 10, 0);
    int block;
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, &block, sizeof block, "block"));
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, &block));
    int rc = mlprof_dump(0);
    int sqlite = access(v[5], F_OK) == 0; /* no libsqlite3: that key is left out */
    CHECK(rc == MLPROF_OK || !sqlite, "every output written: %s", mlprof_last_error());
    if (!sqlite)
        CHECK_OK(mlprof_set_config("sqlite_file", ""));
    for (int i = 2; i < (sqlite ? 6 : 5); i++) {
        rc = mlprof_dump_to(v[i], 0);
        const char *msg = mlprof_last_error();
        CHECK(rc == MLPROF_EINVAL && strstr(msg, k[i]) && strstr(msg, v[i]),
              "dump_to(%s): refused, naming %s: %s: %s", v[i], k[i], mlprof_err_name(rc), msg);
        CHECK(whole_trace(v[i], "o"), "%s holds the trace, not what %s writes", v[i], k[i]);
    }
    /* through a link to the output's file */
    const char *link = tu_path("o_link.json");
    unlink(link);
    CHECK(symlink("o.csv", link) == 0, "symlink: %s", strerror(errno));
    rc = mlprof_dump_to(link, 0);
    CHECK(rc == MLPROF_EINVAL && strstr(mlprof_last_error(), "memory_csv"), "dump_to a link to memory_csv: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());
    CHECK(whole_trace(v[2], "o"), "the link's target holds the trace");
    CHECK(tu_count(logged, "memory_csv=") == 1, "each refusal said on stderr too, once:\n%s", logged);
    /* the configured files, written as ever */
    CHECK_OK(mlprof_dump(1));
    char *csv = tu_read_file(v[2]);
    CHECK(csv && strncmp(csv, "device,", 7) == 0, "o.csv is the memory table again");
    free(csv);
    CHECK(whole_trace(trace, "o"), "and o.json the trace");

    /* auto beside a trace written in place: a regular file reached through
     * /dev/fd/N (a shell's redirection), and /dev/null */
    logged[0] = '\0';
    const char *k2[] = {"memory_csv", "memory_svg", "stats_file", "sqlite_file"};
    const char *v2[] = {"auto", "auto", "", sqlite ? "auto" : ""};
    CHECK_OK(mlprof_set_configs(4, k2, v2));
    const char *redirected = tu_path("o_redirected.json");
    int fd = open(redirected, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "open %s: %s", redirected, strerror(errno));
    char fd_path[64];
    snprintf(fd_path, sizeof fd_path, "/dev/fd/%d", fd);
    CHECK_OK(mlprof_set_config("filename", fd_path));
    char path[1024];
    CHECK_OK(mlprof_output_path("memory_csv", path, sizeof path));
    CHECK(path[0] == '\0', "no memory table named after %s: \"%s\"", fd_path, path);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("r", 10, 0);
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, &block, sizeof block, "block"));
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, &block));
    CHECK_OK(mlprof_dump(0));
    CHECK_OK(mlprof_dump(1));
    close(fd);
    CHECK(whole_trace(redirected, "r"), "the trace went through the descriptor");
    CHECK(tu_count(logged, "memory_csv=auto") == 1 && tu_count(logged, "memory_svg=auto") == 1,
          "each output left out is said once, naming its key:\n%s", logged);
    CHECK(!sqlite || tu_count(logged, "sqlite_file=auto") == 1, "the database too:\n%s", logged);
    glob_t g;
    CHECK(glob(tu_path("o_redirected*"), 0, NULL, &g) == 0 && g.gl_pathc == 1, "no file beside it: %zu",
          g.gl_pathc);
    globfree(&g);

    int had_csv = access("/dev/null.memory.csv", F_OK) == 0, had_svg = access("/dev/null.memory_flow.svg", F_OK) == 0;
    int had_db = access("/dev/null.db", F_OK) == 0;
    CHECK_OK(mlprof_set_config("filename", "/dev/null"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record("n", 10, 0);
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, &block, sizeof block, "block"));
    CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, &block));
    CHECK_OK(mlprof_dump(1));
    CHECK(had_csv || access("/dev/null.memory.csv", F_OK) != 0, "no /dev/null.memory.csv");
    CHECK(had_svg || access("/dev/null.memory_flow.svg", F_OK) != 0, "no /dev/null.memory_flow.svg");
    CHECK(had_db || access("/dev/null.db", F_OK) != 0, "no /dev/null.db");
    mlprof_set_log_handler(NULL, NULL);
}

/* ------------------------------------ outputs a finished dump cannot write */

/* path gone, whether a folder (with the files the tests put there) or a file. */
static void remove_path(const char *path)
{
    static const char *const inside[] = {"s.txt", "m.csv", "m.svg"};
    char sub[1200];
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        snprintf(sub, sizeof sub, "%s/%s", path, inside[i]);
        unlink(sub);
    }
    if (rmdir(path) != 0)
        unlink(path);
}

/* The trace at trace; stats_file and the memory files in the folder dir. */
static void outputs_in(const char *trace, const char *dir)
{
    char stats[1200], csv[1200], svg[1200];
    snprintf(stats, sizeof stats, "%s/s.txt", dir);
    snprintf(csv, sizeof csv, "%s/m.csv", dir);
    snprintf(svg, sizeof svg, "%s/m.svg", dir);
    const char *k[] = {"filename", "profile_memory", "stats_file", "memory_csv", "memory_svg"};
    const char *v[] = {trace, "1", stats, csv, svg};
    CHECK_OK(mlprof_set_configs(5, k, v));
}

/* n spans named name and 64 memory blocks (32 freed), then a finished dump:
 * its result. */
static int record_blocks(const char *name, int n)
{
    static char blocks[4][64];
    static int calls;
    char *b = blocks[calls++ % 4];
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record(name, n, 0);
    for (int i = 0; i < 64; i++)
        CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, &b[i], 1, "block"));
    for (int i = 0; i < 32; i++)
        CHECK_OK(mlprof_mem_free(MLPROF_DEVICE_CPU, &b[i]));
    return mlprof_dump(1);
}

static int same_text(const char *path, const char *text)
{
    char *t = tu_read_file(path);
    int same = t && text && strcmp(t, text) == 0;
    free(t);
    return same;
}

/* Defects: a finished dump that wrote the trace but not stats_file or a
 * memory file was taken as written: the trace was reset, and the next dump,
 * finding nothing recorded since, left everything as it was, so those files
 * were never written (not at exit either). And a failed output was said
 * nowhere on an explicit dump, the error naming only the last that failed
 * (each sink's message replaced the one before). Now those outputs wait for
 * the next dump, which writes them while the trace stays as written; each
 * failure is said on stderr once (again when its reason changes, and when it
 * is written again), and the error names every output that failed. The
 * outputs fail without a full disk: their folder is missing, then a file. */
static void mode_outfail(void)
{
    mlprof_set_log_handler(log_into, NULL);
    const char *trace = tu_path("of.json"), *dir = tu_path("of_dir");
    char stats[1200], csv[1200], svg[1200];
    snprintf(stats, sizeof stats, "%s/s.txt", dir);
    snprintf(csv, sizeof csv, "%s/m.csv", dir);
    snprintf(svg, sizeof svg, "%s/m.svg", dir);
    remove_path(dir);
    unlink(trace);
    outputs_in(trace, dir);
    int rc = record_blocks("of", 100);
    const char *msg = mlprof_last_error();
    CHECK(rc == MLPROF_EIO, "the outputs' folder is missing: %s: %s", mlprof_err_name(rc), msg);
    CHECK(strncmp(msg, "stats_file: ", 12) == 0 && strstr(msg, stats) &&
              strstr(msg, "(and 2 more outputs not written: memory_csv, memory_svg)"),
          "the error names every output that failed, the first one's reason whole: %s", msg);
    CHECK(tu_count(logged, "stats_file: cannot") == 1 && tu_count(logged, "memory_csv: cannot") == 1 &&
              tu_count(logged, "memory_svg: cannot") == 1 && tu_count(logged, "No such file or directory") == 3,
          "each failure is said on stderr:\n%s", logged);
    char *written = tu_read_file(trace);
    CHECK(written && tu_count(written, "\"name\":\"of\"") == 100, "the trace is written");

    /* still failing the same way: returned, not said again */
    rc = mlprof_dump(1);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "memory_csv, memory_svg"), "the retry fails too: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());
    CHECK(tu_count(logged, "stats_file: cannot") == 1 && tu_count(logged, "memory_svg: cannot") == 1,
          "a failure said already is not said again:\n%s", logged);
    CHECK(same_text(trace, written), "the trace is left as it was written");

    /* another reason: said again, once */
    int fd = open(dir, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "open %s: %s", dir, strerror(errno));
    close(fd);
    rc = mlprof_dump(0);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "Not a directory"), "a file in the way: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());
    rc = mlprof_dump(1);
    CHECK(rc == MLPROF_EIO, "still in the way: %s: %s", mlprof_err_name(rc), mlprof_last_error());
    CHECK(tu_count(logged, "stats_file: cannot") == 2 && tu_count(logged, "memory_csv: cannot") == 2 &&
              tu_count(logged, "memory_svg: cannot") == 2 && tu_count(logged, "Not a directory") == 3,
          "the new reason is said, once:\n%s", logged);
    CHECK(same_text(trace, written), "the trace is still as it was written");

    /* room: the retry writes every output, the trace left as it is */
    unlink(dir);
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
    CHECK_OK(mlprof_dump(1));
    char *text = tu_read_file(stats);
    CHECK(text && strstr(text, "Domain: writes") && strstr(text, " of "), "the statistics are written: %s",
          text ? text : "none");
    free(text);
    text = tu_read_file(csv);
    CHECK(text && strncmp(text, "device,", 7) == 0 && tu_count(text, ",freed\n") == 32 &&
              tu_count(text, ",live\n") == 32,
          "the memory table is written, every block in it: %s", text ? text : "none");
    free(text);
    text = tu_read_file(svg);
    CHECK(text && strstr(text, "</svg>"), "the memory picture is written");
    free(text);
    CHECK(same_text(trace, written), "the trace is not written again");
    CHECK(tu_count(logged, "is written again") == 3, "that they are written is said:\n%s", logged);

    /* written: the next dump has nothing to write again */
    unlink(stats);
    CHECK_OK(mlprof_dump(1));
    CHECK(access(stats, F_OK) != 0, "nothing waits once written");
    CHECK(same_text(trace, written), "and the trace is left as it is");
    free(written);

    /* a clear forgets what waited: the dump after it writes the empty trace asked for */
    remove_path(dir);
    rc = record_blocks("of2", 10);
    CHECK(rc == MLPROF_EIO, "the outputs fail again: %s", mlprof_err_name(rc));
    CHECK_OK(mlprof_clear());
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
    CHECK_OK(mlprof_dump(1));
    text = tu_read_file(trace);
    CHECK(text && !strstr(text, "\"name\":\"of2\""), "after a clear, the trace is empty");
    free(text);
    CHECK(access(stats, F_OK) == 0, "and the outputs are written");
    remove_path(dir);
    mlprof_set_log_handler(NULL, NULL);
}

/* The same, the retry being the dump at exit (check_trace.py reads the
 * files it writes): the trace stays as the failed dump wrote it. */
static void mode_outfail_exit(void)
{
    const char *trace = tu_path("ofx.json"), *dir = tu_path("ofx_dir");
    remove_path(dir);
    unlink(trace);
    outputs_in(trace, dir);
    int rc = record_blocks("ofx", 100);
    CHECK(rc == MLPROF_EIO, "the outputs' folder is missing: %s: %s", mlprof_err_name(rc), mlprof_last_error());
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
}

/* A continuous dump whose outputs fail at every period (stats_file in a
 * folder that never comes, memory_svg on /dev/full) says each once, not at
 * every period; the dump at exit, failing too, names them all
 * (check_trace.py reads stderr). */
static void mode_outfail_cont(void)
{
    mlprof_set_log_handler(log_into, NULL);
    const char *trace = tu_path("ofc.json"), *dir = tu_path("ofc_missing");
    remove_path(dir);
    unlink(trace);
    char stats[1200];
    snprintf(stats, sizeof stats, "%s/s.txt", dir);
    const char *k[] = {"filename", "profile_memory", "stats_file", "memory_csv", "memory_svg", "continuous_dump",
                       "dump_period"};
    const char *v[] = {trace, "1", stats, "", "/dev/full", "1", "0.02"};
    CHECK_OK(mlprof_set_configs(7, k, v));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    static int block;
    CHECK_OK(mlprof_mem_alloc(MLPROF_DEVICE_CPU, &block, sizeof block, "block"));
    /* three periodic dumps at least: each waits for spans recorded after the one before */
    static const char *const names[] = {"ofc1", "ofc2", "ofc3"};
    for (int i = 0; i < 3; i++) {
        record(names[i], 10, 0);
        CHECK(wait_for_span(trace, names[i]), "a periodic dump writes %s", names[i]);
    }
    int rc = mlprof_dump(1); /* the continuous dump's thread has stopped: logged is read after */
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "stats_file") && strstr(mlprof_last_error(), "memory_svg"),
          "the final dump names both: %s: %s", mlprof_err_name(rc), mlprof_last_error());
    CHECK(tu_count(logged, "stats_file: cannot") == 1 && tu_count(logged, "memory_svg: cannot write /dev/full") == 1,
          "each output that fails at every dump is said once:\n%s", logged);
    CHECK(tu_count(logged, "continuous dump") == 0, "and not again by the continuous dump:\n%s", logged);
}

/* Perfetto's protobuf through a full disk: the packets lost held interned
 * names, defaults and track descriptors that later packets need; the sink
 * says them again after the loss, so that everything written after it reads
 * back (check_trace.py decodes the trace with mlprof analyze). */
static void mode_full_pf(void)
{
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &original_fsize);
    const char *path = tu_path("full_pf.pftrace");
    CHECK_OK(mlprof_set_config("filename", path));
    CHECK_OK(mlprof_set_config("buffer_size", "256K"));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    CHECK_OK(record("a", 1000, 0));
    CHECK_OK(mlprof_dump(0));
    long size = file_size(path);
    CHECK(size > 0, "first trace written");
    /* full for longer than memory may hold: spans of names first seen while
     * full, with arguments, on a second thread too: all of it interned in
     * packets that are lost */
    limit_file_size((rlim_t)size);
    mlprof_span *lost_names[4];
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "lost%d", i);
        lost_names[i] = mlprof_task_create(domain, name);
    }
    for (int i = 0; i < 100000; i++) {
        mlprof_begin(lost_names[i % 4]);
        mlprof_arg_str("kind", i % 2 ? "odd" : "even");
        mlprof_end(lost_names[i % 4]);
        if ((i + 1) % 500 == 0)
            mlprof_dump(0);
    }
    room_again();
    /* after the loss: the same names and argument values again, and new ones */
    for (int i = 0; i < 400; i++) {
        mlprof_begin(lost_names[i % 4]);
        mlprof_arg_str("kind", i % 2 ? "odd" : "even");
        mlprof_end(lost_names[i % 4]);
    }
    CHECK_OK(record("after", 1000, 0));
    int rc = mlprof_dump(1);
    CHECK(rc == MLPROF_EIO, "the final dump says that events were lost: %s", mlprof_err_name(rc));
    printf("full_pf written=%ld\n", file_size(path));
}

/* 1 when a descriptor of this process is the file at path (the same inode). */
static int open_here(const char *path)
{
    struct stat want;
    if (stat(path, &want) != 0)
        return 0;
    for (int fd = 0; fd < 1024; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino)
            return 1;
    }
    return 0;
}

/* A dump writes its spool once: the spool file becomes the trace (linked
 * into place, not copied). What a dump published stays as it was while the
 * trace goes on (a link made to it keeps the first dump's events only), and
 * the next dump has everything; plain and gzip. */
static void mode_linked(void)
{
    static const char *const ext[] = {".json", ".json.gz"};
    for (int z = 0; z < 2; z++) {
        char name[64], first[4096], second[4096];
        snprintf(name, sizeof name, "linked%s", ext[z]);
        const char *path = tu_path(name);
        snprintf(first, sizeof first, "%s", tu_path(z ? "linked_first.json.gz" : "linked_first.json"));
        snprintf(second, sizeof second, "%s", tu_path(z ? "linked_second.json.gz" : "linked_second.json"));
        unlink(path);
        unlink(first);
        unlink(second);
        CHECK_OK(mlprof_set_config("filename", path));
        CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
        record("a", 30000, 0); /* more than the 1 MiB the collector keeps before it spools */
        CHECK_OK(mlprof_dump(0));
        CHECK(open_here(path), "%s: the file a dump wrote is its spool, not a copy", name);
        CHECK(link(path, first) == 0, "link %s: %s", first, strerror(errno));
        struct stat st;
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "%s: mode %o, as other outputs", name,
              (unsigned)(st.st_mode & 0777));
        record("b", 30000, 0);
        CHECK_OK(mlprof_dump(0));
        CHECK(link(path, second) == 0, "link %s: %s", second, strerror(errno));
        record("c", 10, 0);
        CHECK_OK(mlprof_set_state(MLPROF_STATE_STOP));
        CHECK_OK(mlprof_dump(1));
    }
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    const char *mode = argc > 2 ? argv[2] : "";
    static const struct {
        const char *name;
        void (*fn)(void);
    } modes[] = {{"full", mode_full},     {"final", mode_final},   {"special", mode_special},
                 {"toggle", mode_toggle}, {"drops", mode_drops},   {"killed", mode_killed},
                 {"stale", mode_stale},   {"memoff", mode_memoff}, {"linked", mode_linked}, {"full_pf", mode_full_pf},
                 {"outputs", mode_outputs}, {"outfail", mode_outfail}, {"outfail_exit", mode_outfail_exit},
                 {"outfail_cont", mode_outfail_cont}, {"pipe_long", mode_pipe_long}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(mode, modes[i].name) == 0) {
            modes[i].fn();
            char label[64];
            snprintf(label, sizeof label, "test_writes %s", mode);
            return tu_finish(label);
        }
    }
    fprintf(stderr,
            "usage: test_writes OUTDIR full|final|special|toggle|drops|killed|stale|memoff|linked|full_pf|outputs|"
            "outfail|outfail_exit|outfail_cont|pipe_long\n");
    return 2;
}
