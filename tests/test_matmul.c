/* test_matmul.c -- core/linalg/matmul.c's products y = x W^T from stored BF16 / F16 / FP8 / F32 weights
 * against a double-precision reference of the same stored values, in both compute modes, on
 * shapes that hit every tile edge (tokens not a multiple of 4, rows not a multiple of 6, columns
 * not a multiple of 32, more columns than one pass; for bf16 mode's token-lane tiles from 16 tokens
 * on: tokens not a multiple of 16, rows not a multiple of 6 / 8 / 12, odd columns), on one worker and on two, with the AVX-512
 * kernels (register tiles) and with the portable ones forced (mm_simd(false): panels and sgemm),
 * which agree to float rounding; BF16 weights at 1-4 tokens on the one-token kernels and on the tiles
 * before them (mm_matvec(false)), both against the reference; FP8 block scales; wmat_row; the mode names; mm_silu_mul. */
#include "check.h"
#include "matmul.h"
#include "matmul_amx.h"
#include "matmul_internal.h"

#include <stdint.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A weight (N, K) stored in dt (BF16, F16, F32; FP8 with 128 x 128 block scales), its view and
 * its stored values widened (wf, what store_read gives). */
typedef struct {
    WMat w;
    void *data, *scale;
    float *wf;
} TW;

static void tw_make(TW *t, dt_type dt, size_t N, size_t K) {
    memset(t, 0, sizeof *t);
    Mat *m = mat_new(N, K);
    for (size_t i = 0; i < N * K; i++) m->data[i] = rnd() * 0.5f;
    t->wf = malloc(N * K * sizeof(float));
    t->w = (WMat){.dt = dt, .rows = N, .cols = K};
    if (dt == DT_F8_E4M3) {
        size_t sr = dt_fp8_nblocks(N), sc = dt_fp8_nblocks(K);
        uint8_t *q = malloc(N * K);
        float *s = malloc(sr * sc * sizeof(float));
        for (size_t b = 0; b < sr * sc; b++) s[b] = 0.5f / 448.f * (1 + (float)(b % 3));
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < K; j++) q[i * K + j] = dt_f32_to_e4m3(m->data[i * K + j] / s[(i / 128) * sc + j / 128]);
        dt_fp8_dequant(q, K, s, sc, 0, N, 0, K, t->wf, K);
        t->data = q;
        t->scale = s;
        t->w.scale = s;
        t->w.scols = sc;
    } else {
        t->data = malloc(N * K * dt_size(dt));
        dt_from_f32(dt, m->data, N * K, t->data);
        dt_to_f32(dt, t->data, N * K, t->wf);
    }
    t->w.data = t->data;
    mat_free(m);
}

static void tw_free(TW *t) { free(t->data); free(t->scale); free(t->wf); }

/* Largest |y - ref| / (sum_k |x| |w|) over the product: float32 accumulation error relative to the
 * size of the terms. round: x rounded to BF16 in the reference (bf16 mode). */
static double product_err(const TW *t, const float *x, size_t T, const float *y, bool round) {
    size_t N = t->w.rows, K = t->w.cols;
    double worst = 0;
    for (size_t i = 0; i < T; i++)
        for (size_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (size_t k = 0; k < K; k++) {
                double xv = round ? dt_bf16_to_f32(dt_f32_to_bf16(x[i * K + k])) : x[i * K + k];
                s += xv * t->wf[n * K + k];
                a += fabs(xv * t->wf[n * K + k]);
            }
            double e = fabs(y[i * N + n] - s) / (a > 0 ? a : 1);
            if (e > worst || isnan(y[i * N + n])) worst = isnan(y[i * N + n]) ? INFINITY : e;
        }
    return worst;
}

/* Largest |ya - yb| / (sum_k |x| |w|), x rounded to BF16: how far two bf16-mode routes are apart,
 * relative to the size of the terms. */
static double apart_err(const TW *t, const float *x, size_t T, const float *ya, const float *yb) {
    size_t N = t->w.rows, K = t->w.cols;
    double worst = 0;
    for (size_t i = 0; i < T; i++)
        for (size_t n = 0; n < N; n++) {
            double a = 0;
            for (size_t k = 0; k < K; k++) a += fabs(dt_bf16_to_f32(dt_f32_to_bf16(x[i * K + k])) * t->wf[n * K + k]);
            double e = fabs((double)ya[i * N + n] - yb[i * N + n]) / (a > 0 ? a : 1);
            if (e > worst || isnan(e)) worst = isnan(e) ? INFINITY : e;
        }
    return worst;
}

