/* plot_ranks.c -- effective-rank figures of fused head pairs (seed 000, sections 2.3 and 2.4):
 * one layer (heads sorted by fused rank, the two factors' ranks as dots, the fused rank as a
 * line), the model-wide grid of those, and the per-layer min / median / max against depth.
 * Takes ranks computed by core; the only arithmetic is sorting and order statistics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "plot_int.h"

/* ================================================================ checks and data */

static int check_info(const PlotRanksInfo *info) {
    if (!info) return al_err("plot ranks: no rank table given");
    if (info->head_dim <= 0) return al_err("plot ranks: head dim %d must be positive", info->head_dim);
    return AL_OK;
}

static int check_layer(const PlotLayerRanks *l) {
    if (!l->n_heads) return al_err("plot ranks: layer %d has no heads", l->layer);
    if (!l->rank_a || !l->rank_b || !l->rank_fused)
        return al_err("plot ranks: layer %d lacks one of its three rank arrays", l->layer);
    for (size_t h = 0; h < l->n_heads; h++)
        if (l->rank_a[h] < 0 || l->rank_b[h] < 0 || l->rank_fused[h] < 0)
            return al_err("plot ranks: layer %d head %zu has a negative rank", l->layer, h);
    return AL_OK;
}

/* check_info and check_layer of every layer of a multi-layer figure (`what`: its name in the
 * error); *max_heads: the most heads of any layer. */
static int check_layers(const PlotRanksInfo *info, const PlotLayerRanks *layers, size_t n_layers, const char *what,
                        size_t *max_heads) {
    *max_heads = 0;
    if (check_info(info)) return AL_ERR;
    if (!layers || !n_layers) return al_err("plot ranks %s: no layers given", what);
    for (size_t i = 0; i < n_layers; i++) {
        if (check_layer(&layers[i])) return AL_ERR;
        if (layers[i].n_heads > *max_heads) *max_heads = layers[i].n_heads;
    }
    return AL_OK;
}

