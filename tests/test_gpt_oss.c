/* test_gpt_oss.c -- what gpt-oss adds, each checked so that it fails when the feature is switched
 * off (test_families checks the recipe's logits against tests/ref_forward.c; here the features one
 * at a time, on copies of the recipe's checkpoint with one tensor changed):
 *   (a) the sinks: with self_attn.sinks at -1e30 (a sink that never wins) attnlab's logits move
 *       by more than 5 % of their range, and still equal the reference's on that copy -- a pass
 *       that ignored the sinks would give the same logits on both checkpoints;
 *   (b) the one attention core: every layer overridden by its own AttnLayer (attn_eval, the path
 *       of `truncate`, `compare`, `ppl` after a transform) gives the logits of the plain pass --
 *       fails if attn_eval drops the sink;
 *   (c) the clamped SwiGLU: with gate_up_proj x 8 most gate / up values pass the limit 7, and the
 *       logits still equal the reference's (which clamps as modeling_gpt_oss does);
 *   (d) `truncate` in YaRN: the inverse frequencies with truncate false differ from truncate true
 *       at the recipe's dims (ramp bounds 0 .. 3.1 vs 0 .. 4);
 *   (e) openai/gpt-oss-20b's config.json read into the description (windows per layer, YaRN with
 *       truncate false, sinks, biases, experts, tensor names), and GptOssConfig's defaults;
 *   (f) experts in MXFP4 as released (blocks [E, 2I, D/32, 16], scales [E, 2I, D/32]): `ranks vo`
 *       and `ppl` available, the perplexity equal to the F32 twin's with the dequantized values;
 *   (g) a folder with gpt-oss-20b's config.json and the release's tensor names, dtypes and shapes
 *       (a sparse file of zeros) loads with the right description and analyses.
 * The README's and info's statements about the sinks are in cli_gpt_oss. */
#define _GNU_SOURCE
#include "check.h"
#include <cjson/cJSON.h>
#include "analyses.h"
#include "attn_eval.h"
#include "config.h"
#include "forward.h"
#include "model.h"
#include "ref_forward.h"
#include "rope.h"
#include "safetensors.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T 24

static void ids_for(int *ids, size_t n, size_t V) {
    unsigned s = 5;
    for (size_t i = 0; i < n; i++) { s = s * 1103515245u + 12345u; ids[i] = (int)((s >> 8) % V); }
}

/* attnlab's logits (T, V) of the checkpoint in dir, every layer overridden by its own AttnLayer
 * when own. */
static float *logits_of(const char *dir, bool own, size_t *V) {
    Model *m = NULL;
    Forward *f = NULL;
    AttnLayer *L[8] = {0};
    float *z = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    for (int l = 0; f && own && l < m->cfg.n_layers && l < 8; l++) {
        CHECK_OK(attn_layer_load(m, l, &L[l]));
        CHECK(L[l] && L[l]->sinks, "layer %d: the AttnLayer holds the sinks", l);
        CHECK_OK(fwd_set_attn(f, l, L[l]));
    }
    if (f) {
        *V = fwd_vocab(f);
        int ids[T];
        ids_for(ids, T, *V);
        z = malloc(T * *V * sizeof *z);
        CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z));
    }
    fwd_free(f);
    for (int l = 0; l < 8; l++) attn_layer_free(L[l]);
    model_free(m);
    return z;
}

/* max |a - b| / max |b| over n values (b double, or float when bf). */
static double rel_diff(const float *a, const double *b, const float *bf, size_t n) {
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double y = b ? b[i] : bf[i];
        d = fmax(d, fabs(a[i] - y));
        r = fmax(r, fabs(y));
    }
    return d / r;
}

/* A copy of src in dst with every tensor whose name ends in `what` changed by edit (NULL: kept) and
 * renamed with suffix appended (NULL: its name). */
