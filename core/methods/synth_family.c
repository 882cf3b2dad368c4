/* synth_family.c -- one tiny checkpoint per model family (`synth family NAME DIR`): the real
 * Hugging Face tensor names, shapes and config.json keys of qwen3, qwen3_moe, gemma2, gemma3_text,
 * mixtral, phi3, gpt_neox, olmo2 and a deepseek_v3 variant with mixture-of-experts layers, small
 * enough for unit tests (hidden 64-128, 3-6 layers, vocab 256), with planted low-rank heads.
 *
 * Owns: the family table (dims and config.json of each), the per-family layer layouts (split,
 * fused [Q; K; V], head-by-head query_key_value, MLA; pre / sandwich / post / parallel norms;
 * gated, fused, biased and mixture-of-experts MLPs) and the planted-rank table the tests assert
 * (synth_family_planted). The PRNG, the planted pairs and the writing are core/methods/synth.c's.
 *
 * ---------------------------------------------------------------- planted structure
 * Patterns as in synth.c's header (bottleneck: exact rank r on the shared side, fused rank r;
 * flat: every singular value equal; fused-low r=4 beta=0.055 at head_dim 32: V, O 31 @0.999 and
 * 19 @0.99, fused 4). Every family has head_dim (or v_head_dim) 32. VO pairs per KV head g (the
 * query heads of its group share its V); MHA families (gpt_neox, olmo2, deepseek_v3): g = head.
 *   layer 0        random (not planted)
 *   layer 1        g = 0: bottleneck V rank 6 (its query heads: VO rank 6, O 32); g > 0: flat (32)
 *   layer 2        fused-low r=4 for every group
 *   layers 3..     random
 * QK pairs over the NoPE columns, where QK fusion is meaningful without a RoPE offset:
 *   gpt_neox (rotary_pct 0.25: columns [0, 8) of each head rotate, [8, 32) are NoPE):
 *     layer 1 bottleneck K NoPE rank 8 (QK rank 8, Q 24); layer 2 flat (Q, K, QK 24); else random.
 *   deepseek_v3 (qk_nope 32): layer 1 bottleneck K NoPE rank 8; layer 2 flat (32); else random.
 * Everything else is Gaussian with element RMS 1/sqrt(fan-in) (embeddings RMS 1; tied ones, the
 * output layer too, 1/sqrt(hidden)); norm weights are 1 + 0.1 N(0,1) (Gemma's (1 + w) weights
 * 0.1 N(0,1)), LayerNorm and linear biases 0.1 N(0,1), DeepSeek's e_score_correction_bias
 * 0.5 + 0.1 N(0,1) (so every choice score is positive and masking the other groups with 0, or
 * -inf as newer transformers do, chooses alike), so that every weight matters to the logits.
 * Windows are small (sliding_window 8) and soft-caps low (gemma2: 5 and 10) so that tests over
 * 24+ tokens see them.
 *
 * Families (hidden, heads / KV heads x head_dim, layers, MLP):
 *   qwen3        64, 4/2 x 32, 3, gated 128; per-head q_norm / k_norm; tied embeddings
 *   qwen3_moe    64, 4/2 x 32, 3, 4 experts top-2 (moe_intermediate 64, norm_topk_prob)
 *   gemma2       64, 4/2 x 32, 4, GeGLU 128; sandwich norms (1 + w), query_pre_attn_scalar 24,
 *                soft-caps 5 (attention) and 10 (final), sliding window 8 on even layers
 *   gemma3_text  64, 4/1 x 32, 6, GeGLU 128; q/k norms (1 + w), query_pre_attn_scalar 32,
 *                5 sliding : 1 global (window 8, local base 10000), global rope_scaling linear 2
 *   mixtral      128, 4/2 x 32, 3, 4 experts top-2 (w1 / w3 / w2, 128); sliding window 8
 *   phi3         128, 4/2 x 32, 3, fused qkv_proj and gate_up_proj (256); partial_rotary 0.5;
 *                sliding window 8
 *   gpt_neox     128, 4 x 32, 3, dense_h_to_4h 512 with biases, GELU; rotary_pct 0.25; parallel
 *                residual; LayerNorm with bias; untied embed_out
 *   olmo2        128, 4 x 32, 3, gated 256; q_norm / k_norm over the whole projection; post-norms
 *   deepseek_v3  128, 4 heads MLA (q_lora 64, kv_lora 64, nope 32, rope 16, v 32), 3 layers:
 *                layer 0 dense (256), layers 1-2 8 routed experts (64) in 4 groups, topk_group 2,
 *                top-2, sigmoid scores + e_score_correction_bias, 1 shared expert, scaling 2.5 */
