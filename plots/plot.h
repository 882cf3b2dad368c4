/* plot.h -- attnlab figures: PLplot renderers over COMPUTED data.
 *
 * Every renderer takes results that core/ (or the caller) already computed -- singular values,
 * cumulative energies, effective ranks, matrices, norms -- and draws one figure. None of them
 * reads a model or redoes the math; the only arithmetic here is presentation (sorting heads by
 * rank, min / median / max of given ranks, pooling a large matrix down to screen cells).
 *
 * Where a figure goes is PlotOpts: a file whose extension picks the device (.png -> pngcairo,
 * .svg -> svg (PLplot's own driver: text stays <text>, editable), .pdf -> pdfcairo; the folder
 * is made when missing, the file is written under a temporary name and renamed when complete, and a path that cannot be written is an error
 * before PLplot starts, never a prompt), or an interactive xcairo window (needs a reachable X
 * display, checked first; blocks until a key or a click in the window). Sizes are pixels for
 * PNG and windows, points for SVG and PDF; text keeps its size in pixels and scales with the
 * page relative to the figure's design size (1000 x 700). Errors go through al_err
 * (core/base/al.h); nothing here prints, PLplot's own messages are captured. PLplot is not
 * thread-safe: call renderers from one thread. */
#ifndef AL_PLOT_H
#define AL_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include "tensor.h"

#define PLOT_DEFAULT_WIDTH 1000
#define PLOT_DEFAULT_HEIGHT 700

/* ================================================================ options */

/* The overrides every figure takes (`title`, `xlabel`, `ylabel`, `logx`, `logy`, `xrange`, `yrange`;
 * commands/params.h PARAM_PLOT_VIEW, filled by commands/plot_dest.c): what the user asked for over
 * what the command or renderer chose. plots/'s common code applies them: the title and axis labels
 * on every figure (plot_page_title, plot_axis_labels); log axes and ranges where the renderer says
 * it can draw them (plot_view), and a clear error where it cannot, never a silent no-op. */
typedef struct {
    const char *title, *xlabel, *ylabel;   /* NULL: the figure's own */
    bool logx, logy;
    bool xrange, yrange;                   /* a range was given: xr / yr */
    double xr[2], yr[2];                   /* data units; NaN: that end fitted to the data */
} PlotView;

enum { PV_LOGX = 1, PV_LOGY = 2, PV_XRANGE = 4, PV_YRANGE = 8, PV_APPLIED = 0x100 };

typedef struct {
    const char *path;      /* output file (.png .svg .pdf, case-insensitive); NULL with window */
    bool window;           /* draw in an xcairo window instead of a file */
    int width, height;     /* pixels (PNG, window) or points (SVG, PDF); 0 -> 1000 x 700 */
    const char *title;     /* NULL -> the renderer's default title */
    const char *subtitle;  /* optional second line under the title (model, settings) */
    const char *xlabel;    /* NULL -> the renderer's default axis label */
    const char *ylabel;
    bool logy;             /* log-scale y where the renderer supports it (spectrum, energy, curves) */
    bool x_whole;          /* curves: x ticks on whole numbers only (layers), at least 1 apart */
    bool y_whole;          /* curves, linear y: y ticks on whole numbers only (ranks), at least 1 apart */
    bool residual;         /* energy: the right axis is 1 - energy on a log scale (tau 0.99 and 0.999 a
                              decade apart) instead of energy 0..1 */
    bool logx;             /* log-scale x (curves) */
    PlotView view;         /* the user's overrides (above) */
    unsigned view_can;     /* set by plot_view: the PV_* overrides this figure honours */
} PlotOpts;

/* What a renderer calls first: *out = *in with the view's log axes merged where `can` (PV_*) allows;
 * an error naming the override when the view asks for one the figure cannot draw (`fig` names it).
 * plot_page_open refuses a view that no plot_view call cleared, so a renderer that never calls it
 * takes only the title, labels and size. */
