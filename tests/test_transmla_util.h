/* test_transmla_util.h -- shared by the TransMLA tests: random GQA layers, and small Llama / Qwen2
 * checkpoints (safetensors writer + config.json) with optional planted structure (identical KV
 * heads, loud keys), and attention-only checkpoints in the layouts of the issue-12 families
 * (GPT-NeoX, Phi-3, split with Q/K norms). */
#ifndef TEST_TRANSMLA_UTIL_H
#define TEST_TRANSMLA_UTIL_H

#include "check.h"
#include "attn_eval.h"
#include "safetensors.h"

#include <sys/stat.h>

static uint64_t tu_seed = 777;

/* A fresh standard-normal matrix (r x c) times sc. */
static inline Mat *tu_randm(size_t r, size_t c, double sc) {
    Mat *m = attn_random_input(r, (int)c, tu_seed++);
    for (size_t i = 0; i < r * c; i++) m->data[i] *= (float)sc;
    return m;
}

static inline float *tu_randv(size_t n, double sc) {
    Mat *m = tu_randm(1, n, sc);
    float *v = malloc(n * sizeof(float));
    memcpy(v, m->data, n * sizeof(float));
    mat_free(m);
    return v;
}

/* A random GQA layer; identical_kv copies KV head 0 into every KV head. */
static inline AttnLayer *tu_gqa(int H, int G, int d, int hidden, rope_layout lay, bool bias, bool identical_kv) {
    AttnLayer *L = attn_layer_new(ATTN_GQA);
    L->hidden = hidden; L->n_heads = H; L->n_kv_heads = G; L->head_dim = d; L->v_dim = d;
    L->rope = lay; L->rope_dim = d; L->inv_freq = attn_rope_freqs(d, 10000.0);
    L->scale = 1 / sqrt((double)d);
    double s = 1.0 / sqrt((double)hidden);
    L->W_Q = tu_randm(hidden, H * d, 2 * s); L->W_K = tu_randm(hidden, G * d, 2 * s); L->W_V = tu_randm(hidden, G * d, s);
    L->W_O = tu_randm(H * d, hidden, s);
    if (identical_kv)
        for (int i = 0; i < hidden; i++)
            for (int g = 1; g < G; g++) {
                memcpy(L->W_K->data + i * G * d + g * d, L->W_K->data + i * G * d, d * sizeof(float));
                memcpy(L->W_V->data + i * G * d + g * d, L->W_V->data + i * G * d, d * sizeof(float));
            }
    if (bias) {
        L->b_Q = tu_randv(H * d, 0.3); L->b_K = tu_randv(G * d, 0.3); L->b_V = tu_randv(G * d, 0.3);
        if (identical_kv)
            for (int g = 1; g < G; g++) {
                memcpy(L->b_K + g * d, L->b_K, d * sizeof(float));
                memcpy(L->b_V + g * d, L->b_V, d * sizeof(float));
            }
    }
    return L;
}

/* Errors of b against a on random inputs at positions 0, 3, 6, ... */
static inline void tu_errs(const AttnLayer *a, const AttnLayer *b, double *se, double *oe) {
    size_t T = 24;
    int pos[24];
    for (size_t t = 0; t < T; t++) pos[t] = (int)(3 * t);
    Mat *X = attn_random_input(T, a->hidden, 4242);
    AttnOut *oa = NULL, *ob = NULL;
    *se = *oe = INFINITY;
    CHECK_OK(attn_eval(a, X, pos, true, &oa));
    CHECK_OK(attn_eval(b, X, pos, true, &ob));
    if (oa && ob) attn_rel_err(oa, ob, se, oe);
    attn_out_free(oa);
    attn_out_free(ob);
    mat_free(X);
}

/* ---------------------------------------------------------------- checkpoints */

typedef struct {
    const char *model_type;   /* "llama" or "qwen2" */
    int layers, hidden, heads, kv_heads, head_dim, inter, vocab;
    bool identical_kv;        /* every KV head a copy of head 0 (K and V, biases too) */
    bool tie;                 /* tie_word_embeddings (no lm_head) */
    dt_type dtype;            /* F32 or BF16 */
    const char *extra_config; /* extra JSON members appended to config.json, e.g. "\"sliding_window\": 64" */
    bool qk_norm;             /* also write per-head q_norm / k_norm weights (as Qwen3 has) */
} TuModel;

static inline int tu_add(st_writer *w, const char *name, const Mat *m, dt_type dt) {
    return st_writer_add_mat(w, name, dt, m);
}

