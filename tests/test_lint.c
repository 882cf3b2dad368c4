/* test_lint.c -- core/lint/lint.c on synthetic folders: the clean demo models (with tokenizer files
 * planted) have no errors and no warnings; each planted defect gives its finding, with the right
 * severity, targets and verdicts: no tokenizer, a wrong total_size, a missing shard, a tensor
 * missing from weight_map, a config/shape mismatch, deepseek_v3 without kv_a_layernorm and with
 * qk_latent_layernorm: false, an unknown tensor, no {"format": "pt"}, FP8 without a
 * quantization_config or without a block scale, torch_dtype against the weights, rope_interleave
 * / attention_bias / a llama3 rope_scaling on DeepSeek for vLLM and SGLang, deepseek_v3 keys left
 * to DeepSeek-V3's defaults, a tied head that differs, FlashMLA's shapes, a broken shard, no or
 * bad config.json, an unknown family, a config describing millions of tensors, a TPA export, a
 * .gguf file (a deepseek2 one without output.weight; a tied model's MLA export writes it), a missing path; every `synth family` checkpoint lints clean, and a planted defect per
 * layout is found (q/k norms, sandwich and post norms, fused qkv_proj / gate_up_proj, GPT-NeoX's
 * names, Mixtral / Qwen3-MoE / DeepSeek experts and routers); and damaged folders (random bytes
 * in config, index and shard header) give a report, never a crash. */
#include "check.h"
#include "gguf_convert.h"
#include "lint.h"
#include "mla_export.h"
#include "model.h"
#include "safetensors.h"
#include "synth.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <unistd.h>

static const char *tmp;

/* ---------------------------------------------------------------- folder helpers */

static char *pathf(const char *fmt, ...) {
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof buf[0], fmt, ap);
    va_end(ap);
    return b;
}

static void put(const char *dir, const char *name, const char *text) {
    FILE *f = fopen(pathf("%s/%s", dir, name), "w");
    if (f) { fputs(text, f); fclose(f); }
}

static void add_tokenizer(const char *dir) {
    put(dir, "tokenizer.json", "{}");
    put(dir, "tokenizer_config.json", "{}");
}

/* A demo model in tmp/name (f32 unless dt says otherwise), with tokenizer files when tok. */
static char *demo(const char *name, synth_kind kind, dt_type dt, int shards, bool tok) {
    char *dir = al_asprintf("%s/%s", tmp, name);
    SynthOptions o = {.kind = kind, .dtype = dt, .shards = shards, .seed = 7};
    CHECK_OK(synth_write(&o, dir));
    if (tok) add_tokenizer(dir);
    return dir;
}

/* Edits a JSON file in place: edit(root) changes the tree. */
static void edit_json(const char *path, void (*edit)(cJSON *root)) {
    FILE *f = fopen(path, "r");
    char buf[1 << 17];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    CHECK(root != NULL, "%s is not JSON", path);
    if (!root) return;
    edit(root);
    char *text = cJSON_Print(root);
    f = fopen(path, "w");
    if (f && text) fputs(text, f);
    if (f) fclose(f);
    free(text);
    cJSON_Delete(root);
}

/* Rewrites a safetensors file: every tensor but `drop` (a name prefix; NULL: none), plus an F32
 * tensor `extra` of shape [4] (NULL: none), with __metadata__ format `format` (NULL: none). */
static void rewrite_st(const char *path, const char *drop, const char *extra, const char *format) {
    st_file *f = NULL;
    CHECK_OK(st_open(path, &f));
    if (!f) return;
    st_writer *w = st_writer_new();
    for (size_t i = 0; i < st_count(f); i++) {
        const st_entry *e = st_entry_at(f, i);
        if (drop && !strncmp(e->name, drop, strlen(drop))) continue;
        CHECK_OK(st_writer_add(w, e->name, e->dtype, e->ndim, e->shape, st_data(f, e), e->end - e->begin));
    }
    float four[4] = {1, 2, 3, 4};
    size_t shape[1] = {4};
    if (extra) CHECK_OK(st_writer_add(w, extra, DT_F32, 1, shape, four, sizeof four));
    if (format) CHECK_OK(st_writer_meta(w, "format", format));
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);
    st_close(f);
}

/* ---------------------------------------------------------------- report helpers */

static LintReport *lint(const char *dir) {
    LintReport *r = NULL;
    CHECK_OK(lint_folder(dir, &r));
    return r;
}

/* The first finding of severity sev whose message holds needle (NULL when none). */
static const LintFinding *finding(const LintReport *r, lint_severity sev, const char *needle) {
    for (size_t i = 0; r && i < r->n; i++)
        if (r->f[i].sev == sev && strstr(r->f[i].msg, needle)) return &r->f[i];
    return NULL;
}

static void dump(const LintReport *r) {
    for (size_t i = 0; r && i < r->n; i++)
        fprintf(stderr, "  [%s %x/%x] %s\n", lint_severity_name(r->f[i].sev), r->f[i].targets, r->f[i].loads, r->f[i].msg);
}

#define EXPECT(r, sev, needle) do { \
    const LintFinding *f_ = finding((r), (sev), (needle)); \
    CHECK(f_ != NULL, "no %s finding with '%s'", lint_severity_name(sev), (needle)); \
    if (!f_) dump(r); } while (0)

/* Lints dir and expects one finding. */
#define LINT_EXPECT(dir, sev, needle) do { LintReport *r_ = lint(dir); EXPECT(r_, sev, needle); lint_report_free(r_); } while (0)

static void expect_verdicts(const LintReport *r, lint_verdict hf, lint_verdict vllm, lint_verdict sgl, lint_verdict cpp) {
    if (!r) return;
    const unsigned bits[4] = {LT_HF, LT_VLLM, LT_SGLANG, LT_LLAMACPP};
    const lint_verdict want[4] = {hf, vllm, sgl, cpp};
    for (int i = 0; i < 4; i++) {
        lint_verdict v = lint_verdict_of(r, bits[i]);
        CHECK(v == want[i], "%s: %s, want %s", lint_target_name(i), lint_verdict_name(v), lint_verdict_name(want[i]));
        if (v != want[i]) dump(r);
    }
}

/* ---------------------------------------------------------------- clean folders */

