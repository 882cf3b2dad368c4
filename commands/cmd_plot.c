/* cmd_plot.c -- the `plot` command group: figures of the FaRR analysis (seed 000 sections 1.3,
 * 1.4, 2.3, 2.4) drawn by plots/ from results core/ computed.
 *
 * Data comes from the session's FaRR cache (core/analysis/farr.h): a layer's spectra are computed once
 * (by `ranks`, or here on first use) and every later plot, at any tau, reads them. Heatmaps of
 * SVD factors ask core/linalg/spectra.h for the singular vectors of one head. Nothing here does math
 * beyond picking values out of those results.
 *
 * Where a figure goes: `to FILE.png|.svg|.pdf` (a name without extension gets plot.format);
 * `window` (or no `to` in an interactive session with a display) shows an xcairo window;
 * otherwise a file named after the figure in plot.dir, whose path is printed and returned
 * (the result value Lua gets). Size: `set plot.size WxH`. */
#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_plot_kvsvd.h"
#include "cmd_plot_compare.h"
#include "cmd_plot_esd.h"
#include "cmd_plot_mla.h"
#include "cmd_plot_attend.h"
#include "cmd_plot_xy.h"
#include "farr.h"
#include "layersel.h"
#include "spectra.h"
#include "plot.h"
#include "plot_dest.h"
#include "registry.h"
#include "params.h"
#include "session.h"
#include "workspace.h"

/* ================================================================ one head's matrices */

static const char *const MAT_CHOICES[] = {"q", "k", "v", "o", "qk", "vo", NULL};
enum { M_Q, M_K, M_V, M_O, M_QK, M_VO };

/* Which FaRR pair a matrix kind belongs to, and its side (0: A, 1: B, 2: fused). */
static farr_kind mat_pair(int mk, int *side) {
    static const int sides[] = {0, 1, 0, 1, 2, 2};
    *side = sides[mk];
    return (mk == M_Q || mk == M_K || mk == M_QK) ? FARR_QK : FARR_VO;
}

/* "W_Q", "W_K", ..., "fused W_Q W_Kᵀ" (PLplot text is UTF-8). */
static const char *mat_label(int mk) {
    static const char *const names[] = {"W_Q", "W_K", "W_V", "W_O", "fused W_Q W_Kᵀ", "fused W_V W_O"};
    return names[mk];
}

/* The layer, head and RoPE offset of a per-head plot; an error says what is missing. */
static int head_args(const Args *a, int *layer, int *head, int *offset) {
    if (!args_given(a, "layer") || !args_given(a, "head"))
        return al_err("%s needs a layer and a head, e.g. `%s %s layer 3 head 5`", a->path, a->path,
                      args_str(a, "kind") ? args_str(a, "kind") : "vo");
    *layer = (int)args_int(a, "layer");
    *head = (int)args_int(a, "head");
    *offset = param_offset(a);
    return AL_OK;
}

/* The cached (or now computed) singular values of one head's matrix kind. A Q or K projection
 * alone where QK fusion is refused (full RoPE, Q/K norm) is computed here: *own holds it then
 * (the caller frees it with spectrum_free; NULL otherwise). */
static int head_spectrum(Session *s, int mk, int layer, int head, int offset, const Spectrum **out,
                         Spectrum **own) {
    FarrState *st;
    const FarrLayer *fl;
    int side;
    farr_kind kind = mat_pair(mk, &side);
    Mat *W = NULL;
    *own = NULL;
    if (kind == FARR_QK && side != 2 && farr_side_alone(s->cur, side, layer, head, offset, &W)) return AL_ERR;
    if (W) {
        int rc = spectra_svd(W, 0, own);
        mat_free(W);
        if (rc == AL_OK && !(*own)->p) {
            spectrum_free(*own);
            *own = NULL;
            return al_err("%s of layer %d head %d has no singular values", mat_label(mk), layer, head);
        }
        *out = *own;
        return rc;
    }
    if (ws_farr(s, &st)) return AL_ERR;
    int rc = farr_state_layer(st, s->cur, kind, layer, offset, &fl);
    if (rc) return rc;
    if (head < 0 || head >= fl->n_heads)
        return al_err("head %d is out of range: layer %d has %d head%s (0-%d)", head, layer, fl->n_heads,
                      al_s(fl->n_heads), fl->n_heads - 1);
    Spectrum *const *arr = side == 0 ? fl->a : side == 1 ? fl->b : fl->fused;
    if (!arr || !arr[head] || !arr[head]->p)
        return al_err("%s of layer %d head %d has no singular values", mat_label(mk), layer, head);
    *out = arr[head];
    return AL_OK;
}

/* The matrix kind, layer, head and offset a spectrum or energy figure names, and that spectrum
 * (*own: see head_spectrum). */