#define _GNU_SOURCE
#include "synth.h"
#include "synth_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ the family table */

typedef enum { SF_QWEN3, SF_QWEN3_MOE, SF_GEMMA2, SF_GEMMA3, SF_MIXTRAL, SF_PHI3, SF_NEOX, SF_OLMO2, SF_DEEPSEEK,
               SF_COUNT } synth_family;

typedef struct {
    const char *name;       /* model_type and the `synth family` name */
    const char *arch;       /* architectures[0] */
    int hidden, heads, kv, hd, layers, vocab, inter;
    int experts, top_k, expert_ffn;      /* mixture of experts (0: dense) */
} FamSpec;

static const FamSpec FAMS[SF_COUNT] = {
    [SF_QWEN3] = {"qwen3", "Qwen3ForCausalLM", 64, 4, 2, 32, 3, 256, 128, 0, 0, 0},
    [SF_QWEN3_MOE] = {"qwen3_moe", "Qwen3MoeForCausalLM", 64, 4, 2, 32, 3, 256, 128, 4, 2, 64},
    [SF_GEMMA2] = {"gemma2", "Gemma2ForCausalLM", 64, 4, 2, 32, 4, 256, 128, 0, 0, 0},
    [SF_GEMMA3] = {"gemma3_text", "Gemma3ForCausalLM", 64, 4, 1, 32, 6, 256, 128, 0, 0, 0},
    [SF_MIXTRAL] = {"mixtral", "MixtralForCausalLM", 128, 4, 2, 32, 3, 256, 128, 4, 2, 128},
    [SF_PHI3] = {"phi3", "Phi3ForCausalLM", 128, 4, 2, 32, 3, 256, 256, 0, 0, 0},
    [SF_NEOX] = {"gpt_neox", "GPTNeoXForCausalLM", 128, 4, 4, 32, 3, 256, 512, 0, 0, 0},
    [SF_OLMO2] = {"olmo2", "Olmo2ForCausalLM", 128, 4, 4, 32, 3, 256, 256, 0, 0, 0},
    [SF_DEEPSEEK] = {"deepseek_v3", "DeepseekV3ForCausalLM", 128, 4, 4, 32, 3, 256, 256, 8, 2, 64},
};

/* deepseek_v3's MLA dims and routing; gpt_neox's rotary dims; the window of windowed families. */
enum { DSF_QLORA = 64, DSF_KVLORA = 64, DSF_NOPE = 32, DSF_ROPE = 16, DSF_GROUPS = 4, DSF_TOPK_GROUP = 2,
       NEOX_ROPE = 8, SF_WINDOW = 8 };

const char *const synth_family_names[] = {"qwen3", "qwen3_moe", "gemma2", "gemma3_text", "mixtral", "phi3",
                                          "gpt_neox", "olmo2", "deepseek_v3", NULL};

static int family_id(const char *name) {
    for (int f = 0; name && f < SF_COUNT; f++)
        if (!strcmp(name, FAMS[f].name)) return f;
    return -1;
}

static bool is_gemma(int f) { return f == SF_GEMMA2 || f == SF_GEMMA3; }

/* ================================================================ planted ranks */

static PairSpec fam_vo(int L, int g) {
    switch (L) {
    case 1: return g == 0 ? p_bottle(6) : p_flat();
    case 2: return p_low(4, 0.055);
    default: return p_random();
    }
}

static PairSpec fam_qk(int L, int h) {
    (void)h;
    switch (L) {
    case 1: return p_bottle(8);
    case 2: return p_flat();
    default: return p_random();
    }
}

