/* family.c -- the family table (one row per model_type) and the Hugging Face names of each tensor
 * role in each layout. See family.h. Rows are written from the families' transformers
 * configuration classes (defaults) and modeling files (layouts, traits). */
#include "family.h"

#include <stdio.h>
#include <string.h>

/* ================================================================ role names per layout */

#define N(s) {s, false, false}
#define OPT(s) {s, true, false}

static const RoleName ATTN_NAMES[ATTN_LAYOUT_COUNT][ROLE_COUNT] = {
    [QKV_SPLIT] = {[ROLE_Q] = N("self_attn.q_proj"), [ROLE_K] = N("self_attn.k_proj"), [ROLE_V] = N("self_attn.v_proj"),
                   [ROLE_O] = N("self_attn.o_proj"), [ROLE_Q_NORM] = OPT("self_attn.q_norm"),
                   [ROLE_K_NORM] = OPT("self_attn.k_norm"), [ROLE_SINKS] = OPT("self_attn.sinks"),
                   /* attnlab's layout of a qk-norm keep conversion (config kv_rebuild): K / V rebuilt from a cache */
                   [ROLE_KV_A] = OPT("self_attn.kv_a_proj_with_mqa"), [ROLE_KV_B] = OPT("self_attn.kv_b_proj")},
    [QKV_CAT] = {[ROLE_QKV] = N("self_attn.qkv_proj"), [ROLE_O] = N("self_attn.o_proj")},
    [QKV_HEADS] = {[ROLE_QKV] = N("attention.query_key_value"), [ROLE_O] = N("attention.dense")},
    [QKV_CONV1D] = {[ROLE_QKV] = N("attn.c_attn"), [ROLE_O] = N("attn.c_proj")},
    [QKV_MLA] = {[ROLE_Q] = OPT("self_attn.q_proj"), [ROLE_Q_A] = OPT("self_attn.q_a_proj"),
                 [ROLE_Q_A_NORM] = OPT("self_attn.q_a_layernorm"), [ROLE_Q_B] = OPT("self_attn.q_b_proj"),
                 [ROLE_KV_A] = N("self_attn.kv_a_proj_with_mqa"), [ROLE_KV_A_NORM] = OPT("self_attn.kv_a_layernorm"),
                 [ROLE_KV_B] = N("self_attn.kv_b_proj"), [ROLE_O] = N("self_attn.o_proj"),
                 [ROLE_IDX_Q_B] = OPT("self_attn.indexer.wq_b"), [ROLE_IDX_K] = OPT("self_attn.indexer.wk"),
                 [ROLE_IDX_K_NORM] = OPT("self_attn.indexer.k_norm"), [ROLE_IDX_W] = OPT("self_attn.indexer.weights_proj"),
                 [ROLE_SINKS] = OPT("self_attn.sinks"), [ROLE_ROPE_FREQ] = OPT("self_attn.rope_inv_freq")},
    [QKV_DSV4] = {[ROLE_Q_A] = N("attn.wq_a"), [ROLE_Q_A_NORM] = N("attn.q_norm"), [ROLE_Q_B] = N("attn.wq_b"),
                  [ROLE_KV_A] = N("attn.wkv"), [ROLE_KV_A_NORM] = N("attn.kv_norm"), [ROLE_O_A] = N("attn.wo_a"),
                  [ROLE_O] = N("attn.wo_b"), [ROLE_SINKS] = N("attn.attn_sink"), [ROLE_CMP_WKV] = OPT("attn.compressor.wkv"),
                  [ROLE_IDX_Q_B] = OPT("attn.indexer.wq_b"), [ROLE_IDX_W] = OPT("attn.indexer.weights_proj"),
                  [ROLE_HC_ATTN_FN] = OPT("hc_attn_fn")},
    [QKV_MIXER] = {[ROLE_Q] = N("mixer.q_proj"), [ROLE_K] = N("mixer.k_proj"), [ROLE_V] = N("mixer.v_proj"),
                   [ROLE_O] = N("mixer.o_proj")},
};

static const RoleName NORM_NAMES[NORM_NAMES_COUNT][ROLE_COUNT] = {
    [NORMS_LLAMA] = {[ROLE_NORM_ATTN_IN] = N("input_layernorm"), [ROLE_NORM_FFN_IN] = N("post_attention_layernorm")},
    [NORMS_SANDWICH] = {[ROLE_NORM_ATTN_IN] = N("input_layernorm"), [ROLE_NORM_ATTN_OUT] = N("post_attention_layernorm"),
                        [ROLE_NORM_FFN_IN] = N("pre_feedforward_layernorm"),
                        [ROLE_NORM_FFN_OUT] = N("post_feedforward_layernorm")},
    [NORMS_POST] = {[ROLE_NORM_ATTN_OUT] = N("post_attention_layernorm"),
                    [ROLE_NORM_FFN_OUT] = N("post_feedforward_layernorm")},
    [NORMS_GPT2] = {[ROLE_NORM_ATTN_IN] = N("ln_1"), [ROLE_NORM_FFN_IN] = N("ln_2")},
    [NORMS_MIXER] = {[ROLE_NORM_ATTN_IN] = N("norm")},
    [NORMS_DSV4] = {[ROLE_NORM_ATTN_IN] = N("attn_norm"), [ROLE_NORM_FFN_IN] = N("ffn_norm")},
    [NORMS_GEMMA4] = {[ROLE_NORM_ATTN_IN] = N("input_layernorm"), [ROLE_NORM_ATTN_OUT] = N("post_attention_layernorm"),
                      [ROLE_NORM_FFN_IN] = N("pre_feedforward_layernorm"),
                      [ROLE_NORM_FFN_OUT] = N("post_feedforward_layernorm"), [ROLE_LAYER_SCALAR] = N("layer_scalar"),
                      [ROLE_PLE_GATE] = OPT("per_layer_input_gate"), [ROLE_PLE_PROJ] = OPT("per_layer_projection"),
                      [ROLE_PLE_NORM] = OPT("post_per_layer_input_norm"), [ROLE_G4_ROUTER] = OPT("router.proj"),
                      [ROLE_G4_ROUTER_SCALE] = OPT("router.scale"), [ROLE_G4_EXPERT_SCALE] = OPT("router.per_expert_scale"),
                      [ROLE_G4_EXPS_GATE_UP] = OPT("experts.gate_up_proj"), [ROLE_G4_EXPS_DOWN] = OPT("experts.down_proj"),
                      [ROLE_NORM_FFN_OUT1] = OPT("post_feedforward_layernorm_1"),
                      [ROLE_NORM_FFN_OUT2] = OPT("post_feedforward_layernorm_2"),
                      [ROLE_NORM_FFN_IN2] = OPT("pre_feedforward_layernorm_2")},
};

static const RoleName FFN_NAMES[FFN_LAYOUT_COUNT][ROLE_COUNT] = {
    [FFN_GATED] = {[ROLE_FFN_GATE] = N("mlp.gate_proj"), [ROLE_FFN_UP] = N("mlp.up_proj"),
                   [ROLE_FFN_DOWN] = N("mlp.down_proj")},
    [FFN_FUSED] = {[ROLE_FFN_GATE_UP] = N("mlp.gate_up_proj"), [ROLE_FFN_DOWN] = N("mlp.down_proj")},
    [FFN_CONV1D] = {[ROLE_FFN_UP] = N("mlp.c_fc"), [ROLE_FFN_DOWN] = N("mlp.c_proj")},
    [FFN_NEOX] = {[ROLE_FFN_UP] = N("mlp.dense_h_to_4h"), [ROLE_FFN_DOWN] = N("mlp.dense_4h_to_h")},
    [FFN_LLAMA4] = {[ROLE_FFN_GATE] = N("feed_forward.gate_proj"), [ROLE_FFN_UP] = N("feed_forward.up_proj"),
                    [ROLE_FFN_DOWN] = N("feed_forward.down_proj")},
    [FFN_MIXER] = {[ROLE_FFN_UP] = N("mixer.up_proj"), [ROLE_FFN_DOWN] = N("mixer.down_proj")},
    [FFN_GRANITE] = {[ROLE_FFN_GATE_UP] = N("shared_mlp.input_linear"), [ROLE_FFN_DOWN] = N("shared_mlp.output_linear")},
};

static const RoleName MOE_NAMES[MOE_LAYOUT_COUNT][ROLE_COUNT] = {
    [MOE_MIXTRAL] = {[ROLE_ROUTER] = N("block_sparse_moe.gate"), [ROLE_EXP_GATE] = N("block_sparse_moe.experts.%d.w1"),
                     [ROLE_EXP_UP] = N("block_sparse_moe.experts.%d.w3"),
                     [ROLE_EXP_DOWN] = N("block_sparse_moe.experts.%d.w2")},
    [MOE_MINIMAX] = {[ROLE_ROUTER] = N("block_sparse_moe.gate"),
                     [ROLE_ROUTER_BIAS] = OPT("block_sparse_moe.e_score_correction_bias"),
                     [ROLE_EXP_GATE] = N("block_sparse_moe.experts.%d.w1"), [ROLE_EXP_UP] = N("block_sparse_moe.experts.%d.w3"),
                     [ROLE_EXP_DOWN] = N("block_sparse_moe.experts.%d.w2")},
    [MOE_QWEN] = {[ROLE_ROUTER] = N("mlp.gate"), [ROLE_EXP_GATE] = N("mlp.experts.%d.gate_proj"),
                  [ROLE_EXP_UP] = N("mlp.experts.%d.up_proj"), [ROLE_EXP_DOWN] = N("mlp.experts.%d.down_proj")},
    [MOE_DEEPSEEK] = {[ROLE_ROUTER] = N("mlp.gate"), [ROLE_ROUTER_BIAS] = OPT("mlp.gate.e_score_correction_bias"),
                      [ROLE_EXP_GATE] = N("mlp.experts.%d.gate_proj"), [ROLE_EXP_UP] = N("mlp.experts.%d.up_proj"),
                      [ROLE_EXP_DOWN] = N("mlp.experts.%d.down_proj"),
                      [ROLE_SHEXP_GATE] = OPT("mlp.shared_experts.gate_proj"),
                      [ROLE_SHEXP_UP] = OPT("mlp.shared_experts.up_proj"),
                      [ROLE_SHEXP_DOWN] = OPT("mlp.shared_experts.down_proj")},
    [MOE_GPT_OSS] = {[ROLE_ROUTER] = N("mlp.router"), [ROLE_EXPS_GATE_UP] = N("mlp.experts.gate_up_proj"),
                     [ROLE_EXPS_GATE_UP_BIAS] = N("mlp.experts.gate_up_proj_bias"),
                     [ROLE_EXPS_DOWN] = N("mlp.experts.down_proj"), [ROLE_EXPS_DOWN_BIAS] = N("mlp.experts.down_proj_bias")},
    [MOE_QWEN_NEXT] = {[ROLE_ROUTER] = N("mlp.gate"), [ROLE_EXP_GATE] = N("mlp.experts.%d.gate_proj"),
                       [ROLE_EXP_UP] = N("mlp.experts.%d.up_proj"), [ROLE_EXP_DOWN] = N("mlp.experts.%d.down_proj"),
                       [ROLE_SHEXP_GATE] = N("mlp.shared_expert.gate_proj"),
                       [ROLE_SHEXP_UP] = N("mlp.shared_expert.up_proj"),
                       [ROLE_SHEXP_DOWN] = N("mlp.shared_expert.down_proj"),
                       [ROLE_SHEXP_SCALE] = N("mlp.shared_expert_gate")},
    [MOE_QWEN3_5] = {[ROLE_ROUTER] = N("mlp.gate"), [ROLE_EXPS_GATE_UP] = N("mlp.experts.gate_up_proj"),
                     [ROLE_EXPS_DOWN] = N("mlp.experts.down_proj"), [ROLE_SHEXP_GATE] = N("mlp.shared_expert.gate_proj"),
                     [ROLE_SHEXP_UP] = N("mlp.shared_expert.up_proj"),
                     [ROLE_SHEXP_DOWN] = N("mlp.shared_expert.down_proj"),
                     [ROLE_SHEXP_SCALE] = N("mlp.shared_expert_gate")},
    [MOE_QWEN3_VL] = {[ROLE_ROUTER] = N("mlp.gate"), [ROLE_EXPS_GATE_UP] = N("mlp.experts.gate_up_proj"),
                      [ROLE_EXPS_DOWN] = N("mlp.experts.down_proj")},
    [MOE_LLAMA4] = {[ROLE_ROUTER] = N("feed_forward.router"), [ROLE_EXPS_GATE_UP] = N("feed_forward.experts.gate_up_proj"),
                    [ROLE_EXPS_DOWN] = N("feed_forward.experts.down_proj"),
                    [ROLE_SHEXP_GATE] = N("feed_forward.shared_expert.gate_proj"),
                    [ROLE_SHEXP_UP] = N("feed_forward.shared_expert.up_proj"),
                    [ROLE_SHEXP_DOWN] = N("feed_forward.shared_expert.down_proj")},
    [MOE_LLAMA4_SPLIT] = {[ROLE_ROUTER] = N("feed_forward.router"), [ROLE_EXP_GATE] = N("feed_forward.experts.%d.gate_proj"),
                          [ROLE_EXP_UP] = N("feed_forward.experts.%d.up_proj"),
                          [ROLE_EXP_DOWN] = N("feed_forward.experts.%d.down_proj"),
                          [ROLE_SHEXP_GATE] = N("feed_forward.shared_expert.gate_proj"),
                          [ROLE_SHEXP_UP] = N("feed_forward.shared_expert.up_proj"),
                          [ROLE_SHEXP_DOWN] = N("feed_forward.shared_expert.down_proj")},
    [MOE_KIMI] = {[ROLE_ROUTER] = N("block_sparse_moe.gate"),
                  [ROLE_ROUTER_BIAS] = OPT("block_sparse_moe.gate.e_score_correction_bias"),
                  [ROLE_EXP_GATE] = N("block_sparse_moe.experts.%d.w1"), [ROLE_EXP_UP] = N("block_sparse_moe.experts.%d.w3"),
                  [ROLE_EXP_DOWN] = N("block_sparse_moe.experts.%d.w2"),
                  [ROLE_SHEXP_GATE] = OPT("block_sparse_moe.shared_experts.gate_proj"),
                  [ROLE_SHEXP_UP] = OPT("block_sparse_moe.shared_experts.up_proj"),
                  [ROLE_SHEXP_DOWN] = OPT("block_sparse_moe.shared_experts.down_proj")},
    [MOE_NEMOTRON] = {[ROLE_ROUTER] = N("mixer.gate"), [ROLE_ROUTER_BIAS] = OPT("mixer.gate.e_score_correction_bias"),
                      [ROLE_EXP_UP] = N("mixer.experts.%d.up_proj"), [ROLE_EXP_DOWN] = N("mixer.experts.%d.down_proj"),
                      [ROLE_SHEXP_UP] = N("mixer.shared_experts.up_proj"),
                      [ROLE_SHEXP_DOWN] = N("mixer.shared_experts.down_proj")},
    [MOE_DSV4] = {[ROLE_ROUTER] = N("ffn.gate"), [ROLE_ROUTER_BIAS] = OPT("ffn.gate.bias"),
                  [ROLE_EXP_GATE] = N("ffn.experts.%d.w1"), [ROLE_EXP_UP] = N("ffn.experts.%d.w3"),
                  [ROLE_EXP_DOWN] = N("ffn.experts.%d.w2"), [ROLE_SHEXP_GATE] = OPT("ffn.shared_experts.w1"),
                  [ROLE_SHEXP_UP] = OPT("ffn.shared_experts.w3"), [ROLE_SHEXP_DOWN] = OPT("ffn.shared_experts.w2")},
    [MOE_GRANITE] = {[ROLE_ROUTER] = N("block_sparse_moe.router.layer"),
                     [ROLE_EXPS_GATE_UP] = N("block_sparse_moe.input_linear.weight"),   /* 3-D: named whole */
                     [ROLE_EXPS_DOWN] = N("block_sparse_moe.output_linear.weight")},
};

