/*
 * cnn_infer.c - the example workload that `make demo` profiles.
 *
 * A small CIFAR-sized convolutional network (three conv/relu/pool blocks, two
 * fully connected layers, softmax) run for inference over batches of synthetic
 * images on a few worker threads. Everything is plain C11 with pthreads:
 * convolutions are im2col followed by a cache-blocked sgemm, so the profile
 * shows realistic operators with realistic proportions.
 *
 * It exercises most of the mlprof API: a domain, per-operator tasks with
 * shape/FLOP/byte arguments, nested tasks, frames, a counter, markers, scopes,
 * thread names, MLPROF_ZONE, the statistics table and the trace dump, with
 * hardware counters per operator and a sampler of CPU use and memory. Tensors
 * come from a small caching allocator (one per worker, as frameworks keep
 * per-stream pools) that tells the memory profiler about its segments and
 * blocks, so the run also gives a peak report and memory_flow.svg.
 *
 * Results are deterministic: weights and inputs come from seeded PRNGs, each
 * batch's input depends only on its index, and the GEMM blocking does not
 * depend on the thread count, so the printed checksum is the same for any
 * --threads value.
 */
#define _XOPEN_SOURCE 700 /* realpath, clock_gettime */

#include <mlprof/mlprof.h>
#include <mlprof/opcost.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "cnn_infer"
#define NUM_CLASSES 10
#define IMG_C 3
#define IMG_H 32
#define IMG_W 32

/* ------------------------------------------------------------- options */

struct options {
    int batches;
    int batch_size;
    int threads;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " [--batches N] [--batch-size B] [--threads T]\n"
            "\n"
            "Runs a small CNN's inference over N batches of B synthetic 3x32x32\n"
            "images on T worker threads, profiled with mlprof.\n"
            "\n"
            "  --batches N     batches in the timed pass (default 192)\n"
            "  --batch-size B  images per batch (default 8)\n"
            "  --threads T     worker threads (default 2)\n"
            "  --help          show this help\n"
            "\n"
            "The trace goes to $MLPROF_FILENAME, or cnn_trace.json if unset; the memory\n"
            "profile beside it (cnn_trace.memory_flow.svg, cnn_trace.memory.csv).\n");
}

/* Exit status 2 is the usual convention for a command-line mistake. */
static void bad_usage(const char *problem, const char *option)
{
    fprintf(stderr, PROG ": %s '%s'\n", problem, option);
    fprintf(stderr, "Try '" PROG " --help' for more information.\n");
    exit(2);
}

static int parse_int(const char *opt, const char *text, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr,
                PROG ": invalid value '%s' for option '%s' (expected an integer from %d to %d)\n",
                text, opt, lo, hi);
        fprintf(stderr, "Try '" PROG " --help' for more information.\n");
        exit(2);
    }
    return (int)v;
}

/* Accepts both "--opt value" and "--opt=value". */
static void parse_options(int argc, char **argv, struct options *o)
{
    static const struct {
        const char *name;
        int lo, hi;
        size_t field;
    } known[] = {
        {"--batches", 1, 1000000, offsetof(struct options, batches)},
        {"--batch-size", 1, 1024, offsetof(struct options, batch_size)},
        {"--threads", 1, 256, offsetof(struct options, threads)},
    };
    o->batches = 192;
    o->batch_size = 8;
    o->threads = 2;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        size_t k, nknown = sizeof known / sizeof known[0];
        for (k = 0; k < nknown; k++) {
            size_t len = strlen(known[k].name);
            if (strncmp(arg, known[k].name, len) != 0 || (arg[len] != '\0' && arg[len] != '='))
                continue;
            const char *value = arg[len] == '=' ? arg + len + 1 : NULL;
            if (!value) {
                if (i + 1 >= argc)
                    bad_usage("missing value for option", known[k].name);
                value = argv[++i];
            }
            int *field = (int *)((char *)o + known[k].field);
            *field = parse_int(known[k].name, value, known[k].lo, known[k].hi);
            break;
        }
        if (k == nknown)
            bad_usage(arg[0] == '-' ? "unknown option" : "unexpected argument", arg);
    }
}

/* ------------------------------------------------------------- helpers */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    return p;
}

/* Every configuration/state call is checked: a profiler that silently did
 * nothing would make the demo misleading. */
static void check(int status, const char *what)
{
    if (status != MLPROF_OK) {
        fprintf(stderr, PROG ": %s failed: %s (%s)\n", what, mlprof_last_error(),
                mlprof_err_name(status));
        exit(1);
    }
}

