/* gram_bf16.c -- the fast route's Gram kernel over packed chunks: AVX-512 BF16 (vdpbf16ps) and
 * float tiles of 8 x 32 entries of G held in registers over one chunk, a double epilogue with
 * the chunk's scales; the run-time path choice; the E4M3 tables. See gram_bf16.h. */
#define _GNU_SOURCE
#include "gram_bf16.h"
#include "tensor.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TILE_I 8             /* rows of G per tile */
#define TILE_J 32            /* columns of G per tile (two vectors of 16) */

/* ================================================================ path */

static gbf_path forced = GBF_AUTO;

bool gbf_cpu_bf16(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

void gbf_force(gbf_path p) { forced = p; }

gbf_path gbf_path_now(void) {
    static int have = -1;
    if (have < 0) have = gbf_cpu_bf16();
    if (forced == GBF_FLOAT || !have) return GBF_FLOAT;
    return GBF_BF16;
}

double gbf_gamma(gbf_path p) {
    /* BF16: n products, each exact, added one rounding at a time; float: a product and a sum
     * per step. */
    double u = ldexp(1.0, -24), n = p == GBF_BF16 ? GBF_CHUNK : 2 * GBF_CHUNK;
    return n * u / (1 - n * u);
}

/* ================================================================ E4M3 tables */

static uint16_t e4m3_bf16[256];
static float e4m3_f32[256];
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;

static void e4m3_init(void) {
    for (int c = 0; c < 256; c++) {
        e4m3_f32[c] = dt_e4m3_to_f32((uint8_t)c);
        e4m3_bf16[c] = dt_f32_to_bf16(e4m3_f32[c]);     /* exact: 3 mantissa bits, exponent in range */
    }
}

const uint16_t *gbf_e4m3_bf16(void) { pthread_once(&e4m3_once, e4m3_init); return e4m3_bf16; }
const float *gbf_e4m3_f32(void) { pthread_once(&e4m3_once, e4m3_init); return e4m3_f32; }

/* ================================================================ BF16 tiles */

#define BF16_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

/* Adds one 16-float accumulator (row i, columns j0..j0+15, those < k) to G in double, scaled by
 * s_i s_j when s is given. */
BF16_TARGET static inline void add_row16(__m512 a, size_t i, size_t j0, size_t k, const float *s, double *G) {
    if (j0 >= k) return;
    size_t nv = k - j0 < 16 ? k - j0 : 16;
    __mmask16 m = (__mmask16)((1u << nv) - 1);
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    __m512d hi = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(a), 1)));
    if (s) {
        __m512 sv = _mm512_maskz_loadu_ps(m, s + j0);
        __m512d si = _mm512_set1_pd((double)s[i]);
        lo = _mm512_mul_pd(lo, _mm512_mul_pd(si, _mm512_cvtps_pd(_mm512_castps512_ps256(sv))));
        hi = _mm512_mul_pd(hi, _mm512_mul_pd(si, _mm512_cvtps_pd(_mm256_castsi256_ps(
                                                     _mm512_extracti64x4_epi64(_mm512_castps_si512(sv), 1)))));
    }
    double *g = G + i * k + j0;
    __mmask8 m0 = (__mmask8)(m & 0xff), m1 = (__mmask8)(m >> 8);
    _mm512_mask_storeu_pd(g, m0, _mm512_add_pd(_mm512_maskz_loadu_pd(m0, g), lo));
    if (m1) _mm512_mask_storeu_pd(g + 8, m1, _mm512_add_pd(_mm512_maskz_loadu_pd(m1, g + 8), hi));
}

/* One 8 x 16nv tile of G at (ib, jb) over np pair rows (nv = 1 or 2 vectors of 16 columns):
 * 8nv accumulators, per pair row nv loads, eight broadcasts and 8nv vdpbf16ps. Rows ib+ni..ib+7
 * are computed (the padded columns make that safe) but not stored. Every entry is the same sum in
 * the same order whichever tile computes it. */
