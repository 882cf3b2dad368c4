/* forward.c -- the float32 forward pass: config extras (activation, RoPE sets, windows), weights
 * by tensor role (named by the model's layouts, core/model/family.c; views of the mapping in their
 * stored dtype, multiplied by core/linalg/matmul.c; pages kept or released per layer), the layer
 * kernels (norms by kind and slot, q/k norms, RoPE, attention over the KV cache, dense MLPs,
 * mixture-of-experts routing) and the activation hooks. See forward.h for the contract.
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
#include "attn_stock.h"
#include "layersel.h"
#include "pool.h"
#include "sweep.h"
#include "matmul.h"
#include "rope.h"
#include "kda.h"
#include "linattn.h"
#include "mamba2.h"

#define QCHUNK 64          /* query rows per attention block */
#define LCHUNK 64          /* rows per logits block */

/* ================================================================ types */

typedef struct {
    WMat w;                /* HF (out, in), or (in, out) when io: Conv1D (a float32 view), gpt-oss's experts (F32 / BF16 /
                              F16 in the mapping, lin_apply_io: read in place); w.data NULL: absent */
    Mat *b;                /* (1, out) or NULL */
    bool io;
    size_t in, out;
} Lin;

/* A feed-forward net: gated act(x gate^T) * (x up^T) (gu: Phi-3's fused rows [gate ; up]) or, when
 * neither gate nor gu is set, act(x up^T); then down. */
typedef struct {
    Lin gate, up, gu, down;
    size_t ffn;            /* inner width */
    bool pairs;            /* gu's outputs are interleaved (gate, up) pairs (gpt-oss's experts) */
} Ffn;

/* Norm slots of a layer (which exist depends on the block layout). */
enum { NS_ATTN_IN, NS_ATTN_OUT, NS_MLP_IN, NS_MLP_OUT, NS_COUNT };

typedef struct {
    Mat *nw[NS_COUNT], *nb[NS_COUNT];  /* norm weights (1, D) and LayerNorm biases, NULL where absent */
    Lin q, k, v, o;               /* GQA; MLA: q is q_proj or q_b_proj, o is o_proj */
    Lin qkv;                      /* fused: GPT-2 c_attn (D, 3D); Phi-3 qkv_proj and GPT-NeoX query_key_value
                                     ((H + 2G) dqk, D) with rows [Q ; K ; V] (NeoX's head by head: its
                                     outputs are reordered, neox_unmix) */
    Mat *qn, *kn;                 /* q_norm / k_norm: (1, dqk) per head, or (1, H dqk) / (1, G dqk) (QKN_PROJ) */
    Lin qa, kva, kvb;             /* MLA: q_a_proj (ql, D), kv_a_proj_with_mqa (kl + rope, D), kv_b_proj */
    Mat *qa_norm, *kva_norm;      /* MLA latent RMSNorms (1, ql), (1, kl) or NULL */
    Lin iqb, ik, iw;              /* MLA's lightning indexer: wq_b (IH ID, ql), wk (ID, D), weights_proj (IH, D) */
    Mat *iknw, *iknb;             /* its k_norm LayerNorm (1, ID) weight and bias */
    Ffn mlp;                      /* dense MLP; MoE layers: the shared experts (ffn 0: none) */
    Lin router;                   /* MoE: gate (E, D) */
    Lin shscale;                  /* MoE: the shared expert's gate (1, D) (Qwen3-Next), or absent */
    Mat *ebias;                   /* MoE: e_score_correction_bias (1, E) or NULL */
    Mat *sinks;                   /* (1, H) sink logits (gpt-oss) or NULL */
    Mat *lscalar;                 /* (1, 1) layer_scalar: the layer's output times it (Gemma 4), or NULL */
    Lin pgate, pproj;             /* Gemma 4's per-layer input: per_layer_input_gate (P, D), per_layer_projection (D, P) */
    Mat *ppost;                   /* ... post_per_layer_input_norm (1, D) */
    Lin g4router;                 /* Gemma 4's MoE block: router.proj (E, D) */
    Mat *g4rscale, *g4escale;     /* ... router.scale (1, D), router.per_expert_scale (1, E) */
    Mat *g4norm[3];               /* ... post_feedforward_layernorm_1, _2, pre_feedforward_layernorm_2 (1, D) */
    Ffn *g4x;                     /* ... (E) experts viewed in experts.gate_up_proj / down_proj, or NULL */
    Ffn *experts;                 /* MoE: (E) routed experts, or NULL (dense layer) */
    Lin lqkvz, lba, lout;         /* Gated DeltaNet: in_proj_qkvz, in_proj_ba, out_proj (split: qkv in lqkvz) */
    Lin lz, lb, la;               /* Qwen3.5's split in_proj_z, in_proj_b, in_proj_a */
    Mat *lconv, *alog, *dtb, *lnorm;   /* conv1d (C, K), A_log, dt_bias (Hv), the gated norm (dv) */
    Lin min;                      /* Mamba-2: in_proj (2 I + 2 G N + H, D) (conv, A_log, dt_bias, norm, out_proj above) */
    Mat *mconvb, *md;             /* Mamba-2: the conv's bias (C) or NULL, D (H) */
    Lin kq, kk, kv, kfa, kfb, kga, kgb;   /* Kimi Delta Attention's projections (b_proj in lb, o_proj in lout; its
                                             three convs stacked in lconv, dt_bias (H d) in dtb, o_norm in lnorm) */
    bool loaded;
} LayerW;

typedef struct { float *p; size_t cap; } fbuf;

/* RoPE frequencies of one kind of layer (Gemma 3: global and local layers differ). */
typedef struct {
    float *inv;                   /* (rope / 2); longrope: the short factors */
    float *inv_long;              /* longrope: the long factors (sequences beyond orig_max_pos), else NULL */
    float mscale;                 /* attention factor on cos / sin (YaRN, longrope; else 1) */
    size_t half;                  /* rotating pairs per head (Gemma 4: each layer type its own head_dim) */
    fbuf cs, sn;                  /* (T, rope / 2) tables of the current call */
} RopeSet;

struct Forward {
    Model *m;
    const ModelConfig *c;
    const ModelConfig *cfull;     /* Gemma 4's full layers when their head dims differ (Model.cfg_full), else NULL */
    bool mla;
    size_t D, H, G, dqk, nope, rope, rcol, dv, ql, kl, ffn, vocab;   /* ffn: MLP width; rcol: first RoPE column */
    act_kind act;
    double norm_eps;
    RopeSet rs[2];                /* [0]: theta with rope_scaling; [1]: layers of another base or unscaled */
    unsigned char *lrs;           /* (n_layers) index into rs */
    rope_layout rope_lay;         /* pairs in the checkpoint's layout (DeepSeek's stay interleaved) */

    WMat embed;                   /* (V, D) */
    WMat wpe;                     /* GPT-2 (n_positions, D); data NULL: none */
    WMat lm_head;                 /* (V, D); data NULL: tied to embed */
    WMat ple_embed;               /* Gemma 4: embed_tokens_per_layer (Vp, L P); data NULL: no per-layer embeddings */
    Lin ple_proj;                 /* ... per_layer_model_projection (L P, D) */
    Mat *ple_norm;                /* ... per_layer_projection_norm (1, P) */
    Mat *norm, *norm_b;           /* final norm (1, D) */
    LayerW *layers;               /* (n_layers) */
    bool streaming;

    size_t max_ctx, pos, seq, cap;
    float **kc, **vc;             /* per layer: (cap, G dqk), (cap, G dv) keys after RoPE, values */
    float **ikc;                  /* indexer models, per layer: (cap, ID) the indexer's keys after RoPE; else NULL */
    int *isel;                    /* (T, index_topk) the last full indexer layer's selection of this call's rows */
    size_t isel_cap;
    FwdHooks hooks;
    LinAttnState *lst;            /* (n_layers) Gated DeltaNet state of linear-attention layers (else zero) */
    Mamba2State *mst;             /* (n_layers) Mamba-2 state of SSM layers (else zero) */
    const AttnLayer **over;       /* (n_layers) attention overrides (borrowed); NULL: the model's own */
    AttnLayer **own;              /* (n_layers) or NULL: attnlab_mla layers of their own RoPE frequencies (cfg
                                     layer_rope_freqs), read by attn_layer_load and run as overrides (owned): what
                                     an override is reset to */
    float **xin;                  /* (n_layers) overridden layers: (cap, D) normalized attention inputs
                                     (NULL exactly where there is no override, or before the cache) */
    int *opos;                    /* (cap) positions 0..cap-1 for attn_eval, or NULL */
    fwd_evict_fn evfn;            /* token eviction (fwd_set_evict), or NULL */
    void *evud;
    fwd_resid_fn rsfn;            /* the residual stream at layers' inputs (fwd_set_resid), or NULL */
    void *rsud;
    int rsfrom;                   /* ... the first layer run */
    unsigned char *evkeep;        /* (G, T, pos + T) this call's key mask */
    size_t evcap;

    /* scratch, (rows, width) */
    fbuf x, h, y, q, k, v, att, f1, f2, lat, lat2, kvb, logit, scores, mx, gx, gy, rl, perm, gate;
    fbuf ple, pg, m1;             /* Gemma 4: this call's per-layer inputs (T, L P), a layer's gate (T, P), the dense
                                     MLP's normed output beside the MoE block (T, D) */
    fbuf iq, iwt;                 /* the indexer's queries (T, IH ID) after RoPE and head weights (T, IH) */
    int nworkers;
    MmWork *mm;                   /* the products' per-worker panels and BF16 activations */
    mm_compute compute;           /* f32 or bf16 (fwd_set_compute) */
    FwdCapture *capture;          /* one head's attention weights (borrowed), or NULL */
    unsigned char *hmask;         /* (n_layers, H) 1: the head's output zeroed; NULL: none */
    size_t lm_groups;             /* groups the last hooked run ran layer-major (0: window-major) */
    size_t group_tokens;          /* most tokens in a layer-major group (0: FWD_GROUP_TOKENS) */
    char lm_label[64];            /* its progress label ("windows 1-4 of 4, layer") */
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
    size_t bytes;
    if (!al_mul_ok(n ? n : 1, sizeof(float), &bytes, what)) return NULL;
    float *p = mm_alloc(bytes, what);
    if (!p) return NULL;
    free(b->p);
    b->p = p;
    b->cap = n;
    return p;
}

static void fb_free(fbuf *b) { free(b->p); b->p = NULL; b->cap = 0; }

static void lin_free(Lin *l) { wmat_free(&l->w); mat_free(l->b); l->b = NULL; }

static int xin_fit(Forward *f, int L, size_t cap);

/* y (T, out; stride ldy) = x (T, in; stride ldx) @ W for an (in, out) weight: F32, BF16 or F16 (the fused experts
 * viewed in the mapping, Conv1D) read in place by matmul.c's x @ W kernels -- float32 products of the stored values in
 * both compute modes, so BF16 experts give an F32 twin's bits. */
static int lin_apply_io(Forward *f, const Lin *l, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    return mm_xw(f->mm, &l->w, x, ldx, T, y, ldy);
}

/* y (T, out; row stride ldy) = x (T, in; stride ldx) @ W^T (+ b), in the pass's compute mode. */
static int lin_apply(Forward *f, const Lin *l, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    int rc = l->io ? lin_apply_io(f, l, x, ldx, T, y, ldy) : mm_xwt(f->mm, &l->w, x, ldx, T, y, ldy, f->compute);
    if (rc != AL_OK) return rc;
    if (l->b)
        for (size_t t = 0; t < T; t++) {
            float *r = y + t * ldy;
            for (size_t j = 0; j < l->out; j++) r[j] += l->b->data[j];
        }
    return AL_OK;
}

/* out = RMSNorm(x) * w (one_plus: * (1 + w), Gemma), rows of width n; in place when out == x.
 * As Hugging Face computes it in float32: x * rsqrt(mean(x^2) + eps) * w. */
static void rmsnorm(const float *x, size_t ldx, size_t T, size_t n, const float *w, bool one_plus, double eps,
                    float *out, size_t ldo) {
    for (size_t t = 0; t < T; t++) {
        const float *r = x + t * ldx;
        double ss = 0;
        for (size_t j = 0; j < n; j++) ss += (double)r[j] * r[j];
        float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
        float *o = out + t * ldo;
        if (one_plus) for (size_t j = 0; j < n; j++) o[j] = r[j] * inv * (1.f + w[j]);
        else for (size_t j = 0; j < n; j++) o[j] = r[j] * inv * w[j];
    }
}

/* out = LayerNorm(x) * w + b; in place when out == x. */
static void layernorm(const float *x, size_t ldx, size_t T, size_t n, const float *w, const float *b, double eps,
                      float *out, size_t ldo) {
    for (size_t t = 0; t < T; t++) {
        const float *r = x + t * ldx;
        double mean = 0, var = 0;
        for (size_t j = 0; j < n; j++) mean += r[j];
        mean /= (double)n;
        for (size_t j = 0; j < n; j++) var += (r[j] - mean) * (r[j] - mean);
        float inv = (float)(1.0 / sqrt(var / (double)n + eps));
        float *o = out + t * ldo;
        for (size_t j = 0; j < n; j++) o[j] = (float)(r[j] - mean) * inv * w[j] + (b ? b[j] : 0.f);
    }
}

/* The model's norm (config.h norm_kind) of T rows of width n, weight w (and LayerNorm bias b). */
static void norm_apply(const Forward *f, const Mat *w, const Mat *b, const float *x, size_t ldx, size_t T, size_t n,
                       float *out, size_t ldo) {
    if (f->c->norm == NORM_LAYER) layernorm(x, ldx, T, n, w->data, b ? b->data : NULL, f->norm_eps, out, ldo);
    else rmsnorm(x, ldx, T, n, w->data, f->c->norm == NORM_RMS_1P, f->norm_eps, out, ldo);
}

static float act_apply(act_kind a, float x) {
    switch (a) {
    case ACT_SILU: return x / (1.f + expf(-x));
    case ACT_GELU: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case ACT_GELU_TANH: return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_RELU2: return x > 0 ? x * x : 0;
    case ACT_UNKNOWN: break;
    }
    return x;
}

/* ================================================================ the description */

/* Frequencies of one RoPE set: base theta, with the config's rope_scaling when scaled (longrope:
 * both factor sets). */
static int rope_set_init(Forward *f, RopeSet *rs, double theta, bool scaled, size_t rope) {
    const RopeSpec *spec = &f->c->rope_spec;
    bool lr = scaled && spec->scaling.kind == RS_LONGROPE;
    size_t half = rs->half = rope / 2;
    RopeSpec plain = *spec;
    if (!scaled) { memset(&plain.scaling, 0, sizeof plain.scaling); plain.scaling.factor = 1; plain.scaling.attention_factor = NAN; }
    rs->inv = al_malloc3(half, 1, sizeof(float), "RoPE frequencies");
    rs->inv_long = lr ? al_malloc3(half, 1, sizeof(float), "RoPE frequencies") : NULL;
    double *base = al_malloc3(half, 1, sizeof(double), "RoPE frequencies");
    int rc = rs->inv && base && (!lr || rs->inv_long) ? AL_OK : AL_ERR;
    const char *where = f->m->path;
    if (rc == AL_OK && lr) {
        rc = rope_longrope_freqs(&spec->scaling, (int)rope, theta, true, base, where);
        if (rc == AL_OK) vec_d2f(base, half, rs->inv_long);
        if (rc == AL_OK) rc = rope_longrope_freqs(&spec->scaling, (int)rope, theta, false, base, where);
    } else if (rc == AL_OK)
        rc = rope_inv_freq(&plain, (int)rope, theta, base, where);
    if (rc == AL_OK) vec_d2f(base, half, rs->inv);
    rs->mscale = (float)rope_attention_factor(scaled ? spec : &plain);
    free(base);
    return rc;
}

/* What the pass takes from the model's description (core/model/config.h): activation, norm epsilon,
 * RoPE frequencies (float) per kind of layer and their attention factors. Refusals are
 * analysis_check's. */
static int take_description(Forward *f) {
    const ModelConfig *c = f->c;
    f->act = c->act;
    fwd_set_norm_eps(f, 0);
    f->rope_lay = c->rope_spec.layout;
    f->lrs = al_calloc((size_t)c->n_layers, 1, "RoPE sets");
    if (!f->lrs) return AL_ERR;
    if (!f->rope) return AL_OK;
    double theta = c->rope_spec.theta, other = theta;
    bool other_scaled = true, two = false;
    for (int L = 0; L < c->n_layers; L++)
        if (cfg_layer_theta(c, L) != theta || !cfg_layer_rope_scaled(c, L)) {
            f->lrs[L] = 1;
            other = cfg_layer_theta(c, L);
            other_scaled = cfg_layer_rope_scaled(c, L);
            two = true;
        }
    size_t rope0 = f->cfull ? (size_t)f->cfull->qk_rope_dim : f->rope;   /* set 0: Gemma 4's full layers' head dim */
    int rc = rope_set_init(f, &f->rs[0], theta, true, rope0);
    if (rc == AL_OK && two) rc = rope_set_init(f, &f->rs[1], other, other_scaled, f->rope);
    /* Gemma 4's "proportional" RoPE on the full layers (set 0; the sliding ones are set 1): pairs (j, j + d/2) with
       j < floor(factor d / 2) turn at theta^(-2j/d), the others not at all */
    size_t keep = (size_t)floor(c->rope_spec.prop_factor * (double)rope0 / 2);
    for (size_t j = keep; rc == AL_OK && c->rope_spec.prop_factor > 0 && j < f->rs[0].half; j++) f->rs[0].inv[j] = 0;
    return rc;
}

/* ================================================================ weights */

/* The full name of role r's tensor in layer L (model-level roles: any L) of expert e, followed by
 * "." what; an error when the model's layouts have no such role. */
static int role_name(const Forward *f, tensor_role r, int L, int e, const char *what, char *buf, size_t cap) {
    if (cfg_role_name(f->c, r, L, e, what, buf, cap)) return AL_OK;
    return al_err("internal: a %s model has no %s tensor", f->c->model_type, tensor_role_name(r));
}

/* Checks that tensor `name` has shape (rows, cols) (a vector: rows * cols values) and counts its
 * stored bytes. */
static int check_shape(Forward *f, const char *name, size_t rows, size_t cols, size_t *bytes) {
    size_t R, C;
    const st_entry *e;
    if (store_shape2(f->m->store, name, &R, &C) != AL_OK || store_entry(f->m->store, name, &e, NULL) != AL_OK) return AL_ERR;
    if (R * C != rows * cols || (rows > 1 && (R != rows || C != cols)))
        return al_err("tensor '%s' has shape [%zu, %zu] but the forward pass of this %s model needs [%zu, %zu]", name, R,
                      C, f->c->model_type, rows, cols);
    if (bytes) *bytes += R * C * dt_size(e->dtype);
    return AL_OK;
}

/* Reads (or, with dry, only checks and counts) the small tensor `name` (a norm weight, a bias) of
 * shape (rows, cols) as float32. */
