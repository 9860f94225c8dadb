/* test_sqlite_sink.c - the sqlite sink (src/export/sqlite_sink.c) driven
 * through its ops, as the collector drives it, and its database read back
 * with SQL:
 *
 * 1. Spans nested on a thread arrive children first: each row has its depth,
 *    its parent (the parent's id given before the parent ended), its self
 *    time; arguments of every JSON kind are rows of args (numbers with num);
 *    an unfinished span has "unfinished": true; a frame is an async b/e
 *    pair; instants with their scope; counter samples on one track per
 *    series; a flow between the spans around its two ends; a kernel with its
 *    launch and the operators around the launch; names of the process,
 *    threads and stream.
 * 2. A dump that is not the last publishes a complete database with the
 *    tail (a span still open, shown up to now), which the working database
 *    does not keep: after the span ends, the final database has it once,
 *    with the id it had in the tail, and its child under it.
 * 3. A dump that cannot publish (the target is a directory) fails, says why,
 *    and keeps the events: the next dump to a good path has them all. No
 *    temporary file is left after the final dump. A final dump that fails
 *    leaves the working database on disk when the trace is reset.
 * 4. With "nolib" as second argument: sqlite_library names a file that
 *    is not there; the dump fails with a message naming it and Debian's
 *    package, once on stderr, and nothing is written.
 *
 * 5. With "record" as second argument: a run recorded through the API on
 *    three threads, with sqlite_file=auto (see record()); with "continuous",
 *    one under the continuous dump (see continuous()).
 *
 * 6. With "full": a full disk, made by RLIMIT_FSIZE (writes past a size fail,
 *    as on a full disk; no root needed): a COMMIT that fails keeps the rows
 *    for the later dumps, a working database that cannot be created too,
 *    and rows past buffer_size in memory are counted (meta, otherData, the
 *    message) with none written without its span. See full_disk().
 * 7. With "tmpfs": the same through the API on a small tmpfs filled up
 *    (ENOSPC), as root in a mount namespace of its own; skipped, saying why,
 *    where mounting is not permitted. See tmpfs_disk().
 *
 * It also writes the same events as a Chrome JSON trace (OUT/direct.json),
 * which tests/sqlite_sink_check.py exports with `mlprof export --sqlite` and
 * compares with OUT/direct.db table by table.
 *
 * Skips (saying why) when libsqlite3 cannot be loaded here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/common/sqlite_db.h"
#include "../src/export/sink.h"
#include "testutil.h"

static const mlprof__sqlite_api *S;
static const mlprof__sink_ops *ops = &mlprof__sqlite_sink;
static void *st;
static FILE *json;
static int json_first = 1;
static const pid_t P = 4242;

/* --------------------------------------------------- reading it back */

/* The first column of the first row of sql on the database at path, or
 * -1000000 when it cannot be read. */
static long long q(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    long long v = -1000000;
    if (S->open_v2(path, &db, 0x1 /* SQLITE_OPEN_READONLY */, NULL) != 0) {
        fprintf(stderr, "cannot open %s\n", path);
    } else if (S->prepare_v2(db, sql, -1, &s, NULL) != 0) {
        fprintf(stderr, "%s: %s\n", sql, S->errmsg(db));
    } else if (S->step(s) == MLPROF__SQLITE_ROW) {
        v = S->column_int64(s, 0);
    }
    if (s)
        S->finalize(s);
    if (db)
        S->close(db);
    return v;
}

#define CHECK_Q(path, want, sql)                                                                  \
    do {                                                                                          \
        long long got_ = q(path, sql);                                                            \
        CHECK(got_ == (long long)(want), "%s: %s gives %lld, wanted %lld", path, sql, got_, (long long)(want)); \
    } while (0)

/* ------------------------------------------------ events, both ways */

