/* ws_compare.h -- the kept comparison of the session's workspace: the last `compare kv-budget B`
 * (core/methods/budget_compare.h), which `plot compare` reuses when it answers the same question, and the runner
 * both use: inputs drawn from the workspace's calibration as `fit` says, and KQ-SVD fit at the
 * budget from the calibration's Grams when the session has them (unless `fit weights`; `kvsvd learn
 * kqsvd`'s projections only where their ranks are the budget's). Dropped when its model closes. */
#ifndef AL_WS_COMPARE_H
#define AL_WS_COMPARE_H

#include "budget_compare.h"
#include "budget_text.h"
#include "registry.h"
#include "ws_check.h"
#include "session.h"

/* What a comparison runs with: the key of the result the session keeps. Zero fields (and
 * layer_lo < 0) match any kept result and take defaults when the comparison has to run. */
typedef struct {
    size_t budget;            /* B, values cached per token per layer (0: the kept one's) */
    int layer_lo, layer_hi;   /* inclusive, resolved; layer_lo < 0: the kept ones, else all */
    size_t tokens;            /* evaluation tokens (0: the kept one's, else 64) */
    int fit;                  /* 0 auto, 1 weights, 2 calib (PARAM_FIT_CHOICES) */
    uint64_t seed;            /* of the random tokens (0: the kept one's, else AL_SEED_COMPARE) */
} WsCmpKey;

/* Runs the comparison q of m without keeping it: *out is the caller's (budget_result_free).
 * q->budget must be set. */
int ws_compare_run(Session *s, Model *m, const WsCmpKey *q, BudgetResult **out);
/* Makes r (taken over, also on failure) the kept comparison of m, run for q. */
int ws_compare_keep(Session *s, Model *m, const WsCmpKey *q, BudgetResult *r);
/* The kept comparison of m when it matches q (same budget, tokens and calibration, and its layers
 * cover q's; *reused = true), else runs ws_compare_run for q and keeps that (*reused = false;
 * q->budget must then be set). *out is owned by the workspace: valid until the next comparison or
 * m closes. Rows of layers outside q's range may be present: filter by layer. */
int ws_compare_get(Session *s, Model *m, const WsCmpKey *q, const BudgetResult **out, bool *reused);
/* ---- on real tokens (`compare kv-budget B text FILE`, core/methods/budget_text.h) */

/* The keywords of a comparison on a text (both `compare` and `plot compare-budgets` declare them). */
#define WS_CMP_TEXT_KW                                                                                            \
    { .name = "text", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                                    \
      .help = "compare on this text through the forward pass: perplexities, and layer errors on its hidden states" }, \
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                                     \
      .help = "the same on token ids (whitespace-separated) instead of a text" },                                 \
    { .name = "heldout", .type = ARG_FLAG, .comp = COMP_NONE,                                                     \
      .help = "the same on the held-out windows of the session's calibration text" },                            \
    { .name = "seqlen", .type = ARG_INT, .min = 4, .max = 1 << 20, .comp = COMP_NONE, .metavar = "L",             \
      .help = "perplexity window of text / ids (default: min(512, the model's context))" }

/* True when a asks for a comparison on real tokens (text, ids or heldout given). */
bool ws_compare_on_text(const Args *a);
/* Its tokens: `text FILE` (m's tokenizer), `ids FILE`, or `heldout` (ws_check_heldout: none when the session
 * has no calibration text, said in t->on, and an error here); windows of `seqlen`. Free with
 * ws_check_text_free. */
int ws_compare_text(Session *s, Model *m, const Args *a, CheckText *t);
/* budget_text on t at budget B, with the calibration's second moments and Grams as `fit` (0 auto, 1 weights,
 * 2 calib) says; *out the caller's (budget_text_free). */
int ws_compare_text_run(Session *s, Model *m, int fit, size_t budget, const CheckText *t, BudgetText **out);

/* The comparison kept for m (NULL when none). */
const BudgetResult *ws_compare_last(const Session *s, const Model *m);

#endif
