/* tmla_lm.h -- perplexity of a Llama-family language model whose attention layers can be swapped
 * for converted ones in memory (TransMLA variants, seed 003), and the two perplexity studies
 * built on it: the RoPE-removal curve (Figure 3b) and the W-based / activation-based, with /
 * without KV balancing table (Figure 4b).
 *
 * Why not core/forward.c: a DeepSeek-V3 checkpoint carries one standard RoPE of qk_rope_head_dim
 * dims, so only conversions keeping D = d / M RoPE dims can be exported and run there (that is
 * what `convert mla` does). The RoPE-removal curve keeps any number of rotated pairs, each at its
 * own frequency; core/attn_eval.c evaluates such layers, and this module runs the rest of the
 * network around them: embeddings, RMSNorm, attention (attn_eval, causal, positions 0..T-1),
 * SwiGLU MLP, final norm, LM head. Families: Llama, Mistral (no active sliding window), Qwen2,
 * llama2.c (what core/attn_eval.c loads and `convert mla` converts). With its original layers the
 * model's NLL matches fwd_nll (tests hold them to 1e-4). Weights are float32 copies, resident. */
#ifndef AL_TMLA_LM_H
#define AL_TMLA_LM_H

#include "forward.h"
#include "transmla.h"

typedef struct TlmModel TlmModel;

/* Loads m's weights (the original attention layers as AttnLayer, the rest as float matrices).
 * Errors name the family or tensor that is not covered. m must outlive the result. */
int tlm_new(Model *m, TlmModel **out);
void tlm_free(TlmModel *t);
Model *tlm_model(const TlmModel *t);
/* The original attention layer L (owned by t). */
const AttnLayer *tlm_original(const TlmModel *t, int layer);
/* Uses L (borrowed: keep it alive while in use) as layer's attention; NULL restores the original.
 * L must read and write the model's hidden size. */
int tlm_set_attn(TlmModel *t, int layer, const AttnLayer *L);
/* Restores every original layer. */
void tlm_reset_attn(TlmModel *t);

/* Summed negative log-likelihood (nats) of tokens[1..T) given their prefixes (one fresh sequence
 * at positions 0..T-1) and the count T - 1, as fwd_nll. */
int tlm_nll(TlmModel *t, const int *tokens, size_t T, double *nll_sum, size_t *count);

/* The `ppl` windows: tokens cut into non-overlapping windows of seqlen (the last may be shorter,
 * at least 2 tokens), each a fresh sequence predicting its tokens 2..; the mean NLL per predicted
 * token and the count. nll_fn is tlm_nll (ud = TlmModel *) or fwd_nll (ud = Forward *) through
 * the adapters below. Ctrl-C: AL_INTERRUPTED. */
typedef int (*tlm_nll_fn)(void *ud, const int *tokens, size_t T, double *nll_sum, size_t *count);
int tlm_windows_nll(tlm_nll_fn fn, void *ud, const int *ids, size_t n, size_t seqlen, double *mean_nll, size_t *count);
int tlm_nll_tlm(void *ud, const int *tokens, size_t T, double *nll_sum, size_t *count);
int tlm_nll_fwd(void *ud, const int *tokens, size_t T, double *nll_sum, size_t *count);

/* ================================================================ Figure 3b: RoPE removal */

typedef struct {
    const double *removed;    /* (n_removed) fractions of the merged key's RoPE dims to remove, in [0, 1) */
    size_t n_removed;
    const int *Ms;            /* (nM) FreqFold values; one RoRoPE curve each (1: plain RoRoPE) */
    size_t nM;
    bool mha2mla;             /* also the per-head query-key norm selection (no rotation) */
    int layer_lo, layer_hi;   /* layers that lose RoPE dims (hi < 0: to the last) */
    const double *const *sigma;   /* per layer E[x xᵀ] for the PCAs and norms (NULL / NULL entry: weights) */
    const double *const *mu;      /* per layer E[x] beside sigma (may be NULL) */
    const int *ids;           /* evaluation tokens */
    size_t n_ids, seqlen;
} TlmRemovalOpts;

typedef struct {
    int M;                    /* FreqFold of a RoRoPE curve; 0: MHA2MLA */
    size_t n;
    double *removed;          /* (n) fraction of RoPE dims removed (as realized: whole pairs) */
    int *rope_dims;           /* (n) RoPE dims kept in the merged key (per KV head for MHA2MLA x heads) */
    double *energy;           /* (n) key energy kept in the RoPE dims, mean over the layers */
    double *nll;              /* (n) log-perplexity: mean NLL per predicted token */
} TlmRemovalCurve;

typedef struct {
    double base_nll;          /* the original model's */
    size_t tokens;            /* predicted tokens per evaluation */
    size_t n_curves;
    TlmRemovalCurve *curves;
} TlmRemoval;

void tlm_removal_free(TlmRemoval *r);
/* Every RoRoPE curve keeps, per layer, the rotated pairs of largest key energy (FreqFold M: one
 * PCA per group of M frequencies, each group turning at its first frequency); the MHA2MLA curve
 * keeps per KV head the same number of frequencies (tmla_mha2mla_pairs). No KV compression: the
 * dims that lose RoPE stay as NoPE keys. Fractions are rounded to whole pairs (repeats dropped).
 * al_progress("variant"); Ctrl-C: AL_INTERRUPTED, nothing kept. */
int tlm_rope_removal(TlmModel *t, const TlmRemovalOpts *o, TlmRemoval **out);

/* ================================================================ Figure 4b: the KV table */

typedef struct {
    const int *kv_ranks;      /* (n_ranks) joint ranks R (TMLA_FULL allowed) */
    size_t n_ranks;
    int rope_dim, freqfold;   /* as convert mla (0: defaults) */
    int layer_lo, layer_hi;   /* converted layers (hi < 0: to the last) */
    const double *const *sigma;   /* per layer activation statistics (required for the WX rows) */
    const double *const *mu;
    const int *ids;
    size_t n_ids, seqlen;
} TlmKvTableOpts;

typedef struct {
    int kv_rank;
    bool act;                 /* activation-based (WX) PCAs; false: weights (W) */
    bool balance;             /* KV balancing */
    double alpha;             /* mean over the converted layers */
    double rope_energy;       /* key energy kept in the RoPE dims, under the activation statistics, mean */
    double joint_energy;      /* energy kept by the joint basis of its own PCA input, mean */
    double nll;               /* log-perplexity */
} TlmKvRow;

typedef struct {
    double base_nll;
    size_t tokens;
    int rope_dim, freqfold;
    size_t n;
    TlmKvRow *rows;           /* per rank: W, W + BKV, WX, WX + BKV */
} TlmKvTable;

void tlm_kv_table_free(TlmKvTable *t);
/* Converts the layers four ways per rank and measures each perplexity (al_progress "variant"). */
int tlm_kv_table(TlmModel *t, const TlmKvTableOpts *o, TlmKvTable **out);

#endif
