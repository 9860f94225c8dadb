/*
 * capture.c - `mlprof capture PID`: asks a running process that waits for
 * captures (on_demand=on, `mlprof run --on-demand`) to record for a while or
 * for a number of frames, waits for the trace and prints its path; with
 * --flush, asks a flight recorder (mode=ring) to write its ring now. The
 * process's side is src/record/capture.c; they speak over its Unix socket,
 * RUNTIME_DIR/PID.sock, a few text lines each way. Only libc: this command
 * does not start the library in its own process.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../src/common/common.h"
#include "capture.h"

#define PROG "mlprof capture"

/* Exit statuses; the process sends back 1, 2, 5 and 6 with its errors. */
enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_NO_PROCESS = 3, EXIT_NOT_WAITING = 4, EXIT_BUSY = 5,
       EXIT_DENIED = 6, EXIT_NO_RING = 7 };

#define MAX_TARGETS 256
static unsigned long long g_answer_ms = 30000; /* --answer-timeout: for the first line (a process that
                                                 * accepts and never answers is stopped or hung) */

static void capture_usage(FILE *out)
{
    fprintf(out,
            "usage: mlprof capture PID [--duration T | --steps N | --frames NAME:N] [-o FILE]\n"
            "                          [--config K=V,...] [--tree]\n"
            "       mlprof capture PID --flush [-o FILE] [--tree]\n"
            "\n"
            "Captures a running process that waits for it (started by 'mlprof run --on-demand',\n"
            "or with on_demand=on / MLPROF_ON_DEMAND=1): it records for T, for the next N\n"
            "steps, or for the next N passes of the frame (or task) NAME, writes the trace,\n"
            "and this prints its path.\n"
            "Until asked, the process records nothing and its instrumentation costs what\n"
            "disabled costs. Each capture is a file of its own: the process's filename with\n"
            ".captureN before its extension (N counts the process's captures), or %%c in the\n"
            "filename replaced by N.\n"
            "With --flush, a flight recorder (started by 'mlprof run --mode ring', or with\n"
            "mode=ring) writes the events its ring holds now (the last ring_size bytes or\n"
            "ring_seconds) and records on: its filename with .flushN (N counts its flushes\n"
            "and its dump_signal dumps), or -o FILE. The next flush, the crash or the exit\n"
            "writes what came after this one.\n"
            "\n"
            "  --flush                write the ring of a process in ring mode, now\n"
            "  --duration T           how long: 5s (default), 500ms, 2m, or seconds (1.5)\n"
            "  --frames NAME:N        from the next begin of NAME to the end of its Nth pass\n"
            "                         (passes counted on the thread where the first began)\n"
            "  --steps N              from the next step boundary (mlprof_step()) to the Nth\n"
            "                         after it: N whole steps\n"
            "  -o, --output FILE      the trace's path (%%p: the pid), instead of the numbered one\n"
            "  --config K=V,...       configuration keys for this capture only, such as\n"
            "                         level=2,counters=cycles,instructions\n"
            "  --answer-timeout T     how long the process may take to read the request\n"
            "                         (default 30s)\n"
            "  --tree                 also the process's descendants that wait for captures\n"
            "                         (with --flush: those in ring mode; with -o, FILE gets\n"
            "                         .%%p before its extension)\n"
            "\n"
            "Only the process's own user may capture it. Exit status: 0 captured, 1 the\n"
            "capture failed (the process says why: its file could not be written...) or\n"
            "the process ended first, 2 a mistake on the command line (or a --config key\n"
            "the process refused), 3 no such process, 4 the process does not wait for\n"
            "captures (no mlprof, on_demand off, or a stale socket; --flush: no ring mode\n"
            "recording in it), 5 it records already (a capture of it is running, or\n"
            "it records all along: a flight recorder, whose ring --flush writes, or a\n"
            "schedule), 6 another user's process, 7 (--flush) the process is not in\n"
            "ring mode (it has no ring to write).\n"
            "A process that takes the request but does not answer within --answer-timeout\n"
            "(stopped, hung, or busy writing a large trace) is left with status 1 and a\n"
            "message.\n");
}

static void capture_bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'mlprof capture --help'.\n");
    exit(EXIT_USAGE);
}

