/* test_config.c -- the model description (core/model/config.c) beyond the dims: RoPE spec (layout,
 * partial rotary, scalings llama3 / yarn / longrope / unknown), attention scale (GPT-2 flags,
 * query_pre_attn_scalar, DeepSeek's YaRN mscale^2), soft-caps, per-layer sliding windows
 * (Mistral, Qwen2's max_window_layers, layer_types), activation, MoE routing; the kept tree
 * (model_config_tree is a deep copy); core/model/rope.c's softmax (window, soft-cap) and rotations
 * (both layouts; the double and the table rotation agree); and core/model/analyses.c's reasons
 * (per-head Q/K norms refuse the evaluator and ranks qk -- FaRR asks -- but not ranks vo; an unknown scaling
 * refuses ppl and convert with the same message). */
#include "test_transmla_util.h"
#include "analyses.h"
#include "farr.h"
#include "rope.h"
#include "shapes.h"

#include <cjson/cJSON.h>

#define LLAMA "\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4"

static ModelConfig parse(const char *body) {
    char json[2048];
    snprintf(json, sizeof json, "{%s}", body);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "t/config.json", &c));
    return c;
}

static void test_rope_spec(void) {
    ModelConfig c = parse(LLAMA);
    CHECK(c.rope_spec.layout == ROPE_HALF && c.rope_spec.rotary_dim == 16 && c.rope_spec.scaling.kind == RS_NONE,
          "plain llama: rotate_half, 16 rotary dims, no scaling");
    CHECK(c.act == ACT_SILU && c.mlp == MLP_GATED && c.norm == NORM_RMS && c.window_declared == -1, "llama defaults");
    c = parse(LLAMA ", \"partial_rotary_factor\": 0.5, \"rope_theta\": 500000");
    CHECK(c.rope_spec.rotary_dim == 8 && c.rope_spec.theta == 500000, "partial rotary: %d dims", c.rope_spec.rotary_dim);
    c = parse(LLAMA ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}");
    CHECK(c.rope_spec.scaling.kind == RS_LLAMA3 && c.rope_spec.scaling.low_freq_factor == 1 &&
          c.rope_spec.scaling.high_freq_factor == 4 && c.rope_spec.scaling.orig_max_pos == 8192, "llama3 defaults");
    c = parse(LLAMA ", \"max_position_embeddings\": 1000, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4, \"mscale\": 0.7}");
    CHECK(c.rope_spec.scaling.kind == RS_YARN && c.rope_spec.scaling.orig_max_pos == 1000 &&
          c.rope_spec.scaling.beta_fast == 32 && c.rope_spec.scaling.mscale == 0.7 && isnan(c.rope_spec.scaling.attention_factor),
          "yarn fields and defaults");
    CHECK_NEAR(rope_attention_factor(&c.rope_spec), 0.1 * log(4) + 1, 1e-15);
    c = parse(LLAMA ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 2, 3], \"long_factor\": [4, 5]}");
    CHECK(c.rope_spec.scaling.kind == RS_LONGROPE && c.rope_spec.scaling.n_short == 3 && c.rope_spec.scaling.long_factor[1] == 5,
          "longrope arrays recorded");
    CHECK_ERR(rope_scaling_check(&c.rope_spec.scaling, "t"), "rope_scaling type 'longrope'");
    c = parse(LLAMA ", \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}");
    CHECK(c.rope_spec.scaling.kind == RS_OTHER, "unknown scaling recorded, not refused at load");
    double f[8];
    CHECK_ERR(rope_inv_freq(&c.rope_spec, 16, 10000, f, "t"), "rope_scaling type 'dynamic'");
    c = parse("\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 1, "
              "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8, \"rope_interleave\": false, "
              "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 40, \"mscale\": 1, \"mscale_all_dim\": 1}");
    double m2 = 0.1 * log(40) + 1;
    CHECK(c.rope_spec.layout == ROPE_HALF && c.rope == ROPE_INTERLEAVED, "rope_interleave false: rotate_half pairs");
    CHECK_NEAR(cfg_attn_scale(&c, 0), m2 * m2 / sqrt(12.0), 1e-15);
    CHECK_NEAR(rope_attention_factor(&c.rope_spec), 1.0, 1e-15);
}

static void test_attention_fields(void) {
    ModelConfig c = parse("\"model_type\": \"gpt2\", \"n_embd\": 32, \"n_head\": 4, \"n_layer\": 3, "
                          "\"scale_attn_by_inverse_layer_idx\": true");
    CHECK_NEAR(cfg_attn_scale(&c, 2), 1 / sqrt(8.0) / 3, 1e-15);
    CHECK(c.act == ACT_GELU_TANH && c.norm == NORM_LAYER && c.mlp == MLP_DENSE, "gpt2: gelu_new, layernorm, dense MLP");
    c = parse("\"model_type\": \"gpt2\", \"n_embd\": 32, \"n_head\": 4, \"n_layer\": 3, \"scale_attn_weights\": false");
    CHECK_NEAR(cfg_attn_scale(&c, 1), 1.0, 0);
    c = parse(LLAMA ", \"query_pre_attn_scalar\": 256, \"attn_logit_softcapping\": 50, \"final_logit_softcapping\": 30, "
              "\"hidden_act\": \"gelu_pytorch_tanh\"");
    CHECK_NEAR(cfg_attn_scale(&c, 0), 1 / 16.0, 1e-15);
    CHECK(c.attn_softcap == 50 && c.final_softcap == 30 && c.act == ACT_GELU_TANH, "soft-caps and activation");
    Model fake = {.name = "x", .path = "x", .cfg = c};        /* recorded, then refused per analysis */
    fake.cfg.vocab = fake.cfg.intermediate = 10;
    char why[512];
    CHECK(analysis_available(&fake, AN_EVAL, why, sizeof why), "the evaluator soft-caps scores: %s", why);
    CHECK(analysis_available(&fake, AN_CONVERT_TPA, why, sizeof why), "the converted layers soft-cap too: %s", why);
    CHECK(analysis_attn_export_lacks(&fake.cfg, "TPA", why, sizeof why) && strstr(why, "soft-capped at 50"), "%s", why);
    CHECK(analysis_available(&fake, AN_PPL, why, sizeof why), "the forward pass soft-caps logits: %s", why);
    c = parse(LLAMA ", \"hidden_act\": \"xielu\"");
    CHECK(c.act == ACT_UNKNOWN && !strcmp(c.activation, "xielu"), "an unknown activation is recorded");
    /* windows */
    c = parse("\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4, "
              "\"sliding_window\": 128");
    CHECK(cfg_layer_window(&c, 0) == 128 && cfg_layer_window(&c, 3) == 128 && c.window_declared == 128, "mistral window");
    c = parse("\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4, "
              "\"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 2");
    CHECK(cfg_layer_window(&c, 1) == 0 && cfg_layer_window(&c, 2) == 32, "qwen2 windows from max_window_layers");
    c = parse("\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4, "
              "\"sliding_window\": 32, \"use_sliding_window\": false");
    CHECK(cfg_layer_window(&c, 3) == 0 && c.window_declared == -1, "qwen2 window off");
    c = parse("\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4, "
              "\"sliding_window\": 32, \"use_sliding_window\": true, \"rope_local_base_freq\": 10000, \"rope_theta\": 1e6, "
              "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\"]");
    CHECK(cfg_layer_window(&c, 0) == 32 && cfg_layer_window(&c, 1) == 0 && cfg_layer_window(&c, 2) == 32, "layer_types");
    CHECK(cfg_layer_theta(&c, 0) == 10000 && cfg_layer_theta(&c, 1) == 1e6, "local / global theta");
    Model fake2 = {.name = "x", .path = "x", .cfg = c};
    fake2.cfg.vocab = fake2.cfg.intermediate = 10;
    CHECK(analysis_available(&fake2, AN_PPL, why, sizeof why), "the forward pass has per-layer RoPE bases: %s", why);
    /* MoE routing */
    c = parse("\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 6, "
              "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8, "
              "\"n_routed_experts\": 8, \"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"first_k_dense_replace\": 1, "
              "\"moe_layer_freq\": 2, \"routed_scaling_factor\": 2.5, \"norm_topk_prob\": true");
    CHECK(c.mlp == MLP_MOE && c.moe.top_k == 2 && c.moe.n_shared == 1 && c.moe.routed_scaling == 2.5 && c.moe.norm_topk_prob,
          "moe fields");
    CHECK(!cfg_moe_layer(&c, 0) && !cfg_moe_layer(&c, 1) && cfg_moe_layer(&c, 2) && !cfg_moe_layer(&c, 3) && cfg_moe_layer(&c, 4),
          "moe layers: first_k_dense_replace 1, every 2nd");
}

static void test_softmax_rotation(void) {
    float s[6] = {1, 2, 3, 4, 5, 6};
    attn_softmax_row(s, 6, 1, 3, 0);
    double e = exp(1.0) + exp(2.0) + 1;
    CHECK(s[0] == 0 && s[4] == 0 && s[5] == 0, "outside [lo, hi] is 0");
    CHECK_NEAR(s[3], exp(2.0) / e, 1e-6);
    float t[3] = {100, 0, -100};
    attn_softmax_row(t, 3, 0, 2, 2.0);                       /* capped to 2 tanh(x / 2): about 2, 0, -2 */
    double z = exp(2 * tanh(50.0)) + 1 + exp(-2 * tanh(50.0));
    CHECK_NEAR(t[0], exp(2.0) / z, 1e-6);
    for (int lay = ROPE_HALF; lay <= ROPE_INTERLEAVED; lay++) {
        float a[8] = {1, -2, 3, 0.5f, -1, 2, 0.25f, 4}, b[8];
        memcpy(b, a, sizeof a);
        double inv[4];
        float invf[4], cs[4], sn[4];
        rope_plain_freqs(8, 10000, inv);
        for (int j = 0; j < 4; j++) invf[j] = (float)inv[j];
        rope_rotate_rows(a, 1, 8, 8, (rope_layout)lay, inv, 5, 1.0);
        rope_tables(cs, sn, 1, 5, invf, 4, 1.f);
        rope_rotate_cs(b, 4, (rope_layout)lay, cs, sn);
        double n0 = 0, n1 = 0;
        for (int i = 0; i < 8; i++) { CHECK_NEAR(a[i], b[i], 1e-5); n1 += (double)a[i] * a[i]; }
        float o[8] = {1, -2, 3, 0.5f, -1, 2, 0.25f, 4};
        for (int i = 0; i < 8; i++) n0 += (double)o[i] * o[i];
        CHECK_NEAR(n1, n0, 1e-5);                            /* a rotation keeps the norm */
        size_t p0 = 0, p1 = lay == ROPE_HALF ? 4 : 1;       /* pair 0 turns by 5 radians */
        CHECK_NEAR(a[p0], cos(5.0) * o[p0] - sin(5.0) * o[p1], 1e-6);
    }
}

static void test_model_and_analyses(const char *tmp) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/qkn", tmp);
    TuModel tm = {.model_type = "llama", .layers = 1, .hidden = 32, .heads = 4, .kv_heads = 2, .head_dim = 8,
                  .inter = 24, .vocab = 50, .dtype = DT_F32, .qk_norm = true};
    CHECK_OK(tu_write_model(dir, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));                           /* per-head Q/K norms: loads, recorded */
    if (m) {
        char why[1024];
        CHECK(m->cfg.qk_norm == QKN_HEAD, "q_norm / k_norm recorded as per head");
        CHECK(analysis_available(m, AN_RANKS_VO, why, sizeof why), "ranks vo stays available");
        CHECK(analysis_available(m, AN_SPECTRUM, why, sizeof why), "spectrum stays available");
        CHECK(!analysis_available(m, AN_RANKS_QK, why, sizeof why) && strstr(why, "Q/K RMSNorm"), "ranks qk: %s", why);
        CHECK(analysis_available(m, AN_CONVERT_MLA, why, sizeof why) && strstr(why, "qk-norm fold|drop|keep only: the "
              "per-head Q/K RMSNorm"), "convert mla: with qk-norm fold|drop (%s)", why);
        CHECK_OK(analysis_check(m, AN_PPL));                   /* the forward pass applies the norms */
        Mat *A = NULL, *B = NULL;
        spectra_op op;
        CHECK_ERR(farr_head_factors(m, FARR_QK, 0, 0, 3, &A, &B, &op), "Q/K RMSNorm");   /* ranks qk asks analyses */
        CHECK_OK(farr_head_factors(m, FARR_VO, 0, 0, FARR_NO_OFFSET, &A, &B, &op));     /* ranks vo does not */
        mat_free(A);
        mat_free(B);
        cJSON *t1 = model_config_tree(m), *t2 = model_config_tree(m);
        CHECK(t1 && t2 && t1 != t2 && cJSON_Compare(t1, t2, true), "model_config_tree: equal deep copies");
        if (t1) cJSON_DeleteItemFromObjectCaseSensitive(t1, "model_type");
        CHECK(cJSON_GetObjectItemCaseSensitive(m->config_tree, "model_type") != NULL, "the copy is the caller's");
        cJSON_Delete(t1);
        cJSON_Delete(t2);
    }
    model_free(m);
    snprintf(dir, sizeof dir, "%s/dyn", tmp);
    tm.qk_norm = false;
    tm.extra_config = "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}";
    CHECK_OK(tu_write_model(dir, &tm));
    CHECK_OK(model_open(dir, &m));
    if (m) {
        char a[1024], b[1024];
        CHECK(!analysis_available(m, AN_CONVERT_TPA, a, sizeof a) && !analysis_available(m, AN_COMPARE, b, sizeof b), "refused");
        CHECK(strcmp(a, b) == 0 && strstr(a, "rope_scaling type 'dynamic'"), "the same message: %s | %s", a, b);
        CHECK_ERR(analysis_check(m, AN_PPL), "rope_scaling type 'dynamic'");
        CHECK(analysis_available(m, AN_RANKS_VO, a, sizeof a), "ranks vo available");
    }
    model_free(m);
}

