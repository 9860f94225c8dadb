/*
 * opcost.c - the FLOPs and bytes of ML operators (mlprof/opcost.h): one
 * formula per operator family, and PyTorch's operator names mapped onto them
 * through a table, from the shapes, types and scalar arguments that traces
 * hold as text. Used by the interposers, mlprof.torch (through ctypes) and
 * the analyzer, so that an operator's count does not depend on who recorded
 * it. No allocation and no lock: the interposers call it on their path.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mlprof/opcost.h"
#include "common.h"

/* ------------------------------------------------------- checked counting */

/* Products and sums of sizes, remembering an overflow or a negative size
 * instead of wrapping: a corrupt shape gives an error, not a wrong count. */
typedef struct count {
    int bad;
} count;

static int64_t mul(count *c, int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) {
        c->bad = 1;
        return 0;
    }
    return r;
}

static int64_t add(count *c, int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) {
        c->bad = 1;
        return 0;
    }
    return r;
}

static int finish(const count *c, const char *what, int64_t flops, int64_t bytes, mlprof_opcost *cost)
{
    if (!cost)
        return mlprof__fail(MLPROF_EINVAL, "%s: no result given", what);
    if (c->bad) {
        cost->flops = cost->bytes = 0;
        return mlprof__fail(MLPROF_EINVAL, "%s: a negative size, or a count beyond 2^63", what);
    }
    cost->flops = flops;
    cost->bytes = bytes;
    return MLPROF_OK;
}

/* ------------------------------------------------------------ the formulas */

int mlprof_opcost_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t ea, int64_t eb, int64_t ec,
                       int flags, mlprof_opcost *cost)
{
    count c = {0};
    int64_t mn = mul(&c, m, n);
    int64_t flops = mul(&c, mul(&c, 2, batch), mul(&c, mn, k));
    int64_t one = add(&c, add(&c, mul(&c, ea, mul(&c, m, k)), mul(&c, eb, mul(&c, k, n))),
                      mul(&c, ec, mul(&c, (flags & MLPROF_OPCOST_ACCUMULATE) ? 2 : 1, mn)));
    int64_t bytes = mul(&c, batch, one);
    if (flags & MLPROF_OPCOST_BIAS)
        bytes = add(&c, bytes, mul(&c, ec, n));
    return finish(&c, "mlprof_opcost_gemm", flops, bytes, cost);
}

int mlprof_opcost_gemv(int64_t out, int64_t in, int64_t elem, int flags, mlprof_opcost *cost)
{
    count c = {0};
    int64_t a = mul(&c, out, in);
    int64_t flops = mul(&c, 2, a);
    int64_t outs = mul(&c, out, (flags & MLPROF_OPCOST_ACCUMULATE) ? 2 : 1);
    int64_t bytes = mul(&c, elem, add(&c, add(&c, a, in), outs));
    return finish(&c, "mlprof_opcost_gemv", flops, bytes, cost);
}

static int64_t elements(count *c, int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n = mul(c, n, dims[i]);
    return n;
}

int mlprof_opcost_conv(int pass, int ndim, const int64_t *x, const int64_t *w, const int64_t *y, int64_t elem,
                       int flags, mlprof_opcost *cost)
{
    if (ndim < 3 || ndim > 16 || !x || !w || !y)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_opcost_conv: %d dimensions (3 to 16: N, C and the spatial ones)",
                            ndim);
    if (pass < MLPROF_CONV_FORWARD || pass > MLPROF_CONV_BACKWARD_FILTER)
        return mlprof__fail(MLPROF_EINVAL, "mlprof_opcost_conv: pass %d (0 forward, 1 data, 2 filter)", pass);
    count c = {0};
    int64_t nx = elements(&c, ndim, x), nw = elements(&c, ndim, w), ny = elements(&c, ndim, y);
    /* multiply-adds per output element: (C/G) x the kernel's size */
    int64_t macs = elements(&c, ndim - 1, w + 1);
    int64_t flops = mul(&c, 2, mul(&c, ny, macs));
    int64_t written = pass == MLPROF_CONV_FORWARD ? ny : pass == MLPROF_CONV_BACKWARD_DATA ? nx : nw;
    int64_t moved = add(&c, add(&c, nx, nw), ny);
    if (flags & MLPROF_OPCOST_ACCUMULATE)
        moved = add(&c, moved, written);
    if ((flags & MLPROF_OPCOST_BIAS) && pass == MLPROF_CONV_FORWARD)
        moved = add(&c, moved, w[0]);
    return finish(&c, "mlprof_opcost_conv", flops, mul(&c, elem, moved), cost);
}

/* The (i, j) pairs with j <= i, i < lq, j < lk: sum over i of min(i + 1, lk). */
static int64_t causal_pairs(count *c, int64_t lq, int64_t lk)
{
    int64_t full = lq < lk ? lq : lk; /* rows 0..full-1 see i + 1 keys */
    int64_t tri = full % 2 == 0 ? mul(c, full / 2, add(c, full, 1)) : mul(c, full, add(c, full, 1) / 2);
    return add(c, tri, mul(c, lq - full, lk));
}

int mlprof_opcost_attention(int64_t bh, int64_t lq, int64_t lk, int64_t d, int64_t dv, int64_t elem, int flags,
                            mlprof_opcost *cost)
{
    count c = {0};
    if (lq < 0 || lk < 0)
        c.bad = 1;
    int64_t pairs = (flags & MLPROF_OPCOST_CAUSAL) && !c.bad ? causal_pairs(&c, lq, lk) : mul(&c, lq, lk);
    int64_t per_pair = add(&c, add(&c, mul(&c, 2, d), mul(&c, 2, dv)), 6);
    int64_t flops = mul(&c, bh, mul(&c, pairs, per_pair));
    int64_t one = add(&c, add(&c, mul(&c, lq, d), mul(&c, lk, d)), add(&c, mul(&c, lk, dv), mul(&c, lq, dv)));
    return finish(&c, "mlprof_opcost_attention", flops, mul(&c, elem, mul(&c, bh, one)), cost);
}

