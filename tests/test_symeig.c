/* test_symeig.c -- core/linalg/symeig.c's eigenvalues against LAPACK dsyevd on random matrices (n = 1..130
 * and 256, single and batched), planted exact ranks, repeated values, zero and diagonal matrices,
 * huge and tiny scales, NaN/Inf inputs; on the AVX-512 path where the CPU has it and on the
 * portable path (forced), and the two paths against each other; the float reduction
 * (symeig_values_f32_ws) against dsyevd within symeig_bound_f32 on random, graded and
 * Gram-shaped matrices, singly and in lanes; its 16-lane reduction at every lane count 1-20 and n
 * 1-256 on mixed batches (zero, tiny, huge, graded, a NaN or Inf named with its matrix and entry),
 * against the one-by-one reduction and its own portable path; the float QR (the tridiagonal stage of
 * symeig_values_f32_ws) on given tridiagonals of eight kinds (Wilkinson-like, graded, clustered, zero
 * diagonal, tiny, diagonal, split, off-diagonals at the float tolerance) against dsyevd and against
 * the double QR lanes, and its AVX-512 lanes against its portable ones. */
#include "testutil.h"
#include "symeig.h"
#include "symeig_internal.h"

#include <lapacke.h>

static double worst_ratio;   /* max |w - dsyevd| / (n u ||A||_F) seen */
static int batch_mode;       /* 0: one matrix per call (dsterf stage); 1: with a second matrix (lanes) */

/* A's values into w: alone, or in a batch with a random partner (the tridiagonal stage in lanes). */
static int solve(const double *A, size_t n, double *w) {
    if (!batch_mode) return symeig_values(1, n, &A, &w);
    double *B = malloc((n * n + 1) * sizeof(double)), *wb = malloc((n + 1) * sizeof(double));
    for (size_t i = 0; i < n * n; i++) B[i] = nrand();
    const double *As[2] = {B, A};
    double *ws[2] = {wb, w};
    int rc = symeig_values(2, n, As, ws);
    free(B);
    free(wb);
    return rc;
}

/* (n, n) column-major symmetric normals; the upper triangle holds `upper` (NaN: never read). */
static double *rand_sym(size_t n, double scale, double upper) {
    double *A = malloc((n * n + 1) * sizeof(double));
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) A[i + j * n] = i >= j ? scale * nrand() : upper;
    return A;
}

/* dsyevd 'N' of A's lower triangle, descending. */
static void ref_values(const double *A, size_t n, double *w) {
    double *B = malloc(n * n * sizeof(double)), *t = malloc(n * sizeof(double));
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) B[i + j * n] = i >= j ? A[i + j * n] : A[j + i * n];
    lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'N', 'L', (lapack_int)n, B, (lapack_int)n, t);
    CHECK(info == 0, "dsyevd info %d", (int)info);
    for (size_t i = 0; i < n; i++) w[i] = t[n - 1 - i];
    free(B);
    free(t);
}

static double fro_lower(const double *A, size_t n) {
    double s = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) s += (i == j ? 1 : 2) * A[i + j * n] * A[i + j * n];
    return sqrt(s);
}

/* Our values of A against dsyevd's: within 1e-12 ||A||_2, descending. */
static void compare_ref(const double *A, size_t n, const double *w, const char *what) {
    double *r = malloc(n * sizeof(double)), nrm = 0, err = 0;
    ref_values(A, n, r);
    for (size_t i = 0; i < n; i++) nrm = fmax(nrm, fabs(r[i]));
    int unsorted = 0;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs(w[i] - r[i]));
        if (i && w[i] > w[i - 1]) unsorted++;
    }
    CHECK(err <= 1e-12 * nrm, "%s n %zu: max error %.3g vs ||A||_2 %.3g", what, n, err, nrm);
    CHECK(unsorted == 0, "%s n %zu: %d values out of descending order", what, n, unsorted);
    double fro = fro_lower(A, n);
    if (fro > 0) worst_ratio = fmax(worst_ratio, err / ((double)n * 0x1p-53 * fro));
    free(r);
}

