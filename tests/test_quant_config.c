/* test_quant_config.c -- the quantization config read once (core/io/quant_config.h):
 *  - real quantization_config blocks as their publishers ship them (Kimi-K2-Thinking's pack-quantized
 *    INT4, RedHatAI's FP8-dynamic and W4A16, Qwen3-FP8, DeepSeek-V3.2's ue8m0, MiniMax-M2, gpt-oss's
 *    mxfp4) and ModelOpt's three places (config.json with quant_method "modelopt", a bare config with
 *    quant_algo and no quant_method, hf_quant_config.json's "quantization"): the method, the scheme,
 *    the list key, `where`, and the encoding expected of named modules;
 *  - the list entries' rules: "re:" regexes matched at the start (with Python's \d), globs over a
 *    dotted prefix, names, parts of names;
 *  - configs attnlab cannot follow, refused naming the key: a list that is not strings, a regex that
 *    does not compile, weight_block_size [64, 64], fmt e5m2, group_size 32 for NVFP4;
 *  - quant_check_store on hand-made tensors: an ignored module stored in FP8, a BF16 weight carrying a
 *    weight_scale, F8_E4M3 codes without their scales, FP8 where the config says NVFP4, a ue8m0 scale
 *    that is not a power of two (0.3) beside one that is: errors naming the tensor; a quantized
 *    lm_head is accepted. */
#include "check.h"
#include "quant_config.h"
#include "safetensors.h"

#include <cjson/cJSON.h>

static const char *tmp;

static const char KIMI_K2_THINKING[] =
    "{\"quantization_config\": {\"config_groups\": {\"group_0\": {\"input_activations\": null, \"output_activations\": null,"
    " \"targets\": [\"Linear\"], \"weights\": {\"actorder\": null, \"block_structure\": null, \"dynamic\": false,"
    " \"group_size\": 32, \"num_bits\": 4, \"observer\": \"minmax\", \"observer_kwargs\": {}, \"strategy\": \"group\","
    " \"symmetric\": true, \"type\": \"int\"}}}, \"format\": \"pack-quantized\", \"ignore\": [\"lm_head\","
    " \"re:.*self_attn.*\", \"re:.*shared_experts.*\", \"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\"],"
    " \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\"}}";
static const char REDHAT_FP8_DYNAMIC[] =
    "{\"quantization_config\": {\"config_groups\": {\"group_0\": {\"input_activations\": {\"dynamic\": true,"
    " \"num_bits\": 8, \"strategy\": \"token\", \"symmetric\": true, \"type\": \"float\"}, \"targets\": [\"Linear\"],"
    " \"weights\": {\"dynamic\": false, \"num_bits\": 8, \"observer\": \"minmax\", \"strategy\": \"channel\","
    " \"symmetric\": true, \"type\": \"float\"}}}, \"format\": \"float-quantized\", \"ignore\": [\"lm_head\"],"
    " \"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\"}}";
static const char REDHAT_W4A16[] =
    "{\"quantization_config\": {\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"actorder\":"
    " \"weight\", \"dynamic\": false, \"group_size\": 128, \"num_bits\": 4, \"observer\": \"minmax\", \"strategy\":"
    " \"group\", \"symmetric\": true, \"type\": \"int\"}}}, \"format\": \"pack-quantized\", \"ignore\": [\"lm_head\"],"
    " \"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\"}}";
static const char QWEN3_FP8[] =
    "{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\","
    " \"weight_block_size\": [128, 128]}}";
static const char DEEPSEEK_V32[] =
    "{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\","
    " \"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}}";
static const char MINIMAX_M2[] =
    "{\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"float8_e4m3fn\", \"quant_method\": \"fp8\","
    " \"weight_block_size\": [128, 128], \"modules_to_not_convert\": [\"gate\", \"e_score_correction_bias\", \"lm_head\"]}}";
static const char GPT_OSS[] =
    "{\"quantization_config\": {\"modules_to_not_convert\": [\"model.layers.*.self_attn\", \"model.layers.*.mlp.router\","
    " \"model.embed_tokens\", \"lm_head\"], \"quant_method\": \"mxfp4\"}}";
static const char MODELOPT_CONFIG[] =
    "{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": 16,"
    " \"kv_cache_quant_algo\": null, \"exclude_modules\": [\"lm_head\", \"model.layers.0.mlp*\"]}}";
