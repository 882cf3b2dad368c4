/* gram.c -- Gram matrices of per-head factors straight from a checkpoint's mapping (or the copy of
 * a tensor a cold sweep lent the store: gram_ahead.h): head views as blocks of stored tensors,
 * dequantization fused into a cache-sized chunk, dsyrk accumulation in double. See gram.h. */
#define _GNU_SOURCE
#include "gram.h"
#include "gram_bf16.h"
#include "matmul.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Doubles per chunk: 512 KB, half of a core's L2 on these machines; a multiple of 128 rows of a
 * 128-wide head, so FP8 scale blocks are never split. */
#define GRAM_CHUNK 65536
/* Rows the fast route's column-Gram packing prefetches ahead. */
#define GRAM_AHEAD 16
/* uint32 words of one view's packed BF16 chunk in a batch of gram_compute_fast_many. */
#define GRAM_PACK(ld) ((size_t)(GBF_CHUNK / 2) * (ld))

/* ================================================================ head views */

void gram_view_clear(GramView *v) {
    free(v->tensor);
    memset(v, 0, sizeof *v);
}

int gram_view(const Model *m, head_kind kind, int layer, int head, head_part part, GramView *v) {
    memset(v, 0, sizeof *v);
    HeadBlock b;
    if (model_head_block(m, kind, layer, head, part, &b) != AL_OK) return AL_ERR;
    if (b.then || b.scaled)          /* DeepSeek-V4: a product of blocks (farr takes the factors route) */
        return al_err("internal: this %s model's %s views are formed from several tensors (model_head); the Gram route "
                      "reads one block", m->cfg.model_type, kind == HK_O ? "O" : "K / V");
    if (!(v->tensor = model_tensor_name(m, b.layer, b.suffix))) return AL_ERR;   /* KV-shared: the source's */
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
    const float *rscale;     /* compressed-tensors FP8: one scale per row (the store's), or NULL */
    dt_fp4 fp4;              /* an FP4 weight's codes and scales (enc DT_FP4_NONE: not one) */
} Tensor2;

