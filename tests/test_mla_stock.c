/* test_mla_stock.c -- the latent-norm constructions of mla_export.h, measured. Per layer (exact
 * TransMLA conversions of random GQA layers, with and without biases and a query latent, input
 * norm weights far from 1, eps 1e-5 and 1e-6): the linear construction evaluated with the stock
 * RMSNorms reproduces the layer to f32 rounding (< 1e-5 relative); in bf16 its error is the
 * dtype's rounding (no worse than rounding the unnormalised layer: the tiny latents lose nothing,
 * bf16 has f32's exponent range); the calibrated construction (TransMLA's mean-RMS weight) and a
 * plain unit norm are measurably wrong. Whole model (a synthetic Llama, exported both ways): the
 * stock check's output error and NLL difference, by default (rms_norm_eps 1e-6: all engines agree
 * on the latent eps; the other norms' eps change is measured) and with source_eps (transformers'
 * fixed latent eps then shows in its column); f16 is refused for the linear
 * construction; a YaRN export's rope_scaling carries the folded attention factor in every engine's
 * keys and checks exact. */
#include "test_transmla_util.h"
#include "mla_export.h"

#include <cjson/cJSON.h>

/* Inputs as a layer sees them: standard normal rows scaled to RMS 1, times g. */
static Mat *normed_inputs(size_t T, int hidden, const float *g, uint64_t seed) {
    Mat *X = attn_random_input(T, hidden, seed);
    for (size_t t = 0; X && t < T; t++) {
        float *x = X->data + t * (size_t)hidden;
        double ss = 0;
        for (int i = 0; i < hidden; i++) ss += (double)x[i] * x[i];
        for (int i = 0; i < hidden; i++) x[i] = (float)(x[i] / sqrt(ss / hidden) * g[i]);
    }
    return X;
}

static double out_err(const AttnLayer *a, const AttnLayer *b, const Mat *X) {
    int pos[32];
    for (int t = 0; t < 32; t++) pos[t] = t;
    AttnOut *oa = NULL, *ob = NULL;
    double se = NAN, oe = NAN;
    CHECK_OK(attn_eval(a, X, pos, false, &oa));
    CHECK_OK(attn_eval(b, X, pos, false, &ob));
    if (oa && ob) attn_rel_err(oa, ob, &se, &oe);
    attn_out_free(oa);
    attn_out_free(ob);
    return oe;
}

static void round_mat(Mat *m) {
    for (size_t i = 0; m && i < m->rows * m->cols; i++) m->data[i] = dt_bf16_to_f32(dt_f32_to_bf16(m->data[i]));
}
static void round_vec(float *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) v[i] = dt_bf16_to_f32(dt_f32_to_bf16(v[i]));
}
/* Every weight of L rounded to bf16 (as an export in bf16 stores it). */
static AttnLayer *bf16_copy(const AttnLayer *L) {
    AttnLayer *C = attn_layer_copy(L);
    if (!C) return NULL;
    Mat *ms[] = {C->W_Q, C->W_QA, C->W_QB, C->W_KVA, C->W_KVB, C->W_O};
    for (size_t i = 0; i < 6; i++) round_mat(ms[i]);
    round_vec(C->b_Q, C->W_Q ? C->W_Q->cols : C->W_QB ? C->W_QB->cols : 0);
    round_vec(C->b_QA, (size_t)C->q_rank);
    round_vec(C->qa_norm, (size_t)C->q_rank);
    round_vec(C->b_KVA, (size_t)(C->kv_rank + C->rope_dim));
    round_vec(C->kva_norm, (size_t)C->kv_rank);
    round_vec(C->b_O, (size_t)C->hidden);
    return C;
}

