/* tmla_study.c -- the TransMLA perplexity studies: the RoPE-removal curve (Figure 3b) and the KV
 * table (Figure 4b), each variant's converted layers swapped into the model's forward pass
 * (fwd_set_attn) for its perplexity. See tmla_study.h. Owns the study results it returns. */
#define _GNU_SOURCE
#include "tmla_study.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ shared by the studies */

/* A study's model: the forward pass and the original attention of the studied layers. */
typedef struct {
    Forward *f;
    Model *m;
    int n_layers, lo, hi;
    AttnLayer **orig;          /* (n_layers) the checkpoint's attention in [lo, hi], else NULL */
} Study;

static void study_free(Study *st) {
    if (st->f) fwd_clear_attn(st->f);
    for (int l = 0; st->orig && l < st->n_layers; l++) attn_layer_free(st->orig[l]);
    free(st->orig);
    memset(st, 0, sizeof *st);
}

/* Checks m (GQA with full RoPE), resolves the layer range (hi < 0: the last) and loads the
 * original attention of layers [lo, hi]. */
static int study_new(Forward *f, int lo, int hi, Study *st) {
    memset(st, 0, sizeof *st);
    Model *m = fwd_model(f);
    TmlaOpts chk = tmla_opts_default();
    if (tmla_resolve_opts(m, &chk)) return AL_ERR;
    st->f = f;
    st->m = m;
    st->n_layers = m->cfg.n_layers;
    if (hi < 0) hi = st->n_layers - 1;
    if (lo < 0 || lo > hi || hi >= st->n_layers)
        return al_err("layers %d-%d out of range: the model has layers 0-%d", lo, hi, st->n_layers - 1);
    st->lo = lo;
    st->hi = hi;
    fwd_clear_attn(f);
    if (!(st->orig = al_calloc((size_t)st->n_layers, sizeof *st->orig, "original layers"))) return AL_ERR;
    for (int l = lo; l <= hi; l++)
        if (attn_layer_load(m, l, &st->orig[l]) || tmla_nope_as_rope(&m->cfg, st->orig[l]))
            { study_free(st); return al_err_ctx("layer %d", l); }
    return AL_OK;
}

/* Mean NLL with the current layers. */
static int eval_nll(Study *st, const int *ids, size_t n, size_t seqlen, double *nll, size_t *count) {
    FwdPpl p;
    int rc = fwd_ppl(st->f, ids, n, seqlen, &p);
    *nll = p.nll;
    *count = p.tokens;
    return rc;
}

/* Frees built layers [lo, hi] and restores the originals. */
static void drop_layers(Study *st, AttnLayer **mla) {
    fwd_clear_attn(st->f);
    for (int l = st->lo; l <= st->hi; l++) {
        attn_layer_free(mla[l]);
        mla[l] = NULL;
    }
}

/* Per converted layer: the key covariance of the merged key under the layer's statistics. */
typedef struct {
    int lo, hi;
    double **C_kv;             /* (n_layers) entries in [lo, hi] */
    double **C_K;
} LayerCov;

static void cov_free(LayerCov *c, int n_layers) {
    for (int l = 0; l < n_layers; l++) {
        if (c->C_kv) free(c->C_kv[l]);
        if (c->C_K) free(c->C_K[l]);
    }
    free(c->C_kv);
    free(c->C_K);
    memset(c, 0, sizeof *c);
}

/* The covariances of the study's layers under sigma / mu (NULL: weights). */
static int cov_new(const Study *st, const double *const *sigma, const double *const *mu, LayerCov *c) {
    memset(c, 0, sizeof *c);
    c->lo = st->lo;
    c->hi = st->hi;
    c->C_kv = al_calloc((size_t)st->n_layers, sizeof *c->C_kv, "covariances");
    c->C_K = al_calloc((size_t)st->n_layers, sizeof *c->C_K, "covariances");
    int rc = c->C_kv && c->C_K ? AL_OK : AL_ERR;
    for (int l = st->lo; rc == AL_OK && l <= st->hi; l++) {
        TmlaLayer *T = NULL;
        const double *S = sigma ? sigma[l] : NULL, *m = S && mu ? mu[l] : NULL;
        rc = tmla_merge(st->orig[l], &T);
        if (rc == AL_OK) rc = tmla_kv_cov_stats(st->orig[l], S, m, &c->C_kv[l]);
        if (rc == AL_OK && !(c->C_K[l] = tmla_key_cov(T, c->C_kv[l]))) rc = AL_ERR;
        tmla_layer_free(T);
    }
    if (rc) cov_free(c, st->n_layers);
    return rc;
}

