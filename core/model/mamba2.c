/* mamba2.c -- the Mamba-2 token mixer (see mamba2.h). Token by token: the recurrent form (the selective state
 * update), equal to transformers' chunked SSD scan up to rounding. */
#include "mamba2.h"
#include "al.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t mamba2_conv_dim(const Mamba2W *w) { return w->H * w->P + 2 * w->G * w->N; }
size_t mamba2_in_dim(const Mamba2W *w) { return w->H * w->P + mamba2_conv_dim(w) + w->H; }

/* The conv's and the SSM state's sizes (the state itself is linattn.h's RecurState). */
static size_t conv_floats(const Mamba2W *w) { return w->K > 1 ? (w->K - 1) * mamba2_conv_dim(w) : 0; }
static size_t s_doubles(const Mamba2W *w) { return w->H * w->P * w->N; }

int mamba2_state_new(const Mamba2W *w, Mamba2State *st) { return linattn_recur_new(st, conv_floats(w), s_doubles(w)); }
void mamba2_state_zero(const Mamba2W *w, Mamba2State *st) { linattn_recur_zero(st, conv_floats(w), s_doubles(w)); }
void mamba2_state_free(Mamba2State *st) { linattn_recur_free(st); }

/* Head h of one token: S <- exp(dt A) S + dt x Bᵀ, y = S C + D x (x: P, B / C: N of the head's group). */
static void ssm_step(const Mamba2W *w, size_t h, double *S, const double *x, const double *B, const double *Cv,
                     double dt, double *y) {
    size_t P = w->P, N = w->N;
    double dA = exp(-exp((double)w->a_log[h]) * dt);
    for (size_t p = 0; p < P; p++) {
        double *s = S + p * N, acc = 0;
        for (size_t n = 0; n < N; n++) {
            s[n] = s[n] * dA + dt * x[p] * B[n];
            acc += s[n] * Cv[n];
        }
        y[p] = acc + (double)w->d[h] * x[p];
    }
}

/* The gated RMSNorm of one token's y (H P) with z: y linattn_silu(z), each of norm_groups groups normalised, times w. */
static void gated_norm(const Mamba2W *w, double *y, const float *z, float *out) {
    size_t I = w->H * w->P, gs = I / w->norm_groups;
    for (size_t i = 0; i < I; i++) y[i] *= linattn_silu((double)z[i]);
    for (size_t g = 0; g < w->norm_groups; g++) {
        double ss = 0;
        for (size_t i = g * gs; i < (g + 1) * gs; i++) ss += y[i] * y[i];
        double inv = 1 / sqrt(ss / (double)gs + w->eps);
        for (size_t i = g * gs; i < (g + 1) * gs; i++) out[i] = (float)((double)w->norm[i] * y[i] * inv);
    }
}

int mamba2_run(const Mamba2W *w, Mamba2State *st, const float *p, size_t T, float *out) {
    size_t I = w->H * w->P, C = mamba2_conv_dim(w), W = mamba2_in_dim(w), GN = w->G * w->N, per = w->H / w->G;
    if (!w->G || w->H % w->G || !w->norm_groups || I % w->norm_groups)
        return al_err("Mamba-2: %zu head%s of %zu in %zu group%s, gated norm in %zu group%s: the groups must divide them",
                      w->H, al_s(w->H), w->P, w->G, al_s(w->G), w->norm_groups, al_s(w->norm_groups));
    double *xbc = al_malloc3(C + I, 1, sizeof(double), "a Mamba-2 row"), *y = xbc ? xbc + C : NULL;
    if (!xbc) return AL_ERR;
    for (size_t t = 0; t < T; t++) {
        const float *row = p + t * W;                  /* [z (I) | x B C (C) | dt (H)] */
        linattn_conv_step(st, w->conv, w->conv_b, mamba2_conv_dim(w), w->K, row + I, xbc);
        const double *x = xbc, *B = xbc + I, *Cv = xbc + I + GN;
        for (size_t h = 0; h < w->H; h++) {
            double dt = fmax(linattn_softplus((double)row[I + C + h] + (double)w->dt_bias[h]), w->dt_min);
            size_t g = h / per;
            ssm_step(w, h, st->S + h * w->P * w->N, x + h * w->P, B + g * w->N, Cv + g * w->N, dt, y + h * w->P);
        }
        gated_norm(w, y, row, out + t * I);
    }
    free(xbc);
    return AL_OK;
}
