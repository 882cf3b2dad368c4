/* synth_family.c -- one tiny checkpoint per model family (`synth family NAME DIR`) for every row of
 * the family table with a recipe: the real Hugging Face tensor names, shapes and config.json keys
 * of the family, small enough for unit tests (hidden 64-128, 3-6 layers, vocab 256), with planted
 * low-rank heads.
 *
 * A family's recipe is its row of the family table (core/model/family.c: the dims every family
 * shares and its own config.json members). The config is written first and read back with the
 * one config parser; the tensors are then made from that description, by role, in the layouts it
 * names (split, fused [Q; K; V], head-by-head query_key_value, MLA; pre / sandwich / post /
 * parallel norms; gated, fused, biased and mixture-of-experts MLPs). Owns the planted-rank table
 * the tests assert (synth_family_planted). The PRNG, the planted pairs and the writing are
 * core/methods/synth.c's.
 *
 * ---------------------------------------------------------------- planted structure
 * Patterns as in synth.c's header (bottleneck: exact rank r on the shared side, fused rank r;
 * flat: every singular value equal; fused-low r=4 beta=0.055 at head_dim 32: V, O 31 @0.999 and
 * 19 @0.99, fused 4). Every family has head_dim (or v_head_dim) 32. VO pairs per KV head g (the
 * query heads of its group share its V); MHA families: g = head.
 *   layer 0        random (not planted)
 *   layer 1        g = 0: bottleneck V rank 6 (its query heads: VO rank 6, O 32); g > 0: flat (32)
 *   layer 2        fused-low r=4 for every group
 *   layers 3..     random
 * QK pairs over the NoPE columns, where QK fusion is meaningful without a RoPE offset (the
 * head-by-head fused layout and MLA: gpt_neox's columns [8, 32), deepseek_v3's qk_nope 32):
 *   layer 1 bottleneck K NoPE rank 8 (QK rank 8, Q all NoPE dims); layer 2 flat; else random.
 * In a hybrid (qwen3_next: layers 0-2 Gated DeltaNet, 3 attention) the n-th softmax-attention layer
 * plants as layer 1 + n % 2 above; the linear layers are Gaussian (conv RMS 1/sqrt(kernel), A_log
 * and dt_bias 0.1 N(0,1), the gated norm 1 + 0.1 N(0,1)), the q_proj gate rows Gaussian. The Mamba-2 hybrids plant
 * alike on their attention layers (nemotron_h "M*-M*-": layers 1 and 4; granitemoehybrid: 1 and 3); their Mamba-2
 * layers are Gaussian (D 1 + 0.1 N(0,1), conv bias 0.1 N(0,1)) and Nemotron-H's MLP blocks have no mixer.
 * On the layers without RoPE (smollm3's layer 3) QK is planted over the whole head, where W_Q W_Kᵀ
 * is exactly the map the model computes: bottleneck K rank 8 per KV head g (its query heads: QK
 * rank 8, Q 32).
 * Everything else is Gaussian with element RMS 1/sqrt(fan-in) (embeddings RMS 1; tied ones, the
 * output layer too, 1/sqrt(hidden)); norm weights are 1 + 0.1 N(0,1) (Gemma's (1 + w) weights
 * 0.1 N(0,1)), LayerNorm and linear biases 0.1 N(0,1), DeepSeek's e_score_correction_bias
 * 0.5 + 0.1 N(0,1) (so every choice score is positive and masking the other groups with 0, or
 * -inf as newer transformers do, chooses alike), so that every weight matters to the logits.
 * Windows are small (sliding_window 8) and soft-caps low (gemma2: 5 and 10) so that tests over
 * 24+ tokens see them.
 *
 * The recipes themselves (dims, windows, soft-caps, experts, MLA dims, ...) are the rows' config
 * members in core/model/family.c; `info` on a written checkpoint describes it. */
#define _GNU_SOURCE
#include "synth.h"
#include "ckpt_write.h"
#include "synth_internal.h"
#include "config.h"
#include "dsv4.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ the families with a recipe */

const char *synth_family_names[FAM_COUNT + 1];

/* Fills synth_family_names from the family table before main: the rows with a recipe. */
__attribute__((constructor)) static void synth_family_names_fill(void) {
    size_t n = 0;
    for (int f = 0; f < FAM_COUNT; f++)
        if (FAMILY[f].synth.hidden > 0) synth_family_names[n++] = FAMILY[f].model_type;
    synth_family_names[n] = NULL;
}

static const FamilyRow *recipe_row(const char *name) {
    model_family f;
    return name && family_find(name, NULL, &f) && FAMILY[f].synth.hidden > 0 ? &FAMILY[f] : NULL;
}

/* ================================================================ config.json */

/* A multimodal checkpoint's config.json around the text model's members (text): architectures,
 * model_type, text_config (its own model_type), tie_word_embeddings, dtype, then the row's own
 * top-level members (image token ids, a small vision_config of the real model_type). */
static cJSON *tower_config(const FamilyRow *row, cJSON *text, dt_type dt) {
    cJSON *c = cJSON_CreateObject();
    if (!c) { cJSON_Delete(text); return NULL; }
    cJSON_AddItemToObject(c, "architectures", cJSON_DetachItemFromObjectCaseSensitive(text, "architectures"));
    cJSON_DeleteItemFromObjectCaseSensitive(text, "model_type");
    syn_add_str(c, "model_type", row->model_type);
    syn_add_str(text, "model_type", row->text_config);
    cJSON_AddItemToObject(c, "text_config", text);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", row->synth.tied);
    syn_add_str(c, "torch_dtype", dt == DT_F32 ? "float32" : "bfloat16");
    if (!row->tower_keys || ckpt_json_merge(c, row->tower_keys) == AL_OK) return c;
    cJSON_Delete(c);
    al_err("synth family %s: the recipe's top-level members are not JSON", row->model_type);
    return NULL;
}

/* The keys every family shares, then the row's own members, in file order. */
static cJSON *recipe_config(const FamilyRow *row, dt_type dt) {
    const SynthRecipe *s = &row->synth;
    cJSON *c = cJSON_CreateObject();
    if (!c) return NULL;
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(row->arch));
    syn_add_str(c, "model_type", row->model_type);
    ckpt_json_hf_shape(c, &(CkptHfShape){s->hidden, s->inter, s->heads, s->layers, s->vocab, 512});
    syn_add_num(c, "bos_token_id", 1);
    syn_add_num(c, "eos_token_id", 2);
    syn_add_num(c, "initializer_range", 0.02);
    syn_add_num(c, "attention_dropout", 0.0);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", s->tied);
    cJSON_AddBoolToObject(c, "use_cache", true);
    syn_add_str(c, "torch_dtype", dt == DT_F32 ? "float32" : "bfloat16");
    if (row->keys != KEYS_NEOX) syn_add_num(c, "num_key_value_heads", s->kv_heads);
    if (ckpt_json_merge(c, s->config) == AL_OK) return row->text_config ? tower_config(row, c, dt) : c;
    cJSON_Delete(c);
    al_err("synth family %s: the recipe's config members are not JSON", row->model_type);
    return NULL;
}

