/* test_sweep_f32.c -- the rank sweep's FARR_ROUTE_RANKS (issue 32: the fast route with its
 * eigen-solves' Householder reductions in float): its bound holds on every spectrum of the demos
 * against the double route's values (and is wider than FARR_ROUTE_FAST's, whose values it does not
 * share), a threshold placed just under a head's exact cumulative energy is left open by the bound
 * and, certified, gives the double route's rank while a threshold between two values is certified
 * in float; the session cache takes the float route for rank tables only and computes a coarse
 * layer again (in double solves) when its values are asked for. */
#include "farr_internal.h"
#include "testutil.h"
#include "farr.h"
#include "gram.h"

static const char *tmp_root;

/* The l2 distance of the squared values of two spectra (sorted, the same p). */
static double sq_dist(const Spectrum *a, const Spectrum *b) {
    double s = 0;
    for (size_t i = 0; i < a->p && i < b->p; i++) {
        double d = a->sigma[i] * a->sigma[i] - b->sigma[i] * b->sigma[i];
        s += d * d;
    }
    return sqrt(s);
}

static const Spectrum *side(const FarrLayer *l, int h, int j) { return j == 0 ? l->a[h] : j == 1 ? l->b[h] : l->fused[h]; }

/* Layer L of kind on the three routes: every RANKS spectrum within its eps of the double route's
 * and its eps above FAST's; *wider counts spectra whose RANKS values differ from FAST's (the
 * same Grams) by more than 1e-9 of their norm: values that really moved by the float solves. */
static void bound_layer(Model *m, farr_kind kind, int L, const char *what, size_t *n, size_t *wider) {
    FarrLayer *d = NULL, *f = NULL, *r = NULL;
    CHECK_OK(farr_layer_compute_route(m, kind, L, FARR_NO_OFFSET, FARR_ROUTE_STREAM, &d));
    CHECK_OK(farr_layer_compute_route(m, kind, L, FARR_NO_OFFSET, FARR_ROUTE_FAST, &f));
    CHECK_OK(farr_layer_compute_route(m, kind, L, FARR_NO_OFFSET, FARR_ROUTE_RANKS, &r));
    if (!d || !f || !r) goto out;
    CHECK(r->coarse && !f->coarse && !d->coarse, "%s: only the RANKS layer is coarse", what);
    for (int h = 0; h < d->n_heads; h++)
        for (int j = 0; j < 3; j++) {
            double dist = sq_dist(side(r, h, j), side(d, h, j)), er = r->eps[3 * h + j], ef = f->eps[3 * h + j];
            CHECK(dist <= er, "%s head %d spectrum %d: float values %.3g from the double route's, bound %.3g", what, h,
                  j, dist, er);
            CHECK(er > ef, "%s head %d spectrum %d: RANKS bound %.3g not above FAST's %.3g", what, h, j, er, ef);
            double norm = 0;
            for (size_t i = 0; i < side(f, h, j)->p; i++) norm += pow(side(f, h, j)->sigma[i], 4);
            *wider += sq_dist(side(r, h, j), side(f, h, j)) > 1e-9 * sqrt(norm);
            (*n)++;
        }
out:
    farr_layer_free(d); farr_layer_free(f); farr_layer_free(r);
}

static void test_bound(void) {
    static const char *demos[] = {"demo-r1", "demo-r1-bf16", "demo-llama"};
    size_t n = 0, wider = 0;
    for (size_t i = 0; i < sizeof demos / sizeof *demos; i++) {
        Model *m = tu_open_synth(tmp_root, demos[i], SYNTH_DEFAULT_SEED);
        if (!m) continue;
        for (int L = 0; L < m->cfg.n_layers; L++) {
            char what[96];
            snprintf(what, sizeof what, "%s VO layer %d", demos[i], L);
            bound_layer(m, FARR_VO, L, what, &n, &wider);
            if (m->cfg.rope != ROPE_NONE && m->cfg.qk_nope_dim == 0) continue;
            snprintf(what, sizeof what, "%s QK layer %d", demos[i], L);
            bound_layer(m, FARR_QK, L, what, &n, &wider);
        }
        model_free(m);
    }
    printf("RANKS route: %zu spectra within their bound; %zu of them off FAST's values by > 1e-9\n", n, wider);
    CHECK(n > 100 && wider > n / 2, "%zu spectra, %zu off FAST's values: the float solves not taken?", n, wider);
}

/* Head h's spectrum j: a threshold 1e-9 (relative) under its exact cumulative energy at rank q
 * (the double route's) must be open under RANKS' bound; a threshold halfway into the gap to the
 * next value is certified; certified at both, the ranks are the double route's. */
