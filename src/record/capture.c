/*
 * capture.c - captures taken while the program runs, each written to a file
 * of its own:
 *   - on demand (on_demand=on): a thread of ours serves a Unix socket,
 *     RUNTIME_DIR/PID.sock, where `mlprof capture PID` asks for a capture of
 *     a duration, of the next N steps (mlprof_step) or of the next N passes
 *     of a named frame;
 *   - between the program's own markers (capture_range=...): a span of a
 *     name, cudaProfilerStart/Stop (the cuda hook), an NVTX range (the nvtx
 *     hook).
 * Between captures the state is STOP, so the hot path pays what it pays
 * disabled: one load and one branch. Only a span trigger (capture_range=
 * span:NAME, or a capture of frames waiting for its first pass) sets a second
 * bit of the active flag, which sends the begins and ends of spans into the
 * recorder, where the spans of that name alone do anything.
 *
 * Why a Unix socket: the kernel tells the server who connects (SO_PEERCRED:
 * only the process's own user is served), the directory is private (0700,
 * checked to be ours), the client learns at connect whether the process is
 * alive and listening (a file left by a killed process refuses the
 * connection: stale, removed by the client), one connection carries the
 * request, the start, the result and its errors back, and a second client
 * while a capture runs is answered "busy" by the same thread. A signal would
 * need a file for the request and another for the answer, and could not tell
 * who sent it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int mlprof__trigger_on;
char mlprof__trigger_name[256];
int mlprof__range_kind;

/* Who holds the capture: one at a time in a process. */
enum { CLAIM_IDLE = 0, CLAIM_DEMAND, CLAIM_FRAMES_ARMED, CLAIM_FRAMES, CLAIM_RANGE, CLAIM_STEPS_ARMED,
       CLAIM_STEPS };
static int g_claim; /* atomic */
static int g_number; /* atomic: captures taken in this process */

/* The client's exit statuses, sent back with an error (tools/capture.c). */
enum { CODE_FAILED = 1, CODE_USAGE = 2, CODE_BUSY = 5, CODE_DENIED = 6 };

/* capture_range, parsed (ctl) */
static char g_range_name[256];
/* a capture of frames waiting or running (ctl) */
static int g_frames_armed;
static char g_frames_name[256];

/* A range being recorded between a begin and its end on one thread: the
 * owner's own fields need no lock; running and owner are read by others. */
static struct {
    int running;     /* atomic */
    void *owner;     /* atomic: the owner thread's token (this_thread()) */
    int depth;       /* owner's: open spans of the name (NVTX: open ranges) */
    int passes, count;
    int cuda;        /* atomic: a cudaProfilerStart range is recording */
    int step_count;  /* a capture of steps: how many */
    int step_passes; /* atomic: steps ended since it started */
    char error[512]; /* why the start failed, for the listener */
} T;

/* --------------------------------------------------------- capture range */

int mlprof__capture_range_check(const char *v, char *why, size_t len)
{
    if (!v[0] || strcmp(v, "cudaProfilerStart") == 0)
        return 0;
    const char *name = strncmp(v, "nvtx:", 5) == 0 ? v + 5 : strncmp(v, "span:", 5) == 0 ? v + 5 : NULL;
    if (name && name[0] && strlen(name) < sizeof g_range_name)
        return 0;
    snprintf(why, len, "expected \"\" (none), cudaProfilerStart, nvtx:NAME or span:NAME (a name of 1 to 255 bytes)");
    return -1;
}

static void parse_range(const char *v, int *kind, char *name)
{
    name[0] = '\0';
    if (!v[0])
        *kind = MLPROF__RANGE_NONE;
    else if (strcmp(v, "cudaProfilerStart") == 0)
        *kind = MLPROF__RANGE_CUDA;
    else {
        *kind = strncmp(v, "nvtx:", 5) == 0 ? MLPROF__RANGE_NVTX : MLPROF__RANGE_SPAN;
        snprintf(name, 256, "%.255s", v + 5);
    }
}

