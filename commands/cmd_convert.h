/* cmd_convert.h -- what other command groups may ask of the TransMLA group (cmd_convert.c):
 * whether the session holds a conversion of a model, and writing it (what `export DIR` does
 * after `convert mla`); and the statistics the TransMLA commands and figures share: activation
 * statistics of a calibration text (or the session's `calibrate`), and that text's tokens for
 * perplexity. */
#ifndef AL_CMD_CONVERT_H
#define AL_CMD_CONVERT_H

#include "registry.h"
#include "session.h"
#include "transmla.h"

/* True when the session holds a `convert mla` result of model m (NULL: of any model). */
bool cmd_convert_pending(const Session *s, const Model *m);
/* The session's `convert mla` result of m (NULL: of any model), or NULL when there is none; owned
 * by the session (valid until the next conversion or m closes). For `kv-cache`'s converted row. */
const TmlaResult *cmd_convert_result(const Session *s, const Model *m);
/* Exports the session's conversion to dir in DeepSeek-V3 layout (core/mla_export.h) and narrates
 * it on out; dtype "f32" | "f16" | "bf16" or NULL (the source's); force replaces an existing dir. */
int cmd_convert_export(Session *s, const char *dir, const char *dtype, size_t shard_mb, bool force, Out *out);

/* ================================================================ statistics for TransMLA */

/* What a TransMLA command uses for its PCAs and perplexities (cmd_tmla_stats). */
typedef struct {
    bool act;                 /* activation statistics in use ("WX-based"); false: weights */
    int n_layers;
    double **sigma, **mu;     /* (n_layers) E[x xᵀ] and E[x] of each layer's attention input when act
                                 (owned; mu entries NULL when unknown) */
    const int *ids;           /* tokens of the calibration text for perplexity, or NULL: the session
                                 calibration's (cmd_calib_text) or own_ids */
    int *own_ids;             /* owned tokens (a text read for `stats weights`), or NULL */
    size_t n_ids;             /* all of them */
    const char *text;         /* the text's file, for narration */
    size_t ppl_tokens;        /* how many of them perplexities use */
    size_t seqlen;            /* perplexity window */
    char source[512];         /* for narration: where the statistics / the text came from */
} TmlaStatsUse;

/* Resolves the keywords of CMD_TMLA_STATS_PARAMS for model m: `calib FILE` / `ids FILE` runs
 * `calibrate` on the text's training windows (up to `samples` of `seqlen`, attention inputs kept:
 * core/calib.h's G_X and S_X), which becomes the session's calibration of m (unless it already is
 * that one), else the session's calibration is used when it kept the attention input; `stats
 * weights` forces the weight-based PCAs (a given text then only serves the perplexity), `stats act`
 * fails without statistics. The text for perplexity is the calibration's (cmd_calib_text: none
 * after `calib load`). need_text: an error when there is none. Narrates on out what it computes.
 * Release with cmd_tmla_stats_release. */
int cmd_tmla_stats(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out);
void cmd_tmla_stats_release(TmlaStatsUse *u);

extern const char *const CMD_TMLA_STATS_CHOICES[];

/* The keywords cmd_tmla_stats reads (put them in a command's keyword list). */
#define CMD_TMLA_STATS_PARAMS                                                                                  \
    { .name = "stats", .type = ARG_ENUM, .choices = CMD_TMLA_STATS_CHOICES, .comp = COMP_CHOICES,             \
      .help = "PCA statistics: act (calibration activations) or weights (default: act when there are any)" }, \
    { .name = "calib", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                               \
      .help = "calibration text (model's tokenizer) for activation statistics and perplexity" },             \
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                                 \
      .help = "the calibration text as whitespace-separated token ids" },                                     \
    { .name = "samples", .type = ARG_INT, .def = "128", .min = 1, .max = 1e6, .comp = COMP_NONE,              \
      .metavar = "N", .help = "calibration windows of the text (TransMLA: 128)" },                            \
    { .name = "seqlen", .type = ARG_INT, .def = "256", .min = 2, .max = 1e6, .comp = COMP_NONE,               \
      .metavar = "L", .help = "tokens per calibration and perplexity window (TransMLA: 256)" },               \
    { .name = "ppl-tokens", .type = ARG_INT, .def = "4096", .min = 2, .max = 1e12, .comp = COMP_NONE,         \
      .metavar = "N", .help = "tokens of the text used for perplexity" }

#endif
