/* fused_core.h -- the rank sweep's fused core M = Lᵀ G L (core/analysis/farr.c's fast route: the
 * squared singular values of a fused pair are M's eigenvalues, L the shared side's Cholesky
 * factor, G the own side's Gram), its lower triangle only -- what the eigen-solvers read -- by
 * one AVX-512 double kernel instead of OpenBLAS's two dtrmm on the whole square: W = G L (k^3
 * flops), then Lᵀ W on the 32 x 4 tiles that meet the lower triangle (~0.6 k^3 at k 128: the
 * tiles' upper corners are computed too), ~0.8x the dtrmm pair's 2 k^3. Every entry is a sum of at most k products
 * in double, accumulated with fused multiply-adds in some order, so the componentwise bounds of
 * the two dtrmm (|dW| <= gamma_k |G||L|, |d(Lᵀ W)| <= gamma_k |Lᵀ||W|) hold unchanged. */
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

#endif
