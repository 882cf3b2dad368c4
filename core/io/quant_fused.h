/* quant_fused.h -- the linear layers vLLM (and SGLang, whose loaders adapt vLLM's) fuses from
 * separate checkpoint modules, and the rule that all shards of one fused layer share one precision.
 *
 * From vLLM's model classes (packed_modules_mapping) and loaders (settled from the sources):
 *  - llama (and mistral, qwen2 / qwen3, gemma, mixtral's attention, every class built on
 *    QKVParallelLinear / MergedColumnParallelLinear): "qkv_proj" <- q_proj, k_proj, v_proj and
 *    "gate_up_proj" <- gate_proj, up_proj; phi3 stores them fused already (qkv_proj, gate_up_proj:
 *    one module, nothing to mix); deepseek_v2 / v3: gate_up_proj, and "fused_qkv_a_proj" <- q_a_proj,
 *    kv_a_proj_with_mqa when q_lora_rank is set. Routed experts (".experts.") go to FusedMoE, which
 *    has its own rule, and are not shards here.
 *  - quant_utils.py is_layer_skipped (Fp8Config's ignored_layers / modules_to_not_convert, ModelOpt's
 *    is_layer_excluded first of all): for a fused layer, each shard's name looked up in the list; a
 *    shard skipped and another not raises "Detected some but not all shards of <prefix> are
 *    quantized. All shards of fused layers to have the same precision."
 *  - compressed_tensors/utils.py should_ignore_layer (the "ignore" list, exact names or "re:"
 *    regexes): the same, raising "Found a different quantization schemes for [...] in <layer>. vLLM
 *    requires all to use the same scheme."
 * transformers builds every module on its own (no fusion) and loads such a folder.
 *
 * Nothing is printed; these are pure name functions. */
#ifndef AL_QUANT_FUSED_H
#define AL_QUANT_FUSED_H

#include <stddef.h>

#define QUANT_FUSED_MAX 3   /* shards of one fused layer at most (q, k, v) */

/* When module `mod` (a weight's name minus ".weight", "model.layers.3.self_attn.v_proj") is a shard of
 * a layer vLLM fuses: the fused layer's last name into *fused ("qkv_proj"; may be NULL), each shard's
 * full module name into shards[i] (256 bytes each), and their count (2 or 3, mod among them); else 0.
 * A name that does not fit: 0. */
int quant_fused_shards(const char *mod, char shards[][256], const char **fused);

/* KV cache scales (vLLM's maybe_remap_kv_scale_name, kv_cache.py's BaseKVCacheMethod; SGLang's copy): a
 * static FP8 KV cache's per-layer scales, stored as "<attn>.k_scale" / "<attn>.v_scale" (compressed-tensors'
 * kv_cache_scheme, Quark), "<attn>.k_proj.k_scale" / "<attn>.v_proj.v_scale" (ModelOpt's
 * kv_cache_quant_algo), "<attn>.k_proj.output_scale" / "<attn>.v_proj.output_scale" (older
 * llm-compressor) or one "<attn>.kv_scale" (older fp8 checkpoints, used for both); "q_scale" /
 * "q_proj.output_scale" calibrate the queries of an FP8 attention. Each is the amax of the values the
 * cache holds over 448, calibrated on the source's keys / values. vLLM starts k_scale and v_scale at -1
 * and after loading: both found -> used; neither -> 1.0 (its default, "may cause accuracy issues"); one
 * alone -> copied to the other (an old single kv_scale), or an assertion on a v_scale alone.
 * The side of tensor `name` ('k', 'v', 'b' for a kv_scale of both, 'q'), or 0 when it is none of them. */
int quant_kv_scale(const char *name);

#endif
