/* test_calib.c -- calibration statistics and KQ-SVD evaluation on the real forward pass:
 *  - stories260K (GQA: 8 query heads on 4 KV heads, RoPE): the Grams calib_run accumulates from
 *    the hooks equal Grams formed from independently captured Q, K, V (the group's queries
 *    stacked, Theorem 5), and G_X and the mean E[x] those of the captured attention inputs;
 *    counts are exact; Ctrl-C (the interrupt flag) in layer-major calibration stops within one
 *    layer's window, not after its group of windows: set after layer 2 of a group it stops before
 *    layer 3 (layers 1-2 saw the group, the rest nothing), set from a hook in layer 2's first window
 *    it stops after that window (layer 1 saw 4 windows, layer 2 one, layer 3 none) -- calib_run's
 *    partial sums, which `calibrate` drops (cli_calib_state);
 *  - on those real caches: the Gram-based errors on the whole calibration set equal the errors of
 *    the formed matrices (K S, K S Qᵀ over all T x (m T) scores), KQ-SVD's K Qᵀ error is never
 *    above K-SVD's or Eigen's, and with keys x beta, queries / beta K-SVD and KQ-SVD stay flat
 *    while Eigen drifts to K-SVD (Theorem 4);
 *  - kq_eval_run: the evaluator's recomputed attention equals the forward pass's own attention
 *    output (softmax scale, causal mask) on stories260K, its HF layout, GPT-2 and the synthetic
 *    DeepSeek (MLA) and Llama demos; full-rank projections give zero error.
 * Needs $ATTNLAB_MODELS (skips, exit 77, without it). */
#define _GNU_SOURCE
#include "check.h"
#include "kqsvd.h"
#include "sweep.h"
#include "synth.h"
#include "tokenizer.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

/* The squared relative error num / den (the Theorem 4 checks below are on squares; kq_rel is its root). */
static double rel2(double num, double den) { return den > 0 ? num / den : 0.0; }

static const char STORY[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a "
    "big, red ball. She wanted to play with it, but it was too high. Lily asked her mom to help her. Her mom said, "
    "\"Let's get the ball together!\" They went to the tree and tried to reach the ball. Lily was sad, but her mom had "
    "an idea. They found a long stick and poked the ball. The ball fell down and Lily was happy. Once upon a time, "
    "there was a little boy named Tim. Tim had a big dog named Max. Max was a good dog. He liked to run and play.";

/* ---------------------------------------------------------------- capture of raw activations */

typedef struct {
    int layer;                /* the layer captured */
    size_t rows;              /* rows captured so far (all sequences) */
    float *q, *k, *v;         /* (rows, H d), (rows, G d), (rows, G dv) */
    float *x;                 /* (rows, hidden) attention inputs, or NULL */
} Capture;

static int capture_hook(const FwdAct *a, void *ud) {
    Capture *c = ud;
    if (a->layer != c->layer) return AL_OK;
    float **dst = a->kind == FWD_Q_ROPE ? &c->q : a->kind == FWD_K_ROPE ? &c->k : a->kind == FWD_V ? &c->v
                : a->kind == FWD_ATTN_IN ? &c->x : NULL;
    size_t w = a->heads * a->head_dim;
    if (!dst) return AL_OK;
    size_t base = c->rows;
    for (size_t t = 0; t < a->T; t++) memcpy(*dst + (base + a->pos0 + t) * w, a->x + t * a->ld, w * sizeof(float));
    return AL_OK;
}

/* Gram of the columns [c0, c0+n) of X (rows x w, float) in double. */
static void gram_cols(const float *X, size_t rows, size_t w, size_t c0, size_t n, double *G) {
    memset(G, 0, n * n * sizeof *G);
    for (size_t t = 0; t < rows; t++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) G[i * n + j] += (double)X[t * w + c0 + i] * X[t * w + c0 + j];
}

static double max_rel(const double *a, const double *b, size_t n) {
    double m = 0, s = 0;
    for (size_t i = 0; i < n; i++) s = fmax(s, fabs(b[i]));
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]) / s);
    return m;
}

/* ---------------------------------------------------------------- the real GQA model */

/* Progress hook that plays Ctrl-C once layer 2 has run (layer-major: over the first group's windows). */
static void set_after_two(const char *label, size_t done, size_t total, void *ud) {
    (void)total; (void)ud;
    if (label && done == 2) al_interrupt_flag = 1;
}

