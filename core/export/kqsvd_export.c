/* kqsvd_export.c -- writes learned KQ-SVD / K-SVD / Eigen projections: kvsvd-<method>.safetensors
 * per set and kvsvd_manifest.json, through the checkpoint writer (staged beside the folder and
 * swapped in whole; force replaces an earlier export entirely). See kqsvd.h. */
#define _GNU_SOURCE
#include "kqsvd.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_write.h"
#include "safetensors.h"

/* One set's safetensors file. */
static int write_set(CkptWriter *w, const KqProj *p, const char *fname) {
    const CalibShape *sh = &p->sh;
    size_t G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v;
    int rc = ckpt_file_begin(w, fname, "attnlab-kvsvd");
    if (rc == AL_OK) rc = ckpt_meta(w, "method", kq_method_name(p->method));
    char b[64];
    snprintf(b, sizeof b, "%.17g", p->spec.beta);
    if (rc == AL_OK) rc = ckpt_meta(w, "beta", b);
    for (int l = 0; rc == AL_OK && l < sh->n_layers; l++) {
        struct { const char *n; const double *x; size_t dim; int R; } t[4] = {
            {"proj_k", p->A_K[l], d, p->rank_k[l]}, {"proj_q", p->B_K[l], d, p->rank_k[l]},
            {"proj_v", p->A_V[l], dv, p->rank_v[l]}, {"proj_o", p->B_V[l], dv, p->rank_v[l]}};
        for (int i = 0; rc == AL_OK && i < 4; i++) {
            size_t n = G * t[i].dim * (size_t)t[i].R;
            float *f = al_malloc3(n ? n : 1, 1, sizeof *f, "projection tensor");
            if (!f) { rc = AL_ERR; break; }
            vec_d2f(t[i].x, n, f);
            char name[64];
            snprintf(name, sizeof name, "layers.%d.%s", l, t[i].n);
            size_t shape[3] = {G, t[i].dim, (size_t)t[i].R};
            rc = ckpt_add_owned(w, name, DT_F32, 3, shape, f, n * sizeof *f);
        }
    }
    return rc == AL_OK ? ckpt_file_end(w) : rc;
}

/* A layer's evaluation errors in the manifest (written and read back under these keys). */
static const CkptJsonField ERR_FIELDS[] = {
    {"k_err", offsetof(KqErr, k)}, {"q_err", offsetof(KqErr, q)}, {"v_err", offsetof(KqErr, v)},
    {"kq_err", offsetof(KqErr, kq)}, {"out_err", offsetof(KqErr, out)}, {NULL, 0}};