int mlprof_opcost_elementwise(int64_t out, int64_t in, int64_t flops_per_element, int64_t elem,
                              mlprof_opcost *cost)
{
    count c = {0};
    int64_t flops = mul(&c, flops_per_element, out);
    return finish(&c, "mlprof_opcost_elementwise", flops, mul(&c, elem, add(&c, in, out)), cost);
}

int mlprof_opcost_reduce(int64_t in, int64_t out, int64_t elem, int flags, mlprof_opcost *cost)
{
    count c = {0};
    if (out > in || (out == 0 && in > 0))
        c.bad = 1;
    int64_t flops = c.bad ? 0 : in - out;
    if (flags & MLPROF_OPCOST_MEAN)
        flops = add(&c, flops, out);
    return finish(&c, "mlprof_opcost_reduce", flops, mul(&c, elem, add(&c, in, out)), cost);
}

int mlprof_opcost_softmax(int64_t n, int64_t elem, mlprof_opcost *cost)
{
    count c = {0};
    return finish(&c, "mlprof_opcost_softmax", mul(&c, 5, n), mul(&c, elem, mul(&c, 2, n)), cost);
}

int mlprof_opcost_norm(int64_t n, int64_t sets, int64_t params, int64_t elem, int flags, mlprof_opcost *cost)
{
    count c = {0};
    int64_t per = 2 + ((flags & MLPROF_OPCOST_RUNNING) ? 0 : 4) + (params > 0 ? 2 : 0);
    int64_t moved = add(&c, mul(&c, 2, n), params);
    if (flags & MLPROF_OPCOST_RUNNING)
        moved = add(&c, moved, mul(&c, 2, sets));
    if (flags & MLPROF_OPCOST_SAVE_STATS)
        moved = add(&c, moved, mul(&c, 2, sets));
    if (sets < 0)
        c.bad = 1;
    return finish(&c, "mlprof_opcost_norm", mul(&c, per, n), mul(&c, elem, moved), cost);
}

/* ------------------------------------------------------------------ types */

int mlprof_opcost_type_size(const char *type)
{
    static const struct {
        const char *name;
        int size;
    } k_types[] = {
        {"float", 4}, {"float32", 4}, {"double", 8}, {"float64", 8}, {"c10::Half", 2}, {"half", 2},
        {"float16", 2}, {"c10::BFloat16", 2}, {"bfloat16", 2}, {"int", 4}, {"int32", 4}, {"long", 8},
        {"long int", 8}, {"int64", 8}, {"short", 2}, {"int16", 2}, {"signed char", 1}, {"int8", 1},
        {"unsigned char", 1}, {"uint8", 1}, {"bool", 1}, {"c10::complex<float>", 8}, {"complex64", 8},
        {"c10::complex<double>", 16}, {"complex128", 16}, {"c10::complex<c10::Half>", 4},
        {"complex32", 4}, {"c10::Float8_e4m3fn", 1}, {"float8_e4m3fn", 1}, {"c10::Float8_e5m2", 1},
        {"float8_e5m2", 1}, {"float8_e4m3fnuz", 1}, {"float8_e5m2fnuz", 1}, {"c10::Float8_e4m3fnuz", 1},
        {"c10::Float8_e5m2fnuz", 1}};
    if (!type)
        return 0;
    if (strncmp(type, "torch.", 6) == 0)
        type += 6;
    for (size_t i = 0; i < sizeof k_types / sizeof *k_types; i++) {
        if (strcmp(type, k_types[i].name) == 0)
            return k_types[i].size;
    }
    return 0;
}

/* ------------------------------------------------------- the arguments' text */

#define MAX_ARGS 32
#define MAX_DIMS 12

enum { A_NONE, A_TENSOR, A_LIST };

/* One argument as the shapes' text gives it: a tensor's dimensions, a list
 * of tensors, or a non-tensor ([] with a type that is not a tensor's). */
typedef struct arg {
    int kind, ndim, elem;
    int64_t dims[MAX_DIMS];
} arg;

typedef struct args {
    arg a[MAX_ARGS];
    int n;
    int positional; /* PyTorch's form: every argument, non-tensors as [] */
    int op[MAX_ARGS], nop; /* the tensors, in order */
    int elem;       /* the first tensor's element size, 0 when unknown */
    const char *scalars;
} args;

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    return p;
}

/* After an opening bracket at p: the character after its matching closing one, or NULL. */
static const char *skip_brackets(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && --depth == 0)
            return p + 1;
    }
    return NULL;
}

/* A flat list of integers at p ("[2, 3]"): its dimensions into a, the end
 * into *end. Returns 0, or -1 when it is not one. */
static int parse_dims(const char *p, arg *a, const char **end)
{
    p = skip_space(p);
    if (*p != '[')
        return -1;
    p = skip_space(p + 1);
    a->ndim = 0;
    while (*p != ']') {
        char *e;
        long long v = strtoll(p, &e, 10);
        if (e == p || a->ndim == MAX_DIMS || v < 0)
            return -1;
        a->dims[a->ndim++] = v;
        p = skip_space(e);
        if (*p == ',')
            p = skip_space(p + 1);
        else if (*p != ']')
            return -1;
    }
    *end = p + 1;
    return 0;
}

/* "[[2,3],[3]]", "[[], [[1,2],[3]], [4]]", or one flat shape "[2,3]". */
static int parse_shapes(const char *text, args *s)
{
    const char *p = skip_space(text);
    if (*p != '[')
        return -1;
    const char *q = skip_space(p + 1);
    if (isdigit((unsigned char)*q)) { /* one tensor's shape */
        s->n = 1;
        s->a[0].kind = A_TENSOR;
        return parse_dims(p, &s->a[0], &q);
    }
    p = q;
    while (*p && *p != ']') {
        if (s->n == MAX_ARGS)
            return -1;
        arg *a = &s->a[s->n++];
        const char *inner = skip_space(p + 1);
        if (*p == '[' && *inner == '[') {
            a->kind = A_LIST;
            p = skip_brackets(p);
        } else if (*p == '[') {
            a->kind = A_TENSOR;
            if (parse_dims(p, a, &p) != 0)
                return -1;
        } else { /* null, None: not a tensor */
            a->kind = A_NONE;
            p += strcspn(p, ",]");
        }
        if (!p)
            return -1;
        p = skip_space(p);
        if (*p == ',')
            p = skip_space(p + 1);
    }
    return *p == ']' ? 0 : -1;
}

