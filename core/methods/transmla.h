/* transmla.h -- TransMLA (seed 003): converting a GQA attention layer with RoPE into DeepSeek-V3
 * style MLA, one step per function, and the data of its two figures.
 *
 * Notation (row-vector convention, x @ W): H query heads, G KV heads of dim d (values dv),
 * hidden size D_m. The merged key is k = x W_K + b_K (G d values, head-major: coordinate g d + e);
 * the merged value v = x W_V + b_V (G dv).
 *
 *   1. tmla_merge        all KV heads become one latent head (4.1): exact.
 *   2. tmla_rorope       RoRoPE (4.2, App. B) with FreqFold M (App. C): for each group of M
 *                        adjacent RoPE frequencies one orthogonal rotation across the (M G) key
 *                        coordinates of that group, the SAME for the real and the imaginary dims,
 *                        from the PCA of (C_re + C_im). Exact for M = 1; for M > 1 every
 *                        component of a group turns at the group's first frequency (the collapse
 *                        that lets a standard RoPE of D = d/M dims carry every M-th frequency).
 *   3. tmla_remove_rope  the first D rotated coordinates keep RoPE; the rest lose it (the first
 *                        approximation).
 *   4. tmla_balance, tmla_joint_lowrank   KV balancing (4.3, App. D): alpha = RMS NoPE key /
 *                        RMS value; one PCA basis R_KV of rank R for [K_nope / alpha ; V], alpha
 *                        folded back into the key up-projection (the second approximation).
 *   5. tmla_fold_scale   the q.k head dim becomes nope + D: the softmax scale correction is folded
 *                        into the query so the scores are unchanged.
 *
 * Partial rotary (GPT-NeoX rotary_pct, Phi-3 partial_rotary_factor): the first rd = rope_dim of
 * each head's d dims turn (AttnLayer's convention), the other d - rd never do. The dims map of the
 * merged key: coordinate g d + e is rotary for e < rd (pair l = e mod rd/2, real for e < rd/2 with
 * rotate_half), NoPE otherwise. RoRoPE rotates the G rd rotary coordinates only (U's first G rd
 * columns, pairs of equal frequency); U's last G (d - rd) columns are the source's NoPE
 * coordinates unchanged, so they join the joint latent with the rotary coordinates RoPE removal
 * drops and with V (the NoPE part of MLA, seed 000 A.3); each query's NoPE dims pair with them
 * through the absorbed q_nope = q_h. Exact at full kv rank with D = G rd (every rotary coordinate
 * keeps RoPE); D = rd / M keeps one standard RoPE head. Energies of steps 2-3 are fractions of
 * the ROTARY key energy (the source's NoPE dims never had RoPE to lose).
 *   tmla_build materializes the MLA layer (attn_eval.h, DeepSeek-V3 layout) at any stage:
 *   per head q = [q_nope (d, the original query) ; q_pe (D)], k_nope_h = c W_KVB (the NoPE part of
 *   KV head g(h) in its own coordinates), one shared RoPE key, RoPE pairs stored interleaved.
 *   tmla_q_lowrank optionally factors the query through a latent of rank Rq.
 *
 * Every PCA takes its covariance as an INPUT: the second moment of its features. Here they come
 * from the weights (tmla_kv_cov_from_weights with Sigma = E[x xᵀ] of the layer's input, identity
 * when NULL: the paper's "W-based" variant); a calibration pass passes activation statistics
 * (core/analysis/calib.h's calib_input_arrays: Sigma and the mean mu = E[x], which matters with biases):
 * the features' second moments are then exactly those of the activations ("WX-based"). */
#ifndef AL_TRANSMLA_H
#define AL_TRANSMLA_H

#include "attn_eval.h"
#include "check_inputs.h"

#define TMLA_FULL (-1)     /* kv_rank: keep every direction of [K_nope ; V] */

/* ================================================================ one layer, step by step */