/* Each family beyond Llama: the fields its modeling code reads, with its defaults. */
static void test_families(void) {
    ModelConfig c = parse("\"model_type\": \"qwen3\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                          "\"num_key_value_heads\": 2, \"num_hidden_layers\": 2, \"head_dim\": 32");
    CHECK(c.family == FAM_QWEN3 && c.qk_rope_dim == 32 && c.v_dim == 32 && !c.qkv_bias && c.attn == QKV_SPLIT &&
          c.block == BLOCK_PRE && c.mlp == MLP_GATED, "qwen3: explicit head_dim, no biases");
    CHECK(c.qk_norm == QKN_HEAD, "qwen3: per-head q/k norms are the family's, before any tensor is read");
    c = parse("\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4, "
              "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"norm_topk_prob\": true, \"decoder_sparse_step\": 2, "
              "\"mlp_only_layers\": [3], \"moe_intermediate_size\": 16");
    CHECK(c.family == FAM_QWEN3_MOE && !strcmp(model_family_name(c.family), "qwen3") && c.mlp == MLP_MOE && c.moe.layout == MOE_QWEN && c.moe.n_experts == 8 && c.moe.top_k == 2 &&
          c.moe.norm_topk_prob && !cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 1) && !cfg_moe_layer(&c, 2) &&
          !cfg_moe_layer(&c, 3), "qwen3_moe routing: layers (L+1) %% 2 == 0 minus mlp_only_layers");
    c = parse("\"model_type\": \"gemma2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 4, "
              "\"head_dim\": 32, \"sliding_window\": 16, \"final_logit_softcapping\": null");
    CHECK(c.family == FAM_GEMMA2 && c.norm == NORM_RMS_1P && c.block == BLOCK_SANDWICH && c.attn_softcap == 50 &&
          c.final_softcap == 0 && c.query_pre_attn_scalar == 256 && c.tie_embeddings && c.act == ACT_GELU_TANH &&
          fabs(c.embed_scale - 8.0) < 1e-12, "gemma2 defaults (soft-cap 50, null final cap, scalar 256, x sqrt(64))");
    CHECK(cfg_layer_window(&c, 0) == 16 && cfg_layer_window(&c, 1) == 0 && cfg_layer_window(&c, 2) == 16,
          "gemma2 alternates local and global layers");
    CHECK_NEAR(cfg_attn_scale(&c, 0), 1.0 / 16.0, 1e-15);
    c = parse("\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 7, "
              "\"sliding_window\": 16, \"rope_theta\": 1000000, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8}");
    CHECK(c.family == FAM_GEMMA3 && c.attn_softcap == 0 && cfg_layer_window(&c, 4) == 16 && cfg_layer_window(&c, 5) == 0 &&
          cfg_layer_theta(&c, 0) == 10000 && cfg_layer_theta(&c, 5) == 1e6 && cfg_layer_rope_scaled(&c, 5) &&
          !cfg_layer_rope_scaled(&c, 0), "gemma3: five local layers (base 10000, no scaling) per global one");
    c = parse("\"model_type\": \"gpt_neox\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
              "\"rotary_pct\": 0.25, \"rotary_emb_base\": 10000, \"intermediate_size\": 256");
    CHECK(c.family == FAM_NEOX && c.qk_rope_dim == 4 && c.qk_nope_dim == 12 && c.rope_first && cfg_rope_col(&c) == 0 &&
          cfg_nope_col(&c) == 4 && c.rope_spec.rotary_dim == 4 && c.norm == NORM_LAYER && c.block == BLOCK_PARALLEL &&
          c.attn == QKV_HEADS && c.mlp == MLP_DENSE && c.mlp_bias && c.qkv_bias && c.o_bias && c.act == ACT_GELU &&
          !strcmp(c.prefix, "gpt_neox."), "gpt_neox: the first 25%% of each head rotates; parallel residual");
    c = parse("\"model_type\": \"phi3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
              "\"partial_rotary_factor\": 0.75, \"sliding_window\": 32");
    CHECK(c.family == FAM_PHI3 && c.attn == QKV_CAT && c.mlp_fused && c.qk_rope_dim == 12 && c.qk_nope_dim == 4 &&
          c.rope_first && cfg_layer_window(&c, 1) == 32, "phi3: fused projections, partial rotary, window");
    c = parse("\"model_type\": \"olmo2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2");
    CHECK(c.family == FAM_OLMO2 && c.block == BLOCK_POST && c.norm_eps == 1e-5 && c.qk_norm == QKN_PROJ,
          "olmo2: post-norms, eps 1e-5, q/k norms over the projection");
    c = parse("\"model_type\": \"mixtral\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
              "\"num_local_experts\": 8, \"num_experts_per_tok\": 2");
    CHECK(c.family == FAM_MIXTRAL && c.mlp == MLP_MOE && c.moe.layout == MOE_MIXTRAL && c.moe.norm_topk_prob &&
          c.moe.n_experts == 8 && cfg_moe_layer(&c, 0), "mixtral: every layer routes top-2 of 8, renormalised");
    c = parse("\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 3, "
              "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 8, "
              "\"n_routed_experts\": 8, \"first_k_dense_replace\": 1, \"scoring_func\": \"sigmoid\", \"n_group\": 4, "
              "\"topk_group\": 2, \"topk_method\": \"noaux_tc\"");
    CHECK(c.moe.layout == MOE_DEEPSEEK && c.moe.sigmoid && c.moe.n_group == 4 && c.moe.topk_group == 2 &&
          !strcmp(c.moe.topk_method, "noaux_tc") && !cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 1) && !c.rope_first,
          "deepseek_v3 routing fields");
}

/* OLMo 3 as allenai/Olmo-3-1025-7B's config.json declares it (its keys and values; layer_types
 * written out as the file has them): OLMo 2's block, sliding_window 4096 on the "sliding_attention"
 * layers (3 of 4), YaRN with attention_factor on the full-attention layers only (transformers'
 * Olmo3RotaryEmbedding: default RoPE for sliding layers); without layer_types, all but every 4th
 * layer slide (Olmo3Config's default). */
static void test_olmo3(void) {
    char lt[1024] = "", json[4096];
    for (int L = 0; L < 32; L++)
        snprintf(lt + strlen(lt), sizeof lt - strlen(lt), "%s\"%s\"", L ? ", " : "",
                 (L + 1) % 4 ? "sliding_attention" : "full_attention");
    snprintf(json, sizeof json,
             "{\"architectures\": [\"Olmo3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
             "\"eos_token_id\": 100257, \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02, "
             "\"intermediate_size\": 11008, \"layer_types\": [%s], \"max_position_embeddings\": 65536, "
             "\"model_type\": \"olmo3\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
             "\"num_key_value_heads\": 32, \"pad_token_id\": 100277, \"rms_norm_eps\": 1e-06, \"rope_scaling\": "
             "{\"attention_factor\": 1.2079441541679836, \"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 8.0, "
             "\"original_max_position_embeddings\": 8192, \"rope_type\": \"yarn\"}, \"rope_theta\": 500000, "
             "\"sliding_window\": 4096, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
             "\"use_cache\": true, \"vocab_size\": 100278}", lt);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "olmo3/config.json", &c));
    const RopeScaling *rs = &c.rope_spec.scaling;
    CHECK(c.family == FAM_OLMO3 && !strcmp(model_family_name(c.family), "olmo3") && c.block == BLOCK_POST &&
          c.norms == NORMS_POST && c.qk_norm == QKN_PROJ && c.norm_eps == 1e-6 && c.n_kv_heads == 32 &&
          c.qk_rope_dim == 128 && !c.qkv_bias && !c.tie_embeddings, "olmo3: OLMo 2's block, eps 1e-6, head_dim 128");
    CHECK(rs->kind == RS_YARN && rs->factor == 8 && rs->orig_max_pos == 8192 && rs->beta_fast == 32 &&
          rs->beta_slow == 1 && c.rope_spec.theta == 500000, "olmo3: YaRN x8 from 8192, theta 5e5");
    CHECK_NEAR(rope_attention_factor(&c.rope_spec), 1.2079441541679836, 1e-15);
    int slide = 0, scaled = 0, wrong = 0;
    for (int L = 0; L < 32; L++) {
        bool full = (L + 1) % 4 == 0;
        slide += cfg_layer_window(&c, L) == 4096;
        scaled += cfg_layer_rope_scaled(&c, L);
        wrong += (cfg_layer_window(&c, L) == 0) != full || cfg_layer_rope_scaled(&c, L) != full ||
                 cfg_layer_theta(&c, L) != 500000;
    }
    CHECK(slide == 24 && scaled == 8 && wrong == 0, "olmo3: 24 sliding layers (plain RoPE), 8 full (YaRN): %d %d, %d "
          "layers wrong", slide, scaled, wrong);
    c = parse("\"model_type\": \"olmo3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8, "
              "\"sliding_window\": 16, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}");
    CHECK(cfg_layer_window(&c, 0) == 16 && cfg_layer_window(&c, 2) == 16 && cfg_layer_window(&c, 3) == 0 &&
          cfg_layer_window(&c, 6) == 16 && cfg_layer_window(&c, 7) == 0 && !cfg_layer_rope_scaled(&c, 2) &&
          cfg_layer_rope_scaled(&c, 7) && c.norm_eps == 1e-5, "olmo3 without layer_types: every 4th layer full; eps 1e-5");
    CHECK_NEAR(rope_attention_factor(&c.rope_spec), 0.1 * log(4) + 1, 1e-15);
}

/* Qwen3-Next as Qwen/Qwen3-Next-80B-A3B-Instruct's config.json declares it (no layer_types:
 * full_attention_interval 4): 36 Gated DeltaNet layers and 12 gated attention layers (3, 7, ..., 47),
 * head_dim 256 with partial rotary 0.25 (64 dims, rotate_half first), (1 + w) RMSNorms, per-head q/k
 * norms, the output gate (Qwen3NextConfig builds it always; q_proj 2 x 16 x 256 rows), 16 / 32
 * linear key / value heads of 128, conv kernel 4; 512 experts top-10 and a shared expert. */
static void test_qwen3_next(void) {
    const char *json =
        "{\"architectures\": [\"Qwen3NextForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
        "\"bos_token_id\": 151643, \"decoder_sparse_step\": 1, \"eos_token_id\": 151645, "
        "\"full_attention_interval\": 4, \"head_dim\": 256, \"hidden_act\": \"silu\", \"hidden_size\": 2048, "
        "\"initializer_range\": 0.02, \"intermediate_size\": 5120, \"linear_conv_kernel_dim\": 4, "
        "\"linear_key_head_dim\": 128, \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 32, "
        "\"linear_value_head_dim\": 128, \"max_position_embeddings\": 262144, \"mlp_only_layers\": [], "
        "\"model_type\": \"qwen3_next\", \"moe_intermediate_size\": 512, \"norm_topk_prob\": true, "
        "\"num_attention_heads\": 16, \"num_experts\": 512, \"num_experts_per_tok\": 10, \"num_hidden_layers\": 48, "
        "\"num_key_value_heads\": 2, \"output_router_logits\": false, \"partial_rotary_factor\": 0.25, "
        "\"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 10000000, \"router_aux_loss_coef\": 0.001, "
        "\"shared_expert_intermediate_size\": 512, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
        "\"transformers_version\": \"4.57.0.dev0\", \"use_cache\": true, \"use_sliding_window\": false, "
        "\"vocab_size\": 151936}";
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "qwen3_next/config.json", &c));
    int linear = 0, wrong = 0;
    for (int L = 0; L < 48; L++) {
        linear += cfg_layer_linear(&c, L);
        wrong += cfg_layer_linear(&c, L) != ((L + 1) % 4 != 0);
    }
    char list[256];
    int n = cfg_attn_layers(&c, list, sizeof list);
    CHECK(c.family == FAM_QWEN3_NEXT && linear == 36 && wrong == 0 && c.lin.n_linear == 36 && cfg_n_attn_layers(&c) == 12 &&
          n == 12 && !strncmp(list, "3, 7, 11, ", 10), "qwen3_next: 36 linear layers, attention on 3, 7, ...: %s", list);
    CHECK(c.lin.layout == LIN_QWEN3_NEXT && c.lin.k_heads == 16 && c.lin.v_heads == 32 && c.lin.dk == 128 &&
          c.lin.dv == 128 && c.lin.conv == 4, "qwen3_next: linear dims");
    CHECK(c.attn_gate && c.norm == NORM_RMS_1P && c.qk_norm == QKN_HEAD && c.qk_rope_dim == 64 && c.qk_nope_dim == 192 &&
          c.rope_first && c.rope_spec.rotary_dim == 64 && c.rope_spec.theta == 1e7 && c.norm_eps == 1e-6 &&
          c.n_kv_heads == 2 && !c.tie_embeddings, "qwen3_next: gate, (1 + w) norms, per-head q/k norms, 64 of 256 dims rotate");
    CHECK(c.moe.n_experts == 512 && c.moe.top_k == 10 && c.moe.norm_topk_prob && c.moe.n_shared == 1 &&
          c.moe.expert_ffn == 512 && c.moe.shared_ffn == 512 && c.moe.layout == MOE_QWEN_NEXT && cfg_moe_layer(&c, 0) &&
          cfg_moe_layer(&c, 3), "qwen3_next: 512 experts, top-10, a shared expert of 512");
    char sg[192];
    CHECK(cfg_role_name(&c, ROLE_SHEXP_SCALE, 5, -1, "weight", sg, sizeof sg) &&
          !strcmp(sg, "model.layers.5.mlp.shared_expert_gate.weight"), "qwen3_next: the shared expert's gate: %s", sg);
    /* q_proj 2 H hd x D (query and gate), k, v, o: the attention parameters of one layer */
    CHECK(cfg_attn_params(&c) == 2048u * (2 * 16 * 256 + 2 * 256 + 2 * 256) + 16u * 256 * 2048, "qwen3_next: attention "
          "parameters with the gate rows: %zu", cfg_attn_params(&c));
    CHECK(cfg_check_attn_layer(&c, 0, "ranks") == AL_ERR && strstr(al_errmsg(), "Gated DeltaNet") &&
          cfg_check_attn_layer(&c, 3, "ranks") == AL_OK, "qwen3_next: layer 0 refused by name, 3 is attention");
    /* layer_types, when given, wins; attn_output_gate false drops the gate */
    c = parse("\"model_type\": \"qwen3_next\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
              "\"num_hidden_layers\": 4, \"attn_output_gate\": false, \"layer_types\": [\"full_attention\", "
              "\"linear_attention\", \"full_attention\", \"linear_attention\"]");
    CHECK(!c.attn_gate && !cfg_layer_linear(&c, 0) && cfg_layer_linear(&c, 1) && !cfg_layer_linear(&c, 2) &&
          cfg_n_attn_layers(&c) == 2, "qwen3_next: layer_types and attn_output_gate read");
}

