/* attn_stock_run.c -- a transformed layer's stock from its float32 matrices (attn_stock_run.h). */
#include "attn_stock_run.h"

#include <stdlib.h>
#include <string.h>

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

/* A layer the model's own attention code runs with its projections replaced: q / k / v / o, fused as Phi-3 or
 * GPT-NeoX (MHA) fuse them, or MLA. */
static bool stock_layout(const ModelConfig *c, int layer, bool mla) {
    if (mla) return true;
    bool fused = c->attn == QKV_CAT || (c->attn == QKV_HEADS && c->n_heads == c->n_kv_heads);
    return (cfg_role(c, ROLE_Q) || fused) && !c->kv_rebuild && cfg_kv_source(c, layer) == layer &&
           !cfg_layer_v_is_k(c, layer);
}

/* Columns of the n parts (each (rows, blocks w[i]) ; NULL: zeros) taken block by block: for each of `blocks` blocks,
 * w[0] columns of part 0, then w[1] of part 1, ... (rows x blocks sum w). */
static Mat *interleave(const Mat *const *part, const size_t *w, int n, size_t rows, size_t blocks) {
    size_t tw = 0;
    for (int i = 0; i < n; i++) tw += w[i];
    Mat *M = mat_new(rows, blocks * tw);
    for (size_t r = 0; M && r < rows; r++) {
        float *dst = M->data + r * M->cols;
        for (size_t b = 0; b < blocks; b++)
            for (int i = 0; i < n; dst += w[i], i++)
                if (part[i]) memcpy(dst, part[i]->data + r * part[i]->cols + b * w[i], w[i] * sizeof(float));
    }
    return M;
}

/* Slot `slot` of st := parts interleaved (weights; biases b where any is set) in the dtypes the export writes role r
 * in; *ok false where the route does not apply. */
static int set_joined(Model *m, int layer, AttnStock *st, attn_stock_slot slot, tensor_role r, const Mat *const *W,
                      const float *const *b, const size_t *w, int n, size_t blocks, bool *ok) {
    bool any_b = false;
    for (int i = 0; i < n; i++) any_b |= b[i] != NULL;
    dt_type dw = written_dtype(m, r, layer, "weight"), db = any_b ? written_dtype(m, r, layer, "bias") : DT_F32;
    if (dw == DT_INVALID || db == DT_INVALID) { *ok = false; return AL_OK; }
    Mat *M = interleave(W, w, n, W[0]->rows, blocks);
    Mat bv[3], *bp[3];
    for (int i = 0; i < n; i++) {
        bv[i] = (Mat){.rows = 1, .cols = blocks * w[i], .data = (float *)b[i]};
        bp[i] = b[i] ? &bv[i] : NULL;
    }
    Mat *B = any_b ? interleave((const Mat *const *)bp, w, n, 1, blocks) : NULL;
    int rc = M && (!any_b || B) ? attn_stock_set(st, slot, M, dw) : AL_ERR;
    if (rc == AL_OK && B) rc = attn_stock_set_bias(st, slot, B->data, B->cols, db);
    mat_free(M);
    mat_free(B);
    return rc;
}

/* The fused qkv of L (Phi-3: [Q | K | V]; GPT-NeoX: head by head [q_h | k_h | v_h]). */
static int set_fused(Model *m, int layer, const AttnLayer *L, AttnStock *st, bool *ok) {
    bool heads = m->cfg.attn == QKV_HEADS;
    size_t blocks = heads ? (size_t)L->n_heads : 1, d = (size_t)L->head_dim, dv = (size_t)L->v_dim;
    const Mat *W[3] = {L->W_Q, L->W_K, L->W_V};
    const float *b[3] = {L->b_Q, L->b_K, L->b_V};
    size_t w[3] = {heads ? d : L->W_Q->cols, heads ? d : L->W_K->cols, heads ? dv : L->W_V->cols};
    return set_joined(m, layer, st, AS_QKV, ROLE_QKV, W, b, w, 3, blocks, ok);
}

/* A gated q_proj: per head [query | gate] (no biases taken: *ok false with one). */
static int set_gated_q(Model *m, int layer, const AttnLayer *L, AttnStock *st, bool *ok) {
    if (!L->W_G || L->b_Q || L->b_G || L->W_G->cols != L->W_Q->cols) { *ok = false; return AL_OK; }
    const Mat *W[2] = {L->W_Q, L->W_G};
    const float *b[2] = {NULL, NULL};
    size_t w[2] = {(size_t)L->head_dim, (size_t)L->head_dim};
    return set_joined(m, layer, st, AS_Q, ROLE_Q, W, b, w, 2, (size_t)L->n_heads, ok);
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
    case AS_QKV:
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
    unsigned qkv = 1u << AS_Q | 1u << AS_K | 1u << AS_V;
    bool fused = L->kind != ATTN_MLA && !cfg_role(&m->cfg, ROLE_Q), gated = m->cfg.attn_gate && (slots & 1u << AS_Q);
    if (rc == AL_OK && fused && (slots & qkv)) rc = set_fused(m, layer, L, st, &ok);
    if (rc == AL_OK && ok && !fused && gated) rc = set_gated_q(m, layer, L, st, &ok);
    if (fused || gated) slots &= fused ? ~qkv : ~(1u << AS_Q);
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
