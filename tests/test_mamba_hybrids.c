/* test_mamba_hybrids.c -- the Mamba-2 hybrids' rows (issue 27: nemotron_h, granitemoehybrid) read from the
 * config.json files of real releases:
 *   - nvidia/Nemotron-H-8B-Base-8K (as TensorRT-LLM's test vendors it): 52 blocks of one mixer by
 *     hybrid_override_pattern, 24 Mamba-2, 4 attention (no RoPE, attention_head_dim 128), 24 relu2 MLP blocks;
 *   - NVIDIA-Nemotron-3-Nano-30B-A3B: 'E' blocks (128 experts top-6 of 1856, shared 3712, sigmoid routing), head_dim;
 *   - ibm-granite/granite-4.0-h-tiny and -h-1B (sizes and layer_types as published; the multipliers and
 *     position_embedding_type of the h-tiny release added): Mamba-2 under mamba., attention at 5, 15, 25, 35,
 *     experts + shared MLP (MoE) or the shared MLP alone (1B);
 * the layer kinds, the Mamba-2 dims, the tensors by role, the multipliers and the refusals of the attention
 * analyses on the layers that have no attention. The old code refused every one of these model_types. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NEMOTRON_H_8B_PATTERN "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
#define NEMOTRON_3_NANO_PATTERN "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"

static const char NEMOTRON_H_8B[] =
    "{\"architectures\": [\"NemotronHForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attention_head_dim\": 128, \"bos_token_id\": 1, \"chunk_size\": 256, \"conv_kernel\": 4, \"eos_token_id\": 2, "
    "\"expand\": 2, \"hidden_dropout\": 0.0, \"hidden_size\": 4096, \"hybrid_override_pattern\": \""
    NEMOTRON_H_8B_PATTERN "\", \"initializer_range\": 0.02, \"intermediate_size\": 21504, \"layer_norm_epsilon\": 1e-05, "
    "\"mamba_head_dim\": 64, \"mamba_hidden_act\": \"silu\", \"mamba_num_heads\": 128, \"mamba_proj_bias\": false, "
    "\"max_position_embeddings\": 8192, \"mlp_bias\": false, \"mlp_hidden_act\": \"relu2\", \"model_type\": \"nemotron_h\", "
    "\"n_groups\": 8, \"num_attention_heads\": 32, \"num_hidden_layers\": 52, \"num_key_value_heads\": 8, "
    "\"num_logits_to_keep\": 1, \"pad_token_id\": 0, \"rescale_prenorm_residual\": true, \"residual_in_fp32\": false, "
    "\"rms_norm_eps\": 1e-05, \"sliding_window\": null, \"ssm_state_size\": 128, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.48.0.dev0\", \"use_bias\": false, \"use_cache\": true, "
    "\"use_conv_bias\": true, \"use_mamba_kernels\": true, \"vocab_size\": 131072}";

static const char NEMOTRON_3_NANO[] =
    "{\"architectures\": [\"NemotronHForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 1, \"chunk_size\": 128, \"conv_kernel\": 4, \"eos_token_id\": 2, \"expand\": 2, \"head_dim\": 128, "
    "\"hidden_dropout\": 0.0, \"hidden_size\": 2688, \"hybrid_override_pattern\": \"" NEMOTRON_3_NANO_PATTERN "\", "
    "\"initializer_range\": 0.02, \"intermediate_size\": 1856, \"layer_norm_epsilon\": 1e-05, \"mamba_head_dim\": 64, "
    "\"mamba_hidden_act\": \"silu\", \"mamba_num_heads\": 64, \"mamba_proj_bias\": false, "
    "\"mamba_ssm_cache_dtype\": \"float32\", \"max_position_embeddings\": 262144, \"mlp_bias\": false, "
    "\"mlp_hidden_act\": \"relu2\", \"model_type\": \"nemotron_h\", \"moe_intermediate_size\": 1856, "
    "\"moe_shared_expert_intermediate_size\": 3712, \"n_group\": 1, \"n_groups\": 8, \"n_routed_experts\": 128, "
    "\"n_shared_experts\": 1, \"norm_eps\": 1e-05, \"norm_topk_prob\": true, \"num_attention_heads\": 32, "
    "\"num_experts_per_tok\": 6, \"num_hidden_layers\": 52, \"num_key_value_heads\": 2, \"num_logits_to_keep\": 1, "
    "\"pad_token_id\": 0, \"partial_rotary_factor\": 1.0, \"rescale_prenorm_residual\": true, \"residual_in_fp32\": false, "
    "\"rope_theta\": 10000, \"routed_scaling_factor\": 2.5, \"sliding_window\": null, \"ssm_state_size\": 128, "
    "\"tie_word_embeddings\": false, \"time_step_floor\": 0.0001, \"time_step_max\": 0.1, \"time_step_min\": 0.001, "
    "\"topk_group\": 1, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.55.4\", \"use_bias\": false, "
    "\"use_cache\": true, \"use_conv_bias\": true, \"use_mamba_kernels\": true, \"vocab_size\": 131072}";

/* Granite 4.0-H's layer_types: attention at 5, 15, 25, 35 of 40. */
static void granite_layer_types(char *buf, size_t cap) {
    buf[0] = 0;
    for (int L = 0; L < 40; L++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s\"%s\"", L ? ", " : "", L % 10 == 5 ? "attention" : "mamba");
}

