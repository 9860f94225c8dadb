/*
 * test_sampler.c - the sampler thread and the back-ends it reads, one run
 * each, every run its own trace (check_trace.py, area "sampler", reads them):
 *   process  cpu, rss and perf counters of the whole process at 5 ms, with
 *            the per-span "rss" observer on a span that grows the heap;
 *   rapl     a powercap tree made here, whose energy counters a thread moves
 *            at exactly 50 W and 20 W of the monotonic clock, wrapping often;
 *   nvml     the fake NVML library (fake_nvml.c): two GPUs, known readings;
 *   papi     PAPI events per span through the installed libpapi;
 * and the paths where a back-end is missing: no powercap tree, no NVML
 * library, no driver, no PAPI.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_cpu(uint64_t ns)
{
    uint64_t c0 = thread_cpu_ns();
    volatile uint64_t x = 0;
    while (thread_cpu_ns() - c0 < ns)
        x++;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One run: configuration pairs (NULL-terminated), then body(), then a final dump. */
static void run(const char *trace, const char *const *kv, void (*body)(void))
{
    CHECK_OK(mlprof_set_config("filename", tu_path(trace)));
    for (size_t i = 0; kv[i]; i += 2)
        CHECK_OK(mlprof_set_config(kv[i], kv[i + 1]));
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    body();
    CHECK_OK(mlprof_dump(1));
}

/* ------------------------------------------------------------ process */

#define GROW (64u << 20)
static char *g_grown;

/* The resident set as the test reads it itself (under a sanitizer it counts
 * the shadow memory of what is touched too). */
static long long rss_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &resident) != 2)
            resident = -1;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

/* Time the hypervisor took from this machine's CPUs (all of them, from
 * /proc/stat), in ns: perf's task-clock counts it as time on the CPU, the
 * kernel's CPU times do not, so checks that compare them allow for it. */
static uint64_t steal_ns(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]) != 8)
            v[7] = 0;
        fclose(f);
    }
    return (uint64_t)v[7] * (1000000000u / (uint64_t)sysconf(_SC_CLK_TCK));
}

static uint64_t process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins for 200 ms of this thread's CPU time, writing down every millisecond
 * the process's CPU time with mlprof's clock: what the sampler's cpu and
 * task-clock series must add up to, whatever else the machine is doing. */
static void spin_and_watch(void)
{
    enum { MAX = 4000 };
    static uint64_t at[MAX], cpu[MAX];
    size_t n = 0;
    uint64_t steal0 = steal_ns();
    uint64_t c0 = thread_cpu_ns(), last = 0;
    while (thread_cpu_ns() - c0 < 200000000u) {
        uint64_t now = mlprof_now_ns();
        if (n < MAX && now - last >= 1000000u) {
            at[n] = now;
            cpu[n++] = process_cpu_ns();
            last = now;
        }
    }
    printf("watch_steal_ns=%llu\n", (unsigned long long)(steal_ns() - steal0));
    /* a sanitizer's runtime has a thread of its own, started before main: the
     * process's CPU clock counts it, perf's inherited task-clock cannot */
    printf("watch_sanitized=%d\n", TU_SANITIZED);
    printf("watch=");
    for (size_t i = 0; i < n; i++)
        printf("%s%llu:%llu", i ? "," : "", (unsigned long long)at[i], (unsigned long long)cpu[i]);
    printf("\n");
}

static void process_body(void)
{
    mlprof_domain *d = mlprof_domain_create("work");
    sleep_ms(40);
    uint64_t t0 = mlprof_now_ns();
    mlprof_begin_dynamic(d, "spin");
    spin_and_watch();
    mlprof_end_dynamic(d);
    uint64_t t1 = mlprof_now_ns();
    long long r0 = rss_now();
    mlprof_begin_dynamic(d, "grow");
    g_grown = malloc(GROW);
    CHECK(g_grown != NULL, "malloc");
    memset(g_grown, 1, GROW);
    mlprof_end_dynamic(d);
    long long r1 = rss_now();
    sleep_ms(40);
    printf("spin_from_ns=%llu spin_to_ns=%llu grow_bytes=%u rss_change=%lld\n", (unsigned long long)t0,
           (unsigned long long)t1, GROW, r1 - r0);
}

/* --------------------------------------------------------------- rapl */

typedef struct fake_zone {
    char path[1024];
    double watts;
    uint64_t max_uj;
} fake_zone;

static fake_zone g_zones[2];
static uint64_t g_rapl_t0;
static int g_rapl_stop;
static uint64_t g_rapl_max_gap; /* the longest time between two writes: how stale a read can be */

static void write_at0(const char *path, uint64_t v)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%020llu\n", (unsigned long long)v); /* same width: rewritten in place */
    if (pwrite(fd, buf, (size_t)n, 0) != n)
        perror("pwrite");
    close(fd);
}

static void *rapl_writer(void *arg)
{
    (void)arg;
    uint64_t last = 0;
    while (!__atomic_load_n(&g_rapl_stop, __ATOMIC_RELAXED)) {
        uint64_t now = mono_ns();
        double s = (double)(now - g_rapl_t0) * 1e-9;
        for (int i = 0; i < 2; i++) /* microjoules, wrapping past max as the hardware's do */
            write_at0(g_zones[i].path, (uint64_t)(g_zones[i].watts * s * 1e6) % (g_zones[i].max_uj + 1));
        /* on a loaded machine this thread waits its turn: a file read meanwhile is older
         * than its sample's time by up to the gap (from one write's clock to the next one's) */
        if (last && now - last > g_rapl_max_gap)
            g_rapl_max_gap = now - last;
        last = now;
        sleep_ms(1);
    }
    return NULL;
}