static const RoleName LINEAR_NAMES[LIN_LAYOUT_COUNT][ROLE_COUNT] = {
    [LIN_QWEN3_NEXT] = {[ROLE_LIN_QKVZ] = N("linear_attn.in_proj_qkvz"), [ROLE_LIN_BA] = N("linear_attn.in_proj_ba"),
                        [ROLE_LIN_CONV] = N("linear_attn.conv1d"), [ROLE_LIN_A_LOG] = N("linear_attn.A_log"),
                        [ROLE_LIN_DT_BIAS] = N("linear_attn.dt_bias"), [ROLE_LIN_NORM] = N("linear_attn.norm"),
                        [ROLE_LIN_OUT] = N("linear_attn.out_proj")},
    [LIN_QWEN3_5] = {[ROLE_LIN_QKV] = N("linear_attn.in_proj_qkv"), [ROLE_LIN_Z] = N("linear_attn.in_proj_z"),
                     [ROLE_LIN_B] = N("linear_attn.in_proj_b"), [ROLE_LIN_A] = N("linear_attn.in_proj_a"),
                     [ROLE_LIN_CONV] = N("linear_attn.conv1d"), [ROLE_LIN_A_LOG] = N("linear_attn.A_log"),
                     [ROLE_LIN_DT_BIAS] = N("linear_attn.dt_bias"), [ROLE_LIN_NORM] = N("linear_attn.norm"),
                     [ROLE_LIN_OUT] = N("linear_attn.out_proj")},
    [LIN_KDA] = {[ROLE_LIN_Q] = N("self_attn.q_proj"), [ROLE_LIN_K] = N("self_attn.k_proj"),
                 [ROLE_LIN_V] = N("self_attn.v_proj"), [ROLE_LIN_Q_CONV] = N("self_attn.q_conv1d"),
                 [ROLE_LIN_K_CONV] = N("self_attn.k_conv1d"), [ROLE_LIN_V_CONV] = N("self_attn.v_conv1d"),
                 [ROLE_LIN_A_LOG] = N("self_attn.A_log"), [ROLE_LIN_F_A] = N("self_attn.f_a_proj"),
                 [ROLE_LIN_F_B] = N("self_attn.f_b_proj"), [ROLE_LIN_DT_BIAS] = N("self_attn.dt_bias"),
                 [ROLE_LIN_B] = N("self_attn.b_proj"), [ROLE_LIN_G_A] = N("self_attn.g_a_proj"),
                 [ROLE_LIN_G_B] = N("self_attn.g_b_proj"), [ROLE_LIN_NORM] = N("self_attn.o_norm"),
                 [ROLE_ATTN_GATE] = OPT("self_attn.g_proj"),   /* Kimi-K3's full-rank gates (KDA and MLA layers) */
                 [ROLE_LIN_OUT] = N("self_attn.o_proj")},
    [LIN_MAMBA2_NEMOTRON] = {[ROLE_LIN_IN] = N("mixer.in_proj"), [ROLE_LIN_CONV] = N("mixer.conv1d"),
                             [ROLE_LIN_A_LOG] = N("mixer.A_log"), [ROLE_LIN_D] = N("mixer.D"),
                             [ROLE_LIN_DT_BIAS] = N("mixer.dt_bias"), [ROLE_LIN_NORM] = N("mixer.norm"),
                             [ROLE_LIN_OUT] = N("mixer.out_proj")},
    [LIN_MAMBA2_GRANITE] = {[ROLE_LIN_IN] = N("mamba.in_proj"), [ROLE_LIN_CONV] = N("mamba.conv1d"),
                            [ROLE_LIN_A_LOG] = N("mamba.A_log"), [ROLE_LIN_D] = N("mamba.D"),
                            [ROLE_LIN_DT_BIAS] = N("mamba.dt_bias"), [ROLE_LIN_NORM] = N("mamba.norm"),
                            [ROLE_LIN_OUT] = N("mamba.out_proj")},
};

/* Gemma 4's per-layer embeddings (read only when hidden_size_per_layer_input > 0) */
#define PLE_NAMES [ROLE_PLE_EMBED] = OPT("embed_tokens_per_layer"), \
    [ROLE_PLE_MODEL_PROJ] = OPT("per_layer_model_projection"), [ROLE_PLE_MODEL_NORM] = OPT("per_layer_projection_norm")

static const struct { const char *prefix, *layer; RoleName roles[ROLE_COUNT]; } MODEL_NAMES[MODEL_NAMES_COUNT] = {
    [NAMES_HF] = {"model.", "layers.%d.",
                  {[ROLE_EMBED] = N("embed_tokens"), [ROLE_FINAL_NORM] = N("norm"),
                   [ROLE_LM_HEAD] = {"lm_head", true, true}, PLE_NAMES}},
    [NAMES_GPT2] = {"transformer.", "h.%d.",
                    {[ROLE_EMBED] = N("wte"), [ROLE_POS_EMBED] = N("wpe"), [ROLE_FINAL_NORM] = N("ln_f"), [ROLE_LM_HEAD] = {"lm_head", true, true}}},
    [NAMES_NEOX] = {"gpt_neox.", "layers.%d.",
                    {[ROLE_EMBED] = N("embed_in"), [ROLE_FINAL_NORM] = N("final_layer_norm"),
                     [ROLE_LM_HEAD] = {"embed_out", true, true}}},
    [NAMES_LM_MODEL] = {"language_model.model.", "layers.%d.",
                        {[ROLE_EMBED] = N("embed_tokens"), [ROLE_FINAL_NORM] = N("norm"),
                         [ROLE_LM_HEAD] = {"language_model.lm_head", true, true}, PLE_NAMES}},
    [NAMES_MODEL_LM] = {"model.language_model.", "layers.%d.",
                        {[ROLE_EMBED] = N("embed_tokens"), [ROLE_FINAL_NORM] = N("norm"),
                         [ROLE_LM_HEAD] = {"lm_head", true, true}, PLE_NAMES}},
    [NAMES_BACKBONE] = {"backbone.", "layers.%d.",
                        {[ROLE_EMBED] = N("embeddings"), [ROLE_FINAL_NORM] = N("norm_f"),
                         [ROLE_LM_HEAD] = {"lm_head", true, true}}},
    [NAMES_DSV4] = {"", "layers.%d.", {[ROLE_EMBED] = N("embed"), [ROLE_FINAL_NORM] = N("norm"),
                                       [ROLE_LM_HEAD] = {"head", true, true}}},
};

#undef N
#undef OPT
#undef PLE_NAMES

static const RoleName *named(const RoleName *r) { return r->name ? r : NULL; }

const RoleName *role_in_attn(attn_layout a, tensor_role r) {
    return a < ATTN_LAYOUT_COUNT && r < ROLE_COUNT ? named(&ATTN_NAMES[a][r]) : NULL;
}
const RoleName *role_in_norms(norm_names n, tensor_role r) {
    return n < NORM_NAMES_COUNT && r < ROLE_COUNT ? named(&NORM_NAMES[n][r]) : NULL;
}
const RoleName *role_in_ffn(ffn_layout f, tensor_role r) {
    return f < FFN_LAYOUT_COUNT && r < ROLE_COUNT ? named(&FFN_NAMES[f][r]) : NULL;
}
const RoleName *role_in_moe(moe_layout m, tensor_role r) {
    return m < MOE_LAYOUT_COUNT && r < ROLE_COUNT ? named(&MOE_NAMES[m][r]) : NULL;
}
const RoleName *role_in_linear(linear_layout l, tensor_role r) {
    return l < LIN_LAYOUT_COUNT && r < ROLE_COUNT ? named(&LINEAR_NAMES[l][r]) : NULL;
}
const RoleName *role_in_model(model_names n, tensor_role r) {
    return n < MODEL_NAMES_COUNT && r < ROLE_COUNT ? named(&MODEL_NAMES[n].roles[r]) : NULL;
}
const char *family_prefix(model_names n) { return n < MODEL_NAMES_COUNT ? MODEL_NAMES[n].prefix : ""; }
const char *family_layer_pattern(model_names n) { return n < MODEL_NAMES_COUNT ? MODEL_NAMES[n].layer : "layers.%d."; }

model_names family_names_alt(model_names n) {
    return n == NAMES_LM_MODEL ? NAMES_MODEL_LM : n == NAMES_MODEL_LM ? NAMES_LM_MODEL : n;
}

moe_layout family_moe_alt(moe_layout m) {
    return m == MOE_LLAMA4 ? MOE_LLAMA4_SPLIT : m == MOE_LLAMA4_SPLIT ? MOE_LLAMA4 : m;
}

