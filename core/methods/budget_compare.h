/* budget_compare.h -- every KV-cache reduction of the seeds on one model at one budget: for a budget of B
 * values cached per token per layer, the attention-output error per layer of
 *   farr       FaRR truncation of the cached dims (seed 000): the V dims of each KV group through
 *              the group's stacked V·O map (W_V'[g] = U_r, W_O'[h] = U_rᵀ W_V[g] W_O[h]); where the
 *              model has no RoPE, the K dims too through the stacked Q·Kᵀ map. Keys under RoPE are
 *              kept whole (seed A.3), so B must hold them: G d + G r_v. Biases ride along as one
 *              more input row (x -> [x, 1]), so the truncation stays exact at full rank.
 *   transmla   TransMLA (seed 003) with balanced KV and its best FreqFold: for every M dividing
 *              rd/2, D = rd/M RoPE dims (rd: the rotary dims of a head, d unless partial rotary,
 *              whose NoPE dims join the latent) and kv_rank R = B - D; the M with the lowest output error on
 *              the fit tokens (KQ-SVD's), then measured on the evaluation tokens. Needs RoPE. With
 *              G > 1 it is in general not exact at any B: its one shared RoPE key of D <= d dims
 *              leaves the other G d - D key dims without rotation (seed 003, 4.2), exact only when
 *              RoRoPE leaves them no energy (identical KV heads, say).
 *   kqsvd      KQ-SVD (seed 001, Theorem 2 with the GQA stacking of Theorem 5; values by the
 *              output variant of Appendix B): rank R_K / R_V projections of each KV head's cached
 *              keys (after RoPE, on the rotary dims of a partial-rotary head) and values: G (R_K + R_V)
 *              values, at the budget's ranks (refit at every B, like every other method): from the
 *              Grams of the session's calibration (BudgetOpts.calib: real text), else of FIT random
 *              tokens. The projections `kvsvd learn kqsvd` made (BudgetOpts.kq) are reused only in a
 *              layer where their ranks are exactly the budget's, and the row says so.
 *   tpa-a      non-contextual TPA form a (seed 004, core/methods/tpa.h): R_K d + R_V dv values.
 *   tpa-b      non-contextual TPA form b: (R_K + R_V) G values.
 *   mean-pool  the simple baseline: KV heads averaged into G' groups (G' the largest divisor of G
 *              with G' (d + dv) <= B; query heads regrouped in order), as GQA is initialised from
 *              MHA checkpoints.
 * Two ranks (K and V) are filled alternately, one unit at a time, while the budget allows and
 * below each side's limit, so both sides get about half. A method that cannot meet B (FaRR with
 * RoPE below G (d + 1), TransMLA without RoPE or below D + 1, mean-pool below d + dv, ...) gets a
 * row with no error and the reason; so does a method the layer's output gate (Qwen3.5) or Q/K RMSNorm does not
 * pass through ("not applicable: ..."; TransMLA converts a Q/K-norm layer with the norm folded, tmla_qkn.h).
 * Budgets at or above the model's own cache give exact rows (all
 * but TransMLA's, see above).
 *
 * Errors are relative Frobenius errors ||b - a|| / ||a|| (unsquared) of the causal attention
 * scores and of the layer's output (after W_O and its bias) on T random Gaussian tokens at
 * positions 0..T-1 drawn with BudgetOpts.seed (reported in BudgetResult.seed), the same tokens for every
 * method; KQ-SVD without a calibration learns from other tokens of the same law (seed + 1). Without
 * calibration the tokens have unit variance and the weight-based fits (FaRR, TransMLA, TPA) are
 * optimal for them in expectation. With a layer's input second moment Sigma (calibration), the
 * tokens are drawn with that second moment and TransMLA and TPA fit with it (FaRR and mean-pool
 * stay weight-based: seed 000 fuses weights). Scores of methods that rotate or rescale the query
 * (TransMLA) compare as logits, the same as the model's. A sliding window (per layer) and a score
 * soft-cap of the model apply to every method's layer as to the reference: compare exports
 * nothing, so what an export format cannot hold does not matter here. */
#ifndef AL_BUDGET_COMPARE_H
#define AL_BUDGET_COMPARE_H

#include "attn_eval.h"
#include "kqsvd.h"

typedef enum { BUDGET_FARR, BUDGET_TRANSMLA, BUDGET_KQSVD, BUDGET_TPA_A, BUDGET_TPA_B, BUDGET_MEANPOOL, BUDGET_NMETHODS } budget_method;

/* "farr", "transmla", "kqsvd", "tpa-a", "tpa-b", "mean-pool" (the tokens of `compare`'s method
 * column; prose writes FaRR, TransMLA, KQ-SVD, TPA). */
