/*
 * run.c - `mlprof run [options] -- CMD ARGS...`: profiles a program that was
 * not built for it. CMD runs with libmlprof_preload.so in LD_PRELOAD and the
 * configuration in MLPROF_* variables, so every process it starts, by fork
 * or exec, profiles itself and writes its own trace (one per pid) into
 * OUTPUT.parts/; at the end they are merged into OUTPUT (one process track
 * each) and a summary is printed. CMD's exit status is passed on (128 + the
 * signal when it was killed); its trace is written even then.
 *
 * Under a launcher (mpirun -n 4 mlprof run -o job.json -- ./app), every rank
 * runs its own mlprof run with the same OUTPUT: the ranks' processes write
 * trace.rankR.PID.json into the one OUTPUT.parts/, and the last rank to
 * finish merges them all, ordered and labelled by rank. Each rank, once its
 * command has ended, writes done.rankR (the job id in it) under a lock on
 * OUTPUT.parts/.lock and counts the done files of its job: the one that
 * counts them all removes them (a later run of the same job id in the same
 * place must not count them) and merges at once, with nothing to wait for.
 * The others wait (up to --merge-timeout) until their own done file has
 * been taken so; when a rank never ends (its mlprof run was killed), the
 * first whose wait ends merges what is there, saying which ranks are
 * missing, and a rank that still ends later merges again, whole. The last
 * rank rather than rank 0: rank 0 waiting would hold the merge back by the
 * timeout whenever rank 0 itself died, and the last one merges without
 * waiting at all.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/analyze/analyze.h"
#include "../src/analyze/merge.h"
#include "../src/record/dist.h"
#include "run.h"

#define PROG "mlprof run"
#define PRELOAD_NAME "libmlprof_preload.so"
#define MAX_PARTS 4096

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: mlprof run [options] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD with mlprof preloaded: its BLAS and oneDNN calls and allocations (and\n"
            "those of every process it starts) are recorded with no change to the program, then\n"
            "merged into one trace with a track per process, and summed up.\n"
            "\n"
            "  -o, --output FILE      the merged trace (default mlprof_run.json): Chrome\n"
            "                         JSON, gzip when FILE ends in .gz, Perfetto's protobuf\n"
            "                         when it ends in .pftrace; each process's own (JSON)\n"
            "                         is kept in FILE.parts/\n"
            "  --hooks LIST           the interposers: malloc, blas, dnnl, cuda, cublas, cudnn,\n"
            "                         itt, nvtx, mpi (MPI calls and messages), nccl\n"
            "                         (NCCL's calls; its profiler plugin where NCCL has\n"
            "                         one, --nccl_proxy 1 adds proxy steps), all\n"
            "                         (default), none; --cuda_functions LIST chooses among\n"
            "                         the CUDA runtime functions\n"
            "  --sample HZ            sample every thread's call stack HZ times per second of\n"
            "                         its CPU time (the sampling key; 1..20000): mlprof flame\n"
            "                         reads them from each process's trace in FILE.parts/;\n"
            "                         --sampling_source signal takes them with a timer\n"
            "                         signal per thread instead of perf_event (auto: where\n"
            "                         perf_event is refused)\n"
            "  --KEY VALUE            any configuration key of the library (--KEY=VALUE too),\n"
            "                         such as --counters task-clock, --sampler cpu,rss or\n"
            "                         --gpu on (CUPTI: kernels, copies, runtime calls) or\n"
            "                         --gpu_metrics roofline (per-kernel FLOPs and DRAM bytes);\n"
            "                         set for every process of the run\n"
            "  --config FILE          a configuration file, as MLPROF_CONFIG\n"
            "  --merge-timeout S      under a launcher: how long a rank that ended waits\n"
            "                         for the others before it merges without them\n"
            "                         (default 120; the last rank to end merges at once)\n"
            "  -t, --top N            rows of the summary's table (default 10; 0: none)\n"
            "  -q, --quiet            no summary\n"
            "  --on-demand            record nothing until asked: 'mlprof capture PID' (each\n"
            "                         capture a trace of its own in FILE.parts/, merged at\n"
            "                         the end); until then the program runs at full speed\n"
            "  --preload FILE         the preload library (default: found beside mlprof)\n"
            "\n"
            "Defaults that differ from the library's, for whole programs: profile_memory on,\n"
            "memory_sample_rate 1000, memory_csv and memory_svg off, continuous_dump on\n"
            "with dump_period 30 (the buffers are drained as they fill); with --gpu recording\n"
            "runtime calls, the cuda interposer keeps to cudaMalloc/Free (CUPTI has the rest).\n"
            "\n"
            "Under a launcher (mpirun, srun, torchrun: the rank is read from its environment,\n"
            "or from --rank), give every rank the same -o: each rank's processes write\n"
            "FILE.parts/trace.rankR.PID.json and the last rank to end merges them into FILE,\n"
            "one process track per rank and process, in rank order. An -o that names the\n"
            "rank (%%r, or rankR as in job.rank$RANK.json) is that rank's alone.\n");
}

static void run_bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'mlprof run --help' for more information.\n");
    exit(2);
}

/* --------------------------------------------------------- the library */

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Beside the mlprof executable (the build tree), or in the library folder
 * of its installation prefix. */
