/* tpa.c -- Tensor Product Attention (seed 004): Table 1 accounting, the non-contextual TPA
 * re-factoring of GQA / MHA layers (forms a and b), the factored evaluator, the whole-model
 * conversion, and the attnlab-tpa loader and check (the export is in tpa_export.c). Owns the TpaFactor / TpaLayer /
 * TpaModel / TpaCheck objects it returns. The math is described in tpa.h. */
#define _GNU_SOURCE
#include "tpa.h"
#include "attn_stock_run.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyses.h"
#include "layersel.h"
#include "forward.h"
#include "rope.h"
#include "seeds.h"
#include "safetensors.h"

/* ================================================================ accounting (Table 1) */

static const char *const SCHEME_NAMES[TPA_SCHEME_COUNT] = {
    "MHA", "MQA", "GQA", "MLA", "TPA", "TPA-KVonly", "TPA-nonctx-A", "TPA-nonctx-B"};

const char *tpa_scheme_name(tpa_scheme s) {
    return s >= 0 && s < TPA_SCHEME_COUNT ? SCHEME_NAMES[s] : "?";
}

int tpa_scheme_parse(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < TPA_SCHEME_COUNT; i++)
        if (!strcasecmp(name, SCHEME_NAMES[i])) return i;
    static const struct { const char *alias; tpa_scheme s; } aliases[] = {
        {"kvonly", TPA_KVONLY}, {"tpa-kv", TPA_KVONLY}, {"nonctx-a", TPA_NONCTX_A}, {"nca", TPA_NONCTX_A},
        {"tpa-nca", TPA_NONCTX_A}, {"nonctx-b", TPA_NONCTX_B}, {"ncb", TPA_NONCTX_B}, {"tpa-ncb", TPA_NONCTX_B}};
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcasecmp(name, aliases[i].alias)) return aliases[i].s;
    return -1;
}

TpaDims tpa_dims_from_config(const ModelConfig *c) {
    TpaDims d = {0};
    d.d_model = (size_t)c->hidden;
    d.h = (size_t)c->n_heads;
    d.d_k = (size_t)cfg_d_qk(c);
    d.d_v = (size_t)c->v_dim;
    d.g = c->n_kv_heads > 0 ? (size_t)c->n_kv_heads : d.h;
    if (cfg_is_mla(c)) {
        d.d_c = (size_t)c->kv_lora_rank;
        d.d_cq = (size_t)c->q_lora_rank;
        d.d_hr = (size_t)c->qk_rope_dim;
        d.d_hn = (size_t)c->qk_nope_dim;
    } else {
        d.d_c = 4 * d.d_k;
        d.d_cq = 2 * d.d_c;
        d.d_hr = d.d_k / 2 ? d.d_k / 2 : 1;
        d.d_hn = d.d_k;
    }
    d.r_q = 6;
    d.r_k = d.r_v = 2;
    return d;
}

int tpa_dims_check(const TpaDims *d) {
    const struct { const char *name; size_t v; } need[] = {
        {"d_model", d->d_model}, {"heads", d->h}, {"head dim d_k", d->d_k}, {"value dim d_v", d->d_v},
        {"groups", d->g}, {"kv-lora d_c", d->d_c}, {"rope-dim d_h^R", d->d_hr}, {"nope dim d_h^N", d->d_hn},
        {"rq", d->r_q}, {"rk", d->r_k}, {"rv", d->r_v}};
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (need[i].v == 0) return al_err("KV-cache accounting: %s must be positive", need[i].name);
    if (d->g > d->h || d->h % d->g)
        return al_err("KV-cache accounting: groups %zu must divide the %zu query head%s", d->g, d->h, al_s(d->h));
    return AL_OK;
}

size_t tpa_kv_values(const TpaDims *d, tpa_scheme s) {
    size_t kv = d->d_k + d->d_v;
    switch (s) {
    case TPA_MHA: return d->h * kv;
    case TPA_MQA: return kv;
    case TPA_GQA: return d->g * kv;
    case TPA_MLA: return d->d_c + d->d_hr;
    case TPA_TPA:
    case TPA_KVONLY: return d->r_k * (d->h + d->d_k) + d->r_v * (d->h + d->d_v);
    case TPA_NONCTX_A: return d->r_k * d->d_k + d->r_v * d->d_v;
    case TPA_NONCTX_B: return (d->r_k + d->r_v) * d->h;
    default: return 0;
    }
}

size_t tpa_attn_params(const TpaDims *d, tpa_scheme s) {
    size_t D = d->d_model, h = d->h, dk = d->d_k, dv = d->d_v, out = h * dv * D;
    switch (s) {
    case TPA_MHA: return D * h * (2 * dk + 2 * dv);
    case TPA_MQA: return D * h * dk + D * (dk + dv) + out;
    case TPA_GQA: return D * h * dk + d->g * D * (dk + dv) + out;
    case TPA_MLA: {
        size_t q = d->d_cq ? d->d_cq * (D + h * d->d_hn + h * d->d_hr) : D * h * (d->d_hn + d->d_hr);
        return q + D * d->d_hr + d->d_c * (D + h * d->d_hn + h * dv) + out;
    }
    case TPA_TPA:
        return D * (d->r_q * (h + dk) + d->r_k * (h + dk) + d->r_v * (h + dv)) + out;
    case TPA_KVONLY: return D * (d->r_k * (h + dk) + d->r_v * (h + dv)) + D * h * dk + out;
    case TPA_NONCTX_A: return d->r_q * (D * dk + h) + d->r_k * (D * dk + h) + d->r_v * (D * dv + h) + out;
    case TPA_NONCTX_B: return d->r_q * (D * h + dk) + d->r_k * (D * h + dk) + d->r_v * (D * h + dv) + out;
    default: return 0;
    }
}

/* ================================================================ factors */

const char *tpa_form_name(tpa_form f) { return f == TPA_FORM_A ? "a" : "b"; }

void tpa_factor_free(TpaFactor *f) {
    if (!f) return;
    free(f->fixed);
    mat_free(f->ctx);
    free(f->bias);
    free(f->eig);
    memset(f, 0, sizeof *f);
}

size_t tpa_factor_cached(const TpaFactor *f) {
    return (size_t)f->R * (size_t)(f->form == TPA_FORM_A ? f->dh : f->G);
}

size_t tpa_factor_params(const TpaFactor *f) {
    size_t p = f->ctx ? f->ctx->rows * f->ctx->cols : 0;
    if (f->bias && f->ctx) p += f->ctx->cols;
    p += (size_t)f->R * (size_t)(f->form == TPA_FORM_A ? f->G : f->dh);
    return p;
}

/* Top eigenpairs of a symmetric n x n matrix C (row-major, overwritten by its eigenvectors):
 * eig (n) descending, and V (n, n) with column j the eigenvector of eig[j]. */
static int sym_eig_desc(double *C, int n, double *eig, double *V, const char *what) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            double s = 0.5 * (C[i * n + j] + C[j * n + i]);
            C[i * n + j] = C[j * n + i] = s;
        }
    double *w = al_malloc3((size_t)n, 1, sizeof(double), what);
    if (!w) return AL_ERR;
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, C, n, w);
    if (info != 0) {
        free(w);
        return al_err("LAPACKE_dsyevd failed (info %d) on the %d x %d Gram of %s", (int)info, n, n, what);
    }
    for (int j = 0; j < n; j++) {
        eig[j] = w[n - 1 - j] > 0 ? w[n - 1 - j] : 0;
        for (int i = 0; i < n; i++) V[i * n + j] = C[i * n + (n - 1 - j)];
    }
    free(w);
    return AL_OK;
}

