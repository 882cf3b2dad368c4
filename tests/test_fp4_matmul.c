/* test_fp4_matmul.c -- the forward pass's FP4 / INT4 weights (issue 28's speed and memory):
 *  - matmul's FP4 routes compute with tensor.c's values: y = x Wᵀ of hand-made weights in every
 *    encoding (MXFP4 with E8M0 scales 0 = 2^-127 and 140, NVFP4 with a subnormal E4M3 block scale
 *    and a scale_2 that multiplies, compressed-tensors' NVFP4 whose global scale divides, INT4 with
 *    BF16 / F16 / F32 group scales) against sgemm / sgemv on dt_fp4_dequant's float copy: bit for
 *    bit on the panel route (64 tokens on; INT4 and the divided scale from 4 on where the columns are
 *    not a multiple of 32; the portable route), within 1e-6 relative on the register tiles (1-63
 *    tokens, columns a multiple of 32: each NT x NR tile, NVFP4's two blocks per 32 columns, more
 *    than one pass of columns), the one-row register route (1-3 tokens) and BF16 blocks (NVFP4 with
 *    16 columns left over, 4-63 tokens); T = 1-5, 40, 63, 64, both modes, AVX-512 and portable;
 *  - the Gram's fast route (vdpbf16ps) takes MXFP4 and NVFP4 blocks, decoded to BF16 exactly, NVFP4's
 *    scale_2 as the chunk's scale (a nonzero error bound, and the Gram within it of the double
 *    route's), column and row Grams; compressed-tensors' divided scale and INT4 stay on the double
 *    route (bound 0, the same Gram);
 *  - gpt-oss's MXFP4 experts as released are read in place, expert by expert: the forward pass of a
 *    checkpoint whose experts take 100 MB as float32 (intermediate 4096) grows the resident set by
 *    less than a quarter of that (it made a float32 copy of every layer's experts before), and its
 *    perplexity is that of the same values in F32 (1e-6 relative). */
#include "check.h"
#include "forward.h"
#include "gram.h"
#include "gram_bf16.h"
#include "matmul_internal.h"
#include "synth.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <unistd.h>

static unsigned long long rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}

/* ================================================================ the decoder, bit for bit */

typedef struct {
    const char *what;
    dt_fp4 q;
} Case;

/* Random codes and scales for q (rows, cols set; enc, gscale, gdiv, sdt set): bytes owned by the caller. */
static void fill(dt_fp4 *q, uint8_t **codes, uint8_t **scale) {
    size_t B = dt_fp4_traits(q->enc)->block, ns = q->rows * (q->cols / B), es = q->enc == DT_FP4_INT4 ? dt_size(q->sdt) : 1;
    *codes = malloc(q->rows * q->cols / 2);
    *scale = malloc(ns * es);
    for (size_t i = 0; i < q->rows * q->cols / 2; i++) (*codes)[i] = (uint8_t)rnd32();
    for (size_t i = 0; i < ns; i++) {
        uint8_t *s = *scale + i * es;
        if (q->enc == DT_FP4_MXFP4) *s = i == 0 ? 0 : i == 1 ? 140 : (uint8_t)(115 + rnd32() % 16);   /* 2^-127 (subnormal values), 2^13 */
        else if (q->enc == DT_FP4_NVFP4) *s = i == 0 ? 0x01 : (uint8_t)(0x08 + rnd32() % 0x60);     /* 2^-9: subnormal */
        else {
            float f = (float)(rnd32() % 1000 + 1) * 1e-5f;
            if (q->sdt == DT_F32) memcpy(s, &f, 4);
            else {
                uint16_t h = q->sdt == DT_BF16 ? dt_f32_to_bf16(f) : dt_f32_to_f16(f);
                memcpy(s, &h, 2);
            }
        }
    }
    q->codes = *codes;
    q->scale = *scale;
}