const char *budget_method_name(budget_method m);

typedef struct {
    size_t budget;            /* B: values cached per token per layer */
    int layer_lo, layer_hi;   /* inclusive; hi < 0: the last layer */
    size_t tokens;            /* evaluation tokens (0: 64) */
    size_t fit_tokens;        /* KQ-SVD's learning tokens (0: 256) */
    uint64_t seed;            /* of the evaluation tokens (0: a fixed default); fit tokens use seed + 1 */
    const double *const *sigma;   /* NULL, or per layer (n_layers entries) E[x xᵀ] (D x D) of the
                                     attention input (calibration); a NULL entry: unit variance */
    const CalibStats *calib;  /* NULL, or the session's calibration of the model: KQ-SVD's Grams */
    const KqProj *kq;         /* NULL, or KQ-SVD projections of the model (`kvsvd learn kqsvd`): reused
                                 where their ranks are the budget's */
} BudgetOpts;

BudgetOpts budget_opts_default(void);

typedef struct {
    int layer;
    budget_method method;
    bool ok;                  /* the method meets the budget on this model */
    size_t kv_values;         /* values it caches per token per layer (<= budget when ok) */
    char setting[128];        /* the ranks chosen ("r_v 12", "R 56 + D 8 (M 4)"), or why not */
    double score_err, out_err;    /* NaN when !ok */
} BudgetRow;

typedef struct {
    size_t budget;
    size_t kv_model;          /* the model's own cache per token per layer */
    size_t tokens;
    uint64_t seed;            /* of the evaluation tokens */
    bool activation_stats;    /* some layer used a given Sigma */
    int kq_from;              /* where KQ-SVD's projections came from in most layers: BUDGET_KQ_FIT
                                 (random tokens), BUDGET_KQ_CALIB (calibration Grams), BUDGET_KQ_LEARNED */
    int n_rows;
    BudgetRow *rows;             /* (layers x BUDGET_NMETHODS), layer-major */
} BudgetResult;

void budget_result_free(BudgetResult *r);

/* The rows of one GQA / MHA layer (rows: BUDGET_NMETHODS entries, caller's). X: evaluation inputs
 * (T x hidden) at pos; Xfit: KQ-SVD's learning inputs (and TransMLA's choice of FreqFold) at posfit; Sigma: the inputs' second moment
 * for TransMLA's and TPA's fits (NULL: unit variance). */
int budget_layer(const AttnLayer *L, size_t budget, const Mat *X, const int *pos, const Mat *Xfit, const int *posfit,
              const double *Sigma, BudgetRow *rows);

/* compare's `farr` row of one GQA / MHA layer at given ranks instead of a budget's: r_k (keys;
 * head_dim keeps them whole, as it must under RoPE) and r_v, on X at pos (`check` after `truncate`
 * prints it beside the working copy's errors). */
int budget_farr_layer(const AttnLayer *L, int rk, int rv, const Mat *X, const int *pos, BudgetRow *row);

/* Method k's version of layer L at budget B as a layer the forward pass runs (fwd_set_attn; *out the caller's,
 * attn_layer_free), fit on Xfit at posfit (TransMLA's FreqFold picked there) with Sigma (NULL: unit variance);
 * row: its setting, cache and errors on Xfit. Where k cannot meet B, or runs in no AttnLayer (kqsvd: its
 * projections act on the cached keys after RoPE), *out stays NULL and row says why (ok false). */
int budget_method_layer(const AttnLayer *L, size_t budget, budget_method k, const double *Sigma, const Mat *Xfit,
                        const int *posfit, AttnLayer **out, BudgetRow *row);

enum { BUDGET_KQ_FIT, BUDGET_KQ_CALIB, BUDGET_KQ_LEARNED };

/* Where KQ-SVD learns layer `layer` from (see the top): st (calibration Grams) and / or p (learned
 * projections), either NULL. */
typedef struct {
    const CalibStats *st;
    const KqProj *p;
    int layer;
} BudgetKqFrom;

/* budget_layer with KQ-SVD's projections from kq (NULL: Xfit); *kq_from (may be NULL) says which. */
int budget_layer_from(const AttnLayer *L, size_t budget, const Mat *X, const int *pos, const Mat *Xfit, const int *posfit,
                   const double *Sigma, const BudgetKqFrom *kq, BudgetRow *rows, int *kq_from);

/* Compares every method on layers [lo, hi] of m (GQA / MHA families the evaluator covers; MLA
 * is refused: it already caches a shared latent). al_progress("layer"); Ctrl-C between layers
 * returns AL_INTERRUPTED (nothing kept). */
int budget_compare(Model *m, const BudgetOpts *o, BudgetResult **out);

#endif
