/* attn_stock.h -- a transformed layer run as a loaded model's layer (issue "one number", FaRR in compute bf16).
 *
 * An override (fwd_set_attn) whose AttnLayer carries an AttnStock is not evaluated by attn_eval: the forward pass
 * runs the model's own attention code on that layer (projections through matmul.c in the pass's mode, its RoPE
 * tables, its attention kernel and KV cache), with the stored weights of the slots set here in place of the model's
 * and the model's own (views of the mapping) elsewhere. A rewritten matrix set as its export writes it (BF16 bytes
 * of dt_from_f32) thus runs exactly as the reloaded export runs it: the session's perplexity is the export's, and a
 * transformation that rewrites nothing gives the source's bit for bit. The AttnLayer's float32 matrices stay as
 * they are for the analyses (compare; FaRR's run layers hold W_Q / W_O instead, farr_run.c).
 *
 * Slots: GQA q_proj, k_proj, v_proj, o_proj (or the fused qkv); MLA q_proj (or q_b_proj), kv_b_proj, o_proj. A
 * GPT-2 Conv1D layer, a KV rebuild or a KV-shared layer takes no stock
 * (attn_stock_run.h attn_stock_attach). */
#ifndef AL_ATTN_STOCK_H
#define AL_ATTN_STOCK_H

#include "matmul.h"

/* AS_QKV: a fused projection (Phi-3's qkv_proj, GPT-NeoX's query_key_value) set whole where Q, K or V change; AS_Q of
 * a gated q_proj (Qwen3-Next) holds its rows per head [query | gate]. */
typedef enum { AS_Q, AS_K, AS_V, AS_O, AS_KVB, AS_QKV, AS_N } attn_stock_slot;

typedef struct AttnStock {
    WMat w[AS_N];             /* (out, in) stored weight replacing the model's; data NULL: the model's own */
    void *buf[AS_N];          /* owned bytes of w[i].data */
    Mat *b[AS_N];             /* (1, out) bias replacing the model's, or NULL: the model's own */
} AttnStock;

/* A stock that replaces nothing (the model's own layer); NULL + error on failure. */
AttnStock *attn_stock_new(void);
void attn_stock_free(AttnStock *s);
/* Slot i := M (in, out) transposed and written in dtype dt (DT_BF16 / DT_F16 / DT_F32) as dt_from_f32 writes it. */
int attn_stock_set(AttnStock *s, attn_stock_slot i, const Mat *M, dt_type dt);
/* Slot i's bias := b (out values) rounded through dtype dt as dt_from_f32 writes it (DT_F32: as is). */
int attn_stock_set_bias(AttnStock *s, attn_stock_slot i, const float *b, size_t out, dt_type dt);

#endif
