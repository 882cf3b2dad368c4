/* budget_compare.c -- all KV-cache reductions at one budget (see budget_compare.h): builds each method's
 * version of one attention layer through its own module (farr.h, transmla.h, kqsvd.h, tpa.h) or
 * here (mean-pooling, the attention over projected caches), and measures every version on the
 * same random tokens (relative Frobenius errors, unsquared). Owns the BudgetResult it returns. */
#define _GNU_SOURCE
#include "budget_compare.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "seeds.h"
#include "farr.h"
#include "kqsvd.h"
#include "layersel.h"
#include "rope.h"
#include "tmla_qkn.h"
#include "tpa.h"
#include "transmla.h"

static const char *const METHOD_NAMES[BUDGET_NMETHODS] = {"farr", "transmla", "kqsvd", "tpa-a", "tpa-b", "mean-pool"};

const char *budget_method_name(budget_method m) { return m >= 0 && m < BUDGET_NMETHODS ? METHOD_NAMES[m] : "?"; }

BudgetOpts budget_opts_default(void) {
    return (BudgetOpts){.layer_lo = 0, .layer_hi = -1, .tokens = 64, .fit_tokens = 256, .seed = AL_SEED_COMPARE};
}

void budget_result_free(BudgetResult *r) {
    if (!r) return;
    free(r->rows);
    free(r);
}

/* ================================================================ helpers */

/* Fills ranks rk, rv alternately (K first), one unit costing ck / cv values, while the total stays
 * within budget and each stays within its limit. */
static void fill_ranks(size_t budget, size_t ck, size_t cv, int lim_k, int lim_v, int *rk, int *rv) {
    size_t used = 0;
    *rk = *rv = 0;
    for (bool grew = true; grew;) {
        grew = false;
        if (*rk < lim_k && used + ck <= budget) { (*rk)++; used += ck; grew = true; }
        if (*rv < lim_v && used + cv <= budget) { (*rv)++; used += cv; grew = true; }
    }
}

/* A row that cannot meet the budget: the reason goes in setting. */
static void row_na(BudgetRow *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void row_na(BudgetRow *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->setting, sizeof r->setting, fmt, ap);
    va_end(ap);
    r->ok = false;
    r->kv_values = 0;
    r->score_err = r->out_err = NAN;
}

/* Whether method k applies to L: an output gate (Qwen3.5) passes through TransMLA's latent (its head outputs
 * are the source's) and mean-pool (the query heads stay), not through FaRR's V / O factors, TPA's or KQ-SVD's
 * evaluator (it attends the projected keys and values itself); Q/K RMSNorm (Qwen3, OLMo 2) is folded for
 * TransMLA (`convert mla qk-norm fold`), kept by FaRR where the keys stay whole (RoPE) and by mean-pool over a
 * per-head norm, by KQ-SVD's projections of the normed keys; TPA's factors skip it. Not: r says why ("not
 * applicable: ..."). */
static bool applies(const AttnLayer *L, budget_method k, BudgetRow *r) {
    bool gate_ok = k == BUDGET_TRANSMLA || k == BUDGET_MEANPOOL;
    bool qkn_ok = k == BUDGET_TRANSMLA || k == BUDGET_KQSVD || (k == BUDGET_FARR && L->rope_dim > 0) ||
                  (k == BUDGET_MEANPOOL && L->qk_norm == QKN_HEAD);
    if (L->W_G && !gate_ok)
        row_na(r, "not applicable: the output gate (head outputs times sigmoid(x W_G) before W_O) %s",
               k == BUDGET_KQSVD ? "is not in its evaluator" : "does not pass its factors");
    else if (L->qk_norm != QKN_NONE && !qkn_ok)
        row_na(r, "not applicable: the Q/K RMSNorm (%s) %s", qk_norm_name(L->qk_norm),
               k == BUDGET_FARR ? "does not commute with truncating keys without RoPE"
               : k == BUDGET_MEANPOOL ? "over the whole projection does not pool" : "does not pass its factors");
    else return true;
    return false;
}

/* Errors of layer C against the reference outputs. */
static int measure_layer(const AttnLayer *C, const Mat *X, const int *pos, const AttnOut *ref, BudgetRow *r) {
    AttnOut *o = NULL;
    if (attn_eval(C, X, pos, true, &o)) return AL_ERR;
    attn_rel_err(ref, o, &r->score_err, &r->out_err);
    attn_out_free(o);
    r->ok = true;
    return AL_OK;
}

/* W (rows, cols) with one more row b (cols; zeros when NULL), in float: the input-augmented map. */
static Mat *augment(const Mat *W, size_t c0, size_t nc, const float *b) {
    Mat *A = mat_new(W->rows + 1, nc);
    if (!A) return NULL;
    for (size_t i = 0; i < W->rows; i++) memcpy(A->data + i * nc, W->data + i * W->cols + c0, nc * sizeof(float));
    if (b) memcpy(A->data + W->rows * nc, b + c0, nc * sizeof(float));
    return A;
}

/* ================================================================ farr */

/* Analyses and splits one KV group (its shared factor S, its grp heads) at rank r; *fg: the split
 * group (caller frees, also on failure). */
static int split_group(farr_kind kind, const Mat *S, Mat **heads, size_t grp, int r, size_t g, FarrGroup **fg) {
    int rc = farr_group_analyse(kind, S, (const Mat *const *)heads, (int)grp, 0.999, fg);
    if (rc == AL_OK) rc = farr_group_split(*fg, kind, S, (const Mat *const *)heads, r);
    if (rc == AL_OK && (*fg)->rank != r) rc = al_err("FaRR: group %zu kept rank %d of %d", g, (*fg)->rank, r);
    return rc;
}

