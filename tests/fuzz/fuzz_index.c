/* fuzz_index.c -- a libFuzzer target over the sharded-checkpoint index reader (core/io/store.c):
 * each input is the text of a model.safetensors.index.json in a scratch folder that holds two
 * valid shards (a.safetensors: tensors "a", "b"; b.safetensors: "c"). A failure must give a
 * one-line message naming the index (or the shard it lists); a store that opens must hold each
 * tensor the index names in the shard it names, and every tensor must read. See README.md. */
#include "store.h"
#include "fuzz_util.h"

#include <cjson/cJSON.h>

/* The scratch folder with its two shards, made once. */
static const char *shard_dir(void) {
    static const char *dir;
    if (dir) return dir;
    dir = fuzz_dir("index");
    float x[4] = {1, 2, 3, 4};
    size_t sh[1] = {4};
    char p[600];
    st_writer *w = st_writer_new();
    if (st_writer_add(w, "a", DT_F32, 1, sh, x, sizeof x) || st_writer_add(w, "b", DT_F32, 1, sh, x, sizeof x))
        fuzz_fail("fuzz_index", "cannot build shard a");
    snprintf(p, sizeof p, "%s/a.safetensors", dir);
    if (st_writer_write(w, p)) fuzz_fail("fuzz_index", al_errmsg());
    st_writer_free(w);
    w = st_writer_new();
    if (st_writer_add(w, "c", DT_F32, 1, sh, x, sizeof x)) fuzz_fail("fuzz_index", "cannot build shard b");
    snprintf(p, sizeof p, "%s/b.safetensors", dir);
    if (st_writer_write(w, p)) fuzz_fail("fuzz_index", al_errmsg());
    st_writer_free(w);
    return dir;
}

/* Every name the index's weight_map gives is in the store, in the shard it names. */
static void check_map(const Store *s, const uint8_t *data, size_t size) {
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *it;
    cJSON_ArrayForEach(it, wm) {
        const st_entry *e = NULL;
        const st_file *f = NULL;
        if (store_entry(s, it->string, &e, &f) != AL_OK) fuzz_fail("fuzz_index", "a listed tensor is missing");
        const char *p = st_path(f), *slash = strrchr(p, '/');
        if (!cJSON_IsString(it) || strcmp(slash ? slash + 1 : p, it->valuestring) != 0)
            fuzz_fail("fuzz_index", "a tensor is not in the shard the index names");
    }
    cJSON_Delete(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = shard_dir();
    fuzz_file(dir, "model.safetensors.index.json", data, size);
    Store *s = NULL;
    if (store_open(dir, &s) != AL_OK) {
        if (s) fuzz_fail("fuzz_index", "an error left a store behind");
        const char *msg = al_errmsg();
        if (!msg[0] || strchr(msg, '\n')) fuzz_fail("fuzz_index", "the error message is empty or not one line");
        if (!strstr(msg, "index.json") && !strstr(msg, ".safetensors") && !strstr(msg, "out of memory"))
            fuzz_fail("fuzz_index", "the message names neither the index nor a shard");
        return 0;
    }
    if (store_count(s) == 0) fuzz_fail("fuzz_index", "a store with no tensors");
    check_map(s, data, size);
    for (size_t i = 0; i < store_count(s); i++) {
        Mat *m = NULL;
        if (store_read(s, store_name_at(s, i), &m) != AL_OK) fuzz_fail("fuzz_index", "a tensor of the store does not read");
        mat_free(m);
    }
    store_free(s);
    return 0;
}
