/* test_fp8blk.c -- fine-grained FP8 block scales as other publishers store them (tensor.h): a weight
 * (130, 4) F8_E4M3 -- two row blocks, the second a partial edge block of 2 rows -- with its
 * "_scale_inv" grid (2, 1) in BF16 (Qwen3-*-FP8: 0.125 and 3), as F8_E8M0 bytes (DeepSeek-V4: codes
 * 124 = 2^-3 and 130 = 2^3), in F32 (DeepSeek, MiniMax) and in F32 as compressed-tensors' FP8_BLOCK
 * "w.weight_scale": store_read, store_read_block of the edge
 * block and the forward pass's view (wmat_row) give e4m3(code) times the block's scale, the grid
 * multiplying; hostile grids -- a BF16 NaN, E8M0's code 0xFF, an F32 Inf, an F16 grid -- refused
 * naming the tensor (and the block). */
#include "check.h"
#include "matmul.h"
#include "safetensors.h"
#include "store.h"

#include <stdint.h>

static const char *tmp;
enum { R = 130, C = 4 };
static const uint8_t CODES[4] = {0x38, 0xc0, 0x01, 0x7e};      /* 1, -2, 2^-9, 448 */
static const float VAL[4] = {1, -2, 0x1p-9f, 448};

/* w.weight (R, C): row i holds CODES rotated by i. kind: 0 BF16, 1 E8M0, 2 F32, 3 F32 named
 * "w.weight_scale" (compressed-tensors' strategy "block": [2, 1] is the grid, not per-row); hostile: 1 NaN in block
 * [1, 0] (E8M0: 0xFF; F32: Inf), 2 the grid in F16. */
static int write_w(const char *path, int kind, int hostile) {
    static uint8_t codes[R * C];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) codes[i * C + j] = CODES[(i + j) % 4];
    uint16_t bf[2] = {0x3e00, hostile == 1 ? 0x7fc0 : 0x4040};          /* 0.125, 3 (or NaN) */
    uint16_t f16[2] = {0x3000, 0x4200};                                  /* 0.125, 3 */
    uint8_t e8[2] = {124, hostile == 1 ? 0xff : 130};                    /* 2^-3, 2^3 (or NaN) */
    float f[2] = {0.125f, hostile == 1 ? INFINITY : 3.0f};
    size_t shape[2] = {R, C}, gs[2] = {2, 1};
    st_writer *w = st_writer_new();
    int rc = st_writer_add(w, "w.weight", DT_F8_E4M3, 2, shape, codes, sizeof codes);
    if (rc == AL_OK && hostile == 2) rc = st_writer_add(w, "w.weight_scale_inv", DT_F16, 2, gs, f16, 4);
    else if (rc == AL_OK && kind == 0) rc = st_writer_add(w, "w.weight_scale_inv", DT_BF16, 2, gs, bf, 4);
    else if (rc == AL_OK && kind == 1) rc = st_writer_add(w, "w.weight_scale_inv", DT_F8_E8M0, 2, gs, e8, 2);
    else if (rc == AL_OK) rc = st_writer_add(w, kind == 3 ? "w.weight_scale" : "w.weight_scale_inv", DT_F32, 2, gs, f, 8);
    if (rc == AL_OK) rc = st_writer_write(w, path);
    st_writer_free(w);
    return rc;
}

static void test_grids(void) {
    static const char *names[4] = {"BF16", "E8M0", "F32", "compressed-tensors block grid (weight_scale)"};
    static const float s[4][2] = {{0.125f, 3.0f}, {0.125f, 8.0f}, {0.125f, 3.0f}, {0.125f, 3.0f}};
    for (int k = 0; k < 4; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/blk%d.safetensors", tmp, k);
        CHECK_OK(write_w(p, k, 0));
        Store *st = NULL;
        CHECK_OK(store_open(p, &st));
        if (!st) continue;
        Mat *m = NULL, *edge = NULL;
        CHECK_OK(store_read(st, "w.weight", &m));
        CHECK_OK(store_read_block(st, "w.weight", 128, 2, 1, 3, &edge));
        int bad = 0;
        for (int i = 0; m && i < R; i++)
            for (int j = 0; j < C; j++) bad += m->data[i * C + j] != VAL[(i + j) % 4] * s[k][i / 128];
        CHECK(m && bad == 0, "%s grid: %d values wrong (w[129][3] = %g, want %g)", names[k], bad,
              m ? (double)m->data[129 * C + 3] : 0.0, (double)(VAL[0] * s[k][1]));
        CHECK(m && m->data[2] == 0x1p-12f, "%s: a subnormal code times 2^-3: %g", names[k], m ? (double)m->data[2] : 0.0);
        bad = 0;
        for (int i = 0; edge && i < 2; i++)
            for (int j = 0; j < 3; j++) bad += edge->data[i * 3 + j] != VAL[(128 + i + 1 + j) % 4] * s[k][1];
        CHECK(edge && bad == 0, "%s: the partial edge block's rows 128..129, columns 1..3 (%d wrong)", names[k], bad);
        WMat wv;
        float row[C];
        CHECK_OK(wmat_view(st, "w.weight", false, &wv));
        wmat_row(&wv, 129, row);
        CHECK(m && memcmp(row, m->data + 129 * C, sizeof row) == 0, "%s: the forward pass's row 129: %g %g", names[k],
              (double)row[0], (double)row[3]);
        wmat_free(&wv);
        mat_free(m);
        mat_free(edge);
        store_free(st);
    }
}

static void test_hostile(void) {
    static const char *says[3] = {"'w.weight_scale_inv' block [1, 0] is nan: an FP8 block scale must be finite",
                                  "'w.weight_scale_inv' block [1, 0] is nan (E8M0 code 0xff)",
                                  "'w.weight_scale_inv' block [1, 0] is inf"};
    for (int k = 0; k < 4; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/hostile%d.safetensors", tmp, k);
        CHECK_OK(write_w(p, k < 3 ? k : 0, k < 3 ? 1 : 2));
        Store *st = NULL;
        CHECK_OK(store_open(p, &st));
        if (!st) continue;
        Mat *m = NULL;
        WMat wv;
        CHECK_ERR(store_read(st, "w.weight", &m), k < 3 ? says[k] : "found F16 of shape [2, 1]");
        CHECK_ERR(wmat_view(st, "w.weight", false, &wv), "w.weight_scale_inv");
        wmat_free(&wv);
        mat_free(m);
        store_free(st);
    }
}

int main(void) {
    tmp = test_tmpdir();
    CHECK(dt_parse("F8_E8M0") == DT_F8_E8M0 && dt_size(DT_F8_E8M0) == 1 && !dt_is_float(DT_F8_E8M0),
          "F8_E8M0 is a dtype of one byte, a scale not a weight");
    test_grids();
    test_hostile();
    return check_done();
}
