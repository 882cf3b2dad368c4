/* test_gguf.c -- GGUF (core/io/gguf.h, core/export/gguf_convert.h): the writer and reader round-trip every
 * metadata type and every tensor type (F32 bit for bit, F16 / BF16 / Q8_0 within their rounding),
 * Q8_0 follows ggml's reference quantization, truncated and malformed files are errors (every
 * prefix of a valid file, bad magic / version / type / alignment / overlap / duplicates), and
 * models exported to GGUF and opened again give the logits of their source (demo-llama with its
 * rotate_half permutation, a Qwen2 with biases, demo-gpt2's transposed Conv1D, stories260K's
 * interleaved layout); an FP8 checkpoint (demo-r1) exports its dequantized weights without the
 * block-scale tensors. The tensor map is by role: every role a mapped family's architecture lists
 * has a Hugging Face name in that family's layouts and a llama.cpp name, one per tensor.
 *
 * Also helpers for tests/cli_llamacpp.sh and cli_gguf.sh:
 *   test_gguf logits MODEL "id id ..."   prints {"logits": [[V floats] x T]} (attnlab's forward pass)
 *   test_gguf make-qwen2 SRC DST         writes SRC (Llama layout) as a Qwen2 checkpoint, F32, with
 *                                        random q/k/v biases (there is no Qwen2 demo model) */
#define _GNU_SOURCE
#include "check.h"
#include "ckpt_write.h"
#include "forward.h"
#include "gguf_arch.h"
#include "gguf_convert.h"
#include "synth.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <unistd.h>

static int make_qwen2(const char *src, const char *dst);

/* ================================================================ helpers */

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((float)(*s >> 8) / (float)(1u << 24) - 0.5f) * 4.0f;
}

/* Writes w to path and reads the whole file back into *buf. */
static int write_read(GgufWriter *w, const char *path, uint8_t **buf, size_t *len) {
    if (gguf_write_file(w, path) != AL_OK) return AL_ERR;
    *buf = (uint8_t *)al_read_file(path, len);
    return *buf ? AL_OK : AL_ERR;
}

/* ================================================================ round trips */

static void test_q8_0_reference(void) {
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 0.25f;     /* amax 4: d = 4/127 */
    uint8_t q[GG_Q8_0_BLOCK];
    gg_from_f32(GG_Q8_0, x, 32, q);
    uint16_t h;
    memcpy(&h, q, 2);
    CHECK(h == dt_f32_to_f16(4.0f / 127.0f), "scale %04x", h);
    CHECK((int8_t)q[2] == -127 && (int8_t)q[2 + 16] == 0 && (int8_t)q[2 + 20] == 32, "q %d %d %d", (int8_t)q[2],
          (int8_t)q[18], (int8_t)q[22]);
    gg_to_f32(GG_Q8_0, q, 32, y);
    for (int i = 0; i < 32; i++) CHECK_NEAR(y[i], x[i], 4.0 / 127 / 2 + 1e-3);
    float z[32] = {0};
    gg_from_f32(GG_Q8_0, z, 32, q);
    gg_to_f32(GG_Q8_0, q, 32, y);
    CHECK(y[0] == 0 && y[31] == 0, "zero block");
    CHECK(gg_row_bytes(GG_Q8_0, 33) == 0 && gg_row_bytes(GG_Q8_0, 64) == 68, "row bytes");
}

/* ggml's block_mxfp4: E2M1 codes times 2^-3 round-trip exactly; the scale byte is floor(log2 amax) - 2
 * + 127 (amax 0.75: 124, d = 2^-4); value j sits in the low nibble of byte j, value j + 16 in its high
 * nibble (value 3 = -3 d: code 11, value 19 = 3 d: code 3). */
static void test_mxfp4_reference(void) {
    static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (i % 3 ? 1 : -1) * e2m1[i % 8] * 0.125f;
    uint8_t q[GG_MXFP4_BLOCK];
    gg_from_f32(GG_MXFP4, x, 32, q);
    CHECK(q[0] == 124, "scale byte %d", q[0]);
    CHECK(q[1 + 1] == 0x11 && q[1 + 3] == 0x3b, "bytes 1, 3: %02x %02x", q[2], q[4]);
    gg_to_f32(GG_MXFP4, q, 32, y);
    for (int i = 0; i < 32; i++) CHECK(y[i] == x[i], "value %d: %g, want %g", i, y[i], x[i]);
    CHECK(gg_row_bytes(GG_MXFP4, 33) == 0 && gg_row_bytes(GG_MXFP4, 64) == 34, "row bytes");
}