/* ibm-granite/granite-4.0-h-tiny (experts 64, top-6) or -h-1B (experts 0: the shared MLP alone). */
static void granite_json(char *json, size_t cap, bool tiny, const char *pos) {
    char lt[1024];
    granite_layer_types(lt, sizeof lt);
    snprintf(json, cap,
             "{\"architectures\": [\"GraniteMoeHybridForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
             "\"attention_multiplier\": 0.0078125, \"bos_token_id\": 100257, \"embedding_multiplier\": 12, "
             "\"eos_token_id\": 100257, \"hidden_act\": \"silu\", \"hidden_size\": 1536, \"initializer_range\": 0.1, "
             "\"intermediate_size\": %d, \"layer_types\": [%s], \"logits_scaling\": 6, \"mamba_chunk_size\": 256, "
             "\"mamba_conv_bias\": true, \"mamba_d_conv\": 4, \"mamba_d_head\": 64, \"mamba_d_state\": 128, "
             "\"mamba_expand\": 2, \"mamba_n_groups\": 1, \"mamba_n_heads\": 48, \"mamba_proj_bias\": false, "
             "\"max_position_embeddings\": 131072, \"model_type\": \"granitemoehybrid\", "
             "\"normalization_function\": \"rmsnorm\", \"num_attention_heads\": 12, \"num_experts_per_tok\": %d, "
             "\"num_hidden_layers\": 40, \"num_key_value_heads\": 4, \"num_local_experts\": %d, "
             "\"output_router_logits\": false, \"pad_token_id\": 100256, \"position_embedding_type\": \"%s\", "
             "\"residual_multiplier\": 0.22, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000, "
             "\"router_aux_loss_coef\": 0.0, \"shared_intermediate_size\": %d, \"tie_word_embeddings\": true, "
             "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 100352}",
             tiny ? 512 : 4096, lt, tiny ? 6 : 0, tiny ? 64 : 0, pos, tiny ? 1024 : 4096);
}

static bool name_is(const ModelConfig *c, tensor_role r, int L, int e, const char *what, const char *want) {
    char n[192];
    bool ok = cfg_role_name(c, r, L, e, what, n, sizeof n) && !strcmp(n, want);
    if (!ok) fprintf(stderr, "  role %s: '%s', want '%s'\n", tensor_role_name(r), n, want);
    return ok;
}

