/* mla_strategy.c -- MHA2MLA's and CARE's one-shot GQA -> MLA strategies on TransMLA's merged layer:
 * RoPE frequency selection, the joint / split SVD of the weights, CARE's covariance-aware basis and
 * rank allocation, one layer and the whole model as a TmlaResult, and the table of the strategies
 * per kv-rank with their perplexity. See mla_strategy.h. Row-major doubles unless Mat. */
#define _GNU_SOURCE
#include "mla_strategy.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layersel.h"
#include "seeds.h"
#include "tmla_qkn.h"

static double *dalloc(size_t r, size_t c, const char *what) {
    size_t n;
    if (!al_mul_ok(r ? r : 1, c ? c : 1, &n, what)) return NULL;
    return al_calloc(n, sizeof(double), what);
}

/* ================================================================ names */

MlastratOpts mlastrat_default(void) {
    return (MlastratOpts){.kind = MLASTRAT_TRANSMLA, .rope = MLASTRAT_ROPE_2NORM, .svd = MLASTRAT_SVD_JOINT,
                          .alloc = MLASTRAT_ALLOC_UNIFORM, .damp = -1};
}

const char *mlastrat_kind_name(mlastrat_kind k) {
    return k == MLASTRAT_MHA2MLA ? "mha2mla" : k == MLASTRAT_CARE ? "care" : "transmla";
}

const char *mlastrat_rope_name(mlastrat_rope r) {
    static const char *const n[] = {"high", "low", "uniform", "2norm"};
    return r <= MLASTRAT_ROPE_2NORM ? n[r] : "?";
}

const char *mlastrat_svd_name(mlastrat_svd s) { return s == MLASTRAT_SVD_SPLIT ? "split" : "joint"; }

const char *mlastrat_alloc_name(mlastrat_alloc a) { return a == MLASTRAT_ALLOC_CARE ? "care" : "uniform"; }

const char *mlastrat_label(const MlastratOpts *s, char *buf, size_t cap) {
    bool m2m = s->kind == MLASTRAT_MHA2MLA;
    char r[24] = "";
    if (m2m && s->rope_pairs > 0) snprintf(r, sizeof r, "-r%d", s->rope_pairs);
    snprintf(buf, cap, "%s%s%s%s%s%s", mlastrat_kind_name(s->kind), m2m ? "-" : "", m2m ? mlastrat_rope_name(s->rope) : "",
             m2m && s->svd == MLASTRAT_SVD_SPLIT ? "-split" : "", r, s->alloc == MLASTRAT_ALLOC_CARE ? "-alloc" : "");
    return buf;
}

bool mlastrat_exact_full(const MlastratOpts *s, int rd) {
    return s->kind != MLASTRAT_MHA2MLA || s->rope_pairs * 2 >= rd;
}

/* ================================================================ MHA2MLA's partial RoPE */

int mlastrat_rope_pairs(const AttnLayer *gqa, const MlastratOpts *s, int r, const double *Sigma, const double *mu,
                        size_t *pairs) {
    size_t G = (size_t)gqa->n_kv_heads, d2 = (size_t)gqa->rope_dim / 2;
    if (gqa->kind != ATTN_GQA || d2 == 0) return al_err("mha2mla: the layer must be GQA with RoPE");
    if (r < 1 || (size_t)r > d2) return al_err("mha2mla: keep 1-%zu RoPE frequencies per KV head, not %d", d2, r);
    if (s->rope == MLASTRAT_ROPE_2NORM) return tmla_mha2mla_pairs(gqa, Sigma, mu, r, pairs);
    size_t step = d2 / (size_t)r, st = (size_t)(s->uniform_start > 0 ? s->uniform_start : 0);
    if (s->rope == MLASTRAT_ROPE_UNIFORM && st + ((size_t)r - 1) * step >= d2)
        return al_err("mha2mla uniform: start %zu + %d x step %zu leaves the %zu frequencies of a head", st, r - 1, step, d2);
    for (size_t g = 0; g < G; g++)
        for (size_t k = 0; k < (size_t)r; k++) {
            size_t l = s->rope == MLASTRAT_ROPE_HIGH ? k : s->rope == MLASTRAT_ROPE_LOW ? d2 - (size_t)r + k : st + k * step;
            pairs[g * (size_t)r + k] = g * d2 + l;
        }
    return AL_OK;
}

int mlastrat_pairs_per_head(const ModelConfig *c, const MlastratOpts *s, int rope_dim, int *r) {
    int d2 = c->qk_rope_dim / 2, G = c->n_kv_heads;
    *r = s->rope_pairs > 0 ? s->rope_pairs : rope_dim / (2 * G);
    if (*r < 1) *r = 1;
    if (*r > d2) return al_err("mha2mla rope-pairs %d: a KV head has %d RoPE frequencies", *r, d2);
    return AL_OK;
}

/* ================================================================ CARE */

