/* farr.h -- Fuse and Rank Reduce (seed 000): per-head spectra and effective ranks of the fused
 * pairs V·O and Q·Kᵀ, truncation plans (truncate-and-split with sigma folded into one side),
 * parameter and KV-cache accounting, and the session cache of results.
 *
 * Pairs, in the seed's row-vector convention (model.h):
 *   VO: W_V[g] (d_in_kv x d_v) @ W_O[h] (d_v x hidden)           g = the KV head of query head h
 *   QK: W_Q[h] (d_in_q x d) @ W_K[g]ᵀ (d x d_in_kv)               d = the columns fused:
 *       the NoPE columns where RoPE is partial (MLA), all columns without RoPE (GPT-2), and for
 *       full-RoPE families (Llama, Mistral, Qwen2) nothing -- refused (seed A.3) -- unless a fixed
 *       position offset D is asked for: RoPE at p = 0 on W_Q (the identity) and at p = D on W_K,
 *       which is analysis only (never truncated or exported).
 * rank_a / rank_b are the effective ranks of V and O (or Q and K); for GQA the shared side's
 * rank is that of the group's K/V head.
 *
 * Truncation of a group (a KV head g and the query heads h sharing it; MLA/MHA: one head): the
 * shared side S = W_V[g] (VO) or W_K[g] (QK) must serve the whole group, so the group's fused
 * maps are stacked (KQ-SVD Theorem 5) -- VO: S [W_O[h1] .. W_O[hn]], QK: S [W_Q[h1] .. ]ᵀ -- and
 * the top-r left singular vectors U_r (d_in_kv x r) of the stack become the new shared factor
 * (orthonormal columns, what is cached); sigma is folded into the per-head side:
 *   VO: W_V'[g] = U_r,  W_O'[h] = U_rᵀ W_V[g] W_O[h]         (r x hidden)
 *   QK: W_K'[g] = U_r,  W_Q'[h] = W_Q[h] W_K[g]ᵀ U_r          (d_in_q x r)
 * so W_V' W_O' (resp. W_Q' W_K'ᵀ) is the orthogonal projection of each fused map onto the kept
 * subspace: for one head this is exactly the rank-r truncated SVD. */
#ifndef AL_FARR_H
#define AL_FARR_H

#include "attn_eval.h"
#include "spectra.h"
#include "model.h"

typedef enum { FARR_VO, FARR_QK } farr_kind;

/* "vo" / "qk", and the names of the two factors ("V","O" / "Q","K") and of the fused map. */
const char *farr_kind_name(farr_kind k);
const char *farr_side_name(farr_kind k, int side);   /* side 0: A (V or Q), 1: B (O or K) */
const char *farr_fused_name(farr_kind k);            /* "VO" / "QK" */
/* The pair's two factors: the side shared by a KV group (V or K) and each query head's own (O or Q). */
static inline head_kind farr_shared_kind(farr_kind k) { return k == FARR_VO ? HK_V : HK_K; }
static inline head_kind farr_own_kind(farr_kind k) { return k == FARR_VO ? HK_O : HK_Q; }

#define FARR_NO_OFFSET (-1)

/* ================================================================ one head */

/* How QK is fused on this model: the part of the Q/K columns used, and whether a RoPE offset
 * rotation is applied to K. Refuses full-RoPE families without an offset, with the seed A.3
 * reason; offset is FARR_NO_OFFSET or >= 0. VO always succeeds (part PART_ALL). */
int farr_fuse_mode(const ModelConfig *c, farr_kind kind, int offset, head_part *part, bool *rotate_k);
/* Which Q/K dims of each head QK fusion uses on a partial-rotary model (cfg.rope_first: GPT-NeoX,
 * Phi-3 partial_rotary_factor), e.g. "NoPE dims 8-31 of each head (24 of 32; dims 0-7 carry RoPE)";
 * false (buf "") on other models, whose part is fixed by the family (MLA: NoPE; GPT-2: all). */
bool farr_qk_dims(const ModelConfig *c, char *buf, size_t cap);
/* On a model with a Q/K norm (whose QK fusion is refused), the spectrum of the whole W_Q of query
 * head `head` (side 0) or the W_K of its KV head (side 1): the norm follows the projection, so the
 * projection's own spectrum is still the weight's. *out NULL (AL_OK) on other models. */
