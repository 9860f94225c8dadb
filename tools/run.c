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
 * been taken so, except a rank whose command failed (a non-zero status, not
 * a stop passed on): it ends at once, for the launcher to learn of the
 * failure and stop the others, not a timeout later. When a rank never ends
 * (its mlprof run was killed), the
 * first whose wait ends merges what is there, saying which ranks are
 * missing, and a rank that still ends later merges again, whole. The last
 * rank rather than rank 0: rank 0 waiting would hold the merge back by the
 * timeout whenever rank 0 itself died, and the last one merges without
 * waiting at all. The done files are named by the job (done.rankR.TAG), a
 * merge takes the traces of its own job only, and another job's files are
 * removed once that job has ended (see "jobs sharing a place").
 *
 * Stopped (SIGTERM, SIGHUP: how launchers stop the ranks that survive a
 * failed one), mlprof run passes the signal on to its command and waits
 * for it (--term-timeout, then SIGKILL), then does what it does after any
 * end: the done file, the merge, the summary; and dies of the signal itself,
 * for the launcher to see. See "signals".
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
#include <stdint.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/analyze/analyze.h"
#include "../src/analyze/merge.h"
#include "../src/record/dist.h"
#include "../src/record/record.h"
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
            "                         (default 120; the last rank to end merges at once,\n"
            "                         a rank whose CMD failed does not wait)\n"
            "  --term-timeout S       stopped by SIGTERM or SIGHUP, mlprof run passes the\n"
            "                         signal on to CMD and gives it S seconds to end before\n"
            "                         it kills it (SIGKILL); then it merges what was written\n"
            "                         and dies of the signal itself (default 10)\n"
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
            "rank (%%r, or rankR as in job.rank$RANK.json) is that rank's alone. A merge\n"
            "takes its own job's traces only (by the launcher's job id and world size);\n"
            "another job's are removed from FILE.parts/ once no rank of it runs.\n"
            "\n"
            "SIGTERM and SIGHUP (how launchers stop ranks) are passed on to CMD (its process\n"
            "group, unless mlprof run is in a terminal's foreground: there CMD shares its\n"
            "group, and ^C reaches CMD from the terminal); SIGINT and SIGQUIT sent to mlprof\n"
            "run alone are passed on too. Stopped, mlprof run waits for CMD (--term-timeout),\n"
            "merges what was written and dies of the signal.\n");
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

/* ------------------------------------------------------------ signals
 *
 * A launcher stops the ranks that survive a failed one with SIGTERM (torchrun
 * to each worker's pid, then SIGKILL 30 s later; mpirun, Slurm), a closed
 * terminal sends SIGHUP, ^C SIGINT. mlprof run passes them on to the command
 * and waits for it, so that its traces are written, its done file too, and
 * the merge made, as after any end; for SIGTERM and SIGHUP it then dies of
 * the signal itself (after the summary), so that the launcher sees a rank
 * stopped by it, not one that ended. The command is given --term-timeout
 * seconds to end after a SIGTERM or SIGHUP, then killed (SIGKILL), so that
 * none is left running without its mlprof run; and should even that not
 * reap it (a process stuck in the kernel), mlprof run goes on without it.
 * SIGINT and SIGQUIT change nothing of the exit status: they are the
 * program's to handle (its status is passed on), as before.
 *
 * The command runs in a process group of its own, to which the signals go
 * (its children too: a shell script's, a launcher's workers), so that a
 * signal sent to mlprof run's whole group (timeout(1), a launcher's
 * killpg) reaches the command once, through mlprof run, and never twice.
 * In the foreground of a terminal, the command stays in mlprof run's group
 * instead, for the terminal's ^C, ^Z and input to reach it; a signal that
 * comes from the terminal itself (SI_KERNEL) has reached the command already
 * and is not passed on again there. Should mlprof run be killed outright
 * (SIGKILL), the command gets SIGTERM (PR_SET_PDEATHSIG) and writes its
 * trace, instead of running on alone.
 *
 * The handlers only pass the signal on and note it; what is said is said
 * by the main loop (report_signals), which waitid leaves with EINTR. The
 * child is waited for with WNOWAIT first and its pid forgotten before it is
 * reaped, so that a signal is never passed on to a pid that was reused. */

static const int k_forwarded[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};
#define NFORWARDED (sizeof k_forwarded / sizeof k_forwarded[0])

static volatile sig_atomic_t g_child;       /* the command's pid while it runs, else 0 */
static volatile sig_atomic_t g_child_group; /* it leads a process group of its own */
static volatile sig_atomic_t g_stop;        /* the first SIGTERM or SIGHUP received, or 0 */
static volatile sig_atomic_t g_passed[NFORWARDED]; /* per signal: how many were passed on */
static volatile sig_atomic_t g_kept[NFORWARDED];   /* per signal: received, not passed on */
static volatile sig_atomic_t g_stop_late;   /* it came once the command had ended */
static volatile sig_atomic_t g_kill_stage;  /* 1: SIGKILL sent after the term timeout; 2: gave up on it */
static struct itimerval g_term_timer;      /* --term-timeout, for setitimer */
static struct sigaction g_old_actions[NFORWARDED], g_old_alarm;
static int g_installed[NFORWARDED];

