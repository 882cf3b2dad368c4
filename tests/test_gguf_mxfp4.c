/* test_gguf_mxfp4.c -- gpt-oss's MXFP4 experts in a GGUF (ggml type 39: ffn_gate_exps / ffn_up_exps /
 * ffn_down_exps, as llama.cpp's converter writes gpt-oss) kept 4-bit when read back (core/model/gguf_arch.c:
 * back_mx_split, each ggml block repacked by gguf.c's gg_mxfp4_to_hf), where the old reader widened them to
 * float32. A hand-made gpt-oss GGUF (the core's GgufWriter; MXFP4 experts of known E2M1 codes and E8M0
 * scales) is opened by gguf_model_open:
 *  - the byte patterns: an E8M0 scale of 2^-3 (byte 124; ggml's 2^(e - 128) of the doubled codes), codes
 *    0..7 and 9..15 in HF's nibble order (value 2k in byte k's low nibble, 2k + 1 in its high one), gate /
 *    up rows interleaved as gate_up_proj_blocks' rows 2i / 2i + 1, down_proj's rows as ffn_down_exps';
 *  - store_fp4_experts reads the experts as MXFP4 and decodes every value the file holds, bit for bit;
 *  - a product over one repacked expert (matmul.c's MXFP4 kernels, mm_xwt) equals sgemm over the values
 *    written: bit for bit at 64 tokens (the panel route), 1e-6 relative at 3 (register tiles);
 *  - the resident memory the store takes (RssShmem: the memfd read-back buffer) is within 128 kB of the
 *    4-bit size (the old reader: the experts' float32 copy, 7.6x more here);
 *  - an E8M0 byte 255 (ggml: 2^127; OCP: NaN) is refused at load naming the GGUF tensor and the block;
 *  - experts gate MXFP4 / up BF16 read widened (a join of two types); BF16 experts read one expert at a time.
 * `test_gguf_mxfp4 --write FILE mxfp4|bf16 [D I E]` writes the model (experts MXFP4 or BF16, the same values) at
 * other sizes, for bench/README's memory of `load` / `ppl` ("Helper ggm (s11)"). */
#include "check.h"
#include "gguf.h"
#include "gguf_arch.h"
#include "matmul.h"
#include "store.h"

#include <cblas.h>
#include <malloc.h>
#include <stdint.h>
#include <unistd.h>

static size_t ND = 256, NI = 256, NE = 8;      /* hidden, expert width, experts (--write may set them) */
enum { NH = 4, NKV = 2, NHD = 64, NV = 64 };
static const float E2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

static unsigned long long rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 32);
}

/* The code of expert value (e, r, c) of a (rows, cols) expert matrix: block 0 of row 0 of expert 0 the
 * pattern 0..7, 9..15, 7, 1, ... (never 8: ggml's quantizer writes -0 as 0), every block holding a 6
 * (code 7) so that the quantizer's scale is the block's. */
static uint8_t code_at(size_t e, size_t r, size_t c) {
    if (e == 0 && r == 0 && c < 32) return c < 15 ? (uint8_t)(c < 8 ? c : c + 1) : c == 15 ? 7 : (uint8_t)(c % 7 + 1);
    uint8_t k = (uint8_t)(rnd32() % 15);
    return c % 32 == 5 ? 7 : k < 8 ? k : (uint8_t)(k + 1);
}

/* An expert tensor's values, (rows, cols) per expert, each block code x 2^s: s = -3 for expert 0's first
 * row (E8M0 byte 124), else -8..3. codes (E rows cols) receives the codes. */
static float *experts(size_t rows, size_t cols, uint8_t *codes) {
    float *x = malloc(NE * rows * cols * sizeof *x);
    for (size_t e = 0; e < NE; e++)
        for (size_t r = 0; r < rows; r++)
            for (size_t b = 0; b < cols / 32; b++) {
                int s = e == 0 && r == 0 ? -3 : (int)(rnd32() % 12) - 8;
                for (size_t j = 0; j < 32; j++) {
                    size_t i = (e * rows + r) * cols + b * 32 + j;
                    codes[i] = code_at(e, r, b * 32 + j);
                    x[i] = ldexpf(E2M1[codes[i]], s);
                }
            }
    return x;
}

static float *fill(size_t n, float v) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = v != 0 ? v : (float)((int)(rnd32() % 2001) - 1000) * 1e-4f;
    return x;
}