/* qsort context: compare head indices by fused rank, then by index (a stable order). */
static const int *sort_key;
static int by_fused(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (sort_key[i] != sort_key[j]) return sort_key[i] < sort_key[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* Points of one layer, heads sorted by fused rank (or in head order when by_head): x = 1..n, ya /
 * yb / yf the three ranks (clipped to head_dim). xs must hold 4 * n doubles; the four arrays are
 * laid out in it. ids (n, may be NULL) receives the head at each position. */
static int layer_points(const PlotLayerRanks *l, int head_dim, bool by_head, double *xs, size_t *ids) {
    size_t n = l->n_heads;
    size_t *idx = al_malloc3(n, 1, sizeof(size_t), "head order");
    if (!idx) return AL_ERR;
    for (size_t h = 0; h < n; h++) idx[h] = h;
    sort_key = l->rank_fused;
    if (!by_head) qsort(idx, n, sizeof *idx, by_fused);
    if (ids) memcpy(ids, idx, n * sizeof *idx);
    for (size_t k = 0; k < n; k++) {
        size_t h = idx[k];
        xs[k] = (double)(k + 1);
        xs[n + k] = fmin(l->rank_a[h], head_dim);
        xs[2 * n + k] = fmin(l->rank_b[h], head_dim);
        xs[3 * n + k] = fmin(l->rank_fused[h], head_dim);
    }
    free(idx);
    return AL_OK;
}

/* Draws one layer's points in the current window: B dots, A dots, fused line. B's dots are
 * larger and drawn first, so where A and B have the same rank both stay visible (an orange dot
 * in a blue ring). */
static void draw_layer(const double *pts, size_t n, double dot) {
    double fs = plot_font_scale();
    plcol0(PC_BLUE);
    plot_dots(n, pts, pts + 2 * n, dot * 1.45);
    plcol0(PC_ORANGE);
    plot_dots(n, pts, pts + n, dot);
    plcol0(PC_GREEN);
    plwidth((dot < 0.3 ? 1.5 : 2.5) * fs);
    plline((PLINT)n, pts, pts + 3 * n);
    plwidth(fs);
}

/* The legend of the rank figures: A dots, B dots, fused line (labels in lab). */
static void legend_items(const PlotRanksInfo *info, char lab[3][96], PlotLegendItem items[3]) {
    snprintf(lab[0], 96, "%s heads", info->name_a ? info->name_a : "A");
    snprintf(lab[1], 96, "%s heads", info->name_b ? info->name_b : "B");
    snprintf(lab[2], 96, "fused %s", info->name_fused ? info->name_fused : "AB");
    items[0] = (PlotLegendItem){lab[0], PC_ORANGE, PL_ITEM_DOT, 1, NULL};
    items[1] = (PlotLegendItem){lab[1], PC_BLUE, PL_ITEM_DOT, 1, NULL};
    items[2] = (PlotLegendItem){lab[2], PC_GREEN, PL_ITEM_LINE, 1, NULL};
}

/* x label "heads, sorted by fused VO rank" (or "head" in head order) into buf. */
static const char *xlabel_sorted(const PlotRanksInfo *info, char *buf, size_t cap) {
    if (info->by_head) snprintf(buf, cap, "head id");
    else snprintf(buf, cap, "heads, sorted by fused %s rank", info->name_fused ? info->name_fused : "");
    return buf;
}

/* Head ids under the x axis of a figure sorted by rank (window x0..x1, position k at x = x_first
 * + k): every step-th position, so a named head can be found. Records them in plot_geom when it
 * holds none yet (a grid's first panel). */
static void head_id_labels(const size_t *ids, size_t n, double x0, double x1, double x_first, size_t step, double rel) {
    char buf[24];
    PlotGeom *g = plot_geom();
    bool rec = g->n_xticks == 0;
    plot_chr(rel);
    for (size_t k = 0; k < n; k += step) {
        snprintf(buf, sizeof buf, "%zu", ids[k]);
        plmtex("b", 1.3, (x_first + (double)k - x0) / (x1 - x0), 0.5, buf);
        if (rec && g->n_xticks < GEOM_TICKS) g->xticks[g->n_xticks++] = (double)ids[k];
    }
    plot_chr(1.0);
}

static const char *ylabel_rank(const PlotRanksInfo *info, char *buf, size_t cap) {
    snprintf(buf, cap, "effective rank%s (τ = %g)", info->normalize ? " / head dim" : "", info->tau);
    return buf;
}

/* Tick step for a rank axis 0..head_dim: a quarter (or half, when `few`) of the head dim when
 * it divides evenly (0, 32, 64, 96, 128), else a round number. */
static double rank_step(int head_dim, bool few) {
    int parts = few ? 2 : 4;
    return head_dim % parts == 0 && head_dim >= parts ? (double)(head_dim / parts) : plot_whole_step(head_dim, parts);
}

/* Tick step for the sorted-heads axis 1..n. */
static double head_step(size_t n, bool few) {
    size_t parts = few ? 2 : 8;
    return n % parts == 0 && n >= 2 * parts ? (double)(n / parts) : plot_whole_step((double)n, (int)parts);
}

/* ================================================================ one layer */

int plot_ranks(const PlotOpts *opts_in, const PlotRanksInfo *info, const PlotLayerRanks *layer) {
    if (!layer) return al_err("plot ranks: no layer given");
    if (check_info(info) || check_layer(layer)) return AL_ERR;
    PlotOpts ov;
    if (plot_view(opts_in, &ov, PV_YRANGE, "plot ranks")) return AL_ERR;
    const PlotOpts *opts = &ov;
    double yr[4] = {0, 1, 0.0, 1.04 * info->head_dim};
    if (plot_view_range(opts, yr)) return AL_ERR;
    size_t n = layer->n_heads;
    double *pts = al_malloc3(n, 4, sizeof(double), "rank plot points");
    size_t *ids = al_malloc3(n, 1, sizeof(size_t), "head ids");
    if (!pts || !ids || layer_points(layer, info->head_dim, info->by_head, pts, ids)) {
        free(pts);
        free(ids);
        return AL_ERR;
    }

    PlotPage pg;
    if (plot_page_open(opts, &pg)) { free(pts); free(ids); return AL_ERR; }
    char title[256], model[96], xl[96], yl[96], lab[3][96];
    snprintf(title, sizeof title, "%s layer %d: %s, %s and fused %s effective ranks (τ = %g)",
             plot_esc(model, sizeof model, info->model ? info->model : "model"), layer->layer,
             info->name_a, info->name_b, info->name_fused, info->tau);
    plot_page_title(opts, title);
    PlotLegendItem items[3];
    legend_items(info, lab, items);
    plot_vpor_std(opts, plot_legend_rows(items, 3, plot_vpor_std_width(2.0), 0.9), 2.0);
    double pad = n > 20 ? 0.01 * (double)n : 0.5;
    double xs = head_step(n, false), ys = rank_step(info->head_dim, false);
    plwind(1.0 - pad, (double)n + pad, yr[2], yr[3]);
    plot_geom_data_area(false);
    plcol0(PC_LIGHT);
    plbox("g", xs, 0, "g", ys, 0);
    plcol0(PC_FG);
    if (info->by_head) {               /* x = head ids 0..n-1 at positions 1..n */
        plwind(-pad, (double)n - 1 + pad, yr[2], yr[3]);
        plbox("bcnst", xs, 2, "bcnstv", ys, 2);
        plwind(1.0 - pad, (double)n + pad, yr[2], yr[3]);
    } else {
        plbox("bcst", n <= 48 ? 1.0 : xs, n <= 48 ? 1 : 2, "bcnstv", ys, 2);
        head_id_labels(ids, n, 1.0 - pad, (double)n + pad, 1.0, n <= 48 ? 1 : (size_t)plot_nice_step((double)n, 24),
                       n > 24 ? 0.7 : 0.85);
    }
    char xlh[128];
    snprintf(xlh, sizeof xlh, "%s%s", xlabel_sorted(info, xl, sizeof xl), info->by_head ? "" : " (labels: head ids)");
    plot_axis_labels(opts, xlh, ylabel_rank(info, yl, sizeof yl));
    draw_layer(pts, n, n > 64 ? 0.55 : 0.8);
    plot_legend(items, 3, 0.9);
    free(pts);
    free(ids);
    return plot_page_close(&pg);
}

/* ================================================================ grid */

/* Numbers under a grid panel's x axis in head order (0-based positions 0..n-1 are the head ids):
 * 0, the interior ticks and the last head, each centred on its tick (the panel's padding keeps
 * neighbouring panels' labels apart). Records them in plot_geom when it holds none yet (the
 * first bottom panel). */
static void panel_xlabels(size_t n, double x0, double x1, double step) {
    char buf[32];
    PlotGeom *g = plot_geom();
    bool rec = g->n_xticks == 0;
    double last = (double)n - 1.0;
    for (double t = 0; t < last - 0.5 * step || (t == 0 && n > 1); t += step) {
        snprintf(buf, sizeof buf, "%g", t);
        plmtex("b", 1.3, (t - x0) / (x1 - x0), 0.5, buf);
        if (rec && g->n_xticks < GEOM_TICKS) g->xticks[g->n_xticks++] = t;
    }
    snprintf(buf, sizeof buf, "%g", last);
    plmtex("b", 1.3, (last - x0) / (x1 - x0), 0.5, buf);
    if (rec && g->n_xticks < GEOM_TICKS) g->xticks[g->n_xticks++] = last;
}

/* The step of the head ids under a grid panel pw wide (page fraction) at text size rel: the
 * smallest that lets n numbers stand apart, so "layer L, head H" can be read off each panel. */
static size_t panel_id_step(size_t n, double pw, double rel) {
    int digits = n > 1000 ? 4 : n > 100 ? 3 : n > 10 ? 2 : 1;
    double fit = pw / (plot_em_x() * rel * (0.75 * digits + 1.0));      /* numbers side by side */
    return fit >= (double)n ? 1 : (size_t)ceil((double)n / fmax(fit, 1.0));
}

/* Columns of the grid for n panels (8 at most, so 61 layers make 8 x 8). */
static int grid_cols(size_t n) {
    if (n <= 4) return (int)n;
    if (n <= 9) return 3;
    if (n <= 16) return 4;
    if (n <= 30) return 6;
    return 8;
}

/* Where the grid's panels go (page fractions): left, bottom edges and sizes, the gaps between them. */
typedef struct {
    int cols, rows;
    double L, T, pw, ph, gx, gy;
    double small;              /* text size of the panels' ticks and labels */
} GridLayout;

/* The grid's layout under the title and the one-row legend; sorted panels leave room under
 * each for its head ids. */
static GridLayout grid_layout(const PlotOpts *o, size_t n_layers, bool sorted) {
    GridLayout g = {.cols = grid_cols(n_layers)};
    g.rows = (int)((n_layers + (size_t)g.cols - 1) / (size_t)g.cols);
    /* Margins in character heights: title and legend above, tick labels and the axis label
     * below and left; gy leaves room for the panel label "L12" (and a row of ids under the panel above). */
    const double ey = plot_em_y(), ex = plot_em_x(), R = 1.0 - 1.2 * ex, B = 4.2 * ey;
    g.small = g.rows > 4 ? 0.78 : 0.85;
    g.L = 5.2 * ex;
    g.T = plot_top(o, 1) - 1.4 * ey;
    g.gx = 0.7 * ex;
    g.gy = (sorted ? 2.1 + 1.2 * g.small : 2.1) * ey;
    g.pw = (R - g.L - g.gx * (g.cols - 1)) / g.cols;
    g.ph = (g.T - B - g.gy * (g.rows - 1)) / g.rows;
    return g;
}

/* One panel of the grid: layer l's ranks at panel i (pts, ids: scratch of 4 and 1 per head). */
static int grid_panel(const GridLayout *g, const PlotRanksInfo *info, const PlotLayerRanks *l, size_t i,
                      size_t n_layers, const double yr[4], double *pts, size_t *ids) {
    int r = (int)(i / (size_t)g->cols), c = (int)(i % (size_t)g->cols);
    double x0 = g->L + c * (g->pw + g->gx), y1 = g->T - r * (g->ph + g->gy);
    bool bottom = i + (size_t)g->cols >= n_layers;    /* no panel below this one */
    size_t n = l->n_heads;
    if (layer_points(l, info->head_dim, info->by_head, pts, ids)) return AL_ERR;
    for (size_t k = 0; k < n; k++) pts[k] -= 1.0;     /* x: 0-based positions (head ids in head order) */
    plvpor(x0, x0 + g->pw, y1 - g->ph, y1);
    double pad = 0.01 * (double)n + 0.5, w0 = -pad, w1 = (double)n - 1.0 + pad;
    plwind(w0, w1, yr[2], yr[3]);
    plot_chr(g->small);
    plsmaj(0.0, 0.5);
    plsmin(0.0, 0.5);
    double ystep = rank_step(info->head_dim, true), xstep = head_step(n, true);
    plcol0(PC_LIGHT);
    plbox("", 0, 0, "g", ystep, 1);
    plcol0(PC_FG);
    plbox(info->by_head ? "bcst" : "bc", xstep, 2, c == 0 ? "bcnstv" : "bcst", ystep, 2);
    if (!info->by_head) head_id_labels(ids, n, w0, w1, 0.0, panel_id_step(n, g->pw, 0.85 * g->small), 0.85 * g->small);
    else if (bottom) panel_xlabels(n, w0, w1, xstep);
    plot_chr(g->small);
    char pl[32];
    snprintf(pl, sizeof pl, "L%d", l->layer);
    plmtex("t", 0.6, 0.0, 0.0, pl);
    draw_layer(pts, n, g->rows > 4 ? 0.22 : 0.4);
    return AL_OK;
}

/* The grid's shared axis labels and legend, over the whole panel area. */
static void grid_labels(const PlotOpts *o, const GridLayout *g, const PlotRanksInfo *info) {
    char xl[192], yl[128], lab[3][96];
    PlotLegendItem items[3];
    legend_items(info, lab, items);
    const double ey = plot_em_y(), B = 4.2 * ey, R = 1.0 - 1.2 * plot_em_x();
    plvpor(g->L, R, B, g->T);
    plwind(0, 1, 0, 1);
    plot_chr(1.0);
    plcol0(PC_FG);
    if (plot_xlabel(o)) plot_esc(xl, sizeof xl, plot_xlabel(o));
    else {
        xlabel_sorted(info, yl, sizeof yl);
        snprintf(xl, sizeof xl, "%s%s", yl, info->by_head ? "" : " (numbers under each panel: head ids)");
    }
    plmtex("b", 2.8, 0.5, 0.5, xl);
    plmtex("l", 3.6, 0.5, 0.5, plot_ylabel(o) ? plot_esc(yl, sizeof yl, plot_ylabel(o)) : ylabel_rank(info, yl, sizeof yl));
    plvpor(g->L, R, B, g->T + 1.3 * ey);
    plot_legend(items, 3, 0.8);
}

int plot_ranks_grid(const PlotOpts *opts, const PlotRanksInfo *info,
                    const PlotLayerRanks *layers, size_t n_layers) {
    size_t max_heads;
    if (check_layers(info, layers, n_layers, "grid", &max_heads)) return AL_ERR;
    double *pts = al_malloc3(max_heads, 4, sizeof(double), "rank grid points");
    size_t *ids = al_malloc3(max_heads, 1, sizeof(size_t), "rank grid head ids");
    if (!pts || !ids) { free(pts); free(ids); return AL_ERR; }

    PlotOpts o;
    double yr[4] = {0, 1, 0.0, 1.04 * info->head_dim};
    if (plot_view(opts, &o, PV_YRANGE, "plot ranks grid") || plot_view_range(&o, yr)) { free(pts); free(ids); return AL_ERR; }
    PlotPage pg;
    /* The page from the panel count: 1000 x 700 up to 16 panels, then about 180 x 140 per panel
     * (61 layers, 8 x 8: 1560 x 1320), so panels keep a readable size. */
    int cols = grid_cols(n_layers);
    int rows = (int)((n_layers + (size_t)cols - 1) / (size_t)cols);
    int dw = n_layers > 16 ? 120 + 180 * cols : PLOT_DEFAULT_WIDTH, dh = n_layers > 16 ? 200 + 140 * rows : PLOT_DEFAULT_HEIGHT;
    if (dw < PLOT_DEFAULT_WIDTH) dw = PLOT_DEFAULT_WIDTH;
    if (dh < PLOT_DEFAULT_HEIGHT) dh = PLOT_DEFAULT_HEIGHT;
    if (!o.subtitle) o.subtitle = info->layers_note;
    if (plot_page_open_design(&o, &pg, dw, dh)) { free(pts); free(ids); return AL_ERR; }
    char title[256], model[96];
    snprintf(title, sizeof title, "%s: %s, %s and fused %s effective ranks per layer (τ = %g)",
             plot_esc(model, sizeof model, info->model ? info->model : "model"),
             info->name_a, info->name_b, info->name_fused, info->tau);
    plot_page_title(&o, title);
    GridLayout g = grid_layout(&o, n_layers, !info->by_head);
    int rc = AL_OK;
    for (size_t i = 0; i < n_layers && !rc; i++) rc = grid_panel(&g, info, &layers[i], i, n_layers, yr, pts, ids);
    plsmaj(0.0, 1.0);
    plsmin(0.0, 1.0);
    if (!rc) grid_labels(&o, &g, info);
    free(pts);
    free(ids);
    int rc2 = plot_page_close(&pg);
    return rc ? rc : rc2;
}

/* ================================================================ by layer */

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Per layer: x = the layer number, mn / md / mx the min, median and max fused rank over heads
 * (clipped to head_dim). v holds 4 * n_layers doubles (x, mn, md, mx laid out in it). */
static int layer_stats(const PlotLayerRanks *layers, size_t n_layers, size_t max_heads, int head_dim, double *v) {
    int *tmp = al_malloc3(max_heads, 1, sizeof(int), "rank-by-layer sort");
    if (!tmp) return AL_ERR;
    double *x = v, *mn = v + n_layers, *md = v + 2 * n_layers, *mx = v + 3 * n_layers;
    for (size_t i = 0; i < n_layers; i++) {
        size_t n = layers[i].n_heads;
        memcpy(tmp, layers[i].rank_fused, n * sizeof(int));
        qsort(tmp, n, sizeof(int), cmp_int);
        x[i] = layers[i].layer;
        mn[i] = fmin(tmp[0], head_dim);
        mx[i] = fmin(tmp[n - 1], head_dim);
        md[i] = fmin(n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]), head_dim);
    }
    free(tmp);
    return AL_OK;
}

