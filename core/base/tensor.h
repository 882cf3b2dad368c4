/* tensor.h -- dtypes of checkpoint tensors and their conversion; dense float matrices.
 *
 * dt_*: the safetensors dtypes attnlab reads and writes, and elementwise conversion to and
 * from float32 (F16, BF16, F8_E4M3 with round-to-nearest-even on the way down); the one FP8
 * E4M3 row decoder (AVX2 + F16C where the CPU has it, else a table; bit-identical), the
 * DeepSeek block-scale dequantization built on it, and the re-encoding of a changed weight that
 * keeps its unchanged blocks, scales and codes; the FP4 (E2M1) block encodings MXFP4 and NVFP4
 * and their decoder.
 * Mat: an owned row-major float32 matrix, element (i, j) at data[i * cols + j]; MatD the same in
 * double, with converters between the two. */
#ifndef AL_TENSOR_H
#define AL_TENSOR_H

#include "al.h"

typedef enum {
    DT_F32, DT_F16, DT_BF16, DT_F8_E4M3, DT_F8_E5M2, DT_F64,
    DT_I8, DT_U8, DT_I16, DT_I32, DT_I64, DT_BOOL,
    DT_F8_E8M0,             /* a power of two 2^(v - 127), 0xFF NaN: block scales only (DeepSeek-V4's FP8 scales) */
    DT_COUNT,
    DT_INVALID = -1
} dt_type;

/* "F32", "BF16", "F8_E4M3", ... as safetensors spells them. */
const char *dt_name(dt_type t);
/* Parses a safetensors dtype name; DT_INVALID when unknown. */
dt_type dt_parse(const char *name);
/* Parses a config's torch_dtype / dtype as torch spells it ("bfloat16", "float16" / "half", "float32" / "float",
 * "float64"); DT_INVALID for anything else ("auto", another word). */
dt_type dt_parse_torch(const char *name);
size_t dt_size(dt_type t);
/* True for the float types attnlab converts to f32 (F32 F16 BF16 F8_E4M3 F8_E5M2 F64). */
bool dt_is_float(dt_type t);

/* Scalar conversions (bit patterns in the integer types). */
float dt_f16_to_f32(uint16_t h);
uint16_t dt_f32_to_f16(float f);
float dt_bf16_to_f32(uint16_t b);
uint16_t dt_f32_to_bf16(float f);
float dt_e4m3_to_f32(uint8_t v);
uint8_t dt_f32_to_e4m3(float f);   /* saturates to +-448, NaN -> 0x7f */
float dt_e5m2_to_f32(uint8_t v);

/* Converts n elements of type t at src to float32 (dst must hold n floats). Integer and bool
 * types are an error (they are not weights). */
int dt_to_f32(dt_type t, const void *src, size_t n, float *dst);
/* Converts n floats to type t (float types only; F8_E8M0 takes powers of two alone, else an error). */
int dt_from_f32(dt_type t, const float *src, size_t n, void *dst);

/* ================================================================ FP8 rows and block scales */

/* DeepSeek FP8 checkpoints store one F32 scale per DT_FP8_BLOCK x DT_FP8_BLOCK block of a weight
 * (R, C) as "<name>_scale_inv" of shape (dt_fp8_nblocks(R), dt_fp8_nblocks(C)); edge blocks are
 * partial. W[i][j] = e4m3(code[i][j]) * scale[i / 128][j / 128], the product rounded to float.
 * Other publishers of the same layout (quantization_config quant_method "fp8", weight_block_size
 * [128, 128]; quant_config.h): Qwen3-*-FP8 store the grid in BF16 (Qwen3-1.7B-FP8's headers: every
 * weight_scale_inv BF16), MiniMax-M2 and GLM in F32 ("fmt": "float8_e4m3fn" names the same E4M3),
 * DeepSeek-V3.2 in F32 holding powers of two ("scale_fmt": "ue8m0": engines read them as E8M0
 * exponents), DeepSeek-V4 as F8_E8M0 bytes (2^(v - 127)). The grid multiplies in every one (the
 * "_inv" is DeepSeek's name, not a division); the store widens a BF16 / E8M0 grid to F32 once
 * (store_fp8_scale), so every reader sees the F32 grid. compressed-tensors' strategy "block" (llm-compressor's
 * FP8_BLOCK, block_structure [128, 128]) stores the same grid as "<name>_scale" (F32 / BF16), multiplying
 * likewise; a grid shape that is not [R, 1] or [1, 1] tells it from a per-channel scale. */