/* Columns [g R, (g + 1) R) of W (D, G R) and of the bias b (G R, may be NULL) from the group's
 * shared factor (D rows, then the bias row). */
static void put_shared(Mat *W, float *b, const FarrGroup *fg, size_t g, size_t R) {
    size_t D = W->rows, GR = W->cols;
    for (size_t i = 0; i < D; i++) memcpy(W->data + i * GR + g * R, fg->shared->data + i * R, R * sizeof(float));
    if (b) memcpy(b + g * R, fg->shared->data + D * R, R * sizeof(float));
}

static void free_group(FarrGroup *fg, Mat **heads, size_t grp, Mat *S) {
    farr_group_free(fg);
    for (size_t i = 0; heads && i < grp; i++) mat_free(heads[i]);
    free(heads);
    mat_free(S);
}

/* FaRR VO truncation of every KV group of C at rank r (in place): v' = [x, 1] U_r, W_O'[h] =
 * U_rᵀ [W_V[g] ; b_V[g]] W_O[h]. */
static int farr_vo(AttnLayer *C, int r) {
    size_t D = (size_t)C->hidden, H = (size_t)C->n_heads, G = (size_t)C->n_kv_heads, dv = (size_t)C->v_dim;
    size_t grp = H / G, R = (size_t)r;
    Mat *Wv = mat_new(D, G * R), *Wo = mat_new(H * R, D);
    float *bv = C->b_V ? al_malloc3(G, R, sizeof(float), "value biases") : NULL;
    int rc = Wv && Wo && (bv || !C->b_V) ? AL_OK : AL_ERR;
    for (size_t g = 0; rc == AL_OK && g < G; g++) {
        Mat *S = C->b_V ? augment(C->W_V, g * dv, dv, C->b_V) : mat_slice(C->W_V, 0, D, g * dv, dv);
        Mat **heads = al_calloc(grp, sizeof *heads, "group heads");
        FarrGroup *fg = NULL;
        rc = S && heads ? AL_OK : AL_ERR;
        for (size_t i = 0; rc == AL_OK && i < grp; i++)
            if (!(heads[i] = mat_slice(C->W_O, (g * grp + i) * dv, dv, 0, D))) rc = AL_ERR;
        if (rc == AL_OK) rc = split_group(FARR_VO, S, heads, grp, r, g, &fg);
        if (rc == AL_OK) {
            put_shared(Wv, bv, fg, g, R);
            for (size_t i = 0; i < grp; i++) memcpy(Wo->data + (g * grp + i) * R * D, fg->head[i]->data, R * D * sizeof(float));
        }
        free_group(fg, heads, grp, S);
    }
    if (rc) { mat_free(Wv); mat_free(Wo); free(bv); return rc; }
    mat_free(C->W_V); mat_free(C->W_O); free(C->b_V);
    C->W_V = Wv; C->W_O = Wo; C->b_V = bv;
    C->v_dim = r;
    return AL_OK;
}

/* FaRR QK truncation (no RoPE) of every KV group at rank r: k' = [x, 1] U_r, q'_h = [x, 1]
 * [W_Q[h] ; b_Q[h]] [W_K[g] ; b_K[g]]ᵀ U_r. The softmax scale stays the model's. */
static int farr_qk(AttnLayer *C, int r) {
    size_t D = (size_t)C->hidden, H = (size_t)C->n_heads, G = (size_t)C->n_kv_heads, d = (size_t)C->head_dim;
    size_t grp = H / G, R = (size_t)r;
    bool bias = C->b_Q || C->b_K;
    Mat *Wk = mat_new(D, G * R), *Wq = mat_new(D, H * R);
    float *bk = bias ? al_malloc3(G, R, sizeof(float), "key biases") : NULL;
    float *bq = bias ? al_malloc3(H, R, sizeof(float), "query biases") : NULL;
    int rc = Wk && Wq && (!bias || (bk && bq)) ? AL_OK : AL_ERR;
    for (size_t g = 0; rc == AL_OK && g < G; g++) {
        Mat *S = bias ? augment(C->W_K, g * d, d, C->b_K) : mat_slice(C->W_K, 0, D, g * d, d);
        Mat **heads = al_calloc(grp, sizeof *heads, "group heads");
        FarrGroup *fg = NULL;
        rc = S && heads ? AL_OK : AL_ERR;
        for (size_t i = 0; rc == AL_OK && i < grp; i++) {
            size_t h = g * grp + i;
            heads[i] = bias ? augment(C->W_Q, h * d, d, C->b_Q) : mat_slice(C->W_Q, 0, D, h * d, d);
            if (!heads[i]) rc = AL_ERR;
        }
        if (rc == AL_OK) rc = split_group(FARR_QK, S, heads, grp, r, g, &fg);
        if (rc == AL_OK) {
            put_shared(Wk, bk, fg, g, R);
            for (size_t k = 0; k < grp; k++) {
                size_t h = g * grp + k;
                for (size_t i = 0; i < D; i++)
                    memcpy(Wq->data + i * H * R + h * R, fg->head[k]->data + i * R, R * sizeof(float));
                if (bq) memcpy(bq + h * R, fg->head[k]->data + D * R, R * sizeof(float));
            }
        }
        free_group(fg, heads, grp, S);
    }
    if (rc) { mat_free(Wk); mat_free(Wq); free(bk); free(bq); return rc; }
    mat_free(C->W_K); mat_free(C->W_Q); free(C->b_K); free(C->b_Q);
    C->W_K = Wk; C->W_Q = Wq; C->b_K = bk; C->b_Q = bq;
    C->head_dim = r;
    return AL_OK;
}

