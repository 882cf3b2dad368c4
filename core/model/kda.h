/* kda.h -- Kimi Delta Attention, the token mixer of Kimi-Linear's linear-attention layers, as its remote
 * code modeling_kimi.py (KimiDeltaAttention) computes it with fla's kernels: q, k, v each through a causal
 * depthwise conv1d (ShortConvolution, no bias) and SiLU; q and k L2-normalised per head (q also times
 * d^-1/2); a decay per channel g = -exp(A_log[h]) softplus(f_b(f_a(x)) + dt_bias) (fused_kda_gate);
 * beta = sigmoid(b_proj(x)); per head the gated delta rule with that per-channel decay
 *     S <- diag(exp(g)) S;  S <- S + k ((v - Sᵀk) beta)ᵀ;  o = Sᵀ q          (S: d x d, rows the key dims)
 * and o_norm (FusedRMSNormGated, sigmoid): o * rsqrt(mean(o²) + eps) * w * sigmoid(g_b(g_a(x))). The
 * state (the convs' last kernel-1 inputs and S) is linattn.h's, of H key and value heads of d; core/model/
 * forward.c applies the projections and o_proj. */
#ifndef AL_KDA_H
#define AL_KDA_H

#include <stddef.h>

#include "linattn.h"

typedef struct {
    size_t H, d, K;                /* heads, head dim, conv kernel */
    double eps;                    /* o_norm's epsilon (rms_norm_eps) */
    const float *conv;             /* (3 H d, K): the rows of q_conv1d, k_conv1d, v_conv1d [H d, 1, K] in turn */
    const float *a_log;            /* (H): A_log (1, 1, H, 1) */
    const float *dt_bias;          /* (H d) */
    const float *norm;             /* (d): o_norm's weight */
} KdaW;

/* The dims of w's state as linattn.h's (H key and value heads of d, conv channels 3 H d), for
 * linattn_state_new / _zero. */
LinAttnW kda_state_dims(const KdaW *w);
/* T tokens: qkv (T, 3 H d) rows [q | k | v] as the projections give them, fg (T, H d) = f_b(f_a(x)),
 * b (T, H) = b_proj(x), og (T, H d) = g_b(g_a(x)) into out (T, H d), the input of o_proj; advances st. */
int kda_run(const KdaW *w, LinAttnState *st, const float *qkv, const float *fg, const float *b, const float *og,
            size_t T, float *out);

#endif
