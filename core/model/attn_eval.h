/* attn_eval.h -- one attention layer as plain row-vector matrices (x @ W), loaded from a model or
 * built by a conversion, and its evaluator: hidden states X (T x hidden) at positions -> the
 * causal attention scores of every head and the layer's output after o_proj.
 *
 * Two layouts:
 *   ATTN_GQA  Llama / Mistral / Qwen2/3 / Gemma / Mixtral / Phi-3 / GPT-NeoX / OLMo 2 / llama2.c
 *             (and GPT-2 without RoPE): q = x W_Q + b_Q, k = x W_K + b_K, v = x W_V + b_V; optional
 *             RMSNorm of q and k (per head or whole projection); RoPE on the first rope_dim dims of
 *             every q/k head (all of them unless partial rotary), pairs (j, j + rope_dim/2)
 *             for rotate_half or (2j, 2j + 1) for interleaved; query head h reads KV head
 *             h / (H / G); scale d^-1/2 (cfg_attn_scale; a YaRN model's attention factor, which
 *             multiplies cos and sin of every dim, is folded into it as its square).
 *   ATTN_MLA  DeepSeek-V3 layout: q = x W_Q (+ b_Q) or q = norm(x W_QA + b_QA) W_QB; the KV latent
 *             [c ; k_pe] = x W_KVA + b_KVA (c: kv_rank dims, optionally RMS-normed; k_pe: the one
 *             RoPE key shared by all heads); [k_nope_h ; v_h] = c W_KVB; per head q = [q_nope ; q_pe].
 *             RoPE dims are stored interleaved and de-interleaved before rotate_half, as
 *             DeepSeek's modeling code does (so stored pair (2j, 2j + 1) turns at inv_freq[j]);
 *             scale (nope + rope)^-1/2 for a checkpoint (times YaRN's mscale^2 with mscale_all_dim;
 *             rope_mscale: YaRN's attention factor on the rotated dims; conversions may carry
 *             another scale). RoPE and the causal softmax are core/model/rope.c's.
 *   Llama 4 (GQA): after RoPE the weightless L2 q/k norm (qk_l2), q times the NoPE layers' temperature,
 *             keys within the chunk [i - i % chunk, i].
 *   Gemma 4 (GQA): values RMS-normed per head without a weight after the projection (v_norm); a k_eq_v layer's
 *             W_V is its k_proj (loaded as a copy of W_K); a full layer has its own head dims (model_layer_cfg).
 *             A KV-shared layer (it reads another layer's cache) is not one layer's function of its input:
 *             attn_layer_load refuses it; the forward pass runs it over its source's cache, which an override
 *             of the source fills (attn_eval_kv).
 *   Output gate (Qwen3.5 / Qwen3-Next, both kinds): the head outputs (T, H dv) times sigmoid(x W_G + b_G)
 *             before W_O; W_G is the gate half of q_proj's per-head [query | gate] rows.
 * Scores are the scaled logits scale * q.k before the soft-cap and the softmax; the evaluator masks
 * j > i and, with a sliding window, j <= i - window, with a chunk j < i - i % chunk (masked entries are 0). */
#ifndef AL_ATTN_EVAL_H
#define AL_ATTN_EVAL_H

#include "matmul.h"
#include "model.h"

typedef enum { ATTN_GQA, ATTN_MLA } attn_kind;

/* Held matrices: an MLA layer's W_Q, W_QA, W_QB, W_KVA, W_KVB or W_O kept as a stored weight -- HF's (out, in), the transpose
 * of the Mat -- instead of the float32 Mat (which is NULL then): a converted layer's W_O as a view of the source's
 * o_proj in the mapping (TransMLA leaves it unchanged), and in compute bf16 its rewritten matrices as the BF16 export
 * stores them (tmla_hold.h). The evaluator multiplies them with matmul.c's products (attn_eval_mm: in the forward
 * pass's mode, as a loaded model's MLA layers are), the exports write their bytes. */
typedef enum { AH_Q, AH_QA, AH_QB, AH_KVA, AH_KVB, AH_O, AH_N } attn_held;

typedef struct {
    WMat w;                   /* (out, in) in its dtype */
    void *buf;                /* owned bytes of w.data, or NULL: w views a mapping (which must outlive the layer) */
    size_t spill;             /* bytes of buf when it is a spill mapping (attn_layer_spill_held), else 0 (malloc'd) */
} AttnHeld;

