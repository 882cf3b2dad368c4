/* forward.c -- the float32 forward pass: config extras (activation, rope_scaling, windows),
 * weights (resident or streamed per layer), the layer kernels (norms, RoPE, attention over the
 * KV cache, MLPs) and the activation hooks. See forward.h for the contract.
 *
 * Row-vector convention throughout: activations are (T, width) row-major; an HF Linear weight
 * W (out, in) is applied as x @ W^T, a GPT-2 Conv1D weight W (in, out) as x @ W. */
#define _GNU_SOURCE
#include "forward.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyses.h"
#include "lin.h"
#include "rope.h"

#define QCHUNK 64          /* query rows per attention block */
#define LCHUNK 64          /* rows per logits block */

/* ================================================================ types */

typedef struct {
    Mat *w;                /* HF (out, in), or Conv1D (in, out) when io */
    Mat *b;                /* (1, out) or NULL */
    bool io;
    size_t in, out;
} Lin;

typedef struct {
    Mat *n1, *n1b, *n2, *n2b;     /* input / post-attention norms (1, D); biases for LayerNorm */
    Lin q, k, v, o;               /* GQA; MLA: q is q_proj or q_b_proj, o is o_proj */
    Lin qkv;                      /* GPT-2 c_attn (D, 3D) */
    Lin qa, kva, kvb;             /* MLA: q_a_proj (ql, D), kv_a_proj_with_mqa (kl + rope, D), kv_b_proj */
    Mat *qa_norm, *kva_norm;      /* MLA latent RMSNorms (1, ql), (1, kl) or NULL */
    Lin gate, up, down;           /* SwiGLU; GPT-2: up = c_fc, down = c_proj */
    bool loaded;
} LayerW;

typedef struct { float *p; size_t cap; } fbuf;

struct Forward {
    Model *m;
    const ModelConfig *c;
    bool gpt2, mla;
    size_t D, H, G, dqk, nope, rope, dv, ql, kl, ffn, vocab;   /* ffn: MLP width */
    act_kind act;
    double norm_eps;
    float *inv_freq;              /* (rope / 2) */
    float rope_mscale;            /* YaRN attention factor on cos / sin */
    rope_layout rope_lay;         /* pairs in the checkpoint's layout (DeepSeek's stay interleaved) */

    Mat *embed;                   /* (V, D) */
    Mat *wpe;                     /* GPT-2 (n_positions, D) */
    Mat *lm_head;                 /* (V, D), or NULL: tied to embed */
    Mat *norm, *norm_b;           /* final norm (1, D) */
    LayerW *layers;               /* (n_layers) */
    bool streaming;

    size_t max_ctx, pos, seq, cap;
    float **kc, **vc;             /* per layer: (cap, G dqk), (cap, G dv) keys after RoPE, values */
    FwdHooks hooks;
    const AttnLayer **over;       /* (n_layers) attention overrides (borrowed); NULL: the model's own */
    float **xin;                  /* (n_layers) overridden layers: (cap, D) normalized attention inputs
                                     (NULL exactly where there is no override, or before the cache) */
    int *opos;                    /* (cap) positions 0..cap-1 for attn_eval, or NULL */

    /* scratch, (rows, width) */
    fbuf x, h, q, k, v, att, f1, f2, lat, lat2, kvb, cs, sn, logit, scores;
    int nworkers;
};

/* ================================================================ small helpers */

const char *fwd_act_name(fwd_act_kind k) {
    switch (k) {
    case FWD_ATTN_IN: return "attn_in";
    case FWD_Q_LATENT: return "q_latent";
    case FWD_KV_LATENT: return "kv_latent";
    case FWD_Q: return "q";
    case FWD_K: return "k";
    case FWD_V: return "v";
    case FWD_Q_ROPE: return "q_rope";
    case FWD_K_ROPE: return "k_rope";
    case FWD_ATTN_OUT: return "attn_out";
    case FWD_ATTN_PROJ: return "attn_proj";
    default: return "?";
    }
}

/* Makes b hold at least a*b2 floats (contents not kept). */
static float *fb_fit(fbuf *b, size_t a, size_t b2, const char *what) {
    size_t n;
    if (!al_mul_ok(a, b2 ? b2 : 1, &n, what)) return NULL;
    if (n <= b->cap && b->p) return b->p;
    float *p = al_malloc3(n ? n : 1, 1, sizeof(float), what);
    if (!p) return NULL;
    free(b->p);
    b->p = p;
    b->cap = n;
    return p;
}

static void fb_free(fbuf *b) { free(b->p); b->p = NULL; b->cap = 0; }

static void lin_free(Lin *l) { mat_free(l->w); mat_free(l->b); l->w = l->b = NULL; }

static int xin_fit(Forward *f, int L, size_t cap);

/* y (T, out; row stride ldy) = x (T, in; stride ldx) @ W^T (+ b). */
static void lin_apply(const Lin *l, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    if (T == 1)
        cblas_sgemv(CblasRowMajor, l->io ? CblasTrans : CblasNoTrans, (int)l->w->rows, (int)l->w->cols, 1.f,
                    l->w->data, (int)l->w->cols, x, 1, 0.f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, l->io ? CblasNoTrans : CblasTrans, (int)T, (int)l->out, (int)l->in,
                    1.f, x, (int)ldx, l->w->data, (int)l->w->cols, 0.f, y, (int)ldy);
    if (l->b)
        for (size_t t = 0; t < T; t++) {
            float *r = y + t * ldy;
            for (size_t j = 0; j < l->out; j++) r[j] += l->b->data[j];
        }
}

