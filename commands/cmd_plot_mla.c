/* cmd_plot_mla.c -- the TransMLA figures: `plot key-norms` (Figure 3a), `plot rope-energy` (key
 * energy kept against RoPE dims) and `plot rope-removal` (Figure 3b: log-perplexity against the
 * fraction of RoPE dims removed), data from core/methods/transmla.h and core/methods/tmla_study.h, drawn by plots/
 * (plot_key_norms, plot_curves). Statistics (activation- or weight-based) and the calibration
 * text come from ws_tmla.h (ws_tmla_fig_stats: `calib FILE` is the figure's own). Where a figure
 * goes follows `plot`: `to FILE`, `window`, else a file in plot.dir named after the figure; the
 * path is printed and is the result. */
#define _GNU_SOURCE
#include "cmd_plot_mla.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "ws_lm.h"
#include "plot.h"
#include "plot_dest.h"
#include "params.h"
#include "session.h"
#include "tmla_study.h"
#include "transmla.h"
#include "ws_mlastrat.h"
#include "ws_tmla.h"

/* The figure's FreqFold M: `freqfold M`, else core's one default (convert mla's), said. */
static int figure_fold(const Args *a, Out *out) {
    if (args_given(a, "freqfold")) return (int)args_int(a, "freqfold");
    out_printf(out, "freqfold %d: TransMLA's default, the same as convert mla's (give freqfold M for another)\n",
               TMLA_DEFAULT_FREQFOLD);
    return TMLA_DEFAULT_FREQFOLD;
}

/* The TransMLA figures show steps of a GQA -> MLA conversion: a model convert mla refuses (an MLA
 * model, one without RoPE, ...) is refused with its reason (core/model/analyses.c says why and what to
 * load). fig: "plot kv-balance". */
static int figure_model_check(const Model *m, const char *fig) {
    return analysis_check(m, AN_CONVERT_MLA) ? al_err_ctx("%s", fig) : AL_OK;
}

/* ================================================================ plot key-norms */

const char CMD_PLOT_KEY_NORMS_HELP[] =
    "TransMLA Figure 3a for one layer: the norm of every dimension of the merged key head (all\n"
    "KV heads side by side), real halves of the RoPE pairs on top and imaginary halves below,\n"
    "for the original weights, after RoRoPE (one PCA rotation per frequency across the KV\n"
    "heads, the same for real and imaginary dims) and, with freqfold M > 1, after RoRoPE +\n"
    "FreqFold M (the default M is convert mla's, 1, which is RoRoPE itself; the paper's figure\n"
    "uses 4: `freqfold 4`). Norms are the\n"
    "RMS key over the calibration activations when there are any (`calib FILE`, `ids FILE`, the\n"
    "session's `calibrate`, or a text an earlier TransMLA command read: the paper's figure), and\n"
    "the rotations their PCAs; else (or with `stats weights`) weight-based: the RMS key under\n"
    "unit-variance inputs (row norm of the key projection). A figure's `calib FILE` statistics are\n"
    "its own: the session's calibration (`calib info`) stays as it was.\n"
    "After RoRoPE the large norms gather in the first head's worth of dims (what keeps RoPE).\n"
    "Examples:\n"
    "  plot key-norms layer 0\n"
    "  plot key-norms layer 3 freqfold 2 to figs/keynorms.png\n"
    "  plot key-norms layer 0 calib wiki.txt samples 32";

