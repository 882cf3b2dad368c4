/* layersel.c -- which layers an analysis over a layer range runs (see layersel.h). */
#include "layersel.h"

#include <stdio.h>
#include <string.h>

#include "al.h"

bool layersel_attn(const ModelConfig *c, int layer) { return !cfg_layer_linear(c, layer); }

int layersel_next(const ModelConfig *c, int layer, int hi) {
    while (layer <= hi && !layersel_attn(c, layer)) layer++;
    return layer;
}

int layersel_count(const ModelConfig *c, int lo, int hi) {
    int n = 0;
    for (int L = layersel_next(c, lo, hi); L <= hi; L = layersel_next(c, L + 1, hi)) n++;
    return n;
}

const char *layersel_other_kind(const ModelConfig *c) {
    if (c->lin.blocks) return "Mamba-2 (SSM) or MLP / MoE blocks without attention";   /* Nemotron-H */
    switch (c->lin.layout) {
    case LIN_QWEN3_NEXT: case LIN_QWEN3_5: return "Gated DeltaNet linear attention";
    case LIN_KDA: return "Kimi Delta Attention linear attention";
    case LIN_MAMBA2_NEMOTRON: case LIN_MAMBA2_GRANITE: return "Mamba-2 (SSM)";
    default: return "not softmax attention";
    }
}

/* Appends "A-B" (or "A") to buf at *at, comma-separated after the first. */
static void add_run(char *buf, size_t cap, size_t *at, int a, int b) {
    if (*at >= cap) return;
    int k = a == b ? snprintf(buf + *at, cap - *at, "%s%d", *at ? ", " : "", a)
                   : snprintf(buf + *at, cap - *at, "%s%d-%d", *at ? ", " : "", a, b);
    *at += k > 0 ? (size_t)k : 0;
}

/* The layers in [lo, hi] with attention (want) or without, as runs "0-2, 4-6" into buf; their count. */
static int layer_runs(const ModelConfig *c, int lo, int hi, bool want, char *buf, size_t cap) {
    size_t at = 0;
    int n = 0;
    if (cap) buf[0] = 0;
    for (int L = lo; L <= hi; L++) {
        if (layersel_attn(c, L) != want) continue;
        int e = L;
        while (e + 1 <= hi && layersel_attn(c, e + 1) == want) e++;
        add_run(buf, cap, &at, L, e);
        n += e - L + 1;
        L = e;
    }
    return n;
}

const char *layersel_text(const ModelConfig *c, int lo, int hi, char *buf, size_t cap) {
    if (layersel_count(c, lo, hi) == hi - lo + 1) snprintf(buf, cap, "%d-%d", lo, hi);
    else layer_runs(c, lo, hi, true, buf, cap);
    return buf;
}

const char *layersel_words(const ModelConfig *c, int lo, int hi, char *buf, size_t cap) {
    char t[256];
    if (lo == hi) snprintf(t, sizeof t, "%d", lo);
    else layersel_text(c, lo, hi, t, sizeof t);
    snprintf(buf, cap, "%s %s", strpbrk(t, "-,") ? "layers" : "layer", t);
    return buf;
}

int layersel_note(const ModelConfig *c, int lo, int hi, const char *verb, char *note, size_t cap) {
    char other[256], attn[256];
    if (cap) note[0] = 0;
    int n_other = layer_runs(c, lo, hi, false, other, sizeof other), n_attn = 0;
    size_t at = 0;
    attn[0] = 0;
    for (int L = layersel_next(c, lo, hi); L <= hi; L = layersel_next(c, L + 1, hi), n_attn++)
        if (at < sizeof attn) at += (size_t)snprintf(attn + at, sizeof attn - at, "%s%d", n_attn ? ", " : "", L);
    if (n_other && n_attn && cap)
        snprintf(note, cap, "layer%s %s %s %s: %s the %d attention layer%s %s", n_other > 1 ? "s" : "", other,
                 n_other > 1 ? "are" : "is", layersel_other_kind(c), verb, n_attn, n_attn > 1 ? "s" : "", attn);
    return n_attn;
}

int layersel_range(const ModelConfig *c, const char *what, int *lo, int *hi, char *note, size_t cap) {
    if (cap) note[0] = 0;
    int first = layersel_next(c, *lo, *hi);
    if (first > *hi) {
        if (*lo == *hi) return cfg_check_attn_layer(c, *lo, what);
        char list[256];
        cfg_attn_layers(c, list, sizeof list);
        return al_err("%s: layers %d-%d of this %s model are all %s (no Q/K/V heads, no KV cache); its "
                      "softmax-attention layers are %s", what, *lo, *hi, c->model_type, layersel_other_kind(c), list);
    }
    int last = *hi;
    while (!layersel_attn(c, last)) last--;
    layersel_note(c, *lo, *hi, "sweeping", note, cap);
    *lo = first;
    *hi = last;
    return AL_OK;
}
