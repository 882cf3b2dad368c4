/* kvcache.h -- what a loaded model's caches hold at a context length of N tokens, per layer type: a
 * full-attention layer keeps N tokens, a sliding-window layer min(N, window), a Llama 4 chunked layer at
 * most one chunk (min(N, chunk)), a Gemma 4 KV-shared layer nothing of its own (it reads an earlier layer's
 * cache), each at its own values per token (Gemma 4's full layers at their own head dims); a hybrid's
 * linear-attention / Kimi Delta Attention / Mamba-2 layer keeps a constant state whatever N: its recurrent
 * state (v_heads x dk x dv) and, in a row of its own, its short conv's last conv - 1 inputs (2 k_heads dk + v_heads
 * dv channels); an
 * MLA layer with a lightning indexer its latent and, in a row of their own, the indexer's keys; a DeepSeek-V4 layer
 * its window and, on the compressed layers, one entry per `ratio` tokens (and on CSA's the indexer's keys alike).
 * Nemotron-H's MLP blocks keep nothing and are not listed. Counts are values; bytes are the caller's. */
#ifndef AL_KVCACHE_H
#define AL_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

/* KVC_INDEX: the keys (index_head_dim per token) DeepSeek-V3.2's / GLM-5's lightning indexer caches beside the MLA
 * latent on each layer that runs its own indexer (not GLM-5.2's IndexShare layers): a second row for those layers. */
/* KVC_STATE: a linear / Mamba-2 layer's recurrent state; KVC_CONV: its short conv's last conv - 1 inputs (two rows). */
/* KVC_COMPRESSED: DeepSeek-V4's compressed KV, one entry of head_dim per span tokens (CSA 4, HCA 128); its CSA
 * layers' indexer keys are a KVC_INDEX row with that span (MLA's indexer: span 0, a key per token). */
typedef enum { KVC_FULL, KVC_WINDOW, KVC_CHUNK, KVC_SHARED, KVC_STATE, KVC_INDEX, KVC_CONV, KVC_COMPRESSED } kvcache_kind;

enum { KVCACHE_MAX_ROWS = 16 };

typedef struct {
    kvcache_kind kind;
    size_t span;          /* KVC_WINDOW: the window; KVC_CHUNK: the chunk (tokens); KVC_COMPRESSED (and a V4 KVC_INDEX):
                             tokens per entry; else 0 */
    size_t per_token;     /* values per token per layer (KVC_STATE / KVC_CONV: values per layer; KVC_SHARED: 0) */
    int n_layers;
    char layers[200];     /* the layers of the row as "0-4, 6" */
    size_t tokens;        /* tokens each layer keeps at the context (KVC_STATE, KVC_CONV, KVC_SHARED: 0) */
    size_t values;        /* values all the row's layers hold at the context */
    int last, run_from;   /* (while listing) the row's last layer and the start of its run of layers */
} KvcacheRow;

/* The rows of m at a context of `context` tokens (>= 1), one per (kind, span, values per token), in the order
 * of their first layer, into rows[0..*n). AL_ERR (al_err) when the model has more kinds than KVCACHE_MAX_ROWS. */
int kvcache_at(const Model *m, size_t context, KvcacheRow *rows, int *n);
/* The recurrent state values (v_heads x dk x dv) of one linear-attention / Mamba-2 layer of c (0 without such layers). */
size_t kvcache_state_values(const ModelConfig *c);
/* The conv window's values ((conv - 1) x (2 k_heads dk + v_heads dv)) of one such layer of c. */
size_t kvcache_conv_values(const ModelConfig *c);
/* True for the rows that do not grow with the context (KVC_STATE, KVC_CONV). */
bool kvcache_constant(kvcache_kind k);
/* What a row's layers are ("full attention", "sliding window", ...). */
const char *kvcache_kind_name(kvcache_kind k);

/* The dtype m's KV cache is held in, as the engines run m with their defaults -- the one rule every
 * command that states KV bytes takes (info, kv-cache, truncate, the conversions' kv-cache rows) -- and
 * why in *why (cap bytes; why may be NULL), e.g. "config torch_dtype bfloat16; weights stored F32".
 * From the engines' sources: vLLM's ModelConfig (dtype "auto", _get_and_verify_dtype) takes the config's
 * torch_dtype / dtype and its kv_cache_dtype "auto" is that dtype (kv_cache_dtype_str_to_dtype);
 * transformers with dtype="auto" takes the same key (the stored weights' dtype only when the config has
 * none); so the config's dtype wins over how the weights are stored (a gemma-4 folder written F32 under
 * torch_dtype bfloat16 caches BF16, 2 bytes). llama.cpp, which runs a GGUF, caches F16 whatever the
 * weights (common_params cache_type_k / cache_type_v = GGML_TYPE_F16).
 *   a .gguf: F16;
 *   quantized weights (FP8 / FP4 / INT4, or a quantization config): BF16 (F16 where torch_dtype says
 *     float16): the engines run 16-bit activations and cache them so;
 *   torch_dtype bfloat16 / float16 / float32 / float64: that dtype (float32 stays F32, as transformers loads
 *     it; vLLM's "auto" would downcast a float32 model to the platform's first dtype, BF16 on CUDA);
 *   no torch_dtype (a llama2.c .bin, whose run.c caches floats): the weights' dtype (F32, F16, BF16,
 *     F64), else BF16. */
dt_type kvcache_dtype(const Model *m, char *why, size_t cap);

#endif
