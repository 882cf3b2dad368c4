/* budget_text.c -- every KV-cache reduction at one budget on a text (see budget_text.h): the model's attention
 * inputs and outputs of the first window captured once, the width methods' layer table on them
 * (budget_layer_from), each eviction's layer errors (one layer evicting at a time), and the perplexity of each
 * width method (its layers swapped in), each eviction (every layer evicting) and each combination. Owns the
 * BudgetText it returns. */
#define _GNU_SOURCE
#include "budget_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "analyses.h"
#include "budget_run.h"
#include "layersel.h"

/* What one comparison works on: the model's attention layers and the captured first / fit windows. */
typedef struct {
    Forward *f;
    Model *m;
    const BudgetTextOpts *o;
    int nl;                   /* attention layers */
    int *layer;               /* (nl) their ids */
    int *idx;                 /* (n_layers) index into layer, -1: not an attention layer */
    size_t *win;              /* (nl) their sliding windows (0: none) */
    AttnLayer **src;          /* (nl) the model's layers */
    size_t T, Tf, D;          /* first window, fit window, hidden */
    float *X, *Xf, *P;        /* (nl, T, D) inputs, (nl, Tf, D) fit inputs, (nl, T, D) outputs after W_O */
    float *E;                 /* (T, D) one evicting layer's output */
    int evict_layer;          /* the layer E is caught from */
    int *pos;                 /* (max(T, Tf)) 0, 1, ... */
} Ctx;

void budget_text_free(BudgetText *t) {
    if (!t) return;
    free(t->rows);
    budget_result_free(t->layers);
    free(t->evict_err);
    free(t);
}

static void ctx_free(Ctx *x) {
    for (int i = 0; x->src && i < x->nl; i++) attn_layer_free(x->src[i]);
    free(x->src); free(x->layer); free(x->idx); free(x->win); free(x->X); free(x->Xf); free(x->P); free(x->E); free(x->pos);
}

/* ================================================================ capturing */

/* Copies rows of a hooked activation into dst (rows of D floats) at the chunk's rows. */
static void put_rows(const FwdAct *a, float *dst, size_t D) {
    for (size_t t = 0; t < a->T; t++) memcpy(dst + (a->t0 + t) * D, fwd_act_row(a, t, 0), D * sizeof(float));
}

typedef struct { Ctx *x; bool fit; } Catch;

static int catch_io(const FwdAct *a, void *ud) {
    Catch *c = ud;
    Ctx *x = c->x;
    int i = x->idx[a->layer];
    if (i < 0) return AL_OK;
    size_t T = c->fit ? x->Tf : x->T;
    if (a->kind == FWD_ATTN_IN) put_rows(a, (c->fit ? x->Xf : x->X) + (size_t)i * T * x->D, x->D);
    else if (!c->fit) put_rows(a, x->P + (size_t)i * T * x->D, x->D);
    return AL_OK;
}

static int catch_evicted(const FwdAct *a, void *ud) {
    Ctx *x = ud;
    if (a->layer == x->evict_layer) put_rows(a, x->E, x->D);
    return AL_OK;
}

/* Runs ids[0..T) as a fresh sequence with hooks h (removed after). */
static int run_hooked(Forward *f, const FwdHooks *h, const int *ids, size_t T) {
    fwd_set_hooks(f, h);
    fwd_reset(f);
    int rc = fwd_run(f, ids, T, FWD_LOGITS_NONE, NULL);
    fwd_set_hooks(f, NULL);
    fwd_reset(f);
    return rc;
}

