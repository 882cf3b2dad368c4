/* test_heads.c -- per-head views of every family against slices computed by hand on synthetic
 * checkpoints written here (config.json + safetensors). Every weight element encodes where it
 * came from: value = tensor_id * 65536 + row * 256 + col (exact in F32), so a view that takes
 * the wrong rows, columns, head, layer or orientation cannot pass. The FP8 DeepSeek variant
 * writes hand-chosen E4M3 codes and per-block scales and checks the views are the dequantized
 * values, edge blocks included.
 *
 * Families: Llama GQA (4 heads, 2 KV heads, explicit head_dim != hidden/heads), Qwen2 (q/k/v
 * biases), DeepSeek-V3 MLA with q_lora_rank and with q_lora_rank null (q_proj), GPT-2 Conv1D
 * with the fused c_attn (with and without the "transformer." prefix), DeepSeek FP8, Phi-3's fused
 * qkv_proj with partial rotary, GPT-NeoX's head-by-head query_key_value (biases, rotary_pct), and the
 * split layouts of Qwen3 / Gemma / Mixtral / OLMo 2 with their Q/K norm kinds. */
#include "testutil.h"
#include "model.h"

#include <pthread.h>
#include <stdint.h>

/* ---------------------------------------------------------------- encoded weights */

typedef float (*enc_fn)(int tid, size_t r, size_t c);

/* F32 encoding: exact for tid < 256, r < 256, c < 256. */
static float enc_f32(int tid, size_t r, size_t c) { return (float)((size_t)tid * 65536 + r * 256 + c); }

/* FP8 encoding: a non-NaN E4M3 code per element, and a scale per 128 x 128 block. */
static uint8_t fp8_code(int tid, size_t r, size_t c) {
    uint8_t v = (uint8_t)((r * 7 + c * 13 + (size_t)tid * 3) % 0xfe);
    return (v & 0x7f) == 0x7f ? 0x7e : v;
}
static float fp8_scale(int tid, size_t bi, size_t bj) { return (float)(1 + bi + 4 * bj + (size_t)tid) * 0.125f; }
static float enc_fp8(int tid, size_t r, size_t c) {
    return dt_e4m3_to_f32(fp8_code(tid, r, c)) * fp8_scale(tid, r / 128, c / 128);
}

/* Adds tensor `name` (rows x cols, or 1-D when rows == 0) filled with enc_f32(tid, ., .). */
static void add_enc(st_writer *w, const char *name, int tid, size_t rows, size_t cols) {
    Mat *m = mat_new(rows ? rows : 1, cols);
    for (size_t i = 0; i < m->rows; i++)
        for (size_t j = 0; j < cols; j++) *mat_at(m, i, j) = enc_f32(tid, i, j);
    CHECK_OK(st_writer_add_mat(w, name, DT_F32, m));      /* a 1-row Mat is written 1-D */
    mat_free(m);
}

/* Adds an FP8 weight `name` with codes fp8_code(tid) and its scale grid. */
static void add_fp8(st_writer *w, const char *name, int tid, size_t rows, size_t cols) {
    size_t sr = (rows + 127) / 128, sc = (cols + 127) / 128, sh[2] = {rows, cols}, ssh[2] = {sr, sc};
    uint8_t *q = malloc(rows * cols);
    float *s = malloc(sr * sc * sizeof(float));
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) q[i * cols + j] = fp8_code(tid, i, j);
    for (size_t i = 0; i < sr; i++)
        for (size_t j = 0; j < sc; j++) s[i * sc + j] = fp8_scale(tid, i, j);
    char sname[256];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    CHECK_OK(st_writer_add(w, name, DT_F8_E4M3, 2, sh, q, rows * cols));
    CHECK_OK(st_writer_add(w, sname, DT_F32, 2, ssh, s, sr * sc * sizeof(float)));
    free(q);
    free(s);
}

/* Writes config.json and model.safetensors into <tmp>/sub and opens the model. */
static Model *open_model(const char *sub, const char *config, st_writer *w) {
    mkdir(tpath(sub, NULL), 0755);
    CHECK_OK(al_write_file_atomic(tpath(sub, "config.json"), config, strlen(config)));
    CHECK_OK(st_writer_write(w, tpath(sub, "model.safetensors")));
    st_writer_free(w);
    Model *m = NULL;
    CHECK_OK(model_open(tpath(sub, NULL), &m));
    return m;
}

/* ---------------------------------------------------------------- view checks */

/* Checks a view is the transposed slice of the stored (out, in) weight: view (rows x cols) with
 * view[i][j] = W[row0 + j][col0 + i]. */
static void check_t(Mat *v, const char *what, size_t rows, size_t cols, enc_fn E, int tid, size_t row0, size_t col0) {
    CHECK(v != NULL, "%s: no view: %s", what, al_errmsg());
    if (!v) return;
    CHECK(v->rows == rows && v->cols == cols, "%s: shape %zux%zu, want %zux%zu", what, v->rows, v->cols, rows, cols);
    size_t bad = 0;
    for (size_t i = 0; i < v->rows && i < rows; i++)
        for (size_t j = 0; j < v->cols && j < cols; j++) bad += *mat_at(v, i, j) != E(tid, row0 + j, col0 + i);
    CHECK(bad == 0, "%s: %zu elements wrong (first: [0,0] = %.0f, want %.0f)", what, bad, v->data[0], E(tid, row0, col0));
}