bool synth_family_planted(const char *family, bool qk, int layer, int head, double tau, int *ra, int *rb, int *rf) {
    int f = family_id(family);
    if (f < 0 || layer < 0 || layer >= FAMS[f].layers || head < 0 || head >= FAMS[f].heads) return false;
    if (qk && f != SF_NEOX && f != SF_DEEPSEEK) return false;
    const FamSpec *s = &FAMS[f];
    int g = qk ? head : head / (s->heads / s->kv);
    PairSpec p = qk ? fam_qk(layer, head) : fam_vo(layer, g);
    int k = qk ? (f == SF_NEOX ? s->hd - NEOX_ROPE : DSF_NOPE) : s->hd;
    int a = k, b = k, fu = k;                   /* flat */
    bool hi = tau > 0.995;                      /* the table holds tau 0.999 and 0.99 */
    switch (p.pat) {
    case PAT_RANDOM: return false;
    case PAT_FLAT: break;
    case PAT_BOTTLENECK:                        /* the shared side (V, or K) has rank r */
        fu = p.r;
        if (qk) b = p.r; else a = p.r;
        break;
    case PAT_FUSED_LOW:                         /* r = 4, beta = 0.055, d = 32 */
        a = b = hi ? 31 : 19;
        fu = p.r;
        break;
    }
    if (ra) *ra = a;
    if (rb) *rb = b;
    if (rf) *rf = fu;
    return true;
}

/* ================================================================ tensors */

/* What one layer's tensors are named and written with. */
typedef struct {
    int f;
    const FamSpec *s;
    unsigned long seed;
    dt_type dt;
    SynList *l;
    int L;                  /* layer (-1: outside the layers) */
} Ctx;

static const char *fam_prefix(int f) { return f == SF_NEOX ? "gpt_neox." : "model."; }

/* The full name of suffix: "<prefix>layers.<L>.<suffix>" inside a layer, else suffix as given. */
static void full_name(const Ctx *c, const char *suffix, char *name, size_t n) {
    if (c->L >= 0) snprintf(name, n, "%slayers.%d.%s", fam_prefix(c->f), c->L, suffix);
    else snprintf(name, n, "%s", suffix);
}

/* Adds m (taken) under suffix. */
static int add_mat(const Ctx *c, const char *suffix, int ndim, Mat *m) {
    char name[192];
    full_name(c, suffix, name, sizeof name);
    return synlist_add(c->l, name, ndim, m, c->dt);
}

/* Gaussian weight (rows x cols), RMS 1/sqrt(cols) (sd when > 0), from the stream of its name. */
static int add_gauss(const Ctx *c, const char *suffix, size_t rows, size_t cols, double sd) {
    char name[192];
    full_name(c, suffix, name, sizeof name);
    return synlist_add(c->l, name, 2, syn_gauss_named(c->seed, name, rows, cols, sd > 0 ? sd : 1 / sqrt((double)cols)),
                       c->dt);
}

/* Vector center + 0.1 N(0, 1) (norm weights: center 1, Gemma's 0; biases: 0), in dtype dt. */
static int add_vec(const Ctx *c, const char *suffix, size_t n, float center, dt_type dt) {
    char name[192];
    full_name(c, suffix, name, sizeof name);
    Mat *m = syn_gauss_named(c->seed, name, 1, n, 0.1);
    if (m)
        for (size_t i = 0; i < n; i++) m->data[i] += center;
    return synlist_add(c->l, name, 1, m, dt);
}

static int add_norm(const Ctx *c, const char *suffix, size_t n) {
    return add_vec(c, suffix, n, is_gemma(c->f) ? 0.0f : 1.0f, c->dt);
}

/* A norm weight and, for GPT-NeoX's LayerNorm, its bias ("<what>.weight", "<what>.bias"). */
static int add_norm_pair(const Ctx *c, const char *what, size_t n) {
    char w[96], b[96];
    snprintf(w, sizeof w, "%s.weight", what);
    snprintf(b, sizeof b, "%s.bias", what);
    int rc = add_norm(c, w, n);
    if (rc == AL_OK && c->f == SF_NEOX) rc = add_vec(c, b, n, 0.0f, c->dt);
    return rc;
}

/* Rows [r0, r0 + n) of src copied to rows [d0, ..) of dst (same columns). */
static void copy_rows(Mat *dst, size_t d0, const Mat *src, size_t r0, size_t n) {
    memcpy(dst->data + d0 * dst->cols, src->data + r0 * src->cols, n * src->cols * sizeof(float));
}