/* The layers, the model's layers and the captured windows. */
static int ctx_init(Ctx *x) {
    const ModelConfig *c = &x->m->cfg;
    const BudgetTextOpts *o = x->o;
    int lo = 0, hi = c->n_layers - 1;
    if (layersel_range(c, "compare", &lo, &hi, NULL, 0)) return AL_ERR;
    x->nl = layersel_count(c, lo, hi);
    x->D = (size_t)c->hidden;
    x->T = o->n < o->seqlen ? o->n : o->seqlen;
    x->Tf = o->n >= 2 * o->seqlen ? o->seqlen : o->n > o->seqlen + 1 ? o->n - o->seqlen : 0;
    size_t Tf = x->Tf ? x->Tf : x->T, nl = (size_t)x->nl;
    x->layer = al_calloc(nl, sizeof(int), "layers");
    x->idx = al_malloc3((size_t)c->n_layers, 1, sizeof(int), "layers");
    x->win = al_calloc(nl, sizeof(size_t), "windows");
    x->src = al_calloc(nl, sizeof *x->src, "layers");
    x->X = al_malloc3(nl * x->T, x->D, sizeof(float), "attention inputs");
    x->Xf = al_malloc3(nl * Tf, x->D, sizeof(float), "attention inputs");
    x->P = al_malloc3(nl * x->T, x->D, sizeof(float), "attention outputs");
    x->E = al_malloc3(x->T, x->D, sizeof(float), "attention outputs");
    x->pos = al_malloc3(x->T > Tf ? x->T : Tf, 1, sizeof(int), "positions");
    if (!x->layer || !x->idx || !x->win || !x->src || !x->X || !x->Xf || !x->P || !x->E || !x->pos) return AL_ERR;
    for (size_t t = 0; t < (x->T > Tf ? x->T : Tf); t++) x->pos[t] = (int)t;
    for (int l = 0; l < c->n_layers; l++) x->idx[l] = -1;
    int i = 0, rc = AL_OK;
    for (int l = lo; rc == AL_OK && l <= hi; l = layersel_next(c, l + 1, hi), i++) {
        x->layer[i] = l;
        x->idx[l] = i;
        x->win[i] = fwd_attn_window(x->f, l);
        rc = attn_layer_load(x->m, l, &x->src[i]);
        if (rc == AL_OK) rc = attn_layer_finite(x->src[i]);
    }
    return rc;
}

/* The first window's attention inputs and outputs, and the fit window's inputs (the first's without one). */
static int ctx_capture(Ctx *x) {
    Catch c = {x, false};
    FwdHooks h = {.mask = FWD_ATTN_IN | FWD_ATTN_PROJ, .fn = catch_io, .ud = &c};
    int rc = run_hooked(x->f, &h, x->o->ids, x->T);
    if (rc == AL_OK && x->Tf) {
        c.fit = true;
        h.mask = FWD_ATTN_IN;
        rc = run_hooked(x->f, &h, x->o->ids + x->o->seqlen, x->Tf);
    }
    if (rc == AL_OK && !x->Tf) {
        x->Tf = x->T;
        memcpy(x->Xf, x->X, (size_t)x->nl * x->T * x->D * sizeof(float));
    }
    return rc;
}

static Mat mat_of(float *p, size_t rows, size_t cols) { return (Mat){.rows = rows, .cols = cols, .data = p}; }

/* ================================================================ per-layer errors */

/* The width methods' layer table on the captured windows. */
static int width_layers(Ctx *x, BudgetResult *r) {
    int rc = AL_OK;
    r->rows = al_calloc((size_t)x->nl * BUDGET_NMETHODS, sizeof *r->rows, "comparison rows");
    if (!r->rows) return AL_ERR;
    for (int i = 0; rc == AL_OK && i < x->nl; i++) {
        int l = x->layer[i];
        Mat X = mat_of(x->X + (size_t)i * x->T * x->D, x->T, x->D), Xf = mat_of(x->Xf + (size_t)i * x->Tf * x->D, x->Tf, x->D);
        BudgetKqFrom kq = {.st = x->o->calib, .p = x->o->kq, .layer = l};
        BudgetRow *rows = r->rows + (size_t)i * BUDGET_NMETHODS;
        rc = budget_layer_from(x->src[i], r->budget, &X, x->pos, &Xf, x->pos, x->o->sigma ? x->o->sigma[l] : NULL, &kq,
                               rows, &r->kq_from);
        for (int k = 0; k < BUDGET_NMETHODS; k++) rows[k].layer = l;
        if (rc) al_err_ctx("compare, layer %d", l);
        al_progress("layer", (size_t)i + 1, (size_t)x->nl);
    }
    r->n_rows = x->nl * BUDGET_NMETHODS;
    return rc;
}

