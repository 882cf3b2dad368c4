/* symeig.h -- eigenvalues only, in double, of small real symmetric matrices (n up to a few
 * hundred; tuned for n = 128), many per call: the eigen-solves of the rank sweep's Grams, about 3x
 * faster than LAPACK's dsytrd + dsterf per matrix when several come in one call.
 *
 * Algorithm. Each matrix is checked finite, scaled by a power of two (exact) so that max|a_ij| is
 * in [1/2, 1), copied to full storage and reduced to tridiagonal form T by Householder reflections:
 * the two-sided update of step k is fused with the matrix-vector product of step k+1 in one pass
 * over the trailing matrix (64 rows at a time in registers). The eigenvalues of T come from the
 * implicit symmetric QR iteration with Wilkinson shifts, 16 matrices at a time, one per vector lane
 * (two interleaved chains of 8 lanes, each lane sweeping its own unreduced window, lanes outside it
 * rotated by an exact identity), or, for a call with a single matrix, from LAPACK dsterf. An
 * off-diagonal |b_i| <= tol = u * g, g = max_i (|a_i| + |b_i| + |b_{i-1}|) >= ||T||_2, is treated
 * as zero (the deflation and splitting tolerance). AVX-512 (F, DQ, BW, VL) is used where the CPU
 * has it, detected at run time; the portable path runs the same arithmetic in portable C (GCC
 * vectors, a scalar sweep) and gives the same values to rounding.
 *
 * Error bound. The computed values are the exact eigenvalues of A + E (sorted, descending) with
 * ||E||_F <= symeig_bound(n, ||A||_F) = SYMEIG_C * n * u * ||A||_F, u = 2^-53, so by Weyl each
 * value is within that of the exact one. Parts of E, in the usual first-order analysis (Higham,
 * Accuracy and Stability of Numerical Algorithms, Lemma 19.3 / Thm 19.4 for the n - 2 two-sided
 * reflections; Givens sequences in Sec. 19.6 for the QR sweeps; the rigorous worst case grows like
 * n^2 u): the reduction, O(n u ||A||_F); the QR sweeps, O(u ||T||) each and ~2n of them, with the
 * rotations' work confined to the shrinking window; each of at most n - 1 deflations or splits,
 * <= sqrt(2) u g <= sqrt(2) u sqrt(3) ||A||_F (dsterf's relative test is stricter); reflectors
 * whose column norm is below 2^-400 max|a| are skipped (below 2^-400 n ||A||_F in all). SYMEIG_C =
 * 8 is the engineering constant (lin_f32.h uses the same form with c = 4 for LAPACK's solver):
 * measured deviations from LAPACK dsyevd are at most 0.3 n u ||A||_F at n = 128 and 3 n u ||A||_F
 * at n <= 8 (tests/test_symeig.c, bench/bench_symeig.c). */
#ifndef AL_SYMEIG_H
#define AL_SYMEIG_H

#include <stddef.h>

#define SYMEIG_C 8.0

/* Eigenvalues of nb symmetric n x n matrices: A[i] column-major, full storage with leading
 * dimension n (only the lower triangle is read; A[i] is not modified), w[i] (n doubles) gets
 * the values in descending order. Matrices go through the QR lanes 16 at a time (a call with one
 * matrix, or a last group of one, takes dsterf): pass as many as you have. Scratch ((n + 8) n +
 * 34 n doubles) is allocated once per call and reused across the batch. A NaN or infinite entry
 * in a lower triangle is an error naming the matrix (by its index) and the entry; n = 0 or nb = 0
 * is a no-op. Returns AL_OK or AL_ERR (al_err). Thread-safe: no shared state but the tests' path
 * switch (symeig_internal.h). */
int symeig_values(size_t nb, size_t n, const double *const *A, double *const *w);

/* The same with caller-held scratch (for callers that solve batch after batch: no allocation,
 * no page faults per call): ws from symeig_work_new(N), any n <= N. One ws per thread. */
typedef struct SymeigWork SymeigWork;
SymeigWork *symeig_work_new(size_t n);
void symeig_work_free(SymeigWork *ws);
int symeig_values_ws(SymeigWork *ws, size_t nb, size_t n, const double *const *A, double *const *w);

/* The bound above: SYMEIG_C * n * 2^-53 * fro, fro = ||A||_F. */
double symeig_bound(size_t n, double fro);

/* The same values with the Householder reduction and the tridiagonal QR in float: A[i], scaled as
 * above, is rounded to float (||dA||_F <= 2^-24 ||A||_F) and reduced in float. From 9 matrices a
 * group (of up to 16) is reduced at once, one matrix per float lane of a vector, over the lower
 * triangles packed by columns (element (i, j) of the 16 matrices is one vector: every operation
 * vertical, each reflector's norm, sqrt, division and tiny-column skip a masked vector operation;
 * the update and the symmetric product y = A v of the next step fused in one pass over 8 columns at
 * a time); fewer matrices are reduced one by one (16 rows a vector, full storage). Each lane runs
 * the one-by-one arithmetic in another summation order. A group's T's (2 or more) then go through
 * the implicit QR in float: one chain of 16 float lanes (AVX-512: 1 / r by vrsqrt14ps and one
 * Newton step, 1 / r^2 by vrcp14ps and one Newton step, relative error below 2^-22; portable: sqrt
 * and divisions, the same values to rounding), deflating and splitting at tol = 2^-24 g; a lone
 * matrix's T goes to dsterf in double. The values are the exact eigenvalues of A + E, ||E||_F <=
 * symeig_bound_f32(n, ||A||_F) = SYMEIG_C (n + 1) 2^-24 ||A||_F: the rounding of A (2^-24
 * ||A||_F) and the double path's c n u with u = 2^-24, which covers the same two stages -- the
 * reduction, O(n u ||A||_F); ~2n QR sweeps of O(u ||T||) each (measured: 145 sweeps of 16 lanes
 * for 16 Grams at n = 128, 1.1 a value; each rotation's c^2 + s^2 = 1 within a few u, so its error
 * stays O(u) of the rows it touches); at most n - 1 deflations or splits of <= sqrt(2) u g each --
 * by the same first-order argument and engineering constant as above. Measured against dsyevd
 * (tests/test_symeig.c, bench/bench_symeig.c): 0.22 n 2^-24 ||A||_F at n = 128 (0.046 with the QR
 * in double), at most ~3.6 n 2^-24 ||A||_F at n <= 3, against the 8 (n + 1) allowed. For callers
 * that only count values at thresholds with that bound (the rank sweep's fast route), not for
 * values shown. */
int symeig_values_f32_ws(SymeigWork *ws, size_t nb, size_t n, const double *const *A, double *const *w);
double symeig_bound_f32(size_t n, double fro);

#endif
