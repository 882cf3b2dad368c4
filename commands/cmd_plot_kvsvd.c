/* cmd_plot_kvsvd.c -- the KQ-SVD figures as `plot` sub-commands (cmd_plot_kvsvd.h): the
 * per-layer errors of the last `kvsvd eval` (Figure 1) and the output error against key/query
 * unbalance beta (Figure 2), from the workspace's calibration (ws_calib.h). */
#define _GNU_SOURCE
#include "cmd_plot_kvsvd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "plot.h"
#include "plot_dest.h"
#include "ws_calib.h"
#include "ws_lm.h"

static const char *const WHAT_CHOICES[] = {"out", "k", "q", "v", "kq", NULL};

const char CMD_PLOT_KVSVD_ERRORS_HELP[] =
    "KQ-SVD Figure 1 (top): the relative Frobenius error ||Y - Y'|| / ||Y|| of the attention\n"
    "output per layer (unsquared, as every attnlab error; the paper plots its square), one curve\n"
    "per method, from the last `kvsvd eval` (run it first); the subtitle names the windows it ran\n"
    "on. `what k|q|v|kq` plots the error on keys, queries, values or the score matrix K Qᵀ\n"
    "instead; `log` logs y.\n"
    "Examples:\n"
    "  kvsvd learn all eps 0.1; kvsvd eval; plot kvsvd-errors to fig1.png\n"
    "  plot kvsvd-errors what kq log";

