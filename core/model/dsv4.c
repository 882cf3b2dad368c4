/* dsv4.c -- DeepSeek-V4's config.json read and described (dsv4.h says what the release computes and what attnlab
 * reads of it). */
#include "dsv4.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al.h"

/* root[key] as a whole number >= 0 (dflt when absent or null; -1 marks a bad or missing required one). */
static int v4_int(const cJSON *root, const char *key, int dflt, bool required, char *bad, size_t cap) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!j || cJSON_IsNull(j)) {
        if (!required) return dflt;
    } else if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= 1e9 &&
               j->valuedouble == floor(j->valuedouble)) {
        return (int)j->valuedouble;
    }
    size_t n = strlen(bad);
    snprintf(bad + n, cap - n, "%s%s", n ? ", " : "", key);
    return -1;
}

static int v4_ratios(const cJSON *root, const char *where, Dsv4Spec *s) {
    const cJSON *cr = cJSON_GetObjectItemCaseSensitive(root, "compress_ratios");
    if (!cr || cJSON_IsNull(cr)) return AL_OK;                  /* every layer a window */
    int n = cJSON_GetArraySize(cr);
    if (!cJSON_IsArray(cr) || n < s->layers)
        return al_err("%s: deepseek_v4's compress_ratios must list one ratio per layer (num_hidden_layers %d; "
                      "the MTP layers' after them), not %s", where, s->layers,
                      cJSON_IsArray(cr) ? "fewer" : "a non-list");
    s->n_ratios = n < CFG_MAX_LAYERS ? n : CFG_MAX_LAYERS;
    for (int i = 0; i < s->n_ratios; i++) {
        const cJSON *e = cJSON_GetArrayItem(cr, i);
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (v < 0 || v > 1e6 || v != floor(v))
            return al_err("%s: deepseek_v4's compress_ratios[%d] must be a whole number >= 0 (0: window only, "
                          "4: CSA, 128: HCA)", where, i);
        s->ratio[i] = (int)v;
    }
    return AL_OK;
}

int dsv4_parse(const cJSON *root, const char *where, Dsv4Spec *s) {
    memset(s, 0, sizeof *s);
    char bad[512] = "";
    s->layers = v4_int(root, "num_hidden_layers", 0, true, bad, sizeof bad);
    s->heads = v4_int(root, "num_attention_heads", 0, true, bad, sizeof bad);
    s->hidden = v4_int(root, "hidden_size", 0, true, bad, sizeof bad);
    s->kv_heads = v4_int(root, "num_key_value_heads", 1, false, bad, sizeof bad);
    s->head_dim = v4_int(root, "head_dim", 512, false, bad, sizeof bad);
    s->rope_dim = v4_int(root, "qk_rope_head_dim", 64, false, bad, sizeof bad);
    s->q_lora = v4_int(root, "q_lora_rank", 0, true, bad, sizeof bad);
    s->o_lora = v4_int(root, "o_lora_rank", 0, true, bad, sizeof bad);
    s->o_groups = v4_int(root, "o_groups", 0, true, bad, sizeof bad);
    s->hc_mult = v4_int(root, "hc_mult", 1, false, bad, sizeof bad);
    s->hc_iters = v4_int(root, "hc_sinkhorn_iters", 0, false, bad, sizeof bad);
    s->hash_layers = v4_int(root, "num_hash_layers", 0, false, bad, sizeof bad);
    s->window = v4_int(root, "sliding_window", 0, false, bad, sizeof bad);
    s->index_heads = v4_int(root, "index_n_heads", 0, false, bad, sizeof bad);
    s->index_head_dim = v4_int(root, "index_head_dim", 0, false, bad, sizeof bad);
    s->index_topk = v4_int(root, "index_topk", 0, false, bad, sizeof bad);
    s->experts = v4_int(root, "n_routed_experts", 0, false, bad, sizeof bad);
    s->top_k = v4_int(root, "num_experts_per_tok", 0, false, bad, sizeof bad);
    s->mtp = v4_int(root, "num_nextn_predict_layers", 1, false, bad, sizeof bad);
    if (bad[0]) return al_err("%s: deepseek_v4: %s: each must be a whole number >= 0 (and given)", where, bad);
    if (s->layers < 1 || s->layers > CFG_MAX_LAYERS)
        return al_err("%s: deepseek_v4's num_hidden_layers is %d: attnlab reads 1 to %d", where, s->layers,
                      CFG_MAX_LAYERS);
    if (s->o_groups < 1 || s->heads % s->o_groups)
        return al_err("%s: deepseek_v4's o_groups (%d) must divide num_attention_heads (%d)", where, s->o_groups,
                      s->heads);
    return v4_ratios(root, where, s);
}