/* C_d^{1/2} (m x m) of C + damp mean(diag C) I: eigenvalues clamped at 1e-8 as CARE's sqrtm does. */
static double *care_sqrt(const double *C, size_t m, double damp) {
    double *Q = dalloc(m, m, "a covariance square root"), *w = dalloc(m, 1, "eigenvalues");
    double *S = dalloc(m, m, "a covariance square root"), tr = 0;
    if (!Q || !w || !S) { free(Q); free(w); free(S); return NULL; }
    for (size_t i = 0; i < m; i++) tr += C[i * m + i];
    memcpy(Q, C, m * m * sizeof(double));
    for (size_t i = 0; i < m; i++) Q[i * m + i] += damp * tr / (double)m;
    if (tmla_eig_desc(Q, m, w, "CARE's input covariance")) { free(Q); free(w); free(S); return NULL; }
    double *Qs = dalloc(m, m, "a covariance square root");
    if (!Qs) { free(Q); free(w); free(S); return NULL; }
    for (size_t i = 0; i < m; i++)                  /* S = Q diag(sqrt w) Qᵀ */
        for (size_t k = 0; k < m; k++) Qs[i * m + k] = Q[i * m + k] * sqrt(fmax(w[k], 1e-8));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)m, (int)m, 1.0, Qs, (int)m, Q, (int)m, 0.0, S, (int)m);
    free(Q); free(w); free(Qs);
    return S;
}

int mlastrat_care_basis(const double *W, size_t m, size_t n, const double *C, double damp, int R, double *V,
                        double *sv) {
    if (R < 1 || (size_t)R > n) return al_err("CARE: rank %d of a map with %zu output%s", R, n, al_s(n));
    double *S = care_sqrt(C, m, damp < 0 ? MLASTRAT_CARE_DAMP : damp);
    double *Y = dalloc(m, n, "CARE's whitened map"), *G = dalloc(n, n, "its Gram"), *w = dalloc(n, 1, "eigenvalues");
    int rc = S && Y && G && w ? AL_OK : AL_ERR;
    if (rc == AL_OK) {         /* Y = C^{1/2} W; its right singular vectors: the eigenvectors of Yᵀ Y */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)m, 1.0, S, (int)m, W, (int)n, 0.0, Y,
                    (int)n);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)m, 1.0, Y, (int)n, Y, (int)n, 0.0, G,
                    (int)n);
        rc = tmla_eig_desc(G, n, w, "CARE's whitened Gram");
    }
    for (size_t i = 0; rc == AL_OK && V && i < n; i++) memcpy(V + i * (size_t)R, G + i * n, (size_t)R * sizeof(double));
    for (size_t i = 0; rc == AL_OK && sv && i < (m < n ? m : n); i++) sv[i] = sqrt(fmax(w[i], 0));
    free(S); free(Y); free(G); free(w);
    return rc;
}

/* CARE's score of one more direction for a layer at rank r (zeroshot/convert.py
 * _propagated_residual_gain): sq the squared spectrum, pre its prefix sums (n + 1). */
static double care_gain(const double *sq, const double *pre, size_t n, int r, int min_rank, int l, int L) {
    double tot = pre[n];
    if ((size_t)r >= n || tot <= 0) return 0;
    double resid = fmax(1 - pre[r] / tot, 1e-12), local = sq[r] / tot / resid;
    double horizon = sqrt((double)(L - l) / ((L + 1) / 2.0));
    double cost = sqrt(fmax((double)r, 1) / fmax((double)min_rank, 1));
    return local * horizon / cost;
}

/* CARE's greedy allocation of `total` ranks (allocate_joint_dynamic_ranks); each spectrum's first n_sv[l] values. */
static int alloc_budget(const double *const *sv, const size_t *n_sv, int L, long total, int min_rank, int max_rank,
                        int *ranks) {
    long remaining = total - (long)L * min_rank;
    if (L < 1 || min_rank < 1 || min_rank > max_rank || remaining < 0)
        return al_err("CARE's allocation: min rank %d, max %d, %ld in all over %d layer%s do not fit", min_rank,
                      max_rank, total, L, al_s(L));
    double **sq = al_calloc((size_t)L, sizeof *sq, "spectra"), **pre = al_calloc((size_t)L, sizeof *pre, "spectra");
    int rc = sq && pre ? AL_OK : AL_ERR;
    for (int l = 0; rc == AL_OK && l < L; l++) {
        size_t n = n_sv[l];
        if (!(sq[l] = dalloc(n + 1, 1, "a spectrum")) || !(pre[l] = dalloc(n + 1, 1, "a spectrum"))) { rc = AL_ERR; break; }
        for (size_t i = 0; i < n; i++) { sq[l][i] = sv[l][i] * sv[l][i]; pre[l][i + 1] = pre[l][i] + sq[l][i]; }
        ranks[l] = min_rank;
    }
    for (long k = 0; rc == AL_OK && k < remaining; k++) {
        int best = -1;
        double best_s = -1;
        for (int l = 0; l < L; l++) {
            if (ranks[l] >= max_rank) continue;
            double g = care_gain(sq[l], pre[l], n_sv[l], ranks[l], min_rank, l, L);
            if (g > best_s) { best_s = g; best = l; }
        }
        if (best < 0) break;
        ranks[best]++;
    }
    for (int l = 0; sq && l < L; l++) { free(sq[l]); if (pre) free(pre[l]); }
    free(sq); free(pre);
    return rc;
}

