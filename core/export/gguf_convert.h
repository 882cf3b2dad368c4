/* gguf_convert.h -- attnlab models to llama.cpp's GGUF (core/io/gguf.h) through the architecture
 * table (core/model/gguf_arch.h: per llama.cpp architecture its metadata keys and its tensors by
 * role; reading a GGUF back is there too), following
 * llama.cpp's gguf-py constants and convert_hf_to_gguf.py (conversion/llama.py, qwen.py, gpt2.py,
 * deepseek.py of the release node-llama-cpp ships):
 *
 *   llama      Llama, Mistral and llama2.c checkpoints. llama.cpp rotates interleaved pairs, so
 *              HF (rotate_half) q_proj / k_proj rows are permuted per head as the converter's
 *              LlamaModel.permute does; llama2.c weights are interleaved already and copied.
 *   qwen2      Qwen2 (rotate_half kept: llama.cpp's NEOX RoPE), q/k/v biases.
 *   gpt2       GPT-2: Conv1D (in, out) weights transposed to (out, in), fused attn_qkv.
 *   qwen3      Qwen3 (dense): qwen2's layout with per-head q/k RMSNorms (attn_q_norm, attn_k_norm of
 *              head_dim), no biases unless attention_bias; NEOX RoPE; key_length = head_dim.
 *   olmo2      OLMo 2: no pre-norms, post_attention_norm and post_ffw_norm after attention / MLP,
 *              q/k RMSNorms over the whole projection (H hd, KV hd); NEOX RoPE.
 *   phi3       Phi-3: qkv_proj and gate_up_proj as llama.cpp's fused attn_qkv / ffn_up, partial NEOX
 *              RoPE (rope.dimension_count the rotated dims), sliding_window as conversion/phi.py
 *              writes it (llama.cpp's window then admits one key more than Phi-3's: cli_llamacpp).
 *   deepseek2  the DeepSeek-V3 layout (MLA) with dense MLPs: kv_b_proj is split per head into
 *              attn_k_b (H, kv_lora, nope) -- transposed -- and attn_v_b (H, v, kv_lora), as the
 *              current converter writes; head_count_kv 1, key_length kv_lora + rope, value_length
 *              kv_lora, key/value_length_mla the per-head dims, leading_dense_block_count = layers.
 *              llama.cpp always applies RMSNorm to the latents (attn_kv_a_norm, attn_q_a_norm).
 *              A model without those norms (attnlab's TransMLA export: qk_latent_layernorm false)
 *              is written so that the norm acts linearly: the latent rows of kv_a_proj (q_a_proj)
 *              are scaled by s with mean(latent^2) <= 1e-6 eps for every input the layer can see
 *              (the input is RMS-normalised: |x|^2 <= hidden max(attn_norm^2), |latent|^2 <=
 *              |x|^2 |W|_F^2), and the norm weight is sqrt(eps) / s; the relative error this adds
 *              is below 5e-7. Those tensors stay F32 (s is far below F16's range).
 *
 * Metadata: general.*, <arch>.* dims, RoPE (freq_base, dimension_count, linear / YaRN scaling;
 * llama3 scaling as the rope_freqs tensor), norm epsilon, and the tokenizer: llama2.c tok*.bin
 * as llama.cpp's convert-llama2c does (model "llama", spaces as U+2581, scores, types), a
 * byte-level BPE tokenizer.json as model "gpt2" with its merges (pre-tokenizer named from its
 * pattern: llama-bpe, qwen2 or gpt-2), a SentencePiece-style one as "llama" (scores -id: an
 * approximation of the converter's); without a tokenizer, a placeholder BPE vocabulary "[i]"
 * without merges (llama.cpp then loads the file and runs token ids). The source's rope_scaling
 * object is kept as attnlab.rope_scaling (llama.cpp ignores it; `load` reads it back); Mistral's
 * sliding window is written as <arch>.attention.sliding_window, which llama.cpp's llama ignores.
 * 1-D tensors and norms are F32; Q8_0 tensors whose rows are not whole blocks of 32 are F16
 * (the converter's fallback). Tied embeddings (no lm_head): output.weight is written as a copy of
 * token_embd where llama.cpp b5415 requires it (gguf_arch_output_required: deepseek2, olmo2,
 * gptneox), else left out as the converter does. FP8 block-scaled weights (DeepSeek's F8_E4M3 +
 * <name>_scale_inv) and FP4 ones (MXFP4, NVFP4) are written dequantized in the chosen dtype; their
 * scale tensors are not written. */
#ifndef AL_GGUF_CONVERT_H
#define AL_GGUF_CONVERT_H

#include "gguf.h"
#include "model.h"

typedef struct {
    gg_type dtype;            /* 2-D weights (default F32 when zero-initialised: GG_F32 = 0) */
    bool force;               /* replace an existing file / non-empty folder */
    const char *src;          /* the folder (or a file in it) the GGUF must not be written into; NULL:
                                 m's own (a scratch copy of a transformation names its source's) */
} GgufExportOpts;

typedef struct {
    const char *arch;         /* llama.cpp architecture written */
    size_t tensors, kvs;
    size_t bytes;             /* data section */
    size_t f16_fallback;      /* Q8_0 requested, written F16 (rows not whole blocks) */
    bool latent_scaled;       /* MLA latents made linear under llama.cpp's norm (see above) */
    const char *tokenizer;    /* "llama", "gpt2" or "none" */
    char path[4096];          /* the file written */
    bool tied_output;         /* output.weight written from the tied embeddings (gguf_arch_output_required) */
    bool q_less_old;          /* deepseek2 without a query latent, not 27 layers: b5415 .. b6845 fail on it */
    size_t mtp_skipped;       /* tensors of the multi-token-prediction layers left out (MiMo's mtp_layers) */
    size_t mxfp4_kept, mxfp4_f32;   /* gpt-oss's MXFP4 expert tensors written as ggml's MXFP4 / dequantized to F32 */
    char note[512];           /* what llama.cpp computes otherwise than the file's keys say ("": nothing) */
} GgufExportReport;

/* The llama.cpp architecture m maps to, or NULL with *why (static) saying why not (no row; experts;
 * q/k norms or a block arrangement other than the row's). */
const char *gguf_arch_for(const Model *m, const char **why);
/* Writes m as GGUF: dest ending in .gguf is the file, else a folder (checked and staged by the
 * checkpoint writer, core/io/ckpt_write.h) that gets model.gguf. The file is written under a
 * temporary name and renamed into place. rep may be NULL. */
int gguf_export(Model *m, const char *dest, const GgufExportOpts *o, GgufExportReport *rep);
/* What gguf_export refuses before writing, checked alone (no file touched): dest ending in .gguf
 * that exists (without o->force) or is no regular file, and dest inside the folder of o->src (m's
 * when NULL). */
int gguf_dest_check(const Model *m, const char *dest, const GgufExportOpts *o);

#endif