/* out = RMSNorm(x) * w, rows of width n. */
static void rmsnorm(const float *x, size_t ldx, size_t T, size_t n, const float *w, double eps, float *out, size_t ldo) {
    for (size_t t = 0; t < T; t++) {
        const float *r = x + t * ldx;
        double ss = 0;
        for (size_t j = 0; j < n; j++) ss += (double)r[j] * r[j];
        float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
        float *o = out + t * ldo;
        for (size_t j = 0; j < n; j++) o[j] = r[j] * inv * w[j];
    }
}

/* out = LayerNorm(x) * w + b. */
static void layernorm(const float *x, size_t T, size_t n, const float *w, const float *b, double eps, float *out) {
    for (size_t t = 0; t < T; t++) {
        const float *r = x + t * n;
        double mean = 0, var = 0;
        for (size_t j = 0; j < n; j++) mean += r[j];
        mean /= (double)n;
        for (size_t j = 0; j < n; j++) var += (r[j] - mean) * (r[j] - mean);
        float inv = (float)(1.0 / sqrt(var / (double)n + eps));
        float *o = out + t * n;
        for (size_t j = 0; j < n; j++) o[j] = (float)(r[j] - mean) * inv * w[j] + (b ? b[j] : 0.f);
    }
}

static float act_apply(act_kind a, float x) {
    switch (a) {
    case ACT_SILU: return x / (1.f + expf(-x));
    case ACT_GELU: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case ACT_GELU_TANH: return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_UNKNOWN: break;
    }
    return x;
}

/* ================================================================ the description */

/* What the pass takes from the model's description (core/config.h): activation, norm epsilon,
 * RoPE frequencies (float) and YaRN's attention factor. Refusals are analysis_check's. */
static int take_description(Forward *f) {
    const ModelConfig *c = f->c;
    f->act = c->act;
    f->norm_eps = c->norm_eps > 0 ? c->norm_eps : 1e-5;
    f->rope_lay = c->rope_spec.layout;
    f->rope_mscale = 1.f;
    size_t half = f->rope / 2;
    if (!half) return AL_OK;
    f->inv_freq = al_malloc3(half, 1, sizeof(float), "RoPE frequencies");
    double *base = al_malloc3(half, 1, sizeof(double), "RoPE frequencies");
    int rc = f->inv_freq && base ? rope_inv_freq(&c->rope_spec, (int)f->rope, c->rope_spec.theta, base, f->m->path) : AL_ERR;
    if (rc == AL_OK) vec_d2f(base, half, f->inv_freq);
    f->rope_mscale = (float)rope_attention_factor(&c->rope_spec);
    free(base);
    return rc;
}

/* ================================================================ weights */

/* Full name of a global tensor ("embed_tokens.weight" under the family's prefix). */
static char *global_name(const Forward *f, const char *suffix) { return al_asprintf("%s%s", f->c->prefix, suffix); }

/* Reads (or, with dry, only checks and counts) tensor `name` of shape (rows, cols). */
static int load_mat(Forward *f, const char *name, size_t rows, size_t cols, bool dry, size_t *bytes, Mat **out) {
    size_t R, C;
    if (store_shape2(f->m->store, name, &R, &C) != AL_OK) return AL_ERR;
    if (R * C != rows * cols || (rows > 1 && (R != rows || C != cols)))
        return al_err("tensor '%s' has shape [%zu, %zu] but the forward pass of this %s model needs [%zu, %zu]", name, R,
                      C, f->c->model_type, rows, cols);
    if (bytes) *bytes += R * C * sizeof(float);
    if (dry) return AL_OK;
    return store_read(f->m->store, name, out);
}

/* A linear layer `base`.weight (+ optional `base`.bias) of layer L (L < 0: global). */
static int load_lin(Forward *f, int L, const char *base, size_t in, size_t out, bool io, bool dry, size_t *bytes, Lin *l) {
    char *w = L >= 0 ? model_tensor_name(f->m, L, base) : global_name(f, base);
    char *wn = w ? al_asprintf("%s.weight", w) : NULL, *bn = w ? al_asprintf("%s.bias", w) : NULL;
    int rc = wn && bn ? AL_OK : AL_ERR;
    l->io = io;
    l->in = in;
    l->out = out;
    if (rc == AL_OK) rc = load_mat(f, wn, io ? in : out, io ? out : in, dry, bytes, &l->w);
    if (rc == AL_OK && store_has(f->m->store, bn)) rc = load_mat(f, bn, 1, out, dry, bytes, &l->b);
    free(w);
    free(wn);
    free(bn);
    return rc;
}

/* A norm weight (and optional bias) `base`.weight of layer L (L < 0: global). */
static int load_norm(Forward *f, int L, const char *base, size_t n, bool dry, size_t *bytes, Mat **w, Mat **b) {
    char *p = L >= 0 ? model_tensor_name(f->m, L, base) : global_name(f, base);
    char *wn = p ? al_asprintf("%s.weight", p) : NULL, *bn = p ? al_asprintf("%s.bias", p) : NULL;
    int rc = wn && bn ? load_mat(f, wn, 1, n, dry, bytes, w) : AL_ERR;
    if (rc == AL_OK && b && store_has(f->m->store, bn)) rc = load_mat(f, bn, 1, n, dry, bytes, b);
    free(p);
    free(wn);
    free(bn);
    return rc;
}