int farr_normed_side(Model *m, int side, int layer, int head, Spectrum **out);
/* One Q or K projection alone where QK fusion would not hand it over as the pair's factor: a
 * Q/K norm follows the projection, or RoPE covers every Q/K dim and no offset is given (the
 * rotation acts on the projection's output, so one W_Q or W_K head has no RoPE problem; only the
 * fused W_Q W_K^T does). *W is the whole W_Q of query head `head` (side 0) or the W_K of its KV
 * head (side 1), the caller's to free; NULL (AL_OK) where the fused pair's own factor applies. */
int farr_side_alone(Model *m, int side, int layer, int head, int offset, Mat **W);

/* The two factors of query head h's fused map in layer L: *A (m x k) and *B with the product
 * A @ op(B): VO: A = W_V[g], B = W_O[h], SPECTRA_AB; QK: A = W_Q[h] (part), B = W_K[g] (part, RoPE at
 * p = offset when asked), SPECTRA_ABT. Loads the layer if needed. Caller frees both. */
int farr_head_factors(Model *m, farr_kind kind, int layer, int head, int offset,
                      Mat **A, Mat **B, spectra_op *op);

/* Applies RoPE at position p to the columns of W (rows are input directions, columns a head's
 * rotary dims in `layout`), in place: column pair (i, j) of frequency theta^(-2t/d) rotates by
 * p * freq, as q·R_p for a row vector q. */
void farr_rope_rotate(Mat *W, rope_layout layout, double theta, double p);

/* One fused head kept as a value (`fuse`): its factors and its SVD with singular vectors. */
typedef struct {
    const Model *model;      /* borrowed: the model it came from */
    farr_kind kind;
    int layer, head, offset;
    Mat *A, *B;              /* the factors: the map is A @ B (VO) or A @ Bᵀ (QK) */
    spectra_op op;
    Spectrum *s;             /* U (m x p), sigma (p), Vt (p x n) of the fused map */
    Spectrum *sa, *sb;       /* singular values of A and B */
} FarrFused;

/* Fuses query head h of layer L (never forming the product) with singular vectors. Caller frees
 * with farr_fused_free. */
int farr_fuse(Model *m, farr_kind kind, int layer, int head, int offset, FarrFused **out);
void farr_fused_free(FarrFused *f);

/* ================================================================ a layer's spectra */

/* Singular values (values only) of every query head's pair in one layer; tau-independent, so
 * ranks at any tau are derived without recomputing. */
typedef struct {
    farr_kind kind;
    int layer;
    int offset;              /* FARR_NO_OFFSET or the QK RoPE offset */
    int n_heads;             /* query heads */
    int head_dim;            /* d_v (VO) or the fused Q/K columns (QK): the rank cap of plots */
    Spectrum **a;            /* (n_heads) V[g(h)] or Q[h] */
    Spectrum **b;            /* (n_heads) O[h] or K[g(h)] */
    Spectrum **fused;        /* (n_heads) VO or QK */
    double *eps;             /* (n_heads, 3) the fast route's bounds of a, b, fused (the l2 distance
                                of their squared values from the double route's, spectra_rank_certain's
                                eps; 0 for a head redone in double), or NULL: every spectrum is the
                                double route's */
    bool coarse;             /* FARR_ROUTE_RANKS: the values (of heads not redone) come from float
                                solves -- for rank counts under eps only, not for showing */
} FarrLayer;

/* How a layer's spectra are computed (rank tables use FARR_ROUTE_FAST, certified at their tau, on
 * a CPU with AVX-512 BF16; spectra and their plots FARR_ROUTE_STREAM, the double route):
 *   FARR_ROUTE_STREAM (the default): each factor's Gram is accumulated straight from the
 *     checkpoint's mapping (core/analysis/gram.h: dequantization fused into a cache-sized chunk, dsyrk in
 *     double), the shared K / V side of each group once, then values-only eigen-solves
 *     (spectra_gram_side_new / spectra_gram_fused); no float copy of the layer is made, and the layer's
 *     mapped pages are released when it is done, so a sweep keeps one layer's pages resident.
 *   FARR_ROUTE_FACTORS: the layer's float copies (model_layer_load), per-head factors
 *     (model_head) and spectra_product_svd -- the reference the stream route is tested against.
 *   FARR_ROUTE_FAST: the stream route with the Grams of gram_compute_fast (BF16 dot products
 *     with float accumulation on BF16 / FP8 weights, floats otherwise) and the same values-only
 *     solves in double, each spectrum with its error bound in eps; ranks from it are the double
 *     route's once farr_layer_certify has redone, in double, every head whose rank at that tau
 *     the bound leaves open.
 *   FARR_ROUTE_RANKS: FARR_ROUTE_FAST with its eigen-solves' Householder reductions in float
 *     (symeig_values_f32_ws) and eps to match: the same ranks once certified, a few more heads
 *     redone, values too coarse to show (l->coarse). */
