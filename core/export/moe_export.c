/* moe_export.c -- a TransMLA export's routed experts in DeepSeek-V3's names and config keys (see
 * moe_export.h). Owns the MoeNames maps. */
#define _GNU_SOURCE
#include "moe_export.h"

#include "analyses.h"
#include "ckpt_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *src, *dst;          /* names without the part suffix ("model.layers.0.block_sparse_moe.experts.1.w1") */
} MoePair;

struct MoeNames {
    MoePair *by_src, *by_dst; /* (n) the same pairs sorted by src, by dst (by_dst shares the strings) */
    size_t n, cap;
};

static const tensor_role EXPORTED_ROLES[] = {ROLE_ROUTER, ROLE_EXP_GATE, ROLE_EXP_UP, ROLE_EXP_DOWN};

void moe_names_free(MoeNames *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) { free(m->by_src[i].src); free(m->by_src[i].dst); }
    free(m->by_src);
    free(m->by_dst);
    free(m);
}

static int cmp_src(const void *a, const void *b) { return strcmp(((const MoePair *)a)->src, ((const MoePair *)b)->src); }
static int cmp_dst(const void *a, const void *b) { return strcmp(((const MoePair *)a)->dst, ((const MoePair *)b)->dst); }

/* Adds layer L's role r of expert e (-1: not an expert role) when its names differ. */
static int add_pair(MoeNames *m, const ModelConfig *c, int L, tensor_role r, int e) {
    char src[256], where[96], base[160];
    const RoleName *d = role_in_moe(MOE_DEEPSEEK, r);
    if (!d || !cfg_role_name(c, r, L, e, NULL, src, sizeof src)) return al_err("internal: no MoE role %d", (int)r);
    cfg_layer_prefix(c, L, where, sizeof where);
    if (strstr(d->name, "%d")) snprintf(base, sizeof base, d->name, e);
    else snprintf(base, sizeof base, "%s", d->name);
    char *dst = al_asprintf("%s%s", where, base);
    if (!dst) return AL_ERR;
    if (!strcmp(src, dst)) { free(dst); return AL_OK; }
    if (al_reserve(&m->by_src, &m->cap, m->n + 1, sizeof *m->by_src, "expert names")) { free(dst); return AL_ERR; }
    m->by_src[m->n++] = (MoePair){.src = al_strdup(src), .dst = dst};
    return m->by_src[m->n - 1].src ? AL_OK : AL_ERR;
}

MoeNames *moe_names(const ModelConfig *c) {
    MoeNames *m = al_calloc(1, sizeof *m, "expert names");
    int rc = m ? AL_OK : AL_ERR;
    for (int L = 0; rc == AL_OK && c->mlp == MLP_MOE && L < c->n_layers; L++) {
        if (!cfg_moe_layer(c, L)) continue;
        rc = add_pair(m, c, L, ROLE_ROUTER, -1);
        for (int e = 0; rc == AL_OK && e < c->moe.n_experts; e++)
            for (size_t k = 1; rc == AL_OK && k < sizeof EXPORTED_ROLES / sizeof *EXPORTED_ROLES; k++)
                rc = add_pair(m, c, L, EXPORTED_ROLES[k], e);
    }
    if (rc == AL_OK && m->n) {
        qsort(m->by_src, m->n, sizeof *m->by_src, cmp_src);
        m->by_dst = al_malloc3(m->n, 1, sizeof *m->by_dst, "expert names");
        if (m->by_dst) {
            memcpy(m->by_dst, m->by_src, m->n * sizeof *m->by_dst);
            qsort(m->by_dst, m->n, sizeof *m->by_dst, cmp_dst);
        } else rc = AL_ERR;
    }
    if (rc == AL_OK) return m;
    moe_names_free(m);
    return NULL;
}

/* name's counterpart in the pairs sorted by `key` (src or dst), its suffix kept; name when none. */
static const char *lookup(const MoePair *v, size_t n, bool by_src, const char *name, char *buf, size_t cap) {
    const char *dot = strrchr(name, '.');
    char base[256];
    if (!dot || (size_t)(dot - name) >= sizeof base || !n) return name;
    memcpy(base, name, (size_t)(dot - name));
    base[dot - name] = 0;
    MoePair key = {.src = base, .dst = base};
    const MoePair *hit = bsearch(&key, v, n, sizeof *v, by_src ? cmp_src : cmp_dst);
    if (!hit) return name;
    snprintf(buf, cap, "%s%s", by_src ? hit->dst : hit->src, dot);
    return buf;
}

const char *moe_rename(const MoeNames *m, const char *src, char *buf, size_t cap) {
    return m ? lookup(m->by_src, m->n, true, src, buf, cap) : src;
}

const char *moe_source_name(const MoeNames *m, const char *dst, char *buf, size_t cap) {
    return m ? lookup(m->by_dst, m->n, false, dst, buf, cap) : dst;
}

static void put_num(cJSON *o, const char *k, double v) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    cJSON_AddNumberToObject(o, k, v);
}

int moe_config(const ModelConfig *c, cJSON *o) {
    char why[512];
    if (!analysis_moe_exportable(c, why, sizeof why)) return al_err("export: %s", why);
    int first = 0;
    while (first < c->n_layers && !cfg_moe_layer(c, first)) first++;
    const MoeSpec *e = &c->moe;
    put_num(o, "n_routed_experts", e->n_experts);
    put_num(o, "num_experts_per_tok", e->top_k);
    put_num(o, "moe_intermediate_size", e->expert_ffn > 0 ? e->expert_ffn : c->intermediate);
    put_num(o, "first_k_dense_replace", first);
    put_num(o, "moe_layer_freq", 1);
    put_num(o, "n_group", 1);
    put_num(o, "topk_group", 1);
    put_num(o, "routed_scaling_factor", 1.0);
    const char *keys[] = {"n_shared_experts", "norm_topk_prob", "topk_method", "scoring_func", NULL};
    for (size_t i = 0; keys[i]; i++) cJSON_DeleteItemFromObjectCaseSensitive(o, keys[i]);
    cJSON_AddNullToObject(o, "n_shared_experts");         /* vLLM and SGLang: no shared experts */
    cJSON_AddBoolToObject(o, "norm_topk_prob", e->norm_topk_prob);
    cJSON_AddStringToObject(o, "topk_method", "greedy");
    cJSON_AddStringToObject(o, "scoring_func", "softmax");
    return AL_OK;
}