/* Qwen3.5 as Qwen/Qwen3.5-9B's config.json declares it (Qwen3_5ForConditionalGeneration, the text model
 * under text_config: model_type qwen3_5_text, RoPE keys only in rope_parameters, layer_types written
 * out; the vision_config abridged): 24 Gated DeltaNet layers with split projections, 8 gated attention
 * layers, 64 of 256 dims rotating with theta 1e7, tensors under model.language_model. */
static void test_qwen3_5(void) {
    char lt[1024] = "", json[4096];
    for (int L = 0; L < 32; L++)
        snprintf(lt + strlen(lt), sizeof lt - strlen(lt), "%s\"%s\"", L ? ", " : "",
                 (L + 1) % 4 ? "linear_attention" : "full_attention");
    snprintf(json, sizeof json,
             "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"image_token_id\": 248056, "
             "\"model_type\": \"qwen3_5\", \"text_config\": {\"attention_bias\": false, \"attn_output_gate\": true, "
             "\"eos_token_id\": 248044, \"full_attention_interval\": 4, \"head_dim\": 256, \"hidden_size\": 4096, "
             "\"intermediate_size\": 12288, \"layer_types\": [%s], \"linear_conv_kernel_dim\": 4, "
             "\"linear_key_head_dim\": 128, \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 32, "
             "\"linear_value_head_dim\": 128, \"mamba_ssm_dtype\": \"float32\", \"model_type\": \"qwen3_5_text\", "
             "\"mtp_num_hidden_layers\": 1, \"mtp_use_dedicated_embeddings\": false, \"num_attention_heads\": 16, "
             "\"num_hidden_layers\": 32, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, \"rope_parameters\": "
             "{\"mrope_interleaved\": true, \"mrope_section\": [11, 11, 10], \"partial_rotary_factor\": 0.25, "
             "\"rope_theta\": 10000000, \"rope_type\": \"default\"}, \"tie_word_embeddings\": false, "
             "\"vocab_size\": 248320}, \"tie_word_embeddings\": false, \"vision_config\": {\"depth\": 27, "
             "\"hidden_size\": 1152, \"num_heads\": 16, \"out_hidden_size\": 4096, \"patch_size\": 16}}", lt);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "qwen3_5/config.json", &c));
    char n[192];
    cfg_role_name(&c, ROLE_LIN_QKV, 0, -1, "weight", n, sizeof n);
    CHECK(c.family == FAM_QWEN3_5 && c.n_layers == 32 && c.lin.n_linear == 24 && cfg_layer_linear(&c, 0) &&
          !cfg_layer_linear(&c, 3) && c.lin.layout == LIN_QWEN3_5 && c.lin.v_heads == 32 && c.attn_gate &&
          !strcmp(n, "model.language_model.layers.0.linear_attn.in_proj_qkv.weight"),
          "qwen3_5: 24 linear layers with split projections under model.language_model.: %s", n);
    CHECK(c.rope_spec.theta == 1e7 && c.qk_rope_dim == 64 && c.qk_nope_dim == 192 && c.rope_first &&
          c.norm == NORM_RMS_1P && c.qk_norm == QKN_HEAD && c.n_kv_heads == 4 && c.vocab == 248320,
          "qwen3_5: theta %g and the rotary factor from rope_parameters (%d rotary dims)", c.rope_spec.theta,
          c.qk_rope_dim);
}

/* GLM-4.5 / 4.6 / 4.7 (glm4_moe) as zai-org's config.json files declare it (GLM-4.5's, abridged; the
 * Air's use_qk_norm false), and Glm4MoeConfig's defaults: partial_rotary_factor 0.5, eps 1e-5. */
#define GLM45 "\"architectures\": [\"Glm4MoeForCausalLM\"], \"attention_bias\": true, \"first_k_dense_replace\": 3, " \
              "\"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 5120, \"intermediate_size\": 12288, " \
              "\"max_position_embeddings\": 131072, \"model_type\": \"glm4_moe\", \"moe_intermediate_size\": 1536, " \
              "\"n_group\": 1, \"n_routed_experts\": 160, \"n_shared_experts\": 1, \"norm_topk_prob\": true, " \
              "\"num_attention_heads\": 96, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 92, " \
              "\"num_key_value_heads\": 8, \"num_nextn_predict_layers\": 1, \"partial_rotary_factor\": 0.5, " \
              "\"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 1000000, " \
              "\"routed_scaling_factor\": 2.5, \"tie_word_embeddings\": false, \"topk_group\": 1, " \
              "\"torch_dtype\": \"bfloat16\", \"vocab_size\": 151552"
