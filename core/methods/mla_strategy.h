/* mla_strategy.h -- the published one-shot GQA -> MLA strategies beside TransMLA's (issue 30, 3):
 * MHA2MLA (Ji et al. 2025, github JT-Ushio/MHA2MLA) and CARE (Zhou et al., ICLR 2026, github
 * FutureMLS-Lab/CARE), each as its paper's code does it, on TransMLA's merged layer (transmla.h:
 * the same MLA layout, the same build), and the table that compares them with TransMLA per kv-rank.
 *
 *   transmla  RoRoPE + FreqFold, KV balancing, the joint PCA of [K_nope / alpha ; V] (transmla.h).
 *   mha2mla   partial RoPE of the SOURCE's dims, no rotation (patch_func.py partial_rope_mask): per
 *             KV head r frequencies keep RoPE, l indexing frequencies from the highest (inv_freq 1):
 *               high     S = {0 .. r-1}
 *               low      S = {rd/2 - r .. rd/2 - 1}
 *               uniform  S = {s + k (rd/2 / r) : k < r} (s = start, 0 by default)
 *               2norm    per KV head the r frequencies with the largest (sum over the group's query
 *                        heads of the query pair's norm) x (the key pair's norm) on calibration data
 *                        (2_norm.py; here their RMS under the layer's statistics: tmla_mha2mla_pairs)
 *             then the SVD of the NoPE key and value WEIGHTS (svd_low_rank_approx): joint -- one
 *             latent for [W_k_nope | W_v] --, or split -- one latent each, the rank shared R/2 + R/2
 *             so the KV values per token match. The other rd/2 - r frequencies of every KV head
 *             lose RoPE: NOT exact at full kv rank (unless r = rd/2).
 *   care      TransMLA's RoRoPE, then CARE's covariance-aware latent (lora_qkv.py cwsvd_decompose,
 *             "care"): Y = C^{1/2} W_J (C the second moment of the layer input [x, 1], damped by
 *             0.1 mean diag C: percdamp 0.01 x 10; W_J the joint NoPE key / value map), its SVD
 *             Y = U S Vᵀ, down = C^{-1/2} U_r S_r = W_J V_r, up = V_rᵀ: the latent basis is V_r, the
 *             top right singular vectors. It minimizes E ||x W_J - x W_J V_r V_rᵀ||² under C (exactly
 *             without the damping): undamped, it IS the activation PCA of the unbalanced features,
 *             i.e. TransMLA with activation statistics and balance off (test_mla_strategy checks it);
 *             the damping (input space, as zeroshot/convert.py's care) pulls it toward the weights'
 *             SVD. (CARE's MLA converter whitens in the latent's feature space by their second
 *             moment; its up-projection being orthogonal up to the GQA repeat, that is the same PCA
 *             whatever the damping.)
 *   alloc care  CARE's rank allocation (zeroshot/convert.py _allocate_dynamic_ranks): every layer
 *             starts at min_rank = R/2 (capped at max_rank = 2R and the layer's dims); the other
 *             n R - n min_rank ranks go one at a time to the layer with the largest
 *               (s_r² / E) / max(1 - P_r / E, 1e-12) x sqrt((n - l) / ((n + 1) / 2)) / sqrt(r / min_rank)
 *             (s the singular values of the layer's strategy operator, E = Σ s², P_r = Σ_{i<r} s_i²,
 *             r its current rank): the share of the residual the next direction removes, weighted to
 *             earlier layers and against ranks already given. Sums to n R (unless every layer is
 *             full). A layer whose spectrum has nothing left gets nothing more. The spectrum is the
 *             allocation of CARE's MLA converter (lora_qkv.py, dynamic_rank), for every strategy: K and V
 *             apart (mlastrat_alloc_kv), half the budget each (K n R / 2 rounded down), each between
 *             max(1, min_rank / 2) and max_rank / 2, each on its own spectrum: the damped eigenvalues of the
 *             latent's K-nope or V second moment H (after the strategy's RoPE step) to the power 4
 *             (NEW_SQRT_BASIS_POWER: the singular values of H^4 Wᵀ), its first max_rank / 2; a layer's kv
 *             rank is its K rank plus its V rank.
 * Every strategy's layers are built by tmla_build (DeepSeek-V3's layout); only a TransMLA or CARE
 * conversion with uniform ranks keeps one standard RoPE key and one kv_lora_rank (exportable). */
