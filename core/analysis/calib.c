/* calib.c -- calibration statistics: per-layer, per-KV-head Gram matrices of keys, stacked group
 * queries and values (and optionally of the attention input) accumulated in double precision from
 * activation blocks, the forward-pass driver, text splits, and the safetensors file format.
 * Owns nothing global. See calib.h for the contracts. */
#define _GNU_SOURCE
#include "calib.h"

#include <cblas.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "safetensors.h"
#include "spill.h"

#define CALIB_FORMAT "attnlab-calib"
#define CALIB_VERSION 2           /* 2: layers.<l>.sum_x; version 1 files load without a mean */
#define ROW_BLOCK 256          /* rows converted to double at a time */

/* ================================================================ shape */

int calib_shape_of(const Model *m, CalibShape *sh) {
    const ModelConfig *c = &m->cfg;
    memset(sh, 0, sizeof *sh);
    sh->n_layers = c->n_layers;
    sh->n_heads = c->n_heads;
    sh->n_kv_heads = cfg_is_mla(c) || c->n_kv_heads <= 0 ? c->n_heads : c->n_kv_heads;
    sh->d_qk = cfg_d_qk(c);
    sh->d_v = c->v_dim;
    sh->hidden = c->hidden;
    if (m->cfg_full || c->kv_shared_from > 0)           /* Gemma 4: statistics of one shape for every layer */
        return al_err("%s: cannot calibrate: its %s; the statistics take one head shape and every layer's own K / V",
                      m->name ? m->name : m->path, m->cfg_full ? "full-attention layers have their own head dims "
                      "(global_head_dim, num_global_key_value_heads)" : "last layers read an earlier layer's K / V "
                      "(num_kv_shared_layers)");
    if (sh->n_layers <= 0 || sh->n_heads <= 0 || sh->d_qk <= 0 || sh->d_v <= 0 || sh->hidden <= 0 ||
        sh->n_heads % sh->n_kv_heads != 0)
        return al_err("%s: cannot calibrate: layers %d, heads %d, KV heads %d, head dims %d / %d, hidden %d "
                      "(the config must give attention dims, heads a multiple of KV heads)",
                      m->name ? m->name : m->path, sh->n_layers, sh->n_heads, sh->n_kv_heads, sh->d_qk, sh->d_v,
                      sh->hidden);
    return AL_OK;
}

/* Elements of one layer's block of a Gram kind. */
static size_t layer_elems(const CalibShape *sh, calib_which w) {
    size_t G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v, D = (size_t)sh->hidden;
    switch (w) {
    case CALIB_K: case CALIB_Q: return G * d * d;
    case CALIB_V: return G * dv * dv;
    default: return D * (D + 1) / 2;          /* G_X packed: its upper triangle, row by row */
    }
}

/* Offset of row i of an n x n upper triangle packed row by row (row i holds columns i..n-1). */
static size_t packed_row(size_t n, size_t i) { return i * (2 * n - i + 1) / 2; }

static double *gram_base(const CalibStats *st, calib_which w) {
    return w == CALIB_K ? st->gk : w == CALIB_Q ? st->gq : w == CALIB_V ? st->gv : st->gx;
}

static const char *which_name(calib_which w) {
    return w == CALIB_K ? "keys" : w == CALIB_Q ? "queries" : w == CALIB_V ? "values" : "attention input";
}

/* ================================================================ new / free */

/* G_X's n doubles, zeros: in a spill mapping where a file can be made (st->gx_spill its bytes), so that the rows
 * calib_add accumulates into it, layer after layer, dirty page cache the kernel writes back and drops, not
 * anonymous memory that grows with the layers (the same sums in the same order: the same bits); else calloc'd. */
static double *gx_new(CalibStats *st, size_t n) {
    double *p = n <= SIZE_MAX / sizeof(double) ? spill_zeroed(n * sizeof(double)) : NULL;
    if (p) st->gx_spill = n * sizeof(double);
    return p ? p : al_calloc(n, sizeof(double), "attention-input Gram matrices");
}

/* G_K, G_Q (nk doubles each) and G_V (nv), zeros: one spill mapping [G_K | G_Q | G_V] where a file can be made
 * and the statistics hold more than one layer (3 MB a layer at 8B, beside G_X's 67; one layer's are a scratch that
 * does not grow with the model, kqsvd.c's per-sequence Grams, cleared and refilled: anonymous), else calloc'd each. */
