/* test_pipeline_mem.c -- issue 32's memory: what the pipeline (calibrate ... inputs on; convert mla
 * stats act) holds, measured from /proc/self/status, not estimated.
 *
 * 1. The calibration's attention-input Grams G_X (the largest part of the statistics: layers x
 *    hidden^2 doubles) are kept as their upper triangles, packed: adding rows to 15 more layers of
 *    hidden 1024 grows RssAnon by about 15 x 4.2 MB (the full matrices were wholly resident: 15 x
 *    8.4 MB), and reading them back
 *    (calib_gram) gives the full symmetric matrix: Xᵀ X of the rows, to 1e-12.
 * 2. One layer's conversion (tmla_convert_layer, balance compared as `convert mla` does) peaks within
 *    40 MB of the layer it returns (hidden 2048, 16 heads of 128, 2 KV heads): it used to hold beside
 *    it a copy of the source layer (tmla_merge's), the other balance's whole layer (built while the
 *    kept one was held) and double copies of the whole source and built query (build_query: (hidden,
 *    H d) and (hidden, H (d + D)) doubles, 100 MB here): 246 MB above the start for 53 MB kept. The
 *    layer is the same (its outputs bit for bit against a second conversion).
 * The sizes are checked in normal builds only (under ASan freed memory stays resident). */
#include "test_transmla_util.h"
#include "test_mem_util.h"
#include "calib.h"
#include "transmla.h"

#include <stdio.h>

/* Resets VmHWM to the current RSS; false where the kernel does not allow it. */
static bool reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void calib_packed(void) {
    enum { L = 16, N = 1024, T = 300 };
    CalibShape sh = {.n_layers = L, .n_heads = 2, .n_kv_heads = 1, .d_qk = 8, .d_v = 8, .hidden = N};
    CalibStats *st = NULL;
    CHECK_OK(calib_new(&sh, true, &st));
    Mat *X = attn_random_input(T, N, 11);
    if (!st || !X) return;
    CHECK_OK(calib_add(st, CALIB_X, 0, X->data, T, N));          /* scratch and BLAS buffers in place */
    long a0 = status_kb("RssAnon");
    for (int l = 1; l < L; l++) CHECK_OK(calib_add(st, CALIB_X, l, X->data, T, N));
    long grown = status_kb("RssAnon") - a0;
    double full = (L - 1) * (double)N * N * 8 / 1024, packed = full * (N + 1) / (2.0 * N);
    printf("G_X of %d layers of hidden %d: RssAnon +%ld kB (packed %.0f, full %.0f)\n", L - 1, N, grown, packed, full);
    CHECK(!MEASURED || (a0 > 0 && grown < 0.6 * full), "G_X of %d layers grew RssAnon by %ld kB: packed %.0f, full %.0f", L - 1, grown,
          packed, full);
    double *G = malloc((size_t)N * N * sizeof(double));
    CHECK_OK(calib_gram(st, CALIB_X, L - 1, 0, G));
    double worst = 0;
    for (size_t i = 0; G && i < N; i += 97)
        for (size_t j = 0; j < N; j += 31) {
            double s = 0;
            for (size_t t = 0; t < T; t++) s += (double)X->data[t * N + i] * X->data[t * N + j];
            worst = fmax(worst, fabs(G[i * N + j] - s) / (fabs(s) + 1));
        }
    CHECK(G && worst < 1e-12, "calib_gram of the packed G_X is Xᵀ X (worst %.3g)", worst);
    free(G);
    mat_free(X);
    calib_free(st);
}

static bool same_outputs(const AttnLayer *a, const AttnLayer *b) {
    int pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    Mat *X = attn_random_input(8, a->hidden, 5);
    AttnOut *oa = NULL, *ob = NULL;
    bool same = attn_eval(a, X, pos, true, &oa) == AL_OK && attn_eval(b, X, pos, true, &ob) == AL_OK &&
                !memcmp(oa->out->data, ob->out->data, oa->out->rows * oa->out->cols * sizeof(float));
    attn_out_free(oa); attn_out_free(ob); mat_free(X);
    return same;
}

static void convert_peak(void) {
    AttnLayer *gqa = tu_gqa(16, 2, 128, 2048, ROPE_HALF, false, false);
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 128;
    o.freqfold = 1;
    o.rope_dim = 128;
    o.eval_tokens = 64;
    TmlaLayerReport rep, rep2;
    AttnLayer *a = NULL, *b = NULL;
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &a, &rep));          /* warm: BLAS buffers, the allocator */
    attn_layer_free(a);
    a = NULL;
    if (!reset_peak()) { printf("skip: /proc/self/clear_refs not writable\n"); attn_layer_free(gqa); return; }
    long r0 = status_kb("VmRSS");
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &a, &rep));
    long peak = status_kb("VmHWM") - r0, held = status_kb("VmRSS") - r0;
    /* what it keeps: the built layer (W_Q (2048, 16 x 256), W_O, the KV maps); the rest is per-layer scratch */
    double built = (2048.0 * 16 * 256 + 2048.0 * 2048 + 2048.0 * 256 + 128.0 * 16 * 256) * 4 / 1024;
    printf("one layer's conversion: VmHWM +%ld kB, held +%ld kB (the built layer %.0f kB)\n", peak, held, built);
    CHECK(!MEASURED || (r0 > 0 && peak < built + 40 * 1024), "one layer's conversion peaked %ld kB above its start (%ld held after): "
          "more than the built layer %.0f + 40 MB", peak, held, built);
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &b, &rep2));
    CHECK(a && b && same_outputs(a, b) && rep.out_err == rep2.out_err, "the same layer twice");
    attn_layer_free(a); attn_layer_free(b); attn_layer_free(gqa);
}

int main(void) {
    calib_packed();
    convert_peak();
    return check_done();
}
