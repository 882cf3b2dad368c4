/* mamba2.h -- the Mamba-2 token mixer of the Mamba-2 hybrids' SSM layers (Nemotron-H, Granite 4.0-H), as
 * transformers' NemotronHMamba2Mixer / BambaMixer torch_forward computes it: in_proj's row [z | x B C | dt]
 * (I = H P, C = I + 2 G N), a causal depthwise conv1d (with bias) and SiLU over x B C, then per head h of group
 * g = h / (H / G)
 *     dt = max(softplus(dt + dt_bias), dt_min);  A = -exp(A_log)
 *     S <- exp(dt A) S + dt x Bᵀ;   y = S C + D x                   (S: P x N)
 * and the gated RMSNorm: y silu(z), normalised over each of norm_groups groups of I / norm_groups values
 * (Nemotron-H: n_groups groups; Granite: one), times w. The state (the conv's last K - 1 inputs and S) carries
 * a sequence across calls. core/model/forward.c applies in_proj and out_proj. */
#ifndef AL_MAMBA2_H
#define AL_MAMBA2_H

#include <stdbool.h>
#include <stddef.h>

#include "linattn.h"

typedef struct {
    size_t H, P, G, N, K;          /* heads, head dim, groups, state size, conv kernel */
    size_t norm_groups;            /* the gated norm's groups (divides H P) */
    double eps, dt_min;            /* the gated norm's epsilon; dt's floor (Nemotron-H: time_step_min; else 0) */
    const float *conv, *conv_b;    /* (C, K): conv1d.weight [C, 1, K]; (C) its bias or NULL */
    const float *a_log, *d, *dt_bias;   /* (H) */
    const float *norm;             /* (H P): the gated RMSNorm's weight */
} Mamba2W;

typedef RecurState Mamba2State;   /* linattn.h's: conv (K - 1, C), S (H, P, N) */

/* Channels of the conv (I + 2 G N) and width of in_proj's rows (2 I + 2 G N + H). */
size_t mamba2_conv_dim(const Mamba2W *w);
size_t mamba2_in_dim(const Mamba2W *w);
/* Allocates a zero state (AL_ERR when out of memory); mamba2_state_free frees it. */
int mamba2_state_new(const Mamba2W *w, Mamba2State *st);
void mamba2_state_zero(const Mamba2W *w, Mamba2State *st);
void mamba2_state_free(Mamba2State *st);
/* T tokens: p (T, mamba2_in_dim) rows of in_proj into out (T, H P), the input of out_proj; advances st. */
int mamba2_run(const Mamba2W *w, Mamba2State *st, const float *p, size_t T, float *out);

#endif
