/* test_safetensors.c -- the safetensors writer and reader: every dtype written and read back
 * bit-exactly (F32 with NaN payloads and -0, F16, BF16, F8_E4M3 raw, F64, I32, U8, I8, I64,
 * BOOL), header fields (shape, ndim, offsets, 8-byte alignment, metadata), 0-d, empty and 3-D
 * tensors, float conversions through st_writer_add_mat, FP8 quantization through
 * st_writer_add_fp8, writer errors, atomic writes, and st_parse_buffer == st_open. */
#include "check.h"
#include "safetensors.h"
#include "store.h"

#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

static char dir[2048];

static char *tmp_path(const char *name) {
    static char buf[8][4200];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Reads a whole file into a malloc'ed buffer (caller frees). */
static uint8_t *slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, fp);
    fclose(fp);
    return b;
}

/* ---------------------------------------------------------------- raw bytes of every dtype */

typedef struct {
    const char *name;
    dt_type dt;
    int ndim;
    size_t shape[3];
    uint8_t *bytes;
    size_t nbytes;
} raw_t;

/* Fills n bytes with a pattern that differs per tensor and per byte. */
static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *b = malloc(n ? n : 1);
    uint32_t x = 2463534242u ^ seed;
    for (size_t i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; b[i] = (uint8_t)x; }
    return b;
}

static void test_raw_roundtrip(void) {
    /* F32 with special values: NaN payloads, -0, subnormals, Inf must all come back bit for bit */
    static const uint32_t specials[8] = {0x7fc00001u, 0xffbfffffu, 0x80000000u, 0x00000001u,
                                         0x7f800000u, 0xff800000u, 0x3f800000u, 0x7f7fffffu};
    raw_t t[] = {
        {"f32.special", DT_F32, 2, {2, 4}, NULL, 32},
        {"f16.all", DT_F16, 1, {4096}, NULL, 8192},
        {"bf16.all", DT_BF16, 2, {64, 64}, NULL, 8192},
        {"fp8.all", DT_F8_E4M3, 2, {16, 16}, NULL, 256},
        {"f64.x", DT_F64, 1, {5}, NULL, 40},
        {"i32.ids", DT_I32, 2, {3, 5}, NULL, 60},
        {"u8.bytes", DT_U8, 1, {257}, NULL, 257},
        {"i8.bytes", DT_I8, 3, {2, 3, 5}, NULL, 30},
        {"i64.x", DT_I64, 1, {3}, NULL, 24},
        {"bool.mask", DT_BOOL, 1, {7}, NULL, 7},
        {"scalar", DT_F32, 0, {0}, NULL, 4},
        {"empty", DT_F16, 2, {0, 3}, NULL, 0},
    };
    size_t nt = sizeof t / sizeof *t;
    for (size_t i = 0; i < nt; i++) t[i].bytes = pattern(t[i].nbytes, (unsigned)i);
    memcpy(t[0].bytes, specials, 32);
    for (int i = 0; i < 256; i++) t[3].bytes[i] = (uint8_t)i;           /* every FP8 pattern */
    for (int i = 0; i < 4096; i++) { uint16_t h = (uint16_t)(i * 16 + 3); memcpy(t[1].bytes + 2 * i, &h, 2); }

    st_writer *w = st_writer_new();
    CHECK(w != NULL, "writer");
    for (size_t i = 0; i < nt; i++)
        CHECK_OK(st_writer_add(w, t[i].name, t[i].dt, t[i].ndim, t[i].shape, t[i].bytes, t[i].nbytes));
    CHECK_OK(st_writer_meta(w, "format", "pt"));
    CHECK_OK(st_writer_meta(w, "note", "quotes \" and \\ and unicode \xc3\xa9"));
    size_t total = 0;
    for (size_t i = 0; i < nt; i++) total += t[i].nbytes;
    CHECK(st_writer_bytes(w) == total, "writer bytes %zu vs %zu", st_writer_bytes(w), total);
    const char *path = tmp_path("raw.safetensors");
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);

    st_file *f = NULL;
    CHECK_OK(st_open(path, &f));
    if (!f) return;
    CHECK(strcmp(st_path(f), path) == 0, "st_path");
    CHECK(st_count(f) == nt, "count %zu", st_count(f));
    CHECK(st_meta(f, "format") && strcmp(st_meta(f, "format"), "pt") == 0, "metadata format");
    CHECK(st_meta(f, "note") && strcmp(st_meta(f, "note"), "quotes \" and \\ and unicode \xc3\xa9") == 0, "metadata escapes");
    CHECK(st_meta(f, "absent") == NULL, "absent metadata");
    CHECK(st_find(f, "nope") == NULL && st_find(f, "") == NULL, "absent tensor");
    for (size_t i = 0; i < nt; i++) {
        const st_entry *e = st_find(f, t[i].name);
        CHECK(e != NULL, "find %s", t[i].name);
        if (!e) continue;
        CHECK(strcmp(e->name, t[i].name) == 0 && e->dtype == t[i].dt && e->ndim == t[i].ndim, "%s header", t[i].name);
        for (int d = 0; d < t[i].ndim; d++) CHECK(e->shape[d] == t[i].shape[d], "%s shape[%d]", t[i].name, d);
        CHECK(e->end - e->begin == t[i].nbytes, "%s size", t[i].name);
        CHECK(st_numel(e) * dt_size(e->dtype) == t[i].nbytes, "%s numel", t[i].name);
        CHECK(t[i].nbytes == 0 || memcmp(st_data(f, e), t[i].bytes, t[i].nbytes) == 0, "%s bytes differ", t[i].name);
    }
    /* entries come sorted by offset, back to back */
    size_t off = 0;
    for (size_t i = 0; i < st_count(f); i++) {
        const st_entry *e = st_entry_at(f, i);
        CHECK(e->begin == off, "entry %zu begins at %zu, want %zu", i, e->begin, off);
        off = e->end;
    }
    CHECK(st_entry_at(f, st_count(f)) == NULL, "entry past the end");
    /* the header is padded so the data section starts 8-byte aligned */
    CHECK(((uintptr_t)st_data(f, st_entry_at(f, 0)) % 8) == 0, "data section alignment");
    size_t n = 0;
    uint8_t *img = slurp(path, &n);
    CHECK(img != NULL, "cannot read %s back", path);
    if (!img) { st_close(f); return; }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | img[i];
    CHECK(hlen % 8 == 0 && 8 + hlen + total == n, "file layout: header %llu, data %zu, size %zu",
          (unsigned long long)hlen, total, n);
    /* the in-memory parser sees the same thing */
    st_file *g = NULL;
    CHECK_OK(st_parse_buffer("mem", img, n, &g));
    if (g) {
        CHECK(st_count(g) == nt && strcmp(st_path(g), "mem") == 0, "buffer parse");
        const st_entry *e = st_find(g, "u8.bytes");
        CHECK(e && memcmp(st_data(g, e), t[6].bytes, 257) == 0, "buffer bytes");
        st_release(g, e);                    /* no-op on a buffer; must not crash */
        st_close(g);
    }
    free(img);
    st_release(f, st_find(f, "f16.all"));
    CHECK(memcmp(st_data(f, st_find(f, "f16.all")), t[1].bytes, 8192) == 0, "bytes after release");
    st_close(f);
    for (size_t i = 0; i < nt; i++) free(t[i].bytes);
}

