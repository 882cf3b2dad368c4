/* ws_check.c -- `check`'s shared services: the conversion's inputs found again, and the text of
 * its perplexity. See ws_check.h. */
#define _GNU_SOURCE
#include "ws_check.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "tokenizer.h"
#include "ws_calib.h"
#include "xform.h"
#include "ws_tmla.h"

/* The statistics of a conversion of src as the session has them now, for ci (n_layers entries,
 * owned by ci: ci_free): TransMLA's E[x xᵀ] and E[x] (with_mu), or TPA's E[x xᵀ] of layers
 * lo..hi. *ok false when the session has no calibration of src with attention inputs. */
static int ws_check_session_stats(Session *s, Model *src, bool with_mu, int lo, int hi, CheckInputs *ci, bool *ok) {
    const CalibStats *cs = NULL;
    *ok = false;
    ci->n_layers = src->cfg.n_layers;
    ci->hidden = src->cfg.hidden;
    if (ws_calib_stats(s, src, &cs) || !cs || !cs->has_x) { al_err_clear(); return AL_OK; }
    int rc;
    if (with_mu) rc = calib_input_arrays(cs, 0, -1, &ci->sigma, &ci->mu);
    else {
        size_t ntok;
        rc = ws_calib_fit_sigma(s, src, 2, lo, hi, &ci->sigma, &ntok);
    }
    if (rc) return rc;
    if (ci->mu) {                      /* no mean kept: every entry NULL, as the conversion had it */
        bool any = false;
        for (int l = 0; l < ci->n_layers; l++) any |= ci->mu[l] != NULL;
        if (!any) { free(ci->mu); ci->mu = NULL; }
    }
    snprintf(ci->calib, sizeof ci->calib, "%zu token%s of %s", cs->tokens[0], al_s(cs->tokens[0]), cs->source ? cs->source : "?");
    *ok = ci->sigma != NULL;
    return AL_OK;
}

int ws_check_keep(Session *s, const Model *m, uint64_t seed, bool plus_layer, size_t tokens, double **sigma, double **mu,
                  CheckInputs *keep) {
    CheckInputs drawn = {.seed = seed, .plus_layer = plus_layer, .tokens = tokens ? tokens : 64, .stats = sigma != NULL,
                         .n_layers = m->cfg.n_layers, .hidden = m->cfg.hidden, .sigma = sigma, .mu = mu};
    if (sigma) {
        const CalibStats *cs = NULL;
        drawn.digest = ci_digest(drawn.n_layers, drawn.hidden, (const double *const *)sigma, (const double *const *)mu);
        if (ws_calib_stats(s, m, &cs) == AL_OK && cs)
            snprintf(drawn.calib, sizeof drawn.calib, "%zu token%s of %s", cs->tokens[0], al_s(cs->tokens[0]), cs->source ? cs->source : "?");
        al_err_clear();
    }
    return ci_copy(&drawn, keep);
}

void ws_check_digest_begin(WsCheckDigest *d, const struct CalibStats *cst) {
    *d = (WsCheckDigest){.cst = cst};
}

/* Digests d's layers d->next..end-1, each formed here (layers no conversion formed). */
static int digest_formed(WsCheckDigest *d, int end) {
    const CalibStats *cst = d->cst;
    if (d->next >= end) return AL_OK;
    size_t D = (size_t)cst->sh.hidden;
    double *S = al_malloc3(D, D, sizeof(double), "an attention-input second moment");
    double *M = cst->sx ? al_malloc3(D, 1, sizeof(double), "an attention-input mean") : NULL;
    int rc = S && (M || !cst->sx) ? AL_OK : AL_ERR;
    for (; rc == AL_OK && d->next < end; d->next++) {
        rc = calib_second_moment(cst, d->next, S);
        if (rc == AL_OK && M) rc = calib_mean(cst, d->next, M);
        if (rc == AL_OK) d->h = ci_digest_layer(d->h, d->next, cst->sh.hidden, S, M);
    }
    free(S);
    free(M);
    return rc;
}

int ws_check_digest_layer(void *ctx, int l, const double *sigma, const double *mu) {
    WsCheckDigest *d = ctx;
    if (l < d->next || l >= d->cst->sh.n_layers)
        return al_err("the calibration's digest: layer %d out of order (next %d of %d)", l, d->next, d->cst->sh.n_layers);
    if (digest_formed(d, l)) return AL_ERR;
    d->h = ci_digest_layer(d->h, l, d->cst->sh.hidden, sigma, mu);
    d->next = l + 1;
    return AL_OK;
}