/* The span trigger follows a capture of frames, else capture_range. (ctl;
 * the fields are written under reg_lock too, which handle creation holds) */
static void set_trigger(void)
{
    int kind = __atomic_load_n(&mlprof__range_kind, __ATOMIC_RELAXED);
    pthread_mutex_lock(&mlprof__g.reg_lock);
    if (g_frames_armed)
        snprintf(mlprof__trigger_name, sizeof mlprof__trigger_name, "%s", g_frames_name);
    else if (kind == MLPROF__RANGE_SPAN)
        snprintf(mlprof__trigger_name, sizeof mlprof__trigger_name, "%s", g_range_name);
    mlprof__trigger_on = g_frames_armed || kind == MLPROF__RANGE_SPAN;
    pthread_mutex_unlock(&mlprof__g.reg_lock);
}

/* A capture's state changes and dumps are not the program's: its steps
 * (mlprof_step) go on counting, its schedule is left alone. */
static int quiet_set_state(int state)
{
    mlprof__steps_internal(1);
    int rc = mlprof_set_state(state);
    mlprof__steps_internal(0);
    return rc;
}

/* ------------------------------------------------------- one capture's file */

#define MAX_KEYS 32
static struct {
    int n;
    char key[MAX_KEYS + 1][64];
    char old[MAX_KEYS + 1][MLPROF__PATH_MAX];
    char path[MLPROF__PATH_MAX]; /* the trace's path, expanded */
} S;

/* The configured filename with the capture's number: "%c" replaced by it,
 * else ".captureN" before the extension (".json", ".json.gz", ".pftrace"). */
static void numbered_name(const char *filename, int n, char *out, size_t len)
{
    const char *c = strstr(filename, "%c");
    if (c) {
        size_t at = 0;
        for (const char *p = filename; *p && at + 16 < len;) {
            if (p[0] == '%' && p[1] == 'c') {
                at += (size_t)snprintf(out + at, len - at, "%d", n);
                p += 2;
            } else {
                out[at++] = *p++;
            }
        }
        out[at] = '\0';
        return;
    }
    const char *base = strrchr(filename, '/');
    base = base ? base + 1 : filename;
    const char *ext = strrchr(base, '.');
    if (ext && strcmp(ext, ".gz") == 0) {
        const char *before = ext;
        while (before > base && before[-1] != '.')
            before--;
        if (before > base + 1)
            ext = before - 1;
    }
    if (!ext || ext == base)
        ext = base + strlen(base);
    snprintf(out, len, "%.*s.capture%d%s", (int)(ext - filename), filename, n, ext);
}

/* Restores the keys a capture changed. */
static void restore_config(void)
{
    const char *k[MAX_KEYS + 1], *v[MAX_KEYS + 1];
    for (int i = 0; i < S.n; i++)
        k[i] = S.key[i], v[i] = S.old[i];
    if (S.n && mlprof_set_configs(S.n, k, v) != MLPROF_OK)
        mlprof__log(MLPROF_LOG_ERROR, "capture: restoring the configuration: %s", mlprof_last_error());
    S.n = 0;
}

/* Sets the capture's configuration: config ("key=value,key=value"; a piece
 * without '=' belongs to the value before, as in counters=cycles,instructions)
 * and the file (output, or the numbered filename). Returns 0, or the client's
 * exit status with the reason in err. */
