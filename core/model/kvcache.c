/* kvcache.c -- the caches of a loaded model at a context length, per layer type (kvcache.h). Owns the
 * grouping of layers by what they cache; the per-layer facts come from config.h (cfg_layer_window,
 * cfg_layer_chunk, cfg_kv_source, cfg_layer_linear) and model.h (model_layer_cfg, cfg_kv_values). */
#include "kvcache.h"

#include <stdio.h>
#include <string.h>

#include "al.h"

const char *kvcache_kind_name(kvcache_kind k) {
    static const char *const names[] = {"full attention", "sliding window", "chunked attention",
                                        "KV-shared (reads an earlier layer's cache)", "recurrent state"};
    return k <= KVC_STATE ? names[k] : "?";
}

size_t kvcache_state_values(const ModelConfig *c) {
    const LinearSpec *l = &c->lin;
    if (l->layout == LIN_NONE) return 0;
    size_t kd = (size_t)l->k_heads * (size_t)l->dk, vd = (size_t)l->v_heads * (size_t)l->dv;
    size_t conv = l->conv > 1 ? (size_t)(l->conv - 1) : 0;
    return (size_t)l->v_heads * (size_t)l->dk * (size_t)l->dv + conv * (2 * kd + vd);   /* S (H, dk, dv) + conv */
}

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

int kvcache_at(const Model *m, size_t context, KvcacheRow *rows, int *n) {
    int last[KVCACHE_MAX_ROWS], from[KVCACHE_MAX_ROWS];
    *n = 0;
    for (int L = 0; L < m->cfg.n_layers; L++) {
        kvcache_kind k;
        size_t span, per;
        if (!layer_kind(m, L, &k, &span, &per)) continue;
        int r = 0;
        while (r < *n && !(rows[r].kind == k && rows[r].span == span && rows[r].per_token == per)) r++;
        if (r == *n) {
            if (r == KVCACHE_MAX_ROWS) return al_err("kv-cache: more than %d kinds of layer", KVCACHE_MAX_ROWS);
            KvcacheRow *w = &rows[r];
            memset(w, 0, sizeof *w);
            w->kind = k, w->span = span, w->per_token = per;
            w->tokens = k == KVC_STATE || k == KVC_SHARED ? 0 : span && span < context ? span : context;
            last[r] = -1;
            (*n)++;
        }
        add_layer(rows[r].layers, sizeof rows[r].layers, last[r], L, &from[r]);
        last[r] = L;
        rows[r].n_layers++;
        rows[r].values += k == KVC_STATE ? per : per * rows[r].tokens;
    }
    return AL_OK;
}
