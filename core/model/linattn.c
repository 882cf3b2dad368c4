/* linattn.c -- the Gated DeltaNet token mixer (see linattn.h). Token by token: the recurrent form,
 * equal to transformers' chunked prefill up to rounding. */
#include "linattn.h"
#include "al.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t linattn_conv_dim(const LinAttnW *w) { return 2 * w->Hk * w->dk + w->Hv * w->dv; }

int linattn_recur_new(RecurState *st, size_t conv_floats, size_t s_doubles) {
    st->conv = al_calloc(conv_floats ? conv_floats : 1, sizeof(float), "the conv state");
    st->S = st->conv ? al_calloc(s_doubles, sizeof(double), "the recurrent state") : NULL;
    if (!st->S) { linattn_recur_free(st); return AL_ERR; }
    return AL_OK;
}

void linattn_recur_zero(RecurState *st, size_t conv_floats, size_t s_doubles) {
    if (conv_floats) memset(st->conv, 0, conv_floats * sizeof(float));
    memset(st->S, 0, s_doubles * sizeof(double));
}

void linattn_recur_free(RecurState *st) {
    free(st->conv);
    free(st->S);
    st->conv = NULL;
    st->S = NULL;
}

/* The conv's and the recurrent state's sizes. */
static size_t conv_floats(const LinAttnW *w) { return w->K > 1 ? (w->K - 1) * linattn_conv_dim(w) : 0; }
static size_t s_doubles(const LinAttnW *w) { return w->Hv * w->dk * w->dv; }

int linattn_state_new(const LinAttnW *w, LinAttnState *st) { return linattn_recur_new(st, conv_floats(w), s_doubles(w)); }
void linattn_state_zero(const LinAttnW *w, LinAttnState *st) { linattn_recur_zero(st, conv_floats(w), s_doubles(w)); }
void linattn_state_free(LinAttnState *st) { linattn_recur_free(st); }

void linattn_l2norm(double *x, size_t n, double s) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = s / sqrt(ss + 1e-6);
    for (size_t i = 0; i < n; i++) x[i] *= inv;
}

void linattn_conv_step(RecurState *st, const float *weight, const float *bias, size_t C, size_t K, const float *row,
                       double *y) {
    for (size_t c = 0; c < C; c++) {
        double acc = (bias ? (double)bias[c] : 0) + (double)weight[c * K + K - 1] * row[c];
        for (size_t i = 0; i + 1 < K; i++) acc += (double)weight[c * K + i] * st->conv[i * C + c];
        y[c] = linattn_silu(acc);
    }
    if (K > 1) {
        memmove(st->conv, st->conv + C, (K - 2) * C * sizeof(float));
        memcpy(st->conv + (K - 2) * C, row, C * sizeof(float));
    }
}

void linattn_delta_step(size_t dk, size_t dv, double *S, const double *q, const double *k, const double *v,
                        const double *decay, double decay_all, double beta, double *o) {
    for (size_t i = 0; i < dk; i++)
        for (size_t c = 0; c < dv; c++) S[i * dv + c] *= decay ? decay[i] : decay_all;
    for (size_t c = 0; c < dv; c++) {
        double kv = 0;
        for (size_t i = 0; i < dk; i++) kv += S[i * dv + c] * k[i];
        double delta = (v[c] - kv) * beta;
        for (size_t i = 0; i < dk; i++) S[i * dv + c] += k[i] * delta;
    }
    for (size_t c = 0; c < dv; c++) {
        double acc = 0;
        for (size_t i = 0; i < dk; i++) acc += S[i * dv + c] * q[i];
        o[c] = acc;
    }
}

/* One token: row (its [q | k | v] in the conv's channel order) and z, b, a per value head. */
static void token(const LinAttnW *w, LinAttnState *st, const float *row, const float *z, const float *b,
                  const float *a, double *y, double *qk, float *out) {
    size_t Hk = w->Hk, Hv = w->Hv, dk = w->dk, dv = w->dv, r = Hv / Hk, nq = Hk * dk;
    linattn_conv_step(st, w->conv, NULL, linattn_conv_dim(w), w->K, row, y);
    for (size_t h = 0; h < Hk; h++) {                  /* l2norm per key head; q also x dk^-1/2 */
        linattn_l2norm(y + h * dk, dk, 1 / sqrt((double)dk));
        linattn_l2norm(y + nq + h * dk, dk, 1);
    }
    for (size_t j = 0; j < Hv; j++) {
        size_t kh = j / r;
        double g = -exp((double)w->a_log[j]) * linattn_softplus((double)a[j] + w->dt_bias[j]);
        double beta = 1 / (1 + exp(-(double)b[j]));
        double *o = qk;
        linattn_delta_step(dk, dv, st->S + j * dk * dv, y + kh * dk, y + nq + kh * dk, y + 2 * nq + j * dv, NULL, exp(g),
                           beta, o);
        double ss = 0;
        for (size_t c = 0; c < dv; c++) ss += o[c] * o[c];
        double inv = 1 / sqrt(ss / (double)dv + w->eps);
        for (size_t c = 0; c < dv; c++) out[j * dv + c] = (float)(o[c] * inv * w->norm[c] * linattn_silu(z[j * dv + c]));
    }
}

int linattn_run(const LinAttnW *w, LinAttnState *st, const float *qkvz, const float *ba, size_t T, float *out) {
    size_t Hk = w->Hk, Hv = w->Hv, dk = w->dk, dv = w->dv, r = Hv / Hk, nq = Hk * dk, nv = Hv * dv;
    size_t C = linattn_conv_dim(w), grp = 2 * dk + 2 * r * dv, W = 2 * nq + 2 * nv;
    if (!Hk || Hv % Hk) return al_err("linear attention: %zu value head%s are not a multiple of %zu key head%s", Hv, al_s(Hv), Hk, al_s(Hk));
    float *row = al_malloc3(C + nv + 2 * Hv, 1, sizeof(float), "a linear-attention row");
    double *y = al_malloc3(C + dv, 1, sizeof(double), "a linear-attention row");
    if (!row || !y) { free(row); free(y); return AL_ERR; }
    float *z = row + C, *b = z + nv, *a = b + Hv;
    for (size_t t = 0; t < T; t++) {
        const float *p = qkvz + t * W, *pb = ba + t * 2 * Hv;
        if (w->flat) {                                 /* [q | k | v] [z] and [b] [a] whole */
            memcpy(row, p, (C + nv) * sizeof(float));
            memcpy(b, pb, 2 * Hv * sizeof(float));
        }
        for (size_t h = 0; !w->flat && h < Hk; h++) {              /* per key head [q | k | v (r heads) | z (r heads)] */
            const float *gp = p + h * grp;
            memcpy(row + h * dk, gp, dk * sizeof(float));
            memcpy(row + nq + h * dk, gp + dk, dk * sizeof(float));
            memcpy(row + 2 * nq + h * r * dv, gp + 2 * dk, r * dv * sizeof(float));
            memcpy(z + h * r * dv, gp + 2 * dk + r * dv, r * dv * sizeof(float));
            memcpy(b + h * r, pb + h * 2 * r, r * sizeof(float));
            memcpy(a + h * r, pb + h * 2 * r + r, r * sizeof(float));
        }
        token(w, st, row, z, b, a, y, y + C, out + t * nv);
    }
    free(row);
    free(y);
    return AL_OK;
}