typedef enum { FARR_ROUTE_STREAM, FARR_ROUTE_FACTORS, FARR_ROUTE_FAST, FARR_ROUTE_RANKS } farr_route;

/* Computes a layer's spectra over all heads on all cores (pool_run: the persistent workers, one
 * BLAS thread each); AL_INTERRUPTED leaves *out NULL. Caller frees with farr_layer_free. */
int farr_layer_compute(Model *m, farr_kind kind, int layer, int offset, FarrLayer **out);
int farr_layer_compute_route(Model *m, farr_kind kind, int layer, int offset, farr_route route, FarrLayer **out);
void farr_layer_free(FarrLayer *l);
/* A fast-route layer at tau: heads whose ranks at tau the bounds do not pin down are recomputed
 * by the double route (in place; *redone, when given, grows by their count). A no-op on an exact
 * layer. After it, farr_layer_ranks at tau gives the double route's ranks. */
int farr_layer_certify(Model *m, FarrLayer *l, double tau, size_t *redone);
/* Makes every head of l the double route's (spectra to show or plot); eps becomes NULL. */
int farr_layer_exact(Model *m, FarrLayer *l, size_t *redone);
/* Effective ranks at tau of head h: a, b, fused (any pointer may be NULL); on a fast-route layer
 * certify it at tau first. */
void farr_layer_ranks(const FarrLayer *l, int head, double tau, int *ra, int *rb, int *rf);

/* ================================================================ accounting (seed 000) */

/* Parameters of a pair A (m_a x d) and B (m_b x d), e.g. Q and K heads: (m_a + m_b) d. */
size_t farr_params_pair(size_t m_a, size_t m_b, size_t d);
/* Parameters after truncating each factor separately by SVD at its own rank: A (m_a x d) ->
 * (m_a x r_a)(r_a x d), and the same for B. */
size_t farr_params_separate(size_t m_a, size_t r_a, size_t m_b, size_t r_b, size_t d);
/* Parameters after FaRR at fused rank r: (m_a + m_b) r. */
size_t farr_params_fused(size_t m_a, size_t m_b, size_t r);

/* ================================================================ truncation */

typedef enum { FARR_POLICY_HEAD, FARR_POLICY_LAYER_MAX, FARR_POLICY_MODEL_MAX } farr_policy;
const char *farr_policy_name(farr_policy p);     /* "head", "layer-max", "model-max" */
int farr_policy_parse(const char *s, farr_policy *out);

typedef struct {
    farr_kind kind;
    bool by_rank;            /* true: keep `rank`; false: the smallest rank keeping tau of every
                                fused map's energy */
    double tau;
    int rank;
    farr_policy policy;
    int layer_lo, layer_hi;  /* inclusive; hi < 0: the last layer */
} FarrTruncOpts;

/* One group's split: computed from the shared factor S (m x k) and the per-head factors. */
typedef struct {
    int rank;                /* r kept */
    int rank_tau;            /* the rank the group needs on its own (before a policy raises it) */
    size_t p;                /* singular values of the stacked map */
    Mat *shared;             /* (d_in_kv x r) the new W_V'[g] or W_K'[g], orthonormal columns (a V
                                bias truncated with W_V, farr.c's vo_affine: [W_V'; b_V'] has them) */
    int n;                   /* heads in the group */
    Mat **head;              /* (n) VO: W_O'[h] (r x hidden); QK: W_Q'[h] (d_in_q x r) */
    double *energy;          /* (n) fraction of each fused map's energy kept */
    double *err;             /* (n) relative Frobenius error of each fused map */
    double *cum;             /* (n, p) cumulative kept energy fraction of head i at rank j+1 */
    double *U;               /* (m, p) left singular vectors of the stack (farr_truncate frees it
                                once the layer is split; NULL then) */
} FarrGroup;

