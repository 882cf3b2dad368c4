/* ws_mlastrat.c -- the MLA strategies' keywords, line, list and table for `convert mla`, `convert
 * mla-table ... strategies` and `plot mla-table` (ws_mlastrat.h). */
#define _GNU_SOURCE
#include "ws_mlastrat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layersel.h"
#include "mla_export.h"
#include "calib.h"
#include "tmla_qkn.h"
#include "ws_calib.h"
#include "ws_lm.h"
#include "ws_tmla.h"

static const char *const KINDS[] = {"transmla", "mha2mla", "care", NULL};      /* mlastrat_kind */
static const char *const ROPES[] = {"high", "low", "uniform", "2norm", NULL};  /* mlastrat_rope */

static int parse_one(const char *tok, MlastratOpts *s);

int ws_mlastrat_opts(const Args *a, MlastratOpts *s, bool *given) {
    *given = args_given(a, "strategy") || args_given(a, "rope-pairs");
    if (parse_one(args_str(a, "strategy"), s)) return AL_ERR;
    if (args_given(a, "rope-pairs")) {
        if (s->kind != MLASTRAT_MHA2MLA) return al_err("rope-pairs is MHA2MLA's: give strategy mha2mla-... with it");
        s->rope_pairs = (int)args_int(a, "rope-pairs");
    }
    return AL_OK;
}

/* The ranks of r's converted layers: "R" or "min-max (mean R)". */
static void rank_text(const TmlaResult *r, char *buf, size_t cap) {
    int lo = 1 << 30, hi = 0;
    for (int l = 0; l < r->n_layers; l++)
        if (r->layers[l]) {
            lo = r->layers[l]->kv_rank < lo ? r->layers[l]->kv_rank : lo;
            hi = r->layers[l]->kv_rank > hi ? r->layers[l]->kv_rank : hi;
        }
    if (lo == hi) snprintf(buf, cap, "%d in every layer", lo);
    else snprintf(buf, cap, "%d-%d per layer, %d on average (the same KV budget)", lo, hi, r->kv_rank);
}

void ws_mlastrat_line(Out *out, const Model *m, const MlastratOpts *s, const TmlaResult *r) {
    char lab[96], rk[128];
    mlastrat_label(s, lab, sizeof lab);
    rank_text(r, rk, sizeof rk);
    int rd = m->cfg.qk_rope_dim, G = m->cfg.n_kv_heads;
    if (s->kind == MLASTRAT_MHA2MLA) {
        int pairs = r->rope_dim / (2 * G);
        bool exact = 2 * pairs >= rd;
        out_printf(out, "strategy %s (MHA2MLA): %d of the %d RoPE frequencies of every KV head keep RoPE (S_%s), %s at "
                   "full kv rank; the latent is the %s SVD of the NoPE key and value weights; kv rank %s\n", lab, pairs,
                   rd / 2, mlastrat_rope_name(s->rope), exact ? "none of the source's key dims loses it: exact"
                   : "the SOURCE's other key dims lose it: NOT exact", mlastrat_svd_name(s->svd), rk);
    } else if (s->kind == MLASTRAT_CARE)
        out_printf(out, "strategy %s (CARE): TransMLA's RoRoPE, then the latent of the SVD of C^1/2 [W_K_nope | W_V] "
                   "(C the activations' second moment, damped by %g x its mean diagonal) mapped back by C^-1/2, no KV "
                   "balancing; kv rank %s\n", lab, s->damp < 0 ? MLASTRAT_CARE_DAMP : s->damp, rk);
    else
        out_printf(out, "strategy %s: kv rank %s\n", lab, rk);
    if (s->alloc != MLASTRAT_ALLOC_CARE) return;
    int bmin = r->kv_rank / 4 > 1 ? r->kv_rank / 4 : 1;
    out_printf(out, "-alloc: CARE's greedy allocation (its MLA converter's): K and V apart, half the budget each, by their "
               "H^4 spectra (residual share x depth weight / sqrt(rank)), each %d-%d, the kv rank their sum; per layer:",
               bmin, r->kv_rank > bmin ? r->kv_rank : bmin);
    for (int l = 0; l < r->n_layers; l++)
        if (r->layers[l]) out_printf(out, " %d: %d", l, r->layers[l]->kv_rank);
    out_printf(out, "\n");
}

