/* attn_eval.c -- AttnLayer: loading one attention layer of a model (GQA families, GPT-2, DeepSeek
 * MLA) as row-vector float32 matrices, its held matrices (stored weights in place of a Mat), and the
 * one-layer evaluator (projections with sgemm, or matmul.c's products for held matrices; RoPE,
 * causal softmax per head, o_proj). Owns the AttnLayer and AttnOut objects it returns. */
#define _GNU_SOURCE
#include "attn_eval.h"
#include "attn_stock.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "rope.h"
#include "spill.h"

/* ================================================================ objects */

AttnLayer *attn_layer_new(attn_kind kind) {
    AttnLayer *L = al_calloc(1, sizeof *L, "an attention layer");
    if (L) { L->kind = kind; L->rope = kind == ATTN_MLA ? ROPE_INTERLEAVED : ROPE_HALF; L->norm_eps = 1e-6; L->rope_mscale = 1.0; }
    return L;
}

static void held_free(AttnHeld *h) {
    if (!h) return;
    wmat_free(&h->w);
    if (h->spill) spill_free(h->buf, h->spill);
    else free(h->buf);
    free(h);
}

void attn_layer_free(AttnLayer *L) {
    if (!L) return;
    for (int i = 0; i < AH_N; i++)
        if (!(L->held_borrowed & (1u << i))) held_free(L->held[i]);
    Mat *mats[] = {L->W_Q, L->W_K, L->W_V, L->W_QA, L->W_QB, L->W_KVA, L->W_KVB, L->W_O, L->W_G};
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) mat_free(mats[i]);
    float *vecs[] = {L->b_Q, L->b_K, L->b_V, L->b_QA, L->qa_norm, L->b_KVA, L->kva_norm, L->b_O, L->q_norm, L->k_norm,
                     L->sinks, L->b_G};
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) free(vecs[i]);
    free(L->inv_freq);
    attn_stock_free(L->stock);
    free(L);
}

/* Copies n floats (NULL stays NULL); *ok turns false on allocation failure. */
static float *vec_dup(const float *v, size_t n, bool *ok) {
    if (!v) return NULL;
    float *c = al_malloc3(n, 1, sizeof(float), "a bias vector");
    if (!c) { *ok = false; return NULL; }
    memcpy(c, v, n * sizeof(float));
    return c;
}

static Mat *mat_dup(const Mat *m, bool *ok) {
    if (!m) return NULL;
    Mat *c = mat_copy(m);
    if (!c) *ok = false;
    return c;
}

/* A copy of a held matrix: owned bytes duplicated, a mapping view kept a view (NULL stays NULL). */
static AttnHeld *held_dup(const AttnHeld *h, bool *ok) {
    if (!h) return NULL;
    AttnHeld *c = al_calloc(1, sizeof *c, "a held matrix");
    size_t n = h->buf ? wmat_bytes(&h->w) : 0;
    if (c) *c = (AttnHeld){.w = h->w, .buf = n ? mm_alloc(n, "a held matrix") : NULL};     /* not a spill: own bytes */
    if (c && h->w.own && !(c->w.own = mat_copy(h->w.own))) { free(c); c = NULL; }
    if (c && c->w.own) c->w.data = c->w.own->data;
    if (c && n && !c->buf) { held_free(c); c = NULL; }
    if (c && n) { memcpy(c->buf, h->buf, n); c->w.data = c->buf; }
    if (!c) *ok = false;
    return c;
}

/* Values of the q (or k) norm weight: head_dim per head, or the whole projection. */
static size_t qk_norm_len(const AttnLayer *L, bool key) {
    size_t d = (size_t)L->head_dim, n = (size_t)(key ? L->n_kv_heads : L->n_heads);
    return L->qk_norm == QKN_PROJ ? n * d : L->qk_norm == QKN_HEAD ? d : 0;
}

AttnLayer *attn_layer_copy(const AttnLayer *L) {
    AttnLayer *C = al_malloc(sizeof *C, "an attention layer");
    if (!C) return NULL;
    *C = *L;
    bool ok = true;
    C->W_Q = mat_dup(L->W_Q, &ok); C->W_K = mat_dup(L->W_K, &ok); C->W_V = mat_dup(L->W_V, &ok);
    C->W_QA = mat_dup(L->W_QA, &ok); C->W_QB = mat_dup(L->W_QB, &ok); C->W_KVA = mat_dup(L->W_KVA, &ok);
    C->W_KVB = mat_dup(L->W_KVB, &ok); C->W_O = mat_dup(L->W_O, &ok); C->W_G = mat_dup(L->W_G, &ok);
    C->b_G = vec_dup(L->b_G, L->W_G ? L->W_G->cols : 0, &ok);
    size_t qr, qc = 0, kr, kc = 0;
    if (!attn_layer_dims(L, AH_Q, &qr, &qc)) attn_layer_dims(L, AH_QB, &qr, &qc);
    attn_layer_dims(L, AH_KVA, &kr, &kc);
    C->b_Q = vec_dup(L->b_Q, qc, &ok);
    C->b_K = vec_dup(L->b_K, L->W_K ? L->W_K->cols : 0, &ok);
    C->b_V = vec_dup(L->b_V, L->W_V ? L->W_V->cols : 0, &ok);
    C->b_QA = vec_dup(L->b_QA, (size_t)L->q_rank, &ok);
    C->qa_norm = vec_dup(L->qa_norm, (size_t)L->q_rank, &ok);
    C->b_KVA = vec_dup(L->b_KVA, kc, &ok);
    C->kva_norm = vec_dup(L->kva_norm, (size_t)L->kv_rank, &ok);
    C->b_O = vec_dup(L->b_O, (size_t)L->hidden, &ok);
    C->q_norm = vec_dup(L->q_norm, qk_norm_len(L, false), &ok);
    C->k_norm = vec_dup(L->k_norm, qk_norm_len(L, true), &ok);
    C->sinks = vec_dup(L->sinks, (size_t)L->n_heads, &ok);
    C->held_borrowed = 0;
    C->stock = NULL;          /* a copy runs through attn_eval */
    for (int i = 0; i < AH_N; i++) C->held[i] = held_dup(L->held[i], &ok);
    C->inv_freq = NULL;
    if (L->inv_freq && L->rope_dim > 0) {
        C->inv_freq = al_malloc3((size_t)L->rope_dim / 2, 1, sizeof(double), "RoPE frequencies");
        if (C->inv_freq) memcpy(C->inv_freq, L->inv_freq, (size_t)L->rope_dim / 2 * sizeof(double));
        else ok = false;
    }
    if (!ok) { attn_layer_free(C); return NULL; }
    return C;
}

/* ================================================================ held matrices */

/* The Mat field of slot i. */
static Mat **slot_mat(AttnLayer *L, attn_held i) {
    Mat **m[AH_N] = {&L->W_Q, &L->W_QA, &L->W_QB, &L->W_KVA, &L->W_KVB, &L->W_O};
    return m[i];
}

static const Mat *slot_cmat(const AttnLayer *L, attn_held i) { return *slot_mat((AttnLayer *)L, i); }

int attn_layer_hold(AttnLayer *L, attn_held i, const WMat *W, void *buf) {
    AttnHeld *h = al_calloc(1, sizeof *h, "a held matrix");
    if (!h) { WMat w = *W; wmat_free(&w); free(buf); return AL_ERR; }
    *h = (AttnHeld){.w = *W, .buf = buf};
    attn_layer_drop_held(L, i);
    L->held[i] = h;
    mat_free(*slot_mat(L, i));
    *slot_mat(L, i) = NULL;
    return AL_OK;
}

/* True when the stored weight w (out, in) holds M (in, out) transposed, bit for bit. */
static bool view_equals(const WMat *w, const Mat *M) {
    if (w->rows != M->cols || w->cols != M->rows || w->own) return false;
    float *row = al_malloc3(w->cols, 1, sizeof(float), "a row");
    bool same = row != NULL;
    for (size_t i = 0; same && i < w->rows; i++) {
        wmat_row(w, i, row);
        for (size_t j = 0; same && j < w->cols; j++) same = memcmp(&row[j], &M->data[j * M->cols + i], sizeof(float)) == 0;
    }
    free(row);
    al_err_clear();
    return same;
}

