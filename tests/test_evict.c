/* test_evict.c -- token eviction (core/methods/evict.h) and the forward pass's key mask (fwd_set_evict):
 * the kept sets of StreamingLLM, H2O and SnapKV on a hand-made attention matrix against sets computed by hand;
 * the capacity of a budget; every policy at a cache that holds every token equals no eviction (NLL to 1e-9);
 * StreamingLLM in the pass equals an independent softmax over its kept keys (sinks + window) of the layer's
 * own queries, keys and values, and equals the pass with every layer replaced by its attn_eval copy with that
 * sliding window (and those sink tokens: AttnLayer.sink_tokens); an evicting pass is not the plain one; a call
 * after position 0 (decoding) is refused. */
#include "tiny_model.h"
#include "evict.h"
#include "forward.h"

/* ================================================================ hand-made sets */

#define HT 6

/* Queries whose logits against the identity keys are log(a_k): key k draws a_k = 8, 1, 1, 4, 1, 1. */
static void hand_qk(float *q, float *K) {
    static const float a[HT] = {8, 1, 1, 4, 1, 1};
    for (int t = 0; t < HT; t++)
        for (int k = 0; k < HT; k++) {
            q[t * HT + k] = logf(a[k]);
            K[t * HT + k] = t == k ? 1.f : 0.f;
        }
}

/* The policy's mask of the hand-made layer (H = G = 1, d = HT) as sets: row t's kept keys as bits. */
static void hand_sets(const EvictPolicy *p, unsigned bits[HT]) {
    float q[HT * HT], K[HT * HT];
    unsigned char keep[HT * HT];
    hand_qk(q, K);
    memset(keep, 1, sizeof keep);
    FwdEvict e = {.layer = 0, .pos0 = 0, .T = HT, .nkeys = HT, .H = 1, .G = 1, .d = HT, .q = q, .ldq = HT, .K = K,
                  .ldk = HT, .scale = 1.0, .keep = keep};
    CHECK_OK(evict_mask(p, &e));
    for (int t = 0; t < HT; t++) {
        bits[t] = 0;
        for (int k = 0; k <= t; k++) bits[t] |= keep[t * HT + k] ? 1u << k : 0;
    }
}

static void check_sets(const char *what, const unsigned got[HT], const unsigned want[HT]) {
    for (int t = 0; t < HT; t++) CHECK(got[t] == want[t], "%s: row %d keeps 0x%x, want 0x%x", what, t, got[t], want[t]);
}

#define B(...) bits_of((int[]){__VA_ARGS__, -1})
static unsigned bits_of(const int *k) {
    unsigned b = 0;
    for (; *k >= 0; k++) b |= 1u << *k;
    return b;
}