/* Fraction of sum(eig) held by the first R values (1 for a zero spectrum). */
static double energy_kept(const double *eig, int n, int R) {
    double tot = 0, kept = 0;
    for (int j = 0; j < n; j++) {
        tot += eig[j];
        if (j < R) kept += eig[j];
    }
    return tot > 0 ? kept / tot : 1.0;
}

/* The working matrices of one factorization, in double. */
typedef struct {
    size_t D, G, d, n_in, nc;    /* inputs, heads, head dim, D (+ 1 with a bias), G d */
    int lim;                     /* the Gram's order: G (form a) or d_h (form b) */
    double *Wd;                  /* (n_in, nc) the weight, the bias as one more input row */
    double *S;                   /* (n_in, nc) blockdiag(Sigma, 1) Wd, or NULL without Sigma */
    double *Z;                   /* form a: (G, n_in d) the head unfolding of Wd */
    double *Gram, *Vec, *eig;    /* (lim, lim); (lim, lim) eigenvectors in columns; (lim) descending */
} TpaWork;

static void tpa_work_free(TpaWork *w) {
    free(w->Wd); free(w->S); free(w->Gram); free(w->Vec); free(w->eig); free(w->Z);
}

/* The factorization's arguments checked: W (rows, G dh) and R within 1..lim. */
static int tpa_factorize_check(const Mat *W, int G, int dh, tpa_form f, int R) {
    if (G <= 0 || dh <= 0 || !W || W->cols != (size_t)G * (size_t)dh)
        return al_err("TPA factorization: the weight (%zu x %zu) does not hold %d head%s of %d dims", W ? W->rows : 0,
                      W ? W->cols : 0, G, al_s(G), dh);
    int lim = f == TPA_FORM_A ? G : dh;
    if (R < 1 || R > lim)
        return al_err("TPA form %s: rank %d must be between 1 and %d (the %s)", tpa_form_name(f), R, lim,
                      f == TPA_FORM_A ? "KV heads: form a factors across the head axis" : "head dim: form b factors "
                                                                                          "across the d_h axis");
    return AL_OK;
}

/* w's sizes, buffers and Wd (with the bias row b) from W; S = blockdiag(Sigma, 1) Wd with Sigma. */
static int tpa_work_unfold(TpaWork *w, const Mat *W, const float *b, int G, int dh, tpa_form f,
                           const double *Sigma) {
    *w = (TpaWork){ .D = W->rows, .G = (size_t)G, .d = (size_t)dh, .lim = f == TPA_FORM_A ? G : dh };
    w->n_in = w->D + (b ? 1 : 0);
    w->nc = w->G * w->d;
    size_t D = w->D, n_in = w->n_in, nc = w->nc, lim = (size_t)w->lim;
    w->Wd = al_malloc3(n_in, nc, sizeof(double), "the TPA unfolding");
    w->S = Sigma ? al_malloc3(n_in, nc, sizeof(double), "the weighted TPA unfolding") : NULL;
    w->Gram = al_malloc3(lim, lim, sizeof(double), "the TPA Gram");
    w->Vec = al_malloc3(lim, lim, sizeof(double), "the TPA eigenvectors");
    w->eig = al_malloc3(lim, 1, sizeof(double), "the TPA eigenvalues");
    if (!(w->Wd && (w->S || !Sigma) && w->Gram && w->Vec && w->eig)) return AL_ERR;
    vec_f2d(W->data, D * nc, w->Wd);
    if (b) vec_f2d(b, nc, w->Wd + D * nc);
    if (Sigma) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)nc, (int)D, 1.0, Sigma, (int)D, w->Wd,
                    (int)nc, 0.0, w->S, (int)nc);
        if (b) memcpy(w->S + D * nc, w->Wd + D * nc, nc * sizeof(double));
    }
    return AL_OK;
}

/* w's Gram of the form's unfolding and its eigenpairs, descending: form a over the head axis
 * (Z (G, n_in d), Z[g, i d + e] = Wd[i, g d + e]; Gram = Z_W Z_Sᵀ), form b over the d_h axis
 * (Wd read as (n_in G, d) rows; Gram = Wdᵀ S). */
static int tpa_work_gram(TpaWork *w, tpa_form f) {
    size_t n_in = w->n_in, nc = w->nc, Gs = w->G, d = w->d;
    const double *Sx = w->S ? w->S : w->Wd;
    int G = (int)Gs, dh = (int)d;
    if (f == TPA_FORM_A) {
        double *ZS = NULL;
        w->Z = al_malloc3(Gs, n_in * d, sizeof(double), "the head unfolding");
        if (w->S) ZS = al_malloc3(Gs, n_in * d, sizeof(double), "the weighted head unfolding");
        if (!w->Z || (w->S && !ZS)) { free(ZS); return AL_ERR; }
        for (size_t i = 0; i < n_in; i++)
            for (size_t g = 0; g < Gs; g++) {
                memcpy(w->Z + g * n_in * d + i * d, w->Wd + i * nc + g * d, d * sizeof(double));
                if (ZS) memcpy(ZS + g * n_in * d + i * d, Sx + i * nc + g * d, d * sizeof(double));
            }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, G, G, (int)(n_in * d), 1.0, w->Z, (int)(n_in * d),
                    ZS ? ZS : w->Z, (int)(n_in * d), 0.0, w->Gram, G);
        free(ZS);
    } else {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dh, dh, (int)(n_in * Gs), 1.0, w->Wd, dh, Sx, dh, 0.0,
                    w->Gram, dh);
    }
    return sym_eig_desc(w->Gram, w->lim, w->eig, w->Vec, f == TPA_FORM_A ? "the head unfolding" : "the d_h unfolding");
}

/* Form a's cached token-factor maps: ctxZ (R, n_in d) = U_Rᵀ Z, row r W_r (and c_r) unfolded,
 * into out->ctx (D, R d) and out->bias (R, d) with a bias. */
static int tpa_ctx_form_a(const TpaWork *w, bool bias, TpaFactor *out) {
    size_t D = w->D, n_in = w->n_in, d = w->d, Rs = (size_t)out->R;
    double *P = al_malloc3(Rs, n_in * d, sizeof(double), "the token-factor maps");
    if (!P) return AL_ERR;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out->R, (int)(n_in * d), (int)w->G, 1.0, w->Vec, (int)w->G,
                w->Z, (int)(n_in * d), 0.0, P, (int)(n_in * d));
    int rc = (out->ctx = mat_new(D, Rs * d)) ? AL_OK : AL_ERR;
    for (size_t r = 0; r < Rs && !rc; r++)
        for (size_t i = 0; i < D; i++)
            for (size_t e = 0; e < d; e++) out->ctx->data[i * Rs * d + r * d + e] = (float)P[r * n_in * d + i * d + e];
    if (!rc && bias && !(out->bias = al_malloc3(Rs, d, sizeof(float), "the token-factor biases"))) rc = AL_ERR;
    for (size_t r = 0; r < Rs && !rc && bias; r++)
        for (size_t e = 0; e < d; e++) out->bias[r * d + e] = (float)P[r * n_in * d + D * d + e];
    free(P);
    return rc;
}

/* Form b's cached head-factor maps: P (n_in G, R) = Wd (as (n_in G, d)) V_R, P[i G + g, r] =
 * a_r(row i)[g], into out->ctx (D, R G) and out->bias (R, G) with a bias. */
