/* mla_quant.c -- the quantization config of a TransMLA export of a quantized source (see
 * mla_quant.h). Owns nothing: it edits the caller's cJSON trees. */
#define _GNU_SOURCE
#include "mla_quant.h"

#include "al.h"
#include "quant_config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Appends to array a each of mods that no entry of a names already. */
static void add_missing(cJSON *a, char *const *mods, size_t n) {
    int before = cJSON_GetArraySize(a);
    for (size_t i = 0; i < n; i++) {
        bool named = false;
        for (int k = 0; k < before && !named; k++) {
            const cJSON *e = cJSON_GetArrayItem(a, k);
            named = cJSON_IsString(e) && quant_entry_names(e->valuestring, mods[i]);
        }
        if (!named) cJSON_AddItemToArray(a, cJSON_CreateString(mods[i]));
    }
}

/* Removes from array a every entry that names one of the quantized modules qm: an entry the source
 * needed under its own names (Mixtral's "gate" for block_sparse_moe.gate, `key in name`) that now
 * names DeepSeek-V3's quantized experts (mlp.experts.E.gate_proj) would leave them unquantized. */
static void drop_naming(cJSON *a, const MlaQuantMods *m) {
    for (int k = cJSON_GetArraySize(a) - 1; k >= 0; k--) {
        const cJSON *e = cJSON_GetArrayItem(a, k);
        bool hit = false;
        for (size_t i = 0; cJSON_IsString(e) && i < m->nquant && !hit; i++) hit = quant_entry_names(e->valuestring, m->quant[i]);
        if (hit) cJSON_DeleteItemFromArray(a, k);
    }
}

/* The lists of q that get m's plain modules (quant_config_plain_lists, as export.c's FaRR export). */
static void add_to_lists(cJSON *q, const MlaQuantMods *m) {
    cJSON *lists[4];
    bool created;
    for (int i = 0, n = quant_config_plain_lists(q, lists, &created); i < n; i++) {
        drop_naming(lists[i], m);
        add_missing(lists[i], m->plain, m->nplain);
    }
}

/* Whether quantization_config (or hf_quant_config's quantization) q names a static KV cache scheme. */
static bool kv_scheme_static(const cJSON *q) {
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(q, "kv_cache_scheme");
    const cJSON *algo = cJSON_GetObjectItemCaseSensitive(q, "kv_cache_quant_algo");
    return (cJSON_IsObject(kv) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kv, "dynamic"))) ||
           (cJSON_IsString(algo) && algo->valuestring[0]);
}

bool mla_quant_kv_scheme(const cJSON *src_tree) {
    return kv_scheme_static(cJSON_GetObjectItemCaseSensitive(src_tree, "quantization_config"));
}

/* Drops q's static KV cache scheme (mla_quant.h: mla_quant_kv_scheme): ModelOpt's algo becomes null. */
static void drop_kv_scheme(cJSON *q) {
    if (!kv_scheme_static(q)) return;
    cJSON_DeleteItemFromObjectCaseSensitive(q, "kv_cache_scheme");
    if (cJSON_GetObjectItemCaseSensitive(q, "kv_cache_quant_algo")) {
        cJSON_DeleteItemFromObjectCaseSensitive(q, "kv_cache_quant_algo");
        cJSON_AddNullToObject(q, "kv_cache_quant_algo");
    }
}

int mla_quant_config(const cJSON *src_tree, const MlaQuantMods *m, cJSON *cfg) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(src_tree, "quantization_config");
    if (!cJSON_IsObject(q) || !m->nquant) return AL_OK;       /* nothing copied quantized: a plain checkpoint */
    cJSON *d = cJSON_Duplicate(q, true);
    if (!d) return al_err("out of memory copying quantization_config");
    add_to_lists(d, m);
    drop_kv_scheme(d);
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, "quantization_config");
    cJSON_AddItemToObject(cfg, "quantization_config", d);
    return AL_OK;
}

int mla_quant_hf_file(const char *src_dir, const MlaQuantMods *m, CkptWriter *w) {
    char *p = al_asprintf("%s/hf_quant_config.json", src_dir);
    if (!p) return AL_ERR;
    if (!m->nquant || access(p, F_OK) != 0) { free(p); return AL_OK; }
    size_t len = 0;
    char *text = al_read_file_max(p, &len, AL_CAP_CONFIG, "hf_quant_config");
    free(p);
    if (!text) return AL_ERR;
    cJSON *j = cJSON_ParseWithLength(text, len), *q = cJSON_GetObjectItemCaseSensitive(j, "quantization");
    int rc;
    if (cJSON_IsObject(q)) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "exclude_modules");
        if (!cJSON_IsArray(a)) {
            cJSON_DeleteItemFromObjectCaseSensitive(q, "exclude_modules");
            a = cJSON_AddArrayToObject(q, "exclude_modules");
        }
        if (a) drop_naming(a, m);
        if (a) add_missing(a, m->plain, m->nplain);
        drop_kv_scheme(q);
        rc = ckpt_write_json(w, "hf_quant_config.json", j);
    } else
        rc = ckpt_write_text(w, "hf_quant_config.json", text, len);        /* not ModelOpt's form: as it is */
    cJSON_Delete(j);
    free(text);
    return rc;
}
