/* mla_quant.h -- the quantization config of a TransMLA export (mla_export.c) of a quantized source.
 * The export copies the source's untouched tensors (MLP, experts, embeddings) byte for byte with
 * their scales and writes the rewritten attention in a float dtype; engines must still read the
 * copied codes as quantized, so the export keeps the source's quantization_config in the form the
 * source used (fp8 / mxfp4 / compressed-tensors / modelopt) and ModelOpt's hf_quant_config.json, with
 * every module it writes unquantized (the new attention projections, and any plain linear it copies)
 * added to the config's list of modules left unquantized (export.c's FaRR export does the same:
 * modules_to_not_convert, which transformers reads; ignored_layers / ignore / exclude_modules where
 * the source has a non-empty one, as vLLM, compressed-tensors and ModelOpt read them); a source entry
 * that would name a module copied quantized under the export's names is dropped; a static KV cache
 * scheme is dropped (mla_quant_kv_scheme). */
#ifndef AL_MLA_QUANT_H
#define AL_MLA_QUANT_H

#include "ckpt_write.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The export's modules (names without ".weight" or a scale suffix), under the export's names. */
typedef struct {
    char **plain;     /* (nplain) written unquantized: new attention projections, copied float linears */
    size_t nplain;
    char **quant;     /* (nquant) copied quantized, with their scales */
    size_t nquant;
} MlaQuantMods;

/* Copies the source config's quantization_config (src_tree may be NULL: nothing; nothing either when
 * the export copies no quantized module: every quantized one was attention) into cfg: entries
 * of its lists that name a quantized module (quant_entry_names) dropped, then each plain module
 * appended unless an entry already names it. */
int mla_quant_config(const cJSON *src_tree, const MlaQuantMods *m, cJSON *cfg);
/* Writes src_dir's hf_quant_config.json (when it has one and m->nquant) into w: ModelOpt's form with its
 * quantization.exclude_modules edited as above, any other form as it is. */
int mla_quant_hf_file(const char *src_dir, const MlaQuantMods *m, CkptWriter *w);

/* A static FP8 KV cache (quant_fused.h: quant_kv_scale) does not survive the conversion: an MLA layer caches its
 * latent (kv_a_proj's compressed values and the RoPE keys, one row per token), which vLLM quantizes with the
 * layer's k_scale alone (concat_and_cache_mla; SGLang alike, v_scale unused), while the source's k_scale /
 * v_scale were calibrated on its GQA keys and values. The export writes none of them (every attention tensor
 * is new) and drops the static scheme that names them -- compressed-tensors' kv_cache_scheme (unless
 * dynamic), ModelOpt's kv_cache_quant_algo in quantization_config and hf_quant_config.json (null) --, so
 * vLLM and SGLang take 1.0 (their default with none) and lint finds nothing stale; recalibrate for an FP8
 * cache. Whether the source's config names a static KV cache scheme (src_tree may be NULL). */
bool mla_quant_kv_scheme(const cJSON *src_tree);

#endif
