/* test_ckpt_write.c -- the one checkpoint writer (core/io/ckpt_write.h) and the exports built on it:
 * shard names, the index's total_size, {"format": "pt"} in every shard, auxiliary files copied
 * (and a stray pytorch_model.bin not), `force` replacing a 3-shard export whole (no old index or
 * shard survives; issue 14 item 1), failures and Ctrl-C leaving neither a partial folder nor a
 * staging folder nor the parents made for it, a planted symlink never followed, "" refused,
 * and a destination that holds the source refused even with force; the JSON helpers of the
 * manifests and configs (ckpt_json_fields, ckpt_json_merge, ckpt_json_hf_shape). */
#include "check.h"
#include "ckpt_write.h"
#include "export.h"
#include "safetensors.h"
#include "synth.h"

#include <dirent.h>
#include <stddef.h>
#include <unistd.h>

static const char *tmp_root;

static char *path2(const char *a, const char *b) { return al_asprintf("%s/%s", a, b); }

static bool exists(const char *dir, const char *name) {
    char *p = path2(dir, name);
    struct stat sb;
    bool ok = lstat(p, &sb) == 0;
    free(p);
    return ok;
}

/* The entries of dir (not . and ..), sorted, joined by spaces into buf. */
static const char *listing(const char *dir, char *buf, size_t cap) {
    DIR *d = opendir(dir);
    char *names[64];
    size_t n = 0;
    buf[0] = 0;
    if (!d) return buf;
    for (struct dirent *e; (e = readdir(d)) && n < 64;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) { char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t; }
    for (size_t i = 0; i < n; i++) {
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? " " : "", names[i]);
        free(names[i]);
    }
    return buf;
}

/* True when nothing in dir is named like a staging or set-aside folder. */
static bool no_leftovers(const char *dir) {
    char buf[4096];
    listing(dir, buf, sizeof buf);
    return !strstr(buf, ".staging-") && !strstr(buf, ".old.");
}

static void write_file(const char *dir, const char *name, const char *text, size_t len) {
    char *p = path2(dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL, "create %s", p);
    if (f) { fwrite(text, 1, len, f); fclose(f); }
    free(p);
}

static cJSON *read_json(const char *dir, const char *name) {
    char *p = path2(dir, name);
    char *t = al_read_file(p, NULL);
    free(p);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    return j;
}

/* Three small tensors per shard into `shards` shards; returns the tensor bytes written. */
static size_t add_shards(CkptWriter *w, int shards, float *vals) {
    size_t total = 0;
    char name[64];
    for (int s = 0; s < shards; s++) {
        for (int t = 0; t < 3; t++) {
            size_t shape[2] = {2, (size_t)(t + 1)};
            snprintf(name, sizeof name, "s%d.t%d.weight", s, t);
            CHECK_OK(ckpt_add(w, name, DT_F32, 2, shape, vals, shape[0] * shape[1] * sizeof(float)));
            total += shape[0] * shape[1] * sizeof(float);
        }
        CHECK_OK(ckpt_shard_end(w));
    }
    return total;
}

/* ---------------------------------------------------------------- shards, index, metadata */

static void test_shards_index(void) {
    float vals[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    char *dir = path2(tmp_root, "three");
    CkptWriter *w;
    CHECK_OK(ckpt_begin(dir, &(CkptOpts){0}, &w));
    size_t total = add_shards(w, 3, vals);
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "model_type", "test");
    CHECK_OK(ckpt_write_json(w, "config.json", cfg));
    cJSON_Delete(cfg);
    size_t files = 0;
    CHECK_OK(ckpt_commit(w, &files));
    char buf[4096];
    CHECK(!strcmp(listing(dir, buf, sizeof buf), "config.json model-00001-of-00003.safetensors "
                  "model-00002-of-00003.safetensors model-00003-of-00003.safetensors model.safetensors.index.json"),
          "three shards, index and config: [%s]", buf);
    CHECK(files == 5, "5 files written, got %zu", files);
    cJSON *idx = read_json(dir, "model.safetensors.index.json");
    cJSON *tot = cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "metadata"), "total_size");
    CHECK(cJSON_IsNumber(tot) && (size_t)tot->valuedouble == total, "total_size %g, want %zu", tot ? tot->valuedouble : -1,
          total);
    cJSON *map = cJSON_GetObjectItem(idx, "weight_map");
    CHECK(cJSON_GetArraySize(map) == 9, "9 tensors in the weight map");
    cJSON *it = cJSON_GetObjectItem(map, "s1.t2.weight");
    CHECK(it && !strcmp(it->valuestring, "model-00002-of-00003.safetensors"), "s1.t2 in shard 2");
    cJSON_Delete(idx);
    for (int s = 1; s <= 3; s++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-00003.safetensors", s);
        char *p = path2(dir, name);
        st_file *f = NULL;
        CHECK_OK(st_open(p, &f));
        CHECK(f && st_meta(f, "format") && !strcmp(st_meta(f, "format"), "pt"), "%s has format pt", name);
        const st_entry *e = f ? st_find(f, "s0.t1.weight") : NULL;
        if (s == 1) CHECK(e && !memcmp(st_data(f, e), vals, 16), "bytes of s0.t1 written from the caller's buffer");
        st_close(f);
        free(p);
    }
    CHECK(no_leftovers(tmp_root), "no staging folder left");

    /* one shard: model.safetensors and no index */
    char *one = path2(tmp_root, "one");
    CHECK_OK(ckpt_begin(one, &(CkptOpts){0}, &w));
    add_shards(w, 1, vals);
    CHECK_OK(ckpt_commit(w, NULL));
    CHECK(!strcmp(listing(one, buf, sizeof buf), "model.safetensors"), "one shard: [%s]", buf);
    free(one);
    free(dir);
}