/* Finds name and, for FP8 E4M3, its "<name>_scale_inv" (checked as store_read checks it). */
static int tensor_open(const Store *st, const char *name, Tensor2 *t) {
    memset(t, 0, sizeof *t);
    const st_entry *e;
    const st_file *f;
    if (store_entry(st, name, &e, &f) != AL_OK || store_shape2(st, name, &t->rows, &t->cols) != AL_OK ||
        store_fp4(st, name, &t->fp4) != AL_OK)
        return AL_ERR;
    if (t->fp4.enc != DT_FP4_NONE) { t->name = name; t->dtype = e->dtype; return AL_OK; }  /* read by block_read */
    if (!dt_is_float(e->dtype)) return al_err("tensor '%s' is %s, not a float weight", name, dt_name(e->dtype));
    t->name = name;
    t->dtype = e->dtype;
    t->esize = dt_size(e->dtype);
    t->data = store_bytes(st, name, e, f);     /* a sweep's own copy (gram_ahead.h), or the mapping */
    if (e->dtype != DT_F8_E4M3) return AL_OK;
    if (store_fp8_rscale(st, name, t->rows, &t->rscale) != AL_OK || t->rscale) return t->rscale ? AL_OK : AL_ERR;
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
    if (t->fp4.enc != DT_FP4_NONE) {     /* FP4: code times block scale (times NVFP4's scale_2), widened */
        dt_fp4_dequant_d(&t->fp4, r0, nr, c0, nc, dst, ld);
        return AL_OK;
    }
    if (t->rscale) {     /* per-row scale: code times it as float, widened */
        for (size_t i = 0; i < nr; i++)
            dt_e4m3_row_d(t->data + (r0 + i) * t->cols + c0, nc, t->rscale[r0 + i], dst + i * ld);
        return AL_OK;
    }
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
    /* the fast route (gram_compute_fast): one packed chunk, a segment, the chunk's scales */
    void *pack;              /* (GBF_CHUNK x gbf_ld(k)) floats, or GRAM_MANY chunks of GRAM_PACK(gbf_ld(k))
                                BF16 pairs, whichever is larger */
    float *seg;              /* (max(k, GBF_CHUNK)) one contiguous segment as float */
    float *scale;            /* (GRAM_MANY, k) */
    size_t fast_k;           /* the k these are sized for */
    GbfWork *gw;             /* the AMX chunk's scratch */
    GbfAcc *acc[GRAM_MANY];  /* the AMX chunks' float accumulators, one per view of a pass */
    uint32_t *pt;            /* (gbf_ld(k), GBF_CHUNK / 2) a row Gram's chunk transposed (AMX) */
    bool pt_ok;              /* pt holds the packed chunk's transpose */
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
    free(s->pack); free(s->seg); free(s->scale); free(s->pt);
    gbf_work_free(s->gw);
    for (int i = 0; i < GRAM_MANY; i++) gbf_acc_free(s->acc[i]);
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

/* Mirrors G's upper triangle into the lower one; NaN/Inf is an error naming the tensor. A NaN or
 * Inf anywhere in column i of the block makes G_ii non-finite, and |G_ij| <= sqrt(G_ii G_jj)
 * keeps the rest finite while the diagonal is: the diagonal is what needs checking. */
static int gram_finish(const GramView *v, size_t k, double *G) {
    bool finite = true;
    for (size_t i = 0; i < k; i++) finite = finite && isfinite(G[i * k + i]);
    for (size_t ib = 0; ib < k; ib += 8)                  /* 8 x 8 blocks: the stores stay in few lines */
        for (size_t jb = ib; jb < k; jb += 8)
            for (size_t i = ib; i < ib + 8 && i < k; i++)
                for (size_t j = jb > i ? jb : i + 1; j < jb + 8 && j < k; j++) G[j * k + i] = G[i * k + j];
    if (!finite)
        return al_err("tensor '%s' holds NaN/Inf in rows %zu..%zu, cols %zu..%zu: that head's spectra are undefined "
                      "(check the checkpoint)", v->tensor, v->r0, v->r0 + v->nr, v->c0, v->c0 + v->nc);
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
    return gram_finish(v, k, G);
}

/* ================================================================ the fast route */

/* Sizes the fast buffers for k (and a segment of max(k, GBF_CHUNK)). */
static int fast_reserve(GramScratch *s, size_t k) {
    if (s->pack && s->fast_k >= k) return AL_OK;
    free(s->pack); free(s->seg); free(s->scale); free(s->pt);
    for (int i = 0; i < GRAM_MANY; i++) { gbf_acc_free(s->acc[i]); s->acc[i] = NULL; }
    size_t ld = gbf_ld(k), n = k > GBF_CHUNK ? k : GBF_CHUNK;
    size_t words = GRAM_MANY * GRAM_PACK(ld) > GBF_CHUNK * ld ? GRAM_MANY * GRAM_PACK(ld) : GBF_CHUNK * ld;
    s->pack = al_malloc3(words, 1, sizeof(uint32_t), "packed Gram chunks");
    s->seg = al_malloc3(n, 1, sizeof(float), "a Gram segment");
    s->scale = al_malloc3(GRAM_MANY * k, 1, sizeof(float), "chunk scales");
    s->pt = al_malloc3(GBF_CHUNK / 2, ld, sizeof(uint32_t), "a transposed chunk");
    bool amx = gbf_amx_chunk(k), accs = true;
    if (!s->gw && amx) s->gw = gbf_work_new();
    for (int i = 0; amx && i < GRAM_MANY; i++) accs = accs && (s->acc[i] = gbf_acc_new(k));
    s->fast_k = k;
    if (!s->pack || !s->seg || !s->scale || !s->pt) { s->fast_k = 0; return AL_ERR; }
    if (amx && (!s->gw || !accs)) { s->fast_k = 0; return al_err("out of memory: the AMX chunk's scratch"); }
    return AL_OK;
}

/* n stored values at src as float (FP8: the codes' values, unscaled; others as store_read). */
static int seg_f32(const Tensor2 *t, const uint8_t *src, size_t n, float *dst) {
    if (t->dtype != DT_F8_E4M3) return dt_to_f32(t->dtype, src, n, dst);
    const float *tab = gbf_e4m3_f32();
    for (size_t i = 0; i < n; i++) dst[i] = tab[src[i]];
    return AL_OK;
}

static void chunk_scales(const Tensor2 *t, const GramView *v, size_t t0, float *scale);

/* Pair rows [t0, t0+n) of nv column-Gram views over the same tensor rows into nv packed chunks
 * (view i's at P + i * GRAM_PACK(ld)), a tensor row at a time across the views. The k values of a
 * tensor row are one short run per view, rows a whole tensor row apart (o_proj: 128 bytes every
 * 16 KB): no hardware prefetcher follows one head down its column, so the views' runs of the rows
 * GRAM_AHEAD ahead are asked for, and reading adjacent heads' runs together keeps the memory busy
 * (one head at a time, the packing spends ~4x longer waiting on o_proj). */
static void pack_pairs_many(const Tensor2 *t, const GramView *v, size_t nv, size_t t0, size_t n, uint32_t *P) {
    size_t k = gram_view_k(v), ld = gbf_ld(k), es = t->esize, row = t->cols * es, run = k * es, end = v->r0 + v->nr;
    bool fp8 = t->dtype == DT_F8_E4M3;
    for (size_t tp = 0; tp < (n + 1) / 2; tp++) {
        size_t r0 = v->r0 + t0 + 2 * tp;
        const uint8_t *rows = t->data + r0 * row;
        for (size_t i = 0; i < nv; i++) {
            const uint8_t *r = rows + v[i].c0 * es;
            for (size_t a = r0 + GRAM_AHEAD; a < r0 + GRAM_AHEAD + 2 && a < end; a++)
                for (size_t b = 0; b < run; b += 64) __builtin_prefetch(r + (a - r0) * row + b);
            gbf_pack_pairs(r, 2 * tp + 1 < n ? r + row : NULL, k, fp8, P + i * GRAM_PACK(ld) + tp * ld);
        }
    }
}

/* fast_pack for BF16 pairs (gram_bf16.h's vectorized packing): a column Gram two tensor rows at
 * a time, a row Gram's k tensor rows at once. */
static void fast_pack_bf16(const Tensor2 *t, const GramView *v, size_t t0, size_t n, GramScratch *scr) {
    size_t es = t->esize, k = gram_view_k(v);
    /* a row Gram on the AMX tiles: its transpose too, in the same pass (the stored rows are Pᵀ's) */
    scr->pt_ok = v->row_gram && gbf_amx_chunk(k);
    if (v->row_gram)
        gbf_pack_rows_t(t->data + (v->r0 * t->cols + v->c0 + t0) * es, t->cols * es, k, n, t->dtype == DT_F8_E4M3,
                        scr->pack, scr->pt_ok ? scr->pt : NULL);
    else pack_pairs_many(t, v, 1, t0, n, scr->pack);
}

/* True for an FP4 weight whose values before its per-tensor scale are BF16 numbers (E2M1, 2 bits,
 * times an E8M0 power of two or an E4M3 scale, 4 bits): MXFP4 and ModelOpt's NVFP4, whose scale_2
 * the chunk's scale vector carries. Not compressed-tensors' divided scale, nor INT4's. */
static bool fp4_bf16(const Tensor2 *t) {
    return t->fp4.enc == DT_FP4_MXFP4 || (t->fp4.enc == DT_FP4_NVFP4 && !t->fp4.gdiv);
}

/* fast_pack for such an FP4 weight: decoded (mm_fp4_decode, scale_2 left out) and packed in pairs by
 * truncation to BF16, exact for these values (subnormals kept): a column Gram two tensor rows of
 * the k indices at a time (into scr->tmp), a row Gram one row of the n contraction values at a
 * time. The scale_2 goes into scr->scale for every index (G_ij += s_i s_j (PᵀP)_ij). */
static void fast_pack_fp4(const Tensor2 *t, const GramView *v, size_t t0, size_t n, GramScratch *scr) {
    size_t k = gram_view_k(v), ld = gbf_ld(k);
    uint32_t *P = scr->pack;
    dt_fp4 q = t->fp4;
    q.gscale = 1;
    memset(P, 0, (n + 1) / 2 * ld * sizeof *P);
    if (!v->row_gram)
        for (size_t tp = 0; tp < (n + 1) / 2; tp++) {
            size_t two = 2 * tp + 1 < n ? 2 : 1;
            uint32_t *b = (uint32_t *)(void *)scr->tmp, *p = P + tp * ld;
            mm_fp4_decode(&q, v->r0 + t0 + 2 * tp, two, v->c0, k, scr->tmp, k);
            if (two == 1) memset(b + k, 0, k * sizeof *b);
            for (size_t i = 0; i < k; i++) p[i] = b[i] >> 16 | (b[k + i] & 0xffff0000u);
        }
    else
        for (size_t i = 0; i < k; i++) {
            uint32_t *b = (uint32_t *)(void *)scr->seg;
            mm_fp4_decode(&q, v->r0 + i, 1, v->c0 + t0, n, scr->seg, n);
            for (size_t tt = 0; tt < n; tt++) P[tt / 2 * ld + i] |= (b[tt] >> 16) << (16 * (tt & 1));
        }
    for (size_t i = 0; i < k; i++) scr->scale[i] = t->fp4.gscale;
}

/* Packs contraction rows [t0, t0+n) of the view's block (column Gram: tensor rows; row Gram:
 * tensor columns) into scr->pack for `path` (gram_bf16.h's layouts, zero padding), and for FP8
 * the chunk's scale of each of the k indices into scr->scale (the chunk lies in one scale block
 * along the contraction). */
static int fast_pack(const Tensor2 *t, const GramView *v, size_t t0, size_t n, gbf_path path, GramScratch *scr) {
    size_t k = gram_view_k(v), ld = gbf_ld(k), es = t->esize;
    scr->pt_ok = false;
    if (t->fp4.enc != DT_FP4_NONE) fast_pack_fp4(t, v, t0, n, scr);     /* fp4_bf16's, on GBF_BF16 */
    else if (path == GBF_BF16) fast_pack_bf16(t, v, t0, n, scr);
    else {
        float *F = scr->pack;
        memset(F, 0, n * ld * sizeof(float));
        /* segments: a tensor row over the k indices (column Gram) or over the n contraction rows */
        size_t nseg = v->row_gram ? k : n, len = v->row_gram ? n : k;
        for (size_t a = 0; a < nseg; a++) {
            size_t row = v->row_gram ? v->r0 + a : v->r0 + t0 + a, col = v->row_gram ? v->c0 + t0 : v->c0;
            if (seg_f32(t, t->data + (row * t->cols + col) * es, len, scr->seg) != AL_OK)
                return al_err_ctx("tensor '%s'", t->name);
            for (size_t b = 0; b < len; b++) {
                size_t tt = v->row_gram ? b : a, i = v->row_gram ? a : b;     /* contraction row, index */
                F[tt * ld + i] = scr->seg[b];
            }
        }
    }
    if (t->scale) chunk_scales(t, v, t0, scr->scale);
    return AL_OK;
}

/* The FP8 scale of each of the k indices in the chunk starting at contraction row t0: one read per
 * scale block the indices cross (a 128-wide head: one or two), copied along its run. */
static void chunk_scales(const Tensor2 *t, const GramView *v, size_t t0, float *scale) {
    size_t k = gram_view_k(v), first = v->row_gram ? v->r0 : v->c0;      /* the tensor index of index 0 */
    for (size_t i = 0, end; i < k; i = end) {
        end = ((first + i) / DT_FP8_BLOCK + 1) * DT_FP8_BLOCK - first;      /* this block's indices: [i, end) */
        if (end > k) end = k;
        size_t row = v->row_gram ? v->r0 + i : v->r0 + t0, col = v->row_gram ? v->c0 + t0 : v->c0 + i;
        float s;
        memcpy(&s, t->scale + ((row / DT_FP8_BLOCK) * t->scols + col / DT_FP8_BLOCK) * sizeof(float), sizeof s);
        for (size_t x = i; x < end; x++) scale[x] = s;
    }
}

/* A view's block inside its tensor, or an error naming both. */
static int view_in_range(const Tensor2 *t, const GramView *v) {
    if (v->r0 > t->rows || v->nr > t->rows - v->r0 || v->c0 > t->cols || v->nc > t->cols - v->c0)
        return al_err("tensor '%s' (%zu x %zu): block rows %zu..%zu, cols %zu..%zu out of range", t->name, t->rows,
                      t->cols, v->r0, v->r0 + v->nr, v->c0, v->c0 + v->nc);
    return AL_OK;
}

/* gram_finish, then the bound on |G - the double route's G|_F (gram_compute_fast's *err). */
static int fast_finish(const Tensor2 *t, const GramView *v, gbf_path path, double *G, double *err) {
    size_t k = gram_view_k(v), other = gram_view_rows(v);
    int rc = gram_finish(v, k, G);
    if (rc != AL_OK) return rc;
    /* |E|_F <= gamma trace(G) (gram_bf16.h); FP8: the double route rounds code * scale to float
     * first (2u more); flushed denormals far below */
    double tr = 0, u = ldexp(1.0, -24);
    for (size_t i = 0; i < k; i++) tr += G[i * k + i];
    /* + the double sums over `other` terms: the double route's dsyrk and the chunks' additions */
    bool scaled = t->scale || (t->fp4.enc != DT_FP4_NONE && t->fp4.gscale != 1.0f);   /* NVFP4: code * s * scale_2 */
    double gam = path == GBF_BF16 ? gbf_gamma_acc(k) : gbf_gamma(path);     /* AMX: the float accumulator's too */
    double rel = gam + (scaled ? 2.0001 * u : 0) + 2.0 * (double)other * ldexp(1.0, -53) * (1 + 1e-6);
    *err = rel * tr * (1 + 1e-6) + (double)k * (double)other * ldexp(1.0, -100);
    return AL_OK;
}

/* The chunk of contraction rows from c: its length, chunks aligned to absolute multiples of
 * GBF_CHUNK along the contraction (FP8 scale blocks). */
static size_t chunk_len(const GramView *v, size_t c) {
    size_t a0 = v->row_gram ? v->c0 : v->r0, other = gram_view_rows(v);
    size_t end = ((a0 + c) / GBF_CHUNK + 1) * GBF_CHUNK - a0;
    return (end < other ? end : other) - c;
}

int gram_compute_fast(const Store *st, const GramView *v, GramScratch *scr, double *G, double *err) {
    Tensor2 t;
    *err = 0;
    if (tensor_open(st, v->tensor, &t) != AL_OK) return AL_ERR;
    size_t k = gram_view_k(v), other = gram_view_rows(v);
    if (k == 0) return AL_OK;
    memset(G, 0, k * k * sizeof(double));
    if (other == 0) return AL_OK;
    if (view_in_range(&t, v) != AL_OK || fast_reserve(scr, k) != AL_OK) return AL_ERR;
    /* BF16 pairs where the values are BF16 (BF16, FP8 codes, MXFP4 / NVFP4 decoded) and the CPU has
     * vdpbf16ps, floats where it lacks it (not FP4); other dtypes (F32, F16, INT4: not BF16 values)
     * take the double route's Gram, exact (the float kernel is no faster than dsyrk on them) */
    gbf_path path = gbf_path_now();
    bool fp4 = fp4_bf16(&t) && path == GBF_BF16;     /* MXFP4 / NVFP4: BF16 values, vdpbf16ps only */
    if (!fp4 && ((t.dtype != DT_BF16 && t.dtype != DT_F8_E4M3) || t.rscale || t.fp4.enc != DT_FP4_NONE))
        return gram_compute(st, v, scr, G);
    gbf_acc_clear(scr->acc[0]);                     /* what a failed Gram left */
    for (size_t c = 0, n; c < other; c += n) {
        n = chunk_len(v, c);
        if (fast_pack(&t, v, c, n, path, scr) != AL_OK) return AL_ERR;
        const float *s = t.scale || (fp4 && t.fp4.gscale != 1.0f) ? scr->scale : NULL;
        if (path == GBF_BF16)
            gbf_chunk_bf16_acc(scr->gw, scr->acc[0], scr->pack, scr->pt_ok ? scr->pt : NULL, (n + 1) / 2, k, s, G);
        else gbf_chunk_f32(scr->pack, n, k, s, G);
    }
    gbf_acc_flush(scr->acc[0], G);
    return fast_finish(&t, v, path, G, err);
}

/* True when views v[0..nv) can share one pass of gram_compute_fast_many: column Grams of one
 * BF16/FP8 tensor (opened into *t) over the same rows, of one k, on the BF16 path. */
static bool many_together(const Store *st, const GramView *v, size_t nv, Tensor2 *t) {
    if (nv < 2 || nv > GRAM_MANY || gbf_path_now() != GBF_BF16 || tensor_open(st, v[0].tensor, t) != AL_OK) return false;
    if ((t->dtype != DT_BF16 && t->dtype != DT_F8_E4M3) || t->rscale) return false;
    for (size_t i = 0; i < nv; i++)
        if (v[i].row_gram || strcmp(v[i].tensor, v[0].tensor) != 0 || v[i].r0 != v[0].r0 || v[i].nr != v[0].nr ||
            gram_view_k(&v[i]) != gram_view_k(&v[0]) || gram_view_k(&v[i]) == 0 || v[i].nr == 0 ||
            view_in_range(t, &v[i]) != AL_OK)
            return false;
    return true;
}

static size_t many_passes;

size_t gram_many_passes(void) { return many_passes; }

int gram_compute_fast_many(const Store *st, const GramView *v, size_t nv, GramScratch *scr, double *const *G,
                           double *err, size_t *failed) {
    Tensor2 t;
    if (failed) *failed = 0;
    if (!many_together(st, v, nv, &t)) {
        for (size_t i = 0; i < nv; i++)
            if (gram_compute_fast(st, &v[i], scr, G[i], &err[i]) != AL_OK) {
                if (failed) *failed = i;
                return AL_ERR;
            }
        return AL_OK;
    }
    size_t k = gram_view_k(v), other = gram_view_rows(v), ld = gbf_ld(k);
    if (fast_reserve(scr, k) != AL_OK) return AL_ERR;
    for (size_t i = 0; i < nv; i++) {
        memset(G[i], 0, k * k * sizeof(double));
        gbf_acc_clear(scr->acc[i]);
    }
    for (size_t c = 0, n; c < other; c += n) {
        n = chunk_len(v, c);
        pack_pairs_many(&t, v, nv, c, n, scr->pack);
        for (size_t i = 0; i < nv; i++) {
            if (t.scale) chunk_scales(&t, &v[i], c, scr->scale + i * k);
            gbf_chunk_bf16_acc(scr->gw, scr->acc[i], (uint32_t *)scr->pack + i * GRAM_PACK(ld), NULL, (n + 1) / 2, k,
                               t.scale ? scr->scale + i * k : NULL, G[i]);
        }
    }
    for (size_t i = 0; i < nv; i++) gbf_acc_flush(scr->acc[i], G[i]);
    for (size_t i = 0; i < nv; i++)
        if (fast_finish(&t, &v[i], GBF_BF16, G[i], &err[i]) != AL_OK) {
            if (failed) *failed = i;
            return AL_ERR;
        }
    __atomic_add_fetch(&many_passes, 1, __ATOMIC_RELAXED);
    return AL_OK;
}

bool gram_fast_pays(void) { return gbf_path_now() == GBF_BF16; }