static void kqv_new(CalibStats *st, size_t nk, size_t nv) {
    bool fits = st->sh.n_layers > 1 && nv <= SIZE_MAX / sizeof(double) && nk <= (SIZE_MAX / sizeof(double) - nv) / 2;
    double *p = fits ? spill_zeroed((2 * nk + nv) * sizeof(double)) : NULL;
    if (p) {
        st->kqv_spill = (2 * nk + nv) * sizeof(double);
        st->gk = p;
        st->gq = p + nk;
        st->gv = p + 2 * nk;
        return;
    }
    st->gk = al_calloc(nk, sizeof(double), "key Gram matrices");
    st->gq = al_calloc(nk, sizeof(double), "query Gram matrices");
    st->gv = al_calloc(nv, sizeof(double), "value Gram matrices");
}

int calib_new(const CalibShape *sh, bool with_x, CalibStats **out) {
    *out = NULL;
    if (sh->n_layers <= 0 || sh->n_heads <= 0 || sh->n_kv_heads <= 0 || sh->n_heads % sh->n_kv_heads ||
        sh->d_qk <= 0 || sh->d_v <= 0 || sh->hidden <= 0)
        return al_err("calibration shape: layers %d, heads %d, KV heads %d, dims %d / %d, hidden %d are not valid",
                      sh->n_layers, sh->n_heads, sh->n_kv_heads, sh->d_qk, sh->d_v, sh->hidden);
    CalibStats *st = al_calloc(1, sizeof *st, "calibration statistics");
    if (!st) return AL_ERR;
    st->sh = *sh;
    st->has_x = with_x;
    size_t L = (size_t)sh->n_layers;
    st->tokens = al_calloc(L, sizeof *st->tokens, "calibration counts");
    st->seqs = al_calloc(L, sizeof *st->seqs, "calibration counts");
    size_t nk, nv, nx = 0;
    bool ok = st->tokens && st->seqs && al_mul_ok(L, layer_elems(sh, CALIB_K), &nk, "key Gram matrices") &&
              al_mul_ok(L, layer_elems(sh, CALIB_V), &nv, "value Gram matrices") &&
              (!with_x || al_mul_ok(L, layer_elems(sh, CALIB_X), &nx, "attention-input Gram matrices"));
    if (ok) {
        kqv_new(st, nk, nv);
        if (with_x) st->gx = gx_new(st, nx);
        if (with_x) st->sx = al_calloc(L, (size_t)sh->hidden * sizeof(double), "attention-input sums");
        ok = st->gk && st->gq && st->gv && (!with_x || (st->gx && st->sx));
    }
    if (!ok) { calib_free(st); return AL_ERR; }
    *out = st;
    return AL_OK;
}

void calib_free(CalibStats *st) {
    if (!st) return;
    free(st->tokens); free(st->seqs);
    free(st->model); free(st->source); free(st->split);
    for (int i = 0; i < CALIB_NPROV; i++) free(st->prov[i]);
    if (st->kqv_spill) spill_free(st->gk, st->kqv_spill);
    else { free(st->gk); free(st->gq); free(st->gv); }
    free(st->sx);
    if (st->gx_spill) spill_free(st->gx, st->gx_spill);
    else free(st->gx);
    free(st->buf);
    free(st->xfull);
    free(st->gx_hold);
    free(st);
}

void calib_spill(CalibStats *st) {
    if (!st->gx || st->gx_spill) return;
    size_t bytes = (size_t)st->sh.n_layers * layer_elems(&st->sh, CALIB_X) * sizeof(double);
    double *p = spill_copy(st->gx, bytes);
    if (!p) return;                             /* no file: G_X stays where it is */
    free(st->gx);
    st->gx = p;
    st->gx_spill = bytes;
}

static int set_str(char **dst, const char *s) {
    if (!s) return AL_OK;
    char *c = al_strdup(s);
    if (!c) return AL_ERR;
    free(*dst);
    *dst = c;
    return AL_OK;
}

const char *const CALIB_PROV_KEYS[CALIB_NPROV] = {"collector", "created", "torch", "transformers", "dtype", "devices",
                                                  "world_size"};

void calib_provenance(const CalibStats *st, char *buf, size_t cap) {
    static const char *const label[CALIB_NPROV] = {"", "", "torch ", "transformers ", "", "", ""};
    char *const *p = st->prov;                  /* collector, created, torch, transformers, dtype, devices, world */
    char extra[512] = "";
    size_t n = 0;
    for (int i = 2; i < CALIB_NPROV && n < sizeof extra; i++)
        if (p[i])
            n += (size_t)snprintf(extra + n, sizeof extra - n, "%s%s%s%s", n ? ", " : "", label[i], p[i],
                                  i < 6 ? "" : strcmp(p[i], "1") == 0 ? " process" : " processes");
    snprintf(buf, cap, "%s%s%s%s%s%s%s", p[0] ? "collected by " : "", p[0] ? p[0] : "", p[1] ? " on " : "",
             p[1] ? p[1] : "", *extra ? " (" : "", extra, *extra ? ")" : "");
}

int calib_set_meta(CalibStats *st, const char *model, const char *source, const char *split) {
    if (set_str(&st->model, model) || set_str(&st->source, source) || set_str(&st->split, split)) return AL_ERR;
    return AL_OK;
}

