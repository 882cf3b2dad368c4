/* ws_tmla.c -- TransMLA's statistics (ws_tmla.h): which PCA statistics and perplexity text a
 * TransMLA command uses, calibrating the workspace on a given text when needed. */
#define _GNU_SOURCE
#include "ws_tmla.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_inputs.h"
#include "ws_calib.h"

const char *const WS_TMLA_STATS_CHOICES[] = {"act", "weights", NULL};
const char *const WS_TMLA_SPLIT_CHOICES[] = {"train", "valid", NULL};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* True when the session's calibration of m came from this request (train windows, attention
 * inputs kept), so `calib FILE` does not run it again. */
static bool calib_matches(Session *s, const Model *m, const CalibRequest *rq) {
    CalibText ct;
    const CalibStats *st = NULL;
    return ws_calib_text(s, m, &ct) && ws_calib_stats(s, m, &st) == AL_OK && st && st->has_x &&
           !strcmp(ct.req.text, rq->text) && ct.req.ids_file == rq->ids_file && ct.req.samples == rq->samples &&
           ct.req.seqlen == rq->seqlen && ct.req.split == rq->split;
}

/* `calib FILE` / `ids FILE` with activation statistics: the session's calibration of m on the text's
 * training windows (run here unless it already is that one), or with u->scoped u's own. */
static int calibrate_text(Session *s, Model *m, const CalibRequest *rq, TmlaStatsUse *u, Out *out) {
    if (calib_matches(s, m, rq)) return AL_OK;
    int *ids = NULL;
    size_t n = 0;
    if (ws_read_tokens(s, m, rq->text, rq->ids_file, &ids, &n)) return AL_ERR;
    if (n < rq->seqlen) {
        free(ids);
        return al_err("%s has %zu token%s, less than one calibration window of seqlen %zu: give seqlen %zu or less",
                      rq->text, n, al_s(n), rq->seqlen, n);
    }
    double t0 = now_s();
    if (u->scoped && !(u->own = al_calloc(1, sizeof *u->own, "a figure's calibration"))) { free(ids); return AL_ERR; }
    int rc = u->scoped ? ws_calib_run_own(s, m, ids, n, rq, u->own, out) : ws_calib_run(s, m, ids, n, rq, out);
    CalibText ct;
    if (rc == AL_OK && (u->scoped ? ws_calib_state_text(u->own, &ct) : ws_calib_text(s, m, &ct)))
        out_printf(out, "activation statistics of %s: %zu window%s x %zu tokens of %s (%.2f s)%s\n", m->name, ct.count, al_s(ct.count),
                   rq->seqlen, rq->text, now_s() - t0,
                   u->scoped ? "; this command's own, the session's calibration is unchanged" : "");
    return rc;
}

void ws_tmla_stats_release(TmlaStatsUse *u) {
    calib_free_arrays(u->n_layers, u->sigma, u->mu);
    free(u->own_ids);
    free(u->eval_ids);
    u->sigma = u->mu = NULL;
    u->own_ids = u->eval_ids = NULL;
    if (u->own) ws_calib_drop_all(u->own);
    free(u->own);
    u->own = NULL;
}

/* Perplexity on a held-out text (`eval FILE` / `eval-ids FILE`): its tokens from the start. */
static int ppl_eval_text(Session *s, Model *m, const char *ef, const char *ei, TmlaStatsUse *u, size_t *n) {
    bool text = ef && *ef;
    if (ws_read_tokens(s, m, text ? ef : ei, !text, &u->eval_ids, n)) return AL_ERR;
    u->ids = u->eval_ids;
    u->text = text ? ef : ei;
    snprintf(u->ppl_on, sizeof u->ppl_on, "held out (%s, not calibrated on)", u->text);
    return AL_OK;
}

/* The perplexity tokens (see ws_tmla.h) within the n tokens at u->ids, of which [c0, c1) were
 * calibrated on (c1 == 0: none): u->ids moves to the first one, *avail says how many follow. */
