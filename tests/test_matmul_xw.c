/* test_matmul_xw.c -- core/linalg/matmul.c's x @ W for (in, out) weights stored F32 / BF16 / F16 (gpt-oss's,
 * Qwen3-VL-MoE's and Llama 4's fused experts; Conv1D), read in place (mm_xw), on odd shapes (rows and columns not
 * multiples of 16 / 32 / a tile's 96 / 384 columns, more rows than one 256-row pass, a single row or column), T = 1..9
 * and 17, strided x and y, one worker and two:
 *   1. on AVX-512 every output equals the scalar loop acc = fmaf(x[t][k], W[k][j], acc) over k in order, bit for bit,
 *      and so does not depend on T (a token's row of a 9-token product is its 1-token product's);
 *   2. every route -- the in-place kernels, the portable panels (mm_simd(false)) and the route before them, the weight
 *      widened whole and one sgemm (mm_xw_in_place(false)) -- is within float32 summation's bound of a double sum of
 *      the same products: |y - sum| <= 2 K u sum |x W| (u = 2^-24);
 *   3. a BF16 weight and an F32 copy of its values give the same bits on each route (gpt-oss's BF16 experts against
 *      their F32 twin, tests/test_oss_bf16_experts.c);
 *   4. y's padding past its columns (ldy > N) is not written; another dtype is refused with the dtype named. */
#include "check.h"
#include "matmul.h"
#include "matmul_internal.h"

#include <stdint.h>

static uint64_t rng = 0x243f6a8885a308d3ull;
static float rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A weight (K, N) of random values stored in dt, and those values widened (wf). */
typedef struct {
    WMat w;
    void *data;
    float *wf;
} XW;

static void xw_make(XW *t, dt_type dt, size_t K, size_t N) {
    size_t n = K * N > 0 ? K * N : 1;
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < K * N; i++) v[i] = rnd() * 0.7f;
    t->data = malloc(n * dt_size(dt));
    t->wf = malloc(n * sizeof *t->wf);
    dt_from_f32(dt, v, K * N, t->data);
    dt_to_f32(dt, t->data, K * N, t->wf);
    t->w = (WMat){.dt = dt, .data = t->data, .rows = K, .cols = N};
    free(v);
}

static void xw_free(XW *t) { free(t->data); free(t->wf); }

static bool have_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

#define LDX_PAD 3
#define LDY_PAD 5
#define SENTINEL -12345.f

/* y (T, N; stride N + LDY_PAD, the padding SENTINEL) = x @ W on wk; false when mm_xw failed. */
static bool product(MmWork *wk, const WMat *W, const float *x, size_t T, float *y) {
    size_t ldy = W->cols + LDY_PAD;
    for (size_t i = 0; i < T * ldy; i++) y[i] = SENTINEL;
    return mm_xw(wk, W, x, W->rows + LDX_PAD, T, y, ldy) == AL_OK;
}

/* Outputs of y (from product) that differ in bits from the scalar FMA chain over k in order. */
static size_t fma_chain_diffs(const XW *t, const float *x, size_t T, const float *y) {
    size_t K = t->w.rows, N = t->w.cols, diffs = 0;
    for (size_t i = 0; i < T; i++)
        for (size_t j = 0; j < N; j++) {
            float acc = 0.f;
            for (size_t k = 0; k < K; k++) acc = fmaf(x[i * (K + LDX_PAD) + k], t->wf[k * N + j], acc);
            diffs += memcmp(&acc, &y[i * (N + LDY_PAD) + j], sizeof acc) != 0;
        }
    return diffs;
}

/* Largest |y - sum| / (2 K u sum |x W|) over y (<= 1: within float32 summation's bound), and whether the padding of
 * y was left alone. */
static double bound_ratio(const XW *t, const float *x, size_t T, const float *y, bool *pad_ok) {
    size_t K = t->w.rows, N = t->w.cols;
    double worst = 0;
    *pad_ok = true;
    for (size_t i = 0; i < T; i++) {
        for (size_t j = 0; j < N; j++) {
            double s = 0, a = 0;
            for (size_t k = 0; k < K; k++) {
                double p = (double)x[i * (K + LDX_PAD) + k] * t->wf[k * N + j];
                s += p;
                a += fabs(p);
            }
            double e = fabs(y[i * (N + LDY_PAD) + j] - s), b = 2.0 * (double)K * ldexp(1.0, -24) * a + 1e-30;
            worst = e / b > worst ? e / b : worst;
        }
        for (size_t j = N; j < N + LDY_PAD; j++) *pad_ok &= y[i * (N + LDY_PAD) + j] == SENTINEL;
    }
    return worst;
}

enum { ROUTE_TILES, ROUTE_PANELS, ROUTE_WIDENED, ROUTES };
static const char *route_name[ROUTES] = {"in place", "panels", "widened whole"};

static void set_route(int r) {
    mm_simd(r != ROUTE_PANELS);
    mm_xw_in_place(r != ROUTE_WIDENED);
}

