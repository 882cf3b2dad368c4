/* model.h -- a loaded checkpoint: its description (core/model/config.h, parsed once at load), its tensor store,
 * and the canonical per-head views of attention weights.
 *
 * Per-head views are in the seed's row-vector convention (x @ W), as owned float32 copies:
 *   HK_Q[h]: (d_in_q,  d_qk)   d_in_q  = q_lora_rank if the model has a query latent, else hidden
 *   HK_K[g]: (d_in_kv, d_qk)   d_in_kv = kv_lora_rank for MLA (NoPE part), else hidden
 *   HK_V[g]: (d_in_kv, d_v)
 *   HK_O[h]: (d_v, hidden)
 * with g = h / (n_heads / n_kv_heads) the KV head of query head h (MLA: g = h).
 * Columns of Q and K: [0, qk_nope) are NoPE, [qk_nope, qk_nope + qk_rope) carry RoPE (DeepSeek,
 * GPT-2); with partial rotary (cfg.rope_first: GPT-NeoX, Phi-3's partial_rotary_factor) the RoPE
 * columns come first: cfg_rope_col / cfg_nope_col give where each part starts.
 * Layouts (cfg.attn): q/k/v/o_proj (split), Phi-3's qkv_proj [Q heads ; K heads ; V heads] + o_proj,
 * GPT-NeoX's query_key_value head by head [q_h ; k_h ; v_h] + attention.dense, GPT-2's Conv1D
 * c_attn [Q | K | V] + c_proj, DeepSeek's MLA projections (model_head_block says where each view is).
 * HF Linear weights are stored (out, in), so these views are transposed row slices; GPT-2's
 * Conv1D stores (in, out), so its views are column slices. In MLA the RoPE part of K is one
 * shared head read from hidden states (the last qk_rope rows of kv_a_proj_with_mqa):
 * HK_K with PART_ROPE returns it, (hidden, qk_rope), for every head; PART_ALL is refused for
 * MLA keys because the two parts have different inputs. */
#ifndef AL_MODEL_H
#define AL_MODEL_H

#include "config.h"
#include "store.h"
#include "quant_config.h"
#include "matmul.h"


typedef enum { HK_Q, HK_K, HK_V, HK_O } head_kind;
typedef enum { PART_ALL, PART_NOPE, PART_ROPE } head_part;

typedef struct LayerCache LayerCache;

typedef struct Model {
    char *name;               /* session name ("demo-r1", "m1", ...) */
    char *path;               /* resolved folder or file it was opened from */
    ModelConfig cfg;
    ModelConfig *cfg_full;    /* Gemma 4's full-attention layers when their head dims differ (cfg_per_type_dims: their
                                 head_dim, KV heads), else NULL; model_layer_cfg picks a layer's */
    Store *store;
    char *config_json;        /* raw config.json text (NULL for llama2.c) */
    struct cJSON *config_tree;   /* config.json parsed once at load (NULL for llama2.c); read through
                                    ModelConfig, or model_config_tree for a copy */
    LayerCache *cache;        /* dequantized attention weights of the last layer used (and of layers pinned) */
    bool from_gguf;           /* opened from a .gguf: its store and config.json built from the GGUF's (gguf_arch.h) */
    dt_fp4_enc fp4;           /* the attention weights' FP4 encoding, or DT_FP4_NONE (cfg.dtype then
                                 says BF16: what KV caches and rewritten tensors are held in) */
    QuantConfig quant;        /* the quantization config, read once at load (quant_config.h); checked
                                 against the stored tensors there */
} Model;

/* The attention weights' stored encoding as `load` and `info` name it: "MXFP4", "NVFP4", or cfg.dtype's. */
const char *model_dtype_name(const Model *m);
/* The line `ppl`, `generate` and `info` print for compute mode c on m into buf -- one rule: bf16 mode
 * changes only the products of weights stored in BF16 (mm_xwt), over the weights the forward pass
 * multiplies (attention, MLP, experts, the LM head or the tied embedding); FP4 / INT4 / FP8 / F16 / F32
 * weights keep float32 products. The mode as mm_compute_describe says it when every multiplied weight
 * is BF16 (or c is f32); otherwise which
 * weights keep float32 products (all of them: "as in f32 mode"; some: named by group and encoding,
 * e.g. "attention F32" after an F32 export of a BF16 source's conversion). */
void model_compute_note(const Model *m, mm_compute c, char *buf, size_t cap);
/* For a quantized checkpoint, each tensor group's encoding as its quantization config decides it and the
 * key that decided, on the group's first stored module, into buf: "attention unquantized
 * (model.layers.0.self_attn.q_proj: quantization_config.modules_to_not_convert entry
 * 'model.layers.*.self_attn'); experts MXFP4 (...: config.json quantization_config.quant_method)". */
void model_quant_sources(const Model *m, char *buf, size_t cap);
/* Each tensor group's stored encodings into buf, e.g. "attention NVFP4, mlp NVFP4 + F32,
 * embeddings F32" (groups: attention, mlp, experts, embeddings; a group listed once per encoding
 * it holds). */
void model_weight_encodings(const Model *m, char *buf, size_t cap);

/* Opens a folder with config.json + safetensors, a .safetensors file (config.json beside it),
 * or a llama2.c .bin. Errors name the file and what is missing. */