/* One past the end of the run of adjacent layers x[i], x[i] + 1, ... that starts at i. */
static size_t layer_run_end(const double *x, size_t n, size_t i) {
    size_t j = i + 1;
    while (j < n && x[j] == x[j - 1] + 1.0) j++;
    return j;
}

/* Runs of adjacent layers among the n (ascending) layers x: 1 when none is missing in between. */
static size_t layer_runs(const double *x, size_t n) {
    size_t runs = 0;
    for (size_t i = 0; i < n; i = layer_run_end(x, n, i)) runs++;
    return runs;
}

/* Shades the layers of lo..hi missing from the n drawn ones x (a hybrid's layers without
 * attention: between two drawn layers, or before the first and after the last), full height y0..y1. */
static void bylayer_gaps(const double *x, size_t n, double lo, double hi, double y0, double y1) {
    plcol0(PC_GAP);
    for (size_t i = 0; i <= n; i++) {
        double a = (i ? x[i - 1] : lo - 1.0) + 0.5, b = (i < n ? x[i] : hi + 1.0) - 0.5;
        if (b <= a) continue;
        double bx[4] = {a, a, b, b}, by[4] = {y0, y1, y1, y0};
        plfill(4, bx, by);
    }
}

/* The min..max band over each run of adjacent layers: a polygon along max forward and min
 * backward; a layer with no drawn neighbour, a bar 0.4 layers wide. Nothing spans a gap. */