/* calib_run's hook (sums, and a sequence counted at its last ATTN_IN chunk) that plays Ctrl-C in the first window of
 * layer `at` (layer-major: after the layers before it have run over every window of the group). */
typedef struct { CalibStats *st; size_t seqlen; int at; } AtCtx;
static int at_layer_hook(const FwdAct *a, void *ud) {
    AtCtx *c = ud;
    if (a->layer == c->at) al_interrupt_flag = 1;
    int rc = calib_add_act(c->st, a);
    if (rc == AL_OK && a->kind == FWD_ATTN_IN && a->pos0 + a->T == c->seqlen) calib_seq_done(c->st, a->layer);
    return rc;
}

/* Layer-major calibration of NS windows of L tokens (one group) interrupted: from the progress line after layer 2,
 * and from a hook in layer 2's first window. Ctrl-C is seen between layers and between a layer's windows. */
static void interrupt_layers(Forward *f, const CalibShape *sh, const int *ids, size_t NS, size_t L) {
    CalibStats *st = NULL;
    CHECK(sh->n_layers >= 4, "%d layers", sh->n_layers);
    CHECK_OK(calib_new(sh, true, &st));
    al_interrupt_flag = 0;
    fwd_set_group_tokens(f, NS * L);                    /* one group of NS windows */
    al_set_progress(set_after_two, NULL);
    int rc = calib_run(st, f, ids, NS, L);
    al_set_progress(NULL, NULL);
    al_interrupt_flag = 0;
    CHECK(rc == AL_INTERRUPTED, "interrupted after layer 2: rc %d", rc);
    CHECK(st && st->seqs[0] == NS && st->seqs[1] == NS && st->seqs[2] == 0 && st->tokens[3] == 0,
          "stopped before layer 3, not after the group: windows per layer %zu %zu %zu %zu", st->seqs[0], st->seqs[1],
          st->seqs[2], st->seqs[3]);
    calib_free(st);
    st = NULL;
    CHECK_OK(calib_new(sh, true, &st));
    AtCtx c = {.st = st, .seqlen = L, .at = 1};
    FwdHooks h = {.mask = calib_hook_mask(st), .fn = at_layer_hook, .ud = &c, .chunk = 1024, .whole_seqs = true};
    rc = fwd_run_hooked_layers(f, &h, ids, NS, L, 0);
    al_interrupt_flag = 0;
    CHECK(rc == AL_INTERRUPTED && fwd_layer_major_groups(f) == 1, "interrupted in layer 2: rc %d, %zu groups", rc,
          fwd_layer_major_groups(f));
    CHECK(st && st->seqs[0] == NS && st->seqs[1] == 1 && st->tokens[1] == L && st->seqs[2] == 0,
          "layer 2 ran its first window whole, then stopped: windows per layer %zu %zu %zu", st->seqs[0], st->seqs[1],
          st->seqs[2]);
    calib_free(st);
    fwd_set_group_tokens(f, 0);
}