typedef struct AttnLayer {
    attn_kind kind;
    int hidden;               /* d_model */
    int n_heads;              /* H query (and output) heads */
    int v_dim;                /* dv per head */
    double scale;             /* softmax scale on q.k (a YaRN GQA layer: times the attention factor squared) */
    double rope_mscale;       /* MLA: YaRN's attention factor on the rotated q / k dims (1: none) */
    double *inv_freq;         /* (rope_dim / 2) angle per position of RoPE pair j; NULL without RoPE */
    int rope_dim;             /* RoPE dims per q/k head (GQA: head_dim or 0; MLA: qk_rope) */
    double norm_eps;          /* RMSNorm epsilon of the MLA latents */

    /* ---- GQA */
    int n_kv_heads;           /* G */
    int head_dim;             /* d per q/k head; RoPE turns its first rope_dim dims (partial rotary:
                                 GPT-NeoX rotary_pct, Phi-3 partial_rotary_factor; the rest carry none) */
    qk_norm_kind qk_norm;     /* RMSNorm of q and k after the projection (+ bias), before RoPE: per head
                                 (Qwen3, Gemma 3: weights (d)) or over the whole projection (OLMo 2:
                                 weights (H d) and (G d)); QKN_NONE: none */
    float *q_norm, *k_norm;   /* their weights (NULL without) */
    bool norm_1p;             /* the norms multiply by (1 + w) (Gemma) */
    size_t window;            /* sliding window in tokens (token i sees j > i - window); 0: full causal
                                 (window and softcap apply to an MLA layer too: compare's TransMLA) */
    size_t sink_tokens;       /* StreamingLLM on the layer (compare's combinations): keys [0, sink_tokens) stay
                                 visible outside the window; 0: none */
    double softcap;           /* scores soft-capped as softcap tanh(s / softcap) before the softmax; 0: none */
    float *sinks;             /* (H) a logit per head joining each softmax row, weight dropped (gpt-oss); NULL: none */
    size_t chunk;             /* chunked attention (Llama 4's RoPE layers): token i sees j >= i - i % chunk; 0: none */
    bool qk_l2;               /* Llama 4: each q / k head divided by its RMS (eps norm_eps) after RoPE, no weight */
    double temp_scale, temp_floor;   /* Llama 4's NoPE layers: q at position p times 1 + temp_scale ln(1 +
                                 floor((p + 1) / temp_floor)); temp_scale 0: none */
    rope_layout rope;         /* pairing of RoPE dims inside a GQA head (MLA: always interleaved) */
    bool v_norm;              /* Gemma 4: each value head RMS-normed without a weight (eps norm_eps) after W_V */
    Mat *W_Q;                 /* GQA (hidden, H d); MLA without q latent (hidden, H (nope + rope)) */
    Mat *W_K;                 /* (hidden, G d) */
    Mat *W_V;                 /* (hidden, G dv) */
    float *b_Q;               /* (W_Q cols) or NULL (MLA with a q latent: (H (nope + rope)) after W_QB) */
    float *b_K;               /* (G d) or NULL */
    float *b_V;               /* (G dv) or NULL */

    /* ---- MLA */
    int qk_nope;              /* dn per head */
    int kv_rank;              /* r: latent dims (without the RoPE key) */
    int q_rank;               /* query latent dims; 0: plain W_Q */
    Mat *W_QA;                /* (hidden, q_rank) */
    float *b_QA;              /* (q_rank) or NULL */
    float *qa_norm;           /* (q_rank) RMSNorm weight, or NULL for no norm */
    Mat *W_QB;                /* (q_rank, H (nope + rope)) */
    Mat *W_KVA;               /* (hidden, r + rope): latent columns, then the shared RoPE key */
    float *b_KVA;             /* (r + rope) or NULL */
    float *kva_norm;          /* (r) RMSNorm weight, or NULL */
    Mat *W_KVB;               /* (r, H (nope + dv)): per head [k_nope columns ; v columns]; a GQA layer with W_KVA
                                 (qk-norm keep, tmla_qkn.h): (n, G d + G dv), [K | V] = (x W_KVA + b_KVA) W_KVB, the two
                                 factors its W_K, W_V (and b_K, b_V) were formed from (attn_kv_rebuild) */

    /* ---- both */
    Mat *W_G;                 /* (hidden, H dv) output gate (attn_output_gate): head outputs times sigmoid(x W_G + b_G)
                                 before W_O; NULL: none */
    float *b_G;               /* (H dv) or NULL */
    Mat *W_O;                 /* (H dv, hidden) */
    float *b_O;               /* (hidden) or NULL */
    AttnHeld *held[AH_N];     /* held matrices (see above): where set, the Mat of that slot is NULL */
    unsigned held_borrowed;   /* bit i: held[i] is another layer's (not freed with this one) */
    bool as_loaded;           /* MLA: attended as the forward pass attends a loaded DeepSeek-V3 model's layer (RoPE pairs
                                 kept interleaved, float cos / sin tables, rope.c's attn_head_causal): a reloaded
                                 export's arithmetic bit for bit (mla_run_layers); without scores only */
    struct AttnStock *stock;  /* set: the forward pass runs this override as the model's own layer with these stored
                                 weights (attn_stock.h); owned; NULL: attn_eval runs it */
} AttnLayer;

