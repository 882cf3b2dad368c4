/* tmla_lm.c -- a Llama-family language model with swappable attention layers (embeddings,
 * RMSNorm, attention through core/attn_eval.c, SwiGLU MLP, LM head), its windowed perplexity,
 * and the TransMLA perplexity studies: the RoPE-removal curve (Figure 3b) and the KV table
 * (Figure 4b). See tmla_lm.h. Activations are float32 row-major (T, width); weights are the
 * checkpoint's (out, in) matrices applied as x @ Wᵀ. */
#define _GNU_SOURCE
#include "tmla_lm.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LCHUNK 64              /* rows per logits block */

/* ================================================================ the model */

typedef struct {
    Mat *n1, *n2;              /* input / post-attention RMSNorm weights (1, D) */
    Mat *gate, *up, *down;     /* (FF, D), (FF, D), (D, FF) */
    AttnLayer *orig;           /* the checkpoint's attention */
    const AttnLayer *cur;      /* what runs: orig or a borrowed replacement */
} TlmLayer;

struct TlmModel {
    Model *m;
    int n_layers;
    size_t D, FF, V;
    double eps;
    Mat *embed;                /* (V, D) */
    Mat *head;                 /* (V, D); NULL: tied to embed */
    Mat *norm;                 /* (1, D) */
    TlmLayer *L;               /* (n_layers) */
};

void tlm_free(TlmModel *t) {
    if (!t) return;
    for (int l = 0; t->L && l < t->n_layers; l++) {
        TlmLayer *y = &t->L[l];
        mat_free(y->n1); mat_free(y->n2); mat_free(y->gate); mat_free(y->up); mat_free(y->down);
        attn_layer_free(y->orig);
    }
    free(t->L);
    mat_free(t->embed); mat_free(t->head); mat_free(t->norm);
    free(t);
}

Model *tlm_model(const TlmModel *t) { return t->m; }

/* Reads tensor `name` (layer < 0: global, under the model's prefix) and checks its element count. */
static int read_t(Model *m, int layer, const char *suffix, size_t rows, size_t cols, Mat **out) {
    char *name = layer >= 0 ? model_tensor_name(m, layer, suffix) : al_asprintf("%s%s", m->cfg.prefix, suffix);
    if (!name) return AL_ERR;
    int rc = store_read(m->store, name, out);
    if (rc == AL_OK && (*out)->rows * (*out)->cols != rows * cols) {
        rc = al_err("tensor '%s' has %zu x %zu values; the model's dims need %zu x %zu", name, (*out)->rows,
                    (*out)->cols, rows, cols);
        mat_free(*out);
        *out = NULL;
    }
    free(name);
    return rc;
}

/* Refuses what this evaluator does not cover, naming it. */
static int tlm_check(const Model *m) {
    const ModelConfig *c = &m->cfg;
    if (c->family != FAM_LLAMA && c->family != FAM_MISTRAL && c->family != FAM_QWEN2 && c->family != FAM_LLAMA2C)
        return al_err("%s (%s): the in-memory perplexity of converted layers covers Llama, Mistral, Qwen2 and llama2.c "
                      "models", m->name ? m->name : m->path, c->model_type);
    if (attn_check_model(m)) return AL_ERR;
    cJSON *root = m->config_json ? cJSON_Parse(m->config_json) : NULL;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    int rc = AL_OK;
    if (cJSON_IsString(a) && strcmp(a->valuestring, "silu") && strcmp(a->valuestring, "swish"))
        rc = al_err("%s: hidden_act '%s': the in-memory perplexity covers SwiGLU (silu) MLPs", m->path, a->valuestring);
    cJSON_Delete(root);
    char *b = model_tensor_name(m, 0, "mlp.gate_proj.bias");
    if (rc == AL_OK && b && store_has(m->store, b))
        rc = al_err("%s: MLP biases (%s) are not covered by the in-memory perplexity", m->path, b);
    free(b);
    return rc;
}