int attn_layer_hold_same(AttnLayer *L, attn_held i, WMat *W) {
    const Mat *M = slot_cmat(L, i);
    if (!M || !view_equals(W, M)) { wmat_free(W); return AL_OK; }
    return attn_layer_hold(L, i, W, NULL);
}

void attn_layer_drop_held(AttnLayer *L, attn_held i) {
    if (!(L->held_borrowed & (1u << i))) held_free(L->held[i]);
    L->held[i] = NULL;
    L->held_borrowed &= ~(1u << i);
}

int attn_layer_unhold(AttnLayer *L, attn_held i) {
    bool owned;
    if (!L->held[i]) return AL_OK;
    const Mat *m = attn_layer_mat(L, i, &owned);
    if (!m) return AL_ERR;
    attn_layer_drop_held(L, i);
    *slot_mat(L, i) = (Mat *)m;
    return AL_OK;
}

int attn_layer_hold_bf16(AttnLayer *L, attn_held i) {
    const Mat *m = slot_cmat(L, i);
    if (!m) return al_err("internal: attn_layer_hold_bf16 on a slot without a float matrix");
    Mat *t = mat_transpose(m);
    void *buf = t ? mm_alloc(t->rows * t->cols * 2, "a BF16 matrix") : NULL;
    int rc = buf ? dt_from_f32(DT_BF16, t->data, t->rows * t->cols, buf) : AL_ERR;
    WMat w = {.dt = DT_BF16, .data = buf, .rows = m->cols, .cols = m->rows};
    mat_free(t);
    if (rc) { free(buf); return AL_ERR; }
    return attn_layer_hold(L, i, &w, buf);
}

void attn_layer_spill_held(AttnLayer *L, attn_held i) {
    AttnHeld *h = L->held[i];
    if (!h || !h->buf || h->spill || (L->held_borrowed & (1u << i))) return;
    size_t n = wmat_bytes(&h->w);
    void *p = spill_copy(h->buf, n);
    if (!p) return;
    free(h->buf);
    h->buf = p;
    h->w.data = p;
    h->spill = n;
}

bool attn_layer_dims(const AttnLayer *L, attn_held i, size_t *rows, size_t *cols) {
    const Mat *m = slot_cmat(L, i);
    const AttnHeld *h = L->held[i];
    if (!m && !h) return false;
    *rows = m ? m->rows : h->w.cols;
    *cols = m ? m->cols : h->w.rows;
    return true;
}

const Mat *attn_layer_mat(const AttnLayer *L, attn_held i, bool *owned) {
    *owned = false;
    if (slot_cmat(L, i)) return slot_cmat(L, i);
    const AttnHeld *h = L->held[i];
    if (!h) { al_err("internal: the layer has no such matrix"); return NULL; }
    Mat *t = mat_new(h->w.rows, h->w.cols), *m = NULL;      /* (out, in) widened, then x @ W's (in, out) */
    for (size_t r = 0; t && r < h->w.rows; r++) wmat_row(&h->w, r, t->data + r * h->w.cols);
    if (t) m = mat_transpose(t);
    mat_free(t);
    *owned = m != NULL;
    return m;
}

size_t attn_layer_bytes(const AttnLayer *L) {
    const Mat *mats[] = {L->W_Q, L->W_K, L->W_V, L->W_QA, L->W_QB, L->W_KVA, L->W_KVB, L->W_O, L->W_G};
    size_t b = 0;
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
        if (mats[i]) b += mats[i]->rows * mats[i]->cols * sizeof(float);
    for (int i = 0; i < AH_N; i++)
        if (L->held[i] && !(L->held_borrowed & (1u << i)))
            b += L->held[i]->buf ? wmat_bytes(&L->held[i]->w) : L->held[i]->w.own ? wmat_bytes(&L->held[i]->w) : 0;
    return b;
}

/* Shape check of one matrix; NULL is an error when required. */
static int need(const Mat *m, const char *what, size_t rows, size_t cols, bool required) {
    if (!m) return required ? al_err("attention layer: %s is missing", what) : AL_OK;
    if (m->rows != rows || m->cols != cols)
        return al_err("attention layer: %s is %zu x %zu but the layer's dims need %zu x %zu", what, m->rows, m->cols,
                      rows, cols);
    return AL_OK;
}

/* need() of slot i, held or not. */
static int need_slot(const AttnLayer *L, attn_held i, const char *what, size_t rows, size_t cols, bool required) {
    size_t r, c;
    if (!attn_layer_dims(L, i, &r, &c)) return required ? al_err("attention layer: %s is missing", what) : AL_OK;
    return need(&(Mat){.rows = r, .cols = c}, what, rows, cols, true);
}

int attn_layer_validate(const AttnLayer *L) {
    size_t D = (size_t)L->hidden, H = (size_t)L->n_heads, dv = (size_t)L->v_dim;
    if (L->hidden <= 0 || L->n_heads <= 0 || L->v_dim <= 0) return al_err("attention layer: dims must be positive");
    if (L->rope_dim % 2 || (L->rope_dim > 0 && !L->inv_freq))
        return al_err("attention layer: %d RoPE dims need an even count and their frequencies", L->rope_dim);
    int rc = need_slot(L, AH_O, "W_O", H * dv, D, true);
    if (rc == AL_OK) rc = need(L->W_G, "W_G (the output gate)", D, H * dv, false);
    if (rc) return rc;
    if (L->kind == ATTN_GQA) {
        size_t G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim;
        if (G == 0 || H % G) return al_err("attention layer: %zu KV head%s must divide %zu head%s", G, al_s(G), H, al_s(H));
        if (L->rope_dim > L->head_dim)
            return al_err("attention layer: %d RoPE dims in a head of %d", L->rope_dim, L->head_dim);
        if (L->qk_norm != QKN_NONE && (!L->q_norm || !L->k_norm))
            return al_err("attention layer: Q/K norm weights are missing");
        if ((rc = need_slot(L, AH_Q, "W_Q", D, H * d, true)) || (rc = need(L->W_K, "W_K", D, G * d, true)) ||
            (rc = need(L->W_V, "W_V", D, G * dv, true)))
            return rc;
        if (L->W_KVA && (rc = need(L->W_KVB, "W_KVB (the keys' and values' rebuild)", L->W_KVA->cols, G * (d + dv), true)))
            return rc;
        return AL_OK;
    }
    size_t dq = (size_t)(L->qk_nope + L->rope_dim), r = (size_t)L->kv_rank;
    if (L->q_rank > 0) {
        if ((rc = need_slot(L, AH_QA, "W_QA", D, (size_t)L->q_rank, true)) ||
            (rc = need_slot(L, AH_QB, "W_QB", (size_t)L->q_rank, H * dq, true)))
            return rc;
    } else if ((rc = need_slot(L, AH_Q, "W_Q", D, H * dq, true)))
        return rc;
    if ((rc = need_slot(L, AH_KVA, "W_KVA", D, r + (size_t)L->rope_dim, true)) ||
        (rc = need_slot(L, AH_KVB, "W_KVB", r, H * ((size_t)L->qk_nope + dv), true)))
        return rc;
    return AL_OK;
}