/* Writes config.json + model.safetensors into dir (created). Returns AL_OK. */
static inline int tu_write_model(const char *dir, const TuModel *o) {
    mkdir(dir, 0755);
    bool qwen = strcmp(o->model_type, "qwen2") == 0;
    int H = o->heads, G = o->kv_heads, d = o->head_dim, Dm = o->hidden;
    st_writer *w = st_writer_new();
    char name[4400];
    int rc = AL_OK;
    Mat *emb = tu_randm(o->vocab, Dm, 0.5);
    rc |= tu_add(w, "model.embed_tokens.weight", emb, o->dtype);
    mat_free(emb);
    for (int l = 0; l < o->layers; l++) {
        AttnLayer *L = tu_gqa(H, G, d, Dm, ROPE_HALF, qwen, o->identical_kv);
        struct { const char *s; Mat *m; } t[] = {
            {"self_attn.q_proj.weight", mat_transpose(L->W_Q)}, {"self_attn.k_proj.weight", mat_transpose(L->W_K)},
            {"self_attn.v_proj.weight", mat_transpose(L->W_V)}, {"self_attn.o_proj.weight", mat_transpose(L->W_O)},
            {"mlp.gate_proj.weight", tu_randm(o->inter, Dm, 0.1)}, {"mlp.up_proj.weight", tu_randm(o->inter, Dm, 0.1)},
            {"mlp.down_proj.weight", tu_randm(Dm, o->inter, 0.1)}, {"input_layernorm.weight", tu_randm(1, Dm, 1)},
            {"post_attention_layernorm.weight", tu_randm(1, Dm, 1)}};
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, t[i].s);
            if (t[i].m->rows == 1) {
                size_t shape[1] = {t[i].m->cols};
                if (o->dtype == DT_F32) rc |= st_writer_add(w, name, DT_F32, 1, shape, t[i].m->data, shape[0] * 4);
                else {
                    uint16_t *h = malloc(shape[0] * 2);
                    dt_from_f32(o->dtype, t[i].m->data, shape[0], h);
                    rc |= st_writer_add(w, name, o->dtype, 1, shape, h, shape[0] * 2);
                    free(h);
                }
            } else
                rc |= tu_add(w, name, t[i].m, o->dtype);
            mat_free(t[i].m);
        }
        if (qwen) {
            const float *b[3] = {L->b_Q, L->b_K, L->b_V};
            const char *s[3] = {"q_proj", "k_proj", "v_proj"};
            size_t n[3] = {(size_t)H * d, (size_t)G * d, (size_t)G * d};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.bias", l, s[i]);
                rc |= st_writer_add(w, name, DT_F32, 1, &n[i], b[i], n[i] * 4);
            }
        }
        if (o->qk_norm) {
            size_t n = (size_t)d;
            float *one = calloc(n, sizeof(float));
            for (size_t i = 0; i < n; i++) one[i] = 1;
            snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", l);
            rc |= st_writer_add(w, name, DT_F32, 1, &n, one, n * 4);
            snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", l);
            rc |= st_writer_add(w, name, DT_F32, 1, &n, one, n * 4);
            free(one);
        }
        attn_layer_free(L);
    }
    size_t shape[1] = {(size_t)Dm};
    Mat *nw = tu_randm(1, Dm, 1);
    rc |= st_writer_add(w, "model.norm.weight", DT_F32, 1, shape, nw->data, (size_t)Dm * 4);
    mat_free(nw);
    if (!o->tie) {
        Mat *head = tu_randm(o->vocab, Dm, 0.5);
        rc |= tu_add(w, "lm_head.weight", head, o->dtype);
        mat_free(head);
    }
    snprintf(name, sizeof name, "%s/model.safetensors", dir);
    if (rc == AL_OK) rc = st_writer_write(w, name);
    st_writer_free(w);
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"%s\", \"architectures\": [\"%s\"], \"hidden_size\": %d, \"intermediate_size\": %d,\n"
             " \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"num_hidden_layers\": %d, \"head_dim\": %d,\n"
             " \"vocab_size\": %d, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"max_position_embeddings\": 256,\n"
             " \"hidden_act\": \"silu\", \"tie_word_embeddings\": %s, \"torch_dtype\": \"%s\"%s%s}\n",
             o->model_type, qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM", Dm, o->inter, H, G, o->layers, d, o->vocab,
             o->tie ? "true" : "false", o->dtype == DT_F32 ? "float32" : "bfloat16", o->extra_config ? ", " : "",
             o->extra_config ? o->extra_config : "");
    snprintf(name, sizeof name, "%s/config.json", dir);
    if (rc == AL_OK) rc = al_write_file_atomic(name, cfg, strlen(cfg));
    return rc;
}

/* ---------------------------------------------------------------- family layouts (issue 12) */