/* mm_xwt on the FP4 view against sgemm / sgemv on the decoded copy: bitwise (one worker, one panel). */
static void check_case(const Case *c, size_t T) {
    dt_fp4 q = c->q;
    uint8_t *codes, *scale;
    fill(&q, &codes, &scale);
    size_t N = q.rows, K = q.cols;
    float *W = malloc(N * K * sizeof *W), *x = malloc(T * K * sizeof *x), *y = malloc(T * N * sizeof *y),
          *ref = malloc(T * N * sizeof *ref), *row = malloc(K * sizeof *row);
    dt_fp4_dequant(&q, 0, N, 0, K, W, K);
    for (size_t i = 0; i < T * K; i++) x[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
    if (T == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, 1.f, W, (int)K, x, 1, 0.f, ref, 1);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)N, (int)K, 1.f, x, (int)K, W, (int)K, 0.f, ref, (int)N);
    WMat w = {.dt = DT_U8, .data = q.codes, .rows = N, .cols = K, .fp4 = q};
    MmWork *wk = mm_work_new(1);
    bool panels = T >= 64 || (T > 3 && K % 32 && (q.enc == DT_FP4_INT4 || q.gdiv)) || !mm_have_bf16();
    for (int m = 0; m < 2; m++) {
        CHECK_OK(mm_xwt(wk, &w, x, K, T, y, N, m ? MM_BF16 : MM_F32));
        double rel = vec_rel_err(ref, y, T * N);
        if (panels)       /* the panel route: the decoded floats, one sgemm: the same bits */
            CHECK(memcmp(y, ref, T * N * sizeof *y) == 0,
                  "%s, T = %zu, %s mode: x Wᵀ equals sgemm on the decoded copy bit for bit (rel %.2g)", c->what, T,
                  m ? "bf16" : "f32", rel);
        else              /* registers (T <= 3) or BF16 blocks (T < 64): the same values, other sums */
            CHECK(rel < 1e-6, "%s, T = %zu, %s mode: x Wᵀ within 1e-6 of sgemm on the decoded copy (rel %.2g)", c->what, T,
                  m ? "bf16" : "f32", rel);
    }
    wmat_row(&w, N - 1, row);
    CHECK(memcmp(row, W + (N - 1) * K, K * sizeof *row) == 0, "%s: wmat_row is the decoded row", c->what);
    mm_work_free(wk);
    free(W); free(x); free(y); free(ref); free(row); free(codes); free(scale);
}

static void test_decoder(void) {
    const Case cases[] = {
        {"MXFP4", {.enc = DT_FP4_MXFP4, .rows = 70, .cols = 2048, .gscale = 1}},
        {"NVFP4 (scale_2 multiplies)", {.enc = DT_FP4_NVFP4, .rows = 33, .cols = 272, .gscale = 0.0123f}},
        {"NVFP4, 32-column chunks (scale_2 multiplies)", {.enc = DT_FP4_NVFP4, .rows = 45, .cols = 1088, .gscale = 0.0123f}},
        {"compressed-tensors NVFP4 (global scale divides)",
         {.enc = DT_FP4_NVFP4, .rows = 40, .cols = 512, .gscale = 81.5f, .gdiv = true}},
        {"INT4, BF16 scales", {.enc = DT_FP4_INT4, .rows = 48, .cols = 1024, .gscale = 1, .sdt = DT_BF16}},
        {"INT4, F16 scales", {.enc = DT_FP4_INT4, .rows = 17, .cols = 96, .gscale = 1, .sdt = DT_F16}},
        {"INT4, F32 scales", {.enc = DT_FP4_INT4, .rows = 20, .cols = 160, .gscale = 1, .sdt = DT_F32}},
    };
    const size_t Ts[] = {1, 2, 3, 4, 5, 40, 63, 64};
    for (int simd = 1; simd >= 0; simd--) {
        mm_simd(simd);
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++) check_case(&cases[c], Ts[t]);
    }
    mm_simd(true);
}

/* ================================================================ the Gram's fast route */

