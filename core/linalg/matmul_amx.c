/* matmul_amx.c -- bf16 mode's prefill product on the AMX tile unit: units of MATMUL_AMX_NB rows of W
 * against every token, in superblocks of MX_TSB tokens and chunks of MX_KC columns; 2 x 2 blocks of
 * accumulator tiles with their A (W) and B (bt_pack's pairs) tiles in the 8 tile registers; the
 * tails (rows, tokens, K) by zero-padded copies of the last tiles. See matmul_amx.h. */
#define _GNU_SOURCE
#include "matmul_amx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "gram_bf16.h"

/* Blocking. A unit's chunk of W (64 rows x MX_KC columns: 32 KB) is read from memory once per
 * superblock of tokens, a row pair's part of it (16 KB) staying in L1 while the superblock's token
 * blocks stream past it from L2 (512 tokens x MX_KC pairs: 256 KB); the accumulators go to the
 * scratch between chunks (4 KB per 2 x 2 block per 8 steps of 32 columns). */
#define MX_KC 256            /* columns per chunk (a multiple of 32) */
#define MX_TSB 512           /* tokens per superblock: W is read once per product up to this many tokens */
#define MX_RT (MATMUL_AMX_NB / 16)   /* row tiles per unit */
#define MX_BT (MX_TSB / 16)          /* token blocks per superblock */

/* ================================================================ run-time choice */

static atomic_int allowed = 1;       /* matmul_amx_allow */
static int env_off;                  /* ATTNLAB_AMX=0 */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void env_read(void) {
    const char *e = getenv("ATTNLAB_AMX");
    env_off = e && !strcmp(e, "0");
}

bool matmul_amx_ok(void) {
    pthread_once(&env_once, env_read);
    return atomic_load(&allowed) && !env_off && gbf_amx_cpu();
}

void matmul_amx_allow(bool on) { atomic_store(&allowed, on); }

/* ================================================================ scratch */

struct MatmulAmxScratch {
    float c[MX_RT * MX_BT * 256];        /* the unit's accumulators: [row tile][token block][16 rows][16 tokens] */
    uint16_t part[16 * MX_KC];           /* a partial row tile's chunk (rows past N and columns past K zero) */
    uint16_t last[MX_RT][16 * 32];       /* each full row tile's last step when K % 32 != 0, zero padded */
};

int matmul_amx_begin(MatmulAmxJob *j) {
    size_t nt = j->nthreads > 0 ? (size_t)j->nthreads : 1, KP = (j->K + 1) / 2, nb = (j->T + 15) / 16;
    j->bz = NULL;
    j->ws = aligned_alloc(64, nt * sizeof *j->ws);
    if (!j->ws) return al_err("out of memory for the AMX products' scratch (%zu byte%s)", nt * sizeof *j->ws,
                               al_s(nt * sizeof *j->ws));
    if (j->K % 32 == 0) return AL_OK;
    if (!(j->bz = aligned_alloc(64, nb * 256 * sizeof *j->bz))) {
        matmul_amx_end(j);
        return al_err("out of memory for the AMX products' last step (%zu byte%s)", nb * 256 * sizeof(uint32_t),
                      al_s(nb * 256 * sizeof(uint32_t)));
    }
    size_t kp0 = j->K / 32 * 16, xs = KP * 16;     /* the last step's first pair; a block's dwords */
    for (size_t b = 0; b < nb; b++)
        for (size_t p = 0; p < 16; p++) {
            uint32_t *dst = j->bz + (b * 16 + p) * 16;
            if (kp0 + p < KP) memcpy(dst, j->xp + b * xs + (kp0 + p) * 16, 16 * sizeof *dst);
            else memset(dst, 0, 16 * sizeof *dst);
        }
    return AL_OK;
}

void matmul_amx_end(MatmulAmxJob *j) {
    free(j->ws);
    free(j->bz);
    j->ws = NULL;
    j->bz = NULL;
}

/* ================================================================ tiles */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MX_TGT __attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512f,avx512bw,avx512vl")))

/* A row tile's source over one chunk: step s's 16 x 32 BF16 at p + 32 s, rows ld bytes apart. */
typedef struct {
    const uint16_t *p;
    size_t ld;
} MxRows;

/* Tiles (gram_bf16.c's one configuration, 16 rows of 64 bytes each): 0-3 the 2 x 2 accumulators, 4-5 A
 * (rows of W), 6-7 B (pairs of 16 tokens). */

/* One step of 32 columns: A tiles from a0 / a1 (M of them), B tiles from b0 / b1 (NN), into the
 * accumulators 0 (a0 b0), 1 (a0 b1), 2 (a1 b0), 3 (a1 b1). */