/* "float32,float32" or ["float", "float", "Scalar"]: the element size of
 * each argument (0 for a non-tensor). Returns how many, or -1. */
static int parse_types(const char *text, int *sizes, int max)
{
    int n = 0;
    const char *p = skip_space(text);
    if (*p == '[')
        p++;
    while (*p) {
        p = skip_space(p);
        if (*p == ']' || !*p)
            break;
        char name[64];
        size_t len;
        if (*p == '"') {
            len = strcspn(p + 1, "\"");
            if (!p[1 + len])
                return -1;
            if (len >= sizeof name)
                len = sizeof name - 1;
            memcpy(name, p + 1, len);
            p += strcspn(p + 1, "\"") + 2;
        } else {
            len = strcspn(p, ",]");
            size_t keep = len < sizeof name ? len : sizeof name - 1;
            memcpy(name, p, keep);
            p += len;
            len = keep;
            while (len && name[len - 1] == ' ')
                len--;
        }
        name[len] = '\0';
        if (n == max)
            return -1;
        sizes[n++] = mlprof_opcost_type_size(name);
        p = skip_space(p);
        if (*p == ',')
            p++;
    }
    return n;
}

static int parse_args(const char *shapes, const char *types, const char *scalars, args *s)
{
    memset(s, 0, sizeof *s);
    s->scalars = scalars;
    if (!shapes || parse_shapes(shapes, s) != 0)
        return -1;
    int sizes[MAX_ARGS];
    int nt = types ? parse_types(types, sizes, MAX_ARGS) : -1;
    int typed = nt == s->n;
    for (int i = 0; i < s->n; i++) {
        arg *a = &s->a[i];
        a->elem = typed ? sizes[i] : 0;
        /* a 0-d tensor and a non-tensor are both []: the type tells them apart */
        if (a->kind == A_TENSOR && (typed ? a->elem == 0 : a->ndim == 0))
            a->kind = A_NONE;
        if (a->kind == A_NONE || a->kind == A_LIST)
            s->positional = 1;
        if (a->kind == A_TENSOR)
            s->op[s->nop++] = i;
    }
    s->elem = s->nop ? s->a[s->op[0]].elem : 0;
    return 0;
}

/* The i-th tensor argument, or NULL. */
static const arg *operand(const args *s, int i) { return i < s->nop ? &s->a[s->op[i]] : NULL; }

/* The argument at position pos when the text has every argument (PyTorch's
 * form), NULL when it is not a tensor there or the text has tensors only. */
static const arg *at(const args *s, int pos)
{
    return s->positional && pos < s->n && s->a[pos].kind == A_TENSOR ? &s->a[pos] : NULL;
}

static int64_t numel(count *c, const arg *a) { return elements(c, a->ndim, a->dims); }

/* The text of scalar argument pos (the JSON string's content) into buf; 0
 * when given and not empty, -1 otherwise. */
static int scalar(const args *s, int pos, char *buf, size_t len)
{
    const char *p = s->scalars ? skip_space(s->scalars) : NULL;
    if (!p || *p != '[' || pos < 0)
        return -1;
    p++;
    for (int i = 0;; i++) {
        p = skip_space(p);
        if (*p != '"')
            return -1;
        const char *start = ++p;
        while (*p && *p != '"')
            p += *p == '\\' && p[1] ? 2 : 1;
        if (!*p)
            return -1;
        if (i == pos) {
            size_t n = (size_t)(p - start);
            if (n == 0 || n >= len)
                return -1;
            memcpy(buf, start, n);
            buf[n] = '\0';
            return 0;
        }
        p = skip_space(p + 1);
        if (*p != ',')
            return -1;
        p++;
    }
}

/* A scalar that is a list of integers ("[2, 2]", or one "2" for all n),
 * into v[n]; dflt when not given. Returns 0, or -1 when malformed. */
static int scalar_ints(const args *s, int pos, int64_t *v, int n, int64_t dflt)
{
    char buf[256];
    for (int i = 0; i < n; i++)
        v[i] = dflt;
    if (scalar(s, pos, buf, sizeof buf) != 0)
        return 0;
    arg a;
    const char *end;
    if (buf[0] != '[') {
        char *e;
        long long x = strtoll(buf, &e, 10);
        if (e == buf || *skip_space(e))
            return -1;
        for (int i = 0; i < n; i++)
            v[i] = x;
        return 0;
    }
    if (parse_dims(buf, &a, &end) != 0 || (a.ndim != n && a.ndim != 1))
        return -1;
    for (int i = 0; i < n; i++)
        v[i] = a.dims[a.ndim == 1 ? 0 : i];
    return 0;
}

/* A boolean scalar: 1, 0, or dflt when not given. */
static int scalar_bool(const args *s, int pos, int dflt)
{
    char buf[16];
    if (scalar(s, pos, buf, sizeof buf) != 0)
        return dflt;
    return strcasecmp(buf, "true") == 0 || strcmp(buf, "1") == 0;
}

/* ----------------------------------------------------------- the operators */

enum {
    OP_MM, OP_ADDMM, OP_BMM, OP_BADDBMM, OP_MATMUL, OP_LINEAR, OP_MV, OP_ADDMV, OP_CONV, OP_CONV_BACKWARD,
    OP_ATTENTION, OP_ELEMENTWISE, OP_SUM, OP_MEAN, OP_SOFTMAX, OP_LAYER_NORM, OP_BATCH_NORM, OP_GROUP_NORM
};