/* ================================================================ Figure 3b */

void tstudy_removal_free(TstudyRemoval *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_curves; i++) {
        TstudyRemovalCurve *c = &r->curves[i];
        free(c->removed); free(c->rope_dims); free(c->energy); free(c->nll);
    }
    free(r->curves);
    free(r);
}

/* Layer l with RoPE on `kp` merged pairs: RoRoPE (+ FreqFold M) keeping the strongest rotated
 * pairs, or (M == 0) MHA2MLA's kp / G frequencies per KV head. *kept: key energy fraction. */
static int build_removed(TmlaLayer *T, const AttnLayer *gqa, int M, size_t kp, const double *C_K, const double *S,
                         const double *mu, AttnLayer **mla, double *kept) {
    int rc;
    if (M > 0) {
        rc = tmla_rorope(T, M, C_K);
        if (rc == AL_OK) rc = tmla_sort_pairs(T);
    } else {
        size_t G = (size_t)gqa->n_kv_heads, r = kp / G;
        size_t *pairs = al_calloc(kp, sizeof *pairs, "selected pairs");
        rc = pairs ? tmla_mha2mla_pairs(gqa, S, mu, (int)r, pairs) : AL_ERR;
        if (rc == AL_OK) rc = tmla_select_pairs(T, pairs, kp, C_K);
        free(pairs);
    }
    if (rc == AL_OK) rc = tmla_remove_rope(T, (int)(2 * kp), kept);
    if (rc == AL_OK) rc = tmla_fold_scale(T);
    if (rc == AL_OK) rc = tmla_build(T, mla);
    return rc;
}

/* Pairs kept for a removed fraction f: whole merged pairs (RoRoPE) or whole frequencies per KV
 * head (MHA2MLA), at least one. */
static size_t kept_pairs(double f, int M, size_t G, size_t d2) {
    double keep = 1 - f;
    if (M > 0) {
        long k = lround(keep * (double)(G * d2));
        return k < 1 ? 1 : (size_t)k > G * d2 ? G * d2 : (size_t)k;
    }
    long r = lround(keep * (double)d2);
    return G * (r < 1 ? 1 : (size_t)r > d2 ? d2 : (size_t)r);
}

/* One curve (M > 0: RoRoPE + FreqFold M; 0: MHA2MLA) over the fractions. */
static int removal_curve(Study *st, const TstudyRemovalOpts *o, const LayerCov *cov, int M, TstudyRemovalCurve *cv,
                         size_t *done, size_t total) {
    const ModelConfig *c = &st->m->cfg;
    size_t G = (size_t)c->n_kv_heads, d2 = (size_t)c->qk_rope_dim / 2, np = G * d2, nf = o->n_removed;   /* rotary pairs */
    cv->M = M;
    cv->removed = al_calloc(nf, sizeof(double), "a curve");
    cv->rope_dims = al_calloc(nf, sizeof(int), "a curve");
    cv->energy = al_calloc(nf, sizeof(double), "a curve");
    cv->nll = al_calloc(nf, sizeof(double), "a curve");
    AttnLayer **mla = al_calloc((size_t)st->n_layers, sizeof *mla, "converted layers");
    int rc = cv->removed && cv->rope_dims && cv->energy && cv->nll && mla ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < nf; i++) {
        size_t kp = kept_pairs(o->removed[i], M, G, d2), cnt;
        bool seen = false;
        for (size_t j = 0; j < cv->n; j++) seen |= cv->rope_dims[j] == (int)(2 * kp);
        al_progress("variant", ++*done, total);
        if (seen) continue;
        double energy = 0, nll = NAN;
        for (int l = st->lo; rc == AL_OK && l <= st->hi; l++) {
            const double *S = o->sigma ? o->sigma[l] : NULL, *mu = S && o->mu ? o->mu[l] : NULL;
            TmlaLayer *T = NULL;
            double kept = 0;
            rc = tmla_merge(st->orig[l], &T);
            if (rc == AL_OK) rc = build_removed(T, st->orig[l], M, kp, cov->C_K[l], S, mu, &mla[l], &kept);
            if (rc == AL_OK) rc = fwd_set_attn(st->f, l, mla[l]);
            energy += kept;
            tmla_layer_free(T);
            if (rc == AL_ERR) al_err_ctx("layer %d", l);
        }
        if (rc == AL_OK) rc = eval_nll(st, o->ids, o->n_ids, o->seqlen, &nll, &cnt);
        drop_layers(st, mla);
        if (rc) break;
        cv->removed[cv->n] = 1 - (double)kp / (double)np;
        cv->rope_dims[cv->n] = (int)(2 * kp);
        cv->energy[cv->n] = energy / (double)(st->hi - st->lo + 1);
        cv->nll[cv->n] = nll;
        cv->n++;
    }
    free(mla);
    return rc;
}

