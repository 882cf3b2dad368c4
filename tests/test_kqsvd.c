/* test_kqsvd.c -- KQ-SVD math on synthetic activations (seed 001): the Gram-based error formulas
 * against formed matrices, Theorem 2 (KQ-SVD's error is the SVD tail of K Qᵀ), Theorem 3's
 * identity, KQ-SVD never above K-SVD / Eigen on the calibration set, Theorem 4 (keys x beta,
 * queries / beta: K-SVD and KQ-SVD flat, Eigen drifting to K-SVD), GQA stacking (Theorem 5), the
 * value-output variant (Appendix B), rank from eps, the evaluator against a naive attention, the
 * statistics file (bit-exact round trip of Grams and attention-input sums; version-1 files load
 * without a mean) and the export's tensors. No model needed. */
#include <cblas.h>
#include <lapacke.h>

#include "check.h"
#include "kqsvd.h"
#include "safetensors.h"

/* ---------------------------------------------------------------- synthetic data */

static uint64_t rng = 0x243F6A8885A308D3ull;
static double urand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand())) * cos(2 * M_PI * urand()); }

/* X (T x n) = Z (T x n) diag(decay^j) M, M a random mixing: a spread spectrum. */
static void spread(double *X, size_t T, size_t n, double decay, double offset) {
    double *M = malloc(n * n * sizeof *M);
    for (size_t i = 0; i < n * n; i++) M[i] = nrand();
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t k = 0; k < n; k++) s += nrand() * pow(decay, (double)k) * M[k * n + j];
            X[t * n + j] = s + offset;
        }
    free(M);
}

/* Gram of X (T x n) in double: G = Xᵀ X. */
static void gram(const double *X, size_t T, size_t n, double *G) {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)T, 1.0, X, (int)n, X, (int)n, 0.0, G, (int)n);
}

/* ||X||² */
static double fro2(const double *X, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += X[i] * X[i];
    return s;
}

/* Singular values of an m x n matrix (dense gesdd), descending. */
static void svals(const double *M, size_t m, size_t n, double *s) {
    double *c = malloc(m * n * sizeof *c);
    memcpy(c, M, m * n * sizeof *c);
    double u[1], vt[1];
    LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', (int)m, (int)n, c, (int)n, s, u, (int)m, vt, (int)n);
    free(c);
}

/* S = A Bᵀ (n x n) */
static void smat(const double *A, const double *B, size_t n, size_t R, double *S) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)R, 1.0, A, (int)R, B, (int)R, 0.0, S, (int)n);
}

/* C (m x n) = X (m x k) op(Y) */
static void mm(const double *X, const double *Y, size_t m, size_t k, size_t n, bool yt, double *C) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, yt ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0, X, (int)k, Y,
                yt ? (int)k : (int)n, 0.0, C, (int)n);
}

/* ---------------------------------------------------------------- the tests */

#define T 60
#define D 8

/* Gram formulas against the formed K S, Q Sᵀ, K S Qᵀ for every method and rank. */
static void test_formulas(void) {
    double K[T * D], Q[T * D], GK[D * D], GQ[D * D];
    spread(K, T, D, 0.6, 0.3);
    spread(Q, T, D, 0.8, -0.2);
    gram(K, T, D, GK);
    gram(Q, T, D, GQ);
    double KQ[T * T], KS[T * D], QS[T * D], KSQ[T * T], S[D * D], St[D * D], A[D * D], B[D * D];
    mm(K, Q, T, D, T, true, KQ);
    for (int m = 0; m < KQ_NMETHODS; m++)
        for (size_t R = 1; R <= D; R++) {
            CHECK_OK(kq_proj((kq_method)m, GK, GQ, D, R, A, B, NULL));
            smat(A, B, D, R, S);
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < D; j++) St[i * D + j] = S[j * D + i];
            mm(K, S, T, D, D, false, KS);
            mm(Q, St, T, D, D, false, QS);
            mm(KS, Q, T, D, T, true, KSQ);
            double ek = 0, eq = 0, ekq = 0;
            for (size_t i = 0; i < T * D; i++) { ek += (K[i] - KS[i]) * (K[i] - KS[i]); eq += (Q[i] - QS[i]) * (Q[i] - QS[i]); }
            for (size_t i = 0; i < T * T; i++) ekq += (KQ[i] - KSQ[i]) * (KQ[i] - KSQ[i]);
            KqGramErr e;
            CHECK_OK(kq_gram_err(GK, GQ, D, A, B, R, &e));
            double tol = 1e-9;
            CHECK(fabs(e.k - ek) <= tol * fro2(K, T * D), "%s R %zu: err_k %.12g formed %.12g", kq_method_name(m), R, e.k, ek);
            CHECK(fabs(e.q - eq) <= tol * fro2(Q, T * D), "%s R %zu: err_q %.12g formed %.12g", kq_method_name(m), R, e.q, eq);
            CHECK(fabs(e.kq - ekq) <= tol * fro2(KQ, T * T), "%s R %zu: err_kq %.12g formed %.12g", kq_method_name(m), R, e.kq, ekq);
            CHECK_NEAR(e.nk, fro2(K, T * D), 1e-9 * e.nk);
            CHECK_NEAR(e.nkq, fro2(KQ, T * T), 1e-9 * e.nkq);
            if (R == D) CHECK(e.k <= 1e-12 * e.nk && e.kq <= 1e-12 * e.nkq, "%s full rank: %g %g", kq_method_name(m), e.k, e.kq);
        }
}