const Param cmd_plot_key_norms_kw[] = {
    { .name = "layer", .type = ARG_INT, .def = "0", .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "freqfold", .type = ARG_INT, .min = 1, .max = 4096, .comp = COMP_NONE, .metavar = "M",
      .help = "adjacent RoPE frequencies per PCA (default: convert mla's, 1; the paper's figure 3a uses 4)" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    PARAM_TMLA_STATS,
    {0}
};

/* The statistics of a figure for one layer (NULL, NULL: weights). */
static void layer_stats(const TmlaStatsUse *u, int layer, const double **S, const double **mu) {
    bool ok = u->act && layer >= 0 && layer < u->n_layers;
    *S = ok ? u->sigma[layer] : NULL;
    *mu = ok && u->mu ? u->mu[layer] : NULL;
}

int cmd_plot_key_norms(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    if (figure_model_check(m, "plot key-norms")) return AL_ERR;
    int layer = (int)args_int(a, "layer"), M = figure_fold(a, out);
    TmlaKeyNorms *k = NULL;
    TmlaStatsUse u;
    const double *S, *mu;
    int src = ws_tmla_fig_stats(s, m, a, false, &u, out);
    if (src) return src;
    layer_stats(&u, layer, &S, &mu);
    int rc = tmla_key_norms_stats(m, layer, M, S, mu, &k);
    if (rc) { ws_tmla_stats_release(&u); return rc; }
    char l3[64], title[256], sub[1024], auto_name[256];
    snprintf(l3, sizeof l3, "RoRoPE + %dD FreqFold", M);
    PlotKeyNorms v[3] = {{"original", k->orig_re, k->orig_im}, {"RoRoPE", k->rot_re, k->rot_im},
                         {l3, k->fold_re, k->fold_im}};
    snprintf(title, sizeof title, "%s layer %d: key norm per dimension", m->name, layer);
    snprintf(sub, sizeof sub, "%d KV head%s x %zu pair%s, %s; RoPE layout %s", m->cfg.n_kv_heads, al_s(m->cfg.n_kv_heads),
             k->pairs_per_head, al_s(k->pairs_per_head),
             u.source, rope_layout_name(m->cfg.rope));
    ws_tmla_stats_release(&u);
    snprintf(auto_name, sizeof auto_name, "%s-key-norms-L%d-M%d", m->name, layer, M);
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { tmla_key_norms_free(k); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    d.o.xlabel = "key dimension pair of the merged head (heads side by side)";
    d.o.ylabel = S ? "RMS key over the activations (real above, imaginary below)"
                   : "RMS key (real above, imaginary below)";
    plot_dest_window_hint(out, &d);
    rc = plot_key_norms(&d.o, v, M > 1 ? 3 : 2, k->n_pairs, k->pairs_per_head);   /* M = 1: RoRoPE itself */
    tmla_key_norms_free(k);
    return plot_dest_done(out, &d, rc);
}

/* ================================================================ plot rope-energy */

const char CMD_PLOT_ROPE_ENERGY_HELP[] =
    "TransMLA Figure 3b, weight-based, for one layer: the fraction of the merged key's energy\n"
    "that the RoPE dims keep, against how many RoPE dims are kept. One curve per FreqFold M\n"
    "(k components of every group of M frequencies: k d / M dims), and a baseline without\n"
    "rotation that keeps, per frequency, the pairs of the k strongest KV heads (k d dims).\n"
    "The energy kept with M = 1 and one component per frequency (d dims) is what `convert mla`\n"
    "reports as rope energy; larger M keeps more at equal dims (Prop. 2) but moves frequencies.\n"
    "Energies and PCAs use the calibration activations when there are any (see `plot\n"
    "key-norms`), else the weights. `plot rope-removal` shows what removing RoPE costs in\n"
    "perplexity.\n"
    "Examples:\n"
    "  plot rope-energy layer 0\n"
    "  plot rope-energy layer 5 freqfolds 1,2,4,8 to rope.svg";

const Param cmd_plot_rope_energy_kw[] = {
    { .name = "layer", .type = ARG_INT, .def = "0", .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "freqfolds", .type = ARG_STRING, .def = "1,2,4,8", .comp = COMP_NONE, .metavar = "M,M,...",
      .help = "FreqFold values, one curve each (those not dividing head dim / 2 are skipped)" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    PARAM_TMLA_STATS,
    {0}
};

int cmd_plot_rope_energy(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    if (figure_model_check(m, "plot rope-energy")) return AL_ERR;
    int layer = (int)args_int(a, "layer");
    int d2 = (m->cfg.qk_rope_dim ? m->cfg.qk_rope_dim : m->cfg.qk_nope_dim) / 2;   /* rotary frequencies */
    int Ms[16];
    size_t nM = 0;
    const char *list = args_str(a, "freqfolds");
    for (const char *p = list; p && *p && nM < 16;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1)
            return al_err("plot rope-energy: freqfolds '%s' must be positive numbers separated by commas (1,2,4)", list);
        if (d2 > 0 && d2 % v == 0) Ms[nM++] = (int)v;
        else out_printf(out, "freqfold %ld skipped: it does not divide the %d frequenc%s of a head\n", v, d2,
                        d2 == 1 ? "y" : "ies");
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return al_err("plot rope-energy: freqfolds '%s': separate the values with commas", list);
    }
    if (nM == 0) return al_err("plot rope-energy: none of the freqfolds '%s' divides %d (head dim / 2)", list, d2);
    TmlaRopeEnergy *e = NULL;
    TmlaStatsUse u;
    const double *S, *mu;
    int src = ws_tmla_fig_stats(s, m, a, false, &u, out);
    if (src) return src;
    layer_stats(&u, layer, &S, &mu);
    int rc = tmla_rope_energy_stats(m, layer, Ms, nM, S, mu, &e);
    if (rc) { ws_tmla_stats_release(&u); return rc; }
    PlotCurve *cv = al_calloc(e->n_curves, sizeof *cv, "curves");
    char (*labels)[64] = al_calloc(e->n_curves, 64, "labels");
    if (!cv || !labels) { free(cv); free(labels); tmla_rope_energy_free(e); ws_tmla_stats_release(&u); return AL_ERR; }
    for (size_t i = 0; i < e->n_curves; i++) {
        const TmlaRopeCurve *c = &e->curves[i];
        if (c->M == 0) snprintf(labels[i], 64, "no rotation (strongest KV heads)");
        else if (c->M == 1) snprintf(labels[i], 64, "RoRoPE");
        else snprintf(labels[i], 64, "RoRoPE + %dD FreqFold", c->M);
        cv[i] = (PlotCurve){.label = labels[i], .x = c->dims, .y = c->energy, .n = c->n, .points = true};
    }
    char title[256], sub[1024], auto_name[256];
    snprintf(title, sizeof title, "%s layer %d: key energy kept in the RoPE dims", m->name, layer);
    snprintf(sub, sizeof sub, "merged key of %d KV head%s x %d dim%s, %s", m->cfg.n_kv_heads, al_s(m->cfg.n_kv_heads),
             2 * d2, al_s(2 * d2),
             u.source);
    ws_tmla_stats_release(&u);
    snprintf(auto_name, sizeof auto_name, "%s-rope-energy-L%d", m->name, layer);
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) rc = AL_ERR;
    if (rc == AL_OK) {
        d.o.title = title;
        d.o.subtitle = sub;
        d.o.xlabel = "RoPE dims kept";
        d.o.ylabel = "fraction of key energy kept";
        plot_dest_window_hint(out, &d);
        rc = plot_curves(&d.o, cv, e->n_curves);
        rc = plot_dest_done(out, &d, rc);
    }
    free(cv);
    free(labels);
    tmla_rope_energy_free(e);
    return rc;
}

/* ================================================================ plot rope-removal */

const char CMD_PLOT_ROPE_REMOVAL_HELP[] =
    "TransMLA Figure 3b: log-perplexity (mean NLL per token, nats) of a held-out text as RoPE\n"
    "is removed from a growing fraction of the merged key's dims in the chosen layers, without KV\n"
    "compression (the dims that lose RoPE stay as NoPE keys). Curves: RoRoPE (one PCA rotation per\n"
    "frequency across the KV heads; the rotated pairs of largest key energy keep RoPE), RoRoPE +\n"
    "FreqFold M (one PCA per group of M adjacent frequencies, each group turning at its first\n"
    "frequency: exact only for M = 1), and MHA2MLA's per-head selection (no rotation; each KV head\n"
    "keeps the frequencies with the largest product of query and key norms). A fraction is rounded\n"
    "to whole pairs (MHA2MLA: whole frequencies per head); 0 removed is the original model for\n"
    "RoRoPE and MHA2MLA. The variants run in memory: the model's forward pass with the converted\n"
    "layers swapped in (core/methods/tmla_study.h); a standard RoPE cannot carry these frequency patterns, so\n"
    "they are not exported. PCAs and norms use the calibration activations when there are any,\n"
    "else the weights. Needs a text: `calib FILE`, `ids FILE` (the figure's own statistics: the\n"
    "session's calibration stays as it was), or the session's calibration;\n"
    "perplexity is on its validation split (held out) unless `split train` (in-sample) or `eval\n"
    "FILE` (another text). FreqFold M > 1 starts above the original even with nothing removed\n"
    "(M frequencies turn at one; on small heads they are far apart): the subtitle says so.\n"
    "`data FILE` writes the points (.csv or .json).\n"
    "Examples:\n"
    "  plot rope-removal calib story.txt seqlen 128\n"
    "  plot rope-removal removed 0,0.5,0.75,0.875,0.9375 freqfolds 1,4 data fig3b.csv to fig3b.png";

const Param cmd_plot_rope_removal_kw[] = {
    { .name = "removed", .type = ARG_STRING, .def = "0,0.25,0.5,0.625,0.75,0.875,0.9375", .comp = COMP_NONE,
      .metavar = "F,F,...", .help = "fractions of the RoPE dims to remove, in [0, 1)" },
    { .name = "freqfolds", .type = ARG_STRING, .def = "1,2,4", .comp = COMP_NONE, .metavar = "M,M,...",
      .help = "RoRoPE curves: 1 plain, M > 1 with FreqFold M (those not dividing head dim / 2 are skipped)" },
    { .name = "mha2mla", .type = ARG_ENUM, .choices = (const char *const[]){"on", "off", NULL}, .def = "on",
      .comp = COMP_CHOICES, .help = "also MHA2MLA's per-head query-key norm selection" },
    PARAM_LAYERS("layers that lose RoPE dims"),
    { .name = "data", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "also write the points to FILE.csv or FILE.json" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    PARAM_TMLA_STATS,
    {0}
};

/* Parses "a,b,c" numbers into v[cap]. */
static int parse_list(const char *what, const char *list, double *v, size_t cap, size_t *n) {
    *n = 0;
    for (const char *p = list; p && *p;) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || (*end && *end != ','))
            return al_err("plot rope-removal: %s '%s': give numbers separated by commas", what, list);
        if (*n == cap) return al_err("plot rope-removal: %s: at most %zu values", what, cap);
        v[(*n)++] = x;
        p = *end == ',' ? end + 1 : end;
    }
    if (*n == 0) return al_err("plot rope-removal: %s is empty", what);
    return AL_OK;
}

