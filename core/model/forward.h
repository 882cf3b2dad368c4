/* forward.h -- a batched float32 forward pass (prefill with BLAS-3, causal attention, a KV cache
 * for decoding) for the families attnlab loads, with per-layer activation hooks.
 *
 * Every family of the family table, as its Hugging Face modeling file computes it, driven by the
 * description (core/model/config.h) and the layouts its row names, never by the family itself:
 *   norms          RMSNorm, RMSNorm x (1 + w), LayerNorm with bias; pre / sandwich / post /
 *                  parallel blocks; q/k norms per head or over the projection
 *   attention      split q/k/v/o, fused qkv_proj, query_key_value head by head, GPT-2's Conv1D,
 *                  DeepSeek's MLA (latent RMSNorms unless qk_latent_layernorm is false); biases
 *                  as the config says; softmax scale (or query_pre_attn_scalar, YaRN's mscale^2);
 *                  soft-caps; per-layer sliding windows; RoPE rotate_half or interleaved, partial
 *                  rotary, rope_scaling linear / llama3 / yarn / longrope, a local RoPE base,
 *                  layers without RoPE (cfg_layer_rope)
 *   MLP            SwiGLU, GeGLU, fused gate_up_proj, GPT-2 / GPT-NeoX dense with biases; MoE by
 *                  the row's router (softmax top-k; DeepSeek-V2 greedy / group-limited; DeepSeek-V3
 *                  sigmoid with e_score_correction_bias, groups, routed_scaling_factor), shared
 *                  experts, first_k_dense_replace / moe_layer_freq / decoder_sparse_step
 *   embeddings     x sqrt(hidden) where the row says, learned positions (GPT-2), tied heads
 * Layers use at most two RoPE frequency sets (the config's theta with its rope_scaling, and one
 * other base / unscaled set, Gemma 3's local layers). MoE layers route every token, then run each expert once over the rows routed to it (one
 * sgemm per projection). RoPE frequencies, the rotation and the softmax are core/model/rope.c's; the
 * scale, windows and per-layer RoPE bases come from the description (cfg_attn_scale,
 * cfg_layer_window, cfg_layer_theta, cfg_layer_rope_scaled).
 *
 * One call fwd_run(tokens, T) runs T new tokens at positions pos .. pos+T-1 of the current
 * sequence (pos = tokens run since fwd_reset): each layer in turn over all T rows (sgemm), with
 * keys and values appended to the cache, so a prompt is one call and each generated token one
 * more. Weights are never copied to float32: the products read them from the mapping in their
 * stored dtype (core/linalg/matmul.h: F32, BF16, F16, FP8 E4M3 with block scales; only norms and biases
 * are float copies). Their pages stay mapped in when the model fits the memory budget
 * (FwdOptions.mem_budget), else each layer's pages are released after use.
 *
 * Hooks (for calibration statistics): with fwd_set_hooks, every layer hands the activations named
 * in the mask to a callback, in row chunks of at most FwdHooks.chunk tokens, in the order of the
 * fwd_act_kind enum. Per-head data is (rows, heads * head_dim): head h of row t starts at
 * x + t * ld + h * head_dim. The buffers are valid only during the call; a callback that returns
 * non-OK stops the run with its status. Columns follow the model's weights (the per-head views of
 * model.h): Q/K columns [0, qk_nope) are NoPE, [qk_nope, qk_nope + qk_rope) carry RoPE -- or, with
 * partial rotary (cfg.rope_first: GPT-NeoX, Phi-3), the first qk_rope columns carry RoPE and the
 * rest do not (cfg_rope_col / cfg_nope_col) -- rotated in the checkpoint's own pair layout
 * (DeepSeek's interleaved pairs are not de-interleaved: scores are the same, and the columns match
 * model_head's). MLA keys are given per head with the shared RoPE part repeated in each head.
 * "Before RoPE" (FWD_Q, FWD_K) means what RoPE is applied to: for models with q_norm / k_norm
 * (Qwen3, Gemma 3, OLMo 2) that is after the norms, so these are not x @ W_Q there. Fused
 * projections (Phi-3 qkv_proj, GPT-NeoX query_key_value) are split into heads as model.h's
 * views are. FWD_ATTN_PROJ is before Gemma's post-attention norm.
 *
 * Attention overrides (fwd_set_attn): any layer's attention can be replaced by an AttnLayer
 * (core/model/attn_eval.h: a TransMLA conversion, a RoPE-removal variant), so converted layers run
 * inside the real model without exporting it. */