#ifndef AL_MLA_STRATEGY_H
#define AL_MLA_STRATEGY_H

#include "forward.h"
#include "transmla.h"

typedef enum { MLASTRAT_TRANSMLA, MLASTRAT_MHA2MLA, MLASTRAT_CARE } mlastrat_kind;
typedef enum { MLASTRAT_ROPE_HIGH, MLASTRAT_ROPE_LOW, MLASTRAT_ROPE_UNIFORM, MLASTRAT_ROPE_2NORM } mlastrat_rope;
typedef enum { MLASTRAT_SVD_JOINT, MLASTRAT_SVD_SPLIT } mlastrat_svd;
typedef enum { MLASTRAT_ALLOC_UNIFORM, MLASTRAT_ALLOC_CARE } mlastrat_alloc;

#define MLASTRAT_CARE_DAMP 0.1    /* CARE's sqrt path: percdamp 0.01 x 10, times the mean diagonal */
#define MLASTRAT_KV_DAMP 0.01     /* CARE's allocation spectra: percdamp, times the mean diagonal */
#define MLASTRAT_KV_POWER 4.0     /* ... raised to NEW_SQRT_BASIS_POWER's default */

typedef struct {
    mlastrat_kind kind;
    mlastrat_rope rope;       /* mha2mla: which frequencies keep RoPE */
    int rope_pairs;           /* mha2mla: r frequencies per KV head (0: rope_dim / (2 G), at least 1) */
    int uniform_start;        /* mha2mla uniform: the start s */
    mlastrat_svd svd;         /* mha2mla: joint or split SVD */
    mlastrat_alloc alloc;     /* kv ranks across layers (any strategy; CARE's) */
    double damp;              /* care: the damping (< 0: MLASTRAT_CARE_DAMP) */
} MlastratOpts;

/* TransMLA, uniform ranks. */
MlastratOpts mlastrat_default(void);
/* "transmla", "mha2mla", "care"; "high", "low", "uniform", "2norm"; "joint", "split"; "uniform", "care". */
const char *mlastrat_kind_name(mlastrat_kind k);
const char *mlastrat_rope_name(mlastrat_rope r);
const char *mlastrat_svd_name(mlastrat_svd s);
const char *mlastrat_alloc_name(mlastrat_alloc a);
/* Its name as `strategy` takes it ("transmla", "mha2mla-2norm", "mha2mla-low-split-r2", "care-alloc"): buf. */
const char *mlastrat_label(const MlastratOpts *s, char *buf, size_t cap);
/* Whether the strategy is exact at full kv rank where TransMLA is (one KV head, D = d): mha2mla only
 * when every frequency keeps RoPE. */
bool mlastrat_exact_full(const MlastratOpts *s, int rd);

/* mha2mla's RoPE frequencies: G r merged pair indices g rd/2 + l, head by head, by frequency
 * (Sigma / mu: the layer input's statistics for 2norm; NULL: unit variance). */
int mlastrat_rope_pairs(const AttnLayer *gqa, const MlastratOpts *s, int r, const double *Sigma, const double *mu,
                        size_t *pairs);

/* CARE's covariance-aware basis of W (m, n) under the input second moment C (m, m), damped by damp
 * mean(diag C): V (n, R) the top R right singular vectors of C_d^{1/2} W, sv (min(m, n)) all its
 * singular values, descending (either may be NULL). */
int mlastrat_care_basis(const double *W, size_t m, size_t n, const double *C, double damp, int R, double *V,
                        double *sv);

/* CARE's allocation: ranks[n_layers] from each layer's singular values sv[l] (n_sv[l] of them),
 * n_layers budget_per_layer in all, between min_rank and max_rank (and n_sv[l]). */
int mlastrat_alloc_ranks(const double *const *sv, const size_t *n_sv, int n_layers, int budget_per_layer, int min_rank,
                         int max_rank, int *ranks);

/* CARE's MLA converter's allocation (allocate_separate_branch_ranks): K gets n_layers budget_per_layer / 2 (rounded
 * down), V the rest, each by mlastrat_alloc_ranks' rule between max(1, min_rank / 2) and max(that, max_rank / 2) on
 * the first max_rank / 2 values of its spectra (svk[l]: nk[l] values; svv, nv); rk, rv the K and V ranks. */
