/* cmd_plot_compare.c -- `plot compare` and `plot compare-budgets`: the figures of every KV-cache
 * reduction of the seeds at one budget (core/methods/budget_compare.h; TPA issue, "All methods, one budget").
 *
 * `plot compare` draws the per-layer error of each method from the comparison the TPA group keeps
 * in the session (ws_compare.h: the last `compare`, or one run here and kept); `plot compare-budgets`
 * runs the comparison at several budgets and draws the mean error over the layers against the
 * values each method caches. Both render through plot_curves (plots/plot.h); nothing here does
 * math beyond picking errors out of the rows and averaging them over layers. Where the figure
 * goes follows `plot` (cmd_plot.c): `to FILE`, `window`, else plot.dir/<name>.<plot.format>. */
#define _GNU_SOURCE
#include "cmd_plot_compare.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget_compare.h"
#include "layersel.h"
#include "plot.h"
#include "plot_dest.h"
#include "params.h"
#include "session.h"
#include "ws_compare.h"
#include "ws_mlastrat.h"

/* ================================================================ shared pieces */

static const char *const WHAT_CHOICES[] = {"out", "score", NULL};

/* The error a figure shows: the attention output's (what 0) or the scores' (what 1). */
static double row_err(const BudgetRow *w, int what) { return what == 1 ? w->score_err : w->out_err; }

/* Why a method cannot meet a budget, from its row's setting without the leading "n/a: ". */
static const char *reason_text(const char *setting) {
    if (!setting || !*setting) return "no rows";
    return strncmp(setting, "n/a: ", 5) ? setting : setting + 5;
}

/* "layers 0-3", or "layer 2" for one. */
static void layers_text(char *dst, size_t cap, int lo, int hi) {
    if (lo == hi) snprintf(dst, cap, "layer %d", lo);
    else snprintf(dst, cap, "layers %d-%d", lo, hi);
}

/* A method's setting for a legend: the text up to " (" when it is long ("r_v 16 (keys whole
 * under RoPE)" -> "r_v 16"), whole when short ("R 64 + D 32 (FreqFold 2)"). */
static void short_setting(char *dst, size_t cap, const char *setting) {
    snprintf(dst, cap, "%s", setting);
    const char *par = strstr(setting, " (");
    if (strlen(setting) > 26 && par && (size_t)(par - setting) < cap) dst[par - setting] = '\0';
    char *per = strstr(dst, " per KV head");          /* the legend's widest words; the table keeps them */
    if (per) memmove(per, per + 12, strlen(per + 12) + 1);
    size_t n = strlen(dst);
    if (strstr(setting, "(reused") && !strstr(dst, "(reused") && n + 10 < cap)
        memcpy(dst + n, " (reused)", 10);             /* kvsvd learn's projections: said in the legend too */
}

/* The common parts of both figures' keywords. */
#define PCMP_LAYERS PARAM_LAYERS_OPT("layers A-B (default: those of the last compare, else all)")
#define PCMP_WHAT { .name = "what", .type = ARG_ENUM, .choices = WHAT_CHOICES, .def = "out", .comp = COMP_CHOICES, \
                    .help = "which relative error: the attention output (out) or the causal scores (score)" }
#define PCMP_TOKENS PARAM_TOKENS(NULL, "random tokens of the evaluation (default: the last compare's, else 64)")
#define PCMP_FIT PARAM_FIT("auto: calibration statistics when the session has them, else unit variance")
#define PCMP_LINEAR { .name = "linear", .type = ARG_FLAG, .comp = COMP_NONE, .help = "errors on a linear axis (default: log)" }
#define PCMP_SHARED PCMP_LAYERS, PCMP_WHAT, PCMP_TOKENS, PARAM_SEED, PCMP_FIT, PCMP_LINEAR, PARAM_PLOT_TO, PARAM_WINDOW

/* The comparison key of the keywords shared by both figures (budget left 0); layers and tokens
 * not given follow the session's last compare of the model, when there is one. */
static int key_from_args(Session *s, const Args *a, Out *out, WsCmpKey *q) {
    memset(q, 0, sizeof *q);
    q->layer_lo = -1;
    q->fit = args_enum(a, "fit");
    if (args_given(a, "tokens")) q->tokens = (size_t)args_int(a, "tokens");
    if (args_given(a, "seed")) q->seed = (uint64_t)args_int(a, "seed");
    if (args_given(a, "layers")) {
        long lo, hi;
        if (param_layers(out, a, "layers", s->cur, &lo, &hi)) return AL_ERR;
        q->layer_lo = (int)lo;
        q->layer_hi = (int)hi;
    }
    const BudgetResult *last = ws_compare_last(s, s->cur);
    if (last && last->n_rows > 0) {
        if (!q->tokens) q->tokens = last->tokens;
        if (!q->seed) q->seed = last->seed;
        if (q->layer_lo < 0) {
            q->layer_lo = last->rows[0].layer;
            q->layer_hi = last->rows[last->n_rows - 1].layer;
        }
    }
    return AL_OK;
}