/* One list entry ("mha2mla-2norm-split", "mha2mla-low-r2", "care-alloc") into s. */
static int parse_one(const char *tok, MlastratOpts *s) {
    *s = mlastrat_default();
    char buf[64];
    snprintf(buf, sizeof buf, "%s", tok ? tok : "transmla");
    char *save = NULL, *w = strtok_r(buf, "-", &save);
    int k = -1;
    for (int i = 0; w && KINDS[i]; i++)
        if (!strcmp(w, KINDS[i])) k = i;
    if (k < 0) return al_err("strategy '%s' is not transmla, mha2mla-... or care (e.g. mha2mla-2norm-split)", tok);
    s->kind = (mlastrat_kind)k;
    for (w = strtok_r(NULL, "-", &save); w; w = strtok_r(NULL, "-", &save)) {
        int hit = 0;
        for (int i = 0; ROPES[i]; i++)
            if (!strcmp(w, ROPES[i]) && k == MLASTRAT_MHA2MLA) { s->rope = (mlastrat_rope)i; hit = 1; }
        if (!strcmp(w, "split") && k == MLASTRAT_MHA2MLA) { s->svd = MLASTRAT_SVD_SPLIT; hit = 1; }
        if (!strcmp(w, "joint") && k == MLASTRAT_MHA2MLA) hit = 1;
        if (!strcmp(w, "alloc")) { s->alloc = MLASTRAT_ALLOC_CARE; hit = 1; }
        char *end = NULL;
        long r = w[0] == 'r' && k == MLASTRAT_MHA2MLA ? strtol(w + 1, &end, 10) : 0;
        if (end && end != w + 1 && !*end && r >= 1 && r <= 1 << 16) { s->rope_pairs = (int)r; hit = 1; }
        if (!hit) return al_err("strategy: '%s' in '%s' is not a word of it (mha2mla: high, low, uniform, 2norm, joint, "
                                "split, rN: N frequencies per KV head; any: alloc)", w, tok);
    }
    return AL_OK;
}

int ws_mlastrat_parse_list(const char *list, MlastratOpts *s, size_t cap, size_t *n) {
    static const char ALL[] = "transmla,mha2mla-high,mha2mla-low,mha2mla-uniform,mha2mla-2norm,mha2mla-2norm-split,care,"
                              "care-alloc";
    *n = 0;
    if (!list || !*list || !strcmp(list, "all")) list = ALL;
    char *buf = al_strdup(list), *save = NULL;
    if (!buf) return AL_ERR;
    int rc = AL_OK;
    for (char *t = strtok_r(buf, ",", &save); rc == AL_OK && t; t = strtok_r(NULL, ",", &save)) {
        if (*n == cap) rc = al_err("strategies: at most %zu row%s", cap, al_s(cap));
        else if ((rc = parse_one(t, &s[*n])) == AL_OK) (*n)++;
    }
    free(buf);
    return rc;
}