/* The points as a table: method, freqfold, removed, rope_dims, key_energy, nll, ppl. */
static Table *removal_table(const TstudyRemoval *r) {
    Table *t = table_new(7, "method", "freqfold", "removed", "rope_dims", "key_energy", "nll", "ppl");
    for (size_t i = 0; t && i < r->n_curves; i++) {
        const TstudyRemovalCurve *c = &r->curves[i];
        for (size_t k = 0; k < c->n; k++) {
            if (table_row(t)) { table_free(t); return NULL; }
            table_str(t, c->M ? "RoRoPE" : "MHA2MLA");
            table_int(t, c->M ? c->M : 1);
            table_num(t, c->removed[k]);
            table_int(t, c->rope_dims[k]);
            table_num(t, c->energy[k]);
            table_num(t, c->nll[k]);
            table_num(t, exp(c->nll[k]));
        }
    }
    return t;
}

/* The largest FreqFold M > 1 whose curve starts (the fewest dims removed) above the original, 0 if
 * none: it replaces M frequencies by one, which is inexact even before any dim loses RoPE. */
static int freqfold_above(const TstudyRemoval *r) {
    int M = 0;
    for (size_t i = 0; i < r->n_curves; i++) {
        const TstudyRemovalCurve *c = &r->curves[i];
        bool above = c->n > 0 && c->removed[0] == 0 && c->nll[0] > r->base_nll + 1e-6 * fabs(r->base_nll);
        if (c->M > 1 && above && c->M > M) M = c->M;
    }
    return M;
}