static void test_stories(const char *models) {
    char path[4096], tokp[4096];
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", models);
    snprintf(tokp, sizeof tokp, "%s/stories260K/tok512.bin", models);
    Model *m = NULL;
    Forward *f = NULL;
    Tokenizer *tok = NULL;
    CHECK_OK(model_open(path, &m));
    CHECK_OK(tok_open(tokp, &tok));
    if (!m || !tok) return;
    CHECK_OK(fwd_new(m, NULL, &f));
    int *ids = NULL;
    size_t n = 0;
    CHECK_OK(tok_encode(tok, STORY, strlen(STORY), true, &ids, &n));
    const size_t L = 24, NS = 4;
    CHECK(n >= L * NS, "story has %zu tokens", n);
    CalibShape sh;
    CHECK_OK(calib_shape_of(m, &sh));
    CHECK(sh.n_heads == 8 && sh.n_kv_heads == 4 && sh.d_qk == 8, "stories260K shape %d %d %d", sh.n_heads, sh.n_kv_heads, sh.d_qk);
    CalibStats *st = NULL;
    CHECK_OK(calib_new(&sh, true, &st));
    CHECK_OK(calib_run(st, f, ids, NS, L));
    for (int l = 0; l < sh.n_layers; l++)
        CHECK(st->tokens[l] == NS * L && st->seqs[l] == NS, "layer %d counts %zu %zu", l, st->tokens[l], st->seqs[l]);

    /* Independent capture of layer 2's caches over the same sequences. */
    size_t H = 8, G = 4, d = 8, dv = 8, R = NS * L;
    Capture cap = {.layer = 2};
    cap.q = malloc(R * H * d * sizeof(float));
    cap.k = malloc(R * G * d * sizeof(float));
    cap.v = malloc(R * G * dv * sizeof(float));
    cap.x = malloc(R * (size_t)sh.hidden * sizeof(float));
    FwdHooks h = {.mask = FWD_Q_ROPE | FWD_K_ROPE | FWD_V | FWD_ATTN_IN, .fn = capture_hook, .ud = &cap, .chunk = 7};
    fwd_set_hooks(f, &h);
    for (size_t s = 0; s < NS; s++) {
        fwd_reset(f);
        CHECK_OK(fwd_run(f, ids + s * L, L, FWD_LOGITS_NONE, NULL));
        cap.rows += L;
    }
    fwd_set_hooks(f, NULL);
    double Gk[64], Gq[64], Gv[64], Sk[64], Sq[64], Sv[64], tmp[64];
    for (size_t g = 0; g < G; g++) {
        gram_cols(cap.k, R, G * d, g * d, d, Gk);
        gram_cols(cap.v, R, G * dv, g * dv, dv, Gv);
        memset(Gq, 0, sizeof Gq);
        for (size_t hh = 2 * g; hh < 2 * g + 2; hh++) {           /* the group's two query heads, stacked */
            gram_cols(cap.q, R, H * d, hh * d, d, tmp);
            for (int i = 0; i < 64; i++) Gq[i] += tmp[i];
        }
        calib_gram(st, CALIB_K, 2, (int)g, Sk);
        calib_gram(st, CALIB_Q, 2, (int)g, Sq);
        calib_gram(st, CALIB_V, 2, (int)g, Sv);
        CHECK(max_rel(Sk, Gk, 64) < 1e-12, "G_K layer 2 head %zu: %g", g, max_rel(Sk, Gk, 64));
        CHECK(max_rel(Sq, Gq, 64) < 1e-12, "G_Q (stacked group) layer 2 group %zu: %g", g, max_rel(Sq, Gq, 64));
        CHECK(max_rel(Sv, Gv, 64) < 1e-12, "G_V layer 2 head %zu: %g", g, max_rel(Sv, Gv, 64));
    }
    {   /* the attention input: G_X and the mean */
        size_t D = (size_t)sh.hidden;
        double *Gx = malloc(D * D * sizeof *Gx), *Sx = malloc(D * D * sizeof *Sx), *mu = calloc(D, sizeof *mu);
        double *ref = calloc(D, sizeof *ref);
        gram_cols(cap.x, R, D, 0, D, Gx);
        CHECK_OK(calib_gram(st, CALIB_X, 2, 0, Sx));
        CHECK(max_rel(Sx, Gx, D * D) < 1e-12, "G_X layer 2: %g", max_rel(Sx, Gx, D * D));
        for (size_t t = 0; t < R; t++)
            for (size_t j = 0; j < D; j++) ref[j] += (double)cap.x[t * D + j] / (double)R;
        CHECK_OK(calib_mean(st, 2, mu));
        CHECK(max_rel(mu, ref, D) < 1e-12, "E[x] layer 2: %g", max_rel(mu, ref, D));
        free(Gx); free(Sx); free(mu); free(ref);
    }

    /* Gram-based errors on the whole calibration set = formed matrices (layer 2, KV group 1:
     * K is R x d, the stacked queries 2R x d, the score matrix R x 2R). */
    double *gw = NULL;
    CHECK_OK(kq_wo_grams(m, &gw));
    KqProj *p[KQ_NMETHODS] = {0};
    KqSpec spec = {.rank = 3, .beta = 1};
    for (int k = 0; k < KQ_NMETHODS; k++) CHECK_OK(kq_learn(st, gw, (kq_method)k, &spec, &p[k]));
    if (p[0] && p[1] && p[2]) {
        for (int k = 0; k < KQ_NMETHODS; k++) {
            const double *A = p[k]->A_K[2], *B = p[k]->B_K[2];
            KqGramErr e = {0}, one;
            double fk = 0, fkq = 0, nk = 0, nkq = 0;
            for (size_t g = 0; g < G; g++) {
                calib_gram(st, CALIB_K, 2, (int)g, Sk);
                calib_gram(st, CALIB_Q, 2, (int)g, Sq);
                kq_gram_err(Sk, Sq, d, A + g * d * 3, B + g * d * 3, 3, &one);
                e.k += one.k; e.kq += one.kq;
                double S[64];
                for (size_t i = 0; i < d; i++)
                    for (size_t j = 0; j < d; j++) {
                        S[i * d + j] = 0;
                        for (int r = 0; r < 3; r++) S[i * d + j] += A[g * d * 3 + i * 3 + r] * B[g * d * 3 + j * 3 + r];
                    }
                for (size_t t = 0; t < R; t++) {
                    double ks[8];
                    for (size_t j = 0; j < d; j++) {
                        ks[j] = 0;
                        for (size_t i = 0; i < d; i++) ks[j] += (double)cap.k[t * G * d + g * d + i] * S[i * d + j];
                        double x = cap.k[t * G * d + g * d + j];
                        fk += (x - ks[j]) * (x - ks[j]);
                        nk += x * x;
                    }
                    for (size_t hh = 2 * g; hh < 2 * g + 2; hh++)
                        for (size_t u = 0; u < R; u++) {
                            double a = 0, b = 0;
                            for (size_t j = 0; j < d; j++) {
                                a += (double)cap.k[t * G * d + g * d + j] * cap.q[u * H * d + hh * d + j];
                                b += ks[j] * cap.q[u * H * d + hh * d + j];
                            }
                            fkq += (a - b) * (a - b);
                            nkq += a * a;
                        }
                }
            }
            CHECK(fabs(e.k - fk) <= 1e-9 * nk, "%s: Gram err_k %.12g, formed %.12g", kq_method_name(k), e.k, fk);
            CHECK(fabs(e.kq - fkq) <= 1e-9 * nkq, "%s: Gram err_kq %.12g, formed %.12g", kq_method_name(k), e.kq, fkq);
            CHECK(fabs(p[k]->cal_k[2].kq - e.kq) <= 1e-9 * nkq, "kq_learn's calibration error");
        }
        for (int l = 0; l < sh.n_layers; l++) {
            double kq = p[KQ_KQSVD]->cal_k[l].kq, slack = 1e-12 * p[KQ_KQSVD]->cal_k[l].nkq;
            CHECK(kq <= p[KQ_KSVD]->cal_k[l].kq + slack && kq <= p[KQ_EIGEN]->cal_k[l].kq + slack,
                  "layer %d: KQ-SVD %g, K-SVD %g, Eigen %g", l, kq, p[KQ_KSVD]->cal_k[l].kq, p[KQ_EIGEN]->cal_k[l].kq);
        }
    }
    /* Theorem 4 on the real caches. */
    const double betas[4] = {1, 10, 100, 1000};
    double ks[4] = {0}, kq[4] = {0}, eg[4] = {0};
    for (int i = 0; i < 4; i++) {
        KqSpec sb = {.rank = 3, .beta = betas[i]};
        KqProj *a = NULL, *b = NULL, *c = NULL;
        CHECK_OK(kq_learn(st, gw, KQ_KSVD, &sb, &a));
        CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &sb, &b));
        CHECK_OK(kq_learn(st, gw, KQ_EIGEN, &sb, &c));
        for (int l = 0; a && b && c && l < sh.n_layers; l++) {
            ks[i] += rel2(a->cal_k[l].kq, a->cal_k[l].nkq);
            kq[i] += rel2(b->cal_k[l].kq, b->cal_k[l].nkq);
            eg[i] += rel2(c->cal_k[l].kq, c->cal_k[l].nkq);
        }
        kq_proj_free(a); kq_proj_free(b); kq_proj_free(c);
    }
    for (int i = 1; i < 4; i++) {
        CHECK(fabs(ks[i] - ks[0]) < 1e-9 * ks[0] && fabs(kq[i] - kq[0]) < 1e-9 * kq[0], "flat in beta %g: %g %g / %g %g",
              betas[i], ks[i], ks[0], kq[i], kq[0]);
        CHECK(fabs(eg[i] - ks[i]) <= fabs(eg[i - 1] - ks[i - 1]) + 1e-12, "Eigen nearer K-SVD at beta %g", betas[i]);
    }
    CHECK(fabs(eg[3] - ks[3]) < 1e-3 * ks[3], "Eigen -> K-SVD at beta 1000: %g vs %g", eg[3], ks[3]);

    /* Evaluation through the forward pass: recomputed attention = the forward's own. */
    KqSpec fs = {.rank = 8, .beta = 1};
    KqProj *full = NULL;
    CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &fs, &full));
    const KqProj *sets[4] = {p[0], p[1], p[2], full};
    KqEval *ev = NULL;
    if (full && p[0] && p[1] && p[2]) CHECK_OK(kq_eval_new(&sh, sets, 4, &ev));
    if (ev) {
        CHECK_OK(kq_eval_run(ev, m, f, ids, 2, L));
        CHECK(kq_eval_ref_diff(ev) < 1e-5, "stories260K: recomputed attention vs forward %g", kq_eval_ref_diff(ev));
        for (int l = 0; l < sh.n_layers; l++) {
            KqErr e, e3;
            kq_eval_result(ev, 3, l, &e);
            kq_eval_result(ev, 2, l, &e3);
            CHECK(e.n_seq == 2, "2 sequences");
            /* relative Frobenius errors (unsquared): the bounds are on their squares */
            CHECK(e.k * e.k < 1e-10 && e.kq * e.kq < 1e-10 && e.v * e.v < 1e-10 && e.out * e.out < 1e-8,
                  "full rank layer %d: %g %g %g %g", l, e.k, e.kq, e.v, e.out);
            CHECK(e3.out * e3.out > 1e-4 && e3.out * e3.out < 2, "rank 3 layer %d output error %g", l, e3.out);
        }
        kq_eval_free(ev);
    }
    for (int k = 0; k < KQ_NMETHODS; k++) kq_proj_free(p[k]);
    kq_proj_free(full);
    free(gw);

    /* Ctrl-C within a layer's windows (layer-major). */
    calib_free(st);
    interrupt_layers(f, &sh, ids, NS, L);
    free(cap.q); free(cap.k); free(cap.v); free(cap.x);
    free(ids);
    tok_free(tok);
    fwd_free(f);
    model_free(m);
}

