/* test_spectral_stats.c -- core/analysis/spectral_stats: closed forms of stable rank, entropy
 * rank and participation ratio on hand-made spectra; a planted power law recovered by the
 * WeightWatcher fit (alpha, and the planted xmin found by the KS search); the Marchenko-Pastur
 * edge of Gaussian random matrices (all eigenvalues inside; a planted spike outside); on a demo
 * model, the statistics of the spectra a FaRR sweep caches equal those of a dense SVD of each
 * head's explicitly formed matrices. */
#include "testutil.h"
#include "farr.h"
#include "farr_internal.h"
#include "spectral_stats.h"
#include "spectra.h"

/* ---------------------------------------------------------------- closed forms */

static void test_closed_forms(void) {
    double id[16], spike[16] = {3.0}, geo[16];
    for (int i = 0; i < 16; i++) id[i] = 1.0, geo[i] = pow(0.7, i);
    CHECK_NEAR(sstats_stable_rank(id, 16), 16, 1e-12);
    CHECK_NEAR(sstats_entropy_rank(id, 16), 16, 1e-12);
    CHECK_NEAR(sstats_participation(id, 16), 16, 1e-12);
    CHECK_NEAR(sstats_stable_rank(spike, 16), 1, 1e-12);
    CHECK_NEAR(sstats_entropy_rank(spike, 16), 1, 1e-12);
    CHECK_NEAR(sstats_participation(spike, 16), 1, 1e-12);
    /* geometric sigma_i = r^i, i < n: q = r^2 */
    double r = 0.7, q = r * r, n = 16;
    double sr = (1 - pow(q, n)) / (1 - q);
    double pr = pow((1 - pow(q, n)) / (1 - q), 2) / ((1 - pow(q, 2 * n)) / (1 - q * q));
    double c = (1 - r) / (1 - pow(r, n));                       /* p_i = c r^i */
    double mean_i = c * r * (1 - n * pow(r, n - 1) + (n - 1) * pow(r, n)) / ((1 - r) * (1 - r));
    double er = exp(-log(c) - log(r) * mean_i);
    CHECK_NEAR(sstats_stable_rank(geo, 16), sr, 1e-12);
    CHECK_NEAR(sstats_participation(geo, 16), pr, 1e-12);
    CHECK_NEAR(sstats_entropy_rank(geo, 16), er, 1e-10);
    CHECK(sstats_entropy_rank(geo, 16) > 1 && sstats_entropy_rank(geo, 16) < 16, "entropy rank %g",
          sstats_entropy_rank(geo, 16));
    double zero[4] = {0};
    CHECK(sstats_stable_rank(zero, 4) == 0 && sstats_entropy_rank(zero, 4) == 0 && sstats_participation(zero, 4) == 0,
          "a zero map's ranks are 0");
}

/* ---------------------------------------------------------------- power law */

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* n values from a Pareto of density exponent alpha above xmin. */
static void pareto(double *x, size_t n, double alpha, double xmin) {
    for (size_t i = 0; i < n; i++) x[i] = xmin * pow(urand(), -1.0 / (alpha - 1.0));
}