/* FaRR of L at ranks rk (keys; head_dim: whole) and rv (values; v_dim: whole), measured on X. */
/* keep (may be NULL): receives the truncated layer (the caller's) instead of its being freed. */
static int farr_at(const AttnLayer *L, int rk, int rv, const Mat *X, const int *pos, const AttnOut *ref, BudgetRow *r,
                   AttnLayer **keep) {
    AttnLayer *C = attn_layer_copy(L);
    int rc = C ? AL_OK : AL_ERR;
    if (rc == AL_OK && rv < L->v_dim) rc = farr_vo(C, rv);
    if (rc == AL_OK && rk < L->head_dim) rc = farr_qk(C, rk);
    if (rc == AL_OK) rc = measure_layer(C, X, pos, ref, r);
    if (rc == AL_OK && keep) { *keep = C; C = NULL; }
    attn_layer_free(C);
    return rc;
}

int budget_farr_layer(const AttnLayer *L, int rk, int rv, const Mat *X, const int *pos, BudgetRow *row) {
    memset(row, 0, sizeof *row);
    row->method = BUDGET_FARR;
    row->score_err = row->out_err = NAN;
    if (L->kind != ATTN_GQA) return al_err("compare: the methods take GQA / MHA layers");
    if (rk < 1 || rk > L->head_dim || rv < 1 || rv > L->v_dim || (L->rope_dim > 0 && rk < L->head_dim))
        return al_err("compare's FaRR has no rank r_k %d, r_v %d here (keys under RoPE stay whole)", rk, rv);
    AttnOut *ref = NULL;
    if (attn_eval(L, X, pos, true, &ref)) return AL_ERR;
    int rc = farr_at(L, rk, rv, X, pos, ref, row, NULL);
    attn_out_free(ref);
    if (rc == AL_OK) row->kv_values = (size_t)L->n_kv_heads * ((size_t)rk + (size_t)rv);
    return rc;
}

static int do_farr(const AttnLayer *L, size_t B, const Mat *X, const int *pos, const AttnOut *ref, BudgetRow *r,
                   AttnLayer **keep) {
    size_t G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim;
    int rk = L->head_dim, rv;
    if (L->rope_dim > 0) {
        if (B < G * (d + 1)) {
            row_na(r, "n/a: keys under RoPE stay whole (%zu value%s) and each group needs >= 1 value dim", G * d, al_s(G * d));
            return AL_OK;
        }
        rv = (int)((B - G * d) / G);
        if (rv > L->v_dim) rv = L->v_dim;
    } else {
        fill_ranks(B, G, G, L->head_dim, L->v_dim, &rk, &rv);
        if (rk < 1 || rv < 1) { row_na(r, "n/a: needs >= %zu value%s (one K and one V dim per group)", 2 * G, al_s(2 * G)); return AL_OK; }
    }
    int rc = farr_at(L, rk, rv, X, pos, ref, r, keep);
    if (rc) return rc;
    r->kv_values = G * ((size_t)rk + (size_t)rv);
    if (L->rope_dim > 0) snprintf(r->setting, sizeof r->setting, "r_v %d (keys whole under RoPE)", rv);
    else snprintf(r->setting, sizeof r->setting, "r_k %d, r_v %d", rk, rv);
    return AL_OK;
}

/* ================================================================ transmla */

/* TransMLA at budget B: every FreqFold M with D = rd / M RoPE dims (rd: the rotary dims of a head,
 * d unless partial rotary) and kv_rank B - D; the M is
 * picked by the output error on the fit tokens Xf (reference refF), and only that conversion is
 * measured on the evaluation tokens X, so the reported error is not the minimum of several
 * measurements on the same tokens. */
static int transmla_at(const AttnLayer *L, const AttnLayer *S, size_t B, const double *Sigma, const Mat *X, const int *pos,
                       const AttnOut *ref, const Mat *Xf, const int *posf, BudgetRow *r, AttnLayer **keep) {
    int G = L->n_kv_heads, d = L->head_dim, dv = L->v_dim, rd = L->rope_dim, d2 = rd / 2;
    if (L->rope_dim <= 0) { row_na(r, "n/a: RoRoPE needs rotary keys (the model has no RoPE)"); return AL_OK; }
    AttnOut *refF = NULL;
    if (attn_eval(L, Xf, posf, true, &refF)) return AL_ERR;
    AttnLayer *pick = NULL;
    bool any = false;
    BudgetRow best = *r;
    for (int M = 1; M <= d2; M++) {
        if (d2 % M) continue;
        int D = rd / M, nJ = (G * d - D) + G * dv;
        if ((size_t)D + 1 > B) continue;
        int R = (int)(B - (size_t)D);
        if (R > nJ) R = nJ;
        TmlaOpts o = tmla_opts_default();
        o.kv_rank = R == nJ ? TMLA_FULL : R;
        o.rope_dim = D;
        o.freqfold = M;
        o.compare_balance = false;
        o.eval_tokens = 4;
        AttnLayer *mla = NULL;
        TmlaLayerReport rep;
        BudgetRow cur = *r;
        int rc = tmla_convert_layer(S, &o, Sigma, &mla, &rep);
        if (rc == AL_OK) { mla->window = L->window; mla->softcap = L->softcap; }   /* the model's, both sides */
        if (rc == AL_OK && L->sinks && !mla->sinks) {                               /* gpt-oss's sinks too */
            size_t nb = (size_t)L->n_heads * sizeof(float);
            if ((mla->sinks = al_malloc(nb, "attention sinks"))) memcpy(mla->sinks, L->sinks, nb);
            else rc = AL_ERR;
        }
        if (rc == AL_OK) rc = measure_layer(mla, Xf, posf, refF, &cur);
        if (rc) {
            attn_layer_free(mla);
            attn_layer_free(pick);
            attn_out_free(refF);
            return al_err_ctx("TransMLA with freqfold %d", M);
        }
        if (!any || cur.out_err < best.out_err) {
            best = cur;
            best.kv_values = (size_t)R + (size_t)D;
            snprintf(best.setting, sizeof best.setting, "R %d + D %d (FreqFold %d)", R, D, M);
            attn_layer_free(pick);
            pick = mla;
            mla = NULL;
            any = true;
        }
        attn_layer_free(mla);
    }
    attn_out_free(refF);
    if (!any) { row_na(r, "n/a: needs >= %d value%s (one latent dim + the smallest RoPE part)", rd / d2 + 1, al_s(rd / d2 + 1)); return AL_OK; }
    int rc = measure_layer(pick, X, pos, ref, &best);
    if (rc == AL_OK && keep) { *keep = pick; pick = NULL; }
    attn_layer_free(pick);
    if (rc) return al_err_ctx("TransMLA, %s", best.setting);
    *r = best;
    return AL_OK;
}