static void test_clean(void) {
    const struct { const char *name; synth_kind k; dt_type dt; int shards; const char *cls; } m[] = {
        {"llama", SYNTH_DEMO_LLAMA, DT_F32, 1, "LlamaForCausalLM"},
        {"llama_bf16_3", SYNTH_DEMO_LLAMA, DT_BF16, 3, "LlamaForCausalLM"},
        {"gpt2", SYNTH_DEMO_GPT2, DT_F32, 1, "GPT2LMHeadModel"},
        {"r1", SYNTH_DEMO_R1, DT_F8_E4M3, 3, "DeepseekV3ForCausalLM"},
    };
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
        char *dir = demo(m[i].name, m[i].k, m[i].dt, m[i].shards, true);
        LintReport *r = lint(dir);
        if (r) {
            CHECK(lint_count(r, LINT_ERROR) == 0 && lint_count(r, LINT_WARNING) == 0, "%s: %zu errors, %zu warnings",
                  m[i].name, lint_count(r, LINT_ERROR), lint_count(r, LINT_WARNING));
            if (lint_count(r, LINT_ERROR) + lint_count(r, LINT_WARNING)) dump(r);
            CHECK(!strcmp(r->hf_class, m[i].cls) && !strcmp(r->arch, m[i].cls), "%s: class %s", m[i].name, r->hf_class);
            CHECK(r->ntensors > 30 && r->nfiles == (size_t)m[i].shards, "%s: %zu tensors in %zu files", m[i].name,
                  r->ntensors, r->nfiles);
            expect_verdicts(r, LINT_LOADS, LINT_LOADS, LINT_LOADS, LINT_LOADS);
        }
        if (m[i].k == SYNTH_DEMO_R1) EXPECT(r, LINT_ADVISORY, "FlashMLA needs kv_lora_rank 512");
        lint_report_free(r);
        free(dir);
    }
}

/* ---------------------------------------------------------------- files */

static void test_no_tokenizer(void) {
    char *dir = demo("notok", SYNTH_DEMO_LLAMA, DT_F32, 1, false);
    LintReport *r = lint(dir);
    const LintFinding *w = finding(r, LINT_WARNING, "no tokenizer");
    CHECK(w && w->targets == (LT_HF | LT_VLLM | LT_SGLANG), "tokenizer warning targets");
    EXPECT(r, LINT_ERROR, "convert_hf_to_gguf.py writes the vocabulary");
    expect_verdicts(r, LINT_LOADS, LINT_LOADS_FLAGS, LINT_LOADS_FLAGS, LINT_FAILS);
    lint_report_free(r);
    unlink(pathf("%s/tokenizer.json", dir));
    put(dir, "tokenizer.model", "x");
    r = lint(dir);
    EXPECT(r, LINT_WARNING, "no tokenizer_config.json");
    CHECK(!finding(r, LINT_WARNING, "no tokenizer ("), "tokenizer.model counts as a tokenizer");
    lint_report_free(r);
    free(dir);
}

static void set_total_size(cJSON *root) {
    cJSON *m = cJSON_GetObjectItem(root, "metadata");
    cJSON_ReplaceItemInObject(m, "total_size", cJSON_CreateNumber(12345));
}

static void drop_one_from_map(cJSON *root) {
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "weight_map"), "model.norm.weight");
}

static void test_index(void) {
    char *dir = demo("idx", SYNTH_DEMO_R1, DT_F8_E4M3, 3, true);
    const char *index = pathf("%s/model.safetensors.index.json", dir);
    edit_json(index, set_total_size);
    LintReport *r = lint(dir);
    EXPECT(r, LINT_WARNING, "metadata.total_size is 12345 but the tensors hold");
    expect_verdicts(r, LINT_LOADS, LINT_LOADS, LINT_LOADS, LINT_LOADS);
    lint_report_free(r);

    put(dir, "stray.safetensors", "x");
    LINT_EXPECT(dir, LINT_ADVISORY, "stray.safetensors is not named by the index: loaders skip it");
    unlink(pathf("%s/stray.safetensors", dir));

    edit_json(index, drop_one_from_map);
    LINT_EXPECT(dir, LINT_WARNING, "weight_map does not list 1 tensor the shards hold (first: model.norm.weight)");

    unlink(pathf("%s/model-00002-of-00003.safetensors", dir));
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "the index names shard model-00002-of-00003.safetensors but the folder has no such file");
    expect_verdicts(r, LINT_FAILS, LINT_FAILS, LINT_FAILS, LINT_FAILS);
    CHECK(r && r->nfiles == 2, "the other two shards are read");
    lint_report_free(r);

    put(dir, "model-00002-of-00003.safetensors", "not a safetensors file");
    LINT_EXPECT(dir, LINT_ERROR, "model-00002-of-00003.safetensors cannot be read");

    put(dir, "model.safetensors.index.json", "{\"weight_map\": 3}");
    LINT_EXPECT(dir, LINT_ERROR, "has no \"weight_map\" object");
    free(dir);
}

static void test_unindexed(void) {
    char *dir = demo("noidx", SYNTH_DEMO_LLAMA, DT_F32, 2, true);
    unlink(pathf("%s/model.safetensors.index.json", dir));
    LintReport *r = lint(dir);
    EXPECT(r, LINT_ERROR, "2 *.safetensors files and no model.safetensors.index.json");
    expect_verdicts(r, LINT_FAILS, LINT_LOADS, LINT_LOADS, LINT_LOADS);
    lint_report_free(r);
    free(dir);
}

static void test_metadata(void) {
    char *dir = demo("meta", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    const char *st = pathf("%s/model.safetensors", dir);
    rewrite_st(st, NULL, NULL, NULL);
    LintReport *r = lint(dir);
    EXPECT(r, LINT_WARNING, "model.safetensors has no __metadata__: recent transformers load it");
    expect_verdicts(r, LINT_LOADS, LINT_LOADS, LINT_LOADS, LINT_LOADS);
    lint_report_free(r);
    rewrite_st(st, NULL, NULL, "np");
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "model.safetensors: __metadata__ has format 'np': transformers refuses it");
    expect_verdicts(r, LINT_FAILS, LINT_LOADS, LINT_LOADS, LINT_LOADS);
    lint_report_free(r);
    rewrite_st(st, NULL, NULL, "flax");
    LINT_EXPECT(dir, LINT_WARNING, "__metadata__ says format 'flax'");
    free(dir);
}

/* ---------------------------------------------------------------- config and tensors */