/* The manifest's JSON. */
static cJSON *manifest(const KqProj *const *sets, size_t nsets, const KqExportInfo *info) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "attnlab-kvsvd");
    cJSON_AddNumberToObject(root, "version", 1);
    if (info && info->model_name) cJSON_AddStringToObject(root, "model", info->model_name);
    char abs[PATH_MAX];              /* absolute, so `check DIR` finds it from any folder */
    if (info && info->model_path)
        cJSON_AddStringToObject(root, "model_path", realpath(info->model_path, abs) ? abs : info->model_path);
    cJSON_AddStringToObject(root, "seed", "KQ-SVD (Lesens, Rakhshan, Rabusseau): K-SVD 3.3, Eigen 3.4, KQ-SVD 4.3 + App. B");
    cJSON_AddStringToObject(root, "usage",
                            "per layer and KV head g: cache k_c = k_rope @ proj_k[g] (R_K values); scores = (q_rope @ "
                            "proj_q[g]) . k_c; cache v_c = v @ proj_v[g] (R_V values); head output = softmax(...) @ v_c "
                            "@ proj_o[g]^T (proj_o^T folds into o_proj). Keys and queries are taken after RoPE.");
    const CalibShape *sh = nsets ? &sets[0]->sh : NULL;
    if (sh) {
        cJSON *s = cJSON_AddObjectToObject(root, "shape");
        cJSON_AddNumberToObject(s, "n_layers", sh->n_layers);
        cJSON_AddNumberToObject(s, "n_heads", sh->n_heads);
        cJSON_AddNumberToObject(s, "n_kv_heads", sh->n_kv_heads);
        cJSON_AddNumberToObject(s, "d_qk", sh->d_qk);
        cJSON_AddNumberToObject(s, "d_v", sh->d_v);
    }
    if (info && info->st) {
        const CalibStats *st = info->st;
        cJSON *c = cJSON_AddObjectToObject(root, "calibration");
        if (st->source) cJSON_AddStringToObject(c, "source", st->source);
        if (st->split) cJSON_AddStringToObject(c, "split", st->split);
        cJSON_AddNumberToObject(c, "tokens", (double)st->tokens[0]);
        cJSON_AddNumberToObject(c, "sequences", (double)st->seqs[0]);
        cJSON_AddNumberToObject(c, "seqlen", (double)st->seqlen);
    }
    if (info && info->eval_split) cJSON_AddStringToObject(root, "eval_split", info->eval_split);
    cJSON *ms = cJSON_AddArrayToObject(root, "methods");
    for (size_t s = 0; s < nsets; s++) {
        const KqProj *p = sets[s];
        cJSON *m = cJSON_CreateObject();
        char fname[64];
        snprintf(fname, sizeof fname, "kvsvd-%s.safetensors", kq_method_name(p->method));
        cJSON_AddStringToObject(m, "method", kq_method_name(p->method));
        cJSON_AddStringToObject(m, "file", fname);
        if (p->spec.by_eps) cJSON_AddNumberToObject(m, "eps", p->spec.eps);
        else cJSON_AddNumberToObject(m, "rank", p->spec.rank);
        cJSON_AddNumberToObject(m, "beta", p->spec.beta);
        cJSON *ls = cJSON_AddArrayToObject(m, "layers");
        const KqErr *errs = info && info->errs ? info->errs[s] : NULL;
        for (int l = 0; l < p->sh.n_layers; l++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "layer", l);
            cJSON_AddNumberToObject(o, "rank_k", p->rank_k[l]);
            cJSON_AddNumberToObject(o, "rank_v", p->rank_v[l]);
            cJSON_AddNumberToObject(o, "cal_k_err", kq_rel(p->cal_k[l].k, p->cal_k[l].nk));
            cJSON_AddNumberToObject(o, "cal_q_err", kq_rel(p->cal_k[l].q, p->cal_k[l].nq));
            cJSON_AddNumberToObject(o, "cal_v_err", kq_rel(p->cal_v[l].k, p->cal_v[l].nk));
            cJSON_AddNumberToObject(o, "cal_kq_err", kq_rel(p->cal_k[l].kq, p->cal_k[l].nkq));
            if (p->cal_v[l].nkq > 0) cJSON_AddNumberToObject(o, "cal_vo_err", kq_rel(p->cal_v[l].kq, p->cal_v[l].nkq));
            if (errs && errs[l].n_seq) ckpt_json_fields(o, &errs[l], ERR_FIELDS);
            cJSON_AddItemToArray(ls, o);
        }
        cJSON_AddItemToArray(ms, m);
    }
    return root;
}

int kqsvd_export(const char *dir, const KqProj *const *sets, size_t nsets, const KqExportInfo *info, size_t *files) {
    if (files) *files = 0;
    if (nsets == 0) return al_err("export: no projections learned yet: run `kvsvd learn` first");
    CkptWriter *w;
    CkptOpts co = {.src = info ? info->model_path : NULL, .force = info && info->force, .can_force = true};
    if (ckpt_begin(dir, &co, &w)) return AL_ERR;
    int rc = AL_OK;
    for (size_t s = 0; rc == AL_OK && s < nsets; s++) {
        char fname[64];
        snprintf(fname, sizeof fname, "kvsvd-%s.safetensors", kq_method_name(sets[s]->method));
        rc = write_set(w, sets[s], fname);
    }
    cJSON *j = rc == AL_OK ? manifest(sets, nsets, info) : NULL;
    if (rc == AL_OK) rc = j ? ckpt_write_json(w, KQ_MANIFEST, j) : al_err("out of memory writing the manifest");
    cJSON_Delete(j);
    if (rc == AL_OK) return ckpt_commit(w, files) == AL_OK ? AL_OK : al_err_ctx("export to %s", dir);
    ckpt_abort(w);
    if (rc == AL_ERR) al_err_ctx("export to %s", dir);
    return rc;
}