/* ================================================================ accumulation */

/* st->buf with room for n doubles. */
static double *scratch(CalibStats *st, size_t n) {
    if (n <= st->buf_cap) return st->buf;
    double *b = realloc(st->buf, n * sizeof *b);
    if (!b) { al_err("out of memory for %zu double%s of calibration scratch", n, al_s(n)); return NULL; }
    st->buf = b;
    st->buf_cap = n;
    return b;
}

/* C (n x n, upper) += Xᵀ X for the columns [c0, c0 + n) of T rows of x (stride ld), converted to
 * double in blocks of ROW_BLOCK rows. */
static int syrk_cols(CalibStats *st, const float *x, size_t T, size_t ld, size_t c0, size_t n, double *C) {
    double *b = scratch(st, (size_t)ROW_BLOCK * n);
    if (!b) return AL_ERR;
    for (size_t t0 = 0; t0 < T; t0 += ROW_BLOCK) {
        size_t nr = T - t0 < ROW_BLOCK ? T - t0 : ROW_BLOCK;
        for (size_t t = 0; t < nr; t++) vec_f2d(x + (t0 + t) * ld + c0, n, b + t * n);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)nr, 1.0, b, (int)n, 1.0, C, (int)n);
    }
    return AL_OK;
}

/* P (n x n upper, packed: packed_row) += Xᵀ X over T rows of x (stride ld), n = hidden: each block of
 * ROW_BLOCK rows formed by dsyrk into the one full n x n scratch st->xfull (beta 0) and added to the
 * triangle, which is what dsyrk's beta 1 does to the full matrix (C + the block's sums: the same
 * numbers), without holding the lower triangle of every layer. */
static int syrk_packed(CalibStats *st, const float *x, size_t T, size_t ld, size_t n, double *P) {
    double *b = scratch(st, (size_t)ROW_BLOCK * n);
    if (!b) return AL_ERR;
    if (!st->xfull && !(st->xfull = al_malloc3(n, n, sizeof(double), "an attention-input Gram block"))) return AL_ERR;
    double *C = st->xfull;
    for (size_t t0 = 0; t0 < T; t0 += ROW_BLOCK) {
        size_t nr = T - t0 < ROW_BLOCK ? T - t0 : ROW_BLOCK;
        for (size_t t = 0; t < nr; t++) vec_f2d(x + (t0 + t) * ld, n, b + t * n);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)nr, 1.0, b, (int)n, 0.0, C, (int)n);
        for (size_t i = 0; i < n; i++) {
            double *p = P + packed_row(n, i) - i;
            for (size_t j = i; j < n; j++) p[j] += C[i * n + j];
        }
    }
    return AL_OK;
}

/* The kind whose rows count as tokens (and end sequences): X when G_X is kept, else K. */
static calib_which count_kind(const CalibStats *st) { return st->has_x ? CALIB_X : CALIB_K; }

/* S_X[layer] += Σ_t x_t over T rows (stride ld). */
static void sum_rows(CalibStats *st, int layer, const float *x, size_t T, size_t ld) {
    if (!st->sx) return;
    size_t n = (size_t)st->sh.hidden;
    double *acc = st->sx + (size_t)layer * n;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < n; j++) acc[j] += x[t * ld + j];
}

int calib_add(CalibStats *st, calib_which which, int layer, const float *x, size_t T, size_t ld) {
    const CalibShape *sh = &st->sh;
    if (layer < 0 || layer >= sh->n_layers)
        return al_err("calibration: layer %d is out of range 0..%d", layer, sh->n_layers - 1);
    if (which == CALIB_X && !st->has_x) return AL_OK;
    size_t G = (size_t)sh->n_kv_heads, H = (size_t)sh->n_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v;
    size_t heads = which == CALIB_Q ? H : which == CALIB_X ? 1 : G;
    size_t dim = which == CALIB_V ? dv : which == CALIB_X ? (size_t)sh->hidden : d;
    if (ld < heads * dim)
        return al_err("calibration: %s rows of layer %d have stride %zu, less than %zu head%s x %zu", which_name(which),
                      layer, ld, heads, al_s(heads), dim);
    double *base = which == CALIB_X && st->gx_hold && layer == st->gx_hold_layer
                       ? st->gx_hold : gram_base(st, which) + (size_t)layer * layer_elems(sh, which);
    size_t m = H / G;
    for (size_t h = 0; which != CALIB_X && h < heads; h++) {
        size_t g = which == CALIB_Q ? h / m : h;      /* queries add into their KV head's group */
        if (syrk_cols(st, x, T, ld, h * dim, dim, base + g * dim * dim)) return AL_ERR;
    }
    if (which == CALIB_X && syrk_packed(st, x, T, ld, dim, base)) return AL_ERR;
    if (which == CALIB_X) sum_rows(st, layer, x, T, ld);
    if (which == count_kind(st)) st->tokens[layer] += T;
    return AL_OK;
}

