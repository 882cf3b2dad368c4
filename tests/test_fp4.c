/* test_fp4.c -- the FP4 (E2M1) block encodings MXFP4 and NVFP4 (tensor.h's rules, store.c's finding
 * and checking, read by every reader of weights):
 *  - hand-made bytes: the E2M1 code table, the low nibble as the even element, an E8M0 scale of
 *    2^-3 (code 124) and 0xFF as NaN, an E4M3 subnormal block scale (code 0x01 = 2^-9), NVFP4's
 *    per-tensor scale_2 multiplying; through the store (store_read, store_read_block of a column
 *    range, store_shape2's logical shape, store_has of MXFP4's bare name);
 *  - hostile tensors: scales of the wrong shape or dtype, missing scales, a NaN block scale, a NaN
 *    or zero scale_2, stacked (4-D) MXFP4 experts: errors naming the tensor;
 *  - stories260K-hf ($ATTNLAB_MODELS; that part skipped when absent) with its q/k/v/o/gate/up
 *    projections in MXFP4 and in NVFP4, beside an F32 copy of the same decoded values (computed
 *    here from the code table, not by the decoder): every layer's QK and VO ranks at three taus
 *    identical, logits to 1e-6 relative, perplexity to 1e-6 relative in f32 and bf16 modes. */
#include "check.h"
#include "farr.h"
#include "forward.h"
#include "matmul_internal.h"
#include "tokenizer.h"

#include <stdint.h>

static const float E2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

/* ================================================================ hand-made bytes */

static void test_codes(void) {
    for (int c = 0; c < 16; c++) CHECK(dt_e2m1_to_f32((uint8_t)c) == E2M1[c], "E2M1 code %d", c);
    CHECK(signbit(dt_e2m1_to_f32(8)), "code 8 is -0");
    CHECK(dt_e8m0_to_f32(124) == 0.125f, "E8M0 124 = 2^-3: %g", (double)dt_e8m0_to_f32(124));
    CHECK(dt_e8m0_to_f32(127) == 1.0f && dt_e8m0_to_f32(0) == ldexpf(1, -127), "E8M0 127 = 1, 0 = 2^-127");
    CHECK(isnan(dt_e8m0_to_f32(0xff)), "E8M0 0xFF is NaN");
    CHECK(dt_fp4_traits(DT_FP4_MXFP4)->block == 32 && dt_fp4_traits(DT_FP4_NVFP4)->block == 16, "block sizes");
    CHECK(dt_fp4_traits(DT_FP4_NONE) == NULL, "no traits for none");
    /* one MXFP4 row of 32: byte j holds columns 2j (low nibble) and 2j+1 (high); scale 2^-3 */
    uint8_t codes[16], scale = 124;
    for (int j = 0; j < 16; j++) codes[j] = (uint8_t)((j & 15) | (((15 - j) & 15) << 4));
    dt_fp4 q = {.enc = DT_FP4_MXFP4, .rows = 1, .cols = 32, .codes = codes, .scale = &scale, .gscale = 1};
    float out[32];
    dt_fp4_dequant(&q, 0, 1, 0, 32, out, 32);
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += out[2 * j] != E2M1[j] / 8 || out[2 * j + 1] != E2M1[15 - j] / 8;
    CHECK(bad == 0, "MXFP4 row: %d values wrong (low nibble = even element, times 2^-3)", bad);
    CHECK(out[0] == 0 && out[1] == -6.0f / 8 && out[2] == 0.0625f, "0x%02x -> %g %g", codes[0], (double)out[0], (double)out[1]);
    double d[5];
    dt_fp4_dequant_d(&q, 0, 1, 3, 5, d, 5);            /* an odd column start */
    CHECK(d[0] == out[3] && d[4] == out[7], "double route, columns 3..8");
    /* NVFP4: two blocks of 16, scales E4M3 0x01 (subnormal 2^-9) and 0x38 (1.0), scale_2 0.75 */
    uint8_t nc[16], ns[2] = {0x01, 0x38};
    for (int j = 0; j < 16; j++) nc[j] = 0x7f;          /* low 0xf = -6, high 0x7 = +6 */
    dt_fp4 n = {.enc = DT_FP4_NVFP4, .rows = 1, .cols = 32, .codes = nc, .scale = ns, .gscale = 0.75f};
    dt_fp4_dequant(&n, 0, 1, 0, 32, out, 32);
    CHECK(dt_e4m3_to_f32(0x01) == ldexpf(1, -9), "E4M3 0x01 = 2^-9");
    CHECK(out[0] == -6 * ldexpf(1, -9) * 0.75f && out[1] == 6 * ldexpf(1, -9) * 0.75f, "NVFP4 subnormal block: %g %g",
          (double)out[0], (double)out[1]);
    CHECK(out[16] == -4.5f && out[17] == 4.5f, "NVFP4 scale_2 multiplies: %g %g (6 x 1 x 0.75)", (double)out[16], (double)out[17]);
    /* compressed-tensors: the global scale 7 divides the block scale (1) first: 1.5 x (1 / 7), which
     * rounds otherwise than (1.5 x 1) / 7 */
    uint8_t cc[16], cs[2] = {0x38, 0x38};
    memset(cc, 0x3b, sizeof cc);                         /* low 0xb = -1.5, high 0x3 = +1.5 */
    dt_fp4 ct = {.enc = DT_FP4_NVFP4, .rows = 1, .cols = 32, .codes = cc, .scale = cs, .gscale = 7.0f, .gdiv = true};
    dt_fp4_dequant(&ct, 0, 1, 0, 2, out, 2);
    volatile float seventh = 1.0f / 7.0f, late = 1.5f / 7.0f;
    CHECK(out[0] == -1.5f * seventh && out[1] == 1.5f * seventh, "compressed-tensors' global scale divides: %.9g", (double)out[1]);
    CHECK(out[1] != late, "... before the code multiplies (%.9g, not %.9g)", (double)out[1], (double)late);
}