/* Each n alone (one matrix per call) and in a batch of three (solved together in lanes). */
static void test_random(void) {
    for (size_t n = 1; n <= 257; n++) {
        if (n > 130 && n != 256) continue;
        double *A[3], *w[3];
        for (int b = 0; b < 3; b++) {
            A[b] = rand_sym(n, 1.0, NAN);
            w[b] = malloc(n * sizeof(double));
        }
        CHECK_OK(symeig_values(1, n, (const double *const *)A, w));
        compare_ref(A[0], n, w[0], "random");
        CHECK_OK(symeig_values(3, n, (const double *const *)A, w));
        for (int b = 0; b < 3; b++) {
            compare_ref(A[b], n, w[b], "random, batch of 3");
            free(A[b]);
            free(w[b]);
        }
    }
}

/* A batch of 19 mixed matrices (two groups of 8 in lanes, then 3; one zero) agrees with one call
 * per matrix to rounding. */
static void test_batch(size_t n) {
    enum { NB = 19 };
    double *A[NB], *w[NB], *w1 = malloc(n * sizeof(double));
    for (int b = 0; b < NB; b++) {
        A[b] = rand_sym(n, b == 3 ? 0.0 : pow(10.0, b % 7 - 3), NAN);
        w[b] = malloc(n * sizeof(double));
    }
    CHECK_OK(symeig_values(NB, n, (const double *const *)A, w));
    for (int b = 0; b < NB; b++) {
        CHECK_OK(symeig_values(1, n, (const double *const *)&A[b], &w1));
        double nrm = fabs(w1[0]) > fabs(w1[n - 1]) ? fabs(w1[0]) : fabs(w1[n - 1]), err = 0;
        for (size_t i = 0; i < n; i++) err = fmax(err, fabs(w1[i] - w[b][i]));
        CHECK(err <= 1e-13 * nrm, "batch n %zu matrix %d differs from a single call by %.3g of %.3g", n, b, err, nrm);
        compare_ref(A[b], n, w[b], "batched");
        free(A[b]);
        free(w[b]);
    }
    free(w1);
}

/* A = B Bᵀ, B (n x r) of small integers: exactly rank r (every product and sum exact). The top r
 * values match dsyevd, the n - r others are zero to within the bound. */
static void test_planted(size_t n, size_t r) {
    double *B = malloc(n * r * sizeof(double)), *A = calloc(n * n, sizeof(double)), *w = malloc(n * sizeof(double));
    for (size_t i = 0; i < n * r; i++) B[i] = (double)((int)(urand() * 17) - 8);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++)
            for (size_t t = 0; t < r; t++) A[i + j * n] += B[i + t * n] * B[j + t * n];
    CHECK_OK(solve(A, n, w));
    compare_ref(A, n, w, "planted rank");
    double bound = symeig_bound(n, fro_lower(A, n)), tail = 0;
    for (size_t i = r; i < n; i++) tail = fmax(tail, fabs(w[i]));
    CHECK(tail <= bound, "planted rank %zu of n %zu: zero tail up to %.3g, bound %.3g", r, n, tail, bound);
    CHECK(r == 0 || w[r - 1] > 100 * bound, "planted rank %zu: value %zu is %.3g", r, r - 1, w[r - 1]);
    free(B);
    free(A);
    free(w);
}

/* Exact repeated values: all-ones (n, 0 x (n-1)), c I, and Q diag(1,1,..,2,2,..) Qᵀ. */
static void test_repeated(size_t n) {
    double *A = calloc(n * n, sizeof(double)), *w = malloc(n * sizeof(double));
    for (size_t i = 0; i < n * n; i++) A[i] = 1;
    CHECK_OK(solve(A, n, w));
    double bound = symeig_bound(n, (double)n), off = fabs(w[0] - (double)n);
    for (size_t i = 1; i < n; i++) off = fmax(off, fabs(w[i]));
    CHECK(off <= bound, "all-ones n %zu: off by %.3g, bound %.3g", n, off, bound);
    for (size_t i = 0; i < n * n; i++) A[i] = i % (n + 1) == 0 ? 3.25 : 0;
    CHECK_OK(solve(A, n, w));
    off = 0;
    for (size_t i = 0; i < n; i++) off = fmax(off, fabs(w[i] - 3.25));
    CHECK(off == 0, "3.25 I n %zu: off by %.3g", n, off);
    double *Q = orth(n, n);   /* row-major */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t t = 0; t < n; t++) s += Q[i * n + t] * (t < n / 2 ? 1.0 : 2.0) * Q[j * n + t];
            A[i + j * n] = s;
        }
    CHECK_OK(solve(A, n, w));
    compare_ref(A, n, w, "repeated");
    free(Q);
    free(A);
    free(w);
}