/* ---------------------------------------------------------------- float conversions via Mat */

static void test_mat_roundtrip(void) {
    /* values exactly representable in F16, BF16 and E4M3 come back exactly, through the store */
    static const float exact[] = {0, 1, -1, 0.5f, 1.125f, -3.5f, 448, -448, 0.015625f, 256, 96, -0.25f};
    Mat *m = mat_new(3, 4);
    memcpy(m->data, exact, sizeof exact);
    /* values that need rounding: ties go to even */
    Mat *r = mat_new(1, 3);
    r->data[0] = 1.0f + ldexpf(1, -11);      /* F16 tie -> 1 */
    r->data[1] = u2f(0x3f818000u);           /* BF16 tie -> 0x3f82 */
    r->data[2] = 1.0f + 3 * ldexpf(1, -11);  /* F16 tie -> 1 + 2^-9 */
    st_writer *w = st_writer_new();
    CHECK_OK(st_writer_add_mat(w, "m.f32", DT_F32, m));
    CHECK_OK(st_writer_add_mat(w, "m.f16", DT_F16, m));
    CHECK_OK(st_writer_add_mat(w, "m.bf16", DT_BF16, m));
    CHECK_OK(st_writer_add_mat(w, "r.f16", DT_F16, r));
    CHECK_OK(st_writer_add_mat(w, "r.bf16", DT_BF16, r));
    /* E4M3 raw bytes + unit scale: the store dequantizes to the exact values */
    uint8_t q[12];
    for (int i = 0; i < 12; i++) q[i] = dt_f32_to_e4m3(exact[i]);
    size_t sh[2] = {3, 4}, one[2] = {1, 1};
    float unit = 1.0f;
    CHECK_OK(st_writer_add(w, "m.weight", DT_F8_E4M3, 2, sh, q, 12));
    CHECK_OK(st_writer_add(w, "m.weight_scale_inv", DT_F32, 2, one, &unit, 4));
    const char *path = tmp_path("mats.safetensors");
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);

    Store *s = NULL;
    CHECK_OK(store_open(path, &s));
    if (!s) { mat_free(m); mat_free(r); return; }
    static const char *names[] = {"m.f32", "m.f16", "m.bf16", "m.weight"};
    for (int k = 0; k < 4; k++) {
        Mat *b = NULL;
        CHECK_OK(store_read(s, names[k], &b));
        if (!b) continue;
        CHECK(b->rows == 3 && b->cols == 4, "%s shape", names[k]);
        size_t bad = 0;
        for (int i = 0; i < 12; i++) bad += f2u(b->data[i]) != f2u(exact[i]);
        CHECK(bad == 0, "%s: %zu values not exact", names[k], bad);
        mat_free(b);
    }
    Mat *b = NULL;
    CHECK_OK(store_read(s, "r.f16", &b));
    if (b) {
        CHECK(b->rows == 1 && b->cols == 3, "a 1-row Mat is written as a 1-D tensor and read as 1 x n");
        CHECK(b->data[0] == 1.0f && b->data[2] == 1.0f + ldexpf(1, -9), "F16 ties: %.9g %.9g", b->data[0], b->data[2]);
        mat_free(b);
    }
    CHECK_OK(store_read(s, "r.bf16", &b));
    if (b) { CHECK(f2u(b->data[1]) == 0x3f820000u, "BF16 tie: %08x", f2u(b->data[1])); mat_free(b); }
    const st_entry *e;
    CHECK_OK(store_entry(s, "r.f16", &e, NULL));
    CHECK(e->ndim == 1 && e->shape[0] == 3, "1-D shape");
    store_free(s);
    mat_free(m);
    mat_free(r);
}