/* Theorem 2 (KQ-SVD's error is the tail of the spectrum of K Qᵀ, and its sigma are those
 * singular values) and Theorem 3's identity; KQ-SVD never above K-SVD or Eigen. */
static void test_theorems_2_3(void) {
    double K[T * D], Q[T * D], GK[D * D], GQ[D * D], KQ[T * T], sig[T], sk[D];
    spread(K, T, D, 0.7, 0.1);
    spread(Q, T, D, 0.5, 0.4);
    gram(K, T, D, GK);
    gram(Q, T, D, GQ);
    mm(K, Q, T, D, T, true, KQ);
    svals(KQ, T, T, sig);
    double A[D * D], B[D * D], S[D * D], KS[T * D], KSQ[T * T];
    for (size_t R = 1; R <= D; R++) {
        KqGramErr opt, ks, eg;
        CHECK_OK(kq_proj(KQ_KQSVD, GK, GQ, D, R, A, B, sk));
        CHECK_OK(kq_gram_err(GK, GQ, D, A, B, R, &opt));
        double tail = 0, head = 0;
        for (size_t i = 0; i < T; i++) *(i < R ? &head : &tail) += sig[i] * sig[i];
        CHECK(fabs(opt.kq - tail) <= 1e-9 * opt.nkq, "Theorem 2, R %zu: opt %.12g, SVD tail %.12g", R, opt.kq, tail);
        for (size_t i = 0; i < D; i++) CHECK(fabs(sk[i] - sig[i]) <= 1e-9 * sig[0], "sigma_%zu %.12g vs %.12g", i, sk[i], sig[i]);
        /* Theorem 3: err_KSVD - opt = sum_{i<=R} sigma_i(KQᵀ)² - ||K V_K V_Kᵀ Qᵀ||². */
        CHECK_OK(kq_proj(KQ_KSVD, GK, GQ, D, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GK, GQ, D, A, B, R, &ks));
        smat(A, B, D, R, S);
        mm(K, S, T, D, D, false, KS);
        mm(KS, Q, T, D, T, true, KSQ);
        double rhs = head - fro2(KSQ, T * T);
        CHECK(fabs((ks.kq - opt.kq) - rhs) <= 1e-9 * opt.nkq, "Theorem 3, R %zu: lhs %.12g rhs %.12g", R, ks.kq - opt.kq, rhs);
        CHECK(ks.kq - opt.kq >= -1e-9 * opt.nkq, "Theorem 3 gap negative at R %zu", R);
        CHECK_OK(kq_proj(KQ_EIGEN, GK, GQ, D, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GK, GQ, D, A, B, R, &eg));
        /* optimal up to rounding: at R = D every error is round-off (~1e-26 of nkq ~ 1) */
        double slack = 1e-12 * opt.nkq;
        CHECK(opt.kq <= ks.kq * (1 + 1e-12) + slack && opt.kq <= eg.kq * (1 + 1e-12) + slack,
              "R %zu: KQ-SVD %g, K-SVD %g, Eigen %g", R, opt.kq, ks.kq, eg.kq);
        if (R < D) CHECK(opt.kq < 0.999 * ks.kq, "R %zu: KQ-SVD should beat K-SVD strictly here: %g vs %g", R, opt.kq, ks.kq);
    }
}

/* Rank-deficient keys: the pseudo-inverse route stays exact. */
static void test_rank_deficient(void) {
    double K[T * D], Q[T * D], GK[D * D], GQ[D * D], A[D * D], B[D * D], KQ[T * T], sig[T];
    spread(K, T, D, 0.7, 0.0);
    for (size_t t = 0; t < T; t++) { K[t * D + 6] = 0; K[t * D + 7] = K[t * D + 1] * 2 - K[t * D + 3]; }   /* rank 6 */
    spread(Q, T, D, 0.9, 0.0);
    gram(K, T, D, GK);
    gram(Q, T, D, GQ);
    mm(K, Q, T, D, T, true, KQ);
    svals(KQ, T, T, sig);
    for (size_t R = 1; R <= D; R++) {
        KqGramErr e;
        CHECK_OK(kq_proj(KQ_KQSVD, GK, GQ, D, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GK, GQ, D, A, B, R, &e));
        double tail = 0;
        for (size_t i = R; i < T; i++) tail += sig[i] * sig[i];
        CHECK(fabs(e.kq - tail) <= 1e-8 * e.nkq, "rank-deficient K, R %zu: %.12g vs tail %.12g", R, e.kq, tail);
        if (R >= 6) CHECK(e.k <= 1e-10 * e.nk, "R %zu >= rank(K): keys exact, err %g", R, e.k / e.nk);
    }
}

/* Theorem 5: KQ-SVD of the shared K with the group's stacked queries is the optimum of the
 * summed per-head objective: it equals the SVD tail of K [Q1; Q2]ᵀ and beats projections learned
 * on one head's queries. Also: calib_add stacks a group's queries into one Gram. */