static void json_event(const char *fmt, ...) MLPROF_I_PRINTF(1, 2);
static void json_event(const char *fmt, ...)
{
    if (!json)
        return;
    fputs(json_first ? "\n" : ",\n", json);
    json_first = 0;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(json, fmt, ap);
    va_end(ap);
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

static const mlprof__sink_out stream = {NULL, 0}, tail = {NULL, 1};

static void span(pid_t tid, const char *name, const char *cat, uint64_t b, uint64_t e, uint32_t depth, uint64_t self,
                 const char *args, int unfinished)
{
    mlprof__span_out s = {.name = name, .name_len = strlen(name), .domain = cat, .kind = MLPROF__OUT_TASK,
                          .begin_ns = b, .end_ns = e, .pid = P, .tid = tid, .args = args,
                          .args_len = args ? strlen(args) : 0, .unfinished = unfinished, .self_ns = self,
                          .depth = depth};
    ops->span(st, &stream, &s);
    const char *extra = unfinished ? "\"unfinished\":true" : "";
    json_event("{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{%s%s%s}}",
               name, cat, (int)P, (int)tid, us(b), us(e - b), args ? args : "", args && *extra ? "," : "", extra);
}

static void frame(pid_t tid, const char *name, uint64_t b, uint64_t e, uint64_t id, const char *args)
{
    mlprof__span_out s = {.name = name, .name_len = strlen(name), .domain = "d", .kind = MLPROF__OUT_FRAME,
                          .begin_ns = b, .end_ns = e, .pid = P, .tid = tid, .args = args,
                          .args_len = strlen(args), .frame_id = id};
    ops->span(st, &stream, &s);
    json_event("{\"ph\":\"b\",\"name\":\"%s\",\"cat\":\"d\",\"pid\":%d,\"tid\":%d,\"id\":\"%llu\",\"ts\":%.3f,"
               "\"args\":{%s}}",
               name, (int)P, (int)tid, (unsigned long long)id, us(b), args);
    json_event("{\"ph\":\"e\",\"name\":\"%s\",\"cat\":\"d\",\"pid\":%d,\"tid\":%d,\"id\":\"%llu\",\"ts\":%.3f}", name,
               (int)P, (int)tid, (unsigned long long)id, us(e));
}

static void instant(pid_t tid, const char *name, uint64_t ts, int scope, const char *args)
{
    mlprof__instant_out e = {.name = name, .name_len = strlen(name), .domain = "m", .ts_ns = ts, .scope = scope,
                             .pid = P, .tid = tid, .args = args, .args_len = args ? strlen(args) : 0};
    ops->instant(st, &stream, &e);
    json_event("{\"ph\":\"i\",\"name\":\"%s\",\"cat\":\"m\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"s\":\"%c\""
               "%s%s%s}",
               name, (int)P, (int)tid, us(ts), "gpt"[scope], args ? ",\"args\":{" : "", args ? args : "",
               args ? "}" : "");
}

static void counter(const char *name, uint64_t ts, double v, int is_int)
{
    mlprof__counter_out c = {.name = name, .domain = "c", .ts_ns = ts, .value = v, .is_int = is_int,
                             .ivalue = (int64_t)v, .pid = P, .tid = 11};
    ops->counter(st, &stream, &c);
    json_event("{\"ph\":\"C\",\"name\":\"%s\",\"cat\":\"c\",\"pid\":%d,\"tid\":11,\"ts\":%.3f,\"args\":{\"value\":%.17g}}",
               name, (int)P, us(ts), v);
}

static void flow(char ph, uint64_t id, pid_t tid, uint64_t ts)
{
    mlprof__flow_out f = {.ph = ph, .id = id, .name = "flow", .domain = "f", .ts_ns = ts, .pid = P, .tid = tid};
    ops->flow(st, &stream, &f);
    json_event("{\"ph\":\"%c\",\"name\":\"flow\",\"cat\":\"f\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"id\":%llu%s}", ph,
               (int)P, (int)tid, us(ts), (unsigned long long)id, ph == 'f' ? ",\"bp\":\"e\"" : "");
}

static void track(const mlprof__sink_out *out, int kind, pid_t tid, const char *name)
{
    mlprof__track_out t = {.kind = kind, .pid = P, .tid = tid, .name = name};
    ops->track(st, out, &t);
    if (out->tail)
        return;
    if (kind == MLPROF__TRACK_PROCESS)
        json_event("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", (int)P,
                   (int)P, name);
    else
        json_event("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}", (int)P,
                   (int)tid, name);
}

static int dump(const char *trace, int finished)
{
    mlprof__trace_meta m = {.pid = P, .process_name = "proc", .host = "h", .clock = "monotonic", .start_ns = 1,
                            .dump_ns = 9000, .finished = finished, .other_data = "\"k\":1", .other_data_len = 5};
    mlprof__sink_dump d = {.trace_path = trace, .finished = finished, .meta = &m};
    return ops->dump(st, &d);
}

/* Temporary files ("*.tmp-*") left in the output folder. */
static int temporaries(void)
{
    DIR *dir = opendir(tu_dir);
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (dir)
        closedir(dir);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    char *cmd = malloc(strlen(from) + strlen(to) + 16);
    sprintf(cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0, "%s", cmd);
    free(cmd);
}

/* ------------------------------------------------------------ the tests */

static void no_library(void)
{
    CHECK_OK(mlprof_set_config("sqlite_library", tu_path("libnosqlite.so.0")));
    CHECK_OK(mlprof_set_config("sqlite_file", tu_path("nolib.db")));
    st = ops->create();
    ops->reset(st);
    span(11, "A", "d", 0, 10, 0, 10, NULL, 0);
    int rc = dump(tu_path("nolib.json"), 0);
    CHECK(rc == MLPROF_EUNSUPPORTED, "dump without SQLite: %s", mlprof_err_name(rc));
    const char *msg = mlprof_last_error();
    CHECK(strstr(msg, "libnosqlite.so.0") && strstr(msg, "libsqlite3-0") && strstr(msg, "sqlite_file"),
          "message: %s", msg);
    rc = dump(tu_path("nolib.json"), 1);
    CHECK(rc == MLPROF_EUNSUPPORTED, "second dump without SQLite: %s", mlprof_err_name(rc));
    struct stat sb;
    CHECK(stat(tu_path("nolib.db"), &sb) != 0, "a database was written without SQLite");
    CHECK(temporaries() == 0, "temporary files left");
    ops->destroy(st);
}

/* ------------------------------------------- a recorded run ("record") */

static mlprof_domain *g_dom;
static mlprof_span *g_step, *g_forward, *g_matmul;
static mlprof_marker *g_tick;
static mlprof_counter *g_queue;

static void *worker(void *arg)
{
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++) {
        mlprof_begin(g_step);
        mlprof_arg_int("i", i);
        mlprof_begin(g_forward);
        mlprof_arg_str("layer", i % 2 ? "conv" : "relu \"quoted\"");
        mlprof_arg_double("scale", 0.5 + i);
        for (int k = 0; k < 2; k++) {
            mlprof_begin(g_matmul);
            mlprof_end(g_matmul);
        }
        mlprof_mark(g_tick, MLPROF_SCOPE_THREAD);
        mlprof_arg_int("at", i);
        mlprof_end(g_forward);
        mlprof_counter_set(g_queue, i);
        mlprof_end(g_step);
    }
    return NULL;
}

