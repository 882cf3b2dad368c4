/* attnlab_export.c -- attnlab's own layout of a `convert mla` conversion (see attnlab_export.h): its
 * config.json, its layers' query scale, its manifest marks; mla_export.c writes the folder. */
#define _GNU_SOURCE
#include "attnlab_export.h"

#include "attn_eval.h"
#include "config.h"
#include "layersel.h"
#include "mla_gaps.h"
#include "model.h"
#include "rope.h"
#include "tmla_qkn.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int attnlab_kept(const ModelConfig *c, char *buf, size_t cap) {
    int n = 0;
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; mla_gaps_row(i); i++) {
        const MlaGap *g = mla_gaps_row(i);
        if (!g->has(c) || !strcmp(g->feature, "q/k norm")) continue;   /* converted plain (fold / drop) */
        int k = at < cap ? snprintf(buf + at, cap - at, "%s%s", n ? ", " : "", g->feature) : 0;
        at += k > 0 ? (size_t)k : 0;
        n++;
    }
    return n;
}

/* The reader gives layer l its RoPE of the layer's D dims (attn_rope_freqs_layer): an error when the
 * conversion's are other (rope-dim above a head's rotary dims keeps pairs of several KV heads at one frequency). */
static int freqs_differ(const TmlaResult *r, int l) {
    const AttnLayer *L = r->layers[l];
    double *want = NULL;
    if (L->rope_dim == 0 || !L->inv_freq) return AL_OK;
    if (attn_rope_freqs_layer(r->src, l, L->rope_dim, &want)) return AL_ERR;
    int bad = -1;
    for (int j = 0; bad < 0 && j < L->rope_dim / 2; j++)
        if (L->inv_freq[j] != 0 && fabs(L->inv_freq[j] - want[j]) > 1e-12 * want[j]) bad = j;   /* 0: a NoPE layer */
    int rc = bad < 0 ? AL_OK
                     : al_err("export format attnlab: layer %d's RoPE dims are not the model's RoPE of dim %d (pair %d "
                              "turns at %g, not %g): the layout reads one RoPE of qk_rope_head_dim dims; convert with "
                              "rope-dim at most a head's rotary dims", l, L->rope_dim, bad, L->inv_freq[bad], want[bad]);
    free(want);
    return rc;
}

int attnlab_exportable(const TmlaResult *r) {
    const ModelConfig *c = &r->src->cfg;
    if (cfg_row(c)->keys != KEYS_HF || cfg_row(c)->text_config || !r->src->config_tree)
        return al_err("export format attnlab: %s is not a text-only checkpoint read by Llama-style config keys (the "
                      "layout keeps the source's config.json and reads it by its family)", c->model_type);
    if (r->opts.qk_norm == TMLA_QKN_KEEP)
        return al_err("export format attnlab: qk-norm keep rebuilds each token's keys from the cache and normalises them "
                      "before RoPE, which the layout's MLA reader (and no absorbed MLA decode) does not do yet; it runs in "
                      "the session (ppl, check); qk-norm fold or drop export");
    for (int l = 0; l < r->n_layers; l++) {
        const AttnLayer *L = r->layers[l];
        if (!L)
            return al_err("export format attnlab: layer %d of %s was not converted (%s); the layout holds every layer "
                          "in MLA form (convert all layers)", l, c->model_type,
                          layersel_attn(c, l) ? "convert mla ... layers" : layersel_other_kind(c));
        if (L->kv_rank != r->kv_rank || L->rope_dim != r->rope_dim || L->qk_nope != r->qk_nope || L->q_rank != r->q_rank)
            return al_err("export format attnlab: layer %d has other dims than the conversion's (rank %d, rope %d)", l,
                          L->kv_rank, L->rope_dim);
        if (freqs_differ(r, l)) return AL_ERR;
    }
    return AL_OK;
}

static void put_num(cJSON *o, const char *k, double v) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    cJSON_AddNumberToObject(o, k, v);
}

static void put_bool(cJSON *o, const char *k, bool v) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    cJSON_AddBoolToObject(o, k, v);
}