int plot_view(const PlotOpts *in, PlotOpts *out, unsigned can, const char *fig);
/* Applies the view's xrange / yrange to a data window r = {x0, x1, y0, y1} (log10 units on a log
 * axis): given ends replace the fitted ones. Error when a range is empty or not positive on a log axis. */
int plot_view_range(const PlotOpts *o, double r[4]);

/* Device name for a file name by its extension ("pngcairo", "svg", "pdfcairo"), or NULL
 * (with an error naming the extensions accepted). */
const char *plot_device_for(const char *path);
/* True when $DISPLAY is set and non-empty (a window may be possible). */
bool plot_have_display(void);
/* Checks that a window can really be opened: $DISPLAY set and the X server answering (PLplot's
 * xcairo would otherwise exit the process). AL_OK, or an error saying what is wrong. */
int plot_window_check(void);
/* Parses "WxH" (e.g. "1000x700") into a figure size; an error names the accepted range. */
int plot_parse_size(const char *s, int *w, int *h);

/* ================================================================ spectra */

/* Singular values of one head, sigma[0] >= sigma[1] >= ... (n values), against index 1..n.
 * opts->logy draws sigma on a log axis (zeros are clipped to the smallest positive value). */
int plot_spectrum(const PlotOpts *opts, const double *sigma, size_t n);

/* An effective-rank mark: at threshold tau the rank is r (1..n). */
typedef struct {
    double tau;            /* e.g. 0.99, 0.999 */
    size_t rank;           /* smallest r with energy[r-1] >= tau */
} PlotTauMark;

/* Spectrum (left axis) overlaid with its cumulative energy (right axis, 0..1):
 * energy[i] = sum_{j<=i} sigma_j^2 / sum sigma^2, as computed by core. Each mark is drawn as a
 * point on the energy curve with a dashed drop line and its rank written next to it; marks at
 * one rank are concentric rings (the first largest), so each stays visible. With
 * opts->residual the right axis is 1 - energy on a log scale down to a hundredth of the
 * smallest 1 - tau (of 0.01 at least, 1e-8 at most; smaller residuals drawn at that floor, as is
 * the mark of tau = 1), and each mark sits where its rank line meets its tau line (1 - tau): a
 * decade apart for 0.99 and 0.999 even at one rank. */
int plot_energy(const PlotOpts *opts, const double *sigma, const double *energy, size_t n,
                const PlotTauMark *marks, size_t n_marks);

/* ================================================================ spectral density */

/* The empirical spectral density of one matrix (core/analysis/spectral_stats.h: a histogram in
 * log bins, WeightWatcher's power-law fit of its tail, the Marchenko-Pastur edge of its shape). */
typedef struct {
    const double *edges;   /* (nb + 1) bin edges, ascending, > 0 */
    const double *dens;    /* (nb) densities: count / (n * bin width) */
    size_t nb;
    double alpha, xmin;    /* the fit (alpha NaN: none drawn) */
    double tail_frac;      /* share of the eigenvalues >= xmin: the line is tail_frac (alpha-1)/xmin (x/xmin)^-alpha */
    double mp_edge;        /* lambda_+ (0: not drawn) */
} PlotEsd;

/* Log-log axes: the histogram as bars, the fitted law from xmin on as a line of slope -alpha,
 * xmin and the MP edge as vertical dashed lines, a legend with the numbers. */
int plot_esd(const PlotOpts *opts, const PlotEsd *e);

/* ================================================================ ranks */

/* Effective ranks of one layer's fused head pairs: V/O/VO or Q/K/QK. Arrays are indexed by
 * (query) head, 0..n_heads-1, in the model's head order; for GQA the caller repeats the shared
 * side's rank for every head of its group. */