#ifndef AL_FORWARD_H
#define AL_FORWARD_H

#include "attn_eval.h"
#include "matmul.h"
#include "model.h"

/* ================================================================ hooks */

typedef enum {
    FWD_ATTN_IN   = 1u << 0,   /* (T, hidden)        normalized input of attention (the x of x @ W_Q) */
    FWD_Q_LATENT  = 1u << 1,   /* (T, q_lora)        MLA: query latent after its RMSNorm */
    FWD_KV_LATENT = 1u << 2,   /* (T, kv_lora)       MLA: KV latent after its RMSNorm */
    FWD_Q         = 1u << 3,   /* (T, H x d_qk)      queries before RoPE (biases added) */
    FWD_K         = 1u << 4,   /* (T, G x d_qk)      keys before RoPE (G = KV heads; MLA: H) */
    FWD_V         = 1u << 5,   /* (T, G x d_v)       values */
    FWD_Q_ROPE    = 1u << 6,   /* (T, H x d_qk)      queries after RoPE */
    FWD_K_ROPE    = 1u << 7,   /* (T, G x d_qk)      keys after RoPE (what the cache holds) */
    FWD_ATTN_OUT  = 1u << 8,   /* (T, H x d_v)       per-head attention output softmax(q K^T s) V, before W_O */
    FWD_ATTN_PROJ = 1u << 9,   /* (T, hidden)        attention block output (after W_O and its bias) */
    FWD_ACT_ALL   = (1u << 10) - 1
} fwd_act_kind;

/* One chunk of one activation of one layer. */
typedef struct {
    fwd_act_kind kind;
    int layer;
    size_t seq;           /* sequence number: fwd_reset calls since fwd_new */
    size_t pos0;          /* position (in the sequence) of the chunk's first row */
    size_t t0;            /* row of the chunk within this fwd_run call */
    size_t T;             /* rows in the chunk */
    size_t heads;         /* 1 for the (T, hidden) and latent kinds */
    size_t head_dim;      /* columns per head */
    size_t ld;            /* floats between rows (>= heads * head_dim) */
    const float *x;       /* row t, head h: x + t * ld + h * head_dim */
} FwdAct;

/* Row t (0 <= t < a->T) of head h. */
static inline const float *fwd_act_row(const FwdAct *a, size_t t, size_t h) {
    return a->x + t * a->ld + h * a->head_dim;
}
/* Name of one kind ("q_rope"), for messages. */
const char *fwd_act_name(fwd_act_kind k);

typedef int (*fwd_hook_fn)(const FwdAct *a, void *ud);

typedef struct {
    unsigned mask;        /* FWD_* bits wanted */
    fwd_hook_fn fn;
    void *ud;
    size_t chunk;         /* most rows per callback (0: all rows of the call at once) */
    bool whole_seqs;      /* Ctrl-C is honoured between sequences only (fwd_run_hooked runs each
                             under al_interrupt_defer), so every layer's callbacks have seen the
                             same sequences when it stops; layer-major (fwd_run_hooked_layers):
                             between layer-windows, each run whole */
} FwdHooks;

/* ================================================================ the pass */

typedef struct {
    size_t max_ctx;       /* longest sequence (0: the config's max_position_embeddings, else 4096) */
    size_t mem_budget;    /* bytes of stored weights kept mapped in (0: $ATTNLAB_FWD_MEM, else 60% of
                             physical memory); beyond it, each layer's pages are released after use */
    mm_compute compute;   /* MM_F32 (the default) or MM_BF16: core/linalg/matmul.h */
} FwdOptions;

typedef struct Forward Forward;

/* Prepares a forward pass over m (reads the model's description, refuses what analysis_check(m,
 * AN_PPL) refuses, checks every layer's tensors, loads weights that fit). opt may be NULL. Caller frees with fwd_free; m must outlive
 * it. Errors name the tensor / config field / layer that is missing or unsupported. */