/* Where a convolution's scalar arguments are (-1: not an argument). */
typedef struct conv_pos {
    int8_t stride, padding, dilation, transposed, output_padding, bias, groups;
    int8_t is_transposed; /* conv_transpose*: always transposed */
} conv_pos;

typedef struct op_info {
    const char *name; /* without "aten::" */
    int kind;
    int per_element;  /* elementwise: FLOPs per output element; others: an argument position */
    conv_pos conv;
} op_info;

#define CONV(s, p, d, t, o, b, g, tr) {s, p, d, t, o, b, g, tr}
/* The positions follow native_functions.yaml's signatures. */
#define CONVNd CONV(3, 4, 5, -1, -1, 2, 6, 0)       /* conv2d(input, weight, bias, stride, padding, dilation, groups) */
#define CONV_T CONV(3, 4, 7, -1, 5, 2, 6, 1)        /* conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation) */
#define CONV_GEN CONV(3, 4, 5, 6, 7, 2, 8, 0)       /* convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups) */

/* Sorted by name (bsearch). per_element of elementwise operators: add, sub,
 * mul, div, max, min, compare, select: 1; exp, log, sqrt, tanh, erf: 1;
 * sigmoid 1/(1+exp(-x)): 4; silu x*sigmoid(x): 5; gelu (erf form)
 * x/2*(1+erf(x/sqrt 2)): 5; softplus log(1+exp x): 3; clamp: 2; addcmul,
 * addcdiv a+v*b*c: 3; sigmoid_backward dy*y*(1-y): 3; tanh_backward
 * dy*(1-y*y): 3; threshold_backward (a select): 1. */
static const op_info k_ops[] = {
    {"_convolution", OP_CONV, 0, CONV_GEN},
    {"_log_softmax", OP_SOFTMAX, 0, {0}},
    {"_scaled_dot_product_attention_math", OP_ATTENTION, 5, {0}},
    {"_scaled_dot_product_cudnn_attention", OP_ATTENTION, 6, {0}},
    {"_scaled_dot_product_efficient_attention", OP_ATTENTION, 6, {0}},
    {"_scaled_dot_product_flash_attention", OP_ATTENTION, 4, {0}},
    {"_scaled_dot_product_flash_attention_for_cpu", OP_ATTENTION, 4, {0}},
    {"_slow_conv2d_forward", OP_CONV, 0, CONV(4, 5, -1, -1, -1, 3, -1, 0)},
    {"_softmax", OP_SOFTMAX, 0, {0}},
    {"abs", OP_ELEMENTWISE, 1, {0}},
    {"add", OP_ELEMENTWISE, 1, {0}},
    {"addcdiv", OP_ELEMENTWISE, 3, {0}},
    {"addcmul", OP_ELEMENTWISE, 3, {0}},
    {"addmm", OP_ADDMM, 0, {0}},
    {"addmv", OP_ADDMV, 0, {0}},
    {"baddbmm", OP_BADDBMM, 0, {0}},
    {"batch_norm", OP_BATCH_NORM, 5, {0}},
    {"bmm", OP_BMM, 0, {0}},
    {"clamp", OP_ELEMENTWISE, 2, {0}},
    {"clamp_max", OP_ELEMENTWISE, 1, {0}},
    {"clamp_min", OP_ELEMENTWISE, 1, {0}},
    {"conv1d", OP_CONV, 0, CONVNd},
    {"conv2d", OP_CONV, 0, CONVNd},
    {"conv3d", OP_CONV, 0, CONVNd},
    {"conv_transpose1d", OP_CONV, 0, CONV_T},
    {"conv_transpose2d", OP_CONV, 0, CONV_T},
    {"conv_transpose3d", OP_CONV, 0, CONV_T},
    {"convolution", OP_CONV, 0, CONV_GEN},
    {"convolution_backward", OP_CONV_BACKWARD, 0, CONV(4, 5, 6, 7, 8, -1, 9, 0)},
    /* cudnn_convolution(self, weight, padding, stride, dilation, groups, ...) */
    {"cudnn_convolution", OP_CONV, 0, CONV(3, 2, 4, -1, -1, -1, 5, 0)},
    {"div", OP_ELEMENTWISE, 1, {0}},
    {"erf", OP_ELEMENTWISE, 1, {0}},
    {"exp", OP_ELEMENTWISE, 1, {0}},
    {"gelu", OP_ELEMENTWISE, 5, {0}},
    {"group_norm", OP_GROUP_NORM, 1, {0}},
    {"layer_norm", OP_LAYER_NORM, 0, {0}},
    {"leaky_relu", OP_ELEMENTWISE, 2, {0}},
    {"linear", OP_LINEAR, 0, {0}},
    {"log", OP_ELEMENTWISE, 1, {0}},
    {"log_softmax", OP_SOFTMAX, 0, {0}},
    {"matmul", OP_MATMUL, 0, {0}},
    {"maximum", OP_ELEMENTWISE, 1, {0}},
    {"mean", OP_MEAN, 0, {0}},
    {"minimum", OP_ELEMENTWISE, 1, {0}},
    /* mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups) */
    {"mkldnn_convolution", OP_CONV, 0, CONV(4, 3, 5, -1, -1, 2, 6, 0)},
    {"mm", OP_MM, 0, {0}},
    {"mul", OP_ELEMENTWISE, 1, {0}},
    {"mv", OP_MV, 0, {0}},
    {"native_batch_norm", OP_BATCH_NORM, 5, {0}},
    {"native_group_norm", OP_GROUP_NORM, 5, {0}},
    {"native_layer_norm", OP_LAYER_NORM, 1, {0}},
    {"neg", OP_ELEMENTWISE, 1, {0}},
    {"pow", OP_ELEMENTWISE, 1, {0}},
    {"reciprocal", OP_ELEMENTWISE, 1, {0}},
    {"relu", OP_ELEMENTWISE, 1, {0}},
    {"rsqrt", OP_ELEMENTWISE, 1, {0}},
    {"rsub", OP_ELEMENTWISE, 1, {0}},
    {"scaled_dot_product_attention", OP_ATTENTION, 5, {0}},
    {"sigmoid", OP_ELEMENTWISE, 4, {0}},
    {"sigmoid_backward", OP_ELEMENTWISE, 3, {0}},
    {"silu", OP_ELEMENTWISE, 5, {0}},
    {"softmax", OP_SOFTMAX, 0, {0}},
    {"softplus", OP_ELEMENTWISE, 3, {0}},
    {"sqrt", OP_ELEMENTWISE, 1, {0}},
    {"square", OP_ELEMENTWISE, 1, {0}},
    {"sub", OP_ELEMENTWISE, 1, {0}},
    {"sum", OP_SUM, 0, {0}},
    {"tanh", OP_ELEMENTWISE, 1, {0}},
    {"tanh_backward", OP_ELEMENTWISE, 3, {0}},
    {"thnn_conv2d", OP_CONV, 0, CONV(4, 5, -1, -1, -1, 3, -1, 0)},
    {"threshold_backward", OP_ELEMENTWISE, 1, {0}},
};

