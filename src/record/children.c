/*
 * children.c - the processes a profiled program starts, and their traces.
 *
 * A child forked while recording writes its own trace (NAME.PID.json) at its
 * exit. Three things make that hold beyond a plain exit():
 *
 * - What became of each forked child is kept in a table in shared memory
 *   (MAP_SHARED, made at the start and inherited by every fork): the child
 *   takes a slot, marks it when it records its first event (the recorder's
 *   slow path, where a thread takes a chunk: one store, no call) and when it
 *   writes a finished trace or runs its exit handler (which writes it, or
 *   says why it cannot, or was told to write none: dump_at_exit off). The
 *   parent, after its dumps and at its exit,
 *   reports the children that have ended having recorded and written nothing:
 *   they left through _exit(), an exec or a signal, which run no exit handler.
 *   The events cannot be saved then; the parent says whose they were and why,
 *   instead of nothing. (_exit is not interposed: a C program calls it in a
 *   child precisely to skip the exit handlers, after a failed exec or to leave
 *   its parent's buffers alone. Python's multiprocessing, whose children end
 *   in os._exit, has the Python module write their traces first.)
 * - A child of the run that records (forked, or started with the environment
 *   of a recording process) and leaves SIGTERM to its default action gets a
 *   handler that writes its trace, then dies of the signal as it would have:
 *   SIGTERM is how workers are stopped (multiprocessing's terminate(), which
 *   `with Pool()` calls, supervisors), not a crash.
 * - A process that records claims its trace's path in the environment
 *   (MLPROF_TRACE_OWNER, a line "PID PATH" per claim, its own first, those of
 *   the processes it descends from after). A process started from it
 *   (multiprocessing's spawn, subprocess, a shell) inherits MLPROF_AUTOSTART
 *   and MLPROF_FILENAME with the rest: when its own trace would be a path
 *   claimed so, it writes NAME.PID.json instead, as a forked child does, and
 *   says so once, instead of replacing that process's trace (or having its
 *   own replaced). `mlprof run` puts %p in the name and never meets this.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "produce.h"
#include "record.h"

#define OWNER_VAR "MLPROF_TRACE_OWNER"
#define SLOTS 1024
#define SAY_PIDS 8 /* pids named in a report, then a count */

typedef struct child_slot {
    int pid;      /* atomic: 0 free, -1 being taken, else the child's */
    int parent;   /* the pid that forked it */
    int recorded; /* atomic, the child's: it recorded after the fork */
    int settled;  /* atomic, the child's: it wrote a finished trace, or ran its exit handler
                     (which writes the trace, or says why not, or was told to write none) */
    int exec;     /* atomic, the child's: it ran another program (the preload's exec family) */
} child_slot;

static child_slot *g_slots; /* SLOTS of them, shared with every forked descendant; NULL: not kept */
static child_slot *g_mine;  /* this forked child's slot */
int *mlprof__child_recorded;

static int g_term_installed;
/* The trace paths claimed by the processes this one descends from (and its
 * own), the latest first: OWNER_VAR's lines, "PID PATH" each. A process
 * given a file of its own claims it for its descendants without taking the
 * others' claims from them. */
#define CLAIMS 8
static struct claim {
    pid_t pid;
    char path[MLPROF__PATH_MAX + 8];
} g_claims[CLAIMS];
static int g_nclaims;
static int g_inherited; /* a claim of another process was in the environment at the start */
static int g_said_renamed;

/* ------------------------------------------------------------- the table */

static void read_claims(void)
{
    const char *v = getenv(OWNER_VAR);
    while (v && *v && g_nclaims < CLAIMS) {
        const char *eol = strchr(v, '\n');
        size_t len = eol ? (size_t)(eol - v) : strlen(v);
        char *end = NULL;
        long pid = strtol(v, &end, 10);
        size_t plen = end && end < v + len && *end == ' ' ? len - (size_t)(end + 1 - v) : 0;
        if (pid > 0 && plen > 0 && plen < sizeof g_claims[0].path) {
            struct claim *c = &g_claims[g_nclaims++];
            c->pid = (pid_t)pid;
            memcpy(c->path, end + 1, plen);
            c->path[plen] = '\0';
            if (c->pid != getpid()) /* the same pid: this process, before an exec */
                g_inherited = 1;
        }
        v = eol ? eol + 1 : NULL;
    }
}