void calib_seq_done(CalibStats *st, int layer) {
    if (layer >= 0 && layer < st->sh.n_layers) st->seqs[layer]++;
}

int calib_add_act(CalibStats *st, const FwdAct *a) {
    calib_which w;
    switch (a->kind) {
    case FWD_K_ROPE: w = CALIB_K; break;
    case FWD_Q_ROPE: w = CALIB_Q; break;
    case FWD_V: w = CALIB_V; break;
    case FWD_ATTN_IN: w = CALIB_X; break;
    default: return AL_OK;
    }
    const CalibShape *sh = &st->sh;
    size_t want_heads = w == CALIB_Q ? (size_t)sh->n_heads : w == CALIB_X ? 1 : (size_t)sh->n_kv_heads;
    size_t want_dim = w == CALIB_V ? (size_t)sh->d_v : w == CALIB_X ? (size_t)sh->hidden : (size_t)sh->d_qk;
    if (a->heads != want_heads || a->head_dim != want_dim)
        return al_err("calibration: the forward pass gives %s of layer %d as %zu head%s x %zu, the statistics expect "
                      "%zu x %zu", fwd_act_name(a->kind), a->layer, a->heads, al_s(a->heads), a->head_dim, want_heads,
                      want_dim);
    return calib_add(st, w, a->layer, a->x, a->T, a->ld);
}

unsigned calib_hook_mask(const CalibStats *st) {
    return FWD_K_ROPE | FWD_Q_ROPE | FWD_V | (st->has_x ? FWD_ATTN_IN : 0u);
}

/* ================================================================ the forward-pass driver */

typedef struct {
    CalibStats *st;
    size_t seqlen;
} RunCtx;

/* The held layer's G_X back into the mapping (one write of its pages), then layer's (>= 0) held. */
static void gx_hold_switch(CalibStats *st, int layer) {
    size_t n = layer_elems(&st->sh, CALIB_X);
    if (st->gx_hold_layer >= 0) {
        memcpy(st->gx + (size_t)st->gx_hold_layer * n, st->gx_hold, n * sizeof(double));
        st->gx_hold_flushes++;
    }
    st->gx_hold_layer = layer;
    if (layer >= 0) memcpy(st->gx_hold, st->gx + (size_t)layer * n, n * sizeof(double));
}

static int run_hook(const FwdAct *a, void *ud) {
    RunCtx *c = ud;
    if (c->st->gx_hold && a->kind == FWD_ATTN_IN && a->layer != c->st->gx_hold_layer)
        gx_hold_switch(c->st, a->layer);           /* layer-major: a layer's windows begin */
    int rc = calib_add_act(c->st, a);
    fwd_act_kind last = count_kind(c->st) == CALIB_X ? FWD_ATTN_IN : FWD_K_ROPE;
    if (rc == AL_OK && a->kind == last && a->pos0 + a->T == c->seqlen) calib_seq_done(c->st, a->layer);
    return rc;
}

int calib_run(CalibStats *st, Forward *f, const int *tokens, size_t nseq, size_t seqlen) {
    if (seqlen == 0 || nseq == 0) return al_err("calibration needs at least one sequence of at least one token");
    if (seqlen > fwd_max_ctx(f))
        return al_err("calibration: seqlen %zu is longer than the model's context %zu", seqlen, fwd_max_ctx(f));
    RunCtx c = {.st = st, .seqlen = seqlen};
    FwdHooks h = {.mask = calib_hook_mask(st), .fn = run_hook, .ud = &c, .chunk = 1024, .whole_seqs = true};
    st->gx_hold_layer = -1;
    st->gx_hold_flushes = 0;
    bool lm = fwd_layer_major_refusal(f) == NULL;      /* layer-major where the model allows: asked once */
    bool hold = st->has_x && st->gx_spill && lm;       /* else G_X is summed in place */
    if (hold && !(st->gx_hold = al_malloc3(layer_elems(&st->sh, CALIB_X), 1, sizeof(double), "a layer's G_X")))
        return AL_ERR;
    int rc = fwd_run_hooked_route(f, &h, tokens, nseq, seqlen, 0, lm);
    gx_hold_switch(st, -1);
    free(st->gx_hold);
    st->gx_hold = NULL;
    if (st->seqlen == 0 || st->seqlen == seqlen) st->seqlen = seqlen;
    free(st->xfull);                  /* the run's scratch: hidden^2 doubles, not kept past it */
    st->xfull = NULL;
    calib_spill(st);
    return rc;
}

/* ================================================================ reading */