static void test_glm4_moe(void) {
    ModelConfig c = parse(GLM45 ", \"use_qk_norm\": true");
    char n[192];
    CHECK(c.family == FAM_GLM4_MOE && !strcmp(model_family_name(c.family), "glm4_moe") && c.attn == QKV_SPLIT &&
          c.n_heads == 96 && c.n_kv_heads == 8 && c.v_dim == 128 && c.norm_eps == 1e-5 && c.act == ACT_SILU &&
          !c.tie_embeddings && c.rope_spec.theta == 1e6, "glm4_moe: GQA 96 / 8 heads of 128");
    CHECK(c.qk_rope_dim == 64 && c.qk_nope_dim == 64 && c.rope_first && c.rope_spec.layout == ROPE_HALF &&
          cfg_rope_col(&c) == 0 && cfg_nope_col(&c) == 64, "glm4_moe: rotate_half on the first half of each head");
    CHECK(c.qkv_bias && !c.o_bias, "glm4_moe: attention_bias gives q/k/v biases, o_proj has none");
    CHECK(c.qk_norm == QKN_HEAD, "glm4_moe: use_qk_norm true: per-head q_norm / k_norm, before any tensor is read");
    CHECK(c.mlp == MLP_MOE && c.moe.layout == MOE_DEEPSEEK && c.moe.router == ROUTER_DS_V3 && c.moe.n_experts == 160 &&
          c.moe.top_k == 8 && c.moe.n_shared == 1 && c.moe.routed_scaling == 2.5 && c.moe.norm_topk_prob &&
          c.moe.expert_ffn == 1536 && !cfg_moe_layer(&c, 2) && cfg_moe_layer(&c, 3) && cfg_moe_layer(&c, 91),
          "glm4_moe: three dense layers, then 160 experts routed as DeepSeek-V3 routes");
    CHECK(cfg_role_name(&c, ROLE_ROUTER_BIAS, 3, -1, NULL, n, sizeof n) &&
          !strcmp(n, "model.layers.3.mlp.gate.e_score_correction_bias"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_SHEXP_DOWN, 3, -1, "weight", n, sizeof n) &&
          !strcmp(n, "model.layers.3.mlp.shared_experts.down_proj.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_K_NORM, 0, -1, "weight", n, sizeof n) && !strcmp(n, "model.layers.0.self_attn.k_norm.weight"), "%s", n);
    c = parse(GLM45 ", \"use_qk_norm\": false");
    CHECK(c.family == FAM_GLM4_MOE && c.qk_norm == QKN_NONE, "glm4_moe: use_qk_norm false (GLM-4.5-Air): no q/k norms");
    c = parse("\"model_type\": \"glm4_moe\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
              "\"head_dim\": 32");
    CHECK(c.qk_rope_dim == 16 && c.qk_nope_dim == 16 && c.rope_spec.partial_factor == 0.5 && c.norm_eps == 1e-5 &&
          !c.qkv_bias && !c.o_bias && c.qk_norm == QKN_NONE && c.mlp == MLP_GATED,
          "glm4_moe defaults: partial_rotary_factor 0.5, eps 1e-5, no biases, no q/k norms, dense without experts");
}
#undef GLM45

/* DeepSeek-V3.2-Exp's config.json (deepseek-ai, abridged: quantization_config left out) and GLM-5's
 * (GlmMoeDsaConfig's defaults, which are zai-org/GLM-5's dims, with rope_parameters as GLM-5.x's
 * config.json files write it): MLA plus the lightning indexer (index_n_heads, index_head_dim,
 * index_topk) and its four tensors; GLM-5's MLA RoPE by rotate_half, rope_theta read from rope_parameters. */
#define DSV32 "\"architectures\": [\"DeepseekV32ForCausalLM\"], \"attention_bias\": false, \"first_k_dense_replace\": 3, " \
              "\"hidden_act\": \"silu\", \"hidden_size\": 7168, \"index_head_dim\": 128, \"index_n_heads\": 64, " \
              "\"index_topk\": 2048, \"intermediate_size\": 18432, \"kv_lora_rank\": 512, " \
              "\"max_position_embeddings\": 163840, \"model_type\": \"deepseek_v32\", \"moe_intermediate_size\": 2048, " \
              "\"moe_layer_freq\": 1, \"n_group\": 8, \"n_routed_experts\": 256, \"n_shared_experts\": 1, " \
              "\"norm_topk_prob\": true, \"num_attention_heads\": 128, \"num_experts_per_tok\": 8, " \
              "\"num_hidden_layers\": 61, \"num_key_value_heads\": 128, \"num_nextn_predict_layers\": 1, " \
              "\"q_lora_rank\": 1536, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-06, " \
              "\"rope_scaling\": {\"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, " \
              "\"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}, " \
              "\"rope_theta\": 10000, \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", " \
              "\"tie_word_embeddings\": false, \"topk_group\": 4, \"topk_method\": \"noaux_tc\", " \
              "\"torch_dtype\": \"bfloat16\", \"v_head_dim\": 128, \"vocab_size\": 129280"
#define GLM5 "\"architectures\": [\"GlmMoeDsaForCausalLM\"], \"attention_bias\": false, \"first_k_dense_replace\": 3, " \
             "\"hidden_act\": \"silu\", \"hidden_size\": 6144, \"index_head_dim\": 128, \"index_n_heads\": 32, " \
             "\"index_topk\": 2048, \"intermediate_size\": 12288, \"kv_lora_rank\": 512, " \
             "\"max_position_embeddings\": 202752, \"model_type\": \"glm_moe_dsa\", \"moe_intermediate_size\": 2048, " \
             "\"n_group\": 1, \"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": true, " \
             "\"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 78, " \
             "\"num_key_value_heads\": 64, \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 2048, " \
             "\"qk_nope_head_dim\": 192, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05, " \
             "\"rope_parameters\": {\"rope_theta\": 8000000, \"rope_type\": \"default\"}, " \
             "\"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", \"tie_word_embeddings\": false, " \
             "\"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"v_head_dim\": 256, \"vocab_size\": 154880"
static void test_dsa_families(void) {
    ModelConfig c = parse(DSV32);
    char n[192];
    CHECK(c.family == FAM_DEEPSEEK_V32 && cfg_is_mla(&c) && cfg_has_indexer(&c) && c.index_heads == 64 &&
          c.index_head_dim == 128 && c.index_topk == 2048 && c.q_lora_rank == 1536 && c.kv_lora_rank == 512 &&
          c.rope_spec.layout == ROPE_INTERLEAVED && c.rope_spec.scaling.kind == RS_YARN && c.moe.router == ROUTER_DS_V3 &&
          c.moe.n_experts == 256 && !cfg_moe_layer(&c, 2) && cfg_moe_layer(&c, 3),
          "deepseek_v32: MLA (interleaved RoPE, YaRN), 64 indexer heads of 128, top 2048; DeepSeek-V3's MoE");
    CHECK(cfg_role_name(&c, ROLE_IDX_Q_B, 5, -1, "weight", n, sizeof n) &&
          !strcmp(n, "model.layers.5.self_attn.indexer.wq_b.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_IDX_K_NORM, 5, -1, "bias", n, sizeof n) &&
          !strcmp(n, "model.layers.5.self_attn.indexer.k_norm.bias"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_IDX_W, 0, -1, "weight", n, sizeof n) &&
          !strcmp(n, "model.layers.0.self_attn.indexer.weights_proj.weight"), "%s", n);
    CHECK(shape_dim(&c, D_IQ) == 64 * 128 && shape_dim(&c, D_ID) == 128 && shape_dim(&c, D_IH) == 64 &&
          (shape_conditions(&c, false) & SHAPE_IF_INDEXER), "deepseek_v32: the indexer's shapes apply");
    c = parse(GLM5);
    CHECK(c.family == FAM_GLM_MOE_DSA && cfg_has_indexer(&c) && c.index_heads == 32 && c.index_topk == 2048 &&
          c.qk_nope_dim == 192 && c.qk_rope_dim == 64 && c.v_dim == 256 && c.q_lora_rank == 2048 &&
          c.rope_spec.layout == ROPE_INTERLEAVED && c.index_rope == ROPE_INTERLEAVED && c.rope_theta == 8e6 &&
          c.rope_spec.theta == 8e6 && c.norm_eps == 1e-5 && c.moe.n_group == 1 && !cfg_moe_layer(&c, 2) &&
          cfg_moe_layer(&c, 77),
          "glm_moe_dsa: interleaved MLA and indexer RoPE, rope_theta 8e6 from rope_parameters, 32 indexer heads, top 2048");
    CHECK(parse(DSV32).index_rope == ROPE_HALF, "deepseek_v32: the indexer's RoPE by rotate_half (its inference code, "
                                                "vLLM's indexer_rope_interleave default false)");
    c = parse(GLM5 ", \"rope_interleave\": true, \"indexer_rope_interleave\": true");   /* GLM-5's release writes both */
    CHECK(c.rope_spec.layout == ROPE_INTERLEAVED && c.index_rope == ROPE_INTERLEAVED, "glm_moe_dsa: as released");
    c = parse(GLM5 ", \"indexer_rope_interleave\": false");
    CHECK(c.rope_spec.layout == ROPE_INTERLEAVED && c.index_rope == ROPE_HALF, "glm_moe_dsa: indexer_rope_interleave "
                                                                           "false read (vLLM reads it)");
    c = parse(DSV32 ", \"indexer_rope_interleave\": true");
    CHECK(c.index_rope == ROPE_INTERLEAVED, "deepseek_v32: indexer_rope_interleave true read");
    CHECK(cfg_layer_indexer(&c, 0) && cfg_layer_indexer(&c, 3) && cfg_layer_indexer(&c, 77), "glm_moe_dsa: GLM-5: every "
          "layer runs its own indexer");
    c = parse(GLM5 ", \"index_topk_freq\": 4, \"index_skip_topk_offset\": 3");      /* GLM-5.2's IndexShare */
    CHECK(cfg_layer_indexer(&c, 0) && cfg_layer_indexer(&c, 2) && !cfg_layer_indexer(&c, 3) && !cfg_layer_indexer(&c, 5) &&
          cfg_layer_indexer(&c, 6) && !cfg_layer_indexer(&c, 7) && cfg_layer_indexer(&c, 10) && cfg_layer_indexer(&c, 74),
          "glm_moe_dsa: index_topk_freq 4, offset 3: full where max(L - 2, 0) %% 4 == 0");
    c = parse(GLM5 ", \"indexer_types\": [\"full\", \"shared\", \"full\"]");
    CHECK(!cfg_layer_indexer(&c, 1) && cfg_layer_indexer(&c, 2) && cfg_layer_indexer(&c, 3), "glm_moe_dsa: indexer_types");
    c = parse(GLM5 ", \"index_topk_pattern\": \"SFS\"");
    CHECK(cfg_layer_indexer(&c, 0) && cfg_layer_indexer(&c, 1) && !cfg_layer_indexer(&c, 2) && cfg_layer_indexer(&c, 3),
          "glm_moe_dsa: index_topk_pattern (layer 0 always runs its indexer)");
    c = parse("\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 2, "
              "\"num_hidden_layers\": 1, \"q_lora_rank\": 16, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, "
              "\"qk_rope_head_dim\": 8, \"v_head_dim\": 8");
    CHECK(!cfg_has_indexer(&c) && !(shape_conditions(&c, false) & SHAPE_IF_INDEXER), "deepseek_v3: no indexer");
}
#undef DSV32
#undef GLM5

/* Python's json writes NaN, Infinity and -Infinity bare (Mamba hybrids' time_step_limit): they read
 * as those numbers, in arrays and objects, and the same words inside strings stay text. */
static void test_python_nonfinite(void) {
    const char *json = "{" LLAMA ", \"time_step_limit\": [0.0, Infinity], \"lo\": -Infinity, \"x\": NaN, "
                       "\"note\": \"NaN and Infinity \\\" Infinity\", \"nested\": {\"a\": [NaN, -Infinity]}}";
    ModelConfig c;
    cJSON *tree = NULL;
    CHECK_OK(model_config_parse_keep(json, "t/config.json", &c, &tree));
    const cJSON *tsl = cJSON_GetObjectItemCaseSensitive(tree, "time_step_limit");
    CHECK(cJSON_GetArraySize(tsl) == 2 && cJSON_GetArrayItem(tsl, 0)->valuedouble == 0 &&
          isinf(cJSON_GetArrayItem(tsl, 1)->valuedouble) && cJSON_GetArrayItem(tsl, 1)->valuedouble > 0,
          "time_step_limit [0.0, Infinity] reads as [0, +inf]");
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(tree, "lo"), *x = cJSON_GetObjectItemCaseSensitive(tree, "x");
    CHECK(cJSON_IsNumber(lo) && isinf(lo->valuedouble) && lo->valuedouble < 0, "-Infinity reads as -inf");
    CHECK(cJSON_IsNumber(x) && isnan(x->valuedouble), "NaN reads as nan");
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(tree, "note");
    CHECK(cJSON_IsString(note) && !strcmp(note->valuestring, "NaN and Infinity \" Infinity"), "the words inside a string stay text");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tree, "nested"), "a");
    CHECK(isnan(cJSON_GetArrayItem(a, 0)->valuedouble) && isinf(cJSON_GetArrayItem(a, 1)->valuedouble), "nested values");
    CHECK(c.n_layers == 4, "the rest of the config still reads");
    cJSON_Delete(tree);
    CHECK_ERR(model_config_parse("{" LLAMA ", \"x\": Infinite}", "t/config.json", &c), "not valid JSON");
    CHECK_ERR(model_config_parse("{" LLAMA ", \"x\": NaNa}", "t/config.json", &c), "not valid JSON");
}

/* The family table: one row per model_type, found by its name; roles named as Hugging Face names
 * them in each layout; every synthetic recipe is valid JSON members. */
static void test_family_table(void) {
    for (int f = 0; f < FAM_COUNT; f++) {
        const FamilyRow *r = family_row((model_family)f);
        model_family g = FAM_COUNT;
        CHECK(r->model_type && r->name && r->help && r->help[0], "row %d complete", f);
        if (r->keys == KEYS_LLAMA2C) continue;
        CHECK(family_find(r->model_type, NULL, &g) && g == (model_family)f, "%s found as itself", r->model_type);
        if (r->arch) CHECK(family_find(NULL, r->arch, &g) && g == (model_family)f, "%s by architecture", r->arch);
        if (!r->synth.config) continue;
        char *json = al_asprintf("{%s}", r->synth.config);
        cJSON *j = cJSON_Parse(json);
        CHECK(j != NULL, "%s: synth recipe is JSON members", r->model_type);
        cJSON_Delete(j);
        free(json);
    }
    for (int r = 0; r < ROLE_COUNT; r++) {     /* cfg_role takes the first kind that names a role */
        int kinds = 0, k;
        for (k = 0; k < ATTN_LAYOUT_COUNT && !role_in_attn((attn_layout)k, (tensor_role)r); k++) {}
        kinds += k < ATTN_LAYOUT_COUNT;
        for (k = 0; k < LIN_LAYOUT_COUNT && !role_in_linear((linear_layout)k, (tensor_role)r); k++) {}
        kinds += k < LIN_LAYOUT_COUNT;
        for (k = 0; k < NORM_NAMES_COUNT && !role_in_norms((norm_names)k, (tensor_role)r); k++) {}
        kinds += k < NORM_NAMES_COUNT;
        for (k = 0; k < FFN_LAYOUT_COUNT && !role_in_ffn((ffn_layout)k, (tensor_role)r); k++) {}
        kinds += k < FFN_LAYOUT_COUNT;
        for (k = 0; k < MOE_LAYOUT_COUNT && !role_in_moe((moe_layout)k, (tensor_role)r); k++) {}
        kinds += k < MOE_LAYOUT_COUNT;
        for (k = 0; k < MODEL_NAMES_COUNT && !role_in_model((model_names)k, (tensor_role)r); k++) {}
        kinds += k < MODEL_NAMES_COUNT;
        CHECK(kinds <= 1, "role %s is named by %d kinds of layout table (want at most 1)", tensor_role_name((tensor_role)r),
              kinds);
    }
    model_family g;
    CHECK(!family_find("no_such_type", NULL, &g) && !family_find("llama2c", NULL, &g), "unknown and file-only types");
    ModelConfig c;
    char n[192];
    CHECK_OK(model_config_parse("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                                "\"num_hidden_layers\": 4}", "t", &c));
    CHECK(cfg_role_name(&c, ROLE_Q, 3, -1, "weight", n, sizeof n) && !strcmp(n, "model.layers.3.self_attn.q_proj.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_NORM_FFN_IN, 0, -1, NULL, n, sizeof n) && !strcmp(n, "model.layers.0.post_attention_layernorm"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_LM_HEAD, -1, -1, "weight", n, sizeof n) && !strcmp(n, "lm_head.weight"), "%s", n);
    CHECK(!cfg_role_name(&c, ROLE_KV_B, 0, -1, "weight", n, sizeof n) && !n[0], "no kv_b in a split layout");
    CHECK_OK(model_config_parse("{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_head\": 4, \"n_layer\": 2}", "t", &c));
    CHECK(cfg_role_name(&c, ROLE_QKV, 1, -1, "bias", n, sizeof n) && !strcmp(n, "transformer.h.1.attn.c_attn.bias"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_POS_EMBED, -1, -1, "weight", n, sizeof n) && !strcmp(n, "transformer.wpe.weight"), "%s", n);
    CHECK_OK(model_config_parse("{\"model_type\": \"gpt_neox\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                                "\"num_hidden_layers\": 2}", "t", &c));
    CHECK(cfg_role_name(&c, ROLE_LM_HEAD, -1, -1, "weight", n, sizeof n) && !strcmp(n, "embed_out.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_FINAL_NORM, -1, -1, "bias", n, sizeof n) && !strcmp(n, "gpt_neox.final_layer_norm.bias"), "%s", n);
    CHECK_OK(model_config_parse("{\"model_type\": \"mixtral\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                                "\"num_hidden_layers\": 2, \"num_local_experts\": 4, \"num_experts_per_tok\": 2}", "t", &c));
    CHECK(cfg_role_name(&c, ROLE_EXP_DOWN, 1, 2, "weight", n, sizeof n) &&
          !strcmp(n, "model.layers.1.block_sparse_moe.experts.2.w2.weight"), "%s", n);
}

/* SmolLM3's NoPE layers: no_rope_layers (1: RoPE, 0: none), else every no_rope_layer_interval-th
 * layer (default 4); with use_sliding_window and no layer_types the window is on the NoPE layers;
 * tied embeddings by default; a list shorter than the layers is an error; other families ignore the keys. */
static void test_smollm3(void) {
#define SMOL "\"model_type\": \"smollm3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2"
    ModelConfig c = parse(SMOL ", \"num_hidden_layers\": 36, \"rope_theta\": 5000000.0, \"sliding_window\": null, "
                          "\"use_sliding_window\": false, \"max_window_layers\": 28");
    char list[256];
    int n = cfg_nope_layers(&c, list, sizeof list), windows = 0;
    for (int L = 0; L < 36; L++) windows += cfg_layer_window(&c, L) > 0;
    CHECK(c.family == FAM_SMOLLM3 && c.tie_embeddings && n == 9 && !strcmp(list, "3, 7, 11, 15, 19, 23, 27, 31, 35") &&
          cfg_layer_rope(&c, 2) && !cfg_layer_rope(&c, 3) && cfg_layer_rope(&c, 4) && !cfg_layer_rope(&c, 35) &&
          windows == 0 && c.rope_theta == 5e6, "smollm3 3B: every fourth layer has no RoPE, no window (%d: %s)", n, list);
    c = parse(SMOL ", \"num_hidden_layers\": 4, \"no_rope_layer_interval\": 4, \"no_rope_layers\": [1, 0, 1, 1]");
    CHECK(cfg_layer_rope(&c, 0) && !cfg_layer_rope(&c, 1) && cfg_layer_rope(&c, 3), "no_rope_layers wins over the interval");
    c = parse(SMOL ", \"num_hidden_layers\": 4, \"no_rope_layer_interval\": 2");
    CHECK(cfg_nope_layers(&c, list, sizeof list) == 2 && !strcmp(list, "1, 3"), "interval 2: %s", list);
    c = parse(SMOL ", \"num_hidden_layers\": 8, \"sliding_window\": 16, \"use_sliding_window\": true, "
              "\"max_window_layers\": 0");
    CHECK(cfg_layer_window(&c, 2) == 0 && cfg_layer_window(&c, 3) == 16 && cfg_layer_window(&c, 6) == 0 &&
          cfg_layer_window(&c, 7) == 16, "smollm3: the window on the NoPE layers (not from max_window_layers)");
    c = parse(SMOL ", \"num_hidden_layers\": 2, \"sliding_window\": 16, \"use_sliding_window\": true, "
              "\"layer_types\": [\"sliding_attention\", \"full_attention\"]");
    CHECK(cfg_layer_window(&c, 0) == 16 && cfg_layer_window(&c, 1) == 0 && cfg_layer_rope(&c, 1), "layer_types wins");
    c = parse(SMOL ", \"num_hidden_layers\": 4, \"tie_word_embeddings\": false");
    CHECK(!c.tie_embeddings, "untied when config.json says so");
    CHECK_ERR(model_config_parse("{" SMOL ", \"num_hidden_layers\": 4, \"no_rope_layers\": [1, 1]}", "t", &c),
              "no_rope_layers (2 entries for 4 layers)");
    c = parse(LLAMA ", \"no_rope_layers\": [0, 0, 0, 0], \"no_rope_layer_interval\": 1");
    CHECK(cfg_layer_rope(&c, 0) && cfg_nope_layers(&c, list, sizeof list) == 0, "llama reads no NoPE keys");
#undef SMOL
}

/* The text towers of multimodal checkpoints, from real config.json files: the text model's keys
 * under text_config (its text config class's defaults where google/gemma-3-4b-it leaves them out),
 * tensors under the language model's prefix, the family's traits; gemma3's multimodal head applies
 * no final soft-cap (Gemma3ForConditionalGeneration.forward), gemma3_text's does. */
static void test_text_towers(void) {
    char n[192], json[4096];
    ModelConfig c;
    /* google/gemma-3-4b-it, as released */
    const char *g4 = "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"boi_token_index\": 255999, "
        "\"eoi_token_index\": 256000, \"eos_token_id\": [1, 106], \"image_token_index\": 262144, "
        "\"initializer_range\": 0.02, \"mm_tokens_per_image\": 256, \"model_type\": \"gemma3\", \"text_config\": "
        "{\"hidden_size\": 2560, \"intermediate_size\": 10240, \"model_type\": \"gemma3_text\", \"num_hidden_layers\": 34, "
        "\"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"}, \"sliding_window\": 1024%s}, "
        "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.50.0.dev0\", \"vision_config\": {\"hidden_size\": "
        "1152, \"image_size\": 896, \"intermediate_size\": 4304, \"model_type\": \"siglip_vision_model\", "
        "\"num_attention_heads\": 16, \"num_hidden_layers\": 27, \"patch_size\": 14, \"vision_use_head\": false}}";
    snprintf(json, sizeof json, g4, "");
    CHECK_OK(model_config_parse(json, "gemma-3-4b-it/config.json", &c));
    int sliding = 0, scaled = 0;
    for (int L = 0; L < c.n_layers; L++) sliding += cfg_layer_window(&c, L) == 1024, scaled += cfg_layer_rope_scaled(&c, L);
    CHECK(c.family == FAM_GEMMA3_MM && c.n_layers == 34 && c.n_heads == 8 && c.n_kv_heads == 4 && c.qk_rope_dim == 256 &&
          c.vocab == 262208 && c.hidden == 2560 && c.intermediate == 10240 && c.rope_theta == 1e6 &&
          c.rope_spec.local_theta == 10000 && c.qk_norm == QKN_HEAD && c.norm == NORM_RMS_1P && c.tie_embeddings &&
          c.block == BLOCK_SANDWICH && fabs(cfg_attn_scale(&c, 0) - 1.0 / 16) < 1e-12 && c.final_softcap == 0,
          "gemma-3-4b-it: the text tower with Gemma3TextConfig's defaults (8 heads, 4 KV, head_dim 256, vocab 262208)");
    CHECK(!strcmp(c.torch_dtype, "bfloat16"), "gemma-3-4b-it: torch_dtype from the top level (%s)", c.torch_dtype);
    CHECK(sliding == 29 && scaled == 5 && c.rope_spec.scaling.factor == 8, "gemma-3-4b-it: 29 local layers, 5 global "
          "with linear x8 (%d, %d)", sliding, scaled);
    CHECK(cfg_role_name(&c, ROLE_Q, 3, -1, "weight", n, sizeof n) &&
          !strcmp(n, "language_model.model.layers.3.self_attn.q_proj.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_LM_HEAD, -1, -1, "weight", n, sizeof n) && !strcmp(n, "language_model.lm_head.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_FINAL_NORM, -1, -1, "weight", n, sizeof n) && !strcmp(n, "language_model.model.norm.weight"), "%s", n);
    snprintf(json, sizeof json, g4, ", \"final_logit_softcapping\": 30.0");
    CHECK_OK(model_config_parse(json, "t", &c));
    CHECK(c.final_softcap == 0, "gemma3's multimodal head applies no final soft-cap (%g)", c.final_softcap);
    c = parse("\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
              "\"final_logit_softcapping\": 30.0");
    CHECK(c.final_softcap == 30, "gemma3_text applies it (%g)", c.final_softcap);
    /* google/gemma-3-27b-it's text_config */
    c = parse("\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"model_type\": \"gemma3\", \"text_config\": "
              "{\"head_dim\": 128, \"hidden_size\": 5376, \"intermediate_size\": 21504, \"model_type\": \"gemma3_text\", "
              "\"num_attention_heads\": 32, \"num_hidden_layers\": 62, \"num_key_value_heads\": 16, "
              "\"query_pre_attn_scalar\": 168, \"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"}, "
              "\"sliding_window\": 1024}, \"vision_config\": {\"model_type\": \"siglip_vision_model\"}");
    CHECK(c.n_heads == 32 && c.n_kv_heads == 16 && c.qk_rope_dim == 128 && c.n_layers == 62 &&
          fabs(cfg_attn_scale(&c, 0) - 1 / sqrt(168.0)) < 1e-12, "gemma-3-27b-it: query_pre_attn_scalar 168");
    /* Qwen/Qwen3-VL-4B-Instruct */
    const char *qvl = "{\"architectures\": [\"Qwen3VLForConditionalGeneration\"], \"image_token_id\": 151655, "
        "\"model_type\": \"qwen3_vl\", \"text_config\": {\"attention_bias\": false, \"attention_dropout\": 0.0, "
        "\"bos_token_id\": 151643, \"dtype\": \"bfloat16\", \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": "
        "\"silu\", \"hidden_size\": 2560, \"initializer_range\": 0.02, \"intermediate_size\": 9728, "
        "\"max_position_embeddings\": 262144, \"model_type\": \"qwen3_vl_text\", \"num_attention_heads\": 32, "
        "\"num_hidden_layers\": 36, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, \"rope_scaling\": "
        "{\"mrope_interleaved\": true, \"mrope_section\": [24, 20, 20], \"rope_type\": \"default\"}, \"rope_theta\": "
        "5000000, \"tie_word_embeddings\": true, \"use_cache\": true, \"vocab_size\": 151936}, \"tie_word_embeddings\": "
        "true, \"transformers_version\": \"4.57.0.dev0\", \"video_token_id\": 151656, \"vision_config\": {\"depth\": 24, "
        "\"hidden_size\": 1024, \"model_type\": \"qwen3_vl\", \"deepstack_visual_indexes\": [5, 11, 17]}}";
    cJSON *tree = NULL;
    CHECK_OK(model_config_parse_keep(qvl, "Qwen3-VL-4B/config.json", &c, &tree));
    int eos[4];
    size_t ne = config_tree_ids(tree, "eos_token_id", eos, 0, 4);
    cJSON_Delete(tree);
    CHECK(c.family == FAM_QWEN3_VL && c.n_heads == 32 && c.n_kv_heads == 8 && c.qk_rope_dim == 128 && c.n_layers == 36 &&
          c.vocab == 151936 && c.rope_theta == 5e6 && c.rope_spec.scaling.kind == RS_NONE && c.qk_norm == QKN_HEAD &&
          c.tie_embeddings && c.rope == ROPE_HALF && cfg_layer_window(&c, 0) == 0 && ne == 1 && eos[0] == 151645,
          "Qwen3-VL-4B: Qwen3's layer, M-RoPE's rope_type default as plain RoPE, eos from text_config");
    CHECK(cfg_role_name(&c, ROLE_K_NORM, 0, -1, "weight", n, sizeof n) &&
          !strcmp(n, "model.language_model.layers.0.self_attn.k_norm.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_LM_HEAD, -1, -1, "weight", n, sizeof n) && !strcmp(n, "lm_head.weight"), "%s", n);
    /* Qwen/Qwen3-VL-30B-A3B-Instruct: the text tower's experts fused, gate_up_proj [E, D, 2I] used as x @ W */
    c = parse("\"architectures\": [\"Qwen3VLMoeForConditionalGeneration\"], \"image_token_id\": 151655, \"model_type\": "
              "\"qwen3_vl_moe\", \"text_config\": {\"attention_bias\": false, \"attention_dropout\": 0.0, \"bos_token_id\": "
              "151643, \"decoder_sparse_step\": 1, \"dtype\": \"bfloat16\", \"eos_token_id\": 151645, \"head_dim\": 128, "
              "\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 6144, "
              "\"max_position_embeddings\": 262144, \"mlp_only_layers\": [], \"model_type\": \"qwen3_vl_moe_text\", "
              "\"moe_intermediate_size\": 768, \"norm_topk_prob\": true, \"num_attention_heads\": 32, \"num_experts\": 128, "
              "\"num_experts_per_tok\": 8, \"num_hidden_layers\": 48, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, "
              "\"rope_scaling\": {\"mrope_interleaved\": true, \"mrope_section\": [24, 20, 20], \"rope_type\": \"default\"}, "
              "\"rope_theta\": 5000000, \"use_cache\": true, \"vocab_size\": 151936}, \"tie_word_embeddings\": false, "
              "\"transformers_version\": \"4.57.0.dev0\", \"video_token_id\": 151656, \"vision_config\": "
              "{\"deepstack_visual_indexes\": [8, 16, 24], \"depth\": 27, \"hidden_act\": \"gelu_pytorch_tanh\", "
              "\"hidden_size\": 1152, \"in_channels\": 3, \"intermediate_size\": 4304, \"model_type\": \"qwen3_vl_moe\", "
              "\"num_heads\": 16, \"num_position_embeddings\": 2304, \"out_hidden_size\": 2048, \"patch_size\": 16, "
              "\"spatial_merge_size\": 2, \"temporal_patch_size\": 2}, \"vision_end_token_id\": 151653, "
              "\"vision_start_token_id\": 151652");
    CHECK(c.family == FAM_QWEN3_VL_MOE && c.n_heads == 32 && c.n_kv_heads == 4 && c.qk_rope_dim == 128 && c.hidden == 2048 &&
          c.n_layers == 48 && c.rope_theta == 5e6 && c.rope_spec.scaling.kind == RS_NONE && c.qk_norm == QKN_HEAD &&
          !c.tie_embeddings && c.mlp == MLP_MOE && c.moe.layout == MOE_QWEN3_VL && c.moe.n_experts == 128 &&
          c.moe.top_k == 8 && c.moe.expert_ffn == 768 && c.moe.norm_topk_prob && c.moe.n_shared == 0 &&
          cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 47), "Qwen3-VL-30B-A3B: Qwen3's layer, 128 experts top-8 of 768");
    CHECK(cfg_role_name(&c, ROLE_EXPS_GATE_UP, 3, -1, NULL, n, sizeof n) &&
          !strcmp(n, "model.language_model.layers.3.mlp.experts.gate_up_proj"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_ROUTER, 3, -1, "weight", n, sizeof n) &&
          !strcmp(n, "model.language_model.layers.3.mlp.gate.weight"), "%s", n);
    CHECK(!cfg_role_name(&c, ROLE_EXPS_GATE_UP_BIAS, 3, -1, NULL, n, sizeof n) &&
          !cfg_role_name(&c, ROLE_SHEXP_DOWN, 3, -1, "weight", n, sizeof n), "no expert biases, no shared expert");
    /* mistralai/Mistral-Small-3.1-24B-Instruct-2503 */
    c = parse("\"architectures\": [\"Mistral3ForConditionalGeneration\"], \"image_token_index\": 10, \"model_type\": "
              "\"mistral3\", \"multimodal_projector_bias\": false, \"projector_hidden_act\": \"gelu\", "
              "\"spatial_merge_size\": 2, \"text_config\": {\"attention_dropout\": 0.0, \"head_dim\": 128, \"hidden_act\": "
              "\"silu\", \"hidden_size\": 5120, \"initializer_range\": 0.02, \"intermediate_size\": 32768, "
              "\"max_position_embeddings\": 131072, \"model_type\": \"mistral\", \"num_attention_heads\": 32, "
              "\"num_hidden_layers\": 40, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, \"rope_theta\": "
              "1000000000.0, \"sliding_window\": null, \"use_cache\": true, \"vocab_size\": 131072}, \"torch_dtype\": "
              "\"bfloat16\", \"vision_config\": {\"head_dim\": 64, \"hidden_size\": 1024, \"model_type\": \"pixtral\", "
              "\"num_hidden_layers\": 24}, \"vision_feature_layer\": -1");
    CHECK(c.family == FAM_MISTRAL3 && c.n_heads == 32 && c.n_kv_heads == 8 && c.qk_rope_dim == 128 && c.hidden == 5120 &&
          c.n_layers == 40 && c.rope_theta == 1e9 && c.norm_eps == 1e-5 && !c.tie_embeddings && c.qk_norm == QKN_NONE &&
          cfg_layer_window(&c, 0) == 0 && !strcmp(c.prefix, "language_model.model."),
          "Mistral-Small-3.1: Mistral's text tower, theta 1e9, untied, no window");
    CHECK_ERR(model_config_parse("{\"model_type\": \"mistral3\", \"text_config\": {\"model_type\": \"ministral3\", "
                                 "\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2}}", "t", &c),
              "ministral3");
    CHECK_ERR(model_config_parse("{\"model_type\": \"gemma3\", \"hidden_size\": 64}", "t", &c), "text_config");
    for (int f = 0; f < FAM_COUNT; f++) {          /* the towers' defaults and recipe members are JSON members */
        const FamilyRow *r = family_row((model_family)f);
        const char *t[2] = {r->text_defaults, r->tower_keys};
        for (int i = 0; i < 2; i++) {
            if (!t[i]) continue;
            char *j = al_asprintf("{%s}", t[i]);
            cJSON *o = cJSON_Parse(j);
            CHECK(o != NULL && (!r->text_config || r->vision[0]), "%s: tower members are JSON", r->model_type);
            cJSON_Delete(o);
            free(j);
        }
    }
}

/* MiMo as XiaomiMiMo/MiMo-7B-Base's config.json declares it (its keys and values): Qwen2's layer --
 * q/k/v biases, no o_proj bias, no window while use_sliding_window is false -- with one
 * multi-token-prediction layer (model.mtp_layers.0.*) the family row keeps apart. */
static void test_mimo(void) {
    const char *json =
        "{\"architectures\": [\"MiMoForCausalLM\"], \"attention_bias\": true, \"attention_dropout\": 0.0, "
        "\"auto_map\": {\"AutoConfig\": \"configuration_mimo.MiMoConfig\", \"AutoModel\": \"modeling_mimo.MiMoModel\", "
        "\"AutoModelForCausalLM\": \"modeling_mimo.MiMoForCausalLM\"}, \"bos_token_id\": 151643, "
        "\"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02, "
        "\"intermediate_size\": 11008, \"max_position_embeddings\": 32768, \"max_window_layers\": 36, "
        "\"model_type\": \"mimo\", \"num_attention_heads\": 32, \"num_hidden_layers\": 36, "
        "\"num_key_value_heads\": 8, \"num_nextn_predict_layers\": 1, \"rms_norm_eps\": 1e-05, "
        "\"rope_scaling\": null, \"rope_theta\": 640000, \"sliding_window\": 32768, \"tie_word_embeddings\": false, "
        "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true, "
        "\"use_sliding_window\": false, \"vocab_size\": 151680}";
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "mimo/config.json", &c));
    CHECK(c.family == FAM_MIMO && !strcmp(model_family_name(c.family), "mimo") && c.qkv_bias && !c.o_bias &&
          c.n_heads == 32 && c.n_kv_heads == 8 && c.qk_rope_dim == 128 && c.qk_nope_dim == 0 && c.norm_eps == 1e-5 &&
          c.rope_spec.theta == 640000 && c.rope_spec.scaling.kind == RS_NONE && c.mlp == MLP_GATED &&
          !c.tie_embeddings && c.block == BLOCK_PRE && c.qk_norm == QKN_NONE,
          "mimo: Qwen2's layer (q/k/v biases, GQA 32/8, head 128, eps 1e-5, theta 640000)");
    int windowed = 0;
    for (int L = 0; L < 36; L++) windowed += cfg_layer_window(&c, L) != 0;
    CHECK(windowed == 0, "mimo: use_sliding_window false leaves every layer full (%d windowed)", windowed);
    CHECK(cfg_row(&c)->mtp_layers && !strcmp(cfg_row(&c)->mtp_layers, "mtp_layers."),
          "mimo: the row keeps the MTP layers apart under mtp_layers.");
}

/* EXAONE 4.0 as LGAI-EXAONE/EXAONE-4.0-32B's config.json declares it (its keys and values; layer_types
 * written out as the file has them): 3 sliding layers (window 4096) : 1 full, no RoPE on the full
 * ones, q/k norms per head, OLMo 2's post-norms, llama3 x16 from 8192. The 1.2B's setting
 * (sliding_window null) rotates every layer and has no window; a string sliding_window_pattern
 * without layer_types ("LLLG", as vLLM and llama.cpp read it) gives the same layers as layer_types. */
static void test_exaone4(void) {
    char lt[4096] = "", json[8192];
    for (int L = 0; L < 64; L++)
        snprintf(lt + strlen(lt), sizeof lt - strlen(lt), "%s\"%s\"", L ? ", " : "",
                 (L + 1) % 4 ? "sliding_attention" : "full_attention");
    snprintf(json, sizeof json,
             "{\"architectures\": [\"Exaone4ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 1, "
             "\"eos_token_id\": 361, \"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 5120, "
             "\"initializer_range\": 0.02, \"intermediate_size\": 27392, \"layer_types\": [%s], "
             "\"max_position_embeddings\": 131072, \"model_type\": \"exaone4\", \"num_attention_heads\": 40, "
             "\"num_hidden_layers\": 64, \"num_key_value_heads\": 8, \"pad_token_id\": 0, \"rms_norm_eps\": 1e-05, "
             "\"rope_scaling\": {\"factor\": 16.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, "
             "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, \"rope_theta\": 1000000, "
             "\"sliding_window\": 4096, \"sliding_window_pattern\": \"LLLG\", \"tie_word_embeddings\": false, "
             "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.54.0.dev0\", \"use_cache\": true, "
             "\"vocab_size\": 102400}", lt);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "exaone4/config.json", &c));
    CHECK(c.family == FAM_EXAONE4 && !strcmp(model_family_name(c.family), "exaone4") && c.block == BLOCK_POST &&
          c.norms == NORMS_POST && c.qk_norm == QKN_HEAD && c.norm_eps == 1e-5 && c.n_heads == 40 && c.n_kv_heads == 8 &&
          c.qk_rope_dim == 128 && !c.qkv_bias && !c.tie_embeddings && c.rope_spec.scaling.kind == RS_LLAMA3 &&
          c.rope_spec.scaling.factor == 16 && c.rope_spec.scaling.orig_max_pos == 8192 && c.rope_spec.theta == 1e6,
          "exaone4: post-norms, per-head q/k norms, GQA 40/8 x 128, llama3 x16 from 8192");
    int slide = 0, nope = 0, wrong = 0;
    for (int L = 0; L < 64; L++) {
        bool full = (L + 1) % 4 == 0;
        slide += cfg_layer_window(&c, L) == 4096;
        nope += !cfg_layer_rope(&c, L);
        wrong += (cfg_layer_window(&c, L) == 0) != full || cfg_layer_rope(&c, L) == full || !cfg_layer_rope_scaled(&c, L);
    }
    char list[512];
    CHECK(slide == 48 && nope == 16 && wrong == 0 && cfg_nope_layers(&c, list, sizeof list) == 16 &&
          !strncmp(list, "3, 7, 11", 8), "exaone4: 48 sliding layers with RoPE, 16 full without: %d %d, %d wrong [%s]",
          slide, nope, wrong, list);
    c = parse("\"model_type\": \"exaone4\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8, "
              "\"sliding_window\": 16, \"sliding_window_pattern\": \"LLLG\"");
    CHECK(cfg_layer_window(&c, 2) == 16 && cfg_layer_window(&c, 3) == 0 && cfg_layer_window(&c, 7) == 0 &&
          cfg_layer_rope(&c, 6) && !cfg_layer_rope(&c, 3) && !cfg_layer_rope(&c, 7), "exaone4: \"LLLG\" without layer_types");
    c = parse("\"model_type\": \"exaone4\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8, "
              "\"sliding_window\": null, \"layer_types\": [\"full_attention\", \"full_attention\", \"full_attention\", "
              "\"full_attention\", \"full_attention\", \"full_attention\", \"full_attention\", \"full_attention\"]");
    int any = 0;
    for (int L = 0; L < 8; L++) any += cfg_layer_window(&c, L) != 0 || !cfg_layer_rope(&c, L);
    CHECK(any == 0 && !c.has_nope, "exaone4 1.2B (sliding_window null): every layer full and with RoPE (%d off)", any);
}

