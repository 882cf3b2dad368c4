/* test_forward_override.c -- attention overrides of the forward pass (fwd_set_attn) on small
 * checkpoints written here (Qwen2 with q/k/v biases, GQA): every layer swapped for its own
 * attn_eval copy gives the plain pass's logits (prefill) and NLL; token-by-token decoding with
 * overrides equals their prefill (the inputs are cached and re-evaluated), also when the override
 * is set after the cache exists, while the cache grows, and when it goes and comes back; an
 * overridden layer hands only its input and output to hooks, and the output equals the plain
 * pass's; errors name the layer and the width. Also fwd_ppl's windows (sum of fwd_nll per window)
 * and the per-layer softmax scale and sliding window the pass reports. SmolLM3's layer without RoPE
 * through the evaluator too. fwd_ppl_pair (before and after in one pass) gives fwd_ppl's numbers without
 * and with the overrides, bit for bit: in groups of windows, one window a group, with a shorter last
 * window, with another norm eps after, and on the window-major fallback (a residual hook). */
#include "tiny_model.h"
#include "forward.h"
#include "synth.h"

#define NTOK 40

/* Logits (NTOK, V) of ids[0..T) as one prefill of a fresh sequence. */
static float *prefill(Forward *f, const int *ids) {
    float *z = malloc(NTOK * fwd_vocab(f) * sizeof *z);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, NTOK, FWD_LOGITS_ALL, z));
    return z;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Records which kinds an overridden layer hands to hooks, and a copy of its attention output. */
typedef struct {
    int layer;
    unsigned kinds;
    float *proj;              /* (NTOK, hidden) */
} Seen;

static int seen_hook(const FwdAct *a, void *ud) {
    Seen *s = ud;
    if (a->layer != s->layer) return AL_OK;
    s->kinds |= a->kind;
    if (a->kind == FWD_ATTN_PROJ)
        for (size_t t = 0; t < a->T; t++) memcpy(s->proj + (a->t0 + t) * a->head_dim, fwd_act_row(a, t, 0),
                                                 a->head_dim * sizeof(float));
    return AL_OK;
}

static void test_override(const char *tmp) {
    Forward *f;
    Model *m = tu_open_tiny(tmp, "qwen2", tu_tiny("qwen2", 2, 2), &f);
    if (!f) { model_free(m); return; }
    CHECK(fwd_model(f) == m, "fwd_model");
    int ids[NTOK];
    for (int i = 0; i < NTOK; i++) ids[i] = (i * 37 + 11) % 64;
    size_t V = fwd_vocab(f);
    double nll0, nll1;
    size_t c0, c1;
    CHECK_OK(fwd_nll(f, ids, NTOK, &nll0, &c0));
    /* The cache exists now: an override set after it must make its own input cache. */
    float *plain = prefill(f, ids);
    Seen seen0 = {.layer = 1, .proj = calloc(NTOK * 32, sizeof(float))};
    FwdHooks h = {.mask = FWD_ACT_ALL, .fn = seen_hook, .ud = &seen0};
    fwd_set_hooks(f, &h);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, NTOK, FWD_LOGITS_NONE, NULL));
    AttnLayer *own[2] = {NULL, NULL};
    for (int l = 0; l < 2; l++) {
        CHECK_OK(attn_layer_load(m, l, &own[l]));
        CHECK(own[l] && own[l]->b_Q && own[l]->b_K && own[l]->b_V, "layer %d: Qwen2 biases", l);
        CHECK_OK(fwd_set_attn(f, l, own[l]));
    }
    Seen seen = {.layer = 1, .proj = calloc(NTOK * 32, sizeof(float))};
    h.ud = &seen;
    fwd_set_hooks(f, &h);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, NTOK, FWD_LOGITS_NONE, NULL));
    CHECK(seen.kinds == (FWD_ATTN_IN | FWD_ATTN_PROJ), "an overridden layer hands kinds %#x to hooks", seen.kinds);
    CHECK(max_diff(seen.proj, seen0.proj, NTOK * 32) < 1e-4, "overridden layer's output differs from the model's by %g",
          max_diff(seen.proj, seen0.proj, NTOK * 32));
    fwd_set_hooks(f, NULL);
    float *over = prefill(f, ids);
    CHECK(max_diff(plain, over, NTOK * V) < 1e-4, "own layers swapped in: logits differ by %g",
          max_diff(plain, over, NTOK * V));
    CHECK_OK(fwd_nll(f, ids, NTOK, &nll1, &c1));
    CHECK(c1 == c0 && fabs(nll1 - nll0) <= 1e-5 * nll0, "own layers swapped in: nll %.9g vs %.9g", nll1, nll0);
    /* Decoding token by token (cached inputs re-evaluated) equals the prefill, and a split prefill. */
    float *one = malloc(V * sizeof *one);
    double dd = 0;
    fwd_reset(f);
    for (int t = 0; t < NTOK; t++) {
        CHECK_OK(fwd_run(f, ids + t, 1, FWD_LOGITS_LAST, one));
        dd = fmax(dd, max_diff(one, over + (size_t)t * V, V));
    }
    CHECK(dd < 1e-4, "overridden decode vs prefill: %g", dd);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, 17, FWD_LOGITS_NONE, NULL));
    CHECK_OK(fwd_run(f, ids + 17, NTOK - 17, FWD_LOGITS_LAST, one));
    CHECK(max_diff(one, over + (size_t)(NTOK - 1) * V, V) < 1e-4, "overridden split prefill");
    /* Setting an override resets the sequence; clearing restores the model's attention. */
    CHECK(fwd_pos(f) == NTOK, "pos %zu", fwd_pos(f));
    CHECK_OK(fwd_set_attn(f, 0, NULL));
    CHECK(fwd_pos(f) == 0, "fwd_set_attn resets the sequence");
    fwd_clear_attn(f);
    float *back = prefill(f, ids);
    CHECK(max_diff(plain, back, NTOK * V) == 0, "cleared overrides: logits differ by %g", max_diff(plain, back, NTOK * V));
    /* Errors */
    CHECK_ERR(fwd_set_attn(f, 2, own[0]), "layer 2 is out of range 0-1");
    own[1]->hidden = 16;
    CHECK_ERR(fwd_set_attn(f, 1, own[1]), "hidden size is 32");
    own[1]->hidden = 32;
    free(plain); free(over); free(back); free(one); free(seen.proj); free(seen0.proj);
    attn_layer_free(own[0]);
    attn_layer_free(own[1]);
    fwd_free(f);
    model_free(m);
}