/* ================================================================ plot compare */

const char CMD_PLOT_COMPARE_HELP[] =
    "The figure of `compare kv-budget B`: at one KV-cache budget B (values cached per token per\n"
    "layer), the relative error of each layer's attention output (`what score`: of its causal\n"
    "scores) for every method -- FaRR, TransMLA with its best FreqFold, KQ-SVD, non-contextual TPA\n"
    "form a and form b, mean-pooling of KV heads -- one curve per method on a log axis (`linear`\n"
    "for a linear one). The legend gives each method's setting; the title the budget and the\n"
    "model's own cache. The data is the session's last `compare` when it matches (same budget,\n"
    "tokens and calibration; its layers cover `layers`), else the comparison runs here and is\n"
    "kept. What is not given follows the last compare: its budget (else half the model's cache),\n"
    "its layers (else all) and its tokens (else 64). Methods that cannot meet the budget are left\n"
    "out, and the output says why; errors of exactly 0 (FaRR keeps the keys whole under RoPE, so\n"
    "its scores are exact) cannot show on a log axis and are noted.\n"
    "Examples:\n"
    "  compare kv-budget 64; plot compare to cmp.png\n"
    "  plot compare kv-budget 96 layers 1-3 what score to scores.svg";

const Param cmd_plot_compare_kw[] = {
    { .name = "kv-budget", .type = ARG_INT, .min = 1, .max = 1 << 30, .comp = COMP_NONE, .metavar = "B",
      .help = "values cached per token per layer (default: the last compare's, else half the model's)" },
    PCMP_SHARED,
    {0}
};

/* One method's per-layer errors over layers lo..lo+n-1 of r, what they need said, its legend. */
typedef struct {
    double *y;                /* (n) NaN where the method does not meet the budget */
    int n_ok, n_pos;          /* layers it meets the budget in; of those, errors > 0 */
    double sum;               /* of the errors it has */
    size_t kv;                /* values it caches (largest over layers) */
    const char *reason;       /* why not, from the first layer it fails (a row's setting) */
    const char *set[4];       /* its distinct settings (rows' text) in layer order, the first 4 */
    int set_layers[4];        /* layers with each */
    int n_sets;               /* distinct settings seen (may exceed 4) */
} MethodLine;

/* Counts setting st for ml: a new distinct one, or one more layer of a known one. */
static void line_setting(MethodLine *ml, const char *st) {
    int n = ml->n_sets < 4 ? ml->n_sets : 4;
    for (int i = 0; i < n; i++)
        if (!strcmp(ml->set[i], st)) { ml->set_layers[i]++; return; }
    if (ml->n_sets < 4) {
        ml->set[ml->n_sets] = st;
        ml->set_layers[ml->n_sets] = 1;
    }
    ml->n_sets++;
}

/* Picks the errors of each method out of r's rows for layers lo..hi into lines (y: n each). */
static void collect_lines(const BudgetResult *r, int lo, int hi, int what, MethodLine *lines) {
    for (int i = 0; i < r->n_rows; i++) {
        const BudgetRow *w = &r->rows[i];
        if (w->layer < lo || w->layer > hi || w->method < 0 || w->method >= BUDGET_NMETHODS) continue;
        MethodLine *ml = &lines[w->method];
        if (!w->ok) {
            if (!ml->reason) ml->reason = w->setting;
            continue;
        }
        double e = row_err(w, what);
        ml->y[w->layer - lo] = e;
        ml->n_ok++;
        if (e > 0) ml->n_pos++;
        if (isfinite(e)) ml->sum += e;
        if (w->kv_values > ml->kv) ml->kv = w->kv_values;
        line_setting(ml, w->setting);
    }
}

/* "no method meets kv-budget B on M: farr n/a: ...; ..." */
static int none_fits(const Model *m, const BudgetResult *r, const MethodLine *lines) {
    char why[1024];
    size_t n = 0;
    why[0] = '\0';
    for (int k = 0; k < BUDGET_NMETHODS && n < sizeof why; k++) {
        int w = snprintf(why + n, sizeof why - n, "%s%s %s", k ? "; " : "", budget_method_name((budget_method)k),
                         reason_text(lines[k].reason));
        if (w > 0) n += (size_t)w;
    }
    return al_err("plot compare: no method meets kv-budget %zu on %s (it caches %zu value%s per token per layer): "
                  "%s. Give a larger kv-budget", r->budget, m->name, r->kv_model, al_s(r->kv_model), why);
}

