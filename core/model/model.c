/* model.c -- model_open over a tensor store (the config is parsed once, by core/model/config.c), shape validation,
 * and the canonical per-head views with a one-layer cache of dequantized weights. */
#define _GNU_SOURCE
#include "model.h"
#include "shapes.h"
#include "gguf_arch.h"
#include "llama2c.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


/* ================================================================ parameter accounting */

size_t cfg_attn_params(const ModelConfig *c) {
    size_t H = (size_t)c->n_heads, G = (size_t)c->n_kv_heads, D = (size_t)c->hidden;
    size_t dqk = (size_t)cfg_d_qk(c), dv = (size_t)c->v_dim, p = 0;
    if (cfg_is_mla(c)) {
        size_t ql = (size_t)c->q_lora_rank, kl = (size_t)c->kv_lora_rank, rope = (size_t)c->qk_rope_dim;
        p += ql ? ql * D + ql + H * dqk * ql : H * dqk * D;                 /* q_a (+norm) + q_b, or q_proj */
        p += (kl + rope) * D + kl;                                          /* kv_a_proj_with_mqa + norm */
        p += H * ((size_t)c->qk_nope_dim + dv) * kl;                        /* kv_b_proj */
        p += D * H * dv;                                                    /* o_proj */
        if (c->qkv_bias) p += H * dqk + (kl + rope);
        if (c->o_bias) p += D;
        return p;
    }
    if (c->attn == QKV_DSV4) {                      /* wq_a + q_norm, wq_b, wkv + kv_norm, wo_a, wo_b, attn_sink */
        size_t ql = (size_t)c->q_lora_rank, R = (size_t)c->o_groups * (size_t)c->o_lora_rank;
        return ql * D + ql + H * dqk * ql + dqk * D + dqk + R * (H * dv / (size_t)c->o_groups) + D * R + H;
    }
    p = D * ((c->attn_gate ? 2 : 1) * H * dqk + G * dqk + G * dv) + H * dv * D;   /* a gated q_proj: 2 H dqk rows */
    if (c->qkv_bias) p += H * dqk + G * dqk + G * dv;
    if (c->o_bias) p += D;
    return p;
}

size_t cfg_kv_values(const ModelConfig *c) {
    if (cfg_is_mla(c)) return (size_t)c->kv_lora_rank + (size_t)c->qk_rope_dim;
    if (c->kv_rebuild) return (size_t)c->kv_rebuild;     /* attnlab's qk-norm keep: the latent K / V are rebuilt from */
    if (c->attn == QKV_DSV4) return (size_t)c->v_dim;     /* one head, key = value (the window's; compressed extra) */
    return (size_t)c->n_kv_heads * ((size_t)cfg_d_qk(c) + (size_t)c->v_dim);
}

const ModelConfig *model_layer_cfg(const Model *m, int layer) {
    return m->cfg_full && cfg_layer_full_type(&m->cfg, layer) ? m->cfg_full : &m->cfg;
}

size_t model_kv_values_total(const Model *m) {
    size_t n = 0;
    for (int L = 0; L < m->cfg.n_layers; L++)
        if (!cfg_layer_linear(&m->cfg, L) && cfg_kv_source(&m->cfg, L) == L) n += cfg_kv_values(model_layer_cfg(m, L));
    return n;
}

size_t model_attn_params_total(const Model *m) {
    size_t n = 0;
    for (int L = 0; L < m->cfg.n_layers; L++) {
        if (cfg_layer_linear(&m->cfg, L)) continue;
        const ModelConfig *c = model_layer_cfg(m, L);
        size_t kv = (size_t)c->hidden * (size_t)c->n_kv_heads, p = cfg_attn_params(c);
        if (cfg_kv_source(c, L) != L) p -= kv * (size_t)(cfg_d_qk(c) + c->v_dim);   /* no k_proj / v_proj */
        else if (cfg_layer_v_is_k(c, L)) p -= kv * (size_t)c->v_dim;                 /* no v_proj */
        n += p;
    }
    return n;
}

/* ================================================================ tensor names and shapes */

char *model_tensor_name(const Model *m, int layer, const char *suffix) {
    char where[96];
    cfg_layer_prefix(&m->cfg, layer, where, sizeof where);
    return al_asprintf("%s%s", where, suffix);
}

/* The attention weights of one layer, as (role, rows, cols) the config requires: the 2-D weights of
 * the layout's shape rule that apply (core/model/shapes.c; names: the layout's roles). */
enum { SHAPES_MAX_WEIGHTS = 16 };   /* more than any layout has */
typedef struct { tensor_role role; size_t rows, cols; } tensor_req;

static size_t attn_requirements(const ModelConfig *c, tensor_req *req) {
    unsigned cond = shape_conditions(c, false);
    size_t n = 0;
    for (const RoleShape *w = shape_attn(c->attn); w->why && n < SHAPES_MAX_WEIGHTS; w++)   /* the 2-D weights that apply */
        if (!w->bias && w->d1 != D_NONE && (w->when & cond) == w->when)
            req[n++] = (tensor_req){w->role, shape_dim(c, w->d0), shape_dim(c, w->d1)};
    return n;
}

/* The full name of attention role r's weight in layer L (caller frees); an error when the model's
 * attention layout has no such tensor. */
static char *attn_weight_name(const Model *m, tensor_role r, int layer) {
    char name[192];
    if (!cfg_role_name(&m->cfg, r, layer, -1, "weight", name, sizeof name)) {
        al_err("internal: a %s model's attention has no %s tensor", m->cfg.model_type, tensor_role_name(r));
        return NULL;
    }
    return al_strdup(name);
}

/* Checks that a linear-attention layer has the tensors of its layout (shape_linear) with their
 * sizes (conv1d's [conv_dim, 1, kernel] by its count of values). */