static void test_nemotron_h_8b(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse(NEMOTRON_H_8B, "Nemotron-H-8B/config.json", &c));
    char list[256];
    int na = cfg_attn_layers(&c, list, sizeof list);
    CHECK(c.family == FAM_NEMOTRON_H && c.n_layers == 52 && na == 4 && !strcmp(list, "7, 18, 29, 40") &&
          c.lin.n_linear == 48 && c.lin.n_mlp_blocks == 24 && c.lin.mamba && c.lin.blocks,
          "nemotron_h 8B: 4 attention layers (%s), %d without attention, %d MLP blocks", list, c.lin.n_linear,
          c.lin.n_mlp_blocks);
    CHECK(c.lin.v_heads == 128 && c.lin.dv == 64 && c.lin.k_heads == 8 && c.lin.dk == 128 && c.lin.conv == 4 &&
          c.lin.conv_bias, "nemotron_h 8B: Mamba-2 128 x 64, groups 8, state 128, conv 4 + bias: %d %d %d %d %d",
          c.lin.v_heads, c.lin.dv, c.lin.k_heads, c.lin.dk, c.lin.conv);
    CHECK(c.rope == ROPE_NONE && c.qk_nope_dim == 128 && c.qk_rope_dim == 0 && c.v_dim == 128 && c.n_kv_heads == 8 &&
          !cfg_layer_rope(&c, 7) && fabs(cfg_attn_scale(&c, 7) - 1 / sqrt(128.0)) < 1e-15 && c.norm_eps == 1e-5 &&
          !c.tie_embeddings && c.mlp == MLP_DENSE && !strcmp(c.activation, "relu2"),
          "nemotron_h 8B: attention_head_dim 128 without RoPE, scale 128^-1/2, relu2 dense MLP blocks");
    CHECK(cfg_layer_mamba(&c, 0) && !cfg_layer_mlp(&c, 0) && cfg_layer_linear(&c, 1) && !cfg_layer_mamba(&c, 1) &&
          cfg_layer_mlp(&c, 1) && !cfg_layer_linear(&c, 7) && !cfg_layer_mlp(&c, 7) && !cfg_moe_layer(&c, 1),
          "nemotron_h 8B: M / - / * blocks: a mixer or an MLP, never both");
    CHECK(name_is(&c, ROLE_LIN_IN, 0, -1, "weight", "backbone.layers.0.mixer.in_proj.weight") &&
          name_is(&c, ROLE_LIN_D, 0, -1, NULL, "backbone.layers.0.mixer.D") &&
          name_is(&c, ROLE_LIN_CONV, 0, -1, "bias", "backbone.layers.0.mixer.conv1d.bias") &&
          name_is(&c, ROLE_Q, 7, -1, "weight", "backbone.layers.7.mixer.q_proj.weight") &&
          name_is(&c, ROLE_FFN_UP, 1, -1, "weight", "backbone.layers.1.mixer.up_proj.weight") &&
          name_is(&c, ROLE_NORM_ATTN_IN, 1, -1, "weight", "backbone.layers.1.norm.weight") &&
          name_is(&c, ROLE_EMBED, 0, -1, "weight", "backbone.embeddings.weight") &&
          name_is(&c, ROLE_FINAL_NORM, 0, -1, "weight", "backbone.norm_f.weight") &&
          name_is(&c, ROLE_LM_HEAD, 0, -1, "weight", "lm_head.weight"),
          "nemotron_h: tensors under backbone., mixers under mixer.");
    CHECK(!cfg_role(&c, ROLE_FFN_GATE), "nemotron_h: the MLP has no gate");
    CHECK_ERR(cfg_check_attn_layer(&c, 0, "ranks"), "layer 0 of this nemotron_h model is a Mamba-2 (SSM) layer");
    CHECK(strstr(al_errmsg(), "7, 18, 29, 40") != NULL, "the refusal names the attention layers: %s", al_errmsg());
    CHECK_ERR(cfg_check_attn_layer(&c, 1, "ranks"), "layer 1 of this nemotron_h model is an MLP block");
    CHECK_OK(cfg_check_attn_layer(&c, 7, "ranks"));
}