void mlprof__children_init(void)
{
    void *p = mmap(NULL, SLOTS * sizeof(child_slot), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    g_slots = p == MAP_FAILED ? NULL : p;
    read_claims();
}

/* Whether process pid has ended: gone, or a zombie its parent has not
 * waited for yet. */
static int has_ended(int pid)
{
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')'); /* the command's name may hold anything */
    return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

/* Frees the slots of children that ended with nothing to report (they wrote
 * their trace, or recorded nothing). For a child that finds the table full. */
static void reclaim_quiet(void)
{
    for (int i = 0; i < SLOTS; i++) {
        child_slot *s = &g_slots[i];
        int pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
        if (pid <= 0 || (__atomic_load_n(&s->recorded, __ATOMIC_RELAXED) &&
                         !__atomic_load_n(&s->settled, __ATOMIC_RELAXED)))
            continue;
        if (has_ended(pid))
            __atomic_compare_exchange_n(&s->pid, &pid, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
}

static child_slot *take_slot(int pid, int parent)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < SLOTS; i++) {
            child_slot *s = &g_slots[i];
            int expect = 0;
            if (!__atomic_compare_exchange_n(&s->pid, &expect, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                continue;
            s->parent = parent;
            __atomic_store_n(&s->recorded, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&s->settled, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&s->exec, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&s->pid, pid, __ATOMIC_RELEASE);
            return s;
        }
        if (pass == 0)
            reclaim_quiet();
    }
    return NULL; /* 1024 children ended unreported or alive: this one is not followed */
}

/* A forked child that records: it has a slot from now on (its first). */
static void follow_this_child(void)
{
    if (!g_slots || g_mine || !mlprof__g.forked_child)
        return;
    g_mine = take_slot((int)mlprof__g.pid, (int)getppid());
    if (g_mine)
        __atomic_store_n(&mlprof__child_recorded, &g_mine->recorded, __ATOMIC_RELEASE);
}

void mlprof__children_settled(void)
{
    if (g_mine && __atomic_load_n(&g_mine->pid, __ATOMIC_RELAXED) == (int)mlprof__g.pid)
        __atomic_store_n(&g_mine->settled, 1, __ATOMIC_RELEASE);
}

void mlprof__children_exec(int going)
{
    if (g_mine && __atomic_load_n(&g_mine->pid, __ATOMIC_RELAXED) == (int)getpid())
        __atomic_store_n(&g_mine->exec, going, __ATOMIC_RELEASE);
}

/* pids[]: up to SAY_PIDS of them, then " and N more" */
typedef struct {
    int n;
    size_t used;
    char pids[SAY_PIDS * 12 + 1];
} pid_list;

static void list_add(pid_list *l, int pid)
{
    if (l->n < SAY_PIDS)
        l->used += (size_t)snprintf(l->pids + l->used, sizeof l->pids - l->used, "%s%d", l->n ? ", " : "", pid);
    l->n++;
}

static const char *list_more(const pid_list *l, char *more, size_t len)
{
    more[0] = '\0';
    if (l->n > SAY_PIDS)
        snprintf(more, len, " and %d more", l->n - SAY_PIDS);
    return more;
}

void mlprof__children_report(void)
{
    if (!g_slots)
        return;
    int me = (int)mlprof__g.pid;
    pid_list lost_list = {0, 0, ""}, exec_list = {0, 0, ""};
    for (int i = 0; i < SLOTS; i++) {
        child_slot *s = &g_slots[i];
        int pid = __atomic_load_n(&s->pid, __ATOMIC_ACQUIRE);
        if (pid <= 0 || pid == me)
            continue;
        /* this process's children, and those whose parent ended without
         * reporting them (a child that left by _exit has children too) */
        int parent = s->parent;
        if (parent != me && !has_ended(parent))
            continue;
        if (!has_ended(pid))
            continue; /* it may still write its trace */
        int lost = __atomic_load_n(&s->recorded, __ATOMIC_ACQUIRE) && !__atomic_load_n(&s->settled, __ATOMIC_ACQUIRE);
        int exec = __atomic_load_n(&s->exec, __ATOMIC_ACQUIRE);
        if (!__atomic_compare_exchange_n(&s->pid, &pid, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue; /* another process reports it */
        if (lost)
            list_add(exec ? &exec_list : &lost_list, pid);
    }
    char more[48];
    if (exec_list.n) /* mpirun, a shell, subprocess: the new programs write their own traces */
        mlprof__log(MLPROF_LOG_INFO,
                    "%s %s%s ran %s (exec): what %s recorded between the fork and the exec (the "
                    "allocations of the exec's preparation, say) is in no trace; the programs write their own "
                    "where mlprof records them",
                    exec_list.n == 1 ? "the forked child" : "the forked children", exec_list.pids,
                    list_more(&exec_list, more, sizeof more),
                    exec_list.n == 1 ? "another program" : "other programs", exec_list.n == 1 ? "it" : "they");
    if (lost_list.n)
        mlprof__log(MLPROF_LOG_WARN,
                    "%s %s%s recorded events but wrote no trace: %s without running exit handlers (_exit, exec, "
                    "a signal), and %s events are lost; a child writes its trace (NAME.PID.json) when it "
                    "returns from main or calls exit(), or calls mlprof_exit_dump() before _exit",
                    lost_list.n == 1 ? "the forked child" : "the forked children", lost_list.pids,
                    list_more(&lost_list, more, sizeof more), lost_list.n == 1 ? "it ended" : "they ended",
                    lost_list.n == 1 ? "its" : "their");
}

/* ------------------------------------------------------ SIGTERM in a child */

int mlprof__term_pending;
static int g_dying;

static void die_of(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The signal whose handler is writing the trace, for on_deadline; the
 * progress seen at the last alarm, and the alarms so far. */
static volatile sig_atomic_t g_deadline_sig;
static unsigned long g_deadline_progress;
static int g_deadline_alarms;

enum { DEADLINE_S = 10, DEADLINE_MAX_ALARMS = 6 };

/* Every 10 s of a signal's dump: one that moved on (it drained or wrote)
 * gets 10 s more, up to a minute in all; one that did not hangs (a crash
 * inside malloc) and the process dies of the signal that ended it (its
 * status says that one, not SIGALRM), after a word. That signal is blocked
 * in its own handler, which this interrupts: let it in. */
static void on_deadline(int unused)
{
    (void)unused;
    unsigned long now = __atomic_load_n(&mlprof__progress, __ATOMIC_RELAXED);
    if (now != g_deadline_progress && ++g_deadline_alarms < DEADLINE_MAX_ALARMS) {
        g_deadline_progress = now;
        alarm(DEADLINE_S);
        return;
    }
    int sig = g_deadline_sig;
    static const char msg[] = "mlprof: error: the trace could not be written in time after the signal that "
                              "ends the process (it stopped moving, or took a minute): it ends without it\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    die_of(sig);
    _exit(128 + sig); /* a signal whose default is not to end the process */
}

void mlprof__dump_deadline(int sig)
{
    g_deadline_sig = sig;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    g_deadline_progress = __atomic_load_n(&mlprof__progress, __ATOMIC_RELAXED);
    g_deadline_alarms = 0;
    alarm(DEADLINE_S); /* a dump that hangs (a crash inside malloc) must not keep the process alive */
}

/* The signal interrupted a thread inside mlprof's lock (a dump of its own:
 * multiprocessing's worker writing its trace as terminate() stops it): the
 * trace is written when that thread lets the lock go, and the process ends
 * there (mlprof__term_if_pending). A second SIGTERM kills at once
 * (SA_RESETHAND), and so does the alarm if the lock is never let go. */
static void on_term(int sig)
{
    if (__atomic_exchange_n(&g_dying, 1, __ATOMIC_ACQ_REL))
        die_of(sig);
    mlprof__dump_deadline(sig);
    mlprof__busy++;
    if (mlprof__dump_on_term(sig) == MLPROF__LATER) {
        mlprof__busy--;
        __atomic_store_n(&mlprof__term_pending, sig, __ATOMIC_RELEASE);
        return;
    }
    die_of(sig);
}

void mlprof__term_now(void)
{
    int sig = __atomic_exchange_n(&mlprof__term_pending, 0, __ATOMIC_ACQ_REL);
    if (!sig)
        return;
    mlprof__busy++;
    mlprof__dump_on_term(sig);
    die_of(sig);
}

/* A child of the run records: SIGTERM, left to its default, writes the trace
 * first. A handler of the program's own stays. */
static void handle_term(void)
{
    if (g_term_installed)
        return;
    g_term_installed = 1;
    struct sigaction old;
    if (sigaction(SIGTERM, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &sa, NULL);
}

/* ------------------------------------------------------ the trace's path */

/* path made absolute against the working folder, into buf; 0 if it cannot be */
static int absolute(const char *path, char *buf, size_t len)
{
    if (path[0] == '/')
        return (size_t)snprintf(buf, len, "%s", path) < len;
    char cwd[MLPROF__PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return 0;
    const char *rel = strncmp(path, "./", 2) == 0 ? path + 2 : path;
    return (size_t)snprintf(buf, len, "%s/%s", cwd, rel) < len;
}

/* The claim of another process on path, or NULL. */
static const struct claim *taken_by(const char *path)
{
    char abs[MLPROF__PATH_MAX + 8];
    if (!g_inherited || !absolute(path, abs, sizeof abs))
        return NULL;
    for (int i = 0; i < g_nclaims; i++)
        if (g_claims[i].pid != mlprof__g.pid && strcmp(g_claims[i].path, abs) == 0)
            return &g_claims[i];
    return NULL;
}

int mlprof__children_name_taken(const char *path) { return taken_by(path) != NULL; }

void mlprof__children_say_renamed(const char *path)
{
    if (g_said_renamed || mlprof__g.forked_child)
        return;
    char base[MLPROF__PATH_MAX];
    mlprof__trace_base_path(base, sizeof base);
    const struct claim *owner = taken_by(base);
    if (!owner)
        return;
    g_said_renamed = 1;
    mlprof__log(MLPROF_LOG_WARN,
                "process %d writes its trace to %s: %s is process %d's trace, whose environment it inherited "
                "(MLPROF_FILENAME, " OWNER_VAR "); put %%p in filename to name each process's trace",
                (int)mlprof__g.pid, mlprof__shortened(path).s, mlprof__shortened(base).s, (int)owner->pid);
}

/* A process that records names its trace's path for those it starts,
 * unless that path is another's already (it writes NAME.PID then). */
static void claim_path(void)
{
    if (mlprof__g.forked_child)
        return; /* it writes NAME.PID.json */
    char base[MLPROF__PATH_MAX], abs[MLPROF__PATH_MAX + 8];
    if (mlprof__trace_base_path(base, sizeof base))
        return; /* %p: a path of its own (mlprof run's) */
    if (!absolute(base, abs, sizeof abs) || strlen(abs) >= sizeof g_claims[0].path)
        return;
    for (int i = 0; i < g_nclaims; i++)
        if (strcmp(g_claims[i].path, abs) == 0)
            return; /* its own already, or another's */
    if (g_nclaims == CLAIMS)
        g_nclaims--; /* the oldest goes */
    memmove(&g_claims[1], &g_claims[0], (size_t)g_nclaims * sizeof g_claims[0]);
    g_claims[0].pid = mlprof__g.pid;
    snprintf(g_claims[0].path, sizeof g_claims[0].path, "%s", abs);
    g_nclaims++;
    mlprof__sb value;
    mlprof__sb_init(&value);
    for (int i = 0; i < g_nclaims; i++)
        mlprof__sb_printf(&value, "%s%d %s", i ? "\n" : "", (int)g_claims[i].pid, g_claims[i].path);
    if (!value.failed && value.data)
        setenv(OWNER_VAR, value.data, 1);
    mlprof__sb_free(&value);
}

/* ----------------------------------------------------------- the lifecycle */

void mlprof__children_recording(void)
{
    claim_path();
    if (mlprof__g.forked_child || g_inherited)
        handle_term();
    follow_this_child();
    if (g_mine) /* recording again after a clear that settled it */
        __atomic_store_n(&g_mine->settled, 0, __ATOMIC_RELEASE);
}

void mlprof__children_after_fork(int recording)
{
    /* the parent's slot, handler and message are the parent's */
    g_mine = NULL;
    __atomic_store_n(&mlprof__child_recorded, NULL, __ATOMIC_RELEASE);
    g_said_renamed = 0;
    g_dying = 0; /* a SIGTERM the parent was handling is not the child's */
    __atomic_store_n(&mlprof__term_pending, 0, __ATOMIC_RELAXED);
    if (recording)
        mlprof__children_recording();
}