static int copy_edited(const char *src, const char *dst, const char *what, void (*edit)(float *a, size_t n),
                       const char *suffix) {
    char *sp = al_asprintf("%s/model.safetensors", src), *dp = al_asprintf("%s/model.safetensors", dst);
    char *sc = al_asprintf("%s/config.json", src), *dc = al_asprintf("%s/config.json", dst);
    st_file *st = NULL;
    st_writer *w = st_writer_new();
    int rc = sp && dp && w && (mkdir(dst, 0755) == 0 || access(dst, F_OK) == 0) ? st_open(sp, &st) : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < st_count(st); i++) {
        const st_entry *e = st_entry_at(st, i);
        size_t n = st_numel(e);
        float *a = malloc(n * sizeof *a);
        rc = a ? dt_to_f32(e->dtype, st_data(st, e), n, a) : AL_ERR;
        size_t ln = strlen(e->name), lw = strlen(what);
        bool hit = ln >= lw && !strcmp(e->name + ln - lw, what);
        char name[256];
        snprintf(name, sizeof name, "%s%s", e->name, hit && suffix ? suffix : "");
        if (rc == AL_OK && hit && edit) edit(a, n);
        if (rc == AL_OK) rc = st_writer_add(w, name, DT_F32, e->ndim, e->shape, a, n * sizeof(float));
        free(a);
    }
    if (rc == AL_OK) rc = st_writer_write(w, dp);
    size_t n = 0;
    char *text = rc == AL_OK ? al_read_file(sc, &n) : NULL;
    FILE *f = text ? fopen(dc, "w") : NULL;
    if (rc == AL_OK && !(f && fwrite(text, 1, n, f) == n)) rc = al_err("cannot write %s", dc);
    if (f) fclose(f);
    free(text);
    if (st) st_close(st);
    st_writer_free(w);
    free(sp); free(dp); free(sc); free(dc);
    return rc;
}

static void sinks_off(float *a, size_t n) { for (size_t i = 0; i < n; i++) a[i] = -1e30f; }
static void times8(float *a, size_t n) { for (size_t i = 0; i < n; i++) a[i] *= 8; }

/* The E2M1 code nearest v / 2^k (sign bit 3). */
static uint8_t e2m1_nearest(float v, int k) {
    uint8_t best = 0;
    for (uint8_t c = 1; c < 16; c++)
        if (fabsf(ldexpf(dt_e2m1_to_f32(c), k) - v) < fabsf(ldexpf(dt_e2m1_to_f32(best), k) - v)) best = c;
    return best;
}

/* Parameter P (E, A, B) (x @ W, gpt-oss's layout) quantized to MXFP4 as the release stores it
 * (transformers' convert_moe_packed_tensors read backwards): blocks (E, B, A/32, 16), expert e's row
 * j holding P[e, :, j], element 2t in the low nibble of byte t, one E8M0 scale per 32 (scales
 * (E, B, A/32)); P is overwritten with the dequantized values (exact in float). */
static void mxfp4_pack(float *P, size_t E, size_t A, size_t B, uint8_t *blk, uint8_t *sc) {
    size_t G = A / 32;
    for (size_t e = 0; e < E; e++)
        for (size_t j = 0; j < B; j++)
            for (size_t g = 0; g < G; g++) {
                float amax = 0;
                for (size_t t = 0; t < 32; t++) amax = fmaxf(amax, fabsf(P[(e * A + g * 32 + t) * B + j]));
                int k = amax > 0 ? (int)ceil(log2(amax / 6.0)) : 0;
                sc[(e * B + j) * G + g] = (uint8_t)(k + 127);
                uint8_t *by = blk + ((e * B + j) * G + g) * 16;
                for (size_t t = 0; t < 32; t++) {
                    float *v = &P[(e * A + g * 32 + t) * B + j];
                    uint8_t c = e2m1_nearest(*v, k);
                    by[t / 2] = (uint8_t)(t % 2 ? (by[t / 2] | c << 4) : c);
                    *v = ldexpf(dt_e2m1_to_f32(c), k);
                }
            }
}

