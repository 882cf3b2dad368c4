/* mla_export.c -- a TransMLA conversion written as a DeepSeek-V3 checkpoint (config.json, weights
 * in one file or shards with an index, manifest, tokenizer files), and `check`, which loads an
 * export back and compares it with its source. Owns the MlaCheck it returns. */
#define _GNU_SOURCE
#include "mla_export.h"

#include "ckpt_write.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ================================================================ the tensor plan */

enum { T_COPY = -1, T_Q, T_Q_BIAS, T_QA, T_QA_BIAS, T_QB, T_KVA, T_KVA_BIAS, T_KVB, T_O, T_O_BIAS, T_KINDS };

static const char *const new_suffix[T_KINDS] = {
    [T_Q] = "self_attn.q_proj.weight", [T_Q_BIAS] = "self_attn.q_proj.bias", [T_QA] = "self_attn.q_a_proj.weight",
    [T_QA_BIAS] = "self_attn.q_a_proj.bias", [T_QB] = "self_attn.q_b_proj.weight",
    [T_KVA] = "self_attn.kv_a_proj_with_mqa.weight", [T_KVA_BIAS] = "self_attn.kv_a_proj_with_mqa.bias",
    [T_KVB] = "self_attn.kv_b_proj.weight", [T_O] = "self_attn.o_proj.weight", [T_O_BIAS] = "self_attn.o_proj.bias",
};

typedef struct {
    char *name;
    int kind;                 /* T_COPY or a new attention tensor */
    int layer;
    size_t bytes;
    int shard;
} PlanItem;

typedef struct {
    PlanItem *v;
    size_t n, cap;
} Plan;

static void plan_free(Plan *p) {
    for (size_t i = 0; i < p->n; i++) free(p->v[i].name);
    free(p->v);
}

static int plan_add(Plan *p, char *name, int kind, int layer, size_t bytes) {
    if (!name) return AL_ERR;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        PlanItem *nv = realloc(p->v, cap * sizeof *nv);
        if (!nv) { free(name); return al_err("out of memory planning the export"); }
        p->v = nv;
        p->cap = cap;
    }
    p->v[p->n++] = (PlanItem){.name = name, .kind = kind, .layer = layer, .bytes = bytes};
    return AL_OK;
}

static int item_cmp(const void *a, const void *b) {
    return strcmp(((const PlanItem *)a)->name, ((const PlanItem *)b)->name);
}

/* True when name is an attention tensor of some layer ("<prefix>layers.N.self_attn.*"). */
static bool is_attention(const Model *m, const char *name) {
    size_t np = strlen(m->cfg.prefix);
    if (strncmp(name, m->cfg.prefix, np) || strncmp(name + np, "layers.", 7)) return false;
    const char *s = name + np + 7;
    char *end;
    strtol(s, &end, 10);
    return end != s && strncmp(end, ".self_attn.", 11) == 0;
}

/* Shape (rows, cols) of a new tensor (cols 0: 1-D), or false when the layer has none. */
static bool new_shape(const AttnLayer *L, int kind, bool bias, size_t *rows, size_t *cols) {
    const Mat *m = NULL;
    *cols = 0;
    switch (kind) {
    case T_Q: m = L->q_rank ? NULL : L->W_Q; break;
    case T_QA: m = L->q_rank ? L->W_QA : NULL; break;
    case T_QB: m = L->q_rank ? L->W_QB : NULL; break;
    case T_KVA: m = L->W_KVA; break;
    case T_KVB: m = L->W_KVB; break;
    case T_O: m = L->W_O; break;
    case T_Q_BIAS: if (L->q_rank || !L->b_Q) return false; *rows = L->W_Q->cols; return true;
    case T_QA_BIAS: if (!bias || !L->q_rank) return false; *rows = (size_t)L->q_rank; return true;
    case T_KVA_BIAS: if (!bias) return false; *rows = L->W_KVA->cols; return true;
    case T_O_BIAS: if (!bias) return false; *rows = (size_t)L->hidden; return true;
    }
    if (!m) return false;
    *rows = m->cols;            /* HF stores Linear weights (out, in): the transpose of x @ W */
    *cols = m->rows;
    return true;
}

