/* tmla_qkn.c -- the plain GQA layer `convert mla` factors in place of a source with Q/K RMSNorm (fold
 * the gain and the calibrated 1/RMS into the projections, or drop the norm), and the report's errors
 * against the source with its norm (see tmla_qkn.h). */
#define _GNU_SOURCE
#include "tmla_qkn.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *tmla_qkn_name(tmla_qkn_mode k) {
    return k == TMLA_QKN_FOLD ? "fold" : k == TMLA_QKN_DROP ? "drop" : k == TMLA_QKN_KEEP ? "keep" : "none";
}

const char *tmla_qkn_words(tmla_qkn_mode k) {
    return k == TMLA_QKN_FOLD ? "q/k norm fold: gains folded into W_Q / W_K, each token's 1/RMS replaced by "
                                "1/sqrt(E[ms] + eps) of the PCA statistics (per head, or per projection)"
           : k == TMLA_QKN_DROP ? "q/k norm drop: the norm removed (gain and 1/RMS; the naive baseline)"
           : k == TMLA_QKN_KEEP ? "q/k norm keep: keys and values rebuilt from the fold conversion's cache by least "
                                  "squares, the source's norm (and RoPE) on them; not absorbable (session only)"
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
    if (mode == TMLA_QKN_FOLD || mode == TMLA_QKN_KEEP) {          /* keep caches fold's latent */
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

/* ================================================================ keep */

/* W~ = [W ; b] (rows + 1, cols) in double; b NULL: a zero row. */
static double *with_bias(const Mat *W, const float *b) {
    size_t h = W->rows, n = W->cols;
    double *A = malloc((h + 1) * n * sizeof(double));
    for (size_t i = 0; A && i < h * n; i++) A[i] = W->data[i];
    for (size_t j = 0; A && j < n; j++) A[h * n + j] = b ? b[j] : 0.0;
    return A;
}

/* S = the second moment of [x, 1] ((h + 1) square): [[Sigma, mu], [muᵀ, 1]] (Sigma NULL: identity, mu NULL: 0). */
static double *aug_moment(size_t h, const double *Sigma, const double *mu) {
    double *S = calloc((h + 1) * (h + 1), sizeof(double));
    for (size_t i = 0; S && i < h; i++) {
        for (size_t j = 0; j < h; j++) S[i * (h + 1) + j] = Sigma ? Sigma[i * h + j] : (double)(i == j);
        S[i * (h + 1) + h] = S[h * (h + 1) + i] = mu ? mu[i] : 0.0;
    }
    if (S) S[(h + 1) * (h + 1) - 1] = 1.0;
    return S;
}

/* P = (Aᵀ S A)^+ Aᵀ S T: A (k, n), T (k, m), S (k, k); P (n, m), caller frees. Eigenvalues below 1e-12 of the largest
 * count as zero (a latent direction the statistics never excite reconstructs nothing). */
static double *lsq_map(const double *A, const double *T, const double *S, size_t k, size_t n, size_t m) {
    double *SA = malloc(k * n * sizeof(double)), *G = malloc(n * n * sizeof(double)), *B = malloc(n * m * sizeof(double));
    double *w = malloc(n * sizeof(double)), *VB = malloc(n * m * sizeof(double)), *P = malloc(n * m * sizeof(double));
    bool ok = SA && G && B && w && VB && P;
    if (ok) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)k, (int)n, (int)k, 1.0, S, (int)k, A, (int)n, 0.0, SA, (int)n);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)k, 1.0, A, (int)n, SA, (int)n, 0.0, G, (int)n);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)m, (int)k, 1.0, SA, (int)n, T, (int)m, 0.0, B, (int)m);
        ok = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)n, G, (lapack_int)n, w) == 0;   /* G = V diag(w) Vᵀ */
    }
    if (ok) {
        double top = n ? fabs(w[n - 1]) : 0;
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)m, (int)n, 1.0, G, (int)n, B, (int)m, 0.0, VB, (int)m);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < m; j++) VB[i * m + j] = w[i] > 1e-12 * top ? VB[i * m + j] / w[i] : 0.0;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)n, 1.0, G, (int)n, VB, (int)m, 0.0, P, (int)m);
    }
    free(SA); free(G); free(B); free(w); free(VB);
    if (!ok) { free(P); P = NULL; }
    return P;
}

int tmla_qkn_keep(const AttnLayer *src, const AttnLayer *mla, const double *Sigma, const double *mu, AttnLayer **out) {
    *out = NULL;
    if (src->kind != ATTN_GQA || mla->kind != ATTN_MLA || !mla->W_KVA)
        return al_err("internal: qk-norm keep rebuilds a GQA layer from an MLA layer's cache");
    size_t h = (size_t)src->hidden, n = mla->W_KVA->cols, mk = src->W_K->cols, mv = src->W_V->cols, m = mk + mv;
    Mat KV = {.rows = h, .cols = m, .data = malloc(h * m * sizeof(float))};
    float *bkv = malloc(m * sizeof(float));
    for (size_t i = 0; KV.data && i < h; i++) {
        memcpy(KV.data + i * m, src->W_K->data + i * mk, mk * sizeof(float));
        memcpy(KV.data + i * m + mk, src->W_V->data + i * mv, mv * sizeof(float));
    }
    for (size_t j = 0; bkv && j < m; j++) bkv[j] = j < mk ? (src->b_K ? src->b_K[j] : 0.0f) : (src->b_V ? src->b_V[j - mk] : 0.0f);
    double *A = with_bias(mla->W_KVA, mla->b_KVA), *T = KV.data && bkv ? with_bias(&KV, bkv) : NULL;
    double *S = aug_moment(h, Sigma, mu), *P = A && T && S ? lsq_map(A, T, S, h + 1, n, m) : NULL;
    AttnLayer *L = P ? attn_layer_copy(src) : NULL;
    int rc = L ? AL_OK : al_err("out of memory or no eigen-decomposition (qk-norm keep's reconstruction)");
    /* the two factors kept (what attnlab's layout writes), P rounded to float; W_K, W_V formed from them */
    if (rc == AL_OK && (!(L->W_KVA = mat_copy(mla->W_KVA)) || !(L->W_KVB = mat_new(n, m)))) rc = AL_ERR;
    if (rc == AL_OK && mla->b_KVA && !(L->b_KVA = malloc(n * sizeof(float)))) rc = al_err("out of memory (qk-norm keep)");
    if (rc == AL_OK && mla->b_KVA) memcpy(L->b_KVA, mla->b_KVA, n * sizeof(float));
    for (size_t i = 0; rc == AL_OK && i < n * m; i++) L->W_KVB->data[i] = (float)P[i];
    if (rc == AL_OK) rc = attn_kv_rebuild(L);
    free(KV.data); free(bkv); free(A); free(T); free(S); free(P);
    if (rc) { attn_layer_free(L); return rc; }
    *out = L;
    return AL_OK;
}

size_t tmla_qkn_keep_params(const AttnLayer *L, size_t cache) {
    size_t h = (size_t)L->hidden, kv = L->W_K->cols + L->W_V->cols, dense = h * kv + (L->b_K ? L->W_K->cols : 0) +
                                                                        (L->b_V ? L->W_V->cols : 0);
    return attn_layer_params(L) - dense + (L->W_KVA ? 0 : h * cache + cache * kv);   /* W_KVA, W_KVB counted there */
}