/* Two copies of src: qd with every layer's experts (gate_up_proj, down_proj) in MXFP4 as released,
 * fd with the same values dequantized in F32 (every other tensor F32 as in src). */
static int mxfp4_twins(const char *src, const char *qd, const char *fd, int bad) {
    char *sp = al_asprintf("%s/model.safetensors", src), *sc = al_asprintf("%s/config.json", src);
    st_file *st = NULL;
    st_writer *wq = st_writer_new(), *wf = st_writer_new();
    int rc = sp && wq && wf ? st_open(sp, &st) : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < st_count(st); i++) {
        const st_entry *e = st_entry_at(st, i);
        size_t n = st_numel(e);
        float *a = malloc(n * sizeof *a);
        rc = a ? dt_to_f32(e->dtype, st_data(st, e), n, a) : AL_ERR;
        bool ex = e->ndim == 3 && strstr(e->name, "mlp.experts.") && !strstr(e->name, "bias");   /* gate_up, down */
        if (rc == AL_OK && ex) {
            size_t E = e->shape[0], A = e->shape[1], B = e->shape[2], bs[4] = {E, B, A / 32, 16};
            uint8_t *blk = calloc(n / 2, 1), *scl = calloc(n / 32, 1);
            char nb[256], ns[256];
            snprintf(nb, sizeof nb, "%s_blocks", e->name);
            snprintf(ns, sizeof ns, "%s_scales", e->name);
            CHECK(A % 32 == 0, "'%s': %zu rows, a multiple of 32", e->name, A);
            mxfp4_pack(a, E, A, B, blk, scl);
            if (bad == 1 && scl) scl[n / 32 - 1] = 0xFF;                          /* a NaN E8M0 scale */
            size_t ss[3] = {E, B, A / 32};
            if (bad == 2) ss[1] = B * (A / 32), ss[2] = 1;                      /* right count, wrong shape */
            rc = blk && scl ? st_writer_add(wq, nb, DT_U8, 4, bs, blk, n / 2) : AL_ERR;
            if (rc == AL_OK) rc = st_writer_add(wq, ns, DT_U8, 3, ss, scl, n / 32);
            free(blk); free(scl);
        } else if (rc == AL_OK)
            rc = st_writer_add(wq, e->name, DT_F32, e->ndim, e->shape, a, n * sizeof(float));
        if (rc == AL_OK) rc = st_writer_add(wf, e->name, DT_F32, e->ndim, e->shape, a, n * sizeof(float));
        free(a);
    }
    const char *dirs[2] = {qd, fd};
    st_writer *ws[2] = {wq, wf};
    size_t n = 0;
    char *text = rc == AL_OK ? al_read_file(sc, &n) : NULL;
    for (int k = 0; rc == AL_OK && k < 2; k++) {
        char *dp = al_asprintf("%s/model.safetensors", dirs[k]), *dc = al_asprintf("%s/config.json", dirs[k]);
        rc = mkdir(dirs[k], 0755) == 0 || access(dirs[k], F_OK) == 0 ? st_writer_write(ws[k], dp) : AL_ERR;
        FILE *f = rc == AL_OK && text ? fopen(dc, "w") : NULL;
        if (rc == AL_OK && !(f && fwrite(text, 1, n, f) == n)) rc = al_err("cannot write %s", dc);
        if (f) fclose(f);
        free(dp); free(dc);
    }
    free(text);
    if (st) st_close(st);
    st_writer_free(wq); st_writer_free(wf);
    free(sp); free(sc);
    return rc;
}

static double ppl_of(const char *dir, mm_compute c) {
    Model *m = NULL;
    Forward *f = NULL;
    FwdPpl p = {.nll = NAN};
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        int ids[T * 4];
        ids_for(ids, T * 4, fwd_vocab(f));
        fwd_set_compute(f, c);
        CHECK_OK(fwd_ppl(f, ids, T * 4, 32, &p));
    }
    fwd_free(f);
    model_free(m);
    return exp(p.nll);
}

