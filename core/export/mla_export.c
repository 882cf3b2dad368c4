/* mla_export.c -- a TransMLA conversion written as a DeepSeek-V3 checkpoint that stock engines run
 * as the converted model (the latent-norm constructions of mla_export.h; config.json with every
 * field a DeepSeek-V3 loader reads, weights in one file or shards with an index, manifest,
 * tokenizer files), and `check`, which loads an export back, evaluates it as a stock engine runs
 * it and compares it with its source. Owns the MlaCheck it returns. */
#define _GNU_SOURCE
#include "mla_export.h"
#include "layersel.h"
#include "mla_gaps.h"
#include "mla_quant.h"
#include "quant_config.h"
#include "quant_fused.h"
#include "moe_export.h"

#include "analyses.h"
#include "attnlab_export.h"
#include "ckpt_write.h"
#include "forward.h"
#include "rope.h"
#include "tmla_hold.h"
#include "tmla_qkn.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ================================================================ the latent norms */

#define LIN_DELTA_LOG2 (-24)          /* the linear construction's bound on its relative error */
#define LIN_K_MAX 100                 /* 2^k stays far inside every dtype's range */
#define CALIB_TOKENS 256              /* inputs of the calibrated construction */
#define CALIB_SEED 20251125ULL

const char *mla_latent_norm_name(mla_latent_norm n) { return n == MLA_NORM_CALIBRATED ? "calibrated" : "linear"; }

/* The linear construction's exponent for the latent columns [0, nc) of W (hidden, >= nc) with bias
 * b (NULL: none) under input norm weight g (NULL: ones): the smallest k >= 0 with
 * 2^-2k C^2 / (2 nc) <= 2^LIN_DELTA_LOG2, C the bound of mla_export.h; *delta gets the bound. */
static int linear_k(const Mat *W, size_t nc, const float *b, const float *g, double *delta) {
    double fg = 0, f1 = 0, bb = 0;
    for (size_t i = 0; i < W->rows; i++) {
        double gi = g ? g[i] : 1.0;
        for (size_t j = 0; j < nc; j++) {
            double w = W->data[i * W->cols + j];
            f1 += w * w;
            fg += gi * gi * w * w;
        }
    }
    for (size_t j = 0; b && j < nc; j++) bb += (double)b[j] * b[j];
    double C = 1.5 * sqrt((double)W->rows) * sqrt(fmax(fg, f1)) + sqrt(bb);
    double need = C / sqrt(2.0 * (double)nc * ldexp(1.0, LIN_DELTA_LOG2));
    int k = need > 1 ? (int)ceil(log2(need)) : 0;
    *delta = ldexp(C * C / (2.0 * (double)nc), -2 * k);
    return k;
}

/* Linear: W's first nc columns and b scaled by s = sqrt(eps) 2^-k, the norm weight 2^k. */
static int norm_linear(Mat *W, size_t nc, float *b, const float *g, double eps, float **w, int *k_out) {
    double delta;
    int k = linear_k(W, nc, b, g, &delta);
    if (!isfinite(delta) || k > LIN_K_MAX)
        return al_err("the latent's bound is not finite or too large (2^%d): NaN/Inf or huge weights in W_KVA / W_QA", k);
    double s = sqrt(eps) * ldexp(1.0, -k);
    for (size_t i = 0; i < W->rows; i++)
        for (size_t j = 0; j < nc; j++) W->data[i * W->cols + j] = (float)(W->data[i * W->cols + j] * s);
    for (size_t j = 0; b && j < nc; j++) b[j] = (float)(b[j] * s);
    if (!(*w = al_malloc3(nc, 1, sizeof(float), "a latent norm"))) return AL_ERR;
    for (size_t j = 0; j < nc; j++) (*w)[j] = (float)ldexp(1.0, k);
    if (k_out) *k_out = k;
    return AL_OK;
}

/* Calibrated: the norm weight rho = mean over X's rows of sqrt(mean(c^2) + eps), c = x W[:, :nc] + b. */
static int norm_calibrated(const Mat *W, size_t nc, const float *b, const Mat *X, double eps, float **w) {
    float *c = al_malloc3(X->rows, W->cols, sizeof(float), "latents");
    if (!c) return AL_ERR;
    attn_linear(X->data, X->rows, X->cols, W, NULL, c);
    double rho = 0;
    for (size_t t = 0; t < X->rows; t++) {
        double ss = 0;
        for (size_t j = 0; j < nc; j++) {
            double v = (double)c[t * W->cols + j] + (b ? b[j] : 0.0);
            ss += v * v;
        }
        rho += sqrt(ss / (double)nc + eps);
    }
    free(c);
    rho /= (double)X->rows;
    if (!(*w = al_malloc3(nc, 1, sizeof(float), "a latent norm"))) return AL_ERR;
    for (size_t j = 0; j < nc; j++) (*w)[j] = (float)rho;
    return AL_OK;
}

/* CALIB_TOKENS random inputs as the layer sees them: standard normal rows scaled to RMS 1, times g. */
static Mat *layer_inputs(int hidden, const float *g) {
    Mat *X = attn_random_input(CALIB_TOKENS, hidden, CALIB_SEED);
    for (size_t t = 0; X && t < X->rows; t++) {
        float *x = X->data + t * X->cols;
        double ss = 0;
        for (size_t i = 0; i < X->cols; i++) ss += (double)x[i] * x[i];
        double f = 1.0 / sqrt(ss / (double)X->cols);
        for (size_t i = 0; i < X->cols; i++) x[i] = (float)(x[i] * f * (g ? g[i] : 1.0));
    }
    return X;
}

int mla_stock_layer(const AttnLayer *L, const float *g, double eps, mla_latent_norm kind, AttnLayer **out, int *k_kv,
                    int *k_q) {
    *out = NULL;
    if (k_kv) *k_kv = 0;
    if (k_q) *k_q = 0;
    if (L->kind != ATTN_MLA || L->kva_norm || L->qa_norm)
        return al_err("internal: mla_stock_layer takes an MLA layer without latent norms");
    if (!(eps > 0)) return al_err("latent norm: eps %g must be positive", eps);
    AttnLayer *S = attn_layer_copy(L);
    if (!S) return AL_ERR;
    S->norm_eps = eps;
    size_t r = (size_t)L->kv_rank, ql = (size_t)L->q_rank;
    int rc;
    if (kind == MLA_NORM_LINEAR) {
        rc = norm_linear(S->W_KVA, r, S->b_KVA, g, eps, &S->kva_norm, k_kv);
        if (rc == AL_OK && ql) rc = norm_linear(S->W_QA, ql, S->b_QA, g, eps, &S->qa_norm, k_q);
    } else {
        Mat *X = layer_inputs(L->hidden, g);
        rc = X ? norm_calibrated(S->W_KVA, r, S->b_KVA, X, eps, &S->kva_norm) : AL_ERR;
        if (rc == AL_OK && ql) rc = norm_calibrated(S->W_QA, ql, S->b_QA, X, eps, &S->qa_norm);
        mat_free(X);
    }
    if (rc) { attn_layer_free(S); return AL_ERR; }
    *out = S;
    return AL_OK;
}

/* The weight of layer l's input norm (ROLE_NORM_ATTN_IN) as the norm applies it (Gemma's 1 + w), or NULL (ones)
 * when the model has none attnlab can read. Caller frees. */
static float *input_norm_weight(Model *m, int l) {
    char name[256];
    Mat *w = NULL;
    float *g = NULL;
    if (cfg_role_name(&m->cfg, ROLE_NORM_ATTN_IN, l, 0, "weight", name, sizeof name) && store_has(m->store, name) &&
        store_read(m->store, name, &w) == AL_OK && w->rows * w->cols == (size_t)m->cfg.hidden) {
        g = w->data;
        w->data = NULL;
        for (int i = 0; m->cfg.norm == NORM_RMS_1P && i < m->cfg.hidden; i++) g[i] += 1.0f;
    }
    al_err_clear();
    mat_free(w);
    return g;
}

/* The stock layers of every converted layer, and what the construction did. */
typedef struct {
    AttnLayer **L;            /* (n) */
    int *k_kv, *k_q;          /* (n) linear exponents */
    double *d_kv, *d_q;       /* (n) the linear bounds on the relative error (NaN: calibrated) */
    int n;
    double eps;
    mla_latent_norm kind;
} StockSet;

/* The matrices mla_stock_layer leaves as they are (every one but W_KVA, W_QA): the stock layer
 * borrows the conversion's instead of holding a copy, so the export holds one layer's copy at a
 * time, not a second set of every converted layer (7 GB on an 8B shape). */
static Mat **stock_shared(AttnLayer *S, int i) {
    Mat **m[] = {&S->W_Q, &S->W_K, &S->W_V, &S->W_QB, &S->W_KVB, &S->W_O, &S->W_G};
    return i < (int)(sizeof m / sizeof *m) ? m[i] : NULL;
}

static void stock_share(AttnLayer *S, const AttnLayer *L) {
    Mat *const from[] = {L->W_Q, L->W_K, L->W_V, L->W_QB, L->W_KVB, L->W_O, L->W_G};
    for (int i = 0; stock_shared(S, i); i++) {
        mat_free(*stock_shared(S, i));
        *stock_shared(S, i) = from[i];
    }
    static const attn_held held[] = {AH_Q, AH_QB, AH_KVB, AH_O};      /* held ones (tmla_hold.h) borrowed likewise */
    for (size_t i = 0; i < sizeof held / sizeof *held; i++) {
        attn_layer_drop_held(S, held[i]);
        S->held[held[i]] = L->held[held[i]];
        S->held_borrowed |= 1u << held[i];
    }
}

/* S shares L's matrices instead of those it shares now (borrowed: not freed). */
static void stock_reshare(AttnLayer *S, const AttnLayer *L) {
    for (int i = 0; stock_shared(S, i); i++) *stock_shared(S, i) = NULL;
    stock_share(S, L);
}

/* Frees a layer whose stock_shared matrices are borrowed (NULL: nothing). */
static void stock_layer_free(AttnLayer *S) {
    for (int i = 0; S && stock_shared(S, i); i++) *stock_shared(S, i) = NULL;
    attn_layer_free(S);
}

static void stock_free(StockSet *s) {
    for (int l = 0; s->L && l < s->n; l++) stock_layer_free(s->L[l]);
    free(s->L); free(s->k_kv); free(s->k_q); free(s->d_kv); free(s->d_q);
}

/* The eps the export's latent norms are built for (and its rms_norm_eps): the one every engine
 * normalises the latents with (engine_common_eps), or the source's (MlaExportOpts.source_eps). */
static double export_eps(const TmlaResult *r, const MlaExportOpts *o) {
    double common = engine_common_eps() > 0 ? engine_common_eps() : 1e-6;
    return o && o->source_eps && r->src->cfg.norm_eps > 0 ? r->src->cfg.norm_eps : common;
}

/* L as mla_stock_layer should copy it for a stock layer: its held matrices that stock_share borrows (the rewritten query
 * and kv_b in BF16, o_proj's view) as stubs viewing L's bytes, so the copy holds no second set of them -- not a copy
 * of each rewritten query (67 MB in BF16 on an 8B layer, read back from its spill mapping) made and freed again per
 * layer. The stubs (v.held[] pointing into h) live as long as the StockSource. */
typedef struct {
    AttnLayer v;
    AttnHeld h[4];
} StockSource;

static void stock_source(const AttnLayer *L, StockSource *s) {
    static const attn_held held[] = {AH_Q, AH_QB, AH_KVB, AH_O};
    s->v = *L;
    for (size_t i = 0; i < sizeof held / sizeof *held; i++) {
        if (!L->held[held[i]]) continue;
        s->h[i] = (AttnHeld){.w = L->held[held[i]]->w};   /* no buf, no own copy: held_dup copies the view only */
        s->h[i].w.own = NULL;
        s->v.held[held[i]] = &s->h[i];
    }
}

