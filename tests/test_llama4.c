/* test_llama4.c -- Llama 4's description from real config.json files (core/model/config.c) and the chunked
 * attention of the one attention core (core/model/rope.c):
 *   - meta-llama/Llama-4-Scout-17B-16E's config.json (Llama4ForConditionalGeneration: the text tower under
 *     text_config, attn_temperature_tuning 4, moe_layers 0..47, no_rope_layers 1,1,1,0 x 12, llama3 x8 with
 *     low 1 / high 4): NoPE layers, chunks on the RoPE layers only, the L2 q/k norm, the temperature, MoE widths,
 *     role names under language_model.model.;
 *   - Scout's later rope_scaling (x16, low = high = 1: no blend band), which attnlab refused before
 *     (low_freq_factor < high_freq_factor required): the frequencies above 8192 tokens / 16, the others kept;
 *   - Llama-4-Maverick-17B-128E's text_config (interleave_moe_layer_step 2: dense layers between, 128 experts,
 *     use_qk_norm false, rope_scaling null, no_rope_layers absent: every 4th layer NoPE);
 *   - a text-only Llama4ForCausalLM (model_type llama4_text) with Scout's text keys at the top level;
 *   - attn_head_causal with a chunk: the query at p averages the values of [p - p % C, p] when its logits
 *     are equal;
 *   - the evaluator (attn_eval, what truncate's layers run as): every layer of `synth family llama4_text` swapped
 *     for its own attn_layer_load copy gives the forward pass's logits, and the copy with its chunk, its L2 q/k
 *     norm or its temperature taken away does not. */
#include "check.h"
#include "attn_eval.h"
#include "config.h"
#include "forward.h"
#include "rope.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Scout's text keys (the config.json's text_config, moe_layers written out), with the rope_scaling given. */
#define SCOUT_TEXT(rs)                                                                                                 \
    "\"attention_bias\": false, \"attention_chunk_size\": 8192, \"attention_dropout\": 0.0, \"attn_scale\": 0.1, "   \
    "\"attn_temperature_tuning\": 4, \"bos_token_id\": 200000, \"eos_token_id\": [200001, 200007, 200008], "         \
    "\"floor_scale\": 8192, \"for_llm_compressor\": false, \"head_dim\": 128, \"hidden_act\": \"silu\", "            \
    "\"hidden_size\": 5120, \"initializer_range\": 0.02, \"interleave_moe_layer_step\": 1, "                          \
    "\"intermediate_size\": 8192, \"intermediate_size_mlp\": 16384, \"max_position_embeddings\": 262144, "            \
    "\"model_type\": \"llama4_text\", \"moe_layers\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, "   \
    "17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, "     \
    "44, 45, 46, 47], \"no_rope_layers\": [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, "  \
    "1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0], \"num_attention_heads\": 40, "           \
    "\"num_experts_per_tok\": 1, \"num_hidden_layers\": 48, \"num_key_value_heads\": 8, \"num_local_experts\": 16, "  \
    "\"output_router_logits\": false, \"pad_token_id\": 200018, \"rms_norm_eps\": 1e-05, \"rope_scaling\": " rs ", " \
    "\"rope_theta\": 500000.0, \"router_aux_loss_coef\": 0.001, \"router_jitter_noise\": 0.0, "                      \
    "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_qk_norm\": true, \"vocab_size\": 202048"
#define SCOUT_RS_8 "{\"factor\": 8.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, " \
                   "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}"
#define SCOUT_RS_16 "{\"factor\": 16.0, \"high_freq_factor\": 1.0, \"low_freq_factor\": 1.0, " \
                    "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}"
#define VISION "\"vision_config\": {\"attention_dropout\": 0.0, \"hidden_act\": \"gelu\", \"hidden_size\": 1408, "     \
    "\"image_size\": 336, \"initializer_range\": 0.02, \"intermediate_size\": 5632, \"model_type\": "                 \
    "\"llama4_vision_model\", \"multi_modal_projector_bias\": false, \"norm_eps\": 1e-05, \"num_attention_heads\": "  \
    "16, \"num_channels\": 3, \"num_hidden_layers\": 34, \"patch_size\": 14, \"pixel_shuffle_ratio\": 0.5, "           \
    "\"projector_dropout\": 0.0, \"projector_input_dim\": 4096, \"projector_output_dim\": 4096, \"rope_theta\": "      \
    "10000, \"vision_feature_layer\": -1, \"vision_feature_select_strategy\": \"default\", \"vision_output_dim\": 4096}"
#define TOWER_HEAD "\"architectures\": [\"Llama4ForConditionalGeneration\"], \"boi_token_index\": 200080, " \
                   "\"eoi_token_index\": 200081, \"image_token_index\": 200092, \"model_type\": \"llama4\", "

static ModelConfig parse(const char *json) {
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "t/config.json", &c));
    return c;
}