typedef struct { float *gate, *up, *down; uint8_t *cg, *cu, *cd; } Experts;

/* A one-layer gpt-oss GGUF at path: BF16 attention, F32 norms and biases, MXFP4 experts (ex: their values;
 * bf16 1: ffn_up_exps in BF16, which holds them exactly; 2: all three in BF16). */
static int write_gguf(const char *path, Experts *ex, int bf16) {
    GgufWriter *w = gguf_writer_new();
    int rc = gguf_set_str(w, "general.architecture", "gpt-oss");
    static const char *const k[] = {"gpt-oss.embedding_length", "gpt-oss.block_count", "gpt-oss.attention.head_count",
                                    "gpt-oss.attention.head_count_kv", "gpt-oss.attention.key_length",
                                    "gpt-oss.expert_feed_forward_length", "gpt-oss.expert_count",
                                    "gpt-oss.expert_used_count", "gpt-oss.context_length", "gpt-oss.attention.sliding_window"};
    const uint32_t v[] = {(uint32_t)ND, 1, NH, NKV, NHD, (uint32_t)NI, (uint32_t)NE, 2, 64, 8};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) rc |= gguf_set_u32(w, k[i], v[i]);
    struct { const char *name; gg_type t; int nd; uint64_t ne[3]; float v; } T[] = {
        {"token_embd.weight", GG_F32, 2, {ND, NV}, 0}, {"output_norm.weight", GG_F32, 1, {ND}, 1},
        {"blk.0.attn_norm.weight", GG_F32, 1, {ND}, 1}, {"blk.0.post_attention_norm.weight", GG_F32, 1, {ND}, 1},
        {"blk.0.attn_q.weight", GG_BF16, 2, {ND, NH * NHD}, 0}, {"blk.0.attn_k.weight", GG_BF16, 2, {ND, NKV * NHD}, 0},
        {"blk.0.attn_v.weight", GG_BF16, 2, {ND, NKV * NHD}, 0}, {"blk.0.attn_output.weight", GG_BF16, 2, {NH * NHD, ND}, 0},
        {"blk.0.attn_q.bias", GG_F32, 1, {NH * NHD}, 0}, {"blk.0.attn_k.bias", GG_F32, 1, {NKV * NHD}, 0},
        {"blk.0.attn_v.bias", GG_F32, 1, {NKV * NHD}, 0}, {"blk.0.attn_output.bias", GG_F32, 1, {ND}, 0},
        {"blk.0.attn_sinks.weight", GG_F32, 1, {NH}, 0}, {"blk.0.ffn_gate_inp.weight", GG_F32, 2, {ND, NE}, 0},
        {"blk.0.ffn_gate_inp.bias", GG_F32, 1, {NE}, 0}, {"blk.0.ffn_gate_exps.bias", GG_F32, 2, {NI, NE}, 0},
        {"blk.0.ffn_up_exps.bias", GG_F32, 2, {NI, NE}, 0}, {"blk.0.ffn_down_exps.bias", GG_F32, 2, {ND, NE}, 0}};
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        rc |= gguf_add_tensor_f32(w, T[i].name, T[i].t, T[i].nd, T[i].ne,
                                  fill(T[i].ne[0] * (T[i].nd > 1 ? T[i].ne[1] : 1), T[i].v));
    const uint64_t gu[3] = {ND, NI, NE}, dn[3] = {NI, ND, NE};
    float *g = experts(NI, ND, ex->cg), *u = experts(NI, ND, ex->cu), *d = experts(ND, NI, ex->cd);
    free(ex->gate);                                        /* the last call's */
    free(ex->up);
    free(ex->down);
    ex->gate = malloc(NE * NI * ND * sizeof(float));
    ex->up = malloc(NE * NI * ND * sizeof(float));
    ex->down = malloc(NE * ND * NI * sizeof(float));
    memcpy(ex->gate, g, NE * NI * ND * sizeof(float));
    memcpy(ex->up, u, NE * NI * ND * sizeof(float));
    memcpy(ex->down, d, NE * ND * NI * sizeof(float));
    rc |= gguf_add_tensor_f32(w, "blk.0.ffn_gate_exps.weight", bf16 == 2 ? GG_BF16 : GG_MXFP4, 3, gu, g);
    rc |= gguf_add_tensor_f32(w, "blk.0.ffn_up_exps.weight", bf16 ? GG_BF16 : GG_MXFP4, 3, gu, u);
    rc |= gguf_add_tensor_f32(w, "blk.0.ffn_down_exps.weight", bf16 == 2 ? GG_BF16 : GG_MXFP4, 3, dn, d);
    if (rc == AL_OK) rc = gguf_write_file(w, path);
    gguf_writer_free(w);
    return rc;
}

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':') kb = atol(line + strlen(key) + 1);
    if (f) fclose(f);
    return kb;
}
static long shmem_kb(void) { return status_kb("RssShmem"); }