/* transmla_at of L, or with Q/K RMSNorm of its plain layer with the norm folded (`convert mla qk-norm fold`),
 * measured against L. */
static int do_transmla(const AttnLayer *L, size_t B, const double *Sigma, const Mat *X, const int *pos,
                       const AttnOut *ref, const Mat *Xf, const int *posf, BudgetRow *r, AttnLayer **keep) {
    AttnLayer *plain = NULL;
    if (L->qk_norm != QKN_NONE && tmla_qkn_plain(L, TMLA_QKN_FOLD, Sigma, NULL, &plain)) return AL_ERR;
    int rc = transmla_at(L, plain ? plain : L, B, Sigma, X, pos, ref, Xf, posf, r, keep);
    size_t n = strlen(r->setting);
    if (rc == AL_OK && plain && r->ok) snprintf(r->setting + n, sizeof r->setting - n, ", Q/K norm folded");
    attn_layer_free(plain);
    return rc;
}

/* ================================================================ kqsvd */

/* L's Q/K RMSNorm with weights w (per head of hd, or over the row of n: L->qk_norm) on the rows of Y (T, n), as
 * attn_eval applies it (after the bias, before RoPE); w NULL: none. */
static void qk_norm_rows(const AttnLayer *L, const float *w, float *Y, size_t T, size_t n, size_t hd) {
    if (!w || L->qk_norm == QKN_NONE) return;
    for (size_t t = 0; t < T; t++) attn_qk_norm_row(Y + t * n, n / hd, hd, L->qk_norm, w, L->norm_1p, L->norm_eps);
}

/* Y (T, n) = X W + b, L's Q/K norm with weights nw (NULL: none), then RoPE (pairs per L->rope, on the first
 * L->rope_dim dims) on each of the nh heads of dim hd when rope: the queries and keys the cache sees. */
static void project(const AttnLayer *L, const Mat *X, const int *pos, const Mat *W, const float *b, const float *nw,
                    size_t nh, size_t hd, bool rope, float *Y) {
    size_t T = X->rows, n = W->cols;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)n, (int)X->cols, 1.0f, X->data, (int)X->cols,
                W->data, (int)n, 0.0f, Y, (int)n);
    for (size_t t = 0; b && t < T; t++)
        for (size_t j = 0; j < n; j++) Y[t * n + j] += b[j];
    qk_norm_rows(L, nw, Y, T, n, hd);
    for (size_t t = 0; t < T; t++) {
        float *y = Y + t * n;
        if (rope) rope_rotate_rows(y, nh, hd, L->rope_dim, L->rope, L->inv_freq, pos[t], 1.0);
    }
}

/* Adds the Gram Yᵀ Y (n x n, double, full) of the column block [c0, c0 + n) of Y (T, ld) into G,
 * through dsyrk on a double copy. */
static int gram_add(const float *Y, size_t T, size_t ld, size_t c0, size_t n, double *G) {
    double *Yd = al_malloc3(T, n, sizeof(double), "a Gram block"), *S = al_calloc(n * n, sizeof(double), "a Gram");
    if (!Yd || !S) { free(Yd); free(S); return AL_ERR; }
    for (size_t t = 0; t < T; t++) vec_f2d(Y + t * ld + c0, n, Yd + t * n);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)T, 1.0, Yd, (int)n, 0.0, S, (int)n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) {
            G[i * n + j] += S[i * n + j];
            if (j != i) G[j * n + i] += S[i * n + j];
        }
    free(Yd);
    free(S);
    return AL_OK;
}

/* Block [c0, c0 + n) of Y (T, ld) replaced by itself times A Bᵀ (A, B: n x R, double). */
static int apply_proj(float *Y, size_t T, size_t ld, size_t c0, size_t n, const double *A, const double *B, size_t R) {
    double *S = al_malloc3(n, n, sizeof(double), "a projection");
    float *Sf = al_malloc3(n, n, sizeof(float), "a projection"), *Z = al_malloc3(T, n, sizeof(float), "projected rows");
    if (!S || !Sf || !Z) { free(S); free(Sf); free(Z); return AL_ERR; }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)R, 1.0, A, (int)R, B, (int)R, 0.0, S, (int)n);
    vec_d2f(S, n * n, Sf);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)n, (int)n, 1.0f, Y + c0, (int)ld, Sf, (int)n,
                0.0f, Z, (int)n);
    for (size_t t = 0; t < T; t++) memcpy(Y + t * ld + c0, Z + t * n, n * sizeof(float));
    free(S);
    free(Sf);
    free(Z);
    return AL_OK;
}

/* The learned set p at layer l when its ranks are the budget's own (rk, rv: what every method gets
 * at B), else NULL: a set of other ranks is never reused, so KQ-SVD moves with the budget. */
static const KqProj *learned_fits(const BudgetKqFrom *kq, int rk, int rv) {
    const KqProj *p = kq ? kq->p : NULL;
    if (!p || p->method != KQ_KQSVD || kq->layer < 0 || kq->layer >= p->sh.n_layers) return NULL;
    return p->rank_k[kq->layer] == rk && p->rank_v[kq->layer] == rv ? p : NULL;
}

