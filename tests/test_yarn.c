/* test_yarn.c -- a YaRN-scaled GQA model (Llama layout, 4 query heads on 1 KV head, rope_scaling
 * yarn with factor 4) is handled like any other model: its RoPE frequencies and attention factor
 * equal an independent float64 computation of Hugging Face's YaRN formula; the one-layer
 * evaluator and the forward pass agree on its attention; every analysis is available; `convert
 * mla` (kv-rank full) exports a checkpoint that `check` finds exact (and whose MLA attention the
 * evaluator and the forward pass agree on); `compare` runs on it. */
#include "test_transmla_util.h"
#include "analyses.h"
#include "budget_compare.h"
#include "forward.h"
#include "mla_export.h"
#include "rope.h"

#define DIM 16                 /* head dim: every dim rotates */
#define FACTOR 4.0
#define ORIG 64.0              /* original_max_position_embeddings; the model's is 256 = 4 x 64 */

static const char *YARN = "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                          "\"original_max_position_embeddings\": 64, \"beta_fast\": 32, \"beta_slow\": 1}";

/* Hugging Face's _compute_yarn_parameters, written out again in float64. */
static void yarn_reference(double base, double *inv_freq, double *attention_factor) {
    double dim = DIM;
    double lo = floor(dim * log(ORIG / (32 * 2 * M_PI)) / (2 * log(base)));
    double hi = ceil(dim * log(ORIG / (1 * 2 * M_PI)) / (2 * log(base)));
    lo = fmax(lo, 0);
    hi = fmin(hi, dim - 1);
    if (lo == hi) hi += 0.001;
    for (int j = 0; j < DIM / 2; j++) {
        double pos_freq = pow(base, (2.0 * j) / dim);
        double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (FACTOR * pos_freq);
        double ramp = fmin(fmax((j - lo) / (hi - lo), 0), 1);
        double extra_w = 1 - ramp;
        inv_freq[j] = interpolation * (1 - extra_w) + extrapolation * extra_w;
    }
    *attention_factor = 0.1 * log(FACTOR) + 1.0;
}

static void test_freqs(Model *m) {
    double want[DIM / 2], att, *got = NULL;
    yarn_reference(10000.0, want, &att);
    CHECK(m->cfg.rope_spec.scaling.kind == RS_YARN && m->cfg.rope_spec.scaling.factor == FACTOR, "yarn recorded");
    CHECK_OK(attn_rope_freqs_model(m, DIM, &got));
    int blended = 0;
    for (int j = 0; got && j < DIM / 2; j++) {
        CHECK(fabs(got[j] - want[j]) <= 1e-12 * want[j], "pair %d: %.17g, reference %.17g", j, got[j], want[j]);
        double plain = pow(10000.0, -2.0 * j / DIM);
        blended += got[j] < plain * (1 - 1e-9) && got[j] > plain / FACTOR * (1 + 1e-9);
    }
    CHECK(blended > 0, "the ramp blends some frequencies (the test would not see it otherwise)");
    CHECK(got && fabs(got[0] - 1.0) < 1e-15 && fabs(got[DIM / 2 - 1] - pow(10000.0, -2.0 * (DIM / 2 - 1) / DIM) / FACTOR) < 1e-15,
          "highest frequency kept, lowest divided by the factor");
    CHECK_NEAR(rope_attention_factor(&m->cfg.rope_spec), att, 1e-15);
    free(got);
}

typedef struct { float *in, *proj; size_t T, D; } grab;

static int grab_fn(const FwdAct *a, void *ud) {
    grab *g = ud;
    if (a->layer != 0) return AL_OK;
    float *dst = a->kind == FWD_ATTN_IN ? g->in : g->proj;
    for (size_t t = 0; t < a->T; t++) memcpy(dst + (a->t0 + t) * g->D, fwd_act_row(a, t, 0), g->D * sizeof(float));
    return AL_OK;
}