static const char MODELOPT_BARE[] =
    "{\"quantization_config\": {\"producer\": {\"name\": \"modelopt\", \"version\": \"0.29.0\"}, \"quant_algo\": \"NVFP4\","
    " \"kv_cache_quant_algo\": null, \"group_size\": 16, \"exclude_modules\": [\"lm_head\"]}}";
static const char HF_QUANT_CONFIG[] =
    "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.27.1\"}, \"quantization\": {\"quant_algo\": \"NVFP4\","
    " \"kv_cache_quant_algo\": null, \"group_size\": 16, \"exclude_modules\": [\"lm_head\"]}}";

/* Reads text (config.json) with dir for hf_quant_config.json; the rc. */
static int read_text(const char *text, const char *dir, QuantConfig *q) {
    cJSON *t = cJSON_Parse(text);
    if (!t) { fprintf(stderr, "bad test JSON\n"); exit(1); }
    int rc = quant_config_read(t, dir, q);
    cJSON_Delete(t);
    return rc;
}

static quant_enc want(const QuantConfig *q, const char *mod) { return quant_expected(q, mod, NULL, 0); }

static void test_compressed_tensors(void) {
    QuantConfig q;
    CHECK_OK(read_text(KIMI_K2_THINKING, NULL, &q));
    CHECK(!strcmp(q.method, "compressed-tensors") && !strcmp(q.format, "pack-quantized") && q.ngroups == 1, "Kimi: %s %s",
          q.method, q.format);
    CHECK(q.ngroups == 1 && q.groups[0].enc == QENC_INT4 && q.groups[0].group_size == 32, "Kimi: INT4 per 32");
    CHECK(q.nignore == 4 && !strcmp(q.ignore_key, "ignore"), "Kimi: 4 ignore entries under 'ignore'");
    CHECK(want(&q, "model.layers.5.mlp.experts.17.gate_proj") == QENC_INT4, "Kimi: routed experts INT4");
    CHECK(want(&q, "model.layers.5.self_attn.kv_b_proj") == QENC_NONE, "Kimi: attention left out (re:.*self_attn.*)");
    CHECK(want(&q, "model.layers.5.mlp.shared_experts.down_proj") == QENC_NONE, "Kimi: shared experts left out");
    CHECK(want(&q, "model.layers.0.mlp.down_proj") == QENC_NONE, "Kimi: the dense layer's MLP left out");
    CHECK(want(&q, "lm_head") == QENC_NONE, "Kimi: lm_head left out");
    char why[200];
    quant_expected(&q, "model.layers.5.self_attn.q_a_proj", why, sizeof why);
    CHECK(strstr(why, "quantization_config.ignore entry 're:.*self_attn.*'") != NULL, "why: %s", why);
    quant_expected(&q, "model.layers.5.mlp.experts.1.up_proj", why, sizeof why);
    CHECK(!strcmp(why, "quantization_config.config_groups.group_0"), "why: %s", why);
    char d[400];
    quant_describe(&q, d, sizeof d);
    CHECK(strstr(d, "compressed-tensors pack-quantized, group_0: pack-quantized INT4 (config.json quantization_config."
                    "config_groups), ignore: 4 entries") != NULL, "describe: %s", d);
    quant_config_free(&q);

    CHECK_OK(read_text(REDHAT_FP8_DYNAMIC, NULL, &q));
    CHECK(q.ngroups == 1 && q.groups[0].enc == QENC_FP8_SCALE && !strcmp(q.groups[0].strategy, "channel"), "FP8-dynamic");
    CHECK(want(&q, "model.layers.3.self_attn.o_proj") == QENC_FP8_SCALE && want(&q, "lm_head") == QENC_NONE,
          "FP8-dynamic: projections FP8, lm_head not");
    quant_config_free(&q);
    CHECK_OK(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", "
                       "\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": "
                       "\"float\", \"strategy\": \"block\", \"block_structure\": [128, 128]}}}}}", NULL, &q));
    CHECK(q.ngroups == 1 && q.groups[0].enc == QENC_FP8_SCALE, "FP8_BLOCK: weight_scale (a block grid)");
    quant_config_free(&q);
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": "
                        "{\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", \"strategy\": "
                        "\"block\", \"block_structure\": [64, 64]}}}}}", NULL, &q),
              "config_groups.g.weights.block_structure should be [128, 128]");
    CHECK_OK(read_text(REDHAT_W4A16, NULL, &q));
    CHECK(q.ngroups == 1 && q.groups[0].enc == QENC_INT4 && q.groups[0].group_size == 128, "W4A16: INT4 per 128");
    quant_config_free(&q);
}