static size_t which_dim(const CalibShape *sh, calib_which w) {
    return w == CALIB_V ? (size_t)sh->d_v : w == CALIB_X ? (size_t)sh->hidden : (size_t)sh->d_qk;
}

int calib_gram(const CalibStats *st, calib_which which, int layer, int g, double *out) {
    const CalibShape *sh = &st->sh;
    if (layer < 0 || layer >= sh->n_layers)
        return al_err("calibration: layer %d is out of range 0..%d", layer, sh->n_layers - 1);
    if (which == CALIB_X && !st->gx)
        return al_err("calibration: attention-input statistics were not collected (calibrate ... inputs on)");
    if (which != CALIB_X && (g < 0 || g >= sh->n_kv_heads))
        return al_err("calibration: KV head %d is out of range 0..%d", g, sh->n_kv_heads - 1);
    size_t n = which_dim(sh, which);
    const double *src = gram_base(st, which) + (size_t)layer * layer_elems(sh, which) + (which == CALIB_X ? 0 : (size_t)g * n * n);
    for (size_t i = 0; i < n; i++) {
        const double *row = which == CALIB_X ? src + packed_row(n, i) - i : src + i * n;   /* row[j], j >= i */
        for (size_t j = i; j < n; j++) out[i * n + j] = out[j * n + i] = row[j];
    }
    return AL_OK;
}

static _Atomic size_t second_moment_forms;     /* calib_second_moment_forms */

size_t calib_second_moment_forms(void) { return second_moment_forms; }

int calib_second_moment(const CalibStats *st, int layer, double *out) {
    if (calib_gram(st, CALIB_X, layer, 0, out)) return AL_ERR;
    size_t n = (size_t)st->sh.hidden, T = st->tokens[layer];
    if (T == 0) return al_err("calibration: layer %d has seen no tokens", layer);
    for (size_t i = 0; i < n * n; i++) out[i] /= (double)T;
    second_moment_forms++;
    return AL_OK;
}

int calib_mean(const CalibStats *st, int layer, double *out) {
    if (layer < 0 || layer >= st->sh.n_layers)
        return al_err("calibration: layer %d is out of range 0..%d", layer, st->sh.n_layers - 1);
    if (!st->sx)
        return al_err("calibration: the statistics keep no attention-input mean (%s)",
                      st->has_x ? "a version-1 file: calibrate again" : "calibrate ... inputs on");
    size_t n = (size_t)st->sh.hidden, T = st->tokens[layer];
    if (T == 0) return al_err("calibration: layer %d has seen no tokens", layer);
    for (size_t j = 0; j < n; j++) out[j] = st->sx[(size_t)layer * n + j] / (double)T;
    return AL_OK;
}

void calib_free_arrays(int n_layers, double **sigma, double **mu) {
    for (int l = 0; l < n_layers; l++) {
        if (sigma) free(sigma[l]);
        if (mu) free(mu[l]);
    }
    free(sigma);
    free(mu);
}

int calib_input_arrays(const CalibStats *st, int lo, int hi, double ***sigma, double ***mu) {
    *sigma = *mu = NULL;
    int L = st->sh.n_layers;
    size_t n = (size_t)st->sh.hidden;
    bool whole = hi < 0;                        /* the whole model: the layers that saw tokens */
    if (hi < 0) hi = L - 1;
    if (lo < 0 || lo > hi || hi >= L) return al_err("calibration: layers %d-%d out of range 0-%d", lo, hi, L - 1);
    double **S = al_calloc((size_t)L, sizeof *S, "per-layer second moments");
    double **M = al_calloc((size_t)L, sizeof *M, "per-layer means");
    int rc = S && M ? AL_OK : AL_ERR;
    for (int l = lo; rc == AL_OK && l <= hi; l++) {
        if (whole && st->tokens[l] == 0) continue;   /* no softmax attention (Nemotron-H's Mamba-2 / MLP blocks) */
        if (!(S[l] = al_malloc3(n, n, sizeof(double), "an attention-input second moment"))) rc = AL_ERR;
        if (rc == AL_OK) rc = calib_second_moment(st, l, S[l]);
        if (rc == AL_OK && st->sx && !(M[l] = al_malloc3(n, 1, sizeof(double), "an attention-input mean"))) rc = AL_ERR;
        if (rc == AL_OK && st->sx) rc = calib_mean(st, l, M[l]);
    }
    if (rc) { calib_free_arrays(L, S, M); return AL_ERR; }
    *sigma = S;
    *mu = M;
    return AL_OK;
}

/* A shape in words: "2 layers, 1 head, 1 KV head, dims 64 / 64, hidden 128". */
static void shape_text(char *dst, size_t cap, const CalibShape *sh) {
    snprintf(dst, cap, "%d layer%s, %d head%s, %d KV head%s, dims %d / %d, hidden %d", sh->n_layers, al_s(sh->n_layers),
             sh->n_heads, al_s(sh->n_heads), sh->n_kv_heads, al_s(sh->n_kv_heads), sh->d_qk, sh->d_v, sh->hidden);
}

