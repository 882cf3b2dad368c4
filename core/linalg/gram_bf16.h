/* gram_bf16.h -- the fast route's Gram kernel: the contribution of one chunk of at most
 * GBF_CHUNK contraction rows to G = Bᵀ B, accumulated in float32 registers within the chunk and
 * added (scaled) to a double G between chunks (on the AMX tiles through gbf_chunk_bf16_acc: to a
 * float accumulator first, flushed to G every GBF_FLUSH chunks).
 *
 * Two paths, chosen at run time (gbf_path_now):
 *   GBF_BF16: BF16 values (a BF16 weight, or FP8 E4M3 codes, which BF16 holds exactly) packed in
 *     pairs of contraction rows, P[t][i] = bf16(B[2t][i]) | bf16(B[2t+1][i]) << 16, and
 *     accumulated with AVX-512 BF16 `vdpbf16ps` (32 products into 16 float lanes per instruction);
 *   GBF_FLOAT: float values F[t][i], multiply-add in float (GCC vector code): the path of F32/F16
 *     weights, and of every weight on a CPU without AVX-512 BF16.
 * A scale vector s (FP8: the 128x128 block scale of each column of the chunk) is taken out of
 * the chunk product: G_ij += s_i s_j (Pᵀ P)_ij, in double.
 *
 * Error: within a chunk each lane adds at most n = GBF_CHUNK products one rounding at a time
 * (vdpbf16ps: exact BF16 products, two float additions per instruction; the float path: a
 * product and a sum per step, 2n roundings), so |G_ij - exact| <= gbf_gamma(path) * sum_t
 * |b_ti||b_tj| (gamma_m = m u / (1 - m u), u = 2^-24); by Cauchy-Schwarz the Frobenius norm of
 * the error is then at most gbf_gamma * trace(G). The double additions between chunks are
 * orders of magnitude below that. (vdpbf16ps flushes denormals: values below 2^-126, never met
 * in weights.) */
#ifndef AL_GRAM_BF16_H
#define AL_GRAM_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GBF_CHUNK 128        /* contraction rows per float accumulation (FP8: one scale block) */

typedef enum { GBF_AUTO, GBF_BF16, GBF_FLOAT } gbf_path;

/* True when this CPU has AVX-512 BF16 (and F/BW/VL). */
bool gbf_cpu_bf16(void);
/* Forces a path for tests and benchmarks (GBF_AUTO: the CPU decides; GBF_BF16 on a CPU without
 * it falls back to GBF_FLOAT). Process-wide; set it before a sweep starts. */
void gbf_force(gbf_path p);
/* The path Grams take now: GBF_BF16 or GBF_FLOAT. */
gbf_path gbf_path_now(void);
/* The relative bound above for a path (GBF_BF16 or GBF_FLOAT). */
double gbf_gamma(gbf_path p);

/* AMX: gbf_chunk_bf16 runs on the tile unit (tdpbf16ps; same layouts, same bound) where the CPU
 * has AMX-BF16, Linux grants the tile registers and gbf_amx_allow(false) was not called (tests and
 * benchmarks compare both). gbf_amx_cpu: the CPU and the kernel allow it; gbf_amx_now: it is used. */
bool gbf_amx_cpu(void);
void gbf_amx_allow(bool on);
bool gbf_amx_now(void);
/* Loads the tile configuration both AMX users take (palette 1, tiles 0-7 of 16 rows x 64 bytes); x86 with
 * AMX only, on a thread that will release the tiles (_tile_release). */
void gbf_amx_tiles_16x64(void);

/* The leading dim of a packed chunk of k columns: k rounded up to a whole tile (32); the
 * columns k..ld-1 must hold zeros. */
static inline size_t gbf_ld(size_t k) { return (k + 31) / 32 * 32; }

/* G (k x k, row-major double; the upper triangle j >= i is updated, entries below it within a
 * tile may receive garbage -- symmetrize from the upper triangle afterwards) +=
 * diag(s) Pᵀ P diag(s) over np packed pair rows P (np x gbf_ld(k) uint32), np <= GBF_CHUNK / 2.
 * s: (k) scales or NULL. Requires gbf_cpu_bf16(). */
void gbf_chunk_bf16(const uint32_t *P, size_t np, size_t k, const float *s, double *G);
/* The AMX chunk's scratch (Pᵀ, a zero-padded last step, the accumulators' store: ~84 KB, kept off
 * the stack): one per thread, held by the caller (gbf_chunk_bf16 allocates one per call, and takes
 * the vdpbf16ps tiles where that fails). gbf_amx_chunk(k): a chunk of k columns takes the tiles. */
