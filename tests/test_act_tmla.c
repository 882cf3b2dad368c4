/* test_act_tmla.c -- the activation-based TransMLA (seed 003, 4.2-4.3, App. D) on synthetic data,
 * its statistics accumulated by core/analysis/calib.h (G_X and S_X of the attention input): activation
 * statistics of exactly white inputs give the weight-based conversion (M = 1 and 2, truncated
 * kv-rank); the bias cross terms through the mean match the empirical second moment of [k ; v];
 * sorting rotated pairs and selecting unrotated ones (MHA2MLA) are exact while every pair keeps
 * RoPE, and the selection picks the loud frequency; and the exact conversion (one KV head, kv-rank
 * full, D = d) made with activation statistics keeps the perplexity of its DeepSeek-V3 export, run
 * by the forward pass, to 1e-4. */
#include "tiny_model.h"
#include "testutil.h"
#include "calib.h"
#include "mla_export.h"
#include "tmla_study.h"

/* Calibration statistics for `layers` layers of hidden-wide attention inputs (the head dims are
 * placeholders: only G_X and S_X are fed). */
static CalibStats *x_stats(int layers, size_t hidden) {
    CalibShape sh = {.n_layers = layers, .n_heads = 1, .n_kv_heads = 1, .d_qk = 2, .d_v = 2, .hidden = (int)hidden};
    CalibStats *st = NULL;
    CHECK_OK(calib_new(&sh, true, &st));
    return st;
}

#include <cblas.h>
#include <lapacke.h>

/* ---------------------------------------------------------------- white inputs */

/* T x h inputs with Xᵀ X = T I (orthonormal columns scaled by sqrt T), as floats. */
static Mat *white_inputs(size_t T, size_t h) {
    Mat *R = attn_random_input(T, (int)h, 99);
    double *A = malloc(T * h * sizeof(double)), *tau = malloc(h * sizeof(double));
    for (size_t i = 0; i < T * h; i++) A[i] = R->data[i];
    LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (int)T, (int)h, A, (int)h, tau);
    LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (int)T, (int)h, (int)h, A, (int)h, tau);
    for (size_t i = 0; i < T * h; i++) R->data[i] = (float)(A[i] * sqrt((double)T));
    free(A);
    free(tau);
    return R;
}

/* Activation statistics of white inputs give the weight-based conversion. */
static void test_white(void) {
    size_t T = 400, hidden = 24;
    AttnLayer *gqa = tu_gqa(8, 4, 8, (int)hidden, ROPE_HALF, false, false);
    Mat *X = white_inputs(T, hidden);
    CalibStats *st = x_stats(1, hidden);
    double *S = NULL;
    if (st) {
        CHECK_OK(calib_add(st, CALIB_X, 0, X->data, 150, hidden));        /* in two blocks */
        CHECK_OK(calib_add(st, CALIB_X, 0, X->data + 150 * hidden, T - 150, hidden));
        CHECK(st->tokens[0] == T, "tokens %zu", st->tokens[0]);
        S = malloc(hidden * hidden * sizeof *S);
        CHECK_OK(calib_second_moment(st, 0, S));
    }
    double dev = 0;
    for (size_t i = 0; S && i < hidden; i++)
        for (size_t j = 0; j < hidden; j++) dev = fmax(dev, fabs(S[i * hidden + j] - (i == j)));
    CHECK(S && dev < 1e-5, "white inputs: E[x xᵀ] deviates from I by %.3g", dev);
    int Ms[2] = {1, 2};
    for (int k = 0; k < 2 && S; k++) {
        TmlaOpts o = tmla_opts_default();
        o.kv_rank = 20;
        o.freqfold = Ms[k];
        o.compare_balance = false;
        o.rope_dim = 8 / Ms[k];
        TmlaLayerReport rw = {0}, ra = {0};
        AttnLayer *mw = NULL, *ma = NULL;
        CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &mw, &rw));
        CHECK_OK(tmla_convert_layer_stats(gqa, &o, S, NULL, &ma, &ra));
        if (!mw || !ma) break;
        CHECK_NEAR(ra.alpha, rw.alpha, 1e-5 * rw.alpha);
        CHECK_NEAR(ra.rope_energy, rw.rope_energy, 1e-6);
        CHECK_NEAR(ra.joint_energy, rw.joint_energy, 1e-6);
        /* the report's inputs are Gaussian with the statistics: white here, so the same errors */
        CHECK_NEAR(ra.out_err, rw.out_err, 1e-3 * rw.out_err);
        CHECK_NEAR(ra.score_err, rw.score_err, 1e-3 * rw.score_err);
        double se, oe;
        tu_errs(mw, ma, &se, &oe);
        CHECK(se < 1e-4 && oe < 1e-4, "M %d: white activation-based vs weight-based: scores %.3g, outputs %.3g", Ms[k],
              se, oe);
        attn_layer_free(mw);
        attn_layer_free(ma);
    }
    free(S);
    calib_free(st);
    mat_free(X);
    attn_layer_free(gqa);
}