int tlm_new(Model *m, TlmModel **out) {
    *out = NULL;
    if (tlm_check(m)) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    TlmModel *t = al_calloc(1, sizeof *t, "a language model");
    if (!t) return AL_ERR;
    t->m = m;
    t->n_layers = c->n_layers;
    t->D = (size_t)c->hidden;
    t->FF = (size_t)c->intermediate;
    t->V = (size_t)c->vocab;
    t->eps = c->norm_eps > 0 ? c->norm_eps : 1e-5;
    int rc = t->FF && t->V ? AL_OK : al_err("%s: the config gives no vocab_size or intermediate_size", m->path);
    if (rc == AL_OK && !(t->L = al_calloc((size_t)c->n_layers, sizeof *t->L, "layers"))) rc = AL_ERR;
    if (rc == AL_OK) rc = read_t(m, -1, "embed_tokens.weight", t->V, t->D, &t->embed);
    if (rc == AL_OK) rc = read_t(m, -1, "norm.weight", 1, t->D, &t->norm);
    if (rc == AL_OK && store_has(m->store, "lm_head.weight")) rc = store_read(m->store, "lm_head.weight", &t->head);
    else if (rc == AL_OK && !c->tie_embeddings && c->family != FAM_LLAMA2C)
        rc = al_err("%s: no lm_head.weight and tie_word_embeddings is not set", m->path);
    if (rc == AL_OK && t->head && (t->head->rows != t->V || t->head->cols != t->D))
        rc = al_err("lm_head.weight is %zu x %zu; the model needs %zu x %zu", t->head->rows, t->head->cols, t->V, t->D);
    for (int l = 0; rc == AL_OK && l < c->n_layers; l++) {
        TlmLayer *y = &t->L[l];
        rc = read_t(m, l, "input_layernorm.weight", 1, t->D, &y->n1);
        if (rc == AL_OK) rc = read_t(m, l, "post_attention_layernorm.weight", 1, t->D, &y->n2);
        if (rc == AL_OK) rc = read_t(m, l, "mlp.gate_proj.weight", t->FF, t->D, &y->gate);
        if (rc == AL_OK) rc = read_t(m, l, "mlp.up_proj.weight", t->FF, t->D, &y->up);
        if (rc == AL_OK) rc = read_t(m, l, "mlp.down_proj.weight", t->D, t->FF, &y->down);
        if (rc == AL_OK) rc = attn_layer_load(m, l, &y->orig);
        y->cur = y->orig;
        if (rc) al_err_ctx("layer %d", l);
    }
    if (rc) { tlm_free(t); return AL_ERR; }
    *out = t;
    return AL_OK;
}

const AttnLayer *tlm_original(const TlmModel *t, int layer) {
    return layer >= 0 && layer < t->n_layers ? t->L[layer].orig : NULL;
}

int tlm_set_attn(TlmModel *t, int layer, const AttnLayer *L) {
    if (layer < 0 || layer >= t->n_layers) return al_err("layer %d out of range 0-%d", layer, t->n_layers - 1);
    if (L && (size_t)L->hidden != t->D)
        return al_err("layer %d: the attention reads %d wide inputs; the model's hidden size is %zu", layer, L->hidden,
                      t->D);
    t->L[layer].cur = L ? L : t->L[layer].orig;
    return AL_OK;
}

void tlm_reset_attn(TlmModel *t) {
    for (int l = 0; l < t->n_layers; l++) t->L[l].cur = t->L[l].orig;
}

/* ================================================================ the pass */

/* out = RMSNorm(x) * w over T rows of width n. */
static void rmsnorm(const float *x, size_t T, size_t n, const float *w, double eps, float *out) {
    for (size_t t = 0; t < T; t++) {
        const float *r = x + t * n;
        double ss = 0;
        for (size_t j = 0; j < n; j++) ss += (double)r[j] * r[j];
        float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (size_t j = 0; j < n; j++) out[t * n + j] = r[j] * inv * w[j];
    }
}

