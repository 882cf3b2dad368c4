/* spectral_table.c -- the spectral health of heads as tables and one head's spectrum by matrix
 * kind (spectral_table.h). */
#include "spectral_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spectral_stats.h"
#include "workspace.h"

Table *health_table_new(bool per_head) {
    static const char *const names[] = {"layer", "head", "matrix", "rank", "stable_rank", "entropy_rank",
                                        "participation", "norm", "alpha", "alpha_sigma", "xmin", "ks", "tail",
                                        "mp_edge", "spikes"};
    return per_head ? table_new_v(15, names) : table_new_v(13, names + 2);
}

/* A number, or a null cell where it is not defined (no power-law fit). */
static void num_or_null(Table *t, double v) {
    if (isfinite(v)) table_num(t, v);
    else table_null(t);
}

static int cmp_num(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of column c over rows r[0..n) of t (cells not numbers skipped; NaN when none);
 * *count: how many were numbers. v: scratch of n doubles. */
static double col_median(const Table *t, const size_t *r, size_t n, size_t c, double *v, size_t *count) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const Cell *x = table_cell(t, r[i], c);
        if (x->kind == CELL_NUM || x->kind == CELL_INT) v[k++] = x->num;
    }
    if (count) *count = k;
    if (!k) return NAN;
    qsort(v, k, sizeof *v, cmp_num);
    return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

/* The summary row of rows r[0..n) of t (one layer, one matrix). */
static int summary_row(Table *s, const Table *t, const size_t *r, size_t n, double *v) {
    size_t fitted;
    double nmax = 0, spikes = 0;
    for (size_t i = 0; i < n; i++) {
        nmax = fmax(nmax, table_cell(t, r[i], 7)->num);
        spikes += table_cell(t, r[i], 14)->num;
    }
    if (table_row(s)) return AL_ERR;
    table_int(s, (long long)table_cell(t, r[0], 0)->num);
    table_str(s, table_cell(t, r[0], 2)->str);
    table_int(s, (long long)n);
    for (size_t c = 3; c <= 6; c++) table_num(s, col_median(t, r, n, c, v, NULL));
    table_num(s, nmax);
    num_or_null(s, col_median(t, r, n, 8, v, &fitted));
    table_int(s, (long long)fitted);
    table_int(s, (long long)spikes);
    return AL_OK;
}

Table *health_table_summary(const Table *t) {
    Table *s = table_new(11, "layer", "matrix", "heads", "rank_median", "stable_rank_median", "entropy_rank_median",
                         "participation_median", "norm_max", "alpha_median", "alpha_fitted", "spikes");
    size_t *r = al_calloc(t->nrows ? t->nrows : 1, sizeof *r, "rows");
    double *v = al_calloc(t->nrows ? t->nrows : 1, sizeof *v, "values");
    int rc = s && r && v ? AL_OK : AL_ERR;
    for (size_t i = 0, j; rc == AL_OK && i < t->nrows; i = j) {
        double layer = table_cell(t, i, 0)->num;
        for (j = i; j < t->nrows && table_cell(t, j, 0)->num == layer; j++) {}
        for (size_t k = i; rc == AL_OK && k < i + 3 && k < j; k++) {   /* the layer's first three rows name its matrices */
            size_t n = 0;
            for (size_t q = i; q < j; q++)
                if (!strcmp(table_cell(t, q, 2)->str, table_cell(t, k, 2)->str)) r[n++] = q;
            rc = summary_row(s, t, r, n, v);
        }
    }
    free(r);
    free(v);
    if (rc) { table_free(s); return NULL; }
    return s;
}

/* One row from the statistics st of sp. */
static int table_put(Table *t, bool per_head, int layer, int head, const char *matrix, const Spectrum *sp,
                     const SStats *st, double tau) {
    if (table_row(t)) return AL_ERR;
    if (per_head) { table_int(t, layer); table_int(t, head); }
    table_str(t, matrix);
    table_int(t, (long long)spectra_effective_rank(sp->sigma, sp->p, tau));
    table_num(t, st->stable_rank);
    table_num(t, st->entropy_rank);
    table_num(t, st->participation);
    table_num(t, st->norm);
    num_or_null(t, st->fit.alpha);
    num_or_null(t, st->fit.sigma);
    num_or_null(t, st->fit.xmin);
    num_or_null(t, st->fit.ks);
    table_int(t, (long long)st->fit.n_tail);
    table_num(t, st->mp_edge);
    table_int(t, (long long)st->mp_spikes);
    return AL_OK;
}