const char *dsv4_layer_kind(const Dsv4Spec *s, int layer) {
    int r = layer < s->n_ratios ? s->ratio[layer] : 0;
    return r == 0 ? "window" : r == 4 ? "CSA" : "HCA";
}

/* True when l[0..n) step evenly by *step (n > 2). */
static bool v4_even(const int *l, int n, int *step) {
    *step = n > 1 ? l[1] - l[0] : 1;
    for (int i = 1; i < n; i++)
        if (l[i] - l[i - 1] != *step) return false;
    return n > 2;
}

void dsv4_layer_list(const int *l, int n, char *buf, size_t cap) {
    int step;
    if (cap) buf[0] = 0;
    if (cap < 8) return;
    if (v4_even(l, n, &step)) {                        /* "a-b" or "a-b every s" */
        snprintf(buf, cap, step == 1 ? "%d-%d" : "%d-%d every %d", l[0], l[n - 1], step);
        return;
    }
    if (n > 3 && v4_even(l, n - 1, &step)) {           /* the same and one more: "a-b every s, c" */
        if (step == 1) snprintf(buf, cap, "%d-%d, %d", l[0], l[n - 2], l[n - 1]);
        else snprintf(buf, cap, "%d-%d every %d, %d", l[0], l[n - 2], step, l[n - 1]);
        return;
    }
    for (int i = 0; i < n; i++) {                      /* a list, cut with "..." where it would not fit */
        size_t k = strlen(buf);
        char one[24];
        snprintf(one, sizeof one, "%s%d", i ? ", " : "", l[i]);
        if (k + strlen(one) + 6 > cap) {
            snprintf(buf + k, cap - k, ", ...");
            return;
        }
        snprintf(buf + k, cap - k, "%s", one);
    }
}

int dsv4_layers_of(const Dsv4Spec *s, const char *kind, char *buf, size_t cap) {
    int l[CFG_MAX_LAYERS], n = 0;
    for (int i = 0; i < s->layers; i++)
        if (!strcmp(dsv4_layer_kind(s, i), kind)) l[n++] = i;
    buf[0] = 0;
    dsv4_layer_list(l, n, buf, cap);
    return n;
}

/* The HCA layers' ratios ("128"; "8, 128" when they differ). */
static void v4_hca_ratios(const Dsv4Spec *s, char *buf, size_t cap) {
    buf[0] = 0;
    for (int i = 0; i < s->layers; i++) {
        char one[16];
        snprintf(one, sizeof one, "%d", s->ratio[i < s->n_ratios ? i : 0]);
        if (strcmp(dsv4_layer_kind(s, i), "HCA") || strstr(buf, one)) continue;
        size_t k = strlen(buf);
        snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", one);
    }
}

const char *dsv4_describe(const Dsv4Spec *s, char *buf, size_t cap) {
    char w[160], c[160], h[160], hr[48];
    int nw = dsv4_layers_of(s, "window", w, sizeof w), nc = dsv4_layers_of(s, "CSA", c, sizeof c);
    int nh = dsv4_layers_of(s, "HCA", h, sizeof h);
    v4_hca_ratios(s, hr, sizeof hr);
    int extra = s->n_ratios > s->layers ? s->n_ratios - s->layers : 0;
    snprintf(buf, cap, "%d layer%s (+%d MTP), %d head%s of %d over %d KV head (key = value, RoPE on its last %d, a "
             "sink per head), q_lora %d, output %d group%s x o_lora %d; window %d only: %d layer%s (%s); CSA (window + "
             "4:1 compressed KV, indexer top-%d of %d x %d): %d (%s); HCA (window + %s:1 compressed): %d (%s); "
             "hyper-connections x%d, %d hash-routed layers",
             s->layers, al_s(s->layers), extra ? extra : s->mtp, s->heads, al_s(s->heads), s->head_dim, s->kv_heads, s->rope_dim, s->q_lora,
             s->o_groups, al_s(s->o_groups), s->o_lora, s->window, nw, al_s(nw), nw ? w : "none", s->index_topk, s->index_heads,
             s->index_head_dim, nc, nc ? c : "none", nh ? hr : "r", nh, nh ? h : "none", s->hc_mult, s->hash_layers);
    return buf;
}
