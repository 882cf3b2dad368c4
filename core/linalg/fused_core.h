/* fused_core.h -- the rank sweep's shared-side Cholesky factor and fused core M = Lᵀ G L
 * (core/analysis/farr.c's fast route: the squared singular values of a fused pair are M's
 * eigenvalues, L the shared side's Cholesky factor, G the own side's Gram), M's lower triangle
 * only -- what the eigen-solvers read -- by one AVX-512 double kernel instead of OpenBLAS's two
 * dtrmm on the whole square: W = G L on the rows M reads (the 32-row blocks at or below each
 * column's; ~0.8 k^3 flops at k 128), then Lᵀ W on the 32 x 4 tiles that meet the lower triangle
 * (~0.6 k^3: the tiles' upper corners are computed too), ~0.7x the dtrmm pair's 2 k^3; each loop
 * keeps its 32-row strip of G or Lᵀ in L1 over the columns. Every entry is a sum of at most k
 * products in double, accumulated with fused multiply-adds in some order, so the componentwise
 * bounds of the two dtrmm (|dW| <= gamma_k |G||L|, |d(Lᵀ W)| <= gamma_k |Lᵀ||W|) hold unchanged.
 * The Cholesky factor replaces dpotrf (0.5x its time at k 128; see fused_core_cholesky). */
#ifndef AL_FUSED_CORE_H
#define AL_FUSED_CORE_H

#include <stdbool.h>
#include <stddef.h>

/* Scratch (doubles) for k: Lᵀ and W. */
static inline size_t fused_core_work(size_t k) { return 2 * k * k; }
/* True where fused_core_lower runs: the CPU has AVX-512 (F, DQ) and k is a multiple of 32. */
bool fused_core_fits(size_t k);
/* M (k x k, column-major) gets Lᵀ G L on and below its diagonal (above it: unspecified). L: the
 * lower triangular factor (column-major, zeros above the diagonal, full rank); G: symmetric, full
 * storage; work: fused_core_work(k) doubles. Requires fused_core_fits(k). */
void fused_core_lower(const double *L, const double *G, size_t k, double *M, double *work);
/* The Cholesky factor of the fast route's shared sides, in place: A (k x k, column-major, its lower
 * triangle read) becomes L (A = L Lᵀ, lower triangular, zeros above the diagonal), left-looking in
 * blocks of 4 columns, the update by the factor so far summed in 32 x 4 register tiles. Each l_ij
 * is (a_ij - a sum of products in some order) times fl(1 / l_jj), so L L^T = A + dA with |dA| <=
 * gamma_{k+2} |L||Lᵀ| (the textbook gamma_{k+1} of Cholesky, one more rounding for the reciprocal).
 * False where a pivot is not positive and finite (A not numerically positive definite, or NaN):
 * A is then garbage and the caller takes LAPACK's dpotrf / dpstrf. Requires fused_core_fits(k). */
bool fused_core_cholesky(double *A, size_t k);

#endif
