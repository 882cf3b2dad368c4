/* kda.c -- Kimi Delta Attention (see kda.h): the convs, the per-channel decay and the delta rule, in double
 * per token. */
#include "kda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/al.h"

static double silu(double x) { return x / (1 + exp(-x)); }
static double softplus(double x) { return x > 20 ? x : log1p(exp(x)); }   /* torch: threshold 20 */
static double sigmoid(double x) { return 1 / (1 + exp(-x)); }

LinAttnW kda_state_dims(const KdaW *w) {
    return (LinAttnW){.Hk = w->H, .Hv = w->H, .dk = w->d, .dv = w->d, .K = w->K, .eps = w->eps, .conv = w->conv,
                      .a_log = w->a_log, .dt_bias = w->dt_bias, .norm = w->norm, .flat = true};
}

/* x (n) times s / sqrt(sum x² + 1e-6) (fla's l2norm in the kernel). */
static void l2norm(double *x, size_t n, double s) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = s / sqrt(ss + 1e-6);
    for (size_t i = 0; i < n; i++) x[i] *= inv;
}

/* One token's [q | k | v] (C) through the convs and SiLU; the state shifts by one. */
static void conv_step(const KdaW *w, LinAttnState *st, const float *row, double *y) {
    size_t C = 3 * w->H * w->d, K = w->K;
    for (size_t c = 0; c < C; c++) {
        double acc = (double)w->conv[c * K + K - 1] * row[c];
        for (size_t i = 0; i + 1 < K; i++) acc += (double)w->conv[c * K + i] * st->conv[i * C + c];
        y[c] = silu(acc);
    }
    if (K > 1) {
        memmove(st->conv, st->conv + C, (K - 2) * C * sizeof(float));
        memcpy(st->conv + (K - 2) * C, row, C * sizeof(float));
    }
}

/* Head h of one token: the per-channel decay eg (d), the delta rule, the read-out into o (d). */
static void delta_step(size_t d, double *S, const double *q, const double *k, const double *v, const double *eg,
                       double beta, double *o) {
    for (size_t i = 0; i < d; i++)
        for (size_t c = 0; c < d; c++) S[i * d + c] *= eg[i];
    for (size_t c = 0; c < d; c++) {
        double kv = 0;
        for (size_t i = 0; i < d; i++) kv += S[i * d + c] * k[i];
        double delta = (v[c] - kv) * beta;
        for (size_t i = 0; i < d; i++) S[i * d + c] += k[i] * delta;
    }
    for (size_t c = 0; c < d; c++) {
        double acc = 0;
        for (size_t i = 0; i < d; i++) acc += S[i * d + c] * q[i];
        o[c] = acc;
    }
}

/* One token (y: 3 H d + 2 d scratch). */
static void token(const KdaW *w, LinAttnState *st, const float *row, const float *fg, const float *b, const float *og,
                  double *y, float *out) {
    size_t H = w->H, d = w->d, n = H * d;
    double *o = y + 3 * n, *eg = o + d;
    conv_step(w, st, row, y);
    for (size_t h = 0; h < H; h++) {
        l2norm(y + h * d, d, 1 / sqrt((double)d));
        l2norm(y + n + h * d, d, 1);
        double a = exp((double)w->a_log[h]);
        for (size_t i = 0; i < d; i++) eg[i] = exp(-a * softplus((double)fg[h * d + i] + w->dt_bias[h * d + i]));
        delta_step(d, st->S + h * d * d, y + h * d, y + n + h * d, y + 2 * n + h * d, eg, sigmoid((double)b[h]), o);
        double ss = 0;
        for (size_t c = 0; c < d; c++) ss += o[c] * o[c];
        double inv = 1 / sqrt(ss / (double)d + w->eps);
        for (size_t c = 0; c < d; c++)
            out[h * d + c] = (float)(o[c] * inv * w->norm[c] * sigmoid((double)og[h * d + c]));
    }
}

int kda_run(const KdaW *w, LinAttnState *st, const float *qkv, const float *fg, const float *b, const float *og,
            size_t T, float *out) {
    size_t n = w->H * w->d;
    double *y = al_malloc3(3 * n + 2 * w->d, 1, sizeof(double), "a Kimi Delta Attention row");
    if (!y) return AL_ERR;
    for (size_t t = 0; t < T; t++)
        token(w, st, qkv + t * 3 * n, fg + t * n, b + t * w->H, og + t * n, y, out + t * n);
    free(y);
    return AL_OK;
}