typedef struct TmlaLayer {
    AttnLayer *src;           /* the GQA layer (owned copy; the caller's own where src_borrowed) */
    bool src_borrowed;        /* tmla_convert_layer_stats borrows its gqa: tmla_layer_free leaves it */
    int H, G, d, dv, hidden;
    int rd;                   /* rotary dims per head (= src->rope_dim; d unless partial rotary) */
    double *U;                /* (G d, G d) orthogonal: column j is rotated key coordinate j, over merged
                                 coordinates g d + e; columns (2p, 2p+1), p < G rd / 2, are the (re, im)
                                 of pair p; columns G rd.. the source's NoPE coordinates (partial rotary) */
    double *pair_freq;        /* (G rd / 2) RoPE frequency of rotated pair p */
    double *key_energy;       /* (G d) diag(Uᵀ C_K U): key energy per rotated coordinate (NULL before
                                 tmla_rorope) */
    double key_total;         /* trace of C_K over the rotary coordinates (all of C_K unless partial) */
    double *group_eig;        /* (n_groups, M G) eigenvalues of C_re + C_im per FreqFold group, descending */
    int M;                    /* FreqFold: frequencies per PCA group (0 before tmla_rorope) */
    int D;                    /* rotated coordinates that keep RoPE (G rd until tmla_remove_rope) */
    double alpha;             /* KV balancing factor (1: off) */
    double *R_KV;             /* (n_J, R) joint basis of [K_nope / alpha ; V]; NULL = identity */
    int n_J, R;               /* n_J = (G d - D) + G dv */
    double joint_energy;      /* energy of the PCA input kept by R_KV (1 without truncation) */
    double q_mult;            /* softmax-scale correction folded into the query (1 until step 5) */
    double scale;             /* softmax scale of the built layer */
} TmlaLayer;

void tmla_layer_free(TmlaLayer *T);

/* Step 1: merges the KV heads of a GQA layer with RoPE (copies gqa). The result, built, is the
 * exact MLA form: D = G rd RoPE dims (pair (g, l) at frequency l), latent = the G dv values (and
 * the G (d - rd) NoPE key dims of a partial-rotary source). */
int tmla_merge(const AttnLayer *gqa, TmlaLayer **out);

/* Second moment of [k ; v] = x [W_K | W_V] + [b_K | b_V] for inputs with E[x xᵀ] = Sigma
 * (hidden x hidden, row-major; NULL: identity): (G d + G dv) square, caller frees. */
int tmla_kv_cov_from_weights(const AttnLayer *gqa, const double *Sigma, double **C_kv);
/* The same with E[x] = mu (hidden, NULL: zero) for the bias cross terms. */
int tmla_kv_cov_stats(const AttnLayer *gqa, const double *Sigma, const double *mu, double **C_kv);
/* Its key block C_K (G d square), caller frees. */
double *tmla_key_cov(const TmlaLayer *T, const double *C_kv);

/* Steps 2-3 (RoRoPE + FreqFold): M divides rd/2; C_K is the merged key's second moment (G d
 * square; only its rotary block is rotated). Rotated pair p = c n_groups + m holds component c of
 * group m (frequency of the group's first member), so the leading rd/M coordinates are component 0
 * of every group. */
int tmla_rorope(TmlaLayer *T, int M, const double *C_K);
/* Step 3: keeps RoPE on the first D rotated coordinates (even, 2 <= D <= G rd); the fraction of the
 * rotary key energy they hold goes to *kept (may be NULL). */
int tmla_remove_rope(TmlaLayer *T, int D, double *kept);

/* Reorders the rotated pairs by descending key energy (after tmla_rorope), so that keeping D RoPE
 * dims keeps the D / 2 strongest pairs of any group (the RoPE-removal curve; the export keeps the
 * rorope order, whose first d / M dims form a standard RoPE). */
int tmla_sort_pairs(TmlaLayer *T);
/* Without rotation: the merged pairs listed in pairs[n] (p = g rd/2 + l: KV head g, frequency l)
 * come first, the others after, each turning at its own frequency; key energies from C_K. Then
 * tmla_remove_rope(T, 2 n) keeps RoPE on exactly those pairs (MHA2MLA's partial RoPE). */
int tmla_select_pairs(TmlaLayer *T, const size_t *pairs, size_t n, const double *C_K);
/* MHA2MLA's per-head selection: for each KV head the r frequencies with the largest product of
 * query norm (RMS, summed over the group's query heads) and key norm, under inputs with second
 * moment Sigma and mean mu (NULL: unit variance, zero mean). pairs gets G r merged pair indices,
 * head by head, by frequency. */