int tstudy_rope_removal(Forward *f, const TstudyRemovalOpts *o, TstudyRemoval **out) {
    *out = NULL;
    const ModelConfig *c = &fwd_model(f)->cfg;
    int d2 = c->qk_rope_dim / 2;               /* the rotary frequencies of a head (partial rotary: fewer than d/2) */
    for (size_t i = 0; i < o->nM; i++)
        if (o->Ms[i] < 1 || d2 % o->Ms[i])
            return al_err("freqfold %d: M must divide the %d RoPE frequencies of a head", o->Ms[i], d2);
    for (size_t i = 0; i < o->n_removed; i++)
        if (!(o->removed[i] >= 0 && o->removed[i] < 1))
            return al_err("removed fraction %g: give fractions of the RoPE dims in [0, 1)", o->removed[i]);
    if (o->nM + (o->mha2mla ? 1 : 0) == 0 || o->n_removed == 0)
        return al_err("RoPE removal: no curve asked for (give freqfolds and/or the MHA2MLA baseline, and fractions)");
    Study st;
    if (study_new(f, o->layer_lo, o->layer_hi, &st)) return AL_ERR;
    TstudyRemoval *r = al_calloc(1, sizeof *r, "RoPE-removal curves");
    size_t nc = o->nM + (o->mha2mla ? 1 : 0);
    LayerCov cov = {0};
    int rc = r && (r->curves = al_calloc(nc, sizeof *r->curves, "curves")) ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = eval_nll(&st, o->ids, o->n_ids, o->seqlen, &r->base_nll, &r->tokens);
    if (rc == AL_OK) rc = cov_new(&st, o->sigma, o->mu, &cov);
    size_t done = 0, total = nc * o->n_removed;
    for (size_t i = 0; rc == AL_OK && i < nc; i++) {
        rc = removal_curve(&st, o, &cov, i < o->nM ? o->Ms[i] : 0, &r->curves[i], &done, total);
        r->n_curves = i + 1;
    }
    al_progress(NULL, 0, 0);
    cov_free(&cov, st.n_layers);
    study_free(&st);
    if (rc) { tstudy_removal_free(r); return rc; }
    *out = r;
    return AL_OK;
}

/* ================================================================ Figure 4b */

void tstudy_kv_table_free(TstudyKvTable *t) {
    if (!t) return;
    free(t->rows);
    free(t);
}

/* Mean key energy in the first D rotated dims, rotation from cov_rot, measured under cov_act. */
static int rope_energy_under(const Study *st, const LayerCov *cov_rot, const LayerCov *cov_act, int M, int D,
                             double *mean) {
    double acc = 0;
    int rc = AL_OK;
    for (int l = st->lo; rc == AL_OK && l <= st->hi; l++) {
        TmlaLayer *T = NULL;
        rc = tmla_merge(st->orig[l], &T);
        if (rc == AL_OK) rc = tmla_rorope(T, M, cov_rot->C_K[l]);
        if (rc == AL_OK) rc = tmla_remove_rope(T, D, NULL);
        if (rc == AL_OK) acc += tmla_kept_energy(T, cov_act->C_K[l]);
        tmla_layer_free(T);
    }
    *mean = acc / (double)(st->hi - st->lo + 1);
    return rc;
}

/* One row: every studied layer converted with o (act: activation statistics) as `convert mla` converts them
 * (tmla_convert), run as ko->run_layers says `ppl` runs that conversion, then the NLL. */