static bool named(const ModelConfig *c, tensor_role r, int L, const char *what, const char *want) {
    char n[256];
    bool ok = cfg_role_name(c, r, L, -1, what, n, sizeof n) && !strcmp(n, want);
    if (!ok) fprintf(stderr, "  role %s of layer %d: '%s', want '%s'\n", tensor_role_name(r), L, n, want);
    return ok;
}

static void test_scout(void) {
    ModelConfig c = parse("{" TOWER_HEAD "\"text_config\": {" SCOUT_TEXT(SCOUT_RS_8) "}, \"tie_word_embeddings\": false, "
                          "\"transformers_version\": \"4.51.0\", " VISION "}");
    CHECK(c.family == FAM_LLAMA4 && c.n_layers == 48 && c.n_heads == 40 && c.n_kv_heads == 8 && c.qk_rope_dim == 128 &&
          c.hidden == 5120 && c.vocab == 202048 && !c.tie_embeddings, "Scout: the text tower's dims");
    CHECK(c.rope == ROPE_INTERLEAVED && c.rope_spec.layout == ROPE_INTERLEAVED && c.rope_spec.scaling.kind == RS_LLAMA3 &&
          c.rope_spec.scaling.factor == 8 && c.rope_theta == 5e5 && c.norm_eps == 1e-5,
          "Scout: complex RoPE on adjacent pairs, llama3 x8, theta 5e5");
    char nope[256];
    CHECK(cfg_nope_layers(&c, nope, sizeof nope) == 12 && !strncmp(nope, "3, 7, 11", 8), "Scout: NoPE layers %s", nope);
    CHECK(c.attn_chunk == 8192 && cfg_layer_chunk(&c, 0) == 8192 && cfg_layer_chunk(&c, 2) == 8192 &&
          cfg_layer_chunk(&c, 3) == 0 && cfg_layer_chunk(&c, 47) == 0, "Scout: chunks of 8192 on the RoPE layers only");
    CHECK(c.qk_l2 && cfg_layer_qk_l2(&c, 0) && !cfg_layer_qk_l2(&c, 3) && c.qk_norm == QKN_NONE,
          "Scout: the L2 q/k norm on RoPE layers, no q/k norm weights");
    CHECK(cfg_q_temperature(&c, 3, 8190) == 1.0 && fabs(cfg_q_temperature(&c, 3, 8191) - (1 + 0.1 * log(2))) < 1e-12 &&
          fabs(cfg_q_temperature(&c, 7, 3 * 8192 - 1) - (1 + 0.1 * log(4))) < 1e-12 && cfg_q_temperature(&c, 0, 9000) == 1,
          "Scout: attn_temperature_tuning 4 (a number: on) on the NoPE layers, from position floor_scale - 1");
    CHECK(c.mlp == MLP_MOE && c.moe.layout == MOE_LLAMA4 && c.moe.router == ROUTER_LLAMA4 && c.moe.n_experts == 16 &&
          c.moe.top_k == 1 && c.moe.expert_ffn == 8192 && c.intermediate == 16384 && c.moe.n_shared == 1 &&
          c.moe.shared_ffn == 8192 && cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 47) && !c.moe.norm_topk_prob,
          "Scout: every layer 16 experts top-1 of 8192 and a shared expert (moe_layers)");
    CHECK(named(&c, ROLE_EXPS_GATE_UP, 5, NULL, "language_model.model.layers.5.feed_forward.experts.gate_up_proj") &&
          named(&c, ROLE_ROUTER, 5, "weight", "language_model.model.layers.5.feed_forward.router.weight") &&
          named(&c, ROLE_SHEXP_DOWN, 5, "weight", "language_model.model.layers.5.feed_forward.shared_expert.down_proj.weight") &&
          named(&c, ROLE_FFN_GATE, 5, "weight", "language_model.model.layers.5.feed_forward.gate_proj.weight") &&
          named(&c, ROLE_LM_HEAD, -1, "weight", "language_model.lm_head.weight") &&
          named(&c, ROLE_EMBED, -1, "weight", "language_model.model.embed_tokens.weight"),
          "Scout: the tensor names of the release");
}