/* The bias values of a new 1-D tensor (zeros where the layer has none); caller frees. */
static float *new_bias(const AttnLayer *L, int kind, size_t n) {
    float *v = al_calloc(n, sizeof(float), "a bias");
    const float *src = kind == T_Q_BIAS ? L->b_Q : kind == T_QA_BIAS ? L->b_QA : kind == T_KVA_BIAS ? L->b_KVA : L->b_O;
    if (v && src) memcpy(v, src, n * sizeof(float));
    return v;
}

/* A new attention matrix, transposed to HF's (out, in) and converted when its shard is written. */
typedef struct {
    const Mat *m;
    dt_type dt;
} MatJob;

static int fill_mat(void *ud, void *dst, size_t nbytes) {
    const MatJob *j = ud;
    Mat *t = mat_transpose(j->m);
    int rc = !t ? AL_ERR : t->rows * t->cols * dt_size(j->dt) == nbytes ? dt_from_f32(j->dt, t->data, t->rows * t->cols, dst)
                                                                       : al_err("internal: a new tensor changed size");
    mat_free(t);
    return rc;
}

/* Adds one plan item to the writer (copies streamed from the source's mapping; new matrices
 * computed when their shard is written). */
static int add_item(CkptWriter *w, const TmlaResult *r, const PlanItem *it, dt_type dt, bool bias) {
    if (it->kind == T_COPY) {
        const st_entry *e;
        const st_file *f;
        if (store_entry(r->src->store, it->name, &e, &f)) return AL_ERR;
        return ckpt_add(w, it->name, e->dtype, e->ndim, e->shape, st_data(f, e), e->end - e->begin);
    }
    const AttnLayer *L = r->layers[it->layer];
    size_t rows, cols;
    new_shape(L, it->kind, bias, &rows, &cols);
    if (cols == 0) {
        float *v = new_bias(L, it->kind, rows);
        Mat row = {.rows = 1, .cols = rows, .data = v};
        int rc = v ? ckpt_add_mat(w, it->name, dt, &row, 1) : AL_ERR;
        free(v);
        return rc;
    }
    const Mat *m = it->kind == T_Q ? L->W_Q : it->kind == T_QA ? L->W_QA : it->kind == T_QB ? L->W_QB
                 : it->kind == T_KVA ? L->W_KVA : it->kind == T_KVB ? L->W_KVB : L->W_O;
    MatJob *j = al_malloc(sizeof *j, it->name);
    if (!j) return AL_ERR;
    *j = (MatJob){.m = m, .dt = dt};
    size_t shape[2] = {m->cols, m->rows};             /* the transpose; 1-D when it has one row */
    bool one = m->cols == 1;
    return ckpt_add_lazy(w, it->name, dt, one ? 1 : 2, one ? shape + 1 : shape, m->rows * m->cols * dt_size(dt), fill_mat, j);
}

/* ================================================================ config and manifest */

static const char *const dropped_keys[] = {
    "model_type", "architectures", "num_key_value_heads", "head_dim", "attention_bias", "sliding_window",
    "use_sliding_window", "max_window_layers", "pretraining_tp", "auto_map", "_name_or_path",
    "mlp_bias", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    "qk_latent_layernorm", "first_k_dense_replace", "rope_interleave", "layer_types", "partial_rotary_factor", NULL};

static void set_num(cJSON *o, const char *k, double v) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, k);
    cJSON_AddNumberToObject(o, k, v);
}

static void set_default_num(cJSON *o, const char *k, double v) {
    if (!cJSON_GetObjectItemCaseSensitive(o, k)) cJSON_AddNumberToObject(o, k, v);
}

