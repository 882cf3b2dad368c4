/* cmd_plot_attend.c -- `plot attention` and `plot head-importance` (cmd_plot_attend.h): a head's
 * pattern on a text (before / after the newest transformation) and the ablation of every head beside
 * its fused VO rank, over headprobe.h and the FaRR cache, drawn by plots/plot_attention.c. */
#define _GNU_SOURCE
#include "cmd_plot_attend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "farr.h"
#include "headprobe.h"
#include "layersel.h"
#include "params.h"
#include "plot_attention.h"
#include "plot_dest.h"
#include "workspace.h"
#include "ws_lm.h"

/* ================================================================ plot attention */

const char CMD_PLOT_ATTENTION_HELP[] =
    "The attention pattern of head H of layer L on TEXT (quoted; `file FILE`, `ids FILE`;\n"
    "`max-tokens N`), as `attend` computes it: queries top to bottom, keys left to right, each\n"
    "token's string along both axes (every k-th past 64 tokens), one colour scale from 0 to the\n"
    "largest weight. `compare` draws the source's pattern and the newest transformation's\n"
    "(truncate, convert mla, convert tpa: as `ppl` runs it) side by side on that scale. gpt-oss:\n"
    "the subtitle says how much weight the sink takes (rows sum to less than 1).\n"
    "Examples:\n"
    "  plot attention \"Once upon a time there was a cat\" layer 1 head 2 to att.png\n"
    "  convert mla kv-rank 16; plot attention file story.txt max-tokens 40 layer 0 head 1 compare";