/* GPT-NeoX: plants head h's NoPE QK pair (spec fam_qk) into rows h*hd + [rot, hd) of Q and K. */
static int neox_plant_qk(const Ctx *c, Mat *q, Mat *k) {
    const size_t D = (size_t)c->s->hidden, hd = (size_t)c->s->hd, np = hd - NEOX_ROPE;
    int rc = AL_OK;
    for (int h = 0; rc == AL_OK && h < c->s->heads; h++) {
        Rng rng;
        char stream[96];
        Mat *Lk = NULL, *Rq = NULL;
        PairSpec sp = fam_qk(c->L, h);
        snprintf(stream, sizeof stream, "gpt_neox.L%d.h%d.qk", c->L, h);
        syn_rng_init(&rng, c->seed, stream);
        rc = syn_gen_pair(&rng, &sp, D, D, np, 1, 1 / sqrt((double)D), 1 / sqrt((double)D), &Lk, &Rq);
        for (size_t i = 0; rc == AL_OK && i < np; i++)
            for (size_t j = 0; j < D; j++) {
                *mat_at(k, (size_t)h * hd + NEOX_ROPE + i, j) = *mat_at(Lk, j, i);
                *mat_at(q, (size_t)h * hd + NEOX_ROPE + i, j) = *mat_at(Rq, j, i);
            }
        mat_free(Lk);
        mat_free(Rq);
    }
    return rc;
}

/* Attention of a GQA family: Q, K Gaussian, V / O planted (fam_vo), laid out as the family
 * stores them, with its q/k norms and biases. */
static int attn_gqa(const Ctx *c) {
    const FamSpec *s = c->s;
    const size_t D = (size_t)s->hidden, H = (size_t)s->heads, KV = (size_t)s->kv, hd = (size_t)s->hd;
    char name[192];
    Mat *vp = NULL, *op = NULL;
    const GqaDims dims = {D, H, KV, hd};
    int rc = syn_gqa_vo(c->seed, s->name, c->L, &dims, fam_vo, &vp, &op);
    full_name(c, "self_attn.q_proj.weight", name, sizeof name);
    Mat *q = rc == AL_OK ? syn_gauss_named(c->seed, name, H * hd, D, 1 / sqrt((double)D)) : NULL;
    full_name(c, "self_attn.k_proj.weight", name, sizeof name);
    Mat *k = q ? syn_gauss_named(c->seed, name, KV * hd, D, 1 / sqrt((double)D)) : NULL;
    if (k && c->f == SF_NEOX && neox_plant_qk(c, q, k) != AL_OK) { mat_free(k); k = NULL; }
    if (!k) { mat_free(q); mat_free(vp); mat_free(op); return AL_ERR; }
    if (c->f == SF_PHI3 || c->f == SF_NEOX) {
        Mat *qkv = mat_new(H * hd + 2 * KV * hd, D);
        if (qkv && c->f == SF_PHI3) {             /* rows [Q heads ; K heads ; V heads] */
            copy_rows(qkv, 0, q, 0, H * hd);
            copy_rows(qkv, H * hd, k, 0, KV * hd);
            copy_rows(qkv, H * hd + KV * hd, vp, 0, KV * hd);
        } else if (qkv) {                          /* rows head by head [q_h ; k_h ; v_h] */
            for (size_t h = 0; h < H; h++) {
                copy_rows(qkv, 3 * h * hd, q, h * hd, hd);
                copy_rows(qkv, 3 * h * hd + hd, k, h * hd, hd);
                copy_rows(qkv, 3 * h * hd + 2 * hd, vp, h * hd, hd);
            }
        }
        mat_free(q); mat_free(k); mat_free(vp);
        if (c->f == SF_PHI3) {
            rc = add_mat(c, "self_attn.qkv_proj.weight", 2, qkv);
            return rc == AL_OK ? add_mat(c, "self_attn.o_proj.weight", 2, op) : (mat_free(op), rc);
        }
        rc = add_mat(c, "attention.query_key_value.weight", 2, qkv);
        if (rc == AL_OK) rc = add_vec(c, "attention.query_key_value.bias", 3 * H * hd, 0.0f, c->dt);
        if (rc == AL_OK) rc = add_mat(c, "attention.dense.weight", 2, op); else mat_free(op);
        return rc == AL_OK ? add_vec(c, "attention.dense.bias", D, 0.0f, c->dt) : rc;
    }
    rc = add_mat(c, "self_attn.q_proj.weight", 2, q);
    if (rc == AL_OK) rc = add_mat(c, "self_attn.k_proj.weight", 2, k); else mat_free(k);
    if (rc == AL_OK) rc = add_mat(c, "self_attn.v_proj.weight", 2, vp); else mat_free(vp);
    if (rc == AL_OK) rc = add_mat(c, "self_attn.o_proj.weight", 2, op); else mat_free(op);
    if (rc == AL_OK && (c->f == SF_QWEN3 || c->f == SF_QWEN3_MOE || c->f == SF_GEMMA3)) {
        rc = add_norm(c, "self_attn.q_norm.weight", hd);                /* per head */
        if (rc == AL_OK) rc = add_norm(c, "self_attn.k_norm.weight", hd);
    } else if (rc == AL_OK && c->f == SF_OLMO2) {
        rc = add_norm(c, "self_attn.q_norm.weight", H * hd);            /* whole projection */
        if (rc == AL_OK) rc = add_norm(c, "self_attn.k_norm.weight", KV * hd);
    }
    return rc;
}

