/* matmul_amx.h -- bf16 mode's product y = x W^T from 16 tokens on, on the AMX tile unit (tdpbf16ps),
 * where the CPU has AMX-BF16 and Linux grants the tile registers (gram_bf16.h's gbf_amx_cpu).
 *
 * The operands are the token-lane tiles' (matmul.c): W (N, K) BF16 row-major where it lies (the
 * mapping) is the A operand as it is -- a 16-row x 32-BF16 tile is 16 rows of W at stride 2K bytes,
 * no packing --, bt_pack's x (16 tokens to a vector of BF16 pairs: xp[block][pair][16 tokens]) is
 * the B operand (VNNI pairs of xᵀ), and each 16 x 16 float accumulator is a tile of yᵀ (16 rows of W
 * x 16 tokens), transposed into y once per superblock of tokens.
 *
 * Results: the float32 sum of the same exact BF16 products as the vdpbf16ps tiles, in another
 * order (tdpbf16ps adds 32 products per row and token per instruction, each with one rounding; as
 * vdpbf16ps, values below 2^-126 read as zero), so |y - exact| <= gamma_K sum_k |x_k| |w_k| (x rounded
 * to BF16, gamma_K = K u / (1 - K u), u = 2^-24) for both, and the two routes differ by at most twice
 * that (tests/test_matmul.c: 54 % of outputs differ, by at most 1e-7 of sum |x w|).
 * Thread-safe; each unit loads its tile config and releases the tiles when it ends. */
#ifndef AL_MATMUL_AMX_H
#define AL_MATMUL_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MATMUL_AMX_NB 64     /* rows of W per unit (4 tiles of 16) */

/* True where products take the AMX tiles: the CPU has them, Linux grants them, and neither
 * matmul_amx_allow(false) nor ATTNLAB_AMX=0 (read once) switched them off. */
bool matmul_amx_ok(void);
/* Switches the AMX route off (false: the vdpbf16ps token-lane tiles run, as on a CPU without AMX)
 * or back on, for tests and benchmarks; not while a product runs. */
void matmul_amx_allow(bool on);

typedef struct MatmulAmxScratch MatmulAmxScratch;

/* One product: the caller sets the operands, matmul_amx_begin allocates the scratch, the units
 * (MATMUL_AMX_NB rows each, on any of nthreads workers) run, matmul_amx_end frees it. */
typedef struct {
    const uint16_t *W;       /* (N, K) BF16, row-major */
    size_t N, K;
    const uint32_t *xp;      /* (ceil(T / 16), ceil(K / 2), 16): bt_pack's BF16 pairs, missing tokens 0 */
    size_t T;
    float *y;                /* (T, N), row stride ldy */
    size_t ldy;
    int nthreads;
    MatmulAmxScratch *ws;    /* (nthreads): matmul_amx_begin's */
    uint32_t *bz;            /* (ceil(T / 16), 16, 16): each block's last step of pairs, zero padded; NULL when K % 32 == 0 */
} MatmulAmxJob;

/* Allocates j's scratch for j->nthreads workers. AL_OK, or AL_ERR (out of memory). */
int matmul_amx_begin(MatmulAmxJob *j);
/* Unit i (a sweep_task_fn): rows [i MATMUL_AMX_NB, +MATMUL_AMX_NB) of y for every token. */
int matmul_amx_unit(size_t i, int worker, void *job);
void matmul_amx_end(MatmulAmxJob *j);

#endif
