/* test_fp8ct.c -- compressed-tensors FP8 weights (tensor.h's rule: "<w>" F8_E4M3 times "<w>_scale" of
 * shape [], [1] or [R, 1], F32/BF16/F16, multiplying; store_fp8_rscale finds and checks it):
 *  - hand-made bytes: a per-channel F32 scale [3, 1] (0.125, 2, 0.5), a scalar BF16 scale [] of
 *    0.25, a [1] F16 scale of 3, E4M3 codes of known value (0x38 = 1, 0xc0 = -2, 0x01 = 2^-9,
 *    0x7e = 448), an input_scale of 1e9 beside them that must not be read; through store_read,
 *    store_read_block of a column range and the forward pass's view (wmat_view / wmat_row, no copy);
 *  - hostile scales: a NaN, an Inf, [2, 1] for 3 rows, I32: errors naming the tensor;
 *  - pack-quantized INT4 ("<w>_packed" I32, "<w>_scale" BF16 per 32, "<w>_shape"): element i at bit
 *    4i of its row's words, stored with an offset of 8 (nibble 7 is -1, not 7), a scale of 2^-3;
 *    through store_read, store_shape2 and wmat_view; a zero point, a NaN scale, a scale grid of the
 *    wrong shape and a shape that disagrees with the words refused, naming the tensor. */
#include "check.h"
#include "matmul.h"
#include "matmul_internal.h"
#include "safetensors.h"
#include "store.h"

#include <stdint.h>

static const char *tmp;
static const uint8_t CODES[12] = {0x38, 0xc0, 0x01, 0x7e, 0xb8, 0x40, 0x00, 0x30,
                                  0x48, 0x38, 0x81, 0xc8};   /* 1 -2 2^-9 448 | -1 2 0 0.5 | 4 1 -2^-9 -4 */
static const float VAL[12] = {1, -2, 0x1p-9f, 448, -1, 2, 0, 0.5f, 4, 1, -0x1p-9f, -4};

/* c.weight (3 x 4) per channel F32, t.weight (2 x 4) scalar BF16, u.weight (1 x 4) [1] F16;
 * `hostile` breaks c's scale: 1 NaN, 2 Inf, 3 [2, 1], 4 I32. */
static int write_small(const char *path, int hostile) {
    st_writer *w = st_writer_new();
    float cs[3] = {0.125f, 2.0f, 0.5f}, big = 1e9f;
    if (hostile == 1) cs[1] = NAN;
    if (hostile == 2) cs[2] = INFINITY;
    uint16_t ts = 0x3e80 /* BF16 0.25 */, us = 0x4200 /* F16 3 */;
    size_t cshape[2] = {3, 4}, sshape[2] = {hostile == 3 ? 2 : 3, 1}, tshape[2] = {2, 4}, ushape[2] = {1, 4}, one = 1;
    int rc = st_writer_add(w, "c.weight", DT_F8_E4M3, 2, cshape, CODES, 12);
    if (rc == AL_OK) rc = st_writer_add(w, "c.weight_scale", hostile == 4 ? DT_I32 : DT_F32, 2, sshape, cs, sshape[0] * 4);
    if (rc == AL_OK) rc = st_writer_add(w, "c.input_scale", DT_F32, 0, NULL, &big, 4);
    if (rc == AL_OK) rc = st_writer_add(w, "t.weight", DT_F8_E4M3, 2, tshape, CODES, 8);
    if (rc == AL_OK) rc = st_writer_add(w, "t.weight_scale", DT_BF16, 0, NULL, &ts, 2);
    if (rc == AL_OK) rc = st_writer_add(w, "u.weight", DT_F8_E4M3, 2, ushape, CODES + 8, 4);
    if (rc == AL_OK) rc = st_writer_add(w, "u.weight_scale", DT_F16, 1, &one, &us, 2);
    if (rc == AL_OK) rc = st_writer_write(w, path);
    st_writer_free(w);
    return rc;
}