/* bf16 mode from 16 tokens on the AMX tiles (matmul_amx.h) and on the vdpbf16ps token lanes, one and
 * two workers: both within 2e-6 of sum |x| |w| of the double reference, and apart by at most twice
 * the bound each has, 2 gamma_K (both float32 sums of the same exact products). */
static double amx_apart;     /* the largest apart over every shape, printed at the end */
static size_t amx_outputs, amx_differ;

static void check_amx(const TW *t, const float *x, size_t T, MmWork *one, MmWork *two, float *y, float *y0) {
    size_t N = t->w.rows, K = t->w.cols;
    double u = ldexp(1.0, -24), gamma = (double)K * u / (1 - (double)K * u);
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; i < T * N; i++) y[i] = y0[i] = NAN;
        matmul_amx_allow(false);
        CHECK_OK(mm_xwt(w ? two : one, &t->w, x, K, T, y0, N, MM_BF16));
        matmul_amx_allow(true);
        CHECK_OK(mm_xwt(w ? two : one, &t->w, x, K, T, y, N, MM_BF16));
        double e = product_err(t, x, T, y, true), e0 = product_err(t, x, T, y0, true), d = apart_err(t, x, T, y, y0);
        amx_apart = fmax(amx_apart, d);
        amx_outputs += T * N;
        for (size_t i = 0; i < T * N; i++) amx_differ += y[i] != y0[i];
        CHECK(e < 2e-6 && e0 < 2e-6 && d <= 2 * gamma, "BF16 T %zu N %zu K %zu workers %d: AMX %.3g, vdpbf16ps %.3g of sum "
              "|x w|; apart %.3g (bound 2 gamma_K %.3g)", T, N, K, w + 1, e, e0, d, 2 * gamma);
    }
}

/* One shape in one dtype: both modes, one and two workers, kernels on and off. */
static void check_shape(dt_type dt, size_t T, size_t N, size_t K) {
    TW t;
    tw_make(&t, dt, N, K);
    float *x = malloc(T * K * sizeof(float)), *y = malloc(T * N * sizeof(float)), *y0 = malloc(2 * T * N * sizeof(float));
    for (size_t i = 0; i < T * K; i++) x[i] = rnd();
    MmWork *one = mm_work_new(1), *two = mm_work_new(2);
    for (int simd = 1; simd >= 0; simd--) {
        mm_simd(simd);
        for (int mode = 0; mode < 2; mode++)
            for (int w = 0; w < 2; w++) {
                for (size_t i = 0; i < T * N; i++) y[i] = NAN;
                CHECK_OK(mm_xwt(w ? two : one, &t.w, x, K, T, y, N, mode ? MM_BF16 : MM_F32));
                bool rounded = mode == 1 && dt == DT_BF16;
                double e = product_err(&t, x, T, y, rounded);
                CHECK(e < 2e-6, "%s T %zu N %zu K %zu mode %s workers %d simd %d: error %.3g of sum |x w|", dt_name(dt), T,
                      N, K, mm_compute_name(mode), w + 1, simd, e);
                if (mode == 0 && simd) memcpy(y0 + (size_t)w * T * N, y, T * N * sizeof(float));
                if (mode == 0 && !simd)
                    CHECK(vec_rel_err(y0 + (size_t)w * T * N, y, T * N) < 1e-6,
                          "%s T %zu N %zu K %zu: f32 mode with and without AVX-512 (workers %d): %.3g", dt_name(dt), T,
                          N, K, w + 1, vec_rel_err(y0 + (size_t)w * T * N, y, T * N));
            }
    }
    mm_simd(true);
    if (dt == DT_BF16 && T <= 4 && mm_have_bf16())      /* the tiles the one-token kernels replaced */
        for (int mode = 0; mode < 2; mode++) {
            mm_matvec(false);
            CHECK_OK(mm_xwt(two, &t.w, x, K, T, y0, N, mode ? MM_BF16 : MM_F32));
            mm_matvec(true);
            CHECK_OK(mm_xwt(two, &t.w, x, K, T, y, N, mode ? MM_BF16 : MM_F32));
            double e0 = product_err(&t, x, T, y0, mode == 1), e = product_err(&t, x, T, y, mode == 1);
            CHECK(e < 2e-6 && e0 < 2e-6 && vec_rel_err(y0, y, T * N) < 1e-6,
                  "BF16 T %zu N %zu K %zu %s mode: one-token kernels %.3g, tiles %.3g of sum |x w|; apart %.3g", T, N, K,
                  mm_compute_name(mode), e, e0, vec_rel_err(y0, y, T * N));
        }
    if (dt == DT_BF16 && T >= 16 && matmul_amx_ok()) check_amx(&t, x, T, one, two, y, y0);
    if (dt == DT_BF16 && T >= 16 && mm_have_bf16()) {     /* the 4 x 6 dot tiles at the same T, for comparison */
        mm_token_lanes(false);
        CHECK_OK(mm_xwt(one, &t.w, x, K, T, y, N, MM_BF16));
        mm_token_lanes(true);
        double e = product_err(&t, x, T, y, true);
        CHECK(e < 2e-6, "BF16 T %zu N %zu K %zu bf16 mode on the dot tiles: error %.3g of sum |x w|", T, N, K, e);
    }
    mm_work_free(one);
    mm_work_free(two);
    free(x); free(y); free(y0);
    tw_free(&t);
}

