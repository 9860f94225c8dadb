/*
 * bench_stacks.c - what sampling call stacks (the sampling key, src/hw/
 * stacks.c) costs a CPU-bound program, at 1 kHz and 10 kHz, as ratios
 * measured in the same run:
 *  - in this process, in turns within each round: the same work (an LCG
 *    loop at the bottom of a 16-deep call chain, ~0.25 s of CPU) with mlprof
 *    running and sampling off, at 1 kHz and at 10 kHz; the process's CPU
 *    time (every thread: the program's and the sampler's reader, and what
 *    the kernel charges the sampled threads) as a ratio to sampling off,
 *    and the extra CPU time per sample kept (the samples are counted from
 *    the trace; writing it, with the symbols, is after the run and not
 *    timed here);
 *  - in child processes, the same work end to end: unsampled; under mlprof
 *    at the rate (its dump at exit included); and under `perf record -e
 *    cpu-clock:u -g -F RATE` (perf's own process included), as ratios of
 *    their CPU time (getrusage of the children) to the unsampled child's;
 *    and the same less each tool's fixed cost (starting, writing its file:
 *    its run at 1 Hz), which leaves what the rate costs: both sample the
 *    same event at the same rate on the same work, so they take about as
 *    many samples. perf is skipped, saying why, where /usr/bin/perf is
 *    missing or refuses.
 *  - the demo (cnn_infer, `make demo`'s program, beside this binary) as a
 *    child with MLPROF_SAMPLING at each rate: its CPU time as a ratio to
 *    the demo recording as usual without sampling (skipped, saying why,
 *    where the demo is not built).
 * Medians over the rounds. The last line is machine-readable.
 * Usage: bench_stacks [ROUNDS]   (bench_stacks --work N [HZ TRACE]: a child)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "mlprof/mlprof.h"

#define DEPTH 16
#define MAX_ROUNDS 21

static volatile uint64_t g_sink;

__attribute__((noinline)) static void leaf(uint64_t n)
{
    uint64_t x = g_sink;
    for (uint64_t i = 0; i < n; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    g_sink = x;
}

__attribute__((noinline)) static void chain(int depth, uint64_t n)
{
    if (depth > 1)
        chain(depth - 1, n);
    else
        leaf(n);
    g_sink += (uint64_t)depth; /* not a tail call */
}

/* The work: n LCG steps at the bottom of the chain, in slices so that the
 * chain is walked again now and then. */
static void work(uint64_t n)
{
    for (uint64_t done = 0; done < n; done += 1000000)
        chain(DEPTH, n - done < 1000000 ? n - done : 1000000);
}

