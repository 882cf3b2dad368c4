/* matmul.c -- y = x W^T from stored weights: views of a store's tensors (WMat), register tiles of 4
 * tokens x 6 weight rows (BF16 / F16 widened for float32 FMA; BF16 activations for vdpbf16ps when
 * T < 16), token-lane tiles for vdpbf16ps from 16 tokens on (activations packed once per product as
 * BF16 pairs, 16 tokens to a vector; each weight pair broadcast from the mapping), the
 * per-panel float32 route (dequantized FP8, and everything where the CPU lacks AVX-512: a panel
 * then a one-thread sgemm), one-token kernels for BF16 weights at 1-4 tokens (row groups over all
 * columns, the next group prefetched), FP4 / INT4 register tiles for fewer than 64 tokens (at 1-4
 * tokens in the same row groups over all columns, the next group's codes prefetched), x @ W for
 * (in, out) F32 / BF16 / F16 weights read in place (one FMA chain per output in row order), the run-time
 * choice of kernels and the per-worker scratch; units run on the persistent pool (pool.h). See
 * matmul.h for the contract. */
#define _GNU_SOURCE
#include "matmul.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gram_bf16.h"
#include "matmul_amx.h"
#include "pool.h"
#include "sweep.h"
#include "matmul_internal.h"

/* ================================================================ run-time choice */

static atomic_int simd_off;          /* mm_simd(false) */
static atomic_int lanes_off;         /* mm_token_lanes(false) */
static atomic_int pool_off;          /* mm_pool(false) */
static atomic_int mv_off;            /* mm_matvec(false): also the FP4 / INT4 one-token groups */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MM_X86 1
#define TGT_512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define TGT_BF16 __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))
static bool cpu_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
static bool cpu_bf16(void) { return cpu_avx512() && __builtin_cpu_supports("avx512bf16"); }
#else
#define MM_X86 0
static bool cpu_avx512(void) { return false; }
static bool cpu_bf16(void) { return false; }
#endif

static bool use_avx512(void) { return !atomic_load(&simd_off) && cpu_avx512(); }
bool mm_have_bf16(void) { return !atomic_load(&simd_off) && cpu_bf16(); }

bool mm_simd(bool on) {
    atomic_store(&simd_off, !on);
    return mm_have_bf16();
}

void mm_token_lanes(bool on) { atomic_store(&lanes_off, !on); }

void mm_pool(bool on) { atomic_store(&pool_off, !on); }

const char *mm_compute_name(mm_compute c) { return c == MM_BF16 ? "bf16" : "f32"; }

mm_compute mm_compute_parse(const char *name) { return name && !strcmp(name, "bf16") ? MM_BF16 : MM_F32; }

const char *mm_compute_describe(mm_compute c) {
    if (c == MM_F32) return "f32 (weights widened to float32)";
    if (!mm_have_bf16()) return "bf16 (activations rounded to BF16; float32 products: this CPU has no vdpbf16ps)";
    return matmul_amx_ok() ? "bf16 (activations rounded to BF16; AMX tdpbf16ps from 16 tokens, vdpbf16ps below)"
                           : "bf16 (activations rounded to BF16, vdpbf16ps)";
}

/* ================================================================ views */

int wmat_view(const Store *s, const char *name, bool f32_only, WMat *w) {
    memset(w, 0, sizeof *w);
    const st_entry *e;
    const st_file *f;
    if (store_entry(s, name, &e, &f) != AL_OK || store_shape2(s, name, &w->rows, &w->cols) != AL_OK) return AL_ERR;
    w->dt = e->dtype;
    w->data = st_data(f, e);
    if (store_fp4(s, name, &w->fp4) != AL_OK) return AL_ERR;
    if (w->fp4.enc != DT_FP4_NONE && !f32_only) return AL_OK;       /* decoded per panel */
    w->fp4.enc = DT_FP4_NONE;
    bool kernel = w->dt == DT_BF16 || w->dt == DT_F16 || w->dt == DT_F8_E4M3 ||
                  (w->dt == DT_F32 && ((uintptr_t)w->data & 3) == 0);
    if (w->dt == DT_F8_E4M3 && !f32_only && store_fp8_rscale(s, name, w->rows, &w->rscale) != AL_OK) return AL_ERR;
    if (w->dt == DT_F8_E4M3 && !f32_only && !w->rscale &&
        store_fp8_scale(s, name, w->rows, w->cols, &w->scale, &w->scols) != AL_OK)
        return AL_ERR;
    if (kernel && (!f32_only || w->dt == DT_F32)) return AL_OK;
    if (store_read(s, name, &w->own) != AL_OK) return AL_ERR;
    w->dt = DT_F32;
    w->data = w->own->data;
    w->scale = NULL;
    w->rscale = NULL;
    return AL_OK;
}

void wmat_free(WMat *w) {
    mat_free(w->own);
    memset(w, 0, sizeof *w);
}

size_t wmat_bytes(const WMat *w) {
    if (w->fp4.enc != DT_FP4_NONE)      /* codes and block scales (INT4's scales: 2 or 4 bytes) */
        return w->rows * (w->cols / 2 + w->cols / dt_fp4_traits(w->fp4.enc)->block *
                                             (w->fp4.enc == DT_FP4_INT4 ? dt_size(w->fp4.sdt) : 1));
    return w->rows * w->cols * dt_size(w->dt);
}

/* ---------------------------------------------------------------- widening */

#if MM_X86
TGT_512 static size_t bf16_widen_512(const uint16_t *src, size_t n, float *dst) {
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(src + j)));
        _mm512_storeu_ps(dst + j, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    return j;
}
TGT_512 static size_t f16_widen_512(const uint16_t *src, size_t n, float *dst) {
    size_t j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(dst + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + j))));
    return j;
}
#else
static size_t bf16_widen_512(const uint16_t *src, size_t n, float *dst) { (void)src; (void)n; (void)dst; return 0; }
static size_t f16_widen_512(const uint16_t *src, size_t n, float *dst) { (void)src; (void)n; (void)dst; return 0; }
#endif

/* n stored values of dtype dt (BF16 / F16) at src into float32. */
static void widen(dt_type dt, const void *src, size_t n, float *dst, bool simd) {
    const uint16_t *s = src;
    size_t j = 0;
    if (dt == DT_BF16) {
        if (simd) j = bf16_widen_512(s, n, dst);
        for (; j < n; j++) dst[j] = dt_bf16_to_f32(s[j]);
    } else {
        if (simd) j = f16_widen_512(s, n, dst);
        for (; j < n; j++) dst[j] = dt_f16_to_f32(s[j]);
    }
}

void wmat_row(const WMat *w, size_t r, float *dst) {
    const uint8_t *b = w->data;
    size_t C = w->cols;
    if (w->fp4.enc != DT_FP4_NONE) { dt_fp4_dequant(&w->fp4, r, 1, 0, C, dst, C); return; }
    switch (w->dt) {
    case DT_F32: memcpy(dst, b + r * C * 4, C * 4); break;
    case DT_BF16: case DT_F16: widen(w->dt, b + r * C * 2, C, dst, use_avx512()); break;
    case DT_F8_E4M3:
        if (w->rscale) dt_fp8_dequant_rows(b, C, w->rscale, r, 1, 0, C, dst, C);
        else dt_fp8_dequant(b, C, w->scale, w->scols, r, 1, 0, C, dst, C);
        break;
    default: break;                  /* wmat_view leaves no other dtype */
    }
}

/* ---------------------------------------------------------------- FP4 / INT4 decoding */

/* The code values of an FP4 weight's encoding (tensor.h): E2M1, or INT4's nibble - 8. */
static const float fp4_e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
static const float fp4_int4[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};

/* Block b of row r's scale as tensor.c's dt_fp4_block_scale gives it, without its call per block:
 * E8M0 2^(v - 127) built from its bits (0xFF NaN, 0 the subnormal 2^-127), E4M3 from the table e4
 * (gbf_e4m3_f32's). nb: blocks per row. */
static inline float fp4_scale(const dt_fp4 *q, const float *e4, size_t r, size_t b, size_t nb) {
    if (q->enc == DT_FP4_INT4) return dt_fp4_block_scale(q, r, b);
    uint8_t v = q->scale[r * nb + b];
    if (q->enc == DT_FP4_NVFP4) return e4[v];
    uint32_t bits = v == 0xff ? 0x7fc00000u : v == 0 ? 0x00400000u : (uint32_t)v << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#if MM_X86
/* Rows [r0, r0+nr) x cols [c0, c0+nc) (c0 and nc multiples of 16: a block is 16 or 32 wide) of an
 * FP4 / INT4 weight into dst (leading dim ld), 16 values at a time: the 8 bytes' nibbles (low = even
 * column) looked up in a register (vpermps), times the block's scale (s, or s / gscale with gdiv),
 * then times gscale unless gdiv -- the operations of tensor.c's fp4_row in its order, so the values
 * are its own, bit for bit, at about a tenth of its time (its table lookups, scale and nibble
 * arithmetic are scalar per value; a product of T tokens paid them once per weight per panel, which
 * made an FP4 prefill ~1.2-1.5x a BF16 one). With bf, into bf (leading dim ld) as BF16 instead, the
 * per-tensor scale left out (fp4_unit). */
TGT_512 static void fp4_decode_512(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld,
                                   uint16_t *bf) {
    const size_t B = dt_fp4_traits(q->enc)->block, rb = q->cols / 2, nb = q->cols / B;
    const float *e4 = gbf_e4m3_f32();
    const __m512 lut = _mm512_loadu_ps(q->enc == DT_FP4_INT4 ? fp4_int4 : fp4_e2m1);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const bool post = !q->gdiv && q->gscale != 1.0f;
    const __m512 g = _mm512_set1_ps(q->gscale);
    for (size_t i = 0; i < nr; i++) {
        const uint8_t *codes = q->codes + (r0 + i) * rb;
        float s = 0;
        for (size_t j = c0; j < c0 + nc; j += 16) {
            if (j == c0 || j % B == 0) {
                s = fp4_scale(q, e4, r0 + i, j / B, nb);
                if (q->gdiv) s /= q->gscale;
            }
            __m128i b8 = _mm_loadl_epi64((const __m128i *)(const void *)(codes + j / 2));
            __m128i idx = _mm_unpacklo_epi8(_mm_and_si128(b8, m4), _mm_and_si128(_mm_srli_epi16(b8, 4), m4));
            __m512 v = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(idx), lut), _mm512_set1_ps(s));
            if (bf)                  /* BF16 by truncation: exact for fp4_bf16_exact's values, subnormals kept */
                _mm256_storeu_si256((__m256i *)(void *)(bf + i * ld + (j - c0)),
                                    _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
            else _mm512_storeu_ps(dst + i * ld + (j - c0), post ? _mm512_mul_ps(v, g) : v);
        }
    }
}

#define FP4_FEW 3            /* tokens up to which an FP4 product decodes in registers (fp4_rows_512) */

/* y[t][n] = x[t] . W[n] for rows [n0, n0 + NR) and T <= FP4_FEW tokens: each 16 values decoded in
 * registers as fp4_decode_512 decodes them (the same floats) and multiplied at once, with no panel:
 * few tokens cannot amortize writing and reading one (a T = 1 product took 2-3x a BF16 one so); NR
 * rows at a time keep NR T independent sums in flight. */
