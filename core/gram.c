/* gram.c -- Gram matrices of per-head factors straight from a checkpoint's mapping: head views
 * as blocks of stored tensors, dequantization fused into a cache-sized chunk, dsyrk accumulation
 * in double. Owns nothing global. See gram.h. */
#define _GNU_SOURCE
#include "gram.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Doubles per chunk: 512 KB, half of a core's L2 on these machines; a multiple of 128 rows of a
 * 128-wide head, so FP8 scale blocks are never split. */
#define GRAM_CHUNK 65536

/* ================================================================ head views */

void gram_view_clear(GramView *v) {
    free(v->tensor);
    memset(v, 0, sizeof *v);
}

int gram_view(const Model *m, head_kind kind, int layer, int head, head_part part, GramView *v) {
    memset(v, 0, sizeof *v);
    HeadBlock b;
    if (model_head_block(m, kind, layer, head, part, &b) != AL_OK) return AL_ERR;
    if (!(v->tensor = model_tensor_name(m, layer, b.suffix))) return AL_ERR;
    v->r0 = b.r0; v->nr = b.nr; v->c0 = b.c0; v->nc = b.nc;
    /* The Gram is taken in the head space: the view's columns for Q/K/V, its rows for O. A
     * transposed view (x @ Bᵀ) has B's rows as its columns. */
    v->row_gram = (kind == HK_O) != b.transposed;
    return AL_OK;
}

/* ================================================================ block dequantization */

/* A stored 2-D tensor resolved for reading: its bytes in the mapping and, for FP8 E4M3, its
 * block scales (F32, possibly unaligned in the file). */
typedef struct {
    const char *name;
    dt_type dtype;
    size_t rows, cols, esize;
    const uint8_t *data;
    const uint8_t *scale;    /* (ceil(rows/128), scols) F32, or NULL */
    size_t scols;
} Tensor2;

/* Finds name and, for FP8 E4M3, its "<name>_scale_inv" (checked as store_read checks it). */
static int tensor_open(const Store *st, const char *name, Tensor2 *t) {
    memset(t, 0, sizeof *t);
    const st_entry *e;
    const st_file *f;
    if (store_entry(st, name, &e, &f) != AL_OK || store_shape2(st, name, &t->rows, &t->cols) != AL_OK) return AL_ERR;
    if (!dt_is_float(e->dtype)) return al_err("tensor '%s' is %s, not a float weight", name, dt_name(e->dtype));
    t->name = name;
    t->dtype = e->dtype;
    t->esize = dt_size(e->dtype);
    t->data = st_data(f, e);
    if (e->dtype != DT_F8_E4M3) return AL_OK;
    const void *scale = NULL;
    int rc = store_fp8_scale(st, name, t->rows, t->cols, &scale, &t->scols);
    t->scale = scale;
    return rc;
}

/* The same block for the other float dtypes (through dt_to_f32, one row segment at a time). */
static int block_other(const Tensor2 *t, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld,
                       float *tmp) {
    for (size_t i = 0; i < nr; i++) {
        const uint8_t *src = t->data + ((r0 + i) * t->cols + c0) * t->esize;
        if (dt_to_f32(t->dtype, src, nc, tmp) != AL_OK) return al_err_ctx("tensor '%s'", t->name);
        vec_f2d(tmp, nc, dst + i * ld);
    }
    return AL_OK;
}

static int block_read(const Tensor2 *t, size_t r0, size_t nr, size_t c0, size_t nc, double *dst, size_t ld,
                      float *tmp) {
    if (r0 > t->rows || nr > t->rows - r0 || c0 > t->cols || nc > t->cols - c0)
        return al_err("tensor '%s' (%zu x %zu): block rows %zu..%zu, cols %zu..%zu out of range", t->name, t->rows,
                      t->cols, r0, r0 + nr, c0, c0 + nc);
    if (t->dtype == DT_F8_E4M3) {
        /* per 128x128 scale block: code times scale as float, widened (the values store_read gives) */
        dt_fp8_dequant_d(t->data, t->cols, t->scale, t->scols, r0, nr, c0, nc, dst, ld);
        return AL_OK;
    }
    return block_other(t, r0, nr, c0, nc, dst, ld, tmp);
}