static void add_metadata(GgufWriter *w) {
    CHECK_OK(gguf_set_u32(w, "a.u32", 4000000000u));
    CHECK_OK(gguf_set_i32(w, "a.i32", -7));
    CHECK_OK(gguf_set_u64(w, "a.u64", 1ull << 40));
    CHECK_OK(gguf_set_f32(w, "a.f32", 0.125f));
    CHECK_OK(gguf_set_bool(w, "a.bool", true));
    CHECK_OK(gguf_set_str(w, "a.str", "h\xe2\x96\x81llo"));
    int32_t ia[3] = {1, -2, 3};
    double da[2] = {0.5, -1e300};
    CHECK_OK(gguf_set_arr(w, "a.ia", GGUF_I32, ia, 3));
    CHECK_OK(gguf_set_arr(w, "a.da", GGUF_F64, da, 2));
    const char *ss[3] = {"x", "", "a b"};
    CHECK_OK(gguf_set_arr_str(w, "a.sa", ss, NULL, 3));
    CHECK_ERR(gguf_set_u32(w, "a.u32", 1), "set twice");
}

static void check_metadata(const GgufFile *f) {
    int64_t i;
    double d;
    CHECK(gguf_get_int(f, "a.u32", &i) == AL_OK && i == 4000000000ll, "u32");
    CHECK(gguf_get_int(f, "a.i32", &i) == AL_OK && i == -7, "i32");
    CHECK(gguf_get_int(f, "a.u64", &i) == AL_OK && i == 1ll << 40, "u64");
    CHECK(gguf_get_num(f, "a.f32", &d) == AL_OK && d == 0.125, "f32");
    CHECK(gguf_get_int(f, "a.bool", &i) == AL_OK && i == 1, "bool");
    CHECK(gguf_get_str(f, "a.str") && strcmp(gguf_get_str(f, "a.str"), "h\xe2\x96\x81llo") == 0, "str");
    CHECK_ERR(gguf_get_int(f, "a.str", &i), "not an integer");
    CHECK_ERR(gguf_get_int(f, "a.none", &i), "has no a.none");
    const GgufKV *kv = gguf_kv_find(f, "a.ia");
    CHECK(kv && kv->n == 3 && gguf_arr_num(kv, 1) == -2 && gguf_arr_num(kv, 2) == 3, "int array");
    kv = gguf_kv_find(f, "a.da");
    CHECK(kv && kv->n == 2 && gguf_arr_num(kv, 1) == -1e300, "double array");
    kv = gguf_kv_find(f, "a.sa");
    const char *s;
    size_t n;
    CHECK(kv && kv->n == 3, "string array");
    if (kv && kv->n == 3) {
        gguf_arr_str(kv, 2, &s, &n);
        CHECK(n == 3 && memcmp(s, "a b", 3) == 0, "string 2");
        gguf_arr_str(kv, 1, &s, &n);
        CHECK(n == 0, "empty string");
    }
}

/* Tolerance of one value after a round trip through type t (Q8_0: half a step of its block). */
static double tol_of(gg_type t, float x, float amax) {
    switch (t) {
    case GG_F32: return 0;
    case GG_F16: return fabs(x) * 0x1p-11 + 1e-7;
    case GG_BF16: return fabs(x) * 0x1p-8;
    case GG_Q8_0: return amax / 127 * 0.5 + amax * 0x1p-10 + 1e-6;   /* half a step, and the fp16 scale */
    case GG_MXFP4: return amax;                                         /* not round-tripped here */
    }
    return 0;
}