/* The input cache of an overridden layer follows the KV cache as it grows (256 -> 512 rows), also
 * when the override comes, goes and comes back. */
static void test_growth(const char *tmp) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/qwen2", tmp);                 /* written by test_override */
    Model *m = NULL;
    Forward *f = NULL, *g = NULL, *h = NULL;
    FwdOptions fo = {.max_ctx = 600};
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, &fo, &f));
    if (m) CHECK_OK(fwd_new(m, &fo, &g));
    if (m) CHECK_OK(fwd_new(m, &fo, &h));
    AttnLayer *own = NULL;
    if (m) CHECK_OK(attn_layer_load(m, 0, &own));
    if (!f || !g || !h || !own) goto done;
    enum { N = 300 };
    int ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 29 + 3) % 64;
    double ref, a, b;
    size_t c;
    CHECK_OK(fwd_nll(f, ids, N, &ref, &c));                  /* f: plain, grows to 512 */
    CHECK_OK(fwd_set_attn(g, 0, own));                        /* g: overridden while the cache grows */
    CHECK_OK(fwd_nll(g, ids, 20, &a, &c));
    CHECK_OK(fwd_nll(g, ids, N, &a, &c));
    CHECK(fabs(a - ref) <= 1e-5 * ref, "override through cache growth: %.9g vs %.9g", a, ref);
    CHECK_OK(fwd_set_attn(f, 0, own));                        /* f: set after the growth */
    CHECK_OK(fwd_set_attn(h, 0, own));                        /* h: on (256 rows), off while it grows, on */
    CHECK_OK(fwd_nll(h, ids, 20, &b, &c));
    fwd_clear_attn(h);
    CHECK_OK(fwd_nll(h, ids, N, &b, &c));
    CHECK_OK(fwd_set_attn(h, 0, own));
    CHECK_OK(fwd_nll(h, ids, N, &b, &c));
    CHECK(fabs(b - ref) <= 1e-5 * ref, "override off and on again: %.9g vs %.9g", b, ref);
    CHECK_OK(fwd_nll(f, ids, N, &b, &c));
    CHECK(fabs(b - ref) <= 1e-5 * ref, "override set after the growth: %.9g vs %.9g", b, ref);
done:
    attn_layer_free(own);
    fwd_free(f);
    fwd_free(g);
    fwd_free(h);
    model_free(m);
}