static void kv_heads_4(cJSON *root) { cJSON_ReplaceItemInObject(root, "num_key_value_heads", cJSON_CreateNumber(4)); }
static void bf16_dtype(cJSON *root) { cJSON_ReplaceItemInObject(root, "torch_dtype", cJSON_CreateString("bfloat16")); }
static void no_dtype(cJSON *root) { cJSON_DeleteItemFromObject(root, "torch_dtype"); }
static void wrong_arch(cJSON *root) {
    cJSON_ReplaceItemInObject(root, "architectures", cJSON_CreateStringArray((const char *[]){"MistralForCausalLM"}, 1));
}
static void no_arch(cJSON *root) { cJSON_DeleteItemFromObject(root, "architectures"); }
static void tie(cJSON *root) { cJSON_ReplaceItemInObject(root, "tie_word_embeddings", cJSON_CreateTrue()); }
static void many_layers(cJSON *root) { cJSON_ReplaceItemInObject(root, "num_hidden_layers", cJSON_CreateNumber(2000000)); }
static void qwen3(cJSON *root) {          /* and the demo's 4 layers back */
    cJSON_ReplaceItemInObject(root, "model_type", cJSON_CreateString("qwen3"));
    cJSON_ReplaceItemInObject(root, "num_hidden_layers", cJSON_CreateNumber(4));
}
static void martian(cJSON *root) { cJSON_ReplaceItemInObject(root, "model_type", cJSON_CreateString("martian")); }

static void test_config_shapes(void) {
    char *dir = demo("shape", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    const char *cfg = pathf("%s/config.json", dir);
    edit_json(cfg, kv_heads_4);
    LintReport *r = lint(dir);
    EXPECT(r, LINT_ERROR, "model.layers.0.self_attn.k_proj.weight is [64, 256]; config.json says [128, 256] "
                          "(num_key_value_heads x head_dim, hidden_size) (4 tensors like it");
    EXPECT(r, LINT_ERROR, "v_proj.weight is [64, 256]");
    expect_verdicts(r, LINT_FAILS, LINT_FAILS, LINT_FAILS, LINT_FAILS);
    lint_report_free(r);
    free(dir);

    dir = demo("tied", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    edit_json(pathf("%s/config.json", dir), tie);
    r = lint(dir);
    const LintFinding *f = finding(r, LINT_ERROR, "tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight");
    CHECK(f && f->loads == LT_ALL, "a tied head that differs: every engine computes another model");
    lint_report_free(r);
    free(dir);

    dir = demo("dtype", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    cfg = pathf("%s/config.json", dir);
    edit_json(cfg, bf16_dtype);
    LINT_EXPECT(dir, LINT_WARNING, "torch_dtype is bfloat16 but most weights are F32");
    edit_json(cfg, no_dtype);
    LINT_EXPECT(dir, LINT_ADVISORY, "config.json has no torch_dtype");
    edit_json(cfg, wrong_arch);
    r = lint(dir);     /* every engine loads it: a warning naming who builds which class (cli_lint_arch.sh) */
    EXPECT(r, LINT_WARNING, "architectures[0] is 'MistralForCausalLM' but model_type 'llama' is LlamaForCausalLM");
    CHECK(!finding(r, LINT_ERROR, "architectures[0]"), "architectures[0] of a family named alike: no error");
    CHECK(lint_verdict_of(r, LT_HF) == LINT_LOADS, "transformers loads it (its class comes from model_type)");
    lint_report_free(r);
    edit_json(cfg, no_arch);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "no \"architectures\" list");
    expect_verdicts(r, LINT_LOADS, LINT_FAILS, LINT_FAILS, LINT_FAILS);
    lint_report_free(r);
    edit_json(cfg, many_layers);
    LINT_EXPECT(dir, LINT_ERROR, "num_hidden_layers 2000000: attnlab reads at most 512 layers");  /* cfg_validate (ggm) */
    edit_json(cfg, qwen3);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "missing model.layers.0.self_attn.q_norm.weight");     /* Llama's tensors, Qwen3's config */
    CHECK(r && !strcmp(r->hf_class, "Qwen3ForCausalLM"), "qwen3's class");
    lint_report_free(r);
    edit_json(cfg, martian);
    LINT_EXPECT(dir, LINT_WARNING, "model_type 'martian' is not among the families lint knows");

    put(dir, "config.json", "{\"model_type\": ");
    LINT_EXPECT(dir, LINT_ERROR, "config.json cannot be read as JSON");
    unlink(pathf("%s/config.json", dir));
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "no config.json");
    expect_verdicts(r, LINT_FAILS, LINT_FAILS, LINT_FAILS, LINT_FAILS);
    lint_report_free(r);
    free(dir);
}