typedef struct {
    int layer;                 /* layer number shown in titles and panel labels */
    size_t n_heads;
    const int *rank_a;         /* (n_heads) V (or Q) effective ranks */
    const int *rank_b;         /* (n_heads) O (or K) effective ranks */
    const int *rank_fused;     /* (n_heads) VO (or QK) effective ranks */
} PlotLayerRanks;

/* What all layers of a rank figure share: names and scales. */
typedef struct {
    const char *model;         /* model name for the title, e.g. "demo-r1" */
    const char *name_a;        /* "V" or "Q" */
    const char *name_b;        /* "O" or "K" */
    const char *name_fused;    /* "VO" or "QK" */
    double tau;                /* energy threshold the ranks were taken at */
    int head_dim;              /* y axis runs 0..head_dim (ranks above it are clipped) */
    bool by_head;              /* x = heads in model order (head ids) instead of sorted by fused rank */
    bool normalize;            /* ranks by layer: y = rank / head dim (0..1), so head dims compare */
    bool shade_gaps;           /* ranks by layer: the layers missing between two drawn ones are a hybrid's
                                  layers without attention: shaded, "no attention heads" in the legend (lines
                                  and the band break at them either way) */
    const char *layers_note;   /* grid, by layer: which layers are drawn and why the others are not (a
                                  hybrid's), first in the subtitle; NULL: none */
    bool has_span;             /* by layer: the x axis covers layers span[0]..span[1] (the range asked for),
                                  those not drawn shaded with shade_gaps; else it fits the drawn layers */
    int span[2];
} PlotRanksInfo;

/* One layer: x = heads sorted by fused rank (ascending; or in head order with info->by_head), A
 * and B ranks as dots of two colours, the fused rank as a line; legend; title "<model> layer L:
 * <A>, <B> and <AB> effective ranks (tau = ...)". Sorted, the x ticks are labelled with the head
 * ids (every one up to 48 heads, else every k-th), so "head 50" can be found. */
int plot_ranks(const PlotOpts *opts, const PlotRanksInfo *info, const PlotLayerRanks *layer);

/* The model-wide grid: one small panel per layer (up to 8 columns: 61 layers make 8 x 8),
 * shared axes, panel labels "L<n>", one legend; info->by_head as in plot_ranks. Sorted by rank,
 * each panel has its own head order, so the numbers under every panel are its head ids (as
 * many as stand apart: every k-th when they would touch) and the x label says so; in head order
 * the bottom panels' x ticks are the head ids 0 .. n_heads-1. Without a size
 * given, the page grows with the panel count (1000 x 700 up to 16 panels, about 180 x 140 per
 * panel beyond); it stays readable down to about 1000 x 700. */
int plot_ranks_grid(const PlotOpts *opts, const PlotRanksInfo *info,
                    const PlotLayerRanks *layers, size_t n_layers);

/* Per-layer minimum, median and maximum fused rank against depth (max is the uniform rank a
 * per-layer truncation must keep), the min..max band shaded. x is the layer number; lines and
 * the band join adjacent layers only, so a layer missing from `layers` (a hybrid's Mamba-2 or
 * linear-attention layer) is a gap, shaded and named in the legend with info->shade_gaps. */
int plot_ranks_by_layer(const PlotOpts *opts, const PlotRanksInfo *info,
                        const PlotLayerRanks *layers, size_t n_layers);

/* One model of a side-by-side rank figure. */
typedef struct {
    const char *model;              /* legend text */
    const PlotLayerRanks *layers;   /* (n_layers) */
    size_t n_layers;
    int head_dim;                   /* its rank cap (ranks above are clipped) */
} PlotRanksModel;

typedef enum { PLOT_RANK_MIN, PLOT_RANK_MEDIAN, PLOT_RANK_MAX } plot_rank_stat;

/* Several models in one figure: per model one curve of the min, median or max fused rank over
 * each layer's heads against depth (info names the pair and tau, and normalize divides each
 * model's ranks by its head dim; its model and head_dim are unused). Each model has its own
 * marker shape (dot, square, triangle, ...) and dash, and the first is drawn widest, so a model
 * whose curve lies on another's stays visible. The default title names the statistic. */