/* What KQ-SVD learns a layer's projections from, the same for each of its KV heads. */
typedef struct {
    const BudgetKqFrom *kq;        /* the layer and the calibration's Grams (kq->st, or NULL) */
    const KqProj *lp;              /* the learned set at the budget's ranks (learned_fits), or NULL */
    int rk, rv;                    /* key and value ranks */
    const float *Kf, *Qf, *Vf;     /* fit tokens' keys (Tf, G d), queries (Tf, H d), values (Tf, G dv) */
    size_t Tf;
} GroupProjIn;

/* One KV head's projections, and the scratch they are made in. */
typedef struct {
    double *GK, *GQ;               /* scratch (nmax x nmax) */
    double *A, *B;                 /* keys: (d x rk) each */
    double *Av, *Bv;               /* values: (dv x rv) each */
} GroupProj;

/* KV head g's key and value projections (out): copied from the learned set, else KQ-SVD of the
 * calibration's Grams (st) or of the fit tokens'. */
static int group_proj(const AttnLayer *L, const GroupProjIn *in, size_t g, GroupProj *out) {
    size_t H = (size_t)L->n_heads, G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim, dv = (size_t)L->v_dim;
    size_t grp = H / G, D = (size_t)L->hidden, Rk = (size_t)in->rk, Rv = (size_t)in->rv, Tf = in->Tf;
    const BudgetKqFrom *kq = in->kq;
    const KqProj *lp = in->lp;
    double *GK = out->GK, *GQ = out->GQ;
    if (lp) {
        memcpy(out->A, lp->A_K[kq->layer] + g * d * Rk, d * Rk * sizeof(double));
        memcpy(out->B, lp->B_K[kq->layer] + g * d * Rk, d * Rk * sizeof(double));
        memcpy(out->Av, lp->A_V[kq->layer] + g * dv * Rv, dv * Rv * sizeof(double));
        memcpy(out->Bv, lp->B_V[kq->layer] + g * dv * Rv, dv * Rv * sizeof(double));
        return AL_OK;
    }
    const CalibStats *st = kq ? kq->st : NULL;
    int rc = AL_OK;
    /* keys: G_K of the group's keys, G_Q of its stacked queries (Theorem 5) */
    if (st) {
        rc = calib_gram(st, CALIB_K, kq->layer, (int)g, GK);
        if (rc == AL_OK) rc = calib_gram(st, CALIB_Q, kq->layer, (int)g, GQ);
    } else {
        memset(GK, 0, d * d * sizeof(double));
        memset(GQ, 0, d * d * sizeof(double));
        rc = gram_add(in->Kf, Tf, G * d, g * d, d, GK);
        for (size_t i = 0; rc == AL_OK && i < grp; i++) rc = gram_add(in->Qf, Tf, H * d, (g * grp + i) * d, d, GQ);
    }
    if (rc == AL_OK) rc = kq_proj(KQ_KQSVD, GK, GQ, d, Rk, out->A, out->B, NULL);
    /* values: G_V and G_W = sum over the group's heads of W_O[h] W_O[h]ᵀ (Appendix B) */
    if (rc == AL_OK && st) rc = calib_gram(st, CALIB_V, kq->layer, (int)g, GK);
    else if (rc == AL_OK) {
        memset(GK, 0, dv * dv * sizeof(double));
        rc = gram_add(in->Vf, Tf, G * dv, g * dv, dv, GK);
    }
    if (rc == AL_OK) memset(GQ, 0, dv * dv * sizeof(double));
    /* W_O[h] (dv, D) is rows of W_O: its Gram W_O[h] W_O[h]ᵀ is the Gram of its transpose. */
    for (size_t i = 0; rc == AL_OK && i < grp; i++) {
        Mat *WoT = mat_slice_t(L->W_O, (g * grp + i) * dv, dv, 0, D);
        rc = WoT ? gram_add(WoT->data, D, dv, 0, dv, GQ) : AL_ERR;
        mat_free(WoT);
    }
    if (rc == AL_OK) rc = kq_proj(KQ_KQSVD, GK, GQ, dv, Rv, out->Av, out->Bv, NULL);
    return rc;
}

/* The calibration's shape must be the layer's for its Grams to stand in for the fit tokens. */
static bool calib_fits(const BudgetKqFrom *kq, const AttnLayer *L) {
    const CalibStats *st = kq ? kq->st : NULL;
    return st && kq->layer >= 0 && kq->layer < st->sh.n_layers && st->tokens[kq->layer] > 0 &&
           st->sh.n_kv_heads == L->n_kv_heads && st->sh.d_qk == L->head_dim && st->sh.d_v == L->v_dim;
}

