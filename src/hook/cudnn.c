/*
 * cudnn.c - cuDNN calls as spans (mlprof run, hook "cudnn"): the
 * convolutions (forward, backward data, backward filter) with the shapes of
 * their input, filter and output, padding, stride, dilation, groups, type
 * FLOPs and bytes (mlprof/opcost.h: 2 x output elements x multiply-adds
 * per output element, the same work in the three directions; the output
 * read too when beta is not 0); batch normalization (inference,
 * training, backward), softmax and pooling with their input shape; and
 * cudnnBackendExecute, through which cuDNN 9's graph API (PyTorch 2)
 * runs, as a span with what its plan computes (cudnn_graph.c: the graph's
 * convolution or matmul, its shapes, FLOPs and bytes).
 *
 * Shapes come from cuDNN's own getters (cudnnGetTensorNdDescriptor,
 * cudnnGetFilterNdDescriptor, cudnnGetConvolutionNdDescriptor,
 * cudnnGetConvolutionGroupCount). CPU-side times: what the GPU did is
 * CUPTI's part. Declarations are written here from cuDNN's documented API.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "hook.h"
#include "mlprof/opcost.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DIMS 8

enum { F_CONV_FWD, F_CONV_BWD_DATA, F_CONV_BWD_FILTER, F_BN_INFER, F_BN_TRAIN, F_BN_BWD, F_SOFTMAX, F_POOL,
       F_BACKEND_EXECUTE, F_GET_TENSOR, F_GET_FILTER, F_GET_CONV, F_GET_GROUPS, F_N };
static const char *const k_names[F_N] = {
    "cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
    "cudnnBatchNormalizationForwardInference", "cudnnBatchNormalizationForwardTraining",
    "cudnnBatchNormalizationBackward", "cudnnSoftmaxForward", "cudnnPoolingForward", "cudnnBackendExecute",
    "cudnnGetTensorNdDescriptor", "cudnnGetFilterNdDescriptor", "cudnnGetConvolutionNdDescriptor",
    "cudnnGetConvolutionGroupCount"};

static void *g_real[F_N];
static mlprof_span *g_task[F_N];

void mlprof__hook_cudnn_init(void)
{
    mlprof_domain *d = mlprof_domain_create("cudnn");
    for (int i = 0; i < F_GET_TENSOR; i++)
        g_task[i] = mlprof_task_create(d, k_names[i]);
}

/* The real function, or NULL for a getter that is missing (the span is then
 * written without what it would have given). */
static void *real(int f) { return mlprof__hook_real_cached(&g_real[f], k_names[f], f < F_GET_TENSOR); }

typedef struct shape {
    int n, type;
    int dims[MAX_DIMS];
} shape;

const char *mlprof__cudnn_type_name(int t)
{
    static const char *const names[] = {"float32", "float64", "float16", "int8", "int32"};
    return t >= 0 && t <= 4 ? names[t] : t == 9 ? "bfloat16" : "other";
}

static int tensor_shape(const void *desc, shape *s)
{
    typedef int (*fn)(const void *, int, int *, int *, int *, int *);
    fn get = (fn)real(F_GET_TENSOR);
    int strides[MAX_DIMS];
    s->n = 0;
    return desc && get && get(desc, MAX_DIMS, &s->type, &s->n, s->dims, strides) == 0 && s->n > 0 && s->n <= MAX_DIMS;
}

static int filter_shape(const void *desc, shape *s)
{
    typedef int (*fn)(const void *, int, int *, int *, int *, int *);
    fn get = (fn)real(F_GET_FILTER);
    int format;
    s->n = 0;
    return desc && get && get(desc, MAX_DIMS, &s->type, &format, &s->n, s->dims) == 0 && s->n > 0 && s->n <= MAX_DIMS;
}

void mlprof__cudnn_arg_dims(const char *key, const int *dims, int n)
{
    char text[MAX_DIMS * 12 + 3];
    size_t k = 0;
    text[k++] = '[';
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%s%d", i ? "," : "", dims[i]);
    snprintf(text + k, sizeof text - k, "]");
    mlprof_arg_str(key, text);
}

static int wanted(void) { return mlprof__busy == 0 && (mlprof_active_flag & 1) && mlprof__hook_on(MLPROF__HOOK_CUDNN); }

/* Whether the output is added to: cuDNN's beta, a host float (a host double
 * for double data), nonzero. */
static int accumulates(const void *beta, int type)
{
    if (!beta)
        return 0;
    return type == 1 ? *(const double *)beta != 0 : *(const float *)beta != 0;
}

/* A convolution's span: x the input, w the filter, y the output (or their
 * gradients); beta says whether what it writes is added to. */