static int stock_build(const TmlaResult *r, mla_latent_norm kind, double eps, StockSet *s) {
    *s = (StockSet){.n = r->n_layers, .kind = kind, .eps = eps};
    s->L = al_calloc((size_t)s->n, sizeof *s->L, "stock layers");
    s->k_kv = al_calloc((size_t)s->n, sizeof(int), "exponents");
    s->k_q = al_calloc((size_t)s->n, sizeof(int), "exponents");
    s->d_kv = al_calloc((size_t)s->n, sizeof(double), "bounds");
    s->d_q = al_calloc((size_t)s->n, sizeof(double), "bounds");
    if (!s->L || !s->k_kv || !s->k_q || !s->d_kv || !s->d_q) return AL_ERR;
    for (int l = 0; l < s->n; l++) {
        const AttnLayer *L = r->layers[l];
        float *g = input_norm_weight(r->src, l);
        StockSource src;
        stock_source(L, &src);
        int rc = mla_stock_layer(&src.v, g, s->eps, kind, &s->L[l], &s->k_kv[l], &s->k_q[l]);
        if (rc == AL_OK) stock_share(s->L[l], L);
        s->d_kv[l] = s->d_q[l] = NAN;
        if (rc == AL_OK && kind == MLA_NORM_LINEAR) {
            linear_k(L->W_KVA, (size_t)L->kv_rank, L->b_KVA, g, &s->d_kv[l]);
            if (L->q_rank) linear_k(L->W_QA, (size_t)L->q_rank, L->b_QA, g, &s->d_q[l]);
        }
        free(g);
        if (rc) return al_err_ctx("layer %d's latent norm", l);
    }
    return AL_OK;
}

/* ================================================================ the tensor plan */

enum { T_COPY = -1, T_Q, T_Q_BIAS, T_QA, T_QA_BIAS, T_QAN, T_QB, T_KVA, T_KVA_BIAS, T_KVN, T_KVB, T_O, T_O_BIAS, T_SINKS,
       T_QN, T_KN, T_FREQ, T_KINDS };

/* The role of each new tensor and its part: its name is the DeepSeek (QKV_MLA) layout's. */
static const struct { tensor_role role; const char *what; } new_tensor[T_KINDS] = {
    [T_Q] = {ROLE_Q, "weight"}, [T_Q_BIAS] = {ROLE_Q, "bias"}, [T_QA] = {ROLE_Q_A, "weight"},
    [T_QA_BIAS] = {ROLE_Q_A, "bias"}, [T_QAN] = {ROLE_Q_A_NORM, "weight"}, [T_QB] = {ROLE_Q_B, "weight"},
    [T_KVA] = {ROLE_KV_A, "weight"}, [T_KVA_BIAS] = {ROLE_KV_A, "bias"}, [T_KVN] = {ROLE_KV_A_NORM, "weight"},
    [T_KVB] = {ROLE_KV_B, "weight"}, [T_O] = {ROLE_O, "weight"}, [T_O_BIAS] = {ROLE_O, "bias"},
    [T_SINKS] = {ROLE_SINKS, NULL},                 /* attnlab's layout only (a buffer: no ".weight") */
    [T_QN] = {ROLE_Q_NORM, "weight"}, [T_KN] = {ROLE_K_NORM, "weight"},   /* its qk-norm keep (Llama's names) */
    [T_FREQ] = {ROLE_ROPE_FREQ, NULL},              /* its layers' own RoPE frequencies (F64) */
};

/* The name of new tensor `kind` in layer l: the source's layer prefix, the QKV_MLA layout's name
 * of its role, its part (caller frees). */
static char *new_name(const Model *src, int l, int kind) {
    char where[96];
    cfg_layer_prefix(&src->cfg, l, where, sizeof where);
    const char *what = new_tensor[kind].what;
    attn_layout lay = kind == T_QN || kind == T_KN ? QKV_SPLIT : QKV_MLA;
    return al_asprintf("%s%s%s%s", where, role_in_attn(lay, new_tensor[kind].role)->name, what ? "." : "",
                       what ? what : "");
}

typedef struct {
    char *name;
    char *src;                /* T_COPY: the source's name when the export renames it (experts), else NULL */
    int half;                 /* T_COPY: 1 / 2 the first / second half of src's rows (a fused gate_up_proj), 0 all */
    int kind;                 /* T_COPY or a new attention tensor */
    int layer;
    size_t bytes;
    int shard;
} PlanItem;

typedef struct {
    PlanItem *v;
    size_t n, cap;
} Plan;

static void plan_free(Plan *p) {
    for (size_t i = 0; i < p->n; i++) { free(p->v[i].name); free(p->v[i].src); }
    free(p->v);
}

static int plan_add(Plan *p, char *name, int kind, int layer, size_t bytes) {
    if (!name) return AL_ERR;
    if (al_reserve(&p->v, &p->cap, p->n + 1, sizeof *p->v, "the export plan")) { free(name); return AL_ERR; }
    p->v[p->n++] = (PlanItem){.name = name, .kind = kind, .layer = layer, .bytes = bytes};
    return AL_OK;
}

static int item_cmp(const void *a, const void *b) {
    return strcmp(((const PlanItem *)a)->name, ((const PlanItem *)b)->name);
}

/* When name is a part of layer L's fused gate_up_proj (Phi-3: rows [gate ; up], as Phi3MLP's chunk(2)), the
 * names of its halves in DeepSeek-V3's dense MLP (mlp.gate_proj / mlp.up_proj, same part) into gate / up. */
static bool gate_up_split(const Model *m, const char *name, char *gate, char *up, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (!c->mlp_fused) return false;
    for (int L = 0; L < c->n_layers; L++) {
        char base[256], where[96];
        if (!cfg_role_name(c, ROLE_FFN_GATE_UP, L, -1, NULL, base, sizeof base)) return false;
        size_t n = strlen(base);
        if (strncmp(name, base, n) || name[n] != '.') continue;
        cfg_layer_prefix(c, L, where, sizeof where);
        snprintf(gate, cap, "%s%s%s", where, role_in_ffn(FFN_GATED, ROLE_FFN_GATE)->name, name + n);
        snprintf(up, cap, "%s%s%s", where, role_in_ffn(FFN_GATED, ROLE_FFN_UP)->name, name + n);
        return true;
    }
    return false;
}

/* True when name is an attention tensor of some layer: "<prefix><layer N>.<module>.*", the module
 * being the one that holds the layout's output projection (its name up to the last dot). */
static bool is_attention(const Model *m, const char *name) {
    const char *layer = family_layer_pattern(m->cfg.names), *d = strstr(layer, "%d");
    const RoleName *o = cfg_role(&m->cfg, ROLE_O);
    const char *dot = o ? strrchr(o->name, '.') : NULL;
    size_t np = strlen(m->cfg.prefix), nl = d ? (size_t)(d - layer) : 0;
    if (!d || !dot || strncmp(name, m->cfg.prefix, np) || strncmp(name + np, layer, nl)) return false;
    const char *s = name + np + nl;
    char *end;
    strtol(s, &end, 10);
    return end != s && *end == '.' && strncmp(end + 1, o->name, (size_t)(dot - o->name) + 1) == 0;
}

/* Shape (rows, cols) of a new tensor (cols 0: 1-D), or false when the layer has none. */
/* The slot (attn_eval.h) of a new matrix kind, or AH_N. */
static attn_held held_slot(int kind) {
    return kind == T_Q ? AH_Q : kind == T_QA ? AH_QA : kind == T_QB ? AH_QB : kind == T_KVA ? AH_KVA
         : kind == T_KVB ? AH_KVB : kind == T_O ? AH_O : AH_N;
}

static bool new_shape(const AttnLayer *L, int kind, bool bias, size_t *rows, size_t *cols) {
    size_t r, c;
    *cols = 0;
    switch (kind) {
    case T_Q: if (L->q_rank) return false; break;
    case T_QA: case T_QB: if (!L->q_rank) return false; break;
    case T_Q_BIAS: if (L->q_rank || !L->b_Q || !attn_layer_dims(L, AH_Q, &r, &c)) return false; *rows = c; return true;
    case T_QA_BIAS: if (!bias || !L->q_rank) return false; *rows = (size_t)L->q_rank; return true;
    case T_KVA_BIAS: if (!bias || !attn_layer_dims(L, AH_KVA, &r, &c)) return false; *rows = c; return true;
    case T_O_BIAS: if (!bias) return false; *rows = (size_t)L->hidden; return true;
    case T_QAN: if (!L->qa_norm) return false; *rows = (size_t)L->q_rank; return true;
    case T_KVN: if (!L->kva_norm) return false; *rows = (size_t)L->kv_rank; return true;
    case T_SINKS: if (!L->sinks) return false; *rows = (size_t)L->n_heads; return true;
    case T_QN: case T_KN:                                 /* qk-norm keep's: head_dim, or the whole projection */
        if (!(kind == T_QN ? L->q_norm : L->k_norm)) return false;
        *rows = (size_t)L->head_dim * (L->qk_norm == QKN_PROJ ? (size_t)(kind == T_QN ? L->n_heads : L->n_kv_heads) : 1);
        return true;
    case T_FREQ: if (L->kind != ATTN_MLA || !L->inv_freq || L->rope_dim == 0) return false; *rows = (size_t)L->rope_dim / 2; return true;
    }
    if (held_slot(kind) == AH_N || !attn_layer_dims(L, held_slot(kind), &r, &c)) return false;
    *rows = c;                  /* HF stores Linear weights (out, in): the transpose of x @ W */
    *cols = r;
    return true;
}

/* The values of a new 1-D tensor (a bias, zeros where the layer has none, or a norm weight);
 * caller frees. */
static float *new_bias(const AttnLayer *L, int kind, size_t n) {
    float *v = al_calloc(n, sizeof(float), "a bias");
    const float *src = kind == T_Q_BIAS ? L->b_Q : kind == T_QA_BIAS ? L->b_QA : kind == T_KVA_BIAS ? L->b_KVA
                     : kind == T_QAN ? L->qa_norm : kind == T_KVN ? L->kva_norm : kind == T_SINKS ? L->sinks
                     : kind == T_QN ? L->q_norm : kind == T_KN ? L->k_norm : L->b_O;
    if (v && src) memcpy(v, src, n * sizeof(float));
    return v;
}

/* A held matrix (attn_eval.h) in another dtype than it is held in: its rows widened, then converted. */
typedef struct {
    const WMat *w;
    dt_type dt;
} HeldJob;

static int fill_held(void *ud, void *dst, size_t nbytes) {
    const HeldJob *j = ud;
    size_t C = j->w->cols, es = dt_size(j->dt);
    float *row = nbytes == j->w->rows * C * es ? al_malloc3(C, 1, sizeof(float), "a row") : NULL;
    int rc = row ? AL_OK : nbytes == j->w->rows * C * es ? AL_ERR : al_err("internal: a new tensor changed size");
    for (size_t i = 0; rc == AL_OK && i < j->w->rows; i++) {
        wmat_row(j->w, i, row);
        rc = dt_from_f32(j->dt, row, C, (char *)dst + i * C * es);
    }
    free(row);
    return rc;
}

/* A held matrix of the plan: its bytes as they are where its dtype is the export's (the source's o_proj, a BF16
 * conversion's rewritten matrices in a BF16 export), else widened and converted (an F32 export of BF16-held ones). */
static int add_held(CkptWriter *w, const char *name, const WMat *h, dt_type dt) {
    size_t shape[2] = {h->rows, h->cols};
    if (h->dt == dt && !h->own && !h->scale && !h->rscale && h->fp4.enc == DT_FP4_NONE)
        return ckpt_add(w, name, dt, 2, shape, h->data, h->rows * h->cols * dt_size(dt));
    HeldJob *j = al_malloc(sizeof *j, name);
    if (!j) return AL_ERR;
    *j = (HeldJob){.w = h, .dt = dt};
    return ckpt_add_lazy(w, name, dt, 2, shape, h->rows * h->cols * dt_size(dt), fill_held, j);
}

/* Adds one plan item to the writer (copies streamed from the source's mapping; new matrices
 * computed when their shard is written). */
