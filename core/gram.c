/* gram.c -- Gram matrices of per-head factors straight from a checkpoint's mapping: head views
 * as blocks of stored tensors, dequantization fused into a cache-sized chunk, dsyrk accumulation
 * in double. Owns nothing global but a constant FP8 decoding table. See gram.h. */
#define _GNU_SOURCE
#include "gram.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FP8_BLOCK 128
/* Doubles per chunk: 512 KB, half of a core's L2 on these machines; a multiple of 128 rows of a
 * 128-wide head, so FP8 scale blocks are never split. */
#define GRAM_CHUNK 65536
/* Rows ahead to prefetch when reading a column block. */
#define GRAM_PREFETCH 16

/* ================================================================ head views */

void gram_view_clear(GramView *v) {
    free(v->tensor);
    memset(v, 0, sizeof *v);
}

int gram_view(const Model *m, head_kind kind, int layer, int head, head_part part, GramView *v) {
    memset(v, 0, sizeof *v);
    HeadBlock b;
    if (model_head_block(m, kind, layer, head, part, &b) != AL_OK) return AL_ERR;
    if (!(v->tensor = model_tensor_name(m, layer, b.suffix))) return AL_ERR;
    v->r0 = b.r0; v->nr = b.nr; v->c0 = b.c0; v->nc = b.nc;
    /* The Gram is taken in the head space: the view's columns for Q/K/V, its rows for O. A
     * transposed view (x @ Bᵀ) has B's rows as its columns. */
    v->row_gram = (kind == HK_O) != b.transposed;
    return AL_OK;
}

/* ================================================================ block dequantization */

/* A stored 2-D tensor resolved for reading: its bytes in the mapping and, for FP8 E4M3, its
 * block scales (F32, possibly unaligned in the file). */
typedef struct {
    const char *name;
    dt_type dtype;
    size_t rows, cols, esize;
    const uint8_t *data;
    const uint8_t *scale;    /* (ceil(rows/128), scols) F32, or NULL */
    size_t scols;
} Tensor2;

