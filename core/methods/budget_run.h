/* budget_run.h -- a `compare ... text` width method's layer as the forward pass runs it in compute bf16 (trust: one
 * question, one answer): the layer at the source's shapes -- FaRR's rank-r factors written at full size, zero past r,
 * as `truncate` and its dense export write them (farr.h farr_attn_layer); mean-pool's averaged KV heads repeated over
 * the groups they stand for; TPA's dense K / V -- carrying a stock (core/model/attn_stock.h): its rewritten
 * projections rounded as a dense BF16 export writes them, the rest the model's own, run by the model's own attention
 * code. So the farr row at rank r is `truncate vo rank r`'s `ppl` in the same mode, and a method that rewrites nothing
 * (full rank, every KV head) is the model's row, bit for bit. */
#ifndef AL_BUDGET_RUN_H
#define AL_BUDGET_RUN_H

#include "budget_compare.h"

/* Method k's layer L of m's layer `layer` (src: that layer as attn_layer_load gives it; L: budget_method_layer's) as
 * run in compute bf16, into *out (the caller's); *out NULL (AL_OK) where the route does not apply: TransMLA and
 * KQ-SVD, a model whose dense export runs float32 (F32 / F16), a layout without stock (attn_stock_run.h). */
int budget_run_layer(Model *m, int layer, const AttnLayer *src, const AttnLayer *L, budget_method k, AttnLayer **out);

#endif
