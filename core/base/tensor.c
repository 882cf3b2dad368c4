/* tensor.c -- dtype names and conversions (F16, BF16, F8 to and from float32), the FP8 E4M3 row
 * decoder, block-scale dequantization and re-encoding, the FP4 (MXFP4, NVFP4) decoder, Mat and MatD. Owns nothing global but a
 * constant table of the 256 E4M3 values and which row decoder runs. */
#include "tensor.h"
#include "tensor_internal.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ dtype table */

static const struct { const char *name; size_t size; bool is_float; } dt_info[DT_COUNT] = {
    [DT_F32] = {"F32", 4, true},      [DT_F16] = {"F16", 2, true},
    [DT_BF16] = {"BF16", 2, true},    [DT_F8_E4M3] = {"F8_E4M3", 1, true},
    [DT_F8_E5M2] = {"F8_E5M2", 1, true}, [DT_F64] = {"F64", 8, true},
    [DT_I8] = {"I8", 1, false},       [DT_U8] = {"U8", 1, false},
    [DT_I16] = {"I16", 2, false},     [DT_I32] = {"I32", 4, false},
    [DT_I64] = {"I64", 8, false},     [DT_BOOL] = {"BOOL", 1, false},
    [DT_F8_E8M0] = {"F8_E8M0", 1, false},
};

const char *dt_name(dt_type t) { return t >= 0 && t < DT_COUNT ? dt_info[t].name : "?"; }
size_t dt_size(dt_type t) { return t >= 0 && t < DT_COUNT ? dt_info[t].size : 0; }
bool dt_is_float(dt_type t) { return t >= 0 && t < DT_COUNT && dt_info[t].is_float; }

dt_type dt_parse(const char *name) {
    for (int t = 0; t < DT_COUNT; t++)
        if (strcmp(name, dt_info[t].name) == 0) return (dt_type)t;
    return DT_INVALID;
}

dt_type dt_parse_torch(const char *s) {
    return !strcmp(s, "bfloat16") ? DT_BF16 : !strcmp(s, "float16") || !strcmp(s, "half") ? DT_F16
           : !strcmp(s, "float32") || !strcmp(s, "float") ? DT_F32 : !strcmp(s, "float64") ? DT_F64 : DT_INVALID;
}

/* ================================================================ scalar conversions */

static float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Decodes a small float with `eb` exponent bits, `mb` mantissa bits and bias; the caller
 * handles NaN/Inf patterns first. */
static float minifloat_decode(uint32_t bits, int eb, int mb, int bias) {
    uint32_t sign = bits >> (eb + mb), e = (bits >> mb) & ((1u << eb) - 1), m = bits & ((1u << mb) - 1);
    float v = e == 0 ? ldexpf((float)m, 1 - bias - mb)
                     : ldexpf((float)(m | (1u << mb)), (int)e - bias - mb);
    return sign ? -v : v;
}

/* Encodes |a| (finite, non-negative) with round-to-nearest-even; returns exponent|mantissa
 * bits, possibly one past the largest finite value (the caller saturates or makes Inf). */
static uint32_t minifloat_encode_abs(float a, int mb, int bias) {
    if (a == 0) return 0;
    int e;
    frexpf(a, &e);                   /* a = f * 2^e, f in [0.5, 1) -> unbiased exponent e-1 */
    int ue = e - 1;
    int emin = 1 - bias;             /* smallest normal exponent */
    if (ue < emin) ue = emin;        /* subnormal: fixed scale */
    /* quantum at this exponent is 2^(ue - mb) */
    float q = nearbyintf(ldexpf(a, mb - ue));   /* in [2^mb, 2^(mb+1)] for normals */
    uint32_t qi = (uint32_t)q;
    if (qi < (1u << mb)) return qi;              /* subnormal (biased exponent 0) */
    if (qi == (1u << (mb + 1))) { ue++; qi >>= 1; }
    return ((uint32_t)(ue + bias) << mb) | (qi & ((1u << mb) - 1));
}

float dt_f16_to_f32(uint16_t h) {
    if (((h >> 10) & 0x1f) == 0x1f) {
        uint32_t u = ((uint32_t)(h & 0x8000) << 16) | 0x7f800000u | ((uint32_t)(h & 0x3ff) << 13);
        return bits_to_f32(u);
    }
    return minifloat_decode(h, 5, 10, 15);
}

