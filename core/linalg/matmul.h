/* matmul.h -- y = x W^T with W a stored weight read where it lies (the checkpoint's mapping),
 * never converted whole: what the forward pass multiplies by.
 *
 * WMat views a 2-D tensor of a Store in its stored dtype. F32 weights go to BLAS (sgemm / sgemv,
 * OpenBLAS threads) as they are. BF16, F16 and FP8 E4M3 (DeepSeek 128x128 block scales) weights
 * are multiplied per panel of rows:
 *   MM_F32   (the default) BF16 / F16 weights are widened to float32 in registers (AVX-512 tiles of
 *            4 tokens x 6 rows, float32 FMA); FP8 weights, and all of them where the CPU lacks
 *            AVX-512, per panel (at most MM_PANEL_ROWS x MM_PANEL_COLS) into a small per-worker
 *            buffer and a one-thread sgemm. The values are the ones store_read gives, so results
 *            equal a float32 copy's to float rounding (only the order of the sums differs).
 *   MM_BF16  BF16 weights: activations rounded to BF16 (round to nearest even) and multiplied with
 *            AVX-512 BF16 dot products (vdpbf16ps, float32 accumulation), as GPU inference and
 *            llama.cpp's BF16 path do: below 16 tokens in tiles of 4 tokens x 6 rows; from 16 tokens
 *            on the activations are packed once per product as BF16 pairs, 16 tokens to a vector,
 *            and multiplied by weight pairs broadcast from the mapping (token-lane tiles: each lane
 *            sums one output, no sums across lanes) -- on the AMX tile unit (tdpbf16ps, matmul_amx.h)
 *            where the CPU has it and Linux grants it --; where the CPU lacks AVX-512 BF16, the same rounded
 *            activations through the float32 route (products exact, float32 sums). F16 / FP8 / F32
 *            weights take the MM_F32 route in this mode.
 * BF16 weights at 1-4 tokens (decoding) take one-token kernels in both modes: a unit's rows in groups
 * of 3-8 over all columns at once, the next group prefetched into L2 while one is read (no passes,
 * no packing), vdpbf16ps in MM_BF16, float32 FMA on the weights' even / odd halves in MM_F32 (the
 * same products; the sums in another order).
 * FP4 / INT4 weights (tensor.h: MXFP4, NVFP4, compressed-tensors' NVFP4 and pack-quantized INT4) are
 * float32 products in both modes, on the values tensor.c's decoder gives (AVX-512: 16 values per
 * register lookup): below 64 tokens, where the columns are a multiple of 32, register tiles of up to
 * 4 tokens that decode 32 values with one shift and two lookups in a table scaled per block (the
 * activations split into even and odd columns once per product); elsewhere up to 3 tokens decoded in
 * registers one row at a time, MXFP4 / NVFP4 from 4 to 63 tokens decoded to BF16 blocks (exact)
 * under the BF16 weights' float32 tiles; from 64 tokens on (and INT4 / compressed-tensors' NVFP4 with
 * 16 columns left over from 4) the FP8 route: each panel decoded into the worker's buffer and a
 * one-thread sgemm (bench_quant: a BF16 twin's time or less from 64 tokens; MXFP4 0.7-1.1x of it at
 * 1 and 16 tokens, NVFP4 0.8-1.5x).
 * Dtypes without a kernel (F64, F8_E5M2) and Conv1D (in, out) weights stored in anything but F32
 * are converted to an owned float32 copy when the view is made (GPT-2-style models only).
 * (in, out) weights multiplied as x @ W (mm_xw: fused experts, Conv1D) are read in place in F32 / BF16 / F16:
 * AVX-512 register tiles of up to 4 tokens x 384 columns that stream the rows once at 1-4 tokens (decoding), passes
 * of 256 rows in tiles of 96 columns from 5 tokens on; per-panel sgemms elsewhere.
 *
 * Work is split over MmWork's workers (the persistent pool of pool.h, one BLAS thread each) by
 * blocks of output columns; MmWork owns the per-worker panels and the BF16 activation buffer, allocated once and
 * grown when a call needs more. */
#ifndef AL_MATMUL_H
#define AL_MATMUL_H

#include "store.h"

typedef enum { MM_F32, MM_BF16 } mm_compute;

/* "f32" / "bf16". */
const char *mm_compute_name(mm_compute c);
/* The mode a name gives: "bf16" is MM_BF16, anything else (NULL, "f32") MM_F32. */
mm_compute mm_compute_parse(const char *name);
/* What the mode computes ("bf16 (activations rounded to BF16, vdpbf16ps)"; the AMX tiles named where they run), naming the portable
 * route when the CPU lacks AVX-512 BF16. Static string. */
