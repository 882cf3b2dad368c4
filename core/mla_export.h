/* mla_export.h -- writing a TransMLA conversion as a DeepSeek-V3 checkpoint, and `check`: loading
 * such an export and comparing its attention with the model it came from.
 *
 * The export folder gets (staged beside it and renamed into place when complete):
 *   config.json      the source's config with model_type deepseek_v3, architectures
 *                    ["DeepseekV3ForCausalLM"], num_key_value_heads = heads, kv_lora_rank,
 *                    q_lora_rank (null: a plain q_proj), qk_rope_head_dim = head_dim = D,
 *                    qk_nope_head_dim, v_head_dim, attention_bias, qk_latent_layernorm false,
 *                    rope_interleave true, first_k_dense_replace = layers (every MLP stays dense);
 *                    sliding-window and GQA-only keys dropped.
 *   model.safetensors (or model-0000i-of-0000n.safetensors + model.safetensors.index.json)
 *                    per layer q_proj (or q_a_proj + q_b_proj), kv_a_proj_with_mqa = [latent rows ;
 *                    D shared RoPE key rows, pairs interleaved], kv_b_proj = per head [k_nope rows ;
 *                    v rows], o_proj; biases when the source had any (kv_a_proj_with_mqa, o_proj,
 *                    q_a_proj, and q_proj's when the query has no latent: DeepSeek's stock code has
 *                    no q_proj bias, see the manifest); no kv_a_layernorm. Every other tensor is
 *                    copied bit for bit (same name, dtype, shape, bytes).
 *   attnlab_manifest.json  method, options, ranks, per-layer energies and errors, parameter and
 *                    KV-cache accounting, the source path (what `check` compares against).
 *   the source's auxiliary files (tokenizer, generation config, licence; ckpt_copy_aux). */
#ifndef AL_MLA_EXPORT_H
#define AL_MLA_EXPORT_H

#include "transmla.h"

typedef struct {
    dt_type dtype;            /* of the new attention tensors; DT_INVALID: the source's (F32/F16/BF16),
                                 BF16 for other sources */
    size_t shard_bytes;       /* split the weights into shards of at most this many bytes (0: 4 GiB) */
    bool force;               /* replace an existing non-empty dir as a whole */
} MlaExportOpts;

/* Writes r (every layer converted) into dir through the checkpoint writer (core/ckpt_write.h):
 * dir must not exist or be empty (force: replaced as a whole), and must not be the source's
 * folder. A dtype other than F32, F16 or BF16 is refused. */
int mla_export(const TmlaResult *r, const char *dir, const MlaExportOpts *o);

/* The name of the manifest file in an export folder. */
#define MLA_MANIFEST "attnlab_manifest.json"

/* ================================================================ check */

typedef struct {
    char *export_path, *source_path;
    int n_layers;
    double *score_err;        /* (n_layers) relative error of the causal scores, export vs source */
    double *out_err;          /* (n_layers) relative error of the attention outputs */
    size_t copied_same;       /* non-attention tensors identical (name, dtype, shape, bytes) */
    size_t copied_diff;       /* ... that differ or are missing in the export */
    char first_diff[256];     /* name of the first one that differs ("" when none) */
    size_t kv_source, kv_export;   /* values cached per token per layer */
} MlaCheck;

void mla_check_free(MlaCheck *c);
/* Opens the export in dir and its source (src, or the manifest's source path when NULL) and
 * compares attention layer by layer on `tokens` random inputs (0: 64) at positions 0.. ; also
 * compares every non-attention tensor byte for byte. */
int mla_check(const char *dir, Model *src, size_t tokens, uint64_t seed, MlaCheck **out);

#endif