/* 1, 2 and 4 for one weight shape and dtype at T tokens on wk. */
static void check_shape(MmWork *wk, dt_type dt, size_t K, size_t N, size_t T, bool avx512) {
    XW t;
    xw_make(&t, dt, K, N);
    float *x = malloc(T * (K + LDX_PAD) * sizeof *x), *y = malloc(T * (N + LDY_PAD) * sizeof *y);
    for (size_t i = 0; i < T * (K + LDX_PAD); i++) x[i] = rnd();
    for (int r = 0; r < ROUTES; r++) {
        set_route(r);
        bool ok = product(wk, &t.w, x, T, y), pad_ok = false;
        CHECK(ok, "%s %zu x %zu, T %zu, %s: %s", dt_name(dt), K, N, T, route_name[r], al_errmsg());
        if (!ok) continue;
        double q = bound_ratio(&t, x, T, y, &pad_ok);
        CHECK(q <= 1.0 && pad_ok, "%s %zu x %zu, T %zu, %d workers, %s: error %.3g of the bound, padding %s", dt_name(dt),
              K, N, T, mm_work_threads(wk), route_name[r], q, pad_ok ? "kept" : "WRITTEN");
        if (r == ROUTE_TILES && avx512) {
            size_t d = fma_chain_diffs(&t, x, T, y);
            CHECK(d == 0, "%s %zu x %zu, T %zu, %d workers: %zu of %zu outputs differ from the FMA chain in row order",
                  dt_name(dt), K, N, T, mm_work_threads(wk), d, T * N);
        }
    }
    set_route(ROUTE_TILES);
    free(x);
    free(y);
    xw_free(&t);
}

/* 3. A BF16 weight against an F32 copy of its values, on every route: the same bits. */
static void check_twin(MmWork *wk, size_t K, size_t N, size_t T) {
    XW b;
    xw_make(&b, DT_BF16, K, N);
    WMat f = {.dt = DT_F32, .data = b.wf, .rows = K, .cols = N};
    float *x = malloc(T * (K + LDX_PAD) * sizeof *x), *yb = malloc(T * (N + LDY_PAD) * sizeof *yb),
          *yf = malloc(T * (N + LDY_PAD) * sizeof *yf);
    for (size_t i = 0; i < T * (K + LDX_PAD); i++) x[i] = rnd();
    for (int r = 0; r < ROUTES; r++) {
        set_route(r);
        bool ok = product(wk, &b.w, x, T, yb) && product(wk, &f, x, T, yf);
        CHECK(ok && memcmp(yb, yf, T * (N + LDY_PAD) * sizeof *yb) == 0,
              "%zu x %zu, T %zu, %s: BF16 and its F32 twin give different bits", K, N, T, route_name[r]);
    }
    set_route(ROUTE_TILES);
    free(x); free(yb); free(yf);
    xw_free(&b);
}

/* 1. On AVX-512 a token's outputs do not depend on the tokens beside it: row i of a 9-token product (passes of
 * 256 rows) is the 1-token product of x's row i (decoding's tiles). */
static void check_batch(MmWork *wk, dt_type dt) {
    const size_t K = 700, N = 389, T = 9;
    XW t;
    xw_make(&t, dt, K, N);
    float *x = malloc(T * (K + LDX_PAD) * sizeof *x), *y = malloc(T * (N + LDY_PAD) * sizeof *y),
          *y1 = malloc((N + LDY_PAD) * sizeof *y1);
    for (size_t i = 0; i < T * (K + LDX_PAD); i++) x[i] = rnd();
    CHECK(product(wk, &t.w, x, T, y), "%s", al_errmsg());
    size_t differ = 0;
    for (size_t i = 0; i < T; i++) {
        CHECK(product(wk, &t.w, x + i * (K + LDX_PAD), 1, y1), "%s", al_errmsg());
        differ += memcmp(y1, y + i * (N + LDY_PAD), N * sizeof *y1) != 0;
    }
    CHECK(differ == 0, "%s: %zu of %zu tokens' outputs differ between a 9-token product and one token at a time",
          dt_name(dt), differ, T);
    free(x); free(y); free(y1);
    xw_free(&t);
}

int main(void) {
    static const size_t shapes[][2] = {{1, 1}, {1, 40}, {37, 1}, {37, 45}, {64, 31}, {100, 389}, {257, 97}, {300, 33},
                                       {513, 385}, {96, 1100}};
    static const size_t Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 17};
    static const dt_type dts[] = {DT_F32, DT_BF16, DT_F16};
    bool avx512 = have_avx512();
    printf("AVX-512: %s (bit-for-bit checks against the FMA chain %s)\n", avx512 ? "yes" : "no", avx512 ? "on" : "off");
    for (int nw = 1; nw <= 2; nw++) {
        MmWork *wk = mm_work_new(nw);
        CHECK(wk != NULL, "mm_work_new: %s", al_errmsg());
        if (!wk) continue;
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++)
                    if (shapes[s][0] * shapes[s][1] * Ts[i] <= 4000000) check_shape(wk, dts[d], shapes[s][0], shapes[s][1], Ts[i], avx512);
        check_twin(wk, 513, 385, 1);
        check_twin(wk, 513, 385, 9);
        check_twin(wk, 96, 1100, 3);
        if (avx512)
            for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) check_batch(wk, dts[d]);
        mm_work_free(wk);
    }
    /* a product large enough for the pool's workers (> 2^18 multiply-adds at one token) */
    MmWork *wk = mm_work_new(2);
    if (wk) {
        check_shape(wk, DT_BF16, 700, 1500, 1, avx512);
        check_shape(wk, DT_F16, 700, 1500, 4, avx512);
        check_shape(wk, DT_BF16, 700, 1500, 33, avx512);
    }
    /* 4. another dtype: refused, named */
    uint8_t q[64] = {0};
    WMat fp8 = {.dt = DT_F8_E4M3, .data = q, .rows = 8, .cols = 8};
    float x[8] = {0}, y[8];
    CHECK_ERR(wk ? mm_xw(wk, &fp8, x, 8, 1, y, 8) : AL_ERR, "F8_E4M3");
    mm_work_free(wk);
    return check_done();
}
