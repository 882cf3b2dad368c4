/* act_stats.c -- the attention-input second moment and mean per layer, accumulated from
 * forward-pass hooks in double precision (dsyrk on blocks of rows), their per-layer arrays for
 * TransMLA, and the import of calibration statistics. See act_stats.h. */
#define _GNU_SOURCE
#include "act_stats.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#define ROW_BLOCK 256          /* rows converted to double at a time */

/* ================================================================ new / free */

void acts_free(ActStats *s) {
    if (!s) return;
    for (int l = 0; l < s->n_layers; l++) {
        if (s->sum_xx) free(s->sum_xx[l]);
        if (s->sum_x) free(s->sum_x[l]);
    }
    free(s->sum_xx);
    free(s->sum_x);
    free(s->tokens);
    free(s->buf);
    free(s);
}

/* Allocates the per-layer sums of [lo, hi]; with_mean also the Σ x vectors. */
static int acts_alloc(int n_layers, int hidden, int lo, int hi, bool with_mean, ActStats **out) {
    *out = NULL;
    if (n_layers <= 0 || hidden <= 0) return al_err("activation statistics: %d layers of width %d", n_layers, hidden);
    if (hi < 0) hi = n_layers - 1;
    if (lo < 0 || lo > hi || hi >= n_layers)
        return al_err("activation statistics: layers %d-%d out of range 0-%d", lo, hi, n_layers - 1);
    ActStats *s = al_calloc(1, sizeof *s, "activation statistics");
    if (!s) return AL_ERR;
    s->n_layers = n_layers;
    s->hidden = hidden;
    s->layer_lo = lo;
    s->layer_hi = hi;
    s->has_mean = with_mean;
    s->tokens = al_calloc((size_t)n_layers, sizeof *s->tokens, "token counts");
    s->sum_xx = al_calloc((size_t)n_layers, sizeof *s->sum_xx, "second moments");
    s->sum_x = al_calloc((size_t)n_layers, sizeof *s->sum_x, "means");
    int rc = s->tokens && s->sum_xx && s->sum_x ? AL_OK : AL_ERR;
    size_t h = (size_t)hidden, n;
    if (rc == AL_OK && !al_mul_ok(h, h, &n, "an attention-input second moment")) rc = AL_ERR;
    for (int l = lo; rc == AL_OK && l <= hi; l++) {
        if (!(s->sum_xx[l] = al_calloc(n, sizeof(double), "an attention-input second moment"))) rc = AL_ERR;
        if (rc == AL_OK && with_mean && !(s->sum_x[l] = al_calloc(h, sizeof(double), "an attention-input mean")))
            rc = AL_ERR;
    }
    if (rc) { acts_free(s); return AL_ERR; }
    *out = s;
    return AL_OK;
}

int acts_new(int n_layers, int hidden, int lo, int hi, ActStats **out) {
    return acts_alloc(n_layers, hidden, lo, hi, true, out);
}

/* ================================================================ accumulation */

int acts_add(ActStats *s, int layer, const float *x, size_t T, size_t ld) {
    if (layer < 0 || layer >= s->n_layers || !s->sum_xx[layer]) return AL_OK;
    size_t h = (size_t)s->hidden;
    if (!s->buf) {
        if (!(s->buf = al_malloc3(ROW_BLOCK, h, sizeof(double), "a block of activations"))) return AL_ERR;
        s->buf_cap = ROW_BLOCK;
    }
    double *C = s->sum_xx[layer], *mu = s->sum_x[layer];
    for (size_t t0 = 0; t0 < T; t0 += ROW_BLOCK) {
        size_t nb = T - t0 < ROW_BLOCK ? T - t0 : ROW_BLOCK;
        for (size_t t = 0; t < nb; t++) {
            const float *r = x + (t0 + t) * ld;
            double *d = s->buf + t * h;
            for (size_t j = 0; j < h; j++) d[j] = r[j];
            if (mu)
                for (size_t j = 0; j < h; j++) mu[j] += d[j];
        }
        /* Σ x xᵀ += Xᵀ X (upper triangle) for the block X (nb, h). */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)h, (int)nb, 1.0, s->buf, (int)h, 1.0, C, (int)h);
    }
    s->tokens[layer] += T;
    return AL_OK;
}

