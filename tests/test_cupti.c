/*
 * test_cupti.c - GPU activity through a fake libcupti (fake_cupti.c): the
 * records a CUDA program would produce are written by hand, at known times,
 * and check_trace.py (area "cupti") reads the trace mlprof made of them.
 *
 * usage: test_cupti OUTDIR MODE LIBCUPTI
 *   main       every kind of record, linked to the CPU spans around the launch
 *   functions  gpu_functions=cudaLaunchKernel,cudaNoSuchFunction
 *   missing    cupti_library that does not exist
 *   nodriver   enabling fails (run with FAKE_CUPTI_NO_DRIVER=1)
 *   real       the libcupti of this machine, if any, without a GPU
 *   metrics    per-kernel metrics through the fake's range profiler
 *   subscribed metrics asked for while another client holds CUPTI's
 *              callbacks (run with FAKE_CUPTI_SUBSCRIBED=1)
 *   realmetrics  metrics with this machine's libcupti, if any, without a GPU
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static struct {
    uint64_t (*now)(void);
    int (*enabled)(uint32_t);
    int (*runtime_api_enabled)(uint32_t);
    int (*driver_api_enabled)(uint32_t);
    int (*thread_id_type)(void);
    void (*drop)(size_t);
    void (*complete_async)(void);
    void (*api)(int, uint32_t, uint64_t, uint64_t, uint32_t, uint32_t);
    void (*kernel)(const char *, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t, const int32_t *, const int32_t *,
                   uint16_t, int32_t, int32_t, uint32_t);
    void (*memcpy_)(uint8_t, uint8_t, uint8_t, uint64_t, uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t);
    void (*memset_)(uint64_t, uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t);
    void (*sync)(uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t);
    void (*device_h100)(uint32_t, uint32_t);
    void *(*context)(uint32_t);
    void (*kernel_values)(const char *, double, double, double, double, double, double, double, double);
    void (*launch)(void *, int, const char *, uint32_t, int);
    void (*context_destroy)(void *);
    int (*profilers)(void);
    int (*started)(void *);
    int (*decodes)(void);
    void (*launch_half)(void *, const char *, uint32_t, int);
} F;

enum { RUNTIME = 0, DRIVER = 1 };
enum { CB_CU_MEMCPY_HTOD = 279 }; /* the driver's, as fake_cupti.c names it */
enum { CB_MALLOC = 20, CB_MEMCPY = 31, CB_MEMSET = 51, CB_STREAM_SYNC = 131, CB_LAUNCH = 211, CB_GRAPH_LAUNCH = 311,
       CB_CU_LAUNCH = 307 };

static uint32_t gettid_(void) { return (uint32_t)syscall(SYS_gettid); }

/* Spins for us microseconds of the monotonic clock. */
static void spin_us(int us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < us * 1000L);
}

static int load_fake(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* the same object mlprof loads */
    if (!h) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    struct {
        const char *name;
        void **fn;
    } t[] = {{"fake_cupti_now", (void **)&F.now},
             {"fake_cupti_enabled", (void **)&F.enabled},
             {"fake_cupti_runtime_api_enabled", (void **)&F.runtime_api_enabled},
             {"fake_cupti_driver_api_enabled", (void **)&F.driver_api_enabled},
             {"fake_cupti_thread_id_type", (void **)&F.thread_id_type},
             {"fake_cupti_drop", (void **)&F.drop},
             {"fake_cupti_complete_async", (void **)&F.complete_async},
             {"fake_cupti_api", (void **)&F.api},
             {"fake_cupti_kernel", (void **)&F.kernel},
             {"fake_cupti_memcpy", (void **)&F.memcpy_},
             {"fake_cupti_memset", (void **)&F.memset_},
             {"fake_cupti_sync", (void **)&F.sync},
             {"fake_cupti_device_h100", (void **)&F.device_h100},
             {"fake_cupti_context", (void **)&F.context},
             {"fake_cupti_kernel_values", (void **)&F.kernel_values},
             {"fake_cupti_launch", (void **)&F.launch},
             {"fake_cupti_context_destroy", (void **)&F.context_destroy},
             {"fake_cupti_profilers", (void **)&F.profilers},
             {"fake_cupti_started", (void **)&F.started},
             {"fake_cupti_decodes", (void **)&F.decodes},
             {"fake_cupti_launch_half", (void **)&F.launch_half}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        *t[i].fn = dlsym(h, t[i].name);
        if (!*t[i].fn) {
            fprintf(stderr, "%s has no %s\n", path, t[i].name);
            return -1;
        }
    }
    return 0;
}