/* Scout's x16 with low_freq_factor = high_freq_factor = 1: wavelengths above 8192 tokens / 16, the rest kept. */
static void test_scout_low_eq_high(void) {
    ModelConfig c = parse("{" TOWER_HEAD "\"text_config\": {" SCOUT_TEXT(SCOUT_RS_16) "}, " VISION "}");
    CHECK(c.rope_spec.scaling.kind == RS_LLAMA3 && c.rope_spec.scaling.factor == 16 &&
          c.rope_spec.scaling.low_freq_factor == 1 && c.rope_spec.scaling.high_freq_factor == 1, "Scout x16: read");
    CHECK_OK(rope_scaling_check(&c.rope_spec.scaling, "scout"));
    double f[64], p[64];
    CHECK_OK(rope_inv_freq(&c.rope_spec, 128, 5e5, f, "scout"));
    rope_plain_freqs(128, 5e5, p);
    int scaled = 0, kept = 0, wrong = 0;
    for (int j = 0; j < 64; j++) {
        bool lo = 2 * M_PI / p[j] > 8192;
        if (lo) scaled++; else kept++;
        if (fabs(f[j] - (lo ? p[j] / 16 : p[j])) > 1e-15 * p[j] || !isfinite(f[j])) wrong++;
    }
    CHECK(wrong == 0 && scaled > 10 && kept > 10, "Scout x16: %d scaled, %d kept, %d wrong", scaled, kept, wrong);
}

static void test_maverick(void) {
    ModelConfig c = parse(
        "{" TOWER_HEAD "\"text_config\": {\"attention_bias\": false, \"attention_chunk_size\": 8192, "
        "\"attention_dropout\": 0.0, \"bos_token_id\": 200000, \"eos_token_id\": [200001, 200007, 200008], "
        "\"for_llm_compressor\": false, \"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 5120, "
        "\"initializer_range\": 0.02, \"interleave_moe_layer_step\": 2, \"intermediate_size\": 8192, "
        "\"intermediate_size_mlp\": 16384, \"max_position_embeddings\": 1048576, \"model_type\": \"llama4_text\", "
        "\"num_attention_heads\": 40, \"num_experts_per_tok\": 1, \"num_hidden_layers\": 48, \"num_key_value_heads\": 8, "
        "\"num_local_experts\": 128, \"output_router_logits\": false, \"pad_token_id\": 200018, \"rms_norm_eps\": 1e-05, "
        "\"rope_scaling\": null, \"rope_theta\": 500000.0, \"router_aux_loss_coef\": 0.001, \"router_jitter_noise\": 0.0, "
        "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_qk_norm\": false, \"vocab_size\": 202048}, "
        "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.51.0.dev0\", " VISION "}");
    CHECK(c.family == FAM_LLAMA4 && c.moe.n_experts == 128 && !cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 1) &&
          !cfg_moe_layer(&c, 46) && cfg_moe_layer(&c, 47) && c.mlp == MLP_MOE && c.intermediate == 16384,
          "Maverick: 128 experts on the odd layers (interleave_moe_layer_step 2), dense between");
    char nope[256];
    CHECK(cfg_nope_layers(&c, nope, sizeof nope) == 12 && !strncmp(nope, "3, 7", 4) && !c.qk_l2 &&
          cfg_layer_chunk(&c, 1) == 8192 && c.rope_spec.scaling.kind == RS_NONE && c.temp_scale == 0.1,
          "Maverick: no_rope_layers absent -> every 4th NoPE; no q/k norm; no scaling; temperature on by default");
}

/* Llama4ForCausalLM (a text-only fine-tune of Scout: model_type llama4_text at the top). */
static void test_text_only(void) {
    ModelConfig c = parse("{\"architectures\": [\"Llama4ForCausalLM\"], " SCOUT_TEXT(SCOUT_RS_8) ", "
                          "\"tie_word_embeddings\": false}");
    CHECK(c.family == FAM_LLAMA4_TEXT && c.n_layers == 48 && c.attn_chunk == 8192 && c.qk_l2 &&
          named(&c, ROLE_EXPS_DOWN, 0, NULL, "model.layers.0.feed_forward.experts.down_proj") &&
          named(&c, ROLE_LM_HEAD, -1, "weight", "lm_head.weight"), "llama4_text: Scout's keys at the top, model. names");
    ModelConfig n = parse("{\"model_type\": \"llama4_text\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                          "\"num_hidden_layers\": 4, \"intermediate_size\": 32, \"vocab_size\": 16, "
                          "\"attention_chunk_size\": null, \"attn_temperature_tuning\": false, \"no_rope_layers\": []}");
    CHECK(n.attn_chunk == 0 && n.temp_scale == 0 && n.qk_l2 && cfg_layer_chunk(&n, 0) == 0 &&
          cfg_q_temperature(&n, 3, 1 << 20) == 1 && !cfg_layer_qk_l2(&n, 3) && cfg_layer_qk_l2(&n, 2) &&
          n.moe.n_experts == 16 && n.moe.top_k == 1 && n.mlp == MLP_MOE && n.moe.expert_ffn == 32 &&
          n.intermediate == 16384 && cfg_moe_layer(&n, 0) && cfg_moe_layer(&n, 3),
          "chunk null, tuning false: neither; no_rope_layers []: every 4th NoPE; Llama4TextConfig's defaults: 16 "
          "experts top-1 of intermediate_size on every layer, intermediate_size_mlp 16384");
    ModelConfig d = parse("{\"model_type\": \"llama4_text\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                          "\"num_hidden_layers\": 4, \"intermediate_size\": 32, \"intermediate_size_mlp\": 48, "
                          "\"vocab_size\": 16, \"num_local_experts\": 0}");
    CHECK(d.moe.n_experts == 0 && d.mlp == MLP_GATED && d.intermediate == 48 && !cfg_moe_layer(&d, 0),
          "num_local_experts 0: dense layers of intermediate_size_mlp");
}

