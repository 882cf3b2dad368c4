/* attnlab_export.h -- `export DIR format attnlab`: a `convert mla` conversion in attnlab's own layout, for
 * conversions DeepSeek-V3's stock layout cannot hold (mla_gaps.h: windows, sinks, soft-caps, block
 * norms, embedding scales, ...; and any other), which `load DIR` reads back and runs as the session ran it.
 *
 * The folder is the source's checkpoint with the attention rewritten (mla_export.c writes it, through
 * the same plan, with MlaExportOpts.attnlab):
 *   config.json      the SOURCE's config.json (every key: windows, layer_types, soft-caps, norms, MLP,
 *                    MoE) with model_type "attnlab_mla", architectures ["AttnlabMlaForCausalLM"] (no
 *                    engine has either: they refuse it by name rather than miscompute it),
 *                    attnlab_source_model_type (the source's model_type: its family row gives every
 *                    trait, core/model/config.c), DeepSeek-V3's MLA keys (kv_lora_rank, q_lora_rank,
 *                    qk_rope_head_dim, qk_nope_head_dim, v_head_dim, rope_interleave true, attention_bias),
 *                    qk_latent_layernorm false (the session's latents have no norm: nothing to build),
 *                    rms_norm_eps the session's (what its ppl ran at), and attnlab_kept: the features
 *                    kept that DeepSeek-V3's layout lacks (mla_gaps.h's names).
 *   model.safetensors every tensor of the source but its attention, under its own name and bytes; per
 *                    layer DeepSeek-V3's attention names (q_proj or q_a/q_b, kv_a_proj_with_mqa,
 *                    kv_b_proj, o_proj, biases) and self_attn.sinks (gpt-oss) in float32 by default; the
 *                    query scaled so the softmax scale the config implies (cfg_attn_scale: Gemma's
 *                    query_pre_attn_scalar, ...) gives the session's scores.
 *   attnlab_manifest.json  as the stock export's (format "attnlab", latent_norm "none"), so `check DIR`
 *                    compares it with its source.
 * Per-layer kv ranks (CARE's allocation) are written padded to the largest with zeros, attnlab_kv_ranks listing each
 * layer's; layers with their own RoPE frequencies (MHA2MLA's selected pairs) carry them in self_attn.rope_inv_freq (F64)
 * with attnlab_layer_rope true. The reader cuts the padding off and reads the frequencies; the forward pass runs the
 * padded layers as they are (zeros add nothing) and layers of their own frequencies through the reader's layer.
 * qk-norm keep (tmla_qkn.h) is the source's attention with its keys and values rebuilt from a cache: the config
 * keeps the source's attention keys (no MLA dims are read) with attnlab_qk_norm "keep" and attnlab_kv_cache_dim n
 * (r + D); per layer the source's q_proj, q_norm, k_norm, o_proj (as the session holds them), kv_a_proj_with_mqa
 * (n, hidden) (the cache: fold's latent and RoPE key) and kv_b_proj (G d + G dv, n) (the least-squares rebuild of
 * [K | V]); the forward pass and the reader form [K | V] = (x W_KVA) W_KVB, then the source's k_norm and RoPE. */
#ifndef AL_ATTNLAB_EXPORT_H
#define AL_ATTNLAB_EXPORT_H

#include "transmla.h"

struct cJSON;

/* The model_type of the layout. */
#define ATTNLAB_MLA_TYPE "attnlab_mla"

/* AL_OK when r can be written in attnlab's layout: every layer converted with the result's dims, a text-only
 * source read by Llama-style keys; else the refusal as the error. */
int attnlab_exportable(const TmlaResult *r);
/* config.json of the export (caller frees; NULL + error). eps: the session's norm eps (0: the source's). */
struct cJSON *attnlab_config(const TmlaResult *r, bool bias, double eps);
/* The layers as written: copies of r's with the query scaled so that the scale config implies gives the
 * session's scores (out: n_layers, caller frees each and the array). */
int attnlab_layers(const TmlaResult *r, const struct cJSON *config, AttnLayer ***out);
/* Whether some layer's RoPE frequencies are not the model's (MHA2MLA's pairs): each layer's written in
 * self_attn.rope_inv_freq (F64), attnlab_layer_rope true. */
bool attnlab_own_freqs(const TmlaResult *r);
/* The largest kv rank of r's MLA layers: the kv_lora_rank written (smaller ones padded with zeros, attnlab_kv_ranks). */
int attnlab_max_rank(const TmlaResult *r);
/* Marks a manifest written for the layout (format, no latent norm, what it keeps). */
void attnlab_manifest(struct cJSON *m, const TmlaResult *r);
/* Appends to buf the features of c that the layout keeps and DeepSeek-V3's lacks ("sliding window, attention
 * soft-cap"; "" when none; the q/k norm only when qk_norm_kept: qk-norm keep); returns their count. */
int attnlab_kept(const ModelConfig *c, bool qk_norm_kept, char *buf, size_t cap);

#endif
