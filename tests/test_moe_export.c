/* test_moe_export.c -- core/export/moe_export.c and analyses.c's analysis_moe_exportable on the
 * configs of the MoE families: Mixtral's experts renamed into DeepSeek-V3's names (every part
 * suffix kept, both ways), Qwen3-MoE's already DeepSeek's; the DeepSeek-V3 MoE keys written
 * (softmax, greedy, one group, norm_topk_prob as the source, no shared experts, dense layers first
 * as first_k_dense_replace); what has no DeepSeek form refused by name (dense layers after MoE
 * layers, decoder_sparse_step 2, DeepSeek-V3's own router, gpt-oss's fused experts). */
#include "check.h"
#include "analyses.h"
#include "moe_export.h"

#include <cjson/cJSON.h>

#define DIMS "\"hidden_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 4, " \
             "\"intermediate_size\": 128, \"vocab_size\": 256, \"num_experts_per_tok\": 2"

static ModelConfig parse(const char *body) {
    char json[2048];
    snprintf(json, sizeof json, "{%s, " DIMS "}", body);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "t/config.json", &c));
    return c;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_mixtral(void) {
    ModelConfig c = parse("\"model_type\": \"mixtral\", \"num_local_experts\": 4");
    MoeNames *m = moe_names(&c);
    CHECK(m != NULL, "mixtral names");
    char buf[320];
    const char *to = moe_rename(m, "model.layers.2.block_sparse_moe.experts.3.w1.weight", buf, sizeof buf);
    CHECK(!strcmp(to, "model.layers.2.mlp.experts.3.gate_proj.weight"), "w1 -> gate_proj: %s", to);
    to = moe_rename(m, "model.layers.0.block_sparse_moe.experts.1.w2.weight_scale_inv", buf, sizeof buf);
    CHECK(!strcmp(to, "model.layers.0.mlp.experts.1.down_proj.weight_scale_inv"), "w2's scale -> down_proj's: %s", to);
    to = moe_rename(m, "model.layers.3.block_sparse_moe.gate.weight", buf, sizeof buf);
    CHECK(!strcmp(to, "model.layers.3.mlp.gate.weight"), "router: %s", to);
    const char *same = "model.layers.1.self_attn.q_proj.weight";
    CHECK(moe_rename(m, same, buf, sizeof buf) == same, "attention tensors keep their names");
    to = moe_source_name(m, "model.layers.1.mlp.experts.2.up_proj.weight", buf, sizeof buf);
    CHECK(!strcmp(to, "model.layers.1.block_sparse_moe.experts.2.w3.weight"), "back: %s", to);
    moe_names_free(m);
    cJSON *o = cJSON_CreateObject();
    CHECK_OK(moe_config(&c, o));
    CHECK(num(o, "n_routed_experts") == 4 && num(o, "num_experts_per_tok") == 2 && num(o, "first_k_dense_replace") == 0 &&
          num(o, "moe_intermediate_size") == 128 && num(o, "n_group") == 1 && num(o, "routed_scaling_factor") == 1,
          "mixtral's MoE keys");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "norm_topk_prob")), "Mixtral always renormalises");
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "n_shared_experts")), "no shared experts: null");
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(o, "scoring_func"), *tm = cJSON_GetObjectItemCaseSensitive(o, "topk_method");
    CHECK(cJSON_IsString(sf) && !strcmp(sf->valuestring, "softmax") && cJSON_IsString(tm) && !strcmp(tm->valuestring, "greedy"),
          "softmax, greedy");
    cJSON_Delete(o);
}

#define QWEN "\"model_type\": \"qwen3_moe\", \"num_experts\": 8, \"moe_intermediate_size\": 32, \"head_dim\": 16"

static void test_qwen3_moe(void) {
    ModelConfig c = parse(QWEN ", \"norm_topk_prob\": false, \"mlp_only_layers\": [0]");
    CHECK(analysis_moe_exportable(&c, NULL, 0), "qwen3_moe with its dense layer first");
    MoeNames *m = moe_names(&c);
    char buf[320];
    const char *n = "model.layers.1.mlp.experts.7.gate_proj.weight";
    CHECK(m && moe_rename(m, n, buf, sizeof buf) == n, "Qwen's expert names are DeepSeek's");
    moe_names_free(m);
    cJSON *o = cJSON_CreateObject();
    CHECK_OK(moe_config(&c, o));
    CHECK(num(o, "first_k_dense_replace") == 1 && num(o, "moe_intermediate_size") == 32 && num(o, "n_routed_experts") == 8,
          "dense layer 0 first, experts of moe_intermediate_size");
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "norm_topk_prob")), "norm_topk_prob false kept");
    cJSON_Delete(o);
    char why[512];
    ModelConfig late = parse(QWEN ", \"mlp_only_layers\": [2]");
    CHECK(!analysis_moe_exportable(&late, why, sizeof why) && strstr(why, "dense MLP layers come after MoE layers"),
          "a dense layer after MoE layers: %s", why);
    ModelConfig step = parse(QWEN ", \"decoder_sparse_step\": 2");
    CHECK(!analysis_moe_exportable(&step, why, sizeof why) && strstr(why, "dense MLP layers come after"), "sparse step 2: %s",
          why);
    o = cJSON_CreateObject();
    CHECK_ERR(moe_config(&late, o), "dense MLP layers come after");
    cJSON_Delete(o);
}

static void test_refused(void) {
    char why[512];
    ModelConfig glm = parse("\"model_type\": \"glm4_moe\", \"n_routed_experts\": 4, \"first_k_dense_replace\": 1, "
                            "\"moe_intermediate_size\": 32");
    CHECK(!analysis_moe_exportable(&glm, why, sizeof why) && strstr(why, "router is not softmax top-k"), "glm4_moe: %s", why);
    ModelConfig oss = parse("\"model_type\": \"gpt_oss\", \"num_local_experts\": 4, \"head_dim\": 16");
    CHECK(!analysis_moe_exportable(&oss, why, sizeof why) && strstr(why, "not one gate / up / down tensor per expert"),
          "gpt_oss: %s", why);
    ModelConfig llama = parse("\"model_type\": \"llama\"");
    CHECK(analysis_moe_exportable(&llama, NULL, 0), "a dense model");
}

int main(void) {
    test_mixtral();
    test_qwen3_moe();
    test_refused();
    return check_done();
}