static void test_gqa(void) {
    double K[T * D], Q1[T * D], Q2[T * D], Qs[2 * T * D], GK[D * D], G1[D * D], G2[D * D], Gs[D * D];
    spread(K, T, D, 0.7, 0.2);
    spread(Q1, T, D, 0.4, 0.0);
    spread(Q2, T, D, 0.9, 0.5);
    memcpy(Qs, Q1, sizeof Q1);
    memcpy(Qs + T * D, Q2, sizeof Q2);
    gram(K, T, D, GK);
    gram(Q1, T, D, G1);
    gram(Q2, T, D, G2);
    gram(Qs, 2 * T, D, Gs);
    /* calib: 2 query heads, 1 KV head, rows fed as (T, 2 d) in two chunks. */
    CalibShape sh = {.n_layers = 1, .n_heads = 2, .n_kv_heads = 1, .d_qk = D, .d_v = D, .hidden = 4};
    CalibStats *st;
    CHECK_OK(calib_new(&sh, false, &st));
    float *qrows = malloc(T * 2 * D * sizeof *qrows), *krows = malloc(T * D * sizeof *krows);
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < D; j++) {
            qrows[t * 2 * D + j] = (float)Q1[t * D + j];
            qrows[t * 2 * D + D + j] = (float)Q2[t * D + j];
            krows[t * D + j] = (float)K[t * D + j];
        }
    CHECK_OK(calib_add(st, CALIB_Q, 0, qrows, 25, 2 * D));
    CHECK_OK(calib_add(st, CALIB_Q, 0, qrows + 25 * 2 * D, T - 25, 2 * D));
    CHECK_OK(calib_add(st, CALIB_K, 0, krows, T, D));
    double gq[D * D], gk[D * D];
    CHECK_OK(calib_gram(st, CALIB_Q, 0, 0, gq));
    CHECK_OK(calib_gram(st, CALIB_K, 0, 0, gk));
    double maxd = 0;
    for (size_t i = 0; i < D * D; i++) {
        /* the float rows are what was accumulated: compare against the double Gram of their values */
        maxd = fmax(maxd, fabs(gq[i] - Gs[i]) / Gs[0]);
    }
    CHECK(maxd < 1e-6, "stacked query Gram differs from [Q1;Q2]ᵀ[Q1;Q2] by %g", maxd);
    CHECK(st->tokens[0] == T, "tokens counted from keys: %zu", st->tokens[0]);
    calib_free(st);
    free(qrows);
    free(krows);

    double KQs[T * 2 * T], sig[T], A[D * D], B[D * D];
    mm(K, Qs, T, D, 2 * T, true, KQs);
    svals(KQs, T, 2 * T, sig);
    for (size_t R = 1; R < D; R++) {
        KqGramErr st_e, e1, e2, h1, h2;
        CHECK_OK(kq_proj(KQ_KQSVD, GK, Gs, D, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GK, Gs, D, A, B, R, &st_e));
        /* the summed per-head objective with the shared A, B */
        CHECK_OK(kq_gram_err(GK, G1, D, A, B, R, &h1));
        CHECK_OK(kq_gram_err(GK, G2, D, A, B, R, &h2));
        CHECK(fabs(st_e.kq - (h1.kq + h2.kq)) <= 1e-9 * st_e.nkq, "stacked error = sum of heads' (R %zu)", R);
        double tail = 0;
        for (size_t i = R; i < D; i++) tail += sig[i] * sig[i];
        CHECK(fabs(st_e.kq - tail) <= 1e-9 * st_e.nkq, "Theorem 5, R %zu: %.12g vs tail %.12g", R, st_e.kq, tail);
        /* projections learned on one head only do worse on the group */
        CHECK_OK(kq_proj(KQ_KQSVD, GK, G1, D, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GK, Gs, D, A, B, R, &e1));
        CHECK_OK(kq_proj(KQ_KQSVD, GK, G2, D, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GK, Gs, D, A, B, R, &e2));
        CHECK(st_e.kq <= e1.kq * (1 + 1e-12) && st_e.kq <= e2.kq * (1 + 1e-12), "R %zu: stacked %g, head1-only %g, head2-only %g",
              R, st_e.kq, e1.kq, e2.kq);
    }
}

/* Appendix B: KQ-SVD on (G_V, W_O W_Oᵀ) minimizes ||V S W_O - V W_O||: the SVD tail of V W_O. */
static void test_value_output(void) {
    enum { DV = 6, DM = 10 };
    double V[T * DV], W[DV * DM], GV[DV * DV], GW[DV * DV], VW[T * DM], sig[DM], A[DV * DV], B[DV * DV];
    spread(V, T, DV, 0.8, 0.1);
    for (size_t i = 0; i < DV * DM; i++) W[i] = nrand() * (i % DM < 3 ? 3.0 : 0.3);
    gram(V, T, DV, GV);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, DV, DV, DM, 1.0, W, DM, W, DM, 0.0, GW, DV);
    mm(V, W, T, DV, DM, false, VW);
    svals(VW, T, DM, sig);
    for (size_t R = 1; R <= DV; R++) {
        KqGramErr e, ks;
        CHECK_OK(kq_proj(KQ_KQSVD, GV, GW, DV, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GV, GW, DV, A, B, R, &e));
        double tail = 0;
        for (size_t i = R; i < DV; i++) tail += sig[i] * sig[i];
        CHECK(fabs(e.kq - tail) <= 1e-9 * e.nkq, "App. B, R %zu: ||V S W - V W||² %.12g vs tail %.12g", R, e.kq, tail);
        CHECK_OK(kq_proj(KQ_KSVD, GV, GW, DV, R, A, B, NULL));
        CHECK_OK(kq_gram_err(GV, GW, DV, A, B, R, &ks));
        CHECK(e.kq <= ks.kq * (1 + 1e-12) + 1e-12 * e.nkq, "App. B, R %zu: %g above V-SVD's %g", R, e.kq, ks.kq);
    }
}