/* (f) gpt-oss's experts in MXFP4 as released: ranks vo and ppl available, the perplexity equal to
 * that of the F32 twin holding the dequantized values (1e-6 relative) in both compute modes, and
 * different from the unquantized source's (the experts are read, not skipped). */
static void check_mxfp4(const char *tmp, const char *d0) {
    char *dq = al_asprintf("%s/oss-mxfp4", tmp), *df = al_asprintf("%s/oss-mxfp4-as-f32", tmp);
    CHECK_OK(mxfp4_twins(d0, dq, df, 0));
    Model *m = NULL;
    char why[1024] = "";
    CHECK_OK(model_open(dq, &m));
    CHECK(m && analysis_available(m, AN_RANKS_VO, why, sizeof why), "mxfp4 experts: ranks vo available");
    CHECK(m && analysis_available(m, AN_PPL, why, sizeof why), "mxfp4 experts: ppl available: %s", why);
    model_free(m);
    for (int c = 0; c < 2; c++) {
        mm_compute mode = c ? MM_BF16 : MM_F32;
        double pq = ppl_of(dq, mode), pf = ppl_of(df, mode), p0 = ppl_of(d0, mode);
        printf("  MXFP4 experts %s: ppl %.9f, F32 twin %.9f (rel %.2g), unquantized %.9f\n", mm_compute_name(mode), pq,
               pf, fabs(pq / pf - 1), p0);
        CHECK(isfinite(pq) && fabs(pq / pf - 1) < 1e-6, "mxfp4 %s: ppl %.9g vs the F32 twin's %.9g",
              mm_compute_name(mode), pq, pf);
        CHECK(fabs(pf / p0 - 1) > 1e-6, "mxfp4 %s: the quantization moves the ppl (%.9g vs %.9g)", mm_compute_name(mode),
              pf, p0);
    }
    /* hostile: a NaN scale, scales of the wrong shape -- refused naming the tensor, never read */
    const char *want[3] = {NULL, "is NaN", "should be U8 (E8M0) of shape"};
    for (int bad = 1; bad <= 2; bad++) {
        CHECK_OK(mxfp4_twins(d0, dq, df, bad));
        Model *mb = NULL;
        Forward *f = NULL;
        CHECK_OK(model_open(dq, &mb));
        CHECK(mb && !analysis_available(mb, AN_PPL, why, sizeof why) && strstr(why, want[bad]) &&
              strstr(why, "mlp.experts."), "mxfp4 hostile %d: ppl refused: %s", bad, why);
        CHECK_ERR(fwd_new(mb, NULL, &f), want[bad]);
        CHECK(strstr(al_errmsg(), "mlp.experts.") != NULL, "mxfp4 hostile %d: the error names the tensor: %s", bad,
              al_errmsg());
        printf("  MXFP4 experts, hostile %d: %s\n", bad, al_errmsg());
        fwd_free(f);
        model_free(mb);
    }
    free(dq); free(df);
}

/* The reference's logits on dir against attnlab's z. */
static double vs_ref(const char *dir, const float *z, size_t V) {
    RefModel *r = NULL;
    CHECK_OK(ref_open(dir, &r));
    double *zr = malloc(T * V * sizeof *zr), d = INFINITY;
    int ids[T];
    ids_for(ids, T, V);
    if (r && zr && ref_logits(r, ids, T, zr) == AL_OK) d = rel_diff(z, zr, NULL, T * V);
    free(zr);
    ref_free(r);
    return d;
}

