/* cmd_plot_esd.h -- `plot esd KIND layer L head H` (handler in cmd_plot_esd.c): one head's
 * empirical spectral density on log-log axes with WeightWatcher's power-law fit and the
 * Marchenko-Pastur edge. To plug it into `plot`, put CMD_PLOT_ESD_SUBS among the entries of
 * cmd_plot.c's plot_subs. */
#ifndef AL_CMD_PLOT_ESD_H
#define AL_CMD_PLOT_ESD_H

#include "registry.h"

int cmd_plot_esd(Session *s, const Args *a, Out *out);

extern const Param cmd_plot_esd_pos[];
extern const Param cmd_plot_esd_kw[];
extern const char CMD_PLOT_ESD_HELP[];

#define CMD_PLOT_ESD_SUBS                                                                                      \
    { .name = "esd", .summary = "a head's spectral density (log-log) with its power-law fit and the MP edge", \
      .help = CMD_PLOT_ESD_HELP, .pos = cmd_plot_esd_pos, .kw = cmd_plot_esd_kw, .fn = cmd_plot_esd,          \
      .flags = CMD_MODEL }

#endif
