/* fused_core.c -- the fast route's shared-side Cholesky factor G = L Lᵀ and its fused core M =
 * Lᵀ G L, lower triangle, in AVX-512 double (see fused_core.h): register tiles of 32 rows x 4
 * columns, C += A B over a range of the inner index (the core: run twice) or C -= L Lᵀ's panel
 * (the Cholesky's left-looking update). */
#include "fused_core.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TGT __attribute__((target("avx512f,avx512dq,fma")))
typedef double v8d __attribute__((vector_size(64), aligned(8)));

bool fused_core_fits(size_t k) {
    __builtin_cpu_init();
    return k && k % 32 == 0 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
}

/* C[i0..i0+31, j0..j0+3] = sum over p in [p0, k) of A[i0.., p] B[p, j0..]: A, B, C column-major
 * k x k; 16 accumulators, 4 loads of A's column and 4 broadcasts of B's row per step. */
TGT static void tile32x4(const double *A, const double *B, size_t k, size_t i0, size_t j0, size_t p0, double *C) {
    v8d acc[4][4];
    memset(acc, 0, sizeof acc);
    for (size_t p = p0; p < k; p++) {
        const double *a = A + p * k + i0;
        v8d x[4] = {*(const v8d *)a, *(const v8d *)(a + 8), *(const v8d *)(a + 16), *(const v8d *)(a + 24)};
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            double b = B[(j0 + (size_t)c) * k + p];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) acc[c][r] += x[r] * b;
        }
    }
    for (int c = 0; c < 4; c++)
        for (int r = 0; r < 4; r++) *(v8d *)(C + (j0 + (size_t)c) * k + i0 + 8 * (size_t)r) = acc[c][r];
}

/* T (k x k, column-major) = Lᵀ by 8 x 8 blocks transposed in registers (k a multiple of 8). */
TGT static void transpose_blocks(const double *L, size_t k, double *T) {
    for (size_t j0 = 0; j0 < k; j0 += 8)
        for (size_t i0 = 0; i0 < k; i0 += 8) {
            __m512d r[8], t[8];
            for (int c = 0; c < 8; c++) r[c] = _mm512_loadu_pd(L + (j0 + (size_t)c) * k + i0);
            /* three rounds of pairwise interleaves: r[c][i] -> column i of the block */
            for (int c = 0; c < 8; c += 2) {
                t[c] = _mm512_unpacklo_pd(r[c], r[c + 1]);
                t[c + 1] = _mm512_unpackhi_pd(r[c], r[c + 1]);
            }
            for (int c = 0; c < 8; c += 4)
                for (int d = 0; d < 2; d++) {
                    r[c + d] = _mm512_shuffle_f64x2(t[c + d], t[c + d + 2], 0x88);
                    r[c + d + 2] = _mm512_shuffle_f64x2(t[c + d], t[c + d + 2], 0xdd);
                }
            for (int d = 0; d < 4; d++) {
                t[d] = _mm512_shuffle_f64x2(r[d], r[d + 4], 0x88);
                t[d + 4] = _mm512_shuffle_f64x2(r[d], r[d + 4], 0xdd);
            }
            for (int c = 0; c < 8; c++) _mm512_storeu_pd(T + (i0 + (size_t)c) * k + j0, t[c]);
        }
}

void fused_core_lower(const double *L, const double *G, size_t k, double *M, double *work) {
    double *Lt = work, *W = work + k * k;
    transpose_blocks(L, k, Lt);                       /* Lt = Lᵀ: column j holds L's row j */
    /* W = G L: L[p, j] = 0 for p < j, so the sum starts at the tile's first column; rows of W above
     * the tile's first column's 32-row block are never read below (rows p >= i0 >= j0 / 32 * 32
     * are), so those tiles are skipped. i0 outer: G's 32-row strip stays in L1 over the columns. */
    for (size_t i0 = 0; i0 < k; i0 += 32)
        for (size_t j0 = 0; j0 < k && j0 < i0 + 32; j0 += 4) tile32x4(G, L, k, i0, j0, j0, W);
    /* M = Lᵀ W on the tiles that meet the lower triangle: Lt[i, p] = 0 for p < i, so the sum
     * starts at the tile's first row */
    for (size_t i0 = 0; i0 < k; i0 += 32)
        for (size_t j0 = 0; j0 < i0 + 32; j0 += 4) tile32x4(Lt, W, k, i0, j0, i0, M);
}