static void test_powerlaw(void) {
    static double x[3000];
    const double alphas[] = {2.0, 2.5, 4.0};
    for (int t = 0; t < 3; t++) {         /* ten draws of 2000: the mean within 0.1, each within 4 sigma */
        double mean = 0;
        for (int r = 0; r < 10; r++) {
            pareto(x, 2000, alphas[t], 1.0);
            SStatsFit f;
            CHECK_OK(sstats_powerlaw_fit(x, 2000, &f));
            CHECK(fabs(f.alpha - alphas[t]) < 4 * f.sigma, "planted alpha %g: fitted %g +- %g (xmin %g, %zu in the tail)",
                  alphas[t], f.alpha, f.sigma, f.xmin, f.n_tail);
            CHECK(f.ks < 0.05 && f.sigma > 0 && f.n_tail > 100, "KS %g, sigma %g, tail %zu", f.ks, f.sigma, f.n_tail);
            mean += f.alpha / 10;
        }
        CHECK(fabs(mean - alphas[t]) < 0.1, "planted alpha %g: mean fit %g", alphas[t], mean);
        if (t < 2) CHECK(fabs(mean - alphas[t]) < 0.03, "planted alpha %g: mean fit %g", alphas[t], mean);
    }
    /* a flat body of 1000 below the planted xmin = 2 and 2000 Pareto values above: over 21 draws the
     * KS search stops at the knee (within 5%) in about half of them (single draws scatter upward: a
     * higher xmin fits the same tail), at least a third here, and never inside the body */
    double xm[21], am[21];
    SStatsFit f;
    for (int r = 0; r < 21; r++) {
        pareto(x, 2000, 2.5, 2.0);
        for (size_t i = 2000; i < 3000; i++) x[i] = 0.2 + 1.8 * urand();
        CHECK_OK(sstats_powerlaw_fit(x, 3000, &f));
        CHECK(f.xmin > 1.9 && f.n_tail <= 2100, "draw %d: xmin %g inside the body (%zu in the tail)", r, f.xmin, f.n_tail);
        xm[r] = f.xmin;
        am[r] = f.alpha;
    }
    qsort(xm, 21, sizeof xm[0], cmp_dbl);
    qsort(am, 21, sizeof am[0], cmp_dbl);
    int at_knee = 0;
    for (int r = 0; r < 21; r++) at_knee += fabs(xm[r] / 2.0 - 1) < 0.05;
    CHECK(at_knee >= 7, "planted xmin 2: found within 5%% in %d of 21 draws (median %g)", at_knee, xm[10]);
    CHECK(fabs(am[10] - 2.5) < 0.05, "alpha 2.5 above a body: median fit %g", am[10]);
    /* the fit is scale-free: the ESD's 1/N changes xmin, not alpha */
    for (size_t i = 0; i < 3000; i++) x[i] *= 1e-3;
    SStatsFit g;
    CHECK_OK(sstats_powerlaw_fit(x, 3000, &g));
    CHECK_NEAR(g.alpha, f.alpha, 1e-9);
    CHECK_NEAR(g.xmin, f.xmin * 1e-3, 1e-15);
    SStatsFit h;
    CHECK_OK(sstats_powerlaw_fit(x, 1, &h));
    CHECK(isnan(h.alpha), "one value: no fit");
    /* a point mass (a planted rank's equal values, to rounding) is no power law: no fit, where the
     * MLE alone gives alpha ~ 1e8; below a spread body, the fit keeps off the mass */
    for (size_t i = 0; i < 40; i++) x[i] = 2.0 * (1 + 1e-9 * (double)i);
    CHECK_OK(sstats_powerlaw_fit(x, 40, &h));
    CHECK(isnan(h.alpha), "a point mass: alpha %g", h.alpha);
    pareto(x + 40, 2000, 3.0, 0.01);
    for (size_t i = 40; i < 2040; i++) if (x[i] > 1.0) x[i] = 1.0;   /* the tail clipped below the mass */
    CHECK_OK(sstats_powerlaw_fit(x, 2040, &h));
    CHECK(h.xmin < 1.0 && h.alpha < 10, "mass over a body: xmin %g, alpha %g", h.xmin, h.alpha);
}

/* ---------------------------------------------------------------- Marchenko-Pastur */

/* A Gaussian N x M matrix of entry variance s2 (plus `spike` along one direction); its stats. */
static void gaussian_stats(size_t N, size_t M, double s2, double spike, SStats *st) {
    double *W = malloc(N * M * sizeof *W);
    for (size_t i = 0; i < N * M; i++) W[i] = sqrt(s2) * nrand();
    for (size_t i = 0; i < N; i++) W[i * M] += spike;    /* a rank-one column: sigma ~ spike sqrt(N) */
    Spectrum *sp = NULL;
    CHECK_OK(spectra_svd_d(W, N, M, 0, &sp));
    CHECK_OK(sstats_compute(sp->sigma, sp->p, N, M, st));
    spectrum_free(sp);
    free(W);
}

