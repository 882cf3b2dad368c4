/* test_mla_strategy.c -- MHA2MLA's and CARE's strategies (core/methods/mla_strategy.h): the
 * partial-RoPE index sets S_high / S_low / S_uniform (hand-computed) and S_2norm on planted
 * high-contribution pairs; the joint and split SVD exact at full rank when no RoPE dims are removed,
 * and not exact when some are; CARE's basis at the closed-form optimum of a tiny case and better than
 * the plain SVD under anisotropic inputs at equal rank; CARE's allocation summing to its budget and
 * favouring the layer whose spectrum still has energy. */
#include "test_transmla_util.h"
#include "mla_strategy.h"
#include "tmla_qkn.h"

static MlastratOpts strat(mlastrat_kind k, mlastrat_rope r, mlastrat_svd s) {
    MlastratOpts o = mlastrat_default();
    o.kind = k; o.rope = r; o.svd = s;
    return o;
}

static bool same_set(const size_t *got, const size_t *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) return false;
    return true;
}

/* G = 2 KV heads of d = 16 (8 frequencies), r = 2 per head: the masks of patch_func.py. */
static void test_index_sets(void) {
    AttnLayer *L = tu_gqa(4, 2, 16, 32, ROPE_HALF, false, false);
    size_t p[4];
    static const size_t high[] = {0, 1, 8, 9}, low[] = {6, 7, 14, 15}, uni0[] = {0, 4, 8, 12}, uni1[] = {1, 5, 9, 13};
    MlastratOpts s = strat(MLASTRAT_MHA2MLA, MLASTRAT_ROPE_HIGH, MLASTRAT_SVD_JOINT);
    CHECK_OK(mlastrat_rope_pairs(L, &s, 2, NULL, NULL, p));
    CHECK(same_set(p, high, 4), "S_high: %zu %zu %zu %zu", p[0], p[1], p[2], p[3]);
    s.rope = MLASTRAT_ROPE_LOW;
    CHECK_OK(mlastrat_rope_pairs(L, &s, 2, NULL, NULL, p));
    CHECK(same_set(p, low, 4), "S_low: %zu %zu %zu %zu", p[0], p[1], p[2], p[3]);
    s.rope = MLASTRAT_ROPE_UNIFORM;
    CHECK_OK(mlastrat_rope_pairs(L, &s, 2, NULL, NULL, p));
    CHECK(same_set(p, uni0, 4), "S_uniform: %zu %zu %zu %zu", p[0], p[1], p[2], p[3]);
    s.uniform_start = 1;
    CHECK_OK(mlastrat_rope_pairs(L, &s, 2, NULL, NULL, p));
    CHECK(same_set(p, uni1, 4), "S_uniform start 1: %zu %zu %zu %zu", p[0], p[1], p[2], p[3]);
    s.uniform_start = 4;
    CHECK_ERR(mlastrat_rope_pairs(L, &s, 2, NULL, NULL, p), "leaves the 8 frequencies");
    CHECK_ERR(mlastrat_rope_pairs(L, &s, 9, NULL, NULL, p), "keep 1-8");
    attn_layer_free(L);
}

/* 2norm: head 0's frequency 5 and head 1's frequency 2 made loud in the keys and their queries. */
static void test_2norm_planted(void) {
    int H = 4, G = 2, d = 16, hid = 32, grp = H / G;
    AttnLayer *L = tu_gqa(H, G, d, hid, ROPE_HALF, false, false);
    int loud[2] = {5, 2};
    for (int g = 0; g < G; g++)
        for (int i = 0; i < hid; i++) {
            int l = loud[g];
            L->W_K->data[i * G * d + g * d + l] *= 6;
            L->W_K->data[i * G * d + g * d + l + d / 2] *= 6;
            for (int h = g * grp; h < (g + 1) * grp; h++) {
                L->W_Q->data[i * H * d + h * d + l] *= 6;
                L->W_Q->data[i * H * d + h * d + l + d / 2] *= 6;
            }
        }
    MlastratOpts s = strat(MLASTRAT_MHA2MLA, MLASTRAT_ROPE_2NORM, MLASTRAT_SVD_JOINT);
    size_t p[2];
    CHECK_OK(mlastrat_rope_pairs(L, &s, 1, NULL, NULL, p));
    CHECK(p[0] == 5 && p[1] == 8 + 2, "2norm picked %zu, %zu (want 5, 10)", p[0], p[1]);
    /* high would have kept frequency 0 of each head, which is not the loud one */
    s.rope = MLASTRAT_ROPE_HIGH;
    CHECK_OK(mlastrat_rope_pairs(L, &s, 1, NULL, NULL, p));
    CHECK(p[0] == 0 && p[1] == 8, "high picked %zu, %zu", p[0], p[1]);
    attn_layer_free(L);
}