/* ================================================================ through the store */

static const char *tmp;

/* A file with an MXFP4 "a.weight" (2 x 64) and an NVFP4 "b.weight" (2 x 32); `hostile` breaks it. */
static int write_small(const char *path, int hostile) {
    st_writer *w = st_writer_new();
    uint8_t blocks[2 * 2 * 16], scales[4] = {124, 127, 128, 126}, nv[2 * 16], ns[4] = {0x01, 0x38, 0x40, 0x30};
    for (int i = 0; i < 64; i++) blocks[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 32; i++) nv[i] = (uint8_t)(i * 53 + 7);
    float g = hostile == 5 ? NAN : hostile == 6 ? 0.0f : 0.5f;
    if (hostile == 3) scales[2] = 0xff;
    if (hostile == 4) ns[3] = 0x7f;
    size_t bs[3] = {2, 2, 16}, ss[2] = {2, hostile == 1 ? 3 : 2}, vs[2] = {2, 16}, es[2] = {2, hostile == 2 ? 4 : 2};
    size_t xs[4] = {1, 2, 2, 16}, one = 1;
    int rc = hostile == 7 ? st_writer_add(w, "a.weight_blocks", DT_U8, 4, xs, blocks, sizeof blocks)
                          : st_writer_add(w, "a.weight_blocks", DT_U8, 3, bs, blocks, sizeof blocks);
    if (rc == AL_OK && hostile != 8 && hostile != 1) rc = st_writer_add(w, "a.weight_scales", DT_U8, 2, ss, scales, 4);
    if (rc == AL_OK && hostile == 1) rc = st_writer_add(w, "a.weight_scales", DT_U8, 2, ss, (uint8_t[6]){0}, 6);
    if (rc == AL_OK) rc = st_writer_add(w, "b.weight", DT_U8, 2, vs, nv, sizeof nv);
    if (rc == AL_OK && hostile != 2) rc = st_writer_add(w, "b.weight_scale", DT_F8_E4M3, 2, es, ns, 4);
    if (rc == AL_OK && hostile == 2) rc = st_writer_add(w, "b.weight_scale", DT_F8_E4M3, 2, es, (uint8_t[8]){0}, 8);
    if (rc == AL_OK && hostile != 9) rc = st_writer_add(w, "b.weight_scale_2", DT_F32, 1, &one, &g, 4);
    if (rc == AL_OK) rc = st_writer_write(w, path);
    st_writer_free(w);
    return rc;
}