static void test_unknown_tensor(void) {
    char *dir = demo("unknown", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    rewrite_st(pathf("%s/model.safetensors", dir), NULL, "model.layers.0.self_attn.q_proj.bias", "pt");
    LintReport *r = lint(dir);
    EXPECT(r, LINT_ERROR, "model.layers.0.self_attn.q_proj.bias: no tensor of LlamaForCausalLM");
    expect_verdicts(r, LINT_DIFFERENT, LINT_FAILS, LINT_DIFFERENT, LINT_FAILS);
    lint_report_free(r);
    rewrite_st(pathf("%s/model.safetensors", dir), "model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.rotary_emb.inv_freq", "pt");
    r = lint(dir);
    CHECK(r && lint_count(r, LINT_ERROR) == 0, "a rotary cache is no error");
    EXPECT(r, LINT_ADVISORY, "rotary_emb.inv_freq: engines skip it");
    lint_report_free(r);
    free(dir);
}

/* ---------------------------------------------------------------- the families of issue 12 */

/* `synth family NAME` into tmp/dir (f32, tokenizer files planted). */
static char *family(const char *name, const char *dir) {
    char *d = al_asprintf("%s/%s", tmp, dir);
    CHECK_OK(synth_family_write(name, DT_F32, 7, d));
    add_tokenizer(d);
    return d;
}

static void eps_1e5(cJSON *root) { cJSON_ReplaceItemInObject(root, "rms_norm_eps", cJSON_CreateNumber(1e-5)); }

/* A DeepSeek-V3 folder whose rms_norm_eps is not transformers' fixed latent eps (1e-6, as synth and
 * DeepSeek's own configs write it) is a warning for transformers alone. */
static void test_deepseek_eps(void) {
    char *dir = family("deepseek_v3", "fam_ds_eps");
    edit_json(pathf("%s/config.json", dir), eps_1e5);
    LintReport *r = lint(dir);
    if (r) {
        EXPECT(r, LINT_WARNING, "rms_norm_eps is 1e-05 but transformers normalises the MLA latents");
        CHECK(lint_count(r, LINT_ERROR) == 0 && lint_count(r, LINT_WARNING) == 1, "deepseek_v3 eps 1e-5: %zu errors, "
              "%zu warnings", lint_count(r, LINT_ERROR), lint_count(r, LINT_WARNING));
    }
    lint_report_free(r);
    free(dir);
}

static void mtp_1(cJSON *root) { cJSON_ReplaceItemInObject(root, "num_nextn_predict_layers", cJSON_CreateNumber(1)); }

/* GLM-4.5 / 4.6 checkpoints hold their multi-token-prediction layer past num_hidden_layers
 * (model.layers.92.* with num_nextn_predict_layers 1), as DeepSeek-V3's do: no finding. */
static void test_glm4_moe_mtp(void) {
    char *dir = family("glm4_moe", "fam_glm_mtp");
    edit_json(pathf("%s/config.json", dir), mtp_1);
    rewrite_st(pathf("%s/model.safetensors", dir), NULL, "model.layers.3.eh_proj.weight", "pt");
    LintReport *r = lint(dir);
    if (r) {
        CHECK(lint_count(r, LINT_ERROR) == 0 && lint_count(r, LINT_WARNING) == 0, "glm4_moe with an MTP layer: %zu "
              "errors, %zu warnings", lint_count(r, LINT_ERROR), lint_count(r, LINT_WARNING));
        if (lint_count(r, LINT_ERROR) + lint_count(r, LINT_WARNING)) dump(r);
    }
    lint_report_free(r);
    free(dir);
}

/* GLM-5.2's IndexShare: a layer that reuses the last full layer's selection (indexer_types "shared";
 * the recipe's layer 1) needs no indexer of its own: the recipe writes none there, as the release, and no
 * finding says one is missing. */
static void test_glm_index_share(void) {
    char *dir = family("glm_moe_dsa", "fam_glm_share");
    st_file *f = NULL;
    CHECK_OK(st_open(pathf("%s/model.safetensors", dir), &f));
    for (size_t i = 0; f && i < st_count(f); i++)
        CHECK(strncmp(st_entry_at(f, i)->name, "model.layers.1.self_attn.indexer.", 33), "the recipe's shared layer 1 "
              "carries %s", st_entry_at(f, i)->name);
    st_close(f);
    LintReport *r = lint(dir);
    if (r) {
        CHECK(lint_count(r, LINT_ERROR) == 0 && lint_count(r, LINT_WARNING) == 0, "glm_moe_dsa without layer 1's "
              "indexer: %zu errors, %zu warnings", lint_count(r, LINT_ERROR), lint_count(r, LINT_WARNING));
        if (lint_count(r, LINT_ERROR) + lint_count(r, LINT_WARNING)) dump(r);
    }
    lint_report_free(r);
    Model *m = NULL;
    CHECK(model_open(dir, &m) == AL_OK, "glm_moe_dsa without layer 1's indexer loads: %s", al_errmsg());
    model_free(m);
    free(dir);
}

static void square_experts(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "text_config"), "moe_intermediate_size", cJSON_CreateNumber(64));
}
static void half_experts(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "text_config"), "moe_intermediate_size", cJSON_CreateNumber(32));
}
static void with_factor(cJSON *root) { cJSON_AddNumberToObject(root, "partial_rotary_factor", 0.5); }

/* Where transformers 5.17 computed another model than the release (s12's GPU run): Qwen3-VL MoE's experts when
 * moe_intermediate_size makes a stored tensor square (its check_dims transposition skips them), MiniMax-M2's
 * rotary_dim without partial_rotary_factor (the recipe is the release's form; with the factor it is clean), and
 * GLM-5's interleaved RoPE, which its first GlmMoeDsa rotated by rotate_half (an advisory). */
static void test_reader_disagreements(void) {
    char *dir = family("qwen3_vl_moe", "fam_q3vl_sq");
    LintReport *r = lint(dir);
    CHECK(r && !finding(r, LINT_ERROR, "square"), "qwen3_vl_moe's recipe (I 48, D 64) has no square expert");
    lint_report_free(r);
    edit_json(pathf("%s/config.json", dir), square_experts);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "layers.0.mlp.experts.down_proj (and its like on every MoE layer) square: transformers 5");
    lint_report_free(r);
    edit_json(pathf("%s/config.json", dir), half_experts);
    LINT_EXPECT(dir, LINT_ERROR, "layers.0.mlp.experts.gate_up_proj (and its like on every MoE layer) square");
    free(dir);

    dir = family("minimax_m2", "fam_mm2_rd");
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "rotary_dim 16 without partial_rotary_factor: transformers 5.17's MiniMaxM2Config reads no "
                          "rotary_dim and rotates all 32 dims");
    expect_verdicts(r, LINT_DIFFERENT, LINT_LOADS, LINT_LOADS, LINT_LOADS);
    lint_report_free(r);
    edit_json(pathf("%s/config.json", dir), with_factor);
    r = lint(dir);
    CHECK(r && lint_count(r, LINT_ERROR) == 0 && lint_count(r, LINT_WARNING) == 0, "minimax_m2 with "
          "partial_rotary_factor 0.5 beside rotary_dim 16 lints clean");
    expect_verdicts(r, LINT_LOADS, LINT_LOADS, LINT_LOADS, LINT_LOADS);
    lint_report_free(r);
    free(dir);

    dir = family("glm_moe_dsa", "fam_glm_rope");
    LINT_EXPECT(dir, LINT_ADVISORY, "transformers before PR #46372 (June 2026) rotated GLM-5's MLA and indexer RoPE");
    free(dir);
    dir = family("kimi_linear", "fam_kimi_hf");
    r = lint(dir);
    expect_verdicts(r, LINT_LOADS, LINT_LOADS, LINT_LOADS, LINT_FAILS);   /* transformers 5 has KimiLinearForCausalLM */
    lint_report_free(r);
    free(dir);
}

/* The recipes written as the release is, which a reader computes otherwise (lint's one error for it): MiniMax-M2's
 * rotary_dim without partial_rotary_factor, which transformers 5.17 does not read. */
static unsigned reader_differs(const char *fam) { return !strcmp(fam, "minimax_m2") ? LT_HF : 0; }

/* Every family's synthetic checkpoint lints clean: its class, every tensor placed, every target of its row's
 * engines loads (the others: lint's one error that the engine has no implementation of it), but where a reader
 * is known to compute another model of the release (reader_differs). */