/* The description the recipe's config.json gives (what load will read). */
static int recipe_describe(const FamilyRow *row, ModelConfig *cfg) {
    cJSON *c = recipe_config(row, DT_F32);
    char *text = c ? cJSON_PrintUnformatted(c) : NULL;
    int rc = text ? model_config_parse(text, row->model_type, cfg) : AL_ERR;
    free(text);
    cJSON_Delete(c);
    return rc;
}

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

/* The planting schedule's layer of layer L: L itself, or in a hybrid with linear-attention layers
 * (Qwen3-Next: 3 linear, 1 softmax) the n-th softmax-attention layer plants as layer 1 + n % 2
 * (bottleneck, fused-low, ...) and the linear layers plant nothing (-1). */
static int plant_layer(const ModelConfig *c, int L) {
    if (c->lin.layout == LIN_NONE) return L;
    if (cfg_layer_linear(c, L)) return -1;
    int n = 0;
    for (int i = 0; i < L; i++) n += !cfg_layer_linear(c, i);
    return 1 + n % 2;
}

/* QK pairs are planted over the NoPE columns of the layouts that keep them apart from RoPE's. */
static bool plants_qk(const ModelConfig *c) { return c->attn == QKV_HEADS || c->attn == QKV_MLA; }

/* A layer without RoPE in a RoPE model (SmolLM3): its whole QK is planted. */
static bool nope_layer(const ModelConfig *c, int L) { return c->rope != ROPE_NONE && !cfg_layer_rope(c, L); }
static PairSpec fam_qk_nope(int L, int g) {
    (void)L, (void)g;
    return p_bottle(8);
}

bool synth_family_planted(const char *family, bool qk, int layer, int head, double tau, int *ra, int *rb, int *rf) {
    const FamilyRow *row = recipe_row(family);
    ModelConfig c;
    if (!row || recipe_describe(row, &c) != AL_OK || layer < 0 || layer >= c.n_layers || head < 0 || head >= c.n_heads)
        return false;
    bool whole = qk && nope_layer(&c, layer) && c.qk_norm == QKN_NONE;   /* a q/k norm hides W_Q W_Kᵀ (EXAONE 4) */
    if ((layer = plant_layer(&c, layer)) < 0) return false;
    if (qk && c.attn == QKV_DSV4) {             /* K = V: layer 1's V rank 6 is its key's NoPE rank (Q Gaussian) */
        if (layer != 1) return false;
        if (ra) *ra = c.qk_nope_dim;
        if (rb) *rb = 6;
        if (rf) *rf = 6;
        return true;
    }
    if (qk && !plants_qk(&c) && !whole) return false;
    int g = qk && !whole ? head : cfg_kv_group(&c, head);
    PairSpec p = whole ? fam_qk_nope(layer, g) : qk ? fam_qk(layer, head) : fam_vo(layer, g);
    int k = whole ? cfg_d_qk(&c) : qk ? c.qk_nope_dim : c.v_dim;
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
    const ModelConfig *c;
    unsigned long seed;
    dt_type dt;
    SynList *l;
    int L;                  /* layer (-1: outside the layers) */
} Ctx;

/* The full name of role r (expert e) with suffix what ("weight", "bias"). */
static void role_name(const Ctx *c, tensor_role r, int e, const char *what, char *name, size_t n) {
    cfg_role_name(c->c, r, c->L, e, what, name, n);
}

/* Adds m (taken) as role r's weight. */
static int add_mat(const Ctx *c, tensor_role r, Mat *m) {
    char name[192];
    role_name(c, r, -1, "weight", name, sizeof name);
    return synlist_add(c->l, name, 2, m, c->dt);
}

/* Gaussian weight (rows x cols) of role r (expert e), RMS 1/sqrt(cols) (sd when > 0), from the
 * stream of its name. */
static int add_gauss(const Ctx *c, tensor_role r, int e, size_t rows, size_t cols, double sd) {
    char name[192];
    role_name(c, r, e, "weight", name, sizeof name);
    return synlist_add(c->l, name, 2, syn_gauss_named(c->seed, name, rows, cols, sd > 0 ? sd : 1 / sqrt((double)cols)),
                       c->dt);
}

/* Vector center + 0.1 N(0, 1) as role r's `what` (norm weights: center 1, Gemma's 0; biases: 0). */
static int add_vec(const Ctx *c, tensor_role r, const char *what, size_t n, float center, dt_type dt) {
    char name[192];
    role_name(c, r, -1, what, name, sizeof name);
    Mat *m = syn_gauss_named(c->seed, name, 1, n, 0.1);
    if (m)
        for (size_t i = 0; i < n; i++) m->data[i] += center;
    return synlist_add(c->l, name, 1, m, dt);
}

static int add_norm(const Ctx *c, tensor_role r, size_t n) {
    return add_vec(c, r, "weight", n, c->c->norm == NORM_RMS_1P ? 0.0f : 1.0f, c->dt);
}

/* A norm weight and, for LayerNorm, its bias; nothing when the layout has no such norm. */
static int add_norm_pair(const Ctx *c, tensor_role r, size_t n) {
    if (!cfg_role(c->c, r)) return AL_OK;
    int rc = add_norm(c, r, n);
    if (rc == AL_OK && c->c->norm == NORM_LAYER) rc = add_vec(c, r, "bias", n, 0.0f, c->dt);
    return rc;
}

/* Rows [r0, r0 + n) of src copied to rows [d0, ..) of dst (same columns). */
static void copy_rows(Mat *dst, size_t d0, const Mat *src, size_t r0, size_t n) {
    memcpy(dst->data + d0 * dst->cols, src->data + r0 * src->cols, n * src->cols * sizeof(float));
}

/* Plants head h's NoPE QK pair (spec fam_qk) into the NoPE rows of Q and K (RoPE columns first). */
static int plant_nope_qk(const Ctx *c, Mat *q, Mat *k) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, hd = (size_t)cfg_d_qk(m), rot = (size_t)m->qk_rope_dim, np = hd - rot;
    int rc = AL_OK;
    for (int h = 0; rc == AL_OK && h < m->n_heads; h++) {
        Rng rng;
        char stream[96];
        Mat *Lk = NULL, *Rq = NULL;
        PairSpec sp = fam_qk(c->L, h);
        snprintf(stream, sizeof stream, "%s.L%d.h%d.qk", m->model_type, c->L, h);
        syn_rng_init(&rng, c->seed, stream);
        rc = syn_gen_pair(&rng, &sp, D, D, np, 1, 1 / sqrt((double)D), 1 / sqrt((double)D), &Lk, &Rq);
        for (size_t i = 0; rc == AL_OK && i < np; i++)
            for (size_t j = 0; j < D; j++) {
                *mat_at(k, (size_t)h * hd + rot + i, j) = *mat_at(Lk, j, i);
                *mat_at(q, (size_t)h * hd + rot + i, j) = *mat_at(Rq, j, i);
            }
        mat_free(Lk);
        mat_free(Rq);
    }
    return rc;
}

/* Q, K, V as one fused weight: rows [Q heads ; K heads ; V heads] (QKV_CAT) or head by head
 * [q_h ; k_h ; v_h] (QKV_HEADS). Takes q, k, v. */