static void test_store(void) {
    char p[4200];
    snprintf(p, sizeof p, "%s/small.safetensors", tmp);
    CHECK_OK(write_small(p, 0));
    Store *s = NULL;
    CHECK_OK(store_open(p, &s));
    if (!s) return;
    size_t R = 0, C = 0;
    CHECK(store_has(s, "a.weight") && store_has(s, "b.weight"), "store_has of both logical names");
    CHECK_OK(store_shape2(s, "a.weight", &R, &C));
    CHECK(R == 2 && C == 64, "MXFP4 logical shape [%zu, %zu]", R, C);
    CHECK_OK(store_shape2(s, "b.weight", &R, &C));
    CHECK(R == 2 && C == 32, "NVFP4 logical shape [%zu, %zu]", R, C);
    Mat *a = NULL, *b = NULL, *blk = NULL;
    CHECK_OK(store_read(s, "a.weight", &a));
    CHECK_OK(store_read(s, "b.weight", &b));
    CHECK_OK(store_read_block(s, "a.weight", 1, 1, 30, 4, &blk));
    const uint8_t scales[4] = {124, 127, 128, 126}, ns[4] = {0x01, 0x38, 0x40, 0x30};
    int bad = 0;
    for (int i = 0; a && i < 2; i++)
        for (int j = 0; j < 64; j++) {
            uint8_t byte = (uint8_t)((i * 32 + j / 2) * 37 + 11);
            float v = E2M1[(j & 1) ? byte >> 4 : byte & 15] * ldexpf(1, scales[i * 2 + j / 32] - 127);
            bad += a->data[i * 64 + j] != v;
        }
    CHECK(a && bad == 0, "MXFP4 through the store: %d values wrong", bad);
    bad = 0;
    for (int i = 0; b && i < 2; i++)
        for (int j = 0; j < 32; j++) {
            uint8_t byte = (uint8_t)((i * 16 + j / 2) * 53 + 7);
            float v = E2M1[(j & 1) ? byte >> 4 : byte & 15] * dt_e4m3_to_f32(ns[i * 2 + j / 16]) * 0.5f;
            bad += b->data[i * 32 + j] != v;
        }
    CHECK(b && bad == 0, "NVFP4 through the store: %d values wrong", bad);
    CHECK(blk && a && memcmp(blk->data, a->data + 64 + 30, 4 * sizeof(float)) == 0, "a block across two MXFP4 blocks");
    WMat wv;
    CHECK_OK(wmat_view(s, "b.weight", false, &wv));
    CHECK(wv.own == NULL && wv.fp4.enc == DT_FP4_NVFP4, "the forward pass's view decodes in place (no float copy)");
    float row[32];
    wmat_row(&wv, 1, row);
    CHECK(b && memcmp(row, b->data + 32, sizeof row) == 0, "wmat_row of an NVFP4 weight");
    wmat_free(&wv);
    mat_free(a); mat_free(b); mat_free(blk);
    store_free(s);
}

