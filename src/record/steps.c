/*
 * steps.c - training steps and the schedule that records some of them.
 *
 * mlprof_step() marks a boundary between two steps of a program's loop:
 * the step that ends becomes a span "ProfilerStep#N" on the calling thread
 * (PyTorch's name, so that mlprof analyze --steps, HTA and people who know
 * torch.profiler read it as a step), queued through the producer interface
 * with its own times, so that no span is ever left open.
 *
 * The schedule key gives torch.profiler.schedule's meaning to the steps:
 * skip_first steps, then cycles of wait, warmup and active steps, repeat
 * times (0: until the program ends). Steps are numbered from 0 when the
 * run starts (mlprof_set_state(MLPROF_STATE_RUN), autostart, mlprof run).
 * During wait steps mlprof is stopped (the hot path costs what disabled
 * costs); during warmup steps it records, and what it recorded is cleared
 * when the first active step begins; at the end of a cycle's last active
 * step the trace is dumped as a finished trace, to the filename with "%c"
 * replaced by the cycle's number (from 0; without "%c", ".cycleN" goes
 * before the extension when the schedule has more than one cycle), and
 * the callback given to mlprof_on_trace_ready is called with its path.
 *
 * The schedule drives the state through the public calls (set_state,
 * clear, dump) from the thread that calls mlprof_step; a flag of that
 * thread tells control.c's hooks (mlprof__steps_hold, mlprof__steps_stopped)
 * that the change is the schedule's own. A stop or a finished dump asked by
 * the program ends the schedule: a later start arms it again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mlprof/mlprof.h"
#include "capture.h"
#include "produce.h"
#include "record.h"

enum { ACT_NONE, ACT_WARMUP, ACT_RECORD, ACT_SAVE };

typedef struct schedule {
    uint64_t skip_first, wait, warmup, active, repeat;
} schedule;

static struct {
    pthread_mutex_t lock; /* one mlprof_step at a time */
    uint64_t step;        /* the step under way */
    uint64_t begin_ns;    /* when it began, 0 before the first boundary (the run's start is used) */
    int armed;            /* the schedule drives the state */
    schedule s;
    int cycle;            /* the cycle whose files a dump writes now; -1: none */
    mlprof_trace_ready_fn ready;
    void *ready_user;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .cycle = -1};

/* Set while this thread changes the state for the schedule. */
static __thread int g_internal;

/* Where the recent steps of this run began and ended, for the statistics'
 * per-step rows: the stats sink looks each event up by its time, on the
 * collector's thread, seconds at most after it happened, so the last
 * STEP_RING steps are enough. Its own lock: mlprof_step holds S.lock while
 * it waits for a dump, and that dump's sinks look steps up. */
#define STEP_RING 4096
static struct {
    pthread_mutex_t lock;
    uint64_t gen;    /* changes at each boundary and run start (atomic) */
    uint64_t run;    /* runs started: each numbers its steps from 0 */
    uint64_t ended;  /* steps ended in this run; the last STEP_RING are kept */
    uint64_t begin[STEP_RING], end[STEP_RING];
    uint64_t cur_begin; /* the step under way (number `ended`) began; 0: with the run */
} B = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void ranges_reset(void)
{
    pthread_mutex_lock(&B.lock);
    B.run++;
    B.ended = 0;
    B.cur_begin = 0;
    __atomic_add_fetch(&B.gen, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&B.lock);
}

/* Step k (of this run) ran from begin to end; the next begins at next. */
static void ranges_step(uint64_t k, uint64_t begin, uint64_t end, uint64_t next)
{
    pthread_mutex_lock(&B.lock);
    B.begin[k % STEP_RING] = k == 0 ? 0 : begin; /* step 0 holds all before the first boundary */
    B.end[k % STEP_RING] = end;
    B.ended = k + 1;
    B.cur_begin = next;
    __atomic_add_fetch(&B.gen, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&B.lock);
}

uint64_t mlprof__steps_gen(void) { return __atomic_load_n(&B.gen, __ATOMIC_ACQUIRE); }

int mlprof__steps_find(uint64_t ts_ns, mlprof__step_range *out)
{
    int found = 1;
    pthread_mutex_lock(&B.lock);
    out->run = B.run;
    if (ts_ns >= B.cur_begin) {
        out->step = B.ended;
        out->begin_ns = B.cur_begin;
        out->end_ns = 0;
        out->until_ns = UINT64_MAX;
    } else {
        uint64_t lo = B.ended > STEP_RING ? B.ended - STEP_RING : 0, hi = B.ended; /* steps lo..hi-1 */
        if (ts_ns < B.begin[lo % STEP_RING]) {
            found = 0;
        } else {
            while (hi - lo > 1) { /* the last step that began at or before ts_ns */
                uint64_t mid = lo + (hi - lo) / 2;
                if (B.begin[mid % STEP_RING] <= ts_ns)
                    lo = mid;
                else
                    hi = mid;
            }
            out->step = lo;
            out->begin_ns = B.begin[lo % STEP_RING];
            out->end_ns = B.end[lo % STEP_RING];
            out->until_ns = lo + 1 < B.ended ? B.begin[(lo + 1) % STEP_RING] : B.cur_begin;
        }
    }
    pthread_mutex_unlock(&B.lock);
    return found;
}