/* Structures that split the tridiagonal problem: two decoupled random blocks, and Wilkinson's
 * W21+ (pairs of values equal to 1e-14) glued five times with 1e-10 off-diagonals. */
static void test_split(void) {
    size_t n = 128, nw = 105;
    double *A = rand_sym(n, 1.0, NAN), *w = malloc(n * sizeof(double));
    for (size_t j = 0; j < 50; j++)
        for (size_t i = 50; i < n; i++) A[i + j * n] = 0;
    CHECK_OK(solve(A, n, w));
    compare_ref(A, n, w, "two blocks");
    free(A);
    A = calloc(nw * nw, sizeof(double));
    for (size_t i = 0; i < nw; i++) {
        A[i + i * nw] = fabs(10.0 - (double)(i % 21));
        if (i + 1 < nw) A[i + 1 + i * nw] = (i + 1) % 21 == 0 ? 1e-10 : 1;
    }
    CHECK_OK(solve(A, nw, w));
    compare_ref(A, nw, w, "glued Wilkinson");
    free(A);
    free(w);
}

static void test_special(void) {
    size_t n = 40;
    double *A = calloc(n * n, sizeof(double)), *w = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) w[i] = 7;
    CHECK_OK(solve(A, n, w));
    int nz = 0;
    for (size_t i = 0; i < n; i++) nz += w[i] != 0;
    CHECK(nz == 0, "zero matrix: %d nonzero values", nz);
    /* diagonal: exactly the sorted diagonal */
    for (size_t i = 0; i < n; i++) A[i + i * n] = (double)((int)(i * 37 % n) - 20) * 0.375;
    CHECK_OK(solve(A, n, w));
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += w[i] != (double)((int)(n - 1 - i) - 20) * 0.375;
    CHECK(bad == 0, "diagonal: %d values differ from the sorted diagonal", bad);
    free(A);
    /* huge and tiny scales: the values of s A are s times those of A */
    for (int sgn = -1; sgn <= 1; sgn += 2) {
        double s = pow(10.0, 150 * sgn);
        A = rand_sym(n, 1.0, NAN);
        double *As = malloc(n * n * sizeof(double)), *ws = malloc(n * sizeof(double)), nrm = 0, err = 0;
        for (size_t i = 0; i < n * n; i++) As[i] = A[i] * s;
        CHECK_OK(solve(A, n, w));
        CHECK_OK(solve(As, n, ws));
        for (size_t i = 0; i < n; i++) nrm = fmax(nrm, fabs(w[i]));
        for (size_t i = 0; i < n; i++) err = fmax(err, fabs(ws[i] / s - w[i]));
        CHECK(err <= 1e-13 * nrm, "scale %g: values off by %.3g relative", s, err / nrm);
        free(A);
        free(As);
        free(ws);
    }
    /* NaN or Inf in the lower triangle is an error; in the upper triangle it is never read */
    A = rand_sym(n, 1.0, NAN);
    CHECK_OK(solve(A, n, w));
    A[5 + 3 * n] = NAN;
    double *two[2] = {A, A}, *wt[2] = {w, w};
    CHECK_ERR(solve(A, n, w), "NaN or infinite");
    A[5 + 3 * n] = -INFINITY;
    CHECK_ERR(symeig_values(2, n, (const double *const *)two, wt), "matrix 0");
    free(A);
    free(w);
    CHECK_OK(symeig_values(0, 0, NULL, NULL));
}

