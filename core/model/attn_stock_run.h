/* attn_stock_run.h -- a transformed layer given the stock it runs with (attn_stock.h): its rewritten matrices as a
 * dense export of the source writes them, the rest the source's own. */
#ifndef AL_ATTN_STOCK_RUN_H
#define AL_ATTN_STOCK_RUN_H

#include "attn_eval.h"
#include "attn_stock.h"

/* L (a layer of m's layer `layer` as attn_layer_load lays it out, some matrices rewritten) given a stock whose slots
 * in the mask `slots` (bit AS_x) are L's matrices (and biases) as a dense export of m writes them: in the stored
 * tensor's dtype, FP8 as BF16 (export.c's out_dtype) -- the rest the model's own. Nothing (AL_OK, L->stock NULL)
 * where the route does not apply: an F32 / F16 model (its export runs float32, as the session does), a layout
 * other than separate projections, a slot whose tensor is absent or in another encoding. */
int attn_stock_attach(Model *m, int layer, AttnLayer *L, unsigned slots);

#endif
