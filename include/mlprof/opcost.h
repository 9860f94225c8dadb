/*
 * mlprof/opcost.h - the FLOPs and bytes of ML operators, written once: the
 * interposers (BLAS, oneDNN, cuDNN, cuBLAS), mlprof.torch and the analyzer
 * all count with these functions, so that one operator has one count
 * whichever way it was recorded.
 *
 * Conventions, for every function here:
 *   - A fused multiply-add is 2 FLOPs: a GEMM is 2*M*N*K, not M*N*(2K-1).
 *   - Products (GEMM, GEMV, convolution, attention's two products) count
 *     their multiply-adds only. A bias, or C accumulated with beta != 0, adds
 *     its bytes (read) but no FLOPs: one add per output is under 1/K of the
 *     product (PyTorch's FLOP counter and cuBLAS count the same). So does a
 *     bias's gradient in a convolution's backward pass.
 *   - No activation is counted inside another operator: a ReLU is an
 *     elementwise operator of its own.
 *   - exp, log, sqrt, rsqrt, tanh, erf and a divide count 1 FLOP each.
 *   - Bytes are the least the operator must move: every input read once,
 *     every output written once, C read again when accumulated; no cache
 *     reuse and no workspace. An in-place operator reads and writes its
 *     tensor (counted as an input and an output).
 * Each function's comment gives its formula. Counts are int64_t; a shape
 * with a negative size or a count that would overflow is MLPROF_EINVAL.
 */
#ifndef MLPROF_OPCOST_H
#define MLPROF_OPCOST_H

#include <stdint.h>

#include "mlprof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The result: two counts, and it stays so (a struct the caller fills in
 * place, without a size field: a further count would be a new function). */
typedef struct mlprof_opcost {
    int64_t flops; /* floating-point operations, an FMA counting 2 */
    int64_t bytes; /* the least bytes read and written */
} mlprof_opcost;

/* Flags of the functions below (or-ed). */
enum {
    MLPROF_OPCOST_ACCUMULATE = 1, /* the output is read and added to (BLAS beta != 0, cuDNN beta != 0) */
    MLPROF_OPCOST_BIAS = 2,       /* a bias (of N for a GEMM, K for a convolution) is read */
    MLPROF_OPCOST_MEAN = 4,       /* reduction: the sum divided by the count (1 FLOP per output) */
    MLPROF_OPCOST_CAUSAL = 8,     /* attention: query i sees keys 0..i only (top-left aligned) */
    MLPROF_OPCOST_RUNNING = 16,   /* normalization: mean and variance given (batch norm inference) */
    MLPROF_OPCOST_SAVE_STATS = 32 /* normalization: mean and 1/sigma of each set written (training) */
};

/* Convolution passes. */
enum { MLPROF_CONV_FORWARD = 0, MLPROF_CONV_BACKWARD_DATA = 1, MLPROF_CONV_BACKWARD_FILTER = 2 };

/* GEMM, C[batch][M][N] = A[batch][M][K] B[batch][K][N] (+ C, + bias):
 *   flops = 2 * batch * M * N * K
 *   bytes = batch * (ea*M*K + eb*K*N + ec*M*N (+ ec*M*N when accumulated)) (+ ec*N for a bias)
 * ea, eb, ec: the element sizes of A, B and C (they differ in mixed
 * precision: half inputs, float output). A matrix shared by the batch (a
 * broadcast) is folded by the caller: [B, M, K] x [K, N] is one GEMM of B*M
 * rows. */
MLPROF_API int mlprof_opcost_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t ea, int64_t eb,
                                  int64_t ec, int flags, mlprof_opcost *cost);

/* GEMV, y[out] = A[out][in] x[in] (+ y):
 *   flops = 2 * out * in
 *   bytes = elem * (out*in + in + out (+ out when accumulated))
 * (a transposed A swaps which of its dimensions is out). */
MLPROF_API int mlprof_opcost_gemv(int64_t out, int64_t in, int64_t elem, int flags, mlprof_opcost *cost);

/* Convolution of any number of spatial dimensions, from the shapes of its
 * three tensors, each of ndim dimensions (2 + spatial):
 *   x [N, C, D1..], w [K, C/G, R1..], y [N, K, P1..]
 * Groups, stride, padding and dilation are all in these shapes (G = C /
 * w[1]; the output's size follows from the others). The same shapes are
 * given in every pass, for the tensors of the forward convolution:
 *   flops = 2 * N*K*P1*.. * (C/G)*R1*..   in each pass (forward, backward
 *           data and backward filter do the same multiply-adds)
 *   bytes = elem * (|x| + |w| + |y|)      what each pass reads (forward: x,
 *           w; data: dy, w; filter: x, dy) and writes (y; dx; dw)
 *           + elem * |written| when accumulated, + elem * K for a bias
 *           (forward only; the bias add itself is not counted).
 * A transposed convolution is the backward-data pass of the convolution
 * whose x is its output: give x and y swapped. */
MLPROF_API int mlprof_opcost_conv(int pass, int ndim, const int64_t *x, const int64_t *w, const int64_t *y,
                                  int64_t elem, int flags, mlprof_opcost *cost);

