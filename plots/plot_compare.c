/* plot_compare.c -- the method-comparison figure (plot_compare.h): several curves, one per
 * method, each in its method's colour slot, dots at every point, a legend above, optionally log y
 * and whole-number x ticks. Takes the points as computed by the caller; draws only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"
#include "plot_compare.h"
#include "plot_int.h"

#define METHOD_CURVES_MAX 16

/* True when point i of c can be drawn (finite; y > 0 on a log axis). */
static bool drawable(const PlotMethodCurve *c, size_t i, bool logy) {
    return isfinite(c->x[i]) && isfinite(c->y[i]) && (!logy || c->y[i] > 0);
}

/* Data range r = {x0, x1, y0, y1} (y in decades when logy) with margins; whole: x padded so that
 * the dots at the ends stay inside. Error when no point can be drawn. */
static int method_range(const PlotMethodCurve *c, size_t nc, bool logy, bool whole, double r[4]) {
    r[0] = r[2] = INFINITY;
    r[1] = r[3] = -INFINITY;
    for (size_t k = 0; k < nc; k++)
        for (size_t i = 0; i < c[k].n; i++) {
            if (!drawable(&c[k], i, logy)) continue;
            double y = logy ? log10(c[k].y[i]) : c[k].y[i];
            r[0] = fmin(r[0], c[k].x[i]); r[1] = fmax(r[1], c[k].x[i]);
            r[2] = fmin(r[2], y); r[3] = fmax(r[3], y);
        }
    if (!(r[0] <= r[1]))
        return al_err("plot: no finite points%s to draw", logy ? " with y > 0 (on a log axis)" : "");
    double xr = r[1] - r[0], xp = xr > 0 ? 0.03 * xr : 0.5;
    if (whole && xp < 0.2) xp = xr > 0 ? 0.2 : 0.5;
    r[0] -= xp;
    r[1] += xp;
    if (logy) {
        r[2] = floor(r[2]);
        r[3] = ceil(r[3]);
        if (r[3] - r[2] < 1) r[3] = r[2] + 1;
    } else {
        double pad = r[3] > r[2] ? 0.05 * (r[3] - r[2]) : (r[3] != 0 ? 0.1 * fabs(r[3]) : 1.0);
        r[2] -= pad;
        r[3] += pad;
    }
    return AL_OK;
}

/* Draws curve c: runs of drawable points as lines, a dot at every point (bx, by: scratch of n). */
static void method_draw(const PlotMethodCurve *c, bool logy, double *bx, double *by) {
    size_t run = 0;
    for (size_t i = 0; i <= c->n; i++) {
        if (i < c->n && drawable(c, i, logy)) {
            bx[run] = c->x[i];
            by[run] = logy ? log10(c->y[i]) : c->y[i];
            run++;
            continue;
        }
        if (run > 1) plline((PLINT)run, bx, by);
        if (run) plot_dots(run, bx, by, 0.7);
        run = 0;
    }
}

int plot_method_curves(const PlotOpts *opts, const PlotMethodCurve *curves, size_t n_curves, bool x_whole) {
    if (!opts) return al_err("plot: no options given");
    if (!curves || !n_curves) return al_err("plot: no curves given");
    if (n_curves > METHOD_CURVES_MAX) return al_err("plot: at most %d curves (got %zu)", METHOD_CURVES_MAX, n_curves);
    size_t maxn = 0;
    for (size_t k = 0; k < n_curves; k++) {
        if (!curves[k].x || !curves[k].y) return al_err("plot: curve %zu has no points", k + 1);
        if (curves[k].n > maxn) maxn = curves[k].n;
    }
    double r[4];
    if (method_range(curves, n_curves, opts->logy, x_whole, r)) return AL_ERR;
    double *buf = al_malloc3(maxn, 2, sizeof(double), "curve points");
    if (!buf) return AL_ERR;

    PlotPage pg;
    if (plot_page_open(opts, &pg)) { free(buf); return AL_ERR; }
    plot_page_title(opts, "Methods compared");
    PlotLegendItem items[METHOD_CURVES_MAX];
    char labels[METHOD_CURVES_MAX][256];
    for (size_t k = 0; k < n_curves; k++) {
        char name[32];
        snprintf(name, sizeof name, "curve %zu", k + 1);
        items[k] = (PlotLegendItem){plot_esc(labels[k], sizeof labels[k], curves[k].label ? curves[k].label : name),
                                    plot_series_color(curves[k].slot > 0 ? (size_t)curves[k].slot : 0),
                                    PL_ITEM_LINE_DOT, 1};
    }
    plot_vpor_std(opts, plot_legend_rows(items, (int)n_curves, plot_vpor_std_width(2.0), 0.9), 2.0);
    plwind(r[0], r[1], r[2], r[3]);
    /* Whole-number x ticks: a round step of at least 1, a minor tick at every whole number. */
    double xstep = 0;
    PLINT xsub = 0;
    if (x_whole) {
        xstep = ceil(plot_nice_step(r[1] - r[0], 8));
        if (xstep < 1) xstep = 1;
        xsub = xstep <= 10 ? (PLINT)xstep : 0;
    }
    plcol0(PC_LIGHT);
    plbox("g", xstep, xsub, opts->logy ? "gl" : "g", 0, 0);
    plcol0(PC_FG);
    plbox("bcnst", xstep, xsub, opts->logy ? "bcnstlv" : "bcnstv", 0, 0);
    plot_axis_labels(opts, "x", "y");

    double fs = plot_font_scale();
    for (size_t k = 0; k < n_curves; k++) {
        plcol0(items[k].color);
        plwidth(2.2 * fs);
        method_draw(&curves[k], opts->logy, buf, buf + maxn);
    }
    plwidth(fs);
    plot_legend(items, (int)n_curves, 0.9);
    free(buf);
    return plot_page_close(&pg);
}