static Mat *fuse_qkv(const ModelConfig *m, Mat *q, Mat *k, Mat *v) {
    const size_t H = (size_t)m->n_heads, KV = (size_t)m->n_kv_heads, hd = (size_t)m->v_dim;
    Mat *qkv = mat_new(H * hd + 2 * KV * hd, (size_t)m->hidden);
    if (qkv && m->attn == QKV_CAT) {
        copy_rows(qkv, 0, q, 0, H * hd);
        copy_rows(qkv, H * hd, k, 0, KV * hd);
        copy_rows(qkv, H * hd + KV * hd, v, 0, KV * hd);
    } else if (qkv) {
        for (size_t h = 0; h < H; h++) {
            copy_rows(qkv, 3 * h * hd, q, h * hd, hd);
            copy_rows(qkv, 3 * h * hd + hd, k, h * hd, hd);
            copy_rows(qkv, 3 * h * hd + 2 * hd, v, h * hd, hd);
        }
    }
    mat_free(q); mat_free(k); mat_free(v);
    return qkv;
}

/* The q/k norms the description names: per head, or over the whole projection. */
static int add_qk_norms(const Ctx *c) {
    const ModelConfig *m = c->c;
    size_t hd = (size_t)cfg_d_qk(m);
    if (m->qk_norm == QKN_NONE) return AL_OK;
    bool proj = m->qk_norm == QKN_PROJ, own = cfg_kv_source(m, c->L) == c->L;   /* Gemma 4's KV-shared: no k_norm */
    int rc = add_norm(c, ROLE_Q_NORM, proj ? (size_t)m->n_heads * hd : hd);
    return rc == AL_OK && own ? add_norm(c, ROLE_K_NORM, proj ? (size_t)m->n_kv_heads * hd : hd) : rc;
}

/* The stream Q or K is drawn from: the name the split layout gives the role in layer L (the fused
 * layouts draw the same numbers and then lay them out their way). */
static void split_stream(const ModelConfig *m, tensor_role r, int L, char *name, size_t n) {
    char where[96];
    cfg_layer_prefix(m, L, where, sizeof where);
    snprintf(name, n, "%s%s.weight", where, role_in_attn(QKV_SPLIT, r)->name);
}

/* Q (H hd x D) and K (KV hd x D) of a layer without RoPE: KV head g's K with the Q of its query
 * heads planted by fam_qk_nope, as the VO pairs are (K in V's place, Qᵀ in O's). */
static int nope_qk(const Ctx *c, const GqaDims *dims, Mat **q, Mat **k) {
    char kind[64];
    Mat *qt = NULL;
    snprintf(kind, sizeof kind, "%s.nope-qk", c->c->model_type);
    int rc = syn_gqa_vo(c->seed, kind, c->L, dims, fam_qk_nope, k, &qt);
    *q = rc == AL_OK ? mat_transpose(qt) : NULL;
    mat_free(qt);
    if (rc == AL_OK && !*q) { mat_free(*k); *k = NULL; rc = AL_ERR; }
    return rc;
}

/* A gated q_proj (attn_output_gate): per head [query | gate], the gate Gaussian from its own stream.
 * Takes q (H hd x D). */
static Mat *gated_q(const Ctx *c, Mat *q) {
    const size_t D = (size_t)c->c->hidden, H = (size_t)c->c->n_heads, hd = (size_t)cfg_d_qk(c->c);
    char name[192];
    role_name(c, ROLE_Q, -1, "gate", name, sizeof name);
    Mat *g = syn_gauss_named(c->seed, name, H * hd, D, 1 / sqrt((double)D)), *qg = g ? mat_new(2 * H * hd, D) : NULL;
    for (size_t h = 0; qg && h < H; h++) {
        copy_rows(qg, 2 * h * hd, q, h * hd, hd);
        copy_rows(qg, (2 * h + 1) * hd, g, h * hd, hd);
    }
    mat_free(q);
    mat_free(g);
    return qg;
}

/* A Gated DeltaNet layer (linattn.h): projections and out_proj Gaussian, conv1d [C, 1, K] of RMS
 * 1/sqrt(K), A_log and dt_bias 0.1 N(0, 1) (decays exp(-e^A softplus(a + dt)) in (0, 1)), the gated
 * norm's plain weight 1 + 0.1 N(0, 1). */
/* A Mamba-2 layer (Nemotron-H, Granite 4.0-H): in_proj [z | x B C | dt], conv1d [C, 1, K] (+ bias), A_log, D
 * (1 + 0.1 N(0,1)), dt_bias, the gated norm over the heads' values, out_proj. */
static int attn_mamba2(const Ctx *c) {
    const LinearSpec *l = &c->c->lin;
    const size_t D = (size_t)c->c->hidden, H = (size_t)l->v_heads, I = H * (size_t)l->dv;
    const size_t C = I + 2 * (size_t)l->k_heads * (size_t)l->dk;
    char name[192];
    int rc = add_gauss(c, ROLE_LIN_IN, -1, I + C + H, D, 0);
    role_name(c, ROLE_LIN_CONV, -1, "weight", name, sizeof name);
    if (rc == AL_OK)
        rc = synlist_add(c->l, name, 3, syn_gauss_named(c->seed, name, C, (size_t)l->conv, 1 / sqrt((double)l->conv)),
                         c->dt);
    if (rc == AL_OK && l->conv_bias) rc = add_vec(c, ROLE_LIN_CONV, "bias", C, 0.0f, c->dt);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_A_LOG, NULL, H, 0.0f, DT_F32);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_D, NULL, H, 1.0f, DT_F32);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_DT_BIAS, NULL, H, 0.0f, DT_F32);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_NORM, "weight", I, 1.0f, c->dt);
    return rc == AL_OK ? add_gauss(c, ROLE_LIN_OUT, -1, D, I, 0) : rc;
}

static int attn_linear(const Ctx *c) {
    const LinearSpec *l = &c->c->lin;
    if (l->mamba) return attn_mamba2(c);
    const size_t D = (size_t)c->c->hidden, Hv = (size_t)l->v_heads, nv = Hv * (size_t)l->dv;
    const size_t C = 2 * (size_t)l->k_heads * (size_t)l->dk + nv;
    char name[192];
    bool split = cfg_role(c->c, ROLE_LIN_QKV) != NULL;           /* Qwen3.5: in_proj_qkv, _z, _b, _a */
    int rc = split ? add_gauss(c, ROLE_LIN_QKV, -1, C, D, 0) : add_gauss(c, ROLE_LIN_QKVZ, -1, C + nv, D, 0);
    if (rc == AL_OK && split) rc = add_gauss(c, ROLE_LIN_Z, -1, nv, D, 0);
    if (rc == AL_OK && split) rc = add_gauss(c, ROLE_LIN_B, -1, Hv, D, 0);
    if (rc == AL_OK && split) rc = add_gauss(c, ROLE_LIN_A, -1, Hv, D, 0);
    if (rc == AL_OK && !split) rc = add_gauss(c, ROLE_LIN_BA, -1, 2 * Hv, D, 0);
    role_name(c, ROLE_LIN_CONV, -1, "weight", name, sizeof name);
    if (rc == AL_OK)
        rc = synlist_add(c->l, name, 3, syn_gauss_named(c->seed, name, C, (size_t)l->conv, 1 / sqrt((double)l->conv)),
                         c->dt);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_A_LOG, NULL, Hv, 0.0f, DT_F32);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_DT_BIAS, NULL, Hv, 0.0f, c->dt);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_NORM, "weight", (size_t)l->dv, 1.0f, c->dt);
    return rc == AL_OK ? add_gauss(c, ROLE_LIN_OUT, -1, D, nv, 0) : rc;
}