/* MiniMax-M2 as MiniMaxAI/MiniMax-M2's config.json declares it (its keys and values; attn_type_list
 * written out, quantization_config left out): rotary_dim 64 of head_dim 128 (MiniMaxM2Config:
 * partial_rotary_factor = rotary_dim / head_dim), q/k norms over the whole projection, 256 experts
 * of intermediate_size on every layer named as Mixtral's plus block_sparse_moe.e_score_correction_bias,
 * routed as DeepSeek-V3's sigmoid choice without groups, always renormalised. */
static void test_minimax_m2(void) {
    char at[512] = "", json[4096];
    for (int L = 0; L < 62; L++) snprintf(at + strlen(at), sizeof at - strlen(at), "%s1", L ? ", " : "");
    snprintf(json, sizeof json,
             "{\"architectures\": [\"MiniMaxM2ForCausalLM\"], \"attn_type_list\": [%s], \"auto_map\": {\"AutoConfig\": "
             "\"configuration_minimax_m2.MiniMaxM2Config\", \"AutoModelForCausalLM\": "
             "\"modeling_minimax_m2.MiniMaxM2ForCausalLM\"}, \"head_dim\": 128, \"hidden_act\": \"silu\", "
             "\"hidden_size\": 3072, \"intermediate_size\": 1536, \"max_position_embeddings\": 196608, "
             "\"model_type\": \"minimax_m2\", \"mtp_transformer_layers\": 1, \"num_attention_heads\": 48, "
             "\"num_experts_per_tok\": 8, \"num_hidden_layers\": 62, \"num_key_value_heads\": 8, "
             "\"num_local_experts\": 256, \"num_mtp_modules\": 3, \"qk_norm_type\": \"per_layer\", "
             "\"rms_norm_eps\": 1e-06, \"rope_theta\": 5000000, \"rotary_dim\": 64, \"scoring_func\": \"sigmoid\", "
             "\"shared_intermediate_size\": 0, \"tie_word_embeddings\": false, \"transformers_version\": \"4.46.1\", "
             "\"use_cache\": true, \"use_mtp\": true, \"use_qk_norm\": true, \"use_routing_bias\": true, "
             "\"vocab_size\": 200064, \"torch_dtype\": \"bfloat16\"}", at);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "minimax_m2/config.json", &c));
    const MoeSpec *m = &c.moe;
    CHECK(c.family == FAM_MINIMAX_M2 && !strcmp(model_family_name(c.family), "minimax_m2") && c.qk_norm == QKN_PROJ &&
          c.n_heads == 48 && c.n_kv_heads == 8 && c.qk_rope_dim == 64 && c.qk_nope_dim == 64 && c.rope_first &&
          c.rope_spec.partial_factor == 0.5 && c.rope_spec.theta == 5e6 && c.norm_eps == 1e-6 && !c.qkv_bias,
          "minimax_m2: 48/8 heads of 128, the first 64 dims rotate, q/k norms over the projection");
    CHECK(c.mlp == MLP_MOE && m->n_experts == 256 && m->top_k == 8 && m->layout == MOE_MINIMAX &&
          m->router == ROUTER_DS_V3 && m->norm_topk_prob && m->n_shared == 0 && m->n_group == 0 &&
          m->routed_scaling == 1 && cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 61) && m->expert_ffn == 0 &&
          c.intermediate == 1536, "minimax_m2: 256 experts of 1536 on every layer, top-8 sigmoid, renormalised");
    char name[128];
    CHECK(cfg_role_name(&c, ROLE_ROUTER_BIAS, 5, -1, NULL, name, sizeof name) &&
          !strcmp(name, "model.layers.5.block_sparse_moe.e_score_correction_bias"), "minimax_m2: bias name %s", name);
    CHECK(cfg_role_name(&c, ROLE_EXP_UP, 5, 7, "weight", name, sizeof name) &&
          !strcmp(name, "model.layers.5.block_sparse_moe.experts.7.w3.weight"), "minimax_m2: expert name %s", name);