static int prepare(const char *output, const char *config, char *err, size_t errlen)
{
    static char vals[MAX_KEYS + 1][MLPROF__PATH_MAX];
    char list[MLPROF__PATH_MAX];
    snprintf(list, sizeof list, "%s", config ? config : "");
    int n = 0;
    for (char *save = NULL, *piece = strtok_r(list, ",", &save); piece; piece = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(piece, '=');
        if (!eq && n) { /* a comma inside the value before */
            size_t at = strlen(vals[n - 1]);
            snprintf(vals[n - 1] + at, sizeof vals[0] - at, ",%s", piece);
            continue;
        }
        if (!eq || eq == piece || n == MAX_KEYS) {
            snprintf(err, errlen, "--config: expected key=value,... (at most %d keys), got \"%s\"", MAX_KEYS,
                     piece);
            return CODE_USAGE;
        }
        *eq = '\0';
        if (strcmp(piece, "filename") == 0 || strcmp(piece, "on_demand") == 0 ||
            strcmp(piece, "capture_range") == 0) {
            snprintf(err, errlen, "--config: %s cannot change for a capture%s", piece,
                     strcmp(piece, "filename") == 0 ? " (give -o FILE)" : "");
            return CODE_USAGE;
        }
        snprintf(S.key[n], sizeof S.key[0], "%s", piece);
        snprintf(vals[n], sizeof vals[0], "%s", eq + 1);
        n++;
    }
    int number = __atomic_load_n(&g_number, __ATOMIC_RELAXED) + 1;
    snprintf(S.key[n], sizeof S.key[0], "filename");
    if (output && output[0]) {
        snprintf(vals[n], sizeof vals[0], "%s", output);
    } else {
        char filename[MLPROF__PATH_MAX];
        mlprof_get_config("filename", filename, sizeof filename);
        numbered_name(filename, number, vals[n], sizeof vals[0]);
    }
    n++;
    const char *k[MAX_KEYS + 1], *v[MAX_KEYS + 1];
    for (int i = 0; i < n; i++) {
        if (mlprof_get_config(S.key[i], S.old[i], sizeof S.old[0]) != MLPROF_OK) {
            snprintf(err, errlen, "--config: %s", mlprof_last_error());
            return CODE_USAGE;
        }
        k[i] = S.key[i], v[i] = vals[i];
    }
    int rc = mlprof_set_configs(n, k, v);
    if (rc != MLPROF_OK) {
        snprintf(err, errlen, "%s%s", rc == MLPROF_EKEY || rc == MLPROF_EVALUE ? "--config: " : "",
                 mlprof_last_error());
        return rc == MLPROF_EKEY || rc == MLPROF_EVALUE ? CODE_USAGE : CODE_FAILED;
    }
    S.n = n;
    mlprof_trace_path(S.path, sizeof S.path);
    /* said now rather than after the capture: the folder must take the file */
    char dir[MLPROF__PATH_MAX];
    snprintf(dir, sizeof dir, "%s", S.path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = '\0') : (void)(*slash = '\0');
    else
        snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "cannot write the capture's trace %s: %s", mlprof__shortened(S.path).s, strerror(errno));
        restore_config();
        return CODE_FAILED;
    }
    __atomic_store_n(&g_number, number, __ATOMIC_RELAXED);
    return 0;
}

/* Writes the capture's trace (recording stops) and restores the
 * configuration. Returns 0, or CODE_FAILED with the reason in err: the events
 * of a capture that could not be written are discarded, not left for the
 * next capture or the exit. */
static int write_capture(char *err, size_t errlen)
{
    mlprof__steps_internal(1);
    int rc = mlprof_dump(1);
    mlprof__steps_internal(0);
    if (rc != MLPROF_OK) {
        snprintf(err, errlen, "%s (the capture's events are discarded)", mlprof_last_error());
        mlprof_clear();
    }
    restore_config();
    return rc == MLPROF_OK ? 0 : CODE_FAILED;
}

static void release(void) { __atomic_store_n(&g_claim, CLAIM_IDLE, __ATOMIC_RELEASE); }

/* --------------------------------------------------------------- triggers */

static int g_done_pipe[2] = {-1, -1}; /* the trigger tells the listener a capture of frames ended */

static void notify_listener(void)
{
    char c = 1;
    if (write(g_done_pipe[1], &c, 1) < 0)
        mlprof__log(MLPROF_LOG_ERROR, "capture: cannot wake the listener: %s", strerror(errno));
}

static void log_skipped(const char *what)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        mlprof__log(MLPROF_LOG_WARN, "capture_range: %s began while another capture was running: not captured "
                                     "(said once)", what);
}

