/* tmla_qkn.c -- the plain GQA layer `convert mla` factors in place of a source with Q/K RMSNorm (fold
 * the gain and the calibrated 1/RMS into the projections, or drop the norm), and the report's errors
 * against the source with its norm (see tmla_qkn.h). */
#define _GNU_SOURCE
#include "tmla_qkn.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


const char *tmla_qkn_name(tmla_qkn_mode k) {
    return k == TMLA_QKN_FOLD ? "fold" : k == TMLA_QKN_DROP ? "drop" : "none";
}

const char *tmla_qkn_words(tmla_qkn_mode k) {
    return k == TMLA_QKN_FOLD ? "q/k norm fold: gains folded into W_Q / W_K, each token's 1/RMS replaced by "
                                "1/sqrt(E[ms] + eps) of the PCA statistics (per head, or per projection)"
           : k == TMLA_QKN_DROP ? "q/k norm drop: the norm removed (gain and 1/RMS; the naive baseline)"
                                : "no q/k norm";
}

/* E[(x W + b)_j²] per column j of W (hidden, n) under second moment Sigma (NULL: identity) and mean
 * mu (NULL: zero): e (n). */
static int column_ms(const Mat *W, const float *b, const double *Sigma, const double *mu, double *e) {
    size_t h = W->rows, n = W->cols;
    double *Wd = malloc(h * n * sizeof(double)), *SW = Sigma ? malloc(h * n * sizeof(double)) : NULL;
    if (!Wd || (Sigma && !SW)) { free(Wd); free(SW); return al_err("out of memory (q/k norm statistics)"); }
    for (size_t i = 0; i < h * n; i++) Wd[i] = W->data[i];
    if (Sigma)                                             /* SW = Sigma W, (h, n) */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)h, (int)n, (int)h, 1.0, Sigma, (int)h, Wd, (int)n,
                    0.0, SW, (int)n);
    for (size_t j = 0; j < n; j++) {
        double s = 0, m = 0;
        for (size_t i = 0; i < h; i++) {
            s += Wd[i * n + j] * (Sigma ? SW[i * n + j] : Wd[i * n + j]);
            if (mu) m += mu[i] * Wd[i * n + j];
        }
        double bj = b ? b[j] : 0;
        e[j] = s + 2 * m * bj + bj * bj;
    }
    free(Wd); free(SW);
    return AL_OK;
}

/* Folds norm weight w (per head: d, shared by the heads; per projection: W's cols) and the constant
 * 1/sqrt(E[ms_g] + eps) of each group g (a head, or the whole projection) into W's columns and b. */
static int fold_one(Mat *W, float *b, const float *w, qk_norm_kind k, size_t d, bool one_plus, double eps,
                    const double *Sigma, const double *mu) {
    size_t n = W->cols, group = k == QKN_PROJ ? n : d;
    double *e = malloc(n * sizeof(double));
    if (!e) return al_err("out of memory (q/k norm statistics)");
    int rc = column_ms(W, b, Sigma, mu, e);
    for (size_t g0 = 0; rc == AL_OK && g0 < n; g0 += group) {
        double ms = 0;
        for (size_t j = g0; j < g0 + group; j++) ms += e[j];
        double inv = 1.0 / sqrt(ms / (double)group + eps);   /* (-) the norm's scale at the statistics */
        for (size_t j = g0; j < g0 + group; j++) {
            double f = ((one_plus ? 1.0 : 0.0) + w[k == QKN_PROJ ? j : j - g0]) * inv;
            for (size_t i = 0; i < W->rows; i++) W->data[i * n + j] = (float)(W->data[i * n + j] * f);
            if (b) b[j] = (float)(b[j] * f);
        }
    }
    free(e);
    return rc;
}

int tmla_qkn_plain(const AttnLayer *src, tmla_qkn_mode mode, const double *Sigma, const double *mu, AttnLayer **out) {
    *out = NULL;
    if (src->kind != ATTN_GQA || src->qk_norm == QKN_NONE) return AL_OK;
    if (mode == TMLA_QKN_NONE)
        return al_err("the layer has Q/K RMSNorm (%s), which no MLA latent caches exactly: give qk-norm fold (gains "
                      "and the calibrated 1/RMS folded into W_Q / W_K) or qk-norm drop (the naive baseline)",
                      qk_norm_name(src->qk_norm));
    AttnLayer *P = attn_layer_copy(src);
    if (!P) return AL_ERR;
    int rc = AL_OK;
    if (mode == TMLA_QKN_FOLD) {
        size_t d = (size_t)src->head_dim;
        rc = fold_one(P->W_Q, P->b_Q, src->q_norm, src->qk_norm, d, src->norm_1p, src->norm_eps, Sigma, mu);
        if (rc == AL_OK)
            rc = fold_one(P->W_K, P->b_K, src->k_norm, src->qk_norm, d, src->norm_1p, src->norm_eps, Sigma, mu);
    }
    free(P->q_norm); free(P->k_norm);
    P->q_norm = P->k_norm = NULL;
    P->qk_norm = QKN_NONE;
    if (rc) { attn_layer_free(P); return rc; }
    *out = P;
    return AL_OK;
}

int tmla_qkn_measure(const AttnLayer *src, const AttnLayer *mla, const Mat *X, double *score_err, double *out_err) {
    size_t T = X->rows;
    int *pos = malloc(T * sizeof(int));
    AttnOut *a = NULL, *b = NULL;
    int rc = pos ? AL_OK : al_err("out of memory (positions)");
    for (size_t t = 0; pos && t < T; t++) pos[t] = (int)t;
    if (rc == AL_OK) rc = attn_eval(src, X, pos, true, &a);
    if (rc == AL_OK) rc = attn_eval(mla, X, pos, true, &b);
    if (rc == AL_OK) attn_rel_err(a, b, score_err, out_err);
    attn_out_free(a); attn_out_free(b); free(pos);
    return rc;
}