/* The evaluator on layer 0's attention inputs reproduces the forward pass's attention output. */
static void test_eval_vs_forward(Model *m) {
    Forward *f = NULL;
    CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) return;
    size_t T = 40, D = (size_t)m->cfg.hidden;
    grab g = {calloc(T * D, sizeof(float)), calloc(T * D, sizeof(float)), T, D};
    FwdHooks h = {.mask = FWD_ATTN_IN | FWD_ATTN_PROJ, .fn = grab_fn, .ud = &g};
    fwd_set_hooks(f, &h);
    int tok[40], pos[40];
    for (size_t t = 0; t < T; t++) { tok[t] = (int)((t * 7 + 3) % (size_t)m->cfg.vocab); pos[t] = (int)t; }
    CHECK_OK(fwd_run(f, tok, T, FWD_LOGITS_NONE, NULL));
    AttnLayer *L = NULL;
    AttnOut *o = NULL;
    CHECK_OK(attn_layer_load(m, 0, &L));
    Mat X = {.rows = T, .cols = D, .data = g.in};
    if (L) CHECK_OK(attn_eval(L, &X, pos, false, &o));
    if (o) {
        double e = vec_rel_err(g.proj, o->out->data, T * D);
        CHECK(e < 1e-5, "evaluator vs forward pass on a YaRN model: relative error %.3g", e);
    }
    attn_out_free(o);
    attn_layer_free(L);
    free(g.in);
    free(g.proj);
    fwd_free(f);
}

static void test_analyses(Model *m) {
    char why[1024];
    for (int a = 0; a < AN_COUNT; a++)
        CHECK(analysis_available(m, (analysis_kind)a, why, sizeof why), "%s refused on a YaRN model: %s",
              analysis_name((analysis_kind)a), why);
}

static void test_convert_check(Model *m, const char *tmp) {
    char out[4096];
    snprintf(out, sizeof out, "%s/mla", tmp);
    TmlaOpts o = tmla_opts_default();
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    if (!r) return;
    MlaExportOpts eo = {.dtype = DT_F32};
    CHECK_OK(mla_export(r, out, &eo));
    MlaCheck *c = NULL;
    CHECK_OK(mla_check(out, m, 32, 99, &c));
    for (int l = 0; c && l < c->n_layers; l++)
        CHECK(c->score_err[l] < 1e-4 && c->out_err[l] < 1e-4, "layer %d: export differs: scores %.3g outputs %.3g", l,
              c->score_err[l], c->out_err[l]);
    Model *e = NULL;
    CHECK_OK(model_open(out, &e));
    if (e) CHECK(e->cfg.rope_spec.scaling.kind == RS_YARN, "the export keeps the YaRN scaling");
    if (e) test_eval_vs_forward(e);             /* the MLA evaluator and the forward pass agree on YaRN too */
    model_free(e);
    mla_check_free(c);
    tmla_result_free(r);
}

static void test_compare(Model *m) {
    BudgetOpts o = budget_opts_default();
    o.budget = 16;
    BudgetResult *r = NULL;
    CHECK_OK(budget_compare(m, &o, &r));
    int finite = 0;
    for (int i = 0; r && i < r->n_rows; i++) finite += r->rows[i].ok && isfinite(r->rows[i].out_err);
    CHECK(finite > 0, "compare gives errors on a YaRN model");
    budget_result_free(r);
}

int main(void) {
    const char *tmp = test_tmpdir();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/yarn", tmp);
    TuModel tm = {.model_type = "llama", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 1, .head_dim = DIM,
                  .inter = 24, .vocab = 50, .dtype = DT_F32, .extra_config = YARN};
    CHECK_OK(tu_write_model(dir, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) {
        test_freqs(m);
        test_eval_vs_forward(m);
        test_analyses(m);
        test_convert_check(m, tmp);
        test_compare(m);
    }
    model_free(m);
    return check_done();
}
