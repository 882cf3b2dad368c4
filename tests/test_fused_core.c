/* test_fused_core.c -- fused_core_lower (the rank sweep's fused core M = Lᵀ G L, lower triangle,
 * one AVX-512 kernel) against M in long double on k 32 to 256, with graded factors (columns 2^-12
 * to 2^12 apart) and an indefinite G: every entry on and below the diagonal within the
 * componentwise bound of the two dtrmm it replaces, (2 gamma_k + gamma_k^2) (|L|ᵀ|G||L|)_ij, and
 * no further from OpenBLAS's two dtrmm than twice that; the shapes it refuses (k not a multiple of
 * 32) refused. fused_core_cholesky on the same shapes: L Lᵀ within gamma_{k+2} (|L||Lᵀ|)_ij of A
 * in long double (the bound farr.c's fast_fused_err carries), zeros above the diagonal, L within
 * 1e-12 l_jj of dpotrf's on the well-conditioned ones; an indefinite, a singular and a NaN matrix refused. */
#include "testutil.h"
#include "fused_core.h"

#include <cblas.h>
#include <lapacke.h>

/* A (k x k, column-major) = Bᵀ B + shift I for B (2k x k) of normals with column c scaled by
 * grade^(c mod 5 - 2). */
static void random_gram(size_t k, double grade, double shift, double *A) {
    size_t m = 2 * k;
    double *B = calloc(m * k, sizeof(double));
    for (size_t c = 0; c < k; c++)
        for (size_t r = 0; r < m; r++) B[c * m + r] = nrand() * pow(grade, (double)(c % 5) - 2);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)k, (int)k, (int)m, 1.0, B, (int)m, B, (int)m, 0.0, A, (int)k);
    for (size_t i = 0; i < k; i++) A[i * k + i] += shift;
    free(B);
}

/* The largest error of M's lower triangle over its bound (exact M and |L|ᵀ|G||L| in long double);
 * *far: entries further from the two dtrmm's M than twice the bound. */
static double core_case(size_t k, double grade, bool indefinite, int *far) {
    double *L = malloc(k * k * sizeof(double)), *G = malloc(k * k * sizeof(double)), *M = malloc(k * k * sizeof(double));
    double *T = malloc(k * k * sizeof(double)), *work = malloc(fused_core_work(k) * sizeof(double));
    long double *W = calloc(k * k, sizeof(long double)), *S = calloc(k * k, sizeof(long double));
    random_gram(k, grade, 0, L);
    LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)k, L, (int)k);
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < j; i++) L[j * k + i] = 0;
    random_gram(k, 1 / grade, indefinite ? -4.0 * (double)k : 0, G);
    fused_core_lower(L, G, k, M, work);
    memcpy(T, G, k * k * sizeof(double));
    cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)k, (int)k, 1.0, L, (int)k, T, (int)k);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (int)k, (int)k, 1.0, L, (int)k, T, (int)k);
    for (size_t j = 0; j < k; j++)          /* W = G L and |G||L|, then the lower triangle of Lᵀ . */
        for (size_t q = j; q < k; q++)
            for (size_t i = 0; i < k; i++) {
                W[j * k + i] += (long double)G[q * k + i] * L[j * k + q];
                S[j * k + i] += fabsl((long double)G[q * k + i] * L[j * k + q]);
            }
    double u = 0x1p-53, gk = (double)k * u / (1 - (double)k * u), worst = 0;
    *far = 0;
    for (size_t j = 0; j < k; j++)
        for (size_t i = j; i < k; i++) {
            long double m = 0, s = 0;
            for (size_t p = i; p < k; p++) { m += (long double)L[i * k + p] * W[j * k + p]; s += fabsl(L[i * k + p] * S[j * k + p]); }
            double bound = (double)((2 * gk + gk * gk) * s) * (1 + 1e-9) + 1e-300;
            worst = fmax(worst, (double)fabsl((long double)M[j * k + i] - m) / bound);
            *far += fabs(M[j * k + i] - T[j * k + i]) > 2 * bound;
        }
    free(L); free(G); free(M); free(T); free(work); free(W); free(S);
    return worst;
}

/* The largest entry of L Lᵀ - A (long double) over gamma_{k+2} (|L||Lᵀ|)_ij for A from random_gram
 * (grade as there); *upper: nonzeros above the diagonal; *lapack: max |L - dpotrf's L| / l_jj. */