/* Builds statistics of 2 layers, 4 query heads in 2 KV groups, from synthetic blocks. */
static CalibStats *synth_stats(size_t nseq, size_t seqlen, double kscale) {
    CalibShape sh = {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .d_qk = D, .d_v = 6, .hidden = 16};
    CalibStats *st;
    if (calib_new(&sh, true, &st)) return NULL;
    double *K = malloc(seqlen * D * sizeof *K), *Qh = malloc(seqlen * D * sizeof *Qh), *V = malloc(seqlen * 6 * sizeof *V);
    double *X = malloc(seqlen * 16 * sizeof *X);
    float *kr = malloc(seqlen * 2 * D * sizeof *kr), *qr = malloc(seqlen * 4 * D * sizeof *qr);
    float *vr = malloc(seqlen * 12 * sizeof *vr), *xr = malloc(seqlen * 16 * sizeof *xr);
    for (size_t s = 0; s < nseq; s++)
        for (int l = 0; l < 2; l++) {
            for (size_t g = 0; g < 2; g++) {
                spread(K, seqlen, D, 0.6 + 0.1 * (double)g, 0.3);
                spread(V, seqlen, 6, 0.7, 0.0);
                for (size_t t = 0; t < seqlen; t++) {
                    for (size_t j = 0; j < D; j++) kr[t * 2 * D + g * D + j] = (float)(kscale * K[t * D + j]);
                    for (size_t j = 0; j < 6; j++) vr[t * 12 + g * 6 + j] = (float)V[t * 6 + j];
                }
            }
            for (size_t h = 0; h < 4; h++) {
                spread(Qh, seqlen, D, 0.85 - 0.1 * (double)h, -0.1);
                for (size_t t = 0; t < seqlen; t++)
                    for (size_t j = 0; j < D; j++) qr[t * 4 * D + h * D + j] = (float)(Qh[t * D + j] / kscale);
            }
            spread(X, seqlen, 16, 0.9, 0.0);
            for (size_t i = 0; i < seqlen * 16; i++) xr[i] = (float)X[i];
            calib_add(st, CALIB_K, l, kr, seqlen, 2 * D);
            calib_add(st, CALIB_Q, l, qr, seqlen, 4 * D);
            calib_add(st, CALIB_V, l, vr, seqlen, 12);
            calib_add(st, CALIB_X, l, xr, seqlen, 16);
            calib_seq_done(st, l);
        }
    free(K); free(Qh); free(V); free(X); free(kr); free(qr); free(vr); free(xr);
    return st;
}

/* A positive-definite G_W (L, G, dv, dv) for KQ-SVD's values. */
static double *synth_gw(void) {
    double *gw = calloc(2 * 2 * 36, sizeof *gw), W[6 * 20];
    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < 120; i++) W[i] = nrand();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 6, 6, 20, 1.0, W, 20, W, 20, 0.0, gw + k * 36, 6);
    }
    return gw;
}

/* kq_learn on statistics: KQ-SVD's calibration error on KQᵀ never above the others' (every layer,
 * several ranks); Theorem 4 with beta. */