static void test_nemotron_3_nano(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse(NEMOTRON_3_NANO, "Nemotron-3-Nano/config.json", &c));
    char list[256];
    int na = cfg_attn_layers(&c, list, sizeof list), moe = 0, mamba = 0;
    for (int L = 0; L < c.n_layers; L++) {
        moe += cfg_moe_layer(&c, L);
        mamba += cfg_layer_mamba(&c, L);
        if (cfg_moe_layer(&c, L) != (NEMOTRON_3_NANO_PATTERN[L] == 'E')) CHECK(false, "nemotron 3: layer %d MoE", L);
    }
    CHECK(na == 6 && !strcmp(list, "5, 12, 19, 26, 33, 42") && moe == 23 && mamba == 23 && c.mlp == MLP_MOE,
          "nemotron 3 nano: 6 attention (%s), 23 Mamba-2 (%d), 23 MoE blocks (%d)", list, mamba, moe);
    CHECK(c.moe.n_experts == 128 && c.moe.top_k == 6 && c.moe.expert_ffn == 1856 && c.moe.shared_ffn == 3712 &&
          c.moe.layout == MOE_NEMOTRON && c.moe.router == ROUTER_DS_V3 && c.moe.routed_scaling == 2.5 &&
          c.qk_nope_dim == 128 && c.rope == ROPE_NONE && c.n_kv_heads == 2 && c.lin.v_heads == 64,
          "nemotron 3 nano: 128 experts top-6 of 1856, shared 3712, sigmoid routing x2.5, head_dim 128, no RoPE "
          "(rope_theta is read by no layer)");
    CHECK(name_is(&c, ROLE_EXP_UP, 1, 5, "weight", "backbone.layers.1.mixer.experts.5.up_proj.weight") &&
          name_is(&c, ROLE_ROUTER_BIAS, 1, -1, NULL, "backbone.layers.1.mixer.gate.e_score_correction_bias") &&
          name_is(&c, ROLE_SHEXP_DOWN, 1, -1, "weight", "backbone.layers.1.mixer.shared_experts.down_proj.weight") &&
          !cfg_role(&c, ROLE_EXP_GATE), "nemotron 3: experts up / down without a gate, under mixer.");
}

