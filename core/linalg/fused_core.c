/* fused_core.c -- M = Lᵀ G L, lower triangle, in AVX-512 double (see fused_core.h): one register
 * tile kernel (32 rows x 4 columns of C += A B over a range of the inner index) run twice. */
#include "fused_core.h"

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

void fused_core_lower(const double *L, const double *G, size_t k, double *M, double *work) {
    double *Lt = work, *W = work + k * k;
    for (size_t j = 0; j < k; j++)                   /* Lt = Lᵀ: column j holds L's row j */
        for (size_t i = 0; i < k; i++) Lt[j * k + i] = L[i * k + j];
    /* W = G L: L[p, j] = 0 for p < j, so the sum starts at the tile's first column */
    for (size_t j0 = 0; j0 < k; j0 += 4)
        for (size_t i0 = 0; i0 < k; i0 += 32) tile32x4(G, L, k, i0, j0, j0, W);
    /* M = Lᵀ W on the tiles that meet the lower triangle: Lt[i, p] = 0 for p < i, so the sum
     * starts at the tile's first row */
    for (size_t j0 = 0; j0 < k; j0 += 4)
        for (size_t i0 = j0 / 32 * 32; i0 < k; i0 += 32) tile32x4(Lt, W, k, i0, j0, i0, M);
}
