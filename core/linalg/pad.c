/* pad.c -- truncated heads' factors written at the source's width, zeros past their rank (pad.h). Owns nothing. */
#include "pad.h"

PadSrc pad_src(const Mat *F, bool by_cols, float s) {
    return (PadSrc){.F = F, .f0 = 0, .r = F ? (by_cols ? F->cols : F->rows) : 0, .by_cols = by_cols, .s = s};
}

/* src's entry (a, j), j < src.r. */
static float entry(const PadSrc *p, size_t a, size_t j) {
    const Mat *F = p->F;
    return p->s * (p->by_cols ? F->data[a * F->cols + p->f0 + j] : F->data[(p->f0 + j) * F->cols + a]);
}

void pad_cols(Mat *W, size_t w0, size_t c0, size_t n, PadSrc src) {
    size_t r = src.F && src.r < n ? src.r : src.F ? n : 0;
    for (size_t i = 0; i < W->rows; i++) {
        float *row = W->data + i * W->cols + c0;
        for (size_t j = 0; j < r; j++) row[j] = entry(&src, w0 + i, j);
        for (size_t j = r; j < n; j++) row[j] = 0.0f;
    }
}

void pad_rows(Mat *W, size_t w0, size_t r0, size_t n, PadSrc src) {
    size_t r = src.F ? src.r : 0;
    for (size_t j = 0; j < n; j++) {
        if (r0 + j < w0 || r0 + j >= w0 + W->rows) continue;
        float *row = W->data + (r0 + j - w0) * W->cols;
        for (size_t i = 0; i < W->cols; i++) row[i] = j < r ? entry(&src, i, j) : 0.0f;
    }
}

void pad_vec(float *dst, size_t n, const float *src, size_t r) {
    for (size_t j = 0; dst && j < n; j++) dst[j] = src && j < r ? src[j] : 0.0f;
}
