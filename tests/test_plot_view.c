/* test_plot_view.c -- the overrides every figure takes (PlotOpts.view, plots/plot.h) and panels,
 * checked on the layout each renderer records (plot_last_geom: the data window in axis units, the
 * viewport in page fractions), not on pixels:
 *   - xrange / yrange replace the fitted window ends (an open end stays fitted), in log10 units on a
 *     log axis; y fits the points inside the xrange; logx / logy set the axes; empty or non-positive log ranges are errors;
 *   - a figure that cannot draw an override refuses it by name and writes no file; a heatmap's
 *     ranges crop it, its axes keep the matrix's indices;
 *   - plot xy's error bars widen the fitted y range to y +- yerr;
 *   - a figure inside `plot panels` lays out as it would alone on a page of the subpage's size (the
 *     data viewport and window, the legend's rows and centre are the same), in the subpage's
 *     coordinates; a cancelled panel page leaves no file. */
#define _GNU_SOURCE
#include <unistd.h>

#include "check.h"
#include "plot.h"
#include "plot_int.h"

static const char *dir;

static PlotOpts opts_file(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", dir, name);
    return (PlotOpts){.path = buf, .width = 1000, .height = 700};
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static const double X[5] = {1, 10, 100, 1000, 10000}, Y[5] = {3, 5, 4, 8, 6}, E[5] = {1, 1, 1, 1, 4};

static void test_ranges(void) {
    char p[512];
    PlotOpts o = opts_file("r.svg", p, sizeof p);
    PlotCurve c = {.label = "a", .x = X, .y = Y, .n = 5};
    /* fitted: x 1..10000 padded, y 3..8 padded */
    CHECK_OK(plot_curves(&o, &c, 1));
    const PlotGeom *g = plot_last_geom();
    CHECK(g->win[0] < 1 && g->win[1] > 10000 && g->win[2] < 3 && g->win[3] > 8, "fitted window %g %g %g %g",
          g->win[0], g->win[1], g->win[2], g->win[3]);
    /* xrange 2:500 exact; yrange :20 keeps the lower end fitted, to the points inside x 2..500
     * (y 5 and 4: 4 less 5% of 1) */
    o.view.xrange = o.view.yrange = true;
    o.view.xr[0] = 2, o.view.xr[1] = 500;
    o.view.yr[0] = NAN, o.view.yr[1] = 20;
    CHECK_OK(plot_curves(&o, &c, 1));
    CHECK_NEAR(g->win[0], 2, 1e-12);
    CHECK_NEAR(g->win[1], 500, 1e-12);
    CHECK_NEAR(g->win[2], 3.95, 1e-12);
    CHECK_NEAR(g->win[3], 20, 1e-12);
    /* y fits the points an xrange leaves visible (x 1..10: y 3..5), as gnuplot does */
    o.view.yrange = false;
    o.view.xr[0] = NAN, o.view.xr[1] = 10;
    CHECK_OK(plot_curves(&o, &c, 1));
    CHECK_NEAR(g->win[1], 10, 1e-12);
    CHECK_NEAR(g->win[2], 3 - 0.1, 1e-9);
    CHECK_NEAR(g->win[3], 5 + 0.1, 1e-9);
    CHECK(g->win[0] < 1, "the open lower end fits the visible points: %g", g->win[0]);
    o.view.xr[0] = 20000, o.view.xr[1] = 30000;
    CHECK_ERR(plot_curves(&o, &c, 1), "no finite points inside xrange");
    o.view.yrange = true;
    /* logx logy: the window in log10 units */
    o.view.logx = o.view.logy = true;
    o.view.xr[0] = 1, o.view.xr[1] = 1e4;
    o.view.yr[0] = 1, o.view.yr[1] = 100;
    CHECK_OK(plot_curves(&o, &c, 1));
    CHECK_NEAR(g->win[0], 0, 1e-12);
    CHECK_NEAR(g->win[1], 4, 1e-12);
    CHECK_NEAR(g->win[2], 0, 1e-12);
    CHECK_NEAR(g->win[3], 2, 1e-12);
    CHECK(g->logy, "logy recorded");
    /* a non-positive bound on a log axis, an empty range */
    o.view.yr[0] = -1;
    CHECK_ERR(plot_curves(&o, &c, 1), "yrange -1: a log axis takes positive bounds only");
    o.view.logx = o.view.logy = false;
    o.view.yrange = false;
    o.view.xr[0] = 1, o.view.xr[1] = 1;
    CHECK_ERR(plot_curves(&o, &c, 1), "xrange: the upper bound must exceed the lower one");
}

static void test_error_bars(void) {
    char p[512];
    PlotOpts o = opts_file("e.svg", p, sizeof p);
    PlotCurve c = {.label = "a", .x = X, .y = Y, .n = 5, .yerr = E};
    CHECK_OK(plot_curves(&o, &c, 1));
    const PlotGeom *g = plot_last_geom();
    /* y +- yerr spans 2..10 (point 5: 6 +- 4): 5% padding of 8 each side */
    CHECK_NEAR(g->win[2], 2 - 0.4, 1e-9);
    CHECK_NEAR(g->win[3], 10 + 0.4, 1e-9);
    c.yerr = NULL;
    CHECK_OK(plot_curves(&o, &c, 1));
    CHECK_NEAR(g->win[3], 8 + 0.25, 1e-9);
}

static void test_refusals(void) {
    char p[512];
    PlotOpts o = opts_file("h.svg", p, sizeof p);
    Mat *m = mat_new(3, 4);
    for (size_t i = 0; i < 12; i++) m->data[i] = (float)i - 5.0f;
    o.view.logy = true;
    CHECK_ERR(plot_heatmap(&o, m), "`logy` is not available for this figure");
    CHECK(!exists(p), "a refused heatmap wrote %s", p);
    o.view.logy = false;
    o.view.title = "T";
    CHECK_OK(plot_heatmap(&o, m));
    CHECK(exists(p), "the heatmap with a title override");
    mat_free(m);
    /* a heatmap's ranges crop it: columns 10..19 and rows 5..14 of a 30 x 40 matrix, axes in the
     * matrix's own indices (rows down) */
    m = mat_new(30, 40);
    for (size_t i = 0; i < 1200; i++) m->data[i] = (float)(i % 7) - 3.0f;
    o.view.xrange = o.view.yrange = true;
    o.view.xr[0] = 10, o.view.xr[1] = 20;
    o.view.yr[0] = 5, o.view.yr[1] = 15;
    CHECK_OK(plot_heatmap(&o, m));
    const PlotGeom *g = plot_last_geom();
    CHECK(g->win[0] == 10 && g->win[1] == 20 && g->win[2] == 15 && g->win[3] == 5, "heatmap crop window %g %g %g %g",
          g->win[0], g->win[1], g->win[2], g->win[3]);
    o.view.xr[0] = 50, o.view.xr[1] = 60;
    CHECK_ERR(plot_heatmap(&o, m), "select no cell of the 30 x 40 matrix");
    mat_free(m);
    /* the spectrum takes logy and ranges; energy logy and xrange only */
    double sigma[6] = {5, 4, 3, 2, 1, 0.5}, energy[6];
    double tot = 0, acc = 0;
    for (int i = 0; i < 6; i++) tot += sigma[i] * sigma[i];
    for (int i = 0; i < 6; i++) energy[i] = (acc += sigma[i] * sigma[i]) / tot;
    PlotOpts s = opts_file("s.svg", p, sizeof p);
    s.view.logy = s.view.xrange = true;
    s.view.xr[0] = 0, s.view.xr[1] = 3;
    CHECK_OK(plot_spectrum(&s, sigma, 6));
    CHECK_NEAR(plot_last_geom()->win[0], 0, 1e-12);
    CHECK_NEAR(plot_last_geom()->win[1], 3, 1e-12);
    CHECK(plot_last_geom()->logy, "spectrum logy override");
    PlotTauMark mk = {0.99, 5};
    s.view.yrange = true;
    s.view.yr[0] = 0, s.view.yr[1] = 1;
    snprintf(p, sizeof p, "%s/en.svg", dir);
    CHECK_ERR(plot_energy(&s, sigma, energy, 6, &mk, 1), "plot energy: `yrange` is not available");
    CHECK(!exists(p), "a refused energy figure wrote %s", p);
}

/* One figure alone on a 600 x 420 page, then as both panels of a 1200 x 420 page: the second
 * panel's viewport (in its subpage's fractions) and window equal the lone figure's. */
static void test_panels(void) {
    char p[512];
    static const double x[3] = {0, 1, 2}, y[3] = {1, 3, 2};
    PlotCurve c[4] = {
        {.label = "first series", .x = x, .y = y, .n = 3}, {.label = "second series", .x = x, .y = y, .n = 3},
        {.label = "third series", .x = x, .y = y, .n = 3}, {.label = "fourth series", .x = x, .y = y, .n = 3}};
    PlotOpts o = opts_file("alone.png", p, sizeof p);
    o.width = 600, o.height = 420;
    o.title = "panel";
    CHECK_OK(plot_curves(&o, c, 4));
    PlotGeom alone = *plot_last_geom();
    char pp[512];
    PlotOpts page = opts_file("panels.svg", pp, sizeof pp);
    page.width = 1200, page.height = 420;
    CHECK_OK(plot_panels_begin(&page, 2, 1));
    CHECK(plot_panels_active(), "panels active");
    CHECK_ERR(plot_panels_begin(&page, 1, 1), "panels do not nest");
    CHECK_OK(plot_curves(&o, c, 4));
    CHECK_OK(plot_curves(&o, c, 4));
    PlotGeom second = *plot_last_geom();
    CHECK_OK(plot_panels_end(true));
    CHECK(!plot_panels_active(), "panels ended");
    for (int k = 0; k < 4; k++) {
        CHECK_NEAR(second.vp[k], alone.vp[k], 1e-9);
        CHECK_NEAR(second.win[k], alone.win[k], 1e-9);
    }
    /* the legend: same rows at the same height, centred alike (PLplot reports its width in a
     * subpage a little wider than on a page of that size) */
    CHECK_NEAR(second.legend[2], alone.legend[2], 1e-9);
    CHECK_NEAR(second.legend[3], alone.legend[3], 1e-9);
    CHECK_NEAR(second.legend[0] + second.legend[1], alone.legend[0] + alone.legend[1], 1e-9);
    CHECK(exists(pp), "the panel page was written");
    /* a failed panel: no file */
    snprintf(pp, sizeof pp, "%s/failed.svg", dir);
    CHECK_OK(plot_panels_begin(&page, 2, 1));
    CHECK_OK(plot_curves(&o, c, 1));
    CHECK_OK(plot_panels_end(false));
    CHECK(!exists(pp), "a cancelled panel page left %s", pp);
}

int main(void) {
    dir = test_tmpdir();
    if (!freopen("/dev/null", "r", stdin)) { perror("stdin"); return 1; }
    test_ranges();
    test_error_bars();
    test_refusals();
    test_panels();
    return check_done();
}
