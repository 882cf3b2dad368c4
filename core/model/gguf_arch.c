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

#include "al.h"

/* ================================================================ the table */

#define LLAMA_GLOBALS                                                                  \
    {"embed_tokens.weight", "token_embd.weight", XF_COPY, false, false},               \
    {"norm.weight", "output_norm.weight", XF_COPY, false, false},                       \
    {"lm_head.weight", "output.weight", XF_COPY, true, true}

#define LLAMA_MLP                                                                      \
    {"input_layernorm.weight", "attn_norm.weight", XF_COPY, false, false},             \
    {"post_attention_layernorm.weight", "ffn_norm.weight", XF_COPY, false, false},     \
    {"mlp.gate_proj.weight", "ffn_gate.weight", XF_COPY, false, false},                \
    {"mlp.up_proj.weight", "ffn_up.weight", XF_COPY, false, false},                    \
    {"mlp.down_proj.weight", "ffn_down.weight", XF_COPY, false, false}

static const GgufMap LLAMA_GLOB[] = {LLAMA_GLOBALS, {0}};
static const GgufMap LLAMA_LAYER[] = {
    LLAMA_MLP,
    {"self_attn.q_proj.weight", "attn_q.weight", XF_PERM_Q, false, false},
    {"self_attn.k_proj.weight", "attn_k.weight", XF_PERM_K, false, false},
    {"self_attn.v_proj.weight", "attn_v.weight", XF_COPY, false, false},
    {"self_attn.o_proj.weight", "attn_output.weight", XF_COPY, false, false},
    {"self_attn.q_proj.bias", "attn_q.bias", XF_PERM_Q, true, false},
    {"self_attn.k_proj.bias", "attn_k.bias", XF_PERM_K, true, false},
    {"self_attn.v_proj.bias", "attn_v.bias", XF_COPY, true, false},
    {"self_attn.o_proj.bias", "attn_output.bias", XF_COPY, true, false},
    {0}};
static const GgufMap QWEN2_LAYER[] = {
    LLAMA_MLP,
    {"self_attn.q_proj.weight", "attn_q.weight", XF_COPY, false, false},
    {"self_attn.k_proj.weight", "attn_k.weight", XF_COPY, false, false},
    {"self_attn.v_proj.weight", "attn_v.weight", XF_COPY, false, false},
    {"self_attn.o_proj.weight", "attn_output.weight", XF_COPY, false, false},
    {"self_attn.q_proj.bias", "attn_q.bias", XF_COPY, false, false},
    {"self_attn.k_proj.bias", "attn_k.bias", XF_COPY, false, false},
    {"self_attn.v_proj.bias", "attn_v.bias", XF_COPY, false, false},
    {0}};
#define QKVO_COPY                                                                      \
    {"self_attn.q_proj.weight", "attn_q.weight", XF_COPY, false, false},               \
    {"self_attn.k_proj.weight", "attn_k.weight", XF_COPY, false, false},               \
    {"self_attn.v_proj.weight", "attn_v.weight", XF_COPY, false, false},               \
    {"self_attn.o_proj.weight", "attn_output.weight", XF_COPY, false, false},          \
    {"self_attn.q_norm.weight", "attn_q_norm.weight", XF_COPY, false, false},          \
    {"self_attn.k_norm.weight", "attn_k_norm.weight", XF_COPY, false, false}
/* Qwen3: per-head q/k RMSNorms (head_dim), optional attention biases; llama.cpp's NEOX RoPE. */
static const GgufMap QWEN3_LAYER[] = {
    LLAMA_MLP,
    QKVO_COPY,
    {"self_attn.q_proj.bias", "attn_q.bias", XF_COPY, true, false},
    {"self_attn.k_proj.bias", "attn_k.bias", XF_COPY, true, false},
    {"self_attn.v_proj.bias", "attn_v.bias", XF_COPY, true, false},
    {"self_attn.o_proj.bias", "attn_output.bias", XF_COPY, true, false},
    {0}};