int mlastrat_alloc_ranks(const double *const *sv, const size_t *n_sv, int L, int per_layer, int min_rank, int max_rank,
                         int *ranks) {
    return alloc_budget(sv, n_sv, L, (long)L * per_layer, min_rank, max_rank, ranks);
}

int mlastrat_alloc_kv(const double *const *svk, const size_t *nk, const double *const *svv, const size_t *nv, int L,
                      int per_layer, int min_rank, int max_rank, int *rk, int *rv) {
    long total = (long)L * per_layer, kb = total / 2;
    int bmin = min_rank / 2 > 1 ? min_rank / 2 : 1, bmax = max_rank / 2 > bmin ? max_rank / 2 : bmin;
    size_t *tk = al_calloc((size_t)L, sizeof *tk, "spectra"), *tv = al_calloc((size_t)L, sizeof *tv, "spectra");
    int rc = tk && tv ? AL_OK : AL_ERR;
    for (int l = 0; rc == AL_OK && l < L; l++) {      /* svals[:branch_max_rank]: the energies of those alone */
        tk[l] = nk[l] < (size_t)bmax ? nk[l] : (size_t)bmax;
        tv[l] = nv[l] < (size_t)bmax ? nv[l] : (size_t)bmax;
    }
    if (rc == AL_OK) rc = alloc_budget(svk, tk, L, kb, bmin, bmax, rk);
    if (rc == AL_OK) rc = alloc_budget(svv, tv, L, total - kb, bmin, bmax, rv);
    free(tk); free(tv);
    return rc;
}

/* ================================================================ one layer */

/* A layer on its way: TransMLA's merged layer after the RoPE step, and its covariances. */
typedef struct {
    TmlaLayer *T;
    double *C_kv, *C_J;       /* under the layer's statistics */
    double rope_kept;
} Prep;

static void prep_free(Prep *p) {
    tmla_layer_free(p->T);
    free(p->C_kv); free(p->C_J);
    memset(p, 0, sizeof *p);
}

/* The RoPE step: TransMLA's RoRoPE (transmla, care) or MHA2MLA's selected frequencies. */
static int prep_rope(const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, const double *Sigma,
                     const double *mu, Prep *p) {
    memset(p, 0, sizeof *p);
    double *C_K = NULL;
    size_t *pairs = NULL;
    int rc = tmla_merge(gqa, &p->T);
    if (rc == AL_OK) rc = tmla_kv_cov_stats(gqa, Sigma, mu, &p->C_kv);
    if (rc == AL_OK && !(C_K = tmla_key_cov(p->T, p->C_kv))) rc = AL_ERR;
    if (rc == AL_OK && s->kind != MLASTRAT_MHA2MLA) {
        rc = tmla_rorope(p->T, o->freqfold, C_K);
        if (rc == AL_OK) rc = tmla_remove_rope(p->T, o->rope_dim, &p->rope_kept);
    } else if (rc == AL_OK) {
        int r = s->rope_pairs > 0 ? s->rope_pairs : o->rope_dim / (2 * gqa->n_kv_heads);
        if (r < 1) r = 1;
        size_t n = (size_t)gqa->n_kv_heads * (size_t)r;
        rc = (pairs = al_calloc(n, sizeof *pairs, "RoPE pairs")) ? AL_OK : AL_ERR;
        if (rc == AL_OK) rc = mlastrat_rope_pairs(gqa, s, r, Sigma, mu, pairs);
        if (rc == AL_OK) rc = tmla_select_pairs(p->T, pairs, n, C_K);
        if (rc == AL_OK) rc = tmla_remove_rope(p->T, (int)(2 * n), &p->rope_kept);
    }
    if (rc == AL_OK) rc = tmla_joint_cov(p->T, p->C_kv, &p->C_J);
    free(C_K);
    free(pairs);
    if (rc) prep_free(p);
    return rc;
}

/* The joint features' covariance from the weights alone (MHA2MLA's SVD of the weights). */
static int weight_joint_cov(const AttnLayer *gqa, const TmlaLayer *T, double **C_J) {
    double *C_kv = NULL;
    int rc = tmla_kv_cov_stats(gqa, NULL, NULL, &C_kv);
    if (rc == AL_OK) rc = tmla_joint_cov(T, C_kv, C_J);
    free(C_kv);
    return rc;
}

/* The top eigenvectors of the symmetric blocks [lo, hi) of P (n x n) into columns [c0, c0 + k) of B
 * (n, ldb), eigenvalues appended to ev (hi - lo). */