/* A token of the calling thread, read and written atomically (a pthread_t
 * need not be). */
static void *this_thread(void)
{
    static __thread char token;
    return &token;
}

/* Starts a range on the calling thread: kind is the claim it holds. */
static void range_start(int kind, int count)
{
    char err[512] = "";
    if (kind == CLAIM_RANGE && prepare(NULL, NULL, err, sizeof err) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "capture_range: %s", err);
        release();
        return;
    }
    __atomic_store_n(&T.owner, this_thread(), __ATOMIC_RELAXED);
    T.depth = 1;
    T.passes = 0;
    T.count = count;
    if (quiet_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
        if (kind == CLAIM_FRAMES) {
            snprintf(T.error, sizeof T.error, "cannot start recording: %s", mlprof_last_error());
            notify_listener();
            return;
        }
        mlprof__log(MLPROF_LOG_ERROR, "capture_range: cannot start recording: %s", mlprof_last_error());
        restore_config();
        release();
        return;
    }
    __atomic_store_n(&T.running, 1, __ATOMIC_RELEASE);
}

/* The range's last end: recording stops here, exactly; the listener writes a
 * capture of frames, the calling thread a range's. */
static void range_stop(void)
{
    __atomic_store_n(&T.running, 0, __ATOMIC_RELEASE);
    quiet_set_state(MLPROF_STATE_STOP);
    if (__atomic_load_n(&g_claim, __ATOMIC_ACQUIRE) == CLAIM_FRAMES) {
        notify_listener();
        return;
    }
    char err[600];
    if (write_capture(err, sizeof err) != 0)
        mlprof__log(MLPROF_LOG_ERROR, "capture_range: %s", err);
    else
        mlprof__log(MLPROF_LOG_INFO, "capture_range: trace written to %s", S.path);
    release();
}

static int owned_here(void)
{
    return __atomic_load_n(&T.running, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&T.owner, __ATOMIC_RELAXED) == this_thread();
}