static void test_families_clean(void) {
    for (size_t i = 0; synth_family_names[i]; i++) {
        char *dir = family(synth_family_names[i], pathf("fam_%s", synth_family_names[i]));
        LintReport *r = lint(dir);
        model_family fam = FAM_COUNT;
        family_find(synth_family_names[i], NULL, &fam);
        unsigned eng = family_row(fam)->engines, differs = reader_differs(synth_family_names[i]);
#define VERDICT(bit) (eng & (bit) ? differs & (bit) ? LINT_DIFFERENT : LINT_LOADS : LINT_FAILS)
        if (r) {
            size_t want = (eng == ENGINES_ALL ? 0u : 1u) + (differs != 0);
            CHECK(lint_count(r, LINT_ERROR) == want && lint_count(r, LINT_WARNING) == 0,
                  "%s: %zu errors, %zu warnings", synth_family_names[i], lint_count(r, LINT_ERROR),
                  lint_count(r, LINT_WARNING));
            if (lint_count(r, LINT_ERROR) != want || lint_count(r, LINT_WARNING)) dump(r);
            CHECK(r->hf_class[0] && !strcmp(r->hf_class, r->arch), "%s: class %s, architectures %s",
                  synth_family_names[i], r->hf_class, r->arch);
            CHECK(!strcmp(r->model_type, synth_family_names[i]), "%s: model_type %s", synth_family_names[i],
                  r->model_type);
            CHECK(!finding(r, LINT_ADVISORY, "not checked") && !finding(r, LINT_ADVISORY, "are not ("),
                  "%s: tensors are checked", synth_family_names[i]);
            expect_verdicts(r, VERDICT(ENGINE_HF), VERDICT(ENGINE_VLLM), VERDICT(ENGINE_SGLANG), VERDICT(ENGINE_LLAMACPP));
        }
#undef VERDICT
        lint_report_free(r);
        free(dir);
    }
}

/* A planted defect per layout: rewrite_st on the family's model.safetensors drops tensors (a name
 * prefix) and/or adds an F32 [4] tensor; the finding names it. */
static void defect(const char *fam, const char *drop, const char *extra, lint_severity sev, const char *needle,
                   lint_verdict hf) {
    static int k;
    char *dir = family(fam, pathf("defect_%s_%d", fam, k++));
    rewrite_st(pathf("%s/model.safetensors", dir), drop, extra, "pt");
    unlink(pathf("%s/model.safetensors.index.json", dir));
    LintReport *r = lint(dir);
    EXPECT(r, sev, needle);
    if (r && sev == LINT_ERROR) CHECK(lint_verdict_of(r, LT_HF) == hf, "%s: transformers %s", fam,
                                      lint_verdict_name(lint_verdict_of(r, LT_HF)));
    if (r && sev == LINT_ERROR) CHECK(lint_verdict_of(r, LT_VLLM) == LINT_FAILS, "%s: vLLM refuses", fam);
    lint_report_free(r);
    free(dir);
}

static void test_families_defects(void) {
    static const struct {
        const char *fam, *drop, *extra;
        lint_severity sev;
        const char *needle;
        lint_verdict hf;
    } d[] = {
        /* per-head q/k norms (Qwen3, Gemma 3) and OLMo 2's over the whole projection */
        {"qwen3", "model.layers.1.self_attn.q_norm.weight", NULL, LINT_ERROR,
             "missing model.layers.1.self_attn.q_norm.weight", LINT_DIFFERENT},
        {"gemma3_text", "model.layers.0.self_attn.k_norm.weight", NULL, LINT_ERROR,
             "missing model.layers.0.self_attn.k_norm.weight", LINT_DIFFERENT},
        {"olmo2", "model.layers.2.self_attn.q_norm.weight", "model.layers.2.self_attn.q_norm.weight", LINT_ERROR,
             "model.layers.2.self_attn.q_norm.weight is [4]; config.json says [128] (num_attention_heads x head_dim "
             "(q_norm over the projection))", LINT_FAILS},
        /* block layouts: Gemma's sandwich norms, OLMo 2's post-norms only */
        {"gemma2", "model.layers.3.pre_feedforward_layernorm.weight", NULL, LINT_ERROR,
             "missing model.layers.3.pre_feedforward_layernorm.weight", LINT_DIFFERENT},
        {"olmo2", NULL, "model.layers.0.input_layernorm.weight", LINT_ERROR,
             "model.layers.0.input_layernorm.weight: no tensor of Olmo2ForCausalLM", LINT_DIFFERENT},
        /* fused layouts: Phi-3's qkv_proj and gate_up_proj, GPT-NeoX's query_key_value and LayerNorm biases */
        {"phi3", "model.layers.1.self_attn.qkv_proj.weight", "model.layers.1.self_attn.qkv_proj.weight", LINT_ERROR,
             "model.layers.1.self_attn.qkv_proj.weight is [4]; config.json says [256, 128] ((num_attention_heads + 2 "
             "num_key_value_heads) x head_dim, hidden_size)", LINT_FAILS},
        {"phi3", "model.layers.0.mlp.gate_up_proj.weight", NULL, LINT_ERROR,
             "missing model.layers.0.mlp.gate_up_proj.weight", LINT_DIFFERENT},
        {"gpt_neox", "gpt_neox.final_layer_norm.bias", NULL, LINT_ERROR, "missing gpt_neox.final_layer_norm.bias",
             LINT_DIFFERENT},
        {"gpt_neox", "embed_out.weight", NULL, LINT_ERROR, "missing embed_out.weight", LINT_DIFFERENT},
        {"gpt_neox", NULL, "gpt_neox.layers.1.attention.q_proj.weight", LINT_ERROR,
             "gpt_neox.layers.1.attention.q_proj.weight: no tensor of GPTNeoXForCausalLM", LINT_DIFFERENT},
        {"gpt_neox", NULL, "gpt_neox.layers.1.attention.masked_bias", LINT_ADVISORY,
             "gpt_neox.layers.1.attention.masked_bias: engines skip it", LINT_LOADS},
        /* experts and routers of the three MoE layouts */
        {"mixtral", "model.layers.2.block_sparse_moe.experts.3.", NULL, LINT_ERROR,
             "missing model.layers.2.block_sparse_moe.experts.3.w1.weight", LINT_DIFFERENT},
        {"mixtral", "model.layers.0.block_sparse_moe.gate.weight", NULL, LINT_ERROR,
             "missing model.layers.0.block_sparse_moe.gate.weight", LINT_DIFFERENT},
        {"qwen3_moe", "model.layers.1.mlp.experts.2.down_proj", NULL, LINT_ERROR,
             "missing model.layers.1.mlp.experts.2.down_proj.weight", LINT_DIFFERENT},
        {"qwen3_moe", NULL, "model.layers.1.mlp.shared_expert.up_proj.weight", LINT_ERROR,
             "model.layers.1.mlp.shared_expert.up_proj.weight: no tensor of Qwen3MoeForCausalLM", LINT_DIFFERENT},
        {"deepseek_v3", "model.layers.2.mlp.experts.7.", NULL, LINT_ERROR,
             "missing model.layers.2.mlp.experts.7.gate_proj.weight", LINT_DIFFERENT},
        {"deepseek_v3", "model.layers.1.mlp.shared_experts.gate_proj", NULL, LINT_ERROR,
             "missing model.layers.1.mlp.shared_experts.gate_proj.weight", LINT_DIFFERENT},
        /* the lightning indexer of a layer that runs its own (GLM-5: layers 0 and 2 of the recipe) */
        {"glm_moe_dsa", "model.layers.2.self_attn.indexer.wk.weight", NULL, LINT_ERROR,
             "missing model.layers.2.self_attn.indexer.wk.weight", LINT_DIFFERENT},
    };
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        defect(d[i].fam, d[i].drop, d[i].extra, d[i].sev, d[i].needle, d[i].hf);
}

