/* ws_calib.c -- the calibration service of the workspace (ws_calib.h): per model, the statistics,
 * their text, learned KQ-SVD projections and the last evaluation; running `calibrate` (into the
 * session or a command's own state) and reading calibration texts for every group that needs them. */
#define _GNU_SOURCE
#include "ws_calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "workspace.h"
#include "ws_lm.h"
#include "xform.h"

void ws_calib_drop_eval(CalibState *c) {
    for (int k = 0; k < KQ_NMETHODS; k++) { free(c->errs[k]); c->errs[k] = NULL; }
    c->eval_split[0] = 0;
    c->eval_on[0] = 0;
}

void ws_calib_drop_proj(CalibState *c) {
    for (int k = 0; k < KQ_NMETHODS; k++) { kq_proj_free(c->proj[k]); c->proj[k] = NULL; }
    ws_calib_drop_eval(c);
}

/* Forgets everything (statistics, text, projections); c stays the state of its model. */
void ws_calib_drop_all(CalibState *c) {
    ws_calib_drop_proj(c);
    calib_free(c->st);
    c->st = NULL;
    free(c->ids);
    c->ids = NULL;
    c->nids = 0;
    free(c->text);
    c->text = NULL;
    free(c->gw);
    c->gw = NULL;
    free(c->loaded);
    c->loaded = NULL;
}

/* The workspace's slot: one CalibState per model that has one, in a list. */
typedef struct { CalibState *head; } CalibSet;

static void *calib_create(void) { return al_calloc(1, sizeof(CalibSet), "the calibration states"); }
static void calib_closed(void *st, Model *m) {
    for (CalibState **p = &((CalibSet *)st)->head; *p;) {
        CalibState *c = *p;
        if (!m || c->m == m) { *p = c->next; ws_calib_drop_all(c); free(c); }
        else p = &c->next;
    }
}
static void calib_destroy(void *st) {
    if (st) calib_closed(st, NULL);
    free(st);
}
static const WsSlot calib_slot = {"calibration", calib_create, calib_destroy, calib_closed};

static CalibState *find(const Session *s, const Model *m) {
    const CalibSet *set = ws_peek(s, &calib_slot);
    for (CalibState *c = set ? set->head : NULL; c; c = c->next)
        if (c->m == m) return c;
    return NULL;
}

int ws_calib_of(Session *s, Model *m, CalibState **out) {
    void *p;
    *out = NULL;
    if (!m) return al_err("no model loaded: `load NAME` first");
    if (ws_state(s, &calib_slot, &p)) return AL_ERR;
    CalibState *c = find(s, m);
    if (!c) {
        if (!(c = al_calloc(1, sizeof *c, "a calibration state"))) return AL_ERR;
        CalibSet *set = p;
        c->m = m;
        c->next = set->head;
        set->head = c;
    }
    *out = c;
    return AL_OK;
}

int ws_calib(Session *s, CalibState **out) { return ws_calib_of(s, s->cur, out); }

/* What c holds that a replacement drops ("the calibration of M (N tokens of F) and its kvsvd learn
 * projections (K-SVD, KQ-SVD)"), or "" when it holds no statistics. */
static void ws_calib_describe(const CalibState *c, char *buf, size_t cap) {
    *buf = 0;
    if (!c->st) return;
    const char *src = c->text ? c->text : c->st->source ? c->st->source : "a file";
    size_t n = (size_t)snprintf(buf, cap, "the calibration of %s (%zu window%s, %zu token%s of %s)", c->m->name,
                                c->st->seqs[0], al_s(c->st->seqs[0]), c->st->tokens[0], al_s(c->st->tokens[0]), src);
    const char *sep = " and its kvsvd learn projections (";
    for (int k = 0; k < KQ_NMETHODS && n < cap; k++)
        if (c->proj[k]) {
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", sep, kq_method_label((kq_method)k));
            sep = ", ";
        }
    if (n < cap && strcmp(sep, ", ") == 0) snprintf(buf + n, cap - n, ")");
}

