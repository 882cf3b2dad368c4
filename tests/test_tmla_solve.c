/* test_tmla_solve.c -- issue 32's per-layer cost of `convert mla`: the eigen-solves and the Cholesky of the
 * report's input covariance skip LAPACKE's row-major transpositions (LAPACK gets the same column-major
 * triangle), and the unridged Cholesky attempt that must fail is skipped when the calibration has fewer
 * token rows than dims (N + 16 <= hidden: Sigma - mu muᵀ singular). The numbers must not move:
 *  - tmla_eig_desc equals the old route (LAPACKE_dsyevd row-major, columns reversed, signs fixed) bit for
 *    bit, reading only the upper triangle; tmla_eval_inputs equals the old route (LAPACKE_dpotrf row-major
 *    with the ridge ladder, then dtrmm) bit for bit, on a singular covariance;
 *  - a conversion calibrated on 16 tokens (hidden 32) makes ONE Cholesky attempt per layer (the old code
 *    two: the first failed), and each layer's report errors equal those measured again on
 *    tmla_eval_inputs' draw (check's, which still makes both attempts): the same inputs.
 * LAPACKE_dsyevd / LAPACKE_dpotrf are wrapped here (this executable's definitions win; the library's are
 * opened by name) to count the calls and their layouts; the old code fails the counts. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <lapacke.h>
#include <cblas.h>

#include "tiny_model.h"
#include "testutil.h"
#include "calib.h"

static int n_potrf, n_potrf_row, n_syevd_row;

/* The library's own function (liblapacke: this executable no longer needs it, so it is opened here). */
static void *lapacke(const char *name) {
    static void *h;
    if (!h) h = dlopen("liblapacke.so.3", RTLD_NOW | RTLD_GLOBAL);
    void *p = h ? dlsym(h, name) : NULL;
    if (!p) { fprintf(stderr, "%s: %s\n", name, dlerror()); exit(1); }
    return p;
}

lapack_int LAPACKE_dpotrf(int layout, char uplo, lapack_int n, double *a, lapack_int lda) {
    static lapack_int (*real)(int, char, lapack_int, double *, lapack_int);
    if (!real) *(void **)&real = lapacke("LAPACKE_dpotrf");
    n_potrf++;
    n_potrf_row += layout == LAPACK_ROW_MAJOR;
    return real(layout, uplo, n, a, lda);
}

lapack_int LAPACKE_dsyevd(int layout, char jobz, char uplo, lapack_int n, double *a, lapack_int lda, double *w) {
    static lapack_int (*real)(int, char, char, lapack_int, double *, lapack_int, double *);
    if (!real) *(void **)&real = lapacke("LAPACKE_dsyevd");
    n_syevd_row += layout == LAPACK_ROW_MAJOR;
    return real(layout, jobz, uplo, n, a, lda, w);
}

static double lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0 - 0.5;
}

/* The old sym_eig_desc: row-major dsyevd, columns reversed, each vector's largest entry positive. */
static void old_eig(double *A, size_t n, double *w) {
    LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)n, A, (lapack_int)n, w);
    for (size_t j = 0; j < n / 2; j++) {
        size_t k = n - 1 - j;
        double t = w[j]; w[j] = w[k]; w[k] = t;
        for (size_t i = 0; i < n; i++) { t = A[i * n + j]; A[i * n + j] = A[i * n + k]; A[i * n + k] = t; }
    }
    for (size_t j = 0; j < n; j++) {
        size_t imax = 0;
        for (size_t i = 1; i < n; i++)
            if (fabs(A[i * n + j]) > fabs(A[imax * n + j])) imax = i;
        if (A[imax * n + j] < 0)
            for (size_t i = 0; i < n; i++) A[i * n + j] = -A[i * n + j];
    }
}

static void test_eig(size_t n) {
    uint64_t s = n;
    double *X = calloc(n * 3 * n, sizeof *X), *A = calloc(n * n, sizeof *A), *B = calloc(n * n, sizeof *B);
    double *wa = calloc(n, sizeof *wa), *wb = calloc(n, sizeof *wb);
    for (size_t i = 0; i < 3 * n * n; i++) X[i] = lcg(&s);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)(3 * n), 1.0, X, (int)n, X, (int)n, 0.0, A,
                (int)n);                                  /* not exactly symmetric: only the upper triangle counts */
    memcpy(B, A, n * n * sizeof *A);
    old_eig(A, n, wa);
    int rows = n_syevd_row;
    CHECK_OK(tmla_eig_desc(B, n, wb, "a test matrix"));
    CHECK(n_syevd_row == rows, "n %zu: tmla_eig_desc took LAPACKE's row-major route (its two transpositions)", n);
    CHECK(!memcmp(wa, wb, n * sizeof *wa) && !memcmp(A, B, n * n * sizeof *A),
          "n %zu: eigenpairs equal the old route's bit for bit (w0 %.17g / %.17g, v00 %.17g / %.17g)", n, wa[0], wb[0], A[0],
          B[0]);
    free(X); free(A); free(B); free(wa); free(wb);
}

