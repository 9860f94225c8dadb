/*
 * capture.c - captures taken while the program runs, each written to a file
 * of its own:
 *   - on demand (on_demand=on): a thread of ours serves a Unix socket,
 *     RUNTIME_DIR/PID.sock, where `mlprof capture PID` asks for a capture of
 *     a duration, of the next N steps (mlprof_step) or of the next N passes
 *     of a named frame;
 *   - between the program's own markers (capture_range=...): a span of a
 *     name, cudaProfilerStart/Stop (the cuda hook), an NVTX range (the nvtx
 *     hook);
 *   - flushes of a flight recorder (mode=ring): `mlprof capture PID --flush`
 *     over the same socket, served in ring mode once the process records,
 *     writes the ring to FILE.flushN while recording goes on;
 *   - dumps on a signal (dump_signal=USR2): the handler writes a byte to a
 *     pipe, our thread writes the ring (or, not in ring mode, the trace so
 *     far) to FILE.flushN, the same numbering as the flushes.
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
#include "../collect/collect.h"
#include "produce.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
static int g_range_began; /* atomic: capture_range's range began at least once */

/* The client's exit statuses, sent back with an error (tools/capture.c). */
enum { CODE_FAILED = 1, CODE_USAGE = 2, CODE_BUSY = 5, CODE_DENIED = 6, CODE_NO_RING = 7 };

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
 * else ".captureN" before the extension (".json", ".json.gz", ".pftrace");
 * a flush's: ".flushN" there always (a %c is the captures'). */
static void labeled_name(const char *filename, const char *label, int n, char *out, size_t len)
{
    const char *c = strcmp(label, "capture") == 0 ? strstr(filename, "%c") : NULL;
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
    snprintf(out, len, "%.*s.%s%d%s", (int)(ext - filename), filename, label, n, ext);
}