/* "5s", "500ms", "2m", "1.5" (seconds) in milliseconds; 0 when it is not one. */
static unsigned long long parse_duration(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0) || !isfinite(v))
        return 0;
    double scale = 1000;
    if (strcmp(end, "ms") == 0)
        scale = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        scale = 60000;
    else if (strcmp(end, "h") == 0)
        scale = 3600000;
    else if (*end && strcmp(end, "s") != 0)
        return 0;
    double ms = ceil(v * scale);
    return ms >= 1 && ms < 1e12 ? (unsigned long long)ms : 0;
}

typedef struct target {
    pid_t pid;
    int fd;
    int done, code;
    int send_errno; /* the request could not be sent (the answer may still say why) */
    int skipped;    /* --tree --flush: not in ring mode, left out */
    int answered;   /* a line came back (the first, "hello", as soon as it read the request) */
    char comm[64];
    char line[8192];
    size_t len;
} target;

static void comm_of(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (fgets(buf, (int)len, f))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
    if (!buf[0])
        snprintf(buf, len, "?");
}

/* The folders where the process may have made its socket, as
 * src/record/capture.c chooses them: its XDG_RUNTIME_DIR (read from its
 * environment, ours if that cannot be read), else /tmp/mlprof-UID. */
static int socket_dirs(pid_t pid, char dirs[3][PATH_MAX])
{
    int n = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
        static char env[1 << 16];
        size_t len = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        env[len] = '\0';
        for (size_t at = 0; at < len; at += strlen(env + at) + 1)
            if (strncmp(env + at, "XDG_RUNTIME_DIR=/", 17) == 0)
                snprintf(dirs[n++], PATH_MAX, "%.4000s/mlprof", env + at + 16);
    }
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/' && (n == 0 || strncmp(dirs[0], xdg, strlen(xdg)) != 0))
        snprintf(dirs[n++], PATH_MAX, "%.4000s/mlprof", xdg);
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    unsigned uid = stat(path, &st) == 0 ? (unsigned)st.st_uid : (unsigned)geteuid();
    snprintf(dirs[n++], PATH_MAX, "/tmp/mlprof-%u", uid);
    return n;
}

static int find_socket(pid_t pid, char *out, size_t len)
{
    char dirs[3][PATH_MAX];
    int n = socket_dirs(pid, dirs);
    for (int i = 0; i < n; i++) {
        struct stat st;
        int w = snprintf(out, len, "%s/%d.sock", dirs[i], (int)pid);
        if (w > 0 && (size_t)w < len && lstat(out, &st) == 0 && S_ISSOCK(st.st_mode))
            return 0;
    }
    return -1;
}

/* Whether the process has libmlprof (or the preload library) mapped. */
static int has_mlprof(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "libmlprof") != NULL;
    if (f)
        fclose(f);
    return found;
}

static int has_children(pid_t pid)
{
    char path[64], c = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    int any = f && fread(&c, 1, 1, f) == 1 && c >= '0' && c <= '9';
    if (f)
        fclose(f);
    return any;
}

static int say(const target *t, int code, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, PROG ": process %d (%s): ", (int)t->pid, t->comm);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return code;
}

/* Connects to the process's socket. Returns 0, or the exit status (said on
 * standard error unless quiet_if_not_waiting and the process does not wait). */
static int g_flush;      /* --flush: the process's ring is asked for, not a capture */
static int g_tree_flush; /* ... of a tree: processes not in ring mode are left out */