static void make_zone(const char *root, const char *dir, const char *name, double watts, uint64_t max_uj,
                      fake_zone *z)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/name", root, dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n", name);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", root, dir);
    f = fopen(path, "w");
    fprintf(f, "%llu\n", (unsigned long long)max_uj);
    fclose(f);
    snprintf(z->path, sizeof z->path, "%s/%s/energy_uj", root, dir);
    f = fopen(z->path, "w");
    fclose(f);
    write_at0(z->path, 0);
    z->watts = watts;
    z->max_uj = max_uj;
}

static void sleep_400(void) { sleep_ms(400); }
static void sleep_300(void) { sleep_ms(300); }
static void sleep_200(void) { sleep_ms(200); }
static void sleep_50(void) { sleep_ms(50); }

/* --------------------------------------------------------------- papi */

static void papi_body(void)
{
    mlprof_domain *d = mlprof_domain_create("work");
    uint64_t steal0 = steal_ns();
    uint64_t outer0 = thread_cpu_ns();
    mlprof_begin_dynamic(d, "spin");
    uint64_t c0 = thread_cpu_ns();
    spin_cpu(30000000u);
    uint64_t cpu = thread_cpu_ns() - c0;
    mlprof_end_dynamic(d);
    uint64_t outer = thread_cpu_ns() - outer0;
    /* the span's count lies between the spin's CPU time and the time around the span */
    printf("papi_spin_thread_cpu_ns=%llu papi_span_thread_cpu_ns=%llu papi_steal_ns=%llu\n", (unsigned long long)cpu,
           (unsigned long long)outer, (unsigned long long)(steal_ns() - steal0));
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    const char *fake_nvml = argc > 2 ? argv[2] : "";

    /* bad values name the item */
    CHECK(mlprof_set_config("sampler", "cpu,bogus") == MLPROF_EVALUE, "an unknown source");
    CHECK(strstr(mlprof_last_error(), "unknown sampler source \"bogus\"") != NULL, "%s", mlprof_last_error());
    CHECK(mlprof_set_config("sampler", "papi:PAPI_TOT_INS") == MLPROF_EVALUE, "PAPI is per span only");
    CHECK(mlprof_set_config("sampler", "cpu,cpu") == MLPROF_EVALUE, "a source twice");
    CHECK(mlprof_set_config("sampler_period", "0") == MLPROF_EVALUE, "a period of 0");
    CHECK(mlprof_set_config("counters", "rss,rss") == MLPROF_EVALUE, "rss twice");
    CHECK(mlprof_set_config("counters", "cpu") == MLPROF_EVALUE, "cpu is a sampler source");
    CHECK(mlprof_set_config("counters", "papi:AN_EVENT_NAME_THAT_IS_MUCH_TOO_LONG_FOR_ANY_PAPI_EVENT_0123456789")
              == MLPROF_EVALUE, "a PAPI name too long");

    static const char *const process_kv[] = {"sampler", "cpu,rss,task-clock,page-faults,cycles",
                                             "sampler_period", "0.005", "counters", "rss", NULL};
    run("sampler_process.json", process_kv, process_body);
    free(g_grown);

    /* a powercap tree: package-0 at 50 W wrapping every 0.4 s, its core at 20 W */
    char root[1024];
    snprintf(root, sizeof root, "%s", tu_path("powercap"));
    mkdir(root, 0755);
    make_zone(root, "intel-rapl:0", "package-0", 50, 20000000, &g_zones[0]);
    make_zone(root, "intel-rapl:0:0", "core", 20, 5000000, &g_zones[1]);
    g_rapl_t0 = mono_ns();
    pthread_t writer;
    pthread_create(&writer, NULL, rapl_writer, NULL);
    sleep_ms(5);
    const char *rapl_kv[] = {"sampler", "rapl", "sampler_period", "0.01", "counters", "", "powercap_dir", root, NULL};
    run("sampler_rapl.json", rapl_kv, sleep_400);
    __atomic_store_n(&g_rapl_stop, 1, __ATOMIC_RELAXED);
    pthread_join(writer, NULL);
    printf("rapl_writer_max_gap_ns=%llu\n", (unsigned long long)g_rapl_max_gap);

    /* 40 periods, of which the test wants 2 sampled however loaded the machine is */
    static const char *const no_rapl_kv[] = {"sampler", "rapl,cpu", "sampler_period", "0.005", "powercap_dir",
                                             "/nonexistent/powercap", NULL};
    run("sampler_rapl_missing.json", no_rapl_kv, sleep_200);

    const char *nvml_kv[] = {"sampler", "nvml", "sampler_period", "0.01", "nvml_library", fake_nvml, NULL};
    run("sampler_nvml.json", nvml_kv, sleep_300);
    static const char *const no_nvml_kv[] = {"nvml_library", "/nonexistent/libnvidia-ml.so.1", NULL};
    run("sampler_nvml_missing.json", no_nvml_kv, sleep_50);
    setenv("FAKE_NVML_FAIL", "1", 1);
    const char *no_driver_kv[] = {"nvml_library", fake_nvml, NULL};
    run("sampler_nvml_nodriver.json", no_driver_kv, sleep_50);

    static const char *const no_papi_kv[] = {"sampler", "", "counters", "papi:perf::TASK-CLOCK", "papi_library",
                                             "/nonexistent/libpapi.so", NULL};
    run("papi_missing.json", no_papi_kv, papi_body);
    const char *papi_kv[] = {"counters", "papi:perf::TASK-CLOCK,papi:PAPI_TOT_INS,papi:NO_SUCH_EVENT",
                             "papi_library", "libpapi.so", "stats_file", tu_path("papi_stats.json"), NULL};
    run("papi.json", papi_kv, papi_body);
    return tu_finish("test_sampler");
}