size_t attn_layer_params(const AttnLayer *L) {
    const Mat *mats[] = {L->W_K, L->W_V, L->W_G};
    size_t p = 0, r, c, qc = 0, kc = 0;
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
        if (mats[i]) p += mats[i]->rows * mats[i]->cols;
    for (int i = 0; i < AH_N; i++)
        if (attn_layer_dims(L, (attn_held)i, &r, &c)) {
            p += r * c;
            if (i == AH_Q || i == AH_QB) qc = c;
            if (i == AH_KVA) kc = c;
        }
    if (L->b_Q) p += qc;
    if (L->b_K) p += L->W_K->cols;
    if (L->b_V) p += L->W_V->cols;
    if (L->b_QA) p += (size_t)L->q_rank;
    if (L->qa_norm) p += (size_t)L->q_rank;
    if (L->b_KVA) p += kc;
    if (L->kva_norm) p += (size_t)L->kv_rank;
    if (L->b_O) p += (size_t)L->hidden;
    if (L->b_G) p += L->W_G->cols;
    if (L->q_norm) p += qk_norm_len(L, false) + qk_norm_len(L, true);
    return p;
}

size_t attn_layer_kv_values(const AttnLayer *L) {
    if (L->kind == ATTN_MLA) return (size_t)L->kv_rank + (size_t)L->rope_dim;
    return (size_t)L->n_kv_heads * ((size_t)L->head_dim + (size_t)L->v_dim);
}

double *attn_rope_freqs(int dim, double theta) {
    if (dim <= 0) return NULL;
    double *f = al_malloc3((size_t)dim / 2, 1, sizeof(double), "RoPE frequencies");
    if (f) rope_plain_freqs(dim, theta, f);
    return f;
}

int attn_rope_freqs_model(const Model *m, int dim, double **out) {
    *out = NULL;
    if (dim <= 0) return al_err("RoPE needs a positive number of dims (%d)", dim);
    double *f = al_malloc3((size_t)dim / 2, 1, sizeof(double), "RoPE frequencies");
    if (!f) return AL_ERR;
    if (rope_inv_freq(&m->cfg.rope_spec, dim, m->cfg.rope_spec.theta, f, m->name ? m->name : m->path)) {
        free(f);
        return AL_ERR;
    }
    *out = f;
    return AL_OK;
}

void attn_out_free(AttnOut *o) {
    if (!o) return;
    free(o->scores);
    free(o->k);
    free(o->v);
    mat_free(o->out);
    free(o);
}

/* ================================================================ what the evaluator covers */


/* ================================================================ loading */

/* The weight of role r in layer L as a transposed float copy (row-vector convention). */
static int read_t(Model *m, int layer, tensor_role r, Mat **out) {
    *out = NULL;
    char name[192];
    if (!cfg_role_name(&m->cfg, r, layer, -1, "weight", name, sizeof name))
        return al_err("internal: a %s model has no %s tensor", m->cfg.model_type, tensor_role_name(r));
    Mat *t = NULL;
    int rc = store_read(m->store, name, &t);
    if (rc) return rc;
    *out = mat_transpose(t);
    mat_free(t);
    return *out ? AL_OK : AL_ERR;
}

/* Optional 1-D tensor of n values: role r's weight or bias (what) in layer L (NULL when absent from
 * the checkpoint or the model's layouts; an error when its size differs). */
static int read_vec(Model *m, int layer, tensor_role r, const char *what, size_t n, float **out) {
    *out = NULL;
    char name[192];
    int rc = AL_OK;
    if (cfg_role_name(&m->cfg, r, layer, -1, what, name, sizeof name) && store_has(m->store, name)) {
        Mat *t = NULL;
        rc = store_read(m->store, name, &t);
        if (rc == AL_OK && t->rows * t->cols != n)
            rc = al_err("tensor '%s' has %zu value%s but the config implies %zu", name, t->rows * t->cols, al_s(t->rows * t->cols), n);
        if (rc == AL_OK && (*out = al_malloc3(n, 1, sizeof(float), name))) memcpy(*out, t->data, n * sizeof(float));
        else if (rc == AL_OK) rc = AL_ERR;
        mat_free(t);
    }
    return rc;
}

/* Assembles per-head views (hidden, w) of `kind` for heads 0..n-1 into one (hidden, n w) matrix. */
static int gather_heads(Model *m, head_kind kind, int layer, int n, Mat **out) {
    *out = NULL;
    Mat *all = NULL;
    for (int h = 0; h < n; h++) {
        Mat *v = NULL;
        if (model_head(m, kind, layer, h, PART_ALL, &v)) { mat_free(all); return AL_ERR; }
        if (!all && !(all = mat_new(v->rows, v->cols * (size_t)n))) { mat_free(v); return AL_ERR; }
        for (size_t i = 0; i < v->rows; i++)
            memcpy(all->data + i * all->cols + (size_t)h * v->cols, v->data + i * v->cols, v->cols * sizeof(float));
        mat_free(v);
    }
    *out = all;
    return AL_OK;
}

/* Per-head biases of `kind` concatenated (NULL when the model has none). */
static int gather_bias(Model *m, head_kind kind, int layer, int n, size_t w, float **out) {
    *out = NULL;
    if (!m->cfg.qkv_bias) return AL_OK;
    float *all = al_malloc3((size_t)n, w, sizeof(float), "biases");
    if (!all) return AL_ERR;
    for (int h = 0; h < n; h++) {
        float *b = NULL;
        size_t nb = 0;
        if (model_head_bias(m, kind, layer, h, &b, &nb)) { free(all); return AL_ERR; }
        if (!b) { free(all); return AL_OK; }
        memcpy(all + (size_t)h * w, b, (nb < w ? nb : w) * sizeof(float));
        free(b);
    }
    *out = all;
    return AL_OK;
}

/* The RoPE frequencies of layer (its base: rope_local_base_freq on Gemma 3's sliding layers, which
 * also skip rope_scaling). */
int attn_rope_freqs_layer(const Model *m, int layer, int dim, double **out) {
    const ModelConfig *c = &m->cfg;
    if (cfg_layer_rope_scaled(c, layer) && cfg_layer_theta(c, layer) == c->rope_spec.theta) {
        if (attn_rope_freqs_model(m, dim, out)) return AL_ERR;
        /* Gemma 4's "proportional" RoPE on the full layers: pairs j >= floor(factor dim / 2) do not turn */
        double pf = c->rope_spec.prop_factor;
        for (int j = (int)floor(pf * dim / 2); pf > 0 && cfg_layer_full_type(c, layer) && j < dim / 2; j++) (*out)[j] = 0;
        return AL_OK;
    }
    *out = attn_rope_freqs(dim, cfg_layer_theta(c, layer));
    return *out ? AL_OK : AL_ERR;
}

/* Q/K norm weights of layer (q_norm / k_norm), and the norm's kind. */
static int load_qk_norm(Model *m, int layer, AttnLayer *L) {
    const ModelConfig *c = &m->cfg;
    L->qk_norm = c->qk_norm;
    L->norm_1p = c->norm == NORM_RMS_1P;
    if (c->qk_norm == QKN_NONE) return AL_OK;
    if (read_vec(m, layer, ROLE_Q_NORM, "weight", qk_norm_len(L, false), &L->q_norm) ||
        read_vec(m, layer, ROLE_K_NORM, "weight", qk_norm_len(L, true), &L->k_norm))
        return AL_ERR;
    if (!L->q_norm || !L->k_norm) return al_err("layer %d: q_norm / k_norm weights are missing (layer 0 has them)", layer);
    return AL_OK;
}

/* Qwen3.5 / Qwen3-Next's output gate: the gate half of q_proj's per-head [query | gate] rows as W_G (hidden, H d),
 * and of its bias when it has one. */
