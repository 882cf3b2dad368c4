/* kda.c -- Kimi Delta Attention (see kda.h): the convs, the per-channel decay and the delta rule, in double
 * per token. */
#include "kda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"

LinAttnW kda_state_dims(const KdaW *w) {
    return (LinAttnW){.Hk = w->H, .Hv = w->H, .dk = w->d, .dv = w->d, .K = w->K, .eps = w->eps, .conv = w->conv,
                      .a_log = w->a_log, .dt_bias = w->dt_bias, .norm = w->norm, .flat = true};
}

/* One token (y: 3 H d + 2 d scratch). */
static void token(const KdaW *w, LinAttnState *st, const float *row, const float *fg, const float *b, const float *og,
                  double *y, float *out) {
    size_t H = w->H, d = w->d, n = H * d;
    double *o = y + 3 * n, *eg = o + d;
    linattn_conv_step(st, w->conv, NULL, 3 * H * d, w->K, row, y);
    for (size_t h = 0; h < H; h++) {
        linattn_l2norm(y + h * d, d, 1 / sqrt((double)d));
        linattn_l2norm(y + n + h * d, d, 1);
        double a = exp((double)w->a_log[h]);
        for (size_t i = 0; i < d; i++) eg[i] = exp(-a * linattn_softplus((double)fg[h * d + i] + w->dt_bias[h * d + i]));
        linattn_delta_step(d, d, st->S + h * d * d, y + h * d, y + n + h * d, y + 2 * n + h * d, eg, 0,
                           linattn_sigmoid((double)b[h]), o);
        double ss = 0;
        for (size_t c = 0; c < d; c++) ss += o[c] * o[c];
        double inv = 1 / sqrt(ss / (double)d + w->eps);
        for (size_t c = 0; c < d; c++)
            out[h * d + c] = (float)(o[c] * inv * w->norm[c] * linattn_sigmoid((double)og[h * d + c]));
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
