/* test_fp4_matmul.c -- the forward pass's FP4 / INT4 weights (issue 28's speed and memory):
 *  - matmul's vectorized panel decoder gives tensor.c's values bit for bit: y = x Wᵀ of hand-made
 *    weights in every encoding (MXFP4 with E8M0 scales 0 = 2^-127 and 254, NVFP4 with a subnormal
 *    E4M3 block scale and a scale_2 that multiplies, compressed-tensors' NVFP4 whose global scale
 *    divides, INT4 with BF16 / F16 / F32 group scales) equals sgemm / sgemv on dt_fp4_dequant's
 *    float copy to the bit, at T = 1, 5 and 64, on AVX-512 and on the portable route.
 *    (The decoder's values are the old one's, so this passes on the old code too: it pins them;
 *    bench_quant measures the speed.) */
#include "check.h"
#include "forward.h"
#include "matmul_internal.h"

#include <cblas.h>
#include <stdint.h>

static unsigned long long rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}

/* ================================================================ the decoder, bit for bit */

typedef struct {
    const char *what;
    dt_fp4 q;
} Case;

/* Random codes and scales for q (rows, cols set; enc, gscale, gdiv, sdt set): bytes owned by the caller. */
static void fill(dt_fp4 *q, uint8_t **codes, uint8_t **scale) {
    size_t B = dt_fp4_traits(q->enc)->block, ns = q->rows * (q->cols / B), es = q->enc == DT_FP4_INT4 ? dt_size(q->sdt) : 1;
    *codes = malloc(q->rows * q->cols / 2);
    *scale = malloc(ns * es);
    for (size_t i = 0; i < q->rows * q->cols / 2; i++) (*codes)[i] = (uint8_t)rnd32();
    for (size_t i = 0; i < ns; i++) {
        uint8_t *s = *scale + i * es;
        if (q->enc == DT_FP4_MXFP4) *s = i == 0 ? 0 : i == 1 ? 254 : (uint8_t)(115 + rnd32() % 16);   /* 2^-127, 2^127 */
        else if (q->enc == DT_FP4_NVFP4) *s = i == 0 ? 0x01 : (uint8_t)(0x08 + rnd32() % 0x60);     /* 2^-9: subnormal */
        else {
            float f = (float)(rnd32() % 1000 + 1) * 1e-5f;
            if (q->sdt == DT_F32) memcpy(s, &f, 4);
            else {
                uint16_t h = q->sdt == DT_BF16 ? dt_f32_to_bf16(f) : dt_f32_to_f16(f);
                memcpy(s, &h, 2);
            }
        }
    }
    q->codes = *codes;
    q->scale = *scale;
}

/* mm_xwt on the FP4 view against sgemm / sgemv on the decoded copy: bitwise (one worker, one panel). */
static void check_case(const Case *c, size_t T) {
    dt_fp4 q = c->q;
    uint8_t *codes, *scale;
    fill(&q, &codes, &scale);
    size_t N = q.rows, K = q.cols;
    float *W = malloc(N * K * sizeof *W), *x = malloc(T * K * sizeof *x), *y = malloc(T * N * sizeof *y),
          *ref = malloc(T * N * sizeof *ref), *row = malloc(K * sizeof *row);
    dt_fp4_dequant(&q, 0, N, 0, K, W, K);
    for (size_t i = 0; i < T * K; i++) x[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
    if (T == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, 1.f, W, (int)K, x, 1, 0.f, ref, 1);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)N, (int)K, 1.f, x, (int)K, W, (int)K, 0.f, ref, (int)N);
    WMat w = {.dt = DT_U8, .data = q.codes, .rows = N, .cols = K, .fp4 = q};
    MmWork *wk = mm_work_new(1);
    for (int m = 0; m < 2; m++) {
        CHECK_OK(mm_xwt(wk, &w, x, K, T, y, N, m ? MM_BF16 : MM_F32));
        CHECK(memcmp(y, ref, T * N * sizeof *y) == 0, "%s, T = %zu, %s mode: x Wᵀ equals sgemm on the decoded copy bit for bit",
              c->what, T, m ? "bf16" : "f32");
    }
    wmat_row(&w, N - 1, row);
    CHECK(memcmp(row, W + (N - 1) * K, K * sizeof *row) == 0, "%s: wmat_row is the decoded row", c->what);
    mm_work_free(wk);
    free(W); free(x); free(y); free(ref); free(row); free(codes); free(scale);
}

static void test_decoder(void) {
    const Case cases[] = {
        {"MXFP4", {.enc = DT_FP4_MXFP4, .rows = 70, .cols = 2048, .gscale = 1}},
        {"NVFP4 (scale_2 multiplies)", {.enc = DT_FP4_NVFP4, .rows = 33, .cols = 272, .gscale = 0.0123f}},
        {"compressed-tensors NVFP4 (global scale divides)",
         {.enc = DT_FP4_NVFP4, .rows = 40, .cols = 512, .gscale = 81.5f, .gdiv = true}},
        {"INT4, BF16 scales", {.enc = DT_FP4_INT4, .rows = 48, .cols = 1024, .gscale = 1, .sdt = DT_BF16}},
        {"INT4, F16 scales", {.enc = DT_FP4_INT4, .rows = 17, .cols = 96, .gscale = 1, .sdt = DT_F16}},
        {"INT4, F32 scales", {.enc = DT_FP4_INT4, .rows = 20, .cols = 160, .gscale = 1, .sdt = DT_F32}},
    };
    const size_t Ts[] = {1, 5, 64};
    for (int simd = 1; simd >= 0; simd--) {
        mm_simd(simd);
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (size_t t = 0; t < 3; t++) check_case(&cases[c], Ts[t]);
    }
    mm_simd(true);
}

int main(void) {
    test_decoder();
    return check_done();
}