const char *tensor_role_name(tensor_role r) {
    static const char *const names[ROLE_COUNT] = {
        "q", "k", "v", "o", "qkv", "q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b",
        "indexer_q_b", "indexer_k", "indexer_k_norm", "indexer_weights", "q_norm", "k_norm", "sinks",
        "attn_gate", "o_a", "compressor_wkv", "hc_attn_fn", "rope_freq", "lin_qkvz", "lin_ba", "lin_qkv", "lin_z", "lin_b", "lin_a", "lin_conv", "lin_a_log",
        "lin_dt_bias", "lin_norm", "lin_out",
        "lin_q", "lin_k", "lin_v", "lin_q_conv", "lin_k_conv", "lin_v_conv", "lin_f_a", "lin_f_b", "lin_g_a", "lin_g_b",
        "lin_in", "lin_d",
        "attn_norm", "post_attn_norm", "ffn_norm", "post_ffn_norm", "ffn_gate", "ffn_up", "ffn_gate_up",
        "ffn_down", "router", "router_bias", "expert_gate", "expert_up", "expert_down", "experts_gate_up",
        "experts_gate_up_bias", "experts_down", "experts_down_bias", "shared_gate", "shared_up",
        "shared_down", "shared_scale", "layer_scalar", "ple_gate", "ple_proj", "ple_norm", "g4_router", "g4_router_scale",
        "g4_expert_scale", "g4_experts_gate_up", "g4_experts_down", "post_ffn_norm_1", "post_ffn_norm_2", "ffn_norm_2",
        "embed", "pos_embed",
        "final_norm", "lm_head", "ple_embed", "ple_model_proj", "ple_model_norm",
    };
    return r < ROLE_COUNT ? names[r] : "?";
}

/* ================================================================ the family table */

/* Traits most rows share: Llama's. A row states what differs. */
#define LLAMA_LIKE .keys = KEYS_HF, .attn = QKV_SPLIT, .block = BLOCK_PRE, .norms = NORMS_LLAMA, .ffn = FFN_GATED, \
                   .moe = MOE_QWEN, .names = NAMES_HF, .norm = NORM_RMS, .act = "silu", .eps = 1e-6

/* The synthetic checkpoints' shared window (small, so that tests over 24+ tokens see it). */
#define SW "8"
#define GQA_KEYS(act, eps) "\"attention_bias\": false, \"hidden_act\": \"" act "\", \"rms_norm_eps\": " eps
#define QWEN3_ATTN "\"head_dim\": 32, \"max_window_layers\": 3, \"rope_scaling\": null, \"rope_theta\": 1000000, " \
                   "\"sliding_window\": null, \"use_sliding_window\": false"

/* Gemma 3's text layer (gemma3_text and the multimodal gemma3's text tower) and its recipe's members. */
#define GEMMA3_TRAITS LLAMA_LIKE, .block = BLOCK_SANDWICH, .norms = NORMS_SANDWICH, .norm = NORM_RMS_1P, \
    .qk_norm = QKN_HEAD, .act = "gelu_pytorch_tanh", .act_key = "hidden_activation", .tied = true, .windowed = true, \
    .window_pattern = 6, .pre_attn_scalar = 256, .local_theta = 10000, .local_rope_plain = true, .embed_scaled = true
#define GEMMA3_SYNTH GQA_KEYS("gelu_pytorch_tanh", "1e-06") ", \"head_dim\": 32, \"hidden_activation\": " \
    "\"gelu_pytorch_tanh\", \"pad_token_id\": 0, \"sliding_window\": " SW ", \"attn_logit_softcapping\": null, " \
    "\"final_logit_softcapping\": "
#define GEMMA3_ROPE "\"rope_local_base_freq\": 10000, \"rope_theta\": 1000000, " \
    "\"rope_scaling\": {\"factor\": 2.0, \"rope_type\": \"linear\"}, \"sliding_window_pattern\": 6"

/* Gemma 4's text layer (gemma4_text and the multimodal gemma4's text tower): Gemma 3's sandwich block with plain
   RMSNorms (Gemma4RMSNorm: x w, no 1 +), per-head q/k norms, embeddings x sqrt(hidden), and the per-type attention. */
#define GEMMA4_TRAITS LLAMA_LIKE, .block = BLOCK_SANDWICH, .norms = NORMS_GEMMA4, .qk_norm = QKN_HEAD, \
    .act = "gelu_pytorch_tanh", .act_key = "hidden_activation", .tied = true, .windowed = true, .window_pattern = 6, \
    .embed_scaled = true, .local_rope_plain = true, .per_type_attn = true, .moe = MOE_NONE
#define GEMMA4_SYNTH "\"attention_bias\": false, \"attention_k_eq_v\": true, \"enable_moe_block\": false, " \
    "\"final_logit_softcapping\": 10.0, \"global_head_dim\": 64, \"head_dim\": 32, \"hidden_activation\": " \
    "\"gelu_pytorch_tanh\", \"hidden_size_per_layer_input\": 16, \"layer_types\": [\"sliding_attention\", " \
    "\"sliding_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\"], " \
    "\"moe_intermediate_size\": null, \"num_experts\": null, " \
    "\"num_global_key_value_heads\": 1, \"num_kv_shared_layers\": 2, \"pad_token_id\": 0, \"rms_norm_eps\": 1e-06, " \
    "\"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0, " \
    "\"rope_type\": \"proportional\"}, \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}, " \
    "\"sliding_window\": " SW ", \"top_k_experts\": null, \"use_bidirectional_attention\": null, " \
    "\"use_double_wide_mlp\": true, \"vocab_size_per_layer_input\": 256"

#define GEMMA4_SYNTH_MOE "\"attention_bias\": false, \"attention_k_eq_v\": true, \"enable_moe_block\": true, " \
    "\"final_logit_softcapping\": 10.0, \"global_head_dim\": 64, \"head_dim\": 32, \"hidden_activation\": " \
    "\"gelu_pytorch_tanh\", \"hidden_size_per_layer_input\": 0, \"layer_types\": [\"sliding_attention\", " \
    "\"sliding_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\"], " \
    "\"moe_intermediate_size\": 32, \"num_experts\": 4, \"num_global_key_value_heads\": 1, " \
    "\"num_kv_shared_layers\": 0, \"pad_token_id\": 0, \"rms_norm_eps\": 1e-06, " \
    "\"rope_parameters\": {\"full_attention\": {\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0, " \
    "\"rope_type\": \"proportional\"}, \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}, " \
    "\"sliding_window\": " SW ", \"top_k_experts\": 2, \"use_bidirectional_attention\": \"vision\", " \
    "\"use_double_wide_mlp\": false, \"vocab_size_per_layer_input\": 256"

/* Qwen3.5's text towers: Qwen3-Next's traits, the split linear projections, the tower's names and
 * members; the recipe's text_config keys after the shared ones (3 linear layers, then gated attention). */
#define QWEN3_5_TRAITS LLAMA_LIKE, .norm = NORM_RMS_1P, .qk_norm = QKN_HEAD, .partial_rotary = 0.25, \
    .moe = MOE_QWEN_NEXT, .lin = LIN_QWEN3_5, .attn_gate = true, .names = NAMES_MODEL_LM, \
    .tower_note = "M-RoPE (mrope_section) on text-only positions is ordinary RoPE; the MTP layers (mtp.*) are " \
                  "not read", \
    .vision = {"model.visual.patch_embed.proj.weight", "model.visual.merger.linear_fc1.weight"}, \
    .tower_keys = "\"vision_config\": {\"depth\": 1, \"hidden_size\": 16, \"num_heads\": 2, \"out_hidden_size\": 64, " \
                  "\"patch_size\": 16, \"spatial_merge_size\": 2, \"temporal_patch_size\": 2}"
#define QWEN3_5_KEYS "\"attn_output_gate\": true, \"full_attention_interval\": 4, \"head_dim\": 32, " \
    "\"layer_types\": [\"linear_attention\", \"linear_attention\", \"linear_attention\", \"full_attention\"], " \
    "\"linear_conv_kernel_dim\": 4, \"linear_key_head_dim\": 16, " \
    "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_value_head_dim\": 16, " \
    "\"rope_parameters\": {\"mrope_interleaved\": true, \"mrope_section\": [2, 1, 1], " \
    "\"partial_rotary_factor\": 0.25, " \
    "\"rope_theta\": 10000000, \"rope_type\": \"default\"}"

/* Llama 4's text layer (llama4_text and the multimodal llama4's tower): feed_forward.* MLPs and experts. */
#define LLAMA4_TRAITS LLAMA_LIKE, .ffn = FFN_LLAMA4, .moe = MOE_LLAMA4, .router = ROUTER_LLAMA4, .eps = 1e-5, \
    .nope_interval = 4, .rope_adjacent = true, .chunked = true, .qk_l2 = true, .temp_tuning = true, \
    .dense_ffn_key = "intermediate_size_mlp"

