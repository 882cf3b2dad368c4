/* test_dtype.c -- dtype names and sizes, and the scalar and bulk conversions of core/base/tensor.c:
 * exhaustive round trips of every F16 / BF16 / F8_E4M3 bit pattern, hand-computed
 * round-to-nearest-even ties (normal and subnormal), overflow (F16 -> Inf, E4M3 saturates at
 * 448), NaN patterns, signed zeros; bulk dt_to_f32 / dt_from_f32 agree with the scalars;
 * the FP8 row decoders (AVX2 and table, float and double) agree with the scalar product; Mat <-> MatD;
 * al_reserve, the growing-array helper the tensor tables use. */
#include "tensor_internal.h"
#include "check.h"
#include "tensor.h"

#include <stdint.h>

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---------------------------------------------------------------- names and sizes */

static void test_names(void) {
    static const struct { dt_type t; const char *name; size_t size; bool fl; } tab[] = {
        {DT_F32, "F32", 4, true},   {DT_F16, "F16", 2, true},     {DT_BF16, "BF16", 2, true},
        {DT_F8_E4M3, "F8_E4M3", 1, true}, {DT_F8_E5M2, "F8_E5M2", 1, true}, {DT_F64, "F64", 8, true},
        {DT_I8, "I8", 1, false},    {DT_U8, "U8", 1, false},      {DT_I16, "I16", 2, false},
        {DT_I32, "I32", 4, false},  {DT_I64, "I64", 8, false},    {DT_BOOL, "BOOL", 1, false},
    };
    for (size_t i = 0; i < sizeof tab / sizeof *tab; i++) {
        CHECK(strcmp(dt_name(tab[i].t), tab[i].name) == 0, "dt_name(%d) = %s", tab[i].t, dt_name(tab[i].t));
        CHECK(dt_parse(tab[i].name) == tab[i].t, "dt_parse(%s)", tab[i].name);
        CHECK(dt_size(tab[i].t) == tab[i].size, "dt_size(%s)", tab[i].name);
        CHECK(dt_is_float(tab[i].t) == tab[i].fl, "dt_is_float(%s)", tab[i].name);
    }
    CHECK(dt_parse("f32") == DT_INVALID, "dtype names are case-sensitive");
    CHECK(dt_parse("F8_E4M3FN") == DT_INVALID && dt_parse("") == DT_INVALID, "unknown names");
    /* torch's spellings, the one parser behind kv-cache's dtype rule and lint's torch_dtype check */
    CHECK(dt_parse_torch("bfloat16") == DT_BF16 && dt_parse_torch("float16") == DT_F16 && dt_parse_torch("half") == DT_F16,
          "torch 16-bit names");
    CHECK(dt_parse_torch("float32") == DT_F32 && dt_parse_torch("float") == DT_F32 && dt_parse_torch("float64") == DT_F64,
          "torch 32/64-bit names");
    CHECK(dt_parse_torch("auto") == DT_INVALID && dt_parse_torch("BF16") == DT_INVALID && dt_parse_torch("") == DT_INVALID,
          "not torch dtype names");
    CHECK(dt_size(DT_INVALID) == 0 && !dt_is_float(DT_INVALID) && strcmp(dt_name(DT_INVALID), "?") == 0, "DT_INVALID");
    CHECK(dt_size(DT_COUNT) == 0, "DT_COUNT has no size");
}

/* ---------------------------------------------------------------- F16 */

