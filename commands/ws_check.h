/* ws_check.h -- what `check` shares across the methods (TransMLA, TPA): the inputs a conversion's
 * report drew, found again (core/methods/check_inputs.h: the statistics from the export folder, or the
 * session's calibration of the source when its digest is the conversion's; else unit variance,
 * said in one line), and the text the perplexity before/after is measured on (`text FILE`, else
 * the held-out windows of the session's calibration text of the source; none: no perplexity,
 * never random token ids), with the lines that say which. */
#ifndef AL_WS_CHECK_H
#define AL_WS_CHECK_H

#include "check_inputs.h"
#include "registry.h"
#include "session.h"

/* What a conversion of m keeps for its check (into *keep, owned by the result): its report's seed
 * (plus_layer: + layer), tokens and, when sigma (n_layers entries, mu may be NULL) is given, the
 * statistics' digest, where they came from (the session's calibration of m) and a copy of them
 * when they fit CI_MAX_BYTES. */
int ws_check_keep(Session *s, const Model *m, uint64_t seed, bool plus_layer, size_t tokens, double **sigma, double **mu,
                  CheckInputs *keep);
struct CalibStats;
/* The digest of calibration cst's statistics (every layer's second moment and mean, as
 * calib_input_arrays forms them: ci_digest's value) taken while a conversion forms them one layer at a
 * time (TmlaOpts.moments_seen = ws_check_digest_layer, moments_ctx = the WsCheckDigest): the layers it
 * does not form (not converted) are formed here, in layer order, so none is formed twice. */
typedef struct WsCheckDigest {
    const struct CalibStats *cst;
    uint64_t h;               /* ci_digest_layer's value so far (0: no layer yet) */
    int next;                 /* the next layer to digest */
} WsCheckDigest;
void ws_check_digest_begin(WsCheckDigest *d, const struct CalibStats *cst);
int ws_check_digest_layer(void *d, int l, const double *sigma, const double *mu);
/* ws_check_keep with the statistics of d's calibration, over CI_MAX_BYTES: their digest (d finished
 * with the layers after the last it saw), and no copy (ws_check_keep keeps none of such either). */
int ws_check_keep_calib(const Model *m, uint64_t seed, bool plus_layer, size_t tokens, WsCheckDigest *d,
                        CheckInputs *keep);
/* Takes the session's statistics of src into ci (which has none yet) when their digest is ci's
 * (the conversion's), *why NULL; else leaves ci without them and *why says what was missing.
 * `check DIR` takes them so at any size. */
int ws_check_take_session(Session *s, Model *src, bool with_mu, int lo, int hi, CheckInputs *ci, const char **why);
/* ws_check_take_session for an export (`export` after `convert mla` / `convert tpa`), with the one size
 * rule: where the statistics (layers lo..hi with tokens x (D² + D with_mu and a mean kept) x 8 bytes) are
 * over CI_MAX_BYTES they are not formed (the export records the digest alone) and *why is NULL ("over
 * the size kept in the folder"); where the session has no calibration of src with attention inputs,
 * *why says so at any size. Nothing to take (no statistics, or ci has them already): *why NULL. */
int ws_check_take_for_export(Session *s, Model *src, bool with_mu, int lo, int hi, CheckInputs *ci, const char **why);
/* The export's line on what it recorded for `check DIR` (fits: the statistics went into CI_FILE;
 * why: why they are not at hand, NULL: too large). */
void ws_check_recorded_line(Out *out, const CheckInputs *ci, bool fits, const char *why);

/* Completes ci (seed, tokens and digest set: a conversion's, or read from an export) with the
 * statistics to draw with: those already in ci (from the folder), else the session's calibration
 * of src when its digest matches (lo..hi, with_mu as above), else none (unit variance). `tokens`
 * / `seed` given in a overrides. desc (cap bytes) gets one line saying what is drawn and, when
 * the conversion's statistics are not at hand, that the numbers differ from its report. */
int ws_check_inputs(Session *s, Model *src, const Args *a, bool with_mu, int lo, int hi, CheckInputs *ci, char *desc,
                    size_t cap);

/* The source `check DIR` compares an export with: `source NAME` (a's keyword), else the session's
 * model at path (what the export's manifest, dir/manifest, names), else that folder opened
 * (*opened: the caller frees it, model_free; NULL otherwise). */
int ws_check_source(Session *s, const Args *a, const char *path, const char *dir, const char *manifest, Model **src,
                    Model **opened);

/* The text of a check's perplexity. */
typedef struct {
    const int *ids;           /* the tokens (n), windows of seqlen; NULL: no text */
    size_t n, seqlen;
    int *own;                 /* owned tokens of `text FILE` */
    char on[384];             /* which tokens ("the held-out validation windows of story.txt ...") */
} CheckText;

/* The tokens of text file `file` for m (a session model, or one a check opened: its own tokenizer
 * then, nothing kept); caller frees *ids. */
int ws_check_tokens(Session *s, Model *m, const char *file, int **ids, size_t *n);
/* check's input for m: `text FILE` (encoded as ppl encodes it) or `ids FILE` (token ids, as `ppl ids FILE`
 * reads them) -- a's keywords, one of them; *name the file, NULL (nothing read) when neither is given.
 * Caller frees *ids. */
int ws_check_input(Session *s, Model *m, const Args *a, int **ids, size_t *n, const char **name);
/* `text FILE` or `ids FILE` (a's keywords: ws_check_input), else the validation windows of the session's calibration text of
 * src, else none (t->ids NULL, t->on says how to get one). Free with ws_check_text_free. */
int ws_check_text(Session *s, Model *src, const Args *a, CheckText *t);
/* The validation windows of the session's calibration text of src (as `convert mla` measures its
 * perplexity), else none (t->ids NULL, t->on says how to get one): ws_check_text without `text`. */
int ws_check_heldout(Session *s, Model *src, CheckText *t);
void ws_check_text_free(CheckText *t);
/* The perplexity line: before (src) and after (`after`: what ran) on t, or the line saying there
 * is none. */
void ws_check_ppl_line(Out *out, const CheckText *t, size_t tokens, double nll_before, double nll_after,
                       const char *after);

/* For `check` / `export` (verb) when the current model m has nothing to measure or write: the newest
 * transformation of another loaded model that could be (check: one with a check), as "`use a`, then `check`
 * (a has `truncate vo rank 4`)" into buf; "" when none. */
void ws_check_elsewhere(Session *s, const Model *m, bool check, const char *verb, char *buf, size_t cap);

/* The keywords of check's text: `text FILE`, `ids FILE`. */
#define PARAM_CHECK_TEXT                                                                                   \
    { .name = "text", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                              \
      .help = "a text for the perplexity before/after (default: the held-out windows of the session's "     \
              "calibration text of the source)" },                                                          \
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",                               \
      .help = "token ids instead of a text (as `ppl ids FILE` reads them)" }

#endif