int model_open(const char *path, Model **out);
void model_free(Model *m);
/* A deep copy of the model's parsed config.json (caller frees with cJSON_Delete); NULL for a
 * llama2.c checkpoint. For exporters that pass keys through. */
struct cJSON *model_config_tree(const Model *m);
/* Integer ids of a config.json key (a number or an array of numbers, e.g. eos_token_id)
 * appended to list[n..cap); returns the new count (0 for llama2.c). */
size_t model_config_ids(const Model *m, const char *key, int *list, size_t n, size_t cap);


/* Attention parameters of one layer (weights and biases of every attention projection). */
size_t cfg_attn_params(const ModelConfig *c);
/* Numbers cached per token per layer for keys and values (MLA: kv_lora + qk_rope). */
size_t cfg_kv_values(const ModelConfig *c);
/* The description of layer L's attention: m->cfg, or m->cfg_full on a full-attention layer of a model whose layer
 * types differ in head dims (Gemma 4). */
const ModelConfig *model_layer_cfg(const Model *m, int layer);
/* K+V values per token over every layer with a cache of its own (each at its own dims; KV-shared and linear-attention
 * layers: none). */
size_t model_kv_values_total(const Model *m);
/* Attention parameters over the softmax-attention layers, each at its own dims (Gemma 4: without the k_proj / v_proj a
 * KV-shared layer lacks and the v_proj of a k_eq_v layer). */
size_t model_attn_params_total(const Model *m);

/* Full tensor name of an attention weight: layer L, `suffix` such as "self_attn.q_proj.weight". */
char *model_tensor_name(const Model *m, int layer, const char *suffix);

/* Canonical per-head view (see the top of this file); caller frees. head is a query head for
 * HK_Q/HK_O and a KV head for HK_K/HK_V. */
int model_head(Model *m, head_kind kind, int layer, int head, head_part part, Mat **out);
/* Where a per-head view lives: rows [r0, r0+nr) x cols [c0, c0+nc) of layer L's tensor of `role`;
 * the view is that block transposed (HF Linear rows, o_proj columns) or the block itself (GPT-2
 * Conv1D). The one description of each family's per-head layout: model_head slices the cached
 * layer with it, and core/analysis/gram.c reads the block straight from the checkpoint. */
typedef struct {
    tensor_role role;         /* e.g. ROLE_KV_B */
    char suffix[64];          /* its weight's name in the layer, written from the role's name in the model's
                                 attention layout (ROLE_KV_B: "self_attn.kv_b_proj.weight") */
    size_t r0, nr, c0, nc;
    bool transposed;
    int layer;                /* the layer whose tensor it is: the view's own, except the K / V of a KV-shared
                                 layer (Gemma 4's num_kv_shared_layers), which are an earlier layer's */
    /* DeepSeek-V4's composite views, which model_head forms (gram.c reads plain blocks only: farr computes such a
     * model's spectra from the layer's float copies, FARR_ROUTE_FACTORS): */
    bool then;                /* the view is the block above times then_role's block [tr0, +tnr) x [tc0, +tnc),
                                 transposed alike (O: wo_a's rows of the head's group and columns of the head, then
                                 wo_b's columns of the group) */
    tensor_role then_role;
    size_t tr0, tnr, tc0, tnc;
    bool scaled;              /* the view's columns times scale_role's 1-D weight from s0 on (K / V: kv_norm's) */
    tensor_role scale_role;
    size_t s0;
} HeadBlock;
/* True when model_head forms m's views from more than one block (HeadBlock.then / scaled: DeepSeek-V4). */
bool model_views_composite(const Model *m);
/* The block of the view (kind, layer, head, part), with model_head's checks and messages. */
int model_head_block(const Model *m, head_kind kind, int layer, int head, head_part part, HeadBlock *b);
/* Bias of a per-head Q/K/V projection (d_out values) or NULL when the model has none. It is read
 * from the bias beside the view's weight (model_head_block's role, ".bias"), at the view's
 * output dims: q/k/v_proj.bias, Phi-3's qkv_proj.bias, GPT-NeoX's query_key_value.bias head by
 * head, GPT-2's c_attn.bias. */
int model_head_bias(Model *m, head_kind kind, int layer, int head, float **out, size_t *n);
/* The output projection's bias (hidden values: o_proj.bias, attention.dense.bias, c_proj.bias) or
 * NULL when the config has none (o_bias false) or the checkpoint lacks the tensor. */
int model_o_bias(Model *m, int layer, float **out);
/* Loads (dequantizes) layer L's attention weights into the cache, releasing the previous layer unless another thread
 * pins it. After this, model_head for layer L slices the cache while it holds L (else reads its block from the
 * mapping: the same values). Every function here is safe from many threads on many layers at once: an entry of the
 * cache is freed only when no thread holds it (a pin, or a slice being copied out of it). */
int model_layer_load(Model *m, int layer);
/* Keeps layer L's cache entry (made empty if needed; model_layer_load fills it) until model_layer_unpin, whatever
 * other threads load meanwhile: a conversion's lanes, each reading its own layer (attn_layer_load). AL_ERR: out of
 * memory. Pins nest. */
int model_layer_pin(Model *m, int layer);
void model_layer_unpin(Model *m, int layer);
/* Checks layer/head/kind arguments; an error says the valid range. */
int model_check_head(const Model *m, head_kind kind, int layer, int head);

#endif