/* Says where the data came from, each method's setting and mean error, and what is left out. */
static void narrate_compare(Out *out, const Model *m, const BudgetResult *r, bool reused, int lo, int hi, int what,
                            const MethodLine *lines) {
    char lay[48];
    layers_text(lay, sizeof lay, lo, hi);
    out_printf(out, "%s at a KV budget of %zu of %zu value%s per token per layer (%.1f%%), %s: %s; %zu random "
               "Gaussian token%s, seed %llu (%s)\n", m->name, r->budget, r->kv_model, al_s(r->kv_model),
               100.0 * (double)r->budget / (double)r->kv_model, lay, reused ? "the session's last compare"
               : "compared now (kept for the next plot)", r->tokens, al_s(r->tokens), (unsigned long long)r->seed,
               r->activation_stats ? "with the calibration's second moment" : "unit variance");
    for (int k = 0; k < BUDGET_NMETHODS; k++) {
        const MethodLine *ml = &lines[k];
        const char *name = budget_method_name((budget_method)k);
        if (!ml->n_ok) {
            out_printf(out, "  %-9s left out of the figure: %s\n", name, reason_text(ml->reason));
            continue;
        }
        if (ml->n_sets == 1) out_printf(out, "  %-9s %zu value%s, %s", name, ml->kv, al_s(ml->kv), ml->set[0]);
        else {
            out_printf(out, "  %-9s %zu value%s, by layer", name, ml->kv, al_s(ml->kv));
            for (int i = 0; i < ml->n_sets && i < 4; i++)
                out_printf(out, "%s %s in %d layer%s", i ? ";" : "", ml->set[i], ml->set_layers[i],
                           al_s(ml->set_layers[i]));
            if (ml->n_sets > 4) out_printf(out, "; %d more setting%s", ml->n_sets - 4, al_s(ml->n_sets - 4));
        }
        out_printf(out, ": mean %s error %.4g", WHAT_CHOICES[what], ml->sum / ml->n_ok);
        int nl = layersel_count(&m->cfg, lo, hi);      /* a hybrid's attention layers */
        if (ml->n_ok < nl) out_printf(out, " (meets the budget in %d of %d layer%s)", ml->n_ok, nl, al_s(nl));
        if (ml->n_pos < ml->n_ok) out_printf(out, "; exactly 0 in %d layer%s (not drawn on a log axis)",
                                             ml->n_ok - ml->n_pos, al_s(ml->n_ok - ml->n_pos));
        out_printf(out, "\n");
    }
}

int cmd_plot_compare(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    int what = args_enum(a, "what");
    WsCmpKey q;
    if (key_from_args(s, a, out, &q)) return AL_ERR;
    const BudgetResult *last = ws_compare_last(s, m);
    if (args_given(a, "kv-budget")) q.budget = (size_t)args_int(a, "kv-budget");
    else if (last) q.budget = last->budget;
    else {
        size_t kv = cfg_kv_values(&m->cfg);
        q.budget = kv / 2 ? kv / 2 : 1;
        out_printf(out, "no kv-budget given and no compare in the session: B = %zu, half of the %zu value%s %s caches "
                   "per token per layer\n", q.budget, kv, al_s(kv), m->name);
    }
    const BudgetResult *r;
    bool reused;
    int rc = ws_compare_get(s, m, &q, &r, &reused);
    if (rc) return rc;
    int lo = q.layer_lo >= 0 ? q.layer_lo : r->rows[0].layer;
    int hi = q.layer_lo >= 0 ? q.layer_hi : r->rows[r->n_rows - 1].layer;
    size_t n = (size_t)(hi - lo + 1);
    double *x = al_malloc3(n, BUDGET_NMETHODS + 1, sizeof(double), "compare figure points");
    if (!x) return AL_ERR;
    MethodLine lines[BUDGET_NMETHODS] = {0};
    for (size_t i = 0; i < n; i++) x[i] = lo + (double)i;
    for (int k = 0; k < BUDGET_NMETHODS; k++) {
        lines[k].y = x + (size_t)(k + 1) * n;
        for (size_t i = 0; i < n; i++) lines[k].y[i] = NAN;
    }
    collect_lines(r, lo, hi, what, lines);
    bool logy = !args_flag(a, "linear"), any_pos = false;
    size_t nc = 0;
    for (int k = 0; k < BUDGET_NMETHODS; k++) {
        if (lines[k].n_ok) nc++;
        if (lines[k].n_pos) any_pos = true;
    }
    if (!nc) { free(x); return none_fits(m, r, lines); }
    narrate_compare(out, m, r, reused, lo, hi, what, lines);
    if (logy && !any_pos) {
        out_printf(out, "every %s error is exactly 0: drawn on a linear axis\n", WHAT_CHOICES[what]);
        logy = false;
    }
    PlotCurve cv[BUDGET_NMETHODS];
    char labels[BUDGET_NMETHODS][256];
    nc = 0;
    for (int k = 0; k < BUDGET_NMETHODS; k++) {
        const MethodLine *ml = &lines[k];
        if (!ml->n_ok) continue;
        char set[128];
        if (ml->n_sets == 1) short_setting(set, sizeof set, ml->set[0]);
        else snprintf(set, sizeof set, "best of %d setting%s", ml->n_sets, al_s(ml->n_sets));
        char vals[40] = "";
        if (ml->kv < r->budget) snprintf(vals, sizeof vals, ", %zu value%s", ml->kv, al_s(ml->kv));
        snprintf(labels[k], sizeof labels[k], "%s: %s%s%s", budget_method_name((budget_method)k), set, vals,
                 logy && !ml->n_pos ? " (error 0: exact, not drawn)" : "");
        cv[nc++] = (PlotCurve){.label = labels[k], .x = x, .y = ml->y, .n = n, .points = true, .fixed_color = true,
                               .slot = k};
    }
    const char *wname = what == 1 ? "attention score" : "attention output";
    char title[256], sub[640], ylab[128], auto_name[256], note[512];
    snprintf(title, sizeof title, "%s: %s error per layer at a KV budget of %zu value%s (model: %zu)", m->name, wname,
             r->budget, al_s(r->budget), r->kv_model);
    int w = snprintf(sub, sizeof sub, "values cached per token per layer, budget %.1f%% of the model's; %zu random "
                     "Gaussian token%s, seed %llu (%s)", 100.0 * (double)r->budget / (double)r->kv_model, r->tokens,
                     al_s(r->tokens),
                     (unsigned long long)r->seed, r->activation_stats ? "calibration second moment" : "unit variance");
    for (int k = 0, first = 1; k < BUDGET_NMETHODS && w > 0 && (size_t)w < sizeof sub; k++)
        if (!lines[k].n_ok) {
            int d = snprintf(sub + w, sizeof sub - (size_t)w, "%s%s", first ? "; left out: " : ", ",
                             budget_method_name((budget_method)k));
            if (d > 0) w += d;
            first = 0;
        }
    if (layersel_note(&m->cfg, lo, hi, "drawing", note, sizeof note) && note[0] && w > 0 && (size_t)w < sizeof sub)
        snprintf(sub + w, sizeof sub - (size_t)w, "; %s", note);      /* a hybrid: the gaps named */
    snprintf(ylab, sizeof ylab, "%s_err = ||Y - Y'|| / ||Y||", what == 1 ? "score" : "out");
    snprintf(auto_name, sizeof auto_name, "%s-compare-B%zu-%s", m->name, r->budget, WHAT_CHOICES[what]);
    PlotLabels lab = {.title = title, .subtitle = sub, .xlabel = "layer", .ylabel = ylab, .logy = logy, .x_whole = true};
    rc = plot_dest_curves(s, a, out, auto_name, &lab, cv, nc);
    free(x);
    return rc;
}

