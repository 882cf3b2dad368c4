/* test_fp4_kernels.c -- core/linalg/matmul.c's FP4 / INT4 register kernels at 1-63 tokens (issue 28's
 * speed aim at decode and small batches) against a float64 reference on the decoded values
 * (dt_fp4_dequant_d): every encoding (MXFP4 with E8M0 scales, NVFP4 whose scale_2 multiplies and
 * compressed-tensors' whose global scale divides, INT4 with BF16 / F16 / F32 group scales); rows
 * that leave tails of the one-token groups (8 / 4 / 2 rows at 1-4 tokens) and of the passes' tiles,
 * fewer rows than one group, more than one 128-row unit; K a multiple of 32 but not of 128 (a code
 * line), more than one 1024-column pass, every tile width of the passes (5-8 tokens), and NVFP4 with 16 columns left over (the one-row route); in
 * both compute modes (FP4 / INT4 products stay float32 on unrounded activations in both), on one
 * worker and two, the one-token groups on and off (mm_matvec). And that the one-token groups are
 * what runs at 1-4 tokens: past one pass of columns their sums differ in the last bits from the
 * passes' (one sum over all K against one per 1024 columns), and mm_matvec(false) gives the passes'
 * bits back; NVFP4's per-16 block scales, each at its own code (subnormals too), read for the right
 * block on every tile width. */
#include "check.h"
#include "matmul.h"
#include "matmul_internal.h"

#include <stdint.h>

static unsigned long long rs = 0x2545f4914f6cdd1dull;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}

typedef struct {
    const char *what;
    dt_fp4_enc enc;
    float gscale;
    bool gdiv;
    dt_type sdt;
} Enc;

static const Enc encs[] = {
    {"MXFP4", DT_FP4_MXFP4, 1.f, false, DT_INVALID},
    {"NVFP4 (scale_2 multiplies)", DT_FP4_NVFP4, 0.0078125f * 1.5f, false, DT_INVALID},
    {"NVFP4 (compressed-tensors, global scale divides)", DT_FP4_NVFP4, 384.f, true, DT_INVALID},
    {"INT4 BF16 scales", DT_FP4_INT4, 1.f, false, DT_BF16},
    {"INT4 F16 scales", DT_FP4_INT4, 1.f, false, DT_F16},
    {"INT4 F32 scales", DT_FP4_INT4, 1.f, false, DT_F32},
};

/* A weight (N, K) in encoding e with random codes and finite scales; bytes owned by the caller. */
static dt_fp4 make(const Enc *e, size_t N, size_t K, uint8_t **codes, uint8_t **scale) {
    dt_fp4 q = {.enc = e->enc, .rows = N, .cols = K, .gscale = e->gscale, .gdiv = e->gdiv, .sdt = e->sdt};
    size_t B = dt_fp4_traits(q.enc)->block, ns = N * (K / B), es = q.enc == DT_FP4_INT4 ? dt_size(q.sdt) : 1;
    *codes = malloc(N * K / 2);
    *scale = malloc(ns * es);
    for (size_t i = 0; i < N * K / 2; i++) (*codes)[i] = (uint8_t)rnd32();
    for (size_t i = 0; i < ns; i++) {
        uint8_t *s = *scale + i * es;
        if (q.enc == DT_FP4_MXFP4) *s = (uint8_t)(118 + rnd32() % 12);
        else if (q.enc == DT_FP4_NVFP4) *s = i == 0 ? 0x03 : (uint8_t)(0x08 + rnd32() % 0x60);   /* a subnormal first */
        else {
            float f = (float)(rnd32() % 1000 + 1) * 1e-4f;
            uint16_t h = q.sdt == DT_BF16 ? dt_f32_to_bf16(f) : dt_f32_to_f16(f);
            if (q.sdt == DT_F32) memcpy(s, &f, 4);
            else memcpy(s, &h, 2);
        }
    }
    q.codes = *codes;
    q.scale = *scale;
    return q;
}

/* Largest |y - ref| / (sum_k |x w|) with ref and the sum in double on the decoded values Wd. */
static double err_of(const double *Wd, const float *x, size_t T, size_t N, size_t K, const float *y) {
    double worst = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (size_t k = 0; k < K; k++) {
                s += (double)x[t * K + k] * Wd[n * K + k];
                a += fabs((double)x[t * K + k] * Wd[n * K + k]);
            }
            double v = y[t * N + n], e = fabs(v - s) / (a > 0 ? a : 1);
            worst = isnan(v) ? INFINITY : fmax(worst, e);
        }
    return worst;
}