#define DT_FP8_BLOCK 128
static inline size_t dt_fp8_nblocks(size_t n) { return (n + DT_FP8_BLOCK - 1) / DT_FP8_BLOCK; }

/* n E4M3 codes times one scale s: dst[j] = dt_e4m3_to_f32(src[j]) * s as float (NaN codes NaN);
 * the _d variant widens that float to double. Thread-safe. */
void dt_e4m3_row(const uint8_t *src, size_t n, float s, float *dst);
void dt_e4m3_row_d(const uint8_t *src, size_t n, float s, double *dst);

/* Rows [r0, r0+nr) x cols [c0, c0+nc) of an FP8 tensor (row-major codes at w, `cols` wide) with
 * its block-scale grid (F32, (ceil(rows/128), scols); read with memcpy, so it may be unaligned
 * in a mapping) into dst (nr x nc, leading dim ld), as float or widened to double. The caller
 * checks the ranges. */
void dt_fp8_dequant(const uint8_t *w, size_t cols, const void *scale, size_t scols, size_t r0, size_t nr,
                    size_t c0, size_t nc, float *dst, size_t ld);
void dt_fp8_dequant_d(const uint8_t *w, size_t cols, const void *scale, size_t scols, size_t r0, size_t nr,
                      size_t c0, size_t nc, double *dst, size_t ld);

/* compressed-tensors FP8 (quant_method "compressed-tensors", format "float-quantized"; Llama-3.1-
 * 70B-Instruct-FP8, Qwen3-32B-FP8): "<name>" F8_E4M3 (R, C) and "<name>_scale" F32/BF16/F16 of
 * shape [] or [1] (strategy "tensor") or [R, 1] (strategy "channel"), one scale per output row;
 * "<name minus weight>input_scale" is the activations' and is not read. The scale MULTIPLIES
 * (compressed-tensors' dequantize: x_q * scale, symmetric, no zero point). The store widens the
 * scale to one float per row (rscale, R values); W[i][j] = e4m3(code[i][j]) * rscale[i] rounded
 * to float (torch multiplies in the scale's dtype: a BF16 scale rounds the product to BF16 there;
 * attnlab keeps the float product). Rows [r0, r0+nr) x cols [c0, c0+nc) into dst (leading dim ld). */
void dt_fp8_dequant_rows(const uint8_t *w, size_t cols, const float *rscale, size_t r0, size_t nr, size_t c0,
                         size_t nc, float *dst, size_t ld);

/* Re-encodes one stripe of an FP8 weight, rows [r0, r0 + nr) (r0 a multiple of DT_FP8_BLOCK, nr <=
 * DT_FP8_BLOCK) of a weight `cols` wide, whose values become W (nr x cols) and were Wold (nr x
 * cols, the source's dequantized values) = codes `old` (nr x cols) times the scale grid old_scale
 * (F32, scols wide; read with memcpy): a block whose values all equal Wold's bitwise keeps its codes
 * and scale; a changed block keeps its scale (doubled k times while the new values exceed 448 x
 * it; a block without a usable old scale gets the power of two over amax / 448) and, when k = 0,
 * the codes of its unchanged values; its other values are rounded to E4M3. Every new scale is the
 * old one times 2^k, so a BF16 or E8M0 grid holds it exactly.
 * Writes the stripe's codes q (nr x cols) and the row r0 / DT_FP8_BLOCK of the grid scale (scols
 * wide). Returns the blocks kept bit for bit. */