/* The residual stream X (T, D) through layer l (attention, then MLP), in place. */
static int layer_pass(TlmModel *t, int l, Mat *X, Mat *Hn, float *A, float *B, const int *pos) {
    TlmLayer *y = &t->L[l];
    size_t T = X->rows, D = t->D, FF = t->FF;
    rmsnorm(X->data, T, D, y->n1->data, t->eps, Hn->data);
    AttnOut *o = NULL;
    int rc = attn_eval(y->cur, Hn, pos, false, &o);
    if (rc) return al_err_ctx("layer %d attention", l);
    for (size_t i = 0; i < T * D; i++) X->data[i] += o->out->data[i];
    attn_out_free(o);
    rmsnorm(X->data, T, D, y->n2->data, t->eps, Hn->data);
    /* A = Hn gateᵀ, B = Hn upᵀ (T, FF); A = silu(A) B; X += A downᵀ */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)FF, (int)D, 1.f, Hn->data, (int)D,
                y->gate->data, (int)D, 0.f, A, (int)FF);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)FF, (int)D, 1.f, Hn->data, (int)D, y->up->data,
                (int)D, 0.f, B, (int)FF);
    for (size_t i = 0; i < T * FF; i++) A[i] = A[i] / (1.f + expf(-A[i])) * B[i];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)D, (int)FF, 1.f, A, (int)FF, y->down->data,
                (int)FF, 1.f, X->data, (int)D);
    return AL_OK;
}

/* Σ over rows t of -log softmax(z_t)[tokens[t + 1]] for the final hidden states Hn (T, D). */
static int head_nll(const TlmModel *t, const Mat *Hn, const int *tokens, double *sum) {
    size_t T = Hn->rows, D = t->D, V = t->V;
    const Mat *W = t->head ? t->head : t->embed;
    float *Z = al_malloc3(LCHUNK, V, sizeof(float), "logits");
    if (!Z) return AL_ERR;
    *sum = 0;
    for (size_t t0 = 0; t0 + 1 < T; t0 += LCHUNK) {
        size_t nb = T - 1 - t0 < LCHUNK ? T - 1 - t0 : LCHUNK;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nb, (int)V, (int)D, 1.f, Hn->data + t0 * D, (int)D,
                    W->data, (int)D, 0.f, Z, (int)V);
        for (size_t r = 0; r < nb; r++) {
            const float *z = Z + r * V;
            float mx = z[0];
            for (size_t v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
            double se = 0;
            for (size_t v = 0; v < V; v++) se += exp((double)z[v] - mx);
            *sum += log(se) + mx - z[tokens[t0 + r + 1]];
        }
    }
    free(Z);
    return AL_OK;
}

int tlm_nll(TlmModel *t, const int *tokens, size_t T, double *nll_sum, size_t *count) {
    *nll_sum = 0;
    *count = 0;
    if (T < 2) return al_err("perplexity needs at least 2 tokens, got %zu", T);
    for (size_t i = 0; i < T; i++)
        if (tokens[i] < 0 || (size_t)tokens[i] >= t->V)
            return al_err("token %d at position %zu is outside the vocabulary (0-%zu)", tokens[i], i, t->V - 1);
    size_t D = t->D;
    Mat *X = mat_new(T, D), *Hn = mat_new(T, D);
    float *A = al_malloc3(T, t->FF, sizeof(float), "MLP activations");
    float *B = al_malloc3(T, t->FF, sizeof(float), "MLP activations");
    int *pos = al_malloc3(T, 1, sizeof(int), "positions");
    int rc = X && Hn && A && B && pos ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < T; i++) {
        memcpy(X->data + i * D, t->embed->data + (size_t)tokens[i] * D, D * sizeof(float));
        pos[i] = (int)i;
    }
    for (int l = 0; rc == AL_OK && l < t->n_layers; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        rc = layer_pass(t, l, X, Hn, A, B, pos);
    }
    if (rc == AL_OK) {
        rmsnorm(X->data, T, D, t->norm->data, t->eps, Hn->data);
        rc = head_nll(t, Hn, tokens, nll_sum);
    }
    if (rc == AL_OK) *count = T - 1;
    mat_free(X); mat_free(Hn); free(A); free(B); free(pos);
    return rc;
}

int tlm_nll_tlm(void *ud, const int *tokens, size_t T, double *nll_sum, size_t *count) {
    return tlm_nll(ud, tokens, T, nll_sum, count);
}