TGT_512 static inline __attribute__((always_inline)) void
fp4_rows_nr(const dt_fp4 *q, const float *e4, size_t n0, const float *x, size_t ldx, size_t T, float *y, size_t ldy,
            const int NR) {
    const size_t K = q->cols, B = dt_fp4_traits(q->enc)->block, nb = K / B;
    const __m512 lut = _mm512_loadu_ps(q->enc == DT_FP4_INT4 ? fp4_int4 : fp4_e2m1);
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const bool post = !q->gdiv && q->gscale != 1.0f;
    const __m512 g = _mm512_set1_ps(q->gscale);
    __m512 acc[4][FP4_FEW];
    float s[4] = {0};
    for (int r = 0; r < NR; r++)
        for (size_t t = 0; t < FP4_FEW; t++) acc[r][t] = _mm512_setzero_ps();
    for (size_t j = 0; j < K; j += 16) {
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) {
            if (j % B == 0) {
                s[r] = fp4_scale(q, e4, n0 + (size_t)r, j / B, nb);
                if (q->gdiv) s[r] /= q->gscale;
            }
            __m128i b8 = _mm_loadl_epi64((const __m128i *)(const void *)(q->codes + (n0 + (size_t)r) * (K / 2) + j / 2));
            __m128i idx = _mm_unpacklo_epi8(_mm_and_si128(b8, m4), _mm_and_si128(_mm_srli_epi16(b8, 4), m4));
            __m512 v = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(idx), lut), _mm512_set1_ps(s[r]));
            if (post) v = _mm512_mul_ps(v, g);
            for (size_t t = 0; t < T; t++) acc[r][t] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * ldx + j), v, acc[r][t]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (size_t t = 0; t < T; t++) y[t * ldy + n0 + (size_t)r] = _mm512_reduce_add_ps(acc[r][t]);
}

TGT_512 static void fp4_rows_512(const dt_fp4 *q, size_t n0, size_t n1, const float *x, size_t ldx, size_t T, float *y,
                                 size_t ldy) {
    const float *e4 = gbf_e4m3_f32();
    size_t n = n0;
    for (; n + 4 <= n1; n += 4) fp4_rows_nr(q, e4, n, x, ldx, T, y, ldy, 4);
    for (; n < n1; n++) fp4_rows_nr(q, e4, n, x, ldx, T, y, ldy, 1);
}
#else
static void fp4_decode_512(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld,
                           uint16_t *bf) {
    (void)q; (void)r0; (void)nr; (void)c0; (void)nc; (void)dst; (void)ld; (void)bf;
}
static void fp4_rows_512(const dt_fp4 *q, size_t n0, size_t n1, const float *x, size_t ldx, size_t T, float *y,
                         size_t ldy) {
    (void)q; (void)n0; (void)n1; (void)x; (void)ldx; (void)T; (void)y; (void)ldy;
}
#endif

void mm_fp4_decode(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld) {
    if (use_avx512() && c0 % 16 == 0 && nc % 16 == 0) fp4_decode_512(q, r0, nr, c0, nc, dst, ld, NULL);
    else dt_fp4_dequant(q, r0, nr, c0, nc, dst, ld);
}

/* Rows [r0, r0+nr) x cols [c0, c0+nc) of W as float32 into dst (nr, nc). */
static void panel(const WMat *w, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, bool simd) {
    const uint8_t *b = w->data;
    size_t C = w->cols;
    if (w->dt == DT_F8_E4M3 && w->rscale) { dt_fp8_dequant_rows(b, C, w->rscale, r0, nr, c0, nc, dst, nc); return; }
    if (w->dt == DT_F8_E4M3) { dt_fp8_dequant(b, C, w->scale, w->scols, r0, nr, c0, nc, dst, nc); return; }
    if (w->fp4.enc != DT_FP4_NONE) { mm_fp4_decode(&w->fp4, r0, nr, c0, nc, dst, nc); return; }
    for (size_t i = 0; i < nr; i++) {
        size_t off = ((r0 + i) * C + c0) * dt_size(w->dt);
        if (w->dt == DT_F32) memcpy(dst + i * nc, b + off, nc * 4);
        else widen(w->dt, b + off, nc, dst + i * nc, simd);
    }
}

/* ================================================================ scratch */

void *mm_alloc(size_t bytes, const char *what) {
    void *p = NULL;
    size_t align = bytes >= ((size_t)2 << 20) ? (size_t)2 << 20 : 64;
    if (posix_memalign(&p, align, bytes ? bytes : 1) != 0) {
        al_err("out of memory for %s (%zu byte%s)", what, bytes, al_s(bytes));
        return NULL;
    }
    if (align > 64)
 madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

struct MmWork {
    int nthreads;
    float **pan;             /* (nthreads) panels of MM_PANEL_ROWS x MM_PANEL_COLS */
    uint16_t *xb;            /* BF16 activations (cap) */
    float *xr;               /* activations rounded to BF16, as float (cap) */
    uint32_t *xp;            /* BF16 activation pairs packed for the token-lane tiles (pcap) */
    float *xs;               /* activations split even / odd per 32 columns for the FP4 tiles (scap) */
    float *wx;               /* mm_xw_in_place(false): one (in, out) weight widened whole (wxcap) */
    size_t xcap, rcap, pcap, scap, wxcap;
};

MmWork *mm_work_new(int nthreads) {
    MmWork *wk = al_calloc(1, sizeof *wk, "matmul scratch");
    if (!wk) return NULL;
    wk->nthreads = nthreads > 0 ? nthreads : al_threads();
    wk->pan = al_calloc((size_t)wk->nthreads, sizeof *wk->pan, "matmul scratch");
    if (!wk->pan) { free(wk); return NULL; }
    return wk;
}

void mm_work_free(MmWork *wk) {
    if (!wk) return;
    for (int i = 0; i < wk->nthreads; i++) free(wk->pan[i]);
    free(wk->pan);
    free(wk->xb);
    free(wk->xr);
    free(wk->xp);
    free(wk->xs);
    free(wk->wx);
    free(wk);
}

int mm_work_threads(const MmWork *wk) { return wk->nthreads; }

/* Allocates every worker's panel on first use. */
static int pan_fit(MmWork *wk) {
    for (int i = 0; i < wk->nthreads; i++)
        if (!wk->pan[i] && !(wk->pan[i] = mm_alloc((size_t)MM_PANEL_ROWS * MM_PANEL_COLS * sizeof(float), "a weight panel")))
            return AL_ERR;
    return AL_OK;
}

/* Makes *p hold n elements of size elt (contents not kept). */
static int buf_fit(void **p, size_t *cap, size_t n, size_t elt, const char *what) {
    if (n <= *cap && *p) return AL_OK;
    size_t bytes;
    if (!al_mul_ok(n, elt, &bytes, what)) return AL_ERR;
    void *q = mm_alloc(bytes, what);
    if (!q) return AL_ERR;
    free(*p);
    *p = q;
    *cap = n;
    return AL_OK;
}

/* ================================================================ the float32 route */

typedef struct {
    const WMat *W;
    const float *x;
    size_t ldx, T;
    float *y;
    size_t ldy, nb;          /* rows per unit */
    MmWork *wk;
    bool simd;
} f32_job;

/* Unit i: output columns [i nb, +nb) over panels of MM_PANEL_COLS, accumulated by sgemm. */
static int f32_unit(size_t i, int worker, void *ud) {
    f32_job *j = ud;
    const WMat *W = j->W;
    size_t n0 = i * j->nb, nr = W->rows - n0 < j->nb ? W->rows - n0 : j->nb, K = W->cols;
    float *buf = j->wk->pan[worker];
    for (size_t k0 = 0; k0 < K; k0 += MM_PANEL_COLS) {
        size_t kc = K - k0 < MM_PANEL_COLS ? K - k0 : MM_PANEL_COLS;
        panel(W, n0, nr, k0, kc, buf, j->simd);
        if (j->T == 1) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)nr, (int)kc, 1.f, buf, (int)kc, j->x + k0, 1, k0 ? 1.f : 0.f,
                        j->y + n0, 1);
        } else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->T, (int)nr, (int)kc, 1.f, j->x + k0, (int)j->ldx,
                        buf, (int)kc, k0 ? 1.f : 0.f, j->y + n0, (int)j->ldy);
    }
    return AL_OK;
}

/* Rows per unit: the rows split evenly over the workers, in blocks of at most `most`, multiples
 * of `mult`. */
static size_t unit_rows(size_t N, int nthreads, size_t most, size_t mult) {
    size_t per = (N + (size_t)nthreads - 1) / (size_t)nthreads;
    per = (per + mult - 1) / mult * mult;
    if (per > most) per = most / mult * mult;
    return per ? per : mult;
}

/* Products below this many multiply-adds run on the calling thread (waking the pool's workers costs
 * more: ~1 us spinning, ~10 us asleep; a 2^18 multiply-add BF16 product at T = 1 reads 512 KB). It
 * was 2^21 while every product started and joined its threads (~50-100 us). */
#define MM_SMALL ((size_t)1 << 18)
#define MM_SMALL_SWEEP ((size_t)1 << 21)

/* The units of a product of `work` multiply-adds on the pool's workers (one BLAS thread each). */
static int run_units(MmWork *wk, size_t N, size_t nb, size_t work, sweep_task_fn fn, void *job) {
    size_t units = (N + nb - 1) / nb;
    bool pool = !atomic_load(&pool_off);
    if (units == 1 || wk->nthreads == 1 || work < (pool ? MM_SMALL : MM_SMALL_SWEEP)) {
        int rc = AL_OK;
        for (size_t i = 0; i < units && rc == AL_OK; i++) rc = fn(i, 0, job);
        return rc;
    }
    return pool ? pool_run(units, wk->nthreads, fn, job) : sweep_run(units, wk->nthreads, fn, job);
}


/* ================================================================ register tiles */

#define TILE_KC 4096         /* columns per pass over a unit's rows (96 x 4096 16-bit weights: 768 KB) */
#define TILE_NB 96           /* rows per unit: 16 tiles of 6 */

/* Rows per unit of the tiles: at most TILE_NB, a multiple of 6, so many units that they split evenly
 * over the workers (k_proj's 256 rows at T = 1: 4 units of 66, not 3 of 96 on 2 workers). */
static size_t tile_rows(size_t N, int nthreads) {
    size_t nt = nthreads > 0 ? (size_t)nthreads : 1, u = (N + TILE_NB - 1) / TILE_NB;
    u = (u + nt - 1) / nt * nt;
    size_t nb = ((N + u - 1) / u + 5) / 6 * 6;
    return nb ? nb : 6;
}

/* A tile kernel: NT tokens (rows of x, stride ldx elements) x NN weight rows (16-bit, stride ldw)
 * over kc columns into y (stride ldy), added to y when acc. */
typedef void (*tile_fn)(const void *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y, size_t ldy, bool acc);
typedef struct { tile_fn t46, t16, t41, t11; } Tiles;   /* 4x6, 1x6, 4x1, 1x1 */

#if MM_X86
/* The accumulators of an NT x NN tile: zeroed; summed across lanes into y (added when acc). */
TGT_512 static inline __attribute__((always_inline)) void tile_zero(__m512 a[4][6], const int NT, const int NN) {
#pragma GCC unroll 8
    for (int i = 0; i < NT; i++)
#pragma GCC unroll 8
        for (int n = 0; n < NN; n++) a[i][n] = _mm512_setzero_ps();
}

TGT_512 static inline __attribute__((always_inline)) void tile_store(__m512 a[4][6], float *y, size_t ldy, bool acc,
                                                                      const int NT, const int NN) {
#pragma GCC unroll 8
    for (int i = 0; i < NT; i++)
#pragma GCC unroll 8
        for (int n = 0; n < NN; n++) {
            float s = _mm512_reduce_add_ps(a[i][n]);
            y[i * ldy + n] = acc ? y[i * ldy + n] + s : s;
        }
}