/* ---------------------------------------------------------------- auxiliary files */

static void test_aux(void) {
    char *src = path2(tmp_root, "auxsrc"), *dst = path2(tmp_root, "auxdst");
    CHECK_OK(al_mkdirs(src));
    const char *keep[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                          "tokenizer.model", "vocab.json", "merges.txt", "tok512.bin", "LICENSE", "LICENSE.txt", NULL};
    const char *drop[] = {"pytorch_model.bin", "model.safetensors", "model.safetensors.index.json", "notes.md",
                          "config.json", NULL};
    for (size_t i = 0; keep[i]; i++) write_file(src, keep[i], keep[i], strlen(keep[i]));
    for (size_t i = 0; drop[i]; i++) write_file(src, drop[i], "x", 1);
    /* a big stray weight file: never copied */
    char *big = calloc(1, 4 << 20);
    write_file(src, "pytorch_model.bin", big, 4 << 20);
    free(big);
    CkptWriter *w;
    CHECK_OK(ckpt_begin(dst, &(CkptOpts){.src = src}, &w));
    size_t n = 0;
    CHECK_OK(ckpt_copy_aux(w, src, &n));
    CHECK_OK(ckpt_commit(w, NULL));
    CHECK(n == 10, "10 auxiliary files copied, got %zu", n);
    for (size_t i = 0; keep[i]; i++) {
        char *p = path2(dst, keep[i]);
        char *t = al_read_file(p, NULL);
        CHECK(t && !strcmp(t, keep[i]), "%s copied with its bytes", keep[i]);
        free(t);
        free(p);
    }
    for (size_t i = 0; drop[i]; i++) CHECK(!exists(dst, drop[i]), "%s is not copied", drop[i]);
    CHECK(ckpt_is_aux("LICENCE-MIT") && ckpt_is_aux("tokenizer.bin") && !ckpt_is_aux("tok.json") &&
          !ckpt_is_aux("model-00001-of-00002.safetensors") && !ckpt_is_aux("pytorch_model.bin"), "aux names");
    free(src);
    free(dst);
}

/* ---------------------------------------------------------------- force, failures, interrupts */