static int block_basis(const double *P, size_t n, size_t lo, size_t hi, double *B, size_t ldb, size_t c0, size_t k,
                       double *ev) {
    size_t b = hi - lo;
    if (b == 0) return AL_OK;
    double *A = dalloc(b, b, "a covariance block");
    if (!A) return AL_ERR;
    for (size_t i = 0; i < b; i++) memcpy(A + i * b, P + (lo + i) * n + lo, b * sizeof(double));
    int rc = tmla_eig_desc(A, b, ev, "a joint covariance block");
    for (size_t i = 0; rc == AL_OK && B && i < b; i++)
        for (size_t j = 0; j < k; j++) B[(lo + i) * ldb + c0 + j] = A[i * b + j];
    free(A);
    return rc;
}

/* Ranks of MHA2MLA's split SVD: R shared half and half between the nK key and nv value features. */
static void split_ranks(size_t R, size_t nK, size_t nv, size_t *Rk, size_t *Rv) {
    *Rk = R / 2;
    *Rv = R - *Rk;
    if (*Rk > nK) { *Rv += *Rk - nK; *Rk = nK; }
    if (*Rv > nv) { *Rk += *Rv - nv; *Rv = nv; }
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* MHA2MLA's split SVD: basis (nJ, R) block-diagonal, and the merged spectrum ev (nJ). */
static int split_basis(const double *P, const TmlaLayer *T, size_t R, double *B, double *ev) {
    size_t nJ = (size_t)T->n_J, nK = (size_t)(T->G * T->d - T->D), Rk, Rv;
    split_ranks(R, nK, nJ - nK, &Rk, &Rv);
    int rc = block_basis(P, nJ, 0, nK, B, R, 0, Rk, ev);
    if (rc == AL_OK) rc = block_basis(P, nJ, nK, nJ, B, R, Rk, Rv, ev + nK);
    if (rc == AL_OK) qsort(ev, nJ, sizeof *ev, cmp_desc);
    return rc;
}

/* CARE's joint map W_J = [W_K U[:, D:] | W_V] with the bias row (m + 1, nJ) and its input's second
 * moment [[Sigma, mu], [muᵀ, 1]] (identity when Sigma is NULL): *rows = m + 1 with biases, else m. */
static int care_map(const TmlaLayer *T, const double *Sigma, const double *mu, double **W, double **C, size_t *rows) {
    const AttnLayer *S = T->src;
    size_t m = (size_t)T->hidden, nk = (size_t)T->G * T->d, D = (size_t)T->D, nK = nk - D, nv = (size_t)T->G * T->dv;
    size_t nJ = nK + nv, mr = m + (S->b_K || S->b_V ? 1 : 0);
    MatD *Wk = matd_from_mat(S->W_K);
    *W = dalloc(mr, nJ, "CARE's joint map");
    *C = dalloc(mr, mr, "CARE's input moment");
    *rows = mr;
    if (!Wk || !*W || !*C) { matd_free(Wk); return AL_ERR; }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)nK, (int)nk, 1.0, Wk->data, (int)nk, T->U + D,
                (int)nk, 0.0, *W, (int)nJ);
    for (size_t i = 0; i < m; i++) vec_f2d(S->W_V->data + i * nv, nv, *W + i * nJ + nK);
    for (size_t j = 0; mr > m && j < nK; j++)
        for (size_t i = 0; i < nk; i++) (*W)[m * nJ + j] += (S->b_K ? S->b_K[i] : 0) * T->U[i * nk + D + j];
    for (size_t a = 0; mr > m && a < nv; a++) (*W)[m * nJ + nK + a] = S->b_V ? S->b_V[a] : 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < m; j++) (*C)[i * mr + j] = Sigma ? Sigma[i * m + j] : (double)(i == j);
    for (size_t i = 0; mr > m && i < m; i++) (*C)[i * mr + m] = (*C)[m * mr + i] = mu ? mu[i] : 0;
    if (mr > m) (*C)[m * mr + m] = 1;
    matd_free(Wk);
    return AL_OK;
}

/* The strategy's latent basis B (nJ, R) and its operator's spectrum ev (nJ, squared singular values);
 * B NULL: the spectrum only. Sets T's alpha. */
static int latent_basis(Prep *p, const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, const double *Sigma,
                        const double *mu, size_t R, double *B, double *ev) {
    TmlaLayer *T = p->T;
    size_t nJ = (size_t)T->n_J;
    int rc = tmla_balance(T, s->kind == MLASTRAT_TRANSMLA && o->balance, p->C_J);
    if (rc == AL_OK && s->kind == MLASTRAT_CARE) {
        double *W = NULL, *C = NULL, *sv = NULL;
        size_t mr = 0;
        rc = care_map(T, Sigma, mu, &W, &C, &mr);
        if (rc == AL_OK) rc = (sv = dalloc(nJ, 1, "singular values")) ? AL_OK : AL_ERR;
        if (rc == AL_OK) rc = mlastrat_care_basis(W, mr, nJ, C, s->damp, B ? (int)R : 1, B, sv);
        for (size_t i = 0; rc == AL_OK && i < nJ; i++) ev[i] = sv[i] * sv[i];
        free(W); free(C); free(sv);
        return rc;
    }
    double *P = NULL;
    if (rc == AL_OK && s->kind == MLASTRAT_MHA2MLA) rc = weight_joint_cov(gqa, T, &P);
    else if (rc == AL_OK && (P = dalloc(nJ, nJ, "the balanced joint covariance"))) {
        size_t nK = (size_t)(T->G * T->d - T->D);
        for (size_t i = 0; i < nJ; i++)
            for (size_t j = 0; j < nJ; j++)
                P[i * nJ + j] = p->C_J[i * nJ + j] / ((i < nK ? T->alpha : 1) * (j < nK ? T->alpha : 1));
    } else if (rc == AL_OK) rc = AL_ERR;
    if (rc == AL_OK && s->kind == MLASTRAT_MHA2MLA && s->svd == MLASTRAT_SVD_SPLIT) rc = split_basis(P, T, R, B, ev);
    else if (rc == AL_OK) rc = block_basis(P, nJ, 0, nJ, B, R, 0, B ? R : 0, ev);
    free(P);
    return rc;
}