int ws_mlastrat_ranks(const char *what, const char *list, int *R, size_t cap, size_t *n) {
    *n = 0;
    if (!list || !*list) return al_err("%s needs kv-ranks R,R,... (e.g. kv-ranks 128,256,full)", what);
    for (const char *p = list; *p;) {
        if (*n == cap) return al_err("kv-ranks: at most %zu rank%s", cap, al_s(cap));
        char *end;
        if (!strncmp(p, "full", 4) && (p[4] == ',' || !p[4])) { R[(*n)++] = TMLA_FULL; end = (char *)p + 4; }
        else {
            long v = strtol(p, &end, 10);
            if (end == p || v < 1 || v > (1L << 24) || (*end && *end != ','))
                return al_err("kv-ranks '%s': give positive numbers or full, separated by commas", list);
            R[(*n)++] = (int)v;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return AL_OK;
}

/* The eps a table row's perplexity runs at: as ppl runs the conversion (its export's where every
 * layer is converted and the export holds it, else the source's). */
static double row_norm_eps(const TmlaResult *r) {
    for (int l = 0; l < r->n_layers; l++)
        if (!r->layers[l]) return 0;
    if (mla_exportable(r) != AL_OK) { al_err_clear(); return 0; }
    return mla_export_norm_eps(r->src, true, tmla_qkn_is_plain(r->opts.qk_norm));
}

int ws_mlastrat_table(Session *s, Model *m, const Args *a, const int *ranks, size_t n_ranks, bool fig, Out *out,
                      MlastratTable **t) {
    *t = NULL;
    MlastratOpts st[32];
    size_t ns;
    long lo, hi;
    if (ws_mlastrat_parse_list(args_str(a, "strategies"), st, 32, &ns)) return AL_ERR;
    if (args_range(a, "layers", m->cfg.n_layers, &lo, &hi)) return AL_ERR;
    TmlaStatsUse u;
    int src = fig ? ws_tmla_fig_stats(s, m, a, true, &u, out) : ws_tmla_stats(s, m, a, true, &u, out);
    if (src) return src;
    if (!u.act) {
        ws_tmla_stats_release(&u);
        return al_err("the strategies table compares CARE's covariance-aware latent with the others: it needs activation "
                      "statistics (calib FILE, ids FILE, or calibrate FILE first), not stats weights");
    }
    MlastratTableOpts o = {.kv_ranks = ranks, .n_ranks = n_ranks, .strats = st, .n_strats = ns,
                           .rope_dim = args_given(a, "rope-dim") ? (int)args_int(a, "rope-dim") : 0,
                           .freqfold = args_given(a, "freqfold") ? (int)args_int(a, "freqfold") : 0,
                           .layer_lo = (int)lo, .layer_hi = (int)hi, .sigma = (const double *const *)u.sigma,
                           .mu = (const double *const *)u.mu, .ids = u.ids, .n_ids = u.ppl_tokens, .seqlen = u.seqlen, .norm_eps = row_norm_eps,
                           .run_layers = mla_run_for};
    static const int qkn[] = {TMLA_QKN_FOLD, TMLA_QKN_DROP, TMLA_QKN_KEEP};   /* convert mla's qk-norm words */
    if (args_given(a, "qk-norm")) o.qk_norm = qkn[args_enum(a, "qk-norm")];
    Forward *f = NULL;
    int rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = mlastrat_table(f, &o, t);
    if (rc == AL_OK) {
        out_printf(out, "%s layers %ld-%ld, %zu strategies x %zu kv ranks; PCA / CARE statistics: %s; errors: relative "
                   "Frobenius of scores and outputs, means over the layers, on 64 Gaussian tokens with each layer's "
                   "activation statistics (as check)\n", m->name, lo, hi, ns, n_ranks, u.source);
        out_printf(out, "perplexity on %zu token%s, %s, windows of %zu: original %.6g (log %.5f)\n", (*t)->tokens, al_s((*t)->tokens),
                   u.ppl_on, u.seqlen, exp((*t)->base_nll), (*t)->base_nll);
    }
    ws_tmla_stats_release(&u);
    return rc;
}

/* The kv ranks of budgets (values per token per layer) after TransMLA's default RoPE dims of m: R[*nr]. */
static int budget_ranks(Model *m, const size_t *budgets, size_t nb, int *R, size_t *nr) {
    const ModelConfig *c = &m->cfg;
    TmlaOpts o = tmla_opts_default();
    o.qk_norm = c->qk_norm != QKN_NONE ? TMLA_QKN_FOLD : 0;
    if (tmla_resolve_opts(m, &o)) return AL_ERR;
    size_t D = (size_t)o.rope_dim, nJ = (size_t)(c->n_kv_heads * cfg_d_qk(c)) - D + (size_t)(c->n_kv_heads * c->v_dim);
    *nr = 0;
    for (size_t i = 0; i < nb && *nr < 32; i++)
        if (budgets[i] > D && budgets[i] - D <= nJ) R[(*nr)++] = (int)(budgets[i] - D);
    if (!*nr)
        return al_err("strategies: no budget leaves a kv rank after the %zu RoPE dims of the shared key (1-%zu more): "
                      "give budgets %zu-%zu", D, nJ, D + 1, D + nJ);
    return AL_OK;
}

int ws_mlastrat_budgets(Session *s, Model *m, const char *list, const size_t *budgets, size_t nb, const int *ids,
                        size_t n, size_t seqlen, MlastratTable **t, size_t *ns) {
    *t = NULL;
    MlastratOpts st[32];
    int R[32];
    size_t nr;
    const CalibStats *cst = NULL;
    if (ws_mlastrat_parse_list(list, st, 32, ns) || budget_ranks(m, budgets, nb, R, &nr)) return AL_ERR;
    if (ws_calib_stats(s, m, &cst) || !cst || !cst->has_x)
        return al_err("strategies: the one-shot MLA strategies (CARE whitens by them) need the session's calibration of "
                      "%s with its attention inputs: run calibrate FILE first", m->name);
    double **sigma = NULL, **mu = NULL;
    if (calib_input_arrays(cst, 0, -1, &sigma, &mu)) return AL_ERR;
    MlastratTableOpts o = {.kv_ranks = R, .n_ranks = nr, .strats = st, .n_strats = *ns, .layer_lo = 0, .layer_hi = -1,
                           .sigma = (const double *const *)sigma, .mu = (const double *const *)mu, .ids = ids,
                           .n_ids = n, .seqlen = seqlen};
    if (m->cfg.qk_norm != QKN_NONE) o.qk_norm = TMLA_QKN_FOLD;
    Forward *f = NULL;
    int rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = mlastrat_table(f, &o, t);
    calib_free_arrays(cst->sh.n_layers, sigma, mu);
    return rc;
}

Table *ws_mlastrat_rows(const Model *m, const MlastratTable *t) {
    Table *tb = table_new(13, "kv_rank", "strategy", "rope", "latent", "alloc", "kv_values", "rank_min", "rank_max",
                          "source_rope_removed", "score_err", "out_err", "nll", "ppl");
    for (size_t i = 0; tb && i < t->n; i++) {
        const MlastratRow *w = &t->rows[i];
        const MlastratOpts *s = &w->strat;
        char lab[96];
        if (table_row(tb)) { table_free(tb); return NULL; }
        table_int(tb, w->kv_rank);
        table_str(tb, mlastrat_label(s, lab, sizeof lab));
        table_str(tb, s->kind == MLASTRAT_MHA2MLA ? mlastrat_rope_name(s->rope) : "rorope");
        table_str(tb, s->kind == MLASTRAT_MHA2MLA ? (s->svd == MLASTRAT_SVD_SPLIT ? "svd-split" : "svd-joint")
                      : s->kind == MLASTRAT_CARE ? "care" : "pca-bkv");
        table_str(tb, mlastrat_alloc_name(s->alloc));
        table_count(tb, w->kv_values);
        table_int(tb, w->rank_min);
        table_int(tb, w->rank_max);
        MlastratOpts full = *s;
        full.rope_pairs = w->rope_dim / (2 * m->cfg.n_kv_heads);
        table_bool(tb, !mlastrat_exact_full(&full, m->cfg.qk_rope_dim));
        table_num(tb, w->score_err);
        table_num(tb, w->out_err);
        table_num(tb, w->nll);
        table_num(tb, exp(w->nll));
    }
    return tb;
}