int calib_check_model(const CalibStats *st, const Model *m) {
    CalibShape sh;
    if (calib_shape_of(m, &sh)) return AL_ERR;
    const CalibShape *a = &st->sh;
    if (a->n_layers != sh.n_layers || a->n_heads != sh.n_heads || a->n_kv_heads != sh.n_kv_heads ||
        a->d_qk != sh.d_qk || a->d_v != sh.d_v || a->hidden != sh.hidden) {
        char had[160], want[160];
        shape_text(had, sizeof had, a);
        shape_text(want, sizeof want, &sh);
        return al_err("the calibration statistics (%s%s%s) do not fit model %s (%s): calibrate this model", had,
                      st->model ? ", from " : "", st->model ? st->model : "", m->name ? m->name : m->path, want);
    }
    return AL_OK;
}

/* ================================================================ text windows */

int calib_windows(size_t ntok, size_t seqlen, calib_split split, size_t nmax, size_t *first, size_t *count) {
    *first = *count = 0;
    if (seqlen == 0) return al_err("seqlen must be at least 1");
    size_t W = ntok / seqlen;
    if (W == 0)
        return al_err("the text has %zu token%s, fewer than one window of seqlen %zu: use a longer text or a smaller "
                      "seqlen", ntok, al_s(ntok), seqlen);
    size_t nvalid = W < 2 ? 0 : (W / 10 > 0 ? W / 10 : 1);
    size_t lo = split == CALIB_TRAIN ? 0 : W - nvalid, n = split == CALIB_TRAIN ? W - nvalid : nvalid;
    if (n == 0)
        return al_err("the text has %zu token%s: %zu window%s of %zu, too few for a %s split (the last tenth, at "
                      "least one window, is validation, the rest training; two windows are needed)",
                      ntok, al_s(ntok), W, al_s(W), seqlen, split == CALIB_TRAIN ? "training" : "validation");
    *first = lo;
    *count = nmax && nmax < n ? nmax : n;
    return AL_OK;
}

/* ================================================================ files */

static int meta_int(st_writer *w, const char *key, long long v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    return st_writer_meta(w, key, b);
}

/* Adds layer l's Gram of one kind, symmetrized, as an F64 tensor. */
static int add_gram(st_writer *w, const CalibStats *st, calib_which which, int l, const char *suffix, double *tmp) {
    const CalibShape *sh = &st->sh;
    size_t n = which_dim(sh, which), heads = which == CALIB_X ? 1 : (size_t)sh->n_kv_heads;
    for (size_t g = 0; g < heads; g++)
        if (calib_gram(st, which, l, (int)g, tmp + g * n * n)) return AL_ERR;
    char name[64];
    snprintf(name, sizeof name, "layers.%d.%s", l, suffix);
    size_t shape[3] = {heads, n, n};
    return which == CALIB_X ? st_writer_add(w, name, DT_F64, 2, shape + 1, tmp, n * n * sizeof(double))
                            : st_writer_add(w, name, DT_F64, 3, shape, tmp, heads * n * n * sizeof(double));
}

/* Adds layer l's S_X as an F64 tensor (hidden). */
static int add_sum(st_writer *w, const CalibStats *st, int l) {
    char name[64];
    size_t n = (size_t)st->sh.hidden;
    snprintf(name, sizeof name, "layers.%d.sum_x", l);
    return st_writer_add(w, name, DT_F64, 1, &n, st->sx + (size_t)l * n, n * sizeof(double));
}

/* The provenance keys: those st carries (from a loaded file), else this attnlab's. */
static int save_provenance(st_writer *w, const CalibStats *st) {
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%S+00:00", gmtime(&t));
    if (!st->prov[0]) return st_writer_meta(w, "collector", "attnlab calibrate") || st_writer_meta(w, "created", now);
    for (int i = 0; i < CALIB_NPROV; i++)
        if (st->prov[i] && st_writer_meta(w, CALIB_PROV_KEYS[i], st->prov[i])) return AL_ERR;
    return AL_OK;
}