/* A file with the cases' FP4 weights as the store finds them (names "c<i>.weight" and their scales). */
static int write_fp4_file(const char *path, const Case *cs, size_t n, uint8_t **bufs) {
    st_writer *w = st_writer_new();
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < n; i++) {
        dt_fp4 q = cs[i].q;
        fill(&q, &bufs[2 * i], &bufs[2 * i + 1]);
        size_t R = q.rows, C = q.cols, B = dt_fp4_traits(q.enc)->block, one = 1;
        char nm[32], sn[96];
        snprintf(nm, sizeof nm, "c%zu.weight", i);
        if (q.enc == DT_FP4_MXFP4) {
            size_t bs[3] = {R, C / 32, 16}, ss[2] = {R, C / 32};
            snprintf(sn, sizeof sn, "%s_blocks", nm);
            rc = st_writer_add(w, sn, DT_U8, 3, bs, q.codes, R * C / 2);
            snprintf(sn, sizeof sn, "%s_scales", nm);
            if (rc == AL_OK) rc = st_writer_add(w, sn, DT_U8, 2, ss, q.scale, R * C / 32);
        } else if (q.enc == DT_FP4_NVFP4) {
            size_t ws[2] = {R, C / 2}, ss[2] = {R, C / B};
            float g = q.gscale;
            snprintf(sn, sizeof sn, "c%zu.weight%s", i, q.gdiv ? "_packed" : "");
            rc = st_writer_add(w, sn, DT_U8, 2, ws, q.codes, R * C / 2);
            snprintf(sn, sizeof sn, "%s_scale", nm);
            if (rc == AL_OK) rc = st_writer_add(w, sn, DT_F8_E4M3, 2, ss, q.scale, R * C / B);
            snprintf(sn, sizeof sn, "%s_%s", nm, q.gdiv ? "global_scale" : "scale_2");
            if (rc == AL_OK) rc = st_writer_add(w, sn, DT_F32, 1, &one, &g, 4);
        } else {
            size_t ws[2] = {R, C / 8}, ss[2] = {R, C / 32}, shp = 2;
            int32_t shape[2] = {(int32_t)R, (int32_t)C};
            snprintf(sn, sizeof sn, "%s_packed", nm);
            rc = st_writer_add(w, sn, DT_I32, 2, ws, q.codes, R * C / 2);
            snprintf(sn, sizeof sn, "%s_scale", nm);
            if (rc == AL_OK) rc = st_writer_add(w, sn, q.sdt, 2, ss, q.scale, R * C / 32 * dt_size(q.sdt));
            snprintf(sn, sizeof sn, "%s_shape", nm);
            if (rc == AL_OK) rc = st_writer_add(w, sn, DT_I32, 1, &shp, shape, sizeof shape);
        }
    }
    if (rc == AL_OK) rc = st_writer_write(w, path);
    st_writer_free(w);
    return rc;
}

static void test_gram(const char *tmp) {
    if (!gbf_cpu_bf16()) { printf("no AVX-512 BF16: the fast route's FP4 part skipped\n"); return; }
    const Case cs[] = {
        {"MXFP4", {.enc = DT_FP4_MXFP4, .rows = 384, .cols = 256, .gscale = 1}},
        {"NVFP4", {.enc = DT_FP4_NVFP4, .rows = 384, .cols = 256, .gscale = 0.0123f}},
        {"compressed-tensors NVFP4", {.enc = DT_FP4_NVFP4, .rows = 384, .cols = 256, .gscale = 81.5f, .gdiv = true}},
        {"INT4", {.enc = DT_FP4_INT4, .rows = 384, .cols = 256, .gscale = 1, .sdt = DT_BF16}},
    };
    uint8_t *bufs[8] = {0};
    char *dir = al_asprintf("%s/gram-fp4", tmp), *path = al_asprintf("%s/model.safetensors", dir);
    mkdir(dir, 0755);
    CHECK_OK(write_fp4_file(path, cs, 4, bufs));
    Store *st = NULL;
    CHECK_OK(store_open(dir, &st));
    GramScratch *scr = gram_scratch_new();
    for (size_t i = 0; st && i < 4; i++)
        for (int rg = 0; rg < 2; rg++) {
            char nm[64];
            snprintf(nm, sizeof nm, "c%zu.weight", i);
            /* a head's block: column Gram of 100 rows x 64 cols at (37, 64); row Gram of 64 rows x 200 cols at (128, 16) */
            GramView v = {.tensor = nm, .r0 = rg ? 128 : 37, .nr = rg ? 64 : 100, .c0 = rg ? 16 : 64, .nc = rg ? 200 : 64,
                          .row_gram = rg};
            size_t k = gram_view_k(&v);
            double *Gf = calloc(k * k, sizeof *Gf), *Gd = calloc(k * k, sizeof *Gd), err = -1, d2 = 0;
            CHECK_OK(gram_compute_fast(st, &v, scr, Gf, &err));
            CHECK_OK(gram_compute(st, &v, scr, Gd));
            for (size_t j = 0; j < k * k; j++) d2 += (Gf[j] - Gd[j]) * (Gf[j] - Gd[j]);
            bool fast = i < 2;
            printf("Gram of %s, %s: bound %.3g, |G - the double route's G|_F %.3g\n", cs[i].what, rg ? "row" : "column", err,
                   sqrt(d2));
            CHECK(fast ? err > 0 && sqrt(d2) <= err : err == 0 && d2 == 0,
                  "%s, %s Gram: %s (bound %.3g, |G - double route's| %.3g)", cs[i].what, rg ? "row" : "column",
                  fast ? "the fast route, within its bound" : "the double route", err, sqrt(d2));
            free(Gf); free(Gd);
        }
    gram_scratch_free(scr);
    store_free(st);
    for (int i = 0; i < 8; i++) free(bufs[i]);
    free(dir); free(path);
}