static int tpa_ctx_form_b(const TpaWork *w, bool bias, TpaFactor *out) {
    size_t D = w->D, n_in = w->n_in, Gs = w->G, Rs = (size_t)out->R;
    int R = out->R, dh = (int)w->d;
    double *P = al_malloc3(n_in * Gs, Rs, sizeof(double), "the head-factor maps");
    if (!P) return AL_ERR;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(n_in * Gs), R, dh, 1.0, w->Wd, dh, w->Vec, dh, 0.0, P, R);
    int rc = (out->ctx = mat_new(D, Rs * Gs)) ? AL_OK : AL_ERR;
    for (size_t i = 0; i < D && !rc; i++)
        for (size_t g = 0; g < Gs; g++)
            for (size_t r = 0; r < Rs; r++) out->ctx->data[i * Rs * Gs + r * Gs + g] = (float)P[(i * Gs + g) * Rs + r];
    if (!rc && bias && !(out->bias = al_malloc3(Rs, Gs, sizeof(float), "the head-factor biases"))) rc = AL_ERR;
    for (size_t g = 0; g < Gs && !rc && bias; g++)
        for (size_t r = 0; r < Rs; r++) out->bias[r * Gs + g] = (float)P[(D * Gs + g) * Rs + r];
    free(P);
    return rc;
}

int tpa_factorize(const Mat *W, const float *b, int G, int dh, tpa_form f, int R, const double *Sigma,
                  TpaFactor *out) {
    memset(out, 0, sizeof *out);
    int rc = tpa_factorize_check(W, G, dh, f, R);
    if (rc) return rc;
    TpaWork w;
    rc = tpa_work_unfold(&w, W, b, G, dh, f, Sigma);
    if (!rc) rc = tpa_work_gram(&w, f);
    size_t Rs = (size_t)R, lim = (size_t)w.lim;
    if (!rc) {
        *out = (TpaFactor){ .form = f, .R = R, .G = G, .dh = dh, .hidden = (int)w.D, .n_eig = w.lim,
                            .energy = energy_kept(w.eig, w.lim, R) };
        if (!(out->fixed = al_malloc3(Rs, lim, sizeof(float), "the fixed TPA factors"))) rc = AL_ERR;
    }
    for (size_t r = 0; r < Rs && !rc; r++)
        for (size_t j = 0; j < lim; j++) out->fixed[r * lim + j] = (float)((double)R * w.Vec[j * lim + r]);
    if (!rc) rc = f == TPA_FORM_A ? tpa_ctx_form_a(&w, b != NULL, out) : tpa_ctx_form_b(&w, b != NULL, out);
    if (!rc) { out->eig = w.eig; w.eig = NULL; }
    tpa_work_free(&w);
    if (rc) tpa_factor_free(out);
    return rc;
}

int tpa_factor_dense(const TpaFactor *f, Mat **W_hat, float **b_hat) {
    *W_hat = NULL;
    *b_hat = NULL;
    size_t D = (size_t)f->hidden, G = (size_t)f->G, d = (size_t)f->dh, R = (size_t)f->R, nc = G * d;
    size_t n_in = D + (f->bias ? 1 : 0);
    double invR = 1.0 / (double)f->R;
    /* The contextual maps with the bias row, in double: form a (n_in, R d); form b P (n_in G, R). */
    double *C = al_malloc3(n_in, f->form == TPA_FORM_A ? R * d : R * G, sizeof(double), "the TPA maps");
    double *F = al_malloc3(R, f->form == TPA_FORM_A ? G : d, sizeof(double), "the fixed TPA factors");
    double *Y = al_malloc3(n_in, nc, sizeof(double), "the materialized weights");
    double *T = f->form == TPA_FORM_A ? al_malloc3(n_in * d, G, sizeof(double), "the materialized weights") : NULL;
    int rc = C && F && Y && (T || f->form != TPA_FORM_A) ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        size_t cw = f->ctx->cols;
        vec_f2d(f->ctx->data, D * cw, C);
        if (f->bias) vec_f2d(f->bias, cw, C + D * cw);
        vec_f2d(f->fixed, R * (f->form == TPA_FORM_A ? G : d), F);
        if (f->form == TPA_FORM_A) {
            /* C read as (n_in, R, d); T (n_in d, G) with T[(i, e), g] = (1/R) sum_r C[i, r, e] a_r[g]. */
            double *Cp = al_malloc3(n_in * d, R, sizeof(double), "the token-factor maps");
            if (!Cp) rc = AL_ERR;
            else {
                for (size_t i = 0; i < n_in; i++)
                    for (size_t r = 0; r < R; r++)
                        for (size_t e = 0; e < d; e++) Cp[(i * d + e) * R + r] = C[i * R * d + r * d + e];
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(n_in * d), (int)G, (int)R, invR, Cp, (int)R,
                            F, (int)G, 0.0, T, (int)G);
                for (size_t i = 0; i < n_in; i++)
                    for (size_t g = 0; g < G; g++)
                        for (size_t e = 0; e < d; e++) Y[i * nc + g * d + e] = T[(i * d + e) * G + g];
                free(Cp);
            }
        } else {
            /* P (n_in G, R) with P[i G + g, r] = C[i, r G + g]; Y (as (n_in G, d)) = (1/R) P B. */
            double *Pp = al_malloc3(n_in * G, R, sizeof(double), "the head-factor maps");
            if (!Pp) rc = AL_ERR;
            else {
                for (size_t i = 0; i < n_in; i++)
                    for (size_t g = 0; g < G; g++)
                        for (size_t r = 0; r < R; r++) Pp[(i * G + g) * R + r] = C[i * R * G + r * G + g];
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(n_in * G), (int)d, (int)R, invR, Pp, (int)R,
                            F, (int)d, 0.0, Y, (int)d);
                free(Pp);
            }
        }
    }
    if (rc == AL_OK && !(*W_hat = mat_new(D, nc))) rc = AL_ERR;
    if (rc == AL_OK) {
        vec_d2f(Y, D * nc, (*W_hat)->data);
        if (f->bias) {
            if (!(*b_hat = al_malloc3(nc, 1, sizeof(float), "the materialized bias"))) rc = AL_ERR;
            else vec_d2f(Y + D * nc, nc, *b_hat);
        }
    }
    free(C); free(F); free(Y); free(T);
    if (rc) { mat_free(*W_hat); *W_hat = NULL; }
    return rc;
}

/* ================================================================ one layer */

void tpa_layer_free(TpaLayer *l) {
    if (!l) return;
    attn_layer_free(l->dense);
    tpa_factor_free(&l->K);
    tpa_factor_free(&l->V);
    free(l);
}

/* Replaces dense's W_K / b_K (which = 0) or W_V / b_V (1) by the materialized factor f. */
static int set_dense(AttnLayer *dense, int which, const TpaFactor *f) {
    Mat *W = NULL;
    float *b = NULL;
    if (tpa_factor_dense(f, &W, &b)) return AL_ERR;
    Mat **pW = which ? &dense->W_V : &dense->W_K;
    float **pb = which ? &dense->b_V : &dense->b_K;
    mat_free(*pW);
    free(*pb);
    *pW = W;
    *pb = b;
    return AL_OK;
}

static void report_nan(TpaLayerReport *r) {
    r->k_err = r->v_err = r->score_err = r->out_err = NAN;
}

int tpa_layer_convert(const AttnLayer *src, tpa_form f, int Rk, int Rv, const double *Sigma, TpaLayer **out) {
    *out = NULL;
    if (src->kind != ATTN_GQA)
        return al_err("TPA conversion needs a GQA / MHA layer: an MLA layer already caches a shared latent");
    if (attn_layer_validate(src)) return AL_ERR;
    TpaLayer *l = al_calloc(1, sizeof *l, "a TPA layer");
    if (!l) return AL_ERR;
    int rc = tpa_factorize(src->W_K, src->b_K, src->n_kv_heads, src->head_dim, f, Rk, Sigma, &l->K);
    if (rc == AL_OK) rc = tpa_factorize(src->W_V, src->b_V, src->n_kv_heads, src->v_dim, f, Rv, Sigma, &l->V);
    if (rc == AL_OK && !(l->dense = attn_layer_copy(src))) rc = AL_ERR;
    if (rc == AL_OK) rc = set_dense(l->dense, 0, &l->K);
    if (rc == AL_OK) rc = set_dense(l->dense, 1, &l->V);
    if (rc) { tpa_layer_free(l); return rc; }
    l->rep.k_energy = l->K.energy;
    l->rep.v_energy = l->V.energy;
    report_nan(&l->rep);
    *out = l;
    return AL_OK;
}

