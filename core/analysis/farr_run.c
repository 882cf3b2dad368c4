/* farr_run.c -- the FaRR working copy's layers as the session runs them (farr.h farr_attn_layer_run): in compute
 * bf16 on a source whose default export is BF16, each truncated layer carries a stock (core/model/attn_stock.h): the
 * forward pass runs it as it runs the reloaded dense export -- the rewritten projections in the dtype and bytes that
 * export writes them in (export.c: FP8 -> BF16, else the stored dtype; dt_from_f32 of the same float32 values), the
 * untouched ones the source's own views -- so `ppl`, `check`, `check DIR` and the reloaded export give one number,
 * and a truncation at full rank (nothing rewritten) the source's bit for bit. Such a layer keeps no float32 copy of
 * W_Q and W_O (the pass reads the stock; `check`'s error table folds its own float32 layer, farr_attn_layer): they
 * are held (attn_eval.h) as the stock's bytes where rewritten, else as views of the stored tensors. */
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

/* Slot h (stock slot s, role r) of the run layer L held instead of its float32 copy: the stock's bytes where it
 * rewrote s (what the pass runs), else a view of m's stored tensor where that is the copy's values; else kept. */
static int hold_slot(Model *m, int layer, AttnLayer *L, attn_held h, attn_stock_slot s, tensor_role r) {
    size_t rows, cols;
    if (L->held[h] || !attn_layer_dims(L, h, &rows, &cols)) return AL_OK;   /* held already, or absent */
    WMat w = L->stock->w[s];
    if (w.data) return attn_layer_hold(L, h, &w, NULL);              /* a view of the stock's bytes (own NULL) */
    char name[192];
    if (!cfg_role_name(&m->cfg, r, layer, -1, "weight", name, sizeof name) || !store_has(m->store, name)) return AL_OK;
    if (wmat_view(m->store, name, false, &w)) { al_err_clear(); return AL_OK; }
    return attn_layer_hold_same(L, h, &w);
}

/* A GQA run layer's W_Q (separate, ungated) and W_O held (hold_slot). */
static int hold_run(Model *m, int layer, AttnLayer *L) {
    if (L->kind != ATTN_GQA || !L->stock) return AL_OK;
    int rc = AL_OK;
    if (cfg_role(&m->cfg, ROLE_Q) && !m->cfg.attn_gate && !L->W_G) rc = hold_slot(m, layer, L, AH_Q, AS_Q, ROLE_Q);
    if (rc == AL_OK) rc = hold_slot(m, layer, L, AH_O, AS_O, ROLE_O);
    return rc;
}

int farr_attn_layer_run(Model *m, const FarrPlan *vo, const FarrPlan *qk, int layer, mm_compute c, AttnLayer **out) {
    int rc = farr_attn_layer(m, vo, qk, layer, out);
    if (rc != AL_OK || !*out || c != MM_BF16) return rc;
    unsigned slots = rewritten_slots(&m->cfg, vo, qk, layer, (*out)->kind == ATTN_MLA);
    rc = attn_stock_attach(m, layer, *out, slots);
    if (rc == AL_OK) rc = hold_run(m, layer, *out);
    if (rc != AL_OK) { attn_layer_free(*out); *out = NULL; }
    return rc;
}