/* Checks a view is a plain slice (Conv1D (in, out) layout): view[i][j] = W[row0 + i][col0 + j]. */
static void check_s(Mat *v, const char *what, size_t rows, size_t cols, enc_fn E, int tid, size_t row0, size_t col0) {
    CHECK(v != NULL, "%s: no view: %s", what, al_errmsg());
    if (!v) return;
    CHECK(v->rows == rows && v->cols == cols, "%s: shape %zux%zu, want %zux%zu", what, v->rows, v->cols, rows, cols);
    size_t bad = 0;
    for (size_t i = 0; i < v->rows && i < rows; i++)
        for (size_t j = 0; j < v->cols && j < cols; j++) bad += *mat_at(v, i, j) != E(tid, row0 + i, col0 + j);
    CHECK(bad == 0, "%s: %zu elements wrong (first: [0,0] = %.0f, want %.0f)", what, bad, v->data[0], E(tid, row0, col0));
}

static Mat *view(Model *m, head_kind k, int L, int h, head_part p) {
    Mat *v = NULL;
    if (model_head(m, k, L, h, p, &v) != AL_OK) return NULL;
    return v;
}

/* Checks bias values b[0..n) == E(tid, 0, off + i). */
static void check_bias(Model *m, head_kind k, int L, int h, size_t n, int tid, size_t off) {
    float *b = NULL;
    size_t nb = 99;
    CHECK_OK(model_head_bias(m, k, L, h, &b, &nb));
    CHECK(nb == n && (n == 0) == (b == NULL), "bias kind %d head %d: %zu values, want %zu", k, h, nb, n);
    size_t bad = 0;
    for (size_t i = 0; b && i < nb && i < n; i++) bad += b[i] != enc_f32(tid, 0, off + i);
    CHECK(bad == 0, "bias kind %d layer %d head %d: %zu wrong", k, L, h, bad);
    free(b);
}

/* ---------------------------------------------------------------- Llama GQA */