static void run_all(const char *path) {
    worst_ratio = 0;
    test_random();
    test_batch(128);
    test_batch(13);
    for (batch_mode = 0; batch_mode < 2; batch_mode++) {
        test_planted(128, 16);
        test_planted(128, 100);
        test_planted(64, 0);
        test_planted(5, 1);
        test_repeated(128);
        test_repeated(9);
        test_special();
        test_split();
    }
    CHECK(worst_ratio < SYMEIG_C, "%s: worst error %.3g n u ||A||_F is past SYMEIG_C", path, worst_ratio);
    printf("%s path: worst error against dsyevd %.3f n u ||A||_F (SYMEIG_C = %g)\n", path, worst_ratio, SYMEIG_C);
}

/* The AVX-512 and the portable paths agree to rounding. */
static void test_paths_agree(void) {
    for (size_t n = 1; n <= 256; n += n < 20 ? 1 : 37) {
        double *A = rand_sym(n, 1.0, NAN), *w1 = malloc(n * sizeof(double)), *w2 = malloc(n * sizeof(double)), nrm = 0;
        double err = 0;
        symeig_force_portable(false);
        CHECK_OK(symeig_values(1, n, (const double *const *)&A, &w1));
        symeig_force_portable(true);
        CHECK_OK(symeig_values(1, n, (const double *const *)&A, &w2));
        for (size_t i = 0; i < n; i++) {
            nrm = fmax(nrm, fabs(w2[i]));
            err = fmax(err, fabs(w1[i] - w2[i]));
        }
        CHECK(err <= 1e-13 * nrm, "n %zu: AVX-512 and portable paths differ by %.3g of %.3g", n, err, nrm);
        free(A);
        free(w1);
        free(w2);
    }
    symeig_force_portable(false);
}

/* Caller-held scratch: one SymeigWork for n = 130 reused across sizes 130, 7, 64 and a batch of 20
 * gives bit-identical values to fresh calls; a larger n than it holds is an error. */
static void test_workspace(void) {
    SymeigWork *ws = symeig_work_new(130);
    CHECK(ws != NULL, "symeig_work_new(130) failed");
    if (!ws) return;
    static const size_t ns[3] = {130, 7, 64};
    for (int t = 0; t < 3; t++) {
        size_t n = ns[t], nb = t == 2 ? 20 : 1;
        double *A[20], *w1[20], *w2[20];
        for (size_t b = 0; b < nb; b++) {
            A[b] = rand_sym(n, 1.0 + (double)b, NAN);
            w1[b] = malloc(n * sizeof(double));
            w2[b] = malloc(n * sizeof(double));
        }
        CHECK_OK(symeig_values_ws(ws, nb, n, (const double *const *)A, w1));
        CHECK_OK(symeig_values(nb, n, (const double *const *)A, w2));
        for (size_t b = 0; b < nb; b++) {
            CHECK(!memcmp(w1[b], w2[b], n * sizeof(double)), "n %zu matrix %zu: reused scratch changed the values", n, b);
            free(A[b]); free(w1[b]); free(w2[b]);
        }
    }
    double *A = rand_sym(131, 1.0, NAN), *w = malloc(131 * sizeof(double));
    CHECK_ERR(symeig_values_ws(ws, 1, 131, (const double *const *)&A, &w), "scratch for n = 130");
    free(A);
    free(w);
    symeig_work_free(ws);
}

/* A Gram-shaped (positive semi-definite, graded) n x n matrix: Bᵀ B, B (2n x n) with column j
 * scaled by decay^j. */
static double *rand_gram(size_t n, double decay) {
    size_t m = 2 * n;
    double *B = malloc(m * n * sizeof(double)), *A = calloc(n * n + 1, sizeof(double));
    for (size_t j = 0; j < n; j++)
        for (size_t t = 0; t < m; t++) B[t + j * m] = nrand() * pow(decay, (double)j);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            double d = 0;
            for (size_t t = 0; t < m; t++) d += B[t + i * m] * B[t + j * m];
            A[i + j * n] = A[j + i * n] = d;
        }
    free(B);
    return A;
}