int tmla_mha2mla_pairs(const AttnLayer *gqa, const double *Sigma, const double *mu, int r, size_t *pairs);
/* Fraction of the rotary trace of C_K that the first D coordinates of T's current basis hold (C_K
 * may come from other statistics than the basis did). */
double tmla_kept_energy(const TmlaLayer *T, const double *C_K);

/* Second moment of the joint PCA's features [K_nope ; V] (unscaled) from C_kv, through the
 * current rotation: (n_J square), caller frees. */
int tmla_joint_cov(const TmlaLayer *T, const double *C_kv, double **C_J);
/* Step 4a: alpha = sqrt(tr C_Knope / tr C_V) when on (1 when off, or when the NoPE keys hold no
 * energy: tr C_Knope <= 1e-12 tr C_K, e.g. identical KV heads). */
int tmla_balance(TmlaLayer *T, bool on, const double *C_J);
/* Step 4b: basis of the top R eigenvectors of the balanced C_J (R = TMLA_FULL: all n_J). */
int tmla_joint_lowrank(TmlaLayer *T, int R, const double *C_J);
/* Step 5: the built layer's scale becomes (nope + D)^-1/2 with the difference folded into q. */
int tmla_fold_scale(TmlaLayer *T);

/* Eigen-decomposition of the symmetric n x n matrix A (row-major; overwritten by the eigenvectors
 * as columns, each's largest entry positive), eigenvalues descending in w: the one every PCA here uses. */
int tmla_eig_desc(double *A, size_t n, double *w, const char *what);
/* The MLA layer of the current stage (caller frees). */
int tmla_build(const TmlaLayer *T, AttnLayer **mla);

/* Second moment of an MLA layer's queries (H (nope + rope) square) for inputs with E[x xᵀ] =
 * Sigma (NULL: identity); caller frees. */
int tmla_q_cov_from_weights(const AttnLayer *mla, const double *Sigma, double **C_q);
/* The same with E[x] = mu (NULL: zero). */
int tmla_q_cov_stats(const AttnLayer *mla, const double *Sigma, const double *mu, double **C_q);
/* Optional: factors the plain query W_Q of an MLA layer through a latent of rank Rq
 * (q_a_proj = W_Q P, q_b_proj = Pᵀ, P the top Rq eigenvectors of C_q; no latent norm). */
int tmla_q_lowrank(AttnLayer *mla, int Rq, const double *C_q);

/* ================================================================ whole model */

/* THE FreqFold default of TransMLA: `convert mla`, `convert mla-table` and the TransMLA figures
 * (`plot key-norms`, `plot kv-balance`) all use it when no freqfold / rope-dim is given, so one
 * layer shows one alpha. M = 1: D = rd RoPE dims, one head's rotary dims (every M divides rd/2). */
enum { TMLA_DEFAULT_FREQFOLD = 1 };

typedef struct {
    int kv_rank;              /* R, or TMLA_FULL */
    int rope_dim;             /* D; 0: rd / freqfold (rd: rotary dims of a head, d unless partial) */
    int freqfold;             /* M; 0: rd / rope_dim (TMLA_DEFAULT_FREQFOLD when neither is given) */
    bool balance;             /* KV balancing (default on) */
    bool compare_balance;     /* also measure the other balance setting for the report */
    int q_rank;               /* 0: plain q_proj */
    size_t eval_tokens;       /* random tokens for the error report (0: 64) */
    uint64_t seed;            /* of those inputs */
    int layer_lo, layer_hi;   /* layers to convert (hi < 0: all); the others are not converted */
    const double *const *sigma;   /* NULL, or per layer (n_layers entries) the second moment E[x xᵀ]
                                     (hidden x hidden) of the layer's attention input, e.g. from
                                     calibration activations; a NULL entry: unit variance (weights) */
    const double *const *mu;      /* NULL, or per layer E[x] (hidden) beside sigma (NULL entry: zero
                                     mean); only read where sigma is given */
    const struct CalibStats *calib;   /* with sigma NULL: the calibration whose attention-input second
                                         moment and mean (calib_second_moment / calib_mean: the same
                                         values as sigma, mu) each layer forms for itself and frees,
                                         so no array of every layer's hidden^2 doubles is held */
    int (*moments_seen)(void *ctx, int l, const double *sigma, const double *mu);
                              /* NULL, or called with each layer's moments formed from calib (sigma (hidden, hidden),
                                 mu (hidden) or NULL), in layer order, before they are used: the caller's digest of
                                 them (commands/ws_check.c) without forming them a second time; an error stops */
    void *moments_ctx;        /* moments_seen's ctx */
    int qk_norm;              /* tmla_qkn_mode (tmla_qkn.h): a source with Q/K RMSNorm converts its norm
                                 folded (fold) or dropped (drop); none refuses such a source */
    bool hold_bf16;           /* compute bf16 on a source whose default export is BF16 (tmla_hold_bf16_default): the
                                 rewritten matrices held in BF16 as that export stores them (tmla_hold.h); W_O is
                                 borrowed from the source's o_proj either way */
    int lanes;                /* layers converted at a time (tmla_lanes.h; 0: two where there are two cores); the
                                 result is the same bit for bit whatever the count */
    char strategy[48];        /* "": TransMLA's own; else the one-shot strategy that built the layers
                                 (mla_strategy.h: "care", "mha2mla-2norm", ...), which the export records */
} TmlaOpts;

