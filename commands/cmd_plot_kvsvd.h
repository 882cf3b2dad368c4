/* cmd_plot_kvsvd.h -- the KQ-SVD figures as `plot` sub-commands (handlers in cmd_plot_kvsvd.c):
 *   plot kvsvd-errors [what out|k|q|v|kq]   KQ-SVD Figure 1: per-layer error of the last
 *                                           `kvsvd eval`, one curve per method
 *   plot kvsvd-unbalance [betas B,B,...]    Figure 2: attention output error averaged over layers
 *                                           against beta (keys x beta, queries / beta)
 * To plug them into `plot`, put CMD_PLOT_KVSVD_SUBS among the entries of cmd_plot.c's plot_subs. */
#ifndef AL_CMD_PLOT_KVSVD_H
#define AL_CMD_PLOT_KVSVD_H

#include "registry.h"

int cmd_plot_kvsvd_errors(Session *s, const Args *a, Out *out);
int cmd_plot_kvsvd_unbalance(Session *s, const Args *a, Out *out);

extern const Param cmd_plot_kvsvd_errors_kw[];
extern const Param cmd_plot_kvsvd_unbalance_kw[];
extern const char CMD_PLOT_KVSVD_ERRORS_HELP[];
extern const char CMD_PLOT_KVSVD_UNBALANCE_HELP[];

#define CMD_PLOT_KVSVD_SUBS                                                                                     \
    { .name = "kvsvd-errors", .summary = "KQ-SVD Fig. 1: per-layer error of K-SVD / Eigen / KQ-SVD (kvsvd eval)", \
      .help = CMD_PLOT_KVSVD_ERRORS_HELP, .kw = cmd_plot_kvsvd_errors_kw, .fn = cmd_plot_kvsvd_errors,          \
      .flags = CMD_MODEL },                                                                                     \
    { .name = "kvsvd-unbalance", .summary = "KQ-SVD Fig. 2: output error against key/query unbalance beta",   \
      .help = CMD_PLOT_KVSVD_UNBALANCE_HELP, .kw = cmd_plot_kvsvd_unbalance_kw, .fn = cmd_plot_kvsvd_unbalance, \
      .flags = CMD_MODEL }

#endif