/* Says in one line what a replacement of c drops (nothing when c is empty). */
static void say_replaced(const CalibState *c, Out *out) {
    char what[512];
    ws_calib_describe(c, what, sizeof what);
    if (*what) out_printf(out, "dropped %s: replaced by these statistics\n", what);
}

void ws_calib_set(CalibState *c, CalibStats *st, const char *file, unsigned long after, Out *out) {
    say_replaced(c, out);
    ws_calib_drop_all(c);
    c->st = st;
    c->loaded = al_strdup(file);
    c->after = after;
}

/* v as one word of a command line: quoted when it holds a space, a quote, ';' or '#', or is empty. */
static char *word(const char *v) { return al_asprintf(!*v || strpbrk(v, " \t;\"'#") ? "\"%s\"" : "%s", v); }

char *ws_calib_replay_line(const Session *s, const Model *m, unsigned long *after) {
    const CalibState *c = find(s, m);
    *after = c ? c->after : 0;
    if (!c || !c->st || (!c->loaded && !c->text)) return NULL;
    char *w = word(c->loaded ? c->loaded : c->text), *line = NULL;
    if (w && c->loaded) line = al_asprintf("calib load %s", w);
    else if (w)
        line = al_asprintf("calibrate %s%s samples %zu seqlen %zu split %s inputs %s", c->req.ids_file ? "ids " : "", w,
                           c->req.samples, c->req.seqlen, c->req.split == CALIB_VALID ? "valid" : "train",
                           c->req.with_x ? "on" : "off");
    free(w);
    return line;
}

/* The statistics of the current model, or an error saying how to get them. */
int ws_calib_need(Session *s, CalibState **out) {
    *out = NULL;
    if (!s->cur) return al_err("no model loaded: `load NAME` first");
    CalibState *c = find(s, s->cur);
    if (!c || !c->st) {
        const CalibSet *set = ws_peek(s, &calib_slot);
        const CalibState *o = set ? set->head : NULL;
        while (o && !o->st) o = o->next;
        if (o)
            return al_err("no calibration statistics for %s (%s has its own): run `calibrate FILE` (or `calib load "
                          "FILE`) for %s, or `use %s`", s->cur->name, o->m->name, s->cur->name, o->m->name);
        return al_err("no calibration statistics for %s: run `calibrate FILE` (or `calib load FILE`) first", s->cur->name);
    }
    *out = c;
    return AL_OK;
}

int ws_calib_stats(const Session *s, const Model *m, const CalibStats **out) {
    const CalibState *c = find(s, m);
    *out = c && c->st ? c->st : NULL;
    return AL_OK;
}

bool ws_calib_state_text(const CalibState *c, CalibText *out) {
    memset(out, 0, sizeof *out);
    if (!c || !c->st || !c->ids) return false;
    *out = (CalibText){.ids = c->ids, .n = c->nids, .first = c->first, .count = c->count, .req = c->req};
    return true;
}

bool ws_calib_text(const Session *s, const Model *m, CalibText *out) { return ws_calib_state_text(find(s, m), out); }

/* ================================================================ reading and running texts */

int ws_read_tokens(Session *s, Model *m, const char *path, bool ids_file, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    int rc = lm_text_ids(s, m, path, ids_file ? path : NULL, ids, n);
    for (size_t i = 0; rc == AL_OK && i < *n; i++)
        if ((*ids)[i] < 0 || (*ids)[i] >= m->cfg.vocab)
            rc = al_err("%s: token %zu is id %d, outside %s's vocabulary (0-%d)", path, i + 1, (*ids)[i], m->name,
                        m->cfg.vocab - 1);
    if (rc) { free(*ids); *ids = NULL; *n = 0; }
    return rc;
}

/* Runs the calibration of rq over ids[0..n) (taken over) into a fresh state *into (zeroed first;
 * into->m = m). Returns AL_OK, or AL_ERR / AL_INTERRUPTED with into empty (calib_run's partial sums dropped). */
