/* cmd_plot_mla.c -- the TransMLA figures: `plot key-norms` (Figure 3a) and `plot rope-energy`
 * (Figure 3b, weight-based), data from core/transmla.h, drawn by plots/ (plot_key_norms,
 * plot_curves). Where a figure goes follows `plot`: `to FILE`, `window`, else a file in plot.dir
 * named after the figure; the path is printed and is the result. */
#define _GNU_SOURCE
#include "cmd_plot_mla.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"
#include "session.h"
#include "transmla.h"

/* ================================================================ where figures go */

typedef struct {
    PlotOpts o;
    char *path;               /* owned; NULL for a window */
} MlaDest;

static bool has_ext(const char *p) {
    const char *slash = strrchr(p, '/'), *dot = strrchr(p, '.');
    return dot && (!slash || dot > slash) && dot[1];
}

/* The figure's destination (as `plot` decides it); auto_name names the file in plot.dir. */
static int dest_init(Session *s, const Args *a, const char *auto_name, MlaDest *d) {
    memset(d, 0, sizeof *d);
    d->o.width = s->plot_w;
    d->o.height = s->plot_h;
    const char *fmt = s->plot_fmt && *s->plot_fmt ? s->plot_fmt : "png";
    const char *to = args_str(a, "to");
    if (to && *to) d->path = has_ext(to) ? al_strdup(to) : al_asprintf("%s.%s", to, fmt);
    else if (args_flag(a, "window") || (s->interactive && plot_have_display())) { d->o.window = true; return AL_OK; }
    else {
        char name[256];
        size_t j = 0;
        for (const char *c = auto_name; *c && j + 1 < sizeof name; c++)
            name[j++] = isalnum((unsigned char)*c) || *c == '.' || *c == '-' || *c == '_' ? *c : '_';
        name[j] = 0;
        d->path = al_asprintf("%s/%s.%s", s->plot_dir && *s->plot_dir ? s->plot_dir : ".", name, fmt);
    }
    if (!d->path) return AL_ERR;
    d->o.path = d->path;
    return AL_OK;
}

static int dest_done(Out *out, MlaDest *d, int rc) {
    if (rc == AL_OK) {
        if (d->path) {
            out_printf(out, "wrote %s\n", d->path);
            out_string(out, d->path);
            out->written = true;
        } else
            out_string(out, "window");
    }
    free(d->path);
    d->path = NULL;
    return rc;
}

/* The largest of 4, 2, 1 dividing d/2 (the paper's 4D FreqFold where the head allows it). */
static int default_fold(const Model *m) {
    int d2 = (m->cfg.qk_nope_dim + m->cfg.qk_rope_dim) / 2;
    return d2 % 4 == 0 ? 4 : d2 % 2 == 0 ? 2 : 1;
}

/* ================================================================ plot key-norms */

const char CMD_PLOT_KEY_NORMS_HELP[] =
    "TransMLA Figure 3a for one layer: the norm of every dimension of the merged key head (all\n"
    "KV heads side by side), real halves of the RoPE pairs on top and imaginary halves below,\n"
    "for the original weights, after RoRoPE (one PCA rotation per frequency across the KV\n"
    "heads, the same for real and imaginary dims) and after RoRoPE + FreqFold M. Norms are\n"
    "weight-based: the RMS key under unit-variance inputs (row norm of the key projection).\n"
    "After RoRoPE the large norms gather in the first head's worth of dims (what keeps RoPE).\n"
    "Examples:\n"
    "  plot key-norms layer 0\n"
    "  plot key-norms layer 3 freqfold 2 to figs/keynorms.png";

const Param cmd_plot_key_norms_kw[] = {
    { .name = "layer", .type = ARG_INT, .def = "0", .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "freqfold", .type = ARG_INT, .min = 1, .max = 4096, .comp = COMP_NONE, .metavar = "M",
      .help = "adjacent RoPE frequencies per PCA (default 4, or the largest of 2, 1 dividing head dim / 2)" },
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write the figure to FILE.png, .svg or .pdf (no extension: plot.format)" },
    { .name = "window", .type = ARG_FLAG, .comp = COMP_NONE, .help = "show the figure in a window (needs a display)" },
    {0}
};

int cmd_plot_key_norms(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    int layer = (int)args_int(a, "layer"), M = args_given(a, "freqfold") ? (int)args_int(a, "freqfold") : default_fold(m);
    TmlaKeyNorms *k = NULL;
    int rc = tmla_key_norms(m, layer, M, NULL, &k);
    if (rc) return rc;
    char l3[64], title[256], sub[256], auto_name[256];
    snprintf(l3, sizeof l3, "RoRoPE + %dD FreqFold", M);
    PlotKeyNorms v[3] = {{"original", k->orig_re, k->orig_im}, {"RoRoPE", k->rot_re, k->rot_im},
                         {l3, k->fold_re, k->fold_im}};
    snprintf(title, sizeof title, "%s layer %d: key norm per dimension", m->name, layer);
    snprintf(sub, sizeof sub, "%d KV heads x %zu pairs, weight-based (unit-variance inputs); RoPE layout %s",
             m->cfg.n_kv_heads, k->pairs_per_head, rope_layout_name(m->cfg.rope));
    snprintf(auto_name, sizeof auto_name, "%s-key-norms-L%d-M%d", m->name, layer, M);
    MlaDest d;
    if (dest_init(s, a, auto_name, &d)) { tmla_key_norms_free(k); return AL_ERR; }
    d.o.title = title;
    d.o.subtitle = sub;
    d.o.xlabel = "key dimension pair of the merged head (heads side by side)";
    d.o.ylabel = "RMS key (real above, imaginary below)";
    if (d.o.window) out_printf(out, "showing the figure: press a key or click in its window to go on\n");
    rc = plot_key_norms(&d.o, v, 3, k->n_pairs, k->pairs_per_head);
    tmla_key_norms_free(k);
    return dest_done(out, &d, rc);
}