static int load_gate(Model *m, int layer, AttnLayer *L) {
    size_t H = (size_t)L->n_heads, d = (size_t)L->head_dim, D = (size_t)L->hidden;
    Mat *q = NULL;
    float *b = NULL;
    if (read_t(m, layer, ROLE_Q, &q)) return AL_ERR;                           /* (hidden, 2 H d) */
    int rc = q->rows == D && q->cols == 2 * H * d ? AL_OK
             : al_err("layer %d: a gated q_proj has %zu row%s, not 2 x %zu head%s x %zu", layer, q->cols, al_s(q->cols), H, al_s(H), d);
    if (rc == AL_OK && !(L->W_G = mat_new(D, H * d))) rc = AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < D; i++)
        for (size_t h = 0; h < H; h++)
            memcpy(L->W_G->data + i * H * d + h * d, q->data + i * 2 * H * d + (2 * h + 1) * d, d * sizeof(float));
    if (rc == AL_OK) rc = read_vec(m, layer, ROLE_Q, "bias", 2 * H * d, &b);
    if (rc == AL_OK && b && !(L->b_G = al_malloc3(H, d, sizeof(float), "the gate's bias"))) rc = AL_ERR;
    for (size_t h = 0; rc == AL_OK && b && h < H; h++) memcpy(L->b_G + h * d, b + (2 * h + 1) * d, d * sizeof(float));
    mat_free(q);
    free(b);
    return rc;
}

int attn_kv_rebuild(AttnLayer *L) {
    const Mat *A = L->W_KVA, *P = L->W_KVB;
    size_t h = (size_t)L->hidden, n = A ? A->cols : 0, mk = (size_t)L->n_kv_heads * (size_t)L->head_dim;
    size_t m = P ? P->cols : 0, mv = m - mk;
    if (!A || !P || P->rows != n || A->rows != h || m <= mk)
        return al_err("internal: a rebuilt GQA layer needs W_KVA (hidden, n) and W_KVB (n, G d + G dv)");
    mat_free(L->W_K); mat_free(L->W_V);
    free(L->b_K); free(L->b_V);
    L->b_K = L->b_V = NULL;
    L->W_K = mat_new(h, mk);
    L->W_V = mat_new(h, mv);
    if (!L->W_K || !L->W_V) return AL_ERR;
    if (L->b_KVA && (!(L->b_K = al_malloc3(mk, 1, sizeof(float), "a bias")) || !(L->b_V = al_malloc3(mv, 1, sizeof(float), "a bias"))))
        return AL_ERR;
    for (size_t i = 0; i <= h; i++) {                      /* row h: the bias, b_KVA W_KVB */
        const float *a = i < h ? A->data + i * n : L->b_KVA;
        if (!a) break;
        for (size_t j = 0; j < m; j++) {
            double acc = 0;
            for (size_t t = 0; t < n; t++) acc += (double)a[t] * P->data[t * m + j];
            float *dst = i < h ? (j < mk ? L->W_K->data + i * mk + j : L->W_V->data + i * mv + j - mk)
                               : (j < mk ? L->b_K + j : L->b_V + j - mk);
            *dst = (float)acc;
        }
    }
    return AL_OK;
}

/* attnlab's layout of a qk-norm keep conversion (cfg kv_rebuild, attnlab_export.h): the cache's projection
 * kv_a_proj_with_mqa (n, hidden) (+ bias) and kv_b_proj (G d + G dv, n), W_K and W_V formed from them. */
static int load_rebuild(Model *m, int layer, AttnLayer *L) {
    size_t n = (size_t)m->cfg.kv_rebuild;
    int rc = read_t(m, layer, ROLE_KV_A, &L->W_KVA);
    if (rc == AL_OK) rc = read_vec(m, layer, ROLE_KV_A, "bias", n, &L->b_KVA);
    if (rc == AL_OK) rc = read_t(m, layer, ROLE_KV_B, &L->W_KVB);
    return rc == AL_OK ? attn_kv_rebuild(L) : rc;
}

static int load_gqa(Model *m, int layer, AttnLayer *L) {
    const ModelConfig *c = model_layer_cfg(m, layer);             /* Gemma 4's full layers: their own head dims */
    L->n_kv_heads = c->n_kv_heads;
    L->head_dim = cfg_d_qk(c);
    L->rope = cfg_layer_rope(c, layer) ? c->rope : ROPE_NONE;      /* NoPE layers (SmolLM3): none */
    L->rope_dim = L->rope == ROPE_NONE ? 0 : c->qk_rope_dim;
    L->window = cfg_layer_window(c, layer);
    L->chunk = cfg_layer_chunk(c, layer);                          /* Llama 4 */
    L->qk_l2 = cfg_layer_qk_l2(c, layer);
    L->temp_scale = cfg_layer_rope(c, layer) ? 0 : c->temp_scale;
    L->temp_floor = c->temp_floor;
    L->softcap = c->attn_softcap;
    bool scaled = cfg_layer_rope_scaled(c, layer);
    double att = L->rope_dim && scaled ? rope_attention_factor(&c->rope_spec) : 1.0;
    L->scale = cfg_attn_scale(c, layer) * att * att;   /* YaRN's factor on q and k: every dim rotates */
    if (L->rope_dim && attn_rope_freqs_layer(m, layer, L->rope_dim, &L->inv_freq)) return AL_ERR;
    L->v_norm = c->v_norm;                                         /* Gemma 4 */
    if (c->attn_gate && load_gate(m, layer, L)) return AL_ERR;     /* Qwen3.5 / Qwen3-Next */
    if (load_qk_norm(m, layer, L)) return AL_ERR;
    if (c->attn_sinks && read_vec(m, layer, ROLE_SINKS, NULL, (size_t)c->n_heads, &L->sinks)) return AL_ERR;
    if (c->attn_sinks && !L->sinks) return al_err("layer %d: the attention sinks (self_attn.sinks) are missing", layer);
    if (model_layer_load(m, layer)) return AL_ERR;
    if (gather_heads(m, HK_Q, layer, c->n_heads, &L->W_Q) ||
        (c->kv_rebuild ? load_rebuild(m, layer, L)
                       : gather_heads(m, HK_K, layer, c->n_kv_heads, &L->W_K) ||
                             gather_heads(m, HK_V, layer, c->n_kv_heads, &L->W_V)))
        return AL_ERR;
    /* W_O: stack the (dv, hidden) per-head views by rows. */
    if (!(L->W_O = mat_new((size_t)c->n_heads * (size_t)c->v_dim, (size_t)c->hidden))) return AL_ERR;
    for (int h = 0; h < c->n_heads; h++) {
        Mat *v = NULL;
        if (model_head(m, HK_O, layer, h, PART_ALL, &v)) return AL_ERR;
        memcpy(L->W_O->data + (size_t)h * v->rows * v->cols, v->data, v->rows * v->cols * sizeof(float));
        mat_free(v);
    }
    if (gather_bias(m, HK_Q, layer, c->n_heads, (size_t)L->head_dim, &L->b_Q) ||
        (!c->kv_rebuild && (gather_bias(m, HK_K, layer, c->n_kv_heads, (size_t)L->head_dim, &L->b_K) ||
                            gather_bias(m, HK_V, layer, c->n_kv_heads, (size_t)c->v_dim, &L->b_V))))
        return AL_ERR;
    return model_o_bias(m, layer, &L->b_O);
}

/* attnlab_mla's per-layer RoPE frequencies (cfg layer_rope_freqs): self_attn.rope_inv_freq, F64, qk_rope_head_dim / 2. */
static int layer_freqs_f64(Model *m, int layer, AttnLayer *L) {
    char name[192];
    const st_entry *e;
    const st_file *f;
    size_t half = (size_t)L->rope_dim / 2;
    if (!cfg_role_name(&m->cfg, ROLE_ROPE_FREQ, layer, -1, NULL, name, sizeof name) || !store_has(m->store, name))
        return al_err("layer %d: the config says each layer has its own RoPE frequencies (attnlab_layer_rope) but %s is "
                      "missing", layer, name);
    if (store_entry(m->store, name, &e, &f)) return AL_ERR;
    if (e->dtype != DT_F64 || e->end - e->begin != half * sizeof(double))
        return al_err("layer %d: %s is not %zu F64 values (qk_rope_head_dim / 2)", layer, name, half);
    const void *d = st_data(f, e);
    if (!d) return AL_ERR;
    memcpy(L->inv_freq, d, half * sizeof(double));
    return AL_OK;
}

/* An MLA layer of per-layer rank rl < its kv_lora_rank (attnlab_mla's layer_kv_rank): the written latent is padded with
 * zero columns of W_KVA (and b_KVA) and zero rows of W_KVB past rl; they are cut off. */