static int do_kqsvd(const AttnLayer *L, size_t B, const Mat *X, const int *pos, const Mat *Xf, const int *posf,
                    const BudgetKqFrom *kq_in, const AttnOut *ref, BudgetRow *r, int *from) {
    size_t H = (size_t)L->n_heads, G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim, dv = (size_t)L->v_dim;
    BudgetKqFrom kq = kq_in ? *kq_in : (BudgetKqFrom){.layer = -1};
    if (!calib_fits(&kq, L)) kq.st = NULL;
    int rk, rv;
    fill_ranks(B, G, G, (int)d, (int)dv, &rk, &rv);
    const KqProj *lp = learned_fits(&kq, rk, rv);
    if (rk < 1 || rv < 1) { row_na(r, "n/a: needs >= %zu value%s (one key and one value dim per KV head)", 2 * G, al_s(2 * G)); return AL_OK; }
    *from = lp ? BUDGET_KQ_LEARNED : kq.st ? BUDGET_KQ_CALIB : BUDGET_KQ_FIT;
    bool rope = L->rope_dim > 0, fit = *from == BUDGET_KQ_FIT;
    size_t Tf = Xf->rows, T = X->rows, nmax = d > dv ? d : dv;
    float *Qf = fit ? al_malloc3(Tf, H * d, sizeof(float), "fit queries") : NULL;
    float *Kf = fit ? al_malloc3(Tf, G * d, sizeof(float), "fit keys") : NULL;
    float *Vf = fit ? al_malloc3(Tf, G * dv, sizeof(float), "fit values") : NULL;
    float *Q = al_malloc3(T, H * d, sizeof(float), "queries"), *K = al_malloc3(T, G * d, sizeof(float), "keys");
    float *V = al_malloc3(T, G * dv, sizeof(float), "values");
    double *GK = al_malloc3(nmax, nmax, sizeof(double), "a Gram"), *GQ = al_malloc3(nmax, nmax, sizeof(double), "a Gram");
    double *A = al_malloc3(nmax, nmax, sizeof(double), "a projection"), *Bm = al_malloc3(nmax, nmax, sizeof(double), "a projection");
    double *Av = al_malloc3(nmax, nmax, sizeof(double), "a projection"), *Bv = al_malloc3(nmax, nmax, sizeof(double), "a projection");
    AttnOut *o = NULL;
    int rc = (!fit || (Qf && Kf && Vf)) && Q && K && V && GK && GQ && A && Bm && Av && Bv ? AL_OK : AL_ERR;
    if (rc == AL_OK && fit) {
        project(L, Xf, posf, L->W_Q, L->b_Q, L->q_norm, H, d, rope, Qf);
        project(L, Xf, posf, L->W_K, L->b_K, L->k_norm, G, d, rope, Kf);
        project(L, Xf, posf, L->W_V, L->b_V, NULL, G, dv, false, Vf);
    }
    if (rc == AL_OK) {
        project(L, X, pos, L->W_Q, L->b_Q, L->q_norm, H, d, rope, Q);
        project(L, X, pos, L->W_K, L->b_K, L->k_norm, G, d, rope, K);
        project(L, X, pos, L->W_V, L->b_V, NULL, G, dv, false, V);
    }
    const GroupProjIn in = {.kq = &kq, .lp = lp, .rk = rk, .rv = rv, .Kf = Kf, .Qf = Qf, .Vf = Vf, .Tf = Tf};
    GroupProj pj = {.GK = GK, .GQ = GQ, .A = A, .B = Bm, .Av = Av, .Bv = Bv};
    for (size_t g = 0; rc == AL_OK && g < G; g++) {
        rc = group_proj(L, &in, g, &pj);
        if (rc == AL_OK) rc = apply_proj(K, T, G * d, g * d, d, A, Bm, (size_t)rk);
        if (rc == AL_OK) rc = apply_proj(V, T, G * dv, g * dv, dv, Av, Bv, (size_t)rv);
    }
    if (rc == AL_OK) rc = attn_attend(L, T, Q, K, V, true, &o);
    if (rc == AL_OK) {
        attn_rel_err(ref, o, &r->score_err, &r->out_err);
        r->ok = true;
        r->kv_values = G * (size_t)(rk + rv);
        if (lp) snprintf(r->setting, sizeof r->setting, "R_K %d, R_V %d per KV head (reused: kvsvd learn's, same ranks)",
                         rk, rv);
        else if (kq.st)
            snprintf(r->setting, sizeof r->setting, "R_K %d, R_V %d per KV head (calibration, %zu token%s)", rk, rv,
                     kq.st->tokens[kq.layer], al_s(kq.st->tokens[kq.layer]));
        else snprintf(r->setting, sizeof r->setting, "R_K %d, R_V %d per KV head (%zu random fit tokens)", rk, rv, Tf);
    }
    attn_out_free(o);
    free(Qf); free(Kf); free(Vf); free(Q); free(K); free(V); free(GK); free(GQ); free(A); free(Bm); free(Av); free(Bv);
    return rc;
}

/* ================================================================ tpa */

static int do_tpa(const AttnLayer *L, size_t B, tpa_form f, const double *Sigma, const Mat *X, const int *pos,
                  const AttnOut *ref, BudgetRow *r, AttnLayer **keep) {
    size_t G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim, dv = (size_t)L->v_dim;
    int rk, rv;
    if (f == TPA_FORM_A) fill_ranks(B, d, dv, (int)G, (int)G, &rk, &rv);
    else fill_ranks(B, G, G, (int)d, (int)dv, &rk, &rv);
    if (rk < 1 || rv < 1) {
        row_na(r, "n/a: needs >= %zu value%s (rank 1 for keys and values)", f == TPA_FORM_A ? d + dv : 2 * G, al_s(f == TPA_FORM_A ? d + dv : 2 * G));
        return AL_OK;
    }
    TpaLayer *t = NULL;
    AttnOut *o = NULL;
    int rc = tpa_layer_convert(L, f, rk, rv, Sigma, &t);
    if (rc == AL_OK) rc = tpa_eval(t, X, pos, true, &o);
    if (rc == AL_OK) {
        attn_rel_err(ref, o, &r->score_err, &r->out_err);
        r->ok = true;
        r->kv_values = tpa_factor_cached(&t->K) + tpa_factor_cached(&t->V);
        snprintf(r->setting, sizeof r->setting, "R_K %d, R_V %d", rk, rv);
        if (keep && !(*keep = attn_layer_copy(t->dense))) rc = AL_ERR;     /* what the forward pass runs */
    }
    attn_out_free(o);
    tpa_layer_free(t);
    return rc;
}

/* ================================================================ mean-pool */