static const char *sig_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : sig == SIGINT ? "SIGINT" : sig == SIGQUIT ? "SIGQUIT"
                                                                                                          : "signal";
}

static int forwarded_index(int sig)
{
    for (size_t i = 0; i < NFORWARDED; i++)
        if (k_forwarded[i] == sig)
            return (int)i;
    return -1;
}

static void on_forwarded(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno, i = forwarded_index(sig);
    pid_t child = (pid_t)g_child;
    int stop = sig == SIGTERM || sig == SIGHUP;
    /* the terminal's (^C, a hangup) went to the whole foreground group, the
     * command in it; a second SIGTERM or SIGHUP is not passed on (a second
     * one kills the command's trace writer at once: the timer does that) */
    int pass = child > 0 && !(si && si->si_code == SI_KERNEL && !g_child_group) && !(stop && g_stop);
    if (pass && kill(g_child_group ? -child : child, sig) == 0)
        g_passed[i]++;
    else
        g_kept[i]++;
    if (stop && !g_stop) {
        g_stop = sig;
        if (child > 0)
            setitimer(ITIMER_REAL, &g_term_timer, NULL);
        else
            g_stop_late = 1;
    }
    errno = saved;
}

/* The term timeout: SIGKILL to the command; the same time again, and the
 * wait for it ends. */
static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    pid_t child = (pid_t)g_child;
    if (child > 0 && g_kill_stage == 0) {
        kill(g_child_group ? -child : child, SIGKILL);
        g_kill_stage = 1;
        setitimer(ITIMER_REAL, &g_term_timer, NULL);
    } else if (child > 0) {
        g_kill_stage = 2;
    }
    errno = saved;
}

/* Handlers for the signals passed on, where they were not ignored (nohup's
 * SIGHUP, a background job's SIGINT stay ignored, by the command too), and
 * for the timer's SIGALRM. With them blocked, until the command's pid is
 * known. */
static void install_signals(double term_timeout)
{
    double whole = term_timeout < 1e6 ? term_timeout : 1e6;
    g_term_timer.it_value.tv_sec = (time_t)whole;
    g_term_timer.it_value.tv_usec = (suseconds_t)((whole - (double)(time_t)whole) * 1e6);
    if (!g_term_timer.it_value.tv_sec && !g_term_timer.it_value.tv_usec)
        g_term_timer.it_value.tv_usec = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&sa.sa_mask, k_forwarded[i]);
    sigaddset(&sa.sa_mask, SIGALRM);
    sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: waitid returns, and what came is said */
    sa.sa_sigaction = on_forwarded;
    for (size_t i = 0; i < NFORWARDED; i++) {
        if (sigaction(k_forwarded[i], NULL, &g_old_actions[i]) != 0 ||
            (!(g_old_actions[i].sa_flags & SA_SIGINFO) && g_old_actions[i].sa_handler == SIG_IGN))
            continue;
        g_installed[i] = sigaction(k_forwarded[i], &sa, NULL) == 0;
    }
    sa.sa_flags = 0;
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, &g_old_alarm);
}

/* In the child, before exec: the dispositions mlprof run found. */
static void restore_signals(void)
{
    for (size_t i = 0; i < NFORWARDED; i++)
        if (g_installed[i])
            sigaction(k_forwarded[i], &g_old_actions[i], NULL);
    sigaction(SIGALRM, &g_old_alarm, NULL);
}

/* Whether this process is in the foreground process group of its
 * controlling terminal (an interactive shell's foreground job). */
static int terminal_foreground(void)
{
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    pid_t fg = tcgetpgrp(fd);
    close(fd);
    return fg >= 0 && fg == getpgrp();
}

/* Says what the handlers did since the last call. */
static void report_signals(const char *cmd, pid_t pid, double term_timeout)
{
    static int said_passed[NFORWARDED], said_kept[NFORWARDED], said_stage, said_stopping;
    const char *what = g_child_group ? "process group" : "process";
    for (size_t i = 0; i < NFORWARDED; i++) {
        int sig = k_forwarded[i], stop = sig == SIGTERM || sig == SIGHUP;
        int passed = g_passed[i], kept = g_kept[i];
        if (passed > said_passed[i]) {
            if (stop)
                fprintf(stderr, PROG ": %s: passed on to %s (%s %d), which has %g s to end before it is killed; "
                                "what it wrote is merged then\n", sig_name(sig), cmd, what, (int)pid, term_timeout);
            else
                fprintf(stderr, PROG ": %s: passed on to %s (%s %d)\n", sig_name(sig), cmd, what, (int)pid);
        }
        /* not passed on: the terminal sent it to the command too (^C: nothing
         * to say, as before), or the command is being stopped already (said
         * once, however many come) */
        if (stop && kept > said_kept[i] && g_kill_stage == 0 && !said_stopping++)
            fprintf(stderr, PROG ": %s: %s (process %d) is being stopped; it has %g s to end before it is "
                            "killed\n", sig_name(sig), cmd, (int)pid, term_timeout);
        said_passed[i] = passed;
        said_kept[i] = kept;
    }
    int stage = g_kill_stage;
    if (stage > said_stage) {
        if (said_stage < 1)
            fprintf(stderr, PROG ": %s (%s %d) did not end within %g s of %s: killed (SIGKILL)\n", cmd, what,
                    (int)pid, term_timeout, sig_name(g_stop));
        if (stage == 2)
            fprintf(stderr, PROG ": %s (process %d) has not ended %g s after SIGKILL either: going on without "
                            "it\n", cmd, (int)pid, term_timeout);
        said_stage = stage;
    }
}