static cJSON *make_config(const TmlaResult *r, bool bias, dt_type dt) {
    const ModelConfig *c = &r->src->cfg;
    cJSON *o = r->src->config_tree ? model_config_tree(r->src) : cJSON_CreateObject();
    if (!o) return NULL;
    for (size_t i = 0; dropped_keys[i]; i++) cJSON_DeleteItemFromObjectCaseSensitive(o, dropped_keys[i]);
    model_config_yarn_folded(cJSON_GetObjectItemCaseSensitive(o, "rope_scaling"));   /* folded into W_Q */
    cJSON_AddStringToObject(o, "model_type", "deepseek_v3");
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("DeepseekV3ForCausalLM"));
    set_default_num(o, "hidden_size", c->hidden);
    set_default_num(o, "intermediate_size", c->intermediate);
    set_default_num(o, "num_attention_heads", c->n_heads);
    set_default_num(o, "num_hidden_layers", c->n_layers);
    set_default_num(o, "vocab_size", c->vocab);
    set_default_num(o, "max_position_embeddings", c->max_pos);
    set_default_num(o, "rms_norm_eps", c->norm_eps);
    set_default_num(o, "rope_theta", c->rope_theta);
    if (!cJSON_GetObjectItemCaseSensitive(o, "hidden_act")) cJSON_AddStringToObject(o, "hidden_act", "silu");
    if (!cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings")) cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_embeddings);
    if (!cJSON_GetObjectItemCaseSensitive(o, "torch_dtype"))
        cJSON_AddStringToObject(o, "torch_dtype", dt == DT_BF16 ? "bfloat16" : dt == DT_F16 ? "float16" : "float32");
    set_num(o, "num_key_value_heads", c->n_heads);
    set_num(o, "kv_lora_rank", r->kv_rank);
    if (r->q_rank) cJSON_AddNumberToObject(o, "q_lora_rank", r->q_rank);
    else cJSON_AddNullToObject(o, "q_lora_rank");
    cJSON_AddNumberToObject(o, "qk_rope_head_dim", r->rope_dim);
    cJSON_AddNumberToObject(o, "head_dim", r->rope_dim);
    cJSON_AddNumberToObject(o, "qk_nope_head_dim", r->qk_nope);
    cJSON_AddNumberToObject(o, "v_head_dim", r->v_dim);
    cJSON_AddBoolToObject(o, "attention_bias", bias);
    cJSON_AddBoolToObject(o, "qk_latent_layernorm", false);
    cJSON_AddBoolToObject(o, "rope_interleave", true);
    cJSON_AddNumberToObject(o, "first_k_dense_replace", c->n_layers);
    return o;
}

static cJSON *make_manifest(const TmlaResult *r, bool bias, dt_type dt, size_t nshards) {
    const TmlaOpts *o = &r->opts;
    cJSON *m = cJSON_CreateObject();
    if (!m) return NULL;
    cJSON_AddStringToObject(m, "tool", "attnlab");
    cJSON_AddStringToObject(m, "method", "TransMLA (GQA -> MLA): merge KV heads, RoRoPE, FreqFold, balanced joint "
                                         "low rank of NoPE keys and values (seed 003)");
    char abs[PATH_MAX];
    cJSON_AddStringToObject(m, "source", realpath(r->src_path, abs) ? abs : r->src_path);
    cJSON_AddStringToObject(m, "source_model_type", r->src->cfg.model_type);
    cJSON_AddStringToObject(m, "covariance", r->activation_stats ? "input second moments given per layer (activation statistics)"
                                                 : "weights (unit-variance inputs, the paper's W-based variant)");
    cJSON_AddNumberToObject(m, "kv_lora_rank", r->kv_rank);
    cJSON_AddNumberToObject(m, "qk_rope_head_dim", r->rope_dim);
    cJSON_AddNumberToObject(m, "freqfold", o->freqfold);
    cJSON_AddNumberToObject(m, "qk_nope_head_dim", r->qk_nope);
    cJSON_AddNumberToObject(m, "v_head_dim", r->v_dim);
    if (r->q_rank) cJSON_AddNumberToObject(m, "q_lora_rank", r->q_rank);
    else cJSON_AddNullToObject(m, "q_lora_rank");
    cJSON_AddBoolToObject(m, "balance", o->balance);
    cJSON_AddBoolToObject(m, "attention_bias", bias);
    cJSON_AddStringToObject(m, "attention_dtype", dt_name(dt));
    cJSON_AddNumberToObject(m, "kv_values_per_token_per_layer_before", (double)r->kv_before);
    cJSON_AddNumberToObject(m, "kv_values_per_token_per_layer_after", (double)r->kv_after);
    cJSON_AddNumberToObject(m, "attention_params_before", (double)r->params_before);
    cJSON_AddNumberToObject(m, "attention_params_after", (double)r->params_after);
    cJSON_AddNumberToObject(m, "shards", (double)nshards);
    cJSON_AddNumberToObject(m, "eval_tokens", (double)o->eval_tokens);
    bool qbias = false;
    for (int l = 0; l < r->n_layers; l++) qbias |= r->layers[l] && !r->layers[l]->q_rank && r->layers[l]->b_Q;
    if (qbias)
        cJSON_AddStringToObject(m, "note", "q_proj.bias is written because the source query has a bias and the query "
                                           "has no latent; DeepSeek-V3's stock modeling code builds q_proj without a "
                                           "bias (attnlab reads it). Convert with q-rank to carry it in q_a_proj.bias.");
    cJSON *layers = cJSON_AddArrayToObject(m, "layers");
    for (int l = 0; l < r->n_layers; l++) {
        const TmlaLayerReport *p = &r->rep[l];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        ckpt_json_num(e, "alpha", p->alpha);
        ckpt_json_num(e, "rope_energy", p->rope_energy);
        ckpt_json_num(e, "joint_energy", p->joint_energy);
        ckpt_json_num(e, "score_rel_err", p->score_err);
        ckpt_json_num(e, "output_rel_err", p->out_err);
        ckpt_json_num(e, "joint_energy_other_balance", p->joint_energy_alt);
        ckpt_json_num(e, "score_rel_err_other_balance", p->score_err_alt);
        ckpt_json_num(e, "output_rel_err_other_balance", p->out_err_alt);
        cJSON_AddItemToArray(layers, e);
    }
    return m;
}