static int load_mat(Forward *f, const char *name, size_t rows, size_t cols, bool dry, size_t *bytes, Mat **out) {
    if (check_shape(f, name, rows, cols, bytes) != AL_OK) return AL_ERR;
    if (dry) return AL_OK;
    return store_read(f->m->store, name, out);
}

/* A view of weight `name` of shape (rows, cols) in its stored dtype (io: a float32 view for x @ W);
 * with dry, only the check and the count. */
static int load_view(Forward *f, const char *name, size_t rows, size_t cols, bool io, bool dry, size_t *bytes, WMat *out) {
    if (check_shape(f, name, rows, cols, bytes) != AL_OK) return AL_ERR;
    if (dry) return AL_OK;
    return wmat_view(f->m->store, name, io, out);
}

/* The linear layer of role r (its weight, and its bias when stored) in layer L of expert e (-1: none). */
static int load_lin(Forward *f, int L, tensor_role r, int e, size_t in, size_t out, bool io, bool dry, size_t *bytes,
                    Lin *l) {
    char wn[192], bn[192];
    l->io = io;
    l->in = in;
    l->out = out;
    int rc = role_name(f, r, L, e, "weight", wn, sizeof wn);
    if (rc == AL_OK) cfg_role_name(f->c, r, L, e, "bias", bn, sizeof bn);
    if (rc == AL_OK) rc = load_view(f, wn, io ? in : out, io ? out : in, io, dry, bytes, &l->w);
    if (rc == AL_OK && store_has(f->m->store, bn)) rc = load_mat(f, bn, 1, out, dry, bytes, &l->b);
    return rc;
}

/* The norm of role r: its weight (and its bias, when b and stored) in layer L (model level: any L). */
static int load_norm(Forward *f, int L, tensor_role r, size_t n, bool dry, size_t *bytes, Mat **w, Mat **b) {
    char wn[192], bn[192];
    int rc = role_name(f, r, L, -1, "weight", wn, sizeof wn);
    if (rc == AL_OK) cfg_role_name(f->c, r, L, -1, "bias", bn, sizeof bn);
    if (rc == AL_OK) rc = load_mat(f, wn, 1, n, dry, bytes, w);
    if (rc == AL_OK && b && store_has(f->m->store, bn)) rc = load_mat(f, bn, 1, n, dry, bytes, b);
    return rc;
}

/* ---------------------------------------------------------------- tensor roles */

/* The norm role of each slot (its name: the model's norm layout, core/model/family.h). */
static const tensor_role slot_roles[NS_COUNT] = {ROLE_NORM_ATTN_IN, ROLE_NORM_ATTN_OUT, ROLE_NORM_FFN_IN,
                                                 ROLE_NORM_FFN_OUT};

/* The linears of a feed-forward net by role (ROLE_COUNT, or a role the model's layout lacks:
 * absent): dense (the MLP layout's), a routed expert, the shared experts. */
typedef struct { tensor_role gate, up, gu, down; } ffn_roles;
static const ffn_roles dense_roles = {ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_GATE_UP, ROLE_FFN_DOWN};
static const ffn_roles expert_roles = {ROLE_EXP_GATE, ROLE_EXP_UP, ROLE_COUNT, ROLE_EXP_DOWN};
static const ffn_roles shared_roles = {ROLE_SHEXP_GATE, ROLE_SHEXP_UP, ROLE_COUNT, ROLE_SHEXP_DOWN};

/* ---------------------------------------------------------------- loading */

static void ffn_free(Ffn *n) { lin_free(&n->gate); lin_free(&n->up); lin_free(&n->gu); lin_free(&n->down); }

static void layer_release(Forward *f, int L) {
    LayerW *w = &f->layers[L];
    for (int i = 0; i < NS_COUNT; i++) { mat_free(w->nw[i]); mat_free(w->nb[i]); }
    mat_free(w->qa_norm); mat_free(w->kva_norm); mat_free(w->qn); mat_free(w->kn); mat_free(w->ebias);
    mat_free(w->sinks);
    mat_free(w->lscalar);
    mat_free(w->ppost);
    mat_free(w->g4rscale); mat_free(w->g4escale);
    for (int i = 0; i < 3; i++) mat_free(w->g4norm[i]);
    lin_free(&w->g4router);
    for (int e = 0; w->g4x && e < f->c->moe_block_experts; e++) ffn_free(&w->g4x[e]);
    free(w->g4x);
    lin_free(&w->pgate);
    lin_free(&w->pproj);
    mat_free(w->iknw); mat_free(w->iknb);
    mat_free(w->lconv); mat_free(w->alog); mat_free(w->dtb); mat_free(w->lnorm); mat_free(w->mconvb); mat_free(w->md);
    Lin *ls[] = {&w->min, &w->q, &w->k, &w->v, &w->o, &w->qkv, &w->qa, &w->kva, &w->kvb, &w->router, &w->iqb, &w->ik, &w->iw,
                 &w->lqkvz, &w->lba, &w->lout, &w->shscale, &w->lz, &w->lb, &w->la, &w->kq, &w->kk, &w->kv, &w->kfa,
                 &w->kfb, &w->kga, &w->kgb};
    for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) lin_free(ls[i]);
    ffn_free(&w->mlp);
    if (w->experts)
        for (int e = 0; e < f->c->moe.n_experts; e++) ffn_free(&w->experts[e]);
    free(w->experts);
    memset(w, 0, sizeof *w);
    char *prefix = model_tensor_name(f->m, L, "");
    if (prefix) store_release_prefix(f->m->store, prefix);
    free(prefix);
}

/* Linear of role r in layer L, expert e (nothing when the model's layouts have no such role). */
static int load_part(Forward *f, int L, tensor_role r, int e, size_t in, size_t out, bool dry, size_t *bytes, Lin *l) {
    if (!cfg_role(f->c, r)) return AL_OK;
    return load_lin(f, L, r, e, in, out, f->c->ffn == FFN_CONV1D, dry, bytes, l);
}

/* A feed-forward net of inner width ffn: the linears of roles n in layer L (of expert e; -1: none). */
static int load_ffn(Forward *f, int L, int e, const ffn_roles *n, size_t ffn, bool dry, size_t *bytes, Ffn *o) {
    size_t D = f->D;
    o->ffn = ffn;
    int rc = load_part(f, L, n->gate, e, D, ffn, dry, bytes, &o->gate);
    if (rc == AL_OK) rc = load_part(f, L, n->up, e, D, ffn, dry, bytes, &o->up);
    if (rc == AL_OK) rc = load_part(f, L, n->gu, e, D, 2 * ffn, dry, bytes, &o->gu);
    if (rc == AL_OK) rc = load_part(f, L, n->down, e, ffn, D, dry, bytes, &o->down);
    return rc;
}

/* Inner width of one routed expert (Mixtral: intermediate_size; else moe_intermediate_size). */
static size_t expert_ffn(const Forward *f) {
    return f->c->moe.expert_ffn > 0 ? (size_t)f->c->moe.expert_ffn : f->ffn;
}

/* gpt-oss's MXFP4 experts q (store_fp4_experts; transformers' convert_moe_packed_tensors): expert
 * e's stored rows are the columns of its (a, b) parameter, so its (b, a) block is its (out, in)
 * weight as the product reads it (expert_fp4): checked here, never decoded whole. */
static int check_experts_mxfp4(const char *name, const dt_fp4 *q, size_t qE, size_t E, size_t a, size_t b,
                               size_t *bytes) {
    if (qE != E || q->rows != E * b || q->cols != a)
        return al_err("MXFP4 experts '%s' should decode to [%zu, %zu, %zu] (stored transposed, [%zu, %zu, %zu / 32, 16]), "
                      "found [%zu, %zu, %zu]", name, E, b, a, E, b, a, qE, q->rows / (qE ? qE : 1), q->cols);
    if (bytes) *bytes += E * b * (a / 2 + a / 32);
    return AL_OK;
}

/* Tensor `name` of shape (E, a, b) (b 0: (E, a)): checked and its bytes counted; a weight (b set) is left where it
 * lies (fused_view views each expert's block), or its MXFP4 blocks / scales go into *q (checked, not read: q->enc
 * set); a bias (b 0) is read as float32 (rows E, cols a) unless dry. */
static int read_experts(Forward *f, const char *name, size_t E, size_t a, size_t b, bool dry, size_t *bytes, Mat **out,
                        dt_fp4 *q) {
    const st_entry *e;
    const st_file *sf;
    size_t qE = 0;
    q->enc = DT_FP4_NONE;
    if (b && store_fp4_experts(f->m->store, name, &qE, q) != AL_OK) return AL_ERR;
    if (b && q->enc != DT_FP4_NONE) return check_experts_mxfp4(name, q, qE, E, a, b, bytes);
    if (store_entry(f->m->store, name, &e, &sf) != AL_OK) return AL_ERR;
    bool ok = b ? e->ndim == 3 && e->shape[0] == E && e->shape[1] == a && e->shape[2] == b
                : e->ndim == 2 && e->shape[0] == E && e->shape[1] == a;
    if (!ok && b)
        return al_err("tensor '%s' should have shape [%zu, %zu, %zu] (this %s model's experts)", name, E, a, b,
                      f->c->model_type);
    if (!ok) return al_err("tensor '%s' should have shape [%zu, %zu] (this %s model's experts)", name, E, a, f->c->model_type);
    if (e->dtype != DT_F32 && e->dtype != DT_BF16 && e->dtype != DT_F16)
        return al_err("tensor '%s': %s experts are not read here (F32, BF16, F16)", name, dt_name(e->dtype));
    size_t n = E * a * (b ? b : 1);
    if (bytes) *bytes += n * dt_size(e->dtype);
    if (dry || b) return AL_OK;
    if (!(*out = mat_new(E, a))) return AL_ERR;
    return dt_to_f32(e->dtype, st_data(sf, e), n, (*out)->data);
}

/* Row e of bias (E, out) as an owned (1, out) copy into *b. */
static int expert_bias(const Mat *bias, size_t e, size_t out, Mat **b) {
    if (!(*b = mat_new(1, out))) return AL_ERR;
    memcpy((*b)->data, bias->data + e * out, out * sizeof(float));
    return AL_OK;
}

/* Expert e's (out, in) MXFP4 weight: its rows [e out, (e + 1) out) of all the experts' q, viewed where
 * they lie (decoded per block by the product), with row e of bias (E, out) copied. */
static int expert_fp4(const dt_fp4 *q, const Mat *bias, size_t e, size_t in, size_t out, Lin *l) {
    Mat *b;
    if (expert_bias(bias, e, out, &b)) return AL_ERR;
    dt_fp4 qe = *q;
    qe.rows = out;
    qe.codes = q->codes + e * out * (in / 2);
    qe.scale = q->scale + e * out * (in / dt_fp4_traits(q->enc)->block);   /* E8M0: a byte per block */
    *l = (Lin){.w = {.dt = DT_U8, .data = qe.codes, .rows = out, .cols = in, .fp4 = qe}, .b = b, .in = in, .out = out};
    return AL_OK;
}

/* A view of expert e's block (rows, cols) of the fused [E, rows, cols] tensor of role r in layer L
 * (its stored dtype: F32, BF16 or F16; it has no FP8 block scales per expert): the (out, in) weight of W x,
 * or with io the (in, out) weight of x @ W (gpt-oss's). */
static int fused_view(Forward *f, int L, tensor_role r, size_t e, size_t rows, size_t cols, bool io, bool dry,
                      size_t *bytes, Lin *l) {
    char n[192];
    const st_entry *t;
    const st_file *sf;
    int rc = role_name(f, r, L, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = store_entry(f->m->store, n, &t, &sf);
    if (rc != AL_OK) return rc;
    size_t E = (size_t)(f->c->moe.n_experts ? f->c->moe.n_experts : f->c->moe_block_experts);   /* Gemma 4's block */
    if (t->ndim != 3 || t->shape[0] != E || t->shape[1] != rows || t->shape[2] != cols)
        return al_err("tensor '%s' is not [%zu, %zu, %zu] (experts, and each expert's rows and columns)", n, E, rows,
                      cols);
    if (t->dtype != DT_F32 && t->dtype != DT_BF16 && t->dtype != DT_F16)
        return al_err("tensor '%s' is %s: fused experts are read in F32, BF16 or F16", n, dt_name(t->dtype));
    if ((uintptr_t)st_data(sf, t) % dt_size(t->dtype))
        return al_err("tensor '%s': its data is not aligned to its dtype in the file", n);
    if (bytes && e == 0) *bytes += E * rows * cols * dt_size(t->dtype);
    if (dry) return AL_OK;
    *l = (Lin){.w = {.dt = t->dtype, .data = (const char *)st_data(sf, t) + e * rows * cols * dt_size(t->dtype),
                     .rows = rows, .cols = cols}, .io = io, .in = io ? rows : cols, .out = io ? cols : rows};
    return AL_OK;
}

/* Every expert in one tensor per role (gpt-oss): gate_up_proj (E, D, 2 FI) with gate / up in
 * interleaved columns, down_proj (E, FI, D), both used as x @ W, and their biases, split into one
 * Ffn per expert (gu: the interleaved [gate, up] pairs). No float copy of the weights: MXFP4 experts
 * as released are viewed per expert in their blocks (expert_fp4), F32 / BF16 / F16 ones in the mapping
 * (fused_view, x @ W: matmul.c reads a BF16 / F16 expert's block in place when it runs); the biases are float32. */
static int load_experts_fused(Forward *f, int L, size_t E, size_t FI, bool dry, size_t *bytes, Ffn *ex) {
    static const tensor_role r[4] = {ROLE_EXPS_GATE_UP, ROLE_EXPS_GATE_UP_BIAS, ROLE_EXPS_DOWN, ROLE_EXPS_DOWN_BIAS};
    const size_t D = f->D, a[4] = {D, 2 * FI, FI, D}, b[4] = {2 * FI, 0, D, 0};
    Mat *m[4] = {0};
    dt_fp4 q[4];
    int rc = AL_OK;
    for (int i = 0; rc == AL_OK && i < 4; i++) {
        char n[192];
        rc = role_name(f, r[i], L, -1, NULL, n, sizeof n);
        if (rc == AL_OK) rc = read_experts(f, n, E, a[i], b[i], dry, bytes, &m[i], &q[i]);
    }
    for (size_t e = 0; rc == AL_OK && !dry && e < E; e++) {
        ex[e].ffn = FI;
        ex[e].pairs = true;
        for (int i = 0; rc == AL_OK && i < 4; i += 2) {
            Lin *l = i ? &ex[e].down : &ex[e].gu;
            if (q[i].enc != DT_FP4_NONE) rc = expert_fp4(&q[i], m[i + 1], e, a[i], b[i], l);
            else if ((rc = fused_view(f, L, r[i], e, a[i], b[i], true, false, NULL, l)) == AL_OK)
                rc = expert_bias(m[i + 1], e, b[i], &l->b);
        }
    }
    for (int i = 0; i < 4; i++) mat_free(m[i]);
    return rc;
}

/* The routed experts of layer L from fused tensors (Qwen3.5 MoE): expert e's gate_up_proj block
 * (2I, D) is its rows [gate ; up] (Phi-3's fused layout, `gu`), its down_proj block (D, I). */
static int load_fused_experts(Forward *f, int L, bool dry, size_t *bytes, Ffn *ex) {
    size_t E = (size_t)f->c->moe.n_experts, FF = expert_ffn(f), D = f->D;
    int rc = AL_OK;
    for (size_t e = 0; rc == AL_OK && e < E; e++) {
        ex[e].ffn = FF;
        rc = fused_view(f, L, ROLE_EXPS_GATE_UP, e, 2 * FF, D, false, dry, bytes, &ex[e].gu);
        if (rc == AL_OK) rc = fused_view(f, L, ROLE_EXPS_DOWN, e, D, FF, false, dry, bytes, &ex[e].down);
    }
    return rc;
}

/* Qwen3-VL MoE's and Llama 4's experts: gate_up_proj (E, D, 2 FI) used as x @ W with gate / up the column halves
 * (Phi-3's `gu` [gate | up] outputs), down_proj (E, FI, D) -- the releases' layout, as transformers 4.57's bmm, vLLM's
 * loader and llama.cpp's converter read Qwen3-VL MoE's (transformers 5 transposes them at load where the shapes
 * differ) --; each expert's blocks viewed in the mapping as (in, out) weights, read in place by matmul.c's x @ W
 * kernels (they were transposed into owned float32 copies at load: 4 bytes a weight held for every expert). */
static int load_experts_xw(Forward *f, int L, size_t E, size_t FI, bool dry, size_t *bytes, Ffn *ex) {
    int rc = AL_OK;
    for (size_t e = 0; rc == AL_OK && e < E; e++) {
        ex[e].ffn = FI;
        rc = fused_view(f, L, ROLE_EXPS_GATE_UP, e, f->D, 2 * FI, true, dry, bytes, &ex[e].gu);
        if (rc == AL_OK) rc = fused_view(f, L, ROLE_EXPS_DOWN, e, FI, f->D, true, dry, bytes, &ex[e].down);
    }
    return rc;
}

/* Router, correction bias, routed and shared experts of MoE layer L. */
static int load_moe(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    const MoeSpec *ms = &f->c->moe;
    size_t E = (size_t)ms->n_experts, eff = expert_ffn(f);
    int rc = load_lin(f, L, ROLE_ROUTER, -1, f->D, E, false, dry, bytes, &w->router);
    char bn[192];
    if (rc == AL_OK && cfg_role_name(f->c, ROLE_ROUTER_BIAS, L, -1, NULL, bn, sizeof bn) && store_has(f->m->store, bn))
        rc = load_mat(f, bn, 1, E, dry, bytes, &w->ebias);
    if (rc == AL_OK && !(w->experts = al_calloc(E, sizeof *w->experts, "experts"))) rc = AL_ERR;
    if (rc == AL_OK && f->c->moe.layout == MOE_GPT_OSS) return load_experts_fused(f, L, E, eff, dry, bytes, w->experts);
    bool xw = f->c->moe.layout == MOE_QWEN3_VL || f->c->moe.layout == MOE_LLAMA4;   /* (E, D, 2I) as x @ W */
    if (rc == AL_OK && xw) rc = load_experts_xw(f, L, E, eff, dry, bytes, w->experts);
    if (rc == AL_OK && !xw && cfg_role(f->c, ROLE_EXPS_GATE_UP)) rc = load_fused_experts(f, L, dry, bytes, w->experts);
    for (size_t e = 0; rc == AL_OK && !cfg_role(f->c, ROLE_EXPS_GATE_UP) && e < E; e++)
        rc = load_ffn(f, L, (int)e, &expert_roles, eff, dry, bytes, &w->experts[e]);
    if (rc == AL_OK && ms->n_shared > 0 && !cfg_role(f->c, ROLE_SHEXP_DOWN))
        rc = al_err("internal: a %s model's experts have no shared expert tensors", f->c->model_type);
    bool scaled = cfg_role(f->c, ROLE_SHEXP_SCALE) != NULL;     /* Qwen3-Next: shared_expert_intermediate_size */
    size_t sff = ms->shared_ffn > 0 ? (size_t)ms->shared_ffn : eff * (size_t)ms->n_shared;   /* Qwen3-Next, Nemotron 3 */
    if (rc == AL_OK && ms->n_shared > 0) rc = load_ffn(f, L, -1, &shared_roles, sff, dry, bytes, &w->mlp);
    if (rc == AL_OK && ms->n_shared > 0 && scaled)
        rc = load_lin(f, L, ROLE_SHEXP_SCALE, -1, f->D, 1, false, dry, bytes, &w->shscale);
    return rc;
}

/* MLA's projections and latent norms. */
static int load_mla(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    size_t D = f->D, H = f->H, dqk = f->dqk;
    int rc = AL_OK;
    if (f->ql) {
        rc = load_lin(f, L, ROLE_Q_A, -1, D, f->ql, false, dry, bytes, &w->qa);
        if (rc == AL_OK && f->c->latent_norm) rc = load_norm(f, L, ROLE_Q_A_NORM, f->ql, dry, bytes, &w->qa_norm, NULL);
        if (rc == AL_OK) rc = load_lin(f, L, ROLE_Q_B, -1, f->ql, H * dqk, false, dry, bytes, &w->q);
    } else
        rc = load_lin(f, L, ROLE_Q, -1, D, H * dqk, false, dry, bytes, &w->q);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_KV_A, -1, D, f->kl + f->rope, false, dry, bytes, &w->kva);
    if (rc == AL_OK && f->c->latent_norm) rc = load_norm(f, L, ROLE_KV_A_NORM, f->kl, dry, bytes, &w->kva_norm, NULL);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_KV_B, -1, f->kl, H * (f->nope + f->dv), false, dry, bytes, &w->kvb);
    if (rc != AL_OK || !cfg_layer_indexer(f->c, L)) return rc;        /* IndexShare's shared layers: none read */
    size_t IH = (size_t)f->c->index_heads, ID = (size_t)f->c->index_head_dim;
    rc = load_lin(f, L, ROLE_IDX_Q_B, -1, f->ql, IH * ID, false, dry, bytes, &w->iqb);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_IDX_K, -1, D, ID, false, dry, bytes, &w->ik);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_IDX_W, -1, D, IH, false, dry, bytes, &w->iw);
    char wn[192], bn[192];
    if (rc == AL_OK) rc = role_name(f, ROLE_IDX_K_NORM, L, -1, "weight", wn, sizeof wn);
    if (rc == AL_OK) rc = role_name(f, ROLE_IDX_K_NORM, L, -1, "bias", bn, sizeof bn);
    if (rc == AL_OK) rc = load_mat(f, wn, 1, ID, dry, bytes, &w->iknw);
    if (rc == AL_OK) rc = load_mat(f, bn, 1, ID, dry, bytes, &w->iknb);
    return rc;
}