/* ================================================================ plot compare-budgets */

const char CMD_PLOT_COMPARE_BUDGETS_HELP[] =
    "The cache / fidelity trade-off of every KV-cache reduction: `compare` runs at each budget of\n"
    "`budgets` (values cached per token per layer; default 1/16 .. 7/8 of the model's cache) and\n"
    "the figure draws each method's error averaged over the layers against the values it really\n"
    "caches (its largest setting within the budget: mean-pooling, for one, moves in steps of whole\n"
    "KV heads), one curve per method, log y (`linear` for a linear axis). A method is drawn only at\n"
    "budgets it meets in every layer. Layers and tokens not given follow the last compare (else\n"
    "all layers, 64 tokens). The means are printed as a table (the command's result in Lua is the\n"
    "figure's path). The runs are not kept for `plot compare`.\n"
    "With `text FILE` (or `ids FILE`, `heldout`; windows of `seqlen`) it runs `compare kv-budget B\n"
    "text FILE` at each budget (default 1/8, 1/4, 1/2, 3/4 of the model's cache) and draws the text's\n"
    "perplexity against the values each method reads per token on average: one curve per method,\n"
    "the width methods solid with circles, token eviction (StreamingLLM, H2O, SnapKV) squares,\n"
    "width + eviction triangles, the model a diamond; the rows are printed as a table.\n"
    "`strategies all|S,...` (with a text) adds the one-shot MLA strategies of `convert mla ... strategy`\n"
    "(transmla, mha2mla-..., care, -alloc) beside them: each at kv rank = budget - the RoPE dims\n"
    "TransMLA keeps, on every attention layer, with the session's calibration (`calibrate FILE` first;\n"
    "q/k-norm models: qk-norm fold), its perplexity on the same windows, dashed with down triangles.\n"
    "Examples:\n"
    "  plot compare-budgets to tradeoff.png\n"
    "  plot compare-budgets budgets 16,32,64,96 layers 0-1 what score\n"
    "  plot compare-budgets text story.txt budgets 8,16,32,48 seqlen 128 to width-vs-length.png\n"
    "  calibrate story.txt; plot compare-budgets text story.txt budgets 24,40,56 strategies all";

const Param cmd_plot_compare_budgets_kw[] = {
    { .name = "budgets", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "B,B,...",
      .help = "budgets to compare, values per token per layer (default: 1/16 .. 7/8 of the model's cache)" },
    PCMP_SHARED,
    WS_CMP_TEXT_KW,
    { .name = "strategies", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "all|S,S,...",
      .help = "with text: also the one-shot MLA strategies (convert mla's strategy words; all: eight)" },
    {0}
};

#define MAX_BUDGETS 32
#define MAX_STRATS 32
#define BTEXT_MAX_ROWS 16                       /* budget_text's rows: 1 + 6 + 3 + 5 */

static int cmp_size(const void *x, const void *y) {
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    return (a > b) - (a < b);
}