/* y[t][n] (+)= sum_k x[t][k] w[n][k] for BF16 x and w: pairs accumulated in float32 by vdpbf16ps,
 * each accumulator summed across its 16 lanes at the end. */
TGT_BF16 static inline __attribute__((always_inline)) void
bf_tile(const uint16_t *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y, size_t ldy, bool acc,
        const int NT, const int NN) {
    __m512 a[4][6];
    tile_zero(a, NT, NN);
    for (size_t k = 0; k < kc; k += 32) {
        __mmask32 m = kc - k >= 32 ? (__mmask32)~0u : (__mmask32)((1ull << (kc - k)) - 1);
        __m512bh xv[4];
#pragma GCC unroll 8
        for (int i = 0; i < NT; i++) xv[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, (const void *)(x + i * ldx + k));
#pragma GCC unroll 8
        for (int n = 0; n < NN; n++) {
            __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, (const void *)(w + n * ldw + k));
#pragma GCC unroll 8
            for (int i = 0; i < NT; i++) a[i][n] = _mm512_dpbf16_ps(a[i][n], xv[i], wv);
        }
    }
    tile_store(a, y, ldy, acc, NT, NN);
}

/* 16 stored 16-bit weights (the first of mask m) widened to float32: BF16 by a shift, F16 by vcvtph2ps. */
TGT_512 static inline __attribute__((always_inline)) __m512 widen16(const uint16_t *p, __mmask16 m, const bool f16) {
    __m256i h = _mm256_maskz_loadu_epi16(m, (const void *)p);
    if (f16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The same tile for float32 x and BF16 / F16 w widened in registers, float32 FMA. */
TGT_512 static inline __attribute__((always_inline)) void
wf_tile(const float *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y, size_t ldy, bool acc,
        const int NT, const int NN, const bool f16) {
    __m512 a[4][6];
    tile_zero(a, NT, NN);
    for (size_t k = 0; k < kc; k += 16) {
        __mmask16 m = kc - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (kc - k)) - 1);
        __m512 xv[4];
#pragma GCC unroll 8
        for (int i = 0; i < NT; i++) xv[i] = _mm512_maskz_loadu_ps(m, x + i * ldx + k);
#pragma GCC unroll 8
        for (int n = 0; n < NN; n++) {
            __m512 wv = widen16(w + n * ldw + k, m, f16);
#pragma GCC unroll 8
            for (int i = 0; i < NT; i++) a[i][n] = _mm512_fmadd_ps(xv[i], wv, a[i][n]);
        }
    }
    tile_store(a, y, ldy, acc, NT, NN);
}

#define TILE_FNS(name, tgt, call)                                                                                     \
    tgt static void name##_4x6(const void *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y,       \
                               size_t ldy, bool acc) { call(4, 6); }                                                 \
    tgt static void name##_1x6(const void *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y,       \
                               size_t ldy, bool acc) { call(1, 6); }                                                 \
    tgt static void name##_4x1(const void *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y,       \
                               size_t ldy, bool acc) { call(4, 1); }                                                 \
    tgt static void name##_1x1(const void *x, size_t ldx, const uint16_t *w, size_t ldw, size_t kc, float *y,       \
                               size_t ldy, bool acc) { call(1, 1); }                                                 \
    static const Tiles name##_tiles = {name##_4x6, name##_1x6, name##_4x1, name##_1x1};
#define CALL_BF(nt, nn) bf_tile(x, ldx, w, ldw, kc, y, ldy, acc, nt, nn)
#define CALL_WB(nt, nn) wf_tile(x, ldx, w, ldw, kc, y, ldy, acc, nt, nn, false)
#define CALL_WH(nt, nn) wf_tile(x, ldx, w, ldw, kc, y, ldy, acc, nt, nn, true)
TILE_FNS(bf, TGT_BF16, CALL_BF)
TILE_FNS(wb, TGT_512, CALL_WB)
TILE_FNS(wh, TGT_512, CALL_WH)

/* n floats rounded to BF16 (round to nearest even, as dt_f32_to_bf16; NaN stays NaN). */
TGT_BF16 static size_t to_bf16_512(const float *src, size_t n, uint16_t *dst) {
    size_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + j + 16), _mm512_loadu_ps(src + j));
        _mm512_storeu_si512((void *)(dst + j), (__m512i)v);
    }
    return j;
}
#else
static const Tiles bf_tiles, wb_tiles, wh_tiles;     /* never used: no x86 kernels */
static size_t to_bf16_512(const float *src, size_t n, uint16_t *dst) { (void)src; (void)n; (void)dst; return 0; }
#endif

/* ================================================================ token-lane tiles (vdpbf16ps, T >= 16) */

/* From BT_MIN tokens on, bf16 mode packs the activations once per product as BF16 pairs, 16 tokens to
 * a vector (xp[b][kp][i] = (x[16b+i][2kp], x[16b+i][2kp+1])), and each vdpbf16ps multiplies one such
 * vector by a weight pair broadcast from the mapping: the 16 lanes are 16 tokens of one output, so
 * the sums need no reduction across lanes (the 4 x 6 tiles above spend ~15 % of their time there) and
 * the weights need no packing. A tile is NV vectors (16 NV tokens) x NN rows (NV NN <= 24
 * accumulators: 4 x 6, 3 x 8, 2 x 12, 1 x 12), over all K. */
#define BT_MIN 16            /* tokens from which bf16 mode takes the token-lane tiles */
#define BT_TB 64             /* tokens per block: 4 vectors */
#define BT_NB 96             /* rows per unit (a multiple of 6, 8 and 12) */

#define BT_KC 2048           /* columns per pass: a block's packed pairs of them (256 KB) stay in L2 as K grows */

typedef void (*bt_fn)(const uint32_t *xp, size_t xs, const uint16_t *w, size_t ldw, size_t K, float *acc, bool first);
typedef struct { bt_fn many[5], tail[5][3]; int nn[5]; } BtTiles;  /* [NV]: NN-row tiles; 4-, 2- and 1-row tiles */

#if MM_X86
/* NV x 16 tokens (packed pairs from xp, vectors xs dwords apart) against NN weight rows (w, stride ldw)
 * over K columns (one pass of bt_unit's; an odd last column pairs with the packed zero), added to the
 * lane sums acc (lanes[n][v]: 16 tokens' sums of row n; first: start from zero). The sums leave the
 * registers as they are, so K in passes gives the bits of K in one. */
TGT_BF16 static inline __attribute__((always_inline)) void
bt_tile(const uint32_t *xp, size_t xs, const uint16_t *w, size_t ldw, size_t K, float *acc, bool first,
        const int NV, const int NN) {
    __m512 a[4][12];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
#pragma GCC unroll 12
        for (int n = 0; n < NN; n++) a[v][n] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + (n * 4 + v) * 16);
    const uint32_t *xq = xp;
    const uint16_t *wq = w;
    for (size_t kp = 0; kp < K / 2; kp++, xq += 16, wq += 2) {
        __m512bh xv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) xv[v] = (__m512bh)_mm512_loadu_si512((const void *)(xq + v * xs));
#pragma GCC unroll 12
        for (int n = 0; n < NN; n++) {
            uint32_t pr;
            memcpy(&pr, wq + n * ldw, sizeof pr);
            __m512bh wb = (__m512bh)_mm512_set1_epi32((int)pr);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) a[v][n] = _mm512_dpbf16_ps(a[v][n], xv[v], wb);
        }
    }
    if (K % 2) {
        __m512bh xv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) xv[v] = (__m512bh)_mm512_loadu_si512((const void *)(xq + v * xs));
#pragma GCC unroll 12
        for (int n = 0; n < NN; n++) {
            __m512bh wb = (__m512bh)_mm512_set1_epi32((int)wq[n * ldw]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) a[v][n] = _mm512_dpbf16_ps(a[v][n], xv[v], wb);
        }
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
#pragma GCC unroll 12
        for (int n = 0; n < NN; n++) _mm512_store_ps(acc + (n * 4 + v) * 16, a[v][n]);
}

#define BT_FN(nv, nn)                                                                                                 \
    TGT_BF16 static void bt_##nv##x##nn(const uint32_t *xp, size_t xs, const uint16_t *w, size_t ldw, size_t K,      \
                                        float *acc, bool first) { bt_tile(xp, xs, w, ldw, K, acc, first, nv, nn); }
BT_FN(4, 6) BT_FN(3, 8) BT_FN(2, 12) BT_FN(1, 12)
BT_FN(4, 4) BT_FN(3, 4) BT_FN(2, 4) BT_FN(1, 4) BT_FN(4, 2) BT_FN(3, 2) BT_FN(2, 2) BT_FN(1, 2)
BT_FN(4, 1) BT_FN(3, 1) BT_FN(2, 1) BT_FN(1, 1)
static const BtTiles bt_tiles = {
    {NULL, bt_1x12, bt_2x12, bt_3x8, bt_4x6},
    {{NULL}, {bt_1x4, bt_1x2, bt_1x1}, {bt_2x4, bt_2x2, bt_2x1}, {bt_3x4, bt_3x2, bt_3x1}, {bt_4x4, bt_4x2, bt_4x1}},
    {0, 12, 12, 8, 6}};

/* Transposes 16 vectors of 16 dwords (lane j of r[i] -> lane i of r[j]). */
TGT_512 static inline __attribute__((always_inline)) void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)                   /* r[i + c]: column 4L + c of rows i..i+3, per 128-bit lane L */
        for (int j = 0; j < 2; j++) {
            r[i + 2 * j] = _mm512_unpacklo_epi64(t[i + j], t[i + 2 + j]);
            r[i + 2 * j + 1] = _mm512_unpackhi_epi64(t[i + j], t[i + 2 + j]);
        }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + 4 + j], 0x88);
            t[i + 4 + j] = _mm512_shuffle_i32x4(r[i + j], r[i + 4 + j], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
    }
}

/* x (T, K) rounded to BF16 (round to nearest even) and packed in pairs, 16 tokens to a vector, into xp
 * ((T + 15) / 16 blocks of (K + 1) / 2 x 16 dwords); missing tokens and an odd K's partner are 0. Per
 * 16 tokens x 32 columns: 16 vcvtne2ps2bf16, one 16 x 16 transpose. */
TGT_BF16 static void bt_pack(const float *x, size_t ldx, size_t T, size_t K, uint32_t *xp) {
    size_t KP = (K + 1) / 2;
    for (size_t t0 = 0; t0 < T; t0 += 16) {
        uint32_t *blk = xp + t0 * KP;
        for (size_t k0 = 0; k0 < K; k0 += 32) {
            size_t nk = K - k0 < 32 ? K - k0 : 32;
            __mmask16 m0 = nk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nk) - 1);
            __mmask16 m1 = nk > 16 ? (__mmask16)((1ull << (nk - 16)) - 1) : 0;
            __m512i r[16];
            for (size_t i = 0; i < 16; i++) {
                const float *p = x + (t0 + i) * ldx + k0;
                r[i] = t0 + i < T ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, p + 16), _mm512_maskz_loadu_ps(m0, p))
                                  : _mm512_setzero_si512();
            }
            transpose16(r);
            for (size_t j = 0; j < (nk + 1) / 2; j++) _mm512_storeu_si512((void *)(blk + (k0 / 2 + j) * 16), r[j]);
        }
    }
}
#else
static const BtTiles bt_tiles;       /* never used: no x86 kernels */
static void bt_pack(const float *x, size_t ldx, size_t T, size_t K, uint32_t *xp) { (void)x; (void)ldx; (void)T; (void)K; (void)xp; }
#endif

