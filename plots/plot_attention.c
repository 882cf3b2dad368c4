/* plot_attention.c -- attention patterns with token strings on both axes (one panel, or before /
 * after side by side) and head importance beside the fused rank (plot_attention.h). Presentation
 * only: the weights, perplexities and ranks come computed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "plot_attention.h"
#include "plot_int.h"

#define ATT_MAX_CELLS 400      /* most cells drawn along an axis; beyond, blocks keep their largest weight */
#define ATT_MAX_LABELS 64      /* most token labels along an axis */

/* ================================================================ colours and cells */

/* Sequential white -> blue (#0072B2) -> dark blue as cmap1: 0 is white. */
static void sequential_cmap(void) {
    static const PLFLT pos[] = {0.0, 0.5, 1.0};
    static const PLFLT r[] = {1.0, 86 / 255.0, 8 / 255.0};
    static const PLFLT g[] = {1.0, 160 / 255.0, 48 / 255.0};
    static const PLFLT b[] = {1.0, 210 / 255.0, 107 / 255.0};
    plscmap1n(256);
    plscmap1l(1, 3, pos, r, g, b, NULL);
}

/* Diverging blue - white - red (as plot_heatmap's) as cmap1, 0.5 white. */
static void diverging_cmap(void) {
    static const PLFLT pos[] = {0.0, 0.5, 1.0};
    static const PLFLT r[] = {33 / 255.0, 1.0, 178 / 255.0};
    static const PLFLT g[] = {102 / 255.0, 1.0, 24 / 255.0};
    static const PLFLT b[] = {172 / 255.0, 1.0, 43 / 255.0};
    plscmap1n(256);
    plscmap1l(1, 3, pos, r, g, b, NULL);
}

/* x(r, c) of a rows x cols grid pooled to nr x nc cells (each the value of largest magnitude in its
 * block) as plimagefr's column-major array (cells[ix][iy], iy 0 the top row). Caller frees. */
typedef double (*cell_fn)(const void *ud, size_t r, size_t c);
static PLFLT **cells_new(cell_fn x, const void *ud, size_t rows, size_t cols, size_t nr, size_t nc) {
    PLFLT **col = al_malloc(nc * sizeof(PLFLT *) + nc * nr * sizeof(PLFLT), "attention cells");
    if (!col) return NULL;
    PLFLT *data = (PLFLT *)(col + nc);
    for (size_t ix = 0; ix < nc; ix++) {
        col[ix] = data + ix * nr;
        size_t c0 = ix * cols / nc, c1 = (ix + 1) * cols / nc > c0 ? (ix + 1) * cols / nc : c0 + 1;
        for (size_t iy = 0; iy < nr; iy++) {
            size_t r0 = iy * rows / nr, r1 = (iy + 1) * rows / nr > r0 ? (iy + 1) * rows / nr : r0 + 1;
            double best = 0;
            for (size_t i = r0; i < r1 && i < rows; i++)
                for (size_t j = c0; j < c1 && j < cols; j++)
                    if (fabs(x(ud, i, j)) > fabs(best)) best = x(ud, i, j);
            col[ix][iy] = best;
        }
    }
    return col;
}

/* Draws a rows x cols grid into the current viewport with window (0, cols) x (rows, 0), colours lo..hi. */
static int draw_grid(cell_fn x, const void *ud, size_t rows, size_t cols, double lo, double hi, bool *pooled) {
    size_t nc = cols < ATT_MAX_CELLS ? (cols > 1 ? cols : 2) : ATT_MAX_CELLS;
    size_t nr = rows < ATT_MAX_CELLS ? (rows > 1 ? rows : 2) : ATT_MAX_CELLS;
    PLFLT **cells = cells_new(x, ud, rows, cols, nr, nc);
    if (!cells) return AL_ERR;
    *pooled = nc < cols || nr < rows;
    plwind(0.0, (double)cols, (double)rows, 0.0);
    double xext = (double)cols * (double)(nc - 1) / (double)nc, yext = (double)rows * (double)(nr - 1) / (double)nr;
    plimagefr((PLFLT_MATRIX)cells, (PLINT)nc, (PLINT)nr, 0.0, xext, 0.0, yext, lo, hi, lo, hi, NULL, NULL);
    free(cells);
    plcol0(PC_FG);
    return AL_OK;
}