static int add_item(CkptWriter *w, const TmlaResult *r, AttnLayer *const *layers, const PlanItem *it, dt_type dt,
                    bool bias) {
    if (it->kind == T_COPY) {
        const st_entry *e;
        const st_file *f;
        if (store_entry(r->src->store, it->src ? it->src : it->name, &e, &f)) return AL_ERR;
        if (!it->half) return ckpt_add(w, it->name, e->dtype, e->ndim, e->shape, st_data(f, e), e->end - e->begin);
        size_t shape[ST_MAX_DIMS], nb = (e->end - e->begin) / 2;   /* half the rows: half the bytes, contiguous */
        memcpy(shape, e->shape, sizeof shape);
        shape[0] /= 2;
        return ckpt_add(w, it->name, e->dtype, e->ndim, shape, (const char *)st_data(f, e) + (it->half - 1) * nb, nb);
    }
    const AttnLayer *L = layers[it->layer];
    size_t rows, cols;
    new_shape(L, it->kind, bias, &rows, &cols);
    if (it->kind == T_FREQ) return ckpt_add(w, it->name, DT_F64, 1, &rows, L->inv_freq, rows * sizeof(double));
    if (cols == 0) {
        float *v = new_bias(L, it->kind, rows);
        Mat row = {.rows = 1, .cols = rows, .data = v};
        int rc = v ? ckpt_add_mat(w, it->name, dt, &row, 1) : AL_ERR;
        free(v);
        return rc;
    }
    const Mat *m = it->kind == T_Q ? L->W_Q : it->kind == T_QA ? L->W_QA : it->kind == T_QB ? L->W_QB
                 : it->kind == T_KVA ? L->W_KVA : it->kind == T_KVB ? L->W_KVB : L->W_O;
    if (!m && L->held[held_slot(it->kind)]) return add_held(w, it->name, &L->held[held_slot(it->kind)]->w, dt);
    return ckpt_add_mat_t(w, it->name, dt, m);       /* HF's (out, in), converted when its shard is written */
}

/* ================================================================ config and manifest */

/* Keys of the source's config that a DeepSeek-V3 config shares (copied when present); every other
 * key of the source is dropped. */
static const char *const kept_keys[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "max_position_embeddings", "rms_norm_eps", "rope_theta", "hidden_act", "initializer_range", "use_cache",
    "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings", "torch_dtype", "transformers_version", NULL};

/* The MoE keys of a config whose every MLP is dense (first_k_dense_replace = the layer count): no
 * MoE layer is built. */
static const char EVERY_MLP_DENSE[] =
    "\"moe_layer_freq\": 1, \"n_routed_experts\": 0, \"n_shared_experts\": 0, \"num_experts_per_tok\": 0,"
    "\"moe_intermediate_size\": 0, \"n_group\": 1, \"topk_group\": 1, \"routed_scaling_factor\": 1.0,"
    "\"norm_topk_prob\": false, \"topk_method\": \"greedy\", \"scoring_func\": \"softmax\"";

static void set_num(cJSON *o, const char *k, double v) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    cJSON_AddNumberToObject(o, k, v);
}

static void set_default_num(cJSON *o, const char *k, double v) {
    if (!cJSON_GetObjectItemCaseSensitive(o, k)) cJSON_AddNumberToObject(o, k, v);
}

/* rope_scaling as a DeepSeek-V3 engine reads it: YaRN with its attention factor folded into the
 * weights (attention_factor 1 for transformers; mscale = mscale_all_dim = 0 make vLLM's and
 * SGLang's DeepSeek YaRN factor 1 and add no softmax mscale), null for anything else (linear,
 * llama3, ...: no DeepSeek-V3 engine computes them; check reports the difference). */
static void put_rope_scaling(cJSON *o, const cJSON *src_tree, const ModelConfig *c) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(src_tree, "rope_scaling");
    if (c->rope_spec.scaling.kind == RS_YARN && cJSON_IsObject(rs)) {
        cJSON *y = cJSON_Duplicate(rs, true);
        model_config_yarn_folded(y);
        set_num(y, "mscale", 0);
        set_num(y, "mscale_all_dim", 0);
        cJSON_AddItemToObject(o, "rope_scaling", y);
    } else
        cJSON_AddNullToObject(o, "rope_scaling");
}

static cJSON *make_config(const TmlaResult *r, bool bias, dt_type dt, double eps) {
    const ModelConfig *c = &r->src->cfg;
    cJSON *src = r->src->config_tree ? model_config_tree(r->src) : NULL, *o = cJSON_CreateObject();
    if (!o) { cJSON_Delete(src); return NULL; }
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("DeepseekV3ForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", "deepseek_v3");
    for (size_t i = 0; kept_keys[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, kept_keys[i]);
        if (v) cJSON_AddItemToObject(o, kept_keys[i], cJSON_Duplicate(v, true));
    }
    ckpt_json_hf_shape(o, &(CkptHfShape){c->hidden, c->intermediate, c->n_heads, c->n_layers, c->vocab, c->max_pos});
    set_num(o, "rms_norm_eps", eps);
    set_default_num(o, "rope_theta", c->rope_theta);
    if (!cJSON_GetObjectItemCaseSensitive(o, "hidden_act")) cJSON_AddStringToObject(o, "hidden_act", "silu");
    if (!cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings")) cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    if (!cJSON_GetObjectItemCaseSensitive(o, "torch_dtype"))
        cJSON_AddStringToObject(o, "torch_dtype", dt == DT_BF16 ? "bfloat16" : dt == DT_F16 ? "float16" : "float32");
    const char *ids[] = {"bos_token_id", "eos_token_id"};   /* DeepseekV3Config's defaults (0, 1) are not the source's */
    for (size_t i = 0; i < 2; i++)
        if (!cJSON_GetObjectItemCaseSensitive(o, ids[i])) cJSON_AddNullToObject(o, ids[i]);
    cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
    /* attention */
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "kv_lora_rank", r->kv_rank);
    if (r->q_rank) cJSON_AddNumberToObject(o, "q_lora_rank", r->q_rank);
    else cJSON_AddNullToObject(o, "q_lora_rank");
    cJSON_AddNumberToObject(o, "qk_rope_head_dim", r->rope_dim);
    cJSON_AddNumberToObject(o, "qk_nope_head_dim", r->qk_nope);
    cJSON_AddNumberToObject(o, "v_head_dim", r->v_dim);
    cJSON_AddNumberToObject(o, "head_dim", r->rope_dim);
    cJSON_AddBoolToObject(o, "attention_bias", bias);
    cJSON_AddBoolToObject(o, "rope_interleave", true);
    put_rope_scaling(o, src, c);
    cJSON_AddNumberToObject(o, "first_k_dense_replace", c->n_layers);
    cJSON_Delete(src);
    if (ckpt_json_merge(o, EVERY_MLP_DENSE) == AL_OK && (c->mlp != MLP_MOE || moe_config(c, o) == AL_OK)) return o;
    cJSON_Delete(o);
    return NULL;
}

/* A layer's record in the manifest. */
static const CkptJsonField LAYER_FIELDS[] = {
    {"alpha", offsetof(TmlaLayerReport, alpha)},
    {"rope_energy", offsetof(TmlaLayerReport, rope_energy)},
    {"joint_energy", offsetof(TmlaLayerReport, joint_energy)},
    {"score_rel_err", offsetof(TmlaLayerReport, score_err)},
    {"output_rel_err", offsetof(TmlaLayerReport, out_err)},
    {"joint_energy_other_balance", offsetof(TmlaLayerReport, joint_energy_alt)},
    {"score_rel_err_other_balance", offsetof(TmlaLayerReport, score_err_alt)},
    {"output_rel_err_other_balance", offsetof(TmlaLayerReport, out_err_alt)},
    {NULL, 0}};

static cJSON *make_manifest(const TmlaResult *r, const StockSet *st, bool bias, dt_type dt, size_t nshards) {
    const TmlaOpts *o = &r->opts;
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    cJSON_AddStringToObject(m, "tool", "attnlab");
    cJSON_AddStringToObject(m, "method", "TransMLA (GQA -> MLA): merge KV heads, RoRoPE, FreqFold, balanced joint "
                                         "low rank of NoPE keys and values (seed 003)");
    char abs[PATH_MAX];
    cJSON_AddStringToObject(m, "source", realpath(r->src_path, abs) ? abs : r->src_path);
    cJSON_AddStringToObject(m, "source_model_type", r->src->cfg.model_type);
    cJSON_AddStringToObject(m, "covariance", r->activation_stats ? "input second moments given per layer (activation statistics)"
                                                 : "weights (unit-variance inputs, the paper's W-based variant)");
    cJSON_AddNumberToObject(m, "kv_lora_rank", r->kv_rank);
    cJSON_AddNumberToObject(m, "qk_rope_head_dim", r->rope_dim);
    cJSON_AddNumberToObject(m, "freqfold", o->freqfold);
    cJSON_AddNumberToObject(m, "qk_nope_head_dim", r->qk_nope);
    cJSON_AddNumberToObject(m, "v_head_dim", r->v_dim);
    if (r->q_rank) cJSON_AddNumberToObject(m, "q_lora_rank", r->q_rank);
    else cJSON_AddNullToObject(m, "q_lora_rank");
    cJSON_AddBoolToObject(m, "balance", o->balance);
    if (o->strategy[0]) cJSON_AddStringToObject(m, "strategy", o->strategy);   /* mla_strategy.h's */
    if (r->src->cfg.qk_norm != QKN_NONE)      /* the source's Q/K RMSNorm, approximated (tmla_qkn.h) */
        cJSON_AddStringToObject(m, "qk_norm", tmla_qkn_words((tmla_qkn_mode)o->qk_norm));
    cJSON_AddBoolToObject(m, "attention_bias", bias);
    cJSON_AddStringToObject(m, "attention_dtype", dt_name(dt));
    cJSON_AddNumberToObject(m, "kv_values_per_token_per_layer_before", (double)r->kv_before);
    cJSON_AddNumberToObject(m, "kv_values_per_token_per_layer_after", (double)r->kv_after);
    cJSON_AddNumberToObject(m, "attention_params_before", (double)r->params_before);
    cJSON_AddNumberToObject(m, "attention_params_after", (double)r->params_after);
    cJSON_AddNumberToObject(m, "shards", (double)nshards);
    cJSON_AddNumberToObject(m, "eval_tokens", (double)o->eval_tokens);
    cJSON_AddStringToObject(m, "latent_norm", mla_latent_norm_name(st->kind));
    cJSON_AddStringToObject(m, "latent_norm_how", st->kind == MLA_NORM_LINEAR
        ? "W_c' = sqrt(eps) 2^-k W_c (and its bias), norm weight 2^k: RMSNorm acts linearly (eps dominates); "
          "per layer k and the bound on its relative error"
        : "norm weight = mean latent RMS on random RMS-normalised inputs (TransMLA): exact only where a token's "
          "latent RMS equals the mean");
    cJSON_AddNumberToObject(m, "latent_norm_eps", st->eps);
    if (st->eps != r->src->cfg.norm_eps)
        cJSON_AddNumberToObject(m, "source_rms_norm_eps", r->src->cfg.norm_eps);
    cJSON_AddBoolToObject(m, "qk_latent_layernorm", true);
    if (r->src->cfg.rope_spec.scaling.kind != RS_NONE && r->src->cfg.rope_spec.scaling.kind != RS_YARN) {
        const cJSON *rs = r->src->config_tree ? cJSON_GetObjectItemCaseSensitive(r->src->config_tree, "rope_scaling") : NULL;
        if (rs) cJSON_AddItemToObject(m, "source_rope_scaling", cJSON_Duplicate(rs, true));
        cJSON_AddStringToObject(m, "rope_note", "the source's RoPE scaling has no DeepSeek-V3 form: the export's "
                                                "rope_scaling is null (check measures the difference)");
    }
    bool qbias = false;
    for (int l = 0; l < r->n_layers; l++) qbias |= r->layers[l] && !r->layers[l]->q_rank && r->layers[l]->b_Q;
    if (qbias)
        cJSON_AddStringToObject(m, "note", "q_proj.bias is written because the source query has a bias and the query "
                                           "has no latent; DeepSeek-V3's stock modeling code builds q_proj without a "
                                           "bias (attnlab reads it). Convert with q-rank to carry it in q_a_proj.bias.");
    cJSON *layers = cJSON_AddArrayToObject(m, "layers");
    for (int l = 0; l < r->n_layers; l++) {
        const TmlaLayerReport *p = &r->rep[l];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        ckpt_json_fields(e, p, LAYER_FIELDS);
        if (st->kind == MLA_NORM_LINEAR) {
            cJSON_AddNumberToObject(e, "kv_norm_k", st->k_kv[l]);
            ckpt_json_num(e, "kv_norm_rel_err_bound", st->d_kv[l]);
            if (r->q_rank) {
                cJSON_AddNumberToObject(e, "q_norm_k", st->k_q[l]);
                ckpt_json_num(e, "q_norm_rel_err_bound", st->d_q[l]);
            }
        }
        cJSON_AddItemToArray(layers, e);
    }
    return m;
}

