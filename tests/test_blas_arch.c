/* test_blas_arch.c -- core/linalg/blas_arch.c: on a CPU whose features cover one of OpenBLAS's
 * AVX-512 / AVX2 kernel families a program linked with attn_core does not run the library's
 * Prescott fallback, already when main starts (the constructor); the choice is made once (a second
 * call returns the same line); the variable it sets for the library is unset again; and the kernels
 * it switched to give dpotrf + dtrmm (the fast rank sweep's fused cores), dgemm and ssyrk results
 * within rounding of a plain-loop reference. */
#define _GNU_SOURCE
#include "blas_arch.h"
#include "check.h"

#include <cblas.h>
#include <lapacke.h>
#include <stdlib.h>

#define N 96

char *openblas_get_corename(void);

static double lcg(unsigned long *s) {
    *s = *s * 6364136223846793005UL + 1442695040888963407UL;
    return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

/* G = B Bᵀ + N I (N x N, SPD), B random; C = B Bᵀ in plain loops. */
static void spd(double *G, double *B, double *C) {
    unsigned long s = 7;
    for (size_t i = 0; i < (size_t)N * N; i++) B[i] = lcg(&s);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++) {
            double t = 0;
            for (size_t k = 0; k < N; k++) t += B[i * N + k] * B[j * N + k];
            C[i * N + j] = t;
            G[i * N + j] = t + (i == j ? N : 0);
        }
}

/* dgemm and dpotrf + dtrmm (L Lᵀ rebuilt from the factor) against the loops. */
static void check_double_kernels(void) {
    double *G = malloc(sizeof(double) * N * N), *B = malloc(sizeof(double) * N * N);
    double *C = malloc(sizeof(double) * N * N), *D = malloc(sizeof(double) * N * N);
    spd(G, B, C);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0, B, N, B, N, 0.0, D, N);
    double e = 0;
    for (size_t i = 0; i < (size_t)N * N; i++) e = fmax(e, fabs(D[i] - C[i]));
    CHECK(e < 1e-12 * N, "dgemm against the loops: %.3g", e);
    double *L = malloc(sizeof(double) * N * N);
    for (size_t i = 0; i < (size_t)N * N; i++) L[i] = G[i];
    CHECK(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', N, L, N) == 0, "dpotrf");
    for (size_t i = 0; i < N; i++)
        for (size_t j = i + 1; j < N; j++) L[i * N + j] = 0;
    for (size_t i = 0; i < (size_t)N * N; i++) D[i] = L[i];
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, N, N, 1.0, L, N, D, N);
    e = 0;
    for (size_t i = 0; i < (size_t)N * N; i++) e = fmax(e, fabs(D[i] - G[i]) / N);
    CHECK(e < 1e-12 * N, "dpotrf + dtrmm rebuild G: %.3g", e);
    free(G), free(B), free(C), free(D), free(L);
}

/* ssyrk's lower triangle against the loops in double, to float rounding. */
static void check_float_kernel(void) {
    float *A = malloc(sizeof(float) * N * N), *S = calloc((size_t)N * N, sizeof(float));
    unsigned long s = 11;
    for (size_t i = 0; i < (size_t)N * N; i++) A[i] = (float)lcg(&s);
    cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, N, N, 1.0f, A, N, 0.0f, S, N);
    double e = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j <= i; j++) {
            double t = 0;
            for (size_t k = 0; k < N; k++) t += (double)A[i * N + k] * A[j * N + k];
            e = fmax(e, fabs(S[i * N + j] - t));
        }
    CHECK(e < 1e-5 * N, "ssyrk against the loops: %.3g", e);
    free(A), free(S);
}

int main(void) {
    char at_start[32];
    snprintf(at_start, sizeof at_start, "%s", openblas_get_corename());   /* before any call of ours */
    const char *first = blas_arch_choose();
    printf("%s\n", first);
    CHECK(blas_arch_choose() == first, "chosen once");
    CHECK(!getenv("OPENBLAS_CORETYPE") || strstr(first, "(") == NULL, "OPENBLAS_CORETYPE unset after the switch");
    bool covered = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (covered && strncmp(first, "OpenBLAS", 8) == 0 && !getenv("OPENBLAS_CORETYPE"))
        CHECK(strcasecmp(at_start, "Prescott") != 0, "kernels %s at main's start on a CPU with AVX2 / AVX-512", at_start);
    CHECK(strstr(first, openblas_get_corename()) != NULL, "the line names the running kernels: %s", first);
    check_double_kernels();
    check_float_kernel();
    return check_done();
}