static void test_force_and_failures(void) {
    float vals[8] = {0};
    char buf[4096];
    char *dir = path2(tmp_root, "forced");
    CkptWriter *w;
    CHECK_OK(ckpt_begin(dir, &(CkptOpts){0}, &w));
    add_shards(w, 3, vals);
    CHECK_OK(ckpt_write_text(w, "manifest.json", "{}", 2));
    CHECK_OK(ckpt_commit(w, NULL));
    /* without force: refused, naming force when the command offers it */
    CHECK_ERR(ckpt_begin(dir, &(CkptOpts){.can_force = true}, &w), "add `force`");
    /* force with one shard: exactly the new files, no old shard or index beside them */
    CHECK_OK(ckpt_begin(dir, &(CkptOpts){.force = true}, &w));
    add_shards(w, 1, vals);
    CHECK_OK(ckpt_write_text(w, "config.json", "{}", 2));
    CHECK_OK(ckpt_commit(w, NULL));
    CHECK(!strcmp(listing(dir, buf, sizeof buf), "config.json model.safetensors"), "after force: [%s]", buf);
    CHECK(no_leftovers(tmp_root), "no staging or set-aside folder left after force");

    /* an injected failure (a tensor whose bytes do not match its shape) after one shard is written:
     * with force the old folder is intact; nothing staged is left */
    CHECK_OK(ckpt_begin(dir, &(CkptOpts){.force = true}, &w));
    add_shards(w, 1, vals);
    size_t shape[1] = {3};
    CHECK_ERR(ckpt_add(w, "bad", DT_F32, 1, shape, vals, 4), "shape x F32 is 12 bytes");
    ckpt_abort(w);
    CHECK(!strcmp(listing(dir, buf, sizeof buf), "config.json model.safetensors"), "old folder intact: [%s]", buf);
    CHECK(no_leftovers(tmp_root), "no staging folder left after a failure");

    /* a failure into a new folder under missing parents: nothing at all is left */
    char *deep = path2(tmp_root, "made/for/it/out");
    CHECK_OK(ckpt_begin(deep, &(CkptOpts){0}, &w));
    add_shards(w, 2, vals);
    ckpt_abort(w);
    CHECK(!exists(tmp_root, "made"), "parents made for a failed write are removed");
    free(deep);

    /* Ctrl-C before the swap: AL_INTERRUPTED, the old folder intact */
    CHECK_OK(ckpt_begin(dir, &(CkptOpts){.force = true}, &w));
    add_shards(w, 3, vals);
    al_interrupt_flag = 1;
    CHECK(ckpt_commit(w, NULL) == AL_INTERRUPTED, "commit under Ctrl-C is interrupted");
    al_interrupt_flag = 0;
    CHECK(!strcmp(listing(dir, buf, sizeof buf), "config.json model.safetensors"), "interrupted: old intact [%s]", buf);
    CHECK(no_leftovers(tmp_root), "no staging folder left after Ctrl-C");

    /* "" and a parent that is a file */
    CHECK_ERR(ckpt_begin("", &(CkptOpts){0}, &w), "no folder given");
    CHECK(w == NULL, "nothing returned for \"\"");
    char *under_file = path2(dir, "model.safetensors/sub");
    CHECK(ckpt_begin(under_file, &(CkptOpts){0}, &w) != AL_OK, "a parent that is a file is refused");
    free(under_file);
    CHECK(no_leftovers(tmp_root) && no_leftovers(dir), "no staging folder left after refusals");

    /* a folder holding the source is never replaced, even with force */
    char *outer = path2(tmp_root, "outer"), *inner = path2(tmp_root, "outer/model");
    CHECK_OK(al_mkdirs(inner));
    write_file(inner, "config.json", "{}", 2);
    CHECK_ERR(ckpt_begin(outer, &(CkptOpts){.src = inner, .force = true}, &w), "holds the source model's folder");
    CHECK(exists(inner, "config.json"), "the source is untouched");
    free(outer);
    free(inner);
    free(dir);
}

/* ---------------------------------------------------------------- symlinks */

static void test_symlinks(void) {
    char *target = path2(tmp_root, "victim.txt"), *link = path2(tmp_root, "planted");
    write_file(tmp_root, "victim.txt", "precious", 8);
    CHECK(symlink(target, link) == 0, "plant a symlink");
    CHECK(al_create_excl(link) < 0, "an exclusive create refuses a planted symlink");
    char *t = al_read_file(target, NULL);
    CHECK(t && !strcmp(t, "precious"), "the symlink's target is untouched");
    free(t);
    /* the old predictable temporary name of the atomic writer, planted as a symlink */
    char *dst = path2(tmp_root, "written.txt");
    char *old_tmp = al_asprintf("%s.tmp.%ld", dst, (long)getpid());
    CHECK(symlink(target, old_tmp) == 0, "plant a symlink at the old temporary name");
    CHECK_OK(al_write_file_atomic(dst, "new", 3));
    t = al_read_file(target, NULL);
    CHECK(t && !strcmp(t, "precious"), "the atomic writer did not write through the planted symlink");
    free(t);
    t = al_read_file(dst, NULL);
    CHECK(t && !strcmp(t, "new"), "the file itself was written");
    free(t);
    free(old_tmp);
    free(dst);
    free(target);
    free(link);
}

/* ---------------------------------------------------------------- a FaRR export over an earlier one */

static char *demo(const char *name, int shards) {
    SynthOptions opt;
    CHECK(synth_demo_name(name, &opt), "demo %s", name);
    opt.shards = shards;
    char *dir = al_asprintf("%s/src-%s-%d", tmp_root, name, shards);
    CHECK_OK(synth_write(&opt, dir));
    return dir;
}

static FarrPlan *vo_rank(Model *m, int rank) {
    FarrPlan *p = NULL;
    FarrTruncOpts o = {.kind = FARR_VO, .by_rank = true, .rank = rank, .policy = FARR_POLICY_MODEL_MAX, .layer_hi = -1};
    CHECK_OK(farr_truncate(m, &o, &p));
    return p;
}