/* ================================================================ plot rope-energy */

const char CMD_PLOT_ROPE_ENERGY_HELP[] =
    "TransMLA Figure 3b, weight-based, for one layer: the fraction of the merged key's energy\n"
    "that the RoPE dims keep, against how many RoPE dims are kept. One curve per FreqFold M\n"
    "(k components of every group of M frequencies: k d / M dims), and a baseline without\n"
    "rotation that keeps, per frequency, the pairs of the k strongest KV heads (k d dims).\n"
    "The energy kept with M = 1 and one component per frequency (d dims) is what `convert mla`\n"
    "reports as rope energy; larger M keeps more at equal dims (Prop. 2) but moves frequencies.\n"
    "Examples:\n"
    "  plot rope-energy layer 0\n"
    "  plot rope-energy layer 5 freqfolds 1,2,4,8 to rope.svg";

const Param cmd_plot_rope_energy_kw[] = {
    { .name = "layer", .type = ARG_INT, .def = "0", .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" },
    { .name = "freqfolds", .type = ARG_STRING, .def = "1,2,4,8", .comp = COMP_NONE, .metavar = "M,M,...",
      .help = "FreqFold values, one curve each (those not dividing head dim / 2 are skipped)" },
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write the figure to FILE.png, .svg or .pdf (no extension: plot.format)" },
    { .name = "window", .type = ARG_FLAG, .comp = COMP_NONE, .help = "show the figure in a window (needs a display)" },
    {0}
};

int cmd_plot_rope_energy(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    int layer = (int)args_int(a, "layer"), d2 = (m->cfg.qk_nope_dim + m->cfg.qk_rope_dim) / 2;
    int Ms[16];
    size_t nM = 0;
    const char *list = args_str(a, "freqfolds");
    for (const char *p = list; p && *p && nM < 16;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1)
            return al_err("plot rope-energy: freqfolds '%s' must be positive numbers separated by commas (1,2,4)", list);
        if (d2 > 0 && d2 % v == 0) Ms[nM++] = (int)v;
        else out_printf(out, "freqfold %ld skipped: it does not divide the %d frequencies of a head\n", v, d2);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return al_err("plot rope-energy: freqfolds '%s': separate the values with commas", list);
    }
    if (nM == 0) return al_err("plot rope-energy: none of the freqfolds '%s' divides %d (head dim / 2)", list, d2);
    TmlaRopeEnergy *e = NULL;
    int rc = tmla_rope_energy(m, layer, Ms, nM, NULL, &e);
    if (rc) return rc;
    PlotCurve *cv = al_calloc(e->n_curves, sizeof *cv, "curves");
    char (*labels)[64] = al_calloc(e->n_curves, 64, "labels");
    if (!cv || !labels) { free(cv); free(labels); tmla_rope_energy_free(e); return AL_ERR; }
    for (size_t i = 0; i < e->n_curves; i++) {
        const TmlaRopeCurve *c = &e->curves[i];
        if (c->M == 0) snprintf(labels[i], 64, "no rotation (strongest KV heads)");
        else if (c->M == 1) snprintf(labels[i], 64, "RoRoPE");
        else snprintf(labels[i], 64, "RoRoPE + %dD FreqFold", c->M);
        cv[i] = (PlotCurve){.label = labels[i], .x = c->dims, .y = c->energy, .n = c->n, .points = true};
    }
    char title[256], sub[256], auto_name[256];
    snprintf(title, sizeof title, "%s layer %d: key energy kept in the RoPE dims", m->name, layer);
    snprintf(sub, sizeof sub, "merged key of %d KV heads x %d dims, weight-based (unit-variance inputs)",
             m->cfg.n_kv_heads, 2 * d2);
    snprintf(auto_name, sizeof auto_name, "%s-rope-energy-L%d", m->name, layer);
    MlaDest d;
    if (dest_init(s, a, auto_name, &d)) rc = AL_ERR;
    if (rc == AL_OK) {
        d.o.title = title;
        d.o.subtitle = sub;
        d.o.xlabel = "RoPE dims kept";
        d.o.ylabel = "fraction of key energy kept";
        if (d.o.window) out_printf(out, "showing the figure: press a key or click in its window to go on\n");
        rc = plot_curves(&d.o, cv, e->n_curves);
        rc = dest_done(out, &d, rc);
    }
    free(cv);
    free(labels);
    tmla_rope_energy_free(e);
    return rc;
}
