/* plot_heatmap.c -- heatmap of one matrix (a head's weights or its SVD factors, seed 000
 * section 1.3) in a diverging colour map centred on 0, with a colour bar.
 * Matrices wider or taller than the figure can show are pooled for display: each cell keeps
 * the signed entry of largest magnitude in its block, so isolated large weights stay visible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "plot_int.h"

/* Most cells drawn along either axis; beyond this the matrix is pooled. */
#define HEAT_MAX_CELLS 400

/* Diverging blue - white - red map (ColorBrewer RdBu, readable for red-green colour blindness)
 * as cmap1, so 0.5 (the value 0) is white. */
static void diverging_cmap(void) {
    static const PLFLT pos[] = {0.0, 0.25, 0.5, 0.75, 1.0};
    static const PLFLT r[] = {33 / 255.0, 146 / 255.0, 1.0, 244 / 255.0, 178 / 255.0};
    static const PLFLT g[] = {102 / 255.0, 197 / 255.0, 1.0, 165 / 255.0, 24 / 255.0};
    static const PLFLT b[] = {172 / 255.0, 222 / 255.0, 1.0, 130 / 255.0, 43 / 255.0};
    plscmap1n(256);
    plscmap1l(1, 5, pos, r, g, b, NULL);
}

/* Pools m into an nc x nr grid for plimagefr: cells[ix][iy] is column block ix, row block iy
 * (iy = 0 the top row block). Returns the array of column pointers (one allocation; caller
 * frees it) and the largest magnitude seen in *amax. */