/* The source's static KV cache scales (quant_fused.h: quant_kv_scale), all dropped with its scheme (mla_quant.h:
 * mla_quant_kv_scheme): recorded as the manifest's kv_scales_dropped (FaRR's key: tensors, layers [lo, hi]). */
static void kv_scales_manifest(const Model *src, cJSON *man) {
    const char *layer = family_layer_pattern(src->cfg.names);
    char pat[128];
    snprintf(pat, sizeof pat, "%s%s", src->cfg.prefix, layer);
    size_t n = 0;
    int lo = 0, hi = 0, L;
    for (size_t i = 0; i < store_count(src->store); i++) {
        const char *name = store_name_at(src->store, i);
        if (!quant_kv_scale(name) || !is_attention(src, name) || sscanf(name, pat, &L) != 1) continue;
        if (n++ == 0) lo = hi = L;
        lo = L < lo ? L : lo;
        hi = L > hi ? L : hi;
    }
    bool scheme = src->config_tree && mla_quant_kv_scheme(src->config_tree);
    if (!n && !scheme) return;
    cJSON *kv = cJSON_AddObjectToObject(man, "kv_scales_dropped");
    cJSON_AddNumberToObject(kv, "tensors", (double)n);
    cJSON *lr = cJSON_AddArrayToObject(kv, "layers");
    if (n) cJSON_AddItemToArray(lr, cJSON_CreateNumber(lo));
    if (n) cJSON_AddItemToArray(lr, cJSON_CreateNumber(hi));
    cJSON_AddBoolToObject(kv, "scheme_dropped", scheme);
    cJSON_AddStringToObject(kv, "why", "a static FP8 KV cache's k_scale / v_scale were calibrated on the source's GQA keys "
                            "and values; an MLA layer caches its latent (vLLM and SGLang quantize it with k_scale alone), "
                            "so none is written and the static scheme (kv_cache_scheme / kv_cache_quant_algo) is dropped: "
                            "vLLM and SGLang take 1.0 (their default with none); recalibrate them for an FP8 cache");
}

/* ================================================================ export */

/* The dtype of the new attention tensors. */
static dt_type export_dtype(const TmlaResult *r, const MlaExportOpts *o) {
    if (o && o->dtype != DT_INVALID && (o->dtype == DT_F32 || o->dtype == DT_F16 || o->dtype == DT_BF16)) return o->dtype;
    dt_type s = r->src->cfg.dtype;
    return s == DT_F32 || s == DT_F16 || s == DT_BF16 ? s : DT_BF16;
}

/* Plans every tensor of the export (sorted by name) with its size. */
static int make_plan(const TmlaResult *r, AttnLayer *const *layers, bool bias, dt_type dt, bool own, Plan *p) {
    const Store *st = r->src->store;
    MoeNames *mn = own ? NULL : moe_names(&r->src->cfg);         /* experts in DeepSeek-V3's names */
    if (!own && !mn) return AL_ERR;
    for (size_t i = 0; i < store_count(st); i++) {
        const char *name = store_name_at(st, i);
        if (is_attention(r->src, name)) continue;
        const st_entry *e;
        char buf[320], gate[320], up[320];
        const char *to = own ? name : moe_rename(mn, name, buf, sizeof buf);   /* attnlab's layout: the source's names */
        if (store_entry(st, name, &e, NULL)) { moe_names_free(mn); return AL_ERR; }
        if (!own && gate_up_split(r->src, name, gate, up, sizeof gate)) {          /* Phi-3: two tensors */
            for (int h = 1; h <= 2; h++) {
                if (plan_add(p, al_strdup(h == 1 ? gate : up), T_COPY, -1, (e->end - e->begin) / 2) ||
                    !(p->v[p->n - 1].src = al_strdup(name))) { moe_names_free(mn); return AL_ERR; }
                p->v[p->n - 1].half = h;
            }
            continue;
        }
        if (plan_add(p, al_strdup(to), T_COPY, -1, e->end - e->begin)) { moe_names_free(mn); return AL_ERR; }
        if (to != name && !(p->v[p->n - 1].src = al_strdup(name))) { moe_names_free(mn); return AL_ERR; }
    }
    moe_names_free(mn);
    bool freqs = own && attnlab_own_freqs(r);
    for (int l = 0; l < r->n_layers; l++)
        for (int k = 0; layers[l] && k < T_KINDS; k++) {     /* NULL: a hybrid's other layer (attnlab's keep) */
            size_t rows, cols;
            if ((k == T_SINKS && !own) || (k == T_FREQ && !freqs) || !new_shape(layers[l], k, bias, &rows, &cols)) continue;
            if (plan_add(p, new_name(r->src, l, k), k, l, rows * (cols ? cols : 1) * dt_size(k == T_FREQ ? DT_F64 : dt)))
                return AL_ERR;
        }
    qsort(p->v, p->n, sizeof *p->v, item_cmp);
    return AL_OK;
}

/* Splits the plan into shards of at most limit bytes (a tensor larger than that gets its own);
 * returns the shard count. */
static size_t assign_shards(const Plan *p, size_t limit) {
    size_t acc = 0, ns = 1;
    for (size_t i = 0; i < p->n; i++) {
        if (acc > 0 && acc + p->v[i].bytes > limit) { ns++; acc = 0; }
        p->v[i].shard = (int)ns - 1;
        acc += p->v[i].bytes;
    }
    return ns;
}

/* Writes the shards (the writer names them and writes the index when there is more than one). */
static int write_weights(const TmlaResult *r, AttnLayer *const *layers, const Plan *p, CkptWriter *w, size_t ns,
                         dt_type dt, bool bias) {
    int rc = AL_OK;
    for (size_t s = 0; rc == AL_OK && s < ns; s++) {
        for (size_t i = 0; rc == AL_OK && i < p->n; i++)
            if (p->v[i].shard == (int)s) rc = add_item(w, r, layers, &p->v[i], dt, bias);
        if (rc == AL_OK) rc = ckpt_shard_end(w);
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    return rc;
}

/* Whether export item it is a plain float linear weight copied from the source (lm_head, a router). */
static bool copied_plain(const Store *s, const PlanItem *it, const char *from) {
    const st_entry *e;
    size_t n = strlen(it->name);
    return n > 7 && !strcmp(it->name + n - 7, ".weight") && !strstr(it->name, "embed") && !strstr(it->name, "norm") &&
           store_entry(s, from, &e, NULL) == AL_OK && e->ndim == 2 &&
           (e->dtype == DT_F32 || e->dtype == DT_F16 || e->dtype == DT_BF16);
}

static bool new_projection(int kind) {
    return kind == T_Q || kind == T_QA || kind == T_QB || kind == T_KVA || kind == T_KVB || kind == T_O;
}

/* The export's modules for a quantized source's config lists (mla_quant.h): those it writes
 * unquantized and those it copies quantized (a module's tensors are adjacent: the plan is sorted). */
static int export_modules(const TmlaResult *r, const Plan *p, MlaQuantMods *m) {
    const Store *s = r->src->store;
    *m = (MlaQuantMods){.plain = calloc(p->n + 1, sizeof(char *)), .quant = calloc(p->n + 1, sizeof(char *))};
    if (!m->plain || !m->quant) return al_err("out of memory listing the export's modules");
    for (size_t i = 0; i < p->n; i++) {
        const PlanItem *it = &p->v[i];
        const char *from = it->src ? it->src : it->name, *dot = strrchr(it->name, '.'), *sdot = strrchr(from, '.');
        if (!dot || !sdot) continue;
        char mod[320];
        snprintf(mod, sizeof mod, "%.*s", (int)(sdot - from), from);
        size_t n = (size_t)(dot - it->name);
        bool quant = it->kind == T_COPY && quant_found(s, mod) != QENC_NONE;
        if (quant && m->nquant && strlen(m->quant[m->nquant - 1]) == n && !strncmp(m->quant[m->nquant - 1], it->name, n))
            continue;
        char **to = quant ? &m->quant[m->nquant] : &m->plain[m->nplain];
        if (!quant && !(it->kind == T_COPY ? copied_plain(s, it, from) : new_projection(it->kind) && !strcmp(dot, ".weight")))
            continue;
        if (!(*to = strndup(it->name, n))) return al_err("out of memory listing the export's modules");
        if (quant) m->nquant++;
        else m->nplain++;
    }
    al_err_clear();
    return AL_OK;
}

static void free_modules(MlaQuantMods *m) {
    for (size_t i = 0; m->plain && i < m->nplain; i++) free(m->plain[i]);
    for (size_t i = 0; m->quant && i < m->nquant; i++) free(m->quant[i]);
    free(m->plain);
    free(m->quant);
}

/* Refuses conversions a DeepSeek-V3 checkpoint cannot hold; *bias: any attention bias. */
/* Whether a model's decoder layers other than attention fit a DeepSeek-V3 checkpoint as they are. */
static bool family_exportable(const ModelConfig *c, bool qk_norm_plain) {
    return analysis_mla_exportable(c, NULL, 0) && mla_gaps_none(c, qk_norm_plain);
}

double mla_export_norm_eps(const Model *src, bool all_layers, bool qk_norm_plain) {
    return all_layers && family_exportable(&src->cfg, qk_norm_plain) ? export_eps(NULL, NULL) : 0;
}

/* A fused gate_up_proj is split by rows into gate_proj / up_proj: only its weight, of even rows. */
static int split_exportable(const Model *m) {
    for (size_t i = 0; m->cfg.mlp_fused && i < store_count(m->store); i++) {
        const char *name = store_name_at(m->store, i);
        char gate[320], up[320];
        const st_entry *e;
        if (!gate_up_split(m, name, gate, up, sizeof gate)) continue;
        if (store_entry(m->store, name, &e, NULL)) return AL_ERR;
        const char *dot = strrchr(name, '.');
        if (strcmp(dot, ".weight") || e->ndim != 2 || e->shape[0] % 2 || !(e->dtype == DT_F32 || e->dtype == DT_F16 ||
                                                                              e->dtype == DT_BF16))
            return al_err("export: %s (%s, %zu row%s) is not a float weight of even rows: the export splits a fused "
                          "gate_up_proj into DeepSeek-V3's gate_proj / up_proj by rows, which it cannot do for "
                          "quantized or biased ones yet; the conversion runs in the session (ppl, check)", name,
                          dt_name(e->dtype), e->ndim ? e->shape[0] : 0, al_s(e->ndim ? e->shape[0] : 0));
    }
    return AL_OK;
}

static int check_exportable(const TmlaResult *r, bool *bias) {
    *bias = false;
    const ModelConfig *c = &r->src->cfg;
    if (c->mlp == MLP_MOE && c->moe.router == ROUTER_DS_V3)
        return al_err("export: %s's MLP layers are a mixture of experts (DeepSeek-V3's routing): the export copies no "
                      "experts of that router yet (it writes softmax top-k routers, Mixtral's and Qwen3-MoE's, in "
                      "DeepSeek-V3's layout); the conversion runs in the session (ppl, check), it cannot be exported",
                      c->model_type);
    if (r->opts.qk_norm == TMLA_QKN_KEEP)
        return al_err("export: qk-norm keep normalises each token's keys rebuilt from the cache, before RoPE: DeepSeek-V3 "
                      "has no key norm, and an engine would need keys normalised after the up-projection (no absorbed "
                      "MLA decode, vLLM's or SGLang's, does that); the conversion runs in the session (ppl, check) and "
                      "`export DIR format attnlab` saves it in attnlab's own layout; qk-norm fold or drop export as DeepSeek-V3");
    if (mla_gaps_check(c, tmla_qkn_is_plain(r->opts.qk_norm))) return AL_ERR;             /* what DeepSeek-V3's layout cannot hold: mla_gaps.c */
    if (split_exportable(r->src)) return AL_ERR;
    for (int l = 0; l < r->n_layers; l++)
        if (!r->layers[l] && !layersel_attn(c, l))
            return al_err("export: layer %d of %s is %s: a DeepSeek-V3 checkpoint has every layer in MLA form; the "
                          "conversion runs in the session (ppl, check), it cannot be exported", l, c->model_type,
                          layersel_other_kind(c));
        else if (!r->layers[l])
            return al_err("export: layer %d was not converted; a DeepSeek-V3 checkpoint needs every layer in MLA form "
                          "(convert all layers)", l);
    for (int l = 0; l < r->n_layers; l++) {
        const AttnLayer *L = r->layers[l];
        *bias |= L->b_Q || L->b_QA || L->b_KVA || L->b_O;
        if (L->kv_rank != r->kv_rank || L->rope_dim != r->rope_dim || L->qk_nope != r->qk_nope || L->q_rank != r->q_rank)
            return al_err("export: layer %d has other dims than the conversion's (rank %d, rope %d; the conversion's: "
                          "rank %d, rope %d): a DeepSeek-V3 checkpoint has one kv_lora_rank and qk_rope_head_dim for "
                          "every layer (per-layer ranks, as -alloc's, run in the session: ppl, check)", l, L->kv_rank,
                          L->rope_dim, r->kv_rank, r->rope_dim);
        double *want = NULL;
        if (attn_rope_freqs_model(r->src, L->rope_dim, &want)) return AL_ERR;
        for (int j = 0; j < L->rope_dim / 2; j++)
            if (fabs(L->inv_freq[j] - want[j]) > 1e-12 * want[j]) {
                double w = want[j];            /* read before the free (the message printed freed memory) */
                free(want);
                return al_err("export: layer %d's RoPE dims are not the model's RoPE of dim %d (pair %d turns at %g, "
                              "not %g): DeepSeek's layout cannot hold them", l, L->rope_dim, j, L->inv_freq[j], w);
            }
        free(want);
    }
    return AL_OK;
}

/* Biases of the converted layers (any). */
static bool any_bias(const TmlaResult *r) {
    bool bias = false;
    for (int l = 0; l < r->n_layers; l++) {
        const AttnLayer *L = r->layers[l];
        bias |= L && (L->b_Q || L->b_QA || L->b_KVA || L->b_O);
    }
    return bias;
}

/* `export DIR format attnlab` (attnlab_export.h): the source's tensors and config under their names, the layers as the
 * session holds them (no latent norms; the query scaled to the scale the config implies), f32 unless dtype says. */
static int attnlab_write(const TmlaResult *r, const char *dir, const MlaExportOpts *o) {
    if (o->dtype != DT_INVALID && o->dtype != DT_F32 && o->dtype != DT_F16 && o->dtype != DT_BF16)
        return al_err("export: dtype %s: give f32, f16 or bf16", dt_name(o->dtype));
    if (attnlab_exportable(r)) return al_err_ctx("export to %s", dir);
    bool bias = any_bias(r);
    dt_type dt = o->dtype != DT_INVALID ? o->dtype : DT_F32;
    cJSON *cfg = attnlab_config(r, bias, o->norm_eps);
    StockSet st = {.n = r->n_layers, .kind = MLA_NORM_CALIBRATED, .eps = o->norm_eps > 0 ? o->norm_eps : r->src->cfg.norm_eps};
    if (!cfg || attnlab_layers(r, cfg, &st.L)) { cJSON_Delete(cfg); return al_err_ctx("export to %s", dir); }
    const char *src_dir = store_dir(r->src->store);
    CkptWriter *w = NULL;
    CkptOpts co = {.src = src_dir, .force = o->force, .can_force = true};
    Plan p = {0};
    size_t nshards = 0;
    int rc = ckpt_begin(dir, &co, &w);
    if (rc == AL_OK) rc = make_plan(r, st.L, bias, dt, true, &p);
    if (rc == AL_OK) nshards = assign_shards(&p, o->shard_bytes ? o->shard_bytes : (size_t)4 << 30);
    if (rc == AL_OK) rc = write_weights(r, st.L, &p, w, nshards, dt, bias);
    MlaQuantMods qm = {0};                              /* a quantized source: the new modules listed unquantized */
    if (rc == AL_OK) rc = export_modules(r, &p, &qm);
    plan_free(&p);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "quantization_config");
    if (rc == AL_OK) rc = mla_quant_config(r->src->config_tree, &qm, cfg);
    if (rc == AL_OK) rc = mla_quant_hf_file(src_dir, &qm, w);
    free_modules(&qm);
    if (rc == AL_OK) rc = ckpt_write_json(w, "config.json", cfg);
    cJSON *man = rc == AL_OK ? make_manifest(r, &st, bias, dt, nshards) : NULL;
    if (man) attnlab_manifest(man, r);
    if (rc == AL_OK && man && o->check) rc = ci_write(w, man, o->check);
    if (rc == AL_OK) rc = man ? ckpt_write_json(w, MLA_MANIFEST, man) : al_err("out of memory writing the manifest");
    cJSON_Delete(man);
    cJSON_Delete(cfg);
    for (int l = 0; st.L && l < st.n; l++) attn_layer_free(st.L[l]);   /* attnlab_layers' own copies: nothing borrowed */
    free(st.L);
    st.L = NULL;
    stock_free(&st);
    if (rc == AL_OK) rc = ckpt_copy_aux(w, src_dir, NULL);
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else if (w) ckpt_abort(w);
    if (rc == AL_ERR) al_err_ctx("export to %s", dir);
    return rc;
}