/* The float reduction: nb matrices of kind (0 random, 1 graded Gram, 2 flat Gram) in one call;
 * each one's values within symeig_bound_f32 of dsyevd's in the l2 norm (the bound the fast
 * route's certificate uses), descending; returns the worst ||dw||_2 / (n 2^-24 ||A||_F). */
static double f32_case(SymeigWork *ws, size_t n, size_t nb, int kind) {
    double *A[16], *w[16], *r = malloc(n * sizeof(double)), worst = 0;
    for (size_t b = 0; b < nb; b++) {
        A[b] = kind == 0 ? rand_sym(n, 3.0, NAN) : rand_gram(n, kind == 1 ? 0.97 : 1.0);
        w[b] = malloc(n * sizeof(double));
    }
    CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w));
    for (size_t b = 0; b < nb; b++) {
        ref_values(A[b], n, r);
        double d2 = 0, fro = fro_lower(A[b], n), bound = symeig_bound_f32(n, fro);
        int unsorted = 0;
        for (size_t i = 0; i < n; i++) {
            d2 += (w[b][i] - r[i]) * (w[b][i] - r[i]);
            if (i && w[b][i] > w[b][i - 1]) unsorted++;
        }
        CHECK(sqrt(d2) <= bound, "f32 n %zu kind %d matrix %zu: ||dw|| %.3g past the bound %.3g", n, kind, b,
              sqrt(d2), bound);
        CHECK(unsorted == 0, "f32 n %zu: %d values out of order", n, unsorted);
        if (fro > 0) worst = fmax(worst, sqrt(d2) / ((double)n * 0x1p-24 * fro));
        free(A[b]);
        free(w[b]);
    }
    free(r);
    return worst;
}

/* The float reduction's values within its bound, and not the double path's values: it really
 * reduces in float (an error above 1e-12 ||A||_F somewhere), yet far below the bound. */
static void test_f32(void) {
    SymeigWork *ws = symeig_work_new(256);
    static const size_t ns[] = {1, 2, 3, 7, 16, 17, 33, 64, 128, 130, 192, 256};
    double worst = 0;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++)
        for (int kind = 0; kind < 3; kind++) {
            worst = fmax(worst, f32_case(ws, ns[t], 1, kind));
            worst = fmax(worst, f32_case(ws, ns[t], ns[t] > 130 ? 3 : 16, kind));
        }
    CHECK(worst > 1e-12 / (0x1p-24 * 128), "f32 path: worst error %.3g n u_f ||A||_F -- not reduced in float?", worst);
    printf("float reduction (%s): worst ||dw||_2 against dsyevd %.3f n 2^-24 ||A||_F (bound %g (n + 1))\n",
           symeig_uses_avx512() ? "AVX-512" : "portable", worst, SYMEIG_C);
    symeig_work_free(ws);
}

/* ---------------------------------------------------------------- the float reduction in lanes */

/* Matrix b of a mixed batch: kinds by b % 8 -- zero, tiny (1e-200), graded Gram, random, huge
 * (1e200), far below double's range for a power of two (1e-305, scaled in two steps), flat Gram,
 * and diagonal in its first half (columns with nothing below the diagonal: reflectors skipped
 * while the other lanes' are not). */
static double *mixed(size_t n, size_t b) {
    int kind = (int)(b % 8);
    if (kind == 2 || kind == 6) return rand_gram(n, kind == 2 ? 0.95 : 1.0);
    static const double scale[8] = {0, 1e-200, 0, 1, 1e200, 1e-305, 0, 1};
    double *A = rand_sym(n, scale[kind], NAN);
    for (size_t j = 0; kind == 7 && j < n / 2; j++)
        for (size_t i = j + 1; i < n; i++) A[i + j * n] = 0;
    return A;
}

/* max |a_ij| over A's lower triangle. */
static double max_lower(const double *A, size_t n) {
    double mx = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) mx = fmax(mx, fabs(A[i + j * n]));
    return mx;
}

