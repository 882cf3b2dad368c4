/* spectra.h -- singular spectra of single matrices and of fused products, and effective ranks.
 *
 * A fused head map A (m x k) @ B (k x n) -- or A @ Bᵀ with B (n x k), as for Q·Kᵀ -- is never
 * formed: each factor is reduced to a small k x k triangle-like factor R with RᵀR = its Gram
 * matrix (SPECTRA_GRAM: syrk + syevd in double, rank-deficient directions clamped; SPECTRA_QR: geqrf),
 * and the SVD (gesdd) of the small core R_A R_Bᵀ gives the singular values, and, through the
 * factors, the singular vectors. Everything is computed in double.
 *
 * Values only, from Gram matrices already at hand (the streaming sweep of core/analysis/farr.c computes
 * them straight from a checkpoint, core/analysis/gram.h): spectra_gram_side_new / spectra_gram_fused take the
 * factor spectra as eigenvalues of the Grams and the fused spectrum as the eigenvalues of
 * Lᵀ G_B L for the Cholesky factor G_A = L Lᵀ -- three k x k values-only eigen-solves per pair
 * (dsytrd + dsterf), no SVD, no vectors.
 *
 * Effective rank at tau (seed 000, 1.4): the smallest r with sum_{j<=r} sigma_j^2 / sum sigma^2
 * >= tau. */
#ifndef AL_SPECTRA_H
#define AL_SPECTRA_H

#include "tensor.h"

/* ================================================================ spectra */

/* The singular value decomposition (thin) of an m x n map M = U diag(sigma) Vt. */
typedef struct {
    size_t m, n;        /* shape of the map */
    size_t p;           /* number of singular values: min(m, n) (or min(m, n, k) for a product) */
    double *sigma;      /* (p) descending, >= 0; trailing zeros where the map is rank-deficient */
    double *U;          /* (m, p) row-major left singular vectors (columns), or NULL */
    double *Vt;         /* (p, n) row-major right singular vectors (rows), or NULL */
    double total;       /* sum of sigma^2 (= squared Frobenius norm of the map) */
} Spectrum;

/* A zero spectrum of p values for an m x n map, with zeroed vector arrays when `vectors`.
 * NULL + error on failure. Caller frees with spectrum_free. */
Spectrum *spectrum_new(size_t m, size_t n, size_t p, bool vectors);
void spectrum_free(Spectrum *s);
/* Deep copy (NULL + error on failure). */
Spectrum *spectrum_copy(const Spectrum *s);
/* Recomputes s->total from s->sigma. */
void spectrum_total(Spectrum *s);

/* Flags of the spectrum functions. */
enum {
    SPECTRA_VECTORS = 1u << 0,   /* also compute U and Vt */
    SPECTRA_QR      = 1u << 1,   /* product route: QR of each factor instead of Gram + eigen */
};

/* The product of the fused functions: A @ B (B is k x n) or A @ Bᵀ (B is n x k). */
typedef enum { SPECTRA_AB, SPECTRA_ABT } spectra_op;

/* Dense SVD (gesdd, double) of one matrix W (m x n). *out is the caller's. */
int spectra_svd(const Mat *W, unsigned flags, Spectrum **out);
/* Dense SVD of a row-major double matrix (m x n); W is not modified. */
int spectra_svd_d(const double *W, size_t m, size_t n, unsigned flags, Spectrum **out);
/* Singular values only, through the Gram matrix of the smaller side (syrk + syevd in double):
 * fast for tall/wide head matrices; values below ~1e-7 sigma_max are not resolved. */
int spectra_sigma_gram(const Mat *W, Spectrum **out);

/* Spectrum of the fused map A @ op(B) without forming it (see the top of this file).
 * A: (m x k); B: (k x n) for SPECTRA_AB, (n x k) for SPECTRA_ABT. p = min(m, n, k).
 * Optional sa / sb receive the singular values of the factors themselves (computed on the way,
 * values only; NULL to skip). All outputs are the caller's. */
int spectra_product_svd(const Mat *A, const Mat *B, spectra_op op, unsigned flags,
                    Spectrum **ab, Spectrum **sa, Spectrum **sb);
/* Reference: forms A @ op(B) explicitly in double (dgemm) and takes its dense SVD (gesdd). For
 * tests and benchmarks; O(m n min(m, n)). */
int spectra_dense_product_svd(const Mat *A, const Mat *B, spectra_op op, unsigned flags, Spectrum **out);