#define MM2 "{\"model_type\": \"minimax_m2\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, " \
            "\"head_dim\": 32, \"rotary_dim\": 8"
    CHECK_ERR(model_config_parse(MM2 ", \"partial_rotary_factor\": 0.5}", "mm2/config.json", &c), "rotary_dim = 8 and "
              "partial_rotary_factor = 0.5 name different rotary dims (8 and 16 of head_dim 32");
    CHECK_ERR(model_config_parse(MM2 ", \"rope_parameters\": {\"partial_rotary_factor\": 0.5, \"rope_theta\": 5e6}}",
                                 "mm2/config.json", &c), "rotary_dim = 8 and rope_parameters.partial_rotary_factor = 0.5");
    CHECK_OK(model_config_parse(MM2 ", \"partial_rotary_factor\": 0.25, \"rope_parameters\": {\"partial_rotary_factor\": "
                                "0.25, \"rope_theta\": 5e6}}", "mm2/config.json", &c));
    CHECK(c.qk_rope_dim == 8 && c.qk_nope_dim == 24, "minimax_m2: rotary_dim and partial_rotary_factor agreeing: %d "
          "rotary dims", c.qk_rope_dim);
#undef MM2
}

/* Ministral 3 as mistralai/Ministral-3-8B-Instruct-2512's text_config declares it (its keys and
 * values, as a Ministral3ForCausalLM config): Mistral's layer, no window, everything of RoPE in
 * rope_parameters (transformers 5) -- theta 1e6, YaRN x16 from 16384 whose attention factor is
 * get_mscale(16, 1) / get_mscale(16, 1) = 1, and llama_4_scaling_beta 0.1 for q past 16384. */
static void test_ministral3(void) {
    const char *json =
        "{\"architectures\": [\"Ministral3ForCausalLM\"], \"attention_dropout\": 0.0, \"head_dim\": 128, "
        "\"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 14336, "
        "\"max_position_embeddings\": 262144, \"model_type\": \"ministral3\", \"num_attention_heads\": 32, "
        "\"num_hidden_layers\": 34, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, \"rope_parameters\": "
        "{\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": 16.0, \"llama_4_scaling_beta\": 0.1, \"mscale\": 1.0, "
        "\"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 16384, \"rope_theta\": 1000000.0, "
        "\"rope_type\": \"yarn\", \"type\": \"yarn\"}, \"sliding_window\": null, \"tie_word_embeddings\": false, "
        "\"use_cache\": true, \"vocab_size\": 131072}";
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "ministral3/config.json", &c));
    const RopeSpec *r = &c.rope_spec;
    CHECK(c.family == FAM_MINISTRAL3 && !strcmp(model_family_name(c.family), "ministral3") && c.n_heads == 32 &&
          c.n_kv_heads == 8 && c.qk_rope_dim == 128 && c.norm_eps == 1e-5 && !c.qkv_bias && c.qk_norm == QKN_NONE &&
          cfg_layer_window(&c, 0) == 0 && c.rope_theta == 1e6 && r->theta == 1e6, "ministral3: Mistral's layer, theta 1e6");
    CHECK(r->scaling.kind == RS_YARN && r->scaling.factor == 16 && r->scaling.orig_max_pos == 16384 &&
          r->scaling.beta_fast == 32 && r->scaling.beta_slow == 1 && r->q_beta == 0.1 && r->q_floor == 16384,
          "ministral3: YaRN x16 from 16384 and llama_4_scaling_beta 0.1 from rope_parameters");
    CHECK_NEAR(rope_attention_factor(r), 1.0, 1e-15);
    c = parse("\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
              "\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, \"rope_theta\": 5000, "
              "\"llama_4_scaling_beta\": 0.1, \"original_max_position_embeddings\": 64}");
    CHECK(c.rope_spec.theta == 5000 && c.rope_spec.scaling.kind == RS_YARN && c.rope_spec.q_beta == 0,
          "rope_parameters read for every family; the q scaling only where the row has it (Mistral: none)");
}