/* (d) YaRN's ramp with and without truncate at the recipe's dims (32, theta 150000, x8 from 64). */
static void check_truncate(void) {
    RopeSpec s = {.layout = ROPE_HALF, .head_dim = 32, .rotary_dim = 32, .partial_factor = 1, .theta = 150000};
    s.scaling = (RopeScaling){.kind = RS_YARN, .factor = 8, .orig_max_pos = 64, .beta_fast = 32, .beta_slow = 1,
                              .attention_factor = NAN, .truncate = true};
    double a[16], b[16], plain[16];
    CHECK_OK(rope_inv_freq(&s, 32, 150000, a, "test"));
    s.scaling.truncate = false;
    CHECK_OK(rope_inv_freq(&s, 32, 150000, b, "test"));
    rope_plain_freqs(32, 150000, plain);
    /* high = 32 ln(64 / 2 pi) / (2 ln 150000) = 3.12: pair 2 is (2 - 0) / 3.12 of the way to f / 8
       without truncate, 2 / 4 with it; pairs from 4 on are f / 8 either way */
    double hi = 32 * log(64 / (2 * M_PI)) / (2 * log(150000.0)), r = 2 / hi;
    CHECK_NEAR(b[2], plain[2] / 8 * r + plain[2] * (1 - r), 1e-12 * plain[2]);
    CHECK_NEAR(a[2], plain[2] / 8 * 0.5 + plain[2] * 0.5, 1e-12 * plain[2]);
    CHECK_NEAR(a[5], plain[5] / 8, 1e-15);
    CHECK_NEAR(b[5], plain[5] / 8, 1e-15);
    printf("  yarn truncate: pair 2 %.6g (false) vs %.6g (true)\n", b[2], a[2]);
}

/* openai/gpt-oss-20b's config.json (the layer_types list written out; 120b: 36 layers, 128 experts). */
#define OSS20B "{\"architectures\": [\"GptOssForCausalLM\"], \"attention_bias\": true, \"attention_dropout\": 0.0, " \
    "\"eos_token_id\": 200002, \"experts_per_token\": 4, \"head_dim\": 64, \"hidden_act\": \"silu\", " \
    "\"hidden_size\": 2880, \"initial_context_length\": 4096, \"initializer_range\": 0.02, " \
    "\"intermediate_size\": 2880, \"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"full_attention\"], \"max_position_embeddings\": 131072, " \
    "\"model_type\": \"gpt_oss\", \"num_attention_heads\": 64, \"num_experts_per_tok\": 4, " \
    "\"num_hidden_layers\": 24, \"num_key_value_heads\": 8, \"num_local_experts\": 32, " \
    "\"output_router_logits\": false, \"pad_token_id\": 199999, \"quantization_config\": " \
    "{\"modules_to_not_convert\": [\"model.layers.*.self_attn\", \"model.layers.*.mlp.router\", " \
    "\"model.embed_tokens\", \"lm_head\"], \"quant_method\": \"mxfp4\"}, \"rms_norm_eps\": 1e-05, " \
    "\"rope_scaling\": {\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": 32.0, " \
    "\"original_max_position_embeddings\": 4096, \"rope_type\": \"yarn\", \"truncate\": false}, " \
    "\"rope_theta\": 150000, \"router_aux_loss_coef\": 0.9, \"sliding_window\": 128, \"swiglu_limit\": 7.0, " \
    "\"tie_word_embeddings\": false, \"transformers_version\": \"4.55.0.dev0\", \"use_cache\": true, " \
    "\"vocab_size\": 201088}"