static void test_layers(void) {
    struct { int H, G, q_rank; bool bias; double eps; const char *what; } cases[] = {
        {4, 1, 0, false, 1e-5, "one KV head, eps 1e-5"},
        {4, 1, 0, false, 1e-6, "one KV head, eps 1e-6"},
        {6, 3, 0, true, 1e-6, "identical KV heads, biases"},
        {4, 1, 24, true, 1e-5, "query latent, biases"},
    };
    int hidden = 48, d = 8;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        AttnLayer *gqa = tu_gqa(cases[i].H, cases[i].G, d, hidden, ROPE_HALF, cases[i].bias, cases[i].G > 1);
        TmlaOpts o = tmla_opts_default();
        o.q_rank = cases[i].q_rank;
        o.freqfold = 1;
        o.rope_dim = d;
        o.eval_tokens = 16;
        AttnLayer *L = NULL, *lin = NULL, *cal = NULL, *unit = NULL;
        TmlaLayerReport rep;
        CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &L, &rep));
        float *g = tu_randv((size_t)hidden, 1.0);
        for (int j = 0; j < hidden; j++) g[j] = 0.05f + 3.0f * fabsf(g[j]);   /* far from 1 */
        Mat *X = normed_inputs(32, hidden, g, 99 + i);
        int kk = -1, kq = -1;
        if (L) {
            CHECK_OK(mla_stock_layer(L, g, cases[i].eps, MLA_NORM_LINEAR, &lin, &kk, &kq));
            CHECK_OK(mla_stock_layer(L, g, cases[i].eps, MLA_NORM_CALIBRATED, &cal, NULL, NULL));
            CHECK_ERR(mla_stock_layer(lin, g, cases[i].eps, MLA_NORM_LINEAR, &unit, NULL, NULL), "without latent norms");
            unit = attn_layer_copy(L);               /* what stock engines made of the old export: unit norms */
            unit->norm_eps = cases[i].eps;
            unit->kva_norm = malloc((size_t)L->kv_rank * sizeof(float));
            for (int j = 0; j < L->kv_rank; j++) unit->kva_norm[j] = 1.0f;
        }
        if (lin && cal && unit) {
            double el = out_err(L, lin, X), ec = out_err(L, cal, X), eu = out_err(L, unit, X);
            AttnLayer *lb = bf16_copy(lin), *Lb = bf16_copy(L);
            double elb = out_err(L, lb, X), eLb = out_err(L, Lb, X);
            printf("%s: k_kv %d k_q %d; output error linear %.3g (bf16 %.3g; the layer itself in bf16 %.3g), "
                   "calibrated %.3g, unit norm %.3g\n", cases[i].what, kk, kq, el, elb, eLb, ec, eu);
            CHECK(el < 1e-5, "%s: linear construction error %.3g", cases[i].what, el);
            CHECK(elb < 2 * eLb + 1e-6, "%s: linear in bf16 %.3g vs the layer's own bf16 rounding %.3g", cases[i].what, elb, eLb);
            CHECK(ec > 1e-3 && ec > 100 * el, "%s: calibrated should be approximate: %.3g", cases[i].what, ec);
            CHECK(eu > 0.1, "%s: a unit norm should be wrong: %.3g", cases[i].what, eu);
            CHECK(lin->kva_norm[0] == (float)ldexp(1.0, kk) && (!cases[i].q_rank || lin->qa_norm[0] == (float)ldexp(1.0, kq)),
                  "%s: norm weights 2^k", cases[i].what);
            attn_layer_free(lb);
            attn_layer_free(Lb);
        }
        attn_layer_free(gqa); attn_layer_free(L); attn_layer_free(lin); attn_layer_free(cal); attn_layer_free(unit);
        free(g);
        mat_free(X);
    }
}

/* Whole model: a synthetic Llama with one KV head (exact at kv-rank full) exported with both
 * constructions and checked as stock engines run it. */