static int find_preload(char *out, size_t len)
{
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    snprintf(out, len, "%s/%s", exe, PRELOAD_NAME);
    if (file_exists(out))
        return 0;
    snprintf(out, len, "%s/%s/%s", exe, MLPROF_BIN_TO_LIB, PRELOAD_NAME);
    return file_exists(out) ? 0 : -1;
}

/* ------------------------------------------------------------ the command */

/* Exit statuses of a command that did not start, as shells give them. */
#define EXIT_NOT_FOUND 127
#define EXIT_CANNOT_RUN 126

/* Whether path names a file that this process may execute (not a folder). */
static int runnable(const char *path, int *exists)
{
    struct stat st;
    *exists = stat(path, &st) == 0;
    return *exists && !S_ISDIR(st.st_mode) && access(path, X_OK) == 0;
}

/* Finds cmd as execvp will run it: cmd itself when it holds a '/', else the
 * first file of that name in a PATH folder that may be executed. Returns 0;
 * else the exit status a shell gives (127: no such command, 126: found but
 * not executable) with the reason in why. Run before anything is prepared,
 * so that a command that cannot start leaves no trace behind. */
static int check_command(const char *cmd, char *why, size_t len)
{
    int exists;
    if (strchr(cmd, '/')) {
        if (runnable(cmd, &exists))
            return 0;
        struct stat st;
        snprintf(why, len, "%s",
                 !exists ? strerror(ENOENT) : stat(cmd, &st) == 0 && S_ISDIR(st.st_mode) ? strerror(EISDIR)
                                                                                         : strerror(EACCES));
        return exists ? EXIT_CANNOT_RUN : EXIT_NOT_FOUND;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* execvp's default */
    int found_not_runnable = 0;
    for (const char *dir = path;; dir++) {
        size_t n = strcspn(dir, ":");
        char full[PATH_MAX];
        /* an empty entry is the current folder */
        int w = n ? snprintf(full, sizeof full, "%.*s/%s", (int)n, dir, cmd) : snprintf(full, sizeof full, "%s", cmd);
        if (w > 0 && (size_t)w < sizeof full) {
            if (runnable(full, &exists))
                return 0;
            found_not_runnable |= exists;
        }
        dir += n;
        if (!*dir)
            break;
    }
    snprintf(why, len, "%s", found_not_runnable ? strerror(EACCES) : "command not found");
    return found_not_runnable ? EXIT_CANNOT_RUN : EXIT_NOT_FOUND;
}

/* Starts cmd in a child process, and tells whether exec worked: a failed
 * exec writes its errno into a pipe that a successful one closes. Returns the
 * child's pid; or -1 with *exec_errno set (0 when fork itself failed). */
static pid_t start_command(char **cmd, int *exec_errno)
{
    int fds[2];
    *exec_errno = 0;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(fds[1], &e, sizeof e);
        (void)w;
        _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
    }
    close(fds[1]);
    int e = 0;
    ssize_t got;
    while ((got = read(fds[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(fds[0]);
    if (got == (ssize_t)sizeof e) { /* exec failed: the child exits at once */
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        *exec_errno = e;
        return -1;
    }
    return pid;
}

/* ------------------------------------------------------------ options */

typedef struct run_options {
    const char *output;
    const char *preload;
    int top, quiet;
    double merge_timeout;
    int on_demand; /* record nothing until `mlprof capture PID` asks */
    char **cmd;
} run_options;

/* MLPROF_KEY=value in the environment, after checking the key and value
 * with the library itself (its error names them). */
static void set_key(const char *key, const char *value)
{
    if (strcmp(key, "filename") == 0)
        run_bad_usage("%s", "--filename: use -o/--output for the merged trace");
    if (mlprof_set_config(key, value) != MLPROF_OK)
        run_bad_usage("%s", mlprof_last_error());
    char var[128];
    size_t k = 0;
    for (const char *p = "MLPROF_"; *p; p++)
        var[k++] = *p;
    for (const char *p = key; *p && k < sizeof var - 1; p++)
        var[k++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p == '-' ? '_' : *p);
    var[k] = '\0';
    setenv(var, value, 1);
}

/* A default for the run, unless the user's environment or options set it. */
static void default_key(const char *key, const char *value)
{
    char var[128];
    snprintf(var, sizeof var, "MLPROF_%s", key);
    for (char *p = var; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    setenv(var, value, 0);
}

/* Whether the run's gpu key (an option, or the user's MLPROF_GPU) has CUPTI
 * record the CUDA runtime's calls. */
static int gpu_records_runtime(void)
{
    char value[1024];
    if (mlprof_get_config("gpu", value, sizeof value) != MLPROF_OK)
        return 0;
    for (char *item = strtok(value, ", "); item; item = strtok(NULL, ", ")) {
        if (!strcmp(item, "on") || !strcmp(item, "all") || !strcmp(item, "runtime"))
            return 1;
    }
    return 0;
}

static void parse_options(int argc, char **argv, run_options *o)
{
    memset(o, 0, sizeof *o);
    o->output = "mlprof_run.json";
    o->top = 10;
    o->merge_timeout = 120;
    int i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-')
            break; /* the command, without a -- before it */
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            run_usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
            o->quiet = 1;
            continue;
        }
        if (strcmp(arg, "--on-demand") == 0) {
            o->on_demand = 1;
            continue;
        }
        /* --name=value or --name value */
        const char *name = arg + (arg[1] == '-' ? 2 : 1), *eq = strchr(name, '='), *value;
        char key[64];
        size_t klen = eq ? (size_t)(eq - name) : strlen(name);
        if (klen == 0 || klen >= sizeof key)
            run_bad_usage("unknown option \"%s\"", arg);
        memcpy(key, name, klen);
        key[klen] = '\0';
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else
            run_bad_usage("option %s needs a value", arg);
        if (strcmp(key, "o") == 0 || strcmp(key, "output") == 0)
            o->output = value;
        else if (strcmp(key, "preload") == 0)
            o->preload = value;
        else if (strcmp(key, "config") == 0) {
            if (mlprof_load_config(value) != MLPROF_OK)
                run_bad_usage("%s", mlprof_last_error());
            setenv("MLPROF_CONFIG", value, 1);
        } else if (strcmp(key, "merge-timeout") == 0 || strcmp(key, "merge_timeout") == 0) {
            char *end;
            double t = strtod(value, &end);
            if (end == value || *end || !(t >= 0) || t > 86400)
                run_bad_usage("--merge-timeout: expected seconds from 0 to 86400, got \"%s\"", value);
            o->merge_timeout = t;
        } else if (strcmp(key, "t") == 0 || strcmp(key, "top") == 0) {
            char *end;
            long n = strtol(value, &end, 10);
            if (*end || n < 0 || n > 100000)
                run_bad_usage("--top: expected a count from 0, got \"%s\"", value);
            o->top = (int)n;
        } else if (strcmp(key, "sample") == 0) {
            set_key("sampling", value); /* --sample HZ: call stacks, mlprof flame */
        } else {
            for (char *p = key; *p; p++)
                *p = *p == '-' ? '_' : *p;
            set_key(key, value);
        }
    }
    if (i >= argc)
        run_bad_usage("%s", "which command? (mlprof run [options] -- CMD ARGS...)");
    o->cmd = argv + i;
}

/* -------------------------------------------------------------- parts */

/* This run's place in a job: a rank known from the launcher (or --rank). */
typedef struct job {
    int ranked;    /* a rank is known and the world is not one process */
    int rank;      /* this rank */
    int world;     /* the number of ranks, or -1 when not known */
    char id[128];  /* the launcher's job id, or "" */
} job;

/* The rank R of a part named trace.rankR.*.json, or -1 (an unranked part:
 * trace.PID.json). */
static long part_rank(const char *name)
{
    if (strncmp(name, "trace.rank", 10) != 0)
        return -1;
    char *end;
    long r = strtol(name + 10, &end, 10);
    return end != name + 10 && *end == '.' ? r : -1;
}

/* Whether name is a part of this run: of this job's ranks when ranked
 * (all of them, or this rank's only when the world is not known). */
static int is_part(const char *name, const job *j)
{
    size_t n = strlen(name);
    if (!(strncmp(name, "trace.", 6) == 0 && n > 11 && strcmp(name + n - 5, ".json") == 0))
        return 0;
    if (strstr(name, ".flush")) /* a flight recorder's flush: a snapshot asked for, not the process's trace */
        return 0;
    if (!j->ranked)
        return 1;
    long r = part_rank(name);
    return j->world > 0 ? r >= 0 && r < j->world : r == j->rank;
}

/* Makes dir, or empties it of an earlier run's parts (traces, and the CSV
 * files and pictures beside them). A rank of a job removes its own rank's
 * only: the other ranks are writing theirs. */
static int prepare_parts(const char *dir, const job *j)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, PROG ": cannot make %s: %s\n", dir, strerror(errno));
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, PROG ": cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char path[PATH_MAX], done[32];
    snprintf(done, sizeof done, "done.rank%d", j->rank);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "trace.", 6) != 0 && !(j->ranked && strcmp(e->d_name, done) == 0))
            continue;
        if (j->ranked && strncmp(e->d_name, "trace.", 6) == 0 && part_rank(e->d_name) != j->rank)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    return 0;
}