uint16_t dt_f32_to_f16(float f) {
    uint16_t sign = (f32_to_bits(f) >> 16) & 0x8000;
    if (isnan(f)) return 0x7e00;
    float a = fabsf(f);
    if (isinf(a)) return sign | 0x7c00;
    uint32_t b = minifloat_encode_abs(a, 10, 15);
    if (b >= 0x7c00) b = 0x7c00;                 /* overflow -> Inf */
    return (uint16_t)(sign | b);
}

float dt_bf16_to_f32(uint16_t b) { return bits_to_f32((uint32_t)b << 16); }

uint16_t dt_f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float dt_e4m3_to_f32(uint8_t v) {
    if ((v & 0x7f) == 0x7f) return NAN;          /* E4M3 "fn": no Inf, one NaN pattern */
    return minifloat_decode(v, 4, 3, 7);
}

uint8_t dt_f32_to_e4m3(float f) {
    if (isnan(f)) return 0x7f;
    uint8_t sign = (f32_to_bits(f) >> 24) & 0x80;
    float a = fabsf(f);
    if (a >= 448.0f) return sign | 0x7e;         /* saturate to +-448 */
    uint32_t b = minifloat_encode_abs(a, 3, 7);
    if (b > 0x7e) b = 0x7e;
    return (uint8_t)(sign | b);
}

float dt_e5m2_to_f32(uint8_t v) {
    if (((v >> 2) & 0x1f) == 0x1f) return dt_f16_to_f32((uint16_t)v << 8);
    return minifloat_decode(v, 5, 2, 15);
}

/* ================================================================ bulk conversions */

int dt_to_f32(dt_type t, const void *src, size_t n, float *dst) {
    const uint8_t *b = src;
    switch (t) {
    case DT_F32: memcpy(dst, src, n * 4); return AL_OK;
    case DT_F64: for (size_t i = 0; i < n; i++) { double d; memcpy(&d, b + 8 * i, 8); dst[i] = (float)d; } return AL_OK;
    case DT_F16: for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); dst[i] = dt_f16_to_f32(h); } return AL_OK;
    case DT_BF16: for (size_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); dst[i] = dt_bf16_to_f32(h); } return AL_OK;
    case DT_F8_E4M3: dt_e4m3_row(b, n, 1.0f, dst); return AL_OK;
    case DT_F8_E5M2: for (size_t i = 0; i < n; i++) dst[i] = dt_e5m2_to_f32(b[i]); return AL_OK;
    default: return al_err("dtype %s is not a float type (weights must be F32, F16, BF16 or F8)", dt_name(t));
    }
}

int dt_from_f32(dt_type t, const float *src, size_t n, void *dst) {
    uint8_t *b = dst;
    switch (t) {
    case DT_F32: memcpy(dst, src, n * 4); return AL_OK;
    case DT_F64: for (size_t i = 0; i < n; i++) { double d = src[i]; memcpy(b + 8 * i, &d, 8); } return AL_OK;
    case DT_F16: for (size_t i = 0; i < n; i++) { uint16_t h = dt_f32_to_f16(src[i]); memcpy(b + 2 * i, &h, 2); } return AL_OK;
    case DT_BF16: for (size_t i = 0; i < n; i++) { uint16_t h = dt_f32_to_bf16(src[i]); memcpy(b + 2 * i, &h, 2); } return AL_OK;
    case DT_F8_E4M3: for (size_t i = 0; i < n; i++) b[i] = dt_f32_to_e4m3(src[i]); return AL_OK;
    case DT_F8_E8M0:       /* block scales: powers of two 2^-127..2^127, written exactly; others refused */
        for (size_t i = 0; i < n; i++) {
            int e;
            if (!(src[i] > 0) || !isfinite(src[i]) || frexpf(src[i], &e) != 0.5f || e - 1 < -127 || e - 1 > 127)
                return al_err("E8M0 holds powers of two 2^-127..2^127, not %g", (double)src[i]);
            b[i] = (uint8_t)(e - 1 + 127);
        }
        return AL_OK;
    default: return al_err("cannot write dtype %s from float32", dt_name(t));
    }
}

/* ================================================================ FP8 rows and block scales */

/* Rows ahead to prefetch when dequantizing a column block (rows a page apart). */
#define FP8_PREFETCH 16

static float e4m3_lut[256];
static bool e4m3_avx2;               /* the AVX2 + F16C row decoder is in use */
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
static bool e4m3_avx2_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}

