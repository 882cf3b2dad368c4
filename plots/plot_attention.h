/* plot_attention.h -- what a head does on real text, drawn (plots/plot_attention.c): attention
 * patterns with token strings on both axes (side by side before / after a transformation), and head
 * importance (perplexity with a head removed) beside each head's fused rank. Options and
 * destinations as every figure (plot.h). */
#ifndef AL_PLOT_ATTENTION_H
#define AL_PLOT_ATTENTION_H

#include "plot.h"

/* One panel: a head's weights P (T, T) row-major (row i: query i over keys 0..T-1), and its title. */
typedef struct {
    const char *label;
    const float *P;
} PlotAttnPanel;

/* n panels (1..3) side by side: queries top to bottom, keys left to right, each token's string along
 * both axes (every k-th beyond 64 tokens; beyond 400 tokens the cells are pooled, each keeping its
 * block's largest weight, said in the subtitle); one sequential colour scale from 0 to the largest
 * weight of any panel, with its colour bar. tokens: T label strings (shown as given, '#' escaped). */
int plot_attention(const PlotOpts *opts, const PlotAttnPanel *panels, size_t n, size_t T, const char *const *tokens);

/* Head importance of n_layers layers: delta[l * n_heads + h] the perplexity with head h of layers[l]
 * removed minus the intact model's; rank (same layout, or NULL) each head's fused VO rank. */
typedef struct {
    size_t n_layers, n_heads;
    const int *layers;        /* (n_layers) layer numbers */
    const double *delta;      /* (n_layers, n_heads) */
    const int *rank;          /* (n_layers, n_heads) or NULL */
    int rank_cap;             /* the rank axis' top (the head dim) */
    const char *rank_name;    /* "VO rank (tau 0.99)" */
} PlotHeadImportance;

/* One layer: two panels over the heads, delta ppl as bars (a zero line; negative deltas drawn down)
 * above the fused rank as bars. Several layers: two grids side by side (layers down, heads across),
 * delta ppl in a diverging colour map centred on 0 and the rank in a sequential one. */
int plot_head_importance(const PlotOpts *opts, const PlotHeadImportance *d);

#endif