static int do_meanpool(const AttnLayer *L, size_t B, const Mat *X, const int *pos, const AttnOut *ref, BudgetRow *r,
                       AttnLayer **keep) {
    size_t G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim, dv = (size_t)L->v_dim, D = (size_t)L->hidden;
    size_t Gp = 0;
    for (size_t c = G; c >= 1; c--)
        if (G % c == 0 && c * (d + dv) <= B) { Gp = c; break; }
    if (!Gp) { row_na(r, "n/a: one KV head needs %zu value%s", d + dv, al_s(d + dv)); return AL_OK; }
    size_t m = G / Gp;
    AttnLayer *C = attn_layer_copy(L);
    Mat *Wk = mat_new(D, Gp * d), *Wv = mat_new(D, Gp * dv);
    float *bk = L->b_K ? al_calloc(Gp * d, sizeof(float), "key biases") : NULL;
    float *bv = L->b_V ? al_calloc(Gp * dv, sizeof(float), "value biases") : NULL;
    int rc = C && Wk && Wv && (bk || !L->b_K) && (bv || !L->b_V) ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        float inv = 1.0f / (float)m;
        for (size_t g = 0; g < G; g++) {
            size_t gp = g / m;
            for (size_t i = 0; i < D; i++) {
                for (size_t e = 0; e < d; e++) Wk->data[i * Gp * d + gp * d + e] += inv * L->W_K->data[i * G * d + g * d + e];
                for (size_t e = 0; e < dv; e++)
                    Wv->data[i * Gp * dv + gp * dv + e] += inv * L->W_V->data[i * G * dv + g * dv + e];
            }
            for (size_t e = 0; bk && e < d; e++) bk[gp * d + e] += inv * L->b_K[g * d + e];
            for (size_t e = 0; bv && e < dv; e++) bv[gp * dv + e] += inv * L->b_V[g * dv + e];
        }
        mat_free(C->W_K); mat_free(C->W_V); free(C->b_K); free(C->b_V);
        C->W_K = Wk; C->W_V = Wv; C->b_K = bk; C->b_V = bv;
        Wk = Wv = NULL;
        bk = bv = NULL;
        C->n_kv_heads = (int)Gp;
        rc = measure_layer(C, X, pos, ref, r);
        if (rc == AL_OK && keep) { *keep = C; C = NULL; }
    }
    mat_free(Wk); mat_free(Wv); free(bk); free(bv);
    attn_layer_free(C);
    if (rc) return rc;
    r->kv_values = Gp * (d + dv);
    snprintf(r->setting, sizeof r->setting, "%zu KV head%s (of %zu)", Gp, al_s(Gp), G);
    return AL_OK;
}

/* ================================================================ one layer, a model */

int budget_layer(const AttnLayer *L, size_t budget, const Mat *X, const int *pos, const Mat *Xfit, const int *posfit,
              const double *Sigma, BudgetRow *rows) {
    return budget_layer_from(L, budget, X, pos, Xfit, posfit, Sigma, NULL, rows, NULL);
}

int budget_layer_from(const AttnLayer *L, size_t budget, const Mat *X, const int *pos, const Mat *Xfit, const int *posfit,
                   const double *Sigma, const BudgetKqFrom *kq, BudgetRow *rows, int *kq_from) {
    if (L->kind != ATTN_GQA)
        return al_err("compare: the methods take GQA / MHA layers; an MLA layer already caches a shared latent");
    AttnOut *ref = NULL;
    if (attn_eval(L, X, pos, true, &ref)) return AL_ERR;
    int rc = AL_OK, from = BUDGET_KQ_FIT;
    for (int k = 0; k < BUDGET_NMETHODS; k++) {
        BudgetRow *r = &rows[k];
        memset(r, 0, sizeof *r);
        r->method = (budget_method)k;
        r->score_err = r->out_err = NAN;
    }
#define RUN(k) applies(L, k, &rows[k]) &&
    if (RUN(BUDGET_FARR) (rc = do_farr(L, budget, X, pos, ref, &rows[BUDGET_FARR], NULL))) al_err_ctx("FaRR");
    else if (RUN(BUDGET_TRANSMLA) (rc = do_transmla(L, budget, Sigma, X, pos, ref, Xfit, posfit, &rows[BUDGET_TRANSMLA], NULL))) al_err_ctx("TransMLA");
    else if (RUN(BUDGET_KQSVD) (rc = do_kqsvd(L, budget, X, pos, Xfit, posfit, kq, ref, &rows[BUDGET_KQSVD], &from))) al_err_ctx("KQ-SVD");
    else if (RUN(BUDGET_TPA_A) (rc = do_tpa(L, budget, TPA_FORM_A, Sigma, X, pos, ref, &rows[BUDGET_TPA_A], NULL))) al_err_ctx("TPA form a");
    else if (RUN(BUDGET_TPA_B) (rc = do_tpa(L, budget, TPA_FORM_B, Sigma, X, pos, ref, &rows[BUDGET_TPA_B], NULL))) al_err_ctx("TPA form b");
    else if (RUN(BUDGET_MEANPOOL) (rc = do_meanpool(L, budget, X, pos, ref, &rows[BUDGET_MEANPOOL], NULL))) al_err_ctx("mean-pool");
#undef RUN
    attn_out_free(ref);
    if (kq_from) *kq_from = from;
    return rc;
}