typedef struct GbfWork GbfWork;
GbfWork *gbf_work_new(void);
void gbf_work_free(GbfWork *w);
bool gbf_amx_chunk(size_t k);
/* gbf_chunk_bf16 with scratch w (NULL: allocated per call) and, where the caller made it, the
 * chunk's transpose PT (gbf_ld(k) rows of gbf_npad(np) dwords, PT[i][t] = P[t][i], zeros for
 * t >= np; NULL: made from P here, on the AMX path). Same values as gbf_chunk_bf16. */
void gbf_chunk_bf16_ws(GbfWork *w, const uint32_t *P, const uint32_t *PT, size_t np, size_t k, const float *s,
                       double *G);
/* The AMX path's float accumulator of one G (issue 32's sweep: the double epilogue per 16 x 16 block
 * and 128-row chunk was a third of the chunk's time). gbf_chunk_bf16_acc adds a chunk on the AMX
 * path into the accumulator in float32 -- s_i s_j rounded to float, then one fused multiply-add
 * per entry -- and adds the accumulator to G in double every GBF_FLUSH chunks; other chunks (the
 * vdpbf16ps path, k > 256, a scale outside [2^-40, 2^40]) go to G as gbf_chunk_bf16_ws sends them.
 * Error: a chunk's float product Ĉ (|Ĉ - C| <= gamma_128 sum_t |b_ti||b_tj|) passes through at most
 * GBF_FLUSH + 2 float roundings before G (the scale product, at most GBF_FLUSH + 1 additions), so
 * the entry's error is at most gbf_gamma_acc(k) sum_t |s_i b_ti||s_j b_tj| with gbf_gamma_acc =
 * gamma_128 + gamma_{GBF_FLUSH+2} (1 + gamma_128) where the AMX path is taken (underflow below
 * 2^-126 per operation: far under gram.c's absolute term). Range: a Gram entry past float's 3e38
 * within GBF_FLUSH chunks comes out non-finite (an error naming the tensor), as one past it within
 * a chunk already did (weights near 2^59; FP8 codes are at most 448). One accumulator per G: call
 * gbf_acc_flush(a, G) before G is read, gbf_acc_clear(a) to drop what a failed G left. */
#define GBF_FLUSH 8
typedef struct GbfAcc GbfAcc;
GbfAcc *gbf_acc_new(size_t kmax);
void gbf_acc_free(GbfAcc *a);
void gbf_chunk_bf16_acc(GbfWork *w, GbfAcc *a, const uint32_t *P, const uint32_t *PT, size_t np, size_t k,
                        const float *s, double *G);
void gbf_acc_flush(GbfAcc *a, double *G);
void gbf_acc_clear(GbfAcc *a);
double gbf_gamma_acc(size_t k);
/* np pair rows rounded up to whole AMX steps (16). */
static inline size_t gbf_npad(size_t np) { return (np + 15) / 16 * 16; }
/* The same over n float rows F (n x gbf_ld(k)), n <= GBF_CHUNK. */
void gbf_chunk_f32(const float *F, size_t n, size_t k, const float *s, double *G);

/* Packing for gbf_chunk_bf16 straight from stored values (v: FP8 E4M3 codes when fp8, else BF16
 * bits), vectorized; require gbf_cpu_bf16(). gbf_pack_pairs: one pair row of a column Gram's
 * chunk, dst[i] = v0[i] | v1[i] << 16 for i < k as BF16 (v1 NULL: zeros), zeros up to gbf_ld(k).
 * gbf_pack_rows: a whole chunk of a row Gram, from the k stored rows at src + i stride (bytes), n
 * contraction values each: P[t][i] = v_i[2t] | v_i[2t+1] << 16 for t < ceil(n/2) (ld gbf_ld(k)),
 * zeros past k and n. */
void gbf_pack_pairs(const uint8_t *v0, const uint8_t *v1, size_t k, bool fp8, uint32_t *dst);
void gbf_pack_rows(const uint8_t *src, size_t stride, size_t k, size_t n, bool fp8, uint32_t *P);
/* gbf_pack_rows that also writes the chunk's transpose PT (gbf_chunk_bf16_ws's layout) in the same
 * pass: the stored rows are PT's rows already (pairs of contraction values side by side), so the
 * AMX path's one transpose is P's, not P's and then Pᵀ's. */
void gbf_pack_rows_t(const uint8_t *src, size_t stride, size_t k, size_t n, bool fp8, uint32_t *P, uint32_t *PT);

/* E4M3 code -> its value as BF16 bits (exact; NaN codes give a BF16 NaN) and as float: tables
 * of 256, built once. */
const uint16_t *gbf_e4m3_bf16(void);
const float *gbf_e4m3_f32(void);

#endif
