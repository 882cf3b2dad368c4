/* plot_spectrum.c -- a head's singular spectrum, and the spectrum overlaid with its cumulative
 * energy and the effective-rank marks (seed 000, sections 1.3 and 1.4).
 * Takes sigma (and energy, ranks) as computed by core; draws only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"
#include "plot_int.h"

/* ================================================================ shared */

/* Y range for sigma: linear [0, 1.05 max] or log10 of [smallest positive / 2, 2 max].
 * Fills ys (n, the values to draw, log10'd when logy). */
static int sigma_axis(const double *sigma, size_t n, bool logy, double *ys, double *lo, double *hi) {
    double mx = 0.0, mnpos = INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (sigma[i] < 0) return al_err("plot: sigma[%zu] = %g is negative; singular values are >= 0", i, sigma[i]);
        if (sigma[i] > mx) mx = sigma[i];
        if (sigma[i] > 0 && sigma[i] < mnpos) mnpos = sigma[i];
    }
    if (!logy) {
        for (size_t i = 0; i < n; i++) ys[i] = sigma[i];
        *lo = 0.0;
        *hi = mx > 0 ? 1.05 * mx : 1.0;
        return AL_OK;
    }
    if (mx <= 0) return al_err("plot: every singular value is 0; nothing to draw on a log axis (drop 'log')");
    double floor_v = mnpos / 2.0;
    for (size_t i = 0; i < n; i++) ys[i] = log10(sigma[i] > 0 ? sigma[i] : floor_v);
    *lo = floor(log10(floor_v));
    *hi = ceil(log10(mx) + 0.05);
    if (*hi - *lo < 1) *lo = *hi - 1;
    return AL_OK;
}

/* Index axis 1..n with a little room on both sides. */
static void index_range(size_t n, double *x0, double *x1) {
    double pad = n > 20 ? 0.01 * (double)n : 0.5;
    *x0 = 1.0 - pad;
    *x1 = (double)n + pad;
}

/* The points of a spectrum figure and its page: x = 1..n and y = sigma_axis's values in one
 * allocation (y = x + n; the caller frees x), the sigma range lo..hi and the index range x0..x1;
 * then opens the page. NULL + error on failure. */
static double *spectrum_page(const PlotOpts *opts, const double *sigma, size_t n, const char *what, double *lo,
                             double *hi, double *x0, double *x1, PlotPage *pg) {
    double *x = al_malloc3(n, 2, sizeof(double), what);
    if (!x) return NULL;
    if (sigma_axis(sigma, n, opts && opts->logy, x + n, lo, hi)) { free(x); return NULL; }
    for (size_t i = 0; i < n; i++) x[i] = (double)(i + 1);
    index_range(n, x0, x1);
    if (plot_page_open(opts, pg)) { free(x); return NULL; }
    return x;
}

/* ================================================================ spectrum */

int plot_spectrum(const PlotOpts *opts_in, const double *sigma, size_t n) {
    if (n == 0) return al_err("plot spectrum: no singular values to draw");
    if (plot_check_finite(sigma, n, "sigma")) return AL_ERR;
    PlotOpts ov;
    if (plot_view(opts_in, &ov, PV_LOGY | PV_XRANGE | PV_YRANGE, "plot spectrum")) return AL_ERR;
    const PlotOpts *opts = &ov;
    double lo, hi, x0, x1;
    PlotPage pg;
    double *x = spectrum_page(opts, sigma, n, "spectrum plot points", &lo, &hi, &x0, &x1, &pg);
    if (!x) return AL_ERR;
    double *y = x + n, r[4] = {x0, x1, lo, hi};
    if (plot_view_range(opts, r)) { free(x); plot_page_close(&pg); return AL_ERR; }
    x0 = r[0], x1 = r[1], lo = r[2], hi = r[3];
    plot_page_title(opts, "Singular values");
    plot_vpor_std(opts, 0, 2.0);
    plwind(x0, x1, lo, hi);
    plot_geom_data_area(opts->logy);
    const char *yopt = opts->logy ? "bcnstlv" : "bcnstv";
    plcol0(PC_LIGHT);
    plbox("g", 0, 0, opts->logy ? "gl" : "g", 0, 0);
    plcol0(PC_FG);
    plbox("bcnst", 0, 0, yopt, 0, 0);
    if (opts->logy) plot_log_labels(lo, hi);
    plot_axis_labels(opts, "index i (sorted, largest first)", opts->logy ? "σ#di#u (log scale)" : "σ#di#u");
    plcol0(PC_BLUE);
    plwidth(2.5 * plot_font_scale());
    plline((PLINT)n, x, y);
    if (n <= 96) plot_dots(n, x, y, 0.6);
    plwidth(plot_font_scale());
    free(x);
    return plot_page_close(&pg);
}