/* GPT-NeoX's query_key_value output columns, head by head [q_h ; k_h ; v_h], reordered in place to
 * [Q ; K ; V] in each of the T rows of y (stride ld; the weights stay as stored). */
static int neox_unmix(Forward *f, float *y, size_t T, size_t ld) {
    size_t H = f->H, d = f->dqk, n = 3 * H * d;
    float *tmp = fb_fit(&f->perm, 1, n, "a query_key_value row");
    if (!tmp) return AL_ERR;
    for (size_t t = 0; t < T; t++) {
        float *r = y + t * ld;
        for (size_t h = 0; h < H; h++)
            for (size_t p = 0; p < 3; p++) memcpy(tmp + (p * H + h) * d, r + (h * 3 + p) * d, d * sizeof(float));
        memcpy(r, tmp, n * sizeof(float));
    }
    return AL_OK;
}

/* The `count` values of tensor n, whatever its dims (a conv1d [C, 1, K], KDA's A_log (1, 1, H, 1)), into dst from
 * value at (dry: only the check and the count). */
static int load_flat(Forward *f, const char *n, size_t count, bool dry, size_t *bytes, Mat *dst, size_t at) {
    size_t numel = 1;
    const st_entry *e;
    const st_file *sf;
    int rc = store_entry(f->m->store, n, &e, &sf);
    if (rc == AL_OK) {
        for (int i = 0; i < e->ndim; i++) numel *= e->shape[i];
        if (numel != count) rc = al_err("tensor '%s' has %zu value%s but this %s model needs %zu", n, numel, al_s(numel),
                                        f->c->model_type, count);
        if (bytes) *bytes += numel * dt_size(e->dtype);
    }
    if (rc == AL_OK && !dry) rc = dt_to_f32(e->dtype, st_data(sf, e), numel, dst->data + at);
    return rc;
}

/* A Kimi Delta Attention layer's weights (kda.h): q / k / v, f_a / f_b, g_a / g_b, b and o_proj, the three
 * convs stacked (3 H d, K), A_log (H), dt_bias (H d), o_norm (d). */
static int load_kda(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    const LinearSpec *ls = &f->c->lin;
    size_t D = f->D, H = (size_t)ls->v_heads, d = (size_t)ls->dv, n = H * d;
    static const tensor_role conv[3] = {ROLE_LIN_Q_CONV, ROLE_LIN_K_CONV, ROLE_LIN_V_CONV};
    char nm[192];
    int rc = load_lin(f, L, ROLE_LIN_Q, -1, D, n, false, dry, bytes, &w->kq);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_K, -1, D, n, false, dry, bytes, &w->kk);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_V, -1, D, n, false, dry, bytes, &w->kv);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_F_A, -1, D, d, false, dry, bytes, &w->kfa);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_F_B, -1, d, n, false, dry, bytes, &w->kfb);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_G_A, -1, D, d, false, dry, bytes, &w->kga);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_G_B, -1, d, n, false, dry, bytes, &w->kgb);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_B, -1, D, H, false, dry, bytes, &w->lb);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_OUT, -1, n, D, false, dry, bytes, &w->lout);
    size_t K = (size_t)ls->conv;
    if (rc == AL_OK && !dry && (!(w->lconv = mat_new(3 * n, K)) || !(w->alog = mat_new(1, H)))) rc = AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < 3; i++)
        if ((rc = role_name(f, conv[i], L, -1, "weight", nm, sizeof nm)) == AL_OK)
            rc = load_flat(f, nm, n * K, dry, bytes, w->lconv, i * n * K);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_A_LOG, L, -1, NULL, nm, sizeof nm)) == AL_OK)
        rc = load_flat(f, nm, H, dry, bytes, w->alog, 0);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_DT_BIAS, L, -1, NULL, nm, sizeof nm)) == AL_OK)
        rc = load_mat(f, nm, 1, n, dry, bytes, &w->dtb);
    return rc == AL_OK ? load_norm(f, L, ROLE_LIN_NORM, d, dry, bytes, &w->lnorm, NULL) : rc;
}

/* A Gated DeltaNet layer's weights (linattn.h): projections, conv1d (C, 1, K) as (C, K), A_log,
 * dt_bias, the gated norm. */
static int load_linear(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    const LinearSpec *ls = &f->c->lin;
    if (ls->layout == LIN_KDA) return load_kda(f, L, dry, bytes, w);
    size_t D = f->D, Hk = (size_t)ls->k_heads, Hv = (size_t)ls->v_heads, dk = (size_t)ls->dk, dv = (size_t)ls->dv;
    size_t C = 2 * Hk * dk + Hv * dv;
    char n[192];
    bool split = cfg_role(f->c, ROLE_LIN_QKV) != NULL;          /* Qwen3.5: in_proj_qkv, _z, _b, _a */
    int rc = load_lin(f, L, split ? ROLE_LIN_QKV : ROLE_LIN_QKVZ, -1, D, split ? C : C + Hv * dv, false, dry, bytes,
                      &w->lqkvz);
    if (rc == AL_OK && !split) rc = load_lin(f, L, ROLE_LIN_BA, -1, D, 2 * Hv, false, dry, bytes, &w->lba);
    if (rc == AL_OK && split) rc = load_lin(f, L, ROLE_LIN_Z, -1, D, Hv * dv, false, dry, bytes, &w->lz);
    if (rc == AL_OK && split) rc = load_lin(f, L, ROLE_LIN_B, -1, D, Hv, false, dry, bytes, &w->lb);
    if (rc == AL_OK && split) rc = load_lin(f, L, ROLE_LIN_A, -1, D, Hv, false, dry, bytes, &w->la);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_OUT, -1, Hv * dv, D, false, dry, bytes, &w->lout);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_CONV, L, -1, "weight", n, sizeof n)) == AL_OK) {
        const st_entry *e;
        const st_file *sf;
        size_t numel = 1;
        if ((rc = store_entry(f->m->store, n, &e, &sf)) == AL_OK) {   /* [C, 1, K]: not a matrix */
            for (int i = 0; i < e->ndim; i++) numel *= e->shape[i];
            if (numel != C * (size_t)ls->conv)
                rc = al_err("tensor '%s' has %zu value%s but a conv of %zu channel%s and kernel %d needs %zu", n, numel, al_s(numel), C, al_s(C),
                            ls->conv, C * (size_t)ls->conv);
            if (bytes) *bytes += numel * dt_size(e->dtype);
        }
        if (rc == AL_OK && !dry && !(w->lconv = mat_new(C, (size_t)ls->conv))) rc = AL_ERR;
        if (rc == AL_OK && !dry) rc = dt_to_f32(e->dtype, st_data(sf, e), numel, w->lconv->data);
    }
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_A_LOG, L, -1, NULL, n, sizeof n)) == AL_OK)
        rc = load_mat(f, n, 1, Hv, dry, bytes, &w->alog);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_DT_BIAS, L, -1, NULL, n, sizeof n)) == AL_OK)
        rc = load_mat(f, n, 1, Hv, dry, bytes, &w->dtb);
    if (rc == AL_OK) rc = load_norm(f, L, ROLE_LIN_NORM, dv, dry, bytes, &w->lnorm, NULL);
    return rc;
}

/* A conv1d weight [C, 1, K] as (C, K) (with dry, only checked and counted). */
static int load_conv(Forward *f, const char *n, size_t C, size_t K, bool dry, size_t *bytes, Mat **out) {
    const st_entry *e;
    const st_file *sf;
    size_t numel = 1;
    int rc = store_entry(f->m->store, n, &e, &sf);
    for (int i = 0; rc == AL_OK && i < e->ndim; i++) numel *= e->shape[i];
    if (rc == AL_OK && numel != C * K)
        rc = al_err("tensor '%s' has %zu value%s but a conv of %zu channel%s and kernel %zu needs %zu", n, numel, al_s(numel), C, al_s(C), K, C * K);
    if (rc == AL_OK && bytes) *bytes += numel * dt_size(e->dtype);
    if (rc == AL_OK && !dry && !(*out = mat_new(C, K))) rc = AL_ERR;
    if (rc == AL_OK && !dry) rc = dt_to_f32(e->dtype, st_data(sf, e), numel, (*out)->data);
    return rc;
}

/* A Mamba-2 layer's weights (mamba2.h): in_proj, conv1d (C, 1, K) as (C, K) and its bias, A_log, D, dt_bias, the
 * gated norm (H P), out_proj. */
static int load_mamba2(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    const LinearSpec *ls = &f->c->lin;
    size_t D = f->D, H = (size_t)ls->v_heads, HP = H * (size_t)ls->dv, C = HP + 2 * (size_t)ls->k_heads * (size_t)ls->dk;
    char n[192];
    int rc = load_lin(f, L, ROLE_LIN_IN, -1, D, HP + C + H, false, dry, bytes, &w->min);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_LIN_OUT, -1, HP, D, false, dry, bytes, &w->lout);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_CONV, L, -1, "weight", n, sizeof n)) == AL_OK)
        rc = load_conv(f, n, C, (size_t)ls->conv, dry, bytes, &w->lconv);
    if (rc == AL_OK && ls->conv_bias && (rc = role_name(f, ROLE_LIN_CONV, L, -1, "bias", n, sizeof n)) == AL_OK)
        rc = load_mat(f, n, 1, C, dry, bytes, &w->mconvb);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_A_LOG, L, -1, NULL, n, sizeof n)) == AL_OK)
        rc = load_mat(f, n, 1, H, dry, bytes, &w->alog);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_D, L, -1, NULL, n, sizeof n)) == AL_OK)
        rc = load_mat(f, n, 1, H, dry, bytes, &w->md);
    if (rc == AL_OK && (rc = role_name(f, ROLE_LIN_DT_BIAS, L, -1, NULL, n, sizeof n)) == AL_OK)
        rc = load_mat(f, n, 1, H, dry, bytes, &w->dtb);
    if (rc == AL_OK) rc = load_norm(f, L, ROLE_LIN_NORM, HP, dry, bytes, &w->lnorm, NULL);
    return rc;
}

/* The attention projections of layer L (and q/k norms): MLA's, or those the attention layout has
 * (split q / k / v -- a gated q_proj twice as tall --, or a fused qkv; then o); a linear-attention
 * layer's own. */
/* The head dims of layer L's attention into f (KV heads, Q/K and V dims, RoPE columns): the model's, or Gemma 4's
 * full layers' own (cfull). Every per-layer step (loading, the cache, attention) sets them first. */
static void layer_dims(Forward *f, int L) {
    if (f->mla) return;
    const ModelConfig *c = f->cfull && cfg_layer_full_type(f->c, L) ? f->cfull : f->c;
    f->G = (size_t)c->n_kv_heads;
    f->nope = (size_t)c->qk_nope_dim;
    f->rope = (size_t)c->qk_rope_dim;
    f->dqk = f->nope + f->rope;
    f->rcol = (size_t)cfg_rope_col(c);
    f->dv = (size_t)c->v_dim;
}

static int load_attn(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    layer_dims(f, L);
    const ModelConfig *c = f->c;
    size_t D = f->D, H = f->H, G = f->G, dqk = f->dqk, dv = f->dv;
    if (cfg_layer_mamba(c, L)) return load_mamba2(f, L, dry, bytes, w);
    if (cfg_layer_linear(c, L) && c->lin.layer[L] == 2) return AL_OK;     /* Nemotron-H's MLP blocks: no mixer */
    if (cfg_layer_linear(c, L)) return load_linear(f, L, dry, bytes, w);
    bool io = c->attn == QKV_CONV1D, split = !f->mla && cfg_role(c, ROLE_Q), fused = !f->mla && cfg_role(c, ROLE_QKV);
    int rc = f->mla ? load_mla(f, L, dry, bytes, w) : AL_OK;
    size_t qrows = (c->attn_gate ? 2 : 1) * H * dqk;      /* a gated q_proj: per head [query | gate] */
    bool own_kv = cfg_kv_source(c, L) == L, own_v = own_kv && !cfg_layer_v_is_k(c, L);   /* Gemma 4 */
    if (rc == AL_OK && split) rc = load_lin(f, L, ROLE_Q, -1, D, qrows, false, dry, bytes, &w->q);
    if (rc == AL_OK && split && c->kv_rebuild) {          /* attnlab's qk-norm keep: K / V rebuilt from the cache */
        rc = load_lin(f, L, ROLE_KV_A, -1, D, (size_t)c->kv_rebuild, false, dry, bytes, &w->kva);
        if (rc == AL_OK) rc = load_lin(f, L, ROLE_KV_B, -1, (size_t)c->kv_rebuild, G * (dqk + dv), false, dry, bytes, &w->kvb);
    }
    if (rc == AL_OK && split && own_kv && !c->kv_rebuild) rc = load_lin(f, L, ROLE_K, -1, D, G * dqk, false, dry, bytes, &w->k);
    if (rc == AL_OK && split && own_v && !c->kv_rebuild) rc = load_lin(f, L, ROLE_V, -1, D, G * dv, false, dry, bytes, &w->v);
    if (rc == AL_OK && fused) rc = load_lin(f, L, ROLE_QKV, -1, D, H * dqk + G * (dqk + dv), io, dry, bytes, &w->qkv);
    if (rc == AL_OK) rc = load_lin(f, L, ROLE_O, -1, H * dv, D, io, dry, bytes, &w->o);
    if (rc == AL_OK && c->qk_norm != QKN_NONE) {
        bool proj = c->qk_norm == QKN_PROJ;
        rc = load_norm(f, L, ROLE_Q_NORM, proj ? H * dqk : dqk, dry, bytes, &w->qn, NULL);
        if (rc == AL_OK && own_kv) rc = load_norm(f, L, ROLE_K_NORM, proj ? G * dqk : dqk, dry, bytes, &w->kn, NULL);
    }
    char ln[192];                                         /* Gemma 4's layer_scalar: a buffer, no ".weight" */
    if (rc == AL_OK && cfg_role_name(c, ROLE_LAYER_SCALAR, L, -1, NULL, ln, sizeof ln))
        rc = load_mat(f, ln, 1, 1, dry, bytes, &w->lscalar);
    char sn[192];
    if (rc == AL_OK && c->attn_sinks && role_name(f, ROLE_SINKS, L, -1, NULL, sn, sizeof sn) == AL_OK)
        rc = load_mat(f, sn, 1, H, dry, bytes, &w->sinks);
    else if (rc == AL_OK && c->attn_sinks)
        rc = AL_ERR;
    return rc;
}

/* Gemma 4's MoE block of layer L (enable_moe_block): router.proj, router.scale, router.per_expert_scale, the three norms,
 * and each expert viewed in place in experts.gate_up_proj [E, 2I, D] (rows [gate ; up], W x) and down_proj [E, D, I]. */
