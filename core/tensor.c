/* tensor.c -- dtype names and conversions (F16, BF16, F8 to and from float32), and Mat. */
#include "tensor.h"

#include <cblas.h>
#include <math.h>
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
};

const char *dt_name(dt_type t) { return t >= 0 && t < DT_COUNT ? dt_info[t].name : "?"; }
size_t dt_size(dt_type t) { return t >= 0 && t < DT_COUNT ? dt_info[t].size : 0; }
bool dt_is_float(dt_type t) { return t >= 0 && t < DT_COUNT && dt_info[t].is_float; }

dt_type dt_parse(const char *name) {
    for (int t = 0; t < DT_COUNT; t++)
        if (strcmp(name, dt_info[t].name) == 0) return (dt_type)t;
    return DT_INVALID;
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
    case DT_F8_E4M3: {
        float lut[256];
        for (int i = 0; i < 256; i++) lut[i] = dt_e4m3_to_f32((uint8_t)i);
        for (size_t i = 0; i < n; i++) dst[i] = lut[b[i]];
        return AL_OK;
    }
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
    default: return al_err("cannot write dtype %s from float32", dt_name(t));
    }
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
        al_err("slice rows %zu+%zu cols %zu+%zu out of a %zux%zu matrix", r0, nr, c0, nc, m->rows, m->cols);
        return NULL;
    }
    Mat *s = mat_new(nr, nc);
    if (!s) return NULL;
    for (size_t i = 0; i < nr; i++) memcpy(s->data + i * nc, m->data + (r0 + i) * m->cols + c0, nc * sizeof(float));
    return s;
}

Mat *mat_slice_t(const Mat *m, size_t r0, size_t nr, size_t c0, size_t nc) {
    if (r0 + nr > m->rows || c0 + nc > m->cols) {
        al_err("slice rows %zu+%zu cols %zu+%zu out of a %zux%zu matrix", r0, nr, c0, nc, m->rows, m->cols);
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
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

size_t mat_first_nonfinite(const Mat *m) {
    size_t n = m->rows * m->cols;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(m->data[i])) return i;
    return (size_t)-1;
}
