/* symeig.h -- eigenvalues only, in double, of small real symmetric matrices (n up to a few
 * hundred; tuned for n = 128), one at a time or many per call: the eigen-solves of the rank
 * sweep's Grams, faster than LAPACK's dsytrd + dsterf per matrix.
 *
 * Algorithm: the matrix is scaled by a power of two (exact) so that max|a_ij| lies in [1/2, 1),
 * copied to full storage, and reduced to tridiagonal form T by Householder reflections (the
 * one-sided update of step k fused with the symmetric matrix-vector product of step k+1 in one
 * pass over the trailing matrix: AVX-512 where the CPU has it, chosen at run time, else the same
 * code in portable vector C; the two give the same values to rounding). T's eigenvalues come from
 * the root-free QL/QR iteration (LAPACK dsterf), then are scaled back.
 *
 * Error bound: the computed values are the exact eigenvalues of A + E (sorted, descending) with
 * ||E||_F <= symeig_bound(n, ||A||_F) = SYMEIG_C * n * u * ||A||_F, u = 2^-53, so by Weyl each
 * value is within that of the exact one. The Householder reduction's backward error is
 * ||E1||_F <= c n u ||A||_F in the usual first-order analysis (Higham, Accuracy and Stability,
 * Thm 19.4 / Lemma 19.3 applied to the n - 2 two-sided reflections; the rigorous worst case is
 * O(n^2 u)), dsterf's is O(n u ||T||) the same way, and reflectors whose column has norm below
 * 2^-400 of max|a| are skipped (a perturbation below 2^-400 n ||A||_F). SYMEIG_C = 8 covers both
 * with a wide margin: measured errors against LAPACK dsyevd are below 0.1 n u ||A||_F
 * (tests/test_symeig.c). This is the LAPACK-style bound (lin_f32.h uses the same form, c = 4). */
#ifndef AL_SYMEIG_H
#define AL_SYMEIG_H

#include <stddef.h>

#define SYMEIG_C 8.0

/* Eigenvalues of nb symmetric n x n matrices: A[i] column-major, full storage with leading
 * dimension n (only the lower triangle is read; A[i] is not modified), w[i] (n doubles) gets
 * the values in descending order. Scratch (about (n + 8)^2 doubles) is allocated once per call
 * and reused across the batch. A NaN or infinite entry is an error naming the matrix; n = 0 is
 * a no-op. Returns AL_OK or AL_ERR (al_err). Thread-safe (no shared state). */
int symeig_values(size_t nb, size_t n, const double *const *A, double *const *w);

/* The bound above: SYMEIG_C * n * 2^-53 * fro, fro = ||A||_F. */
double symeig_bound(size_t n, double fro);

#endif
