/* mla_gaps.c -- the table of features DeepSeek-V3's stock layout cannot hold (see mla_gaps.h), and
 * the refusal it makes. Owns nothing: static rows. */
#define _GNU_SOURCE
#include "mla_gaps.h"

#include "analyses.h"

#include <stdio.h>
#include <string.h>

static bool has_window(const ModelConfig *c) {
    for (int l = 0; l < c->n_layers; l++)
        if (cfg_layer_window(c, l) > 0) return true;
    return false;
}
static bool has_sinks(const ModelConfig *c) { return c->attn_sinks; }
static bool has_gate(const ModelConfig *c) { return c->attn_gate; }
static bool has_qk_norm(const ModelConfig *c) { return c->qk_norm != QKN_NONE || c->qk_l2; }
static bool has_nope_layers(const ModelConfig *c) { char l[8]; return cfg_nope_layers(c, l, sizeof l) > 0; }
static bool has_layer_theta(const ModelConfig *c) {
    for (int l = 0; c->rope != ROPE_NONE && l < c->n_layers; l++)
        if (cfg_layer_theta(c, l) != c->rope_spec.theta || !cfg_layer_rope_scaled(c, l)) return true;
    return false;
}
static bool has_no_rope(const ModelConfig *c) { return c->rope == ROPE_NONE; }
static bool has_parallel(const ModelConfig *c) { return c->block == BLOCK_PARALLEL; }
static bool has_block_norms(const ModelConfig *c) { return c->block != BLOCK_PRE && c->block != BLOCK_PARALLEL; }
static bool has_layernorm(const ModelConfig *c) { return c->norm != NORM_RMS; }
static bool has_embed_scale(const ModelConfig *c) { return c->embed_scale != 1.0; }
static bool has_attn_softcap(const ModelConfig *c) { return c->attn_softcap > 0; }
static bool has_final_softcap(const ModelConfig *c) { return c->final_softcap > 0; }
static bool has_tower(const ModelConfig *c) { return cfg_row(c)->text_config != NULL; }
static bool has_moe_router(const ModelConfig *c) { return !analysis_moe_exportable(c, NULL, 0); }

static const MlaGap ROWS[] = {
    {"sliding window", "no sliding_window / layer_types", "a window per layer in DeepseekV3Attention's mask and "
     "vLLM's / SGLang's MLA backends", has_window},
    {"attention sinks", "no sink logit per head", "gpt-oss's sink term in each engine's MLA softmax", has_sinks},
    {"output gate", "no gate on the attention output", "Qwen3-Next's sigmoid output gate in the DeepSeek attention",
     has_gate},
    {"q/k norm", "no key norm (a per-token norm cannot act on the cached latent)", "keys normalised after kv_b_proj, "
     "which no absorbed MLA decode (vLLM, SGLang) does", has_qk_norm},
    {"NoPE layers", "one RoPE for every layer (a NoPE layer converts with RoPE frequencies 0)", "per-layer NoPE "
     "(SmolLM3's no_rope_layers) in the DeepSeek attention", has_nope_layers},
    {"no RoPE", "a RoPE key in every layer (qk_rope_head_dim > 0)", "an MLA without a RoPE part (qk_rope_head_dim 0: "
     "the whole key in the latent), which vLLM's and SGLang's MLA kernels do not take", has_no_rope},
    {"per-layer RoPE base", "one rope_theta for every layer", "Gemma 3's rope_local_base_freq (no rope_scaling) on "
     "the sliding layers", has_layer_theta},
    {"parallel residual", "no parallel blocks (other norms around the blocks)", "GPT-NeoX's use_parallel_residual in "
     "the DeepSeek decoder layer", has_parallel},
    {"block norms", "no post-attention / post-feedforward norms", "Gemma's / OLMo 2's extra norms in the decoder layer", has_block_norms},
    {"LayerNorm", "plain RMSNorm only", "the source's norm in DeepseekV3RMSNorm", has_layernorm},
    {"embedding scale", "no embedding multiplier", "a sqrt(hidden) embedding multiplier", has_embed_scale},
    {"attention soft-cap", "no logit soft-cap", "a tanh cap in the MLA softmax (no MLA kernel has one)",
     has_attn_softcap},
    {"final soft-cap", "no final_logit_softcapping", "a final cap in DeepseekV3ForCausalLM", has_final_softcap},
    {"multimodal tower", "a text-only layout", "the tower's config and names rewritten as a text model (attnlab does "
     "not yet)", has_tower},
    {"MoE router", "softmax top-k experts (moe_export.h) or DeepSeek's own routing only", "this router in vLLM's / "
     "SGLang's DeepSeek MoE (`info` says which part)", has_moe_router},
};

const MlaGap *mla_gaps_row(size_t i) { return i < sizeof ROWS / sizeof *ROWS ? &ROWS[i] : NULL; }

/* True when row i applies to c. */
static bool applies(size_t i, const ModelConfig *c, bool qk_norm_plain) {
    return ROWS[i].has(c) && !(qk_norm_plain && ROWS[i].has == has_qk_norm);
}

bool mla_gaps_none(const ModelConfig *c, bool qk_norm_plain) {
    for (size_t i = 0; i < sizeof ROWS / sizeof *ROWS; i++)
        if (applies(i, c, qk_norm_plain)) return false;
    return true;
}

int mla_gaps_check(const ModelConfig *c, bool qk_norm_plain) {
    char msg[1024] = "";
    for (size_t i = 0; i < sizeof ROWS / sizeof *ROWS; i++) {
        if (!applies(i, c, qk_norm_plain)) continue;
        size_t n = strlen(msg);
        snprintf(msg + n, sizeof msg - n, "%s%s (DeepSeek-V3 has %s; needs %s)", n ? "; " : "", ROWS[i].feature, ROWS[i].lacks,
                 ROWS[i].needs);
    }
    if (!msg[0]) return AL_OK;
    return al_err("export: no stock DeepSeek-V3 form for %s's %s; the conversion runs in the session (ppl, check); "
                  "`export DIR format attnlab` saves it in attnlab's own layout",
                  c->model_type, msg);
}
