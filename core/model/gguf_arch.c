/* gguf_arch.c -- the family table (tensor maps, metadata keys, config.json readers) and reading a
 * GGUF back as an HF-layout store. */
#define _GNU_SOURCE
#include "gguf_arch.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "al.h"

/* ================================================================ the table */

/* llama.cpp's name of each role (LLM_TENSOR_NAMES in llama-arch.cpp, without "blk.%d." and the
 * ".weight" / ".bias" suffix). NULL: no GGUF name. */
static const char *const GG_NAMES[ROLE_COUNT] = {
    [ROLE_Q] = "attn_q", [ROLE_K] = "attn_k", [ROLE_V] = "attn_v", [ROLE_O] = "attn_output",
    [ROLE_QKV] = "attn_qkv", [ROLE_Q_A] = "attn_q_a", [ROLE_Q_A_NORM] = "attn_q_a_norm", [ROLE_Q_B] = "attn_q_b",
    [ROLE_KV_A] = "attn_kv_a_mqa", [ROLE_KV_A_NORM] = "attn_kv_a_norm", [ROLE_KV_B] = "attn_kv_b",
    [ROLE_Q_NORM] = "attn_q_norm", [ROLE_K_NORM] = "attn_k_norm", [ROLE_SINKS] = "attn_sinks",
    [ROLE_ATTN_GATE] = "attn_gate", [ROLE_NORM_ATTN_IN] = "attn_norm", [ROLE_NORM_ATTN_OUT] = "post_attention_norm",
    [ROLE_NORM_FFN_IN] = "ffn_norm", [ROLE_NORM_FFN_OUT] = "post_ffw_norm", [ROLE_FFN_GATE] = "ffn_gate",
    [ROLE_FFN_UP] = "ffn_up", [ROLE_FFN_GATE_UP] = "ffn_up", [ROLE_FFN_DOWN] = "ffn_down",
    [ROLE_ROUTER] = "ffn_gate_inp", [ROLE_ROUTER_BIAS] = "exp_probs_b", [ROLE_EXP_GATE] = "ffn_gate_exps",
    [ROLE_EXP_UP] = "ffn_up_exps", [ROLE_EXP_DOWN] = "ffn_down_exps", [ROLE_SHEXP_GATE] = "ffn_gate_shexp",
    [ROLE_SHEXP_UP] = "ffn_up_shexp", [ROLE_SHEXP_DOWN] = "ffn_down_shexp", [ROLE_EMBED] = "token_embd",
    [ROLE_POS_EMBED] = "position_embd", [ROLE_FINAL_NORM] = "output_norm", [ROLE_LM_HEAD] = "output",
};

/* Entries: role, suffix, transform, optional (a NULL suffix ends a list). */
#define W(r, xf) {r, "weight", xf, false, NULL}
#define B(r, xf) {r, "bias", xf, false, NULL}
#define W_OPT(r, xf) {r, "weight", xf, true, NULL}
#define B_OPT(r, xf) {r, "bias", xf, true, NULL}

#define LLAMA_GLOBALS W(ROLE_EMBED, XF_COPY), W(ROLE_FINAL_NORM, XF_COPY), W_OPT(ROLE_LM_HEAD, XF_COPY)
#define LLAMA_MLP                                                                                     \
    W(ROLE_NORM_ATTN_IN, XF_COPY), W(ROLE_NORM_FFN_IN, XF_COPY), W(ROLE_FFN_GATE, XF_COPY),           \
    W(ROLE_FFN_UP, XF_COPY), W(ROLE_FFN_DOWN, XF_COPY)

static const GgufMap LLAMA_GLOB[] = {LLAMA_GLOBALS, {0}};
static const GgufMap LLAMA_LAYER[] = {
    LLAMA_MLP,
    W(ROLE_Q, XF_PERM_Q), W(ROLE_K, XF_PERM_K), W(ROLE_V, XF_COPY), W(ROLE_O, XF_COPY),
    B_OPT(ROLE_Q, XF_PERM_Q), B_OPT(ROLE_K, XF_PERM_K), B_OPT(ROLE_V, XF_COPY), B_OPT(ROLE_O, XF_COPY),
    {0}};
#define QKVO_COPY W(ROLE_Q, XF_COPY), W(ROLE_K, XF_COPY), W(ROLE_V, XF_COPY), W(ROLE_O, XF_COPY)
static const GgufMap QWEN2_LAYER[] = {
    LLAMA_MLP, QKVO_COPY, B(ROLE_Q, XF_COPY), B(ROLE_K, XF_COPY), B(ROLE_V, XF_COPY), {0}};
#define QK_NORMS(xf) W(ROLE_Q_NORM, xf), W(ROLE_K_NORM, xf)
/* Qwen3: per-head q/k RMSNorms (head_dim), optional attention biases; llama.cpp's NEOX RoPE. */
static const GgufMap QWEN3_LAYER[] = {
    LLAMA_MLP, QKVO_COPY, QK_NORMS(XF_COPY),
    B_OPT(ROLE_Q, XF_COPY), B_OPT(ROLE_K, XF_COPY), B_OPT(ROLE_V, XF_COPY), B_OPT(ROLE_O, XF_COPY),
    {0}};
/* OLMo 2: post-norms only (post_attention_norm, post_ffw_norm), q/k RMSNorms over the whole
 * projection (H hd, KV hd); NEOX RoPE. */
static const GgufMap OLMO2_LAYER[] = {
    QKVO_COPY, QK_NORMS(XF_COPY), W(ROLE_NORM_ATTN_OUT, XF_COPY), W(ROLE_NORM_FFN_OUT, XF_COPY),
    W(ROLE_FFN_GATE, XF_COPY), W(ROLE_FFN_UP, XF_COPY), W(ROLE_FFN_DOWN, XF_COPY), {0}};
/* Phi-3: fused attn_qkv [Q ; K ; V] and ffn_up [gate ; up] as stored; partial NEOX RoPE. */
static const GgufMap PHI3_LAYER[] = {
    W(ROLE_NORM_ATTN_IN, XF_COPY), W(ROLE_NORM_FFN_IN, XF_COPY), W(ROLE_QKV, XF_COPY), W(ROLE_O, XF_COPY),
    W(ROLE_FFN_GATE_UP, XF_COPY), W(ROLE_FFN_DOWN, XF_COPY), {0}};
static const GgufMap GPT2_GLOB[] = {
    W(ROLE_EMBED, XF_COPY), W(ROLE_POS_EMBED, XF_COPY), W(ROLE_FINAL_NORM, XF_COPY), B(ROLE_FINAL_NORM, XF_COPY),
    W_OPT(ROLE_LM_HEAD, XF_COPY), {0}};
static const GgufMap GPT2_LAYER[] = {
    W(ROLE_NORM_ATTN_IN, XF_COPY), B(ROLE_NORM_ATTN_IN, XF_COPY), W(ROLE_QKV, XF_T), B(ROLE_QKV, XF_COPY),
    W(ROLE_O, XF_T), B(ROLE_O, XF_COPY), W(ROLE_NORM_FFN_IN, XF_COPY), B(ROLE_NORM_FFN_IN, XF_COPY),
    W(ROLE_FFN_UP, XF_T), B(ROLE_FFN_UP, XF_COPY), W(ROLE_FFN_DOWN, XF_T), B(ROLE_FFN_DOWN, XF_COPY), {0}};
/* Gemma 2: sandwich norms stored as 1 + w (Gemma2Model.modify_tensors), GeGLU, tied output. */
static const GgufMap GEMMA_GLOB[] = {
    W(ROLE_EMBED, XF_COPY), W(ROLE_FINAL_NORM, XF_PLUS1), W_OPT(ROLE_LM_HEAD, XF_COPY), {0}};
#define GEMMA_SANDWICH                                                                                \
    W(ROLE_NORM_ATTN_IN, XF_PLUS1), W(ROLE_NORM_ATTN_OUT, XF_PLUS1), W(ROLE_NORM_FFN_IN, XF_PLUS1),   \
    W(ROLE_NORM_FFN_OUT, XF_PLUS1), QKVO_COPY, W(ROLE_FFN_GATE, XF_COPY), W(ROLE_FFN_UP, XF_COPY),    \
    W(ROLE_FFN_DOWN, XF_COPY)
static const GgufMap GEMMA2_LAYER[] = {GEMMA_SANDWICH, {0}};
/* Gemma 3: Gemma 2's layer with per-head q/k RMSNorms, also stored as 1 + w. */
static const GgufMap GEMMA3_LAYER[] = {GEMMA_SANDWICH, QK_NORMS(XF_PLUS1), {0}};
/* GPT-NeoX (Pythia): LayerNorms with biases, fused attn_qkv reordered to [Q ; K ; V], GELU MLP
 * with biases, untied embed_out; partial NEOX RoPE (rope.dimension_count the rotated dims). */
static const GgufMap NEOX_GLOB[] = {
    W(ROLE_EMBED, XF_COPY), W(ROLE_FINAL_NORM, XF_COPY), B(ROLE_FINAL_NORM, XF_COPY), W_OPT(ROLE_LM_HEAD, XF_COPY),
    {0}};
static const GgufMap NEOX_LAYER[] = {
    W(ROLE_NORM_ATTN_IN, XF_COPY), B(ROLE_NORM_ATTN_IN, XF_COPY), W(ROLE_QKV, XF_QKV_HEADS),
    B_OPT(ROLE_QKV, XF_QKV_HEADS), W(ROLE_O, XF_COPY), B_OPT(ROLE_O, XF_COPY), W(ROLE_NORM_FFN_IN, XF_COPY),
    B(ROLE_NORM_FFN_IN, XF_COPY), W(ROLE_FFN_UP, XF_COPY), B(ROLE_FFN_UP, XF_COPY), W(ROLE_FFN_DOWN, XF_COPY),
    B(ROLE_FFN_DOWN, XF_COPY), {0}};