/* st_writer_add_fp8 on a 130 x 257 matrix: the scale grid is 2 x 3, each scale is the block's
 * max |x| / 448, and every dequantized value is within half an E4M3 step of the original. */
static void test_fp8_writer(void) {
    Mat *m = mat_new(130, 257);
    for (size_t i = 0; i < 130; i++)
        for (size_t j = 0; j < 257; j++)
            m->data[i * 257 + j] = (float)((double)((i * 31 + j * 17) % 97) - 48.0) * (float)(1 + i / 128 + 4 * (j / 128));
    m->data[129 * 257 + 256] = 1000.0f;      /* the lone element of the last block sets its scale */
    st_writer *w = st_writer_new();
    CHECK_OK(st_writer_add_fp8(w, "x.weight", m));
    CHECK_ERR(st_writer_add_fp8(w, "x.weight", m), "added twice");
    const char *path = tmp_path("fp8.safetensors");
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);
    Store *s = NULL;
    CHECK_OK(store_open(path, &s));
    if (!s) { mat_free(m); return; }
    const st_entry *e, *se;
    CHECK_OK(store_entry(s, "x.weight", &e, NULL));
    CHECK_OK(store_entry(s, "x.weight_scale_inv", &se, NULL));
    CHECK(e->dtype == DT_F8_E4M3 && e->shape[0] == 130 && e->shape[1] == 257, "fp8 entry");
    CHECK(se->dtype == DT_F32 && se->ndim == 2 && se->shape[0] == 2 && se->shape[1] == 3, "scale grid 2 x 3");
    Mat *sc = NULL, *b = NULL;
    CHECK_OK(store_read(s, "x.weight_scale_inv", &sc));
    CHECK_OK(store_read(s, "x.weight", &b));
    if (sc && b) {
        CHECK(sc->data[1 * 3 + 2] == 1000.0f / 448.0f, "last block's scale = 1000/448: %.9g", sc->data[5]);
        CHECK(b->data[129 * 257 + 256] == 1000.0f, "the block max is exact: %.9g", b->data[129 * 257 + 256]);
        double worst = 0;
        for (size_t i = 0; i < 130; i++)
            for (size_t j = 0; j < 257; j++) {
                double s_ = sc->data[(i / 128) * 3 + j / 128], x = m->data[i * 257 + j], y = b->data[i * 257 + j];
                /* E4M3 has 3 mantissa bits: relative error <= 2^-4 for normals, abs 2^-10 * s below */
                double tol = fmax(fabs(x) / 16, ldexp(1, -10) * s_) * 1.0001;
                if (fabs(x - y) / tol > worst) worst = fabs(x - y) / tol;
            }
        CHECK(worst <= 1.0, "FP8 quantization error %.3g x the bound", worst);
    }
    mat_free(sc);
    mat_free(b);
    store_free(s);
    mat_free(m);
}