const char *mm_compute_describe(mm_compute c);
/* True when this CPU runs vdpbf16ps (and the kernel is not switched off, matmul_internal.h). */
bool mm_have_bf16(void);

#define MM_PANEL_ROWS 256
#define MM_PANEL_COLS 2048

typedef struct {
    dt_type dt;              /* stored dtype (DT_F32 when own) */
    const void *data;        /* (rows, cols) row-major in dt: the mapping, or own->data */
    const void *scale;       /* FP8: block scales (F32, (ceil(rows/128), scols); maybe unaligned) */
    size_t scols;
    const float *rscale;     /* compressed-tensors FP8: one scale per row (the store's), else NULL */
    size_t rows, cols;
    Mat *own;                /* owned float32 copy (dtypes without a kernel, Conv1D non-F32), or NULL */
    dt_fp4 fp4;              /* an FP4 weight (dt DT_U8): its codes and scales, decoded per panel */
} WMat;

/* A view of tensor `name` (2-D, or 1-D as 1 x n) of s. f32_only: the caller multiplies it as
 * x @ W (Conv1D): anything but F32 becomes an owned float32 copy. The view borrows s's mapping:
 * s must outlive it. Errors name the tensor. */
int wmat_view(const Store *s, const char *name, bool f32_only, WMat *w);
void wmat_free(WMat *w);
/* Bytes the view keeps: the stored tensor's size, or its float32 copy's. */
size_t wmat_bytes(const WMat *w);
/* Row r as float32 (cols floats into dst). */
void wmat_row(const WMat *w, size_t r, float *dst);

/* Rows [r0, r0+nr) x cols [c0, c0+nc) of an FP4 / INT4 weight (tensor.h) as float32 into dst (leading
 * dim ld): dt_fp4_dequant's values bit for bit, 16 at a time on AVX-512 when c0 and nc are multiples
 * of 16 (the panels' decoder; the Gram's fast route packs its blocks with it). Thread-safe. */
void mm_fp4_decode(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld);

/* bytes of memory, 64-byte aligned; from 2 MB on 2 MB-aligned with transparent huge pages asked
 * for (madvise), so that first touching a large buffer costs 512x fewer page faults. free() it.
 * NULL + error naming `what` when out of memory. */
void *mm_alloc(size_t bytes, const char *what);

typedef struct MmWork MmWork;

/* Scratch for nthreads workers (0: al_threads()). NULL + error when out of memory. */
MmWork *mm_work_new(int nthreads);
void mm_work_free(MmWork *wk);
int mm_work_threads(const MmWork *wk);

/* y (T, W.rows; row stride ldy) = x (T, W.cols; stride ldx) @ W^T in mode c. Returns AL_OK, AL_ERR
 * (out of memory) or AL_INTERRUPTED (sweep_run's poll). */
int mm_xwt(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy, mm_compute c);
/* The gated MLP's epilogue in bf16 mode: a[i] = silu(a[i]) * b[i] = a[i] / (1 + exp(-a[i])) * b[i],
 * i < n, with a vectorized exp (AVX-512: within a few float ulps of expf; elsewhere expf itself):
 * bf16 mode rounds the result to BF16 for the next product anyway. */
void mm_silu_mul(float *a, const float *b, size_t n);
/* The softmax's exponentials: s[i] = exp(s[i] - sub), i < n, with the same vectorized exp (AVX-512;
 * elsewhere expf); returns their sum, accumulated in double. */
double mm_exp_sum(float *s, size_t n, float sub);

/* y (T, W.cols; row stride ldy) = x (T, W.rows; stride ldx) @ W for an (in, out) weight stored F32, BF16 or F16
 * (gpt-oss's, Qwen3-VL-MoE's and Llama 4's fused experts viewed in the mapping; Conv1D's F32 views), read in place,
 * never widened whole, in either compute mode's numbers (float32 products of the stored values): on AVX-512 each
 * output is one float32 FMA chain over the rows in order -- the scalar fmaf loop's result bit for bit, the same for
 * any T, thread count and dtype holding the same values --; elsewhere per-panel sgemms (float32 rounding of the same
 * sum). Returns AL_OK, AL_ERR (another dtype; out of memory) or AL_INTERRUPTED. */
int mm_xw(MmWork *wk, const WMat *W, const float *x, size_t ldx, size_t T, float *y, size_t ldy);

#endif