/* A zeroed layer of the given kind (caller fills it); NULL + error on failure. */
AttnLayer *attn_layer_new(attn_kind kind);
void attn_layer_free(AttnLayer *L);
/* Deep copy (held matrices copied as held: owned bytes duplicated, mapping views kept as views). */
AttnLayer *attn_layer_copy(const AttnLayer *L);
/* Slot i's matrix held as the stored weight W (out, in) with owned bytes buf (NULL: a view), the Mat freed; a
 * previously held one freed. Takes W and buf (freed on failure). */
int attn_layer_hold(AttnLayer *L, attn_held i, const WMat *W, void *buf);
/* Slot i's float32 Mat replaced by the view W (out, in; of a mapping: no owned bytes) when W holds that Mat's values
 * transposed, bit for bit (the Mat freed); else W freed and L left as it is. Takes W. */
int attn_layer_hold_same(AttnLayer *L, attn_held i, WMat *W);
/* Slot i's held matrix dropped (freed unless borrowed; its Mat stays as it is). */
void attn_layer_drop_held(AttnLayer *L, attn_held i);
/* Slot i's held matrix widened back into its float32 Mat (nothing when it holds none). */
int attn_layer_unhold(AttnLayer *L, attn_held i);
/* Slot i's matrix held in BF16: its Mat transposed and rounded as dt_from_f32 rounds (what a BF16 export writes),
 * the Mat freed. */
int attn_layer_hold_bf16(AttnLayer *L, attn_held i);
/* Slot i's held owned bytes moved out of anonymous memory into a spill mapping (core/base/spill.h: an unlinked file
 * under $TMPDIR, written once, page cache the kernel may drop and read back): the same bytes. Nothing when the slot
 * holds no owned bytes, is borrowed or already moved, or no file can be made (no error). */
void attn_layer_spill_held(AttnLayer *L, attn_held i);
/* The float32 (x @ W) Mat of slot i: the layer's own (borrowed, *owned false) or its held matrix widened (a copy the
 * caller frees, *owned true); NULL + error on failure or when the layer has neither. */
const Mat *attn_layer_mat(const AttnLayer *L, attn_held i, bool *owned);
/* Rows and cols of slot i as the Mat (x @ W) has them, held or not; false when absent. */
bool attn_layer_dims(const AttnLayer *L, attn_held i, size_t *rows, size_t *cols);
/* Bytes the layer's matrices hold in memory (held mapping views and borrowed slots count 0). */
size_t attn_layer_bytes(const AttnLayer *L);
/* Checks that every matrix has the shape the dims imply; the message names the field. */
int attn_layer_validate(const AttnLayer *L);
/* AL_OK when every weight matrix is finite; else an error naming the field (W_O, ...) and the
 * first NaN/Inf element: a layer's errors are undefined then (LAPACK would only say "illegal
 * argument"). */
int attn_layer_finite(const AttnLayer *L);
/* Parameters of the layer (weights and biases). */
size_t attn_layer_params(const AttnLayer *L);
/* Numbers cached per token: GQA G (d + dv); MLA r + rope. */
size_t attn_layer_kv_values(const AttnLayer *L);

