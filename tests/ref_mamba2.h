/* ref_mamba2.h -- an independent float64 reference forward pass of the Mamba-2 hybrids (nemotron_h,
 * granitemoehybrid) for the tests, written from transformers' modeling_nemotron_h.py and
 * modeling_granitemoehybrid.py (BambaMixer, GraniteMoeSharedMoE), not from core/model/forward.c or mamba2.c.
 *
 * It reads config.json (cJSON) and one model.safetensors by the real tensor names and computes every position's
 * logits of one sequence in double. The Mamba-2 mixer is computed in its quadratic ("attention-like", SSD dual)
 * form, y_t = sum_{s <= t} (C_t . B_s) exp(sum_{s < r <= t} dt_r A) dt_s x_s + D x_t, as the chunked torch_forward's
 * diagonal blocks do, not by the recurrence attnlab runs. Nemotron-H's grouped routing (n_group > 1), latent experts
 * and RoPE attention (Granite's position_embedding_type "rope") are not covered (an error names them). */
#ifndef AL_REF_MAMBA2_H
#define AL_REF_MAMBA2_H

#include <stddef.h>

typedef struct RefMamba RefMamba;

int refm_open(const char *dir, RefMamba **out);
void refm_free(RefMamba *m);
size_t refm_vocab(const RefMamba *m);
/* Logits of every position of tokens[0..T) (logits: T x vocab, row-major). */
int refm_logits(RefMamba *m, const int *tokens, size_t T, double *logits);
/* Mean negative log-likelihood (nats) of tokens[1..T) given their prefixes. */
int refm_mean_nll(RefMamba *m, const int *tokens, size_t T, double *nll);
/* Switches features off (REFM_*; 0: none) so that a test can show its checks see each: the D skip, the causal
 * conv (its taps on earlier tokens), the gated norm's groups (one group over all heads), Granite's
 * residual_multiplier, the SSM's decay across tokens (each token's state alone), Nemotron-H's routing bias. */
enum { REFM_NO_D = 1, REFM_NO_CONV_PAST = 2, REFM_ONE_NORM_GROUP = 4, REFM_NO_RESIDUAL_MULT = 8, REFM_NO_STATE = 16,
       REFM_NO_ROUTE_BIAS = 32 };
void refm_ablate(RefMamba *m, unsigned what);

#endif
