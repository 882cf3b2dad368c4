/* lin_f32.h -- the fast route's eigen-solves in float: values-only spectra of a factor from its
 * Gram matrix and of a fused pair (the float counterparts of lin.h's lin_gram_side_new and
 * lin_gram_fused: ssytrd + ssterf, spotrf / spstrf, strmm), each with a bound on how far its
 * squared singular values may sit from the double route's, and the test that says whether an
 * effective rank at tau is certain under that bound.
 *
 * The bound eps of a spectrum: the squared singular values are the eigenvalues of a symmetric
 * matrix X + E (X the double route's matrix, exact up to double rounding) with ||E||_F <= eps.
 * By Ky Fan, the sum of the top r of them then moves by at most sqrt(r) eps. eps adds up: the
 * Gram matrices' own errors (gram_compute_fast), their rounding to float, the Cholesky factor's
 * backward error and truncation (Lᵀ perturbs the fused matrix by at most ||G_B||_2 times the
 * error of L Lᵀ, and ||L||_2^2 times the error of G_B), the triangular products, the eigen-solver's
 * backward error (LIN_F32_CEIG k u ||X||_F), and clamped negative eigenvalues. */
#ifndef AL_LIN_F32_H
#define AL_LIN_F32_H

#include "lin.h"

/* One factor's Gram, solved in float. */
typedef struct {
    size_t k, rows;
    Spectrum *s;            /* (rows x k) map, min(rows, k) singular values */
    double eps;             /* the bound above for s */
    double norm;            /* an upper bound on ||G||_2 of the double route's G */
    double fro;             /* ||G||_F */
    size_t r;               /* rank of L (0 when not factored or a zero factor) */
    float *L;               /* (k, k) column-major lower triangular, or NULL */
    int *piv;               /* (k) 0-based pivots, or NULL when not pivoted */
    double lerr;            /* bound on ||P L Lᵀ Pᵀ - G||_F, G the double route's Gram */
    double lnorm2;          /* ||L||_F^2 (>= ||L||_2^2) */
} LinFSide;

/* G (k x k, double, full symmetric; the fast Gram) with gerr a bound on ||G - G_double||_F:
 * eigenvalues in float, and with `factor` the float Cholesky factor. Free with linf_side_free. */
int linf_side_new(const double *G, size_t k, size_t rows, double gerr, bool factor, LinFSide **out);
void linf_side_free(LinFSide *s);
/* The fused spectrum of a (factored) against the factor with Gram Gb (bound gberr, ||Gb||_2 <=
 * gbnorm): m x n map, p = min(m, n, k) values; *eps its bound. */
int linf_fused(const LinFSide *a, const double *Gb, double gberr, double gbnorm, size_t m, size_t n, Spectrum **out,
               double *eps);

/* True when lin_effective_rank(s, tau) is the same for every spectrum whose squared values are
 * within eps (the bound above) of s's -- in particular the double route's. eps 0: exact. */
bool linf_rank_certain(const Spectrum *s, double eps, double tau);

#endif
