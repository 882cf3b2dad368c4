/* test_spectra.c -- product SVD (Gram and QR routes) against a dense double LAPACK reference at
 * random and planted-rank shapes (DeepSeek-like included), effective ranks, vectors, sweeps. */
#include "testutil.h"
#include "spectra.h"
#include "sweep.h"

#include <cblas.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------- random matrices */

/* X (a x c) = P (a x r) diag(s) Q (b x r)ᵀ ... as float Mat (a x b). */
static Mat *compose(const double *P, size_t a, const double *s, const double *Q, size_t b, size_t r) {
    Mat *M = mat_new(a, b);
    for (size_t i = 0; i < a; i++)
        for (size_t j = 0; j < b; j++) {
            double v = 0;
            for (size_t t = 0; t < r; t++) v += P[i * r + t] * s[t] * Q[j * r + t];
            M->data[i * b + j] = (float)v;
        }
    return M;
}

/* ---------------------------------------------------------------- comparisons */

/* The tolerance: every sigma within 1e-5 sigma_max, those above 1e-3 sigma_max within
 * 1e-4 relative, and effective ranks equal at 0.99 and 0.999. */
static void compare(const Spectrum *got, const Spectrum *ref, const char *what) {
    size_t p = got->p < ref->p ? got->p : ref->p;
    double smax = ref->sigma[0];
    int bad_abs = 0, bad_rel = 0;
    for (size_t i = 0; i < ref->p; i++) {
        double g = i < got->p ? got->sigma[i] : 0, r = ref->sigma[i];
        if (fabs(g - r) > 1e-5 * smax) bad_abs++;
        if (r > 1e-3 * smax && fabs(g - r) > 1e-4 * r) bad_rel++;
    }
    (void)p;
    CHECK(bad_abs == 0, "%s: %d singular values off by more than 1e-5 sigma_max", what, bad_abs);
    CHECK(bad_rel == 0, "%s: %d large singular values off by more than 1e-4 relative", what, bad_rel);
    CHECK_NEAR(got->total, ref->total, 1e-6 * ref->total);
    CHECK(spectra_effective_rank(got->sigma, got->p, 0.99) == spectra_effective_rank(ref->sigma, ref->p, 0.99),
          "%s: rank at 0.99 %zu vs %zu", what, spectra_effective_rank(got->sigma, got->p, 0.99),
          spectra_effective_rank(ref->sigma, ref->p, 0.99));
    CHECK(spectra_effective_rank(got->sigma, got->p, 0.999) == spectra_effective_rank(ref->sigma, ref->p, 0.999),
          "%s: rank at 0.999 %zu vs %zu", what, spectra_effective_rank(got->sigma, got->p, 0.999),
          spectra_effective_rank(ref->sigma, ref->p, 0.999));
}

/* Checks u_iᵀ (A op B) v_i = sigma_i and orthonormality of the leading vectors (sigma above
 * 1e-6 sigma_max), computing (A op B) v_i through the factors. */
static void check_vectors(const Mat *A, const Mat *B, spectra_op op, const Spectrum *s, const char *what) {
    size_t m = s->m, n = s->n, k = A->cols;
    size_t q = 0;
    while (q < s->p && s->sigma[q] > 1e-6 * s->sigma[0]) q++;
    double worst_s = 0, worst_o = 0;
    double *t = malloc(k * sizeof(double)), *y = malloc(m * sizeof(double));
    for (size_t i = 0; i < q; i++) {
        /* t = op(B) v_i (k), y = A t (m) */
        for (size_t a = 0; a < k; a++) {
            double v = 0;
            for (size_t j = 0; j < n; j++)
                v += (op == SPECTRA_AB ? B->data[a * n + j] : B->data[j * k + a]) * s->Vt[i * n + j];
            t[a] = v;
        }
        double d = 0;
        for (size_t r = 0; r < m; r++) {
            double v = 0;
            for (size_t a = 0; a < k; a++) v += A->data[r * k + a] * t[a];
            d += s->U[r * s->p + i] * v;
        }
        double e = fabs(d - s->sigma[i]) / s->sigma[0];
        if (e > worst_s) worst_s = e;
        for (size_t j = 0; j <= i; j++) {
            double du = 0, dv = 0;
            for (size_t r = 0; r < m; r++) du += s->U[r * s->p + i] * s->U[r * s->p + j];
            for (size_t c = 0; c < n; c++) dv += s->Vt[i * n + c] * s->Vt[j * n + c];
            double want = i == j ? 1 : 0;
            if (fabs(du - want) > worst_o) worst_o = fabs(du - want);
            if (fabs(dv - want) > worst_o) worst_o = fabs(dv - want);
        }
    }
    free(t); free(y);
    CHECK(worst_s < 1e-6, "%s: u_i' M v_i differs from sigma_i by %.3g sigma_max", what, worst_s);
    CHECK(worst_o < 1e-6, "%s: singular vectors not orthonormal (off by %.3g)", what, worst_o);
}