typedef struct {
    const WMat *W;
    const uint32_t *xp;      /* bt_pack's */
    size_t T;
    float *y;
    size_t ldy;
} bt_job;

/* Unit i: rows [i BT_NB, +BT_NB) against every block of BT_TB tokens, in passes of BT_KC columns (a
 * block's packed pairs of one pass stay in L2 while the unit's rows stream past them: at hidden 8192
 * or an MLP's 28672 the whole row's, 1-3.6 MB, did not); the sums gather in lanes (row, vector, lane),
 * then go to y a token's row at a time (the tiles' 64 scattered rows of y, 8 KB apart when N is 2048,
 * would share L1 sets). */
static int bt_unit(size_t i, int worker, void *ud) {
    (void)worker;
    bt_job *j = ud;
    const uint16_t *W = j->W->data;
    size_t K = j->W->cols, xs = (K + 1) / 2 * 16, T = j->T;
    size_t n0 = i * BT_NB, n1 = j->W->rows - n0 < BT_NB ? j->W->rows : n0 + BT_NB;
    float lanes[BT_NB * 4 * 16] __attribute__((aligned(64)));   /* [row][vector][lane]: 24 KB */
    for (size_t t = 0; t < T; t += BT_TB) {
        size_t nt = T - t < BT_TB ? T - t : BT_TB, nv = (nt + 15) / 16, nn = (size_t)bt_tiles.nn[nv];
        for (size_t k0 = 0; k0 < K; k0 += BT_KC) {
            size_t kc = K - k0 < BT_KC ? K - k0 : BT_KC, n = n0;
            const uint32_t *xp = j->xp + t / 16 * xs + k0 / 2 * 16;
            const uint16_t *Wk = W + k0;
            for (; n + nn <= n1; n += nn) bt_tiles.many[nv](xp, xs, Wk + n * K, K, kc, lanes + (n - n0) * 64, k0 == 0);
            for (int s = 0, r = 4; s < 3; s++, r /= 2)   /* the last rows: 4, 2, 1 at a time */
                for (; n + (size_t)r <= n1; n += (size_t)r)
                    bt_tiles.tail[nv][s](xp, xs, Wk + n * K, K, kc, lanes + (n - n0) * 64, k0 == 0);
        }
        for (size_t tk = 0; tk < nt; tk++) {
            float *dst = j->y + (t + tk) * j->ldy + n0;
            const float *src = lanes + tk / 16 * 16 + tk % 16;
            for (size_t r = 0; r < n1 - n0; r++) dst[r] = src[r * 64];
        }
    }
    return AL_OK;
}

/* bf16 mode from BT_MIN tokens on: x packed once into wk->xp, then the units: AMX tiles where
 * matmul_amx_ok(), else vdpbf16ps. */
static int xwt_bt(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    size_t K = W->cols, n;
    if (!al_mul_ok((T + 15) / 16 * 16, (K + 1) / 2, &n, "packed activations") ||
        buf_fit((void **)&wk->xp, &wk->pcap, n, sizeof(uint32_t), "packed BF16 activations"))
        return AL_ERR;
    bt_pack(x, ldx, T, K, wk->xp);
    if (matmul_amx_ok()) {           /* the same packed pairs on the AMX tile unit (matmul_amx.h) */
        MatmulAmxJob a = {.W = W->data, .N = W->rows, .K = K, .xp = wk->xp, .T = T, .y = y, .ldy = ldy,
                          .nthreads = wk->nthreads};
        if (matmul_amx_begin(&a)) return AL_ERR;
        int rc = run_units(wk, W->rows, MATMUL_AMX_NB, T * W->rows * K, matmul_amx_unit, &a);
        matmul_amx_end(&a);
        return rc;
    }
    bt_job j = {.W = W, .xp = wk->xp, .T = T, .y = y, .ldy = ldy};
    return run_units(wk, W->rows, BT_NB, T * W->rows * K, bt_unit, &j);
}

typedef struct {
    const WMat *W;
    const char *x;           /* (T, K) of xe-byte elements, row stride ldx elements */
    size_t ldx, xe, T;
    float *y;
    size_t ldy, nb;          /* nb: rows per unit (tile_rows) */
    const Tiles *tl;
} tile_job;

/* The tiles of rows [n0, n1) for tokens [t, t + (four ? 4 : 1)) over columns [k0, k0 + kc). */
static void tile_row(const tile_job *j, size_t t, bool four, size_t n0, size_t n1, size_t k0, size_t kc) {
    const uint16_t *W = j->W->data;
    size_t K = j->W->cols;
    const void *x = j->x + (t * j->ldx + k0) * j->xe;
    float *y = j->y + t * j->ldy;
    tile_fn f6 = four ? j->tl->t46 : j->tl->t16, f1 = four ? j->tl->t41 : j->tl->t11;
    size_t n = n0;
    for (; n + 6 <= n1; n += 6) f6(x, j->ldx, W + n * K + k0, K, kc, y + n, j->ldy, k0 > 0);
    for (; n < n1; n++) f1(x, j->ldx, W + n * K + k0, K, kc, y + n, j->ldy, k0 > 0);
}

/* Unit i: rows [i nb, +nb) in passes of TILE_KC columns; per pass, every 4 tokens against
 * every 6 rows (the unit's block stays in L2, the 4 token rows in L1), the last T % 4 one by one. */
static int tile_unit(size_t i, int worker, void *ud) {
    (void)worker;
    tile_job *j = ud;
    size_t K = j->W->cols, n0 = i * j->nb, n1 = j->W->rows - n0 < j->nb ? j->W->rows : n0 + j->nb, T = j->T;
    for (size_t k0 = 0; k0 < K; k0 += TILE_KC) {
        size_t kc = K - k0 < TILE_KC ? K - k0 : TILE_KC, t = 0;
        for (; t + 4 <= T; t += 4) tile_row(j, t, true, n0, n1, k0, kc);
        for (; t < T; t++) tile_row(j, t, false, n0, n1, k0, kc);
    }
    return AL_OK;
}

static int run_tiles(MmWork *wk, const WMat *W, const void *x, size_t ldx, size_t xe, size_t T, float *y, size_t ldy,
                     const Tiles *tl) {
    tile_job j = {.W = W, .x = x, .ldx = ldx, .xe = xe, .T = T, .y = y, .ldy = ldy, .nb = tile_rows(W->rows, wk->nthreads),
                  .tl = tl};
    return run_units(wk, W->rows, j.nb, T * W->rows * W->cols, tile_unit, &j);
}

/* True when an FP4 weight's values before its per-tensor scale are BF16 numbers: E2M1 (2 significant
 * bits) times an E8M0 power of two or an E4M3 scale (4 bits), float's exponent range. Not
 * compressed-tensors' divided scale, nor INT4's BF16 / F16 / F32 group scales. */
static bool fp4_bf16_exact(const dt_fp4 *q) { return q->enc == DT_FP4_MXFP4 || (q->enc == DT_FP4_NVFP4 && !q->gdiv); }

#define FP4_MANY 64          /* tokens from which FP4 products take the panels and sgemm again */

typedef struct {
    const WMat *W;
    const float *x;
    size_t ldx, T;
    float *y;
    size_t ldy;
    MmWork *wk;              /* fp4_unit: the workers' panels */
} few_job;

/* Between FP4_FEW and FP4_MANY tokens, for fp4_bf16_exact weights: unit i decodes rows [i TILE_NB,
 * +TILE_NB) a pass of TILE_KC columns at a time into the worker's panel as BF16 (768 KB: it stays in
 * L2) and runs the BF16 weights' float32 tiles over it -- the products a BF16 twin's; sgemm would
 * copy the panel once more (its packing), which few tokens cannot amortize. NVFP4's scale_2
 * multiplies each output once, after its sum. */
static int fp4_unit(size_t i, int worker, void *ud) {
    few_job *j = ud;
    const WMat *W = j->W;
    size_t K = W->cols, n0 = i * TILE_NB, n1 = W->rows - n0 < TILE_NB ? W->rows : n0 + TILE_NB, T = j->T;
    uint16_t *buf = (uint16_t *)(void *)j->wk->pan[worker];
    for (size_t k0 = 0; k0 < K; k0 += TILE_KC) {
        size_t kc = K - k0 < TILE_KC ? K - k0 : TILE_KC;
        fp4_decode_512(&W->fp4, n0, n1 - n0, k0, kc, NULL, kc, buf);
        for (size_t t = 0; t < T; t += t + 4 <= T ? 4 : 1) {
            bool four = t + 4 <= T;
            tile_fn f6 = four ? wb_tiles.t46 : wb_tiles.t16, f1 = four ? wb_tiles.t41 : wb_tiles.t11;
            const float *xt = j->x + t * j->ldx + k0;
            float *yt = j->y + t * j->ldy;
            size_t n = n0;
            for (; n + 6 <= n1; n += 6) f6(xt, j->ldx, buf + (n - n0) * kc, kc, kc, yt + n, j->ldy, k0 > 0);
            for (; n < n1; n++) f1(xt, j->ldx, buf + (n - n0) * kc, kc, kc, yt + n, j->ldy, k0 > 0);
        }
    }
    if (W->fp4.gscale != 1.0f)
        for (size_t t = 0; t < T; t++)
            for (size_t n = n0; n < n1; n++) j->y[t * j->ldy + n] *= W->fp4.gscale;
    return AL_OK;
}

/* Unit i: rows [i TILE_NB, +TILE_NB) of an FP4 weight for at most FP4_FEW tokens. */
static int few_unit(size_t i, int worker, void *ud) {
    (void)worker;
    few_job *j = ud;
    size_t n0 = i * TILE_NB, n1 = j->W->rows - n0 < TILE_NB ? j->W->rows : n0 + TILE_NB;
    fp4_rows_512(&j->W->fp4, n0, n1, j->x, j->ldx, j->T, j->y, j->ldy);
    return AL_OK;
}

/* ---------------------------------------------------------------- FP4 / INT4 register tiles, 1-63 tokens */

#define FQ_KC 1024           /* columns per pass: 8 tokens' activations (32 KB) stay in L1 */
#define FQ_NT 8              /* tokens per tile at most */

/* An FP4 / INT4 weight's 32 columns [32c, 32c + 32) of a row are 16 bytes, byte i holding columns 2i
 * (low nibble) and 2i + 1. Widened to 16 dwords, byte i in lane i, they index a 16-entry table
 * directly for the even columns (vpermps reads the index's low 4 bits) and shifted right by 4 for the
 * odd ones: two lookups and one shift per 32 values, against the panel decoder's unpacking per 16.
 * The table is the code values times the block's scale (for NVFP4's 16-wide blocks the unscaled
 * table's values times a vector of the two scales, lanes 0-7 the first block's: one multiply per 16
 * values, no two-table vpermt2ps and its index blend), so each value is code * scale as tensor.c's
 * decoder computes it; NVFP4's multiplying scale_2 multiplies each output
 * once, after its sum (as the BF16 blocks did). The activations are split once per product into even
 * and odd columns per 32 (fq_split) to meet them, the 8 tokens of a tile interleaved per 32 columns
 * so that the tile reads them at constant offsets from one pointer (with a row pointer per token the
 * 8-token tiles ran out of general registers and spilled them to vector registers in the loop). A
 * tile: NT <= 8 tokens x NR rows, each sum in two accumulators (even, odd) so that NT NR >= 4 keeps 8
 * FMA chains in flight. */
static bool fq_ok(const dt_fp4 *q) { return q->cols > 0 && q->cols % 32 == 0; }