static void test_learn_and_beta(void) {
    CalibStats *st = synth_stats(3, 40, 1.0);
    double *gw = synth_gw();
    CHECK(st != NULL, "synthetic statistics");
    if (!st) return;
    for (int R = 1; R <= D; R++) {
        KqSpec spec = {.by_eps = false, .rank = R, .beta = 1};
        KqProj *p[KQ_NMETHODS];
        for (int m = 0; m < KQ_NMETHODS; m++) CHECK_OK(kq_learn(st, gw, (kq_method)m, &spec, &p[m]));
        for (int l = 0; l < 2; l++) {
            double k = p[KQ_KQSVD]->cal_k[l].kq, a = p[KQ_KSVD]->cal_k[l].kq, b = p[KQ_EIGEN]->cal_k[l].kq;
            double slack = 1e-12 * p[KQ_KQSVD]->cal_k[l].nkq;      /* rounding at full rank */
            CHECK(k <= a + slack && k <= b + slack, "R %d layer %d: KQ-SVD %g > K-SVD %g or Eigen %g", R, l, k, a, b);
            CHECK(p[KQ_KSVD]->cal_k[l].k <= p[KQ_KQSVD]->cal_k[l].k + 1e-12 * p[KQ_KSVD]->cal_k[l].nk, "K-SVD best on keys (R %d)", R);
            double vo = p[KQ_KQSVD]->cal_v[l].kq, vo_ks = p[KQ_KSVD]->cal_v[l].kq;
            CHECK(vo <= vo_ks + 1e-12 * p[KQ_KSVD]->cal_v[l].nkq, "R %d layer %d: V W_O error of KQ-SVD %g above K-SVD's %g", R, l,
                  vo, vo_ks);
            CHECK(p[KQ_KQSVD]->rank_k[l] == R && p[KQ_KQSVD]->rank_v[l] == (R < 6 ? R : 6), "ranks clipped to the head dims");
        }
        for (int m = 0; m < KQ_NMETHODS; m++) kq_proj_free(p[m]);
    }
    CHECK_ERR(kq_learn(st, NULL, KQ_KQSVD, &(KqSpec){.rank = 2, .beta = 1}, &(KqProj *){NULL}), "W_O");

    /* Theorem 4: scaling K by beta and Q by 1/beta. */
    KqSpec spec = {.by_eps = false, .rank = 3, .beta = 1};
    double e_ks[6], e_kq[6], e_eg[6];
    const double betas[6] = {1, 2, 5, 10, 100, 1000};
    for (int i = 0; i < 6; i++) {
        spec.beta = betas[i];
        KqProj *a, *b, *c;
        CHECK_OK(kq_learn(st, gw, KQ_KSVD, &spec, &a));
        CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &spec, &b));
        CHECK_OK(kq_learn(st, gw, KQ_EIGEN, &spec, &c));
        e_ks[i] = kq_rel(a->cal_k[0].kq, a->cal_k[0].nkq);
        e_kq[i] = kq_rel(b->cal_k[0].kq, b->cal_k[0].nkq);
        e_eg[i] = kq_rel(c->cal_k[0].kq, c->cal_k[0].nkq);
        kq_proj_free(a); kq_proj_free(b); kq_proj_free(c);
    }
    for (int i = 1; i < 6; i++) {
        CHECK(fabs(e_ks[i] - e_ks[0]) <= 1e-9 * e_ks[0], "K-SVD flat in beta: %g vs %g", e_ks[i], e_ks[0]);
        CHECK(fabs(e_kq[i] - e_kq[0]) <= 1e-9 * e_kq[0], "KQ-SVD flat in beta: %g vs %g", e_kq[i], e_kq[0]);
        CHECK(fabs(e_eg[i] - e_ks[i]) <= fabs(e_eg[i - 1] - e_ks[i - 1]) * (1 + 1e-9) + 1e-15,
              "Eigen approaches K-SVD as beta grows: gap %g at beta %g, %g before", fabs(e_eg[i] - e_ks[i]), betas[i],
              fabs(e_eg[i - 1] - e_ks[i - 1]));
    }
    CHECK(fabs(e_eg[0] - e_ks[0]) > 1e-3 * e_ks[0], "Eigen differs from K-SVD when balanced (%g vs %g)", e_eg[0], e_ks[0]);
    CHECK(fabs(e_eg[5] - e_ks[5]) < 1e-4 * e_ks[5], "Eigen ~ K-SVD at beta 1000 (%g vs %g)", e_eg[5], e_ks[5]);
    CHECK(e_kq[0] < e_eg[0] && e_kq[0] < e_ks[0], "KQ-SVD below both at beta 1");

    /* Rank from eps: per layer, the smallest R keeping 1 - eps of the head-averaged energy. */
    KqSpec es = {.by_eps = true, .eps = 0.1, .beta = 1};
    KqProj *p;
    CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &es, &p));
    for (int l = 0; l < 2; l++) {
        double lam[2 * D], V[D * D], gk[D * D];
        for (int g = 0; g < 2; g++) { calib_gram(st, CALIB_K, l, g, gk); kq_eig(gk, D, lam + g * D, V); }
        int R = p->rank_k[l];
        double kept = 0, kept1 = 0;
        for (int g = 0; g < 2; g++) {
            double tot = 0, k = 0, k1 = 0;
            for (int j = 0; j < D; j++) { tot += lam[g * D + j]; if (j < R) k += lam[g * D + j]; if (j < R - 1) k1 += lam[g * D + j]; }
            kept += k / tot / 2;
            kept1 += k1 / tot / 2;
        }
        CHECK(kept >= 0.9 - 1e-12 && kept1 < 0.9, "layer %d: rank %d keeps %g, one less keeps %g", l, R, kept, kept1);
    }
    kq_proj_free(p);
    free(gw);
    calib_free(st);
}

static void test_rank_eps(void) {
    double lam[2 * 4] = {4, 3, 2, 1, 10, 0, 0, 0};
    CHECK(kq_rank_eps(lam, 1, 4, 0.5) == 2, "4+3 of 10 keeps 0.7 >= 0.5: %zu", kq_rank_eps(lam, 1, 4, 0.5));
    CHECK(kq_rank_eps(lam, 1, 4, 0.05) == 4, "0.9 < 0.95: %zu", kq_rank_eps(lam, 1, 4, 0.05));
    CHECK(kq_rank_eps(lam, 2, 4, 0.1) == 3, "head averages 0.7, 0.85, 0.95: %zu", kq_rank_eps(lam, 2, 4, 0.1));
    CHECK(kq_rank_eps(lam, 2, 4, 0.2) == 2, "0.85 >= 0.8: %zu", kq_rank_eps(lam, 2, 4, 0.2));
    CHECK(kq_rank_eps(lam, 2, 4, 0.35) == 1, "0.7 >= 0.65: %zu", kq_rank_eps(lam, 2, 4, 0.35));
}

/* ---------------------------------------------------------------- evaluator */