/* A call of the runtime made now on this thread, lasting about us microseconds;
 * returns its end (CUPTI's clock). */
static uint64_t call(int driver, uint32_t cbid, uint32_t corr, int us, uint64_t *start)
{
    uint64_t a = F.now();
    spin_us(us);
    uint64_t b = F.now();
    F.api(driver, cbid, a, b, gettid_(), corr);
    if (start)
        *start = a;
    return b;
}

/* A thread without spans of its own that launches through the driver API. */
static void *worker(void *arg)
{
    (void)arg;
    uint64_t end = call(DRIVER, CB_CU_LAUNCH, 20, 10, NULL);
    static const int32_t grid[3] = {64, 64, 1}, block[3] = {16, 16, 1};
    F.kernel("gemm_kernel", 0, 8, 20, end + 2000, end + 502000, grid, block, 128, 48 * 1024, 0, 0);
    return NULL;
}

static void main_mode(void)
{
    F.device_h100(0, 1);
    CHECK(F.thread_id_type() == 1, "CUPTI asked for system thread ids");
    CHECK(F.enabled(10) && F.enabled(1) && F.enabled(2) && F.enabled(38) && F.enabled(5) && F.enabled(4),
          "kernels, copies, memsets, syncs, runtime and driver enabled");
    mlprof_domain *d = mlprof_domain_create("model");
    mlprof_span *forward = mlprof_task_create(d, "forward");
    mlprof_span *conv1 = mlprof_task_create(d, "conv1");
    mlprof_span *copy_in = mlprof_task_create(d, "copy_in");
    static const int32_t grid[3] = {1024, 1, 1}, block[3] = {256, 1, 1};

    mlprof_begin(forward);
    spin_us(50);
    mlprof_begin(conv1);
    spin_us(50);
    uint64_t end = call(RUNTIME, CB_LAUNCH, 10, 20, NULL);
    F.kernel("_Z10vector_addPKfS0_Pfi", 0, 7, 10, end + 5000, end + 105000, grid, block, 32, 0, 0, 0);
    spin_us(50);
    mlprof_end(conv1);
    spin_us(50);
    mlprof_begin(copy_in);
    spin_us(50);
    end = call(RUNTIME, CB_MEMCPY, 11, 30, NULL);
    /* the copy's own id is its driver call's; the runtime's is beside it */
    F.memcpy_(1, 1, 3, 1 << 20, 0, 7, 12, 11, end - 20000, end - 2000);
    spin_us(50);
    mlprof_end(copy_in);
    spin_us(50);
    end = call(RUNTIME, CB_MEMSET, 13, 10, NULL);
    F.memset_(4096, 0, 0, 7, 13, end + 1000, end + 3000);
    spin_us(50);
    mlprof_end(forward);
    spin_us(50);
    uint64_t start;
    end = call(RUNTIME, CB_STREAM_SYNC, 14, 200, &start);
    F.sync(3, 1, 7, 14, start + 1000, end - 1000);

    /* a kernel whose launch was not recorded */
    F.kernel("_Z6orphanv", 0, 7, 99, end + 1000, end + 2000, grid, block, 16, 0, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);

    /* lost records are counted */
    F.drop(5);
    F.complete_async(); /* a full buffer handed back on CUPTI's thread */
    CHECK_OK(mlprof_dump(0));

    /* pause: activities off; resume: on again */
    CHECK_OK(mlprof_pause());
    CHECK(!F.enabled(10) && !F.enabled(5), "paused: kernels and runtime off");
    CHECK_OK(mlprof_resume());
    CHECK(F.enabled(10) && F.enabled(5), "resumed: on again");

    /* a kernel that comes in a buffer before its launch's, a drain apart */
    mlprof_span *step2 = mlprof_task_create(d, "step2");
    mlprof_begin(step2);
    spin_us(50);
    uint64_t a = F.now();
    spin_us(20);
    uint64_t b = F.now();
    F.kernel("late_launch", 0, 7, 30, b + 1000, b + 11000, grid, block, 32, 0, 0, 0);
    F.complete_async();
    CHECK_OK(mlprof_dump(0));
    F.api(RUNTIME, CB_LAUNCH, a, b, gettid_(), 30);
    spin_us(50);
    mlprof_end(step2);

    /* still running at the final dump */
    F.kernel("_Z7runningv", 0, 7, 40, b + 20000, 0, grid, block, 32, 0, 0, 0);
    CHECK_OK(mlprof_dump(1));
}