/* hidden 32, 4 heads, 2 KV heads, head_dim 6 (not 32/4): q (24, 32), k, v (12, 32), o (32, 24). */
static void test_llama(void) {
    st_writer *w = st_writer_new();
    for (int L = 0; L < 2; L++) {
        char n[128];
        static const char *suf[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        static const size_t rows[4] = {24, 12, 12, 32}, cols[4] = {32, 32, 32, 24};
        for (int k = 0; k < 4; k++) {
            snprintf(n, sizeof n, "model.layers.%d.self_attn.%s.weight", L, suf[k]);
            add_enc(w, n, L * 16 + k, rows[k], cols[k]);
        }
    }
    Model *m = open_model("llama", "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], "
                          "\"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 6, "
                          "\"num_hidden_layers\": 2, \"rope_theta\": 500000.0, \"vocab_size\": 100, "
                          "\"intermediate_size\": 64, \"rms_norm_eps\": 1e-5}", w);
    if (!m) return;
    const ModelConfig *c = &m->cfg;
    CHECK(c->family == FAM_LLAMA && strcmp(c->model_type, "llama") == 0, "family");
    CHECK(c->n_heads == 4 && c->n_kv_heads == 2 && c->hidden == 32 && c->n_layers == 2, "dims");
    CHECK(c->qk_nope_dim == 0 && c->qk_rope_dim == 6 && c->v_dim == 6 && cfg_d_qk(c) == 6, "head dims");
    CHECK(c->rope == ROPE_HALF && c->rope_theta == 500000.0 && c->norm_eps == 1e-5, "rope");
    CHECK(!c->qkv_bias && !c->o_bias && c->dtype == DT_F32 && strcmp(c->prefix, "model.") == 0, "bias, dtype, prefix");
    CHECK(cfg_d_in_q(c) == 32 && cfg_d_in_kv(c) == 32 && !cfg_is_mla(c), "inputs");
    CHECK(cfg_kv_group(c, 0) == 0 && cfg_kv_group(c, 1) == 0 && cfg_kv_group(c, 2) == 1 && cfg_kv_group(c, 3) == 1,
          "GQA grouping 0 0 1 1");
    CHECK(cfg_attn_params(c) == 32 * (24 + 12 + 12) + 24 * 32, "attn params %zu", cfg_attn_params(c));
    CHECK(cfg_kv_values(c) == 2 * (6 + 6), "kv values %zu", cfg_kv_values(c));
    char *tn = model_tensor_name(m, 1, "self_attn.k_proj.weight");
    CHECK(tn && strcmp(tn, "model.layers.1.self_attn.k_proj.weight") == 0, "tensor name %s", tn);
    free(tn);
    /* layers in the order 0, 1, 0 to exercise the layer cache */
    static const int order[3] = {0, 1, 0};
    for (int t = 0; t < 3; t++) {
        int L = order[t];
        if (t == 1) CHECK_OK(model_layer_load(m, 1));
        for (int h = 0; h < 4; h++) {
            char what[64];
            Mat *v;
            snprintf(what, sizeof what, "llama L%d Q%d", L, h);
            check_t(v = view(m, HK_Q, L, h, PART_ALL), what, 32, 6, enc_f32, L * 16 + 0, (size_t)h * 6, 0);
            mat_free(v);
            snprintf(what, sizeof what, "llama L%d Q%d rope", L, h);
            check_t(v = view(m, HK_Q, L, h, PART_ROPE), what, 32, 6, enc_f32, L * 16 + 0, (size_t)h * 6, 0);
            mat_free(v);
            snprintf(what, sizeof what, "llama L%d O%d", L, h);
            check_t(v = view(m, HK_O, L, h, PART_ALL), what, 6, 32, enc_f32, L * 16 + 3, 0, (size_t)h * 6);
            mat_free(v);
            int g = cfg_kv_group(c, h);      /* the K/V head serving query head h: rows g*6.. of k/v_proj */
            snprintf(what, sizeof what, "llama L%d K%d (for Q%d)", L, g, h);
            check_t(v = view(m, HK_K, L, g, PART_ALL), what, 32, 6, enc_f32, L * 16 + 1, (size_t)g * 6, 0);
            mat_free(v);
            snprintf(what, sizeof what, "llama L%d V%d", L, g);
            check_t(v = view(m, HK_V, L, g, PART_ALL), what, 32, 6, enc_f32, L * 16 + 2, (size_t)g * 6, 0);
            mat_free(v);
        }
    }
    Mat *v = NULL;
    CHECK_ERR(model_head(m, HK_Q, 0, 0, PART_NOPE, &v), "there is no NoPE part");
    CHECK_ERR(model_head(m, HK_K, 0, 2, PART_ALL, &v), "K head 2 out of range: this model has KV heads 0-1");
    CHECK_ERR(model_head(m, HK_O, 0, 4, PART_ALL, &v), "O head 4 out of range: this model has query heads 0-3");
    CHECK_ERR(model_head(m, HK_Q, 2, 0, PART_ALL, &v), "layer 2 out of range: this model has layers 0-1");
    CHECK_ERR(model_head(m, HK_Q, -1, 0, PART_ALL, &v), "layer -1 out of range");
    CHECK_ERR(model_head(m, HK_V, 0, -1, PART_ALL, &v), "V head -1 out of range");
    CHECK_ERR(model_layer_load(m, 5), "layer 5 out of range");
    CHECK(v == NULL, "no view on error");
    check_bias(m, HK_Q, 0, 1, 0, 0, 0);           /* no biases: NULL, 0 */
    model_free(m);
}

/* ---------------------------------------------------------------- Qwen2 biases */

/* hidden 16, 4 heads, 2 KV heads, head_dim 4; q/k/v biases, no o bias. */
static void test_qwen2(void) {
    st_writer *w = st_writer_new();
    add_enc(w, "model.layers.0.self_attn.q_proj.weight", 1, 16, 16);
    add_enc(w, "model.layers.0.self_attn.k_proj.weight", 2, 8, 16);
    add_enc(w, "model.layers.0.self_attn.v_proj.weight", 3, 8, 16);
    add_enc(w, "model.layers.0.self_attn.o_proj.weight", 4, 16, 16);
    add_enc(w, "model.layers.0.self_attn.q_proj.bias", 5, 0, 16);
    add_enc(w, "model.layers.0.self_attn.k_proj.bias", 6, 0, 8);
    add_enc(w, "model.layers.0.self_attn.v_proj.bias", 7, 0, 8);
    Model *m = open_model("qwen2", "{\"model_type\": \"qwen2\", \"hidden_size\": 16, \"num_attention_heads\": 4, "
                          "\"num_key_value_heads\": 2, \"num_hidden_layers\": 1, \"tie_word_embeddings\": true}", w);
    if (!m) return;
    const ModelConfig *c = &m->cfg;
    CHECK(c->family == FAM_QWEN2 && c->qkv_bias && !c->o_bias && c->tie_embeddings, "qwen2 cfg");
    CHECK(c->qk_rope_dim == 4 && c->v_dim == 4 && c->rope == ROPE_HALF, "head dim 16/4");
    CHECK(cfg_attn_params(c) == 16 * (16 + 8 + 8) + 16 * 16 + (16 + 8 + 8), "params %zu", cfg_attn_params(c));
    for (int h = 0; h < 4; h++) {
        int g = cfg_kv_group(c, h);
        check_bias(m, HK_Q, 0, h, 4, 5, (size_t)h * 4);
        check_bias(m, HK_K, 0, g, 4, 6, (size_t)g * 4);
        check_bias(m, HK_V, 0, g, 4, 7, (size_t)g * 4);
        check_bias(m, HK_O, 0, h, 0, 0, 0);
        Mat *v;
        check_t(v = view(m, HK_K, 0, g, PART_ALL), "qwen2 K", 16, 4, enc_f32, 2, (size_t)g * 4, 0);
        mat_free(v);
    }
    float *b = NULL;
    size_t n;
    CHECK_ERR(model_head_bias(m, HK_K, 0, 2, &b, &n), "K head 2 out of range");
    model_free(m);
}

/* ---------------------------------------------------------------- DeepSeek MLA */

/* hidden 40, 3 heads, kv_lora 20, qk_nope 8, qk_rope 4, v 6; with q_lora 24, or none (q_proj).
 * tids: q_a 1, q_b / q_proj 2, kv_a 3, kv_b 4, o 5. */
static void check_mla(Model *m, enc_fn E, int H, size_t D, size_t ql, size_t kl, size_t nope, size_t rope, size_t dv) {
    size_t din_q = ql ? ql : D, dqk = nope + rope;
    for (int h = 0; h < H; h++) {
        char what[64];
        Mat *v;
        snprintf(what, sizeof what, "MLA Q%d", h);
        check_t(v = view(m, HK_Q, 0, h, PART_ALL), what, din_q, dqk, E, 2, (size_t)h * dqk, 0);
        mat_free(v);
        snprintf(what, sizeof what, "MLA Q%d nope", h);
        check_t(v = view(m, HK_Q, 0, h, PART_NOPE), what, din_q, nope, E, 2, (size_t)h * dqk, 0);
        mat_free(v);
        snprintf(what, sizeof what, "MLA Q%d rope", h);
        check_t(v = view(m, HK_Q, 0, h, PART_ROPE), what, din_q, rope, E, 2, (size_t)h * dqk + nope, 0);
        mat_free(v);
        /* kv_b_proj rows, head by head: nope rows of K, then dv rows of V */
        snprintf(what, sizeof what, "MLA K%d nope", h);
        check_t(v = view(m, HK_K, 0, h, PART_NOPE), what, kl, nope, E, 4, (size_t)h * (nope + dv), 0);
        mat_free(v);
        snprintf(what, sizeof what, "MLA V%d", h);
        check_t(v = view(m, HK_V, 0, h, PART_ALL), what, kl, dv, E, 4, (size_t)h * (nope + dv) + nope, 0);
        mat_free(v);
        /* the shared RoPE key: the last rope rows of kv_a_proj_with_mqa, same for every head */
        snprintf(what, sizeof what, "MLA K%d rope", h);
        check_t(v = view(m, HK_K, 0, h, PART_ROPE), what, D, rope, E, 3, kl, 0);
        mat_free(v);
        snprintf(what, sizeof what, "MLA O%d", h);
        check_t(v = view(m, HK_O, 0, h, PART_ALL), what, dv, D, E, 5, 0, (size_t)h * dv);
        mat_free(v);
    }
    Mat *v = NULL;
    CHECK_ERR(model_head(m, HK_K, 0, 0, PART_ALL, &v), "ask for the nope or the rope part");
    check_bias(m, HK_Q, 0, 0, 0, 0, 0);
}

static const char *ds_config(char *buf, size_t cap, const char *q_lora) {
    snprintf(buf, cap, "{\"model_type\": \"deepseek_v3\", \"architectures\": [\"DeepseekV3ForCausalLM\"], "
             "\"hidden_size\": 40, \"num_attention_heads\": 3, \"num_key_value_heads\": 3, \"num_hidden_layers\": 1, "
             "%s \"kv_lora_rank\": 20, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 6, "
             "\"rope_theta\": 10000, \"vocab_size\": 50}", q_lora);
    return buf;
}

static void test_deepseek(void) {
    char cfgbuf[1024];
    /* with a query latent */
    st_writer *w = st_writer_new();
    add_enc(w, "model.layers.0.self_attn.q_a_proj.weight", 1, 24, 40);
    add_enc(w, "model.layers.0.self_attn.q_b_proj.weight", 2, 36, 24);
    add_enc(w, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 3, 24, 40);
    add_enc(w, "model.layers.0.self_attn.kv_b_proj.weight", 4, 42, 20);
    add_enc(w, "model.layers.0.self_attn.o_proj.weight", 5, 40, 18);
    Model *m = open_model("ds", ds_config(cfgbuf, sizeof cfgbuf, "\"q_lora_rank\": 24,"), w);
    if (m) {
        const ModelConfig *c = &m->cfg;
        CHECK(c->family == FAM_DEEPSEEK && cfg_is_mla(c) && c->n_kv_heads == 3 && c->rope == ROPE_INTERLEAVED, "ds cfg");
        CHECK(c->q_lora_rank == 24 && c->kv_lora_rank == 20 && cfg_d_in_q(c) == 24 && cfg_d_in_kv(c) == 20, "ranks");
        CHECK(cfg_d_qk(c) == 12 && c->v_dim == 6 && c->latent_norm, "dims");
        for (int h = 0; h < 3; h++) CHECK(cfg_kv_group(c, h) == h, "MLA: g = h");
        CHECK(cfg_attn_params(c) == 24 * 40 + 24 + 3 * 12 * 24 + 24 * 40 + 20 + 3 * 14 * 20 + 40 * 18, "params %zu",
              cfg_attn_params(c));
        CHECK(cfg_kv_values(c) == 24, "kv values");
        check_mla(m, enc_f32, 3, 40, 24, 20, 8, 4, 6);
        CHECK_OK(model_layer_load(m, 0));
        check_mla(m, enc_f32, 3, 40, 24, 20, 8, 4, 6);
        model_free(m);
    }
    /* q_lora_rank null (DeepSeek-V2-Lite style): Q views come from q_proj over hidden states */
    for (int variant = 0; variant < 2; variant++) {
        w = st_writer_new();
        add_enc(w, "model.layers.0.self_attn.q_proj.weight", 2, 36, 40);
        add_enc(w, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 3, 24, 40);
        add_enc(w, "model.layers.0.self_attn.kv_b_proj.weight", 4, 42, 20);
        add_enc(w, "model.layers.0.self_attn.o_proj.weight", 5, 40, 18);
        m = open_model(variant ? "ds_noq2" : "ds_noq",
                       ds_config(cfgbuf, sizeof cfgbuf, variant ? "" : "\"q_lora_rank\": null,"), w);
        if (!m) continue;
        CHECK(m->cfg.q_lora_rank == 0 && cfg_d_in_q(&m->cfg) == 40, "no query latent");
        CHECK(cfg_attn_params(&m->cfg) == 3 * 12 * 40 + 24 * 40 + 20 + 3 * 14 * 20 + 40 * 18, "params %zu",
              cfg_attn_params(&m->cfg));
        check_mla(m, enc_f32, 3, 40, 0, 20, 8, 4, 6);
        model_free(m);
    }
}

/* ---------------------------------------------------------------- DeepSeek FP8 */

typedef struct { Model *m; int bad; } thread_arg;

/* Reads every head view of layer 0 and counts mismatches with enc_fp8 (for the thread test). */
static void *fp8_reader(void *p) {
    thread_arg *a = p;
    for (int h = 0; h < 2; h++) {
        Mat *v = NULL;
        if (model_head(a->m, HK_V, 0, h, PART_ALL, &v) != AL_OK) { a->bad++; continue; }
        for (size_t i = 0; i < v->rows; i++)
            for (size_t j = 0; j < v->cols; j++) a->bad += *mat_at(v, i, j) != enc_fp8(4, (size_t)h * 130 + 64 + j, i);
        mat_free(v);
    }
    return NULL;
}

/* hidden 136, 2 heads, q_lora 130, kv_lora 132, nope 64, rope 8, v 66: every weight has a partial
 * edge block (q_b 144 x 130, kv_a 140 x 136, kv_b 260 x 132, o 136 x 132). */
static void test_deepseek_fp8(void) {
    st_writer *w = st_writer_new();
    add_fp8(w, "model.layers.0.self_attn.q_a_proj.weight", 1, 130, 136);
    add_fp8(w, "model.layers.0.self_attn.q_b_proj.weight", 2, 144, 130);
    add_fp8(w, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 3, 140, 136);
    add_fp8(w, "model.layers.0.self_attn.kv_b_proj.weight", 4, 260, 132);
    add_fp8(w, "model.layers.0.self_attn.o_proj.weight", 5, 136, 132);
    Model *m = open_model("ds_fp8", "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 136, \"num_attention_heads\": 2, "
                          "\"num_hidden_layers\": 1, \"q_lora_rank\": 130, \"kv_lora_rank\": 132, \"qk_nope_head_dim\": 64, "
                          "\"qk_rope_head_dim\": 8, \"v_head_dim\": 66}", w);
    if (!m) return;
    CHECK(m->cfg.dtype == DT_F8_E4M3, "storage dtype %s", dt_name(m->cfg.dtype));
    check_mla(m, enc_fp8, 2, 136, 130, 132, 64, 8, 66);
    /* the views are slices of exactly what store_read dequantizes */
    Mat *full = NULL, *v = NULL;
    CHECK_OK(store_read(m->store, "model.layers.0.self_attn.kv_b_proj.weight", &full));
    CHECK_OK(model_head(m, HK_V, 0, 1, PART_ALL, &v));
    if (full && v) {
        size_t bad = 0;
        for (size_t i = 0; i < v->rows; i++)
            for (size_t j = 0; j < v->cols; j++) bad += *mat_at(v, i, j) != *mat_at(full, 130 + 64 + j, i);
        CHECK(bad == 0, "V1 vs the dequantized kv_b_proj: %zu differ", bad);
        /* rows 256..259 are the last partial row block: the last V rows of head 1 */
        CHECK(*mat_at(v, 131, 65) == enc_fp8(4, 259, 131) && enc_fp8(4, 259, 131) != 0, "corner of the last block");
    }
    mat_free(full);
    mat_free(v);
    /* after model_layer_load the views are safe from several threads */
    CHECK_OK(model_layer_load(m, 0));
    pthread_t th[3];
    thread_arg args[3] = {{m, 0}, {m, 0}, {m, 0}};
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, fp8_reader, &args[i]);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(args[0].bad + args[1].bad + args[2].bad == 0, "threaded views: %d wrong", args[0].bad + args[1].bad + args[2].bad);
    model_free(m);
}