static PLFLT **pool(const Mat *m, size_t nc, size_t nr, double *amax) {
    size_t ptrs = nc * sizeof(PLFLT *);
    size_t cells;
    if (!al_mul_ok(nc, nr, &cells, "heatmap cells") || !al_mul_ok(cells, sizeof(PLFLT), &cells, "heatmap cells"))
        return NULL;
    PLFLT **col = al_malloc(ptrs + cells, "heatmap cells");
    if (!col) return NULL;
    PLFLT *data = (PLFLT *)((char *)col + ptrs);
    *amax = 0.0;
    for (size_t ix = 0; ix < nc; ix++) {
        col[ix] = data + ix * nr;
        size_t c0 = ix * m->cols / nc, c1 = (ix + 1) * m->cols / nc;
        if (c1 <= c0) c1 = c0 + 1;    /* more cells than columns (a single column drawn twice) */
        for (size_t iy = 0; iy < nr; iy++) {
            size_t r0 = iy * m->rows / nr, r1 = (iy + 1) * m->rows / nr;
            if (r1 <= r0) r1 = r0 + 1;
            double best = 0.0;
            for (size_t i = r0; i < r1; i++)
                for (size_t j = c0; j < c1; j++) {
                    double v = m->data[i * m->cols + j];
                    if (fabs(v) > fabs(best)) best = v;
                }
            col[ix][iy] = best;
            if (fabs(best) > *amax) *amax = fabs(best);
        }
    }
    return col;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The colour range: +-max|cell|, or +-(99.5th percentile of |cell|) when a few outliers are
 * more than twice that (they would wash everything else out to white). *clipped tells which. */
static int colour_range(PLFLT *const *cells, size_t nc, size_t nr, double amax, double *range, bool *clipped) {
    size_t n = nc * nr;
    double *a = al_malloc3(n, 1, sizeof(double), "heatmap colour range");
    if (!a) return AL_ERR;
    for (size_t ix = 0; ix < nc; ix++)
        for (size_t iy = 0; iy < nr; iy++) a[ix * nr + iy] = fabs(cells[ix][iy]);
    qsort(a, n, sizeof(double), cmp_double);
    double q = a[(size_t)(0.995 * (double)(n - 1))];
    free(a);
    *clipped = q > 0 && q < 0.5 * amax;
    *range = *clipped ? q : (amax > 0 ? amax : 1.0);
    return AL_OK;
}

/* Colour bar for [-amax, amax] to the right of the current viewport; arrow caps when the
 * colours are clipped. */
static void colour_bar(double amax, bool clipped) {
    PLFLT w, h;
    PLFLT values[2] = {-amax, amax};
    const PLFLT *vals[1] = {values};
    PLINT n_values[1] = {2};
    PLINT label_opts[1] = {PL_COLORBAR_LABEL_RIGHT};
    const char *labels[1] = {"value (0 = white)"};
    const char *axis_opts[1] = {"bcfvtm"};
    PLFLT ticks[1] = {0.0};
    PLINT sub_ticks[1] = {0};
    plot_chr(0.85);
    plcol0(PC_FG);
    plcolorbar(&w, &h, PL_COLORBAR_GRADIENT | (clipped ? PL_COLORBAR_CAP_LOW | PL_COLORBAR_CAP_HIGH : 0),
               PL_POSITION_RIGHT | PL_POSITION_OUTSIDE | PL_POSITION_VIEWPORT,
               0.02, 0.0, 0.035, 1.0, PC_BG, PC_FG, 1, 0.0, 1.0, 0, 0.0,
               1, label_opts, labels, 1, axis_opts, ticks, sub_ticks, n_values, vals);
    plot_chr(1.0);
}

/* The block of m that xrange / yrange select (columns / rows in the axes' units: cell j spans
 * j..j+1), as a copy in *sub (NULL: all of m) and its first column and row in *c0, *r0. */
static int heat_crop(const PlotOpts *o, const Mat *m, Mat **sub, size_t *c0, size_t *r0) {
    double r[4] = {0, (double)m->cols, 0, (double)m->rows};
    *sub = NULL;
    *c0 = *r0 = 0;
    if (!o->view.xrange && !o->view.yrange) return AL_OK;
    if (plot_view_range(o, r)) return AL_ERR;
    double a = fmax(0.0, floor(r[0])), b = fmin((double)m->cols, ceil(r[1]));
    double c = fmax(0.0, floor(r[2])), d = fmin((double)m->rows, ceil(r[3]));
    if (!(b > a) || !(d > c))
        return al_err("plot heatmap: xrange / yrange select no cell of the %zu x %zu matrix (columns 0:%zu, rows 0:%zu)",
                      m->rows, m->cols, m->cols, m->rows);
    *c0 = (size_t)a, *r0 = (size_t)c;
    if (!(*sub = mat_new((size_t)(d - c), (size_t)(b - a)))) return AL_ERR;
    for (size_t i = 0; i < (*sub)->rows; i++)
        memcpy((*sub)->data + i * (*sub)->cols, m->data + (*r0 + i) * m->cols + *c0, (*sub)->cols * sizeof(float));
    return AL_OK;
}

static int heatmap_draw(const PlotOpts *opts, const Mat *m, size_t c0, size_t r0, const Mat *whole);

int plot_heatmap(const PlotOpts *opts_in, const Mat *m) {
    if (!m || !m->data || !m->rows || !m->cols) return al_err("plot heatmap: empty matrix");
    PlotOpts ov;
    Mat *sub;
    size_t c0, r0;
    if (plot_view(opts_in, &ov, PV_XRANGE | PV_YRANGE, "plot heatmap") || heat_crop(&ov, m, &sub, &c0, &r0))
        return AL_ERR;
    int rc = heatmap_draw(&ov, sub ? sub : m, c0, r0, m);
    mat_free(sub);
    return rc;
}

/* The heatmap of m, the block of `whole` from column c0 and row r0 on. */
static int heatmap_draw(const PlotOpts *opts, const Mat *m, size_t c0, size_t r0, const Mat *whole) {
    size_t bad = mat_first_nonfinite(m);
    if (bad != (size_t)-1)
        return al_err("plot heatmap: entry (%zu, %zu) is not finite; the figure needs finite values",
                      bad / m->cols, bad % m->cols);
    /* At least 2 cells per axis: plimagefr draws nothing for a single row or column. */
    size_t nc = m->cols < HEAT_MAX_CELLS ? (m->cols > 1 ? m->cols : 2) : HEAT_MAX_CELLS;
    size_t nr = m->rows < HEAT_MAX_CELLS ? (m->rows > 1 ? m->rows : 2) : HEAT_MAX_CELLS;
    double amax, range;
    bool clipped;
    PLFLT **cells = pool(m, nc, nr, &amax);
    if (!cells) return AL_ERR;
    if (colour_range(cells, nc, nr, amax, &range, &clipped)) { free(cells); return AL_ERR; }

    PlotOpts o = *opts;
    char sub[512], title[96];
    size_t k = 0;
    sub[0] = '\0';
    if (o.subtitle) k += (size_t)snprintf(sub + k, sizeof sub - k, "%s", o.subtitle);
    if (m != whole && k < sizeof sub)
        k += (size_t)snprintf(sub + k, sizeof sub - k, "%srows %zu-%zu, columns %zu-%zu", k ? "; " : "", r0,
                              r0 + m->rows - 1, c0, c0 + m->cols - 1);
    if ((nc < m->cols || nr < m->rows) && k < sizeof sub)
        k += (size_t)snprintf(sub + k, sizeof sub - k, "%s%zu x %zu cell%s (largest |entry| of each block)",
                              k ? "; " : "", nr, nc, al_s(nr * nc));

    if (clipped && k < sizeof sub)
        k += (size_t)snprintf(sub + k, sizeof sub - k, "%scolours clipped at ±%.3g (max %.3g)",
                              k ? "; " : "", range, amax);
    if (k) o.subtitle = sub;
    PlotPage pg;
    if (plot_page_open(opts, &pg)) { free(cells); return AL_ERR; }
    snprintf(title, sizeof title, "Matrix (%zu x %zu)", whole->rows, whole->cols);
    plot_page_title(&o, title);

    /* Data area: leave room for the colour bar on the right; keep square cells when the
     * matrix is not too elongated. */
    double ex = plot_em_x(), ey = plot_em_y();
    double cap = clipped ? 1.4 * ey : 0.0;    /* room for the colour bar's arrow caps */
    double L = 6.6 * ex, R = 1.0 - 11.0 * ex, B = 4.6 * ey + cap, T = plot_top(&o, 0) - cap;
    double aspect = (double)m->rows / (double)m->cols;
    if (aspect >= 1.0 / 3.0 && aspect <= 3.0) {
        double pw = (R - L) * pg.width, ph = (T - B) * pg.height;
        if (ph / pw > aspect) { double h = pw * aspect / pg.height, mid = 0.5 * (B + T); B = mid - h / 2; T = mid + h / 2; }
        else { double w = ph / aspect / pg.width, mid = 0.5 * (L + R); L = mid - w / 2; R = mid + w / 2; }
    }
    plvpor(L, R, B, T);
    double x0 = (double)c0, y0 = (double)r0;
    plwind(x0, x0 + (double)m->cols, y0 + (double)m->rows, y0);
    plot_geom_data_area(false);
    diverging_cmap();
    /* plimagefr spreads nc cells over nc - 1 intervals of [xmin, xmax] (the last one drawn
     * past xmax): give it the extent that makes each cell exactly one block wide. */
    double xext = (double)m->cols * (double)(nc - 1) / (double)nc;
    double yext = (double)m->rows * (double)(nr - 1) / (double)nr;
    plimagefr((PLFLT_MATRIX)cells, (PLINT)nc, (PLINT)nr, x0, x0 + xext, y0, y0 + yext,
              -amax, amax, -range, range, NULL, NULL);
    plcol0(PC_FG);
    double xs = fmax(1.0, plot_nice_step((double)m->cols, 6)), ys = fmax(1.0, plot_nice_step((double)m->rows, 6));
    plbox("bcnst", xs, xs >= 2 ? 0 : 1, "bcnstv", ys, ys >= 2 ? 0 : 1);
    plot_axis_labels(&o, "column", "row");
    colour_bar(range, clipped);
    free(cells);
    return plot_page_close(&pg);
}