/* Writes an attention-only checkpoint (config.json + model.safetensors; enough for model_open,
 * the per-head views, the evaluator and the conversions) of model_type `type` in its own layout:
 * "gpt_neox" (gpt_neox.layers.L.attention.query_key_value rows head by head [q_h ; k_h ; v_h] with
 * bias, attention.dense with bias), "phi3" (self_attn.qkv_proj rows [Q ; K ; V] + o_proj), any other
 * type split q/k/v/o_proj, with q_norm / k_norm of head_dim when qk_norm. The weights are random
 * (tu_gqa, H heads, G KV heads of d; GPT-NeoX: G = H); `extra` is appended to config.json (e.g.
 * "\"rotary_pct\": 0.25"). */
static inline int tu_write_family(const char *dir, const char *type, int layers, int H, int G, int d, int Dm, bool qk_norm,
                           const char *extra) {
    mkdir(dir, 0755);
    bool neox = strcmp(type, "gpt_neox") == 0, phi3 = strcmp(type, "phi3") == 0;
    if (neox) G = H;
    st_writer *w = st_writer_new();
    char name[256];
    int rc = AL_OK;
    for (int l = 0; l < layers; l++) {
        AttnLayer *L = tu_gqa(H, G, d, Dm, ROPE_HALF, neox, false);
        Mat *q = mat_transpose(L->W_Q), *k = mat_transpose(L->W_K), *v = mat_transpose(L->W_V), *o = mat_transpose(L->W_O);
        size_t nq = (size_t)H * d, nk = (size_t)G * d;
        if (neox || phi3) {
            Mat *qkv = mat_new(nq + 2 * nk, (size_t)Dm);
            float *b = calloc(nq + 2 * nk, sizeof(float));
            for (size_t r = 0; r < nq + 2 * nk; r++) {
                /* phi3: [Q ; K ; V]; neox: head h, part p (q, k, v), row i at (3 h + p) d + i */
                size_t part = phi3 ? (r < nq ? 0 : r < nq + nk ? 1 : 2) : (r / (size_t)d) % 3;
                size_t src = phi3 ? r - (part == 0 ? 0 : part == 1 ? nq : nq + nk) : (r / (3 * (size_t)d)) * d + r % (size_t)d;
                const Mat *from = part == 0 ? q : part == 1 ? k : v;
                const float *fb = part == 0 ? L->b_Q : part == 1 ? L->b_K : L->b_V;
                memcpy(qkv->data + r * (size_t)Dm, from->data + src * (size_t)Dm, (size_t)Dm * sizeof(float));
                if (fb) b[r] = fb[src];
            }
            snprintf(name, sizeof name, neox ? "gpt_neox.layers.%d.attention.query_key_value.weight"
                                             : "model.layers.%d.self_attn.qkv_proj.weight", l);
            rc |= st_writer_add_mat(w, name, DT_F32, qkv);
            snprintf(name, sizeof name, neox ? "gpt_neox.layers.%d.attention.dense.weight" : "model.layers.%d.self_attn.o_proj.weight", l);
            rc |= st_writer_add_mat(w, name, DT_F32, o);
            if (neox) {
                size_t n = nq + 2 * nk, nd = (size_t)Dm;
                float *ob = tu_randv(nd, 0.2);
                snprintf(name, sizeof name, "gpt_neox.layers.%d.attention.query_key_value.bias", l);
                rc |= st_writer_add(w, name, DT_F32, 1, &n, b, n * 4);
                snprintf(name, sizeof name, "gpt_neox.layers.%d.attention.dense.bias", l);
                rc |= st_writer_add(w, name, DT_F32, 1, &nd, ob, nd * 4);
                free(ob);
            }
            mat_free(qkv);
            free(b);
        } else {
            const char *sfx[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
            Mat *ms[4] = {q, k, v, o};
            for (int i = 0; i < 4; i++) {
                snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, sfx[i]);
                rc |= st_writer_add_mat(w, name, DT_F32, ms[i]);
            }
            for (int i = 0; qk_norm && i < 2; i++) {
                size_t n = (size_t)d;
                float *nw = tu_randv(n, 0.5);
                for (size_t j = 0; j < n; j++) nw[j] += 1.0f;
                snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, i ? "k_norm" : "q_norm");
                rc |= st_writer_add(w, name, DT_F32, 1, &n, nw, n * 4);
                free(nw);
            }
        }
        mat_free(q); mat_free(k); mat_free(v); mat_free(o);
        attn_layer_free(L);
    }
    snprintf(name, sizeof name, "%s/model.safetensors", dir);
    if (rc == AL_OK) rc = st_writer_write(w, name);
    st_writer_free(w);
    char cfg[1024], path[4400];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"%s\", \"hidden_size\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
             "\"head_dim\": %d, \"num_hidden_layers\": %d, \"vocab_size\": 64, \"intermediate_size\": 64, "
             "\"max_position_embeddings\": 256%s%s}\n", type, Dm, H, G, d, layers, extra ? ", " : "", extra ? extra : "");
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (rc == AL_OK) rc = al_write_file_atomic(path, cfg, strlen(cfg));
    return rc;
}

#endif