BF16_TARGET static inline __attribute__((always_inline)) void tile_bf16(const uint32_t *P, size_t np, size_t ld,
                                                                        size_t k, size_t ib, size_t ni, size_t jb,
                                                                        const float *s, double *G, int nv) {
    __m512 acc[TILE_I][2];
    for (int a = 0; a < TILE_I; a++) acc[a][0] = acc[a][1] = _mm512_setzero_ps();
    for (size_t t = 0; t < np; t++) {
        const uint32_t *row = P + t * ld;
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(row + jb);
        __m512bh b1 = nv == 2 ? (__m512bh)_mm512_loadu_si512(row + jb + 16) : b0;
#pragma GCC unroll 8
        for (int a = 0; a < TILE_I; a++) {
            __m512bh x = (__m512bh)_mm512_set1_epi32((int)row[ib + (size_t)a]);
            acc[a][0] = _mm512_dpbf16_ps(acc[a][0], x, b0);
            if (nv == 2) acc[a][1] = _mm512_dpbf16_ps(acc[a][1], x, b1);
        }
    }
    for (size_t a = 0; a < ni; a++) {
        add_row16(acc[a][0], ib + a, jb, k, s, G);
        if (nv == 2) add_row16(acc[a][1], ib + a, jb + 16, k, s, G);
    }
}

BF16_TARGET static void tile_bf16_32(const uint32_t *P, size_t np, size_t ld, size_t k, size_t ib, size_t ni,
                                     size_t jb, const float *s, double *G) {
    tile_bf16(P, np, ld, k, ib, ni, jb, s, G, 2);
}

BF16_TARGET static void tile_bf16_16(const uint32_t *P, size_t np, size_t ld, size_t k, size_t ib, size_t ni,
                                     size_t jb, const float *s, double *G) {
    tile_bf16(P, np, ld, k, ib, ni, jb, s, G, 1);
}

/* ================================================================ AMX tiles */

/* The AMX path of gbf_chunk_bf16 (Sapphire Rapids and later): `tdpbf16ps` multiplies a 16 x 32
 * BF16 tile by a 32 x 16 one (pairs of contraction rows) into 16 x 16 float32 accumulators, each
 * product exact and added with one rounding (as vdpbf16ps: the same gamma_n bound, DAZ / FTZ
 * alike), 8192 products per instruction against vdpbf16ps' 32. G's 16 x 16 blocks (bi, bj):
 * A = rows bi of Pᵀ (16 x 16 dword transposes of P, made once per chunk into PT), B = P's columns
 * bj, two by two over the upper triangle (amx_block); each block goes to G in double through
 * add_row16. Linux hands the tile registers
 * to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM); each call loads its own tile config and
 * releases the tiles at the end, so no thread keeps AMX state between chunks. */

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512f,avx512bw,avx512vl")))
#define AMX_MAX_LD 256       /* wider chunks take the vdpbf16ps tiles */

static int amx_allowed = 1;  /* gbf_amx_allow */
static int amx_have;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_init(void) {
#if defined(__x86_64__) && defined(__linux__)
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
    bool cpu = (d >> 22 & 1) && (d >> 24 & 1) && gbf_cpu_bf16();          /* AMX-BF16, AMX-TILE */
    amx_have = cpu && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#endif
}

bool gbf_amx_cpu(void) { pthread_once(&amx_once, amx_init); return amx_have; }
void gbf_amx_allow(bool on) { amx_allowed = on; }
bool gbf_amx_now(void) { return amx_allowed && gbf_amx_cpu(); }

typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} AmxCfg;

/* Palette 1, tiles 0-7 each 16 rows of 64 bytes: the one tile configuration of the Gram chunks here and of
 * matmul_amx's products. Constant: GCC does not see _tile_loadconfig read its operand, and may drop stores
 * to a configuration built on the stack before it (matmul_amx saw ldtilecfg fault on such a one). */
static const AmxCfg amx_cfg_16x64 __attribute__((aligned(64))) = {
    .palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64, 64}, .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

AMX_TARGET void gbf_amx_tiles_16x64(void) { _tile_loadconfig(&amx_cfg_16x64); }

