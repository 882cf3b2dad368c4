/* tpa_export.c -- writes a TPA conversion in attnlab's own layout (attnlab-tpa v1, read back by
 * tpa_load): tpa_factors.safetensors (queries, outputs, RoPE frequencies, the K and V factors)
 * and tpa_manifest.json, through the checkpoint writer (staged, swapped in whole). See tpa.h. */
#define _GNU_SOURCE
#include "tpa.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_write.h"
#include "analyses.h"
#include "layersel.h"

/* A float matrix in dtype, 1-D when it has one row (as the loader expects). */
static int add_mat(CkptWriter *w, const char *name, dt_type dtype, const Mat *m) {
    return ckpt_add_mat(w, name, dtype, m, m->rows == 1 ? 1 : 2);
}

/* Adds a 1-D F32 vector (n values) or a 2-D F32 (rows, cols) array. */
static int add_f32(CkptWriter *w, const char *name, const float *v, size_t rows, size_t cols, int ndim) {
    size_t shape[2] = {rows, cols};
    if (ndim == 1) shape[0] = rows * cols;
    return ckpt_add(w, name, DT_F32, ndim, shape, v, rows * cols * sizeof(float));
}

/* Adds one factor's tensors under prefix ("layers.L.k"). */
static int add_factor(CkptWriter *w, const char *prefix, const TpaFactor *f, dt_type dtype) {
    char name[128];
    int lim = f->form == TPA_FORM_A ? f->G : f->dh;
    snprintf(name, sizeof name, "%s.fixed", prefix);
    int rc = add_f32(w, name, f->fixed, (size_t)f->R, (size_t)lim, 2);
    snprintf(name, sizeof name, "%s.ctx.weight", prefix);
    if (rc == AL_OK) rc = add_mat(w, name, dtype, f->ctx);
    snprintf(name, sizeof name, "%s.ctx.bias", prefix);
    if (rc == AL_OK && f->bias) rc = add_f32(w, name, f->bias, 1, f->ctx->cols, 1);
    return rc;
}

/* A layer's record in the manifest. */
static const CkptJsonField LAYER_FIELDS[] = {
    {"k_energy", offsetof(TpaLayerReport, k_energy)}, {"v_energy", offsetof(TpaLayerReport, v_energy)},
    {"k_err", offsetof(TpaLayerReport, k_err)}, {"v_err", offsetof(TpaLayerReport, v_err)},
    {"score_err", offsetof(TpaLayerReport, score_err)}, {"out_err", offsetof(TpaLayerReport, out_err)},
    {NULL, 0}};