/* ||x - y||_2 / sc and ||A||_F / sc, sc = max|a_ij| (no overflow or underflow at 1e+-300). */
static double dist_scaled(const double *x, const double *y, size_t n, double sc) {
    double d2 = 0;
    for (size_t i = 0; i < n; i++) d2 += (x[i] / sc - y[i] / sc) * (x[i] / sc - y[i] / sc);
    return sqrt(d2);
}
static double fro_scaled(const double *A, size_t n, double sc) {
    double s = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) s += (i == j ? 1 : 2) * (A[i + j * n] / sc) * (A[i + j * n] / sc);
    return sqrt(s);
}

/* Each of w[0..nb-1] against dsyevd within symeig_bound_f32 (l2), descending; a zero matrix's
 * values exactly zero. Returns the worst ||dw||_2 / (n 2^-24 ||A||_F). */
static double f32_against_ref(double *const *A, double *const *w, size_t n, size_t nb, const char *what) {
    double *r = malloc(n * sizeof(double)), worst = 0;
    for (size_t b = 0; b < nb; b++) {
        double sc = max_lower(A[b], n);
        int unsorted = 0, nonzero = 0;
        for (size_t i = 0; i < n; i++) {
            if (i && w[b][i] > w[b][i - 1]) unsorted++;
            nonzero += w[b][i] != 0;
        }
        CHECK(unsorted == 0, "%s n %zu matrix %zu: %d values out of order", what, n, b, unsorted);
        if (sc == 0) {
            CHECK(nonzero == 0, "%s n %zu matrix %zu: a zero matrix gave %d nonzero values", what, n, b, nonzero);
            continue;
        }
        ref_values(A[b], n, r);
        double d = dist_scaled(w[b], r, n, sc), fro = fro_scaled(A[b], n, sc);
        CHECK(d <= symeig_bound_f32(n, fro), "%s n %zu of %zu, matrix %zu (max %.3g): ||dw|| %.3g past the bound %.3g",
              what, n, nb, b, sc, d, symeig_bound_f32(n, fro));
        worst = fmax(worst, d / ((double)n * 0x1p-24 * fro));
    }
    free(r);
    return worst;
}

/* Every lane count 1-16 (and 17-20: a second group), n 1-256 with non-multiples of 16, mixed
 * batches, on the lanes path; and a NaN or Inf in any matrix of a batch named with its entry. */
static double test_f32_lanes_counts(SymeigWork *ws) {
    static const size_t ns[] = {1, 2, 3, 5, 15, 16, 17, 31, 64, 100, 128, 129, 192, 256};
    double worst = 0;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        size_t n = ns[t];
        for (size_t nb = 1; nb <= 20; nb++) {
            if (n > 129 && nb != 1 && nb != 7 && nb != 16 && nb != 19) continue;
            double *A[20], *w[20];
            for (size_t b = 0; b < nb; b++) {
                A[b] = mixed(n, b + nb);
                w[b] = malloc(n * sizeof(double));
            }
            CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w));
            worst = fmax(worst, f32_against_ref(A, w, n, nb, "f32 lanes"));
            if (n >= 3) {       /* a NaN / Inf in the lower triangle of the last matrix; one in an upper one is not read */
                size_t bad = nb - 1, i = n - 1, j = n / 2;
                A[0][j + i * n] = NAN;
                A[bad][i + j * n] = nb % 2 ? NAN : INFINITY;
                char want[96];
                snprintf(want, sizeof want, "matrix %zu has a NaN or infinite entry at (%zu, %zu)", bad, i, j);
                CHECK_ERR(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w), want);
                if (bad > 0) {
                    A[bad][i + j * n] = 0;
                    CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w));
                }
            }
            for (size_t b = 0; b < nb; b++) {
                free(A[b]);
                free(w[b]);
            }
        }
    }
    return worst;
}

/* The lanes path's values differ from the one-at-a-time float reduction's (another summation
 * order: it really runs) by at most the bound, and the AVX-512 and portable lanes agree to
 * rounding (within the bound; their products are fused differently). */