struct GbfWork {
    uint32_t PT[AMX_MAX_LD * GBF_CHUNK / 2];    /* Pᵀ */
    uint32_t Bz[16 * AMX_MAX_LD];               /* P's last step, zero-padded */
    float C[4 * 256];                           /* a 2 x 2 block's accumulators */
};

GbfWork *gbf_work_new(void) { return aligned_alloc(64, sizeof(GbfWork)); }
void gbf_work_free(GbfWork *w) { free(w); }

/* PT (ld x npad dwords, NULL: not made) = Pᵀ, rows t >= np zero; Bz (16 x ld) = P's last step,
 * zero-padded when np is not a multiple of 16. */
BF16_TARGET static void amx_prepare(const uint32_t *P, size_t np, size_t ld, size_t npad, uint32_t *PT, uint32_t *Bz);

/* G's 2 x 2 blocks of 16 x 16 at rows 32 i2, columns 32 j2: four accumulators (tiles 0-3) fed by
 * two tiles of Pᵀ (4, 5) and two of P (6, 7) per step of 16 pair rows, so that four independent
 * tdpbf16ps chains hide the instruction's latency. */
AMX_TARGET static inline void amx_block(const uint32_t *P, const uint32_t *PT, const uint32_t *Bz, size_t np,
                                        size_t ld, size_t npad, size_t i2, size_t j2, float *C) {
    bool diag = i2 == j2;    /* its lower-left tile lies below G's diagonal: not computed (C + 512 left alone) */
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (size_t q = 0; q < npad / 16; q++) {
        const uint32_t *b = (q + 1) * 16 <= np ? P + q * 16 * ld : Bz;
        _tile_loadd(4, PT + 32 * i2 * npad + q * 16, (long)(npad * 4));
        _tile_loadd(5, PT + (32 * i2 + 16) * npad + q * 16, (long)(npad * 4));
        _tile_loadd(6, b + 32 * j2, (long)(ld * 4));
        _tile_loadd(7, b + 32 * j2 + 16, (long)(ld * 4));
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (!diag) _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, C, 64);
    _tile_stored(1, C + 256, 64);
    if (!diag) _tile_stored(2, C + 512, 64);
    _tile_stored(3, C + 768, 64);
}

/* The float accumulator of gbf_chunk_bf16_acc: F (ld x ld floats, row-major; the upper block
 * triangle of 16 x 16 tiles used) holds n chunks of a G of k columns not yet added to it; with n 0
 * F is garbage, and the next chunk writes it instead of adding to it. */
struct GbfAcc {
    float *F;
    size_t kmax, ld;         /* the widest k it holds; F's leading dim gbf_ld(kmax) */
    size_t k;                /* the k of its pending chunks */
    unsigned n;              /* pending chunks (0: F holds nothing) */
};

/* One 16 x 16 accumulator tile C (row-major) at rows i0.., columns j0.. of G into the float
 * accumulator F (leading dim ld): F_ij += fl(s_i s_j) C_ij with one rounding (a fused
 * multiply-add), or F_ij += C_ij without scales; first: F_ij = 0 + the same (the F it replaces is
 * not read). Columns past k: C is zero there (P's padding), and the masked scales make the product
 * zero. */
AMX_TARGET static inline void acc_tile16(const float *C, size_t i0, size_t j0, size_t k, const float *s, float *F,
                                         size_t ld, bool first) {
    size_t nv = k - j0 < 16 ? k - j0 : 16;
    __m512 sv = s ? _mm512_maskz_loadu_ps((__mmask16)((1u << nv) - 1), s + j0) : _mm512_set1_ps(1.0f);
    for (size_t a = 0; a < 16 && i0 + a < k; a++) {
        float *f = F + (i0 + a) * ld + j0;
        __m512 c = _mm512_load_ps(C + 16 * a), y = first ? _mm512_setzero_ps() : _mm512_load_ps(f);
        __m512 x = s ? _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s[i0 + a]), sv), c, y) : _mm512_add_ps(c, y);
        _mm512_store_ps(f, x);
    }
}

/* The chunk's 16 x 16 blocks: on or above the diagonal, each into G in double (acc NULL: add_row16)
 * or into the float accumulator. */