int tlm_nll_fwd(void *ud, const int *tokens, size_t T, double *nll_sum, size_t *count) {
    return fwd_nll(ud, tokens, T, nll_sum, count);
}

int tlm_windows_nll(tlm_nll_fn fn, void *ud, const int *ids, size_t n, size_t seqlen, double *mean_nll,
                    size_t *count) {
    *mean_nll = NAN;
    *count = 0;
    if (seqlen < 2) return al_err("perplexity windows need at least 2 tokens, not %zu", seqlen);
    if (n < 2) return al_err("perplexity needs at least 2 tokens; the text has %zu", n);
    double sum = 0;
    size_t cnt = 0;
    for (size_t start = 0; start + 1 < n; start += seqlen) {
        size_t len = n - start < seqlen ? n - start : seqlen, c;
        double s;
        if (al_interrupted()) return AL_INTERRUPTED;
        int rc = fn(ud, ids + start, len, &s, &c);
        if (rc) return rc;
        sum += s;
        cnt += c;
    }
    *mean_nll = sum / (double)cnt;
    *count = cnt;
    return AL_OK;
}

/* ================================================================ shared by the studies */

/* Per converted layer: the key covariance of the merged key under the layer's statistics. */
typedef struct {
    int lo, hi;
    double **C_kv;             /* (n_layers) entries in [lo, hi] */
    double **C_K;
} LayerCov;

static void cov_free(LayerCov *c, int n_layers) {
    for (int l = 0; l < n_layers; l++) {
        if (c->C_kv) free(c->C_kv[l]);
        if (c->C_K) free(c->C_K[l]);
    }
    free(c->C_kv);
    free(c->C_K);
    memset(c, 0, sizeof *c);
}

/* The covariances of layers [lo, hi] under sigma / mu (NULL: weights). */
static int cov_new(TlmModel *t, int lo, int hi, const double *const *sigma, const double *const *mu, LayerCov *c) {
    memset(c, 0, sizeof *c);
    c->lo = lo;
    c->hi = hi;
    c->C_kv = al_calloc((size_t)t->n_layers, sizeof *c->C_kv, "covariances");
    c->C_K = al_calloc((size_t)t->n_layers, sizeof *c->C_K, "covariances");
    int rc = c->C_kv && c->C_K ? AL_OK : AL_ERR;
    for (int l = lo; rc == AL_OK && l <= hi; l++) {
        TmlaLayer *T = NULL;
        const double *S = sigma ? sigma[l] : NULL, *m = S && mu ? mu[l] : NULL;
        rc = tmla_merge(t->L[l].orig, &T);
        if (rc == AL_OK) rc = tmla_kv_cov_stats(t->L[l].orig, S, m, &c->C_kv[l]);
        if (rc == AL_OK && !(c->C_K[l] = tmla_key_cov(T, c->C_kv[l]))) rc = AL_ERR;
        tmla_layer_free(T);
    }
    if (rc) cov_free(c, t->n_layers);
    return rc;
}

/* Resolves a layer range (hi < 0: the last). */
static int layer_range(const TlmModel *t, int *lo, int *hi) {
    if (*hi < 0) *hi = t->n_layers - 1;
    if (*lo < 0 || *lo > *hi || *hi >= t->n_layers)
        return al_err("layers %d-%d out of range: the model has layers 0-%d", *lo, *hi, t->n_layers - 1);
    return AL_OK;
}

/* Mean NLL with the current layers. */
static int eval_nll(TlmModel *t, const int *ids, size_t n, size_t seqlen, double *nll, size_t *count) {
    return tlm_windows_nll(tlm_nll_tlm, t, ids, n, seqlen, nll, count);
}

/* Frees built layers [lo, hi] and restores the originals. */
static void drop_layers(TlmModel *t, AttnLayer **mla, int lo, int hi) {
    for (int l = lo; l <= hi; l++) {
        attn_layer_free(mla[l]);
        mla[l] = NULL;
    }
    tlm_reset_attn(t);
}

/* ================================================================ Figure 3b */

void tlm_removal_free(TlmRemoval *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_curves; i++) {
        TlmRemovalCurve *c = &r->curves[i];
        free(c->removed); free(c->rope_dims); free(c->energy); free(c->nll);
    }
    free(r->curves);
    free(r);
}