/* ================================================================ the factored evaluator */

/* The per-token tensors (T, G dh) of a factor evaluated on X, as TPA computes them: form a caches
 * b_r(x_t) (rotated to pos[t] before caching when rope); form b caches a_r(x_t) and rotates the
 * fixed b_r to pos[t] at use. Returns the reconstructed (rotated) tensors in Y. */
static int factor_apply(const TpaFactor *f, const Mat *X, const int *pos, const AttnLayer *L, bool rope, float *Y) {
    size_t T = X->rows, D = X->cols, G = (size_t)f->G, d = (size_t)f->dh, R = (size_t)f->R;
    size_t cw = f->ctx->cols;
    float *cache = al_malloc3(T, cw, sizeof(float), "the TPA cache");
    float *Bt = f->form == TPA_FORM_B && rope ? al_malloc3(R, d, sizeof(float), "rotated token factors") : NULL;
    if (!cache || (f->form == TPA_FORM_B && rope && !Bt)) { free(cache); free(Bt); return AL_ERR; }
    float invR = 1.0f / (float)f->R;
    attn_linear(X->data, T, D, f->ctx, f->bias, cache);
    for (size_t t = 0; t < T; t++) {
        float *c = cache + t * cw, *y = Y + t * G * d;
        if (f->form == TPA_FORM_A) {
            /* cache row: R token factors b_r (d each), rotated once (eq. 3.6); K_t = (1/R) Aᵀ B. */
            if (rope)
                rope_rotate_rows(c, R, d, L->rope_dim, L->rope, L->inv_freq, (double)pos[t], 1.0);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)G, (int)d, (int)R, invR, f->fixed, (int)G, c, (int)d,
                        0.0f, y, (int)d);
        } else {
            /* cache row: R head factors a_r (G each); the fixed b_r turned to pos[t]; K_t = (1/R) A_tᵀ B_t. */
            const float *B = f->fixed;
            if (rope) {
                memcpy(Bt, f->fixed, R * d * sizeof(float));
                rope_rotate_rows(Bt, R, d, L->rope_dim, L->rope, L->inv_freq, (double)pos[t], 1.0);
                B = Bt;
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)G, (int)d, (int)R, invR, c, (int)G, B, (int)d, 0.0f,
                        y, (int)d);
        }
    }
    free(cache);
    free(Bt);
    return AL_OK;
}

int tpa_eval(const TpaLayer *l, const Mat *X, const int *pos, bool want_scores, AttnOut **out) {
    *out = NULL;
    const AttnLayer *L = l->dense;
    if (X->cols != (size_t)L->hidden)
        return al_err("attention input has %zu column%s but the layer's hidden size is %d", X->cols, al_s(X->cols), L->hidden);
    size_t T = X->rows, H = (size_t)L->n_heads, G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim;
    size_t dv = (size_t)L->v_dim;
    if (T == 0) return al_err("attention input has no tokens");
    bool rope = L->rope_dim > 0;
    float *Q = al_malloc3(T, H * d, sizeof(float), "queries");
    float *K = al_malloc3(T, G * d, sizeof(float), "keys");
    float *V = al_malloc3(T, G * dv, sizeof(float), "values");
    int rc = Q && K && V ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = factor_apply(&l->K, X, pos, L, rope, K);     /* keys and values from the TPA factors */
    if (rc == AL_OK) rc = factor_apply(&l->V, X, pos, L, false, V);
    if (rc == AL_OK) {
        attn_linear(X->data, T, X->cols, L->W_Q, L->b_Q, Q);
        if (rope)
            for (size_t t = 0; t < T; t++)
                rope_rotate_rows(Q + t * H * d, H, d, L->rope_dim, L->rope, L->inv_freq, (double)pos[t], 1.0);
        rc = attn_attend(L, T, Q, K, V, want_scores, out);
    }
    free(Q); free(K); free(V);
    return rc;
}

/* Relative error of X W2 + b2 against X W1 + b1 (T x cols). */
static int proj_err(const Mat *X, const Mat *W1, const float *b1, const Mat *W2, const float *b2, double *err) {
    size_t T = X->rows, n = W1->cols;
    float *A = al_malloc3(T, n, sizeof(float), "projections");
    float *B = al_malloc3(T, n, sizeof(float), "projections");
    if (!A || !B) { free(A); free(B); return AL_ERR; }
    attn_linear(X->data, T, X->cols, W1, b1, A);
    attn_linear(X->data, T, X->cols, W2, b2, B);
    *err = vec_rel_err(A, B, T * n);
    free(A);
    free(B);
    return AL_OK;
}

Mat *tpa_random_input(size_t T, int D, uint64_t seed, const double *Sigma) {
    Mat *Z = attn_random_input(T, D, seed);
    if (!Z || !Sigma) return Z;
    size_t n = (size_t)D;
    double *Lc = al_malloc3(n, n, sizeof(double), "a Cholesky factor");
    float *Lf = al_malloc3(n, n, sizeof(float), "a Cholesky factor");
    Mat *X = mat_new(T, n);
    int rc = Lc && Lf && X ? AL_OK : AL_ERR;
    double tr = 0;
    for (size_t i = 0; i < n; i++) tr += Sigma[i * n + i];
    for (double ridge = 0; rc == AL_OK; ridge = ridge ? ridge * 100 : 1e-12 * (tr > 0 ? tr / (double)n : 1)) {
        memcpy(Lc, Sigma, n * n * sizeof(double));
        for (size_t i = 0; i < n; i++) Lc[i * n + i] += ridge;
        lapack_int info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, Lc, (lapack_int)n);
        if (info == 0) break;
        if (info < 0 || ridge > 1e-2 * (tr > 0 ? tr / (double)n : 1))
            rc = al_err("LAPACKE_dpotrf failed (info %d) on the %zu x %zu input second moment", (int)info, n, n);
    }
    if (rc == AL_OK) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) Lf[i * n + j] = j <= i ? (float)Lc[i * n + j] : 0.0f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)n, (int)n, 1.0f, Z->data, (int)n, Lf, (int)n,
                    0.0f, X->data, (int)n);
    }
    free(Lc);
    free(Lf);
    mat_free(Z);
    if (rc) { mat_free(X); return NULL; }
    return X;
}

int tpa_layer_report(TpaLayer *l, const AttnLayer *src, size_t T, uint64_t seed, const double *Sigma) {
    if (T == 0) T = 64;
    Mat *X = tpa_random_input(T, src->hidden, seed, Sigma);
    int *pos = al_malloc3(T, 1, sizeof(int), "positions");
    AttnOut *a = NULL, *b = NULL;
    int rc = X && pos ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        for (size_t t = 0; t < T; t++) pos[t] = (int)t;
        rc = proj_err(X, src->W_K, src->b_K, l->dense->W_K, l->dense->b_K, &l->rep.k_err);
    }
    if (rc == AL_OK) rc = proj_err(X, src->W_V, src->b_V, l->dense->W_V, l->dense->b_V, &l->rep.v_err);
    if (rc == AL_OK) rc = attn_eval(src, X, pos, true, &a);
    if (rc == AL_OK) rc = tpa_eval(l, X, pos, true, &b);
    if (rc == AL_OK) attn_rel_err(a, b, &l->rep.score_err, &l->rep.out_err);
    attn_out_free(a);
    attn_out_free(b);
    mat_free(X);
    free(pos);
    return rc;
}