/* ================================================================ reading an export back */

void kqsvd_export_free(KqExport *e) {
    if (!e) return;
    for (size_t s = 0; s < KQ_NMETHODS; s++) { kq_proj_free(e->sets[s]); free(e->errs[s]); }
    free(e->model_path);
    free(e->model_name);
    free(e->eval_split);
    free(e->calib_source);
    free(e);
}

static cJSON *read_manifest(const char *dir) {
    char *path = al_asprintf("%s/%s", dir, KQ_MANIFEST);
    char *text = path ? al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (text && (!root || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "attnlab-kvsvd"))) {
        al_err("%s: not a KQ-SVD manifest (format attnlab-kvsvd)", path);
        cJSON_Delete(root);
        root = NULL;
    }
    free(text);
    free(path);
    return root;
}

static char *str_of(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? al_strdup(it->valuestring) : NULL;
}

char *kqsvd_export_model(const char *dir) {
    cJSON *root = read_manifest(dir);
    char *p = root ? str_of(root, "model_path") : NULL;
    if (root && !p) al_err("%s/%s: no \"model_path\"", dir, KQ_MANIFEST);
    cJSON_Delete(root);
    return p;
}

/* One projection tensor (G, dim, R) of f into a new double array; *R its rank (checked against
 * want_R when that is >= 0). */
static int read_proj(const st_file *f, const char *name, int G, int dim, int want_R, double **out, int *R) {
    const st_entry *e = st_find(f, name);
    if (!e || e->dtype != DT_F32 || e->ndim != 3 || e->shape[0] != (size_t)G || e->shape[1] != (size_t)dim ||
        e->shape[2] < 1 || (want_R >= 0 && e->shape[2] != (size_t)want_R))
        return al_err("%s: %s must be F32 of shape (%d, %d, R)", st_path(f), name, G, dim);
    *R = (int)e->shape[2];
    size_t n = st_numel(e);
    if (!(*out = al_malloc3(n, 1, sizeof(double), "projections"))) return AL_ERR;
    const float *src = st_data(f, e);
    for (size_t i = 0; i < n; i++) (*out)[i] = src[i];
    return AL_OK;
}

/* One method's set from its file. */
static int load_set(const char *dir, const char *file, kq_method m, const CalibShape *sh, KqProj **out) {
    char *path = al_asprintf("%s/%s", dir, file);
    st_file *f = NULL;
    KqProj *p = al_calloc(1, sizeof *p, "projections");
    size_t L = (size_t)sh->n_layers;
    int rc = path && p ? st_open(path, &f) : AL_ERR;
    free(path);
    if (rc == AL_OK) {
        p->method = m;
        p->sh = *sh;
        p->spec.beta = 1;
        p->rank_k = al_calloc(L, sizeof(int), "ranks");
        p->rank_v = al_calloc(L, sizeof(int), "ranks");
        p->A_K = al_calloc(L, sizeof(double *), "projections");
        p->B_K = al_calloc(L, sizeof(double *), "projections");
        p->A_V = al_calloc(L, sizeof(double *), "projections");
        p->B_V = al_calloc(L, sizeof(double *), "projections");
        p->cal_k = al_calloc(L, sizeof(KqGramErr), "errors");
        p->cal_v = al_calloc(L, sizeof(KqGramErr), "errors");
        if (!p->rank_k || !p->rank_v || !p->A_K || !p->B_K || !p->A_V || !p->B_V || !p->cal_k || !p->cal_v) rc = AL_ERR;
    }
    for (int l = 0; rc == AL_OK && l < sh->n_layers; l++) {
        char n[64];
        int G = sh->n_kv_heads;
        snprintf(n, sizeof n, "layers.%d.proj_k", l);
        rc = read_proj(f, n, G, sh->d_qk, -1, &p->A_K[l], &p->rank_k[l]);
        snprintf(n, sizeof n, "layers.%d.proj_q", l);
        if (rc == AL_OK) rc = read_proj(f, n, G, sh->d_qk, p->rank_k[l], &p->B_K[l], &p->rank_k[l]);
        snprintf(n, sizeof n, "layers.%d.proj_v", l);
        if (rc == AL_OK) rc = read_proj(f, n, G, sh->d_v, -1, &p->A_V[l], &p->rank_v[l]);
        snprintf(n, sizeof n, "layers.%d.proj_o", l);
        if (rc == AL_OK) rc = read_proj(f, n, G, sh->d_v, p->rank_v[l], &p->B_V[l], &p->rank_v[l]);
    }
    if (f) st_close(f);
    if (rc) { kq_proj_free(p); return rc; }
    *out = p;
    return AL_OK;
}