static void test_hand_sets(void) {
    unsigned got[HT];
    /* StreamingLLM, C 3, 1 sink: rows t >= 3 keep key 0 and the last two. */
    EvictPolicy p = evict_policy(EVICT_STREAMING, 3);
    p.sinks = 1;
    hand_sets(&p, got);
    check_sets("streaming-llm", got, (unsigned[]){B(0), B(0, 1), B(0, 1, 2), B(0, 2, 3), B(0, 3, 4), B(0, 4, 5)});

    /* H2O, C 3, recent 1. Weights over the cache in view are a_k / sum: t0 {0}: acc0 1. t1 {0,1}: 8/9, 1/9. t2
     * {0,1,2}: acc 2.69, .21, .10; full: evict the lowest of keys <= 1 (outside the recent 1): key 1 -> {0,2}.
     * t3 {0,2,3}: 8/13, 1/13, 4/13: acc2 .177, acc3 .308; evict the lowest of keys <= 2: key 2 -> {0,3}. t4
     * {0,3,4}: acc3 .615 < acc0: key 3 goes -> {0,4}. t5 sees {0,4,5}. */
    p = evict_policy(EVICT_H2O, 3);
    p.recent = 1;
    hand_sets(&p, got);
    check_sets("h2o", got, (unsigned[]){B(0), B(0, 1), B(0, 1, 2), B(0, 2, 3), B(0, 3, 4), B(0, 4, 5)});

    /* SnapKV, C 4, window 1, no pooling: t4 votes 8, 1, 1, 4 for keys 0-3: keeps 0, 3 and 1 (tie with 2: the
     * earlier) beside its own 4; t5 votes 8, 1, 1, 4, 1 for keys 0-4: 0, 3, 1 and its own 5. */
    p = evict_policy(EVICT_SNAPKV, 4);
    p.obs_window = 1;
    p.kernel = 1;
    hand_sets(&p, got);
    check_sets("snapkv", got, (unsigned[]){B(0), B(0, 1), B(0, 1, 2), B(0, 1, 2, 3), B(0, 1, 3, 4), B(0, 1, 3, 5)});
    /* Pooling (kernel 3, zero padding): t4's votes 8, 1, 1, 4 pool to 9, 10, 6, 5: keys 1, 0, 2 (not 3, which
     * the unpooled votes keep). */
    p.kernel = 3;
    hand_sets(&p, got);
    CHECK(got[4] == B(0, 1, 2, 4), "snapkv kernel 3: row 4 keeps 0x%x", got[4]);
    /* Window 2 (C / 2): t4's window rows 3 and 4 vote for keys 0-2 with 8/14 + 8/15, 1/14 + 1/15 (twice):
     * keys 0 and 1 beside the window's 3 and 4. */
    p.kernel = 1;
    p.obs_window = 2;
    hand_sets(&p, got);
    CHECK(got[4] == B(0, 1, 3, 4), "snapkv window 2: row 4 keeps 0x%x", got[4]);
}

static void test_capacity(void) {
    /* T 4: full reads 1 + 2 + 3 + 4 = 10; C 2 reads 1 + 2 + 2 + 2 = 7; C 1 reads 4. */
    CHECK_NEAR(evict_read_frac(4, 2), 0.7, 1e-12);
    CHECK(evict_capacity(4, 0.7) == 2, "capacity at 0.7: %zu", evict_capacity(4, 0.7));
    CHECK(evict_capacity(4, 0.69) == 1, "capacity at 0.69: %zu", evict_capacity(4, 0.69));
    CHECK(evict_capacity(4, 1.0) == 4, "capacity at 1: %zu", evict_capacity(4, 1.0));
    /* Layers with windows 0 and 2 read at most 2 keys there: with every key 10 + 7 = 17; C 2: 7 + 7; C 3: 9 + 7. */
    const size_t w[2] = {0, 2};
    CHECK_NEAR(evict_reads(4, 4, 2), 7, 0);
    CHECK_NEAR(evict_read_frac_layers(4, 2, w, 2), 14.0 / 17.0, 1e-12);
    CHECK(evict_capacity_layers(4, 0.85, w, 2) == 2, "windowed capacity at 0.85: %zu", evict_capacity_layers(4, 0.85, w, 2));
    CHECK(evict_capacity_layers(4, 0.95, w, 2) == 3, "windowed capacity at 0.95: %zu", evict_capacity_layers(4, 0.95, w, 2));
    CHECK(evict_capacity_layers(4, 0.85, NULL, 1) == evict_capacity(4, 0.85), "no windows: evict_capacity");
    CHECK(evict_capacity(256, 0.5) < 256 && evict_read_frac(256, evict_capacity(256, 0.5)) <= 0.5 &&
          evict_read_frac(256, evict_capacity(256, 0.5) + 1) > 0.5, "capacity at 0.5 of 256");
}

/* ================================================================ in the forward pass */

#define NTOK 48
#define LAYER 1

/* Layer LAYER's queries / keys after RoPE, values and attention output (per head, before W_O). */
typedef struct {
    float *q, *k, *v, *o;     /* (NTOK, H d), (NTOK, G d), (NTOK, G dv), (NTOK, H dv) */
} Caught;