static void layer_release(Forward *f, int L) {
    LayerW *w = &f->layers[L];
    mat_free(w->n1); mat_free(w->n1b); mat_free(w->n2); mat_free(w->n2b);
    mat_free(w->qa_norm); mat_free(w->kva_norm);
    Lin *ls[] = {&w->q, &w->k, &w->v, &w->o, &w->qkv, &w->qa, &w->kva, &w->kvb, &w->gate, &w->up, &w->down};
    for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) lin_free(ls[i]);
    memset(w, 0, sizeof *w);
    char *prefix = model_tensor_name(f->m, L, "");
    if (prefix) store_release_prefix(f->m->store, prefix);
    free(prefix);
}

/* The MLP of a Llama-style or DeepSeek layer (MoE layers were refused by analysis_check). */
static int load_swiglu(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    size_t D = f->D, FF = f->ffn;
    int rc = load_lin(f, L, "mlp.gate_proj", D, FF, false, dry, bytes, &w->gate);
    if (rc == AL_OK) rc = load_lin(f, L, "mlp.up_proj", D, FF, false, dry, bytes, &w->up);
    if (rc == AL_OK) rc = load_lin(f, L, "mlp.down_proj", FF, D, false, dry, bytes, &w->down);
    return rc;
}

/* Loads (or with dry, checks and counts) every weight of layer L. */
static int layer_load(Forward *f, int L, bool dry, size_t *bytes) {
    LayerW *w = &f->layers[L];
    if (!dry && w->loaded) return AL_OK;
    LayerW tmp = {0};
    LayerW *dst = dry ? &tmp : w;
    size_t D = f->D, H = f->H, G = f->G, dqk = f->dqk, dv = f->dv;
    int rc;
    if (f->gpt2) {
        rc = load_norm(f, L, "ln_1", D, dry, bytes, &dst->n1, &dst->n1b);
        if (rc == AL_OK) rc = load_norm(f, L, "ln_2", D, dry, bytes, &dst->n2, &dst->n2b);
        if (rc == AL_OK) rc = load_lin(f, L, "attn.c_attn", D, 3 * D, true, dry, bytes, &dst->qkv);
        if (rc == AL_OK) rc = load_lin(f, L, "attn.c_proj", D, D, true, dry, bytes, &dst->o);
        if (rc == AL_OK) rc = load_lin(f, L, "mlp.c_fc", D, f->ffn, true, dry, bytes, &dst->up);
        if (rc == AL_OK) rc = load_lin(f, L, "mlp.c_proj", f->ffn, D, true, dry, bytes, &dst->down);
    } else {
        rc = load_norm(f, L, "input_layernorm", D, dry, bytes, &dst->n1, NULL);
        if (rc == AL_OK) rc = load_norm(f, L, "post_attention_layernorm", D, dry, bytes, &dst->n2, NULL);
        if (rc == AL_OK && f->mla) {
            if (f->ql) {
                rc = load_lin(f, L, "self_attn.q_a_proj", D, f->ql, false, dry, bytes, &dst->qa);
                if (rc == AL_OK && f->c->latent_norm)
                    rc = load_norm(f, L, "self_attn.q_a_layernorm", f->ql, dry, bytes, &dst->qa_norm, NULL);
                if (rc == AL_OK) rc = load_lin(f, L, "self_attn.q_b_proj", f->ql, H * dqk, false, dry, bytes, &dst->q);
            } else
                rc = load_lin(f, L, "self_attn.q_proj", D, H * dqk, false, dry, bytes, &dst->q);
            if (rc == AL_OK) rc = load_lin(f, L, "self_attn.kv_a_proj_with_mqa", D, f->kl + f->rope, false, dry, bytes, &dst->kva);
            if (rc == AL_OK && f->c->latent_norm)
                rc = load_norm(f, L, "self_attn.kv_a_layernorm", f->kl, dry, bytes, &dst->kva_norm, NULL);
            if (rc == AL_OK) rc = load_lin(f, L, "self_attn.kv_b_proj", f->kl, H * (f->nope + dv), false, dry, bytes, &dst->kvb);
        } else if (rc == AL_OK) {
            rc = load_lin(f, L, "self_attn.q_proj", D, H * dqk, false, dry, bytes, &dst->q);
            if (rc == AL_OK) rc = load_lin(f, L, "self_attn.k_proj", D, G * dqk, false, dry, bytes, &dst->k);
            if (rc == AL_OK) rc = load_lin(f, L, "self_attn.v_proj", D, G * dv, false, dry, bytes, &dst->v);
        }
        if (rc == AL_OK) rc = load_lin(f, L, "self_attn.o_proj", H * dv, D, false, dry, bytes, &dst->o);
        if (rc == AL_OK) rc = load_swiglu(f, L, dry, bytes, dst);
    }
    if (rc != AL_OK) {
        if (!dry) layer_release(f, L);
        return al_err_ctx("forward pass, layer %d", L);
    }
    if (!dry) w->loaded = true;
    return AL_OK;
}