/* DeepSeek (MLA): kv_b_proj goes out as two tensors, llama.cpp's attn_k_b and attn_v_b. */
static const GgufMap DS2_LAYER[] = {
    LLAMA_MLP,
    W_OPT(ROLE_Q, XF_COPY), W_OPT(ROLE_Q_A, XF_LAT_Q), W_OPT(ROLE_Q_A_NORM, XF_COPY), W_OPT(ROLE_Q_B, XF_COPY),
    W(ROLE_KV_A, XF_LAT_KV), W_OPT(ROLE_KV_A_NORM, XF_COPY),
    {ROLE_KV_B, "weight", XF_K_B, false, "attn_k_b"}, {ROLE_KV_B, "weight", XF_V_B, false, "attn_v_b"},
    W(ROLE_O, XF_COPY), {0}};

/* gpt-oss (GptOssModel): post_attention_layernorm as post_attention_norm (the MLP's input norm
 * there), q/k/v/o with biases, a sink logit per head, the router with its bias, the fused experts
 * split into gate / up (interleaved columns) and down, each transposed per expert. */
static const GgufMap GPT_OSS_LAYER[] = {
    W(ROLE_NORM_ATTN_IN, XF_COPY), {ROLE_NORM_FFN_IN, "weight", XF_COPY, false, "post_attention_norm"}, QKVO_COPY,
    B(ROLE_Q, XF_COPY), B(ROLE_K, XF_COPY), B(ROLE_V, XF_COPY), B(ROLE_O, XF_COPY), W(ROLE_SINKS, XF_COPY),
    W(ROLE_ROUTER, XF_COPY), B(ROLE_ROUTER, XF_COPY),
    {ROLE_EXPS_GATE_UP, "weight", XF_EXP_GATE, false, "ffn_gate_exps"},
    {ROLE_EXPS_GATE_UP, "weight", XF_EXP_UP, false, "ffn_up_exps"},
    {ROLE_EXPS_GATE_UP_BIAS, "bias", XF_EXP_GATE, false, "ffn_gate_exps"},
    {ROLE_EXPS_GATE_UP_BIAS, "bias", XF_EXP_UP, false, "ffn_up_exps"},
    {ROLE_EXPS_DOWN, "weight", XF_EXP_DOWN, false, "ffn_down_exps"},
    {ROLE_EXPS_DOWN_BIAS, "bias", XF_COPY, false, "ffn_down_exps"}, {0}};

#undef W
#undef B
#undef W_OPT
#undef B_OPT

static int kv_llama(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_smollm3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_swa(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_mistral3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_gpt_oss(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int cfg_gpt_oss(const GgufFile *f, const GgufArch *a, cJSON *c);
static int cfg_mistral3(const GgufFile *f, const GgufArch *a, cJSON *c);
static int kv_gpt2(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_ds2(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int cfg_llama(const GgufFile *f, const GgufArch *a, cJSON *c);
static int cfg_gpt2(const GgufFile *f, const GgufArch *a, cJSON *c);
static int cfg_ds2(const GgufFile *f, const GgufArch *a, cJSON *c);
static int kv_phi3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int cfg_phi3(const GgufFile *f, const GgufArch *a, cJSON *c);
static int kv_neox(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_gemma2(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int cfg_gemma2(const GgufFile *f, const GgufArch *a, cJSON *c);
static int cfg_neox(const GgufFile *f, const GgufArch *a, cJSON *c);

/* One row per llama.cpp architecture; a family's row is the one its family row names (FamilyRow.gguf_arch),
 * model_type is what a file of the architecture reads back as. */
static const GgufArch ARCHS[] = {
    {"llama", "llama", LLAMA_GLOB, LLAMA_LAYER, kv_llama, cfg_llama},
    {"qwen2", "qwen2", LLAMA_GLOB, QWEN2_LAYER, kv_llama, cfg_llama},
    {"qwen3", "qwen3", LLAMA_GLOB, QWEN3_LAYER, kv_llama, cfg_llama},
    {"olmo2", "olmo2", LLAMA_GLOB, OLMO2_LAYER, kv_swa, cfg_llama},
    {"phi3", "phi3", LLAMA_GLOB, PHI3_LAYER, kv_phi3, cfg_phi3},
    {"gemma2", "gemma2", GEMMA_GLOB, GEMMA2_LAYER, kv_gemma2, cfg_gemma2},
    {"gemma3", "gemma3_text", GEMMA_GLOB, GEMMA3_LAYER, kv_gemma2, cfg_gemma2},
    {"gptneox", "gpt_neox", NEOX_GLOB, NEOX_LAYER, kv_neox, cfg_neox},
    {"gpt2", "gpt2", GPT2_GLOB, GPT2_LAYER, kv_gpt2, cfg_gpt2},
    {"deepseek2", "deepseek_v3", LLAMA_GLOB, DS2_LAYER, kv_ds2, cfg_ds2},
    {"smollm3", "smollm3", LLAMA_GLOB, LLAMA_LAYER, kv_smollm3, cfg_llama},
    {"exaone4", "exaone4", LLAMA_GLOB, OLMO2_LAYER, kv_swa, cfg_llama},   /* OLMo 2's tensors, per-head q/k norms */
    {"mistral3", "ministral3", LLAMA_GLOB, LLAMA_LAYER, kv_mistral3, cfg_mistral3},   /* Llama's, q / k permuted */
    {"gpt-oss", "gpt_oss", LLAMA_GLOB, GPT_OSS_LAYER, kv_gpt_oss, cfg_gpt_oss},
};
#define NARCHS (sizeof ARCHS / sizeof ARCHS[0])

/* The row of general.architecture arch (NULL: none). */
static const GgufArch *arch_row(const char *arch) {
    for (size_t i = 0; arch && i < NARCHS; i++)
        if (!strcmp(ARCHS[i].arch, arch)) return &ARCHS[i];
    return NULL;
}

/* Architectures whose q / k rows llama.cpp's converter permutes (LlamaModel's, and SmolLM3Model's,
 * which is one): the reader undoes it. */
static bool arch_permuted(const GgufArch *a) {
    return !strcmp(a->arch, "llama") || !strcmp(a->arch, "smollm3") || !strcmp(a->arch, "mistral3");
}

bool gguf_arch_output_required(const char *arch) {
    static const char *const req[] = {"deepseek2", "olmo2", "gptneox", NULL};
    for (size_t i = 0; arch && req[i]; i++)
        if (strcmp(arch, req[i]) == 0) return true;
    return false;
}

const GgufArch *gguf_arch_row(const ModelConfig *c) { return arch_row(cfg_row(c)->gguf_arch); }

const char *gguf_role_name(tensor_role r) { return r >= 0 && r < ROLE_COUNT ? GG_NAMES[r] : NULL; }

/* llama.cpp's name of t without "blk.L.": the role's (or the entry's own) and the suffix. */
static void gg_base(const GgufMap *t, char *buf, size_t cap) {
    const char *gg = t->gg ? t->gg : gguf_role_name(t->role);
    snprintf(buf, cap, "%s.%s", gg ? gg : "?", t->what);
}

char *gguf_layer_name(const GgufMap *t, int layer) {
    char base[64];
    gg_base(t, base, sizeof base);
    return layer >= 0 ? al_asprintf("blk.%d.%s", layer, base) : al_strdup(base);
}

/* Roles whose Hugging Face name has no ".weight" / ".bias" (gpt-oss's sinks and fused experts). */
static bool hf_bare(tensor_role r) {
    return r == ROLE_SINKS || r == ROLE_EXPS_GATE_UP || r == ROLE_EXPS_GATE_UP_BIAS || r == ROLE_EXPS_DOWN ||
           r == ROLE_EXPS_DOWN_BIAS;
}

char *gguf_hf_name(const ModelConfig *c, const GgufMap *t, int layer) {
    char name[256];
    if (!cfg_role_name(c, t->role, layer, 0, hf_bare(t->role) ? NULL : t->what, name, sizeof name)) {
        al_err("%s has no tensor of role %s", c->model_type, tensor_role_name(t->role));
        return NULL;
    }
    return al_strdup(name);
}

void gguf_permute_rows(const float *src, float *dst, size_t heads, size_t rows, size_t cols, bool inverse) {
    size_t hd = rows / heads, half = hd / 2;
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < half; i++)
            for (size_t j = 0; j < 2; j++) {
                size_t inter = h * hd + 2 * i + j, halves = h * hd + j * half + i;
                size_t to = inverse ? halves : inter, from = inverse ? inter : halves;
                memcpy(dst + to * cols, src + from * cols, cols * sizeof *dst);
            }
}

void gguf_qkv_heads(const float *src, float *dst, size_t heads, size_t rows, size_t cols, bool inverse) {
    size_t hd = rows / (3 * heads);
    for (size_t h = 0; h < heads; h++)
        for (size_t s = 0; s < 3; s++) {
            size_t fused = (h * 3 + s) * hd, split = (s * heads + h) * hd;
            size_t to = inverse ? fused : split, from = inverse ? split : fused;
            memcpy(dst + to * cols, src + from * cols, hd * cols * sizeof *dst);
        }
}

void gguf_kv_b_split(const ModelConfig *c, const float *kvb, float *dst, bool k) {
    size_t H = (size_t)c->n_heads, r = (size_t)c->kv_lora_rank, nope = (size_t)c->qk_nope_dim, v = (size_t)c->v_dim;
    for (size_t h = 0; h < H; h++) {
        const float *head = kvb + h * (nope + v) * r;
        if (k)
            for (size_t i = 0; i < r; i++)
                for (size_t j = 0; j < nope; j++) dst[(h * r + i) * nope + j] = head[j * r + i];
        else
            memcpy(dst + h * v * r, head + nope * r, v * r * sizeof *dst);
    }
}

void gguf_kv_b_join(const ModelConfig *c, const float *src, float *kvb, bool k) {
    size_t H = (size_t)c->n_heads, r = (size_t)c->kv_lora_rank, nope = (size_t)c->qk_nope_dim, v = (size_t)c->v_dim;
    for (size_t h = 0; h < H; h++) {
        float *head = kvb + h * (nope + v) * r;
        if (k)
            for (size_t i = 0; i < r; i++)
                for (size_t j = 0; j < nope; j++) head[j * r + i] = src[(h * r + i) * nope + j];
        else
            memcpy(head + nope * r, src + h * v * r, v * r * sizeof *src);
    }
}

/* ================================================================ metadata */

const char *gguf_arch_key(const GgufArch *a, const char *k) {
    static char buf[128];
    snprintf(buf, sizeof buf, "%s.%s", a->arch, k);
    return buf;
}

/* Keys every architecture shares: sizes, heads, context, RoPE. */
static int kv_common(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int rc = gguf_set_u32(w, gguf_arch_key(a, "block_count"), (uint32_t)c->n_layers);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "context_length"), (uint32_t)(c->max_pos > 0 ? c->max_pos : 2048));
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "embedding_length"), (uint32_t)c->hidden);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "feed_forward_length"), (uint32_t)c->intermediate);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count"), (uint32_t)c->n_heads);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "vocab_size"), (uint32_t)c->vocab);
    const RopeScaling *s = &c->rope_spec.scaling;
    if (!rc && c->rope != ROPE_NONE) rc = gguf_set_f32(w, gguf_arch_key(a, "rope.freq_base"), (float)c->rope_theta);
    if (!rc && s->kind == RS_LINEAR) {
        rc = gguf_set_str(w, gguf_arch_key(a, "rope.scaling.type"), "linear");
        if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.factor"), (float)s->factor);
    }
    if (!rc && s->kind == RS_YARN) {
        rc = gguf_set_str(w, gguf_arch_key(a, "rope.scaling.type"), "yarn");
        if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.factor"), (float)s->factor);
        if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "rope.scaling.original_context_length"), (uint32_t)s->orig_max_pos);
        if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.yarn_beta_fast"), (float)s->beta_fast);
        if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.yarn_beta_slow"), (float)s->beta_slow);
        if (!rc && isfinite(s->attention_factor))
            rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.yarn_attn_factor"), (float)s->attention_factor);
    }
    cJSON *rs = tree ? cJSON_GetObjectItemCaseSensitive(tree, "rope_scaling") : NULL;
    cJSON *rp = tree ? cJSON_GetObjectItemCaseSensitive(tree, "rope_parameters") : NULL;
    if (!cJSON_IsObject(rs) && cJSON_HasObjectItem(rp, "rope_type")) rs = rp;   /* transformers 5 (Ministral 3) */
    char *txt = rs && cJSON_IsObject(rs) ? cJSON_PrintUnformatted(rs) : NULL;
    if (!rc && txt) rc = gguf_set_str(w, "attnlab.rope_scaling", txt);   /* read back by `load` */
    free(txt);
    return rc;
}