static void numbered_name(const char *filename, int n, char *out, size_t len)
{
    labeled_name(filename, "capture", n, out, len);
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
    if (kind == CLAIM_RANGE)
        __atomic_store_n(&g_range_began, 1, __ATOMIC_RELAXED);
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
static int g_sig_pipe[2] = {-1, -1}; /* dump_signal's handler asks the listener for a dump */
struct request;
static void serve_flush(int fd, const struct request *r);
static void signal_dumps(void);

static void remove_socket(void)
{
    if (g_sock_pid == getpid() && g_sock_path[0])
        unlink(g_sock_path);
}

void mlprof__capture_on_crash(void) { remove_socket(); }

void mlprof__capture_exit_report(void)
{
    int kind = __atomic_load_n(&mlprof__range_kind, __ATOMIC_RELAXED);
    if (kind == MLPROF__RANGE_NONE || __atomic_load_n(&g_range_began, __ATOMIC_RELAXED) ||
        mlprof__in_run())
        return;
    char range[300];
    mlprof_get_config("capture_range", range, sizeof range);
    mlprof__log(MLPROF_LOG_WARN, "capture_range=%s: %s, so nothing was captured", range,
                kind == MLPROF__RANGE_CUDA ? "the program never called cudaProfilerStart"
                : kind == MLPROF__RANGE_NVTX ? "no NVTX range of that name was pushed"
                                             : "no span of that name began");
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
    int hello; /* the client wants "hello PID" first (clients before it would take it for the answer) */
    int flush;
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
        if (strcmp(line, "flush") == 0)
            r->flush = atoi(sp) > 0;
        else if (strcmp(line, "hello") == 0)
            r->hello = atoi(sp) > 0;
        else if (strcmp(line, "duration_ms") == 0)
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
    if (r->flush && (r->duration_ms || r->steps > 0 || r->frames[0] || r->config[0])) {
        snprintf(err, errlen, "a flush takes no duration, steps, frames or configuration");
        return -1;
    }
    if (!r->flush && !r->duration_ms && r->steps <= 0 && !(r->frames[0] && r->frames_count > 0)) {
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
        struct pollfd p[4] = {{fd, POLLIN, 0}, {g_listen_fd, POLLIN, 0}, {g_done_pipe[0], POLLIN, 0},
                              {g_sig_pipe[0], POLLIN, 0}};
        int timeout = -1;
        if (deadline) {
            uint64_t now = now_ms();
            if (now >= deadline)
                return 0;
            timeout = (int)(deadline - now);
        }
        int n = poll(p, 4, timeout);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        if (p[3].revents & POLLIN) /* dump_signal during a capture: what it has recorded so far */
            signal_dumps();
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
    /* at once, whatever follows, to a client that asks: it knows it is
     * served (a process that accepts but never answers is said so) */
    if (r.hello)
        send_line(fd, "hello %d", (int)getpid());
    if (r.flush) {
        serve_flush(fd, &r);
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
    char mode[16] = "";
    mlprof_get_config("mode", mode, sizeof mode);
    if (mlprof_get_state() == MLPROF_STATE_RUN && strcmp(mode, "ring") == 0) {
        send_line(fd, "error %d process %d is a flight recorder (mode=ring), recording all along: "
                      "'mlprof capture %d --flush' writes its ring", CODE_BUSY, (int)getpid(), (int)getpid());
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

/* ------------------------------------------------ flushes and dump_signal */

static int g_flushes;         /* atomic: flushes and signal dumps taken in this process */
static int g_dump_sig;        /* (ctl) the signal our handler is installed for; 0: none */
static struct sigaction g_sig_old; /* (ctl) the disposition it replaced (SIG_DFL) */
static int g_sig_said;        /* (ctl) the signal the program handles itself, said once */

static int ring_mode(void) { return strcmp(mlprof__g.cfg.mode, "ring") == 0; }

static const struct {
        const char *name;
        int sig;
    } g_sig_names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"ILL", SIGILL},   {"TRAP", SIGTRAP},
                 {"ABRT", SIGABRT}, {"IOT", SIGABRT},      {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"KILL", SIGKILL},
                 {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},     {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
                 {"TERM", SIGTERM}, {"CHLD", SIGCHLD},     {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
                 {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
                 {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},  {"POLL", SIGIO},
                 {"PWR", SIGPWR},   {"SYS", SIGSYS}};

static const char *sig_name(int sig)
{
    for (size_t i = 0; i < sizeof g_sig_names / sizeof g_sig_names[0]; i++)
        if (g_sig_names[i].sig == sig)
            return g_sig_names[i].name;
    return "?";
}

int mlprof__dump_signal_parse(const char *v, char *why, size_t len)
{
    char tmp[200];
    if (!why)
        why = tmp, len = sizeof tmp;
    if (!v[0] || strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
        return 0;
    int sig = -1;
    char *end;
    long n = strtol(v, &end, 10);
    if (end != v && !*end) {
        sig = n >= 1 && n <= SIGRTMAX ? (int)n : -1;
    } else {
        const char *name = strncasecmp(v, "SIG", 3) == 0 ? v + 3 : v;
        for (size_t i = 0; i < sizeof g_sig_names / sizeof g_sig_names[0] && sig < 0; i++)
            if (strcasecmp(name, g_sig_names[i].name) == 0)
                sig = g_sig_names[i].sig;
    }
    if (sig < 0) {
        snprintf(why, len, "expected off, or a signal: a name such as USR2 or SIGUSR2, or a number from 1 to %d",
                 SIGRTMAX);
        return -1;
    }
    if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
        sig == SIGABRT || sig == SIGTRAP || sig == SIGSYS) {
        snprintf(why, len, "SIG%s %s: choose one the program may go on after, such as USR2",
                 sig_name(sig),
                 sig == SIGKILL || sig == SIGSTOP ? "cannot be caught" : "is a crash's (the crash itself writes the trace)");
        return -1;
    }
    return sig;
}

/* The handler: only a write to the pipe (async-signal-safe); the dump is
 * the listener's. A full pipe has dumps waiting enough. */
static void on_dump_signal(int sig)
{
    (void)sig;
    int saved = errno;
    char c = 1;
    ssize_t w = write(g_sig_pipe[1], &c, 1);
    (void)w;
    errno = saved;
}

/* Writes the ring (not in ring mode: the trace so far, which goes on) to
 * output, else to the filename with .flushN. Returns 0 with the path in
 * path, or the client's exit status with the reason in err. */
static int flush_now(const char *output, int need_ring, char *path, size_t plen, char *err, size_t elen,
                     int *was_ring)
{
    mlprof__ctl_lock();
    *was_ring = ring_mode();
    if (need_ring && !ring_mode()) {
        snprintf(err, elen, "process %d has no flight recorder (mode=%s, not ring): nothing to flush (start it "
                            "with 'mlprof run --mode ring' or mode=ring; 'mlprof capture %d' without --flush "
                            "captures a process that waits for captures)",
                 (int)getpid(), mlprof__g.cfg.mode, (int)getpid());
        mlprof__ctl_unlock();
        return CODE_NO_RING;
    }
    int n = __atomic_load_n(&g_flushes, __ATOMIC_RELAXED) + 1;
    char name[MLPROF__PATH_MAX];
    if (output && output[0])
        snprintf(name, sizeof name, "%s", output);
    else
        labeled_name(mlprof__g.cfg.filename, "flush", n, name, sizeof name);
    mlprof__expand_path(name, 1, path, plen);
    /* said before the ring is drained: a flush that fails after it keeps
     * its events for the next one, which then starts before its ring */
    char dir[MLPROF__PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash == dir ? (void)(dir[1] = '\0') : (void)(*slash = '\0');
    else
        snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, elen, "cannot write the flush's trace %s: %s (nothing was taken from the ring)",
                 mlprof__shortened(path).s, strerror(errno));
        mlprof__ctl_unlock();
        return CODE_FAILED;
    }
    int rc = mlprof__collect_flush(name);
    if (rc != MLPROF_OK)
        snprintf(err, elen, "%s", mlprof_last_error());
    else /* numbered by the files written: a failed flush takes no number */
        __atomic_store_n(&g_flushes, n, __ATOMIC_RELAXED);
    mlprof__ctl_unlock();
    return rc == MLPROF_OK ? 0 : CODE_FAILED;
}

static void serve_flush(int fd, const request *r)
{
    char path[MLPROF__PATH_MAX], err[1100];
    int ring;
    int code = flush_now(r->output, 1, path, sizeof path, err, sizeof err, &ring);
    if (code)
        send_line(fd, "error %d %s", code, err);
    else
        send_line(fd, "ok %s", path);
}

/* One dump per byte the handler wrote (0 is a wake-up of the listener). */
static void signal_dumps(void)
{
    char c[16];
    ssize_t n;
    while ((n = read(g_sig_pipe[0], c, sizeof c)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (!c[i])
                continue;
            if (mlprof_get_state() != MLPROF_STATE_RUN && !__atomic_load_n(&mlprof__g.recorded, __ATOMIC_ACQUIRE)) {
                mlprof__log(MLPROF_LOG_WARN, "dump_signal: nothing recorded: no trace written");
                continue;
            }
            char path[MLPROF__PATH_MAX], err[1100];
            int ring;
            if (flush_now(NULL, 0, path, sizeof path, err, sizeof err, &ring) != 0)
                mlprof__log(MLPROF_LOG_ERROR, "dump_signal: %s", err);
            else
                mlprof__log(MLPROF_LOG_WARN, "dump_signal: the %s is written to %s; recording goes on",
                            ring ? "ring" : "trace so far", path);
        }
    }
}

/* ----------------------------------------------------- the thread, socket */

static int g_thread_started; /* (ctl) */

static void *listener_main(void *arg)
{
    (void)arg;
    mlprof__busy++; /* what we allocate is not the program's */
    pthread_setname_np(pthread_self(), "mlprof capture"); /* mlprof's own: never sampled */
    for (;;) {
        /* the socket may come after the thread (ring mode once recording):
         * a byte 0 on the pipe has it polled */
        struct pollfd p[2] = {{__atomic_load_n(&g_listen_fd, __ATOMIC_ACQUIRE), POLLIN, 0},
                              {g_sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) <= 0)
            continue;
        if (p[1].revents & POLLIN)
            signal_dumps();
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(p[0].fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve(fd);
        close(fd);
    }
    return NULL;
}

/* The pipes and the thread, once. Returns 0, or -1 (said). (ctl) */
static int start_thread(const char *why_needed)
{
    if (g_thread_started)
        return g_sig_pipe[0] >= 0 ? 0 : -1;
    g_thread_started = 1;
    if (pipe2(g_done_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: %s: no capture, flush or signal dump can be asked", why_needed,
                    strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (g_done_pipe[i] >= 0)
                close(g_done_pipe[i]), g_done_pipe[i] = -1;
            if (g_sig_pipe[i] >= 0)
                close(g_sig_pipe[i]), g_sig_pipe[i] = -1;
        }
        return -1;
    }
    pthread_t th;
    int rc = mlprof__thread_start(&th, 1, listener_main, NULL);
    if (rc != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: cannot start the listener: %s", why_needed, strerror(rc));
        for (int i = 0; i < 2; i++) {
            close(g_done_pipe[i]), g_done_pipe[i] = -1;
            close(g_sig_pipe[i]), g_sig_pipe[i] = -1;
        }
        return -1;
    }
    return 0;
}

/* Makes the socket and has the thread serve it. (ctl, or the only thread) */
static void start_listener(const char *key)
{
    g_listening = 1;
    char dir[256], why[512];
    if (runtime_dir(dir, sizeof dir, why, sizeof why) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: %s: no capture can be asked", key, why);
        return;
    }
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/%d.sock", dir, (int)getpid()) >=
        sizeof addr.sun_path) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: the socket's path under %s is too long: no capture can be asked", key,
                    dir);
        return;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: %s: no capture can be asked", key, strerror(errno));
        return;
    }
    unlink(addr.sun_path); /* our pid's: left by a process that had it before */
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || chmod(addr.sun_path, 0600) != 0 ||
        listen(fd, 8) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "%s: cannot listen on %s: %s: no capture can be asked", key, addr.sun_path,
                    strerror(errno));
        close(fd);
        return;
    }
    snprintf(g_sock_path, sizeof g_sock_path, "%s", addr.sun_path);
    static int at_exit_set;
    if (!at_exit_set++)
        atexit(remove_socket);
    g_sock_pid = getpid();
    if (start_thread(key) != 0) {
        remove_socket();
        close(fd);
        return;
    }
    __atomic_store_n(&g_listen_fd, fd, __ATOMIC_RELEASE);
    char wake = 0; /* the thread may be polling without it */
    if (write(g_sig_pipe[1], &wake, 1) < 0)
        mlprof__log(MLPROF_LOG_ERROR, "%s: cannot wake the listener: %s", key, strerror(errno));
}

/* dump_signal's handler, installed where the process records (or waits for
 * captures), never over a handler of the program's. (ctl) */
static void set_dump_signal(int may)
{
    int want = mlprof__dump_signal_parse(mlprof__g.cfg.dump_signal, NULL, 0);
    if (want < 0)
        want = 0;
    if (want == g_dump_sig || (want && !may))
        return;
    if (g_dump_sig) { /* another signal, or off: the old one as it was, unless the program took it since */
        struct sigaction cur;
        if (sigaction(g_dump_sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_dump_signal)
            sigaction(g_dump_sig, &g_sig_old, NULL);
        g_dump_sig = 0;
    }
    if (!want || start_thread("dump_signal") != 0)
        return;
    struct sigaction cur;
    if (sigaction(want, NULL, &cur) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "dump_signal=%s: %s", mlprof__g.cfg.dump_signal, strerror(errno));
        return;
    }
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) {
        if (g_sig_said != want)
            mlprof__log(MLPROF_LOG_WARN, "dump_signal=%s: the program %s SIG%s itself: its handler is kept, and "
                        "that signal writes no trace (choose another with dump_signal, or "
                        "'mlprof capture PID --flush')", mlprof__g.cfg.dump_signal,
                        cur.sa_handler == SIG_IGN ? "ignores" : "handles",
                        sig_name(want));
        g_sig_said = want;
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_dump_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(want, &sa, &g_sig_old) != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "dump_signal=%s: %s", mlprof__g.cfg.dump_signal, strerror(errno));
        return;
    }
    g_dump_sig = want;
}