/* Embeddings, final norm and LM head. */
static int load_globals(Forward *f, size_t *bytes) {
    const char *emb = f->gpt2 ? "wte.weight" : "embed_tokens.weight";
    char *n = global_name(f, emb);
    int rc = n ? load_mat(f, n, f->vocab, f->D, false, bytes, &f->embed) : AL_ERR;
    free(n);
    if (rc == AL_OK && f->gpt2) {
        n = global_name(f, "wpe.weight");
        size_t R = 0, C = 0;
        rc = n ? store_shape2(f->m->store, n, &R, &C) : AL_ERR;
        if (rc == AL_OK) rc = load_mat(f, n, R, f->D, false, bytes, &f->wpe);
        free(n);
    }
    if (rc == AL_OK) rc = load_norm(f, -1, f->gpt2 ? "ln_f" : "norm", f->D, false, bytes, &f->norm, &f->norm_b);
    if (rc == AL_OK && store_has(f->m->store, "lm_head.weight"))
        rc = load_mat(f, "lm_head.weight", f->vocab, f->D, false, bytes, &f->lm_head);
    else if (rc == AL_OK && !f->c->tie_embeddings && !f->gpt2)
        rc = al_err("%s: no lm_head.weight and tie_word_embeddings is not set: the output projection is missing",
                    f->m->path);
    return rc;
}

/* The weight budget in bytes. */
static size_t mem_budget(const FwdOptions *opt) {
    if (opt && opt->mem_budget) return opt->mem_budget;
    const char *e = getenv("ATTNLAB_FWD_MEM");
    if (e && *e) return (size_t)strtoull(e, NULL, 10);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)((double)pages * (double)psz * 0.6) : (size_t)8 << 30;
}

/* ================================================================ new / free */

void fwd_free(Forward *f) {
    if (!f) return;
    if (f->layers)
        for (int L = 0; L < f->c->n_layers; L++) layer_release(f, L);
    free(f->layers);
    mat_free(f->embed); mat_free(f->wpe); mat_free(f->lm_head); mat_free(f->norm); mat_free(f->norm_b);
    if (f->kc)
        for (int L = 0; L < f->c->n_layers; L++) { free(f->kc[L]); free(f->vc[L]); }
    if (f->xin)
        for (int L = 0; L < f->c->n_layers; L++) free(f->xin[L]);
    free(f->kc);
    free(f->vc);
    free(f->xin);
    free(f->over);
    free(f->opos);
    free(f->inv_freq);
    fbuf *bs[] = {&f->x, &f->h, &f->q, &f->k, &f->v, &f->att, &f->f1, &f->f2, &f->lat, &f->lat2, &f->kvb, &f->cs,
                  &f->sn, &f->logit, &f->scores};
    for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) fb_free(bs[i]);
    free(f);
}

int fwd_new(Model *m, const FwdOptions *opt, Forward **out) {
    *out = NULL;
    const ModelConfig *c = &m->cfg;
    Forward *f = al_calloc(1, sizeof *f, "a forward pass");
    if (!f) return AL_ERR;
    f->m = m;
    f->c = c;
    f->gpt2 = c->family == FAM_GPT2;
    f->mla = cfg_is_mla(c);
    f->D = (size_t)c->hidden;
    f->H = (size_t)c->n_heads;
    f->G = f->mla ? f->H : (size_t)c->n_kv_heads;
    f->nope = (size_t)c->qk_nope_dim;
    f->rope = (size_t)c->qk_rope_dim;
    f->dqk = f->nope + f->rope;
    f->dv = (size_t)c->v_dim;
    f->ql = (size_t)c->q_lora_rank;
    f->kl = (size_t)c->kv_lora_rank;
    f->ffn = (size_t)c->intermediate;
    f->vocab = (size_t)c->vocab;
    int rc = analysis_check(m, AN_PPL);
    if (rc == AL_OK) rc = take_description(f);
    size_t maxc = opt && opt->max_ctx ? opt->max_ctx : c->max_pos > 0 ? (size_t)c->max_pos : 4096;
    f->layers = al_calloc((size_t)c->n_layers, sizeof *f->layers, "layer weights");
    f->kc = al_calloc((size_t)c->n_layers, sizeof *f->kc, "the KV cache");
    f->vc = al_calloc((size_t)c->n_layers, sizeof *f->vc, "the KV cache");
    f->over = al_calloc((size_t)c->n_layers, sizeof *f->over, "attention overrides");
    f->xin = al_calloc((size_t)c->n_layers, sizeof *f->xin, "attention overrides");
    if (!f->layers || !f->kc || !f->vc || !f->over || !f->xin) rc = AL_ERR;
    size_t layer_bytes = 0, glob_bytes = 0;
    for (int L = 0; rc == AL_OK && L < c->n_layers; L++) rc = layer_load(f, L, true, &layer_bytes);
    if (rc == AL_OK) rc = load_globals(f, &glob_bytes);
    if (rc == AL_OK && f->wpe && maxc > f->wpe->rows) maxc = f->wpe->rows;
    f->max_ctx = maxc;
    f->streaming = layer_bytes + glob_bytes > mem_budget(opt);
    for (int L = 0; rc == AL_OK && !f->streaming && L < c->n_layers; L++) rc = layer_load(f, L, false, NULL);
    f->nworkers = lin_sweep_threads(f->H, 0);
    if (rc != AL_OK) { fwd_free(f); return rc; }
    *out = f;
    return AL_OK;
}

void fwd_reset(Forward *f) { f->pos = 0; f->seq++; }
size_t fwd_pos(const Forward *f) { return f->pos; }
size_t fwd_vocab(const Forward *f) { return f->vocab; }
size_t fwd_max_ctx(const Forward *f) { return f->max_ctx; }
bool fwd_streaming(const Forward *f) { return f->streaming; }

void fwd_set_hooks(Forward *f, const FwdHooks *h) {
    if (h) f->hooks = *h;
    else memset(&f->hooks, 0, sizeof f->hooks);
}

Model *fwd_model(const Forward *f) { return f->m; }

double fwd_attn_scale(const Forward *f, int layer) { return cfg_attn_scale(f->c, layer); }