/* Resets VmHWM to the current RSS; false where the kernel does not allow it. */
static bool reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* The byte patterns and every value of the experts, as store_fp4_experts reads them. */
static void check_values(const Store *s, const Experts *ex) {
    size_t qE = 0;
    dt_fp4 q;
    CHECK_OK(store_fp4_experts(s, "model.layers.0.mlp.experts.gate_up_proj", &qE, &q));
    CHECK(q.enc == DT_FP4_MXFP4 && qE == NE && q.rows == NE * 2 * NI && q.cols == ND, "gate_up_proj: MXFP4 %d, %zu experts, "
          "(%zu, %zu)", (int)q.enc, qE, q.rows, q.cols);
    if (q.enc != DT_FP4_MXFP4 || q.rows != NE * 2 * NI || q.cols != ND) return;
    CHECK(q.scale[0] == 124 && dt_fp4_block_scale(&q, 0, 0) == 0.125f, "E8M0 byte %u (2^-3 is 124)", q.scale[0]);
    static const uint8_t want[16] = {0x10, 0x32, 0x54, 0x76, 0xA9, 0xCB, 0xED, 0x7F,      /* code_at's pattern */
                                     0x43, 0x65, 0x17, 0x32, 0x54, 0x76, 0x21, 0x43};
    CHECK(!memcmp(q.codes, want, 16), "HF nibble order: %02x %02x ... %02x", q.codes[0], q.codes[1], q.codes[15]);
    float *row = malloc(ND * sizeof *row);
    size_t bad = 0;
    for (size_t e = 0; e < NE; e++)
        for (size_t r = 0; r < 2 * NI; r++) {                  /* row 2i gate row i, 2i + 1 up row i */
            dt_fp4_dequant(&q, e * 2 * NI + r, 1, 0, ND, row, ND);
            const float *src = (r & 1 ? ex->up : ex->gate) + (e * NI + r / 2) * ND;
            bad += memcmp(row, src, ND * sizeof *row) != 0;
        }
    CHECK(bad == 0, "gate_up_proj: %zu rows differ from the GGUF's values", bad);
    CHECK_OK(store_fp4_experts(s, "model.layers.0.mlp.experts.down_proj", &qE, &q));
    CHECK(q.enc == DT_FP4_MXFP4 && q.rows == NE * ND && q.cols == NI, "down_proj: (%zu, %zu)", q.rows, q.cols);
    float *all = malloc(NE * ND * NI * sizeof *all);
    if (q.enc == DT_FP4_MXFP4 && q.rows == NE * ND && q.cols == NI) dt_fp4_dequant(&q, 0, NE * ND, 0, NI, all, NI);
    CHECK(!memcmp(all, ex->down, NE * ND * NI * sizeof *all), "down_proj: the GGUF's values bit for bit");
    free(all);
    free(row);
}

/* y = x Wᵀ over expert 3's down_proj (D, I), viewed in the store as the forward pass views it, against sgemm. */
static void check_product(const Store *s, const Experts *ex, size_t T, mm_compute mode) {
    size_t qE;
    dt_fp4 q;
    if (store_fp4_experts(s, "model.layers.0.mlp.experts.down_proj", &qE, &q) != AL_OK || q.enc != DT_FP4_MXFP4) return;
    dt_fp4 qe = q;
    qe.rows = ND;
    qe.codes = q.codes + 3 * ND * (NI / 2);
    qe.scale = q.scale + 3 * ND * (NI / 32);
    WMat w = {.dt = DT_U8, .data = qe.codes, .rows = ND, .cols = NI, .fp4 = qe};
    float *x = fill(T * NI, 0), *y = malloc(T * ND * sizeof *y), *ref = malloc(T * ND * sizeof *ref);
    const float *W = ex->down + 3 * ND * NI;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, ND, NI, 1.f, x, NI, W, NI, 0.f, ref, ND);
    MmWork *wk = mm_work_new(1);
    CHECK_OK(mm_xwt(wk, &w, x, NI, T, y, ND, mode));
    double worst = 0, norm = 0;
    for (size_t i = 0; i < T * ND; i++) {
        worst = fmax(worst, fabs((double)y[i] - ref[i]));
        norm = fmax(norm, fabs((double)ref[i]));
    }
    if (mode == MM_F32 && T == 64) CHECK(worst == 0, "64 tokens: the product bit for bit (max diff %g)", worst);
    else CHECK(worst <= 1e-6 * norm, "%zu tokens: max diff %g of %g", T, worst, norm);
    mm_work_free(wk);
    free(x); free(y); free(ref);
}