static void test_roundtrip(const char *dir) {
    static const gg_type types[4] = {GG_F32, GG_F16, GG_BF16, GG_Q8_0};
    GgufWriter *w = gguf_writer_new();
    add_metadata(w);
    unsigned seed = 7;
    float *src[4];
    uint64_t ne[3] = {64, 3, 2};
    for (int k = 0; k < 4; k++) {
        src[k] = malloc(384 * sizeof(float));
        for (int i = 0; i < 384; i++) src[k][i] = frand(&seed) * (k == 3 ? 1.0f : 1e3f);
        float *copy = malloc(384 * sizeof(float));
        memcpy(copy, src[k], 384 * sizeof(float));
        char name[32];
        snprintf(name, sizeof name, "t.%s", gg_type_name(types[k]));
        CHECK_OK(gguf_add_tensor_f32(w, name, types[k], 3, ne, copy));
    }
    uint64_t bad[1] = {33};
    CHECK_ERR(gguf_add_tensor_f32(w, "bad", GG_Q8_0, 1, bad, malloc(33 * sizeof(float))), "multiple of 32");
    char *path = al_asprintf("%s/rt.gguf", dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_OK(write_read(w, path, &buf, &len));
    gguf_writer_free(w);
    GgufFile *f = NULL;
    CHECK_OK(gguf_open(path, &f));
    if (f) {
        check_metadata(f);
        CHECK(gguf_tensor_count(f) == 4 && gguf_version(f) == 3, "counts");
        for (int k = 0; k < 4; k++) {
            char name[32];
            snprintf(name, sizeof name, "t.%s", gg_type_name(types[k]));
            const GgufTensor *t = gguf_tensor_find(f, name);
            CHECK(t && t->type == types[k] && t->ndim == 3 && t->ne[0] == 64 && t->ne[2] == 2 && t->offset % 32 == 0,
                  "tensor %s info", name);
            if (!t) continue;
            float got[384];
            gguf_tensor_f32(f, t, got);
            if (types[k] == GG_F32) CHECK(memcmp(got, src[k], sizeof got) == 0, "F32 bit for bit");
            size_t bad_n = 0;
            for (int b = 0; b < 12; b++) {
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(src[k][b * 32 + j]));
                for (int j = 0; j < 32; j++) {
                    float x = src[k][b * 32 + j];
                    bad_n += fabs(got[b * 32 + j] - x) > tol_of(types[k], x, amax);
                }
            }
            CHECK(bad_n == 0, "%s: %zu values beyond the rounding", name, bad_n);
        }
        gguf_close(f);
    }
    for (int k = 0; k < 4; k++) free(src[k]);
    /* every truncation of the file is an error, never a crash -- except cuts of the last tensor's
     * trailing padding (Q8_0: 12 blocks of 34 bytes, padded by 8), which lose no data */
    size_t ok = 0, first_ok = len;
    for (size_t n = 0; buf && n < len; n++) {
        GgufFile *g = NULL;
        if (gguf_parse_buffer("cut", buf, n, &g) == AL_OK) { ok++; first_ok = n < first_ok ? n : first_ok; gguf_close(g); }
        else if (!strstr(al_errmsg(), "truncated") && !strstr(al_errmsg(), "not a GGUF"))
            CHECK(0, "cut at %zu: unexpected message %s", n, al_errmsg());
    }
    CHECK(ok == 8 && first_ok == len - 8, "%zu truncated images parsed, the first at %zu of %zu", ok, first_ok, len);
    /* random byte changes in the header: parsed or refused with a message, never a crash */
    size_t hdr = len > 4096 ? 4096 : len, refused = 0;
    uint8_t *mut = buf ? malloc(len) : NULL;
    for (int k = 0; mut && k < 3000; k++) {
        memcpy(mut, buf, len);
        for (int j = 0; j < 1 + k % 3; j++) {
            seed = seed * 1103515245u + 12345u;
            mut[(seed >> 8) % hdr] ^= (uint8_t)(1u << (k % 8));
        }
        GgufFile *g = NULL;
        if (gguf_parse_buffer("mut", mut, len, &g) == AL_OK) {
            for (size_t i = 0; i < gguf_tensor_count(g); i++) {      /* every tensor readable */
                const GgufTensor *t = gguf_tensor_at(g, i);
                float *x = t->numel <= (1u << 20) ? malloc(t->numel * sizeof *x) : NULL;
                if (x) gguf_tensor_f32(g, t, x);
                free(x);
            }
            gguf_close(g);
        } else refused += *al_errmsg() != 0;
    }
    CHECK(refused > 100, "mutations refused with a message: %zu", refused);
    free(mut);
    free(buf);
    free(path);
}

