/* cmd_plot_xy.h -- figures of what a user or a notebook computed, and the figure commands that work
 * on any figure (handlers in cmd_plot_xy.c):
 *   plot xy data FILE.csv [x COL[,COL...]] [y COL,COL...] [yerr COL,...] [style lines|points|both]
 *           [marker M,M...] [dash D,D...] [legend NAME,NAME...]   series from a CSV file (from Lua:
 *                                   attn.plot("xy", {series = {{x=..., y=..., name=...}, ...}}))
 *   plot matrix data FILE.csv       a CSV grid (or a Lua table of rows) as a heatmap
 *   plot panels CxR figures "CMD; CMD; ..."   several figures on one page (gnuplot's multiplot)
 *   replot [CHANGES]                the last figure again, its options changed (`replot logy title "T"`)
 * Every figure takes the overrides of params.h PARAM_PLOT_VIEW. To plug them in, put
 * CMD_PLOT_XY_SUBS among cmd_plot.c's plot_subs and CMD_REPLOT among its top-level commands. */
#ifndef AL_CMD_PLOT_XY_H
#define AL_CMD_PLOT_XY_H

#include "registry.h"

int cmd_plot_xy(Session *s, const Args *a, Out *out);
int cmd_plot_matrix(Session *s, const Args *a, Out *out);
int cmd_plot_panels(Session *s, const Args *a, Out *out);
int cmd_replot(Session *s, const Args *a, Out *out);

extern const Param cmd_plot_xy_kw[];
extern const Param cmd_plot_matrix_kw[];
extern const Param cmd_plot_panels_pos[];
extern const Param cmd_plot_panels_kw[];
extern const Param cmd_replot_pos[];
extern const char CMD_PLOT_XY_HELP[];
extern const char CMD_PLOT_MATRIX_HELP[];
extern const char CMD_PLOT_PANELS_HELP[];
extern const char CMD_REPLOT_HELP[];

#define CMD_PLOT_XY_SUBS                                                                                      \
    { .name = "xy", .summary = "series from a CSV file or Lua tables: lines, points, error bars, log axes",    \
      .help = CMD_PLOT_XY_HELP, .kw = cmd_plot_xy_kw, .fn = cmd_plot_xy },                                    \
    { .name = "matrix", .summary = "a matrix from a CSV grid or a Lua table of rows as a heatmap",            \
      .help = CMD_PLOT_MATRIX_HELP, .kw = cmd_plot_matrix_kw, .fn = cmd_plot_matrix },                        \
    { .name = "panels", .summary = "several figures on one page, CxR panels (gnuplot's multiplot)",          \
      .help = CMD_PLOT_PANELS_HELP, .pos = cmd_plot_panels_pos, .kw = cmd_plot_panels_kw, .fn = cmd_plot_panels }

#define CMD_REPLOT                                                                                            \
    { .name = "replot", .summary = "the last figure again with changed options (replot logy title \"T\")",   \
      .returns = "the figure's path (a string; \"window\" when it was shown in a window)",                  \
      .help = CMD_REPLOT_HELP, .pos = cmd_replot_pos, .fn = cmd_replot }

#endif