static void test_store(void) {
    char p[4200];
    snprintf(p, sizeof p, "%s/ct.safetensors", tmp);
    CHECK_OK(write_small(p, 0));
    Store *s = NULL;
    CHECK_OK(store_open(p, &s));
    if (!s) return;
    Mat *c = NULL, *t = NULL, *u = NULL, *blk = NULL;
    CHECK_OK(store_read(s, "c.weight", &c));
    CHECK_OK(store_read(s, "t.weight", &t));
    CHECK_OK(store_read(s, "u.weight", &u));
    CHECK_OK(store_read_block(s, "c.weight", 1, 2, 1, 2, &blk));
    const float cs[3] = {0.125f, 2.0f, 0.5f};
    int bad = 0;
    for (int i = 0; c && i < 12; i++) bad += c->data[i] != VAL[i] * cs[i / 4];
    CHECK(c && bad == 0, "per-channel scale multiplies row by row: %d wrong (c[0][3] = %g, want 56)", bad,
          c ? (double)c->data[3] : 0.0);
    bad = 0;
    for (int i = 0; t && i < 8; i++) bad += t->data[i] != VAL[i] * 0.25f;
    CHECK(t && bad == 0, "scalar BF16 scale [] of 0.25: %d wrong", bad);
    CHECK(t && t->data[2] == 0x1p-11f, "a subnormal code times the scale: %g", t ? (double)t->data[2] : 0.0);
    bad = 0;
    for (int i = 0; u && i < 4; i++) bad += u->data[i] != VAL[8 + i] * 3.0f;
    CHECK(u && bad == 0, "[1] F16 scale of 3: %d wrong", bad);
    CHECK(blk && blk->data[0] == 2 * 2.0f && blk->data[1] == 0 && blk->data[2] == 1 * 0.5f && blk->data[3] == -0x1p-10f,
          "store_read_block of rows 1..2, columns 1..2");
    WMat wv;
    float row[4];
    CHECK_OK(wmat_view(s, "c.weight", false, &wv));
    CHECK(wv.own == NULL && wv.rscale != NULL, "the forward pass's view decodes in place (no float copy)");
    if (wv.rscale) wmat_row(&wv, 2, row);
    CHECK(c && wv.rscale && memcmp(row, c->data + 8, sizeof row) == 0, "wmat_row of row 2: %g %g", (double)row[0],
          (double)row[3]);
    wmat_free(&wv);
    mat_free(c); mat_free(t); mat_free(u); mat_free(blk);
    store_free(s);
}

static void test_hostile(void) {
    static const char *says[5] = {NULL, "must be finite", "must be finite", "[3, 1]", "found I32"};
    for (int h = 1; h <= 4; h++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/cthostile%d.safetensors", tmp, h);
        CHECK_OK(write_small(p, h));
        Store *s = NULL;
        CHECK_OK(store_open(p, &s));
        if (!s) continue;
        Mat *m = NULL;
        WMat wv;
        CHECK_ERR(store_read(s, "c.weight", &m), says[h]);
        CHECK(strstr(al_errmsg(), "c.weight_scale") != NULL, "hostile %d names the tensor: '%s'", h, al_errmsg());
        CHECK_ERR(wmat_view(s, "c.weight", false, &wv), "c.weight_scale");
        wmat_free(&wv);
        mat_free(m);
        store_free(s);
    }
}