/* A row starts from LLAMA_LIKE and overrides what differs: the override is the point here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
const FamilyRow FAMILY[] = {
    [FAM_LLAMA] = {"llama", "LlamaForCausalLM", "llama", "Llama 2/3 (GQA, RoPE, attention_bias, rope_scaling)",
                   LLAMA_LIKE, .gguf_arch = "llama",
        .engines = ENGINES_ALL, .llamacpp_arch = "llama"},
    [FAM_MISTRAL] = {"mistral", "MistralForCausalLM", "mistral", "Mistral (Llama with a sliding window)",
                     LLAMA_LIKE, .windowed = true, .gguf_arch = "llama",
        .engines = ENGINES_ALL, .llamacpp_arch = "llama"},
    [FAM_SMOLLM3] = {
        "smollm3", "SmolLM3ForCausalLM", "smollm3", "SmolLM3 (Llama with no RoPE on every fourth layer, tied)",
        LLAMA_LIKE, .tied = true, .window_opt_in = true, .nope_interval = 4, .window_on_nope = true,
        .gguf_arch = "smollm3", .engines = ENGINES_ALL, .llamacpp_arch = "smollm3",   /* vLLM, SGLang: transformers backends */
        .synth = {128, 4, 2, 4, 256, 256, true,
                  GQA_KEYS("silu", "1e-06") ", \"mlp_bias\": false, \"no_rope_layer_interval\": 4, "
                  "\"no_rope_layers\": [1, 1, 1, 0], \"pad_token_id\": 0, \"rope_scaling\": null, "
                  "\"rope_theta\": 5000000.0, \"sliding_window\": " SW ", \"use_sliding_window\": true"}},
    [FAM_QWEN2] = {"qwen2", "Qwen2ForCausalLM", "qwen2", "Qwen2 / Qwen2.5 (q/k/v biases, optional window)",
                   LLAMA_LIKE, .qkv_bias_always = true, .window_opt_in = true, .gguf_arch = "qwen2",
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen2"},
    [FAM_DEEPSEEK] = {
        "deepseek_v3", "DeepseekV3ForCausalLM", "deepseek", "DeepSeek-V3 / R1 (MLA; MoE, sigmoid group routing)",
        LLAMA_LIKE, .keys = KEYS_MLA, .attn = QKV_MLA, .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V3,
        .gguf_arch = "deepseek2", .synth = {128, 4, 4, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"first_k_dense_replace\": 1, \"kv_lora_rank\": 64, "
                  "\"moe_intermediate_size\": 64, \"moe_layer_freq\": 1, \"n_group\": 4, \"n_routed_experts\": 8, "
                  "\"n_shared_experts\": 1, \"norm_topk_prob\": true, \"num_experts_per_tok\": 2, "
                  "\"num_nextn_predict_layers\": 0, \"q_lora_rank\": 64, \"qk_nope_head_dim\": 32, "
                  "\"qk_rope_head_dim\": 16, \"rope_scaling\": null, \"rope_theta\": 10000, "
                  "\"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", \"topk_group\": 2, "
                  "\"topk_method\": \"noaux_tc\", \"v_head_dim\": 32"},
        .engines = ENGINES_ALL, .llamacpp_arch = "deepseek2"},
    [FAM_DEEPSEEK_V2] = {"deepseek_v2", "DeepseekV2ForCausalLM", "deepseek", "DeepSeek-V2 (MLA; MoE)", LLAMA_LIKE,
                         .keys = KEYS_MLA, .attn = QKV_MLA, .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V2,
                         .gguf_arch = "deepseek2",
        .engines = ENGINES_ALL, .llamacpp_arch = "deepseek2"},
    [FAM_KIMI_K2] = {"kimi_k2", NULL, "deepseek", "Kimi-K2 (DeepSeek-V3's architecture)", LLAMA_LIKE, .keys = KEYS_MLA,
                     .attn = QKV_MLA, .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V3, .gguf_arch = "deepseek2"},
    /* DeepSeek-V3.2-Exp's config.json: V3's keys + index_head_dim 128, index_n_heads 64, index_topk 2048
       (the indexer: self_attn.indexer.{wq_b, wk, k_norm, weights_proj}); the recipe shrinks the indexer to
       4 heads of 32 and index_topk to 8, so that 24 tokens see the selection */
    [FAM_DEEPSEEK_V32] = {
        "deepseek_v32", "DeepseekV32ForCausalLM", "deepseek_v32", "DeepSeek-V3.2 (MLA with a lightning indexer: "
        "index_topk keys per query; MoE, sigmoid group routing)", LLAMA_LIKE, .keys = KEYS_MLA, .attn = QKV_MLA,
        .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V3,
        .synth = {128, 4, 4, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"first_k_dense_replace\": 1, \"index_head_dim\": 32, "
                  "\"index_n_heads\": 4, \"index_topk\": 8, \"kv_lora_rank\": 64, \"moe_intermediate_size\": 64, "
                  "\"moe_layer_freq\": 1, \"n_group\": 4, \"n_routed_experts\": 8, \"n_shared_experts\": 1, "
                  "\"norm_topk_prob\": true, \"num_experts_per_tok\": 2, \"num_nextn_predict_layers\": 0, "
                  "\"q_lora_rank\": 64, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"rope_scaling\": null, "
                  "\"rope_theta\": 10000, \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", "
                  "\"topk_group\": 2, \"topk_method\": \"noaux_tc\", \"v_head_dim\": 32"},
        .engines = ENGINE_VLLM | ENGINE_SGLANG},
    /* GLM-5's config.json (zai-org/GLM-5): DeepSeek-V3.2's attention with q_lora 2048, qk_nope 192, qk_rope 64,
       v 256, index_n_heads 32, index_head_dim 128, index_topk 2048, rope_parameters {rope_theta, rope_type
       default}, rope_interleave and indexer_rope_interleave true, rms_norm_eps 1e-5, n_group / topk_group 1,
       first_k_dense_replace 3. MLA's and the indexer's RoPE rotate interleaved pairs (the indexer's its first
       qk_rope_head_dim dims): vLLM's / SGLang's deepseek_v2 (is_neox_style False; the indexer's from
       indexer_rope_interleave), llama.cpp's glm-dsa (deepseek2's graph, no row permutation), transformers since
       PR #46372 (June 2026; its first GlmMoeDsa rotated both by rotate_half: lint says so). The recipe writes
       rms_norm_eps 1e-6: with GLM-5's 1e-5, transformers (1e-6 on the MLA latents) and vLLM / SGLang
       (rms_norm_eps) compute different models, which lint reports on the real checkpoints. GLM-5.2 adds
       IndexShare (indexer_types, index_topk_freq 4, index_skip_topk_offset 3: "shared" layers reuse the
       last full layer's selection and carry no indexer weights); the recipe keeps it, shrunk to full / shared
       / full, layer 1 without indexer.* tensors */
    [FAM_GLM_MOE_DSA] = {
        "glm_moe_dsa", "GlmMoeDsaForCausalLM", "glm_moe_dsa", "GLM-5 (DeepSeek-V3.2's MLA with a lightning indexer, "
        "both with interleaved RoPE; MoE, sigmoid routing)", LLAMA_LIKE, .keys = KEYS_MLA, .attn = QKV_MLA,
        .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V3, .eps = 1e-5, .indexer_rope_interleave = true,
        .synth = {128, 4, 4, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"first_k_dense_replace\": 1, \"index_head_dim\": 32, "
                  "\"index_n_heads\": 4, \"index_skip_topk_offset\": 1, \"index_topk\": 8, \"index_topk_freq\": 2, "
                  "\"indexer_rope_interleave\": true, \"indexer_types\": [\"full\", \"shared\", \"full\"], "
                  "\"kv_lora_rank\": 64, "
                  "\"moe_intermediate_size\": 64, \"n_group\": 1, \"n_routed_experts\": 8, \"n_shared_experts\": 1, \"norm_topk_prob\": true, "
                  "\"num_experts_per_tok\": 2, \"num_nextn_predict_layers\": 0, \"q_lora_rank\": 64, "
                  "\"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"rope_interleave\": true, \"rope_parameters\": "
                  "{\"rope_theta\": 1000000, \"rope_type\": \"default\"}, \"routed_scaling_factor\": 2.5, "
                  "\"scoring_func\": \"sigmoid\", \"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"v_head_dim\": 32"},
        .engines = ENGINES_ALL, .llamacpp_arch = "glm-dsa"},
    /* moonshotai/Kimi-K2.5's config.json (KimiK25ForConditionalGeneration, remote code): text_config deepseek_v3 --
       61 layers, 64 heads, q_lora 1536, kv_lora 512, qk_nope 128, qk_rope 64, v 128, 384 experts top-8 of 2048
       (sigmoid, n_group 1, routed_scaling_factor 2.827), rope_parameters YaRN x64 from 4096 (theta 50000,
       mscale = mscale_all_dim = 1: cos / sin unscaled, the softmax scale times mscale^2), rms_norm_eps 1e-5; the
       tensors under language_model.model. (head language_model.lm_head), the vision tower (vision_tower.*,
       MoonViT) and projector (mm_projector.*) beside them; the routed experts in compressed-tensors pack-quantized
       INT4 (group 32; attention, shared experts and dense MLPs BF16). The recipe shrinks the original context to 8
       (factor 64 of 512 positions) and writes rms_norm_eps 1e-6, as GLM-5's does (with 1e-5, transformers' MLA latents
       and vLLM / SGLang's differ: lint says so on the real checkpoint) */
    [FAM_KIMI_K25] = {
        "kimi_k25", "KimiK25ForConditionalGeneration", "deepseek", "Kimi-K2.5: its text tower (DeepSeek-V3's MLA and "
        "MoE; YaRN; experts in compressed-tensors INT4)", LLAMA_LIKE, .keys = KEYS_MLA, .attn = QKV_MLA,
        .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V3, .eps = 1e-5, .names = NAMES_LM_MODEL, .text_config = "deepseek_v3",
        .tower_note = "routed experts released in compressed-tensors INT4 (group 32), read as they lie",
        .vision = {"vision_tower.patch_embed.proj.weight", "mm_projector.proj.0.weight"},
        .tower_keys = "\"media_placeholder_token_id\": 163605, \"use_unified_vision_chunk\": true, "
                      "\"video_placeholder\": \"<|kimi_k25_video_placeholder|>\", \"vision_config\": "
                      "{\"init_pos_emb_height\": 4, \"init_pos_emb_time\": 4, \"init_pos_emb_width\": 4, "
                      "\"merge_kernel_size\": [2, 2], \"merge_type\": \"sd2_tpool\", \"mm_hidden_size\": 16, "
                      "\"mm_projector_type\": \"patchmerger\", \"model_type\": \"\", \"patch_size\": 14, "
                      "\"pos_emb_type\": \"divided_fixed\", \"projector_hidden_act\": \"gelu\", "
                      "\"projector_ln_eps\": 1e-05, \"text_hidden_size\": 128, \"video_attn_type\": "
                      "\"spatial_temporal\", \"vt_hidden_size\": 16, \"vt_intermediate_size\": 32, "
                      "\"vt_num_attention_heads\": 2, \"vt_num_hidden_layers\": 1}",
        .gguf_arch = "deepseek2",
        .synth = {128, 4, 4, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"first_k_dense_replace\": 1, \"kv_lora_rank\": 64, "
                  "\"moe_intermediate_size\": 64, \"moe_layer_freq\": 1, \"n_group\": 1, \"n_routed_experts\": 8, "
                  "\"n_shared_experts\": 1, \"norm_topk_prob\": true, \"num_experts_per_tok\": 2, "
                  "\"num_nextn_predict_layers\": 0, \"q_lora_rank\": 64, \"qk_nope_head_dim\": 32, "
                  "\"qk_rope_head_dim\": 16, \"rope_parameters\": {\"beta_fast\": 32.0, \"beta_slow\": 1.0, "
                  "\"factor\": 64.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 8, "
                  "\"rope_theta\": 50000.0, \"rope_type\": \"yarn\", \"type\": \"yarn\"}, \"rope_theta\": 50000.0, "
                  "\"routed_scaling_factor\": 2.827, \"scoring_func\": \"sigmoid\", \"topk_group\": 1, "
                  "\"topk_method\": \"noaux_tc\", \"v_head_dim\": 32"},
        .engines = ENGINE_VLLM | ENGINE_SGLANG},
    /* moonshotai/Kimi-Linear-48B-A3B's config.json (KimiLinearForCausalLM: remote code modeling_kimi.py, and
       transformers 5's own class, which computed the recipe's logits as attnlab does in s12's check): 27 layers,
       linear_attn_config kda_layers (1-based) 3 of 4 Kimi Delta Attention, full_attn_layers [4, 8, ..., 24, 27] MLA
       with q_proj (q_lora_rank null), kv_lora 512, qk_nope 128, qk_rope 64, v 128, mla_use_nope (no RoPE at all),
       32 KDA heads of 128, short conv 4; 256 experts top-8 of 1024 (sigmoid, moe_renormalize, routed_scaling_factor
       2.446, correction bias), one shared expert, first_k_dense_replace 1, rms_norm_eps 1e-5. The recipe: 8 layers (KDA
       1-3, 5-7), 4 KDA heads of 32, 8 experts top-2 of 64, rms_norm_eps 1e-6 (as GLM-5's: lint's MLA latent eps) */
    [FAM_KIMI_LINEAR] = {
        "kimi_linear", "KimiLinearForCausalLM", "kimi_linear", "Kimi-Linear (Kimi Delta Attention 3 : 1 MLA without "
        "RoPE; MoE, sigmoid routing)", LLAMA_LIKE, .keys = KEYS_MLA, .attn = QKV_MLA, .moe = MOE_KIMI,
        .router = ROUTER_DS_V3, .lin = LIN_KDA, .eps = 1e-5,
        .synth = {128, 4, 4, 8, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"first_k_dense_replace\": 1, \"head_dim\": 32, \"kv_lora_rank\": 64, "
                  "\"linear_attn_config\": {\"full_attn_layers\": [4, 8], \"head_dim\": 32, \"kda_layers\": [1, 2, 3, 5, "
                  "6, 7], \"num_heads\": 4, \"short_conv_kernel_size\": 4}, \"mla_use_nope\": true, "
                  "\"moe_intermediate_size\": 64, \"moe_layer_freq\": 1, \"moe_renormalize\": true, "
                  "\"moe_router_activation_func\": \"sigmoid\", \"num_expert_group\": 1, \"num_experts\": 8, "
                  "\"num_experts_per_token\": 2, \"num_nextn_predict_layers\": 0, \"num_shared_experts\": 1, "
                  "\"pad_token_id\": 0, \"q_lora_rank\": null, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"rope_scaling\": null, "
                  "\"rope_theta\": 10000.0, \"routed_scaling_factor\": 2.446, \"topk_group\": 1, "
                  "\"use_grouped_topk\": true, \"v_head_dim\": 32"},
        .engines = ENGINE_HF | ENGINE_VLLM | ENGINE_SGLANG},
    /* deepseek-ai/DeepSeek-V4-Flash's config.json (DeepseekV4ForCausalLM): 43 layers, compress_ratios [0, 0] +
       [4, 128] x 20 + [4, 0] (the last the MTP layer's), 64 heads of 512 over one KV head, qk_rope 64, q_lora 1024,
       o_groups 8 x o_lora 1024, window 128, indexer 64 x 128 top-512, hc_mult 4, 3 hash layers, 256 experts top-6
       in FP4; tensors layers.L.attn.{wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink, compressor.*,
       indexer.*}, layers.L.hc_attn_* / hc_ffn_*, ffn.*, embed / norm / head (no prefix). Its attention is read as H
       query heads of head_dim from the query latent, one KV head (wkv, kv_norm) that is key and value, RoPE on the
       last qk_rope_head_dim dims (adjacent pairs), a sink per head, each head's output through its group's block of
       wo_a then wo_b (model.c's block_dsv4); core/model/dsv4.c reads the rest and analyses.c refuses the forward
       pass. The recipe shrinks every dim (head_dim 32 of which 8 rotate, 4 heads in 2 output groups of o_lora 64,
       window 8, 5 layers with ratios 0, 4, 128, 4, 0 (the last the MTP layer's), 4 experts top-2 of 64) */
    [FAM_DEEPSEEK_V4] = {
        "deepseek_v4", "DeepseekV4ForCausalLM", "deepseek_v4", "DeepSeek-V4 (window / CSA / HCA layers over one "
        "512-wide KV head that is key and value, grouped low-rank output, hyper-connections): the attention "
        "analyses; forward pass refused", LLAMA_LIKE, .keys = KEYS_DSV4, .attn = QKV_DSV4, .norms = NORMS_DSV4,
        .moe = MOE_DSV4, .names = NAMES_DSV4, .router = ROUTER_DS_V3, .windowed = true, .sinks = true,
        .rope_adjacent = true,
        .synth = {128, 4, 1, 4, 256, 64, false,
                  "\"attention_bias\": false, \"compress_ratios\": [0, 4, 128, 4, 0], \"compress_rope_theta\": 160000, "
                  "\"expert_dtype\": \"fp4\", \"hc_eps\": 1e-06, \"hc_mult\": 4, \"hc_sinkhorn_iters\": 20, "
                  "\"head_dim\": 32, \"hidden_act\": \"silu\", \"index_head_dim\": 16, \"index_n_heads\": 2, "
                  "\"index_topk\": 8, \"moe_intermediate_size\": 64, \"n_routed_experts\": 4, \"n_shared_experts\": 1, "
                  "\"norm_topk_prob\": true, \"num_experts_per_tok\": 2, \"num_hash_layers\": 1, "
                  "\"num_nextn_predict_layers\": 1, \"o_groups\": 2, \"o_lora_rank\": 64, \"q_lora_rank\": 64, "
                  "\"qk_rope_head_dim\": 8, \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 32, "
                  "\"beta_slow\": 1, \"factor\": 16, \"original_max_position_embeddings\": 64, \"type\": \"yarn\"}, "
                  "\"rope_theta\": 10000, \"routed_scaling_factor\": 1.5, \"scoring_func\": \"sqrtsoftplus\", "
                  "\"sliding_window\": " SW ", \"swiglu_limit\": 10.0, \"topk_method\": \"noaux_tc\""},
        .engines = ENGINE_VLLM | ENGINE_SGLANG},
    /* moonshotai/Kimi-K3's config.json (KimiK3ForConditionalGeneration, remote code): text_config kimi_linear -- 93
       layers, KDA 96 x 128 on kda_layers, MLA (q_lora 1536, kv_lora 512, no RoPE, output gate) on full_attn_layers
       4, 8, ..., 92, 93 (1-based), attn_res_block_size 12, hidden_act situ, 896 experts top-16 in a latent of 3584
       (MXFP4), 2 shared; the tensors under language_model.model., the vision tower and projector beside them. Read
       as Kimi-Linear's text tower (its layouts): the MLA layers' per-head analyses run; core/model/kimik3.c
       describes the rest and analyses.c refuses the forward pass. The recipe: Kimi-Linear's shrunk with K3's keys
       (8 layers, KDA 1-3 / 5-7, q_lora 64, 8 experts top-2 in a latent of 64, attn_res_block_size 4) */
    [FAM_KIMI_K3] = {
        "kimi_k3", "KimiK3ForConditionalGeneration", "kimi_linear", "Kimi-K3: its text tower (Kimi-Linear's KDA / "
        "MLA plan with output gates, attention residuals, SiTU, latent experts): the MLA analyses; forward pass "
        "refused", LLAMA_LIKE, .keys = KEYS_KIMI_K3, .attn = QKV_MLA, .moe = MOE_KIMI, .router = ROUTER_DS_V3,
        .lin = LIN_KDA, .eps = 1e-5, .names = NAMES_LM_MODEL, .text_config = "kimi_linear",
        .tower_note = "read as Kimi-Linear's; its gates, residuals, SiTU, latent experts: the kimi_k3 row",
        .vision = {"vision_tower.patch_embed.proj.weight", "mm_projector.proj.0.weight"},
        .tower_keys = "\"image_placeholder\": \"<|kimi_image_placeholder|>\", \"media_placeholder_token_id\": 163605, "
                      "\"vision_config\": {\"activation_func\": \"gelu_pytorch_tanh\", \"init_pos_emb_height\": 4, "
                      "\"init_pos_emb_time\": 4, \"init_pos_emb_width\": 4, \"merge_kernel_size\": [2, 2], "
                      "\"merge_type\": \"sd2_tpool\", \"mm_hidden_size\": 16, \"mm_projector_type\": \"patchmergerv2\", "
                      "\"patch_size\": 14, \"pos_emb_type\": \"divided_fixed\", \"projector_hidden_act\": \"gelu\", "
                      "\"projector_ln_eps\": 1e-05, \"text_hidden_size\": 128, \"vt_hidden_size\": 16, "
                      "\"vt_intermediate_size\": 32, \"vt_num_attention_heads\": 2, \"vt_num_hidden_layers\": 1}",
        .synth = {128, 4, 4, 8, 256, 256, false,
                  GQA_KEYS("situ", "1e-06") ", \"activation_situ_beta\": 4.0, \"activation_situ_linear_beta\": 25.0, "
                  "\"attn_res_block_size\": 4, \"first_k_dense_replace\": 1, \"head_dim\": 32, \"kv_lora_rank\": 64, "
                  "\"latent_moe_use_norm\": true, \"linear_attn_config\": {\"full_attn_layers\": [4, 8], "
                  "\"gate_lower_bound\": -5.0, \"head_dim\": 32, \"kda_layers\": [1, 2, 3, 5, 6, 7], \"num_heads\": 4, "
                  "\"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true}, \"mla_use_nope\": true, "
                  "\"mla_use_output_gate\": true, \"moe_intermediate_size\": 64, \"moe_layer_freq\": 1, "
                  "\"moe_renormalize\": true, \"moe_router_activation_func\": \"sigmoid\", \"num_expert_group\": 1, "
                  "\"num_experts\": 8, \"num_experts_per_token\": 2, \"num_nextn_predict_layers\": 0, "
                  "\"num_shared_experts\": 2, \"q_lora_rank\": 64, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, "
                  "\"routed_expert_hidden_size\": 64, \"routed_scaling_factor\": 1.0, \"topk_group\": 1, "
                  "\"topk_method\": \"noaux_tc\", \"use_grouped_topk\": true, \"v_head_dim\": 32"},
        .engines = ENGINE_VLLM | ENGINE_SGLANG},
    [FAM_GLM4_MOE] = {
        "glm4_moe", "Glm4MoeForCausalLM", "glm4_moe", "GLM-4.5 / 4.6 / 4.7 (partial rotary, q/k/v biases; MoE, sigmoid "
        "group routing)", LLAMA_LIKE, .moe = MOE_DEEPSEEK, .router = ROUTER_DS_V3, .eps = 1e-5, .partial_rotary = 0.5,
        .o_bias_never = true, .qk_norm_key = "use_qk_norm",
        .synth = {128, 4, 2, 3, 256, 256, false,
                  "\"attention_bias\": true, \"first_k_dense_replace\": 1, \"head_dim\": 32, \"hidden_act\": \"silu\", "
                  "\"moe_intermediate_size\": 64, \"n_group\": 4, \"n_routed_experts\": 8, \"n_shared_experts\": 1, "
                  "\"norm_topk_prob\": true, \"num_experts_per_tok\": 2, \"num_nextn_predict_layers\": 0, "
                  "\"pad_token_id\": 0, \"partial_rotary_factor\": 0.5, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "
                  "\"rope_theta\": 1000000, \"routed_scaling_factor\": 2.5, \"topk_group\": 2, \"use_qk_norm\": true"},
        .engines = ENGINES_ALL, .llamacpp_arch = "glm4moe"},
    /* openai/gpt-oss-20b / 120b's config.json: 24 / 36 layers alternating sliding_attention (window 128) and
       full_attention, 64 heads x 64, 8 KV heads, attention_bias, rope_theta 150000, YaRN x32 from 4096 with
       truncate false, 32 / 128 local experts, top-4, swiglu_limit 7, rms_norm_eps 1e-5, untied; experts in
       MXFP4 (the recipe writes them dequantized, under the names transformers gives them then). The recipe
       shrinks the window to 8 and YaRN to x8 from 64 (max_position_embeddings 512). */
    [FAM_GPT_OSS] = {
        "gpt_oss", "GptOssForCausalLM", "gpt_oss", "gpt-oss (a sink logit per head, sliding / full layers, YaRN, "
        "q/k/v/o biases; MoE over fused experts, clamped SwiGLU)", LLAMA_LIKE, .moe = MOE_GPT_OSS, .eps = 1e-5,
        .bias_default = true, .windowed = true, .window_pattern = 2, .sinks = true, .router_norm_topk = true,
        .swiglu_limit = 7.0, .swiglu_alpha = 1.702,
        .synth = {128, 4, 2, 4, 256, 64, false,
                  "\"attention_bias\": true, \"experts_per_token\": 2, \"head_dim\": 32, \"hidden_act\": \"silu\", "
                  "\"initial_context_length\": 64, \"layer_types\": [\"sliding_attention\", \"full_attention\", "
                  "\"sliding_attention\", \"full_attention\"], \"num_experts_per_tok\": 2, \"num_local_experts\": 4, "
                  "\"output_router_logits\": false, \"pad_token_id\": 0, \"rms_norm_eps\": 1e-05, \"rope_scaling\": "
                  "{\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": 8.0, \"original_max_position_embeddings\": 64, "
                  "\"rope_type\": \"yarn\", \"truncate\": false}, \"rope_theta\": 150000, "
                  "\"router_aux_loss_coef\": 0.9, \"sliding_window\": " SW ", \"swiglu_limit\": 7.0"},
        .engines = ENGINES_ALL, .llamacpp_arch = "gpt-oss", .gguf_arch = "gpt-oss"},
    [FAM_GPT2] = {"gpt2", "GPT2LMHeadModel", "gpt2", "GPT-2 (MHA, no RoPE, Conv1D weights)", LLAMA_LIKE,
                  .keys = KEYS_GPT2, .attn = QKV_CONV1D, .norms = NORMS_GPT2, .ffn = FFN_CONV1D, .names = NAMES_GPT2,
                  .norm = NORM_LAYER, .act = "gelu_new", .act_key = "activation_function", .eps = 1e-5, .tied = true,
                  .gguf_arch = "gpt2",
        .engines = ENGINES_ALL, .llamacpp_arch = "gpt2"},
    [FAM_LLAMA2C] = {"llama2c", NULL, "llama2c", "llama2.c checkpoints (.bin; tokenizer .bin beside)", LLAMA_LIKE,
                     .keys = KEYS_LLAMA2C, .gguf_arch = "llama"},
    [FAM_QWEN3] = {"qwen3", "Qwen3ForCausalLM", "qwen3", "Qwen3 (head_dim, per-head q/k norms)", LLAMA_LIKE,
                   .qk_norm = QKN_HEAD, .window_opt_in = true, .gguf_arch = "qwen3",
                   .synth = {64, 4, 2, 3, 256, 128, true, GQA_KEYS("silu", "1e-06") ", " QWEN3_ATTN},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen3"},
    [FAM_QWEN3_MOE] = {
        "qwen3_moe", "Qwen3MoeForCausalLM", "qwen3", "Qwen3-MoE (Qwen3 attention, routed experts)", LLAMA_LIKE,
        .qk_norm = QKN_HEAD, .window_opt_in = true, .gguf_arch = "qwen3",
        .synth = {64, 4, 2, 3, 256, 128, false,
                  GQA_KEYS("silu", "1e-06") ", \"decoder_sparse_step\": 1, \"mlp_only_layers\": [], "
                  "\"moe_intermediate_size\": 64, \"norm_topk_prob\": true, \"num_experts\": 4, "
                  "\"num_experts_per_tok\": 2, \"output_router_logits\": false, \"router_aux_loss_coef\": 0.001, "
                  QWEN3_ATTN},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen3moe"},
    [FAM_GEMMA2] = {
        "gemma2", "Gemma2ForCausalLM", "gemma2", "Gemma 2 (sandwich norms, soft-caps, local/global layers)",
        LLAMA_LIKE, .block = BLOCK_SANDWICH, .norms = NORMS_SANDWICH, .norm = NORM_RMS_1P, .act = "gelu_pytorch_tanh",
        .act_key = "hidden_activation", .tied = true, .windowed = true, .window_pattern = 2, .pre_attn_scalar = 256,
        .attn_softcap = 50, .final_softcap = 30, .embed_scaled = true, .gguf_arch = "gemma2",
        .synth = {64, 4, 2, 4, 256, 128, true,
                  GQA_KEYS("gelu_pytorch_tanh", "1e-06") ", \"head_dim\": 32, \"hidden_activation\": "
                  "\"gelu_pytorch_tanh\", \"pad_token_id\": 0, \"sliding_window\": " SW ", "
                  "\"attn_logit_softcapping\": 5.0, \"final_logit_softcapping\": 10.0, \"query_pre_attn_scalar\": 24, "
                  "\"rope_theta\": 10000, \"cache_implementation\": \"hybrid\""},
        .engines = ENGINES_ALL, .llamacpp_arch = "gemma2"},
    [FAM_GEMMA3] = {
        "gemma3_text", "Gemma3ForCausalLM", "gemma3", "Gemma 3 text (q/k norms, 5 local : 1 global layers)",
        GEMMA3_TRAITS, .gguf_arch = "gemma3",
        .synth = {64, 4, 1, 6, 256, 128, true, GEMMA3_SYNTH "null, \"query_pre_attn_scalar\": 32, " GEMMA3_ROPE},
        .engines = ENGINES_ALL, .llamacpp_arch = "gemma3"},
    /* google/gemma-3-4b-it's config.json names few text keys (Gemma3TextConfig's defaults fill the rest) and its
       tensors sit under language_model.model. (model.language_model. when saved by transformers 4.52+); the
       recipe's final_logit_softcapping 10 is one the multimodal head does not apply */
    [FAM_GEMMA3_MM] = {
        "gemma3", "Gemma3ForConditionalGeneration", "gemma3", "Gemma 3 multimodal (4B-27B): its text tower, as gemma3_text",
        GEMMA3_TRAITS, .names = NAMES_LM_MODEL, .text_config = "gemma3_text", .final_softcap_off = true,
        .tower_note = "Gemma3ForConditionalGeneration applies no final_logit_softcapping",
        .text_defaults = "\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216, "
                         "\"num_hidden_layers\": 26, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, "
                         "\"head_dim\": 256, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-06, "
                         "\"rope_theta\": 1000000.0, \"query_pre_attn_scalar\": 256, \"sliding_window\": 4096, "
                         "\"rope_local_base_freq\": 10000.0, \"sliding_window_pattern\": 6",
        .vision = {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                   "multi_modal_projector.mm_input_projection_weight"},
        .tower_keys = "\"boi_token_index\": 255999, \"eoi_token_index\": 256000, \"image_token_index\": 262144, "
                      "\"mm_tokens_per_image\": 256, \"vision_config\": {\"hidden_size\": 16, \"image_size\": 28, "
                      "\"intermediate_size\": 32, \"model_type\": \"siglip_vision_model\", \"num_attention_heads\": 2, "
                      "\"num_hidden_layers\": 1, \"patch_size\": 14, \"vision_use_head\": false}",
        .gguf_arch = "gemma3",
        .synth = {64, 4, 1, 6, 256, 128, true, GEMMA3_SYNTH "10.0, \"query_pre_attn_scalar\": 32, " GEMMA3_ROPE},
        .engines = ENGINES_ALL, .llamacpp_arch = "gemma3"},
    /* Qwen3-VL-8B-Instruct's text_config (Qwen3's layer); tensors under model.language_model., visual tower
       under model.visual.; rope_scaling {"rope_type": "default", "mrope_section", "mrope_interleaved"} */
    [FAM_QWEN3_VL] = {
        "qwen3_vl", "Qwen3VLForConditionalGeneration", "qwen3", "Qwen3-VL: its text tower (Qwen3's layer; M-RoPE)",
        LLAMA_LIKE, .qk_norm = QKN_HEAD, .names = NAMES_MODEL_LM, .text_config = "qwen3_vl_text",
        .tower_note = "M-RoPE (mrope_section) on text-only positions (t = h = w) is ordinary RoPE; DeepStack adds "
                      "nothing without images",
        .vision = {"model.visual.patch_embed.proj.weight", "model.visual.merger.linear_fc1.weight"},
        .tower_keys = "\"image_token_id\": 151655, \"video_token_id\": 151656, \"vision_start_token_id\": 151652, "
                      "\"vision_end_token_id\": 151653, \"vision_config\": {\"deepstack_visual_indexes\": [0], "
                      "\"depth\": 1, \"hidden_size\": 16, \"model_type\": \"qwen3_vl\", \"num_heads\": 2, "
                      "\"out_hidden_size\": 64, \"patch_size\": 16, \"spatial_merge_size\": 2, \"temporal_patch_size\": 2}",
        .gguf_arch = "qwen3",
        .synth = {64, 4, 2, 3, 256, 128, false,
                  GQA_KEYS("silu", "1e-06") ", \"head_dim\": 32, \"rope_scaling\": {\"mrope_interleaved\": true, "
                  "\"mrope_section\": [6, 5, 5], \"rope_type\": \"default\"}, \"rope_theta\": 5000000"},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen3vl"},
    /* Qwen3-VL-30B-A3B-Instruct's text_config (qwen3_vl_moe_text): Qwen3's attention (32 / 4 heads of 128, q/k
       norms), 48 layers, every one (decoder_sparse_step 1, mlp_only_layers []) 128 experts top-8 of 768 routed by
       softmax, the top-k renormalised (Qwen3VLMoeTextTopKRouter always does), no shared expert; the experts fused
       as the checkpoint stores them: gate_up_proj [E, D, 2I] used as x @ W, gate / up its column halves, down_proj
       [E, I, D] (transformers 4.57's bmm, vLLM's loader -- transposed, chunked in halves --, llama.cpp's converter).
       transformers 5 keeps them as [E, 2I, D] / [E, D, I] (F.linear) and transposes at load only where the stored
       shape differs (conversion_mapping.py: Transpose(1, 2, check_dims=True)): right for the releases (D 2048, I 768),
       wrong where I = D (down_proj square) or D = 2I (gate_up_proj square), which lint says. The recipe: 4 experts
       top-2 of 48 (neither square) */
    [FAM_QWEN3_VL_MOE] = {
        "qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration", "qwen3",
        "Qwen3-VL MoE: its text tower (Qwen3's layer; M-RoPE; fused experts)", LLAMA_LIKE, .qk_norm = QKN_HEAD,
        .moe = MOE_QWEN3_VL, .router_norm_topk = true, .names = NAMES_MODEL_LM, .text_config = "qwen3_vl_moe_text",
        .tower_note = "M-RoPE (mrope_section) on text-only positions (t = h = w) is ordinary RoPE; DeepStack adds "
                      "nothing without images",
        .vision = {"model.visual.patch_embed.proj.weight", "model.visual.merger.linear_fc1.weight"},
        .tower_keys = "\"image_token_id\": 151655, \"video_token_id\": 151656, \"vision_start_token_id\": 151652, "
                      "\"vision_end_token_id\": 151653, \"vision_config\": {\"deepstack_visual_indexes\": [0], "
                      "\"depth\": 1, \"hidden_size\": 16, \"model_type\": \"qwen3_vl_moe\", \"num_heads\": 2, "
                      "\"out_hidden_size\": 64, \"patch_size\": 16, \"spatial_merge_size\": 2, \"temporal_patch_size\": 2}",
        .synth = {64, 4, 2, 3, 256, 128, false,
                  GQA_KEYS("silu", "1e-06") ", \"decoder_sparse_step\": 1, \"head_dim\": 32, \"mlp_only_layers\": [], "
                  "\"moe_intermediate_size\": 48, \"norm_topk_prob\": true, \"num_experts\": 4, "
                  "\"num_experts_per_tok\": 2, \"rope_scaling\": {\"mrope_interleaved\": true, "
                  "\"mrope_section\": [6, 5, 5], \"rope_type\": \"default\"}, \"rope_theta\": 5000000"},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen3vlmoe"},
    /* Mistral-Small-3.1-24B's text_config (model_type mistral, no window); tensors under language_model.model. */
    [FAM_MISTRAL3] = {
        "mistral3", "Mistral3ForConditionalGeneration", "mistral", "Mistral Small 3.1 / 3.2: its text tower (Mistral)",
        LLAMA_LIKE, .windowed = true, .names = NAMES_LM_MODEL, .text_config = "mistral",
        .vision = {"vision_tower.patch_conv.weight", "multi_modal_projector.linear_1.weight"},
        .tower_keys = "\"image_token_index\": 10, \"multimodal_projector_bias\": false, \"projector_hidden_act\": "
                      "\"gelu\", \"spatial_merge_size\": 2, \"vision_config\": {\"head_dim\": 8, \"hidden_size\": 16, "
                      "\"model_type\": \"pixtral\", \"num_attention_heads\": 2, \"num_hidden_layers\": 1, "
                      "\"patch_size\": 14}, \"vision_feature_layer\": -1",
        .gguf_arch = "llama",
        .synth = {128, 4, 2, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-05") ", \"head_dim\": 32, \"rope_theta\": 1000000000.0, \"sliding_window\": null"},
        .engines = ENGINES_ALL, .llamacpp_arch = "llama"},
    /* meta-llama/Llama-4-Scout-17B-16E's text_config (Llama4ForCausalLM alone: llama4_text): 48 layers, 40 / 8
       heads of 128, no_rope_layers 1 (RoPE) on three layers of four and 0 (NoPE) on every fourth; the RoPE
       layers attend within chunks of attention_chunk_size 8192 (layer_types chunked_attention) and L2-normalise
       q and k per head after RoPE (use_qk_norm, no weight); the NoPE layers attend to every key and scale q by
       1 + attn_scale ln(1 + floor((p + 1) / floor_scale)) (attn_temperature_tuning, 0.1, 8192); complex RoPE on
       adjacent pairs, llama3 x16 from 8192 with low = high = 1, theta 5e5; every layer (interleave_moe_layer_step
       1) 16 experts top-1 by sigmoid of the chosen logit on the expert's input, fused gate_up_proj [E, D, 2I]
       used as x @ W with [gate | up] halves, and a shared expert of intermediate_size 8192; dense layers
       intermediate_size_mlp 16384. The recipe shrinks the chunk to 8 and floor_scale to 4 (so that 24 tokens
       see both), 4 experts of 64 */
    [FAM_LLAMA4_TEXT] = {
        "llama4_text", "Llama4ForCausalLM", "llama4", "Llama 4 text (chunked RoPE layers, NoPE layers with temperature "
        "tuning, L2 q/k norm; sigmoid top-1 MoE with a shared expert)", LLAMA4_TRAITS,
        .synth = {128, 4, 2, 4, 256, 64, false,
                  GQA_KEYS("silu", "1e-05") ", \"attention_chunk_size\": 8, \"attn_scale\": 0.1, "
                  "\"attn_temperature_tuning\": true, \"floor_scale\": 4, \"head_dim\": 32, "
                  "\"interleave_moe_layer_step\": 1, \"intermediate_size_mlp\": 128, "
                  "\"no_rope_layers\": [1, 1, 1, 0], \"num_experts_per_tok\": 1, \"num_local_experts\": 4, "
                  "\"rope_scaling\": {\"factor\": 16.0, \"high_freq_factor\": 1.0, \"low_freq_factor\": 1.0, "
                  "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0, "
                  "\"use_qk_norm\": true"},
        .engines = ENGINES_ALL, .llamacpp_arch = "llama4"},
    /* meta-llama/Llama-4-Maverick-17B-128E's config.json (Llama4ForConditionalGeneration): its text_config as
       Scout's but interleave_moe_layer_step 2 (MoE on odd layers, dense between), 128 experts, use_qk_norm false,
       rope_scaling null; tensors under language_model.model. (head language_model.lm_head), the vision tower
       under vision_model., the projector multi_modal_projector. (not read). The recipe: step 2 over 4 layers */
    [FAM_LLAMA4] = {
        "llama4", "Llama4ForConditionalGeneration", "llama4", "Llama 4 multimodal (Scout, Maverick): its text tower, "
        "as llama4_text", LLAMA4_TRAITS, .names = NAMES_LM_MODEL, .text_config = "llama4_text",
        .vision = {"vision_model.patch_embedding.linear.weight", "multi_modal_projector.linear_1.weight"},
        .tower_keys = "\"boi_token_index\": 200080, \"eoi_token_index\": 200081, \"image_token_index\": 200092, "
                      "\"vision_config\": {\"hidden_size\": 16, \"image_size\": 28, \"intermediate_size\": 32, "
                      "\"model_type\": \"llama4_vision_model\", \"num_attention_heads\": 2, \"num_hidden_layers\": 1, "
                      "\"patch_size\": 14, \"vision_output_dim\": 16}",
        .synth = {128, 4, 2, 4, 256, 64, false,
                  GQA_KEYS("silu", "1e-05") ", \"attention_chunk_size\": 8, \"attn_scale\": 0.1, "
                  "\"attn_temperature_tuning\": true, \"floor_scale\": 4, \"head_dim\": 32, "
                  "\"interleave_moe_layer_step\": 2, \"intermediate_size_mlp\": 128, "
                  "\"no_rope_layers\": [1, 1, 1, 0], \"num_experts_per_tok\": 1, \"num_local_experts\": 4, "
                  "\"rope_scaling\": null, \"rope_theta\": 500000.0, \"use_qk_norm\": false"},
        .engines = ENGINES_ALL, .llamacpp_arch = "llama4"},
    [FAM_MIXTRAL] = {
        "mixtral", "MixtralForCausalLM", "mixtral", "Mixtral (Mistral attention, top-k experts w1/w2/w3)", LLAMA_LIKE,
        .moe = MOE_MIXTRAL, .eps = 1e-5, .windowed = true, .router_norm_topk = true,
        .synth = {128, 4, 2, 3, 256, 128, false,
                  GQA_KEYS("silu", "1e-05") ", \"num_local_experts\": 4, \"num_experts_per_tok\": 2, "
                  "\"output_router_logits\": false, \"router_aux_loss_coef\": 0.02, \"rope_theta\": 1000000, "
                  "\"sliding_window\": " SW},
        .engines = ENGINES_ALL, .llamacpp_arch = "llama"},
    /* XiaomiMiMo/MiMo-7B-Base / -RL's config.json: Qwen2's layer (q/k/v biases, attention_bias true),
       rope_theta 640000, rms_norm_eps 1e-5, no window (use_sliding_window false), and
       num_nextn_predict_layers 1: model.mtp_layers.0.* (its own modeling_mimo.py, auto_map) only
       drafts tokens for speculative decoding, and the causal LM's logits never read it */
    [FAM_MIMO] = {
        "mimo", "MiMoForCausalLM", "mimo", "MiMo (Qwen2's layer; its multi-token-prediction layers are skipped)",
        LLAMA_LIKE, .qkv_bias_always = true, .window_opt_in = true, .mtp_layers = "mtp_layers.", .gguf_arch = "qwen2",
        .synth = {128, 4, 2, 3, 256, 256, false,
                  "\"attention_bias\": true, \"hidden_act\": \"silu\", \"max_window_layers\": 3, "
                  "\"num_nextn_predict_layers\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "
                  "\"rope_theta\": 640000, \"sliding_window\": 32768, \"use_sliding_window\": false"},
        .engines = ENGINE_HF | ENGINE_VLLM | ENGINE_SGLANG},   /* HF: auto_map; llama.cpp: MiMo-V2 only */
    /* LGAI-EXAONE/EXAONE-4.0-32B's config.json: layer_types 3 sliding (window 4096) : 1 full, also
       as sliding_window_pattern "LLLG"; no RoPE on the full layers (only with a window: the 1.2B, with
       sliding_window null, rotates every layer); q_norm / k_norm per head after the projections;
       norms after attention and MLP only (OLMo 2's block); llama3 rope_scaling x16 from 8192, theta 1e6 */
    [FAM_EXAONE4] = {
        "exaone4", "Exaone4ForCausalLM", "exaone4", "EXAONE 4.0 (3 sliding : 1 global layers without RoPE, q/k norms, "
        "post-norms)", LLAMA_LIKE, .block = BLOCK_POST, .norms = NORMS_POST, .qk_norm = QKN_HEAD, .eps = 1e-5,
        .windowed = true, .window_pattern = 4, .nope_on_global = true,
        .synth = {128, 4, 2, 4, 256, 256, false,
                  GQA_KEYS("silu", "1e-05") ", \"head_dim\": 32, \"layer_types\": [\"sliding_attention\", "
                  "\"sliding_attention\", \"sliding_attention\", \"full_attention\"], \"pad_token_id\": 0, "
                  "\"rope_scaling\": {\"factor\": 16.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, "
                  "\"original_max_position_embeddings\": 64, \"rope_type\": \"llama3\"}, \"rope_theta\": 1000000, "
                  "\"sliding_window\": " SW ", \"sliding_window_pattern\": \"LLLG\""},
        .engines = ENGINES_ALL, .llamacpp_arch = "exaone4", .gguf_arch = "exaone4"},
    /* MiniMaxAI/MiniMax-M2's config.json: 48 / 8 heads of 128, rotary_dim 64 (rotate_half on the first
       64 dims; no partial_rotary_factor: transformers 5.17's MiniMaxM2Config reads no rotary_dim and rotates all
       128, which lint says; a partial_rotary_factor beside it is read and must agree), q_norm / k_norm over the
       whole projection (qk_norm_type per_layer), every layer 256
       experts w1 / w3 / w2 of intermediate_size, top-8 by sigmoid + e_score_correction_bias, weights
       the unbiased sigmoids renormalised (MiniMaxM2TopKRouter); no shared expert; theta 5e6 */
    [FAM_MINIMAX_M2] = {
        "minimax_m2", "MiniMaxM2ForCausalLM", "minimax_m2", "MiniMax-M2 (q/k norms over the projection, rotary_dim; "
        "sigmoid-routed experts)", LLAMA_LIKE, .moe = MOE_MINIMAX, .qk_norm = QKN_PROJ, .rotary_dim_key = true,
        .router = ROUTER_DS_V3, .router_norm_topk = true,
        .synth = {128, 4, 2, 3, 256, 64, false,
                  "\"attn_type_list\": [1, 1, 1], \"head_dim\": 32, \"hidden_act\": \"silu\", "
                  "\"mtp_transformer_layers\": 1, \"num_experts_per_tok\": 2, "
                  "\"num_local_experts\": 8, \"num_mtp_modules\": 3, \"qk_norm_type\": \"per_layer\", "
                  "\"rms_norm_eps\": 1e-06, \"rope_theta\": 5000000, \"rotary_dim\": 16, \"scoring_func\": \"sigmoid\", "
                  "\"shared_intermediate_size\": 0, \"use_mtp\": true, \"use_qk_norm\": true, \"use_routing_bias\": true"},
        .engines = ENGINES_ALL, .llamacpp_arch = "minimax-m2"},
    /* mistralai/Ministral-3-8B-Instruct-2512's text_config (the text tower of its
       Mistral3ForConditionalGeneration; Ministral3ForCausalLM alone): Mistral's layer, head_dim 128, no
       window (sliding_window null), rope_parameters YaRN x16 from 16384 with mscale = mscale_all_dim = 1
       (attention factor 1), theta 1e6, llama_4_scaling_beta 0.1; the recipe shrinks the original
       context to 8 (factor 64 of 512 positions) so that tests over 24 tokens see q scaled */
    [FAM_MINISTRAL3] = {
        "ministral3", "Ministral3ForCausalLM", "ministral3", "Ministral 3 (Mistral's layer; YaRN, q scaled past the "
        "original context)", LLAMA_LIKE, .eps = 1e-5, .windowed = true, .llama4_scaling = true,
        .synth = {128, 4, 2, 3, 256, 256, false,
                  "\"head_dim\": 32, \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-05, \"rope_parameters\": "
                  "{\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": 64.0, \"llama_4_scaling_beta\": 0.1, "
                  "\"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 8, "
                  "\"rope_theta\": 1000000.0, \"rope_type\": \"yarn\", \"type\": \"yarn\"}, \"sliding_window\": null"},
        .gguf_arch = "mistral3", .engines = ENGINE_HF | ENGINE_VLLM},   /* vLLM: Ministral3ForCausalLM as MistralForCausalLM */
    /* google/gemma-4-31B's text_config (model_type gemma4_text): 60 layers, 5 sliding (window 1024, head_dim 256, 16
       KV heads, rope_theta 1e4) : 1 full (global_head_dim 512, attention_k_eq_v with 4 num_global_key_value_heads,
       "proportional" RoPE 0.25 of theta 1e6), final_logit_softcapping 30, no per-layer embeddings
       (hidden_size_per_layer_input 0), no MoE; the E2B / E4B add num_kv_shared_layers. The recipe keeps every key,
       shrunk: 6 layers [s, s, s, f, s, f], window 8, head_dim 32 with 2 KV heads on the sliding layers, global_head_dim
       64 with 1 KV head on the full ones (31B: 256 / 16, 512 / 4), the last 2 layers KV-shared with their MLPs twice
       as wide (use_double_wide_mlp, as the E models), per-layer embeddings of 16 per layer (E2B: 256), final soft-cap
       10 */
    [FAM_GEMMA4_TEXT] = {
        "gemma4_text", "Gemma4ForCausalLM", "gemma4", "Gemma 4 text (k_eq_v, KV-shared layers, proportional RoPE on "
        "global layers, v_norm, layer_scalar)", GEMMA4_TRAITS,
        .synth = {64, 4, 2, 6, 256, 128, true, GEMMA4_SYNTH},
        .engines = ENGINE_HF | ENGINE_VLLM},
    /* google/gemma-4-31B-it's config.json (Gemma4ForConditionalGeneration): the text tower above under
       model.language_model. (head lm_head, tied), vision_tower / embed_vision (and audio_tower / embed_audio in the
       E models) beside it, not read; the multimodal head applies final_logit_softcapping as the text model does. The
       recipe is gemma-4-26B-A4B-it's text_config shrunk: the MoE block beside each dense MLP (128 experts top 8 of
       704 -> 4 top 2 of 32), k_eq_v full layers with their own head dims, no KV sharing, no per-layer embeddings */
    [FAM_GEMMA4] = {
        "gemma4", "Gemma4ForConditionalGeneration", "gemma4", "Gemma 4 multimodal: its text tower, as gemma4_text",
        GEMMA4_TRAITS, .names = NAMES_MODEL_LM, .text_config = "gemma4_text",
        .tower_note = "the vision and audio towers (vision_tower, embed_vision, audio_tower, embed_audio) are not read; "
                      "text-only inputs never reach them",
        .text_defaults = "\"vocab_size\": 262144, \"hidden_size\": 2304, \"intermediate_size\": 9216, "
                         "\"num_hidden_layers\": 30, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, "
                         "\"head_dim\": 256, \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-06, "
                         "\"sliding_window\": 512",
        .vision = {"model.vision_tower.patch_embedder.input_proj.weight", "model.embed_vision.embedding_projection.weight"},
        .tower_keys = "\"audio_config\": null, \"boi_token_id\": 255999, \"eoi_token_id\": 258882, "
                      "\"image_token_id\": 258880, \"video_token_id\": 258884, \"vision_config\": {\"hidden_size\": 16, "
                      "\"intermediate_size\": 32, \"model_type\": \"gemma4_vision\", \"num_attention_heads\": 2, "
                      "\"num_hidden_layers\": 1, \"patch_size\": 16}",
        .synth = {64, 4, 2, 6, 256, 128, true, GEMMA4_SYNTH_MOE},
        .engines = ENGINE_HF | ENGINE_VLLM},
    [FAM_PHI3] = {
        "phi3", "Phi3ForCausalLM", "phi3", "Phi-3 (fused qkv_proj and gate_up_proj, partial rotary)", LLAMA_LIKE,
        .attn = QKV_CAT, .ffn = FFN_FUSED, .eps = 1e-5, .windowed = true, .gguf_arch = "phi3",
        .synth = {128, 4, 2, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-05") ", \"embd_pdrop\": 0.0, \"original_max_position_embeddings\": 512, "
                  "\"pad_token_id\": 0, \"partial_rotary_factor\": 0.5, \"resid_pdrop\": 0.0, \"rope_scaling\": null, "
                  "\"rope_theta\": 10000, \"sliding_window\": " SW},
        .engines = ENGINES_ALL, .llamacpp_arch = "phi3"},
    [FAM_NEOX] = {
        "gpt_neox", "GPTNeoXForCausalLM", "gpt_neox", "GPT-NeoX / Pythia (fused QKV head by head, parallel residual)",
        LLAMA_LIKE, .keys = KEYS_NEOX, .attn = QKV_HEADS, .block = BLOCK_PARALLEL, .ffn = FFN_NEOX,
        .names = NAMES_NEOX, .norm = NORM_LAYER, .act = "gelu", .eps = 1e-5, .bias_default = true,
        .gguf_arch = "gptneox",
        .synth = {128, 4, 4, 3, 256, 512, false,
                  "\"hidden_act\": \"gelu\", \"attention_bias\": true, \"hidden_dropout\": 0.0, "
                  "\"layer_norm_eps\": 1e-05, \"rotary_emb_base\": 10000, \"rotary_pct\": 0.25, "
                  "\"use_parallel_residual\": true"},
        .engines = ENGINES_ALL, .llamacpp_arch = "gptneox"},
    [FAM_OLMO2] = {
        "olmo2", "Olmo2ForCausalLM", "olmo2", "OLMo 2 (post-norms, q/k norms over the projection)", LLAMA_LIKE,
        .block = BLOCK_POST, .norms = NORMS_POST, .qk_norm = QKN_PROJ, .eps = 1e-5, .gguf_arch = "olmo2",
        .synth = {128, 4, 4, 3, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"rope_scaling\": null, \"rope_theta\": 500000, \"pad_token_id\": 0"},
        .engines = ENGINES_ALL, .llamacpp_arch = "olmo2"},
    /* Olmo-3-7B / 32B's config.json: layer_types 3 sliding : 1 full, sliding_window 4096, rope_theta 500000,
       YaRN x8 from 8192 with attention_factor 1.2079 (= 0.1 ln 8 + 1) on the full layers only; the
       recipe shrinks the window to 8 and the original context to 64, and sets attention_factor 1.25
       so that the key itself, not YaRN's default, is what the checks see */
    [FAM_OLMO3] = {
        "olmo3", "Olmo3ForCausalLM", "olmo3", "OLMo 3 (OLMo 2's block; window on 3 layers of 4, YaRN on the full ones)",
        LLAMA_LIKE, .block = BLOCK_POST, .norms = NORMS_POST, .qk_norm = QKN_PROJ, .eps = 1e-5, .windowed = true,
        .window_pattern = 4, .local_rope_plain = true,
        .synth = {128, 4, 2, 4, 256, 256, false,
                  GQA_KEYS("silu", "1e-06") ", \"layer_types\": [\"sliding_attention\", \"sliding_attention\", "
                  "\"sliding_attention\", \"full_attention\"], \"pad_token_id\": 0, \"rope_scaling\": "
                  "{\"attention_factor\": 1.25, \"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 8.0, "
                  "\"original_max_position_embeddings\": 64, \"rope_type\": \"yarn\"}, \"rope_theta\": 500000, "
                  "\"sliding_window\": " SW},
        .engines = ENGINES_ALL, .llamacpp_arch = "olmo2", .gguf_arch = "olmo2"},
    /* Qwen3-Next-80B-A3B's config.json: 48 layers, full_attention_interval 4 (no layer_types), head_dim 256,
       partial_rotary_factor 0.25, 16 heads / 2 KV heads, linear_num_key_heads 16, linear_num_value_heads 32,
       linear_{key,value}_head_dim 128, linear_conv_kernel_dim 4, 512 experts top-10 with a shared expert.
       The recipe keeps every key, shrunk: 4 experts top-2 of 64 and a shared expert of 96 on every layer */
    /* nvidia/Nemotron-H-8B-Base-8K's config.json (also Nemotron Nano 2, Nemotron 3 with 'E' blocks): 52 blocks of one
       mixer each by hybrid_override_pattern (24 Mamba-2, 4 attention, 24 relu2 MLP), x += mixer(norm(x)) with
       NemotronHRMSNorm w x; attention 32 / 8 heads of attention_head_dim 128, no RoPE, scale head_dim^-1/2, no biases;
       Mamba-2 128 heads of 64, n_groups 8, ssm_state_size 128, conv_kernel 4 (+ bias), the gated norm per group;
       tensors under backbone. (embeddings, norm_f), lm_head untied. NVIDIA-Nemotron-3-Nano-30B-A3B adds 'E' blocks:
       128 experts up / down (relu2, no gate) of moe_intermediate_size 1856, top-6 by sigmoid + e_score_correction_bias,
       x routed_scaling_factor 2.5, a shared expert of moe_shared_expert_intermediate_size 3712; head_dim. The recipe:
       Nemotron 3 Nano's keys shrunk, "M*EM*-" (layers 1, 4 attention; 2 an MoE block of 4 experts top-2). */
    [FAM_NEMOTRON_H] = {
        "nemotron_h", "NemotronHForCausalLM", "nemotron_h", "Nemotron-H / Nemotron Nano 2 / Nemotron 3 (blocks of one "
        "mixer: Mamba-2, attention without RoPE, relu2 MLP, MoE)", LLAMA_LIKE, .attn = QKV_MIXER, .norms = NORMS_MIXER,
        .ffn = FFN_MIXER, .moe = MOE_NEMOTRON, .lin = LIN_MAMBA2_NEMOTRON, .names = NAMES_BACKBONE, .act = "relu2",
        .act_key = "mlp_hidden_act", .eps = 1e-5, .rope_never = true, .router = ROUTER_DS_V3,
        .synth = {64, 4, 2, 6, 256, 128, false,
                  "\"attention_bias\": false, "
                  "\"chunk_size\": 128, \"conv_kernel\": 4, \"expand\": 2, \"head_dim\": 32, "
                  "\"hybrid_override_pattern\": \"M*EM*-\", \"layer_norm_epsilon\": 1e-05, \"mamba_head_dim\": 16, "
                  "\"mamba_hidden_act\": \"silu\", \"mamba_num_heads\": 8, \"mamba_proj_bias\": false, "
                  "\"mamba_ssm_cache_dtype\": \"float32\", \"mlp_bias\": false, \"mlp_hidden_act\": \"relu2\", "
                  "\"moe_intermediate_size\": 32, \"moe_shared_expert_intermediate_size\": 48, \"n_group\": 1, "
                  "\"n_groups\": 2, \"n_routed_experts\": 4, \"n_shared_experts\": 1, \"norm_eps\": 1e-05, "
                  "\"norm_topk_prob\": true, \"num_experts_per_tok\": 2, \"partial_rotary_factor\": 1.0, "
                  "\"rescale_prenorm_residual\": true, \"residual_in_fp32\": false, \"rope_theta\": 10000, "
                  "\"routed_scaling_factor\": 2.5, \"sliding_window\": null, \"ssm_state_size\": 16, "
                  "\"time_step_floor\": 0.0001, \"time_step_max\": 0.1, \"time_step_min\": 0.001, \"topk_group\": 1, "
                  "\"use_bias\": false, \"use_conv_bias\": true"},
        .engines = ENGINES_ALL, .llamacpp_arch = "nemotron_h"},
    /* ibm-granite/granite-4.0-h-tiny's config.json: layer_types mamba / attention (9 : 1 in 40 layers), attention
       without RoPE (position_embedding_type "nope") and scaled by attention_multiplier, embeddings x
       embedding_multiplier, residual_multiplier on each block's output, logits / logits_scaling; every layer 64
       experts top-6 (block_sparse_moe.input_linear [E, 2I, D] rows [gate ; up], softmax over the top-k logits) plus
       the shared MLP (shared_mlp.input_linear [gate ; up]); Mamba-2 under mamba. with n_groups 1 (the gated norm over
       all heads); tied embeddings. The recipe: 4 layers mamba / attention alternating, 4 experts top-2. */
    [FAM_GRANITE_HYBRID] = {
        "granitemoehybrid", "GraniteMoeHybridForCausalLM", "granitemoehybrid", "Granite 4.0-H (Mamba-2 and attention "
        "layers, MoE + shared MLP, mup multipliers, NoPE attention)", LLAMA_LIKE, .ffn = FFN_GRANITE, .moe = MOE_GRANITE,
        .lin = LIN_MAMBA2_GRANITE, .mup = true, .router_norm_topk = true, .tied = true,
        .synth = {128, 4, 2, 4, 256, 64, true,
                  "\"attention_bias\": false, "
                  "\"attention_multiplier\": 0.0078125, \"embedding_multiplier\": 12, "
                  "\"hidden_act\": \"silu\", \"layer_types\": [\"mamba\", \"attention\", \"mamba\", \"attention\"], "
                  "\"logits_scaling\": 6, \"mamba_chunk_size\": 256, \"mamba_conv_bias\": true, \"mamba_d_conv\": 4, "
                  "\"mamba_d_head\": 32, \"mamba_d_state\": 16, \"mamba_expand\": 2, \"mamba_n_groups\": 1, "
                  "\"mamba_n_heads\": 8, \"mamba_proj_bias\": false, "
                  "\"normalization_function\": \"rmsnorm\", \"num_experts_per_tok\": 2, \"num_local_experts\": 4, "
                  "\"position_embedding_type\": \"nope\", \"residual_multiplier\": 0.22, \"rms_norm_eps\": 1e-05, "
                  "\"rope_scaling\": null, \"rope_theta\": 10000, \"router_aux_loss_coef\": 0.0, "
                  "\"shared_intermediate_size\": 96"},
        .engines = ENGINES_ALL, .llamacpp_arch = "granitehybrid"},
    [FAM_QWEN3_NEXT] = {
        "qwen3_next", "Qwen3NextForCausalLM", "qwen3_next", "Qwen3-Next (Gated DeltaNet 3 : 1 gated attention, "
        "partial rotary, (1 + w) norms)", LLAMA_LIKE, .norm = NORM_RMS_1P, .qk_norm = QKN_HEAD, .partial_rotary = 0.25,
        .moe = MOE_QWEN_NEXT, .lin = LIN_QWEN3_NEXT, .attn_gate = true,
        .synth = {64, 4, 2, 4, 256, 128, false,
                  GQA_KEYS("silu", "1e-06") ", \"decoder_sparse_step\": 1, \"full_attention_interval\": 4, "
                  "\"head_dim\": 32, \"linear_conv_kernel_dim\": 4, \"linear_key_head_dim\": 16, "
                  "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_value_head_dim\": 16, "
                  "\"mlp_only_layers\": [], \"moe_intermediate_size\": 64, \"norm_topk_prob\": true, \"num_experts\": 4, "
                  "\"num_experts_per_tok\": 2, "
                  "\"partial_rotary_factor\": 0.25, "
                  "\"rope_scaling\": null, \"rope_theta\": 10000000, \"shared_expert_intermediate_size\": 96, "
                  "\"use_sliding_window\": false"},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen3next"},
    /* Qwen3.5-9B's config.json (Qwen3_5ForConditionalGeneration): text_config qwen3_5_text -- layer_types 3
       linear : 1 full, head_dim 256, attn_output_gate, rope_parameters {rope_theta 1e7, partial_rotary_factor
       0.25, mrope_section [11, 11, 10], mrope_interleaved}, 16 / 32 linear heads of 128, conv 4; tensors under
       model.language_model. (Qwen3-Next's names, the linear projections split: in_proj_qkv / z / b / a), the
       vision tower under model.visual., MTP layers under mtp. (not read) */
    [FAM_QWEN3_5] = {
        "qwen3_5", "Qwen3_5ForConditionalGeneration", "qwen3_5", "Qwen3.5 / 3.6: its text tower (Qwen3-Next's layers, "
        "split linear projections)", QWEN3_5_TRAITS, .text_config = "qwen3_5_text",
        .synth = {64, 4, 2, 4, 256, 128, false, GQA_KEYS("silu", "1e-06") ", " QWEN3_5_KEYS},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen35"},
    /* Qwen3.5-35B-A3B / Qwen3.6's text_config (qwen3_5_moe_text): 256 experts top-8 of 512 and a shared expert of
       512 (Qwen3-Next's MoE, its top-k weights always renormalised: transformers' Qwen3_5MoeTopKRouter reads no
       norm_topk_prob); the recipe: 4 experts top-2 of 64, a shared expert of 96 */
    [FAM_QWEN3_5_MOE] = {
        "qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", "qwen3_5",
        "Qwen3.5 / 3.6 MoE: its text tower (Qwen3-Next's "
        "layers and MoE, split linear projections, fused experts)", QWEN3_5_TRAITS, .moe = MOE_QWEN3_5,
        .router_norm_topk = true, .text_config = "qwen3_5_moe_text",
        .synth = {64, 4, 2, 4, 256, 128, false,
                  GQA_KEYS("silu", "1e-06") ", \"moe_intermediate_size\": 64, \"num_experts\": 4, "
                  "\"num_experts_per_tok\": 2, \"shared_expert_intermediate_size\": 96, " QWEN3_5_KEYS},
        .engines = ENGINES_ALL, .llamacpp_arch = "qwen35moe"},
    /* attnlab's own layout of a `convert mla` (core/export/attnlab_export.h): the source's config.json and tensors
       with model_type attnlab_mla, the source's model_type in attnlab_source_model_type (whose row gives every
       trait: windows, sinks, soft-caps, norms, MLP, MoE), and the attention in DeepSeek-V3's names and MLA keys.
       No engine implements it (lint says so per engine); config.c reads it over the source's row */
    [FAM_ATTNLAB_MLA] = {
        "attnlab_mla", "AttnlabMlaForCausalLM", "attnlab_mla", "attnlab's own layout of a convert mla (`export DIR "
        "format attnlab`): the source's model with MLA attention and what DeepSeek-V3 cannot hold (windows, sinks, "
        "soft-caps, norms) kept", LLAMA_LIKE, .keys = KEYS_ATTNLAB, .attn = QKV_MLA},
};

#pragma GCC diagnostic pop

/* A new enum value without its row leaves the table short (a row left out in the middle is a
 * zero row: test_family_table finds it). */
_Static_assert(sizeof FAMILY / sizeof *FAMILY == FAM_COUNT, "one row per model_family");

const FamilyRow *family_row(model_family f) {
    static const FamilyRow unknown = {"?", NULL, "?", "", .keys = KEYS_HF, .act = "silu", .eps = 1e-6};
    return f >= 0 && f < FAM_COUNT ? &FAMILY[f] : &unknown;
}

bool family_find(const char *type, const char *arch, model_family *out) {
    for (int f = 0; f < FAM_COUNT; f++) {
        const FamilyRow *r = &FAMILY[f];
        if (r->keys == KEYS_LLAMA2C) continue;               /* no config.json */
        if ((type && !strcmp(type, r->model_type)) || (!type && arch && r->arch && !strcmp(arch, r->arch))) {
            *out = (model_family)f;
            return true;
        }
    }
    return false;
}

void family_type_list(char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int f = 0; f < FAM_COUNT && n < cap; f++) {
        if (FAMILY[f].keys == KEYS_LLAMA2C) continue;
        int k = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", FAMILY[f].model_type);
        n += k > 0 ? (size_t)k : 0;
    }
}