/* One shape in one encoding: both modes, one and two workers, the one-token groups on and off. */
static void check_shape(const Enc *e, size_t T, size_t N, size_t K) {
    uint8_t *codes, *scale;
    dt_fp4 q = make(e, N, K, &codes, &scale);
    WMat w = {.dt = DT_U8, .data = q.codes, .rows = N, .cols = K, .fp4 = q};
    double *Wd = malloc(N * K * sizeof *Wd);
    float *x = malloc(T * K * sizeof *x), *y = malloc(T * N * sizeof *y);
    dt_fp4_dequant_d(&q, 0, N, 0, K, Wd, K);
    for (size_t i = 0; i < T * K; i++) x[i] = (float)((int)(rnd32() % 20001) - 10000) * 1.37e-4f;
    MmWork *wk[2] = {mm_work_new(1), mm_work_new(2)};
    for (int mv = 1; mv >= 0; mv--) {
        mm_matvec(mv);
        for (int m = 0; m < 2; m++)
            for (int nw = 0; nw < 2; nw++) {
                for (size_t i = 0; i < T * N; i++) y[i] = NAN;
                CHECK_OK(mm_xwt(wk[nw], &w, x, K, T, y, N, m ? MM_BF16 : MM_F32));
                double err = err_of(Wd, x, T, N, K, y);
                CHECK(err < 2e-6, "%s T %zu N %zu K %zu %s mode, %d worker(s), one-token groups %s: error %.3g of sum |x w|",
                      e->what, T, N, K, mm_compute_name(m ? MM_BF16 : MM_F32), nw + 1, mv ? "on" : "off", err);
            }
    }
    mm_matvec(true);
    mm_work_free(wk[0]);
    mm_work_free(wk[1]);
    free(Wd); free(x); free(y); free(codes); free(scale);
}