static double cpu_ns(void) { return bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

static double children_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

static void config(const char *key, const char *value)
{
    if (mlprof_set_config(key, value) != MLPROF_OK) {
        fprintf(stderr, "bench_stacks: %s=%s: %s\n", key, value, mlprof_last_error());
        exit(1);
    }
}

/* The samples the trace so far holds (otherData.sampling.samples), or -1
 * with why (perf_event refused) in why. */
static long samples_so_far(char *why, size_t len)
{
    char *s = NULL;
    if (mlprof_dump_string(&s) != MLPROF_OK || !s) {
        snprintf(why, len, "mlprof_dump_string: %s", mlprof_last_error());
        return -1;
    }
    long n = -1;
    const char *at = strstr(s, "\"sampling\":{");
    const char *refused = at ? strstr(at, "\"refused\":\"") : NULL;
    const char *count = at ? strstr(at, "\"samples\":") : NULL;
    if (refused)
        snprintf(why, len, "%.*s", (int)strcspn(refused + 11, "\""), refused + 11);
    else if (count)
        n = atol(count + 10);
    else
        snprintf(why, len, "the trace has no otherData.sampling");
    mlprof_free(s);
    return n;
}

/* One in-process measure: the work's CPU time at hz (0: sampling off). */
static double in_process(uint64_t n, const char *hz, long *samples, char *why, size_t len)
{
    config("sampling", hz);
    if (mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK) {
        fprintf(stderr, "bench_stacks: %s\n", mlprof_last_error());
        exit(1);
    }
    double t0 = cpu_ns();
    work(n);
    double t = cpu_ns() - t0;
    mlprof_set_state(MLPROF_STATE_STOP); /* the reader's last drain: not timed */
    *samples = strcmp(hz, "0") ? samples_so_far(why, len) : 0;
    mlprof_clear();
    return t;
}

/* A child's CPU time (its own and its waited children's): argv run. */
static double child(char *const argv[], int quiet, int *ok)
{
    double t0 = children_ns();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (quiet && (!freopen("/dev/null", "w", stderr) || !freopen("/dev/null", "w", stdout)))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    *ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return children_ns() - t0;
}

static int child_main(int argc, char **argv)
{
    uint64_t n = strtoull(argv[2], NULL, 10);
    if (argc == 5) {
        config("sampling", argv[3]);
        config("filename", argv[4]);
        if (mlprof_set_state(MLPROF_STATE_RUN) != MLPROF_OK)
            return 1;
    }
    work(n);
    return argc == 5 && mlprof_dump(1) != MLPROF_OK;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--work") == 0)
        return child_main(argc, argv);
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 5;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fprintf(stderr, "bench_stacks: cannot read /proc/self/exe\n");
        return 1;
    }
    self[sl] = '\0';
    char dir[] = "/tmp/bench_stacks.XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_stacks: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char trace[4200], perf_data[4200];
    snprintf(trace, sizeof trace, "%s/child.json", dir);
    snprintf(perf_data, sizeof perf_data, "%s/perf.data", dir);
    config("filename", trace);

    /* calibrate: ~0.4 s of CPU */
    uint64_t n = 10000000;
    double t0 = cpu_ns();
    work(n);
    double per = (cpu_ns() - t0) / (double)n;
    n = (uint64_t)(0.4e9 / (per > 0 ? per : 1));
    char ns[32];
    snprintf(ns, sizeof ns, "%llu", (unsigned long long)n);

    const char *rates[2] = {"1000", "10000"};
    char why[256] = "";
    long samples;
    in_process(n / 10, "1000", &samples, why, sizeof why);
    if (samples < 0) {
        printf("bench_stacks: skipped: sampling is refused here: %s\n", why);
        return 0;
    }
    /* perf: usable when it records this program */
    char *perf_probe[] = {"/usr/bin/perf", "record", "-q", "-e", "cpu-clock:u", "-g", "-F", "1000", "-o",
                          perf_data, "--", self, "--work", "1000", NULL};
    int perf_ok = access("/usr/bin/perf", X_OK) == 0, ok;
    const char *perf_why = "/usr/bin/perf is not installed";
    if (perf_ok) {
        child(perf_probe, 1, &ok);
        perf_ok = ok;
        perf_why = "perf record fails here (perf_event_paranoid, or a kernel without the event)";
    }

    double in_ratio[2][MAX_ROUNDS], per_sample[2][MAX_ROUNDS], ml_ratio[2][MAX_ROUNDS], pf_ratio[2][MAX_ROUNDS];
    double ml_rate[2][MAX_ROUNDS], pf_rate[2][MAX_ROUNDS], demo_ratio[2][MAX_ROUNDS];
    /* the demo: cnn_infer beside this binary */
    char demo[4200], demo_trace[4200];
    snprintf(demo, sizeof demo, "%s", self);
    char *slash = strrchr(demo, '/');
    snprintf(slash ? slash + 1 : demo, sizeof demo - (size_t)(slash ? slash + 1 - demo : 0), "cnn_infer");
    snprintf(demo_trace, sizeof demo_trace, "%s/demo.json", dir);
    int demo_ok = access(demo, X_OK) == 0;
    char *demo_argv[] = {demo, NULL};
    double kept[2] = {0, 0};
    for (int r = 0; r < rounds; r++) {
        double base = in_process(n, "0", &samples, why, sizeof why);
        for (int k = 0; k < 2; k++) {
            double t = in_process(n, rates[k], &samples, why, sizeof why);
            in_ratio[k][r] = t / base;
            per_sample[k][r] = samples > 0 ? (t - base) / (double)samples : 0;
            kept[k] += (double)samples / rounds;
        }
        if (demo_ok) { /* the demo records its spans as usual; sampling off, then at each rate */
            setenv("MLPROF_FILENAME", demo_trace, 1);
            setenv("MLPROF_SAMPLING", "off", 1);
            double dbase = child(demo_argv, 1, &ok);
            demo_ok = ok;
            for (int k = 0; k < 2 && demo_ok; k++) {
                setenv("MLPROF_SAMPLING", rates[k], 1);
                demo_ratio[k][r] = child(demo_argv, 1, &ok) / dbase;
                demo_ok = ok;
            }
            unsetenv("MLPROF_SAMPLING");
            unsetenv("MLPROF_FILENAME");
            if (!demo_ok)
                fprintf(stderr, "bench_stacks: the demo %s failed: left out\n", demo);
        }
        char *plain[] = {self, "--work", ns, NULL};
        double cbase = child(plain, 0, &ok), ml_fixed = 0, pf_fixed = 0;
        for (int k = -1; k < 2; k++) {
            char *rate = k < 0 ? "1" : (char *)rates[k];
            char *ml[] = {self, "--work", ns, rate, trace, NULL};
            double t = child(ml, 1, &ok);
            if (!ok)
                fprintf(stderr, "bench_stacks: the child under mlprof failed\n");
            if (k < 0) {
                ml_fixed = t - cbase;
            } else {
                ml_ratio[k][r] = t / cbase;
                ml_rate[k][r] = (t - ml_fixed) / cbase;
            }
            if (perf_ok) {
                char *pf[] = {"/usr/bin/perf", "record", "-q", "-e", "cpu-clock:u", "-g", "-F", rate, "-o",
                              perf_data, "--", self, "--work", ns, NULL};
                t = child(pf, 1, &ok);
                if (!ok)
                    fprintf(stderr, "bench_stacks: perf record failed at %s Hz\n", rate);
                if (k < 0) {
                    pf_fixed = t - cbase;
                } else {
                    pf_ratio[k][r] = t / cbase;
                    pf_rate[k][r] = (t - pf_fixed) / cbase;
                }
            }
        }
    }
    printf("bench_stacks: %d rounds of %.2f s of CPU each (a %d-deep call chain); CPU time as a ratio to the same "
           "work unsampled\n", rounds, n * per / 1e9, DEPTH);
    double m_in[2], m_ps[2], m_ml[2], m_pf[2], m_mlr[2], m_pfr[2];
    for (int k = 0; k < 2; k++) {
        m_in[k] = median(in_ratio[k], rounds);
        m_ps[k] = median(per_sample[k], rounds);
        m_ml[k] = median(ml_ratio[k], rounds);
        m_mlr[k] = median(ml_rate[k], rounds);
        m_pf[k] = perf_ok ? median(pf_ratio[k], rounds) : 0;
        m_pfr[k] = perf_ok ? median(pf_rate[k], rounds) : 0;
        printf("  %5s Hz: in process %.3fx (%.0f samples kept, %.2f us of CPU per sample)\n", rates[k], m_in[k],
               kept[k], m_ps[k] / 1e3);
        printf("           whole child under mlprof %.3fx (less its 1 Hz run's fixed cost %.3fx)", m_ml[k], m_mlr[k]);
        if (perf_ok)
            printf("; under perf record -g %.3fx (%.3fx)\n", m_pf[k], m_pfr[k]);
        else
            printf("\n");
    }
    if (!perf_ok)
        printf("  perf record: skipped: %s\n", perf_why);
    double m_demo[2] = {0, 0};
    if (demo_ok) {
        for (int k = 0; k < 2; k++)
            m_demo[k] = median(demo_ratio[k], rounds);
        printf("  the demo (cnn_infer), CPU time against its unsampled run: %.3fx at 1 kHz, %.3fx at 10 kHz\n",
               m_demo[0], m_demo[1]);
    } else {
        printf("  the demo: skipped: %s is not built (MLPROF_BUILD_EXAMPLES) or failed\n", demo);
    }
    printf("RESULT in_1k=%.4f in_10k=%.4f us_per_sample_1k=%.3f us_per_sample_10k=%.3f child_mlprof_1k=%.4f "
           "child_mlprof_10k=%.4f perf_1k=%.4f perf_10k=%.4f rate_mlprof_1k=%.4f rate_mlprof_10k=%.4f "
           "rate_perf_1k=%.4f rate_perf_10k=%.4f demo_1k=%.4f demo_10k=%.4f\n",
           m_in[0], m_in[1], m_ps[0] / 1e3, m_ps[1] / 1e3, m_ml[0], m_ml[1], m_pf[0], m_pf[1], m_mlr[0], m_mlr[1],
           m_pfr[0], m_pfr[1], m_demo[0], m_demo[1]);
    unlink(trace);
    unlink(demo_trace);
    unlink(perf_data);
    char old[4300];
    snprintf(old, sizeof old, "%s.old", perf_data);
    unlink(old);
    rmdir(dir);
    return 0;
}