/* Naive double attention: out (T, H dv) = softmax(causal(Q_h K_gᵀ s)) V_g. */
static void naive_attn(const float *Q, const float *K, const float *V, size_t Tn, size_t H, size_t G, size_t d, size_t dv,
                       double s, double *out) {
    double *p = malloc(Tn * sizeof *p);
    for (size_t h = 0; h < H; h++) {
        size_t g = h / (H / G);
        for (size_t i = 0; i < Tn; i++) {
            double mx = -1e300, sum = 0;
            for (size_t j = 0; j <= i; j++) {
                double a = 0;
                for (size_t k = 0; k < d; k++) a += (double)Q[i * H * d + h * d + k] * K[j * G * d + g * d + k];
                p[j] = a * s;
                if (p[j] > mx) mx = p[j];
            }
            for (size_t j = 0; j <= i; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
            for (size_t c = 0; c < dv; c++) {
                double a = 0;
                for (size_t j = 0; j <= i; j++) a += p[j] / sum * V[j * G * dv + g * dv + c];
                out[i * H * dv + h * dv + c] = a;
            }
        }
    }
    free(p);
}

/* Projects rows of X (Tn, G n) through S_g = A_g B_gᵀ (double). */
static void naive_proj(const float *X, size_t Tn, size_t G, size_t n, size_t R, const double *A, const double *B, float *out) {
    for (size_t t = 0; t < Tn; t++)
        for (size_t g = 0; g < G; g++)
            for (size_t j = 0; j < n; j++) {
                double a = 0;
                for (size_t i = 0; i < n; i++) {
                    double s = 0;
                    for (size_t r = 0; r < R; r++) s += A[g * n * R + i * R + r] * B[g * n * R + j * R + r];
                    a += X[t * G * n + g * n + i] * s;
                }
                out[t * G * n + g * n + j] = (float)a;
            }
}

static void test_eval(void) {
    enum { TT = 70, H = 4, G = 2, DV = 6, HID = 16 };
    CalibStats *st = synth_stats(2, 50, 1.0);
    double *gw = synth_gw();
    KqSpec spec = {.rank = 3, .beta = 1};
    KqProj *p[3];
    for (int m = 0; m < 3; m++) CHECK_OK(kq_learn(st, gw, (kq_method)m, &spec, &p[m]));
    KqSpec full = {.rank = D, .beta = 1};
    KqProj *pf;
    CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &full, &pf));
    const KqProj *sets[4] = {p[0], p[1], p[2], pf};
    KqEval *ev;
    CHECK_OK(kq_eval_new(&st->sh, sets, 4, &ev));
    /* one "sequence": random Q, K, V and W_O */
    float *Q = malloc(TT * H * D * sizeof *Q), *K = malloc(TT * G * D * sizeof *K), *V = malloc(TT * G * DV * sizeof *V);
    float *W = malloc(H * DV * HID * sizeof *W), *ref = malloc(TT * H * DV * sizeof *ref);
    double *tmp = malloc(TT * D * sizeof *tmp);
    for (size_t g = 0; g < G; g++) {
        spread(tmp, TT, D, 0.6, 0.3);
        for (size_t t = 0; t < TT; t++) for (size_t j = 0; j < D; j++) K[t * G * D + g * D + j] = (float)tmp[t * D + j];
        spread(tmp, TT, DV, 0.7, 0.0);
        for (size_t t = 0; t < TT; t++) for (size_t j = 0; j < DV; j++) V[t * G * DV + g * DV + j] = (float)tmp[t * DV + j];
    }
    for (size_t h = 0; h < H; h++) {
        spread(tmp, TT, D, 0.8, -0.1);
        for (size_t t = 0; t < TT; t++) for (size_t j = 0; j < D; j++) Q[t * H * D + h * D + j] = (float)tmp[t * D + j];
    }
    for (size_t i = 0; i < H * DV * HID; i++) W[i] = (float)nrand();
    double s = 1 / sqrt((double)D);
    double *Hx = malloc(TT * H * DV * sizeof *Hx), *Ht = malloc(TT * H * DV * sizeof *Ht);
    naive_attn(Q, K, V, TT, H, G, D, DV, s, Hx);
    for (size_t i = 0; i < TT * H * DV; i++) ref[i] = (float)Hx[i];
    CHECK_OK(kq_eval_layer(ev, 1, &(KqLayerIn){.tokens = TT, .Q = Q, .ldq = H * D, .K = K, .ldk = G * D, .V = V, .ldv = G * DV,
                                               .W_O = W, .hidden = HID, .scale = s, .window = 0, .attn_ref = ref,
                                               .ld_ref = H * DV}));
    CHECK(kq_eval_ref_diff(ev) < 1e-5, "recomputed attention vs naive: %g", kq_eval_ref_diff(ev));
    /* Each set: the Gram-route errors against formed matrices, the output error against naive. */
    float *Kt = malloc(TT * G * D * sizeof *Kt), *Vt = malloc(TT * G * DV * sizeof *Vt);
    for (size_t k = 0; k < 4; k++) {
        KqErr e;
        kq_eval_result(ev, k, 1, &e);
        CHECK(e.n_seq == 1, "one sequence");
        const KqProj *P = sets[k];
        size_t Rk = (size_t)P->rank_k[1], Rv = (size_t)P->rank_v[1];
        naive_proj(K, TT, G, D, Rk, P->A_K[1], P->B_K[1], Kt);
        naive_proj(V, TT, G, DV, Rv, P->A_V[1], P->B_V[1], Vt);
        double nk = 0, dk = 0, nv = 0, dvv = 0, nkq = 0, dkq = 0;
        for (size_t i = 0; i < TT * G * D; i++) { nk += pow(K[i] - Kt[i], 2); dk += pow(K[i], 2); }
        for (size_t i = 0; i < TT * G * DV; i++) { nv += pow(V[i] - Vt[i], 2); dvv += pow(V[i], 2); }
        for (size_t h = 0; h < H; h++) {                       /* full T x T scores, no mask */
            size_t g = h / 2;
            for (size_t i = 0; i < TT; i++)
                for (size_t j = 0; j < TT; j++) {
                    double a = 0, b = 0;
                    for (size_t c = 0; c < D; c++) {
                        a += (double)K[i * G * D + g * D + c] * Q[j * H * D + h * D + c];
                        b += (double)Kt[i * G * D + g * D + c] * Q[j * H * D + h * D + c];
                    }
                    nkq += (a - b) * (a - b);
                    dkq += a * a;
                }
        }
        /* kq_eval reports relative Frobenius errors (unsquared): compare their squares with the formed ratios */
        CHECK(fabs(e.k * e.k - nk / dk) <= 1e-5 * fmax(e.k * e.k, 1e-7), "set %zu k_err^2 %.9g formed %.9g", k, e.k * e.k, nk / dk);
        CHECK(fabs(e.v * e.v - nv / dvv) <= 1e-5 * fmax(e.v * e.v, 1e-7), "set %zu v_err^2 %.9g formed %.9g", k, e.v * e.v, nv / dvv);
        CHECK(fabs(e.kq * e.kq - nkq / dkq) <= 1e-5 * fmax(e.kq * e.kq, 1e-7), "set %zu kq_err^2 %.9g formed %.9g", k,
              e.kq * e.kq, nkq / dkq);
        naive_attn(Q, Kt, Vt, TT, H, G, D, DV, s, Ht);
        double no = 0, dout = 0;
        for (size_t t = 0; t < TT; t++)
            for (size_t c = 0; c < HID; c++) {
                double a = 0, b = 0;
                for (size_t i = 0; i < H * DV; i++) { a += Hx[t * H * DV + i] * W[i * HID + c]; b += Ht[t * H * DV + i] * W[i * HID + c]; }
                no += (a - b) * (a - b);
                dout += a * a;
            }
        CHECK(fabs(e.out * e.out - no / dout) <= 1e-3 * fmax(no / dout, 1e-6), "set %zu out_err^2 %.9g naive %.9g", k,
              e.out * e.out, no / dout);
        if (k == 3) CHECK(e.out * e.out < 1e-9 && e.k * e.k < 1e-9 && e.kq * e.kq < 1e-9, "full rank: errors %g %g %g", e.out,
                          e.k, e.kq);
        else CHECK(e.out * e.out > 1e-6, "rank 3 of 8 loses something: %g", e.out);
    }
    /* Layer 0 never evaluated: zero count. */
    KqErr e0;
    kq_eval_result(ev, 0, 0, &e0);
    CHECK(e0.n_seq == 0, "layer 0 has no sequences");
    free(Kt); free(Vt); free(Hx); free(Ht); free(tmp);
    free(Q); free(K); free(V); free(W); free(ref);
    kq_eval_free(ev);
    for (int m = 0; m < 3; m++) kq_proj_free(p[m]);
    kq_proj_free(pf);
    free(gw);
    calib_free(st);
}