/* An E8M0 byte 255 in ffn_down_exps: refused at load, naming the GGUF tensor and the block. */
static void check_nan_scale(const char *path, const char *bad) {
    size_t n = 0;
    char *buf = al_read_file(path, &n);
    GgufFile *f = NULL;
    CHECK_OK(buf ? gguf_parse_buffer(path, (const uint8_t *)buf, n, &f) : AL_ERR);
    const GgufTensor *t = f ? gguf_tensor_find(f, "blk.0.ffn_down_exps.weight") : NULL;
    if (!t) { gguf_close(f); free(buf); return; }
    size_t off = (size_t)((const char *)gguf_tensor_data(f, t) - buf) + 5 * GG_MXFP4_BLOCK * (NI / 32) + GG_MXFP4_BLOCK;
    gguf_close(f);
    buf[off] = (char)255;                                  /* expert 0, row 5, block 1 */
    FILE *o = fopen(bad, "wb");
    CHECK(o && fwrite(buf, 1, n, o) == n && fclose(o) == 0, "write %s", bad);
    free(buf);
    Store *s = NULL;
    char *json = NULL;
    CHECK_ERR(gguf_model_open(bad, &s, &json), "blk.0.ffn_down_exps.weight: MXFP4 block [expert 0, row 5, block 1] has "
              "the E8M0 scale 255");
    store_free(s);
    free(json);
}

/* gate MXFP4, up BF16: gate_up_proj is read widened to F32 (a join of two types), its values the file's;
 * down_proj stays MXFP4; gguf_stored_types says which. */
static void check_mixed(const char *path, Experts *ex) {
    CHECK_OK(write_gguf(path, ex, 1));
    Store *s = NULL;
    char *json = NULL, types[256];
    CHECK_OK(gguf_model_open(path, &s, &json));
    CHECK_OK(gguf_stored_types(path, types, sizeof types));
    CHECK(!strcmp(types, "4 BF16 kept, 1 BF16 read widened to F32 (joined from two types), 1 MXFP4 kept, "
                         "1 MXFP4 read widened to F32 (joined from two types), 14 F32"),
          "mixed gate / up: [%s]", types);
    const st_entry *e = NULL;
    const st_file *f = NULL;
    CHECK(s && store_entry(s, "model.layers.0.mlp.experts.gate_up_proj", &e, &f) == AL_OK && e->dtype == DT_F32 &&
          e->ndim == 3 && e->shape[0] == NE && e->shape[1] == ND && e->shape[2] == 2 * NI, "gate_up_proj widened [E, D, 2I]");
    size_t bad = 0;
    const float *v = e && e->dtype == DT_F32 ? (const float *)st_data(f, e) : NULL;
    for (size_t x = 0; v && x < NE; x++)                  /* [E, D, 2I]: column 2i gate row i, 2i + 1 up row i */
        for (size_t d = 0; d < ND; d++)
            for (size_t i = 0; i < 2 * NI; i++) {
                float w, want = ((i & 1) ? ex->up : ex->gate)[(x * NI + i / 2) * ND + d];
                memcpy(&w, v + (x * ND + d) * 2 * NI + i, sizeof w);
                bad += w != want;
            }
    CHECK(v && bad == 0, "widened gate_up_proj: %zu values differ from the file's", bad);
    size_t qE;
    dt_fp4 q;
    CHECK(s && store_fp4_experts(s, "model.layers.0.mlp.experts.down_proj", &qE, &q) == AL_OK && q.enc == DT_FP4_MXFP4,
          "down_proj still MXFP4");
    store_free(s);
    free(json);
}

/* BF16 experts (kept BF16, joined from gate / up, transposed per expert): read back one expert at a time, the
 * peak of gguf_model_open within the file's pages, the store's bytes and 2 MB (the old reader made float copies
 * of the whole tensors: gate_up_proj's 4 MB and each source's 2 MB). */