/* A Kimi Delta Attention layer (KimiDeltaAttention): q / k / v, f_a / f_b, g_a / g_b, b and o_proj Gaussian, the
 * three conv1d [H d, 1, K] of RMS 1/sqrt(K), A_log (1, 1, H, 1) and dt_bias (H d) 0.1 N(0, 1), o_norm 1 + 0.1 N(0, 1). */
static int attn_kda(const Ctx *c) {
    const LinearSpec *l = &c->c->lin;
    const size_t D = (size_t)c->c->hidden, H = (size_t)l->v_heads, d = (size_t)l->dv, n = H * d;
    static const tensor_role proj[] = {ROLE_LIN_Q, ROLE_LIN_K, ROLE_LIN_V}, conv[] = {ROLE_LIN_Q_CONV, ROLE_LIN_K_CONV,
                                                                                        ROLE_LIN_V_CONV};
    int rc = AL_OK;
    for (int i = 0; i < 3 && rc == AL_OK; i++) {
        char name[192];
        rc = add_gauss(c, proj[i], -1, n, D, 0);
        role_name(c, conv[i], -1, "weight", name, sizeof name);
        if (rc == AL_OK)
            rc = synlist_add(c->l, name, 3, syn_gauss_named(c->seed, name, n, (size_t)l->conv,
                                                            1 / sqrt((double)l->conv)), c->dt);
    }
    char an[192];
    role_name(c, ROLE_LIN_A_LOG, -1, NULL, an, sizeof an);
    if (rc == AL_OK) rc = synlist_add(c->l, an, 4, syn_gauss_named(c->seed, an, 1, H, 0.1), DT_F32);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_LIN_F_A, -1, d, D, 0);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_LIN_F_B, -1, n, d, 0);
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_DT_BIAS, NULL, n, 0.0f, DT_F32);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_LIN_B, -1, H, D, 0);
    if (rc == AL_OK && !l->full_rank_gate) rc = add_gauss(c, ROLE_LIN_G_A, -1, d, D, 0);
    if (rc == AL_OK && !l->full_rank_gate) rc = add_gauss(c, ROLE_LIN_G_B, -1, n, d, 0);
    if (rc == AL_OK && l->full_rank_gate) rc = add_gauss(c, ROLE_ATTN_GATE, -1, n, D, 0);   /* Kimi-K3: one g_proj */
    if (rc == AL_OK) rc = add_vec(c, ROLE_LIN_NORM, "weight", d, 1.0f, c->dt);
    return rc == AL_OK ? add_gauss(c, ROLE_LIN_OUT, -1, D, n, 0) : rc;
}

/* Gemma 4: a KV-shared layer has no K or V of its own, a k_eq_v layer no V (drawn, then dropped). */
static void drop_unowned(const ModelConfig *m, int L, Mat **k, Mat **v) {
    bool own_k = cfg_kv_source(m, L) == L, own_v = own_k && !cfg_layer_v_is_k(m, L);
    if (!own_k) { mat_free(*k); *k = NULL; }
    if (!own_v) { mat_free(*v); *v = NULL; }
}

/* GQA / MHA attention: Q, K Gaussian (NoPE QK planted where plants_qk, the whole QK on a layer
 * without RoPE), V / O planted (fam_vo), laid out as the description's layout stores them, with
 * its biases and q/k norms. */
static int attn_gqa(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, H = (size_t)m->n_heads, KV = (size_t)m->n_kv_heads, hd = (size_t)m->v_dim;
    char name[192];
    Mat *vp = NULL, *op = NULL;
    const GqaDims dims = {D, H, KV, hd};
    char kind[64];
    if (m->lin.layout != LIN_NONE) snprintf(kind, sizeof kind, "%s.L%d", m->model_type, c->L);   /* own streams */
    else snprintf(kind, sizeof kind, "%s", m->model_type);
    int rc = syn_gqa_vo(c->seed, kind, plant_layer(m, c->L), &dims, fam_vo, &vp, &op);
    Mat *q = NULL, *k = NULL;
    if (rc == AL_OK && nope_layer(m, c->L)) {
        nope_qk(c, &dims, &q, &k);
    } else if (rc == AL_OK) {
        split_stream(m, ROLE_Q, c->L, name, sizeof name);
        q = syn_gauss_named(c->seed, name, H * hd, D, 1 / sqrt((double)D));
        split_stream(m, ROLE_K, c->L, name, sizeof name);
        k = q ? syn_gauss_named(c->seed, name, KV * hd, D, 1 / sqrt((double)D)) : NULL;
    }
    if (k && plants_qk(m) && plant_nope_qk(c, q, k) != AL_OK) { mat_free(k); k = NULL; }
    if (!k) { mat_free(q); mat_free(vp); mat_free(op); return AL_ERR; }
    if (k && m->attn_gate && !(q = gated_q(c, q))) { mat_free(k); mat_free(vp); mat_free(op); return AL_ERR; }
    drop_unowned(m, c->L, &k, &vp);
    if (cfg_role(m, ROLE_Q)) {                            /* split q / k / v_proj (self_attn. or mixer.) */
        rc = add_mat(c, ROLE_Q, q);
        if (rc == AL_OK && k) rc = add_mat(c, ROLE_K, k); else mat_free(k);
        if (rc == AL_OK && vp) rc = add_mat(c, ROLE_V, vp); else mat_free(vp);
        if (rc == AL_OK && m->qkv_bias) rc = add_vec(c, ROLE_Q, "bias", H * hd, 0.0f, c->dt);   /* attention_bias */
        if (rc == AL_OK && m->qkv_bias) rc = add_vec(c, ROLE_K, "bias", KV * hd, 0.0f, c->dt);
        if (rc == AL_OK && m->qkv_bias) rc = add_vec(c, ROLE_V, "bias", KV * hd, 0.0f, c->dt);
    } else {
        rc = add_mat(c, ROLE_QKV, fuse_qkv(m, q, k, vp));
        if (rc == AL_OK && m->qkv_bias) rc = add_vec(c, ROLE_QKV, "bias", 3 * H * hd, 0.0f, c->dt);
    }
    if (rc == AL_OK) rc = add_mat(c, ROLE_O, op); else mat_free(op);
    if (rc == AL_OK && m->o_bias) rc = add_vec(c, ROLE_O, "bias", D, 0.0f, c->dt);
    if (rc == AL_OK && m->attn_sinks) rc = add_vec(c, ROLE_SINKS, NULL, H, 0.0f, c->dt);   /* gpt-oss */
    return rc == AL_OK ? add_qk_norms(c) : rc;
}