static int validate_linear(Model *m, int L) {
    const ModelConfig *c = &m->cfg;
    unsigned cond = shape_conditions(c, false);
    for (const RoleShape *w = shape_linear(c->lin.layout); w->why; w++) {
        char name[192];
        bool plain = w->role == ROLE_LIN_A_LOG || w->role == ROLE_LIN_DT_BIAS || w->role == ROLE_LIN_D;   /* no ".weight" */
        if ((w->when & cond) != w->when) continue;                    /* Mamba-2's conv bias where the config has it */
        cfg_role_name(c, w->role, L, -1, plain ? NULL : w->bias ? "bias" : "weight", name, sizeof name);
        const st_entry *e = NULL;
        if (store_entry(m->store, name, &e, NULL) != AL_OK) return AL_ERR;
        size_t n = 1, want = shape_dim(c, w->d0) * (w->d1 != D_NONE ? shape_dim(c, w->d1) : 1);
        for (int k = 0; k < e->ndim; k++) n *= e->shape[k];
        if (shape_linear_conv(w->role) && !w->bias) want *= (size_t)c->lin.conv;
        if (n != want)
            return al_err("tensor '%s' has %zu value%s but the config (%s) needs %zu", name, n, al_s(n), w->why, want);
    }
    return AL_OK;
}

/* Checks every layer's attention tensors exist with the shapes the config implies (a linear-attention
 * layer: its own tensors). */
static int model_validate(Model *m) {
    tensor_req req[SHAPES_MAX_WEIGHTS];
    size_t nreq = attn_requirements(&m->cfg, req);
    bool dt_set = false;
    if (cfg_per_type_dims(&m->cfg) && !m->cfg_full) {          /* Gemma 4: the full layers' own head dims */
        if (!(m->cfg_full = al_malloc3(1, 1, sizeof *m->cfg_full, "a layer type's description"))) return AL_ERR;
        cfg_full_view(&m->cfg, m->cfg_full);
    }
    for (int L = 0; L < m->cfg.n_layers; L++) {
        if (cfg_layer_linear(&m->cfg, L)) {            /* Nemotron-H's MLP blocks (2) have no mixer */
            if (m->cfg.lin.layer[L] == 1 && validate_linear(m, L) != AL_OK) return AL_ERR;
            continue;
        }
        const ModelConfig *lc = model_layer_cfg(m, L);
        nreq = attn_requirements(lc, req);
        for (size_t i = 0; i < nreq; i++) {
            bool idx = req[i].role >= ROLE_IDX_Q_B && req[i].role <= ROLE_IDX_W;
            if (idx && !cfg_layer_indexer(&m->cfg, L)) continue;   /* IndexShare's shared layers need none */
            bool kv = req[i].role == ROLE_K || req[i].role == ROLE_V;  /* Gemma 4: no K / V of their own, or V = K */
            if ((kv && cfg_kv_source(&m->cfg, L) != L) || (req[i].role == ROLE_V && cfg_layer_v_is_k(&m->cfg, L))) continue;
            char *name = attn_weight_name(m, req[i].role, L);
            if (!name) return AL_ERR;
            size_t R, C;
            int rc = store_shape2(m->store, name, &R, &C);
            if (rc == AL_OK && (R != req[i].rows || C != req[i].cols))
                rc = al_err("tensor '%s' has shape [%zu, %zu] but the config (%s, %d head%s, %d KV head%s, hidden %d) "
                            "needs [%zu, %zu]", name, R, C, m->cfg.model_type, m->cfg.n_heads, al_s(m->cfg.n_heads), lc->n_kv_heads, al_s(lc->n_kv_heads),
                            m->cfg.hidden, req[i].rows, req[i].cols);
            if (rc == AL_OK && !dt_set) {      /* the first softmax-attention layer's dtype */
                const st_entry *e;
                dt_fp4 q;
                dt_set = true;
                store_entry(m->store, name, &e, NULL);
                m->cfg.dtype = e->dtype;
                if (store_fp4(m->store, name, &q) == AL_OK && q.enc != DT_FP4_NONE) {
                    m->fp4 = q.enc;
                    m->cfg.dtype = DT_BF16;
                }
            }
            free(name);
            if (rc != AL_OK) return rc;
        }
    }
    return AL_OK;
}

/* ================================================================ stored encodings */

const char *model_dtype_name(const Model *m) {
    return m->fp4 != DT_FP4_NONE ? dt_fp4_traits(m->fp4)->name : dt_name(m->cfg.dtype);
}


/* Bit of tensor `name`'s encoding in a group's mask: dtypes, then the FP4 encodings. */
static uint64_t enc_bit(const Model *m, const char *name) {
    dt_fp4 q;
    const st_entry *e;
    char b[300];
    snprintf(b, sizeof b, "%s_blocks", name);          /* gpt-oss's stacked experts: named, not read (store_fp4_experts) */
    if (!store_has(m->store, name)) return 0;
    if (store_entry(m->store, b, &e, NULL) == AL_OK && e->ndim == 4 && e->dtype == DT_U8) return 1ull << (DT_COUNT + DT_FP4_MXFP4);
    if (store_fp4(m->store, name, &q) != AL_OK) { al_err_clear(); return 0; }
    if (q.enc != DT_FP4_NONE) return 1ull << (DT_COUNT + q.enc);
    return store_entry(m->store, name, &e, NULL) == AL_OK ? 1ull << e->dtype : 0;
}

/* The encodings of one group's roles over every layer (and expert). */
static uint64_t group_mask(const Model *m, const tensor_role *roles, size_t n, bool layered) {
    const ModelConfig *c = &m->cfg;
    uint64_t mask = 0;
    char name[256];
    for (int L = 0; L < (layered ? c->n_layers : 1); L++)
        for (size_t i = 0; i < n; i++) {
            bool expert = roles[i] >= ROLE_EXP_GATE && roles[i] <= ROLE_EXP_DOWN;
            bool fused = roles[i] == ROLE_EXPS_GATE_UP || roles[i] == ROLE_EXPS_DOWN;      /* all experts in one tensor */
            for (int e = 0; e < (expert ? c->moe.n_experts : 1); e++)
                if (cfg_role_name(c, roles[i], L, expert ? e : -1, fused ? NULL : "weight", name, sizeof name))
                    mask |= enc_bit(m, name);
        }
    return mask;
}