/* The second moment of [k ; v] through (Sigma, mu) equals the empirical one, biases included. */
static void test_bias_mean(void) {
    size_t T = 300, hidden = 16;
    AttnLayer *gqa = tu_gqa(4, 2, 8, (int)hidden, ROPE_HALF, true, false);
    Mat *X = attn_random_input(T, (int)hidden, 5);
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < hidden; j++) X->data[t * hidden + j] += (float)(0.5 + 0.1 * (double)j);
    CalibStats *st = x_stats(2, hidden);
    double **Sa = NULL, **Ma = NULL, *S = NULL, *mu = NULL, *C = NULL;
    if (!st) return;
    CHECK_OK(calib_add(st, CALIB_X, 1, X->data, T, hidden));       /* layer 0 gets nothing */
    CHECK(st->tokens[0] == 0 && st->tokens[1] == T, "tokens %zu %zu", st->tokens[0], st->tokens[1]);
    CHECK_ERR(calib_input_arrays(st, 0, 1, &Sa, &Ma), "layer 0 has seen no tokens");
    CHECK_OK(calib_input_arrays(st, 1, 1, &Sa, &Ma));
    CHECK(Sa && Ma && !Sa[0] && !Ma[0] && Sa[1] && Ma[1], "arrays for layer 1 only");
    if (Sa && Ma) { S = Sa[1]; mu = Ma[1]; }
    CHECK_OK(tmla_kv_cov_stats(gqa, S, mu, &C));
    size_t nk = gqa->W_K->cols, nv = gqa->W_V->cols, n = nk + nv;
    double *F = calloc(T * n, sizeof(double)), *E = calloc(n * n, sizeof(double));
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < n; j++) {
            const Mat *W = j < nk ? gqa->W_K : gqa->W_V;
            size_t c = j < nk ? j : j - nk;
            double s = j < nk ? gqa->b_K[c] : gqa->b_V[c];
            for (size_t i = 0; i < hidden; i++) s += (double)X->data[t * hidden + i] * W->data[i * W->cols + c];
            F[t * n + j] = s;
        }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)T, 1.0 / (double)T, F, (int)n, F, (int)n,
                0.0, E, (int)n);
    double err = 0, scale = 0;
    for (size_t i = 0; C && i < n * n; i++) {
        err = fmax(err, fabs(C[i] - E[i]));
        scale = fmax(scale, fabs(E[i]));
    }
    CHECK(C && err < 1e-9 * scale, "E[[k;v][k;v]ᵀ] through Sigma and mu: max error %.3g (scale %.3g)", err, scale);
    free(F); free(E); free(C);
    calib_free_arrays(2, Sa, Ma);
    calib_free(st);
    mat_free(X);
    attn_layer_free(gqa);
}

/* ---------------------------------------------------------------- pair selection */

/* Builds T at D RoPE dims (full joint rank) and returns the MLA layer. */
static AttnLayer *build_at(TmlaLayer *T, int D) {
    AttnLayer *L = NULL;
    CHECK_OK(tmla_remove_rope(T, D, NULL));
    CHECK_OK(tmla_fold_scale(T));
    CHECK_OK(tmla_build(T, &L));
    return L;
}

/* Sorting rotated pairs and selecting unrotated ones are exact while every pair keeps RoPE; the
 * sort orders energies; MHA2MLA picks the loud frequency; removal keeps the listed energy. */