static int load_moe_block(Forward *f, int L, bool dry, size_t *bytes, LayerW *w) {
    size_t E = (size_t)f->c->moe_block_experts, D = f->D, NI = (size_t)f->c->moe_block_ffn;
    static const tensor_role nr[3] = {ROLE_NORM_FFN_OUT1, ROLE_NORM_FFN_OUT2, ROLE_NORM_FFN_IN2};
    char n[192];
    int rc = load_lin(f, L, ROLE_G4_ROUTER, -1, D, E, false, dry, bytes, &w->g4router);
    if (rc == AL_OK) rc = role_name(f, ROLE_G4_ROUTER_SCALE, L, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = load_mat(f, n, 1, D, dry, bytes, &w->g4rscale);
    if (rc == AL_OK) rc = role_name(f, ROLE_G4_EXPERT_SCALE, L, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = load_mat(f, n, 1, E, dry, bytes, &w->g4escale);
    for (int i = 0; rc == AL_OK && i < 3; i++) rc = load_norm(f, L, nr[i], D, dry, bytes, &w->g4norm[i], NULL);
    if (rc == AL_OK && !dry && !(w->g4x = al_calloc(E, sizeof *w->g4x, "experts"))) rc = AL_ERR;
    for (size_t e = 0; rc == AL_OK && e < E; e++) {
        Ffn one = {0}, *x = dry ? &one : &w->g4x[e];
        x->ffn = NI;
        rc = fused_view(f, L, ROLE_G4_EXPS_GATE_UP, e, 2 * NI, D, false, dry, bytes, &x->gu);
        if (rc == AL_OK) rc = fused_view(f, L, ROLE_G4_EXPS_DOWN, e, D, NI, false, dry, bytes, &x->down);
    }
    return rc;
}

/* Loads (or with dry, checks and counts) every weight of layer L. */
static int layer_load(Forward *f, int L, bool dry, size_t *bytes) {
    LayerW *w = &f->layers[L];
    if (!dry && w->loaded) return AL_OK;
    LayerW tmp = {0};
    LayerW *dst = dry ? &tmp : w;
    int rc = AL_OK;
    bool wide = f->c->double_wide_mlp && cfg_kv_source(f->c, L) != L;   /* Gemma 4's use_double_wide_mlp */
    for (int i = 0; rc == AL_OK && i < NS_COUNT; i++)
        if (cfg_role(f->c, slot_roles[i])) rc = load_norm(f, L, slot_roles[i], f->D, dry, bytes, &dst->nw[i], &dst->nb[i]);
    if (rc == AL_OK) rc = load_attn(f, L, dry, bytes, dst);
    size_t P = (size_t)f->c->ple_dim;                   /* Gemma 4's per-layer input */
    if (rc == AL_OK && P) rc = load_lin(f, L, ROLE_PLE_GATE, -1, f->D, P, false, dry, bytes, &dst->pgate);
    if (rc == AL_OK && P) rc = load_lin(f, L, ROLE_PLE_PROJ, -1, P, f->D, false, dry, bytes, &dst->pproj);
    if (rc == AL_OK && P) rc = load_norm(f, L, ROLE_PLE_NORM, f->D, dry, bytes, &dst->ppost, NULL);
    if (rc == AL_OK && f->c->moe_block_experts) rc = load_moe_block(f, L, dry, bytes, dst);
    bool moe = cfg_moe_layer(f->c, L), beside = moe && f->c->moe.layout == MOE_GRANITE;   /* Granite's shared MLP */
    if (rc == AL_OK && cfg_layer_mlp(f->c, L))
        rc = moe ? load_moe(f, L, dry, bytes, dst)
                 : load_ffn(f, L, -1, &dense_roles, f->ffn * (wide ? 2 : 1), dry, bytes, &dst->mlp);
    if (rc == AL_OK && beside) rc = load_ffn(f, L, -1, &dense_roles, f->ffn, dry, bytes, &dst->mlp);
    free(tmp.experts);
    if (rc != AL_OK) {
        if (!dry) layer_release(f, L);
        return al_err_ctx("forward pass, layer %d", L);
    }
    if (!dry) w->loaded = true;
    return AL_OK;
}

/* Embeddings, final norm and LM head. */
static int load_globals(Forward *f, size_t *bytes) {
    const ModelConfig *c = f->c;
    char n[192], head[192];
    cfg_role_name(c, ROLE_EMBED, -1, -1, "weight", n, sizeof n);
    int rc = load_view(f, n, f->vocab, f->D, false, false, bytes, &f->embed);
    if (rc == AL_OK && cfg_role_name(c, ROLE_POS_EMBED, -1, -1, "weight", n, sizeof n)) {   /* GPT-2's wpe */
        size_t R = 0, C = 0;
        rc = store_shape2(f->m->store, n, &R, &C);
        if (rc == AL_OK) rc = load_view(f, n, R, f->D, false, false, bytes, &f->wpe);
    }
    if (rc == AL_OK)
        rc = load_norm(f, -1, ROLE_FINAL_NORM, f->D, false, bytes, &f->norm, &f->norm_b);
    size_t P = (size_t)c->ple_dim, LP = P * (size_t)c->n_layers;   /* Gemma 4's per-layer embeddings */
    if (rc == AL_OK && P && cfg_role_name(c, ROLE_PLE_EMBED, -1, -1, "weight", n, sizeof n))
        rc = load_view(f, n, (size_t)c->ple_vocab, LP, false, false, bytes, &f->ple_embed);
    if (rc == AL_OK && P) rc = load_lin(f, -1, ROLE_PLE_MODEL_PROJ, -1, f->D, LP, false, false, bytes, &f->ple_proj);
    if (rc == AL_OK && P) rc = load_norm(f, -1, ROLE_PLE_MODEL_NORM, P, false, bytes, &f->ple_norm, NULL);
    /* tie_word_embeddings: the head is the embeddings, as transformers, vLLM and SGLang compute it, and an
     * lm_head stored beside them is not read (lint reports one that differs) */
    cfg_role_name(c, ROLE_LM_HEAD, -1, -1, "weight", head, sizeof head);
    if (rc == AL_OK && !f->c->tie_embeddings && store_has(f->m->store, head))
        rc = load_view(f, head, f->vocab, f->D, false, false, bytes, &f->lm_head);
    else if (rc == AL_OK && !f->c->tie_embeddings)
        rc = al_err("%s: no %s and tie_word_embeddings is not set: the output projection is missing", f->m->path, head);
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
    wmat_free(&f->embed); wmat_free(&f->wpe); wmat_free(&f->lm_head); mat_free(f->norm); mat_free(f->norm_b);
    wmat_free(&f->ple_embed); lin_free(&f->ple_proj); mat_free(f->ple_norm); fb_free(&f->ple); fb_free(&f->pg);
    fb_free(&f->m1);
    mm_work_free(f->mm);
    if (f->kc)
        for (int L = 0; L < f->c->n_layers; L++) { free(f->kc[L]); free(f->vc[L]); }
    if (f->ikc)
        for (int L = 0; L < f->c->n_layers; L++) free(f->ikc[L]);
    free(f->ikc);
    free(f->isel);
    if (f->lst)
        for (int L = 0; L < f->c->n_layers; L++) linattn_state_free(&f->lst[L]);
    free(f->lst);
    if (f->mst)
        for (int L = 0; L < f->c->n_layers; L++) mamba2_state_free(&f->mst[L]);
    free(f->mst);
    if (f->xin)
        for (int L = 0; L < f->c->n_layers; L++) free(f->xin[L]);
    if (f->own)
        for (int L = 0; L < f->c->n_layers; L++) attn_layer_free(f->own[L]);
    free(f->own);
    free(f->kc);
    free(f->vc);
    free(f->xin);
    free(f->over);
    free(f->opos);
    free(f->evkeep);
    free(f->lrs);
    free(f->hmask);
    for (int i = 0; i < 2; i++) {
        free(f->rs[i].inv);
        free(f->rs[i].inv_long);
        fb_free(&f->rs[i].cs);
        fb_free(&f->rs[i].sn);
    }
    fbuf *bs[] = {&f->x, &f->h, &f->y, &f->q, &f->k, &f->v, &f->att, &f->f1, &f->f2, &f->lat, &f->lat2, &f->kvb,
                  &f->logit, &f->scores, &f->mx, &f->gx, &f->gy, &f->rl, &f->perm, &f->iq, &f->iwt, &f->gate};
    for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) fb_free(bs[i]);
    free(f);
}

/* attnlab_mla whose layers carry their own RoPE frequencies (MHA2MLA's pairs; cfg layer_rope_freqs): every layer read
 * by attn_layer_load (with them) and run as an override, which fwd_set_attn(NULL) and fwd_clear_attn restore. */
static int own_layers(Forward *f) {
    int n = f->c->n_layers, rc = AL_OK;
    if (!(f->own = al_calloc((size_t)n, sizeof *f->own, "attnlab_mla's layers"))) return AL_ERR;
    for (int L = 0; rc == AL_OK && L < n; L++) rc = attn_layer_load(f->m, L, &f->own[L]);
    for (int L = 0; rc == AL_OK && L < n; L++) rc = fwd_set_attn(f, L, f->own[L]);
    return rc;
}

int fwd_new(Model *m, const FwdOptions *opt, Forward **out) {
    *out = NULL;
    const ModelConfig *c = &m->cfg;
    Forward *f = al_calloc(1, sizeof *f, "a forward pass");
    if (!f) return AL_ERR;
    f->m = m;
    f->c = c;
    f->cfull = m->cfg_full;
    f->mla = cfg_is_mla(c);
    f->D = (size_t)c->hidden;
    f->H = (size_t)c->n_heads;
    f->G = f->mla ? f->H : (size_t)c->n_kv_heads;
    f->nope = (size_t)c->qk_nope_dim;
    f->rope = (size_t)c->qk_rope_dim;
    f->dqk = f->nope + f->rope;
    f->rcol = (size_t)cfg_rope_col(c);
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
    f->lst = al_calloc((size_t)c->n_layers, sizeof *f->lst, "linear-attention states");
    f->mst = al_calloc((size_t)c->n_layers, sizeof *f->mst, "Mamba-2 states");
    if (!f->layers || !f->kc || !f->vc || !f->over || !f->xin || !f->lst || !f->mst) rc = AL_ERR;
    if (rc == AL_OK && cfg_has_indexer(c) && !(f->ikc = al_calloc((size_t)c->n_layers, sizeof *f->ikc, "the indexer's keys")))
        rc = AL_ERR;
    size_t layer_bytes = 0, glob_bytes = 0;
    for (int L = 0; rc == AL_OK && L < c->n_layers; L++) rc = layer_load(f, L, true, &layer_bytes);
    if (rc == AL_OK) rc = load_globals(f, &glob_bytes);
    if (rc == AL_OK && f->wpe.data && maxc > f->wpe.rows) maxc = f->wpe.rows;
    f->max_ctx = maxc;
    f->streaming = layer_bytes + glob_bytes > mem_budget(opt);
    for (int L = 0; rc == AL_OK && !f->streaming && L < c->n_layers; L++) rc = layer_load(f, L, false, NULL);
    if (rc == AL_OK && c->layer_rope_freqs) rc = own_layers(f);
    f->nworkers = sweep_threads(f->H, 0);
    f->compute = opt ? opt->compute : MM_F32;
    if (rc == AL_OK && !(f->mm = mm_work_new(0))) rc = AL_ERR;
    if (rc != AL_OK) { fwd_free(f); return rc; }
    *out = f;
    return AL_OK;
}

void fwd_reset(Forward *f) { f->pos = 0; f->seq++; }
size_t fwd_pos(const Forward *f) { return f->pos; }
size_t fwd_vocab(const Forward *f) { return f->vocab; }
size_t fwd_max_ctx(const Forward *f) { return f->max_ctx; }
bool fwd_streaming(const Forward *f) { return f->streaming; }
void fwd_set_compute(Forward *f, mm_compute c) { f->compute = c; }
mm_compute fwd_compute(const Forward *f) { return f->compute; }

void fwd_set_hooks(Forward *f, const FwdHooks *h) {
    if (h) f->hooks = *h;
    else memset(&f->hooks, 0, sizeof f->hooks);
}

Model *fwd_model(const Forward *f) { return f->m; }

double fwd_attn_scale(const Forward *f, int layer) { return cfg_attn_scale(f->c, layer); }

size_t fwd_attn_window(const Forward *f, int layer) { return cfg_layer_window(f->c, layer); }

const float *fwd_attn_sinks(const Forward *f, int layer) {
    return layer >= 0 && layer < f->c->n_layers && f->layers[layer].sinks ? f->layers[layer].sinks->data : NULL;
}

int fwd_set_attn(Forward *f, int layer, const AttnLayer *L) {
    int n = f->c->n_layers;
    if (layer < 0 || layer >= n) return al_err("attention override: layer %d is out of range 0-%d", layer, n - 1);
    if (!L && f->own) L = f->own[layer];       /* the model's own: attnlab_mla's layer of its own frequencies */
    if (L && cfg_check_attn_layer(f->c, layer, "attention override") != AL_OK) return AL_ERR;
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
        const AttnLayer *own = f->own ? f->own[L] : NULL;     /* attnlab_mla's own layers stay */
        any |= f->over[L] != own;
        f->over[L] = own;
        if (own) continue;
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

/* cos / sin (T, rope/2) of positions pos .. pos+T-1 for each RoPE set, times its attention
 * factor; longrope takes its long factors when pos + T exceeds original_max_position_embeddings
 * (as Hugging Face decides per call from the last position). */
static int fwd_rope_tables(Forward *f, size_t T) {
    for (int i = 0; i < 2 && f->rs[i].inv && f->rs[i].half; i++) {
        RopeSet *r = &f->rs[i];
        size_t half = r->half;
        float *cs = fb_fit(&r->cs, T, half, "RoPE tables"), *sn = fb_fit(&r->sn, T, half, "RoPE tables");
        if (!cs || !sn) return AL_ERR;
        bool lng = r->inv_long && (double)(f->pos + T) > f->c->rope_spec.scaling.orig_max_pos;
        rope_tables(cs, sn, T, f->pos, lng ? r->inv_long : r->inv, half, r->mscale);
    }
    return AL_OK;
}

/* Rotates the RoPE columns [rcol, rcol + rope) of every head of x (T rows, stride ld) with layer
 * L's RoPE set. */
static void rope_apply(const Forward *f, int L, float *x, size_t T, size_t ld, size_t heads) {
    const RopeSet *r = &f->rs[f->lrs[L]];
    size_t half = r->half;
    for (size_t t = 0; t < T; t++) {
        const float *cs = r->cs.p + t * half, *sn = r->sn.p + t * half;
        for (size_t h = 0; h < heads; h++) rope_rotate_cs(x + t * ld + h * f->dqk + f->rcol, half, f->rope_lay, cs, sn);
    }
}

/* Ministral 3's llama_4_scaling_beta: q (T rows at positions pos.., stride ld, heads of dqk) times
 * 1 + beta ln(1 + floor(p / original_max_position_embeddings)) -- 1 before that position. */
static void q_pos_scale(const Forward *f, float *q, size_t T, size_t ld, size_t heads) {
    const RopeSpec *r = &f->c->rope_spec;
    if (r->q_beta == 0) return;
    for (size_t t = 0; t < T; t++) {
        float s = (float)(1.0 + r->q_beta * log(1.0 + floor((double)(f->pos + t) / r->q_floor)));
        for (size_t j = 0; s != 1.0f && j < heads * f->dqk; j++) q[t * ld + j] *= s;
    }
}

/* Llama 4 after RoPE: on its RoPE layers each q / k head of x (T rows, stride ld) divided by its RMS (use_qk_norm,
 * no weight); on its NoPE layers q times the temperature 1 + attn_scale ln(1 + floor((p + 1) / floor_scale)). */
static void llama4_qk(const Forward *f, int L, float *x, size_t T, size_t ld, size_t heads, bool is_q) {
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; cfg_layer_qk_l2(f->c, L) && h < heads; h++) {
            float *v = x + t * ld + h * f->dqk;
            double ss = 0;
            for (size_t j = 0; j < f->dqk; j++) ss += (double)v[j] * v[j];
            float inv = (float)(1.0 / sqrt(ss / (double)f->dqk + f->norm_eps));
            for (size_t j = 0; j < f->dqk; j++) v[j] *= inv;
        }
    for (size_t t = 0; is_q && t < T; t++) {
        float s = (float)cfg_q_temperature(f->c, L, f->pos + t);
        for (size_t j = 0; s != 1.0f && j < heads * f->dqk; j++) x[t * ld + j] *= s;
    }
}

/* q_norm / k_norm w on x (T rows, stride ld, heads of dqk): per head (QKN_HEAD) or over the whole
 * projection (QKN_PROJ); RMSNorm, (1 + w) where the model's norms are. */
static void qk_norm(const Forward *f, const Mat *w, float *x, size_t T, size_t ld, size_t heads) {
    if (!w) return;
    bool one_plus = f->c->norm == NORM_RMS_1P;
    if (f->c->qk_norm == QKN_PROJ) rmsnorm(x, ld, T, heads * f->dqk, w->data, one_plus, f->norm_eps, x, ld);
    else
        for (size_t t = 0; t < T; t++)
            rmsnorm(x + t * ld, f->dqk, heads, f->dqk, w->data, one_plus, f->norm_eps, x + t * ld, f->dqk);
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
    for (int L = 0; L < f->c->n_layers; L++) {
        layer_dims(f, L);                               /* Gemma 4: each layer type its own K / V width */
        size_t kw = f->G * f->dqk, vw = f->G * f->dv;
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
    for (int L = 0; f->ikc && L < f->c->n_layers; L++) {
        size_t iw = (size_t)f->c->index_head_dim;
        float *ik = al_malloc3(cap, iw, sizeof(float), "the indexer's keys");
        if (!ik) return AL_ERR;
        if (f->ikc[L]) memcpy(ik, f->ikc[L], f->cap * iw * sizeof(float));
        free(f->ikc[L]);
        f->ikc[L] = ik;
    }
    int rc = AL_OK;
    for (int L = 0; rc == AL_OK && L < f->c->n_layers; L++)
        if (f->over[L]) rc = xin_fit(f, L, cap);
    if (rc == AL_OK) rc = opos_fit(f, cap);
    if (rc == AL_OK) f->cap = cap;
    return rc;
}

/* ---------------------------------------------------------------- attention probes */

/* Rows pos0 .. pos0+T-1 of a captured head from S (T, pos0 + T), clipped to the capture's size. */
static void capture_rows(FwdCapture *c, const float *S, size_t pos0, size_t T) {
    size_t n = pos0 + T, cap = c->cap_rows;
    for (size_t t = 0; t < T && pos0 + t < cap; t++) {
        float *row = c->P + (pos0 + t) * cap;
        memset(row, 0, cap * sizeof *row);
        memcpy(row, S + t * n, (n < cap ? n : cap) * sizeof *row);
        c->rows = pos0 + t + 1;
    }
}

/* An overridden layer's captured head: its logits (attn_eval's, (H, n, n)) through the softmax with the
 * layer's window, chunk, soft-cap and sink, rows pos0 .. n-1. */
static void capture_override(FwdCapture *c, const AttnLayer *L, float *scores, size_t n, size_t pos0) {
    float *S = scores + (size_t)c->head * n * n;
    for (size_t i = pos0; i < n; i++) {
        size_t lo = L->window && i + 1 > L->window ? i + 1 - L->window : 0;
        if (L->chunk && i - i % L->chunk > lo) lo = i - i % L->chunk;
        attn_softmax_row_sink(S + i * n, n, lo, i, L->softcap, L->sinks ? L->sinks[c->head] : -INFINITY);
    }
    capture_rows(c, S + pos0 * n, pos0, n - pos0);
}

/* The indexer's row of query position P (weights p[i] / z on keys sel[i]) replaces the dense one the
 * capture took, when it asks for layer L's head h. */
static void capture_selected(FwdCapture *c, int L, size_t h, size_t P, const int *sel, const double *p, size_t K,
                             double z) {
    if (!c || c->layer != L || (size_t)c->head != h || P >= c->cap_rows) return;
    float *row = c->P + P * c->cap_rows;
    memset(row, 0, c->cap_rows * sizeof *row);
    for (size_t i = 0; i < K; i++)
        if ((size_t)sel[i] < c->cap_rows) row[sel[i]] = (float)(p[i] / z);
}

void fwd_set_capture(Forward *f, FwdCapture *c) {
    f->capture = c;
    if (c) c->rows = 0;
}

int fwd_mask_head(Forward *f, int layer, int head, bool masked) {
    if (layer < 0 || layer >= f->c->n_layers || head < 0 || (size_t)head >= f->H)
        return al_err("head mask: layer %d head %d is out of range (layers 0-%d, heads 0-%zu)", layer, head,
                      f->c->n_layers - 1, f->H - 1);
    if (!layersel_attn(f->c, layer))
        return al_err("head mask: layer %d is %s, not softmax attention with heads", layer, layersel_other_kind(f->c));
    if (!f->hmask && !(f->hmask = al_calloc((size_t)f->c->n_layers * f->H, 1, "the head mask"))) return AL_ERR;
    f->hmask[(size_t)layer * f->H + (size_t)head] = masked;
    return AL_OK;
}

void fwd_clear_head_mask(Forward *f) {
    free(f->hmask);
    f->hmask = NULL;
}

/* Zeroes the masked heads' slices of layer L's attention output f->att (T, H dv). */
static void head_mask_apply(Forward *f, int L, size_t T) {
    for (size_t h = 0; f->hmask && h < f->H; h++)
        for (size_t t = 0; f->hmask[(size_t)L * f->H + h] && t < T; t++)
            memset(f->att.p + t * f->H * f->dv + h * f->dv, 0, f->dv * sizeof(float));
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
    int src = cfg_kv_source(f->c, j->L);                  /* a KV-shared layer reads an earlier layer's cache */
    const float *K = f->kc[src] + g * f->dqk, *Vc = f->vc[src] + g * f->dv;
    float *S = f->scores.p + (size_t)worker * QCHUNK * (f->pos + j->T);
    const Mat *sk = f->layers[j->L].sinks;
    FwdCapture *cp = f->capture;
    bool cap = cp && cp->layer == j->L && (size_t)cp->head == h;   /* one block of T rows: S keeps them all */
    if (cap && !(S = al_malloc3(j->T, f->pos + j->T, sizeof *S, "the captured attention"))) return AL_ERR;
    attn_head_causal(&(AttnHeadJob){.q = j->q + h * f->dqk, .ldq = j->ldq, .K = K, .ldk = kw, .V = Vc, .ldv = vw,
                                     .T = j->T, .pos0 = f->pos, .d = f->dqk, .dv = f->dv, .scale = j->scale,
                                     .window = fwd_attn_window(f, j->L), .chunk = cfg_layer_chunk(f->c, j->L),
                                     .softcap = f->c->attn_softcap, .qb = cap ? j->T : QCHUNK,
                                     .has_sink = sk != NULL, .sink = sk ? sk->data[h] : 0, .S = S, .out = f->att.p + h * f->dv, .ldo = Hdv,
                                     .keep = f->evfn ? f->evkeep + g * j->T * (f->pos + j->T) : NULL,   /* fwd_set_evict */
                                     .ldkeep = f->pos + j->T});
    if (cap) capture_rows(cp, S, f->pos, j->T);
    if (cap) free(S);
    return AL_OK;
}

/* Overridden layer L on f->h (T rows): the rows join the layer's input cache, attn_eval runs the
 * override over the whole sequence (its held matrices -- attn_eval.h -- in the pass's mode, as a loaded model's), and its last T output rows go to f->h (T, D). Before Gemma 4's KV-shared
 * layers (which read an earlier layer's cache), its keys and values go to L's cache as well (attn_eval_kv). */
static int attention_override(Forward *f, int L, size_t T) {
    size_t D = f->D, n = f->pos + T, kw = f->G * f->dqk, vw = f->G * f->dv;
    const AttnLayer *A = f->over[L];
    bool feeds = f->c->kv_shared_from > L;
    memcpy(f->xin[L] + f->pos * D, f->h.p, T * D * sizeof(float));
    Mat X = {.rows = n, .cols = D, .data = f->xin[L]};
    AttnOut *o = NULL;
    bool cap = f->capture && f->capture->layer == L && f->capture->head < A->n_heads;
    if (feeds && ((size_t)A->n_kv_heads * (size_t)A->head_dim != kw || (size_t)A->n_kv_heads * (size_t)A->v_dim != vw))
        return al_err("forward pass, layer %d (override): its K / V widths differ from the cache the KV-shared layers "
                      "read", L);
    if (attn_eval_mm(A, &X, f->opos, cap, feeds, f->mm, f->compute, &o))   /* held matrices: the pass's products */
        return al_err_ctx("forward pass, layer %d (override)", L);
    if (cap) capture_override(f->capture, A, o->scores, n, f->pos);
    if (feeds) {
        memcpy(f->kc[L] + f->pos * kw, o->k + f->pos * kw, T * kw * sizeof(float));
        memcpy(f->vc[L] + f->pos * vw, o->v + f->pos * vw, T * vw * sizeof(float));
    }
    memcpy(f->h.p, o->out->data + f->pos * D, T * D * sizeof(float));
    attn_out_free(o);
    return AL_OK;
}

/* ---------------------------------------------------------------- the lightning indexer
 * DeepSeek-V3.2 and GLM-5 (transformers' GlmMoeDsaIndexer; DeepSeek's inference/model.py Indexer, whose
 * Hadamard rotation of q and k keeps their dot products): per query t and key s <= t,
 *   score(t, s) = sum_h w_h(t) relu(q_h(t) . k(s) / sqrt(ID)),  w(t) = weights_proj(x_t) / sqrt(IH),
 *   q(t) = wq_b(q latent after q_a_layernorm) (IH heads of ID), k(s) = LayerNorm(wk(x_s)) (eps 1e-6),
 * both with RoPE on their first qk_rope_head_dim dims (rotate_half; GLM-5's, indexer_rope_interleave, interleaved
 * pairs: cfg index_rope). Query t attends to the index_topk keys of highest score (every key while t < index_topk:
 * the selection then keeps them all). */

#define INDEXER_EPS 1e-6

/* RoPE (the indexer's layout) on the first `rope` dims of each of `heads` vectors of width ID per row. */
static void indexer_rope(const Forward *f, int L, float *x, size_t T, size_t ld, size_t heads, size_t ID) {
    size_t half = f->rope / 2;
    const RopeSet *r = &f->rs[f->lrs[L]];
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < heads; h++)
            rope_rotate_cs(x + t * ld + h * ID, half, f->c->index_rope, r->cs.p + t * half, r->sn.p + t * half);
}

/* The indexer's queries and head weights of the T rows (from the q latent ql, (T, ql)) into f->iq /
 * f->iwt, and its keys into the layer's indexer cache at positions pos.. */
static int indexer_project(Forward *f, int L, size_t T, const float *ql) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, IH = (size_t)f->c->index_heads, ID = (size_t)f->c->index_head_dim;
    float *iq = fb_fit(&f->iq, T, IH * ID, "the indexer's queries"), *iw = fb_fit(&f->iwt, T, IH, "the indexer's weights");
    float *ik = f->ikc[L] + f->pos * ID;
    int rc = iq && iw ? lin_apply(f, &w->iqb, ql, f->ql, T, iq, IH * ID) : AL_ERR;
    if (rc == AL_OK) rc = lin_apply(f, &w->ik, f->h.p, D, T, ik, ID);
    if (rc == AL_OK) rc = lin_apply(f, &w->iw, f->h.p, D, T, iw, IH);
    if (rc != AL_OK) return rc;
    layernorm(ik, ID, T, ID, w->iknw->data, w->iknb->data, INDEXER_EPS, ik, ID);
    indexer_rope(f, L, iq, T, IH * ID, IH, ID);
    indexer_rope(f, L, ik, T, ID, 1, ID);
    float s = (float)(1.0 / sqrt((double)IH));
    for (size_t i = 0; i < T * IH; i++) iw[i] *= s;
    return AL_OK;
}