/* Analyses one group: stacked product SVD, per-head energy profiles, and the rank at tau
 * (smallest r keeping >= tau of every head's energy). kind picks the orientation: VO: S = W_V[g]
 * (m x k), heads[i] = W_O[h_i] (k x n); QK: S = W_K[g] (m x k), heads[i] = W_Q[h_i] (n_q x k).
 * Call farr_group_split to produce factors at a rank. Caller frees with farr_group_free. */
int farr_group_analyse(farr_kind kind, const Mat *S, const Mat *const *heads, int n, double tau,
                       FarrGroup **out);
/* Builds the factors at rank r (clamped to p) and fills rank, energy, err. */
int farr_group_split(FarrGroup *g, farr_kind kind, const Mat *S, const Mat *const *heads, int r);
void farr_group_free(FarrGroup *g);

/* One truncated layer. */
typedef struct {
    int layer;
    int n_heads, n_kv;
    FarrGroup **groups;      /* (n_kv) */
    size_t params_before;    /* parameters of the pair's weights in this layer (both sides) */
    size_t params_after;
    size_t kv_before;        /* values cached per token for this side (VO: values, QK: keys);
                                MLA caches the latent, so both are 0 there */
    size_t kv_after;
    double energy_min, energy_mean, err_max, err_mean;
    /* Bias adjustments (NULL when the model has no such bias):
     *   shared_bias[g] (r): the new V (or K) bias of group g;
     *   head_bias[h] (r): the new Q bias of query head h (QK);
     *   o_bias_delta (hidden): added to the output bias (VO, when the V bias is folded there). */
    float **shared_bias;
    float **head_bias;
    float *o_bias_delta;
} FarrTruncLayer;

/* A truncation of one model (the working copy): what export writes. */
typedef struct FarrPlan {
    FarrTruncOpts opts;
    char *model_path;        /* the source model's folder (export never writes there) */
    int n_layers_model;
    int lo, hi;              /* layers truncated (inclusive) */
    FarrTruncLayer **layers; /* (hi - lo + 1) */
    size_t params_before, params_after, kv_before, kv_after;
    double energy_min, energy_mean, err_max, err_mean;
    int rank_max;            /* the largest rank kept */
    bool uniform;            /* every group of every layer has the same rank */
} FarrPlan;

/* Truncates kind per opts on model m (the model is not modified). Sweeps layers with progress
 * and Ctrl-C polling (AL_INTERRUPTED: no plan). Caller frees with farr_plan_free. */
int farr_truncate(Model *m, const FarrTruncOpts *opts, FarrPlan **out);
void farr_plan_free(FarrPlan *p);
/* The truncated layer of plan for model layer L, or NULL when L is outside the plan. */
const FarrTruncLayer *farr_plan_layer(const FarrPlan *p, int layer);
/* A kind-k group's full width: v_dim (VO), the no-RoPE part of the head where there is one, else d_qk (QK). */
int farr_pair_width(const ModelConfig *c, farr_kind k);
/* Layer L of the kind-k plan when it cuts something there (a group below full rank), else NULL: a layer every group
 * of which keeps its full rank is the source's (the export copies it bit for bit, the session runs the source's). */
const FarrTruncLayer *farr_plan_cut_layer(const FarrPlan *p, const ModelConfig *c, farr_kind k, int layer);
/* The group and index within it of query head h (for reading its factors). */
const FarrGroup *farr_plan_head(const FarrPlan *p, const ModelConfig *c, int layer, int head, int *idx);

/* The working copy's attention of model layer `layer` as the forward pass runs it (core/model/forward.h
 * fwd_set_attn): attn_layer_load's layer with each truncated head's rank-r factors written at full
 * size, zero past r -- the weights `export ... format dense` writes (core/export/export.c), in the
 * evaluator's row-vector layout:
 *   VO: W_V[:, g dv ..] = [U_r 0] (MLA: W_KVB's v columns of head h), W_O[h dv .., :] = [W_O'[h] ; 0],
 *       b_V' and the output bias moved as the plan says (FarrTruncLayer);
 *   QK: W_K's (MLA: W_KVB's k_nope) columns of KV head g over the fused part = [U_r 0], W_Q's (or
 *       W_QB's) columns of query head h = [W_Q'[h] 0], b_Q' per head, b_K' = 0.
 * vo / qk: the plans (either NULL) of m. *out is NULL (AL_OK) when neither plan covers the layer;
 * else the caller's (attn_layer_free). */