static void functions_mode(void)
{
    CHECK(F.runtime_api_enabled(CB_LAUNCH) && !F.runtime_api_enabled(CB_MEMCPY), "cudaLaunchKernel alone, by id");
    CHECK(!F.enabled(5), "not every runtime call");
    /* gpu=on: the driver's launching calls, one by one, not every driver call */
    CHECK(F.driver_api_enabled(CB_CU_LAUNCH) && !F.driver_api_enabled(CB_CU_MEMCPY_HTOD) && !F.enabled(6),
          "cuLaunchKernel alone of the driver's calls");
    mlprof_domain *d = mlprof_domain_create("model");
    mlprof_span *step = mlprof_task_create(d, "step");
    static const int32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    mlprof_begin(step);
    spin_us(50);
    uint64_t end = call(RUNTIME, CB_LAUNCH, 1, 10, NULL);
    F.kernel("k", 0, 7, 1, end + 1000, end + 2000, grid, block, 8, 0, 0, 0);
    call(RUNTIME, CB_MALLOC, 2, 10, NULL); /* not chosen: not written */
    /* a kernel launched through the driver (as cuBLASLt's): linked to the
     * span around its launch, the call itself not written (not chosen) */
    end = call(DRIVER, CB_CU_LAUNCH, 3, 10, NULL);
    F.kernel("k_driver", 0, 7, 3, end + 1000, end + 2000, grid, block, 8, 0, 0, 0);
    spin_us(50);
    mlprof_end(step);
    CHECK_OK(mlprof_dump(1));
}

/* How fake_cupti_launch launches. */
enum { VIA_RUNTIME = 0, RUNTIME_ONLY = 1, VIA_DRIVER = 2, GRAPH = 3, FAILING = 4, CAPTURED = 5 };
#define GEMM "_Z4gemmPKfS0_Pfi"
#define REDUCE "_Z6reducePKfPfi"

static void *metrics_worker(void *ctx)
{
    F.launch(ctx, VIA_RUNTIME, GEMM, 160, 1); /* a thread without spans */
    return NULL;
}

static void *overlapping_worker(void *ctx)
{
    F.launch(ctx, VIA_RUNTIME, REDUCE, 220, 1);
    return NULL;
}

/* gpu_metrics_batch is 4: the fifth launch makes the launching thread
 * evaluate the first four (see check_trace.py's cupti_metrics). */