int budget_method_layer(const AttnLayer *L, size_t budget, budget_method k, const double *Sigma, const Mat *Xfit,
                        const int *posfit, AttnLayer **out, BudgetRow *row) {
    *out = NULL;
    memset(row, 0, sizeof *row);
    row->method = k;
    row->score_err = row->out_err = NAN;
    if (L->kind != ATTN_GQA)
        return al_err("compare: the methods take GQA / MHA layers; an MLA layer already caches a shared latent");
    if (!applies(L, k, row)) return AL_OK;
    if (k == BUDGET_KQSVD) {
        row_na(row, "n/a in the forward pass: its projections act on the cached keys after RoPE");
        return AL_OK;
    }
    AttnOut *ref = NULL;
    if (attn_eval(L, Xfit, posfit, true, &ref)) return AL_ERR;
    int rc = k == BUDGET_FARR       ? do_farr(L, budget, Xfit, posfit, ref, row, out)
             : k == BUDGET_TRANSMLA ? do_transmla(L, budget, Sigma, Xfit, posfit, ref, Xfit, posfit, row, out)
             : k == BUDGET_TPA_A    ? do_tpa(L, budget, TPA_FORM_A, Sigma, Xfit, posfit, ref, row, out)
             : k == BUDGET_TPA_B    ? do_tpa(L, budget, TPA_FORM_B, Sigma, Xfit, posfit, ref, row, out)
                                    : do_meanpool(L, budget, Xfit, posfit, ref, row, out);
    attn_out_free(ref);
    if (rc) { attn_layer_free(*out); *out = NULL; }
    return rc ? al_err_ctx("%s", budget_method_name(k)) : AL_OK;
}

int budget_compare(Model *m, const BudgetOpts *opts, BudgetResult **out) {
    *out = NULL;
    BudgetOpts o = *opts;
    const ModelConfig *c = &m->cfg;
    const char *name = m->name ? m->name : m->path;
    if (analysis_check(m, AN_COMPARE)) return AL_ERR;
    if (o.budget < 1) return al_err("compare: kv-budget must be at least 1 value per token per layer");
    if (o.layer_hi < 0 || o.layer_hi >= c->n_layers) o.layer_hi = c->n_layers - 1;
    if (o.layer_lo < 0 || o.layer_lo > o.layer_hi)
        return al_err("compare: layers %d-%d: %s has layers 0-%d", o.layer_lo, o.layer_hi, name, c->n_layers - 1);
    /* a hybrid's linear-attention layers have no KV cache: its attention layers only */
    if (layersel_range(c, "compare", &o.layer_lo, &o.layer_hi, NULL, 0)) return AL_ERR;
    if (!o.tokens) o.tokens = 64;
    if (!o.fit_tokens) o.fit_tokens = 256;
    if (!o.seed) o.seed = AL_SEED_COMPARE;
    int nl = layersel_count(c, o.layer_lo, o.layer_hi), nfrom[3] = {0, 0, 0}, i = 0;
    BudgetResult *r = al_calloc(1, sizeof *r, "a comparison");
    Mat *X = NULL, *Xf = NULL;
    const double *lastS = NULL;
    int *pos = al_malloc3(o.tokens, 1, sizeof(int), "positions"), *posf = al_malloc3(o.fit_tokens, 1, sizeof(int), "positions");
    int rc = r && pos && posf ? AL_OK : AL_ERR;
    if (rc == AL_OK && !(r->rows = al_calloc((size_t)nl * BUDGET_NMETHODS, sizeof *r->rows, "comparison rows"))) rc = AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < o.tokens; t++) pos[t] = (int)t;
    for (size_t t = 0; rc == AL_OK && t < o.fit_tokens; t++) posf[t] = (int)t;
    for (int l = o.layer_lo; rc == AL_OK && l <= o.layer_hi; l = layersel_next(c, l + 1, o.layer_hi), i++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        const double *Sigma = o.sigma ? o.sigma[l] : NULL;
        if (Sigma) r->activation_stats = true;
        /* The same tokens for every layer without calibration; drawn with each layer's Sigma with it. */
        if (!X || Sigma != lastS) {
            lastS = Sigma;
            mat_free(X);
            mat_free(Xf);
            X = tpa_random_input(o.tokens, c->hidden, o.seed, Sigma);
            Xf = tpa_random_input(o.fit_tokens, c->hidden, o.seed + 1, Sigma);
            if (!X || !Xf) { rc = AL_ERR; break; }
        }
        AttnLayer *L = NULL;
        BudgetRow *rows = r->rows + (size_t)i * BUDGET_NMETHODS;
        rc = attn_layer_load(m, l, &L);
        if (rc == AL_OK) rc = attn_layer_finite(L);          /* NaN/Inf: said, not LAPACK's refusal */
        BudgetKqFrom kq = {.st = o.calib, .p = o.kq, .layer = l};
        int from = BUDGET_KQ_FIT;
        if (rc == AL_OK) rc = budget_layer_from(L, o.budget, X, pos, Xf, posf, Sigma, &kq, rows, &from);
        if (rc == AL_OK) nfrom[from]++;
        for (int k = 0; rc == AL_OK && k < BUDGET_NMETHODS; k++) rows[k].layer = l;
        attn_layer_free(L);
        if (rc) al_err_ctx("compare, layer %d", l);
        al_progress("layer", (size_t)(i + 1), (size_t)nl);
    }
    mat_free(X);
    mat_free(Xf);
    free(pos);
    free(posf);
    if (rc) { budget_result_free(r); return rc; }
    r->budget = o.budget;
    r->kv_model = cfg_kv_values(c);
    r->tokens = o.tokens;
    r->seed = o.seed;
    r->kq_from = nfrom[BUDGET_KQ_LEARNED] >= nfrom[BUDGET_KQ_CALIB] && nfrom[BUDGET_KQ_LEARNED] >= nfrom[BUDGET_KQ_FIT] ? BUDGET_KQ_LEARNED
                 : nfrom[BUDGET_KQ_CALIB] >= nfrom[BUDGET_KQ_FIT] ? BUDGET_KQ_CALIB : BUDGET_KQ_FIT;
    r->n_rows = nl * BUDGET_NMETHODS;
    *out = r;
    return AL_OK;
}