/* Equal logits (q = 0): the query at p averages V over its chunk [p - p % C, p]. */
static void test_chunk_core(void) {
    enum { T = 7, C = 3 };
    float q[T] = {0}, K[T] = {0}, V[T], out[T], S[T * T];
    for (int i = 0; i < T; i++) V[i] = (float)(1 << i);
    attn_head_causal(&(AttnHeadJob){.q = q, .ldq = 1, .K = K, .ldk = 1, .V = V, .ldv = 1, .T = T, .pos0 = 0, .d = 1,
                                     .dv = 1, .scale = 1, .chunk = C, .qb = T, .S = S, .out = out, .ldo = 1});
    int bad = 0;
    for (int p = 0; p < T; p++) {
        double want = 0;
        for (int j = p - p % C; j <= p; j++) want += V[j] / (double)(p % C + 1);
        if (fabs(out[p] - want) > 1e-5 * want) { bad++; fprintf(stderr, "  p %d: %g, want %g\n", p, out[p], want); }
    }
    CHECK(bad == 0, "chunked attention: %d of %d rows wrong", bad, T);
}

enum { NTOK = 24 };

static float *logits_of(Forward *f, const int *ids, size_t V) {
    float *z = malloc(NTOK * V * sizeof *z);
    fwd_reset(f);
    if (z) CHECK_OK(fwd_run(f, ids, NTOK, FWD_LOGITS_ALL, z));
    return z;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; a && b && i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Every layer swapped for its evaluator copy: the plain logits; each feature taken from the copies: not. */
static void test_evaluator(const char *tmp) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/llama4_text", tmp);
    CHECK_OK(synth_family_write("llama4_text", DT_F32, SYNTH_DEFAULT_SEED, dir));
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    int ids[NTOK];
    for (int i = 0; i < NTOK; i++) ids[i] = (i * 37 + 11) % 256;
    size_t V = fwd_vocab(f);
    float *plain = logits_of(f, ids, V);
    AttnLayer *own[4] = {NULL};
    for (int l = 0; l < 4; l++) {
        CHECK_OK(attn_layer_load(m, l, &own[l]));
        if (own[l]) CHECK_OK(fwd_set_attn(f, l, own[l]));
    }
    if (!own[0] || !own[3]) { fwd_free(f); model_free(m); free(plain); return; }
    CHECK(own[0]->chunk == 8 && own[0]->qk_l2 && own[0]->temp_scale == 0 && own[3]->chunk == 0 && !own[3]->qk_l2 &&
          own[3]->temp_scale == 0.1 && own[3]->temp_floor == 4 && own[3]->rope_dim == 0,
          "the evaluator's layers: chunks and the L2 norm on layer 0, the temperature on NoPE layer 3");
    float *over = logits_of(f, ids, V);
    double d = max_diff(plain, over, NTOK * V);
    CHECK(d < 1e-4, "llama4_text layers swapped in: logits differ by %g", d);
    free(over);
    static const char *const what[] = {"chunk", "L2 q/k norm", "temperature"};
    for (int k = 0; k < 3; k++) {
        size_t chunk = own[0]->chunk;
        bool l2 = own[0]->qk_l2;
        double temp = own[3]->temp_scale;
        for (int l = 0; l < 3; l++) {
            if (k == 0) own[l]->chunk = 0;
            if (k == 1) own[l]->qk_l2 = false;
        }
        if (k == 2) own[3]->temp_scale = 0;
        for (int l = 0; l < 4; l++) CHECK_OK(fwd_set_attn(f, l, own[l]));
        over = logits_of(f, ids, V);
        d = max_diff(plain, over, NTOK * V);
        CHECK(d > 1e-3, "the evaluator without its %s still gives the logits (diff %g)", what[k], d);
        printf("  evaluator without its %s: logits off by %.3g\n", what[k], d);
        free(over);
        for (int l = 0; l < 3; l++) { own[l]->chunk = chunk; own[l]->qk_l2 = l2; }
        own[3]->temp_scale = temp;
    }
    free(plain);
    fwd_free(f);
    for (int l = 0; l < 4; l++) attn_layer_free(own[l]);
    model_free(m);
}

int main(void) {
    test_scout();
    test_scout_low_eq_high();
    test_maverick();
    test_text_only();
    test_chunk_core();
    test_evaluator(test_tmpdir());
    return check_done();
}