int mla_export(const TmlaResult *r, const char *dir, const MlaExportOpts *o) {
    if (o && o->attnlab) return attnlab_write(r, dir, o);
    bool bias;
    mla_latent_norm kind = o ? o->latent_norm : MLA_NORM_LINEAR;
    if (o && o->dtype != DT_INVALID && o->dtype != DT_F32 && o->dtype != DT_F16 && o->dtype != DT_BF16)
        return al_err("export: dtype %s: give f32, f16 or bf16", dt_name(o->dtype));
    if (check_exportable(r, &bias)) return AL_ERR;
    dt_type dt = export_dtype(r, o);
    if (dt == DT_F16 && kind == MLA_NORM_LINEAR)
        return al_err("export: f16 cannot hold the linear latent-norm construction's scaled latents (about 1e-7: "
                      "subnormal in f16); export bf16 or f32 (or use the calibrated construction)");
    StockSet st;
    if (stock_build(r, kind, export_eps(r, o), &st)) { stock_free(&st); return al_err_ctx("export to %s", dir); }
    const char *src_dir = store_dir(r->src->store);
    CkptWriter *w;
    CkptOpts co = {.src = src_dir, .force = o && o->force, .can_force = true};
    if (ckpt_begin(dir, &co, &w)) { stock_free(&st); return AL_ERR; }
    Plan p = {0};
    size_t nshards = 0;
    int rc = make_plan(r, st.L, bias, dt, false, &p);
    if (rc == AL_OK) nshards = assign_shards(&p, o && o->shard_bytes ? o->shard_bytes : (size_t)4 << 30);
    if (rc == AL_OK) rc = write_weights(r, st.L, &p, w, nshards, dt, bias);
    MlaQuantMods qm = {0};                                                  /* a quantized source's lists */
    if (rc == AL_OK) rc = export_modules(r, &p, &qm);
    plan_free(&p);
    cJSON *cfg = rc == AL_OK ? make_config(r, bias, dt, st.eps) : NULL;
    if (cfg && r->src->config_tree) rc = mla_quant_config(r->src->config_tree, &qm, cfg);
    if (rc == AL_OK) rc = mla_quant_hf_file(src_dir, &qm, w);
    free_modules(&qm);
    if (rc == AL_OK) rc = cfg ? ckpt_write_json(w, "config.json", cfg) : al_err("out of memory writing config.json");
    cJSON_Delete(cfg);
    cJSON *man = rc == AL_OK ? make_manifest(r, &st, bias, dt, nshards) : NULL;
    if (man) kv_scales_manifest(r->src, man);
    if (rc == AL_OK && man && o && o->check) rc = ci_write(w, man, o->check);
    if (rc == AL_OK) rc = man ? ckpt_write_json(w, MLA_MANIFEST, man) : al_err("out of memory writing the manifest");
    cJSON_Delete(man);
    stock_free(&st);
    if (rc == AL_OK) rc = ckpt_copy_aux(w, src_dir, NULL);
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else ckpt_abort(w);
    if (rc == AL_ERR) al_err_ctx("export to %s", dir);
    return rc;
}

/* ================================================================ check */

void mla_check_free(MlaCheck *c) {
    if (!c) return;
    free(c->export_path);
    free(c->source_path);
    free(c->score_err);
    free(c->out_err);
    free(c->own_out_err);
    for (int i = 0; i < ENG_N; i++) free(c->engine_out_err[i]);
    free(c);
}

cJSON *mla_manifest(const char *dir) {
    char *path = al_asprintf("%s/%s", dir, MLA_MANIFEST);
    struct stat sb;
    if (!path) return NULL;
    if (stat(path, &sb) != 0) {
        al_err("%s: no %s: not an attnlab export; load the source model and give it to check", dir, MLA_MANIFEST);
        free(path);
        return NULL;
    }
    char *text = al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest");
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    if (text && !root) al_err("%s: not valid JSON", path);
    free(text);
    free(path);
    return root;
}

/* The manifest's source path (caller frees). */
static char *manifest_source(const char *dir) {
    cJSON *root = mla_manifest(dir);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "source");
    char *src = NULL;
    if (cJSON_IsString(s)) src = al_strdup(s->valuestring);
    else if (root) al_err("%s/%s: no \"source\" string", dir, MLA_MANIFEST);
    cJSON_Delete(root);
    return src;
}

/* Compares every non-attention tensor of src with the export's, byte for byte. */
static void compare_copies(const Model *src, const Model *ex, MlaCheck *c) {
    MoeNames *mn = moe_names(&src->cfg);             /* experts under DeepSeek-V3's names in the export */
    for (size_t i = 0; i < store_count(src->store); i++) {
        const char *name = store_name_at(src->store, i);
        if (is_attention(src, name)) continue;
        const st_entry *a, *b;
        const st_file *fa, *fb;
        char buf[320], gate[320], up[320];
        const char *to = moe_rename(mn, name, buf, sizeof buf);
        if (gate_up_split(src, name, gate, up, sizeof gate)) {    /* Phi-3: the halves, row for row */
            bool same = store_entry(src->store, name, &a, &fa) == AL_OK;
            for (int h = 0; h < 2 && same; h++) {
                const char *part = h ? up : gate;
                size_t nb = (a->end - a->begin) / 2;
                same = store_has(ex->store, part) && store_entry(ex->store, part, &b, &fb) == AL_OK &&
                       a->dtype == b->dtype && b->end - b->begin == nb && b->shape[0] * 2 == a->shape[0] &&
                       memcmp((const char *)st_data(fa, a) + h * nb, st_data(fb, b), nb) == 0;
            }
            if (same) c->copied_same++;
            else if (!c->copied_diff++) snprintf(c->first_diff, sizeof c->first_diff, "%s", name);
            continue;
        }
        bool same = store_entry(src->store, name, &a, &fa) == AL_OK && store_has(ex->store, to) &&
                    store_entry(ex->store, to, &b, &fb) == AL_OK && a->dtype == b->dtype && a->ndim == b->ndim &&
                    memcmp(a->shape, b->shape, sizeof a->shape) == 0 && a->end - a->begin == b->end - b->begin &&
                    memcmp(st_data(fa, a), st_data(fb, b), a->end - a->begin) == 0;
        if (same) c->copied_same++;
        else {
            if (!c->copied_diff) snprintf(c->first_diff, sizeof c->first_diff, "%s", name);
            c->copied_diff++;
        }
    }
    moe_names_free(mn);
    al_err_clear();
}

