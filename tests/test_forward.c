/* test_forward.c -- the forward pass on real checkpoints ($ATTNLAB_MODELS; skipped when absent):
 * stories260K (.bin) decodes greedily from BOS to the text its README quotes, stories260K-hf gives
 * the same tokens, prefill and token-by-token decoding agree, the hooks agree with the per-head
 * views of model.h and with a dense double-precision attention recomputed from them, and the
 * GPT-2 path runs with finite logits and a consistent NLL. */
#define _GNU_SOURCE
#include "check.h"
#include "forward.h"
#include "tokenizer.h"

#include <stdio.h>
#include <string.h>

#define NGEN 60

/* Greedy argmax. */
static int argmax(const float *z, size_t n) {
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (z[i] > z[b]) b = i;
    return (int)b;
}

/* Greedy decoding from BOS (id 1) for n tokens: prefill BOS, then one token per call. */
static int greedy(Forward *f, int *out, size_t n) {
    float *z = malloc(fwd_vocab(f) * sizeof *z);
    int tok = 1;
    fwd_reset(f);
    out[0] = 1;
    for (size_t i = 1; i < n; i++) {
        if (fwd_run(f, &tok, 1, FWD_LOGITS_LAST, z) != AL_OK) { free(z); return AL_ERR; }
        tok = argmax(z, fwd_vocab(f));
        out[i] = tok;
    }
    free(z);
    return AL_OK;
}

static void test_stories(const char *models) {
    char *bin = al_asprintf("%s/stories260K/stories260K.bin", models);
    char *hf = al_asprintf("%s/stories260K-hf", models);
    char *tokp = al_asprintf("%s/stories260K/tok512.bin", models);
    Model *m = NULL, *mh = NULL;
    Forward *f = NULL, *fh = NULL;
    Tokenizer *tok = NULL;
    CHECK_OK(model_open(bin, &m));
    CHECK_OK(model_open(hf, &mh));
    CHECK_OK(tok_open(tokp, &tok));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (mh) CHECK_OK(fwd_new(mh, NULL, &fh));
    if (!f || !fh || !tok) goto done;
    CHECK(!fwd_streaming(f), "260K weights stream?");
    int ids[NGEN], idh[NGEN];
    CHECK_OK(greedy(f, ids, NGEN));
    CHECK_OK(greedy(fh, idh, NGEN));
    CHECK(memcmp(ids, idh, sizeof ids) == 0, ".bin and -hf greedy tokens differ");
    char *text = NULL;
    CHECK_OK(tok_decode(tok, ids, NGEN, true, &text));
    const char *want = "Once upon a time, there was a little girl named Lily.";
    CHECK(text && strncmp(text, want, strlen(want)) == 0, "greedy text: '%s'", text ? text : "");
    printf("stories260K greedy: %s\n", text ? text : "");
    free(text);

    /* Prefill of the whole sequence gives the logits of token-by-token decoding (KV cache). */
    size_t V = fwd_vocab(f), T = 40;
    float *all = malloc(T * V * sizeof *all), *one = malloc(V * sizeof *one);
    fwd_reset(fh);
    CHECK_OK(fwd_run(fh, ids, T, FWD_LOGITS_ALL, all));
    CHECK(fwd_pos(fh) == T, "pos %zu", fwd_pos(fh));
    double maxd = 0;
    fwd_reset(fh);
    for (size_t t = 0; t < T; t++) {
        CHECK_OK(fwd_run(fh, ids + t, 1, FWD_LOGITS_LAST, one));
        for (size_t j = 0; j < V; j++) maxd = fmax(maxd, fabs(one[j] - all[t * V + j]));
    }
    CHECK(maxd < 1e-3, "prefill vs decode logits differ by %g", maxd);
    /* Split prefill (two calls) equals one call. */
    fwd_reset(fh);
    CHECK_OK(fwd_run(fh, ids, 17, FWD_LOGITS_NONE, NULL));
    CHECK_OK(fwd_run(fh, ids + 17, T - 17, FWD_LOGITS_LAST, one));
    maxd = 0;
    for (size_t j = 0; j < V; j++) maxd = fmax(maxd, fabs(one[j] - all[(T - 1) * V + j]));
    CHECK(maxd < 1e-3, "split prefill differs by %g", maxd);
    /* NLL from fwd_nll equals the log-softmax of the ALL logits. */
    double nll = 0, ref = 0;
    size_t cnt = 0;
    CHECK_OK(fwd_nll(fh, ids, T, &nll, &cnt));
    for (size_t t = 0; t + 1 < T; t++) {
        const float *z = all + t * V;
        double mx = z[argmax(z, V)], s = 0;
        for (size_t j = 0; j < V; j++) s += exp(z[j] - mx);
        ref += log(s) + mx - z[ids[t + 1]];
    }
    CHECK(cnt == T - 1, "count %zu", cnt);
    CHECK_NEAR(nll, ref, 1e-3 * fabs(ref));
    CHECK(nll / (double)cnt < 2.5, "greedy text should be likely: mean nll %g", nll / (double)cnt);
    /* Bad ids and a full context are errors naming them. */
    int bad = 512;
    CHECK_ERR(fwd_run(fh, &bad, 1, FWD_LOGITS_NONE, NULL), "token id 512");
    free(all);
    free(one);
done:
    fwd_free(f);
    fwd_free(fh);
    model_free(m);
    model_free(mh);
    tok_free(tok);
    free(bin);
    free(hf);
    free(tokp);
}