static int run_into(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, CalibState *into, Out *out) {
    memset(into, 0, sizeof *into);
    into->m = m;
    Forward *f;
    if (lm_forward(s, m, &f)) { free(ids); return AL_ERR; }
    size_t L = rq->seqlen, first, count;
    const char *split = rq->split == CALIB_VALID ? "valid" : "train";
    int rc = L > fwd_max_ctx(f) ? al_err("calibrate: seqlen %zu is longer than the model's context %zu", L, fwd_max_ctx(f))
                                : calib_windows(n, L, rq->split, rq->samples, &first, &count);
    CalibShape sh;
    CalibStats *st = NULL;
    char *text = NULL;
    if (rc == AL_OK) rc = calib_shape_of(m, &sh);
    if (rc == AL_OK) rc = calib_new(&sh, rq->with_x, &st);
    if (rc == AL_OK) rc = calib_set_meta(st, m->name, rq->text, split);
    if (rc == AL_OK && !(text = al_strdup(rq->text))) rc = AL_ERR;
    if (rc) { free(ids); free(text); calib_free(st); return AL_ERR; }
    out_printf(out, "calibrating %s on %zu %s window%s of %zu tokens (windows %zu..%zu of %zu)%s\n", m->name, count,
               split, al_s(count), L, first, first + count - 1, n / L,
               rq->with_x ? ", with the attention input's second moments" : "");
    rc = calib_run(st, f, ids + first * L, count, L);
    if (rc != AL_OK) { free(ids); free(text); calib_free(st); return rc; }
    *into = (CalibState){.m = m, .st = st, .ids = ids, .nids = n, .text = text, .req = *rq, .first = first,
                         .count = count};
    into->req.text = text;
    return rc;
}

int ws_calib_run_own(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, CalibState *own, Out *out) {
    return run_into(s, m, ids, n, rq, own, out);
}

int ws_calib_run(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, Out *out) {
    CalibState *c, fresh;
    if (ws_calib_of(s, m, &c)) { free(ids); return AL_ERR; }
    int rc = run_into(s, m, ids, n, rq, &fresh, out);
    if (rc == AL_INTERRUPTED) {
        char was[512];
        ws_calib_describe(c, was, sizeof was);
        if (*was) out_printf(out, "interrupted: kept %s, unchanged\n", was);
        else out_printf(out, "interrupted: %s still has no calibration\n", m->name);
        ws_calib_drop_all(&fresh);
        return rc;
    }
    if (rc != AL_OK) return rc;
    const Xform *newest = xform_newest(s, m, NULL);
    unsigned long after = newest ? newest->serial : 0;
    say_replaced(c, out);
    ws_calib_drop_all(c);
    CalibState *next = c->next;
    *c = fresh;
    c->next = next;
    c->after = after;
    return AL_OK;
}

/* Token ids of `what` (a text file), or of `file` when what is the word text (a text file, as ppl and
 * check take it) or ids (a file of token ids). */
int ws_read_tokens_arg(Session *s, const char *cmd, const char *what, const char *file, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    bool two = file && *file, is_ids = two && !strcmp(what, "ids");
    if (two && !is_ids && strcmp(what, "text") != 0)
        return al_err("%s: give FILE or `text FILE` (text), or `ids FILE` (token ids), not '%s' followed by '%s'",
                      cmd, what, file);
    return ws_read_tokens(s, s->cur, two ? file : what, is_ids, ids, n);
}

/* Token windows for an evaluation: ids (borrowed from the state or owned in *own), first, count,
 * and what they are in on. */
