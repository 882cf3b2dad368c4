/* tiny_model.h -- the tiny Llama / Qwen2 checkpoint the forward-pass tests write by hand and open (hidden 32,
 * 4 heads of 8, intermediate 48, vocab 64, F32, untied; test_transmla_util.h's writer, so its draws follow tu_seed):
 *   tu_tiny(type, layers, kv_heads)   its TuModel (change fields before opening it for a variant);
 *   tu_open_tiny(tmp, name, tm, &f)   tm written to "<tmp>/<name>" and opened; *f its forward pass (f may be NULL).
 *                                     NULL (or *f NULL) after a failed CHECK: the caller frees what it got;
 *   tu_tiny_ids(ids, n, seed)         n token ids below 64 from a 64-bit LCG (the top 6 bits);
 *   tu_tiny_calib(m, f, ids, n, L, &S, &mu)   the calibration (with input means) of m over n / L windows of L
 *                                     tokens through f, and every layer's attention-input second moment and
 *                                     mean (calib_input_arrays); NULL after a failed CHECK. Caller frees all. */
#ifndef TEST_TINY_MODEL_H
#define TEST_TINY_MODEL_H

#include "test_transmla_util.h"
#include "calib.h"
#include "forward.h"
#include "model.h"

#include <stdio.h>

static inline TuModel tu_tiny(const char *type, int layers, int kv_heads) {
    return (TuModel){.model_type = type, .layers = layers, .hidden = 32, .heads = 4, .kv_heads = kv_heads,
                     .head_dim = 8, .inter = 48, .vocab = 64, .dtype = DT_F32};
}

static inline Model *tu_open_tiny(const char *tmp, const char *name, TuModel tm, Forward **f) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    Model *m = NULL;
    if (f) *f = NULL;
    CHECK_OK(tu_write_model(dir, &tm));
    CHECK_OK(model_open(dir, &m));
    if (m && f) CHECK_OK(fwd_new(m, NULL, f));
    return m;
}

static inline void tu_tiny_ids(int *ids, size_t n, uint64_t seed) {
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) { s = s * 6364136223846793005ull + 1442695040888963407ull; ids[i] = (int)(s >> 58); }
}

static inline CalibStats *tu_tiny_calib(Model *m, Forward *f, const int *ids, size_t n, size_t seqlen, double ***S,
                                        double ***mu) {
    CalibShape sh;
    CalibStats *st = NULL;
    *S = *mu = NULL;
    CHECK_OK(calib_shape_of(m, &sh));
    CHECK_OK(calib_new(&sh, true, &st));
    if (f && st) CHECK_OK(calib_run(st, f, ids, n / seqlen, seqlen));
    if (st) CHECK_OK(calib_input_arrays(st, 0, -1, S, mu));
    return st;
}

#endif
