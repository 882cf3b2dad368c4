/* ws_compare.c -- the kept comparison of the workspace (ws_compare.h). */
#define _GNU_SOURCE
#include "ws_compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workspace.h"
#include "ws_calib.h"
#include "ws_lm.h"

/* The calibration a comparison used, told apart from a later one (NULL stats: none used). */
typedef struct {
    const void *stats;        /* the session's CalibStats, compared by address */
    size_t tokens, seqs;      /* summed over layers: a reloaded or grown calibration differs */
    const void *kq;           /* the KQ-SVD projections `kvsvd learn` made (NULL: none) */
    bool has_x;               /* it kept the attention input's second moments (the inputs' law) */
} CalibMark;

typedef struct {
    BudgetResult *cmp;           /* the last comparison (`compare`, `plot compare`) of cmp_model */
    Model *cmp_model;         /* (budget and tokens are in cmp, its layers in its rows) */
    CalibMark cmp_calib;      /* the calibration it drew its inputs from */
} CmpState;

static void *cmp_create(void) { return al_calloc(1, sizeof(CmpState), "the comparison state"); }
static void cmp_destroy(void *p) {
    CmpState *st = p;
    if (st) budget_result_free(st->cmp);
    free(st);
}
static void cmp_closed(void *p, Model *m) {
    CmpState *st = p;
    if (st->cmp_model != m) return;
    budget_result_free(st->cmp);
    st->cmp = NULL;
    st->cmp_model = NULL;
}
static const WsSlot cmp_slot = {"comparison", cmp_create, cmp_destroy, cmp_closed};

static int cmp_state(Session *s, CmpState **out) {
    void *p;
    *out = NULL;
    if (ws_state(s, &cmp_slot, &p)) return AL_ERR;
    *out = p;
    return AL_OK;
}

/* The learned KQ-SVD projections of m in this session (NULL: none). */
static const KqProj *learned_kq(Session *s, const Model *m) {
    CalibState *c;
    return ws_calib(s, &c) == AL_OK && c->m == m && c->st ? c->proj[KQ_KQSVD] : NULL;
}

/* Which calibration a comparison of m with `fit` draws its inputs and KQ-SVD's projections from
 * (stats NULL: none). */
static int calib_mark(Session *s, Model *m, int fit, CalibMark *mk) {
    memset(mk, 0, sizeof *mk);
    const CalibStats *cs = NULL;
    if (fit == 1 || ws_calib_stats(s, m, &cs) || !cs) return AL_OK;
    mk->stats = cs;
    mk->has_x = cs->has_x;
    mk->kq = learned_kq(s, m);
    for (int l = 0; l < cs->sh.n_layers; l++) {
        mk->tokens += cs->tokens[l];
        mk->seqs += cs->seqs[l];
    }
    return AL_OK;
}

/* A budget past what the model caches is refused: every method would keep its whole cache. */
static int budget_over(const Model *m, size_t budget) {
    size_t w = cfg_kv_values(&m->cfg);
    if (w && budget > w)
        return al_err("kv-budget %zu is more than the %zu value%s per token per layer %s caches: every method would "
                      "keep the whole cache; give a budget of at most %zu", budget, w, al_s(w), m->name, w);
    return AL_OK;
}

int ws_compare_run(Session *s, Model *m, const WsCmpKey *q, BudgetResult **out) {
    BudgetOpts o = budget_opts_default();
    o.budget = q->budget;
    if (q->tokens) o.tokens = q->tokens;
    if (q->seed) o.seed = q->seed;
    o.layer_lo = q->layer_lo < 0 ? 0 : q->layer_lo;
    o.layer_hi = q->layer_lo < 0 ? m->cfg.n_layers - 1 : q->layer_hi;
    if (!o.budget)
        return al_err("compare needs kv-budget B (values cached per token per layer; %s caches %zu)", m->name,
                      cfg_kv_values(&m->cfg));
    if (budget_over(m, o.budget)) return AL_ERR;
    double **sigma = NULL;
    size_t ntok = 0;
    if (ws_calib_fit_sigma(s, m, q->fit, o.layer_lo, o.layer_hi, &sigma, &ntok)) return AL_ERR;
    o.sigma = (const double *const *)sigma;
    if (q->fit != 1) {                      /* KQ-SVD from the session's calibration, learned or not */
        ws_calib_stats(s, m, &o.calib);
        o.kq = learned_kq(s, m);
    }
    int rc = budget_compare(m, &o, out);
    ws_calib_free_sigma(sigma, m->cfg.n_layers);
    return rc;
}

/* Makes r (taken over) the kept comparison of m. */
static void keep(CmpState *st, Model *m, BudgetResult *r, const CalibMark *mk) {
    budget_result_free(st->cmp);
    st->cmp = r;
    st->cmp_model = m;
    st->cmp_calib = *mk;
}