cJSON *attnlab_config(const TmlaResult *r, bool bias, double eps) {
    const ModelConfig *c = &r->src->cfg;
    cJSON *o = model_config_tree(r->src);
    if (!o) { al_err("out of memory copying %s's config.json", c->model_type); return NULL; }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "architectures");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "model_type");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "auto_map");
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("AttnlabMlaForCausalLM"));
    cJSON_AddStringToObject(o, "model_type", ATTNLAB_MLA_TYPE);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_source_model_type");
    cJSON_AddStringToObject(o, "attnlab_source_model_type", c->model_type);
    put_num(o, "kv_lora_rank", r->kv_rank);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "q_lora_rank");
    if (r->q_rank) cJSON_AddNumberToObject(o, "q_lora_rank", r->q_rank);
    else cJSON_AddNullToObject(o, "q_lora_rank");
    put_num(o, "qk_rope_head_dim", r->rope_dim);
    put_num(o, "qk_nope_head_dim", r->qk_nope);
    put_num(o, "v_head_dim", r->v_dim);
    put_bool(o, "attention_bias", bias);
    put_bool(o, "rope_interleave", true);
    put_bool(o, "qk_latent_layernorm", false);
    if (eps > 0) put_num(o, "rms_norm_eps", eps);
    char kept[512];
    attnlab_kept(c, kept, sizeof kept);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_kept");
    cJSON_AddStringToObject(o, "attnlab_kept", kept);
    return o;
}

/* Scales the query of L: each head's NoPE columns by f, its RoPE columns by f_pe. */
static void scale_query(AttnLayer *L, double f, double f_pe) {
    Mat *W = L->q_rank ? L->W_QB : L->W_Q;
    size_t dq = (size_t)(L->qk_nope + L->rope_dim);
    for (size_t j = 0; j < W->cols; j++) {
        double g = j % dq < (size_t)L->qk_nope ? f : f_pe;
        for (size_t i = 0; i < W->rows; i++) W->data[i * W->cols + j] = (float)(W->data[i * W->cols + j] * g);
        if (L->b_Q) L->b_Q[j] = (float)(L->b_Q[j] * g);
    }
}

int attnlab_layers(const TmlaResult *r, const cJSON *config, AttnLayer ***out) {
    *out = NULL;
    char *text = cJSON_PrintUnformatted(config);
    ModelConfig *c = calloc(1, sizeof *c);
    AttnLayer **v = calloc((size_t)r->n_layers, sizeof *v);
    int rc = text && c && v ? model_config_parse(text, "the attnlab export's config.json", c)
                            : al_err("out of memory (the attnlab export's layers)");
    free(text);
    for (int l = 0; rc == AL_OK && l < r->n_layers; l++) {
        /* the reader's scale s on every score, its YaRN attention factor m on the rotated q and k (the session's
           layers carry m^2 in their scale, rope_mscale 1): q_nope x scale / s, q_pe x scale / (s m^2 / mscale^2) */
        double s = cfg_attn_scale(c, l), m = cfg_layer_rope_scaled(c, l) ? rope_attention_factor(&c->rope_spec) : 1.0;
        if (!(v[l] = attn_layer_copy(r->layers[l]))) { rc = AL_ERR; break; }
        double f = v[l]->scale / s, mr = m / v[l]->rope_mscale;
        if (s > 0 && (fabs(f - 1) > 1e-15 || fabs(mr - 1) > 1e-15)) scale_query(v[l], f, f / (mr * mr));
        v[l]->scale = s;
        v[l]->rope_mscale = m;
    }
    free(c);
    if (rc == AL_OK) { *out = v; return AL_OK; }
    for (int l = 0; v && l < r->n_layers; l++) attn_layer_free(v[l]);
    free(v);
    return rc;
}

void attnlab_manifest(cJSON *m, const TmlaResult *r) {
    cJSON_AddStringToObject(m, "format", "attnlab");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "latent_norm_how");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "latent_norm");
    cJSON_AddStringToObject(m, "latent_norm", "none");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "qk_latent_layernorm");
    cJSON_AddBoolToObject(m, "qk_latent_layernorm", false);
    char kept[512];
    attnlab_kept(&r->src->cfg, kept, sizeof kept);
    cJSON_AddStringToObject(m, "kept", kept);
    cJSON_AddStringToObject(m, "engines", "none: attnlab's own layout (model_type attnlab_mla); `load DIR` runs it");
}