/* Sets T's joint basis to B (nJ, R; taken) with the energy its spectrum ev keeps. */
static void set_basis(TmlaLayer *T, double *B, size_t R, const double *ev) {
    double kept = 0, tot = 0;
    for (size_t i = 0; i < (size_t)T->n_J; i++) {
        double v = fmax(ev[i], 0);
        tot += v;
        if (i < R) kept += v;
    }
    free(T->R_KV);
    T->R_KV = B;
    T->R = (int)R;
    T->joint_energy = tot > 0 ? kept / tot : 1;
}

/* The built layer of p at rank R (TMLA_FULL: all), the query latent when asked. */
static int build_layer(Prep *p, const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, int R,
                       const double *Sigma, const double *mu, AttnLayer **mla) {
    size_t nJ = (size_t)p->T->n_J, r = R == TMLA_FULL ? nJ : (size_t)R;
    if (r < 1 || r > nJ)
        return al_err("kv-rank %d: the joint basis of NoPE keys and values has %zu direction%s here; give 1-%zu or full",
                      R, nJ, al_s(nJ), nJ);
    double *B = dalloc(nJ, r, "the joint basis"), *ev = dalloc(nJ, 1, "a spectrum"), *C_q = NULL;
    int rc = B && ev ? latent_basis(p, gqa, s, o, Sigma, mu, r, B, ev) : AL_ERR;
    if (rc == AL_OK) { set_basis(p->T, B, r, ev); B = NULL; }
    if (rc == AL_OK) rc = tmla_fold_scale(p->T);
    if (rc == AL_OK) rc = tmla_build(p->T, mla);
    if (rc == AL_OK && o->q_rank > 0) {
        rc = tmla_q_cov_stats(*mla, Sigma, mu, &C_q);
        if (rc == AL_OK) rc = tmla_q_lowrank(*mla, o->q_rank, C_q);
        if (rc) { attn_layer_free(*mla); *mla = NULL; }
    }
    free(B); free(ev); free(C_q);
    return rc;
}

/* One plain layer (no Q/K norm) converted, with its report's fields but the errors. */
static int convert_plain(const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, int R, const double *Sigma,
                         const double *mu, AttnLayer **mla, TmlaLayerReport *rep) {
    Prep p;
    int rc = prep_rope(gqa, s, o, Sigma, mu, &p);
    if (rc == AL_OK) rc = build_layer(&p, gqa, s, o, R, Sigma, mu, mla);
    if (rc == AL_OK) {
        rep->alpha = p.T->alpha;
        rep->rope_energy = p.rope_kept;
        rep->joint_energy = p.T->joint_energy;
    }
    prep_free(&p);
    return rc;
}

int mlastrat_convert_layer(const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, int R, const double *Sigma,
                           const double *mu, AttnLayer **mla, TmlaLayerReport *rep) {
    *mla = NULL;
    AttnLayer *plain = NULL;
    Mat *X = NULL;
    rep->joint_energy_alt = rep->score_err_alt = rep->out_err_alt = NAN;
    rep->qkn_score_err = rep->qkn_out_err = NAN;
    int rc = tmla_qkn_plain(gqa, (tmla_qkn_mode)o->qk_norm, Sigma, mu, &plain);
    if (rc == AL_OK) rc = convert_plain(plain ? plain : gqa, s, o, R, Sigma, mu, mla, rep);
    if (rc == AL_OK && !(X = tmla_eval_inputs(o->eval_tokens ? o->eval_tokens : 64, gqa->hidden, o->seed, Sigma, mu)))
        rc = AL_ERR;
    if (rc == AL_OK) rc = tmla_qkn_measure(gqa, *mla, X, &rep->score_err, &rep->out_err);
    if (rc == AL_OK && plain) rc = tmla_qkn_measure(gqa, plain, X, &rep->qkn_score_err, &rep->qkn_out_err);
    mat_free(X);
    attn_layer_free(plain);
    if (rc) { attn_layer_free(*mla); *mla = NULL; }
    return rc;
}