size_t dt_fp8_reencode_rows(const float *W, const float *Wold, const uint8_t *old, const void *old_scale,
                            size_t scols, size_t r0, size_t nr, size_t cols, uint8_t *q, float *scale);

/* ================================================================ FP4 (E2M1) block encodings
 *
 * One row of traits per encoding (dt_fp4_traits) and one decoder for both, beside the FP8 one.
 * Rules, read from their sources:
 * - E2M1 code table (OCP MX spec; transformers' integrations/mxfp4.py FP4_VALUES, vLLM's
 *   kE2M1ToFloat): codes 0..7 = +0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (8..15 negative).
 * - Packing: two codes per byte, the LOW nibble is the EVEN element (column 2j), the high nibble
 *   column 2j+1 (transformers' convert_moe_packed_tensors: sub[:, 0::2] = lut[blk & 0x0F];
 *   vLLM's break_fp4_bytes stacks (low, high)).
 * - MXFP4 (gpt-oss; quant_method "mxfp4"): "<name>_blocks" U8 (R, C/32, 16) and "<name>_scales"
 *   U8 (R, C/32), E8M0: scale = 2^(s - 127) (torch.ldexp(lut, s - 127)); 0xFF is NaN (OCP). A
 *   2-D weight here; gpt-oss's 3-D expert tensors (E, out, C/32, 16), transposed relative to their
 *   BF16 parameter, are one dt_fp4 of rows E out (store_fp4_experts), read by the forward pass.
 * - NVFP4 (ModelOpt, quant_algo "NVFP4"): "<name>" U8 (R, C/2), "<name>_scale" F8_E4M3 (R, C/16)
 *   (subnormal E4M3 scales are values), "<name>_scale_2" F32 of one value ([] or [1]); ModelOpt's
 *   weights_scaling_factor_2 = amax / (6 * 448), so it MULTIPLIES: W = e2m1 * scale * scale_2
 * - compressed-tensors' nvfp4-pack-quantized: "<name>_packed" U8 (R, C/2) in the same nibble order,
 *   "<name>_scale" F8_E4M3 (R, C/16), "<name>_global_scale" F32 of one value, the INVERSE of
 *   ModelOpt's (448 * 6 / amax): it DIVIDES the block scale first (compressed-tensors' dequantize:
 *   scale / global_scale, then x_q * scale), so W = e2m1 * (scale / global) (gdiv).
 * W[i][j] = (e2m1(code) * block_scale) * gscale, each product rounded to float (the first is exact);
 * MXFP4's gscale is 1; with gdiv, e2m1(code) * (block_scale / gscale).
 * - compressed-tensors pack-quantized INT4 (Kimi-K2-Thinking, K2.5; format "pack-quantized", weights
 *   num_bits 4, type int, symmetric, strategy group, group_size 32): "<name>_packed" I32 (R, C/8),
 *   "<name>_scale" (R, C/32) in BF16, F16 or F32 (sdt), "<name>_shape" I32/I64 [2] = (R, C). Read from
 *   compressed-tensors' pack_to_int32 / unpack_from_int32: element i of a row sits at bit 4i of the
 *   row's little-endian words (so the LOW nibble of each byte is the even element, as E2M1's), stored
 *   with an OFFSET of 8 (nibble = value + 8, not two's complement): value = nibble - 8 in [-8, 7];
 *   W = value * scale, rounded to float (exact for a BF16 scale). No zero point (asymmetric is
 *   refused); only C a multiple of 32 and 2-D weights. */
typedef enum { DT_FP4_NONE, DT_FP4_MXFP4, DT_FP4_NVFP4, DT_FP4_INT4, DT_FP4_COUNT } dt_fp4_enc;   /* NONE 0: zeroed structs hold none */

typedef struct {
    const char *name;        /* "MXFP4", "NVFP4" */
    size_t block;            /* values per block scale: 32, 16 */
    const char *scale;       /* the block scale's encoding: "E8M0", "F8_E4M3" */
} dt_fp4_trait;