static void test_shapes(void) {
    static const size_t shapes[][3] = {
        {1, 1, 1}, {1, 7, 33}, {4, 6, 32}, {3, 5, 31}, {5, 13, 64}, {9, 100, 200}, {37, 300, 300},
        {1, 300, 2500}, {6, 20, 4200}, {17, 260, 130},
        /* bf16 mode's token-lane tiles (16 tokens on): 1-4 vectors with missing tokens, row tails of
         * 6 / 8 / 12-row tiles, odd K, more than one 64-token block and one 96-row unit, K in two and
         * three passes of 2048 columns */
        {16, 12, 64}, {33, 25, 65}, {47, 17, 31}, {64, 97, 96}, {130, 200, 257}, {70, 13, 2049}, {40, 30, 4101},
        /* the AMX tiles (matmul_amx.c): tokens past one 512-token superblock, an odd count of 16-token
         * blocks, rows past 64-row units and not a multiple of 16 (a unit of 2 rows), K past 256-column
         * chunks with 1 / 31 / 4 columns in the last step (odd K), and every dimension whole */
        {530, 20, 100}, {48, 130, 1057}, {100, 77, 543}, {32, 64, 512},
        /* the one-token kernels (1-4 tokens): row tails of their 8 / 6 / 4 / 3-row groups, K below,
         * at and past 32 and not a multiple of it, more than one 128-row unit */
        {2, 17, 1}, {3, 9, 47}, {4, 23, 2049}, {2, 131, 96}, {1, 257, 4097}, {4, 300, 64}, {3, 7, 32}, {1, 15, 95},
    };
    dt_type dts[] = {DT_BF16, DT_F16, DT_F8_E4M3, DT_F32};
    for (size_t d = 0; d < 4; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) check_shape(dts[d], shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* bf16 mode really rounds the activations (it differs from f32 mode on values BF16 cannot hold),
 * and its results on vdpbf16ps and on the portable route agree to float rounding. */
static void test_bf16_rounds(void) {
    TW t;
    tw_make(&t, DT_BF16, 12, 96);
    float x[2 * 96], a[24], b[24], c[24];
    for (size_t i = 0; i < 2 * 96; i++) x[i] = 1.f + rnd() * 1e-3f;
    MmWork *wk = mm_work_new(1);
    CHECK_OK(mm_xwt(wk, &t.w, x, 96, 2, a, 12, MM_F32));
    CHECK_OK(mm_xwt(wk, &t.w, x, 96, 2, b, 12, MM_BF16));
    bool kern = mm_simd(false);
    CHECK_OK(mm_xwt(wk, &t.w, x, 96, 2, c, 12, MM_BF16));
    mm_simd(true);
    CHECK(memcmp(a, b, sizeof a) != 0, "bf16 mode rounds activations (it differs from f32 mode)");
    CHECK(vec_rel_err(c, b, 24) < 1e-6, "vdpbf16ps (%s here) and the portable route agree: %.3g", kern ? "off" : "absent",
          vec_rel_err(c, b, 24));
    mm_work_free(wk);
    tw_free(&t);
}

/* mm_silu_mul and mm_exp_sum against silu * b and exp in double: relative error at float rounding over [-90, 90], and the
 * limits (large negative gates give -0, large positive the gate, NaN stays NaN). */
static void test_silu_mul(void) {
    enum { N = 4099 };
    static float a[N], b[N], a0[N];
    for (size_t i = 0; i < N; i++) {
        a0[i] = a[i] = (float)(-90.0 + 180.0 * (double)i / (N - 1)) + rnd() * 0.01f;
        b[i] = 1.f + rnd() * 0.5f;
    }
    a0[7] = a[7] = -1e4f;
    a0[8] = a[8] = 1e4f;
    a0[9] = a[9] = NAN;
    a0[6] = a[6] = INFINITY;
    mm_silu_mul(a, b, N);
    double worst = 0;
    for (size_t i = 10; i < N; i++) {
        double g = a0[i], ref = g / (1 + exp(-g)) * b[i];
        double e = fabs(a[i] - ref) / (fabs(ref) > 1e-30 ? fabs(ref) : 1e-30);
        if (e > worst || isnan(a[i])) worst = isnan(a[i]) ? INFINITY : e;
    }
    CHECK(worst < 1e-6, "mm_silu_mul: relative error %.3g of silu(a) * b", worst);
    CHECK(a[7] == 0.f && a[8] == 1e4f * b[8] && isnan(a[9]) && a[6] == INFINITY, "mm_silu_mul limits: %g %g %g %g", a[7],
          a[8], a[9], a[6]);
    float s[40], r[40];                                /* mm_exp_sum: the softmax's exponentials */
    double sum = 0;
    for (size_t i = 0; i < 40; i++) r[i] = s[i] = rnd() * 30.f;
    double got = mm_exp_sum(s, 40, 3.f);
    worst = 0;
    for (size_t i = 0; i < 40; i++) {
        double e = exp((double)(r[i] - 3.f));         /* the argument as float computes it */
        sum += e;
        worst = fmax(worst, fabs(s[i] - e) / e);
    }
    CHECK(worst < 1e-6 && fabs(got - sum) / sum < 1e-6, "mm_exp_sum: element error %.3g, sum %.9g vs %.9g", worst, got, sum);
}

static void test_rows_and_names(void) {
    dt_type dts[] = {DT_BF16, DT_F16, DT_F8_E4M3, DT_F32};
    for (size_t d = 0; d < 4; d++) {
        TW t;
        tw_make(&t, dts[d], 200, 150);
        float r[150];
        for (size_t i = 0; i < 200; i += 67) {
            wmat_row(&t.w, i, r);
            CHECK(memcmp(r, t.wf + i * 150, sizeof r) == 0, "wmat_row %s row %zu", dt_name(dts[d]), i);
        }
        CHECK(wmat_bytes(&t.w) == 200 * 150 * dt_size(dts[d]), "wmat_bytes %s", dt_name(dts[d]));
        tw_free(&t);
    }
    CHECK(mm_compute_parse("bf16") == MM_BF16 && mm_compute_parse("f32") == MM_F32 && mm_compute_parse(NULL) == MM_F32,
          "mode names");
    CHECK(!strcmp(mm_compute_name(MM_BF16), "bf16") && !strncmp(mm_compute_describe(MM_BF16), "bf16 (activations", 17),
          "mode descriptions: %s", mm_compute_describe(MM_BF16));
    printf("vdpbf16ps on this CPU: %s; AMX tiles: %s\n", mm_have_bf16() ? "yes" : "no (portable route only)",
           matmul_amx_ok() ? "yes" : "no (the vdpbf16ps token lanes from 16 tokens on)");
    if (amx_outputs)
        printf("AMX tiles against the vdpbf16ps token lanes: %zu of %zu outputs differ, at most %.3g of sum |x w|\n",
               amx_differ, amx_outputs, amx_apart);
}

int main(void) {
    test_shapes();
    test_bf16_rounds();
    test_silu_mul();
    test_rows_and_names();
    return check_done();
}
