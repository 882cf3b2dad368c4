/* cmd_calib.h -- the calibration / KQ-SVD command group (cmd_calib.c): `calibrate`, `calib
 * save|load|info`, `kvsvd learn|eval`, `export-kvsvd`, and its two figures as `plot` sub-commands:
 *   plot kvsvd-errors [what out|k|q|v|kq]   KQ-SVD Figure 1: per-layer error of the last
 *                                           `kvsvd eval`, one curve per method
 *   plot kvsvd-unbalance [betas B,B,...]    Figure 2: attention output error averaged over layers
 *                                           against beta (keys x beta, queries / beta)
 * To plug them into `plot`, put CMD_PLOT_KVSVD_SUBS among the entries of cmd_plot.c's plot_subs.
 *
 * Other groups reach the session's calibration through cmd_calib_stats (activation-based
 * TransMLA), and `export DIR` can route to cmd_kvsvd_export when cmd_kvsvd_pending. */
#ifndef AL_CMD_CALIB_H
#define AL_CMD_CALIB_H

#include "calib.h"
#include "registry.h"
#include "session.h"

/* The calibration statistics of model m in this session (*out NULL, AL_OK, when there are none).
 * Owned by the session; valid until the next `calibrate` / `calib load` or m closes. */
int cmd_calib_stats(Session *s, const Model *m, const CalibStats **out);

/* True when `kvsvd learn` has projections for m (NULL: any model) that `export` can write. */
bool cmd_kvsvd_pending(const Session *s, const Model *m);
/* Writes the learned projections of the current model to dir (kqsvd_export), as `export-kvsvd`. */
int cmd_kvsvd_export(Session *s, const char *dir, bool force, Out *out);

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