/* Defaults: full rank, M = TMLA_DEFAULT_FREQFOLD, D = rd / M, balance on with the comparison, 64
 * tokens. */
TmlaOpts tmla_opts_default(void);

typedef struct {
    int layer;
    double alpha;             /* balancing factor used (1 when off) */
    double rope_energy;       /* rotary key energy kept in the D RoPE dims (fraction) */
    double joint_energy;      /* energy kept by the rank-R joint basis (fraction of its input) */
    double score_err;         /* relative error of the causal scores on random inputs (standard normal,
                                 or Gaussian with the layer's given second moment and mean) */
    double out_err;           /* relative error of the attention outputs */
    double joint_energy_alt;  /* the same with balancing flipped (NaN when not compared) */
    double score_err_alt;
    double out_err_alt;
    double qkn_score_err;     /* a source with Q/K RMSNorm: its plain layer (tmla_qkn.h: fold or drop) alone
                                 against the source, before TransMLA (NaN without a q/k norm) */
    double qkn_out_err;
} TmlaLayerReport;

typedef struct TmlaResult {
    Model *src;               /* the model converted (borrowed: must outlive the result) */
    char *src_path;           /* its path, for the export manifest */
    TmlaOpts opts;            /* as resolved: kv_rank, rope_dim, freqfold all set; sigma, mu NULL */
    bool activation_stats;    /* some layer's PCAs used a given input second moment */
    CheckInputs check_in;     /* the report's inputs for `check` (check_inputs.h: seed, tokens, the
                                 statistics and their digest; set by the command; tokens 0: not
                                 set); owned, freed with the result */
    int n_layers;             /* = src layers; layers[l] NULL where not converted */
    AttnLayer **layers;       /* (n_layers) the converted MLA layers */
    TmlaLayerReport *rep;     /* (n_layers) */
    int head_dim, v_dim, kv_rank, rope_dim, qk_nope, q_rank;
    size_t kv_before, kv_after;       /* values cached per token per layer */
    size_t params_before, params_after;   /* attention parameters of the converted layers */
    AttnLayer **run;          /* (n_layers) or NULL: the layers the session runs for ppl, generate and the perplexity
                                 after (mla_run_layers: compute bf16, every layer converted, a DeepSeek-V3 export:
                                 the BF16 export's layers as it reads back, latent norms and scaled W_KVA in BF16,
                                 their other held matrices borrowed from layers[]); NULL: layers[] themselves */
    AttnLayer **run_bf16;     /* (n_layers) or NULL: with run NULL (a conversion made in compute f32), its BF16 export's
                                 layers as run in compute bf16, built on first use (mla_run_for) */
    bool run_none;            /* mla_run_for found no DeepSeek-V3 export of this conversion: layers[] run */
    int lanes;                /* the layers converted at a time (tmla_lanes_count) */
    double solve_s, solve_cpu_s;  /* wall and process-CPU seconds of tmla_convert's layer loop (each source
                                     layer read, its PCAs, build and report): the pipeline's solve time */
} TmlaResult;

