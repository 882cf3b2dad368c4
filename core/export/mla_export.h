/* mla_export.h -- writing a TransMLA conversion as a DeepSeek-V3 checkpoint that stock engines
 * (Hugging Face transformers, vLLM, SGLang) run as the converted model, and `check`: loading such
 * an export and comparing it, evaluated as a stock engine runs it, with the model it came from.
 *
 * The latent norms. Stock DeepSeek-V3 code always applies an RMSNorm to the KV latent (and to the
 * query latent when q_lora_rank is set): n(c) = c w / sqrt(mean(c^2) + eps) over the r latent
 * dims. TransMLA's latent has no norm, and the per-token divisor cannot be undone by weights in
 * general: keeping a constant |c| would need a latent spanning the whole hidden size. Two
 * constructions (MlaExportOpts.latent_norm):
 *   linear (default): make the norm act linearly. The attention input is x = g * u (u the RMS-
 *     normalised hidden state, |u|^2 < hidden; g the layer's input_layernorm weight), so the
 *     latent c = x W_c + b_c obeys |c| <= C = 1.5 sqrt(hidden) max(|diag(g) W_c|_F, |W_c|_F) + |b_c|
 *     (the 1.5 and the max also cover check's standard-normal inputs). The export writes
 *     W_c' = s W_c, b_c' = s b_c with s = sqrt(eps) 2^-k and the norm weight w = 2^k (exact in
 *     every dtype), so that n(c') = c (1 + s^2 mean(c^2) / eps)^-1/2: relative error
 *     delta <= s^2 C^2 / (2 r eps) = 2^-2k C^2 / (2 r) <= 2^-24 for the smallest such k, on every
 *     input the layer can see (in practice far less: the bound is loose). kv_b_proj / q_b_proj
 *     are unchanged and the normalised latent (what vLLM caches) keeps its natural scale. Exact
 *     up to delta, but tied to the engine's eps: vLLM and SGLang (and attnlab) normalise with
 *     rms_norm_eps, which the construction uses; transformers and DeepSeek's reference code use a
 *     fixed 1e-6 there (core/model/engines.h), so the export writes rms_norm_eps 1e-6 and builds for it:
 *     every engine then computes the same model, and the model's other RMSNorms use 1e-6 instead
 *     of the source's eps (mla_eps_effect measures what that changes; source_eps keeps the
 *     source's eps, with which transformers scales the latent by sqrt(rms_norm_eps / 1e-6)). f16 cannot hold latents of ~1e-7 (subnormal): refused,
 *     use bf16 / f32 or calibrated.
 *   calibrated (TransMLA's): weights unchanged, w = the mean over tokens of sqrt(mean(c^2) + eps)
 *     on random RMS-normalised inputs: exact only for tokens whose latent RMS equals that mean,
 *     independent of eps. Measured by check (and tests/test_mla_stock.c) for comparison.
 *
 * The export folder gets (staged beside it and renamed into place when complete):
 *   config.json      the source's config with model_type deepseek_v3, architectures
 *                    ["DeepseekV3ForCausalLM"], and every field a DeepSeek-V3 loader reads written
 *                    explicitly: num_key_value_heads = heads, kv_lora_rank, q_lora_rank (null: a
 *                    plain q_proj), qk_rope_head_dim = head_dim = D, qk_nope_head_dim, v_head_dim,
 *                    attention_bias, rope_interleave true, rope_scaling (null unless YaRN, whose
 *                    attention factor is folded into the weights: attention_factor 1, mscale 0,
 *                    mscale_all_dim 0), rms_norm_eps, torch_dtype, tie_word_embeddings,
 *                    bos/eos_token_id, and dense MLPs (a softmax top-k MoE: moe_export.h): first_k_dense_replace = layers,
 *                    n_routed_experts 0 (vLLM adds it to an integer; null crashes its loader),
 *                    n_shared_experts 0, routed_scaling_factor 1 (vLLM divides f16 activations by
 *                    it), the other MoE fields neutral. Keys a stock loader does not know
 *                    (sliding window, GQA-only keys, qk_latent_layernorm) are dropped; what the
 *                    construction did is in the manifest.
 *   model.safetensors (or model-0000i-of-0000n.safetensors + model.safetensors.index.json)
 *                    per layer q_proj (or q_a_proj + q_a_layernorm + q_b_proj), kv_a_proj_with_mqa
 *                    = [latent rows ; D shared RoPE key rows, pairs interleaved], kv_a_layernorm,
 *                    kv_b_proj = per head [k_nope rows ; v rows], o_proj; biases when the source
 *                    had any (kv_a_proj_with_mqa, o_proj, q_a_proj, and q_proj's when the query has
 *                    no latent: no stock engine reads a q_proj bias, see check). Every other tensor
 *                    is copied bit for bit (same name, dtype, shape, bytes).
 *   attnlab_manifest.json  method, options, ranks, the latent-norm construction (per layer k and
 *                    the bound delta), per-layer energies and errors, parameter and KV-cache
 *                    accounting, the source path (what `check` compares against), the source's
 *                    rope_scaling when the export cannot express it, and the report's inputs for
 *                    `check DIR` (check_inputs.h; their statistics in check_inputs.safetensors).
 *   the source's auxiliary files (tokenizer, generation config, licence; ckpt_copy_aux). */
