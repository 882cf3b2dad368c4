/* test_malformed.c -- every malformed input gets a clear one-line error that names the file and
 * what is wrong, and nothing crashes (run it under -DATTNLAB_SANITIZE=ON too).
 *
 * 1. The safetensors corpus: a table of small files, each built here byte by byte, with the
 *    message it must produce. Each one is parsed from memory (st_parse_buffer), written and
 *    opened (st_open), and compared with the committed copy in tests/corpus/, which is also
 *    the fuzz target's seed corpus; a file in tests/corpus/ that is not in the table fails the
 *    test. `test_malformed --write-corpus DIR` regenerates the files (see tests/corpus/README.md).
 * 2. Model folders: missing tensors, wrong shapes, configs the families do not cover, NaN/Inf
 *    weights (warnings), FP8 weights without scales, corrupt shards.
 * 3. llama2.c .bin files: truncated, nonsense headers. */
#include "testutil.h"
#include "model.h"
#include "fuzz/fuzz_safetensors.c"     /* LLVMFuzzerTestOneInput: the fuzz target's invariants */

#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <time.h>

/* ================================================================ byte images */

typedef struct {
    uint8_t *b;
    size_t n;
} image;

/* 8-byte little-endian header length + header text + data_len bytes of data (0, 1, 2, ...). */
static image img_header(uint64_t hlen, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    image im = {malloc(8 + hl + data_len + 1), 8 + hl + data_len};
    for (int i = 0; i < 8; i++) im.b[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(im.b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) im.b[8 + hl + i] = (uint8_t)i;
    return im;
}

/* A well-formed image: the length is the header's. */
static image img(const char *header, size_t data_len) { return img_header(strlen(header), header, data_len); }

/* The bytes st_writer writes for w (freed here). */
static image img_of_writer(st_writer *w) {
    char path[4400];
    snprintf(path, sizeof path, "%s/writer.tmp", tu_dir);
    st_writer_write(w, path);
    st_writer_free(w);
    FILE *fp = fopen(path, "rb");
    image im = {malloc(4096), 0};
    im.n = fp ? fread(im.b, 1, 4096, fp) : 0;
    if (fp) fclose(fp);
    remove(path);
    return im;
}

/* A valid file written by st_writer, then cut or left whole. */
static image img_writer(size_t cut, bool nan) {
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (nan) { x[2] = NAN; x[5] = INFINITY; x[7] = -INFINITY; }
    size_t sh[2] = {2, 4};
    st_writer *w = st_writer_new();
    st_writer_meta(w, "format", "pt");
    st_writer_add(w, "w", DT_F32, 2, sh, x, sizeof x);
    st_writer_add(w, "v", DT_F32, 1, sh + 1, x, 16);
    image im = img_of_writer(w);
    im.n -= cut < im.n ? cut : im.n;
    return im;
}

/* An FP8 weight "w.weight" (130 x 257) and, depending on `scale`, its scales: 0 none, 1 right,
 * 2 wrong shape (2 x 2), 3 wrong dtype (F16 2 x 3), 4 BF16 (all 1), 5 F8_E8M0 (all 2^0), 6 F8_E8M0
 * with code 0xFF at [1, 2], 7 BF16 with a NaN at [1, 1], 8 F32 with +Inf at [0, 0]. */
static image img_fp8(int scale) {
    static char hdr[1024];
    size_t wbytes = 130 * 257;
    const char *sdt = scale == 3 ? "F16" : scale == 4 || scale == 7 ? "BF16" : scale == 5 || scale == 6 ? "F8_E8M0" : "F32";
    size_t ssz = scale == 3 || scale == 4 || scale == 7 ? 2 : scale == 5 || scale == 6 ? 1 : 4;
    size_t scols = scale == 2 ? 2 : 3, sbytes = 2 * scols * ssz;
    if (scale == 0)
        snprintf(hdr, sizeof hdr, "{\"w.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[130,257],\"data_offsets\":[0,%zu]}}", wbytes);
    else
        snprintf(hdr, sizeof hdr, "{\"w.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[130,257],\"data_offsets\":[0,%zu]},"
                 "\"w.weight_scale_inv\":{\"dtype\":\"%s\",\"shape\":[2,%zu],\"data_offsets\":[%zu,%zu]}}",
                 wbytes, sdt, scols, wbytes, wbytes + sbytes);
    image im = img(hdr, wbytes + (scale ? sbytes : 0));
    uint8_t *d = im.b + im.n - (wbytes + (scale ? sbytes : 0));
    memset(d, 0x38, wbytes);                               /* every weight 1.0 */
    uint8_t *sd = d + wbytes;
    for (size_t i = 0; scale >= 4 && i < 6; i++) {
        if (scale == 4 || scale == 7) { sd[2 * i] = i == 4 && scale == 7 ? 0xc0 : 0x80; sd[2 * i + 1] = i == 4 && scale == 7 ? 0x7f : 0x3f; }
        if (scale == 5 || scale == 6) sd[i] = i == 5 && scale == 6 ? 0xff : 127;
        if (scale == 8) { float v = i == 0 ? INFINITY : 1.0f; memcpy(sd + 4 * i, &v, 4); }
    }
    return im;
}

/* FP4 weights w.weight (2 x 32): 0 valid MXFP4 (blocks + E8M0 scales 2^-3, 2^0), 1 MXFP4 with a
 * NaN scale (0xFF), 2 valid NVFP4 (packed + E4M3 scales, one subnormal, + scale_2 0.5), 3 NVFP4 with
 * a scale grid of one column. */
static image img_fp4(int kind) {
    static char hdr[1024];
    bool nv = kind >= 2;
    size_t sb = kind == 3 ? 2 : 4;
    if (!nv)
        snprintf(hdr, sizeof hdr, "{\"w.weight_blocks\":{\"dtype\":\"U8\",\"shape\":[2,1,16],\"data_offsets\":[0,32]},"
                 "\"w.weight_scales\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[32,34]}}");
    else
        snprintf(hdr, sizeof hdr, "{\"w.weight\":{\"dtype\":\"U8\",\"shape\":[2,16],\"data_offsets\":[0,32]},"
                 "\"w.weight_scale\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,%zu],\"data_offsets\":[32,%zu]},"
                 "\"w.weight_scale_2\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[%zu,%zu]}}",
                 sb / 2, 32 + sb, 32 + sb, 36 + sb);
    size_t n = nv ? 36 + sb : 34;
    image im = img(hdr, n);
    uint8_t *d = im.b + im.n - n;
    for (int i = 0; i < 32; i++) d[i] = (uint8_t)(i * 37 + 11);
    if (!nv) { d[32] = 124; d[33] = kind == 1 ? 0xff : 127; return im; }
    const uint8_t sc[4] = {0x01, 0x38, 0x40, 0x30};
    memcpy(d + 32, sc, sb);
    float g = 0.5f;
    memcpy(d + 32 + sb, &g, 4);
    return im;
}

/* compressed-tensors weights (issue 28's hostile inputs). INT4 i.weight (2 x 64: i.weight_packed I32
 * [2, 8], BF16 i.weight_scale [2, 2], I64 i.weight_shape): 0 valid, 1 weight_shape [2, 96] (values
 * past the packed words), 2 a NaN scale. FP8 c.weight (F8_E4M3 3 x 4, F32 c.weight_scale [3, 1],
 * an input_scale): 3 valid, 4 an Inf scale, 5 a scale [2, 1] for 3 rows. NVFP4 n.weight (2 x 32:
 * n.weight_packed U8 [2, 16], E4M3 n.weight_scale [2, 2], F32 n.weight_global_scale [1]): 6 valid,
 * 7 a global scale of 0 (it divides). */
static image img_ct(int kind) {
    st_writer *w = st_writer_new();
    uint8_t b[64];
    for (int i = 0; i < 64; i++) b[i] = (uint8_t)(i * 37 + 11);
    if (kind <= 2) {
        uint16_t sc[4] = {0x3e00, 0x3f80, 0x4000, kind == 2 ? 0x7fc0 : 0x3f00};
        int64_t shp[2] = {2, kind == 1 ? 96 : 64};
        size_t ws[2] = {2, 8}, ss[2] = {2, 2}, two = 2;
        st_writer_add(w, "i.weight_packed", DT_I32, 2, ws, b, 64);
        st_writer_add(w, "i.weight_scale", DT_BF16, 2, ss, sc, sizeof sc);
        st_writer_add(w, "i.weight_shape", DT_I64, 1, &two, shp, sizeof shp);
    } else if (kind <= 5) {
        float sc[3] = {0.125f, kind == 4 ? INFINITY : 2.0f, 0.5f}, in = 1e9f;
        size_t ws[2] = {3, 4}, ss[2] = {kind == 5 ? 2 : 3, 1};
        st_writer_add(w, "c.weight", DT_F8_E4M3, 2, ws, b, 12);
        st_writer_add(w, "c.weight_scale", DT_F32, 2, ss, sc, ss[0] * 4);
        st_writer_add(w, "c.input_scale", DT_F32, 0, ws, &in, 4);
    } else {
        const uint8_t sc[4] = {0x01, 0x38, 0x40, 0x30};
        float g = kind == 7 ? 0.0f : 448.0f * 6;
        size_t ws[2] = {2, 16}, ss[2] = {2, 2}, one = 1;
        st_writer_add(w, "n.weight_packed", DT_U8, 2, ws, b, 32);
        st_writer_add(w, "n.weight_scale", DT_F8_E4M3, 2, ss, sc, 4);
        st_writer_add(w, "n.weight_global_scale", DT_F32, 1, &one, &g, 4);
    }
    return img_of_writer(w);
}

static image img_deep_nesting(void) {
    static char hdr[4200];
    size_t n = 0;
    n += (size_t)snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"x\":");
    for (int i = 0; i < 2000; i++) hdr[n++] = '[';
    hdr[n] = 0;
    return img(hdr, 0);
}