/* (e) the real config.json read into the description, and GptOssConfig's defaults. */
static void check_config(void) {
    ModelConfig c;
    char n[192];
    CHECK_OK(model_config_parse(OSS20B, "gpt-oss-20b/config.json", &c));
    CHECK(c.family == FAM_GPT_OSS && c.n_layers == 24 && c.n_heads == 64 && c.n_kv_heads == 8 && c.hidden == 2880 &&
          cfg_d_qk(&c) == 64 && c.v_dim == 64 && c.vocab == 201088 && !c.tie_embeddings && c.norm_eps == 1e-5,
          "gpt-oss-20b: 24 layers, 64 / 8 heads of 64, hidden 2880");
    CHECK(c.qkv_bias && c.o_bias && c.attn_sinks && c.attn == QKV_SPLIT && c.rope_spec.layout == ROPE_HALF,
          "gpt-oss-20b: q/k/v/o biases, sinks, rotate_half");
    CHECK(cfg_layer_window(&c, 0) == 128 && cfg_layer_window(&c, 1) == 0 && cfg_layer_window(&c, 22) == 128 &&
          cfg_layer_window(&c, 23) == 0, "gpt-oss-20b: window 128 on even layers, full attention on odd ones");
    const RopeScaling *y = &c.rope_spec.scaling;
    CHECK(y->kind == RS_YARN && y->factor == 32 && y->orig_max_pos == 4096 && !y->truncate &&
          cfg_layer_rope_scaled(&c, 0) && cfg_layer_rope_scaled(&c, 1) && c.rope_spec.theta == 150000,
          "gpt-oss-20b: YaRN x32 from 4096, truncate false, on every layer");
    CHECK_NEAR(rope_attention_factor(&c.rope_spec), 0.1 * log(32.0) + 1, 1e-12);
    CHECK(c.mlp == MLP_MOE && c.moe.layout == MOE_GPT_OSS && c.moe.n_experts == 32 && c.moe.top_k == 4 &&
          c.moe.norm_topk_prob && c.moe.router == ROUTER_SOFTMAX && cfg_moe_layer(&c, 0) && cfg_moe_layer(&c, 23) &&
          c.swiglu_limit == 7 && c.swiglu_alpha == 1.702, "gpt-oss-20b: 32 experts, top-4 softmax, clamped SwiGLU");
    CHECK(cfg_role_name(&c, ROLE_SINKS, 5, -1, NULL, n, sizeof n) && !strcmp(n, "model.layers.5.self_attn.sinks"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_ROUTER, 5, -1, "bias", n, sizeof n) && !strcmp(n, "model.layers.5.mlp.router.bias"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_EXPS_GATE_UP, 5, -1, NULL, n, sizeof n) &&
          !strcmp(n, "model.layers.5.mlp.experts.gate_up_proj"), "%s", n);
    CHECK(cfg_role_name(&c, ROLE_EXPS_DOWN_BIAS, 5, -1, NULL, n, sizeof n) &&
          !strcmp(n, "model.layers.5.mlp.experts.down_proj_bias"), "%s", n);
    /* GptOssConfig's defaults: attention_bias true, layer_types sliding on even layers */
    CHECK_OK(model_config_parse("{\"model_type\": \"gpt_oss\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                                "\"num_key_value_heads\": 2, \"head_dim\": 16, \"num_hidden_layers\": 4, "
                                "\"sliding_window\": 128, \"num_local_experts\": 4, \"num_experts_per_tok\": 2}",
                                "defaults", &c));
    CHECK(c.qkv_bias && c.o_bias && cfg_layer_window(&c, 0) == 128 && cfg_layer_window(&c, 1) == 0 &&
          cfg_layer_window(&c, 2) == 128 && c.norm_eps == 1e-5 && c.swiglu_limit == 7,
          "gpt_oss defaults: biases, even layers sliding, eps 1e-5, limit 7");
}

/* Adds tensor name (dtype, shape) at *off to the header h. */
static void hdr_add(cJSON *h, const char *name, const char *dt, int nd, const size_t *sh, size_t *off) {
    size_t n = !strcmp(dt, "BF16") ? 2 : 1;
    cJSON *t = cJSON_AddObjectToObject(h, name), *s = cJSON_AddArrayToObject(t, "shape"), *o;
    cJSON_AddStringToObject(t, "dtype", dt);
    for (int i = 0; i < nd; i++) { cJSON_AddItemToArray(s, cJSON_CreateNumber((double)sh[i])); n *= sh[i]; }
    o = cJSON_AddArrayToObject(t, "data_offsets");
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)*off));
    cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(*off + n)));
    *off += n;
}

/* (g) a folder with gpt-oss-20b's real config.json and every tensor of the release by name, dtype
 * and shape (attention BF16, experts MXFP4 blocks / scales) in a sparse file of zeros (13.8 GB
 * apparent, no blocks): it loads, and the description and the analyses are what `info` shows.
 * Skipped where the file system does not keep the file sparse. */