static int connect_target(target *t, int quiet_if_not_waiting)
{
    comm_of(t->pid, t->comm, sizeof t->comm);
    char sock[PATH_MAX];
    int have = find_socket(t->pid, sock, sizeof sock) == 0;
    if (kill(t->pid, 0) != 0 && errno == ESRCH) {
        if (have && unlink(sock) == 0)
            return say(t, EXIT_NO_PROCESS, "no such process (it has exited; removed the stale socket %s%s it left)",
                       sock, "");
        return say(t, EXIT_NO_PROCESS, "no such process%s%s", "", "");
    }
    struct stat st;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", (int)t->pid);
    if (geteuid() != 0 && stat(proc, &st) == 0 && st.st_uid != geteuid())
        return say(t, EXIT_DENIED, "belongs to another user: only its owner may capture it%s%s", "", "");
    if (!have) {
        if (quiet_if_not_waiting)
            return EXIT_NOT_WAITING;
        const char *kids = has_children(t->pid) ? "; its children may: --tree captures those that do" : "";
        if (strcmp(t->comm, "mlprof") == 0)
            return say(t, EXIT_NOT_WAITING, "is the mlprof command itself: give the pid of the program it runs "
                       "(mlprof run --on-demand prints it), or --tree%s%s", "", "");
        if (g_flush && has_mlprof(t->pid))
            return say(t, EXIT_NOT_WAITING,
                       "has mlprof but no flight recorder to flush: it is not recording in ring mode (start it "
                       "with 'mlprof run --mode ring' or mode=ring)%s%s", kids, "");
        if (g_flush)
            return say(t, EXIT_NOT_WAITING,
                       "is not profiled by mlprof (no libmlprof in it): start it with 'mlprof run --mode ring -- "
                       "CMD'%s%s", kids, "");
        if (has_mlprof(t->pid))
            return say(t, EXIT_NOT_WAITING,
                       "has mlprof but does not wait for captures: start it with on_demand=on "
                       "(MLPROF_ON_DEMAND=1) or 'mlprof run --on-demand'%s%s", kids, "");
        return say(t, EXIT_NOT_WAITING,
                   "is not profiled by mlprof (no libmlprof in it): start it with 'mlprof run --on-demand -- "
                   "CMD'%s%s", kids, "");
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(sock) >= sizeof addr.sun_path)
        return say(t, EXIT_NOT_WAITING, "its socket's path %s is too long%s", sock, "");
    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    for (int attempt = 0;; attempt++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return say(t, EXIT_FAILED, "socket: %s%s", strerror(errno), "");
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
            t->fd = fd;
            break;
        }
        int err = errno;
        close(fd);
        if (err == EACCES || err == EPERM)
            return say(t, EXIT_DENIED, "cannot connect to %s: %s", sock, strerror(err));
        if (err != ECONNREFUSED || attempt == 2) {
            if (err == ECONNREFUSED && unlink(sock) == 0) {
                if (quiet_if_not_waiting)
                    return EXIT_NOT_WAITING;
                return say(t, EXIT_NOT_WAITING,
                           "does not answer on %s: a stale socket, left by an earlier process with this pid "
                           "(removed); this one does not wait for captures%s", sock, "");
            }
            return say(t, EXIT_NOT_WAITING, "cannot connect to %s: %s", sock, strerror(err));
        }
        struct timespec ts = {0, 200 * 1000000}; /* it may be between bind and listen */
        nanosleep(&ts, NULL);
    }
    /* the socket must be that process's own */
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(t->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid != t->pid) {
        char other[32];
        snprintf(other, sizeof other, "%d", (int)cred.pid);
        close(t->fd);
        t->fd = -1;
        return say(t, EXIT_NOT_WAITING, "%s is served by process %s, not by it", sock, other);
    }
    return 0;
}

static int send_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One line from the process: "started PATH", "armed PATH", "ok PATH",
 * "error CODE MESSAGE". */
static void handle_line(target *t, const char *line, int print_progress, const char *what)
{
    t->answered = 1;
    if (strncmp(line, "hello ", 6) == 0) /* it has read the request */
        return;
    if (strncmp(line, "started ", 8) == 0 || strncmp(line, "armed ", 6) == 0) {
        if (print_progress)
            fprintf(stderr, PROG ": process %d (%s): %s %s into %s\n", (int)t->pid, t->comm,
                    line[0] == 's' ? "capturing" : "waiting for", what, strchr(line, ' ') + 1);
        return;
    }
    t->done = 1;
    if (strncmp(line, "ok ", 3) == 0) {
        printf("%s\n", line + 3);
        fflush(stdout);
        t->code = EXIT_OK;
        return;
    }
    int code = EXIT_FAILED;
    const char *msg = line;
    if (strncmp(line, "error ", 6) == 0) {
        char *end;
        long c = strtol(line + 6, &end, 10);
        if (end != line + 6 && c > 0 && c < 100)
            code = (int)c;
        msg = *end == ' ' ? end + 1 : end;
    }
    if (g_flush && code == EXIT_NO_RING && g_tree_flush) { /* a descendant that is no flight recorder */
        t->code = EXIT_OK;
        t->skipped = 1;
        return;
    }
    t->code = say(t, code, "%s%s", msg, "");
}