/* ---------------------------------------------------------------- DeepSeek */

static void latent_norm_off(cJSON *root) { cJSON_AddBoolToObject(root, "qk_latent_layernorm", false); }
static void no_quant(cJSON *root) { cJSON_DeleteItemFromObject(root, "quantization_config"); }
static void stock_unlike(cJSON *root) {
    cJSON_AddBoolToObject(root, "rope_interleave", false);
    cJSON_ReplaceItemInObject(root, "attention_bias", cJSON_CreateTrue());
}
static void llama3_scaling(cJSON *root) {
    cJSON *rs = cJSON_CreateObject();
    cJSON_AddStringToObject(rs, "rope_type", "llama3");
    cJSON_AddNumberToObject(rs, "factor", 8);
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", 1024);
    cJSON_ReplaceItemInObject(root, "rope_scaling", rs);
}
static void ds_defaults(cJSON *root) {
    cJSON_DeleteItemFromObject(root, "q_lora_rank");
    cJSON_DeleteItemFromObject(root, "first_k_dense_replace");
    cJSON_DeleteItemFromObject(root, "eos_token_id");
}
static void ds_moe(cJSON *root) {
    cJSON_AddNumberToObject(root, "first_k_dense_replace", 5);
    cJSON_DeleteItemFromObject(root, "n_group");
}
static void flashmla(cJSON *root) {
    cJSON_ReplaceItemInObject(root, "kv_lora_rank", cJSON_CreateNumber(512));
    cJSON_ReplaceItemInObject(root, "qk_rope_head_dim", cJSON_CreateNumber(64));
}

static void test_deepseek(void) {
    char *dir = demo("mla", SYNTH_DEMO_R1, DT_F32, 1, true);
    rewrite_st(pathf("%s/model.safetensors", dir), "model.layers.0.self_attn.kv_a_layernorm", NULL, "pt");
    LintReport *r = lint(dir);
    EXPECT(r, LINT_ERROR, "missing model.layers.0.self_attn.kv_a_layernorm.weight: ");
    EXPECT(r, LINT_ERROR, "without kv_a_layernorm, stock DeepSeek-V3 code still normalises the latent");
    expect_verdicts(r, LINT_DIFFERENT, LINT_FAILS, LINT_DIFFERENT, LINT_FAILS);
    lint_report_free(r);

    const char *cfg = pathf("%s/config.json", dir);
    edit_json(cfg, latent_norm_off);
    r = lint(dir);
    const LintFinding *f = finding(r, LINT_ERROR, "qk_latent_layernorm: false");
    CHECK(f && f->targets == LT_ALL && f->loads == LT_ALL, "qk_latent_layernorm: every target loads a different model");
    lint_report_free(r);
    free(dir);

    dir = demo("mla2", SYNTH_DEMO_R1, DT_F32, 1, true);
    cfg = pathf("%s/config.json", dir);
    edit_json(cfg, latent_norm_off);
    r = lint(dir);
    expect_verdicts(r, LINT_DIFFERENT, LINT_DIFFERENT, LINT_DIFFERENT, LINT_DIFFERENT);
    lint_report_free(r);
    free(dir);

    dir = demo("mla3", SYNTH_DEMO_R1, DT_F32, 1, true);
    cfg = pathf("%s/config.json", dir);
    edit_json(cfg, stock_unlike);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "rope_interleave: false");
    EXPECT(r, LINT_ERROR, "attention_bias: true");
    EXPECT(r, LINT_ERROR, "model.layers.0.self_attn.kv_a_proj_with_mqa.bias (6 tensors like it");   /* HF reads them */
    lint_report_free(r);
    free(dir);

    dir = demo("mla5", SYNTH_DEMO_R1, DT_F32, 1, true);
    cfg = pathf("%s/config.json", dir);
    edit_json(cfg, ds_defaults);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "config.json has no q_lora_rank: DeepSeek-V3's default 1536");
    EXPECT(r, LINT_ERROR, "leaves first_k_dense_replace to DeepSeek-V3's defaults (first_k_dense_replace 3, "
                          "n_routed_experts 256): engines build layer 0's MLP as a dense MLP, attnlab reads experts");
    EXPECT(r, LINT_ADVISORY, "no bos_token_id / eos_token_id");
    lint_report_free(r);
    edit_json(cfg, ds_moe);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "config.json leaves n_group to DeepSeek-V3's defaults");
    EXPECT(r, LINT_ERROR, ", model.layers.5.mlp.gate.weight");
    lint_report_free(r);
    free(dir);

    dir = demo("mla4", SYNTH_DEMO_R1, DT_F32, 1, true);
    edit_json(pathf("%s/config.json", dir), llama3_scaling);
    r = lint(dir);
    EXPECT(r, LINT_ERROR, "rope_scaling 'llama3': vLLM and SGLang run every rope_scaling type");
    expect_verdicts(r, LINT_LOADS, LINT_DIFFERENT, LINT_DIFFERENT, LINT_LOADS);
    lint_report_free(r);
    free(dir);

    dir = demo("fp8", SYNTH_DEMO_R1, DT_F8_E4M3, 1, true);
    cfg = pathf("%s/config.json", dir);
    edit_json(cfg, flashmla);
    r = lint(dir);
    EXPECT(r, LINT_ADVISORY, "qualify for FlashMLA");
    rewrite_st(pathf("%s/model.safetensors", dir), "model.layers.2.self_attn.o_proj.weight_scale_inv", NULL, "pt");
    EXPECT(r, LINT_ERROR, "kv_a_layernorm.weight is [96]; config.json says [512] (kv_lora_rank)");
    lint_report_free(r);
    edit_json(cfg, no_quant);
    LINT_EXPECT(dir, LINT_ERROR, "FP8 weights but no quantization_config");
    free(dir);
}