static int op_cmp(const void *key, const void *item) { return strcmp(key, ((const op_info *)item)->name); }

/* The operator named name ("aten::add_", "add"), in-place forms as their
 * functional one; NULL when unknown. */
static const op_info *find_op(const char *name)
{
    if (strncmp(name, "aten::", 6) == 0)
        name += 6;
    size_t n = strcspn(name, "."); /* an overload: "add.Tensor" */
    char base[64];
    if (n == 0 || n >= sizeof base)
        return NULL;
    memcpy(base, name, n);
    base[n] = '\0';
    const op_info *op = bsearch(base, k_ops, sizeof k_ops / sizeof *k_ops, sizeof *k_ops, op_cmp);
    if (!op && n > 1 && base[n - 1] == '_' && base[n - 2] != '_') {
        base[n - 1] = '\0';
        op = bsearch(base, k_ops, sizeof k_ops / sizeof *k_ops, sizeof *k_ops, op_cmp);
        if (op && op->kind != OP_ELEMENTWISE)
            op = NULL; /* only elementwise operators have in-place forms here */
    }
    return op;
}

static int gemm_of(const args *s, int64_t batch, int64_t m, int64_t n, int64_t k, int64_t extra_elems,
                   mlprof_opcost *cost)
{
    int64_t e = s->elem;
    if (mlprof_opcost_gemm(batch, m, n, k, e, e, e, 0, cost) != 0)
        return 0;
    count c = {0};
    cost->bytes = add(&c, cost->bytes, mul(&c, e, extra_elems));
    return c.bad ? 0 : MLPROF_OPCOST_HAS_FLOPS | (e ? MLPROF_OPCOST_HAS_BYTES : 0);
}

static int cost_mm(const op_info *op, const args *s, mlprof_opcost *cost)
{
    int first = op->kind == OP_ADDMM || op->kind == OP_BADDBMM || op->kind == OP_ADDMV;
    const arg *a = operand(s, first), *b = operand(s, first + 1), *self = first ? operand(s, 0) : NULL;
    if (!a || !b || (first && !self))
        return 0;
    count c = {0};
    int64_t extra = self ? numel(&c, self) : 0;
    switch (op->kind) {
    case OP_MM:
    case OP_ADDMM:
        if (a->ndim != 2 || b->ndim != 2 || a->dims[1] != b->dims[0])
            return 0;
        return gemm_of(s, 1, a->dims[0], b->dims[1], a->dims[1], extra, cost);
    case OP_BMM:
    case OP_BADDBMM:
        if (a->ndim != 3 || b->ndim != 3 || a->dims[0] != b->dims[0] || a->dims[2] != b->dims[1])
            return 0;
        return gemm_of(s, a->dims[0], a->dims[1], b->dims[2], a->dims[2], extra, cost);
    default: /* mv, addmv */
        if (a->ndim != 2 || b->ndim != 1 || a->dims[1] != b->dims[0])
            return 0;
        if (mlprof_opcost_gemv(a->dims[0], a->dims[1], s->elem, 0, cost) != 0)
            return 0;
        cost->bytes = add(&c, cost->bytes, mul(&c, s->elem, extra));
        return c.bad ? 0 : MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
    }
}

/* torch.matmul: 1-d operands promoted, batch dimensions broadcast. */
static int cost_matmul(const args *s, mlprof_opcost *cost)
{
    const arg *a = operand(s, 0), *b = operand(s, 1);
    if (!a || !b || a->ndim == 0 || b->ndim == 0)
        return 0;
    count c = {0};
    int64_t k = a->dims[a->ndim - 1];
    int64_t kb = b->dims[b->ndim == 1 ? 0 : b->ndim - 2], n = b->ndim == 1 ? 1 : b->dims[b->ndim - 1];
    if (k != kb)
        return 0;
    if (b->ndim <= 2) /* a's leading dimensions are rows of one GEMM */
        return gemm_of(s, 1, numel(&c, a) / (k ? k : 1), n, k, 0, cost) * !c.bad;
    int64_t m = a->ndim == 1 ? 1 : a->dims[a->ndim - 2];
    /* the batch: a's and b's leading dimensions broadcast */
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim - 2, nbatch = na > nb ? na : nb;
    int64_t batch = 1;
    for (int i = 0; i < nbatch; i++) {
        int64_t x = i < nbatch - na ? 1 : a->dims[i - (nbatch - na)];
        int64_t y = i < nbatch - nb ? 1 : b->dims[i - (nbatch - nb)];
        if (x != y && x != 1 && y != 1)
            return 0;
        batch = mul(&c, batch, x > y ? x : y);
    }
    if (c.bad || mlprof_opcost_gemm(batch, m, n, k, s->elem, s->elem, s->elem, 0, cost) != 0)
        return 0;
    /* each operand read once at its own size, broadcast or not */
    cost->bytes = mul(&c, s->elem, add(&c, add(&c, numel(&c, a), numel(&c, b)), mul(&c, batch, mul(&c, m, n))));
    return c.bad ? 0 : MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

static int cost_linear(const args *s, mlprof_opcost *cost)
{
    const arg *x = operand(s, 0), *w = operand(s, 1), *bias = operand(s, 2);
    if (!x || !w || x->ndim < 1 || w->ndim != 2 || x->dims[x->ndim - 1] != w->dims[1])
        return 0;
    count c = {0};
    int64_t k = w->dims[1], rows = k ? numel(&c, x) / k : 0;
    return c.bad ? 0 : gemm_of(s, 1, rows, w->dims[0], k, bias ? numel(&c, bias) : 0, cost);
}

/* A convolution's output size along one dimension (PyTorch's formula). */
static int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t outpad, int transposed)
{
    const int64_t big = (int64_t)1 << 31; /* no real convolution comes near; keeps the sums below exact */
    if (stride <= 0 || dil <= 0 || pad < 0 || outpad < 0 || in > big || k > big || stride > big || pad > big ||
        dil > big || outpad > big)
        return -1;
    if (transposed)
        return (in - 1) * stride - 2 * pad + dil * (k - 1) + outpad + 1;
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? -1 : span / stride + 1;
}