/* Appends one line to c->notes. */
__attribute__((format(printf, 2, 3))) static void note(MlaCheck *c, const char *fmt, ...) {
    size_t n = strlen(c->notes);
    va_list ap;
    va_start(ap, fmt);
    if (n + 2 < sizeof c->notes) vsnprintf(c->notes + n, sizeof c->notes - n - 1, fmt, ap);
    va_end(ap);
    n = strlen(c->notes);
    if (n + 1 < sizeof c->notes) { c->notes[n] = '\n'; c->notes[n + 1] = 0; }
}

/* True when a stock engine computes this loaded export layer differently from attnlab's reading:
 * a q_proj bias (MLA without a query latent), which no DeepSeek-V3 engine builds. */
static bool stock_differs(const AttnLayer *L) { return L->q_rank == 0 && L->b_Q; }

/* The layer as attnlab runs an export whose q_proj bias no engine builds (a copy without it). */
static AttnLayer *stock_view(const AttnLayer *L) {
    AttnLayer *S = attn_layer_copy(L);
    if (S && L->q_rank == 0) { free(S->b_Q); S->b_Q = NULL; }
    return S;
}

/* Layer b as engine e runs it (its latent eps, the biases it builds) against the source's outputs
 * oa: *score, *out. */
static int engine_err(const AttnLayer *b, const Engine *e, const AttnOut *oa, const Mat *X, const int *pos,
                      double *score, double *out) {
    AttnLayer *v = attn_layer_copy(b);
    if (v && ((b->q_rank == 0 && !e->q_proj_bias) || !e->attn_bias)) { free(v->b_Q); v->b_Q = NULL; }
    if (v && !e->attn_bias) {
        free(v->b_QA); free(v->b_KVA); free(v->b_O);
        v->b_QA = v->b_KVA = v->b_O = NULL;
    }
    if (v) v->norm_eps = engine_latent_eps(e, b->norm_eps);
    AttnOut *ov = NULL;
    int rc = v ? attn_eval(v, X, pos, true, &ov) : AL_ERR;
    if (rc == AL_OK) attn_rel_err(oa, ov, score, out);
    attn_out_free(ov);
    attn_layer_free(v);
    return rc;
}

/* Layer l: the source's attention against b, the export's layer (as read back, or built in memory as
 * the export builds it), as each engine runs it (engine_out_err; out_err, score_err: the largest
 * over them) and as attnlab reads it (own_out_err; c->own_layout: that alone). stock: b with its
 * q_proj bias dropped, kept for the whole-model pass when that differs from attnlab's reading (else
 * NULL). */
static int check_layer_vs(Model *src, const AttnLayer *b, int l, const Mat *X, const int *pos, MlaCheck *c,
                          AttnLayer **stock) {
    AttnLayer *a = NULL;
    AttnOut *oa = NULL, *ob = NULL;
    double dummy;
    *stock = NULL;
    int rc = attn_layer_load(src, l, &a);
    if (rc == AL_OK) rc = attn_eval(a, X, pos, true, &oa);
    c->score_err[l] = c->out_err[l] = 0;
    for (int i = 0; c->own_layout && i < ENG_N; i++) c->engine_out_err[i][l] = NAN;
    for (int i = 0; rc == AL_OK && !c->own_layout && i < ENG_N; i++) {
        double se = NAN;
        rc = engine_err(b, engine_row(i), oa, X, pos, &se, &c->engine_out_err[i][l]);
        c->score_err[l] = isnan(se) || isnan(c->score_err[l]) ? NAN : fmax(c->score_err[l], se);
        double oe = c->engine_out_err[i][l];
        c->out_err[l] = isnan(oe) || isnan(c->out_err[l]) ? NAN : fmax(c->out_err[l], oe);
    }
    if (rc == AL_OK) rc = attn_eval(b, X, pos, c->own_layout, &ob);
    if (rc == AL_OK) attn_rel_err(oa, ob, c->own_layout ? &c->score_err[l] : &dummy, &c->own_out_err[l]);
    if (c->own_layout) c->out_err[l] = c->own_out_err[l];
    if (rc == AL_OK && !c->own_layout && stock_differs(b)) rc = (*stock = stock_view(b)) ? AL_OK : AL_ERR;
    attn_out_free(oa); attn_out_free(ob);
    attn_layer_free(a);
    return rc;
}

/* Layer l of the export ex against the source (check_layer_vs on the layer read back). */
static int check_layer(Model *src, Model *ex, int l, const Mat *X, const int *pos, MlaCheck *c, AttnLayer **stock) {
    *stock = NULL;
    if (!layersel_attn(&ex->cfg, l)) {          /* a hybrid's other layer (attnlab's keep): the source's, as it was */
        c->own_layout = !strcmp(ex->cfg.model_type, ATTNLAB_MLA_TYPE);
        c->score_err[l] = c->out_err[l] = c->own_out_err[l] = 0;
        for (int i = 0; i < ENG_N; i++) c->engine_out_err[i][l] = c->own_layout ? NAN : 0;
        return AL_OK;
    }
    c->own_layout = !strcmp(ex->cfg.model_type, ATTNLAB_MLA_TYPE);    /* no engine runs it: attnlab's reading only */
    AttnLayer *b = NULL;
    int rc = attn_layer_load(ex, l, &b);
    if (rc == AL_OK) rc = check_layer_vs(src, b, l, X, pos, c, stock);
    attn_layer_free(b);
    return rc;
}

/* The logits of ids[T] under m with its RMSNorms' eps set to eps (every row; caller frees). */
static float *logits_with_eps(Model *m, double eps, const int *ids, size_t T) {
    double keep = m->cfg.norm_eps;
    m->cfg.norm_eps = eps;                   /* read once, by fwd_new */
    Forward *f = NULL;
    float *lg = al_malloc3(T, (size_t)m->cfg.vocab, sizeof(float), "logits");
    int rc = lg ? fwd_new(m, NULL, &f) : AL_ERR;
    m->cfg.norm_eps = keep;
    if (rc == AL_OK) rc = fwd_run(f, ids, T, FWD_LOGITS_ALL, lg);
    fwd_free(f);
    if (rc) { free(lg); return NULL; }
    return lg;
}

int mla_eps_effect(Model *src, double eps, size_t tokens, uint64_t seed, double *rel) {
    *rel = 0;
    if (fabs(eps - src->cfg.norm_eps) <= 1e-15 || src->cfg.vocab < 1) return AL_OK;
    size_t T = tokens ? tokens : 64, V = (size_t)src->cfg.vocab;
    int *ids = al_malloc3(T, 1, sizeof(int), "token ids");
    if (!ids) return AL_ERR;
    uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (size_t t = 0; t < T; t++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[t] = (int)(x % V);
    }
    float *a = logits_with_eps(src, src->cfg.norm_eps, ids, T), *b = a ? logits_with_eps(src, eps, ids, T) : NULL;
    double d = 0, big = 0;
    for (size_t i = 0; b && i < T * V; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        big = fmax(big, fabs((double)a[i]));
    }
    int rc = b ? AL_OK : AL_ERR;
    *rel = rc == AL_OK && big > 0 ? d / big : NAN;
    free(a); free(b); free(ids);
    return rc;
}

/* The perplexity of the text's windows under m (stock overrides where given; eps > 0: every norm's
 * eps, as the export's config.json sets it). */
static int ppl_of(Model *m, AttnLayer *const *over, double eps, const MlaCheckIn *in, FwdPpl *p) {
    Forward *f = NULL;
    int rc = fwd_new(m, NULL, &f);
    if (rc == AL_OK) fwd_set_compute(f, in->compute);
    if (rc == AL_OK && eps > 0) fwd_set_norm_eps(f, eps);
    for (int l = 0; rc == AL_OK && over && l < m->cfg.n_layers; l++)
        if (over[l]) rc = fwd_set_attn(f, l, over[l]);
    if (rc == AL_OK) rc = fwd_ppl(f, in->ids, in->n, in->seqlen, p);
    fwd_free(f);
    return rc;
}

/* ppl_of m without, then with the overrides (at eps), in one pass over its weights (fwd_ppl_pair: the
 * same numbers bit for bit as the two passes). */
static int ppl_pair_of(Model *m, AttnLayer *const *over, double eps, const MlaCheckIn *in, FwdPpl *a, FwdPpl *b) {
    Forward *f = NULL;
    int rc = fwd_new(m, NULL, &f);
    if (rc == AL_OK) fwd_set_compute(f, in->compute);
    if (rc == AL_OK) rc = fwd_ppl_pair(f, (const AttnLayer *const *)over, eps, in->ids, in->n, in->seqlen, a, b);
    fwd_free(f);
    return rc;
}

/* Whole models: the NLL of the text's windows (in->ids; none: no perplexity), the source against
 * the export run as stock (at eps, see ppl_of); one pass where the export is the source's model with
 * the stock layers swapped in (the session's check), two where it is another model (`check DIR`). */
static int check_nll(Model *src, Model *ex, AttnLayer *const *over, double eps, const MlaCheckIn *in, MlaCheck *c) {
    c->nll_source = c->nll_export = NAN;
    if (!in->ids || in->n < 2) return AL_OK;
    FwdPpl a, b;
    int rc = AL_OK;
    if (src == ex && over) rc = ppl_pair_of(src, over, eps, in, &a, &b);
    else {
        rc = ppl_of(src, NULL, 0, in, &a);
        if (rc == AL_OK) rc = ppl_of(ex, over, eps, in, &b);
    }
    if (rc == AL_INTERRUPTED) return rc;
    if (rc) {
        note(c, "whole-model perplexity not measured: %s", al_errmsg());
        al_err_clear();
    } else {
        c->nll_source = a.nll;
        c->nll_export = b.nll;
        c->nll_tokens = b.tokens;
    }
    return AL_OK;
}

/* "vLLM, SGLang": the engines (bits of ENG_* rows) in want, into buf. */
static const char *engine_list(unsigned want, char *buf, size_t cap) {
    buf[0] = 0;
    for (int i = 0; i < ENG_N; i++)
        if (want & (1u << i))
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "", engine_row(i)->name);
    return buf;
}

/* The largest of a per-layer array (NaN entries skipped). */
static double worst_of(const double *v, int n) {
    double w = 0;
    for (int l = 0; l < n; l++)
        if (!isnan(v[l])) w = fmax(w, v[l]);
    return w;
}

/* The eps the export's latent norms were built for: its manifest's latent_norm_eps (the config's
 * rms_norm_eps when the manifest has none). */
static double built_eps(const MlaCheck *c) {
    cJSON *m = c->export_path ? mla_manifest(c->export_path) : NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "latent_norm_eps");
    double eps = cJSON_IsNumber(v) && v->valuedouble > 0 ? v->valuedouble : c->latent_eps;
    cJSON_Delete(m);
    al_err_clear();
    return eps;
}

/* The latent eps note: engines normalising the latents with another eps than the norms were built
 * for (engine_latent_eps_off), and what the user can do about it. */
static void eps_note(MlaCheck *c, unsigned off, double w) {
    double built = built_eps(c), common = engine_common_eps();
    char ph[160];
    bool cfg_off = fabs(c->latent_eps - built) > 1e-9 * built;
    note(c, "latent eps: %s, not %g, the eps the export's latent norms were built for (%s latent_norm_eps; rms_norm_eps "
            "is %g%s): largest output error %.3g there (the column%s); %s so that all agree",
         engine_eps_phrase(off, c->latent_eps, ph, sizeof ph), built, MLA_MANIFEST, c->latent_eps,
         cfg_off ? ", which attnlab reads for them too: out_err_attnlab" : "", w, __builtin_popcount(off) > 1 ? "s" : "",
         fabs(built - common) <= 1e-9 * common
             ? "write that eps back as rms_norm_eps in config.json"
             : "export the conversion again with `export DIR` (its default builds the latent norms for 1e-06 and writes "
               "rms_norm_eps 1e-06)");
}

/* Notes on what stock engines compute differently from attnlab's reading of the export (its config
 * ec; kvb, ob: it holds kv_a_proj_with_mqa / o_proj biases), each from the rows of core/model/engines.h. */
