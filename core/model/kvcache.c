/* kvcache.c -- the caches of a loaded model at a context length, per layer type (kvcache.h). Owns the
 * grouping of layers by what they cache; the per-layer facts come from config.h (cfg_layer_window,
 * cfg_layer_chunk, cfg_kv_source, cfg_layer_linear) and model.h (model_layer_cfg, cfg_kv_values). */
#include "kvcache.h"

#include <stdio.h>
#include <string.h>

#include "al.h"

const char *kvcache_kind_name(kvcache_kind k) {
    static const char *const names[] = {"full attention", "sliding window", "chunked attention",
                                        "KV-shared (reads an earlier layer's cache)", "recurrent state",
                                        "lightning indexer keys", "conv window", "compressed KV"};
    return k <= KVC_COMPRESSED ? names[k] : "?";
}

size_t kvcache_state_values(const ModelConfig *c) {
    const LinearSpec *l = &c->lin;
    return l->layout == LIN_NONE ? 0 : (size_t)l->v_heads * (size_t)l->dk * (size_t)l->dv;   /* S (H, dk, dv) */
}

size_t kvcache_conv_values(const ModelConfig *c) {
    const LinearSpec *l = &c->lin;
    if (l->layout == LIN_NONE || l->conv < 2) return 0;
    return (size_t)(l->conv - 1) * (2 * (size_t)l->k_heads * (size_t)l->dk + (size_t)l->v_heads * (size_t)l->dv);
}

bool kvcache_constant(kvcache_kind k) { return k == KVC_STATE || k == KVC_CONV; }

/* Appends layer L to text, which lists the row's layers as runs ("0-4, 6"); last: the row's last layer. */
static void add_layer(char *text, size_t cap, int last, int L, int *run_from) {
    size_t n = strlen(text);
    if (last >= 0 && L == last + 1) {                 /* extends the run: rewrite its end */
        char *tail = strrchr(text, ' ');
        char *at = tail ? tail + 1 : text;
        snprintf(at, cap - (size_t)(at - text), "%d-%d", *run_from, L);
        return;
    }
    *run_from = L;
    snprintf(text + n, cap - n, "%s%d", n ? ", " : "", L);
}

/* What layer L caches: its kind, span and values per token (per layer for a state). False for no cache. */
static bool layer_kind(const Model *m, int L, kvcache_kind *k, size_t *span, size_t *per) {
    const ModelConfig *c = &m->cfg;
    *span = 0;
    if (cfg_layer_linear(c, L)) {
        if (c->lin.layer[L] != 1) return false;        /* Nemotron-H's MLP blocks: no mixer, no cache */
        *k = KVC_STATE, *per = kvcache_state_values(c);
        return true;
    }
    if (cfg_kv_source(c, L) != L) { *k = KVC_SHARED, *per = 0; return true; }
    *per = cfg_kv_values(model_layer_cfg(m, L));
    size_t w = cfg_layer_window(c, L), ch = cfg_layer_chunk(c, L);
    *k = w ? KVC_WINDOW : ch ? KVC_CHUNK : KVC_FULL;
    *span = w ? w : ch;
    return true;
}

/* Adds layer L to the row of (k, span, per) in rows[0..*n), opening it when there is none. */
static int add_to_row(KvcacheRow *rows, int *n, const KvcacheRow *key, int L, size_t context) {
    int r = 0;
    while (r < *n && !(rows[r].kind == key->kind && rows[r].span == key->span && rows[r].per_token == key->per_token)) r++;
    KvcacheRow *w = &rows[r];
    if (r == *n) {
        if (r == KVCACHE_MAX_ROWS) return al_err("kv-cache: more than %d kind%s of layer", KVCACHE_MAX_ROWS, al_s(KVCACHE_MAX_ROWS));
        *w = *key;
        bool strided = key->kind == KVC_COMPRESSED || key->kind == KVC_INDEX;   /* an entry per span tokens */
        w->tokens = kvcache_constant(key->kind) || key->kind == KVC_SHARED ? 0
                    : strided && key->span ? context / key->span
                    : key->span && key->span < context ? key->span : context;
        w->last = -1;
        (*n)++;
    }
    add_layer(w->layers, sizeof w->layers, w->last, L, &w->run_from);
    w->last = L;
    w->n_layers++;
    w->values += kvcache_constant(key->kind) ? key->per_token : key->per_token * w->tokens;
    return AL_OK;
}

int kvcache_at(const Model *m, size_t context, KvcacheRow *rows, int *n) {
    *n = 0;
    for (int L = 0; L < m->cfg.n_layers; L++) {
        KvcacheRow key = {0};
        if (layer_kind(m, L, &key.kind, &key.span, &key.per_token) && add_to_row(rows, n, &key, L, context))
            return AL_ERR;
        KvcacheRow conv = {.kind = KVC_CONV, .per_token = kvcache_conv_values(&m->cfg)};
        if (key.kind == KVC_STATE && conv.per_token && add_to_row(rows, n, &conv, L, context)) return AL_ERR;
        KvcacheRow idx = {.kind = KVC_INDEX, .per_token = (size_t)m->cfg.index_head_dim};
        if (cfg_layer_indexer(&m->cfg, L) && add_to_row(rows, n, &idx, L, context)) return AL_ERR;
        size_t r = m->cfg.compress[L];                  /* DeepSeek-V4: its compressed entries (and CSA's index keys) */
        KvcacheRow cmp = {.kind = KVC_COMPRESSED, .span = r, .per_token = (size_t)m->cfg.v_dim};
        if (r && add_to_row(rows, n, &cmp, L, context)) return AL_ERR;
        KvcacheRow cidx = {.kind = KVC_INDEX, .span = r, .per_token = (size_t)m->cfg.index_head_dim};
        if (r == 4 && cidx.per_token && add_to_row(rows, n, &cidx, L, context)) return AL_ERR;
    }
    return AL_OK;
}

dt_type kvcache_dtype(const Model *m, char *why, size_t cap) {
    char buf[160];
    dt_type w = m->cfg.dtype, td = dt_parse_torch(m->cfg.torch_dtype), d;
    if (m->from_gguf) {                                               /* gguf_model_open's: llama.cpp runs it */
        d = DT_F16;
        snprintf(buf, sizeof buf, "a GGUF: llama.cpp's default cache type (-ctk / -ctv f16)%s%s",
                 w != d ? "; weights stored " : "", w != d ? dt_name(w) : "");
    } else if (w == DT_F8_E4M3 || w == DT_F8_E5M2 || m->fp4 != DT_FP4_NONE || m->quant.present) {
        d = td == DT_F16 ? DT_F16 : DT_BF16;
        snprintf(buf, sizeof buf, "quantized weights: the engines run and cache 16-bit activations%s",
                 d == DT_F16 ? " (config torch_dtype float16)" : "");
    } else if (td != DT_INVALID) {
        d = td;
        snprintf(buf, sizeof buf, "config torch_dtype %s%s%s", m->cfg.torch_dtype, w != d ? "; weights stored " : "",
                 w != d ? dt_name(w) : "");
    } else {
        d = w == DT_F32 || w == DT_F16 || w == DT_BF16 || w == DT_F64 ? w : DT_BF16;
        snprintf(buf, sizeof buf, "%s%s", m->cfg.torch_dtype[0] ? "config torch_dtype not a float dtype; "
                 : "no config torch_dtype; ", d == w ? "the weights' dtype" : "16 bits");
    }
    if (why && cap) snprintf(why, cap, "%s", buf);
    return d;
}