static int trim_rank(AttnLayer *L, int rl) {
    size_t D = (size_t)L->hidden, r = (size_t)L->kv_rank, dr = (size_t)L->rope_dim, n = (size_t)rl;
    Mat *A = mat_new(D, n + dr), *B = L->W_KVB ? mat_new(n, L->W_KVB->cols) : NULL;
    if (!A || !B) { mat_free(A); mat_free(B); return AL_ERR; }
    for (size_t i = 0; i < D; i++) {
        memcpy(A->data + i * (n + dr), L->W_KVA->data + i * (r + dr), n * sizeof(float));
        memcpy(A->data + i * (n + dr) + n, L->W_KVA->data + i * (r + dr) + r, dr * sizeof(float));
    }
    memcpy(B->data, L->W_KVB->data, n * B->cols * sizeof(float));
    if (L->b_KVA) memmove(L->b_KVA + n, L->b_KVA + r, dr * sizeof(float));
    mat_free(L->W_KVA); mat_free(L->W_KVB);
    L->W_KVA = A;
    L->W_KVB = B;
    L->kv_rank = rl;
    return AL_OK;
}

/* What an MLA layer keeps of its config beyond DeepSeek-V3's (none there; attnlab's own layout, attnlab_export.h,
 * keeps the source's): its sliding window, score soft-cap, sink logits (self_attn.sinks) and a NoPE layer's RoPE
 * frequencies 0, as the forward pass runs them. */
static int mla_extras(Model *m, int layer, AttnLayer *L) {
    const ModelConfig *c = &m->cfg;
    L->window = cfg_layer_window(c, layer);
    L->softcap = c->attn_softcap;
    for (int j = 0; c->rope != ROPE_NONE && !cfg_layer_rope(c, layer) && L->inv_freq && j < L->rope_dim / 2; j++)
        L->inv_freq[j] = 0;                                       /* NoPE (SmolLM3's no_rope_layers) */
    if (c->attn_sinks && read_vec(m, layer, ROLE_SINKS, NULL, (size_t)c->n_heads, &L->sinks)) return AL_ERR;
    if (c->attn_sinks && !L->sinks) return al_err("layer %d: the attention sinks (self_attn.sinks) are missing", layer);
    return AL_OK;
}

static int load_mla(Model *m, int layer, AttnLayer *L) {
    const ModelConfig *c = &m->cfg;
    size_t H = (size_t)c->n_heads, dq = (size_t)cfg_d_qk(c);
    L->qk_nope = c->qk_nope_dim;
    L->rope_dim = c->qk_rope_dim;
    L->kv_rank = c->kv_lora_rank;
    L->q_rank = c->q_lora_rank;
    L->rope = c->rope_spec.layout;
    L->scale = cfg_attn_scale(c, layer);
    L->rope_mscale = rope_attention_factor(&c->rope_spec);
    if (L->rope_dim && attn_rope_freqs_layer(m, layer, L->rope_dim, &L->inv_freq)) return AL_ERR;   /* Gemma 3's bases */
    if (c->layer_rope_freqs && layer_freqs_f64(m, layer, L)) return AL_ERR;
    if (mla_extras(m, layer, L)) return AL_ERR;
    if (L->q_rank > 0) {
        if (read_t(m, layer, ROLE_Q_A, &L->W_QA) || read_t(m, layer, ROLE_Q_B, &L->W_QB) ||
            read_vec(m, layer, ROLE_Q_A, "bias", (size_t)L->q_rank, &L->b_QA) ||
            read_vec(m, layer, ROLE_Q_B, "bias", H * dq, &L->b_Q))
            return AL_ERR;
        if (c->latent_norm) {
            if (read_vec(m, layer, ROLE_Q_A_NORM, "weight", (size_t)L->q_rank, &L->qa_norm)) return AL_ERR;
            if (!L->qa_norm) return al_err("layer %d: the config asks for latent RMSNorm but q_a_layernorm.weight is missing", layer);
        }
    } else if (read_t(m, layer, ROLE_Q, &L->W_Q) || read_vec(m, layer, ROLE_Q, "bias", H * dq, &L->b_Q))
        return AL_ERR;
    if (read_t(m, layer, ROLE_KV_A, &L->W_KVA) ||
        read_vec(m, layer, ROLE_KV_A, "bias", (size_t)(L->kv_rank + L->rope_dim), &L->b_KVA) ||
        read_t(m, layer, ROLE_KV_B, &L->W_KVB) || read_t(m, layer, ROLE_O, &L->W_O) ||
        read_vec(m, layer, ROLE_O, "bias", (size_t)c->hidden, &L->b_O))
        return AL_ERR;
    if (c->latent_norm) {
        if (read_vec(m, layer, ROLE_KV_A_NORM, "weight", (size_t)L->kv_rank, &L->kva_norm)) return AL_ERR;
        if (!L->kva_norm) return al_err("layer %d: the config asks for latent RMSNorm but kv_a_layernorm.weight is missing", layer);
    }
    int rl = c->layer_kv_rank[layer];
    return rl > 0 && rl < L->kv_rank ? trim_rank(L, rl) : AL_OK;
}

int attn_layer_load(Model *m, int layer, AttnLayer **out) {
    *out = NULL;
    if (layer < 0 || layer >= m->cfg.n_layers)
        return al_err("layer %d out of range: this model has layers 0-%d", layer, m->cfg.n_layers - 1);
    if (analysis_check(m, AN_EVAL)) return AL_ERR;   /* what the evaluator does not cover, with the reason */
    bool mla = cfg_is_mla(&m->cfg);
    int src = cfg_kv_source(&m->cfg, layer);
    if (!mla && src != layer)                        /* Gemma 4 */
        return al_err("layer %d reads layer %d's K / V (num_kv_shared_layers): its attention is not a function of its "
                      "own input, so the one-layer evaluator does not load it (the forward pass runs it over layer %d's "
                      "cache, which a transformed layer %d fills)", layer, src, src, src);
    AttnLayer *L = attn_layer_new(mla ? ATTN_MLA : ATTN_GQA);
    if (!L) return AL_ERR;
    L->hidden = m->cfg.hidden;
    L->n_heads = m->cfg.n_heads;
    L->v_dim = model_layer_cfg(m, layer)->v_dim;     /* Gemma 4's full layers: their own */
    L->norm_eps = m->cfg.norm_eps;
    bool pin = !mla && model_layer_pin(m, layer) == AL_OK;   /* the layer's float copies stay while its heads are copied */
    int rc = mla ? load_mla(m, layer, L) : pin ? load_gqa(m, layer, L) : AL_ERR;
    if (pin) model_layer_unpin(m, layer);
    if (rc == AL_OK) rc = attn_layer_validate(L);
    if (rc) { al_err_ctx("layer %d", layer); attn_layer_free(L); return AL_ERR; }
    *out = L;
    return AL_OK;
}

/* ================================================================ evaluation */

/* How held matrices are multiplied: on wk in mode c. */
typedef struct { MmWork *wk; mm_compute c; } EvMm;

/* Y (T, n) = X (T, k; row stride ldx) @ slot i of L (+ b): in bf16 mode a held matrix of an as_loaded layer by
 * matmul.c's product (as the forward pass multiplies a loaded model's); else sgemm on the float32 matrix, a held one
 * widened for the call (a layer not as_loaded runs as its float32 export -- `format attnlab` -- reads back). */