typedef struct { double s; int j; } scored_key;

/* Highest score first; ties: the earlier key. */
static int cmp_scored(const void *a, const void *b) {
    const scored_key *x = a, *y = b;
    return x->s > y->s ? -1 : x->s < y->s ? 1 : x->j - y->j;
}

/* The index_topk keys of query row t (position P) of layer L into sel, highest score first. */
static void indexer_select(const Forward *f, int L, size_t t, size_t P, scored_key *sk, int *sel) {
    size_t IH = (size_t)f->c->index_heads, ID = (size_t)f->c->index_head_dim, K = (size_t)f->c->index_topk;
    const float *q = f->iq.p + t * IH * ID, *w = f->iwt.p + t * IH;
    double sc = 1.0 / sqrt((double)ID);
    for (size_t j = 0; j <= P; j++) {
        const float *k = f->ikc[L] + j * ID;
        double s = 0;
        for (size_t h = 0; h < IH; h++) {
            double d = 0;
            for (size_t i = 0; i < ID; i++) d += (double)q[h * ID + i] * k[i];
            d *= sc;
            s += d > 0 ? w[h] * d : 0;
        }
        sk[j] = (scored_key){s, (int)j};
    }
    qsort(sk, P + 1, sizeof *sk, cmp_scored);
    for (size_t i = 0; i < K; i++) sel[i] = sk[i].j;
}

/* The rows of layer L's attention output f->att whose query sits at index_topk or later: softmax over
 * the indexer's selected keys only (the rows before it attended densely, as the selection keeps every
 * key there). A full layer selects into f->isel; a shared one (IndexShare) reuses the selection of the
 * last full layer of this call (layer 0 is always full). q: the queries after RoPE (stride ldq). */
static int indexer_attend(Forward *f, int L, size_t T, const float *q, size_t ldq) {
    size_t H = f->H, dqk = f->dqk, dv = f->dv, kw = H * dqk, vw = H * dv, K = (size_t)f->c->index_topk;
    bool full = cfg_layer_indexer(f->c, L);
    if (full && f->isel_cap < T * K) {
        free(f->isel);
        f->isel_cap = 0;
        if (!(f->isel = al_malloc3(T, K, sizeof *f->isel, "the indexer's selection"))) return AL_ERR;
        f->isel_cap = T * K;
    }
    scored_key *sk = full ? al_malloc3(f->pos + T, 1, sizeof *sk, "the indexer's scores") : NULL;
    double *p = al_malloc3(K, 1, sizeof *p, "the indexer's selection");
    if ((full && !sk) || !p) { free(sk); free(p); return AL_ERR; }
    double scale = fwd_attn_scale(f, L);
    for (size_t t = 0; t < T; t++) {
        size_t P = f->pos + t;
        if (P < K) continue;
        const int *sel = f->isel + t * K;
        if (full) indexer_select(f, L, t, P, sk, f->isel + t * K);
        for (size_t h = 0; h < H; h++) {
            const float *qh = q + t * ldq + h * dqk;
            double mx = -INFINITY, z = 0;
            for (size_t i = 0; i < K; i++) {
                const float *k = f->kc[L] + (size_t)sel[i] * kw + h * dqk;
                double d = 0;
                for (size_t e = 0; e < dqk; e++) d += (double)qh[e] * k[e];
                p[i] = d * scale;
                mx = fmax(mx, p[i]);
            }
            for (size_t i = 0; i < K; i++) { p[i] = exp(p[i] - mx); z += p[i]; }
            capture_selected(f->capture, L, h, P, sel, p, K, z);
            float *o = f->att.p + t * vw + h * dv;
            for (size_t e = 0; e < dv; e++) o[e] = 0;
            for (size_t i = 0; i < K; i++) {
                const float *v = f->vc[L] + (size_t)sel[i] * vw + h * dv;
                for (size_t e = 0; e < dv; e++) o[e] += (float)(p[i] / z) * v[e];
            }
        }
    }
    free(sk); free(p);
    return AL_OK;
}

/* Q, K, V of the rows Q/K/V (T, H dqk / G dqk / G dv) with their strides. */
typedef struct { float *q, *k, *v; size_t ldq, ldk, ldv; } QKV;

/* MLA: the query (through its latent), the KV latent and kv_b_proj into per-head keys and values
 * (the shared RoPE part repeated in each head). */
static int project_mla(Forward *f, int L, size_t T, QKV *o) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, H = f->H, dqk = f->dqk, dv = f->dv, ql = f->ql, kl = f->kl, r = f->rope, nope = f->nope;
    size_t kvw = nope + dv, qw = H * dqk, kw = H * dqk, vw = H * dv;
    int rc;
    if (!(o->q = fb_fit(&f->q, T, qw, "Q")) || !(o->k = fb_fit(&f->k, T, kw, "K")) || !(o->v = fb_fit(&f->v, T, vw, "V")) ||
        !fb_fit(&f->lat, T, (ql > kl + r ? ql : kl + r), "latents") || !fb_fit(&f->lat2, T, kl, "latents") ||
        !fb_fit(&f->kvb, T, H * kvw, "kv_b output"))
        return AL_ERR;
    o->ldq = qw; o->ldk = kw; o->ldv = vw;
    if (ql) {
        if ((rc = lin_apply(f, &w->qa, f->h.p, D, T, f->lat.p, ql))) return rc;
        if (w->qa_norm) rmsnorm(f->lat.p, ql, T, ql, w->qa_norm->data, false, f->norm_eps, f->lat.p, ql);
        if ((rc = hook(f, FWD_Q_LATENT, L, f->lat.p, T, 1, ql, ql))) return rc;
        if (f->ikc && cfg_layer_indexer(f->c, L) && (rc = indexer_project(f, L, T, f->lat.p))) return rc;
        if ((rc = lin_apply(f, &w->q, f->lat.p, ql, T, o->q, qw))) return rc;
    } else if ((rc = lin_apply(f, &w->q, f->h.p, D, T, o->q, qw)))
        return rc;
    if ((rc = lin_apply(f, &w->kva, f->h.p, D, T, f->lat.p, kl + r))) return rc;  /* [c_kv | k_pe] */
    float *ckv = f->lat2.p;
    if (w->kva_norm) rmsnorm(f->lat.p, kl + r, T, kl, w->kva_norm->data, false, f->norm_eps, ckv, kl);
    else for (size_t t = 0; t < T; t++) memcpy(ckv + t * kl, f->lat.p + t * (kl + r), kl * sizeof(float));
    if ((rc = hook(f, FWD_KV_LATENT, L, ckv, T, 1, kl, kl))) return rc;
    if ((rc = lin_apply(f, &w->kvb, ckv, kl, T, f->kvb.p, H * kvw))) return rc;   /* per head [k_nope | v] */
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < H; h++) {
            const float *src = f->kvb.p + t * H * kvw + h * kvw;
            memcpy(o->k + t * kw + h * dqk, src, nope * sizeof(float));
            memcpy(o->k + t * kw + h * dqk + nope, f->lat.p + t * (kl + r) + kl, r * sizeof(float));
            memcpy(o->v + t * vw + h * dv, src + nope, dv * sizeof(float));
        }
    return AL_OK;
}

/* attnlab's qk-norm keep (cfg kv_rebuild): the cache z = x W_KVA + b (T, n), then [K | V] = z W_KVB (T, G dqk + G dv);
 * the source's k_norm and RoPE act on K after this, as on a projected key. */
static int project_rebuild(Forward *f, int L, size_t T, QKV *o) {
    LayerW *w = &f->layers[L];
    size_t n = (size_t)f->c->kv_rebuild, kw = f->G * f->dqk, vw = f->G * f->dv;
    int rc;
    if (!fb_fit(&f->lat, T, n, "the cached latent") || !fb_fit(&f->kvb, T, kw + vw, "the rebuilt keys and values"))
        return AL_ERR;
    if ((rc = lin_apply(f, &w->kva, f->h.p, f->D, T, f->lat.p, n))) return rc;
    if ((rc = lin_apply(f, &w->kvb, f->lat.p, n, T, f->kvb.p, kw + vw))) return rc;
    for (size_t t = 0; t < T; t++) {
        memcpy(o->k + t * o->ldk, f->kvb.p + t * (kw + vw), kw * sizeof(float));
        memcpy(o->v + t * o->ldv, f->kvb.p + t * (kw + vw) + kw, vw * sizeof(float));
    }
    return AL_OK;
}

/* Q, K, V of layer L from f->h (T rows): one fused sgemm (columns [Q | K | V]) or three. */
static int project_qkv(Forward *f, int L, size_t T, QKV *o) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, qw = f->H * f->dqk, kw = f->G * f->dqk, vw = f->G * f->dv;
    if (f->mla) return project_mla(f, L, T, o);
    int rc;
    if (w->qkv.w.data) {
        size_t n = qw + kw + vw;
        if (!(o->q = fb_fit(&f->q, T, n, "Q/K/V"))) return AL_ERR;
        if ((rc = lin_apply(f, &w->qkv, f->h.p, D, T, o->q, n))) return rc;
        if (f->c->attn == QKV_HEADS && (rc = neox_unmix(f, o->q, T, n))) return rc;
        o->k = o->q + qw;
        o->v = o->k + kw;
        o->ldq = o->ldk = o->ldv = n;
        return AL_OK;
    }
    if (!(o->q = fb_fit(&f->q, T, qw, "Q")) || !(o->k = fb_fit(&f->k, T, kw, "K")) || !(o->v = fb_fit(&f->v, T, vw, "V")))
        return AL_ERR;
    o->ldq = qw; o->ldk = kw; o->ldv = vw;
    if (f->c->attn_gate) {                      /* q_proj rows per head [query | gate] */
        float *qg = fb_fit(&f->perm, T, 2 * qw, "a gated query"), *g = fb_fit(&f->gate, T, qw, "the output gate");
        if (!qg || !g) return AL_ERR;
        if ((rc = lin_apply(f, &w->q, f->h.p, D, T, qg, 2 * qw))) return rc;
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < f->H; h++) {
                memcpy(o->q + t * qw + h * f->dqk, qg + t * 2 * qw + 2 * h * f->dqk, f->dqk * sizeof(float));
                memcpy(g + t * qw + h * f->dqk, qg + t * 2 * qw + (2 * h + 1) * f->dqk, f->dqk * sizeof(float));
            }
    } else if ((rc = lin_apply(f, &w->q, f->h.p, D, T, o->q, qw)))
        return rc;
    if (cfg_kv_source(f->c, L) != L) return AL_OK;          /* KV-shared: the source layer's cache */
    if (f->c->kv_rebuild) return project_rebuild(f, L, T, o);
    if ((rc = lin_apply(f, &w->k, f->h.p, D, T, o->k, kw))) return rc;
    if (cfg_layer_v_is_k(f->c, L)) {                        /* attention_k_eq_v: V is k_proj's output (dv = dqk) */
        memcpy(o->v, o->k, T * kw * sizeof(float));
        return AL_OK;
    }
    return lin_apply(f, &w->v, f->h.p, D, T, o->v, vw);
}

/* Values RMS-normed per head without a weight (Gemma 4's v_norm), in place (T rows, stride ld, heads of dv). */
static void v_norm(const Forward *f, float *v, size_t T, size_t ld, size_t heads) {
    if (!f->c->v_norm) return;
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < heads; h++) {
            float *x = v + t * ld + h * f->dv;
            double ss = 0;
            for (size_t j = 0; j < f->dv; j++) ss += (double)x[j] * x[j];
            float r = (float)(1.0 / sqrt(ss / (double)f->dv + f->norm_eps));
            for (size_t j = 0; j < f->dv; j++) x[j] *= r;
        }
}

