/* plot_curves.c -- the generic several-curves figure with a legend: RoPE energy against
 * dimensions kept, errors by layer per method, perplexity against removal ratio, ...
 * Takes the points as computed by the caller; draws only. Non-finite y values break a curve. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"
#include "plot_int.h"

#define CURVES_MAX 16

/* Data range over every finite point (y > 0 only when logy), with margins that keep the dots at
 * the ends inside (whole: at least 0.2 on x). Error when nothing is left. */
static int curves_range(const PlotCurve *c, size_t nc, bool logy, bool whole, double r[4]) {
    r[0] = r[2] = INFINITY;
    r[1] = r[3] = -INFINITY;
    for (size_t k = 0; k < nc; k++)
        for (size_t i = 0; i < c[k].n; i++) {
            double x = c[k].x[i], y = c[k].y[i];
            if (!isfinite(x) || !isfinite(y) || (logy && y <= 0)) continue;
            if (logy) y = log10(y);
            r[0] = fmin(r[0], x); r[1] = fmax(r[1], x);
            r[2] = fmin(r[2], y); r[3] = fmax(r[3], y);
        }
    if (!(r[0] <= r[1])) return al_err("plot curves: no finite points%s to draw", logy ? " with y > 0" : "");
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

/* Draws curve c: runs of consecutive drawable points as lines, and dots when asked. */
static void draw_curve(const PlotCurve *c, bool logy, double *bx, double *by) {
    size_t run = 0;
    for (size_t i = 0; i <= c->n; i++) {
        bool ok = i < c->n && isfinite(c->x[i]) && isfinite(c->y[i]) && (!logy || c->y[i] > 0);
        if (ok) {
            bx[run] = c->x[i];
            by[run] = logy ? log10(c->y[i]) : c->y[i];
            run++;
            continue;
        }
        if (run > 1) plline((PLINT)run, bx, by);
        if (run && c->points) plot_dots(run, bx, by, 0.7);
        else if (run == 1) plot_dots(1, bx, by, 0.7);    /* a lone point must still show */
        run = 0;
    }
}

int plot_curves(const PlotOpts *opts, const PlotCurve *curves, size_t n_curves) {
    if (!curves || !n_curves) return al_err("plot curves: no curves given");
    if (n_curves > CURVES_MAX) return al_err("plot curves: at most %d curves (got %zu)", CURVES_MAX, n_curves);
    size_t maxn = 0;
    for (size_t k = 0; k < n_curves; k++) {
        if (!curves[k].x || !curves[k].y) return al_err("plot curves: curve %zu has no points", k + 1);
        if (curves[k].n > maxn) maxn = curves[k].n;
    }
    double r[4];
    if (curves_range(curves, n_curves, opts && opts->logy, opts && opts->x_whole, r)) return AL_ERR;
    double *buf = al_malloc3(maxn, 2, sizeof(double), "curve points");
    if (!buf) return AL_ERR;

    PlotPage pg;
    if (plot_page_open(opts, &pg)) { free(buf); return AL_ERR; }
    plot_page_title(opts, "Curves");
    PlotLegendItem items[CURVES_MAX];
    char labels[CURVES_MAX][256];
    for (size_t k = 0; k < n_curves; k++) {
        char name[32];
        snprintf(name, sizeof name, "curve %zu", k + 1);
        size_t c = curves[k].fixed_color && curves[k].slot >= 0 ? (size_t)curves[k].slot : k;
        items[k] = (PlotLegendItem){plot_esc(labels[k], sizeof labels[k], curves[k].label ? curves[k].label : name),
                                    plot_series_color(c), curves[k].points ? PL_ITEM_LINE_DOT : PL_ITEM_LINE,
                                    (PLINT)(1 + (c / 7) % 8)};
    }
    /* A legend past 3 rows at the usual size takes too much of the height: smaller text, which
     * also lets long labels share a row. */
    double lrel = 0.9;
    int lrows = plot_legend_rows(items, (int)n_curves, plot_vpor_std_width(2.0), lrel);
    if (lrows > 3) lrows = plot_legend_rows(items, (int)n_curves, plot_vpor_std_width(2.0), lrel = 0.72);
    plot_vpor_std(opts, (int)ceil(lrows * lrel / 0.9), 2.0);      /* rows reserved at the usual size */
    plwind(r[0], r[1], r[2], r[3]);
    double xstep = 0, ystep = 0;    /* whole numbers: a whole step of at least 1, minor ticks at each */
    PLINT xsub = 0, ysub = 0;
    if (opts->x_whole) {
        xstep = plot_whole_step(r[1] - r[0], 8);
        xsub = xstep <= 10 ? (PLINT)xstep : 0;
    }
    if (opts->y_whole && !opts->logy) {
        ystep = plot_whole_step(r[3] - r[2], 6);
        ysub = ystep <= 10 ? (PLINT)ystep : 0;
    }
    plcol0(PC_LIGHT);
    plbox("g", xstep, xsub, opts->logy ? "gl" : "g", ystep, ysub);
    plcol0(PC_FG);
    plbox("bcnst", xstep, xsub, opts->logy ? "bcnstlv" : "bcnstv", ystep, ysub);
    if (opts->logy) plot_log_labels(r[2], r[3]);
    plot_axis_labels(opts, "x", "y");

    double fs = plot_font_scale();
    for (size_t k = 0; k < n_curves; k++) {
        plcol0(items[k].color);
        pllsty(items[k].line_style);
        plwidth(2.2 * fs);
        draw_curve(&curves[k], opts->logy, buf, buf + maxn);
    }
    pllsty(1);
    plwidth(fs);
    plot_legend(items, (int)n_curves, lrel);
    free(buf);
    return plot_page_close(&pg);
}