void tmla_result_free(TmlaResult *r);
/* Checks that m can be converted (GQA family with RoPE, full or partial, what analysis_check(m,
 * AN_CONVERT_MLA) accepts; rope_dim and freqfold count the rotary dims rd of a head) and
 * resolves the options against its dims (errors say which value is wrong and what would fit). */
int tmla_resolve_opts(const Model *m, TmlaOpts *o);
/* Converts the layers of m; al_progress("layer") per layer; AL_INTERRUPTED keeps nothing. */
int tmla_convert(Model *m, const TmlaOpts *o, TmlaResult **out);
/* A NoPE layer of a RoPE model (SmolLM3's no_rope_layers) made a RoPE layer of c's rotary dims whose
 * frequencies are all 0 (a rotation by 0 is the identity: the layer computes what it did), so the
 * conversion keeps one layout over every layer; other layers are left as they are. */
int tmla_nope_as_rope(const ModelConfig *c, AttnLayer *gqa);
/* One layer with the whole pipeline and its report (Sigma NULL: identity). */
int tmla_convert_layer(const AttnLayer *gqa, const TmlaOpts *o, const double *Sigma, AttnLayer **mla,
                       TmlaLayerReport *rep);
/* The same with the input mean mu (NULL: zero). */
int tmla_convert_layer_stats(const AttnLayer *gqa, const TmlaOpts *o, const double *Sigma, const double *mu,
                             AttnLayer **mla, TmlaLayerReport *rep);
/* The report's inputs of a layer: T standard normal rows from seed, or Gaussian with second
 * moment Sigma and mean mu (NULL: zero) when Sigma is given; what `check` reuses to reproduce the
 * report. Caller frees. */
Mat *tmla_eval_inputs(size_t T, int hidden, uint64_t seed, const double *Sigma, const double *mu);

/* ================================================================ figures' data */

/* TransMLA Figure 3a: RMS of each key dimension under inputs with second moment Sigma (NULL:
 * unit variance, i.e. the row norm of the key projection), real and imaginary halves apart. Pair p
 * of the merged head: original (head-major, p = g rd/2 + l), after RoRoPE (M = 1) and after RoRoPE
 * + FreqFold M (component-major, p = c n_groups + m). */
typedef struct {
    size_t n_pairs;           /* G rd / 2 */
    size_t pairs_per_head;    /* rd / 2 */
    int M;
    double *orig_re, *orig_im;    /* (n_pairs) each */
    double *rot_re, *rot_im;
    double *fold_re, *fold_im;
} TmlaKeyNorms;

void tmla_key_norms_free(TmlaKeyNorms *k);
int tmla_key_norms(Model *m, int layer, int freqfold, const double *Sigma, TmlaKeyNorms **out);
/* The same with the input mean mu (activation statistics; NULL: zero). */
int tmla_key_norms_stats(Model *m, int layer, int freqfold, const double *Sigma, const double *mu, TmlaKeyNorms **out);

/* The key-energy side of Figure 3b (its perplexity side is tstudy_rope_removal, core/methods/tmla_study.h): key
 * energy kept in the RoPE dims against RoPE dims kept (under Sigma, NULL: weights), one curve per
 * FreqFold M (keeping k components per group: k rd / M dims), and a baseline without rotation that
 * keeps, for every frequency, the pairs of the k strongest KV heads (k rd dims; MHA2MLA-like);
 * fractions of the rotary key energy. */
typedef struct {
    int M;                    /* 0: the no-rotation baseline */
    size_t n;
    double *dims;             /* (n) RoPE dims kept */
    double *energy;           /* (n) fraction of the key energy kept */
} TmlaRopeCurve;

typedef struct {
    size_t n_curves;
    TmlaRopeCurve *curves;
} TmlaRopeEnergy;

void tmla_rope_energy_free(TmlaRopeEnergy *e);
/* Curves for each M in Ms that divides rd/2 (others are an error), plus the baseline. */
int tmla_rope_energy(Model *m, int layer, const int *Ms, size_t nM, const double *Sigma, TmlaRopeEnergy **out);
/* The same with the input mean mu (NULL: zero). */
int tmla_rope_energy_stats(Model *m, int layer, const int *Ms, size_t nM, const double *Sigma, const double *mu,
                           TmlaRopeEnergy **out);

#endif
