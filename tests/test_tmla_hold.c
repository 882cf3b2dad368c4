/* test_tmla_hold.c -- issue 32 (bfat): what a converted layer holds (tmla_hold.h). On a BF16 Llama:
 *   - W_O is a view of the source's o_proj (no float32 copy) in both modes; in compute bf16 W_Q and W_KVB are held in
 *     BF16: attn_layer_bytes per layer is 4 (q + kva + kvb) bytes, then 2 q + 4 kva + 2 kvb, against the float32
 *     layer's 4 (q + kva + kvb + o) (the old code held that);
 *   - the BF16 export of either is the same bytes (the held values are what the export writes);
 *   - in compute bf16 the conversion's run layers (mla_run_layers) give check's NLL equal to `check DIR` of the BF16
 *     export (its forward pass's own MLA layers) bit for bit, and the f32-mode check is unchanged by the borrowed W_O
 *     (the same NLL as the export's float32 layers to float rounding);
 *   - (bfp) made in f32 and checked in bf16, check's NLL is that BF16 export's too (mla_run_for builds its layers from
 *     the float32 ones); a range of layers is not held in BF16 (no DeepSeek-V3 export holds it). */
#include "test_transmla_util.h"
#include "test_mem_util.h"
#include "mla_export.h"
#include "tmla_hold.h"

/* Elements of slot i of L (0 when absent). */
static size_t elems(const AttnLayer *L, attn_held i) {
    size_t r, c;
    return attn_layer_dims(L, i, &r, &c) ? r * c : 0;
}

static TmlaResult *convert(Model *m, bool bf16) {
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 12;
    o.hold_bf16 = bf16;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    if (r) CHECK_OK(mla_run_layers(r));
    return r;
}

static void held_bytes(const TmlaResult *f, const TmlaResult *b) {
    const AttnLayer *L = f->layers[0], *B = b->layers[0];
    size_t q = elems(L, AH_Q), kva = elems(L, AH_KVA), kvb = elems(L, AH_KVB), o = elems(L, AH_O);
    CHECK(q == 64 * 4 * (32 + 32) && o == 128 * 64 && kva > 0 && kvb > 0, "dims: q %zu o %zu", q, o);
    CHECK(L->held[AH_O] && !L->W_O && L->held[AH_O]->buf == NULL, "W_O: a view of the mapping");
    CHECK(!L->held[AH_Q] && L->W_Q && !f->run, "f32: W_Q float32, no run layers");
    CHECK(attn_layer_bytes(L) == 4 * (q + kva + kvb), "f32: %zu bytes held, want %zu (float32 with W_O: %zu)",
          attn_layer_bytes(L), 4 * (q + kva + kvb), 4 * (q + kva + kvb + o));
    CHECK(B->held[AH_Q] && B->held[AH_Q]->w.dt == DT_BF16 && B->held[AH_KVB] && B->W_KVA && b->run,
          "bf16: W_Q, W_KVB in BF16, W_KVA float32, run layers");
    CHECK(attn_layer_bytes(B) == 2 * q + 4 * kva + 2 * kvb, "bf16: %zu bytes held, want %zu", attn_layer_bytes(B),
          2 * q + 4 * kva + 2 * kvb);
    CHECK(tmla_held_bf16(b->layers, b->n_layers) && !tmla_held_bf16(f->layers, f->n_layers), "tmla_held_bf16");
}

/* (bfp) A range of layers (no DeepSeek-V3 export holds it) is not held in BF16 even when asked: float32 layers, as
 * `export format attnlab` writes them, run in both modes (mla_run_for: its layers, no run layers). */
static void partial(Model *m) {
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 12;
    o.hold_bf16 = true;
    o.layer_hi = 0;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    if (r) CHECK_OK(mla_run_layers(r));
    AttnLayer *const *run = NULL;
    if (r) CHECK_OK(mla_run_for(r, MM_BF16, &run));
    if (r)
        CHECK(!tmla_held_bf16(r->layers, r->n_layers) && !r->opts.hold_bf16 && !r->run && run == r->layers &&
              r->run_none, "layers 0-0: float32, run as converted");
    tmla_result_free(r);
}

int main(void) {
    const char *tmp = test_tmpdir();
    char src[4096], ea[4096], eb[4096], fa[4200], fb[4200];
    snprintf(src, sizeof src, "%s/src", tmp);
    snprintf(ea, sizeof ea, "%s/ea", tmp);
    snprintf(eb, sizeof eb, "%s/eb", tmp);
    TuModel spec = {.model_type = "llama", .layers = 2, .hidden = 64, .heads = 4, .kv_heads = 2, .head_dim = 32,
                    .inter = 48, .vocab = 50, .dtype = DT_BF16};
    CHECK_OK(tu_write_model(src, &spec));
    Model *m = NULL;
    CHECK_OK(model_open(src, &m));
    if (!m) return check_done();
    TmlaResult *f = convert(m, false), *b = convert(m, true);
    if (f && b) held_bytes(f, b);
    MlaExportOpts eo = {.dtype = DT_BF16};
    if (f) CHECK_OK(mla_export(f, ea, &eo));
    if (b) CHECK_OK(mla_export(b, eb, &eo));
    snprintf(fa, sizeof fa, "%s/model.safetensors", ea);
    snprintf(fb, sizeof fb, "%s/model.safetensors", eb);
    CHECK(same_file(fa, fb), "the BF16 exports of the float32 and the BF16-held conversion differ");
    int ids[40];
    for (int t = 0; t < 40; t++) ids[t] = (t * 7 + 3) % m->cfg.vocab;
    MlaCheckIn in = {.tokens = 24, .seed = 5, .ids = ids, .n = 40, .seqlen = 20, .compute = MM_BF16};
    MlaCheck *s = NULL, *d = NULL;
    if (b) CHECK_OK(mla_check_stock(b, &in, &s));
    CHECK_OK(mla_check_in(eb, m, &in, &d));
    if (s && d)
        CHECK(s->nll_export == d->nll_export && s->stock_bf16, "bf16: check's NLL %.12g, check DIR's %.12g",
              s->nll_export, d->nll_export);
    if (s && d) printf("bf16: NLL %.12g in memory, %.12g read back\n", s->nll_export, d->nll_export);
    MlaCheck *s2 = NULL;                 /* (bfp) made in f32, checked in bf16: the BF16 export's layers (mla_run_for) */
    if (f) CHECK_OK(mla_check_stock(f, &in, &s2));
    if (s2 && d)
        CHECK(s2->nll_export == d->nll_export && s2->stock_bf16 && f->run_bf16 && !f->run,
              "f32-made, bf16-checked: NLL %.12g, check DIR's %.12g", s2->nll_export, d->nll_export);
    mla_check_free(s2);
    mla_check_free(d);
    mla_check_free(s);
    partial(m);
    tmla_result_free(f);
    tmla_result_free(b);
    model_free(m);
    return check_done();
}