/* fwd_ppl: windows of seqlen, the last shorter, each a fresh fwd_nll. */
static void test_ppl(const char *tmp) {
    char dir[4200];
    TuModel tm = tu_tiny("llama", 1, 2);
    Forward *f;
    Model *m = tu_open_tiny(tmp, "llama", tm, &f);
    if (!f) { model_free(m); return; }
    int ids[51];
    for (int i = 0; i < 51; i++) ids[i] = (i * 13 + 5) % 64;
    FwdPpl p;
    CHECK_OK(fwd_ppl(f, ids, 51, 25, &p));     /* windows 25, 25 and a lone token (dropped) */
    double s = 0, x;
    size_t c;
    CHECK_OK(fwd_nll(f, ids, 25, &x, &c)); s += x;
    CHECK_OK(fwd_nll(f, ids + 25, 25, &x, &c)); s += x;
    CHECK(p.windows == 2 && p.tokens == 48, "windows %zu tokens %zu", p.windows, p.tokens);
    CHECK_NEAR(p.nll, s / 48, 1e-12 * s);
    CHECK_ERR(fwd_ppl(f, ids, 51, 1, &p), "at least 2 tokens");
    CHECK_ERR(fwd_ppl(f, ids, 51, 1000, &p), "longer than the model's context 256");
    CHECK_ERR(fwd_ppl(f, ids, 1, 25, &p), "the text has 1");
    CHECK(fwd_attn_scale(f, 0) == 1 / sqrt(8.0) && fwd_attn_window(f, 0) == 0, "scale %g window %zu",
          fwd_attn_scale(f, 0), fwd_attn_window(f, 0));
    fwd_free(f);
    model_free(m);
    /* Qwen2 sliding window from max_window_layers on; Mistral's on every layer. */
    const char *cfg[2] = {"\"use_sliding_window\": true, \"sliding_window\": 16, \"max_window_layers\": 1",
                          "\"sliding_window\": 16"};
    const char *type[2] = {"qwen2", "mistral"};
    for (int k = 0; k < 2; k++) {
        snprintf(dir, sizeof dir, "%s/window%d", tmp, k);
        TuModel w = tm;
        w.model_type = type[k];
        w.layers = 2;
        w.extra_config = cfg[k];
        CHECK_OK(tu_write_model(dir, &w));
        m = NULL;
        f = NULL;
        CHECK_OK(model_open(dir, &m));
        if (m) CHECK_OK(fwd_new(m, NULL, &f));
        if (f) CHECK(fwd_attn_window(f, 0) == (k ? 16u : 0u) && fwd_attn_window(f, 1) == 16, "%s windows %zu %zu",
                     type[k], fwd_attn_window(f, 0), fwd_attn_window(f, 1));
        fwd_free(f);
        model_free(m);
    }
}

/* SmolLM3's layer without RoPE (synth family smollm3: layer 3 of 4) as the evaluator loads it
 * (attn_eval): every layer swapped for its own copy gives the plain pass's logits, and layer 3's
 * copy has no RoPE dims (with them its keys would turn with the position: logits apart). */
static void test_nope_override(const char *tmp) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/smollm3", tmp);
    CHECK_OK(synth_family_write("smollm3", DT_F32, SYNTH_DEFAULT_SEED, dir));
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    int ids[NTOK];
    for (int i = 0; i < NTOK; i++) ids[i] = (i * 37 + 11) % 256;
    size_t V = fwd_vocab(f);
    float *plain = prefill(f, ids);
    AttnLayer *own[4] = {NULL};
    for (int l = 0; l < 4; l++) {
        CHECK_OK(attn_layer_load(m, l, &own[l]));
        if (own[l]) CHECK_OK(fwd_set_attn(f, l, own[l]));
    }
    CHECK(own[2] && own[2]->rope_dim == 32 && own[3] && own[3]->rope_dim == 0, "layer 3 has no RoPE dims");
    float *over = prefill(f, ids);
    CHECK(max_diff(plain, over, NTOK * V) < 1e-4, "smollm3 layers swapped in: logits differ by %g",
          max_diff(plain, over, NTOK * V));
    free(plain);
    free(over);
    fwd_free(f);
    for (int l = 0; l < 4; l++) attn_layer_free(own[l]);
    model_free(m);
}

static int resid_noop(int layer, float *x, size_t T, void *ud) {
    (void)layer; (void)x; (void)T; (void)ud;
    return AL_OK;
}

