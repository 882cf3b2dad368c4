/* test_attend.c -- the forward pass's attention probes (core/model/forward.h: fwd_set_capture,
 * fwd_mask_head) against the independent float64 reference of tests/ref_forward.c:
 *   (a) the captured weights of a query head equal the reference's softmax of its own scores (q, k
 *       computed from the weights in double) to 5e-5, on synthetic checkpoints of the families with
 *       each feature -- GQA and q/k norms (qwen3), sliding windows (mixtral, olmo3, gemma3_text's local
 *       layers), soft-caps and windows (gemma2), Gemma 4's KV-shared layers, k_eq_v
 *       and v_norm (gemma4_text), Llama 4's chunks and NoPE layers (llama4_text), sinks and windows (gpt_oss), MLA (deepseek_v3), the lightning indexer's selected keys past index_topk
 *       (deepseek_v32: 24 tokens, index_topk 8), a hybrid's attention layers (qwen3_next: its linear layers
 *       have no pattern) -- at every attention layer, for the
 *       first and the last head; and on tests/models/stories260K-hf;
 *   (b) every row is causal (keys after the query exactly 0) and sums to 1, or to less than 1 where a
 *       sink takes its weight (gpt_oss: checked to be below 1 - 1e-4 somewhere); in a windowed layer
 *       every key at or before i - window is exactly 0 (and such layers were seen);
 *   (c) the capture does not change the pass (logits equal with and without it);
 *   (d) a masked head changes the logits, and unmasking restores them bit for bit;
 *   (e) run as an override (fwd_set_attn with the layer's own weights as an AttnLayer), a layer's
 *       captured weights (attn_eval's logits through the override's softmax) equal the reference's.
 * The perplexity of a masked head against a checkpoint with that head's o_proj columns zeroed is
 * tests/cli_attend.sh's. */
#define _GNU_SOURCE
#include "check.h"
#include "family_models.h"
#include "config.h"
#include "attn_eval.h"
#include "forward.h"
#include "layersel.h"
#include "ref_forward.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_TOK 24
#define TOL 5e-5       /* float32 pass against double: Gemma 4 (scale 1, q/k norms) reaches 2.1e-5 */

static int window_layers_seen, sink_rows_seen;

/* (b) the structure of one captured pattern P (T, T) of layer L. */
static void check_rows(const char *name, const ModelConfig *c, int L, int h, const float *P, size_t T, bool sink) {
    size_t w = cfg_layer_window(c, L);
    int bad_causal = 0, bad_window = 0, bad_sum = 0;
    double low = 1;
    for (size_t i = 0; i < T; i++) {
        double sum = 0;
        for (size_t j = 0; j < T; j++) {
            double p = P[i * T + j];
            sum += p;
            if (j > i && p != 0) bad_causal++;
            if (w && j + w <= i && p != 0) bad_window++;
        }
        low = fmin(low, sum);
        if (sink ? !(sum <= 1 + 1e-5) : fabs(sum - 1) > 1e-5) bad_sum++;
    }
    CHECK(bad_causal == 0, "%s layer %d head %d: %d weights on keys after their query", name, L, h, bad_causal);
    CHECK(bad_window == 0, "%s layer %d head %d: %d weights outside the window of %zu", name, L, h, bad_window, w);
    CHECK(bad_sum == 0, "%s layer %d head %d: %d rows do not sum to %s", name, L, h, bad_sum, sink ? "<= 1" : "1");
    if (w && w < T) window_layers_seen++;
    if (sink && low < 1 - 1e-4) sink_rows_seen++;
}

/* (e) the first attention layer run as an override (its own weights as an AttnLayer, attn_eval): the
 * captured weights come from the override's logits and softmax, and equal the reference's too. */
static int overrides_seen;
static void check_override(const char *name, Model *m, Forward *f, RefModel *r, const int *ids, float *P, double *R,
                           float *z) {
    const ModelConfig *c = &m->cfg;
    size_t T = T_TOK;
    int L = 0;
    while (L < c->n_layers && !layersel_attn(c, L)) L++;
    AttnLayer *al = NULL;
    if (cfg_has_indexer(c)) {                       /* an override runs dense attention: refused past index_topk */
        printf("  %-12s override: not past index_topk (dense)\n", name);
        return;
    }
    if (attn_layer_load(m, L, &al) != AL_OK) {     /* families the evaluator does not load: the pass alone */
        printf("  %-12s override: not loaded as an AttnLayer (%s)\n", name, al_errmsg());
        al_err_clear();
        return;
    }
    int h = c->n_heads - 1;
    FwdCapture cap = {.layer = L, .head = h, .P = P, .cap_rows = T};
    CHECK_OK(fwd_set_attn(f, L, al));
    fwd_set_capture(f, &cap);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z));
    fwd_set_capture(f, NULL);
    fwd_clear_attn(f);
    ref_capture(r, L, h, R, T);
    double *rl = malloc(T * ref_vocab(r) * sizeof *rl);
    CHECK_OK(ref_logits(r, ids, T, rl));
    ref_capture(r, 0, 0, NULL, 0);
    double err = 0;
    for (size_t i = 0; i < T * T; i++) err = fmax(err, fabs(P[i] - R[i]));
    CHECK(cap.rows == T && err < TOL, "%s layer %d head %d as an override: %zu rows, weights off by %.3g", name, L, h,
          cap.rows, err);
    overrides_seen++;
    free(rl);
    attn_layer_free(al);
}

