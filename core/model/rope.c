/* rope.c -- RoPE frequencies and scalings, the rotation, and the causal softmax (see rope.h). */
#define _GNU_SOURCE
#include "rope.h"

#include "matmul.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ================================================================ frequencies */

void rope_plain_freqs(int dim, double theta, double *f) {
    for (int j = 0; j < dim / 2; j++) f[j] = pow(theta, -2.0 * j / dim);
}

int rope_scaling_check(const RopeScaling *s, const char *where) {
    if (s->kind == RS_NONE) return AL_OK;
    if (s->kind == RS_LONGROPE || s->kind == RS_OTHER)
        return al_err("%s: rope_scaling type '%s': attnlab computes plain RoPE and the linear, llama3 and yarn scalings "
                      "only, so this model cannot be evaluated or converted as described", where, s->type);
    if (s->factor <= 0) return al_err("%s: rope_scaling factor %g must be positive", where, s->factor);
    if (s->kind == RS_LLAMA3 && !(s->high_freq_factor >= s->low_freq_factor && s->orig_max_pos > 0))
        return al_err("%s: rope_scaling llama3 needs low_freq_factor <= high_freq_factor and "
                      "original_max_position_embeddings", where);
    return AL_OK;
}

/* llama3: low frequencies / factor, high ones kept, a smooth blend between. */
static void scale_llama3(const RopeScaling *s, double *f, size_t n) {
    double lo = s->low_freq_factor, hi = s->high_freq_factor, old = s->orig_max_pos;
    double lo_wl = old / lo, hi_wl = old / hi;
    for (size_t j = 0; j < n; j++) {
        double wl = 2 * M_PI / f[j];
        if (wl < hi_wl) continue;
        if (wl > lo_wl) { f[j] /= s->factor; continue; }
        if (hi <= lo) continue;                       /* Llama 4 Scout's low = high: no band to blend */
        double smooth = (old / wl - lo) / (hi - lo);
        f[j] = (1 - smooth) * f[j] / s->factor + smooth * f[j];
    }
}