int plot_ranks_by_layer_models(const PlotOpts *opts, const PlotRanksInfo *info, const PlotRanksModel *models,
                               size_t n_models, plot_rank_stat stat);

/* ================================================================ matrices */

/* Heatmap of a matrix (rows top to bottom, columns left to right) with a diverging colour map
 * centred on 0 (blue < 0 < red, white at 0, range +-max|m|) and a colour bar. Matrices larger
 * than the figure are shown pooled: each cell keeps the signed value of largest magnitude in
 * its block (noted in the subtitle). */
int plot_heatmap(const PlotOpts *opts, const Mat *m);

/* ================================================================ key norms */

/* One variant of TransMLA Figure 3a: the norm of each key dimension, split into the real and
 * imaginary halves of the RoPE pairs. re[i] and im[i] belong to pair i (0..n_pairs-1). */
typedef struct {
    const char *label;         /* "original", "RoRoPE", "RoRoPE + 4D FreqFold" */
    const double *re;          /* (n_pairs) */
    const double *im;          /* (n_pairs) */
} PlotKeyNorms;

/* Key-norm concentration: top panel the real halves, bottom panel the imaginary halves (drawn
 * downward, mirrored), one line per variant; pairs_per_head > 0 draws dashed head boundaries,
 * labelled "KV head g" (up to 8 heads; the number alone up to 32). */
int plot_key_norms(const PlotOpts *opts, const PlotKeyNorms *variants, size_t n_variants,
                   size_t n_pairs, size_t pairs_per_head);

/* ================================================================ curves */

/* One curve of a generic several-curves figure. */
typedef struct {
    const char *label;         /* legend text */
    const double *x;           /* (n) */
    const double *y;           /* (n); non-finite values break the line */
    size_t n;
    bool points;               /* also mark each point */
    bool no_line;              /* points only (with points) */
    const double *yerr;        /* (n) or NULL: error bars y +- yerr (non-finite: none at that point) */
    bool fixed_color;          /* colour slot `slot` instead of the curve's position, so a series keeps
                                  its colour across figures when others are left out */
    int slot;
    int marker;                /* point glyph: 0 a dot, 1 square, 2 triangle, 3 diamond, ... */
    int dash;                  /* line style (PLplot pllsty 1 solid, 2-8 dashes); 0: by colour slot */
    double width;              /* line width in points at 1000 x 700; 0: 2.2 */
} PlotCurve;

/* Several curves with a legend (rope energy against dims kept, errors by layer per method,
 * perplexity curves, the one-budget comparison, ...). opts->xlabel / ylabel name the axes;
 * opts->logy logs y; opts->x_whole (opts->y_whole, linear y) puts x (y) ticks on whole numbers.
 * The y range is fitted to the data (a log axis too: 0.3-1.1 gets about 0.28-1.2, labelled at
 * 0.3, 0.4, 0.5, ... rather than a 0.1-10 axis); a legend of up to 3 rows sits above the data,
 * a taller one in a column right of it; neither covers the data or a tick label. */
int plot_curves(const PlotOpts *opts, const PlotCurve *curves, size_t n_curves);

/* ================================================================ panels */

/* Several figures on one page, nx columns by ny rows (gnuplot's multiplot; PLplot subpages):
 * between plot_panels_begin and plot_panels_end every renderer draws into the next subpage
 * instead of opening its own page (its opts' path, window and size are ignored; the panels' opts
 * give them). Fonts scale with the subpage. */
int plot_panels_begin(const PlotOpts *opts, int nx, int ny);
/* True between begin and end. */
bool plot_panels_active(void);
/* Finishes the page: keep writes the file (an error when nothing came out); !keep (a panel
 * failed) closes it and removes the partial file. */
int plot_panels_end(bool keep);

#endif