MX_TGT static inline __attribute__((always_inline)) void
mx_step(const uint16_t *a0, size_t ld0, const uint16_t *a1, size_t ld1, const uint32_t *b0, const uint32_t *b1,
        const int M, const int NN) {
    _tile_loadd(4, a0, (long)ld0);
    if (M == 2) _tile_loadd(5, a1, (long)ld1);
    _tile_loadd(6, b0, 64);
    if (NN == 2) _tile_loadd(7, b1, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (NN == 2) _tile_dpbf16ps(1, 4, 7);
    if (M == 2) _tile_dpbf16ps(2, 5, 6);
    if (M == 2 && NN == 2) _tile_dpbf16ps(3, 5, 7);
}

/* An M x NN block of accumulator tiles (C tile (r, b) at c + r MX_BT 256 + b 256 floats) over one
 * chunk: `steps` whole steps from a[r] and b[t] (pairs 256 dwords a step), then the padded last
 * step from al[r] / bl[t] when last; from zero when first, else from c. */
MX_TGT static inline __attribute__((always_inline)) void
mx_block(const MxRows a[2], const MxRows al[2], const uint32_t *const b[2], const uint32_t *const bl[2], size_t steps,
         bool last, float *c, bool first, const int M, const int NN) {
    float *c1 = c + 256, *c2 = c + MX_BT * 256, *c3 = c2 + 256;
    if (first) {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    } else {
        _tile_loadd(0, c, 64);
        if (NN == 2) _tile_loadd(1, c1, 64);
        if (M == 2) _tile_loadd(2, c2, 64);
        if (M == 2 && NN == 2) _tile_loadd(3, c3, 64);
    }
    for (size_t s = 0; s < steps; s++)
        mx_step(a[0].p + 32 * s, a[0].ld, a[1].p + 32 * s, a[1].ld, b[0] + 256 * s, b[1] + 256 * s, M, NN);
    if (last) mx_step(al[0].p, al[0].ld, al[1].p, al[1].ld, bl[0], bl[1], M, NN);
    _tile_stored(0, c, 64);
    if (NN == 2) _tile_stored(1, c1, 64);
    if (M == 2) _tile_stored(2, c2, 64);
    if (M == 2 && NN == 2) _tile_stored(3, c3, 64);
}

typedef void (*mx_block_fn)(const MxRows a[2], const MxRows al[2], const uint32_t *const b[2],
                            const uint32_t *const bl[2], size_t steps, bool last, float *c, bool first);
#define MX_FN(m, nn)                                                                                                  \
    MX_TGT static void mx_##m##x##nn(const MxRows a[2], const MxRows al[2], const uint32_t *const b[2],               \
                                     const uint32_t *const bl[2], size_t steps, bool last, float *c, bool first) {    \
        mx_block(a, al, b, bl, steps, last, c, first, m, nn);                                                         \
    }
MX_FN(1, 1) MX_FN(1, 2) MX_FN(2, 1) MX_FN(2, 2)
static const mx_block_fn mx_blocks[2][2] = {{mx_1x1, mx_1x2}, {mx_2x1, mx_2x2}};    /* [M - 1][NN - 1] */

/* ================================================================ a unit */

/* Row tile r's sources over the chunk at column k0 (kc columns, `steps` whole steps): W where it
 * lies when the tile has 16 rows (its last step copied zero padded into s->last[r] when kc % 32),
 * else the rows there are copied zero padded into s->part. */
static void mx_rows(const MatmulAmxJob *j, MatmulAmxScratch *s, size_t row0, size_t nr, size_t r, size_t k0,
                    size_t kc, MxRows *a, MxRows *al) {
    size_t K = j->K, steps = kc / 32, kr = kc % 32;
    if (nr == 16) {
        *a = (MxRows){j->W + row0 * K + k0, 2 * K};
        if (!kr) return;
        for (size_t i = 0; i < 16; i++) {
            uint16_t *d = s->last[r] + 32 * i;
            memcpy(d, j->W + (row0 + i) * K + k0 + 32 * steps, kr * sizeof *d);
            memset(d + kr, 0, (32 - kr) * sizeof *d);
        }
        *al = (MxRows){s->last[r], 64};
        return;
    }
    size_t kp = (kc + 31) / 32 * 32;
    for (size_t i = 0; i < 16; i++) {
        uint16_t *d = s->part + kp * i;
        size_t n = i < nr ? kc : 0;
        if (n) memcpy(d, j->W + (row0 + i) * K + k0, n * sizeof *d);
        memset(d + n, 0, (kp - n) * sizeof *d);
    }
    *a = (MxRows){s->part, 2 * kp};
    *al = (MxRows){s->part + 32 * steps, 2 * kp};
}

/* One chunk (columns k0.., at most MX_KC) of the unit's rows [n0, n0 + nr) against the superblock's
 * nb token blocks from block g0: row pairs outer (their A tiles stay in L1), token pairs inner. */