/* The command's end: its wait status into *st; 0 when it was not reaped
 * (the wait was given up, after SIGKILL). Signals that come meanwhile are
 * passed on and said. */
static int wait_command(pid_t pid, const char *cmd, double term_timeout, int *st)
{
    int ended = 0;
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) == 0) {
            ended = 1;
            break;
        }
        if (errno != EINTR)
            break; /* ECHILD: not ours to wait for (cannot be) */
        report_signals(cmd, pid, term_timeout);
        if (g_kill_stage == 2)
            break;
    }
    /* no signal goes to that pid from here on; the timer is of no use */
    g_child = 0;
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_REAL, &off, NULL);
    report_signals(cmd, pid, term_timeout);
    if (!ended)
        return 0;
    while (waitpid(pid, st, 0) < 0) {
        if (errno != EINTR)
            return 0;
    }
    return 1;
}

/* After everything: a run stopped by SIGTERM or SIGHUP dies of it, for the
 * launcher (or shell) to see; else its status. */
static int finish(int rc)
{
    int sig = g_stop;
    if (!sig)
        return rc;
    if (g_stop_late)
        fprintf(stderr, PROG ": %s came after the command's end: its traces were merged first\n", sig_name(sig));
    fflush(NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig; /* cannot be: the signal's default action ends the process */
}

/* Starts cmd in a child process, and tells whether exec worked: a failed
 * exec writes its errno into a pipe that a successful one closes. The child
 * leads a process group of its own when own_group, gets SIGTERM should this
 * process die first, and execs with the signal dispositions and the mask
 * (child_mask) that mlprof run found. Returns the child's pid; or -1 with
 * *exec_errno set (0 when fork itself failed). */
static pid_t start_command(char **cmd, int own_group, const sigset_t *child_mask, int *exec_errno)
{
    int fds[2];
    *exec_errno = 0;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t parent = getpid();
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
        if (own_group)
            setpgid(0, 0);
        /* mlprof run killed outright (SIGKILL): the command is stopped as a
         * launcher would, and writes its trace, instead of running on alone */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* it died before that */
            _exit(128 + SIGTERM);
        restore_signals();
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(fds[1], &e, sizeof e);
        (void)w;
        _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
    }
    if (own_group)
        setpgid(pid, pid); /* as the child does, whichever comes first (EACCES once it has exec'd) */
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
    double term_timeout; /* after a SIGTERM or SIGHUP passed on, before SIGKILL */
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
    o->term_timeout = 10;
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
        } else if (strcmp(key, "term-timeout") == 0 || strcmp(key, "term_timeout") == 0) {
            char *end;
            double t = strtod(value, &end);
            if (end == value || *end || !(t > 0) || t > 86400)
                run_bad_usage("--term-timeout: expected seconds above 0, up to 86400, got \"%s\"", value);
            o->term_timeout = t;
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
    char tag[112]; /* the job in file names (job_tag): its done files and its lock */
} job;

/* A job (its id and world size) as part of a file name: the id's letters,
 * digits, '.', '_' and '-' (any other byte as '_', at most 64 of them;
 * "noid" for none), then ".wWORLD". When the id had to be changed, a hash of
 * it is added, so that two ids do not share a tag. The world size is in it
 * because torchrun's jobs are all "none" unless given --rdzv-id: a job of 3
 * ranks and a later one of 2 are told apart by it. */
static void job_tag(const char *id, long long world, char *out, size_t len)
{
    char clean[72];
    size_t k = 0;
    int changed = 0;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = id; *p; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
        if (k == 64) {
            changed = 1;
            continue;
        }
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                 c == '-';
        clean[k++] = ok ? c : '_';
        changed |= !ok;
    }
    clean[k] = '\0';
    if (!k)
        snprintf(out, len, "noid.w%lld", world);
    else if (changed)
        snprintf(out, len, "%s-%08x.w%lld", clean, (unsigned)h, world);
    else
        snprintf(out, len, "%s.w%lld", clean, world);
}

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

/* The pid in a ranked part's name (trace.rankR.PID.json, and the files
 * beside it: trace.rankR.PID.flush1.json, trace.rankR.PID.json.tmp-...), or
 * -1. */
static long part_pid(const char *name)
{
    if (part_rank(name) < 0)
        return -1;
    const char *p = strchr(name + 10, '.') + 1;
    char *end;
    long pid = strtol(p, &end, 10);
    return end != p && (*end == '.' || !*end) ? pid : -1;
}

/* Whether name is a part of this run: of this job's ranks when ranked
 * (all of them, or this rank's only when the world is not known). Which job
 * wrote it is read with the trace (trace_job), when it is merged. */
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

/* The job a trace belongs to, as the process that wrote it said it: the
 * launcher's job id and world size (distributedInfo's job_id and world_size,
 * otherData's distributed_job_id and distributed_world_size). */
typedef struct part_job {
    int known;       /* the trace says its job id */
    char id[128];
    long long world; /* -1 when not said */
} part_job;

