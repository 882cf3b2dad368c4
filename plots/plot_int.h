/* plot_int.h -- what the renderers in plots/ share: opening and closing a page on a fresh PLplot
 * stream, the colour-blind-safe palette, font scaling, titles, legends, text escaping.
 * Internal to plots/ (the public API is plot.h). */
#ifndef AL_PLOT_INT_H
#define AL_PLOT_INT_H

#include <plplot.h>
#include "plot.h"

/* ---------------------------------------------------------------- palette (cmap0 indices) */

/* Okabe-Ito colours on a white background (colour 0 is the background, 1 the foreground). */
enum {
    PC_BG = 0,        /* white */
    PC_FG = 1,        /* near-black: axes, text */
    PC_BLUE = 2,      /* #0072B2 */
    PC_ORANGE = 3,    /* #E69F00 */
    PC_GREEN = 4,     /* #009E73 */
    PC_VERMIL = 5,    /* #D55E00 */
    PC_PURPLE = 6,    /* #CC79A7 */
    PC_SKY = 7,       /* #56B4E9 */
    PC_GREY = 8,      /* #777777: secondary marks */
    PC_LIGHT = 9,     /* #DDDDDD: grid lines, bands */
    PC_YELLOW = 10,   /* #F0E442: only as a fill, never as a line on white */
    PC_BAND = 11,     /* #CCE3F0: light blue shading */
    PC_N = 12
};

/* The colour of curve i in a multi-curve figure (cycles through the 7 line colours). */
PLINT plot_series_color(size_t i);

/* ---------------------------------------------------------------- pages */

typedef struct {
    PLINT prev_stream;     /* stream current before plot_page_open */
    PLINT stream;          /* our stream */
    char *tmp_path;        /* file PLplot writes (renamed to final_path on close); NULL: window */
    char *final_path;
    int width, height;
    bool open;
    bool svg;              /* PLplot's svg driver: its page size is rewritten in px on close */
} PlotPage;

/* Checks the options (device from the extension, size, display for windows), makes the
 * output folder, makes sure the file can be written, then starts a new PLplot stream with the
 * palette and page size, and advances to a blank page. On error nothing is left open. */
int plot_page_open(const PlotOpts *o, PlotPage *pg);
/* The same for a figure laid out for design_w x design_h: that is its size when opts give none,
 * and fonts scale with the page size relative to it. */
int plot_page_open_design(const PlotOpts *o, PlotPage *pg, int design_w, int design_h);
/* Finishes the page (writes the file, renames it into place) and restores the previous
 * stream. Returns an error when the file did not come out. Safe on a page that is not open. */
int plot_page_close(PlotPage *pg);

/* Sets the character height to `rel` times the default, scaled with the page size. */
void plot_chr(double rel);
/* Scale factor of the current page's fonts (1 at 1000 x 700). */
double plot_font_scale(void);
/* Height (width) of one default character as a fraction of the page height (width): the unit
 * for margins that must hold text whatever the page size. */
double plot_em_y(void);
double plot_em_x(void);

/* ---------------------------------------------------------------- text */

/* Copies src into dst (cap bytes) with PLplot's escape character '#' doubled, so user text
 * (model names, labels) prints as typed. Returns dst. */
char *plot_esc(char *dst, size_t cap, const char *src);
/* Title (and the optional subtitle) at the top of the page, centred: opts->title when set,
 * else dflt. */
void plot_page_title(const PlotOpts *o, const char *dflt);
/* Top of the data area (fraction of the page height) under the title, the subtitle and a
 * legend of legend_rows rows placed above the data (0: none). */
double plot_top(const PlotOpts *o, int legend_rows);
/* The standard single-panel viewport: room for y tick labels and label on the left, x ones
 * below, right_em character widths on the right, the title and legend above. */
void plot_vpor_std(const PlotOpts *o, int legend_rows, double right_em);
/* Width (fraction of the page) of that viewport. */
double plot_vpor_std_width(double right_em);
/* Axis labels for the current viewport: opts->xlabel / ylabel when set, else the defaults. */
void plot_axis_labels(const PlotOpts *o, const char *dx, const char *dy);

/* ---------------------------------------------------------------- legends */

typedef enum { PL_ITEM_LINE, PL_ITEM_DOT, PL_ITEM_LINE_DOT, PL_ITEM_BOX } plot_item_kind;

typedef struct {
    const char *label;     /* PLplot text (escapes active): escape user text with plot_esc */
    PLINT color;
    plot_item_kind kind;
    PLINT line_style;      /* 1 solid, 2.. dashed (pllsty) */
} PlotLegendItem;

/* Draws a legend of n items above the current viewport (centred, touching its top), on a
 * white background with a thin frame, in as many columns as fit the viewport's width; text
 * `rel` times the default height. */
void plot_legend(const PlotLegendItem *items, int n, double rel);
/* Rows that legend will take in a viewport vp_w wide (fraction of the page width): reserve
 * them with plot_top / plot_vpor_std before drawing. */
int plot_legend_rows(const PlotLegendItem *items, int n, double vp_w, double rel);

/* Draws n dots (filled circles) of relative size `rel` at (x[i], y[i]) in the current colour. */
void plot_dots(size_t n, const double *x, const double *y, double rel);

/* ---------------------------------------------------------------- axes */

/* A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about `target` intervals. */
double plot_nice_step(double range, int target);
/* The same for whole-number data (layers, ranks, heads): a whole step of at least 1 (1, 2, 5,
 * 10, 20, 25, 50, ...; 2.5 becomes 2), so no tick falls between two whole numbers. */
double plot_whole_step(double range, int target);

/* Labels at 2 and 5 times the powers of ten on the left axis of a log y axis (window lo..hi in
 * log10 units) when it spans at most two decades, where PLplot labels only the decades. */
void plot_log_labels(double lo, double hi);

/* ---------------------------------------------------------------- checks */

/* Error unless all n values are finite; `what` names the array in the message. */
int plot_check_finite(const double *v, size_t n, const char *what);

#endif