/* fwd_ppl without overrides, then with ov and norm eps eps (0: the model's), the overrides cleared after. */
static void ppl_two_passes(Forward *f, AttnLayer **ov, int NL, double eps, const int *ids, size_t n, size_t sl,
                           FwdPpl *b, FwdPpl *a) {
    CHECK_OK(fwd_ppl(f, ids, n, sl, b));
    for (int l = 0; l < NL; l++)
        if (ov[l]) CHECK_OK(fwd_set_attn(f, l, ov[l]));
    fwd_set_norm_eps(f, eps);
    CHECK_OK(fwd_ppl(f, ids, n, sl, a));
    fwd_set_norm_eps(f, 0);
    fwd_clear_attn(f);
}

static void check_pair(Forward *f, AttnLayer **ov, int NL, double eps, const int *ids, size_t n, size_t sl,
                       const char *what) {
    FwdPpl b0, a0, b1, a1, again;                     /* the pair first: on a fresh pass, no caches yet */
    CHECK_OK(fwd_ppl_pair(f, (const AttnLayer *const *)ov, eps, ids, n, sl, &b1, &a1));
    ppl_two_passes(f, ov, NL, eps, ids, n, sl, &b0, &a0);
    CHECK(a0.nll != b0.nll, "%s: the override changes nothing (%.17g)", what, a0.nll);
    CHECK(b1.nll == b0.nll && a1.nll == a0.nll, "%s: before %.17g / %.17g, after %.17g / %.17g", what, b1.nll, b0.nll,
          a1.nll, a0.nll);
    CHECK(b1.tokens == b0.tokens && a1.tokens == a0.tokens && b1.windows == b0.windows && a1.windows == a0.windows,
          "%s: tokens %zu / %zu, windows %zu / %zu", what, b1.tokens, b0.tokens, b1.windows, b0.windows);
    CHECK_OK(fwd_ppl(f, ids, n, sl, &again));          /* no override, the model's eps left behind */
    CHECK(again.nll == b0.nll, "%s: after the pair %.17g, before it %.17g", what, again.nll, b0.nll);
}

static void test_ppl_pair(const char *tmp) {
    Forward *f;
    Model *m = tu_open_tiny(tmp, "qwen2", tu_tiny("qwen2", 2, 2), &f);
    if (!f) { model_free(m); return; }
    int ids[120];
    for (int i = 0; i < 120; i++) ids[i] = (i * 29 + 3) % 64;
    AttnLayer *ov[2] = {NULL, NULL};
    CHECK_OK(attn_layer_load(m, 1, &ov[1]));
    if (!ov[1]) { fwd_free(f); model_free(m); return; }
    ov[1]->scale *= 1.5;                                 /* layer 1's attention another one */
    check_pair(f, ov, 2, 0, ids, 100, 25, "4 windows in one group");
    check_pair(f, ov, 2, 0, ids, 111, 25, "4 windows and a shorter one");
    check_pair(f, ov, 2, 0, ids, 101, 25, "4 windows and a lone token (dropped)");
    check_pair(f, ov, 2, 1e-2, ids, 111, 25, "norm eps 1e-2 after");
    fwd_set_group_tokens(f, 25);                         /* one window a group */
    check_pair(f, ov, 2, 1e-2, ids, 111, 25, "one window a group");
    fwd_set_group_tokens(f, 0);
    fwd_set_resid(f, 0, resid_noop, NULL);               /* window-major: two passes */
    CHECK(fwd_layer_major_refusal(f) != NULL, "a residual hook refuses layer-major");
    check_pair(f, ov, 2, 1e-2, ids, 111, 25, "window-major fallback");
    fwd_set_resid(f, 0, NULL, NULL);
    Forward *g = NULL;                                   /* the fallback on a fresh pass: no input caches yet */
    CHECK_OK(fwd_new(m, NULL, &g));
    if (g) {
        fwd_set_resid(g, 0, resid_noop, NULL);
        check_pair(g, ov, 2, 1e-2, ids, 111, 25, "window-major fallback, fresh pass");
        fwd_free(g);
    }
    FwdPpl b, a;
    CHECK_ERR(fwd_ppl_pair(f, (const AttnLayer *const *)ov, 0, ids, 111, 1, &b, &a), "at least 2 tokens");
    CHECK(isnan(b.nll) && isnan(a.nll), "an error leaves NaN");
    ov[1]->hidden += 1;                                  /* a layer of another width: fwd_set_attn's error */
    CHECK_ERR(fwd_ppl_pair(f, (const AttnLayer *const *)ov, 0, ids, 111, 25, &b, &a), "attention override of layer 1");
    ov[1]->hidden -= 1;
    attn_layer_free(ov[1]);
    fwd_free(f);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_override(tmp);
    test_nope_override(tmp);
    test_growth(tmp);
    test_ppl(tmp);
    test_ppl_pair(tmp);
    return check_done();
}