/* A colour bar for lo..hi right of the current viewport, labelled `what`. */
static void colour_bar(double lo, double hi, const char *what) {
    PLFLT w, h, values[2] = {lo, hi}, ticks[1] = {0.0};
    const PLFLT *vals[1] = {values};
    PLINT n_values[1] = {2}, label_opts[1] = {PL_COLORBAR_LABEL_RIGHT}, sub_ticks[1] = {0};
    const char *labels[1] = {what}, *axis_opts[1] = {"bcfvtm"};
    plot_chr(0.8);
    plcol0(PC_FG);
    plcolorbar(&w, &h, PL_COLORBAR_GRADIENT, PL_POSITION_RIGHT | PL_POSITION_OUTSIDE | PL_POSITION_VIEWPORT, 0.015, 0.0,
               0.03, 1.0, PC_BG, PC_FG, 1, 0.0, 1.0, 0, 0.0, 1, label_opts, labels, 1, axis_opts, ticks, sub_ticks,
               n_values, vals);
    plot_chr(1.0);
}

/* ================================================================ attention patterns */

typedef struct { const float *P; size_t T; } att_ud;
static double att_cell(const void *ud, size_t r, size_t c) {
    const att_ud *a = ud;
    return a->P[r * a->T + c];
}

/* Token labels along the bottom (vertical text) and the left of the current viewport (T tokens). */
static void token_labels(const char *const *tokens, size_t T, bool left, double rel) {
    size_t step = T <= ATT_MAX_LABELS ? 1 : (T + ATT_MAX_LABELS - 1) / ATT_MAX_LABELS;
    char buf[160];
    plot_chr(rel);
    for (size_t j = 0; j < T; j += step) {
        double f = ((double)j + 0.5) / (double)T;
        plot_esc(buf, sizeof buf, tokens[j]);
        plmtex("bv", 0.4, f, 1.0, buf);
        if (left) plmtex("lv", 0.4, 1.0 - f, 1.0, buf);
    }
    plot_chr(1.0);
    PlotGeom *g = plot_geom();
    g->n_xticks = 0;
    for (size_t j = 0; j < T && g->n_xticks < GEOM_TICKS; j += step) g->xticks[g->n_xticks++] = (double)j;
}

/* Widest label in characters (UTF-8 code points), capped at 16. */
static size_t label_chars(const char *const *tokens, size_t T) {
    size_t w = 1;
    for (size_t i = 0; i < T; i++) {
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *)tokens[i]; *p; p++) n += (*p & 0xC0) != 0x80;
        w = n > w ? n : w;
    }
    return w < 16 ? w : 16;
}