static int named_spectrum(Session *s, const Args *a, int *mk, int *layer, int *head, int *offset, const Spectrum **sp,
                          Spectrum **own) {
    *own = NULL;
    *mk = args_enum(a, "kind");
    if (head_args(a, layer, head, offset)) return AL_ERR;
    return head_spectrum(s, *mk, *layer, *head, *offset, sp, own);
}

/* Title and subtitle of a per-head figure. */
static void head_titles(const Session *s, int mk, int layer, int head, int offset, const Spectrum *sp,
                        const char *what, char *title, size_t tcap, char *sub, size_t scap) {
    snprintf(title, tcap, "%s layer %d head %d: %s of %s", s->cur->name ? s->cur->name : "model", layer, head,
             what, mat_label(mk));
    int n = snprintf(sub, scap, "%zu x %zu map, %zu singular value%s", sp->m, sp->n, sp->p, al_s(sp->p));

    char dims[128];
    if ((mk == M_Q || mk == M_K || mk == M_QK) && farr_qk_dims(&s->cur->cfg, dims, sizeof dims) && n > 0 &&
        (size_t)n < scap)
        n += snprintf(sub + n, scap - (size_t)n, "; %s", dims);     /* partial rotary: which dims */
    if (offset != FARR_NO_OFFSET && n > 0 && (size_t)n < scap)
        snprintf(sub + n, scap - (size_t)n, "; K rotated by RoPE at position %d (analysis only)", offset);
}

/* ================================================================ plot spectrum / energy */

static const char SPECTRUM_HELP[] =
    "Singular values of one head's matrix against their index (seed 000, 1.3): KIND is q, k, v\n"
    "or o (one projection) or qk, vo (the fused pair W_Q W_Kᵀ, W_V W_O). For GQA, k and v are\n"
    "the KV head that query head H reads. q and k work on every model: on full-RoPE models\n"
    "(Llama, Mistral, Qwen2) they are the whole projection (RoPE rotates its output); only the\n"
    "fused qk needs the NoPE part or `offset D`. `log` draws sigma on a log axis (its default\n"
    "file name ends in -log). The spectra come from the FaRR cache (computed once per layer, as\n"
    "`ranks` does).\n"
    "Examples:\n"
    "  plot spectrum q layer 3 head 5 log\n"
    "  plot spectrum vo layer 2 head 0 to figs/vo_2_0.svg";

static const char ENERGY_HELP[] =
    "The spectrum of one head's matrix (left axis) overlaid with its cumulative energy\n"
    "sum_{j<=i} sigma_j^2 / sum sigma^2 (right axis), with the tau = 0.99 and 0.999 points (and\n"
    "the session tau, if different) marked and their effective ranks written (seed 000, 1.4).\n"
    "The right axis is 1 - energy on a log scale by default (`scale log`): on an energy axis\n"
    "0..1 the tau = 0.99 and 0.999 points sit 0.9% of the height apart on one flat top, on\n"
    "log(1 - energy) a decade apart, each mark on its own tau line. `scale linear` draws energy\n"
    "0..1 (marks at one rank as concentric rings; file name ending in -linear).\n"
    "Examples:\n"
    "  plot energy q layer 3 head 5\n"
    "  plot energy vo layer 1 head 0 scale linear\n"
    "  plot energy qk layer 1 head 2 to qk_energy.pdf";

static const Param kind_pos[] = {
    { .name = "kind", .type = ARG_ENUM, .choices = MAT_CHOICES, .comp = COMP_CHOICES,
      .help = "the head's matrix: q, k, v, o, or the fused qk / vo" },
    {0}
};

