/* test_dsv4.c -- core/model/dsv4.c: DeepSeek-V4-Flash's compress_ratios read layer by layer (window / CSA / HCA,
 * the MTP entry past num_hidden_layers), the other V4 keys, the layer lists dsv4_layer_list writes (a range, a
 * range with a step, one with a last extra layer, a list cut with "..."), and model_config_parse refusing the
 * model with the description. */
#include "check.h"
#include "config.h"
#include "dsv4.h"

#include <cjson/cJSON.h>

/* DeepSeek-V4-Flash's keys (the dims and lists as released). */
static const char *flash_json(void) {
    static char buf[4096];
    char ratios[512] = "0, 0";
    for (int i = 0; i < 20; i++) strcat(ratios, ", 4, 128");
    strcat(ratios, ", 4, 0");
    snprintf(buf, sizeof buf, "{\"model_type\": \"deepseek_v4\", \"architectures\": [\"DeepseekV4ForCausalLM\"], "
             "\"hidden_size\": 4096, \"num_hidden_layers\": 43, \"num_attention_heads\": 64, \"num_key_value_heads\": 1, "
             "\"head_dim\": 512, \"qk_rope_head_dim\": 64, \"q_lora_rank\": 1024, \"o_lora_rank\": 1024, \"o_groups\": 8, "
             "\"hc_mult\": 4, \"hc_sinkhorn_iters\": 20, \"num_hash_layers\": 3, \"sliding_window\": 128, "
             "\"index_n_heads\": 64, \"index_head_dim\": 128, \"index_topk\": 512, \"n_routed_experts\": 256, "
             "\"num_experts_per_tok\": 6, \"num_nextn_predict_layers\": 1, \"compress_ratios\": [%s]}", ratios);
    return buf;
}

static void flash_layers(void) {
    cJSON *root = cJSON_Parse(flash_json());
    Dsv4Spec s;
    CHECK_OK(dsv4_parse(root, "flash", &s));
    CHECK(s.layers == 43 && s.n_ratios == 44 && s.ratio[43] == 0, "layers %d, ratios %d", s.layers, s.n_ratios);
    CHECK(s.heads == 64 && s.kv_heads == 1 && s.head_dim == 512 && s.rope_dim == 64, "heads %d kv %d hd %d rope %d",
          s.heads, s.kv_heads, s.head_dim, s.rope_dim);
    CHECK(s.q_lora == 1024 && s.o_lora == 1024 && s.o_groups == 8 && s.hc_mult == 4 && s.hash_layers == 3,
          "q_lora %d o_lora %d groups %d hc %d hash %d", s.q_lora, s.o_lora, s.o_groups, s.hc_mult, s.hash_layers);
    CHECK(s.window == 128 && s.index_heads == 64 && s.index_head_dim == 128 && s.index_topk == 512, "indexer");
    int n[3] = {0};
    for (int L = 0; L < 43; L++) {
        const char *k = dsv4_layer_kind(&s, L);
        const char *want = L < 2 ? "window" : L % 2 ? "HCA" : "CSA";
        CHECK(!strcmp(k, want), "layer %d is %s, not %s", L, k, want);
        n[!strcmp(k, "window") ? 0 : !strcmp(k, "CSA") ? 1 : 2]++;
    }
    CHECK(n[0] == 2 && n[1] == 21 && n[2] == 20, "window %d CSA %d HCA %d", n[0], n[1], n[2]);
    char b[160];
    CHECK(dsv4_layers_of(&s, "CSA", b, sizeof b) == 21 && !strcmp(b, "2-42 every 2"), "CSA [%s]", b);
    CHECK(dsv4_layers_of(&s, "HCA", b, sizeof b) == 20 && !strcmp(b, "3-41 every 2"), "HCA [%s]", b);
    CHECK(dsv4_layers_of(&s, "window", b, sizeof b) == 2 && !strcmp(b, "0, 1"), "window [%s]", b);
    cJSON_Delete(root);
}

static void layer_lists(void) {
    char b[64];
    int run[] = {0, 1, 2, 3}, step[] = {3, 7, 11, 15}, tail[] = {3, 7, 11, 15, 16}, odd[] = {0, 5, 9, 20, 21, 40};
    dsv4_layer_list(run, 4, b, sizeof b);
    CHECK(!strcmp(b, "0-3"), "[%s]", b);
    dsv4_layer_list(step, 4, b, sizeof b);
    CHECK(!strcmp(b, "3-15 every 4"), "[%s]", b);
    dsv4_layer_list(tail, 5, b, sizeof b);
    CHECK(!strcmp(b, "3-15 every 4, 16"), "[%s]", b);
    dsv4_layer_list(odd, 6, b, sizeof b);
    CHECK(!strcmp(b, "0, 5, 9, 20, 21, 40"), "[%s]", b);
    dsv4_layer_list(odd, 6, b, 16);
    CHECK(!strcmp(b, "0, 5, 9, ..."), "cut [%s]", b);
    dsv4_layer_list(odd, 0, b, sizeof b);
    CHECK(!strcmp(b, ""), "none [%s]", b);
}

static void load_refused(void) {
    ModelConfig c;
    CHECK_ERR(model_config_parse(flash_json(), "flash", &c), "window 128 only: 2 layers (0, 1); CSA");
    CHECK_ERR(model_config_parse(flash_json(), "flash", &c), "hyper-connections x4, 3 hash-routed layers. Not built");
}

int main(void) {
    flash_layers();
    layer_lists();
    load_refused();
    return check_done();
}
