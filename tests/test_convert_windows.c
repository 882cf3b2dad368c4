/* test_convert_windows.c -- issue 30 section 1: a TransMLA conversion keeps the source layer's
 * attention mask and softmax: its sliding window, score soft-cap and gpt-oss's sink logits. On a
 * layer with identical KV heads (where kv-rank full, D = d is exact) the converted layer with a
 * window of 3 tokens, a soft-cap of 2 and a sink per head matches the source to float precision;
 * before, tmla_build dropped all three and the outputs differed by O(1). */
#include "test_transmla_util.h"
#include "transmla.h"
#include "forward.h"
#include "analyses.h"
#include "mla_export.h"

#include <math.h>

static AttnLayer *convert_full(const AttnLayer *gqa, TmlaLayerReport *rep) {
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = TMLA_FULL;
    o.freqfold = 1;
    o.rope_dim = gqa->head_dim;
    o.eval_tokens = 24;
    AttnLayer *L = NULL;
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &L, rep));
    return L;
}

static void test_kept(size_t window, double softcap, bool sinks, const char *what) {
    AttnLayer *gqa = tu_gqa(4, 2, 8, 24, ROPE_HALF, true, true);
    gqa->window = window;
    gqa->softcap = softcap;
    if (sinks) gqa->sinks = tu_randv(4, 1.5);
    TmlaLayerReport rep;
    AttnLayer *L = convert_full(gqa, &rep);
    CHECK(L && L->window == window && L->softcap == softcap, "%s: window %zu softcap %g carried as %zu %g", what, window,
          softcap, L ? L->window : 0, L ? L->softcap : 0);
    CHECK(L && (L->sinks != NULL) == sinks, "%s: the sinks carried", what);
    for (int h = 0; L && sinks && L->sinks && h < 4; h++) CHECK(L->sinks[h] == gqa->sinks[h], "%s: sink %d", what, h);
    double se = INFINITY, oe = INFINITY;
    if (L) tu_errs(gqa, L, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "%s: kv-rank full is not exact: scores %.3g outputs %.3g", what, se, oe);
    CHECK(rep.score_err < 1e-5 && rep.out_err < 1e-5, "%s: reported errors %.3g %.3g", what, rep.score_err, rep.out_err);
    /* the mask matters here: the same conversion with the window / sinks removed is far off */
    if (L && (window || sinks)) {
        AttnLayer *bare = attn_layer_copy(L);
        bare->window = 0;
        free(bare->sinks);
        bare->sinks = NULL;
        tu_errs(gqa, bare, &se, &oe);
        CHECK(oe > 1e-2, "%s: dropping the window / sinks changes the outputs by only %.3g", what, oe);
        attn_layer_free(bare);
    }
    attn_layer_free(L);
    attn_layer_free(gqa);
}

/* A Mistral checkpoint with identical KV heads and sliding_window 4: convert mla at full rank,
 * swapped into the forward pass over 24 tokens, gives the source's NLL (the window masks 20 of them). */
static void test_model(const char *tmp) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mistral-window", tmp);
    TuModel tm = {.model_type = "mistral", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 2, .head_dim = 8,
                  .inter = 24, .vocab = 40, .identical_kv = true, .dtype = DT_F32, .extra_config = "\"sliding_window\": 4"};
    CHECK_OK(tu_write_model(dir, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return;
    CHECK(cfg_layer_window(&m->cfg, 0) == 4 && cfg_layer_window(&m->cfg, 1) == 4, "the window of 4 on both layers");
    char why[1024];
    CHECK(analysis_available(m, AN_CONVERT_MLA, why, sizeof why), "convert mla on a windowed model: %s", why);
    CHECK(analysis_attn_export_lacks(&m->cfg, "DeepSeek-V3", why, sizeof why) && strstr(why, "sliding window of 4"),
          "the export lacks the window: %s", why);
    CHECK(mla_export_norm_eps(m, true, false) == 0, "no export can hold the window: the session keeps the source's eps, not %g",
          mla_export_norm_eps(m, true, false));
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = 8;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    Forward *f = NULL;
    if (r) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        int ids[24];
        for (int i = 0; i < 24; i++) ids[i] = (i * 37 + 11) % 40;
        double nll0 = 0, nll1 = 0, nll2 = 0;
        size_t c0 = 0, c1 = 0;
        CHECK_OK(fwd_nll(f, ids, 24, &nll0, &c0));
        for (int l = 0; l < 2; l++) {
            CHECK(r->layers[l]->window == 4 && r->rep[l].out_err < 1e-5, "layer %d: window %zu, out_err %.3g", l,
                  r->layers[l]->window, r->rep[l].out_err);
            CHECK_OK(fwd_set_attn(f, l, r->layers[l]));
        }
        fwd_reset(f);
        CHECK_OK(fwd_nll(f, ids, 24, &nll1, &c1));
        CHECK(c1 == c0 && fabs(nll1 - nll0) <= 1e-6 * fabs(nll0), "converted: nll %.9g vs the source's %.9g", nll1, nll0);
        for (int l = 0; l < 2; l++) r->layers[l]->window = 0;     /* without it: another model */
        fwd_reset(f);
        CHECK_OK(fwd_nll(f, ids, 24, &nll2, &c1));
        CHECK(fabs(nll2 - nll0) > 1e-4 * fabs(nll0), "the window changes nothing (%.9g vs %.9g)", nll2, nll0);
        fwd_free(f);
    }
    tmla_result_free(r);
    model_free(m);
}

int main(void) {
    test_model(test_tmpdir());
    test_kept(3, 0, false, "window 3");
    test_kept(0, 2.0, false, "soft-cap 2");
    test_kept(0, 0, true, "sinks");
    test_kept(5, 2.0, true, "window 5, soft-cap 2, sinks");
    return check_done();
}