int fwd_new(Model *m, const FwdOptions *opt, Forward **out);
void fwd_free(Forward *f);

/* Starts a new sequence (position 0, empty cache). */
void fwd_reset(Forward *f);
/* Tokens in the cache (the position of the next token). */
size_t fwd_pos(const Forward *f);
size_t fwd_vocab(const Forward *f);
size_t fwd_max_ctx(const Forward *f);
/* True when the weights are streamed layer by layer (they did not fit the budget). */
bool fwd_streaming(const Forward *f);
/* The products' compute mode (core/linalg/matmul.h: f32 widens the stored weights, bf16 rounds the
 * activations to BF16 for vdpbf16ps); it applies from the next fwd_run. */
void fwd_set_compute(Forward *f, mm_compute c);
mm_compute fwd_compute(const Forward *f);
/* Installs hooks (copied); NULL removes them. */
void fwd_set_hooks(Forward *f, const FwdHooks *h);

typedef enum { FWD_LOGITS_NONE, FWD_LOGITS_LAST, FWD_LOGITS_ALL } fwd_logits;

/* Runs T tokens at positions fwd_pos() .. +T-1 and appends them to the cache. logits receives
 * nothing (NONE), the last row's vocab logits (LAST: vocab floats), or every row's (ALL: T x
 * vocab, row-major); the caller owns the buffer. Returns AL_OK, AL_ERR (bad token id, context
 * full, a hook's error) or AL_INTERRUPTED (polled between layers); after a failure the sequence
 * is reset. */
int fwd_run(Forward *f, const int *tokens, size_t T, fwd_logits want, float *logits);
/* Runs nseq sequences of seqlen tokens (tokens[s seqlen ..]), each from a fresh cache, with the
 * hooks h installed (removed and the cache reset after), reporting progress per sequence. Stops at
 * the first error (a hook's included) or interrupt (AL_INTERRUPTED). */
int fwd_run_hooked(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen);

/* fwd_run_hooked layer-major: the windows in groups of at most group_bytes of hidden states (W x seqlen x hidden
 * floats; 0: FWD_GROUP_BYTES) and at most fwd_set_group_tokens' tokens (at least one window), each group embedded,
 * then each layer run over every window of the group in window order (from position 0, the layer's KV cache and
 * linear / SSM state its own, the sequence number window-major's), then the next layer: each layer's weights are
 * read once per group, and a hook's sums for one layer see only that layer's calls between other layers' (G_X
 * pages dirtied once per group). The hooks fire with the arguments of fwd_run_hooked in layer-major order; for
 * each layer, windows in the same order, so a hook that sums per layer gets the same bits. Progress per layer
 * ("layer l/NL"; with several groups "windows a-b of N, layer l/NL"). Ctrl-C is seen before each layer's window
 * (with h->whole_seqs each layer-window runs whole): an interrupted run returns AL_INTERRUPTED with the layers
 * having seen different windows -- what the hooks summed is partial, for the caller to drop (calib_run's rule).
 * Where fwd_layer_major_refusal names a reason, it is fwd_run_hooked. */
#define FWD_GROUP_BYTES ((size_t)256 << 20)
/* Tokens of a group by default: its weights read once per 4096 tokens (8 x 512, 16 x 256; 8B: 4 x 512 is one
 * group, 128 x 256 eight). */
#define FWD_GROUP_TOKENS 4096
/* The most tokens in a layer-major group (0: FWD_GROUP_TOKENS). */
void fwd_set_group_tokens(Forward *f, size_t tokens);
int fwd_run_hooked_layers(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen,
                          size_t group_bytes);
/* The same with the route decided by the caller: layer_major is fwd_layer_major_refusal(f) == NULL, asked once by
 * a caller that needs the answer itself (calib_run holds a layer's G_X only when layer-major); false: fwd_run_hooked. */
int fwd_run_hooked_route(Forward *f, const FwdHooks *h, const int *tokens, size_t nseq, size_t seqlen,
                         size_t group_bytes, bool layer_major);