/* ================================================================ export */

/* The dtype of the new attention tensors. */
static dt_type export_dtype(const TmlaResult *r, const MlaExportOpts *o) {
    if (o && o->dtype != DT_INVALID && (o->dtype == DT_F32 || o->dtype == DT_F16 || o->dtype == DT_BF16)) return o->dtype;
    dt_type s = r->src->cfg.dtype;
    return s == DT_F32 || s == DT_F16 || s == DT_BF16 ? s : DT_BF16;
}

/* Plans every tensor of the export (sorted by name) with its size. */
static int make_plan(const TmlaResult *r, bool bias, dt_type dt, Plan *p) {
    const Store *st = r->src->store;
    for (size_t i = 0; i < store_count(st); i++) {
        const char *name = store_name_at(st, i);
        if (is_attention(r->src, name)) continue;
        const st_entry *e;
        if (store_entry(st, name, &e, NULL) || plan_add(p, al_strdup(name), T_COPY, -1, e->end - e->begin)) return AL_ERR;
    }
    for (int l = 0; l < r->n_layers; l++)
        for (int k = 0; k < T_KINDS; k++) {
            size_t rows, cols;
            if (!new_shape(r->layers[l], k, bias, &rows, &cols)) continue;
            if (plan_add(p, model_tensor_name(r->src, l, new_suffix[k]), k, l, rows * (cols ? cols : 1) * dt_size(dt)))
                return AL_ERR;
        }
    qsort(p->v, p->n, sizeof *p->v, item_cmp);
    return AL_OK;
}

/* Splits the plan into shards of at most limit bytes (a tensor larger than that gets its own);
 * returns the shard count. */
static size_t assign_shards(const Plan *p, size_t limit) {
    size_t acc = 0, ns = 1;
    for (size_t i = 0; i < p->n; i++) {
        if (acc > 0 && acc + p->v[i].bytes > limit) { ns++; acc = 0; }
        p->v[i].shard = (int)ns - 1;
        acc += p->v[i].bytes;
    }
    return ns;
}