static const Param spectrum_kw[] = {
    { .name = "layer", .type = ARG_INT, .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "head", .type = ARG_INT, .comp = COMP_HEADS, .metavar = "H", .help = "query head number" },
    { .name = "log", .type = ARG_FLAG, .comp = COMP_NONE, .help = "sigma on a log axis" },
    PARAM_OFFSET,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

static const char *const SCALE_CHOICES[] = {"log", "linear", NULL};

static const Param energy_kw[] = {
    { .name = "layer", .type = ARG_INT, .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "head", .type = ARG_INT, .comp = COMP_HEADS, .metavar = "H", .help = "query head number" },
    { .name = "log", .type = ARG_FLAG, .comp = COMP_NONE, .help = "sigma on a log axis" },
    { .name = "scale", .type = ARG_ENUM, .flags = PF_VIEW, .choices = SCALE_CHOICES, .def = "log",
      .comp = COMP_CHOICES, .help = "right axis: 1 - energy on a log scale (log), or energy 0..1 (linear)" },
    PARAM_OFFSET,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

static int cmd_plot_spectrum(Session *s, const Args *a, Out *out) {
    int layer, head, offset, mk;
    const Spectrum *sp;
    Spectrum *own;
    int rc = named_spectrum(s, a, &mk, &layer, &head, &offset, &sp, &own);
    if (rc) return rc;
    char title[256], sub[256], auto_name[256];
    head_titles(s, mk, layer, head, offset, sp, "singular values", title, sizeof title, sub, sizeof sub);
    snprintf(auto_name, sizeof auto_name, "%s-spectrum-%s-L%d-H%d%s", s->cur->name, MAT_CHOICES[mk], layer, head,
             args_flag(a, "log") ? "-log" : "");
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { spectrum_free(own); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    d.o.logy = args_flag(a, "log");
    plot_dest_window_hint(out, &d);
    rc = plot_spectrum(&d.o, sp->sigma, sp->p);
    spectrum_free(own);
    return plot_dest_done(out, &d, rc);
}

static int cmp_mark(const void *x, const void *y) {
    double a = ((const PlotTauMark *)x)->tau, b = ((const PlotTauMark *)y)->tau;
    return (a > b) - (a < b);
}

static int energy_figure(Session *s, const Args *a, Out *out, int mk, int layer, int head, int offset,
                         const Spectrum *sp);

static int cmd_plot_energy(Session *s, const Args *a, Out *out) {
    int layer, head, offset, mk;
    const Spectrum *sp;
    Spectrum *own;
    int rc = named_spectrum(s, a, &mk, &layer, &head, &offset, &sp, &own);
    if (rc) return rc;
    rc = energy_figure(s, a, out, mk, layer, head, offset, sp);
    spectrum_free(own);
    return rc;
}

/* The energy figure of one spectrum (plot energy). */
static int energy_figure(Session *s, const Args *a, Out *out, int mk, int layer, int head, int offset,
                         const Spectrum *sp) {
    int rc;
    double *energy = al_malloc3(sp->p, 1, sizeof(double), "cumulative energy");
    if (!energy) return AL_ERR;
    spectra_cum_energy(sp->sigma, sp->p, energy);
    if (energy[sp->p - 1] <= 0) {
        free(energy);
        return al_err("%s of layer %d head %d is a zero map: it has no energy to plot", mat_label(mk), layer, head);
    }
    /* tau = 0.99 and 0.999, and the session tau when it is neither. */
    PlotTauMark marks[3];
    size_t nm = 0;
    double taus[3] = {0.99, 0.999, s->tau};
    for (int k = 0; k < 3; k++) {
        if (k == 2 && (fabs(s->tau - 0.99) < 1e-12 || fabs(s->tau - 0.999) < 1e-12)) continue;
        size_t r = spectra_effective_rank(sp->sigma, sp->p, taus[k]);
        marks[nm++] = (PlotTauMark){taus[k], r ? r : 1};
    }
    qsort(marks, nm, sizeof marks[0], cmp_mark);
    char title[256], sub[256], auto_name[256];
    head_titles(s, mk, layer, head, offset, sp, "energy", title, sizeof title, sub, sizeof sub);
    bool linear = !strcmp(args_str(a, "scale"), "linear");
    snprintf(auto_name, sizeof auto_name, "%s-energy-%s-L%d-H%d%s%s", s->cur->name, MAT_CHOICES[mk], layer, head,
             args_flag(a, "log") ? "-log" : "", linear ? "-linear" : "");
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { free(energy); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    d.o.logy = args_flag(a, "log");
    d.o.residual = !linear;
    for (size_t k = 0; k < nm; k++)
        out_printf(out, "effective rank at tau = %g: %zu of %zu\n", marks[k].tau, marks[k].rank, sp->p);
    plot_dest_window_hint(out, &d);
    rc = plot_energy(&d.o, sp->sigma, energy, sp->p, marks, nm);
    free(energy);
    return plot_dest_done(out, &d, rc);
}

/* ================================================================ rank tables of layers */

/* Effective ranks of layers lo..hi of one pair at tau, as PlotLayerRanks over one allocation. */
typedef struct {
    size_t n;                  /* layers */
    PlotLayerRanks *layers;    /* (n) */
    int *ranks;                /* (n, 3, n_heads) backing store */
    int head_dim;
} RankSet;

static void rankset_free(RankSet *r) {
    free(r->layers);
    free(r->ranks);
    memset(r, 0, sizeof *r);
}

/* Fills r from the FaRR cache of q's model and layers at tau (computing missing layers with
 * progress and Ctrl-C). */
static int rankset_build(Session *s, const FarrQuery *q, double tau, RankSet *r) {
    FarrState *st;
    memset(r, 0, sizeof *r);
    if (ws_farr(s, &st)) return AL_ERR;
    int rc = farr_state_sweep(st, q);
    if (!rc) rc = farr_state_certify(st, q, tau);
    if (rc) return rc;
    const ModelConfig *c = &q->m->cfg;
    size_t n = (size_t)layersel_count(c, q->lo, q->hi), nh = (size_t)c->n_heads, cells;
    if (!al_mul_ok(n, 3 * nh, &cells, "rank table")) return AL_ERR;
    r->layers = al_calloc(n, sizeof *r->layers, "rank table");
    r->ranks = al_malloc3(cells, 1, sizeof(int), "rank table");
    if (!r->layers || !r->ranks) { rankset_free(r); return AL_ERR; }
    r->n = n;
    size_t i = 0;
    for (int L = layersel_next(c, q->lo, q->hi); L <= q->hi; L = layersel_next(c, L + 1, q->hi), i++) {
        const FarrLayer *fl = farr_state_get_layer(st, q->m, q->kind, L, q->offset);
        if (!fl) { rankset_free(r); return al_err("layer %d: no spectra in the FaRR cache", L); }
        int *ra = r->ranks + i * 3 * nh, *rb = ra + nh, *rf = rb + nh;
        size_t h_n = (size_t)fl->n_heads < nh ? (size_t)fl->n_heads : nh;
        for (size_t h = 0; h < h_n; h++) farr_layer_ranks(fl, (int)h, tau, &ra[h], &rb[h], &rf[h]);
        r->layers[i] = (PlotLayerRanks){.layer = fl->layer, .n_heads = h_n, .rank_a = ra, .rank_b = rb, .rank_fused = rf};
        if (fl->head_dim > r->head_dim) r->head_dim = fl->head_dim;
    }
    return AL_OK;
}

static PlotRanksInfo ranks_info(const Session *s, farr_kind kind, double tau, int head_dim) {
    return (PlotRanksInfo){.model = s->cur->name, .name_a = farr_side_name(kind, 0), .name_b = farr_side_name(kind, 1),
                           .name_fused = farr_fused_name(kind), .tau = tau, .head_dim = head_dim};
}

typedef enum { RANKS_ONE, RANKS_GRID, RANKS_BY_LAYER } ranks_figure;

/* Builds the ranks of layers lo..hi at tau and draws them as fig into the plot destination. */
static int draw_ranks(Session *s, const Args *a, Out *out, farr_kind kind, int lo, int hi, double tau,
                      ranks_figure fig, const char *which, const char *auto_name) {
    RankSet r;
    FarrQuery q = { .m = s->cur, .kind = kind, .lo = lo, .hi = hi, .offset = param_offset(a) };
    int rc = rankset_build(s, &q, tau, &r);
    if (rc) return rc;
    PlotRanksInfo info = ranks_info(s, kind, tau, r.head_dim);
    info.by_head = fig != RANKS_BY_LAYER && !strcmp(args_str(a, "order"), "head");
    info.normalize = fig == RANKS_BY_LAYER && args_flag(a, "normalize");
    char note[512];
    long rl = lo, rh = hi;                  /* the range asked for, before its narrowing to attention layers */
    if (args_range(a, which, s->cur->cfg.n_layers, &rl, &rh)) rl = lo, rh = hi;
    if (fig != RANKS_ONE && layersel_note(&s->cur->cfg, (int)rl, (int)rh, "drawing", note, sizeof note) && note[0]) {
        info.layers_note = note;            /* a hybrid: which layers the figure shows */
        info.shade_gaps = true;
        info.has_span = true;
        info.span[0] = (int)rl;
        info.span[1] = (int)rh;
    }
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { rankset_free(&r); return AL_ERR; }
    plot_dest_window_hint(out, &d);
    if (fig == RANKS_ONE) rc = plot_ranks(&d.o, &info, &r.layers[0]);
    else if (fig == RANKS_GRID) rc = plot_ranks_grid(&d.o, &info, r.layers, r.n);
    else rc = plot_ranks_by_layer(&d.o, &info, r.layers, r.n);
    rankset_free(&r);
    return plot_dest_done(out, &d, rc);
}

/* The layer range of a rank plot: `layer L` (one layer, or `layer all`), `layers A-B`, or the
 * positional range (`8`, `0-15`, `all`, default all). *single when one layer was named. */
/* Which argument names a rank plot's layers: `layer`, `layers` or the positional range. */
static const char *ranks_which(const Args *a) {
    return args_given(a, "layer") ? "layer" : args_given(a, "layers") ? "layers" : "range";
}

static int ranks_scope(Session *s, const Args *a, Out *out, int *lo, int *hi, bool *single) {
    long l, h;
    const char *which = ranks_which(a);
    if (param_layers(out, a, which, s->cur, &l, &h)) return AL_ERR;
    *lo = (int)l;
    *hi = (int)h;
    *single = !args_all(a, which) && l == h && strcmp(which, "layers") != 0;
    return AL_OK;
}

/* ================================================================ plot vo-ranks / qk-ranks */

static const char RANKS_HELP[] =
    "Effective ranks of one layer's heads (seed 000, 2.3): x = heads sorted by their fused rank,\n"
    "the V (Q) and O (K) ranks as dots of two colours, the fused rank as a line, y from 0 to\n"
    "the head dim. With more than one layer (`all`, `layers A-B`, or no layer at all) it draws\n"
    "the model-wide grid of 2.4, one small panel per layer. Ranks are at the session tau unless\n"
    "`tau` is given; the spectra come from the FaRR cache (missing layers are computed once,\n"
    "with progress, and Ctrl-C keeps the finished ones). Sorted by rank, a one-layer figure labels\n"
    "each position with its head id (every k-th past 48 heads); `order head` puts the heads in model\n"
    "order instead (x = head id), in one layer or the grid.\n"
    "Examples:\n"
    "  plot vo-ranks layer 2\n"
    "  plot vo-ranks layer 2 order head\n"
    "  plot qk-ranks all to figs/qk_grid.png\n"
    "  plot vo-ranks layers 0-3 tau 0.99";

static const Param ranks_pos[] = {
    { .name = "range", .type = ARG_RANGE, .def = "all", .comp = COMP_LAYERS,
      .help = "a layer, a range A-B, or all (the grid)" },
    {0}
};

static const char *const ORDER_CHOICES[] = {"rank", "head", NULL};

static const Param ranks_kw[] = {
    { .name = "layer", .type = ARG_INT, .flags = PF_ALL, .comp = COMP_LAYERS, .metavar = "L|all",
      .help = "one layer (or all: the grid)" },
    PARAM_LAYERS_OPT("the grid of layers A-B"),
    { .name = "order", .type = ARG_ENUM, .flags = PF_VIEW, .choices = ORDER_CHOICES,
      .def = "rank", .comp = COMP_CHOICES,
      .help = "x: heads sorted by fused rank (labelled with their ids), or in head order" },
    PARAM_TAU,
    PARAM_OFFSET,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

static int cmd_plot_ranks(Session *s, const Args *a, Out *out) {
    farr_kind kind = !strcmp(a->cmd->name, "qk-ranks") ? FARR_QK : FARR_VO;
    double tau = param_tau(s, a);
    int lo, hi;
    bool single;
    if (ranks_scope(s, a, out, &lo, &hi, &single)) return AL_ERR;
    char auto_name[256];
    if (single)
        snprintf(auto_name, sizeof auto_name, "%s-%s-ranks-L%d", s->cur->name, farr_kind_name(kind), lo);
    else
        snprintf(auto_name, sizeof auto_name, "%s-%s-ranks-L%d-%d", s->cur->name, farr_kind_name(kind), lo, hi);
    return draw_ranks(s, a, out, kind, lo, hi, tau, single ? RANKS_ONE : RANKS_GRID, ranks_which(a), auto_name);
}

/* ================================================================ plot ranks-by-layer */

static const char BYLAYER_HELP[] =
    "Per-layer minimum, median and maximum fused effective rank against depth, the min..max\n"
    "band shaded. The maximum is the uniform rank a per-layer truncation must keep (heads of a\n"
    "layer share one size in attention kernels), so this is where FaRR can and cannot pay.\n"
    "`models A,B,C` draws several models in one figure, one curve per model of the per-layer\n"
    "`stat` (max by default; median, min): models are loaded names or anything `load` takes,\n"
    "loaded as needed without switching the session's model; each model has its own marker shape\n"
    "and dash, so curves that coincide stay apart. `normalize` divides ranks by the head dim (y\n"
    "0..1), so models with different head dims compare.\n"
    "Examples:\n"
    "  plot ranks-by-layer vo\n"
    "  plot ranks-by-layer vo models demo-r1,demo-llama stat median\n"
    "  plot ranks-by-layer vo models demo-r1,demo-gpt2 normalize\n"
    "  plot ranks-by-layer qk layers 0-20 tau 0.99 to qk_depth.pdf";


static const Param bylayer_pos[] = {
    PARAM_PAIR,
    {0}
};

static const char *const STAT_CHOICES[] = {"min", "median", "max", NULL};

static const Param bylayer_kw[] = {
    PARAM_LAYERS("layers A-B"),
    { .name = "models", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "A,B,...",
      .help = "several models side by side (names or anything `load` takes), none switched to" },
    { .name = "stat", .type = ARG_ENUM, .choices = STAT_CHOICES, .def = "max", .comp = COMP_CHOICES,
      .help = "with models: the per-layer statistic drawn (min, median or max over heads)" },
    { .name = "normalize", .type = ARG_FLAG, .flags = PF_VIEW, .comp = COMP_NONE,
      .help = "ranks divided by each model's head dim (0..1), so models of different head dims compare" },
    PARAM_TAU,
    PARAM_OFFSET,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

#define MODELS_MAX 16

/* Appends to note (at *len) "M: attention layers 1, 4 only (the others: Mamba-2 (SSM))" when
 * model m's layers lo..hi (the range asked for) are not all attention. */
static void hybrid_note(const Model *m, int lo, int hi, char *note, size_t cap, size_t *len) {
    if (layersel_count(&m->cfg, lo, hi) == hi - lo + 1 || *len >= cap) return;
    char list[256];
    int k = snprintf(note + *len, cap - *len, "%s%s: attention layers %s only (the others: %s)", *len ? "; " : "",
                     m->name, layersel_text(&m->cfg, lo, hi, list, sizeof list), layersel_other_kind(&m->cfg));
    *len += k > 0 ? (size_t)k : 0;
}

/* Ranks of each named model (comma-separated) for the side-by-side figure. */
static int bylayer_models(Session *s, const Args *a, Out *out, farr_kind kind, double tau) {
    char *list = al_strdup(args_str(a, "models")), *save = NULL, names[512] = "", note[512] = "";
    size_t note_len = 0;
    RankSet r[MODELS_MAX];
    PlotRanksModel pm[MODELS_MAX];
    size_t n = 0, len = 0;
    int rc = list ? AL_OK : AL_ERR;
    for (char *w = list ? strtok_r(list, ",", &save) : NULL; w && !rc; w = strtok_r(NULL, ",", &save)) {
        Model *m;
        long lo, hi;
        if (n == MODELS_MAX) { rc = al_err("%s: at most %d models in one figure", a->path, MODELS_MAX); break; }
        if ((rc = session_model_aside(s, w, &m)) || (rc = param_layers(out, a, "layers", m, &lo, &hi))) break;
        FarrQuery q = { .m = m, .kind = kind, .lo = (int)lo, .hi = (int)hi, .offset = FARR_NO_OFFSET };
        if ((rc = rankset_build(s, &q, tau, &r[n]))) break;
        pm[n] = (PlotRanksModel){.model = m->name, .layers = r[n].layers, .n_layers = r[n].n, .head_dim = r[n].head_dim};
        long rl = lo, rh = hi;              /* the range asked for, before its narrowing */
        if (args_range(a, "layers", m->cfg.n_layers, &rl, &rh)) rl = lo, rh = hi;
        hybrid_note(m, (int)rl, (int)rh, note, sizeof note, &note_len);
        len += (size_t)snprintf(names + len, len < sizeof names ? sizeof names - len : 0, "%s%s", n ? "-" : "", m->name);
        n++;
    }
    free(list);
    if (!rc && n < 2) rc = al_err("%s: `models` takes two or more names separated by commas, e.g. models demo-r1,demo-llama", a->path);
    char auto_name[700];
    snprintf(auto_name, sizeof auto_name, "%s-ranks-by-layer-%s-%s%s", farr_kind_name(kind), args_str(a, "stat"), names,
             args_flag(a, "normalize") ? "-norm" : "");
    PlotDest d;
    if (!rc && !(rc = plot_dest_init(s, a, auto_name, &d))) {
        PlotRanksInfo info = ranks_info(s, kind, tau, 0);
        info.normalize = args_flag(a, "normalize");
        info.layers_note = note[0] ? note : NULL;
        plot_dest_window_hint(out, &d);
        rc = plot_dest_done(out, &d, plot_ranks_by_layer_models(&d.o, &info, pm, n, (plot_rank_stat)args_enum(a, "stat")));
    }
    for (size_t k = 0; k < n; k++) rankset_free(&r[k]);
    return rc;
}

static int cmd_plot_ranks_by_layer(Session *s, const Args *a, Out *out) {
    farr_kind kind = param_pair(a);
    double tau = param_tau(s, a);
    long lo, hi;
    if (args_given(a, "models")) {
        if (args_given(a, "offset")) return al_err("%s: offset is for one model's qk, not for `models`", a->path);
        return bylayer_models(s, a, out, kind, tau);
    }
    if (param_layers(out, a, "layers", s->cur, &lo, &hi)) return AL_ERR;
    char auto_name[256];
    snprintf(auto_name, sizeof auto_name, "%s-%s-ranks-by-layer%s", s->cur->name, farr_kind_name(kind),
             args_flag(a, "normalize") ? "-norm" : "");
    return draw_ranks(s, a, out, kind, (int)lo, (int)hi, tau, RANKS_BY_LAYER, "layers", auto_name);
}

/* ================================================================ plot heatmap */

static const char HEATMAP_HELP[] =
    "A head's matrix as a heatmap, blue < 0 < red with white at 0 (seed 000, 1.3). Without\n"
    "`factor`, the matrix itself (for qk / vo the fused map, formed for display only). With\n"
    "`factor`, its SVD W = U diag(sigma) Vt: `a` is Uᵀ (one row per singular direction, the\n"
    "directions W reads from), `b` is Vt (the directions it writes to), `scaled` is\n"
    "diag(sigma) Vt -- rows of small sigma fade to white, which is what truncation drops.\n"
    "Large matrices are pooled to the figure (largest |entry| per block).\n"
    "Examples:\n"
    "  plot heatmap q layer 3 head 5 factor b\n"
    "  plot heatmap q layer 3 head 5 factor scaled\n"
    "  plot heatmap vo layer 2 head 0 to vo.png";

static const char *const FACTOR_CHOICES[] = {"a", "b", "scaled", NULL};

static const Param heatmap_kw[] = {
    { .name = "layer", .type = ARG_INT, .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "head", .type = ARG_INT, .comp = COMP_HEADS, .metavar = "H", .help = "query head number" },
    { .name = "factor", .type = ARG_ENUM, .choices = FACTOR_CHOICES, .comp = COMP_CHOICES,
      .help = "an SVD factor instead of the matrix: a (Uᵀ), b (Vt) or scaled (diag(sigma) Vt)" },
    PARAM_OFFSET,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

/* rows x cols float matrix from a row-major double array, transposed when `t` (display copy). */
static Mat *mat_from_d(const double *v, size_t rows, size_t cols, bool t, const double *row_scale) {
    Mat *m = t ? mat_new(cols, rows) : mat_new(rows, cols);
    if (!m) return NULL;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double x = v[i * cols + j] * (row_scale ? row_scale[i] : 1.0);
            if (t) *mat_at(m, j, i) = (float)x;
            else *mat_at(m, i, j) = (float)x;
        }
    return m;
}

/* The matrix a heatmap shows: the head's matrix (fused: A @ op(B)), or an SVD factor. */
static int heatmap_matrix(Session *s, int mk, int layer, int head, int offset, int factor, Mat **out,
                          char *what, size_t wcap) {
    int side;
    farr_kind kind = mat_pair(mk, &side);
    Mat *A = NULL, *B = NULL, *W = NULL;
    spectra_op op = SPECTRA_AB;
    int rc = AL_OK;
    /* q / k alone where QK fusion is refused: the whole projection stands in for the factor. */
    if (kind == FARR_QK && side != 2 && farr_side_alone(s->cur, side, layer, head, offset, side == 0 ? &A : &B))
        return AL_ERR;
    if (!A && !B) rc = farr_head_factors(s->cur, kind, layer, head, offset, &A, &B, &op);
    if (rc) return rc;
    if (side == 2) {
        if (factor < 0) {
            Mat *Bt = op == SPECTRA_ABT ? mat_transpose(B) : NULL;
            W = mat_mul(A, Bt ? Bt : B);
            mat_free(Bt);
            if (!W) rc = AL_ERR;
            snprintf(what, wcap, "%s", mat_label(mk));
        } else {
            Spectrum *sp = NULL;
            rc = spectra_product_svd(A, B, op, SPECTRA_VECTORS, &sp, NULL, NULL);
            if (!rc) {
                W = factor == 0 ? mat_from_d(sp->U, sp->m, sp->p, true, NULL)
                                : mat_from_d(sp->Vt, sp->p, sp->n, false, factor == 2 ? sp->sigma : NULL);
                if (!W) rc = AL_ERR;
            }
            spectrum_free(sp);
        }
    } else {
        Mat *one = side == 0 ? A : B;
        if (factor < 0) {
            W = one;
            if (side == 0) A = NULL; else B = NULL;
            snprintf(what, wcap, "%s", mat_label(mk));
        } else {
            Spectrum *sp = NULL;
            rc = spectra_svd(one, SPECTRA_VECTORS, &sp);
            if (!rc) {
                W = factor == 0 ? mat_from_d(sp->U, sp->m, sp->p, true, NULL)
                                : mat_from_d(sp->Vt, sp->p, sp->n, false, factor == 2 ? sp->sigma : NULL);
                if (!W) rc = AL_ERR;
            }
            spectrum_free(sp);
        }
    }
    if (factor >= 0) {
        static const char *const fn[] = {"Uᵀ (read directions)", "Vt (write directions)", "diag(σ) Vt"};
        snprintf(what, wcap, "%s of %s", fn[factor], mat_label(mk));
    }
    mat_free(A);
    mat_free(B);
    if (rc) { mat_free(W); return rc; }
    *out = W;
    return AL_OK;
}

static int cmd_plot_heatmap(Session *s, const Args *a, Out *out) {
    int layer, head, offset, mk = args_enum(a, "kind"), factor = args_enum(a, "factor");
    if (head_args(a, &layer, &head, &offset)) return AL_ERR;
    Mat *W = NULL;
    char what[128];
    int rc = heatmap_matrix(s, mk, layer, head, offset, factor, &W, what, sizeof what);
    if (rc) return rc;
    char title[256], sub[256], auto_name[256];
    snprintf(title, sizeof title, "%s layer %d head %d: %s", s->cur->name, layer, head, what);
    snprintf(sub, sizeof sub, "%zu x %zu", W->rows, W->cols);
    snprintf(auto_name, sizeof auto_name, "%s-heatmap-%s%s%s-L%d-H%d", s->cur->name, MAT_CHOICES[mk],
             factor >= 0 ? "-" : "", factor >= 0 ? FACTOR_CHOICES[factor] : "", layer, head);
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) { mat_free(W); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    /* Rows and columns in the head's terms: W is (input dims x output dims). */
    d.o.ylabel = factor < 0 ? "input dimension (row of W)" : "singular direction i (largest σ first)";
    d.o.xlabel = factor == 0 ? "input dimension (row of W)" : "output dimension (column of W)";
    plot_dest_window_hint(out, &d);
    rc = plot_heatmap(&d.o, W);
    mat_free(W);
    return plot_dest_done(out, &d, rc);
}

/* ================================================================ the table */

static const char PLOT_HELP[] =
    "Figures of the analyses, drawn from the session's computed results (FaRR spectra and ranks,\n"
    "TransMLA statistics, KQ-SVD errors, the one-budget comparison); `help plot SUB` for each.\n"
    "KIND is q, k, v, o, qk or vo. `to FILE.png|.svg|.pdf` writes a file (its folder is made;\n"
    "a name without extension gets plot.format). Without `to`: a window when the session is\n"
    "interactive and there is a display (or with `window`), else a file in plot.dir named\n"
    "after the figure; the path is printed and is the result (attn.plot returns it).\n"
    "Every figure takes title, xlabel, ylabel and size; logx, logy, xrange A:B and yrange A:B where\n"
    "its axes can (xy and the figures of curves all four; spectrum, energy, ranks-by-layer, one\n"
    "layer's ranks some; on a heatmap the ranges crop it; an error names the one refused). `replot` redraws the last figure\n"
    "with changes; `plot xy` / `plot matrix` draw data you computed (CSV or Lua tables), `plot\n"
    "panels CxR` several figures on one page.\n"
    "Settings: set plot.size WxH, set plot.dir DIR, set plot.format png|svg|pdf.";

static const Command plot_subs[] = {
    { .name = "spectrum", .summary = "singular values of one head's matrix", .help = SPECTRUM_HELP,
      .pos = kind_pos, .kw = spectrum_kw, .fn = cmd_plot_spectrum, .flags = CMD_MODEL },
    { .name = "energy", .summary = "spectrum with cumulative energy and the tau = 0.99 / 0.999 ranks",
      .help = ENERGY_HELP, .pos = kind_pos, .kw = energy_kw, .fn = cmd_plot_energy, .flags = CMD_MODEL },
    { .name = "vo-ranks", .summary = "V, O and fused VO effective ranks: one layer or the grid",
      .help = RANKS_HELP, .pos = ranks_pos, .kw = ranks_kw, .fn = cmd_plot_ranks, .flags = CMD_MODEL },
    { .name = "qk-ranks", .summary = "Q, K and fused QK effective ranks: one layer or the grid",
      .help = RANKS_HELP, .pos = ranks_pos, .kw = ranks_kw, .fn = cmd_plot_ranks, .flags = CMD_MODEL },
    { .name = "heatmap", .summary = "a head's matrix or its SVD factors, diverging colours",
      .help = HEATMAP_HELP, .pos = kind_pos, .kw = heatmap_kw, .fn = cmd_plot_heatmap, .flags = CMD_MODEL },
    { .name = "ranks-by-layer", .summary = "min / median / max fused rank per layer against depth",
      .help = BYLAYER_HELP, .pos = bylayer_pos, .kw = bylayer_kw, .fn = cmd_plot_ranks_by_layer,
      .flags = CMD_MODEL },
    CMD_PLOT_MLA_SUBS,      /* key-norms, rope-energy: TransMLA figures (cmd_plot_mla.c) */
    CMD_PLOT_KVSVD_SUBS,    /* kvsvd-errors, kvsvd-unbalance: KQ-SVD figures (cmd_plot_kvsvd.c) */
    CMD_PLOT_COMPARE_SUBS,  /* compare, compare-budgets: every method at one KV budget (cmd_plot_compare.c) */
    CMD_PLOT_ESD_SUBS,      /* esd: a head's spectral density with its power-law fit (cmd_plot_esd.c) */
    CMD_PLOT_ATTEND_SUBS,   /* attention, head-importance: a head on real text (cmd_plot_attend.c) */
    CMD_PLOT_XY_SUBS,       /* xy, matrix, panels: data the user computed, several figures (cmd_plot_xy.c) */
    {0}
};

static const Command plot_cmds[] = {
    { .name = "plot", .summary = "figures: spectra, energy, rank plots and grids, heatmaps, key norms",
      .returns = "the figure's path (a string; \"window\" when it was shown in a window)",
      .help = PLOT_HELP, .sub = plot_subs },    /* each figure of a model says CMD_MODEL itself */
    CMD_REPLOT,             /* the last figure again, changed (cmd_plot_xy.c) */
    {0}
};

const CommandGroup cmd_group_plot = { .title = "Figures", .cmds = plot_cmds };