/* ================================================================ whole model */

TpaOpts tpa_opts_default(void) {
    TpaOpts o = {.form = TPA_FORM_A, .layer_lo = 0, .layer_hi = -1, .eval_tokens = 64, .seed = AL_SEED_TPA_EVAL};
    return o;
}

void tpa_model_free(TpaModel *t) {
    if (!t) return;
    for (int l = 0; t->layers && l < t->n_layers; l++) tpa_layer_free(t->layers[l]);
    free(t->layers);
    free(t->src_path);
    free(t->src_name);
    free(t->dir);
    ci_free(&t->check_in);
    free(t);
}

int tpa_resolve_opts(const Model *m, TpaOpts *o) {
    const ModelConfig *c = &m->cfg;
    const char *name = m->name ? m->name : m->path;
    if (analysis_check(m, AN_CONVERT_TPA)) return AL_ERR;
    int G = c->n_kv_heads, d = cfg_d_qk(c), dv = c->v_dim;
    if (o->form != TPA_FORM_A && o->form != TPA_FORM_B) return al_err("TPA form must be a or b");
    int lim_k = o->form == TPA_FORM_A ? G : d, lim_v = o->form == TPA_FORM_A ? G : dv;
    if (o->k_rank == 0) o->k_rank = lim_k;
    if (o->v_rank == 0) o->v_rank = lim_v;
    const char *axis = o->form == TPA_FORM_A ? "KV heads (form a factors across the head axis)"
                                             : "head dims (form b factors across the d_h axis)";
    if (o->k_rank < 1 || o->k_rank > lim_k)
        return al_err("k-rank %d: %s has %d %s, so give 1..%d (%d reproduces the keys exactly)", o->k_rank, name, lim_k,
                      axis, lim_k, lim_k);
    if (o->v_rank < 1 || o->v_rank > lim_v)
        return al_err("v-rank %d: %s has %d %s, so give 1..%d (%d reproduces the values exactly)", o->v_rank, name, lim_v,
                      axis, lim_v, lim_v);
    if (o->layer_hi < 0 || o->layer_hi >= c->n_layers) o->layer_hi = c->n_layers - 1;
    if (o->layer_lo < 0 || o->layer_lo > o->layer_hi)
        return al_err("layers %d-%d: %s has layers 0-%d", o->layer_lo, o->layer_hi, name, c->n_layers - 1);
    /* a hybrid's linear-attention layers have no KV cache: its attention layers only */
    if (layersel_range(c, "convert tpa", &o->layer_lo, &o->layer_hi, NULL, 0)) return AL_ERR;
    if (o->eval_tokens == 0) o->eval_tokens = 64;
    if (o->seed == 0) o->seed = AL_SEED_TPA_EVAL;
    return AL_OK;
}

/* True when the ranks reproduce the model in form f. */
static bool ranks_exact(tpa_form f, int rk, int rv, int G, int d, int dv) {
    return f == TPA_FORM_A ? rk == G && rv == G : rk == d && rv == dv;
}

/* Attention parameters of the source layer minus its K/V projections plus the two factors. */
static size_t params_converted(const AttnLayer *src, const TpaLayer *l) {
    size_t kv = src->W_K->rows * src->W_K->cols + src->W_V->rows * src->W_V->cols;
    if (src->b_K) kv += src->W_K->cols;
    if (src->b_V) kv += src->W_V->cols;
    return attn_layer_params(src) - kv + tpa_factor_params(&l->K) + tpa_factor_params(&l->V);
}

int tpa_convert(Model *m, const TpaOpts *opts, TpaModel **out) {
    *out = NULL;
    TpaOpts o = *opts;
    if (tpa_resolve_opts(m, &o)) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    TpaModel *t = al_calloc(1, sizeof *t, "a TPA conversion");
    if (!t) return AL_ERR;
    t->src = m;
    t->n_layers = c->n_layers;
    t->hidden = c->hidden;
    t->n_heads = c->n_heads;
    t->n_kv_heads = c->n_kv_heads;
    t->head_dim = cfg_d_qk(c);
    t->v_dim = c->v_dim;
    t->kv_before = cfg_kv_values(c);
    t->exact = ranks_exact(o.form, o.k_rank, o.v_rank, t->n_kv_heads, t->head_dim, t->v_dim);
    t->src_path = al_strdup(m->path ? m->path : "");
    t->src_name = al_strdup(m->name ? m->name : "");
    t->layers = al_calloc((size_t)t->n_layers, sizeof *t->layers, "the TPA layers");
    int rc = t->src_path && t->src_name && t->layers ? AL_OK : AL_ERR;
    int n = layersel_count(c, o.layer_lo, o.layer_hi), i = 0;
    for (int l = o.layer_lo; rc == AL_OK && l <= o.layer_hi; l = layersel_next(c, l + 1, o.layer_hi)) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        const double *Sigma = o.sigma ? o.sigma[l] : NULL;
        if (Sigma) t->activation_stats = true;
        AttnLayer *src = NULL;
        rc = attn_layer_load(m, l, &src);
        if (rc == AL_OK) rc = tpa_layer_convert(src, o.form, o.k_rank, o.v_rank, Sigma, &t->layers[l]);
        if (rc == AL_OK) {
            t->layers[l]->rep.layer = l;
            rc = tpa_layer_report(t->layers[l], src, o.eval_tokens, o.seed + (uint64_t)l, Sigma);
        }
        if (rc == AL_OK && l == o.layer_lo) {
            t->params_before = attn_layer_params(src);
            t->params_after = params_converted(src, t->layers[l]);
            t->kv_after = tpa_factor_cached(&t->layers[l]->K) + tpa_factor_cached(&t->layers[l]->V);
        }
        attn_layer_free(src);
        if (rc) al_err_ctx("layer %d", l);
        al_progress("layer", (size_t)++i, (size_t)n);
    }
    if (rc) { tpa_model_free(t); return rc; }
    o.sigma = NULL;
    t->opts = o;
    *out = t;
    return AL_OK;
}

/* ================================================================ load */