/* x (T, K) into xs (T K floats), in groups of FQ_NT tokens (a tile's): the group of tokens [g, g + nt),
 * nt <= 8, from xs + g K on, per 32 columns c its nt tokens' 32 values in turn (token t's at
 * 32 (c nt + t) from the group's start, c counted in 32s), each the 16 even columns, then the 16 odd
 * ones. */
static void fq_split(const float *x, size_t ldx, size_t T, size_t K, float *xs) {
    for (size_t g = 0; g < T; g += FQ_NT) {
        size_t nt = T - g < FQ_NT ? T - g : FQ_NT;
        for (size_t t = 0; t < nt; t++)
            for (size_t c = 0; c < K; c += 32) {
                float *d = xs + g * K + c * nt + t * 32;
                const float *r = x + (g + t) * ldx + c;
                for (size_t i = 0; i < 16; i++) {
                    d[i] = r[2 * i];
                    d[16 + i] = r[2 * i + 1];
                }
            }
    }
}

#if MM_X86
/* 16 block scales from p (nb scales a row, so p's 16 are consecutive in one row or across rows: the
 * layout is (rows, nb) row-major either way) as fp4_scale gives them: E8M0 built from its bits (0 the
 * subnormal 2^-127, 0xFF NaN), E4M3 from the table, INT4's BF16 / F16 / F32 widened. */
TGT_512 static __m512 fq_scale16(const dt_fp4 *q, const uint8_t *p, const float *e4) {
    if (q->enc == DT_FP4_INT4) {
        if (q->sdt == DT_F32) return _mm512_loadu_ps(p);
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
        if (q->sdt == DT_F16) return _mm512_cvtph_ps(h);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    if (q->enc == DT_FP4_NVFP4) return _mm512_i32gather_ps(v, e4, 4);
    __m512i f = _mm512_slli_epi32(v, 23);
    f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(v, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
    f = _mm512_mask_mov_epi32(f, _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(0xff)), _mm512_set1_epi32(0x7fc00000));
    return _mm512_castsi512_ps(f);
}

/* n (a multiple of 16) scales from q->scale's element e0 on into sc, a dividing global scale applied. */
TGT_512 static void fq_scales_512(const dt_fp4 *q, size_t e0, size_t n, float *sc) {
    const size_t es = q->enc == DT_FP4_INT4 ? dt_size(q->sdt) : 1;
    const float *e4 = gbf_e4m3_f32();
    const __m512 g = _mm512_set1_ps(q->gscale);
    for (size_t i = 0; i < n; i += 16) {
        __m512 v = fq_scale16(q, q->scale + (e0 + i) * es, e4);
        _mm512_storeu_ps(sc + i, q->gdiv ? _mm512_div_ps(v, g) : v);
    }
}
#else
static void fq_scales_512(const dt_fp4 *q, size_t e0, size_t n, float *sc) { (void)q; (void)e0; (void)n; (void)sc; }
#endif

/* The block scales of rows [n0, n0 + nr) as floats into sc (row stride K / B), a dividing global
 * scale applied: fp4_scale's values, 16 at a time (fq_scale16), the last few one by one. */
static void fq_scales(const dt_fp4 *q, size_t n0, size_t nr, float *sc) {
    const size_t nb = q->cols / dt_fp4_traits(q->enc)->block, es = q->enc == DT_FP4_INT4 ? dt_size(q->sdt) : 1;
    const float *e4 = gbf_e4m3_f32();
    size_t all = nr * nb, done = all / 16 * 16;        /* the unit's scales: one run of nr nb in the tensor */
    fq_scales_512(q, n0 * nb, done, sc);
    for (size_t k = done; k < all; k++) {
        float s;
        if (q->enc != DT_FP4_INT4) s = fp4_scale(q, e4, n0 + k / nb, k % nb, nb);
        else {
            const uint8_t *p = q->scale + (n0 * nb + k) * es;
            uint16_t h;
            if (q->sdt == DT_F32) memcpy(&s, p, 4);
            else {
                memcpy(&h, p, 2);
                s = q->sdt == DT_BF16 ? dt_bf16_to_f32(h) : dt_f16_to_f32(h);
            }
        }
        sc[k] = q->gdiv ? s / q->gscale : s;
    }
}

#if MM_X86
/* The scales a tile reads: one per 32 values (MXFP4, INT4: sc the rows' floats), NVFP4's per 16 as
 * floats (sc the rows' scales, decoded once per unit: from 5 tokens on, where a unit's rows are read
 * once per 8 tokens) or as E4M3 codes (sc the table of the 256 codes' scales that q's scale bytes
 * index: at 1-4 tokens, where decoding a unit's scales cost a tenth of a one-token product). */
enum { FQ_B32, FQ_B16, FQ_B16_TAB };

/* y[t][n + r] (+)= sum over columns [k0, k0 + kc) of x[t] W[n + r] for NT tokens (xs: their group in
 * fq_split's layout) and NR rows; sc: per mode (above), the floats with stride nb a row; pf, unless
 * NULL: the codes of the next group's first row, its NR rows' lines at the columns read prefetched
 * into L2 (one per 128 columns: a 64-byte line). */
TGT_512 static inline __attribute__((always_inline)) void
fq_tile(const dt_fp4 *q, const float *sc, size_t nb, size_t n, const float *xs, size_t k0, size_t kc, float *y,
        size_t ldy, bool acc, const uint8_t *pf, const int NT, const int NR, const int mode) {
    const size_t K = q->cols;
    const __m512 lut = _mm512_loadu_ps(q->enc == DT_FP4_INT4 ? fp4_int4 : fp4_e2m1);
    __m512 ae[8][FQ_NT], ao[8][FQ_NT];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) ae[r][t] = ao[r][t] = _mm512_setzero_ps();
    for (size_t c = k0; c < k0 + kc; c += 32) {
        __m512 xe[4], xo[4];             /* up to 4 tokens in registers; more read by the FMAs (NR 1) */
        if (pf && c % 128 == 0)
#pragma GCC unroll 8
            for (int r = 0; r < NR; r++) _mm_prefetch((const char *)(pf + (size_t)r * (K / 2) + c / 2), _MM_HINT_T1);
        const float *xc = xs + c * (size_t)NT;     /* the NT tokens' 32 values each */
#pragma GCC unroll 4
        for (int t = 0; t < NT && NT <= 4; t++) {
            xe[t] = _mm512_loadu_ps(xc + 32 * t);
            xo[t] = _mm512_loadu_ps(xc + 32 * t + 16);
        }
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            const uint8_t *cp = q->codes + (n + (size_t)r) * (K / 2) + c / 2;
            __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)cp));
            __m512 ve, vo;
            if (mode != FQ_B32) {   /* lanes 0-7 (columns 0-15) the first block's, 8-15 the second's */
                __m512 sv;
                if (mode == FQ_B16) {
                    const float *s = sc + (size_t)r * nb + c / 16;
                    sv = _mm512_mask_broadcastss_ps(_mm512_set1_ps(s[0]), 0xff00, _mm_load_ss(s + 1));
                } else {
                    const uint8_t *s = q->scale + (n + (size_t)r) * nb + c / 16;
                    sv = _mm512_mask_broadcastss_ps(_mm512_set1_ps(sc[s[0]]), 0xff00, _mm_load_ss(sc + s[1]));
                }
                ve = _mm512_mul_ps(_mm512_permutexvar_ps(b, lut), sv);
                vo = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), lut), sv);
            } else {
                __m512 ls = _mm512_mul_ps(lut, _mm512_set1_ps(sc[(size_t)r * nb + c / 32]));
                ve = _mm512_permutexvar_ps(b, ls);
                vo = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), ls);
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                const float *xt = xc + 32 * t;
                ae[r][t] = _mm512_fmadd_ps(NT <= 4 ? xe[t % 4] : _mm512_loadu_ps(xt), ve, ae[r][t]);
                ao[r][t] = _mm512_fmadd_ps(NT <= 4 ? xo[t % 4] : _mm512_loadu_ps(xt + 16), vo, ao[r][t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            float v = _mm512_reduce_add_ps(_mm512_add_ps(ae[r][t], ao[r][t]));
            float *o = y + (size_t)t * ldy + n + (size_t)r;
            *o = acc ? *o + v : v;
        }
}

typedef void (*fq_fn)(const dt_fp4 *q, const float *sc, size_t nb, size_t n, const float *xs, size_t k0, size_t kc,
                      float *y, size_t ldy, bool acc, const uint8_t *pf);
/* The tiles of one pass: [NT - 1] the NR-row tile, the one-row tail, NR; tab: NVFP4's scales read
 * as E4M3 codes (FQ_B16_TAB), else decoded per unit (FQ_B16). */
typedef struct { fq_fn many[FQ_NT], one[FQ_NT]; int nr[FQ_NT]; bool tab; } FqTiles;
#define FQ_FN(pre, nv, nt, nr)                                                                                        \
    TGT_512 static void pre##_##nt##x##nr(const dt_fp4 *q, const float *sc, size_t nb, size_t n, const float *xs,   \
                                          size_t k0, size_t kc, float *y, size_t ldy, bool acc, const uint8_t *pf) { \
        if (q->enc == DT_FP4_NVFP4) fq_tile(q, sc, nb, n, xs, k0, kc, y, ldy, acc, pf, nt, nr, nv);                 \
        else fq_tile(q, sc, nb, n, xs, k0, kc, y, ldy, acc, pf, nt, nr, FQ_B32);                                    \
    }
FQ_FN(fq, FQ_B16, 1, 4) FQ_FN(fq, FQ_B16, 2, 2) FQ_FN(fq, FQ_B16, 3, 2) FQ_FN(fq, FQ_B16, 4, 1)
FQ_FN(fq, FQ_B16, 1, 1) FQ_FN(fq, FQ_B16, 2, 1) FQ_FN(fq, FQ_B16, 3, 1) FQ_FN(fq, FQ_B16, 5, 1)
FQ_FN(fq, FQ_B16, 6, 1) FQ_FN(fq, FQ_B16, 7, 1) FQ_FN(fq, FQ_B16, 8, 1)
FQ_FN(fv, FQ_B16_TAB, 1, 8) FQ_FN(fv, FQ_B16_TAB, 2, 4) FQ_FN(fv, FQ_B16_TAB, 3, 2) FQ_FN(fv, FQ_B16_TAB, 4, 2)
FQ_FN(fv, FQ_B16_TAB, 1, 1) FQ_FN(fv, FQ_B16_TAB, 2, 1) FQ_FN(fv, FQ_B16_TAB, 3, 1) FQ_FN(fv, FQ_B16_TAB, 4, 1)
/* passes of FQ_KC columns (8 tokens at a time, 5-63 tokens: one decode per 8 tokens' FMAs); all K
 * columns at once (1-4 tokens) */
static const FqTiles fq_tiles = {{fq_1x4, fq_2x2, fq_3x2, fq_4x1, fq_5x1, fq_6x1, fq_7x1, fq_8x1},
                                 {fq_1x1, fq_2x1, fq_3x1, fq_4x1, fq_5x1, fq_6x1, fq_7x1, fq_8x1}, {4, 2, 2, 1, 1, 1, 1, 1},
                                 false};
static const FqTiles fv_tiles = {{fv_1x8, fv_2x4, fv_3x2, fv_4x2}, {fv_1x1, fv_2x1, fv_3x1, fv_4x1}, {8, 4, 2, 2}, true};
#else
static const FqTiles fq_tiles = {{0}, {0}, {1, 1, 1, 1, 1, 1, 1, 1}, false},
                     fv_tiles = {{0}, {0}, {1, 1, 1, 1}, true};   /* never used */