/* ================================================================ Gram route, values only */

/* One factor of a fused pair given by its Gram matrix G (k x k) in the inner space of the
 * product -- WᵀW for W = W_V, W_Q, W_K (rows x k) and W Wᵀ for W = W_O (k x rows) -- which is what
 * the streaming sweep accumulates straight from a checkpoint. Holds the factor's singular values
 * (eigenvalues of G, values only) and, when built with `factor`, the pivoted Cholesky factor
 * Pᵀ G P = L Lᵀ (L: k x r, r the numerical rank) that fused spectra against other factors need.
 * Build it once per factor and pair it with many (GQA: the shared K / V head of a group). */
typedef struct {
    size_t k;           /* inner dim */
    size_t rows;        /* the factor's other dim */
    Spectrum *s;        /* (rows x k) map, min(rows, k) singular values */
    size_t r;           /* rank of L (0 when not factored or a zero factor) */
    double *L;          /* (k, k) column-major, lower triangular (first r columns used), or NULL */
    int *piv;           /* (k) 0-based pivots (row i of Pᵀ G P is row piv[i] of G), or NULL when
                           G was positive definite and factored without pivoting (r = k) */
} LinGramSide;

/* Eigen-solves G (k x k, symmetric, full storage, double; not modified): eigenvalues only (dsytrd +
 * dsterf), and with `factor` its Cholesky factor (dpotrf; dpstrf with pivoting when G is not
 * numerically positive definite). NULL + error on failure; free with spectra_gram_side_free. */
int spectra_gram_side_new(const double *G, size_t k, size_t rows, bool factor, LinGramSide **out);
void spectra_gram_side_free(LinGramSide *s);
/* Singular values of the fused map of a (factored) and the factor whose Gram is Gb (k x k), values
 * only: sigma^2 = eig(Lᵀ Pᵀ Gb P L) (two dtrmm, or dsymm + dgemm when pivoted; then dsytrd +
 * dsterf). m x n is the shape of the fused map, p = min(m, n, k). Values below ~1e-8 sigma_max
 * are not resolved (the Gram squares them). *out is the caller's. */
int spectra_gram_fused(const LinGramSide *a, const double *Gb, size_t m, size_t n, Spectrum **out);
/* Eigenvalues (ascending) of the symmetric k x k matrix A (column-major, lower triangle used;
 * destroyed): dsytrd + dsterf (what dsyevd does without vectors). */
int spectra_sym_eigvals(double *A, size_t k, double *w);

/* The same steps for callers with their own values-only eigen-solver (the fast route of
 * core/analysis/farr.c): spectra_gram_side_factor is spectra_gram_side_new with `factor` but without the
 * eigen-solve (s->s holds zeros until spectrum_set_eigs fills it from G's eigenvalues);
 * spectra_gram_fused_core writes the fused core M = Lᵀ Pᵀ Gb P L (a->r x a->r, column-major; M holds
 * k x k doubles), whose eigenvalues are the squared singular values spectra_gram_fused returns. */
int spectra_gram_side_factor(const double *G, size_t k, size_t rows, LinGramSide **out);
int spectra_gram_fused_core(const LinGramSide *a, const double *Gb, double *M);
/* s->sigma (descending) from n ascending eigenvalues w: the largest min(s->p, n), clamped at 0,
 * as singular values, the rest zero; s->total updated. */
void spectrum_set_eigs(Spectrum *s, const double *w, size_t n);

/* True when spectra_effective_rank(s, tau) is the same for every spectrum whose squared values lie
 * within eps of s's (the l2 norm of the difference of the two sorted vectors of squared values):
 * the certificate of the fast route (core/analysis/farr.c), eps its bound. eps 0: exact, always true. */
bool spectra_rank_certain(const Spectrum *s, double eps, double tau);

/* ================================================================ energy and rank */

/* Effective rank at tau in (0, 1]: smallest r with cumulative energy >= tau (0 for a zero map). */
size_t spectra_effective_rank(const double *sigma, size_t p, double tau);
/* out[i] = sum_{j<=i} sigma_j^2 / sum sigma^2 (cumulative energy, 0-based i covers i+1 values);
 * all zeros for a zero map. out must hold p doubles. */
void spectra_cum_energy(const double *sigma, size_t p, double *out);
/* Fraction of the energy kept by the top r singular values (1 for a zero map). */
double spectra_energy_kept(const double *sigma, size_t p, size_t r);

#endif