static void test_mp(void) {
    const size_t shapes[][2] = {{400, 100}, {300, 300}, {1000, 50}};
    for (int t = 0; t < 3; t++) {
        SStats st;
        size_t N = shapes[t][0], M = shapes[t][1];
        gaussian_stats(N, M, 0.25, 0, &st);
        double edge = 0.25 * pow(1 + sqrt((double)M / (double)N), 2);
        CHECK_NEAR(st.mp_q, (double)N / (double)M, 1e-12);
        CHECK(fabs(st.mp_edge / edge - 1) < 0.05, "%zux%zu: edge %g, MP's %g", N, M, st.mp_edge, edge);
        CHECK(fabs(st.mp_sigma2 / 0.25 - 1) < 0.05, "sigma^2 %g of 0.25", st.mp_sigma2);
        CHECK(st.mp_spikes == 0, "%zux%zu: %zu eigenvalues above the edge of a Gaussian matrix", N, M, st.mp_spikes);
        CHECK(st.p == M && st.fit.n == M, "p %zu, fitted %zu", st.p, st.fit.n);
    }
    SStats sp;
    gaussian_stats(400, 100, 0.25, 3.0, &sp);
    CHECK(sp.mp_spikes == 1, "a planted spike: %zu above the edge", sp.mp_spikes);
    /* the spike leaves the bulk: the edge is the noise's (with it, the mean would lift it by a third) */
    CHECK(fabs(sp.mp_edge / (0.25 * 2.25) - 1) < 0.05, "a planted spike: edge %g, the noise's %g", sp.mp_edge, 0.25 * 2.25);
    CHECK(fabs(sp.mp_q - 400.0 / 99) < 1e-12, "Q of the bulk without the spike: %g", sp.mp_q);
    CHECK(sp.stable_rank < 5, "a spike dominates: stable rank %g", sp.stable_rank);
}

/* ---------------------------------------------------------------- ESD and histogram */

static void test_esd(void) {
    double sigma[6] = {4, 2, 1, 1e-9, 0, 0};
    double *ev;
    size_t ne;
    CHECK_OK(sstats_esd(sigma, 6, 8, 4, &ev, &ne));
    CHECK(ne == 3, "three nonzero eigenvalues, got %zu", ne);
    CHECK(ne == 3 && ev[0] == 1.0 / 8 && ev[2] == 16.0 / 8, "ascending sigma^2 / N: %g .. %g", ev[0], ev[ne - 1]);
    SStats st;
    CHECK_OK(sstats_compute(sigma, 6, 8, 4, &st));
    CHECK(isnan(st.fit.alpha) && st.fit.n == 3, "under 10 eigenvalues: no fit");
    CHECK_NEAR(st.norm, 4, 0);
    free(ev);
    double x[5] = {1, 3, 30, 40, 1000}, edges[4], dens[3];
    sstats_log_hist(x, 5, 3, edges, dens);
    CHECK_NEAR(edges[0], 1, 1e-12);
    CHECK_NEAR(edges[3], 1000, 1e-9);
    CHECK_NEAR(dens[0] * 5 * 9, 2, 1e-9);        /* 1, 3 in [1, 10) */
    CHECK_NEAR(dens[1] * 5 * 90, 2, 1e-9);       /* 30, 40 */
    CHECK_NEAR(dens[2] * 5 * 900, 1, 1e-9);      /* the largest value in the last bin */
}

/* ---------------------------------------------------------------- a model's cached spectra */

/* The stats of the cached spectrum c against those of the dense SVD of the map A @ op(B) (B NULL:
 * A alone), formed explicitly. */
static int n_alpha;     /* maps with a power-law fit among those compared */