/* ================================================================ gpt-oss's experts in place */

#define FI 4096              /* the experts' intermediate width (the recipe's is 64) */

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f && fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    if (f) fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The gpt_oss recipe's checkpoint src with experts FI wide: into qd as MXFP4 blocks / scales (random
 * codes, scales 2^-6 .. 2^-3), into fd as the same values in F32; *float_bytes: every layer's
 * experts as float32. */
static int wide_twins(const char *src, const char *qd, const char *fd, size_t *float_bytes) {
    char *sp = al_asprintf("%s/model.safetensors", src), *sc = al_asprintf("%s/config.json", src);
    st_file *st = NULL;
    st_writer *ws[2] = {st_writer_new(), st_writer_new()};
    int rc = st_open(sp, &st);
    *float_bytes = 0;
    for (size_t i = 0; rc == AL_OK && i < st_count(st); i++) {
        const st_entry *e = st_entry_at(st, i);
        size_t n = st_numel(e), sh[4] = {e->shape[0], e->shape[1], e->ndim > 2 ? e->shape[2] : 0};
        bool gu = strstr(e->name, "experts.gate_up_proj") != NULL, dn = strstr(e->name, "experts.down_proj") != NULL;
        bool bias = strstr(e->name, "_bias") != NULL;
        if ((gu || dn) && !bias) {          /* (E, A, B) used as x @ W: stored (E, B, A / 32, 16) + (E, B, A / 32) */
            size_t E = sh[0], A = gu ? sh[1] : FI, B = gu ? 2 * FI : sh[2], bs[4] = {E, B, A / 32, 16}, ss[3] = {E, B, A / 32};
            size_t nb = E * B * A / 2, ns = E * B * A / 32, ps[3] = {E, A, B};
            uint8_t *blk = malloc(nb), *scl = malloc(ns);
            float *P = malloc(E * A * B * sizeof *P);
            for (size_t k = 0; k < nb; k++) blk[k] = (uint8_t)rnd32();
            for (size_t k = 0; k < ns; k++) scl[k] = (uint8_t)(121 + rnd32() % 4);
            dt_fp4 q = {.enc = DT_FP4_MXFP4, .rows = E * B, .cols = A, .codes = blk, .scale = scl, .gscale = 1};
            float *row = malloc(A * sizeof *row);
            for (size_t r = 0; r < E * B; r++) {         /* stored row (e, j) is column j of expert e's (A, B) */
                dt_fp4_dequant(&q, r, 1, 0, A, row, A);
                for (size_t a = 0; a < A; a++) P[(r / B * A + a) * B + r % B] = row[a];
            }
            char nm[256];
            snprintf(nm, sizeof nm, "%s_blocks", e->name);
            rc = st_writer_add(ws[0], nm, DT_U8, 4, bs, blk, nb);
            snprintf(nm, sizeof nm, "%s_scales", e->name);
            if (rc == AL_OK) rc = st_writer_add(ws[0], nm, DT_U8, 3, ss, scl, ns);
            if (rc == AL_OK) rc = st_writer_add(ws[1], e->name, DT_F32, 3, ps, P, E * A * B * sizeof *P);
            *float_bytes += E * A * B * sizeof *P;
            free(blk); free(scl); free(P); free(row);
            continue;
        }
        size_t cols = gu && bias ? 2 * FI : e->ndim == 2 ? sh[1] : 0, m = cols ? sh[0] * cols : n;
        float *a = calloc(m, sizeof *a);
        if (cols) for (size_t k = 0; k < m; k++) a[k] = (float)((int)(rnd32() % 201) - 100) * 1e-4f;   /* biases */
        else rc = dt_to_f32(e->dtype, st_data(st, e), n, a);
        size_t bsh[2] = {sh[0], cols};
        for (int k = 0; rc == AL_OK && k < 2; k++)
            rc = st_writer_add(ws[k], e->name, DT_F32, e->ndim, cols ? bsh : e->shape, a, m * sizeof *a);
        free(a);
    }
    size_t n = 0;
    char *text = rc == AL_OK ? al_read_file(sc, &n) : NULL;
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    if (cfg) cJSON_ReplaceItemInObject(cfg, "intermediate_size", cJSON_CreateNumber(FI));
    char *out = cfg ? cJSON_Print(cfg) : NULL;
    const char *dirs[2] = {qd, fd};
    for (int k = 0; rc == AL_OK && k < 2; k++) {
        char *dp = al_asprintf("%s/model.safetensors", dirs[k]), *dc = al_asprintf("%s/config.json", dirs[k]);
        mkdir(dirs[k], 0755);
        rc = out ? st_writer_write(ws[k], dp) : al_err("no config");
        if (rc == AL_OK) rc = al_write_file_atomic(dc, out, strlen(out));
        free(dp); free(dc);
    }
    cJSON_Delete(cfg);
    free(out); free(text);
    if (st) st_close(st);
    st_writer_free(ws[0]); st_writer_free(ws[1]);
    free(sp); free(sc);
    return rc;
}