/* ---------------------------------------------------------------- writer errors, atomicity */

static size_t count_entries(const char *d) {
    DIR *dp = opendir(d);
    size_t n = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp)))
        if (de->d_name[0] != '.') n++;
    if (dp) closedir(dp);
    return n;
}

static void test_writer_errors(void) {
    st_writer *w = st_writer_new();
    float x[6] = {1, 2, 3, 4, 5, 6};
    size_t sh[2] = {2, 3}, big[2] = {(size_t)1 << 40, (size_t)1 << 40}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_ERR(st_writer_add(w, "a", DT_F32, 2, sh, x, 20), "tensor 'a': shape x F32 is 24 bytes, got 20");
    CHECK_ERR(st_writer_add(w, "a", DT_F32, 2, big, x, 24), "overflow");
    CHECK_ERR(st_writer_add(w, "a", DT_F32, 9, nine, x, 4), "at most 8");
    CHECK_ERR(st_writer_add(w, "a", DT_F32, -1, sh, x, 4), "dims");
    CHECK_OK(st_writer_add(w, "a", DT_F32, 2, sh, x, 24));
    CHECK_ERR(st_writer_add(w, "a", DT_F16, 1, sh, x, 4), "tensor 'a' added twice");
    x[0] = 99;                               /* the writer copied the bytes */
    /* a file in a folder that does not exist: an error naming it, nothing left behind */
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/no/such/folder/x.safetensors", dir);
    CHECK_ERR(st_writer_write(w, bad), "no/such/folder/x.safetensors");
    /* writing over an existing file replaces it atomically and leaves no temp file */
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/atomic", dir);
    mkdir(sub, 0755);
    char path[4300];
    snprintf(path, sizeof path, "%s/a.safetensors", sub);
    CHECK_OK(al_write_file_atomic(path, "old", 3));
    CHECK_OK(st_writer_write(w, path));
    CHECK(count_entries(sub) == 1, "temp files left in %s", sub);
    st_writer_free(w);
    st_file *f = NULL;
    CHECK_OK(st_open(path, &f));
    if (f) {
        const st_entry *e = st_find(f, "a");
        float y[6];
        memcpy(y, st_data(f, e), 24);
        CHECK(y[0] == 1 && y[5] == 6, "writer copied the data at add time");
        st_close(f);
    }
    /* writing into a path that is a folder fails and cleans up */
    CHECK_ERR(al_write_file_atomic(sub, "x", 1), sub);
    CHECK(count_entries(sub) == 1, "temp file left after a failed rename");
    /* an empty writer makes a valid empty file */
    w = st_writer_new();
    snprintf(path, sizeof path, "%s/empty.safetensors", sub);
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);
    CHECK_OK(st_open(path, &f));
    if (f) { CHECK(st_count(f) == 0 && st_meta(f, "x") == NULL, "empty file"); st_close(f); }
    st_writer_free(NULL);
    st_close(NULL);
}