#endif

typedef struct {
    const WMat *W;
    const float *xs;         /* fq_split's */
    size_t T;
    float *y;
    size_t ldy, nb;          /* nb: rows per unit */
    size_t kc;               /* columns per pass */
    const FqTiles *tl;
    MmWork *wk;              /* the workers' panels hold the unit's scales */
    float tab[256];          /* NVFP4: each E4M3 code's block scale (a dividing global scale applied) */
} fq_job;

/* Unit i: rows [i nb, +nb), their scales decoded once into the worker's panel (NVFP4's at 1-4 tokens:
 * looked up in j->tab by the tiles, one E4M3 code per 16 values: decoding them was a tenth of the
 * product at one token; from 5 tokens on decoded too, which spares the tiles two dependent loads per
 * 32 values every 8 tokens), then per pass of kc columns every 8 tokens against every NR rows (the
 * rows' codes stay in L1 / L2 across the tokens), each group prefetching the next group's codes. */
static int fq_unit(size_t i, int worker, void *ud) {
    fq_job *j = ud;
    const dt_fp4 *q = &j->W->fp4;
    size_t K = q->cols, nb = K / dt_fp4_traits(q->enc)->block, T = j->T, N = j->W->rows;
    size_t n0 = i * j->nb, n1 = N - n0 < j->nb ? N : n0 + j->nb;
    float *sc = j->wk->pan[worker];
    bool nv = q->enc == DT_FP4_NVFP4 && j->tl->tab;      /* its scale bytes index j->tab in the tiles */
    if (!nv) fq_scales(q, n0, n1 - n0, sc);
    for (size_t k0 = 0; k0 < K; k0 += j->kc) {
        size_t kc = K - k0 < j->kc ? K - k0 : j->kc;
        for (size_t t = 0; t < T; t += FQ_NT) {
            size_t nt = T - t < FQ_NT ? T - t : FQ_NT, nr = (size_t)j->tl->nr[nt - 1], n = n0;
            const float *xs = j->xs + t * K;
            float *y = j->y + t * j->ldy;
            for (; n + nr <= n1; n += nr)
                j->tl->many[nt - 1](q, nv ? j->tab : sc + (n - n0) * nb, nb, n, xs, k0, kc, y, j->ldy, k0 > 0,
                                    n + 2 * nr <= N ? q->codes + (n + nr) * (K / 2) : NULL);
            for (; n < n1; n++)
                j->tl->one[nt - 1](q, nv ? j->tab : sc + (n - n0) * nb, nb, n, xs, k0, kc, y, j->ldy, k0 > 0, NULL);
        }
    }
    if (!q->gdiv && q->gscale != 1.0f)
        for (size_t t = 0; t < T; t++)
            for (size_t n = n0; n < n1; n++) j->y[t * j->ldy + n] *= q->gscale;
    return AL_OK;
}

#define FV_MAXT 4            /* tokens up to which an FP4 product's rows go over all K columns at once */
#define FV_NB 128            /* rows per unit at most then (a multiple of 8) */

/* Rows per unit for T tokens: up to FV_MAXT tokens, as the one-token kernels split them (xwt_mv: at
 * most FV_NB, a multiple of 8, a multiple of the workers' count of units); else tile_rows'. */
static size_t fq_rows(size_t N, int nthreads, size_t T) {
    if (T > FV_MAXT) return tile_rows(N, nthreads);
    size_t nt = nthreads > 0 ? (size_t)nthreads : 1, u = (N + FV_NB - 1) / FV_NB;
    u = (u + nt - 1) / nt * nt;
    return ((N + u - 1) / u + 7) / 8 * 8;
}

/* An FP4 / INT4 product of fewer than FP4_MANY tokens on the register tiles: x split once into
 * wk->xs, the units on the pool. Up to FV_MAXT tokens (decoding) a unit's rows go in groups of 8 / 4 /
 * 2 over all K columns, each group prefetching the next (as the BF16 one-token kernels do); from
 * there on in passes of FQ_KC columns, 8 tokens at a time. */
static int xwt_fq(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    size_t K = W->cols, n;
    if (pan_fit(wk) || !al_mul_ok(T, K, &n, "activations") ||
        buf_fit((void **)&wk->xs, &wk->scap, n, sizeof(float), "split activations"))
        return AL_ERR;
    fq_split(x, ldx, T, K, wk->xs);
    bool fv = T <= FV_MAXT && !atomic_load(&mv_off);
    fq_job j = {.W = W, .xs = wk->xs, .T = T, .y = y, .ldy = ldy, .nb = fq_rows(W->rows, wk->nthreads, fv ? T : FP4_MANY),
                .kc = fv ? K : FQ_KC, .tl = fv ? &fv_tiles : &fq_tiles, .wk = wk};
    const float *e4 = gbf_e4m3_f32();
    for (int v = 0; v < 256 && W->fp4.enc == DT_FP4_NVFP4; v++) j.tab[v] = W->fp4.gdiv ? e4[v] / W->fp4.gscale : e4[v];
    return run_units(wk, W->rows, j.nb, T * W->rows * K, fq_unit, &j);
}

static int round_x(MmWork *wk, const float *x, size_t ldx, size_t T, size_t K, bool simd);

/* ---------------------------------------------------------------- one-token kernels (T <= MV_MAXT) */

/* Decoding multiplies one token (up to MV_MAXT): each weight is used T times after one read, so the
 * product runs at the speed memory streams the weights. The tiles above read a unit's rows in passes
 * of TILE_KC columns, 6 rows at a time, and leave the streams to the hardware prefetcher, which stops
 * at every 4 KB page (a 2048-column BF16 row is one page). Here a unit's rows go in groups of NR
 * (8 at T <= 2) over all K columns at once -- the T token rows (K values) stay in L1 / L2 -- and
 * while a group is read, each step prefetches into L2 the same columns of the next group's rows, one
 * line per line read: the next group is in L2 when its turn comes, page crossings included. No
 * packing of the weights.
 *   bf (bf16 mode): activations rounded to BF16 once per product (round_x, into wk->xb) and vdpbf16ps.
 *   wf (f32 mode, BF16 weights): a 64-byte load of 32 weights gives the even columns by a shift and
 *       the odd ones by a mask, so the activations are split once per product into 16 even then 16
 *       odd columns per 32 (fq_split's layout; an odd tail padded with zeros) and multiplied by
 *       float32 FMA: the tiles' products and sums, in another order. */
#define MV_MAXT 4            /* tokens up to which the one-token kernels run */
#define MV_NB 128            /* rows per unit at most (a multiple of 8 and 6) */

void mm_matvec(bool on) { atomic_store(&mv_off, !on); }

typedef void (*mv_fn)(const void *x, size_t ldx, const uint16_t *w, size_t K, const uint16_t *pf, float *y, size_t ldy);
typedef struct { mv_fn many[MV_MAXT], one[MV_MAXT]; int nr[MV_MAXT]; } MvTiles;   /* [T - 1] */

#if MM_X86
/* y[t][r] = sum_k x[t][k] w[r][k] for NT tokens and NR rows (stride K) over all K columns; pf, unless
 * NULL: the next group's NR rows, prefetched (L2) at the columns read. bf: x BF16 (stride ldx),
 * vdpbf16ps; else x split (fq_split's layout, stride ldx >= K rounded up to 32) and float32 FMA. */
TGT_BF16 static inline __attribute__((always_inline)) void
mv_tile(const void *x, size_t ldx, const uint16_t *w, size_t K, const uint16_t *pf, float *y, size_t ldy, const int NT,
        const int NR, const bool bf) {
    __m512 a[4][8];
#pragma GCC unroll 32
    for (int i = 0; i < 32; i++) a[i / 8][i % 8] = _mm512_setzero_ps();     /* the unused ones are never read */
    const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);
    for (size_t k = 0; k < K; k += 32) {
        __mmask32 m = K - k >= 32 ? (__mmask32)~0u : (__mmask32)((1ull << (K - k)) - 1);
        if (pf)
#pragma GCC unroll 8
            for (int r = 0; r < NR; r++) _mm_prefetch((const char *)(pf + (size_t)r * K + k), _MM_HINT_T1);
        __m512 xe[4], xo[4];
        __m512bh xb[4];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            if (bf) xb[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, (const uint16_t *)x + (size_t)t * ldx + k);
            else {
                xe[t] = _mm512_loadu_ps((const float *)x + (size_t)t * ldx + k);
                xo[t] = _mm512_loadu_ps((const float *)x + (size_t)t * ldx + k + 16);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            __m512i v = _mm512_maskz_loadu_epi16(m, w + (size_t)r * K + k);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                if (bf) a[t][r] = _mm512_dpbf16_ps(a[t][r], xb[t], (__m512bh)v);
                else {
                    a[t][r] = _mm512_fmadd_ps(xe[t], _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), a[t][r]);
                    a[t][r] = _mm512_fmadd_ps(xo[t], _mm512_castsi512_ps(_mm512_and_si512(v, hi16)), a[t][r]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) y[(size_t)t * ldy + (size_t)r] = _mm512_reduce_add_ps(a[t][r]);
}

#define MV_FN(name, nt, nr, bf)                                                                                       \
    TGT_BF16 static void name##_##nt##x##nr(const void *x, size_t ldx, const uint16_t *w, size_t K, const uint16_t *pf, \
                                            float *y, size_t ldy) { mv_tile(x, ldx, w, K, pf, y, ldy, nt, nr, bf); }
MV_FN(mvb, 1, 8, true) MV_FN(mvb, 2, 8, true) MV_FN(mvb, 3, 6, true) MV_FN(mvb, 4, 4, true)
MV_FN(mvb, 1, 1, true) MV_FN(mvb, 2, 1, true) MV_FN(mvb, 3, 1, true) MV_FN(mvb, 4, 1, true)
MV_FN(mvw, 1, 8, false) MV_FN(mvw, 2, 6, false) MV_FN(mvw, 3, 4, false) MV_FN(mvw, 4, 3, false)
MV_FN(mvw, 1, 1, false) MV_FN(mvw, 2, 1, false) MV_FN(mvw, 3, 1, false) MV_FN(mvw, 4, 1, false)
static const MvTiles mvb_tiles = {{mvb_1x8, mvb_2x8, mvb_3x6, mvb_4x4}, {mvb_1x1, mvb_2x1, mvb_3x1, mvb_4x1}, {8, 8, 6, 4}};
static const MvTiles mvw_tiles = {{mvw_1x8, mvw_2x6, mvw_3x4, mvw_4x3}, {mvw_1x1, mvw_2x1, mvw_3x1, mvw_4x1}, {8, 6, 4, 3}};
#else
static const MvTiles mvb_tiles, mvw_tiles;   /* never used: no x86 kernels */
#endif

typedef struct {
    const WMat *W;
    const void *x;           /* round_x's BF16 rows (stride K) or mv_split's (stride ldx) */
    size_t ldx, T;
    float *y;
    size_t ldy, nb;          /* nb: rows per unit */
    const MvTiles *tl;
} mv_job;

/* Unit i: rows [i nb, +nb) in groups of the tile's NR rows, each prefetching the next group. */
static int mv_unit(size_t i, int worker, void *ud) {
    (void)worker;
    mv_job *j = ud;
    const uint16_t *W = j->W->data;
    size_t K = j->W->cols, N = j->W->rows, n0 = i * j->nb, n1 = N - n0 < j->nb ? N : n0 + j->nb, T = j->T;
    size_t nr = (size_t)j->tl->nr[T - 1], n = n0;
    for (; n + nr <= n1; n += nr)
        j->tl->many[T - 1](j->x, j->ldx, W + n * K, K, n + 2 * nr <= N ? W + (n + nr) * K : NULL, j->y + n, j->ldy);
    for (; n < n1; n++) j->tl->one[T - 1](j->x, j->ldx, W + n * K, K, NULL, j->y + n, j->ldy);
    return AL_OK;
}