/* Budgets from "16,32,64" (positive integers), or the default fractions of the model's cache kv;
 * sorted ascending without repeats. */
static int parse_budgets(const char *list, size_t kv, size_t *b, size_t *n) {
    *n = 0;
    if (!list || !*list) {
        static const int sixteenths[] = {1, 2, 3, 4, 6, 8, 10, 12, 14};   /* of kv */
        for (size_t i = 0; i < sizeof sixteenths / sizeof sixteenths[0]; i++) {
            size_t v = kv * (size_t)sixteenths[i] / 16;
            if (v >= 1) b[(*n)++] = v;
        }
    } else
        for (const char *p = list; *p;) {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p || v < 1 || v > (1LL << 30))
                return al_err("plot compare-budgets: budgets '%s' must be whole numbers from 1 to 2^30 separated by "
                              "commas (16,32,64)", list);
            if (*end && *end != ',')
                return al_err("plot compare-budgets: budgets '%s': separate the values with commas", list);
            if (*n == MAX_BUDGETS) return al_err("plot compare-budgets: at most %d budgets", MAX_BUDGETS);
            b[(*n)++] = (size_t)v;
            p = *end ? end + 1 : end;
        }
    if (!*n) return al_err("plot compare-budgets: give at least one budget (budgets 16,32,64)");
    qsort(b, *n, sizeof *b, cmp_size);
    size_t j = 0;
    for (size_t i = 0; i < *n; i++)
        if (!j || b[i] != b[j - 1]) b[j++] = b[i];
    *n = j;
    return AL_OK;
}

/* Mean error of method k over r's layers (NaN unless it meets the budget in every one) and the
 * values it caches there (the largest over layers); why (cap bytes) gets the reason of a layer it
 * fails in. */
static double method_mean(const BudgetResult *r, int k, int what, size_t *kv, char *why, size_t cap) {
    double sum = 0;
    int cnt = 0;
    *kv = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const BudgetRow *w = &r->rows[i];
        if (w->method != (budget_method)k) continue;
        double e = row_err(w, what);
        if (!w->ok) {
            snprintf(why, cap, "%s", w->setting);
            return NAN;
        }
        if (!isfinite(e)) return NAN;
        sum += e;
        cnt++;
        if (w->kv_values > *kv) *kv = w->kv_values;
    }
    return cnt ? sum / cnt : NAN;
}

/* The comparison at every budget: x[k][i], y[k][i] method k at budget i (NaN where it does not
 * meet it), with what the curves and the caption need. */
typedef struct {
    double x[BUDGET_NMETHODS][MAX_BUDGETS], y[BUDGET_NMETHODS][MAX_BUDGETS];
    char why[BUDGET_NMETHODS][128];         /* a reason it fails, at the largest budget it fails */
    bool reused[MAX_BUDGETS];               /* KQ-SVD reused kvsvd learn's projections at budget i */
    size_t tokens;
    int lo, hi;                             /* the layers compared */
    bool act;                               /* activation-weighted */
} BudgetSweep;

/* Runs the comparison q at each budget into b, one row of t per budget (mean error per method). */
static int budgets_sweep(Session *s, Model *m, WsCmpKey *q, const size_t *budgets, size_t nb, int what,
                         BudgetSweep *b, Table *t) {
    int rc = AL_OK;
    for (size_t i = 0; i < nb && rc == AL_OK; i++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        BudgetResult *r = NULL;
        q->budget = budgets[i];
        if ((rc = ws_compare_run(s, m, q, &r))) break;
        b->tokens = r->tokens;
        b->act = b->act || r->activation_stats;
        b->lo = r->rows[0].layer;
        b->hi = r->rows[r->n_rows - 1].layer;
        if ((rc = table_row(t))) { budget_result_free(r); break; }
        table_int(t, (long long)budgets[i]);
        for (int j = 0; j < r->n_rows && !b->reused[i]; j++)      /* kvsvd learn's projections at their ranks */
            b->reused[i] = r->rows[j].method == BUDGET_KQSVD && strstr(r->rows[j].setting, "(reused");
        for (int k = 0; k < BUDGET_NMETHODS; k++) {
            size_t kv;
            b->y[k][i] = method_mean(r, k, what, &kv, b->why[k], sizeof b->why[k]);
            b->x[k][i] = isfinite(b->y[k][i]) ? (double)kv : NAN;
            if (isfinite(b->y[k][i])) table_num(t, b->y[k][i]);
            else table_null(t);
        }
        budget_result_free(r);
    }
    return rc;
}

/* The budgets where KQ-SVD reused kvsvd learn's projections, said; kq_label (cap bytes) the
 * legend's name for it then ("" otherwise). */
static void budgets_reused(const BudgetSweep *b, const size_t *budgets, size_t nb, char *kq_label, size_t cap,
                           Out *out) {
    kq_label[0] = 0;
    for (size_t i = 0; i < nb; i++)
        if (b->reused[i]) {
            out_printf(out, "kqsvd at budget %zu: `kvsvd learn kqsvd`'s projections, reused (their ranks are this "
                       "budget's); every other point is fit at its budget\n", budgets[i]);
            if (!kq_label[0]) snprintf(kq_label, cap, "kqsvd (kvsvd learn's reused at %zu)", budgets[i]);
        }
}