static void test_hostile(void) {
    static const struct { int h; const char *name, *says; } cases[] = {
        {1, "a.weight", "a.weight_scales"},   {2, "b.weight", "b.weight_scale"},  {3, "a.weight", "NaN"},
        {4, "b.weight", "NaN"},               {5, "b.weight", "b.weight_scale_2"}, {6, "b.weight", "finite and positive"},
        {7, "a.weight", "stacked experts"},   {8, "a.weight", "no block scales"},  {9, "b.weight", "no per-tensor scale"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/hostile%d.safetensors", tmp, cases[i].h);
        CHECK_OK(write_small(p, cases[i].h));
        Store *s = NULL;
        CHECK_OK(store_open(p, &s));
        if (!s) continue;
        Mat *m = NULL;
        size_t R, C;
        CHECK_ERR(store_read(s, cases[i].name, &m), cases[i].says);
        CHECK(strstr(al_errmsg(), cases[i].name) != NULL, "hostile %d names the tensor: '%s'", cases[i].h, al_errmsg());
        CHECK_ERR(store_shape2(s, cases[i].name, &R, &C), cases[i].name);
        mat_free(m);
        store_free(s);
    }
}

/* ================================================================ a real model in FP4 */

static const char STORY[] =
    "One morning, a small cat named Max woke up in the sun. He wanted to find a friend to play with. "
    "He walked to the garden and saw a bird on a big tree. \"Will you play with me?\" Max asked. "
    "The bird was scared and flew away. Max felt sad, but he did not give up. Then he met a kind frog "
    "by the pond. The frog said, \"I like to jump. Can you jump too?\" Max jumped high and the frog "
    "laughed. They jumped and ran all day until the sky was dark. ";

static char src[4200], tokp[4200];

/* The nearest E2M1 code of x (ties to the smaller magnitude). */
static uint8_t e2m1_code(float x) {
    uint8_t best = 0;
    for (uint8_t c = 1; c < 16; c++)
        if (fabsf(E2M1[c] - x) < fabsf(E2M1[best] - x)) best = c;
    return best;
}

/* m (R, C) quantized in enc: codes (R, C/2), block scales (R, C/B), *g; m becomes the decoded values. */
static void quantize(Mat *m, dt_fp4_enc enc, uint8_t *codes, uint8_t *scales, float *g) {
    size_t R = m->rows, C = m->cols, B = enc == DT_FP4_MXFP4 ? 32 : 16;
    float amax = 0;
    for (size_t k = 0; k < R * C; k++) amax = fmaxf(amax, fabsf(m->data[k]));
    *g = enc == DT_FP4_MXFP4 ? 1.0f : amax / (6 * 448);
    memset(codes, 0, R * C / 2);
    for (size_t i = 0; i < R; i++)
        for (size_t b = 0; b < C / B; b++) {
            float *x = m->data + i * C + b * B, bmax = 0, s;
            for (size_t j = 0; j < B; j++) bmax = fmaxf(bmax, fabsf(x[j]));
            uint8_t sc;
            if (enc == DT_FP4_MXFP4) {
                int e = bmax > 0 ? (int)ceilf(log2f(bmax / 6)) : 0;
                sc = (uint8_t)(e + 127);
                s = ldexpf(1, e);
            } else {
                sc = dt_f32_to_e4m3(bmax / 6 / *g);
                s = dt_e4m3_to_f32(sc);
            }
            scales[i * (C / B) + b] = sc;
            for (size_t j = 0; j < B; j++) {
                uint8_t c = s > 0 ? e2m1_code(x[j] / (s * *g)) : 0;
                size_t col = b * B + j;
                codes[(i * C + col) / 2] |= (uint8_t)(col & 1 ? c << 4 : c);
                x[j] = enc == DT_FP4_MXFP4 ? E2M1[c] * s : E2M1[c] * s * *g;
            }
        }
}

/* One projection in enc (or, as_f32, its decoded values in F32). */
static int add_fp4(st_writer *w, const char *name, Mat *m, dt_fp4_enc enc, bool as_f32) {
    size_t R = m->rows, C = m->cols, B = enc == DT_FP4_MXFP4 ? 32 : 16, one = 1;
    uint8_t *codes = malloc(R * C / 2), *scales = malloc(R * C / B);
    float g;
    quantize(m, enc, codes, scales, &g);
    char n[300];
    int rc;
    if (as_f32) rc = st_writer_add_mat(w, name, DT_F32, m);
    else if (enc == DT_FP4_MXFP4) {
        size_t bs[3] = {R, C / 32, 16}, ss[2] = {R, C / 32};
        snprintf(n, sizeof n, "%s_blocks", name);
        rc = st_writer_add(w, n, DT_U8, 3, bs, codes, R * C / 2);
        snprintf(n, sizeof n, "%s_scales", name);
        if (rc == AL_OK) rc = st_writer_add(w, n, DT_U8, 2, ss, scales, R * C / 32);
    } else {
        size_t ws[2] = {R, C / 2}, ss[2] = {R, C / 16};
        rc = st_writer_add(w, name, DT_U8, 2, ws, codes, R * C / 2);
        snprintf(n, sizeof n, "%s_scale", name);
        if (rc == AL_OK) rc = st_writer_add(w, n, DT_F8_E4M3, 2, ss, scales, R * C / 16);
        snprintf(n, sizeof n, "%s_scale_2", name);
        if (rc == AL_OK) rc = st_writer_add(w, n, DT_F32, 1, &one, &g, 4);
    }
    free(codes);
    free(scales);
    return rc;
}

/* stories260K-hf into dir, its projections whose columns fill whole blocks in enc. */
static int write_copy(const char *dir, dt_fp4_enc enc, bool as_f32) {
    Store *s = NULL;
    char p[4400];
    snprintf(p, sizeof p, "mkdir -p '%s' && cp '%s/config.json' '%s/'", dir, src, dir);
    if (system(p) != 0 || store_open(src, &s) != AL_OK) return AL_ERR;
    st_writer *w = st_writer_new();
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        Mat *m = NULL;
        rc = store_read(s, name, &m);
        if (rc == AL_OK && strstr(name, "_proj.weight") && m->cols % 32 == 0) rc = add_fp4(w, name, m, enc, as_f32);
        else if (rc == AL_OK) rc = st_writer_add_mat(w, name, DT_F32, m);
        mat_free(m);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (rc == AL_OK) rc = st_writer_write(w, p);
    st_writer_free(w);
    store_free(s);
    return rc;
}

static double ppl_of(Model *m, const int *ids, size_t n, mm_compute c) {
    Forward *f = NULL;
    FwdPpl p = {.nll = NAN};
    CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        fwd_set_compute(f, c);
        CHECK_OK(fwd_ppl(f, ids, n, 64, &p));
    }
    fwd_free(f);
    return exp(p.nll);
}

