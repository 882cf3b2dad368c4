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
    PC_GAP = 12,      /* #EFEFEF: a gap in the data (a hybrid's layers without attention) */
    PC_N = 13
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
/* Room left of that viewport for y tick labels of up to chars characters (0: the standard 4),
 * the y label moved out with them; plot_page_open resets it. */
void plot_ytick_room(int chars);

/* The x (y) axis label a figure shows: the user's override (opts->view), else opts->xlabel
 * (ylabel), else NULL (the renderer's default). For renderers that place labels themselves. */
const char *plot_xlabel(const PlotOpts *o);
const char *plot_ylabel(const PlotOpts *o);
/* Axis labels for the current viewport: the view's or opts->xlabel / ylabel when set, else the defaults. */
void plot_axis_labels(const PlotOpts *o, const char *dx, const char *dy);

/* ---------------------------------------------------------------- legends */

typedef enum { PL_ITEM_LINE, PL_ITEM_DOT, PL_ITEM_LINE_DOT, PL_ITEM_BOX } plot_item_kind;

typedef struct {
    const char *label;     /* PLplot text (escapes active): escape user text with plot_esc */
    PLINT color;
    plot_item_kind kind;
    PLINT line_style;      /* 1 solid, 2.. dashed (pllsty) */
    const char *glyph;     /* symbol of dot items (NULL: a dot) */
} PlotLegendItem;

/* Draws a legend of n items above the current viewport (centred, clear of its top tick label),
 * on a white background with a thin frame, in as many columns as fit the viewport's width; text
 * `rel` times the default height. Records its box in plot_geom. */
void plot_legend(const PlotLegendItem *items, int n, double rel);
/* The same legend in one column right of the current viewport (outside it, top-aligned): for
 * legends too tall to sit above the data. */
void plot_legend_right(const PlotLegendItem *items, int n, double rel);
/* Width (in default character widths) a one-column legend of those items takes. */
double plot_legend_width_em(const PlotLegendItem *items, int n, double rel);
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

/* ---------------------------------------------------------------- layout record */

/* What the last figure laid out, in page fractions (0..1, y up) and data units, so tests can
 * assert what a reader sees (axis range, labelled ticks, where the legend went, the tau marks)
 * without decoding pixels. plot_page_open clears it; renderers fill what they draw. */
#define GEOM_TICKS 64
#define GEOM_MARKS 8
typedef struct {
    double vp[4];              /* data viewport: x0, x1, y0, y1 */
    double win[4];             /* its window (y in log10 units when logy) */
    bool logy;
    double legend[4];          /* legend box x0, x1, y0, y1 (all 0: no legend) */
    int n_yticks, n_xticks;
    double yticks[GEOM_TICKS]; /* values labelled on the (left) y axis, data units */
    double xticks[GEOM_TICKS]; /* values labelled on the x axis (grids: of the bottom-left panel) */
    int n_marks;
    double mark[GEOM_MARKS][3];    /* energy tau marks: page x, page y, dot size (times a character) */
    int n_series;
    int series_marker[GEOM_TICKS]; /* curves: marker glyph index and line style of each series */
    int series_style[GEOM_TICKS];
} PlotGeom;

const PlotGeom *plot_last_geom(void);
PlotGeom *plot_geom(void);                 /* the record the renderers write */
/* Records the current viewport and window (plgvpd / plgvpw) as the data area. */
void plot_geom_data_area(bool logy);
/* Page-fraction coordinates of window point (x, y) in the current viewport and window. */
void plot_page_xy(double x, double y, double *px, double *py);

/* The values to label on a log axis over lo..hi (log10 units) when it spans at most 3 decades:
 * 1 (or 1-2-5, 1-2-3-5, 1..9, or finer) times powers of ten, at least 4 inside. Returns how many (at most
 * cap), 0 when the axis is wider and PLplot's decade labels serve. */
int plot_log_ticks(double lo, double hi, double *vals, int cap);
/* Labels those ticks on the left axis (numbers as %g) with light grid lines at each, and records
 * them as the y ticks. Returns how many were drawn (0: PLplot's own labels are to be used). */
int plot_log_axis(double lo, double hi, double x0, double x1);
/* The same on the bottom axis (x window lo..hi in log10 units, grid lines across y0..y1), recorded
 * as the x ticks. */
int plot_log_xaxis(double lo, double hi, double y0, double y1);

/* Marker glyphs for series that must stay apart when they overlap: 0 a dot, then square,
 * triangle, diamond, ... (cycles). */
const char *plot_marker_glyph(int i);
/* plot_dots with a given glyph. */
void plot_marks(size_t n, const double *x, const double *y, double rel, const char *glyph);

/* ---------------------------------------------------------------- checks */

/* Error unless all n values are finite; `what` names the array in the message. */
int plot_check_finite(const double *v, size_t n, const char *what);

#endif