static void bylayer_band(const double *x, const double *mn, const double *mx, size_t n) {
    double *px = al_malloc3(n, 4, sizeof(double), "rank band");
    if (!px) return;
    plcol0(PC_BAND);
    for (size_t i = 0, j; i < n; i = j) {
        j = layer_run_end(x, n, i);
        size_t m = j - i;
        double *py = px + 2 * m;
        if (m == 1) {
            double bx[4] = {x[i] - 0.2, x[i] - 0.2, x[i] + 0.2, x[i] + 0.2}, by[4] = {mn[i], mx[i], mx[i], mn[i]};
            plfill(4, bx, by);
            continue;
        }
        for (size_t k = 0; k < m; k++) {
            px[k] = x[i + k]; py[k] = mx[i + k];
            px[2 * m - 1 - k] = x[i + k]; py[2 * m - 1 - k] = mn[i + k];
        }
        plfill((PLINT)(2 * m), px, py);
    }
    free(px);
}

/* The max, median and min lines (each joining adjacent layers only) and their dots. Max widest
 * and drawn first, min narrowest on top: where the three coincide (a layer whose heads all have
 * one rank) they show as nested stripes instead of one line. */
static void bylayer_lines(const double *v, size_t n) {
    const double *x = v;
    double fs = plot_font_scale(), dot = n > 64 ? 0.45 : 0.7;
    const struct { const double *y; PLINT col; double w, d; } s[3] = {
        {v + 3 * n, PC_VERMIL, 4.5, 1.35}, {v + 2 * n, PC_BLUE, 3.0, 1.0}, {v + n, PC_GREEN, 1.6, 0.6}};
    for (int k = 0; k < 3; k++) {
        plcol0(s[k].col);
        plwidth(s[k].w * fs);
        for (size_t i = 0, j; i < n; i = j) {
            j = layer_run_end(x, n, i);
            if (j - i > 1) plline((PLINT)(j - i), x + i, s[k].y + i);
        }
        plot_dots(n, x, s[k].y, dot * s[k].d);
    }
    plwidth(fs);
}