bool tpa_is_export(const char *dir) {
    char *p = al_asprintf("%s/%s", dir, TPA_MANIFEST);
    struct stat st;
    bool ok = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* Tensor `name` of f as float32 (rows, cols) (a 1-D tensor is 1 x n). Missing: NULL, AL_OK when
 * optional, else an error naming it. */
static int read_tensor(const st_file *f, const char *name, bool required, Mat **out) {
    *out = NULL;
    const st_entry *e = st_find(f, name);
    if (!e) return required ? al_err("%s: tensor '%s' is missing", st_path(f), name) : AL_OK;
    if (e->ndim < 1 || e->ndim > 2) return al_err("%s: tensor '%s' must have 1 or 2 dims", st_path(f), name);
    size_t rows = e->ndim == 2 ? e->shape[0] : 1, cols = e->shape[e->ndim - 1];
    Mat *m = mat_new(rows, cols);
    if (!m) return AL_ERR;
    if (dt_to_f32(e->dtype, st_data(f, e), rows * cols, m->data)) {
        mat_free(m);
        return al_err_ctx("%s: tensor '%s'", st_path(f), name);
    }
    *out = m;
    return AL_OK;
}

/* Checks a loaded matrix's shape. */
static int want_shape(const st_file *f, const char *name, const Mat *m, size_t rows, size_t cols) {
    if (m->rows * m->cols == rows * cols && (m->rows == rows || rows == 1 || m->rows == 1)) return AL_OK;
    return al_err("%s: tensor '%s' is %zu x %zu but the manifest's dims need %zu x %zu", st_path(f), name, m->rows,
                  m->cols, rows, cols);
}

/* Takes a 1-D float vector out of a loaded (1, n) matrix. */
static float *take_vec(Mat *m) {
    if (!m) return NULL;
    float *v = m->data;
    m->data = NULL;
    mat_free(m);
    return v;
}

/* Loads one factor ("layers.L.k") with head axis G and token axis dh. */
static int load_factor(const st_file *f, const char *prefix, tpa_form form, int G, int dh, int hidden, TpaFactor *out) {
    memset(out, 0, sizeof *out);
    char name[128];
    Mat *fixed = NULL, *bias = NULL;
    snprintf(name, sizeof name, "%s.fixed", prefix);
    int rc = read_tensor(f, name, true, &fixed);
    int lim = form == TPA_FORM_A ? G : dh;
    if (rc == AL_OK && (fixed->cols != (size_t)lim || fixed->rows < 1 || fixed->rows > (size_t)lim))
        rc = al_err("%s: tensor '%s' is %zu x %zu: form %s needs R x %d with 1 <= R <= %d", st_path(f), name,
                    fixed->rows, fixed->cols, tpa_form_name(form), lim, lim);
    if (rc) { mat_free(fixed); return rc; }
    out->form = form;
    out->R = (int)fixed->rows;
    out->G = G;
    out->dh = dh;
    out->hidden = hidden;
    out->energy = NAN;
    size_t cw = (size_t)out->R * (size_t)(form == TPA_FORM_A ? dh : G);
    out->fixed = take_vec(fixed);
    snprintf(name, sizeof name, "%s.ctx.weight", prefix);
    rc = read_tensor(f, name, true, &out->ctx);
    if (rc == AL_OK && (out->ctx->rows != (size_t)hidden || out->ctx->cols != cw))
        rc = want_shape(f, name, out->ctx, (size_t)hidden, cw);
    snprintf(name, sizeof name, "%s.ctx.bias", prefix);
    if (rc == AL_OK) rc = read_tensor(f, name, false, &bias);
    if (rc == AL_OK && bias && bias->rows * bias->cols != cw) rc = want_shape(f, name, bias, 1, cw);
    if (rc == AL_OK) out->bias = take_vec(bias);
    else mat_free(bias);
    if (rc) tpa_factor_free(out);
    return rc;
}

/* Integer member of a JSON object, or an error naming it. */
static int json_int(const cJSON *o, const char *key, const char *where, int *v) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it)) return al_err("%s: \"%s\" is missing or not a number", where, key);
    *v = (int)it->valuedouble;
    return AL_OK;
}

static double json_get_num(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : NAN;
}

/* What a manifest says about every layer beside the TpaModel's own fields. */
typedef struct {
    int rope_dim;            /* rotary dims of each head (0: no RoPE) */
    rope_layout layout;      /* their pairing (ROPE_NONE without RoPE) */
    double scale;            /* the softmax scale */
} TpaManifest;

/* Layer l's Q and O weights and biases (layers.l.q / .o) into L, checked against t's dims. */
static int load_dense_qo(const st_file *f, const TpaModel *t, int l, AttnLayer *L) {
    char name[128];
    size_t D = (size_t)t->hidden, qc = (size_t)t->n_heads * (size_t)t->head_dim;
    size_t oc = (size_t)t->n_heads * (size_t)t->v_dim;
    Mat *m = NULL;
    snprintf(name, sizeof name, "layers.%d.q.weight", l);
    int rc = read_tensor(f, name, true, &L->W_Q);
    if (rc == AL_OK) rc = want_shape(f, name, L->W_Q, D, qc);
    snprintf(name, sizeof name, "layers.%d.q.bias", l);
    if (rc == AL_OK && (rc = read_tensor(f, name, false, &m)) == AL_OK && m) {
        rc = want_shape(f, name, m, 1, qc);
        L->b_Q = take_vec(m);
    }
    snprintf(name, sizeof name, "layers.%d.o.weight", l);
    if (rc == AL_OK) rc = read_tensor(f, name, true, &L->W_O);
    if (rc == AL_OK) rc = want_shape(f, name, L->W_O, oc, D);
    snprintf(name, sizeof name, "layers.%d.o.bias", l);
    m = NULL;
    if (rc == AL_OK && (rc = read_tensor(f, name, false, &m)) == AL_OK && m) {
        rc = want_shape(f, name, m, 1, D);
        L->b_O = take_vec(m);
    }
    return rc;
}

/* Layer l's RoPE frequencies (layers.l.rope.inv_freq: F64, rope_dim / 2 values) into L->inv_freq. */
static int load_inv_freq(const st_file *f, int l, int rope_dim, AttnLayer *L) {
    char name[128];
    snprintf(name, sizeof name, "layers.%d.rope.inv_freq", l);
    const st_entry *e = st_find(f, name);
    if (!e || e->dtype != DT_F64 || st_numel(e) != (size_t)rope_dim / 2)
        return al_err("%s: tensor '%s' must be F64 with %d value%s", st_path(f), name, rope_dim / 2, al_s(rope_dim / 2));
    if (!(L->inv_freq = al_malloc3((size_t)rope_dim / 2, 1, sizeof(double), "RoPE frequencies"))) return AL_ERR;
    memcpy(L->inv_freq, st_data(f, e), (size_t)rope_dim / 2 * sizeof(double));
    return AL_OK;
}

/* Builds layer l from the factors file: its dense Q / O and RoPE, the K and V factors, and the
 * dense K / V they reproduce. */
static int load_layer(const st_file *f, const TpaModel *t, const TpaManifest *h, int l, TpaLayer **out) {
    *out = NULL;
    char name[128];
    TpaLayer *tl = al_calloc(1, sizeof *tl, "a TPA layer");
    AttnLayer *L = attn_layer_new(ATTN_GQA);
    int rc = tl && L ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        tl->dense = L;
        L->hidden = t->hidden;
        L->n_heads = t->n_heads;
        L->n_kv_heads = t->n_kv_heads;
        L->head_dim = t->head_dim;
        L->v_dim = t->v_dim;
        L->rope = h->layout;
        L->rope_dim = h->rope_dim;
        L->scale = h->scale;
        rc = load_dense_qo(f, t, l, L);
        if (rc == AL_OK && h->rope_dim > 0) rc = load_inv_freq(f, l, h->rope_dim, L);
    }
    tpa_form form = t->opts.form;
    snprintf(name, sizeof name, "layers.%d.k", l);
    if (rc == AL_OK) rc = load_factor(f, name, form, t->n_kv_heads, t->head_dim, t->hidden, &tl->K);
    snprintf(name, sizeof name, "layers.%d.v", l);
    if (rc == AL_OK) rc = load_factor(f, name, form, t->n_kv_heads, t->v_dim, t->hidden, &tl->V);
    if (rc == AL_OK) rc = set_dense(L, 0, &tl->K);
    if (rc == AL_OK) rc = set_dense(L, 1, &tl->V);
    if (rc == AL_OK) rc = attn_layer_validate(L);
    if (rc) {
        if (tl) tpa_layer_free(tl);
        else attn_layer_free(L);
        return rc;
    }
    report_nan(&tl->rep);
    tl->rep.layer = l;
    *out = tl;
    return AL_OK;
}

/* The manifest at mpath parsed into *root (the caller's, cJSON_Delete), checked to be a TPA export
 * of the version this attnlab reads. */
static int manifest_read(const char *mpath, cJSON **root) {
    char *text = mpath ? al_read_file_max(mpath, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    if (!text) return AL_ERR;
    *root = cJSON_Parse(text);
    free(text);
    if (!*root) return al_err("%s: not valid JSON", mpath);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(*root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, TPA_FORMAT))
        return al_err("%s: \"format\" is not \"%s\": not a TPA export", mpath, TPA_FORMAT);
    int version = 0, rc = json_int(*root, "version", mpath, &version);
    if (rc) return rc;
    if (version != TPA_FORMAT_VERSION)
        return al_err("%s: format version %d; this attnlab reads version %d", mpath, version, TPA_FORMAT_VERSION);
    return AL_OK;
}