/* The lightning indexer of DeepSeek-V3.2 / GLM-5: wq_b (index_n_heads x index_head_dim, q_lora_rank),
 * wk (index_head_dim, hidden), k_norm (LayerNorm weight and bias), weights_proj (index_n_heads, hidden); on the
 * layers that run it (GLM-5.2's "shared" layers carry none, as its release). */
static int attn_indexer(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, ID = (size_t)m->index_head_dim, IH = (size_t)m->index_heads;
    int rc = add_gauss(c, ROLE_IDX_Q_B, -1, IH * ID, (size_t)m->q_lora_rank, 0);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_IDX_K, -1, ID, D, 0);
    if (rc == AL_OK) rc = add_vec(c, ROLE_IDX_K_NORM, "weight", ID, 1.0f, c->dt);
    if (rc == AL_OK) rc = add_vec(c, ROLE_IDX_K_NORM, "bias", ID, 0.0f, c->dt);
    return rc == AL_OK ? add_gauss(c, ROLE_IDX_W, -1, IH, D, 0) : rc;
}

/* MLA attention with planted VO and NoPE QK pairs. */
static int attn_mla(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, QL = (size_t)m->q_lora_rank, KL = (size_t)m->kv_lora_rank;
    /* without a query latent (q_lora_rank null: Kimi-Linear) q_proj is the planted map from the hidden state */
    const MlaDims dims = {D, (size_t)m->n_heads, QL ? QL : D, KL, (size_t)m->qk_nope_dim, (size_t)m->qk_rope_dim,
                          (size_t)m->v_dim};
    Mat *qb, *kvb, *op;
    int rc = syn_mla_heads(c->seed, m->model_type, plant_layer(m, c->L), &dims, fam_vo, fam_qk, &qb, &kvb, &op);
    if (rc != AL_OK) return rc;
    if (QL) rc = add_gauss(c, ROLE_Q_A, -1, QL, D, 0);
    if (rc == AL_OK && QL) rc = add_norm(c, ROLE_Q_A_NORM, QL);
    if (rc == AL_OK) rc = add_mat(c, QL ? ROLE_Q_B : ROLE_Q, qb); else mat_free(qb);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_KV_A, -1, KL + (size_t)m->qk_rope_dim, D, 0);
    if (rc == AL_OK) rc = add_norm(c, ROLE_KV_A_NORM, KL);
    if (rc == AL_OK) rc = add_mat(c, ROLE_KV_B, kvb); else mat_free(kvb);
    if (rc == AL_OK) rc = add_mat(c, ROLE_O, op); else mat_free(op);
    if (rc == AL_OK && m->lin.mla_gate)                  /* Kimi-K3: the output gate (H v, D), not in the planted maps */
        rc = add_gauss(c, ROLE_ATTN_GATE, -1, (size_t)m->n_heads * (size_t)m->v_dim, D, 0);
    return rc == AL_OK && cfg_layer_indexer(m, c->L) ? attn_indexer(c) : rc;
}

/* Columns of A (rows x n, n <= rows) made orthonormal in place (modified Gram-Schmidt, twice, in double). */
static int orthonormal_cols(double *A, size_t rows, size_t n) {
    for (size_t j = 0; j < n; j++)
        for (int pass = 0; pass < 2; pass++) {
            for (size_t k = 0; k < j; k++) {
                double d = 0;
                for (size_t i = 0; i < rows; i++) d += A[i * n + k] * A[i * n + j];
                for (size_t i = 0; i < rows; i++) A[i * n + j] -= d * A[i * n + k];
            }
            double nn = 0;
            for (size_t i = 0; i < rows; i++) nn += A[i * n + j] * A[i * n + j];
            if (!(nn > 1e-24)) return al_err("synth deepseek_v4: a group's output heads are linearly dependent");
            for (size_t i = 0; i < rows; i++) A[i * n + j] /= sqrt(nn);
        }
    return AL_OK;
}

/* DeepSeek-V4's grouped output from planted per-head O (o_proj layout, D x H hd): for group g, Q = an orthonormal
 * basis (D x R, R = o_lora = per hd) of its heads' output rows and T = I + a strictly upper triangular Gaussian part
 * (R x R, so that wo_b is not orthonormal and its columns matter to every spectrum); wo_b's columns [g R, +R) = Q T
 * and wo_a's block rows [g R, +R) x cols [j hd, +hd) = T^-1 Qᵀ o_proj[:, h hd..], so that head h's W_O, (wo_a
 * block)ᵀ (wo_b block)ᵀ, is the planted one. */
static int dsv4_grouped_o(const Ctx *c, const Mat *op, Mat **woa, Mat **wob) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, hd = (size_t)m->v_dim, G = (size_t)m->o_groups, R = (size_t)m->o_lora_rank;
    const size_t per = (size_t)m->n_heads / G, wa = per * hd;
    if (R != wa) return al_err("synth deepseek_v4: the recipe's o_lora_rank must be heads per group x head_dim");
    char name[192];
    role_name(c, ROLE_O_A, -1, "mix", name, sizeof name);
    Mat *U = syn_gauss_named(c->seed, name, G * R, R, 0.5 / sqrt((double)R));
    *woa = mat_new(G * R, wa);
    *wob = mat_new(D, G * R);
    double *Q = al_malloc3(D, R, sizeof(double), "a group's basis"), *A = al_malloc3(R, wa, sizeof(double), "a block");
    int rc = U && *woa && *wob && Q && A ? AL_OK : AL_ERR;
    for (size_t g = 0; rc == AL_OK && g < G; g++) {
        const float *T = U->data + g * R * R;                /* T[r][k] = 1 (r = k), U (k > r), 0 (k < r) */
        for (size_t i = 0; i < D; i++)
            for (size_t k = 0; k < R; k++) Q[i * R + k] = op->data[i * op->cols + g * R + k];
        if ((rc = orthonormal_cols(Q, D, R)) != AL_OK) break;
        for (size_t i = 0; i < D; i++)
            for (size_t k = 0; k < R; k++) {
                double v = Q[i * R + k];
                for (size_t r = 0; r < k; r++) v += Q[i * R + r] * T[r * R + k];
                (*wob)->data[i * G * R + g * R + k] = (float)v;
            }
        for (size_t r = R; r-- > 0;)                        /* T A = Qᵀ op_g, back substitution */
            for (size_t col = 0; col < wa; col++) {
                double v = 0;
                for (size_t i = 0; i < D; i++) v += Q[i * R + r] * op->data[i * op->cols + g * R + col];
                for (size_t k = r + 1; k < R; k++) v -= T[r * R + k] * A[k * wa + col];
                A[r * wa + col] = v;
                (*woa)->data[(g * R + r) * wa + col] = (float)v;
            }
    }
    free(Q);
    free(A);
    mat_free(U);
    if (rc != AL_OK) { mat_free(*woa); mat_free(*wob); *woa = *wob = NULL; }
    return rc;
}