/* Parses a header text with data_len data bytes from memory. */
static int parse_text(const char *header, size_t data_len, st_file **f) {
    size_t hl = strlen(header);
    uint8_t *b = calloc(8 + hl + data_len + 1, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    int rc = st_parse_buffer("mem.safetensors", b, 8 + hl + data_len, f);
    if (rc == AL_OK) {                                   /* the entries point into b: check, then drop */
        st_close(*f);
        *f = NULL;
    }
    free(b);
    return rc;
}

/* The reference implementation's rules the corpus (test_malformed) does not show. */
static void test_reference_rules(void) {
    st_file *f = NULL;
    /* a repeated metadata key keeps its last value (serde's HashMap); null metadata is none */
    static uint8_t buf[256];
    const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"format\":\"np\"}}";
    size_t hl = strlen(h);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    CHECK_OK(st_parse_buffer("dup.safetensors", buf, 8 + hl, &f));
    if (f) { CHECK(st_meta(f, "format") && strcmp(st_meta(f, "format"), "np") == 0, "the last value wins"); st_close(f); }
    h = "{\"__metadata__\":null}";
    hl = strlen(h);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    CHECK_OK(st_parse_buffer("null.safetensors", buf, 8 + hl, &f));
    if (f) { CHECK(st_meta(f, "format") == NULL && st_count(f) == 0, "null metadata: none"); st_close(f); }
    /* every whitespace serde_json skips, around the object; not other control bytes */
    CHECK_OK(parse_text("\t\r\n {}\t\r\n ", 0, &f));
    CHECK_ERR(parse_text("\x0c{}", 0, &f), "header is not valid JSON");
    CHECK_ERR(parse_text("{}\x0b", 0, &f), "header is not valid JSON: bytes after the JSON value");
    /* surrogate pairs and multi-byte UTF-8 are fine; overlong forms and encoded surrogates are not */
    CHECK_OK(parse_text("{\"__metadata__\":{\"k\":\"\\ud83d\\ude00 \xc3\xa9 \xf0\x9f\x98\x80\"}}", 0, &f));
    CHECK_ERR(parse_text("{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", 0, &f), "not valid UTF-8");
    CHECK_ERR(parse_text("{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}", 0, &f), "not valid UTF-8");
    CHECK_ERR(parse_text("{\"__metadata__\":{\"k\":\"\xf4\x90\x80\x80\"}}", 0, &f), "not valid UTF-8");
    CHECK_ERR(parse_text("{\"__metadata__\":{\"k\":\"\\udc00\"}}", 0, &f), "unpaired surrogate");
    /* nesting: 127 levels in an ignored member are fine, 128 are not (serde_json's limit) */
    char deep[600];
    for (int depth = 127; depth <= 128; depth++) {
        int n = snprintf(deep, sizeof deep, "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":");
        for (int i = 0; i < depth - 2; i++) deep[n++] = '[';
        for (int i = 0; i < depth - 2; i++) deep[n++] = ']';
        snprintf(deep + n, sizeof deep - (size_t)n, "}}");
        if (depth == 127) CHECK_OK(parse_text(deep, 0, &f));
        else CHECK_ERR(parse_text(deep, 0, &f), "nested more than 127 deep");
    }
    /* the header limit is the reference's 100,000,000 bytes, not 100 MiB */
    size_t big = 100000001;
    uint8_t *b = calloc(8 + big, 1);
    if (b) {
        for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)big >> (8 * i));
        CHECK_ERR(st_parse_buffer("big.safetensors", b, 8 + big, &f), "header length 100000001 is larger than");
        free(b);
    }
}

/* The VmFlags line of /proc/self/smaps for the mapping that holds address a ("" if none). */
static void vm_flags_of(const void *a, char *out, size_t cap) {
    FILE *fp = fopen("/proc/self/smaps", "r");
    char line[512];
    bool in = false;
    out[0] = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)a >= lo && (uintptr_t)a < hi;
        else if (in && strncmp(line, "VmFlags:", 8) == 0) { snprintf(out, cap, "%s", line + 8); break; }
    }
    if (fp) fclose(fp);
}

/* st_open asks for 2 MB page-cache folios on its mapping (MADV_HUGEPAGE: "hg" in VmFlags), where the
 * kernel has transparent huge pages. */
static void test_hugepage_hint(void) {
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
        printf("note: no transparent huge pages in this kernel: the mapping hint is not checked\n");
        return;
    }
    st_file *f = NULL;
    CHECK_OK(st_open(tmp_path("raw.safetensors"), &f));
    if (!f) return;
    char flags[512];
    vm_flags_of(st_data(f, st_entry_at(f, 0)), flags, sizeof flags);
    CHECK(strstr(flags, " hg") != NULL, "the safetensors mapping lacks MADV_HUGEPAGE (VmFlags:%s)", flags);
    st_close(f);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    test_raw_roundtrip();
    test_hugepage_hint();
    test_mat_roundtrip();
    test_fp8_writer();
    test_writer_errors();
    test_reference_rules();
    return check_done();
}