/* `freqfolds` as the M that divide the d2 frequencies of a head into Ms (at most 16; the others
 * skipped with a line). */
static int removal_freqfolds(const Args *a, int d2, int *Ms, size_t *nM, Out *out) {
    double mf[16];
    size_t nm;
    *nM = 0;
    if (parse_list("freqfolds", args_str(a, "freqfolds"), mf, 16, &nm)) return AL_ERR;
    for (size_t i = 0; i < nm; i++) {
        int M = (int)mf[i];
        if (M < 1 || M != mf[i]) return al_err("plot rope-removal: freqfold %g is not a positive whole number", mf[i]);
        if (d2 > 0 && d2 % M == 0) Ms[(*nM)++] = M;
        else out_printf(out, "freqfold %d skipped: it does not divide the %d frequenc%s of a head\n", M, d2,
                        d2 == 1 ? "y" : "ies");
    }
    return AL_OK;
}

/* One curve per method of r into cv / labels (r->n_curves + 1 of each; the last, "original", is
 * the flat line at the base log-perplexity over bx, by), each printed as removed:nll pairs. */
static void removal_curves(const TstudyRemoval *r, PlotCurve *cv, char (*labels)[64], double *bx, double *by,
                           Out *out) {
    size_t nc = r->n_curves + 1;
    for (size_t i = 0; i < r->n_curves; i++) {
        const TstudyRemovalCurve *c = &r->curves[i];
        if (c->M == 0) snprintf(labels[i], 64, "MHA2MLA (per-head q.k norm)");
        else if (c->M == 1) snprintf(labels[i], 64, "RoRoPE");
        else snprintf(labels[i], 64, "RoRoPE + %dD FreqFold", c->M);
        cv[i] = (PlotCurve){.label = labels[i], .x = c->removed, .y = c->nll, .n = c->n, .points = true};
        for (size_t k = 0; k < c->n; k++) bx[1] = fmax(bx[1], c->removed[k]);
        out_printf(out, "%-28s", labels[i]);
        for (size_t k = 0; k < c->n; k++) out_printf(out, " %.3f:%.4f", c->removed[k], c->nll[k]);
        out_printf(out, "\n");
    }
    snprintf(labels[nc - 1], 64, "original");
    cv[nc - 1] = (PlotCurve){.label = labels[nc - 1], .x = bx, .y = by, .n = 2, .points = false};
}