static void test_shapes(void) {
    static const size_t shapes[][3] = {
        /* 1-4 tokens: the groups' tails (8 / 4 / 2 rows), fewer rows than a group, two 128-row units */
        {1, 1, 32}, {1, 7, 96}, {1, 8, 160}, {1, 17, 2080}, {1, 131, 224}, {2, 5, 64}, {2, 13, 1056},
        {3, 3, 96}, {3, 11, 2080}, {4, 9, 160}, {4, 257, 96}, {1, 300, 64},
        /* the passes (5-63 tokens): every tile width 5-8 (14 = 8 + 6), tile tails, more than one pass */
        {5, 9, 1056}, {7, 14, 96}, {14, 10, 160}, {16, 3, 64}, {63, 13, 2080},
        /* tiles of 8 and their tails past one pass: 8 + 8, 8 + 8 + 1, 8 x 3 + 7, 8 x 4, 8 x 5 + 7 */
        {16, 9, 1056}, {17, 5, 96}, {31, 7, 160}, {32, 3, 64}, {47, 4, 1056},
    };
    for (size_t i = 0; i < sizeof encs / sizeof *encs; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            check_shape(&encs[i], shapes[s][0], shapes[s][1], shapes[s][2]);
    check_shape(&encs[1], 1, 9, 48);        /* NVFP4 with 16 columns past the last 32: the one-row route */
    check_shape(&encs[1], 3, 10, 80);
}

/* At 1-4 tokens the one-token groups run: past one 1024-column pass their sums are not the passes'
 * bits (a float sum over all K against one per pass added), and mm_matvec(false) restores those. */
static void test_groups_run(void) {
    size_t N = 64, K = 4096;
    for (size_t i = 0; i < sizeof encs / sizeof *encs; i += 2)
        for (size_t T = 1; T <= 4; T++) {
            uint8_t *codes, *scale;
            dt_fp4 q = make(&encs[i], N, K, &codes, &scale);
            WMat w = {.dt = DT_U8, .data = q.codes, .rows = N, .cols = K, .fp4 = q};
            float *x = malloc(T * K * sizeof *x), *a = malloc(T * N * sizeof *a), *b = malloc(T * N * sizeof *b),
                  *c = malloc(T * N * sizeof *c);
            for (size_t k = 0; k < T * K; k++) x[k] = (float)((int)(rnd32() % 20001) - 10000) * 1.37e-4f;
            MmWork *wk = mm_work_new(1);
            CHECK_OK(mm_xwt(wk, &w, x, K, T, a, N, MM_F32));
            mm_matvec(false);
            CHECK_OK(mm_xwt(wk, &w, x, K, T, b, N, MM_F32));
            mm_matvec(true);
            CHECK_OK(mm_xwt(wk, &w, x, K, T, c, N, MM_F32));
            size_t differ = 0;
            for (size_t k = 0; k < T * N; k++) differ += a[k] != b[k];
            CHECK(differ > 0 && memcmp(a, c, T * N * sizeof *a) == 0 && vec_rel_err(b, a, T * N) < 1e-6,
                  "%s T %zu: the one-token groups run (%zu of %zu sums differ in their last bits from the passes', %.2g "
                  "apart; the same bits again after mm_matvec(true))", encs[i].what, T, differ, T * N,
                  vec_rel_err(b, a, T * N));
            mm_work_free(wk);
            free(x); free(a); free(b); free(c); free(codes); free(scale);
        }
}

/* Every finite block scale code through the register kernels' scale decoding (E8M0: 16 at a time,
 * the rest one by one; E4M3: the product's table of the 256 codes): row n of a weight of all-ones codes (E2M1 0x2 = 1.0) has both its 16-wide blocks
 * (NVFP4) or its one 32-wide block (MXFP4) at code n; x = e_0, so y[n] is the scale itself, which
 * must be dt_e4m3_to_f32's / dt_e8m0_to_f32's bit for bit (E4M3's subnormals, -0 and 448 included). */
static void test_scale_codes(void) {
    enum { K = 32 };
    for (int nv = 0; nv < 2; nv++) {
        uint8_t codes[256 * K / 2], scale[256 * 2];
        size_t N = 0, nb = nv ? 2 : 1;
        for (int c = 0; c < 256; c++) {
            if (nv ? (c & 0x7f) == 0x7f : c == 0xff) continue;      /* NaN codes: refused by the store */
            for (size_t b = 0; b < nb; b++) scale[N * nb + b] = (uint8_t)c;
            N++;
        }
        memset(codes, 0x22, sizeof codes);
        dt_fp4 q = {.enc = nv ? DT_FP4_NVFP4 : DT_FP4_MXFP4, .rows = N, .cols = K, .codes = codes, .scale = scale,
                    .gscale = 1.f};
        WMat w = {.dt = DT_U8, .data = codes, .rows = N, .cols = K, .fp4 = q};
        float x[K] = {1.f}, y[256];
        MmWork *wk = mm_work_new(1);
        for (size_t T = 1; T <= 5; T += 4) {                       /* the one-token groups, the passes */
            float xs[5 * K] = {0};
            for (size_t t = 0; t < T; t++) memcpy(xs + t * K, x, sizeof x);
            float ys[5 * 256];
            CHECK_OK(mm_xwt(wk, &w, xs, K, T, ys, N, MM_F32));
            memcpy(y, ys + (T - 1) * N, N * sizeof *y);
            size_t bad = 0, first = N;
            for (size_t n = 0; n < N; n++) {
                float want = nv ? dt_e4m3_to_f32(scale[n * nb]) : dt_e8m0_to_f32(scale[n * nb]);
                if (memcmp(&want, &y[n], sizeof want) && !(want == 0 && y[n] == 0)) bad++, first = first < N ? first : n;
            }
            CHECK(bad == 0, "%s: all %zu finite scale codes decoded as the table, T %zu (%zu differ, first code 0x%02x)",
                  nv ? "E4M3" : "E8M0", N, T, bad, first < N ? scale[first * nb] : 0);
        }
        mm_work_free(wk);
    }
}

/* NVFP4's two 16-wide blocks per 32 columns, each row's blocks at their own E4M3 codes (subnormals
 * 0x01-0x07 among them), on the tiles of every width: all codes 0x22 (1.0), token t's x a one at
 * column k_t (even and odd columns, the first and second block of a 32, the 32 columns past the
 * 1024-column pass), so y[t][n] must be row n's scale of block k_t / 16 times scale_2, bit for bit: a
 * tile that read the other block's scale, the previous row's, or a scale of the wrong pass fails. */
static void test_block_scales(void) {
    enum { N = 11, K = 1056, NB = K / 16 };
    static uint8_t codes[N * K / 2], scale[N * NB];
    memset(codes, 0x22, sizeof codes);
    for (size_t i = 0; i < sizeof scale; i++) scale[i] = (uint8_t)(i % 9 == 0 ? 1 + i % 7 : 0x08 + rnd32() % 0x70);
    dt_fp4 q = {.enc = DT_FP4_NVFP4, .rows = N, .cols = K, .codes = codes, .scale = scale, .gscale = 0.25f};
    WMat w = {.dt = DT_U8, .data = codes, .rows = N, .cols = K, .fp4 = q};
    MmWork *wk = mm_work_new(1);
    static const size_t Ts[] = {1, 2, 3, 4, 5, 8, 16, 17, 31, 47};
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
        size_t T = Ts[i], bad = 0, kt[47];
        float *x = calloc(T * K, sizeof *x), *y = malloc(T * N * sizeof *y);
        for (size_t t = 0; t < T; t++) {
            kt[t] = (t * 37 + 3 * i) % K;
            if (t == T - 1) kt[t] = K - 1 - i;          /* the last 32 columns: past the pass of 1024 */
            x[t * K + kt[t]] = 1.f;
        }
        CHECK_OK(mm_xwt(wk, &w, x, K, T, y, N, MM_F32));
        for (size_t t = 0; t < T; t++)
            for (size_t n = 0; n < N; n++) {
                float want = dt_e4m3_to_f32(scale[n * NB + kt[t] / 16]) * 0.25f;
                bad += memcmp(&want, &y[t * N + n], sizeof want) != 0;
            }
        CHECK(bad == 0, "NVFP4 T %zu: each output its row's block scale of its column (%zu of %zu differ)", T, bad, T * N);
        free(x); free(y);
    }
    mm_work_free(wk);
}

int main(void) {
    test_shapes();
    test_scale_codes();
    test_block_scales();
    if (mm_have_bf16()) test_groups_run();      /* the register kernels need AVX-512 */
    else printf("no AVX-512 BF16 here: the register kernels are not compiled in; the portable route only\n");
    return check_done();
}