int ws_check_keep_calib(const Model *m, uint64_t seed, bool plus_layer, size_t tokens, WsCheckDigest *d,
                        CheckInputs *keep) {
    const CalibStats *cst = d->cst;
    if (digest_formed(d, cst->sh.n_layers)) return AL_ERR;
    CheckInputs drawn = {.seed = seed, .plus_layer = plus_layer, .tokens = tokens ? tokens : 64, .stats = true,
                         .n_layers = m->cfg.n_layers, .hidden = m->cfg.hidden, .digest = d->h};
    snprintf(drawn.calib, sizeof drawn.calib, "%zu token%s of %s", cst->tokens[0], al_s(cst->tokens[0]), cst->source ? cst->source : "?");
    return ci_copy(&drawn, keep);
}

int ws_check_take_session(Session *s, Model *src, bool with_mu, int lo, int hi, CheckInputs *ci, const char **why) {
    CheckInputs now = {0};
    bool ok;
    *why = "the session has no calibration of the source with attention inputs";
    if (ws_check_session_stats(s, src, with_mu, lo, hi, &now, &ok)) return AL_ERR;
    if (ok && ci_digest_kind_of(ci->digest_kind, now.n_layers, now.hidden, (const double *const *)now.sigma,
                                (const double *const *)now.mu) == ci->digest) {
        ci->sigma = now.sigma;
        ci->mu = now.mu;
        ci->n_layers = now.n_layers;
        ci->hidden = now.hidden;
        *why = NULL;
        return AL_OK;
    }
    if (ok) *why = "the session's calibration of the source is another one than the conversion's (its digest differs)";
    ci_free(&now);
    return AL_OK;
}

/* Bytes the session's statistics cs take in an export's CI_FILE (ci_write): per layer of lo..hi with
 * tokens, its E[x xᵀ] and, with_mu, its mean where the calibration kept sums (cs->sx). */
static size_t export_stats_bytes(const CalibStats *cs, bool with_mu, int lo, int hi) {
    size_t D = (size_t)cs->sh.hidden, n = 0;
    if (hi < 0 || hi >= cs->sh.n_layers) hi = cs->sh.n_layers - 1;
    for (int l = lo < 0 ? 0 : lo; l <= hi; l++)
        n += cs->tokens[l] ? D * D + (with_mu && cs->sx ? D : 0) : 0;
    return n * sizeof(double);
}

int ws_check_take_for_export(Session *s, Model *src, bool with_mu, int lo, int hi, CheckInputs *ci, const char **why) {
    const CalibStats *cs = NULL;
    *why = NULL;
    if (!ci->stats || ci->sigma) return AL_OK;
    if (ws_calib_stats(s, src, &cs) || !cs || !cs->has_x) {
        al_err_clear();
        *why = "the session has no calibration of the source with attention inputs";
        return AL_OK;
    }
    if (export_stats_bytes(cs, with_mu, lo, hi) > CI_MAX_BYTES) return AL_OK;   /* the digest alone: not formed */
    return ws_check_take_session(s, src, with_mu, lo, hi, ci, why);
}

int ws_check_inputs(Session *s, Model *src, const Args *a, bool with_mu, int lo, int hi, CheckInputs *ci, char *desc,
                    size_t cap) {
    bool given_t = args_given(a, "tokens"), given_s = args_given(a, "seed");
    if (given_t) ci->tokens = (size_t)args_int(a, "tokens");
    if (given_s) ci->seed = (uint64_t)args_int(a, "seed");
    if (ci->sigma && (ci->n_layers != src->cfg.n_layers || ci->hidden != src->cfg.hidden))
        return al_err("check: the recorded statistics are for %d layer%s of hidden %d; the source has %d of %d",
                      ci->n_layers, al_s(ci->n_layers), ci->hidden, src->cfg.n_layers, src->cfg.hidden);
    const char *why = NULL, *from = ci->from_file ? "the export folder" : "the session's calibration of the source";
    if (ci->stats && !ci->sigma) {
        from = "the session's calibration of the source";
        if (ws_check_take_session(s, src, with_mu, lo, hi, ci, &why)) return AL_ERR;
    }
    char seeds[96];
    snprintf(seeds, sizeof seeds, ci->plus_layer ? "seed %" PRIu64 " + layer" : "seed %" PRIu64, ci->seed);
    const char *same = given_t || given_s ? "`tokens`/`seed` as given" : "the conversion's own, as in its report";
    if (!ci->stats)
        snprintf(desc, cap, "%zu random Gaussian tokens, %s, unit variance (%s)", ci->tokens, seeds, same);
    else if (ci->sigma)
        snprintf(desc, cap, "%zu random Gaussian tokens, %s, with the %s of the conversion's calibration (%s; digest "
                 "%016" PRIx64 ", from %s) (%s)", ci->tokens, seeds, ci->mu ? "mean and second moment" : "second moment",
                 ci->calib[0] ? ci->calib : "?", ci->digest, from, same);
    else
        snprintf(desc, cap, "%zu random Gaussian tokens, %s, unit variance: the conversion drew with its calibration's "
                 "statistics (%s; digest %016" PRIx64 "), which are not at hand (%s), so these errors are not its "
                 "report's", ci->tokens, seeds, ci->calib[0] ? ci->calib : "?", ci->digest, why ? why : "?");
    return AL_OK;
}