/* The form, dims and ranks of the manifest into t (t->opts: the defaults, then those), the
 * rotary dims into h->rope_dim; the dims checked against each other. */
static int manifest_dims(const cJSON *root, const char *mpath, TpaModel *t, TpaManifest *h) {
    int rc;
    t->opts = tpa_opts_default();
    const cJSON *form = cJSON_GetObjectItemCaseSensitive(root, "form");
    if (!cJSON_IsString(form) || (strcmp(form->valuestring, "a") && strcmp(form->valuestring, "b")))
        return al_err("%s: \"form\" must be \"a\" or \"b\"", mpath);
    t->opts.form = form->valuestring[0] == 'a' ? TPA_FORM_A : TPA_FORM_B;
    if ((rc = json_int(root, "num_hidden_layers", mpath, &t->n_layers)) ||
        (rc = json_int(root, "hidden_size", mpath, &t->hidden)) ||
        (rc = json_int(root, "num_attention_heads", mpath, &t->n_heads)) ||
        (rc = json_int(root, "num_key_value_heads", mpath, &t->n_kv_heads)) ||
        (rc = json_int(root, "head_dim", mpath, &t->head_dim)) || (rc = json_int(root, "v_head_dim", mpath, &t->v_dim)) ||
        (rc = json_int(root, "rope_dim", mpath, &h->rope_dim)) ||
        (rc = json_int(root, "k_rank", mpath, &t->opts.k_rank)) || (rc = json_int(root, "v_rank", mpath, &t->opts.v_rank)))
        return rc;
    int rope_dim = h->rope_dim;
    if (t->n_layers < 1 || t->n_layers > 100000 || t->hidden < 1 || t->n_heads < 1 || t->n_kv_heads < 1 ||
        t->n_heads % t->n_kv_heads || t->head_dim < 1 || t->v_dim < 1 || rope_dim < 0 || rope_dim % 2 ||
        rope_dim > t->head_dim)
        return al_err("%s: inconsistent dims (layers %d, hidden %d, heads %d, kv heads %d, head_dim %d, v_head_dim %d, "
                      "rope_dim %d)", mpath, t->n_layers, t->hidden, t->n_heads, t->n_kv_heads, t->head_dim, t->v_dim,
                      rope_dim);
    return AL_OK;
}

/* The RoPE pairing (where h->rope_dim > 0) and the softmax scale into h. */
static int manifest_rope(const cJSON *root, const char *mpath, TpaManifest *h) {
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(root, "rope_layout");
    h->layout = ROPE_NONE;
    if (h->rope_dim) {
        if (cJSON_IsString(lay) && !strcmp(lay->valuestring, rope_layout_name(ROPE_INTERLEAVED))) h->layout = ROPE_INTERLEAVED;
        else if (cJSON_IsString(lay) && !strcmp(lay->valuestring, rope_layout_name(ROPE_HALF))) h->layout = ROPE_HALF;
        else return al_err("%s: \"rope_layout\" must name the RoPE pairing", mpath);
    }
    h->scale = json_get_num(root, "softmax_scale");
    if (!(h->scale > 0)) return al_err("%s: \"softmax_scale\" must be a positive number", mpath);
    return AL_OK;
}

/* The manifest's flags, source, folder and "before" accounting into t; t->layers allocated. */
static int manifest_meta(const cJSON *root, const char *dir, TpaModel *t) {
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(root, "exact");
    t->exact = cJSON_IsTrue(ex);
    t->activation_stats = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "activation_stats"));
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(src, "path"), *sn = cJSON_GetObjectItemCaseSensitive(src, "name");
    t->src_path = al_strdup(cJSON_IsString(sp) ? sp->valuestring : "");
    t->src_name = al_strdup(cJSON_IsString(sn) ? sn->valuestring : "");
    t->dir = al_strdup(dir);
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(root, "kv_values_per_token_per_layer");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "attn_params_per_layer");
    t->kv_before = (size_t)fmax(0, json_get_num(kv, "source"));
    t->params_before = (size_t)fmax(0, json_get_num(pp, "source"));
    t->layers = al_calloc((size_t)t->n_layers, sizeof *t->layers, "the TPA layers");
    return !t->src_path || !t->src_name || !t->dir || !t->layers ? AL_ERR : AL_OK;
}

/* Layer l's sliding window and soft-cap (its manifest record r; absent: none) and sink logits (layers.l.sinks, when
 * the file has them) into L. */
static int load_mask(const st_file *f, const cJSON *r, int l, AttnLayer *L) {
    double w = json_get_num(r, "sliding_window"), cap = json_get_num(r, "attn_softcap");
    L->window = w > 0 ? (size_t)w : 0;
    L->softcap = cap > 0 ? cap : 0;
    char name[64];
    snprintf(name, sizeof name, "layers.%d.sinks", l);
    const st_entry *e = st_find(f, name);
    if (!e) return AL_OK;
    if (e->dtype != DT_F32 || e->ndim != 1 || e->shape[0] != (size_t)L->n_heads)
        return al_err("%s: want F32 (%d), one sink logit per head", name, L->n_heads);
    if (!(L->sinks = al_malloc3((size_t)L->n_heads, 1, sizeof(float), "attention sinks"))) return AL_ERR;
    memcpy(L->sinks, st_data(f, e), (size_t)L->n_heads * sizeof(float));
    return AL_OK;
}

/* Every layer of t from the factors file fpath, each with its report from the manifest's
 * "layers" array. */
static int load_layers(const char *fpath, const cJSON *root, const TpaManifest *h, TpaModel *t) {
    st_file *f = NULL;
    int rc = st_open(fpath, &f);
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(root, "layers");
    for (int l = 0; l < t->n_layers && rc == AL_OK; l++) {
        if ((rc = load_layer(f, t, h, l, &t->layers[l]))) break;
        const cJSON *r = cJSON_GetArrayItem(reps, l);
        TpaLayerReport *rep = &t->layers[l]->rep;
        rep->k_energy = t->layers[l]->K.energy = json_get_num(r, "k_energy");
        rep->v_energy = t->layers[l]->V.energy = json_get_num(r, "v_energy");
        rep->k_err = json_get_num(r, "k_err");
        rep->v_err = json_get_num(r, "v_err");
        rep->score_err = json_get_num(r, "score_err");
        rep->out_err = json_get_num(r, "out_err");
        rc = load_mask(f, r, l, t->layers[l]->dense);
    }
    if (f) st_close(f);
    return rc;
}

/* The ranks, KV cache and attention parameters after, from layer 0 (every layer has its ranks). */
static void set_totals(TpaModel *t) {
    t->opts.k_rank = t->layers[0]->K.R;
    t->opts.v_rank = t->layers[0]->V.R;
    t->kv_after = tpa_factor_cached(&t->layers[0]->K) + tpa_factor_cached(&t->layers[0]->V);
    const AttnLayer *L = t->layers[0]->dense;
    size_t p = attn_layer_params(L) - L->W_K->rows * L->W_K->cols - L->W_V->rows * L->W_V->cols;
    if (L->b_K) p -= L->W_K->cols;
    if (L->b_V) p -= L->W_V->cols;
    t->params_after = p + tpa_factor_params(&t->layers[0]->K) + tpa_factor_params(&t->layers[0]->V);
}