/* A minimal file: one F32 tensor "t" of 4 values, built by hand so its fields can be damaged. */
static size_t tiny(uint8_t *b, uint32_t version, uint32_t type, uint64_t offset, uint64_t ne0) {
    size_t n = 0;
#define PUT(v, k) do { memcpy(b + n, &(v), k); n += k; } while (0)
    uint64_t nt = 1, nkv = 1, kl = 3, sl = 1, tl = 1;
    uint32_t st = GGUF_STR, nd = 1;
    memcpy(b, "GGUF", 4);
    n = 4;
    PUT(version, 4); PUT(nt, 8); PUT(nkv, 8);
    PUT(kl, 8); memcpy(b + n, "k.s", 3); n += 3; PUT(st, 4); PUT(sl, 8); b[n++] = 'x';
    PUT(tl, 8); b[n++] = 't'; PUT(nd, 4); PUT(ne0, 8); PUT(type, 4); PUT(offset, 8);
#undef PUT
    while (n % 32) b[n++] = 0;
    memset(b + n, 0, 64);
    return n + 16;
}

static void test_malformed(void) {
    uint8_t b[256];
    GgufFile *f = NULL;
    size_t n = tiny(b, 3, GG_F32, 0, 4);
    CHECK_OK(gguf_parse_buffer("tiny", b, n, &f));
    gguf_close(f);
    n = tiny(b, 3, GG_F32, 0, 4);
    b[0] = 'X';
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "not a GGUF file");
    n = tiny(b, 7, GG_F32, 0, 4);
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "GGUF version 7");
    n = tiny(b, 3, 12, 0, 4);
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "ggml type 12");
    n = tiny(b, 3, GG_F32, 4, 4);
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "not a multiple of the alignment");
    n = tiny(b, 3, GG_F32, 0, 5);
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "truncated GGUF: tensor t");
    n = tiny(b, 3, GG_Q8_0, 0, 16);
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "not whole blocks");
    n = tiny(b, 3, GG_F32, 0, 4);
    uint64_t huge = 1ull << 60;
    memcpy(b + 16, &huge, 8);                             /* KV count */
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "more than the file holds");
    n = tiny(b, 3, GG_F32, 0, 4);
    memcpy(b + 24, &huge, 8);                             /* the key's length */
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "truncated GGUF");
    n = tiny(b, 3, GG_F32, 0, 4);
    b[35] = 99;                                           /* the value type of k.s */
    CHECK_ERR(gguf_parse_buffer("m", b, n, &f), "unknown value type 99");
    GgufWriter *w = gguf_writer_new();
    uint64_t ne[1] = {8};
    CHECK_OK(gguf_add_tensor_f32(w, "t", GG_F32, 1, ne, calloc(8, sizeof(float))));
    CHECK_ERR(gguf_add_tensor_f32(w, "t", GG_F32, 1, ne, calloc(8, sizeof(float))), "added twice");
    gguf_writer_free(w);
    CHECK_ERR(gguf_open("/nonexistent.gguf", &f), "cannot open");
}

/* ================================================================ models */

/* Logits of ids (T x V) from attnlab's forward pass; caller frees. */
static float *logits_of(Model *m, const int *ids, size_t T, size_t *V) {
    Forward *fw;
    if (fwd_new(m, NULL, &fw) != AL_OK) return NULL;
    *V = fwd_vocab(fw);
    float *z = malloc(T * *V * sizeof *z);
    if (fwd_run(fw, ids, T, FWD_LOGITS_ALL, z) != AL_OK) { free(z); z = NULL; }
    fwd_free(fw);
    return z;
}