/* Layer l with RoPE on `kp` merged pairs: RoRoPE (+ FreqFold M) keeping the strongest rotated
 * pairs, or (M == 0) MHA2MLA's kp / G frequencies per KV head. *kept: key energy fraction. */
static int build_removed(TmlaLayer *T, const AttnLayer *gqa, int M, size_t kp, const double *C_K, const double *S,
                         const double *mu, AttnLayer **mla, double *kept) {
    int rc;
    if (M > 0) {
        rc = tmla_rorope(T, M, C_K);
        if (rc == AL_OK) rc = tmla_sort_pairs(T);
    } else {
        size_t G = (size_t)gqa->n_kv_heads, r = kp / G;
        size_t *pairs = al_calloc(kp, sizeof *pairs, "selected pairs");
        rc = pairs ? tmla_mha2mla_pairs(gqa, S, mu, (int)r, pairs) : AL_ERR;
        if (rc == AL_OK) rc = tmla_select_pairs(T, pairs, kp, C_K);
        free(pairs);
    }
    if (rc == AL_OK) rc = tmla_remove_rope(T, (int)(2 * kp), kept);
    if (rc == AL_OK) rc = tmla_fold_scale(T);
    if (rc == AL_OK) rc = tmla_build(T, mla);
    return rc;
}

/* Pairs kept for a removed fraction f: whole merged pairs (RoRoPE) or whole frequencies per KV
 * head (MHA2MLA), at least one. */
static size_t kept_pairs(double f, int M, size_t G, size_t d2) {
    double keep = 1 - f;
    if (M > 0) {
        long k = lround(keep * (double)(G * d2));
        return k < 1 ? 1 : (size_t)k > G * d2 ? G * d2 : (size_t)k;
    }
    long r = lround(keep * (double)d2);
    return G * (r < 1 ? 1 : (size_t)r > d2 ? d2 : (size_t)r);
}

/* One curve (M > 0: RoRoPE + FreqFold M; 0: MHA2MLA) over the fractions. */
static int removal_curve(TlmModel *t, const TlmRemovalOpts *o, int lo, int hi, const LayerCov *cov, int M,
                         TlmRemovalCurve *cv, size_t *done, size_t total) {
    const ModelConfig *c = &t->m->cfg;
    size_t G = (size_t)c->n_kv_heads, d2 = (size_t)cfg_d_qk(c) / 2, np = G * d2, nf = o->n_removed;
    cv->M = M;
    cv->removed = al_calloc(nf, sizeof(double), "a curve");
    cv->rope_dims = al_calloc(nf, sizeof(int), "a curve");
    cv->energy = al_calloc(nf, sizeof(double), "a curve");
    cv->nll = al_calloc(nf, sizeof(double), "a curve");
    AttnLayer **mla = al_calloc((size_t)t->n_layers, sizeof *mla, "converted layers");
    int rc = cv->removed && cv->rope_dims && cv->energy && cv->nll && mla ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < nf; i++) {
        size_t kp = kept_pairs(o->removed[i], M, G, d2), cnt;
        bool seen = false;
        for (size_t j = 0; j < cv->n; j++) seen |= cv->rope_dims[j] == (int)(2 * kp);
        al_progress("variant", ++*done, total);
        if (seen) continue;
        double energy = 0, nll;
        for (int l = lo; rc == AL_OK && l <= hi; l++) {
            const double *S = o->sigma ? o->sigma[l] : NULL, *mu = S && o->mu ? o->mu[l] : NULL;
            TmlaLayer *T = NULL;
            double kept = 0;
            rc = tmla_merge(t->L[l].orig, &T);
            if (rc == AL_OK) rc = build_removed(T, t->L[l].orig, M, kp, cov->C_K[l], S, mu, &mla[l], &kept);
            if (rc == AL_OK) rc = tlm_set_attn(t, l, mla[l]);
            energy += kept;
            tmla_layer_free(T);
            if (rc == AL_ERR) al_err_ctx("layer %d", l);
        }
        if (rc == AL_OK) rc = eval_nll(t, o->ids, o->n_ids, o->seqlen, &nll, &cnt);
        drop_layers(t, mla, lo, hi);
        if (rc) break;
        cv->removed[cv->n] = 1 - (double)kp / (double)np;
        cv->rope_dims[cv->n] = (int)(2 * kp);
        cv->energy[cv->n] = energy / (double)(hi - lo + 1);
        cv->nll[cv->n] = nll;
        cv->n++;
    }
    free(mla);
    return rc;
}