static int kv_llama(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int hd = c->qk_rope_dim;
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "rope.dimension_count"), (uint32_t)hd);
    if (!rc && hd * c->n_heads != c->hidden) {
        rc = gguf_set_u32(w, gguf_arch_key(a, "attention.key_length"), (uint32_t)hd);
        if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.value_length"), (uint32_t)hd);
    }
    bool qwen2 = !strcmp(a->arch, "qwen2");        /* llama.cpp's qwen2 runs every layer in full */
    if (!rc && qwen2 && c->sliding_window > 0 && cfg_layer_window(c, c->n_layers - 1) > 0)
        rc = al_err("Qwen2 with use_sliding_window: llama.cpp's qwen2 has no sliding window");
    if (!rc && cfg_row(c)->windowed && c->sliding_window > 0)      /* Mistral's, kept for attnlab */
        rc = gguf_set_u32(w, gguf_arch_key(a, "attention.sliding_window"), (uint32_t)c->sliding_window);
    return rc;
}

/* SmolLM3 as SmolLM3Model writes it (LlamaModel's keys and permuted q / k): llama.cpp's smollm3
 * skips RoPE on every fourth layer by a constant (n_no_rope_layer_step 4, no key) and has no
 * sliding window, so other NoPE layers or a window have no GGUF form. */
static int kv_smollm3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    for (int L = 0; L < c->n_layers; L++) {
        if (cfg_layer_rope(c, L) != ((L + 1) % 4 != 0))
            return al_err("smollm3: layer %d %s RoPE, but llama.cpp's smollm3 has none on every fourth layer and RoPE "
                          "on the others (a constant, no GGUF key): these no_rope_layers have no GGUF form", L,
                          cfg_layer_rope(c, L) ? "applies" : "has no");
        if (cfg_layer_window(c, L) > 0)
            return al_err("smollm3 with use_sliding_window (layer %d: %zu token%s): llama.cpp's smollm3 has no sliding "
                          "window", L, cfg_layer_window(c, L), al_s(cfg_layer_window(c, L)));
    }
    return kv_llama(w, c, tree, a);
}

/* OLMo 2 / 3 and EXAONE 4 as Olmo2Model / Exaone4Model write them: Llama's keys, head_dim, and with
 * a window the layers that slide (attention.sliding_window_pattern, one bool per layer). llama.cpp's
 * olmo2 slides those layers and keeps YaRN off them; its exaone4 slides them and skips RoPE on the
 * others only for 64 layers (EXAONE-4.0-32B), else runs every layer in full with RoPE. */
static int kv_swa(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int rc = kv_llama(w, c, tree, a);
    bool exaone = !strcmp(a->arch, "exaone4");
    if (!rc && exaone && c->qk_rope_dim * c->n_heads == c->hidden) {     /* kv_llama wrote them otherwise */
        rc = gguf_set_u32(w, gguf_arch_key(a, "attention.key_length"), (uint32_t)c->qk_rope_dim);
        if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.value_length"), (uint32_t)c->qk_rope_dim);
    }
    if (rc || c->sliding_window <= 0) return rc;
    bool slide[CFG_MAX_LAYERS];
    for (int L = 0; L < c->n_layers; L++) slide[L] = cfg_layer_window(c, L) > 0;
    return gguf_set_arr(w, gguf_arch_key(a, "attention.sliding_window_pattern"), GGUF_BOOL, slide, (size_t)c->n_layers);
}

/* Ministral 3 as Ministral3Model (a LlamaModel) writes it: Llama's keys and permuted q / k, YaRN's
 * mscale_all_dim as rope.scaling.yarn_log_multiplier and llama_4_scaling_beta as
 * attention.temperature_scale (llama.cpp scales q by 1 + beta ln(1 + floor(pos / original context)),
 * as Ministral3Attention does). llama.cpp's mistral3 reads no sliding window. */
static int kv_mistral3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    const RopeScaling *s = &c->rope_spec.scaling;
    if (c->sliding_window > 0)
        return al_err("%s with a sliding window (%d): llama.cpp's mistral3 has none", c->model_type, c->sliding_window);
    int rc = kv_llama(w, c, tree, a);
    if (!rc && s->kind == RS_YARN && s->mscale_all_dim != 0)
        rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.yarn_log_multiplier"), (float)s->mscale_all_dim);
    if (!rc && c->rope_spec.q_beta != 0)
        rc = gguf_set_f32(w, gguf_arch_key(a, "attention.temperature_scale"), (float)c->rope_spec.q_beta);
    return rc;
}

/* gpt-oss as GptOssModel writes it: Llama's keys, head_dim, the experts (expert_feed_forward_length
 * intermediate_size), the window and the sliding layers; llama.cpp's gpt-oss fixes the rest (softmax
 * over the top-k router logits, SwiGLU clamped at 7 with alpha 1.702, the sinks). */
static int kv_gpt_oss(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    const MoeSpec *m = &c->moe;
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "rope.dimension_count"), (uint32_t)c->qk_rope_dim);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.key_length"), (uint32_t)c->qk_rope_dim);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.value_length"), (uint32_t)c->v_dim);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_count"), (uint32_t)m->n_experts);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_used_count"), (uint32_t)m->top_k);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_feed_forward_length"), (uint32_t)c->intermediate);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.sliding_window"), (uint32_t)c->sliding_window);
    bool slide[CFG_MAX_LAYERS];
    for (int L = 0; L < c->n_layers; L++) slide[L] = cfg_layer_window(c, L) > 0;
    if (!rc) rc = gguf_set_arr(w, gguf_arch_key(a, "attention.sliding_window_pattern"), GGUF_BOOL, slide, (size_t)c->n_layers);
    return rc;
}

/* Phi-3 as conversion/phi.py writes it: rope.dimension_count the rotated dims, the original context,
 * the sliding window (llama.cpp applies it to every layer, as Phi-3 does). */
static int kv_phi3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    const RopeScaling *s = &c->rope_spec.scaling;
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "rope.dimension_count"), (uint32_t)c->qk_rope_dim);
    if (!rc && s->kind == RS_NONE)
        rc = gguf_set_u32(w, gguf_arch_key(a, "rope.scaling.original_context_length"),
                          (uint32_t)(c->max_pos > 0 ? c->max_pos : 2048));
    if (!rc && c->sliding_window > 0)
        rc = gguf_set_u32(w, gguf_arch_key(a, "attention.sliding_window"), (uint32_t)c->sliding_window);
    return rc;
}

/* GPT-NeoX as GPTNeoXModel writes it: the rotated dims, the parallel residual, LayerNorm eps. */
static int kv_neox(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "rope.dimension_count"), (uint32_t)c->qk_rope_dim);
    if (!rc) rc = gguf_set_bool(w, gguf_arch_key(a, "use_parallel_residual"), c->block == BLOCK_PARALLEL);
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_epsilon"), (float)c->norm_eps);
    return rc;
}

/* Gemma 2 / 3 as Gemma2Model / Gemma3Model write them: head_dim, Gemma 2's soft-caps, the window
 * (llama.cpp: even layers local in gemma2, 5 of 6 in gemma3), Gemma 3's local RoPE base; query_pre_attn_scalar only for attnlab (llama.cpp scales by 1/sqrt(head_dim) but for
 * its 27B type). */
