/* farr_run.c -- the FaRR working copy's layers as the session runs them (farr.h farr_attn_layer_run): in compute
 * bf16 on a source whose default export is BF16, each truncated layer carries a stock (core/model/attn_stock.h): the
 * forward pass runs it as it runs the reloaded dense export -- the rewritten projections in the dtype and bytes that
 * export writes them in (export.c: FP8 -> BF16, else the stored dtype; dt_from_f32 of the same float32 values), the
 * untouched ones the source's own views -- so `ppl`, `check`, `check DIR` and the reloaded export give one number,
 * and a truncation at full rank (nothing rewritten) the source's bit for bit. */
#include "farr.h"
#include "attn_stock_run.h"

/* The stock slots (bit AS_x) the plans rewrite in layer L: VO V and O (MLA: kv_b and O), QK Q and K (MLA: Q and kv_b). */
static unsigned rewritten_slots(const ModelConfig *c, const FarrPlan *pv, const FarrPlan *pq, int L, bool mla) {
    bool vo = farr_plan_cut_layer(pv, c, FARR_VO, L) != NULL, qk = farr_plan_cut_layer(pq, c, FARR_QK, L) != NULL;
    unsigned s = 0;
    if (vo) s |= 1u << AS_O | (mla ? 1u << AS_KVB : 1u << AS_V);
    if (qk) s |= 1u << AS_Q | (mla ? 1u << AS_KVB : 1u << AS_K);
    return s;
}

int farr_attn_layer_run(Model *m, const FarrPlan *vo, const FarrPlan *qk, int layer, mm_compute c, AttnLayer **out) {
    int rc = farr_attn_layer(m, vo, qk, layer, out);
    if (rc != AL_OK || !*out || c != MM_BF16) return rc;
    unsigned slots = rewritten_slots(&m->cfg, vo, qk, layer, (*out)->kind == ATTN_MLA);
    rc = attn_stock_attach(m, layer, *out, slots);
    if (rc != AL_OK) { attn_layer_free(*out); *out = NULL; }
    return rc;
}
