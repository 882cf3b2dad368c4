/* cmd_calib.h -- the calibration / KQ-SVD command group (cmd_calib.c): `calibrate`, `calib
 * save|load|info`, `kvsvd learn|eval` (whose projections `export DIR` writes), and its two
 * figures as `plot` sub-commands:
 *   plot kvsvd-errors [what out|k|q|v|kq]   KQ-SVD Figure 1: per-layer error of the last
 *                                           `kvsvd eval`, one curve per method
 *   plot kvsvd-unbalance [betas B,B,...]    Figure 2: attention output error averaged over layers
 *                                           against beta (keys x beta, queries / beta)
 * To plug them into `plot`, put CMD_PLOT_KVSVD_SUBS among the entries of cmd_plot.c's plot_subs.
 *
 * Other groups reach the session's calibration through cmd_calib_stats and its text through
 * cmd_calib_text (activation-based TransMLA: its PCAs and perplexities), run `calibrate` through
 * cmd_calib_run (`convert mla ... calib FILE`), and `export DIR` can route to cmd_kvsvd_export when
 * cmd_kvsvd_pending. */
#ifndef AL_CMD_CALIB_H
#define AL_CMD_CALIB_H

#include "calib.h"
#include "registry.h"
#include "session.h"

/* The calibration statistics of model m in this session (*out NULL, AL_OK, when there are none).
 * Owned by the session; valid until the next `calibrate` / `calib load` or m closes. */
int cmd_calib_stats(Session *s, const Model *m, const CalibStats **out);

/* Token ids of a text file (encoded with m's tokenizer, BOS first) or, with ids_file, of a file of
 * whitespace-separated ids; every id is checked against m's vocabulary. Caller frees *ids. */
int cmd_calib_read_tokens(Session *s, Model *m, const char *path, bool ids_file, int **ids, size_t *n);

/* What a calibration run reads. */
typedef struct {
    const char *text;         /* the file, as the user named it */
    bool ids_file;            /* a file of token ids rather than text */
    size_t samples;           /* most windows to run */
    size_t seqlen;            /* tokens per window */
    calib_split split;        /* which windows of the text (calib_windows) */
    bool with_x;              /* keep the attention input's G_X and S_X */
} CalibRequest;

/* What `calibrate` does, for other commands too (`convert mla ... calib FILE`): runs the windows of
 * rq->split of ids[0..n) (taken over, freed on failure) through m's forward pass (narrating
 * "calibrating ..." on out) and makes the statistics the session's calibration of m, replacing
 * earlier ones and any learned projections. Ctrl-C after at least one sequence keeps the partial
 * statistics and returns AL_INTERRUPTED. */
int cmd_calib_run(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, Out *out);

/* The text of the session's calibration of m (false when there is none: no calibration, or
 * statistics loaded from a file): all its tokens (borrowed, valid as long as the statistics), the
 * windows [first, first + count) of req.seqlen tokens that were run, and the request. */
typedef struct {
    const int *ids;
    size_t n;
    size_t first, count;
    CalibRequest req;
} CalibText;
bool cmd_calib_text(const Session *s, const Model *m, CalibText *out);

/* True when `kvsvd learn` has projections for m (NULL: any model) that `export` can write. */
bool cmd_kvsvd_pending(const Session *s, const Model *m);
/* Writes the learned projections of the current model to dir (kqsvd_export): what `export DIR`
 * does after `kvsvd learn`. */
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