/* ---------------------------------------------------------------- GPT-2 */

/* n_embd 24, 3 heads of 8, 2 layers; Conv1D stores (in, out): c_attn (24, 72) = [Q | K | V]. */
static void test_gpt2(bool prefixed) {
    const char *pre = prefixed ? "transformer." : "";
    st_writer *w = st_writer_new();
    char n[128];
    for (int L = 0; L < 2; L++) {
        snprintf(n, sizeof n, "%sh.%d.attn.c_attn.weight", pre, L);
        add_enc(w, n, L * 16 + 1, 24, 72);
        snprintf(n, sizeof n, "%sh.%d.attn.c_attn.bias", pre, L);
        add_enc(w, n, L * 16 + 2, 0, 72);
        snprintf(n, sizeof n, "%sh.%d.attn.c_proj.weight", pre, L);
        add_enc(w, n, L * 16 + 3, 24, 24);
        snprintf(n, sizeof n, "%sh.%d.attn.c_proj.bias", pre, L);
        add_enc(w, n, L * 16 + 4, 0, 24);
    }
    Model *m = open_model(prefixed ? "gpt2" : "gpt2_bare", "{\"model_type\": \"gpt2\", \"n_embd\": 24, \"n_head\": 3, "
                          "\"n_layer\": 2, \"n_positions\": 64, \"vocab_size\": 10}", w);
    if (!m) return;
    const ModelConfig *c = &m->cfg;
    CHECK(c->family == FAM_GPT2 && c->rope == ROPE_NONE && c->qkv_bias && c->o_bias, "gpt2 cfg");
    CHECK(c->qk_nope_dim == 8 && c->qk_rope_dim == 0 && c->v_dim == 8 && c->intermediate == 96, "gpt2 dims");
    CHECK(strcmp(c->prefix, prefixed ? "transformer." : "") == 0, "prefix '%s'", c->prefix);
    CHECK(cfg_attn_params(c) == 24 * 72 + 24 * 24 + 72 + 24, "params %zu", cfg_attn_params(c));
    for (int L = 1; L >= 0; L--)
        for (int h = 0; h < 3; h++) {
            char what[64];
            Mat *v;
            snprintf(what, sizeof what, "gpt2 L%d Q%d", L, h);
            check_s(v = view(m, HK_Q, L, h, PART_ALL), what, 24, 8, enc_f32, L * 16 + 1, 0, (size_t)h * 8);
            mat_free(v);
            snprintf(what, sizeof what, "gpt2 L%d Q%d nope", L, h);
            check_s(v = view(m, HK_Q, L, h, PART_NOPE), what, 24, 8, enc_f32, L * 16 + 1, 0, (size_t)h * 8);
            mat_free(v);
            snprintf(what, sizeof what, "gpt2 L%d K%d", L, h);
            check_s(v = view(m, HK_K, L, h, PART_ALL), what, 24, 8, enc_f32, L * 16 + 1, 0, 24 + (size_t)h * 8);
            mat_free(v);
            snprintf(what, sizeof what, "gpt2 L%d V%d", L, h);
            check_s(v = view(m, HK_V, L, h, PART_ALL), what, 24, 8, enc_f32, L * 16 + 1, 0, 48 + (size_t)h * 8);
            mat_free(v);
            snprintf(what, sizeof what, "gpt2 L%d O%d", L, h);
            check_s(v = view(m, HK_O, L, h, PART_ALL), what, 8, 24, enc_f32, L * 16 + 3, (size_t)h * 8, 0);
            mat_free(v);
            check_bias(m, HK_Q, L, h, 8, L * 16 + 2, (size_t)h * 8);
            check_bias(m, HK_K, L, h, 8, L * 16 + 2, 24 + (size_t)h * 8);
            check_bias(m, HK_V, L, h, 8, L * 16 + 2, 48 + (size_t)h * 8);
        }
    Mat *v = NULL;
    CHECK_ERR(model_head(m, HK_Q, 0, 0, PART_ROPE, &v), "has no RoPE dims");
    model_free(m);
}


