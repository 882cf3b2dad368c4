/* ws_compare.h -- the kept comparison of the session's workspace: the last `compare kv-budget B`
 * (core/methods/budget_compare.h), which `plot compare` reuses when it answers the same question, and the runner
 * both use: inputs drawn from the workspace's calibration as `fit` says, and KQ-SVD fit at the
 * budget from the calibration's Grams when the session has them (unless `fit weights`; `kvsvd learn
 * kqsvd`'s projections only where their ranks are the budget's). Dropped when its model closes. */
#ifndef AL_WS_COMPARE_H
#define AL_WS_COMPARE_H

#include "budget_compare.h"
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
/* The comparison kept for m (NULL when none). */
const BudgetResult *ws_compare_last(const Session *s, const Model *m);

#endif
