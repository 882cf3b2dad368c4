/* bench_symeig.c -- values-only eigen-solves of 128x128 symmetric matrices, one thread (not a test).
 *
 *   bench_symeig [n] [matrices] [rounds]      (defaults 128, 64, 5)
 *
 * On `matrices` matrices, half Grams XᵀX (X: 512 x n normals with column scales decaying like a
 * trained head's) and half random symmetric, in one run: LAPACK dsytrd (nb 8, as spectra.c calls it,
 * and the default block size) + dsterf, dsterf alone on dsytrd's output, dsyevd 'N', ssyevd 'N'
 * (float), and core/linalg/symeig.c's symeig_values: one matrix per call (its tridiagonal stage is then
 * dsterf), 2 and 8 per call, all in one call (16 tridiagonal matrices at a time in vector lanes),
 * and its portable path; symeig_values_f32_ws (the reduction in float), all in one call, with
 * the 16-lane reduction and its T's by the float QR lanes (what runs) or by the double QR lanes (the
 * path before it; the two rounds alternating), one matrix at a time, and the lanes' portable path.
 * Times are thread CPU time per matrix, best of the rounds; every solve
 * includes copying its input (LAPACK destroys it); ratios are against dsytrd nb 8 + dsterf. Also
 * the worst deviation from dsyevd in units of n u ||A||_F. */
#define _GNU_SOURCE
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "al.h"
#include "symeig.h"
#include "symeig_internal.h"

void openblas_set_num_threads(int);

static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Standard normal (Box-Muller over drand48, seeded in main). */
static double nrand(void) { return sqrt(-2 * log(1 - drand48())) * cos(6.283185307179586 * drand48()); }

typedef struct {
    size_t n, nb, rounds;
    double **A, **W, *ref;      /* nb inputs (n, n), outputs, dsyevd's values (nb, n) */
    float **Af;
    double *buf, *d, *e, *tau, *work, *D, *E;   /* D, E: dsytrd's output per matrix */
    float *bf, *wf;
} Bench;

/* The mean time per matrix of one pass over the batch, best of the rounds, in ms. */
#define TIME(var, body) do { \
        double b_ = 1e30; \
        for (size_t r_ = 0; r_ < B->rounds; r_++) { \
            double t_ = cpu(); \
            body; \
            b_ = fmin(b_, cpu() - t_); \
        } \
        var = 1e3 * b_ / (double)B->nb; \
    } while (0)

static void make_inputs(Bench *B) {
    size_t n = B->n, rows = 512;
    double *X = malloc(rows * n * sizeof(double));
    for (size_t b = 0; b < B->nb; b++) {
        B->A[b] = malloc(n * n * sizeof(double));
        B->W[b] = malloc(n * sizeof(double));
        B->Af[b] = malloc(n * n * sizeof(float));
        if (b % 2 == 0) {
            for (size_t j = 0; j < n; j++)
                for (size_t i = 0; i < rows; i++) X[i + j * rows] = nrand() * exp(-4.0 * (double)j / (double)n);
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (int)n, (int)rows, 1.0, X, (int)rows, 0.0, B->A[b], (int)n);
        } else {
            for (size_t i = 0; i < n * n; i++) B->A[b][i] = nrand();
        }
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                if (i < j) B->A[b][i + j * n] = B->A[b][j + i * n];
                B->Af[b][i + j * n] = (float)B->A[b][i + j * n];
            }
    }
    free(X);
}

/* Worst |W - dsyevd| over the batch, in units of n u ||A||_F. */
static double worst_err(Bench *B) {
    double worst = 0;
    for (size_t b = 0; b < B->nb; b++) {
        double f = 0, err = 0;
        for (size_t i = 0; i < B->n * B->n; i++) f += B->A[b][i] * B->A[b][i];
        for (size_t i = 0; i < B->n; i++) err = fmax(err, fabs(B->W[b][i] - B->ref[b * B->n + B->n - 1 - i]));
        worst = fmax(worst, err / ((double)B->n * 0x1p-53 * sqrt(f)));
    }
    return worst;
}