size_t fwd_attn_window(const Forward *f, int layer) { return cfg_layer_window(f->c, layer); }

int fwd_set_attn(Forward *f, int layer, const AttnLayer *L) {
    int n = f->c->n_layers;
    if (layer < 0 || layer >= n) return al_err("attention override: layer %d is out of range 0-%d", layer, n - 1);
    if (L && (L->hidden < 0 || (size_t)L->hidden != f->D))
        return al_err("attention override of layer %d: the layer reads %d-wide inputs, the model's hidden size is %zu",
                      layer, L->hidden, f->D);
    if (L && attn_layer_validate(L)) return al_err_ctx("attention override of layer %d", layer);
    if (L && f->cap && !f->xin[layer] && xin_fit(f, layer, f->cap)) return AL_ERR;
    if (!L) {                                  /* the input cache goes with the override */
        free(f->xin[layer]);
        f->xin[layer] = NULL;
    }
    f->over[layer] = L;
    fwd_reset(f);
    return AL_OK;
}

void fwd_clear_attn(Forward *f) {
    bool any = false;
    for (int L = 0; L < f->c->n_layers; L++) {
        any |= f->over[L] != NULL;
        f->over[L] = NULL;
        free(f->xin[L]);
        f->xin[L] = NULL;
    }
    if (any) fwd_reset(f);
}

/* ================================================================ kernels */

/* Calls the hook for `kind` over rows [0, T) in chunks. */
static int hook(Forward *f, fwd_act_kind kind, int L, const float *x, size_t T, size_t heads, size_t hd, size_t ld) {
    if (!(f->hooks.mask & kind) || !f->hooks.fn) return AL_OK;
    size_t step = f->hooks.chunk ? f->hooks.chunk : T;
    for (size_t t0 = 0; t0 < T; t0 += step) {
        FwdAct a = {.kind = kind, .layer = L, .seq = f->seq, .pos0 = f->pos + t0, .t0 = t0,
                    .T = T - t0 < step ? T - t0 : step, .heads = heads, .head_dim = hd, .ld = ld, .x = x + t0 * ld};
        int rc = f->hooks.fn(&a, f->hooks.ud);
        if (rc != AL_OK) return rc == AL_ERR ? al_err_ctx("%s hook, layer %d", fwd_act_name(kind), L) : rc;
    }
    return AL_OK;
}

/* cos / sin (T, rope/2) of positions pos .. pos+T-1, times the YaRN attention factor. */
static int fwd_rope_tables(Forward *f, size_t T) {
    size_t half = f->rope / 2;
    if (!half) return AL_OK;
    float *cs = fb_fit(&f->cs, T, half, "RoPE tables"), *sn = fb_fit(&f->sn, T, half, "RoPE tables");
    if (!cs || !sn) return AL_ERR;
    rope_tables(cs, sn, T, f->pos, f->inv_freq, half, f->rope_mscale);
    return AL_OK;
}

/* Rotates the RoPE columns [nope, nope + rope) of every head of x (T rows, stride ld). */
static void rope_apply(const Forward *f, float *x, size_t T, size_t ld, size_t heads) {
    size_t half = f->rope / 2;
    for (size_t t = 0; t < T; t++) {
        const float *cs = f->cs.p + t * half, *sn = f->sn.p + t * half;
        for (size_t h = 0; h < heads; h++) rope_rotate_cs(x + t * ld + h * f->dqk + f->nope, half, f->rope_lay, cs, sn);
    }
}

/* Makes the attention-input cache of overridden layer L hold cap rows (keeping the old ones). */
static int xin_fit(Forward *f, int L, size_t cap) {
    float *x = al_malloc3(cap, f->D, sizeof(float), "the attention inputs of an overridden layer");
    if (!x) return AL_ERR;
    if (f->xin[L]) memcpy(x, f->xin[L], (f->cap < cap ? f->cap : cap) * f->D * sizeof(float));
    free(f->xin[L]);
    f->xin[L] = x;
    return AL_OK;
}

/* Positions 0..cap-1 for attn_eval. */
static int opos_fit(Forward *f, size_t cap) {
    int *p = al_malloc3(cap, 1, sizeof(int), "positions");
    if (!p) return AL_ERR;
    for (size_t i = 0; i < cap; i++) p[i] = (int)i;
    free(f->opos);
    f->opos = p;
    return AL_OK;
}

/* Makes the layer's KV cache hold n rows. */
static int cache_fit(Forward *f, size_t n) {
    if (n <= f->cap) return AL_OK;
    size_t cap = f->cap ? f->cap : 256;
    while (cap < n) cap *= 2;
    if (cap > f->max_ctx) cap = f->max_ctx;
    size_t kw = f->G * f->dqk, vw = f->G * f->dv;
    for (int L = 0; L < f->c->n_layers; L++) {
        float *k = al_malloc3(cap, kw, sizeof(float), "the KV cache");
        float *v = k ? al_malloc3(cap, vw, sizeof(float), "the KV cache") : NULL;
        if (!k || !v) { free(k); return AL_ERR; }
        if (f->kc[L]) {
            memcpy(k, f->kc[L], f->cap * kw * sizeof(float));
            memcpy(v, f->vc[L], f->cap * vw * sizeof(float));
        }
        free(f->kc[L]);
        free(f->vc[L]);
        f->kc[L] = k;
        f->vc[L] = v;
    }
    int rc = AL_OK;
    for (int L = 0; rc == AL_OK && L < f->c->n_layers; L++)
        if (f->over[L]) rc = xin_fit(f, L, cap);
    if (rc == AL_OK) rc = opos_fit(f, cap);
    if (rc == AL_OK) f->cap = cap;
    return rc;
}

