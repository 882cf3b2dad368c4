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

int attnlab_kept(const ModelConfig *c, bool qk_norm_kept, char *buf, size_t cap) {
    int n = 0;
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; mla_gaps_row(i); i++) {
        const MlaGap *g = mla_gaps_row(i);
        if (!g->has(c) || (!qk_norm_kept && !strcmp(g->feature, "q/k norm"))) continue;   /* plain: fold / drop */
        int k = at < cap ? snprintf(buf + at, cap - at, "%s%s", n ? ", " : "", g->feature) : 0;
        at += k > 0 ? (size_t)k : 0;
        n++;
    }
    return n;
}

/* Whether layer l's RoPE frequencies are other than the model's RoPE of its D dims (attn_rope_freqs_layer; a NoPE
 * layer's zeros are the model's NoPE): MHA2MLA's selected pairs, a rope-dim above a head's rotary dims. */
static int own_freqs(const TmlaResult *r, int l, bool *own) {
    const AttnLayer *L = r->layers[l];
    double *want = NULL;
    *own = false;
    if (L->kind != ATTN_MLA || L->rope_dim == 0 || !L->inv_freq) return AL_OK;
    if (attn_rope_freqs_layer(r->src, l, L->rope_dim, &want)) return AL_ERR;
    for (int j = 0; !*own && j < L->rope_dim / 2; j++)
        *own = L->inv_freq[j] != 0 && fabs(L->inv_freq[j] - want[j]) > 1e-12 * want[j];   /* 0: a NoPE layer */
    free(want);
    return AL_OK;
}

bool attnlab_own_freqs(const TmlaResult *r) {
    bool any = false, own;
    for (int l = 0; !any && l < r->n_layers; l++) any = r->layers[l] && own_freqs(r, l, &own) == AL_OK && own;
    al_err_clear();
    return any;
}

int attnlab_max_rank(const TmlaResult *r) {
    int m = 0;
    for (int l = 0; l < r->n_layers; l++)
        if (r->layers[l] && r->layers[l]->kind == ATTN_MLA && r->layers[l]->kv_rank > m) m = r->layers[l]->kv_rank;
    return m;
}

/* The first converted layer of r (a hybrid's keep conversion leaves its other layers NULL). */
static const AttnLayer *first_layer(const TmlaResult *r) {
    for (int l = 0; l < r->n_layers; l++)
        if (r->layers[l]) return r->layers[l];
    return NULL;
}