int calib_save(const CalibStats *st, const char *path) {
    const CalibShape *sh = &st->sh;
    size_t biggest = layer_elems(sh, CALIB_K);
    if (layer_elems(sh, CALIB_V) > biggest) biggest = layer_elems(sh, CALIB_V);
    size_t nx = (size_t)sh->hidden * (size_t)sh->hidden;     /* G_X written full */
    if (st->has_x && nx > biggest) biggest = nx;
    double *tmp = al_malloc3(biggest, 1, sizeof(double), "calibration file buffer");
    int64_t *counts = al_malloc3((size_t)sh->n_layers, 2, sizeof(int64_t), "calibration counts");
    st_writer *w = st_writer_new();
    int rc = tmp && counts && w ? AL_OK : al_err("out of memory writing %s", path);
    if (rc == AL_OK)
        rc = st_writer_meta(w, "format", CALIB_FORMAT) || meta_int(w, "version", CALIB_VERSION) ||
             meta_int(w, "n_layers", sh->n_layers) || meta_int(w, "n_heads", sh->n_heads) ||
             meta_int(w, "n_kv_heads", sh->n_kv_heads) || meta_int(w, "d_qk", sh->d_qk) || meta_int(w, "d_v", sh->d_v) ||
             meta_int(w, "hidden", sh->hidden) || meta_int(w, "has_x", st->has_x) ||
             meta_int(w, "seqlen", (long long)st->seqlen) || st_writer_meta(w, "keys", "after RoPE") ||
             (st->model && st_writer_meta(w, "model", st->model)) ||
             (st->source && st_writer_meta(w, "source", st->source)) ||
             (st->split && st_writer_meta(w, "split", st->split)) || save_provenance(w, st);
    for (int l = 0; rc == AL_OK && l < sh->n_layers; l++) {
        rc = add_gram(w, st, CALIB_K, l, "gram_k", tmp) || add_gram(w, st, CALIB_Q, l, "gram_q", tmp) ||
             add_gram(w, st, CALIB_V, l, "gram_v", tmp) || (st->has_x && add_gram(w, st, CALIB_X, l, "gram_x", tmp)) ||
             (st->sx && add_sum(w, st, l));
        counts[2 * l] = (int64_t)st->tokens[l];
        counts[2 * l + 1] = (int64_t)st->seqs[l];
    }
    size_t cshape[2] = {(size_t)sh->n_layers, 2};
    if (rc == AL_OK) rc = st_writer_add(w, "counts", DT_I64, 2, cshape, counts, (size_t)sh->n_layers * 2 * sizeof(int64_t));
    if (rc == AL_OK) rc = st_writer_write(w, path);
    if (rc) rc = al_err_ctx("writing calibration statistics to %s", path);
    st_writer_free(w);
    free(tmp);
    free(counts);
    return rc ? AL_ERR : AL_OK;
}

/* Integer metadata key of f (error naming the file when absent or not a number). */
static int read_meta_int(const st_file *f, const char *key, long long *v) {
    const char *s = st_meta(f, key);
    char *end;
    errno = 0;
    long long x = s ? strtoll(s, &end, 10) : 0;
    if (!s || end == s || *end || errno || x < 0 || x > (1LL << 40))
        return al_err("%s: metadata '%s' is %s%s%s; is this a file written by `calib save`?", st_path(f), key,
                      s ? "'" : "missing", s ? s : "", s ? "', not a count" : "");
    *v = x;
    return AL_OK;
}

/* Copies tensor `name` (F64, heads x n x n, or n x n when heads == 0) into dst. */
static int read_gram(const st_file *f, const char *name, size_t heads, size_t n, double *dst) {
    const st_entry *e = st_find(f, name);
    if (!e) return al_err("%s: tensor '%s' is missing", st_path(f), name);
    bool ok = e->dtype == DT_F64 &&
              (heads ? e->ndim == 3 && e->shape[0] == heads && e->shape[1] == n && e->shape[2] == n
                     : e->ndim == 2 && e->shape[0] == n && e->shape[1] == n);
    if (!ok)
        return al_err("%s: tensor '%s' should be F64 of shape (%s%zu, %zu), found %s with %d dim%s", st_path(f), name,
                      heads ? "G, " : "", n, n, dt_name(e->dtype), e->ndim, al_s(e->ndim));
    const double *src = st_data(f, e);
    if (heads) memcpy(dst, src, heads * n * n * sizeof(double));
    for (size_t i = 0; !heads && i < n; i++)           /* G_X: its upper triangle, packed */
        memcpy(dst + packed_row(n, i), src + i * n + i, (n - i) * sizeof(double));
    return AL_OK;
}

/* Copies tensor `name` (F64, n) into dst. */
static int read_sum(const st_file *f, const char *name, size_t n, double *dst) {
    const st_entry *e = st_find(f, name);
    if (!e) return al_err("%s: tensor '%s' is missing", st_path(f), name);
    if (e->dtype != DT_F64 || e->ndim != 1 || e->shape[0] != n)
        return al_err("%s: tensor '%s' should be F64 of shape (%zu), found %s with %d dim%s", st_path(f), name, n,
                      dt_name(e->dtype), e->ndim, al_s(e->ndim));

    memcpy(dst, st_data(f, e), n * sizeof(double));
    return AL_OK;
}

