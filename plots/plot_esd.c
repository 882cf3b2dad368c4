/* plot_esd.c -- the empirical spectral density of one matrix on log-log axes: a histogram in log
 * bins, the power law fitted to its tail (WeightWatcher's fit, core/analysis/spectral_stats.h)
 * from xmin on, and the Marchenko-Pastur bulk edge. Takes the histogram and the fit as computed;
 * draws only. */
#include <math.h>
#include <stdio.h>

#include "al.h"
#include "plot_int.h"

/* log10 ranges of the figure: x over the bins, y over the positive densities (and the fit line
 * where it crosses the bins), a quarter decade of room each side. */
static int esd_ranges(const PlotEsd *e, double *xlo, double *xhi, double *ylo, double *yhi) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < e->nb; k++)
        if (e->dens[k] > 0) { lo = fmin(lo, e->dens[k]); hi = fmax(hi, e->dens[k]); }
    if (!(hi > 0)) return al_err("plot esd: the histogram is empty (a zero map has no spectral density)");
    if (isfinite(e->alpha) && e->xmin > 0) {
        double top = e->tail_frac * (e->alpha - 1) / e->xmin;          /* the fit at xmin */
        double bot = top * pow(e->edges[e->nb] / e->xmin, -e->alpha);  /* and at the last edge */
        hi = fmax(hi, top);
        lo = fmin(lo, fmax(bot, lo / 100));
    }
    *xlo = log10(e->edges[0]) - 0.25;
    *xhi = log10(e->edges[e->nb]) + 0.25;
    if (e->mp_edge > 0) { *xlo = fmin(*xlo, log10(e->mp_edge) - 0.25); *xhi = fmax(*xhi, log10(e->mp_edge) + 0.25); }
    *ylo = floor(log10(lo) - 0.25);
    *yhi = ceil(log10(hi) + 0.25);
    return AL_OK;
}

/* The bars' fill and edge; the legend's swatch is the fill. */
enum { ESD_FILL = PC_SKY, ESD_EDGE = PC_BLUE };

/* The bars: one filled box per nonempty bin, from the bottom of the axis. */
static void esd_bars(const PlotEsd *e, double ylo) {
    for (size_t k = 0; k < e->nb; k++) {
        if (!(e->dens[k] > 0)) continue;
        PLFLT bx[4] = {log10(e->edges[k]), log10(e->edges[k]), log10(e->edges[k + 1]), log10(e->edges[k + 1])};
        PLFLT by[4] = {ylo, log10(e->dens[k]), log10(e->dens[k]), ylo};
        plcol0(ESD_FILL);
        plfill(4, bx, by);
        plcol0(ESD_EDGE);
        plline(4, bx, by);
    }
}

/* The fitted law p(x) = tail_frac (alpha - 1) / xmin (x / xmin)^-alpha from xmin to the last edge
 * (a straight line of slope -alpha), and the vertical marks of xmin and the MP edge. */
static void esd_marks(const PlotEsd *e, double ylo, double yhi) {
    plwidth(2.5 * plot_font_scale());
    if (isfinite(e->alpha) && e->xmin > 0) {
        double a = log10(e->xmin), b = log10(e->edges[e->nb]);
        double ya = log10(e->tail_frac * (e->alpha - 1) / e->xmin);
        plcol0(PC_VERMIL);
        pljoin(a, ya, b, ya - e->alpha * (b - a));
        plcol0(PC_GREY);
        pllsty(3);
        pljoin(a, ylo, a, yhi);
    }
    if (e->mp_edge > 0) {
        plcol0(PC_GREEN);
        pllsty(2);
        pljoin(log10(e->mp_edge), ylo, log10(e->mp_edge), yhi);
    }
    pllsty(1);
    plwidth(plot_font_scale());
}

int plot_esd(const PlotOpts *opts_in, const PlotEsd *e) {
    if (!e->nb) return al_err("plot esd: no eigenvalues to draw");
    if (plot_check_finite(e->dens, e->nb, "densities") || plot_check_finite(e->edges, e->nb + 1, "bin edges"))
        return AL_ERR;
    PlotOpts ov;    /* log-log always: logx / logy change nothing, ranges are in data units */
    if (plot_view(opts_in, &ov, PV_LOGX | PV_LOGY | PV_XRANGE | PV_YRANGE, "plot esd")) return AL_ERR;
    ov.logx = ov.logy = true;
    const PlotOpts *opts = &ov;
    double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    if (esd_ranges(e, &xlo, &xhi, &ylo, &yhi)) return AL_ERR;
    double r[4] = {xlo, xhi, ylo, yhi};
    if (plot_view_range(opts, r)) return AL_ERR;
    xlo = r[0], xhi = r[1], ylo = r[2], yhi = r[3];
    char fit[96], mp[96], xm[96];
    snprintf(fit, sizeof fit, "power law α = %.3g", e->alpha);
    snprintf(mp, sizeof mp, "MP edge λ#d+#u = %.3g", e->mp_edge);
    snprintf(xm, sizeof xm, "xmin = %.3g", e->xmin);
    PlotLegendItem items[4] = {{.label = "ESD (log bins)", .color = ESD_FILL, .kind = PL_ITEM_BOX}};
    int ni = 1;
    if (isfinite(e->alpha)) {
        items[ni++] = (PlotLegendItem){.label = fit, .color = PC_VERMIL, .kind = PL_ITEM_LINE, .line_style = 1};
        items[ni++] = (PlotLegendItem){.label = xm, .color = PC_GREY, .kind = PL_ITEM_LINE, .line_style = 3};
    }
    if (e->mp_edge > 0)
        items[ni++] = (PlotLegendItem){.label = mp, .color = PC_GREEN, .kind = PL_ITEM_LINE, .line_style = 2};
    PlotPage pg;
    if (plot_page_open(opts, &pg)) return AL_ERR;
    plot_page_title(opts, "Empirical spectral density");
    plot_vpor_std(opts, plot_legend_rows(items, ni, plot_vpor_std_width(2.0), 0.8), 2.0);
    plwind(xlo, xhi, ylo, yhi);
    plot_geom_data_area(true);
    /* axes of up to 3 decades get labels at round values (PLplot labels only the decades) */
    double lt[GEOM_TICKS];
    bool own_x = plot_log_ticks(xlo, xhi, lt, GEOM_TICKS) > 0, own_y = plot_log_ticks(ylo, yhi, lt, GEOM_TICKS) > 0;
    plcol0(PC_LIGHT);
    plbox(own_x ? "" : "gl", 0, 0, own_y ? "" : "gl", 0, 0);
    if (own_x) plot_log_xaxis(xlo, xhi, ylo, yhi);
    if (own_y) plot_log_axis(ylo, yhi, xlo, xhi);
    esd_bars(e, ylo);
    esd_marks(e, ylo, yhi);
    plcol0(PC_FG);
    plbox(own_x ? "bcstl" : "bcnstl", 0, 0, own_y ? "bcstlv" : "bcnstlv", 0, 0);
    plot_axis_labels(opts, "eigenvalue λ of WᵀW / N (log scale)", "density (log scale)");
    plot_legend(items, ni, 0.8);
    return plot_page_close(&pg);
}