static void test_fp8_and_mxfp4(void) {
    QuantConfig q;
    CHECK_OK(read_text(QWEN3_FP8, NULL, &q));
    CHECK(q.enc == QENC_FP8_BLOCK && q.block[0] == 128 && !strcmp(q.activation_scheme, "dynamic"), "Qwen3-FP8");
    CHECK(want(&q, "model.layers.0.self_attn.q_proj") == QENC_FP8_BLOCK, "Qwen3-FP8: q_proj block-scaled");
    CHECK(want(&q, "lm_head") == QENC_UNKNOWN && want(&q, "model.layers.0.mlp.gate") == QENC_UNKNOWN,
          "fp8: lm_head (transformers' default) and the router not expected quantized");
    quant_config_free(&q);
    CHECK_OK(read_text(DEEPSEEK_V32, NULL, &q));
    CHECK(!strcmp(q.scale_fmt, "ue8m0") && q.enc == QENC_FP8_BLOCK, "V3.2: scale_fmt ue8m0");
    quant_config_free(&q);
    CHECK_OK(read_text(MINIMAX_M2, NULL, &q));
    CHECK(!strcmp(q.fmt, "float8_e4m3fn") && !strcmp(q.ignore_key, "modules_to_not_convert") && q.nignore == 3, "MiniMax");
    CHECK(want(&q, "model.layers.2.block_sparse_moe.gate") == QENC_NONE, "MiniMax: the router listed ('gate')");
    CHECK(want(&q, "model.layers.2.self_attn.k_proj") == QENC_FP8_BLOCK, "MiniMax: k_proj FP8");
    quant_config_free(&q);
    CHECK_OK(read_text(GPT_OSS, NULL, &q));
    CHECK(q.enc == QENC_MXFP4 && want(&q, "model.layers.7.mlp.experts.gate_up_proj") == QENC_MXFP4, "gpt-oss experts");
    char why[200];
    CHECK(quant_expected(&q, "model.layers.7.self_attn.q_proj", why, sizeof why) == QENC_NONE &&
          strstr(why, "modules_to_not_convert entry 'model.layers.*.self_attn'"), "gpt-oss attention: %s", why);
    quant_config_free(&q);
}

static void test_modelopt(void) {
    QuantConfig q;
    CHECK_OK(read_text(MODELOPT_CONFIG, NULL, &q));
    CHECK(q.enc == QENC_NVFP4 && !strcmp(q.where, "config.json quantization_config.quant_method"), "modelopt: %s", q.where);
    CHECK(want(&q, "model.layers.0.mlp.up_proj") == QENC_NONE && want(&q, "model.layers.1.mlp.up_proj") == QENC_NVFP4,
          "exclude_modules glob 'model.layers.0.mlp*'");
    CHECK(want(&q, "lm_head") == QENC_NONE, "modelopt: lm_head excluded");
    quant_config_free(&q);
    CHECK_OK(read_text(MODELOPT_BARE, NULL, &q));
    CHECK(q.enc == QENC_NVFP4 && !strcmp(q.method, "modelopt") && !strcmp(q.where, "config.json quantization_config.quant_algo"),
          "bare quant_algo: %s / %s", q.method, q.where);
    quant_config_free(&q);
    char p[4200];
    snprintf(p, sizeof p, "%s/hf_quant_config.json", tmp);
    FILE *f = fopen(p, "w");
    fputs(HF_QUANT_CONFIG, f);
    fclose(f);
    CHECK_OK(read_text("{\"model_type\": \"llama\"}", tmp, &q));
    CHECK(q.present && q.enc == QENC_NVFP4 && !strcmp(q.where, "hf_quant_config.json quantization.quant_algo") &&
          !strcmp(q.ignore_key, "exclude_modules"), "hf_quant_config.json: %s", q.where);
    CHECK(want(&q, "model.layers.4.self_attn.v_proj") == QENC_NVFP4, "hf_quant_config: v_proj NVFP4");
    quant_config_free(&q);
    CHECK_OK(read_text("{\"model_type\": \"llama\"}", NULL, &q));
    CHECK(!q.present && want(&q, "model.layers.0.self_attn.q_proj") == QENC_UNKNOWN, "no config: no expectation");
    remove(p);
}