/* YaRN: interpolation f / factor blended with f by a ramp over pair indices [low, high]. */
static void scale_yarn(const RopeScaling *s, int dim_i, double theta, double *f, size_t n) {
    double dim = (double)dim_i, orig = s->orig_max_pos, bf = s->beta_fast, bs = s->beta_slow;
    double low = dim * log(orig / (bf * 2 * M_PI)) / (2 * log(theta));
    double high = dim * log(orig / (bs * 2 * M_PI)) / (2 * log(theta));
    if (s->truncate) { low = floor(low); high = ceil(high); }   /* gpt-oss: truncate false keeps the bounds */
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (high == low) high += 0.001;
    for (size_t j = 0; j < n; j++) {
        double ramp = ((double)j - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double extra = 1 - ramp;                      /* weight of the unscaled frequency */
        f[j] = f[j] / s->factor * (1 - extra) + f[j] * extra;
    }
}

int rope_inv_freq(const RopeSpec *s, int dim, double theta, double *f, const char *where) {
    if (dim <= 0) return al_err("RoPE needs a positive number of dims (%d)", dim);
    if (rope_scaling_check(&s->scaling, where)) return AL_ERR;
    size_t n = (size_t)dim / 2;
    rope_plain_freqs(dim, theta, f);
    switch (s->scaling.kind) {
    case RS_LINEAR:
        for (size_t j = 0; j < n; j++) f[j] /= s->scaling.factor;
        break;
    case RS_LLAMA3: scale_llama3(&s->scaling, f, n); break;
    case RS_YARN: scale_yarn(&s->scaling, dim, theta, f, n); break;
    default: break;
    }
    return AL_OK;
}

int rope_longrope_freqs(const RopeScaling *s, int dim, double theta, bool long_seq, double *f, const char *where) {
    int half = dim / 2;
    const double *ext = long_seq ? s->long_factor : s->short_factor;
    int n = long_seq ? s->n_long : s->n_short;
    if (s->kind != RS_LONGROPE) return al_err("%s: rope_scaling is not longrope", where);
    if (dim <= 0 || n != half)
        return al_err("%s: rope_scaling longrope has %d %s factors but the %d rotary dims need %d: the config is "
                      "inconsistent", where, n, long_seq ? "long" : "short", dim, half);
    rope_plain_freqs(dim, theta, f);
    for (int j = 0; j < half; j++) {
        if (!(ext[j] > 0)) return al_err("%s: longrope factor %d is %g; factors must be positive", where, j, ext[j]);
        f[j] /= ext[j];
    }
    return AL_OK;
}

static double yarn_mscale(double factor, double m) { return factor <= 1 ? 1.0 : 0.1 * m * log(factor) + 1.0; }

double rope_attention_factor(const RopeSpec *s) {
    const RopeScaling *r = &s->scaling;
    if (r->kind == RS_LONGROPE) {                     /* Phi-3: sqrt(1 + ln(factor) / ln(orig_max_pos)) */
        if (!isnan(r->attention_factor)) return r->attention_factor;
        return r->factor <= 1 || r->orig_max_pos <= 1 ? 1.0 : sqrt(1 + log(r->factor) / log(r->orig_max_pos));
    }
    if (r->kind != RS_YARN) return 1.0;
    if (!isnan(r->attention_factor)) return r->attention_factor;
    if (r->mscale != 0 && r->mscale_all_dim != 0) return yarn_mscale(r->factor, r->mscale) / yarn_mscale(r->factor, r->mscale_all_dim);
    return yarn_mscale(r->factor, 1.0);
}

/* ================================================================ rotation */

/* The two dims of pair j in a vector of 2 half dims. */
static inline void rope_pair(rope_layout lay, size_t j, size_t half, size_t *a, size_t *b) {
    *a = lay == ROPE_INTERLEAVED ? 2 * j : j;
    *b = lay == ROPE_INTERLEAVED ? 2 * j + 1 : j + half;
}

void rope_rotate_rows(float *X, size_t rows, size_t ld, int dim, rope_layout lay, const double *inv_freq, double pos,
                      double mscale) {
    size_t half = (size_t)dim / 2;
    for (size_t j = 0; j < half; j++) {
        double ang = pos * inv_freq[j], cs = cos(ang), sn = sin(ang);
        size_t a, b;
        rope_pair(lay, j, half, &a, &b);
        for (size_t r = 0; r < rows; r++) {
            float *v = X + r * ld;
            double x = v[a], y = v[b];
            v[a] = (float)((x * cs - y * sn) * mscale);
            v[b] = (float)((y * cs + x * sn) * mscale);
        }
    }
}

void rope_rotate_gram(double *G, size_t k, rope_layout lay, const double *inv_freq, double pos) {
    size_t half = k / 2;
    for (size_t t = 0; t < half; t++) {
        double ang = pos * inv_freq[t], cs = cos(ang), sn = sin(ang);
        size_t i, j;
        rope_pair(lay, t, half, &i, &j);
        for (size_t r = 0; r < k; r++) {
            double a = G[r * k + i], b = G[r * k + j];
            G[r * k + i] = a * cs - b * sn;
            G[r * k + j] = b * cs + a * sn;
        }
        for (size_t c = 0; c < k; c++) {
            double a = G[i * k + c], b = G[j * k + c];
            G[i * k + c] = a * cs - b * sn;
            G[j * k + c] = b * cs + a * sn;
        }
    }
}

void rope_tables(float *cs, float *sn, size_t T, size_t pos0, const float *inv_freq, size_t half, float mscale) {
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < half; j++) {
            float ang = (float)(pos0 + t) * inv_freq[j];
            cs[t * half + j] = cosf(ang) * mscale;
            sn[t * half + j] = sinf(ang) * mscale;
        }
}

void rope_rotate_cs(float *v, size_t half, rope_layout lay, const float *cs, const float *sn) {
    for (size_t j = 0; j < half; j++) {
        size_t a, b;
        rope_pair(lay, j, half, &a, &b);
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[j] - x1 * sn[j];
        v[b] = x1 * cs[j] + x0 * sn[j];
    }
}

