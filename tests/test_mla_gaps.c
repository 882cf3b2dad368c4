/* test_mla_gaps.c -- core/export/mla_gaps.c, the table of what DeepSeek-V3's stock layout cannot
 * hold: each feature a family's config.json declares (a window, gpt-oss's sinks, Qwen3-Next's
 * output gate, Qwen3's / OLMo 2's q/k norms, GPT-NeoX's parallel residual, Gemma 2's sandwich
 * norms, 1 + w RMSNorm, embedding scale and soft-caps, GLM-4.5's DeepSeek-V3 router) makes the
 * export refuse naming it and the engine work it would need; a plain Llama, Mixtral without a
 * window (its softmax top-k experts export) and Phi-3 without a window pass. */
#include "check.h"
#include "mla_gaps.h"

#define DIMS "\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 4, " \
             "\"intermediate_size\": 128, \"vocab_size\": 256"

static void expect(const char *body, const char *const *features, size_t n) {
    char json[2048];
    snprintf(json, sizeof json, "{%s, " DIMS "}", body);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "t/config.json", &c));
    int rc = mla_gaps_check(&c, false);
    const char *msg = rc ? al_errmsg() : "";
    CHECK((rc != AL_OK) == (n > 0), "%s: refused %d, %zu features expected: %s", body, rc != AL_OK, n, msg);
    CHECK(mla_gaps_none(&c, false) == (n == 0), "%s: mla_gaps_none agrees", body);
    for (size_t i = 0; i < n; i++) {
        char want[96];
        snprintf(want, sizeof want, "%s (%s", features[i], "");
        CHECK(strstr(msg, want) != NULL, "%s: names '%s': %s", body, features[i], msg);
    }
    size_t rows = 0;                     /* every row that applies, with what an engine would need */
    for (size_t i = 0; mla_gaps_row(i); i++) {
        const MlaGap *g = mla_gaps_row(i);
        if (!g->has(&c)) continue;
        rows++;
        CHECK(strstr(msg, g->needs) != NULL, "%s: says what %s needs: %s", body, g->feature, msg);
    }
    CHECK(rows == n, "%s: %zu rows apply, %zu expected: %s", body, rows, n, msg);
    CHECK(!n || (strstr(msg, "(ppl, check)") && strlen(msg) < 880), "%s: the whole refusal fits the error buffer with "
          "`export to DIR: ` before it (%zu chars)", body, strlen(msg));
    al_err_clear();
}

/* Gemma 3 as convert mla exports it (qk-norm fold / drop: the norm made plain): its sliding layers turn at
 * rope_local_base_freq without rope_scaling, its full ones at rope_theta -- two RoPEs, named with the rest. */
static void gemma3(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse("{\"model_type\": \"gemma3_text\", \"head_dim\": 16, \"sliding_window\": 8, "
                                "\"query_pre_attn_scalar\": 16, \"rope_local_base_freq\": 10000, \"rope_theta\": 1000000, "
                                "\"sliding_window_pattern\": 2, " DIMS "}", "t/config.json", &c));
    CHECK_ERR(mla_gaps_check(&c, true), "per-layer RoPE base (DeepSeek-V3 has one rope_theta for every layer; needs "
              "Gemma 3's rope_local_base_freq (no rope_scaling) on the sliding layers)");
    const char *msg = al_errmsg();
    CHECK(strstr(msg, "sliding window (") && strstr(msg, "block norms (") && !strstr(msg, "q/k norm (") &&
          strstr(msg, "format attnlab` saves it"), "gemma3: the other gaps, the norm made plain: %s", msg);
    al_err_clear();
}

int main(void) {
    expect("\"model_type\": \"llama\"", NULL, 0);
    expect("\"model_type\": \"mixtral\", \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"sliding_window\": null",
           NULL, 0);
    expect("\"model_type\": \"phi3\", \"sliding_window\": null", NULL, 0);
    expect("\"model_type\": \"mistral\", \"sliding_window\": 4096", (const char *[]){"sliding window"}, 1);
    expect("\"model_type\": \"mixtral\", \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"sliding_window\": 8",
           (const char *[]){"sliding window"}, 1);
    expect("\"model_type\": \"qwen3\", \"head_dim\": 16", (const char *[]){"q/k norm"}, 1);
    expect("\"model_type\": \"gpt_neox\", \"rotary_pct\": 0.25", (const char *[]){"parallel residual", "LayerNorm"}, 2);
    expect("\"model_type\": \"olmo2\"", (const char *[]){"q/k norm", "block norms"}, 2);
    expect("\"model_type\": \"gemma2\", \"head_dim\": 16, \"sliding_window\": 8, \"query_pre_attn_scalar\": 16",
           (const char *[]){"sliding window", "block norms", "LayerNorm", "embedding scale", "attention soft-cap",
                            "final soft-cap"}, 6);
    expect("\"model_type\": \"gpt_oss\", \"head_dim\": 16, \"sliding_window\": 8, \"num_local_experts\": 4, "
           "\"num_experts_per_tok\": 2, \"layer_types\": [\"sliding_attention\", \"full_attention\", "
           "\"sliding_attention\", \"full_attention\"]",
           (const char *[]){"sliding window", "attention sinks", "MoE router"}, 3);
    expect("\"model_type\": \"glm4_moe\", \"n_routed_experts\": 4, \"num_experts_per_tok\": 2, \"first_k_dense_replace\": 1, "
           "\"moe_intermediate_size\": 32", (const char *[]){"MoE router"}, 1);
    gemma3();
    /* GPT-2: attention without RoPE (a conversion with RoPE dims 0 has no stock form) */
    expect("\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_head\": 4, \"n_layer\": 4, \"n_positions\": 64",
           (const char *[]){"no RoPE", "LayerNorm"}, 2);
    return check_done();
}