static void run_threads(int nthreads, int n)
{
    pthread_t t[8];
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)n);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
}

/* Records on three threads into OUT/run.json with sqlite_file=auto
 * (OUT/run.db): a dump that is not the last while "outer" is open (its
 * files copied to mid.json and mid.db), then the last. Prints each dump's
 * status; the checks are sqlite_sink_check.py's. */
static int record(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("run.json")));
    CHECK_OK(mlprof_set_config("sqlite_file", "auto"));
    g_dom = mlprof_domain_create("work");
    g_step = mlprof_task_create(g_dom, "step");
    g_forward = mlprof_task_create(g_dom, "forward");
    g_matmul = mlprof_task_create(g_dom, "matmul");
    mlprof_span *outer = mlprof_task_create(g_dom, "outer");
    mlprof_span *epoch = mlprof_frame_create(g_dom, "epoch");
    g_tick = mlprof_marker_create(g_dom, "tick");
    g_queue = mlprof_counter_create(g_dom, "queue");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    mlprof_begin(epoch);
    mlprof_begin(outer);
    mlprof_arg_str("phase", "first");
    run_threads(3, 50);
    int rc = mlprof_dump(0);
    printf("dump 0: %s\n", mlprof_err_name(rc));
    if (rc == MLPROF_OK) {
        copy_file(tu_path("run.json"), tu_path("mid.json"));
        copy_file(tu_path("run.db"), tu_path("mid.db"));
    }
    run_threads(3, 50);
    mlprof_end(outer);
    mlprof_end(epoch);
    rc = mlprof_dump(1);
    printf("dump 1: %s%s%s\n", mlprof_err_name(rc), rc ? ": " : "", rc ? mlprof_last_error() : "");
    return tu_finish("test_sqlite_sink record");
}

/* The continuous dump ("continuous"): records until the dump thread has
 * published OUT/cont.db, copies it (to live.db) while the run goes on, then
 * the last dump. sqlite_sink_check.py opens the copy. */
static int continuous(void)
{
    CHECK_OK(mlprof_set_config("filename", tu_path("cont.json")));
    CHECK_OK(mlprof_set_config("sqlite_file", "auto"));
    CHECK_OK(mlprof_set_config("continuous_dump", "1"));
    CHECK_OK(mlprof_set_config("dump_period", "0.02"));
    g_dom = mlprof_domain_create("work");
    g_step = mlprof_task_create(g_dom, "step");
    g_forward = mlprof_task_create(g_dom, "forward");
    g_matmul = mlprof_task_create(g_dom, "matmul");
    g_tick = mlprof_marker_create(g_dom, "tick");
    g_queue = mlprof_counter_create(g_dom, "queue");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    struct stat sb;
    /* until the dump thread has written the database (60 s at most) */
    for (int i = 0; i < 3000 && stat(tu_path("cont.db"), &sb) != 0; i++) {
        run_threads(2, 5);
        usleep(20000);
    }
    run_threads(2, 20);
    CHECK(stat(tu_path("cont.db"), &sb) == 0, "the continuous dump wrote no %s", tu_path("cont.db"));
    copy_file(tu_path("cont.db"), tu_path("live.db"));
    int rc = mlprof_dump(1);
    printf("dump 1: %s%s%s\n", mlprof_err_name(rc), rc ? ": " : "", rc ? mlprof_last_error() : "");
    return tu_finish("test_sqlite_sink continuous");
}