int tpa_load(const char *dir, TpaModel **out) {
    *out = NULL;
    char *mpath = al_asprintf("%s/%s", dir, TPA_MANIFEST);
    char *fpath = al_asprintf("%s/%s", dir, TPA_FACTORS);
    cJSON *root = NULL;
    TpaModel *t = NULL;
    TpaManifest h = {0};
    int rc = manifest_read(mpath, &root);
    if (rc == AL_OK && !(t = al_calloc(1, sizeof *t, "a TPA model"))) rc = AL_ERR;
    if (rc == AL_OK) rc = manifest_dims(root, mpath, t, &h);
    if (rc == AL_OK) rc = manifest_rope(root, mpath, &h);
    if (rc == AL_OK) rc = manifest_meta(root, dir, t);
    if (rc == AL_OK) rc = load_layers(fpath, root, &h, t);
    if (rc == AL_OK) set_totals(t);
    cJSON_Delete(root);
    free(mpath);
    free(fpath);
    if (rc) {
        tpa_model_free(t);
        return al_err_ctx("loading the TPA export %s", dir);
    }
    *out = t;
    return AL_OK;
}

/* ================================================================ check */

void tpa_check_free(TpaCheck *c) {
    if (!c) return;
    free(c->score_err);
    free(c->out_err);
    free(c);
}

int tpa_check(const TpaModel *t, Model *src, size_t T, uint64_t seed, TpaCheck **out) {
    return tpa_check_in(t, src, &(TpaCheckIn){.tokens = T, .seed = seed}, out);
}

/* Layer l against the source on in's inputs for that layer (positions 0..T-1). */
static int check_layer(const TpaModel *t, Model *src, const TpaCheckIn *in, size_t T, const int *pos, int l,
                       TpaCheck *k) {
    AttnLayer *L = NULL;
    AttnOut *a = NULL, *b = NULL;
    uint64_t seed = in->seed + (in->plus_layer ? (uint64_t)l : 0);
    Mat *X = tpa_random_input(T, t->hidden, seed, in->sigma ? in->sigma[l] : NULL);
    int rc = X ? attn_layer_load(src, l, &L) : AL_ERR;
    if (rc == AL_OK) rc = attn_eval(L, X, pos, true, &a);
    if (rc == AL_OK) rc = tpa_eval(t->layers[l], X, pos, true, &b);
    if (rc == AL_OK) attn_rel_err(a, b, &k->score_err[l], &k->out_err[l]);
    attn_out_free(a);
    attn_out_free(b);
    attn_layer_free(L);
    mat_free(X);
    return rc;
}

int tpa_run_layer(const TpaModel *t, Model *src, int l, mm_compute c, AttnLayer **out) {
    *out = NULL;
    const AttnLayer *D = l >= 0 && l < t->n_layers && t->layers[l] ? t->layers[l]->dense : NULL;
    if (!D || c != MM_BF16) return AL_OK;
    AttnLayer *C = attn_layer_copy(D);
    int rc = C ? attn_stock_attach(src, l, C, 1u << AS_K | 1u << AS_V) : AL_ERR;
    if (rc == AL_OK && C->stock) { *out = C; return AL_OK; }
    attn_layer_free(C);
    return rc;
}

/* The perplexity of in's text under src, and with the converted layers swapped in (tpa_run_layer), in one pass
 * over the weights (fwd_ppl_pair: two fwd_ppl passes' numbers bit for bit). */
static int check_ppl(const TpaModel *t, Model *src, const TpaCheckIn *in, TpaCheck *k) {
    k->nll_source = k->nll_conv = NAN;
    if (!in->ids || in->n < 2) return AL_OK;
    Forward *f = NULL;
    FwdPpl a, b;
    AttnLayer **run = al_calloc((size_t)t->n_layers, sizeof *run, "the TPA layers run");
    const AttnLayer **ov = run ? al_calloc((size_t)t->n_layers, sizeof *ov, "attention overrides") : NULL;
    int rc = ov ? fwd_new(src, NULL, &f) : AL_ERR;
    if (rc == AL_OK) fwd_set_compute(f, in->compute);
    for (int l = 0; rc == AL_OK && l < t->n_layers; l++)
        if (t->layers[l] && (rc = tpa_run_layer(t, src, l, in->compute, &run[l])) == AL_OK)
            ov[l] = run[l] ? run[l] : t->layers[l]->dense;
    if (rc == AL_OK) rc = fwd_ppl_pair(f, ov, 0, in->ids, in->n, in->seqlen, &a, &b);
    fwd_free(f);
    for (int l = 0; run && l < t->n_layers; l++) attn_layer_free(run[l]);
    free(run);
    free(ov);
    if (rc == AL_INTERRUPTED) return rc;
    if (rc) return al_err_ctx("TPA check, perplexity");
    k->nll_source = a.nll;
    k->nll_conv = b.nll;
    k->nll_tokens = b.tokens;
    return AL_OK;
}

/* The verdict: largest output error, first NaN layer, pass. */
static void check_verdict(const TpaModel *t, TpaCheck *k) {
    k->pass = true;
    k->first_nan = -1;
    for (int l = 0; l < k->n_layers; l++) {
        double e = k->out_err[l];
        if (!t->layers[l]) continue;
        if (isnan(e) || isnan(k->score_err[l])) {          /* NaN/Inf in the source or the conversion */
            if (k->first_nan < 0) k->first_nan = l;
            k->max_out_err = NAN;
            k->pass = false;
            continue;
        }
        if (e > k->max_out_err) k->max_out_err = e;
        if (k->exact && !(e <= TPA_EXACT_TOL)) k->pass = false;
    }
}

int tpa_check_in(const TpaModel *t, Model *src, const TpaCheckIn *in, TpaCheck **out) {
    *out = NULL;
    const ModelConfig *c = &src->cfg;
    if (cfg_is_mla(c) || c->n_layers != t->n_layers || c->hidden != t->hidden || c->n_heads != t->n_heads ||
        c->n_kv_heads != t->n_kv_heads || cfg_d_qk(c) != t->head_dim || c->v_dim != t->v_dim)
        return al_err("TPA check: %s (%d layer%s, hidden %d, %d head%s, %d KV head%s, head dim %d) does not have the "
                      "conversion's dims (%d layer%s, hidden %d, %d head%s, %d KV head%s, head dim %d)",
                      src->name ? src->name : src->path, c->n_layers, al_s(c->n_layers), c->hidden, c->n_heads, al_s(c->n_heads), c->n_kv_heads, al_s(c->n_kv_heads), cfg_d_qk(c),
                      t->n_layers, al_s(t->n_layers), t->hidden, t->n_heads, al_s(t->n_heads), t->n_kv_heads, al_s(t->n_kv_heads), t->head_dim);
    size_t T = in->tokens ? in->tokens : 64;
    TpaCheck *k = al_calloc(1, sizeof *k, "a TPA check");
    if (!k) return AL_ERR;
    k->n_layers = t->n_layers;
    k->exact = t->exact;
    k->score_err = al_malloc3((size_t)t->n_layers, 1, sizeof(double), "check errors");
    k->out_err = al_malloc3((size_t)t->n_layers, 1, sizeof(double), "check errors");
    int *pos = al_malloc3(T, 1, sizeof(int), "positions");
    int rc = k->score_err && k->out_err && pos ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < T; i++) pos[i] = (int)i;
    for (int l = 0; rc == AL_OK && l < t->n_layers; l++) {
        k->score_err[l] = k->out_err[l] = NAN;
        if (!t->layers[l]) continue;
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        rc = check_layer(t, src, in, T, pos, l, k);
        if (rc) al_err_ctx("TPA check, layer %d", l);
        al_progress("layer", (size_t)l + 1, (size_t)t->n_layers);
    }
    free(pos);
    if (rc == AL_OK) rc = check_ppl(t, src, in, k);
    if (rc) { tpa_check_free(k); return rc; }
    check_verdict(t, k);
    *out = k;
    return AL_OK;
}