static int cost_conv(const op_info *op, const args *s, const args *outs, mlprof_opcost *cost)
{
    const conv_pos *p = &op->conv;
    const arg *x = operand(s, 0), *w = operand(s, 1);
    if (!x || !w || x->ndim < 3 || x->ndim != w->ndim)
        return 0;
    int nd = x->ndim, sp = nd - 2;
    int transposed = p->is_transposed || (p->transposed >= 0 && scalar_bool(s, p->transposed, 0));
    int64_t y[MAX_DIMS];
    const arg *given = outs ? operand(outs, 0) : NULL;
    if (given && given->ndim == nd) {
        memcpy(y, given->dims, sizeof(int64_t) * (size_t)nd);
    } else {
        /* the output from stride, padding and dilation, when the scalars hold them */
        char buf[32];
        int64_t stride[MAX_DIMS], pad[MAX_DIMS], dil[MAX_DIMS], outpad[MAX_DIMS];
        if (p->stride < 0 || scalar(s, p->stride, buf, sizeof buf) != 0 || scalar(s, p->padding, buf, sizeof buf) != 0)
            return 0;
        int same = strcmp(buf, "same") == 0, valid = strcmp(buf, "valid") == 0; /* conv2d.padding */
        if (scalar_ints(s, p->stride, stride, sp, 1) || (!same && !valid && scalar_ints(s, p->padding, pad, sp, 0)) ||
            scalar_ints(s, p->dilation, dil, sp, 1) || scalar_ints(s, p->output_padding, outpad, sp, 0))
            return 0;
        y[0] = x->dims[0];
        int64_t groups = 1;
        if (scalar_ints(s, p->groups, &groups, 1, 1) || groups <= 0)
            return 0;
        count c = {0};
        y[1] = transposed ? mul(&c, w->dims[1], groups) : w->dims[0]; /* transposed weights: [C, K/G, R..] */
        if (c.bad)
            return 0;
        for (int i = 0; i < sp; i++) {
            if (same) /* PyTorch allows "same" with stride 1 only: the input's size */
                y[2 + i] = stride[i] == 1 ? x->dims[2 + i] : -1;
            else
                y[2 + i] = conv_out(x->dims[2 + i], w->dims[2 + i], stride[i], valid ? 0 : pad[i], dil[i], outpad[i],
                                    transposed);
            if (y[2 + i] < 0)
                return 0;
        }
    }
    const arg *bias = p->bias >= 0 ? (s->positional ? at(s, p->bias) : operand(s, 2)) : NULL;
    int flags = bias && bias->ndim == 1 ? MLPROF_OPCOST_BIAS : 0;
    /* a transposed convolution is the data gradient of the one from its output to its input */
    int rc = transposed ? mlprof_opcost_conv(MLPROF_CONV_BACKWARD_DATA, nd, y, w->dims, x->dims, s->elem, 0, cost)
                        : mlprof_opcost_conv(MLPROF_CONV_FORWARD, nd, x->dims, w->dims, y, s->elem, flags, cost);
    if (rc != 0)
        return 0;
    if (transposed && flags) {
        count c = {0};
        cost->bytes = add(&c, cost->bytes, mul(&c, s->elem, bias->dims[0]));
    }
    return MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

/* convolution_backward(grad_output, input, weight, bias_sizes, stride,
 * padding, dilation, transposed, output_padding, groups, output_mask): the
 * passes that output_mask asks for (data and filter when not given), and the
 * bias gradient's bytes (a sum of grad_output into its channels; its adds,
 * like a bias's, are not counted). */
static int cost_conv_backward(const op_info *op, const args *s, mlprof_opcost *cost)
{
    const arg *dy = operand(s, 0), *x = operand(s, 1), *w = operand(s, 2);
    if (!dy || !x || !w || x->ndim < 3 || x->ndim != w->ndim || dy->ndim != x->ndim)
        return 0;
    char buf[64];
    int mask[3] = {1, 1, 0};
    if (scalar(s, 10, buf, sizeof buf) == 0) {
        const char *p = buf;
        for (int i = 0; i < 3; i++) {
            p += strcspn(p, "TtFf01");
            mask[i] = *p == 'T' || *p == 't' || *p == '1';
            p += strcspn(p, ",]");
        }
    }
    int transposed = scalar_bool(s, op->conv.transposed, 0);
    /* the forward convolution's input and output (swapped when it was transposed) */
    const int64_t *in = transposed ? dy->dims : x->dims, *out = transposed ? x->dims : dy->dims;
    mlprof_opcost one, sum = {0, 0};
    count c = {0};
    for (int pass = 0; pass < 2; pass++) {
        if (!mask[pass])
            continue;
        int which = pass == 0 ? MLPROF_CONV_BACKWARD_DATA : MLPROF_CONV_BACKWARD_FILTER;
        if (transposed) /* a transposed convolution's data gradient is a forward convolution */
            which = pass == 0 ? MLPROF_CONV_FORWARD : MLPROF_CONV_BACKWARD_FILTER;
        if (mlprof_opcost_conv(which, x->ndim, in, w->dims, out, s->elem, 0, &one) != 0)
            return 0;
        sum.flops = add(&c, sum.flops, one.flops);
        sum.bytes = add(&c, sum.bytes, one.bytes);
    }
    if (mask[2]) {
        int64_t n = numel(&c, dy);
        if (mlprof_opcost_reduce(n, dy->dims[1], s->elem, 0, &one) != 0)
            return 0;
        /* a bias's work is not counted in FLOPs (opcost.h), only what it moves */
        sum.bytes = add(&c, sum.bytes, one.bytes);
    }
    if (c.bad)
        return 0;
    *cost = sum;
    return MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

/* Q [.., Lq, D], K [.., Lk, D], V [.., Lk, Dv]; is_causal at per_element's
 * position (the efficient kernel's moved from 4 to 6 in PyTorch 2.1: the
 * first that reads as a boolean). */
static int cost_attention(const op_info *op, const args *s, mlprof_opcost *cost)
{
    const arg *q = operand(s, 0), *k = operand(s, 1), *v = operand(s, 2);
    if (!q || !k || !v || q->ndim < 2 || k->ndim != q->ndim || v->ndim != q->ndim)
        return 0;
    int nd = q->ndim;
    if (k->dims[nd - 1] != q->dims[nd - 1] || v->dims[nd - 2] != k->dims[nd - 2])
        return 0;
    count c = {0};
    int64_t bh = elements(&c, nd - 2, q->dims);
    char buf[16];
    int pos = op->per_element;
    if (pos == 6 && scalar(s, 6, buf, sizeof buf) != 0)
        pos = 4;
    int flags = scalar_bool(s, pos, 0) ? MLPROF_OPCOST_CAUSAL : 0;
    if (c.bad || mlprof_opcost_attention(bh, q->dims[nd - 2], k->dims[nd - 2], q->dims[nd - 1], v->dims[nd - 1],
                                         s->elem, flags, cost) != 0)
        return 0;
    return MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

/* The broadcast shape of the tensor arguments into out; -1 when they do not broadcast. */
static int broadcast(const args *s, arg *out)
{
    out->ndim = 0;
    for (int i = 0; i < s->nop; i++) {
        const arg *a = operand(s, i);
        int nd = a->ndim > out->ndim ? a->ndim : out->ndim;
        int64_t d[MAX_DIMS];
        for (int j = 0; j < nd; j++) {
            int64_t x = j < nd - out->ndim ? 1 : out->dims[j - (nd - out->ndim)];
            int64_t y = j < nd - a->ndim ? 1 : a->dims[j - (nd - a->ndim)];
            if (x != y && x != 1 && y != 1)
                return -1;
            d[j] = x == 1 ? y : x;
        }
        memcpy(out->dims, d, sizeof(int64_t) * (size_t)nd);
        out->ndim = nd;
    }
    return 0;
}

static int cost_elementwise(const op_info *op, const args *s, const args *outs, mlprof_opcost *cost)
{
    if (!s->nop)
        return 0;
    count c = {0};
    arg shape;
    const arg *given = outs ? operand(outs, 0) : NULL;
    if (given)
        shape = *given;
    else if (broadcast(s, &shape) != 0)
        return 0;
    int64_t in = 0;
    for (int i = 0; i < s->nop; i++)
        in = add(&c, in, numel(&c, operand(s, i)));
    int64_t out = numel(&c, &shape);
    if (c.bad || mlprof_opcost_elementwise(out, in, op->per_element, s->elem, cost) != 0)
        return 0;
    return MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

/* sum/mean of self over dim (position 1, a list; [] or absent: all) with
 * keepdim: the output's elements. -1 when the scalars do not say. */
static int64_t reduced(const args *s, const arg *x)
{
    count c = {0};
    int64_t total = numel(&c, x);
    char buf[256];
    if (scalar(s, 1, buf, sizeof buf) != 0) {
        /* sum(self, dtype=None) reduces all; sum.dim_IntList(self, dim, keepdim, dtype) needs dim */
        return s->n <= 2 ? (c.bad ? -1 : 1) : -1;
    }
    if (strcmp(buf, "None") == 0 || strcmp(buf, "[]") == 0)
        return 1;
    int64_t dims[MAX_DIMS];
    arg a;
    if (buf[0] == '[') {
        /* negative dims: parse by hand */
        const char *p = buf + 1;
        a.ndim = 0;
        while (*p && *p != ']' && a.ndim < MAX_DIMS) {
            char *e;
            long long v = strtoll(p, &e, 10);
            if (e == p)
                return -1;
            dims[a.ndim++] = v;
            p = e + strspn(e, ", ");
        }
    } else {
        char *e;
        dims[0] = strtoll(buf, &e, 10);
        if (e == buf)
            return -1;
        a.ndim = 1;
    }
    int64_t r = 1;
    for (int i = 0; i < a.ndim; i++) {
        int64_t d = dims[i] < 0 ? dims[i] + x->ndim : dims[i];
        if (d < 0 || d >= x->ndim)
            return -1;
        r = mul(&c, r, x->dims[d]);
    }
    return c.bad || r == 0 ? -1 : total / r;
}

static int cost_reduce(const op_info *op, const args *s, const args *outs, mlprof_opcost *cost)
{
    const arg *x = operand(s, 0);
    if (!x)
        return 0;
    count c = {0};
    const arg *given = outs ? operand(outs, 0) : NULL;
    int64_t out = given ? numel(&c, given) : reduced(s, x);
    if (given && given->ndim == 0)
        out = 1;
    if (out < 0 || c.bad)
        return 0;
    int flags = op->kind == OP_MEAN ? MLPROF_OPCOST_MEAN : 0;
    if (mlprof_opcost_reduce(numel(&c, x), out, s->elem, flags, cost) != 0 || c.bad)
        return 0;
    return MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

/* Layer norm (input, normalized_shape, weight, bias, eps): the sets are the
 * rows of the normalized shape's size (from weight, else position 1);
 * native_layer_norm writes each row's mean and 1/sigma. Batch norm (input,
 * weight, bias, running_mean, running_var, training...): per channel; in
 * training the statistics are computed and saved, else the running ones
 * read. Group norm (input, weight, bias, N, C, HxW, group) and group_norm
 * (input, num_groups, weight, bias): N x groups sets. */
static int cost_norm(const op_info *op, const args *s, mlprof_opcost *cost)
{
    const arg *x = operand(s, 0);
    if (!x || x->ndim < 1)
        return 0;
    count c = {0};
    int64_t n = numel(&c, x), sets, params = 0;
    int flags = 0;
    if (op->kind == OP_LAYER_NORM) {
        int64_t inner[MAX_DIMS], norm = 1;
        const arg *w = s->positional ? at(s, 2) : operand(s, 1);
        char buf[128];
        int nn = w ? w->ndim : 0;
        if (!w) {
            arg a;
            const char *end;
            if (scalar(s, 1, buf, sizeof buf) != 0 || parse_dims(buf, &a, &end) != 0)
                return 0;
            nn = a.ndim;
            memcpy(inner, a.dims, sizeof(int64_t) * (size_t)nn);
        } else {
            memcpy(inner, w->dims, sizeof(int64_t) * (size_t)nn);
        }
        for (int i = 0; i < nn; i++)
            norm = mul(&c, norm, inner[i]);
        sets = norm ? n / norm : 0;
        for (int i = 1; i < s->nop; i++)
            params = add(&c, params, numel(&c, operand(s, i)));
        flags = op->per_element ? MLPROF_OPCOST_SAVE_STATS : 0;
    } else if (op->kind == OP_BATCH_NORM) {
        if (x->ndim < 2)
            return 0;
        int64_t ch = x->dims[1];
        char buf[16];
        if (scalar(s, op->per_element, buf, sizeof buf) != 0)
            return 0; /* training or not decides the count */
        int training = scalar_bool(s, op->per_element, 0);
        /* weight and bias: positions 1 and 2, or with tensors only, the
         * channel vectors beyond the running statistics */
        int vectors = 0;
        for (int i = 1; i < s->nop; i++)
            vectors += operand(s, i)->ndim == 1 && operand(s, i)->dims[0] == ch;
        int affine = s->positional ? at(s, 1) != NULL : vectors == 4 || (training && vectors == 2);
        params = affine ? mul(&c, 2, ch) : 0;
        sets = ch;
        flags = training ? MLPROF_OPCOST_SAVE_STATS : MLPROF_OPCOST_RUNNING;
    } else { /* group norm */
        int64_t groups[1];
        if (op->per_element == 5) { /* native_group_norm(input, weight, bias, N, C, HxW, group) */
            if (scalar_ints(s, 6, groups, 1, -1) || groups[0] <= 0)
                return 0;
            flags = MLPROF_OPCOST_SAVE_STATS;
        } else if (scalar_ints(s, 1, groups, 1, -1) || groups[0] <= 0) {
            return 0;
        }
        sets = mul(&c, x->dims[0], groups[0]);
        for (int i = 1; i < s->nop; i++)
            params = add(&c, params, numel(&c, operand(s, i)));
    }
    if (c.bad || mlprof_opcost_norm(n, sets, params, s->elem, flags, cost) != 0)
        return 0;
    return MLPROF_OPCOST_HAS_FLOPS | (s->elem ? MLPROF_OPCOST_HAS_BYTES : 0);
}

int mlprof_opcost_op(const char *name, const char *shapes, const char *types, const char *out_shapes,
                     const char *scalars, mlprof_opcost *cost)
{
    if (!name || !shapes || !cost)
        return 0;
    const op_info *op = find_op(name);
    if (!op)
        return 0;
    args s, outs;
    if (parse_args(shapes, types, scalars, &s) != 0)
        return 0;
    int have_outs = out_shapes && parse_args(out_shapes, NULL, NULL, &outs) == 0 && outs.nop > 0;
    mlprof_opcost got = {0, 0};
    int rc;
    switch (op->kind) {
    case OP_MM: case OP_ADDMM: case OP_BMM: case OP_BADDBMM: case OP_MV: case OP_ADDMV:
        rc = cost_mm(op, &s, &got);
        break;
    case OP_MATMUL: rc = cost_matmul(&s, &got); break;
    case OP_LINEAR: rc = cost_linear(&s, &got); break;
    case OP_CONV: rc = cost_conv(op, &s, have_outs ? &outs : NULL, &got); break;
    case OP_CONV_BACKWARD: rc = cost_conv_backward(op, &s, &got); break;
    case OP_ATTENTION: rc = cost_attention(op, &s, &got); break;
    case OP_ELEMENTWISE: rc = cost_elementwise(op, &s, have_outs ? &outs : NULL, &got); break;
    case OP_SUM: case OP_MEAN: rc = cost_reduce(op, &s, have_outs ? &outs : NULL, &got); break;
    case OP_SOFTMAX: {
        count c = {0};
        const arg *x = operand(&s, 0);
        rc = x && mlprof_opcost_softmax(numel(&c, x), s.elem, &got) == 0 && !c.bad
                 ? MLPROF_OPCOST_HAS_FLOPS | (s.elem ? MLPROF_OPCOST_HAS_BYTES : 0) : 0;
        break;
    }
    default: rc = cost_norm(op, &s, &got); break;
    }
    if (rc) {
        cost->flops = got.flops;
        cost->bytes = rc & MLPROF_OPCOST_HAS_BYTES ? got.bytes : 0;
    }
    return rc;
}