/* ------------------------------------------------ a full disk ("full") */

/* Writes past bytes fail (EFBIG, SIGXFSZ ignored), as on a full disk;
 * RLIM_INFINITY: no limit. */
static void limit_files(rlim_t bytes)
{
    struct rlimit r;
    getrlimit(RLIMIT_FSIZE, &r);
    r.rlim_cur = bytes == RLIM_INFINITY ? r.rlim_max : bytes;
    CHECK(setrlimit(RLIMIT_FSIZE, &r) == 0, "setrlimit: %s", strerror(errno));
}

/* The size of the one working database ("*.tmp-*") in the output folder, or -1. */
static long working_size(void)
{
    DIR *dir = opendir(tu_dir);
    long size = -1;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        struct stat sb;
        if (strstr(e->d_name, ".tmp-") && stat(tu_path(e->d_name), &sb) == 0)
            size = (long)sb.st_size;
    }
    if (dir)
        closedir(dir);
    return size;
}

/* n spans "s" with an argument each on thread 11, from time *t on. */
static void spans(int n, uint64_t *t)
{
    for (int i = 0; i < n; i++, *t += 10)
        span(11, "s", "d", *t, *t + 5, 0, 5, "\"i\":1", 0);
}

static void full_disk(void)
{
    signal(SIGXFSZ, SIG_IGN);
    /* what an earlier run may have left (a working database kept) */
    DIR *dir = opendir(tu_dir);
    for (struct dirent *e; dir && (e = readdir(dir));) {
        if (strstr(e->d_name, ".tmp-"))
            unlink(tu_path(e->d_name));
    }
    if (dir)
        closedir(dir);
    uint64_t t = 1000;
    const int n = 3000;

    /* a COMMIT that fails: SQLite rolls its transaction back; the rows it
     * held are written at the next dump that has room, and later ones too */
    char *db = strdup(tu_path("full.db"));
    unlink(db);
    CHECK_OK(mlprof_set_config("sqlite_file", db));
    st = ops->create();
    ops->reset(st);
    spans(n, &t); /* the working database made (its tables committed), the rows in its transaction */
    long size = working_size();
    CHECK(size > 0, "no working database");
    limit_files((rlim_t)size);
    int rc = dump(tu_path("full.json"), 0);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "COMMIT") && strstr(mlprof_last_error(), "wait in memory"),
          "a COMMIT past the limit: %s: %s", mlprof_err_name(rc), mlprof_last_error());
    CHECK(access(db, F_OK) != 0, "a database was published though its rows could not be committed");
    spans(n, &t); /* more while the disk is full: they wait too */
    rc = dump(tu_path("full.json"), 0);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "wait in memory"), "a second dump on a full disk: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());
    limit_files(RLIM_INFINITY); /* room again */
    spans(n, &t);
    CHECK_OK(dump(tu_path("full.json"), 0));
    CHECK_Q(db, 3 * n, "SELECT count(*) FROM slices");
    CHECK_Q(db, 3 * n, "SELECT count(*) FROM args");
    spans(n, &t);
    CHECK_OK(dump(tu_path("full.json"), 1));
    CHECK_Q(db, 4 * n, "SELECT count(*) FROM slices");
    CHECK_Q(db, 4 * n, "SELECT count(DISTINCT ts_ns) FROM slices");
    CHECK_Q(db, 0, "SELECT count(*) FROM meta WHERE key = 'rows_lost'");
    CHECK(temporaries() == 0, "temporary files left");
    ops->reset(st);

    /* a working database that cannot be created: the rows wait in memory,
     * the message says why, and the next dump with room writes them all */
    unlink(db);
    limit_files(0);
    spans(n, &t);
    rc = dump(tu_path("full.json"), 0);
    const char *msg = mlprof_last_error();
    CHECK(rc == MLPROF_EIO && strstr(msg, "disk I/O error") && strstr(msg, "rows wait in memory"),
          "a working database that cannot be made: %s: %s", mlprof_err_name(rc), msg);
    limit_files(RLIM_INFINITY);
    spans(n, &t);
    CHECK_OK(dump(tu_path("full.json"), 0));
    CHECK_Q(db, 2 * n, "SELECT count(*) FROM slices");
    spans(n, &t);
    CHECK_OK(dump(tu_path("full.json"), 1));
    CHECK_Q(db, 3 * n, "SELECT count(*) FROM slices");
    CHECK_Q(db, 0, "SELECT count(*) FROM meta WHERE key = 'rows_lost'");
    CHECK(temporaries() == 0, "temporary files left");
    ops->reset(st);

    /* more than buffer_size (64 KiB here) waiting in memory: the rows past
     * it are lost, counted and said (the message, meta, otherData); none is
     * written without its span, and every row is written or counted */
    unlink(db);
    CHECK_OK(mlprof_set_config("buffer_size", "65536"));
    limit_files(0);
    spans(n, &t);
    rc = dump(tu_path("full.json"), 0);
    msg = mlprof_last_error();
    CHECK(rc == MLPROF_EIO && strstr(msg, "rows could not be written") && strstr(msg, "buffer_size"),
          "rows past buffer_size: %s: %s", mlprof_err_name(rc), msg);
    limit_files(RLIM_INFINITY);
    spans(10, &t); /* room again: the first event after the dump tries, so that these are written */
    rc = dump(tu_path("full.json"), 1);
    msg = mlprof_last_error();
    CHECK(rc == MLPROF_EIO && strstr(msg, "rows could not be written") && strstr(msg, "buffer_size"),
          "the final dump of a trace that lost rows: %s: %s", mlprof_err_name(rc), msg);
    long long slices = q(db, "SELECT count(*) FROM slices");
    long long lost = q(db, "SELECT value FROM meta WHERE key = 'rows_lost'");
    CHECK(slices > 10 && slices < n, "%lld slices written of %d", slices, n + 10);
    CHECK(lost > 0, "rows_lost: %lld", lost);
    CHECK_Q(db, slices, "SELECT count(*) FROM args");
    /* a slice and an argument a span (and a process, a thread, its track) */
    CHECK(2 * slices + lost == 2 * (n + 10), "%lld slices written and %lld rows lost of %d spans", slices, lost,
          n + 10);
    CHECK_Q(db, 10, "SELECT count(*) FROM slices WHERE ts_ns > (SELECT max(ts_ns) - 100 FROM slices)");
    CHECK_Q(db, 1, "SELECT count(*) FROM processes");
    CHECK_Q(db, 1, "SELECT count(*) FROM meta WHERE key = 'rows_lost_reason' AND value LIKE '%buffer_size%'");
    CHECK_Q(db, 1, "SELECT count(*) FROM meta WHERE key = 'other_data' AND value LIKE '%\"sqlite_rows_lost\":%'");
    CHECK(temporaries() == 0, "temporary files left");
    ops->destroy(st);
    free(db);
}