/* Every frequency keeps RoPE: the joint / split SVD of the NoPE keys (none) and values is exact at
 * full rank; with r < d / 2 frequencies kept the partial RoPE is not. */
static void test_full_rank(void) {
    AttnLayer *L = tu_gqa(4, 2, 8, 32, ROPE_HALF, true, false), *mla = NULL;
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = 8; o.freqfold = 1; o.compare_balance = false;
    TmlaLayerReport rep;
    mlastrat_svd svds[] = {MLASTRAT_SVD_JOINT, MLASTRAT_SVD_SPLIT};
    for (int i = 0; i < 2; i++) {
        MlastratOpts s = strat(MLASTRAT_MHA2MLA, MLASTRAT_ROPE_HIGH, svds[i]);
        s.rope_pairs = 4;
        CHECK(mlastrat_exact_full(&s, 8), "r = d/2 is exact");
        CHECK_OK(mlastrat_convert_layer(L, &s, &o, TMLA_FULL, NULL, NULL, &mla, &rep));
        CHECK(mla && rep.score_err < 2e-6 && rep.out_err < 2e-6, "%s full: score %.3g out %.3g",
              mlastrat_svd_name(svds[i]), rep.score_err, rep.out_err);
        CHECK(mla && mla->rope_dim == 16 && mla->kv_rank == 16, "dims: rope %d rank %d", mla ? mla->rope_dim : -1,
              mla ? mla->kv_rank : -1);
        attn_layer_free(mla);
        mla = NULL;
    }
    MlastratOpts s = strat(MLASTRAT_MHA2MLA, MLASTRAT_ROPE_HIGH, MLASTRAT_SVD_JOINT);
    s.rope_pairs = 1;
    CHECK(!mlastrat_exact_full(&s, 8), "r = 1 of 4 is not exact");
    CHECK_OK(mlastrat_convert_layer(L, &s, &o, TMLA_FULL, NULL, NULL, &mla, &rep));
    CHECK(rep.score_err > 1e-3, "partial RoPE at full rank: score %.3g should not be ~0", rep.score_err);
    attn_layer_free(mla);
    attn_layer_free(L);
}

/* E ||x W (I - V Vᵀ)||² under C: tr((I - V Vᵀ) Wᵀ C W (I - V Vᵀ)) for V (n, R). */
static double care_err(const double *W, size_t m, size_t n, const double *C, const double *V, size_t R) {
    double *P = calloc(n * n, sizeof(double)), e = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double v = i == j;
            for (size_t k = 0; k < R; k++) v -= V[i * R + k] * V[j * R + k];
            P[i * n + j] = v;
        }
    for (size_t a = 0; a < m; a++)         /* Σ_ab C_ab (W P)_a · (W P)_b */
        for (size_t b = 0; b < m; b++) {
            double dot = 0;
            for (size_t j = 0; j < n; j++) {
                double wa = 0, wb = 0;
                for (size_t i = 0; i < n; i++) { wa += W[a * n + i] * P[i * n + j]; wb += W[b * n + i] * P[i * n + j]; }
                dot += wa * wb;
            }
            e += C[a * m + b] * dot;
        }
    free(P);
    return e;
}

/* W = diag(1, 2), C = diag(9, 1): Wᵀ C W = diag(9, 4). CARE keeps e1 (error 4, the closed-form
 * optimum: the discarded eigenvalue); the plain SVD keeps e2 (WᵀW = diag(1, 4)): error 9. */