int plot_attention(const PlotOpts *opts, const PlotAttnPanel *panels, size_t n, size_t T, const char *const *tokens) {
    if (n < 1 || n > 3 || T < 1)
        return al_err("plot attention: %zu panel%s of %zu token%s (1-3 panels, 1+ tokens)", n, al_s(n), T, al_s(T));
    double vmax = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < T * T; i++) {
            if (!isfinite(panels[k].P[i])) return al_err("plot attention: panel %zu has a non-finite weight", k);
            vmax = fmax(vmax, panels[k].P[i]);
        }
    if (vmax <= 0) vmax = 1;
    PlotPage pg;
    PlotOpts o = *opts;
    char sub[256];
    if (T > ATT_MAX_CELLS) {
        snprintf(sub, sizeof sub, "%s%s%zu token%s pooled to %d x %d cells (largest weight of each block)",
                 o.subtitle ? o.subtitle : "", o.subtitle ? "; " : "", T, al_s(T), ATT_MAX_CELLS, ATT_MAX_CELLS);

        o.subtitle = sub;
    }
    if (plot_page_open_design(&o, &pg, n == 1 ? 1000 : 1500, 800)) return AL_ERR;
    plot_page_title(&o, "Attention pattern (queries down, keys across)");
    double rel = T <= 24 ? 0.8 : T <= 48 ? 0.6 : 0.5, ex = plot_em_x(), ey = plot_em_y();
    double lab = (double)label_chars(tokens, T) * rel * 0.75 + 1.5;     /* label room, in characters */
    double x0 = (lab + 2.2) * ex, x1 = 1.0 - 9.0 * ex, B = (lab + 1.6) * ey, top = plot_top(&o, 0) - 1.8 * ey;
    double gap = 3.0 * ex, pw = (x1 - x0 - gap * (double)(n - 1)) / (double)n;
    double side = fmin(pw * pg.width, (top - B) * pg.height);   /* square panels ... */
    double tall = fmin(1.3 * side, (top - B) * pg.height);      /* ... or up to 1.3 times taller where room */
    top -= 0.5 * ((top - B) - tall / pg.height);                /* centred in the height left */
    x0 += 0.5 * (x1 - x0 - (double)n * side / pg.width - gap * (double)(n - 1));   /* and in the width */
    pw = side / pg.width;
    int rc = AL_OK;
    sequential_cmap();
    for (size_t k = 0; k < n && rc == AL_OK; k++) {
        double L = x0 + (double)k * (pw + gap), R = L + side / pg.width, Tp = top, Bp = top - tall / pg.height;
        plvpor(L, R, Bp, Tp);
        att_ud ud = {panels[k].P, T};
        bool pooled;
        rc = draw_grid(att_cell, &ud, T, T, 0.0, vmax, &pooled);
        plbox("bc", 0, 0, "bc", 0, 0);
        token_labels(tokens, T, k == 0, rel);
        plmtex("b", lab + 0.4, 0.5, 0.5, "key token (attended to)");
        if (k == 0) plmtex("l", lab + 1.0, 0.5, 0.5, "query token (attending)");
        char buf[256];
        plot_chr(0.9);
        plmtex("t", 0.6, 0.5, 0.5, plot_esc(buf, sizeof buf, panels[k].label ? panels[k].label : ""));
        plot_chr(1.0);
        if (k == 0) plot_geom_data_area(false);
        if (k == n - 1) colour_bar(0.0, vmax, "weight");
    }
    int rc2 = plot_page_close(&pg);
    return rc ? rc : rc2;
}

/* ================================================================ head importance */

typedef struct { const PlotHeadImportance *d; bool rank; } imp_ud;
static double imp_cell(const void *ud, size_t r, size_t c) {
    const imp_ud *u = ud;
    size_t i = r * u->d->n_heads + c;
    return u->rank ? (double)u->d->rank[i] : u->d->delta[i];
}

/* Bars of v[0..n) over heads 0..n-1 in the current viewport (window set by the caller), colour col. */
static void bars(const double *v, size_t n, PLINT col) {
    for (size_t h = 0; h < n; h++) {
        PLFLT x[4] = {(double)h - 0.35, (double)h + 0.35, (double)h + 0.35, (double)h - 0.35};
        PLFLT y[4] = {0, 0, v[h], v[h]};
        plcol0(v[h] < 0 ? PC_GREY : col);
        plfill(4, x, y);
    }
    plcol0(PC_FG);
}

/* The one-layer figure: delta ppl bars above rank bars. */
static void importance_layer(const PlotOpts *o, const PlotHeadImportance *d) {
    size_t H = d->n_heads;
    double lo = 0, hi = 0, *rk = al_malloc3(H, 1, sizeof *rk, "ranks");
    for (size_t h = 0; h < H; h++) { lo = fmin(lo, d->delta[h]); hi = fmax(hi, d->delta[h]); }
    if (hi - lo <= 0) hi = lo + 1;
    double pad = 0.08 * (hi - lo), ex = plot_em_x(), ey = plot_em_y(), top = plot_top(o, 0);
    top -= 2.0 * ey;                        /* room for the panel's own title */
    double mid = 0.5 * (top + 5.0 * ey), xs = fmax(1.0, plot_whole_step((double)H, 16));
    char buf[128];
    plvpor(8.0 * ex, 1.0 - 3.0 * ex, mid + 1.5 * ey, top);
    plwind(-0.6, (double)H - 0.4, lo < 0 ? lo - pad : 0, hi + pad);
    plot_geom_data_area(false);
    bars(d->delta, H, PC_VERMIL);
    plbox("bcst", xs, 0, "bcnstv", 0, 0);
    pljoin(-0.6, 0, (double)H - 0.4, 0);
    snprintf(buf, sizeof buf, "layer %d: ppl with the head removed - intact", d->layers[0]);
    plmtex("l", 5.5, 0.5, 0.5, "#gDppl");
    plmtex("t", 0.6, 0.5, 0.5, buf);
    plvpor(8.0 * ex, 1.0 - 3.0 * ex, 5.0 * ey, mid - 1.5 * ey);
    plwind(-0.6, (double)H - 0.4, 0, (double)(d->rank_cap > 0 ? d->rank_cap : 1) * 1.05);
    if (d->rank && rk) {
        for (size_t h = 0; h < H; h++) rk[h] = d->rank[h];
        bars(rk, H, PC_BLUE);
    }
    plbox("bcnst", xs, 0, "bcnstv", 0, 0);
    plmtex("l", 5.5, 0.5, 0.5, plot_esc(buf, sizeof buf, d->rank_name ? d->rank_name : "fused rank"));
    plmtex("b", 3.0, 0.5, 0.5, "head");
    free(rk);
}

