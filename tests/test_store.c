/* test_store.c -- the tensor store: FP8 block-scale dequantization against hand-computed values
 * including the partial edge blocks (a 130 x 257 weight with a 2 x 3 scale grid), row reads that
 * cross a block boundary, unaligned scale tensors; sharded checkpoints (three shards + index
 * open as one store, the scales of a weight in another shard), and the errors of a bad index, a
 * tensor in two shards, a missing shard, a missing tensor. */
#include "testutil.h"
#include "store.h"

static void mkdir_p(const char *a) { mkdir(tpath(a, NULL), 0755); }

static void write_text(const char *path, const char *text) { CHECK_OK(al_write_file_atomic(path, text, strlen(text))); }

/* ---------------------------------------------------------------- FP8 edge blocks */

#define R 130
#define C 257

/* E4M3 codes of 1..8, written out by hand: 1 = 0.111.000 -> 0x38, 3 = 1.5 * 2 -> 0x44, ... */
static const uint8_t code_of[9] = {0, 0x38, 0x40, 0x44, 0x48, 0x4a, 0x4c, 0x4e, 0x50};
/* The 2 x 3 scale grid (rows 0-127 | 128-129) x (cols 0-127 | 128-255 | 256). */
static const float grid[2][3] = {{0.5f, 2.0f, 8.0f}, {0.25f, 4.0f, 16.0f}};

static int val_of(size_t i, size_t j) { return (int)((i + 2 * j) % 8) + 1; }
static float expect_at(size_t i, size_t j) { return (float)val_of(i, j) * grid[i / 128][j / 128]; }

/* Writes the 130 x 257 FP8 weight "w.weight" (+ its scales) to path; with `misalign` a 1-byte
 * tensor is put before the scales so they start at an odd offset. */
static void write_fp8(const char *path, bool misalign) {
    static uint8_t q[R * C];
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++) q[i * C + j] = code_of[val_of(i, j)];
    size_t sh[2] = {R, C}, ssh[2] = {2, 3}, one = 1;
    uint8_t pad = 7;
    st_writer *w = st_writer_new();
    CHECK_OK(st_writer_add(w, "w.weight", DT_F8_E4M3, 2, sh, q, sizeof q));
    if (misalign) CHECK_OK(st_writer_add(w, "pad", DT_U8, 1, &one, &pad, 1));
    CHECK_OK(st_writer_add(w, "w.weight_scale_inv", DT_F32, 2, ssh, grid, sizeof grid));
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);
}

static size_t count_bad(const Mat *m, size_t r0) {
    size_t bad = 0;
    for (size_t i = 0; i < m->rows; i++)
        for (size_t j = 0; j < m->cols; j++) bad += *mat_at(m, i, j) != expect_at(r0 + i, j);
    return bad;
}