static int kv_row(Study *st, const TstudyKvTableOpts *ko, const TmlaOpts *o, bool act, TstudyKvRow *row, size_t *count) {
    TmlaOpts one = *o;
    one.sigma = act ? ko->sigma : NULL;
    one.mu = act ? ko->mu : NULL;
    TmlaResult *r = NULL;
    int rc = tmla_convert(st->m, &one, &r);
    AttnLayer *const *run = r ? r->layers : NULL;
    if (rc == AL_OK && ko->run_layers) rc = ko->run_layers(r, fwd_compute(st->f), &run);
    double alpha = 0, joint = 0;
    for (int l = st->lo; rc == AL_OK && l <= st->hi; l++) {
        if (run[l]) rc = fwd_set_attn(st->f, l, run[l]);
        alpha += r->rep[l].alpha;
        joint += r->rep[l].joint_energy;
    }
    if (rc == AL_OK) {
        fwd_set_norm_eps(st->f, ko->norm_eps);
        rc = eval_nll(st, ko->ids, ko->n_ids, ko->seqlen, &row->nll, count);
        fwd_set_norm_eps(st->f, 0);
    }
    fwd_clear_attn(st->f);
    tmla_result_free(r);
    row->alpha = alpha / (double)(st->hi - st->lo + 1);
    row->joint_energy = joint / (double)(st->hi - st->lo + 1);
    return rc;
}

int tstudy_kv_table(Forward *f, const TstudyKvTableOpts *ko, TstudyKvTable **out) {
    *out = NULL;
    Study st;
    if (study_new(f, ko->layer_lo, ko->layer_hi, &st)) return AL_ERR;
    int rc = AL_OK;
    for (int l = st.lo; rc == AL_OK && l <= st.hi; l++)
        if (!ko->sigma || !ko->sigma[l])
            rc = al_err("the W / WX table needs activation statistics for layer %d: calibrate first", l);
    if (rc == AL_OK && ko->n_ranks == 0) rc = al_err("the W / WX table needs at least one kv-rank");
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = ko->rope_dim;
    o.freqfold = ko->freqfold;
    o.compare_balance = false;
    o.eval_tokens = 8;
    o.layer_lo = st.lo;
    o.layer_hi = st.hi;
    for (size_t i = 0; rc == AL_OK && i < ko->n_ranks; i++) {
        o.kv_rank = ko->kv_ranks[i];
        rc = tmla_resolve_opts(st.m, &o);
    }
    if (rc) { study_free(&st); return AL_ERR; }
    TstudyKvTable *tb = al_calloc(1, sizeof *tb, "the W / WX table");
    LayerCov cw = {0}, ca = {0};
    rc = tb && (tb->rows = al_calloc(4 * ko->n_ranks, sizeof *tb->rows, "table rows")) ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = eval_nll(&st, ko->ids, ko->n_ids, ko->seqlen, &tb->base_nll, &tb->tokens);
    if (rc == AL_OK) rc = cov_new(&st, NULL, NULL, &cw);
    if (rc == AL_OK) rc = cov_new(&st, ko->sigma, ko->mu, &ca);
    double re[2] = {0, 0};
    if (rc == AL_OK) rc = rope_energy_under(&st, &cw, &ca, o.freqfold, o.rope_dim, &re[0]);
    if (rc == AL_OK) rc = rope_energy_under(&st, &ca, &ca, o.freqfold, o.rope_dim, &re[1]);
    size_t total = 4 * ko->n_ranks;
    for (size_t i = 0; rc == AL_OK && i < total; i++) {
        TstudyKvRow *row = &tb->rows[i];
        size_t cnt;
        row->kv_rank = ko->kv_ranks[i / 4];
        row->act = (i / 2) % 2 == 1;
        row->balance = i % 2 == 1;
        row->rope_energy = re[row->act];
        o.kv_rank = row->kv_rank;
        o.balance = row->balance;
        rc = kv_row(&st, ko, &o, row->act, row, &cnt);
        tb->n = i + 1;
        al_progress("variant", i + 1, total);
    }
    al_progress(NULL, 0, 0);
    cov_free(&cw, st.n_layers);
    cov_free(&ca, st.n_layers);
    study_free(&st);
    if (rc) { tstudy_kv_table_free(tb); return rc; }
    tb->rope_dim = o.rope_dim;
    tb->freqfold = o.freqfold;
    *out = tb;
    return AL_OK;
}