/* The figure's subtitle into sub (layers, tokens, text, PCA source), with the FreqFold note (also
 * printed) when a FreqFold curve starts above the original. */
static void removal_subtitle(const Model *m, const TstudyRemoval *r, const TmlaStatsUse *u, long lo, long hi, int d2,
                             char *sub, size_t cap, Out *out) {
    const char *base = u->text ? strrchr(u->text, '/') : NULL;
    int fM = freqfold_above(r);
    int n = snprintf(sub, cap, "layers %ld-%ld, %zu %s token%s of %s%s; PCA: %s", lo, hi, r->tokens,
                     u->in_sample ? "in-sample" : "held-out", al_s(r->tokens),
                     base ? base + 1 : u->text ? u->text : "?",
                     fM ? "" : ", no KV compression", u->act ? "activations" : "weights");
    if (fM > 0 && n > 0 && (size_t)n < cap) {     /* adjacent frequencies differ by theta^(2/d) */
        double step = pow(cfg_layer_theta(&m->cfg, (int)lo), 1.0 / d2);
        snprintf(sub + n, cap - (size_t)n, ". FreqFold %d starts above the original: %d neighbouring "
                 "frequencies (x%.3g apart at d = %d) turn as one", fM, fM, step, 2 * d2);
        out_printf(out, "FreqFold %d starts above the original even with nothing removed: each group of %d adjacent "
                   "RoPE frequencies turns at its first one, and in a head of %d dim%s neighbours differ by x%.3g "
                   "(x%.3g at 128 dims)\n", fM, fM, 2 * d2, al_s(2 * d2), step,
                   pow(cfg_layer_theta
(&m->cfg, (int)lo), 1.0 / 64));
    }
}

/* `data FILE`: r's points written as a table (nothing without it). */
static int removal_data(Session *s, const Args *a, const TstudyRemoval *r, Out *out) {
    const char *data = args_str(a, "data");
    if (!data || !*data) return AL_OK;
    Table *tb = removal_table(r);
    int rc = tb ? table_write_file(out, tb, data, s->prec) : AL_ERR;
    if (rc == AL_OK) out_printf(out, "wrote %zu point%s to %s\n", tb->nrows, al_s(tb->nrows), data);
    table_free(tb);
    return rc;
}

/* The curves drawn to the plot destination (auto_name when `to` is not given). */
static int removal_draw(Session *s, const Args *a, Out *out, const char *auto_name, const char *title,
                        const char *sub, const PlotCurve *cv, size_t nc) {
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) return AL_ERR;
    d.o.title = title;
    d.o.subtitle = sub;
    d.o.xlabel = "fraction of the merged key's RoPE dims removed";
    d.o.ylabel = "log-perplexity (nats per token)";
    plot_dest_window_hint(out, &d);
    int rc = plot_curves(&d.o, cv, nc);
    return plot_dest_done(out, &d, rc);
}

/* The removal study of m's layers lo..hi (the statistics u, the forward pass), printed first. */
static int removal_run(Session *s, Model *m, const TstudyRemovalOpts *o, const TmlaStatsUse *u, long lo, long hi,
                       TstudyRemoval **r, Out *out) {
    Forward *f = NULL;
    *r = NULL;
    int rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = tstudy_rope_removal(f, o, r);
    if (rc) return rc;
    out_printf(out, "%s: log-perplexity on %zu token%s, %s, windows of %zu: original %.5f (ppl %.6g); layers %ld-%ld; "
               "PCA / norms: %s\n", m->name, (*r)->tokens, al_s((*r)->tokens), u->ppl_on, u->seqlen, (*r)->base_nll, exp((*r)->base_nll),
               lo, hi, u->source);
    return AL_OK;
}

