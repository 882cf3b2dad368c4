/* matmul_internal.h -- switches of core/linalg/matmul.c that only tests and benchmarks use. */
#ifndef AL_MATMUL_INTERNAL_H
#define AL_MATMUL_INTERNAL_H

#include <stdbool.h>

/* Which kernels run: false forces the portable ones (no AVX-512 widening, no vdpbf16ps: bf16 mode
 * then rounds activations and takes the float32 route), true restores run-time detection.
 * Returns whether vdpbf16ps is now in use. Not for use while a product runs. */
bool mm_simd(bool on);
/* false: bf16 mode keeps the 4 x 6 dot-product tiles at every T (the token-lane tiles are off); true
 * (the default) takes the token-lane tiles from 16 tokens on. For tests and bench_forward --kernels;
 * not while a product runs. */
void mm_token_lanes(bool on);
/* false: products start and join threads of their own per product (sweep_run) from 2^21
 * multiply-adds on, as before the pool (pool.h); true (the default) wakes the pool's workers from
 * 2^18 on. For bench_forward --decode's comparison in one run; not while a product runs. */
void mm_pool(bool on);
/* false: BF16 weights at 1-4 tokens take the 4 x 6 / 1 x 6 tiles, as before the one-token kernels,
 * and FP4 / INT4 ones the register tiles' passes of 1024 columns; true (the default) the one-token
 * kernels (groups of rows over all columns, the next group prefetched). For tests and bench_forward
 * --decode's comparison; not while a product runs. */
void mm_matvec(bool on);
/* false: mm_xw widens a BF16 / F16 (in, out) weight whole into the scratch and runs one sgemm (F32 as it lies), as
 * before the in-place kernels; true (the default) reads it in place. For tests and bench_forward --decode's
 * comparison of an MoE model's experts; not while a product runs. */
void mm_xw_in_place(bool on);

#endif