int attnlab_exportable(const TmlaResult *r) {
    const ModelConfig *c = &r->src->cfg;
    bool keep = r->opts.qk_norm == TMLA_QKN_KEEP;
    if (cfg_row(c)->keys != KEYS_HF || (cfg_row(c)->text_config && !keep) || !r->src->config_tree)
        return al_err("export format attnlab: %s is not a checkpoint read by Llama-style config keys (the layout keeps the "
                      "source's config.json and reads it by its family; a multimodal source's text tower only with "
                      "qk-norm keep, whose layers stay the source's attention: MLA layers of a hybrid tower, with an "
                      "output gate, are not held yet)", c->model_type);
    if (keep && c->attn != QKV_SPLIT)
        return al_err("export format attnlab: qk-norm keep is written over the source's q_proj / q_norm / k_norm, which %s "
                      "does not have as separate tensors", c->model_type);
    const AttnLayer *L0 = first_layer(r);
    for (int l = 0; l < r->n_layers; l++) {
        const AttnLayer *L = r->layers[l];
        if (!L && keep && !layersel_attn(c, l)) continue;      /* a hybrid's other layers: kept as they are */
        if (!L)
            return al_err("export format attnlab: layer %d of %s was not converted (%s); the layout holds every layer "
                          "in MLA form (convert all layers)", l, c->model_type,
                          layersel_attn(c, l) ? "convert mla ... layers" : layersel_other_kind(c));
        if (keep && (L->kind != ATTN_GQA || !L->W_KVA || !L->W_KVB || L->W_KVA->cols != L0->W_KVA->cols))
            return al_err("export format attnlab: layer %d is not a qk-norm keep layer of the conversion's cache", l);
        if (keep) continue;                   /* the source's query, norms and RoPE: nothing of MLA's to check */
        if (L->W_G)
            return al_err("export format attnlab: layer %d's MLA attention has %s's output gate, which the layout's MLA "
                          "names do not hold yet; qk-norm keep exports it (the source's gated q_proj)", l, c->model_type);
        if (L->rope_dim != r->rope_dim || L->qk_nope != r->qk_nope || L->q_rank != r->q_rank)   /* ranks: per layer */
            return al_err("export format attnlab: layer %d has other dims than the conversion's (rope %d, nope %d, q rank %d; "
                          "the layout holds per-layer kv ranks and RoPE frequencies, one RoPE width)", l, L->rope_dim,
                          L->qk_nope, L->q_rank);
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
    bool keep = r->opts.qk_norm == TMLA_QKN_KEEP;    /* the source's attention keys: no MLA dims (attnlab_export.h) */
    int rmax = attnlab_max_rank(r);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_kv_ranks");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_layer_rope");
    if (!keep && attnlab_own_freqs(r)) cJSON_AddBoolToObject(o, "attnlab_layer_rope", true);   /* self_attn.rope_inv_freq */
    bool uniform = true;
    for (int l = 0; !keep && l < r->n_layers; l++) uniform &= !r->layers[l] || r->layers[l]->kv_rank == rmax;
    cJSON *ranks = uniform ? NULL : cJSON_AddArrayToObject(o, "attnlab_kv_ranks");   /* the rest of rmax: zeros */
    for (int l = 0; ranks && l < r->n_layers; l++) cJSON_AddItemToArray(ranks, cJSON_CreateNumber(r->layers[l]->kv_rank));
    if (!keep) {
        put_num(o, "kv_lora_rank", rmax);
        cJSON_DeleteItemFromObjectCaseSensitive(o, "q_lora_rank");
        if (r->q_rank) cJSON_AddNumberToObject(o, "q_lora_rank", r->q_rank);
        else cJSON_AddNullToObject(o, "q_lora_rank");
        put_num(o, "qk_rope_head_dim", r->rope_dim);
        put_num(o, "qk_nope_head_dim", r->qk_nope);
        put_num(o, "v_head_dim", r->v_dim);
        put_bool(o, "rope_interleave", true);
        put_bool(o, "qk_latent_layernorm", false);
    }
    if (!cfg_row(c)->text_config) put_bool(o, "attention_bias", bias);   /* a tower's: its text_config's, as it was */
    if (eps > 0) put_num(o, "rms_norm_eps", eps);
    char kept[512];
    attnlab_kept(c, keep, kept, sizeof kept);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_kept");
    cJSON_AddStringToObject(o, "attnlab_kept", kept);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_qk_norm");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "attnlab_kv_cache_dim");
    if (keep) {                               /* the source's attention with K / V rebuilt from an (r + D)-wide cache */
        cJSON_AddStringToObject(o, "attnlab_qk_norm", "keep");
        cJSON_AddNumberToObject(o, "attnlab_kv_cache_dim", (double)first_layer(r)->W_KVA->cols);
    }
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

/* L's latent padded to rank n (per-layer ranks in one kv_lora_rank): zero columns of W_KVA (and b_KVA) between its r
 * latent columns and its RoPE key, zero rows of W_KVB; the reader cuts them off again (attnlab_kv_ranks). */
static int pad_rank(AttnLayer *L, int n) {
    size_t D = (size_t)L->hidden, r = (size_t)L->kv_rank, dr = (size_t)L->rope_dim, w = (size_t)n + dr;
    Mat *A = mat_new(D, w), *B = mat_new((size_t)n, L->W_KVB->cols);
    float *b = L->b_KVA ? calloc(w, sizeof(float)) : NULL;
    if (!A || !B || (L->b_KVA && !b)) { mat_free(A); mat_free(B); free(b); return al_err("out of memory padding a latent"); }
    for (size_t i = 0; i < D; i++) {                          /* mat_new zeroes */
        memcpy(A->data + i * w, L->W_KVA->data + i * (r + dr), r * sizeof(float));
        memcpy(A->data + i * w + n, L->W_KVA->data + i * (r + dr) + r, dr * sizeof(float));
    }
    memcpy(B->data, L->W_KVB->data, r * B->cols * sizeof(float));
    if (b) { memcpy(b, L->b_KVA, r * sizeof(float)); memcpy(b + n, L->b_KVA + r, dr * sizeof(float)); }
    mat_free(L->W_KVA); mat_free(L->W_KVB); free(L->b_KVA);
    L->W_KVA = A; L->W_KVB = B; L->b_KVA = b;
    L->kv_rank = n;
    return AL_OK;
}

/* A gated keep layer's query written as the source's q_proj: per head [query | gate] columns (W_Q (hidden, 2 H d)), the
 * bias likewise when either has one; W_G, b_G dropped (the reader splits them again: attn_eval.c's load_gate). */
static int gate_into_query(AttnLayer *L) {
    size_t D = (size_t)L->hidden, H = (size_t)L->n_heads, d = (size_t)L->head_dim, w = 2 * H * d;
    Mat *Q = mat_new(D, w);
    float *b = L->b_Q || L->b_G ? calloc(w, sizeof(float)) : NULL;
    if (!Q || (!b && (L->b_Q || L->b_G)) || L->W_G->cols != H * d) {
        mat_free(Q); free(b);
        return al_err("export format attnlab: a gated layer's query and gate do not pair head by head (or out of memory)");
    }
    for (size_t i = 0; i < D; i++)
        for (size_t h = 0; h < H; h++) {
            memcpy(Q->data + i * w + 2 * h * d, L->W_Q->data + i * H * d + h * d, d * sizeof(float));
            memcpy(Q->data + i * w + (2 * h + 1) * d, L->W_G->data + i * H * d + h * d, d * sizeof(float));
        }
    for (size_t h = 0; b && h < H; h++) {
        if (L->b_Q) memcpy(b + 2 * h * d, L->b_Q + h * d, d * sizeof(float));
        if (L->b_G) memcpy(b + (2 * h + 1) * d, L->b_G + h * d, d * sizeof(float));
    }
    mat_free(L->W_Q); mat_free(L->W_G); free(L->b_Q); free(L->b_G);
    L->W_Q = Q; L->W_G = NULL; L->b_Q = b; L->b_G = NULL;
    return AL_OK;
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
        if (!r->layers[l]) continue;             /* a hybrid's other layer (keep): the source's tensors */
        if (!(v[l] = attn_layer_copy(r->layers[l]))) { rc = AL_ERR; break; }
        for (int i = 0; i < AH_N; i++)                  /* BF16-held rewritten matrices widened: scaled below */
            if (i != AH_O && attn_layer_unhold(v[l], (attn_held)i)) rc = AL_ERR;
        if (v[l]->kind == ATTN_GQA) {           /* qk-norm keep: the source's query and scale, read by the source's row */
            if (v[l]->W_G && gate_into_query(v[l])) { rc = AL_ERR; break; }
            continue;
        }
        if (v[l]->kv_rank < attnlab_max_rank(r) && pad_rank(v[l], attnlab_max_rank(r))) { rc = AL_ERR; break; }
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
    attnlab_kept(&r->src->cfg, r->opts.qk_norm == TMLA_QKN_KEEP, kept, sizeof kept);
    cJSON_AddStringToObject(m, "kept", kept);
    if (cfg_row(&r->src->cfg)->text_config)         /* a multimodal source: its text tower converted, the rest as it was */
        cJSON_AddStringToObject(m, "tower", "the text tower's attention layers converted (qk-norm keep); every other "
                                            "tensor of the checkpoint -- the vision tower, the MTP layers, the linear-"
                                            "attention layers -- copied bit for bit under its own name");
    cJSON_AddStringToObject(m, "engines", "none: attnlab's own layout (model_type attnlab_mla); `load DIR` runs it");
}
