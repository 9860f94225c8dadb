/*
 * dnnl.c - oneDNN primitives (dnnl_primitive_execute): PyTorch's CPU
 * convolutions, linear layers and matmuls run here rather than in BLAS when
 * it uses the shared libdnnl. Each execution becomes a span in category
 * "dnnl" named after the primitive and its propagation kind
 * ("convolution_forward", "convolution_backward_weights", "reorder"), with
 * the shapes and element type of its source, weights and destination, its
 * implementation ("jit:avx2"), the bytes of those tensors, and for
 * convolution, inner product and matmul the FLOPs: 2 x (elements of the
 * destination) x (multiply-adds per destination element), which is also the
 * work of their backward passes (mlprof/opcost.h's formulas).
 *
 * Everything comes from the primitive descriptor. In oneDNN 2.x (Debian 12's
 * libdnnl.so.2) a memory descriptor is a struct that starts with ndims, the
 * dims and the data type, read here as such; oneDNN 3 made it opaque, and
 * there only the kind and implementation are given (said once). The few
 * oneDNN declarations used are written here from its documented API.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hook.h"
#include "mlprof/opcost.h"

#define EXPORT __attribute__((visibility("default")))

/* --- oneDNN 2.x, as documented in dnnl_types.h */
typedef struct dnnl_md_head {
    int ndims;
    int64_t dims[12];
    int data_type;
} dnnl_md_head;
typedef struct dnnl_version_info {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_info;

enum { Q_PRIMITIVE_KIND = 2, Q_IMPL_INFO_STR = 8, Q_PROP_KIND = 11, Q_SRC_MD = 129, Q_DIFF_SRC_MD = 130,
       Q_WEIGHTS_MD = 131, Q_DIFF_WEIGHTS_MD = 132, Q_DST_MD = 133, Q_DIFF_DST_MD = 134 };
enum { K_CONVOLUTION = 5, K_INNER_PRODUCT = 13, K_MATMUL = 18 };

static const char *const k_kinds[] = {
    "undefined",      "reorder", "shuffle",   "concat",     "sum",      "convolution", "deconvolution",
    "eltwise",        "softmax", "pooling",   "lrn",        "batch_normalization", "layer_normalization",
    "inner_product",  "rnn",     "gemm",      "binary",     "logsoftmax", "matmul",    "resampling",
    "pooling_v2",     "reduction", "prelu",   "softmax_v2"};
#define NKINDS (sizeof k_kinds / sizeof k_kinds[0])

typedef int (*execute_fn)(const void *prim, void *stream, int nargs, const void *args);
typedef int (*get_pd_fn)(const void *prim, const void **pd);
typedef int (*query_fn)(const void *pd, int what, int index, void *result);
typedef const dnnl_md_head *(*query_md_fn)(const void *pd, int what, int index);
typedef const dnnl_version_info *(*version_fn)(void);

static struct {
    execute_fn execute;  /* atomic: found at the first call */
    get_pd_fn get_pd;
    query_fn query;
    query_md_fn query_md; /* NULL: descriptors cannot be read (oneDNN 3) */
    mlprof_domain *domain;
    int said;
} D;

void mlprof__hook_dnnl_init(void) { D.domain = mlprof_domain_create("dnnl"); }

static int resolve(void)
{
    if (__atomic_load_n(&D.execute, __ATOMIC_ACQUIRE))
        return 0;
    execute_fn ex = (execute_fn)mlprof__hook_real("dnnl_primitive_execute");
    if (!ex)
        return -1;
    D.get_pd = (get_pd_fn)mlprof__hook_real("dnnl_primitive_get_primitive_desc");
    D.query = (query_fn)mlprof__hook_real("dnnl_primitive_desc_query");
    version_fn version = (version_fn)mlprof__hook_real("dnnl_version");
    const dnnl_version_info *v = version ? version() : NULL;
    if (v && v->major == 2)
        D.query_md = (query_md_fn)mlprof__hook_real("dnnl_primitive_desc_query_md");
    else if (!__atomic_exchange_n(&D.said, 1, __ATOMIC_RELAXED))
        mlprof__log(MLPROF_LOG_INFO, "oneDNN %d.%d: its primitives are recorded with their kind, not their "
                                     "shapes (read from oneDNN 2 only)", v ? v->major : 0, v ? v->minor : 0);
    __atomic_store_n(&D.execute, ex, __ATOMIC_RELEASE);
    return 0;
}

static int64_t elem_size(int t) { return t == 1 || t == 2 ? 2 : t == 3 || t == 4 ? 4 : t == 5 || t == 6 ? 1 : 0; }

static const char *type_name(int t)
{
    static const char *const names[] = {"undef", "float16", "bfloat16", "float32", "int32", "int8", "uint8"};
    return t >= 0 && t <= 6 ? names[t] : "other";
}

static int64_t elements(const dnnl_md_head *md)
{
    int64_t n = 1;
    for (int i = 0; i < md->ndims && i < 12; i++)
        n *= md->dims[i];
    return n;
}

/* The first of two memory descriptors the primitive has (forward, backward). */
static const dnnl_md_head *md_of(const void *pd, int what, int or_what)
{
    const dnnl_md_head *md = D.query_md(pd, what, 0);
    if (!md || md->ndims <= 0)
        md = D.query_md(pd, or_what, 0);
    return md && md->ndims > 0 && md->ndims <= 12 ? md : NULL;
}

static void arg_shape(const char *key, const dnnl_md_head *md)
{
    char text[12 * 21 + 3];
    size_t k = 0;
    text[k++] = '[';
    for (int i = 0; i < md->ndims; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%s%lld", i ? "," : "", (long long)md->dims[i]);
    snprintf(text + k, sizeof text - k, "]");
    mlprof_arg_str(key, text);
}

/* The FLOPs and bytes (mlprof/opcost.h) of a convolution, inner product or
 * matmul, whose backward passes do the same work on the same shapes; 0 for
 * other kinds or shapes that do not fit. A convolution of mixed types
 * (int8 in, int32 out) gets its bytes from the caller, tensor by tensor. */
static int product_cost(int kind, int prop, const dnnl_md_head *src, const dnnl_md_head *wei,
                        const dnnl_md_head *dst, mlprof_opcost *c, int *bytes_ok)
{
    if (!src || !wei || !dst)
        return 0;
    int64_t es = elem_size(src->data_type), ew = elem_size(wei->data_type), ed = elem_size(dst->data_type);
    int nd = src->ndims;
    *bytes_ok = 1;
    switch (kind) {
    case K_CONVOLUTION: {
        /* weights [OC, IC, K...], or [G, OC/G, IC/G, K...] with groups: as [OC, IC/G, K...] */
        if (nd < 3 || dst->ndims != nd || (wei->ndims != nd && wei->ndims != nd + 1))
            return 0;
        int64_t w[12];
        int grouped = wei->ndims == nd + 1;
        w[0] = grouped ? wei->dims[0] * wei->dims[1] : wei->dims[0];
        memcpy(w + 1, wei->dims + 1 + grouped, sizeof(int64_t) * (size_t)(nd - 1));
        int pass = prop == 160 ? MLPROF_CONV_BACKWARD_DATA : prop == 192 ? MLPROF_CONV_BACKWARD_FILTER
                                                                         : MLPROF_CONV_FORWARD;
        *bytes_ok = es == ew && es == ed;
        return mlprof_opcost_conv(pass, nd, src->dims, w, dst->dims, es, 0, c) == 0;
    }
    case K_INNER_PRODUCT: /* src [N, IC, ...] x weights [OC, IC, ...]: a GEMM of K = IC x ... */
        if (nd < 2 || wei->ndims != nd || wei->dims[0] <= 0)
            return 0;
        return mlprof_opcost_gemm(1, src->dims[0], wei->dims[0], elements(wei) / wei->dims[0], es, ew, ed, 0, c) == 0;
    case K_MATMUL: { /* [.., M, K] x [.., K, N]; weights shared by the batch fold into M */
        if (nd < 2 || wei->ndims < 2 || dst->ndims < 2)
            return 0;
        int64_t m = src->dims[nd - 2], k = src->dims[nd - 1], n = wei->dims[wei->ndims - 1];
        if (m <= 0 || n <= 0)
            return 0;
        int64_t batch = elements(dst) / (m * n);
        if (elements(wei) == k * n)
            return mlprof_opcost_gemm(1, batch * m, n, k, es, ew, ed, 0, c) == 0;
        return mlprof_opcost_gemm(batch, m, n, k, es, ew, ed, 0, c) == 0;
    }
    default:
        return 0;
    }
}

static void describe(const void *prim)
{
    const void *pd = NULL;
    int kind = 0, prop = 0;
    if (!D.get_pd || D.get_pd(prim, &pd) != 0 || !pd || !D.query || D.query(pd, Q_PRIMITIVE_KIND, 0, &kind) != 0)
        kind = 0;
    if (pd && D.query)
        D.query(pd, Q_PROP_KIND, 0, &prop);
    const char *suffix = prop == 64 || prop == 96 ? "_forward" : prop == 128 ? "_backward"
                         : prop == 160 ? "_backward_data" : prop == 192 ? "_backward_weights"
                         : prop == 193 ? "_backward_bias" : "";
    char name[64];
    snprintf(name, sizeof name, "%s%s", kind >= 0 && (size_t)kind < NKINDS ? k_kinds[kind] : "primitive", suffix);
    mlprof_begin_dynamic(D.domain, name);
    const char *impl = NULL;
    if (pd && D.query && D.query(pd, Q_IMPL_INFO_STR, 0, &impl) == 0 && impl)
        mlprof_arg_str("impl", impl);
    if (!pd || !D.query_md)
        return;
    const dnnl_md_head *src = md_of(pd, Q_SRC_MD, Q_DIFF_SRC_MD);
    const dnnl_md_head *wei = md_of(pd, Q_WEIGHTS_MD, Q_DIFF_WEIGHTS_MD);
    const dnnl_md_head *dst = md_of(pd, Q_DST_MD, Q_DIFF_DST_MD);
    int64_t bytes = 0;
    if (src) {
        arg_shape("src_shape", src);
        mlprof_arg_str("dtype", type_name(src->data_type));
        bytes += elements(src) * elem_size(src->data_type);
    }
    if (wei) {
        arg_shape("weights_shape", wei);
        bytes += elements(wei) * elem_size(wei->data_type);
    }
    if (dst) {
        arg_shape("dst_shape", dst);
        bytes += elements(dst) * elem_size(dst->data_type);
    }
    mlprof_opcost c;
    int bytes_ok;
    if (product_cost(kind, prop, src, wei, dst, &c, &bytes_ok)) {
        mlprof_arg_int("flops", c.flops);
        if (bytes_ok)
            bytes = c.bytes;
    }
    if (bytes) /* other kinds: each tensor read or written once, as opcost counts */
        mlprof_arg_int("bytes", bytes);
}

EXPORT int dnnl_primitive_execute(const void *prim, void *stream, int nargs, const void *args);

EXPORT int dnnl_primitive_execute(const void *prim, void *stream, int nargs, const void *args)
{
    if (resolve() != 0) {
        mlprof__log(MLPROF_LOG_ERROR, "dnnl_primitive_execute was called, but no library defines it");
        return 2; /* dnnl_invalid_arguments */
    }
    int span = mlprof__busy == 0 && mlprof__hook_on(MLPROF__HOOK_DNNL) && (mlprof_active_flag & 1);
    if (span)
        describe(prim);
    int rc = D.execute(prim, stream, nargs, args);
    if (span)
        mlprof_end_dynamic(D.domain);
    return rc;
}
