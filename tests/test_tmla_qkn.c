/* test_tmla_qkn.c -- the plain layer `convert mla qk-norm fold|drop` factors for a source with Q/K
 * RMSNorm (core/methods/tmla_qkn.h): fold is exact where every token's RMS equals the statistic's
 * (orthogonal projections, inputs of constant norm: per head and over the whole projection, gains
 * and Gemma's 1 + w), drop is not; fold's constant is 1/sqrt(E[ms] + eps) of the given second moment
 * and mean (against the empirical mean over drawn inputs); and the full pipeline (one KV head, full
 * rank: TransMLA exact) keeps fold's error. */
#include "test_transmla_util.h"
#include "tmla_qkn.h"
#include "transmla.h"

/* A one-KV-head layer with hidden = n_heads d: W_Q the identity, W_K the head blocks swapped (both
 * orthogonal), norms of kind k with gains g (per head: d values; per projection: n d). */
static AttnLayer *ortho_layer(int H, int d, qk_norm_kind k, bool one_plus) {
    int n = H * d;
    AttnLayer *L = tu_gqa(H, H, d, n, ROPE_HALF, false, false);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            L->W_Q->data[i * n + j] = i == j ? 1.0f : 0.0f;
            L->W_K->data[i * n + j] = (i + d) % n == j ? 1.0f : 0.0f;
        }
    size_t len = k == QKN_PROJ ? (size_t)n : (size_t)d;
    L->qk_norm = k;
    L->norm_1p = one_plus;
    L->norm_eps = 1e-6;
    L->q_norm = malloc(len * sizeof(float));
    L->k_norm = malloc(len * sizeof(float));
    for (size_t j = 0; j < len; j++) {
        L->q_norm[j] = (float)(0.5 + 0.25 * (double)(j % 5)) - (one_plus ? 1.0f : 0.0f);
        L->k_norm[j] = (float)(1.5 - 0.125 * (double)(j % 7)) - (one_plus ? 1.0f : 0.0f);
    }
    return L;
}

/* Score / output errors of b against a on T inputs whose every block of d values has unit RMS. */
static void errs_unit_rms(const AttnLayer *a, const AttnLayer *b, int d, double *se, double *oe) {
    size_t T = 20;
    Mat *X = attn_random_input(T, a->hidden, 99);
    for (size_t t = 0; t < T; t++)
        for (int j0 = 0; j0 < a->hidden; j0 += d) {
            float *x = X->data + t * (size_t)a->hidden + j0;
            double s = 0;
            for (int j = 0; j < d; j++) s += (double)x[j] * x[j];
            for (int j = 0; j < d; j++) x[j] *= (float)sqrt(d / s);
        }
    *se = *oe = INFINITY;
    CHECK_OK(tmla_qkn_measure(a, b, X, se, oe));
    mat_free(X);
}

static void test_exact_where_rms_constant(qk_norm_kind k, bool one_plus, const char *what) {
    AttnLayer *src = ortho_layer(2, 8, k, one_plus), *fold = NULL, *drop = NULL;
    CHECK_OK(tmla_qkn_plain(src, TMLA_QKN_FOLD, NULL, NULL, &fold));
    CHECK_OK(tmla_qkn_plain(src, TMLA_QKN_DROP, NULL, NULL, &drop));
    CHECK(fold && drop && fold->qk_norm == QKN_NONE && !fold->q_norm && drop->qk_norm == QKN_NONE, "%s: plain", what);
    double se, oe, se_d, oe_d;
    if (fold && drop) {
        errs_unit_rms(src, fold, 8, &se, &oe);
        errs_unit_rms(src, drop, 8, &se_d, &oe_d);
        CHECK(se < 2e-6 && oe < 2e-6, "%s: fold not exact at constant RMS: scores %.3g outputs %.3g", what, se, oe);
        CHECK(se_d > 0.05, "%s: drop exact (scores %.3g): the gains should matter", what, se_d);
    }
    attn_layer_free(src); attn_layer_free(fold); attn_layer_free(drop);
}

