/* budget_text.h -- `compare kv-budget B text FILE`: every KV-cache reduction at one budget on real tokens
 * through the model's forward pass, width against length. For a budget of B values per token per layer
 * (the model caches W):
 *   width        budget_compare.h's methods (farr, transmla, kqsvd, tpa-a, tpa-b, mean-pool) fit at B, each
 *                layer's attention-output error on the attention inputs the model computes for the first window
 *                of the text (fit, and TransMLA's FreqFold picked, on the second window; on the first when the
 *                text has one), and the perplexity of the text with every attention layer replaced by the
 *                method's (fwd_set_attn; kqsvd has none: its projections act on the cached keys after RoPE);
 *   length       token eviction (core/methods/evict.h: streaming-llm, h2o, snapkv) at the cache C of the same
 *                keys read per window (evict_capacity_layers(seqlen, B / W, the layers' windows)): its layer errors (that layer alone
 *                evicting, the others whole, so its inputs are the model's) and the perplexity with every layer
 *                evicting;
 *   combination  each width method that runs in the pass at 2B with StreamingLLM on top at the cache that
 *                brings it back to B (evict_capacity(seqlen, B / W'), W' its cache at 2B): its layers' window
 *                C - sinks plus the sink tokens (AttnLayer.window, .sink_tokens);
 *   model        the model as it is (W values).
 * Errors are relative Frobenius errors (unsquared) of the layer's output after W_O; perplexities over
 * non-overlapping windows of seqlen tokens (fwd_ppl). In compute bf16 the farr, tpa and mean-pool layers run in the
 * pass as their dense export runs (budget_run.h; StreamingLLM on top then as the eviction's key mask): one number
 * with `truncate` / `convert tpa` and `ppl`; the errors stay the float32 layers'. */
#ifndef AL_BUDGET_TEXT_H
#define AL_BUDGET_TEXT_H

#include "budget_compare.h"
#include "evict.h"
#include "forward.h"

typedef enum { BTEXT_MODEL, BTEXT_WIDTH, BTEXT_EVICT, BTEXT_COMBO } btext_family;

typedef struct {
    char method[40];          /* "model", "farr" .. "mean-pool", "streaming-llm", "h2o", "snapkv", "transmla+streaming-llm" */
    btext_family family;
    bool ok;                  /* it meets the budget and ran */
    double kv_values;         /* values per token per layer it reads on average over a window (width: what it
                                 caches; eviction: W times the kept share; combination: both) */
    char setting[160];        /* ranks, capacity, or why not */
    double out_err;           /* mean over the layers of its layers' output errors (NaN: none) */
    double nll;               /* mean NLL per predicted token of the text (NaN: does not run in the pass) */
} BudgetTextRow;

typedef struct {
    size_t budget, kv_model;  /* B, W */
    size_t seqlen, tokens, windows;   /* the perplexity's windows and tokens predicted */
    size_t err_tokens;        /* tokens of the first window the layer errors are measured on */
    bool fit_own;             /* the width methods fit on the first window itself (the text has one window) */
    size_t capacity;          /* C of the eviction rows */
    double read_frac;         /* the keys they read over those read with every key (the layers' windows too) */
    bool windowed;            /* some layer has a sliding window shorter than seqlen (it reads at most that) */
    int n_rows;
    BudgetTextRow *rows;      /* model, width methods, evictions, combinations */
    BudgetResult *layers;     /* per-layer rows of the width methods (budget_compare.h), on the text */
    double *evict_err;        /* (layers x EVICT_NKINDS) the evictions' per-layer output errors, layer-major */
} BudgetText;

typedef struct {
    size_t budget;            /* B */
    const int *ids;           /* the text's tokens (n), windows of seqlen */
    size_t n, seqlen;
    const double *const *sigma;   /* NULL, or per layer E[x xᵀ] for TransMLA's and TPA's fits (calibration) */
    const CalibStats *calib;  /* NULL, or the session's calibration: KQ-SVD's Grams in the layer table */
    const KqProj *kq;         /* NULL, or `kvsvd learn kqsvd`'s projections */
} BudgetTextOpts;

/* The comparison on f's model (GQA / MHA, every attention layer); al_progress per stage; Ctrl-C returns
 * AL_INTERRUPTED. f comes back without overrides or eviction. */
int budget_text(Forward *f, const BudgetTextOpts *o, BudgetText **out);
void budget_text_free(BudgetText *t);

#endif