void mlprof__capture_span_begin(const void *handle)
{
    (void)handle;
    if (owned_here()) {
        T.depth++;
        return;
    }
    if (mlprof__busy || __atomic_load_n(&T.running, __ATOMIC_ACQUIRE))
        return;
    int expect = CLAIM_FRAMES_ARMED;
    if (__atomic_compare_exchange_n(&g_claim, &expect, CLAIM_FRAMES, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        range_start(CLAIM_FRAMES, T.count);
        return;
    }
    if (__atomic_load_n(&mlprof__range_kind, __ATOMIC_RELAXED) != MLPROF__RANGE_SPAN)
        return;
    expect = CLAIM_IDLE;
    if (__atomic_compare_exchange_n(&g_claim, &expect, CLAIM_RANGE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        range_start(CLAIM_RANGE, 1);
    else if (expect != CLAIM_RANGE)
        log_skipped("the span");
}

void mlprof__capture_span_end(const void *handle)
{
    (void)handle;
    if (!owned_here() || --T.depth > 0 || ++T.passes < T.count)
        return;
    range_stop();
}

void mlprof__capture_nvtx(const char *pushed)
{
    if (__atomic_load_n(&mlprof__range_kind, __ATOMIC_RELAXED) != MLPROF__RANGE_NVTX)
        return;
    if (!pushed) {
        mlprof__capture_span_end(NULL);
        return;
    }
    if (owned_here()) { /* pops are anonymous: every range pushed inside counts */
        T.depth++;
        return;
    }
    if (mlprof__busy || strcmp(pushed, g_range_name) != 0 || __atomic_load_n(&T.running, __ATOMIC_ACQUIRE))
        return;
    int expect = CLAIM_IDLE;
    if (__atomic_compare_exchange_n(&g_claim, &expect, CLAIM_RANGE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        range_start(CLAIM_RANGE, 1);
    else
        log_skipped("the NVTX range");
}

void mlprof__capture_step(void)
{
    int claim = __atomic_load_n(&g_claim, __ATOMIC_ACQUIRE);
    if (claim == CLAIM_STEPS) {
        if (__atomic_add_fetch(&T.step_passes, 1, __ATOMIC_ACQ_REL) == T.step_count) {
            quiet_set_state(MLPROF_STATE_STOP); /* right after the step's own span */
            notify_listener();
        }
        return;
    }
    int expect = CLAIM_STEPS_ARMED;
    if (claim != CLAIM_STEPS_ARMED || mlprof__busy ||
        !__atomic_compare_exchange_n(&g_claim, &expect, CLAIM_STEPS, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&T.step_passes, 0, __ATOMIC_RELAXED);
    if (quiet_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
        snprintf(T.error, sizeof T.error, "cannot start recording: %s", mlprof_last_error());
        notify_listener();
    }
}

void mlprof__capture_cuda_profiler(int start)
{
    if (__atomic_load_n(&mlprof__range_kind, __ATOMIC_RELAXED) != MLPROF__RANGE_CUDA || mlprof__busy)
        return;
    if (start) {
        int expect = CLAIM_IDLE;
        if (!__atomic_compare_exchange_n(&g_claim, &expect, CLAIM_RANGE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            if (expect != CLAIM_RANGE)
                log_skipped("cudaProfilerStart");
            return;
        }
        char err[512];
        if (prepare(NULL, NULL, err, sizeof err) != 0) {
            mlprof__log(MLPROF_LOG_ERROR, "capture_range: %s", err);
            release();
            return;
        }
        if (quiet_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
            mlprof__log(MLPROF_LOG_ERROR, "capture_range: cannot start recording: %s", mlprof_last_error());
            restore_config();
            release();
            return;
        }
        __atomic_store_n(&T.cuda, 1, __ATOMIC_RELEASE);
        return;
    }
    int expect = 1; /* a stop without a start, or a second stop, does nothing */
    if (!__atomic_compare_exchange_n(&T.cuda, &expect, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    range_stop();
}

/* ----------------------------------------------------------- the listener */

static int g_listening;     /* (ctl) a listener was started (or failed to) in this process */
static int g_listen_fd = -1;
static pid_t g_sock_pid;    /* the process that made the socket: only it removes it */
static char g_sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

static void remove_socket(void)
{
    if (g_sock_pid == getpid() && g_sock_path[0])
        unlink(g_sock_path);
}

/* $XDG_RUNTIME_DIR/mlprof, else /tmp/mlprof-UID: made 0700, and refused unless
 * it is a folder of ours that nobody else may enter. tools/capture.c looks in
 * the same places. */
static int runtime_dir(char *dir, size_t len, char *why, size_t wlen)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/')
        snprintf(dir, len, "%s/mlprof", xdg);
    else
        snprintf(dir, len, "/tmp/mlprof-%u", (unsigned)geteuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, wlen, "cannot make %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        snprintf(why, wlen, "%s is not a private folder of this user (it must be owned by uid %u, mode 0700)", dir,
                 (unsigned)geteuid());
        return -1;
    }
    return 0;
}

static void send_line(int fd, const char *fmt, ...) MLPROF_I_PRINTF(2, 3);
static void send_line(int fd, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++) /* one line: a message may hold none */
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    for (int at = 0; at < n;) {
        ssize_t w = send(fd, line + at, (size_t)(n - at), MSG_NOSIGNAL);
        if (w <= 0 && errno != EINTR)
            return;
        at += w > 0 ? (int)w : 0;
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Only the process's own user may ask. Returns 0 if the peer is it. */
static int peer_allowed(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        send_line(fd, "error %d cannot tell who is asking: %s", CODE_DENIED, strerror(errno));
        return -1;
    }
    if (cred.uid != geteuid()) {
        send_line(fd, "error %d refused: uid %u may not capture process %d of uid %u", CODE_DENIED,
                  (unsigned)cred.uid, (int)getpid(), (unsigned)geteuid());
        return -1;
    }
    return 0;
}

typedef struct request {
    uint64_t duration_ms;
    int steps;
    char frames[256];
    int frames_count;
    char output[MLPROF__PATH_MAX];
    char config[MLPROF__PATH_MAX];
} request;

/* Reads "key value" lines up to an empty one, for at most timeout_ms. */
static int read_request(int fd, request *r, int timeout_ms, char *err, size_t errlen)
{
    static char buf[3 * MLPROF__PATH_MAX];
    size_t len = 0;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    memset(r, 0, sizeof *r);
    for (;;) {
        buf[len] = '\0';
        if (strstr(buf, "\n\n"))
            break;
        uint64_t now = now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (len >= sizeof buf - 1 || now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0) {
            snprintf(err, errlen, "no complete request");
            return -1;
        }
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0) {
            snprintf(err, errlen, "the client went away");
            return -1;
        }
        len += (size_t)n;
    }
    if (strncmp(buf, "mlprof-capture 1\n", 17) != 0) {
        snprintf(err, errlen, "not an mlprof capture request (another mlprof version?)");
        return -1;
    }
    for (char *save = NULL, *line = strtok_r(buf + 17, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp++ = '\0';
        if (strcmp(line, "duration_ms") == 0)
            r->duration_ms = strtoull(sp, NULL, 10);
        else if (strcmp(line, "steps") == 0)
            r->steps = atoi(sp);
        else if (strcmp(line, "output") == 0)
            snprintf(r->output, sizeof r->output, "%s", sp);
        else if (strcmp(line, "config") == 0)
            snprintf(r->config, sizeof r->config, "%s", sp);
        else if (strcmp(line, "frames") == 0) {
            char *colon = strrchr(sp, ':');
            if (colon && colon > sp && colon - sp < (long)sizeof r->frames) {
                r->frames_count = atoi(colon + 1);
                snprintf(r->frames, sizeof r->frames, "%.*s", (int)(colon - sp), sp);
            }
        }
    }
    if (!r->duration_ms && r->steps <= 0 && !(r->frames[0] && r->frames_count > 0)) {
        snprintf(err, errlen, "the request names no duration, steps or frames");
        return -1;
    }
    return 0;
}

/* A second client while a capture runs. */
static void refuse_busy(uint64_t since_ms, uint64_t until_ms)
{
    int fd = accept4(g_listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (peer_allowed(fd) == 0) {
        request r;
        char err[200];
        read_request(fd, &r, 300, err, sizeof err); /* a client sends at once; a silent one is cut short */
        uint64_t now = now_ms();
        if (until_ms)
            send_line(fd, "error %d a capture of process %d is already running (for %.1f s more): try again then",
                      CODE_BUSY, (int)getpid(), until_ms > now ? (double)(until_ms - now) / 1e3 : 0.0);
        else
            send_line(fd, "error %d a capture of process %d is already running (waiting for frames for %.1f s)",
                      CODE_BUSY, (int)getpid(), (double)(now - since_ms) / 1e3);
    }
    close(fd);
}

/* Waits until the deadline (0: none), a byte on the done pipe (1), or the
 * client hanging up (-1); refuses other clients meanwhile. */
static int wait_capture(int fd, uint64_t deadline)
{
    uint64_t since = now_ms();
    for (;;) {
        struct pollfd p[3] = {{fd, POLLIN, 0}, {g_listen_fd, POLLIN, 0}, {g_done_pipe[0], POLLIN, 0}};
        int timeout = -1;
        if (deadline) {
            uint64_t now = now_ms();
            if (now >= deadline)
                return 0;
            timeout = (int)(deadline - now);
        }
        int n = poll(p, 3, timeout);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        if (p[2].revents & POLLIN) {
            char c;
            while (read(g_done_pipe[0], &c, 1) > 0) {
            }
            return 1;
        }
        if (p[1].revents & POLLIN)
            refuse_busy(since, deadline);
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char c;
            if (recv(fd, &c, 1, MSG_DONTWAIT) <= 0)
                return -1;
        }
    }
}

static void arm_frames(const request *r)
{
    mlprof__ctl_lock();
    T.count = r->frames_count;
    snprintf(g_frames_name, sizeof g_frames_name, "%s", r->frames);
    g_frames_armed = 1;
    set_trigger();
    mlprof__update_flags();
    mlprof__ctl_unlock();
}

static void disarm_frames(void)
{
    mlprof__ctl_lock();
    g_frames_armed = 0;
    set_trigger();
    mlprof__update_flags();
    mlprof__ctl_unlock();
}

/* A capture of frames or of steps: armed now, started and ended by the
 * program's thread (the trigger, mlprof__capture_step), written here. */
static void capture_passes(int fd, const request *r)
{
    char err[1200] = "";
    int steps = r->steps > 0;
    if (!steps && __atomic_load_n(&mlprof__range_kind, __ATOMIC_RELAXED) == MLPROF__RANGE_SPAN) {
        send_line(fd, "error %d process %d captures the spans %s (capture_range): --frames is not available there",
                  CODE_BUSY, (int)getpid(), g_range_name);
        release();
        return;
    }
    int code = prepare(r->output, r->config, err, sizeof err);
    if (code) {
        send_line(fd, "error %d %s", code, err);
        release();
        return;
    }
    T.error[0] = '\0';
    if (steps)
        T.step_count = r->steps;
    else
        arm_frames(r);
    /* the first pass may start it from now on: what was set above is seen
     * by the thread that takes it (acquire) */
    int armed = steps ? CLAIM_STEPS_ARMED : CLAIM_FRAMES_ARMED;
    __atomic_store_n(&g_claim, armed, __ATOMIC_RELEASE);
    send_line(fd, "armed %s", S.path);
    int how = wait_capture(fd, 0);
    int expect = armed;
    if (how < 0 &&
        __atomic_compare_exchange_n(&g_claim, &expect, CLAIM_DEMAND, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* the client left before the first pass: nothing was recorded */
        if (!steps)
            disarm_frames();
        restore_config();
        release();
        return;
    }
    if (how < 0) /* it began: the trace is written all the same */
        wait_capture(-1, 0);
    if (!steps)
        disarm_frames();
    if (T.error[0]) {
        restore_config();
        send_line(fd, "error %d %s", CODE_FAILED, T.error);
    } else if (write_capture(err, sizeof err) != 0) {
        send_line(fd, "error %d %s", CODE_FAILED, err);
    } else {
        send_line(fd, "ok %s", S.path);
    }
    release();
}

static void capture_duration(int fd, const request *r)
{
    char err[1200] = "";
    int code = prepare(r->output, r->config, err, sizeof err);
    if (code) {
        send_line(fd, "error %d %s", code, err);
        release();
        return;
    }
    if (quiet_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
        send_line(fd, "error %d cannot start recording: %s", CODE_FAILED, mlprof_last_error());
        restore_config();
        release();
        return;
    }
    send_line(fd, "started %s", S.path);
    if (wait_capture(fd, now_ms() + r->duration_ms) < 0)
        mlprof__log(MLPROF_LOG_WARN, "capture: the client left before the end: the trace is written now");
    if (write_capture(err, sizeof err) != 0)
        send_line(fd, "error %d %s", CODE_FAILED, err);
    else
        send_line(fd, "ok %s", S.path);
    release();
}

static void serve(int fd)
{
    if (peer_allowed(fd) != 0)
        return;
    request r;
    char err[300];
    if (read_request(fd, &r, 5000, err, sizeof err) != 0) {
        send_line(fd, "error %d %s", CODE_USAGE, err);
        return;
    }
    /* the listener holds it while it prepares (CLAIM_FRAMES_ARMED once frames may start it) */
    int expect = CLAIM_IDLE;
    if (!__atomic_compare_exchange_n(&g_claim, &expect, CLAIM_DEMAND, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        send_line(fd, "error %d a capture of process %d is already running (capture_range=%s)", CODE_BUSY,
                  (int)getpid(), expect == CLAIM_RANGE ? "its own markers" : "another client");
        return;
    }
    char schedule[128] = "";
    mlprof_get_config("schedule", schedule, sizeof schedule);
    if (schedule[0]) {
        send_line(fd, "error %d process %d follows a schedule (schedule=%s): its steps decide what it records",
                  CODE_BUSY, (int)getpid(), schedule);
        release();
        return;
    }
    if (mlprof_get_state() == MLPROF_STATE_RUN || __atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE)) {
        send_line(fd, "error %d process %d %s: a capture would %s", CODE_BUSY, (int)getpid(),
                  mlprof_get_state() == MLPROF_STATE_RUN ? "is recording on its own (mlprof_set_state or autostart)"
                                                         : "holds events it recorded on its own, not yet written",
                  mlprof_get_state() == MLPROF_STATE_RUN ? "cut its trace" : "take them in");
        release();
        return;
    }
    if (r.duration_ms)
        capture_duration(fd, &r);
    else
        capture_passes(fd, &r);
}

static void *listener_main(void *arg)
{
    (void)arg;
    mlprof__busy++; /* what we allocate is not the program's */
    for (;;) {
        struct pollfd p = {g_listen_fd, POLLIN, 0};
        if (poll(&p, 1, -1) <= 0)
            continue;
        int fd = accept4(g_listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve(fd);
        close(fd);
    }
    return NULL;
}

/* Makes the socket and starts its thread. (ctl, or the only thread) */
static void start_listener(void)
{
    g_listening = 1;
    char dir[256], why[512];
    if (runtime_dir(dir, sizeof dir, why, sizeof why) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "on_demand: %s: no capture can be asked", why);
        return;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/%d.sock", dir, (int)getpid()) >=
        sizeof addr.sun_path) {
        mlprof__log(MLPROF_LOG_ERROR, "on_demand: the socket's path under %s is too long: no capture can be asked",
                    dir);
        return;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || pipe2(g_done_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "on_demand: %s: no capture can be asked", strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    unlink(addr.sun_path); /* our pid's: left by a process that had it before */
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || chmod(addr.sun_path, 0600) != 0 ||
        listen(fd, 8) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "on_demand: cannot listen on %s: %s: no capture can be asked", addr.sun_path,
                    strerror(errno));
        close(fd);
        return;
    }
    g_listen_fd = fd;
    snprintf(g_sock_path, sizeof g_sock_path, "%s", addr.sun_path);
    static int at_exit_set;
    if (!at_exit_set++)
        atexit(remove_socket);
    g_sock_pid = getpid();
    /* the program's signals go to its own threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int rc = pthread_create(&th, &attr, listener_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "on_demand: cannot start the listener: %s", strerror(rc));
        remove_socket();
        close(fd);
        g_listen_fd = -1;
    }
}

void mlprof__capture_configure(void)
{
    int kind;
    char name[256];
    parse_range(mlprof__g.cfg.capture_range, &kind, name);
    snprintf(g_range_name, sizeof g_range_name, "%s", name);
    __atomic_store_n(&mlprof__range_kind, kind, __ATOMIC_RELAXED);
    set_trigger();
    if (mlprof__g.cfg.on_demand && !g_listening)
        start_listener();
}

void mlprof__capture_after_fork(void)
{
    /* the parent's thread, socket and capture stay the parent's */
    if (g_listen_fd >= 0)
        close(g_listen_fd);
    for (int i = 0; i < 2; i++)
        if (g_done_pipe[i] >= 0)
            close(g_done_pipe[i]), g_done_pipe[i] = -1;
    g_listen_fd = -1;
    g_listening = 0;
    g_sock_path[0] = '\0';
    __atomic_store_n(&g_claim, CLAIM_IDLE, __ATOMIC_RELAXED);
    __atomic_store_n(&T.running, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&T.cuda, 0, __ATOMIC_RELAXED);
    g_frames_armed = 0;
    S.n = 0;
    set_trigger();
    mlprof__update_flags();
    if (mlprof__g.cfg.on_demand)
        start_listener();
}