/* The tensor groups `info` names, by role. */
static const tensor_role G_ATT[] = {ROLE_Q, ROLE_K, ROLE_V, ROLE_O, ROLE_QKV, ROLE_Q_A, ROLE_Q_B, ROLE_KV_A, ROLE_KV_B},
                         G_MLP[] = {ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_GATE_UP, ROLE_FFN_DOWN, ROLE_SHEXP_GATE,
                                    ROLE_SHEXP_UP, ROLE_SHEXP_DOWN},
                         G_EXP[] = {ROLE_EXP_GATE, ROLE_EXP_UP, ROLE_EXP_DOWN, ROLE_EXPS_GATE_UP, ROLE_EXPS_DOWN},
                         G_EMB[] = {ROLE_EMBED, ROLE_LM_HEAD};
static const struct { const char *name; const tensor_role *r; size_t n; bool layered; } groups[] = {
    {"attention", G_ATT, 9, true}, {"mlp", G_MLP, 7, true}, {"experts", G_EXP, 5, true}, {"embeddings", G_EMB, 2, false}};

/* The module of the first stored tensor of a group (its weight's name less ".weight"; a fused experts
 * tensor's own name) into mod; false when the group has none. */
static bool group_module(const Model *m, size_t g, char *mod, size_t cap) {
    const ModelConfig *c = &m->cfg;
    for (int L = 0; L < (groups[g].layered ? c->n_layers : 1); L++)
        for (size_t i = 0; i < groups[g].n; i++) {
            tensor_role r = groups[g].r[i];
            bool fused = r == ROLE_EXPS_GATE_UP || r == ROLE_EXPS_DOWN, expert = r >= ROLE_EXP_GATE && r <= ROLE_EXP_DOWN;
            if (r == ROLE_EMBED || !cfg_role_name(c, r, L, expert ? 0 : -1, NULL, mod, cap)) continue;
            char w[300];
            snprintf(w, sizeof w, "%s%s", mod, fused ? "" : ".weight");
            if (store_has(m->store, w)) return true;
        }
    return false;
}

void model_quant_sources(const Model *m, char *buf, size_t cap) {
    char mod[256], why[300];
    size_t at = 0;
    buf[0] = 0;
    for (size_t g = 0; g < sizeof groups / sizeof *groups && at < cap && m->quant.present; g++) {
        if (!group_module(m, g, mod, sizeof mod)) continue;
        quant_enc e = quant_expected(&m->quant, mod, why, sizeof why);
        at += (size_t)snprintf(buf + at, cap - at, "%s%s %s (%s: %s)", at ? "; " : "", groups[g].name,
                               e == QENC_UNKNOWN ? "as stored" : quant_enc_name(e), mod, why[0] ? why : "no rule names it");
    }
}

/* Each group with its encodings ("experts MXFP4, attention BF16") into buf, leaving out the encodings
 * in mask `skip` (and the groups left with none). */
static void group_encodings(const Model *m, uint64_t skip, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t g = 0; g < sizeof groups / sizeof *groups && at < cap; g++) {
        uint64_t mask = group_mask(m, groups[g].r, groups[g].n, groups[g].layered) & ~skip;
        if (!mask) continue;
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", groups[g].name);
        for (int b = 0, k = 0; b < DT_COUNT + DT_FP4_COUNT && at < cap; b++)
            if (mask & (1ull << b))
                at += (size_t)snprintf(buf + at, cap - at, "%s%s", k++ ? " + " : " ",
                                       b < DT_COUNT ? dt_name((dt_type)b) : dt_fp4_traits((dt_fp4_enc)(b - DT_COUNT))->name);
    }
}

void model_weight_encodings(const Model *m, char *buf, size_t cap) { group_encodings(m, 0, buf, cap); }

/* The encodings of the weights the forward pass multiplies, over the product groups (attention, MLP,
 * experts) and the LM head (the embedding when tied): enc_bit's bits. */
static uint64_t product_mask(const Model *m) {
    uint64_t mask = 0;
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
        if (groups[g].layered) mask |= group_mask(m, groups[g].r, groups[g].n, true);
    tensor_role head = m->cfg.tie_embeddings ? ROLE_EMBED : ROLE_LM_HEAD;
    uint64_t h = group_mask(m, &head, 1, false);
    return mask | (h ? h : group_mask(m, (tensor_role[]){ROLE_EMBED}, 1, false));   /* no lm_head stored: tied */
}

void model_compute_note(const Model *m, mm_compute c, char *buf, size_t cap) {
    uint64_t mask = c == MM_F32 ? 0 : product_mask(m);
    if (c == MM_F32 || mask == (1ull << DT_BF16)) { snprintf(buf, cap, "%s", mm_compute_describe(c)); return; }
    if (!(mask & (1ull << DT_BF16))) {
        snprintf(buf, cap, "bf16 asked, but the weights are %s: products in float32, as in f32 mode (bf16 mode is for "
                 "BF16 weights)", model_dtype_name(m));
        return;
    }
    char other[240];
    group_encodings(m, 1ull << DT_BF16, other, sizeof other);   /* the groups' other encodings */
    snprintf(buf, cap, "%s for its BF16 weights only: %s keep float32 products (the number is neither f32 mode's nor "
             "an all-BF16 copy's)", mm_compute_describe(c), other);
}

/* ================================================================ open / free */

/* One layer's dequantized attention weights, shared by the threads that use it: freed when the cache has moved to
 * another layer and no thread holds it (a pin, or a slice being copied out of it). */
typedef struct CacheEntry {
    struct CacheEntry *next;
    int layer;
    int refs;                  /* model_layer_pin's pins and the reads in progress (under LayerCache.mu) */
    pthread_mutex_t load_mu;   /* each tensor read once: its first reader loads it, the others wait */
    Mat *t[8];                 /* by attention_requirements index (HF layout), loaded on demand */
} CacheEntry;

struct LayerCache {
    pthread_mutex_t mu;        /* guards the list and every entry's refs */
    CacheEntry *list;          /* the layers held: the newest, and any other one still held */
    CacheEntry *newest;        /* the layer used last: kept while nobody holds it (the one-layer cache), or NULL */
};