static int ppl_tokens(Session *s, Model *m, const Args *a, TmlaStatsUse *u, size_t n, size_t c0, size_t c1,
                      size_t *avail) {
    const char *ef = args_str(a, "eval"), *ei = args_str(a, "eval-ids");
    bool held = (ef && *ef) || (ei && *ei);
    int split = args_enum(a, "split");       /* -1 absent (valid when there is one), 0 train, 1 valid */
    size_t lo = 0, hi = n, L = u->seqlen, f, cnt;
    if ((ef && *ef) && (ei && *ei)) return al_err("give eval FILE (a text) or eval-ids FILE (token ids), not both");
    if (held && split >= 0)
        return al_err("give eval FILE (a held-out text) or split train|valid (of the calibration text), not both");
    if (held) {
        if (ppl_eval_text(s, m, ef, ei, u, &hi)) return AL_ERR;
    } else if (split == 0 && c1 > c0) {
        lo = c0;
        hi = c1 < n ? c1 : n;
        snprintf(u->ppl_on, sizeof u->ppl_on, "in-sample (the calibrated windows of %s, tokens %zu-%zu)", u->text, lo,
                 hi - 1);
    } else if (split == 0) {
        if (calib_windows(n, L, CALIB_TRAIN, 0, &f, &cnt)) return al_err_ctx("split train of %s", u->text);
        hi = cnt * L;
        snprintf(u->ppl_on, sizeof u->ppl_on, "the training split of %s (tokens 0-%zu; not calibrated on)", u->text,
                 hi - 1);
    } else if (calib_windows(n, L, CALIB_VALID, 0, &f, &cnt) == AL_OK) {
        lo = f * L;
        bool cal = c1 > c0 && lo < c1 && c0 < hi;      /* calibrated on the validation split itself */
        snprintf(u->ppl_on, sizeof u->ppl_on, "%s (the validation split of %s, tokens %zu-%zu%s)",
                 cal ? "in-sample" : "held out", u->text, lo, hi - 1, cal ? ", calibrated on" : "");
    } else if (split == 1) {
        return al_err_ctx("split valid of %s", u->text);
    } else
        snprintf(u->ppl_on, sizeof u->ppl_on, "%s (%s has no validation window of %zu token%s: give eval FILE for a "
                 "held-out text)", c1 > c0 ? "in-sample" : "not calibrated on", u->text, L, al_s(L));
    u->in_sample = !held && c1 > c0 && lo < c1 && c0 < hi;
    u->ids += lo;
    *avail = hi - lo;
    return AL_OK;
}

/* The statistics: the session's calibration of m when it kept the attention input (act), with the
 * narration of where they came from. */
static int stats_of(Session *s, Model *m, int choice, const CalibRequest *rq, bool given, bool lazy, TmlaStatsUse *u) {
    const CalibStats *cst = NULL;
    if (u->own) cst = u->own->st;
    else ws_calib_stats(s, m, &cst);
    if (!cst || choice == 1) return AL_OK;
    if (!cst->has_x && choice == 0)
        return al_err("the session's calibration of %s kept no attention-input second moments: calibrate again "
                      "with `inputs on`, or give calib FILE", m->name);
    if (!cst->has_x) return AL_OK;
    size_t D = (size_t)cst->sh.hidden;
    int rc = AL_OK;
    if (lazy && (size_t)cst->sh.n_layers * D * D * sizeof(double) > CI_MAX_BYTES) u->cst = cst;
    else rc = calib_input_arrays(cst, 0, -1, &u->sigma, &u->mu);
    u->act = rc == AL_OK;
    if (given)
        snprintf(u->source, sizeof u->source, "activations of %zu x %zu tokens of %s", cst->seqs[0], cst->seqlen, rq->text);
    else
        snprintf(u->source, sizeof u->source, "activations of the session's calibration (%zu token%s of %s)%s",
                 cst->tokens[0], al_s(cst->tokens[0]), cst->source ? cst->source : "?",
                 !cst->sx && m->cfg.qkv_bias ? "; it keeps no input mean, so the bias cross terms are left out" : "");
    return rc;
}