int health_table_row(Table *t, bool per_head, int layer, int head, const char *matrix, const Spectrum *sp,
                     double tau) {
    SStats st;
    if (sstats_compute(sp->sigma, sp->p, sp->m, sp->n, &st)) return AL_ERR;
    return table_put(t, per_head, layer, head, matrix, sp, &st, tau);
}

/* The spectra of the cached layers of q, three per head (A, B, fused), into sp (NULL: counts). */
static size_t layer_spectra(const FarrState *st, const FarrQuery *q, const Spectrum **sp) {
    size_t n = 0;
    for (int L = q->lo; L <= q->hi; L++) {
        const FarrLayer *fl = farr_state_get_layer(st, q->m, q->kind, L, q->offset);
        for (int h = 0; fl && h < fl->n_heads; h++, n += 3)
            if (sp) sp[n] = fl->a[h], sp[n + 1] = fl->b[h], sp[n + 2] = fl->fused[h];
    }
    return n;
}

int health_table_layers(Table *t, const FarrState *st, const FarrQuery *q, double tau) {
    size_t n = layer_spectra(st, q, NULL), i = 0;
    const Spectrum **sp = al_calloc(n ? n : 1, sizeof *sp, "spectra");
    SStats *ss = al_calloc(n ? n : 1, sizeof *ss, "spectral statistics");
    int rc = sp && ss ? AL_OK : AL_ERR;
    if (rc == AL_OK) layer_spectra(st, q, sp);
    if (rc == AL_OK) rc = sstats_many(sp, n, ss);
    for (int L = q->lo; rc == AL_OK && L <= q->hi; L++) {
        const FarrLayer *fl = farr_state_get_layer(st, q->m, q->kind, L, q->offset);
        for (int h = 0; fl && rc == AL_OK && h < fl->n_heads; h++)
            for (int k = 0; k < 3 && rc == AL_OK; k++, i++) {
                const char *name = k == 2 ? farr_fused_name(q->kind) : farr_side_name(q->kind, k);
                if (sp[i]) rc = table_put(t, true, L, h, name, sp[i], &ss[i], tau);
            }
    }
    free(sp);
    free(ss);
    return rc;
}

int health_head_spectrum(Session *s, int mk, int layer, int head, int offset, const Spectrum **out, Spectrum **own) {
    static const int sides[] = {0, 1, 0, 1, 2, 2};
    static const char *const names[] = {"W_Q", "W_K", "W_V", "W_O", "W_Q W_K^T", "W_V W_O"};
    farr_kind kind = (mk == HEALTH_Q || mk == HEALTH_K || mk == HEALTH_QK) ? FARR_QK : FARR_VO;
    int side = sides[mk];
    Mat *W = NULL;
    *own = NULL;
    if (kind == FARR_QK && side != 2 && farr_side_alone(s->cur, side, layer, head, offset, &W)) return AL_ERR;
    if (W) {                      /* the projection alone: its own SVD (what `spectrum q|k` shows) */
        int rc = spectra_svd(W, 0, own);
        mat_free(W);
        *out = *own;
        return rc;
    }
    FarrState *st;
    const FarrLayer *fl;
    if (ws_farr(s, &st) || farr_state_layer(st, s->cur, kind, layer, offset, &fl)) return AL_ERR;
    if (head < 0 || head >= fl->n_heads)
        return al_err("head %d is out of range: layer %d has %d head%s (0-%d)", head, layer, fl->n_heads, al_s(fl->n_heads), fl->n_heads - 1);
    Spectrum *const *arr = side == 0 ? fl->a : side == 1 ? fl->b : fl->fused;
    if (!arr || !arr[head] || !arr[head]->p)
        return al_err("%s of layer %d head %d has no singular values", names[mk], layer, head);
    *out = arr[head];
    return AL_OK;
}