/* The layer number of each row on the left (rows top to bottom, every k-th past 32): a hybrid's
 * attention layers are not contiguous, so the rows carry their own numbers. */
static void row_layer_labels(const int *layers, size_t n) {
    size_t step = n <= 32 ? 1 : (n + 31) / 32;
    char buf[24];
    for (size_t i = 0; i < n; i += step) {
        snprintf(buf, sizeof buf, "%d", layers[i]);
        plmtex("lv", 0.5, ((double)n - 0.5 - (double)i) / (double)n, 1.0, buf);
    }
}

/* The several-layer figure: two grids, delta (diverging) and rank (sequential). */
static int importance_grid(const PlotOpts *o, const PlotHeadImportance *d) {
    size_t Lr = d->n_layers, H = d->n_heads;
    double amax = 0, ex = plot_em_x(), ey = plot_em_y(), top = plot_top(o, 0) - 2.6 * ey;
    bool runs = d->layers[Lr - 1] - d->layers[0] == (int)Lr - 1;    /* contiguous layers: label them by number */
    double y0 = runs ? d->layers[0] : 0;
    for (size_t i = 0; i < Lr * H; i++) amax = fmax(amax, fabs(d->delta[i]));
    if (amax <= 0) amax = 1;
    double pw = (1.0 - 32.0 * ex) / 2, x0 = 7.0 * ex;
    int rc = AL_OK;
    for (int k = 0; k < (d->rank ? 2 : 1) && rc == AL_OK; k++) {
        double L = x0 + k * (pw + 16.0 * ex);
        plvpor(L, L + pw, 5.0 * ey, top);
        imp_ud ud = {d, k == 1};
        bool pooled;
        if (k == 0) diverging_cmap(); else sequential_cmap();
        double lo = k ? 0 : -amax, hi = k ? (d->rank_cap > 0 ? d->rank_cap : 1) : amax;
        rc = draw_grid(imp_cell, &ud, Lr, H, lo, hi, &pooled);
        plwind(-0.5, (double)H - 0.5, y0 + (double)Lr - 0.5, y0 - 0.5);   /* ticks at the cells' centres */
        if (k == 0) plot_geom_data_area(false);
        double xs = fmax(1.0, plot_whole_step((double)H, 8)), ys = fmax(1.0, plot_whole_step((double)Lr, 8));
        plbox("bcnst", xs, 0, runs ? "bcnstv" : "bc", ys, 0);
        if (!runs) row_layer_labels(d->layers, Lr);
        plmtex("b", 3.0, 0.5, 0.5, "head");
        plmtex("l", 3.5, 0.5, 0.5, runs ? "layer" : "layer (its attention layers only)");
        char buf[128];
        plmtex("t", 1.2, 0.5, 0.5, k ? plot_esc(buf, sizeof buf, d->rank_name ? d->rank_name : "fused rank")
                                     : "#gDppl with the head removed");
        colour_bar(lo, hi, k ? "rank" : "#gDppl");
    }
    return rc;
}

int plot_head_importance(const PlotOpts *opts, const PlotHeadImportance *d) {
    if (!d->n_layers || !d->n_heads) return al_err("plot head-importance: no heads");
    if (plot_check_finite(d->delta, d->n_layers * d->n_heads, "delta ppl")) return AL_ERR;
    PlotPage pg;
    if (plot_page_open(opts, &pg)) return AL_ERR;
    plot_page_title(opts, "Head importance: perplexity without each head, beside its fused rank");
    int rc = AL_OK;
    if (d->n_layers == 1) importance_layer(opts, d);
    else rc = importance_grid(opts, d);
    int rc2 = plot_page_close(&pg);
    return rc ? rc : rc2;
}