/* Why this pass cannot run layer-major (a layer reads another's state within a window: KV-shared layers, the
 * indexer's shared selection, Gemma 4's per-layer inputs; or fwd_set_resid / fwd_set_evict / fwd_set_capture is
 * set), or NULL. */
const char *fwd_layer_major_refusal(const Forward *f);
/* Groups the last hooked run (fwd_run_hooked_layers, fwd_run_hooked) ran layer-major (0: it ran window-major). */
size_t fwd_layer_major_groups(const Forward *f);

/* Runs tokens[0..T) as a fresh sequence (resets first) and returns the summed negative
 * log-likelihood (nats, double) of tokens[1..T) given their prefixes, and their count (T - 1).
 * Logits are computed in row chunks and never stored whole. */
int fwd_nll(Forward *f, const int *tokens, size_t T, double *nll_sum, size_t *count);

/* Perplexity over windows: ids[0..n) cut into non-overlapping windows of seqlen tokens (the last
 * may be shorter; one of a single token is dropped), each a fresh sequence (fwd_nll). */
typedef struct {
    double nll;           /* mean NLL per predicted token (nats); log-perplexity */
    size_t tokens;        /* tokens predicted */
    size_t windows;       /* windows run */
} FwdPpl;

/* Fills *out (progress "window"). Errors: seqlen < 2 or longer than the context, fewer than 2
 * tokens. Ctrl-C returns AL_INTERRUPTED with the windows done so far in *out. */
int fwd_ppl(Forward *f, const int *ids, size_t n, size_t seqlen, FwdPpl *out);

/* Perplexity before and after replacing attention layers, in one pass over the weights: the windows of
 * fwd_ppl run layer by layer as two streams -- the model as it is, then with after[L] (n_layers entries;
 * NULL: the layer as it is) in place of layer L's attention and every norm at eps_after (0: as set) -- so
 * each layer's weights are read once for both (from the disk once, where the page cache cannot hold the
 * model). Each stream runs fwd_ppl's arithmetic, window for window: before and after are fwd_ppl's
 * numbers without and with the overrides, bit for bit. Where fwd_layer_major_refusal names a reason, the
 * two passes run one after the other. The overrides set before the call are the same after it. Errors:
 * fwd_ppl's and fwd_set_attn's; Ctrl-C returns AL_INTERRUPTED with the groups of windows done so far. */
int fwd_ppl_pair(Forward *f, const AttnLayer *const *after, double eps_after, const int *ids, size_t n, size_t seqlen,
                 FwdPpl *before, FwdPpl *out_after);

/* ================================================================ what the pass uses */

/* The model the pass runs. */
Model *fwd_model(const Forward *f);
/* Softmax scale of layer's attention: cfg_attn_scale (d_qk^-1/2, or the config's: GPT-2
 * scale_attn_weights and scale_attn_by_inverse_layer_idx, DeepSeek's YaRN mscale^2). */
double fwd_attn_scale(const Forward *f, int layer);
/* Sliding window of layer's attention in tokens (0: none): cfg_layer_window (Mistral's
 * sliding_window, Qwen2's from max_window_layers on when use_sliding_window). */
size_t fwd_attn_window(const Forward *f, int layer);
/* Layer's sink logits (H) where the model has them (gpt-oss) and the layer is loaded, else NULL. */
const float *fwd_attn_sinks(const Forward *f, int layer);

/* ================================================================ attention overrides */

/* Runs L (core/model/attn_eval.h; borrowed: keep it alive while set) as layer's attention in place of
 * the model's: its input is the layer's normalized attention input (OLMo 2: the residual stream
 * itself), its output (after its W_O) takes the place of the model's attention output (Gemma,
 * OLMo 2: before the post-attention norm). NULL restores the model's attention. L must read and write the
 * model's hidden size. The sequence is reset. An overridden layer keeps the attention inputs of
 * the sequence and evaluates L over all of them on each call (attn_eval at positions 0..pos+T-1:
 * fine for fwd_nll and calibration; decoding token by token costs O(pos) per token), and hands
 * only FWD_ATTN_IN and FWD_ATTN_PROJ to hooks. */
int fwd_set_attn(Forward *f, int layer, const AttnLayer *L);
/* Removes every override (and resets the sequence when there was one). */
void fwd_clear_attn(Forward *f);
/* ================================================================ token eviction */