/* ---------------------------------------------------------------- Phi-3 fused qkv_proj */

/* hidden 24, 4 heads, 2 KV heads, head_dim 6, partial_rotary_factor 0.5 (3 of 6 -> 2 rotary dims
 * rounded to even): qkv_proj (24 + 12 + 12, 24) rows [Q heads ; K heads ; V heads], o_proj (24, 24). */
static void test_phi3(void) {
    st_writer *w = st_writer_new();
    add_enc(w, "model.layers.0.self_attn.qkv_proj.weight", 1, 48, 24);
    add_enc(w, "model.layers.0.self_attn.o_proj.weight", 2, 24, 24);
    Model *m = open_model("phi3", "{\"model_type\": \"phi3\", \"hidden_size\": 24, \"num_attention_heads\": 4, "
                          "\"num_key_value_heads\": 2, \"num_hidden_layers\": 1, \"partial_rotary_factor\": 0.5}", w);
    if (!m) return;
    const ModelConfig *c = &m->cfg;
    CHECK(c->attn == QKV_CAT && c->rope_first && c->qk_rope_dim == 2 && c->qk_nope_dim == 4, "phi3 partial rotary: rope %d nope %d",
          c->qk_rope_dim, c->qk_nope_dim);
    CHECK(cfg_attn_params(c) == 24 * 48 + 24 * 24, "params %zu", cfg_attn_params(c));
    for (int h = 0; h < 4; h++) {
        char what[64];
        Mat *v;
        int g = cfg_kv_group(c, h);
        snprintf(what, sizeof what, "phi3 Q%d", h);
        check_t(v = view(m, HK_Q, 0, h, PART_ALL), what, 24, 6, enc_f32, 1, (size_t)h * 6, 0);
        mat_free(v);
        snprintf(what, sizeof what, "phi3 Q%d rope (first 2 dims)", h);
        check_t(v = view(m, HK_Q, 0, h, PART_ROPE), what, 24, 2, enc_f32, 1, (size_t)h * 6, 0);
        mat_free(v);
        snprintf(what, sizeof what, "phi3 Q%d nope (last 4 dims)", h);
        check_t(v = view(m, HK_Q, 0, h, PART_NOPE), what, 24, 4, enc_f32, 1, (size_t)h * 6 + 2, 0);
        mat_free(v);
        snprintf(what, sizeof what, "phi3 K%d", g);
        check_t(v = view(m, HK_K, 0, g, PART_ALL), what, 24, 6, enc_f32, 1, 24 + (size_t)g * 6, 0);
        mat_free(v);
        snprintf(what, sizeof what, "phi3 K%d nope", g);
        check_t(v = view(m, HK_K, 0, g, PART_NOPE), what, 24, 4, enc_f32, 1, 24 + (size_t)g * 6 + 2, 0);
        mat_free(v);
        snprintf(what, sizeof what, "phi3 V%d", g);
        check_t(v = view(m, HK_V, 0, g, PART_ALL), what, 24, 6, enc_f32, 1, 36 + (size_t)g * 6, 0);
        mat_free(v);
        snprintf(what, sizeof what, "phi3 O%d", h);
        check_t(v = view(m, HK_O, 0, h, PART_ALL), what, 6, 24, enc_f32, 2, 0, (size_t)h * 6);
        mat_free(v);
    }
    CHECK_OK(model_layer_load(m, 0));               /* the cached layer gives the same slices */
    Mat *v;
    check_t(v = view(m, HK_V, 0, 1, PART_ALL), "phi3 V1 cached", 24, 6, enc_f32, 1, 42, 0);
    mat_free(v);
    check_bias(m, HK_Q, 0, 0, 0, 0, 0);
    float *ob = (float *)1;
    CHECK_OK(model_o_bias(m, 0, &ob));
    CHECK(ob == NULL, "phi3 has no o bias");
    model_free(m);
}

