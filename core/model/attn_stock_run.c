/* attn_stock_run.c -- a transformed layer's stock from its float32 matrices (attn_stock_run.h). */
#include "attn_stock_run.h"

#include <stdlib.h>

/* The dtype a dense export writes stored tensor `what` of role r in layer `layer` in; DT_INVALID when absent or in
 * an encoding the stock route does not take. */
static dt_type written_dtype(Model *m, tensor_role r, int layer, const char *what) {
    char n[192];
    const st_entry *e = NULL;
    if (!cfg_role_name(&m->cfg, r, layer, -1, what, n, sizeof n) || !store_has(m->store, n)) return DT_INVALID;
    if (store_entry(m->store, n, &e, NULL) != AL_OK) { al_err_clear(); return DT_INVALID; }
    dt_type d = e->dtype;
    return d == DT_F8_E4M3 ? DT_BF16 : d == DT_BF16 || d == DT_F16 || d == DT_F32 ? d : DT_INVALID;
}

/* A layer the model's own attention code runs with its projections replaced: separate q / k / v / o (or MLA). */
static bool stock_layout(const ModelConfig *c, int layer, bool mla) {
    if (mla) return true;
    return cfg_role(c, ROLE_Q) && !cfg_role(c, ROLE_QKV) && !c->attn_gate && !c->kv_rebuild &&
           cfg_kv_source(c, layer) == layer && !cfg_layer_v_is_k(c, layer);
}

typedef struct { tensor_role role; const Mat *W; const float *b; } StockSlot;

/* Slot i of L: its role, float32 matrix and bias. */
static StockSlot slot_of(const AttnLayer *L, attn_stock_slot i) {
    switch (i) {
    case AS_Q: return L->W_QB ? (StockSlot){ROLE_Q_B, L->W_QB, L->b_Q} : (StockSlot){ROLE_Q, L->W_Q, L->b_Q};
    case AS_K: return (StockSlot){ROLE_K, L->W_K, L->b_K};
    case AS_V: return (StockSlot){ROLE_V, L->W_V, L->b_V};
    case AS_O: return (StockSlot){ROLE_O, L->W_O, L->b_O};
    case AS_KVB: return (StockSlot){ROLE_KV_B, L->W_KVB, NULL};
    case AS_N: break;
    }
    return (StockSlot){ROLE_COUNT, NULL, NULL};
}

/* Slot i of st as the export writes it; *ok false where the route does not apply. */
static int set_slot(Model *m, int layer, const AttnLayer *L, AttnStock *st, attn_stock_slot i, bool *ok) {
    StockSlot s = slot_of(L, i);
    dt_type dw = s.W ? written_dtype(m, s.role, layer, "weight") : DT_INVALID;
    dt_type db = s.b ? written_dtype(m, s.role, layer, "bias") : DT_F32;
    if (dw == DT_INVALID || db == DT_INVALID) { *ok = false; return AL_OK; }
    int rc = attn_stock_set(st, i, s.W, dw);
    if (rc == AL_OK && s.b) rc = attn_stock_set_bias(st, i, s.b, s.W->cols, db);
    return rc;
}

int attn_stock_attach(Model *m, int layer, AttnLayer *L, unsigned slots) {
    dt_type sd = m->cfg.dtype;
    if (sd == DT_F32 || sd == DT_F16 || !stock_layout(&m->cfg, layer, L->kind == ATTN_MLA)) return AL_OK;
    AttnStock *st = attn_stock_new();
    bool ok = st != NULL;
    int rc = st ? AL_OK : AL_ERR;
    for (int i = 0; rc == AL_OK && ok && i < AS_N; i++)
        if (slots & (1u << i)) rc = set_slot(m, layer, L, st, (attn_stock_slot)i, &ok);
    if (rc == AL_OK && ok) {
        attn_stock_free(L->stock);
        L->stock = st;
        return AL_OK;
    }
    attn_stock_free(st);
    return rc;
}
