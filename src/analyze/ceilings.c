/*
 * ceilings.c - measures this machine's ceilings for the roofline: the peak
 * FLOP/s of FMA kernels (the widest vectors cpuid offers, chosen at run time,
 * with enough independent accumulators to hide the FMA latency) and the
 * bandwidth of a STREAM triad (a[i] = b[i] + s * c[i], counted as 24 bytes
 * and 2 FLOPs per fp64 element, as STREAM does: write-allocate traffic is not
 * counted) over working sets from L1 to DRAM, on one thread and on all
 * threads (pinned where the affinity mask allows). Each rate is measured
 * several times; the spread is kept. The results live in a JSON cache file.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CE_X86 1
#endif

#include "ceilings.h"
#include "json.h"

#define CE_FORMAT "mlprof-ceilings-1"
#define CE_MAX_THREADS 1048576 /* threads, repeats: a count read from a file stays an int */
#define CE_ACC 12 /* accumulators: FMA latency 4-5 cycles times 2 ports, with room */

/* Twelve named accumulators, each step written out: an array indexed in a
 * loop may be kept in memory, and a store-load on every FMA is a chain of
 * its own. STEP(i) is one FMA on accumulator i. */
#define CE_DECLARE(T, init)                                                                                \
    T x0 = init(0), x1 = init(1), x2 = init(2), x3 = init(3), x4 = init(4), x5 = init(5), x6 = init(6),     \
      x7 = init(7), x8 = init(8), x9 = init(9), x10 = init(10), x11 = init(11)
#define CE_ROUND(F)                                                                                        \
    do {                                                                                                   \
        x0 = F(x0); x1 = F(x1); x2 = F(x2); x3 = F(x3); x4 = F(x4); x5 = F(x5);                            \
        x6 = F(x6); x7 = F(x7); x8 = F(x8); x9 = F(x9); x10 = F(x10); x11 = F(x11);                        \
    } while (0)
#define CE_SUM(ADD) ADD(ADD(ADD(ADD(x0, x1), ADD(x2, x3)), ADD(ADD(x4, x5), ADD(x6, x7))), ADD(ADD(x8, x9), ADD(x10, x11)))

/* ------------------------------------------------------------- kernels */

/* Each kernel runs iters rounds of CE_ACC independent FMA chains and returns
 * a value that depends on all of them (so nothing is optimised away). x
 * converges to 1 (x = x * m + (1 - m)): no overflow, no denormals. */

#ifdef CE_X86
/* One kernel: FN for vector type V of LANES elements of S (float or double),
 * with the ISA's add and storeu, and its set1 and fmadd as CE_SET1 and
 * CE_FMADD; m and c the step's constants. */
#define CE_FMA_KERNEL(FN, TARGET, V, S, LANES, ADDV, STOREU, M, C)                                         \
    __attribute__((target(TARGET))) static double FN(long iters)                                          \
    {                                                                                                      \
        const V m = CE_SET1(M), c = CE_SET1(C);                                                            \
        CE_DECLARE(V, CE_INIT_##S);                                                                        \
        for (long i = 0; i < iters; i++)                                                                   \
            CE_ROUND(CE_STEP);                                                                             \
        S out[LANES];                                                                                      \
        STOREU(out, CE_SUM(ADDV));                                                                         \
        double sum = 0;                                                                                    \
        for (int j = 0; j < LANES; j++)                                                                    \
            sum += out[j];                                                                                 \
        return sum;                                                                                        \
    }
#define CE_STEP(x) CE_FMADD(x, m, c)

#define CE_INIT_double(k) CE_SET1(1.0 + (k) * 1e-3)
#define CE_INIT_float(k) CE_SET1(1.0f + (float)(k) * 1e-3f)

#define CE_SET1 _mm512_set1_pd
#define CE_FMADD _mm512_fmadd_pd
CE_FMA_KERNEL(fma_avx512_f64, "avx512f", __m512d, double, 8, _mm512_add_pd, _mm512_storeu_pd, 0.999999, 1e-6)
#undef CE_SET1
#undef CE_FMADD
#define CE_SET1 _mm512_set1_ps
#define CE_FMADD _mm512_fmadd_ps
CE_FMA_KERNEL(fma_avx512_f32, "avx512f", __m512, float, 16, _mm512_add_ps, _mm512_storeu_ps, 0.9999f, 1e-4f)
#undef CE_SET1
#undef CE_FMADD
#define CE_SET1 _mm256_set1_pd
#define CE_FMADD _mm256_fmadd_pd
CE_FMA_KERNEL(fma_avx2_f64, "avx2,fma", __m256d, double, 4, _mm256_add_pd, _mm256_storeu_pd, 0.999999, 1e-6)
#undef CE_SET1
#undef CE_FMADD
#define CE_SET1 _mm256_set1_ps
#define CE_FMADD _mm256_fmadd_ps
CE_FMA_KERNEL(fma_avx2_f32, "avx2,fma", __m256, float, 8, _mm256_add_ps, _mm256_storeu_ps, 0.9999f, 1e-4f)
#undef CE_SET1
#undef CE_FMADD

/* The triad over n elements (n a multiple of 8), passes times. */
__attribute__((target("avx512f"))) static void triad_avx512(double *a, const double *b, const double *c, size_t n,
                                                            long passes)
{
    const __m512d s = _mm512_set1_pd(0.5);
    for (long p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i += 8)
            _mm512_store_pd(a + i, _mm512_fmadd_pd(s, _mm512_load_pd(c + i), _mm512_load_pd(b + i)));
        __asm__ volatile("" ::: "memory"); /* each pass really stores */
    }
}