/* ================================================================ energy */

/* True when the polyline (x[i], y[i]) passes through the box [xa, xb] x [bot, top]: a segment
 * overlapping the x span whose y range meets the band (a conservative test). */
static bool crosses(const double *x, const double *y, size_t n, double xa, double xb, double bot, double top) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (x[i + 1] < xa || x[i] > xb) continue;
        double lo = fmin(y[i], y[i + 1]), hi = fmax(y[i], y[i + 1]);
        if (hi >= bot && lo <= top) return true;
    }
    return n == 1 && x[0] >= xa && x[0] <= xb && y[0] >= bot && y[0] <= top;
}

/* Where the n_lab stacked rank labels go: beside the rightmost mark line (to its right) or the
 * leftmost (to its left), a little away from it, at a height (energy axis, 0..1.05) where
 * neither the sigma curve (ys in [lo, hi], rescaled in place) nor the energy curve passes.
 * Tries growing distances from the line and several heights; falls back to the first. */
static void label_place(const double *x, double *ys, const double *energy, size_t n, double lo, double hi,
                        double x0, double x1, double line, bool right, size_t n_lab, double *tx, double *ty) {
    static const double dist[] = {0.025, 0.06, 0.1, 0.15};
    static const double cand[] = {0.34, 0.50, 0.20, 0.64, 0.80};
    double w = x1 - x0, width = 0.3 * w;
    for (size_t i = 0; i < n; i++) ys[i] = (ys[i] - lo) / (hi - lo) * 1.05;
    *tx = right ? line + dist[0] * w : line - dist[0] * w;
    *ty = cand[0];
    for (size_t d = 0; d < sizeof dist / sizeof dist[0]; d++) {
        double xt = right ? line + dist[d] * w : line - dist[d] * w;
        double xa = right ? xt : xt - width, xb = right ? xt + width : xt;
        for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++) {
            double top = cand[c] + 0.05, bot = cand[c] - 0.09 * (double)(n_lab ? n_lab - 1 : 0) - 0.05;
            if (bot > 0.0 && !crosses(x, ys, n, xa, xb, bot, top) && !crosses(x, energy, n, xa, xb, bot, top)) {
                *tx = xt;
                *ty = cand[c];
                return;
            }
        }
    }
}

/* Colours of the tau marks, in order. */
static const PLINT MARK_COLORS[] = {PC_GREEN, PC_VERMIL, PC_PURPLE, PC_SKY};

/* The right axis of an energy figure: energy 0..1.05, or log10(1 - energy) over lo..hi. */
typedef struct {
    bool res;
    double lo, hi;
    double *e;          /* (n) the curve in the axis' units (log10 of the clipped residual) */
} EnergyAxis;

/* Fills ax for energy (n) and the marks: the residual axis runs from a hundredth of the
 * smallest 1 - tau below 1 (and of 0.01 at least; never below 1e-8) to 1. */
static void energy_axis(const PlotOpts *o, const double *energy, size_t n, const PlotTauMark *m, size_t nm,
                        EnergyAxis *ax) {
    ax->res = o->residual;
    if (!ax->res) {
        ax->lo = 0.0;
        ax->hi = 1.05;
        for (size_t i = 0; i < n; i++) ax->e[i] = energy[i];
        return;
    }
    double smallest = 1e-2;    /* tau = 1 has no line on this axis: its mark sits on the floor */
    for (size_t k = 0; k < nm; k++)
        if (m[k].tau < 1.0 - 1e-12) smallest = fmin(smallest, fmax(1.0 - m[k].tau, 1e-6));
    ax->lo = floor(log10(smallest) + 1e-9) - 2.0;
    ax->hi = 0.08;
    for (size_t i = 0; i < n; i++) ax->e[i] = fmax(log10(fmax(1.0 - energy[i], 0.0) + 1e-300), ax->lo);
}