/* ------------------------------------------------------------- parsing */

/* "skip_first:1,wait:1,warmup:1,active:3,repeat:2" (any order, each at most
 * once, active required and at least 1), or "" for none. 0, or -1 with why. */
static int parse(const char *text, schedule *out, char *why, size_t len)
{
    static const char *const names[] = {"skip_first", "wait", "warmup", "active", "repeat"};
    uint64_t v[5] = {0, 0, 0, 0, 0};
    int seen[5] = {0, 0, 0, 0, 0};
    const char *p = text;
    while (*p) {
        const char *colon = strchr(p, ':');
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (!colon || (comma && colon > comma)) {
            snprintf(why, len, "\"%.*s\" is not name:count", (int)n, p);
            return -1;
        }
        size_t k = 0, name_len = (size_t)(colon - p);
        while (k < 5 && !(strlen(names[k]) == name_len && strncmp(names[k], p, name_len) == 0))
            k++;
        if (k == 5) {
            snprintf(why, len, "unknown item \"%.*s\" (skip_first, wait, warmup, active, repeat)", (int)name_len, p);
            return -1;
        }
        if (seen[k]++) {
            snprintf(why, len, "%s given twice", names[k]);
            return -1;
        }
        char *end;
        errno = 0;
        unsigned long long x = strtoull(colon + 1, &end, 10);
        if (errno || end == colon + 1 || colon[1] == '-' || end != p + n || x > 1000000000ull) {
            snprintf(why, len, "%s: \"%.*s\" is not a count from 0 to 1000000000", names[k],
                     (int)(p + n - colon - 1), colon + 1);
            return -1;
        }
        v[k] = x;
        p += n + (comma != NULL);
        if (comma && !*p) {
            snprintf(why, len, "a comma ends it");
            return -1;
        }
    }
    if (*text && v[3] == 0) {
        snprintf(why, len, "active must be at least 1");
        return -1;
    }
    if (out)
        *out = (schedule){v[0], v[1], v[2], v[3], v[4]};
    return 0;
}

static int parse_key(const char *key, const char *value, unsigned *mask, char *why, size_t len)
{
    (void)mask;
    if (strcmp(key, "schedule") != 0)
        return 1;
    return parse(value, NULL, why, len);
}

/* ------------------------------------------------------------ the plan */

static uint64_t cycle_len(const schedule *s) { return s->wait + s->warmup + s->active; }

static int action(const schedule *s, uint64_t step)
{
    if (step < s->skip_first)
        return ACT_NONE;
    uint64_t k = step - s->skip_first, n = cycle_len(s);
    if (s->repeat && k / n >= s->repeat)
        return ACT_NONE;
    uint64_t m = k % n;
    if (m < s->wait)
        return ACT_NONE;
    if (m < s->wait + s->warmup)
        return ACT_WARMUP;
    return m == n - 1 ? ACT_SAVE : ACT_RECORD;
}

static int cycle_of(const schedule *s, uint64_t step) { return (int)((step - s->skip_first) / cycle_len(s)); }

static int running(void) { return __atomic_load_n(&mlprof__g.state, __ATOMIC_ACQUIRE) == MLPROF_STATE_RUN; }

/* ------------------------------------------------- control.c's hooks */

int mlprof__steps_hold(void)
{
    if (g_internal)
        return 0;
    /* a run the program starts: its steps count from 0 (called with
     * ctl_lock held by the thread that starts it) */
    __atomic_store_n(&S.step, 0, __ATOMIC_RELAXED);
    S.begin_ns = 0; /* the run's start, once it has one */
    ranges_reset();
    schedule s;
    char why[256];
    if (!mlprof__g.cfg.schedule[0] || parse(mlprof__g.cfg.schedule, &s, why, sizeof why) != 0)
        return 0; /* no schedule (a bad one was refused when set) */
    S.s = s;
    __atomic_store_n(&S.armed, 1, __ATOMIC_RELAXED);
    S.begin_ns = mlprof_now_ns();
    int a = action(&s, 0);
    __atomic_store_n(&S.cycle, a == ACT_RECORD || a == ACT_SAVE ? cycle_of(&s, 0) : -1, __ATOMIC_RELAXED);
    return a == ACT_NONE;
}

void mlprof__steps_stopped(void)
{
    if (!g_internal)
        __atomic_store_n(&S.armed, 0, __ATOMIC_RELAXED);
}