static void test_fp8_blocks(bool misalign) {
    const char *path = tpath(misalign ? "fp8_odd.safetensors" : "fp8.safetensors", NULL);
    write_fp8(path, misalign);
    Store *s = NULL;
    CHECK_OK(store_open(path, &s));
    if (!s) return;
    if (misalign) {
        const st_entry *e;
        CHECK_OK(store_entry(s, "w.weight_scale_inv", &e, NULL));
        CHECK(e->begin % 4 != 0, "the scales should start unaligned (offset %zu)", e->begin);
    }
    Mat *m = NULL;
    CHECK_OK(store_read(s, "w.weight", &m));
    if (m) {
        CHECK(m->rows == R && m->cols == C, "shape %zux%zu", m->rows, m->cols);
        /* hand-computed: (i + 2j) % 8 + 1 times the block's scale */
        CHECK(*mat_at(m, 0, 0) == 0.5f, "[0,0] = 1 * 0.5: %g", *mat_at(m, 0, 0));
        CHECK(*mat_at(m, 127, 127) == 3.0f, "[127,127] = ((127+254)%%8+1=6) * 0.5: %g", *mat_at(m, 127, 127));
        CHECK(*mat_at(m, 128, 0) == 0.25f, "[128,0] = 1 * 0.25 (first row of the partial row block): %g", *mat_at(m, 128, 0));
        CHECK(*mat_at(m, 129, 0) == 0.5f, "[129,0] = 2 * 0.25: %g", *mat_at(m, 129, 0));
        CHECK(*mat_at(m, 0, 256) == 8.0f, "[0,256] = ((512)%%8+1=1) * 8: %g", *mat_at(m, 0, 256));
        CHECK(*mat_at(m, 129, 256) == 32.0f, "[129,256] = 2 * 16 (the corner block): %g", *mat_at(m, 129, 256));
        CHECK(*mat_at(m, 129, 200) == 8.0f, "[129,200] = ((129+400)%%8+1=2) * 4: %g", *mat_at(m, 129, 200));
        CHECK(*mat_at(m, 5, 130) == 4.0f, "[5,130] = ((5+260)%%8+1=2) * 2: %g", *mat_at(m, 5, 130));
        size_t bad = count_bad(m, 0), bad_tail = 0;
        for (size_t i = 128; i < R; i++)
            for (size_t j = 0; j < C; j++) bad_tail += *mat_at(m, i, j) != expect_at(i, j);
        CHECK(bad == 0, "%zu of %d dequantized values wrong (%zu in the last row block)", bad, R * C, bad_tail);
    }
    mat_free(m);
    /* rows crossing the block boundary at 128, the last partial rows alone, an empty read */
    static const size_t ranges[][2] = {{120, 10}, {127, 2}, {128, 2}, {129, 1}, {0, 130}, {64, 66}, {130, 0}};
    for (size_t k = 0; k < sizeof ranges / sizeof *ranges; k++) {
        Mat *r = NULL;
        CHECK_OK(store_read_rows(s, "w.weight", ranges[k][0], ranges[k][1], &r));
        if (!r) continue;
        CHECK(r->rows == ranges[k][1] && r->cols == C, "rows %zu+%zu shape", ranges[k][0], ranges[k][1]);
        CHECK(count_bad(r, ranges[k][0]) == 0, "rows %zu+%zu: %zu wrong", ranges[k][0], ranges[k][1], count_bad(r, ranges[k][0]));
        mat_free(r);
    }
    /* blocks of rows x columns (what one head's view reads): across both block boundaries, the
       corner block alone, one column */
    static const size_t blocks[][4] = {{120, 10, 100, 60}, {128, 2, 256, 1}, {0, 130, 7, 200}, {5, 1, 127, 2}};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
        const size_t *b = blocks[k];
        Mat *r = NULL;
        CHECK_OK(store_read_block(s, "w.weight", b[0], b[1], b[2], b[3], &r));
        if (!r) continue;
        size_t bad = 0;
        for (size_t i = 0; i < b[1]; i++)
            for (size_t j = 0; j < b[3]; j++) bad += *mat_at(r, i, j) != expect_at(b[0] + i, b[2] + j);
        CHECK(r->rows == b[1] && r->cols == b[3] && bad == 0, "block %zu+%zu x %zu+%zu: %zu wrong", b[0], b[1], b[2],
              b[3], bad);
        mat_free(r);
    }
    Mat *r = NULL;
    CHECK_ERR(store_read_block(s, "w.weight", 0, 1, 250, 8, &r), "columns 250..258 out of range (it has 257)");
    CHECK_ERR(store_read_rows(s, "w.weight", 120, 11, &r), "rows 120..131 out of range (it has 130 rows)");
    CHECK(r == NULL, "no matrix on error");
    CHECK_ERR(store_read_rows(s, "w.weight", 131, 0, &r), "out of range");
    CHECK_ERR(store_read_rows(s, "w.weight", 1, (size_t)-1, &r), "out of range");
    store_free(s);
}

/* The exposed kernel on its own: a partial last row block and column block. */
static void test_dequant_kernel(void) {
    /* 3 x 130 weight, scale grid 1 x 2: columns 128 and 129 use the second scale */
    uint8_t w[3 * 130];
    for (int i = 0; i < 3 * 130; i++) w[i] = 0x40;             /* 2.0 */
    float scale[2] = {0.5f, 3.0f}, dst[2 * 130];
    for (int i = 0; i < 2 * 130; i++) dst[i] = -1;
    dt_fp8_dequant(w, 130, scale, 2, 1, 2, 0, 130, dst, 130);
    CHECK(dst[0] == 1.0f && dst[127] == 1.0f && dst[128] == 6.0f && dst[129] == 6.0f, "row 1: %g %g %g %g",
          dst[0], dst[127], dst[128], dst[129]);
    CHECK(dst[130 + 129] == 6.0f && dst[130 + 5] == 1.0f, "row 2 written");
}

/* ---------------------------------------------------------------- shards */

static void add_f32(st_writer *w, const char *name, size_t rows, size_t cols, float base) {
    Mat *m = mat_new(rows, cols);
    for (size_t i = 0; i < rows * cols; i++) m->data[i] = base + (float)i;
    CHECK_OK(st_writer_add_mat(w, name, DT_F32, m));
    mat_free(m);
}