/* One curve per method over the budgets it meets (b's x, y compacted in place); a repeated cache
 * size (a method that cannot use more of a larger budget) is drawn once; a method meeting none is
 * said. *any_pos: some error is > 0. Returns the number of curves. */
static size_t budgets_curves(BudgetSweep *b, size_t nb, const char *kq_label, PlotCurve *cv, bool *any_pos,
                             Out *out) {
    size_t nc = 0;
    *any_pos = false;
    for (int k = 0; k < BUDGET_NMETHODS; k++) {
        double *x = b->x[k], *y = b->y[k];
        size_t np = 0;
        for (size_t i = 0; i < nb; i++) {
            if (!isfinite(y[i]) || (np && x[i] == x[np - 1])) continue;
            x[np] = x[i];
            y[np] = y[i];
            if (y[np] > 0) *any_pos = true;
            np++;
        }
        if (!np) {
            out_printf(out, "%s: left out of the figure, it meets none of these budgets in every layer (%s)\n",
                       budget_method_name((budget_method)k), reason_text(b->why[k]));
            continue;
        }
        cv[nc++] = (PlotCurve){.label = k == BUDGET_KQSVD && kq_label[0] ? kq_label : budget_method_name((budget_method)k),
                               .x = x, .y = y, .n = np, .points = true,
                               .fixed_color = true, .slot = k};
    }
    return nc;
}

/* The figure of the curves: title, caption over the layers lay and budgets, axes. */
static int budgets_draw(Session *s, const Args *a, Out *out, const Model *m, const BudgetSweep *b, const char *lay,
                        const size_t *budgets, size_t nb, int what, const PlotCurve *cv, size_t nc, bool logy) {
    size_t kv_model = cfg_kv_values(&m->cfg);
    char title[256], sub[256], ylab[128], auto_name[256];
    snprintf(title, sizeof title, "%s: %s error against KV cache, every method (model: %zu value%s)", m->name,
             what == 1 ? "attention score" : "attention output", kv_model, al_s(kv_model));
    snprintf(sub, sizeof sub, "mean over %s; each method at its largest setting within budgets %zu-%zu; "
             "%zu random Gaussian token%s (%s)", lay, budgets[0], budgets[nb - 1], b->tokens, al_s(b->tokens),
             b->act ? "calibration second moment" : "unit variance");
    snprintf(ylab, sizeof ylab, "%s_err = ||Y - Y'|| / ||Y|| (mean over layers)", what == 1 ? "score" : "out");
    snprintf(auto_name, sizeof auto_name, "%s-compare-budgets-%s", m->name, WHAT_CHOICES[what]);
    PlotLabels lab = {.title = title, .subtitle = sub, .xlabel = "values cached per token per layer", .ylabel = ylab,
                      .logy = logy};
    return plot_dest_curves(s, a, out, auto_name, &lab, cv, nc);
}

/* ---------------------------------------------------------------- on a text */

/* Perplexity of every row of budget_text at each budget: x[j][i], y[j][i] row j at budget i (NaN where it does
 * not run), the rows' names and families from the first budget. */
typedef struct {
    double x[BTEXT_MAX_ROWS][MAX_BUDGETS], y[BTEXT_MAX_ROWS][MAX_BUDGETS];
    char name[BTEXT_MAX_ROWS][40];
    btext_family fam[BTEXT_MAX_ROWS];
    int nrows;
    size_t seqlen, tokens, capacity0;
} TextSweep;