static void product_case(const Mat *A, const Mat *B, spectra_op op, bool vectors, const char *what) {
    Spectrum *ref = NULL, *g = NULL, *q = NULL, *sa = NULL, *sb = NULL;
    CHECK_OK(spectra_dense_product_svd(A, B, op, 0, &ref));
    CHECK_OK(spectra_product_svd(A, B, op, vectors ? SPECTRA_VECTORS : 0, &g, &sa, &sb));
    CHECK_OK(spectra_product_svd(A, B, op, SPECTRA_QR | (vectors ? SPECTRA_VECTORS : 0), &q, NULL, NULL));
    if (ref && g && q) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s (gram)", what);
        compare(g, ref, buf);
        snprintf(buf, sizeof buf, "%s (qr)", what);
        compare(q, ref, buf);
        if (vectors) {
            check_vectors(A, B, op, g, what);
            check_vectors(A, B, op, q, what);
        }
    }
    /* The factor spectra agree with dense SVDs of the factors. */
    if (sa && sb) {
        Spectrum *ra = NULL, *rb = NULL;
        CHECK_OK(spectra_svd(A, 0, &ra));
        CHECK_OK(spectra_svd(B, 0, &rb));
        if (ra && rb) {
            compare(sa, ra, "left factor");
            compare(sb, rb, "right factor");
        }
        spectrum_free(ra); spectrum_free(rb);
    }
    spectrum_free(ref); spectrum_free(g); spectrum_free(q);
    spectrum_free(sa); spectrum_free(sb);
}

/* ---------------------------------------------------------------- cases */

static void test_energy(void) {
    double s[] = { 3, 2, 1 };
    CHECK(spectra_effective_rank(s, 3, 0.5) == 1, "tau 0.5");
    CHECK(spectra_effective_rank(s, 3, 9.0 / 14) == 1, "tau exactly at the first step");
    CHECK(spectra_effective_rank(s, 3, 0.9) == 2, "tau 0.9");
    CHECK(spectra_effective_rank(s, 3, 0.95) == 3, "tau 0.95");
    CHECK(spectra_effective_rank(s, 3, 1.0) == 3, "tau 1");
    double z[] = { 0, 0 };
    CHECK(spectra_effective_rank(z, 2, 0.99) == 0, "zero map has rank 0");
    double c[3];
    spectra_cum_energy(s, 3, c);
    CHECK_NEAR(c[0], 9.0 / 14, 1e-15);
    CHECK_NEAR(c[1], 13.0 / 14, 1e-15);
    CHECK_NEAR(c[2], 1.0, 1e-15);
    CHECK_NEAR(spectra_energy_kept(s, 3, 2), 13.0 / 14, 1e-15);
    CHECK_NEAR(spectra_energy_kept(s, 3, 0), 0.0, 0);
    CHECK_NEAR(spectra_energy_kept(z, 2, 1), 1.0, 0);
}

static void test_dense(void) {
    Mat *W = randn(30, 7, 1.0);
    Spectrum *s = NULL, *g = NULL;
    CHECK_OK(spectra_svd(W, SPECTRA_VECTORS, &s));
    CHECK_OK(spectra_sigma_gram(W, &g));
    if (s && g) {
        CHECK(s->p == 7 && g->p == 7, "p = min(m, n)");
        compare(g, s, "gram vs gesdd");
        /* sum sigma^2 = ||W||_F^2 */
        double f = mat_fro(W);
        CHECK_NEAR(s->total, f * f, 1e-9 * f * f);
        for (size_t i = 1; i < s->p; i++) CHECK(s->sigma[i] <= s->sigma[i - 1], "descending");
    }
    spectrum_free(s); spectrum_free(g);
    Mat *Wt = mat_transpose(W);
    CHECK_OK(spectra_sigma_gram(Wt, &g));   /* wide: Gram of the other side */
    CHECK_OK(spectra_svd(W, 0, &s));
    if (s && g) compare(g, s, "gram of a wide matrix");
    spectrum_free(s); spectrum_free(g);
    mat_free(W); mat_free(Wt);
}