__attribute__((target("avx2,fma"))) static void triad_avx2(double *a, const double *b, const double *c, size_t n,
                                                           long passes)
{
    const __m256d s = _mm256_set1_pd(0.5);
    for (long p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i += 4)
            _mm256_store_pd(a + i, _mm256_fmadd_pd(s, _mm256_load_pd(c + i), _mm256_load_pd(b + i)));
        __asm__ volatile("" ::: "memory");
    }
}
#endif

/* The fallbacks: plain C, scalar chains (one FLOP pair per multiply-add
 * whether or not the compiler fuses it). */
static double fma_scalar_f64(long iters)
{
#define INIT(k) (1.0 + (k) * 1e-3)
#define STEP(x) ((x) * 0.999999 + 1e-6)
#define ADD(a, b) ((a) + (b))
    CE_DECLARE(double, INIT);
    for (long i = 0; i < iters; i++)
        CE_ROUND(STEP);
    double sum = CE_SUM(ADD);
#undef INIT
#undef STEP
#undef ADD
    return sum;
}

static double fma_scalar_f32(long iters)
{
#define INIT(k) (1.0f + (float)(k) * 1e-3f)
#define STEP(x) ((x) * 0.9999f + 1e-4f)
#define ADD(a, b) ((a) + (b))
    CE_DECLARE(float, INIT);
    for (long i = 0; i < iters; i++)
        CE_ROUND(STEP);
    double sum = CE_SUM(ADD);
#undef INIT
#undef STEP
#undef ADD
    return sum;
}

static void triad_scalar(double *a, const double *b, const double *c, size_t n, long passes)
{
    for (long p = 0; p < passes; p++) {
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] + 0.5 * c[i];
        __asm__ volatile("" ::: "memory");
    }
}

typedef double (*fma_fn)(long iters);
typedef void (*triad_fn)(double *a, const double *b, const double *c, size_t n, long passes);

typedef struct kernels {
    const char *isa;
    fma_fn f64, f32;
    int lanes64; /* fp64 lanes per FMA */
    triad_fn triad;
} kernels;

static kernels pick_kernels(void)
{
#ifdef CE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return (kernels){"avx512f", fma_avx512_f64, fma_avx512_f32, 8, triad_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (kernels){"avx2+fma", fma_avx2_f64, fma_avx2_f32, 4, triad_avx2};
#endif
    return (kernels){"scalar", fma_scalar_f64, fma_scalar_f32, 1, triad_scalar};
}

/* ------------------------------------------------------------- threads */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One measurement job run by n threads at once, `repeats` times: each
 * repeat starts on a barrier and ends on one. Its time runs from the first
 * thread's start to the last one's end, as the threads read the clock: the
 * slowest thread sets the rate, and a main thread that is preempted between
 * the barrier and its clock cannot shorten it (it did, on a loaded machine:
 * rates 4x the median). */
typedef struct job {
    int nthreads, repeats;
    pthread_barrier_t start, end;
    int cpus[CPU_SETSIZE];
    int ncpus, pinned_all;
    /* what a thread does: FMA chains, or the triad over its own arrays */
    fma_fn fma;
    long iters;
    triad_fn triad;
    size_t n; /* elements per array per thread */
    long passes;
    int failed; /* a thread could not allocate: its rate would be a lie */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    int gate; /* 0 closed, 1 run, 2 leave (a thread could not start) */
    volatile double sink;
} job;

typedef struct worker {
    job *j;
    int index;
    pthread_t th;
    double t0[64], t1[64]; /* each repeat's start and end, on this thread */
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    job *j = w->j;
    pthread_mutex_lock(&j->gate_mu);
    while (j->gate == 0)
        pthread_cond_wait(&j->gate_cv, &j->gate_mu);
    int leave = j->gate == 2;
    pthread_mutex_unlock(&j->gate_mu);
    if (leave)
        return NULL;
    if (j->ncpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(j->cpus[w->index % j->ncpus], &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            __atomic_store_n(&j->pinned_all, 0, __ATOMIC_RELAXED);
    }
    double *a = NULL, *b = NULL, *c = NULL;
    if (j->triad) {
        size_t bytes;
        /* a size that does not fit fails as no memory does (the barriers below are still met) */
        if (!__builtin_mul_overflow(j->n, sizeof(double), &bytes) && bytes <= SIZE_MAX - 63) {
            bytes = (bytes + 63) / 64 * 64;
            a = aligned_alloc(64, bytes);
            b = aligned_alloc(64, bytes);
            c = aligned_alloc(64, bytes);
        }
        if (!a || !b || !c) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        } else {
            /* first touch from the thread that uses them (NUMA) */
            for (size_t i = 0; i < j->n; i++) {
                a[i] = 0;
                b[i] = 1.0 + (double)(i & 7);
                c[i] = 2.0;
            }
        }
    }
    double sink = 0;
    for (int r = 0; r < j->repeats; r++) {
        pthread_barrier_wait(&j->start);
        w->t0[r] = now_s();
        if (j->fma)
            sink += j->fma(j->iters);
        else if (a && b && c)
            j->triad(a, b, c, j->n, j->passes);
        w->t1[r] = now_s();
        pthread_barrier_wait(&j->end);
    }
    if (a && b && c)
        sink += a[j->n / 2];
    free(a);
    free(b);
    free(c);
    if (w->index == 0)
        j->sink = sink;
    return NULL;
}

