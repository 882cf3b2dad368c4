/* plot_curves.c -- the generic several-curves figure with a legend: RoPE energy against
 * dimensions kept, errors by layer per method, perplexity against removal ratio, ...
 * Takes the points as computed by the caller; draws only. Non-finite y values break a curve. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"
#include "plot_int.h"

#define CURVES_MAX 16

/* A point of curve c at i in axis units (log10 on a log axis); false when it cannot be drawn. */
static bool curve_xy(const PlotCurve *c, size_t i, bool logx, bool logy, double *x, double *y) {
    *x = c->x[i];
    *y = c->y[i];
    if (!isfinite(*x) || !isfinite(*y) || (logx && *x <= 0) || (logy && *y <= 0)) return false;
    if (logx) *x = log10(*x);
    if (logy) *y = log10(*y);
    return true;
}

/* Its error bar's ends in axis units; false without one (a bar reaching 0 on a log axis stops at
 * the point's tenth). */
static bool curve_err(const PlotCurve *c, size_t i, bool logy, double *lo, double *hi) {
    if (!c->yerr || !isfinite(c->yerr[i]) || c->yerr[i] <= 0 || !isfinite(c->y[i])) return false;
    double a = c->y[i] - c->yerr[i], b = c->y[i] + c->yerr[i];
    if (logy) {
        if (b <= 0) return false;
        if (a <= 0) a = (c->y[i] > 0 ? c->y[i] : b) / 10.0;
        a = log10(a), b = log10(b);
    }
    *lo = a, *hi = b;
    return true;
}

/* The x limits (axis units) of the user's xrange: open ends infinite. */
static void view_xlim(const PlotOpts *o, double xl[2]) {
    xl[0] = -INFINITY, xl[1] = INFINITY;
    for (int i = 0; o->view.xrange && i < 2; i++)
        if (!isnan(o->view.xr[i])) xl[i] = !o->logx ? o->view.xr[i] : o->view.xr[i] > 0 ? log10(o->view.xr[i]) : -INFINITY;
}

/* Data range over every finite point and error bar inside the x limits xl (y > 0 only when logy,
 * x > 0 when logx; as gnuplot, y fits what an xrange leaves visible), with margins that keep the
 * dots at the ends inside (whole: at least 0.2 on x). Error when nothing is left. */
static int curves_range(const PlotCurve *c, size_t nc, const PlotOpts *o, bool whole, double r[4]) {
    bool logx = o->logx, logy = o->logy;
    double xl[2];
    view_xlim(o, xl);
    r[0] = r[2] = INFINITY;
    r[1] = r[3] = -INFINITY;
    for (size_t k = 0; k < nc; k++)
        for (size_t i = 0; i < c[k].n; i++) {
            double x, y, lo, hi;
            if (!curve_xy(&c[k], i, logx, logy, &x, &y) || x < xl[0] || x > xl[1]) continue;
            r[0] = fmin(r[0], x); r[1] = fmax(r[1], x);
            r[2] = fmin(r[2], y); r[3] = fmax(r[3], y);
            if (curve_err(&c[k], i, logy, &lo, &hi)) { r[2] = fmin(r[2], lo); r[3] = fmax(r[3], hi); }
        }
    if (!(r[0] <= r[1]))
        return al_err("plot curves: no finite points%s%s to draw", logy || logx ? " with positive values on the log axes" : "",
                      o->view.xrange ? " inside xrange" : "");
    double xr = r[1] - r[0], xp = xr > 0 ? 0.03 * xr : 0.5;
    if (whole && xp < 0.2) xp = xr > 0 ? 0.2 : 0.5;
    r[0] -= xp;
    r[1] += xp;
    if (logy) {    /* fitted: 6% of the span each side, at least a fifth of a decade in all */
        double span = r[3] - r[2], pad = span > 0.2 ? 0.06 * span : 0.5 * (0.2 - span) + 0.012;
        r[2] -= pad;
        r[3] += pad;
    } else {
        double pad = r[3] > r[2] ? 0.05 * (r[3] - r[2]) : (r[3] != 0 ? 0.1 * fabs(r[3]) : 1.0);
        r[2] -= pad;
        r[3] += pad;
    }
    return AL_OK;
}