/* 8 E4M3 codes times s as floats, bit-identical to the table: the code's low 7 bits shifted left
 * by 7 are an IEEE half of value code / 256 (subnormals included), F16C widens it, and one float
 * multiply by sc = 256 s (exact) rounds exactly as e4m3_lut[c] * s does. Codes S.1111.111 are NaN. */
__attribute__((target("avx2,f16c")))
static inline __m256 e4m3x8(const uint8_t *src, __m256 sc) {
    const __m128i m7f = _mm_set1_epi16(0x7f), m80 = _mm_set1_epi16(0x80);
    __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)src));
    __m128i mag = _mm_and_si128(x, m7f);
    __m128i h = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(_mm_and_si128(x, m80), 8));
    __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), sc);
    __m256i isnan = _mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, m7f));
    return _mm256_blendv_ps(f, _mm256_set1_ps(NAN), _mm256_castsi256_ps(isnan));
}

/* The whole groups of 8 of a row, as float or widened to double; returns how many were done. */
__attribute__((target("avx2,f16c")))
static size_t row_avx2(const uint8_t *src, size_t n, float s, float *d) {
    const __m256 sc = _mm256_set1_ps(256.0f * s);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(d + j, e4m3x8(src + j, sc));
    return j;
}

__attribute__((target("avx2,f16c")))
static size_t row_avx2_d(const uint8_t *src, size_t n, float s, double *d) {
    const __m256 sc = _mm256_set1_ps(256.0f * s);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 f = e4m3x8(src + j, sc);
        _mm256_storeu_pd(d + j, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
        _mm256_storeu_pd(d + j + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
    return j;
}
#else
static bool e4m3_avx2_available(void) { return false; }
static size_t row_avx2(const uint8_t *src, size_t n, float s, float *d) { (void)src; (void)n; (void)s; (void)d; return 0; }
static size_t row_avx2_d(const uint8_t *src, size_t n, float s, double *d) { (void)src; (void)n; (void)s; (void)d; return 0; }
#endif

static void e4m3_init(void) {
    for (int i = 0; i < 256; i++) e4m3_lut[i] = dt_e4m3_to_f32((uint8_t)i);
    e4m3_avx2 = e4m3_avx2_available();
}

/* Whether the AVX2 decoder serves scale s: it multiplies by 256 s, exact unless that overflows
 * (such scales take the table). */
static bool avx2_for(float s) {
    pthread_once(&e4m3_once, e4m3_init);
    return e4m3_avx2 && !(isfinite(s) && fabsf(s) > FLT_MAX / 256.0f);
}

/* One row, the decoder chosen by the caller (hoisted out of the block loops below). */
static inline void row_f(const uint8_t *src, size_t n, float s, float *dst, bool avx2) {
    size_t j = avx2 ? row_avx2(src, n, s, dst) : 0;
    for (; j < n; j++) dst[j] = e4m3_lut[src[j]] * s;
}

static inline void row_d(const uint8_t *src, size_t n, float s, double *dst, bool avx2) {
    size_t j = avx2 ? row_avx2_d(src, n, s, dst) : 0;
    for (; j < n; j++) dst[j] = (double)(e4m3_lut[src[j]] * s);
}

void dt_e4m3_row(const uint8_t *src, size_t n, float s, float *dst) { row_f(src, n, s, dst, avx2_for(s)); }
void dt_e4m3_row_d(const uint8_t *src, size_t n, float s, double *dst) { row_d(src, n, s, dst, avx2_for(s)); }

bool dt_e4m3_simd(bool on) {
    pthread_once(&e4m3_once, e4m3_init);
    e4m3_avx2 = on && e4m3_avx2_available();
    return e4m3_avx2;
}

/* dt_fp8_dequant(_d): per 128 x 128 scale block, each row segment through the row decoder. */
static void fp8_dequant(const uint8_t *w, size_t cols, const void *scale, size_t scols, size_t r0, size_t nr,
                        size_t c0, size_t nc, void *dst, size_t ld, bool dbl) {
    const size_t B = DT_FP8_BLOCK, r1 = r0 + nr, c1 = c0 + nc;
    for (size_t rb = r0 / B; rb * B < r1; rb++) {
        size_t ia = rb * B > r0 ? rb * B : r0, ib = (rb + 1) * B < r1 ? (rb + 1) * B : r1;
        for (size_t cb = c0 / B; cb * B < c1; cb++) {
            size_t ja = cb * B > c0 ? cb * B : c0, jb = (cb + 1) * B < c1 ? (cb + 1) * B : c1;
            float s;
            memcpy(&s, (const uint8_t *)scale + (rb * scols + cb) * sizeof(float), sizeof s);
            bool avx2 = avx2_for(s);
            for (size_t i = ia; i < ib; i++) {
                const uint8_t *src = w + i * cols + ja;
                /* Rows of a column block are a page apart (o_proj: 16 KB): fetch ahead, which
                 * also walks the page tables early. */
                if (i + FP8_PREFETCH < r1) {
                    const uint8_t *ahead = src + FP8_PREFETCH * cols;
                    for (size_t o = 0; o < jb - ja; o += 64) __builtin_prefetch(ahead + o, 0, 0);
                }
                size_t at = (i - r0) * ld + (ja - c0);
                if (dbl) row_d(src, jb - ja, s, (double *)dst + at, avx2);
                else row_f(src, jb - ja, s, (float *)dst + at, avx2);
            }
        }
    }
}

void dt_fp8_dequant(const uint8_t *w, size_t cols, const void *scale, size_t scols, size_t r0, size_t nr,
                    size_t c0, size_t nc, float *dst, size_t ld) {
    fp8_dequant(w, cols, scale, scols, r0, nr, c0, nc, dst, ld, false);
}

void dt_fp8_dequant_d(const uint8_t *w, size_t cols, const void *scale, size_t scols, size_t r0, size_t nr,
                      size_t c0, size_t nc, double *dst, size_t ld) {
    fp8_dequant(w, cols, scale, scols, r0, nr, c0, nc, dst, ld, true);
}

void dt_fp8_dequant_rows(const uint8_t *w, size_t cols, const float *rscale, size_t r0, size_t nr, size_t c0,
                         size_t nc, float *dst, size_t ld) {
    for (size_t i = 0; i < nr; i++) dt_e4m3_row(w + (r0 + i) * cols + c0, nc, rscale[r0 + i], dst + i * ld);
}

/* ================================================================ FP4 (E2M1) blocks */

static const dt_fp4_trait fp4_traits[DT_FP4_COUNT] = {
    [DT_FP4_MXFP4] = {"MXFP4", 32, "E8M0"},
    [DT_FP4_NVFP4] = {"NVFP4", 16, "F8_E4M3"},
    [DT_FP4_INT4] = {"INT4", 32, "BF16"},
};

static const float e2m1_tab[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
static const float int4_values[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};   /* offset 8 */

const dt_fp4_trait *dt_fp4_traits(dt_fp4_enc e) { return e > DT_FP4_NONE && e < DT_FP4_COUNT ? &fp4_traits[e] : NULL; }
float dt_e2m1_to_f32(uint8_t code) { return e2m1_tab[code & 15]; }
float dt_e8m0_to_f32(uint8_t v) { return v == 0xff ? NAN : ldexpf(1.0f, (int)v - 127); }

/* The block scale without the table's initialisation (fp4_row does it once per row). */
static inline float fp4_scale(const dt_fp4 *q, size_t r, size_t b) {
    size_t nb = q->cols / fp4_traits[q->enc].block;
    if (q->enc == DT_FP4_INT4) {
        float f = 0;
        uint16_t h;
        if (q->sdt == DT_F32) memcpy(&f, q->scale + (r * nb + b) * 4, 4);
        else memcpy(&h, q->scale + (r * nb + b) * 2, 2), f = q->sdt == DT_BF16 ? dt_bf16_to_f32(h) : dt_f16_to_f32(h);
        return f;
    }
    uint8_t v = q->scale[r * nb + b];
    return q->enc == DT_FP4_MXFP4 ? dt_e8m0_to_f32(v) : e4m3_lut[v];
}

float dt_fp4_block_scale(const dt_fp4 *q, size_t r, size_t b) {
    pthread_once(&e4m3_once, e4m3_init);
    return fp4_scale(q, r, b);
}

/* One row's columns [c0, c0 + nc): per block, the code values times its scale, then gscale (a
 * second rounding only when gscale is not 1). Whole bytes two values at a time. */
static void fp4_row(const dt_fp4 *q, size_t r, size_t c0, size_t nc, float *dst) {
    const size_t B = fp4_traits[q->enc].block;
    const uint8_t *codes = q->codes + r * (q->cols / 2);
    const float *vals = q->enc == DT_FP4_INT4 ? int4_values : e2m1_tab;      /* the code table */
    pthread_once(&e4m3_once, e4m3_init);
    for (size_t j = c0, end = c0 + nc; j < end;) {
        float s = fp4_scale(q, r, j / B), *o = dst + (j - c0);
        if (q->gdiv) s /= q->gscale;
        size_t stop = (j / B + 1) * B < end ? (j / B + 1) * B : end, k = 0;
        if (j & 1) { o[k++] = vals[codes[j / 2] >> 4] * s; }           /* low nibble: even column */
        for (const uint8_t *c = codes + (j + k) / 2; j + k + 2 <= stop; k += 2, c++) {
            o[k] = vals[*c & 15] * s;
            o[k + 1] = vals[*c >> 4] * s;
        }
        if (j + k < stop) { o[k] = vals[codes[(j + k) / 2] & 15] * s; k++; }
        if (q->gscale != 1.0f && !q->gdiv)
            for (size_t i = 0; i < k; i++) o[i] *= q->gscale;
        j += k;
    }
}

void dt_fp4_dequant(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld) {
    for (size_t i = 0; i < nr; i++) fp4_row(q, r0 + i, c0, nc, dst + i * ld);
}

void dt_fp4_dequant_d(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld) {
    float buf[256];
    for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < nc; j += 256) {
            size_t n = nc - j < 256 ? nc - j : 256;
            fp4_row(q, r0 + i, c0 + j, n, buf);
            vec_f2d(buf, n, dst + i * ld + j);
        }
}

/* dt_fp8_reencode_rows: one block (nr x nc at column c0) -- kept, or re-encoded at its old scale
 * (times 2^k). Returns true when kept. */
static bool fp8_reencode_block(const float *W, const float *Wold, const uint8_t *old, float s_old, size_t nr,
                               size_t c0, size_t nc, size_t cols, uint8_t *q, float *s_out) {
    bool changed = false;
    float amax = 0;
    for (size_t i = 0; i < nr; i++)
        for (size_t j = c0; j < c0 + nc; j++) {
            changed |= memcmp(&W[i * cols + j], &Wold[i * cols + j], sizeof(float)) != 0;
            amax = fmaxf(amax, fabsf(W[i * cols + j]));
        }
    float s = s_old;
    int k = 0;
    if (!(s > 0) || !isfinite(s)) s = amax > 0 ? exp2f(ceilf(log2f(amax / 448.0f))) : 1.0f, k = 1;   /* 2^n: exact in BF16 / E8M0 grids */
    while (changed && amax > 448.0f * s && k < 64) s *= 2.0f, k++;
    *s_out = changed ? s : s_old;
    for (size_t i = 0; i < nr; i++)
        for (size_t j = c0; j < c0 + nc; j++) {
            size_t t = i * cols + j;
            bool same = !changed || (k == 0 && memcmp(&W[t], &Wold[t], sizeof(float)) == 0);
            q[t] = same ? old[t] : dt_f32_to_e4m3(W[t] / s);
        }
    return !changed;
}

size_t dt_fp8_reencode_rows(const float *W, const float *Wold, const uint8_t *old, const void *old_scale,
                            size_t scols, size_t r0, size_t nr, size_t cols, uint8_t *q, float *scale) {
    size_t bi = r0 / DT_FP8_BLOCK, kept = 0;
    for (size_t bj = 0; bj * DT_FP8_BLOCK < cols; bj++) {
        size_t c0 = bj * DT_FP8_BLOCK, nc = cols - c0 < DT_FP8_BLOCK ? cols - c0 : DT_FP8_BLOCK;
        float s_old;
        memcpy(&s_old, (const char *)old_scale + (bi * scols + bj) * sizeof(float), sizeof s_old);
        kept += fp8_reencode_block(W, Wold, old, s_old, nr, c0, nc, cols, q, &scale[bi * scols + bj]);
    }
    return kept;
}

/* ================================================================ Mat */

Mat *mat_new(size_t rows, size_t cols) {
    Mat *m = al_calloc(1, sizeof *m, "a matrix");
    if (!m) return NULL;
    size_t n;
    if (!al_mul_ok(rows, cols, &n, "a matrix")) { free(m); return NULL; }
    m->data = al_calloc(n, sizeof(float), "matrix data");
    if (!m->data) { free(m); return NULL; }
    m->rows = rows;
    m->cols = cols;
    return m;
}

void mat_free(Mat *m) {
    if (!m) return;
    free(m->data);
    free(m);
}

Mat *mat_copy(const Mat *m) {
    Mat *c = mat_new(m->rows, m->cols);
    if (c) memcpy(c->data, m->data, m->rows * m->cols * sizeof(float));
    return c;
}

Mat *mat_slice(const Mat *m, size_t r0, size_t nr, size_t c0, size_t nc) {
    if (r0 + nr > m->rows || c0 + nc > m->cols) {
        al_err("slice rows %zu+%zu col%s %zu+%zu out of a %zux%zu matrix", r0, nr, al_s(nr), c0, nc, m->rows, m->cols);
        return NULL;
    }
    Mat *s = mat_new(nr, nc);
    if (!s) return NULL;
    for (size_t i = 0; i < nr; i++) memcpy(s->data + i * nc, m->data + (r0 + i) * m->cols + c0, nc * sizeof(float));
    return s;
}

Mat *mat_slice_t(const Mat *m, size_t r0, size_t nr, size_t c0, size_t nc) {
    if (r0 + nr > m->rows || c0 + nc > m->cols) {
        al_err("slice rows %zu+%zu col%s %zu+%zu out of a %zux%zu matrix", r0, nr, al_s(nr), c0, nc, m->rows, m->cols);
        return NULL;
    }
    Mat *s = mat_new(nc, nr);
    if (!s) return NULL;
    /* blocked transpose for cache friendliness */
    const size_t B = 32;
    for (size_t ib = 0; ib < nr; ib += B)
        for (size_t jb = 0; jb < nc; jb += B)
            for (size_t i = ib; i < ib + B && i < nr; i++)
                for (size_t j = jb; j < jb + B && j < nc; j++)
                    s->data[j * nr + i] = m->data[(r0 + i) * m->cols + c0 + j];
    return s;
}

Mat *mat_transpose(const Mat *m) { return mat_slice_t(m, 0, m->rows, 0, m->cols); }

Mat *mat_mul(const Mat *A, const Mat *B) {
    if (A->cols != B->rows) {
        al_err("matrix product of %zux%zu and %zux%zu: inner dimensions differ", A->rows, A->cols, B->rows, B->cols);
        return NULL;
    }
    Mat *C = mat_new(A->rows, B->cols);
    if (!C || !A->rows || !B->cols || !A->cols) return C;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)A->rows, (int)B->cols, (int)A->cols,
                1.0f, A->data, (int)A->cols, B->data, (int)B->cols, 0.0f, C->data, (int)C->cols);
    return C;
}