/* ------------------------------------------- a full tmpfs ("tmpfs") */

/* Fills the file system of path (a file made there) until ENOSPC. */
static void fill(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "%s: %s", path, strerror(errno));
    static char block[4096];
    while (fd >= 0 && write(fd, block, sizeof block) > 0)
        ;
    CHECK(errno == ENOSPC, "filling %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

static int run_dump(int finished, const char *what)
{
    int rc = mlprof_dump(finished);
    printf("%s: dump(%d): %s%s%s\n", what, finished, mlprof_err_name(rc), rc ? ": " : "",
           rc ? mlprof_last_error() : "");
    return rc;
}

static void record_spans(mlprof_span *s, int n)
{
    for (int i = 0; i < n; i++) {
        mlprof_begin(s);
        mlprof_arg_int("i", i);
        mlprof_end(s);
    }
}

/* The reports' runs: the database on a 4 MiB tmpfs, the trace in the
 * output folder. The mount is private to this process (a mount namespace
 * of its own) and unmounted at the end. */
static int tmpfs_disk(void)
{
    char *mnt = strdup(tu_path("mnt"));
    mkdir(mnt, 0700);
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", mnt, "tmpfs", 0, "size=4m") != 0) {
        printf("test_sqlite_sink tmpfs: skipped: cannot mount a tmpfs here (%s); the \"full\" mode covers a full "
               "disk without one\n",
               strerror(errno));
        rmdir(mnt);
        free(mnt);
        return 0;
    }
    char *db = strdup(tu_path("mnt/s.db")), *filler = strdup(tu_path("mnt/filler"));
    CHECK_OK(mlprof_set_config("filename", tu_path("tmpfs.json")));
    CHECK_OK(mlprof_set_config("sqlite_file", db));
    mlprof_span *s = mlprof_task_create(mlprof_domain_create("qa"), "spanX");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));

    /* a COMMIT on a full disk (SQLITE_FULL): its rows kept for the next dumps */
    record_spans(s, 10);
    CHECK_OK(run_dump(0, "commit"));
    fill(filler);
    record_spans(s, 3000);
    int rc = run_dump(0, "commit");
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "full") && strstr(mlprof_last_error(), "wait in memory"),
          "COMMIT on a full disk: %s: %s", mlprof_err_name(rc), mlprof_last_error());
    unlink(filler);
    record_spans(s, 1000);
    CHECK_OK(run_dump(0, "commit"));
    CHECK_Q(db, 4010, "SELECT count(*) FROM slices");
    record_spans(s, 1000);
    CHECK_OK(run_dump(1, "commit"));
    CHECK_Q(db, 5010, "SELECT count(*) FROM slices WHERE name = 'spanX'");
    CHECK_Q(db, 5010, "SELECT count(*) FROM args WHERE key = 'i'");
    CHECK_Q(db, 0, "SELECT count(*) FROM meta WHERE key = 'rows_lost'");

    /* a working database that cannot be created: the reason given, the
     * events written once there is room */
    unlink(db);
    fill(filler);
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    record_spans(s, 3000);
    rc = run_dump(0, "create");
    const char *msg = mlprof_last_error();
    CHECK(rc == MLPROF_EIO && (strstr(msg, "full") || strstr(msg, "No space")) && strstr(msg, "wait in memory"),
          "a working database on a full disk: %s: %s", mlprof_err_name(rc), msg);
    unlink(filler);
    record_spans(s, 1000);
    CHECK_OK(run_dump(0, "create"));
    CHECK_Q(db, 4000, "SELECT count(*) FROM slices");
    record_spans(s, 1000);
    CHECK_OK(run_dump(1, "create"));
    CHECK_Q(db, 5000, "SELECT count(*) FROM slices WHERE name = 'spanX'");
    CHECK_Q(db, 0, "SELECT count(*) FROM meta WHERE key = 'rows_lost'");
    DIR *dir = opendir(mnt);
    int left = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        left += strstr(e->d_name, ".tmp-") != NULL;
    if (dir)
        closedir(dir);
    CHECK(left == 0, "%d temporary files left on the tmpfs", left);
    CHECK(umount2(mnt, 0) == 0, "umount %s: %s", mnt, strerror(errno));
    rmdir(mnt);
    free(db);
    free(filler);
    free(mnt);
    return tu_finish("test_sqlite_sink tmpfs");
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (argc > 2 && strcmp(argv[2], "nolib") == 0) {
        no_library();
        return tu_finish("test_sqlite_sink nolib");
    }
    if (argc > 2 && strcmp(argv[2], "record") == 0)
        return record();
    if (argc > 2 && strcmp(argv[2], "continuous") == 0)
        return continuous();
    char why[600];
    S = mlprof__sqlite_load(NULL, why, sizeof why);
    if (!S) {
        printf("test_sqlite_sink: skipped: %s\n", why);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "full") == 0) {
        full_disk();
        return tu_finish("test_sqlite_sink full");
    }
    if (argc > 2 && strcmp(argv[2], "tmpfs") == 0)
        return tmpfs_disk();
    const char *db = strdup(tu_path("direct.db"));
    unlink(db);
    CHECK_OK(mlprof_set_config("sqlite_file", db));
    json = fopen(tu_path("direct.json"), "w");
    CHECK(json != NULL, "cannot write %s", tu_path("direct.json"));
    if (json)
        fputs("{\"traceEvents\":[", json);
    st = ops->create();
    CHECK(st != NULL, "create");
    ops->reset(st);

    /* 1. thread 11: A > (B > C, D > launch); thread 12: E (unfinished); a stream */
    track(&stream, MLPROF__TRACK_PROCESS, P, "proc");
    track(&stream, MLPROF__TRACK_THREAD, 11, "main");
    track(&stream, MLPROF__TRACK_THREAD, 12, "loader");
    track(&stream, MLPROF__TRACK_EXT, 1000, "stream 7");
    flow('s', 99, 11, 1300); /* inside C, which has not ended yet */
    instant(11, "mark", 1300, 2, "\"why\":\"x\"");
    span(11, "C", "d", 1200, 1500, 2, 300, NULL, 0);
    span(11, "B", "d", 1100, 2000, 1, 600,
         "\"layer\":\"conv\",\"n\":3,\"f\":1.5,\"big\":1.5e9,\"s\":\"12.5\",\"o\":{\"x\":[1,2]},\"t\":true,"
         "\"esc\":\"a\\\"b\\n\\u00e9\"",
         0);
    span(11, "cudaLaunchKernel", "cuda_runtime", 3100, 3200, 2, 100, "\"correlation\":5", 0);
    span(11, "D", "d", 3000, 4000, 1, 900, NULL, 0);
    span(11, "A", "d", 1000, 5000, 0, 2100, NULL, 0);
    frame(11, "F", 500, 6000, 7, "\"step\":1");
    instant(11, "global", 5500, 0, NULL);
    flow('f', 99, 12, 1500); /* inside E */
    span(12, "E", "d", 1000, 2000, 0, 1000, "\"k\":\"v\"", 1);
    span(1000, "sgemm", "kernel", 3500, 3600, 0, 100, "\"device\":0,\"stream\":7,\"correlation\":5", 0);
    counter("queue", 1000, 3, 1);
    counter("queue", 2000, 2.5, 0);
    counter("mem", 1500, 1048576, 1);

    /* 2. a dump that is not the last: G open on thread 12, shown up to now */
    ops->tail_begin(st, &tail);
    mlprof__span_out g = {.name = "G", .name_len = 1, .domain = "d", .begin_ns = 6000, .end_ns = 7000, .pid = P,
                          .tid = 12, .unfinished = 1, .self_ns = 0, .depth = 0}; /* self: unknown yet */
    ops->span(st, &tail, &g);
    track(&tail, MLPROF__TRACK_THREAD, 12, "loader");
    ops->tail_end(st, &tail, NULL);
    CHECK_OK(dump(tu_path("direct.json"), 0));
    const char *first = strdup(tu_path("first.db"));
    copy_file(db, first);
    CHECK_Q(first, 8, "SELECT count(*) FROM slices");
    CHECK_Q(first, 1000, "SELECT dur_ns FROM slices WHERE name = 'G'");
    CHECK_Q(first, 1000, "SELECT self_ns FROM slices WHERE name = 'G'");
    CHECK_Q(first, 1, "SELECT count(*) FROM args a JOIN slices s ON s.id = a.event_id WHERE s.name = 'G'"
                      " AND a.key = 'unfinished' AND a.value = 'true'");

    /* G's child ends, then G: the tail's G is gone, the real one has its id */
    span(12, "H", "d", 7100, 7200, 1, 100, NULL, 0);
    span(12, "G", "d", 6000, 8000, 0, 1900, NULL, 0);

    /* 3. a target that cannot be written: said, the events kept */
    const char *dir = strdup(tu_path("a_directory.db"));
    mkdir(dir, 0777);
    CHECK_OK(mlprof_set_config("sqlite_file", dir));
    int rc = dump(tu_path("direct.json"), 1);
    CHECK(rc == MLPROF_EIO && strstr(mlprof_last_error(), "a_directory.db"), "dump to a directory: %s: %s",
          mlprof_err_name(rc), mlprof_last_error());
    CHECK_OK(mlprof_set_config("sqlite_file", db));
    CHECK_OK(dump(tu_path("direct.json"), 1));
    if (json) {
        fputs("\n]}\n", json);
        fclose(json);
        json = NULL;
    }

    CHECK_Q(db, 9, "SELECT count(*) FROM slices");
    CHECK_Q(db, 1, "SELECT count(*) FROM slices WHERE name = 'G'");
    CHECK_Q(db, q(first, "SELECT id FROM slices WHERE name = 'G'"), "SELECT id FROM slices WHERE name = 'G'");
    CHECK_Q(db, 1, "SELECT count(*) FROM slices h JOIN slices g ON g.id = h.parent_id WHERE h.name = 'H'"
                   " AND g.name = 'G' AND h.depth = 1");
    /* depth, parent, self */
    CHECK_Q(db, 1, "SELECT count(*) FROM slices c JOIN slices p ON p.id = c.parent_id WHERE c.name = 'C'"
                   " AND p.name = 'B' AND c.depth = 2 AND c.self_ns = 300");
    CHECK_Q(db, 1, "SELECT count(*) FROM slices c JOIN slices p ON p.id = c.parent_id WHERE c.name = 'B'"
                   " AND p.name = 'A' AND c.depth = 1 AND c.self_ns = 600");
    CHECK_Q(db, 1, "SELECT count(*) FROM slices WHERE name = 'A' AND parent_id IS NULL AND depth = 0"
                   " AND self_ns = 2100 AND ts_ns = 1000 AND dur_ns = 4000");
    CHECK_Q(db, 1, "SELECT count(*) FROM slices c JOIN slices p ON p.id = c.parent_id WHERE"
                   " c.name = 'cudaLaunchKernel' AND p.name = 'D'");
    CHECK_Q(db, 0, "SELECT count(*) FROM slices c LEFT JOIN slices p ON p.id = c.parent_id WHERE"
                   " c.parent_id IS NOT NULL AND p.id IS NULL");
    /* arguments */
    CHECK_Q(db, 8, "SELECT count(*) FROM args a JOIN slices s ON s.id = a.event_id WHERE s.name = 'B'");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 'layer' AND value = 'conv' AND num IS NULL AND idx = 0");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 'n' AND value = '3' AND num = 3");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 'f' AND value = '1.5' AND num = 1.5");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 'big' AND value = '1500000000' AND num = 1.5e9");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 's' AND value = '12.5' AND num = 12.5");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 'o' AND value = '{\"x\":[1,2]}' AND num IS NULL");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 't' AND value = 'true' AND num IS NULL");
    CHECK_Q(db, 1, "SELECT count(*) FROM args WHERE key = 'esc' AND value = 'a\"b' || char(10) || char(233)");
    CHECK_Q(db, 1, "SELECT count(*) FROM args a JOIN slices s ON s.id = a.event_id WHERE s.name = 'E'"
                   " AND a.key = 'unfinished' AND a.idx = 1");
    /* instants and frames */
    CHECK_Q(db, 4, "SELECT count(*) FROM instants");
    CHECK_Q(db, 1, "SELECT count(*) FROM instants i JOIN args a ON a.event_id = i.id WHERE i.name = 'mark'"
                   " AND i.scope = 't' AND i.ph = 'i' AND a.value = 'x'");
    CHECK_Q(db, 1, "SELECT count(*) FROM instants WHERE name = 'global' AND scope = 'g'");
    CHECK_Q(db, 1, "SELECT count(*) FROM instants b JOIN instants e ON e.async_id = b.async_id AND e.ph = 'e'"
                   " WHERE b.ph = 'b' AND b.name = 'F' AND b.ts_ns = 500 AND e.ts_ns = 6000 AND b.async_id = 7");
    /* counters, tracks, names */
    CHECK_Q(db, 3, "SELECT count(*) FROM counters");
    CHECK_Q(db, 2, "SELECT count(*) FROM counters c JOIN tracks t ON t.id = c.track_id WHERE t.name = 'queue'"
                   " AND t.kind = 'counter' AND t.series = 'value'");
    CHECK_Q(db, 5500, "SELECT sum(value) * 1000 FROM counters c JOIN tracks t ON t.id = c.track_id"
                      " WHERE t.name = 'queue'");
    CHECK_Q(db, 1, "SELECT count(*) FROM processes WHERE pid = 4242 AND name = 'proc'");
    CHECK_Q(db, 3, "SELECT count(*) FROM threads WHERE name IN ('main', 'loader', 'stream 7')");
    CHECK_Q(db, 3, "SELECT count(*) FROM tracks WHERE kind = 'thread'");
    /* the flow, from C (around its start) to E (around its end) */
    CHECK_Q(db, 1, "SELECT count(*) FROM flows f JOIN slices a ON a.id = f.from_slice JOIN slices b"
                   " ON b.id = f.to_slice WHERE f.flow_id = 99 AND a.name = 'C' AND b.name = 'E'");
    /* the kernel: launched by cudaLaunchKernel (same correlation) inside D inside A */
    CHECK_Q(db, 1, "SELECT count(*) FROM kernels k JOIN slices s ON s.id = k.slice_id JOIN slices l"
                   " ON l.id = k.launch_id WHERE s.name = 'sgemm' AND k.kind = 'compute' AND k.device = 0"
                   " AND k.stream = 7 AND k.correlation = 5 AND l.name = 'cudaLaunchKernel'"
                   " AND k.bottom_op = 'D' AND k.top_op = 'A' AND k.op_stack = 'A > D'");
    CHECK_Q(db, 1, "SELECT count(*) FROM meta WHERE key = 'other_data' AND value = '{\"k\":1}'");
    CHECK_Q(db, 13, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'");
    CHECK(temporaries() == 0, "temporary files left beside the database");

    /* a new trace after the final dump starts from nothing */
    ops->reset(st);
    char *second = strdup(tu_path("second.db"));
    CHECK_OK(mlprof_set_config("sqlite_file", second));
    span(11, "Z", "d", 10, 20, 0, 10, NULL, 0);
    CHECK_OK(dump(tu_path("second.json"), 1));
    CHECK_Q(second, 1, "SELECT count(*) FROM slices");
    CHECK_Q(second, 1, "SELECT id FROM slices");
    free(second);

    /* "auto": beside the trace, its extension (and .gz) replaced by .db */
    CHECK_OK(mlprof_set_config("sqlite_file", "auto"));
    span(11, "X", "d", 10, 20, 0, 10, NULL, 0);
    CHECK_OK(dump(tu_path("beside.json.gz"), 1));
    CHECK_Q(tu_path("beside.db"), 1, "SELECT count(*) FROM slices WHERE name = 'X'");

    /* a final dump that fails: the collector resets the trace next, and the
     * working database stays on disk (said on stderr) */
    CHECK_OK(mlprof_set_config("sqlite_file", dir));
    span(11, "Y", "d", 10, 20, 0, 10, NULL, 0);
    CHECK(dump(tu_path("third.json"), 1) == MLPROF_EIO, "a final dump to a directory");
    ops->reset(st);
    CHECK(temporaries() == 1, "the working database of a failed final dump: %d files", temporaries());
    DIR *dd = opendir(tu_dir);
    for (struct dirent *e; dd && (e = readdir(dd));) {
        if (!strstr(e->d_name, ".tmp-"))
            continue;
        char *kept = strdup(tu_path(e->d_name));
        CHECK_Q(kept, 1, "SELECT count(*) FROM slices WHERE name = 'Y'");
        unlink(kept);
        free(kept);
    }
    if (dd)
        closedir(dd);
    ops->destroy(st);
    CHECK(temporaries() == 0, "temporary files left after the second trace");
    free((void *)db);
    free((void *)first);
    free((void *)dir);
    return tu_finish("test_sqlite_sink");
}