/* ---------------------------------------------------------------- hooks vs head views */

typedef struct {
    int layer;
    size_t T, H, G, d, dv, D;
    double *in, *q, *k, *v, *qr, *kr, *out;     /* copies of one layer's activations */
    size_t calls;
    bool bad_shape;
} grab;

static void grab_copy(double **dst, const FwdAct *a, size_t T) {
    size_t w = a->heads * a->head_dim;
    if (!*dst) *dst = calloc(T * w, sizeof **dst);
    for (size_t t = 0; t < a->T; t++)
        for (size_t j = 0; j < w; j++) (*dst)[(a->t0 + t) * w + j] = a->x[t * a->ld + j];
}

static int grab_fn(const FwdAct *a, void *ud) {
    grab *g = ud;
    g->calls++;
    if (a->layer != g->layer) return AL_OK;
    switch (a->kind) {
    case FWD_ATTN_IN: g->bad_shape |= a->heads != 1 || a->head_dim != g->D; grab_copy(&g->in, a, g->T); break;
    case FWD_Q: g->bad_shape |= a->heads != g->H || a->head_dim != g->d; grab_copy(&g->q, a, g->T); break;
    case FWD_K: g->bad_shape |= a->heads != g->G; grab_copy(&g->k, a, g->T); break;
    case FWD_V: grab_copy(&g->v, a, g->T); break;
    case FWD_Q_ROPE: grab_copy(&g->qr, a, g->T); break;
    case FWD_K_ROPE: grab_copy(&g->kr, a, g->T); break;
    case FWD_ATTN_OUT: grab_copy(&g->out, a, g->T); break;
    default: break;
    }
    return AL_OK;
}

static int stop_fn(const FwdAct *a, void *ud) {
    (void)ud;
    return a->layer == 2 ? al_err("stop here") : AL_OK;
}

static void test_hooks(const char *models) {
    char *hf = al_asprintf("%s/stories260K-hf", models);
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(hf, &m));
    free(hf);
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    int ids[24] = {1, 403, 407, 261, 378, 11, 347, 287, 261, 411, 425, 13, 420, 350, 305, 261, 281, 15, 260, 350, 298, 300, 301, 302};
    const ModelConfig *c = &m->cfg;
    size_t T = 24;
    grab g = {.layer = 3, .T = T, .H = (size_t)c->n_heads, .G = (size_t)c->n_kv_heads, .d = (size_t)cfg_d_qk(c),
              .dv = (size_t)c->v_dim, .D = (size_t)c->hidden};
    FwdHooks hk = {.mask = FWD_ACT_ALL, .fn = grab_fn, .ud = &g, .chunk = 7};
    fwd_set_hooks(f, &hk);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_NONE, NULL));
    /* 5 layers x 8 kinds (no latents for Llama) x ceil(24 / 7) = 4 chunks */
    CHECK(g.calls == 5 * 8 * 4, "hook calls %zu", g.calls);
    CHECK(!g.bad_shape, "hook head shapes");
    if (!g.in || !g.q || !g.k || !g.v || !g.qr || !g.kr || !g.out) goto done;
    /* Q of head h = attn_in @ W_Q[h] (model_head), K / V of KV head g likewise. */
    double maxq = 0, maxk = 0, maxv = 0, scale = 0;
    for (int kind = 0; kind < 3; kind++) {
        size_t nh = kind == 0 ? g.H : g.G, w = kind == 2 ? g.dv : g.d;
        for (size_t h = 0; h < nh; h++) {
            Mat *W = NULL;
            CHECK_OK(model_head(m, kind == 0 ? HK_Q : kind == 1 ? HK_K : HK_V, g.layer, (int)h, PART_ALL, &W));
            if (!W) continue;
            const double *act = kind == 0 ? g.q : kind == 1 ? g.k : g.v;
            for (size_t t = 0; t < T; t++)
                for (size_t j = 0; j < w; j++) {
                    double s = 0;
                    for (size_t i = 0; i < g.D; i++) s += g.in[t * g.D + i] * *mat_at(W, i, j);
                    double d = fabs(s - act[t * nh * w + h * w + j]);
                    double *mx = kind == 0 ? &maxq : kind == 1 ? &maxk : &maxv;
                    *mx = fmax(*mx, d);
                    scale = fmax(scale, fabs(s));
                }
            mat_free(W);
        }
    }
    CHECK(maxq < 1e-4 * scale && maxk < 1e-4 * scale && maxv < 1e-4 * scale, "hooks vs head views: %g %g %g (scale %g)",
          maxq, maxk, maxv, scale);
    /* RoPE keeps norms per head and position; position 0 is not rotated. */
    double maxn = 0, max0 = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < g.H; h++) {
            double a = 0, b = 0;
            for (size_t j = 0; j < g.d; j++) {
                a += g.q[t * g.H * g.d + h * g.d + j] * g.q[t * g.H * g.d + h * g.d + j];
                b += g.qr[t * g.H * g.d + h * g.d + j] * g.qr[t * g.H * g.d + h * g.d + j];
                if (t == 0) max0 = fmax(max0, fabs(g.q[h * g.d + j] - g.qr[h * g.d + j]));
            }
            maxn = fmax(maxn, fabs(sqrt(a) - sqrt(b)) / (sqrt(a) + 1e-12));
        }
    CHECK(maxn < 1e-5 && max0 < 1e-6, "RoPE norms %g, position 0 %g", maxn, max0);
    /* Dense causal attention in double from the hooked Q/K after RoPE and V equals ATTN_OUT. */
    double maxo = 0, sc = 1.0 / sqrt((double)g.d);
    for (size_t h = 0; h < g.H; h++) {
        size_t kv = h / (g.H / g.G);
        for (size_t t = 0; t < T; t++) {
            double p[24], mx = -1e300, sum = 0;
            for (size_t s = 0; s <= t; s++) {
                double dot = 0;
                for (size_t j = 0; j < g.d; j++) dot += g.qr[t * g.H * g.d + h * g.d + j] * g.kr[s * g.G * g.d + kv * g.d + j];
                p[s] = dot * sc;
                mx = fmax(mx, p[s]);
            }
            for (size_t s = 0; s <= t; s++) { p[s] = exp(p[s] - mx); sum += p[s]; }
            for (size_t j = 0; j < g.dv; j++) {
                double o = 0;
                for (size_t s = 0; s <= t; s++) o += p[s] / sum * g.v[s * g.G * g.dv + kv * g.dv + j];
                maxo = fmax(maxo, fabs(o - g.out[t * g.H * g.dv + h * g.dv + j]));
            }
        }
    }
    CHECK(maxo < 1e-4, "attention output vs dense reference: %g", maxo);
    /* A hook's error stops the run and names the hook and layer. */
    FwdHooks stop = {.mask = FWD_Q, .fn = stop_fn};
    fwd_set_hooks(f, &stop);
    CHECK_ERR(fwd_run(f, ids, 4, FWD_LOGITS_NONE, NULL), "q hook, layer 2");
    CHECK(fwd_pos(f) == 0, "a failed run resets the sequence");