static void test_care_closed_form(void) {
    double W[] = {1, 0, 0, 2}, C[] = {9, 0, 0, 1}, I[] = {1, 0, 0, 1}, V[2], Vs[2], sv[2];
    CHECK_OK(mlastrat_care_basis(W, 2, 2, C, 0, 1, V, sv));
    CHECK_OK(mlastrat_care_basis(W, 2, 2, I, 0, 1, Vs, NULL));
    CHECK(fabs(fabs(V[0]) - 1) < 1e-12 && fabs(V[1]) < 1e-12, "CARE basis (%g, %g) != e1", V[0], V[1]);
    CHECK(fabs(fabs(Vs[1]) - 1) < 1e-12, "plain SVD basis (%g, %g) != e2", Vs[0], Vs[1]);
    CHECK_NEAR(sv[0], 3, 1e-12);
    CHECK_NEAR(sv[1], 2, 1e-12);
    CHECK_NEAR(care_err(W, 2, 2, C, V, 1), 4, 1e-12);
    CHECK_NEAR(care_err(W, 2, 2, C, Vs, 1), 9, 1e-12);
    CHECK_OK(mlastrat_care_basis(W, 2, 2, C, MLASTRAT_CARE_DAMP, 1, V, NULL));   /* damped: diag(9.5, 6) */
    CHECK(fabs(fabs(V[0]) - 1) < 1e-12, "damped CARE basis (%g, %g) != e1", V[0], V[1]);
    /* a random 6 x 5 map under a random anisotropic C: CARE (undamped) at the optimum, below the SVD */
    size_t m = 6, n = 5, R = 2;
    Mat *Wm = tu_randm(m, n, 1), *A = tu_randm(m, m, 1);
    double Wd[30], Cd[36], Vc[10], Vp[10], Id[36], s[5];
    for (size_t i = 0; i < m * n; i++) Wd[i] = Wm->data[i];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < m; j++) {
            double v = 0;
            for (size_t k = 0; k < m; k++) v += A->data[i * m + k] * A->data[j * m + k] * pow(10.0, -(double)k);
            Cd[i * m + j] = v;
            Id[i * m + j] = i == j;
        }
    CHECK_OK(mlastrat_care_basis(Wd, m, n, Cd, 0, (int)R, Vc, s));
    CHECK_OK(mlastrat_care_basis(Wd, m, n, Id, 0, (int)R, Vp, NULL));
    double ec = care_err(Wd, m, n, Cd, Vc, R), ep = care_err(Wd, m, n, Cd, Vp, R), tail = 0;
    for (size_t i = R; i < n; i++) tail += s[i] * s[i];
    CHECK(fabs(ec - tail) <= 1e-9 * (1 + tail), "CARE error %.12g != discarded energy %.12g", ec, tail);
    CHECK(ec < ep, "CARE %.6g not below the plain SVD %.6g", ec, ep);
    mat_free(Wm);
    mat_free(A);
}

/* A layer with one KV head and every RoPE dim kept: only the value latent is cut, so the output
 * error is the latent's alone. Under anisotropic calibrated inputs CARE beats TransMLA's W-based
 * PCA (the plain SVD of the weights) at equal rank. */
static void test_care_layer(void) {
    int hid = 24, d = 8;
    AttnLayer *L = tu_gqa(2, 1, d, hid, ROPE_HALF, false, false), *care = NULL, *plain = NULL;
    double *S = calloc((size_t)hid * hid, sizeof(double));
    Mat *A = tu_randm((size_t)hid, (size_t)hid, 1);
    for (int i = 0; i < hid; i++)
        for (int j = 0; j < hid; j++) {
            double v = 0;
            for (int k = 0; k < hid; k++) v += A->data[i * hid + k] * A->data[j * hid + k] * pow(0.6, 2.0 * k);
            S[i * hid + j] = v;
        }
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = d; o.freqfold = 1; o.compare_balance = false; o.balance = false;
    TmlaLayerReport repc, rp;
    MlastratOpts sc = strat(MLASTRAT_CARE, MLASTRAT_ROPE_2NORM, MLASTRAT_SVD_JOINT), st = mlastrat_default();
    CHECK_OK(mlastrat_convert_layer(L, &sc, &o, 3, S, NULL, &care, &repc));
    CHECK_OK(mlastrat_convert_layer(L, &st, &o, 3, NULL, NULL, &plain, &rp));
    Mat *X = tmla_eval_inputs(64, hid, 7, S, NULL);
    double se_c = 1, oe_c = 1, se_p = 1, oe_p = 1;
    if (care && plain && X) {
        CHECK_OK(tmla_qkn_measure(L, care, X, &se_c, &oe_c));
        CHECK_OK(tmla_qkn_measure(L, plain, X, &se_p, &oe_p));
    }
    CHECK(se_c < 1e-5 && se_p < 1e-5, "scores exact (no key latent): %.3g %.3g", se_c, se_p);
    CHECK(oe_c < 0.8 * oe_p, "CARE out_err %.4g not below plain SVD's %.4g", oe_c, oe_p);
    mat_free(X); mat_free(A); free(S);
    attn_layer_free(care); attn_layer_free(plain); attn_layer_free(L);
}

