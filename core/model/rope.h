/* rope.h -- the one RoPE and attention core: inverse frequencies (plain, linear, llama3, YaRN with
 * its attention factor), the rotation in both layouts (rotate_half pairs (j, j + d/2),
 * interleaved (2j, 2j + 1)), and THE causal softmax (optionally windowed and soft-capped). Used by
 * the evaluator (attn_eval), the forward pass, KQ-SVD, TPA, compare and FaRR. The softmax scale
 * of a layer is cfg_attn_scale (core/model/config.h).
 *
 * YaRN follows Hugging Face's DeepSeek / Qwen code: frequency j is interpolated between
 * f_j / factor and f_j with a linear ramp over pair indices [low, high] derived from beta_fast
 * and beta_slow; cos and sin are multiplied by the attention factor (attention_factor, else
 * mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set, else
 * mscale(factor, 1)), and DeepSeek's MLA also multiplies the softmax scale by
 * mscale(factor, mscale_all_dim)^2 (cfg_attn_scale). */
#ifndef AL_ROPE_H
#define AL_ROPE_H

#include "config.h"

/* theta^(-2j/dim), j < dim/2, into f. */
void rope_plain_freqs(int dim, double theta, double *f);
/* Refuses a scaling attnlab does not compute (longrope, unknown types, factor <= 0, llama3 with
 * high_freq_factor <= low_freq_factor), naming `where` and the type. */
int rope_scaling_check(const RopeScaling *s, const char *where);
/* The spec's frequencies for dim rotary dims at base theta (dim/2 values into f): plain, then
 * the scaling. For linear and llama3 the scaling depends on each frequency alone (the
 * frequencies of dim / M are every M-th of dim's); YaRN's ramp is over pair indices of dim. */
int rope_inv_freq(const RopeSpec *s, int dim, double theta, double *f, const char *where);
/* Phi-3's longrope (Hugging Face _compute_longrope_parameters): f_j = theta^(-2j/dim) / ext_j with
 * ext the long factors when the sequence (the last position of the call + 1) exceeds
 * original_max_position_embeddings, else the short ones; dim / 2 factors are required. The
 * forward pass computes it; rope_inv_freq and rope_scaling_check still refuse longrope (the
 * evaluator and the conversions use one set of frequencies for every length). */
int rope_longrope_freqs(const RopeScaling *s, int dim, double theta, bool long_seq, double *f, const char *where);
/* The factor YaRN and longrope multiply cos and sin with (1 for other scalings); longrope's is
 * attention_factor, else sqrt(1 + ln(factor) / ln(orig_max_pos)) when factor > 1. */
double rope_attention_factor(const RopeSpec *s);

/* Rotates `rows` vectors (row stride ld) of dim values to position pos: pair j turns by
 * pos * inv_freq[j]; the results are multiplied by mscale (1: plain). Double-precision angles. */
void rope_rotate_rows(float *X, size_t rows, size_t ld, int dim, rope_layout lay, const double *inv_freq, double pos,
                      double mscale);
/* G' = Rᵀ G R for K' = K R, R the rotation rope_rotate_rows applies at pos (G: k x k). */
void rope_rotate_gram(double *G, size_t k, rope_layout lay, const double *inv_freq, double pos);
/* cos / sin tables (T, half) of positions pos0 .. pos0+T-1 in float, times mscale. */
void rope_tables(float *cs, float *sn, size_t T, size_t pos0, const float *inv_freq, size_t half, float mscale);
/* Rotates one vector of 2 half values with one row of rope_tables. */
void rope_rotate_cs(float *v, size_t half, rope_layout lay, const float *cs, const float *sn);

/* THE causal softmax of one row s[0, n) of scaled logits: soft-capped first when softcap > 0
 * (softcap tanh(s / softcap)), softmax over keys [lo, hi], every other entry of [0, n) set to 0. */
void attn_softmax_row(float *s, size_t n, size_t lo, size_t hi, double softcap);
/* The same with a sink (gpt-oss): one more logit `sink`, unscaled and not soft-capped, joins the
 * row's softmax and its weight is dropped, so the row's weights sum to less than 1. */
void attn_softmax_row_sink(float *s, size_t n, size_t lo, size_t hi, double softcap, double sink);

/* StreamingLLM's row: keys [0, s0) (its attention sinks) and [lo, hi]; those between leave the softmax (weights
 * 0). s0 == 0: attn_softmax_row_sink over [lo, hi]. */
void attn_softmax_row_stream(float *s, size_t n, size_t s0, size_t lo, size_t hi, double softcap, double sink);

/* One query head's causal attention: what attn_head_causal reads and writes. */
typedef struct {
    const float *q; size_t ldq;    /* (T, d) query rows, row stride ldq */
    const float *K; size_t ldk;    /* (keys, d) keys, stride ldk */
    const float *V; size_t ldv;    /* (keys, dv) values, stride ldv */
    size_t T, pos0;                /* query rows at positions pos0 .. pos0 + T - 1 */
    size_t d, dv;                  /* query/key and value dims */
    double scale;                  /* on q.k */
    size_t window;                 /* sliding window in tokens; 0: full causal */
    size_t chunk;                  /* chunked attention (Llama 4): keys [p - p % chunk, p] only; 0: none */
    double softcap;                /* 0: none */
    bool has_sink; double sink;    /* the head's sink logit (attn_softmax_row_sink); has_sink false: none */
    size_t sink_tokens;            /* StreamingLLM: keys [0, sink_tokens) stay visible outside the window; 0: none */
    const unsigned char *keep;     /* token eviction: (T, ldkeep) row t's keys, 0: evicted (logit -inf); NULL: all */
    size_t ldkeep;
    size_t qb;                     /* query rows per block */
    float *S;                      /* scratch of qb x (pos0 + T) floats */
    float *out; size_t ldo;        /* (T, dv) output, stride ldo */
} AttnHeadJob;

/* The head's T query rows over keys 0 .. pos0 + T - 1, in blocks of qb rows: out_t =
 * softmax(q_t Kᵀ scale, keys (window: the last window of; chunk: the chunk of) 0 .. pos0 + t, soft-capped; with the sink) V.
 * With keep, the keys row t does not keep are left out of its softmax (the row must keep one). */
void attn_head_causal(const AttnHeadJob *j);

#endif