/* ---------------------------------------------------------------- files */

/* Rewrites the calibration file src as version 1 (what attnlab wrote before S_X): every tensor
 * but the layers.<l>.sum_x, metadata version 1. */
static int write_v1(const char *src, const char *dst) {
    st_file *f;
    if (st_open(src, &f)) return AL_ERR;
    st_writer *w = st_writer_new();
    const char *keys[] = {"format", "n_layers", "n_heads", "n_kv_heads", "d_qk", "d_v", "hidden", "has_x", "seqlen",
                          "keys", "model", "source", "split"};
    int rc = st_writer_meta(w, "version", "1");
    for (size_t i = 0; rc == AL_OK && i < sizeof keys / sizeof *keys; i++)
        if (st_meta(f, keys[i])) rc = st_writer_meta(w, keys[i], st_meta(f, keys[i]));
    for (size_t i = 0; rc == AL_OK && i < st_count(f); i++) {
        const st_entry *e = st_entry_at(f, i);
        if (strstr(e->name, "sum_x")) continue;
        rc = st_writer_add(w, e->name, e->dtype, e->ndim, e->shape, st_data(f, e), e->end - e->begin);
    }
    if (rc == AL_OK) rc = st_writer_write(w, dst);
    st_writer_free(w);
    st_close(f);
    return rc;
}