static int kv_gemma2(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.key_length"), (uint32_t)cfg_d_qk(c));
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.value_length"), (uint32_t)c->v_dim);
    const FamilyRow *row = cfg_row(c);   /* Gemma 2: soft-caps; Gemma 3: none, its local layers their own base */
    bool capped = row->attn_softcap > 0 || row->final_softcap > 0;
    if (!rc && (capped || c->attn_softcap > 0))
        rc = gguf_set_f32(w, gguf_arch_key(a, "attn_logit_softcapping"), (float)c->attn_softcap);
    if (!rc && (capped || c->final_softcap > 0))
        rc = gguf_set_f32(w, gguf_arch_key(a, "final_logit_softcapping"), (float)c->final_softcap);
    if (!rc && row->local_theta > 0 && c->rope_spec.local_theta > 0)
        rc = gguf_set_f32(w, gguf_arch_key(a, "rope.freq_base_swa"), (float)c->rope_spec.local_theta);
    if (!rc && c->sliding_window > 0)
        rc = gguf_set_u32(w, gguf_arch_key(a, "attention.sliding_window"), (uint32_t)c->sliding_window);
    if (!rc && c->query_pre_attn_scalar > 0)
        rc = gguf_set_f32(w, "attnlab.query_pre_attn_scalar", (float)c->query_pre_attn_scalar);
    return rc;
}

static int kv_gpt2(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count_kv"), (uint32_t)c->n_heads);
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_epsilon"), (float)c->norm_eps);
    return rc;
}

/* The MoE keys convert_hf_to_gguf.py writes for deepseek2 (DeepseekV2Model and TextModel's MoE
 * keys), also for a dense-only model (then expert_count 0, expert_weights_scale 1): llama.cpp
 * b5415 .. b6845 (node-llama-cpp 3.8.1 .. 3.14.2) require expert_weights_scale and
 * expert_shared_count and refuse the file without them. gguf-py's gating: softmax 1, sigmoid 2. */
static int kv_ds2_moe(GgufWriter *w, const ModelConfig *c, const GgufArch *a) {
    const MoeSpec *m = &c->moe;
    int ffn = m->n_experts > 0 && m->expert_ffn > 0 ? m->expert_ffn : c->intermediate;
    int rc = gguf_set_u32(w, gguf_arch_key(a, "expert_feed_forward_length"), (uint32_t)ffn);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_count"), (uint32_t)(m->n_experts > 0 ? m->n_experts : 0));
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_used_count"), (uint32_t)(m->n_experts > 0 ? m->top_k : 0));
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_shared_count"), (uint32_t)(m->n_shared > 0 ? m->n_shared : 0));
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "expert_weights_scale"),
                               (float)(m->routed_scaling > 0 ? m->routed_scaling : 1.0));
    if (!rc) rc = gguf_set_bool(w, gguf_arch_key(a, "expert_weights_norm"), m->norm_topk_prob);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "expert_gating_func"), m->sigmoid ? 2u : 1u);
    /* group counts only with experts: llama.cpp asserts expert_group_count 0 when expert_count is 0 */
    if (!rc && m->n_experts > 0 && m->n_group > 0)
        rc = gguf_set_u32(w, gguf_arch_key(a, "expert_group_count"), (uint32_t)m->n_group);
    if (!rc && m->n_experts > 0 && m->topk_group > 0)
        rc = gguf_set_u32(w, gguf_arch_key(a, "expert_group_used_count"), (uint32_t)m->topk_group);
    return rc;
}

static int kv_ds2(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a) {
    int rc = kv_common(w, c, tree, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.head_count_kv"), 1);   /* MLA runs as MQA over the latent */
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "leading_dense_block_count"), (uint32_t)c->n_layers);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.q_lora_rank"), (uint32_t)c->q_lora_rank);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.kv_lora_rank"), (uint32_t)c->kv_lora_rank);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.key_length"), (uint32_t)(c->kv_lora_rank + c->qk_rope_dim));
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.value_length"), (uint32_t)c->kv_lora_rank);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.key_length_mla"), (uint32_t)(c->qk_nope_dim + c->qk_rope_dim));
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "attention.value_length_mla"), (uint32_t)c->v_dim);
    if (!rc) rc = kv_ds2_moe(w, c, a);
    if (!rc) rc = gguf_set_u32(w, gguf_arch_key(a, "rope.dimension_count"), (uint32_t)c->qk_rope_dim);
    const RopeScaling *s = &c->rope_spec.scaling;
    /* the converter's legacy 0.1 factor; 0 (every build's default: no mscale) without YaRN, written
     * because llama.cpp b5415 (node-llama-cpp 3.8.1) requires the key */
    double lm = s->kind == RS_YARN && s->mscale_all_dim > 0 ? 0.1 * s->mscale_all_dim : 0.0;
    if (!rc) rc = gguf_set_f32(w, gguf_arch_key(a, "rope.scaling.yarn_log_multiplier"), (float)lm);
    return rc;
}

/* ================================================================ reading back: config.json */

/* f's tensor of role r in layer (-1: outside the layers) with suffix what (NULL: none). */
static const GgufTensor *gg_find(const GgufFile *f, tensor_role r, int layer, const char *what) {
    char *gg = gguf_layer_name(&(GgufMap){.role = r, .what = what}, layer);
    const GgufTensor *t = gg ? gguf_tensor_find(f, gg) : NULL;
    free(gg);
    return t;
}

/* An integer key of the architecture (<arch>.k), or def when absent. */
static int64_t gint(const GgufFile *f, const GgufArch *a, const char *k, int64_t def) {
    int64_t v;
    if (gguf_kv_find(f, gguf_arch_key(a, k)) && gguf_get_int(f, gguf_arch_key(a, k), &v) == AL_OK) return v;
    return def;
}
static double gnum(const GgufFile *f, const GgufArch *a, const char *k, double def) {
    double v;
    if (gguf_kv_find(f, gguf_arch_key(a, k)) && gguf_get_num(f, gguf_arch_key(a, k), &v) == AL_OK) return v;
    return def;
}

static void add_int(cJSON *c, const char *k, int64_t v) { cJSON_AddNumberToObject(c, k, (double)v); }

/* What every family's config.json says the same way. */
static int cfg_common(const GgufFile *f, const GgufArch *a, cJSON *c, bool hf_names) {
    const GgufTensor *emb = gg_find(f, ROLE_EMBED, -1, "weight");
    if (!emb || emb->ndim != 2) return al_err("%s: no 2-D token_embd.weight", gguf_path(f));
    int64_t vocab = gint(f, a, "vocab_size", (int64_t)emb->ne[1]);
    cJSON_AddStringToObject(c, "model_type", a->model_type);
    add_int(c, hf_names ? "hidden_size" : "n_embd", gint(f, a, "embedding_length", 0));
    add_int(c, hf_names ? "num_hidden_layers" : "n_layer", gint(f, a, "block_count", 0));
    add_int(c, hf_names ? "num_attention_heads" : "n_head", gint(f, a, "attention.head_count", 0));
    add_int(c, hf_names ? "max_position_embeddings" : "n_positions", gint(f, a, "context_length", 2048));
    add_int(c, "vocab_size", vocab);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", !gg_find(f, ROLE_LM_HEAD, -1, "weight"));
    int64_t id;
    if (gguf_get_int(f, "tokenizer.ggml.bos_token_id", &id) == AL_OK) add_int(c, "bos_token_id", id);
    if (gguf_get_int(f, "tokenizer.ggml.eos_token_id", &id) == AL_OK) add_int(c, "eos_token_id", id);
    al_err_clear();
    if (!hf_names) return AL_OK;
    add_int(c, "intermediate_size", gint(f, a, "feed_forward_length", 0));
    cJSON_AddNumberToObject(c, "rms_norm_eps", gnum(f, a, "attention.layer_norm_rms_epsilon", 1e-6));
    cJSON_AddNumberToObject(c, "rope_theta", gnum(f, a, "rope.freq_base", 10000.0));
    const char *rs = gguf_get_str(f, "attnlab.rope_scaling"), *type = gguf_get_str(f, gguf_arch_key(a, "rope.scaling.type"));
    cJSON *o = rs ? cJSON_Parse(rs) : NULL;
    if (!o && type && (strcmp(type, "linear") == 0 || strcmp(type, "yarn") == 0)) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "rope_type", type);
        cJSON_AddNumberToObject(o, "factor", gnum(f, a, "rope.scaling.factor", 1.0));
        if (strcmp(type, "yarn") == 0)
            add_int(o, "original_max_position_embeddings", gint(f, a, "rope.scaling.original_context_length", 4096));
    }
    if (!o && gguf_tensor_find(f, "rope_freqs.weight"))
        return al_err("%s: rope_freqs (llama3 RoPE scaling) without its parameters: attnlab reads it back only from "
                      "files it wrote", gguf_path(f));
    if (o) cJSON_AddItemToObject(c, "rope_scaling", o);
    return AL_OK;
}

/* attention.sliding_window_pattern as config.json's layer_types (none: nothing added). */
static int cfg_layer_types(const GgufFile *f, const GgufArch *a, cJSON *c) {
    const GgufKV *kv = gguf_kv_find(f, gguf_arch_key(a, "attention.sliding_window_pattern"));
    int64_t n = gint(f, a, "block_count", 0);
    if (!kv) return AL_OK;
    if (kv->type != GGUF_ARR || kv->arr_type == GGUF_STR || (int64_t)kv->n != n)
        return al_err("%s: %s is not an array of %lld per-layer flags", gguf_path(f), kv->key, (long long)n);
    cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
    for (size_t L = 0; L < kv->n; L++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(gguf_arr_num(kv, L) != 0 ? "sliding_attention" : "full_attention"));
    return AL_OK;
}