/* Undamped, CARE's latent is the activation PCA of the unbalanced joint features: the same layer as
 * TransMLA's with activation statistics and balance off (two KV heads, partial RoPE kept, rank 10). */
static void test_care_undamped_is_pca(void) {
    int hid = 24;
    AttnLayer *L = tu_gqa(4, 2, 8, hid, ROPE_HALF, true, false), *care = NULL, *pca = NULL;
    double *S = calloc((size_t)hid * hid, sizeof(double)), mu[24];
    Mat *A = tu_randm((size_t)hid, (size_t)hid, 1);
    for (int i = 0; i < hid; i++) mu[i] = 0.1 * (i % 3);
    for (int i = 0; i < hid; i++) {
        for (int j = 0; j < hid; j++) {
            double v = mu[i] * mu[j];
            for (int k = 0; k < hid; k++) v += A->data[i * hid + k] * A->data[j * hid + k] * pow(0.7, 2.0 * k);
            S[i * hid + j] = v;
        }
    }
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = 8; o.freqfold = 1; o.compare_balance = false; o.balance = false;
    TmlaLayerReport r1, r2;
    MlastratOpts sc = strat(MLASTRAT_CARE, MLASTRAT_ROPE_2NORM, MLASTRAT_SVD_JOINT), st = mlastrat_default();
    sc.damp = 0;
    CHECK_OK(mlastrat_convert_layer(L, &sc, &o, 10, S, mu, &care, &r1));
    CHECK_OK(mlastrat_convert_layer(L, &st, &o, 10, S, mu, &pca, &r2));
    CHECK(care && pca && fabs(r1.out_err - r2.out_err) < 1e-6 * (1 + r2.out_err) && r1.out_err > 1e-3,
          "undamped CARE out_err %.9g vs TransMLA WX balance off %.9g", r1.out_err, r2.out_err);
    sc.damp = -1;                      /* CARE's damping moves it off the PCA (toward the weights' SVD) */
    attn_layer_free(care);
    CHECK_OK(mlastrat_convert_layer(L, &sc, &o, 10, S, mu, &care, &r1));
    CHECK(fabs(r1.out_err - r2.out_err) > 1e-6, "damped CARE equals the PCA: %.9g", r1.out_err);
    mat_free(A); free(S);
    attn_layer_free(care); attn_layer_free(pca); attn_layer_free(L);
}

/* Layer 0's spectrum has nothing past its second direction; layer 1's is flat (slow decay): all the
 * budget past the minimum goes to layer 1 (even though layer 0 is earlier: CARE's horizon favours it). */