/* The JSON string at v (quotes included, len bytes) into out, unescaped. */
static void json_text(const char *v, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 1; i + 1 < len && k + 1 < cap; i++) {
        char c = v[i];
        if (c == '\\' && i + 2 < len) {
            c = v[++i];
            if (c == 'n' || c == 't' || c == 'r' || c == 'b' || c == 'f') {
                c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : '\f';
            } else if (c == 'u' && i + 4 < len) {
                char hex[5] = {v[i + 1], v[i + 2], v[i + 3], v[i + 4], '\0'};
                long u = strtol(hex, NULL, 16);
                c = u > 0 && u < 0x80 ? (char)u : '?';
                i += 4;
            }
        }
        out[k++] = c;
    }
    out[k] = '\0';
}

/* The job said by the compact JSON object obj, under these keys: 1 when it
 * says one. */
static int job_in(const char *obj, const char *id_key, const char *world_key, part_job *pj)
{
    size_t len;
    const char *v = an_json_member(obj, id_key, &len);
    if (!v || len < 2 || *v != '"')
        return 0;
    json_text(v, len, pj->id, sizeof pj->id);
    const char *w = an_json_member(obj, world_key, &len);
    pj->world = w && *w >= '0' && *w <= '9' ? strtoll(w, NULL, 10) : -1;
    pj->known = 1;
    return 1;
}

static int trace_job(const an_trace *t, part_job *pj)
{
    memset(pj, 0, sizeof *pj);
    pj->world = -1;
    return (t->distributed_info && job_in(t->distributed_info, "job_id", "world_size", pj)) ||
           (t->other_data && job_in(t->other_data, "distributed_job_id", "distributed_world_size", pj));
}

/* Whether a trace's job is this one: the same id, and the same world size
 * when it says one. */
static int same_job(const part_job *pj, const job *j)
{
    return strcmp(pj->id, j->id) == 0 && (pj->world < 0 || pj->world == j->world);
}

/* The last occurrence of key in buf (n bytes), or NULL. */
static const char *last_of(const char *buf, size_t n, const char *key)
{
    const char *last = NULL;
    size_t k = strlen(key);
    for (const char *p = buf; (p = memmem(p, (size_t)(buf + n - p), key, k)) != NULL; p++)
        last = p;
    return last;
}

/* The job said by the end of a trace (buf, n bytes, NUL after them): the
 * last distributed_job_id and distributed_world_size, otherData's members
 * (the last of mlprof's JSON, the rank's near its end). 1 when found. */
static int tail_job(const char *buf, size_t n, part_job *pj)
{
    static const char id_key[] = "\"distributed_job_id\":\"", world_key[] = "\"distributed_world_size\":";
    const char *v = last_of(buf, n, id_key);
    if (!v)
        return 0;
    v += sizeof id_key - 2; /* at its opening quote */
    const char *e = v + 1;
    while (e < buf + n && *e != '"')
        e += e[0] == '\\' ? 2 : 1;
    if (e >= buf + n)
        return 0;
    json_text(v, (size_t)(e + 1 - v), pj->id, sizeof pj->id);
    const char *w = last_of(buf, n, world_key);
    pj->world = w ? strtoll(w + sizeof world_key - 1, NULL, 10) : -1;
    pj->known = 1;
    return 1;
}

/* The job of the trace at path, read from its end (4 KiB, then 64), else
 * from the whole trace (a gzip one, or one whose end does not say it, up to
 * 64 MiB). Every rank of a job that starts reads the files of its share of
 * the ranks so (clean_parts): the end of each is what they cost. */
static void part_job_read(const char *path, part_job *pj)
{
    memset(pj, 0, sizeof *pj);
    pj->world = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    unsigned char magic[2] = {0, 0};
    int whole = 0, gz = 0, small = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, magic, 2, 0) == 2) {
        gz = magic[0] == 0x1f && magic[1] == 0x8b;
        small = st.st_size <= ((off_t)64 << 20);
        static const size_t windows[] = {4096, 65536};
        char *buf = gz ? NULL : malloc(windows[1] + 1);
        for (size_t w = 0; buf && w < 2 && !pj->known && !whole; w++) {
            off_t from = st.st_size > (off_t)windows[w] ? st.st_size - (off_t)windows[w] : 0;
            ssize_t n = pread(fd, buf, windows[w], from);
            if (n <= 0)
                break;
            buf[n] = '\0';
            whole = from == 0;
            tail_job(buf, (size_t)n, pj);
        }
        free(buf);
    }
    close(fd);
    if (pj->known || !magic[0] || (whole && !gz) || !small)
        return;
    an_trace t;
    if (an_trace_read(&t, path) == 0 || t.partial)
        trace_job(&t, pj);
    an_trace_free(&t);
}