static int cfg_llama(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int64_t H = gint(f, a, "attention.head_count", 1), D = gint(f, a, "embedding_length", 0);
    int rc = cfg_common(f, a, c, true);
    add_int(c, "num_key_value_heads", gint(f, a, "attention.head_count_kv", H));
    add_int(c, "head_dim", gint(f, a, "attention.key_length", H ? D / H : 0));
    int64_t sw = gint(f, a, "attention.sliding_window", 0);
    if (sw > 0) {             /* Llama's with a window is Mistral, OLMo 2's OLMo 3 */
        const char *mt = !strcmp(a->arch, "llama") ? "mistral" : !strcmp(a->arch, "olmo2") ? "olmo3" : a->model_type;
        cJSON_ReplaceItemInObject(c, "model_type", cJSON_CreateString(mt));
        add_int(c, "sliding_window", sw);
    } else if (!strcmp(a->arch, "exaone4"))
        cJSON_AddNullToObject(c, "sliding_window");   /* EXAONE 4.0-1.2B's form: every layer full, with RoPE */
    if (!rc && sw > 0) rc = cfg_layer_types(f, a, c);
    if (strcmp(a->arch, "llama") == 0)
        cJSON_AddBoolToObject(c, "attention_bias", gg_find(f, ROLE_Q, 0, "bias") != NULL);
    else if (sw <= 0)
        cJSON_AddBoolToObject(c, "use_sliding_window", false);
    return rc;
}

/* Ministral 3: Llama's keys; a file attnlab did not write gets llama_4_scaling_beta and mscale_all_dim
 * back from attention.temperature_scale and rope.scaling.yarn_log_multiplier. */
static int cfg_mistral3(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int rc = cfg_llama(f, a, c);
    cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    double beta = gnum(f, a, "attention.temperature_scale", 0), lm = gnum(f, a, "rope.scaling.yarn_log_multiplier", 0);
    if (!rc && cJSON_IsObject(rs) && beta != 0 && !cJSON_HasObjectItem(rs, "llama_4_scaling_beta"))
        cJSON_AddNumberToObject(rs, "llama_4_scaling_beta", beta);
    if (!rc && cJSON_IsObject(rs) && lm != 0 && !cJSON_HasObjectItem(rs, "mscale_all_dim")) {
        cJSON_AddNumberToObject(rs, "mscale", 1.0);
        cJSON_AddNumberToObject(rs, "mscale_all_dim", lm);
    }
    return rc;
}

/* gpt-oss: Llama's keys, the experts, the window and its layers, q/k/v/o biases, SwiGLU clamped at 7
 * (llama.cpp's constant); YaRN's truncate from attnlab.rope_scaling (else true, as llama.cpp computes). */
static int cfg_gpt_oss(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int64_t H = gint(f, a, "attention.head_count", 1), D = gint(f, a, "embedding_length", 0);
    int rc = cfg_common(f, a, c, true);
    add_int(c, "num_key_value_heads", gint(f, a, "attention.head_count_kv", H));
    add_int(c, "head_dim", gint(f, a, "attention.key_length", H ? D / H : 0));
    cJSON_ReplaceItemInObject(c, "intermediate_size", cJSON_CreateNumber((double)gint(f, a, "expert_feed_forward_length", 0)));
    add_int(c, "num_local_experts", gint(f, a, "expert_count", 0));
    add_int(c, "num_experts_per_tok", gint(f, a, "expert_used_count", 0));
    add_int(c, "experts_per_token", gint(f, a, "expert_used_count", 0));
    add_int(c, "sliding_window", gint(f, a, "attention.sliding_window", 0));
    cJSON_AddBoolToObject(c, "attention_bias", true);
    cJSON_AddNumberToObject(c, "swiglu_limit", 7.0);
    if (!rc) rc = cfg_layer_types(f, a, c);
    return rc;
}

static int cfg_phi3(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int64_t H = gint(f, a, "attention.head_count", 1), D = gint(f, a, "embedding_length", 0);
    int rc = cfg_common(f, a, c, true);
    int64_t hd = H ? D / H : 0, sw = gint(f, a, "attention.sliding_window", 0);
    add_int(c, "num_key_value_heads", gint(f, a, "attention.head_count_kv", H));
    cJSON_AddNumberToObject(c, "partial_rotary_factor", hd ? (double)gint(f, a, "rope.dimension_count", hd) / (double)hd : 1.0);
    add_int(c, "original_max_position_embeddings", gint(f, a, "rope.scaling.original_context_length", 0));
    if (sw > 0) add_int(c, "sliding_window", sw);
    return rc;
}

static int cfg_neox(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int64_t H = gint(f, a, "attention.head_count", 1), D = gint(f, a, "embedding_length", 0), hd = H ? D / H : 0;
    int rc = cfg_common(f, a, c, true);
    cJSON_AddNumberToObject(c, "rotary_pct", hd ? (double)gint(f, a, "rope.dimension_count", hd) / (double)hd : 1.0);
    cJSON_AddNumberToObject(c, "rotary_emb_base", gnum(f, a, "rope.freq_base", 10000.0));
    cJSON_AddNumberToObject(c, "layer_norm_eps", gnum(f, a, "attention.layer_norm_epsilon", 1e-5));
    cJSON_AddBoolToObject(c, "use_parallel_residual", gint(f, a, "use_parallel_residual", 1) != 0);
    cJSON_AddBoolToObject(c, "attention_bias", gg_find(f, ROLE_QKV, 0, "bias") != NULL);
    cJSON_AddStringToObject(c, "hidden_act", "gelu");
    return rc;
}

static int cfg_gemma2(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int64_t H = gint(f, a, "attention.head_count", 1), D = gint(f, a, "embedding_length", 0);
    int64_t hd = gint(f, a, "attention.key_length", H ? D / H : 0), sw = gint(f, a, "attention.sliding_window", 0);
    double q;
    int rc = cfg_common(f, a, c, true);
    add_int(c, "num_key_value_heads", gint(f, a, "attention.head_count_kv", H));
    add_int(c, "head_dim", hd);
    cJSON_AddNumberToObject(c, "attn_logit_softcapping", gnum(f, a, "attn_logit_softcapping", 0));
    cJSON_AddNumberToObject(c, "final_logit_softcapping", gnum(f, a, "final_logit_softcapping", 0));
    if (sw > 0) add_int(c, "sliding_window", sw);
    else cJSON_AddNullToObject(c, "sliding_window");
    bool has_q = gguf_kv_find(f, "attnlab.query_pre_attn_scalar") && gguf_get_num(f, "attnlab.query_pre_attn_scalar", &q) == AL_OK;
    cJSON_AddNumberToObject(c, "query_pre_attn_scalar", has_q ? q : (double)hd);
    cJSON_AddStringToObject(c, "hidden_activation", "gelu_pytorch_tanh");
    model_family fam;                    /* Gemma 3: local layers with a RoPE base of their own */
    if (family_find(a->model_type, NULL, &fam) && family_row(fam)->local_theta > 0)
        cJSON_AddNumberToObject(c, "rope_local_base_freq", gnum(f, a, "rope.freq_base_swa", 10000.0));
    return rc;
}

static int cfg_gpt2(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int rc = cfg_common(f, a, c, false);
    add_int(c, "n_ctx", gint(f, a, "context_length", 1024));
    add_int(c, "n_inner", gint(f, a, "feed_forward_length", 0));
    cJSON_AddNumberToObject(c, "layer_norm_epsilon", gnum(f, a, "attention.layer_norm_epsilon", 1e-5));
    cJSON_AddStringToObject(c, "activation_function", "gelu_new");
    return rc;
}

static int cfg_ds2(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int rc = cfg_common(f, a, c, true);
    int64_t H = gint(f, a, "attention.head_count", 1), rope = gint(f, a, "rope.dimension_count", 0);
    int64_t q = gint(f, a, "attention.q_lora_rank", 0), L = gint(f, a, "block_count", 0);
    if (gint(f, a, "leading_dense_block_count", 0) < L)
        return al_err("%s: deepseek2 with mixture-of-experts layers: attnlab reads dense GGUF layouts only", gguf_path(f));
    add_int(c, "num_key_value_heads", H);
    add_int(c, "kv_lora_rank", gint(f, a, "attention.kv_lora_rank", 0));
    if (q > 0) add_int(c, "q_lora_rank", q);
    else cJSON_AddNullToObject(c, "q_lora_rank");
    add_int(c, "qk_rope_head_dim", rope);
    add_int(c, "qk_nope_head_dim", gint(f, a, "attention.key_length_mla", 0) - rope);
    add_int(c, "v_head_dim", gint(f, a, "attention.value_length_mla", 0));
    add_int(c, "head_dim", rope);
    add_int(c, "first_k_dense_replace", L);
    cJSON_AddNullToObject(c, "n_routed_experts");
    cJSON_AddBoolToObject(c, "rope_interleave", true);
    return rc;
}

/* ================================================================ reading back: tensors */

typedef struct {
    st_entry e;               /* HF name, dtype (back_dtype), shape, offsets in the buffer */
    const GgufTensor *src[2]; /* kv_b_proj: attn_k_b, attn_v_b */
    gguf_xf xf;
    int mx;                   /* gpt-oss's MXFP4 experts kept 4-bit (back_mx_split): 1 "<hf>_blocks", 2 "<hf>_scales" */
} LEnt;

typedef struct {
    GgufFile *f;
    const GgufArch *a;
    ModelConfig c;            /* the dims the transforms need */
    LEnt *ent;
    size_t n, cap, off;
} Back;

/* Checks a tensor's ne against the dims the transform expects. */
static int back_check(const Back *b, const GgufTensor *g, uint64_t n0, uint64_t n1, uint64_t n2) {
    if (g->ne[0] != n0 || g->ne[1] != n1 || g->ne[2] != n2 || g->ndim > 3)
        return al_err("%s: %s has shape {%llu, %llu, %llu}, the metadata implies {%llu, %llu, %llu}", gguf_path(b->f),
                      g->name, (unsigned long long)g->ne[0], (unsigned long long)g->ne[1], (unsigned long long)g->ne[2],
                      (unsigned long long)n0, (unsigned long long)n1, (unsigned long long)n2);
    return AL_OK;
}