/* OLMo 2: post-norms only (post_attention_norm, post_ffw_norm), q/k RMSNorms over the whole
 * projection (H hd, KV hd); NEOX RoPE. */
static const GgufMap OLMO2_LAYER[] = {
    QKVO_COPY,
    {"post_attention_layernorm.weight", "post_attention_norm.weight", XF_COPY, false, false},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", XF_COPY, false, false},
    {"mlp.gate_proj.weight", "ffn_gate.weight", XF_COPY, false, false},
    {"mlp.up_proj.weight", "ffn_up.weight", XF_COPY, false, false},
    {"mlp.down_proj.weight", "ffn_down.weight", XF_COPY, false, false},
    {0}};
/* Phi-3: fused attn_qkv [Q ; K ; V] and ffn_up [gate ; up] as stored; partial NEOX RoPE. */
static const GgufMap PHI3_LAYER[] = {
    {"input_layernorm.weight", "attn_norm.weight", XF_COPY, false, false},
    {"post_attention_layernorm.weight", "ffn_norm.weight", XF_COPY, false, false},
    {"self_attn.qkv_proj.weight", "attn_qkv.weight", XF_COPY, false, false},
    {"self_attn.o_proj.weight", "attn_output.weight", XF_COPY, false, false},
    {"mlp.gate_up_proj.weight", "ffn_up.weight", XF_COPY, false, false},
    {"mlp.down_proj.weight", "ffn_down.weight", XF_COPY, false, false},
    {0}};
static const GgufMap GPT2_GLOB[] = {
    {"wte.weight", "token_embd.weight", XF_COPY, false, false},
    {"wpe.weight", "position_embd.weight", XF_COPY, false, false},
    {"ln_f.weight", "output_norm.weight", XF_COPY, false, false},
    {"ln_f.bias", "output_norm.bias", XF_COPY, false, false},
    {"lm_head.weight", "output.weight", XF_COPY, true, true},
    {0}};
static const GgufMap GPT2_LAYER[] = {
    {"ln_1.weight", "attn_norm.weight", XF_COPY, false, false},
    {"ln_1.bias", "attn_norm.bias", XF_COPY, false, false},
    {"attn.c_attn.weight", "attn_qkv.weight", XF_T, false, false},
    {"attn.c_attn.bias", "attn_qkv.bias", XF_COPY, false, false},
    {"attn.c_proj.weight", "attn_output.weight", XF_T, false, false},
    {"attn.c_proj.bias", "attn_output.bias", XF_COPY, false, false},
    {"ln_2.weight", "ffn_norm.weight", XF_COPY, false, false},
    {"ln_2.bias", "ffn_norm.bias", XF_COPY, false, false},
    {"mlp.c_fc.weight", "ffn_up.weight", XF_T, false, false},
    {"mlp.c_fc.bias", "ffn_up.bias", XF_COPY, false, false},
    {"mlp.c_proj.weight", "ffn_down.weight", XF_T, false, false},
    {"mlp.c_proj.bias", "ffn_down.bias", XF_COPY, false, false},
    {0}};
/* Gemma 2: sandwich norms stored as 1 + w (Gemma2Model.modify_tensors), GeGLU, tied output. */
static const GgufMap GEMMA_GLOB[] = {
    {"embed_tokens.weight", "token_embd.weight", XF_COPY, false, false},
    {"norm.weight", "output_norm.weight", XF_PLUS1, false, false},
    {"lm_head.weight", "output.weight", XF_COPY, true, true},
    {0}};