/* The CPUs this process may run on, in order. */
static int affinity_cpus(int *cpus, int max)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    int n = 0;
    for (int i = 0; i < CPU_SETSIZE && n < max; i++)
        if (CPU_ISSET(i, &set))
            cpus[n++] = i;
    return n;
}

/* Runs the job; secs[r] receives each repeat's time. Returns 0, or -1. */
static int job_run(job *j, double *secs)
{
    worker *w = calloc((size_t)j->nthreads, sizeof *w);
    if (!w)
        return -1;
    j->ncpus = affinity_cpus(j->cpus, CPU_SETSIZE);
    j->pinned_all = j->ncpus > 0;
    j->failed = 0;
    pthread_barrier_init(&j->start, NULL, (unsigned)j->nthreads + 1);
    pthread_barrier_init(&j->end, NULL, (unsigned)j->nthreads + 1);
    pthread_mutex_init(&j->gate_mu, NULL);
    pthread_cond_init(&j->gate_cv, NULL);
    j->gate = 0;
    int started = 0, rc = 0;
    for (; started < j->nthreads; started++) {
        w[started].j = j;
        w[started].index = started;
        if (pthread_create(&w[started].th, NULL, worker_main, &w[started]) != 0)
            break;
    }
    /* the barriers count every thread: with one missing they would never
     * open, so the threads wait at the gate until all have started, or are
     * told to leave */
    pthread_mutex_lock(&j->gate_mu);
    j->gate = started < j->nthreads ? 2 : 1;
    pthread_cond_broadcast(&j->gate_cv);
    pthread_mutex_unlock(&j->gate_mu);
    if (started < j->nthreads)
        rc = -1;
    if (rc == 0) {
        for (int r = 0; r < j->repeats; r++) {
            pthread_barrier_wait(&j->start);
            pthread_barrier_wait(&j->end);
        }
    }
    for (int k = 0; k < started; k++)
        pthread_join(w[k].th, NULL);
    for (int r = 0; rc == 0 && r < j->repeats; r++) {
        double first = w[0].t0[r], last = w[0].t1[r];
        for (int k = 1; k < j->nthreads; k++) {
            first = w[k].t0[r] < first ? w[k].t0[r] : first;
            last = w[k].t1[r] > last ? w[k].t1[r] : last;
        }
        secs[r] = last - first;
    }
    pthread_barrier_destroy(&j->start);
    pthread_barrier_destroy(&j->end);
    pthread_mutex_destroy(&j->gate_mu);
    pthread_cond_destroy(&j->gate_cv);
    free(w);
    return rc == 0 && !j->failed ? 0 : -1;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

ce_stat ce_stat_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    ce_stat s = {v[0], n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[n - 1]};
    return s;
}

/* --------------------------------------------------------- measuring */

typedef struct ctx {
    const ce_options *o;
    kernels k;
    int threads;
    int unpinned;
} ctx;

/* The FMA peak of one precision on n threads, in FLOP/s. */
static int measure_fma(ctx *x, int f64, int nthreads, ce_point *p)
{
    job j;
    memset(&j, 0, sizeof j);
    j.fma = f64 ? x->k.f64 : x->k.f32;
    int lanes = f64 ? x->k.lanes64 : x->k.lanes64 * 2;
    /* iterations for the aimed time: from one short single-thread run */
    long iters = 1 << 14;
    for (;;) {
        double t0 = now_s();
        j.sink = j.fma(iters);
        double t = now_s() - t0;
        if (t > x->o->seconds / 8 || iters > (1L << 40))
            break;
        iters *= 4;
    }
    double t0 = now_s();
    j.sink = j.fma(iters);
    double t = now_s() - t0;
    j.iters = t > 0 ? (long)((double)iters * x->o->seconds / t) + 1 : iters;
    j.nthreads = nthreads;
    j.repeats = x->o->repeats + 1; /* the first warms up (clocks, vector units) */
    double secs[64];
    if (job_run(&j, secs) != 0)
        return -1;
    x->unpinned |= !j.pinned_all;
    double rates[64];
    double flops = 2.0 * CE_ACC * lanes * (double)j.iters * nthreads;
    for (int r = 1; r < j.repeats; r++)
        rates[r - 1] = flops / secs[r];
    memset(p, 0, sizeof *p);
    snprintf(p->what, sizeof p->what, "%s", f64 ? "fp64" : "fp32");
    p->threads = nthreads;
    p->s = ce_stat_of(rates, x->o->repeats);
    return 0;
}

/* The triad bandwidth with `total` bytes of working set over n threads (each
 * its own three arrays of total / n / 3 bytes), in bytes/s. */