/* Ranks of every head of every layer at three taus, both kinds: how many differ between a and b. */
static int rank_diffs(Model *a, Model *b) {
    int diffs = 0, heads = 0;
    const double taus[] = {0.9, 0.99, 0.999};
    for (int k = 0; k < 2; k++)
        for (int L = 0; L < a->cfg.n_layers; L++) {
            farr_kind kind = k ? FARR_VO : FARR_QK;
            FarrLayer *la = NULL, *lb = NULL;
            int off = k ? FARR_NO_OFFSET : 4;         /* QK under RoPE: at a fixed offset */
            CHECK_OK(farr_layer_compute(a, kind, L, off, &la));
            CHECK_OK(farr_layer_compute(b, kind, L, off, &lb));
            for (int h = 0; la && lb && h < a->cfg.n_heads; h++)
                for (int t = 0; t < 3; t++) {
                    int r[6];
                    farr_layer_ranks(la, h, taus[t], &r[0], &r[1], &r[2]);
                    farr_layer_ranks(lb, h, taus[t], &r[3], &r[4], &r[5]);
                    diffs += r[0] != r[3] || r[1] != r[4] || r[2] != r[5];
                    heads++;
                }
            if (!la || !lb) diffs++;
            farr_layer_free(la);
            farr_layer_free(lb);
        }
    CHECK(heads > 0, "ranks compared");
    return diffs;
}

static void test_model(dt_fp4_enc enc, const int *ids, size_t n) {
    const char *en = dt_fp4_traits(enc)->name;
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/%s", tmp, en);
    snprintf(b, sizeof b, "%s/%s-as-f32", tmp, en);
    CHECK_OK(write_copy(a, enc, false));
    CHECK_OK(write_copy(b, enc, true));
    Model *ma = NULL, *mb = NULL;
    CHECK_OK(model_open(a, &ma));
    CHECK_OK(model_open(b, &mb));
    if (!ma || !mb) { model_free(ma); model_free(mb); return; }
    int d = rank_diffs(ma, mb);
    printf("%s: %d of the QK/VO rank triples differ from the F32 copy's\n", en, d);
    CHECK(d == 0, "%s: %d rank triples differ", en, d);
    for (int c = 0; c < 2; c++) {
        mm_compute mode = c ? MM_BF16 : MM_F32;
        double pa = ppl_of(ma, ids, n, mode), pb = ppl_of(mb, ids, n, mode);
        printf("%s %s mode: ppl %.9f, F32 copy %.9f (rel %.2g)\n", en, mm_compute_name(mode), pa, pb, fabs(pa / pb - 1));
        CHECK(isfinite(pa) && fabs(pa / pb - 1) < 1e-6, "%s %s: ppl %.9g vs %.9g", en, mm_compute_name(mode), pa, pb);
    }
    model_free(ma);
    model_free(mb);
}

int main(void) {
    tmp = test_tmpdir();
    test_codes();
    test_store();
    test_hostile();
    const char *dir = getenv("ATTNLAB_MODELS");
    struct stat sb;
    snprintf(src, sizeof src, "%s/stories260K-hf", dir ? dir : "");
    snprintf(tokp, sizeof tokp, "%s/stories260K/tok512.bin", dir ? dir : "");
    if (!dir || stat(src, &sb) || stat(tokp, &sb)) {
        printf("ATTNLAB_MODELS/stories260K-hf not found: the model part skipped\n");
        return check_done();
    }
    Tokenizer *tk = NULL;
    int *ids = NULL;
    size_t n = 0;
    CHECK_OK(tok_open(tokp, &tk));
    if (tk) CHECK_OK(tok_encode(tk, STORY, strlen(STORY), true, &ids, &n));
    tok_free(tk);
    CHECK(n > 60, "the story has %zu tokens", n);
    test_model(DT_FP4_MXFP4, ids, n);
    test_model(DT_FP4_NVFP4, ids, n);
    free(ids);
    return check_done();
}
