/* tmla_study.h -- the two TransMLA perplexity studies (seed 003): the RoPE-removal curve (Figure 3b)
 * and the W-based / activation-based, with / without KV balancing table (Figure 4b). Each variant
 * converts the chosen layers in memory and runs the model's real forward pass with them swapped in
 * (fwd_set_attn, core/model/forward.h): a DeepSeek-V3 checkpoint carries one standard RoPE of
 * qk_rope_head_dim dims, so only conversions keeping D = d / M RoPE dims can be exported (what
 * `convert mla` does), while the RoPE-removal curve keeps any number of rotated pairs, each at its
 * own frequency -- core/model/attn_eval.c evaluates such layers. Perplexities are fwd_ppl's windows.
 * Both studies leave the forward pass without overrides (fwd_clear_attn), and take models that
 * tmla_resolve_opts accepts (GQA with full RoPE). */
#ifndef AL_TMLA_STUDY_H
#define AL_TMLA_STUDY_H

#include "forward.h"
#include "transmla.h"

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
} TstudyRemovalOpts;

typedef struct {
    int M;                    /* FreqFold of a RoRoPE curve; 0: MHA2MLA */
    size_t n;
    double *removed;          /* (n) fraction of RoPE dims removed (as realized: whole pairs) */
    int *rope_dims;           /* (n) RoPE dims kept in the merged key (per KV head for MHA2MLA x heads) */
    double *energy;           /* (n) key energy kept in the RoPE dims, mean over the layers */
    double *nll;              /* (n) log-perplexity: mean NLL per predicted token */
} TstudyRemovalCurve;

typedef struct {
    double base_nll;          /* the original model's */
    size_t tokens;            /* predicted tokens per evaluation */
    size_t n_curves;
    TstudyRemovalCurve *curves;
} TstudyRemoval;

void tstudy_removal_free(TstudyRemoval *r);
/* Every RoRoPE curve keeps, per layer, the rotated pairs of largest key energy (FreqFold M: one
 * PCA per group of M frequencies, each group turning at its first frequency); the MHA2MLA curve
 * keeps per KV head the same number of frequencies (tmla_mha2mla_pairs). No KV compression: the
 * dims that lose RoPE stay as NoPE keys. Fractions are rounded to whole pairs (repeats dropped).
 * f runs fwd_model(f). al_progress("variant"); Ctrl-C: AL_INTERRUPTED, nothing kept. */
int tstudy_rope_removal(Forward *f, const TstudyRemovalOpts *o, TstudyRemoval **out);

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
    double norm_eps;          /* the eps the converted rows' norms run at (mla_export_norm_eps: as the
                                 export computes them); 0: the model's */
    int (*run_layers)(TmlaResult *r, mm_compute c, AttnLayer *const **layers);
                              /* the layers a row's perplexity runs in the pass's mode c (NULL: r's own), as ppl runs
                                 `convert mla`'s conversion: mla_run_for (mla_export.h), in compute bf16 its BF16
                                 export's as read back */
} TstudyKvTableOpts;

typedef struct {
    int kv_rank;
    bool act;                 /* activation-based (WX) PCAs; false: weights (W) */
    bool balance;             /* KV balancing */
    double alpha;             /* mean over the converted layers */
    double rope_energy;       /* key energy kept in the RoPE dims, under the activation statistics, mean */
    double joint_energy;      /* energy kept by the joint basis of its own PCA input, mean */
    double nll;               /* log-perplexity */
} TstudyKvRow;

typedef struct {
    double base_nll;
    size_t tokens;
    int rope_dim, freqfold;
    size_t n;
    TstudyKvRow *rows;           /* per rank: W, W + BKV, WX, WX + BKV */
} TstudyKvTable;

void tstudy_kv_table_free(TstudyKvTable *t);
/* Converts the layers four ways per rank and measures each perplexity with f (al_progress
 * "variant"). Each row is `convert mla kv-rank R [stats weights] [balance off]`'s conversion (tmla_convert) run
 * as run_layers gives it, so its perplexity is that command's `ppl` in the same compute mode. */
int tstudy_kv_table(Forward *f, const TstudyKvTableOpts *o, TstudyKvTable **out);

#endif