static void test_granite(void) {
    char json[4096];
    ModelConfig c;
    granite_json(json, sizeof json, true, "nope");
    CHECK_OK(model_config_parse(json, "granite-4.0-h-tiny/config.json", &c));
    char list[256];
    int na = cfg_attn_layers(&c, list, sizeof list), moe = 0;
    for (int L = 0; L < c.n_layers; L++) moe += cfg_moe_layer(&c, L) && cfg_layer_mlp(&c, L);
    CHECK(c.family == FAM_GRANITE_HYBRID && na == 4 && !strcmp(list, "5, 15, 25, 35") && c.lin.n_linear == 36 &&
          c.lin.n_mlp_blocks == 0 && !c.lin.blocks && moe == 40, "granite h-tiny: attention %s, 36 Mamba-2, MoE on "
          "all %d", list, moe);
    CHECK(c.lin.v_heads == 48 && c.lin.dv == 64 && c.lin.k_heads == 1 && c.lin.dk == 128 && c.lin.conv == 4 &&
          c.lin.conv_bias && c.moe.n_experts == 64 && c.moe.top_k == 6 && c.moe.expert_ffn == 512 &&
          c.intermediate == 1024 && c.moe.layout == MOE_GRANITE && c.moe.norm_topk_prob,
          "granite h-tiny: Mamba-2 48 x 64, 1 group, state 128; 64 experts top-6 of 512, the shared MLP 1024");
    CHECK(c.rope == ROPE_NONE && c.qk_nope_dim == 128 && c.embed_scale == 12 && cfg_attn_scale(&c, 5) == 0.0078125 &&
          c.residual_mult == 0.22 && c.logits_div == 6 && c.tie_embeddings && c.norm_eps == 1e-5,
          "granite: NoPE, embeddings x12, scale 1/128, residuals x0.22, logits / 6: %g %g %g %g", c.embed_scale,
          cfg_attn_scale(&c, 5), c.residual_mult, c.logits_div);
    CHECK(name_is(&c, ROLE_LIN_IN, 0, -1, "weight", "model.layers.0.mamba.in_proj.weight") &&
          name_is(&c, ROLE_LIN_A_LOG, 0, -1, NULL, "model.layers.0.mamba.A_log") &&
          name_is(&c, ROLE_Q, 5, -1, "weight", "model.layers.5.self_attn.q_proj.weight") &&
          name_is(&c, ROLE_EXPS_GATE_UP, 0, -1, NULL, "model.layers.0.block_sparse_moe.input_linear.weight") &&
          name_is(&c, ROLE_ROUTER, 0, -1, "weight", "model.layers.0.block_sparse_moe.router.layer.weight") &&
          name_is(&c, ROLE_FFN_GATE_UP, 0, -1, "weight", "model.layers.0.shared_mlp.input_linear.weight") &&
          name_is(&c, ROLE_FFN_DOWN, 0, -1, "weight", "model.layers.0.shared_mlp.output_linear.weight"),
          "granite: mamba., self_attn., block_sparse_moe. and shared_mlp. names");
    granite_json(json, sizeof json, true, "rope");         /* position_embedding_type "rope": RoPE on every head dim */
    CHECK_OK(model_config_parse(json, "granite-rope/config.json", &c));
    CHECK(c.rope == ROPE_HALF && c.qk_rope_dim == 128 && cfg_layer_rope(&c, 5), "granite with \"rope\": RoPE");
    granite_json(json, sizeof json, false, "nope");        /* the dense h-1B: num_local_experts 0 */
    CHECK_OK(model_config_parse(json, "granite-4.0-h-1b/config.json", &c));
    CHECK(c.mlp == MLP_GATED && !cfg_moe_layer(&c, 0) && c.intermediate == 4096 && c.moe.layout == MOE_NONE,
          "granite h-1B: the shared MLP alone (4096)");
}

/* Configs that do not hold together are refused naming the field: a pattern of another length, an unknown letter, a
 * layer_types entry attnlab does not know, heads not a multiple of the groups. */
static void test_malformed(void) {
    char json[4096], bad[4200];
    ModelConfig c;
    static const struct { const char *from, *to, *needle; } cases[] = {
        {"M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "M-M-M-M*", "hybrid_override_pattern (8 entries for 52"},
        {"M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-MX",
         "hybrid_override_pattern entry 51"},
        {"\"n_groups\": 8", "\"n_groups\": 3", "the Mamba-2 heads (128) in n_groups (3)"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *at = strstr(NEMOTRON_H_8B, cases[i].from);
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - NEMOTRON_H_8B), NEMOTRON_H_8B, cases[i].to, at + strlen(cases[i].from));
        CHECK_ERR(model_config_parse(bad, "bad/config.json", &c), cases[i].needle);
    }
    ModelConfig pb;                                        /* biased Mamba-2 projections: read, the forward refuses */
    const char *nb = strstr(NEMOTRON_H_8B, "\"use_bias\": false");
    snprintf(bad, sizeof bad, "%.*s\"use_bias\": true%s", (int)(nb - NEMOTRON_H_8B), NEMOTRON_H_8B, nb + 17);
    CHECK(model_config_parse(bad, "bias/config.json", &pb) == AL_OK && pb.lin.proj_bias, "use_bias true is read");
    granite_json(json, sizeof json, true, "nope");
    char *at = strstr(json, "\"attention\"");
    snprintf(bad, sizeof bad, "%.*s\"full_attention\"%s", (int)(at - json), json, at + strlen("\"attention\""));
    CHECK_ERR(model_config_parse(bad, "bad/config.json", &c), "layer_types entry 5");
}

int main(void) {
    test_nemotron_h_8b();
    test_nemotron_3_nano();
    test_granite();
    test_malformed();
    return check_done();
}