static void check_real_folder(const char *dir) {
    static const char *const attn[][2] = {{"q_proj", "4096"}, {"k_proj", "512"}, {"v_proj", "512"}};
    const size_t D = 2880, E = 32, F = 2880, V = 201088;
    cJSON *h = cJSON_CreateObject();
    size_t off = 0;
    char n[160];
    hdr_add(h, "model.embed_tokens.weight", "BF16", 2, (size_t[]){V, D}, &off);
    hdr_add(h, "lm_head.weight", "BF16", 2, (size_t[]){V, D}, &off);
    hdr_add(h, "model.norm.weight", "BF16", 1, (size_t[]){D}, &off);
    for (int L = 0; L < 24; L++) {
#define P(what) (snprintf(n, sizeof n, "model.layers.%d.%s", L, what), n)
        hdr_add(h, P("input_layernorm.weight"), "BF16", 1, (size_t[]){D}, &off);
        hdr_add(h, P("post_attention_layernorm.weight"), "BF16", 1, (size_t[]){D}, &off);
        for (int i = 0; i < 3; i++) {
            char w[64];
            size_t rows = (size_t)atoi(attn[i][1]);
            snprintf(w, sizeof w, "self_attn.%s.weight", attn[i][0]);
            hdr_add(h, P(w), "BF16", 2, (size_t[]){rows, D}, &off);
            snprintf(w, sizeof w, "self_attn.%s.bias", attn[i][0]);
            hdr_add(h, P(w), "BF16", 1, (size_t[]){rows}, &off);
        }
        hdr_add(h, P("self_attn.o_proj.weight"), "BF16", 2, (size_t[]){D, 4096}, &off);
        hdr_add(h, P("self_attn.o_proj.bias"), "BF16", 1, (size_t[]){D}, &off);
        hdr_add(h, P("self_attn.sinks"), "BF16", 1, (size_t[]){64}, &off);
        hdr_add(h, P("mlp.router.weight"), "BF16", 2, (size_t[]){E, D}, &off);
        hdr_add(h, P("mlp.router.bias"), "BF16", 1, (size_t[]){E}, &off);
        hdr_add(h, P("mlp.experts.gate_up_proj_blocks"), "U8", 4, (size_t[]){E, 2 * F, 90, 16}, &off);
        hdr_add(h, P("mlp.experts.gate_up_proj_scales"), "U8", 3, (size_t[]){E, 2 * F, 90}, &off);
        hdr_add(h, P("mlp.experts.gate_up_proj_bias"), "BF16", 2, (size_t[]){E, 2 * F}, &off);
        hdr_add(h, P("mlp.experts.down_proj_blocks"), "U8", 4, (size_t[]){E, D, 90, 16}, &off);
        hdr_add(h, P("mlp.experts.down_proj_scales"), "U8", 3, (size_t[]){E, D, 90}, &off);
        hdr_add(h, P("mlp.experts.down_proj_bias"), "BF16", 2, (size_t[]){E, D}, &off);
#undef P
    }
    char *js = cJSON_PrintUnformatted(h), *cp = al_asprintf("%s/config.json", dir), *sp = al_asprintf("%s/model.safetensors", dir);
    cJSON_Delete(h);
    size_t hl = strlen(js), pad = (8 - hl % 8) % 8, len = hl + pad;
    FILE *f = mkdir(dir, 0755) == 0 ? fopen(sp, "wb") : NULL;
    FILE *c = f ? fopen(cp, "w") : NULL;
    bool ok = f && c && fputs(OSS20B, c) >= 0 && fwrite(&len, 8, 1, f) == 1 && fwrite(js, 1, hl, f) == hl &&
              fwrite("        ", 1, pad, f) == pad;
    if (c) fclose(c);
    if (f) fclose(f);
    struct stat st;
    ok = ok && truncate(sp, (off_t)(8 + len + off)) == 0 && stat(sp, &st) == 0;
    CHECK(ok, "writing the gpt-oss-20b folder %s", dir);
    if (ok && (size_t)st.st_blocks * 512 > (size_t)1 << 26) {
        printf("  real folder: the file system does not keep %s sparse: skipped\n", sp);
        unlink(sp);
    } else if (ok) {
        Model *m = NULL;
        char why[1024];
        CHECK_OK(model_open(dir, &m));
        const ModelConfig *mc = m ? &m->cfg : NULL;
        CHECK(mc && mc->family == FAM_GPT_OSS && mc->n_layers == 24 && mc->attn_sinks && cfg_layer_window(mc, 0) == 128 &&
              cfg_layer_window(mc, 1) == 0 && mc->dtype == DT_BF16, "gpt-oss-20b folder: the description");
        CHECK(m && analysis_available(m, AN_RANKS_VO, why, sizeof why), "gpt-oss-20b folder: ranks vo: %s", why);
        CHECK(m && analysis_available(m, AN_PPL, why, sizeof why), "gpt-oss-20b: ppl on its MXFP4 experts: %s", why);
        CHECK(m && analysis_available(m, AN_CONVERT_MLA, why, sizeof why), "gpt-oss-20b: convert mla: %s", why);
        CHECK(m && analysis_attn_export_lacks(mc, "DeepSeek-V3", why, sizeof why) && strstr(why, "sliding window of 128") &&
              strstr(why, "attention sinks"), "gpt-oss-20b: the MLA export lacks: %s", why);
        printf("  real folder: gpt-oss-20b's names and shapes load; ranks vo yes, ppl yes (MXFP4 experts)\n");
        model_free(m);
        unlink(sp);
    }
    free(js); free(cp); free(sp);
}