static int proj(const EvMm *e, const AttnLayer *L, attn_held i, const float *X, size_t ldx, size_t T, const float *b,
                float *Y) {
    const AttnHeld *h = L->held[i];
    size_t n;
    if (!h || e->c == MM_F32 || !L->as_loaded) {   /* sgemm on the float32 matrix (a held one widened) */
        bool owned;
        const Mat *W = attn_layer_mat(L, i, &owned);
        if (!W) return AL_ERR;
        n = W->cols;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)n, (int)W->rows, 1.0f, X, (int)ldx, W->data,
                    (int)n, 0.0f, Y, (int)n);
        if (owned) mat_free((Mat *)W);
    } else {
        int rc = mm_xwt(e->wk, &h->w, X, ldx, T, Y, n = h->w.rows, e->c);
        if (rc) return rc;
    }
    if (b)
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < n; j++) Y[t * n + j] += b[j];
    return AL_OK;
}

/* Y = X W + b (see attn_eval.h). */
void attn_linear(const float *X, size_t T, size_t k, const Mat *W, const float *b, float *Y) {
    size_t n = W->cols;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)n, (int)k, 1.0f, X, (int)k, W->data, (int)n,
                0.0f, Y, (int)n);
    if (b)
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < n; j++) Y[t * n + j] += b[j];
}

/* In-place RMSNorm of n values with weight w. */
static void rms_norm(float *x, size_t n, const float *w, double eps) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (size_t i = 0; i < n; i++) x[i] = x[i] * r * w[i];
}

/* The Q/K norm of n heads of d values (row of one token, in place): per head, or over all n d (w NULL: no
 * weight, Llama 4's L2 norm). */
void attn_qk_norm_row(float *x, size_t n, size_t d, qk_norm_kind k, const float *w, bool one_plus, double eps) {
    size_t len = k == QKN_PROJ ? n * d : d, parts = k == QKN_PROJ ? 1 : n;
    for (size_t p = 0; p < parts; p++) {
        float *v = x + p * len;
        double ss = 0;
        for (size_t i = 0; i < len; i++) ss += (double)v[i] * v[i];
        double r = 1.0 / sqrt(ss / (double)len + eps);
        for (size_t i = 0; i < len; i++) v[i] = (float)(v[i] * r * (!w ? 1.0 : one_plus ? 1.0 + w[i] : (double)w[i]));
    }
}

/* DeepSeek's MLA RoPE: the stored (interleaved) dims are de-interleaved, [x0 x2 x4 .. x1 x3 ..],
 * then rotated with rotate_half; the vector stays in de-interleaved order (q and k alike). */
static void rope_mla(float *v, int dim, rope_layout lay, const double *inv_freq, int pos, double mscale, float *tmp) {
    if (lay == ROPE_INTERLEAVED) {
        for (int j = 0; j < dim / 2; j++) { tmp[j] = v[2 * j]; tmp[j + dim / 2] = v[2 * j + 1]; }
        memcpy(v, tmp, (size_t)dim * sizeof(float));
    }
    rope_rotate_rows(v, 1, (size_t)dim, dim, ROPE_HALF, inv_freq, (double)pos, mscale);
}

/* The first key token i sees (window: the last `window` tokens up to i; chunk: its chunk's first). */
static size_t first_key(size_t i, size_t window, size_t chunk) {
    size_t lo = window && i + 1 > window ? i + 1 - window : 0;
    return chunk && i - i % chunk > lo ? i - i % chunk : lo;
}

/* One head over all T rows at once (j: pos0 0, S scratch (T, T); attn_head_causal's arguments):
 * S = scale Q Kᵀ, masked (causal, window) soft-capped softmax, out = P V. Keeps the masked logits
 * in `logits` (T, T) when not NULL. */
static void head_attend(const AttnHeadJob *j, float *logits) {
    size_t T = j->T;
    float *S = j->S;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)j->d, (float)j->scale, j->q, (int)j->ldq,
                j->K, (int)j->ldk, 0.0f, S, (int)T);
    for (size_t i = 0; i < T; i++)
        for (size_t k = 0; k < T; k++)
            if (k > i || (k < first_key(i, j->window, j->chunk) && k >= j->sink_tokens)) S[i * T + k] = 0;
    if (logits) memcpy(logits, S, T * T * sizeof(float));
    for (size_t i = 0; i < T; i++)
        attn_softmax_row_stream(S + i * T, T, j->sink_tokens, first_key(i, j->window, j->chunk), i, j->softcap,
                                j->has_sink ? j->sink : -INFINITY);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)j->dv, (int)T, 1.0f, S, (int)T, j->V, (int)j->ldv,
                0.0f, j->out, (int)j->ldo);
}

/* Output heads (T, H dv) of the GQA heads over Q, K (RoPE applied), V; logits into scores when
 * not NULL. */
static int attend_heads(const AttnLayer *L, size_t T, const float *Q, const float *K, const float *V, float *scores,
                        float *O) {
    size_t H = (size_t)L->n_heads, G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim, dv = (size_t)L->v_dim;
    float *S = al_malloc3(T, T, sizeof(float), "scores");
    if (!S) return AL_ERR;
    for (size_t h = 0; h < H; h++) {
        size_t g = h / (H / G);
        head_attend(&(AttnHeadJob){.q = Q + h * d, .ldq = H * d, .K = K + g * d, .ldk = G * d, .V = V + g * dv,
                                   .ldv = G * dv, .T = T, .d = d, .dv = dv, .scale = L->scale, .window = L->window,
                                   .sink_tokens = L->sink_tokens, .chunk = L->chunk, .softcap = L->softcap, .has_sink = L->sinks != NULL,
                                   .sink = L->sinks ? L->sinks[h] : 0, .S = S, .out = O + h * dv, .ldo = H * dv},
                    scores ? scores + h * T * T : NULL);
    }
    free(S);
    return AL_OK;
}

/* Llama 4 after RoPE: the weightless L2 norm of every q / k head (qk_l2), q times the temperature at pos[t]. */
static void llama4_qk(const AttnLayer *L, size_t T, const int *pos, float *Q, float *K) {
    size_t H = (size_t)L->n_heads, G = (size_t)L->n_kv_heads, d = (size_t)L->head_dim;
    for (size_t t = 0; L->qk_l2 && t < T; t++) {
        attn_qk_norm_row(Q + t * H * d, H, d, QKN_HEAD, NULL, false, L->norm_eps);
        attn_qk_norm_row(K + t * G * d, G, d, QKN_HEAD, NULL, false, L->norm_eps);
    }
    for (size_t t = 0; L->temp_scale != 0 && L->temp_floor > 0 && t < T; t++) {
        float s = (float)(1.0 + L->temp_scale * log1p(floor(((double)pos[t] + 1.0) / L->temp_floor)));
        for (size_t j = 0; j < H * d; j++) Q[t * H * d + j] *= s;
    }
}

/* Gemma 4's v_norm: each of the G value heads of dv in T rows (stride ld) RMS-normed without a weight, in place. */
static void v_norm_rows(float *V, size_t T, size_t G, size_t dv, double eps) {
    for (size_t t = 0; t < T; t++)
        for (size_t g = 0; g < G; g++) {
            float *x = V + t * G * dv + g * dv;
            double ss = 0;
            for (size_t j = 0; j < dv; j++) ss += (double)x[j] * x[j];
            float r = (float)(1.0 / sqrt(ss / (double)dv + eps));
            for (size_t j = 0; j < dv; j++) x[j] *= r;
        }
}

/* The output gate: head outputs O (T, H dv) times sigmoid(X W_G + b_G), as the forward pass computes it. */
static int gate_heads(const AttnLayer *L, const Mat *X, float *O) {
    size_t T = X->rows, n = L->W_G->cols;
    float *g = al_malloc3(T, n, sizeof(float), "the output gate");
    if (!g) return AL_ERR;
    attn_linear(X->data, T, (size_t)L->hidden, L->W_G, L->b_G, g);
    for (size_t i = 0; i < T * n; i++) O[i] *= 1.f / (1.f + expf(-g[i]));
    free(g);
    return AL_OK;
}

