/* params.h -- the parameters several commands take, defined once so that their names, bounds,
 * defaults, completion and help agree everywhere (one level below the command groups), and the
 * readers that turn them into values.
 *
 *   PARAM_TAU          tau T          effective-rank energy threshold, 0..1 (default: `set tau`)
 *   PARAM_OFFSET       offset D       qk on full-RoPE models: K rotated by RoPE at position D
 *   PARAM_PAIR         vo|qk          which fused pair (a positional)
 *   PARAM_LAYERS(H)    layers A-B     an inclusive layer range, default all (H: what they are for)
 *   PARAM_LAYERS_OPT(H) layers A-B    the same without a default (the command decides when absent)
 *   PARAM_TOKENS(D, H) tokens T       random tokens of an error report / evaluation, 2..8192,
 *                                     default D (NULL: none, the command picks)
 *   PARAM_FIT(H)       fit auto|weights|calib   activation-weighted fit or the weights' own
 *   PARAM_EVAL_WINDOWS split, samples, seqlen, text, ids: windows of a calibration text to
 *                                     evaluate on (ws_calib_eval_tokens)
 * Bounds: `tokens` took min 1 in `convert mla`, `convert tpa` and `check` and min 2 in `compare`
 * and `plot compare`; it is 2 everywhere now (one token has no causal structure to compare). */
#ifndef AL_PARAMS_H
#define AL_PARAMS_H

#include "farr.h"
#include "model.h"
#include "registry.h"

extern const char *const PARAM_PAIR_CHOICES[];    /* vo, qk */
extern const char *const PARAM_FIT_CHOICES[];     /* auto, weights, calib */
extern const char *const PARAM_SPLIT_CHOICES[];   /* train, valid */

#define PARAM_TAU { .name = "tau", .type = ARG_FLOAT, .min = 0.0, .max = 1.0, .flags = PF_OPEN_MIN, .comp = COMP_NONE, .metavar = "T", \
                    .help = "energy threshold of effective ranks (default: set tau)" }
#define PARAM_OFFSET { .name = "offset", .type = ARG_INT, .min = 0, .max = 1e9, .comp = COMP_NONE, .metavar = "D", \
                       .help = "qk on full-RoPE models: K rotated by RoPE at position D (analysis only, seed A.3)" }
#define PARAM_PAIR { .name = "pair", .type = ARG_ENUM, .choices = PARAM_PAIR_CHOICES, .comp = COMP_CHOICES, \
                     .help = "which fused pair: vo (W_V W_O) or qk (W_Q W_K^T)" }
#define PARAM_LAYERS(H) { .name = "layers", .type = ARG_RANGE, .def = "all", .comp = COMP_LAYERS, .help = H }
#define PARAM_LAYERS_OPT(H) { .name = "layers", .type = ARG_RANGE, .comp = COMP_LAYERS, .help = H }
#define PARAM_TOKENS(D, H) { .name = "tokens", .type = ARG_INT, .def = D, .min = 2, .max = 8192, .comp = COMP_NONE, \
                             .metavar = "T", .help = H }
#define PARAM_FIT(H) { .name = "fit", .type = ARG_ENUM, .choices = PARAM_FIT_CHOICES, .def = "auto", \
                       .comp = COMP_CHOICES, .help = H }
#define PARAM_EVAL_WINDOWS                                                                                       \
    { .name = "split", .type = ARG_ENUM, .choices = PARAM_SPLIT_CHOICES, .def = "valid", .comp = COMP_CHOICES, \
      .help = "the split of the calibration text to evaluate on" },                                            \
    { .name = "samples", .type = ARG_INT, .min = 1, .max = 1e6, .comp = COMP_NONE, .metavar = "N",             \
      .help = "windows evaluated (default: at most 32)" },                                                     \
    { .name = "seqlen", .type = ARG_INT, .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",              \
      .help = "tokens per window (default: the calibration's)" },                                              \
    { .name = "text", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                                 \
      .help = "evaluation text (default: the calibration text)" },                                             \
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", .help = "evaluation token ids instead of text" }

/* `seed S` of the random tokens a command draws (default: its fixed seed, core/base/seeds.h; printed). */
#define PARAM_SEED { .name = "seed", .type = ARG_INT, .min = 1, .max = 4e18, .comp = COMP_NONE, .metavar = "S", \
                     .help = "seed of the random tokens (default: the command's fixed seed; printed)" }

/* Where a figure goes (commands/plot_dest.h): `to FILE` and `window`. */
#define PARAM_PLOT_TO { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", \
                        .help = "write the figure to FILE.png, .svg or .pdf (no extension: plot.format; a missing " \
                                "folder is made inside the working directory only)" }
/* The overrides every figure takes, defined once (plot_dest_init reads them into PlotOpts.view;
 * plots/ applies them): part of PARAM_WINDOW, so every `plot` sub-command has them. */
#define PARAM_PLOT_VIEW                                                                                         \
    { .name = "title", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "TEXT", .help = "the figure's title" },   \
    { .name = "xlabel", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "TEXT", .help = "the x axis label" },    \
    { .name = "ylabel", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "TEXT", .help = "the y axis label" },    \
    { .name = "logx", .type = ARG_FLAG, .flags = PF_VIEW, .comp = COMP_NONE, .help = "x on a log scale" },        \
    { .name = "logy", .type = ARG_FLAG, .flags = PF_VIEW, .comp = COMP_NONE, .help = "y on a log scale" },        \
    { .name = "xrange", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "A:B",              \
      .help = "x axis from A to B (either side empty: fitted)" },                                             \
    { .name = "yrange", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "A:B",              \
      .help = "y axis from A to B (either side empty: fitted)" },                                             \
    { .name = "size", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "WxH",                \
      .help = "figure size (default: set plot.size)" }
#define PARAM_WINDOW { .name = "window", .type = ARG_FLAG, .comp = COMP_NONE, \
                       .help = "show the figure in a window (needs a display)" }, \
                     PARAM_PLOT_VIEW

/* tau as given, else the session's `set tau`. */
double param_tau(const Session *s, const Args *a);
/* offset as given, else FARR_NO_OFFSET. */
int param_offset(const Args *a);
/* The pair (vo when absent). */
farr_kind param_pair(const Args *a);
/* The layer range `name` (PARAM_LAYERS, `layer L`, a positional range) of m's layers into [lo, hi]
 * (args_range), resolved by layersel_range: on a hybrid the range narrows to its first and last
 * attention layer, the sweeps skip the linear-attention layers between, and one line on out says
 * which were left out; a range of no attention layer (one linear layer named) is an error. */
int param_layers(Out *out, const Args *a, const char *name, const Model *m, long *lo, long *hi);

#endif