/* The session's model whose folder is path (NULL when none is loaded there). */
static Model *ws_check_loaded_at(Session *s, const char *path) {
    char a[PATH_MAX], b[PATH_MAX];
    if (!path || !realpath(path, a)) return NULL;
    for (size_t i = 0; i < s->nmodels; i++)
        if (s->models[i]->path && realpath(s->models[i]->path, b) && !strcmp(a, b)) return s->models[i];
    return NULL;
}

int ws_check_source(Session *s, const Args *a, const char *path, const char *dir, const char *manifest, Model **src,
                    Model **opened) {
    const char *name = args_str(a, "source");
    *src = *opened = NULL;
    if (name && *name) {
        if (!(*src = session_find(s, name))) return al_err("check: no loaded model named '%s'", name);
        return AL_OK;
    }
    if (!path || !*path) return al_err("check: %s/%s names no source model: load it and give source NAME", dir, manifest);
    if ((*src = ws_check_loaded_at(s, path))) return AL_OK;
    if (model_open(path, opened) != AL_OK)
        return al_err_ctx("check: the source %s named by %s/%s (load it and give source NAME)", path, dir, manifest);
    *src = *opened;
    return AL_OK;
}

void ws_check_recorded_line(Out *out, const CheckInputs *ci, bool fits, const char *why) {
    char seeds[64];
    snprintf(seeds, sizeof seeds, ci->plus_layer ? "seed %" PRIu64 " + layer" : "seed %" PRIu64, ci->seed);
    if (!ci->stats)
        out_printf(out, "check inputs recorded: %zu token%s, %s, unit variance\n", ci->tokens, al_s(ci->tokens), seeds);
    else if (fits)
        out_printf(out, "check inputs recorded: %zu token%s, %s, the calibration's statistics (%s) in %s\n", ci->tokens, al_s(ci->tokens),
                   seeds, ci->calib, CI_FILE);
    else
        out_printf(out, "check inputs recorded: %zu token%s, %s and the digest of the calibration's statistics, not the "
                   "statistics (%s): `check DIR` needs that calibration in the session\n", ci->tokens, al_s(ci->tokens), seeds,
                   why ? why : "over the size kept in the folder");
}

/* ================================================================ the text */


static size_t default_seqlen(const Model *m) {
    long ctx = m->cfg.max_pos > 0 ? m->cfg.max_pos : 512;
    return (size_t)(ctx < 512 ? ctx : 512);
}

/* Whether m is one of the session's models (else opened by a check for itself). */
static bool in_session(const Session *s, const Model *m) {
    for (size_t i = 0; i < s->nmodels; i++)
        if (s->models[i] == m) return true;
    return false;
}

/* The tokens of a text file for m: through the session's tokenizer of m, or, for a model the
 * check opened itself, a tokenizer of its own (the session keeps nothing of it). */
int ws_check_tokens(Session *s, Model *m, const char *file, int **ids, size_t *n) {
    if (in_session(s, m)) return ws_read_tokens(s, m, file, false, ids, n);
    char *path = NULL, *text = NULL;
    Tokenizer *tk = NULL;
    size_t len;
    int rc = tok_find(m->path, &path);
    if (rc == AL_OK) rc = tok_open(path, &tk);
    if (rc == AL_OK && !(text = al_read_file(file, &len))) rc = AL_ERR;
    if (rc == AL_OK) rc = tok_encode(tk, text, len, true, ids, n);
    for (size_t i = 0; rc == AL_OK && i < *n; i++)
        if ((*ids)[i] < 0 || (*ids)[i] >= m->cfg.vocab) rc = al_err("%s: token id %d is outside the vocabulary", file, (*ids)[i]);
    if (rc) { free(*ids); *ids = NULL; *n = 0; }
    free(path);
    free(text);
    tok_free(tk);
    return rc;
}

