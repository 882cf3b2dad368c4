/* budget_run.c -- a compare width method's layer at the source's shapes with a stock, as compute bf16 runs it
 * (budget_run.h). Owns nothing past the layer it returns. */
#include "budget_run.h"

#include <stdlib.h>

#include "attn_stock_run.h"
#include "pad.h"

/* (rows, n wo) from W (rows, (n / div) wi): output column block b is W's block b / div, then zeros (wo >= wi). */
static Mat *blocks_cols(const Mat *W, size_t n, size_t div, size_t wi, size_t wo) {
    Mat *M = mat_new(W->rows, n * wo);
    for (size_t b = 0; M && b < n; b++)
        pad_cols(M, 0, b * wo, wo, (PadSrc){.F = W, .f0 = (b / div) * wi, .r = wi, .by_cols = true, .s = 1.0f});
    return M;
}

/* (n wo, cols) from W ((n / div) wi, cols): output row block b is W's block b / div, then zero rows. */
static Mat *blocks_rows(const Mat *W, size_t n, size_t div, size_t wi, size_t wo) {
    Mat *M = mat_new(n * wo, W->cols);
    for (size_t b = 0; M && b < n; b++)
        pad_rows(M, 0, b * wo, wo, (PadSrc){.F = W, .f0 = (b / div) * wi, .r = wi, .by_cols = false, .s = 1.0f});
    return M;
}

/* *W := blocks_cols of it, and its bias *b (may be NULL) likewise. */
static int widen_cols(Mat **W, float **b, size_t n, size_t div, size_t wi, size_t wo) {
    Mat *M = blocks_cols(*W, n, div, wi, wo), bv = {.rows = 1, .cols = (n / div) * wi, .data = b ? *b : NULL};
    Mat *B = M && b && *b ? blocks_cols(&bv, n, div, wi, wo) : NULL;
    if (!M || (b && *b && !B)) { mat_free(M); mat_free(B); return AL_ERR; }
    mat_free(*W);
    *W = M;
    if (B) { free(*b); *b = B->data; B->data = NULL; mat_free(B); }
    return AL_OK;
}

/* FaRR's VO (v_dim r) and QK (head_dim r) factors written at the source's widths, zero past r (pad.h, as truncate
 * and its export write them). */
static int farr_full(const AttnLayer *src, AttnLayer *C, unsigned *slots) {
    size_t H = (size_t)src->n_heads, G = (size_t)src->n_kv_heads;
    int rc = AL_OK;
    if (C->v_dim < src->v_dim) {
        size_t r = (size_t)C->v_dim, dv = (size_t)src->v_dim;
        Mat *O = blocks_rows(C->W_O, H, 1, r, dv);
        rc = O ? widen_cols(&C->W_V, &C->b_V, G, 1, r, dv) : AL_ERR;
        if (O) { mat_free(C->W_O); C->W_O = O; }
        C->v_dim = src->v_dim;
        *slots |= 1u << AS_V | 1u << AS_O;
    }
    if (rc == AL_OK && C->head_dim < src->head_dim) {
        size_t r = (size_t)C->head_dim, d = (size_t)src->head_dim;
        rc = widen_cols(&C->W_K, &C->b_K, G, 1, r, d);
        if (rc == AL_OK) rc = widen_cols(&C->W_Q, &C->b_Q, H, 1, r, d);
        C->head_dim = src->head_dim;
        *slots |= 1u << AS_Q | 1u << AS_K;
    }
    return rc;
}

/* Mean-pool's Gp KV heads repeated over the G groups each stands for (G / Gp apiece). */
static int pool_full(const AttnLayer *src, AttnLayer *C, unsigned *slots) {
    size_t G = (size_t)src->n_kv_heads, m = G / (size_t)C->n_kv_heads;
    int rc = widen_cols(&C->W_K, &C->b_K, G, m, (size_t)C->head_dim, (size_t)C->head_dim);
    if (rc == AL_OK) rc = widen_cols(&C->W_V, &C->b_V, G, m, (size_t)C->v_dim, (size_t)C->v_dim);
    C->n_kv_heads = src->n_kv_heads;
    *slots |= 1u << AS_K | 1u << AS_V;
    return rc;
}

int budget_run_layer(Model *m, int layer, const AttnLayer *src, const AttnLayer *L, budget_method k, AttnLayer **out) {
    *out = NULL;
    if (k != BUDGET_FARR && k != BUDGET_MEANPOOL && k != BUDGET_TPA_A && k != BUDGET_TPA_B) return AL_OK;
    AttnLayer *C = attn_layer_copy(L);
    unsigned slots = k == BUDGET_FARR ? 0 : 1u << AS_K | 1u << AS_V;   /* TPA's dense K / V */
    int rc = C ? AL_OK : AL_ERR;
    if (rc == AL_OK && k == BUDGET_FARR) rc = farr_full(src, C, &slots);
    if (rc == AL_OK && k == BUDGET_MEANPOOL && C->n_kv_heads < src->n_kv_heads) rc = pool_full(src, C, &slots);
    if (rc == AL_OK) rc = attn_layer_validate(C);
    if (rc == AL_OK) rc = attn_stock_attach(m, layer, C, slots);
    if (rc == AL_OK && C->stock) { *out = C; return AL_OK; }
    attn_layer_free(C);
    return rc;
}