static void test_f32_lanes_paths(SymeigWork *ws) {
    static const size_t ns[] = {7, 33, 128, 130};
    double differ = 0;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        size_t n = ns[t], nb = 16;
        double *A[16], *w1[16], *w2[16];
        for (size_t b = 0; b < nb; b++) {
            A[b] = mixed(n, b);
            w1[b] = malloc(n * sizeof(double));
            w2[b] = malloc(n * sizeof(double));
        }
        symeig_f32_lanes_from(17);
        CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w1));
        symeig_f32_lanes_from(1);
        CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w2));
        bool avx = symeig_uses_avx512();
        for (int pass = 0; pass < (avx ? 2 : 1); pass++) {
            for (size_t b = 0; b < nb; b++) {
                double sc = max_lower(A[b], n);
                if (sc == 0) continue;
                double d = dist_scaled(w1[b], w2[b], n, sc), fro = fro_scaled(A[b], n, sc);
                CHECK(d <= symeig_bound_f32(n, fro), "n %zu matrix %zu: %s differ by %.3g, bound %.3g", n, b,
                      pass ? "AVX-512 and portable lanes" : "lanes and one at a time", d, symeig_bound_f32(n, fro));
                if (!pass) differ = fmax(differ, d / fro);
            }
            if (pass == 0 && avx) {     /* then w1: the portable lanes */
                symeig_force_portable(true);
                CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w1));
                symeig_force_portable(false);
            }
        }
        for (size_t b = 0; b < nb; b++) {
            free(A[b]);
            free(w1[b]);
            free(w2[b]);
        }
    }
    CHECK(differ > 0, "the lanes reduction gave the one-at-a-time values bit for bit: not run?");
}

static void test_f32_lanes(void) {
    SymeigWork *ws = symeig_work_new(256);
    symeig_f32_lanes_from(1);
    double worst = test_f32_lanes_counts(ws);
    printf("float reduction in lanes (%s): worst ||dw||_2 against dsyevd %.3f n 2^-24 ||A||_F (bound %g (n + 1))\n",
           symeig_uses_avx512() ? "AVX-512" : "portable", worst, SYMEIG_C);
    test_f32_lanes_paths(ws);
    symeig_f32_lanes_from(0);
    symeig_work_free(ws);
}

/* ---------------------------------------------------------------- the float QR on given tridiagonals */

/* A tridiagonal n x n matrix of kind (dense, column-major; the reduction passes it through: every
 * column has one entry below the diagonal): 0 Wilkinson-like (diagonal |i - (n-1)/2|, off 1: pairs
 * of values close together), 1 graded (diagonal and off 2^-i/4 apart: values over many scales), 2
 * clustered (1 + 1e-6 noise, off 1e-6), 3 zero diagonal and off 1 (values +-2cos), 4 tiny (random,
 * 1e-30), 5 already diagonal, 6 split by zero off-diagonals every 7 rows, 7 off-diagonals around
 * the float tolerance (2^-24 .. 2^-27 of the diagonal's 1). */
static double *tri_kind(size_t n, int kind) {
    double *A = calloc(n * n + 1, sizeof(double));
    for (size_t i = 0; i < n; i++) {
        double d = nrand(), e = nrand(), h = ((double)n - 1) / 2;
        if (kind == 0) d = fabs((double)i - h), e = 1;
        if (kind == 1) d = ldexp(1 + 0.1 * d, -(int)i / 4), e = ldexp(0.5 + 0.1 * e, -(int)i / 4);
        if (kind == 2) d = 1 + 1e-6 * d, e *= 1e-6;
        if (kind == 3) d = 0, e = 1;
        if (kind == 4) d *= 1e-30, e *= 1e-30;
        if (kind == 5) e = 0;
        if (kind == 6 && i % 7 == 6) e = 0;
        if (kind == 7) d = 1 + 0.5 * d, e = ldexp(e, -24 - (int)(i % 4));
        A[i + i * n] = d;
        if (i + 1 < n) A[i + 1 + i * n] = A[i + (i + 1) * n] = e;
    }
    return A;
}

/* Batches of tridiagonals of every kind (lane counts 1-16, n 1-256 with non-multiples of 16): the
 * float QR's values within symeig_bound_f32 of dsyevd's; and against the QR in double lanes on the
 * same T's (the path before it) they differ, but by at most the bound. Returns the worst error. */