static int conv_span(int f, const void *x, const void *w, const void *conv, const void *y, const void *beta)
{
    if (!wanted())
        return 0;
    mlprof_begin(g_task[f]);
    shape xs, ws, ys;
    int have_x = tensor_shape(x, &xs), have_w = filter_shape(w, &ws), have_y = tensor_shape(y, &ys);
    if (have_x) {
        mlprof__cudnn_arg_dims("input_shape", xs.dims, xs.n);
        mlprof_arg_str("dtype", mlprof__cudnn_type_name(xs.type));
    }
    if (have_w)
        mlprof__cudnn_arg_dims("filter_shape", ws.dims, ws.n);
    if (have_y)
        mlprof__cudnn_arg_dims("output_shape", ys.dims, ys.n);
    typedef int (*conv_fn)(const void *, int, int *, int *, int *, int *, int *, int *);
    conv_fn get = (conv_fn)real(F_GET_CONV);
    int len = 0, pad[MAX_DIMS], stride[MAX_DIMS], dilation[MAX_DIMS], mode, compute;
    if (conv && get && get(conv, MAX_DIMS, &len, pad, stride, dilation, &mode, &compute) == 0 && len > 0 &&
        len <= MAX_DIMS) {
        mlprof__cudnn_arg_dims("padding", pad, len);
        mlprof__cudnn_arg_dims("stride", stride, len);
        mlprof__cudnn_arg_dims("dilation", dilation, len);
    }
    typedef int (*groups_fn)(const void *, int *);
    groups_fn groups = (groups_fn)real(F_GET_GROUPS);
    int g = 1;
    if (conv && groups && groups(conv, &g) == 0 && g > 1)
        mlprof_arg_int("groups", g);
    if (have_x && have_w && have_y && xs.n == ws.n && xs.n == ys.n) {
        /* filter [K, C/G, R, S...]: the same multiply-adds in the three passes */
        int64_t x64[MAX_DIMS], w64[MAX_DIMS], y64[MAX_DIMS];
        for (int i = 0; i < xs.n; i++)
            x64[i] = xs.dims[i], w64[i] = ws.dims[i], y64[i] = ys.dims[i];
        int64_t elem = xs.type == 1 ? 8 : xs.type == 2 || xs.type == 9 ? 2 : xs.type == 3 ? 1 : 4;
        int pass = f == F_CONV_FWD ? MLPROF_CONV_FORWARD : f == F_CONV_BWD_DATA ? MLPROF_CONV_BACKWARD_DATA
                                                                               : MLPROF_CONV_BACKWARD_FILTER;
        mlprof_opcost c;
        if (mlprof_opcost_conv(pass, xs.n, x64, w64, y64, elem,
                               accumulates(beta, xs.type) ? MLPROF_OPCOST_ACCUMULATE : 0, &c) == 0) {
            mlprof_arg_int("flops", c.flops);
            mlprof_arg_int("bytes", c.bytes);
        }
    }
    return 1;
}

/* The span of a call described by its input tensor. */
static int tensor_span(int f, const void *x)
{
    if (!wanted())
        return 0;
    mlprof_begin(g_task[f]);
    shape xs;
    if (tensor_shape(x, &xs)) {
        mlprof__cudnn_arg_dims("input_shape", xs.dims, xs.n);
        mlprof_arg_str("dtype", mlprof__cudnn_type_name(xs.type));
    }
    return 1;
}

static int done(int f, int span, int rc)
{
    if (span)
        mlprof_end(g_task[f]);
    return rc;
}

typedef const void *desc;
typedef int conv_fwd_fn(void *, const void *, desc, const void *, desc, const void *, desc, int, void *, size_t,
                        const void *, desc, void *);
typedef int conv_bwd_data_fn(void *, const void *, desc, const void *, desc, const void *, desc, int, void *, size_t,
                             const void *, desc, void *);
typedef int conv_bwd_filter_fn(void *, const void *, desc, const void *, desc, const void *, desc, int, void *,
                               size_t, const void *, desc, void *);
typedef int bn_infer_fn(void *, int, const void *, const void *, desc, const void *, desc, void *, desc, const void *,
                        const void *, const void *, const void *, double);
typedef int bn_train_fn(void *, int, const void *, const void *, desc, const void *, desc, void *, desc, const void *,
                        const void *, double, void *, void *, double, void *, void *);
typedef int bn_bwd_fn(void *, int, const void *, const void *, const void *, const void *, desc, const void *, desc,
                      const void *, desc, void *, desc, const void *, void *, void *, double, const void *,
                      const void *);
typedef int softmax_fn(void *, int, int, const void *, desc, const void *, const void *, desc, void *);
typedef int pool_fn(void *, desc, const void *, desc, const void *, const void *, desc, void *);
typedef int backend_fn(void *, void *, void *);

EXPORT conv_fwd_fn cudnnConvolutionForward;
EXPORT conv_bwd_data_fn cudnnConvolutionBackwardData;
EXPORT conv_bwd_filter_fn cudnnConvolutionBackwardFilter;
EXPORT bn_infer_fn cudnnBatchNormalizationForwardInference;
EXPORT bn_train_fn cudnnBatchNormalizationForwardTraining;
EXPORT bn_bwd_fn cudnnBatchNormalizationBackward;
EXPORT softmax_fn cudnnSoftmaxForward;
EXPORT pool_fn cudnnPoolingForward;
EXPORT backend_fn cudnnBackendExecute;