/* ---------------------------------------------------------------- GPT-NeoX query_key_value */

/* The explicitly formed HF tensors: W (3D, D) viewed as (H, 3, hd, D) -- head h's rows
 * [q_h ; k_h ; v_h] start at 3 hd h. hidden 32, 4 heads of 8, rotary_pct 0.25 (2 rotary dims),
 * 2 layers, biases on query_key_value and dense. */
static void test_neox(void) {
    st_writer *w = st_writer_new();
    char n[128];
    for (int L = 0; L < 2; L++) {
        snprintf(n, sizeof n, "gpt_neox.layers.%d.attention.query_key_value.weight", L);
        add_enc(w, n, L * 16 + 1, 96, 32);
        snprintf(n, sizeof n, "gpt_neox.layers.%d.attention.query_key_value.bias", L);
        add_enc(w, n, L * 16 + 2, 0, 96);
        snprintf(n, sizeof n, "gpt_neox.layers.%d.attention.dense.weight", L);
        add_enc(w, n, L * 16 + 3, 32, 32);
        snprintf(n, sizeof n, "gpt_neox.layers.%d.attention.dense.bias", L);
        add_enc(w, n, L * 16 + 4, 0, 32);
    }
    Model *m = open_model("neox", "{\"model_type\": \"gpt_neox\", \"hidden_size\": 32, \"num_attention_heads\": 4, "
                          "\"num_hidden_layers\": 2, \"rotary_pct\": 0.25, \"vocab_size\": 50}", w);
    if (!m) return;
    const ModelConfig *c = &m->cfg;
    CHECK(c->attn == QKV_HEADS && c->rope_first && c->qk_rope_dim == 2 && c->qk_nope_dim == 6 && c->n_kv_heads == 4,
          "neox dims: rope %d nope %d", c->qk_rope_dim, c->qk_nope_dim);
    CHECK(cfg_rope_col(c) == 0 && cfg_nope_col(c) == 2, "rotary columns first");
    CHECK(cfg_attn_params(c) == 32 * 96 + 32 * 32 + 96 + 32, "params %zu", cfg_attn_params(c));
    char *tn = model_tensor_name(m, 1, "attention.dense.weight");
    CHECK(tn && strcmp(tn, "gpt_neox.layers.1.attention.dense.weight") == 0, "tensor name %s", tn);
    free(tn);
    for (int t = 0; t < 2; t++) {
        if (t == 1) CHECK_OK(model_layer_load(m, 1));
        for (int L = 0; L < 2; L++)
            for (int h = 0; h < 4; h++) {
                char what[64];
                Mat *v;
                size_t row = (size_t)h * 24;
                int tid = L * 16 + 1;
                snprintf(what, sizeof what, "neox L%d Q%d", L, h);
                check_t(v = view(m, HK_Q, L, h, PART_ALL), what, 32, 8, enc_f32, tid, row, 0);
                mat_free(v);
                snprintf(what, sizeof what, "neox L%d Q%d rope", L, h);
                check_t(v = view(m, HK_Q, L, h, PART_ROPE), what, 32, 2, enc_f32, tid, row, 0);
                mat_free(v);
                snprintf(what, sizeof what, "neox L%d Q%d nope", L, h);
                check_t(v = view(m, HK_Q, L, h, PART_NOPE), what, 32, 6, enc_f32, tid, row + 2, 0);
                mat_free(v);
                snprintf(what, sizeof what, "neox L%d K%d", L, h);
                check_t(v = view(m, HK_K, L, h, PART_ALL), what, 32, 8, enc_f32, tid, row + 8, 0);
                mat_free(v);
                snprintf(what, sizeof what, "neox L%d K%d nope", L, h);
                check_t(v = view(m, HK_K, L, h, PART_NOPE), what, 32, 6, enc_f32, tid, row + 10, 0);
                mat_free(v);
                snprintf(what, sizeof what, "neox L%d V%d", L, h);
                check_t(v = view(m, HK_V, L, h, PART_ALL), what, 32, 8, enc_f32, tid, row + 16, 0);
                mat_free(v);
                snprintf(what, sizeof what, "neox L%d O%d", L, h);
                check_t(v = view(m, HK_O, L, h, PART_ALL), what, 8, 32, enc_f32, L * 16 + 3, 0, (size_t)h * 8);
                mat_free(v);
                check_bias(m, HK_Q, L, h, 8, L * 16 + 2, row);
                check_bias(m, HK_K, L, h, 8, L * 16 + 2, row + 8);
                check_bias(m, HK_V, L, h, 8, L * 16 + 2, row + 16);
            }
    }
    float *ob = NULL;
    CHECK_OK(model_o_bias(m, 1, &ob));
    size_t bad = 0;
    for (size_t i = 0; ob && i < 32; i++) bad += ob[i] != enc_f32(16 + 4, 0, i);
    CHECK(ob && bad == 0, "neox dense bias: %zu wrong", bad);
    free(ob);
    model_free(m);
}