static image img_nul_in_header(void) {
    image im = img("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    im.b[8 + 5] = 0;                                       /* inside the key's object */
    return im;
}

static image img_raw(const char *bytes, size_t n) {
    image im = {malloc(n + 1), n};
    memcpy(im.b, bytes, n);
    return im;
}

/* ================================================================ the corpus table */

typedef enum {
    PARSE_ERR,    /* st_open / st_parse_buffer fail with the message */
    PARSE_OK,     /* parses (a valid seed for the fuzzer) */
    READ_ERR,     /* parses, store_read(tensor) fails with the message */
    READ_WARN     /* parses, store_read(tensor) succeeds and queues the warning */
} expect_kind;

typedef struct {
    const char *file;
    expect_kind kind;
    const char *want;        /* message substring */
    const char *tensor;      /* for READ_* */
    const char *what;        /* one line for the README */
} corpus_case;

#define E32(name, b, e) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[" #b "," #e "]}"

static image build(const char *file) {
    /* each case's bytes; kept next to the table order below */
    if (!strcmp(file, "empty.safetensors")) return img_raw("", 0);
    if (!strcmp(file, "short-5-bytes.safetensors")) return img_raw("\x10\0\0\0\0", 5);
    if (!strcmp(file, "header-cut-short.safetensors"))
        return img_header(120, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_o", 0);
    if (!strcmp(file, "header-length-huge.safetensors")) return img_header(UINT64_MAX, "{}", 0);
    if (!strcmp(file, "header-length-zero.safetensors")) return img_header(0, "", 16);
    if (!strcmp(file, "data-cut-short.safetensors")) return img_writer(10, false);
    if (!strcmp(file, "offsets-out-of-range.safetensors")) return img("{" E32("a", 1000, 1016) "}", 16);
    if (!strcmp(file, "offsets-reversed.safetensors")) return img("{" E32("a", 16, 0) "}", 16);
    if (!strcmp(file, "offsets-fraction.safetensors")) return img("{" E32("a", 0, 15.5) "}", 16);
    if (!strcmp(file, "offsets-negative.safetensors")) return img("{" E32("a", -16, 0) "}", 16);
    if (!strcmp(file, "offsets-three.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16,32]}}", 32);
    if (!strcmp(file, "offsets-huge.safetensors")) return img("{" E32("a", 0, 1e300) "}", 16);
    if (!strcmp(file, "offsets-string.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[\"0\",\"16\"]}}", 16);
    if (!strcmp(file, "overlap.safetensors")) return img("{" E32("a", 0, 16) "," E32("b", 8, 24) "}", 24);
    if (!strcmp(file, "overlap-identical.safetensors")) return img("{" E32("a", 0, 16) "," E32("b", 0, 16) "}", 16);
    if (!strcmp(file, "overlap-behind-empty.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[0,64]},"
                   "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,16]}," E32("c", 32, 48) "}", 64);
    if (!strcmp(file, "unknown-dtype.safetensors"))
        return img("{\"a\":{\"dtype\":\"F12\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "dtype-control-char.safetensors"))
        return img("{\"a\":{\"dtype\":\"F3\\n\\u001b[31m\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "dtype-missing.safetensors")) return img("{\"a\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "dtype-not-string.safetensors"))
        return img("{\"a\":{\"dtype\":32,\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "shape-size-mismatch.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[3,3],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "shape-dtype-mismatch.safetensors"))
        return img("{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "shape-negative.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1,4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "shape-fraction.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,10]}}", 16);
    if (!strcmp(file, "shape-missing.safetensors")) return img("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "shape-too-many-dims.safetensors"))
        return img("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 16);
    if (!strcmp(file, "shape-overflow.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "json-malformed.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"b\":{\"dtype\":", 16);
    if (!strcmp(file, "json-not-object.safetensors")) return img("[1, 2, 3]", 0);
    if (!strcmp(file, "json-nul-byte.safetensors")) return img_nul_in_header();
    if (!strcmp(file, "json-deep-nesting.safetensors")) return img_deep_nesting();
    if (!strcmp(file, "entry-not-object.safetensors")) return img("{\"a\": 7}", 0);
    if (!strcmp(file, "metadata-not-object.safetensors")) return img("{\"__metadata__\": [1]}", 0);
    if (!strcmp(file, "name-control-char.safetensors"))
        return img("{\"bad\\nname\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "duplicate-metadata.safetensors"))
        return img("{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"},\"__metadata__\":{\"x\":\"1\"}}", 0);
    if (!strcmp(file, "duplicate-name.safetensors")) return img("{" E32("a", 0, 16) "," E32("a", 16, 32) "}", 32);
    if (!strcmp(file, "data-hole.safetensors")) return img("{" E32("a", 0, 16) "," E32("b", 32, 48) "}", 48);
    if (!strcmp(file, "data-trailing-bytes.safetensors")) return img("{" E32("a", 0, 16) "}", 24);
    if (!strcmp(file, "empty-inside-tensor.safetensors"))
        return img("{" E32("a", 0, 16) ",\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 16);
    if (!strcmp(file, "header-trailing-json.safetensors")) return img("{" E32("a", 0, 16) "} {}    ", 16);
    if (!strcmp(file, "header-not-utf8.safetensors"))
        return img("{\"__metadata__\":{\"k\":\"\xc3" "(\"}," E32("a", 0, 16) "}", 16);
    if (!strcmp(file, "metadata-value-not-string.safetensors"))
        return img("{\"__metadata__\":{\"format\":\"pt\",\"layers\":7}," E32("a", 0, 16) "}", 16);
    if (!strcmp(file, "metadata-null-twice.safetensors"))
        return img("{\"__metadata__\":null,\"__metadata__\":null," E32("a", 0, 16) "}", 16);
    if (!strcmp(file, "field-twice.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"dtype\":\"F16\",\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "shape-float-literal.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4.0],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "offsets-exponent.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,1.6e1]}}", 16);
    if (!strcmp(file, "json-leading-zero.safetensors"))
        return img("{\"a\":{\"dtype\":\"F32\",\"shape\":[04],\"data_offsets\":[0,16]}}", 16);
    if (!strcmp(file, "json-control-char-in-string.safetensors"))
        return img("{\"__metadata__\":{\"k\":\"a\x01\"}," E32("a", 0, 16) "}", 16);
    if (!strcmp(file, "json-lone-surrogate.safetensors"))
        return img("{\"__metadata__\":{\"k\":\"\\ud800\"}," E32("a", 0, 16) "}", 16);
    if (!strcmp(file, "json-nul-escape.safetensors")) return img("{" E32("a\\u0000b", 0, 16) "}", 16);
    if (!strcmp(file, "json-trailing-comma.safetensors")) return img("{" E32("a", 0, 16) ",}", 16);
    if (!strcmp(file, "valid-small.safetensors")) return img_writer(0, false);
    if (!strcmp(file, "valid-leading-space-null-metadata.safetensors"))
        return img(" \n {\"__metadata__\": null, " E32("a", 0, 16) "} \t\r\n   ", 16);
    if (!strcmp(file, "valid-empty-between.safetensors"))
        return img("{" E32("a", 0, 16) ",\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[16,16]},"
                   E32("b", 16, 32) ",\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[32,36]},"
                   "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[36,36],\"extra\":[1.5,{\"x\":null}]}}", 36);
    if (!strcmp(file, "valid-empty.safetensors")) return img("{}      ", 0);
    if (!strcmp(file, "valid-fp8-with-scales.safetensors")) return img_fp8(1);
    if (!strcmp(file, "fp8-without-scale.safetensors")) return img_fp8(0);
    if (!strcmp(file, "fp8-scale-wrong-shape.safetensors")) return img_fp8(2);
    if (!strcmp(file, "fp8-scale-wrong-dtype.safetensors")) return img_fp8(3);
    if (!strcmp(file, "valid-fp8-bf16-scales.safetensors")) return img_fp8(4);
    if (!strcmp(file, "valid-fp8-e8m0-scales.safetensors")) return img_fp8(5);
    if (!strcmp(file, "fp8-scale-e8m0-255.safetensors")) return img_fp8(6);
    if (!strcmp(file, "fp8-scale-bf16-nan.safetensors")) return img_fp8(7);
    if (!strcmp(file, "fp8-scale-f32-inf.safetensors")) return img_fp8(8);
    if (!strcmp(file, "valid-mxfp4.safetensors")) return img_fp4(0);
    if (!strcmp(file, "mxfp4-scale-nan.safetensors")) return img_fp4(1);
    if (!strcmp(file, "valid-nvfp4.safetensors")) return img_fp4(2);
    if (!strcmp(file, "nvfp4-scale-wrong-shape.safetensors")) return img_fp4(3);
    if (!strcmp(file, "valid-int4-packed.safetensors")) return img_ct(0);
    if (!strcmp(file, "int4-shape-past-words.safetensors")) return img_ct(1);
    if (!strcmp(file, "int4-scale-nan.safetensors")) return img_ct(2);
    if (!strcmp(file, "valid-fp8-channel-scale.safetensors")) return img_ct(3);
    if (!strcmp(file, "fp8-channel-scale-inf.safetensors")) return img_ct(4);
    if (!strcmp(file, "fp8-channel-scale-rows.safetensors")) return img_ct(5);
    if (!strcmp(file, "valid-ct-nvfp4.safetensors")) return img_ct(6);
    if (!strcmp(file, "ct-nvfp4-global-scale-zero.safetensors")) return img_ct(7);
    if (!strcmp(file, "nan-inf-weights.safetensors")) return img_writer(0, true);
    if (!strcmp(file, "integer-weight.safetensors"))
        return img("{\"ids\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16);
    return (image){NULL, 0};
}

static const corpus_case cases[] = {
    {"empty.safetensors", PARSE_ERR, "truncated: 0 bytes", NULL, "0 bytes"},
    {"short-5-bytes.safetensors", PARSE_ERR, "truncated: 5 bytes", NULL, "5 bytes: shorter than the 8-byte header length"},
    {"header-cut-short.safetensors", PARSE_ERR, "header length 120 runs beyond the end of the file", NULL,
     "header length 120 but the file ends 39 bytes into the header"},
    {"header-length-huge.safetensors", PARSE_ERR, "header length 18446744073709551615 runs beyond", NULL,
     "header length 2^64-1"},
    {"header-length-zero.safetensors", PARSE_ERR, "header is not valid JSON", NULL, "header length 0, then 16 data bytes"},
    {"data-cut-short.safetensors", PARSE_ERR, "beyond the data section", NULL,
     "a valid file (st_writer) with its last 10 data bytes cut off"},
    {"offsets-out-of-range.safetensors", PARSE_ERR, "data_offsets [1000, 1016] beyond the data section (16 bytes)", NULL,
     "offsets past the end of a 16-byte data section"},
    {"offsets-reversed.safetensors", PARSE_ERR, "data_offsets end 0 before begin 16", NULL, "data_offsets [16, 0]"},
    {"offsets-fraction.safetensors", PARSE_ERR, "\"data_offsets\" must be [begin, end] integers", NULL, "data_offsets [0, 15.5]"},
    {"offsets-negative.safetensors", PARSE_ERR, "\"data_offsets\" must be [begin, end] integers", NULL, "data_offsets [-16, 0]"},
    {"offsets-three.safetensors", PARSE_ERR, "\"data_offsets\" must be [begin, end] integers", NULL, "three offsets"},
    {"offsets-huge.safetensors", PARSE_ERR, "\"data_offsets\" must be [begin, end] integers", NULL,
     "end offset 1e300 (beyond 2^53)"},
    {"offsets-string.safetensors", PARSE_ERR, "\"data_offsets\" must be [begin, end] integers", NULL, "offsets as strings"},
    {"overlap.safetensors", PARSE_ERR, "tensors 'a' and 'b' overlap", NULL, "[0, 16] and [8, 24]"},
    {"overlap-identical.safetensors", PARSE_ERR, "overlap in the data section", NULL, "two tensors on the same bytes"},
    {"overlap-behind-empty.safetensors", PARSE_ERR, "tensors 'a' and 'c' overlap", NULL,
     "[0, 64], an empty tensor at 16, [32, 48]: the overlap is not between neighbours"},
    {"unknown-dtype.safetensors", PARSE_ERR, "tensor 'a': unknown dtype 'F12'", NULL, "dtype F12"},
    {"dtype-control-char.safetensors", PARSE_ERR, "unknown dtype 'F3\\x0a\\x1b[31m'", NULL,
     "dtype \"F3\\n\\u001b[31m\": shown escaped, on one line (found by the fuzzer)"},
    {"dtype-missing.safetensors", PARSE_ERR, "tensor 'a': missing \"dtype\"", NULL, "no dtype"},
    {"dtype-not-string.safetensors", PARSE_ERR, "tensor 'a': missing \"dtype\"", NULL, "dtype 32"},
    {"shape-size-mismatch.safetensors", PARSE_ERR, "shape x F32 needs 36 bytes but data_offsets give 16", NULL,
     "F32 [3, 3] in 16 bytes"},
    {"shape-dtype-mismatch.safetensors", PARSE_ERR, "shape x F16 needs 8 bytes but data_offsets give 16", NULL,
     "F16 [4] in 16 bytes"},
    {"shape-negative.safetensors", PARSE_ERR, "shape[0] is not a non-negative integer", NULL, "shape [-1, 4]"},
    {"shape-fraction.safetensors", PARSE_ERR, "shape[0] is not a non-negative integer", NULL, "shape [2.5]"},
    {"shape-missing.safetensors", PARSE_ERR, "missing \"shape\" array", NULL, "no shape"},
    {"shape-too-many-dims.safetensors", PARSE_ERR, "9 dims, at most 8 supported", NULL, "9 dims"},
    {"shape-overflow.safetensors", PARSE_ERR, "size overflow", NULL, "shape [2^32, 2^32, 2^32]: the element count overflows"},
    {"json-malformed.safetensors", PARSE_ERR, "header is not valid JSON", NULL, "JSON cut in the middle of an entry"},
    {"json-not-object.safetensors", PARSE_ERR, "header is not a JSON object", NULL, "header [1, 2, 3]"},
    {"json-nul-byte.safetensors", PARSE_ERR, "header is not valid JSON", NULL, "a NUL byte inside the header"},
    {"json-deep-nesting.safetensors", PARSE_ERR, "header is not valid JSON", NULL,
     "2000 nested arrays in __metadata__, cut off (cJSON's nesting limit)"},
    {"entry-not-object.safetensors", PARSE_ERR, "tensor 'a': header entry is not an object", NULL, "{\"a\": 7}"},
    {"metadata-not-object.safetensors", PARSE_ERR, "\"__metadata__\" is not an object", NULL, "__metadata__ is an array"},
    {"name-control-char.safetensors", PARSE_ERR, "a tensor name has control character 0x0a at byte 3", NULL,
     "a tensor named \"bad\\nname\" (a newline would break one-line messages; found by the fuzzer)"},
    {"duplicate-metadata.safetensors", PARSE_ERR, "\"__metadata__\" appears twice in the header", NULL,
     "two __metadata__ objects, the second smaller (was a heap overflow; found by the fuzzer)"},
    {"duplicate-name.safetensors", PARSE_ERR, "tensor 'a' appears twice in the header", NULL,
     "two entries named 'a' on different bytes"},
    {"data-hole.safetensors", PARSE_ERR, "the data section has a hole: bytes [16, 32) before tensor 'b'", NULL,
     "[0, 16] and [32, 48]: 16 bytes no tensor owns (the reference refuses holes)"},
    {"data-trailing-bytes.safetensors", PARSE_ERR, "8 bytes after the last tensor", NULL,
     "[0, 16] in a 24-byte data section"},
    {"empty-inside-tensor.safetensors", PARSE_ERR, "empty tensor 'e' at offset 8 lies inside tensor 'a' [0, 16]", NULL,
     "an empty tensor at 8, inside [0, 16]"},
    {"header-trailing-json.safetensors", PARSE_ERR, "bytes after the JSON value at byte", NULL,
     "the header is {...} {} : a second value after the object"},
    {"header-not-utf8.safetensors", PARSE_ERR, "header is not valid UTF-8 (byte 0xc3 at byte 22", NULL,
     "a metadata value with the bytes C3 28 (not UTF-8)"},
    {"metadata-value-not-string.safetensors", PARSE_ERR, "\"__metadata__\" value of 'layers' is not a string", NULL,
     "__metadata__ {\"format\": \"pt\", \"layers\": 7}"},
    {"metadata-null-twice.safetensors", PARSE_ERR, "\"__metadata__\" appears twice in the header", NULL,
     "__metadata__ null, twice"},
    {"field-twice.safetensors", PARSE_ERR, "tensor 'a': \"dtype\" appears 2 times in its entry", NULL,
     "a tensor entry with two dtypes"},
    {"shape-float-literal.safetensors", PARSE_ERR, "shape[0] is not a non-negative integer", NULL, "shape [4.0]"},
    {"offsets-exponent.safetensors", PARSE_ERR, "\"data_offsets\" must be [begin, end] integers", NULL,
     "data_offsets [0, 1.6e1]"},
    {"json-leading-zero.safetensors", PARSE_ERR, "header is not valid JSON", NULL, "shape [04] (no leading zeros in JSON)"},
    {"json-control-char-in-string.safetensors", PARSE_ERR, "a control character inside a string", NULL,
     "a raw 0x01 byte inside a metadata value"},
    {"json-lone-surrogate.safetensors", PARSE_ERR, "an unpaired surrogate", NULL, "a metadata value \"\\ud800\""},
    {"json-nul-escape.safetensors", PARSE_ERR, "\\u0000 in a string", NULL, "a tensor named \"a\\u0000b\""},
    {"json-trailing-comma.safetensors", PARSE_ERR, "header is not valid JSON", NULL, "{..., }"},
    {"valid-small.safetensors", PARSE_OK, NULL, NULL, "valid: F32 w [2, 4] and v [4], metadata format=pt (fuzz seed)"},
    {"valid-leading-space-null-metadata.safetensors", PARSE_OK, NULL, NULL,
     "valid: whitespace before the header's object, \"__metadata__\": null, whitespace after (the reference accepts it)"},
    {"valid-empty-between.safetensors", PARSE_OK, NULL, NULL,
     "valid: empty tensors on boundaries, a scalar, an unknown member in an entry"},
    {"valid-empty.safetensors", PARSE_OK, NULL, NULL, "valid: no tensors (fuzz seed)"},
    {"valid-fp8-with-scales.safetensors", PARSE_OK, NULL, NULL,
     "valid: F8_E4M3 w.weight [130, 257] + F32 scales [2, 3] (fuzz seed)"},
    {"fp8-without-scale.safetensors", READ_ERR, "FP8 tensor 'w.weight' has no block scales 'w.weight_scale_inv'",
     "w.weight", "parses; reading the FP8 weight fails: no weight_scale_inv"},
    {"fp8-scale-wrong-shape.safetensors", READ_ERR, "'w.weight_scale_inv' should be F32 of shape [2, 3]", "w.weight",
     "parses; the scale grid is [2, 2] for a [130, 257] weight"},
    {"fp8-scale-wrong-dtype.safetensors", READ_ERR, "found F16 of shape [2, 3]", "w.weight",
     "parses; the scales are F16"},
    {"valid-fp8-bf16-scales.safetensors", PARSE_OK, NULL, NULL,
     "valid: F8_E4M3 w.weight [130, 257] + BF16 scales [2, 3] (Qwen3-FP8; fuzz seed)"},
    {"valid-fp8-e8m0-scales.safetensors", PARSE_OK, NULL, NULL,
     "valid: F8_E4M3 w.weight [130, 257] + F8_E8M0 scales [2, 3] (DeepSeek-V4; fuzz seed)"},
    {"fp8-scale-e8m0-255.safetensors", READ_ERR, "'w.weight_scale_inv' block [1, 2] is nan (E8M0 code 0xff)", "w.weight",
     "parses; an F8_E8M0 block scale is 0xFF (NaN)"},
    {"fp8-scale-bf16-nan.safetensors", READ_ERR, "'w.weight_scale_inv' block [1, 1] is nan: an FP8 block scale must be finite",
     "w.weight", "parses; a BF16 block scale is NaN"},
    {"fp8-scale-f32-inf.safetensors", READ_ERR, "'w.weight_scale_inv' block [0, 0] is inf: an FP8 block scale must be finite",
     "w.weight", "parses; an F32 block scale is +Inf"},
    {"valid-mxfp4.safetensors", PARSE_OK, NULL, NULL,
     "valid: MXFP4 w.weight_blocks U8 [2, 1, 16] + w.weight_scales U8 [2, 1] (E8M0 2^-3, 1) (fuzz seed)"},
    {"mxfp4-scale-nan.safetensors", READ_ERR, "MXFP4 tensor 'w.weight': block scale [1, 0] (code 0xff) is NaN", "w.weight",
     "parses; an E8M0 block scale is 0xFF (NaN)"},
    {"valid-nvfp4.safetensors", PARSE_OK, NULL, NULL,
     "valid: NVFP4 w.weight U8 [2, 16] + F8_E4M3 w.weight_scale [2, 2] (one subnormal) + F32 w.weight_scale_2 [] (fuzz seed)"},
    {"nvfp4-scale-wrong-shape.safetensors", READ_ERR, "'w.weight_scale' should be F8_E4M3 of shape [2, 2]", "w.weight",
     "parses; the per-16 scale grid is [2, 1] for a [2, 32] weight"},
    {"valid-int4-packed.safetensors", PARSE_OK, NULL, NULL,
     "valid: compressed-tensors INT4 i.weight_packed I32 [2, 8] + BF16 i.weight_scale [2, 2] + i.weight_shape [2, 64] (fuzz seed)"},
    {"int4-shape-past-words.safetensors", READ_ERR, "INT4 tensor 'i.weight_packed' should be I32 of shape [rows, cols/8] with cols a multiple of 32 for its shape [2, 96]", "i.weight",
     "parses; weight_shape [2, 96] claims values past the packed words (8 per row: 64 values)"},
    {"int4-scale-nan.safetensors", READ_ERR, "INT4 tensor 'i.weight': group scale [1, 1] is nan", "i.weight",
     "parses; an INT4 group scale is NaN"},
    {"valid-fp8-channel-scale.safetensors", PARSE_OK, NULL, NULL,
     "valid: compressed-tensors FP8 c.weight F8_E4M3 [3, 4] + F32 c.weight_scale [3, 1] + c.input_scale (fuzz seed)"},
    {"fp8-channel-scale-inf.safetensors", READ_ERR, "'c.weight_scale' row 1 is inf: the scale of FP8 weight 'c.weight' must be finite", "c.weight",
     "parses; a per-channel FP8 scale is +Inf"},
    {"fp8-channel-scale-rows.safetensors", READ_ERR, "'c.weight_scale' should be F32, BF16 or F16 of shape [], [1] or [3, 1]", "c.weight",
     "parses; a per-channel scale [2, 1] for a weight of 3 rows"},
    {"valid-ct-nvfp4.safetensors", PARSE_OK, NULL, NULL,
     "valid: compressed-tensors NVFP4 n.weight_packed U8 [2, 16] + E4M3 n.weight_scale [2, 2] + n.weight_global_scale [1] (fuzz seed)"},
    {"ct-nvfp4-global-scale-zero.safetensors", READ_ERR, "'n.weight_global_scale' is 0: the per-tensor scale of 'n.weight' must be finite and positive", "n.weight",
     "parses; the global scale that divides the block scales is 0"},
    {"nan-inf-weights.safetensors", READ_WARN, "tensor 'w' has 3 NaN/Inf values (first at [0, 2])", "w",
     "parses; w holds a NaN, +Inf and -Inf: reading it warns"},
    {"integer-weight.safetensors", READ_ERR, "tensor 'ids' is I32, not a float weight", "ids",
     "parses; reading an I32 tensor as a weight fails"},
};
#define N_CASES (sizeof cases / sizeof *cases)

/* ================================================================ checking one case */

/* Checks the current error message: contains want and the file name, one line. */
static void check_msg(const corpus_case *c, const char *where, const char *name) {
    const char *msg = al_errmsg();
    CHECK(strstr(msg, c->want) != NULL, "%s (%s): want '%s', got: %s", c->file, where, c->want, msg);
    CHECK(strstr(msg, name) != NULL, "%s (%s): the message does not name the file: %s", c->file, where, msg);
    CHECK(strchr(msg, '\n') == NULL, "%s (%s): not one line: %s", c->file, where, msg);
}

/* Runs one case against the file at path (st_open, store_open, store_read). */
static void check_file(const corpus_case *c, const char *path, const char *where) {
    st_file *f = (st_file *)1;
    al_err_clear();
    int rc = st_open(path, &f);
    if (c->kind == PARSE_ERR) {
        CHECK(rc != AL_OK && f == NULL, "%s (%s): opened, want an error with '%s'", c->file, where, c->want);
        if (rc != AL_OK) check_msg(c, where, path);
        return;
    }
    CHECK(rc == AL_OK, "%s (%s): %s", c->file, where, al_errmsg());
    st_close(rc == AL_OK ? f : NULL);
    if (c->kind == PARSE_OK) return;
    Store *s = NULL;
    CHECK_OK(store_open(path, &s));
    if (!s) return;
    char w[1024];
    while (al_warn_pop(w, sizeof w)) {}
    Mat *m = NULL;
    rc = store_read(s, c->tensor, &m);
    if (c->kind == READ_ERR) {
        CHECK(rc != AL_OK && m == NULL, "%s (%s): read '%s', want an error", c->file, where, c->tensor);
        if (rc != AL_OK) check_msg(c, where, c->tensor);
    } else {
        CHECK(rc == AL_OK && m != NULL, "%s (%s): %s", c->file, where, al_errmsg());
        bool got = al_warn_pop(w, sizeof w);
        CHECK(got && strstr(w, c->want) != NULL, "%s (%s): want warning '%s', got '%s'", c->file, where, c->want, got ? w : "");
        CHECK(!al_warn_pop(w, sizeof w), "one warning only");
        if (m) CHECK(isnan(m->data[2]) && isinf(m->data[5]) && m->data[0] == 1, "the values are passed through");
    }
    mat_free(m);
    store_free(s);
}

static bool same_file(const char *path, const image *im) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    uint8_t *b = malloc(im->n + 2);
    size_t n = fread(b, 1, im->n + 1, fp);
    fclose(fp);
    bool same = n == im->n && (n == 0 || memcmp(b, im->b, n) == 0);
    free(b);
    return same;
}

static void write_image(const char *path, const image *im) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL, "cannot write %s", path);
    if (!fp) return;
    CHECK(fwrite(im->b, 1, im->n, fp) == im->n, "short write %s", path);
    fclose(fp);
}

static void test_corpus(void) {
    const char *src = getenv("ATTNLAB_SRC");
    char cdir[4096] = "";
    struct stat sb;
    if (src) snprintf(cdir, sizeof cdir, "%s/tests/corpus", src);
    if (cdir[0] && stat(cdir, &sb) != 0) {
        printf("note: %s is not there; checking the generated files only\n", cdir);
        cdir[0] = 0;
    }
    mkdir(tpath("corpus", NULL), 0755);
    for (size_t i = 0; i < N_CASES; i++) {
        const corpus_case *c = &cases[i];
        image im = build(c->file);
        CHECK(im.b != NULL, "%s: no builder", c->file);
        if (!im.b) continue;
        /* from memory: same verdict, same message (named after the given path) */
        st_file *f = NULL;
        al_err_clear();
        int rc = st_parse_buffer(c->file, im.b, im.n, &f);
        if (c->kind == PARSE_ERR) {
            CHECK(rc != AL_OK && f == NULL, "%s (buffer): parsed", c->file);
            if (rc != AL_OK) check_msg(c, "buffer", c->file);
        } else {
            CHECK(rc == AL_OK, "%s (buffer): %s", c->file, al_errmsg());
            st_close(f);
        }
        LLVMFuzzerTestOneInput(im.b, im.n);        /* aborts if a promise of the reader breaks */
        /* written to a file */
        const char *p = tpath("corpus", c->file);
        write_image(p, &im);
        check_file(c, p, "tmp");
        /* the committed copy */
        if (cdir[0]) {
            char cp[4400];
            snprintf(cp, sizeof cp, "%s/%s", cdir, c->file);
            CHECK(same_file(cp, &im), "%s differs from what the generator makes: run test_malformed --write-corpus %s",
                  cp, cdir);
            check_file(c, cp, "corpus");
        }
        free(im.b);
    }
    /* every committed file is in the table */
    DIR *d = cdir[0] ? opendir(cdir) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        /* fuzz-findings/: reproducers of other readers' fuzz findings (see its README); gguf/: test_gguf_corpus's */
        if (de->d_name[0] == '.' || strcmp(de->d_name, "README.md") == 0 || strcmp(de->d_name, "fuzz-findings") == 0 ||
            strcmp(de->d_name, "gguf") == 0) continue;
        bool known = false;
        for (size_t i = 0; i < N_CASES && !known; i++) known = strcmp(cases[i].file, de->d_name) == 0;
        CHECK(known, "tests/corpus/%s is not in test_malformed.c's table", de->d_name);
    }
    if (d) closedir(d);
    /* paths that are not files */
    st_file *f = NULL;
    CHECK_ERR(st_open(tpath("no-such.safetensors", NULL), &f), "no-such.safetensors: cannot open");
    CHECK_ERR(st_open(tpath("corpus", NULL), &f), "not a regular file");
}

/* A deterministic small fuzz run in the normal suite: every corpus image of at most 600 bytes,
 * cut at every length and with each header byte replaced by a few interesting values, through
 * the fuzz target's checks (under ASan in the sanitizer build). */
static void test_mutations(void) {
    static const uint8_t subst[] = {0x00, '"', '9', '-', '}', ']', ',', 0xff, '\n', 'e'};
    size_t runs = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        image im = build(cases[i].file);
        if (!im.b || im.n > 600) { free(im.b); continue; }
        uint8_t *m = malloc(im.n ? im.n : 1);
        for (size_t len = 0; len <= im.n; len++, runs++) {
            memcpy(m, im.b, len);                  /* a fresh allocation-sized copy: ASan sees overreads */
            uint8_t *exact = malloc(len ? len : 1);
            memcpy(exact, m, len);
            LLVMFuzzerTestOneInput(exact, len);
            free(exact);
        }
        for (size_t k = 0; k < im.n; k++)
            for (size_t v = 0; v < sizeof subst; v++, runs++) {
                memcpy(m, im.b, im.n);
                m[k] = subst[v];
                LLVMFuzzerTestOneInput(m, im.n);
            }
        free(m);
        free(im.b);
    }
    CHECK(runs > 10000, "mutation runs: %zu", runs);
}

/* Writes every case into out_dir and a README table (for tests/corpus/). */
static int write_corpus(const char *out_dir) {
    mkdir(out_dir, 0755);
    printf("| file | what it is | expected | message contains |\n|---|---|---|---|\n");
    for (size_t i = 0; i < N_CASES; i++) {
        image im = build(cases[i].file);
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", out_dir, cases[i].file);
        write_image(p, &im);
        free(im.b);
        static const char *kinds[] = {"parse error", "parses", "read error", "read warning"};
        printf("| `%s` | %s | %s | %s |\n", cases[i].file, cases[i].what, kinds[cases[i].kind],
               cases[i].want ? cases[i].want : "");
    }
    return check_fail_n ? 1 : 0;
}

/* ================================================================ model folders */

static void write_text(const char *path, const char *text) { CHECK_OK(al_write_file_atomic(path, text, strlen(text))); }

static void add_mat(st_writer *w, const char *name, size_t r, size_t c, float fill) {
    Mat *m = mat_new(r, c);
    for (size_t i = 0; i < r * c; i++) m->data[i] = fill;
    CHECK_OK(st_writer_add_mat(w, name, DT_F32, m));
    mat_free(m);
}

/* Llama attention tensors of layer L (hidden 32, 4 heads, kv heads kv, head dim 8). */
static void add_llama_layer(st_writer *w, int L, int kv, size_t k_rows) {
    char n[128];
    snprintf(n, sizeof n, "model.layers.%d.self_attn.q_proj.weight", L); add_mat(w, n, 32, 32, 1);
    snprintf(n, sizeof n, "model.layers.%d.self_attn.k_proj.weight", L); add_mat(w, n, k_rows ? k_rows : (size_t)kv * 8, 32, 1);
    snprintf(n, sizeof n, "model.layers.%d.self_attn.v_proj.weight", L); add_mat(w, n, (size_t)kv * 8, 32, 1);
    snprintf(n, sizeof n, "model.layers.%d.self_attn.o_proj.weight", L); add_mat(w, n, 32, 32, 1);
}

/* Writes <tmp>/sub/config.json and model.safetensors (w may be NULL: no weights file). */
static const char *model_dir(const char *sub, const char *config, st_writer *w) {
    mkdir(tpath(sub, NULL), 0755);
    if (config) write_text(tpath(sub, "config.json"), config);
    if (w) { CHECK_OK(st_writer_write(w, tpath(sub, "model.safetensors"))); st_writer_free(w); }
    return tpath(sub, NULL);
}

static const char *llama_cfg =
    "{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
    "\"num_hidden_layers\": 2}";

/* model_open fails with `want` in a message that also names `name`. */
static void expect_open_err(const char *path, const char *want, const char *name) {
    Model *m = (Model *)1;
    int rc = model_open(path, &m);
    CHECK(rc != AL_OK && m == NULL, "model_open(%s) succeeded, want '%s'", path, want);
    if (rc == AL_OK) { model_free(m); return; }
    CHECK(strstr(al_errmsg(), want) != NULL, "model_open(%s): want '%s', got: %s", path, want, al_errmsg());
    CHECK(!name || strstr(al_errmsg(), name) != NULL, "model_open(%s): the message does not name %s: %s", path, name, al_errmsg());
    CHECK(strchr(al_errmsg(), '\n') == NULL, "one line: %s", al_errmsg());
}

static void test_models(void) {
    /* layer 1's tensors are absent */
    st_writer *w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    const char *p = model_dir("missing", llama_cfg, w);
    expect_open_err(p, "tensor 'model.layers.1.self_attn.q_proj.weight' not found in", "model.safetensors");
    /* k_proj with 3 KV heads' rows where the config says 2 */
    w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    add_llama_layer(w, 1, 2, 24);
    p = model_dir("wrongshape", llama_cfg, w);
    expect_open_err(p, "tensor 'model.layers.1.self_attn.k_proj.weight' has shape [24, 32] but the config "
                    "(llama, 4 heads, 2 KV heads, hidden 32) needs [16, 32]", NULL);
    /* a 3-D attention tensor */
    w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    float z[32 * 32] = {0};
    size_t sh3[3] = {2, 16, 32};
    CHECK_OK(st_writer_add(w, "model.layers.1.self_attn.q_proj.weight", DT_F32, 3, sh3, z, sizeof z));
    p = model_dir("threed", llama_cfg, w);
    expect_open_err(p, "tensor 'model.layers.1.self_attn.q_proj.weight' has 3 dims, expected a matrix", NULL);
    /* no config.json; config.json that is not JSON / not an object */
    w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    p = model_dir("noconfig", NULL, w);
    expect_open_err(p, "no config.json", p);
    p = model_dir("badjson", "{\"model_type\": \"llama\", ", NULL);
    expect_open_err(p, "not valid JSON", "badjson/config.json");
    p = model_dir("arrayjson", "[\"llama\"]", NULL);
    expect_open_err(p, "not a JSON object", "arrayjson/config.json");
    /* a corrupt weights file beside a good config: the message names the file */
    p = model_dir("corrupt", llama_cfg, NULL);
    CHECK_OK(al_write_file_atomic(tpath("corrupt", "model.safetensors"), "\x08\0\0\0\0\0\0\0{\"a\":1} ", 16));
    expect_open_err(p, "tensor 'a': header entry is not an object", "corrupt/model.safetensors");
    /* a folder with a config and no weights */
    p = model_dir("noweights", llama_cfg, NULL);
    expect_open_err(p, "no *.safetensors file", "noweights");
    /* a .safetensors path opens with the config beside it */
    w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    add_llama_layer(w, 1, 2, 0);
    model_dir("asfile", llama_cfg, w);
    Model *m = NULL;
    CHECK_OK(model_open(tpath("asfile", "model.safetensors"), &m));
    if (m) CHECK(m->cfg.n_layers == 2 && m->cfg.dtype == DT_F32, "opened through the file");
    model_free(m);
}

/* ---------------------------------------------------------------- configs */

static void expect_cfg_err(const char *json, const char *want) {
    ModelConfig c;
    int rc = model_config_parse(json, "test/config.json", &c);
    CHECK(rc != AL_OK, "config accepted, want '%s': %s", want, json);
    if (rc == AL_OK) return;
    CHECK(strstr(al_errmsg(), want) != NULL, "want '%s', got: %s", want, al_errmsg());
    CHECK(strstr(al_errmsg(), "test/config.json") != NULL, "names the file: %s", al_errmsg());
    CHECK(strchr(al_errmsg(), '\n') == NULL, "one line: %s", al_errmsg());
}

static void test_configs(void) {
    expect_cfg_err("{\"model_type\": \"mamba\", \"hidden_size\": 8}", "model_type 'mamba' is not a family attnlab knows");
    expect_cfg_err("{\"architectures\": [\"FooForCausalLM\"], \"hidden_size\": 8}", "'FooForCausalLM' is not a family");
    expect_cfg_err("{\"hidden_size\": 8, \"num_attention_heads\": 2}",
                   "cannot tell the model family: no \"model_type\" and no \"architectures\"");
    expect_cfg_err("{\"model_type\": 7}", "cannot tell the model family");
    expect_cfg_err("{\"model_type\": \"qwen3\", \"hidden_size\": 8}", "a qwen3 config needs num_attention_heads");
    expect_cfg_err("{\"model_type\": \"gemma3\", \"vision_config\": {}}", "text_config");   /* a tower needs its text_config */
    expect_cfg_err("{\"model_type\": \"llama\"}", "a llama config needs hidden_size, num_attention_heads, "
                   "num_hidden_layers, which are missing");
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": 8, \"num_attention_heads\": 2}",
                   "a llama config needs num_hidden_layers, which is missing");
    expect_cfg_err("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 2, "
                   "\"num_hidden_layers\": 1, \"q_lora_rank\": 16}",
                   "a deepseek_v3 config needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim");
    expect_cfg_err("{\"model_type\": \"gpt2\", \"n_head\": 2, \"n_layer\": 1}", "a gpt2 config needs n_embd");
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4, "
                   "\"num_key_value_heads\": 3, \"num_hidden_layers\": 1}", "num_key_value_heads 3 must divide num_attention_heads 4");
    expect_cfg_err("{\"model_type\": \"mistral\", \"hidden_size\": 32, \"num_attention_heads\": 4, \"head_dim\": 5, "
                   "\"num_hidden_layers\": 1}", "the RoPE head dim 5 must be even");
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": 0, \"num_attention_heads\": 4, \"num_hidden_layers\": 1}",
                   "must be positive");
    expect_cfg_err("{\"model_type\": \"gpt2\", \"n_embd\": 10, \"n_head\": 4, \"n_layer\": 1}",
                   "n_embd 10 is not a multiple of n_head 4");
    /* negative or absurd dims are refused by name, not cast into huge sizes */
    expect_cfg_err("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
                   "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": -4, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8}",
                   "qk_nope_head_dim");
    expect_cfg_err("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 1,"
                   "\"q_lora_rank\": -3, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8}",
                   "q_lora_rank");
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": 1e20, \"num_attention_heads\": 4, \"num_hidden_layers\": 1}",
                   "hidden_size");
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4.5, \"num_hidden_layers\": 1}",
                   "num_attention_heads");
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": \"32\", \"num_attention_heads\": 4, \"num_hidden_layers\": 1}",
                   "hidden_size");
    /* what is accepted: architectures alone, null q_lora_rank */
    ModelConfig c;
    CHECK_OK(model_config_parse("{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 32, "
                                "\"num_attention_heads\": 4, \"num_hidden_layers\": 1}", "x", &c));
    CHECK(c.family == FAM_MISTRAL && strcmp(c.model_type, "mistral") == 0 && c.n_kv_heads == 4, "architectures only");
    CHECK_OK(model_config_parse("{\"model_type\": \"kimi_k2\", \"hidden_size\": 64, \"num_attention_heads\": 2, "
                                "\"num_hidden_layers\": 1, \"q_lora_rank\": null, \"kv_lora_rank\": 16, "
                                "\"qk_nope_head_dim\": 4, \"qk_rope_head_dim\": 8, \"v_head_dim\": 8}", "x", &c));
    CHECK(c.family == FAM_KIMI_K2 && cfg_is_mla(&c) && c.q_lora_rank == 0, "kimi_k2, null q_lora_rank");
    /* null reads as absent, as Hugging Face reads it: KV heads = heads, head_dim = hidden / heads */
    CHECK_OK(model_config_parse("{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4, "
                                "\"num_key_value_heads\": null, \"head_dim\": null, \"num_hidden_layers\": 1}", "x", &c));
    CHECK(c.n_kv_heads == 4 && c.qk_rope_dim == 8 && c.v_dim == 8, "null fields: kv %d, head dim %d", c.n_kv_heads, c.qk_rope_dim);
    expect_cfg_err("{\"model_type\": \"llama\", \"hidden_size\": null, \"num_attention_heads\": 4, \"num_hidden_layers\": 1}",
                   "a llama config needs hidden_size, which is missing");
}