/* xorshift64*: tiny, fast and good enough for weights and test images. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [-1, 1): the top 24 bits fill a float mantissa exactly. */
static float rng_uniform(uint64_t *s)
{
    return (float)(rng_next(s) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* A zero state would stay zero forever, so seeds are mixed first. */
static uint64_t rng_seed(uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 0xD1B54A32D192ED03ULL;
    return s ? s : 1;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* -------------------------------------------------------- tensor pool */

/*
 * A caching allocator in the style of a framework's: it takes segments of at
 * least POOL_SEGMENT bytes from malloc and carves tensors out of them first
 * fit, 256-byte aligned, merging free neighbours. Segments are kept until the
 * pool is destroyed. It reports reserves, releases, allocations and frees to
 * mlprof, so "allocated" (segments) and "used" (tensors) can be told apart.
 */
#define POOL_SEGMENT ((size_t)1 << 20)
#define POOL_ALIGN 256
#define POOL_MAX_SEGMENTS 16
#define POOL_MAX_RANGES 64

struct range {
    size_t off, len;
};

struct segment {
    char *base;
    size_t size;
    struct range free[POOL_MAX_RANGES]; /* sorted by offset, never adjacent */
    int nfree;
};

struct pool {
    struct segment seg[POOL_MAX_SEGMENTS];
    int nseg;
};

static struct segment *pool_grow(struct pool *p, size_t need)
{
    if (p->nseg == POOL_MAX_SEGMENTS) {
        fprintf(stderr, PROG ": tensor pool: more than %d segments\n", POOL_MAX_SEGMENTS);
        exit(1);
    }
    struct segment *s = &p->seg[p->nseg++];
    s->size = need > POOL_SEGMENT ? (need + POOL_SEGMENT - 1) / POOL_SEGMENT * POOL_SEGMENT : POOL_SEGMENT;
    s->base = xcalloc(s->size, 1);
    s->free[0] = (struct range){0, s->size};
    s->nfree = 1;
    mlprof_mem_reserve(MLPROF_DEVICE_CPU, s->base, s->size);
    return s;
}

/* A tensor of bytes, named by tag in the memory profile. */
static float *pool_alloc(struct pool *p, size_t bytes, const char *tag)
{
    size_t len = (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    (void)tag;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nseg; i++) {
            struct segment *s = &p->seg[i];
            for (int r = 0; r < s->nfree; r++) {
                if (s->free[r].len < len)
                    continue;
                char *ptr = s->base + s->free[r].off;
                s->free[r].off += len;
                s->free[r].len -= len;
                if (s->free[r].len == 0) {
                    memmove(&s->free[r], &s->free[r + 1], (size_t)(s->nfree - r - 1) * sizeof s->free[0]);
                    s->nfree--;
                }
                MLPROF_MEM_ALLOC(MLPROF_DEVICE_CPU, ptr, bytes, tag);
                return (float *)ptr;
            }
        }
        pool_grow(p, len);
    }
    fprintf(stderr, PROG ": tensor pool: no room for %zu bytes\n", bytes);
    exit(1);
}

static void pool_free(struct pool *p, void *ptr, size_t bytes)
{
    size_t len = (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    MLPROF_MEM_FREE(MLPROF_DEVICE_CPU, ptr);
    for (int i = 0; i < p->nseg; i++) {
        struct segment *s = &p->seg[i];
        if ((char *)ptr < s->base || (char *)ptr >= s->base + s->size)
            continue;
        size_t off = (size_t)((char *)ptr - s->base);
        int r = 0;
        while (r < s->nfree && s->free[r].off < off)
            r++;
        int before = r > 0 && s->free[r - 1].off + s->free[r - 1].len == off;
        int after = r < s->nfree && off + len == s->free[r].off;
        if (before && after) {
            s->free[r - 1].len += len + s->free[r].len;
            memmove(&s->free[r], &s->free[r + 1], (size_t)(s->nfree - r - 1) * sizeof s->free[0]);
            s->nfree--;
        } else if (before) {
            s->free[r - 1].len += len;
        } else if (after) {
            s->free[r].off = off;
            s->free[r].len += len;
        } else {
            if (s->nfree == POOL_MAX_RANGES) {
                fprintf(stderr, PROG ": tensor pool: too fragmented\n");
                exit(1);
            }
            memmove(&s->free[r + 1], &s->free[r], (size_t)(s->nfree - r) * sizeof s->free[0]);
            s->free[r] = (struct range){off, len};
            s->nfree++;
        }
        return;
    }
    fprintf(stderr, PROG ": tensor pool: %p is not from this pool\n", ptr);
    exit(1);
}

static void pool_destroy(struct pool *p)
{
    for (int i = 0; i < p->nseg; i++) {
        mlprof_mem_release(MLPROF_DEVICE_CPU, p->seg[i].base);
        free(p->seg[i].base);
    }
    p->nseg = 0;
}

/* --------------------------------------------------------------- sgemm */

/*
 * C[M x N] = A[M x K] * B[K x N], row-major, in the GotoBLAS shape: B is packed
 * into KC x NC panels that stay in L2, A into MC x KC blocks that stay in L1/L2,
 * and a MR x NR micro-kernel keeps its tile of C in registers. The fixed-size
 * inner loops are what lets the compiler vectorize at -O2 without intrinsics.
 */
enum { MR = 4, NR = 16, MC = 64, KC = 256, NC = 1024 };
_Static_assert(MR == 4, "micro_kernel keeps one named accumulator row per MR row");

/* Packed panels are zero-padded up to whole MR/NR multiples. */
#define APACK_FLOATS ((size_t)((MC + MR - 1) / MR * MR) * KC)
#define BPACK_FLOATS ((size_t)((NC + NR - 1) / NR * NR) * KC)

struct gemm_buf {
    float *apack; /* APACK_FLOATS */
    float *bpack; /* BPACK_FLOATS */
};

static int imin(int a, int b)
{
    return a < b ? a : b;
}

/* Panels of MR rows, k-major, zero-padded so the kernel never needs an edge case. */
static void pack_a(int mc, int kc, const float *a, int lda, float *restrict out)
{
    for (int ir = 0; ir < mc; ir += MR) {
        int m = imin(MR, mc - ir);
        for (int k = 0; k < kc; k++) {
            for (int r = 0; r < m; r++)
                out[r] = a[(size_t)(ir + r) * lda + k];
            for (int r = m; r < MR; r++)
                out[r] = 0.0f;
            out += MR;
        }
    }
}

static void pack_b(int kc, int nc, const float *b, int ldb, float *restrict out)
{
    for (int jr = 0; jr < nc; jr += NR) {
        int n = imin(NR, nc - jr);
        for (int k = 0; k < kc; k++) {
            const float *row = b + (size_t)k * ldb + jr;
            for (int j = 0; j < n; j++)
                out[j] = row[j];
            for (int j = n; j < NR; j++)
                out[j] = 0.0f;
            out += NR;
        }
    }
}

/* Separate row accumulators (not a 2-D array) are what both gcc and clang turn
 * into straight vector code; the result is stored only for the m x n part that
 * lies inside C. */
static void micro_kernel(int kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int ldc, int m, int n, int accumulate)
{
    float c0[NR] = {0}, c1[NR] = {0}, c2[NR] = {0}, c3[NR] = {0};
    for (int k = 0; k < kc; k++) {
        float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        for (int j = 0; j < NR; j++) {
            float bj = b[j];
            c0[j] += a0 * bj;
            c1[j] += a1 * bj;
            c2[j] += a2 * bj;
            c3[j] += a3 * bj;
        }
        a += MR;
        b += NR;
    }
    float *acc[MR] = {c0, c1, c2, c3};
    for (int r = 0; r < m; r++) {
        float *crow = c + (size_t)r * ldc;
        if (accumulate)
            for (int j = 0; j < n; j++)
                crow[j] += acc[r][j];
        else
            for (int j = 0; j < n; j++)
                crow[j] = acc[r][j];
    }
}

static void sgemm(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                  float *C, int ldc, const struct gemm_buf *buf)
{
    for (int jc = 0; jc < N; jc += NC) {
        int nc = imin(NC, N - jc);
        for (int pc = 0; pc < K; pc += KC) {
            int kc = imin(KC, K - pc);
            pack_b(kc, nc, B + (size_t)pc * ldb + jc, ldb, buf->bpack);
            for (int ic = 0; ic < M; ic += MC) {
                int mc = imin(MC, M - ic);
                pack_a(mc, kc, A + (size_t)ic * lda + pc, lda, buf->apack);
                for (int jr = 0; jr < nc; jr += NR)
                    for (int ir = 0; ir < mc; ir += MR)
                        micro_kernel(kc, buf->apack + (size_t)ir * kc,
                                     buf->bpack + (size_t)jr * kc,
                                     C + (size_t)(ic + ir) * ldc + jc + jr, ldc,
                                     imin(MR, mc - ir), imin(NR, nc - jr), pc > 0);
            }
        }
    }
}

/* ------------------------------------------------------------- the net */

enum op_kind { OP_CONV, OP_RELU, OP_POOL, OP_FC, OP_SOFTMAX };

struct layer_spec {
    enum op_kind kind;
    const char *name;
    int out_features; /* output channels of a conv, outputs of a fc */
};

static const struct layer_spec k_arch[] = {
    {OP_CONV, "conv1", 16}, {OP_RELU, "relu1", 0}, {OP_POOL, "pool1", 0},
    {OP_CONV, "conv2", 32}, {OP_RELU, "relu2", 0}, {OP_POOL, "pool2", 0},
    {OP_CONV, "conv3", 64}, {OP_RELU, "relu3", 0}, {OP_POOL, "pool3", 0},
    {OP_FC, "fc1", 128},    {OP_RELU, "relu4", 0}, {OP_FC, "fc2", NUM_CLASSES},
    {OP_SOFTMAX, "softmax", 0},
};
#define NUM_LAYERS ((int)(sizeof k_arch / sizeof k_arch[0]))

/* rank 4 is [n,c,h,w]; rank 2 is [n,c] (h = w = 1) after the flatten. */
struct shape {
    int rank, n, c, h, w;
};

static size_t shape_elems(struct shape s)
{
    return (size_t)s.n * s.c * s.h * s.w;
}

static void shape_format(struct shape s, char *buf, size_t len)
{
    if (s.rank == 2)
        snprintf(buf, len, "[%d,%d]", s.n, s.c);
    else
        snprintf(buf, len, "[%d,%d,%d,%d]", s.n, s.c, s.h, s.w);
}

/* What a profiled operator reports: computed once, since shapes are fixed. */
struct op_args {
    char in_shape[48];
    char out_shape[48];
    int64_t flops;
    int64_t bytes;
};

struct layer {
    const struct layer_spec *spec;
    struct shape in, out;
    int k;           /* GEMM depth: cin*3*3 for a conv, inputs for a fc */
    float *weights;  /* conv: [cout x cin*9]; fc: [in x out], so both are plain GEMMs */
    float *bias;
    mlprof_span *task;
    char out_tag[32], col_tag[32]; /* tensor names in the memory profile */
    struct op_args args;
    struct op_args im2col_args, gemm_args; /* the nested tasks of a conv */
};

struct instruments {
    mlprof_domain *domain;
    mlprof_span *frame;
    mlprof_span *im2col_task, *gemm_task;
    mlprof_counter *images_done;
    mlprof_marker *pass_begin, *pass_end, *warmup_done;
};

struct net {
    struct layer layers[NUM_LAYERS];
    int batch_size;
};

/* He-style uniform init (variance 2/fan_in) keeps ReLU activations O(1). */
static void init_params(struct layer *l, int fan_in, int fan_out, uint64_t seed)
{
    uint64_t s = rng_seed(seed);
    float a = sqrtf(6.0f / (float)fan_in);
    size_t n = (size_t)fan_in * fan_out;
    l->weights = xcalloc(n, sizeof(float));
    l->bias = xcalloc((size_t)fan_out, sizeof(float));
    MLPROF_MEM_ALLOC(MLPROF_DEVICE_CPU, l->weights, n * sizeof(float), "weights");
    MLPROF_MEM_ALLOC(MLPROF_DEVICE_CPU, l->bias, (size_t)fan_out * sizeof(float), "bias");
    for (size_t i = 0; i < n; i++)
        l->weights[i] = a * rng_uniform(&s);
    for (int i = 0; i < fan_out; i++)
        l->bias[i] = 0.01f * rng_uniform(&s);
}

static struct shape layer_out_shape(const struct layer_spec *spec, struct shape in)
{
    struct shape out = in;
    switch (spec->kind) {
    case OP_CONV: /* 3x3, stride 1, pad 1: same size */
        out.c = spec->out_features;
        break;
    case OP_POOL:
        out.h = in.h / 2;
        out.w = in.w / 2;
        break;
    case OP_FC:
        out.rank = 2;
        out.c = spec->out_features;
        out.h = out.w = 1;
        break;
    case OP_RELU:
    case OP_SOFTMAX:
        break;
    }
    return out;
}

/* FLOPs and bytes as mlprof/opcost.h counts them, the same formulas as the
 * interposers, mlprof.torch and the analyzer: a GEMM or convolution is
 * 2*M*N*K (the bias read, its adds not counted); elementwise operators count
 * their FLOPs per element computed; every tensor is read or written once. */
static void set_cost(struct op_args *a, int rc, mlprof_opcost c)
{
    a->flops = rc == 0 ? c.flops : 0;
    a->bytes = rc == 0 ? c.bytes : 0;
}

static void layer_cost(struct layer *l)
{
    int64_t in = (int64_t)shape_elems(l->in), out = (int64_t)shape_elems(l->out);
    int64_t f = (int64_t)sizeof(float);
    int64_t n = l->in.n, hw = (int64_t)l->out.h * l->out.w;
    int64_t cout = l->out.c;
    mlprof_opcost c = {0, 0};
    int rc;

    shape_format(l->in, l->args.in_shape, sizeof l->args.in_shape);
    shape_format(l->out, l->args.out_shape, sizeof l->args.out_shape);
    switch (l->spec->kind) {
    case OP_CONV: {
        int64_t x[4] = {n, l->in.c, l->in.h, l->in.w}, w[4] = {cout, l->in.c, 3, 3};
        int64_t y[4] = {n, cout, l->out.h, l->out.w};
        rc = mlprof_opcost_conv(MLPROF_CONV_FORWARD, 4, x, w, y, f, MLPROF_OPCOST_BIAS, &c);
        set_cost(&l->args, rc, c);
        /* im2col copies the input into k x (n*h*w) columns: no FLOPs */
        int64_t col = n * l->k * hw;
        l->im2col_args = l->args;
        snprintf(l->im2col_args.out_shape, sizeof l->im2col_args.out_shape,
                 "[%d,%d,%lld]", l->in.n, l->k, (long long)hw);
        rc = mlprof_opcost_elementwise(col, in, 0, f, &c);
        set_cost(&l->im2col_args, rc, c);
        /* the GEMM: weights [cout x k] by the columns [k x n*h*w] */
        l->gemm_args = l->args;
        memcpy(l->gemm_args.in_shape, l->im2col_args.out_shape, sizeof l->gemm_args.in_shape);
        rc = mlprof_opcost_gemm(1, cout, n * hw, l->k, f, f, f, 0, &c);
        set_cost(&l->gemm_args, rc, c);
        break;
    }
    case OP_FC:
        rc = mlprof_opcost_gemm(1, n, cout, l->k, f, f, f, MLPROF_OPCOST_BIAS, &c);
        set_cost(&l->args, rc, c);
        break;
    case OP_RELU: /* in place: one max per element, read and written */
        rc = mlprof_opcost_elementwise(in, in, 1, f, &c);
        set_cost(&l->args, rc, c);
        break;
    case OP_POOL: /* each output a max of four values: three compares */
        rc = mlprof_opcost_elementwise(out, in, 3, f, &c);
        set_cost(&l->args, rc, c);
        break;
    case OP_SOFTMAX:
        rc = mlprof_opcost_softmax(in, f, &c);
        set_cost(&l->args, rc, c);
        break;
    }
}

static void net_init(struct net *net, int batch_size, mlprof_domain *domain)
{
    struct shape s = {4, batch_size, IMG_C, IMG_H, IMG_W};
    MLPROF_SCOPE("params");
    net->batch_size = batch_size;
    for (int i = 0; i < NUM_LAYERS; i++) {
        struct layer *l = &net->layers[i];
        memset(l, 0, sizeof *l);
        l->spec = &k_arch[i];
        l->in = s;
        l->out = layer_out_shape(l->spec, s);
        l->task = mlprof_task_create(domain, l->spec->name);
        snprintf(l->out_tag, sizeof l->out_tag, "%s.out", l->spec->name);
        snprintf(l->col_tag, sizeof l->col_tag, "%s.col", l->spec->name);
        if (!l->task) {
            fprintf(stderr, PROG ": creating task %s failed: %s\n", l->spec->name,
                    mlprof_last_error());
            exit(1);
        }
        if (l->spec->kind == OP_CONV) {
            l->k = s.c * 9;
            init_params(l, l->k, l->out.c, (uint64_t)i + 1);
        } else if (l->spec->kind == OP_FC) {
            l->k = s.c * s.h * s.w; /* the flatten is free: NCHW is already contiguous */
            init_params(l, l->k, l->out.c, (uint64_t)i + 1);
        }
        layer_cost(l);
        s = l->out;
    }
}

static void net_free(struct net *net)
{
    for (int i = 0; i < NUM_LAYERS; i++) {
        MLPROF_MEM_FREE(MLPROF_DEVICE_CPU, net->layers[i].weights);
        MLPROF_MEM_FREE(MLPROF_DEVICE_CPU, net->layers[i].bias);
        free(net->layers[i].weights);
        free(net->layers[i].bias);
        mlprof_span_destroy(net->layers[i].task);
    }
}

/* ----------------------------------------------------------- operators */

/* Per-thread: a tensor pool for activations and im2col matrices, and the GEMM
 * packing buffers, so workers share nothing writable. */
struct workspace {
    struct pool pool;
    struct gemm_buf gemm;
};

static void workspace_init(struct workspace *ws)
{
    memset(&ws->pool, 0, sizeof ws->pool);
    MLPROF_SCOPE("workspace");
    ws->gemm.apack = pool_alloc(&ws->pool, APACK_FLOATS * sizeof(float), "gemm.apack");
    ws->gemm.bpack = pool_alloc(&ws->pool, BPACK_FLOATS * sizeof(float), "gemm.bpack");
}

static void workspace_free(struct workspace *ws)
{
    pool_free(&ws->pool, ws->gemm.apack, APACK_FLOATS * sizeof(float));
    pool_free(&ws->pool, ws->gemm.bpack, BPACK_FLOATS * sizeof(float));
    pool_destroy(&ws->pool);
}

/* Parameters used only inside MLPROF_* macros are cast to void: building with
 * MLPROF_DISABLE removes the macros, arguments and all. */
static void record_args(const struct op_args *a)
{
    (void)a;
    MLPROF_ARG_STR("input_shape", a->in_shape);
    MLPROF_ARG_STR("output_shape", a->out_shape);
    MLPROF_ARG_INT("flops", a->flops);
    MLPROF_ARG_INT("bytes", a->bytes);
    MLPROF_ARG_STR("dtype", "float32");
}

/* One image [c,h,w] to a [c*9 x h*w] matrix, for a 3x3 kernel with padding 1. */
static void im2col_3x3(const float *img, int c, int h, int w, float *col)
{
    for (int ch = 0; ch < c; ch++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                for (int y = 0; y < h; y++) {
                    int iy = y + ky - 1;
                    for (int x = 0; x < w; x++) {
                        int ix = x + kx - 1;
                        int inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                        *col++ = inside ? img[((size_t)ch * h + iy) * w + ix] : 0.0f;
                    }
                }
            }
}

static void conv_forward(const struct layer *l, const struct instruments *ins,
                         const float *in, float *out, struct workspace *ws)
{
    int n = l->in.n, cin = l->in.c, h = l->in.h, w = l->in.w, cout = l->out.c;
    size_t hw = (size_t)h * w, col_per_img = (size_t)l->k * hw;
    (void)ins;

    /* All images are unfolded first so im2col and gemm are one task each. */
    size_t col_bytes = (size_t)n * col_per_img * sizeof(float);
    MLPROF_BEGIN(ins->im2col_task);
    record_args(&l->im2col_args);
    float *col = pool_alloc(&ws->pool, col_bytes, l->col_tag);
    for (int i = 0; i < n; i++)
        im2col_3x3(in + (size_t)i * cin * hw, cin, h, w, col + i * col_per_img);
    MLPROF_END(ins->im2col_task);

    /* Weights on the left make each image's output land directly in NCHW. */
    MLPROF_BEGIN(ins->gemm_task);
    record_args(&l->gemm_args);
    for (int i = 0; i < n; i++)
        sgemm(cout, (int)hw, l->k, l->weights, l->k, col + i * col_per_img, (int)hw,
              out + (size_t)i * cout * hw, (int)hw, &ws->gemm);
    pool_free(&ws->pool, col, col_bytes);
    MLPROF_END(ins->gemm_task);

    for (int i = 0; i < n; i++)
        for (int c = 0; c < cout; c++) {
            float *p = out + ((size_t)i * cout + c) * hw, b = l->bias[c];
            for (size_t j = 0; j < hw; j++)
                p[j] += b;
        }
}

static void fc_forward(const struct layer *l, const float *in, float *out,
                       struct workspace *ws)
{
    int n = l->in.n, nout = l->out.c;
    sgemm(n, nout, l->k, in, l->k, l->weights, nout, out, nout, &ws->gemm);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < nout; j++)
            out[(size_t)i * nout + j] += l->bias[j];
}

/* Not fmaxf: without -ffast-math that is a libm call rather than one maxss. */
static float max2(float a, float b)
{
    return a > b ? a : b;
}

/* (v + |v|) / 2 is exactly max(v, 0) for any finite activation, and unlike a
 * compare with zero gcc keeps it branch-free: a branch on activation signs
 * mispredicts about half the time and made this loop ten times slower. */
static void relu_forward(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * (x[i] + fabsf(x[i]));
}

static void pool_forward(const struct layer *l, const float *in, float *out)
{
    int planes = l->in.n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    for (int p = 0; p < planes; p++) {
        const float *src = in + (size_t)p * h * w;
        float *dst = out + (size_t)p * oh * ow;
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                const float *r0 = src + (size_t)(2 * y) * w + 2 * x, *r1 = r0 + w;
                dst[y * ow + x] = max2(max2(r0[0], r0[1]), max2(r1[0], r1[1]));
            }
    }
}

/* Subtracting the row maximum keeps expf from overflowing. */
static void softmax_forward(const struct layer *l, const float *in, float *out)
{
    int n = l->in.n, c = l->in.c;
    for (int i = 0; i < n; i++) {
        const float *x = in + (size_t)i * c;
        float *y = out + (size_t)i * c, mx = x[0], sum = 0.0f;
        for (int j = 1; j < c; j++)
            mx = max2(mx, x[j]);
        for (int j = 0; j < c; j++) {
            y[j] = expf(x[j] - mx);
            sum += y[j];
        }
        for (int j = 0; j < c; j++)
            y[j] /= sum;
    }
}

/* Runs one layer: its output is a new tensor (ReLU works in place), and its
 * input is given back to the pool once read. Returns the output. */
static float *layer_forward(const struct layer *l, const struct instruments *ins, float *in,
                            struct workspace *ws)
{
    MLPROF_SCOPE(l->spec->name); /* pushed before begin, so the task carries it */
    MLPROF_BEGIN(l->task);
    record_args(&l->args);
    size_t in_bytes = shape_elems(l->in) * sizeof(float);
    float *out = l->spec->kind == OP_RELU
                     ? in
                     : pool_alloc(&ws->pool, shape_elems(l->out) * sizeof(float), l->out_tag);
    switch (l->spec->kind) {
    case OP_CONV:
        conv_forward(l, ins, in, out, ws);
        break;
    case OP_FC:
        fc_forward(l, in, out, ws);
        break;
    case OP_RELU:
        relu_forward(in, shape_elems(l->in));
        out = in;
        break;
    case OP_POOL:
        pool_forward(l, in, out);
        break;
    case OP_SOFTMAX:
        softmax_forward(l, in, out);
        break;
    }
    if (out != in)
        pool_free(&ws->pool, in, in_bytes);
    MLPROF_END(l->task);
    return out;
}

/* Takes the input tensor; returns the [batch x NUM_CLASSES] probabilities, a
 * tensor of the workspace's pool. */
static float *net_forward(const struct net *net, const struct instruments *ins, float *x,
                          struct workspace *ws)
{
    float *cur = x;
    mlprof_scope_push("model");
    for (int i = 0; i < NUM_LAYERS; i++)
        cur = layer_forward(&net->layers[i], ins, cur, ws);
    mlprof_scope_pop();
    return cur;
}

/* ------------------------------------------------------------- batches */

/* A batch's images depend only on its index, whichever thread runs it. A smooth
 * per-image colour gradient plus noise gives the convolutions some structure. */
static void load_batch(const struct instruments *ins, int batch, int batch_size, float *x)
{
    (void)ins;
    MLPROF_ZONE(ins->domain, "load_batch");
    size_t plane = (size_t)IMG_H * IMG_W;
    for (int i = 0; i < batch_size; i++) {
        uint64_t s = rng_seed(0xC1FA5EEDULL + (uint64_t)batch * 1000003u + (uint64_t)i);
        for (int c = 0; c < IMG_C; c++) {
            float gx = rng_uniform(&s), gy = rng_uniform(&s);
            float *p = x + ((size_t)i * IMG_C + c) * plane;
            for (int y = 0; y < IMG_H; y++)
                for (int xx = 0; xx < IMG_W; xx++)
                    p[y * IMG_W + xx] = gx * (float)xx / IMG_W + gy * (float)y / IMG_H +
                                        0.5f * rng_uniform(&s);
        }
    }
}

/* One batch as one frame; probs (if not NULL) receives the softmax outputs. */
static void run_batch(const struct net *net, const struct instruments *ins,
                      struct workspace *ws, int batch, float *probs)
{
    MLPROF_BEGIN(ins->frame);
    MLPROF_ARG_INT("batch", batch);
    size_t in_bytes = (size_t)net->batch_size * IMG_C * IMG_H * IMG_W * sizeof(float);
    size_t out_bytes = (size_t)net->batch_size * NUM_CLASSES * sizeof(float);
    float *x;
    {
        MLPROF_SCOPE("data");
        x = pool_alloc(&ws->pool, in_bytes, "input");
    }
    load_batch(ins, batch, net->batch_size, x);
    float *out = net_forward(net, ins, x, ws);
    if (probs)
        memcpy(probs, out, out_bytes);
    pool_free(&ws->pool, out, out_bytes);
    MLPROF_END(ins->frame);
    MLPROF_COUNTER_ADD(ins->images_done, net->batch_size);
}

struct worker {
    pthread_t thread;
    int index;
    int first_batch, end_batch;
    const struct net *net;
    const struct instruments *ins;
    float *probs; /* results of every batch; each worker writes only its own range */
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[32];
    snprintf(name, sizeof name, "worker-%d", w->index);
    mlprof_thread_set_name(name);

    struct workspace ws;
    workspace_init(&ws);
    size_t per_batch = (size_t)w->net->batch_size * NUM_CLASSES;
    for (int b = w->first_batch; b < w->end_batch; b++)
        run_batch(w->net, w->ins, &ws, b, w->probs + (size_t)b * per_batch);
    workspace_free(&ws);
    return NULL;
}

/* Contiguous ranges keep each thread's frames together on its track. */
static void run_pass(const struct net *net, const struct instruments *ins,
                     const struct options *o, float *probs)
{
    int nthreads = imin(o->threads, o->batches);
    struct worker *workers = xcalloc((size_t)nthreads, sizeof *workers);
    int started = 0, failed = 0;

    for (int t = 0; t < nthreads; t++) {
        struct worker *w = &workers[t];
        w->index = t;
        w->first_batch = (int)((int64_t)o->batches * t / nthreads);
        w->end_batch = (int)((int64_t)o->batches * (t + 1) / nthreads);
        w->net = net;
        w->ins = ins;
        w->probs = probs;
        int err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err) {
            fprintf(stderr, PROG ": cannot create thread %d: %s\n", t, strerror(err));
            failed = 1;
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(workers[t].thread, NULL);
    free(workers);
    if (failed)
        exit(1);
}

/* ------------------------------------------------------------- results */

static void print_results(const float *probs, int images, double seconds)
{
    int hist[NUM_CLASSES] = {0};
    double checksum = 0.0;
    for (int i = 0; i < images; i++) {
        const float *p = probs + (size_t)i * NUM_CLASSES;
        int best = 0;
        for (int c = 0; c < NUM_CLASSES; c++) {
            if (p[c] > p[best])
                best = c;
            /* Weighting by class and image makes a permuted result visible too. */
            checksum += (double)p[c] * (c + 1) * (i % 7 + 1);
        }
        hist[best]++;
    }
    printf("\npass: %d images in %.3f s (%.1f images/s)\n", images, seconds,
           seconds > 0 ? images / seconds : 0.0);
    printf("top-1 class histogram:\n");
    for (int c = 0; c < NUM_CLASSES; c++)
        printf("  class %d: %d\n", c, hist[c]);
    printf("checksum: %.6f\n", checksum);
}

static void print_stats(void)
{
    char *table = NULL;
    check(mlprof_dumps(&table, MLPROF_FORMAT_TABLE, MLPROF_SORT_TOTAL, 0, 0), "mlprof_dumps");
    if (table)
        fputs(table, stdout);
    mlprof_free(table);
}

/* Prints "label: /absolute/path" for an output mlprof wrote. */
static void print_output_path(const char *what, const char *label)
{
    char name[PATH_MAX], abs[PATH_MAX];
    check(mlprof_output_path(what, name, sizeof name), "reading an output path");
    if (!name[0])
        return; /* that output is off */
    if (!realpath(name, abs)) {
        fprintf(stderr, PROG ": %s file '%s': %s\n", label, name, strerror(errno));
        exit(1);
    }
    printf("%s: %s\n", label, abs);
}

/* ---------------------------------------------------------------- main */

static void instruments_init(struct instruments *ins)
{
    ins->domain = mlprof_domain_create("cnn");
    ins->frame = mlprof_frame_create(ins->domain, "batch");
    ins->im2col_task = mlprof_task_create(ins->domain, "im2col");
    ins->gemm_task = mlprof_task_create(ins->domain, "gemm");
    ins->images_done = mlprof_counter_create(ins->domain, "images_done");
    ins->pass_begin = mlprof_marker_create(ins->domain, "pass_begin");
    ins->pass_end = mlprof_marker_create(ins->domain, "pass_end");
    ins->warmup_done = mlprof_marker_create(ins->domain, "warmup_done");
    if (!ins->domain || !ins->frame || !ins->im2col_task || !ins->gemm_task ||
        !ins->images_done || !ins->pass_begin || !ins->pass_end || !ins->warmup_done) {
        fprintf(stderr, PROG ": creating profiler handles failed: %s\n", mlprof_last_error());
        exit(1);
    }
}

static void instruments_free(struct instruments *ins)
{
    mlprof_span_destroy(ins->frame);
    mlprof_span_destroy(ins->im2col_task);
    mlprof_span_destroy(ins->gemm_task);
    mlprof_counter_destroy(ins->images_done);
    mlprof_marker_destroy(ins->pass_begin);
    mlprof_marker_destroy(ins->pass_end);
    mlprof_marker_destroy(ins->warmup_done);
}

int main(int argc, char **argv)
{
    struct options opt;
    parse_options(argc, argv, &opt);

    /* Only a default: the environment (and so `make demo`) decides otherwise. */
    if (!getenv("MLPROF_FILENAME"))
        check(mlprof_set_config("filename", "cnn_trace.json"), "setting filename");
    if (!getenv("MLPROF_PROFILE_MEMORY"))
        check(mlprof_set_config("profile_memory", "1"), "turning on the memory profiler");
    /* each operator measured with the CPU's counters (those the machine has:
     * a virtual machine without a PMU says so and gives the software ones),
     * and the process's CPU use and resident set sampled every 10 ms */
    if (!getenv("MLPROF_COUNTERS"))
        check(mlprof_set_config("counters", "cycles,instructions,task-clock,page-faults"), "choosing counters");
    if (!getenv("MLPROF_SAMPLER"))
        check(mlprof_set_config("sampler", "cpu,rss"), "choosing the sampler's series");
    mlprof_process_set_name(PROG);
    mlprof_thread_set_name("main");

    struct instruments ins;
    struct net net;
    instruments_init(&ins);
    /* started before the weights are made, so that the memory profile has them */
    check(mlprof_set_state(MLPROF_STATE_RUN), "starting the profiler");
    net_init(&net, opt.batch_size, ins.domain);
    float *probs = xcalloc((size_t)opt.batches * opt.batch_size * NUM_CLASSES, sizeof(float));

    /* The warm-up batch faults in pages and caches, so the pass measures steady state. */
    struct workspace ws;
    workspace_init(&ws);
    run_batch(&net, &ins, &ws, 0, NULL);
    workspace_free(&ws);
    MLPROF_MARK(ins.warmup_done, MLPROF_SCOPE_GLOBAL);

    MLPROF_MARK(ins.pass_begin, MLPROF_SCOPE_PROCESS);
    MLPROF_ARG_INT("batches", opt.batches);
    double t0 = now_seconds();
    run_pass(&net, &ins, &opt, probs);
    double seconds = now_seconds() - t0;
    MLPROF_MARK(ins.pass_end, MLPROF_SCOPE_PROCESS);

    /* the weights are freed first: what is left at the end is a leak */
    net_free(&net);
    check(mlprof_dump(1), "mlprof_dump");
    print_stats();
    print_results(probs, opt.batches * opt.batch_size, seconds);
    print_output_path("trace", "trace");
    print_output_path("memory_svg", "memory flow");
    print_output_path("memory_csv", "memory csv");

    free(probs);
    instruments_free(&ins);
    return 0;
}