/* ---------------------------------------------------------------- hostile folders */

static char *slurp_n(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    *n = 0;
    if (f && !fseek(f, 0, SEEK_END)) {
        long len = ftell(f);
        rewind(f);
        b = len > 0 ? malloc((size_t)len) : NULL;
        if (b) *n = fread(b, 1, (size_t)len, f);
    }
    if (f) fclose(f);
    return b;
}

static void spit(const char *path, const char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(b, 1, n, f); fclose(f); }
}

/* Random bytes flipped in config.json, the index and a shard's header (or a file cut short):
 * lint reports, never crashes (the sanitizer build checks the memory too). */
static void test_hostile(void) {
    char *dir = demo("hostile", SYNTH_DEMO_R1, DT_F8_E4M3, 2, true);
    const char *names[3] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"};
    char *orig[3];
    size_t len[3];
    for (int i = 0; i < 3; i++) orig[i] = slurp_n(pathf("%s/%s", dir, names[i]), &len[i]);
    unsigned long long st = 0x2545F4914F6CDD1DULL;
    size_t reports = 0;
    for (int it = 0; it < 240; it++) {
        int k = it % 3;
        if (!orig[k]) continue;
        char *b = malloc(len[k]);
        memcpy(b, orig[k], len[k]);
        size_t span = k == 2 ? 8 + 4096 : len[k], n = len[k];
        if (span > n) span = n;
        for (int j = 0; j < 1 + it % 4; j++) {
            st ^= st << 13; st ^= st >> 7; st ^= st << 17;
            b[st % span] = (char)(st >> 32);
        }
        if (it % 16 == 15) n = (size_t)(st % n);
        spit(pathf("%s/%s", dir, names[k]), b, n);
        LintReport *r = NULL;
        if (lint_folder(dir, &r) == AL_OK && r) reports++;
        lint_report_free(r);
        spit(pathf("%s/%s", dir, names[k]), orig[k], len[k]);
        free(b);
    }
    CHECK(reports == 240, "every damaged folder gives a report (%zu of 240)", reports);
    for (int i = 0; i < 3; i++) free(orig[i]);
    free(dir);
}

/* ---------------------------------------------------------------- paths */

static void test_paths(void) {
    LintReport *r = NULL;
    CHECK_ERR(lint_folder(pathf("%s/nothing-here", tmp), &r), "no such folder or file");
    CHECK(r == NULL, "no report for a missing path");
    put(tmp, "model.gguf", "GGUF");
    r = lint(pathf("%s/model.gguf", tmp));
    EXPECT(r, LINT_ERROR, "not a readable GGUF");
    lint_report_free(r);
    put(tmp, "tpa_manifest.json", "{}");
    r = lint(tmp);                                   /* a folder of folders: no config, no weights */
    EXPECT(r, LINT_ERROR, "an attnlab TPA export (tpa_manifest.json)");
    EXPECT(r, LINT_ERROR, "no config.json");
    EXPECT(r, LINT_ERROR, "no weights");
    lint_report_free(r);
}

/* ---------------------------------------------------------------- tied output heads in GGUF (issue 25, 3 follow-up) */

static void tie_true(cJSON *root) { cJSON_ReplaceItemInObject(root, "tie_word_embeddings", cJSON_CreateTrue()); }

/* A deepseek2 GGUF of 0 layers without output.weight: llama.cpp b5415 requires it (warning). */
static void test_gguf_no_output(void) {
    GgufWriter *w = gguf_writer_new();
    const char *toks[2] = {"a", "b"};
    float *emb = calloc(8, sizeof *emb), *norm = calloc(4, sizeof *norm);
    uint64_t ne2[2] = {4, 2}, ne1[1] = {4};
    CHECK_OK(gguf_set_str(w, "general.architecture", "deepseek2"));
    const char *keys[] = {"block_count", "context_length", "embedding_length", "attention.head_count"};
    for (int i = 0; i < 4; i++) CHECK_OK(gguf_set_u32(w, pathf("deepseek2.%s", keys[i]), i == 0 ? 0 : 4));
    CHECK_OK(gguf_set_u32(w, "deepseek2.attention.q_lora_rank", 4));
    CHECK_OK(gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    CHECK_OK(gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 2));
    CHECK_OK(gguf_add_tensor_f32(w, "token_embd.weight", GG_F32, 2, ne2, emb));
    CHECK_OK(gguf_add_tensor_f32(w, "output_norm.weight", GG_F32, 1, ne1, norm));
    char *g = pathf("%s/no_output.gguf", tmp);
    CHECK_OK(gguf_write_file(w, g));
    gguf_writer_free(w);
    LINT_EXPECT(g, LINT_WARNING, "no output.weight (tied embeddings): llama.cpp b5415");
}

/* demo-llama with tied embeddings (no lm_head), converted to MLA with a query latent and written
 * as GGUF: output.weight is the embeddings (llama.cpp b5415 requires it for deepseek2) and lint
 * has no warning about it. */
