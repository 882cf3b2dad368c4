/* linattn.h -- the Gated DeltaNet token mixer of hybrid models' linear-attention layers (Qwen3-Next),
 * as transformers' Qwen3NextGatedDeltaNet computes it: from the projections in_proj_qkvz / in_proj_ba
 * (grouped per key head), a causal depthwise conv1d with SiLU over [q | k | v], L2-normalised q and k
 * (q scaled by dk^-1/2), beta = sigmoid(b), the decay g = -exp(A_log) softplus(a + dt_bias), the
 * delta-rule recurrence per value head
 *     S <- exp(g) S;  S <- S + k ((v - Sᵀk) beta)ᵀ;  o = Sᵀ q          (S: dk x dv)
 * and the gated RMSNorm o * rsqrt(mean(o²) + eps) * w * silu(z). The state (the conv's last
 * kernel-1 inputs and S) carries a sequence across calls. core/model/forward.c applies out_proj. */
#ifndef AL_LINATTN_H
#define AL_LINATTN_H

#include <stdbool.h>
#include <math.h>
#include <stddef.h>

typedef struct {
    size_t Hk, Hv, dk, dv, K;      /* key heads, value heads, their dims, conv kernel */
    double eps;                    /* the gated norm's epsilon (rms_norm_eps) */
    const float *conv;             /* (2 Hk dk + Hv dv, K): conv1d.weight [C, 1, K] */
    const float *a_log, *dt_bias;  /* (Hv) */
    const float *norm;             /* (dv): the gated RMSNorm's weight (plain w, not 1 + w) */
    bool flat;                     /* rows [q | k | v | z] and [b | a] whole (Qwen3.5's split projections), not grouped
                                      per key head */
} LinAttnW;

/* A recurrent token mixer's state across calls (Gated DeltaNet, Kimi Delta Attention, Mamba-2). */
typedef struct {
    float *conv;                   /* (K - 1, C): the conv's last inputs, oldest first */
    double *S;                     /* the recurrent state: (Hv, dk, dv) here, (H, P, N) in mamba2.h */
} RecurState;
typedef RecurState LinAttnState;

/* Allocates a zero state of conv_floats conv values and s_doubles state values (AL_ERR when out of
 * memory); linattn_recur_zero zeroes it, linattn_recur_free frees it. */
int linattn_recur_new(RecurState *st, size_t conv_floats, size_t s_doubles);
/* The steps the three recurrent mixers share (linattn.c, kda.c, mamba2.c):
 * - linattn_conv_step: one token's C channels through the causal depthwise conv (weight (C, K), bias (C)
 *   or NULL) over st's last K - 1 inputs and this row, SiLU, into y; the conv state shifts by one;
 * - linattn_l2norm: x (n) times s / sqrt(sum x² + 1e-6) (transformers' / fla's l2norm);
 * - linattn_delta_step: the gated delta rule of one head, S (dk, dv) decayed row by row (decay[i], or
 *   decay_all for every row when decay is NULL), S += k (v - Sᵀk) beta, o (dv) = Sᵀ q. */
void linattn_conv_step(RecurState *st, const float *weight, const float *bias, size_t C, size_t K, const float *row,
                       double *y);
void linattn_l2norm(double *x, size_t n, double s);
void linattn_delta_step(size_t dk, size_t dv, double *S, const double *q, const double *k, const double *v,
                        const double *decay, double decay_all, double beta, double *o);
static inline double linattn_silu(double x) { return x / (1 + exp(-x)); }
static inline double linattn_softplus(double x) { return x > 20 ? x : log1p(exp(x)); }   /* torch: threshold 20 */
static inline double linattn_sigmoid(double x) { return 1 / (1 + exp(-x)); }
void linattn_recur_zero(RecurState *st, size_t conv_floats, size_t s_doubles);
void linattn_recur_free(RecurState *st);

/* Channels of the conv: 2 Hk dk + Hv dv. */
size_t linattn_conv_dim(const LinAttnW *w);
/* Allocates a zero state (AL_ERR when out of memory); linattn_state_free frees it. */
int linattn_state_new(const LinAttnW *w, LinAttnState *st);
void linattn_state_zero(const LinAttnW *w, LinAttnState *st);
void linattn_state_free(LinAttnState *st);
/* T tokens: qkvz (T, 2 Hk dk + 2 Hv dv), ba (T, 2 Hv) rows as the projections give them (per key head
 * [q | k | v | z] and [b | a], its r = Hv / Hk value heads together; with flat, [q | k | v | z] and
 * [b | a] whole) into out (T, Hv dv), the input of out_proj; advances st. */
int linattn_run(const LinAttnW *w, LinAttnState *st, const float *qkvz, const float *ba, size_t T, float *out);

#endif
