/* ws_tmla.h -- the statistics TransMLA's commands and figures share (`convert mla`, `convert
 * mla-table`, `plot key-norms|rope-energy|rope-removal`): activation statistics of a calibration
 * text (run through the workspace's calibration, ws_calib.h) or of the session's `calibrate`, or
 * the weights', and that text's tokens for perplexity; with the keywords that choose them. */
#ifndef AL_WS_TMLA_H
#define AL_WS_TMLA_H

#include "registry.h"
#include "session.h"

/* Tokens of a perplexity before / after a conversion by default (`ppl-tokens`); `check` measures
 * the same many (ws_check), so both print one number. */
#define TMLA_PPL_TOKENS 4096
#define TMLA_STR_(x) #x
#define TMLA_STR(x) TMLA_STR_(x)

/* What a TransMLA command uses for its PCAs and perplexities (ws_tmla_stats). */
typedef struct {
    bool act;                 /* activation statistics in use ("WX-based"); false: weights */
    int n_layers;
    double **sigma, **mu;     /* (n_layers) E[x xᵀ] and E[x] of each layer's attention input when act
                                 (owned; mu entries NULL when unknown) */
    const int *ids;           /* the perplexity tokens (ppl_tokens of them), or NULL: within the
                                 session calibration's text (ws_calib_text), own_ids or eval_ids */
    int *own_ids;             /* owned tokens (a text read for `stats weights`), or NULL */
    int *eval_ids;            /* owned tokens of `eval FILE` / `eval-ids FILE`, or NULL */
    const char *text;         /* the perplexity text's file, for narration */
    size_t ppl_tokens;        /* how many tokens perplexities use */
    size_t seqlen;            /* perplexity window */
    bool in_sample;           /* the perplexity tokens overlap the calibration's windows */
    char ppl_on[256];         /* which tokens: "held out: ..." or "in-sample: ..." (for narration) */
    char source[512];         /* for narration: where the statistics / the text came from */
    bool scoped;              /* ws_tmla_fig_stats: `calib FILE` statistics are the command's own */
    struct CalibState *own;   /* those statistics and their text (owned), or NULL */
    const struct CalibStats *cst;   /* ws_tmla_stats_lazy with act and sigma NULL: the calibration each
                                       layer forms its moments from (borrowed) */
} TmlaStatsUse;

/* Resolves the keywords of PARAM_TMLA_STATS for model m: `calib FILE` / `ids FILE` runs
 * `calibrate` on the text's training windows (up to `samples` of `seqlen`, attention inputs kept:
 * core/analysis/calib.h's G_X and S_X), which becomes the session's calibration of m (unless it already is
 * that one; a replaced one is said, an interrupted run leaves it as it was), else the session's
 * calibration is used when it kept the attention input; `stats weights` forces the weight-based
 * PCAs (a given text then only serves the perplexity), `stats act` fails without statistics.
 * Perplexity: `eval FILE` / `eval-ids FILE` (a held-out text), else the calibration text
 * (ws_calib_text: none after `calib load`) -- by default its validation split (held out: the last
 * tenth of the windows, from its first window to the end), `split train` the calibrated windows
 * themselves (in-sample); a text without a validation window falls back to in-sample, said in
 * ppl_on. need_text: an error when there is none. Narrates on out what it computes. Release with
 * ws_tmla_stats_release. */
int ws_tmla_stats(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out);
/* The same for a figure: `calib FILE` / `ids FILE` statistics are the figure's own (kept in u,
 * said so), and the session's calibration is neither replaced nor touched (an interrupted run
 * leaves it as it was); without them it reads the session's calibration of m as above. */
int ws_tmla_fig_stats(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out);
/* ws_tmla_stats, but where every layer's moments together are over CI_MAX_BYTES (check_inputs.h:
 * an export could not keep them anyway) they are not formed: u->sigma stays NULL and u->cst names
 * the calibration, for TmlaOpts.calib (one layer at a time) and ws_check_keep_calib. */
int ws_tmla_stats_lazy(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out);
void ws_tmla_stats_release(TmlaStatsUse *u);

extern const char *const WS_TMLA_STATS_CHOICES[];
extern const char *const WS_TMLA_SPLIT_CHOICES[];

/* The keywords ws_tmla_stats reads (put them in a command's keyword list). */
#define PARAM_TMLA_STATS                                                                                  \
    { .name = "stats", .type = ARG_ENUM, .choices = WS_TMLA_STATS_CHOICES, .comp = COMP_CHOICES,             \
      .help = "PCA statistics: act (calibration activations) or weights (default: act when there are any)" }, \
    { .name = "calib", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                               \
      .help = "calibration text (model's tokenizer) for activation statistics and perplexity" },             \
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                                 \
      .help = "the calibration text as whitespace-separated token ids" },                                     \
    { .name = "samples", .type = ARG_INT, .def = "128", .min = 1, .max = 1e6, .comp = COMP_NONE,              \
      .metavar = "N", .help = "calibration windows of the text (TransMLA: 128)" },                            \
    { .name = "seqlen", .type = ARG_INT, .def = "256", .min = 2, .max = 1e6, .comp = COMP_NONE,               \
      .metavar = "L", .help = "tokens per calibration and perplexity window (TransMLA: 256)" },               \
    { .name = "ppl-tokens", .type = ARG_INT, .def = TMLA_STR(TMLA_PPL_TOKENS), .min = 2, .max = 1e12, .comp = COMP_NONE,         \
      .metavar = "N", .help = "tokens of the text used for perplexity" },                                     \
    { .name = "eval", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                                \
      .help = "held-out text for perplexity (default: the calibration text's validation split)" },           \
    { .name = "eval-ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                            \
      .help = "the held-out text as whitespace-separated token ids" },                                        \
    { .name = "split", .type = ARG_ENUM, .choices = WS_TMLA_SPLIT_CHOICES, .comp = COMP_CHOICES,              \
      .help = "perplexity on the calibration text's valid split (held out, default) or train (in-sample)" }

#endif