int tlm_rope_removal(TlmModel *t, const TlmRemovalOpts *o, TlmRemoval **out) {
    *out = NULL;
    int lo = o->layer_lo, hi = o->layer_hi;
    if (layer_range(t, &lo, &hi)) return AL_ERR;
    const ModelConfig *c = &t->m->cfg;
    int d2 = cfg_d_qk(c) / 2;
    for (size_t i = 0; i < o->nM; i++)
        if (o->Ms[i] < 1 || d2 % o->Ms[i])
            return al_err("freqfold %d: M must divide the %d RoPE frequencies of a head", o->Ms[i], d2);
    for (size_t i = 0; i < o->n_removed; i++)
        if (!(o->removed[i] >= 0 && o->removed[i] < 1))
            return al_err("removed fraction %g: give fractions of the RoPE dims in [0, 1)", o->removed[i]);
    if (o->nM + (o->mha2mla ? 1 : 0) == 0 || o->n_removed == 0)
        return al_err("RoPE removal: no curve asked for (give freqfolds and/or the MHA2MLA baseline, and fractions)");
    TlmRemoval *r = al_calloc(1, sizeof *r, "RoPE-removal curves");
    size_t nc = o->nM + (o->mha2mla ? 1 : 0);
    LayerCov cov = {0};
    int rc = r && (r->curves = al_calloc(nc, sizeof *r->curves, "curves")) ? AL_OK : AL_ERR;
    tlm_reset_attn(t);
    if (rc == AL_OK) rc = eval_nll(t, o->ids, o->n_ids, o->seqlen, &r->base_nll, &r->tokens);
    if (rc == AL_OK) rc = cov_new(t, lo, hi, o->sigma, o->mu, &cov);
    size_t done = 0, total = nc * o->n_removed;
    for (size_t i = 0; rc == AL_OK && i < nc; i++) {
        rc = removal_curve(t, o, lo, hi, &cov, i < o->nM ? o->Ms[i] : 0, &r->curves[i], &done, total);
        r->n_curves = i + 1;
    }
    al_progress(NULL, 0, 0);
    cov_free(&cov, t->n_layers);
    if (rc) { tlm_removal_free(r); return rc; }
    *out = r;
    return AL_OK;
}

/* ================================================================ Figure 4b */

void tlm_kv_table_free(TlmKvTable *t) {
    if (!t) return;
    free(t->rows);
    free(t);
}

/* Mean key energy in the first D rotated dims, rotation from cov_rot, measured under cov_act. */
static int rope_energy_under(TlmModel *t, int lo, int hi, const LayerCov *cov_rot, const LayerCov *cov_act, int M,
                             int D, double *mean) {
    double acc = 0;
    int rc = AL_OK;
    for (int l = lo; rc == AL_OK && l <= hi; l++) {
        TmlaLayer *T = NULL;
        rc = tmla_merge(t->L[l].orig, &T);
        if (rc == AL_OK) rc = tmla_rorope(T, M, cov_rot->C_K[l]);
        if (rc == AL_OK) rc = tmla_remove_rope(T, D, NULL);
        if (rc == AL_OK) acc += tmla_kept_energy(T, cov_act->C_K[l]);
        tmla_layer_free(T);
    }
    *mean = acc / (double)(hi - lo + 1);
    return rc;
}