static int catch_hook(const FwdAct *a, void *ud) {
    Caught *c = ud;
    if (a->layer != LAYER) return AL_OK;
    float *dst = a->kind == FWD_Q_ROPE ? c->q : a->kind == FWD_K_ROPE ? c->k : a->kind == FWD_V ? c->v : c->o;
    size_t w = a->heads * a->head_dim;
    for (size_t t = 0; t < a->T; t++) memcpy(dst + (a->t0 + t) * w, fwd_act_row(a, t, 0), w * sizeof(float));
    return AL_OK;
}

/* The largest difference of the caught output from softmax(q k scale) v over the keys keep (G, NTOK, NTOK) keeps,
 * or (keep NULL) over keys k < s or k > t - (C - s). */
static double naive_masked(const Caught *c, size_t H, size_t G, size_t d, double scale, size_t C, size_t s,
                           const unsigned char *keep) {
    double worst = 0, w[NTOK];
    for (size_t h = 0; h < H; h++) {
        size_t g = h / (H / G);
        for (size_t t = 0; t < NTOK; t++) {
            double mx = -INFINITY, sum = 0;
            for (size_t k = 0; k <= t; k++) {
                bool kept = keep ? keep[(g * NTOK + t) * NTOK + k] : t + 1 <= C || k < s || k + (C - s) > t;
                double z = 0;
                for (size_t i = 0; i < d; i++) z += (double)c->q[t * H * d + h * d + i] * c->k[k * G * d + g * d + i];
                w[k] = kept ? z * scale : -INFINITY;
                mx = fmax(mx, w[k]);
            }
            for (size_t k = 0; k <= t; k++) sum += (w[k] = exp(w[k] - mx));
            for (size_t i = 0; i < d; i++) {
                double o = 0;
                for (size_t k = 0; k <= t; k++) o += w[k] / sum * c->v[k * G * d + g * d + i];
                worst = fmax(worst, fabs(o - c->o[t * H * d + h * d + i]));
            }
        }
    }
    return worst;
}

static double nll_with(Forward *f, const int *ids, const EvictPolicy *p) {
    double s = NAN;
    size_t n;
    fwd_set_evict(f, p ? evict_fwd : NULL, (void *)p);
    CHECK_OK(fwd_nll(f, ids, NTOK, &s, &n));
    fwd_set_evict(f, NULL, NULL);
    return s;
}

/* Every layer replaced by its attn_eval copy with window w and s sink tokens: the pass's NLL. */
static double nll_windowed(Model *m, Forward *f, const int *ids, size_t w, size_t s) {
    AttnLayer *L[2] = {NULL, NULL};
    for (int l = 0; l < 2; l++) {
        CHECK_OK(attn_layer_load(m, l, &L[l]));
        if (!L[l]) return NAN;
        L[l]->window = w;
        L[l]->sink_tokens = s;
        CHECK_OK(fwd_set_attn(f, l, L[l]));
    }
    double nll = NAN;
    size_t n;
    CHECK_OK(fwd_nll(f, ids, NTOK, &nll, &n));
    fwd_clear_attn(f);
    for (int l = 0; l < 2; l++) attn_layer_free(L[l]);
    return nll;
}