/* src exported as GGUF of type t, opened again: max |logit difference| over 12 tokens. */
static double export_diff(const char *src, const char *dir, const char *name, gg_type t) {
    Model *a = NULL, *b = NULL;
    double diff = INFINITY;
    char *out = al_asprintf("%s/%s.gguf", dir, name);
    GgufExportOpts o = {.dtype = t};
    GgufExportReport r;
    CHECK_OK(model_open(src, &a));
    if (a) CHECK_OK(gguf_export(a, out, &o, &r));
    if (a && model_open(out, &b) == AL_OK) {
        int ids[12] = {1, 7, 3, 40, 2, 9, 11, 100, 5, 6, 200, 17};
        size_t T = 12, Va = 0, Vb = 0;
        for (size_t i = 0; i < T; i++) ids[i] %= a->cfg.vocab;
        float *za = logits_of(a, ids, T, &Va), *zb = logits_of(b, ids, T, &Vb);
        if (za && zb && Va == Vb) {
            diff = 0;
            for (size_t i = 0; i < T * Va; i++) diff = fmax(diff, fabs((double)za[i] - zb[i]));
        }
        free(za);
        free(zb);
        CHECK(b->cfg.n_layers == a->cfg.n_layers && b->cfg.n_heads == a->cfg.n_heads && b->cfg.n_kv_heads == a->cfg.n_kv_heads,
              "%s dims", name);
    } else CHECK(0, "%s: reopen failed: %s", name, al_errmsg());
    model_free(a);
    model_free(b);
    free(out);
    return diff;
}

static void test_models(const char *dir) {
    char *ll = al_asprintf("%s/demo-llama", dir), *g2 = al_asprintf("%s/demo-gpt2", dir);
    SynthOptions o;
    synth_demo_name("demo-llama-f32", &o);
    CHECK_OK(synth_write(&o, ll));
    synth_demo_name("demo-gpt2", &o);
    CHECK_OK(synth_write(&o, g2));
    double d = export_diff(ll, dir, "ll32", GG_F32);
    CHECK(d < 1e-4, "demo-llama f32: max logit diff %g", d);
    d = export_diff(ll, dir, "ll16", GG_F16);
    CHECK(d < 0.05, "demo-llama f16: max logit diff %g", d);
    d = export_diff(ll, dir, "llq8", GG_Q8_0);
    CHECK(d < 0.5, "demo-llama q8_0: max logit diff %g", d);
    char *qw = al_asprintf("%s/qwen2", dir);
    CHECK_OK(make_qwen2(ll, qw));
    d = export_diff(qw, dir, "qw", GG_F32);
    CHECK(d < 1e-4, "qwen2 f32: max logit diff %g", d);
    free(qw);
    d = export_diff(g2, dir, "g2", GG_F32);
    CHECK(d < 1e-4, "demo-gpt2 f32: max logit diff %g", d);
    const char *models = getenv("ATTNLAB_MODELS");
    char *bin = al_asprintf("%s/stories260K/stories260K.bin", models ? models : "tests/models");
    struct stat sb;
    if (stat(bin, &sb) == 0) {
        d = export_diff(bin, dir, "stories", GG_F32);
        CHECK(d < 1e-4, "stories260K f32: max logit diff %g", d);
        d = export_diff(bin, dir, "storiesb", GG_BF16);
        CHECK(d < 0.2, "stories260K bf16: max logit diff %g", d);
    } else printf("stories260K not found at %s: its round trip is skipped\n", bin);
    /* a folder destination gets model.gguf; an existing file needs force */
    Model *m = NULL;
    CHECK_OK(model_open(ll, &m));
    char *folder = al_asprintf("%s/ggdir", dir), *file = al_asprintf("%s/ggdir/model.gguf", dir);
    GgufExportOpts eo = {.dtype = GG_F32};
    if (m) {
        CHECK_OK(gguf_export(m, folder, &eo, NULL));
        CHECK(stat(file, &sb) == 0, "folder export wrote model.gguf");
        char *again = al_asprintf("%s/ll32.gguf", dir);
        CHECK_ERR(gguf_export(m, again, &eo, NULL), "give `force`");
        eo.force = true;
        CHECK_OK(gguf_export(m, again, &eo, NULL));
        char *inside = al_asprintf("%s/x.gguf", ll);
        CHECK_ERR(gguf_export(m, inside, &eo, NULL), "inside the folder");
        free(inside);
        free(again);
    }
    model_free(m);
    free(folder);
    free(file);
    free(bin);
    free(ll);
    free(g2);
}