static void read_target(target *t, int print_progress, const char *what)
{
    ssize_t n = read(t->fd, t->line + t->len, sizeof t->line - 1 - t->len);
    if (n < 0 && errno == EINTR)
        return;
    if (n <= 0) {
        t->done = 1;
        if (t->send_errno) {
            t->code = say(t, EXIT_FAILED, "cannot send the request: %s%s", strerror(t->send_errno), "");
            return;
        }
        t->code = kill(t->pid, 0) != 0 && errno == ESRCH
                      ? say(t, EXIT_FAILED, "ended during the capture (its trace, if any, was written at its exit)%s%s",
                            "", "")
                      : say(t, EXIT_FAILED, "closed the connection without an answer%s%s", "", "");
        return;
    }
    t->len += (size_t)n;
    t->line[t->len] = '\0';
    char *nl;
    while (!t->done && (nl = strchr(t->line, '\n')) != NULL) {
        *nl = '\0';
        handle_line(t, t->line, print_progress, what);
        size_t used = (size_t)(nl + 1 - t->line);
        memmove(t->line, nl + 1, t->len - used + 1);
        t->len -= used;
    }
    if (t->len == sizeof t->line - 1) /* no line fits: not our peer */
        t->done = 1, t->code = say(t, EXIT_FAILED, "sent an answer that is not mlprof's%s%s", "", "");
}

/* The process's descendants (children of children...), from /proc. */
static size_t descendants(pid_t root, pid_t *out, size_t max)
{
    static pid_t pid[65536], ppid[65536];
    size_t n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < 65536) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *paren = strrchr(buf, ')');
        int parent;
        if (paren && sscanf(paren + 1, " %*c %d", &parent) == 1) {
            pid[n] = (pid_t)atoi(e->d_name);
            ppid[n++] = (pid_t)parent;
        }
    }
    if (d)
        closedir(d);
    size_t found = 0;
    out[found++] = root;
    for (size_t at = 0; at < found && found < max; at++)
        for (size_t i = 0; i < n && found < max; i++)
            if (ppid[i] == out[at])
                out[found++] = pid[i];
    return found;
}

/* FILE with ".%p" before its extension, made absolute: the processes write it
 * from their own working folders. */
static void output_path(const char *file, int per_pid, char *out, size_t len)
{
    char abs[PATH_MAX * 2];
    if (file[0] == '/' || !getcwd(abs, PATH_MAX))
        snprintf(abs, sizeof abs, "%s", file); /* no working folder: the name as given */
    else
        snprintf(abs + strlen(abs), sizeof abs - strlen(abs), "/%s", file);
    if (!per_pid || strstr(abs, "%p")) {
        snprintf(out, len, "%s", abs);
        return;
    }
    const char *slash = strrchr(abs, '/');
    const char *base = slash ? slash + 1 : abs;
    const char *ext = strrchr(base, '.');
    if (!ext || ext == base)
        ext = base + strlen(base);
    snprintf(out, len, "%.*s.%%p%s", (int)(ext - abs), abs, ext);
}

/* Whether argv[*i] is option lng (or shrt), as "--opt value" or "--opt=value";
 * its value in *v. */
static int option(int argc, char **argv, int *i, const char *lng, const char *shrt, const char **v)
{
    const char *a = argv[*i];
    size_t n = strlen(lng);
    if (strncmp(a, lng, n) == 0 && a[n] == '=') {
        *v = a + n + 1;
        return 1;
    }
    if (strcmp(a, lng) != 0 && !(shrt && strcmp(a, shrt) == 0))
        return 0;
    if (*i + 1 >= argc)
        capture_bad_usage("option %s needs a value", lng);
    *v = argv[++*i];
    return 1;
}