/* Scaled dot-product attention, softmax(Q K^T * scale) V, for bh = batch x
 * heads independent problems: Q [Lq, D], K [Lk, D], V [Lk, Dv], O [Lq, Dv].
 * With pairs = Lq*Lk (causal: the pairs (i, j) with j <= i, which is
 * Lq*(Lq+1)/2 when Lq == Lk, about half):
 *   flops = bh * pairs * (2*D + 2*Dv + 6)   QK^T, PV, and per score 1 for
 *           the scale and 5 for the softmax (as mlprof_opcost_softmax)
 *   bytes = elem * bh * (Lq*D + Lk*D + Lk*Dv + Lq*Dv)   Q, K, V read, O
 *           written; the scores are not stored (a fused kernel's least; an
 *           unfused one moves more). A mask is not counted. */
MLPROF_API int mlprof_opcost_attention(int64_t bh, int64_t lq, int64_t lk, int64_t d, int64_t dv, int64_t elem,
                                       int flags, mlprof_opcost *cost);

/* Elementwise (unary, binary, ternary; broadcasting): out elements computed
 * from inputs of in elements in all (each input counted at its own size, a
 * broadcast one once), flops_per_element FLOPs each:
 *   flops = flops_per_element * out
 *   bytes = elem * (in + out) */
MLPROF_API int mlprof_opcost_elementwise(int64_t out, int64_t in, int64_t flops_per_element, int64_t elem,
                                         mlprof_opcost *cost);

/* Reduction (sum; mean with MLPROF_OPCOST_MEAN) of in elements into out:
 *   flops = in - out (r - 1 adds for r values) (+ out divides for a mean)
 *   bytes = elem * (in + out) */
MLPROF_API int mlprof_opcost_reduce(int64_t in, int64_t out, int64_t elem, int flags, mlprof_opcost *cost);

/* Softmax (and log-softmax) of n elements, in rows of any length:
 *   flops = 5 * n   max, subtract, exp, sum, divide per element
 *   bytes = elem * 2n */
MLPROF_API int mlprof_opcost_softmax(int64_t n, int64_t elem, mlprof_opcost *cost);

/* Normalization of n elements in sets (layer norm: the rows; batch norm:
 * the channels; group norm: the N*G groups), each set normalized by its own
 * mean and variance, with params affine elements (gamma and beta together,
 * 0 for none):
 *   flops = n * (4 + 2 + (params ? 2 : 0))   mean (1 add) and variance
 *           (subtract, square, add) per element, unless RUNNING (given);
 *           normalize (subtract, multiply by 1/sigma); affine (multiply, add)
 *   bytes = elem * (2n + params (+ 2*sets when RUNNING: mean and variance
 *           read) (+ 2*sets with SAVE_STATS: mean and 1/sigma written))
 * Per-set work (1/sqrt of each variance) is left out. */
MLPROF_API int mlprof_opcost_norm(int64_t n, int64_t sets, int64_t params, int64_t elem, int flags,
                                  mlprof_opcost *cost);

/* What mlprof_opcost_op found. */
enum { MLPROF_OPCOST_HAS_FLOPS = 1, MLPROF_OPCOST_HAS_BYTES = 2 };

/* The cost of a PyTorch operator by its name ("aten::addmm"; "addmm" too)
 * and its arguments as traces hold them:
 *   shapes      the inputs' shapes, "[[4,512],[512,10]]": mlprof.torch's
 *               input_shapes (tensors only) or PyTorch's "Input Dims"
 *               (every argument, [] for non-tensors; a tensor list nested)
 *   types       their types, "float32,float32" (mlprof.torch's dtypes) or
 *               PyTorch's "Input type" ["float","float","Scalar"]; NULL:
 *               no bytes
 *   out_shapes  the outputs' shapes, or NULL (a convolution's output size is
 *               then computed from stride, padding and dilation in scalars)
 *   scalars     the arguments as text by position, a JSON array of strings
 *               as PyTorch's "Concrete Inputs" ["","","[2, 2]","1"], or NULL
 * Returns MLPROF_OPCOST_HAS_FLOPS | MLPROF_OPCOST_HAS_BYTES as cost was
 * filled, or 0 for an operator it does not know or shapes it cannot use:
 * an unknown operator has no count (not a count of 0). Known: mm, addmm,
 * bmm, baddbmm, matmul, linear, addmv, mv, conv1d/2d/3d,
 * conv_transpose1d/2d/3d, convolution, _convolution, mkldnn_convolution,
 * cudnn_convolution, convolution_backward, _scaled_dot_product_*attention
 * (and scaled_dot_product_attention), elementwise (add, sub, mul, div, relu,
 * gelu, sigmoid, tanh, silu... and their in-place forms), sum, mean,
 * softmax, _softmax, log_softmax, layer_norm, native_layer_norm,
 * batch_norm, native_batch_norm, group_norm, native_group_norm. */
MLPROF_API int mlprof_opcost_op(const char *name, const char *shapes, const char *types, const char *out_shapes,
                                const char *scalars, mlprof_opcost *cost);

/* The size in bytes of a type as PyTorch names it ("float", "c10::Half",
 * "float32", "torch.bfloat16", "long"...), or 0 for one it does not know or
 * that is not a tensor's ("Scalar", ""). */
MLPROF_API int mlprof_opcost_type_size(const char *type);

#ifdef __cplusplus
}
#endif

#endif /* MLPROF_OPCOST_H */