/* demo-r1 (FP8 E4M3 weights with 128 x 128 weight_scale_inv blocks) exported as GGUF: every
 * weight is the store's dequantized value (F32: bit for bit, read back through the GGUF reader),
 * no scale tensor is written, and bf16 is taken too. */
static void test_fp8(const char *dir) {
    char *r1 = al_asprintf("%s/demo-r1", dir), *out = al_asprintf("%s/r1.gguf", dir), *outb = al_asprintf("%s/r1b.gguf", dir);
    SynthOptions so;
    synth_demo_name("demo-r1", &so);
    CHECK_OK(synth_write(&so, r1));
    Model *a = NULL, *b = NULL;
    CHECK_OK(model_open(r1, &a));
    CHECK(a && a->cfg.dtype == DT_F8_E4M3, "demo-r1 is FP8");
    GgufExportOpts o = {.dtype = GG_F32};
    if (a) CHECK_OK(gguf_export(a, out, &o, NULL));
    o.dtype = GG_BF16;
    if (a) CHECK_OK(gguf_export(a, outb, &o, NULL));
    if (a) CHECK_OK(model_open(out, &b));
    size_t compared = 0, scales = 0;
    for (size_t i = 0; a && b && i < store_count(a->store); i++) {
        const char *n = store_name_at(a->store, i);
        if (strstr(n, "_scale_inv")) { scales++; continue; }
        Mat *x = NULL, *y = NULL;
        CHECK_OK(store_read(a->store, n, &x));
        CHECK(store_has(b->store, n), "the GGUF lacks %s", n);
        if (x && store_has(b->store, n) && store_read(b->store, n, &y) == AL_OK) {
            bool same = x->rows * x->cols == y->rows * y->cols;
            for (size_t k = 0; same && k < x->rows * x->cols; k++) same = x->data[k] == y->data[k];
            CHECK(same, "%s: the GGUF's values are not the dequantized FP8 weights", n);
            compared++;
        }
        mat_free(x);
        mat_free(y);
    }
    CHECK(compared > 50 && scales > 20, "demo-r1: %zu weights compared, %zu scale tensors skipped", compared, scales);
    for (size_t i = 0; b && i < store_count(b->store); i++)
        CHECK(!strstr(store_name_at(b->store, i), "scale_inv"), "the GGUF holds %s", store_name_at(b->store, i));
    model_free(a);
    model_free(b);
    free(r1);
    free(out);
    free(outb);
}

/* ================================================================ a Qwen2 model */

/* dst: src (a Llama-layout checkpoint) as Qwen2, F32, with random q/k/v biases (scale 0.5). */
static int make_qwen2(const char *src, const char *dst) {
    Model *m;
    if (model_open(src, &m) != AL_OK) return AL_ERR;
    CkptWriter *w = NULL;
    CkptOpts o = {.src = m->path};
    int rc = ckpt_begin(dst, &o, &w);
    unsigned seed = 11;
    for (size_t i = 0; rc == AL_OK && i < store_count(m->store); i++) {
        const char *name = store_name_at(m->store, i);
        const st_entry *e;
        Mat *t = NULL;
        rc = store_entry(m->store, name, &e, NULL);
        if (rc == AL_OK) rc = store_read(m->store, name, &t);
        if (rc == AL_OK) rc = ckpt_add_mat(w, name, DT_F32, t, e->ndim == 1 ? 1 : 2);
        size_t n = strlen(name);
        if (rc == AL_OK && n > 14 && strcmp(name + n - 12, "_proj.weight") == 0 && strchr("qkv", name[n - 13])) {
            Mat *b = mat_new(1, t->rows);
            for (size_t k = 0; b && k < t->rows; k++) b->data[k] = frand(&seed) * 0.25f;
            char *bn = al_asprintf("%.*sbias", (int)(n - 6), name);
            rc = b && bn ? ckpt_add_mat(w, bn, DT_F32, b, 1) : AL_ERR;
            mat_free(b);
            free(bn);
        }
        mat_free(t);
    }
    cJSON *c = model_config_tree(m);
    if (rc == AL_OK && c) {
        cJSON_ReplaceItemInObject(c, "model_type", cJSON_CreateString("qwen2"));
        cJSON_DeleteItemFromObject(c, "architectures");
        cJSON_AddItemToObject(c, "architectures", cJSON_CreateStringArray((const char *const[]){"Qwen2ForCausalLM"}, 1));
        cJSON_DeleteItemFromObject(c, "attnlab_synth");
        cJSON_AddBoolToObject(c, "use_sliding_window", false);
        cJSON_DeleteItemFromObject(c, "torch_dtype");
        cJSON_AddStringToObject(c, "torch_dtype", "float32");
        rc = ckpt_write_json(w, "config.json", c);
    }
    cJSON_Delete(c);
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else ckpt_abort(w);
    model_free(m);
    return rc;
}