int calib_load(const char *path, CalibStats **out) {
    *out = NULL;
    st_file *f;
    if (al_check_regular(path, "calibration") != AL_OK || st_open(path, &f)) return AL_ERR;
    const char *fmt = st_meta(f, "format");
    if (!fmt || strcmp(fmt, CALIB_FORMAT) != 0) {     /* fmt lives in f: the message is made before closing */
        al_err("%s: not a calibration file (metadata format is %s%s%s, want '" CALIB_FORMAT "'; write one with "
               "`calib save`)", path, fmt ? "'" : "missing", fmt ? fmt : "", fmt ? "'" : "");
        st_close(f);
        return AL_ERR;
    }
    long long ver = 0, L = 0, H = 0, G = 0, d = 0, dv = 0, D = 0, hx = 0, seqlen = 0;
    int rc = read_meta_int(f, "version", &ver) || read_meta_int(f, "n_layers", &L) || read_meta_int(f, "n_heads", &H) ||
             read_meta_int(f, "n_kv_heads", &G) || read_meta_int(f, "d_qk", &d) || read_meta_int(f, "d_v", &dv) ||
             read_meta_int(f, "hidden", &D) || read_meta_int(f, "has_x", &hx) || read_meta_int(f, "seqlen", &seqlen);
    if (rc == AL_OK && (ver < 1 || ver > CALIB_VERSION))
        rc = al_err("%s: calibration file version %lld; this attnlab reads versions 1-%d", path, ver, CALIB_VERSION);
    bool dims_ok = rc == AL_OK && L > 0 && L < 100000 && H > 0 && H < 100000 && G > 0 && G <= H && H % G == 0 && d > 0 &&
                   d < 65536 && dv > 0 && dv < 65536 && D > 0 && D < 1000000;
    if (rc == AL_OK && !dims_ok)
        rc = al_err("%s: implausible shape in the metadata (layers %lld, heads %lld, KV heads %lld, dims %lld / %lld, "
                    "hidden %lld)", path, L, H, G, d, dv, D);
    CalibStats *st = NULL;
    CalibShape sh = {(int)L, (int)H, (int)G, (int)d, (int)dv, (int)D};
    if (rc == AL_OK) rc = calib_new(&sh, hx != 0, &st);
    if (rc == AL_OK && ver < 2) { free(st->sx); st->sx = NULL; }      /* version 1: no mean */
    for (int l = 0; rc == AL_OK && l < sh.n_layers; l++) {
        char name[64];
        size_t off = (size_t)l * layer_elems(&sh, CALIB_K);
        snprintf(name, sizeof name, "layers.%d.gram_k", l);
        rc = read_gram(f, name, (size_t)G, (size_t)d, st->gk + off);
        snprintf(name, sizeof name, "layers.%d.gram_q", l);
        if (rc == AL_OK) rc = read_gram(f, name, (size_t)G, (size_t)d, st->gq + off);
        snprintf(name, sizeof name, "layers.%d.gram_v", l);
        if (rc == AL_OK) rc = read_gram(f, name, (size_t)G, (size_t)dv, st->gv + (size_t)l * layer_elems(&sh, CALIB_V));
        snprintf(name, sizeof name, "layers.%d.gram_x", l);
        if (rc == AL_OK && st->has_x) rc = read_gram(f, name, 0, (size_t)D, st->gx + (size_t)l * layer_elems(&sh, CALIB_X));
        snprintf(name, sizeof name, "layers.%d.sum_x", l);
        if (rc == AL_OK && st->sx) rc = read_sum(f, name, (size_t)D, st->sx + (size_t)l * (size_t)D);
    }
    if (rc == AL_OK) {
        const st_entry *e = st_find(f, "counts");
        if (!e || e->dtype != DT_I64 || e->ndim != 2 || e->shape[0] != (size_t)L || e->shape[1] != 2)
            rc = al_err("%s: tensor 'counts' should be I64 of shape (%lld, 2)", path, L);
        else {
            const int64_t *c = st_data(f, e);
            for (int l = 0; l < sh.n_layers; l++) {
                if (c[2 * l] < 0 || c[2 * l + 1] < 0) { rc = al_err("%s: negative counts for layer %d", path, l); break; }
                st->tokens[l] = (size_t)c[2 * l];
                st->seqs[l] = (size_t)c[2 * l + 1];
            }
        }
    }
    if (rc == AL_OK) {
        st->seqlen = (size_t)seqlen;
        rc = calib_set_meta(st, st_meta(f, "model"), st_meta(f, "source"), st_meta(f, "split"));
        for (int i = 0; rc == AL_OK && i < CALIB_NPROV; i++) rc = set_str(&st->prov[i], st_meta(f, CALIB_PROV_KEYS[i]));
    }
    st_close(f);
    if (rc) { calib_free(st); return AL_ERR; }
    calib_spill(st);
    *out = st;
    return AL_OK;
}