/* DeepSeek-V4's wq_b (H hd x q_lora): each head's NoPE rows orthonormal (flat: every query NoPE dim at full rank,
 * the QK spectrum then the key's), its RoPE rows Gaussian; NULL on failure. */
static Mat *dsv4_q(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t H = (size_t)m->n_heads, hd = (size_t)cfg_d_qk(m), np = (size_t)m->qk_nope_dim, QL = (size_t)m->q_lora_rank;
    char name[192];
    role_name(c, ROLE_Q_B, -1, "weight", name, sizeof name);
    Mat *q = syn_gauss_named(c->seed, name, H * hd, QL, 1 / sqrt((double)QL));
    double *A = q && np <= QL ? al_malloc3(QL, np ? np : 1, sizeof(double), "a head's query") : NULL;
    for (size_t h = 0; A && h < H; h++) {
        for (size_t i = 0; i < QL; i++)
            for (size_t k = 0; k < np; k++) A[i * np + k] = q->data[(h * hd + k) * QL + i];
        if (orthonormal_cols(A, QL, np) != AL_OK) { free(A); A = NULL; break; }
        for (size_t i = 0; i < QL; i++)
            for (size_t k = 0; k < np; k++) q->data[(h * hd + k) * QL + i] = (float)A[i * np + k];
    }
    if (!A) { mat_free(q); return NULL; }
    free(A);
    return q;
}

/* DeepSeek-V4's compress ratio of layer L from the recipe (0: window only; 4: CSA, with the indexer). */
static int dsv4_ratio(const ModelConfig *m, int L) {
    cJSON *j = recipe_config(cfg_row(m), DT_F32);
    Dsv4Spec s;
    int r = j && dsv4_parse(j, "recipe", &s) == AL_OK && L < s.n_ratios ? s.ratio[L] : 0;
    cJSON_Delete(j);
    return r;
}

/* DeepSeek-V4's attention (model.c's block_dsv4): the one KV head planted as a GQA layer's V with one KV head (fam_vo;
 * it is also the key, so its NoPE columns carry the QK structure: layer 1's rank 6), wkv = that V's rows over kv_norm's
 * weight so that the view wkvᵀ diag(w) is the planted one, the per-head O planted and factored through the groups
 * (dsv4_grouped_o), wq_a / wq_b Gaussian; attn_sink, and on compressed layers compressor.wkv (on CSA layers the
 * indexer's wq_b and weights_proj), hc_attn_fn, Gaussian: present for `info`, read by no analysis. */
static int attn_dsv4(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, H = (size_t)m->n_heads, hd = (size_t)m->v_dim, QL = (size_t)m->q_lora_rank;
    const GqaDims dims = {D, H, 1, hd};
    Mat *vp = NULL, *op = NULL, *woa = NULL, *wob = NULL;
    int rc = syn_gqa_vo(c->seed, m->model_type, plant_layer(m, c->L), &dims, fam_vo, &vp, &op);
    if (rc == AL_OK) rc = dsv4_grouped_o(c, op, &woa, &wob);
    char name[192];
    role_name(c, ROLE_KV_A_NORM, -1, "weight", name, sizeof name);
    Mat *w = rc == AL_OK ? syn_gauss_named(c->seed, name, 1, hd, 0.1) : NULL;
    if (!w) rc = AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < hd; i++) {
        w->data[i] += 1.0f;
        for (size_t k = 0; k < D; k++) vp->data[i * D + k] /= w->data[i];
    }
    mat_free(op);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_Q_A, -1, QL, D, 0);
    if (rc == AL_OK) rc = add_norm(c, ROLE_Q_A_NORM, QL);
    if (rc == AL_OK) rc = add_mat(c, ROLE_Q_B, dsv4_q(c));
    if (rc == AL_OK) { rc = add_mat(c, ROLE_KV_A, vp); vp = NULL; }
    if (rc == AL_OK) { rc = synlist_add(c->l, name, 1, w, c->dt); w = NULL; }
    if (rc == AL_OK) { rc = add_mat(c, ROLE_O_A, woa); woa = NULL; }
    if (rc == AL_OK) { rc = add_mat(c, ROLE_O, wob); wob = NULL; }
    mat_free(vp); mat_free(w); mat_free(woa); mat_free(wob);
    if (rc == AL_OK) rc = add_vec(c, ROLE_SINKS, NULL, H, 0.0f, DT_F32);
    int ratio = rc == AL_OK ? dsv4_ratio(m, c->L) : 0;
    if (rc == AL_OK && ratio) rc = add_gauss(c, ROLE_CMP_WKV, -1, hd, D, 0);
    if (rc == AL_OK && ratio == 4)
        rc = add_gauss(c, ROLE_IDX_Q_B, -1, (size_t)(m->index_heads * m->index_head_dim), QL, 0);
    if (rc == AL_OK && ratio == 4) rc = add_gauss(c, ROLE_IDX_W, -1, (size_t)m->index_heads, D, 0);
    const size_t mult = 4;                                    /* the recipe's hc_mult */
    role_name(c, ROLE_HC_ATTN_FN, -1, NULL, name, sizeof name);
    if (rc == AL_OK)
        rc = synlist_add(c->l, name, 2, syn_gauss_named(c->seed, name, (2 + mult) * mult, mult * D,
                                                        1 / sqrt((double)(mult * D))), DT_F32);
    return rc;
}

/* A gated MLP of width F by the roles gate / up / down (expert e, or -1). */
static int mlp_gated(const Ctx *c, const tensor_role r[3], int e, size_t F) {
    const size_t D = (size_t)c->c->hidden;
    int rc = cfg_role(c->c, r[0]) ? add_gauss(c, r[0], e, F, D, 0) : AL_OK;   /* Nemotron-H's experts: no gate */
    if (rc == AL_OK) rc = add_gauss(c, r[1], e, F, D, 0);
    return rc == AL_OK ? add_gauss(c, r[2], e, D, F, 0) : rc;
}

/* Every expert in one tensor (gpt-oss): gate_up_proj (E, D, 2F) and down_proj (E, F, D), used as
 * x @ W, with their biases (E, 2F), (E, D), and the router's bias. */