/* DeepSeek-V3 MLA attention with planted VO and NoPE QK pairs. */
static int attn_mla(const Ctx *c) {
    const size_t D = (size_t)c->s->hidden;
    const MlaDims dims = {D, (size_t)c->s->heads, DSF_QLORA, DSF_KVLORA, DSF_NOPE, DSF_ROPE, (size_t)c->s->hd};
    Mat *qb, *kvb, *op;
    int rc = syn_mla_heads(c->seed, "deepseek_v3", c->L, &dims, fam_vo, fam_qk, &qb, &kvb, &op);
    if (rc != AL_OK) return rc;
    rc = add_gauss(c, "self_attn.q_a_proj.weight", DSF_QLORA, D, 0);
    if (rc == AL_OK) rc = add_norm(c, "self_attn.q_a_layernorm.weight", DSF_QLORA);
    if (rc == AL_OK) rc = add_mat(c, "self_attn.q_b_proj.weight", 2, qb); else mat_free(qb);
    if (rc == AL_OK) rc = add_gauss(c, "self_attn.kv_a_proj_with_mqa.weight", DSF_KVLORA + DSF_ROPE, D, 0);
    if (rc == AL_OK) rc = add_norm(c, "self_attn.kv_a_layernorm.weight", DSF_KVLORA);
    if (rc == AL_OK) rc = add_mat(c, "self_attn.kv_b_proj.weight", 2, kvb); else mat_free(kvb);
    if (rc == AL_OK) rc = add_mat(c, "self_attn.o_proj.weight", 2, op); else mat_free(op);
    return rc;
}

/* A gated MLP "<pre>{gate,up,down}_proj" (Mixtral's experts: w1 gate, w3 up, w2 down) of width F. */
static int mlp_gated(const Ctx *c, const char *pre, size_t F, bool mixtral) {
    const size_t D = (size_t)c->s->hidden;
    char n[160];
    snprintf(n, sizeof n, "%s%s.weight", pre, mixtral ? "w1" : "gate_proj");
    int rc = add_gauss(c, n, F, D, 0);
    snprintf(n, sizeof n, "%s%s.weight", pre, mixtral ? "w3" : "up_proj");
    if (rc == AL_OK) rc = add_gauss(c, n, F, D, 0);
    snprintf(n, sizeof n, "%s%s.weight", pre, mixtral ? "w2" : "down_proj");
    if (rc == AL_OK) rc = add_gauss(c, n, D, F, 0);
    return rc;
}