static void metrics_mode(void)
{
    /* fma, add, mul, DRAM read and written, GPU ns, warps active %, branch efficiency % */
    F.kernel_values(GEMM, 1e6, 2e5, 1e5, 4e6, 1e6, 50000, 62.5, 100);
    F.kernel_values(REDUCE, 0, 1e6, 0, 8e6, 1e3, 20000, 40, 87.5);
    F.kernel_values("copy_kernel", 0, 0, 0, 16777216, 16777216, 10000, 80, 100);
    void *ctx = F.context(0);
    mlprof_domain *d = mlprof_domain_create("model");
    mlprof_span *forward = mlprof_task_create(d, "forward");
    mlprof_span *matmul = mlprof_task_create(d, "matmul");
    mlprof_span *reduce = mlprof_task_create(d, "reduce");

    mlprof_begin(forward);
    mlprof_begin(matmul);
    for (uint32_t i = 0; i < 3; i++) {
        spin_us(20);
        F.launch(ctx, VIA_RUNTIME, GEMM, 100 + 2 * i, 1);
    }
    CHECK(F.profilers() == 1 && F.started(ctx) == 1, "the context's range profiler set up at its first launch");
    spin_us(20);
    mlprof_end(matmul);
    mlprof_begin(reduce);
    spin_us(20);
    F.launch(ctx, VIA_DRIVER, REDUCE, 110, 1);
    spin_us(20);
    mlprof_end(reduce);
    spin_us(20);
    CHECK(F.decodes() == 0, "nothing decoded before the batch is full");
    F.launch(ctx, VIA_RUNTIME, "copy_kernel", 120, 1);
    CHECK(F.decodes() == 1 && F.started(ctx) == 1, "a full batch decoded by the launching thread, and restarted");
    spin_us(20);
    CHECK_OK(mlprof_dump(0)); /* the first four written; the copy's operator asked for already */
    F.launch(ctx, RUNTIME_ONLY, REDUCE, 130, 1);
    spin_us(20);
    uint64_t graph_at = F.now();
    F.launch(ctx, GRAPH, NULL, 140, 3);
    uint64_t graph_end = F.now();
    F.api(RUNTIME, CB_GRAPH_LAUNCH, graph_at, graph_end, gettid_(), 140);
    spin_us(20);
    F.complete_async();
    CHECK_OK(mlprof_dump(0)); /* the graph launch's operators are read in this drain */
    mlprof_end(forward);
    /* its kernels' activity records come drains later, all with the launch's id */
    static const int32_t grid[3] = {8, 1, 1}, block[3] = {128, 1, 1};
    CHECK_OK(mlprof_dump(0));
    for (uint64_t k = 0; k < 3; k++)
        F.kernel("graph_node", 0, 7, 140, graph_end + 1000 + 10000 * k, graph_end + 6000 + 10000 * k, grid, block, 32,
                 0, 0, 0);

    CHECK(F.decodes() == 3, "a graph's launch is a batch of its own: decoded before and after it");
    CHECK_OK(mlprof_pause());
    CHECK(F.started(ctx) == 0 && F.decodes() == 4, "paused: stopped and decoded");
    F.launch(ctx, VIA_RUNTIME, GEMM, 150, 1); /* not measured */
    CHECK_OK(mlprof_resume());
    CHECK(F.started(ctx) == 1, "resumed: started again");
    pthread_t t;
    pthread_create(&t, NULL, metrics_worker, ctx);
    pthread_join(t, NULL);

    void *ctx1 = F.context(1);
    mlprof_begin(forward);
    F.launch(ctx1, VIA_RUNTIME, GEMM, 170, 1);
    spin_us(20);
    mlprof_end(forward);
    F.context_destroy(ctx1);
    CHECK(F.profilers() == 1, "a context's profiler evaluated and disabled before the context goes");
    /* a failed launch makes no range and is left out; a launch into a
     * capturing stream makes none either, which leaves its batch unmatched */
    void *ctx2 = F.context(1), *ctx3 = F.context(2);
    F.launch(ctx2, FAILING, GEMM, 180, 1);
    F.launch(ctx2, VIA_RUNTIME, REDUCE, 185, 1);
    F.launch(ctx3, CAPTURED, GEMM, 190, 1);
    F.launch(ctx3, VIA_RUNTIME, GEMM, 200, 1);
    /* two threads' launches overlap on one context: which range is whose is
     * not known, and the other contexts are left alone */
    void *ctx4 = F.context(0); /* a second context of device 0, its session running */
    F.launch_half(ctx4, GEMM, 210, 0);
    pthread_create(&t, NULL, overlapping_worker, ctx4);
    pthread_join(t, NULL);
    F.launch_half(ctx4, GEMM, 210, 1);
    CHECK_OK(mlprof_dump(1));
    CHECK(F.started(ctx) == 0 && F.started(ctx2) == 0 && F.started(ctx3) == 0, "stopped at the final dump");
}