/* Three shards: a, b in 1; c and the FP8 weight f.weight in 2; f.weight_scale_inv, d in 3. */
static void write_shards(const char *sub) {
    mkdir_p(sub);
    st_writer *w = st_writer_new();
    add_f32(w, "a", 2, 3, 100);
    add_f32(w, "b", 4, 1, 200);
    CHECK_OK(st_writer_write(w, tpath(sub, "model-00001-of-00003.safetensors")));
    st_writer_free(w);
    w = st_writer_new();
    add_f32(w, "c", 3, 3, 300);
    uint8_t q[2 * 2] = {0x38, 0x40, 0x44, 0x48};               /* 1 2 3 4 */
    size_t sh[2] = {2, 2};
    CHECK_OK(st_writer_add(w, "f.weight", DT_F8_E4M3, 2, sh, q, 4));
    CHECK_OK(st_writer_write(w, tpath(sub, "model-00002-of-00003.safetensors")));
    st_writer_free(w);
    w = st_writer_new();
    float sc = 0.5f;
    size_t one[2] = {1, 1};
    CHECK_OK(st_writer_add(w, "f.weight_scale_inv", DT_F32, 2, one, &sc, 4));
    add_f32(w, "d", 1, 5, 400);
    CHECK_OK(st_writer_write(w, tpath(sub, "model-00003-of-00003.safetensors")));
    st_writer_free(w);
}

static const char *good_index =
    "{\"metadata\": {\"total_size\": 123}, \"weight_map\": {"
    "\"a\": \"model-00001-of-00003.safetensors\", \"b\": \"model-00001-of-00003.safetensors\","
    "\"c\": \"model-00002-of-00003.safetensors\", \"f.weight\": \"model-00002-of-00003.safetensors\","
    "\"f.weight_scale_inv\": \"model-00003-of-00003.safetensors\", \"d\": \"model-00003-of-00003.safetensors\"}}";

static void test_shards(void) {
    write_shards("sharded");
    write_text(tpath("sharded", "model.safetensors.index.json"), good_index);
    Store *s = NULL;
    CHECK_OK(store_open(tpath("sharded", NULL), &s));
    if (!s) return;
    CHECK(store_nfiles(s) == 3, "3 shards, got %zu", store_nfiles(s));
    CHECK(store_count(s) == 6, "6 tensors, got %zu", store_count(s));
    static const char *sorted[] = {"a", "b", "c", "d", "f.weight", "f.weight_scale_inv"};
    for (size_t i = 0; i < 6; i++)
        CHECK(store_name_at(s, i) && strcmp(store_name_at(s, i), sorted[i]) == 0, "name %zu = %s", i, store_name_at(s, i));
    CHECK(store_name_at(s, 6) == NULL && store_file_at(s, 3) == NULL, "past the end");
    CHECK(strcmp(store_dir(s), tpath("sharded", NULL)) == 0, "store_dir %s", store_dir(s));
    for (size_t i = 0; i < 3; i++) CHECK(strstr(store_file_at(s, i), "-of-00003.safetensors") != NULL, "file %zu", i);
    CHECK(store_has(s, "d") && !store_has(s, "e"), "store_has");
    const st_entry *e; const st_file *f;
    CHECK_OK(store_entry(s, "d", &e, &f));
    CHECK(strstr(st_path(f), "model-00003-of-00003") != NULL, "d lives in shard 3: %s", st_path(f));
    Mat *m = NULL;
    CHECK_OK(store_read(s, "a", &m));
    if (m) { CHECK(m->rows == 2 && m->cols == 3 && m->data[5] == 105, "a from shard 1"); mat_free(m); }
    CHECK_OK(store_read(s, "d", &m));
    if (m) { CHECK(m->rows == 1 && m->cols == 5 && m->data[4] == 404, "d from shard 3"); mat_free(m); }
    CHECK_OK(store_read(s, "f.weight", &m));
    if (m) {
        CHECK(m->data[0] == 0.5f && m->data[1] == 1.0f && m->data[2] == 1.5f && m->data[3] == 2.0f,
              "FP8 weight in shard 2 with its scales in shard 3: %g %g %g %g", m->data[0], m->data[1], m->data[2], m->data[3]);
        mat_free(m);
    }
    CHECK_ERR(store_read(s, "zzz", &m), "tensor 'zzz' not found in any of the 3 shards in");
    CHECK(m == NULL, "no matrix on error");
    /* page release keeps the data readable (it is re-read from the file) */
    store_release_prefix(s, "");
    CHECK_OK(store_read(s, "c", &m));
    if (m) { CHECK(m->data[8] == 308, "c after release"); mat_free(m); }
    store_free(s);

    /* a folder without an index: every *.safetensors in it, same tensors */
    mkdir_p("noindex");
    write_shards("noindex");
    CHECK_OK(store_open(tpath("noindex", NULL), &s));
    if (s) { CHECK(store_nfiles(s) == 3 && store_count(s) == 6, "no-index folder"); store_free(s); }
    /* one shard opened as a file */
    CHECK_OK(store_open(tpath("sharded", "model-00002-of-00003.safetensors"), &s));
    if (s) {
        CHECK(store_nfiles(s) == 1 && store_count(s) == 2, "single file");
        CHECK_ERR(store_read(s, "f.weight", &m), "FP8 tensor 'f.weight' has no block scales 'f.weight_scale_inv'");
        CHECK_ERR(store_read(s, "a", &m), "tensor 'a' not found in");
        store_free(s);
    }
}