/* dir/name into path: 0 when it fits. */
static int join_path(char *path, size_t len, const char *dir, const char *name)
{
    int n = snprintf(path, len, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

static int pid_alive(long pid)
{
    return pid > 0 && pid <= INT_MAX && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* ---------------------------------------------------- jobs sharing a place
 *
 * Two jobs may be given the same -o in one folder, at once or one after the
 * other. Each keeps to its own: its done files are named by its job
 * (done.rankR.TAG), its merge leaves out the traces of another job (said),
 * and the files of an earlier job are removed, but only once that job has
 * ended, that is, when no rank of it is running: every rank of a job holds
 * a shared lock on DIR/.job.TAG from its start to its exit, and the files of
 * another job are removed (by the next job's ranks as they start, and by its
 * merging rank) only while its lock can be had exclusively. A job that runs
 * on, or whose end cannot be told (no flock on that file system), keeps its
 * files. Neither the writer's pid nor the time is a test of that: a job's
 * processes end before its ranks' merge has read their traces, and its
 * ranks may be on other hosts. */

/* Holds a shared lock on DIR/.job.TAG for as long as this process lives
 * (the descriptor is left open; not inherited by the command). The file is
 * locked only if it is still the one at that path: an earlier job's lock
 * file is removed by whoever cleans up after it. -1 when it cannot be had. */
static int hold_job_lock(const char *dir, const char *tag)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.job.%s", dir, tag) >= (int)sizeof path)
        return -1;
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            return -1;
        while (flock(fd, LOCK_SH) != 0) {
            if (errno != EINTR) {
                close(fd);
                return -1;
            }
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return fd;
        close(fd);
    }
    return -1;
}

#define MAX_OTHER_JOBS 16

/* Another job met while cleaning: whether it has ended (its lock held here,
 * exclusively, until the cleaning is over), and what was removed of it. */
typedef struct other_job {
    char tag[112];
    int ended, fd;
    part_job pj; /* as one of its traces said it ("" and -1 when only its done files were met) */
    unsigned removed;
    mlprof__sb names;
} other_job;

typedef struct cleaning {
    const char *dir;
    other_job jobs[MAX_OTHER_JOBS];
    int n;
} cleaning;

/* The job of tag, looked up once: has it ended? Beyond MAX_OTHER_JOBS, it
 * is taken as running (its files wait for the next run). */
static other_job *other_job_of(cleaning *c, const char *tag, const part_job *pj)
{
    for (int i = 0; i < c->n; i++) {
        if (strcmp(c->jobs[i].tag, tag) == 0) {
            if (pj && !c->jobs[i].pj.known)
                c->jobs[i].pj = *pj;
            return &c->jobs[i];
        }
    }
    if (c->n == MAX_OTHER_JOBS)
        return NULL;
    other_job *o = &c->jobs[c->n++];
    memset(o, 0, sizeof *o);
    snprintf(o->tag, sizeof o->tag, "%s", tag);
    o->fd = -1;
    o->pj.world = -1;
    if (pj)
        o->pj = *pj;
    mlprof__sb_init(&o->names);
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.job.%s", c->dir, tag) >= (int)sizeof path)
        return o;
    /* made when missing (its ranks are gone and it was cleaned up after,
     * or an mlprof before job locks wrote its files): held, it makes a
     * rank of that job that starts now wait until the cleaning is over */
    o->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (o->fd < 0)
        return o;
    int r;
    while ((r = flock(o->fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    o->ended = r == 0;
    if (!o->ended) {
        close(o->fd);
        o->fd = -1;
    }
    return o;
}

static void remove_of(cleaning *c, other_job *o, const char *name)
{
    char path[PATH_MAX];
    if (join_path(path, sizeof path, c->dir, name) != 0 || unlink(path) != 0)
        return;
    if (o->removed++ < 4)
        mlprof__sb_printf(&o->names, "%s%s", o->removed > 1 ? ", " : "", name);
}

/* Removes from dir what belongs to jobs other than j that have ended (their
 * traces, the files beside them, their done files and lock files), saying
 * so; at the start (prepare), also this rank's own files of an earlier run
 * of this same job, as before job ids were looked at. Never a file of a job
 * that runs. At the start, each rank of j looks at the files of ranks R
 * with R % world == its rank (rank 0 at the lock files too), so that a
 * large job's ranks do not all read every file; the merging rank looks at
 * them all. */
static void clean_parts(const char *dir, const job *j, int at_start)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    cleaning c;
    memset(&c, 0, sizeof c);
    c.dir = dir;
    struct dirent *e;
    char tag[112], path[PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, "done.rank", 9) == 0) {
            char *end;
            long r = strtol(name + 9, &end, 10);
            if (end == name + 9 || (at_start && r % j->world != j->rank))
                continue;
            if (*end == '\0') { /* done.rankR: an mlprof before done files were named by job */
                if (join_path(path, sizeof path, dir, name) == 0)
                    unlink(path);
            } else if (*end == '.' && strcmp(end + 1, j->tag) == 0) {
                if (at_start && r == j->rank && join_path(path, sizeof path, dir, name) == 0)
                    unlink(path); /* an earlier run's of this rank of this job */
            } else if (*end == '.') {
                other_job *o = other_job_of(&c, end + 1, NULL);
                if (o && o->ended)
                    remove_of(&c, o, name);
            }
            continue;
        }
        if (strncmp(name, ".job.", 5) == 0) {
            if ((!at_start || j->rank == 0) && strcmp(name + 5, j->tag) != 0)
                other_job_of(&c, name + 5, NULL); /* its lock file goes below when it has ended */
            continue;
        }
        long r = part_rank(name), pid = part_pid(name);
        if (r < 0 || pid < 0 || (at_start && r % j->world != j->rank))
            continue;
        /* which job: said by the trace of that process (this file, or the one beside it) */
        size_t n = strlen(name);
        part_job pj;
        char own[64];
        snprintf(own, sizeof own, "trace.rank%ld.%ld.json", r, pid);
        if (join_path(path, sizeof path, dir, n > 5 && strcmp(name + n - 5, ".json") == 0 ? name : own) != 0)
            continue;
        part_job_read(path, &pj);
        if (!pj.known) {
            /* cut short, or not a trace: this rank's, when no process here writes it */
            if (at_start && r == j->rank && !pid_alive(pid) && join_path(path, sizeof path, dir, name) == 0)
                unlink(path);
        } else if (same_job(&pj, j)) {
            if (at_start && r == j->rank && join_path(path, sizeof path, dir, name) == 0)
                unlink(path); /* an earlier run's of this rank */
        } else {
            job_tag(pj.id, pj.world, tag, sizeof tag);
            other_job *o = other_job_of(&c, tag, &pj);
            if (o && o->ended)
                remove_of(&c, o, name);
        }
    }
    closedir(d);
    for (int i = 0; i < c.n; i++) {
        other_job *o = &c.jobs[i];
        if (o->ended && snprintf(path, sizeof path, "%s/.job.%s", dir, o->tag) < (int)sizeof path)
            unlink(path); /* under its lock: a rank of that job that starts now makes a new one */
        if (o->fd >= 0)
            close(o->fd);
        if (o->removed) {
            char who[200];
            if (o->pj.known)
                snprintf(who, sizeof who, "job %s%s, %lld ranks", o->pj.id[0] ? "" : "without an id",
                         o->pj.id, o->pj.world);
            else
                snprintf(who, sizeof who, "%s", o->tag);
            fprintf(stderr, PROG ": rank %d: removed %u file%s of another job (%s), which has ended, from %s/: %s%s\n",
                    j->rank, o->removed, o->removed == 1 ? "" : "s", who, dir, o->names.data ? o->names.data : "",
                    o->removed > 4 ? ", ..." : "");
        }
        mlprof__sb_free(&o->names);
    }
}

/* Makes dir, or empties it of an earlier run's parts (traces, and the CSV
 * files and pictures beside them). A rank of a job removes its own rank's
 * only (the other ranks are writing theirs), and the files of other jobs
 * that have ended (clean_parts); it holds its job's lock from here on. */
static int prepare_parts(const char *dir, const job *j)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, PROG ": cannot make %s: %s\n", dir, strerror(errno));
        return -1;
    }
    /* the processes write their traces there: a folder they cannot write in
     * would leave an earlier run's parts to be merged as this one's */
    if (access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, PROG ": cannot write in %s, where each process's trace goes: %s\n", dir, strerror(errno));
        return -1;
    }
    if (j->ranked && j->world > 0) {
        /* without it (no flock here), another job cannot take it either,
         * and keeps this one's files */
        hold_job_lock(dir, j->tag);
        clean_parts(dir, j, 1);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, PROG ": cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "trace.", 6) != 0)
            continue;
        if (j->ranked && part_rank(e->d_name) != j->rank)
            continue;
        if (join_path(path, sizeof path, dir, e->d_name) == 0 && unlink(path) != 0 && errno != ENOENT) {
            fprintf(stderr, PROG ": cannot remove %s, an earlier run's trace, which would be merged as this "
                            "one's: %s\n", path, strerror(errno));
            closedir(d);
            return -1;
        }
    }
    closedir(d);
    return 0;
}