static bool path_is_dir(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode); }
static bool path_ends(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A GPT2Model saved without the LM head wrapper names its tensors without "transformer.": no
 * prefix then (probed on layer 0's fused QKV). */
static void gpt2_bare_prefix(Model *m) {
    char name[192];
    if (m->cfg.names != NAMES_GPT2 || !cfg_role_name(&m->cfg, ROLE_QKV, 0, -1, "weight", name, sizeof name)) return;
    const char *bare = name + strlen(m->cfg.prefix);
    if (!store_has(m->store, name) && store_has(m->store, bare)) m->cfg.prefix[0] = 0;
}

/* A multimodal checkpoint's text tower saved under the other prefix (language_model.model. <->
 * model.language_model.): transformers loads both, so does attnlab. */
static void tower_alt_names(Model *m) {
    ModelConfig *c = &m->cfg;
    model_names alt = family_names_alt(c->names);
    char name[192];
    if (alt == c->names || !cfg_role_name(c, ROLE_EMBED, 0, -1, "weight", name, sizeof name) || store_has(m->store, name))
        return;
    ModelConfig t = *c;
    t.names = alt;
    snprintf(t.prefix, sizeof t.prefix, "%s", family_prefix(alt));
    if (cfg_role_name(&t, ROLE_EMBED, 0, -1, "weight", name, sizeof name) && store_has(m->store, name)) {
        c->names = alt;
        snprintf(c->prefix, sizeof c->prefix, "%s", family_prefix(alt));
    }
}

static bool store_has_cb(void *store, const char *name) { return store_has(store, name); }

/* Opens config.json + safetensors from dir (or beside a .safetensors file). */
static int open_hf(Model *m, const char *path) {
    char *dir;
    if (path_is_dir(path)) dir = al_strdup(path);
    else { char *t = al_strdup(path); dir = al_strdup(dirname(t)); free(t); }
    char *cfg_path = al_asprintf("%s/config.json", dir);
    free(dir);
    if (!cfg_path) return AL_ERR;
    struct stat sb;
    if (stat(cfg_path, &sb) != 0) {
        int rc = al_err("%s: no config.json (a Hugging Face checkpoint folder has config.json beside its "
                        "*.safetensors; a llama2.c checkpoint is a .bin file)", path);
        free(cfg_path);
        return rc;
    }
    size_t cfg_len = 0;
    m->config_json = al_read_file_max(cfg_path, &cfg_len, AL_CAP_CONFIG, "config");
    int rc = !m->config_json ? AL_ERR
             : strlen(m->config_json) != cfg_len   /* what follows a NUL would be ignored unseen */
                 ? al_err("%s: a NUL byte at byte %zu: not a JSON text file", cfg_path, strlen(m->config_json))
                 : model_config_parse_keep(m->config_json, cfg_path, &m->cfg, &m->config_tree);
    free(cfg_path);
    if (rc == AL_OK) rc = store_open(path, &m->store);
    if (rc == AL_OK) gpt2_bare_prefix(m);
    if (rc == AL_OK) tower_alt_names(m);
    if (rc == AL_OK) cfg_moe_pick(&m->cfg, store_has_cb, m->store);   /* Llama 4's experts fused or one per Linear */
    return rc;
}

/* Opens a GGUF (core/model/gguf_arch.h): an HF-layout store and config.json built from it. */
static int open_gguf(Model *m, const char *path) {
    int rc = gguf_model_open(path, &m->store, &m->config_json);
    return rc ? rc : model_config_parse_keep(m->config_json, path, &m->cfg, &m->config_tree);
}

/* Records per-head (or whole-projection) Q/K norms from layer 0's q_norm / k_norm tensors, unless
 * the family's config switch decided (GLM-4 MoE's use_qk_norm: false ignores them, as transformers does). */
static void note_qk_norm(Model *m) {
    ModelConfig *c = &m->cfg;
    if (cfg_row(c)->qk_norm_key) return;
    const tensor_role roles[] = {ROLE_Q_NORM, ROLE_K_NORM};
    for (int i = 0; i < 2 && c->qk_norm == QKN_NONE; i++) {
        char n[192];
        const st_entry *e = NULL;
        if (cfg_role_name(c, roles[i], 0, -1, "weight", n, sizeof n) && store_has(m->store, n) &&
            store_entry(m->store, n, &e, NULL) == AL_OK && e) {
            size_t numel = 1;
            for (int k = 0; k < e->ndim; k++) numel *= e->shape[k];
            c->qk_norm = numel > (size_t)cfg_d_qk(c) ? QKN_PROJ : QKN_HEAD;
        }
    }
}

/* The quantization config (config.json's, or hf_quant_config.json beside it) read once and the
 * stored modules checked against it (quant_config.h); the error names the tensor and the key. */
static int model_quant_check(Model *m) {
    if (!m->config_tree) return AL_OK;
    int rc = quant_config_read(m->config_tree, store_dir(m->store), &m->quant);
    if (rc == AL_OK && m->quant.present && m->from_gguf) {  /* the config is attnlab's, from ggml types */
        const char *dot = strrchr(m->quant.where, '.');
        char key[64];
        snprintf(key, sizeof key, "%s", dot ? dot + 1 : "quant_method");
        snprintf(m->quant.where, sizeof m->quant.where, "the GGUF's ggml tensor types, read as quantization_config.%s",
                 key);
    }
    if (rc == AL_OK && m->quant.present) rc = quant_check_store(&m->quant, m->store);
    if (rc != AL_OK) al_err_ctx("%s", m->path);
    return rc;
}

int model_open(const char *path, Model **out) {
    *out = NULL;
    Model *m = al_calloc(1, sizeof *m, "a model");
    if (!m) return AL_ERR;
    m->path = al_strdup(path);
    m->name = al_strdup(path);
    m->cache = al_calloc(1, sizeof *m->cache, "a layer cache");
    if (!m->path || !m->name || !m->cache) { model_free(m); return AL_ERR; }
    pthread_mutex_init(&m->cache->mu, NULL);
    bool file = !path_is_dir(path);
    m->from_gguf = file && path_ends(path, ".gguf");
    int rc = file && path_ends(path, ".bin") ? llama2c_open(path, &m->store, &m->cfg)
             : m->from_gguf                  ? open_gguf(m, path)
                                             : open_hf(m, path);
    if (rc == AL_OK) rc = model_validate(m);
    if (rc == AL_OK) note_qk_norm(m);
    if (rc == AL_OK) rc = model_quant_check(m);
    if (rc == AL_OK && m->cfg_full) {                        /* what validate and note_qk_norm learned */
        m->cfg_full->dtype = m->cfg.dtype;
        m->cfg_full->qk_norm = m->cfg.qk_norm;
    }
    if (rc != AL_OK) { model_free(m); return rc; }
    *out = m;
    return AL_OK;
}

static void entry_free(Model *m, CacheEntry *e);

void model_free(Model *m) {
    if (!m) return;
    if (m->cache) {
        for (CacheEntry *e = m->cache->list, *next; e; e = next) {
            next = e->next;
            entry_free(m, e);
        }
        pthread_mutex_destroy(&m->cache->mu);
        free(m->cache);
    }
    store_free(m->store);
    quant_config_free(&m->quant);
    free(m->config_json);
    free(m->cfg_full);
    cJSON_Delete(m->config_tree);
    free(m->path);
    free(m->name);
    free(m);
}

/* ================================================================ layer cache */

/* Index of `role` in the layer's requirement list, or -1. */
static int req_index(const ModelConfig *c, tensor_role role) {
    tensor_req req[SHAPES_MAX_WEIGHTS];
    size_t n = attn_requirements(c, req);
    for (size_t i = 0; i < n; i++)
        if (req[i].role == role) return (int)i;
    return -1;
}

/* The store's pages of layer's tensors handed back (their float copies are what is used). */
static void release_layer_pages(Model *m, int layer) {
    char *prefix = model_tensor_name(m, layer, "");
    if (prefix) store_release_prefix(m->store, prefix);
    free(prefix);
}

/* Frees an entry no thread holds any more (out of the list). */
static void entry_free(Model *m, CacheEntry *e) {
    release_layer_pages(m, e->layer);
    for (size_t i = 0; i < 8; i++) mat_free(e->t[i]);
    pthread_mutex_destroy(&e->load_mu);
    free(e);
}

/* Under c->mu: unlinks the entries nobody holds but the newest, onto *dead (freed by the caller, unlocked). */
static void cache_trim_locked(LayerCache *c, CacheEntry **dead) {
    for (CacheEntry **pe = &c->list; *pe;) {
        CacheEntry *e = *pe;
        if (e->refs > 0 || e == c->newest) { pe = &e->next; continue; }
        *pe = e->next;
        e->next = *dead;
        *dead = e;
    }
}

static void free_dead(Model *m, CacheEntry *dead) {
    for (CacheEntry *next; dead; dead = next) {
        next = dead->next;
        entry_free(m, dead);
    }
}

/* Holds layer's entry (made when `make` and it is not there; NULL when it is not, or out of memory) and makes it the
 * newest: the entries nobody holds are freed. The caller gives it back with cache_release. */
static CacheEntry *cache_acquire(Model *m, int layer, bool make) {
    LayerCache *c = m->cache;
    CacheEntry *e, *dead = NULL;
    pthread_mutex_lock(&c->mu);
    for (e = c->list; e && e->layer != layer; e = e->next) {}
    if (!e && make && (e = al_calloc(1, sizeof *e, "a layer cache entry"))) {
        e->layer = layer;
        pthread_mutex_init(&e->load_mu, NULL);
        e->next = c->list;
        c->list = e;
    }
    if (e) {
        e->refs++;
        c->newest = e;
        cache_trim_locked(c, &dead);
    }
    pthread_mutex_unlock(&c->mu);
    free_dead(m, dead);
    return e;
}

/* Gives back a hold of cache_acquire: an entry nobody holds that is not the newest is freed. */
static void cache_release(Model *m, CacheEntry *e) {
    LayerCache *c = m->cache;
    CacheEntry *dead = NULL;
    pthread_mutex_lock(&c->mu);
    e->refs--;
    cache_trim_locked(c, &dead);
    pthread_mutex_unlock(&c->mu);
    free_dead(m, dead);
}

/* The float32 tensor (HF layout) of `role` in e's layer, read on first use; valid while e is held. */
static int entry_tensor(Model *m, CacheEntry *e, tensor_role role, const Mat **out) {
    int idx = req_index(&m->cfg, role);
    if (idx < 0)
        return al_err("internal: %s is not an attention tensor of a %s model", tensor_role_name(role), m->cfg.model_type);
    pthread_mutex_lock(&e->load_mu);
    int rc = AL_OK;
    if (!e->t[idx]) {
        char *name = attn_weight_name(m, role, e->layer);
        rc = name ? store_read(m->store, name, &e->t[idx]) : AL_ERR;
        free(name);
    }
    *out = e->t[idx];
    pthread_mutex_unlock(&e->load_mu);
    return rc;
}

int model_layer_pin(Model *m, int layer) {
    return cache_acquire(m, layer, true) ? AL_OK : AL_ERR;
}

void model_layer_unpin(Model *m, int layer) {
    LayerCache *c = m->cache;
    CacheEntry *e;
    pthread_mutex_lock(&c->mu);
    for (e = c->list; e && e->layer != layer; e = e->next) {}
    pthread_mutex_unlock(&c->mu);
    if (e) cache_release(m, e);      /* held by the pin: still in the list */
}

int model_layer_load(Model *m, int layer) {
    if (layer < 0 || layer >= m->cfg.n_layers)
        return al_err("layer %d out of range: this model has layers 0-%d", layer, m->cfg.n_layers - 1);
    if (cfg_check_attn_layer(&m->cfg, layer, "attention weights") != AL_OK) return AL_ERR;
    tensor_req req[SHAPES_MAX_WEIGHTS];
    size_t n = attn_requirements(model_layer_cfg(m, layer), req);
    CacheEntry *e = cache_acquire(m, layer, true);
    int rc = e ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < n; i++) {
        if (req[i].role == ROLE_Q_A) continue;   /* not part of any head view */
        bool kv = req[i].role == ROLE_K || req[i].role == ROLE_V;      /* Gemma 4: another layer's, or V = K */
        if ((kv && cfg_kv_source(&m->cfg, layer) != layer) || (req[i].role == ROLE_V && cfg_layer_v_is_k(&m->cfg, layer)))
            continue;
        const Mat *t;
        rc = entry_tensor(m, e, req[i].role, &t);
    }
    if (e) cache_release(m, e);
    if (rc == AL_OK) release_layer_pages(m, layer);   /* the float copies are what we use now */
    return rc;
}

/* ================================================================ per-head views */

static const char *kind_name(head_kind k) { return k == HK_Q ? "Q" : k == HK_K ? "K" : k == HK_V ? "V" : "O"; }

int model_check_head(const Model *m, head_kind kind, int layer, int head) {
    const ModelConfig *c = model_layer_cfg(m, layer);
    if (layer < 0 || layer >= c->n_layers)
        return al_err("layer %d out of range: this model has layers 0-%d", layer, c->n_layers - 1);
    if (cfg_check_attn_layer(c, layer, "attention heads") != AL_OK) return AL_ERR;
    int nh = (kind == HK_K || kind == HK_V) ? c->n_kv_heads : c->n_heads;
    if (head < 0 || head >= nh)
        return al_err("%s head %d out of range: this model has %s heads 0-%d", kind_name(kind), head,
                      (kind == HK_K || kind == HK_V) ? "KV" : "query", nh - 1);
    return AL_OK;
}

/* Column range [c0, c0 + nc) of a Q/K head for `part`. */
static int part_cols(const ModelConfig *c, head_part part, size_t *c0, size_t *nc) {
    size_t nope = (size_t)c->qk_nope_dim, rope = (size_t)c->qk_rope_dim;
    if (part == PART_NOPE && nope == 0)
        return al_err("this %s model applies RoPE to every Q/K dim: there is no NoPE part (seed 000, A.3)", c->model_type);
    if (part == PART_ROPE && rope == 0) return al_err("this %s model has no RoPE dims", c->model_type);
    *c0 = part == PART_ROPE ? (size_t)cfg_rope_col(c) : part == PART_NOPE ? (size_t)cfg_nope_col(c) : 0;
    *nc = part == PART_NOPE ? nope : part == PART_ROPE ? rope : nope + rope;
    return AL_OK;
}

/* Sets b to block (r0, nr, c0, nc) of the layer's tensor of `role` (its name: the model's attention
 * layout). */
static int block_set(const ModelConfig *c, HeadBlock *b, tensor_role role, size_t r0, size_t nr, size_t c0, size_t nc,
                     bool transposed) {
    const RoleName *rn = cfg_role(c, role);
    if (!rn) return al_err("internal: a %s model's attention has no %s tensor", c->model_type, tensor_role_name(role));
    int layer = b->layer;
    *b = (HeadBlock){.role = role, .r0 = r0, .nr = nr, .c0 = c0, .nc = nc, .transposed = transposed, .layer = layer};
    snprintf(b->suffix, sizeof b->suffix, "%s.weight", rn->name);
    return AL_OK;
}

/* MLA (DeepSeek): q_b_proj / q_proj rows per head [nope | rope], kv_b_proj rows per head
 * [K nope | V] (interleaved head by head), o_proj columns per head; the shared RoPE key is rows
 * [kv_lora, +rope) of kv_a_proj_with_mqa. All HF Linear (out, in): views are transposed blocks. */
static int block_mla(const ModelConfig *c, head_kind kind, int head, head_part part, size_t c0, size_t nc, HeadBlock *b) {
    size_t h = (size_t)head, nope = (size_t)c->qk_nope_dim, dv = (size_t)c->v_dim, kvrow = nope + dv;
    size_t kl = (size_t)c->kv_lora_rank, D = (size_t)c->hidden;
    switch (kind) {
    case HK_Q: {
        tensor_role q = c->q_lora_rank ? ROLE_Q_B : ROLE_Q;
        return block_set(c, b, q, h * (size_t)cfg_d_qk(c) + c0, nc, 0, (size_t)cfg_d_in_q(c), true);
    }
    case HK_K:
        if (part == PART_ALL)
            return al_err("MLA keys have two parts with different inputs (NoPE from the kv latent, RoPE shared from "
                          "hidden states): ask for the nope or the rope part");
        if (part == PART_ROPE) return block_set(c, b, ROLE_KV_A, kl, (size_t)c->qk_rope_dim, 0, D, true);
        return block_set(c, b, ROLE_KV_B, h * kvrow, nope, 0, kl, true);
    case HK_V: return block_set(c, b, ROLE_KV_B, h * kvrow + nope, dv, 0, kl, true);
    case HK_O: return block_set(c, b, ROLE_O, 0, D, h * dv, dv, true);
    }
    return al_err("internal: unknown head kind %d", (int)kind);
}

/* GQA (Llama, Mistral, Qwen2/3, Gemma, Mixtral, OLMo 2, llama2.c): q/k/v_proj rows per head,
 * o_proj columns per head. Phi-3's qkv_proj stacks the same rows: [Q heads ; K heads ; V heads].
 * GPT-NeoX's query_key_value holds them head by head: head h's rows [q_h ; k_h ; v_h] start at
 * h (2 d_qk + dv); its attention.dense has o_proj's layout. */
static int block_gqa(const ModelConfig *c, head_kind kind, int head, size_t c0, size_t nc, HeadBlock *b) {
    size_t h = (size_t)head, dqk = (size_t)cfg_d_qk(c), dv = (size_t)c->v_dim, D = (size_t)c->hidden;
    size_t H = (size_t)c->n_heads, G = (size_t)c->n_kv_heads;
    if (kind == HK_O) return block_set(c, b, ROLE_O, 0, D, h * dv, dv, true);
    if (c->attn == QKV_CAT) {
        switch (kind) {
        case HK_Q: return block_set(c, b, ROLE_QKV, h * dqk + c0, nc, 0, D, true);
        case HK_K: return block_set(c, b, ROLE_QKV, H * dqk + h * dqk + c0, nc, 0, D, true);
        case HK_V: return block_set(c, b, ROLE_QKV, (H + G) * dqk + h * dv, dv, 0, D, true);
        default: break;
        }
    }
    if (c->attn == QKV_HEADS) {
        size_t row = h * (2 * dqk + dv);
        switch (kind) {
        case HK_Q: return block_set(c, b, ROLE_QKV, row + c0, nc, 0, D, true);
        case HK_K: return block_set(c, b, ROLE_QKV, row + dqk + c0, nc, 0, D, true);
        case HK_V: return block_set(c, b, ROLE_QKV, row + 2 * dqk, dv, 0, D, true);
        default: break;
        }
    }
    size_t qrows = c->attn_gate ? 2 * dqk : dqk;      /* a gated q_proj: per head [query | gate] */
    switch (kind) {
    case HK_Q: return block_set(c, b, ROLE_Q, h * qrows + c0, nc, 0, D, true);
    case HK_K: return block_set(c, b, ROLE_K, h * dqk + c0, nc, 0, D, true);
    case HK_V:                                        /* attention_k_eq_v: V is k_proj's output */
        return block_set(c, b, cfg_layer_v_is_k(c, b->layer) ? ROLE_K : ROLE_V, h * dv, dv, 0, D, true);
    default: break;
    }
    return al_err("internal: unknown head kind %d", (int)kind);
}

/* GPT-2: Conv1D stores (in, out): c_attn's columns are [Q | K | V] heads, c_proj's rows are the
 * output heads; views are the blocks themselves. */
static int block_gpt2(const ModelConfig *c, head_kind kind, int head, size_t c0, size_t nc, HeadBlock *b) {
    size_t h = (size_t)head, d = (size_t)cfg_d_qk(c), D = (size_t)c->hidden;
    if (kind == HK_O) return block_set(c, b, ROLE_O, h * d, d, 0, D, false);
    size_t base = kind == HK_Q ? 0 : kind == HK_K ? D : 2 * D;
    if (kind == HK_V) { c0 = 0; nc = d; }
    return block_set(c, b, ROLE_QKV, 0, D, base + h * d + c0, nc, false);
}

/* DeepSeek-V4 (attn.*, HF Linear (out, in); hd = head_dim, R = o_lora_rank, per = H / o_groups heads in a group):
 *   Q[h]  (q_lora, nc)  wq_b rows [h hd + c0, +nc), transposed: the query from the normed latent (q_norm's weight
 *                       inside the latent; the per-head weightless RMS norm after it is a scalar per token)
 *   K, V  (D, nc)       wkv rows [c0, +nc) transposed, columns times kv_norm's weight: the one KV head, key and value
 *   O[h]  (hd, D)       wo_a rows [g R, +R) x cols [j hd, +hd), transposed (hd, R), times wo_b cols [g R, +R),
 *                       transposed (R, D); g = h / per, j = h % per: wo_a is block-diagonal over groups */
static int block_dsv4(const ModelConfig *c, head_kind kind, int head, size_t c0, size_t nc, HeadBlock *b) {
    size_t h = (size_t)head, hd = (size_t)cfg_d_qk(c), D = (size_t)c->hidden, R = (size_t)c->o_lora_rank;
    size_t per = (size_t)(c->n_heads / c->o_groups), g = h / per, j = h % per;
    int rc;
    switch (kind) {
    case HK_Q: return block_set(c, b, ROLE_Q_B, h * hd + c0, nc, 0, (size_t)c->q_lora_rank, true);
    case HK_V:                                /* V is the key's projection, every column */
    case HK_K:
        if (kind == HK_V) { c0 = 0; nc = (size_t)c->v_dim; }
        rc = block_set(c, b, ROLE_KV_A, c0, nc, 0, D, true);
        b->scaled = true;
        b->scale_role = ROLE_KV_A_NORM;
        b->s0 = c0;
        return rc;
    case HK_O:
        rc = block_set(c, b, ROLE_O_A, g * R, R, j * (size_t)c->v_dim, (size_t)c->v_dim, true);
        b->then = true;
        b->then_role = ROLE_O;
        b->tr0 = 0; b->tnr = D; b->tc0 = g * R; b->tnc = R;
        return rc;
    }
    return al_err("internal: unknown head kind %d", (int)kind);
}

bool model_views_composite(const Model *m) { return m->cfg.attn == QKV_DSV4; }

int model_head_block(const Model *m, head_kind kind, int layer, int head, head_part part, HeadBlock *b) {
    memset(b, 0, sizeof *b);
    if (model_check_head(m, kind, layer, head) != AL_OK) return AL_ERR;
    if (m->cfg.kv_rebuild && (kind == HK_K || kind == HK_V))    /* attnlab's qk-norm keep: K / V rebuilt from a cache */
        return al_err("%s: attnlab's layout of a qk-norm keep conversion rebuilds K and V from a cache (kv_a_proj_with_mqa, "
                      "kv_b_proj): it has no k_proj / v_proj to view per head; analyse its source (its layers run in "
                      "ppl, generate and check DIR)", m->path);
    size_t c0 = 0, nc = 0;
    const ModelConfig *c = model_layer_cfg(m, layer);    /* Gemma 4's full layers: their own head dims */
    b->layer = kind == HK_K || kind == HK_V ? cfg_kv_source(c, layer) : layer;   /* Gemma 4's KV-shared layers */
    if ((kind == HK_Q || kind == HK_K) && !(cfg_is_mla(c) && kind == HK_K && part == PART_ALL) &&
        part_cols(c, part, &c0, &nc) != AL_OK)
        return AL_ERR;
    if (c->attn == QKV_CONV1D) return block_gpt2(c, kind, head, c0, nc, b);
    if (c->attn == QKV_DSV4) return block_dsv4(c, kind, head, c0, nc, b);
    if (cfg_is_mla(c)) return block_mla(c, kind, head, part, c0, nc, b);
    return block_gqa(c, kind, head, c0, nc, b);
}

/* One block of a view: sliced from the cached layer (held while it is copied), else read alone from the mapping;
 * transposed where the view is. */
static int head_piece(Model *m, int layer, tensor_role role, size_t r0, size_t nr, size_t c0, size_t nc, bool tr,
                      Mat **out) {
    *out = NULL;
    CacheEntry *e = cache_acquire(m, layer, false);
    if (e) {                                 /* slice the loaded layer */
        const Mat *t;
        int rc = entry_tensor(m, e, role, &t);
        if (rc == AL_OK && !(*out = tr ? mat_slice_t(t, r0, nr, c0, nc) : mat_slice(t, r0, nr, c0, nc))) rc = AL_ERR;
        cache_release(m, e);
        return rc;
    }
    /* one head alone: read just its block from the mapping (an R1 o_proj is 470 MB as float) */
    char *name = attn_weight_name(m, role, layer);
    Mat *blk = NULL;
    int rc = name ? store_read_block(m->store, name, r0, nr, c0, nc, &blk) : AL_ERR;
    free(name);
    if (rc != AL_OK) return AL_ERR;
    *out = tr ? mat_transpose(blk) : blk;
    if (tr) mat_free(blk);
    return *out ? AL_OK : AL_ERR;
}

/* A composite view (HeadBlock.then / scaled, DeepSeek-V4): W times the second block, its columns times the norm. */
static int head_compose(Model *m, const HeadBlock *b, Mat **W) {
    if (b->then) {
        Mat *B = NULL, *P = NULL;
        int rc = head_piece(m, b->layer, b->then_role, b->tr0, b->tnr, b->tc0, b->tnc, b->transposed, &B);
        if (rc == AL_OK && !(P = mat_mul(*W, B))) rc = AL_ERR;
        mat_free(B);
        if (rc != AL_OK) return rc;
        mat_free(*W);
        *W = P;
    }
    if (!b->scaled) return AL_OK;
    char name[192];
    Mat *s = NULL;
    cfg_role_name(&m->cfg, b->scale_role, b->layer, -1, "weight", name, sizeof name);
    int rc = store_read(m->store, name, &s);
    if (rc == AL_OK && s->rows * s->cols < b->s0 + (*W)->cols)
        rc = al_err("tensor '%s' has %zu value%s; the view needs [%zu, %zu)", name, s->rows * s->cols, al_s(s->rows * s->cols), b->s0,
                    b->s0 + (*W)->cols);
    for (size_t i = 0; rc == AL_OK && i < (*W)->rows; i++)
        for (size_t k = 0; k < (*W)->cols; k++) (*W)->data[i * (*W)->cols + k] *= s->data[b->s0 + k];
    mat_free(s);
    return rc;
}

int model_head(Model *m, head_kind kind, int layer, int head, head_part part, Mat **out) {
    *out = NULL;
    HeadBlock b;
    if (model_head_block(m, kind, layer, head, part, &b) != AL_OK) return AL_ERR;
    /* b.layer: a KV-shared layer's K / V are the source layer's */
    if (head_piece(m, b.layer, b.role, b.r0, b.nr, b.c0, b.nc, b.transposed, out) != AL_OK) return AL_ERR;
    if ((b.then || b.scaled) && head_compose(m, &b, out) != AL_OK) {
        mat_free(*out);
        *out = NULL;
        return AL_ERR;
    }
    return AL_OK;
}

/* Values [off, off + d) of the 1-D tensor `name` into *out (d floats). */
static int read_bias(Model *m, const char *name, size_t off, size_t d, float **out) {
    Mat *b = NULL;
    int rc = store_read(m->store, name, &b);
    if (rc == AL_OK && off + d > b->rows * b->cols)
        rc = al_err("bias '%s' has %zu value%s, shorter than the config implies (it needs [%zu, %zu))", name,
                    b->rows * b->cols, al_s(b->rows * b->cols), off, off + d);
    if (rc != AL_OK) { mat_free(b); return rc; }
    *out = al_malloc3(d, 1, sizeof(float), "a bias");
    if (*out) memcpy(*out, b->data + off, d * sizeof(float));
    mat_free(b);
    return *out ? AL_OK : AL_ERR;
}

/* The bias of a Q/K/V view sits where the view's output dims sit in the weight: rows r0.. of an
 * HF Linear (out, in), columns c0.. of GPT-2's Conv1D (in, out). */
int model_head_bias(Model *m, head_kind kind, int layer, int head, float **out, size_t *n) {
    *out = NULL;
    *n = 0;
    const ModelConfig *c = &m->cfg;
    if (model_check_head(m, kind, layer, head) != AL_OK) return AL_ERR;
    if (kind == HK_O || !c->qkv_bias || cfg_is_mla(c)) return AL_OK;
    HeadBlock b;
    if (model_head_block(m, kind, layer, head, PART_ALL, &b) != AL_OK) return AL_ERR;
    size_t off = b.transposed ? b.r0 : b.c0, d = b.transposed ? b.nr : b.nc;
    char name[192];
    cfg_role_name(c, b.role, b.layer, -1, "bias", name, sizeof name);   /* the view's role: in the layout */
    int rc = read_bias(m, name, off, d, out);
    if (rc == AL_OK) *n = d;
    return rc;
}

int model_o_bias(Model *m, int layer, float **out) {
    *out = NULL;
    if (model_check_head(m, HK_O, layer, 0) != AL_OK) return AL_ERR;
    if (!m->cfg.o_bias) return AL_OK;
    HeadBlock b;
    if (model_head_block(m, HK_O, layer, 0, PART_ALL, &b) != AL_OK) return AL_ERR;
    char name[192];
    cfg_role_name(&m->cfg, b.role, layer, -1, "bias", name, sizeof name);
    return !store_has(m->store, name) ? AL_OK     /* attention_bias without an o bias */
                                      : read_bias(m, name, 0, (size_t)m->cfg.hidden, out);
}

/* ================================================================ the parsed config */

cJSON *model_config_tree(const Model *m) {
    return m->config_tree ? cJSON_Duplicate(m->config_tree, true) : NULL;
}

size_t model_config_ids(const Model *m, const char *key, int *list, size_t n, size_t cap) {
    return m->config_tree ? config_tree_ids(m->config_tree, key, list, n, cap) : n;
}