static double chol_case(size_t k, double grade, int *upper, double *lapack) {
    double *A = malloc(k * k * sizeof(double)), *L = malloc(k * k * sizeof(double)), *R = malloc(k * k * sizeof(double));
    random_gram(k, grade, 0, A);
    memcpy(L, A, k * k * sizeof(double));
    memcpy(R, A, k * k * sizeof(double));
    bool ok = fused_core_cholesky(L, k);
    CHECK(ok, "k %zu: a positive definite Gram refused", k);
    LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)k, R, (int)k);
    double u = 0x1p-53, g = (double)(k + 2) * u / (1 - (double)(k + 2) * u), worst = 0;
    *upper = 0;
    *lapack = 0;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < k; i++) {
            if (i < j) { *upper += L[j * k + i] != 0; continue; }
            long double e = -(long double)A[j * k + i], s = 0;
            for (size_t p = 0; p <= j; p++) {
                e += (long double)L[p * k + i] * L[p * k + j];
                s += fabsl((long double)L[p * k + i] * L[p * k + j]);
            }
            worst = fmax(worst, (double)(fabsl(e) / (g * s + 1e-300)));
            *lapack = fmax(*lapack, fabs(L[j * k + i] - R[j * k + i]) / fabs(R[j * k + j]));
        }
    free(A); free(L); free(R);
    return worst;
}

/* fused_core_cholesky's refusals: an indefinite Gram, a singular one (a zero row and column), a NaN. */
static void chol_refusals(size_t k) {
    double *A = malloc(k * k * sizeof(double));
    random_gram(k, 1.0, -4.0 * (double)k, A);
    CHECK(!fused_core_cholesky(A, k), "k %zu: an indefinite matrix factored", k);
    random_gram(k, 1.0, 0, A);
    for (size_t i = 0; i < k; i++) A[(k / 2) * k + i] = A[i * k + k / 2] = 0;
    CHECK(!fused_core_cholesky(A, k), "k %zu: a singular matrix factored", k);
    random_gram(k, 1.0, 0, A);
    A[3 * k + k - 1] = NAN;                       /* below the diagonal, column 3 */
    CHECK(!fused_core_cholesky(A, k), "k %zu: a NaN below the diagonal passed", k);
    free(A);
}

int main(void) {
    if (!fused_core_fits(128)) {
        printf("note: no AVX-512 on this CPU: fused_core_lower is not run (farr.c takes the two dtrmm)\n");
        return check_done();
    }
    CHECK(!fused_core_fits(100) && !fused_core_fits(0) && !fused_core_fits(16), "k 100 / 0 / 16 taken");
    static const size_t ks[] = {32, 64, 128, 192, 256};
    double worst = 0;
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++)
        for (int g = 0; g < 2; g++)
            for (int ind = 0; ind < 2; ind++) {
                int far = 0;
                double w = core_case(ks[c], g ? 0x1p12 : 1.0, ind, &far);
                CHECK(w <= 1, "k %zu%s%s: an entry %.3g of its bound from Lᵀ G L", ks[c], g ? " graded" : "",
                      ind ? " indefinite" : "", w);
                CHECK(far == 0, "k %zu%s%s: %d entries further than twice the bound from the two dtrmm", ks[c],
                      g ? " graded" : "", ind ? " indefinite" : "", far);
                worst = fmax(worst, w);
            }
    CHECK(worst > 0, "fused_core_lower: no rounding at all (did it run?)");
    printf("fused_core_lower: worst entry %.3g of its componentwise bound\n", worst);
    double cworst = 0, lworst = 0;
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++)
        for (int g = 0; g < 2; g++) {
            int upper = 0;
            double lap = 0, w = chol_case(ks[c], g ? 0x1p12 : 1.0, &upper, &lap);
            CHECK(w <= 1, "k %zu%s: an entry of L Lᵀ - A %.3g of gamma_{k+2} |L||Lᵀ|", ks[c], g ? " graded" : "", w);
            CHECK(upper == 0, "k %zu%s: %d nonzeros above the diagonal", ks[c], g ? " graded" : "", upper);
            /* forward error: ungraded A is well conditioned (graded: columns 2^24 apart, only backward) */
            if (!g) CHECK(lap < 1e-12, "k %zu: L %.3g (of l_jj) from dpotrf's", ks[c], lap);
            cworst = fmax(cworst, w);
            if (!g) lworst = fmax(lworst, lap);
        }
    for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) chol_refusals(ks[c]);
    CHECK(cworst > 0, "fused_core_cholesky: no rounding at all (did it run?)");
    printf("fused_core_cholesky: worst entry %.3g of gamma_{k+2} |L||Lᵀ|; %.3g of l_jj from dpotrf's L (ungraded)\n", cworst, lworst);
    return check_done();
}