/* The router and experts of a mixture-of-experts layer, named as the family names them. */
static int mlp_moe(const Ctx *c) {
    const FamSpec *s = c->s;
    const size_t D = (size_t)s->hidden, E = (size_t)s->experts, F = (size_t)s->expert_ffn;
    const bool mix = c->f == SF_MIXTRAL;
    const char *base = mix ? "block_sparse_moe." : "mlp.";
    char n[160];
    snprintf(n, sizeof n, "%sgate.weight", base);
    int rc = add_gauss(c, n, E, D, 0);
    if (rc == AL_OK && c->f == SF_DEEPSEEK) rc = add_vec(c, "mlp.gate.e_score_correction_bias", E, 0.5f, DT_F32);
    for (size_t e = 0; rc == AL_OK && e < E; e++) {
        snprintf(n, sizeof n, "%sexperts.%zu.", base, e);
        rc = mlp_gated(c, n, F, mix);
    }
    if (rc == AL_OK && c->f == SF_DEEPSEEK) rc = mlp_gated(c, "mlp.shared_experts.", F, false);
    return rc;
}

/* The MLP of layer c->L. */
static int fam_mlp(const Ctx *c) {
    const FamSpec *s = c->s;
    const size_t D = (size_t)s->hidden, F = (size_t)s->inter;
    bool moe = s->experts > 0 && !(c->f == SF_DEEPSEEK && c->L < 1);   /* first_k_dense_replace 1 */
    if (moe) return mlp_moe(c);
    if (c->f == SF_PHI3) {
        int rc = add_gauss(c, "mlp.gate_up_proj.weight", 2 * F, D, 0);             /* rows [gate ; up] */
        return rc == AL_OK ? add_gauss(c, "mlp.down_proj.weight", D, F, 0) : rc;
    }
    if (c->f == SF_NEOX) {
        int rc = add_gauss(c, "mlp.dense_h_to_4h.weight", F, D, 0);
        if (rc == AL_OK) rc = add_vec(c, "mlp.dense_h_to_4h.bias", F, 0.0f, c->dt);
        if (rc == AL_OK) rc = add_gauss(c, "mlp.dense_4h_to_h.weight", D, F, 0);
        return rc == AL_OK ? add_vec(c, "mlp.dense_4h_to_h.bias", D, 0.0f, c->dt) : rc;
    }
    return mlp_gated(c, "mlp.", F, false);
}

/* Layer c->L: norms as the family's block arranges them, attention, MLP. */
static int fam_layer(const Ctx *c) {
    const size_t D = (size_t)c->s->hidden;
    int rc = AL_OK;
    if (c->f != SF_OLMO2) rc = add_norm_pair(c, "input_layernorm", D);
    if (rc == AL_OK) rc = c->f == SF_DEEPSEEK ? attn_mla(c) : attn_gqa(c);
    if (rc == AL_OK) rc = add_norm_pair(c, "post_attention_layernorm", D);
    if (rc == AL_OK && is_gemma(c->f)) rc = add_norm(c, "pre_feedforward_layernorm.weight", D);
    if (rc == AL_OK) rc = fam_mlp(c);
    if (rc == AL_OK && (is_gemma(c->f) || c->f == SF_OLMO2)) rc = add_norm(c, "post_feedforward_layernorm.weight", D);
    return rc;
}

static bool fam_tied(int f) { return f == SF_QWEN3 || is_gemma(f); }

/* Every tensor of family f in file order. */
static int fam_tensors(SynList *l, int f, dt_type dt, unsigned long seed) {
    const FamSpec *s = &FAMS[f];
    Ctx c = {f, s, seed, dt, l, -1};
    const bool neox = f == SF_NEOX;
    /* tied embeddings are also the output layer: RMS 1/sqrt(hidden) keeps the logits O(1) */
    int rc = add_gauss(&c, neox ? "gpt_neox.embed_in.weight" : "model.embed_tokens.weight", (size_t)s->vocab,
                       (size_t)s->hidden, fam_tied(f) ? 1 / sqrt((double)s->hidden) : 1.0);
    for (int L = 0; rc == AL_OK && L < s->layers; L++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        c.L = L;
        rc = fam_layer(&c);
    }
    c.L = -1;
    if (rc == AL_OK) rc = add_norm_pair(&c, neox ? "gpt_neox.final_layer_norm" : "model.norm", (size_t)s->hidden);
    if (rc == AL_OK && !fam_tied(f))
        rc = add_gauss(&c, neox ? "embed_out.weight" : "lm_head.weight", (size_t)s->vocab, (size_t)s->hidden, 0);
    return rc;
}