static void test_forward(const char *tmp) {
    Forward *f;
    Model *m = tu_open_tiny(tmp, "qwen2", tu_tiny("qwen2", 2, 2), &f);
    if (!f) { model_free(m); return; }
    int ids[NTOK];
    for (int i = 0; i < NTOK; i++) ids[i] = (i * 37 + 11) % 64;
    double nll0 = nll_with(f, ids, NULL);

    /* A cache of every token: no eviction, for each policy. */
    for (int k = 0; k < EVICT_NKINDS; k++) {
        EvictPolicy p = evict_policy((evict_kind)k, NTOK);
        CHECK_NEAR(nll_with(f, ids, &p), nll0, 1e-9);
    }
    /* At a third of the tokens each policy changes the NLL. */
    for (int k = 0; k < EVICT_NKINDS; k++) {
        EvictPolicy p = evict_policy((evict_kind)k, NTOK / 3);
        double n1 = nll_with(f, ids, &p);
        CHECK(isfinite(n1) && fabs(n1 - nll0) > 1e-6, "%s at C %d: NLL %.9g, plain %.9g", evict_name(p.kind), NTOK / 3,
              n1, nll0);
    }

    /* StreamingLLM: the pass's layer output against an independent softmax over its kept keys. */
    size_t H = 4, G = 2, d = 8, C = 12, s = 3;
    Caught c = {calloc(NTOK * H * d, 4), calloc(NTOK * G * d, 4), calloc(NTOK * G * d, 4), calloc(NTOK * H * d, 4)};
    FwdHooks hk = {.mask = FWD_Q_ROPE | FWD_K_ROPE | FWD_V | FWD_ATTN_OUT, .fn = catch_hook, .ud = &c};
    EvictPolicy p = evict_policy(EVICT_STREAMING, C);
    p.sinks = s;
    fwd_set_hooks(f, &hk);
    double ns = nll_with(f, ids, &p);
    fwd_set_hooks(f, NULL);
    double worst = naive_masked(&c, H, G, d, fwd_attn_scale(f, LAYER), C, s, NULL);
    CHECK(worst < 1e-5, "streaming-llm C %zu sinks %zu: layer %d output off by %.3g from the independent softmax", C, s,
          LAYER, worst);
    /* ... and equals every layer with sliding window C - s plus s sink tokens in the evaluator. */
    CHECK_NEAR(ns, nll_windowed(m, f, ids, C - s, s), 1e-4);
    /* No sinks: the model with a sliding window of C. */
    p.sinks = 0;
    CHECK_NEAR(nll_with(f, ids, &p), nll_windowed(m, f, ids, C, 0), 1e-4);

    /* H2O in the pass: its kept sets recomputed from the layer's caught queries and keys, and the layer's output
     * equal to a softmax over them (the pass hands the policy its queries, keys and scale, per KV head). */
    p = evict_policy(EVICT_H2O, 10);
    fwd_set_hooks(f, &hk);
    nll_with(f, ids, &p);
    fwd_set_hooks(f, NULL);
    unsigned char *keep = malloc(G * NTOK * NTOK);
    memset(keep, 1, G * NTOK * NTOK);
    FwdEvict e = {.layer = LAYER, .T = NTOK, .nkeys = NTOK, .H = H, .G = G, .d = d, .q = c.q, .ldq = H * d, .K = c.k,
                  .ldk = G * d, .scale = fwd_attn_scale(f, LAYER), .keep = keep};
    CHECK_OK(evict_mask(&p, &e));
    size_t kept = 0;
    for (size_t i = 0; i < NTOK; i++) kept += keep[(G * NTOK - 1) * NTOK + i];    /* the last row of the last group */
    CHECK(kept == 10, "h2o C 10: the last row keeps %zu keys", kept);
    worst = naive_masked(&c, H, G, d, fwd_attn_scale(f, LAYER), 0, 0, keep);
    CHECK(worst < 1e-5, "h2o C 10: layer %d output off by %.3g from a softmax over the recomputed kept sets", LAYER, worst);
    free(keep);
    free(c.q); free(c.k); free(c.v); free(c.o);

    /* Decoding token by token after a prefill is refused, naming why (H2O's state spans the sequence). */
    p = evict_policy(EVICT_H2O, 8);
    fwd_set_evict(f, evict_fwd, &p);
    CHECK_OK(fwd_run(f, ids, 10, FWD_LOGITS_NONE, NULL));
    CHECK_ERR(fwd_run(f, ids + 10, 1, FWD_LOGITS_NONE, NULL), "whole sequences from position 0");
    fwd_set_evict(f, NULL, NULL);
    /* Only one layer evicts: the other layer's inputs are the plain pass's. */
    p = evict_policy(EVICT_H2O, 8);
    p.layer = 0;
    double n0 = nll_with(f, ids, &p);
    CHECK(fabs(n0 - nll0) > 1e-6, "h2o on layer 0 alone changes the NLL");
    fwd_free(f);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_hand_sets();
    test_capacity();
    test_forward(tmp);
    return check_done();
}
