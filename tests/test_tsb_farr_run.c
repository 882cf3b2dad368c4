/* test_tsb_farr_run.c -- trust (helper tsb): a truncated layer the session runs in compute bf16
 * (farr_attn_layer_run, core/analysis/farr_run.c) keeps no float32 copy of W_Q and W_O beside its stock: W_O (rewritten
 * by a VO cut) is held as the stock's BF16 bytes, W_Q (untouched) as a view of the stored q_proj, each the values the
 * forward pass runs; K and V stay float32 (no held slot). `check`'s error table folds its own float32 layer
 * (farr_attn_layer), unchanged. Compute f32 keeps the float32 layer. On the old code W_Q and W_O stayed float32. */
#include "testutil.h"
#include "attn_stock.h"
#include "farr.h"

#include <string.h>

static size_t mat_bytes(const Mat *M) { return M ? M->rows * M->cols * sizeof(float) : 0; }

/* Bytes of L's float32 projections. */
static size_t float_bytes(const AttnLayer *L) {
    return mat_bytes(L->W_Q) + mat_bytes(L->W_K) + mat_bytes(L->W_V) + mat_bytes(L->W_O);
}

/* True when held slot i of L reads back as M (bit for bit). */
static bool reads_as(const AttnLayer *L, attn_held i, const Mat *M) {
    bool owned;
    const Mat *H = attn_layer_mat(L, i, &owned);
    bool same = H && M && H->rows == M->rows && H->cols == M->cols &&
                memcmp(H->data, M->data, M->rows * M->cols * sizeof(float)) == 0;
    if (owned) mat_free((Mat *)H);
    return same;
}

static void check_vo(const char *tmp) {
    Model *m = tu_open_synth(tmp, "demo-llama-bf16", SYNTH_DEFAULT_SEED);
    if (!m) return;
    FarrTruncOpts o = {.kind = FARR_VO, .by_rank = true, .rank = 8, .policy = FARR_POLICY_HEAD, .layer_lo = 0, .layer_hi = -1};
    FarrPlan *p = NULL;
    AttnLayer *F = NULL, *R = NULL, *R32 = NULL;
    CHECK_OK(farr_truncate(m, &o, &p));
    CHECK_OK(farr_attn_layer(m, p, NULL, 1, &F));
    CHECK_OK(farr_attn_layer_run(m, p, NULL, 1, MM_BF16, &R));
    CHECK_OK(farr_attn_layer_run(m, p, NULL, 1, MM_F32, &R32));
    if (F && R && R32) {
        CHECK(R->stock != NULL, "bf16: a stock");
        CHECK(!R->W_Q && R->held[AH_Q] && R->held[AH_Q]->w.dt == DT_BF16, "bf16: W_Q held (a BF16 view), not float32");
        CHECK(!R->W_O && R->held[AH_O] && R->stock && R->held[AH_O]->w.data == R->stock->w[AS_O].data,
              "bf16: W_O held as the stock's bytes");
        CHECK(reads_as(R, AH_Q, F->W_Q), "bf16: the held W_Q is the float32 layer's values, bit for bit");
        CHECK_OK(attn_layer_validate(R));
        size_t before = float_bytes(F), after = float_bytes(R);
        fprintf(stderr, "demo-llama-bf16 layer 1, VO rank 8: float32 projections %zu -> %zu bytes (stock beside)\n",
                before, after);
        CHECK(after == before - mat_bytes(F->W_Q) - mat_bytes(F->W_O), "float32 bytes %zu -> %zu", before, after);
        CHECK(R32->W_Q && R32->W_O && !R32->stock && float_bytes(R32) == before, "f32: the float32 layer as before");
    }
    attn_layer_free(F);
    attn_layer_free(R);
    attn_layer_free(R32);
    farr_plan_free(p);
    model_free(m);
}

int main(void) {
    check_vo(test_tmpdir());
    return check_done();
}