/* What the process serves, as the configuration and its recording say. (ctl) */
static void serve_what_applies(void)
{
    int recording = mlprof__g.state == MLPROF_STATE_RUN;
    if (!g_listening && (mlprof__g.cfg.on_demand || (recording && ring_mode())))
        start_listener(mlprof__g.cfg.on_demand ? "on_demand" : "mode=ring");
    set_dump_signal(recording || mlprof__g.cfg.on_demand);
}

void mlprof__capture_recording(void) { serve_what_applies(); }

void mlprof__capture_configure(void)
{
    int kind;
    char name[256];
    parse_range(mlprof__g.cfg.capture_range, &kind, name);
    snprintf(g_range_name, sizeof g_range_name, "%s", name);
    __atomic_store_n(&mlprof__range_kind, kind, __ATOMIC_RELAXED);
    set_trigger();
    serve_what_applies();
}

void mlprof__capture_after_fork(void)
{
    /* the parent's thread, socket and capture stay the parent's; the
     * handler of dump_signal is inherited, and writes to the child's pipe */
    if (g_listen_fd >= 0)
        close(g_listen_fd);
    for (int i = 0; i < 2; i++) {
        if (g_done_pipe[i] >= 0)
            close(g_done_pipe[i]), g_done_pipe[i] = -1;
        if (g_sig_pipe[i] >= 0)
            close(g_sig_pipe[i]), g_sig_pipe[i] = -1;
    }
    g_listen_fd = -1;
    g_listening = 0;
    g_thread_started = 0;
    g_sock_path[0] = '\0';
    __atomic_store_n(&g_claim, CLAIM_IDLE, __ATOMIC_RELAXED);
    __atomic_store_n(&T.running, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&T.cuda, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_flushes, 0, __ATOMIC_RELAXED);
    g_frames_armed = 0;
    S.n = 0;
    set_trigger();
    mlprof__update_flags();
    if (g_dump_sig && start_thread("dump_signal") != 0)
        g_dump_sig = 0; /* the handler stays, writing to no pipe: harmless */
    serve_what_applies();
}