/* ---------------------------------------------------------------- Ctrl-C inside a sequence */

/* A hook that adds to the statistics as calib_run's does and plays Ctrl-C once layer 1 has seen the
 * second sequence's keys (the middle of that sequence). */
typedef struct { CalibStats *st; size_t seqlen; } MidCtx;
static int mid_hook(const FwdAct *a, void *ud) {
    MidCtx *c = ud;
    int rc = calib_add_act(c->st, a);
    if (a->kind == FWD_K_ROPE && a->pos0 + a->T == c->seqlen) {
        calib_seq_done(c->st, a->layer);
        if (a->layer == 1 && c->st->seqs[1] == 2) al_interrupt_flag = 1;
    }
    return rc;
}

static size_t units_run;
static int count_unit(size_t i, int worker, void *ud) {
    (void)i; (void)worker; (void)ud;
    __atomic_add_fetch(&units_run, 1, __ATOMIC_RELAXED);
    return AL_OK;
}

/* With FwdHooks.whole_seqs (what calib_run sets) an interrupt in the middle of a sequence stops
 * after it: every layer has seen the same sequences; without, the layers disagree. On path (an F32
 * model: BLAS; a BF16 one at seqlen L large enough that its projections run on the workers, which
 * poll the flag) with sequences of L tokens. Under al_interrupt_defer a sweep runs every unit. */
