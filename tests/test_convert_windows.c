/* test_convert_windows.c -- issue 30 section 1: a TransMLA conversion keeps the source layer's
 * attention mask and softmax: its sliding window, score soft-cap and gpt-oss's sink logits. On a
 * layer with identical KV heads (where kv-rank full, D = d is exact) the converted layer with a
 * window of 3 tokens, a soft-cap of 2 and a sink per head matches the source to float precision;
 * before, tmla_build dropped all three and the outputs differed by O(1). */
#include "test_transmla_util.h"
#include "transmla.h"

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

int main(void) {
    test_kept(3, 0, false, "window 3");
    test_kept(0, 2.0, false, "soft-cap 2");
    test_kept(0, 0, true, "sinks");
    test_kept(5, 2.0, true, "window 5, soft-cap 2, sinks");
    return check_done();
}