static void check_notes(Model *src, const ModelConfig *ec, bool has_kvb, bool has_ob, MlaCheck *c, bool qbias) {
    double worst = worst_of(c->out_err, c->n_layers), worst_own = worst_of(c->own_out_err, c->n_layers);
    unsigned eps_off = engine_latent_eps_off(c->latent_eps, built_eps(c)), nobias = 0;
    double w_eps = 0, w_nb = 0;
    for (int i = 0; i < ENG_N; i++) {
        const Engine *e = engine_row(i);
        double w = worst_of(c->engine_out_err[i], c->n_layers);
        if (eps_off >> i & 1) w_eps = fmax(w_eps, w);
        if (!e->attn_bias) { nobias |= 1u << i; w_nb = fmax(w_nb, w); }
    }
    char l1[64], l2[64];
    if (eps_off) eps_note(c, eps_off, w_eps);
    if (qbias)
        note(c, "q_proj.bias: no DeepSeek-V3 engine builds a q_proj bias, so stock engines drop it (largest output "
                "error %.3g; %.3g as attnlab reads it); convert with q-rank to carry it in q_a_proj.bias", worst, worst_own);
    if (nobias && (has_kvb || has_ob))
        note(c, "attention biases: %s read them (attention_bias true); %s build DeepSeek-V3 attention without biases "
                "and skip them: largest output error without them %.3g", engine_list(~nobias & ((1u << ENG_N) - 1), l1,
                sizeof l1), engine_list(nobias, l2, sizeof l2), w_nb);
    double eff = NAN;
    if (fabs(src->cfg.norm_eps - ec->norm_eps) > 1e-15) {
        char why[160] = "";
        if (mla_eps_effect(src, ec->norm_eps, 64, 1, &eff)) {       /* a note, not the check's failure */
            snprintf(why, sizeof why, " (not measured: %s)", al_interrupted() ? "interrupted" : al_errmsg());
            al_err_clear();
        }
        note(c, "rms_norm_eps: the export's %g is not the source's %g, so that every engine normalises the latents "
                "alike; the model's other RMSNorms (input, post-attention, final) use it too: on the source alone that "
                "moves the logits by %.3g of their largest (64 token ids)%s", ec->norm_eps, src->cfg.norm_eps, eff, why);
    }
    unsigned sig = 0;                                 /* a softmax top-k MoE export (moe_export.h) */
    for (int i = 0; i < ENG_N; i++) sig |= (unsigned)!engine_row(i)->scoring_func << i;
    if (ec->mlp == MLP_MOE && ec->moe.softmax && sig)
        note(c, "MoE routing: %s score%s the DeepSeek-V3 router with a sigmoid whatever scoring_func says (and fail%s on "
                "n_shared_experts null); %s route softmax top-k%s as the source does, and so "
                "does attnlab's forward pass (its perplexity)", engine_list(sig, l1, sizeof l1), __builtin_popcount(sig) > 1 ? "" : "s",
             __builtin_popcount(sig) > 1 ? "" : "s", engine_list(~sig & ((1u << ENG_N) - 1), l2, sizeof l2),
             ec->moe.norm_topk_prob ? " renormalised" : "");
    rope_scaling_kind sk = src->cfg.rope_spec.scaling.kind, ek = ec->rope_spec.scaling.kind;
    if (sk != ek)
        note(c, "RoPE: the source's rope_scaling %s has no DeepSeek-V3 form; the export turns at %s frequencies "
                "(included in the errors above; they grow with position)", rope_scaling_name(&src->cfg.rope_spec.scaling),
             rope_scaling_name(&ec->rope_spec.scaling));
}

/* The check's per-layer error arrays (n each); false when out of memory. */
static bool check_arrays(MlaCheck *c, size_t n) {
    double **arr[3 + ENG_N] = {&c->score_err, &c->out_err, &c->own_out_err};
    for (int i = 0; i < ENG_N; i++) arr[3 + i] = &c->engine_out_err[i];
    bool ok = true;
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) ok &= (*arr[i] = al_calloc(n, sizeof(double), "errors")) != NULL;
    return ok;
}

/* Opens the export and its source; fills the check's header and arrays. */
static int check_open(const char *dir, Model **src, Model **ex, Model **own, MlaCheck *c) {
    int rc = model_open(dir, ex);
    if (rc == AL_OK && !cfg_is_mla(&(*ex)->cfg) && !(*ex)->cfg.kv_rebuild)       /* attnlab's qk-norm keep: GQA */
        rc = al_err("%s is a %s model, not MLA: check compares a TransMLA export with its source", dir, (*ex)->cfg.model_type);
    if (rc == AL_OK && !*src) {
        char *sp = manifest_source(dir);
        rc = sp ? model_open(sp, own) : AL_ERR;
        free(sp);
        *src = *own;
    }
    if (rc == AL_OK && (*src)->cfg.n_layers != (*ex)->cfg.n_layers)
        rc = al_err("%s has %d layer%s but the source %s has %d: not its export", dir, (*ex)->cfg.n_layers, al_s((*ex)->cfg.n_layers), (*src)->path,
                    (*src)->cfg.n_layers);
    if (rc) return rc;
    size_t n = (size_t)(*ex)->cfg.n_layers;
    c->export_path = al_strdup(dir);
    c->source_path = al_strdup((*src)->path);
    c->n_layers = (int)n;
    bool arrays = check_arrays(c, n);
    c->kv_source = cfg_kv_values(&(*src)->cfg);
    c->kv_export = cfg_kv_values(&(*ex)->cfg);
    c->latent_eps = (*ex)->cfg.norm_eps;
    return c->export_path && c->source_path && arrays ? AL_OK : AL_ERR;
}

int mla_exportable(const TmlaResult *r) {
    bool bias;
    return check_exportable(r, &bias);
}

/* Layer l's inputs (T, hidden): as `convert mla` drew its report's (l < 0: standard normal). */
static Mat *layer_inputs_of(const MlaCheckIn *in, size_t T, int hidden, int l) {
    const double *S = in->sigma && l >= 0 ? in->sigma[l] : NULL;
    if (!S) return attn_random_input(T, hidden, in->seed);
    return tmla_eval_inputs(T, hidden, in->seed, S, in->mu ? in->mu[l] : NULL);
}

/* Layer l of the session's conversion against the source (0 when the layer was not converted). */
static int session_layer(const TmlaResult *r, int l, const Mat *X, const int *pos, MlaCheck *c) {
    c->score_err[l] = c->out_err[l] = 0;
    if (r->layers[l]) {
        AttnLayer *a = NULL;
        AttnOut *oa = NULL, *ob = NULL;
        int rc = attn_layer_load(r->src, l, &a);
        if (rc == AL_OK) rc = attn_eval(a, X, pos, true, &oa);
        if (rc == AL_OK) rc = attn_eval(r->layers[l], X, pos, true, &ob);
        if (rc == AL_OK) attn_rel_err(oa, ob, &c->score_err[l], &c->out_err[l]);
        attn_out_free(oa); attn_out_free(ob); attn_layer_free(a);
        if (rc) return rc;
    }
    c->own_out_err[l] = c->out_err[l];    /* no latent norm: no eps, no stock form */
    for (int i = 0; i < ENG_N; i++) c->engine_out_err[i][l] = c->out_err[l];
    return AL_OK;
}

int mla_check_session(const TmlaResult *r, const char *why, const MlaCheckIn *in, MlaCheck **out) {
    *out = NULL;
    MlaCheck *c = al_calloc(1, sizeof *c, "a check");
    if (!c) return AL_ERR;
    size_t n = (size_t)r->n_layers, T = in->tokens ? in->tokens : 64;
    c->in_session = true;
    c->source_path = al_strdup(r->src->path);
    c->n_layers = r->n_layers;
    bool arrays = check_arrays(c, n);
    c->kv_source = cfg_kv_values(&r->src->cfg);
    c->kv_export = r->kv_after;
    c->latent_eps = NAN;
    int *pos = al_malloc3(T, 1, sizeof(int), "positions");
    int rc = c->source_path && arrays && pos ? AL_OK : AL_ERR;
    for (size_t t = 0; pos && t < T; t++) pos[t] = (int)t;
    for (int l = 0; rc == AL_OK && l < c->n_layers; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        Mat *X = layer_inputs_of(in, T, r->src->cfg.hidden, l);
        rc = X ? session_layer(r, l, X, pos, c) : AL_ERR;
        mat_free(X);
        al_progress("layer", (size_t)l + 1, n);
    }
    if (rc == AL_OK) {
        note(c, "no DeepSeek-V3 export (%s): the conversion is checked as the session holds it, without the latent "
                "RMSNorms a DeepSeek-V3 engine would add", why && *why ? why : "not exportable");
        rc = check_nll(r->src, r->src, r->layers, 0, in, c);
    }
    free(pos);
    if (rc) { mla_check_free(c); return rc; }
    *out = c;
    return AL_OK;
}

/* Stock layer S (built for r's export, changed in place) as its export reads back (attn_layer_load of config
 * ec): the softmax scale, YaRN's factor, the RoPE layout and frequencies from ec (the source's rope_scaling
 * may have no DeepSeek-V3 form: the export turns at ec's); the matrices S's (float32 holds them exactly). */
static int stock_as_read(AttnLayer *S, const ModelConfig *ec, int l) {
    S->scale = cfg_attn_scale(ec, l);
    S->rope_mscale = rope_attention_factor(&ec->rope_spec);
    S->rope = ec->rope_spec.layout;
    S->norm_eps = ec->norm_eps;
    return S->rope_dim ? rope_inv_freq(&ec->rope_spec, S->rope_dim, ec->rope_spec.theta, S->inv_freq, "the export") : AL_OK;
}

/* The config.json a float32 export of r writes (make_config), parsed as model_open parses it. */
static int stock_config(const TmlaResult *r, bool bias, double eps, ModelConfig *ec) {
    cJSON *cfg = make_config(r, bias, DT_F32, eps);
    char *txt = cfg ? cJSON_PrintUnformatted(cfg) : NULL;
    cJSON_Delete(cfg);
    int rc = txt ? model_config_parse(txt, "the export's config.json", ec) : al_err("out of memory writing config.json");
    free(txt);
    return rc;
}

/* The header and arrays of a check of r's stock layers in memory (config ec). */
static int stock_check_open(const TmlaResult *r, const ModelConfig *ec, MlaCheck *c) {
    c->stock_session = true;
    c->source_path = al_strdup(r->src->path);
    c->n_layers = r->n_layers;
    bool arrays = check_arrays(c, (size_t)r->n_layers);
    c->kv_source = cfg_kv_values(&r->src->cfg);
    c->kv_export = cfg_kv_values(ec);
    c->latent_eps = ec->norm_eps;
    return c->source_path && arrays ? AL_OK : AL_ERR;
}

/* Every layer of the stock set st (as read back: changed in place) against the source; over[l]: the
 * layer the whole-model pass runs (st's, or its own stock view where that differs); *qbias: any view. */
static int stock_check_layers(const TmlaResult *r, StockSet *st, const ModelConfig *ec, const MlaCheckIn *in,
                              MlaCheck *c, AttnLayer **over, bool *qbias) {
    size_t T = in->tokens ? in->tokens : 64;
    int *pos = al_malloc3(T, 1, sizeof(int), "positions");
    int rc = pos ? AL_OK : AL_ERR;
    for (size_t t = 0; pos && t < T; t++) pos[t] = (int)t;
    for (int l = 0; rc == AL_OK && l < c->n_layers; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        AttnLayer *view = NULL;
        Mat *X = layer_inputs_of(in, T, r->src->cfg.hidden, l);
        rc = X ? stock_as_read(st->L[l], ec, l) : AL_ERR;
        if (rc == AL_OK) rc = check_layer_vs(r->src, st->L[l], l, X, pos, c, &view);
        mat_free(X);
        if (view) stock_share(view, st->L[l]);           /* its matrices st's but W_KVA / W_QA (its own copies) */
        *qbias |= view != NULL;
        over[l] = view ? view : st->L[l];
        al_progress("layer", (size_t)l + 1, (size_t)c->n_layers);
    }
    free(pos);
    return rc;
}

static int stock_latents_bf16(AttnLayer *S);

/* check_nll over the run layers (ppl's: mla_run_for), as stock engines run them: with qbias (a q_proj bias without a
 * query latent, which no DeepSeek-V3 engine builds) each layer's b_Q set aside for the pass and put back. */