/* Runs budget_text at each budget into b, a row of t per method and budget. */
static int text_sweep(Session *s, Model *m, const Args *a, const CheckText *tx, const size_t *budgets, size_t nb,
                      TextSweep *b, Table *t) {
    int rc = AL_OK;
    for (size_t i = 0; i < nb && rc == AL_OK; i++) {
        BudgetText *bt = NULL;
        if ((rc = ws_compare_text_run(s, m, args_enum(a, "fit"), budgets[i], tx, &bt))) break;
        b->nrows = bt->n_rows < BTEXT_MAX_ROWS ? bt->n_rows : BTEXT_MAX_ROWS;
        b->seqlen = bt->seqlen;
        b->tokens = bt->tokens;
        for (int j = 0; j < b->nrows && rc == AL_OK; j++) {
            const BudgetTextRow *w = &bt->rows[j];
            bool ran = w->ok && isfinite(w->nll);
            snprintf(b->name[j], sizeof b->name[j], "%s", w->method);
            b->fam[j] = w->family;
            b->x[j][i] = ran ? w->kv_values : NAN;
            b->y[j][i] = ran ? exp(w->nll) : NAN;
            if ((rc = table_row(t))) break;
            table_int(t, (long long)budgets[i]);
            table_str(t, w->method);
            if (ran) { table_num(t, w->kv_values); table_num(t, exp(w->nll)); }
            else { table_null(t); table_null(t); }
        }
        budget_text_free(bt);
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    return rc;
}

/* One curve per row over the budgets where it runs (compacted in place; the model once); width_only: the model and
 * the width methods alone. */
static size_t text_curves(TextSweep *b, size_t nb, bool width_only, PlotCurve *cv) {
    static const int DASH[] = {1, 1, 2, 3}, MARK[] = {3, 0, 1, 2};     /* by family: model, width, eviction, both */
    size_t nc = 0;
    for (int j = 0; j < b->nrows; j++) {
        if (width_only && b->fam[j] != BTEXT_MODEL && b->fam[j] != BTEXT_WIDTH) continue;
        double *x = b->x[j], *y = b->y[j];
        size_t np = 0;
        for (size_t i = 0; i < nb; i++) {
            if (!isfinite(y[i]) || (np && x[i] == x[np - 1])) continue;
            x[np] = x[i];
            y[np] = y[i];
            np++;
        }
        if (b->fam[j] == BTEXT_MODEL && np > 1) np = 1;
        if (np)
            cv[nc++] = (PlotCurve){.label = b->name[j], .x = x, .y = y, .n = np, .points = true, .fixed_color = true,
                                   .slot = j, .marker = MARK[b->fam[j]], .dash = DASH[b->fam[j]]};
    }
    return nc;
}

/* The strategies' curves on the text (x: KV values per token and layer, y: perplexity), dashed, down triangles. */
typedef struct {
    double x[MAX_STRATS][MAX_BUDGETS], y[MAX_STRATS][MAX_BUDGETS];
    char label[MAX_STRATS][72];
} StratCurves;

/* `strategies LIST` on the text tx at budgets: their table printed, their curves appended to cv (nc). */
static int strat_text(Session *s, const Args *a, Out *out, const CheckText *tx, const size_t *budgets, size_t nb,
                      StratCurves *sc, PlotCurve *cv, size_t *nc) {
    Model *m = s->cur;
    MlastratTable *t = NULL;
    size_t ns = 0;
    int rc = ws_mlastrat_budgets(s, m, args_str(a, "strategies"), budgets, nb, tx->ids, tx->n, tx->seqlen, &t, &ns);
    if (rc) return rc;
    size_t nr = t->n / ns;
    out_printf(out, "one-shot MLA strategies at %zu kv rank%s (budget - RoPE dims), session calibration; perplexity on "
               "the same windows (model %.6g); the figure draws them beside the model and the width methods (the "
               "eviction rows are in the table above)\n", nr, al_s(nr), exp(t->base_nll));
    Table *tb = ws_mlastrat_rows(m, t);
    char *tab = tb ? table_render(tb, s->fmt, s->prec) : NULL;
    if (tab) out_write(out, OUT_STDOUT, tab, strlen(tab));
    free(tab);
    table_free(tb);
    for (size_t i = 0; i < ns && i < MAX_STRATS; i++) {
        char lab[64];
        for (size_t k = 0; k < nr && k < MAX_BUDGETS; k++) {
            sc->x[i][k] = t->rows[k * ns + i].kv_values;
            sc->y[i][k] = exp(t->rows[k * ns + i].nll);
        }
        snprintf(sc->label[i], sizeof sc->label[i], "mla %s", mlastrat_label(&t->rows[i].strat, lab, sizeof lab));
        cv[(*nc)++] = (PlotCurve){.label = sc->label[i], .x = sc->x[i], .y = sc->y[i], .n = nr < MAX_BUDGETS ? nr : MAX_BUDGETS,
                                  .points = true, .fixed_color = true, .slot = 7 + (int)i, .marker = 4, .dash = 2};
    }
    mlastrat_table_free(t);
    return AL_OK;
}

/* The text figure's title and axes, drawn. */
static int text_draw(Session *s, const Args *a, Out *out, const TextSweep *b, const size_t *budgets, size_t nb,
                     const PlotCurve *cv, size_t nc) {
    Model *m = s->cur;
    char title[256], sub[256], auto_name[256];
    snprintf(title, sizeof title, "%s: perplexity against KV cache, width and length (model: %zu value%s)", m->name,
             cfg_kv_values(&m->cfg), al_s(cfg_kv_values(&m->cfg)));
    snprintf(sub, sizeof sub, "budgets %zu-%zu; eviction at the same keys read per window of %zu; circles, solid: width; "
             "squares: eviction; triangles: width at 2B + StreamingLLM%s", budgets[0], budgets[nb - 1], b->seqlen,
             args_given(a, "strategies") ? "; down triangles, dashed: MLA strategies (eviction: the table)" : "");
    snprintf(auto_name, sizeof auto_name, "%s-compare-budgets-text", m->name);
    PlotLabels lab = {.title = title, .subtitle = sub, .xlabel = "KV values per token per layer (on average)",
                      .ylabel = "perplexity", .logy = !args_flag(a, "linear")};
    return plot_dest_curves(s, a, out, auto_name, &lab, cv, nc);
}

/* `plot compare-budgets text FILE`: perplexity against values per token for every method. */
static int budgets_text(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    size_t kv = cfg_kv_values(&m->cfg), budgets[MAX_BUDGETS], nb = 0;
    if (args_given(a, "layers") || args_given(a, "tokens") || args_given(a, "seed") || args_given(a, "what"))
        return al_err("plot compare-budgets on a text runs every attention layer on the text's own tokens and draws "
                      "perplexity: drop layers / tokens / seed / what");
    static const size_t SIXTEENTHS[] = {2, 4, 8, 12};      /* the default budgets, of kv */
    if (args_given(a, "budgets") && parse_budgets(args_str(a, "budgets"), kv, budgets, &nb)) return AL_ERR;
    for (size_t f = 0; !args_given(a, "budgets") && f < 4; f++)
        if ((budgets[nb] = kv * SIXTEENTHS[f] / 16) >= 1) nb++;
    CheckText tx;
    if (ws_compare_text(s, m, a, &tx)) return AL_ERR;
    TextSweep *b = al_calloc(1, sizeof *b, "the sweep");
    Table *t = table_new(4, "budget", "method", "kv_values", "ppl");
    int rc = b && t ? text_sweep(s, m, a, &tx, budgets, nb, b, t) : AL_ERR;
    if (rc == AL_OK)
        out_printf(out, "%s: perplexity of %s: %zu token%s predicted in windows of %zu, at %zu budget%s (the model caches "
                   "%zu value%s per token per layer)\n", m->name, tx.on, b->tokens, al_s(b->tokens), b->seqlen, nb,
                   al_s(nb), kv, al_s(kv));
    char *tab = rc == AL_OK ? table_render(t, s->fmt, s->prec) : NULL;
    if (tab) out_write(out, OUT_STDOUT, tab, strlen(tab));
    free(tab);
    table_free(t);
    PlotCurve cv[BTEXT_MAX_ROWS + MAX_STRATS];
    StratCurves *sc = args_given(a, "strategies") ? al_calloc(1, sizeof *sc, "the strategies' curves") : NULL;
    size_t nc = rc == AL_OK ? text_curves(b, nb, args_given(a, "strategies"), cv) : 0;
    if (rc == AL_OK && args_given(a, "strategies")) rc = sc ? strat_text(s, a, out, &tx, budgets, nb, sc, cv, &nc) : AL_ERR;
    ws_check_text_free(&tx);
    if (rc == AL_OK) rc = text_draw(s, a, out, b, budgets, nb, cv, nc);
    free(b);
    free(sc);
    return rc;
}

int cmd_plot_compare_budgets(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    if (ws_compare_on_text(a)) return budgets_text(s, a, out);
    if (args_given(a, "strategies"))
        return al_err("plot compare-budgets: strategies draws perplexity: give it with text FILE (or ids FILE, heldout)");
    int what = args_enum(a, "what");
    size_t kv_model = cfg_kv_values(&m->cfg), budgets[MAX_BUDGETS], nb;
    WsCmpKey q;
    if (key_from_args(s, a, out, &q) || parse_budgets(args_str(a, "budgets"), kv_model, budgets, &nb)) return AL_ERR;
    BudgetSweep b = {0};
    Table *t = table_new(1 + BUDGET_NMETHODS, "budget", "farr", "transmla", "kqsvd", "tpa-a", "tpa-b", "mean-pool");
    if (!t) return AL_ERR;
    int rc = budgets_sweep(s, m, &q, budgets, nb, what, &b, t);
    if (rc) { table_free(t); return rc; }
    char lay[48], kq_label[64];
    layers_text(lay, sizeof lay, b.lo, b.hi);
    out_printf(out, "%s, %s: mean %s error over the layers at %zu budget%s (the model caches %zu value%s per "
               "token per layer); %zu random Gaussian token%s (%s)\n", m->name, lay, WHAT_CHOICES[what], nb,
               al_s(nb),
               kv_model, al_s(kv_model), b.tokens, al_s(b.tokens), b.act ? "with the calibration's second moment" : "unit variance");
    char *tab = table_render(t, s->fmt, s->prec);
    if (tab) out_write(out, OUT_STDOUT, tab, strlen(tab));      /* the table: stdout in every format */
    free(tab);
    table_free(t);
    budgets_reused(&b, budgets, nb, kq_label, sizeof kq_label, out);
    PlotCurve cv[BUDGET_NMETHODS];
    bool any_pos;
    size_t nc = budgets_curves(&b, nb, kq_label, cv, &any_pos, out);
    if (!nc)
        return al_err("plot compare-budgets: no method meets any of the budgets on %s (it caches %zu value%s per token "
                      "per layer): give larger budgets", m->name, kv_model, al_s(kv_model));

    bool logy = !args_flag(a, "linear");
    if (logy && !any_pos) {
        out_printf(out, "every mean error is exactly 0: drawn on a linear axis\n");
        logy = false;
    }
    return budgets_draw(s, a, out, m, &b, lay, budgets, nb, what, cv, nc, logy);
}