/* Removes a folder of parts made for this run alone (its files, then it). */
static void remove_parts(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            join_path(path, sizeof path, dir, e->d_name) == 0)
            unlink(path);
    closedir(d);
    rmdir(dir);
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

/* The done file of rank r of this job: DIR/done.rankR.TAG (named by the
 * job, so that two jobs in one place at once count their own). 0 when the
 * path fits. */
static int done_path(char *path, size_t len, const char *dir, const job *j, int r)
{
    return snprintf(path, len, "%s/done.rank%d.%s", dir, r, j->tag) < (int)len ? 0 : -1;
}

/* Says this rank is done: its done file holds the job id and the status.
 * 0 when it was written. */
static int mark_done(const char *dir, const job *j, int status)
{
    char path[PATH_MAX], text[200];
    if (done_path(path, sizeof path, dir, j, j->rank) != 0) {
        fprintf(stderr, PROG ": rank %d: the path %s/done.rank%d.%s is too long\n", j->rank, dir, j->rank, j->tag);
        return -1;
    }
    int n = snprintf(text, sizeof text, "%s\n%d\n", j->id, status);
    if (mlprof__write_file_atomic(path, text, (size_t)n) != MLPROF_OK) {
        fprintf(stderr, PROG ": rank %d: %s\n", j->rank, mlprof_last_error());
        return -1;
    }
    return 0;
}

/* Whether rank r is done in this job: its done file is there and holds
 * this job's id. */