static void test_whole_seqs(const char *path, size_t L) {
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(path, &m));
    if (!m) return;
    CHECK_OK(fwd_new(m, NULL, &f));
    CalibShape sh;
    CHECK_OK(calib_shape_of(m, &sh));
    const size_t NS = 5;
    int *ids = malloc(L * NS * sizeof *ids);
    for (size_t i = 0; i < L * NS; i++) ids[i] = (int)(1 + (i * 37) % 250);
    for (int whole = 1; whole >= 0 && f; whole--) {
        CalibStats *st = NULL;
        CHECK_OK(calib_new(&sh, false, &st));
        MidCtx c = {.st = st, .seqlen = L};
        FwdHooks h = {.mask = calib_hook_mask(st), .fn = mid_hook, .ud = &c, .whole_seqs = whole};
        al_interrupt_flag = 0;
        int rc = fwd_run_hooked(f, &h, ids, NS, L);
        al_interrupt_flag = 0;
        int last = sh.n_layers - 1;
        CHECK(rc == AL_INTERRUPTED, "whole %d: rc %d", whole, rc);
        if (whole)
            CHECK(st->seqs[0] == 2 && st->seqs[last] == 2 && st->tokens[0] == 2 * L && st->tokens[last] == 2 * L,
                  "whole sequences: layer 0 %zu seqs %zu tokens, layer %d %zu seqs %zu tokens", st->seqs[0], st->tokens[0],
                  last, st->seqs[last], st->tokens[last]);
        else
            CHECK(st->seqs[0] == 2 && st->seqs[last] == 1, "without whole_seqs the layers differ: %zu vs %zu",
                  st->seqs[0], st->seqs[last]);
        calib_free(st);
    }
    al_interrupt_flag = 1;
    units_run = 0;
    al_interrupt_defer(true);
    CHECK(sweep_run(64, 4, count_unit, NULL) == AL_OK && units_run == 64, "a deferred sweep ran %zu of 64", units_run);
    al_interrupt_defer(false);
    CHECK(sweep_run(64, 4, count_unit, NULL) == AL_INTERRUPTED, "sweep_run stops on the flag");
    al_interrupt_flag = 0;
    free(ids);
    fwd_free(f);
    model_free(m);
}