/* The eigenvalues of block [lo, hi) of the moment C (n square) damped by MLASTRAT_KV_DAMP mean(diag), clamped at
 * 1e-8 and raised to MLASTRAT_KV_POWER, descending (lora_qkv.py svd_project_singular_values: the singular values
 * of H^p Wᵀ, with W the up-projection, whose columns are orthogonal of one norm -- the GQA repeat of an orthonormal
 * basis --, so they are those powers up to one factor, which the allocation's ratios do not see): *sv (*m). */
static int powered_block(const double *C, size_t n, size_t lo, size_t hi, double **sv, size_t *m) {
    size_t b = hi - lo;
    double *A = dalloc(b, b, "a moment block"), *w = dalloc(b, 1, "eigenvalues"), tr = 0;
    int rc = A && w ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < b; i++) {
        memcpy(A + i * b, C + (lo + i) * n + lo, b * sizeof(double));
        tr += A[i * b + i];
    }
    for (size_t i = 0; rc == AL_OK && i < b; i++) A[i * b + i] += MLASTRAT_KV_DAMP * tr / (double)b;
    if (rc == AL_OK && b) rc = tmla_eig_desc(A, b, w, "CARE's K / V moment");
    for (size_t i = 0; rc == AL_OK && i < b; i++) w[i] = pow(fmax(w[i], 1e-8), MLASTRAT_KV_POWER);
    free(A);
    *sv = rc == AL_OK ? w : NULL;
    *m = rc == AL_OK ? b : 0;
    if (rc) free(w);
    return rc;
}

int mlastrat_layer_kv_spectra(const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, const double *Sigma,
                              const double *mu, double **svk, size_t *nk, double **svv, size_t *nv) {
    *svk = *svv = NULL;
    *nk = *nv = 0;
    AttnLayer *plain = NULL;
    Prep p = {0};
    int rc = tmla_qkn_plain(gqa, (tmla_qkn_mode)o->qk_norm, Sigma, mu, &plain);
    if (rc == AL_OK) rc = prep_rope(plain ? plain : gqa, s, o, Sigma, mu, &p);
    if (rc == AL_OK) {
        size_t nJ = (size_t)p.T->n_J, nK = (size_t)(p.T->G * p.T->d - p.T->D);
        rc = powered_block(p.C_J, nJ, 0, nK, svk, nk);
        if (rc == AL_OK) rc = powered_block(p.C_J, nJ, nK, nJ, svv, nv);
        if (rc) { free(*svk); *svk = NULL; *nk = 0; }
    }
    prep_free(&p);
    attn_layer_free(plain);
    return rc;
}

/* ================================================================ the whole model */

/* Resolves o for strategy s on m: TransMLA's options (freqfold, rope-dim, layers, q/k norm), then
 * the kv rank against the strategy's joint basis; *D the shared key's RoPE dims, *nJ its basis. */
static int resolve(const Model *m, TmlaOpts *o, const MlastratOpts *s, int *D, int *nJ) {
    int R = o->kv_rank;
    o->kv_rank = TMLA_FULL;
    if (tmla_resolve_opts(m, o)) return AL_ERR;
    o->kv_rank = R;
    const ModelConfig *c = &m->cfg;
    int r = 0;
    if (s->kind == MLASTRAT_MHA2MLA && mlastrat_pairs_per_head(c, s, o->rope_dim, &r)) return AL_ERR;
    *D = s->kind == MLASTRAT_MHA2MLA ? 2 * c->n_kv_heads * r : o->rope_dim;
    *nJ = (c->n_kv_heads * cfg_d_qk(c) - *D) + c->n_kv_heads * c->v_dim;
    if (R != TMLA_FULL && (R < 1 || R > *nJ))
        return al_err("kv-rank %d: %s's joint NoPE key / value basis has %d direction%s on this model; give 1-%d or full",
                      R, mlastrat_kind_name(s->kind), *nJ, al_s(*nJ), *nJ);
    if (s->kind == MLASTRAT_CARE && !o->sigma)
        return al_err("strategy care whitens by the activations' covariance: it needs activation statistics (calib "
                      "FILE, ids FILE, or calibrate first), not stats weights");
    return AL_OK;
}

/* CARE's allocation over the layers [o->layer_lo, o->layer_hi] at R per layer (ranks[l]): as its MLA converter
 * (lora_qkv.py, dynamic_rank), K and V apart on their H^4 spectra, half the budget each; a layer's rank their sum. */