static double test_f32_qr_kinds(SymeigWork *ws) {
    static const size_t ns[] = {1, 2, 3, 5, 16, 17, 31, 64, 100, 128, 129, 256};
    double worst = 0, differ = 0;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        size_t n = ns[t];
        for (size_t nb = 1; nb <= 16; nb += n > 129 ? 15 : 3) {
            double *A[16], *w[16], *wd[16];
            for (size_t b = 0; b < nb; b++) {
                A[b] = tri_kind(n, (int)((b + t) % 8));
                w[b] = malloc(n * sizeof(double));
                wd[b] = malloc(n * sizeof(double));
            }
            CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w));
            worst = fmax(worst, f32_against_ref(A, w, n, nb, "f32 QR on tridiagonals"));
            symeig_f32_qr_double(true);
            CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, wd));
            symeig_f32_qr_double(false);
            for (size_t b = 0; b < nb; b++) {
                double sc = max_lower(A[b], n);
                if (sc > 0) differ = fmax(differ, dist_scaled(w[b], wd[b], n, sc) / fro_scaled(A[b], n, sc));
                free(A[b]);
                free(w[b]);
                free(wd[b]);
            }
        }
    }
    CHECK(differ > 0x1p-40, "the float QR gave the double QR's values (%.3g apart): not run?", differ);
    return worst;
}

/* The float QR's AVX-512 and portable lanes agree to rounding: on batches of 16 tridiagonals of
 * every kind (the reduction passes them through exactly on both paths) within a quarter of the
 * bound (each path's rotations round differently -- 1 / r by rsqrt and a Newton step, or by sqrt and a
 * division --, so the two differ by about their errors against dsyevd: measured worst 0.1 of the
 * bound). */
static double test_f32_qr_paths(SymeigWork *ws) {
    double paths = 0;     /* the worst difference in units of the bound */
    if (!symeig_uses_avx512()) return paths;
    static const size_t ns[] = {17, 128};
    for (size_t t = 0; t < 2; t++) {
        size_t n = ns[t], nb = 16;
        double *A[16], *w1[16], *w2[16];
        for (size_t b = 0; b < nb; b++) {
            A[b] = tri_kind(n, (int)(b % 8));
            w1[b] = malloc(n * sizeof(double));
            w2[b] = malloc(n * sizeof(double));
        }
        CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w1));
        symeig_force_portable(true);
        CHECK_OK(symeig_values_f32_ws(ws, nb, n, (const double *const *)A, w2));
        symeig_force_portable(false);
        for (size_t b = 0; b < nb; b++) {
            double sc = max_lower(A[b], n), d = dist_scaled(w1[b], w2[b], n, sc);
            double lim = symeig_bound_f32(n, fro_scaled(A[b], n, sc)) / 4;
            paths = fmax(paths, d / lim / 4);
            CHECK(d <= lim, "n %zu matrix %zu: the float QR's AVX-512 and portable lanes differ by %.3g (limit %.3g)", n, b, d, lim);
            free(A[b]);
            free(w1[b]);
            free(w2[b]);
        }
    }
    return paths;
}

static void test_f32_qr(void) {
    SymeigWork *ws = symeig_work_new(256);
    double worst = test_f32_qr_kinds(ws);
    printf("float QR on tridiagonals (%s): worst ||dw||_2 against dsyevd %.3f n 2^-24 ||A||_F (bound %g (n + 1))\n",
           symeig_uses_avx512() ? "AVX-512" : "portable", worst, SYMEIG_C);
    double paths = test_f32_qr_paths(ws);
    if (paths > 0) printf("float QR: AVX-512 and portable lanes within %.4f of the bound\n", paths);
    symeig_work_free(ws);
}

int main(void) {
    test_workspace();
    test_f32();
    test_f32_lanes();
    test_f32_qr();
    if (symeig_uses_avx512()) {
        run_all("AVX-512");
        test_paths_agree();
    } else {
        printf("no AVX-512 on this CPU: portable path only\n");
    }
    symeig_force_portable(true);
    CHECK(!symeig_uses_avx512(), "the portable path cannot be forced");
    run_all("portable");
    test_f32();
    test_f32_lanes();
    test_f32_qr();
    symeig_force_portable(false);
    return check_done();
}
