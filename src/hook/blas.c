/*
 * blas.c - the BLAS calls that carry most of a CPU model's time: the CBLAS
 * entry points cblas_sgemm, cblas_dgemm, cblas_sgemv, cblas_dgemv and the
 * Fortran ones sgemm_, dgemm_, sgemv_, dgemv_ (which PyTorch and LAPACK
 * call). Each call becomes a span in domain "blas" named after the entry
 * point, with its shape (M, N, K), transposes, element type, FLOPs and the
 * bytes it must move at the least, as mlprof/opcost.h counts them (2MNK for
 * a GEMM, 2MN for a GEMV; each matrix and vector once, the output read too
 * when beta is not 0).
 *
 * A BLAS call made by a BLAS call (netlib's cblas_sgemm calls sgemm_) is not
 * a span of its own: the depth on the thread says so.
 */
#include <stdint.h>
#include <stdlib.h>

#include "hook.h"
#include "mlprof/opcost.h"

#define EXPORT __attribute__((visibility("default")))

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112, CONJ_TRANS = 113 };

static __thread int t_depth;
static mlprof_domain *g_domain;

enum { F_CSGEMM, F_CDGEMM, F_CSGEMV, F_CDGEMV, F_SGEMM, F_DGEMM, F_SGEMV, F_DGEMV, F_N };
static const char *const k_names[F_N] = {"cblas_sgemm", "cblas_dgemm", "cblas_sgemv", "cblas_dgemv",
                                         "sgemm_",      "dgemm_",      "sgemv_",      "dgemv_"};
static mlprof_span *g_task[F_N];
static void *g_real[F_N]; /* atomic: found at the first call */

void mlprof__hook_blas_init(void)
{
    g_domain = mlprof_domain_create("blas");
    for (int i = 0; i < F_N; i++)
        g_task[i] = mlprof_task_create(g_domain, k_names[i]);
}

static void *real(int f) { return mlprof__hook_real_cached(&g_real[f], k_names[f], 1); }

/* Whether this call is a span: the hook is on and it is not inside another. */
static int outer(void) { return t_depth++ == 0 && mlprof__busy == 0 && mlprof__hook_on(MLPROF__HOOK_BLAS); }

static char trans_char(int t) { return t == NO_TRANS ? 'N' : t == TRANS ? 'T' : t == CONJ_TRANS ? 'C' : '?'; }

static char fortran_trans(const char *t)
{
    char c = t ? *t : 'N';
    return c == 'n' || c == 'N' ? 'N' : c == 't' || c == 'T' ? 'T' : c == 'c' || c == 'C' ? 'C' : '?';
}

static void gemm_span(int f, int64_t m, int64_t n, int64_t k, char ta, char tb, int64_t elem, int beta)
{
    char trans[3] = {ta, tb, '\0'};
    mlprof_begin(g_task[f]);
    mlprof_arg_int("M", m);
    mlprof_arg_int("N", n);
    mlprof_arg_int("K", k);
    mlprof_arg_str("trans", trans);
    mlprof_arg_str("dtype", elem == 4 ? "float32" : "float64");
    mlprof_opcost c;
    if (mlprof_opcost_gemm(1, m, n, k, elem, elem, elem, beta ? MLPROF_OPCOST_ACCUMULATE : 0, &c) == 0) {
        mlprof_arg_int("flops", c.flops);
        mlprof_arg_int("bytes", c.bytes);
    }
}

/* A GEMV of an m x n matrix: x has n elements and y m (the other way
 * round when transposed). */
static void gemv_span(int f, int64_t m, int64_t n, char t, int64_t elem, int beta)
{
    char trans[2] = {t, '\0'};
    int64_t in = t == 'N' ? n : m, out = t == 'N' ? m : n;
    mlprof_begin(g_task[f]);
    mlprof_arg_int("M", m);
    mlprof_arg_int("N", n);
    mlprof_arg_str("trans", trans);
    mlprof_arg_str("dtype", elem == 4 ? "float32" : "float64");
    mlprof_opcost c;
    if (mlprof_opcost_gemv(out, in, elem, beta ? MLPROF_OPCOST_ACCUMULATE : 0, &c) == 0) {
        mlprof_arg_int("flops", c.flops);
        mlprof_arg_int("bytes", c.bytes);
    }
}

static void done(int span, int f)
{
    if (span)
        mlprof_end(g_task[f]);
    t_depth--;
}

/* --------------------------------------------------------------- CBLAS */

