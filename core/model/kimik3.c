/* kimik3.c -- Kimi-K3's config.json read and described; config.c reads its text tower as Kimi-Linear's and
 * analyses.c refuses the forward pass naming what is not built (kimik3.h says what the release computes). */
#include "kimik3.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al.h"
#include "dsv4.h"

/* o[key] as a whole number >= 0 (dflt when absent or null); a bad one is added to bad. */
static int k3_int(const cJSON *o, const char *key, int dflt, char *bad, size_t cap) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return dflt;
    if (cJSON_IsNumber(j) && j->valuedouble >= 0 && j->valuedouble <= 1e9 && j->valuedouble == floor(j->valuedouble))
        return (int)j->valuedouble;
    size_t n = strlen(bad);
    snprintf(bad + n, cap - n, "%s%s", n ? ", " : "", key);
    return 0;
}

static double k3_num(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(j) ? j->valuedouble : 0;
}

static bool k3_bool(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* linear_attn_config's kda_layers and full_attn_layers (1-based) into s->mla / the counts. */
static int k3_layers(const cJSON *lac, const char *where, KimiK3Spec *s) {
    static const char *const lists[2] = {"kda_layers", "full_attn_layers"};
    unsigned char seen[CFG_MAX_LAYERS] = {0};
    for (int k = 0; k < 2; k++) {
        const cJSON *e, *a = cJSON_GetObjectItemCaseSensitive(lac, lists[k]);
        if (!cJSON_IsArray(a))
            return al_err("%s: kimi_k3's text_config.linear_attn_config.%s must be a list of 1-based layers", where,
                          lists[k]);
        cJSON_ArrayForEach(e, a) {
            double v = cJSON_IsNumber(e) ? e->valuedouble : 0;
            if (v < 1 || v > s->layers || v != floor(v) || seen[(int)v - 1])
                return al_err("%s: kimi_k3's linear_attn_config.%s names layer %g: layers are 1 to %d, each listed "
                              "once", where, lists[k], v, s->layers);
            seen[(int)v - 1] = 1;
            s->mla[(int)v - 1] = (unsigned char)k;
            if (k) s->n_mla++;
            else s->n_kda++;
        }
    }
    for (int L = 0; L < s->layers; L++)
        if (!seen[L])
            return al_err("%s: kimi_k3's linear_attn_config lists layer %d in neither kda_layers nor full_attn_layers",
                          where, L + 1);
    return AL_OK;
}

int kimik3_parse(const cJSON *root, const char *where, KimiK3Spec *s) {
    memset(s, 0, sizeof *s);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
    if (!cJSON_IsObject(tc) || !cJSON_IsString(tt) || strcmp(tt->valuestring, "kimi_linear"))
        return al_err("%s: kimi_k3 keeps its language model under \"text_config\" (model_type kimi_linear), which "
                      "is %s", where, !cJSON_IsObject(tc) ? "missing" : "of another model_type");
    const cJSON *lac = cJSON_GetObjectItemCaseSensitive(tc, "linear_attn_config");
    char bad[256] = "";
    s->layers = k3_int(tc, "num_hidden_layers", 0, bad, sizeof bad);
    s->heads = k3_int(tc, "num_attention_heads", 0, bad, sizeof bad);
    s->hidden = k3_int(tc, "hidden_size", 0, bad, sizeof bad);
    s->kda_heads = k3_int(lac, "num_heads", 0, bad, sizeof bad);
    s->kda_head_dim = k3_int(lac, "head_dim", 0, bad, sizeof bad);
    s->res_block = k3_int(tc, "attn_res_block_size", 0, bad, sizeof bad);
    s->experts = k3_int(tc, "num_experts", 0, bad, sizeof bad);
    s->top_k = k3_int(tc, "num_experts_per_token", 0, bad, sizeof bad);
    s->shared = k3_int(tc, "num_shared_experts", 0, bad, sizeof bad);
    s->latent = k3_int(tc, "routed_expert_hidden_size", 0, bad, sizeof bad);
    if (bad[0]) return al_err("%s: kimi_k3's text_config: %s: each must be a whole number >= 0", where, bad);
    if (s->layers < 1 || s->layers > CFG_MAX_LAYERS)
        return al_err("%s: kimi_k3's num_hidden_layers is %d: attnlab reads 1 to %d", where, s->layers, CFG_MAX_LAYERS);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(tc, "hidden_act");
    snprintf(s->act, sizeof s->act, "%s", cJSON_IsString(act) ? act->valuestring : "silu");
    s->situ_beta = k3_num(tc, "activation_situ_beta");
    s->situ_linear_beta = k3_num(tc, "activation_situ_linear_beta");
    s->mla_gate = k3_bool(tc, "mla_use_output_gate");
    s->full_rank_gate = k3_bool(lac, "use_full_rank_gate");
    return k3_layers(lac, where, s);
}

const char *kimik3_describe(const KimiK3Spec *s, char *buf, size_t cap) {
    int kda[CFG_MAX_LAYERS], mla[CFG_MAX_LAYERS], nk = 0, nm = 0;
    for (int L = 0; L < s->layers; L++) {
        if (s->mla[L]) mla[nm++] = L;
        else kda[nk++] = L;
    }
    char lk[160], lm[160];
    dsv4_layer_list(kda, nk, lk, sizeof lk);
    dsv4_layer_list(mla, nm, lm, sizeof lm);
    snprintf(buf, cap, "%d layer%s: MLA of %d head%s without RoPE on %d (%s), Kimi Delta Attention (%d head%s of %d) on "
             "%d (%s); output gates: KDA %s, MLA %s; attention residuals in blocks of %d; activation %s (beta %g, "
             "linear beta %g); %d expert%s top-%d in a latent of %d, %d shared",
             s->layers, al_s(s->layers), s->heads, al_s(s->heads), s->n_mla, nm ? lm : "none", s->kda_heads, al_s(s->kda_heads), s->kda_head_dim, s->n_kda,
             nm ? "the others" : lk, s->full_rank_gate ? "full-rank (g_proj)" : "low-rank", s->mla_gate ? "yes" : "no",
             s->res_block, s->act, s->situ_beta, s->situ_linear_beta, s->experts, al_s(s->experts), s->top_k, s->latent, s->shared);
    return buf;
}