/* (a)-(d) on the checkpoint in dir. */
static void check_model(const char *name, const char *dir) {
    Model *m = NULL;
    Forward *f = NULL;
    RefModel *r = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return;
    CHECK_OK(fwd_new(m, NULL, &f));
    CHECK_OK(ref_open(dir, &r));
    if (!m || !f || !r) { fwd_free(f); model_free(m); ref_free(r); return; }
    const ModelConfig *c = &m->cfg;
    size_t V = fwd_vocab(f), T = T_TOK;
    int ids[T_TOK];
    tu_tokens(ids, T, V, 7);
    float *P = calloc(T * T, sizeof *P), *z0 = malloc(T * V * sizeof *z0), *z1 = malloc(T * V * sizeof *z1);
    double *R = calloc(T * T, sizeof *R), *rl = malloc(T * ref_vocab(r) * sizeof *rl);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z0));
    int checked = 0;
    for (int L = 0; L < c->n_layers; L++) {
        if (cfg_layer_linear(c, L) || cfg_layer_mamba(c, L)) continue;
        for (int k = 0; k < 2; k++) {
            int h = k ? c->n_heads - 1 : 0;
            FwdCapture cap = {.layer = L, .head = h, .P = P, .cap_rows = T};
            fwd_set_capture(f, &cap);
            fwd_reset(f);
            CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z1));
            fwd_set_capture(f, NULL);
            CHECK(cap.rows == T, "%s layer %d head %d: %zu rows captured of %zu", name, L, h, cap.rows, T);
            if (!L && !k) CHECK(!memcmp(z0, z1, T * V * sizeof *z0), "%s: the capture changed the logits", name);
            ref_capture(r, L, h, R, T);
            CHECK_OK(ref_logits(r, ids, T, rl));
            ref_capture(r, 0, 0, NULL, 0);
            double err = 0;
            for (size_t i = 0; i < T * T; i++) err = fmax(err, fabs(P[i] - R[i]));
            CHECK(err < TOL, "%s layer %d head %d: captured weights differ from the reference's by %.3g", name, L, h, err);
            check_rows(name, c, L, h, P, T, fwd_attn_sinks(f, L) != NULL);
            checked++;
        }
    }
    CHECK(checked > 0, "%s: no attention layer checked", name);
    check_override(name, m, f, r, ids, P, R, z1);
    /* (d) masking a head of the first attention layer changes the logits; unmasking restores them */
    int La = 0;
    while (cfg_layer_linear(c, La) || cfg_layer_mamba(c, La)) {
        CHECK_ERR(fwd_mask_head(f, La, 0, true), "not softmax attention");
        La++;
    }
    CHECK_OK(fwd_mask_head(f, La, 0, true));
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z1));
    double d = 0;
    for (size_t i = 0; i < T * V; i++) d = fmax(d, fabs(z1[i] - z0[i]));
    CHECK(d > 1e-6, "%s: masking layer %d head 0 left the logits unchanged", name, La);
    CHECK_ERR(fwd_mask_head(f, c->n_layers, 0, true), "out of range");
    fwd_clear_head_mask(f);
    fwd_reset(f);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z1));
    CHECK(!memcmp(z0, z1, T * V * sizeof *z0), "%s: unmasking did not restore the logits", name);
    printf("  %-12s %d heads checked, mask changes logits by %.3g\n", name, checked, d);
    free(P); free(z0); free(z1); free(R); free(rl);
    ref_free(r);
    fwd_free(f);
    model_free(m);
}

int main(void) {
    static const char *const fams[] = {"qwen3", "mixtral", "gemma2", "gemma3_text", "gemma4_text", "olmo3", "llama4_text",
                                       "gpt_oss", "deepseek_v3", "deepseek_v32", "qwen3_next"};
    tu_each_model(fams, sizeof fams / sizeof *fams, check_model);
    CHECK(window_layers_seen > 0, "no windowed layer was checked (mistral, gemma2 and gpt_oss have them)");
    CHECK(overrides_seen >= 3, "only %d models ran their layer as an override", overrides_seen);
    CHECK(sink_rows_seen > 0, "no sink took weight (gpt_oss has sinks)");
    printf("  windowed layers checked %d, heads whose sink took weight %d\n", window_layers_seen, sink_rows_seen);
    return check_done();
}