int mlastrat_alloc_kv(const double *const *svk, const size_t *nk, const double *const *svv, const size_t *nv,
                      int n_layers, int budget_per_layer, int min_rank, int max_rank, int *rk, int *rv);
/* The K-nope and V spectra of layer gqa's latent under strategy s's RoPE step (what alloc care ranks by:
 * mlastrat_alloc_kv): the damped eigenvalues of their second moments to MLASTRAT_KV_POWER, descending; caller frees. */
int mlastrat_layer_kv_spectra(const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, const double *Sigma,
                              const double *mu, double **svk, size_t *nk, double **svv, size_t *nv);

/* The mha2mla r for a model (s->rope_pairs, or rope_dim / (2 G), at least 1); an error names the range. */
int mlastrat_pairs_per_head(const ModelConfig *c, const MlastratOpts *s, int rope_dim, int *r);

/* One layer with strategy s at kv rank R (TMLA_FULL: all) and its report (o: TransMLA's options for
 * freqfold / rope-dim / balance / q-rank / tokens / seed / qk-norm; the alt columns are NaN). */
int mlastrat_convert_layer(const AttnLayer *gqa, const MlastratOpts *s, const TmlaOpts *o, int R, const double *Sigma,
                           const double *mu, AttnLayer **mla, TmlaLayerReport *rep);
/* The whole model as tmla_convert does (the same TmlaResult: check, ppl, kv-cache, export, whose
 * refusal names what a DeepSeek-V3 checkpoint cannot hold); r->kv_rank is the mean rank (alloc care
 * keeps the budget), r->rope_dim the RoPE dims of the shared key. */
int mlastrat_convert(Model *m, const TmlaOpts *o, const MlastratOpts *s, TmlaResult **out);

/* ================================================================ the strategies side by side */

typedef struct {
    const int *kv_ranks;      /* (n_ranks) R per layer (TMLA_FULL allowed) */
    size_t n_ranks;
    const MlastratOpts *strats;   /* (n_strats) rows of each rank's table */
    size_t n_strats;
    int rope_dim, freqfold;   /* TransMLA's (0: defaults); mha2mla keeps rope_dim / (2 G) pairs per head */
    int layer_lo, layer_hi;   /* converted layers (hi < 0: to the last) */
    const double *const *sigma;   /* per layer activation statistics (NULL entry: weights) */
    const double *const *mu;
    size_t eval_tokens;       /* random tokens of the error columns (0: 64) */
    uint64_t seed;
    const int *ids;           /* perplexity tokens (held out) */
    size_t n_ids, seqlen;
    int qk_norm;              /* a source's Q/K RMSNorm: TMLA_QKN_* as convert mla's (0: none given) */
    double (*norm_eps)(const TmlaResult *r);   /* the eps a row's norms run at (NULL or 0: the config's); as
                                 ppl runs the conversion: its export's where it has one */
    int (*run_layers)(TmlaResult *r, mm_compute c, AttnLayer *const **layers);
                              /* the layers a row's perplexity runs in the pass's mode c (NULL: r's own), as ppl runs the
                                 conversion: mla_run_for (mla_export.h), in compute bf16 its BF16 export's */
} MlastratTableOpts;

typedef struct {
    int kv_rank;              /* R asked (the mean over the layers under alloc care) */
    MlastratOpts strat;
    int rope_dim;             /* RoPE dims of the shared key */
    double kv_values;         /* values cached per token per layer: mean R + D */
    int rank_min, rank_max;   /* over the converted layers */
    double score_err, out_err;    /* means over the converted layers (relative Frobenius, as check) */
    double nll;               /* log-perplexity with the layers swapped in */
} MlastratRow;

typedef struct {
    double base_nll;
    size_t tokens;
    size_t n;
    MlastratRow *rows;        /* rank-major: each rank's strategies in the order given */
} MlastratTable;

void mlastrat_table_free(MlastratTable *t);
/* Converts the layers per rank and strategy, measures errors and perplexity (f: fwd_model's forward
 * pass, left without overrides); al_progress("variant"). */
int mlastrat_table(Forward *f, const MlastratTableOpts *o, MlastratTable **out);

#endif