done:
    free(g.in); free(g.q); free(g.k); free(g.v); free(g.qr); free(g.kr); free(g.out);
    fwd_free(f);
    model_free(m);
}

static void test_gpt2(const char *models) {
    char *p = al_asprintf("%s/gpt2-tiny-random", models);
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(p, &m));
    free(p);
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    CHECK(fwd_vocab(f) == 50257 && fwd_max_ctx(f) == 256, "vocab %zu ctx %zu", fwd_vocab(f), fwd_max_ctx(f));
    int ids[] = {15496, 995, 11, 314, 1101, 994, 13, 50256, 464, 2068};
    size_t T = sizeof ids / sizeof *ids, V = fwd_vocab(f);
    float *all = malloc(T * V * sizeof *all), *one = malloc(V * sizeof *one);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, all));
    size_t bad = 0;
    double spread = 0;
    for (size_t i = 0; i < T * V; i++) {
        if (!isfinite(all[i])) bad++;
        spread = fmax(spread, fabs(all[i] - all[i % V]));
    }
    CHECK(bad == 0, "%zu non-finite logits", bad);
    CHECK(spread > 1e-6, "logits do not depend on the tokens");
    double maxd = 0;
    fwd_reset(f);
    for (size_t t = 0; t < T; t++) {
        CHECK_OK(fwd_run(f, ids + t, 1, FWD_LOGITS_LAST, one));
        for (size_t j = 0; j < V; j++) maxd = fmax(maxd, fabs(one[j] - all[t * V + j]));
    }
    CHECK(maxd < 1e-4, "GPT-2 prefill vs decode %g", maxd);
    /* Learned positions: the context is n_positions. */
    fwd_reset(f);
    int *many = calloc(300, sizeof *many);
    CHECK_ERR(fwd_run(f, many, 300, FWD_LOGITS_NONE, NULL), "context of 256");
    free(many);
    free(all);
    free(one);
    fwd_free(f);
    model_free(m);
}

int main(void) {
    const char *models = getenv("ATTNLAB_MODELS");
    char *probe = models ? al_asprintf("%s/stories260K/stories260K.bin", models) : NULL;
    struct stat sb;
    bool have = probe && stat(probe, &sb) == 0;
    free(probe);
    if (!have) check_skip("$ATTNLAB_MODELS/stories260K is absent (the test models ship in tests/models)");
    test_stories(models);
    test_hooks(models);
    test_gpt2(models);
    return check_done();
}