/* One layer's key mask (fwd_set_evict): the call's queries after RoPE, the layer's cached keys after RoPE, and
 * the mask the policy fills. */
typedef struct {
    int layer;
    size_t pos0, T, nkeys;        /* query rows at positions pos0 .. pos0+T-1; keys 0 .. nkeys-1 (pos0 + T) */
    size_t H, G, d;               /* query heads, KV heads (query head h reads KV head h / (H / G)), q/k dim */
    const float *q; size_t ldq;   /* (T, H d) */
    const float *K; size_t ldk;   /* (nkeys, G d) */
    double scale, softcap;        /* the layer's softmax scale and score soft-cap (0: none) */
    size_t window;                /* the layer's sliding window (0: none); the pass applies it on top of keep */
    unsigned char *keep;          /* (G, T, nkeys): 1 where query row t keeps key k of KV head g, at
                                     keep[(g T + t) nkeys + k]; all 1 on entry. A row must keep its own key. */
} FwdEvict;

typedef int (*fwd_evict_fn)(const FwdEvict *e, void *ud);

/* Token eviction (core/methods/evict.h): before the softmax attention of every layer the model runs itself
 * (not an overridden layer, not MLA), fn fills the key mask of the call's query rows; the evicted keys leave
 * their softmax. NULL removes it. The sequence is reset. */
void fwd_set_evict(Forward *f, fwd_evict_fn fn, void *ud);

/* ================================================================ the residual stream */

/* fn(layer, x, T, ud) is handed the residual stream x (T, hidden) at the input of each layer from `from` on, before
 * the layer runs; it may read x or replace it. The layers before `from` are not run (the embedding is: fn fills x at
 * `from`), so a pass that reruns only the layers after a kept prefix (`ablate`: the heads of one layer) is the whole
 * pass exactly where no layer from `from` on reads an earlier layer's cache (cfg_kv_source). fn returning FWD_STOP
 * ends the pass there: fwd_run returns FWD_STOP (the sequence reset). NULL removes it. The sequence is reset. */
#define FWD_STOP 16
typedef int (*fwd_resid_fn)(int layer, float *x, size_t T, void *ud);
void fwd_set_resid(Forward *f, int from, fwd_resid_fn fn, void *ud);

/* The epsilon of every RMS/LayerNorm of the pass (eps <= 0: the config's rms_norm_eps again): a
 * converted model whose export writes another rms_norm_eps (TransMLA's DeepSeek-V3 export, for the
 * engines' latent norms) runs in the session as its export computes. */
void fwd_set_norm_eps(Forward *f, double eps);

/* ================================================================ attention probes */

/* The attention weights of one query head (fwd_set_capture), filled while the pass runs: for each
 * query at position i of the following fwd_run calls, row i of P holds its softmax weights over keys
 * 0 .. cap_rows - 1 as the pass computes them (causal, window, chunk, soft-cap; with gpt-oss's sink
 * its weight is dropped, so the row sums to < 1; keys it does not see are 0). An overridden layer
 * (fwd_set_attn) gives its AttnLayer's weights (attn_eval's logits, its window / soft-cap / sinks).
 * Rows past cap_rows are not captured. DeepSeek-V3.2 / GLM-5: a query past index_topk has weights on
 * the indexer's selected keys only. */
typedef struct {
    int layer, head;      /* the query head */
    float *P;             /* (cap_rows, cap_rows) the caller's, row-major */
    size_t cap_rows;
    size_t rows;          /* set by the pass: rows 0 .. rows-1 captured */
} FwdCapture;

/* Captures into c (borrowed; NULL: none) from the next fwd_run on. */
void fwd_set_capture(Forward *f, FwdCapture *c);

/* Head ablation: head `head` of `layer` has its attention output zeroed before o_proj (its slice of
 * o_proj's input; as if o_proj's columns of that head were 0), masked true; false restores it. Not on
 * an overridden layer (its AttnLayer runs whole). */
int fwd_mask_head(Forward *f, int layer, int head, bool masked);
/* Restores every head. */
void fwd_clear_head_mask(Forward *f);

#endif