static void test_f16(void) {
    /* every non-NaN pattern survives f16 -> f32 -> f16 bit-exactly; NaNs stay NaN */
    size_t bad = 0, nan_bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = dt_f16_to_f32((uint16_t)h);
        bool is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        if (is_nan) nan_bad += !isnan(f) || !isnan(dt_f16_to_f32(dt_f32_to_f16(f)));
        else bad += dt_f32_to_f16(f) != h;
    }
    CHECK(bad == 0, "%zu F16 patterns do not round-trip", bad);
    CHECK(nan_bad == 0, "%zu F16 NaN patterns lost", nan_bad);
    /* decoded values, by hand */
    CHECK(dt_f16_to_f32(0x3c00) == 1.0f && dt_f16_to_f32(0xc000) == -2.0f, "1, -2");
    CHECK(dt_f16_to_f32(0x7bff) == 65504.0f, "max finite");
    CHECK(dt_f16_to_f32(0x0001) == ldexpf(1, -24), "smallest subnormal 2^-24");
    CHECK(dt_f16_to_f32(0x03ff) == 1023 * ldexpf(1, -24), "largest subnormal");
    CHECK(dt_f16_to_f32(0x0400) == ldexpf(1, -14), "smallest normal");
    CHECK(isinf(dt_f16_to_f32(0x7c00)) && dt_f16_to_f32(0xfc00) < 0, "+-Inf");
    CHECK(f2u(dt_f16_to_f32(0x8000)) == 0x80000000u, "-0 keeps its sign");
    /* round to nearest even on ties (hand-computed) */
    CHECK(dt_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00, "1 + half ulp -> 1 (even)");
    CHECK(dt_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02, "1 + 1.5 ulp -> 1 + 2 ulp (even)");
    CHECK(dt_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)) == 0x3c01, "just above the tie rounds up");
    CHECK(dt_f32_to_f16(-(1.0f + ldexpf(1, -11))) == 0xbc00, "negative tie");
    CHECK(dt_f32_to_f16(ldexpf(1, -25)) == 0x0000, "half the smallest subnormal -> 0 (even)");
    CHECK(dt_f32_to_f16(3 * ldexpf(1, -25)) == 0x0002, "1.5 subnormal quanta -> 2");
    CHECK(dt_f32_to_f16(1023.5f * ldexpf(1, -24)) == 0x0400, "largest subnormal + half -> smallest normal");
    CHECK(dt_f32_to_f16(2047.5f) == 0x6800, "2047.5 -> 2048 (mantissa carries into the exponent)");
    /* overflow */
    CHECK(dt_f32_to_f16(65519.0f) == 0x7bff, "65519 -> 65504");
    CHECK(dt_f32_to_f16(65520.0f) == 0x7c00, "65520 (tie past max) -> Inf");
    CHECK(dt_f32_to_f16(-1e10f) == 0xfc00 && dt_f32_to_f16(INFINITY) == 0x7c00, "overflow -> Inf");
    CHECK(dt_f32_to_f16(1e-10f) == 0 && dt_f32_to_f16(-1e-10f) == 0x8000, "underflow -> signed 0");
    uint16_t n = dt_f32_to_f16(NAN);
    CHECK(((n >> 10) & 0x1f) == 0x1f && (n & 0x3ff), "NaN -> F16 NaN (0x%04x)", n);
}

/* ---------------------------------------------------------------- BF16 */