int cmd_plot_rope_removal(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    if (figure_model_check(m, "plot rope-removal")) return AL_ERR;
    double fr[64];
    size_t nf, nM;
    int d2 = cfg_d_qk(&m->cfg) / 2, Ms[16];
    long lo, hi;
    if (parse_list("removed", args_str(a, "removed"), fr, 64, &nf)) return AL_ERR;
    if (removal_freqfolds(a, d2, Ms, &nM, out)) return AL_ERR;
    if (args_range(a, "layers", m->cfg.n_layers, &lo, &hi)) return AL_ERR;
    TmlaStatsUse u;
    int src = ws_tmla_fig_stats(s, m, a, true, &u, out);
    if (src) return src;
    TstudyRemovalOpts o = {.removed = fr, .n_removed = nf, .Ms = Ms, .nM = nM, .mha2mla = args_enum(a, "mha2mla") != 1,
                        .layer_lo = (int)lo, .layer_hi = (int)hi, .sigma = u.act ? (const double *const *)u.sigma : NULL,
                        .mu = u.act ? (const double *const *)u.mu : NULL, .ids = u.ids, .n_ids = u.ppl_tokens,
                        .seqlen = u.seqlen};
    TstudyRemoval *r = NULL;
    int rc = removal_run(s, m, &o, &u, lo, hi, &r, out);
    if (rc) { ws_tmla_stats_release(&u); return rc; }
    size_t nc = r->n_curves + 1;
    PlotCurve *cv = al_calloc(nc, sizeof *cv, "curves");
    char (*labels)[64] = al_calloc(nc, 64, "labels");
    double bx[2] = {0, 0}, by[2] = {r->base_nll, r->base_nll};
    if (!cv || !labels) rc = AL_ERR;
    else removal_curves(r, cv, labels, bx, by, out);
    if (rc == AL_OK) rc = removal_data(s, a, r, out);
    char title[256], sub[1024], auto_name[256];
    snprintf(title, sizeof title, "%s: log-perplexity as RoPE dims are removed", m->name);
    removal_subtitle(m, r, &u, lo, hi, d2, sub, sizeof sub, out);
    snprintf(auto_name, sizeof auto_name, "%s-rope-removal", m->name);
    ws_tmla_stats_release(&u);
    if (rc == AL_OK) rc = removal_draw(s, a, out, auto_name, title, sub, cv, nc);
    free(cv);
    free(labels);
    tstudy_removal_free(r);
    return rc;
}

/* ================================================================ plot kv-balance */

const char CMD_PLOT_KV_BALANCE_HELP[] =
    "TransMLA Figure 4a for one layer: the RMS of every feature of the joint PCA's input -- the\n"
    "NoPE key dims (after RoRoPE + FreqFold M and removing RoPE from all but the first d / M\n"
    "rotated dims, as `convert mla` does) and the value dims, head by head -- before and after KV\n"
    "balancing, which divides the keys by alpha = RMS NoPE key / RMS value so that the keys do\n"
    "not dominate the shared PCA. Statistics as `plot key-norms` (activations when there are any,\n"
    "else the weights). y is logarithmic. Takes the keywords of `plot key-norms`.\n"
    "Examples:\n"
    "  plot kv-balance layer 0\n"
    "  plot kv-balance layer 2 freqfold 2 calib story.txt to figs/kv_balance.png";

/* RMS key over RMS value, every key dim counted (the RoPE ones too), from C_kv ((G d + G dv) square,
 * keys first): what KV balancing faces before RoRoPE takes the largest key dims out. */
static double kv_norm_ratio(const TmlaLayer *T, const double *C_kv) {
    size_t nk = (size_t)T->G * (size_t)T->d, n = nk + (size_t)T->G * (size_t)T->dv;
    double ek = 0, ev = 0;
    for (size_t i = 0; i < n; i++) *(i < nk ? &ek : &ev) += C_kv[i * n + i];
    return ev > 0 ? sqrt((ek / (double)nk) / (ev / (double)(n - nk))) : NAN;
}

/* The joint PCA input's second moment C_J of one layer after RoRoPE + FreqFold M and RoPE kept
 * on d / M dims, the balanced layer (T->alpha) and the RMS key / RMS value ratio over all key dims
 * (*kv_ratio). Caller frees T and C_J. */
static int kv_joint(Model *m, int layer, int M, const double *S, const double *mu, TmlaLayer **T, double **C_J,
                    double *kv_ratio) {
    AttnLayer *gqa = NULL;
    double *C_kv = NULL, *C_K = NULL;
    *T = NULL;
    *C_J = NULL;
    int rc = attn_layer_load(m, layer, &gqa);
    if (rc == AL_OK) rc = tmla_merge(gqa, T);
    if (rc == AL_OK) rc = tmla_kv_cov_stats(gqa, S, mu, &C_kv);
    if (rc == AL_OK && !(C_K = tmla_key_cov(*T, C_kv))) rc = AL_ERR;
    if (rc == AL_OK) *kv_ratio = kv_norm_ratio(*T, C_kv);
    if (rc == AL_OK) rc = tmla_rorope(*T, M, C_K);
    if (rc == AL_OK) rc = tmla_remove_rope(*T, (*T)->d / M, NULL);
    if (rc == AL_OK) rc = tmla_joint_cov(*T, C_kv, C_J);
    if (rc == AL_OK) rc = tmla_balance(*T, true, *C_J);
    attn_layer_free(gqa);
    free(C_kv);
    free(C_K);
    if (rc) { tmla_layer_free(*T); *T = NULL; free(*C_J); *C_J = NULL; }
    return rc;
}