/* The recorded evaluation errors of one method (NULL when none were recorded). */
static KqErr *recorded_errs(const cJSON *m, int n_layers) {
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(m, "layers");
    KqErr *e = al_calloc((size_t)n_layers, sizeof *e, "recorded errors");
    bool any = false;
    for (int l = 0; e && l < n_layers; l++) {
        const cJSON *o = cJSON_GetArrayItem(ls, l);
        KqErr r = {.n_seq = 1};
        const CkptJsonField *f = ERR_FIELDS;
        for (const cJSON *v; f->key && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(o, f->key)); f++)
            memcpy((char *)&r + f->offset, &v->valuedouble, sizeof v->valuedouble);
        if (f->key) continue;    /* one is missing: none recorded */
        e[l] = r;
        any = true;
    }
    if (!any) { free(e); return NULL; }
    return e;
}

/* The manifest's shape against sh. */
static int check_shape(const char *dir, const cJSON *root, const CalibShape *sh) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "shape");
    const char *keys[] = {"n_layers", "n_heads", "n_kv_heads", "d_qk", "d_v"};
    int want[] = {sh->n_layers, sh->n_heads, sh->n_kv_heads, sh->d_qk, sh->d_v};
    for (int i = 0; i < 5; i++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, keys[i]);
        if (!cJSON_IsNumber(it) || it->valueint != want[i])
            return al_err("%s/%s: shape.%s is not the model's %d: projections of another model", dir, KQ_MANIFEST,
                          keys[i], want[i]);
    }
    return AL_OK;
}

int kqsvd_load(const char *dir, const CalibShape *sh, KqExport **out) {
    *out = NULL;
    cJSON *root = read_manifest(dir);
    if (!root) return AL_ERR;
    KqExport *e = al_calloc(1, sizeof *e, "a KQ-SVD export");
    int rc = e ? check_shape(dir, root, sh) : AL_ERR;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "methods"), *m;
    cJSON_ArrayForEach(m, ms) {
        if (rc || e->nsets == KQ_NMETHODS) break;
        char *name = str_of(m, "method"), *file = str_of(m, "file");
        int k = 0;
        while (k < KQ_NMETHODS && (!name || strcmp(name, kq_method_name((kq_method)k)))) k++;
        if (k == KQ_NMETHODS || !file || strchr(file, '/'))
            rc = al_err("%s/%s: a method entry without a known method and a file name", dir, KQ_MANIFEST);
        if (rc == AL_OK) rc = load_set(dir, file, (kq_method)k, sh, &e->sets[e->nsets]);
        if (rc == AL_OK) e->errs[e->nsets++] = recorded_errs(m, sh->n_layers);
        free(name);
        free(file);
    }
    if (rc == AL_OK && !e->nsets) rc = al_err("%s/%s lists no methods", dir, KQ_MANIFEST);
    if (rc == AL_OK) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "calibration");
        const cJSON *sl = cJSON_GetObjectItemCaseSensitive(c, "seqlen");
        e->model_path = str_of(root, "model_path");
        e->model_name = str_of(root, "model");
        e->eval_split = str_of(root, "eval_split");
        e->calib_source = str_of(c, "source");
        e->calib_seqlen = cJSON_IsNumber(sl) && sl->valuedouble >= 2 ? (size_t)sl->valuedouble : 0;
    }
    cJSON_Delete(root);
    if (rc) { kqsvd_export_free(e); return al_err_ctx("reading the KQ-SVD export %s", dir); }
    *out = e;
    return AL_OK;
}