/* x (T, K) into xs (T rows of K rounded up to 32): per 32 columns the 16 even ones, then the 16 odd
 * ones, the columns past K zero. */
static void mv_split(const float *x, size_t ldx, size_t T, size_t K, size_t ld, float *xs) {
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < ld; c += 32)
            for (size_t i = 0; i < 16; i++) {
                size_t e = c + 2 * i;
                xs[t * ld + c + i] = e < K ? x[t * ldx + e] : 0.f;
                xs[t * ld + c + 16 + i] = e + 1 < K ? x[t * ldx + e + 1] : 0.f;
            }
}

/* A BF16 weight's product of T <= MV_MAXT tokens on the one-token kernels: bf16 mode (vdpbf16ps) on
 * x rounded to BF16, else x split for the float32 ones. */
static int xwt_mv(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy, bool bf) {
    size_t K = W->cols, ld = (K + 31) / 32 * 32, n;
    mv_job j = {.W = W, .T = T, .y = y, .ldy = ldy, .tl = bf ? &mvb_tiles : &mvw_tiles};
    if (bf) {
        if (round_x(wk, x, ldx, T, K, true)) return AL_ERR;
        j.x = wk->xb;
        j.ldx = K;
    } else {
        if (!al_mul_ok(T, ld, &n, "activations") ||
            buf_fit((void **)&wk->xs, &wk->scap, n, sizeof(float), "split activations"))
            return AL_ERR;
        mv_split(x, ldx, T, K, ld, wk->xs);
        j.x = wk->xs;
        j.ldx = ld;
    }
    size_t nt = wk->nthreads > 0 ? (size_t)wk->nthreads : 1, u = (W->rows + MV_NB - 1) / MV_NB;
    u = (u + nt - 1) / nt * nt;                             /* units: a multiple of the workers */
    j.nb = ((W->rows + u - 1) / u + 7) / 8 * 8;
    return run_units(wk, W->rows, j.nb, T * W->rows * K, mv_unit, &j);
}

/* Whether a BF16 weight's product of T tokens takes the one-token kernels. */
static bool mv_ok(const WMat *W, size_t T) {
    return W->dt == DT_BF16 && T <= MV_MAXT && !atomic_load(&mv_off) && mm_have_bf16();
}

/* The float32 route: BF16 / F16 weights widened in registers (AVX-512 tiles), FP4 / INT4 ones decoded
 * in registers up to FP4_FEW tokens, MXFP4 / NVFP4 decoded to BF16 blocks and the same tiles below
 * FP4_MANY, else (FP8, FP4 / INT4 from there on, or no AVX-512) per panel into the worker's buffer and
 * a one-thread sgemm. */
static int xwt_f32(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    if (mv_ok(W, T)) return xwt_mv(wk, W, x, ldx, T, y, ldy, false);
    if ((W->dt == DT_BF16 || W->dt == DT_F16) && use_avx512())
        return run_tiles(wk, W, x, ldx, sizeof(float), T, y, ldy, W->dt == DT_BF16 ? &wb_tiles : &wh_tiles);
    bool fp4 = W->fp4.enc != DT_FP4_NONE && W->cols % 16 == 0 && use_avx512();
    if (fp4 && T < FP4_MANY && fq_ok(&W->fp4) &&             /* the unit's scales fit the worker's panel */
        (W->cols / 16) * FV_NB <= (size_t)MM_PANEL_ROWS * MM_PANEL_COLS)
        return xwt_fq(wk, W, x, ldx, T, y, ldy);
    if (fp4 && (T <= FP4_FEW || (T < FP4_MANY && fp4_bf16_exact(&W->fp4)))) {
        if (T > FP4_FEW && pan_fit(wk)) return AL_ERR;
        few_job j = {.W = W, .x = x, .ldx = ldx, .T = T, .y = y, .ldy = ldy, .wk = wk};
        return run_units(wk, W->rows, TILE_NB, T * W->rows * W->cols, T <= FP4_FEW ? few_unit : fp4_unit, &j);
    }
    if (pan_fit(wk)) return AL_ERR;
    f32_job j = {.W = W, .x = x, .ldx = ldx, .T = T, .y = y, .ldy = ldy, .wk = wk, .simd = use_avx512(),
                 .nb = unit_rows(W->rows, wk->nthreads, MM_PANEL_ROWS, 16)};
    return run_units(wk, W->rows, j.nb, T * W->rows * W->cols, f32_unit, &j);
}

/* x (T, K) rounded to BF16: into wk->xb (vdpbf16ps), or as floats into wk->xr (the portable
 * route). */
static int round_x(MmWork *wk, const float *x, size_t ldx, size_t T, size_t K, bool simd) {
    size_t n;
    if (!al_mul_ok(T, K, &n, "activations")) return AL_ERR;
    if (simd) {
        if (buf_fit((void **)&wk->xb, &wk->xcap, n, sizeof(uint16_t), "BF16 activations")) return AL_ERR;
        for (size_t t = 0; t < T; t++) {
            const float *r = x + t * ldx;
            uint16_t *d = wk->xb + t * K;
            for (size_t k = to_bf16_512(r, K, d); k < K; k++) d[k] = dt_f32_to_bf16(r[k]);
        }
        return AL_OK;
    }
    if (buf_fit((void **)&wk->xr, &wk->rcap, n, sizeof(float), "activations rounded to BF16")) return AL_ERR;
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < K; k++) wk->xr[t * K + k] = dt_bf16_to_f32(dt_f32_to_bf16(x[t * ldx + k]));
    return AL_OK;
}

static int xwt_bf16(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    bool simd = mm_have_bf16();
    if (simd && T >= BT_MIN && !atomic_load(&lanes_off)) return xwt_bt(wk, W, x, ldx, T, y, ldy);
    if (mv_ok(W, T)) return xwt_mv(wk, W, x, ldx, T, y, ldy, true);
    if (round_x(wk, x, ldx, T, W->cols, simd)) return AL_ERR;
    if (!simd) return xwt_f32(wk, W, wk->xr, W->cols, T, y, ldy);
    return run_tiles(wk, W, wk->xb, W->cols, sizeof(uint16_t), T, y, ldy, &bf_tiles);
}

/* ================================================================ x @ W: (in, out) weights read in place */

/* y = x @ W for W (K, N) stored row-major in F32 / BF16 / F16 (gpt-oss's fused experts, Qwen3-VL-MoE's and Llama 4's,
 * Conv1D), read where it lies: no widened copy. AVX-512: every output y[t][j] is one float32 FMA chain over
 * k = 0, 1, ..., K - 1 in that order, whatever T, the tile, the threads or the passes (a pass stores its partial sums
 * in y and the next resumes from them: the same floats), so the result is the scalar loop
 * acc = fmaf(x[t][k], W[k][j], acc)'s bit for bit, and the same for every dtype holding the same values. A tile is
 * NT tokens x NG groups of 32 columns, two accumulators a group: F32 and F16 its first and second 16 columns, BF16
 * one 64-byte load split into the even columns (shifted up) and the odd ones (masked), interleaved again when
 * stored. At 1-4 tokens (decoding) a tile streams all K rows of its columns once (NT NG = 12: 384 columns at one
 * token, 96 at four), prefetching row k + XW_PF of its columns into L2 (each row's part of a tile lies in another
 * 4 KB page: the hardware prefetcher does not follow it); from 5 tokens on, passes of XW_KC rows in tiles of 96
 * columns (48 KB of BF16: they stay in L1 while every group of 4 tokens runs over them). Without AVX-512 (or
 * mm_simd(false)): panels of rows widened into the worker's buffer and a one-thread sgemm (the same values; float32
 * sums in sgemm's order). mm_xw_in_place(false): the route before, each BF16 / F16 W widened whole into wk->wx and
 * one sgemm (F32 as it lies). */
#define XW_KC 256            /* rows per pass from 5 tokens on */
#define XW_PF 8              /* rows ahead that decoding prefetches */
#define XW_MAXT 4            /* tokens a tile holds */

static atomic_int xw_widen;  /* mm_xw_in_place(false) */

void mm_xw_in_place(bool on) { atomic_store(&xw_widen, !on); }

enum { XW_F32, XW_BF16, XW_F16 };

typedef void (*xw_fn)(const float *x, size_t ldx, const uint8_t *w, size_t ldw, size_t kc, size_t nc, float *y,
                      size_t ldy, bool acc, bool pf);
typedef struct { xw_fn dec[XW_MAXT], pass[XW_MAXT]; } XwTiles;   /* [NT - 1]: decoding's tiles, the passes' */
static const size_t xw_dec_cols[XW_MAXT] = {384, 192, 128, 96};    /* 32 NG of decoding's tiles */
#define XW_PASS_COLS 96

#if MM_X86
/* The 32 stored weights of columns [0, 32) at p (those of mask m) as two float32 vectors: F32 / F16 the first and
 * second 16 columns, BF16 the even and the odd ones. */
TGT_512 static inline __attribute__((always_inline)) void xw_load32(const uint8_t *p, __mmask32 m, __m512 *lo,
                                                                     __m512 *hi, const int dt) {
    if (dt == XW_F32) {
        *lo = _mm512_maskz_loadu_ps((__mmask16)m, p);
        *hi = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), p + 64);
    } else if (dt == XW_F16) {
        *lo = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)m, p));
        *hi = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)(m >> 16), p + 32));
    } else {
        __m512i v = _mm512_maskz_loadu_epi16(m, p);
        *lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        *hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
    }
}

/* Columns [0, 32) of y (those of m) as a group's two accumulators (zero outside m), and back: BF16's even / odd
 * lanes de-interleaved and interleaved. */
TGT_512 static inline __attribute__((always_inline)) void xw_get32(const float *y, __mmask32 m, __m512 *lo, __m512 *hi,
                                                                    const int dt) {
    __m512 a = _mm512_maskz_loadu_ps((__mmask16)m, y), b = _mm512_maskz_loadu_ps((__mmask16)(m >> 16), y + 16);
    if (dt != XW_BF16) { *lo = a; *hi = b; return; }
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *lo = _mm512_permutex2var_ps(a, ev, b);
    *hi = _mm512_permutex2var_ps(a, _mm512_add_epi32(ev, _mm512_set1_epi32(1)), b);
}

TGT_512 static inline __attribute__((always_inline)) void xw_put32(float *y, __mmask32 m, __m512 lo, __m512 hi,
                                                                    const int dt) {
    if (dt == XW_BF16) {
        const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        __m512 a = _mm512_permutex2var_ps(lo, il, hi);
        hi = _mm512_permutex2var_ps(lo, _mm512_add_epi32(il, _mm512_set1_epi32(8)), hi);
        lo = a;
    }
    _mm512_mask_storeu_ps(y, (__mmask16)m, lo);
    _mm512_mask_storeu_ps(y + 16, (__mmask16)(m >> 16), hi);
}

/* y[t][0 .. nc) (+)= sum over the kc rows of w (stride ldw bytes) of x[t][k] w[k][.] for NT tokens (x stride ldx),
 * nc <= 32 NG columns, each sum one FMA chain in k's order continued from y's value when acc; pf: row k + XW_PF's
 * lines of the tile prefetched into L2 while row k is read. */