typedef void sgemm_fn(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
typedef void dgemm_fn(int, int, int, int, int, int, double, const double *, int, const double *, int,
                         double, double *, int);
typedef void sgemv_fn(int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void dgemv_fn(int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);

EXPORT sgemm_fn cblas_sgemm;
EXPORT dgemm_fn cblas_dgemm;
EXPORT sgemv_fn cblas_sgemv;
EXPORT dgemv_fn cblas_dgemv;

EXPORT void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        const float *b, int ldb, float beta, float *c, int ldc)
{
    int span = outer();
    if (span)
        gemm_span(F_CSGEMM, m, n, k, trans_char(ta), trans_char(tb), 4, beta != 0);
    ((sgemm_fn *)real(F_CSGEMM))(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    done(span, F_CSGEMM);
}

EXPORT void cblas_dgemm(int order, int ta, int tb, int m, int n, int k, double alpha, const double *a, int lda,
                        const double *b, int ldb, double beta, double *c, int ldc)
{
    int span = outer();
    if (span)
        gemm_span(F_CDGEMM, m, n, k, trans_char(ta), trans_char(tb), 8, beta != 0);
    ((dgemm_fn *)real(F_CDGEMM))(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    done(span, F_CDGEMM);
}

EXPORT void cblas_sgemv(int order, int t, int m, int n, float alpha, const float *a, int lda, const float *x,
                        int incx, float beta, float *y, int incy)
{
    int span = outer();
    if (span)
        gemv_span(F_CSGEMV, m, n, trans_char(t), 4, beta != 0);
    ((sgemv_fn *)real(F_CSGEMV))(order, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
    done(span, F_CSGEMV);
}

EXPORT void cblas_dgemv(int order, int t, int m, int n, double alpha, const double *a, int lda, const double *x,
                        int incx, double beta, double *y, int incy)
{
    int span = outer();
    if (span)
        gemv_span(F_CDGEMV, m, n, trans_char(t), 8, beta != 0);
    ((dgemv_fn *)real(F_CDGEMV))(order, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
    done(span, F_CDGEMV);
}

/* ------------------------------------------------------------- Fortran */

/* gfortran passes the lengths of character arguments after the others; they
 * are passed on as they came (a C caller may leave them out: nothing reads
 * them for one-character options). */
typedef void fsgemm_fn(const char *, const char *, const int *, const int *, const int *, const float *,
                          const float *, const int *, const float *, const int *, const float *, float *,
                          const int *, size_t, size_t);
typedef void fdgemm_fn(const char *, const char *, const int *, const int *, const int *, const double *,
                          const double *, const int *, const double *, const int *, const double *, double *,
                          const int *, size_t, size_t);
typedef void fsgemv_fn(const char *, const int *, const int *, const float *, const float *, const int *,
                          const float *, const int *, const float *, float *, const int *, size_t);
typedef void fdgemv_fn(const char *, const int *, const int *, const double *, const double *, const int *,
                          const double *, const int *, const double *, double *, const int *, size_t);

EXPORT fsgemm_fn sgemm_;
EXPORT fdgemm_fn dgemm_;
EXPORT fsgemv_fn sgemv_;
EXPORT fdgemv_fn dgemv_;

EXPORT void sgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k, const float *alpha,
                   const float *a, const int *lda, const float *b, const int *ldb, const float *beta, float *c,
                   const int *ldc, size_t lta, size_t ltb)
{
    int span = outer();
    if (span)
        gemm_span(F_SGEMM, *m, *n, *k, fortran_trans(ta), fortran_trans(tb), 4, *beta != 0);
    ((fsgemm_fn *)real(F_SGEMM))(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lta, ltb);
    done(span, F_SGEMM);
}

EXPORT void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
                   const double *a, const int *lda, const double *b, const int *ldb, const double *beta,
                   double *c, const int *ldc, size_t lta, size_t ltb)
{
    int span = outer();
    if (span)
        gemm_span(F_DGEMM, *m, *n, *k, fortran_trans(ta), fortran_trans(tb), 8, *beta != 0);
    ((fdgemm_fn *)real(F_DGEMM))(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lta, ltb);
    done(span, F_DGEMM);
}

EXPORT void sgemv_(const char *t, const int *m, const int *n, const float *alpha, const float *a, const int *lda,
                   const float *x, const int *incx, const float *beta, float *y, const int *incy, size_t lt)
{
    int span = outer();
    if (span)
        gemv_span(F_SGEMV, *m, *n, fortran_trans(t), 4, *beta != 0);
    ((fsgemv_fn *)real(F_SGEMV))(t, m, n, alpha, a, lda, x, incx, beta, y, incy, lt);
    done(span, F_SGEMV);
}

EXPORT void dgemv_(const char *t, const int *m, const int *n, const double *alpha, const double *a,
                   const int *lda, const double *x, const int *incx, const double *beta, double *y,
                   const int *incy, size_t lt)
{
    int span = outer();
    if (span)
        gemv_span(F_DGEMV, *m, *n, fortran_trans(t), 8, *beta != 0);
    ((fdgemv_fn *)real(F_DGEMV))(t, m, n, alpha, a, lda, x, incx, beta, y, incy, lt);
    done(span, F_DGEMV);
}