/* i.weight (2 x 64) in INT4; `hostile`: 1 a zero point, 2 a NaN scale, 3 scales [2, 1], 4 shape [2, 96]. */
static int write_int4(const char *path, int hostile) {
    st_writer *w = st_writer_new();
    uint32_t words[16];
    for (int i = 0; i < 16; i++) words[i] = 0x88888888u;       /* eight zeros */
    /* elements 0..7 of row 0: nibbles 0 8 9 7 f 1 a 6 = -8 0 1 -1 7 -7 2 -2 */
    words[0] = 0x0u | 0x8u << 4 | 0x9u << 8 | 0x7u << 12 | 0xfu << 16 | 0x1u << 20 | 0xau << 24 | 0x6u << 28;
    words[8] = 0x76543210u;                                    /* row 1: -8 .. -1 */
    uint16_t sc[4] = {0x3e00 /* 0.125 */, 0x3f80 /* 1 */, 0x4000 /* 2 */, 0x3f00 /* 0.5 */};
    if (hostile == 2) sc[3] = 0x7fc0;
    int64_t shp[2] = {2, hostile == 4 ? 96 : 64};
    uint8_t zp[4] = {0};
    size_t ws[2] = {2, 8}, ss[2] = {2, hostile == 3 ? 1 : 2}, two = 2;
    int rc = st_writer_add(w, "i.weight_packed", DT_I32, 2, ws, words, sizeof words);
    if (rc == AL_OK) rc = st_writer_add(w, "i.weight_scale", DT_BF16, 2, ss, sc, ss[1] * 4);
    if (rc == AL_OK) rc = st_writer_add(w, "i.weight_shape", DT_I64, 1, &two, shp, sizeof shp);
    if (rc == AL_OK && hostile == 1) rc = st_writer_add(w, "i.weight_zero_point", DT_I8, 2, (size_t[2]){2, 2}, zp, 4);
    if (rc == AL_OK) rc = st_writer_write(w, path);
    st_writer_free(w);
    return rc;
}

static void test_int4(void) {
    char p[4200];
    snprintf(p, sizeof p, "%s/int4.safetensors", tmp);
    CHECK_OK(write_int4(p, 0));
    Store *s = NULL;
    CHECK_OK(store_open(p, &s));
    if (!s) return;
    size_t R = 0, C = 0;
    Mat *m = NULL;
    CHECK_OK(store_shape2(s, "i.weight", &R, &C));
    CHECK(R == 2 && C == 64, "INT4 logical shape [%zu, %zu] from weight_shape", R, C);
    CHECK_OK(store_read(s, "i.weight", &m));
    static const float want0[8] = {-1, 0, 0.125f, -0.125f, 0.875f, -0.875f, 0.25f, -0.25f};
    int bad = 0;
    for (int j = 0; m && j < 8; j++) bad += m->data[j] != want0[j];
    CHECK(m && bad == 0, "row 0: element i at bit 4i, offset 8, scale 2^-3: %d wrong (%g %g %g %g)", bad,
          m ? (double)m->data[0] : 0.0, m ? (double)m->data[1] : 0.0, m ? (double)m->data[2] : 0.0, m ? (double)m->data[3] : 0.0);
    CHECK(m && m->data[8] == 0 && m->data[32] == 0, "a zero (nibble 8) in both groups");
    bad = 0;
    for (int j = 0; m && j < 8; j++) bad += m->data[64 + j] != (float)(j - 8) * 2.0f;
    CHECK(m && bad == 0 && m->data[64 + 32] == 0, "row 1: -8..-1 times 2 (its first group's scale)");
    WMat wv;
    CHECK_OK(wmat_view(s, "i.weight", false, &wv));
    CHECK(wv.own == NULL && wv.fp4.enc == DT_FP4_INT4, "the forward pass's view decodes INT4 in place");
    wmat_free(&wv);
    mat_free(m);
    store_free(s);
    static const char *says[5] = {NULL, "zero point", "is nan", "should be BF16, F16 or F32 of shape [2, 2]", "[2, 96]"};
    for (int h = 1; h <= 4; h++) {
        snprintf(p, sizeof p, "%s/int4h%d.safetensors", tmp, h);
        CHECK_OK(write_int4(p, h));
        CHECK_OK(store_open(p, &s));
        if (!s) continue;
        m = NULL;
        CHECK_ERR(store_read(s, "i.weight", &m), says[h]);
        CHECK(strstr(al_errmsg(), "i.weight") != NULL, "INT4 hostile %d names the tensor: '%s'", h, al_errmsg());
        mat_free(m);
        store_free(s);
    }
}

int main(void) {
    tmp = test_tmpdir();
    test_store();
    test_hostile();
    test_int4();
    return check_done();
}
