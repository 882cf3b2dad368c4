/* test_hybrid_methods.c -- `compare`, `convert tpa` and `convert mla` over a hybrid's layers run its attention layers
 * only (core/model/layersel): the synthetic Llama with layers 1 and 2 marked as linear-attention
 * layers in its description (as a hybrid row's cfg_layer_linear marks them; attn_layer_load then
 * refuses them, as on a real hybrid) compares and converts layers 0 and 3 of `all`, each row / layer
 * report equal to that layer's alone; layer 1 alone, or layers 1-2, is an error naming the attention
 * layers; the TPA and MLA exports, which hold every layer as TPA / MLA, refuse naming the linear layer. */
#include "check.h"
#include "budget_compare.h"
#include "layersel.h"
#include "model.h"
#include "synth.h"
#include "tpa.h"
#include "transmla.h"
#include "mla_export.h"

static BudgetResult *compare(Model *m, int lo, int hi) {
    BudgetOpts o = budget_opts_default();
    o.budget = 96;
    o.layer_lo = lo;
    o.layer_hi = hi;
    o.tokens = 24;
    o.fit_tokens = 96;
    BudgetResult *r = NULL;
    CHECK_OK(budget_compare(m, &o, &r));
    return r;
}

static bool rows_equal(const BudgetRow *a, const BudgetRow *b) {
    return a->layer == b->layer && a->method == b->method && a->ok == b->ok && a->kv_values == b->kv_values &&
           !strcmp(a->setting, b->setting) && (a->out_err == b->out_err || (isnan(a->out_err) && isnan(b->out_err))) &&
           (a->score_err == b->score_err || (isnan(a->score_err) && isnan(b->score_err)));
}

static TpaModel *tpa(Model *m, int lo, int hi) {
    TpaOpts o = tpa_opts_default();
    o.k_rank = o.v_rank = 1;
    o.layer_lo = lo;
    o.layer_hi = hi;
    o.eval_tokens = 16;
    TpaModel *t = NULL;
    CHECK_OK(tpa_convert(m, &o, &t));
    return t;
}

static bool reports_equal(const TpaLayerReport *a, const TpaLayerReport *b) {
    return a->layer == b->layer && a->k_err == b->k_err && a->v_err == b->v_err && a->score_err == b->score_err &&
           a->out_err == b->out_err;
}

static void test_tpa(Model *m, const char *tmp) {
    TpaModel *all = tpa(m, 0, -1), *l0 = tpa(m, 0, 0), *l3 = tpa(m, 3, 3);
    if (all && l0 && l3) {
        CHECK(all->layers[0] && !all->layers[1] && !all->layers[2] && all->layers[3] && all->opts.layer_lo == 0 &&
              all->opts.layer_hi == 3, "converted layers 0 and 3");
        CHECK(all->layers[0] && all->layers[3] && reports_equal(&all->layers[0]->rep, &l0->layers[0]->rep) &&
              reports_equal(&all->layers[3]->rep, &l3->layers[3]->rep) && all->layers[3]->rep.out_err > 0,
              "each layer's report equals its conversion alone");
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/tpa-export", tmp);
        CHECK_ERR(tpa_export(all, dir, DT_F32), "TPA export: layer 1 of ");
        CHECK(strstr(al_errmsg(), "is Gated DeltaNet linear attention: the TPA format holds every layer") != NULL, "%s",
              al_errmsg());
    }
    tpa_model_free(all);
    tpa_model_free(l0);
    tpa_model_free(l3);
    TpaOpts o = tpa_opts_default();
    TpaModel *t = NULL;
    o.layer_lo = o.layer_hi = 2;
    CHECK_ERR(tpa_convert(m, &o, &t), "convert tpa: layer 2 of this llama model is a Gated DeltaNet");
}

static TmlaResult *mla(Model *m, int lo, int hi) {
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 48;
    o.layer_lo = lo;
    o.layer_hi = hi;
    o.eval_tokens = 16;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    return r;
}