static int tmla_stats(Session *s, Model *m, const Args *a, bool need_text, bool scoped, bool lazy, TmlaStatsUse *u,
                      Out *out) {
    memset(u, 0, sizeof *u);
    u->scoped = scoped;
    u->n_layers = m->cfg.n_layers;
    int choice = args_enum(a, "stats");            /* -1 absent, 0 act, 1 weights */
    const char *calib = args_str(a, "calib"), *idsf = args_str(a, "ids");
    bool has_text = calib && *calib, has_ids = idsf && *idsf;
    if (has_text && has_ids) return al_err("give calib FILE (a text) or ids FILE (token ids), not both");
    size_t seqlen = (size_t)args_int(a, "seqlen"), n = 0, c0 = 0, c1 = 0, avail = 0;
    CalibRequest rq = {.text = has_text ? calib : idsf, .ids_file = has_ids, .samples = (size_t)args_int(a, "samples"),
                       .seqlen = seqlen, .split = CALIB_TRAIN, .with_x = true};
    int rc = AL_OK;
    if ((has_text || has_ids) && choice == 1) {    /* weights; the text only for the perplexity */
        rc = ws_read_tokens(s, m, rq.text, rq.ids_file, &u->own_ids, &n);
        u->ids = u->own_ids;
        u->text = rq.text;
    } else if (has_text || has_ids)
        rc = calibrate_text(s, m, &rq, u, out);
    if (rc == AL_OK) rc = stats_of(s, m, choice, &rq, has_text || has_ids, lazy, u);
    if (rc) { ws_tmla_stats_release(u); return rc; }
    CalibText ct;
    if (!u->ids && (u->own ? ws_calib_state_text(u->own, &ct) : ws_calib_text(s, m, &ct))) {
        u->ids = ct.ids;
        n = ct.n;
        u->text = ct.req.text;
        c0 = ct.first * ct.req.seqlen;
        c1 = (ct.first + ct.count) * ct.req.seqlen;
        if (!args_given(a, "seqlen")) seqlen = ct.req.seqlen;
    }
    if (choice == 0 && !u->act)
        rc = al_err("stats act needs calibration activations of %s: give calib FILE (a text) or ids FILE, or run "
                    "calibrate FILE first", m->name);
    if (rc == AL_OK && !u->act) snprintf(u->source, sizeof u->source, "weights (unit-variance inputs)");
    u->seqlen = seqlen;
    const char *ef = args_str(a, "eval"), *ei = args_str(a, "eval-ids");
    if (rc == AL_OK && (u->ids || (ef && *ef) || (ei && *ei))) rc = ppl_tokens(s, m, a, u, n, c0, c1, &avail);
    if (rc == AL_OK && u->ids) {
        size_t want = (size_t)args_int(a, "ppl-tokens");
        u->ppl_tokens = want < avail ? want : avail;
    }
    if (rc == AL_OK && need_text && !u->ids)
        rc = al_err("this needs a text for perplexity: give calib FILE (a text) or ids FILE, or run calibrate FILE");
    if (rc == AL_OK && u->ids && u->ppl_tokens < 2)
        rc = al_err("%s has %zu token%s for perplexity: it needs at least 2", u->text, u->ppl_tokens, al_s(u->ppl_tokens));
    if (rc) ws_tmla_stats_release(u);
    return rc;
}

int ws_tmla_stats(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out) {
    return tmla_stats(s, m, a, need_text, false, false, u, out);
}

int ws_tmla_stats_lazy(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out) {
    return tmla_stats(s, m, a, need_text, false, true, u, out);
}

int ws_tmla_fig_stats(Session *s, Model *m, const Args *a, bool need_text, TmlaStatsUse *u, Out *out) {
    return tmla_stats(s, m, a, need_text, true, false, u, out);
}