/* The manifest. */
static cJSON *manifest(const TpaModel *t, const AttnLayer *L0, dt_type dtype, const Model *src) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", TPA_FORMAT);
    cJSON_AddNumberToObject(root, "version", TPA_FORMAT_VERSION);
    cJSON_AddStringToObject(root, "method", "non-contextual TPA re-factoring of K and V (seed 004, 3.4-3.5)");
    cJSON_AddStringToObject(root, "note", "no standard loader exists for non-contextual TPA: attnlab reads this "
                                          "folder (check DIR); tensors use the row-vector convention y = x @ W");
    cJSON_AddStringToObject(root, "form", tpa_form_name(t->opts.form));
    cJSON_AddNumberToObject(root, "k_rank", t->opts.k_rank);
    cJSON_AddNumberToObject(root, "v_rank", t->opts.v_rank);
    cJSON_AddBoolToObject(root, "exact", t->exact);
    cJSON_AddBoolToObject(root, "activation_stats", t->activation_stats);
    cJSON_AddStringToObject(root, "dtype", dt_name(dtype));
    cJSON_AddNumberToObject(root, "num_hidden_layers", t->n_layers);
    cJSON_AddNumberToObject(root, "hidden_size", t->hidden);
    cJSON_AddNumberToObject(root, "num_attention_heads", t->n_heads);
    cJSON_AddNumberToObject(root, "num_key_value_heads", t->n_kv_heads);
    cJSON_AddNumberToObject(root, "head_dim", t->head_dim);
    cJSON_AddNumberToObject(root, "v_head_dim", t->v_dim);
    cJSON_AddStringToObject(root, "rope_layout", L0->rope_dim ? rope_layout_name(L0->rope) : rope_layout_name(ROPE_NONE));
    cJSON_AddNumberToObject(root, "rope_dim", L0->rope_dim);
    cJSON_AddNumberToObject(root, "softmax_scale", L0->scale);
    cJSON *kv = cJSON_AddObjectToObject(root, "kv_values_per_token_per_layer");
    cJSON_AddNumberToObject(kv, "source", (double)t->kv_before);
    cJSON_AddNumberToObject(kv, "tpa", (double)t->kv_after);
    cJSON *pp = cJSON_AddObjectToObject(root, "attn_params_per_layer");
    cJSON_AddNumberToObject(pp, "source", (double)t->params_before);
    cJSON_AddNumberToObject(pp, "tpa", (double)t->params_after);
    cJSON *s = cJSON_AddObjectToObject(root, "source");
    char abs[PATH_MAX];              /* absolute, so `check DIR` finds it from any folder */
    cJSON_AddStringToObject(s, "path", !t->src_path ? "" : realpath(t->src_path, abs) ? abs : t->src_path);
    cJSON_AddStringToObject(s, "name", t->src_name ? t->src_name : "");
    if (src) {
        cJSON_AddStringToObject(s, "model_type", src->cfg.model_type);
        cJSON *cfg = model_config_tree(src);
        if (cfg) cJSON_AddItemToObject(s, "config", cfg);
    }
    cJSON *tens = cJSON_AddObjectToObject(root, "tensors");
    cJSON_AddStringToObject(tens, "layers.L.q.weight", "(hidden, heads * head_dim) queries, with layers.L.q.bias");
    cJSON_AddStringToObject(tens, "layers.L.o.weight", "(heads * v_head_dim, hidden) output, with layers.L.o.bias");
    cJSON_AddStringToObject(tens, "layers.L.rope.inv_freq", "(rope_dim / 2) F64 angle per position of RoPE pair j "
                                                          "(all 0 on a NoPE layer)");
    cJSON_AddStringToObject(tens, "layers.L.sinks", "(heads) F32 sink logit per head joining each softmax row (gpt-oss); "
                                                  "layers[L].sliding_window and attn_softcap: the layer's mask and cap");
    cJSON_AddStringToObject(tens, "layers.L.{k,v}.fixed",
                            t->opts.form == TPA_FORM_A ? "(R, kv_heads) non-contextual head factors a_r"
                                                       : "(R, head_dim) non-contextual token factors b_r");
    cJSON_AddStringToObject(tens, "layers.L.{k,v}.ctx.weight",
                            t->opts.form == TPA_FORM_A
                                ? "(hidden, R * head_dim): b_r(x) = x W[:, r d:(r+1) d] + bias, cached (keys rotated by RoPE first)"
                                : "(hidden, R * kv_heads): a_r(x)[g] = x W[:, r G + g] + bias, cached");
    cJSON_AddStringToObject(tens, "reconstruction", "K_t (kv_heads x head_dim) = (1/R) sum_r a_r (outer) b_r; query head "
                                                    "i reads KV head i / (heads / kv_heads)");
    cJSON *layers = cJSON_AddArrayToObject(root, "layers");
    for (int l = 0; l < t->n_layers; l++) {
        const TpaLayerReport *r = &t->layers[l]->rep;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", l);
        ckpt_json_fields(o, r, LAYER_FIELDS);
        const AttnLayer *L = t->layers[l]->dense;         /* the source's mask and cap (issue 30): 0 when none */
        cJSON_AddNumberToObject(o, "sliding_window", (double)L->window);
        cJSON_AddNumberToObject(o, "attn_softcap", L->softcap);
        cJSON_AddItemToArray(layers, o);
    }
    return root;
}