/* moonshotai/Kimi-K2.5's config.json (KimiK25ForConditionalGeneration) as released: the text tower is a
 * deepseek_v3 text_config (YaRN in rope_parameters, mscale = mscale_all_dim = 1), its tensors under
 * language_model.model., the routed experts compressed-tensors INT4; the vision tower's config beside it. */
static void test_kimi_k25(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse("{\"architectures\": [\"KimiK25ForConditionalGeneration\"], \"auto_map\": {\"AutoConfig\": "
        "\"configuration_kimi_k25.KimiK25Config\", \"AutoModel\": \"modeling_kimi_k25.KimiK25ForConditionalGeneration\", "
        "\"AutoModelForCausalLM\": \"modeling_kimi_k25.KimiK25ForConditionalGeneration\"}, \"bos_token_id\": 163584, "
        "\"dtype\": \"bfloat16\", \"eos_token_id\": 163585, \"ignore_index\": -100, \"media_placeholder_token_id\": 163605, "
        "\"model_type\": \"kimi_k25\", \"pad_token_id\": 163839, \"quantization_config\": {\"config_groups\": {\"group_0\": "
        "{\"input_activations\": null, \"output_activations\": null, \"targets\": [\"Linear\"], \"weights\": {\"actorder\": "
        "null, \"block_structure\": null, \"dynamic\": false, \"group_size\": 32, \"num_bits\": 4, \"observer\": \"minmax\", "
        "\"observer_kwargs\": {}, \"strategy\": \"group\", \"symmetric\": true, \"type\": \"int\"}}}, \"format\": "
        "\"pack-quantized\", \"ignore\": [\"lm_head\", \"re:.*self_attn.*\", \"re:.*shared_experts.*\", "
        "\"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\"], \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", "
        "\"quantization_status\": \"compressed\"}, \"text_config\": {\"architectures\": [\"DeepseekV3ForCausalLM\"], "
        "\"attention_bias\": false, \"attention_dropout\": 0.0, \"aux_loss_alpha\": 0.001, \"bos_token_id\": 163584, "
        "\"dtype\": \"bfloat16\", \"eos_token_id\": 163585, \"ep_size\": 1, \"first_k_dense_replace\": 1, \"hidden_act\": "
        "\"silu\", \"hidden_size\": 7168, \"initializer_range\": 0.02, \"intermediate_size\": 18432, \"kv_lora_rank\": 512, "
        "\"max_position_embeddings\": 262144, \"model_type\": \"deepseek_v3\", \"moe_intermediate_size\": 2048, "
        "\"moe_layer_freq\": 1, \"n_group\": 1, \"n_routed_experts\": 384, \"n_shared_experts\": 1, \"norm_topk_prob\": "
        "true, \"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 61, \"num_key_value_heads\": "
        "64, \"num_nextn_predict_layers\": 0, \"pad_token_id\": 163839, \"pretraining_tp\": 1, \"q_lora_rank\": 1536, "
        "\"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05, \"rope_parameters\": {\"beta_fast\": "
        "32.0, \"beta_slow\": 1.0, \"factor\": 64.0, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, "
        "\"original_max_position_embeddings\": 4096, \"rope_theta\": 50000.0, \"rope_type\": \"yarn\", \"type\": \"yarn\"}, "
        "\"rope_theta\": 50000.0, \"routed_scaling_factor\": 2.827, \"scoring_func\": \"sigmoid\", \"seq_aux\": true, "
        "\"tie_word_embeddings\": false, \"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"use_cache\": true, "
        "\"v_head_dim\": 128, \"vocab_size\": 163840}, \"tie_word_embeddings\": false, \"transformers_version\": \"5.7.0\", "
        "\"use_unified_vision_chunk\": true, \"video_placeholder\": \"<|kimi_k25_video_placeholder|>\", \"vision_config\": "
        "{\"init_pos_emb_height\": 64, \"init_pos_emb_time\": 4, \"init_pos_emb_width\": 64, \"merge_kernel_size\": [2, 2], "
        "\"merge_type\": \"sd2_tpool\", \"mm_hidden_size\": 1152, \"mm_projector_type\": \"patchmerger\", \"model_type\": \"\", "
        "\"patch_size\": 14, \"pos_emb_type\": \"divided_fixed\", \"projector_hidden_act\": \"gelu\", \"projector_ln_eps\": "
        "1e-05, \"text_hidden_size\": 7168, \"video_attn_type\": \"spatial_temporal\", \"vt_hidden_size\": 1152, "
        "\"vt_intermediate_size\": 4304, \"vt_num_attention_heads\": 16, \"vt_num_hidden_layers\": 27}}",
        "Kimi-K2.5/config.json", &c));
    double ms = 0.1 * log(64.0) + 1;                 /* yarn_get_mscale(64, mscale_all_dim 1) */
    CHECK(c.family == FAM_KIMI_K25 && cfg_is_mla(&c) && c.n_heads == 64 && c.n_layers == 61 && c.hidden == 7168 &&
          c.q_lora_rank == 1536 && c.kv_lora_rank == 512 && c.qk_nope_dim == 128 && c.qk_rope_dim == 64 &&
          c.v_dim == 128 && c.vocab == 163840 && !c.tie_embeddings && c.norm_eps == 1e-5 && c.rope_theta == 50000,
          "Kimi-K2.5: DeepSeek-V3's MLA dims from text_config");
    CHECK(c.rope_spec.scaling.kind == RS_YARN && c.rope_spec.scaling.factor == 64 &&
          c.rope_spec.scaling.orig_max_pos == 4096 && c.rope == ROPE_INTERLEAVED &&
          fabs(cfg_attn_scale(&c, 0) - ms * ms / sqrt(192.0)) < 1e-12,
          "Kimi-K2.5: YaRN x64 from 4096 in rope_parameters, softmax scale mscale^2 / sqrt(192) (%g)", cfg_attn_scale(&c, 0));
    CHECK(c.mlp == MLP_MOE && c.moe.layout == MOE_DEEPSEEK && c.moe.n_experts == 384 && c.moe.top_k == 8 &&
          c.moe.expert_ffn == 2048 && c.moe.n_shared == 1 && c.moe.sigmoid && c.moe.routed_scaling == 2.827 &&
          c.moe.first_dense == 1 && !cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 60), "Kimi-K2.5: 384 experts top-8");
    char n[160];
    CHECK(cfg_role_name(&c, ROLE_KV_B, 5, -1, "weight", n, sizeof n) &&
          !strcmp(n, "language_model.model.layers.5.self_attn.kv_b_proj.weight"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_LM_HEAD, -1, -1, "weight", n, sizeof n) && !strcmp(n, "language_model.lm_head.weight"),
          "%s", n);
    CHECK(cfg_role_name(&c, ROLE_EXP_GATE, 7, 383, "weight", n, sizeof n) &&
          !strcmp(n, "language_model.model.layers.7.mlp.experts.383.gate_proj.weight"), "%s", n);
    CHECK_ERR(model_config_parse("{\"model_type\": \"kimi_k25\", \"text_config\": {\"model_type\": \"kimi_linear\", "
                                 "\"hidden_size\": 64}}", "t", &c), "text_config");
}

/* moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json (KimiLinearForCausalLM): linear_attn_config's kda_layers
 * (1-based) are Kimi Delta Attention, full_attn_layers MLA with q_proj (q_lora_rank null) and no RoPE
 * (mla_use_nope); KimiLinearConfig's MoE keys (num_experts_per_token, num_shared_experts, moe_renormalize,
 * moe_router_activation_func, num_expert_group). */
static void test_kimi_linear(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse("{\"architectures\": [\"KimiLinearForCausalLM\"], \"auto_map\": {\"AutoConfig\": "
        "\"configuration_kimi.KimiLinearConfig\", \"AutoModel\": \"modeling_kimi.KimiLinearModel\", "
        "\"AutoModelForCausalLM\": \"modeling_kimi.KimiLinearForCausalLM\"}, \"bos_token_id\": 163584, \"dtype\": "
        "\"bfloat16\", \"eos_token_id\": 163586, \"first_k_dense_replace\": 1, \"head_dim\": 72, \"hidden_act\": \"silu\", "
        "\"hidden_size\": 2304, \"initializer_range\": 0.02, \"intermediate_size\": 9216, \"kv_lora_rank\": 512, "
        "\"linear_attn_config\": {\"full_attn_layers\": [4, 8, 12, 16, 20, 24, 27], \"head_dim\": 128, \"kda_layers\": "
        "[1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26], \"num_heads\": 32, "
        "\"short_conv_kernel_size\": 4}, \"mla_use_nope\": true, \"model_max_length\": 1048576, \"model_type\": "
        "\"kimi_linear\", \"moe_intermediate_size\": 1024, \"moe_layer_freq\": 1, \"moe_renormalize\": true, "
        "\"moe_router_activation_func\": \"sigmoid\", \"num_attention_heads\": 32, \"num_expert_group\": 1, "
        "\"num_experts\": 256, \"num_experts_per_token\": 8, \"num_hidden_layers\": 27, \"num_key_value_heads\": 32, "
        "\"num_nextn_predict_layers\": 0, \"num_shared_experts\": 1, \"pad_token_id\": 163839, \"q_lora_rank\": null, "
        "\"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "
        "\"rope_theta\": 10000.0, \"routed_scaling_factor\": 2.446, \"tie_word_embeddings\": false, \"topk_group\": 1, "
        "\"use_cache\": true, \"use_grouped_topk\": true, \"v_head_dim\": 128, \"vocab_size\": 163840}",
        "Kimi-Linear-48B-A3B/config.json", &c));
    CHECK(c.family == FAM_KIMI_LINEAR && cfg_is_mla(&c) && c.q_lora_rank == 0 && c.kv_lora_rank == 512 &&
          c.qk_nope_dim == 128 && c.qk_rope_dim == 64 && c.v_dim == 128 && c.n_heads == 32 && c.n_layers == 27 &&
          c.rope == ROPE_NONE && !cfg_layer_rope(&c, 3) && fabs(cfg_attn_scale(&c, 3) - 1 / sqrt(192.0)) < 1e-12,
          "Kimi-Linear: MLA with q_proj, no RoPE (mla_use_nope), scale 1/sqrt(192)");
    char list[128];
    int n = cfg_attn_layers(&c, list, sizeof list);
    CHECK(c.lin.layout == LIN_KDA && c.lin.n_linear == 20 && n == 7 && !strcmp(list, "3, 7, 11, 15, 19, 23, 26") &&
          cfg_layer_linear(&c, 0) && !cfg_layer_linear(&c, 26) && c.lin.v_heads == 32 && c.lin.dv == 128 &&
          c.lin.conv == 4, "Kimi-Linear: kda_layers 1-based, MLA layers %s", list);
    CHECK(c.mlp == MLP_MOE && c.moe.layout == MOE_KIMI && c.moe.n_experts == 256 && c.moe.top_k == 8 &&
          c.moe.n_shared == 1 && c.moe.norm_topk_prob && c.moe.sigmoid && c.moe.n_group == 1 &&
          c.moe.routed_scaling == 2.446 && !cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 1), "Kimi-Linear: 256 experts top-8");
    char nm[160];
    CHECK(cfg_role_name(&c, ROLE_LIN_F_B, 0, -1, "weight", nm, sizeof nm) &&
          !strcmp(nm, "model.layers.0.self_attn.f_b_proj.weight"), "%s", nm);
    CHECK(cfg_role_name(&c, ROLE_Q, 3, -1, "weight", nm, sizeof nm) && !strcmp(nm, "model.layers.3.self_attn.q_proj.weight"),
          "%s", nm);
    CHECK(cfg_role_name(&c, ROLE_ROUTER_BIAS, 3, -1, NULL, nm, sizeof nm) &&
          !strcmp(nm, "model.layers.3.block_sparse_moe.gate.e_score_correction_bias"), "%s", nm);
    CHECK(cfg_role_name(&c, ROLE_SHEXP_DOWN, 3, -1, "weight", nm, sizeof nm) &&
          !strcmp(nm, "model.layers.3.block_sparse_moe.shared_experts.down_proj.weight"), "%s", nm);
    CHECK_ERR(cfg_check_attn_layer(&c, 4, "ranks"), "Kimi Delta Attention");
}

/* google/gemma-4-31B-it's config.json (Gemma4ForConditionalGeneration): its text_config as released, the 60
 * layer_types written out (5 sliding : 1 full); then an E2B-shaped text config (35 layers, every 5th full, the last
 * 20 KV-shared, hidden_size_per_layer_input 256) and Gemma4TextConfig's defaults (no rope_parameters, no layer_types). */