/* The attention output (T, H dv) times sigmoid of the gate (attn_output_gate; dv = dqk). */
static void gate_apply(Forward *f, size_t T) {
    size_t n = T * f->H * f->dv;
    for (size_t i = 0; i < n; i++) f->att.p[i] *= 1.f / (1.f + expf(-f->gate.p[i]));
}

/* Kimi Delta Attention layer L on f->h (normed input, T rows) into f->h (T, D): q / k / v, the decay's and the
 * output gate's low-rank projections, b; the recurrence over the layer's state (zero at position 0); o_proj. */
static int kda_attention(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    const LinearSpec *ls = &f->c->lin;
    KdaW kw = {(size_t)ls->v_heads, (size_t)ls->dv, (size_t)ls->conv, f->norm_eps, w->lconv->data, w->alog->data,
               w->dtb->data, w->lnorm->data};
    LinAttnW lw = kda_state_dims(&kw);
    size_t D = f->D, H = kw.H, d = kw.d, n = H * d;
    float *p = fb_fit(&f->q, T, 3 * n, "the KDA projections"), *fg = fb_fit(&f->k, T, n, "the KDA decay");
    float *og = fb_fit(&f->v, T, n, "the KDA gate"), *b = fb_fit(&f->gate, T, H, "the KDA beta");
    float *tmp = fb_fit(&f->f1, T, d, "a KDA low-rank projection"), *o = fb_fit(&f->att, T, n, "the KDA output");
    int rc = hook(f, FWD_ATTN_IN, L, f->h.p, T, 1, D, D);
    if (rc) return rc;
    if (!p || !fg || !og || !b || !tmp || !o) return AL_ERR;
    if (!f->lst[L].S && linattn_state_new(&lw, &f->lst[L]) != AL_OK) return AL_ERR;
    if (f->pos == 0) linattn_state_zero(&lw, &f->lst[L]);
    const float *x = f->h.p;
    if (lin_apply(f, &w->kq, x, D, T, p, 3 * n) || lin_apply(f, &w->kk, x, D, T, p + n, 3 * n) ||
        lin_apply(f, &w->kv, x, D, T, p + 2 * n, 3 * n) || lin_apply(f, &w->kfa, x, D, T, tmp, d) ||
        lin_apply(f, &w->kfb, tmp, d, T, fg, n) || lin_apply(f, &w->kga, x, D, T, tmp, d) ||
        lin_apply(f, &w->kgb, tmp, d, T, og, n) || lin_apply(f, &w->lb, x, D, T, b, H))
        return AL_ERR;
    if ((rc = kda_run(&kw, &f->lst[L], p, fg, b, og, T, o))) return al_err_ctx("forward pass, layer %d", L);
    if ((rc = lin_apply(f, &w->lout, o, n, T, f->h.p, D))) return rc;
    return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
}

/* Gated DeltaNet layer L on f->h (normed input, T rows) into f->h (T, D): the projections, the
 * recurrence over the layer's state (zero at position 0), out_proj. */
static int linear_attention(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    const LinearSpec *ls = &f->c->lin;
    if (ls->layout == LIN_KDA) return kda_attention(f, L, T);
    LinAttnW lw = {(size_t)ls->k_heads, (size_t)ls->v_heads, (size_t)ls->dk, (size_t)ls->dv, (size_t)ls->conv,
                   f->norm_eps, w->lconv->data, w->alog->data, w->dtb->data, w->lnorm->data, w->lz.w.data != NULL};
    size_t D = f->D, nv = lw.Hv * lw.dv, W = linattn_conv_dim(&lw) + nv, Hv = lw.Hv;
    float *p = fb_fit(&f->q, T, W, "the linear-attention projections"), *ba = fb_fit(&f->k, T, 2 * lw.Hv, "b and a");
    float *o = fb_fit(&f->att, T, nv, "the linear-attention output");
    int rc = hook(f, FWD_ATTN_IN, L, f->h.p, T, 1, D, D);
    if (rc) return rc;
    if (!p || !ba || !o) return AL_ERR;
    if (!f->lst[L].S && linattn_state_new(&lw, &f->lst[L]) != AL_OK) return AL_ERR;
    if (f->pos == 0) linattn_state_zero(&lw, &f->lst[L]);
    if (lw.flat)                                   /* rows [q | k | v | z], [b | a] */
        rc = lin_apply(f, &w->lqkvz, f->h.p, D, T, p, W) || lin_apply(f, &w->lz, f->h.p, D, T, p + W - nv, W) ||
             lin_apply(f, &w->lb, f->h.p, D, T, ba, 2 * Hv) || lin_apply(f, &w->la, f->h.p, D, T, ba + Hv, 2 * Hv);
    else
        rc = lin_apply(f, &w->lqkvz, f->h.p, D, T, p, W) || lin_apply(f, &w->lba, f->h.p, D, T, ba, 2 * Hv);
    if (rc) return AL_ERR;
    if ((rc = linattn_run(&lw, &f->lst[L], p, ba, T, o))) return al_err_ctx("forward pass, layer %d", L);
    if ((rc = lin_apply(f, &w->lout, o, nv, T, f->h.p, D))) return rc;
    return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
}

/* Mamba-2 layer L on f->h (normed input, T rows) into f->h (T, D): in_proj, the SSM over the layer's state (zero at
 * position 0), out_proj. */
static int mamba2_mixer(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    const LinearSpec *ls = &f->c->lin;
    Mamba2W mw = {(size_t)ls->v_heads, (size_t)ls->dv, (size_t)ls->k_heads, (size_t)ls->dk, (size_t)ls->conv,
                  (size_t)ls->norm_groups, f->norm_eps, ls->dt_min, w->lconv->data, w->mconvb ? w->mconvb->data : NULL,
                  w->alog->data, w->md->data, w->dtb->data, w->lnorm->data};
    size_t D = f->D, HP = mw.H * mw.P, W = mamba2_in_dim(&mw);
    float *p = fb_fit(&f->q, T, W, "the Mamba-2 projections"), *o = fb_fit(&f->att, T, HP, "the Mamba-2 output");
    int rc = hook(f, FWD_ATTN_IN, L, f->h.p, T, 1, D, D);
    if (rc) return rc;
    if (!p || !o) return AL_ERR;
    if (!f->mst[L].S && mamba2_state_new(&mw, &f->mst[L]) != AL_OK) return AL_ERR;
    if (f->pos == 0) mamba2_state_zero(&mw, &f->mst[L]);
    if ((rc = lin_apply(f, &w->min, f->h.p, D, T, p, W))) return rc;
    if ((rc = mamba2_run(&mw, &f->mst[L], p, T, o))) return al_err_ctx("forward pass, layer %d", L);
    if ((rc = lin_apply(f, &w->lout, o, HP, T, f->h.p, D))) return rc;
    return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
}

/* The eviction policy's key mask of layer L's T query rows into f->evkeep (all kept first). */
static int evict_mask(Forward *f, int L, size_t T, const QKV *p) {
    size_t nk = f->pos + T, n = f->G * T * nk;
    if (n > f->evcap) {
        unsigned char *k = realloc(f->evkeep, n);
        if (!k) return al_err("out of memory for the eviction mask (%zu byte%s)", n, al_s(n));
        f->evkeep = k;
        f->evcap = n;
    }
    memset(f->evkeep, 1, n);
    int src = cfg_kv_source(f->c, L);
    FwdEvict e = {.layer = L, .pos0 = f->pos, .T = T, .nkeys = nk, .H = f->H, .G = f->G, .d = f->dqk, .q = p->q,
                  .ldq = p->ldq, .K = f->kc[src], .ldk = f->G * f->dqk, .scale = fwd_attn_scale(f, L),
                  .softcap = f->c->attn_softcap, .window = fwd_attn_window(f, L), .keep = f->evkeep};
    int rc = f->evfn(&e, f->evud);
    return rc ? al_err_ctx("forward pass, layer %d (token eviction)", L) : AL_OK;
}

/* softmax(q K^T scale) V of every head over the cache into f->att (T, H dv). */
static int attend(Forward *f, int L, size_t T, const QKV *p) {
    attn_job job = {.f = f, .L = L, .T = T, .q = p->q, .ldq = p->ldq, .scale = fwd_attn_scale(f, L)};
    int rc = f->evfn ? evict_mask(f, L, T, p) : AL_OK;
    if (rc) return rc;
    if (T * (f->pos + T) >= 1024 && f->nworkers > 1)          /* heads on the pool's workers, one BLAS thread each */
        rc = pool_run(f->H, f->nworkers, attn_head, &job);
    else
        for (size_t h = 0; h < f->H && rc == AL_OK; h++) rc = attn_head(h, 0, &job);
    return rc;
}

/* Attention block of layer L on f->h (normed input, T rows): Q, K, V, q/k norms, RoPE, cache,
 * attention, output projection into f->h (T, D). */
static int attention(Forward *f, int L, size_t T);

/* Overridden layer L whose override carries a stock (attn_stock.h): the model's own attention on the stock's weights
 * (the model's where the stock sets none), then the layer's Lins and override put back. */
static int attention_stock(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    const AttnLayer *A = f->over[L];
    const AttnStock *st = A->stock;
    Lin *ls[AS_N] = {&w->q, &w->k, &w->v, &w->o, &w->kvb, &w->qkv}, saved[AS_N];
    for (int i = 0; i < AS_N; i++) {
        saved[i] = *ls[i];
        if (st->w[i].data) ls[i]->w = st->w[i];
        if (st->b[i]) ls[i]->b = st->b[i];
    }
    f->over[L] = NULL;
    int rc = attention(f, L, T);
    f->over[L] = A;
    for (int i = 0; i < AS_N; i++) *ls[i] = saved[i];
    return rc;
}

static int attention(Forward *f, int L, size_t T) {
    if (f->over[L] && f->over[L]->stock) return attention_stock(f, L, T);
    layer_dims(f, L);
    LayerW *w = &f->layers[L];
    size_t D = f->D, H = f->H, G = f->G, dqk = f->dqk, dv = f->dv, kw = G * dqk, vw = G * dv;
    QKV p;
    if (cfg_layer_mamba(f->c, L)) return mamba2_mixer(f, L, T);
    if (cfg_layer_linear(f->c, L)) return linear_attention(f, L, T);
    int rc = hook(f, FWD_ATTN_IN, L, f->h.p, T, 1, D, D);
    if (rc) return rc;
    if (f->over[L]) {
        if (f->ikc && f->pos + T > (size_t)f->c->index_topk)
            return al_err("layer %d: a transformed layer runs dense attention, but %zu token%s pass index_topk %d, where "
                          "the indexer selects keys: measure it on sequences of at most %d token%s, or export it "
                          "(`export DIR`) and load DIR, whose forward pass runs the selection", L, f->pos + T, al_s(f->pos + T),
                          f->c->index_topk, f->c->index_topk, al_s(f->c->index_topk));
        if ((rc = attention_override(f, L, T))) return rc;
        return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
    }
    if (!fb_fit(&f->att, T, H * dv, "attention output")) return AL_ERR;
    if ((rc = project_qkv(f, L, T, &p))) return rc;
    bool own = cfg_kv_source(f->c, L) == L;        /* Gemma 4's KV-shared layers: queries only */
    qk_norm(f, w->qn, p.q, T, p.ldq, H);
    if (own) qk_norm(f, w->kn, p.k, T, p.ldk, G);
    if (own) v_norm(f, p.v, T, p.ldv, G);
    if ((rc = hook(f, FWD_Q, L, p.q, T, H, dqk, p.ldq)) || (own && (rc = hook(f, FWD_K, L, p.k, T, G, dqk, p.ldk))) ||
        (own && (rc = hook(f, FWD_V, L, p.v, T, G, dv, p.ldv))))
        return rc;
    if (f->rope && cfg_layer_rope(f->c, L)) {            /* not on NoPE layers (SmolLM3) */
        rope_apply(f, L, p.q, T, p.ldq, H);
        if (own) rope_apply(f, L, p.k, T, p.ldk, G);
    }
    q_pos_scale(f, p.q, T, p.ldq, H);
    llama4_qk(f, L, p.q, T, p.ldq, H, true);
    llama4_qk(f, L, p.k, T, p.ldk, G, false);
    if ((rc = hook(f, FWD_Q_ROPE, L, p.q, T, H, dqk, p.ldq)) ||
        (own && (rc = hook(f, FWD_K_ROPE, L, p.k, T, G, dqk, p.ldk))))
        return rc;
    for (size_t t = 0; own && t < T; t++) {
        memcpy(f->kc[L] + (f->pos + t) * kw, p.k + t * p.ldk, kw * sizeof(float));
        memcpy(f->vc[L] + (f->pos + t) * vw, p.v + t * p.ldv, vw * sizeof(float));
    }
    if ((rc = attend(f, L, T, &p))) return rc;
    if (f->ikc && f->pos + T > (size_t)f->c->index_topk && (rc = indexer_attend(f, L, T, p.q, p.ldq))) return rc;
    if ((rc = hook(f, FWD_ATTN_OUT, L, f->att.p, T, H, dv, H * dv))) return rc;
    if (f->c->attn_gate) gate_apply(f, T);          /* after the hook: FWD_ATTN_OUT is softmax(QKᵀ) V */
    head_mask_apply(f, L, T);                       /* ablated heads: their slice of o_proj's input is 0 */
    if ((rc = lin_apply(f, &w->o, f->att.p, H * dv, T, f->h.p, D))) return rc;
    return hook(f, FWD_ATTN_PROJ, L, f->h.p, T, 1, D, D);
}

/* One feed-forward net n on x (T rows, width D) into y (T, D); scratch f1 / f2. */
static int ffn_apply(Forward *f, const Ffn *n, const float *x, size_t T, float *y) {
    size_t D = f->D, FF = n->ffn;
    bool gated = n->gate.w.data || n->gu.w.data;
    float *a = fb_fit(&f->f1, T, gated ? 2 * FF : FF, "MLP activations");
    int rc;
    if (!a) return AL_ERR;
    if (n->gu.w.data && n->pairs) {                   /* gpt-oss's experts: interleaved (gate, up) pairs */
        if ((rc = lin_apply(f, &n->gu, x, D, T, a, 2 * FF))) return rc;
        double lim = f->c->swiglu_limit, al = f->c->swiglu_alpha;
        for (size_t t = 0; t < T; t++) {
            float *r = a + t * 2 * FF;
            for (size_t j = 0; j < FF; j++) {        /* (clamp(up, +-lim) + 1) * g sigmoid(alpha g), g = min(gate, lim) */
                double g = fmin(r[2 * j], lim), u = fmax(fmin(r[2 * j + 1], lim), -lim);
                r[j] = (float)((u + 1) * g / (1 + exp(-al * g)));
            }
        }
        return lin_apply(f, &n->down, a, 2 * FF, T, y, D);
    }
    if (n->gu.w.data) {                               /* Phi-3: [gate | up] columns */
        if ((rc = lin_apply(f, &n->gu, x, D, T, a, 2 * FF))) return rc;
        for (size_t t = 0; t < T; t++) {
            float *r = a + t * 2 * FF;
            for (size_t j = 0; j < FF; j++) r[j] = act_apply(f->act, r[j]) * r[FF + j];
        }
        return lin_apply(f, &n->down, a, 2 * FF, T, y, D);
    }
    float *b = gated ? a + T * FF : NULL;
    if (gated) {
        if ((rc = lin_apply(f, &n->gate, x, D, T, a, FF)) || (rc = lin_apply(f, &n->up, x, D, T, b, FF))) return rc;
        /* the vector exp where bf16 mode rounds this MLP's products anyway (BF16 gate weights): an F32 /
         * FP4 model's bf16 mode stays f32 mode's numbers bit for bit, as `ppl` says (model_compute_note) */
        if (f->act == ACT_SILU && f->compute == MM_BF16 && n->gate.w.dt == DT_BF16) mm_silu_mul(a, b, T * FF);
        else
            for (size_t i = 0; i < T * FF; i++) a[i] = act_apply(f->act, a[i]) * b[i];
    } else {
        if ((rc = lin_apply(f, &n->up, x, D, T, a, FF))) return rc;
        for (size_t i = 0; i < T * FF; i++) a[i] = act_apply(f->act, a[i]);
    }
    return lin_apply(f, &n->down, a, FF, T, y, D);
}

/* ---------------------------------------------------------------- mixture of experts */

/* Keeps the topk_group best groups of experts in sel (E), setting the others to 0 as Hugging Face
 * masks them: a group's score is its best selection score (DeepSeek-V2 group_limited_greedy) or
 * the sum of its best two (V3). gs: scratch of n_group. */
static void group_limit(const MoeSpec *m, bool v3, double *sel, double *gs) {
    int ng = m->n_group, per = m->n_experts / ng;
    for (int g = 0; g < ng; g++) {
        double b1 = -INFINITY, b2 = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) {
            if (sel[e] > b1) { b2 = b1; b1 = sel[e]; }
            else if (sel[e] > b2) b2 = sel[e];
        }
        gs[g] = v3 ? b1 + b2 : b1;
    }
    for (int r = 0; r < m->topk_group; r++) {         /* kept groups are marked -inf */
        int best = -1;
        for (int g = 0; g < ng; g++)
            if (gs[g] != -INFINITY && (best < 0 || gs[g] > gs[best])) best = g;
        if (best >= 0) gs[best] = -INFINITY;
    }
    for (int e = 0; e < m->n_experts; e++)
        if (gs[e / per] != -INFINITY) sel[e] = 0.0;
}

/* The k experts of one token from its router logits z (E) into idx / wt (k), as Hugging Face routes:
 * Mixtral / Qwen3-MoE softmax, top-k, renormalised (Mixtral always, Qwen when norm_topk_prob);
 * DeepSeek-V2 softmax, greedy or group_limited_greedy, times routed_scaling_factor, not
 * renormalised; DeepSeek-V3 (the rows with ROUTER_DS_V3: every DeepSeek type but deepseek_v2, as
 * Hugging Face's modeling_deepseek_v3 whatever scoring_func says, but softmax when scoring_func is "softmax",
 * as vLLM and SGLang compute it: attnlab's MoE exports) sigmoid, selection on scores +
 * e_score_correction_bias within the topk_group best groups, weights the plain scores,
 * renormalised when norm_topk_prob (+1e-20), times routed_scaling_factor. s, sel: scratch of E
 * doubles; gs: of n_group. */