const Param cmd_plot_attention_pos[] = {
    { .name = "text", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "TEXT|file|ids",
      .help = "the text (quoted), or the word file (ids) followed by FILE" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word file: the text file; after ids: whitespace-separated token ids" },
    {0}
};
const Param cmd_plot_attention_kw[] = {
    { .name = "layer", .type = ARG_INT, .def = "0", .comp = COMP_LAYERS, .metavar = "L", .help = "the layer" },
    { .name = "head", .type = ARG_INT, .def = "0", .min = 0, .max = 1e6, .comp = COMP_NONE, .metavar = "H",
      .help = "the query head" },
    { .name = "max-tokens", .type = ARG_INT, .min = 2, .max = 1e9, .comp = COMP_NONE, .metavar = "N",
      .help = "only the first N tokens of the text" },
    { .name = "compare", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "the source's and the newest transformation's patterns side by side" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

/* The patterns (p, and q with compare) and the token labels of the arguments' text. */
typedef struct {
    int *ids;
    size_t T;
    char **str, **lab;
    ProbePattern p, q;
    bool have_q;
    char after[512];
} AttFig;

static void attfig_free(AttFig *g) {
    probe_strings_free(g->str, g->T);
    probe_strings_free(g->lab, g->T);
    free(g->ids);
    free(g->p.P);
    free(g->q.P);
}

static int attfig_compute(Session *s, Model *m, const Args *a, AttFig *g) {
    Tokenizer *tok;
    Forward *f;
    int layer = (int)args_int(a, "layer"), head = (int)args_int(a, "head");
    int rc = probe_encode(s, m, args_str(a, "text"), args_str(a, "file"), "plot attention", &tok, &g->ids, &g->T);
    if (rc) return rc;
    if (args_given(a, "max-tokens") && (size_t)args_int(a, "max-tokens") < g->T) g->T = (size_t)args_int(a, "max-tokens");
    if ((rc = probe_strings(tok, g->ids, g->T, &g->str))) return rc;
    if (!(g->lab = al_calloc(g->T, sizeof *g->lab, "token labels"))) return AL_ERR;
    for (size_t i = 0; i < g->T; i++) {
        char buf[64];
        probe_label(g->str[i], buf, sizeof buf);
        if (!(g->lab[i] = al_strdup(buf))) return AL_ERR;
    }
    if (probe_check_head(m, layer, head, g->T) || lm_forward(s, m, &f)) return AL_ERR;
    if ((rc = probe_pattern(f, g->ids, g->T, layer, head, &g->p)) || !args_flag(a, "compare")) return rc;
    char line[1024];
    const Xform *x = probe_xform(s, m, line, sizeof line);
    if (!x) return al_err("plot attention compare: %s has no transformation that runs as attention layers (truncate, "
                          "convert mla, convert tpa make one)", m->name);
    snprintf(g->after, sizeof g->after, "after: %s", x->cmd ? x->cmd : x->kind->name);
    if ((rc = probe_pattern_xform(s, x, f, g->ids, g->T, layer, head, &g->q)) == AL_OK) g->have_q = true;
    return rc;
}

int cmd_plot_attention(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    AttFig g = {0};
    int rc = attfig_compute(s, m, a, &g);
    if (rc != AL_OK) { attfig_free(&g); return rc; }
    int layer = (int)args_int(a, "layer"), head = (int)args_int(a, "head");
    char title[256], sub[256] = "", auto_name[256], src[256];
    snprintf(title, sizeof title, "%s layer %d head %d: attention on %zu token%s", m->name, layer, head, g.T,
             al_s(g.T));
    size_t w = cfg_layer_window(&m->cfg, layer);
    size_t k = w ? (size_t)snprintf(sub, sizeof sub, "sliding window of %zu token%s", w, al_s(w)) : 0;

    if (g.p.sink > 0)
        snprintf(sub + k, sizeof sub - k, "%sthe sink takes %.1f%% of each row's weight on average", k ? "; " : "",
                 100 * g.p.sink);
    snprintf(src, sizeof src, g.have_q ? "before: %s" : "%s", m->name);
    snprintf(auto_name, sizeof auto_name, "%s-attention-L%d-H%d%s", m->name, layer, head, g.have_q ? "-compare" : "");
    PlotAttnPanel pn[2] = {{src, g.p.P}, {g.after, g.q.P}};
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { attfig_free(&g); return AL_ERR; }
    if (!d.o.title) d.o.title = title;
    if (!d.o.subtitle && *sub) d.o.subtitle = sub;
    plot_dest_window_hint(out, &d);
    rc = plot_attention(&d.o, pn, g.have_q ? 2 : 1, g.T, (const char *const *)g.lab);
    attfig_free(&g);
    return plot_dest_done(out, &d, rc);
}

/* ================================================================ plot head-importance */

const char CMD_PLOT_IMPORTANCE_HELP[] =
    "Which heads can be cut and which only compressed: for each head of `layer L` (or every\n"
    "attention layer: `layer all`, the default) the perplexity on a text FILE (or `ids FILE`;\n"
    "`seqlen`, `max-tokens` as `ppl` takes them) with the head's output removed, minus the intact\n"
    "model's (as `ablate` computes it), beside the head's fused VO effective rank at tau (the FaRR\n"
    "cache's, as `ranks vo`; `rank qk [offset D]`: the QK rank). One layer: bars over the heads,\n"
    "delta ppl above the rank; several: two grids, layers down and heads across. A head whose\n"
    "delta is small can be cut; one the model needs but whose rank is low can be compressed\n"
    "instead. The largest delta is printed.\n"
    "Examples:\n"
    "  plot head-importance tinystory.txt layer 2 to imp.png\n"
    "  plot head-importance tinystory.txt max-tokens 1000 tau 0.99 rank qk offset 0";

const Param cmd_plot_importance_pos[] = {
    { .name = "what", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE|text|ids",
      .help = "a text file, or the word text followed by one (as ppl takes it), or the word ids followed by a file of token ids" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word text: a text file; after ids: whitespace-separated token ids" },
    {0}
};
const Param cmd_plot_importance_kw[] = {
    { .name = "layer", .type = ARG_INT, .flags = PF_ALL, .def = "all", .comp = COMP_LAYERS, .metavar = "L|all",
      .help = "one layer, or every attention layer" },
    { .name = "seqlen", .type = ARG_INT, .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "window length in tokens (default: min(512, the model's context))" },
    { .name = "max-tokens", .type = ARG_INT, .min = 2, .max = 1e12, .comp = COMP_NONE, .metavar = "N",
      .help = "use only the first N tokens (default: all)" },
    { .name = "rank", .type = ARG_ENUM, .choices = PARAM_PAIR_CHOICES, .def = "vo", .comp = COMP_CHOICES,
      .help = "the fused rank beside the deltas: vo (W_V W_O) or qk (W_Q W_K^T; full-RoPE models need offset)" },
    PARAM_OFFSET,
    PARAM_TAU,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

/* The fused ranks (the arguments' pair and offset) at tau of the attention layers lo..hi into rank (rows
 * of H, in layer order). */
static int importance_ranks(Session *s, Model *m, const Args *a, int lo, int hi, int *rank, int *cap) {
    FarrState *st;
    FarrQuery q = {.m = m, .kind = args_enum(a, "rank") == 1 ? FARR_QK : FARR_VO, .lo = lo, .hi = hi,
                   .offset = param_offset(a)};
    double tau = param_tau(s, a);
    FarrRankRow *rows = NULL;
    size_t n = 0, k = 0;
    if (ws_farr(s, &st) || farr_state_sweep(st, &q) || farr_state_rank_table(st, &q, tau, &rows, &n)) return AL_ERR;
    *cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (!layersel_attn(&m->cfg, rows[i].layer)) continue;
        rank[k++] = rows[i].rank_fused;
        const FarrLayer *fl = farr_state_get_layer(st, m, q.kind, rows[i].layer, q.offset);
        if (fl && fl->head_dim > *cap) *cap = fl->head_dim;
    }
    free(rows);
    return AL_OK;
}

/* The deltas of every head of the attention layers lo..hi (layers[] gets their numbers). */
static int importance_deltas(Forward *f, const Model *m, const int *ids, size_t n, size_t L, int lo, int hi,
                             int *layers, double *delta, double *base) {
    FwdPpl b, p;
    ProbeAblation *pa;
    if (probe_ablation_new(f, ids, n, L, &pa)) return AL_ERR;
    int H = m->cfg.n_heads, nl = 0, rc = probe_ablation_base(pa, layersel_next(&m->cfg, lo, hi), &b);
    *base = exp(b.nll);
    for (int l = layersel_next(&m->cfg, lo, hi); rc == AL_OK && l <= hi; l = layersel_next(&m->cfg, l + 1, hi)) {
        layers[nl] = l;
        for (int h = 0; rc == AL_OK && h < H; h++) {
            if ((rc = probe_ablation_run(pa, l, &h, 1, &p)) == AL_OK) delta[(size_t)nl * H + h] = exp(p.nll) - *base;
            if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
        }
        nl++;
    }
    probe_ablation_free(pa);
    return rc;
}

/* Prints the largest delta and draws the figure. */
static int importance_draw(Session *s, Model *m, const Args *a, const PlotHeadImportance *d, double base, Out *out) {
    size_t best = 0, N = d->n_layers * d->n_heads;
    for (size_t i = 1; i < N; i++)
        if (d->delta[i] > d->delta[best]) best = i;
    char rk[96] = "";
    if (d->rank) snprintf(rk, sizeof rk, ", %s %d", d->rank_name, d->rank[best]);
    if (out_narrates(out))
        out_printf(out, "%s: ppl %.6g intact%s; the largest rise without one head: layer %d head %zu (+%.4g)%s\n",
                   m->name, base, xform_newest(s, m, NULL) ? " (the loaded model: its transformations are not ablated)" : "",
                   d->layers[best / d->n_heads], best % d->n_heads, d->delta[best], rk);
    char title[256], auto_name[256];
    snprintf(title, sizeof title, "%s: perplexity without each head (intact %.4g), beside its fused rank", m->name, base);
    snprintf(auto_name, sizeof auto_name, "%s-head-importance%s", m->name, d->n_layers == 1 ? "-layer" : "");
    PlotDest dst;
    if (plot_dest_init(s, a, auto_name, &dst)) return AL_ERR;
    if (!dst.o.title) dst.o.title = title;
    plot_dest_window_hint(out, &dst);
    return plot_dest_done(out, &dst, plot_head_importance(&dst.o, d));
}

int cmd_plot_head_importance(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    int lo = 0, hi = m->cfg.n_layers - 1, H = m->cfg.n_heads, cap = 0;
    if (!args_all(a, "layer")) {
        lo = hi = (int)args_int(a, "layer");
        if (probe_check_head(m, lo, 0, 0)) return al_err_ctx("plot head-importance");
    }
    size_t nl = (size_t)layersel_count(&m->cfg, lo, hi), n = 0, L = 0;
    int *ids = NULL, *layers = al_malloc3(nl, 1, sizeof *layers, "layers"), *rank = al_malloc3(nl, (size_t)H, sizeof *rank, "ranks");
    double *delta = al_malloc3(nl, (size_t)H, sizeof *delta, "deltas"), base = 0, tau = param_tau(s, a);
    Forward *f;
    int rc = layers && rank && delta ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = probe_ppl_tokens(s, m, a, &ids, &n, &L);
    if (rc == AL_OK) rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = importance_deltas(f, m, ids, n, L, lo, hi, layers, delta, &base);
    bool ranks = rc == AL_OK && importance_ranks(s, m, a, lo, hi, rank, &cap) == AL_OK;
    const char *pair = args_enum(a, "rank") == 1 ? "QK" : "VO";
    if (rc == AL_OK && !ranks) out_eprintf(out, "no %s ranks beside the deltas: %s\n", pair, al_errmsg());
    char rname[64];
    snprintf(rname, sizeof rname, "%s rank (tau %g)", pair, tau);
    PlotHeadImportance d = {.n_layers = nl, .n_heads = (size_t)H, .layers = layers, .delta = delta,
                            .rank = ranks ? rank : NULL, .rank_cap = cap, .rank_name = rname};
    if (rc == AL_OK) rc = importance_draw(s, m, a, &d, base, out);
    free(ids); free(layers); free(rank); free(delta);
    return rc;
}