static void test_model(const char *tmp) {
    TuModel tm = {.model_type = "llama", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 1, .head_dim = 8,
                  .inter = 24, .vocab = 50, .dtype = DT_F32};
    char src[4096], out[4200];
    snprintf(src, sizeof src, "%s/src", tmp);
    CHECK_OK(tu_write_model(src, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(src, &m));
    if (!m) return;
    TmlaOpts o = tmla_opts_default();
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    int ids[64];                        /* the perplexity's text: 64 token ids, one window */
    for (int t = 0; t < 64; t++) ids[t] = (t * 7 + 3) % m->cfg.vocab;
    MlaCheckIn in = {.tokens = 64, .seed = 7, .ids = ids, .n = 64, .seqlen = 64};
    double worst[2] = {0, 0}, dnll[2] = {NAN, NAN};
    for (int k = 0; r && k < 2; k++) {
        snprintf(out, sizeof out, "%s/mla-%s", tmp, k ? "calibrated" : "linear");
        MlaExportOpts eo = {.dtype = DT_F32, .latent_norm = k ? MLA_NORM_CALIBRATED : MLA_NORM_LINEAR};
        CHECK_OK(mla_export(r, out, &eo));
        MlaCheck *c = NULL;
        CHECK_OK(mla_check_in(out, m, &in, &c));
        for (int l = 0; c && l < c->n_layers; l++) worst[k] = fmax(worst[k], c->out_err[l]);
        if (c) dnll[k] = c->nll_export - c->nll_source;
        printf("whole model, %s: largest stock output error %.3g, NLL difference %.3g nats/token over %zu tokens\n",
               k ? "calibrated" : "linear", worst[k], dnll[k], c ? c->nll_tokens : 0);
        mla_check_free(c);
    }
    CHECK(worst[0] < 1e-5 && fabs(dnll[0]) < 1e-4, "linear: %.3g, %.3g (the other norms' eps 1e-6 included)", worst[0],
          dnll[0]);
    for (int k = 0; r && k < 2; k++) {   /* default: transformers and vLLM agree; source_eps: they do not */
        snprintf(out, sizeof out, "%s/mla-eps%d", tmp, k);
        MlaExportOpts eo = {.dtype = DT_F32, .source_eps = k == 1};
        CHECK_OK(mla_export(r, out, &eo));
        MlaCheck *c = NULL;
        CHECK_OK(mla_check(out, m, 64, 7, &c));
        double w[ENG_N] = {0}, eff = NAN;
        for (int e = 0; c && e < ENG_N; e++)
            for (int l = 0; l < c->n_layers; l++) w[e] = fmax(w[e], c->engine_out_err[e][l]);
        CHECK_OK(mla_eps_effect(m, 1e-6, 32, 1, &eff));
        if (!c) continue;
        printf("whole model, linear, %s: rms_norm_eps %g, largest output error transformers %.3g vLLM %.3g SGLang %.3g; "
               "the other norms' eps moves the source's logits by %.3g of their largest\n", k ? "source_eps" : "default",
               c->latent_eps, w[ENG_HF], w[ENG_VLLM], w[ENG_SGLANG], eff);
        CHECK(w[ENG_VLLM] < 1e-5 && w[ENG_SGLANG] < 1e-5, "vLLM / SGLang: %.3g %.3g", w[ENG_VLLM], w[ENG_SGLANG]);
        if (k == 0) {
            CHECK(w[ENG_HF] < 1e-5 && c->latent_eps == 1e-6, "default: transformers %.3g (eps %g)", w[ENG_HF], c->latent_eps);
            CHECK(strstr(c->notes, "rms_norm_eps: the export's 1e-06") && !strstr(c->notes, "latent eps:"),
                  "default notes: [%s]", c->notes);
            CHECK(eff > 0 && eff < 1e-3, "the other norms' eps change is measured and small: %.3g", eff);
        } else {
            CHECK(w[ENG_HF] > 0.1 && c->latent_eps == 1e-5, "source_eps: transformers' 1e-6 shows: %.3g", w[ENG_HF]);
            CHECK(strstr(c->notes, "latent eps: transformers normalises the latents with 1e-06") != NULL,
                  "source_eps notes: [%s]", c->notes);
        }
        mla_check_free(c);
    }
    CHECK(worst[1] > 1e-3, "calibrated: %.3g", worst[1]);
    if (r) {
        snprintf(out, sizeof out, "%s/mla-f16", tmp);
        MlaExportOpts eo = {.dtype = DT_F16};
        CHECK_ERR(mla_export(r, out, &eo), "f16 cannot hold");
        eo.latent_norm = MLA_NORM_CALIBRATED;
        CHECK_OK(mla_export(r, out, &eo));
    }
    tmla_result_free(r);
    model_free(m);
}

/* YaRN: the attention factor is folded into the weights; the exported rope_scaling says so in the
 * keys each engine reads (attention_factor 1 for transformers, mscale = mscale_all_dim = 0 for
 * vLLM's and SGLang's DeepSeek YaRN), and the stock check is exact. */
static void test_yarn_config(const char *tmp) {
    TuModel tm = {.model_type = "llama", .layers = 1, .hidden = 32, .heads = 4, .kv_heads = 1, .head_dim = 8,
                  .inter = 24, .vocab = 50, .dtype = DT_F32,
                  .extra_config = "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                                  "\"original_max_position_embeddings\": 64, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}"};
    char src[4096], out[4200];
    snprintf(src, sizeof src, "%s/yarn-src", tmp);
    snprintf(out, sizeof out, "%s/yarn-mla", tmp);
    CHECK_OK(tu_write_model(src, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(src, &m));
    TmlaOpts o = tmla_opts_default();
    TmlaResult *r = NULL;
    if (m) CHECK_OK(tmla_convert(m, &o, &r));
    MlaExportOpts eo = {.dtype = DT_F32};
    if (r) CHECK_OK(mla_export(r, out, &eo));
    MlaCheck *c = NULL;
    if (r) CHECK_OK(mla_check(out, m, 48, 5, &c));
    if (c) {
        printf("yarn: stock output error %.3g\n", c->out_err[0]);
        CHECK(c->out_err[0] < 1e-5 && c->score_err[0] < 1e-5, "yarn export under stock semantics: %.3g", c->out_err[0]);
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/config.json", out);
    char *text = al_read_file_max(path, NULL, 1 << 20, "config");
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(rs, "attention_factor"), *ms = cJSON_GetObjectItemCaseSensitive(rs, "mscale"),
                *ma = cJSON_GetObjectItemCaseSensitive(rs, "mscale_all_dim");
    CHECK(cJSON_IsNumber(af) && af->valuedouble == 1 && cJSON_IsNumber(ms) && ms->valuedouble == 0 && cJSON_IsNumber(ma) &&
          ma->valuedouble == 0, "yarn rope_scaling as engines read it: [%s]", text ? text : "");
    cJSON_Delete(cfg);
    free(text);
    mla_check_free(c);
    tmla_result_free(r);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_layers();
    test_model(tmp);
    test_yarn_config(tmp);
    return check_done();
}