int farr_attn_layer(Model *m, const FarrPlan *vo, const FarrPlan *qk, int layer, AttnLayer **out);
/* farr_attn_layer as the session runs it in compute mode c (farr_run.c): in MM_BF16 on a source whose default export
 * is BF16, the layer carries a stock (attn_stock.h) -- the forward pass runs it as the reloaded dense export, one
 * number -- and holds W_Q / W_O (attn_eval.h) as the stock's bytes or the stored tensors' views, no float32 copy;
 * MM_F32: farr_attn_layer's layer. */
int farr_attn_layer_run(Model *m, const FarrPlan *vo, const FarrPlan *qk, int layer, mm_compute c, AttnLayer **out);

/* ================================================================ session cache */

/* Results kept between commands: layer spectra keyed by (model, kind, layer, offset) -- ranks at
 * any tau derive from them, so a changed tau never reuses stale ranks and a repeated question is
 * instant -- and the working copy (the latest VO and QK truncation plans of each model). */
typedef struct FarrState FarrState;

FarrState *farr_state_new(void);
void farr_state_free(FarrState *st);
/* Drops everything tied to m (call before m is freed). */
void farr_state_drop_model(FarrState *st, const Model *m);

/* The cached spectra of a layer, NULL when not computed yet (never computes). For plots. */
const FarrLayer *farr_state_get_layer(const FarrState *st, const Model *m, farr_kind kind,
                                      int layer, int offset);
/* The spectra of a layer, the double route's (for showing and plotting them): cached (a cached
 * fast-route layer is made exact in place), or computed (then cached). *out is owned by the
 * state. */
int farr_state_layer(FarrState *st, Model *m, farr_kind kind, int layer, int offset,
                     const FarrLayer **out);
/* What the range functions below are asked about: one model's pair over layers lo..hi
 * (inclusive), at one QK RoPE offset -- the key of the cached layers they read. */
typedef struct {
    Model *m;
    farr_kind kind;
    int lo, hi;              /* layers, inclusive */
    int offset;              /* FARR_NO_OFFSET or the QK RoPE offset */
    bool ranks_only;         /* the caller reads ranks only (after farr_state_certify): new layers
                                may take FARR_ROUTE_RANKS; false: cached coarse layers are redone */
} FarrQuery;

/* Computes (or finds) layers q->lo..q->hi, reporting al_progress("layer", i, N) and polling
 * Ctrl-C between layers; finished layers stay cached when interrupted. New layers take the fast
 * route (FARR_ROUTE_FAST) where gram_fast_pays(), the double route elsewhere: read ranks from them
 * after farr_state_certify (farr_state_rank_table does). */
int farr_state_sweep(FarrState *st, const FarrQuery *q);
/* Certifies the cached layers q->lo..q->hi at tau (farr_layer_certify): afterwards
 * farr_layer_ranks on them at tau gives the double route's ranks. A missing layer is an error. A
 * Ctrl-C already pending (the one that stopped a sweep) is held back meanwhile and left set. */
int farr_state_certify(FarrState *st, const FarrQuery *q, double tau);

/* One row of a rank table: effective ranks at tau of query head `head` of `layer`. */
typedef struct {
    int layer, head;
    int rank_a, rank_b, rank_fused;   /* V, O, VO (or Q, K, QK); GQA: the shared head's rank */
} FarrRankRow;

/* The rank table of layers q->lo..q->hi at tau from the cached spectra (compute them first with
 * farr_state_sweep; a missing layer is an error), certified at tau first: the double route's
 * ranks. *rows (n_layers x n_heads, layer-major) is the caller's (free). */
int farr_state_rank_table(FarrState *st, const FarrQuery *q, double tau, FarrRankRow **rows, size_t *n);

/* The working copy: stores plan as m's latest truncation of its kind (replacing an older one;
 * takes ownership). */
int farr_state_set_plan(FarrState *st, const Model *m, FarrPlan *plan);
/* The latest plan of kind for m, or NULL. */
const FarrPlan *farr_state_plan(const FarrState *st, const Model *m, farr_kind kind);

/* The kept fused head (`fuse`): set replaces (and frees) the previous one, taking ownership. */
void farr_state_set_fused(FarrState *st, FarrFused *f);
const FarrFused *farr_state_fused(const FarrState *st);

#endif