/* One layer's tensors. */
static int add_layer(CkptWriter *w, int l, const TpaLayer *tl, dt_type dtype, int rope_dim) {
    const AttnLayer *L = tl->dense;
    char name[128];
    snprintf(name, sizeof name, "layers.%d.q.weight", l);
    int rc = add_mat(w, name, dtype, L->W_Q);
    snprintf(name, sizeof name, "layers.%d.q.bias", l);
    if (rc == AL_OK && L->b_Q) rc = add_f32(w, name, L->b_Q, 1, L->W_Q->cols, 1);
    snprintf(name, sizeof name, "layers.%d.o.weight", l);
    if (rc == AL_OK) rc = add_mat(w, name, dtype, L->W_O);
    snprintf(name, sizeof name, "layers.%d.o.bias", l);
    if (rc == AL_OK && L->b_O) rc = add_f32(w, name, L->b_O, 1, (size_t)L->hidden, 1);
    snprintf(name, sizeof name, "layers.%d.sinks", l);
    if (rc == AL_OK && L->sinks) rc = add_f32(w, name, L->sinks, 1, (size_t)L->n_heads, 1);
    if (rc == AL_OK && L->rope_dim > 0) {
        size_t shape[1] = {(size_t)L->rope_dim / 2};
        snprintf(name, sizeof name, "layers.%d.rope.inv_freq", l);
        rc = ckpt_add(w, name, DT_F64, 1, shape, L->inv_freq, shape[0] * sizeof(double));
    } else if (rc == AL_OK && rope_dim > 0) {        /* a NoPE layer of a RoPE model (SmolLM3): frequencies 0 */
        size_t shape[1] = {(size_t)rope_dim / 2};
        double *zero = calloc(shape[0], sizeof(double));
        snprintf(name, sizeof name, "layers.%d.rope.inv_freq", l);
        rc = zero ? ckpt_add_owned(w, name, DT_F64, 1, shape, zero, shape[0] * sizeof(double)) : al_err("out of memory");
    }
    snprintf(name, sizeof name, "layers.%d.k", l);
    if (rc == AL_OK) rc = add_factor(w, name, &tl->K, dtype);
    snprintf(name, sizeof name, "layers.%d.v", l);
    if (rc == AL_OK) rc = add_factor(w, name, &tl->V, dtype);
    return rc;
}

int tpa_export(const TpaModel *t, const char *dir, dt_type dtype) {
    return tpa_export_opts(t, dir, &(TpaExportOpts){.dtype = dtype});
}

int tpa_export_opts(const TpaModel *t, const char *dir, const TpaExportOpts *o) {
    dt_type dtype = o->dtype;
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return al_err("TPA export: dtype %s: give F32, F16 or BF16", dt_name(dtype));
    for (int l = 0; l < t->n_layers; l++)
        if (!t->layers[l] && t->src && !layersel_attn(&t->src->cfg, l))
            return al_err("TPA export: layer %d of %s is %s: the TPA format holds every layer as TPA attention; "
                          "the conversion runs in the session (ppl, check)", l, t->src_name, layersel_other_kind(&t->src->cfg));
        else if (!t->layers[l])
            return al_err("TPA export: layer %d was not converted: run the conversion on every layer (layers all)", l);
    CkptWriter *w;
    CkptOpts co = {.src = t->src_path, .force = o->force, .can_force = true};
    if (ckpt_begin(dir, &co, &w)) return al_err_ctx("TPA export to %s", dir);
    int rc = ckpt_file_begin(w, TPA_FACTORS, TPA_FORMAT);
    for (int l = 0; rc == AL_OK && l < t->n_layers; l++) rc = add_layer(w, l, t->layers[l], dtype, t->layers[0]->dense->rope_dim);
    if (rc == AL_OK) rc = ckpt_file_end(w);
    cJSON *man = rc == AL_OK ? manifest(t, t->layers[0]->dense, dtype, t->src) : NULL;
    if (rc == AL_OK && man && o->check) rc = ci_write(w, man, o->check);
    if (rc == AL_OK) rc = man ? ckpt_write_json(w, TPA_MANIFEST, man) : al_err("TPA export: out of memory");
    cJSON_Delete(man);
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else ckpt_abort(w);
    if (rc == AL_ERR) al_err_ctx("TPA export to %s", dir);
    return rc;
}