/* ||a - b|| / ||b|| over n floats. */
static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Each eviction's layer errors: that layer alone evicting on the first window (its inputs the model's). */
static int evict_layers(Ctx *x, size_t C, double *err) {
    FwdHooks h = {.mask = FWD_ATTN_PROJ, .fn = catch_evicted, .ud = x};
    int rc = AL_OK;
    for (int k = 0; rc == AL_OK && k < EVICT_NKINDS; k++)
        for (int i = 0; rc == AL_OK && i < x->nl; i++) {
            EvictPolicy p = evict_policy((evict_kind)k, C);
            p.layer = x->evict_layer = x->layer[i];
            fwd_set_evict(x->f, evict_fwd, &p);
            rc = run_hooked(x->f, &h, x->o->ids, x->T);
            fwd_set_evict(x->f, NULL, NULL);
            if (rc == AL_OK) err[(size_t)i * EVICT_NKINDS + k] = rel_err(x->E, x->P + (size_t)i * x->T * x->D, x->T * x->D);
        }
    return rc;
}

/* ================================================================ perplexities */

/* The text's mean NLL with f as set. */
static int text_nll(Ctx *x, double *nll, BudgetText *bt) {
    FwdPpl p;
    int rc = fwd_ppl(x->f, x->o->ids, x->o->n, x->o->seqlen, &p);
    *nll = rc == AL_OK ? p.nll : NAN;
    bt->tokens = p.tokens;
    bt->windows = p.windows;
    return rc;
}

/* Method k's layers at budget B (lay, nl entries); *why: a layer's reason when one cannot; *kv: their mean
 * cache. */
static int width_build(Ctx *x, budget_method k, size_t B, AttnLayer **lay, BudgetRow *why, double *kv) {
    *kv = 0;
    for (int i = 0; i < x->nl; i++) {
        int l = x->layer[i];
        Mat Xf = mat_of(x->Xf + (size_t)i * x->Tf * x->D, x->Tf, x->D);
        int rc = budget_method_layer(x->src[i], B, k, x->o->sigma ? x->o->sigma[l] : NULL, &Xf, x->pos, &lay[i], why);
        if (rc) return al_err_ctx("compare, layer %d", l);
        if (!lay[i]) return AL_OK;
        *kv += (double)why->kv_values / x->nl;
    }
    return AL_OK;
}

static void free_layers(AttnLayer **lay, int nl) {
    for (int i = 0; i < nl; i++) { attn_layer_free(lay[i]); lay[i] = NULL; }
}

/* Mean over the layers of lay's output error on the first window against the model's layer. */
static int layers_err(Ctx *x, AttnLayer **lay, double *mean) {
    *mean = 0;
    for (int i = 0; i < x->nl; i++) {
        Mat X = mat_of(x->X + (size_t)i * x->T * x->D, x->T, x->D);
        AttnOut *a = NULL, *b = NULL;
        double se, oe;
        int rc = attn_eval(x->src[i], &X, x->pos, false, &a);
        if (rc == AL_OK) rc = attn_eval(lay[i], &X, x->pos, false, &b);
        if (rc == AL_OK) { attn_rel_err(a, b, &se, &oe); *mean += oe / x->nl; }
        attn_out_free(a);
        attn_out_free(b);
        if (rc) return rc;
    }
    return AL_OK;
}