static void test_gguf_tied_output(void) {
    char *src = demo("tied_src", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    rewrite_st(pathf("%s/model.safetensors", src), "lm_head", NULL, NULL);
    edit_json(pathf("%s/config.json", src), tie_true);
    Model *m = NULL, *ex = NULL;
    CHECK_OK(model_open(src, &m));
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 16;
    o.q_rank = 32;
    o.compare_balance = false;
    TmlaResult *tr = NULL;
    if (m) CHECK_OK(tmla_convert(m, &o, &tr));
    char *out = pathf("%s/tied_mla", tmp), *g = al_asprintf("%s/tied.gguf", tmp);
    MlaExportOpts eo = {.dtype = DT_F32};
    if (tr) CHECK_OK(mla_export(tr, out, &eo));
    if (tr) CHECK_OK(model_open(out, &ex));
    GgufExportOpts go = {.dtype = GG_F32};
    GgufExportReport rep = {0};
    if (ex) CHECK_OK(gguf_export(ex, g, &go, &rep));
    CHECK(rep.tied_output && !rep.q_less_old, "tied deepseek2 export: tied_output %d q_less_old %d", rep.tied_output, rep.q_less_old);
    GgufFile *f = NULL;
    if (ex) CHECK_OK(gguf_open(g, &f));
    const GgufTensor *te = f ? gguf_tensor_find(f, "token_embd.weight") : NULL, *to = f ? gguf_tensor_find(f, "output.weight") : NULL;
    CHECK(te && to, "the tied GGUF has token_embd.weight and output.weight");
    if (te && to)
        CHECK(te->ne[0] == to->ne[0] && te->ne[1] == to->ne[1] &&
              !memcmp(gguf_tensor_data(f, te), gguf_tensor_data(f, to), (size_t)(te->ne[0] * te->ne[1]) * sizeof(float)),
              "output.weight equals token_embd.weight");
    gguf_close(f);
    LintReport *r = lint(g);
    CHECK(r && !finding(r, LINT_WARNING, "output.weight") && lint_count(r, LINT_ERROR) == 0, "the tied GGUF lints clean");
    if (r && lint_count(r, LINT_ERROR)) dump(r);
    lint_report_free(r);
    model_free(ex);
    tmla_result_free(tr);
    model_free(m);
    free(g);
    free(src);
}

/* ---------------------------------------------------------------- lint and check agree (issue 25, 3) */

/* A TransMLA export of demo-llama (rms_norm_eps 1e-5): with the source's eps (the old default)
 * transformers normalises the latents with its fixed 1e-6 and computes another model; by default
 * (rms_norm_eps 1e-6) every engine computes the converted model; the default with its config's
 * rms_norm_eps edited to 1e-5 afterwards: vLLM and SGLang (and attnlab's reading) differ from the
 * latent norms built for 1e-6 (the manifest's latent_norm_eps), transformers does not. lint's verdict per engine and
 * check's column per engine come from the same rows (core/model/engines.h): a target loads with no
 * finding exactly when its column is the conversion's error. */
static void test_lint_check_agree(void) {
    char *src = demo("tm_src", SYNTH_DEMO_LLAMA, DT_F32, 1, true);
    Model *m = NULL;
    CHECK_OK(model_open(src, &m));
    TmlaOpts o = tmla_opts_default();
    TmlaResult *tr = NULL;
    if (m) CHECK_OK(tmla_convert(m, &o, &tr));
    static const char *const what[3] = {"default", "source_eps", "default, rms_norm_eps edited to 1e-5"};
    double conv = NAN;                 /* the conversion's largest output error (the default export's) */
    for (int k = 0; tr && k < 3; k++) {
        char *out = pathf("%s/tm_eps%d", tmp, k);
        MlaExportOpts eo = {.dtype = DT_F32, .source_eps = k == 1};
        CHECK_OK(mla_export(tr, out, &eo));
        if (k == 2) edit_json(pathf("%s/config.json", out), eps_1e5);
        LintReport *r = lint(out);
        MlaCheck *c = NULL;
        CHECK_OK(mla_check(out, m, 32, 3, &c));
        for (int e = 0; r && c && e < ENG_N; e++) {
            double w = 0, own = 0;
            for (int l = 0; l < c->n_layers; l++) { w = fmax(w, c->engine_out_err[e][l]); own = fmax(own, c->own_out_err[l]); }
            if (k == 0) conv = own;
            double ref = k == 2 ? conv : own;   /* edited: attnlab's reading is no longer the conversion */
            lint_verdict v = lint_verdict_of(r, 1u << e);
            printf("%s export, %s: lint %s, check's largest output error %.3g (the conversion's %.3g)\n",
                   what[k], engine_row(e)->name, lint_verdict_name(v), w, ref);
            CHECK(!strcmp(lint_target_name(e), engine_row(e)->name), "lint target %d is engine %s", e, engine_row(e)->name);
            bool differs = fabs(w - ref) > 1e-3 * (1 + ref);
            CHECK((v == LINT_DIFFERENT) == differs, "%s, %s: lint says %s but check's column is %.3g against %.3g",
                  what[k], engine_row(e)->name, lint_verdict_name(v), w, ref);
        }
        if (r && c && k == 2) {
            expect_verdicts(r, LINT_LOADS, LINT_DIFFERENT, LINT_DIFFERENT, lint_verdict_of(r, LT_LLAMACPP));
            EXPECT(r, LINT_ERROR, "vLLM and SGLang normalise the latents with 1e-05, but this export built its MLA latent "
                                  "norms (kv_a_layernorm, q_a_layernorm) for eps 1e-06");
            CHECK(strstr(c->notes, "latent eps: vLLM and SGLang normalise the latents with 1e-05, not 1e-06") &&
                  strstr(c->notes, "write that eps back as rms_norm_eps") && !strstr(c->notes, "source-eps"),
                  "edited eps: check's notes [%s]", c->notes);
        }
        if (c && k == 1)
            CHECK(strstr(c->notes, "export the conversion again with `export DIR`") && !strstr(c->notes, "source-eps"),
                  "source_eps: check's notes name what to do: [%s]", c->notes);
        if (r && k == 0) {
            expect_verdicts(r, LINT_LOADS, LINT_LOADS, LINT_LOADS, lint_verdict_of(r, LT_LLAMACPP));
            /* its GGUF: every deepseek2 key llama.cpp b5415 .. v0.5.0 requires; no query latent: warned */
            Model *ex = NULL;
            CHECK_OK(model_open(out, &ex));
            char *g = al_asprintf("%s/tm.gguf", tmp);
            GgufExportOpts go = {.dtype = GG_F32};
            if (ex) CHECK_OK(gguf_export(ex, g, &go, NULL));
            LintReport *rg = lint(g);
            CHECK(rg && !finding(rg, LINT_ERROR, "no metadata key"), "the deepseek2 GGUF has every required key");
            EXPECT(rg, LINT_WARNING, "no query latent (q_lora_rank 0)");
            lint_report_free(rg);
            model_free(ex);
            free(g);
        }
        if (r && k == 1) {
            expect_verdicts(r, LINT_DIFFERENT, LINT_LOADS, LINT_LOADS, lint_verdict_of(r, LT_LLAMACPP));
            EXPECT(r, LINT_ERROR, "transformers normalises the latents with 1e-06, but this export built its MLA latent "
                                  "norms (kv_a_layernorm, q_a_layernorm) for eps 1e-05");
        }
        lint_report_free(r);
        mla_check_free(c);
    }
    tmla_result_free(tr);
    model_free(m);
    free(src);
}

int main(void) {
    tmp = test_tmpdir();
    test_clean();
    test_no_tokenizer();
    test_index();
    test_unindexed();
    test_metadata();
    test_config_shapes();
    test_unknown_tensor();
    test_families_clean();
    test_deepseek_eps();
    test_glm4_moe_mtp();
    test_glm_index_share();
    test_reader_disagreements();
    test_families_defects();
    test_deepseek();
    test_lint_check_agree();
    test_gguf_no_output();
    test_gguf_tied_output();
    test_hostile();
    test_paths();
    return check_done();
}
