/* test_ablation.c -- `ablate`'s kept prefix (commands/headprobe.h: ProbeAblation over forward.h's
 * fwd_set_resid) against the whole pass (probe_ablate: every layer rerun per head):
 *   (a) on synthetic checkpoints of the families with each kind of layer (GQA with q/k norms, windows and
 *       soft-caps, sinks, MLA, a Gated DeltaNet hybrid, a Mamba-2 hybrid) and on tests/models/stories260K-hf,
 *       the perplexity without one head -- the first and the last of every attention layer -- and without two
 *       heads at once is probe_ablate's bit for bit, over three windows (the last one short) and over windows
 *       whose last single token is dropped; a layer visited after a later one (the stream recomputed) too;
 *   (b) the cost: once the stream is kept at layer l, one ablation runs NL - l layers per window (the whole
 *       pass runs NL); the layers run over all of a model's ablations, moves included, are printed beside the
 *       whole pass's;
 *   (c) Gemma 4's KV-shared layers read an earlier layer's cache: nothing is kept there (each ablation is the
 *       whole pass, no layer counted), numbers still probe_ablate's. */
#define _GNU_SOURCE
#include "check.h"
#include "family_models.h"
#include "config.h"
#include "forward.h"
#include "headprobe.h"
#include "layersel.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int layers_checked, pairs_checked;

/* probe_ablation_run against probe_ablate for heads[0..nh) of layer l; the layers it ran. */
static size_t check_one(const char *name, Forward *f, ProbeAblation *pa, const int *ids, size_t n, size_t L, int l,
                        const int *heads, size_t nh) {
    FwdPpl want, got;
    size_t before = probe_ablation_layers_run(pa);
    CHECK_OK(probe_ablation_run(pa, l, heads, nh, &got));
    size_t ran = probe_ablation_layers_run(pa) - before;
    CHECK_OK(probe_ablate(f, ids, n, L, l, heads, nh, &want));
    CHECK(got.nll == want.nll && got.tokens == want.tokens && got.windows == want.windows,
          "%s layer %d heads %d(+%zu): kept prefix nll %.17g (%zu tokens), whole pass %.17g (%zu)", name, l, heads[0],
          nh - 1, got.nll, got.tokens, want.nll, want.tokens);
    return ran;
}

/* (a)-(c) on one model over n tokens in windows of L. */
static void check_text(const char *name, Forward *f, size_t n, size_t L, bool kv_shared) {
    const ModelConfig *c = &fwd_model(f)->cfg;
    int NL = c->n_layers, H = c->n_heads, *ids = malloc(n * sizeof *ids);
    tu_tokens(ids, n, fwd_vocab(f), 11);
    size_t nwin = (n + L - 1) / L - (n % L == 1);
    ProbeAblation *pa = NULL;
    CHECK_OK(probe_ablation_new(f, ids, n, L, &pa));
    if (!pa) { free(ids); return; }
    int first = layersel_next(c, 0, NL - 1), last = first;
    FwdPpl base, whole;
    CHECK_OK(probe_ablation_base(pa, first, &base));
    CHECK_OK(probe_ablate(f, ids, n, L, 0, NULL, 0, &whole));
    CHECK(base.nll == whole.nll, "%s: intact nll %.17g, the whole pass's %.17g", name, base.nll, whole.nll);
    size_t heads_run = 0, ran = 0;
    for (int l = first; l < NL; l = layersel_next(c, l + 1, NL - 1)) {
        int hs[2] = {0, H - 1};
        size_t r0 = check_one(name, f, pa, ids, n, L, l, hs, 1), r1 = check_one(name, f, pa, ids, n, L, l, hs + 1, 1);
        CHECK(kv_shared ? r1 == 0 : r1 == nwin * (size_t)(NL - l), "%s layer %d: one head ran %zu layers, not %zu x %d",
              name, l, r1, nwin, NL - l);
        ran += r0 + r1 + check_one(name, f, pa, ids, n, L, l, hs, 2);
        heads_run += 3;
        layers_checked++;
        last = l;
    }
    if (last != first) {                                /* back to an earlier layer: recomputed from the embedding */
        int h = H / 2;
        check_one(name, f, pa, ids, n, L, first, &h, 1);
        pairs_checked++;
    }
    if (!kv_shared) {
        size_t full = heads_run * nwin * (size_t)NL;
        CHECK(ran < full, "%s: %zu layers run for %zu ablations; the whole pass each: %zu", name, ran, heads_run, full);
        printf("  %-14s %zu ablations over %zu windows: %zu layers run (the whole pass each: %zu, %.2fx)\n", name,
               heads_run, nwin, ran, full, (double)full / (double)(ran ? ran : 1));
    } else
        CHECK(probe_ablation_layers_run(pa) == 0, "%s: KV-shared layers, yet %zu layers ran from a kept stream", name,
              probe_ablation_layers_run(pa));
    probe_ablation_free(pa);
    free(ids);
}

static void check_model(const char *name, const char *dir) {
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        bool shared = false;
        for (int l = 0; l < m->cfg.n_layers; l++) shared |= cfg_kv_source(&m->cfg, l) != l;
        check_text(name, f, 37, 16, shared);     /* windows 16, 16, 5 */
        check_text(name, f, 33, 16, shared);     /* 16, 16 and a single token, not run */
    }
    fwd_free(f);
    model_free(m);
}

int main(void) {
    static const char *const fams[] = {"qwen3", "gemma2", "gpt_oss", "deepseek_v3", "qwen3_next", "nemotron_h", "gemma4_text"};
    tu_each_model(fams, sizeof fams / sizeof *fams, check_model);
    CHECK(layers_checked >= 20, "only %d layers checked", layers_checked);
    CHECK(pairs_checked >= 6, "only %d models went back to an earlier layer", pairs_checked);
    return check_done();
}
