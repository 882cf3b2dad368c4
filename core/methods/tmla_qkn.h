/* tmla_qkn.h -- TransMLA on a source with Q/K RMSNorm (Qwen3, Gemma 3: per head; OLMo 2, MiniMax-M2:
 * over the whole projection): the plain GQA layer `convert mla` factors in its place (fold, drop), or the
 * source layer with its keys and values rebuilt from that conversion's cache (keep).
 *
 * The norm makes each q / k a nonlinear function of x: k_g = w ⊙ (x W_K,g + b_g) / sqrt(ms_g(x) + eps),
 * ms_g the mean square over the group's coordinates (a head's d, or the whole G d projection). An MLA
 * latent c = x W_KVA is linear in x, so no latent caches these keys exactly. Two plain layers:
 *
 *   fold  the gain w (1 + w on Gemma) folded into the projection's columns (exact: the gain acts before
 *         RoPE, on the projection's output) and the per-token 1/sqrt(ms_g + eps) replaced by the constant
 *         1/sqrt(E[ms_g] + eps), E[ms_g] = (tr(W_gᵀ Σ W_g) + 2 muᵀ W_g b_g + |b_g|²) / n_g under the
 *         input's second moment Σ and mean mu (the calibration activations, or unit variance): the
 *         norm's scale at the calibrated distribution. The error left is the spread of each token's
 *         RMS around it (zero only where every token's RMS is the same).
 *   drop  the norm removed (gain and scale): the naive baseline the fold is measured against.
 *
 * Both are plain GQA layers: the conversion of either is a DeepSeek-V3 layer that stock engines run
 * (the approximation baked into the weights). The report's errors are measured against the SOURCE
 * layer with its norm (tmla_qkn_measure), not against the plain layer. */
#ifndef AL_TMLA_QKN_H
#define AL_TMLA_QKN_H

#include "attn_eval.h"

/* keep (issue 30): the norm kept on keys reconstructed from the cache. The cache is that of fold's MLA
 * conversion, z = [c ; k_pe] = x W_KVA + b_KVA (r + D values per token); the keys and values are rebuilt from it in
 * the source's coordinates by least squares under the statistics, [k ; v] ~ z P with P = (W~_Aᵀ S W~_A)^+ W~_Aᵀ S W~_T
 * (W~: the weights with the bias as a last row, S: the second moment of [x, 1]), and the source's norm (gain and each
 * token's RMS), then RoPE at the source's frequencies on every rotary dim, act on them as in the source; queries are
 * the source's with their norm. Exact at full kv rank (z spans every key and value); not absorbable (the per-token
 * norm sits between the cache and the scores), so no stock engine: the conversion runs in the session only. */
typedef enum { TMLA_QKN_NONE, TMLA_QKN_FOLD, TMLA_QKN_DROP, TMLA_QKN_KEEP } tmla_qkn_mode;

/* True for the modes whose conversion is a plain MLA layer (fold, drop): DeepSeek-V3's q/k-norm gap does not apply. */
static inline bool tmla_qkn_is_plain(int mode) { return mode == TMLA_QKN_FOLD || mode == TMLA_QKN_DROP; }

/* "none", "fold", "drop". */
const char *tmla_qkn_name(tmla_qkn_mode k);
/* One line saying what mode does to the source's norm (for reports). */
const char *tmla_qkn_words(tmla_qkn_mode k);

/* The plain GQA layer of src under mode (Sigma: hidden x hidden second moment of the input, NULL:
 * identity; mu: its mean, NULL: zero). *out is NULL (nothing to do) when src has no Q/K norm; an
 * error when it has one and mode is TMLA_QKN_NONE. Caller frees. */
int tmla_qkn_plain(const AttnLayer *src, tmla_qkn_mode mode, const double *Sigma, const double *mu, AttnLayer **out);

/* keep: the source layer src (with its q/k norm) whose keys and values are rebuilt from the cache of mla (fold's MLA
 * conversion of src) by the least squares above, under Sigma / mu (NULL: identity / zero). A GQA layer (caller frees). */
int tmla_qkn_keep(const AttnLayer *src, const AttnLayer *mla, const double *Sigma, const double *mu, AttnLayer **out);
/* Parameters of a keep layer L whose cache holds `cache` values per token: its query, norms and output, W_KVA (hidden,
 * cache) and the reconstruction (cache, G (d + dv)) -- not the materialised W_K, W_V it is evaluated with. */
size_t tmla_qkn_keep_params(const AttnLayer *L, size_t cache);

/* Relative score and output errors of mla against src (with its norm) on the report's inputs X (T,
 * hidden), positions 0..T-1. */
int tmla_qkn_measure(const AttnLayer *src, const AttnLayer *mla, const Mat *X, double *score_err, double *out_err);

#endif
