/* test_attnlab_reader.c -- issue 30 section 2: the MLA reader (attn_layer_load, core/model/attn_eval.c) reads an
 * `export DIR format attnlab` folder's layers with what attnlab's layout keeps beyond DeepSeek-V3's: each layer's
 * sliding window, the score soft-cap, gpt-oss's sink logits and a NoPE layer's RoPE frequencies 0. On the synthetic
 * gpt_oss (windows on alternate layers, sinks), gemma2 (windows, soft-cap) and smollm3 (a NoPE layer) converted at
 * kv-rank 48 and exported, every reloaded layer carries the source's window / soft-cap / sinks and its outputs on
 * random inputs equal the session's converted layer's (rel 1e-5); before, the reader left all of them out (only
 * `check DIR`'s own patch in mla_export.c put them back) and the windowed / sink layers were O(1) off. */
#include "check.h"
#include "attn_eval.h"
#include "mla_export.h"
#include "synth.h"
#include "transmla.h"

#include <stdio.h>

static Mat *rand_x(size_t T, int hidden) {
    Mat *X = mat_new(T, (size_t)hidden);
    unsigned s = 12345;
    for (size_t i = 0; X && i < T * (size_t)hidden; i++) {
        s = s * 1103515245u + 12345u;
        X->data[i] = (float)(((s >> 8) & 0xffff) / 32768.0 - 1.0);
    }
    return X;
}

static void one_family(const char *fam, const char *tmp) {
    char src[4096], ex[4096];
    snprintf(src, sizeof src, "%s/%s", tmp, fam);
    snprintf(ex, sizeof ex, "%s/%s-attnlab", tmp, fam);
    CHECK_OK(synth_family_write(fam, DT_F32, 7, src));
    Model *m = NULL, *e = NULL;
    CHECK_OK(model_open(src, &m));
    if (!m) return;
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 48;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    MlaExportOpts eo = {.dtype = DT_F32, .attnlab = true};
    if (r) CHECK_OK(mla_export(r, ex, &eo));
    if (r) CHECK_OK(model_open(ex, &e));
    int windowed = 0, sinks = 0, nope = 0;
    Mat *X = rand_x(40, m->cfg.hidden);
    int pos[40];
    for (int i = 0; i < 40; i++) pos[i] = i;
    for (int l = 0; e && l < m->cfg.n_layers; l++) {
        AttnLayer *b = NULL;
        CHECK_OK(attn_layer_load(e, l, &b));
        if (!b) continue;
        const AttnLayer *s = r->layers[l];
        CHECK(b->window == s->window && b->window == cfg_layer_window(&m->cfg, l), "%s layer %d: window %zu, the session's %zu",
              fam, l, b->window, s->window);
        CHECK(b->softcap == s->softcap, "%s layer %d: soft-cap %g, the session's %g", fam, l, b->softcap, s->softcap);
        CHECK((b->sinks != NULL) == (s->sinks != NULL), "%s layer %d: sinks read %d, the session's %d", fam, l,
              b->sinks != NULL, s->sinks != NULL);
        for (int h = 0; b->sinks && s->sinks && h < b->n_heads; h++)
            CHECK(b->sinks[h] == s->sinks[h], "%s layer %d: sink %d %g, the session's %g", fam, l, h, b->sinks[h], s->sinks[h]);
        bool zero = b->inv_freq && b->rope_dim > 0 && b->inv_freq[0] == 0;
        CHECK(zero == (s->inv_freq && s->rope_dim > 0 && s->inv_freq[0] == 0), "%s layer %d: NoPE as the session's", fam, l);
        windowed += b->window > 0;
        sinks += b->sinks != NULL;
        nope += zero;
        AttnOut *ob = NULL, *os = NULL;
        CHECK_OK(attn_eval(b, X, pos, false, &ob));
        CHECK_OK(attn_eval(s, X, pos, false, &os));
        double se = 0, oe = 1;
        if (ob && os) attn_rel_err(os, ob, &se, &oe);
        CHECK(oe < 1e-5, "%s layer %d: the reloaded layer's outputs are %.3g off the session's", fam, l, oe);
        attn_out_free(ob);
        attn_out_free(os);
        attn_layer_free(b);
    }
    if (!strcmp(fam, "gpt_oss")) CHECK(windowed > 0 && sinks == m->cfg.n_layers, "gpt_oss: %d windowed, %d with sinks", windowed, sinks);
    if (!strcmp(fam, "gemma2")) CHECK(windowed > 0 && m->cfg.attn_softcap > 0, "gemma2: %d windowed layers", windowed);
    if (!strcmp(fam, "smollm3")) CHECK(nope > 0, "smollm3: %d NoPE layers read", nope);
    mat_free(X);
    model_free(e);
    tmla_result_free(r);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    one_family("gpt_oss", tmp);
    one_family("gemma2", tmp);
    one_family("smollm3", tmp);
    return check_done();
}