static void route_token(const Forward *f, const float *z, const float *bias, double *s, double *sel, double *gs,
                        int *idx, float *wt) {
    const MoeSpec *m = &f->c->moe;
    int E = m->n_experts, k = m->top_k;
    bool ds = m->router != ROUTER_SOFTMAX, v3 = m->router == ROUTER_DS_V3, l4 = m->router == ROUTER_LLAMA4;
    bool sig = (v3 && !m->softmax) || l4 || (!ds && m->sigmoid);   /* Llama 4: sigmoid of the top-k logits, as they are */
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) mx = z[e] > mx ? z[e] : mx;
    for (int e = 0; e < E; e++) {
        s[e] = sig ? 1.0 / (1.0 + exp(-(double)z[e])) : exp((double)z[e] - mx);
        sum += s[e];
    }
    for (int e = 0; e < E; e++) {
        if (!sig) s[e] /= sum;
        sel[e] = l4 ? (double)z[e] : s[e] + (bias ? bias[e] : 0.0);   /* Llama 4: top-k of the logits themselves */
    }
    if (m->n_group > 1 && (v3 || !strcmp(m->topk_method, "group_limited_greedy"))) group_limit(m, v3, sel, gs);
    double tot = 0;
    for (int r = 0; r < k; r++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (sel[e] != -INFINITY && (best < 0 || sel[e] > sel[best])) best = e;
        idx[r] = best;
        sel[best] = -INFINITY;
        tot += s[best];
    }
    bool norm = ds ? v3 && m->norm_topk_prob : m->norm_topk_prob;
    double div = norm ? tot + (ds ? 1e-20 : 0) : 1, scale = ds && !l4 ? m->routed_scaling : 1;
    for (int r = 0; r < k; r++) wt[r] = (float)(s[idx[r]] / div * scale);
}

/* Runs expert e over the n choices rows[0..n) (choice i: token i / k, weight wt[i]) of x (T, D),
 * adding the weighted outputs to f->h. */
static int expert_rows(Forward *f, const Ffn *ex, const float *x, const int *rows, size_t n, const float *wt, size_t k) {
    size_t D = f->D;
    float *gx = fb_fit(&f->gx, n, D, "MoE rows"), *gy = fb_fit(&f->gy, n, D, "MoE rows");
    if (!gx || !gy) return AL_ERR;
    bool in = f->c->moe.router == ROUTER_LLAMA4;       /* Llama 4: the weight scales the expert's input */
    for (size_t r = 0; r < n; r++) memcpy(gx + r * D, x + (size_t)rows[r] / k * D, D * sizeof(float));
    for (size_t r = 0; in && r < n; r++)
        for (size_t j = 0; j < D; j++) gx[r * D + j] *= wt[rows[r]];
    int rc = ffn_apply(f, ex, gx, n, gy);
    for (size_t r = 0; rc == AL_OK && r < n; r++) {
        float c = in ? 1.f : wt[rows[r]], *o = f->h.p + (size_t)rows[r] / k * D;
        for (size_t j = 0; j < D; j++) o[j] += c * gy[r * D + j];
    }
    return rc;
}

/* MoE MLP of layer L on f->h (T rows) into f->h: tokens routed, the choices bucketed by expert
 * (counting sort), each expert run once over its rows (one sgemm per projection), weighted and
 * scattered back; plus the shared experts. */
/* The shared expert's rows of f->h (T, D) times sigmoid(x . w) (Qwen3-Next's shared_expert_gate). */
static int shared_scale(Forward *f, const Lin *g, const float *x, size_t T) {
    float *s = fb_fit(&f->gate, T, 1, "the shared expert's gate");
    int rc = s ? lin_apply(f, g, x, f->D, T, s, 1) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        float k = 1.f / (1.f + expf(-s[t]));
        for (size_t j = 0; j < f->D; j++) f->h.p[t * f->D + j] *= k;
    }
    return rc;
}

static int moe_mlp(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    const MoeSpec *m = &f->c->moe;
    size_t D = f->D, E = (size_t)m->n_experts, k = (size_t)m->top_k, n = T * k;
    float *x = fb_fit(&f->mx, T, D, "MoE input"), *z = fb_fit(&f->rl, T, E, "router logits");
    int *idx = al_malloc3(2 * n + E + 1, 1, sizeof(int), "expert choices");
    float *wt = al_malloc3(n, 1, sizeof(float), "expert weights");
    double *sc = al_malloc3(2 * E + (size_t)(m->n_group > 1 ? m->n_group : 1), 1, sizeof(double), "router scores");
    int rc = x && z && idx && wt && sc ? AL_OK : AL_ERR;
    int *rows = idx ? idx + n : NULL, *start = idx ? idx + 2 * n : NULL;   /* choices by expert; (E + 1) offsets */
    if (rc == AL_OK) {
        memcpy(x, f->h.p, T * D * sizeof(float));
        rc = lin_apply(f, &w->router, x, D, T, z, E);
        for (size_t t = 0; rc == AL_OK && t < T; t++)
            route_token(f, z + t * E, w->ebias ? w->ebias->data : NULL, sc, sc + E, sc + 2 * E, idx + t * k, wt + t * k);
    }
    if (rc == AL_OK) {
        memset(start, 0, (E + 1) * sizeof(int));
        for (size_t i = 0; i < n; i++) start[idx[i] + 1]++;
        for (size_t e = 0; e < E; e++) start[e + 1] += start[e];
        for (size_t i = 0; i < n; i++) rows[start[idx[i]]++] = (int)i;     /* start[e] becomes the end of e */
        if (w->mlp.ffn) rc = ffn_apply(f, &w->mlp, x, T, f->h.p);
        else memset(f->h.p, 0, T * D * sizeof(float));
        if (rc == AL_OK && w->shscale.w.data) rc = shared_scale(f, &w->shscale, x, T);
    }
    for (size_t e = 0, b = 0; rc == AL_OK && e < E; b = (size_t)start[e++])
        if ((size_t)start[e] > b) rc = expert_rows(f, &w->experts[e], x, rows + b, (size_t)start[e] - b, wt, k);
    free(idx);
    free(wt);
    free(sc);
    return rc;
}

/* ---------------------------------------------------------------- the block */

/* Norm slot i of layer L from x (T, D) into out; without that norm a copy (or nothing in place). */
static void norm_slot(Forward *f, int L, int i, const float *x, float *out, size_t T) {
    const LayerW *w = &f->layers[L];
    if (w->nw[i]) norm_apply(f, w->nw[i], w->nb[i], x, f->D, T, f->D, out, f->D);
    else if (out != x) memcpy(out, x, T * f->D * sizeof(float));
}

/* The MLP of layer L on f->h into f->h (dense or experts). */
static int mlp(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    if (w->experts) return moe_mlp(f, L, T);
    float *x = fb_fit(&f->mx, T, f->D, "MLP input");
    if (!x) return AL_ERR;
    memcpy(x, f->h.p, T * f->D * sizeof(float));
    return ffn_apply(f, &w->mlp, x, T, f->h.p);
}

static void add_rows(float *x, const float *y, size_t n) { for (size_t i = 0; i < n; i++) x[i] += y[i]; }
/* A block's output times Granite's residual_multiplier (1 elsewhere). */
static void residual_scale(const Forward *f, float *y, size_t n) {
    float r = (float)f->c->residual_mult;
    if (r != 1.f && r > 0)
        for (size_t i = 0; i < n; i++) y[i] *= r;
}

/* Gemma 4's per-layer input of layer L (Gemma4TextDecoderLayer, after the MLP's residual): x += norm(per_layer_projection(
 * act(per_layer_input_gate(x)) * ple_L)), ple_L the layer's slice of this call's per-layer inputs (ple_inputs). */
static int ple_layer(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, P = (size_t)f->c->ple_dim, W = P * (size_t)f->c->n_layers;
    float *g = fb_fit(&f->pg, T, P, "a per-layer input");
    if (!g) return AL_ERR;
    int rc = lin_apply(f, &w->pgate, f->x.p, D, T, g, P);
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t j = 0; j < P; j++) g[t * P + j] = act_apply(f->act, g[t * P + j]) * f->ple.p[t * W + (size_t)L * P + j];
    if (rc == AL_OK) rc = lin_apply(f, &w->pproj, g, P, T, f->h.p, D);
    if (rc != AL_OK) return rc;
    rmsnorm(f->h.p, D, T, D, w->ppost->data, false, f->norm_eps, f->h.p, D);
    add_rows(f->x.p, f->h.p, T * D);
    return AL_OK;
}

/* Gemma 4's router for one token (Gemma4TextRouter): softmax over the E logits z, the top k (the earlier expert on ties),
 * their probabilities renormalised, times per_expert_scale. */
static void g4_route(const float *z, size_t E, size_t k, const float *escale, int *idx, float *wt) {
    double mx = -INFINITY, s = 0, sel = 0;
    for (size_t e = 0; e < E; e++) mx = fmax(mx, z[e]);
    for (size_t e = 0; e < E; e++) s += exp((double)z[e] - mx);
    for (size_t i = 0; i < k; i++) {
        int best = -1;
        for (size_t e = 0; e < E; e++) {
            bool taken = false;
            for (size_t j = 0; j < i; j++) taken |= idx[j] == (int)e;
            if (!taken && (best < 0 || z[e] > z[best])) best = (int)e;
        }
        idx[i] = best;
        wt[i] = (float)(exp((double)z[best] - mx) / s);
        sel += wt[i];
    }
    for (size_t i = 0; i < k; i++) wt[i] = (float)(wt[i] / sel * escale[idx[i]]);
}

/* Gemma 4's MoE block of layer L, after the dense MLP left its output in f->h and with the residual stream in f->x:
 * f->h = post_feedforward_layernorm_1(h) + post_feedforward_layernorm_2(experts(pre_feedforward_layernorm_2(x))), the
 * router reading rmsnorm(x) (no weight) x router.scale / sqrt(D). */
static int moe_block(Forward *f, int L, size_t T) {
    LayerW *w = &f->layers[L];
    size_t D = f->D, E = (size_t)f->c->moe_block_experts, k = (size_t)f->c->moe_block_topk, n = T * k;
    float *h1 = fb_fit(&f->m1, T, D, "the dense MLP's output"), *r = fb_fit(&f->mx, T, D, "MoE input");
    float *z = fb_fit(&f->rl, T, E, "router logits"), *wt = al_malloc3(n, 1, sizeof(float), "expert weights");
    int *idx = al_malloc3(2 * n + E + 1, 1, sizeof(int), "expert choices");
    int rc = h1 && r && z && wt && idx ? AL_OK : AL_ERR;
    int *rows = idx ? idx + n : NULL, *start = idx ? idx + 2 * n : NULL;
    for (size_t t = 0; rc == AL_OK && t < T; t++) {          /* the router's input */
        const float *x = f->x.p + t * D;
        double ss = 0;
        for (size_t j = 0; j < D; j++) ss += (double)x[j] * x[j];
        double s = 1.0 / sqrt(ss / (double)D + f->norm_eps) / sqrt((double)D);
        for (size_t j = 0; j < D; j++) r[t * D + j] = (float)(x[j] * s * w->g4rscale->data[j]);
    }
    if (rc == AL_OK) rc = lin_apply(f, &w->g4router, r, D, T, z, E);
    for (size_t t = 0; rc == AL_OK && t < T; t++) g4_route(z + t * E, E, k, w->g4escale->data, idx + t * k, wt + t * k);
    if (rc == AL_OK) {
        rmsnorm(f->h.p, D, T, D, w->g4norm[0]->data, false, f->norm_eps, h1, D);
        rmsnorm(f->x.p, D, T, D, w->g4norm[2]->data, false, f->norm_eps, r, D);
        memset(f->h.p, 0, T * D * sizeof(float));
        memset(start, 0, (E + 1) * sizeof(int));
        for (size_t i = 0; i < n; i++) start[idx[i] + 1]++;
        for (size_t e = 0; e < E; e++) start[e + 1] += start[e];
        for (size_t i = 0; i < n; i++) rows[start[idx[i]]++] = (int)i;     /* start[e] becomes the end of e */
    }
    for (size_t e = 0, b = 0; rc == AL_OK && e < E; b = (size_t)start[e++])
        if ((size_t)start[e] > b) rc = expert_rows(f, &w->g4x[e], r, rows + b, (size_t)start[e] - b, wt, k);
    if (rc == AL_OK) {
        rmsnorm(f->h.p, D, T, D, w->g4norm[1]->data, false, f->norm_eps, f->h.p, D);
        add_rows(f->h.p, h1, T * D);
    }
    free(idx);
    free(wt);
    return rc;
}

/* Layer L on f->x (T rows) by the block layout (config.h block_layout): norms in slots that exist,
 * residuals sequential, or parallel (x + attn(n1(x)) + mlp(n2(x))). */
static int layer_run(Forward *f, int L, size_t T) {
    size_t n = T * f->D;
    bool par = f->c->block == BLOCK_PARALLEL, blocks = f->c->lin.blocks;   /* Nemotron-H: one mixer or an MLP */
    bool mixer = !(blocks && f->c->lin.layer[L] == 2);
    int rc = AL_OK;
    if (mixer) {
        norm_slot(f, L, NS_ATTN_IN, f->x.p, f->h.p, T);
        if ((rc = attention(f, L, T))) return rc;
        norm_slot(f, L, NS_ATTN_OUT, f->h.p, f->h.p, T);
        residual_scale(f, f->h.p, n);
    }
    if (par) {
        if (!fb_fit(&f->y, T, f->D, "attention output")) return AL_ERR;
        memcpy(f->y.p, f->h.p, n * sizeof(float));
    } else if (mixer)
        add_rows(f->x.p, f->h.p, n);
    if (!cfg_layer_mlp(f->c, L)) return AL_OK;
    norm_slot(f, L, blocks ? NS_ATTN_IN : NS_MLP_IN, f->x.p, f->h.p, T);    /* a block's one norm */
    if ((rc = mlp(f, L, T))) return rc;
    if (f->layers[L].g4x && (rc = moe_block(f, L, T))) return rc;   /* Gemma 4: the MoE beside the dense MLP */
    norm_slot(f, L, NS_MLP_OUT, f->h.p, f->h.p, T);
    residual_scale(f, f->h.p, n);
    add_rows(f->x.p, f->h.p, n);
    if (par) add_rows(f->x.p, f->y.p, n);
    if (f->ple_embed.data && (rc = ple_layer(f, L, T))) return rc;
    const Mat *ls = f->layers[L].lscalar;               /* Gemma 4: hidden_states *= layer_scalar */
    for (size_t i = 0; ls && i < n; i++) f->x.p[i] *= ls->data[0];
    return AL_OK;
}

/* Gemma 4's per-layer inputs of this call (Gemma4TextModel.get_per_layer_inputs / project_per_layer_inputs) into f->ple
 * (T, L P): (norm(per_layer_model_projection(x) / sqrt(D)) + embed_tokens_per_layer[token] sqrt(P)) / sqrt(2), the
 * norm over each layer's P values, x the scaled token embeddings in f->x. */
static int ple_inputs(Forward *f, const int *tokens, size_t T) {
    size_t D = f->D, P = (size_t)f->c->ple_dim, NL = (size_t)f->c->n_layers, W = P * NL;
    float *pl = fb_fit(&f->ple, T, W, "the per-layer inputs"), *row = fb_fit(&f->pg, 1, W, "a per-layer embedding");
    if (!pl || !row || lin_apply(f, &f->ple_proj, f->x.p, D, T, pl, W) != AL_OK) return AL_ERR;
    float sd = (float)(1.0 / sqrt((double)D)), sp = (float)sqrt((double)P), s2 = (float)(1.0 / sqrt(2.0));
    for (size_t i = 0; i < T * W; i++) pl[i] *= sd;
    for (size_t l = 0; l < NL; l++) rmsnorm(pl + l * P, W, T, P, f->ple_norm->data, false, f->norm_eps, pl + l * P, W);
    for (size_t t = 0; t < T; t++) {
        if ((size_t)tokens[t] >= (size_t)f->c->ple_vocab)
            return al_err("token id %d is outside vocab_size_per_layer_input %d", tokens[t], f->c->ple_vocab);
        wmat_row(&f->ple_embed, (size_t)tokens[t], row);
        for (size_t j = 0; j < W; j++) pl[t * W + j] = (pl[t * W + j] + row[j] * sp) * s2;
    }
    return AL_OK;
}

/* The checks, buffers and embeddings of a call over tokens at positions pos..pos+T-1: the embedded rows in f->x (T, D). */
static int body_embed(Forward *f, const int *tokens, size_t T) {
    size_t D = f->D;
    if (T == 0) return al_err("forward pass: no tokens to run");
    if (f->pos + T > f->max_ctx)
        return al_err("forward pass: %zu token%s after %zu already in the sequence exceed the context of %zu (reset, or "
                      "use shorter windows)", T, al_s(T), f->pos, f->max_ctx);
    for (size_t t = 0; t < T; t++)
        if (tokens[t] < 0 || (size_t)tokens[t] >= f->vocab)
            return al_err("token id %d (position %zu) is outside the model's vocabulary 0-%zu", tokens[t], f->pos + t,
                          f->vocab - 1);
    if (!fb_fit(&f->x, T, D, "hidden states") || !fb_fit(&f->h, T, D, "hidden states") || !fb_fit(&f->y, 1, D, "a row") ||
        cache_fit(f, f->pos + T) ||
        !fb_fit(&f->scores, (size_t)f->nworkers * QCHUNK, f->pos + T, "attention scores") || fwd_rope_tables(f, T))
        return AL_ERR;
    float es = (float)f->c->embed_scale;              /* Gemma: sqrt(hidden) in the weights' dtype */
    for (size_t t = 0; t < T; t++) {
        wmat_row(&f->embed, (size_t)tokens[t], f->x.p + t * D);
        if (es != 1.f && es > 0)
            for (size_t j = 0; j < D; j++) f->x.p[t * D + j] *= es;
        if (f->wpe.data) {
            wmat_row(&f->wpe, f->pos + t, f->y.p);
            for (size_t j = 0; j < D; j++) f->x.p[t * D + j] += f->y.p[j];
        }
    }
    return AL_OK;
}

/* The whole stack over tokens at positions pos..pos+T-1: leaves the final normed hidden
 * states in f->h (T, D) and advances pos. */
static int body(Forward *f, const int *tokens, size_t T) {
    size_t D = f->D;
    if (body_embed(f, tokens, T) != AL_OK) return AL_ERR;
    if (f->ple_embed.data && ple_inputs(f, tokens, T) != AL_OK) return AL_ERR;
    for (int L = f->rsfn ? f->rsfrom : 0; L < f->c->n_layers; L++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        int rc = f->rsfn ? f->rsfn(L, f->x.p, T, f->rsud) : AL_OK;     /* it may end the pass: FWD_STOP */
        if (rc == AL_OK) rc = layer_load(f, L, false, NULL);
        if (rc == AL_OK) rc = layer_run(f, L, T);
        if (f->streaming) layer_release(f, L);
        if (rc != AL_OK) return rc;
    }
    norm_apply(f, f->norm, f->norm_b, f->x.p, D, T, D, f->h.p, D);
    f->pos += T;
    return AL_OK;
}