/* Parts in rank order, then by name (rank 10 after rank 9). */
static int by_name(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    const char *bx = strrchr(x, '/'), *by = strrchr(y, '/');
    long rx = part_rank(bx ? bx + 1 : x), ry = part_rank(by ? by + 1 : y);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return strcmp(x, y);
}

/* The parts' paths, sorted; their number. */
static size_t list_parts(const char *dir, const job *j, char **paths)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < MAX_PARTS) {
        if (!is_part(e->d_name, j))
            continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        paths[n] = malloc(len);
        if (!paths[n])
            break;
        snprintf(paths[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(paths, n, sizeof paths[0], by_name);
    return n;
}

/* ------------------------------------------------------- ranks of a job */

/* Whether an output name is one rank's own: it holds %r, or "rankR" (this
 * rank) not inside a longer word or number, as a launcher script writes
 * job.rank$RANK.json. */
static int output_names_rank(const char *name, int rank)
{
    if (strstr(name, "%r"))
        return 1;
    char word[24];
    int n = snprintf(word, sizeof word, "rank%d", rank);
    for (const char *p = strstr(name, word); p; p = strstr(p + 1, word)) {
        int before = p == name || !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z'));
        int after = p[n] < '0' || p[n] > '9';
        if (before && after)
            return 1;
    }
    return 0;
}

/* Holds an exclusive lock on DIR/.lock (a file every rank of the job opens,
 * on whichever host, when DIR is shared); -1 when it cannot be had, and the
 * count goes on without it. */
static int lock_parts(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.lock", dir) >= (int)sizeof path)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

static void unlock_parts(int fd)
{
    if (fd >= 0)
        close(fd); /* the lock goes with it */
}

/* Says this rank is done: DIR/done.rankR holds the job id and the status.
 * 0 when it was written. */
static int mark_done(const char *dir, const job *j, int status)
{
    char path[PATH_MAX], text[200];
    if (snprintf(path, sizeof path, "%s/done.rank%d", dir, j->rank) >= (int)sizeof path) {
        fprintf(stderr, PROG ": rank %d: the path %s/done.rank%d is too long\n", j->rank, dir, j->rank);
        return -1;
    }
    int n = snprintf(text, sizeof text, "%s\n%d\n", j->id, status);
    if (mlprof__write_file_atomic(path, text, (size_t)n) != MLPROF_OK) {
        fprintf(stderr, PROG ": rank %d: %s\n", j->rank, mlprof_last_error());
        return -1;
    }
    return 0;
}

/* Whether rank r is done in this job: DIR/done.rankR is there and holds
 * this job's id. */
static int rank_done(const char *dir, const job *j, int r)
{
    char path[PATH_MAX], text[200] = "";
    snprintf(path, sizeof path, "%s/done.rank%d", dir, r);
    FILE *f = fopen(path, "r");
    int ok = 0;
    if (f) {
        if (fgets(text, sizeof text, f)) {
            text[strcspn(text, "\n")] = '\0';
            ok = strcmp(text, j->id) == 0;
        }
        fclose(f);
    }
    return ok;
}

/* How many ranks of this job are done; the ranks not done, comma-separated,
 * into missing; the lowest done rank into *lowest. */
static int count_done(const char *dir, const job *j, mlprof__sb *missing, int *lowest)
{
    int done = 0;
    *lowest = -1;
    mlprof__sb_reset(missing);
    for (int r = 0; r < j->world; r++) {
        if (rank_done(dir, j, r)) {
            done++;
            if (*lowest < 0)
                *lowest = r;
        } else {
            mlprof__sb_printf(missing, "%s%d", missing->len ? "," : "", r);
        }
    }
    return done;
}

/* Removes the job's done files, every rank's (all of them this job's):
 * the rank that counted them all takes them, so that they are not counted
 * again by a later run of a job with the same id (or none) in the same
 * place, whose ranks that end first would take them for their own
 * job's and merge before the others had ended. */
static void take_done(const char *dir, const job *j)
{
    for (int r = 0; r < j->world; r++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/done.rank%d", dir, r) < (int)sizeof path)
            unlink(path);
    }
}

/* After this rank's command ended: whether this rank merges. The rank that,
 * under the lock, counts every rank done takes their done files and merges:
 * the last rank to be done, at once. The others wait up to the timeout for
 * their own done file to be taken; the one that counts them all while
 * waiting (the last rank done was one that could not start its command,
 * and merges nothing) merges itself. When some rank is still not done at
 * the timeout, the lowest done rank merges what there is (a rank ending
 * later still merges again, whole). *not_done: the ranks not done when the
 * merge starts. */
static int rank_merges(const char *dir, const job *j, double timeout, int status, mlprof__sb *not_done)
{
    int lowest, fd = lock_parts(dir);
    int marked = mark_done(dir, j, status) == 0;
    int done = count_done(dir, j, not_done, &lowest);
    if (done == j->world)
        take_done(dir, j);
    unlock_parts(fd);
    if (done == j->world)
        return 1;
    struct timespec nap = {0, 100 * 1000 * 1000}, t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 >= timeout)
            break;
        nanosleep(&nap, NULL);
        fd = lock_parts(dir);
        /* without a done file of its own (it could not be written), no
         * rank can count them all: this one waits for the timeout */
        int taken = marked && !rank_done(dir, j, j->rank);
        if (!taken) {
            done = count_done(dir, j, not_done, &lowest);
            if (done == j->world)
                take_done(dir, j);
        }
        unlock_parts(fd);
        if (taken)
            return 0; /* the last one took them: it merges */
        if (done == j->world)
            return 1;
    }
    return lowest == j->rank;
}

/* --------------------------------------------------------------- summary */

/* An unsigned number after "key": in a part's otherData, or 0. */
static unsigned long long other_number(const an_trace *t, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = t->other_data ? strstr(t->other_data, pat) : NULL;
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* The largest merged trace whose table the summary reads back: reading takes
 * about three times its size. */
#define MAX_TABLE_BYTES ((off_t)512 << 20)

/* What the summary says of the processes' traces, gathered as each is read
 * for the merge (one at a time). */
typedef struct parts_said {
    unsigned long long dropped;
    mlprof__sb peaks; /* "memory peak (...) of pid N: X in use" lines */
} parts_said;

static void note_part(parts_said *ps, const an_trace *t)
{
    ps->dropped += other_number(t, "dropped_events");
    /* the peak of each process's memory, as its trace marks it */
    for (size_t k = 0; k < t->nev; k++) {
        const an_event *e = &t->ev[k];
        if (e->ph != 'i' || strncmp(e->name, "memory peak (", 13) != 0)
            continue;
        for (uint32_t a = 0; a < e->nargs; a++) {
            const an_arg *arg = &t->args[e->args + a];
            if (strcmp(arg->key, "used") != 0)
                continue;
            mlprof__sb_printf(&ps->peaks, "%s of pid %lld: ", e->name, (long long)e->pid);
            mlprof__sb_bytes(&ps->peaks, (unsigned long long)arg->inum);
            mlprof__sb_puts(&ps->peaks, " in use\n");
        }
    }
}

static void summary(const run_options *o, const char *status, double wall, const parts_said *ps, size_t n,
                    an_trace *merged, const char *written, const char *parts_dir)
{
    printf("\nmlprof run: %s %s after %.3f s; %zu process%s profiled\n", o->cmd[0], status, wall, n,
           n == 1 ? "" : "es");
    if (o->top && merged) {
        an_options ao;
        an_options_default(&ao);
        ao.top = o->top;
        mlprof__sb table;
        mlprof__sb_init(&table);
        if (an_analyze(merged, &ao, &table) == 0 && table.len) {
            printf("\nwhere the time went (self time; operators and library calls):\n");
            fwrite(table.data, 1, table.len, stdout);
        }
        mlprof__sb_free(&table);
    }
    if (ps->peaks.len)
        printf("\n%s", ps->peaks.data);
    printf("dropped events: %llu%s\n", ps->dropped, ps->dropped ? " (raise --buffer_size)" : "");
    if (written) /* never a path that was not written */
        printf("trace: %s\n", written);
    if (n)
        printf("each process's trace: %s/\n", parts_dir);
}

/* What the merge of a job's ranks says: the ranks no trace is, and the
 * clocks when the ranks' were not measured against each other. */
static void rank_warnings(const an_merge_input *in, size_t n, int method)
{
    mlprof__sb missing;
    mlprof__sb_init(&missing);
    long long world = an_merge_missing_ranks(in, n, &missing);
    if (world > 0 && missing.len)
        fprintf(stderr, PROG ": warning: no trace of rank%s %s (of %lld): the merged trace is without %s\n",
                strchr(missing.data, ',') ? "s" : "", missing.data, world,
                strchr(missing.data, ',') ? "them" : "it");
    mlprof__sb_free(&missing);
    if (method == AN_ALIGN_STARTS)
        fprintf(stderr, PROG ": warning: the ranks' traces come from several hosts and carry no clock sync: "
                        "their starts are lined up\n");
}

/* -------------------------------------------------------------- the run */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int mlprof_cmd_run(int argc, char **argv)
{
    /* this command never waits for captures itself (the library in it starts
     * with the first option checked); its program does if the user's
     * environment asks */
    const char *user_on_demand = getenv("MLPROF_ON_DEMAND");
    static char saved_on_demand[64];
    snprintf(saved_on_demand, sizeof saved_on_demand, "%s", user_on_demand ? user_on_demand : "");
    unsetenv("MLPROF_ON_DEMAND");
    run_options o;
    parse_options(argc, argv, &o);
    char preload[PATH_MAX + 64];
    if (o.preload)
        snprintf(preload, sizeof preload, "%s", o.preload);
    else if (find_preload(preload, sizeof preload) != 0)
        run_bad_usage("%s", "cannot find " PRELOAD_NAME " beside mlprof or in its lib folder (give --preload)");
    if (!file_exists(preload))
        run_bad_usage("no preload library at %s", preload);
    char why[256];
    int not_started = check_command(o.cmd[0], why, sizeof why);
    if (not_started) {
        fprintf(stderr, PROG ": %s: %s\n", o.cmd[0], why);
        return not_started;
    }
    char *abs_preload = realpath(preload, NULL);

    /* read before MLPROF_AUTOSTART is set: this process must not record */
    int gpu_runtime = gpu_records_runtime();
    job j;
    memset(&j, 0, sizeof j);
    const mlprof__dist *d = mlprof__dist_get(); /* the library has read MLPROF_RANK by now */
    j.ranked = mlprof__dist_name_ranks(d);
    j.rank = d->rank;
    j.world = d->world_size;
    snprintf(j.id, sizeof j.id, "%s", d->job);

    char parts_dir[PATH_MAX + 64], filename[PATH_MAX + 96], output[PATH_MAX + 32];
    snprintf(output, sizeof output, "%s", o.output);
    if (j.ranked && output_names_rank(o.output, j.rank)) {
        /* this rank's own output (job.%r.json, or job.rank3.json from a
         * launcher's script): no other rank shares it, none is waited for */
        j.world = -1;
        size_t k = 0;
        for (const char *p = o.output; *p && k + 12 < sizeof output; p++) {
            if (p[0] == '%' && p[1] == 'r')
                k += (size_t)snprintf(output + k, sizeof output - k, "%d", j.rank), p++;
            else
                output[k++] = *p;
        }
        output[k] = '\0';
    } else if (j.ranked && j.world < 0) {
        /* ranks that cannot be counted each merge their own: OUTPUT.rankR.json */
        const char *base = strrchr(o.output, '/'), *dot = strrchr(base ? base + 1 : o.output, '.');
        size_t stem = dot && dot != (base ? base + 1 : o.output) ? (size_t)(dot - o.output) : strlen(o.output);
        snprintf(output, sizeof output, "%.*s.rank%d%s", (int)stem, o.output, j.rank, o.output + stem);
    }
    snprintf(parts_dir, sizeof parts_dir, "%s.parts", j.ranked && j.world < 0 ? output : o.output);
    if (prepare_parts(parts_dir, &j) != 0)
        return 1;
    char *abs_parts = realpath(parts_dir, NULL);
    snprintf(filename, sizeof filename, j.ranked ? "%s/trace.rank%%r.%%p.json" : "%s/trace.%%p.json",
             abs_parts ? abs_parts : parts_dir);

    /* the environment every process of the run inherits */
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(abs_preload) + (old ? strlen(old) : 0) + 2;
    char *ld = malloc(len);
    if (!ld)
        return 1;
    snprintf(ld, len, "%s%s%s", abs_preload, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", ld, 1);
    setenv("MLPROF_FILENAME", filename, 1);
    if (o.on_demand) /* the library starts stopped and listens (src/record/capture.c) */
        setenv("MLPROF_ON_DEMAND", "1", 1);
    else
        setenv("MLPROF_AUTOSTART", "1", 1);
    if (saved_on_demand[0] && !o.on_demand)
        setenv("MLPROF_ON_DEMAND", saved_on_demand, 1);
    setenv("MLPROF_DUMP_AT_EXIT", "1", 1);
    setenv("INTEL_LIBITTNOTIFY64", abs_preload, 0); /* we are the ITT collector, unless one is chosen */
    setenv("NVTX_INJECTION64_PATH", abs_preload, 0); /* and NVTX's injection */
    setenv("NCCL_PROFILER_PLUGIN", abs_preload, 0);  /* and NCCL's profiler plugin (src/hook/nccl_plugin.c) */
    default_key("profile_memory", "1");
    default_key("memory_sample_rate", "1000");
    default_key("memory_csv", "");
    default_key("memory_svg", "");
    default_key("continuous_dump", "1");
    default_key("dump_period", "30");
    char mode[16] = "";
    mlprof_get_config("mode", mode, sizeof mode);
    int ring = strcmp(mode, "ring") == 0;
    if (ring) /* a flight recorder writes its ring on kill -USR2, unless the program handles USR2 itself */
        default_key("dump_signal", "USR2");
    if (gpu_runtime) /* CUPTI writes the calls; the interposer keeps the allocations */
        default_key("cuda_functions", "cudaMalloc,cudaMallocAsync,cudaFree,cudaFreeAsync");
    free(ld);
    free(abs_preload);
    free(abs_parts);

    double t0 = now_s();
    fflush(stdout);
    fflush(stderr);
    int exec_errno;
    pid_t pid = start_command(o.cmd, &exec_errno);
    if (pid < 0) {
        int start_rc = 1;
        if (!exec_errno) {
            fprintf(stderr, PROG ": cannot start %s: %s\n", o.cmd[0], strerror(errno));
        } else {
            fprintf(stderr, PROG ": %s: %s\n", o.cmd[0],
                    exec_errno == ENOENT && !strchr(o.cmd[0], '/') ? "command not found" : strerror(exec_errno));
            start_rc = exec_errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
        }
        if (j.ranked && j.world > 0) { /* the others need not wait for this rank */
            int fd = lock_parts(parts_dir);
            mark_done(parts_dir, &j, start_rc);
            unlock_parts(fd);
        } else {
            rmdir(parts_dir); /* made for this run, and empty */
        }
        return start_rc;
    }
    if (ring) {
        const char *sig = getenv("MLPROF_DUMP_SIGNAL");
        int on = sig && sig[0] && strcasecmp(sig, "off") && strcmp(sig, "0");
        char kill_cmd[64] = "";
        if (on)
            snprintf(kill_cmd, sizeof kill_cmd, " or 'kill -%s %d'", strncasecmp(sig, "SIG", 3) == 0 ? sig + 3 : sig,
                     (int)pid);
        fprintf(stderr, PROG ": %s is process %d, a flight recorder: 'mlprof capture %d --flush'%s writes its ring "
                        "now\n", o.cmd[0], (int)pid, (int)pid, kill_cmd);
    }
    if (o.on_demand)
        fprintf(stderr, PROG ": %s is process %d; it records nothing until asked: mlprof capture %d "
                        "[--duration 5s] [--tree]\n", o.cmd[0], (int)pid, (int)pid);
    /* a ^C reaches the program, which writes its trace; we wait for it */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    double wall = now_s() - t0;
    int rc;
    char status[96];
    if (WIFSIGNALED(st)) {
        rc = 128 + WTERMSIG(st);
        snprintf(status, sizeof status, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else {
        rc = WEXITSTATUS(st);
        snprintf(status, sizeof status, "exited with status %d", rc);
    }

    /* a rank of a job: the last to end merges every rank's parts */
    mlprof__sb not_done;
    mlprof__sb_init(&not_done);
    if (j.ranked && j.world > 0 && !rank_merges(parts_dir, &j, o.merge_timeout, rc, &not_done)) {
        if (!o.quiet)
            printf("\nmlprof run: rank %d: %s %s after %.3f s; its trace is in %s/ (the last rank to end "
                   "merges into %s)\n", j.rank, o.cmd[0], status, wall, parts_dir, o.output);
        mlprof__sb_free(&not_done);
        return rc;
    }
    if (not_done.len)
        fprintf(stderr, PROG ": rank %d: warning: rank%s %s of %d did not end within %g s: merging without "
                        "%s\n", j.rank, strchr(not_done.data, ',') ? "s" : "", not_done.data, j.world,
                o.merge_timeout, strchr(not_done.data, ',') ? "them" : "it");
    mlprof__sb_free(&not_done);

    /* streamed (an_merge_stream): each process's trace read once for what
     * the merge and the summary need of it, then again to write its events;
     * memory holds one of them at a time */
    char **paths = calloc(MAX_PARTS, sizeof *paths);
    an_merge_input *sum = calloc(MAX_PARTS, sizeof *sum);
    if (!paths || !sum)
        return rc ? rc : 1;
    parts_said said = {0, {0}};
    mlprof__sb_init(&said.peaks);
    an_merge_options mo;
    memset(&mo, 0, sizeof mo);
    size_t n = list_parts(parts_dir, &j, paths), used = 0;
    int failed = 0, written = 0;
    for (size_t i = 0; i < n; i++) {
        an_trace t;
        if (an_trace_read(&t, paths[i]) != 0) {
            if (!t.partial) {
                fprintf(stderr, PROG ": %s; left out\n", t.error);
                an_trace_free(&t);
                continue;
            }
            fprintf(stderr, PROG ": warning: %s; using the %zu events read before it\n", t.error, t.nev);
        }
        if (an_merge_summarize(&t, &mo, &sum[used]) != 0) {
            fprintf(stderr, PROG ": out of memory reading %s; left out\n", paths[i]);
            failed = 1;
        } else {
            note_part(&said, &t);
            used++;
        }
        an_trace_free(&t);
    }
    /* one host's processes share its clock; ranks may be on several hosts,
     * and have their clock sync measured: the merge chooses. So it does when
     * this run wraps the launcher (mlprof run -- torchrun, -- mpirun): its
     * own trace has no rank and goes on the clock of a rank on its host */
    mo.same_clock = !j.ranked;
    for (size_t i = 0; i < used; i++)
        mo.same_clock &= sum[i].rank < 0;
    an_trace merged;
    int have_merged = 0;
    if (!used && o.on_demand) {
        fprintf(stderr, PROG ": no capture was taken: no trace\n");
    } else if (!used) {
        fprintf(stderr, PROG ": no process of the run wrote a trace (was it a static program, or did it "
                        "clear LD_PRELOAD?)\n");
        failed = 1;
    } else {
        char err[600] = "";
        int method;
        /* a file named "-" as before, not standard output (the summary's) */
        if (an_merge_stream(sum, NULL, used, &mo, strcmp(output, "-") == 0 ? "./-" : output, &method, err,
                            sizeof err) != 0) {
            fprintf(stderr, PROG ": merging the processes' traces: %s\n", err[0] ? err : "out of memory");
            failed = 1;
        } else {
            if (j.ranked && j.world > 0) /* a rank's own output has the others' elsewhere */
                rank_warnings(sum, used, method);
            mlprof__sb jobs;
            mlprof__sb_init(&jobs);
            if (an_merge_jobs_differ(sum, used, &jobs))
                fprintf(stderr, PROG ": warning: %s holds traces of different jobs (their distributedInfo's "
                                "job_id or world_size differ), merged together: %s\n",
                        parts_dir, jobs.data ? jobs.data : "");
            mlprof__sb_free(&jobs);
            written = 1;
            /* the table of where the time went is the merged trace's: read
             * back when it is a file (not a FIFO, a terminal, /dev/null), and
             * not one so large that reading it would undo the merge's
             * bounded memory (a large job's ranks) */
            struct stat ost;
            if (!o.quiet && o.top && stat(output, &ost) == 0 && S_ISREG(ost.st_mode)) {
                if (ost.st_size > MAX_TABLE_BYTES)
                    fprintf(stderr, PROG ": note: the merged trace is %lld MiB: no table of where the time went "
                                    "here (mlprof analyze %s gives it)\n",
                            (long long)(ost.st_size >> 20), output);
                else if (an_trace_read(&merged, output) == 0)
                    have_merged = 1;
                else
                    an_trace_free(&merged);
            }
        }
    }
    if (!o.quiet)
        summary(&o, status, wall, &said, used, have_merged ? &merged : NULL, written ? output : NULL, parts_dir);
    if (have_merged)
        an_trace_free(&merged);
    mlprof__sb_free(&said.peaks);
    for (size_t i = 0; i < used; i++)
        an_merge_input_free(&sum[i]);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(sum);
    return rc ? rc : failed;
}