static double ppl_of(const char *dir, long *grew_kb) {
    Model *m = NULL;
    Forward *f = NULL;
    FwdPpl p = {.nll = NAN};
    CHECK_OK(model_open(dir, &m));
    long before = rss_kb();
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        int ids[64];
        for (int i = 0; i < 64; i++) ids[i] = (int)((unsigned)i * 2654435761u % (fwd_vocab(f) - 3)) + 3;
        CHECK_OK(fwd_ppl(f, ids, 64, 32, &p));
    }
    *grew_kb = rss_kb() - before;
    fwd_free(f);
    model_free(m);
    return exp(p.nll);
}

static void test_experts(const char *tmp) {
    char *src = al_asprintf("%s/oss", tmp), *qd = al_asprintf("%s/oss-wide-mxfp4", tmp),
         *fd = al_asprintf("%s/oss-wide-f32", tmp);
    size_t fb = 0;
    CHECK_OK(synth_family_write("gpt_oss", DT_F32, 7, src));
    CHECK_OK(wide_twins(src, qd, fd, &fb));
    long gq = 0, gf = 0;
    double pq = ppl_of(qd, &gq), pf = ppl_of(fd, &gf);
    printf("gpt-oss experts %d wide (%.1f MB as float32): MXFP4 ppl %.9g, resident set +%.1f MB; F32 twin ppl %.9g (rel %.2g), "
           "+%.1f MB\n", FI, (double)fb / 1e6, pq, (double)gq / 1024, pf, fabs(pq / pf - 1), (double)gf / 1024);
    CHECK(isfinite(pq) && fabs(pq / pf - 1) < 1e-6, "MXFP4 experts read in place: ppl %.9g, the F32 twin's %.9g", pq, pf);
    CHECK((double)gq * 1024 < (double)fb / 4, "MXFP4 experts: the forward pass grew the resident set by %.1f MB, under a "
          "quarter of their float32 size (%.1f MB): no float copy", (double)gq / 1024, (double)fb / 1e6);
    free(src); free(qd); free(fd);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_decoder();
    test_gram(tmp);
    test_experts(tmp);
    return check_done();
}