static int alloc_layers(Model *m, const TmlaOpts *o, const MlastratOpts *s, int R, int nJ, int *ranks) {
    const ModelConfig *c = &m->cfg;
    int L = layersel_count(c, o->layer_lo, o->layer_hi), k = 0, rc = AL_OK;
    double **sk = al_calloc((size_t)L + 1, sizeof *sk, "spectra"), **sv = al_calloc((size_t)L + 1, sizeof *sv, "spectra");
    size_t *nk = al_calloc((size_t)L + 1, sizeof *nk, "spectra"), *nv = al_calloc((size_t)L + 1, sizeof *nv, "spectra");
    int *rk = al_calloc((size_t)L + 1, sizeof *rk, "ranks"), *rv = al_calloc((size_t)L + 1, sizeof *rv, "ranks");
    if (!sk || !sv || !nk || !nv || !rk || !rv) rc = AL_ERR;
    for (int l = o->layer_lo; rc == AL_OK && l <= o->layer_hi; l = layersel_next(c, l + 1, o->layer_hi), k++) {
        AttnLayer *gqa = NULL;
        const double *S = o->sigma ? o->sigma[l] : NULL, *mu = S && o->mu ? o->mu[l] : NULL;
        rc = attn_layer_load(m, l, &gqa);
        if (rc == AL_OK) rc = tmla_nope_as_rope(c, gqa);
        if (rc == AL_OK) rc = mlastrat_layer_kv_spectra(gqa, s, o, S, mu, &sk[k], &nk[k], &sv[k], &nv[k]);
        attn_layer_free(gqa);
    }
    int max_rank = 2 * R < nJ ? 2 * R : nJ, min_rank = R / 2 > 0 ? R / 2 : 1;
    if (rc == AL_OK)
        rc = mlastrat_alloc_kv((const double *const *)sk, nk, (const double *const *)sv, nv, L, R, min_rank, max_rank,
                               rk, rv);
    k = 0;
    for (int l = o->layer_lo; rc == AL_OK && l <= o->layer_hi; l = layersel_next(c, l + 1, o->layer_hi), k++)
        ranks[l] = rk[k] + rv[k];
    for (int i = 0; sk && sv && i < L; i++) { free(sk[i]); free(sv[i]); }
    free(sk); free(sv); free(nk); free(nv); free(rk); free(rv);
    return rc;
}

/* The per-layer ranks (n_layers): R everywhere, or CARE's allocation of n R. */
static int layer_ranks(Model *m, const TmlaOpts *o, const MlastratOpts *s, int nJ, int **ranks) {
    int n = m->cfg.n_layers, R = o->kv_rank == TMLA_FULL ? nJ : o->kv_rank;
    if (!(*ranks = al_calloc((size_t)n, sizeof **ranks, "ranks"))) return AL_ERR;
    for (int l = 0; l < n; l++) (*ranks)[l] = o->kv_rank;
    if (s->alloc != MLASTRAT_ALLOC_CARE) return AL_OK;
    int rc = alloc_layers(m, o, s, R, nJ, *ranks);
    if (rc) { free(*ranks); *ranks = NULL; }
    return rc;
}

/* A TmlaResult for m with o resolved (no layers yet). */
static TmlaResult *result_new(Model *m, const TmlaOpts *o, const MlastratOpts *s, int D, int nJ) {
    const ModelConfig *c = &m->cfg;
    TmlaResult *r = al_calloc(1, sizeof *r, "a conversion");
    if (!r) return NULL;
    r->src = m;
    r->src_path = al_strdup(m->path);
    r->opts = *o;
    r->opts.sigma = NULL;
    r->opts.mu = NULL;
    r->opts.rope_dim = D;
    r->opts.balance = s->kind == MLASTRAT_TRANSMLA && o->balance;   /* CARE and MHA2MLA never balance */
    mlastrat_label(s, r->opts.strategy, sizeof r->opts.strategy);
    for (int l = o->layer_lo; o->sigma && l <= o->layer_hi; l++) r->activation_stats |= o->sigma[l] != NULL;
    r->n_layers = c->n_layers;
    r->layers = al_calloc((size_t)c->n_layers, sizeof *r->layers, "converted layers");
    r->rep = al_calloc((size_t)c->n_layers, sizeof *r->rep, "conversion reports");
    if (!r->src_path || !r->layers || !r->rep) { tmla_result_free(r); return NULL; }
    int nK = c->n_kv_heads * cfg_d_qk(c) - D;
    r->head_dim = cfg_d_qk(c);
    r->v_dim = c->v_dim;
    r->rope_dim = D;
    r->qk_nope = nK > 0 ? cfg_d_qk(c) : 0;
    r->kv_rank = o->kv_rank == TMLA_FULL ? nJ : o->kv_rank;
    r->q_rank = o->q_rank;
    r->kv_before = cfg_kv_values(c);
    r->kv_after = (size_t)r->kv_rank + (size_t)D;
    return r;
}