static void test_farr_force(void) {
    char *s3 = demo("demo-r1-f32", 3), *s1 = demo("demo-r1-f32", 1), *dst = path2(tmp_root, "farr-out");
    write_file(s3, "tokenizer.json", "{}", 2);
    write_file(s3, "pytorch_model.bin", "stray", 5);
    Model *m3 = NULL, *m1 = NULL;
    CHECK_OK(model_open(s3, &m3));
    CHECK_OK(model_open(s1, &m1));
    if (!m3 || !m1) { model_free(m3); model_free(m1); return; }
    FarrPlan *p4 = vo_rank(m3, 4), *p16 = vo_rank(m1, 16);
    ExportOpts eo = {.format = EXPORT_HF};
    char buf[4096];
    CHECK_OK(farr_export(m3, p4, NULL, dst, &eo, NULL));
    CHECK(exists(dst, "model-00003-of-00003.safetensors") && exists(dst, "model.safetensors.index.json") &&
          exists(dst, "tokenizer.json") && !exists(dst, "pytorch_model.bin"), "3-shard export: [%s]",
          listing(dst, buf, sizeof buf));
    eo.force = true;
    CHECK_OK(farr_export(m1, p16, NULL, dst, &eo, NULL));
    CHECK(!strcmp(listing(dst, buf, sizeof buf), "config.json farr_manifest.json model.safetensors"),
          "force leaves exactly the new files: [%s]", buf);
    Model *e = NULL;
    CHECK_OK(model_open(dst, &e));
    if (e) CHECK(e->cfg.v_dim == 16 && store_nfiles(e->store) == 1, "the new export loads (v_head_dim %d)", e->cfg.v_dim);
    model_free(e);
    /* "" is refused cleanly, and an interrupted export leaves the previous one whole */
    CHECK_ERR(farr_export(m1, p16, NULL, "", &eo, NULL), "no folder given");
    al_interrupt_flag = 1;
    CHECK(farr_export(m3, p4, NULL, dst, &eo, NULL) == AL_INTERRUPTED, "Ctrl-C interrupts the export");
    al_interrupt_flag = 0;
    CHECK(!strcmp(listing(dst, buf, sizeof buf), "config.json farr_manifest.json model.safetensors"),
          "after Ctrl-C the earlier export is whole: [%s]", buf);
    CHECK(no_leftovers(tmp_root), "no staging folder left");
    farr_plan_free(p4);
    farr_plan_free(p16);
    model_free(m3);
    model_free(m1);
    free(s3); free(s1); free(dst);
}

/* The JSON helpers the manifests and configs are written through: a record's fields by table (in
 * table order, NaN as null), constant members merged in order (text that is not an object's
 * members refused), the HF shape keys added in their order only where absent. */
static void test_json_helpers(void) {
    typedef struct { int layer; double a, b, c; } Rec;
    static const CkptJsonField fields[] = {
        {"c_key", offsetof(Rec, c)}, {"a_key", offsetof(Rec, a)}, {"b_key", offsetof(Rec, b)}, {NULL, 0}};
    cJSON *o = cJSON_CreateObject();
    ckpt_json_fields(o, &(Rec){7, 0.25, NAN, -3}, fields);
    char *t = cJSON_PrintUnformatted(o);
    CHECK(t && !strcmp(t, "{\"c_key\":-3,\"a_key\":0.25,\"b_key\":null}"), "fields: %s", t);
    free(t);
    CHECK_OK(ckpt_json_merge(o, "\"z\": 1, \"m\": [false, \"s\"], \"a\": 1.0"));
    t = cJSON_PrintUnformatted(o);
    CHECK(t && !strcmp(t, "{\"c_key\":-3,\"a_key\":0.25,\"b_key\":null,\"z\":1,\"m\":[false,\"s\"],\"a\":1}"),
          "merged: %s", t);
    free(t);
    CHECK_ERR(ckpt_json_merge(o, "\"x\": "), "not an object");
    CHECK(cJSON_GetArraySize(o) == 6, "a refused merge adds nothing: %d members", cJSON_GetArraySize(o));
    cJSON_Delete(o);
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "num_hidden_layers", 99);
    ckpt_json_hf_shape(o, &(CkptHfShape){64, 128, 4, 2, 256, 512});
    t = cJSON_PrintUnformatted(o);
    CHECK(t && !strcmp(t, "{\"num_hidden_layers\":99,\"hidden_size\":64,\"intermediate_size\":128,"
                          "\"num_attention_heads\":4,\"vocab_size\":256,\"max_position_embeddings\":512}"),
          "shape: %s", t);
    free(t);
    cJSON_Delete(o);
}

int main(void) {
    tmp_root = test_tmpdir();
    test_shards_index();
    test_aux();
    test_force_and_failures();
    test_symlinks();
    test_farr_force();
    test_json_helpers();
    return check_done();
}
