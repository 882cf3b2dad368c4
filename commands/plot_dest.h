/* plot_dest.h -- where a figure goes, decided once for every `plot` sub-command:
 * `to FILE` (extension picks the device; none: plot.format), `window`, an interactive session
 * with a display that answers, else plot.dir/<auto_name>.<plot.format>. After rendering,
 * plot_dest_done prints where it went and makes the path the command's result (attn.plot
 * returns it). */
#ifndef AL_PLOT_DEST_H
#define AL_PLOT_DEST_H

#include "plot.h"
#include "registry.h"
#include "session.h"

typedef struct {
    PlotOpts o;               /* width/height from plot.size; path or window set */
    char *path;               /* owned; NULL for a window */
    Session *s;               /* plot_dest_done records the figure's command line for `replot` */
} PlotDest;

/* The overrides every figure takes (params.h PARAM_PLOT_VIEW: title, xlabel, ylabel, logx, logy,
 * xrange, yrange, size) from a into o->view and o's size; those the command does not declare are
 * left unset. An error names a malformed range or size. */
int plot_dest_view(const Args *a, PlotOpts *o);
/* Fills d for a figure whose automatic file name (no extension) is auto_name (inside `plot panels`:
 * no file, the panel's subpage). */
int plot_dest_init(Session *s, const Args *a, const char *auto_name, PlotDest *d);
/* After rendering with status rc: reports the file (or the window), records the running command's
 * line as the session's last figure (Session.last_plot: what `replot` re-runs; not for a panel)
 * and frees d. Returns rc. */
int plot_dest_done(Out *out, PlotDest *d, int rc);
/* Says how to close the window before a renderer blocks on it (nothing for a file). */
void plot_dest_window_hint(Out *out, const PlotDest *d);

/* The labels of a figure of curves. */
typedef struct {
    const char *title, *subtitle, *xlabel, *ylabel;
    bool logy, x_whole;       /* as in PlotOpts */
} PlotLabels;
/* One figure of nc curves with labels l to the destination plot_dest_init picks for auto_name: the
 * window hint, the rendering, then plot_dest_done's report. */
int plot_dest_curves(Session *s, const Args *a, Out *out, const char *auto_name, const PlotLabels *l,
                     const PlotCurve *cv, size_t nc);

#endif