static int measure_triad(ctx *x, double total, int nthreads, ce_point *p)
{
    job j;
    memset(&j, 0, sizeof j);
    j.triad = x->k.triad;
    size_t n = (size_t)(total / nthreads / 24);
    n = n / 8 * 8;
    if (n < 64)
        n = 64;
    j.n = n;
    /* passes for the aimed time: from one single-thread pass, timed */
    j.nthreads = 1;
    j.repeats = 2;
    j.passes = 1;
    double secs[64];
    for (;;) {
        if (job_run(&j, secs) != 0)
            return -1;
        if (secs[1] > x->o->seconds / 8 || j.passes > (1L << 40))
            break;
        j.passes *= 4;
    }
    j.passes = (long)((double)j.passes * x->o->seconds / (secs[1] > 0 ? secs[1] : 1e-9)) + 1;
    j.nthreads = nthreads;
    j.repeats = x->o->repeats + 1;
    if (job_run(&j, secs) != 0)
        return -1;
    x->unpinned |= !j.pinned_all;
    double rates[64];
    double bytes = 24.0 * (double)n * (double)j.passes * nthreads;
    for (int r = 1; r < j.repeats; r++)
        rates[r - 1] = bytes / secs[r];
    memset(p, 0, sizeof *p);
    p->threads = nthreads;
    p->bytes = 24.0 * (double)n * nthreads;
    p->s = ce_stat_of(rates, x->o->repeats);
    return 0;
}

/* The data caches sysfs lists for cpu0: levels and sizes (per instance), and
 * whether each is shared by several CPUs. Returns how many. */
typedef struct cache_level {
    int level;
    double bytes;
    int shared;
} cache_level;

static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static int data_caches(cache_level *out, int max)
{
    int n = 0;
    for (int i = 0; i < 16 && n < max; i++) {
        char path[128], type[32], level[16], size[32], shared[256];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (read_small(path, type, sizeof type) != 0)
            break;
        if (strcmp(type, "Instruction") == 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_small(path, level, sizeof level) != 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_small(path, size, sizeof size) != 0)
            continue;
        char *end;
        double b = strtod(size, &end);
        b *= *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1.0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/shared_cpu_list", i);
        int sh = read_small(path, shared, sizeof shared) == 0 && strpbrk(shared, ",-") != NULL;
        if (b <= 0)
            continue;
        out[n].level = atoi(level);
        out[n].bytes = b;
        out[n].shared = sh;
        n++;
    }
    return n;
}

void ce_options_default(ce_options *o)
{
    memset(o, 0, sizeof *o);
    o->repeats = 5;
    o->seconds = 0.03;
}