/* ================================================================ the helper */

static int print_logits(const char *path, const char *idtext) {
    Model *m;
    if (model_open(path, &m) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    int ids[4096];
    size_t T = 0;
    for (char *p = (char *)idtext, *e; T < 4096; p = e) {
        long v = strtol(p, &e, 10);
        if (e == p) break;
        ids[T++] = (int)v;
    }
    size_t V = 0;
    float *z = logits_of(m, ids, T, &V);
    if (!z) { fprintf(stderr, "%s\n", al_errmsg()); model_free(m); return 1; }
    printf("{\"n_vocab\": %zu, \"logits\": [", V);
    for (size_t t = 0; t < T; t++) {
        printf("%s[", t ? "," : "");
        for (size_t v = 0; v < V; v++) printf("%s%.9g", v ? "," : "", z[t * V + v]);
        printf("]");
    }
    printf("]}\n");
    free(z);
    model_free(m);
    return 0;
}

/* ================================================================ the tensor map by role */

/* The entry of a's map (glob or layer) with role r and suffix what (NULL: none). */
static const GgufMap *map_entry(const GgufMap *map, tensor_role r, const char *what, const char *gg) {
    for (const GgufMap *t = map; t->what; t++)
        if (t->role == r && !strcmp(t->what, what) && (!gg || (t->gg && !strcmp(t->gg, gg)))) return t;
    return NULL;
}

/* Both names of an entry in layer L: HF (through c's layouts) and llama.cpp. */
static void check_names(const ModelConfig *c, const GgufMap *t, int L, const char *hf, const char *gg) {
    CHECK(t != NULL, "%s: no map entry for %s", c->model_type, hf);
    if (!t) return;
    char *h = gguf_hf_name(c, t, L), *g = gguf_layer_name(t, L);
    CHECK(h && !strcmp(h, hf), "%s: HF name %s, want %s", c->model_type, h ? h : "(none)", hf);
    CHECK(g && !strcmp(g, gg), "%s: GGUF name %s, want %s", c->model_type, g ? g : "(none)", gg);
    free(h);
    free(g);
}

/* Every family with a llama.cpp architecture: each role of its map has a name in the family's
 * layouts, no two entries of a layer share a GGUF name; a few names spelled out per layout. */
static void test_roles(void) {
    int mapped = 0;
    for (int f = 0; f < FAM_COUNT; f++) {
        ModelConfig c = {.family = (model_family)f};
        snprintf(c.model_type, sizeof c.model_type, "%s", FAMILY[f].model_type);
        cfg_layouts_from_row(&c);
        c.moe.layout = FAMILY[f].moe;                  /* gpt-oss: its experts' names */
        const GgufArch *a = gguf_arch_row(&c);
        CHECK((a != NULL) == (FAMILY[f].gguf_arch != NULL), "%s: an architecture iff its row names one", c.model_type);
        if (!a) continue;
        mapped++;
        CHECK(!strcmp(a->arch, FAMILY[f].gguf_arch), "%s: row %s, family row %s", c.model_type, a->arch, FAMILY[f].gguf_arch);
        for (int part = 0; part < 2; part++)
            for (const GgufMap *t = part ? a->layer : a->glob; t->what; t++) {
                char *h = gguf_hf_name(&c, t, 3), *g = gguf_layer_name(t, part ? 3 : -1);
                CHECK(h && g && !strstr(g, "?"), "%s: role %s has no name", c.model_type, tensor_role_name(t->role));
                al_err_clear();
                for (const GgufMap *u = part ? a->layer : a->glob; g && u < t; u++) {
                    char *o = gguf_layer_name(u, part ? 3 : -1);
                    CHECK(o && strcmp(o, g), "%s: %s twice", c.model_type, g);
                    free(o);
                }
                free(h);
                free(g);
            }
    }
    CHECK(mapped >= 15, "%d families with a llama.cpp architecture", mapped);
    CHECK(!strcmp(gguf_role_name(ROLE_FFN_GATE_UP), "ffn_up") && !strcmp(gguf_role_name(ROLE_NORM_ATTN_OUT),
          "post_attention_norm") && gguf_role_name(ROLE_COUNT) == NULL, "llama.cpp's role names");
    ModelConfig c = {.family = FAM_LLAMA, .model_type = "llama"};
    cfg_layouts_from_row(&c);
    const GgufArch *a = gguf_arch_row(&c);
    check_names(&c, map_entry(a->layer, ROLE_NORM_FFN_IN, "weight", NULL), 2, "model.layers.2.post_attention_layernorm.weight",
                "blk.2.ffn_norm.weight");
    check_names(&c, map_entry(a->glob, ROLE_LM_HEAD, "weight", NULL), -1, "lm_head.weight", "output.weight");
    c = (ModelConfig){.family = FAM_DEEPSEEK, .model_type = "deepseek_v3"};
    cfg_layouts_from_row(&c);
    a = gguf_arch_row(&c);
    check_names(&c, map_entry(a->layer, ROLE_KV_B, "weight", "attn_v_b"), 1, "model.layers.1.self_attn.kv_b_proj.weight",
                "blk.1.attn_v_b.weight");
    check_names(&c, map_entry(a->layer, ROLE_KV_A, "weight", NULL), 0, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
                "blk.0.attn_kv_a_mqa.weight");
    c = (ModelConfig){.family = FAM_GPT2, .model_type = "gpt2"};
    cfg_layouts_from_row(&c);
    a = gguf_arch_row(&c);
    check_names(&c, map_entry(a->glob, ROLE_POS_EMBED, "weight", NULL), -1, "transformer.wpe.weight", "position_embd.weight");
    check_names(&c, map_entry(a->layer, ROLE_FFN_DOWN, "bias", NULL), 0, "transformer.h.0.mlp.c_proj.bias", "blk.0.ffn_down.bias");
    c.prefix[0] = 0;                                 /* GPT2Model saved without the LM head wrapper */
    check_names(&c, map_entry(a->layer, ROLE_QKV, "weight", NULL), 1, "h.1.attn.c_attn.weight", "blk.1.attn_qkv.weight");
    c = (ModelConfig){.family = FAM_NEOX, .model_type = "gpt_neox"};
    cfg_layouts_from_row(&c);
    a = gguf_arch_row(&c);
    check_names(&c, map_entry(a->glob, ROLE_LM_HEAD, "weight", NULL), -1, "embed_out.weight", "output.weight");
    check_names(&c, map_entry(a->layer, ROLE_QKV, "bias", NULL), 4, "gpt_neox.layers.4.attention.query_key_value.bias",
                "blk.4.attn_qkv.bias");
    c = (ModelConfig){.family = FAM_GEMMA2, .model_type = "gemma2"};
    cfg_layouts_from_row(&c);
    a = gguf_arch_row(&c);
    check_names(&c, map_entry(a->layer, ROLE_NORM_FFN_OUT, "weight", NULL), 0, "model.layers.0.post_feedforward_layernorm.weight",
                "blk.0.post_ffw_norm.weight");
    c = (ModelConfig){.family = FAM_MIXTRAL, .model_type = "mixtral"};
    cfg_layouts_from_row(&c);
    CHECK(gguf_arch_row(&c) == NULL, "mixtral: no llama.cpp architecture mapped");
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "logits") == 0) return print_logits(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "make-qwen2") == 0) {
        if (make_qwen2(argv[2], argv[3]) == AL_OK) return 0;
        fprintf(stderr, "%s\n", al_errmsg());
        return 1;
    }
    const char *dir = test_tmpdir();
    test_q8_0_reference();
    test_mxfp4_reference();
    test_roundtrip(dir);
    test_malformed();
    test_models(dir);
    test_fp8(dir);
    test_roles();
    return check_done();
}