int mlastrat_convert(Model *m, const TmlaOpts *opts, const MlastratOpts *s, TmlaResult **out) {
    *out = NULL;
    TmlaOpts o = *opts;
    int D = 0, nJ = 0, *ranks = NULL;
    if (o.qk_norm == TMLA_QKN_KEEP)       /* its layers were fold's: keep rebuilds keys in transmla.c only */
        return al_err("qk-norm keep runs with TransMLA's own conversion (convert mla kv-rank R qk-norm keep, no "
                      "strategy); the strategies take qk-norm fold or drop");
    if (resolve(m, &o, s, &D, &nJ) || layer_ranks(m, &o, s, nJ, &ranks)) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    TmlaResult *r = result_new(m, &o, s, D, nJ);
    int rc = r ? AL_OK : AL_ERR;
    size_t total = (size_t)layersel_count(c, o.layer_lo, o.layer_hi), done = 0;
    for (int l = o.layer_lo; rc == AL_OK && l <= o.layer_hi; l = layersel_next(c, l + 1, o.layer_hi)) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        AttnLayer *gqa = NULL;
        const double *S = o.sigma ? o.sigma[l] : NULL, *mu = S && o.mu ? o.mu[l] : NULL;
        r->rep[l].layer = l;
        rc = attn_layer_load(m, l, &gqa);
        if (rc == AL_OK) rc = tmla_nope_as_rope(c, gqa);
        if (rc == AL_OK) rc = mlastrat_convert_layer(gqa, s, &o, ranks[l], S, mu, &r->layers[l], &r->rep[l]);
        if (rc == AL_OK) {
            r->params_before += attn_layer_params(gqa);
            r->params_after += attn_layer_params(r->layers[l]);
        } else if (rc == AL_ERR)
            al_err_ctx("convert mla strategy %s: layer %d", mlastrat_kind_name(s->kind), l);
        attn_layer_free(gqa);
        al_progress("layer", ++done, total);
    }
    free(ranks);
    if (rc) { tmla_result_free(r); return rc; }
    *out = r;
    return AL_OK;
}

/* ================================================================ the table */

void mlastrat_table_free(MlastratTable *t) {
    if (!t) return;
    free(t->rows);
    free(t);
}

/* One row: strategy s at rank R converted on f's model, errors averaged, perplexity with the layers in. */
static int table_row(Forward *f, const MlastratTableOpts *to, const MlastratOpts *s, int R, MlastratRow *row) {
    Model *m = fwd_model(f);
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = R; o.rope_dim = to->rope_dim; o.freqfold = to->freqfold; o.compare_balance = false;
    o.layer_lo = to->layer_lo; o.layer_hi = to->layer_hi; o.sigma = to->sigma; o.mu = to->mu;
    o.eval_tokens = to->eval_tokens; if (to->seed) o.seed = to->seed;
    if (to->qk_norm) o.qk_norm = to->qk_norm;
    TmlaResult *r = NULL;
    int rc = mlastrat_convert(m, &o, s, &r);
    if (rc) return rc;
    *row = (MlastratRow){.kv_rank = r->kv_rank, .strat = *s, .rope_dim = r->rope_dim, .rank_min = 1 << 30};
    size_t n = 0;
    double kv = 0;
    AttnLayer *const *run = r->layers;                     /* as ppl runs it (to->run_layers) */
    if (to->run_layers) rc = to->run_layers(r, fwd_compute(f), &run);
    for (int l = 0; rc == AL_OK && l < r->n_layers; l++) {
        if (!r->layers[l]) continue;
        int k = r->layers[l]->kv_rank;
        row->rank_min = k < row->rank_min ? k : row->rank_min;
        row->rank_max = k > row->rank_max ? k : row->rank_max;
        row->score_err += r->rep[l].score_err;
        row->out_err += r->rep[l].out_err;
        kv += k + r->layers[l]->rope_dim;
        n++;
        rc = fwd_set_attn(f, l, run[l]);
    }
    if (n) { row->score_err /= (double)n; row->out_err /= (double)n; row->kv_values = kv / (double)n; }
    FwdPpl p;
    fwd_set_norm_eps(f, to->norm_eps ? to->norm_eps(r) : 0);
    if (rc == AL_OK) rc = fwd_ppl(f, to->ids, to->n_ids, to->seqlen, &p);
    if (rc == AL_OK) row->nll = p.nll;
    fwd_set_norm_eps(f, 0);
    fwd_clear_attn(f);
    tmla_result_free(r);
    return rc;
}

int mlastrat_table(Forward *f, const MlastratTableOpts *o, MlastratTable **out) {
    *out = NULL;
    if (!o->n_ranks || !o->n_strats) return al_err("the strategies table needs kv ranks and strategies");
    MlastratTable *t = al_calloc(1, sizeof *t, "a strategies table");
    int rc = t && (t->rows = al_calloc(o->n_ranks * o->n_strats, sizeof *t->rows, "rows")) ? AL_OK : AL_ERR;
    FwdPpl base;
    fwd_clear_attn(f);
    if (rc == AL_OK) rc = fwd_ppl(f, o->ids, o->n_ids, o->seqlen, &base);
    if (rc == AL_OK) { t->base_nll = base.nll; t->tokens = base.tokens; }
    size_t total = o->n_ranks * o->n_strats;
    for (size_t i = 0; rc == AL_OK && i < total; i++) {
        rc = table_row(f, o, &o->strats[i % o->n_strats], o->kv_ranks[i / o->n_strats], &t->rows[i]);
        if (rc == AL_OK) t->n++;
        al_progress("variant", i + 1, total);
    }
    fwd_clear_attn(f);
    if (rc) { mlastrat_table_free(t); return rc; }
    *out = t;
    return AL_OK;
}