AMX_TARGET static void amx_epilogue(const float *C, size_t i2, size_t j2, size_t k, const float *s, double *G,
                                    GbfAcc *acc) {
    for (size_t q = 0; q < 4; q++) {
        size_t i0 = 32 * i2 + 16 * (q >> 1), j0 = 32 * j2 + 16 * (q & 1);
        if (j0 + 16 <= i0 || j0 >= k) continue;         /* below the diagonal, or padding */
        if (acc) {
            acc_tile16(C + 256 * q, i0, j0, k, s, acc->F, acc->ld, acc->n == 0);
            continue;
        }
        for (size_t a = 0; a < 16 && i0 + a < k; a++) add_row16(_mm512_load_ps(C + 256 * q + 16 * a), i0 + a, j0, k, s, G);
    }
}

AMX_TARGET static void amx_chunk(GbfWork *w, const uint32_t *P, const uint32_t *PTin, size_t np, size_t k,
                                 const float *s, double *G, GbfAcc *acc) {
    size_t ld = gbf_ld(k), npad = gbf_npad(np), n2 = ld / 32;
    const uint32_t *PT = PTin ? PTin : w->PT, *Bz = w->Bz;
    float *C = w->C;
    amx_prepare(P, np, ld, npad, PTin ? NULL : w->PT, w->Bz);
    gbf_amx_tiles_16x64();
    for (size_t i2 = 0; i2 < n2 && 32 * i2 < k; i2++)
        for (size_t j2 = i2; j2 < n2 && 32 * j2 < k; j2++) {
            amx_block(P, PT, Bz, np, ld, npad, i2, j2, C);
            amx_epilogue(C, i2, j2, k, s, G, acc);
        }
    _tile_release();
}

bool gbf_amx_chunk(size_t k) { return gbf_ld(k) <= AMX_MAX_LD && gbf_amx_now(); }

BF16_TARGET static void chunk_tiles(const uint32_t *P, size_t np, size_t k, const float *s, double *G);

void gbf_chunk_bf16_ws(GbfWork *w, const uint32_t *P, const uint32_t *PT, size_t np, size_t k, const float *s,
                       double *G) {
    GbfWork *own = NULL;
    if (np && np <= GBF_CHUNK / 2 && gbf_amx_chunk(k) && (w || (w = own = gbf_work_new()))) {
        amx_chunk(w, P, PT, np, k, s, G, NULL);
        gbf_work_free(own);
        return;
    }
    chunk_tiles(P, np, k, s, G);
}

/* ---------------------------------------------------------------- the float accumulator */

GbfAcc *gbf_acc_new(size_t kmax) {
    GbfAcc *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->kmax = kmax;
    a->ld = gbf_ld(kmax ? kmax : 1);
    if (!(a->F = aligned_alloc(64, a->ld * a->ld * sizeof(float)))) { free(a); return NULL; }
    memset(a->F, 0, a->ld * a->ld * sizeof(float));
    return a;
}

void gbf_acc_free(GbfAcc *a) {
    if (a) free(a->F);
    free(a);
}

void gbf_acc_clear(GbfAcc *a) {
    if (a) a->n = 0;
}

/* Scales whose float products s_i s_j stay normal and whose products with a chunk of FP8 codes
 * (at most 128 x 448^2) stay finite: every |s_i| zero or in [2^-40, 2^40] (FP8 block scales are
 * near 1e-4). NaN fails. */
BF16_TARGET static bool scales_fit(const float *s, size_t k) {
    const __m512 lo = _mm512_set1_ps(0x1p-40f), hi = _mm512_set1_ps(0x1p40f), zero = _mm512_setzero_ps();
    for (size_t i = 0; s && i < k; i += 16) {
        __mmask16 m = k - i >= 16 ? 0xffff : (__mmask16)((1u << (k - i)) - 1);
        __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, s + i));
        __mmask16 ok = _mm512_cmp_ps_mask(a, zero, _CMP_EQ_OQ) |
                       (_mm512_cmp_ps_mask(a, lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(a, hi, _CMP_LE_OQ));
        if ((ok & m) != m) return false;
    }
    return true;
}

