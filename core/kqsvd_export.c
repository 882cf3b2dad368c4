/* kqsvd_export.c -- writes learned KQ-SVD / K-SVD / Eigen projections: kvsvd-<method>.safetensors
 * per set and kvsvd_manifest.json, through the checkpoint writer (staged beside the folder and
 * swapped in whole; force replaces an earlier export entirely). See kqsvd.h. */
#define _GNU_SOURCE
#include "kqsvd.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_write.h"

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

/* The manifest's JSON. */
static cJSON *manifest(const KqProj *const *sets, size_t nsets, const KqExportInfo *info) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "attnlab-kvsvd");
    cJSON_AddNumberToObject(root, "version", 1);
    if (info && info->model_name) cJSON_AddStringToObject(root, "model", info->model_name);
    if (info && info->model_path) cJSON_AddStringToObject(root, "model_path", info->model_path);
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
            if (errs && errs[l].n_seq) {
                cJSON_AddNumberToObject(o, "k_err", errs[l].k);
                cJSON_AddNumberToObject(o, "q_err", errs[l].q);
                cJSON_AddNumberToObject(o, "v_err", errs[l].v);
                cJSON_AddNumberToObject(o, "kq_err", errs[l].kq);
                cJSON_AddNumberToObject(o, "out_err", errs[l].out);
            }
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