int mlprof_cmd_capture(int argc, char **argv)
{
    const char *pid_arg = NULL, *output = NULL, *frames = NULL;
    unsigned long long duration_ms = 0;
    long steps = 0;
    int tree = 0;
    static char config[PATH_MAX];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            capture_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--tree") == 0) {
            tree = 1;
        } else if (strcmp(a, "--flush") == 0) {
            g_flush = 1;
        } else if (option(argc, argv, &i, "--duration", NULL, &v)) {
            if (!(duration_ms = parse_duration(v)))
                capture_bad_usage("--duration: expected a time such as 5s, 500ms or 2m, got \"%s\"", v);
        } else if (option(argc, argv, &i, "--answer-timeout", NULL, &v)) {
            if (!(g_answer_ms = parse_duration(v)) || g_answer_ms > 24ull * 3600 * 1000)
                capture_bad_usage("--answer-timeout: expected a time such as 30s or 500ms, up to 24h, got \"%s\"", v);
        } else if (option(argc, argv, &i, "--frames", NULL, &v)) {
            const char *colon = strrchr(v, ':');
            char *end = NULL;
            long n = colon ? strtol(colon + 1, &end, 10) : 0;
            if (!colon || colon == v || *end || n < 1 || n > 1000000000 || colon - v > 255)
                capture_bad_usage("--frames: expected NAME:N (a frame's or task's name, N passes), got \"%s\"", v);
            frames = v;
        } else if (option(argc, argv, &i, "--steps", NULL, &v)) {
            char *end;
            errno = 0;
            steps = strtol(v, &end, 10);
            if (errno || end == v || *end || steps < 1 || steps > 1000000000)
                capture_bad_usage("--steps: expected a number of steps from 1, got \"%s\"", v);
        } else if (option(argc, argv, &i, "--output", "-o", &v)) {
            if (!v[0])
                capture_bad_usage("%s", "-o needs a file name");
            output = v;
        } else if (option(argc, argv, &i, "--config", NULL, &v)) {
            if (!strchr(v, '='))
                capture_bad_usage("--config: expected key=value,..., got \"%s\"", v);
            size_t at = strlen(config);
            if (at + strlen(v) + 2 >= sizeof config)
                capture_bad_usage("%s", "--config: too long");
            snprintf(config + at, sizeof config - at, "%s%s", at ? "," : "", v);
        } else if (a[0] == '-') {
            char hint[96];
            fprintf(stderr, PROG ": unknown option \"%s\"%s\nTry 'mlprof capture --help'.\n", a,
                    mlprof__option_hint(a, capture_usage, hint, sizeof hint));
            exit(EXIT_USAGE);
        } else if (!pid_arg) {
            pid_arg = a;
        } else {
            capture_bad_usage("one PID only (--tree for its descendants), got \"%s\" too", a);
        }
    }
    if (!pid_arg)
        capture_bad_usage("%s", "which process? (mlprof capture PID)");
    char *end;
    long pid = strtol(pid_arg, &end, 10);
    if (*end || pid < 1 || pid > INT_MAX)
        capture_bad_usage("expected a process id, got \"%s\"", pid_arg);
    if (!!frames + !!duration_ms + !!steps > 1)
        capture_bad_usage("%s", "--duration, --steps and --frames: one of them");
    if (g_flush && (frames || duration_ms || steps || config[0]))
        capture_bad_usage("%s", "--flush writes the ring as it is now: no --duration, --steps, --frames or "
                                "--config with it");
    g_tree_flush = g_flush && tree;
    if (!frames && !duration_ms && !steps && !g_flush)
        duration_ms = 5000;
    if (strchr(config, '\n') || (output && strchr(output, '\n')) || (frames && strchr(frames, '\n')))
        capture_bad_usage("%s", "no line breaks in options, please");

    static pid_t pids[MAX_TARGETS];
    size_t npids = tree ? descendants((pid_t)pid, pids, MAX_TARGETS) : (pids[0] = (pid_t)pid, 1);
    static target targets[MAX_TARGETS];
    size_t n = 0;
    int status = EXIT_OK, skipped = 0;
    for (size_t i = 0; i < npids; i++) {
        target *t = &targets[n];
        memset(t, 0, sizeof *t);
        t->pid = pids[i];
        t->fd = -1;
        int rc = connect_target(t, tree);
        if (rc == EXIT_NOT_WAITING && tree) { /* `mlprof run` itself, a launcher: their children may */
            skipped++;
            continue;
        }
        if (rc != 0) {
            if (!status)
                status = rc;
            continue;
        }
        char request[3 * PATH_MAX], path[PATH_MAX * 2 + 16];
        /* hello: the process says at once that it took the request (one
         * older than this client does not: --answer-timeout then waits for
         * its first real answer) */
        int len = snprintf(request, sizeof request, "mlprof-capture 1\nhello 1\n");
        if (g_flush)
            len += snprintf(request + len, sizeof request - (size_t)len, "flush 1\n");
        else if (frames)
            len += snprintf(request + len, sizeof request - (size_t)len, "frames %s\n", frames);
        else if (steps)
            len += snprintf(request + len, sizeof request - (size_t)len, "steps %ld\n", steps);
        else
            len += snprintf(request + len, sizeof request - (size_t)len, "duration_ms %llu\n", duration_ms);
        if (output) {
            output_path(output, tree, path, sizeof path);
            len += snprintf(request + len, sizeof request - (size_t)len, "output %s\n", path);
        }
        if (config[0])
            len += snprintf(request + len, sizeof request - (size_t)len, "config %s\n", config);
        len += snprintf(request + len, sizeof request - (size_t)len, "\n");
        if (len >= (int)sizeof request) {
            say(t, EXIT_USAGE, "the request is too long%s%s", "", "");
            close(t->fd);
            status = status ? status : EXIT_USAGE;
            continue;
        }
        /* a process that refuses (another user) answers and closes before
         * reading: its answer is read all the same */
        t->send_errno = send_all(t->fd, request, (size_t)len) != 0 ? errno : 0;
        n++;
    }
    if (tree && !n && !status) {
        if (g_flush)
            fprintf(stderr, PROG ": neither process %ld nor any of its %d descendant%s records in ring mode (start "
                            "them with 'mlprof run --mode ring' or mode=ring)\n", pid, skipped - 1,
                    skipped == 2 ? "" : "s");
        else
            fprintf(stderr, PROG ": neither process %ld nor any of its %d descendant%s waits for captures (start "
                            "them with 'mlprof run --on-demand' or on_demand=on)\n", pid, skipped - 1,
                    skipped == 2 ? "" : "s");
        return g_flush ? EXIT_NO_RING : EXIT_NOT_WAITING;
    }
    if (skipped)
        fprintf(stderr, PROG ": %d process%s of the tree of %ld do%s not %s: left out\n", skipped,
                skipped == 1 ? "" : "es", pid, skipped == 1 ? "es" : "",
                g_flush ? "answer flushes" : "wait for captures");
    char what[300];
    if (frames)
        snprintf(what, sizeof what, "the next %s passes of %.*s", strrchr(frames, ':') + 1,
                 (int)(strrchr(frames, ':') - frames), frames);
    else if (steps)
        snprintf(what, sizeof what, "the next %ld steps (mlprof_step)", steps);
    else
        snprintf(what, sizeof what, "%.3g s", (double)duration_ms / 1000);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t left = n; left;) {
        struct pollfd p[MAX_TARGETS];
        int waiting_first = 0; /* targets that have not said hello */
        for (size_t i = 0; i < n; i++) {
            p[i] = (struct pollfd){targets[i].done ? -1 : targets[i].fd, POLLIN, 0};
            waiting_first |= !targets[i].done && !targets[i].answered;
        }
        int timeout = -1;
        if (waiting_first) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long long ms = (long long)(now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
            if (ms >= (long long)g_answer_ms) {
                for (size_t i = 0; i < n; i++) {
                    target *t = &targets[i];
                    if (t->done || t->answered)
                        continue;
                    t->done = 1;
                    left--;
                    close(t->fd);
                    char secs[32];
                    snprintf(secs, sizeof secs, "%.3g", (double)g_answer_ms / 1000);
                    t->code = say(t, EXIT_FAILED, "took the request but did not answer in %s s: it is stopped, hung or "
                                  "busy writing a trace (try again, or look at it with gdb -p)%s", secs, "");
                    if (!status)
                        status = t->code;
                }
                continue;
            }
            timeout = (int)((long long)g_answer_ms - ms);
        }
        if (poll(p, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            perror(PROG ": poll");
            return EXIT_FAILED;
        }
        for (size_t i = 0; i < n; i++) {
            target *t = &targets[i];
            if (t->done || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            read_target(t, 1, what);
            if (t->done) {
                left--;
                close(t->fd);
                if (t->code && !status)
                    status = t->code;
            }
        }
    }
    if (g_tree_flush) { /* the tree's processes that answered without a ring */
        size_t ringless = 0, flushed = 0;
        for (size_t i = 0; i < n; i++) {
            ringless += targets[i].skipped;
            flushed += targets[i].done && !targets[i].skipped && targets[i].code == EXIT_OK;
        }
        if (ringless)
            fprintf(stderr, PROG ": %zu process%s of the tree of %ld record%s but not in ring mode: left out\n",
                    ringless, ringless == 1 ? "" : "es", pid, ringless == 1 ? "s" : "");
        if (!flushed && !status && ringless) {
            fprintf(stderr, PROG ": no process of the tree of %ld is in ring mode: nothing flushed\n", pid);
            return EXIT_NO_RING;
        }
    }
    return status;
}