static bool xf_experts(gguf_xf xf) { return xf == XF_EXP_GATE || xf == XF_EXP_UP || xf == XF_EXP_DOWN; }

/* The dtype entry l is read back in: an F16 / BF16 one keeps its own (as the safetensors loader keeps a BF16
 * tensor: the forward pass and the analyses read it through matmul.c's weight views, so a BF16 GGUF computes as
 * its BF16 source) when the transform only moves its elements -- a copy, a transpose, a permutation of rows,
 * kv_b_proj joined from attn_k_b (transposed per head) and attn_v_b, gpt-oss's experts joined from gate / up
 * (columns interleaved, transposed per expert): the values, widened, moved and rounded back, are the file's
 * bit for bit -- and its sources share one type; F32 otherwise: Q8_0 and MXFP4 (dequantized), Gemma's norms
 * stored plus one (arithmetic: w = stored - 1 is not a BF16 value in general), a join of two types. */
static dt_type back_dtype(const LEnt *l) {
    const GgufTensor *g = l->src[0];
    if (l->mx) return DT_U8;
    if (l->xf == XF_PLUS1 || (l->src[1] && l->src[1]->type != g->type)) return DT_F32;
    return g->type == GG_BF16 ? DT_BF16 : g->type == GG_F16 ? DT_F16 : DT_F32;
}

/* Why entry l is widened where its type could be kept (NULL: it is not, or no reason but its type: Q8_0). */
static const char *back_widened(const LEnt *l) {
    gg_type t = l->src[0]->type;
    if (l->mx || back_dtype(l) != DT_F32) return NULL;
    if (l->src[1] && l->src[1]->type != t) return "joined from two types";
    return (t == GG_BF16 || t == GG_F16) && l->xf == XF_PLUS1 ? "norms stored plus one" : NULL;
}

/* Gives every entry its dtype (back_dtype: once its sources are all known) and places its values at the next
 * 64-byte boundary of the buffer. */
static void back_place(Back *b) {
    for (size_t i = 0; i < b->n; i++) {
        LEnt *l = &b->ent[i];
        size_t numel = 1;
        for (int d = 0; d < l->e.ndim; d++) numel *= l->e.shape[d];
        l->e.dtype = back_dtype(l);
        l->e.begin = (b->off + 63) & ~(size_t)63;
        l->e.end = l->e.begin + numel * dt_size(l->e.dtype);
        b->off = l->e.end;
    }
}

/* gpt-oss's experts back into the HF tensors (owns hf): ffn_gate_exps / ffn_up_exps (D, I, E) join as
 * gate_up_proj [E, D, 2I] (their biases (I, E) as [E, 2I]), ffn_down_exps (I, D, E) as down_proj [E, I, D]. */
static int back_experts(Back *b, const GgufMap *t, const GgufTensor *g, char *hf) {
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->ent[i].e.name, hf) == 0) {            /* ffn_up_exps joining ffn_gate_exps */
            free(hf);
            b->ent[i].src[1] = g;
            const GgufTensor *g0 = b->ent[i].src[0];
            return back_check(b, g, g0->ne[0], g0->ne[1], g0->ne[2]);
        }
    bool w = g->ndim == 3;
    if ((g->ndim != 2 && g->ndim != 3) || (t->xf == XF_EXP_DOWN && !w) || t->xf == XF_EXP_UP) {
        free(hf);
        return al_err("%s: %s: %d dim%s%s, not gpt-oss's experts", gguf_path(b->f), g->name, g->ndim, al_s(g->ndim),
                      t->xf == XF_EXP_UP ? " or no gate before it" : "");
    }
    if (al_reserve(&b->ent, &b->cap, b->n + 1, sizeof *b->ent, "GGUF tensors")) { free(hf); return AL_ERR; }
    LEnt *l = &b->ent[b->n++];
    memset(l, 0, sizeof *l);
    *l = (LEnt){.e = {.name = hf, .dtype = DT_F32, .ndim = w ? 3 : 2}, .src = {g, NULL}, .xf = t->xf};
    size_t E = (size_t)(w ? g->ne[2] : g->ne[1]), a = (size_t)g->ne[0], c = (size_t)g->ne[1];
    size_t *sh = l->e.shape;
    sh[0] = E;
    if (!w) sh[1] = 2 * a;                                   /* [E, 2I] */
    else if (t->xf == XF_EXP_DOWN) sh[1] = a, sh[2] = c;     /* [E, I, D] */
    else sh[1] = a, sh[2] = 2 * c;                           /* [E, D, 2I] */
    return AL_OK;
}

/* One expert x of source s (its values in the file: rows of a, c rows per expert; a bias: one row) into o,
 * the entry's expert x as float ([D, 2I] of gate / up column 2i + k, [I, D] of down, [2I] of a bias). */
static void back_expert(const Back *b, const LEnt *l, int k, size_t x, float *src, float *o) {
    const GgufTensor *s = l->src[k];
    size_t w = s->ndim == 3, a = (size_t)s->ne[0], c = w ? (size_t)s->ne[1] : 1;
    gg_to_f32(s->type, (const uint8_t *)gguf_tensor_data(b->f, s) + gg_row_bytes(s->type, a) * x * c, a * c, src);
    if (!w)                                                  /* bias (I, E): column 2i + k */
        for (size_t i = 0; i < a; i++) o[2 * i + (size_t)k] = src[i];
    else if (l->xf == XF_EXP_DOWN)                           /* (D rows, I cols) -> [I, D] */
        for (size_t d = 0; d < c; d++)
            for (size_t i = 0; i < a; i++) o[i * c + d] = src[d * a + i];
    else                                                     /* (I rows, D cols) -> [D, 2I] column 2i + k */
        for (size_t i = 0; i < c; i++)
            for (size_t d = 0; d < a; d++) o[d * 2 * c + 2 * i + (size_t)k] = src[i * a + d];
}

/* gpt-oss's experts: the export's split and transposes undone (gguf_arch.h: XF_EXP_*), into dst in the entry's
 * dtype one expert at a time (a float copy of one expert, never of the tensor: BF16 experts of 2.1 G values a
 * layer took 13 GB of floats here before). */
static int back_fill_experts(const Back *b, const LEnt *l, uint8_t *dst) {
    const GgufTensor *g = l->src[0];
    if (l->xf != XF_EXP_DOWN && !l->src[1]) return al_err("%s: %s without its ffn_up_exps", gguf_path(b->f), g->name);
    size_t E = l->e.shape[0], in = (size_t)g->ne[0] * (g->ndim == 3 ? (size_t)g->ne[1] : 1);
    size_t out = in * (l->xf == XF_EXP_DOWN ? 1 : 2), es = dt_size(l->e.dtype);
    float *src = al_malloc3(in, 1, sizeof *src, g->name), *o = src ? al_malloc3(out, 1, sizeof *o, g->name) : NULL;
    int rc = o ? AL_OK : AL_ERR;
    for (size_t x = 0; rc == AL_OK && x < E; x++) {
        for (int k = 0; k < (l->xf == XF_EXP_DOWN ? 1 : 2); k++) back_expert(b, l, k, x, src, o);
        if (l->e.dtype == DT_F32) memcpy(dst + x * out * es, o, out * es);
        else rc = dt_from_f32(l->e.dtype, o, out, dst + x * out * es);
    }
    free(src);
    free(o);
    return rc;
}

/* gpt-oss's MXFP4 experts kept 4-bit, in the layout store_fp4_experts reads as gpt-oss releases it (tensor.h:
 * "<hf>_blocks" U8 [E, R, C/32, 16] and "<hf>_scales" U8 [E, R, C/32], each expert (out R, in C)), each ggml block
 * repacked (gg_mxfp4_to_hf: bit for bit the same values). ggml's expert matrices are (out, in) as HF's blocks
 * are -- only HF's BF16 parameter is transposed (x @ W) --: ffn_gate_exps / ffn_up_exps (D, I, E) are each
 * expert's (I, D), gate_up_proj_blocks' rows 2i / 2i + 1 (llama.cpp's converter splits blocks[:, ::2] /
 * [:, 1::2]); ffn_down_exps (I, D, E) is down_proj_blocks' (D, I). An E8M0 byte 255 (ggml: 2^127; OCP's NaN)
 * is refused naming the tensor at its first read (store_fp4_experts). Kept when the weight is 3-D and its
 * sources (gate and up alike) MXFP4; else read widened to F32 as before. */
static bool mx_keep(const LEnt *l) {
    const GgufTensor *g = l->src[0];
    if (!xf_experts(l->xf) || l->e.ndim != 3 || g->type != GG_MXFP4 || g->ne[0] % 32) return false;
    return l->xf == XF_EXP_DOWN || (l->src[1] && l->src[1]->type == GG_MXFP4);
}

/* Each MXFP4 expert entry becomes its blocks ("<hf>_blocks") with its scales ("<hf>_scales") added after the
 * entries; *kept: how many. */
static int back_mx_split(Back *b, size_t *kept) {
    *kept = 0;
    for (size_t i = 0, n = b->n; i < n; i++) {
        if (!mx_keep(&b->ent[i])) continue;
        const GgufTensor *g = b->ent[i].src[0];
        size_t E = b->ent[i].e.shape[0], R = (size_t)g->ne[1] * (b->ent[i].xf == XF_EXP_DOWN ? 1 : 2);
        size_t G = (size_t)g->ne[0] / 32;
        char *blk = al_asprintf("%s_blocks", b->ent[i].e.name), *sc = al_asprintf("%s_scales", b->ent[i].e.name);
        if (!blk || !sc || al_reserve(&b->ent, &b->cap, b->n + 1, sizeof *b->ent, "GGUF tensors")) {
            free(blk);
            free(sc);
            return AL_ERR;
        }
        LEnt *l = &b->ent[i], *s = &b->ent[b->n++];
        free(l->e.name);
        l->e = (st_entry){.name = blk, .dtype = DT_U8, .ndim = 4, .shape = {E, R, G, 16}};
        l->mx = 1;
        *s = *l;
        s->e = (st_entry){.name = sc, .dtype = DT_U8, .ndim = 3, .shape = {E, R, G}};
        s->mx = 2;
        ++*kept;
    }
    return AL_OK;
}