static void test_near(void) {
    Model *m = tu_open_synth(tmp_root, "demo-r1", SYNTH_DEFAULT_SEED);
    if (!m) return;
    FarrLayer *d = NULL;
    CHECK_OK(farr_layer_compute_route(m, FARR_VO, 0, FARR_NO_OFFSET, FARR_ROUTE_STREAM, &d));
    size_t open = 0, far = 0, tried = 0;
    for (int h = 0; d && h < d->n_heads; h++) {
        const Spectrum *s = d->fused[h];
        double T = 0, S = 0;
        for (size_t i = 0; i < s->p; i++) T += s->sigma[i] * s->sigma[i];
        size_t q = spectra_effective_rank(s->sigma, s->p, 0.9);
        if (q == 0 || q >= s->p || !(s->sigma[q] > 0)) continue;
        for (size_t i = 0; i < q; i++) S += s->sigma[i] * s->sigma[i];
        double lq = s->sigma[q] * s->sigma[q];
        double taus[2] = {S / T * (1 - 1e-9), (S + 0.5 * lq) / T};   /* rank q, just; rank q + 1, mid-gap */
        for (int t = 0; t < 2; t++) {
            FarrLayer *r = NULL;
            CHECK_OK(farr_layer_compute_route(m, FARR_VO, 0, FARR_NO_OFFSET, FARR_ROUTE_RANKS, &r));
            if (!r) continue;
            bool certain = spectra_rank_certain(r->fused[h], r->eps[3 * h + 2], taus[t]);
            if (t == 0) CHECK(!certain, "head %d: tau %.12g within 1e-9 of rank %zu's energy certified", h, taus[t], q);
            if (t == 1 && lq > 1e-3 * T) far += certain;
            open += !certain;
            size_t redone = 0;
            CHECK_OK(farr_layer_certify(m, r, taus[t], &redone));
            int rd, rr;
            farr_layer_ranks(d, h, taus[t], NULL, NULL, &rd);
            farr_layer_ranks(r, h, taus[t], NULL, NULL, &rr);
            CHECK(rd == rr && rd == (int)q + t, "head %d tau %.12g: rank %d, double route %d (want %zu)", h, taus[t], rr,
                  rd, q + (size_t)t);
            CHECK(certain || redone > 0, "head %d: open but not redone", h);
            farr_layer_free(r);
            tried++;
        }
    }
    printf("near thresholds: %zu of %zu open (every near one), %zu mid-gap ones certified in float\n", open, tried, far);
    CHECK(far > 0, "no mid-gap threshold certified under the float bound");
    farr_layer_free(d);
    model_free(m);
}

/* The cache: a rank-only sweep keeps coarse layers whose rank table is the double route's; a
 * sweep for values computes them again (FAST's values, bit for bit); an exact view is the double
 * route's. */
static void test_state(void) {
    Model *m = tu_open_synth(tmp_root, "demo-r1", SYNTH_DEFAULT_SEED);
    if (!m || !gram_fast_pays()) { model_free(m); printf("note: no fast route on this CPU\n"); return; }
    FarrState *st = farr_state_new();
    FarrQuery q = {.m = m, .kind = FARR_VO, .lo = 0, .hi = m->cfg.n_layers - 1, .offset = FARR_NO_OFFSET,
                   .ranks_only = true};
    FarrRankRow *rows = NULL, *ref = NULL;
    size_t n = 0, nr = 0;
    CHECK_OK(farr_state_sweep(st, &q));
    const FarrLayer *l = farr_state_get_layer(st, m, FARR_VO, 0, FARR_NO_OFFSET);
    CHECK(l && l->coarse, "a rank-only sweep caches the float route's layer");
    CHECK_OK(farr_state_rank_table(st, &q, 0.9, &rows, &n));
    FarrState *dst = farr_state_new();
    farr_force_double(true);
    CHECK_OK(farr_state_sweep(dst, &q));
    CHECK_OK(farr_state_rank_table(dst, &q, 0.9, &ref, &nr));
    farr_force_double(false);
    CHECK(n == nr && n > 0 && !memcmp(rows, ref, n * sizeof *rows), "rank table: %zu rows, the double route's %zu", n, nr);
    q.ranks_only = false;
    CHECK_OK(farr_state_sweep(st, &q));
    l = farr_state_get_layer(st, m, FARR_VO, 0, FARR_NO_OFFSET);
    FarrLayer *f = NULL;
    CHECK_OK(farr_layer_compute_route(m, FARR_VO, 0, FARR_NO_OFFSET, FARR_ROUTE_FAST, &f));
    int same = 1;
    for (int h = 0; l && f && h < l->n_heads; h++)
        for (int j = 0; j < 3; j++)
            same &= !memcmp(side(l, h, j)->sigma, side(f, h, j)->sigma, side(f, h, j)->p * sizeof(double));
    CHECK(l && !l->coarse && same, "a sweep for values replaces the coarse layer by FAST's values");
    farr_layer_free(f);
    q.ranks_only = true;
    CHECK_OK(farr_state_sweep(st, &q));     /* cached, not coarse: kept */
    const FarrLayer *e = NULL;
    CHECK_OK(farr_state_layer(st, m, FARR_VO, 1, FARR_NO_OFFSET, &e));
    CHECK(e && !e->coarse && !e->eps, "an exact view is the double route's");
    free(rows); free(ref);
    farr_state_free(st); farr_state_free(dst);
    model_free(m);
}

int main(void) {
    tmp_root = test_tmpdir();
    test_bound();
    test_near();
    test_state();
    return check_done();
}