int mlprof__steps_cycle(int *has_many)
{
    *has_many = S.s.repeat != 1;
    if (!__atomic_load_n(&S.armed, __ATOMIC_RELAXED) || !mlprof__g.cfg.schedule[0])
        return -1;
    return __atomic_load_n(&S.cycle, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------- the API */

void mlprof_on_trace_ready(mlprof_trace_ready_fn fn, void *user)
{
    pthread_mutex_lock(&S.lock);
    S.ready = fn;
    S.ready_user = user;
    pthread_mutex_unlock(&S.lock);
}

uint64_t mlprof_step_number(void) { return __atomic_load_n(&S.step, __ATOMIC_RELAXED); }

/* The span of the step that ends at end_ns, when it was recorded. */
static void step_span(uint64_t step, uint64_t end_ns)
{
    uint64_t begin = S.begin_ns;
    uint64_t run = __atomic_load_n(&mlprof__g.run_ns, __ATOMIC_RELAXED);
    if (begin < run) /* recording started within the step: what it holds */
        begin = run;
    if (!begin || begin > end_ns)
        return;
    char name[48], args[48];
    snprintf(name, sizeof name, "ProfilerStep#%llu", (unsigned long long)step);
    snprintf(args, sizeof args, "\"step\":%llu", (unsigned long long)step);
    mlprof__produce_span(NULL, (int)syscall(SYS_gettid), "mlprof", name, begin, end_ns, args);
}

void mlprof__steps_internal(int on) { g_internal = on; }

static int internal_state(int state)
{
    g_internal = 1;
    int rc = mlprof_set_state(state);
    g_internal = 0;
    return rc;
}

int mlprof_step(void)
{
    mlprof__ensure_init();
    pthread_mutex_lock(&S.lock);
    uint64_t now = mlprof_now_ns(), k = __atomic_load_n(&S.step, __ATOMIC_RELAXED);
    int rc = MLPROF_OK, saved = -1;
    char path[MLPROF__PATH_MAX + 64] = "";
    /* step k ends now, for the statistics of the dump a schedule makes below */
    ranges_step(k, S.begin_ns, now, now);
    int armed = __atomic_load_n(&S.armed, __ATOMIC_RELAXED);
    if (armed && !mlprof__g.cfg.schedule[0]) { /* the key was emptied: plain steps from now on */
        armed = 0;
        __atomic_store_n(&S.armed, 0, __ATOMIC_RELAXED);
    }
    if (!armed) {
        if (running())
            step_span(k, now);
    } else {
        int a = action(&S.s, k), b = action(&S.s, k + 1);
        if ((a == ACT_RECORD || a == ACT_SAVE) && running())
            step_span(k, now);
        if (a == ACT_SAVE) {
            __atomic_store_n(&S.cycle, cycle_of(&S.s, k), __ATOMIC_RELAXED);
            g_internal = 1;
            rc = mlprof_dump(1); /* stops, writes the cycle's files */
            g_internal = 0;
            saved = __atomic_load_n(&S.cycle, __ATOMIC_RELAXED);
            mlprof_trace_path(path, sizeof path); /* before the next cycle names the files */
            if (S.s.repeat && (uint64_t)saved + 1 >= S.s.repeat) /* the last cycle: plain steps from now on */
                __atomic_store_n(&S.armed, 0, __ATOMIC_RELAXED);
        }
        if (b == ACT_NONE && running()) {
            int src = internal_state(MLPROF_STATE_STOP);
            if (rc == MLPROF_OK)
                rc = src;
        } else if (b == ACT_WARMUP && !running()) {
            int src = internal_state(MLPROF_STATE_RUN);
            if (rc == MLPROF_OK)
                rc = src;
        } else if ((b == ACT_RECORD || b == ACT_SAVE) && a != ACT_RECORD) {
            /* a cycle's first active step: what the warmup recorded goes, and
             * the statistics start again */
            __atomic_store_n(&S.cycle, cycle_of(&S.s, k + 1), __ATOMIC_RELAXED);
            int src = mlprof_clear();
            if (src == MLPROF_OK && !running())
                src = internal_state(MLPROF_STATE_RUN);
            if (rc == MLPROF_OK)
                rc = src;
        }
    }
    __atomic_store_n(&S.step, k + 1, __ATOMIC_RELAXED);
    S.begin_ns = mlprof_now_ns(); /* the next step's work starts when this returns */
    mlprof_trace_ready_fn ready = S.ready;
    void *user = S.ready_user;
    pthread_mutex_unlock(&S.lock);
    if (saved >= 0 && ready && rc == MLPROF_OK)
        ready(path, saved, user);
    mlprof__capture_step(); /* a capture of steps (mlprof capture --steps) starts or ends here */
    return rc;
}

static void reset(void)
{
    if (!__atomic_load_n(&S.armed, __ATOMIC_RELAXED))
        __atomic_store_n(&S.cycle, -1, __ATOMIC_RELAXED);
}

const mlprof__module mlprof__steps_module = {
    .name = "steps",
    .parse_key = parse_key,
    .reset = reset,
};