static int experts_fused(const Ctx *c, size_t E, size_t F) {
    const size_t D = (size_t)c->c->hidden;
    char n[192];
    int rc = add_vec(c, ROLE_ROUTER, "bias", E, 0.0f, c->dt);
    role_name(c, ROLE_EXPS_GATE_UP, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = synlist_add3(c->l, n, E, syn_gauss_named(c->seed, n, E * D, 2 * F, 1 / sqrt((double)D)), c->dt);
    role_name(c, ROLE_EXPS_GATE_UP_BIAS, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = synlist_add(c->l, n, 2, syn_gauss_named(c->seed, n, E, 2 * F, 0.1), c->dt);
    role_name(c, ROLE_EXPS_DOWN, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = synlist_add3(c->l, n, E, syn_gauss_named(c->seed, n, E * F, D, 1 / sqrt((double)F)), c->dt);
    role_name(c, ROLE_EXPS_DOWN_BIAS, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = synlist_add(c->l, n, 2, syn_gauss_named(c->seed, n, E, D, 0.1), c->dt);
    return rc;
}

/* Every expert in one tensor, no biases (Qwen3-VL MoE): gate_up_proj (E, D, 2F) with [gate | up] column halves
 * and down_proj (E, F, D), used as x @ W. */
static int experts_xw(const Ctx *c, size_t E, size_t F) {
    const size_t D = (size_t)c->c->hidden;
    char n[192];
    role_name(c, ROLE_EXPS_GATE_UP, -1, NULL, n, sizeof n);
    int rc = synlist_add3(c->l, n, E, syn_gauss_named(c->seed, n, E * D, 2 * F, 1 / sqrt((double)D)), c->dt);
    role_name(c, ROLE_EXPS_DOWN, -1, NULL, n, sizeof n);
    if (rc == AL_OK) rc = synlist_add3(c->l, n, E, syn_gauss_named(c->seed, n, E * F, D, 1 / sqrt((double)F)), c->dt);
    return rc;
}

/* Adds m (taken) as role r's 3-D tensor [lead, rows / lead, cols] (no ".weight": fused experts). */
static int add_fused(const Ctx *c, tensor_role r, size_t lead, Mat *m) {
    char name[192];
    role_name(c, r, -1, NULL, name, sizeof name);
    int rc = synlist_add(c->l, name, 3, m, c->dt);
    if (rc == AL_OK) c->l->t[c->l->n - 1].lead = lead;
    return rc;
}

/* E experts of width F fused (Qwen3.5 MoE): gate_up_proj [E, 2F, D] with rows [gate ; up] per expert,
 * down_proj [E, D, F]; each block Gaussian from its own stream ("<name>.<e>"). */
static int fused_experts(const Ctx *c, size_t E, size_t F) {
    const size_t D = (size_t)c->c->hidden;
    char gu[192], dn[192], s[220];
    role_name(c, ROLE_EXPS_GATE_UP, -1, NULL, gu, sizeof gu);
    role_name(c, ROLE_EXPS_DOWN, -1, NULL, dn, sizeof dn);
    Mat *a = mat_new(E * 2 * F, D), *b = mat_new(E * D, F);
    for (size_t e = 0; a && b && e < E; e++) {
        snprintf(s, sizeof s, "%s.%zu", gu, e);
        Mat *g = syn_gauss_named(c->seed, s, 2 * F, D, 1 / sqrt((double)D));
        snprintf(s, sizeof s, "%s.%zu", dn, e);
        Mat *d = g ? syn_gauss_named(c->seed, s, D, F, 1 / sqrt((double)F)) : NULL;
        if (d) {
            copy_rows(a, e * 2 * F, g, 0, 2 * F);
            copy_rows(b, e * D, d, 0, D);
        }
        mat_free(g);
        if (!d) { mat_free(a); a = NULL; }
        mat_free(d);
    }
    if (!a || !b) { mat_free(a); mat_free(b); return AL_ERR; }
    int rc = add_fused(c, ROLE_EXPS_GATE_UP, E, a);
    return rc == AL_OK ? add_fused(c, ROLE_EXPS_DOWN, E, b) : (mat_free(b), rc);
}

/* The router and experts of a mixture-of-experts layer, as the description's MoE layout names them. */
static int mlp_moe(const Ctx *c) {
    const ModelConfig *m = c->c;
    const MoeSpec *s = &m->moe;
    const size_t D = (size_t)m->hidden, E = (size_t)s->n_experts;
    const size_t F = (size_t)(s->expert_ffn > 0 ? s->expert_ffn : m->intermediate);
    static const tensor_role routed[3] = {ROLE_EXP_GATE, ROLE_EXP_UP, ROLE_EXP_DOWN};
    static const tensor_role shared[3] = {ROLE_SHEXP_GATE, ROLE_SHEXP_UP, ROLE_SHEXP_DOWN};
    int rc = add_gauss(c, ROLE_ROUTER, -1, E, D, 0);
    if (rc == AL_OK && cfg_role(m, ROLE_ROUTER_BIAS)) rc = add_vec(c, ROLE_ROUTER_BIAS, NULL, E, 0.5f, DT_F32);
    if (rc == AL_OK && m->moe.layout == MOE_GPT_OSS) return experts_fused(c, E, F);
    bool xw = m->moe.layout == MOE_QWEN3_VL || m->moe.layout == MOE_LLAMA4;   /* (E, D, 2F) as x @ W */
    if (rc == AL_OK && xw) rc = experts_xw(c, E, F);
    if (rc == AL_OK && !xw && cfg_role(m, ROLE_EXPS_GATE_UP)) rc = fused_experts(c, E, F);
    for (size_t e = 0; rc == AL_OK && !cfg_role(m, ROLE_EXPS_GATE_UP) && e < E; e++)
        rc = mlp_gated(c, routed, (int)e, F);
    bool scaled = cfg_role(m, ROLE_SHEXP_SCALE) != NULL;    /* Qwen3-Next: its own width, a sigmoid gate */
    size_t FS = s->shared_ffn > 0 ? (size_t)s->shared_ffn : F * (size_t)s->n_shared;
    if (rc == AL_OK && s->n_shared > 0 && cfg_role(m, ROLE_SHEXP_DOWN)) rc = mlp_gated(c, shared, -1, FS);
    if (rc == AL_OK && s->n_shared > 0 && scaled) rc = add_gauss(c, ROLE_SHEXP_SCALE, -1, 1, D, 0);
    return rc;
}

/* The MLP of layer c->L. */
static int fam_mlp(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, F = (size_t)m->intermediate * (m->double_wide_mlp && cfg_kv_source(m, c->L) != c->L ? 2 : 1);
    static const tensor_role dense[3] = {ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_DOWN};
    if (!cfg_layer_mlp(m, c->L)) return AL_OK;              /* Nemotron-H's mixer blocks */
    if (cfg_moe_layer(m, c->L)) {
        int rc = mlp_moe(c);
        if (rc != AL_OK || m->moe.layout != MOE_GRANITE) return rc;   /* Granite: the shared MLP beside the experts */
    }
    if (cfg_role(m, ROLE_FFN_GATE)) return mlp_gated(c, dense, -1, F);      /* Llama's, Llama 4's feed_forward */
    int rc = cfg_role(m, ROLE_FFN_GATE_UP) ? add_gauss(c, ROLE_FFN_GATE_UP, -1, 2 * F, D, 0)    /* rows [gate ; up] */
                                 : add_gauss(c, ROLE_FFN_UP, -1, F, D, 0);
    if (rc == AL_OK && m->mlp_bias) rc = add_vec(c, ROLE_FFN_UP, "bias", F, 0.0f, c->dt);
    if (rc == AL_OK) rc = add_gauss(c, ROLE_FFN_DOWN, -1, D, F, 0);
    return rc == AL_OK && m->mlp_bias ? add_vec(c, ROLE_FFN_DOWN, "bias", D, 0.0f, c->dt) : rc;
}

static int moe_block(const Ctx *c);

/* Layer c->L: the norms its layout names around attention and the MLP. */
static int fam_layer(const Ctx *c) {
    const size_t D = (size_t)c->c->hidden;
    int rc = add_norm_pair(c, ROLE_NORM_ATTN_IN, D);
    if (rc == AL_OK && c->c->lin.layer[c->L] != 2)         /* Nemotron-H's MLP blocks have no mixer */
        rc = !cfg_layer_linear(c->c, c->L) ? (c->c->attn == QKV_MLA ? attn_mla(c) : c->c->attn == QKV_DSV4 ? attn_dsv4(c)
                                                                                                      : attn_gqa(c))
             : c->c->lin.layout == LIN_KDA ? attn_kda(c) : attn_linear(c);
    if (rc == AL_OK) rc = add_norm_pair(c, ROLE_NORM_ATTN_OUT, D);
    if (rc == AL_OK) rc = add_norm_pair(c, ROLE_NORM_FFN_IN, D);
    if (rc == AL_OK) rc = fam_mlp(c);
    if (rc == AL_OK) rc = add_norm_pair(c, ROLE_NORM_FFN_OUT, D);
    if (rc == AL_OK && cfg_role(c->c, ROLE_LAYER_SCALAR))      /* Gemma 4: a buffer of 1 value, no ".weight" */
        rc = add_vec(c, ROLE_LAYER_SCALAR, NULL, 1, 0.7f, c->dt);
    size_t P = (size_t)c->c->ple_dim;                         /* Gemma 4's per-layer input */
    if (rc == AL_OK && P) rc = add_gauss(c, ROLE_PLE_GATE, -1, P, D, 0);
    if (rc == AL_OK && P) rc = add_gauss(c, ROLE_PLE_PROJ, -1, D, P, 0);
    if (rc == AL_OK && P) rc = add_norm(c, ROLE_PLE_NORM, D);
    if (rc == AL_OK && c->c->moe_block_experts) rc = moe_block(c);
    return rc;
}

/* Gemma 4's MoE block (enable_moe_block): router.proj (E, D) of RMS 1, router.scale and router.per_expert_scale (around 1), experts
 * gate_up_proj [E, 2I, D] and down_proj [E, D, I] (RMS 1/sqrt(fan-in)), and its three norms. */
static int moe_block(const Ctx *c) {
    const ModelConfig *m = c->c;
    const size_t D = (size_t)m->hidden, E = (size_t)m->moe_block_experts, NI = (size_t)m->moe_block_ffn;
    char name[192];
    int rc = add_gauss(c, ROLE_G4_ROUTER, -1, E, D, 1.0);   /* logits of RMS 1 on the normed input: no near-ties */
    if (rc == AL_OK) rc = add_vec(c, ROLE_G4_ROUTER_SCALE, NULL, D, 1.0f, c->dt);
    if (rc == AL_OK) rc = add_vec(c, ROLE_G4_EXPERT_SCALE, NULL, E, 1.0f, c->dt);
    role_name(c, ROLE_G4_EXPS_GATE_UP, -1, NULL, name, sizeof name);
    if (rc == AL_OK) rc = add_fused(c, ROLE_G4_EXPS_GATE_UP, E, syn_gauss_named(c->seed, name, E * 2 * NI, D, 1 / sqrt((double)D)));
    role_name(c, ROLE_G4_EXPS_DOWN, -1, NULL, name, sizeof name);
    if (rc == AL_OK) rc = add_fused(c, ROLE_G4_EXPS_DOWN, E, syn_gauss_named(c->seed, name, E * D, NI, 1 / sqrt((double)NI)));
    static const tensor_role nr[3] = {ROLE_NORM_FFN_OUT1, ROLE_NORM_FFN_OUT2, ROLE_NORM_FFN_IN2};
    for (int i = 0; rc == AL_OK && i < 3; i++) rc = add_norm(c, nr[i], D);
    return rc;
}

/* Every tensor of the description in file order. */
static int fam_tensors(SynList *l, const ModelConfig *m, dt_type dt, unsigned long seed) {
    Ctx c = {m, seed, dt, l, -1};
    const size_t V = (size_t)m->vocab, D = (size_t)m->hidden;
    /* tied embeddings are also the output layer: RMS 1/sqrt(hidden) keeps the logits O(1) */
    int rc = add_gauss(&c, ROLE_EMBED, -1, V, D, m->tie_embeddings ? 1 / sqrt((double)D) : 1.0);
    ModelConfig full;                                   /* Gemma 4's full layers: their own head dims */
    cfg_full_view(m, &full);
    size_t LP = (size_t)m->ple_dim * (size_t)m->n_layers;  /* Gemma 4's per-layer embeddings (RMS 1 after x sqrt(P)) */
    if (rc == AL_OK && LP) rc = add_gauss(&c, ROLE_PLE_EMBED, -1, (size_t)m->ple_vocab, LP, 1 / sqrt((double)m->ple_dim));
    if (rc == AL_OK && LP) rc = add_gauss(&c, ROLE_PLE_MODEL_PROJ, -1, LP, D, 0);
    if (rc == AL_OK && LP) rc = add_norm(&c, ROLE_PLE_MODEL_NORM, (size_t)m->ple_dim);
    for (int L = 0; rc == AL_OK && L < m->n_layers; L++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        c.L = L;
        c.c = cfg_layer_full_type(m, L) ? &full : m;
        rc = fam_layer(&c);
    }
    c.L = -1;
    c.c = m;
    if (rc == AL_OK) rc = add_norm_pair(&c, ROLE_FINAL_NORM, D);
    if (rc == AL_OK && !m->tie_embeddings) rc = add_gauss(&c, ROLE_LM_HEAD, -1, V, D, 0);
    for (int i = 0; i < 2 && rc == AL_OK && cfg_row(m)->vision[i]; i++)      /* a vision tower load must ignore */
        rc = synlist_add(l, cfg_row(m)->vision[i], 2, syn_gauss_named(seed, cfg_row(m)->vision[i], 16, 16, 1), dt);
    return rc;
}

/* ================================================================ public */

int synth_family_write(const char *family, dt_type dtype, unsigned long seed, const char *dir) {
    const FamilyRow *row = recipe_row(family);
    if (!row) {
        char list[1024] = "";
        for (int i = 0; synth_family_names[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", synth_family_names[i]);
        return al_err("synth family: unknown family '%s'; known: %s", family ? family : "", list);
    }
    if (dtype != DT_F32 && dtype != DT_BF16)
        return al_err("synth family %s: dtype %s is not offered; use f32 or bf16", family, dt_name(dtype));
    ModelConfig m;
    SynList l = {0};
    int rc = recipe_describe(row, &m);
    if (rc == AL_OK) rc = fam_tensors(&l, &m, dtype, seed);
    cJSON *cfg = rc == AL_OK ? recipe_config(row, dtype) : NULL;
    if (rc == AL_OK && !cfg) rc = AL_ERR;
    if (rc == AL_OK) {
        char kind[64];
        snprintf(kind, sizeof kind, "family-%s", family);
        syn_add_provenance(cfg, kind, seed, dtype);
        rc = syn_write_model(&l, cfg, dir, 1);
    }
    synlist_free(&l);
    if (rc == AL_ERR) al_err_ctx("synth family %s", family);
    return rc;
}