/* One row: every layer of [lo, hi] converted with o (act: activation statistics), then the NLL. */
static int kv_row(TlmModel *t, const TlmKvTableOpts *ko, const TmlaOpts *o, bool act, int lo, int hi, TlmKvRow *row,
                  size_t *count) {
    AttnLayer **mla = al_calloc((size_t)t->n_layers, sizeof *mla, "converted layers");
    int rc = mla ? AL_OK : AL_ERR;
    double alpha = 0, joint = 0;
    for (int l = lo; rc == AL_OK && l <= hi; l++) {
        TmlaLayerReport rep = {0};
        const double *S = act ? ko->sigma[l] : NULL, *mu = act && ko->mu ? ko->mu[l] : NULL;
        rc = tmla_convert_layer_stats(t->L[l].orig, o, S, mu, &mla[l], &rep);
        if (rc == AL_OK) rc = tlm_set_attn(t, l, mla[l]);
        alpha += rep.alpha;
        joint += rep.joint_energy;
        if (rc == AL_ERR) al_err_ctx("layer %d", l);
    }
    if (rc == AL_OK) rc = eval_nll(t, ko->ids, ko->n_ids, ko->seqlen, &row->nll, count);
    if (mla) drop_layers(t, mla, lo, hi);
    free(mla);
    row->alpha = alpha / (double)(hi - lo + 1);
    row->joint_energy = joint / (double)(hi - lo + 1);
    return rc;
}

int tlm_kv_table(TlmModel *t, const TlmKvTableOpts *ko, TlmKvTable **out) {
    *out = NULL;
    int lo = ko->layer_lo, hi = ko->layer_hi;
    if (layer_range(t, &lo, &hi)) return AL_ERR;
    for (int l = lo; l <= hi; l++)
        if (!ko->sigma || !ko->sigma[l])
            return al_err("the W / WX table needs activation statistics for layer %d: calibrate first", l);
    if (ko->n_ranks == 0) return al_err("the W / WX table needs at least one kv-rank");
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = ko->rope_dim;
    o.freqfold = ko->freqfold;
    o.compare_balance = false;
    o.eval_tokens = 8;
    o.layer_lo = lo;
    o.layer_hi = hi;
    for (size_t i = 0; i < ko->n_ranks; i++) {
        o.kv_rank = ko->kv_ranks[i];
        if (tmla_resolve_opts(t->m, &o)) return AL_ERR;
    }
    TlmKvTable *tb = al_calloc(1, sizeof *tb, "the W / WX table");
    LayerCov cw = {0}, ca = {0};
    int rc = tb && (tb->rows = al_calloc(4 * ko->n_ranks, sizeof *tb->rows, "table rows")) ? AL_OK : AL_ERR;
    tlm_reset_attn(t);
    if (rc == AL_OK) rc = eval_nll(t, ko->ids, ko->n_ids, ko->seqlen, &tb->base_nll, &tb->tokens);
    if (rc == AL_OK) rc = cov_new(t, lo, hi, NULL, NULL, &cw);
    if (rc == AL_OK) rc = cov_new(t, lo, hi, ko->sigma, ko->mu, &ca);
    double re[2] = {0, 0};
    if (rc == AL_OK) rc = rope_energy_under(t, lo, hi, &cw, &ca, o.freqfold, o.rope_dim, &re[0]);
    if (rc == AL_OK) rc = rope_energy_under(t, lo, hi, &ca, &ca, o.freqfold, o.rope_dim, &re[1]);
    size_t total = 4 * ko->n_ranks;
    for (size_t i = 0; rc == AL_OK && i < total; i++) {
        TlmKvRow *row = &tb->rows[i];
        size_t cnt;
        row->kv_rank = ko->kv_ranks[i / 4];
        row->act = (i / 2) % 2 == 1;
        row->balance = i % 2 == 1;
        row->rope_energy = re[row->act];
        o.kv_rank = row->kv_rank;
        o.balance = row->balance;
        rc = kv_row(t, ko, &o, row->act, lo, hi, row, &cnt);
        tb->n = i + 1;
        al_progress("variant", i + 1, total);
    }
    al_progress(NULL, 0, 0);
    cov_free(&cw, t->n_layers);
    cov_free(&ca, t->n_layers);
    if (rc) { tlm_kv_table_free(tb); return rc; }
    tb->rope_dim = o.rope_dim;
    tb->freqfold = o.freqfold;
    *out = tb;
    return AL_OK;
}