static void test_mla(Model *m) {
    TmlaResult *all = mla(m, 0, -1), *l0 = mla(m, 0, 0), *l3 = mla(m, 3, 3);
    if (all && l0 && l3) {
        CHECK(all->layers[0] && !all->layers[1] && !all->layers[2] && all->layers[3] && all->opts.layer_lo == 0 &&
              all->opts.layer_hi == 3, "converted layers 0 and 3");
        CHECK(all->rep[0].out_err == l0->rep[0].out_err && all->rep[3].out_err == l3->rep[3].out_err &&
              all->rep[3].score_err == l3->rep[3].score_err && all->rep[3].out_err > 0 &&
              all->params_before == l0->params_before + l3->params_before,
              "each layer's report equals its conversion alone (out_err %g, %g)", all->rep[3].out_err, l3->rep[3].out_err);
        CHECK_ERR(mla_exportable(all), "export: layer 1 of llama is Gated DeltaNet linear attention: a DeepSeek-V3 "
                  "checkpoint has every layer in MLA form");
    }
    tmla_result_free(all);
    tmla_result_free(l0);
    tmla_result_free(l3);
    TmlaOpts o = tmla_opts_default();
    TmlaResult *r = NULL;
    o.layer_lo = 1;
    o.layer_hi = 2;
    CHECK_ERR(tmla_convert(m, &o, &r), "convert mla: layers 1-2 of this llama model are all Gated DeltaNet");
}

int main(void) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/demo-llama", test_tmpdir());
    SynthOptions so = {.kind = SYNTH_DEMO_LLAMA, .dtype = DT_BF16, .shards = 1, .seed = 3};
    CHECK_OK(synth_write(&so, dir));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return check_done();
    m->cfg.lin.layout = LIN_QWEN3_NEXT;      /* layers 1 and 2: linear attention, as a hybrid's */
    m->cfg.lin.layer[1] = m->cfg.lin.layer[2] = 1;
    m->cfg.lin.n_linear = 2;
    BudgetResult *all = compare(m, 0, -1), *l0 = compare(m, 0, 0), *l3 = compare(m, 3, 3);
    if (all && l0 && l3) {
        CHECK(all->n_rows == 2 * BUDGET_NMETHODS && l0->n_rows == BUDGET_NMETHODS && l3->n_rows == BUDGET_NMETHODS,
              "rows: %d of 2 layers", all->n_rows);
        CHECK(all->rows[0].layer == 0 && all->rows[BUDGET_NMETHODS].layer == 3, "layers %d, %d", all->rows[0].layer,
              all->rows[BUDGET_NMETHODS].layer);
        int same = 0;
        for (int k = 0; k < BUDGET_NMETHODS; k++)
            same += rows_equal(&all->rows[k], &l0->rows[k]) + rows_equal(&all->rows[BUDGET_NMETHODS + k], &l3->rows[k]);
        CHECK(same == 2 * BUDGET_NMETHODS, "every row equals its layer's alone: %d of %d", same, 2 * BUDGET_NMETHODS);
    }
    budget_result_free(all);
    budget_result_free(l0);
    budget_result_free(l3);
    BudgetOpts o = budget_opts_default();
    BudgetResult *r = NULL;
    o.budget = 96;
    o.layer_lo = o.layer_hi = 1;
    CHECK_ERR(budget_compare(m, &o, &r), "compare: layer 1 of this llama model is a Gated DeltaNet");
    CHECK(strstr(al_errmsg(), "its softmax-attention layers are 0, 3") != NULL, "%s", al_errmsg());
    o.layer_hi = 2;
    CHECK_ERR(budget_compare(m, &o, &r), "compare: layers 1-2 of this llama model are all Gated DeltaNet linear attention");
    test_tpa(m, test_tmpdir());
    test_mla(m);
    model_free(m);
    return check_done();
}