static void test_entries(void) {
    CHECK(quant_entry_names("re:.*mlp\\.(gate|up)_proj", "model.layers.0.mlp.gate_proj"), "regex");
    CHECK(!quant_entry_names("re:mlp", "model.mlp.up_proj"), "a regex is matched at the start (re.match)");
    CHECK(quant_entry_names("re:model\\.layers\\.\\d+\\.mlp", "model.layers.12.mlp.up_proj"), "Python's \\d");
    CHECK(!quant_entry_names("re:model\\.layers\\.\\d+\\.mlp", "model.layers.x.mlp.up_proj"), "\\d is a digit");
    CHECK(quant_entry_names("re:.*?self_attn", "model.layers.0.self_attn.q_proj"), "a lazy quantifier read as greedy");
    CHECK(quant_entry_names("re:model\\.layers\\.[0-9]{1,2}\\.mlp", "model.layers.12.mlp.up_proj"), "a repeat count");
    CHECK(quant_entry_names("model.layers.*.self_attn", "model.layers.10.self_attn.q_proj"), "glob over a dotted prefix");
    CHECK(!quant_entry_names("model.layers.1?.self_attn", "model.layers.1.self_attn.q_proj"), "'?' is one character");
    CHECK(quant_entry_names("lm_head", "lm_head") && quant_entry_names("layers.1", "model.layers.1.mlp"), "names, parts");
}

static void test_hostile_configs(void) {
    QuantConfig q;
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"fp8\", \"ignore\": \"lm_head\"}}", NULL, &q),
              "quantization_config.ignore should be a list of module names");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": [\"lm_head\", 5]}}",
                        NULL, &q), "quantization_config.ignore entry 1 is not a string");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": [\"re:(a\"]}}",
                        NULL, &q), "quantization_config.ignore entry 're:(a' is not a regular expression");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": [\"re:a++++\"]}}",
                        NULL, &q), "entry 're:a++++' is not a regular expression");     /* glibc's regcomp blew up (fuzz) */
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"ignore\": [\"re:a{1,999}\"]}}",
                        NULL, &q), "entry 're:a{1,999}' is not a regular expression");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": "
                        "{\"g\\n1\": 3}}}", NULL, &q), "config_groups.g?1 should be an object");   /* one line (fuzz) */
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [64, 64]}}", NULL, &q),
              "quantization_config.weight_block_size is [64, 64]: attnlab reads FP8 block scales of [128, 128]");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128]}}", NULL, &q),
              "weight_block_size should be [rows, cols]");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": "
                        "[128, 128]}}", NULL, &q), "quantization_config.fmt is \"e5m2\"");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": "
                        "32}}", NULL, &q), "quantization_config.group_size is 32");
    CHECK_ERR(read_text("{\"quantization_config\": \"fp8\"}", NULL, &q), "quantization_config should be an object");
    CHECK_ERR(read_text("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"g\": 3}}}",
                        NULL, &q), "config_groups.g should be an object");
}

/* ---------------------------------------------------------------- against tensors */

/* l.q_proj.weight (2 x 4) per `kind`: 0 F8 + weight_scale_inv 0.25, 1 BF16 + weight_scale, 2 F8 without scales,
 * 3 F8 + weight_scale_inv 0.3, 4 F8 + weight_scale; lm_head.weight F8 with a per-tensor weight_scale. */