/* GQA heads of L over X into O (T, H dv); keep (not NULL) takes the keys after RoPE and the values (attn_eval_kv). */
static int eval_gqa(const AttnLayer *L, const Mat *X, const int *pos, float *scores, float *O, AttnOut *keep) {
    size_t T = X->rows, Dm = (size_t)L->hidden, H = (size_t)L->n_heads, G = (size_t)L->n_kv_heads;
    size_t d = (size_t)L->head_dim, dv = (size_t)L->v_dim;
    float *Q = al_malloc3(T, H * d, sizeof(float), "queries");
    float *K = al_malloc3(T, G * d, sizeof(float), "keys");
    float *V = al_malloc3(T, G * dv, sizeof(float), "values");
    int rc = Q && K && V ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        attn_linear(X->data, T, Dm, L->W_Q, L->b_Q, Q);
        attn_linear(X->data, T, Dm, L->W_K, L->b_K, K);
        attn_linear(X->data, T, Dm, L->W_V, L->b_V, V);
        if (L->v_norm) v_norm_rows(V, T, G, dv, L->norm_eps);
        for (size_t t = 0; t < T && L->qk_norm != QKN_NONE; t++) {
            attn_qk_norm_row(Q + t * H * d, H, d, L->qk_norm, L->q_norm, L->norm_1p, L->norm_eps);
            attn_qk_norm_row(K + t * G * d, G, d, L->qk_norm, L->k_norm, L->norm_1p, L->norm_eps);
        }
        if (L->rope_dim > 0)
            for (size_t t = 0; t < T; t++) {
                rope_rotate_rows(Q + t * H * d, H, d, L->rope_dim, L->rope, L->inv_freq, pos[t], 1.0);
                rope_rotate_rows(K + t * G * d, G, d, L->rope_dim, L->rope, L->inv_freq, pos[t], 1.0);
            }
        llama4_qk(L, T, pos, Q, K);
        rc = attend_heads(L, T, Q, K, V, scores, O);
    }
    if (rc == AL_OK && keep) { keep->k = K; keep->v = V; K = V = NULL; }
    free(Q); free(K); free(V);
    return rc;
}

enum { LOADED_QB = 64 };       /* query rows per block: the forward pass's QCHUNK */

/* The RoPE pairs (interleaved, as stored) of the T rows' `heads` vectors at column c0 (row stride ld, head stride hs)
 * turned as the forward pass turns them: float cos / sin tables of L's frequencies (rope_tables). */
static int rope_loaded(const AttnLayer *L, float *x, size_t T, size_t ld, size_t heads, size_t hs, size_t c0) {
    size_t half = (size_t)L->rope_dim / 2;
    float *inv = al_malloc3(half, 1, sizeof(float), "RoPE frequencies"), *cs = al_malloc3(T, half, sizeof(float), "RoPE"),
          *sn = al_malloc3(T, half, sizeof(float), "RoPE");
    int rc = inv && cs && sn ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        for (size_t j = 0; j < half; j++) inv[j] = (float)L->inv_freq[j];
        rope_tables(cs, sn, T, 0, inv, half, (float)L->rope_mscale);
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < heads; h++)
                rope_rotate_cs(x + t * ld + h * hs + c0, half, ROPE_INTERLEAVED, cs + t * half, sn + t * half);
    }
    free(inv); free(cs); free(sn);
    return rc;
}

/* L->as_loaded: the heads of Q (T, H dq) over keys [k_nope_h | k_pe] and values from KV (T, H (dn + dv)) and the
 * latent rows KVA (T, r + dr), laid out, turned and attended as the forward pass does a loaded MLA layer. */
static int attend_loaded(const AttnLayer *L, size_t T, float *Q, const float *KVA, const float *KV, float *O) {
    size_t H = (size_t)L->n_heads, dn = (size_t)L->qk_nope, dr = (size_t)L->rope_dim, dv = (size_t)L->v_dim;
    size_t dq = dn + dr, r = (size_t)L->kv_rank;
    float *K = al_malloc3(T, H * dq, sizeof(float), "keys"), *V = al_malloc3(T, H * dv, sizeof(float), "values");
    float *S = al_malloc3(LOADED_QB, T, sizeof(float), "scores");
    int rc = K && V && S ? AL_OK : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t h = 0; h < H; h++) {
            const float *src = KV + t * H * (dn + dv) + h * (dn + dv);
            memcpy(K + t * H * dq + h * dq, src, dn * sizeof(float));
            memcpy(K + t * H * dq + h * dq + dn, KVA + t * (r + dr) + r, dr * sizeof(float));
            memcpy(V + t * H * dv + h * dv, src + dn, dv * sizeof(float));
        }
    if (rc == AL_OK && dr && L->rope != ROPE_NONE) rc = rope_loaded(L, Q, T, H * dq, H, dq, dn);
    if (rc == AL_OK && dr && L->rope != ROPE_NONE) rc = rope_loaded(L, K, T, H * dq, H, dq, dn);
    for (size_t h = 0; rc == AL_OK && h < H; h++)
        attn_head_causal(&(AttnHeadJob){.q = Q + h * dq, .ldq = H * dq, .K = K + h * dq, .ldk = H * dq, .V = V + h * dv,
                                        .ldv = H * dv, .T = T, .pos0 = 0, .d = dq, .dv = dv, .scale = L->scale,
                                        .window = L->window, .softcap = L->softcap, .has_sink = L->sinks != NULL,
                                        .sink = L->sinks ? L->sinks[h] : 0, .qb = LOADED_QB, .S = S, .out = O + h * dv,
                                        .ldo = H * dv});
    free(K); free(V); free(S);
    return rc;
}

static int eval_mla(const EvMm *e, const AttnLayer *L, const Mat *X, const int *pos, float *scores, float *O) {
    size_t T = X->rows, Dm = (size_t)L->hidden, H = (size_t)L->n_heads, dn = (size_t)L->qk_nope;
    size_t dr = (size_t)L->rope_dim, dv = (size_t)L->v_dim, r = (size_t)L->kv_rank, dq = dn + dr;
    size_t ql = (size_t)L->q_rank;
    float *Q = al_malloc3(T, H * dq, sizeof(float), "queries");
    float *CQ = ql ? al_malloc3(T, ql, sizeof(float), "query latents") : NULL;
    float *KVA = al_malloc3(T, r + dr, sizeof(float), "KV latents");
    float *KV = al_malloc3(T, H * (dn + dv), sizeof(float), "keys and values");
    float *Qh = al_malloc3(T, dq, sizeof(float), "a head's queries");
    float *Kh = al_malloc3(T, dq, sizeof(float), "a head's keys");
    float *S = al_malloc3(T, T, sizeof(float), "scores");
    float *tmp = al_malloc3(dr ? dr : 1, 1, sizeof(float), "RoPE scratch");
    int rc = Q && (CQ || !ql) && KVA && KV && Qh && Kh && S && tmp ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        if (ql) {
            rc = proj(e, L, AH_QA, X->data, Dm, T, L->b_QA, CQ);
            if (rc == AL_OK && L->qa_norm)
                for (size_t t = 0; t < T; t++) rms_norm(CQ + t * ql, ql, L->qa_norm, L->norm_eps);
            rc = proj(e, L, AH_QB, CQ, ql, T, L->b_Q, Q);
        } else
            rc = proj(e, L, AH_Q, X->data, Dm, T, L->b_Q, Q);
        if (rc == AL_OK) rc = proj(e, L, AH_KVA, X->data, Dm, T, L->b_KVA, KVA);
        if (rc == AL_OK && L->kva_norm)
            for (size_t t = 0; t < T; t++) rms_norm(KVA + t * (r + dr), r, L->kva_norm, L->norm_eps);
        /* The latent c is the first r columns of KVA (row stride r + dr). */
        if (rc == AL_OK) rc = proj(e, L, AH_KVB, KVA, r + dr, T, NULL, KV);
    }
    if (rc == AL_OK && L->as_loaded && !scores) rc = attend_loaded(L, T, Q, KVA, KV, O);
    else if (rc == AL_OK) {
        if (dr && L->rope != ROPE_NONE)                  /* Kimi-Linear's MLA: no RoPE (mla_use_nope) */
            for (size_t t = 0; t < T; t++) {
                rope_mla(KVA + t * (r + dr) + r, (int)dr, L->rope, L->inv_freq, pos[t], L->rope_mscale, tmp);
                for (size_t h = 0; h < H; h++)
                    rope_mla(Q + t * H * dq + h * dq + dn, (int)dr, L->rope, L->inv_freq, pos[t], L->rope_mscale, tmp);
            }
        for (size_t h = 0; h < H; h++) {
            for (size_t t = 0; t < T; t++) {
                memcpy(Qh + t * dq, Q + t * H * dq + h * dq, dq * sizeof(float));
                memcpy(Kh + t * dq, KV + t * H * (dn + dv) + h * (dn + dv), dn * sizeof(float));
                memcpy(Kh + t * dq + dn, KVA + t * (r + dr) + r, dr * sizeof(float));
            }
            head_attend(&(AttnHeadJob){.q = Qh, .ldq = dq, .K = Kh, .ldk = dq, .V = KV + h * (dn + dv) + dn,
                                       .ldv = H * (dn + dv), .T = T, .d = dq, .dv = dv, .scale = L->scale,
                                       .window = L->window, .sink_tokens = L->sink_tokens, .softcap = L->softcap,
                                       .has_sink = L->sinks != NULL,
                                       .sink = L->sinks ? L->sinks[h] : 0, .S = S, .out = O + h * dv, .ldo = H * dv},
                        scores ? scores + h * T * T : NULL);
        }
    }
    free(Q); free(CQ); free(KVA); free(KV); free(Qh); free(Kh); free(S); free(tmp);
    return rc;
}