/* ---------------------------------------------------------------- split layouts with q/k norms */

/* Qwen3 / Gemma 3 (per-head q_norm / k_norm of head_dim) and OLMo 2 (over the whole projection),
 * Gemma 2 and Mixtral (plain): q/k/v/o_proj views as Llama's; the norm kind comes from the
 * tensors. hidden 16, 4 heads, 2 KV heads, head_dim 8 (explicit, != 16 / 4). */
static void test_split_families(void) {
    static const struct { const char *type; int qn, kn; qk_norm_kind want; } fam[] = {
        {"qwen3", 8, 8, QKN_HEAD}, {"qwen3_moe", 8, 8, QKN_HEAD}, {"gemma3_text", 8, 8, QKN_HEAD},
        {"olmo2", 32, 16, QKN_PROJ}, {"gemma2", 0, 0, QKN_NONE}, {"mixtral", 0, 0, QKN_NONE}};
    for (size_t f = 0; f < sizeof fam / sizeof *fam; f++) {
        st_writer *w = st_writer_new();
        add_enc(w, "model.layers.0.self_attn.q_proj.weight", 1, 32, 16);
        add_enc(w, "model.layers.0.self_attn.k_proj.weight", 2, 16, 16);
        add_enc(w, "model.layers.0.self_attn.v_proj.weight", 3, 16, 16);
        add_enc(w, "model.layers.0.self_attn.o_proj.weight", 4, 16, 32);
        if (fam[f].qn) {
            add_enc(w, "model.layers.0.self_attn.q_norm.weight", 5, 0, (size_t)fam[f].qn);
            add_enc(w, "model.layers.0.self_attn.k_norm.weight", 6, 0, (size_t)fam[f].kn);
        }
        char cfg[512], sub[32];
        snprintf(cfg, sizeof cfg, "{\"model_type\": \"%s\", \"hidden_size\": 16, \"num_attention_heads\": 4, "
                 "\"num_key_value_heads\": 2, \"head_dim\": 8, \"num_hidden_layers\": 1}", fam[f].type);
        snprintf(sub, sizeof sub, "split_%zu", f);
        Model *m = open_model(sub, cfg, w);
        if (!m) continue;
        CHECK(m->cfg.qk_norm == fam[f].want, "%s: qk norm %s", fam[f].type, qk_norm_name(m->cfg.qk_norm));
        for (int h = 0; h < 4; h++) {
            char what[64];
            Mat *v;
            int g = cfg_kv_group(&m->cfg, h);
            snprintf(what, sizeof what, "%s Q%d", fam[f].type, h);
            check_t(v = view(m, HK_Q, 0, h, PART_ALL), what, 16, 8, enc_f32, 1, (size_t)h * 8, 0);
            mat_free(v);
            snprintf(what, sizeof what, "%s K%d", fam[f].type, g);
            check_t(v = view(m, HK_K, 0, g, PART_ALL), what, 16, 8, enc_f32, 2, (size_t)g * 8, 0);
            mat_free(v);
            snprintf(what, sizeof what, "%s V%d", fam[f].type, g);
            check_t(v = view(m, HK_V, 0, g, PART_ALL), what, 16, 8, enc_f32, 3, (size_t)g * 8, 0);
            mat_free(v);
            snprintf(what, sizeof what, "%s O%d", fam[f].type, h);
            check_t(v = view(m, HK_O, 0, h, PART_ALL), what, 8, 16, enc_f32, 4, 0, (size_t)h * 8);
            mat_free(v);
        }
        model_free(m);
    }
}

int main(void) {
    snprintf(tu_dir, sizeof tu_dir, "%s", test_tmpdir());
    test_llama();
    test_qwen2();
    test_deepseek();
    test_deepseek_fp8();
    test_gpt2(true);
    test_gpt2(false);
    test_phi3();
    test_neox();
    test_split_families();
    return check_done();
}