/* Draws curve c's error bars (solid, whatever the curve's dash). */
static void draw_errors(const PlotCurve *c, bool logx, bool logy) {
    pllsty(1);
    plwidth(1.6 * plot_font_scale());
    for (size_t i = 0; c->yerr && i < c->n; i++) {
        double x, lo, hi;
        if (curve_xy(c, i, logx, logy, &x, &lo) && curve_err(c, i, logy, &lo, &hi)) plerry(1, &x, &lo, &hi);
    }
}

/* Draws curve c: runs of consecutive drawable points as lines (unless no_line), dots when asked. */
static void draw_curve(const PlotCurve *c, size_t order, bool logx, bool logy, double *bx, double *by) {
    size_t run = 0;
    for (size_t i = 0; i <= c->n; i++) {
        if (i < c->n && curve_xy(c, i, logx, logy, &bx[run], &by[run])) {
            run++;
            continue;
        }
        const char *g = plot_marker_glyph(c->marker);
        /* later series (drawn on top) get slightly smaller glyphs, so a point two series share shows both;
           by drawing order, not by glyph (a figure that gives one kind of series triangles keeps them legible) */
        double size = 0.7 * pow(0.94, order < 8 ? (double)order : 8.0);
        if (c->marker % 6 >= 2 && c->marker % 6 <= 4) size *= 1.35;   /* ▲ ◆ ▼ fill less of their box than ● ■ */
        if (run > 1 && !c->no_line) plline((PLINT)run, bx, by);
        if (run && (c->points || c->no_line)) plot_marks(run, bx, by, size, g);
        else if (run == 1) plot_marks(1, bx, by, size, g);    /* a lone point must still show */
        run = 0;
    }
}

/* Sets the data viewport around the legend and returns its text size: above the data in up to
 * 3 rows (smaller text past 3 rows at the usual size, which also lets long labels share a row),
 * else in one column right of the data when that leaves the data at least 60% of the page. */
static double legend_layout(const PlotOpts *opts, const PlotLegendItem *items, int n, bool *right) {
    double lrel = 0.9;
    int lrows = plot_legend_rows(items, n, plot_vpor_std_width(2.0), lrel);
    if (lrows > 3) lrows = plot_legend_rows(items, n, plot_vpor_std_width(2.0), lrel = 0.72);
    double wem = plot_legend_width_em(items, n, 0.8) + 1.5;
    *right = lrows > 3 && plot_vpor_std_width(wem) >= 0.6;
    if (*right) {
        plot_vpor_std(opts, 0, wem);
        return 0.8;
    }
    plot_vpor_std(opts, (int)ceil(lrows * lrel / 0.9), 2.0);      /* rows reserved at the usual size */
    return lrel;
}

/* A linear y axis's labels in fixed point at a round step (about 6 ticks), so that PLplot never puts a
 * "(x10^k)" in the corner: returns the step (0 where a label would pass 10 characters: PLplot's own
 * labels then) with the labels' decimals and the widest label's characters. */
static double ylin_ticks(double lo, double hi, int *decimals, int *chars) {
    double step = plot_nice_step(hi - lo, 6);
    int d = 0;
    while (d < 9 && fabs(step * pow(10.0, d) - round(step * pow(10.0, d))) > 1e-6 * step * pow(10.0, d)) d++;
    int w = 0;
    char buf[64];
    for (double t = ceil(lo / step - 1e-9) * step; t <= hi + 1e-9 * step; t += step) {
        int n = snprintf(buf, sizeof buf, "%.*f", d, fabs(t) < 0.5 * step ? 0.0 : t);
        if (n > w) w = n;
    }
    *decimals = d;
    *chars = w;
    return w > 0 && w <= 10 ? step : 0;
}

/* PLplot's label callback for that axis: data points at the decimals. */
static void ylin_label(PLINT axis, PLFLT v, char *label, PLINT length, PLPointer data) {
    (void)axis;
    int d = *(const int *)data;
    snprintf(label, (size_t)length, "%.*f", d, fabs(v) < 0.5 * pow(10.0, -d) ? 0.0 : v);
}