double mat_fro(const Mat *m) {
    double s = 0;
    size_t n = m->rows * m->cols;
    for (size_t i = 0; i < n; i++) s += (double)m->data[i] * m->data[i];
    return sqrt(s);
}

double vec_rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)b[i] - a[i];
        num += e * e;
        den += (double)a[i] * a[i];
    }
    if (isnan(num) || isnan(den) || isinf(den)) return NAN;    /* NaN/Inf in an input: no error to give */
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

size_t mat_first_nonfinite(const Mat *m) {
    size_t n = m->rows * m->cols;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(m->data[i])) return i;
    return (size_t)-1;
}

/* ================================================================ MatD */

MatD *matd_new(size_t rows, size_t cols) {
    MatD *m = al_calloc(1, sizeof *m, "a double matrix");
    if (!m) return NULL;
    size_t n;
    if (!al_mul_ok(rows, cols, &n, "a double matrix")) { free(m); return NULL; }
    m->data = al_calloc(n ? n : 1, sizeof(double), "double matrix data");
    if (!m->data) { free(m); return NULL; }
    m->rows = rows;
    m->cols = cols;
    return m;
}

void matd_free(MatD *m) {
    if (!m) return;
    free(m->data);
    free(m);
}

void vec_f2d(const float *src, size_t n, double *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

void vec_d2f(const double *src, size_t n, float *dst) {
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

MatD *matd_from_mat(const Mat *m) {
    MatD *d = matd_new(m->rows, m->cols);
    if (d) vec_f2d(m->data, m->rows * m->cols, d->data);
    return d;
}

Mat *mat_from_matd(const MatD *m) {
    Mat *f = mat_new(m->rows, m->cols);
    if (f) vec_d2f(m->data, m->rows * m->cols, f->data);
    return f;
}