/* y of mark k on the right axis: on the energy curve, or (residual) on its tau line. */
static double mark_y(const EnergyAxis *ax, const PlotTauMark *m) {
    return ax->res ? log10(fmax(1.0 - m->tau, pow(10.0, ax->lo))) : ax->e[m->rank - 1];
}

/* The right axis, its label, and the tau guide lines (dashed: from the left edge along the tau
 * line to the rank, and down the rank to the bottom), under every curve. */
static void energy_right(const EnergyAxis *ax, double x0, double x1, const PlotTauMark *m, size_t nm) {
    double fs = plot_font_scale();
    plwind(x0, x1, ax->lo, ax->hi);
    plcol0(PC_FG);
    plwidth(fs);
    plbox("", 0, 0, ax->res ? "cmstlv" : "cmstv", ax->res ? 0 : 0.2, ax->res ? 0 : 2);
    plmtex("r", 4.0, 0.5, 0.5, ax->res ? "1 − cumulative energy (log scale)" : "cumulative energy (fraction of Σ σ²)");
    for (size_t k = 0; k < nm; k++) {
        double rx = (double)m[k].rank, ey = mark_y(ax, &m[k]);
        double ty = ax->res ? ey : m[k].tau;
        plcol0(MARK_COLORS[k]);
        plwidth(1.5 * fs);
        pllsty(2);
        pljoin(rx, ax->lo, rx, ey);
        pljoin(x0, ty, rx, ty);
        pllsty(1);
    }
}

/* The tau marks: dots at mark_y, those sharing a rank as concentric rings (the first largest,
 * drawn first), recorded in plot_geom. */
static void energy_marks(const EnergyAxis *ax, const PlotTauMark *m, size_t nm) {
    PlotGeom *g = plot_geom();
    g->n_marks = 0;
    for (size_t k = 0; k < nm; k++) {
        size_t later = 0;
        for (size_t j = k + 1; j < nm; j++) later += m[j].rank == m[k].rank && !ax->res;
        double rx = (double)m[k].rank, ey = mark_y(ax, &m[k]), size = 1.0 + 0.6 * (double)later;
        plcol0(MARK_COLORS[k]);
        plot_dots(1, &rx, &ey, size);
        if (g->n_marks < GEOM_MARKS) {
            double *gm = g->mark[g->n_marks++];
            plot_page_xy(rx, ey, &gm[0], &gm[1]);
            gm[2] = size;
        }
    }
}

/* The legend items of an energy figure (labels: room for 4 marks). */
static int energy_legend(bool res, const PlotTauMark *m, size_t nm, size_t n, char labels[4][64], PlotLegendItem *items) {
    int ni = 0;
    items[ni++] = (PlotLegendItem){"σ#di#u (left axis)", PC_BLUE, n <= 96 ? PL_ITEM_LINE_DOT : PL_ITEM_LINE, 1, NULL};
    items[ni++] = (PlotLegendItem){res ? "1 − energy (right axis)" : "energy (right axis)", PC_ORANGE, PL_ITEM_LINE, 1, NULL};
    for (size_t k = 0; k < nm; k++) {
        snprintf(labels[k], sizeof labels[k], "τ = %g: rank %zu", m[k].tau, m[k].rank);
        items[ni++] = (PlotLegendItem){labels[k], MARK_COLORS[k], PL_ITEM_DOT, 1, NULL};
    }
    return ni;
}

/* Ranks written beside the lines, stacked, all on one side so no text crosses a line: right of
 * the rightmost line, or left of the leftmost when the lines are far right. ys (n, the sigma
 * curve) is rescaled in place. */
static void energy_texts(const EnergyAxis *ax, const double *x, double *ys, size_t n, double lo, double hi,
                         double x0, double x1, const PlotTauMark *m, size_t nm) {
    double rmin = x1, rmax = x0, tx, base;
    for (size_t k = 0; k < nm; k++) {
        rmin = fmin(rmin, (double)m[k].rank);
        rmax = fmax(rmax, (double)m[k].rank);
    }
    bool right = rmax < x0 + 0.62 * (x1 - x0);
    for (size_t i = 0; i < n; i++) ax->e[i] = (ax->e[i] - ax->lo) / (ax->hi - ax->lo) * 1.05;
    label_place(x, ys, ax->e, n, lo, hi, x0, x1, right ? rmax : rmin, right, nm, &tx, &base);
    plwind(x0, x1, 0.0, 1.05);
    plot_chr(1.0);
    for (size_t k = 0; k < nm; k++) {
        char buf[64];
        snprintf(buf, sizeof buf, "r = %zu at τ = %g", m[k].rank, m[k].tau);
        plcol0(MARK_COLORS[k]);
        plptex(tx, base - 0.09 * (double)k, 1.0, 0.0, right ? 0.0 : 1.0, buf);
    }
}