#ifndef AL_MLA_EXPORT_H
#define AL_MLA_EXPORT_H

#include "engines.h"
#include "check_inputs.h"
#include "matmul.h"
#include "transmla.h"

typedef enum { MLA_NORM_LINEAR, MLA_NORM_CALIBRATED } mla_latent_norm;

typedef struct {
    dt_type dtype;            /* of the new attention tensors; DT_INVALID: the source's (F32/F16/BF16),
                                 BF16 for other sources */
    size_t shard_bytes;       /* split the weights into shards of at most this many bytes (0: 4 GiB) */
    bool force;               /* replace an existing non-empty dir as a whole */
    mla_latent_norm latent_norm;   /* the construction above (default linear) */
    bool source_eps;          /* write the source's rms_norm_eps and build the latent norms for it (the old
                                 default): vLLM / SGLang then normalise the latents with it and
                                 transformers with its fixed 1e-6, two different models when the
                                 source's eps is not 1e-6. Default (false): rms_norm_eps =
                                 engine_common_eps() (1e-6), so every engine computes the same model;
                                 the model's other RMSNorms then use it too (mla_eps_effect measures
                                 that, in check's notes) */
    const CheckInputs *check; /* the conversion's report inputs, recorded for `check DIR` (NULL: none) */
    bool attnlab;             /* attnlab's own layout instead (attnlab_export.h: `export DIR format attnlab`): any
                                 conversion, windows / sinks / soft-caps / norms kept, no latent norms, the source's
                                 tensor names; dtype default f32 */
    double norm_eps;          /* attnlab: the rms_norm_eps the session ran the conversion at (0: the source's) */
} MlaExportOpts;

/* "linear" / "calibrated". */
const char *mla_latent_norm_name(mla_latent_norm n);

/* The layer a stock engine runs for converted layer L (no latent norms): a copy with RMSNorms on
 * its latents (eps) built by construction `kind`; g is the layer's input_layernorm weight (hidden;
 * NULL: ones). *k_kv / *k_q (may be NULL) get the linear exponents k (0 for calibrated or without
 * a q latent). L must have no latent norms yet. Caller frees. */
int mla_stock_layer(const AttnLayer *L, const float *g, double eps, mla_latent_norm kind, AttnLayer **out, int *k_kv,
                    int *k_q);

/* Writes r (every layer converted) into dir through the checkpoint writer (core/io/ckpt_write.h):
 * dir must not exist or be empty (force: replaced as a whole), and must not be the source's
 * folder. A dtype other than F32, F16 or BF16 is refused. */
int mla_export(const TmlaResult *r, const char *dir, const MlaExportOpts *o);

/* What the export's rms_norm_eps (eps) changes in the rest of the source model (its input, post-
 * attention and final RMSNorms): the largest |logit difference| / largest |logit| of the source
 * run with its own eps and with eps on `tokens` pseudo-random token ids (seed): token ids, not a
 * perplexity. 0 when eps is the source's. */
int mla_eps_effect(Model *src, double eps, size_t tokens, uint64_t seed, double *rel);

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
    /* score_err / out_err: the export evaluated as the stock engines run it (the largest error
     * over engine_out_err's rows), interleaved RoPE, scale (nope + rope)^-1/2 (x YaRN's mscale^2). */
    double *own_out_err;      /* (n_layers) the export as attnlab reads it (q_proj.bias applied) */
    double *engine_out_err[ENG_N];   /* (n_layers each) the export as engine i of core/model/engines.h runs it
                                 (its latent eps, its biases); out_err and score_err are the largest
                                 over the engines */
    double latent_eps;        /* the export's rms_norm_eps */
    double nll_source, nll_export;   /* whole model: mean NLL (nats) per predicted token of the
                                        text's windows (MlaCheckIn.ids), the export run as stock (NaN:
                                        no text, or no forward pass for this model; see notes) */
    size_t nll_tokens;        /* tokens predicted (0: no perplexity) */
    char notes[1536];         /* what stock engines compute differently, one line each ("" when
                                 nothing) */
    bool own_layout;          /* the export is attnlab's own layout (attnlab_export.h): no engine columns (NaN); score_err,
                                 out_err as attnlab reads it */
    bool in_session;          /* mla_check_session: the conversion as the session holds it, no export
                                 (export_path NULL, no tensors compared, every error column the same) */
    bool stock_bf16;          /* mla_check_stock of a conversion held in BF16 (tmla_hold.h): its BF16 export's layers */
    bool stock_session;       /* mla_check_stock: the DeepSeek-V3 export's layers built in memory, no export written
                                 (export_path NULL, no tensors compared: the export copies them byte for byte) */
} MlaCheck;