static int rank_done(const char *dir, const job *j, int r)
{
    char path[PATH_MAX], text[200] = "";
    if (done_path(path, sizeof path, dir, j, r) != 0)
        return 0;
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
        if (done_path(path, sizeof path, dir, j, r) == 0)
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
static int rank_merges(const char *dir, const job *j, double timeout, int status, int failed,
                       mlprof__sb *not_done)
{
    int lowest, fd = lock_parts(dir);
    int marked = mark_done(dir, j, status) == 0;
    int done = count_done(dir, j, not_done, &lowest);
    if (done == j->world)
        take_done(dir, j);
    unlock_parts(fd);
    if (done == j->world)
        return 1;
    /* its command failed: the launcher learns of it at once (and stops the
     * other ranks, the last of which merges), not a timeout later */
    if (failed)
        return 0;
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

/* Which process wrote a part: its host and pid, as its otherData says. */
typedef struct proc_id {
    int known;
    char host[256];
    unsigned long long pid;
} proc_id;

static void proc_of(const an_trace *t, proc_id *p)
{
    memset(p, 0, sizeof *p);
    p->pid = other_number(t, "pid");
    p->known = p->pid && an_other_data_str(t, "host", p->host, sizeof p->host) != NULL;
}

static int same_proc(const proc_id *a, const proc_id *b)
{
    return a->known && b->known && a->pid == b->pid && strcmp(a->host, b->host) == 0;
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
    if (n && parts_dir)
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
    /* a bad value in the user's environment would be ignored by every
     * process of the run, each saying so: refused here, once */
    int rejected = mlprof__env_rejected();
    if (rejected)
        run_bad_usage("%s", rejected == 1 ? "the MLPROF_ setting above is refused: fix it or unset it"
                                          : "the MLPROF_ settings above are refused: fix them or unset them");
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

    /* the output, checked before the command runs rather than after */
    struct stat out_st;
    int out_exists = stat(o.output, &out_st) == 0;
    if (!o.output[0])
        run_bad_usage("%s", "-o: an empty file name");
    if (out_exists && S_ISDIR(out_st.st_mode))
        run_bad_usage("-o %s: it is a directory (give the merged trace's file name)", o.output);
    /* a device, FIFO or terminal (/dev/null, /dev/stdout): its parts go to a
     * folder of their own in TMPDIR, removed once merged, not beside it */
    int special = out_exists && !S_ISREG(out_st.st_mode);
    if (!special) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", o.output);
        char *slash = strrchr(dir, '/');
        if (slash)
            slash[slash == dir ? 1 : 0] = '\0';
        else
            snprintf(dir, sizeof dir, ".");
        if (access(dir, W_OK | X_OK) != 0) {
            char bad[PATH_MAX + 600];
            snprintf(bad, sizeof bad, "-o %s: cannot write in %s: %s", o.output, dir, strerror(errno));
            run_bad_usage("%s", bad);
        }
    }
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
    if (special && j.ranked)
        run_bad_usage("-o %s: a rank's output must be a file: the job's ranks share the folder of parts "
                      "beside it", o.output);
    if (special) {
        const char *tmp = getenv("TMPDIR");
        snprintf(parts_dir, sizeof parts_dir, "%s/mlprof-run-parts-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(parts_dir)) {
            fprintf(stderr, PROG ": cannot make a folder for the processes' traces in %s: %s\n",
                    tmp && *tmp ? tmp : "/tmp", strerror(errno));
            return 1;
        }
    }
    job_tag(j.id, j.world, j.tag, sizeof j.tag);
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
    /* the part's name stays known to a program that names its own file (src/record/control.c) */
    setenv("MLPROF_RUN_PART", filename, 1);
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
    /* the signals wait until the command's pid is known (see "signals") */
    sigset_t stops, old_mask;
    sigemptyset(&stops);
    for (size_t i = 0; i < NFORWARDED; i++)
        sigaddset(&stops, k_forwarded[i]);
    sigaddset(&stops, SIGALRM);
    sigprocmask(SIG_BLOCK, &stops, &old_mask);
    install_signals(o.term_timeout);
    int own_group = !terminal_foreground();
    g_child_group = own_group;
    pid_t pid = start_command(o.cmd, own_group, &old_mask, &exec_errno);
    if (pid > 0)
        g_child = pid;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
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
        return finish(start_rc);
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
    /* a ^C reaches the program, which writes its trace; we wait for it, as
     * for the signals passed on to it */
    int st = 0;
    int reaped = wait_command(pid, o.cmd[0], o.term_timeout, &st);
    double wall = now_s() - t0;
    int rc;
    char status[96];
    if (!reaped) {
        rc = 128 + SIGKILL;
        snprintf(status, sizeof status, "did not end when killed (SIGKILL)");
    } else if (WIFSIGNALED(st)) {
        rc = 128 + WTERMSIG(st);
        snprintf(status, sizeof status, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    } else {
        rc = WEXITSTATUS(st);
        snprintf(status, sizeof status, "exited with status %d", rc);
    }

    /* a rank of a job: the last to end merges every rank's parts */
    mlprof__sb not_done;
    mlprof__sb_init(&not_done);
    /* failed on its own: not stopped by a signal passed on (the other
     * ranks are being stopped with it, and the last one merges) */
    int cmd_failed = rc != 0 && !g_stop;
    if (j.ranked && j.world > 0 && !rank_merges(parts_dir, &j, o.merge_timeout, rc, cmd_failed, &not_done)) {
        if (cmd_failed)
            fprintf(stderr, PROG ": rank %d: %s %s: not waiting for the other ranks (the last of them to end "
                            "merges)\n", j.rank, o.cmd[0], status);
        if (!o.quiet)
            printf("\nmlprof run: rank %d: %s %s after %.3f s; its trace is in %s/ (the last rank to end "
                   "merges into %s)\n", j.rank, o.cmd[0], status, wall, parts_dir, o.output);
        mlprof__sb_free(&not_done);
        return finish(rc);
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
    /* a process's parts (its finished dumps: trace.PID.dN.json beside
     * trace.PID.json) are one process of the merged trace */
    size_t *same_as = calloc(MAX_PARTS, sizeof *same_as);
    proc_id *procs = calloc(MAX_PARTS, sizeof *procs);
    if (!paths || !sum || !same_as || !procs)
        return finish(rc ? rc : 1);
    parts_said said = {0, {0}};
    mlprof__sb_init(&said.peaks);
    an_merge_options mo;
    memset(&mo, 0, sizeof mo);
    int job_ranks = j.ranked && j.world > 0;
    if (job_ranks) /* another job that has ended since this one started */
        clean_parts(parts_dir, &j, 0);
    size_t n = list_parts(parts_dir, &j, paths), used = 0, others = 0, nproc = 0;
    int failed = 0, written = 0;
    part_job other[4]; /* the other jobs met, the first four */
    int nother = 0;
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
        /* a trace of another job that runs in the same place (one that says
         * none is taken, as before job ids were looked at) */
        part_job pj;
        if (job_ranks && trace_job(&t, &pj) && !same_job(&pj, &j)) {
            int k = 0;
            while (k < nother && !(strcmp(other[k].id, pj.id) == 0 && other[k].world == pj.world))
                k++;
            if (k == nother && nother < 4)
                other[nother++] = pj;
            others++;
            an_trace_free(&t);
            continue;
        }
        if (an_merge_summarize(&t, &mo, &sum[used]) != 0) {
            fprintf(stderr, PROG ": out of memory reading %s; left out\n", paths[i]);
            failed = 1;
        } else {
            note_part(&said, &t);
            proc_of(&t, &procs[used]);
            for (size_t k = 0; k < used && procs[used].known; k++)
                if (!same_as[k] && same_proc(&procs[k], &procs[used])) {
                    same_as[used] = k + 1;
                    break;
                }
            nproc += !same_as[used];
            used++;
        }
        an_trace_free(&t);
    }
    mo.same_as = same_as;
    /* one host's processes share its clock; ranks may be on several hosts,
     * and have their clock sync measured: the merge chooses. So it does when
     * this run wraps the launcher (mlprof run -- torchrun, -- mpirun): its
     * own trace has no rank and goes on the clock of a rank on its host */
    mo.same_clock = !j.ranked;
    for (size_t i = 0; i < used; i++)
        mo.same_clock &= sum[i].rank < 0;
    if (others) {
        mlprof__sb ids;
        mlprof__sb_init(&ids);
        for (int k = 0; k < nother; k++)
            mlprof__sb_printf(&ids, "%s%s%s (%lld ranks)", k ? ", " : "", other[k].id[0] ? "job " : "no job id",
                              other[k].id, other[k].world);
        fprintf(stderr, PROG ": rank %d: note: %zu trace%s in %s/ %s of another job running there (%s%s; this one "
                        "is %s%s, %d ranks): left out of %s; give each job its own -o\n", j.rank, others,
                others == 1 ? "" : "s", parts_dir, others == 1 ? "is" : "are", ids.data ? ids.data : "",
                nother == 4 ? ", ..." : "", j.id[0] ? "job " : "without a job id", j.id, j.world, output);
        mlprof__sb_free(&ids);
    }
    an_trace merged;
    int have_merged = 0;
    const char *range = getenv("MLPROF_CAPTURE_RANGE");
    if (!used && o.on_demand) {
        fprintf(stderr, PROG ": no capture was taken: no trace\n");
    } else if (!used && range && *range) {
        fprintf(stderr, PROG ": no process of the run captured capture_range=%s (it never began): no trace\n",
                range);
    } else if (!used && g_kill_stage) {
        fprintf(stderr, PROG ": no process of the run wrote a trace: it was killed (SIGKILL) before it did\n");
        failed = 1;
    } else if (!used && reaped && WIFSIGNALED(st)) {
        /* its handler said why, where it could (a signal it handles itself, or SIGKILL, gives none) */
        fprintf(stderr, PROG ": no process of the run wrote a trace: %s %s before any did\n", o.cmd[0], status);
        failed = 1;
    } else if (!used) {
        fprintf(stderr, PROG ": no process of the run wrote a trace (was it a static program, did it clear "
                        "LD_PRELOAD, or did it end by _exit() without running its exit handlers?)\n");
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
        summary(&o, status, wall, &said, nproc, have_merged ? &merged : NULL, written ? output : NULL,
                special && written ? NULL : parts_dir);
    if (special && written) /* TMPDIR's folder made for this run: merged, not kept */
        remove_parts(parts_dir);
    if (have_merged)
        an_trace_free(&merged);
    mlprof__sb_free(&said.peaks);
    for (size_t i = 0; i < used; i++)
        an_merge_input_free(&sum[i]);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(sum);
    free(same_as);
    free(procs);
    return finish(rc ? rc : failed);
}