const Param cmd_plot_kvsvd_errors_kw[] = {
    { .name = "what", .type = ARG_ENUM, .choices = WHAT_CHOICES, .def = "out", .comp = COMP_CHOICES,
      .help = "which error: attention output (out), keys, queries, values, or scores (kq)" },
    { .name = "log", .type = ARG_FLAG, .comp = COMP_NONE, .help = "errors on a log axis" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

static double err_pick(const KqErr *e, int what) {
    switch (what) {
    case 1: return e->k;
    case 2: return e->q;
    case 3: return e->v;
    case 4: return e->kq;
    default: return e->out;
    }
}

int cmd_plot_kvsvd_errors(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib_need(s, &c)) return AL_ERR;
    int what = args_enum(a, "what");
    int L = c->st->sh.n_layers;
    PlotCurve cv[KQ_NMETHODS];
    double *x = al_malloc3((size_t)L, 1, sizeof *x, "layers"), *y = al_malloc3((size_t)L, KQ_NMETHODS, sizeof *y, "errors");
    if (!x || !y) { free(x); free(y); return AL_ERR; }
    size_t nc = 0;
    for (int l = 0; l < L; l++) x[l] = l;
    for (int k = 0; k < KQ_NMETHODS; k++) {
        if (!c->errs[k]) continue;
        for (int l = 0; l < L; l++) y[nc * (size_t)L + (size_t)l] = err_pick(&c->errs[k][l], what);
        cv[nc] = (PlotCurve){.label = kq_method_label((kq_method)k), .x = x, .y = y + nc * (size_t)L, .n = (size_t)L,
                             .points = true};
        nc++;
    }
    if (!nc) { free(x); free(y); return al_err("plot kvsvd-errors: no evaluation yet: run `kvsvd learn all` and `kvsvd eval` first"); }
    static const char *names[] = {"attention output", "keys K", "queries Q", "values V", "scores K Qᵀ"};
    char title[256], sub[512], ylab[128], auto_name[256];
    snprintf(title, sizeof title, "%s: relative error on the %s per layer", s->cur->name, names[what]);
    const KqProj *p = NULL;
    for (int k = 0; k < KQ_NMETHODS && !p; k++) p = c->proj[k];
    if (p && p->spec.by_eps)
        snprintf(sub, sizeof sub, "ranks from eps %g; on %s", p->spec.eps, c->eval_on);
    else
        snprintf(sub, sizeof sub, "rank %d; on %s", p ? p->spec.rank : 0, c->eval_on);
    snprintf(ylab, sizeof ylab, "%s_err = ||Y - Y'|| / ||Y||", WHAT_CHOICES[what]);
    snprintf(auto_name, sizeof auto_name, "%s-kvsvd-errors-%s", s->cur->name, WHAT_CHOICES[what]);
    PlotLabels lab = {.title = title, .subtitle = sub, .xlabel = "layer", .ylabel = ylab, .logy = args_flag(a, "log")};
    int rc = plot_dest_curves(s, a, out, auto_name, &lab, cv, nc);
    free(x);
    free(y);
    return rc;
}

const char CMD_PLOT_KVSVD_UNBALANCE_HELP[] =
    "KQ-SVD Figure 2: the attention output error out_err (relative Frobenius, unsquared) averaged\n"
    "over layers against the unbalance beta\n"
    "(keys multiplied by beta, queries divided by it: the scores do not change). For each beta the\n"
    "three methods are learned at the rank setting of the last `kvsvd learn` (default eps 0.1)\n"
    "and evaluated as `kvsvd eval` does (one forward pass for all). K-SVD and KQ-SVD stay flat;\n"
    "Eigen drifts to K-SVD as beta grows (Theorem 4). The values are printed too.\n"
    "Examples:\n"
    "  plot kvsvd-unbalance\n"
    "  plot kvsvd-unbalance betas 1,2,4,8,16 samples 4 to fig2.png";

const Param cmd_plot_kvsvd_unbalance_kw[] = {
    { .name = "betas", .type = ARG_STRING, .def = "1,2,3,5,10", .comp = COMP_NONE, .metavar = "B,B,...",
      .help = "unbalance factors (positive numbers, comma-separated)" },
    PARAM_EVAL_WINDOWS,
    { .name = "log", .type = ARG_FLAG, .comp = COMP_NONE, .help = "errors on a log axis" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

/* Parses "1,2,5" into at most cap positive numbers. */
static int parse_betas(const char *list, double *b, size_t cap, size_t *n) {
    *n = 0;
    for (const char *p = list; p && *p;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0) || !isfinite(v))
            return al_err("plot kvsvd-unbalance: betas '%s' must be positive numbers separated by commas (1,2,5)", list);
        if (*n == cap) return al_err("plot kvsvd-unbalance: at most %zu beta%s", cap, al_s(cap));
        b[(*n)++] = v;
        if (*end && *end != ',') return al_err("plot kvsvd-unbalance: betas '%s': separate the values with commas", list);
        p = *end == ',' ? end + 1 : end;
    }
    if (!*n) return al_err("plot kvsvd-unbalance: give at least one beta");
    return AL_OK;
}

#define MAX_BETAS 16

int cmd_plot_kvsvd_unbalance(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib_need(s, &c)) return AL_ERR;
    double betas[MAX_BETAS];
    size_t nb;
    if (parse_betas(args_str(a, "betas"), betas, MAX_BETAS, &nb)) return AL_ERR;
    KqSpec spec = {.by_eps = true, .eps = 0.1, .beta = 1};
    for (int k = 0; k < KQ_NMETHODS; k++)
        if (c->proj[k]) { spec = c->proj[k]->spec; break; }
    if (!c->gw && kq_wo_grams(s->cur, &c->gw)) return AL_ERR;
    Forward *f;
    if (lm_forward(s, s->cur, &f)) return AL_ERR;
    KqProj *sets[MAX_BETAS * KQ_NMETHODS] = {0};
    size_t ns = 0;
    int rc = AL_OK;
    for (size_t i = 0; i < nb && rc == AL_OK; i++)
        for (int k = 0; k < KQ_NMETHODS && rc == AL_OK; k++) {
            spec.beta = betas[i];
            rc = kq_learn(c->st, c->gw, (kq_method)k, &spec, &sets[ns]);
            if (rc == AL_OK) ns++;
        }
    int *own = NULL;
    const int *ids;
    size_t L, first, count;
    KqEval *ev = NULL;
    char on[256] = "";
    if (rc == AL_OK)
        rc = ws_calib_eval_tokens(s, c, a, "plot kvsvd-unbalance", &own, &ids, &L, &first, &count, on, sizeof on);
    if (rc == AL_OK) rc = kq_eval_new(&c->st->sh, (const KqProj *const *)sets, ns, &ev);
    if (rc == AL_OK) {
        out_printf(out, "learned 3 methods at %zu beta%s; evaluating on %s\n", nb, al_s(nb), on);
        rc = kq_eval_run(ev, s->cur, f, ids + first * L, count, L);
    }
    free(own);
    double y[KQ_NMETHODS][MAX_BETAS];
    int nl = c->st->sh.n_layers;
    if (rc == AL_OK) {
        out_printf(out, "out_err (relative Frobenius), mean over layers:\n%8s %12s %12s %12s\n", "beta", "K-SVD", "Eigen",
                   "KQ-SVD");
        for (size_t i = 0; i < nb; i++) {
            for (int k = 0; k < KQ_NMETHODS; k++) {
                double sum = 0;
                for (int l = 0; l < nl; l++) {
                    KqErr e;
                    kq_eval_result(ev, i * KQ_NMETHODS + (size_t)k, l, &e);
                    sum += e.out;
                }
                y[k][i] = sum / nl;
            }
            out_printf(out, "%8g %12.6g %12.6g %12.6g\n", betas[i], y[0][i], y[1][i], y[2][i]);
        }
    }
    kq_eval_free(ev);
    for (size_t i = 0; i < ns; i++) kq_proj_free(sets[i]);
    if (rc) return rc;
    PlotCurve cv[KQ_NMETHODS];
    for (int k = 0; k < KQ_NMETHODS; k++)
        cv[k] = (PlotCurve){.label = kq_method_label((kq_method)k), .x = betas, .y = y[k], .n = nb, .points = true};
    char title[256], sub[512], auto_name[256];
    snprintf(title, sizeof title, "%s: attention output error against key/query unbalance", s->cur->name);
    if (spec.by_eps)
        snprintf(sub, sizeof sub, "keys x beta, queries / beta; ranks from eps %g; mean over %d layer%s; on %s", spec.eps,
                 nl, al_s(nl), on);
    else
        snprintf(sub, sizeof sub, "keys x beta, queries / beta; rank %d; mean over %d layer%s; on %s", spec.rank, nl,
                 al_s(nl), on);
    snprintf(auto_name, sizeof auto_name, "%s-kvsvd-unbalance", s->cur->name);
    PlotLabels lab = {.title = title, .subtitle = sub, .xlabel = "unbalance factor beta",
                      .ylabel = "out_err = ||Y - Y'|| / ||Y|| (mean over layers)", .logy = args_flag(a, "log")};
    return plot_dest_curves(s, a, out, auto_name, &lab, cv, KQ_NMETHODS);
}