static void test_pairs(rope_layout lay) {
    const int H = 6, G = 3, d = 8, hidden = 20, d2 = d / 2;
    AttnLayer *gqa = tu_gqa(H, G, d, hidden, lay, true, false);
    /* KV head 1 and its query heads 2, 3: frequency 2 ten times louder in q and k */
    int a = lay == ROPE_INTERLEAVED ? 4 : 2, b = lay == ROPE_INTERLEAVED ? 5 : 6;
    for (int i = 0; i < hidden; i++) {
        gqa->W_K->data[i * G * d + 1 * d + a] *= 10; gqa->W_K->data[i * G * d + 1 * d + b] *= 10;
        for (int h = 2; h <= 3; h++) { gqa->W_Q->data[i * H * d + h * d + a] *= 10; gqa->W_Q->data[i * H * d + h * d + b] *= 10; }
    }
    double *C_kv = NULL, *C_K = NULL, se, oe;
    TmlaLayer *T = NULL;
    CHECK_OK(tmla_merge(gqa, &T));
    CHECK_OK(tmla_kv_cov_stats(gqa, NULL, NULL, &C_kv));
    if (!T || !C_kv) return;
    C_K = tmla_key_cov(T, C_kv);
    /* RoRoPE + sort: exact at D = G d, energies descending, the first pairs keep what they say */
    CHECK_OK(tmla_rorope(T, 1, C_K));
    CHECK_OK(tmla_sort_pairs(T));
    bool desc = true;
    for (int p = 1; p < G * d2; p++)
        desc &= T->key_energy[2 * p - 2] + T->key_energy[2 * p - 1] >= T->key_energy[2 * p] + T->key_energy[2 * p + 1];
    CHECK(desc, "sorted pair energies are not descending");
    AttnLayer *L = build_at(T, G * d);
    tu_errs(gqa, L, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "sorted RoRoPE with every pair kept: scores %.3g, outputs %.3g", se, oe);
    attn_layer_free(L);
    double kept = 0, top = 0;
    CHECK_OK(tmla_remove_rope(T, 6, &kept));
    for (int j = 0; j < 6; j++) top += T->key_energy[j];
    CHECK_NEAR(kept, top / T->key_total, 1e-12);
    CHECK_NEAR(tmla_kept_energy(T, C_K), kept, 1e-9);
    /* unrotated pairs in a scrambled order: exact with all kept */
    size_t all[12];
    for (int p = 0; p < G * d2; p++) all[p] = (size_t)((p * 5 + 3) % (G * d2));
    CHECK_OK(tmla_select_pairs(T, all, (size_t)(G * d2), C_K));
    L = build_at(T, G * d);
    tu_errs(gqa, L, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "selected pairs, all kept: scores %.3g, outputs %.3g", se, oe);
    attn_layer_free(L);
    size_t dup[2] = {1, 1};
    CHECK_ERR(tmla_select_pairs(T, dup, 2, C_K), "listed twice");
    /* MHA2MLA: one frequency per KV head; head 1 must keep frequency 2 */
    size_t pick[3];
    CHECK_OK(tmla_mha2mla_pairs(gqa, NULL, NULL, 1, pick));
    CHECK(pick[1] == 1 * (size_t)d2 + 2, "MHA2MLA kept pair %zu of KV head 1, not the loud frequency 2", pick[1]);
    CHECK(pick[0] < (size_t)d2 && pick[2] >= 2 * (size_t)d2, "pairs %zu %zu outside their heads", pick[0], pick[2]);
    CHECK_ERR(tmla_mha2mla_pairs(gqa, NULL, NULL, 5, pick), "keep 1-4 frequencies");
    /* keeping only those: the scores lose the other frequencies' rotation, not the loud one's */
    CHECK_OK(tmla_select_pairs(T, pick, 3, C_K));
    L = build_at(T, 6);
    CHECK(L && L->rope_dim == 6 && fabs(L->inv_freq[1] - gqa->inv_freq[2]) < 1e-15,
          "the kept pair of head 1 turns at frequency 2 (%g, want %g)", L ? L->inv_freq[1] : NAN, gqa->inv_freq[2]);
    attn_layer_free(L);
    free(C_kv); free(C_K);
    tmla_layer_free(T);
    attn_layer_free(gqa);
}

/* ---------------------------------------------------------------- perplexities */

/* One KV head, kv-rank full, D = d, activation statistics: the perplexity does not move. */
static void test_exact_ppl(const char *tmp) {
    char out[4200];
    snprintf(out, sizeof out, "%s/one-kv-mla", tmp);
    Forward *f;
    Model *m = tu_open_tiny(tmp, "one-kv", tu_tiny("llama", 2, 1), &f);
    if (!m) return;
    size_t n = 200, seqlen = 50;
    int ids[200];
    tu_tiny_ids(ids, n, 17);
    double **S, **mu;
    CalibStats *st = tu_tiny_calib(m, f, ids, n, seqlen, &S, &mu);
    fwd_free(f);
    TmlaOpts o = tmla_opts_default();
    o.sigma = (const double *const *)S;
    o.mu = (const double *const *)mu;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    double before = fwd_mean_nll(m, ids, n, seqlen), after = r ? export_nll(r, out, ids, n, seqlen) : NAN;
    CHECK(r && r->activation_stats, "the conversion used the activation statistics");
    CHECK(isfinite(before) && before > 0, "nll before %g", before);
    CHECK(fabs(exp(after) - exp(before)) <= 1e-4 * exp(before), "exact conversion: ppl %.9g -> %.9g", exp(before),
          exp(after));
    tmla_result_free(r);
    calib_free_arrays(2, S, mu);
    calib_free(st);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_white();
    test_bias_mean();
    test_pairs(ROPE_HALF);
    test_pairs(ROPE_INTERLEAVED);
    test_exact_ppl(tmp);
    return check_done();
}