static float e4m3_lut[256];
static bool e4m3_simd;               /* the AVX2 + F16C row decoder is usable */
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;
static void e4m3_init(void) {
    for (int i = 0; i < 256; i++) e4m3_lut[i] = dt_e4m3_to_f32((uint8_t)i);
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    e4m3_simd = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* n E4M3 codes times the scale s into doubles, 8 at a time, bit-identical to the table: the code's
 * low 7 bits shifted left by 7 are an IEEE half of value code / 256 (subnormals included), F16C
 * widens it, one float multiply by 256 s rounds exactly as e4m3_lut[c] * s does, then widen to
 * double. Codes S.1111.111 are NaN. */
__attribute__((target("avx2,f16c")))
static void fp8_row_simd(const uint8_t *src, size_t n, float s, double *d) {
    const __m128i m7f = _mm_set1_epi16(0x7f), m80 = _mm_set1_epi16(0x80);
    const __m256 sc = _mm256_set1_ps(256.0f * s), nan = _mm256_set1_ps(NAN);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(src + j)));
        __m128i mag = _mm_and_si128(x, m7f);
        __m128i h = _mm_or_si128(_mm_slli_epi16(mag, 7), _mm_slli_epi16(_mm_and_si128(x, m80), 8));
        __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), sc);
        __m256i isnan = _mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, m7f));
        f = _mm256_blendv_ps(f, nan, _mm256_castsi256_ps(isnan));
        _mm256_storeu_pd(d + j, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
        _mm256_storeu_pd(d + j + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
    for (; j < n; j++) d[j] = (double)(e4m3_lut[src[j]] * s);
}
#else
static void fp8_row_simd(const uint8_t *src, size_t n, float s, double *d) {
    for (size_t j = 0; j < n; j++) d[j] = (double)(e4m3_lut[src[j]] * s);
}
#endif

bool gram_fp8_simd(bool on) {
    pthread_once(&e4m3_once, e4m3_init);
    bool avail = false;
#if defined(__x86_64__) && defined(__GNUC__)
    avail = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#endif
    e4m3_simd = on && avail;
    return e4m3_simd;
}

/* Finds name and, for FP8 E4M3, its "<name>_scale_inv" (checked as store_read checks it). */
static int tensor_open(const Store *st, const char *name, Tensor2 *t) {
    memset(t, 0, sizeof *t);
    const st_entry *e;
    const st_file *f;
    if (store_entry(st, name, &e, &f) != AL_OK || store_shape2(st, name, &t->rows, &t->cols) != AL_OK) return AL_ERR;
    if (!dt_is_float(e->dtype)) return al_err("tensor '%s' is %s, not a float weight", name, dt_name(e->dtype));
    t->name = name;
    t->dtype = e->dtype;
    t->esize = dt_size(e->dtype);
    t->data = st_data(f, e);
    if (e->dtype != DT_F8_E4M3) return AL_OK;
    pthread_once(&e4m3_once, e4m3_init);
    const void *scale = NULL;
    int rc = store_fp8_scale(st, name, t->rows, t->cols, &scale, &t->scols);
    t->scale = scale;
    return rc;
}

/* Rows [r0, r0+nr) x cols [c0, c0+nc) of an FP8 tensor into dst (ld): per 128x128 scale block,
 * code times scale as float, widened (the values store_read gives) -- by the AVX2 row decoder
 * where the CPU has it, else by a table of the 256 codes times the scale. */
static void block_fp8(const Tensor2 *t, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld) {
    double slut[256];
    size_t r1 = r0 + nr, c1 = c0 + nc;
    for (size_t rb = r0 / FP8_BLOCK; rb * FP8_BLOCK < r1; rb++) {
        size_t ia = rb * FP8_BLOCK > r0 ? rb * FP8_BLOCK : r0, ib = (rb + 1) * FP8_BLOCK < r1 ? (rb + 1) * FP8_BLOCK : r1;
        for (size_t cb = c0 / FP8_BLOCK; cb * FP8_BLOCK < c1; cb++) {
            size_t ja = cb * FP8_BLOCK > c0 ? cb * FP8_BLOCK : c0, jb = (cb + 1) * FP8_BLOCK < c1 ? (cb + 1) * FP8_BLOCK : c1;
            float s;
            memcpy(&s, t->scale + (rb * t->scols + cb) * sizeof(float), sizeof s);
            if (!e4m3_simd)
                for (int q = 0; q < 256; q++) slut[q] = (double)(e4m3_lut[q] * s);
            for (size_t i = ia; i < ib; i++) {
                const uint8_t *src = t->data + i * t->cols + ja;
                /* Rows of a column block are a page apart (o_proj: 16 KB): fetch ahead, which
                 * also walks the page tables early. */
                if (i + GRAM_PREFETCH < r1) {
                    const uint8_t *ahead = src + GRAM_PREFETCH * t->cols;
                    for (size_t o = 0; o < jb - ja; o += 64) __builtin_prefetch(ahead + o, 0, 0);
                }
                double *d = dst + (i - r0) * ld + (ja - c0);
                if (e4m3_simd) fp8_row_simd(src, jb - ja, s, d);
                else for (size_t j = 0; j < jb - ja; j++) d[j] = slut[src[j]];
            }
        }
    }
}

/* The same block for the other float dtypes (through dt_to_f32, one row segment at a time). */
static int block_other(const Tensor2 *t, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld,
                       float *tmp) {
    for (size_t i = 0; i < nr; i++) {
        const uint8_t *src = t->data + ((r0 + i) * t->cols + c0) * t->esize;
        if (dt_to_f32(t->dtype, src, nc, tmp) != AL_OK) return al_err_ctx("tensor '%s'", t->name);
        double *d = dst + i * ld;
        for (size_t j = 0; j < nc; j++) d[j] = tmp[j];
    }
    return AL_OK;
}

static int block_read(const Tensor2 *t, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld,
                      float *tmp) {
    if (r0 > t->rows || nr > t->rows - r0 || c0 > t->cols || nc > t->cols - c0)
        return al_err("tensor '%s' (%zu x %zu): block rows %zu..%zu, cols %zu..%zu out of range", t->name, t->rows,
                      t->cols, r0, r0 + nr, c0, c0 + nc);
    if (t->dtype == DT_F8_E4M3) { block_fp8(t, r0, nr, c0, nc, dst, ld); return AL_OK; }
    return block_other(t, r0, nr, c0, nc, dst, ld, tmp);
}

int gram_read_block(const Store *st, const char *name, size_t r0, size_t nr, size_t c0, size_t nc, double *dst,
                    size_t ld) {
    Tensor2 t;
    if (tensor_open(st, name, &t) != AL_OK) return AL_ERR;
    float *tmp = t.dtype == DT_F8_E4M3 ? NULL : al_malloc3(nc ? nc : 1, 1, sizeof(float), "a row buffer");
    if (t.dtype != DT_F8_E4M3 && !tmp) return AL_ERR;
    int rc = block_read(&t, r0, nr, c0, nc, dst, ld, tmp);
    free(tmp);
    return rc;
}

/* ================================================================ Gram */

struct GramScratch {
    double *buf;             /* (cap) a chunk */
    float *tmp;              /* (cap) one row segment of a non-FP8 tensor */
    size_t cap;
};

GramScratch *gram_scratch_new(void) {
    GramScratch *s = al_calloc(1, sizeof *s, "Gram scratch");
    if (!s) return NULL;
    s->buf = al_malloc3(GRAM_CHUNK, 1, sizeof(double), "a Gram chunk");
    s->tmp = al_malloc3(GRAM_CHUNK, 1, sizeof(float), "a Gram chunk");
    s->cap = GRAM_CHUNK;
    if (!s->buf || !s->tmp) { gram_scratch_free(s); return NULL; }
    return s;
}

void gram_scratch_free(GramScratch *s) {
    if (!s) return;
    free(s->buf);
    free(s->tmp);
    free(s);
}

/* Grows the scratch to hold n doubles (a chunk of one row or column wider than GRAM_CHUNK). */
static int scratch_reserve(GramScratch *s, size_t n) {
    if (n <= s->cap) return AL_OK;
    double *b = al_malloc3(n, 1, sizeof(double), "a Gram chunk");
    float *t = al_malloc3(n, 1, sizeof(float), "a Gram chunk");
    if (!b || !t) { free(b); free(t); return AL_ERR; }
    free(s->buf); free(s->tmp);
    s->buf = b; s->tmp = t; s->cap = n;
    return AL_OK;
}

int gram_compute(const Store *st, const GramView *v, GramScratch *scr, double *G) {
    Tensor2 t;
    if (tensor_open(st, v->tensor, &t) != AL_OK) return AL_ERR;
    size_t k = gram_view_k(v), other = gram_view_rows(v);
    if (k == 0) return AL_OK;
    if (other == 0) { memset(G, 0, k * k * sizeof(double)); return AL_OK; }
    /* Chunks along the contracted dim: `per` rows (column Gram) or columns (row Gram) of k each. */
    size_t per = GRAM_CHUNK / k;
    if (per >= FP8_BLOCK) per -= per % FP8_BLOCK;
    if (per < 1) per = 1;
    if (per > other) per = other;
    if (scratch_reserve(scr, per * k) != AL_OK) return AL_ERR;
    for (size_t c = 0; c < other; c += per) {
        size_t len = per < other - c ? per : other - c;
        double beta = c ? 1.0 : 0.0;
        int rc;
        if (v->row_gram) {
            /* chunk (k x len) of B: G += chunk chunkᵀ */
            rc = block_read(&t, v->r0, v->nr, v->c0 + c, len, scr->buf, len, scr->tmp);
            if (rc == AL_OK)
                cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)k, (int)len, 1.0, scr->buf, (int)len, beta,
                            G, (int)k);
        } else {
            /* chunk (len x k) of B: G += chunkᵀ chunk */
            rc = block_read(&t, v->r0 + c, len, v->c0, v->nc, scr->buf, k, scr->tmp);
            if (rc == AL_OK)
                cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)k, (int)len, 1.0, scr->buf, (int)k, beta, G,
                            (int)k);
        }
        if (rc != AL_OK) return rc;
    }
    bool finite = true;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) {
            double g = G[i * k + j];
            finite = finite && isfinite(g);
            G[j * k + i] = g;
        }
    if (!finite)
        return al_err("tensor '%s' holds NaN/Inf in rows %zu..%zu, cols %zu..%zu: that head's spectra are undefined "
                      "(check the checkpoint)", v->tensor, v->r0, v->r0 + v->nr, v->c0, v->c0 + v->nc);
    return AL_OK;
}
