/* ws_mlastrat.h -- the published one-shot MLA strategies in the commands (core/methods/mla_strategy.h):
 * `convert mla strategy transmla|mha2mla-...|care[-alloc]`'s keywords and its line, the strategy list of
 * `convert mla-table ... strategies all|S,S,...` and the table it computes, which `plot mla-table`
 * draws. */
#ifndef AL_WS_MLASTRAT_H
#define AL_WS_MLASTRAT_H

#include "mla_strategy.h"
#include "registry.h"
#include "session.h"

/* convert mla's strategy keywords: the strategy as one word (the table's row names) and MHA2MLA's r. */
#define PARAM_MLASTRAT                                                                                          \
    { .name = "strategy", .type = ARG_STRING, .def = "transmla", .comp = COMP_NONE,                              \
      .metavar = "transmla|mha2mla-SEL[-split][-rN]|care[-alloc]",                                                    \
      .help = "transmla; mha2mla-high|low|uniform|2norm (partial RoPE, SVD of the weights; -split: K and V apart); " \
              "care (covariance-aware); -alloc: CARE's kv ranks across layers" },                              \
    { .name = "rope-pairs", .type = ARG_INT, .min = 1, .max = 1 << 16, .comp = COMP_NONE, .metavar = "r",         \
      .help = "mha2mla: frequencies kept per KV head (default rope-dim / (2 x KV heads), at least 1)" }

/* The strategy convert mla's keywords ask for; *given: a keyword of it was given. */
int ws_mlastrat_opts(const Args *a, MlastratOpts *s, bool *given);
/* The line saying what the strategy did (and, for mha2mla, that it is not exact at full rank). */
void ws_mlastrat_line(Out *out, const Model *m, const MlastratOpts *s, const TmlaResult *r);

/* Parses `all` or a comma-separated list of rows (transmla, mha2mla-high|low|uniform|2norm[-split][-rN],
 * care; -alloc: CARE's allocation) into s[cap]. */
int ws_mlastrat_parse_list(const char *list, MlastratOpts *s, size_t cap, size_t *n);

/* Parses kv-ranks "R,R,..." (numbers or `full`) into R[cap] (what: the command, for the error). */
int ws_mlastrat_ranks(const char *what, const char *list, int *R, size_t cap, size_t *n);

/* The strategies table of m: its statistics (ws_tmla_stats, or ws_tmla_fig_stats for a figure: fig),
 * ranks, the strategies list and the perplexity text from a; narrates the statistics on out. */
int ws_mlastrat_table(Session *s, Model *m, const Args *a, const int *ranks, size_t n_ranks, bool fig, Out *out,
                      MlastratTable **t);
/* The strategies of list (all: eight) at every budget of budgets (nb, KV values per token per layer) that leaves
 * a kv rank: R = budget - the RoPE dims TransMLA keeps by default, on every attention layer, with the session's
 * calibration of m (its attention inputs: `calibrate FILE` first), perplexity on ids (n, windows of seqlen; the
 * forward pass's own eps, as the model's). *ns: the strategies; *t rank-major (no row: an error says why). */
int ws_mlastrat_budgets(Session *s, Model *m, const char *list, const size_t *budgets, size_t nb, const int *ids,
                        size_t n, size_t seqlen, MlastratTable **t, size_t *ns);
/* The table as rows (kv_rank, strategy, rope, latent, alloc, kv_values, rank_min, rank_max,
 * source_rope_removed, score_err, out_err, nll, ppl). */
Table *ws_mlastrat_rows(const Model *m, const MlastratTable *t);

#endif