static void test_gemma4(void) {
    char types[60 * 24] = "", *json = NULL;
    for (int L = 0; L < 60; L++)
        snprintf(types + strlen(types), sizeof types - strlen(types), "%s\"%s\"", L ? ", " : "",
                 L % 6 == 5 ? "full_attention" : "sliding_attention");
    json = al_asprintf(
        "{\"architectures\": [\"Gemma4ForConditionalGeneration\"], \"audio_config\": null, \"boi_token_id\": 255999, "
        "\"dtype\": \"bfloat16\", \"eoi_token_id\": 258882, \"image_token_id\": 258880, \"initializer_range\": 0.02, "
        "\"model_type\": \"gemma4\", \"text_config\": {\"attention_bias\": false, \"attention_dropout\": 0.0, "
        "\"attention_k_eq_v\": true, \"enable_moe_block\": false, \"expert_intermediate_size\": null, "
        "\"final_logit_softcapping\": 30.0, \"global_head_dim\": 512, \"head_dim\": 256, \"hidden_activation\": "
        "\"gelu_pytorch_tanh\", \"hidden_size\": 5376, \"hidden_size_per_layer_input\": 0, \"intermediate_size\": 21504, "
        "\"layer_types\": [%s], \"max_position_embeddings\": 262144, \"model_type\": \"gemma4_text\", "
        "\"num_attention_heads\": 32, \"num_experts\": null, \"num_global_key_value_heads\": 4, \"num_hidden_layers\": 60, "
        "\"num_key_value_heads\": 16, \"num_kv_shared_layers\": 0, \"rms_norm_eps\": 1e-06, \"rope_parameters\": "
        "{\"full_attention\": {\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0, \"rope_type\": "
        "\"proportional\"}, \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}}, "
        "\"sliding_window\": 1024, \"tie_word_embeddings\": true, \"top_k_experts\": null, "
        "\"use_bidirectional_attention\": \"vision\", \"use_cache\": true, \"use_double_wide_mlp\": false, "
        "\"vocab_size\": 262144, \"vocab_size_per_layer_input\": 262144}, \"tie_word_embeddings\": true, "
        "\"video_token_id\": 258884, \"vision_config\": {\"model_type\": \"gemma4_vision\", \"hidden_size\": 1152}}",
        types);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "gemma-4-31B-it/config.json", &c));
    const RopeSpec *r = &c.rope_spec;
    CHECK(c.family == FAM_GEMMA4 && c.names == NAMES_MODEL_LM && c.n_layers == 60 && c.n_heads == 32 &&
          c.n_kv_heads == 16 && cfg_d_qk(&c) == 256 && c.global_head_dim == 512 && c.global_kv_heads == 4 && c.k_eq_v &&
          c.kv_shared_from == 0 && c.ple_dim == 0 && c.moe_block_experts == 0 && c.norm == NORM_RMS &&
          c.block == BLOCK_SANDWICH && c.qk_norm == QKN_HEAD && c.v_norm && c.tie_embeddings && c.final_softcap == 30,
          "gemma-4-31B: 32 heads, 16 / 4 KV heads of 256 / 512, k_eq_v, plain RMSNorm, final soft-cap 30");
    CHECK(cfg_layer_window(&c, 0) == 1024 && cfg_layer_window(&c, 5) == 0 && cfg_layer_window(&c, 59) == 0 &&
          !cfg_layer_v_is_k(&c, 4) && cfg_layer_v_is_k(&c, 5) && cfg_kv_source(&c, 59) == 59 && cfg_per_type_dims(&c),
          "gemma-4-31B: window 1024 on the sliding layers, V = K on the full ones, no KV sharing");
    CHECK(r->theta == 1e6 && r->local_theta == 1e4 && r->prop_factor == 0.25 && cfg_layer_theta(&c, 0) == 1e4 &&
          cfg_layer_theta(&c, 5) == 1e6 && r->scaling.kind == RS_NONE && cfg_attn_scale(&c, 0) == 1.0,
          "gemma-4-31B: RoPE theta 1e4 sliding, proportional 0.25 of 1e6 full, softmax scale 1 (theta %g / %g, prop %g, "
          "scale %g)", r->local_theta, r->theta, r->prop_factor, cfg_attn_scale(&c, 0));
    free(json);
    /* E2B-shaped: every 5th layer full (4, 9, ..., 34), the last 20 share; PLE on (forward refused, see analyses) */
    types[0] = 0;
    for (int L = 0; L < 35; L++)
        snprintf(types + strlen(types), sizeof types - strlen(types), "%s\"%s\"", L ? ", " : "",
                 L % 5 == 4 ? "full_attention" : "sliding_attention");
    json = al_asprintf("{\"model_type\": \"gemma4_text\", \"hidden_size\": 1536, \"num_attention_heads\": 8, "
                       "\"num_key_value_heads\": 1, \"num_hidden_layers\": 35, \"head_dim\": 256, \"global_head_dim\": "
                       "512, \"num_global_key_value_heads\": null, \"attention_k_eq_v\": false, \"num_kv_shared_layers\": "
                       "20, \"use_double_wide_mlp\": true, \"intermediate_size\": 6144, \"vocab_size\": 262144, "
                       "\"sliding_window\": 512, \"layer_types\": [%s]}", types);
    CHECK_OK(model_config_parse(json, "e2b/config.json", &c));
    CHECK(c.kv_shared_from == 15 && cfg_kv_source(&c, 14) == 14 && cfg_kv_source(&c, 15) == 13 &&
          cfg_kv_source(&c, 19) == 14 && cfg_kv_source(&c, 34) == 14 && cfg_kv_source(&c, 33) == 13 && !c.k_eq_v &&
          c.global_kv_heads == 1 && c.double_wide_mlp && c.ple_dim == 256 && c.rope_spec.prop_factor == 0.25,
          "E2B-shaped: layers 15-34 read layer 13's (sliding) or 14's (full) K / V; PLE 256 by default");
    free(json);
    c = parse("\"model_type\": \"gemma4_text\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 8, "
              "\"head_dim\": 16, \"global_head_dim\": null, \"hidden_size_per_layer_input\": null");
    CHECK(c.has_layer_types && cfg_layer_window(&c, 0) == 512 && cfg_layer_window(&c, 5) == 0 &&
          cfg_layer_window(&c, 6) == 512 && cfg_layer_window(&c, 7) == 0 && c.global_head_dim == 0 && c.ple_dim == 0 &&
          !cfg_per_type_dims(&c) && c.rope_spec.theta == 1e6 && c.rope_spec.local_theta == 1e4,
          "Gemma4TextConfig's defaults: every 6th layer full and the last one too, window 512; null head dim / PLE");
}

/* moonshotai/Kimi-K3's config.json (KimiK3ForConditionalGeneration) as tests/cli_kimi_k3.sh writes it: the text tower
 * (text_config, model_type kimi_linear) read as Kimi-Linear's -- 93 layers, MLA with a query latent and no RoPE on
 * full_attn_layers (1-based: 4, 8, ..., 92, 93), Kimi Delta Attention on the others -- its tensors under
 * language_model.model.; before, the config was refused. */
static void test_kimi_k3(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse(
        "{\"architectures\": [\"KimiK3ForConditionalGeneration\"], \"auto_map\": {\"AutoConfig\": \"configuration_kimi"
        "_k3.KimiK3Config\", \"AutoModel\": \"modeling_kimi_k3.KimiK3ForConditionalGeneration\", \"AutoModelForCaus"
        "alLM\": \"modeling_kimi_k3.KimiK3ForConditionalGeneration\"}, \"bos_token_id\": 163584, \"dtype\": \"bfloat1"
        "6\", \"eos_token_id\": 163586, \"ignore_index\": -100, \"image_placeholder\": \"<|kimi_image_placeholder|>\","
        " \"media_placeholder_token_id\": 163605, \"model_type\": \"kimi_k3\", \"pad_token_id\": 163839, \"text_config"
        "\": {\"activation_situ_beta\": 4.0, \"activation_situ_linear_beta\": 25.0, \"architectures\": [\"KimiLinearF"
        "orCausalLM\"], \"attn_res_block_size\": 12, \"auto_map\": {\"AutoConfig\": \"configuration_kimi_k3.KimiLinea"
        "rConfig\", \"AutoModel\": \"modeling_kimi_linear.KimiLinearModel\", \"AutoModelForCausalLM\": \"modeling_kim"
        "i_linear.KimiLinearForCausalLM\"}, \"bos_token_id\": 163584, \"dtype\": \"bfloat16\", \"eos_token_id\": 16358"
        "6, \"first_k_dense_replace\": 1, \"hidden_act\": \"situ\", \"hidden_size\": 7168, \"initializer_range\": 0.02,"
        " \"intermediate_size\": 33792, \"kv_lora_rank\": 512, \"latent_moe_use_norm\": true, \"linear_attn_config\":"
        " {\"full_attn_layers\": [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80,"
        " 84, 88, 92, 93], \"gate_lower_bound\": -5.0, \"head_dim\": 128, \"kda_layers\": [1, 2, 3, 5, 6, 7, 9, 10,"
        " 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26, 27, 29, 30, 31, 33, 34, 35, 37, 38, 39, 41, 42, 43,"
        " 45, 46, 47, 49, 50, 51, 53, 54, 55, 57, 58, 59, 61, 62, 63, 65, 66, 67, 69, 70, 71, 73, 74, 75, 77,"
        " 78, 79, 81, 82, 83, 85, 86, 87, 89, 90, 91], \"num_heads\": 96, \"short_conv_kernel_size\": 4, \"use_ful"
        "l_rank_gate\": true}, \"max_position_embeddings\": 1048576, \"mla_use_nope\": true, \"mla_use_output_gate\""
        ": true, \"model_type\": \"kimi_linear\", \"moe_intermediate_size\": 3072, \"moe_layer_freq\": 1, \"moe_renorm"
        "alize\": true, \"moe_router_activation_func\": \"sigmoid\", \"num_attention_heads\": 96, \"num_expert_group\""
        ": 1, \"num_experts\": 896, \"num_experts_per_token\": 16, \"num_hidden_layers\": 93, \"num_key_value_heads\""
        ": 96, \"num_nextn_predict_layers\": 0, \"num_shared_experts\": 2, \"pad_token_id\": 163839, \"q_lora_rank\":"
        " 1536, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"quantization_config\": {\"config_groups\": {\"g"
        "roup_0\": {\"format\": \"mxfp4-pack-quantized\", \"input_activations\": null, \"output_activations\": null, \""
        "targets\": [\"Linear\"], \"weights\": {\"actorder\": null, \"block_structure\": null, \"dynamic\": false, \"grou"
        "p_size\": 32, \"num_bits\": 4, \"observer\": \"minmax\", \"observer_kwargs\": {}, \"scale_dtype\": \"torch.uint8"
        "\", \"strategy\": \"group\", \"symmetric\": true, \"type\": \"float\", \"zp_dtype\": null}}}, \"format\": \"mxfp4-pa"
        "ck-quantized\", \"global_compression_ratio\": null, \"ignore\": [\"re:.*self_attn.*\", \"re:.*shared_experts"
        ".*\", \"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\", \"re:.*lm_head.*\", \"re:.*vision_tower.*\", \"re:.*mm_p"
        "rojector.*\"], \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", \"quantization_status\": "
        "\"compressed\"}, \"rms_norm_eps\": 1e-05, \"routed_expert_hidden_size\": 3584, \"routed_scaling_factor\": 1."
        "0, \"tie_word_embeddings\": false, \"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"transformers_version\":"
        " \"4.56.2\", \"use_cache\": true, \"use_grouped_topk\": true, \"v_head_dim\": 128, \"vocab_size\": 163840}, \"t"
        "ie_word_embeddings\": false, \"vision_config\": {\"_attn_implementation\": \"flash_attention_2\", \"activati"
        "on_func\": \"gelu_pytorch_tanh\", \"attn_bias\": false, \"init_pos_emb_height\": 64, \"init_pos_emb_time\": 4"
        ", \"init_pos_emb_width\": 64, \"linear_bias\": false, \"merge_kernel_size\": [2, 2], \"merge_type\": \"sd2_tp"
        "ool\", \"mlp_type\": \"mlp2\", \"mm_hidden_size\": 1024, \"mm_projector_type\": \"patchmergerv2\", \"norm_type\":"
        " \"rmsnorm\", \"patch_embed_proj_bias\": false, \"patch_size\": 14, \"pos_emb_interpolation_mode\": \"bilinea"
        "r\", \"pos_emb_type\": \"divided_fixed\", \"projector_hidden_act\": \"gelu\", \"projector_ln_eps\": 1e-05, \"qkv"
        "_hidden_size\": 1536, \"text_hidden_size\": 7168, \"vt_hidden_size\": 1024, \"vt_intermediate_size\": 4096,"
        " \"vt_num_attention_heads\": 12, \"vt_num_hidden_layers\": 27}}",
        "Kimi-K3/config.json", &c));
    CHECK(c.family == FAM_KIMI_K3 && cfg_is_mla(&c) && c.q_lora_rank == 1536 && c.kv_lora_rank == 512 &&
          c.qk_nope_dim == 128 && c.qk_rope_dim == 64 && c.v_dim == 128 && c.n_heads == 96 && c.n_layers == 93 &&
          c.hidden == 7168 && c.rope == ROPE_NONE && !cfg_layer_rope(&c, 3), "Kimi-K3: MLA dims from text_config, no RoPE");
    char list[256];
    int n = cfg_attn_layers(&c, list, sizeof list);
    CHECK(c.lin.layout == LIN_KDA && c.lin.n_linear == 69 && n == 24 && cfg_layer_linear(&c, 0) &&
          !cfg_layer_linear(&c, 3) && !cfg_layer_linear(&c, 91) && !cfg_layer_linear(&c, 92) && cfg_layer_linear(&c, 90) &&
          c.lin.v_heads == 96 && c.lin.dv == 128, "Kimi-K3: 69 KDA layers, 24 MLA (%s)", list);
    CHECK(c.mlp == MLP_MOE && c.moe.n_experts == 896 && c.moe.top_k == 16 && c.moe.n_shared == 2,
          "Kimi-K3: 896 experts top-16, 2 shared");
    char nm[160];
    CHECK(cfg_role_name(&c, ROLE_KV_B, 3, -1, "weight", nm, sizeof nm) &&
          !strcmp(nm, "language_model.model.layers.3.self_attn.kv_b_proj.weight"), "%s", nm);
}

int main(void) {
    test_family_table();
    test_text_towers();
    test_smollm3();
    test_python_nonfinite();
    test_families();
    test_olmo3();
    test_qwen3_next();
    test_qwen3_5();
    test_glm4_moe();
    test_dsa_families();
    test_mimo();
    test_exaone4();
    test_minimax_m2();
    test_ministral3();
    test_kimi_k25();
    test_kimi_linear();
    test_kimi_k3();
    test_gemma4();
    test_rope_spec();
    test_attention_fields();
    test_softmax_rotation();
    test_model_and_analyses(test_tmpdir());
    return check_done();
}