/* fold's constant from Sigma, mu against the mean square over 20000 inputs drawn with them. */
static void test_statistic(void) {
    int H = 2, G = 1, d = 8, n = 12;
    AttnLayer *src = tu_gqa(H, G, d, n, ROPE_HALF, true, false), *fold = NULL;
    src->qk_norm = QKN_HEAD;
    src->norm_eps = 1e-6;
    src->q_norm = tu_randv((size_t)d, 1.0);
    src->k_norm = tu_randv((size_t)d, 1.0);
    double *Sigma = calloc((size_t)(n * n), sizeof(double)), mu[12];
    Mat *A = tu_randm((size_t)n, (size_t)n, 0.5);
    for (int i = 0; i < n; i++) mu[i] = 0.3 * (i % 3) - 0.2;
    for (int i = 0; i < n; i++)                /* Sigma = A Aᵀ + I + mu muᵀ: a second moment */
        for (int j = 0; j < n; j++) {
            double s = (i == j) + mu[i] * mu[j];
            for (int l = 0; l < n; l++) s += (double)A->data[i * n + l] * A->data[j * n + l];
            Sigma[i * n + j] = s;
        }
    CHECK_OK(tmla_qkn_plain(src, TMLA_QKN_FOLD, Sigma, mu, &fold));
    Mat *X = tmla_eval_inputs(20000, n, 5, Sigma, mu);
    for (int g = 0; fold && X && g < G; g++) {         /* key head g: empirical E[ms] */
        double ms = 0;
        for (size_t t = 0; t < X->rows; t++)
            for (int e = 0; e < d; e++) {
                double k = src->b_K[g * d + e];
                for (int i = 0; i < n; i++) k += (double)X->data[t * n + i] * src->W_K->data[i * G * d + g * d + e];
                ms += k * k;
            }
        double want = 1 / sqrt(ms / (double)(X->rows * d) + 1e-6);
        for (int e = 0; e < d; e++) {               /* folded column = source column x gain x constant */
            double got = fold->W_K->data[g * d + e] / (src->W_K->data[g * d + e] * src->k_norm[e]);
            CHECK_NEAR(got, want, 0.03 * want);
        }
    }
    mat_free(X); mat_free(A); free(Sigma);
    attn_layer_free(src); attn_layer_free(fold);
}

/* Without a norm nothing to do; with one, mode none is an error naming the options. */
static void test_modes(void) {
    AttnLayer *plain = tu_gqa(2, 1, 8, 12, ROPE_HALF, false, false), *out = NULL;
    CHECK_OK(tmla_qkn_plain(plain, TMLA_QKN_FOLD, NULL, NULL, &out));
    CHECK(out == NULL, "a layer without a norm needs no plain copy");
    AttnLayer *src = ortho_layer(2, 8, QKN_HEAD, false);
    CHECK_ERR(tmla_qkn_plain(src, TMLA_QKN_NONE, NULL, NULL, &out), "give qk-norm fold");
    attn_layer_free(plain); attn_layer_free(src);
}

/* The pipeline on fold's plain layer (one KV head, kv-rank full, D = d: TransMLA exact) keeps fold's
 * exactness at constant RMS. */
static void test_pipeline(void) {
    AttnLayer *src = ortho_layer(2, 8, QKN_HEAD, false), *fold = NULL, *mla = NULL;
    src->n_kv_heads = 1;                          /* keep K / V of head 0 only */
    Mat *K = mat_new(16, 8), *V = mat_new(16, 8);
    for (int i = 0; i < 16; i++)
        for (int e = 0; e < 8; e++) {
            K->data[i * 8 + e] = src->W_K->data[i * 16 + e];
            V->data[i * 8 + e] = src->W_V->data[i * 16 + e];
        }
    mat_free(src->W_K); mat_free(src->W_V);
    src->W_K = K; src->W_V = V;
    CHECK_OK(tmla_qkn_plain(src, TMLA_QKN_FOLD, NULL, NULL, &fold));
    TmlaOpts o = tmla_opts_default();
    o.freqfold = 1; o.rope_dim = 8; o.compare_balance = false;
    TmlaLayerReport rep;
    if (fold) CHECK_OK(tmla_convert_layer(fold, &o, NULL, &mla, &rep));
    double se, oe;
    if (mla) {
        errs_unit_rms(src, mla, 8, &se, &oe);
        CHECK(se < 1e-5 && oe < 1e-5, "pipeline on fold: scores %.3g outputs %.3g", se, oe);
    }
    attn_layer_free(src); attn_layer_free(fold); attn_layer_free(mla);
}

int main(void) {
    test_exact_where_rms_constant(QKN_HEAD, false, "per head");
    test_exact_where_rms_constant(QKN_HEAD, true, "per head, 1 + w");
    test_exact_where_rms_constant(QKN_PROJ, false, "per projection");
    test_statistic();
    test_modes();
    test_pipeline();
    return check_done();
}