/* Every layer of lay swapped in: the text's NLL (lay freed after). */
static int swapped_nll(Ctx *x, AttnLayer **lay, double *nll, BudgetText *bt) {
    int rc = AL_OK;
    for (int i = 0; rc == AL_OK && i < x->nl; i++) rc = fwd_set_attn(x->f, x->layer[i], lay[i]);
    if (rc == AL_OK) rc = text_nll(x, nll, bt);
    fwd_clear_attn(x->f);
    return rc;
}

/* In compute bf16, lay (method k's) as their dense export runs them (budget_run.h) into run; *all: every layer has
 * its stock (else run is left empty: lay runs as it is, float32, as before). */
static int width_run(Ctx *x, budget_method k, AttnLayer **lay, AttnLayer **run, bool *all) {
    *all = fwd_compute(x->f) == MM_BF16;
    for (int i = 0; *all && i < x->nl; i++) {
        int rc = budget_run_layer(x->m, x->layer[i], x->src[i], lay[i], k, &run[i]);
        if (rc) return rc;
        *all = run[i] != NULL;
    }
    if (!*all) free_layers(run, x->nl);
    return AL_OK;
}

/* The text's NLL with method k's layers lay swapped in, StreamingLLM at cache C on top when C > 0 (stream_on set it
 * in lay). Run as their dense export where width_run gives every layer a stock: the model's own attention code, which
 * takes StreamingLLM as the eviction row's key mask (fwd_set_evict, the same keys) -- on a model without windows of
 * its own; with them the combination keeps float32 layers. */
static int width_nll(Ctx *x, budget_method k, AttnLayer **lay, size_t C, double *nll, BudgetText *bt) {
    AttnLayer **run = al_calloc((size_t)x->nl, sizeof *run, "layers");
    bool stock = false;
    int rc = run ? width_run(x, k, lay, run, &stock) : AL_ERR;
    for (int i = 0; stock && C && i < x->nl; i++) stock = x->win[i] == 0;
    EvictPolicy p = evict_policy(EVICT_STREAMING, C);
    if (rc == AL_OK && stock && C) fwd_set_evict(x->f, evict_fwd, &p);
    if (rc == AL_OK) rc = swapped_nll(x, stock ? run : lay, nll, bt);
    fwd_set_evict(x->f, NULL, NULL);
    if (run) free_layers(run, x->nl);
    free(run);
    return rc;
}

/* StreamingLLM on every layer of lay at capacity C: window C - sinks and the sink tokens (a layer with a window
 * of its own keeps the shorter window and no sinks). */
static void stream_on(AttnLayer **lay, int nl, size_t C) {
    EvictPolicy p = evict_policy(EVICT_STREAMING, C);
    size_t s = p.sinks < C ? p.sinks : C - 1;
    for (int i = 0; i < nl; i++) {
        bool own = lay[i]->window > 0;
        if (!own || C - s < lay[i]->window) lay[i]->window = C - s;
        lay[i]->sink_tokens = own ? 0 : s;
    }
}

/* The row of width method k at B (combo: at 2 B with StreamingLLM back to B). */
static int width_row(Ctx *x, budget_method k, bool combo, BudgetText *bt, BudgetTextRow *row) {
    AttnLayer **lay = al_calloc((size_t)x->nl, sizeof *lay, "layers");
    BudgetRow why = {0};
    double kv = 0;
    snprintf(row->method, sizeof row->method, "%s%s", budget_method_name(k), combo ? "+streaming-llm" : "");
    row->family = combo ? BTEXT_COMBO : BTEXT_WIDTH;
    row->out_err = row->nll = NAN;
    int rc = lay ? width_build(x, k, combo ? 2 * bt->budget : bt->budget, lay, &why, &kv) : AL_ERR;
    bool all = rc == AL_OK && lay[x->nl - 1];
    if (rc == AL_OK && !all) snprintf(row->setting, sizeof row->setting, "%s", why.setting);
    if (all) {
        size_t C = combo ? evict_capacity_layers(bt->seqlen, (double)bt->budget / kv, x->win, x->nl) : 0;
        if (combo) stream_on(lay, x->nl, C);
        if (combo) snprintf(row->setting, sizeof row->setting, "%.60s at %lld value%s, cache %zu token%s", why.setting,
                           (long long)llround(kv), al_s((long long)llround(kv)), C, al_s(C));
        else snprintf(row->setting, sizeof row->setting, "%s", why.setting);
        row->kv_values = combo ? kv * evict_read_frac_layers(bt->seqlen, C, x->win, x->nl) : kv;
        rc = layers_err(x, lay, &row->out_err);
        if (rc == AL_OK && k != BUDGET_KQSVD) rc = width_nll(x, k, lay, C, &row->nll, bt);
        row->ok = rc == AL_OK;
    }
    if (lay) free_layers(lay, x->nl);
    free(lay);
    return rc;
}