int acts_hook(const FwdAct *a, void *ud) {
    ActStats *s = ud;
    if (a->kind != FWD_ATTN_IN) return AL_OK;
    if (a->heads * a->head_dim != (size_t)s->hidden)
        return al_err("activation statistics: layer %d's attention input has %zu columns, the statistics %d", a->layer,
                      a->heads * a->head_dim, s->hidden);
    return acts_add(s, a->layer, a->x, a->T, a->ld);
}

int acts_run(ActStats *s, Forward *f, const int *tokens, size_t nseq, size_t seqlen) {
    FwdHooks hk = {.mask = FWD_ATTN_IN, .fn = acts_hook, .ud = s, .chunk = ROW_BLOCK};
    int rc = AL_OK;
    fwd_set_hooks(f, &hk);
    for (size_t i = 0; rc == AL_OK && i < nseq; i++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        fwd_reset(f);
        rc = fwd_run(f, tokens + i * seqlen, seqlen, FWD_LOGITS_NONE, NULL);
        al_progress("sequence", i + 1, nseq);
    }
    al_progress(NULL, 0, 0);
    fwd_set_hooks(f, NULL);
    fwd_reset(f);
    return rc;
}

/* ================================================================ reading */

int acts_sigma(const ActStats *s, int layer, double **out) {
    *out = NULL;
    if (layer < 0 || layer >= s->n_layers || !s->sum_xx[layer])
        return al_err("activation statistics: layer %d was not accumulated (layers %d-%d were)", layer, s->layer_lo,
                      s->layer_hi);
    if (s->tokens[layer] == 0)
        return al_err("activation statistics: layer %d holds no tokens (the calibration run stopped before it)", layer);
    size_t h = (size_t)s->hidden;
    double *S = al_malloc3(h, h, sizeof(double), "an attention-input second moment");
    if (!S) return AL_ERR;
    double inv = 1.0 / (double)s->tokens[layer];
    const double *C = s->sum_xx[layer];
    for (size_t i = 0; i < h; i++)
        for (size_t j = i; j < h; j++) S[i * h + j] = S[j * h + i] = C[i * h + j] * inv;
    *out = S;
    return AL_OK;
}

int acts_mean(const ActStats *s, int layer, double **out) {
    *out = NULL;
    if (layer < 0 || layer >= s->n_layers || !s->sum_x[layer] || s->tokens[layer] == 0) return AL_OK;
    size_t h = (size_t)s->hidden;
    double *m = al_malloc3(h, 1, sizeof(double), "an attention-input mean");
    if (!m) return AL_ERR;
    for (size_t j = 0; j < h; j++) m[j] = s->sum_x[layer][j] / (double)s->tokens[layer];
    *out = m;
    return AL_OK;
}

void acts_free_arrays(int n_layers, double **sigma, double **mu) {
    for (int l = 0; l < n_layers; l++) {
        if (sigma) free(sigma[l]);
        if (mu) free(mu[l]);
    }
    free(sigma);
    free(mu);
}

int acts_arrays(const ActStats *s, double ***sigma, double ***mu) {
    *sigma = NULL;
    *mu = NULL;
    double **S = al_calloc((size_t)s->n_layers, sizeof *S, "per-layer second moments");
    double **M = al_calloc((size_t)s->n_layers, sizeof *M, "per-layer means");
    int rc = S && M ? AL_OK : AL_ERR;
    for (int l = s->layer_lo; rc == AL_OK && l <= s->layer_hi; l++) {
        rc = acts_sigma(s, l, &S[l]);
        if (rc == AL_OK) rc = acts_mean(s, l, &M[l]);
    }
    if (rc) { acts_free_arrays(s->n_layers, S, M); return AL_ERR; }
    *sigma = S;
    *mu = M;
    return AL_OK;
}

/* ================================================================ from calibration */

int acts_from_calib(const CalibStats *st, ActStats **out) {
    *out = NULL;
    if (!st->has_x)
        return al_err("the calibration statistics hold no attention-input second moment (G_X): calibrate again with it "
                      "kept, or give convert its own calibration text (calib FILE)");
    ActStats *s;
    if (acts_alloc(st->sh.n_layers, st->sh.hidden, 0, -1, false, &s)) return AL_ERR;
    int rc = AL_OK;
    for (int l = 0; rc == AL_OK && l < s->n_layers; l++) {
        rc = calib_gram(st, CALIB_X, l, 0, s->sum_xx[l]);
        s->tokens[l] = st->tokens[l];
    }
    if (rc) { acts_free(s); return AL_ERR; }
    *out = s;
    return AL_OK;
}