/* ---------------------------------------------------------------- other layouts */

/* Calibrates m on random ids and checks the evaluator's exact attention against the forward's. */
static void eval_model(const char *path, const char *what) {
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(path, &m));
    if (!m) return;
    CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    size_t L = 20, NS = 3, V = fwd_vocab(f);
    int ids[60];
    uint64_t r = 99;
    for (size_t i = 0; i < L * NS; i++) { r = r * 6364136223846793005ull + 1; ids[i] = (int)((r >> 33) % V); }
    CalibShape sh;
    CalibStats *st = NULL;
    CHECK_OK(calib_shape_of(m, &sh));
    CHECK_OK(calib_new(&sh, false, &st));
    CHECK_OK(calib_run(st, f, ids, NS, L));
    double *gw = NULL;
    KqProj *p = NULL, *full = NULL;
    CHECK_OK(kq_wo_grams(m, &gw));
    CHECK_OK(kq_learn(st, gw, KQ_KQSVD, &(KqSpec){.rank = 2, .beta = 1}, &p));
    CHECK_OK(kq_learn(st, gw, KQ_KSVD, &(KqSpec){.rank = 4096, .beta = 1}, &full));
    KqEval *ev = NULL;
    const KqProj *sets[2] = {p, full};
    if (p && full) CHECK_OK(kq_eval_new(&sh, sets, 2, &ev));
    if (ev) {
        CHECK_OK(kq_eval_run(ev, m, f, ids, NS, L));
        CHECK(kq_eval_ref_diff(ev) < 1e-5, "%s: recomputed attention vs forward %g", what, kq_eval_ref_diff(ev));
        KqErr e;
        kq_eval_result(ev, 1, sh.n_layers - 1, &e);
        CHECK(e.n_seq == NS && e.out * e.out < 1e-8 && e.kq * e.kq < 1e-10, "%s full rank: out %g kq %g", what, e.out, e.kq);
        kq_eval_free(ev);
    }
    kq_proj_free(p);
    kq_proj_free(full);
    free(gw);
    calib_free(st);
    fwd_free(f);
    model_free(m);
}

int main(void) {
    const char *models = getenv("ATTNLAB_MODELS");
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/stories260K/stories260K.bin", models ? models : "");
    FILE *fp = models ? fopen(probe, "rb") : NULL;
    if (!fp) check_skip("$ATTNLAB_MODELS/stories260K is absent");
    fclose(fp);
    const char *tmp = test_tmpdir();
    test_stories(models);
    char *bin = al_asprintf("%s/stories260K/stories260K.bin", models), *bf = al_asprintf("%s/phi3-bf16", tmp);
    test_whole_seqs(bin, 16);
    CHECK_OK(synth_family_write("phi3", DT_BF16, 7, bf));
    test_whole_seqs(bf, 256);          /* BF16 projections of 256 x 128 x 256: on the workers */
    free(bin);
    free(bf);
    snprintf(probe, sizeof probe, "%s/stories260K-hf", models);
    eval_model(probe, "stories260K-hf");
    snprintf(probe, sizeof probe, "%s/gpt2-tiny-random", models);
    eval_model(probe, "gpt2-tiny-random");
    const synth_kind kinds[3] = {SYNTH_DEMO_R1, SYNTH_DEMO_LLAMA, SYNTH_DEMO_GPT2};
    for (int k = 0; k < 3; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", tmp, synth_kind_name(kinds[k]));
        SynthOptions o = {.kind = kinds[k], .dtype = DT_F32, .shards = 1, .seed = SYNTH_DEFAULT_SEED};
        CHECK_OK(synth_write(&o, dir));
        eval_model(dir, synth_kind_name(kinds[k]));
    }
    return check_done();
}