/* An MXFP4 entry's bytes (blocks or scales) from its ggml sources, row by row; an E8M0 byte 255 refused. */
static int back_fill_mx(const Back *b, const LEnt *l, uint8_t *dst) {
    size_t E = l->e.shape[0], R = l->e.shape[1], G = l->e.shape[2], down = l->xf == XF_EXP_DOWN;
    uint8_t sc, codes[16];
    for (size_t x = 0; x < E; x++)
        for (size_t r = 0; r < R; r++) {
            const GgufTensor *s = l->src[down ? 0 : r & 1];
            size_t sr = down ? r : r >> 1;
            const uint8_t *src = (const uint8_t *)gguf_tensor_data(b->f, s) + (x * (size_t)s->ne[1] + sr) * G * GG_MXFP4_BLOCK;
            uint8_t *d = dst + (x * R + r) * G * (l->mx == 1 ? 16 : 1);
            for (size_t k = 0; k < G; k++, src += GG_MXFP4_BLOCK) {
                gg_mxfp4_to_hf(src, &sc, codes);
                if (sc == 255)
                    return al_err("%s: %s: MXFP4 block [expert %zu, row %zu, block %zu] has the E8M0 scale 255 (NaN in "
                                  "OCP's MX format, 2^127 to ggml): not a weight", gguf_path(b->f), s->name, x, sr, k);
                if (l->mx == 1) memcpy(d + 16 * k, codes, 16);
                else d[k] = sc;
            }
        }
    return AL_OK;
}

static int back_add(Back *b, const GgufMap *t, int layer, const GgufTensor *g) {
    const ModelConfig *c = &b->c;
    char *hf = gguf_hf_name(c, t, layer);
    if (!hf) return AL_ERR;
    if (xf_experts(t->xf)) return back_experts(b, t, g, hf);
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->ent[i].e.name, hf) == 0) {            /* attn_v_b joining attn_k_b */
            free(hf);
            b->ent[i].src[1] = g;
            return back_check(b, g, (uint64_t)c->kv_lora_rank, (uint64_t)c->v_dim, (uint64_t)c->n_heads);
        }
    if (al_reserve(&b->ent, &b->cap, b->n + 1, sizeof *b->ent, "GGUF tensors")) { free(hf); return AL_ERR; }
    LEnt *l = &b->ent[b->n++];
    memset(l, 0, sizeof *l);
    l->e.name = hf;
    l->src[0] = g;
    l->xf = t->xf;
    size_t R = (size_t)g->ne[1], C = (size_t)g->ne[0];
    int rc = AL_OK;
    if (t->xf == XF_K_B) {
        rc = back_check(b, g, (uint64_t)c->qk_nope_dim, (uint64_t)c->kv_lora_rank, (uint64_t)c->n_heads);
        R = (size_t)c->n_heads * (size_t)(c->qk_nope_dim + c->v_dim);
        C = (size_t)c->kv_lora_rank;
    } else if (g->ndim > 2) rc = al_err("%s: %s has %d dim%s, expected at most 2", gguf_path(b->f), g->name, g->ndim, al_s(g->ndim));
    if (t->xf == XF_T) { size_t s = R; R = C; C = s; }
    if (t->xf == XF_QKV_HEADS && (!c->n_heads || (g->ndim == 1 ? C : R) % (3 * (size_t)c->n_heads)))
        rc = al_err("%s: %s: %zu row%s do not split into 3 x %d head%s", gguf_path(b->f), g->name, g->ndim == 1 ? C : R, al_s(g->ndim == 1 ? C : R),
                    c->n_heads, al_s(c->n_heads));
    if ((t->xf == XF_PERM_Q || t->xf == XF_PERM_K) && arch_permuted(b->a)) {
        size_t heads = (size_t)(t->xf == XF_PERM_Q ? c->n_heads : c->n_kv_heads), rows = g->ndim == 1 ? C : R;
        if (!heads || rows % heads || (rows / heads) % 2)
            rc = al_err("%s: %s: %zu row%s do not split into %zu head%s of pairs", gguf_path(b->f), g->name, rows, al_s(rows), heads, al_s(heads));
    }
    l->e.ndim = g->ndim == 1 ? 1 : 2;
    l->e.shape[0] = g->ndim == 1 ? C : R;
    l->e.shape[1] = g->ndim == 1 ? 0 : C;
    return rc;
}

/* Undoes the export's transform into dst (the HF tensor). */
static int back_fill(const Back *b, const LEnt *l, float *dst) {
    const GgufTensor *g = l->src[0];
    bool perm = (l->xf == XF_PERM_Q || l->xf == XF_PERM_K) && arch_permuted(b->a);
    if (l->xf == XF_K_B && !l->src[1]) return al_err("%s: %s without its attn_v_b", gguf_path(b->f), g->name);
    float *tmp = al_malloc3(g->numel, 1, sizeof *tmp, g->name);
    if (!tmp) return AL_ERR;
    gguf_tensor_f32(b->f, g, tmp);
    size_t R = (size_t)g->ne[1], C = (size_t)g->ne[0];
    if (l->xf == XF_K_B) {
        gguf_kv_b_join(&b->c, tmp, dst, true);
        free(tmp);
        if (!(tmp = al_malloc3(l->src[1]->numel, 1, sizeof *tmp, l->src[1]->name))) return AL_ERR;
        gguf_tensor_f32(b->f, l->src[1], tmp);
        gguf_kv_b_join(&b->c, tmp, dst, false);
    } else if (l->xf == XF_QKV_HEADS) {
        gguf_qkv_heads(tmp, dst, (size_t)b->c.n_heads, g->ndim == 1 ? C : R, g->ndim == 1 ? 1 : C, true);
    } else if (l->xf == XF_PLUS1) {
        for (size_t i = 0; i < g->numel; i++) dst[i] = tmp[i] - 1.0f;
    } else if (perm) {
        size_t heads = (size_t)(l->xf == XF_PERM_Q ? b->c.n_heads : b->c.n_kv_heads);
        gguf_permute_rows(tmp, dst, heads, g->ndim == 1 ? C : R, g->ndim == 1 ? 1 : C, true);
    } else if (l->xf == XF_T) {
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++) dst[j * R + i] = tmp[i * C + j];
    } else memcpy(dst, tmp, g->numel * sizeof *dst);
    free(tmp);
    return AL_OK;
}

/* Every tensor of the file mapped back to its HF name (an unknown one is an error). */
static int back_collect(Back *b) {
    size_t seen = 0;
    int rc = AL_OK;
    for (const GgufMap *t = b->a->glob; rc == AL_OK && t->what; t++) {
        char *gg = gguf_layer_name(t, -1);
        const GgufTensor *g = gg ? gguf_tensor_find(b->f, gg) : NULL;
        free(gg);
        if (g) { rc = back_add(b, t, -1, g); seen++; }
    }
    for (int L = 0; rc == AL_OK && L < b->c.n_layers; L++)
        for (const GgufMap *t = b->a->layer; rc == AL_OK && t->what; t++) {
            char *gg = gguf_layer_name(t, L);
            const GgufTensor *g = gg ? gguf_tensor_find(b->f, gg) : NULL;
            free(gg);
            if (g) { rc = back_add(b, t, L, g); seen++; }
        }
    if (gguf_tensor_find(b->f, "rope_freqs.weight")) seen++;
    for (size_t i = 0; rc == AL_OK && seen < gguf_tensor_count(b->f) && i < gguf_tensor_count(b->f); i++) {
        const GgufTensor *g = gguf_tensor_at(b->f, i);
        bool known = strcmp(g->name, "rope_freqs.weight") == 0;
        for (size_t k = 0; !known && k < b->n; k++)
            known = b->ent[k].src[0] == g || b->ent[k].src[1] == g;
        if (!known)
            rc = al_err("%s: tensor %s is not part of llama.cpp's %s as attnlab reads it", gguf_path(b->f), g->name,
                        b->a->arch);
    }
    return rc;
}

/* back_fill into the buffer at dst, in the entry's dtype: an F16 / BF16 one through a float copy (exact). */
static int back_fill_as(const Back *b, const LEnt *l, uint8_t *dst) {
    if (l->mx) return back_fill_mx(b, l, dst);
    if (xf_experts(l->xf)) return back_fill_experts(b, l, dst);
    if (l->e.dtype == DT_F32) return back_fill(b, l, (float *)dst);
    size_t n = (l->e.end - l->e.begin) / dt_size(l->e.dtype);
    float *tmp = al_malloc3(n, 1, sizeof *tmp, l->e.name);
    int rc = tmp ? back_fill(b, l, tmp) : AL_ERR;
    if (rc == AL_OK) rc = dt_from_f32(l->e.dtype, tmp, n, dst);
    free(tmp);
    return rc;
}

/* The buffer the tensors are read back into: a shared mapping of a memory file, not anonymous memory, since the
 * store hands read pages back (st_release: madvise DONTNEED), which zeroes an anonymous private mapping -- a
 * layer read twice (a truncation, then its export) was zeros after its first page -- and only drops the page
 * table entries of a shared one, the values staying in the memory file. NULL: out of memory. */
static uint8_t *back_map(size_t size) {
    int fd = memfd_create("attnlab-gguf", MFD_CLOEXEC);
    if (fd < 0) return NULL;
    void *map = ftruncate(fd, (off_t)size) == 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    return map == MAP_FAILED ? NULL : map;
}