/* An AttnOut for T tokens of L: out (T, hidden), and the (H, T, T) logits when want_scores. */
static AttnOut *out_new(const AttnLayer *L, size_t T, bool want_scores) {
    AttnOut *o = al_calloc(1, sizeof *o, "attention outputs");
    size_t ss;
    if (!o) return NULL;
    o->T = T;
    o->n_heads = L->n_heads;
    if ((want_scores && (!al_mul_ok((size_t)L->n_heads, T * T, &ss, "attention scores") ||
                         !(o->scores = al_calloc(ss, sizeof(float), "attention scores")))) ||
        !(o->out = mat_new(T, (size_t)L->hidden))) {
        attn_out_free(o);
        return NULL;
    }
    return o;
}

/* Head outputs Ocat (T, H dv) through W_O (+ b_O) into o->out. */
static int out_project(const EvMm *e, const AttnLayer *L, const float *Ocat, AttnOut *o) {
    return proj(e, L, AH_O, Ocat, (size_t)L->n_heads * (size_t)L->v_dim, o->T, L->b_O, o->out->data);
}

int attn_attend(const AttnLayer *L, size_t T, const float *Q, const float *K, const float *V, bool want_scores,
                AttnOut **out) {
    *out = NULL;
    if (T == 0) return al_err("attention input has no tokens");
    AttnOut *o = out_new(L, T, want_scores);
    float *Ocat = al_malloc3(T, (size_t)L->n_heads * (size_t)L->v_dim, sizeof(float), "head outputs");
    MmWork *wk = L->held[AH_O] ? mm_work_new(0) : NULL;
    int rc = o && Ocat && (wk || !L->held[AH_O]) ? attend_heads(L, T, Q, K, V, o->scores, Ocat) : AL_ERR;
    if (rc == AL_OK) rc = out_project(&(EvMm){wk, MM_F32}, L, Ocat, o);
    mm_work_free(wk);
    free(Ocat);
    if (rc) { attn_out_free(o); return rc; }
    *out = o;
    return AL_OK;
}

/* attn_eval, and attn_eval_kv when keep_kv (held matrices through e). */
static int eval_layer(const EvMm *e, const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, bool keep_kv,
                      AttnOut **out) {
    *out = NULL;
    if (attn_layer_validate(L)) return AL_ERR;
    if (X->cols != (size_t)L->hidden)
        return al_err("attention input has %zu column%s but the layer's hidden size is %d", X->cols, al_s(X->cols), L->hidden);
    size_t T = X->rows;
    if (T == 0) return al_err("attention input has no tokens");
    AttnOut *o = out_new(L, T, want_scores);
    float *Ocat = al_malloc3(T, (size_t)L->n_heads * (size_t)L->v_dim, sizeof(float), "head outputs");
    int rc = o && Ocat ? AL_OK : AL_ERR;
    if (rc == AL_OK)
        rc = L->kind == ATTN_GQA ? eval_gqa(L, X, pos, o->scores, Ocat, keep_kv ? o : NULL)
                                 : eval_mla(e, L, X, pos, o->scores, Ocat);
    if (rc == AL_OK && L->W_G) rc = gate_heads(L, X, Ocat);
    if (rc == AL_OK) rc = out_project(e, L, Ocat, o);
    free(Ocat);
    if (rc) { attn_out_free(o); return rc; }
    *out = o;
    return AL_OK;
}

int attn_eval_mm(const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, bool keep_kv, MmWork *wk,
                 mm_compute c, AttnOut **out) {
    *out = NULL;
    if (keep_kv && L->kind != ATTN_GQA) return al_err("internal: attn_eval_kv on an MLA layer (its cache is the latent)");
    bool held = false;
    for (int i = 0; i < AH_N; i++) held |= L->held[i] != NULL;
    MmWork *own = held && !wk ? mm_work_new(0) : NULL;
    if (held && !wk && !own) return AL_ERR;
    int rc = eval_layer(&(EvMm){wk ? wk : own, c}, L, X, pos, want_scores, keep_kv, out);
    mm_work_free(own);
    return rc;
}

int attn_eval(const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, AttnOut **out) {
    return attn_eval_mm(L, X, pos, want_scores, false, NULL, MM_F32, out);
}

int attn_eval_kv(const AttnLayer *L, const Mat *X, const int *pos, bool want_scores, AttnOut **out) {
    return attn_eval_mm(L, X, pos, want_scores, true, NULL, MM_F32, out);
}

int attn_layer_finite(const AttnLayer *L) {
    const Mat *M[] = {L->W_Q, L->W_K, L->W_V, L->W_QA, L->W_QB, L->W_KVA, L->W_KVB, L->W_O, L->W_G};
    static const char *const names[] = {"W_Q", "W_K", "W_V", "W_QA", "W_QB", "W_KVA", "W_KVB", "W_O", "W_G"};
    for (size_t i = 0; i < sizeof M / sizeof *M; i++) {
        size_t at = M[i] ? mat_first_nonfinite(M[i]) : (size_t)-1;
        if (at != (size_t)-1)
            return al_err("%s holds NaN/Inf (first at [%zu, %zu]): this layer's errors are undefined (check the "
                          "checkpoint; the warning names the tensor)", names[i], at / M[i]->cols, at % M[i]->cols);
    }
    return AL_OK;
}

void attn_rel_err(const AttnOut *a, const AttnOut *b, double *score_err, double *out_err) {
    if (score_err)
        *score_err = a->scores && b->scores && a->T == b->T && a->n_heads == b->n_heads
                         ? vec_rel_err(a->scores, b->scores, (size_t)a->n_heads * a->T * a->T) : NAN;
    if (out_err)
        *out_err = a->out->rows == b->out->rows && a->out->cols == b->out->cols
                       ? vec_rel_err(a->out->data, b->out->data, a->out->rows * a->out->cols) : NAN;
}

/* splitmix64 step. */
static uint64_t mix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

Mat *attn_random_input(size_t T, int hidden, uint64_t seed) {
    Mat *X = mat_new(T, (size_t)hidden);
    if (!X) return NULL;
    uint64_t s = seed;
    for (size_t i = 0; i < X->rows * X->cols; i++) {
        double u1 = ((mix64(&s) >> 11) + 0.5) / 9007199254740992.0, u2 = ((mix64(&s) >> 11) + 0.5) / 9007199254740992.0;
        X->data[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    return X;
}