int plot_curves(const PlotOpts *opts_in, const PlotCurve *curves, size_t n_curves) {
    if (!curves || !n_curves) return al_err("plot curves: no curves given");
    PlotOpts ov;
    if (!opts_in) return al_err("plot: no options given");
    if (plot_view(opts_in, &ov, PV_LOGX | PV_LOGY | PV_XRANGE | PV_YRANGE, "plot")) return AL_ERR;
    const PlotOpts *opts = &ov;
    if (n_curves > CURVES_MAX) return al_err("plot curves: at most %d curves (got %zu)", CURVES_MAX, n_curves);
    size_t maxn = 0;
    for (size_t k = 0; k < n_curves; k++) {
        if (!curves[k].x || !curves[k].y) return al_err("plot curves: curve %zu has no points", k + 1);
        if (curves[k].n > maxn) maxn = curves[k].n;
    }
    double r[4];
    if (curves_range(curves, n_curves, opts, opts->x_whole && !opts->logx, r) ||
        plot_view_range(opts, r))
        return AL_ERR;
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
                                    plot_series_color(c),
                                    curves[k].no_line ? PL_ITEM_DOT : curves[k].points ? PL_ITEM_LINE_DOT : PL_ITEM_LINE,
                                    curves[k].dash > 0 ? curves[k].dash : (PLINT)(1 + (c / 7) % 8),
                                    plot_marker_glyph(curves[k].marker)};
        plot_geom()->series_marker[k] = curves[k].marker;
        plot_geom()->series_style[k] = (int)items[k].line_style;
    }
    plot_geom()->n_series = (int)n_curves;
    int ydec = 0, ychars = 0;
    double ylin = opts->logy || opts->y_whole ? 0 : ylin_ticks(r[2], r[3], &ydec, &ychars);
    if (ylin > 0) plot_ytick_room(ychars);
    bool right = false;
    double lrel = legend_layout(opts, items, (int)n_curves, &right);
    plwind(r[0], r[1], r[2], r[3]);
    plot_geom_data_area(opts->logy);
    double xstep = 0, ystep = 0;    /* whole numbers: a whole step of at least 1, minor ticks at each */
    PLINT xsub = 0, ysub = 0;
    if (opts->x_whole && !opts->logx) {
        xstep = plot_whole_step(r[1] - r[0], 8);
        xsub = xstep <= 10 ? (PLINT)xstep : 0;
    }
    if (opts->y_whole && !opts->logy) {
        ystep = plot_whole_step(r[3] - r[2], 6);
        ysub = ystep <= 10 ? (PLINT)ystep : 0;
    }
    if (ylin > 0) {
        ystep = ylin;
        plslabelfunc(ylin_label, &ydec);
    }
    /* a log axis of up to 3 decades gets its labels and grid at round values (plot_log_axis) */
    double lt[GEOM_TICKS];
    bool own_log = opts->logy && plot_log_ticks(r[2], r[3], lt, GEOM_TICKS) > 0;
    bool own_logx = opts->logx && plot_log_ticks(r[0], r[1], lt, GEOM_TICKS) > 0;
    plcol0(PC_LIGHT);
    plbox(own_logx ? "" : opts->logx ? "gl" : "g", xstep, xsub, own_log ? "" : opts->logy ? "gl" : "g", ystep, ysub);
    if (own_log) plot_log_axis(r[2], r[3], r[0], r[1]);
    if (own_logx) plot_log_xaxis(r[0], r[1], r[2], r[3]);
    plcol0(PC_FG);
    plbox(own_logx ? "bcstl" : opts->logx ? "bcnstl" : "bcnst", xstep, xsub,
          own_log ? "bcstlv" : opts->logy ? "bcnstlv" : ylin > 0 ? "bcnstvo" : "bcnstv", ystep, ysub);
    plslabelfunc(NULL, NULL);

    plot_axis_labels(opts, "x", "y");

    double fs = plot_font_scale();
    for (size_t k = 0; k < n_curves; k++) {
        plcol0(items[k].color);
        draw_errors(&curves[k], opts->logx, opts->logy);
        pllsty(items[k].line_style);
        plwidth((curves[k].width > 0 ? curves[k].width : 2.2) * fs);
        draw_curve(&curves[k], k, opts->logx, opts->logy, buf, buf + maxn);
    }
    pllsty(1);
    plwidth(fs);
    if (right) plot_legend_right(items, (int)n_curves, lrel);
    else plot_legend(items, (int)n_curves, lrel);
    free(buf);
    return plot_page_close(&pg);
}