static int back_store(Back *b, const char *path, Store **store) {
    size_t size = b->off ? b->off : 1;
    uint8_t *map = back_map(size);
    if (!map) return al_err("%s: cannot allocate %zu byte%s for its tensors", path, size, al_s(size));
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < b->n; i++) rc = back_fill_as(b, &b->ent[i], map + b->ent[i].e.begin);
    st_entry *e = rc == AL_OK ? al_calloc(b->n ? b->n : 1, sizeof *e, "tensor entries") : NULL;
    for (size_t i = 0; e && i < b->n; i++) e[i] = b->ent[i].e;
    st_file *sf = e ? st_wrap(path, map, size, 0, e, b->n, true) : NULL;
    free(e);
    if (!sf) { munmap(map, size); return AL_ERR; }
    char *dir = al_strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = 0;
    rc = dir ? store_from_file(sf, slash ? (*dir ? dir : "/") : ".", store) : AL_ERR;
    free(dir);
    return rc;
}

/* Whether name is a tensor of row a (any layer, or rope_freqs). */
static bool row_has(const GgufArch *a, const char *name) {
    if (strcmp(name, "rope_freqs.weight") == 0) return true;
    char base[64];
    for (const GgufMap *t = a->glob; t->what; t++)
        if (gg_base(t, base, sizeof base), strcmp(base, name) == 0) return true;
    int L, n = 0;
    if (sscanf(name, "blk.%d.%n", &L, &n) != 1 || n == 0) return false;
    for (const GgufMap *t = a->layer; t->what; t++)
        if (gg_base(t, base, sizeof base), strcmp(base, name + n) == 0) return true;
    return false;
}

int gguf_check_tensors(const GgufFile *f, bool *checked) {
    const char *arch = gguf_get_str(f, "general.architecture");
    const GgufArch *a = arch_row(arch);
    *checked = a != NULL;
    if (!a) return AL_OK;
    int64_t layers = gint(f, a, "block_count", 0), hidden = gint(f, a, "embedding_length", 0);
    for (int64_t L = -1; L < layers; L++)               /* -1: the tensors outside the layers */
        for (const GgufMap *t = L < 0 ? a->glob : a->layer; t->what; t++) {
            if (t->opt) continue;
            char *gg = gguf_layer_name(t, (int)L);
            bool has = gg && gguf_tensor_find(f, gg);
            int rc = has ? AL_OK : al_err("no tensor %s, which llama.cpp's %s needs", gg ? gg : t->what, arch);
            free(gg);
            if (rc) return rc;
        }
    const GgufTensor *e = gg_find(f, ROLE_EMBED, -1, "weight");
    if (e && (e->ndim != 2 || (int64_t)e->ne[0] != hidden))
        return al_err("token_embd.weight has %d dim%s of which the first is %llu: llama.cpp expects (%lld, vocab)", e->ndim, al_s(e->ndim),
                      (unsigned long long)e->ne[0], (long long)hidden);
    for (size_t i = 0; i < gguf_tensor_count(f); i++)
        if (!row_has(a, gguf_tensor_at(f, i)->name))
            return al_err("tensor %s is no tensor of llama.cpp's %s", gguf_tensor_at(f, i)->name, arch);
    return AL_OK;
}

void gguf_arch_list(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NARCHS && n < cap; i++) {
        const char *sep = i == 0 ? "" : i + 1 == NARCHS ? " and " : ", ";
        int k = snprintf(buf + n, cap - n, "%s%s", sep, ARCHS[i].arch);
        n += k > 0 ? (size_t)k : 0;
    }
}

/* Role r's module (its name without the last dotted part when drop) in layer 0 as a glob over the layers
 * ("model.layers.*.self_attn"), or a model-level one's name ("lm_head"); "" when the layouts lack it. */
static void role_glob(const ModelConfig *c, tensor_role r, bool layer, bool drop, char *buf, size_t cap) {
    char name[256], pre[128];
    buf[0] = 0;
    if (!cfg_role_name(c, r, layer ? 0 : -1, 0, NULL, name, sizeof name)) return;
    char *dot = drop ? strrchr(name, '.') : NULL;
    if (dot) *dot = 0;
    cfg_layer_prefix(c, 0, pre, sizeof pre);
    size_t n = strlen(pre);
    if (layer && n >= 2 && strncmp(name, pre, n) == 0) snprintf(buf, cap, "%.*s*.%s", (int)(n - 2), pre, name + n);
    else snprintf(buf, cap, "%s", name);
}

/* A GGUF whose MXFP4 experts are kept (back_mx_split) reads as gpt-oss is released: config.json's
 * quantization_config (quant_method mxfp4; modules_to_not_convert the release's: the attention, the router,
 * the embeddings, lm_head), which the load checks the experts against and an export of it keeps beside their
 * blocks. *json printed again from j. */
static int back_mx_config(const ModelConfig *c, cJSON *j, char **json) {
    static const struct { tensor_role r; bool layer, drop; } keep[] = {
        {ROLE_Q, true, true}, {ROLE_ROUTER, true, false}, {ROLE_EMBED, false, false}, {ROLE_LM_HEAD, false, false}};
    cJSON *q = cJSON_AddObjectToObject(j, "quantization_config"), *l = cJSON_CreateArray();
    if (!q || !l || !cJSON_AddItemToObject(q, "modules_to_not_convert", l)) {
        cJSON_Delete(l);
        return al_err("out of memory");
    }
    char m[300];
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
        role_glob(c, keep[i].r, keep[i].layer, keep[i].drop, m, sizeof m);
        if (m[0] && !cJSON_AddItemToArray(l, cJSON_CreateString(m))) return al_err("out of memory");
    }
    if (!cJSON_AddStringToObject(q, "quant_method", "mxfp4")) return al_err("out of memory");
    free(*json);
    *json = cJSON_Print(j);
    return *json ? AL_OK : al_err("out of memory");
}

/* Opens the GGUF at path and maps its tensors back (*b, its entries placed; *json: its config.json text, caller
 * frees, as back_free frees *b's). */
static int back_open(const char *path, Back *b, char **json) {
    *json = NULL;
    *b = (Back){0};
    GgufFile *f;
    if (gguf_open(path, &f) != AL_OK) return AL_ERR;
    b->f = f;
    const char *arch = gguf_get_str(f, "general.architecture");
    const GgufArch *a = b->a = arch_row(arch);
    char known[160], shown[64];
    if (!a) gguf_arch_list(known, sizeof known);
    int rc = a ? AL_OK : al_err("%s: GGUF architecture '%s': attnlab reads %s", path,
                                arch ? al_printable(arch, shown, sizeof shown) : "(none)", known);
    cJSON *c = rc == AL_OK ? cJSON_CreateObject() : NULL;
    if (rc == AL_OK) rc = c ? a->cfg(f, a, c) : al_err("out of memory");
    *json = rc == AL_OK ? cJSON_Print(c) : NULL;
    int64_t layers = rc == AL_OK ? gint(f, a, "block_count", 0) : 0;
    if (rc == AL_OK && (layers < 0 || (uint64_t)layers > gguf_tensor_count(f)))   /* each layer holds tensors */
        rc = al_err("%s: %s.block_count %lld: the file holds %zu tensor%s", path, a->arch, (long long)layers,
                    gguf_tensor_count(f), al_s(gguf_tensor_count(f)));
    if (rc == AL_OK) rc = *json ? model_config_parse(*json, path, &b->c) : al_err("out of memory");
    if (rc == AL_OK) rc = back_collect(b);
    size_t mx = 0;
    if (rc == AL_OK) rc = back_mx_split(b, &mx);
    if (rc == AL_OK && mx) rc = back_mx_config(&b->c, c, json);
    cJSON_Delete(c);
    if (rc == AL_OK) back_place(b);
    return rc;
}

static void back_free(Back *b) {
    for (size_t i = 0; i < b->n; i++) free(b->ent[i].e.name);
    free(b->ent);
    gguf_close(b->f);
}

int gguf_model_open(const char *path, Store **store, char **config_json) {
    *store = NULL;
    *config_json = NULL;
    Back b;
    char *json;
    int rc = back_open(path, &b, &json);
    if (rc == AL_OK) rc = back_store(&b, path, store);
    back_free(&b);
    if (rc != AL_OK) { free(json); return rc; }
    *config_json = json;
    return AL_OK;
}

/* How many of the file's tensors of type t are kept in their dtype (*kept) and read widened (*wide; *why: the
 * reason of the last for a 16-bit float type, back_widened); every F32 one (rope_freqs too) is kept. */
static void back_count(const Back *b, gg_type t, size_t *kept, size_t *wide, const char **why) {
    *kept = *wide = 0;
    *why = NULL;
    for (size_t i = 0; t == GG_F32 && i < gguf_tensor_count(b->f); i++) *kept += gguf_tensor_at(b->f, i)->type == t;
    for (size_t i = 0; t != GG_F32 && i < b->n; i++)
        for (int k = 0; k < 2 && b->ent[i].mx != 2; k++) {       /* an MXFP4 weight counted once, by its blocks */
            const GgufTensor *g = b->ent[i].src[k];
            if (!g || g->type != t) continue;
            bool keep = b->ent[i].e.dtype != DT_F32;
            *kept += keep;
            *wide += !keep;
            if (!keep && back_widened(&b->ent[i])) *why = back_widened(&b->ent[i]);
        }
}

int gguf_stored_types(const char *path, char *buf, size_t cap) {
    static const gg_type T[] = {GG_BF16, GG_F16, GG_Q8_0, GG_MXFP4, GG_F32};
    if (cap) buf[0] = 0;
    Back b;
    char *json;
    int rc = back_open(path, &b, &json);
    free(json);
    size_t at = 0;
    for (size_t k = 0; rc == AL_OK && k < sizeof T / sizeof *T; k++) {
        size_t n[2];
        const char *why;
        back_count(&b, T[k], &n[0], &n[1], &why);
        for (int w = 0; w < 2; w++) {
            const char *how = T[k] == GG_F32 ? "" : w ? " read widened to F32" : " kept";
            if (n[w] && at < cap)
                at += (size_t)snprintf(buf + at, cap - at, "%s%zu %s%s%s%s%s", at ? ", " : "", n[w], gg_type_name(T[k]),
                                       how, why && w ? " (" : "", why && w ? why : "", why && w ? ")" : "");
        }
    }
    back_free(&b);
    return rc;
}