EXPORT int cudnnConvolutionForward(void *h, const void *alpha, desc xd, const void *x, desc wd, const void *w,
                                   desc cd, int algo, void *ws, size_t wsn, const void *beta, desc yd, void *y)
{
    int span = conv_span(F_CONV_FWD, xd, wd, cd, yd, beta);
    if (span)
        mlprof_arg_int("algo", algo);
    return done(F_CONV_FWD, span,
                ((conv_fwd_fn *)real(F_CONV_FWD))(h, alpha, xd, x, wd, w, cd, algo, ws, wsn, beta, yd, y));
}

EXPORT int cudnnConvolutionBackwardData(void *h, const void *alpha, desc wd, const void *w, desc dyd, const void *dy,
                                        desc cd, int algo, void *ws, size_t wsn, const void *beta, desc dxd, void *dx)
{
    int span = conv_span(F_CONV_BWD_DATA, dxd, wd, cd, dyd, beta);
    if (span)
        mlprof_arg_int("algo", algo);
    return done(F_CONV_BWD_DATA, span,
                ((conv_bwd_data_fn *)real(F_CONV_BWD_DATA))(h, alpha, wd, w, dyd, dy, cd, algo, ws, wsn, beta, dxd,
                                                            dx));
}

EXPORT int cudnnConvolutionBackwardFilter(void *h, const void *alpha, desc xd, const void *x, desc dyd,
                                          const void *dy, desc cd, int algo, void *ws, size_t wsn, const void *beta,
                                          desc dwd, void *dw)
{
    int span = conv_span(F_CONV_BWD_FILTER, xd, dwd, cd, dyd, beta);
    if (span)
        mlprof_arg_int("algo", algo);
    return done(F_CONV_BWD_FILTER, span,
                ((conv_bwd_filter_fn *)real(F_CONV_BWD_FILTER))(h, alpha, xd, x, dyd, dy, cd, algo, ws, wsn, beta,
                                                                dwd, dw));
}

EXPORT int cudnnBatchNormalizationForwardInference(void *h, int mode, const void *alpha, const void *beta, desc xd,
                                                   const void *x, desc yd, void *y, desc bnd, const void *scale,
                                                   const void *bias, const void *mean, const void *var, double eps)
{
    int span = tensor_span(F_BN_INFER, xd);
    return done(F_BN_INFER, span,
                ((bn_infer_fn *)real(F_BN_INFER))(h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias, mean, var,
                                                  eps));
}

EXPORT int cudnnBatchNormalizationForwardTraining(void *h, int mode, const void *alpha, const void *beta, desc xd,
                                                  const void *x, desc yd, void *y, desc bnd, const void *scale,
                                                  const void *bias, double factor, void *rmean, void *rvar,
                                                  double eps, void *smean, void *sivar)
{
    int span = tensor_span(F_BN_TRAIN, xd);
    return done(F_BN_TRAIN, span,
                ((bn_train_fn *)real(F_BN_TRAIN))(h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias, factor, rmean,
                                                  rvar, eps, smean, sivar));
}

EXPORT int cudnnBatchNormalizationBackward(void *h, int mode, const void *ad, const void *bd, const void *ap,
                                           const void *bp, desc xd, const void *x, desc dyd, const void *dy,
                                           desc dxd, void *dx, desc bnd, const void *scale, void *dscale,
                                           void *dbias, double eps, const void *smean, const void *sivar)
{
    int span = tensor_span(F_BN_BWD, xd);
    return done(F_BN_BWD, span,
                ((bn_bwd_fn *)real(F_BN_BWD))(h, mode, ad, bd, ap, bp, xd, x, dyd, dy, dxd, dx, bnd, scale, dscale,
                                              dbias, eps, smean, sivar));
}

EXPORT int cudnnSoftmaxForward(void *h, int algo, int mode, const void *alpha, desc xd, const void *x,
                               const void *beta, desc yd, void *y)
{
    int span = tensor_span(F_SOFTMAX, xd);
    return done(F_SOFTMAX, span, ((softmax_fn *)real(F_SOFTMAX))(h, algo, mode, alpha, xd, x, beta, yd, y));
}

EXPORT int cudnnPoolingForward(void *h, desc pd, const void *alpha, desc xd, const void *x, const void *beta,
                               desc yd, void *y)
{
    int span = tensor_span(F_POOL, xd);
    return done(F_POOL, span, ((pool_fn *)real(F_POOL))(h, pd, alpha, xd, x, beta, yd, y));
}

EXPORT int cudnnBackendExecute(void *h, void *plan, void *variant_pack)
{
    int span = wanted();
    if (span) {
        mlprof_begin(g_task[F_BACKEND_EXECUTE]);
        mlprof__cudnn_plan_args(plan);
    }
    return done(F_BACKEND_EXECUTE, span, ((backend_fn *)real(F_BACKEND_EXECUTE))(h, plan, variant_pack));
}