/* The data window of the by-layer figure (x: the layers with half a layer's room, y: 0..ytop)
 * with the view's ranges applied, and its grid. */
static int bylayer_axes(const PlotOpts *opts, const PlotRanksInfo *info, const double *x, size_t n, double ytop,
                        double r[4], double st[2], PLINT sub[2]) {
    bool normalize = info->normalize;
    int head_dim = info->head_dim;
    double lo = info->has_span ? info->span[0] : x[0], hi = info->has_span ? info->span[1] : x[0];
    for (size_t i = 0; i < n; i++) { lo = fmin(lo, x[i]); hi = fmax(hi, x[i]); }
    double pad = fmax(0.5, 0.01 * (hi - lo));
    r[0] = lo - pad; r[1] = hi + pad; r[2] = 0.0; r[3] = 1.04 * ytop;
    if (plot_view_range(opts, r)) return AL_ERR;
    plwind(r[0], r[1], r[2], r[3]);
    plot_geom_data_area(false);
    /* layers and ranks are whole numbers: whole steps, minor ticks at every whole number below 10 */
    st[0] = plot_whole_step(r[1] - r[0], 8);
    st[1] = normalize ? 0.2 : rank_step(head_dim, false);
    sub[0] = st[0] <= 10 ? (PLINT)st[0] : 0;
    sub[1] = normalize ? 2 : st[1] <= 10 ? (PLINT)st[1] : 0;
    return AL_OK;
}

