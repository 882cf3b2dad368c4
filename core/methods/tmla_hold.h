/* tmla_hold.h -- what a converted MLA layer keeps in memory (issue 32, "memory that does not grow with the
 * model"): the matrices TransMLA leaves unchanged are borrowed, the rewritten ones kept as their export stores them.
 *
 *   W_O      TransMLA leaves o_proj unchanged: held as a view of the source's stored o_proj in the mapping, in its
 *            own dtype (attn_eval.h's held matrices), when its values are the layer's W_O bit for bit; the float32
 *            copy (67 MB per 8B layer) is freed. Exports write the stored bytes.
 *   bf16     (compute bf16) W_Q (or W_QB) and W_KVB held in BF16, rounded as the BF16 export rounds them
 *            (dt_from_f32 of the transpose: the export's bytes), and multiplied by matmul.c's BF16 products in the
 *            session as in the reloaded export. W_KVA stays float32: the export scales it for its latent norm before
 *            rounding (mla_run_layers holds that scaled matrix in BF16 for the session's passes).
 *            Those BF16 bytes are then moved into spill mappings (attn_layer_spill_held: an unlinked file under
 *            $TMPDIR, written once; page cache the kernel may drop and read back), not anonymous memory; no file: kept.
 * Held in BF16 only where a DeepSeek-V3 export holds the conversion (every layer converted, with RoPE: tmla_convert;
 * a family that export takes: cmd_convert.c): else float32, as `export format attnlab` writes it. Made in compute f32
 * and measured in bf16, mla_run_for (mla_export.h) builds the BF16 export's layers from the float32 ones.
 * Per 8B layer (hidden 4096, 32 heads, kv-rank 512): 228 MB float32 -> 161 MB (W_O borrowed) -> 91 MB (bf16, with the run layers' 5 MB of BF16 kv_a),
 * 16 MB of it anonymous (W_KVA float32 and the run layers' BF16 copy; W_Q and W_KVB spilled). */
#ifndef AL_TMLA_HOLD_H
#define AL_TMLA_HOLD_H

#include "attn_eval.h"

/* Converted MLA layer L of source m's layer `layer`: W_O borrowed from m's o_proj where it equals it, and with
 * bf16 its rewritten matrices held in BF16. A GQA layer (qk-norm keep) is left as it is. */
int tmla_hold_layer(Model *m, int layer, AttnLayer *L, bool bf16);

/* Whether `convert mla` in compute mode c holds the rewritten matrices in BF16: bf16 mode on a source whose default
 * export (mla_export.c's export_dtype) is BF16 -- a BF16 source, or one in another encoding (FP8, FP4, ...). An F32 /
 * F16 source's conversion stays float32, as its F32 / F16 export and the compute rule (model_compute_note) keep it. */
bool tmla_hold_bf16_default(const Model *m, mm_compute c);

/* True when some converted layer holds a rewritten matrix (W_Q, W_QB, W_KVB) in BF16. */
bool tmla_held_bf16(AttnLayer *const *layers, int n);

#endif