static void test_save_load_export(const char *dir) {
    CalibStats *st = synth_stats(2, 30, 1.0);
    CHECK_OK(calib_set_meta(st, "synthetic", "blocks", "train"));
    st->seqlen = 30;
    char path[4096];
    snprintf(path, sizeof path, "%s/stats.safetensors", dir);
    CHECK_OK(calib_save(st, path));
    CalibStats *b = NULL;
    CHECK_OK(calib_load(path, &b));
    if (b) {
        CHECK(!memcmp(&b->sh, &st->sh, sizeof b->sh) && b->has_x, "shape round trip");
        CHECK(b->seqlen == 30 && b->tokens[1] == 60 && b->seqs[1] == 2, "counts: %zu %zu %zu", b->seqlen, b->tokens[1], b->seqs[1]);
        CHECK(b->model && !strcmp(b->model, "synthetic") && !strcmp(b->split, "train"), "metadata");
        double g1[16 * 16], g2[16 * 16];
        bool same = true;
        for (int l = 0; l < 2; l++)
            for (int w = 0; w < 4; w++)
                for (int g = 0; g < (w == CALIB_X ? 1 : 2); g++) {
                    calib_gram(st, (calib_which)w, l, g, g1);
                    calib_gram(b, (calib_which)w, l, g, g2);
                    size_t n = w == CALIB_V ? 6 : w == CALIB_X ? 16 : D;
                    same &= !memcmp(g1, g2, n * n * sizeof(double));
                }
        CHECK(same, "Grams bit-exact after save/load");
        CHECK(b->sx && !memcmp(b->sx, st->sx, 2 * 16 * sizeof(double)), "attention-input sums bit-exact after save/load");
        double m2[16 * 16], mu[16];
        CHECK_OK(calib_second_moment(b, 0, m2));
        calib_gram(b, CALIB_X, 0, 0, g2);
        CHECK_NEAR(m2[5], g2[5] / 60.0, 1e-15);
        CHECK_OK(calib_mean(b, 1, mu));
        CHECK_NEAR(mu[3], st->sx[16 + 3] / 60.0, 1e-15);
        calib_free(b);
    }
    /* A version-1 file (no sum_x) loads, with the Grams but without a mean. */
    char v1[4096];
    snprintf(v1, sizeof v1, "%s/stats-v1.safetensors", dir);
    CHECK_OK(write_v1(path, v1));
    b = NULL;
    CHECK_OK(calib_load(v1, &b));
    if (b) {
        double m2[16 * 16], mu[16];
        CHECK(b->has_x && !b->sx && b->tokens[1] == 60, "version 1: G_X kept, no sums");
        CHECK_OK(calib_second_moment(b, 1, m2));
        CHECK_ERR(calib_mean(b, 1, mu), "version-1 file");
        double **S = NULL, **M = NULL;
        CHECK_OK(calib_input_arrays(b, 0, -1, &S, &M));
        CHECK(S && M && S[0] && S[1] && !M[0] && !M[1], "version 1: second moments without means");
        calib_free_arrays(2, S, M);
        calib_free(b);
    }
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/not-calib.safetensors", dir);
    st_writer *w = st_writer_new();
    float x = 1;
    size_t shp[1] = {1};
    st_writer_add(w, "x", DT_F32, 1, shp, &x, 4);
    st_writer_write(w, bad);
    st_writer_free(w);
    CHECK_ERR(calib_load(bad, &b), "not a calibration file");

    /* Windows of the text splits. */
    size_t first, count;
    CHECK_OK(calib_windows(1000, 100, CALIB_TRAIN, 0, &first, &count));
    CHECK(first == 0 && count == 9, "train: %zu %zu", first, count);
    CHECK_OK(calib_windows(1000, 100, CALIB_VALID, 0, &first, &count));
    CHECK(first == 9 && count == 1, "valid: %zu %zu", first, count);
    CHECK_OK(calib_windows(250, 100, CALIB_VALID, 5, &first, &count));
    CHECK(first == 1 && count == 1, "2 windows: the last is validation: %zu %zu", first, count);
    CHECK_ERR(calib_windows(150, 100, CALIB_VALID, 0, &first, &count), "too few");
    CHECK_ERR(calib_windows(50, 100, CALIB_TRAIN, 0, &first, &count), "fewer than one window");
    CHECK_OK(calib_windows(5000, 100, CALIB_TRAIN, 7, &first, &count));
    CHECK(count == 7, "nmax caps: %zu", count);

    /* Export: tensors (G, d, R) per layer, values equal to the learned projections (as float). */
    double *gw = synth_gw();
    KqProj *p;
    CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &(KqSpec){.by_eps = true, .eps = 0.2, .beta = 1}, &p));
    char out[4096];
    snprintf(out, sizeof out, "%s/export", dir);
    const KqProj *sets[1] = {p};
    KqExportInfo info = {.model_name = "synthetic", .st = st};
    size_t files = 0;
    CHECK_OK(kqsvd_export(out, sets, 1, &info, &files));
    CHECK(files == 2, "2 files: %zu", files);
    char f[4200];
    snprintf(f, sizeof f, "%s/kvsvd-kqsvd.safetensors", out);
    st_file *sf;
    CHECK_OK(st_open(f, &sf));
    if (sf) {
        for (int l = 0; l < 2; l++) {
            char name[64];
            snprintf(name, sizeof name, "layers.%d.proj_k", l);
            const st_entry *e = st_find(sf, name);
            CHECK(e && e->dtype == DT_F32 && e->ndim == 3 && e->shape[0] == 2 && e->shape[1] == D &&
                      e->shape[2] == (size_t)p->rank_k[l], "%s shape", name);
            if (e) {
                const float *v = st_data(sf, e);
                bool eq = true;
                for (size_t i = 0; i < st_numel(e); i++) eq &= v[i] == (float)p->A_K[l][i];
                CHECK(eq, "%s values", name);
            }
            snprintf(name, sizeof name, "layers.%d.proj_o", l);
            e = st_find(sf, name);
            CHECK(e && e->shape[1] == 6 && e->shape[2] == (size_t)p->rank_v[l], "%s shape", name);
        }
        CHECK(st_meta(sf, "method") && !strcmp(st_meta(sf, "method"), "kqsvd"), "method metadata");
        st_close(sf);
    }
    snprintf(f, sizeof f, "%s/" KQ_MANIFEST, out);
    FILE *fp = fopen(f, "r");
    CHECK(fp != NULL, "manifest written");
    if (fp) {
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf - 1, fp);
        buf[n] = 0;
        fclose(fp);
        CHECK(strstr(buf, "\"rank_k\"") && strstr(buf, "\"cal_kq_err\"") && strstr(buf, "\"eps\""), "manifest content");
    }
    CHECK_ERR(kqsvd_export(out, sets, 1, &info, &files), "not empty");
    info.force = true;
    CHECK_OK(kqsvd_export(out, sets, 1, &info, &files));
    info.model_path = out;
    CHECK_ERR(kqsvd_export(out, sets, 1, &info, &files), "model's own folder");
    kq_proj_free(p);
    free(gw);
    calib_free(st);
}

int main(void) {
    const char *dir = test_tmpdir();
    test_formulas();
    test_theorems_2_3();
    test_rank_deficient();
    test_gqa();
    test_value_output();
    test_learn_and_beta();
    test_rank_eps();
    test_eval();
    test_save_load_export(dir);
    return check_done();
}
