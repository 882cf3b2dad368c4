/* pad.h -- the one zero padding of truncated heads: a rank-r factor written into its head's slot of a weight at
 * the source's width, zeros past r. truncate's layers (analysis/farr.c farr_attn_layer), their exports
 * (export/export.c, factors format and the dense layouts) and compare's compute-bf16 route (methods/budget_run.c)
 * all write their padded blocks through it, so the three give the same bytes. Owns nothing. */
#ifndef AL_PAD_H
#define AL_PAD_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

/* A factor as a padded block reads it: r of F's columns from f0 on (by_cols: entry (a, j) = F[a, f0 + j]) or r of
 * its rows (entry (a, j) = F[f0 + j, a]), times s; a runs over the weight's rows (pad_cols) or columns (pad_rows). */
typedef struct {
    const Mat *F;           /* NULL: zeros */
    size_t f0, r;           /* the first column (row) read and how many */
    bool by_cols;
    float s;
} PadSrc;

/* All of F (NULL: none, r 0): its columns (by_cols) or its rows, times s. */
PadSrc pad_src(const Mat *F, bool by_cols, float s);

/* Weight columns [c0, c0 + n) := src's entries (w0 + i, j) for j < r, zero past r. W holds the weight's rows
 * [w0, w0 + W->rows) (a stripe; w0 = 0 when whole). */
void pad_cols(Mat *W, size_t w0, size_t c0, size_t n, PadSrc src);

/* Weight rows [r0, r0 + n) := row j holds src's entries (i, j) over the columns i for j < r, zero rows past r.
 * W holds the weight's rows [w0, w0 + W->rows): rows outside it are skipped. */
void pad_rows(Mat *W, size_t w0, size_t r0, size_t n, PadSrc src);

/* dst[0 .. n) := src[0 .. r) then zeros (src NULL: all zeros); nothing when dst is NULL. */
void pad_vec(float *dst, size_t n, const float *src, size_t r);

#endif