/* The row of eviction kind k at capacity C (every layer evicting). */
static int evict_row(Ctx *x, evict_kind k, size_t C, BudgetText *bt, BudgetTextRow *row) {
    EvictPolicy p = evict_policy(k, C);
    snprintf(row->method, sizeof row->method, "%s", evict_name(k));
    row->family = BTEXT_EVICT;
    row->kv_values = (double)bt->kv_model * evict_read_frac_layers(bt->seqlen, C, x->win, x->nl);
    size_t sinks = p.sinks < C ? p.sinks : C - 1;
    if (k == EVICT_STREAMING) snprintf(row->setting, sizeof row->setting, "cache %zu token%s: %zu sink%s + %zu recent", C, al_s(C),
                                       sinks, al_s(sinks), C - sinks);
    else if (k == EVICT_H2O) snprintf(row->setting, sizeof row->setting, "cache %zu token%s: %zu heavy + %zu recent", C, al_s(C),
                                      C - p.recent, p.recent);
    else snprintf(row->setting, sizeof row->setting, "cache %zu token%s: window %zu, pool %zu", C, al_s(C),
                  p.obs_window < C / 2 ? p.obs_window : C / 2 ? C / 2 : 1, p.kernel);
    double e = 0;
    for (int i = 0; i < x->nl; i++) e += bt->evict_err[(size_t)i * EVICT_NKINDS + k] / x->nl;
    row->out_err = e;
    fwd_set_evict(x->f, evict_fwd, &p);
    int rc = text_nll(x, &row->nll, bt);
    fwd_set_evict(x->f, NULL, NULL);
    row->ok = rc == AL_OK;
    return rc;
}

/* KQ-SVD's row from the layer table: its cache and mean error; no perplexity (the pass cannot run it). */
static void kqsvd_row(const BudgetText *bt, BudgetTextRow *row) {
    double e = 0, kv = 0;
    int n = 0;
    for (int i = 0; i < bt->layers->n_rows; i++) {
        const BudgetRow *w = &bt->layers->rows[i];
        if (w->method != BUDGET_KQSVD || !w->ok) continue;
        if (!n) snprintf(row->setting, sizeof row->setting, "%.60s; no perplexity: its projections act on the cached keys "
                         "after RoPE", w->setting);
        e += w->out_err;
        kv += (double)w->kv_values;
        n++;
    }
    if (!n) return;
    row->ok = true;
    row->out_err = e / n;
    row->kv_values = kv / n;
}

/* ================================================================ the comparison */