TGT_512 static inline __attribute__((always_inline)) void
xw_tile(const float *x, size_t ldx, const uint8_t *w, size_t ldw, size_t kc, size_t nc, float *y, size_t ldy, bool acc,
        bool pf, const int NT, const int NG, const int dt) {
    const size_t gb = dt == XW_F32 ? 128 : 64;        /* bytes of a group's 32 weights */
    __m512 a[XW_MAXT][12][2];
    __mmask32 m[12];
    int ng = 0;                                        /* groups with columns */
#pragma GCC unroll 12
    for (int g = 0; g < NG; g++) {
        size_t c = (size_t)g * 32;
        m[g] = c >= nc ? 0 : nc - c >= 32 ? (__mmask32)~0u : (__mmask32)((1u << (nc - c)) - 1);
        ng += m[g] != 0;
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 12
        for (int g = 0; g < NG; g++) {
            if (acc) xw_get32(y + (size_t)t * ldy + (size_t)g * 32, m[g], &a[t][g][0], &a[t][g][1], dt);
            else a[t][g][0] = a[t][g][1] = _mm512_setzero_ps();
        }
    for (size_t k = 0; k < kc; k++) {
        const uint8_t *wr = w + k * ldw;
        if (pf && k + XW_PF < kc)
            for (int i = 0; i < ng * (int)(gb / 64); i++) _mm_prefetch((const char *)(wr + XW_PF * ldw + (size_t)i * 64), _MM_HINT_T1);
        __m512 xb[XW_MAXT];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) xb[t] = _mm512_set1_ps(x[(size_t)t * ldx + k]);
#pragma GCC unroll 12
        for (int g = 0; g < NG; g++) {
            __m512 lo, hi;
            xw_load32(wr + (size_t)g * gb, m[g], &lo, &hi, dt);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                a[t][g][0] = _mm512_fmadd_ps(xb[t], lo, a[t][g][0]);
                a[t][g][1] = _mm512_fmadd_ps(xb[t], hi, a[t][g][1]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 12
        for (int g = 0; g < NG; g++) xw_put32(y + (size_t)t * ldy + (size_t)g * 32, m[g], a[t][g][0], a[t][g][1], dt);
}

#define XW_FN(d, nt, ng)                                                                                              \
    TGT_512 static void xw_##d##_##nt##x##ng(const float *x, size_t ldx, const uint8_t *w, size_t ldw, size_t kc,    \
                                             size_t nc, float *y, size_t ldy, bool acc, bool pf) {                   \
        xw_tile(x, ldx, w, ldw, kc, nc, y, ldy, acc, pf, nt, ng, XW_##d);                                            \
    }
#define XW_FNS(d)                                                                                                     \
    XW_FN(d, 1, 12) XW_FN(d, 2, 6) XW_FN(d, 3, 4) XW_FN(d, 4, 3) XW_FN(d, 1, 3) XW_FN(d, 2, 3) XW_FN(d, 3, 3)        \
    static const XwTiles xw_##d##_tiles = {{xw_##d##_1x12, xw_##d##_2x6, xw_##d##_3x4, xw_##d##_4x3},                \
                                           {xw_##d##_1x3, xw_##d##_2x3, xw_##d##_3x3, xw_##d##_4x3}};
XW_FNS(F32) XW_FNS(BF16) XW_FNS(F16)
static const XwTiles *xw_tiles(dt_type dt) { return dt == DT_F32 ? &xw_F32_tiles : dt == DT_BF16 ? &xw_BF16_tiles : &xw_F16_tiles; }
#else
static const XwTiles *xw_tiles(dt_type dt) { (void)dt; return NULL; }    /* never used: no x86 kernels */
#endif

typedef struct {
    const WMat *W;           /* (K, N) */
    const float *x;
    size_t ldx, T;
    float *y;
    size_t ldy, tw, per;     /* columns per tile, tiles per unit */
    const XwTiles *tl;       /* NULL: the panels */
    MmWork *wk;
} xw_job;

/* Unit i of the tiles: columns [i per tw, +per tw); at 1-4 tokens each tile over all rows at once, else passes of
 * XW_KC rows, every 4 tokens against each tile of the pass. */
static int xw_unit(size_t i, int worker, void *ud) {
    (void)worker;
    const xw_job *j = ud;
    const size_t K = j->W->rows, N = j->W->cols, es = dt_size(j->W->dt), T = j->T, ldw = N * es;
    const uint8_t *w = j->W->data;
    size_t c0 = i * j->per * j->tw, c1 = N - c0 < j->per * j->tw ? N : c0 + j->per * j->tw;
    if (T <= XW_MAXT) {
        for (size_t c = c0; c < c1; c += j->tw)
            j->tl->dec[T - 1](j->x, j->ldx, w + c * es, ldw, K, c1 - c < j->tw ? c1 - c : j->tw, j->y + c, j->ldy, false,
                              true);
        return AL_OK;
    }
    for (size_t k0 = 0; k0 < K; k0 += XW_KC) {
        size_t kc = K - k0 < XW_KC ? K - k0 : XW_KC;
        for (size_t c = c0; c < c1; c += j->tw)
            for (size_t t = 0; t < T; t += XW_MAXT) {
                size_t nt = T - t < XW_MAXT ? T - t : XW_MAXT;
                j->tl->pass[nt - 1](j->x + t * j->ldx + k0, j->ldx, w + k0 * ldw + c * es, ldw, kc,
                                    c1 - c < j->tw ? c1 - c : j->tw, j->y + t * j->ldy + c, j->ldy, k0 > 0, t == 0);
            }
    }
    return AL_OK;
}

/* Unit i of the portable route: columns [i tw, +tw) (tw <= MM_PANEL_COLS), MM_PANEL_ROWS rows at a time widened
 * into the worker's panel and multiplied by a one-thread sgemm, accumulated in y. */
static int xw_panel_unit(size_t i, int worker, void *ud) {
    const xw_job *j = ud;
    const size_t K = j->W->rows, N = j->W->cols, c0 = i * j->tw, nc = N - c0 < j->tw ? N - c0 : j->tw;
    float *buf = j->wk->pan[worker];
    for (size_t k0 = 0; k0 < K; k0 += MM_PANEL_ROWS) {
        size_t kc = K - k0 < MM_PANEL_ROWS ? K - k0 : MM_PANEL_ROWS;
        panel(j->W, k0, kc, c0, nc, buf, false);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)j->T, (int)nc, (int)kc, 1.f, j->x + k0, (int)j->ldx,
                    buf, (int)nc, k0 ? 1.f : 0.f, j->y + c0, (int)j->ldy);
    }
    return AL_OK;
}

/* The route before: a BF16 / F16 W widened whole into wk->wx, then one sgemm (sgemv at one token). */
static int xw_widened(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    const float *wf = W->data;
    if (W->dt != DT_F32) {
        size_t n;
        if (!al_mul_ok(W->rows, W->cols, &n, "a weight widened") ||
            buf_fit((void **)&wk->wx, &wk->wxcap, n, sizeof(float), "a weight widened"))
            return AL_ERR;
        for (size_t r = 0; r < W->rows; r++) wmat_row(W, r, wk->wx + r * W->cols);
        wf = wk->wx;
    }
    if (T == 1)
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)W->rows, (int)W->cols, 1.f, wf, (int)W->cols, x, 1, 0.f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)W->cols, (int)W->rows, 1.f, x, (int)ldx, wf,
                    (int)W->cols, 0.f, y, (int)ldy);
    return AL_OK;
}

int mm_xw(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy) {
    if (W->dt != DT_F32 && W->dt != DT_BF16 && W->dt != DT_F16)
        return al_err("internal: an (in, out) weight must be F32, BF16 or F16, not %s", dt_name(W->dt));
    if (T == 0 || W->cols == 0) return AL_OK;
    if (W->rows == 0) {                                 /* an empty sum */
        for (size_t t = 0; t < T; t++) memset(y + t * ldy, 0, W->cols * sizeof(float));
        return AL_OK;
    }
    if (atomic_load(&xw_widen)) return xw_widened(wk, W, x, ldx, T, y, ldy);
    size_t N = W->cols, nt = wk->nthreads > 0 ? (size_t)wk->nthreads : 1, work = T * W->rows * N;
    xw_job j = {.W = W, .x = x, .ldx = ldx, .T = T, .y = y, .ldy = ldy, .wk = wk};
    if (!use_avx512()) {
        if (pan_fit(wk)) return AL_ERR;
        j.tw = unit_rows(N, wk->nthreads, MM_PANEL_COLS, 16);
        return run_units(wk, N, j.tw, work, xw_panel_unit, &j);
    }
    j.tl = xw_tiles(W->dt);
    j.tw = T <= XW_MAXT ? xw_dec_cols[T - 1] : XW_PASS_COLS;
    size_t tiles = (N + j.tw - 1) / j.tw;
    j.per = (tiles + nt - 1) / nt;                      /* a unit per worker */
    return run_units(wk, N, j.per * j.tw, work, xw_unit, &j);
}

/* ================================================================ exponentials: SiLU, softmax */

#if MM_X86
/* exp(x) for 16 floats: x = n ln2 + r (|r| <= ln2 / 2, ln2 in two parts), exp(r) by its degree-7
 * Taylor polynomial (truncation < 1e-8 relative), times 2^n by vscalefps (which also gives 0 and inf
 * outside the float range). */
TGT_512 static inline __attribute__((always_inline)) __m512 exp_512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(100.f), _mm512_max_ps(_mm512_set1_ps(-104.f), x));   /* +-inf in range; NaN stays */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}

TGT_512 static size_t silu_mul_512(float *a, const float *b, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(a + i);
        __m512 e = exp_512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.f), e));
        _mm512_storeu_ps(a + i, _mm512_mul_ps(s, _mm512_loadu_ps(b + i)));
    }
    return i;
}

TGT_512 static size_t exp_sum_512(float *s, size_t n, float sub, double *sum) {
    __m512d acc = _mm512_setzero_pd();
    __m512 m = _mm512_set1_ps(sub);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp_512(_mm512_sub_ps(_mm512_loadu_ps(s + i), m));
        _mm512_storeu_ps(s + i, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    *sum = _mm512_reduce_add_pd(acc);
    return i;
}
#else
static size_t silu_mul_512(float *a, const float *b, size_t n) { (void)a; (void)b; (void)n; return 0; }
static size_t exp_sum_512(float *s, size_t n, float sub, double *sum) { (void)s; (void)n; (void)sub; *sum = 0; return 0; }
#endif

double mm_exp_sum(float *s, size_t n, float sub) {
    double sum = 0;
    size_t i = use_avx512() ? exp_sum_512(s, n, sub, &sum) : 0;
    for (; i < n; i++) {
        s[i] = expf(s[i] - sub);
        sum += s[i];
    }
    return sum;
}

void mm_silu_mul(float *a, const float *b, size_t n) {
    size_t i = use_avx512() ? silu_mul_512(a, b, n) : 0;
    for (; i < n; i++) a[i] = a[i] / (1.f + expf(-a[i])) * b[i];
}

/* ================================================================ products */

int mm_xwt(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy, mm_compute c) {
    if (W->dt == DT_F32) {
        if (T == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)W->rows, (int)W->cols, 1.f, W->data, (int)W->cols, x, 1, 0.f, y, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)W->rows, (int)W->cols, 1.f, x, (int)ldx,
                        W->data, (int)W->cols, 0.f, y, (int)ldy);
        return AL_OK;
    }
    if (c == MM_BF16 && W->dt == DT_BF16) return xwt_bf16(wk, W, x, ldx, T, y, ldy);
    return xwt_f32(wk, W, x, ldx, T, y, ldy);
}
