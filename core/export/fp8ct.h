/* fp8ct.h -- a rewritten weight of a per-tensor / per-channel FP8 source written back in FP8 in that
 * source's strategy (`export ... dtype fp8`, export.c): compressed-tensors' "float-quantized" FP8
 * (llm-compressor's FP8 / FP8_DYNAMIC schemes: Llama-3.1-70B-Instruct-FP8, Qwen3-32B-FP8 static per
 * tensor) and ModelOpt FP8, whose weights are "<w>" F8_E4M3 with a "<w>_scale" that multiplies
 * (tensor.h, dt_fp8_dequant_rows).
 *
 * The layout, from the sources (settled with compressed-tensors' lifecycle/initialize.py and vLLM's
 * compressed_tensors_w8a8_fp8 scheme):
 *  - the scale's shape: strategy "tensor" -> [1] (compressed-tensors' expected_shape 1; AutoFP8 and
 *    ModelOpt wrote []), "channel" -> [out, 1]; vLLM's loader takes [] and [1] alike. Its dtype: the
 *    module's weight dtype (BF16 for a BF16 model), F32 from other writers. The export keeps the
 *    source's shape and dtype for every scale it rewrites.
 *  - a static input scheme ("input_activations": {"dynamic": false}) stores "<module>.input_scale";
 *    vLLM fills a missing one with float32's lowest and takes the max over a fused layer's shards, so
 *    every module kept FP8 in a static scheme needs its own. A rewritten projection whose input the
 *    truncation does not change (q / k / v_proj, a fused qkv) keeps the source's input_scale bit for
 *    bit (it calibrates the input, not the weight); one whose input changes (o_proj after a VO cut:
 *    the heads' values come out in the factors' basis) has no calibrated scale, so export.c writes it
 *    in BF16 and lists it unquantized (ignore) -- o_proj is a layer of its own in vLLM, so this leaves
 *    no fused layer half quantized. A dynamic or weight-only source keeps every rewritten weight in FP8.
 *
 * The scale of a rewritten unit (a row for "channel", the whole tensor for "tensor") is the source's
 * scale times 2^k, k the one that puts the unit's largest value in E4M3's top binade (224, 448] x
 * scale (k = 0 when the values still fit there, so a unit the truncation leaves alone keeps its
 * scale and its codes; an all-zero unit keeps its scale); a power of two keeps a BF16 scale exact.
 * Values are rounded to nearest E4M3, saturating at +-448. */
#ifndef AL_FP8CT_H
#define AL_FP8CT_H

#include "tensor.h"

/* The scale of a unit whose source scale was `old` (F32 value of the stored scale) and whose new values
 * reach amax, as stored in sdt (F32 / BF16 / F16) and read back: what the codes are computed with. */
float fp8ct_scale(float old, double amax, dt_type sdt);
/* n values w as E4M3 codes q at scale s; a value bitwise equal to its source value wold[j] (NULL:
 * none) keeps its source code old[j] when s is the source's scale s_old. Adds ||dec - w||^2 and ||w||^2
 * to acc (the error the encoding added). */
void fp8ct_encode_row(const float *w, size_t n, float s, const float *wold, const uint8_t *old, float s_old,
                      uint8_t *q, double acc[2]);

#endif