typedef struct {
    Forward *f;
    int L;
    size_t T;
    const float *q;           /* (T, H dqk) after RoPE */
    size_t ldq;
    double scale;
} attn_job;

/* One query head: softmax(q K^T scale, causal (and windowed)) V over the cache, into f->att. */
static int attn_head(size_t h, int worker, void *ud) {
    attn_job *j = ud;
    Forward *f = j->f;
    size_t g = h / (f->H / f->G), kw = f->G * f->dqk, vw = f->G * f->dv, Hdv = f->H * f->dv;
    const float *K = f->kc[j->L] + g * f->dqk, *Vc = f->vc[j->L] + g * f->dv;
    float *S = f->scores.p + (size_t)worker * QCHUNK * (f->pos + j->T);
    attn_head_causal(j->q + h * f->dqk, j->ldq, K, kw, Vc, vw, j->T, f->pos, f->dqk, f->dv, j->scale,
                     fwd_attn_window(f, j->L), f->c->attn_softcap, QCHUNK, S, f->att.p + h * f->dv, Hdv);
    return AL_OK;
}

/* Overridden layer L on f->h (T rows): the rows join the layer's input cache, attn_eval runs the
 * override over the whole sequence, and its last T output rows go to f->h (T, D). */
static int attention_override(Forward *f, int L, size_t T) {
    size_t D = f->D, n = f->pos + T;
    memcpy(f->xin[L] + f->pos * D, f->h.p, T * D * sizeof(float));
    Mat X = {.rows = n, .cols = D, .data = f->xin[L]};
    AttnOut *o = NULL;
    if (attn_eval(f->over[L], &X, f->opos, false, &o)) return al_err_ctx("forward pass, layer %d (override)", L);
    memcpy(f->h.p, o->out->data + f->pos * D, T * D * sizeof(float));
    attn_out_free(o);
    return AL_OK;
}

/* Attention block of layer L on f->h (normed input, T rows): Q, K, V, RoPE, cache, attention,
 * output projection into f->h (T, D). */
static int attention(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, H = f->H, G = f->G, dqk = f->dqk, dv = f->dv;
    size_t qw = H * dqk, kw = G * dqk, vw = G * dv;
    float *q, *k, *v;
    size_t ldq, ldk, ldv;
    int rc = hook(f, FWD_ATTN_IN, L, f->h.p, T, 1, D, D);
    if (rc) return rc;
    if (f->over[L]) {
        if ((rc = attention_override(f, L, T))) return rc;
        return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
    }
    if (!fb_fit(&f->att, T, H * dv, "attention output")) return AL_ERR;
    if (f->gpt2) {                                           /* c_attn: [Q | K | V] columns, one sgemm */
        if (!(q = fb_fit(&f->q, T, 3 * D, "Q/K/V"))) return AL_ERR;
        lin_apply(&w->qkv, f->h.p, D, T, q, 3 * D);
        k = q + D;
        v = q + 2 * D;
        ldq = ldk = ldv = 3 * D;
    } else if (f->mla) {
        size_t ql = f->ql, kl = f->kl, r = f->rope, nope = f->nope, kvw = nope + dv;
        if (!(q = fb_fit(&f->q, T, qw, "Q")) || !(k = fb_fit(&f->k, T, kw, "K")) || !(v = fb_fit(&f->v, T, vw, "V")) ||
            !fb_fit(&f->lat, T, (ql > kl + r ? ql : kl + r), "latents") || !fb_fit(&f->lat2, T, kl, "latents") ||
            !fb_fit(&f->kvb, T, H * kvw, "kv_b output"))
            return AL_ERR;
        ldq = qw; ldk = kw; ldv = vw;
        if (ql) {
            lin_apply(&w->qa, f->h.p, D, T, f->lat.p, ql);
            if (w->qa_norm) rmsnorm(f->lat.p, ql, T, ql, w->qa_norm->data, f->norm_eps, f->lat.p, ql);
            if ((rc = hook(f, FWD_Q_LATENT, L, f->lat.p, T, 1, ql, ql))) return rc;
            lin_apply(&w->q, f->lat.p, ql, T, q, qw);
        } else
            lin_apply(&w->q, f->h.p, D, T, q, qw);
        lin_apply(&w->kva, f->h.p, D, T, f->lat.p, kl + r);  /* [c_kv | k_pe] */
        float *ckv = f->lat2.p;
        if (w->kva_norm) rmsnorm(f->lat.p, kl + r, T, kl, w->kva_norm->data, f->norm_eps, ckv, kl);
        else for (size_t t = 0; t < T; t++) memcpy(ckv + t * kl, f->lat.p + t * (kl + r), kl * sizeof(float));
        if ((rc = hook(f, FWD_KV_LATENT, L, ckv, T, 1, kl, kl))) return rc;
        lin_apply(&w->kvb, ckv, kl, T, f->kvb.p, H * kvw);   /* per head [k_nope | v] */
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < H; h++) {
                const float *src = f->kvb.p + t * H * kvw + h * kvw;
                memcpy(k + t * kw + h * dqk, src, nope * sizeof(float));
                memcpy(k + t * kw + h * dqk + nope, f->lat.p + t * (kl + r) + kl, r * sizeof(float));
                memcpy(v + t * vw + h * dv, src + nope, dv * sizeof(float));
            }
    } else {
        if (!(q = fb_fit(&f->q, T, qw, "Q")) || !(k = fb_fit(&f->k, T, kw, "K")) || !(v = fb_fit(&f->v, T, vw, "V")))
            return AL_ERR;
        ldq = qw; ldk = kw; ldv = vw;
        lin_apply(&w->q, f->h.p, D, T, q, qw);
        lin_apply(&w->k, f->h.p, D, T, k, kw);
        lin_apply(&w->v, f->h.p, D, T, v, vw);
    }
    if ((rc = hook(f, FWD_Q, L, q, T, H, dqk, ldq)) || (rc = hook(f, FWD_K, L, k, T, G, dqk, ldk)) ||
        (rc = hook(f, FWD_V, L, v, T, G, dv, ldv)))
        return rc;
    if (f->rope) {
        rope_apply(f, q, T, ldq, H);
        rope_apply(f, k, T, ldk, G);
    }
    if ((rc = hook(f, FWD_Q_ROPE, L, q, T, H, dqk, ldq)) || (rc = hook(f, FWD_K_ROPE, L, k, T, G, dqk, ldk))) return rc;
    for (size_t t = 0; t < T; t++) {
        memcpy(f->kc[L] + (f->pos + t) * kw, k + t * ldk, kw * sizeof(float));
        memcpy(f->vc[L] + (f->pos + t) * vw, v + t * ldv, vw * sizeof(float));
    }
    attn_job job = {.f = f, .L = L, .T = T, .q = q, .ldq = ldq, .scale = fwd_attn_scale(f, L)};
    if (T * (f->pos + T) >= 4096 && f->nworkers > 1)          /* heads on the cores, one BLAS thread each */
        rc = lin_sweep(H, f->nworkers, attn_head, &job);
    else
        for (size_t h = 0; h < H && rc == AL_OK; h++) rc = attn_head(h, 0, &job);
    if (rc) return rc;
    if ((rc = hook(f, FWD_ATTN_OUT, L, f->att.p, T, H, dv, H * dv))) return rc;
    lin_apply(&w->o, f->att.p, H * dv, T, f->h.p, D);
    return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
}