/* Standard RoPE frequencies theta^(-2j/dim), j < dim/2 (caller frees). */
double *attn_rope_freqs(int dim, double theta);
/* The model's RoPE frequencies for `dim` rotary dims (core/model/rope.h: its rope_theta, then its
 * rope_scaling: linear, llama3 or yarn); any other rope_scaling type is an error naming it.
 * Linear and llama3 depend on each frequency alone, so the frequencies for dim / M are every M-th
 * of those for dim. Caller frees. */
int attn_rope_freqs_model(const Model *m, int dim, double **out);
/* The RoPE frequencies (dim / 2) of layer's attention: the model's, or on a layer of its own base (Gemma 3's
 * sliding layers: rope_local_base_freq, without rope_scaling) that base's; Gemma 4's proportional pairs. */
int attn_rope_freqs_layer(const Model *m, int layer, int dim, double **out);

/* A GQA layer whose keys and values are rebuilt from a cache (W_KVA (hidden, n), b_KVA, W_KVB (n, G d + G dv)): its
 * W_K, W_V and, with b_KVA, b_K, b_V formed as W_KVA W_KVB and b_KVA W_KVB in double, one rounding to float (the
 * conversion and the reader of its export form them alike, so they agree to the bit). */
int attn_kv_rebuild(AttnLayer *L);

/* Loads layer L of m (GQA families, GPT-2, DeepSeek MLA) as float32 row-vector matrices; attnlab's layout of a qk-norm
 * keep conversion (cfg kv_rebuild) as the GQA layer attn_kv_rebuild forms. */
int attn_layer_load(Model *m, int layer, AttnLayer **out);

/* ================================================================ evaluation */

typedef struct {
    size_t T;                 /* tokens */
    int n_heads;
    float *scores;            /* (H, T, T) scaled logits; entries j > i (masked) are 0 */
    Mat *out;                 /* (T, hidden) attention output after o_proj (+ bias) */
    float *k, *v;             /* attn_eval_kv, GQA: (T, G d) keys after norm and RoPE, (T, G dv) values (after v_norm):
                                 what the forward pass caches; else NULL */
} AttnOut;

void attn_out_free(AttnOut *o);
/* Evaluates the layer on X (T x hidden) at positions pos[T] (token i attends to j <= i).
 * want_scores: also keep the (H, T, T) logits. *out is the caller's. */
int attn_eval(const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, AttnOut **out);
/* attn_eval (keep_kv: attn_eval_kv) with the held matrices multiplied on wk (NULL: scratch of its own) in mode c, as
 * the forward pass multiplies a loaded model's weights; attn_eval multiplies them in MM_F32 (their values exactly). */
int attn_eval_mm(const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, bool keep_kv, MmWork *wk,
                 mm_compute c, AttnOut **out);

/* attn_eval, keeping a GQA layer's keys and values as the forward pass caches them (o->k, o->v): a KV-shared
 * layer reads them from the override of its source. */
int attn_eval_kv(const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, AttnOut **out);

/* The pieces the evaluator is made of, for other factored evaluators (TPA, compare):
 * Y (T, n) = X (T, k) @ W (k, n) + b (b may be NULL); */
void attn_linear(const float *X, size_t T, size_t k, const Mat *W, const float *b, float *Y);
/* (the rotation is core/model/rope.h's rope_rotate_rows) and attends with L's GQA heads over given queries Q (T, H head_dim) and keys K (T, G head_dim),
 * RoPE already applied, and values V (T, G v_dim): causal softmax at L->scale, head outputs, then
 * W_O (+ b_O). want_scores keeps the (H, T, T) logits. *out is the caller's. */
int attn_attend(const AttnLayer *L, size_t T, const float *Q, const float *K, const float *V, bool want_scores,
                AttnOut **out);

/* Relative errors ||b - a|| / ||a|| of the causal scores (both must have them; else NaN) and
 * of the outputs. */
void attn_rel_err(const AttnOut *a, const AttnOut *b, double *score_err, double *out_err);

/* Deterministic standard normal T x hidden inputs for a seed (caller frees). */
Mat *attn_random_input(size_t T, int hidden, uint64_t seed);

/* The Q/K norm of one token's n heads of d values in place: per head (QKN_HEAD) or over all n d (QKN_PROJ);
 * weights w (1 + w where one_plus), or none (w NULL: Llama 4's L2 norm). */
void attn_qk_norm_row(float *x, size_t n, size_t d, qk_norm_kind k, const float *w, bool one_plus, double eps);

#endif