static void test_shard_errors(void) {
    Store *s = (Store *)1;
    /* the index puts 'a' in shard 2, which lacks it */
    write_shards("lacks");
    write_text(tpath("lacks", "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"model-00002-of-00003.safetensors\", "
               "\"c\": \"model-00001-of-00003.safetensors\", \"d\": \"model-00003-of-00003.safetensors\"}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "tensor 'a' should be in model-00002-of-00003.safetensors but that shard lacks it");
    CHECK(s == NULL, "no store on error");
    CHECK(strstr(al_errmsg(), "model.safetensors.index.json") != NULL, "the message names the index: %s", al_errmsg());
    /* the index names a tensor no shard has */
    write_text(tpath("lacks", "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"model-00001-of-00003.safetensors\", \"ghost\": \"model-00003-of-00003.safetensors\"}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "tensor 'ghost' should be in model-00003-of-00003.safetensors");
    /* a listed shard that is not there */
    write_text(tpath("lacks", "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"model-00001-of-00003.safetensors\", \"q\": \"model-00009-of-00009.safetensors\"}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "model-00009-of-00009.safetensors");
    CHECK(strstr(al_errmsg(), "cannot") != NULL, "says it cannot be read: %s", al_errmsg());
    /* a shard name with a path in it */
    write_text(tpath("lacks", "model.safetensors.index.json"), "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "has a '/'");
    write_text(tpath("lacks", "model.safetensors.index.json"), "{\"weight_map\": {\"a\": 3}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "weight_map['a'] is not a file name");
    /* an empty weight_map (was NULL into qsort: a UBSan abort, and an empty store in release) */
    write_text(tpath("lacks", "model.safetensors.index.json"), "{\"metadata\": {}, \"weight_map\": {}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "\"weight_map\" is empty: the index lists no tensors");
    CHECK(s == NULL && strstr(al_errmsg(), "index.json") != NULL, "no store; names the index: %s", al_errmsg());
    /* text after the JSON, a NUL byte, a newline in a name: refused, one line */
    write_text(tpath("lacks", "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\": \"model-00001-of-00003.safetensors\"}} {\"weight_map\": {}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "not valid JSON: text after the JSON value at byte 58");
    CHECK_OK(al_write_file_atomic(tpath("lacks", "model.safetensors.index.json"), "{\"weight_map\": {}\0}", 19));
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "not valid JSON: a NUL byte at byte 17");
    write_text(tpath("lacks", "model.safetensors.index.json"),
               "{\"weight_map\": {\"a\\nb\": \"model-00001-of-00003.safetensors\"}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "a weight_map name has control character 0x0a");
    CHECK(strchr(al_errmsg(), '\n') == NULL, "one line: %s", al_errmsg());
    write_text(tpath("lacks", "model.safetensors.index.json"), "{\"metadata\": {}}");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "no \"weight_map\" object");
    write_text(tpath("lacks", "model.safetensors.index.json"), "{\"weight_map\": {\"a\": ");
    CHECK_ERR(store_open(tpath("lacks", NULL), &s), "not valid JSON");
    CHECK(strstr(al_errmsg(), "index.json") != NULL, "names the index: %s", al_errmsg());

    /* the same tensor in two shards */
    mkdir_p("twice");
    st_writer *w = st_writer_new();
    add_f32(w, "x", 2, 2, 0);
    add_f32(w, "y", 2, 2, 0);
    CHECK_OK(st_writer_write(w, tpath("twice", "model-00001-of-00002.safetensors")));
    st_writer_free(w);
    w = st_writer_new();
    add_f32(w, "x", 2, 2, 10);
    CHECK_OK(st_writer_write(w, tpath("twice", "model-00002-of-00002.safetensors")));
    st_writer_free(w);
    CHECK_ERR(store_open(tpath("twice", NULL), &s), "tensor 'x' is in two files");
    write_text(tpath("twice", "model.safetensors.index.json"),
               "{\"weight_map\": {\"x\": \"model-00001-of-00002.safetensors\", \"y\": \"model-00002-of-00002.safetensors\"}}");
    CHECK_ERR(store_open(tpath("twice", NULL), &s), "tensor 'x' is in two files");
    CHECK(strstr(al_errmsg(), "model-00001-of-00002") && strstr(al_errmsg(), "model-00002-of-00002"),
          "names both files: %s", al_errmsg());

    /* folders with nothing to open, paths that are not there */
    mkdir_p("emptydir");
    CHECK_ERR(store_open(tpath("emptydir", NULL), &s), "no model.safetensors, no model.safetensors.index.json and no *.safetensors");
    CHECK_ERR(store_open(tpath("no-such-thing", NULL), &s), "no such file or folder");
    /* a corrupt shard among good ones: the error names that shard */
    mkdir_p("corrupt");
    write_shards("corrupt");
    write_text(tpath("corrupt", "model-00002-of-00003.safetensors"), "garbage");
    CHECK_ERR(store_open(tpath("corrupt", NULL), &s), "model-00002-of-00003.safetensors: truncated");
}

/* ---------------------------------------------------------------- shapes and kinds */

static void test_shapes(void) {
    st_writer *w = st_writer_new();
    float x[24] = {0};
    int32_t ids[3] = {1, 2, 3};
    size_t s3[3] = {2, 3, 4}, s1[1] = {3};
    CHECK_OK(st_writer_add(w, "cube", DT_F32, 3, s3, x, sizeof x));
    CHECK_OK(st_writer_add(w, "ids", DT_I32, 1, s1, ids, sizeof ids));
    CHECK_OK(st_writer_add(w, "scalar", DT_F32, 0, NULL, x, 4));
    Mat *bf = mat_new(4, 6);
    for (size_t i = 0; i < 24; i++) bf->data[i] = (float)i * 0.75f - 3.0f;
    CHECK_OK(st_writer_add_mat(w, "bf", DT_BF16, bf));
    mat_free(bf);
    const char *path = tpath("shapes.safetensors", NULL);
    CHECK_OK(st_writer_write(w, path));
    st_writer_free(w);
    Store *s = NULL;
    CHECK_OK(store_open(path, &s));
    if (!s) return;
    size_t r = 0, c = 0;
    CHECK_ERR(store_shape2(s, "cube", &r, &c), "tensor 'cube' has 3 dims, expected a matrix");
    CHECK_OK(store_shape2(s, "ids", &r, &c));
    CHECK(r == 1 && c == 3, "1-D is 1 x n");
    CHECK_OK(store_shape2(s, "scalar", &r, &c));
    CHECK(r == 1 && c == 1, "0-D is 1 x 1");
    Mat *m = NULL;
    CHECK_ERR(store_read(s, "ids", &m), "tensor 'ids' is I32, not a float weight");
    CHECK_ERR(store_read(s, "cube", &m), "3 dims");
    CHECK_OK(store_read(s, "scalar", &m));
    mat_free(m);
    /* a column block of a BF16 matrix (the per-row conversion path) equals the whole read there */
    Mat *whole = NULL, *blk = NULL;
    CHECK_OK(store_read(s, "bf", &whole));
    CHECK_OK(store_read_block(s, "bf", 1, 2, 2, 3, &blk));
    if (whole && blk) {
        size_t bad = 0;
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 3; j++) bad += *mat_at(blk, i, j) != *mat_at(whole, 1 + i, 2 + j);
        CHECK(blk->rows == 2 && blk->cols == 3 && bad == 0, "BF16 block: %zu wrong", bad);
    }
    mat_free(whole);
    mat_free(blk);
    store_free(s);
}

int main(void) {
    snprintf(tu_dir, sizeof tu_dir, "%s", test_tmpdir());
    test_fp8_blocks(false);
    test_fp8_blocks(true);
    test_dequant_kernel();
    test_shards();
    test_shard_errors();
    test_shapes();
    return check_done();
}