/* True when the kept comparison answers q for m (see ws_compare_get). */
static bool compare_matches(const CmpState *st, const Model *m, const WsCmpKey *q, const CalibMark *mk) {
    const BudgetResult *r = st->cmp;
    if (!r || st->cmp_model != m || r->n_rows < 1) return false;
    if ((q->budget && q->budget != r->budget) || (q->tokens && q->tokens != r->tokens)) return false;
    if (q->seed && q->seed != r->seed) return false;
    if (q->fit == 2 && !mk->has_x) return false;      /* running it gives the error */
    if (mk->stats != st->cmp_calib.stats || mk->tokens != st->cmp_calib.tokens || mk->seqs != st->cmp_calib.seqs ||
        mk->kq != st->cmp_calib.kq)
        return false;
    return q->layer_lo < 0 || (q->layer_lo >= r->rows[0].layer && q->layer_hi <= r->rows[r->n_rows - 1].layer);
}

int ws_compare_get(Session *s, Model *m, const WsCmpKey *q, const BudgetResult **out, bool *reused) {
    CmpState *st;
    CalibMark mk;
    *out = NULL;
    *reused = false;
    if (cmp_state(s, &st) || calib_mark(s, m, q->fit, &mk)) return AL_ERR;
    if (compare_matches(st, m, q, &mk)) {
        *out = st->cmp;
        *reused = true;
        return AL_OK;
    }
    BudgetResult *r = NULL;
    int rc = ws_compare_run(s, m, q, &r);
    if (rc) return rc;
    keep(st, m, r, &mk);
    *out = r;
    return AL_OK;
}

int ws_compare_keep(Session *s, Model *m, const WsCmpKey *q, BudgetResult *r) {
    CmpState *st;
    CalibMark mk;
    if (cmp_state(s, &st) || calib_mark(s, m, q->fit, &mk)) { budget_result_free(r); return AL_ERR; }
    keep(st, m, r, &mk);
    return AL_OK;
}

const BudgetResult *ws_compare_last(const Session *s, const Model *m) {
    const CmpState *st = ws_peek(s, &cmp_slot);
    return st && st->cmp && st->cmp_model == m ? st->cmp : NULL;
}

/* ================================================================ on real tokens */

bool ws_compare_on_text(const Args *a) { return args_given(a, "text") || args_given(a, "ids") || args_flag(a, "heldout"); }

int ws_compare_text(Session *s, Model *m, const Args *a, CheckText *t) {
    memset(t, 0, sizeof *t);
    const char *ids = args_str(a, "ids");
    int rc = AL_OK;
    if (args_given(a, "text") + args_given(a, "ids") + args_flag(a, "heldout") > 1)
        return al_err("compare: give one of text FILE, ids FILE, heldout");
    if (ids && *ids) {
        if ((rc = lm_read_ids(ids, &t->own, &t->n))) return al_err_ctx("compare: ids %s", ids);
        t->ids = t->own;
        t->seqlen = 512;
        snprintf(t->on, sizeof t->on, "%.300s (token ids: %zu)", ids, t->n);
    } else if (args_flag(a, "heldout")) {
        if ((rc = ws_check_heldout(s, m, t))) return rc;
        if (!t->ids) return al_err("compare heldout: %s", t->on);
    } else if (args_given(a, "text")) {
        const char *file = args_str(a, "text");
        if ((rc = ws_check_tokens(s, m, file, &t->own, &t->n))) return al_err_ctx("compare: text %s", file);
        t->ids = t->own;
        t->seqlen = 512;
        snprintf(t->on, sizeof t->on, "%.300s (given: %zu token%s)", file, t->n, al_s(t->n));
    }
    if (args_given(a, "seqlen")) t->seqlen = (size_t)args_int(a, "seqlen");
    char *w = strstr(t->on, ", windows of ");              /* heldout's: the caller says the windows it runs */
    if (w) *w = '\0';
    size_t ctx = m->cfg.max_pos > 0 ? (size_t)m->cfg.max_pos : t->seqlen;
    if (t->seqlen > ctx) t->seqlen = ctx;
    if (t->seqlen > t->n) t->seqlen = t->n;
    if (t->n < 4) { ws_check_text_free(t); return al_err("compare: the text has %zu token%s; it needs at least 4", t->n, al_s(t->n)); }
    return AL_OK;
}

int ws_compare_text_run(Session *s, Model *m, int fit, size_t budget, const CheckText *t, BudgetText **out) {
    Forward *f = NULL;
    double **sigma = NULL;
    size_t ntok = 0;
    BudgetTextOpts o = {.budget = budget, .ids = t->ids, .n = t->n, .seqlen = t->seqlen};
    if (budget_over(m, budget)) return AL_ERR;
    if (lm_forward(s, m, &f)) return AL_ERR;
    if (ws_calib_fit_sigma(s, m, fit, 0, m->cfg.n_layers - 1, &sigma, &ntok)) return AL_ERR;
    o.sigma = (const double *const *)sigma;
    if (fit != 1) {
        ws_calib_stats(s, m, &o.calib);
        o.kq = learned_kq(s, m);
    }
    int rc = budget_text(f, &o, out);
    ws_calib_free_sigma(sigma, m->cfg.n_layers);
    return rc;
}