int cmd_plot_kv_balance(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    if (figure_model_check(m, "plot kv-balance")) return AL_ERR;
    int layer = (int)args_int(a, "layer"), M = figure_fold(a, out);
    TmlaStatsUse u;
    const double *S, *mu;
    int rc = ws_tmla_fig_stats(s, m, a, false, &u, out);
    if (rc) return rc;
    layer_stats(&u, layer, &S, &mu);
    TmlaLayer *T;
    double *C_J, kv_ratio = NAN;
    if ((rc = kv_joint(m, layer, M, S, mu, &T, &C_J, &kv_ratio))) { ws_tmla_stats_release(&u); return rc; }
    size_t nJ = (size_t)T->n_J, nv = (size_t)T->G * (size_t)T->dv, nk = nJ - nv;
    int T_keys = T->G * T->d;
    double *v = al_malloc3(nJ, 3, sizeof(double), "kv norms"), alpha = T->alpha;
    if (!v) { tmla_layer_free(T); free(C_J); ws_tmla_stats_release(&u); return AL_ERR; }
    double *x = v, *before = v + nJ, *after = v + 2 * nJ;
    for (size_t i = 0; i < nJ; i++) {
        x[i] = (double)i;
        before[i] = sqrt(fmax(0, C_J[i * nJ + i]));
        after[i] = i < nk ? before[i] / alpha : before[i];
    }
    char title[256], sub[1024], auto_name[256], lk[96];
    snprintf(lk, sizeof lk, "NoPE keys / α, after balancing (α = %.3g)", alpha);
    PlotCurve c[3] = {{.label = "NoPE keys, before balancing", .x = x, .y = before, .n = nk, .fixed_color = true, .slot = 3},
                      {.label = lk, .x = x, .y = after, .n = nk, .fixed_color = true, .slot = 2},
                      {.label = "values (unchanged)", .x = x + nk, .y = before + nk, .n = nv, .fixed_color = true, .slot = 0}};
    snprintf(title, sizeof title, "%s layer %d: key and value norms before and after KV balancing", m->name, layer);
    snprintf(sub, sizeof sub, "dims 0-%zu: NoPE keys (RoRoPE + %dD FreqFold, RoPE kept on %d dim%s); dims %zu-%zu: values "
             "of %d KV head%s x %d; %s", nk - 1, M, T->d / M, al_s(T->d / M), nk, nJ - 1, T->G, al_s(T->G), T->dv, u.source);
    ws_tmla_stats_release(&u);
    tmla_layer_free(T);
    free(C_J);
    out_printf(out, "layer %d: alpha = %.6g (RMS NoPE key / RMS value, RoRoPE + FreqFold %d as in convert mla); keys "
               "divided by it before the joint PCA\n", layer, alpha, M);
    out_printf(out, "layer %d: RMS key / RMS value = %.6g over all %d key dim%s (the RoPE ones too)\n", layer, kv_ratio,
               T_keys, al_s(T_keys));
    snprintf(auto_name, sizeof auto_name, "%s-kv-balance-L%d-M%d", m->name, layer, M);
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { free(v); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    d.o.xlabel = "feature of the joint PCA input [K_nope ; V]";
    d.o.ylabel = "RMS per dim (log scale)";
    d.o.logy = true;
    plot_dest_window_hint(out, &d);
    rc = plot_curves(&d.o, c, 3);
    free(v);
    return plot_dest_done(out, &d, rc);
}

/* ================================================================ plot mla-table */

const char CMD_PLOT_MLA_TABLE_HELP[] =
    "The published one-shot GQA -> MLA strategies against the KV budget: held-out perplexity\n"
    "against KV values cached per token and layer (kv rank + RoPE dims, mean over the layers), one\n"
    "curve per strategy (transmla, mha2mla-high|low|uniform|2norm[-split], care, -alloc: `help\n"
    "convert mla`), one point per kv rank, and the original model's as a line: `convert\n"
    "mla-table ... strategies` as a figure (the same conversions, in memory). Needs activation\n"
    "statistics (`calib FILE`, `ids FILE`: the figure's own; or the session's calibration).\n"
    "`data FILE` writes the table (.csv or .json).\n"
    "Examples:\n"
    "  plot mla-table kv-ranks 8,16,32,48 calib story.txt seqlen 64\n"
    "  plot mla-table kv-ranks 128,256,512 strategies transmla,mha2mla-2norm,care data s.csv to s.png";

const Param cmd_plot_mla_table_kw[] = {
    { .name = "kv-ranks", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "R,R,...",
      .help = "kv ranks, one point each (numbers, or full), comma-separated (required)" },
    { .name = "strategies", .type = ARG_STRING, .def = "all", .comp = COMP_NONE, .metavar = "all|S,S,...",
      .help = "curves: transmla, mha2mla-SEL[-split], care, any with -alloc (all: eight)" },
    { .name = "rope-dim", .type = ARG_INT, .min = 2, .max = 1 << 20, .comp = COMP_NONE, .metavar = "D",
      .help = "RoPE dims kept = head dim / freqfold (default: head dim)" },
    { .name = "freqfold", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "M",
      .help = "adjacent RoPE frequencies per PCA (TransMLA, CARE)" },
    PARAM_LAYERS("layers to convert"),
    { .name = "data", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "also write the table to FILE.csv or FILE.json" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    PARAM_TMLA_STATS,
    {0}
};

/* Curve i of t (n_ranks points of strategy i, by kv values) into x / y (ppl). */
static void strat_curve(const MlastratTable *t, size_t ns, size_t i, double *x, double *y, char *label, PlotCurve *cv) {
    size_t nr = t->n / ns;
    for (size_t k = 0; k < nr; k++) {
        x[k] = t->rows[k * ns + i].kv_values;
        y[k] = exp(t->rows[k * ns + i].nll);
    }
    for (size_t k = 1; k < nr; k++)              /* by kv values (ranks may be given in any order) */
        for (size_t j = k; j > 0 && x[j - 1] > x[j]; j--) {
            double tx = x[j], ty = y[j];
            x[j] = x[j - 1]; y[j] = y[j - 1]; x[j - 1] = tx; y[j - 1] = ty;
        }
    mlastrat_label(&t->rows[i].strat, label, 64);
    *cv = (PlotCurve){.label = label, .x = x, .y = y, .n = nr, .points = true, .marker = (int)(i % 6)};
}

/* The table's curves and the original's line drawn to the destination. */
static int strat_draw(Session *s, const Args *a, Out *out, const Model *m, const MlastratTable *t, size_t ns) {
    size_t nr = t->n / ns, nc = ns + 1;
    PlotCurve *cv = al_calloc(nc, sizeof *cv, "curves");
    double *xy = al_calloc(2 * nc * (nr + 2), sizeof *xy, "points");
    char (*labels)[64] = al_calloc(nc, 64, "labels");
    if (!cv || !xy || !labels) { free(cv); free(xy); free(labels); return AL_ERR; }
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < ns; i++) {
        strat_curve(t, ns, i, xy + 2 * i * nr, xy + (2 * i + 1) * nr, labels[i], &cv[i]);
        for (size_t k = 0; k < nr; k++) { lo = fmin(lo, cv[i].x[k]); hi = fmax(hi, cv[i].x[k]); }
    }
    double *bx = xy + 2 * ns * nr, *by = bx + 2;
    bx[0] = lo; bx[1] = hi; by[0] = by[1] = exp(t->base_nll);
    snprintf(labels[ns], 64, "original");
    cv[ns] = (PlotCurve){.label = labels[ns], .x = bx, .y = by, .n = 2, .dash = 2};
    char title[256], sub[256], auto_name[256];
    snprintf(title, sizeof title, "%s: one-shot MLA strategies against the KV budget", m->name);
    snprintf(sub, sizeof sub, "held-out perplexity, %zu token%s; x: kv rank + RoPE dims per token and layer", t->tokens,
             al_s(t->tokens));
    snprintf(auto_name, sizeof auto_name, "%s-mla-strategies", m->name);
    PlotLabels l = {.title = title, .subtitle = sub, .xlabel = "KV values per token and layer",
                    .ylabel = "perplexity (held out)", .logy = true};
    int rc = plot_dest_curves(s, a, out, auto_name, &l, cv, nc);
    free(cv); free(xy); free(labels);
    return rc;
}

int cmd_plot_mla_table(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    int ranks[32];
    size_t nr, ns;
    MlastratOpts st[32];
    if (ws_mlastrat_ranks("plot mla-table", args_str(a, "kv-ranks"), ranks, 32, &nr)) return AL_ERR;
    if (ws_mlastrat_parse_list(args_str(a, "strategies"), st, 32, &ns)) return AL_ERR;
    MlastratTable *t = NULL;
    int rc = ws_mlastrat_table(s, m, a, ranks, nr, true, out, &t);
    if (rc) return rc;
    Table *tb = ws_mlastrat_rows(m, t);
    const char *data = args_str(a, "data");
    if (!tb) rc = AL_ERR;
    else if (data && *data && (rc = table_write_file(out, tb, data, s->prec)) == AL_OK)
        out_printf(out, "wrote %zu row%s to %s\n", tb->nrows, al_s(tb->nrows), data);

    table_free(tb);
    if (rc == AL_OK) rc = strat_draw(s, a, out, m, t, ns);
    mlastrat_table_free(t);
    return rc;
}