#define GEMMA_SANDWICH                                                                                \
    {"input_layernorm.weight", "attn_norm.weight", XF_PLUS1, false, false},                            \
    {"post_attention_layernorm.weight", "post_attention_norm.weight", XF_PLUS1, false, false},         \
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", XF_PLUS1, false, false},                   \
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", XF_PLUS1, false, false},             \
    {"self_attn.q_proj.weight", "attn_q.weight", XF_COPY, false, false},                               \
    {"self_attn.k_proj.weight", "attn_k.weight", XF_COPY, false, false},                               \
    {"self_attn.v_proj.weight", "attn_v.weight", XF_COPY, false, false},                               \
    {"self_attn.o_proj.weight", "attn_output.weight", XF_COPY, false, false},                          \
    {"mlp.gate_proj.weight", "ffn_gate.weight", XF_COPY, false, false},                                \
    {"mlp.up_proj.weight", "ffn_up.weight", XF_COPY, false, false},                                    \
    {"mlp.down_proj.weight", "ffn_down.weight", XF_COPY, false, false}
static const GgufMap GEMMA2_LAYER[] = {GEMMA_SANDWICH, {0}};
/* Gemma 3: Gemma 2's layer with per-head q/k RMSNorms, also stored as 1 + w. */
static const GgufMap GEMMA3_LAYER[] = {
    GEMMA_SANDWICH,
    {"self_attn.q_norm.weight", "attn_q_norm.weight", XF_PLUS1, false, false},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", XF_PLUS1, false, false},
    {0}};
/* GPT-NeoX (Pythia): LayerNorms with biases, fused attn_qkv reordered to [Q ; K ; V], GELU MLP
 * with biases, untied embed_out; partial NEOX RoPE (rope.dimension_count the rotated dims). */
static const GgufMap NEOX_GLOB[] = {
    {"embed_in.weight", "token_embd.weight", XF_COPY, false, false},
    {"final_layer_norm.weight", "output_norm.weight", XF_COPY, false, false},
    {"final_layer_norm.bias", "output_norm.bias", XF_COPY, false, false},
    {"embed_out.weight", "output.weight", XF_COPY, true, true},
    {0}};
static const GgufMap NEOX_LAYER[] = {
    {"input_layernorm.weight", "attn_norm.weight", XF_COPY, false, false},
    {"input_layernorm.bias", "attn_norm.bias", XF_COPY, false, false},
    {"attention.query_key_value.weight", "attn_qkv.weight", XF_QKV_HEADS, false, false},
    {"attention.query_key_value.bias", "attn_qkv.bias", XF_QKV_HEADS, true, false},
    {"attention.dense.weight", "attn_output.weight", XF_COPY, false, false},
    {"attention.dense.bias", "attn_output.bias", XF_COPY, true, false},
    {"post_attention_layernorm.weight", "ffn_norm.weight", XF_COPY, false, false},
    {"post_attention_layernorm.bias", "ffn_norm.bias", XF_COPY, false, false},
    {"mlp.dense_h_to_4h.weight", "ffn_up.weight", XF_COPY, false, false},
    {"mlp.dense_h_to_4h.bias", "ffn_up.bias", XF_COPY, false, false},
    {"mlp.dense_4h_to_h.weight", "ffn_down.weight", XF_COPY, false, false},
    {"mlp.dense_4h_to_h.bias", "ffn_down.bias", XF_COPY, false, false},
    {0}};
static const GgufMap DS2_LAYER[] = {
    LLAMA_MLP,
    {"self_attn.q_proj.weight", "attn_q.weight", XF_COPY, true, false},
    {"self_attn.q_a_proj.weight", "attn_q_a.weight", XF_LAT_Q, true, false},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight", XF_COPY, true, false},
    {"self_attn.q_b_proj.weight", "attn_q_b.weight", XF_COPY, true, false},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight", XF_LAT_KV, false, false},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight", XF_COPY, true, false},
    {"self_attn.kv_b_proj.weight", "attn_k_b.weight", XF_K_B, false, false},
    {"self_attn.kv_b_proj.weight", "attn_v_b.weight", XF_V_B, false, false},
    {"self_attn.o_proj.weight", "attn_output.weight", XF_COPY, false, false},
    {0}};