int plot_ranks_by_layer(const PlotOpts *opts_in, const PlotRanksInfo *info,
                        const PlotLayerRanks *layers, size_t n_layers) {
    size_t max_heads;
    if (check_layers(info, layers, n_layers, "by layer", &max_heads)) return AL_ERR;
    PlotOpts ov;
    if (plot_view(opts_in, &ov, PV_XRANGE | PV_YRANGE, "plot ranks-by-layer")) return AL_ERR;
    double *v = al_malloc3(n_layers, 4, sizeof(double), "rank-by-layer points");      /* x, min, median, max */
    if (!v || layer_stats(layers, n_layers, max_heads, info->head_dim, v)) { free(v); return AL_ERR; }
    for (size_t i = n_layers; info->normalize && i < 4 * n_layers; i++) v[i] /= info->head_dim;
    double ytop = info->normalize ? 1.0 : info->head_dim;

    PlotPage pg;
    if (plot_page_open(&ov, &pg)) { free(v); return AL_ERR; }
    char title[256], model[96], yl[96];
    snprintf(title, sizeof title, "%s: fused %s effective rank by layer (τ = %g)",
             plot_esc(model, sizeof model, info->model ? info->model : "model"), info->name_fused, info->tau);
    PlotOpts o = ov;
    char subtitle[512];
    snprintf(subtitle, sizeof subtitle, "%s%smax over heads = the uniform rank a per-layer truncation keeps",
             info->layers_note ? info->layers_note : "", info->layers_note ? "; " : "");
    if (!o.subtitle) o.subtitle = subtitle;
    plot_page_title(&o, title);
    PlotLegendItem items[5] = {
        {"max over heads", PC_VERMIL, PL_ITEM_LINE_DOT, 1, NULL},
        {"median", PC_BLUE, PL_ITEM_LINE_DOT, 1, NULL},
        {"min", PC_GREEN, PL_ITEM_LINE_DOT, 1, NULL},
        {"min–max band", PC_BAND, PL_ITEM_BOX, 1, NULL},
        {"no attention heads", PC_GAP, PL_ITEM_BOX, 1, NULL},
    };
    double span_lo = info->has_span ? info->span[0] : v[0], span_hi = info->has_span ? info->span[1] : v[n_layers - 1];
    bool gaps = info->shade_gaps && (layer_runs(v, n_layers) > 1 || span_lo < v[0] || span_hi > v[n_layers - 1]);
    int ni = gaps ? 5 : 4;
    plot_vpor_std(&o, plot_legend_rows(items, ni, plot_vpor_std_width(2.0), 0.9), 2.0);
    double r[4], st[2];
    PLINT sub[2];
    if (bylayer_axes(&ov, info, v, n_layers, ytop, r, st, sub)) {
        free(v);
        plot_page_close(&pg);
        return AL_ERR;
    }
    if (gaps) bylayer_gaps(v, n_layers, span_lo, span_hi, r[2], r[3]);
    plcol0(PC_LIGHT);
    plbox("g", st[0], sub[0], "g", st[1], sub[1]);
    bylayer_band(v, v + n_layers, v + 3 * n_layers, n_layers);
    plcol0(PC_FG);
    plbox("bcnst", st[0], sub[0], "bcnstv", st[1], sub[1]);
    plot_axis_labels(&ov, "layer", ylabel_rank(info, yl, sizeof yl));
    bylayer_lines(v, n_layers);
    plot_legend(items, ni, 0.9);
    free(v);
    return plot_page_close(&pg);
}