/* ================================================================ softmax */

void attn_softmax_row(float *s, size_t n, size_t lo, size_t hi, double softcap) {
    attn_softmax_row_sink(s, n, lo, hi, softcap, -INFINITY);
}

void attn_softmax_row_sink(float *s, size_t n, size_t lo, size_t hi, double softcap, double sink) {
    if (softcap > 0)
        for (size_t k = lo; k <= hi; k++) s[k] = (float)(softcap * tanh(s[k] / softcap));
    float mx = sink > -INFINITY ? (float)sink : -INFINITY;
    for (size_t k = lo; k <= hi; k++) mx = s[k] > mx ? s[k] : mx;
    double sum = mm_exp_sum(s + lo, hi - lo + 1, mx);     /* s[k] = exp(s[k] - mx), vectorized */
    if (sink > -INFINITY) sum += exp((double)((float)sink - mx));   /* the sink's weight, dropped */
    float inv = (float)(1.0 / sum);
    for (size_t k = 0; k < n; k++) s[k] = (k >= lo && k <= hi) ? s[k] * inv : 0.f;
}

void attn_softmax_row_stream(float *s, size_t n, size_t s0, size_t lo, size_t hi, double softcap, double sink) {
    if (!s0 || lo <= s0) { attn_softmax_row_sink(s, n, s0 ? 0 : lo, hi, softcap, sink); return; }
    for (size_t k = 0; softcap > 0 && k <= hi; k++)
        if (k < s0 || k >= lo) s[k] = (float)(softcap * tanh(s[k] / softcap));
    for (size_t k = s0; k < lo; k++) s[k] = -INFINITY;
    attn_softmax_row_sink(s, n, 0, hi, 0, sink);
    for (size_t k = s0; k < lo; k++) s[k] = 0.f;
}

/* Row `row` of the job (position p, nk keys, [lo, p] in the window) with j->keep: soft-capped first, the
 * evicted keys' logits -inf, the softmax, and their weights exactly 0. */
static void evict_row(const AttnHeadJob *j, size_t row, size_t nk, size_t lo, size_t p, float *s) {
    const unsigned char *kp = j->keep + row * j->ldkeep;
    if (j->softcap > 0)
        for (size_t k = lo; k <= p; k++) s[k] = (float)(j->softcap * tanh(s[k] / j->softcap));
    for (size_t k = lo; k <= p; k++)
        if (!kp[k]) s[k] = -INFINITY;
    attn_softmax_row_sink(s, nk, lo, p, 0, j->has_sink ? j->sink : -INFINITY);
    for (size_t k = lo; k <= p; k++)
        if (!kp[k]) s[k] = 0.f;
}

void attn_head_causal(const AttnHeadJob *j) {
    for (size_t r0 = 0; r0 < j->T; r0 += j->qb) {
        size_t nr = j->T - r0 < j->qb ? j->T - r0 : j->qb;
        size_t nk = j->pos0 + r0 + nr;                       /* keys visible to the block's last row */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)nk, (int)j->d, (float)j->scale,
                    j->q + r0 * j->ldq, (int)j->ldq, j->K, (int)j->ldk, 0.f, j->S, (int)nk);
        for (size_t t = 0; t < nr; t++) {
            size_t p = j->pos0 + r0 + t;                     /* this row's position: keys 0..p */
            size_t lo = j->window && p + 1 > j->window ? p + 1 - j->window : 0;
            if (j->chunk && p - p % j->chunk > lo) lo = p - p % j->chunk;
            if (j->keep) { evict_row(j, r0 + t, nk, lo, p, j->S + t * nk); continue; }
            attn_softmax_row_stream(j->S + t * nk, nk, j->sink_tokens, lo, p, j->softcap,
                                    j->has_sink ? j->sink : -INFINITY);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)j->dv, (int)nk, 1.f, j->S, (int)nk, j->V,
                    (int)j->ldv, 0.f, j->out + r0 * j->ldo, (int)j->ldo);
    }
}