static int check_nll_run(const TmlaResult *r, AttnLayer *const *run, bool qbias, double eps, const MlaCheckIn *in,
                         MlaCheck *c) {
    float **kept = qbias ? al_calloc((size_t)r->n_layers, sizeof *kept, "q_proj biases") : NULL;
    if (qbias && !kept) return AL_ERR;
    for (int l = 0; kept && l < r->n_layers; l++)
        if (stock_differs(run[l])) { kept[l] = run[l]->b_Q; run[l]->b_Q = NULL; }
    int rc = check_nll(r->src, r->src, (AttnLayer **)run, eps, in, c);
    for (int l = 0; kept && l < r->n_layers; l++)
        if (kept[l]) run[l]->b_Q = kept[l];
    free(kept);
    return rc;
}

int mla_check_stock(const TmlaResult *r, const MlaCheckIn *in, MlaCheck **out) {
    *out = NULL;
    bool bias, qbias = false;
    if (check_exportable(r, &bias)) return AL_ERR;
    MlaCheck *c = al_calloc(1, sizeof *c, "a check");
    AttnLayer **over = al_calloc((size_t)r->n_layers, sizeof *over, "stock layers");
    StockSet st = {0};
    ModelConfig ec;
    int rc = c && over ? stock_build(r, MLA_NORM_LINEAR, export_eps(r, NULL), &st) : AL_ERR;
    if (rc == AL_OK) rc = stock_config(r, bias, st.eps, &ec);
    if (rc == AL_OK) rc = stock_check_open(r, &ec, c);
    AttnLayer *const *run = NULL;                         /* ppl's layers in in->compute (mla_run_for) */
    if (rc == AL_OK) rc = mla_run_for((TmlaResult *)r, in->compute, &run);   /* its cache: the session's result */
    bool built = rc == AL_OK && run && run == r->run_bf16;   /* made in f32, checked in bf16: the BF16 export's */
    for (int l = 0; built && l < st.n; l++) stock_reshare(st.L[l], run[l]);
    if (rc == AL_OK && (c->stock_bf16 = built || tmla_held_bf16(r->layers, r->n_layers)))   /* its BF16 export's latents */
        for (int l = 0; rc == AL_OK && l < st.n; l++) rc = stock_latents_bf16(st.L[l]);
    if (rc == AL_OK) rc = stock_check_layers(r, &st, &ec, in, c, over, &qbias);
    if (rc == AL_OK && run != r->layers) rc = check_nll_run(r, run, qbias, ec.norm_eps, in, c);
    else if (rc == AL_OK) rc = check_nll(r->src, r->src, over, ec.norm_eps, in, c);
    if (rc == AL_OK) check_notes(r->src, &ec, bias, bias, c, qbias);
    if (rc == AL_OK && in->compute == MM_F32 && r->run)     /* said: which mode's numbers these are */
        note(c, "the conversion was made in compute bf16: its layers are its BF16 export's (the rewritten matrices rounded "
                "to BF16), run here with float32 products as `load` of that export runs in compute f32; convert again in "
                "compute f32 for its float32 layers");
    for (int l = 0; over && l < r->n_layers; l++)
        if (over[l] && over[l] != st.L[l]) stock_layer_free(over[l]);         /* the views */
    free(over);
    stock_free(&st);
    if (rc) { mla_check_free(c); return rc; }
    *out = c;
    return AL_OK;
}

int mla_check(const char *dir, Model *src, size_t tokens, uint64_t seed, MlaCheck **out) {
    return mla_check_in(dir, src, &(MlaCheckIn){.tokens = tokens, .seed = seed}, out);
}

/* True when every value of float matrix m is a BF16 value. */
static bool exact_bf16(const Mat *m) {
    for (size_t i = 0; i < m->rows * m->cols; i++)
        if (dt_bf16_to_f32(dt_f32_to_bf16(m->data[i])) != m->data[i]) return false;
    return true;
}

/* `check DIR` in compute bf16: stock view V (the export's layer less its q_proj bias) run as the forward pass runs the
 * loaded layer -- its matrices held in BF16 (exact: a BF16 export's values) and attended as_loaded, as the session's
 * run layers are (mla_run_for) -- so the whole-model pass is the loaded export's but for the bias. A matrix that is not
 * BF16 (an F32 export) leaves V as it is. */
static int view_as_loaded(AttnLayer *V) {
    static const attn_held slot[] = {AH_Q, AH_QA, AH_QB, AH_KVA, AH_KVB, AH_O};
    bool owned;
    for (size_t i = 0; i < sizeof slot / sizeof *slot; i++) {
        const Mat *m = V->held[slot[i]] ? NULL : attn_layer_mat(V, slot[i], &owned);
        al_err_clear();                                  /* a slot the layer does not have */
        if (m && (owned || !exact_bf16(m))) { if (owned) mat_free((Mat *)m); return AL_OK; }
    }
    for (size_t i = 0; i < sizeof slot / sizeof *slot; i++) {
        bool has = !V->held[slot[i]] && attn_layer_mat(V, slot[i], &owned);
        al_err_clear();
        if (has && attn_layer_hold_bf16(V, slot[i])) return AL_ERR;
    }
    V->as_loaded = true;
    return AL_OK;
}

int mla_check_in(const char *dir, Model *src, const MlaCheckIn *in, MlaCheck **out) {
    *out = NULL;
    Model *ex = NULL, *own = NULL;
    MlaCheck *c = al_calloc(1, sizeof *c, "a check");
    if (!c) return AL_ERR;
    int rc = check_open(dir, &src, &ex, &own, c);
    size_t T = in->tokens ? in->tokens : 64;
    int *pos = rc == AL_OK ? al_malloc3(T, 1, sizeof(int), "positions") : NULL;
    AttnLayer **over = rc == AL_OK ? al_calloc((size_t)c->n_layers, sizeof *over, "stock layers") : NULL;
    if (rc == AL_OK && (!pos || !over)) rc = AL_ERR;
    for (size_t t = 0; pos && t < T; t++) pos[t] = (int)t;
    bool qbias = false;
    for (int l = 0; rc == AL_OK && l < c->n_layers; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        Mat *X = layer_inputs_of(in, T, src->cfg.hidden, l < src->cfg.n_layers ? l : -1);
        rc = X ? check_layer(src, ex, l, X, pos, c, &over[l]) : AL_ERR;
        mat_free(X);
        qbias |= over[l] != NULL;
        al_progress("layer", (size_t)l + 1, (size_t)c->n_layers);
    }
    for (int l = 0; rc == AL_OK && in->compute == MM_BF16 && l < c->n_layers; l++)
        if (over[l]) rc = view_as_loaded(over[l]);
    if (rc == AL_OK) rc = check_nll(src, ex, over, 0, in, c);
    if (rc == AL_OK) compare_copies(src, ex, c);
    if (rc == AL_OK && !c->own_layout) {
        char kvb[256], ob[256];
        bool has_kvb = cfg_role_name(&ex->cfg, ROLE_KV_A, 0, 0, "bias", kvb, sizeof kvb) && store_has(ex->store, kvb);
        bool has_ob = cfg_role_name(&ex->cfg, ROLE_O, 0, 0, "bias", ob, sizeof ob) && store_has(ex->store, ob);
        check_notes(src, &ex->cfg, has_kvb, has_ob, c, qbias);
    }
    else if (rc == AL_OK)
        snprintf(c->notes, sizeof c->notes, "attnlab's own layout (model_type %s, `export DIR format attnlab`): no stock "
                 "engine runs it (`lint %s` says why); evaluated as attnlab reads it\n", ATTNLAB_MLA_TYPE, dir);
    for (int l = 0; over && l < c->n_layers; l++) attn_layer_free(over[l]);
    free(over);
    free(pos);
    model_free(ex);
    model_free(own);
    if (rc) { mla_check_free(c); return rc; }
    *out = c;
    return AL_OK;
}

/* A stock layer's scaled latent down-projections (its own copies) held in BF16, as the BF16 export rounds them. */
static int stock_latents_bf16(AttnLayer *S) {
    int rc = attn_layer_hold_bf16(S, AH_KVA);
    if (rc == AL_OK && S->q_rank) rc = attn_layer_hold_bf16(S, AH_QA);
    return rc;
}

/* v (n) rounded to BF16 in place (dt_f32_to_bf16, widened back). */
static void round_bf16(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = dt_bf16_to_f32(dt_f32_to_bf16(v[i]));
}

/* Run layer S (a stock layer as read back, sharing r's matrices) made to own what it shares but held matrices,
 * and its scaled latent down-projections held in BF16 as the BF16 export rounds them, and its o_proj as that export
 * writes it (BF16: the source's where it is BF16, else its values rounded); a float32 W_Q / W_QB / W_KVB (a
 * conversion not held in BF16: made in compute f32) rounded to BF16 as that export writes it. */
static int run_layer_own(AttnLayer *S) {
    for (int i = 0; stock_shared(S, i); i++)
        if (*stock_shared(S, i) && !(*stock_shared(S, i) = mat_copy(*stock_shared(S, i)))) return AL_ERR;
    S->as_loaded = true;
    int rc = stock_latents_bf16(S);
    if (rc == AL_OK && (!S->held[AH_O] || S->held[AH_O]->w.dt != DT_BF16))   /* an FP8 / F32 o_proj: the BF16 export's */
        rc = attn_layer_unhold(S, AH_O) ? AL_ERR : attn_layer_hold_bf16(S, AH_O);
    size_t rows, cols;                                  /* its biases as that export writes them: BF16 */
    if (S->b_Q && attn_layer_dims(S, AH_Q, &rows, &cols)) round_bf16(S->b_Q, cols);
    if (S->b_QA) round_bf16(S->b_QA, (size_t)S->q_rank);
    if (S->b_KVA && attn_layer_dims(S, AH_KVA, &rows, &cols)) round_bf16(S->b_KVA, cols);
    if (S->b_O && attn_layer_dims(S, AH_O, &rows, &cols)) round_bf16(S->b_O, cols);
    if (rc == AL_OK && S->W_Q && !S->q_rank) rc = attn_layer_hold_bf16(S, AH_Q);
    if (rc == AL_OK && S->W_QB) rc = attn_layer_hold_bf16(S, AH_QB);
    if (rc == AL_OK && S->W_KVB) rc = attn_layer_hold_bf16(S, AH_KVB);
    return rc;
}

/* r's layers as its BF16 DeepSeek-V3 export reads them back (run_layer_own) into *run; NULL when no such export
 * holds r. */
static int run_build(const TmlaResult *r, AttnLayer ***run) {
    bool bias;
    *run = NULL;
    if (check_exportable(r, &bias)) { al_err_clear(); return AL_OK; }      /* no DeepSeek-V3 form: layers[] run */
    StockSet st;
    ModelConfig ec;
    int rc = stock_build(r, MLA_NORM_LINEAR, export_eps(r, NULL), &st);
    if (rc == AL_OK) rc = stock_config(r, bias, st.eps, &ec);
    for (int l = 0; rc == AL_OK && l < st.n; l++) {
        rc = stock_as_read(st.L[l], &ec, l);
        if (rc == AL_OK) rc = run_layer_own(st.L[l]);
    }
    if (rc == AL_OK) { *run = st.L; st.L = NULL; }
    stock_free(&st);
    return rc ? al_err_ctx("the converted layers as the BF16 export runs them") : AL_OK;
}

int mla_run_layers(TmlaResult *r) {
    if (r->run || !tmla_held_bf16(r->layers, r->n_layers)) return AL_OK;
    return run_build(r, &r->run);
}

int mla_run_for(TmlaResult *r, mm_compute c, AttnLayer *const **layers) {
    *layers = r->run ? r->run : r->layers;
    if (r->run || c != MM_BF16 || r->run_none || !tmla_hold_bf16_default(r->src, c)) return AL_OK;
    if (!r->run_bf16 && run_build(r, &r->run_bf16)) return AL_ERR;
    r->run_none = !r->run_bf16;                        /* no DeepSeek-V3 export: asked once */
    if (r->run_bf16) *layers = r->run_bf16;
    return AL_OK;
}