static void test_random_products(void) {
    Mat *A, *B;
    A = randn(40, 16, 1.0); B = randn(16, 30, 0.3);
    product_case(A, B, SPECTRA_AB, true, "40x16 @ 16x30");
    mat_free(A); mat_free(B);
    A = randn(10, 16, 1.0); B = randn(16, 12, 1.0);           /* m, n < k */
    product_case(A, B, SPECTRA_AB, true, "10x16 @ 16x12");
    mat_free(A); mat_free(B);
    A = randn(64, 24, 1.0); B = randn(50, 24, 2.0);           /* A @ Bᵀ */
    product_case(A, B, SPECTRA_ABT, true, "64x24 @ (50x24)T");
    mat_free(A); mat_free(B);
    /* Decaying factor spectra (as trained heads have): scale columns. */
    A = randn(200, 32, 1.0); B = randn(32, 150, 1.0);
    for (size_t i = 0; i < 200; i++) for (size_t j = 0; j < 32; j++) A->data[i * 32 + j] *= (float)exp(-0.25 * j);
    product_case(A, B, SPECTRA_AB, true, "200x32 @ 32x150 decaying");
    mat_free(A); mat_free(B);
}

/* DeepSeek-like shapes: QK (1536x128 @ (512x128)ᵀ) and VO (512x128 @ 128x7168). */
static void test_deepseek_shapes(void) {
    Mat *Q = randn(1536, 128, 0.02), *K = randn(512, 128, 0.05);
    for (size_t i = 0; i < 1536; i++) for (size_t j = 0; j < 128; j++) Q->data[i * 128 + j] *= (float)exp(-0.03 * j);
    product_case(Q, K, SPECTRA_ABT, false, "QK 1536x128 @ (512x128)T");
    mat_free(Q); mat_free(K);
    Mat *V = randn(512, 128, 0.05), *O = randn(128, 7168, 0.01);
    for (size_t i = 0; i < 512; i++) for (size_t j = 0; j < 128; j++) V->data[i * 128 + j] *= (float)exp(-0.05 * j);
    product_case(V, O, SPECTRA_AB, false, "VO 512x128 @ 128x7168");
    mat_free(V); mat_free(O);
}

/* Planted rank r with equal singular values: A = U_r Pᵀ (rank r, singular Gram), B = P V_rᵀ +
 * P⊥ Z (full rank): A B = U_r V_rᵀ. With and without a tiny noise floor on A. */
static void planted_case(size_t m, size_t k, size_t n, size_t r, double noise, spectra_op op) {
    double *Ur = orth(m, r), *Vr = orth(n, r), *Pk = orth(k, k);
    double *P = malloc(k * r * sizeof(double));
    for (size_t i = 0; i < k; i++) for (size_t j = 0; j < r; j++) P[i * r + j] = Pk[i * k + j];
    double *ones = malloc(k * sizeof(double));
    for (size_t i = 0; i < k; i++) ones[i] = 1.0;
    Mat *A = compose(Ur, m, ones, P, k, r);                     /* m x k */
    for (size_t i = 0; i < m * k; i++) A->data[i] += (float)(noise * nrand());
    /* Bᵀ (n x k) = V_r Pᵀ + Z P⊥ᵀ with Z random. */
    Mat *Bt = mat_new(n, k);
    double *Z = malloc(n * k * sizeof(double));
    for (size_t i = 0; i < n * k; i++) Z[i] = 0.7 * nrand();
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < k; a++) {
            double v = 0;
            for (size_t t = 0; t < r; t++) v += Vr[i * r + t] * Pk[a * k + t];
            for (size_t t = r; t < k; t++) v += Z[i * k + t] * Pk[a * k + t];
            Bt->data[i * k + a] = (float)v;
        }
    free(Z);
    Mat *B = op == SPECTRA_AB ? mat_transpose(Bt) : mat_copy(Bt);
    Spectrum *s = NULL, *q = NULL, *ref = NULL, *sa = NULL;
    CHECK_OK(spectra_product_svd(A, B, op, SPECTRA_VECTORS, &s, &sa, NULL));
    CHECK_OK(spectra_product_svd(A, B, op, SPECTRA_QR, &q, NULL, NULL));
    CHECK_OK(spectra_dense_product_svd(A, B, op, 0, &ref));
    if (s && q && ref) {
        char what[96];
        snprintf(what, sizeof what, "planted rank %zu (%zux%zu @ %zux%zu, noise %g)", r, m, k, k, n, noise);
        CHECK(spectra_effective_rank(s->sigma, s->p, 0.999) == r, "%s: gram rank %zu", what,
              spectra_effective_rank(s->sigma, s->p, 0.999));
        CHECK(spectra_effective_rank(q->sigma, q->p, 0.999) == r, "%s: qr rank %zu", what,
              spectra_effective_rank(q->sigma, q->p, 0.999));
        CHECK(spectra_effective_rank(s->sigma, s->p, 0.99) == r, "%s: gram rank at 0.99", what);
        CHECK(spectra_effective_rank(ref->sigma, ref->p, 0.999) == r, "%s: dense rank", what);
        compare(s, ref, what);
        compare(q, ref, what);
        CHECK_NEAR(s->sigma[0], 1.0, 1e-3);
        CHECK_NEAR(s->sigma[r - 1], 1.0, 1e-3);
        if (noise == 0) CHECK(s->sigma[r] < 1e-5, "%s: sigma_r = %g", what, s->sigma[r]);
        check_vectors(A, B, op, s, what);
        if (sa && noise == 0)
            CHECK(spectra_effective_rank(sa->sigma, sa->p, 0.999999) == r, "left factor rank %zu",
                  spectra_effective_rank(sa->sigma, sa->p, 0.999999));
    }
    spectrum_free(s); spectrum_free(q); spectrum_free(ref); spectrum_free(sa);
    mat_free(A); mat_free(B); mat_free(Bt);
    free(Ur); free(Vr); free(Pk); free(P); free(ones);
}