static void sytrd_sterf(Bench *B, size_t b, size_t lwork) {
    size_t n = B->n;
    memcpy(B->buf, B->A[b], n * n * sizeof(double));
    LAPACKE_dsytrd_work(LAPACK_COL_MAJOR, 'L', (int)n, B->buf, (int)n, B->d, B->e, B->tau, B->work, (int)lwork);
    LAPACKE_dsterf_work((int)n, B->d, B->e);
    for (size_t i = 0; i < n; i++) B->W[b][i] = B->d[n - 1 - i];
}

int main(int argc, char **argv) {
    Bench B0 = {.n = 128, .nb = 64, .rounds = 5}, *B = &B0;
    if (argc > 1) B->n = (size_t)atol(argv[1]);
    if (argc > 2) B->nb = (size_t)atol(argv[2]);
    if (argc > 3) B->rounds = (size_t)atol(argv[3]);
    if (B->n < 2 || B->nb < 1 || B->rounds < 1) return fprintf(stderr, "usage: bench_symeig [n] [matrices] [rounds]\n"), 2;
    openblas_set_num_threads(1);
    srand48(20261125);
    size_t n = B->n, nb = B->nb;
    B->A = malloc(nb * sizeof(double *));
    B->W = malloc(nb * sizeof(double *));
    B->Af = malloc(nb * sizeof(float *));
    B->ref = malloc(nb * n * sizeof(double));
    B->buf = malloc(n * n * sizeof(double));
    B->bf = malloc(n * n * sizeof(float));
    B->wf = malloc(n * sizeof(float));
    B->d = malloc(n * sizeof(double));
    B->e = malloc(n * sizeof(double));
    B->tau = malloc(n * sizeof(double));
    B->work = malloc(64 * n * sizeof(double));
    B->D = malloc(nb * n * sizeof(double));
    B->E = malloc(nb * n * sizeof(double));
    make_inputs(B);
    for (size_t b = 0; b < nb; b++) {
        memcpy(B->buf, B->A[b], n * n * sizeof(double));
        LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'N', 'L', (int)n, B->buf, (int)n, B->ref + b * n);
        memcpy(B->buf, B->A[b], n * n * sizeof(double));
        LAPACKE_dsytrd_work(LAPACK_COL_MAJOR, 'L', (int)n, B->buf, (int)n, B->D + b * n, B->E + b * n, B->tau, B->work,
                            (int)(64 * n));
    }
    double t[14], err[7];
    TIME(t[0], for (size_t b = 0; b < nb; b++) sytrd_sterf(B, b, 8 * n));
    err[0] = worst_err(B);
    TIME(t[1], for (size_t b = 0; b < nb; b++) sytrd_sterf(B, b, 64 * n));
    TIME(t[2], for (size_t b = 0; b < nb; b++) {
        memcpy(B->d, B->D + b * n, n * sizeof(double));
        memcpy(B->e, B->E + b * n, n * sizeof(double));
        LAPACKE_dsterf_work((int)n, B->d, B->e);
    });
    TIME(t[3], for (size_t b = 0; b < nb; b++) {
        memcpy(B->buf, B->A[b], n * n * sizeof(double));
        LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'N', 'L', (int)n, B->buf, (int)n, B->W[b]);
    });
    TIME(t[4], for (size_t b = 0; b < nb; b++) {
        memcpy(B->bf, B->Af[b], n * n * sizeof(float));
        LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'N', 'L', (int)n, B->bf, (int)n, B->wf);
    });
    const double *const *A = (const double *const *)B->A;
    int rc = AL_OK;
    TIME(t[5], for (size_t b = 0; b < nb; b++) rc |= symeig_values(1, n, A + b, B->W + b));
    err[1] = worst_err(B);
    TIME(t[6], rc |= symeig_values(nb, n, A, B->W));
    err[2] = worst_err(B);
    TIME(t[8], for (size_t b = 0; b + 2 <= nb; b += 2) rc |= symeig_values(2, n, A + b, B->W + b));
    TIME(t[9], for (size_t b = 0; b + 8 <= nb; b += 8) rc |= symeig_values(8, n, A + b, B->W + b));
    SymeigWork *ws = symeig_work_new(n);
    if (!ws) return fprintf(stderr, "symeig_work_new: %s\n", al_errmsg()), 1;
    double tq[2] = {1e30, 1e30};       /* the float QR and the double QR, rounds alternating */
    for (size_t r = 0; r < 2 * B->rounds; r++) {
        symeig_f32_qr_double(r % 2);
        double t0 = cpu();
        rc |= symeig_values_f32_ws(ws, nb, n, A, B->W);
        tq[r % 2] = fmin(tq[r % 2], cpu() - t0);
        if (r < 2) err[r ? 6 : 4] = worst_err(B) * 0x1p-29;
    }
    symeig_f32_qr_double(false);
    t[10] = 1e3 * tq[0] / (double)nb;
    t[13] = 1e3 * tq[1] / (double)nb;
    symeig_f32_lanes_from(17);
    TIME(t[11], rc |= symeig_values_f32_ws(ws, nb, n, A, B->W));
    err[5] = worst_err(B) * 0x1p-29;
    symeig_f32_lanes_from(0);
    bool avx = symeig_uses_avx512();
    symeig_force_portable(true);
    TIME(t[7], rc |= symeig_values(nb, n, A, B->W));
    err[3] = worst_err(B);
    TIME(t[12], rc |= symeig_values_f32_ws(ws, nb, n, A, B->W));
    symeig_force_portable(false);
    symeig_work_free(ws);
    if (rc != AL_OK) return fprintf(stderr, "symeig_values: %s\n", al_errmsg()), 1;
    printf("values-only eigen-solves, n = %zu, %zu matrices (half Grams, half random), one thread, CPU ms per matrix "
           "(best of %zu):\n", n, nb, B->rounds);
    printf("  dsytrd nb 8 + dsterf      %8.4f   1.00x   (dsterf alone %.4f; worst error %.3f n u ||A||_F)\n", t[0], t[2],
           err[0]);
    printf("  dsytrd default + dsterf   %8.4f   %.2fx\n", t[1], t[0] / t[1]);
    printf("  dsyevd N                  %8.4f   %.2fx\n", t[3], t[0] / t[3]);
    printf("  ssyevd N (float)          %8.4f   %.2fx\n", t[4], t[0] / t[4]);
    printf("  symeig_values, 1 per call %8.4f   %.2fx   (%s; worst error %.3f n u ||A||_F)\n", t[5], t[0] / t[5],
           avx ? "AVX-512" : "portable", err[1]);
    printf("  symeig_values, 2 per call %8.4f   %.2fx\n", t[8], t[0] / t[8]);
    printf("  symeig_values, 8 per call %8.4f   %.2fx\n", t[9], t[0] / t[9]);
    printf("  symeig_values, batched    %8.4f   %.2fx   (all %zu in one call; worst error %.3f)\n", t[6], t[0] / t[6], nb,
           err[2]);
    printf("  symeig_values, portable   %8.4f   %.2fx   (batched; worst error %.3f)\n", t[7], t[0] / t[7], err[3]);
    printf("  f32 reduction, in lanes   %8.4f   %.2fx   (symeig_values_f32_ws, batched; worst error %.3f n 2^-24 ||A||_F)\n",
           t[10], t[0] / t[10], err[4]);
    printf("  f32 lanes, QR in double   %8.4f   %.2fx   (the same reduction, the T's by the double QR lanes; worst error %.3f)\n",
           t[13], t[0] / t[13], err[6]);
    printf("  f32 reduction, one by one %8.4f   %.2fx   (the same, each matrix reduced alone; worst error %.3f)\n", t[11],
           t[0] / t[11], err[5]);
    printf("  f32 reduction, portable   %8.4f   %.2fx   (in lanes)\n", t[12], t[0] / t[12]);
    printf("  symeig batched / ssyevd = %.2f, / dsytrd nb 8 + dsterf = %.2f; f32 lanes / one by one = %.2f; "
           "float QR / double QR = %.2f\n", t[6] / t[4], t[6] / t[0], t[10] / t[11], t[10] / t[13]);
    return 0;
}