/* logits (n, V) of n hidden rows h (n, D). */
static int logits_rows(Forward *f, const float *h, size_t n, float *out) {
    const WMat *W = f->lm_head.data ? &f->lm_head : &f->embed;
    int rc = mm_xwt(f->mm, W, h, f->D, n, out, f->vocab, f->compute);
    if (rc != AL_OK) return rc;
    double cap = f->c->final_softcap, div = f->c->logits_div;   /* Gemma 2: cap tanh(z / cap); Granite: z / div */
    if (div != 1 && div > 0)
        for (size_t i = 0; i < n * f->vocab; i++) out[i] = (float)(out[i] / div);
    if (cap > 0)
        for (size_t i = 0; i < n * f->vocab; i++) out[i] = (float)(cap * tanh(out[i] / cap));
    return AL_OK;
}

/* Below this hidden size every matrix is small enough that OpenBLAS's threads cost more (waking
 * and spinning) than they give: such models run with one BLAS thread (heads still use pool_run). */
#define SMALL_HIDDEN 512

/* The BLAS thread count of the model's size for a pass: one below SMALL_HIDDEN. Returns the count to give back to
 * blas_threads_end (0: unchanged). */
static int blas_threads_begin(const Forward *f) {
    int saved = openblas_get_num_threads();
    if (f->D >= SMALL_HIDDEN || saved <= 1) return 0;
    openblas_set_num_threads(1);
    return saved;
}

static void blas_threads_end(int saved) {
    if (saved) openblas_set_num_threads(saved);
}

/* body() with the BLAS thread count of the model's size. */
static int body_threads(Forward *f, const int *tokens, size_t T) {
    int saved = blas_threads_begin(f);
    int rc = body(f, tokens, T);
    blas_threads_end(saved);
    return rc;
}

int fwd_run(Forward *f, const int *tokens, size_t T, fwd_logits want, float *logits) {
    int rc = body_threads(f, tokens, T);
    if (rc != AL_OK) { fwd_reset(f); return rc; }
    if (want == FWD_LOGITS_LAST) rc = logits_rows(f, f->h.p + (T - 1) * f->D, 1, logits);
    else if (want == FWD_LOGITS_ALL)
        for (size_t r0 = 0; rc == AL_OK && r0 < T; r0 += LCHUNK)
            rc = logits_rows(f, f->h.p + r0 * f->D, T - r0 < LCHUNK ? T - r0 : LCHUNK, logits + r0 * f->vocab);
    if (rc != AL_OK) fwd_reset(f);
    return rc;
}

void fwd_set_evict(Forward *f, fwd_evict_fn fn, void *ud) {
    f->evfn = fn;
    f->evud = ud;
    fwd_reset(f);
}

void fwd_set_resid(Forward *f, int from, fwd_resid_fn fn, void *ud) {
    f->rsfn = fn;
    f->rsud = ud;
    f->rsfrom = fn && from > 0 && from < f->c->n_layers ? from : 0;
    fwd_reset(f);
}

void fwd_set_norm_eps(Forward *f, double eps) {
    f->norm_eps = eps > 0 ? eps : f->c->norm_eps > 0 ? f->c->norm_eps : 1e-5;
}

int fwd_run_hooked(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen) {
    f->lm_groups = 0;
    fwd_set_hooks(f, h);
    int rc = AL_OK;
    bool whole = h && h->whole_seqs;
    for (size_t s = 0; s < nseq && rc == AL_OK; s++) {
        if (al_interrupt_pending()) { rc = AL_INTERRUPTED; break; }
        fwd_reset(f);
        if (whole) al_interrupt_defer(true);      /* every poll inside the sequence (projections, heads) answers no */
        rc = fwd_run(f, tokens + s * seqlen, seqlen, FWD_LOGITS_NONE, NULL);
        if (whole) al_interrupt_defer(false);
        al_progress("sequence", s + 1, nseq);
    }
    al_progress(NULL, 0, 0);
    fwd_set_hooks(f, NULL);
    fwd_reset(f);
    return rc;
}

/* ---------------------------------------------------------------- layer-major hooked runs */

const char *fwd_layer_major_refusal(const Forward *f) {
    if (f->rsfn) return "a residual-stream hook";
    if (f->evfn) return "token eviction";
    if (f->capture) return "an attention capture";
    if (f->ple_embed.data) return "per-layer inputs computed once per sequence";
    if (f->ikc) return "the indexer's selection shared across layers";
    for (int L = 0; L < f->c->n_layers; L++)
        if (cfg_kv_source(f->c, L) != L) return "KV-shared layers";
    return NULL;
}

size_t fwd_layer_major_groups(const Forward *f) { return f->lm_groups; }
void fwd_set_group_tokens(Forward *f, size_t tokens) { f->group_tokens = tokens; }

/* Layer L over the W windows of X (W, T, D), each from position 0 as window-major's window seq0 + s0 + w (its
 * sequence number, its linear / SSM state zeroed, the layer's KV cache its own), X updated in place. Ctrl-C is
 * seen before each window; with whole, each layer-window runs under al_interrupt_defer (its hooks see all of it). */
static int layer_windows(Forward *f, int L, float *X, size_t W, size_t T, size_t seq0, bool whole) {
    size_t n = T * f->D;
    int rc = layer_load(f, L, false, NULL);
    for (size_t w = 0; rc == AL_OK && w < W; w++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        f->pos = 0;
        f->seq = seq0 + w + 1;
        memcpy(f->x.p, X + w * n, n * sizeof(float));
        if (whole) al_interrupt_defer(true);
        rc = layer_run(f, L, T);
        if (whole) al_interrupt_defer(false);
        if (rc == AL_OK) memcpy(X + w * n, f->x.p, n * sizeof(float));
    }
    if (f->streaming) layer_release(f, L);
    return rc;
}

/* Windows s0 .. s0+W-1 of tokens (seqlen T each): embedded into X (W, T, D), then every layer over all of them. */
static int group_run(Forward *f, const int *tokens, size_t s0, size_t W, size_t T, float *X, size_t seq0, bool whole) {
    size_t n = T * f->D, NL = (size_t)f->c->n_layers;
    int rc = AL_OK;
    for (size_t w = 0; rc == AL_OK && w < W; w++) {
        f->pos = 0;
        if ((rc = body_embed(f, tokens + (s0 + w) * T, T)) == AL_OK) memcpy(X + w * n, f->x.p, n * sizeof(float));
    }
    for (size_t L = 0; rc == AL_OK && L < NL; L++) {
        rc = layer_windows(f, (int)L, X, W, T, seq0 + s0, whole);
        al_progress(f->lm_label, L + 1, NL);
    }
    f->pos = 0;
    f->seq = seq0 + s0 + W;
    return rc;
}

/* The groups of nseq windows (Ctrl-C seen before each layer-window: layer_windows). */
static int groups_run(Forward *f, const int *tokens, size_t nseq, size_t T, size_t per, bool whole) {
    float *X = al_malloc3(per, T * f->D, sizeof(float), "the hidden states of a group of windows");
    if (!X) return AL_ERR;
    size_t seq0 = f->seq;
    int rc = AL_OK;
    f->lm_groups = 0;
    for (size_t s0 = 0; rc == AL_OK && s0 < nseq; s0 += per) {
        size_t W = nseq - s0 < per ? nseq - s0 : per;
        if (al_interrupt_pending()) { rc = AL_INTERRUPTED; break; }
        if (W == nseq) snprintf(f->lm_label, sizeof f->lm_label, "layer");       /* one group: "layer 3/32" */
        else snprintf(f->lm_label, sizeof f->lm_label, "windows %zu-%zu of %zu, layer", s0 + 1, s0 + W, nseq);
        rc = group_run(f, tokens, s0, W, T, X, seq0, whole);
        f->lm_groups++;
    }
    free(X);
    return rc;
}

int fwd_run_hooked_layers(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen,
                          size_t group_bytes) {
    return fwd_run_hooked_route(f, h, tokens, nseq, seqlen, group_bytes, !fwd_layer_major_refusal(f));
}

/* Windows in a layer-major group: as many whole windows of win bytes as the budget holds (0: FWD_GROUP_BYTES), at
 * most the group's tokens (fwd_set_group_tokens) in windows of seqlen, at least one. */
static size_t group_windows(const Forward *f, size_t win, size_t budget, size_t seqlen) {
    size_t per = (budget ? budget : FWD_GROUP_BYTES) / win;
    size_t cap = (f->group_tokens ? f->group_tokens : FWD_GROUP_TOKENS) / seqlen;
    per = per < cap ? per : cap;
    return per ? per : 1;
}

int fwd_run_hooked_route(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen,
                         size_t group_bytes, bool layer_major) {
    if (!layer_major || nseq == 0 || seqlen == 0) return fwd_run_hooked(f, h, tokens, nseq, seqlen);
    size_t per = group_windows(f, seqlen * f->D * sizeof(float), group_bytes, seqlen);
    fwd_set_hooks(f, h);
    int saved = blas_threads_begin(f);
    int rc = groups_run(f, tokens, nseq, seqlen, per, h && h->whole_seqs);
    blas_threads_end(saved);
    al_progress(NULL, 0, 0);
    fwd_set_hooks(f, NULL);
    fwd_reset(f);
    return rc;
}

/* The summed NLL of tokens[1..T) from the final normed hidden rows in f->h (T, D): logits in row chunks. */
static int nll_rows(Forward *f, const int *tokens, size_t T, double *nll_sum) {
    float *lg = fb_fit(&f->logit, LCHUNK, f->vocab, "logits");
    if (!lg) return AL_ERR;
    double sum = 0;
    for (size_t r0 = 0; r0 + 1 < T; r0 += LCHUNK) {
        size_t n = T - 1 - r0 < LCHUNK ? T - 1 - r0 : LCHUNK;
        int rc = logits_rows(f, f->h.p + r0 * f->D, n, lg);
        if (rc != AL_OK) return rc;
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
    return AL_OK;
}

int fwd_nll(Forward *f, const int *tokens, size_t T, double *nll_sum, size_t *count) {
    *nll_sum = 0;
    *count = 0;
    fwd_reset(f);
    if (T < 2) return al_err("perplexity needs at least 2 tokens in a window (got %zu)", T);
    int rc = body_threads(f, tokens, T);
    if (rc == AL_OK) rc = nll_rows(f, tokens, T, nll_sum);
    if (rc != AL_OK) { fwd_reset(f); *nll_sum = 0; return rc; }
    *count = T - 1;
    return AL_OK;
}

static int ppl_args(const Forward *f, size_t n, size_t seqlen) {
    if (seqlen < 2) return al_err("perplexity windows need at least 2 tokens, not %zu", seqlen);
    if (seqlen > f->max_ctx)
        return al_err("perplexity: seqlen %zu is longer than the model's context %zu: give a smaller seqlen", seqlen,
                      f->max_ctx);
    if (n < 2) return al_err("perplexity needs at least 2 tokens; the text has %zu", n);
    return AL_OK;
}

int fwd_ppl(Forward *f, const int *ids, size_t n, size_t seqlen, FwdPpl *out) {
    memset(out, 0, sizeof *out);
    out->nll = NAN;
    if (ppl_args(f, n, seqlen) != AL_OK) return AL_ERR;
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

/* ---------------------------------------------------------------- perplexity before and after, one pass */

typedef struct {
    const AttnLayer **base, **after;   /* (n_layers) stream 0's attention overrides (as set), stream 1's */
    double eps[2];                     /* each stream's norm eps */
    double sum[2];                     /* summed NLL */
    size_t tokens, windows;            /* predicted tokens and windows, of both streams alike */
} PplPair;

/* A group of windows of both streams: window w is ids[start + w seqlen ..) of len(w) tokens (the last of the text
 * may be shorter), its hidden states X + (s W + w) seqlen D (stream s). */
typedef struct {
    const int *ids;
    size_t n, start, W, seqlen;
    float *X;
} PairGroup;

static size_t pg_len(const PairGroup *g, size_t w) {
    size_t at = g->start + w * g->seqlen;
    return g->n - at < g->seqlen ? g->n - at : g->seqlen;
}

static float *pg_x(const PairGroup *g, const Forward *f, int s, size_t w) {
    return g->X + ((size_t)s * g->W + w) * g->seqlen * f->D;
}

/* Layer L over both streams of group g, in place, stream s with its overrides and norm eps. */
static int pair_layer(Forward *f, PplPair *pp, int L, const PairGroup *g) {
    int rc = layer_load(f, L, false, NULL);
    for (int s = 0; rc == AL_OK && s < 2; s++) {
        f->over[L] = s ? pp->after[L] : pp->base[L];
        f->norm_eps = pp->eps[s];
        for (size_t w = 0; rc == AL_OK && w < g->W; w++) {
            if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
            size_t T = pg_len(g, w), n = T * f->D;
            float *x = pg_x(g, f, s, w);
            f->pos = 0;                                   /* a fresh sequence: KV rows from 0, states zeroed */
            f->seq++;
            memcpy(f->x.p, x, n * sizeof(float));
            if ((rc = layer_run(f, L, T)) == AL_OK) memcpy(x, f->x.p, n * sizeof(float));
        }
    }
    f->over[L] = pp->base[L];
    f->norm_eps = pp->eps[0];
    if (f->streaming) layer_release(f, L);
    return rc;
}

/* Group g, both streams: embedded, every layer over both (each layer's weights read once for the group), then the
 * final norm and the NLL of each window, as fwd_nll computes them. */
static int pair_group(Forward *f, PplPair *pp, const PairGroup *g) {
    int rc = AL_OK, NL = f->c->n_layers;
    for (int L = 0; L < NL; L++) f->over[L] = pp->after[L];   /* body_embed's cache_fit fits their input caches */
    for (size_t w = 0; rc == AL_OK && w < g->W; w++) {
        size_t T = pg_len(g, w), n = T * f->D;
        f->pos = 0;
        if ((rc = body_embed(f, g->ids + g->start + w * g->seqlen, T)) != AL_OK) break;
        memcpy(pg_x(g, f, 0, w), f->x.p, n * sizeof(float));
        memcpy(pg_x(g, f, 1, w), f->x.p, n * sizeof(float));
    }
    for (int L = 0; L < NL; L++) f->over[L] = pp->base[L];
    for (int L = 0; rc == AL_OK && L < NL; L++) rc = pair_layer(f, pp, L, g);
    double part[2] = {0, 0};
    size_t tokens = 0;
    for (int s = 0; rc == AL_OK && s < 2; s++) {
        f->norm_eps = pp->eps[s];
        for (size_t w = 0; rc == AL_OK && w < g->W; w++) {
            size_t T = pg_len(g, w);
            double one = 0;
            norm_apply(f, f->norm, f->norm_b, pg_x(g, f, s, w), f->D, T, f->D, f->h.p, f->D);
            rc = nll_rows(f, g->ids + g->start + w * g->seqlen, T, &one);
            part[s] += one;
            tokens += s ? 0 : T - 1;
        }
    }
    f->norm_eps = pp->eps[0];
    if (rc != AL_OK) return rc;
    pp->sum[0] += part[0];
    pp->sum[1] += part[1];
    pp->tokens += tokens;
    pp->windows += g->W;
    return AL_OK;
}

/* The windows of ids (fwd_ppl's: seqlen tokens, the last shorter, one of a single token dropped) in groups of at
 * most the layer-major budget's windows, the shorter last one in the last group: one read of the weights a group. */
static int pair_windows(Forward *f, PplPair *pp, const int *ids, size_t n, size_t seqlen) {
    size_t nwin = n / seqlen + (n % seqlen >= 2);
    size_t per = group_windows(f, 2 * seqlen * f->D * sizeof(float), 0, seqlen);   /* both streams a window */
    per = per > nwin ? nwin : per;
    float *X = al_malloc3(2 * per, seqlen * f->D, sizeof(float), "the hidden states of before and after");
    if (!X) return AL_ERR;
    int rc = AL_OK;
    for (size_t w0 = 0; rc == AL_OK && w0 < nwin; w0 += per) {
        PairGroup g = {.ids = ids, .n = n, .start = w0 * seqlen, .W = nwin - w0 < per ? nwin - w0 : per,
                       .seqlen = seqlen, .X = X};
        rc = pair_group(f, pp, &g);
        al_progress("window", w0 + g.W, nwin);
    }
    al_progress(NULL, 0, 0);
    free(X);
    return rc;
}

int fwd_ppl_pair(Forward *f, const AttnLayer *const *after, double eps_after, const int *ids, size_t n, size_t seqlen,
                 FwdPpl *before, FwdPpl *out_after) {
    memset(before, 0, sizeof *before);
    memset(out_after, 0, sizeof *out_after);
    before->nll = out_after->nll = NAN;
    if (ppl_args(f, n, seqlen) != AL_OK) return AL_ERR;
    int NL = f->c->n_layers, rc = AL_OK;
    PplPair pp = {.eps = {f->norm_eps, f->norm_eps}};
    pp.base = al_calloc((size_t)NL, sizeof *pp.base, "attention overrides");
    pp.after = al_calloc((size_t)NL, sizeof *pp.after, "attention overrides");
    if (!pp.base || !pp.after) rc = AL_ERR;
    for (int L = 0; rc == AL_OK && L < NL; L++) pp.base[L] = f->over[L];
    for (int L = 0; rc == AL_OK && L < NL; L++)          /* validated (and input caches fitted) as fwd_set_attn does */
        if (after[L] && (rc = fwd_set_attn(f, L, after[L])) == AL_OK) pp.after[L] = f->over[L];
    for (int L = 0; rc == AL_OK && L < NL; L++) {
        if (!after[L]) pp.after[L] = pp.base[L];
        f->over[L] = pp.base[L];
    }
    if (rc == AL_OK && eps_after > 0) {
        fwd_set_norm_eps(f, eps_after);
        pp.eps[1] = f->norm_eps;
        f->norm_eps = pp.eps[0];
    }
    if (rc == AL_OK && fwd_layer_major_refusal(f)) {     /* window-major: two passes, one after the other */
        rc = fwd_ppl(f, ids, n, seqlen, before);
        for (int L = 0; rc == AL_OK && L < NL; L++)        /* fwd_set_attn: their input caches, now the pass has one */
            if (after[L]) rc = fwd_set_attn(f, L, pp.after[L]);
        f->norm_eps = pp.eps[1];
        if (rc == AL_OK) rc = fwd_ppl(f, ids, n, seqlen, out_after);
        f->norm_eps = pp.eps[0];
    } else if (rc == AL_OK) {
        int saved = blas_threads_begin(f);
        rc = pair_windows(f, &pp, ids, n, seqlen);
        blas_threads_end(saved);
        before->tokens = out_after->tokens = pp.tokens;
        before->windows = out_after->windows = pp.windows;
        if (pp.tokens) {
            before->nll = pp.sum[0] / (double)pp.tokens;
            out_after->nll = pp.sum[1] / (double)pp.tokens;
        }
    }
    for (int L = 0; pp.base && L < NL; L++)             /* the overrides as they were */
        if (after[L] && fwd_set_attn(f, L, pp.base[L]) != AL_OK && rc == AL_OK) rc = AL_ERR;
    f->norm_eps = pp.eps[0];
    fwd_reset(f);
    free(pp.base);
    free(pp.after);
    return rc;
}