void gbf_chunk_bf16_acc(GbfWork *w, GbfAcc *a, const uint32_t *P, const uint32_t *PT, size_t np, size_t k,
                        const float *s, double *G) {
    if (!a || !w || !np || np > GBF_CHUNK / 2 || k > a->kmax || !gbf_amx_chunk(k) || !scales_fit(s, k)) {
        gbf_chunk_bf16_ws(w, P, PT, np, k, s, G);
        return;
    }
    if (a->n && a->k != k) gbf_acc_flush(a, G);
    a->k = k;
    amx_chunk(w, P, PT, np, k, s, G, a);
    if (++a->n == GBF_FLUSH) gbf_acc_flush(a, G);
}

/* G's upper block triangle += F's in double (16 floats widened at a time, columns past k left
 * alone). F then holds nothing (n 0: the next chunk writes it, so it is not zeroed here). */
BF16_TARGET void gbf_acc_flush(GbfAcc *a, double *G) {
    if (!a || !a->n) return;
    size_t k = a->k;
    for (size_t i = 0; i < k; i++)
        for (size_t j0 = i / 16 * 16; j0 < k; j0 += 16) {
            float *f = a->F + i * a->ld + j0;
            size_t nv = k - j0 < 16 ? k - j0 : 16;
            __m512 x = _mm512_load_ps(f);
            __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
            __m512d hi = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(x), 1)));
            double *g = G + i * k + j0;
            __mmask8 m0 = (__mmask8)(nv >= 8 ? 0xff : (1u << nv) - 1), m1 = (__mmask8)(nv > 8 ? (1u << (nv - 8)) - 1 : 0);
            _mm512_mask_storeu_pd(g, m0, _mm512_add_pd(_mm512_maskz_loadu_pd(m0, g), lo));
            if (m1) _mm512_mask_storeu_pd(g + 8, m1, _mm512_add_pd(_mm512_maskz_loadu_pd(m1, g + 8), hi));
        }
    a->n = 0;
}

double gbf_gamma_acc(size_t k) {
    double g = gbf_gamma(GBF_BF16);
    if (!gbf_amx_chunk(k)) return g;
    double u = ldexp(1.0, -24), n = GBF_FLUSH + 2;
    return g + n * u / (1 - n * u) * (1 + g);
}

void gbf_chunk_bf16(const uint32_t *P, size_t np, size_t k, const float *s, double *G) {
    gbf_chunk_bf16_ws(NULL, P, NULL, np, k, s, G);
}

/* The vdpbf16ps tiles over the chunk. */
BF16_TARGET static void chunk_tiles(const uint32_t *P, size_t np, size_t k, const float *s, double *G) {
    size_t ld = gbf_ld(k);
    for (size_t ib = 0; ib < k; ib += TILE_I) {
        size_t ni = k - ib < TILE_I ? k - ib : TILE_I, jd = ib / TILE_J * TILE_J;
        /* the diagonal block's lower two strips need only its right 16 columns (10 % fewer tiles) */
        if (ib - jd >= 16) tile_bf16_16(P, np, ld, k, ib, ni, jd + 16, s, G);
        else tile_bf16_32(P, np, ld, k, ib, ni, jd, s, G);
        for (size_t jb = jd + TILE_J; jb < k; jb += TILE_J) tile_bf16_32(P, np, ld, k, ib, ni, jb, s, G);
    }
}

/* ================================================================ float tiles */

typedef float v16f __attribute__((vector_size(64)));

/* The same tile over float rows (GCC vector code: AVX-512, AVX or SSE as the target allows). */
static void tile_f32(const float *F, size_t n, size_t ld, size_t k, size_t ib, size_t ni, size_t jb, const float *s,
                     double *G) {
    v16f acc[TILE_I][2];
    memset(acc, 0, sizeof acc);
    for (size_t t = 0; t < n; t++) {
        const float *row = F + t * ld;
        v16f b0, b1;
        memcpy(&b0, row + jb, sizeof b0);
        memcpy(&b1, row + jb + 16, sizeof b1);
        for (int a = 0; a < TILE_I; a++) {
            float x = row[ib + (size_t)a];
            acc[a][0] += x * b0;
            acc[a][1] += x * b1;
        }
    }
    for (size_t a = 0; a < ni; a++) {
        size_t i = ib + a;
        double si = s ? s[i] : 1.0;
        for (size_t j = jb; j < jb + TILE_J && j < k; j++) {
            double v = acc[a][(j - jb) / 16][(j - jb) % 16];
            G[i * k + j] += s ? v * (si * s[j]) : v;
        }
    }
}