static int write_dir(const char *dir, int kind, const char *config) {
    char p[4400];
    snprintf(p, sizeof p, "mkdir -p '%s'", dir);
    if (system(p)) return AL_ERR;
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return AL_ERR;
    fputs(config, f);
    fclose(f);
    st_writer *w = st_writer_new();
    uint8_t codes[8] = {0x38, 0x40, 0x30, 0xb8, 0x38, 0x38, 0x38, 0x38};
    uint16_t bf[8] = {0};
    float s = kind == 3 ? 0.3f : 0.25f, one = 1;
    size_t shape[2] = {2, 4}, one1[2] = {1, 1};
    int rc = kind == 1 ? st_writer_add(w, "l.q_proj.weight", DT_BF16, 2, shape, bf, 16) : st_writer_add(w, "l.q_proj.weight", DT_F8_E4M3, 2, shape, codes, 8);
    if (rc == AL_OK && kind != 2)
        rc = st_writer_add(w, kind == 1 || kind == 4 ? "l.q_proj.weight_scale" : "l.q_proj.weight_scale_inv", DT_F32, 2, one1, &s, 4);
    if (rc == AL_OK) rc = st_writer_add(w, "lm_head.weight", DT_F8_E4M3, 2, shape, codes, 8);
    if (rc == AL_OK) rc = st_writer_add(w, "lm_head.weight_scale", DT_F32, 0, NULL, &one, 4);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (rc == AL_OK) rc = st_writer_write(w, p);
    st_writer_free(w);
    return rc;
}

/* The check's rc for kind under config text. */
static int check_dir(int kind, const char *config) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/k%d", tmp, kind);
    if (write_dir(dir, kind, config) != AL_OK) return AL_ERR;
    Store *s = NULL;
    QuantConfig q;
    int rc = store_open(dir, &s);
    if (rc == AL_OK) rc = read_text(config, dir, &q);
    if (rc == AL_OK) { rc = quant_check_store(&q, s); quant_config_free(&q); }
    store_free(s);
    snprintf(dir, sizeof dir, "rm -rf '%s/k%d'", tmp, kind);
    if (system(dir)) return AL_ERR;
    return rc;
}

static void test_check_store(void) {
    static const char fp8[] = "{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}}",
                      ue8m0[] = "{\"quantization_config\": {\"quant_method\": \"fp8\", \"scale_fmt\": \"ue8m0\", "
                                "\"weight_block_size\": [128, 128]}}",
                      listed[] = "{\"quantization_config\": {\"quant_method\": \"fp8\", \"modules_to_not_convert\": [\"l\"], "
                                 "\"weight_block_size\": [128, 128]}}",
                      nvfp4[] = "{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"}}",
                      ct_fp8[] = "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": "
                                 "{\"group_0\": {\"targets\": [\"re:^l\\\\.q_proj$\", \"Linear\"], \"weights\": {\"num_bits\": 8, "
                                 "\"type\": \"float\", \"strategy\": \"tensor\"}}}}}";
    CHECK_OK(check_dir(0, fp8));
    CHECK_OK(check_dir(0, ue8m0));
    CHECK_ERR(check_dir(3, ue8m0), "'l.q_proj.weight_scale_inv' block [0, 0] is 0.3, not a power of two, but "
                                   "quantization_config.scale_fmt is \"ue8m0\"");
    CHECK_OK(check_dir(3, fp8));
    CHECK_ERR(check_dir(0, listed), "'l.q_proj' is stored as FP8 with block scales (weight_scale_inv) but "
                                    "quantization_config.modules_to_not_convert entry 'l' lists it as not quantized");
    CHECK_ERR(check_dir(1, fp8), "'l.q_proj.weight' is not quantized but carries 'l.q_proj.weight_scale'");
    CHECK_ERR(check_dir(2, fp8), "'l.q_proj.weight' is F8_E4M3 but its scales 'l.q_proj.weight_scale_inv' are missing");
    CHECK_ERR(check_dir(0, nvfp4), "'l.q_proj' is stored as FP8 with block scales (weight_scale_inv) but config.json "
                                   "quantization_config.quant_method says NVFP4 (ModelOpt)");
    CHECK_ERR(check_dir(0, ct_fp8), "'l.q_proj' is stored as FP8 with block scales (weight_scale_inv) but "
                                    "quantization_config.config_groups.group_0 says FP8 with per-tensor");
    CHECK_OK(check_dir(4, ct_fp8));          /* lm_head quantized too (not in ignore): accepted */
}

int main(void) {
    tmp = test_tmpdir();
    test_compressed_tensors();
    test_fp8_and_mxfp4();
    test_modelopt();
    test_entries();
    test_hostile_configs();
    test_check_store();
    return check_done();
}