static int energy_check(const double *sigma, const double *energy, size_t n, const PlotTauMark *marks, size_t n_marks) {
    if (n == 0) return al_err("plot energy: no singular values to draw");
    if (plot_check_finite(sigma, n, "sigma") || plot_check_finite(energy, n, "energy")) return AL_ERR;
    if (n_marks > 4) return al_err("plot energy: at most 4 tau marks (got %zu)", n_marks);
    for (size_t k = 0; k < n_marks; k++)
        if (marks[k].rank < 1 || marks[k].rank > n)
            return al_err("plot energy: rank %zu at tau = %g is outside 1..%zu", marks[k].rank, marks[k].tau, n);
    for (size_t i = 0; i < n; i++)
        if (energy[i] < -1e-9 || energy[i] > 1.0 + 1e-9)
            return al_err("plot energy: energy[%zu] = %g is not a fraction in [0, 1]", i, energy[i]);
    return AL_OK;
}

int plot_energy(const PlotOpts *opts_in, const double *sigma, const double *energy, size_t n,
                const PlotTauMark *marks, size_t n_marks) {
    if (energy_check(sigma, energy, n, marks, n_marks)) return AL_ERR;
    PlotOpts ov;
    if (plot_view(opts_in, &ov, PV_LOGY | PV_XRANGE, "plot energy")) return AL_ERR;
    const PlotOpts *opts = &ov;
    EnergyAxis ax = {.e = al_malloc3(n, 1, sizeof(double), "energy axis")};
    if (!ax.e) return AL_ERR;
    double lo, hi, x0, x1;
    PlotPage pg;
    double *x = spectrum_page(opts, sigma, n, "energy plot points", &lo, &hi, &x0, &x1, &pg);
    if (!x) { free(ax.e); return AL_ERR; }
    double *y = x + n, fs = plot_font_scale(), r[4] = {x0, x1, lo, hi};
    if (plot_view_range(opts, r)) { free(x); free(ax.e); plot_page_close(&pg); return AL_ERR; }
    x0 = r[0], x1 = r[1];
    energy_axis(opts, energy, n, marks, n_marks, &ax);
    plot_page_title(opts, "Singular values and cumulative energy");
    PlotLegendItem items[2 + 4];
    char labels[4][64];
    int ni = energy_legend(ax.res, marks, n_marks, n, labels, items);    /* first: its rows set the layout */
    plot_vpor_std(opts, plot_legend_rows(items, ni, plot_vpor_std_width(7.0), 0.9), 7.0);

    /* Left axis: sigma. */
    plwind(x0, x1, lo, hi);
    plot_geom_data_area(opts->logy);
    plcol0(PC_LIGHT);
    plbox("g", 0, 0, "", 0, 0);
    plcol0(PC_FG);
    plbox("bcnst", 0, 0, opts->logy ? "bnstlv" : "bnstv", 0, 0);
    if (opts->logy) plot_log_labels(lo, hi);
    plot_axis_labels(opts, "index i (sorted, largest first)", opts->logy ? "σ#di#u (log scale)" : "σ#di#u");
    energy_right(&ax, x0, x1, marks, n_marks);
    plwind(x0, x1, lo, hi);
    plcol0(PC_BLUE);
    plwidth(2.5 * fs);
    plline((PLINT)n, x, y);
    if (n <= 96) plot_dots(n, x, y, 0.5);
    plwind(x0, x1, ax.lo, ax.hi);
    plcol0(PC_ORANGE);
    plline((PLINT)n, x, ax.e);
    energy_marks(&ax, marks, n_marks);
    energy_texts(&ax, x, y, n, lo, hi, x0, x1, marks, n_marks);
    plwidth(fs);
    plot_legend(items, ni, 0.9);
    free(x);
    free(ax.e);
    return plot_page_close(&pg);
}