/* The old shape_inputs on attn_random_input's rows: row-major dpotrf over the ridge ladder, then dtrmm. */
static Mat *old_inputs(size_t T, size_t n, uint64_t seed, const double *Sigma, const double *mu) {
    Mat *X = attn_random_input(T, (int)n, seed);
    double *L = calloc(n * n, sizeof *L), *A = calloc(n * n, sizeof *A), *Z = calloc(T * n, sizeof *Z), tr = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) L[i * n + j] = Sigma[i * n + j] - mu[i] * mu[j];
    for (size_t i = 0; i < n; i++) tr += L[i * n + i];
    lapack_int info = 1;
    for (int k = 0; k < 8 && info != 0; k++) {
        memcpy(A, L, n * n * sizeof *A);
        double ridge = k ? tr / (double)n * pow(10.0, -12 + k) : 0;
        for (size_t i = 0; i < n; i++) A[i * n + i] += ridge;
        info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, A, (lapack_int)n);
    }
    vec_f2d(X->data, T * n, Z);
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)T, (int)n, 1.0, A, (int)n, Z, (int)n);
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < n; j++) X->data[t * n + j] = (float)(Z[t * n + j] + mu[j]);
    free(L); free(A); free(Z);
    return X;
}

/* Layer l's report errors measured again on tmla_eval_inputs' draw (what `check` draws). */
static void remeasure(Model *m, const TmlaResult *r, int l, const double *S, const double *mu, double *se, double *oe) {
    AttnLayer *gqa = NULL;
    AttnOut *a = NULL, *b = NULL;
    Mat *X = tmla_eval_inputs(r->opts.eval_tokens, m->cfg.hidden, r->opts.seed, S, mu);
    int pos[64];
    for (int t = 0; t < 64; t++) pos[t] = t;
    CHECK(X && X->rows <= 64, "the report's inputs drawn again");
    if (X && attn_layer_load(m, l, &gqa) == AL_OK && attn_eval(gqa, X, pos, true, &a) == AL_OK &&
        attn_eval(r->layers[l], X, pos, true, &b) == AL_OK)
        attn_rel_err(a, b, se, oe);
    attn_out_free(a); attn_out_free(b); attn_layer_free(gqa); mat_free(X);
}

int main(void) {
    test_eig(1);
    test_eig(7);
    test_eig(200);
    const char *tmp = test_tmpdir();
    Forward *f;
    Model *m = tu_open_tiny(tmp, "solve-qwen2", tu_tiny("qwen2", 2, 2), &f);
    if (!m) return check_done();
    int ids[16];
    tu_tiny_ids(ids, 16, 9);
    double **S, **mu;
    CalibStats *st = tu_tiny_calib(m, f, ids, 16, 16, &S, &mu);    /* 16 token rows, hidden 32: singular */
    fwd_free(f);
    if (!st) return check_done();
    Mat *xo = old_inputs(64, 32, 11, S[0], mu[0]);
    int p0 = n_potrf;
    Mat *xn = tmla_eval_inputs(64, 32, 11, S[0], mu[0]);
    CHECK(n_potrf - p0 == 2, "tmla_eval_inputs (check's draw, no calibration given): %d Cholesky attempts, the first "
          "fails on the singular covariance", n_potrf - p0);
    CHECK(xo && xn && !memcmp(xo->data, xn->data, 64 * 32 * sizeof(float)),
          "the report's inputs equal the old route's bit for bit (x00 %.9g / %.9g)", xo ? xo->data[0] : 0,
          xn ? xn->data[0] : 0);
    mat_free(xo); mat_free(xn);
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 12;
    o.calib = st;
    TmlaResult *r = NULL;
    p0 = n_potrf;
    int rows = n_potrf_row + n_syevd_row;
    CHECK_OK(tmla_convert(m, &o, &r));
    CHECK(n_potrf - p0 == 2, "convert mla on 2 layers, 16 calibration tokens, hidden 32: %d Cholesky attempts (one per "
          "layer; the old code made 4, each layer's first failing)", n_potrf - p0);
    CHECK(n_potrf_row + n_syevd_row == rows, "the conversion's solves skip LAPACKE's row-major transpositions (%d calls)",
          n_potrf_row + n_syevd_row - rows);
    for (int l = 0; r && l < 2; l++) {
        double se = NAN, oe = NAN;
        remeasure(m, r, l, S[l], mu[l], &se, &oe);
        CHECK(se == r->rep[l].score_err && oe == r->rep[l].out_err && oe > 0,
              "layer %d: the report's errors (%.17g, %.17g) are those of check's inputs (%.17g, %.17g)", l,
              r->rep[l].score_err, r->rep[l].out_err, se, oe);
    }
    CHECK(r && r->solve_s > 0 && r->solve_cpu_s > 0, "the conversion's time is kept (%g s, CPU %g s)", r ? r->solve_s : 0,
          r ? r->solve_cpu_s : 0);
    tmla_result_free(r);
    calib_free_arrays(2, S, mu);
    calib_free(st);
    model_free(m);
    return check_done();
}