int gram_read_block(const Store *st, const char *name, size_t r0, size_t nr, size_t c0, size_t nc, double *dst,
                    size_t ld) {
    Tensor2 t;
    if (tensor_open(st, name, &t) != AL_OK) return AL_ERR;
    float *tmp = t.dtype == DT_F8_E4M3 ? NULL : al_malloc3(nc ? nc : 1, 1, sizeof(float), "a row buffer");
    if (t.dtype != DT_F8_E4M3 && !tmp) return AL_ERR;
    int rc = block_read(&t, r0, nr, c0, nc, dst, ld, tmp);
    free(tmp);
    return rc;
}

/* ================================================================ Gram */

struct GramScratch {
    double *buf;             /* (cap) a chunk */
    float *tmp;              /* (cap) one row segment of a non-FP8 tensor */
    size_t cap;
};

GramScratch *gram_scratch_new(void) {
    GramScratch *s = al_calloc(1, sizeof *s, "Gram scratch");
    if (!s) return NULL;
    s->buf = al_malloc3(GRAM_CHUNK, 1, sizeof(double), "a Gram chunk");
    s->tmp = al_malloc3(GRAM_CHUNK, 1, sizeof(float), "a Gram chunk");
    s->cap = GRAM_CHUNK;
    if (!s->buf || !s->tmp) { gram_scratch_free(s); return NULL; }
    return s;
}

void gram_scratch_free(GramScratch *s) {
    if (!s) return;
    free(s->buf);
    free(s->tmp);
    free(s);
}

/* Grows the scratch to hold n doubles (a chunk of one row or column wider than GRAM_CHUNK). */
static int scratch_reserve(GramScratch *s, size_t n) {
    if (n <= s->cap) return AL_OK;
    double *b = al_malloc3(n, 1, sizeof(double), "a Gram chunk");
    float *t = al_malloc3(n, 1, sizeof(float), "a Gram chunk");
    if (!b || !t) { free(b); free(t); return AL_ERR; }
    free(s->buf); free(s->tmp);
    s->buf = b; s->tmp = t; s->cap = n;
    return AL_OK;
}

int gram_compute(const Store *st, const GramView *v, GramScratch *scr, double *G) {
    Tensor2 t;
    if (tensor_open(st, v->tensor, &t) != AL_OK) return AL_ERR;
    size_t k = gram_view_k(v), other = gram_view_rows(v);
    if (k == 0) return AL_OK;
    if (other == 0) { memset(G, 0, k * k * sizeof(double)); return AL_OK; }
    /* Chunks along the contracted dim: `per` rows (column Gram) or columns (row Gram) of k each. */
    size_t per = GRAM_CHUNK / k;
    if (per >= DT_FP8_BLOCK) per -= per % DT_FP8_BLOCK;
    if (per < 1) per = 1;
    if (per > other) per = other;
    if (scratch_reserve(scr, per * k) != AL_OK) return AL_ERR;
    for (size_t c = 0; c < other; c += per) {
        size_t len = per < other - c ? per : other - c;
        double beta = c ? 1.0 : 0.0;
        int rc;
        if (v->row_gram) {
            /* chunk (k x len) of B: G += chunk chunkᵀ */
            rc = block_read(&t, v->r0, v->nr, v->c0 + c, len, scr->buf, len, scr->tmp);
            if (rc == AL_OK)
                cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)k, (int)len, 1.0, scr->buf, (int)len, beta,
                            G, (int)k);
        } else {
            /* chunk (len x k) of B: G += chunkᵀ chunk */
            rc = block_read(&t, v->r0 + c, len, v->c0, v->nc, scr->buf, k, scr->tmp);
            if (rc == AL_OK)
                cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)k, (int)len, 1.0, scr->buf, (int)k, beta, G,
                            (int)k);
        }
        if (rc != AL_OK) return rc;
    }
    bool finite = true;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) {
            double g = G[i * k + j];
            finite = finite && isfinite(g);
            G[j * k + i] = g;
        }
    if (!finite)
        return al_err("tensor '%s' holds NaN/Inf in rows %zu..%zu, cols %zu..%zu: that head's spectra are undefined "
                      "(check the checkpoint)", v->tensor, v->r0, v->r0 + v->nr, v->c0, v->c0 + v->nc);
    return AL_OK;
}