/* ================================================================ config.json */

static void add_bool(cJSON *o, const char *k, bool v) { cJSON_AddBoolToObject(o, k, v); }

/* Keys every family shares (Llama's names; GPT-NeoX's differ only in its own keys). */
static void cfg_common(cJSON *c, int f, dt_type dt) {
    const FamSpec *s = &FAMS[f];
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(s->arch));
    syn_add_str(c, "model_type", s->name);
    syn_add_num(c, "hidden_size", s->hidden);
    syn_add_num(c, "intermediate_size", s->inter);
    syn_add_num(c, "num_attention_heads", s->heads);
    syn_add_num(c, "num_hidden_layers", s->layers);
    syn_add_num(c, "vocab_size", s->vocab);
    syn_add_num(c, "max_position_embeddings", 512);
    syn_add_num(c, "bos_token_id", 1);
    syn_add_num(c, "eos_token_id", 2);
    syn_add_num(c, "initializer_range", 0.02);
    syn_add_num(c, "attention_dropout", 0.0);
    add_bool(c, "tie_word_embeddings", fam_tied(f));
    add_bool(c, "use_cache", true);
    syn_add_str(c, "torch_dtype", dt == DT_F32 ? "float32" : "bfloat16");
    if (f != SF_NEOX) {
        syn_add_num(c, "num_key_value_heads", s->kv);
        add_bool(c, "attention_bias", false);
        syn_add_str(c, "hidden_act", is_gemma(f) ? "gelu_pytorch_tanh" : "silu");
        syn_add_num(c, "rms_norm_eps", is_gemma(f) || f == SF_QWEN3 || f == SF_QWEN3_MOE || f == SF_OLMO2 || f == SF_DEEPSEEK ? 1e-6 : 1e-5);
    }
}

