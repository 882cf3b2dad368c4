/* test_mla_quant.c -- core/export/mla_quant.c: a TransMLA export's quantization_config. The source's
 * block is kept in its form (every other key as it was); the modules written unquantized are added
 * to modules_to_not_convert (created when absent, unless the source lists its own as ignore /
 * exclude_modules) and to ignore / ignored_layers / exclude_modules where the source has a non-empty one, unless an entry names them already (a regex, a prefix); an
 * entry that would name a module copied quantized under the export's names (Mixtral's "gate", meant
 * for block_sparse_moe.gate, is part of DeepSeek-V3's mlp.experts.E.gate_proj) is dropped. */
#include "check.h"
#include "mla_quant.h"

#include <cjson/cJSON.h>
#include <string.h>

static char *PLAIN[] = {"lm_head", "model.layers.0.mlp.gate", "model.layers.0.self_attn.kv_b_proj",
                        "model.layers.0.self_attn.q_proj"};
static char *QUANT[] = {"model.layers.0.mlp.experts.0.gate_proj", "model.layers.0.mlp.experts.0.up_proj"};
static const MlaQuantMods MODS = {PLAIN, 4, QUANT, 2};

/* The export config's quantization_config made from source config `src`. */
static cJSON *exported(const char *src) {
    cJSON *s = cJSON_Parse(src), *o = cJSON_CreateObject();
    CHECK_OK(mla_quant_config(s, &MODS, o));
    cJSON_Delete(s);
    return o;
}

static int count(const cJSON *a) { return cJSON_GetArraySize(a); }
static const char *at(const cJSON *a, int i) { return cJSON_GetStringValue(cJSON_GetArrayItem(a, i)); }

static void test_fp8_created(void) {
    cJSON *o = exported("{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}}");
    const cJSON *q = cJSON_GetObjectItem(o, "quantization_config"), *a = cJSON_GetObjectItem(q, "modules_to_not_convert");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(q, "quant_method")), "fp8"), "quant_method kept");
    CHECK(count(cJSON_GetObjectItem(q, "weight_block_size")) == 2, "weight_block_size kept");
    CHECK(count(a) == 4 && !strcmp(at(a, 0), "lm_head") && !strcmp(at(a, 3), "model.layers.0.self_attn.q_proj"),
          "modules_to_not_convert: the 4 plain modules (%d)", count(a));
    CHECK(!cJSON_GetObjectItem(q, "ignore"), "no ignore list invented");
    cJSON_Delete(o);
}

static void test_ct_kept(void) {
    cJSON *o = exported("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
                        "\"float-quantized\", \"ignore\": [\"lm_head\", \"re:.*self_attn\\\\.q_proj$\"]}}");
    const cJSON *q = cJSON_GetObjectItem(o, "quantization_config"), *a = cJSON_GetObjectItem(q, "ignore");
    CHECK(count(a) == 4 && !strcmp(at(a, 0), "lm_head") && !strcmp(at(a, 2), "model.layers.0.mlp.gate") &&
          !strcmp(at(a, 3), "model.layers.0.self_attn.kv_b_proj"),
          "ignore: the source's 2 entries, then the 2 plain modules they do not name (%d)", count(a));
    CHECK(!cJSON_GetObjectItem(q, "modules_to_not_convert"), "no modules_to_not_convert beside the source's ignore");
    cJSON_Delete(o);
}

static void test_stale_dropped(void) {
    cJSON *o = exported("{\"quantization_config\": {\"quant_method\": \"fp8\", \"modules_to_not_convert\": "
                        "[\"gate\", \"lm_head\"]}}");
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "quantization_config"), "modules_to_not_convert");
    bool gate = false;
    for (int i = 0; i < count(a); i++) gate |= !strcmp(at(a, i), "gate");
    CHECK(!gate, "\"gate\" (part of the quantized experts' gate_proj) dropped");
    CHECK(count(a) == 4 && !strcmp(at(a, 0), "lm_head") && !strcmp(at(a, 1), "model.layers.0.mlp.gate"),
          "lm_head kept, the router listed by its export name (%d)", count(a));
    cJSON_Delete(o);
}

static void test_none(void) {
    cJSON *o = exported("{\"model_type\": \"llama\"}");
    CHECK(!cJSON_GetObjectItem(o, "quantization_config"), "no block for an unquantized source");
    cJSON_Delete(o);
    cJSON *s = cJSON_Parse("{\"quantization_config\": {\"quant_method\": \"fp8\"}}");
    o = cJSON_CreateObject();
    MlaQuantMods none = MODS;
    none.nquant = 0;
    CHECK_OK(mla_quant_config(s, &none, o));
    CHECK(!cJSON_GetObjectItem(o, "quantization_config"), "no block when only the attention was quantized");
    cJSON_Delete(s);
    cJSON_Delete(o);
}

int main(void) {
    test_fp8_created();
    test_ct_kept();
    test_stale_dropped();
    test_none();
    return check_done();
}