static void against_dense(const Spectrum *c, const Mat *A, const Mat *B, spectra_op op, const char *what, int L, int h) {
    Spectrum *ref = NULL;
    if (B) CHECK_OK(spectra_dense_product_svd(A, B, op, 0, &ref));
    else CHECK_OK(spectra_svd(A, 0, &ref));
    if (!ref) return;
    SStats got, want;
    CHECK_OK(sstats_compute(c->sigma, c->p, c->m, c->n, &got));
    CHECK_OK(sstats_compute(ref->sigma, ref->p, ref->m, ref->n, &want));
    double tol = 1e-5;
    CHECK(got.m * got.n == want.m * want.n && (got.m == want.m || got.m == want.n), "%s L%d H%d: shape %zux%zu, dense %zux%zu",
          what, L, h, got.m, got.n, want.m, want.n);   /* the cache holds O as (rows x k): its transpose */
    CHECK(fabs(got.stable_rank - want.stable_rank) <= tol * want.stable_rank, "%s L%d H%d: stable rank %.9g, dense %.9g",
          what, L, h, got.stable_rank, want.stable_rank);
    CHECK(fabs(got.entropy_rank - want.entropy_rank) <= tol * want.entropy_rank, "%s L%d H%d: entropy rank %.9g, dense %.9g",
          what, L, h, got.entropy_rank, want.entropy_rank);
    CHECK(fabs(got.participation - want.participation) <= tol * want.participation, "%s L%d H%d: PR %.9g, dense %.9g",
          what, L, h, got.participation, want.participation);
    CHECK(fabs(got.norm - want.norm) <= tol * want.norm, "%s L%d H%d: norm %.9g, dense %.9g", what, L, h, got.norm, want.norm);
    CHECK(fabs(got.mp_edge - want.mp_edge) <= tol * want.mp_edge, "%s L%d H%d: MP edge %.9g, dense %.9g", what, L, h,
          got.mp_edge, want.mp_edge);
    CHECK(got.fit.n == want.fit.n, "%s L%d H%d: %zu eigenvalues, dense %zu", what, L, h, got.fit.n, want.fit.n);
    CHECK(isnan(got.fit.alpha) == isnan(want.fit.alpha) &&
              (isnan(want.fit.alpha) || fabs(got.fit.alpha - want.fit.alpha) <= 1e-4 * want.fit.alpha),
          "%s L%d H%d: alpha %.9g, dense %.9g", what, L, h, got.fit.alpha, want.fit.alpha);
    CHECK(got.mp_spikes == want.mp_spikes, "%s L%d H%d: %zu spikes, dense %zu", what, L, h, got.mp_spikes, want.mp_spikes);
    n_alpha += isfinite(want.fit.alpha);
    spectrum_free(ref);
}

/* demo-gpt2 (F32, no RoPE: both pairs fuse): every head of every layer, A, B and the fused map. */
static void test_model(void) {
    Model *m = tu_open_synth(test_tmpdir(), "demo-gpt2", SYNTH_DEFAULT_SEED);
    if (!m) return;
    FarrState *st = farr_state_new();
    for (int kind = FARR_VO; kind <= FARR_QK; kind++) {
        FarrQuery q = { .m = m, .kind = (farr_kind)kind, .lo = 0, .hi = m->cfg.n_layers - 1, .offset = FARR_NO_OFFSET };
        CHECK_OK(farr_state_sweep(st, &q));
        for (int L = 0; L <= q.hi; L++) {
            const FarrLayer *fl = farr_state_get_layer(st, m, q.kind, L, FARR_NO_OFFSET);
            CHECK(fl != NULL, "layer %d cached", L);
            for (int h = 0; fl && h < fl->n_heads; h++) {
                Mat *A = NULL, *B = NULL;
                spectra_op op;
                CHECK_OK(farr_head_factors(m, q.kind, L, h, FARR_NO_OFFSET, &A, &B, &op));
                if (!A || !B) { mat_free(A); mat_free(B); continue; }
                against_dense(fl->a[h], A, NULL, op, farr_side_name(q.kind, 0), L, h);
                against_dense(fl->b[h], B, NULL, op, farr_side_name(q.kind, 1), L, h);
                against_dense(fl->fused[h], A, B, op, farr_fused_name(q.kind), L, h);
                mat_free(A);
                mat_free(B);
            }
        }
    }
    /* the planted fused-low layer 2 (VO rank 4 over a floor at 0.3% of sigma_1): stable rank and
     * participation ratio 4 (the floor's squares are 1e-5 of the energy); the entropy rank, of
     * sigma unsquared, counts the floor */
    const FarrLayer *l2 = farr_state_get_layer(st, m, FARR_VO, 2, FARR_NO_OFFSET);
    if (l2) {
        SStats s2;
        CHECK_OK(sstats_compute(l2->fused[0]->sigma, l2->fused[0]->p, l2->fused[0]->m, l2->fused[0]->n, &s2));
        CHECK(fabs(s2.stable_rank - 4) < 1e-3 && fabs(s2.participation - 4) < 1e-3 && s2.entropy_rank > 4.1,
              "planted VO rank 4: stable %g, PR %g, entropy %g", s2.stable_rank, s2.participation, s2.entropy_rank);
        CHECK(s2.mp_spikes == 4, "planted VO rank 4: %zu above the MP edge", s2.mp_spikes);
    }
    CHECK(n_alpha > 100, "only %d of the compared maps had a power-law fit", n_alpha);
    farr_state_free(st);
    model_free(m);
}

int main(void) {
    test_closed_forms();
    test_powerlaw();
    test_mp();
    test_esd();
    test_model();
    return check_done();
}
