/* plot_keynorms.c -- key-norm concentration per key dimension (TransMLA, seed 003, Figure 3a):
 * the norm of each key dimension for several variants (original, RoRoPE, RoRoPE + FreqFold),
 * real halves of the RoPE pairs in the top panel and imaginary halves mirrored below, so a
 * variant that concentrates the norm into the first dimensions shows it at a glance.
 * Takes the norms as computed by core (or from calibration); draws only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"
#include "plot_int.h"

#define KN_MAX_VARIANTS 7

/* Draws one half-panel: every variant's values (re or im) against pair index, with head
 * boundaries (labelled by head_labels in the top panel). The window is set by the caller (mirrored for the bottom panel). */
static void draw_half(const PlotKeyNorms *v, size_t nv, size_t n, size_t pph, double ymax, bool im,
                      const double *x) {
    double fs = plot_font_scale();
    if (pph > 0) {
        plcol0(PC_GREY);
        pllsty(2);
        for (size_t b = pph; b < n; b += pph) pljoin(b - 0.5, 0.0, b - 0.5, ymax);
        pllsty(1);
    }
    for (size_t k = 0; k < nv; k++) {
        plcol0(plot_series_color(k));
        plwidth((nv > 1 && k == 0 ? 2.0 : 1.6) * fs);
        plline((PLINT)n, x, im ? v[k].im : v[k].re);
    }
    plwidth(fs);
}

/* "KV head g" centred over each head's span just inside the top of the current panel (window
 * x0..x1), when the spans are wide enough to hold it; the separators are drawn by draw_half. */
static void head_labels(size_t n, size_t pph, double x0, double x1) {
    if (!pph || pph >= n) return;
    size_t heads = (n + pph - 1) / pph;
    bool long_form = heads <= 8;
    if (heads > 32) return;
    char buf[32];
    plot_chr(long_form ? 0.75 : 0.6);
    plcol0(PC_GREY);
    for (size_t g = 0; g < heads; g++) {
        snprintf(buf, sizeof buf, long_form ? "KV head %zu" : "%zu", g);
        double c = (double)(g * pph) + 0.5 * (double)pph - 0.5;
        plmtex("t", -1.3, (c - x0) / (x1 - x0), 0.5, buf);
    }
    plot_chr(1.0);
    plcol0(PC_FG);
}

int plot_key_norms(const PlotOpts *opts_in, const PlotKeyNorms *variants, size_t n_variants,
                   size_t n_pairs, size_t pairs_per_head) {
    if (!variants || !n_variants) return al_err("plot key norms: no variants given");
    PlotOpts ov;
    if (plot_view(opts_in, &ov, PV_XRANGE, "plot key-norms")) return AL_ERR;
    const PlotOpts *opts = &ov;
    if (n_variants > KN_MAX_VARIANTS)
        return al_err("plot key norms: at most %d variants (got %zu)", KN_MAX_VARIANTS, n_variants);
    if (!n_pairs) return al_err("plot key norms: no key dimensions");
    double ymax = 0.0;
    for (size_t k = 0; k < n_variants; k++) {
        char what[64];
        snprintf(what, sizeof what, "key norms (re) of variant %zu", k + 1);
        if (plot_check_finite(variants[k].re, n_pairs, what)) return AL_ERR;
        snprintf(what, sizeof what, "key norms (im) of variant %zu", k + 1);
        if (plot_check_finite(variants[k].im, n_pairs, what)) return AL_ERR;
        for (size_t i = 0; i < n_pairs; i++) {
            if (variants[k].re[i] < 0 || variants[k].im[i] < 0)
                return al_err("plot key norms: variant %zu has a negative norm at pair %zu", k + 1, i);
            ymax = fmax(ymax, fmax(variants[k].re[i], variants[k].im[i]));
        }
    }
    ymax = ymax > 0 ? 1.2 * ymax : 1.0;     /* headroom: the head labels sit above the lines */
    double *x = al_malloc3(n_pairs, 1, sizeof(double), "key norm points");
    if (!x) return AL_ERR;
    for (size_t i = 0; i < n_pairs; i++) x[i] = (double)i;

    PlotPage pg;
    if (plot_page_open(opts, &pg)) { free(x); return AL_ERR; }
    plot_page_title(opts, "Key norm per dimension, real and imaginary RoPE halves");
    double ex = plot_em_x(), ey = plot_em_y();
    PlotLegendItem items[KN_MAX_VARIANTS];
    char labels[KN_MAX_VARIANTS][96];
    for (size_t k = 0; k < n_variants; k++)
        items[k] = (PlotLegendItem){plot_esc(labels[k], sizeof labels[k], variants[k].label ? variants[k].label : "variant"),
                                    plot_series_color(k), PL_ITEM_LINE, 1, NULL};
    double L = 6.6 * ex, R = 1.0 - 2.0 * ex, B = 4.6 * ey;
    double T = plot_top(opts, plot_legend_rows(items, (int)n_variants, R - L, 0.9));
    double mid = 0.5 * (B + T), gap = 0.9 * ey;    /* room for both panels' end tick labels */
    double xr[4] = {-0.5, (double)n_pairs - 0.5, 0, 1};
    if (plot_view_range(opts, xr)) { free(x); plot_page_close(&pg); return AL_ERR; }
    double x0 = xr[0], x1 = xr[1];
    char esc[320];

    /* Top: real halves, growing upward. */
    plvpor(L, R, mid + gap, T);
    plwind(x0, x1, 0.0, ymax);
    draw_half(variants, n_variants, n_pairs, pairs_per_head, ymax, false, x);
    plcol0(PC_FG);
    plbox("bcst", 0, 0, "bcnstv", 0, 0);
    if (!plot_ylabel(opts)) plmtex("l", 4.2, 0.5, 0.5, "Re-dim norm");
    plmtex("r", 1.0, 0.5, 0.5, "real");
    head_labels(n_pairs, pairs_per_head, x0, x1);

    plot_legend(items, (int)n_variants, 0.9);

    /* Bottom: imaginary halves, mirrored (0 at the top, growing downward). */
    plvpor(L, R, B, mid - gap);
    plwind(x0, x1, ymax, 0.0);
    draw_half(variants, n_variants, n_pairs, pairs_per_head, ymax, true, x);
    plcol0(PC_FG);
    plbox("bcnst", 0, 0, "bcnstv", 0, 0);
    if (!plot_ylabel(opts)) plmtex("l", 4.2, 0.5, 0.5, "Im-dim norm");
    plmtex("r", 1.0, 0.5, 0.5, "imaginary");
    plmtex("b", 3.0, 0.5, 0.5, plot_xlabel(opts) ? plot_esc(labels[0], sizeof labels[0], plot_xlabel(opts))
                                                 : "key dimension (RoPE pair index, all KV heads)");
    if (plot_ylabel(opts)) {    /* one label over both panels: it names both halves */
        plvpor(L, R, B, T);
        plmtex("l", 4.2, 0.5, 0.5, plot_esc(esc, sizeof esc, plot_ylabel(opts)));
    }
    free(x);
    return plot_page_close(&pg);
}