static void test_alloc(void) {
    double s0[] = {1, 1e-3, 0, 0, 0, 0, 0, 0}, s1[] = {1, 1, 1, 1, 1, 1, 1, 1};
    const double *sv[] = {s0, s1};
    size_t n[] = {8, 8};
    int ranks[2];
    CHECK_OK(mlastrat_alloc_ranks(sv, n, 2, 4, 2, 8, ranks));
    CHECK(ranks[0] == 2 && ranks[1] == 6, "ranks %d %d (want 2 6)", ranks[0], ranks[1]);
    /* by hand: s0² = (4, 1, 1), s1² = (2, 2, 1), 2 per layer from min 1, max 3: step 1 scores layer 0
     * (1/6)/(2/6) x sqrt(2/1.5) = 0.577 against layer 1's (2/5)/(3/5) x sqrt(1/1.5) = 0.544; step 2
     * layer 0 at rank 2: (1/6)/(1/6) x 1.155 / sqrt 2 = 0.816, still above 0.544: ranks (3, 1). Without
     * the depth weight layer 1 would win both steps: (1, 3). */
    double h0[] = {2, 1, 1}, h1[] = {sqrt(2), sqrt(2), 1};
    const double *hv[] = {h0, h1};
    size_t hn[] = {3, 3};
    CHECK_OK(mlastrat_alloc_ranks(hv, hn, 2, 2, 1, 3, ranks));
    CHECK(ranks[0] == 3 && ranks[1] == 1, "hand case: ranks %d %d (want 3 1)", ranks[0], ranks[1]);
    /* random spectra of 5 layers: the sum is the budget, each within [min, max] */
    double sp[5][16];
    const double *spp[5];
    size_t nn[5];
    int rk[5], sum = 0;
    Mat *R = tu_randm(5, 16, 1);
    for (int l = 0; l < 5; l++) {
        for (int i = 0; i < 16; i++) sp[l][i] = fabs(R->data[l * 16 + i]) * pow(0.5 + 0.1 * l, i);
        spp[l] = sp[l];
        nn[l] = 16;
    }
    CHECK_OK(mlastrat_alloc_ranks(spp, nn, 5, 6, 3, 12, rk));
    for (int l = 0; l < 5; l++) {
        sum += rk[l];
        CHECK(rk[l] >= 3 && rk[l] <= 12, "layer %d rank %d", l, rk[l]);
    }
    CHECK(sum == 30, "ranks sum to %d, not the budget 30", sum);
    CHECK_ERR(mlastrat_alloc_ranks(spp, nn, 5, 2, 3, 12, rk), "do not fit");
    mat_free(R);
}

/* CARE's MLA converter's allocation: K and V apart, half the budget each. 2 layers at 4 per layer (min 2, max 8:
 * per branch 1-4, 4 each). K: layer 0 flat, layer 1 one direction; V the other way round. By hand, K from (1, 1):
 * layer 0 at rank 1 scores (1/4)/(3/4) x sqrt(2/1.5) = 0.385, layer 1 0 (nothing left): (2, 1); then layer 0 at 2:
 * (1/4)/(2/4) x 1.155 / sqrt 2 = 0.408 > 0: (3, 1). V likewise (1, 3). Ranks (4, 4): a joint allocation of the
 * same eight values per layer gives every rank past the minimum by one spectrum, not two. */
static void test_alloc_kv(void) {
    double flat[] = {1, 1, 1, 1, 1, 1}, one[] = {1, 0, 0, 0, 0, 0};
    const double *k[] = {flat, one}, *v[] = {one, flat};
    size_t n[] = {6, 6};
    int rk[2], rv[2];
    CHECK_OK(mlastrat_alloc_kv(k, n, v, n, 2, 4, 2, 8, rk, rv));
    CHECK(rk[0] == 3 && rk[1] == 1 && rv[0] == 1 && rv[1] == 3, "K ranks %d %d (want 3 1), V %d %d (want 1 3)", rk[0],
          rk[1], rv[0], rv[1]);
    /* budgets: 3 layers at 5: K 7, V 8; each branch within [1, 5] (min 2 -> 1, max 10 -> 5) */
    double a[] = {4, 2, 1, 0.5, 0.25, 0.1}, b[] = {1, 0.9, 0.8, 0.7, 0.6, 0.5}, c[] = {9, 1, 0.1, 0.01, 0, 0};
    const double *k3[] = {a, b, c}, *v3[] = {c, a, b};
    size_t n3[] = {6, 6, 6};
    int rk3[3], rv3[3], sk = 0, sv = 0;
    CHECK_OK(mlastrat_alloc_kv(k3, n3, v3, n3, 3, 5, 2, 10, rk3, rv3));
    for (int l = 0; l < 3; l++) {
        sk += rk3[l];
        sv += rv3[l];
        CHECK(rk3[l] >= 1 && rk3[l] <= 5 && rv3[l] >= 1 && rv3[l] <= 5, "layer %d: K %d V %d", l, rk3[l], rv3[l]);
    }
    CHECK(sk == 7 && sv == 8, "K ranks sum to %d (want 7), V to %d (want 8)", sk, sv);
}

int main(void) {
    test_index_sets();
    test_2norm_planted();
    test_full_rank();
    test_care_closed_form();
    test_care_layer();
    test_care_undamped_is_pca();
    test_alloc();
    test_alloc_kv();
    return check_done();
}