/* What a check draws and runs: each layer l's `tokens` inputs (0: 64) drawn as `convert mla` draws
 * its report's (tmla_eval_inputs with seed, sigma[l], mu[l]; a NULL sigma or entry: standard
 * normal), and the whole models' perplexity on the text ids[0..n) in windows of seqlen (ids NULL:
 * none; never random token ids) with products in `compute`. */
typedef struct {
    size_t tokens;
    uint64_t seed;
    const double *const *sigma, *const *mu;
    const int *ids;
    size_t n, seqlen;
    mm_compute compute;       /* the forward pass's products for the perplexity (the session's setting) */
} MlaCheckIn;

void mla_check_free(MlaCheck *c);
/* Opens the export in dir and its source (src, or the manifest's source path when NULL) and
 * compares attention layer by layer on `tokens` random inputs (0: 64) at positions 0.. (no
 * perplexity); also compares every non-attention tensor byte for byte. */
int mla_check(const char *dir, Model *src, size_t tokens, uint64_t seed, MlaCheck **out);
/* The same on the inputs in. */
int mla_check_in(const char *dir, Model *src, const MlaCheckIn *in, MlaCheck **out);
/* The manifest of the export in dir (NULL + error when it has none: not an attnlab TransMLA export). */
cJSON *mla_manifest(const char *dir);

/* AL_OK when mla_export can write r; else its refusal as the error (a source whose other layers
 * have no DeepSeek-V3 form: GPT-NeoX's parallel LayerNorm blocks, a quantized fused MLP, MoE routers
 * other than softmax top-k (moe_export.h; Phi-3's fused gate_up_proj is split by rows); layers
 * left unconverted; RoPE frequencies DeepSeek's layout cannot hold). */
int mla_exportable(const TmlaResult *r);
/* The rms_norm_eps a default export of a conversion of src writes (every engine's latent eps, so
 * its other RMSNorms run at it too) when all layers are converted and src's other layers fit
 * DeepSeek-V3; 0 (the source's eps stands) when no export can be written. The session's `ppl`,
 * `convert mla` and `convert mla-table` run converted models at it, as the export computes them. */
double mla_export_norm_eps(const Model *src, bool all_layers, bool qk_norm_plain);   /* qk_norm_plain: mla_gaps.h */
/* `check` of a conversion no DeepSeek-V3 checkpoint can hold, without writing it: every converted
 * layer as the session holds it (no latent RMSNorms) against the source on in's inputs,
 * unconverted layers 0, and the whole source model's NLL with and without the converted layers on
 * in's text; `why` (the export's refusal) goes in the notes. */
int mla_check_session(const TmlaResult *r, const char *why, const MlaCheckIn *in, MlaCheck **out);
/* `check` of a conversion mla_export can write, without writing it: each layer as its float32
 * DeepSeek-V3 export reads back (the stock layers mla_export builds -- linear latent norms at the
 * export's eps -- with the scale and RoPE of the config.json it writes) against the source on in's
 * inputs, per engine as mla_check_in; the whole models' NLL with the source's forward pass at the
 * export's rms_norm_eps; the engines' notes. The numbers of mla_check_in on that export (float32
 * holds every value the export writes). */
int mla_check_stock(const TmlaResult *r, const MlaCheckIn *in, MlaCheck **out);

/* r's run layers (TmlaResult.run) when its rewritten matrices are held in BF16 (tmla_hold.h: compute bf16) and a
 * DeepSeek-V3 export can hold it: each layer as its BF16 export reads back (mla_check_stock's stock layers: linear latent
 * norms at the export's eps, its config's scale and RoPE), the scaled W_KVA (and W_QA) in BF16 as that export rounds
 * them, the other matrices borrowed from r's layers. `convert mla`'s perplexity after, `ppl`, `generate` and `check`
 * run them, with BF16 products in compute bf16 -- the reloaded BF16 export's numbers. Nothing otherwise. */
int mla_run_layers(TmlaResult *r);
/* The layers the session runs r with in compute mode c (`convert mla`'s perplexity after, `ppl`, `generate`, `check`'s
 * whole-model pass), one rule for one number: its run layers (held in BF16 at conversion: mla_run_layers), else in
 * compute bf16 on a source whose default export is BF16 (tmla_hold_bf16_default: a conversion made in compute f32)
 * those of that export as it reads back, built from the float32 layers on first use and kept (TmlaResult.run_bf16),
 * else r's layers. */
int mla_run_for(TmlaResult *r, mm_compute c, AttnLayer *const **layers);

#endif