static int kv_llama(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
static int kv_smollm3(GgufWriter *w, const ModelConfig *c, const cJSON *tree, const GgufArch *a);
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

/* One row per family; the first row of an architecture is the one read back. */
static const GgufArch ARCHS[] = {
    {FAM_LLAMA, "llama", "llama", LLAMA_GLOB, LLAMA_LAYER, kv_llama, cfg_llama},
    {FAM_MISTRAL, "llama", "mistral", LLAMA_GLOB, LLAMA_LAYER, kv_llama, cfg_llama},
    {FAM_LLAMA2C, "llama", "llama", LLAMA_GLOB, LLAMA_LAYER, kv_llama, cfg_llama},
    {FAM_QWEN2, "qwen2", "qwen2", LLAMA_GLOB, QWEN2_LAYER, kv_llama, cfg_llama},
    {FAM_GPT2, "gpt2", "gpt2", GPT2_GLOB, GPT2_LAYER, kv_gpt2, cfg_gpt2},
    {FAM_DEEPSEEK, "deepseek2", "deepseek_v3", LLAMA_GLOB, DS2_LAYER, kv_ds2, cfg_ds2},
    {FAM_QWEN3, "qwen3", "qwen3", LLAMA_GLOB, QWEN3_LAYER, kv_llama, cfg_llama},
    {FAM_OLMO2, "olmo2", "olmo2", LLAMA_GLOB, OLMO2_LAYER, kv_llama, cfg_llama},
    {FAM_PHI3, "phi3", "phi3", LLAMA_GLOB, PHI3_LAYER, kv_phi3, cfg_phi3},
    {FAM_GEMMA2, "gemma2", "gemma2", GEMMA_GLOB, GEMMA2_LAYER, kv_gemma2, cfg_gemma2},
    {FAM_GEMMA3, "gemma3", "gemma3_text", GEMMA_GLOB, GEMMA3_LAYER, kv_gemma2, cfg_gemma2},
    {FAM_NEOX, "gptneox", "gpt_neox", NEOX_GLOB, NEOX_LAYER, kv_neox, cfg_neox},
    {FAM_SMOLLM3, "smollm3", "smollm3", LLAMA_GLOB, LLAMA_LAYER, kv_smollm3, cfg_llama},
};
#define NARCHS (sizeof ARCHS / sizeof ARCHS[0])

/* Architectures whose q / k rows llama.cpp's converter permutes (LlamaModel's, and SmolLM3Model's,
 * which is one): the reader undoes it. */
static bool arch_permuted(const GgufArch *a) { return !strcmp(a->arch, "llama") || !strcmp(a->arch, "smollm3"); }

bool gguf_arch_output_required(const char *arch) {
    static const char *const req[] = {"deepseek2", "olmo2", "gptneox", NULL};
    for (size_t i = 0; arch && req[i]; i++)
        if (strcmp(arch, req[i]) == 0) return true;
    return false;
}

const GgufArch *gguf_arch_row(const ModelConfig *c) {
    for (size_t i = 0; i < NARCHS; i++)
        if (ARCHS[i].fam == c->family) return &ARCHS[i];
    const char *arch = cfg_row(c)->gguf_arch;      /* a row sharing another's architecture (qwen3_moe, kimi_k2) */
    for (size_t i = 0; arch && i < NARCHS; i++)
        if (!strcmp(ARCHS[i].arch, arch)) return &ARCHS[i];
    return NULL;
}

char *gguf_layer_name(const GgufMap *t, int layer) {
    return layer >= 0 ? al_asprintf("blk.%d.%s", layer, t->gg) : al_strdup(t->gg);
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
    if (!rc && c->family == FAM_QWEN2 && c->sliding_window > 0 && cfg_layer_window(c, c->n_layers - 1) > 0)
        rc = al_err("Qwen2 with use_sliding_window: llama.cpp's qwen2 has no sliding window");
    if (!rc && c->family == FAM_MISTRAL && c->sliding_window > 0)
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
            return al_err("smollm3 with use_sliding_window (layer %d: %zu tokens): llama.cpp's smollm3 has no sliding "
                          "window", L, cfg_layer_window(c, L));
    }
    return kv_llama(w, c, tree, a);
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
    bool g2 = c->family == FAM_GEMMA2;   /* Gemma 3 has no soft-caps; its local layers their own base */
    if (!rc && (g2 || c->attn_softcap > 0))
        rc = gguf_set_f32(w, gguf_arch_key(a, "attn_logit_softcapping"), (float)c->attn_softcap);
    if (!rc && (g2 || c->final_softcap > 0))
        rc = gguf_set_f32(w, gguf_arch_key(a, "final_logit_softcapping"), (float)c->final_softcap);
    if (!rc && !g2 && c->rope_spec.local_theta > 0)
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
    const GgufTensor *emb = gguf_tensor_find(f, "token_embd.weight");
    if (!emb || emb->ndim != 2) return al_err("%s: no 2-D token_embd.weight", gguf_path(f));
    int64_t vocab = gint(f, a, "vocab_size", (int64_t)emb->ne[1]);
    cJSON_AddStringToObject(c, "model_type", a->model_type);
    add_int(c, hf_names ? "hidden_size" : "n_embd", gint(f, a, "embedding_length", 0));
    add_int(c, hf_names ? "num_hidden_layers" : "n_layer", gint(f, a, "block_count", 0));
    add_int(c, hf_names ? "num_attention_heads" : "n_head", gint(f, a, "attention.head_count", 0));
    add_int(c, hf_names ? "max_position_embeddings" : "n_positions", gint(f, a, "context_length", 2048));
    add_int(c, "vocab_size", vocab);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", !gguf_tensor_find(f, "output.weight"));
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

static int cfg_llama(const GgufFile *f, const GgufArch *a, cJSON *c) {
    int64_t H = gint(f, a, "attention.head_count", 1), D = gint(f, a, "embedding_length", 0);
    int rc = cfg_common(f, a, c, true);
    add_int(c, "num_key_value_heads", gint(f, a, "attention.head_count_kv", H));
    add_int(c, "head_dim", gint(f, a, "attention.key_length", H ? D / H : 0));
    int64_t sw = gint(f, a, "attention.sliding_window", 0);
    if (sw > 0) {
        cJSON_ReplaceItemInObject(c, "model_type", cJSON_CreateString("mistral"));
        add_int(c, "sliding_window", sw);
    }
    if (strcmp(a->arch, "llama") == 0)
        cJSON_AddBoolToObject(c, "attention_bias", gguf_tensor_find(f, "blk.0.attn_q.bias") != NULL);
    else
        cJSON_AddBoolToObject(c, "use_sliding_window", false);
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
    cJSON_AddBoolToObject(c, "attention_bias", gguf_tensor_find(f, "blk.0.attn_qkv.bias") != NULL);
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
    if (a->fam == FAM_GEMMA3) cJSON_AddNumberToObject(c, "rope_local_base_freq", gnum(f, a, "rope.freq_base_swa", 10000.0));
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
    st_entry e;               /* HF name, F32, shape, offsets in the buffer */
    const GgufTensor *src[2]; /* kv_b_proj: attn_k_b, attn_v_b */
    gguf_xf xf;
} LEnt;

typedef struct {
    const GgufFile *f;
    const GgufArch *a;
    ModelConfig c;            /* the dims the transforms need */
    LEnt *ent;
    size_t n, cap, off;
} Back;

static char *back_hf_name(const GgufArch *a, const GgufMap *t, int layer) {
    bool gpt2 = a->fam == FAM_GPT2, neox = a->fam == FAM_NEOX;
    if (layer < 0)
        return t->abs ? al_strdup(t->hf) : al_asprintf("%s%s", gpt2 ? "transformer." : neox ? "gpt_neox." : "model.", t->hf);
    return al_asprintf(gpt2 ? "transformer.h.%d.%s" : neox ? "gpt_neox.layers.%d.%s" : "model.layers.%d.%s", layer, t->hf);
}

/* Checks a tensor's ne against the dims the transform expects. */
static int back_check(const Back *b, const GgufTensor *g, uint64_t n0, uint64_t n1, uint64_t n2) {
    if (g->ne[0] != n0 || g->ne[1] != n1 || g->ne[2] != n2 || g->ndim > 3)
        return al_err("%s: %s has shape {%llu, %llu, %llu}, the metadata implies {%llu, %llu, %llu}", gguf_path(b->f),
                      g->name, (unsigned long long)g->ne[0], (unsigned long long)g->ne[1], (unsigned long long)g->ne[2],
                      (unsigned long long)n0, (unsigned long long)n1, (unsigned long long)n2);
    return AL_OK;
}

static int back_add(Back *b, const GgufMap *t, int layer, const GgufTensor *g) {
    const ModelConfig *c = &b->c;
    char *hf = back_hf_name(b->a, t, layer);
    if (!hf) return AL_ERR;
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
    l->e.dtype = DT_F32;
    l->src[0] = g;
    l->xf = t->xf;
    size_t R = (size_t)g->ne[1], C = (size_t)g->ne[0];
    int rc = AL_OK;
    if (t->xf == XF_K_B) {
        rc = back_check(b, g, (uint64_t)c->qk_nope_dim, (uint64_t)c->kv_lora_rank, (uint64_t)c->n_heads);
        R = (size_t)c->n_heads * (size_t)(c->qk_nope_dim + c->v_dim);
        C = (size_t)c->kv_lora_rank;
    } else if (g->ndim > 2) rc = al_err("%s: %s has %d dims, expected at most 2", gguf_path(b->f), g->name, g->ndim);
    if (t->xf == XF_T) { size_t s = R; R = C; C = s; }
    if (t->xf == XF_QKV_HEADS && (!c->n_heads || (g->ndim == 1 ? C : R) % (3 * (size_t)c->n_heads)))
        rc = al_err("%s: %s: %zu rows do not split into 3 x %d heads", gguf_path(b->f), g->name, g->ndim == 1 ? C : R,
                    c->n_heads);
    if ((t->xf == XF_PERM_Q || t->xf == XF_PERM_K) && arch_permuted(b->a)) {
        size_t heads = (size_t)(t->xf == XF_PERM_Q ? c->n_heads : c->n_kv_heads), rows = g->ndim == 1 ? C : R;
        if (!heads || rows % heads || (rows / heads) % 2)
            rc = al_err("%s: %s: %zu rows do not split into %zu heads of pairs", gguf_path(b->f), g->name, rows, heads);
    }
    l->e.ndim = g->ndim == 1 ? 1 : 2;
    l->e.shape[0] = g->ndim == 1 ? C : R;
    l->e.shape[1] = g->ndim == 1 ? 0 : C;
    l->e.begin = b->off;
    l->e.end = b->off + R * C * sizeof(float);
    b->off = l->e.end;
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
    for (const GgufMap *t = b->a->glob; rc == AL_OK && t->hf; t++) {
        const GgufTensor *g = gguf_tensor_find(b->f, t->gg);
        if (g) { rc = back_add(b, t, -1, g); seen++; }
    }
    for (int L = 0; rc == AL_OK && L < b->c.n_layers; L++)
        for (const GgufMap *t = b->a->layer; rc == AL_OK && t->hf; t++) {
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

static int back_store(Back *b, const char *path, Store **store) {
    size_t size = b->off ? b->off : 1;
    uint8_t *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return al_err("%s: cannot allocate %zu bytes for its tensors", path, size);
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < b->n; i++) rc = back_fill(b, &b->ent[i], (float *)(map + b->ent[i].e.begin));
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
    for (const GgufMap *t = a->glob; t->hf; t++)
        if (strcmp(t->gg, name) == 0) return true;
    int L, n = 0;
    if (sscanf(name, "blk.%d.%n", &L, &n) != 1 || n == 0) return false;
    for (const GgufMap *t = a->layer; t->hf; t++)
        if (strcmp(t->gg, name + n) == 0) return true;
    return false;
}

int gguf_check_tensors(const GgufFile *f, bool *checked) {
    const char *arch = gguf_get_str(f, "general.architecture");
    const GgufArch *a = NULL;
    for (size_t i = 0; arch && !a && i < NARCHS; i++)
        if (strcmp(ARCHS[i].arch, arch) == 0) a = &ARCHS[i];
    *checked = a != NULL;
    if (!a) return AL_OK;
    int64_t layers = gint(f, a, "block_count", 0), hidden = gint(f, a, "embedding_length", 0);
    for (const GgufMap *t = a->glob; t->hf; t++)
        if (!t->opt && !gguf_tensor_find(f, t->gg)) return al_err("no tensor %s, which llama.cpp's %s needs", t->gg, arch);
    for (int64_t L = 0; L < layers; L++)
        for (const GgufMap *t = a->layer; t->hf; t++) {
            if (t->opt) continue;
            char *gg = gguf_layer_name(t, (int)L);
            bool has = gg && gguf_tensor_find(f, gg);
            int rc = has ? AL_OK : al_err("no tensor %s, which llama.cpp's %s needs", gg ? gg : t->gg, arch);
            free(gg);
            if (rc) return rc;
        }
    const GgufTensor *e = gguf_tensor_find(f, "token_embd.weight");
    if (e && (e->ndim != 2 || (int64_t)e->ne[0] != hidden))
        return al_err("token_embd.weight has %d dims of which the first is %llu: llama.cpp expects (%lld, vocab)", e->ndim,
                      (unsigned long long)e->ne[0], (long long)hidden);
    for (size_t i = 0; i < gguf_tensor_count(f); i++)
        if (!row_has(a, gguf_tensor_at(f, i)->name))
            return al_err("tensor %s is no tensor of llama.cpp's %s", gguf_tensor_at(f, i)->name, arch);
    return AL_OK;
}

int gguf_model_open(const char *path, Store **store, char **config_json) {
    *store = NULL;
    *config_json = NULL;
    GgufFile *f;
    if (gguf_open(path, &f) != AL_OK) return AL_ERR;
    const char *arch = gguf_get_str(f, "general.architecture");
    const GgufArch *a = NULL;
    for (size_t i = 0; arch && !a && i < NARCHS; i++)
        if (strcmp(ARCHS[i].arch, arch) == 0) a = &ARCHS[i];
    int rc = a ? AL_OK
               : al_err("%s: GGUF architecture '%s': attnlab reads llama, qwen2, qwen3, olmo2, phi3, gemma2, gemma3, gptneox, gpt2 and "
                        "deepseek2", path, arch ? arch : "(none)");
    cJSON *c = rc == AL_OK ? cJSON_CreateObject() : NULL;
    if (rc == AL_OK) rc = c ? a->cfg(f, a, c) : al_err("out of memory");
    char *json = rc == AL_OK ? cJSON_Print(c) : NULL;
    cJSON_Delete(c);
    Back b = {.f = f, .a = a};
    if (rc == AL_OK) rc = json ? model_config_parse(json, path, &b.c) : al_err("out of memory");
    if (rc == AL_OK) rc = back_collect(&b);
    if (rc == AL_OK) rc = back_store(&b, path, store);
    for (size_t i = 0; i < b.n; i++) free(b.ent[i].e.name);
    free(b.ent);
    gguf_close(f);
    if (rc != AL_OK) { free(json); return rc; }
    *config_json = json;
    return AL_OK;
}