int main(void) {
    const char *tmp = test_tmpdir();
    char *d0 = al_asprintf("%s/oss", tmp), *d1 = al_asprintf("%s/oss-nosink", tmp), *d2 = al_asprintf("%s/oss-clamp", tmp);
    CHECK_OK(synth_family_write("gpt_oss", DT_F32, SYNTH_DEFAULT_SEED, d0));
    size_t V = 0;
    float *z0 = logits_of(d0, false, &V);
    /* (a) the sinks */
    CHECK_OK(copy_edited(d0, d1, "self_attn.sinks", sinks_off, NULL));
    float *z1 = logits_of(d1, false, &V);
    double moved = z0 && z1 ? rel_diff(z1, NULL, z0, T * V) : 0, ref1 = z1 ? vs_ref(d1, z1, V) : INFINITY;
    CHECK(moved > 0.05, "the sinks move the logits by %.3g of their range (want > 0.05)", moved);
    CHECK(ref1 < 1e-4, "without sinks: attnlab vs the reference %.3g", ref1);
    printf("  sinks: switched off the logits move by %.3g; attnlab vs reference without them %.2g\n", moved, ref1);
    /* (b) attn_eval's core with the sinks */
    float *zo = logits_of(d0, true, &V);
    double over = z0 && zo ? rel_diff(zo, NULL, z0, T * V) : INFINITY;
    CHECK(over < 1e-4, "every layer through attn_eval: logits differ by %.3g of the plain pass's", over);
    printf("  attn_eval override of every layer vs the plain pass: %.2g\n", over);
    /* (c) the clamp */
    CHECK_OK(copy_edited(d0, d2, "mlp.experts.gate_up_proj", times8, NULL));
    float *z2 = logits_of(d2, false, &V);
    double ref2 = z2 ? vs_ref(d2, z2, V) : INFINITY;
    CHECK(ref2 < 1e-4, "gate_up_proj x 8 (clamped): attnlab vs the reference %.3g", ref2);
    printf("  clamped SwiGLU (gate_up x 8): attnlab vs reference %.2g\n", ref2);
    check_truncate();
    check_config();
    check_mxfp4(tmp, d0);
    char *d4 = al_asprintf("%s/gpt-oss-20b", tmp);
    check_real_folder(d4);
    free(d4);
    free(z0); free(z1); free(zo); free(z2);
    free(d0); free(d1); free(d2);
    return check_done();
}