const dt_fp4_trait *dt_fp4_traits(dt_fp4_enc e);
float dt_e2m1_to_f32(uint8_t code);          /* the low 4 bits */
float dt_e8m0_to_f32(uint8_t v);             /* 2^(v - 127); 0xFF NaN */

/* A weight (rows, cols) stored in an FP4 encoding: where its codes and block scales lie (in a
 * mapping, read bytewise), as the store finds them. */
typedef struct {
    dt_fp4_enc enc;
    size_t rows, cols;       /* the logical shape; cols a multiple of the block */
    const uint8_t *codes;    /* (rows, cols / 2) packed E2M1 */
    const uint8_t *scale;    /* (rows, cols / block) E8M0 or E4M3 (INT4: sdt, read with memcpy) */
    float gscale;            /* NVFP4's per-tensor scale_2 (multiplied); 1 for MXFP4 */
    bool gdiv;               /* compressed-tensors: gscale divides each block scale instead */
    dt_type sdt;             /* INT4: the group scale's dtype (BF16, F16, F32); unused otherwise */
} dt_fp4;

/* The block scale of block b of row r as float (NaN for a NaN code). */
float dt_fp4_block_scale(const dt_fp4 *q, size_t r, size_t b);
/* Rows [r0, r0+nr) x cols [c0, c0+nc) as float (or widened to double) into dst (nr x nc, leading
 * dim ld). The caller checks the ranges. Thread-safe. */
void dt_fp4_dequant(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, float *dst, size_t ld);
void dt_fp4_dequant_d(const dt_fp4 *q, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld);

/* ================================================================ Mat */

typedef struct {
    size_t rows, cols;
    float *data;            /* (rows, cols) row-major, owned */
} Mat;

Mat *mat_new(size_t rows, size_t cols);          /* zero-filled; NULL + error on failure */
void mat_free(Mat *m);
Mat *mat_copy(const Mat *m);
/* Transposed copy: (cols, rows). */
Mat *mat_transpose(const Mat *m);
/* Copy of rows [r0, r0+nr) and columns [c0, c0+nc). */
Mat *mat_slice(const Mat *m, size_t r0, size_t nr, size_t c0, size_t nc);
/* Transposed copy of the same block: (nc, nr). */
Mat *mat_slice_t(const Mat *m, size_t r0, size_t nr, size_t c0, size_t nc);
static inline float *mat_at(const Mat *m, size_t i, size_t j) { return m->data + i * m->cols + j; }
/* C = A @ B (float, via BLAS sgemm). */
Mat *mat_mul(const Mat *A, const Mat *B);
/* Frobenius norm (in double). */
double mat_fro(const Mat *m);
/* ||b - a|| / ||a|| over n floats, in double (0 when both are zero, Inf when only a is; NaN when
 * either holds NaN or a holds Inf: a non-finite input never reads as a small error). */
double vec_rel_err(const float *a, const float *b, size_t n);
/* First non-finite element index, or (size_t)-1 when all are finite. */
size_t mat_first_nonfinite(const Mat *m);

/* ================================================================ MatD */

/* The double counterpart of Mat, for the LAPACK side of the numerics; element (i, j) at
 * data[i * cols + j]. */
typedef struct {
    size_t rows, cols;
    double *data;           /* (rows, cols) row-major, owned */
} MatD;

MatD *matd_new(size_t rows, size_t cols);        /* zero-filled; NULL + error on failure */
void matd_free(MatD *m);
/* Widened copy of a float matrix (exact); NULL + error on failure. */
MatD *matd_from_mat(const Mat *m);
/* Copy rounded to float (round to nearest); NULL + error on failure. */
Mat *mat_from_matd(const MatD *m);
/* The same elementwise conversions for n values into a buffer the caller owns. */
void vec_f2d(const float *src, size_t n, double *dst);
void vec_d2f(const double *src, size_t n, float *dst);

#endif