void gbf_chunk_f32(const float *F, size_t n, size_t k, const float *s, double *G) {
    size_t ld = gbf_ld(k);
    for (size_t ib = 0; ib < k; ib += TILE_I) {
        size_t ni = k - ib < TILE_I ? k - ib : TILE_I;
        for (size_t jb = ib / TILE_J * TILE_J; jb < k; jb += TILE_J) tile_f32(F, n, ld, k, ib, ni, jb, s, G);
    }
}

/* ================================================================ packing (AVX-512BW) */

/* 32 stored values (FP8 E4M3 codes, zero-extended to words, or BF16 bits) as 32 BF16 words:
 * E4M3 normals by a shift and the exponent's rebias (120 << 7), subnormals (m 2^-9) and zero from
 * a table, NaN codes to a BF16 NaN, the sign on top -- exactly the values of gbf_e4m3_bf16. */
BF16_TARGET static inline __m512i e4m3_words(__m512i w) {
    const __m512i sub = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0x3c60, 0x3c40, 0x3c20, 0x3c00, 0x3bc0, 0x3b80, 0x3b00, 0);
    __m512i mag = _mm512_and_si512(w, _mm512_set1_epi16(0x7f));
    __m512i v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(0x3c00));
    v = _mm512_mask_permutexvar_epi16(v, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8)), mag, sub);
    v = _mm512_mask_mov_epi16(v, _mm512_cmpeq_epi16_mask(mag, _mm512_set1_epi16(0x7f)), _mm512_set1_epi16(0x7fc0));
    return _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(w, _mm512_set1_epi16(0x80)), 8));
}

/* Up to 32 stored values at src (n of them; zeros after) as BF16 words. */
BF16_TARGET static inline __m512i load_words(const uint8_t *src, size_t n, bool fp8) {
    __mmask32 m = n >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << n) - 1);
    if (fp8) return e4m3_words(_mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(m, src)));
    return _mm512_maskz_loadu_epi16(m, src);
}

BF16_TARGET void gbf_pack_pairs(const uint8_t *v0, const uint8_t *v1, size_t k, bool fp8, uint32_t *dst) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    size_t es = fp8 ? 1 : 2, ld = gbf_ld(k);
    for (size_t i = 0; i < ld; i += 32) {
        size_t n = i < k ? k - i : 0;
        __m512i a = load_words(v0 + i * es, n, fp8), b = v1 ? load_words(v1 + i * es, n, fp8) : _mm512_setzero_si512();
        _mm512_storeu_si512(dst + i, _mm512_permutex2var_epi16(a, lo, b));
        _mm512_storeu_si512(dst + i + 16, _mm512_permutex2var_epi16(a, hi, b));
    }
}

/* Transposes the 16 x 16 dwords r[row][col] in place (r[c] becomes column c); inlined, so that r
 * stays in registers. */
BF16_TARGET static inline __attribute__((always_inline)) void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
    }
}

/* D's 16 x 16 dword block (rows ldd apart) = the transpose of S's (rows lds apart): PT's block from
 * P's 16 full rows, or P's from PT's. Its 128-bit lanes are gathered by the loads (lane g of z[rr]
 * for lane q: row 4g + rr's dwords 4q..4q+3), so only the 4 x 4 transposes within lanes are
 * shuffles: 32 a block against transpose16's 64 (the shuffle port bounds both). */
