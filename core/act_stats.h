/* act_stats.h -- activation statistics of the attention input for the activation-based TransMLA
 * (seed 003, 4.2-4.3, App. D: "WX-based" PCA): per layer the second moment E[x xᵀ] and the mean
 * E[x] of the normalized attention input x (the x of x @ W_Q), accumulated in double precision
 * as the forward pass streams it (FWD_ATTN_IN hooks), so calibration never stores activations.
 *
 * Every covariance TransMLA needs is a linear image of these: keys k = x W_K + b_K have
 * E[k kᵀ] = W_Kᵀ Σ W_K + W_Kᵀ μ b_Kᵀ + b_K μᵀ W_K + b_K b_Kᵀ, and so on for values, the joint
 * [K_nope ; V] features and queries. RoRoPE's PCA reads C_re + C_im of each frequency, which RoPE
 * leaves unchanged, so the keys' statistics before RoPE serve it exactly.
 *
 * Memory: n_layers x hidden² doubles (a 4096-wide 32-layer model: 4.3 GB); only the layers in
 * [layer_lo, layer_hi] are kept. The calibration module's G_X (core/calib.h) carries the same
 * second moment without the mean; acts_from_calib imports it. */
#ifndef AL_ACT_STATS_H
#define AL_ACT_STATS_H

#include "calib.h"
#include "forward.h"

typedef struct ActStats {
    int n_layers;             /* of the model */
    int hidden;               /* width of the attention input */
    int layer_lo, layer_hi;   /* the layers accumulated (others have NULL sums) */
    bool has_mean;            /* sum_x is accumulated (false when imported from calib) */
    size_t *tokens;           /* (n_layers) rows accumulated per layer */
    double **sum_xx;          /* (n_layers) -> (hidden, hidden) Σ x xᵀ, upper triangle (dsyrk) */
    double **sum_x;           /* (n_layers) -> (hidden) Σ x, or NULL without the mean */
    double *buf;              /* scratch: a block of rows in double */
    size_t buf_cap;
} ActStats;

/* Zeroed statistics for layers [lo, hi] (hi < 0: to the last) of a model with n_layers layers of
 * width hidden. Caller frees with acts_free. */
int acts_new(int n_layers, int hidden, int lo, int hi, ActStats **out);
void acts_free(ActStats *s);

/* Accumulates T rows of layer's attention input (row t at x + t * ld, hidden floats). Layers
 * outside [lo, hi] are ignored. */
int acts_add(ActStats *s, int layer, const float *x, size_t T, size_t ld);
/* The forward-pass hook (ud = ActStats *): FWD_ATTN_IN chunks go to acts_add. */
int acts_hook(const FwdAct *a, void *ud);

/* Runs nseq sequences of seqlen tokens (tokens[i * seqlen ...]) through f as fresh sequences,
 * accumulating into s. Progress "sequence"; Ctrl-C returns AL_INTERRUPTED with what was
 * accumulated (a sequence is accumulated in every layer or, when interrupted inside it, only
 * in the layers it reached). f's hooks are removed afterwards. */
int acts_run(ActStats *s, Forward *f, const int *tokens, size_t nseq, size_t seqlen);

/* E[x xᵀ] of layer (hidden x hidden, full symmetric, row-major, caller frees). An error when the
 * layer holds no tokens. */
int acts_sigma(const ActStats *s, int layer, double **out);
/* E[x] of layer (hidden, caller frees); *out is NULL (AL_OK) when the mean is not kept. */
int acts_mean(const ActStats *s, int layer, double **out);

/* Per-layer arrays for TmlaOpts.sigma / .mu (n_layers entries each; NULL outside [lo, hi] and
 * for mu when there is no mean). Free with acts_free_arrays. */
int acts_arrays(const ActStats *s, double ***sigma, double ***mu);
void acts_free_arrays(int n_layers, double **sigma, double **mu);

/* Imports the attention-input second moment of calibration statistics that have it (st->has_x;
 * no mean). Caller frees. */
int acts_from_calib(const CalibStats *st, ActStats **out);

#endif