static void test_bf16(void) {
    size_t bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = dt_bf16_to_f32((uint16_t)b);
        bad += f2u(f) != b << 16;                   /* widening is a shift */
        bool is_nan = ((b >> 7) & 0xff) == 0xff && (b & 0x7f);
        if (is_nan) bad += !isnan(dt_bf16_to_f32(dt_f32_to_bf16(f)));
        else bad += dt_f32_to_bf16(f) != b;
    }
    CHECK(bad == 0, "%zu BF16 patterns do not round-trip", bad);
    CHECK(dt_f32_to_bf16(u2f(0x3f808000u)) == 0x3f80, "1 + half ulp -> 1 (even)");
    CHECK(dt_f32_to_bf16(u2f(0x3f818000u)) == 0x3f82, "1 + 1.5 ulp -> 1 + 2 ulp (even)");
    CHECK(dt_f32_to_bf16(u2f(0x3f808001u)) == 0x3f81, "just above the tie rounds up");
    CHECK(dt_f32_to_bf16(u2f(0x3f807fffu)) == 0x3f80, "just below the tie rounds down");
    CHECK(dt_f32_to_bf16(u2f(0xbf818000u)) == 0xbf82, "negative tie");
    CHECK(dt_f32_to_bf16(u2f(0x00008000u)) == 0x0000, "subnormal tie -> 0 (even)");
    CHECK(dt_f32_to_bf16(u2f(0x00018000u)) == 0x0002, "subnormal 1.5 quanta -> 2");
    CHECK(dt_f32_to_bf16(u2f(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to Inf");
    CHECK(dt_f32_to_bf16(u2f(0x7f7f7fffu)) == 0x7f7f, "below the last tie stays finite");
    CHECK(dt_f32_to_bf16(INFINITY) == 0x7f80 && dt_f32_to_bf16(-INFINITY) == 0xff80, "+-Inf");
    /* NaNs whose payload lives only in the low 16 bits must not turn into Inf */
    uint16_t s = dt_f32_to_bf16(u2f(0x7f800001u)), q = dt_f32_to_bf16(u2f(0xffc00000u));
    CHECK(isnan(dt_bf16_to_f32(s)), "signalling NaN 0x7f800001 -> 0x%04x, not NaN", s);
    CHECK(isnan(dt_bf16_to_f32(q)) && (q & 0x8000), "negative quiet NaN -> 0x%04x", q);
    CHECK(dt_f32_to_bf16(-0.0f) == 0x8000, "-0");
}

/* ---------------------------------------------------------------- F8 */

static void test_e4m3(void) {
    size_t bad = 0;
    for (uint32_t v = 0; v < 256; v++) {
        float f = dt_e4m3_to_f32((uint8_t)v);
        if ((v & 0x7f) == 0x7f) bad += !isnan(f);
        else bad += dt_f32_to_e4m3(f) != v;
    }
    CHECK(bad == 0, "%zu E4M3 patterns do not round-trip", bad);
    /* decoded values, by hand: bias 7, 3 mantissa bits, no Inf, NaN = S.1111.111 */
    CHECK(dt_e4m3_to_f32(0x38) == 1.0f && dt_e4m3_to_f32(0xb8) == -1.0f, "+-1");
    CHECK(dt_e4m3_to_f32(0x39) == 1.125f && dt_e4m3_to_f32(0x40) == 2.0f, "1.125, 2");
    CHECK(dt_e4m3_to_f32(0x7e) == 448.0f && dt_e4m3_to_f32(0xfe) == -448.0f, "+-448 is the largest");
    CHECK(dt_e4m3_to_f32(0x78) == 256.0f, "0x78 = 256 (exponent 15 is finite in E4M3fn)");
    CHECK(dt_e4m3_to_f32(0x01) == ldexpf(1, -9), "smallest subnormal 2^-9");
    CHECK(dt_e4m3_to_f32(0x07) == 7 * ldexpf(1, -9), "largest subnormal");
    CHECK(dt_e4m3_to_f32(0x08) == ldexpf(1, -6), "smallest normal 2^-6");
    CHECK(isnan(dt_e4m3_to_f32(0x7f)) && isnan(dt_e4m3_to_f32(0xff)), "both NaN patterns");
    CHECK(f2u(dt_e4m3_to_f32(0x80)) == 0x80000000u, "-0");
    /* ties to even */
    CHECK(dt_f32_to_e4m3(1.0625f) == 0x38, "1 + half ulp -> 1 (even)");
    CHECK(dt_f32_to_e4m3(1.1875f) == 0x3a, "1.125 + half ulp -> 1.25 (even)");
    CHECK(dt_f32_to_e4m3(-1.1875f) == 0xba, "negative tie");
    CHECK(dt_f32_to_e4m3(ldexpf(1, -10)) == 0x00, "half the smallest subnormal -> 0");
    CHECK(dt_f32_to_e4m3(3 * ldexpf(1, -10)) == 0x02, "1.5 subnormal quanta -> 2");
    CHECK(dt_f32_to_e4m3(7.5f * ldexpf(1, -9)) == 0x08, "largest subnormal + half -> smallest normal");
    CHECK(dt_f32_to_e4m3(15.5f) == 0x58, "15.5 -> 16 (carry into the exponent)");
    CHECK(dt_f32_to_e4m3(432.0f) == 0x7e, "432 (tie 416/448) -> 448 (even)");
    CHECK(dt_f32_to_e4m3(424.0f) == 0x7d, "424 -> 416");
    /* saturation at 448 and NaN */
    CHECK(dt_f32_to_e4m3(448.0f) == 0x7e && dt_f32_to_e4m3(449.0f) == 0x7e, "448, 449 -> 448");
    CHECK(dt_f32_to_e4m3(464.0f) == 0x7e && dt_f32_to_e4m3(1e30f) == 0x7e, "past 448 saturates, never NaN");
    CHECK(dt_f32_to_e4m3(-500.0f) == 0xfe && dt_f32_to_e4m3(-INFINITY) == 0xfe, "-Inf -> -448");
    CHECK(dt_f32_to_e4m3(INFINITY) == 0x7e, "+Inf -> 448");
    CHECK((dt_f32_to_e4m3(NAN) & 0x7f) == 0x7f, "NaN -> NaN pattern");
    CHECK(dt_f32_to_e4m3(-0.0f) == 0x80 && dt_f32_to_e4m3(1e-10f) == 0x00, "-0, underflow");
    /* E5M2 decodes (read only): bias 15, 2 mantissa bits, with Inf and NaN */
    CHECK(dt_e5m2_to_f32(0x3c) == 1.0f && dt_e5m2_to_f32(0x7b) == 57344.0f, "E5M2 1 and max");
    CHECK(isinf(dt_e5m2_to_f32(0x7c)) && isnan(dt_e5m2_to_f32(0x7d)), "E5M2 Inf, NaN");
    CHECK(dt_e5m2_to_f32(0x01) == ldexpf(1, -16), "E5M2 smallest subnormal");
}

/* The FP8 row decoders, float and double, AVX2 (where the CPU has it) and table: every code times
 * odd scales -- subnormal, negative, and one so large that 256 s overflows (the AVX2 decoder's
 * exact rescaling does not hold there, so it must take the table) -- bit for bit as the scalar
 * product dt_e4m3_to_f32(c) * s in float, NaN codes NaN, over a length that is no multiple of 8. */
static void test_e4m3_rows(void) {
    enum { N = 256 + 13 };
    uint8_t src[N];
    for (int i = 0; i < N; i++) src[i] = (uint8_t)(i * 37 + 11);
    const float scales[] = {1.0f, 0.0078125f, 3.1415927f, -2.5f, 448.0f, 1e-40f, 3e37f, -3e38f};
    for (int simd = 1; simd >= 0; simd--) {
        bool on = dt_e4m3_simd(simd);
        if (simd && !on) { printf("note: no AVX2 + F16C here; the table decoder only\n"); continue; }
        for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
            float f[N], s = scales[k];
            double d[N];
            dt_e4m3_row(src, N, s, f);
            dt_e4m3_row_d(src, N, s, d);
            size_t bad = 0;
            for (int i = 0; i < N; i++) {
                float want = dt_e4m3_to_f32(src[i]) * s;
                double wd = want;
                if (isnan(want)) bad += !isnan(f[i]) || !isnan(d[i]);
                else bad += f2u(f[i]) != f2u(want) || memcmp(&d[i], &wd, sizeof wd) != 0;
            }
            CHECK(bad == 0, "%s decoder, scale %g: %zu of %d values differ from the scalar product",
                  simd ? "AVX2" : "table", (double)s, bad, N);
        }
    }
    dt_e4m3_simd(true);
}

/* ---------------------------------------------------------------- bulk */

/* Mat <-> MatD: widening is exact, narrowing rounds to nearest float; shapes carry over; an empty
 * matrix converts to an empty one. */
static void test_matd(void) {
    Mat *m = mat_new(2, 3);
    for (int i = 0; i < 6; i++) m->data[i] = ldexpf(1.0f + (float)i / 8, i - 3) * (i % 2 ? -1 : 1);
    m->data[5] = 3.0e38f;
    MatD *d = matd_from_mat(m);
    CHECK(d && d->rows == 2 && d->cols == 3, "MatD shape");
    size_t bad = 0;
    for (int i = 0; d && i < 6; i++) bad += d->data[i] != (double)m->data[i];
    CHECK(bad == 0, "widening changed %zu values", bad);
    if (d) {
        d->data[0] = 1.0 + ldexp(1, -24);           /* halfway between 1 and the next float: to even */
        d->data[1] = 1.0 + 3 * ldexp(1, -24);       /* halfway above 1 + 2^-23: to 1 + 2^-22 */
        d->data[2] = 0.1;
    }
    Mat *back = d ? mat_from_matd(d) : NULL;
    CHECK(back && back->rows == 2 && back->cols == 3, "Mat shape");
    if (back) {
        CHECK(back->data[0] == 1.0f && back->data[1] == 1.0f + ldexpf(1, -22) && back->data[2] == 0.1f,
              "narrowing rounds to nearest even: %.9g %.9g %.9g", (double)back->data[0], (double)back->data[1],
              (double)back->data[2]);
        CHECK(back->data[5] == 3.0e38f && back->data[3] == m->data[3], "untouched values come back exactly");
    }
    MatD *e = matd_new(0, 4);
    Mat *ef = e ? mat_from_matd(e) : NULL;
    CHECK(e && ef && ef->rows == 0 && ef->cols == 4, "an empty matrix converts");
    mat_free(m); matd_free(d); mat_free(back); matd_free(e); mat_free(ef);
}

/* al_reserve: 16 slots at first, doubling until need fits, contents kept, nothing done when it
 * fits, an overflowing size refused with the array and its capacity untouched. */
static void test_reserve(void) {
    int *a = NULL;
    size_t cap = 0;
    CHECK_OK(al_reserve(&a, &cap, 1, sizeof *a, "ints"));
    CHECK(a && cap == 16, "first capacity %zu", cap);
    for (int i = 0; a && i < 16; i++) a[i] = i * 7;
    int *before = a;
    CHECK_OK(al_reserve(&a, &cap, 16, sizeof *a, "ints"));
    CHECK(a == before && cap == 16, "room already there: untouched");
    CHECK_OK(al_reserve(&a, &cap, 40, sizeof *a, "ints"));
    CHECK(cap == 64, "doubled to %zu for 40", cap);
    size_t bad = 0;
    for (int i = 0; a && i < 16; i++) bad += a[i] != i * 7;
    CHECK(bad == 0, "growth lost %zu values", bad);
    before = a;
    CHECK_ERR(al_reserve(&a, &cap, 65, SIZE_MAX / 64, "huge things"), "huge things");
    CHECK(a == before && cap == 64, "a refused growth leaves the array");
    free(a);
}

static void test_bulk(void) {
    float src[8] = {1.0f, -2.5f, 1.0625f, 65520.0f, 1e-30f, 448.0f, 3.0e38f, -0.0f};
    uint8_t buf[64];
    float back[8];
    /* F16 / BF16 / E4M3: bulk equals the scalar conversions, element by element */
    CHECK_OK(dt_from_f32(DT_F16, src, 8, buf));
    CHECK_OK(dt_to_f32(DT_F16, buf, 8, back));
    for (int i = 0; i < 8; i++) {
        uint16_t h; memcpy(&h, buf + 2 * i, 2);
        CHECK(h == dt_f32_to_f16(src[i]) && f2u(back[i]) == f2u(dt_f16_to_f32(h)), "F16 bulk [%d]", i);
    }
    CHECK_OK(dt_from_f32(DT_BF16, src, 8, buf));
    CHECK_OK(dt_to_f32(DT_BF16, buf, 8, back));
    for (int i = 0; i < 8; i++) {
        uint16_t h; memcpy(&h, buf + 2 * i, 2);
        CHECK(h == dt_f32_to_bf16(src[i]) && f2u(back[i]) == f2u(dt_bf16_to_f32(h)), "BF16 bulk [%d]", i);
    }
    CHECK_OK(dt_from_f32(DT_F8_E4M3, src, 8, buf));
    CHECK_OK(dt_to_f32(DT_F8_E4M3, buf, 8, back));
    for (int i = 0; i < 8; i++)
        CHECK(buf[i] == dt_f32_to_e4m3(src[i]) && f2u(back[i]) == f2u(dt_e4m3_to_f32(buf[i])), "E4M3 bulk [%d]", i);
    /* F32 and F64 are bit-exact / exact for representable values */
    CHECK_OK(dt_from_f32(DT_F32, src, 8, buf));
    CHECK(memcmp(buf, src, 32) == 0, "F32 bytes");
    CHECK_OK(dt_from_f32(DT_F64, src, 8, buf));
    CHECK_OK(dt_to_f32(DT_F64, buf, 8, back));
    CHECK(memcmp(back, src, 32) == 0, "F64 round trip of float values");
    /* unaligned source: conversions must not assume alignment */
    uint8_t un[9 * 2];
    for (int i = 0; i < 8; i++) { uint16_t h = dt_f32_to_f16((float)i); memcpy(un + 1 + 2 * i, &h, 2); }
    CHECK_OK(dt_to_f32(DT_F16, un + 1, 8, back));
    CHECK(back[7] == 7.0f && back[3] == 3.0f, "unaligned F16 source");
    /* integer types are not weights */
    CHECK_ERR(dt_to_f32(DT_I32, buf, 2, back), "I32 is not a float type");
    CHECK_ERR(dt_to_f32(DT_U8, buf, 2, back), "U8");
    CHECK_ERR(dt_from_f32(DT_I8, src, 2, buf), "cannot write dtype I8");
    CHECK_ERR(dt_from_f32(DT_F8_E5M2, src, 2, buf), "F8_E5M2");
}

int main(void) {
    test_names();
    test_f16();
    test_bf16();
    test_e4m3();
    test_e4m3_rows();
    test_bulk();
    test_matd();
    test_reserve();
    return check_done();
}