/* ================================================================ Cholesky */

/* Rows [i0, i0 + 8 mv) of columns j0..j0+3 of A (column-major k x k) -= sum over p < j0 of
 * A[i, p] A[j0 + c, p]: the left-looking update of a block column by the factor's columns so far,
 * summed in registers and subtracted once. */
TGT static inline __attribute__((always_inline)) void chol_update(double *A, size_t k, size_t i0, size_t j0, int mv) {
    v8d acc[4][4];
    memset(acc, 0, sizeof acc);
    for (size_t p = 0; p < j0; p++) {
        const double *a = A + p * k + i0, *b = A + p * k + j0;
        v8d x[4];
        for (int r = 0; r < mv; r++) x[r] = *(const v8d *)(a + 8 * r);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
#pragma GCC unroll 4
            for (int r = 0; r < mv; r++) acc[c][r] += x[r] * b[c];
    }
    for (int c = 0; c < 4; c++)
        for (int r = 0; r < mv; r++) {
            v8d *y = (v8d *)(A + (j0 + (size_t)c) * k + i0 + 8 * (size_t)r);
            *y -= acc[c][r];
        }
}

TGT static void chol_update1(double *A, size_t k, size_t i0, size_t j0) { chol_update(A, k, i0, j0, 1); }
TGT static void chol_update2(double *A, size_t k, size_t i0, size_t j0) { chol_update(A, k, i0, j0, 2); }
TGT static void chol_update3(double *A, size_t k, size_t i0, size_t j0) { chol_update(A, k, i0, j0, 3); }
TGT static void chol_update4(double *A, size_t k, size_t i0, size_t j0) { chol_update(A, k, i0, j0, 4); }

/* y[i] -= a x[i] for rows i in [from, k) (vectors of 8 from from's own, the rows before it masked). */
TGT static void chol_axpy(double *y, const double *x, double a, size_t from, size_t k) {
    size_t i = from / 8 * 8;
    __mmask8 m = (__mmask8)(0xffu << (from - i));
    v8d av = {a, a, a, a, a, a, a, a};
    for (; i < k; i += 8, m = 0xff) {
        __m512d yv = _mm512_maskz_loadu_pd(m, y + i), xv = _mm512_maskz_loadu_pd(m, x + i);
        _mm512_mask_storeu_pd(y + i, m, _mm512_fnmadd_pd(xv, (__m512d)av, yv));
    }
}

/* y[i] *= a for rows i in [from, k). */
TGT static void chol_scale(double *y, double a, size_t from, size_t k) {
    size_t i = from / 8 * 8;
    __mmask8 m = (__mmask8)(0xffu << (from - i));
    for (; i < k; i += 8, m = 0xff)
        _mm512_mask_storeu_pd(y + i, m, _mm512_mul_pd(_mm512_maskz_loadu_pd(m, y + i), _mm512_set1_pd(a)));
}

bool fused_core_cholesky(double *A, size_t k) {
    for (size_t j0 = 0; j0 < k; j0 += 4) {
        /* the block column's rows from its own (from the 8-row vector holding it: the few rows
         * above belong to the upper triangle, zeroed at the end), less the factor so far */
        for (size_t i0 = j0 / 8 * 8; i0 < k; i0 += 32) {
            size_t mv = (k - i0) / 8 < 4 ? (k - i0) / 8 : 4;
            if (mv == 4) chol_update4(A, k, i0, j0);
            else if (mv == 3) chol_update3(A, k, i0, j0);
            else if (mv == 2) chol_update2(A, k, i0, j0);
            else chol_update1(A, k, i0, j0);
        }
        /* the block column itself, right-looking over its 4 columns */
        for (size_t j = j0; j < j0 + 4; j++) {
            double *cj = A + j * k, d = cj[j];
            if (!(d > 0) || !(d < INFINITY)) return false;      /* not positive definite, or NaN / Inf */
            double l = sqrt(d);
            cj[j] = l;
            if (j + 1 < k) chol_scale(cj, 1.0 / l, j + 1, k);
            for (size_t j2 = j + 1; j2 < j0 + 4; j2++) chol_axpy(A + j2 * k, cj, cj[j2], j2, k);
        }
    }
    for (size_t j = 0; j < k; j++) memset(A + j * k, 0, j * sizeof(double));
    return true;
}