MX_TGT static void mx_chunk(const MatmulAmxJob *j, MatmulAmxScratch *s, size_t n0, size_t nr, size_t g0, size_t nb,
                            size_t k0) {
    size_t K = j->K, kc = K - k0 < MX_KC ? K - k0 : MX_KC, steps = kc / 32, xs = (K + 1) / 2 * 16, nrt = (nr + 15) / 16;
    bool last = kc % 32 != 0;
    MxRows a[MX_RT], al[MX_RT];
    for (size_t r = 0; r < nrt; r++) {
        size_t rows = nr - 16 * r < 16 ? nr - 16 * r : 16;
        mx_rows(j, s, n0 + 16 * r, rows, r, k0, kc, &a[r], &al[r]);
    }
    for (size_t r = 0; r < nrt; r += 2) {
        size_t M = nrt - r < 2 ? 1 : 2;
        MxRows ap[2] = {a[r], a[r + M - 1]}, alp[2] = {al[r], al[r + M - 1]};
        for (size_t t = 0; t < nb; t += 2) {
            size_t NN = nb - t < 2 ? 1 : 2, g = g0 + t;
            const uint32_t *b[2] = {j->xp + g * xs + k0 / 2 * 16, j->xp + (g + NN - 1) * xs + k0 / 2 * 16};
            const uint32_t *bl[2] = {j->bz ? j->bz + g * 256 : NULL, j->bz ? j->bz + (g + NN - 1) * 256 : NULL};
            mx_blocks[M - 1][NN - 1](ap, alp, b, bl, steps, last, s->c + (r * MX_BT + t) * 256, k0 == 0);
        }
    }
}

/* The superblock's accumulators (16 rows x 16 tokens per tile) transposed into y: rows [n0, n0 + nr)
 * of the tokens [t0, t0 + nt). A 16 x 16 transpose in four rounds of vpermt2ps, each swapping one
 * bit of the row index with the same bit of the column index. */
MX_TGT static void mx_store(const MatmulAmxJob *j, const MatmulAmxScratch *s, size_t n0, size_t nr, size_t t0,
                            size_t nt) {
    __m512i lo[4], hi[4];
    for (int q = 0; q < 4; q++) {
        int32_t l[16], h[16], bit = 1 << q;
        for (int e = 0; e < 16; e++) {
            l[e] = e & bit ? 16 + e - bit : e;
            h[e] = e & bit ? 16 + e : e + bit;
        }
        lo[q] = _mm512_loadu_si512(l);
        hi[q] = _mm512_loadu_si512(h);
    }
    for (size_t r = 0; 16 * r < nr; r++) {
        size_t rows = nr - 16 * r < 16 ? nr - 16 * r : 16;
        __mmask16 m = (__mmask16)((1u << rows) - 1);
        for (size_t b = 0; 16 * b < nt; b++) {
            const float *c = s->c + (r * MX_BT + b) * 256;
            __m512 v[16];
            for (int i = 0; i < 16; i++) v[i] = _mm512_load_ps(c + 16 * i);
            for (int q = 0; q < 4; q++)
                for (int i = 0; i < 16; i++) {
                    if (i & (1 << q)) continue;
                    __m512 u = v[i], w = v[i + (1 << q)];
                    v[i] = _mm512_permutex2var_ps(u, lo[q], w);
                    v[i + (1 << q)] = _mm512_permutex2var_ps(u, hi[q], w);
                }
            for (size_t i = 0; i < 16 && 16 * b + i < nt; i++)
                _mm512_mask_storeu_ps(j->y + (t0 + 16 * b + i) * j->ldy + n0 + 16 * r, m, v[i]);
        }
    }
}

MX_TGT int matmul_amx_unit(size_t i, int worker, void *job) {
    const MatmulAmxJob *j = job;
    MatmulAmxScratch *s = j->ws + worker;
    size_t n0 = i * MATMUL_AMX_NB, nr = j->N - n0 < MATMUL_AMX_NB ? j->N - n0 : MATMUL_AMX_NB;
    gbf_amx_tiles_16x64();
    for (size_t t0 = 0; t0 < j->T; t0 += MX_TSB) {
        size_t nt = j->T - t0 < MX_TSB ? j->T - t0 : MX_TSB;
        for (size_t k0 = 0; k0 < j->K; k0 += MX_KC) mx_chunk(j, s, n0, nr, t0 / 16, (nt + 15) / 16, k0);
        mx_store(j, s, n0, nr, t0, nt);
    }
    _tile_release();
    return AL_OK;
}
#else
int matmul_amx_unit(size_t i, int worker, void *job) {
    (void)i; (void)worker; (void)job;
    return al_err("internal: AMX products on a CPU without them");
}
#endif
