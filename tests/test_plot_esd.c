/* test_plot_esd.c -- plots/plot_esd.c (`plot esd`): a density figure from spectral_stats' histogram
 * and fit is written, on log-log axes whose window holds every bar, the fitted line and the MP
 * edge, with its legend above the data and inside the page; empty input is an error. */
#include "check.h"
#include "plot.h"
#include "plot_int.h"
#include "spectral_stats.h"

static bool is_png(const char *path) {
    unsigned char b[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(b, 1, 8, f);
    fclose(f);
    return n == 8 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G';
}

/* A density figure of a planted Pareto sample with a bulk below it. */
static void test_figure(const char *dir) {
    static double x[1500], edges[21], dens[20];
    unsigned long long s = 88172645463325252ull;
    for (int i = 0; i < 1500; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        double u = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
        x[i] = i < 1000 ? 0.01 * pow(u, -1.0 / 1.5) : 0.002 + 0.008 * u;
    }
    SStatsFit f;
    CHECK_OK(sstats_powerlaw_fit(x, 1500, &f));
    sstats_log_hist(x, 1500, 20, edges, dens);
    PlotEsd e = { .edges = edges, .dens = dens, .nb = 20, .alpha = f.alpha, .xmin = f.xmin,
                  .tail_frac = (double)f.n_tail / 1500, .mp_edge = 0.05 };
    char path[4096];
    snprintf(path, sizeof path, "%s/esd.png", dir);
    PlotOpts o = { .path = path, .title = "esd" };
    CHECK_OK(plot_esd(&o, &e));
    CHECK(is_png(path), "%s is not a PNG", path);
    const PlotGeom *g = plot_last_geom();
    CHECK(g->logy, "a log y axis");
    CHECK(g->win[0] <= log10(edges[0]) && g->win[1] >= log10(edges[20]) && g->win[1] >= log10(0.05),
          "x window %g..%g holds the bins %g..%g and the MP edge", g->win[0], g->win[1], log10(edges[0]), log10(edges[20]));
    double lo = INFINITY, hi = 0;
    for (int k = 0; k < 20; k++) if (dens[k] > 0) lo = fmin(lo, dens[k]), hi = fmax(hi, dens[k]);
    double top = e.tail_frac * (e.alpha - 1) / e.xmin;
    CHECK(g->win[2] <= log10(lo) && g->win[3] >= log10(hi) && g->win[3] >= log10(top),
          "y window %g..%g holds the bars %g..%g and the fit's top %g", g->win[2], g->win[3], log10(lo), log10(hi), log10(top));
    /* the line drawn, tail_frac (alpha - 1) / xmin (x / xmin)^-alpha, lies on the bars of the tail */
    int on = 0, bars = 0;
    for (int k = 0; k < 20; k++) {
        if (edges[k] < 1.2 * f.xmin || dens[k] * 1500 * (edges[k + 1] - edges[k]) < 30) continue;
        double xc = sqrt(edges[k] * edges[k + 1]), fit = top * pow(xc / e.xmin, -e.alpha);
        bars++;
        on += fabs(log10(dens[k] / fit)) < 0.15;
    }
    CHECK(bars >= 3 && on == bars, "the fitted line on %d of %d well-filled tail bars", on, bars);
    const double *lb = g->legend, *vp = g->vp;
    CHECK(lb[1] > lb[0] && lb[2] >= vp[3] && lb[0] >= 0 && lb[1] <= 1 && lb[3] <= 1,
          "legend [%g-%g] x [%g-%g] above the data (top %g) and inside the page", lb[0], lb[1], lb[2], lb[3], vp[3]);
}

static void test_errors(const char *dir) {
    double edges[3] = {1, 2, 3}, dens[2] = {0, 0};
    char path[4096];
    snprintf(path, sizeof path, "%s/empty.png", dir);
    PlotOpts o = { .path = path };
    PlotEsd e = { .edges = edges, .dens = dens, .nb = 0, .alpha = NAN };
    CHECK_ERR(plot_esd(&o, &e), "no eigenvalues");
    e.nb = 2;
    CHECK_ERR(plot_esd(&o, &e), "histogram is empty");
}

int main(void) {
    const char *dir = test_tmpdir();
    test_figure(dir);
    test_errors(dir);
    return check_done();
}
