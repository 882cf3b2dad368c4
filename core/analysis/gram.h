/* gram.h -- Gram matrices of per-head factors read straight from a checkpoint: the streaming
 * route of the FaRR sweeps (`ranks vo all` on a 671B checkpoint).
 *
 * A per-head factor (model.h's canonical views) is a block of one stored tensor: HF Linear heads
 * are row blocks B (W = Bᵀ), o_proj heads and GPT-2's Conv1D Q/K/V heads are column blocks. The
 * factor's Gram in the inner (head) space is then B Bᵀ (a "row Gram") or Bᵀ B (a "column Gram"),
 * k x k with k the head dim. gram_compute dequantizes the block chunk by chunk (FP8 with its
 * 128x128 scales, BF16, F16, F32, ...) into a small double buffer and accumulates it with dsyrk,
 * so the layer is never copied to float: only the mapped pages of the block are touched (release
 * them with store_release_prefix once the layer is done). The chunk holds exactly the values
 * model_head would return (the same float32 dequantization), widened to double. */
#ifndef AL_GRAM_H
#define AL_GRAM_H

#include "model.h"

/* Where a per-head factor lives: rows [r0, r0+nr) x cols [c0, c0+nc) of `tensor`. */
typedef struct {
    char *tensor;            /* full tensor name (owned) */
    size_t r0, nr, c0, nc;   /* the block B */
    bool row_gram;           /* true: G = B Bᵀ (k = nr); false: G = Bᵀ B (k = nc) */
} GramView;

/* The block of the canonical view (kind, layer, head, part) -- the same arguments and the same
 * checks as model_head. Clear with gram_view_clear. */
int gram_view(const Model *m, head_kind kind, int layer, int head, head_part part, GramView *v);
void gram_view_clear(GramView *v);
/* k: the Gram's size (the head dim); rows: the factor's other dim (d_in, or hidden for W_O). */
static inline size_t gram_view_k(const GramView *v) { return v->row_gram ? v->nr : v->nc; }
static inline size_t gram_view_rows(const GramView *v) { return v->row_gram ? v->nc : v->nr; }

/* One worker's buffers (a chunk of doubles, about 512 KB: cache-sized). */
typedef struct GramScratch GramScratch;
GramScratch *gram_scratch_new(void);
void gram_scratch_free(GramScratch *s);

/* G (k x k, double, full symmetric storage) of the view's block. Reads the mapping only, so many
 * threads may call it at once, each with its own scratch. A block holding NaN/Inf is an error
 * naming the tensor. */
int gram_compute(const Store *st, const GramView *v, GramScratch *scr, double *G);

/* The fast route's G (gram_bf16.h): BF16 and FP8 E4M3 blocks as BF16 values through vdpbf16ps
 * (FP8: each 128x128 block's scale taken out of the block product, G = sum_b s_b^2 B_bᵀ B_b), as
 * floats on a CPU without AVX-512 BF16; float32 accumulation within chunks of GBF_CHUNK
 * contraction rows, double between them. Other dtypes (F32, F16) get gram_compute's G, *err 0.
 * *err receives a bound on the Frobenius norm of G minus gram_compute's G (the double route's).
 * Same threading and NaN/Inf rules as gram_compute. */
int gram_compute_fast(const Store *st, const GramView *v, GramScratch *scr, double *G, double *err);
/* Views per gram_compute_fast_many call. */
#define GRAM_MANY 4
/* gram_compute_fast of views v[0..nv) into G[i], err[i] (nv <= GRAM_MANY), the same values to the
 * bit. Column Grams of one tensor over the same rows (adjacent heads of o_proj) are packed in one
 * pass, a tensor row across all of them at a time: one head's run of a row is 128-256 bytes of a
 * 16-32 KB row, and walking down one head at a time leaves the memory idle most of the time. On
 * an error *failed (when not NULL) is the index of the view it is about. gram_many_passes: the
 * number of shared passes so far in this process (for tests: that the batch was not taken one view
 * at a time). */
int gram_compute_fast_many(const Store *st, const GramView *v, size_t nv, GramScratch *scr, double *const *G,
                           double *err, size_t *failed);
size_t gram_many_passes(void);
/* True when gram_compute_fast takes the AVX-512 BF16 kernel on this CPU (gram_bf16.h), where the
 * fast route is faster than the double one. */
bool gram_fast_pays(void);

/* Dequantizes rows [r0, r0+nr) x cols [c0, c0+nc) of a stored 2-D tensor into dst (nr x nc,
 * row-major, leading dim ld) as double: exactly the float32 values store_read gives, widened. */
int gram_read_block(const Store *st, const char *name, size_t r0, size_t nr, size_t c0, size_t nc, double *dst,
                    size_t ld);

#endif