/* Without CUPTI (or without a driver) the run goes on: a span is recorded. */
static void plain_mode(void)
{
    mlprof_domain *d = mlprof_domain_create("model");
    mlprof_span *step = mlprof_task_create(d, "step");
    mlprof_begin(step);
    spin_us(100);
    mlprof_end(step);
    CHECK_OK(mlprof_dump(1));
}

int main(int argc, char **argv)
{
    tu_init(argc, argv);
    if (argc < 4) {
        fprintf(stderr, "usage: test_cupti OUTDIR MODE LIBCUPTI\n");
        return 2;
    }
    const char *mode = argv[2], *lib = argv[3];
    int fake = !strcmp(mode, "main") || !strcmp(mode, "functions") || !strcmp(mode, "nodriver") ||
               !strcmp(mode, "metrics") || !strcmp(mode, "subscribed");
    int metrics = !strcmp(mode, "metrics") || !strcmp(mode, "subscribed") || !strcmp(mode, "realmetrics");
    if (fake && load_fake(lib) != 0)
        return 1;
    char name[256];
    snprintf(name, sizeof name, "cupti_%s.json", mode);
    CHECK_OK(mlprof_set_config("filename", tu_path(name)));
    CHECK_OK(mlprof_set_config("gpu", !strcmp(mode, "main") ? "all" : "on"));
    CHECK_OK(mlprof_set_config("gpu_details", "occupancy"));
    if (strcmp(mode, "real") != 0 && strcmp(mode, "realmetrics") != 0)
        CHECK_OK(mlprof_set_config("cupti_library", lib));
    if (metrics) {
        CHECK_OK(mlprof_set_config("gpu_metrics", "roofline,tensor,bogus__metric.sum"));
        CHECK_OK(mlprof_set_config("gpu_details", "occupancy,achieved_occupancy,branch_efficiency"));
        CHECK_OK(mlprof_set_config("gpu_metrics_batch", "4"));
        CHECK(mlprof_set_config("gpu_metrics", "flops,DRAM") == MLPROF_EVALUE, "a bad metric name is refused");
        CHECK(mlprof_set_config("gpu_details", "occupancy,warp_divergence") == MLPROF_EVALUE,
              "a bad detail is refused");
    }
    if (!strcmp(mode, "functions"))
        CHECK_OK(mlprof_set_config("gpu_functions", "cudaLaunchKernel,cudaNoSuchFunction"));
    CHECK(mlprof_set_config("gpu", "kernels") == MLPROF_EVALUE, "a bad activity is refused");
    CHECK(mlprof_set_config("gpu_functions", "launch") == MLPROF_EVALUE, "a bad function name is refused");
    CHECK_OK(mlprof_set_state(MLPROF_STATE_RUN));
    if (!strcmp(mode, "main"))
        main_mode();
    else if (!strcmp(mode, "functions"))
        functions_mode();
    else if (!strcmp(mode, "metrics"))
        metrics_mode();
    else
        plain_mode();
    return tu_finish("test_cupti");
}