/* MLP of layer L on f->h (normed, T rows) into f->h. */
static int mlp(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, FF = f->ffn;
    float *a = fb_fit(&f->f1, T, FF, "MLP activations"), *b = f->gpt2 ? NULL : fb_fit(&f->f2, T, FF, "MLP activations");
    if (!a || (!f->gpt2 && !b)) return AL_ERR;
    if (f->gpt2) {
        lin_apply(&w->up, f->h.p, D, T, a, FF);
        for (size_t i = 0; i < T * FF; i++) a[i] = act_apply(f->act, a[i]);
    } else {
        lin_apply(&w->gate, f->h.p, D, T, a, FF);
        lin_apply(&w->up, f->h.p, D, T, b, FF);
        for (size_t i = 0; i < T * FF; i++) a[i] = act_apply(f->act, a[i]) * b[i];
    }
    lin_apply(&w->down, a, FF, T, f->h.p, D);
    return AL_OK;
}

/* Normalization of layer L (which = 1: before attention, 2: before the MLP) from f->x into f->h. */
static void layer_norm_in(Forward *f, int L, int which, size_t T) {
    LayerW *w = &f->layers[L];
    Mat *n = which == 1 ? w->n1 : w->n2, *nb = which == 1 ? w->n1b : w->n2b;
    if (f->gpt2) layernorm(f->x.p, T, f->D, n->data, nb ? nb->data : NULL, f->norm_eps, f->h.p);
    else rmsnorm(f->x.p, f->D, T, f->D, n->data, f->norm_eps, f->h.p, f->D);
}

/* The whole stack over tokens at positions pos..pos+T-1: leaves the final normed hidden
 * states in f->h (T, D) and advances pos. */
static int body(Forward *f, const int *tokens, size_t T) {
    size_t D = f->D;
    if (T == 0) return al_err("forward pass: no tokens to run");
    if (f->pos + T > f->max_ctx)
        return al_err("forward pass: %zu tokens after %zu already in the sequence exceed the context of %zu (reset, or "
                      "use shorter windows)", T, f->pos, f->max_ctx);
    for (size_t t = 0; t < T; t++)
        if (tokens[t] < 0 || (size_t)tokens[t] >= f->vocab)
            return al_err("token id %d (position %zu) is outside the model's vocabulary 0-%zu", tokens[t], f->pos + t,
                          f->vocab - 1);
    if (!fb_fit(&f->x, T, D, "hidden states") || !fb_fit(&f->h, T, D, "hidden states") || cache_fit(f, f->pos + T) ||
        !fb_fit(&f->scores, (size_t)f->nworkers * QCHUNK, f->pos + T, "attention scores") || fwd_rope_tables(f, T))
        return AL_ERR;
    for (size_t t = 0; t < T; t++) {
        memcpy(f->x.p + t * D, f->embed->data + (size_t)tokens[t] * D, D * sizeof(float));
        if (f->wpe)
            for (size_t j = 0; j < D; j++) f->x.p[t * D + j] += f->wpe->data[(f->pos + t) * D + j];
    }
    for (int L = 0; L < f->c->n_layers; L++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        int rc = layer_load(f, L, false, NULL);
        if (rc == AL_OK) { layer_norm_in(f, L, 1, T); rc = attention(f, L, T); }
        if (rc == AL_OK) {
            for (size_t i = 0; i < T * D; i++) f->x.p[i] += f->h.p[i];
            layer_norm_in(f, L, 2, T);
            rc = mlp(f, L, T);
        }
        if (rc == AL_OK)
            for (size_t i = 0; i < T * D; i++) f->x.p[i] += f->h.p[i];
        if (f->streaming) layer_release(f, L);
        if (rc != AL_OK) return rc;
    }
    if (f->gpt2) layernorm(f->x.p, T, D, f->norm->data, f->norm_b ? f->norm_b->data : NULL, f->norm_eps, f->h.p);
    else rmsnorm(f->x.p, D, T, D, f->norm->data, f->norm_eps, f->h.p, D);
    f->pos += T;
    return AL_OK;
}

