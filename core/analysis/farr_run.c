/* farr_run.c -- the FaRR working copy's layers as the session runs them (farr.h farr_attn_layer_run): in compute
 * bf16 on a source whose default export is BF16, each truncated layer carries a stock (core/model/attn_stock.h): the
 * forward pass runs it as it runs the reloaded dense export -- the rewritten projections in the dtype and bytes that
 * export writes them in (export.c: FP8 -> BF16, else the stored dtype; dt_from_f32 of the same float32 values), the
 * untouched ones the source's own views -- so `ppl`, `check`, `check DIR` and the reloaded export give one number,
 * and a truncation at full rank (nothing rewritten) the source's bit for bit. */
#include "farr.h"
#include "attn_stock_run.h"

/* True when the plan cuts the layer: some group of width w below full rank (export.c's cut_layer). A layer every
 * group of which keeps its full rank is the source's in the export, biases and all (the affine split at full rank
 * is the same map in another basis), so its stock sets nothing: the source's bit for bit. */
static bool rewrites(const FarrTruncLayer *tl, int w) {
    if (!tl) return false;
    for (int g = 0; g < tl->n_kv; g++)
        if (tl->groups[g]->rank < w) return true;
    return false;
}

/* The stock slots (bit AS_x) the plans rewrite in layer L: VO V and O (MLA: kv_b and O), QK Q and K (MLA: Q and kv_b). */
static unsigned rewritten_slots(const ModelConfig *c, const FarrTruncLayer *tv, const FarrTruncLayer *tq, bool mla) {
    bool nope = mla || (c->qk_nope_dim > 0 && c->qk_rope_dim > 0);
    bool vo = rewrites(tv, c->v_dim), qk = rewrites(tq, nope ? c->qk_nope_dim : cfg_d_qk(c));
    unsigned s = 0;
    if (vo) s |= 1u << AS_O | (mla ? 1u << AS_KVB : 1u << AS_V);
    if (qk) s |= 1u << AS_Q | (mla ? 1u << AS_KVB : 1u << AS_K);
    return s;
}

int farr_attn_layer_run(Model *m, const FarrPlan *vo, const FarrPlan *qk, int layer, mm_compute c, AttnLayer **out) {
    int rc = farr_attn_layer(m, vo, qk, layer, out);
    if (rc != AL_OK || !*out || c != MM_BF16) return rc;
    unsigned slots = rewritten_slots(&m->cfg, farr_plan_layer(vo, layer), farr_plan_layer(qk, layer),
                                     (*out)->kind == ATTN_MLA);
    rc = attn_stock_attach(m, layer, *out, slots);
    if (rc != AL_OK) { attn_layer_free(*out); *out = NULL; }
    return rc;
}