/* ================================================================ several models */

/* The n points (x, y) with a break (y NaN, half-way) wherever layers are missing between two
 * (a hybrid's layers without attention), so a curve never joins across them: into xb, yb (2 n
 * each); how many points that makes. */
static size_t with_breaks(const double *x, const double *y, size_t n, double *xb, double *yb) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && x[i] - x[i - 1] > 1.0) { xb[m] = 0.5 * (x[i] + x[i - 1]); yb[m++] = NAN; }
        xb[m] = x[i];
        yb[m++] = y[i];
    }
    return m;
}

int plot_ranks_by_layer_models(const PlotOpts *opts, const PlotRanksInfo *info, const PlotRanksModel *models,
                               size_t n_models, plot_rank_stat stat) {
    if (!models || !n_models) return al_err("plot ranks by layer: no models given");
    static const char *const stat_name[] = {"min", "median", "max"};
    PlotCurve *c = al_calloc(n_models, sizeof *c, "curves");
    double **v = al_calloc(n_models, sizeof *v, "curve points");
    char (*lab)[128] = al_calloc(n_models, sizeof *lab, "curve labels");
    int rc = c && v && lab ? AL_OK : AL_ERR;
    for (size_t k = 0; k < n_models && !rc; k++) {
        const PlotRanksModel *m = &models[k];
        PlotRanksInfo mi = *info;
        mi.head_dim = m->head_dim;
        size_t max_heads;
        rc = check_layers(&mi, m->layers, m->n_layers, "by layer", &max_heads);
        /* x, min, median, max; then x and y with the breaks (2 n each) */
        if (!rc && !(v[k] = al_malloc3(m->n_layers, 8, sizeof(double), "rank-by-layer points"))) rc = AL_ERR;
        if (!rc) rc = layer_stats(m->layers, m->n_layers, max_heads, m->head_dim, v[k]);
        if (rc) break;
        snprintf(lab[k], sizeof lab[k], "%s (head dim %d)", m->model ? m->model : "model", m->head_dim);
        double *y = v[k] + (size_t)(stat + 1) * m->n_layers, *xb = v[k] + 4 * m->n_layers, *yb = xb + 2 * m->n_layers;
        for (size_t i = 0; info->normalize && i < m->n_layers; i++) y[i] /= m->head_dim;
        size_t nb = with_breaks(v[k], y, m->n_layers, xb, yb);
        c[k] = (PlotCurve){.label = lab[k], .x = xb, .y = yb, .n = nb, .points = true,
                           .marker = (int)k, .dash = 1 + (int)(k % 8),
                           .width = 2.2 + 1.6 * (double)(n_models - 1 - k) / (double)(n_models > 1 ? n_models - 1 : 1)};
    }
    if (!rc) {
        char title[256], yl[96];
        snprintf(title, sizeof title, "fused %s effective rank by layer: %s over heads (τ = %g)", info->name_fused,
                 stat_name[stat], info->tau);
        PlotOpts o = *opts;
        if (!o.title) o.title = title;
        char sub[640];
        snprintf(sub, sizeof sub, "%s%s%s", info->layers_note ? info->layers_note : "",
                 info->layers_note && stat == PLOT_RANK_MAX ? "; " : "",
                 stat == PLOT_RANK_MAX ? "max over heads = the uniform rank a per-layer truncation keeps" : "");
        if (!o.subtitle && sub[0]) o.subtitle = sub;
        if (!o.xlabel) o.xlabel = "layer";
        if (!o.ylabel) o.ylabel = ylabel_rank(info, yl, sizeof yl);
        o.x_whole = true;
        o.y_whole = !info->normalize;
        rc = plot_curves(&o, c, n_models);
    }
    for (size_t k = 0; v && k < n_models; k++) free(v[k]);
    free(v);
    free(c);
    free(lab);
    return rc;
}