static void test_planted(void) {
    planted_case(96, 32, 80, 8, 0.0, SPECTRA_AB);
    planted_case(96, 32, 80, 8, 1e-5, SPECTRA_AB);
    planted_case(128, 48, 64, 13, 0.0, SPECTRA_ABT);
    planted_case(128, 48, 64, 13, 1e-5, SPECTRA_ABT);
    planted_case(512, 128, 600, 8, 1e-6, SPECTRA_AB);   /* head-sized, singular Gram */
}

/* ---------------------------------------------------------------- sweeps */

static atomic_int hits[100];
static int task_mark(size_t i, int worker, void *ud) {
    (void)ud;
    if (worker < 0) return al_err("bad worker");
    atomic_fetch_add(&hits[i], 1);
    /* Some BLAS work, to make sure one-thread BLAS inside workers is fine. */
    Mat *A = randn(8, 8, 1.0);
    Spectrum *s = NULL;
    int rc = spectra_svd(A, 0, &s);
    spectrum_free(s);
    mat_free(A);
    return rc;
}
static int task_fail(size_t i, int worker, void *ud) {
    (void)worker; (void)ud;
    if (i == 37) return al_err("head %zu failed on purpose", i);
    return AL_OK;
}

static void test_sweep(void) {
    int before = openblas_get_num_threads();
    CHECK_OK(sweep_run(100, 0, task_mark, NULL));
    int all_once = 1;
    for (int i = 0; i < 100; i++) if (atomic_load(&hits[i]) != 1) all_once = 0;
    CHECK(all_once, "every unit ran exactly once");
    CHECK(openblas_get_num_threads() == before, "BLAS thread count restored (%d vs %d)",
          openblas_get_num_threads(), before);
    CHECK_OK(sweep_run(0, 0, task_mark, NULL));
    CHECK(sweep_threads(1, 4) == 1, "threads capped at units");
    CHECK(sweep_threads(100, 3) == 3, "explicit thread count");
    CHECK_ERR(sweep_run(100, 2, task_fail, NULL), "head 37 failed on purpose");
    al_interrupt_flag = 1;
    for (int i = 0; i < 100; i++) atomic_store(&hits[i], 0);
    CHECK(sweep_run(100, 2, task_mark, NULL) == AL_INTERRUPTED, "interrupt stops the sweep");
    int any = 0;
    for (int i = 0; i < 100; i++) any += atomic_load(&hits[i]);
    CHECK(any == 0, "no unit ran after the interrupt (%d did)", any);
    al_interrupt_flag = 0;
}

int main(void) {
    test_energy();
    test_dense();
    test_random_products();
    test_planted();
    test_deepseek_shapes();
    test_sweep();
    return check_done();
}
