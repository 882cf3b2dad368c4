/* cmd_plot_esd.c -- `plot esd` (cmd_plot_esd.h): the empirical spectral density of one head's
 * matrix from the FaRR cache's singular values (spectral_table.h), its power-law fit and MP edge
 * (core/analysis/spectral_stats.h), drawn by plots/plot_esd.c. */
#define _GNU_SOURCE
#include "cmd_plot_esd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "params.h"
#include "plot.h"
#include "plot_dest.h"
#include "spectral_stats.h"
#include "spectral_table.h"

static const char *const KIND_CHOICES[] = {"q", "k", "v", "o", "qk", "vo", NULL};

const char CMD_PLOT_ESD_HELP[] =
    "The empirical spectral density (ESD) of one head's matrix: the eigenvalues sigma^2 / N of\n"
    "WᵀW / N (N the larger side; nonzero ones) as a histogram in `bins` log-spaced bins on log-log\n"
    "axes, the power law WeightWatcher fits to its tail (alpha by maximum likelihood from xmin\n"
    "on, xmin by the smallest Kolmogorov-Smirnov distance; none under 10 eigenvalues) as a line of\n"
    "slope -alpha, and the Marchenko-Pastur bulk edge lambda_+ of the matrix's shape. A fit on a\n"
    "tail of fewer than 10 eigenvalues means nothing (the MLE gives any alpha there): it is said,\n"
    "not drawn; an alpha outside WeightWatcher's 2-6 is said so. KIND as in `spectrum`: q, k, v, o\n"
    "or the fused qk, vo; the values come from the FaRR cache (`ranks` computes them once per\n"
    "layer). The numbers are those of `spectrum KIND ... stats`.\n"
    "Examples:\n"
    "  plot esd vo layer 1 head 0\n"
    "  plot esd o layer 3 head 2 bins 30 to figs/esd_o.png";

const Param cmd_plot_esd_pos[] = {
    { .name = "kind", .type = ARG_ENUM, .choices = KIND_CHOICES, .comp = COMP_CHOICES,
      .help = "the head's matrix: q, k, v, o, or the fused qk / vo" },
    {0}
};

const Param cmd_plot_esd_kw[] = {
    { .name = "layer", .type = ARG_INT, .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "head", .type = ARG_INT, .comp = COMP_HEADS, .metavar = "H", .help = "query head number" },
    PARAM_OFFSET,
    { .name = "bins", .type = ARG_INT, .min = 2, .max = 1000, .def = "20", .comp = COMP_NONE, .metavar = "N",
      .help = "log-spaced histogram bins" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

/* WeightWatcher's practice (weightwatcher.py): no analysis under 10 eigenvalues, a warning for
 * alpha outside 2-6 (OVER_TRAINED_THRESH / UNDER_TRAINED_THRESH). attnlab applies the 10 to the
 * fitted tail too: the MLE on a handful of values gives any alpha (12.4 on 6, 233 on 4). */
#define ESD_MIN_TAIL 10
#define ESD_ALPHA_LO 2.0
#define ESD_ALPHA_HI 6.0

static bool fit_meaningful(const SStats *st) { return isfinite(st->fit.alpha) && st->fit.n_tail >= ESD_MIN_TAIL; }

/* The fit in words: alpha with its tail, or why there is none that means anything. */
static void fit_text(char *dst, size_t cap, const SStats *st) {
    const SStatsFit *f = &st->fit;
    if (!isfinite(f->alpha))
        snprintf(dst, cap, "no power-law fit (%zu eigenvalue%s; it needs %d)", f->n, al_s(f->n), SSTATS_MIN_EVALS);
    else if (!fit_meaningful(st))
        snprintf(dst, cap, "no meaningful power-law fit (alpha %.3g on a tail of %zu eigenvalue%s, under %d)",
                 f->alpha, f->n_tail, al_s(f->n_tail), ESD_MIN_TAIL);
    else
        snprintf(dst, cap, "alpha %.3g (tail of %zu from xmin %.3g, KS %.3g)%s", f->alpha, f->n_tail, f->xmin, f->ks,
                 f->alpha < ESD_ALPHA_LO || f->alpha > ESD_ALPHA_HI ? " outside WeightWatcher's 2-6" : "");
}

/* The histogram and fit of sp into e (edges and dens: one allocation the caller frees, *buf);
 * a fit that means nothing is not drawn. */
static int esd_data(const Spectrum *sp, size_t nb, SStats *st, PlotEsd *e, double **buf) {
    double *ev;
    size_t ne;
    if (sstats_compute(sp->sigma, sp->p, sp->m, sp->n, st)) return AL_ERR;
    if (sstats_esd(sp->sigma, sp->p, sp->m, sp->n, &ev, &ne)) return AL_ERR;
    *buf = al_malloc3(2 * nb + 1, 1, sizeof **buf, "histogram");
    if (!*buf) { free(ev); return AL_ERR; }
    sstats_log_hist(ev, ne, nb, *buf, *buf + nb + 1);
    free(ev);
    *e = (PlotEsd){ .edges = *buf, .dens = *buf + nb + 1, .nb = ne ? nb : 0,
                    .alpha = fit_meaningful(st) ? st->fit.alpha : NAN,
                    .xmin = st->fit.xmin, .tail_frac = ne ? (double)st->fit.n_tail / (double)ne : 0,
                    .mp_edge = st->mp_edge };
    return AL_OK;
}

int cmd_plot_esd(Session *s, const Args *a, Out *out) {
    static const char *const labels[] = {"W_Q", "W_K", "W_V", "W_O", "fused W_Q W_Kᵀ", "fused W_V W_O"};
    if (!args_given(a, "layer") || !args_given(a, "head"))
        return al_err("plot esd needs a layer and a head, e.g. `plot esd vo layer 1 head 0`");
    int mk = args_enum(a, "kind"), layer = (int)args_int(a, "layer"), head = (int)args_int(a, "head");
    const Spectrum *sp;
    Spectrum *own;
    if (health_head_spectrum(s, mk, layer, head, param_offset(a), &sp, &own)) return AL_ERR;
    SStats st;
    PlotEsd e;
    double *buf = NULL;
    int rc = esd_data(sp, (size_t)args_int(a, "bins"), &st, &e, &buf);
    spectrum_free(own);
    if (rc) return rc;
    char title[256], sub[384], auto_name[256];
    snprintf(title, sizeof title, "%s layer %d head %d: spectral density of %s", s->cur->name, layer, head, labels[mk]);
    char fit[192];
    fit_text(fit, sizeof fit, &st);
    snprintf(sub, sizeof sub, "%zu x %zu, %zu eigenvalue%s; stable rank %.3g, %s, %zu above the MP edge", st.m, st.n,
             st.fit.n, al_s(st.fit.n), st.stable_rank, fit, st.mp_spikes);
    snprintf(auto_name, sizeof auto_name, "%s-esd-%s-L%d-H%d", s->cur->name, KIND_CHOICES[mk], layer, head);
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { free(buf); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    if (out_narrates(out))
        out_printf(out, "%s: %s; MP edge %.4g (%zu above)\n", labels[mk], fit, st.mp_edge, st.mp_spikes);
    plot_dest_window_hint(out, &d);
    rc = plot_esd(&d.o, &e);
    free(buf);
    return plot_dest_done(out, &d, rc);
}