/* ---------------------------------------------------------------- warnings and FP8 through a model */

static void test_model_reads(void) {
    char w_[1024];
    while (al_warn_pop(w_, sizeof w_)) {}
    /* NaN in layer 1's o_proj: opening does not read it; the view does and warns */
    st_writer *w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    char n[128];
    snprintf(n, sizeof n, "model.layers.1.self_attn.q_proj.weight"); add_mat(w, n, 32, 32, 1);
    snprintf(n, sizeof n, "model.layers.1.self_attn.k_proj.weight"); add_mat(w, n, 16, 32, 1);
    snprintf(n, sizeof n, "model.layers.1.self_attn.v_proj.weight"); add_mat(w, n, 16, 32, 1);
    Mat *o = mat_new(32, 32);
    *mat_at(o, 3, 17) = NAN;
    *mat_at(o, 30, 1) = -INFINITY;
    CHECK_OK(st_writer_add_mat(w, "model.layers.1.self_attn.o_proj.weight", DT_F32, o));
    mat_free(o);
    Model *m = NULL;
    CHECK_OK(model_open(model_dir("nan", llama_cfg, w), &m));
    if (m) {
        Mat *v = NULL;
        CHECK_OK(model_head(m, HK_O, 0, 0, PART_ALL, &v));
        mat_free(v);
        CHECK(!al_warn_pop(w_, sizeof w_), "a clean layer warns: %s", w_);
        /* one head alone reads only its block (o_proj columns 0-15, which hold one bad value); the
           warning counts the whole tensor's, once */
        CHECK_OK(model_head(m, HK_O, 1, 0, PART_ALL, &v));
        mat_free(v);
        bool got = al_warn_pop(w_, sizeof w_);
        CHECK(got && strstr(w_, "tensor 'model.layers.1.self_attn.o_proj.weight' has 2 NaN/Inf values (first at [3, 17])"),
              "warning: %s", got ? w_ : "(none)");
        /* the other head, then the whole layer: the same tensor again, no second warning */
        CHECK_OK(model_head(m, HK_O, 1, 1, PART_ALL, &v));
        mat_free(v);
        CHECK_OK(model_layer_load(m, 1));
        CHECK(!al_warn_pop(w_, sizeof w_), "a tensor warns once: %s", w_);
        model_free(m);
    }
    /* FP8 DeepSeek whose kv_b_proj has no scales: open succeeds (shapes are right), the view fails */
    w = st_writer_new();
    Mat *a = mat_new(24, 40), *b = mat_new(42, 20), *oo = mat_new(40, 18), *q = mat_new(36, 40);
    CHECK_OK(st_writer_add_fp8(w, "model.layers.0.self_attn.q_proj.weight", q));
    CHECK_OK(st_writer_add_fp8(w, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", a));
    size_t sh[2] = {42, 20};
    uint8_t *raw = calloc(42 * 20, 1);
    CHECK_OK(st_writer_add(w, "model.layers.0.self_attn.kv_b_proj.weight", DT_F8_E4M3, 2, sh, raw, 42 * 20));
    free(raw);
    CHECK_OK(st_writer_add_fp8(w, "model.layers.0.self_attn.o_proj.weight", oo));
    mat_free(a); mat_free(b); mat_free(oo); mat_free(q);
    CHECK_OK(model_open(model_dir("fp8noscale", "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 40, "
                                  "\"num_attention_heads\": 3, \"num_hidden_layers\": 1, \"kv_lora_rank\": 20, "
                                  "\"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 6}", w), &m));
    if (m) {
        Mat *v = NULL;
        CHECK_ERR(model_head(m, HK_V, 0, 0, PART_ALL, &v),
                  "FP8 tensor 'model.layers.0.self_attn.kv_b_proj.weight' has no block scales "
                  "'model.layers.0.self_attn.kv_b_proj.weight_scale_inv'");
        CHECK_ERR(model_layer_load(m, 0), "has no block scales");
        CHECK_OK(model_head(m, HK_O, 0, 2, PART_ALL, &v));
        mat_free(v);
        model_free(m);
    }
    /* an attention weight stored as integers: the config and shapes are fine, the view is refused */
    w = st_writer_new();
    char nm[128];
    int32_t *ints = calloc(32 * 32, sizeof(int32_t));
    size_t ish[2] = {32, 32};
    CHECK_OK(st_writer_add(w, "model.layers.0.self_attn.q_proj.weight", DT_I32, 2, ish, ints, 32 * 32 * 4));
    free(ints);
    snprintf(nm, sizeof nm, "model.layers.0.self_attn.k_proj.weight"); add_mat(w, nm, 16, 32, 1);
    snprintf(nm, sizeof nm, "model.layers.0.self_attn.v_proj.weight"); add_mat(w, nm, 16, 32, 1);
    snprintf(nm, sizeof nm, "model.layers.0.self_attn.o_proj.weight"); add_mat(w, nm, 32, 32, 1);
    CHECK_OK(model_open(model_dir("intweights", "{\"model_type\": \"llama\", \"hidden_size\": 32, "
                                  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 1}", w), &m));
    if (m) {
        Mat *v = NULL;
        CHECK_ERR(model_head(m, HK_Q, 0, 1, PART_ALL, &v), "tensor 'model.layers.0.self_attn.q_proj.weight' is I32, not a float weight");
        CHECK(v == NULL, "no view");
        model_free(m);
    }
    /* Qwen2 with a q bias shorter than the config implies: an error, not a read past its end */
    w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    Mat *qb = mat_new(1, 12), *kb = mat_new(1, 16);
    CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.q_proj.bias", DT_F32, qb));
    CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.k_proj.bias", DT_F32, kb));
    mat_free(qb);
    mat_free(kb);
    CHECK_OK(model_open(model_dir("qwen_shortbias", "{\"model_type\": \"qwen2\", \"hidden_size\": 32, "
                                  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 1}", w), &m));
    if (m) {
        float *bias = NULL;
        size_t nb = 0;
        CHECK_OK(model_head_bias(m, HK_Q, 0, 0, &bias, &nb));
        CHECK(nb == 8, "head 0's bias fits");
        free(bias);
        CHECK_ERR(model_head_bias(m, HK_Q, 0, 3, &bias, &nb), "bias 'model.layers.0.self_attn.q_proj.bias' has 12 values");
        CHECK(bias == NULL && nb == 0, "nothing returned");
        model_free(m);
    }
    /* Qwen2 without its bias tensors: the bias read names the tensor */
    w = st_writer_new();
    add_llama_layer(w, 0, 2, 0);
    CHECK_OK(model_open(model_dir("qwen_nobias", "{\"model_type\": \"qwen2\", \"hidden_size\": 32, "
                                  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_hidden_layers\": 1}", w), &m));
    if (m) {
        float *bias = NULL;
        size_t nb = 0;
        CHECK_ERR(model_head_bias(m, HK_K, 0, 1, &bias, &nb), "tensor 'model.layers.0.self_attn.k_proj.bias' not found");
        model_free(m);
    }
}

/* ================================================================ llama2.c */

/* A llama2.c v0 file: header ints, then `floats` zero floats. */
static const char *write_bin(const char *name, const int32_t h[7], size_t floats) {
    const char *p = tpath(name, NULL);
    FILE *fp = fopen(p, "wb");
    fwrite(h, 4, 7, fp);
    float z = 0;
    for (size_t i = 0; i < floats; i++) fwrite(&z, 4, 1, fp);
    fclose(fp);
    return p;
}

/* Floats a llama2.c checkpoint with header h holds (shared classifier). */
static size_t bin_floats(const int32_t h[7]) {
    size_t dim = (size_t)h[0], hid = (size_t)h[1], L = (size_t)h[2], hs = dim / (size_t)h[3], nkv = (size_t)h[4] * hs;
    size_t V = (size_t)(h[5] < 0 ? -h[5] : h[5]), seq = (size_t)h[6];
    return V * dim + L * (dim + dim * dim + 2 * nkv * dim + dim * dim + dim + 3 * hid * dim) + dim + seq * hs +
           (h[5] < 0 ? V * dim : 0);
}

static void test_llama2c(void) {
    const int32_t good[7] = {16, 24, 2, 4, 2, 32, 8};
    const char *p = write_bin("good.bin", good, bin_floats(good));
    Model *m = NULL;
    CHECK_OK(model_open(p, &m));
    if (m) {
        CHECK(m->cfg.family == FAM_LLAMA2C && m->cfg.n_kv_heads == 2 && m->cfg.rope == ROPE_INTERLEAVED, "llama2c cfg");
        Mat *v = NULL;
        CHECK_OK(model_head(m, HK_K, 1, 1, PART_ALL, &v));
        CHECK(v && v->rows == 16 && v->cols == 4, "K view of a llama2.c model");
        mat_free(v);
        model_free(m);
    }
    const int32_t untied[7] = {16, 24, 2, 4, 2, -32, 8};
    p = write_bin("untied.bin", untied, bin_floats(untied));
    CHECK_OK(model_open(p, &m));
    if (m) { CHECK(!m->cfg.tie_embeddings && store_has(m->store, "lm_head.weight"), "negative vocab: own classifier"); model_free(m); }

    /* shorter than the header */
    p = tpath("tiny.bin", NULL);
    write_text(p, "1234567890");
    expect_open_err(p, "truncated: a llama2.c checkpoint starts with a 28-byte header", "tiny.bin");
    /* the weights cut short (one float missing); the untied classifier missing */
    p = write_bin("cut.bin", good, bin_floats(good) - 1);
    expect_open_err(p, "truncated", "cut.bin");
    p = write_bin("cut2.bin", untied, bin_floats(good));
    expect_open_err(p, "truncated", "cut2.bin");
    /* nonsense headers */
    p = tpath("text.bin", NULL);
    write_text(p, "This is not a checkpoint at all, just some text.");
    expect_open_err(p, "is not a plausible size (not a llama2.c v0 checkpoint?)", "text.bin");
    static const struct { int32_t h[7]; const char *want; } bad[] = {
        {{0, 24, 2, 4, 2, 32, 8}, "dim = 0 is not a plausible size"},
        {{16, 24, -2, 4, 2, 32, 8}, "n_layers = -2"},
        {{16, 24, 2, 4, 2, 32, 0}, "seq_len = 0"},
        {{16, 24, 2, 3, 1, 32, 8}, "dim 16 is not a multiple of n_heads 3"},
        {{16, 24, 2, 4, 3, 32, 8}, "n_kv_heads 3 does not divide n_heads 4"},
        {{12, 24, 2, 4, 2, 32, 8}, "head size 3 is odd"},
        {{16, 24, 2, 4, 2, INT32_MIN, 8}, "vocab_size"},
        {{16, 24, 2, 4, 2, -(1 << 30), 8}, "vocab_size"},
        {{16, 24, 1 << 24, 4, 2, 32, 8}, "truncated"},          /* must fail fast, not lay out 16M layers */
        {{1 << 24, 1 << 24, 1 << 24, 1 << 12, 1 << 12, 1 << 24, 1 << 24}, "truncated"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.bin", i);
        p = write_bin(name, bad[i].h, 64);
        clock_t t0 = clock();
        expect_open_err(p, bad[i].want, name);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        CHECK(secs < 1.0, "%s took %.2f s to refuse", name, secs);
    }
}

int main(int argc, char **argv) {
    snprintf(tu_dir, sizeof tu_dir, "%s", test_tmpdir());
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    test_corpus();
    test_mutations();
    test_models();
    test_configs();
    test_model_reads();
    test_llama2c();
    return check_done();
}