int ws_check_input(Session *s, Model *m, const Args *a, int **ids, size_t *n, const char **name) {
    const char *text = args_str(a, "text"), *idf = args_str(a, "ids");
    bool has_text = text && *text, has_ids = idf && *idf;
    *ids = NULL, *n = 0, *name = NULL;
    if (has_text && has_ids) return al_err("check: give `text FILE` or `ids FILE` (as ppl takes them), not both");
    if (!has_text && !has_ids) return AL_OK;
    *name = has_ids ? idf : text;
    /* ids: ws_read_tokens reads them for any model (no tokenizer), checked against m's vocabulary */
    int rc = has_ids ? ws_read_tokens(s, m, idf, true, ids, n) : ws_check_tokens(s, m, text, ids, n);
    return rc ? al_err_ctx("check: %s %s", has_ids ? "ids" : "text", *name) : AL_OK;
}

int ws_check_text(Session *s, Model *src, const Args *a, CheckText *t) {
    memset(t, 0, sizeof *t);
    const char *file;
    if (ws_check_input(s, src, a, &t->own, &t->n, &file)) return AL_ERR;
    if (file) {
        t->ids = t->own;
        t->seqlen = default_seqlen(src);
        if (t->seqlen > t->n) t->seqlen = t->n;
        snprintf(t->on, sizeof t->on, "%s (given: %zu token%s), windows of %zu", file, t->n, al_s(t->n), t->seqlen);
        return AL_OK;
    }
    return ws_check_heldout(s, src, t);
}

int ws_check_heldout(Session *s, Model *src, CheckText *t) {
    memset(t, 0, sizeof *t);
    CalibText ct;
    size_t first, count;
    if (!ws_calib_text(s, src, &ct)) {
        snprintf(t->on, sizeof t->on, "no text: give text FILE, or calibrate %s on a text first", src->name);
        return AL_OK;
    }
    size_t L = ct.req.seqlen;
    if (calib_windows(ct.n, L, CALIB_VALID, 0, &first, &count)) {
        al_err_clear();
        snprintf(t->on, sizeof t->on, "no text: the calibration text %s has no validation window of %zu token%s; give "
                 "text FILE", ct.req.text ? ct.req.text : "?", L, al_s(L));
        return AL_OK;
    }
    /* as `convert mla` measures it: from the first validation window to the end, at most its ppl-tokens default */
    size_t lo = first * L, hi = ct.n - lo > TMLA_PPL_TOKENS ? lo + TMLA_PPL_TOKENS : ct.n;
    size_t c0 = ct.first * L, c1 = (ct.first + ct.count) * L;
    bool cal = ct.count && lo < c1 && c0 < hi;
    t->ids = ct.ids + lo;
    t->n = hi - lo;
    t->seqlen = L;
    snprintf(t->on, sizeof t->on, "%s (the validation split of %s, tokens %zu-%zu%s), windows of %zu",
             cal ? "in-sample" : "held out", ct.req.text ? ct.req.text : "?", lo, hi - 1, cal ? ", calibrated on" : "", L);
    return AL_OK;
}

void ws_check_text_free(CheckText *t) {
    free(t->own);
    t->own = NULL;
    t->ids = NULL;
}

void ws_check_ppl_line(Out *out, const CheckText *t, size_t tokens, double nll_before, double nll_after,
                       const char *after) {
    if (!t->ids) out_printf(out, "perplexity: not measured (%s)\n", t->on);
    else if (!tokens)
        out_printf(out, "perplexity: not measured on %s (see the notes)\n", t->on);
    else if (!isfinite(nll_before) || !isfinite(nll_after))   /* NaN weights: nan, as `ppl` prints it */
        out_printf(out, "perplexity on %zu token%s, %s: %.6g before (source), %.6g after (%s): not finite (a NaN "
                   "or infinite weight or activation on the way: `ppl` gives the same)\n", tokens, al_s(tokens), t->on,
                   exp(nll_before), exp(nll_after), after);
    else
        out_printf(out, "perplexity on %zu token%s, %s: %.6g before (source), %.6g after (%s) (%+.2f%%; log %.5f -> "
                   "%.5f)\n", tokens, al_s(tokens), t->on, exp(nll_before), exp(nll_after), after,
                   100.0 * (exp(nll_after - nll_before) - 1), nll_before, nll_after);
}

/* ================================================================ another model's transformation */

void ws_check_elsewhere(Session *s, const Model *m, bool check, const char *verb, char *buf, size_t cap) {
    *buf = 0;
    for (const Xform *x = xform_list(s); x; x = x->next) {
        if (x->src == m || !(check ? x->kind->check != NULL : x->kind->export_to != NULL)) continue;
        char d[256];
        xform_describe(x, d, sizeof d);
        snprintf(buf, cap, "`use %s`, then `%s` (%s has %s%s%s)", x->src->name, verb, x->src->name, x->cmd ? "`" : "",
                 x->cmd ? x->cmd : d, x->cmd ? "`" : "");
        return;
    }
}