static void cfg_family(cJSON *c, int f) {
    const FamSpec *s = &FAMS[f];
    switch (f) {
    case SF_QWEN3_MOE:
        syn_add_num(c, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(c, "mlp_only_layers");
        syn_add_num(c, "moe_intermediate_size", s->expert_ffn);
        add_bool(c, "norm_topk_prob", true);
        syn_add_num(c, "num_experts", s->experts);
        syn_add_num(c, "num_experts_per_tok", s->top_k);
        add_bool(c, "output_router_logits", false);
        syn_add_num(c, "router_aux_loss_coef", 0.001);
        /* Qwen3's attention keys follow */
        /* fall through */
    case SF_QWEN3:
        syn_add_num(c, "head_dim", s->hd);
        syn_add_num(c, "max_window_layers", s->layers);
        cJSON_AddNullToObject(c, "rope_scaling");
        syn_add_num(c, "rope_theta", 1000000);
        cJSON_AddNullToObject(c, "sliding_window");
        add_bool(c, "use_sliding_window", false);
        break;
    case SF_GEMMA2:
    case SF_GEMMA3:
        syn_add_num(c, "head_dim", s->hd);
        syn_add_str(c, "hidden_activation", "gelu_pytorch_tanh");
        syn_add_num(c, "pad_token_id", 0);
        syn_add_num(c, "sliding_window", SF_WINDOW);
        if (f == SF_GEMMA2) {
            syn_add_num(c, "attn_logit_softcapping", 5.0);
            syn_add_num(c, "final_logit_softcapping", 10.0);
            syn_add_num(c, "query_pre_attn_scalar", 24);
            syn_add_num(c, "rope_theta", 10000);
            syn_add_str(c, "cache_implementation", "hybrid");
        } else {
            cJSON_AddNullToObject(c, "attn_logit_softcapping");
            cJSON_AddNullToObject(c, "final_logit_softcapping");
            syn_add_num(c, "query_pre_attn_scalar", 32);
            syn_add_num(c, "rope_local_base_freq", 10000);
            syn_add_num(c, "rope_theta", 1000000);
            cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
            syn_add_num(rs, "factor", 2.0);
            syn_add_str(rs, "rope_type", "linear");
            syn_add_num(c, "sliding_window_pattern", 6);
        }
        break;
    case SF_MIXTRAL:
        syn_add_num(c, "num_local_experts", s->experts);
        syn_add_num(c, "num_experts_per_tok", s->top_k);
        add_bool(c, "output_router_logits", false);
        syn_add_num(c, "router_aux_loss_coef", 0.02);
        syn_add_num(c, "rope_theta", 1000000);
        syn_add_num(c, "sliding_window", SF_WINDOW);
        break;
    case SF_PHI3:
        syn_add_num(c, "embd_pdrop", 0.0);
        syn_add_num(c, "original_max_position_embeddings", 512);
        syn_add_num(c, "partial_rotary_factor", 0.5);
        syn_add_num(c, "resid_pdrop", 0.0);
        cJSON_AddNullToObject(c, "rope_scaling");
        syn_add_num(c, "rope_theta", 10000);
        syn_add_num(c, "sliding_window", SF_WINDOW);
        break;
    case SF_NEOX:
        syn_add_str(c, "hidden_act", "gelu");
        add_bool(c, "attention_bias", true);
        syn_add_num(c, "hidden_dropout", 0.0);
        syn_add_num(c, "layer_norm_eps", 1e-5);
        syn_add_num(c, "rotary_emb_base", 10000);
        syn_add_num(c, "rotary_pct", (double)NEOX_ROPE / s->hd);
        add_bool(c, "use_parallel_residual", true);
        break;
    case SF_OLMO2:
        cJSON_AddNullToObject(c, "rope_scaling");
        syn_add_num(c, "rope_theta", 500000);
        syn_add_num(c, "pad_token_id", 0);
        break;
    default:   /* SF_DEEPSEEK */
        syn_add_num(c, "first_k_dense_replace", 1);
        syn_add_num(c, "kv_lora_rank", DSF_KVLORA);
        syn_add_num(c, "moe_intermediate_size", s->expert_ffn);
        syn_add_num(c, "moe_layer_freq", 1);
        syn_add_num(c, "n_group", DSF_GROUPS);
        syn_add_num(c, "n_routed_experts", s->experts);
        syn_add_num(c, "n_shared_experts", 1);
        add_bool(c, "norm_topk_prob", true);
        syn_add_num(c, "num_experts_per_tok", s->top_k);
        syn_add_num(c, "num_nextn_predict_layers", 0);
        syn_add_num(c, "q_lora_rank", DSF_QLORA);
        syn_add_num(c, "qk_nope_head_dim", DSF_NOPE);
        syn_add_num(c, "qk_rope_head_dim", DSF_ROPE);
        cJSON_AddNullToObject(c, "rope_scaling");
        syn_add_num(c, "rope_theta", 10000);
        syn_add_num(c, "routed_scaling_factor", 2.5);
        syn_add_str(c, "scoring_func", "sigmoid");
        syn_add_num(c, "topk_group", DSF_TOPK_GROUP);
        syn_add_str(c, "topk_method", "noaux_tc");
        syn_add_num(c, "v_head_dim", s->hd);
        break;
    }
}

/* ================================================================ public */

int synth_family_write(const char *family, dt_type dtype, unsigned long seed, const char *dir) {
    int f = family_id(family);
    if (f < 0) {
        char list[256] = "";
        for (int i = 0; synth_family_names[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", synth_family_names[i]);
        return al_err("synth family: unknown family '%s'; known: %s", family ? family : "", list);
    }
    if (dtype != DT_F32 && dtype != DT_BF16)
        return al_err("synth family %s: dtype %s is not offered; use f32 or bf16", family, dt_name(dtype));
    SynList l = {0};
    int rc = fam_tensors(&l, f, dtype, seed);
    cJSON *cfg = cJSON_CreateObject();
    if (rc == AL_OK && cfg) {
        cfg_common(cfg, f, dtype);
        cfg_family(cfg, f);
        char kind[64];
        snprintf(kind, sizeof kind, "family-%s", family);
        syn_add_provenance(cfg, kind, seed, dtype);
        rc = syn_write_model(&l, cfg, dir, 1);
        cfg = NULL;
    }
    cJSON_Delete(cfg);
    synlist_free(&l);
    if (rc == AL_ERR) al_err_ctx("synth family %s", family);
    return rc;
}