static void check_bf16_peak(const char *path, Experts *ex) {
    CHECK_OK(write_gguf(path, ex, 2));
    struct stat st;
    malloc_trim(0);                 /* freed heap pages given back: the open's allocations must raise the RSS */
    if (stat(path, &st) != 0 || !reset_peak()) return;
    long rss0 = status_kb("VmRSS");
    Store *s = NULL;
    char *json = NULL;
    CHECK_OK(gguf_model_open(path, &s, &json));
    long peak = status_kb("VmHWM") - rss0;
    size_t bytes = 0;
    for (size_t i = 0; s && i < store_count(s); i++) {
        const st_entry *e;
        if (store_entry(s, store_name_at(s, i), &e, NULL) == AL_OK) bytes += (e->end - e->begin);
    }
    printf("BF16 experts: gguf_model_open peak +%ld kB (file %lld kB, store %zu kB)\n", peak, (long long)st.st_size / 1024,
           bytes / 1024);
#ifndef __SANITIZE_ADDRESS__   /* ASan's quarantine and redzones keep more resident: measured in normal builds */
    CHECK(peak * 1024 <= (long)st.st_size + (long)bytes + 2048 * 1024, "BF16 experts read back: peak +%ld kB", peak);
#endif
    store_free(s);
    free(json);
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "--write")) {
        if (argc >= 7) ND = strtoul(argv[4], NULL, 10), NI = strtoul(argv[5], NULL, 10), NE = strtoul(argv[6], NULL, 10);
        Experts ex = {.cg = malloc(NE * NI * ND), .cu = malloc(NE * NI * ND), .cd = malloc(NE * ND * NI)};
        int rc = write_gguf(argv[2], &ex, strcmp(argv[3], "bf16") ? 0 : 2);
        if (rc != AL_OK) fprintf(stderr, "%s\n", al_errmsg());
        return rc != AL_OK;
    }
    const char *dir = test_tmpdir();
    char path[4200], bad[4200];
    snprintf(path, sizeof path, "%s/oss.gguf", dir);
    snprintf(bad, sizeof bad, "%s/oss-nan.gguf", dir);
    Experts ex = {.cg = malloc(NE * NI * ND), .cu = malloc(NE * NI * ND), .cd = malloc(NE * ND * NI)};
    CHECK_OK(write_gguf(path, &ex, 0));
    long kb0 = shmem_kb();
    Store *s = NULL;
    char *json = NULL;
    CHECK_OK(gguf_model_open(path, &s, &json));
    long kb = shmem_kb() - kb0;
    if (!s) return check_done();
    size_t bytes = 0;
    for (size_t i = 0; i < store_count(s); i++) {
        const st_entry *e;
        if (store_entry(s, store_name_at(s, i), &e, NULL) != AL_OK) continue;
        size_t n = 1;
        for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
        bytes += n * dt_size(e->dtype);
    }
    size_t mx = NE * 3 * NI * ND / 32 * GG_MXFP4_BLOCK, wide = NE * 3 * NI * ND * sizeof(float);
    printf("read back: %zu bytes of tensors (experts MXFP4 %zu; float32 they took %zu), RssShmem +%ld kB\n", bytes, mx,
           wide, kb);
    CHECK(bytes < mx + 700000, "the store holds %zu bytes: the experts' 4-bit %zu plus the rest", bytes, mx);
    CHECK(kb0 < 0 || (kb * 1024 >= (long)mx && kb * 1024 <= (long)bytes + 128 * 1024 && kb * 1024 < (long)mx + 700000),
          "resident: +%ld kB, the 4-bit read-back %zu bytes (float32 experts alone: %zu)", kb, bytes, wide);
    CHECK(json && strstr(json, "\"quant_method\":\t\"mxfp4\""), "config.json: quantization_config mxfp4 [%s]",
          json ? strstr(json, "quantization") ? strstr(json, "quantization") : "none" : "NULL");
    check_values(s, &ex);
    check_product(s, &ex, 64, MM_F32);
    check_product(s, &ex, 3, MM_F32);
    check_product(s, &ex, 64, MM_BF16);
    store_free(s);
    free(json);
    check_nan_scale(path, bad);
    check_mixed(bad, &ex);
    check_bf16_peak(bad, &ex);
    free(ex.gate); free(ex.up); free(ex.down); free(ex.cg); free(ex.cu); free(ex.cd);
    return check_done();
}