int ws_calib_eval_tokens(Session *s, CalibState *c, const Args *a, const char *cmd, int **own, const int **ids,
                         size_t *seqlen, size_t *first, size_t *count, char *on, size_t cap) {
    *own = NULL;
    size_t n = c->nids;
    *ids = c->ids;
    const char *text = args_str(a, "text"), *idf = args_str(a, "ids"), *name = c->text;
    bool other = (text && *text) || (idf && *idf);
    if (other) {
        if (ws_read_tokens_arg(s, cmd, idf && *idf ? "ids" : text, idf && *idf ? idf : NULL, own, &n)) return AL_ERR;
        *ids = *own;
        name = idf && *idf ? idf : text;
    } else if (!c->ids)
        return al_err("%s: the session has no calibration text (statistics were loaded): give `text FILE` or `ids FILE`", cmd);
    *seqlen = args_given(a, "seqlen") ? (size_t)args_int(a, "seqlen") : c->st->seqlen;
    if (*seqlen == 0) return al_err("%s: give `seqlen L` (the statistics do not record one)", cmd);
    calib_split split = args_enum(a, "split") == 0 ? CALIB_TRAIN : CALIB_VALID;
    size_t N = args_given(a, "samples") ? (size_t)args_int(a, "samples") : 32;
    if (!other && split == CALIB_TRAIN) {      /* train: exactly the windows the statistics came from */
        if (*seqlen != c->req.seqlen) {
            free(*own);
            *own = NULL;
            return al_err("%s: split train is the %zu calibrated windows of %zu token%s: leave seqlen out (or give "
                          "split valid)", cmd, c->count, c->req.seqlen, al_s(c->req.seqlen));
        }
        *first = c->first;
        *count = N < c->count ? N : c->count;
        snprintf(on, cap, "%s%zu calibrated window%s of %zu tokens of %s (in-sample)", *count < c->count ? "the first " : "",
                 *count, al_s(*count), *seqlen, name);
        return AL_OK;
    }
    if (calib_windows(n, *seqlen, split, N, first, count)) { free(*own); *own = NULL; return al_err_ctx("%s", cmd); }
    size_t lo = *first * *seqlen, hi = (*first + *count) * *seqlen, c0 = c->first * c->req.seqlen,
           c1 = (c->first + c->count) * c->req.seqlen;
    bool in = !other && lo < c1 && c0 < hi;      /* calibrated on the validation split itself */
    snprintf(on, cap, "%zu %s window%s of %zu tokens of %s (%s)", *count, split == CALIB_TRAIN ? "training" : "validation",
             al_s(*count), *seqlen, name ? name : "?", other ? "another text" : in ? "in-sample" : "held out");
    return AL_OK;
}

/* ================================================================ activation-weighted fits */

/* Per-layer E[x xᵀ] of layers lo..hi from the session's calibration of m, when `fit` asks for it
 * (auto: when there are statistics with the attention input). *sigma stays NULL for the weights'
 * own fit; free with ws_calib_free_sigma. *ntok: tokens behind layer lo. */
int ws_calib_fit_sigma(Session *s, const Model *m, int fit, int lo, int hi, double ***sigma, size_t *ntok) {
    *sigma = NULL;
    *ntok = 0;
    if (fit == 1) return AL_OK;
    const CalibStats *cs = NULL;
    if (ws_calib_stats(s, m, &cs)) return AL_ERR;
    if (!cs || !cs->has_x) {
        if (fit == 2)
            return al_err("fit calib: the session has no calibration of %s with attention-input statistics: run "
                          "calibrate FILE inputs on first (or fit weights)", m->name);
        return AL_OK;
    }
    size_t D = (size_t)m->cfg.hidden;
    double **sg = al_calloc((size_t)m->cfg.n_layers, sizeof *sg, "input second moments");
    if (!sg) return AL_ERR;
    for (int l = lo; l <= hi; l++)
        if (!(sg[l] = al_malloc3(D, D, sizeof(double), "an input second moment")) || calib_second_moment(cs, l, sg[l])) {
            for (int k = lo; k <= l; k++) free(sg[k]);
            free(sg);
            return al_err_ctx("the calibration of layer %d", l);
        }
    *sigma = sg;
    *ntok = cs->tokens[lo];
    return AL_OK;
}

void ws_calib_free_sigma(double **sg, int n) {
    for (int l = 0; sg && l < n; l++) free(sg[l]);
    free(sg);
}