void ce_machine(char *cpu, size_t len, int *threads)
{
    snprintf(cpu, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Model", 5) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(cpu, len, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    if (f)
        fclose(f);
    int cpus[CPU_SETSIZE];
    int n = affinity_cpus(cpus, CPU_SETSIZE);
    if (n <= 0)
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    *threads = n > 0 ? n : 1;
}

static void say(const ce_options *o, const char *what)
{
    if (o->progress) {
        fprintf(o->progress, "mlprof ceilings: measuring %s\n", what);
        fflush(o->progress);
    }
}

int ce_measure(ce_ceilings *c, const ce_options *o, char *err, size_t len)
{
    memset(c, 0, sizeof *c);
    ctx x = {o, pick_kernels(), 0, 0};
    ce_machine(c->cpu, sizeof c->cpu, &x.threads);
    c->threads = x.threads;
    c->repeats = o->repeats;
    snprintf(c->isa, sizeof c->isa, "%s", x.k.isa);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(c->when, sizeof c->when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    double load[1];
    c->load = getloadavg(load, 1) == 1 ? load[0] : -1;
    if (o->repeats < 1 || o->repeats > 63) {
        snprintf(err, len, "repeats: %d is outside 1 to 63", o->repeats);
        return -1;
    }

    say(o, "the FMA peaks (fp64, fp32; one thread, all threads)");
    for (int f64 = 1; f64 >= 0; f64--) {
        int counts[2] = {1, x.threads};
        for (int k = 0; k < (x.threads > 1 ? 2 : 1); k++) {
            if (measure_fma(&x, f64, counts[k], &c->compute[c->ncompute]) != 0) {
                snprintf(err, len, "the FMA kernel could not run on %d threads", counts[k]);
                return -1;
            }
            c->ncompute++;
        }
    }

    /* the levels' working sets: half of each cache (of a thread's share when
     * the cache is private), and DRAM at 4x the last level */
    cache_level caches[8];
    int ncaches = data_caches(caches, 8);
    double llc = ncaches ? caches[ncaches - 1].bytes : 8 * 1048576.0;
    double dram = o->max_bytes > 0 ? o->max_bytes : 4 * llc;
    if (o->max_bytes <= 0) {
        double avail = (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        dram = dram < 64 * 1048576.0 ? 64 * 1048576.0 : dram;
        dram = dram > 1073741824.0 ? 1073741824.0 : dram;
        if (avail > 0 && dram > avail / 4)
            dram = avail / 4;
    }
    if (dram < 2 * llc)
        snprintf(c->note, sizeof c->note,
                 "the DRAM working set (%.0f MiB) is less than twice the last-level cache (%.0f MiB): "
                 "it may partly hit that cache", dram / 1048576.0, llc / 1048576.0);

    say(o, "the triad bandwidth at each level (one thread, all threads)");
    for (int i = 0; i <= ncaches && c->nlevels + 2 <= CE_MAX_LEVELS; i++) {
        int is_dram = i == ncaches;
        double cache = is_dram ? 0 : caches[i].bytes;
        int counts[2] = {1, x.threads};
        for (int k = 0; k < (x.threads > 1 ? 2 : 1); k++) {
            double ws = is_dram ? dram : cache / 2;
            if (!is_dram && !caches[i].shared)
                ws *= counts[k]; /* each thread has its own */
            ce_point *p = &c->levels[c->nlevels];
            if (measure_triad(&x, ws, counts[k], p) != 0) {
                snprintf(err, len, "the triad over %.0f bytes could not run on %d threads (out of memory?)", ws,
                         counts[k]);
                return -1;
            }
            if (is_dram)
                snprintf(p->what, sizeof p->what, "DRAM");
            else
                snprintf(p->what, sizeof p->what, "L%d", caches[i].level);
            p->cache_bytes = cache;
            c->nlevels++;
        }
    }

    say(o, "the triad bandwidth curve (one thread)");
    for (double ws = 8192; c->ncurve < CE_MAX_CURVE; ws *= 2) {
        double size = ws < dram ? ws : dram;
        ce_point *p = &c->curve[c->ncurve];
        if (measure_triad(&x, size, 1, p) != 0) {
            snprintf(err, len, "the triad over %.0f bytes could not run (out of memory?)", size);
            return -1;
        }
        c->ncurve++;
        if (size >= dram)
            break;
    }
    c->pinned = !x.unpinned;
    return 0;
}

/* --------------------------------------------------------------- cache */

int ce_cache_path(const char *cpu, int threads, char *buf, size_t len)
{
    char key[300];
    snprintf(key, sizeof key, "%s|%d|%s", cpu, threads, CE_FORMAT);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *s = key; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && *xdg == '/')
        n = snprintf(buf, len, "%s/mlprof/ceilings-%016llx.json", xdg, (unsigned long long)h);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.cache/mlprof/ceilings-%016llx.json", home, (unsigned long long)h);
    else
        return -1;
    return n > 0 && (size_t)n < len ? 0 : -1;
}

static void put_point(mlprof__sb *out, const ce_point *p, int with_what)
{
    mlprof__sb_putc(out, '{');
    if (with_what)
        mlprof__sb_printf(out, "\"what\":\"%s\",", p->what);
    mlprof__sb_printf(out, "\"threads\":%d", p->threads);
    if (p->bytes > 0)
        mlprof__sb_printf(out, ",\"bytes\":%.0f", p->bytes);
    if (p->cache_bytes > 0)
        mlprof__sb_printf(out, ",\"cache_bytes\":%.0f", p->cache_bytes);
    mlprof__sb_printf(out, ",\"min\":%.6g,\"median\":%.6g,\"max\":%.6g}", p->s.min, p->s.median, p->s.max);
}

void ce_write_json(const ce_ceilings *c, mlprof__sb *out)
{
    mlprof__sb_printf(out, "{\"format\":\"%s\",\"cpu\":", CE_FORMAT);
    mlprof__sb_json_str(out, c->cpu, strlen(c->cpu));
    mlprof__sb_printf(out, ",\"threads\":%d,\"isa\":\"%s\",\"measured\":\"%s\",\"repeats\":%d,\"pinned\":%s",
                      c->threads, c->isa, c->when, c->repeats, c->pinned ? "true" : "false");
    if (c->load >= 0)
        mlprof__sb_printf(out, ",\"load\":%.2f", c->load);
    if (c->gpu)
        mlprof__sb_puts(out, ",\"gpu\":true");
    mlprof__sb_puts(out, ",\"note\":");
    mlprof__sb_json_str(out, c->note, strlen(c->note));
    mlprof__sb_puts(out, ",\n\"units\":{\"compute\":\"FLOP/s\",\"levels\":\"bytes/s\",\"curve\":\"bytes/s\"}");
    const struct {
        const char *name;
        const ce_point *p;
        size_t n;
        int what;
    } lists[] = {{"compute", c->compute, c->ncompute, 1}, {"levels", c->levels, c->nlevels, 1},
                 {"curve", c->curve, c->ncurve, 0}};
    for (size_t l = 0; l < 3; l++) {
        mlprof__sb_printf(out, ",\n\"%s\":[", lists[l].name);
        for (size_t i = 0; i < lists[l].n; i++) {
            mlprof__sb_puts(out, i ? ",\n  " : "\n  ");
            put_point(out, &lists[l].p[i], lists[l].what);
        }
        mlprof__sb_puts(out, "]");
    }
    mlprof__sb_puts(out, "}\n");
}

/* Reads one point object; unknown members are skipped (a later version may
 * add some). */
static int read_point(an_input *in, ce_point *p, mlprof__sb *key, mlprof__sb *str)
{
    memset(p, 0, sizeof *p);
    p->s.min = p->s.median = p->s.max = NAN;
    int more = an_json_open(in, '{', "a measurement");
    while (more > 0) {
        if (an_json_key(in, key) != 0)
            return -1;
        const char *k = key->data ? key->data : "";
        double v;
        int64_t iv;
        int is_int;
        if (strcmp(k, "what") == 0) {
            if (an_json_peek(in) != '"')
                return an_input_fail(in, "\"what\" must be a string");
            if (an_json_string(in, str) != 0)
                return -1;
            const char *w = str->data ? str->data : "";
            /* a level's or precision's name (L1, DRAM, fp32): it is written
             * into JSON and SVG as it is */
            if (strlen(w) >= sizeof p->what || strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                       "0123456789_") != strlen(w))
                return an_input_fail(in, "\"what\" must be a name of letters, digits and _ (at most %zu), not \"%.40s\"",
                                     sizeof p->what - 1, w);
            snprintf(p->what, sizeof p->what, "%s", w);
        } else if (strcmp(k, "threads") == 0 || strcmp(k, "bytes") == 0 || strcmp(k, "cache_bytes") == 0 ||
                   strcmp(k, "min") == 0 || strcmp(k, "median") == 0 || strcmp(k, "max") == 0) {
            int ch = an_json_peek(in);
            if (!(ch == '-' || (ch >= '0' && ch <= '9')))
                return an_input_fail(in, "\"%s\" must be a number", k);
            if (an_json_number(in, &v, &iv, &is_int) != 0)
                return -1;
            if (!(v >= 0) || !isfinite(v))
                return an_input_fail(in, "\"%s\" must not be negative", k);
            if (k[0] == 't' && (!is_int || v < 1 || v > CE_MAX_THREADS))
                return an_input_fail(in, "\"threads\" must be a count from 1 to %d", CE_MAX_THREADS);
            if (k[0] == 't')
                p->threads = (int)v;
            else if (k[0] == 'b')
                p->bytes = v;
            else if (k[0] == 'c')
                p->cache_bytes = v;
            else if (k[1] == 'i')
                p->s.min = v;
            else if (k[1] == 'e')
                p->s.median = v;
            else
                p->s.max = v;
        } else if (an_json_skip(in, NULL) != 0) {
            return -1;
        }
        more = an_json_next(in, '}');
    }
    if (more < 0)
        return -1;
    if (isnan(p->s.min) || isnan(p->s.median) || isnan(p->s.max) || p->threads < 1)
        return an_input_fail(in, "a measurement needs \"threads\", \"min\", \"median\" and \"max\"");
    if (!(p->s.min <= p->s.median && p->s.median <= p->s.max) || p->s.max <= 0)
        return an_input_fail(in, "a measurement's min <= median <= max (and max > 0) does not hold");
    return 0;
}

static int read_list(an_input *in, ce_point *pts, size_t *n, size_t max, mlprof__sb *key, mlprof__sb *str)
{
    int more = an_json_open(in, '[', "a list of measurements");
    while (more > 0) {
        if (*n == max)
            return an_input_fail(in, "more than %zu measurements in a list", max);
        if (read_point(in, &pts[*n], key, str) != 0)
            return -1;
        (*n)++;
        more = an_json_next(in, ']');
    }
    return more < 0 ? -1 : 0;
}

static int read_body(an_input *in, ce_ceilings *c, mlprof__sb *key, mlprof__sb *str)
{
    int more = an_json_open(in, '{', "the ceilings object");
    int format = 0;
    while (more > 0) {
        if (an_json_key(in, key) != 0)
            return -1;
        const char *k = key->data ? key->data : "";
        int rc = 0;
        if (strcmp(k, "compute") == 0) {
            rc = read_list(in, c->compute, &c->ncompute, CE_MAX_COMPUTE, key, str);
        } else if (strcmp(k, "levels") == 0) {
            rc = read_list(in, c->levels, &c->nlevels, CE_MAX_LEVELS, key, str);
        } else if (strcmp(k, "curve") == 0) {
            rc = read_list(in, c->curve, &c->ncurve, CE_MAX_CURVE, key, str);
        } else if (strcmp(k, "format") == 0 || strcmp(k, "cpu") == 0 || strcmp(k, "isa") == 0 ||
                   strcmp(k, "measured") == 0 || strcmp(k, "note") == 0) {
            char name[16];
            snprintf(name, sizeof name, "%s", k);
            if (an_json_peek(in) != '"')
                return an_input_fail(in, "\"%s\" must be a string", name);
            if (an_json_string(in, str) != 0)
                return -1;
            const char *s = str->data ? str->data : "";
            if (name[0] == 'f') {
                if (strcmp(s, CE_FORMAT) != 0)
                    return an_input_fail(in, "\"format\" is \"%s\", not \"%s\"", s, CE_FORMAT);
                format = 1;
            } else {
                char *dst = name[0] == 'c' ? c->cpu : name[0] == 'i' ? c->isa : name[0] == 'm' ? c->when : c->note;
                size_t cap = name[0] == 'c' ? sizeof c->cpu : name[0] == 'i' ? sizeof c->isa
                             : name[0] == 'm' ? sizeof c->when : sizeof c->note;
                snprintf(dst, cap, "%s", s);
            }
        } else if (strcmp(k, "threads") == 0 || strcmp(k, "repeats") == 0) {
            double v;
            int64_t iv;
            int is_int;
            char name[16];
            snprintf(name, sizeof name, "%s", k);
            int ch = an_json_peek(in);
            if (!(ch >= '0' && ch <= '9'))
                return an_input_fail(in, "\"%s\" must be a positive number", name);
            if (an_json_number(in, &v, &iv, &is_int) != 0)
                return -1;
            if (!is_int || v < 1 || v > CE_MAX_THREADS)
                return an_input_fail(in, "\"%s\" must be a count from 1 to %d", name, CE_MAX_THREADS);
            if (name[0] == 't')
                c->threads = (int)v;
            else
                c->repeats = (int)v;
        } else if (strcmp(k, "pinned") == 0 || strcmp(k, "gpu") == 0) {
            *(k[0] == 'p' ? &c->pinned : &c->gpu) = an_json_peek(in) == 't';
            rc = an_json_skip(in, NULL);
        } else if (strcmp(k, "load") == 0) {
            double v;
            int64_t iv;
            int is_int;
            int ch = an_json_peek(in);
            if (!(ch >= '0' && ch <= '9'))
                return an_input_fail(in, "\"load\" must be a number from 0");
            if (an_json_number(in, &v, &iv, &is_int) != 0)
                return -1;
            c->load = v;
        } else {
            rc = an_json_skip(in, NULL);
        }
        if (rc != 0)
            return -1;
        more = an_json_next(in, '}');
    }
    if (more < 0)
        return -1;
    if (!format)
        return an_input_fail(in, "no \"format\": \"%s\" (is this a ceilings file from mlprof ceilings --json?)",
                             CE_FORMAT);
    if (c->threads < 1)
        return an_input_fail(in, "no \"threads\"");
    if (!ce_peak(c, "fp32", 1) && !ce_peak(c, "fp64", 1))
        return an_input_fail(in, "no compute peak (\"compute\" with \"what\": \"fp32\" or \"fp64\")");
    const ce_point *lv[CE_MAX_LEVELS];
    if (!ce_levels(c, 1, lv, CE_MAX_LEVELS))
        return an_input_fail(in, "no memory level (\"levels\")");
    return 0;
}

/* Reads the ceilings from an opened input, which it closes. */
static int read_input(ce_ceilings *c, an_input *in, char *err, size_t len)
{
    mlprof__sb key, str;
    mlprof__sb_init(&key);
    mlprof__sb_init(&str);
    int rc = read_body(in, c, &key, &str);
    if (rc == 0 && an_json_peek(in) != -1)
        rc = an_input_fail(in, "text after the ceilings object");
    if (rc != 0)
        snprintf(err, len, "%s", in->error[0] ? in->error : "cannot read the ceilings");
    mlprof__sb_free(&key);
    mlprof__sb_free(&str);
    an_input_close(in);
    return rc;
}

int ce_read(ce_ceilings *c, const char *path, char *err, size_t len)
{
    memset(c, 0, sizeof *c);
    an_input in;
    if (an_input_open(&in, path) != 0) {
        snprintf(err, len, "%s", in.error);
        return -1;
    }
    return read_input(c, &in, err, len);
}

int ce_read_mem(ce_ceilings *c, const char *name, const void *data, size_t n, char *err, size_t len)
{
    memset(c, 0, sizeof *c);
    an_input in;
    if (an_input_open_mem(&in, name, data, n) != 0) {
        snprintf(err, len, "%s", in.error);
        return -1;
    }
    return read_input(c, &in, err, len);
}

static int make_dirs(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int rc = mkdir(path, 0755);
        *s = '/';
        if (rc != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

int ce_save(const ce_ceilings *c, const char *path, char *err, size_t len)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    if (make_dirs(dir) != 0) {
        snprintf(err, len, "%s: cannot make its folder: %s", path, strerror(errno));
        return -1;
    }
    mlprof__sb out;
    mlprof__sb_init(&out);
    ce_write_json(c, &out);
    int rc = out.failed ? -1 : 0;
    if (rc == 0 && mlprof__write_file_atomic(path, out.data, out.len) != MLPROF_OK) {
        snprintf(err, len, "%s", mlprof_last_error());
        rc = -1;
    }
    mlprof__sb_free(&out);
    return rc;
}

const ce_point *ce_peak(const ce_ceilings *c, const char *precision, int all_threads)
{
    const ce_point *best = NULL;
    for (size_t i = 0; i < c->ncompute; i++) {
        const ce_point *p = &c->compute[i];
        if (strcmp(p->what, precision) != 0)
            continue;
        if ((all_threads ? p->threads == c->threads : p->threads == 1) || !best)
            best = p;
    }
    return best;
}

size_t ce_levels(const ce_ceilings *c, int all_threads, const ce_point **out, size_t max)
{
    size_t n = 0;
    int want = all_threads ? c->threads : 1;
    for (size_t i = 0; i < c->nlevels && n < max; i++)
        if (c->levels[i].threads == want)
            out[n++] = &c->levels[i];
    return n;
}

/* ------------------------------------------------------------- printing */

void ce_put_si(mlprof__sb *out, double v, const char *unit)
{
    static const char *const pre[] = {"", "K", "M", "G", "T", "P"};
    int p = 0;
    while (v >= 1000 && p < 5) {
        v /= 1000;
        p++;
    }
    mlprof__sb_printf(out, "%7.*f %s%s", v < 10 ? 2 : v < 100 ? 1 : 0, v, pre[p], unit);
}

void ce_put_size(mlprof__sb *out, double bytes)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB"};
    int k = 0;
    while (bytes >= 1024 && k < 3) {
        bytes /= 1024;
        k++;
    }
    mlprof__sb_printf(out, "%6.*f %-3s", bytes < 10 && k ? 1 : 0, bytes, u[k]);
}

void ce_put_stat_row(mlprof__sb *out, const ce_stat *s, const char *unit)
{
    ce_put_si(out, s->min, unit);
    mlprof__sb_puts(out, "  ");
    ce_put_si(out, s->median, unit);
    mlprof__sb_puts(out, "  ");
    ce_put_si(out, s->max, unit);
    double spread = s->max > 0 ? 100 * (s->max - s->min) / s->max : 0;
    mlprof__sb_printf(out, "  %5.1f%%\n", spread);
}

void ce_load_note(const ce_ceilings *c, mlprof__sb *out)
{
    if (c->load > 0.5 * c->threads)
        mlprof__sb_printf(out, "note: measured at load %.1f on %d CPU%s: other work shared the machine and the rates "
                               "may be low (mlprof ceilings --refresh on a quiet machine measures again)\n",
                          c->load, c->threads, c->threads == 1 ? "" : "s");
}

void ce_print_tables(const ce_ceilings *c, mlprof__sb *out)
{
    int cpu = !c->gpu; /* a GPU's points are all one launch's threads: no column for them */
    mlprof__sb_puts(out, cpu ? "\npeak (FMA, an FMA is 2 FLOPs)  threads          min         median            max"
                               "  spread\n"
                             : "\npeak (FMA; an FMA is 2 FLOPs, a half2 FMA 4; no tensor cores)"
                               "    min         median            max  spread\n");
    for (size_t i = 0; i < c->ncompute; i++) {
        if (cpu)
            mlprof__sb_printf(out, "  %-28s %7d  ", c->compute[i].what, c->compute[i].threads);
        else
            mlprof__sb_printf(out, "  %-58s", c->compute[i].what);
        ce_put_stat_row(out, &c->compute[i].s, "FLOP/s");
    }
    mlprof__sb_printf(out, "\nbandwidth (triad, 24 B/element)\n  level  cache      working set%s"
                           "        min         median            max  spread\n", cpu ? "  threads" : "");
    for (size_t i = 0; i < c->nlevels; i++) {
        const ce_point *p = &c->levels[i];
        mlprof__sb_printf(out, "  %-5s  ", p->what);
        if (p->cache_bytes > 0)
            ce_put_size(out, p->cache_bytes);
        else
            mlprof__sb_puts(out, "         -");
        mlprof__sb_puts(out, "  ");
        ce_put_size(out, p->bytes);
        if (cpu)
            mlprof__sb_printf(out, " %8d  ", p->threads);
        else
            mlprof__sb_puts(out, "  ");
        ce_put_stat_row(out, &p->s, "B/s");
    }
    mlprof__sb_printf(out, "\nbandwidth curve (triad%s)\n  working set         min         median"
                           "            max  spread\n", cpu ? ", one thread" : "");
    for (size_t i = 0; i < c->ncurve; i++) {
        mlprof__sb_puts(out, "  ");
        ce_put_size(out, c->curve[i].bytes);
        mlprof__sb_puts(out, "  ");
        ce_put_stat_row(out, &c->curve[i].s, "B/s");
    }
}

void ce_print(const ce_ceilings *c, mlprof__sb *out)
{
    mlprof__sb_printf(out, "%s, %d thread%s (%s), %s kernels, measured %s, %d times each\n", c->cpu, c->threads,
                      c->threads == 1 ? "" : "s", c->pinned ? "pinned" : "not pinned", c->isa, c->when, c->repeats);
    if (c->note[0])
        mlprof__sb_printf(out, "note: %s\n", c->note);
    ce_load_note(c, out);
    ce_print_tables(c, out);
}

/* --------------------------------------------------------------- getting */

int ce_get(ce_ceilings *c, const ce_options *o, int refresh, char *from, size_t from_len, char *err, size_t len)
{
    char cpu[128], path[4096];
    int threads;
    ce_machine(cpu, sizeof cpu, &threads);
    int have_path = ce_cache_path(cpu, threads, path, sizeof path) == 0;
    snprintf(from, from_len, "%s", have_path ? path : "");
    if (have_path && !refresh && access(path, F_OK) == 0) {
        char why[700];
        if (ce_read(c, path, why, sizeof why) == 0 && strcmp(c->cpu, cpu) == 0 && c->threads == threads)
            return 0;
        if (o->progress)
            fprintf(o->progress, "mlprof ceilings: the cache %s is not usable (%s); measuring again\n", path,
                    why[0] && strcmp(c->cpu, cpu) == 0 ? why : "another CPU or thread count");
    }
    if (ce_measure(c, o, err, len) != 0)
        return -1;
    char why[700];
    if (!have_path) {
        if (o->progress)
            fprintf(o->progress, "mlprof ceilings: no HOME nor XDG_CACHE_HOME: the ceilings are not cached\n");
        from[0] = '\0';
    } else if (ce_save(c, path, why, sizeof why) != 0) {
        if (o->progress)
            fprintf(o->progress, "mlprof ceilings: cannot cache the ceilings: %s\n", why);
        from[0] = '\0';
    }
    return 0;
}