/* Writes the shards (the writer names them and writes the index when there is more than one). */
static int write_weights(const TmlaResult *r, const Plan *p, CkptWriter *w, size_t ns, dt_type dt, bool bias) {
    int rc = AL_OK;
    for (size_t s = 0; rc == AL_OK && s < ns; s++) {
        for (size_t i = 0; rc == AL_OK && i < p->n; i++)
            if (p->v[i].shard == (int)s) rc = add_item(w, r, &p->v[i], dt, bias);
        if (rc == AL_OK) rc = ckpt_shard_end(w);
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    return rc;
}

/* Refuses conversions a DeepSeek-V3 checkpoint cannot hold; *bias: any attention bias. */
static int check_exportable(const TmlaResult *r, bool *bias) {
    *bias = false;
    for (int l = 0; l < r->n_layers; l++)
        if (!r->layers[l])
            return al_err("export: layer %d was not converted; a DeepSeek-V3 checkpoint needs every layer in MLA form "
                          "(convert all layers)", l);
    for (int l = 0; l < r->n_layers; l++) {
        const AttnLayer *L = r->layers[l];
        *bias |= L->b_Q || L->b_QA || L->b_KVA || L->b_O;
        if (L->kv_rank != r->kv_rank || L->rope_dim != r->rope_dim || L->qk_nope != r->qk_nope || L->q_rank != r->q_rank)
            return al_err("export: layer %d has other dims than the conversion's (rank %d, rope %d)", l, L->kv_rank,
                          L->rope_dim);
        double *want = NULL;
        if (attn_rope_freqs_model(r->src, L->rope_dim, &want)) return AL_ERR;
        for (int j = 0; j < L->rope_dim / 2; j++)
            if (fabs(L->inv_freq[j] - want[j]) > 1e-12 * want[j]) {
                free(want);
                return al_err("export: layer %d's RoPE dims are not the model's RoPE of dim %d (pair %d turns at %g, "
                              "not %g): DeepSeek's layout cannot hold them", l, L->rope_dim, j, L->inv_freq[j], want[j]);
            }
        free(want);
    }
    return AL_OK;
}

int mla_export(const TmlaResult *r, const char *dir, const MlaExportOpts *o) {
    bool bias;
    if (o && o->dtype != DT_INVALID && o->dtype != DT_F32 && o->dtype != DT_F16 && o->dtype != DT_BF16)
        return al_err("export: dtype %s: give f32, f16 or bf16", dt_name(o->dtype));
    if (check_exportable(r, &bias)) return AL_ERR;
    const char *src_dir = store_dir(r->src->store);
    CkptWriter *w;
    CkptOpts co = {.src = src_dir, .force = o && o->force, .can_force = true};
    if (ckpt_begin(dir, &co, &w)) return AL_ERR;
    dt_type dt = export_dtype(r, o);
    Plan p = {0};
    size_t nshards = 0;
    int rc = make_plan(r, bias, dt, &p);
    if (rc == AL_OK) nshards = assign_shards(&p, o && o->shard_bytes ? o->shard_bytes : (size_t)4 << 30);
    if (rc == AL_OK) rc = write_weights(r, &p, w, nshards, dt, bias);
    plan_free(&p);
    cJSON *cfg = rc == AL_OK ? make_config(r, bias, dt) : NULL;
    if (rc == AL_OK) rc = cfg ? ckpt_write_json(w, "config.json", cfg) : al_err("out of memory writing config.json");
    cJSON_Delete(cfg);
    cJSON *man = rc == AL_OK ? make_manifest(r, bias, dt, nshards) : NULL;
    if (rc == AL_OK) rc = man ? ckpt_write_json(w, MLA_MANIFEST, man) : al_err("out of memory writing the manifest");
    cJSON_Delete(man);
    if (rc == AL_OK) rc = ckpt_copy_aux(w, src_dir, NULL);
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else ckpt_abort(w);
    if (rc == AL_ERR) al_err_ctx("export to %s", dir);
    return rc;
}

/* ================================================================ check */

void mla_check_free(MlaCheck *c) {
    if (!c) return;
    free(c->export_path);
    free(c->source_path);
    free(c->score_err);
    free(c->out_err);
    free(c);
}

/* The manifest's source path (caller frees). */
static char *manifest_source(const char *dir) {
    char *path = al_asprintf("%s/%s", dir, MLA_MANIFEST);
    struct stat sb;
    if (!path) return NULL;
    if (stat(path, &sb) != 0) {
        al_err("%s: no %s: not an attnlab export; load the source model and give it to check", dir, MLA_MANIFEST);
        free(path);
        return NULL;
    }
    char *text = al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest"), *src = NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "source");
    if (cJSON_IsString(s)) src = al_strdup(s->valuestring);
    else if (text) al_err("%s: no \"source\" string", path);
    cJSON_Delete(root);
    free(text);
    free(path);
    return src;
}

/* Compares every non-attention tensor of src with the export's, byte for byte. */
static void compare_copies(const Model *src, const Model *ex, MlaCheck *c) {
    for (size_t i = 0; i < store_count(src->store); i++) {
        const char *name = store_name_at(src->store, i);
        if (is_attention(src, name)) continue;
        const st_entry *a, *b;
        const st_file *fa, *fb;
        bool same = store_entry(src->store, name, &a, &fa) == AL_OK && store_has(ex->store, name) &&
                    store_entry(ex->store, name, &b, &fb) == AL_OK && a->dtype == b->dtype && a->ndim == b->ndim &&
                    memcmp(a->shape, b->shape, sizeof a->shape) == 0 && a->end - a->begin == b->end - b->begin &&
                    memcmp(st_data(fa, a), st_data(fb, b), a->end - a->begin) == 0;
        if (same) c->copied_same++;
        else {
            if (!c->copied_diff) snprintf(c->first_diff, sizeof c->first_diff, "%s", name);
            c->copied_diff++;
        }
    }
    al_err_clear();
}

int mla_check(const char *dir, Model *src, size_t tokens, uint64_t seed, MlaCheck **out) {
    *out = NULL;
    Model *ex = NULL, *own = NULL;
    MlaCheck *c = al_calloc(1, sizeof *c, "a check");
    if (!c) return AL_ERR;
    int rc = model_open(dir, &ex);
    if (rc == AL_OK && !cfg_is_mla(&ex->cfg))
        rc = al_err("%s is a %s model, not MLA: check compares a TransMLA export with its source", dir, ex->cfg.model_type);
    if (rc == AL_OK && !src) {
        char *sp = manifest_source(dir);
        rc = sp ? model_open(sp, &own) : AL_ERR;
        free(sp);
        src = own;
    }
    if (rc == AL_OK && src->cfg.n_layers != ex->cfg.n_layers)
        rc = al_err("%s has %d layers but the source %s has %d: not its export", dir, ex->cfg.n_layers, src->path,
                    src->cfg.n_layers);
    if (rc == AL_OK) {
        c->export_path = al_strdup(dir);
        c->source_path = al_strdup(src->path);
        c->n_layers = ex->cfg.n_layers;
        c->score_err = al_calloc((size_t)c->n_layers, sizeof(double), "errors");
        c->out_err = al_calloc((size_t)c->n_layers, sizeof(double), "errors");
        c->kv_source = cfg_kv_values(&src->cfg);
        c->kv_export = cfg_kv_values(&ex->cfg);
        if (!c->export_path || !c->source_path || !c->score_err || !c->out_err) rc = AL_ERR;
    }
    size_t T = tokens ? tokens : 64;
    Mat *X = rc == AL_OK ? attn_random_input(T, src->cfg.hidden, seed) : NULL;
    int *pos = rc == AL_OK ? al_malloc3(T, 1, sizeof(int), "positions") : NULL;
    if (rc == AL_OK && (!X || !pos)) rc = AL_ERR;
    for (size_t t = 0; pos && t < T; t++) pos[t] = (int)t;
    for (int l = 0; rc == AL_OK && l < c->n_layers; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        AttnLayer *a = NULL, *b = NULL;
        AttnOut *oa = NULL, *ob = NULL;
        rc = attn_layer_load(src, l, &a);
        if (rc == AL_OK) rc = attn_layer_load(ex, l, &b);
        if (rc == AL_OK) rc = attn_eval(a, X, pos, true, &oa);
        if (rc == AL_OK) rc = attn_eval(b, X, pos, true, &ob);
        if (rc == AL_OK) attn_rel_err(oa, ob, &c->score_err[l], &c->out_err[l]);
        attn_out_free(oa); attn_out_free(ob); attn_layer_free(a); attn_layer_free(b);
        al_progress("layer", (size_t)l + 1, (size_t)c->n_layers);
    }
    if (rc == AL_OK) compare_copies(src, ex, c);
    mat_free(X);
    free(pos);
    model_free(ex);
    model_free(own);
    if (rc) { mla_check_free(c); return rc; }
    *out = c;
    return AL_OK;
}