/* The rows: the model, the width methods, the evictions, the combinations. */
static int text_rows(Ctx *x, BudgetText *bt) {
    int n = 1 + BUDGET_NMETHODS + EVICT_NKINDS + (BUDGET_NMETHODS - 1), r = 0, rc = AL_OK;
    if (!(bt->rows = al_calloc((size_t)n, sizeof *bt->rows, "comparison rows"))) return AL_ERR;
    BudgetTextRow *m = &bt->rows[r++];
    snprintf(m->method, sizeof m->method, "model");
    snprintf(m->setting, sizeof m->setting, "as loaded");
    m->family = BTEXT_MODEL;
    m->kv_values = (double)bt->kv_model;
    m->out_err = 0;
    rc = text_nll(x, &m->nll, bt);
    m->ok = rc == AL_OK;
    for (int k = 0; rc == AL_OK && k < BUDGET_NMETHODS; k++, al_progress("method", (size_t)r, (size_t)n))
        if ((rc = width_row(x, (budget_method)k, false, bt, &bt->rows[r++])) == AL_OK && k == BUDGET_KQSVD)
            kqsvd_row(bt, &bt->rows[r - 1]);
    for (int k = 0; rc == AL_OK && k < EVICT_NKINDS; k++, al_progress("method", (size_t)r, (size_t)n))
        rc = evict_row(x, (evict_kind)k, bt->capacity, bt, &bt->rows[r++]);
    for (int k = 0; rc == AL_OK && k < BUDGET_NMETHODS; k++, al_progress("method", (size_t)r, (size_t)n))
        if (k != BUDGET_KQSVD) rc = width_row(x, (budget_method)k, true, bt, &bt->rows[r++]);
    bt->n_rows = r;
    return rc;
}

/* bt's budget, cache, windows and eviction capacity; lr (taken over) its layer table. */
static void text_head(BudgetText *bt, BudgetResult *lr, const Ctx *x) {
    const BudgetTextOpts *o = x->o;
    bt->layers = lr;
    bt->budget = lr->budget = o->budget;
    bt->kv_model = lr->kv_model = cfg_kv_values(&x->m->cfg);
    bt->seqlen = o->seqlen;
    bt->capacity = evict_capacity_layers(o->seqlen, (double)o->budget / (double)bt->kv_model, x->win, x->nl);
    bt->read_frac = evict_read_frac_layers(o->seqlen, bt->capacity, x->win, x->nl);
    for (int i = 0; i < x->nl; i++) bt->windowed |= x->win[i] > 0 && x->win[i] < o->seqlen;
}

int budget_text(Forward *f, const BudgetTextOpts *o, BudgetText **out) {
    *out = NULL;
    Model *m = fwd_model(f);
    if (analysis_check(m, AN_COMPARE)) return AL_ERR;
    if (o->budget < 1) return al_err("compare: kv-budget must be at least 1 value per token per layer");
    if (o->n < 2 || o->seqlen < 2) return al_err("compare: the text needs at least 2 tokens (it has %zu)", o->n);
    Ctx x = {.f = f, .m = m, .o = o, .evict_layer = -1};
    BudgetText *bt = al_calloc(1, sizeof *bt, "a comparison");
    BudgetResult *lr = al_calloc(1, sizeof *lr, "a comparison");
    int rc = bt && lr ? ctx_init(&x) : AL_ERR;
    if (rc == AL_OK) {
        text_head(bt, lr, &x);
        lr = NULL;
    }
    free(lr);
    fwd_clear_attn(f);
    fwd_set_evict(f, NULL, NULL);
    bool own = x.Tf == 0;
    if (rc == AL_OK) rc = ctx_capture(&x);
    if (rc == AL_OK) {
        bt->err_tokens = bt->layers->tokens = x.T;
        bt->fit_own = own;
        rc = width_layers(&x, bt->layers);
    }
    if (rc == AL_OK && !(bt->evict_err = al_calloc((size_t)x.nl * EVICT_NKINDS, sizeof(double), "errors"))) rc = AL_ERR;
    if (rc == AL_OK) rc = evict_layers(&x, bt->capacity, bt->evict_err);
    if (rc == AL_OK) rc = text_rows(&x, bt);
    al_progress(NULL, 0, 0);
    fwd_clear_attn(f);
    fwd_set_evict(f, NULL, NULL);
    ctx_free(&x);
    if (rc) { budget_text_free(bt); return rc; }
    *out = bt;
    return AL_OK;
}