BF16_TARGET static inline void transpose16_from(const uint32_t *S, size_t lds, uint32_t *D, size_t ldd) {
    for (size_t q = 0; q < 4; q++) {
        __m512i z[4];
        for (size_t rr = 0; rr < 4; rr++) {
            const uint32_t *b = S + rr * lds + 4 * q;
            __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b));
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 4 * lds)), 1);
            v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 8 * lds)), 2);
            z[rr] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 12 * lds)), 3);
        }
        __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
        __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
        uint32_t *d = D + 4 * q * ldd;
        _mm512_storeu_si512(d, _mm512_unpacklo_epi64(t0, t2));
        _mm512_storeu_si512(d + ldd, _mm512_unpackhi_epi64(t0, t2));
        _mm512_storeu_si512(d + 2 * ldd, _mm512_unpacklo_epi64(t1, t3));
        _mm512_storeu_si512(d + 3 * ldd, _mm512_unpackhi_epi64(t1, t3));
    }
}

BF16_TARGET static void amx_prepare(const uint32_t *P, size_t np, size_t ld, size_t npad, uint32_t *PT, uint32_t *Bz) {
    __m512i r[16];
    for (size_t t0 = 0; t0 < npad; t0 += 16)
        for (size_t i0 = 0; i0 < ld && (PT || t0 + 16 > np); i0 += 16) {
            if (t0 + 16 <= np) {                  /* 16 full rows: PT's block only */
                transpose16_from(P + t0 * ld + i0, ld, PT + i0 * npad + t0, npad);
                continue;
            }
            for (size_t a = 0; a < 16; a++)      /* the last, partial rows: Bz too */
                r[a] = t0 + a < np ? _mm512_loadu_si512(P + (t0 + a) * ld + i0) : _mm512_setzero_si512();
            for (size_t a = 0; a < 16; a++) _mm512_storeu_si512(Bz + a * ld + i0, r[a]);
            if (!PT) continue;
            transpose16(r);
            for (size_t a = 0; a < 16; a++) _mm512_storeu_si512(PT + (i0 + a) * npad + t0, r[a]);
        }
}

BF16_TARGET void gbf_pack_rows_t(const uint8_t *src, size_t stride, size_t k, size_t n, bool fp8, uint32_t *P,
                                 uint32_t *PT) {
    size_t es = fp8 ? 1 : 2, ld = gbf_ld(k), np = (n + 1) / 2, npad = gbf_npad(np);
    __m512i r[16];
    for (size_t i0 = 0; i0 < ld; i0 += 16) {
        /* the same rows' next n values, the caller's next chunk: each row is a stream of its own, too
         * many for the hardware prefetcher, and the loads here waited on memory ~60 % of the time
         * (prefetches past the tensor never fault) */
        for (size_t a = 0; a < 16 && i0 + a < k; a++)
            for (size_t b = 0; b < n * es; b += 64) __builtin_prefetch(src + (i0 + a) * stride + n * es + b);
        for (size_t t0 = 0; t0 < npad; t0 += 16) {
            /* rows i0..i0+15, values 2 t0 .. 2 t0 + 31: 16 pair words each (zeros past n) */
            size_t nv = 2 * t0 >= n ? 0 : n - 2 * t0 < 32 ? n - 2 * t0 : 32, nt = t0 >= np ? 0 : np - t0 < 16 ? np - t0 : 16;
            for (size_t a = 0; a < 16; a++)
                r[a] = i0 + a < k && nv ? load_words(src + (i0 + a) * stride + 2 * t0 * es, nv, fp8) : _mm512_setzero_si512();
            for (size_t a = 0; PT && a < 16; a++) _mm512_storeu_si512(PT + (i0 + a) * npad + t0, r[a]);
            if (!nt) continue;
            if (PT && nt == 16) {                 /* P's block from the PT block just stored (in L1) */
                transpose16_from(PT + i0 * npad + t0, npad, P + t0 * ld + i0, ld);
                continue;
            }
            transpose16(r);
            for (size_t t = 0; t < nt; t++) _mm512_storeu_si512(P + (t0 + t) * ld + i0, r[t]);
        }
    }
}

void gbf_pack_rows(const uint8_t *src, size_t stride, size_t k, size_t n, bool fp8, uint32_t *P) {
    gbf_pack_rows_t(src, stride, k, n, fp8, P, NULL);
}