/* logits (n, V) of n hidden rows h (n, D). */
static void logits_rows(const Forward *f, const float *h, size_t n, float *out) {
    const Mat *W = f->lm_head ? f->lm_head : f->embed;
    if (n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)f->vocab, (int)f->D, 1.f, W->data, (int)f->D, h, 1, 0.f, out, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)f->vocab, (int)f->D, 1.f, h, (int)f->D, W->data,
                    (int)f->D, 0.f, out, (int)f->vocab);
}

/* Below this hidden size every matrix is small enough that OpenBLAS's threads cost more (waking
 * and spinning) than they give: such models run with one BLAS thread (heads still use lin_sweep). */
#define SMALL_HIDDEN 512

/* body() with the BLAS thread count of the model's size. */
static int body_threads(Forward *f, const int *tokens, size_t T) {
    int saved = openblas_get_num_threads();
    bool small = f->D < SMALL_HIDDEN && saved > 1;
    if (small) openblas_set_num_threads(1);
    int rc = body(f, tokens, T);
    if (small) openblas_set_num_threads(saved);
    return rc;
}

int fwd_run(Forward *f, const int *tokens, size_t T, fwd_logits want, float *logits) {
    int rc = body_threads(f, tokens, T);
    if (rc != AL_OK) { fwd_reset(f); return rc; }
    if (want == FWD_LOGITS_LAST) logits_rows(f, f->h.p + (T - 1) * f->D, 1, logits);
    else if (want == FWD_LOGITS_ALL)
        for (size_t r0 = 0; r0 < T; r0 += LCHUNK)
            logits_rows(f, f->h.p + r0 * f->D, T - r0 < LCHUNK ? T - r0 : LCHUNK, logits + r0 * f->vocab);
    return AL_OK;
}

int fwd_run_hooked(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen) {
    fwd_set_hooks(f, h);
    int rc = AL_OK;
    for (size_t s = 0; s < nseq && rc == AL_OK; s++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        fwd_reset(f);
        rc = fwd_run(f, tokens + s * seqlen, seqlen, FWD_LOGITS_NONE, NULL);
        al_progress("sequence", s + 1, nseq);
    }
    al_progress(NULL, 0, 0);
    fwd_set_hooks(f, NULL);
    fwd_reset(f);
    return rc;
}

int fwd_nll(Forward *f, const int *tokens, size_t T, double *nll_sum, size_t *count) {
    *nll_sum = 0;
    *count = 0;
    fwd_reset(f);
    if (T < 2) return al_err("perplexity needs at least 2 tokens in a window (got %zu)", T);
    int rc = body_threads(f, tokens, T);
    if (rc != AL_OK) { fwd_reset(f); return rc; }
    float *lg = fb_fit(&f->logit, LCHUNK, f->vocab, "logits");
    if (!lg) return AL_ERR;
    double sum = 0;
    for (size_t r0 = 0; r0 + 1 < T; r0 += LCHUNK) {
        size_t n = T - 1 - r0 < LCHUNK ? T - 1 - r0 : LCHUNK;
        logits_rows(f, f->h.p + r0 * f->D, n, lg);
        for (size_t t = 0; t < n; t++) {
            const float *z = lg + t * f->vocab;
            float mx = -INFINITY;
            for (size_t j = 0; j < f->vocab; j++) mx = z[j] > mx ? z[j] : mx;
            double s = 0;
            for (size_t j = 0; j < f->vocab; j++) s += exp((double)(z[j] - mx));
            sum += log(s) + mx - z[tokens[r0 + t + 1]];
        }
    }
    *nll_sum = sum;
    *count = T - 1;
    return AL_OK;
}

int fwd_ppl(Forward *f, const int *ids, size_t n, size_t seqlen, FwdPpl *out) {
    memset(out, 0, sizeof *out);
    out->nll = NAN;
    if (seqlen < 2) return al_err("perplexity windows need at least 2 tokens, not %zu", seqlen);
    if (seqlen > f->max_ctx)
        return al_err("perplexity: seqlen %zu is longer than the model's context %zu: give a smaller seqlen", seqlen,
                      f->max_ctx);
    if (n < 2) return al_err("perplexity needs at least 2 tokens; the text has %zu", n);
    size_t nwin = (n + seqlen - 1) / seqlen;
    double sum = 0;
    int rc = AL_OK;
    for (size_t w = 0; w < nwin; w++) {
        size_t start = w * seqlen, len = n - start < seqlen ? n - start : seqlen, c;
        double s;
        if (len < 2) break;
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        if ((rc = fwd_nll(f, ids + start, len, &s, &c)) != AL_OK) break;
        sum += s;
        out->tokens += c;
        out->windows++;
        al_progress("window", w + 1, nwin);
    }
    al_progress(NULL, 0, 0);
    if (out->tokens) out->nll = sum / (double)out->tokens;
    return rc;
}
