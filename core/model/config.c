/* config.c -- the one config.json parser: family detection, each family's dims, and the rest of
 * the model description (RoPE spec with its scaling, attention scale and soft-caps, sliding
 * windows, norms, activation, MLP / MoE routing). See config.h. */
#define _GNU_SOURCE
#include "config.h"
#include "dsv4.h"
#include "kimik3.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ names */

const char *model_family_name(model_family f) { return family_row(f)->name; }

const char *rope_layout_name(rope_layout r) {
    return r == ROPE_HALF ? "rotate_half" : r == ROPE_INTERLEAVED ? "interleaved" : "none";
}

/* ================================================================ config.json */

typedef struct {
    const cJSON *root;
    const char *where;
    char missing[512];       /* names of required fields that were absent */
    char invalid[512];       /* "name = value" of integer fields that are not non-negative ints */
    char badnum[512];        /* real-valued fields that are not numbers or out of their range */
    int nbad;
} cfg_reader;

/* Appends ", item" (or "item") to a list buffer. */
static void cfg_list_add(char *list, size_t cap, const char *item) {
    size_t n = strlen(list);
    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", item);
}

/* Reads a non-negative integer field. Absent or null: dflt (as Hugging Face reads null), and
 * recorded as missing when required. A value that is not a whole number in [0, INT_MAX]
 * (negative, fractional, 1e20, a string) is recorded as invalid. */
static int cfg_int(cfg_reader *r, const char *key, int dflt, bool required) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->root, key);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d >= 0 && d <= INT_MAX && d == floor(d)) return (int)d;
    }
    if (j && !cJSON_IsNull(j)) {
        char item[160];
        if (cJSON_IsNumber(j)) snprintf(item, sizeof item, "%s = %g", key, j->valuedouble);
        else snprintf(item, sizeof item, "%s (not a number)", key);
        cfg_list_add(r->invalid, sizeof r->invalid, item);
        return dflt;
    }
    if (required) cfg_list_add(r->missing, sizeof r->missing, key);
    return dflt;
}

/* What a real-valued field must be besides a finite number. */
typedef enum { NUM_ANY, NUM_NONNEG, NUM_POS, NUM_INT } num_range;   /* NUM_INT: |x| <= INT_MAX */

/* Reads number `key` of object o. Absent or null: dflt. Anything else that is not a finite number
 * in range (a string such as "10000", true, 1e999, a negative epsilon) is recorded in r->badnum
 * and dflt returned: the parse then fails naming it, so a default is never used silently. */
static double jnum_in(cfg_reader *r, const cJSON *o, const char *key, double dflt, num_range range) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return dflt;
    double d = cJSON_IsNumber(j) ? j->valuedouble : NAN;
    bool ok = isfinite(d) && (range == NUM_ANY || (range == NUM_INT ? fabs(d) <= INT_MAX : range == NUM_NONNEG ? d >= 0 : d > 0));
    if (ok) return d;
    char item[200], name[128];
    snprintf(name, sizeof name, "%s%s%s", o != r->root && o->string ? o->string : "", o != r->root && o->string ? "." : "", key);
    key = name;
    if (!cJSON_IsNumber(j))
        snprintf(item, sizeof item, "%s (%s)", key,
                 cJSON_IsString(j) ? "a string, not a number: write it without quotes" : "not a number");
    else if (!isfinite(d)) snprintf(item, sizeof item, "%s = %g (must be finite)", key, d);
    else snprintf(item, sizeof item, "%s = %g (must be %s)", key, d,
                  range == NUM_POS ? "> 0" : range == NUM_NONNEG ? ">= 0" : "a count that fits an int");
    cfg_list_add(r->badnum, sizeof r->badnum, item);
    r->nbad++;
    return dflt;
}

static double jnum(cfg_reader *r, const cJSON *o, const char *key, double dflt) { return jnum_in(r, o, key, dflt, NUM_ANY); }
static int jint(cfg_reader *r, const cJSON *o, const char *key, double dflt) { return (int)jnum_in(r, o, key, dflt, NUM_INT); }

static double cfg_num(cfg_reader *r, const char *key, double dflt, num_range range) {
    return jnum_in(r, r->root, key, dflt, range);
}

static bool cfg_bool(cfg_reader *r, const char *key, bool dflt) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->root, key);
    return cJSON_IsBool(j) ? cJSON_IsTrue(j) : dflt;
}

/* Maps model_type (or, without it, architectures[0]) to a family. */
static int detect_family(cfg_reader *r, model_family *fam, char *type, size_t cap) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(r->root, "model_type");
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r->root, "architectures"), 0);
    const char *t = cJSON_IsString(mt) ? mt->valuestring : NULL;
    const char *a = cJSON_IsString(arch) ? arch->valuestring : NULL;
    char shown[96], known[512];            /* the name as messages show it (control characters escaped) */
    al_printable(t ? t : a, shown, sizeof shown);
    if (family_find(t, a, fam)) {
        snprintf(type, cap, "%s", t ? t : family_row(*fam)->model_type);
        return AL_OK;
    }
    family_type_list(known, sizeof known);
    if (!t && !a)
        return al_err("%s: cannot tell the model family: no \"model_type\" and no \"architectures\" (attnlab knows "
                      "%s)", r->where, known);
    return al_err("%s: model_type '%s' is not a family attnlab knows (%s)", r->where, shown, known);
}

/* The Hugging Face Llama-style fields GQA and DeepSeek configs share: the three sizes read first,
 * the rest last (so missing and invalid keys are listed in the order of the file's readers). */
static void parse_hf_sizes(cfg_reader *r, ModelConfig *c) {
    c->hidden = cfg_int(r, "hidden_size", 0, true);
    c->n_heads = cfg_int(r, "num_attention_heads", 0, true);
    c->n_layers = cfg_int(r, "num_hidden_layers", 0, true);
}

static void parse_hf_rest(cfg_reader *r, ModelConfig *c) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(r->root, "rope_parameters");   /* transformers 5 (GLM-5) */
    c->rope_theta = cfg_num(r, "rope_theta", cJSON_IsObject(rp) ? jnum_in(r, rp, "rope_theta", 10000.0, NUM_POS) : 10000.0,
                            NUM_POS);
    c->norm_eps = cfg_num(r, "rms_norm_eps", cfg_row(c)->eps, NUM_NONNEG);
    c->intermediate = cfg_int(r, "intermediate_size", 0, false);
    c->max_pos = cfg_int(r, "max_position_embeddings", 0, false);
    c->tie_embeddings = cfg_bool(r, "tie_word_embeddings", cfg_row(c)->tied);
}

static void parse_gqa(cfg_reader *r, ModelConfig *c) {
    parse_hf_sizes(r, c);
    c->n_kv_heads = cfg_int(r, "num_key_value_heads", c->n_heads, false);
    int hd = cfg_int(r, "head_dim", cfg_int(r, "attention_head_dim", c->n_heads ? c->hidden / c->n_heads : 0, false), false);
    c->qk_nope_dim = 0;
    c->qk_rope_dim = hd;
    c->v_dim = hd;
    c->rope = cfg_row(c)->rope_adjacent ? ROPE_INTERLEAVED : ROPE_HALF;   /* Llama 4: complex RoPE, pairs (2j, 2j+1) */
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(r->root, "position_embedding_type");   /* Granite: "nope" */
    if (cfg_row(c)->rope_never || (cfg_row(c)->mup && cJSON_IsString(pe) && strcmp(pe->valuestring, "rope"))) {
        c->rope = ROPE_NONE;                      /* as GPT-2: every Q/K dim is a NoPE dim */
        c->qk_nope_dim = hd;
        c->qk_rope_dim = 0;
    }
    bool bias = cfg_bool(r, "attention_bias", cfg_row(c)->bias_default), always = cfg_row(c)->qkv_bias_always;
    c->qkv_bias = always || bias;
    c->o_bias = !always && !cfg_row(c)->o_bias_never && bias;
    parse_hf_rest(r, c);
}

/* GPT-NeoX (Pythia): Llama's size keys, LayerNorm, partial rotary (rotary_pct), fused QKV. */
static void parse_neox(cfg_reader *r, ModelConfig *c) {
    parse_hf_sizes(r, c);
    c->n_kv_heads = c->n_heads;
    int hd = c->n_heads ? c->hidden / c->n_heads : 0;
    double pct = cfg_num(r, "rotary_pct", 0.25, NUM_POS);
    int rot = (int)((double)hd * (pct < 1.0 ? pct : 1.0));
    c->qk_rope_dim = rot - rot % 2;
    c->qk_nope_dim = hd - c->qk_rope_dim;
    c->rope_first = true;
    c->v_dim = hd;
    c->rope = ROPE_HALF;
    c->qkv_bias = c->o_bias = cfg_bool(r, "attention_bias", cfg_row(c)->bias_default);
    c->rope_theta = cfg_num(r, "rotary_emb_base", cfg_num(r, "rope_theta", 10000.0, NUM_POS), NUM_POS);
    c->norm_eps = cfg_num(r, "layer_norm_eps", cfg_row(c)->eps, NUM_NONNEG);
    c->intermediate = cfg_int(r, "intermediate_size", 0, false);
    c->max_pos = cfg_int(r, "max_position_embeddings", 0, false);
    c->tie_embeddings = cfg_bool(r, "tie_word_embeddings", cfg_row(c)->tied);
}

/* GLM-5.2's IndexShare (GlmMoeDsaConfig.__post_init__): indexer_types ("full" / "shared"), else
 * index_topk_pattern ("FSS..." or a list), else layer L is full when max(L - offset + 1, 0) % freq == 0
 * (index_topk_freq, default 1: every layer full; index_skip_topk_offset, default 2). Layer 0 always
 * runs its indexer (transformers: no earlier selection to reuse). */
static void parse_index_share(cfg_reader *r, ModelConfig *c) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r->root, "indexer_types"), *e;
    if (!cJSON_IsArray(t)) t = cJSON_GetObjectItemCaseSensitive(r->root, "index_topk_pattern");
    int freq = cfg_int(r, "index_topk_freq", 1, false), off = cfg_int(r, "index_skip_topk_offset", 2, false), L = 0;
    if (freq < 1) freq = 1;
    for (L = 0; L < c->n_layers && L < CFG_MAX_LAYERS; L++)
        c->index_shared[L] = (L - off + 1 > 0 ? L - off + 1 : 0) % freq != 0;
    if (cJSON_IsString(t))
        for (L = 0; t->valuestring[L] && L < CFG_MAX_LAYERS; L++) c->index_shared[L] = t->valuestring[L] == 'S';
    L = 0;
    const cJSON *list = cJSON_IsArray(t) ? t : NULL;
    cJSON_ArrayForEach(e, list) {
        if (L < CFG_MAX_LAYERS) c->index_shared[L] = cJSON_IsString(e) && !strcmp(e->valuestring, "shared");
        L++;
    }
    c->index_shared[0] = 0;
}

static void parse_deepseek(cfg_reader *r, ModelConfig *c) {
    parse_hf_sizes(r, c);
    c->n_kv_heads = c->n_heads;
    c->q_lora_rank = cfg_int(r, "q_lora_rank", 0, false);
    c->kv_lora_rank = cfg_int(r, "kv_lora_rank", 0, true);
    c->qk_nope_dim = cfg_int(r, "qk_nope_head_dim", 0, true);
    c->qk_rope_dim = cfg_int(r, "qk_rope_head_dim", 0, true);
    c->v_dim = cfg_int(r, "v_head_dim", 0, true);
    c->rope = ROPE_INTERLEAVED;
    c->qkv_bias = c->o_bias = cfg_bool(r, "attention_bias", cfg_row(c)->bias_default);
    c->latent_norm = cfg_bool(r, "qk_latent_layernorm", true);
    c->index_heads = cfg_int(r, "index_n_heads", 0, false);
    c->index_head_dim = cfg_int(r, "index_head_dim", 0, false);
    c->index_topk = cfg_int(r, "index_topk", 0, false);
    c->index_rope = cfg_bool(r, "indexer_rope_interleave", cfg_row(c)->indexer_rope_interleave) ? ROPE_INTERLEAVED
                                                                                                 : ROPE_HALF;
    parse_index_share(r, c);
    parse_hf_rest(r, c);
}

static void parse_gpt2(cfg_reader *r, ModelConfig *c) {
    c->hidden = cfg_int(r, "n_embd", 0, true);
    c->n_heads = cfg_int(r, "n_head", 0, true);
    c->n_layers = cfg_int(r, "n_layer", 0, true);
    c->n_kv_heads = c->n_heads;
    int hd = c->n_heads ? c->hidden / c->n_heads : 0;
    c->qk_nope_dim = hd;
    c->qk_rope_dim = 0;
    c->v_dim = hd;
    c->rope = ROPE_NONE;
    c->norm_eps = cfg_num(r, "layer_norm_epsilon", cfg_row(c)->eps, NUM_NONNEG);
    c->intermediate = cfg_int(r, "n_inner", 4 * c->hidden, false);
    if (!c->intermediate) c->intermediate = 4 * c->hidden;
    c->max_pos = cfg_int(r, "n_positions", 0, false);
    c->qkv_bias = c->o_bias = true;
    c->tie_embeddings = cfg_row(c)->tied;
}

/* Checks that the dims read make sense together; names the offending fields. */
static int cfg_validate(const ModelConfig *c, const char *where) {
    if (c->n_layers <= 0 || c->n_heads <= 0 || c->hidden <= 0)
        return al_err("%s: num_hidden_layers, num_attention_heads and hidden_size must be positive", where);
    if (c->n_layers > CFG_MAX_LAYERS)        /* before describe(), whose per-layer loops would run over them all */
        return al_err("%s: %s %d: attnlab reads at most %d layer%s", where,
                      cfg_row(c)->keys == KEYS_GPT2 ? "n_layer" : "num_hidden_layers", c->n_layers, CFG_MAX_LAYERS, al_s(CFG_MAX_LAYERS));
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0)
        return al_err("%s: num_key_value_heads %d must divide num_attention_heads %d", where, c->n_kv_heads, c->n_heads);
    if (cfg_d_qk(c) <= 0 || c->v_dim <= 0) return al_err("%s: head dims must be positive", where);
    if (cfg_has_indexer(c) && (c->index_head_dim < c->qk_rope_dim || (c->q_lora_rank == 0)))
        return al_err("%s: the indexer needs q_lora_rank > 0 and index_head_dim %d >= qk_rope_head_dim %d", where,
                      c->index_head_dim, c->qk_rope_dim);
    if (c->rope != ROPE_NONE && c->qk_rope_dim % 2 != 0)
        return al_err("%s: the RoPE head dim %d must be even", where, c->qk_rope_dim);
    if ((cfg_row(c)->keys == KEYS_GPT2 || cfg_row(c)->keys == KEYS_NEOX) && c->hidden % c->n_heads != 0)
        return al_err("%s: n_embd %d is not a multiple of n_head %d", where, c->hidden, c->n_heads);
    return AL_OK;
}


/* ================================================================ the rest of the description */

const char *rope_scaling_name(const RopeScaling *s) {
    switch (s->kind) {
    case RS_NONE: return "none";
    case RS_LINEAR: return "linear";
    case RS_LLAMA3: return "llama3";
    case RS_YARN: return "yarn";
    case RS_LONGROPE: return "longrope";
    case RS_OTHER: return s->type;
    }
    return "?";
}

const char *qk_norm_name(qk_norm_kind k) { return k == QKN_HEAD ? "per head" : k == QKN_PROJ ? "whole projection" : "none"; }
const char *norm_kind_name(norm_kind k) { return k == NORM_LAYER ? "layernorm" : k == NORM_RMS_1P ? "rmsnorm (1 + w)" : "rmsnorm"; }
const char *mlp_kind_name(mlp_kind k) { return k == MLP_DENSE ? "dense" : k == MLP_MOE ? "moe" : "gated"; }

/* Up to cap numbers of array `key` of o into v; returns the count. An element that is not a
 * finite number is recorded in r->badnum. */
static int jarray(cfg_reader *r, const cJSON *o, const char *key, double *v, int cap) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *e;
    int n = 0;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble)) {
            char item[160];
            snprintf(item, sizeof item, "%s (an element is not a finite number)", key);
            cfg_list_add(r->badnum, sizeof r->badnum, item);
            r->nbad++;
            return n;
        }
        if (n < cap) v[n++] = e->valuedouble;
    }
    return n;
}

/* rope_scaling (absent, null, "default": none). Defaults are those of the forward pass. */
static void parse_rope_scaling(cfg_reader *r, const cJSON *rs, const ModelConfig *c, RopeScaling *s) {
    memset(s, 0, sizeof *s);
    s->factor = 1.0;
    s->attention_factor = NAN;
    if (!cJSON_IsObject(rs)) return;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(t)) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(t) || !strcmp(t->valuestring, "default")) return;
    al_printable(t->valuestring, s->type, sizeof s->type);   /* shown by info: no control characters */
    s->factor = jnum(r, rs, "factor", 1.0);
    s->attention_factor = jnum(r, rs, "attention_factor", NAN);
    const char *type = s->type;
    if (!strcmp(type, "linear")) s->kind = RS_LINEAR;
    else if (!strcmp(type, "llama3")) {
        s->kind = RS_LLAMA3;
        s->low_freq_factor = jnum(r, rs, "low_freq_factor", 1.0);
        s->high_freq_factor = jnum(r, rs, "high_freq_factor", 4.0);
        s->orig_max_pos = jnum(r, rs, "original_max_position_embeddings", 8192);
    } else if (!strcmp(type, "yarn")) {
        s->kind = RS_YARN;
        s->orig_max_pos = jnum(r, rs, "original_max_position_embeddings", c->max_pos ? c->max_pos : 4096);
        s->beta_fast = jnum(r, rs, "beta_fast", 32);
        s->beta_slow = jnum(r, rs, "beta_slow", 1);
        s->mscale = jnum(r, rs, "mscale", 0);
        s->mscale_all_dim = jnum(r, rs, "mscale_all_dim", 0);
        s->truncate = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(rs, "truncate"));
    } else if (!strcmp(type, "longrope") || !strcmp(type, "su")) {
        s->kind = RS_LONGROPE;
        /* Phi-3 keeps original_max_position_embeddings at the top level: HF then takes the factor as
           max_position_embeddings / original_max_position_embeddings */
        double top = jnum(r, r->root, "original_max_position_embeddings", 0);
        s->orig_max_pos = jnum(r, rs, "original_max_position_embeddings", top > 0 ? top : c->max_pos);
        if (top > 0 && c->max_pos > 0) s->factor = c->max_pos / top;
        s->n_short = jarray(r, rs, "short_factor", s->short_factor, CFG_MAX_ROPE_PAIRS);
        s->n_long = jarray(r, rs, "long_factor", s->long_factor, CFG_MAX_ROPE_PAIRS);
    } else
        s->kind = RS_OTHER;
}

/* The NoPE layers of a family that has them (its row's nope_interval): no_rope_layers (1: RoPE,
 * 0: none; HF indexes it by layer, so a shorter list is an error), else every
 * no_rope_layer_interval-th layer. */
static void parse_nope(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    int every = cfg_row(c)->nope_interval;
    if (every <= 0) return;
    every = jint(r, root, "no_rope_layer_interval", every);
    double flag[CFG_MAX_LAYERS];
    int n = jarray(r, root, "no_rope_layers", flag, CFG_MAX_LAYERS), L0 = c->n_layers < CFG_MAX_LAYERS ? c->n_layers : CFG_MAX_LAYERS;
    if (n > 0 && n < L0) {
        char item[160];
        snprintf(item, sizeof item, "no_rope_layers (%d entries for %d layer%s)", n, c->n_layers, al_s(c->n_layers));
        cfg_list_add(r->badnum, sizeof r->badnum, item);
        r->nbad++;
    }
    for (int L = 0; L < L0; L++) {
        c->layer_nope[L] = n > 0 ? L < n && flag[L] == 0 : every > 0 && (L + 1) % every == 0;
        c->has_nope |= c->layer_nope[L];
    }
}

/* MiniMax-M2's rotary_dim rd beside a partial_rotary_factor (top level or in rope_parameters rp): the release's code
 * reads rotary_dim, transformers 5's MiniMaxM2Config the factor (the first int(head_dim x factor) dims), so where
 * the two name different dims the folder describes two models: into r->badnum, naming both. */
static void rotary_dim_agrees(cfg_reader *r, const cJSON *root, const cJSON *rp, int head_dim, double rd) {
    const cJSON *f[2] = {cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor"),
                         cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor") : NULL};
    for (int i = 0; i < 2; i++) {
        if (!cJSON_IsNumber(f[i]) || (int)(head_dim * f[i]->valuedouble) == (int)rd) continue;
        char item[300];
        snprintf(item, sizeof item, "rotary_dim = %g and %spartial_rotary_factor = %g name different rotary dims (%g "
                 "and %d of head_dim %d: MiniMax-M2's code reads rotary_dim, transformers 5 the factor; keep the one "
                 "the weights were trained with)", rd, i ? "rope_parameters." : "", f[i]->valuedouble, rd,
                 (int)(head_dim * f[i]->valuedouble), head_dim);
        cfg_list_add(r->badnum, sizeof r->badnum, item);
        r->nbad++;
    }
}

/* The RoPE spec: layout, rotary dims (partial rotary), theta(s), scaling. */
static void parse_rope(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    RopeSpec *sp = &c->rope_spec;
    c->rope_interleave = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "rope_interleave"));
    sp->layout = c->rope;
    if (cfg_row(c)->keys == KEYS_MLA || cfg_row(c)->keys == KEYS_KIMI_K3)
        sp->layout = c->rope_interleave ? ROPE_INTERLEAVED : ROPE_HALF;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mla_use_nope")))   /* Kimi-Linear: MLA without RoPE */
        c->rope = sp->layout = ROPE_NONE;
    double pf = cfg_row(c)->partial_rotary > 0 ? cfg_row(c)->partial_rotary : 1.0;      /* the row's default */
    double rd = cfg_row(c)->rotary_dim_key ? jnum(r, root, "rotary_dim", 0) : 0;   /* MiniMax-M2 */
    if (rd > 0 && c->qk_rope_dim > 0) pf = rd / c->qk_rope_dim;
    /* transformers 5 writes rope_parameters: the scaling and the rotary factor in one object (Qwen3.5,
     * Ministral 3); its rope_theta was read with the sizes (parse_hf_rest) */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (rd > 0) rotary_dim_agrees(r, root, rp, c->qk_rope_dim, rd);
    if (cJSON_IsObject(rp)) pf = jnum(r, rp, "partial_rotary_factor", pf);
    sp->partial_factor = jnum(r, root, "partial_rotary_factor", jnum(r, root, "rotary_pct", pf));
    if (c->rope == ROPE_HALF && !c->rope_first && c->qk_nope_dim == 0 && sp->partial_factor > 0 && sp->partial_factor < 1.0) {
        int hd = c->qk_rope_dim, rd = (int)((double)hd * sp->partial_factor);
        c->qk_rope_dim = rd - rd % 2;             /* HF: the first int(head_dim x factor) dims of each head rotate */
        c->qk_nope_dim = hd - c->qk_rope_dim;
        c->rope_first = true;
    }
    sp->head_dim = c->rope == ROPE_NONE ? 0 : c->qk_rope_dim;
    sp->rotary_dim = sp->head_dim;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!cJSON_IsObject(rs) && cJSON_IsObject(rp)) rs = rp;
    sp->theta = c->rope_theta > 0 ? c->rope_theta : 10000.0;
    sp->local_theta = jnum(r, root, "rope_local_base_freq", cfg_row(c)->local_theta);
    parse_rope_scaling(r, rs, c, &sp->scaling);
    sp->q_beta = cfg_row(c)->llama4_scaling && cJSON_IsObject(rs) ? jnum(r, rs, "llama_4_scaling_beta", 0) : 0;
    sp->q_floor = cJSON_IsObject(rs) ? jnum_in(r, rs, "original_max_position_embeddings", 0, NUM_NONNEG) : 0;
    if (sp->q_floor <= 0) sp->q_beta = 0;
    parse_nope(r, root, c);
}

static bool layer_is_local(const ModelConfig *c, int layer);

/* EXAONE 4's sliding_window_pattern as a string ("LLLG"): layer L slides when the pattern's
 * character L mod its length is 'L' (what vLLM and llama.cpp read; transformers reads layer_types). */
static void pattern_layers(ModelConfig *c, const char *p) {
    size_t n = strlen(p);
    if (!n) return;
    c->has_layer_types = true;
    for (int L = 0; L < c->n_layers && L < CFG_MAX_LAYERS; L++) c->layer_sliding[L] = p[(size_t)L % n] == 'L';
}

/* A row's nope_on_global: with a sliding window, the layers without one apply no RoPE (EXAONE 4:
 * `if self.sliding_window is None or self.is_sliding: apply_rotary_pos_emb`). */
static void nope_on_global(ModelConfig *c) {
    if (!cfg_row(c)->nope_on_global || c->sliding_window <= 0) return;
    for (int L = 0; L < c->n_layers && L < CFG_MAX_LAYERS; L++)
        if (!layer_is_local(c, L)) c->layer_nope[L] = 1, c->has_nope = true;
}

/* Attention scale, soft-caps and sliding windows. */
static void parse_attention(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    const FamilyRow *row = cfg_row(c);
    bool gpt2 = row->keys == KEYS_GPT2;
    c->query_pre_attn_scalar = jnum(r, root, "query_pre_attn_scalar", row->pre_attn_scalar);
    c->scale_attn = !(gpt2 && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "scale_attn_weights")));
    c->scale_by_layer = gpt2 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "scale_attn_by_inverse_layer_idx"));
    /* the row's soft-caps apply when the key is absent (Gemma 2: 50 and 30); null: none */
    c->attn_softcap = jnum(r, root, "attn_logit_softcapping",
                           cJSON_HasObjectItem(root, "attn_logit_softcapping") ? 0 : row->attn_softcap);
    c->final_softcap = jnum(r, root, "final_logit_softcapping",
                            cJSON_HasObjectItem(root, "final_logit_softcapping") ? 0 : row->final_softcap);
    c->attn_sinks = row->sinks;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    const cJSON *use = cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window");
    double w = jnum_in(r, root, "sliding_window", -1, NUM_INT);
    c->window_declared = cJSON_IsNumber(sw) && !cJSON_IsFalse(use) ? (int)w : -1;
    c->sliding_window = w > 0 ? (int)w : 0;
    bool on = row->windowed || (row->window_opt_in && cJSON_IsTrue(use));
    if (!on) c->sliding_window = 0;
    c->window_from = row->window_opt_in ? jint(r, root, "max_window_layers", 0) : 0;
    /* Gemma 2 alternates local and global layers; Gemma 3 has five local layers per global one */
    const cJSON *swp = cJSON_GetObjectItemCaseSensitive(root, "sliding_window_pattern");
    c->window_pattern = cJSON_IsString(swp) ? 0 : jint(r, root, "sliding_window_pattern", row->window_pattern);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types"), *e;
    int L = 0;
    c->has_layer_types = cJSON_IsArray(lt);
    cJSON_ArrayForEach(e, lt) {
        if (L < CFG_MAX_LAYERS) c->layer_sliding[L] = cJSON_IsString(e) && strstr(e->valuestring, "sliding") != NULL;
        L++;
    }
    if (!c->has_layer_types && cJSON_IsString(swp)) pattern_layers(c, swp->valuestring);
    nope_on_global(c);
}

/* Granite's multipliers (embeddings, softmax scale, residuals, logits) and its MLP sizes: the dense MLP is the shared
 * MLP (shared_intermediate_size), intermediate_size the experts'. */
static void parse_mup(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    c->embed_scale = jnum(r, root, "embedding_multiplier", 1.0);
    c->attn_mult = jnum(r, root, "attention_multiplier", 0.0);
    c->residual_mult = jnum(r, root, "residual_multiplier", 1.0);
    c->logits_div = jnum(r, root, "logits_scaling", 1.0);
    if (c->moe.n_experts > 0) c->moe.expert_ffn = c->intermediate;
    c->intermediate = jint(r, root, "shared_intermediate_size", c->intermediate);
}

/* Norms, activation, MLP and MoE routing. */
static void parse_blocks(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    const FamilyRow *row = cfg_row(c);
    c->norm = row->norm;
    c->block = row->block;
    if (row->block == BLOCK_PARALLEL && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "use_parallel_residual")))
        c->block = BLOCK_PRE;
    c->embed_scale = row->embed_scaled ? sqrt((double)c->hidden) : 1.0;
    c->mlp_fused = c->ffn == FFN_FUSED;
    /* q/k norms the family's modeling code always builds (model.c records others from the tensors) */
    c->qk_norm = row->qk_norm;
    if (row->qk_norm_key && cfg_bool(r, row->qk_norm_key, false)) c->qk_norm = QKN_HEAD;   /* GLM-4 MoE: use_qk_norm */
    c->mlp_bias = c->ffn == FFN_NEOX;
    /* the activation: the row's own key first (Gemma's hidden_activation), then hidden_act (not GPT-2's) */
    const cJSON *a = row->act_key ? cJSON_GetObjectItemCaseSensitive(root, row->act_key) : NULL;
    if (!cJSON_IsString(a) && row->keys != KEYS_GPT2) a = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    al_printable(cJSON_IsString(a) ? a->valuestring : row->act, c->activation, sizeof c->activation);
    const char *act = c->activation;
    c->act = !strcmp(act, "silu") || !strcmp(act, "swish") ? ACT_SILU
             : !strcmp(act, "gelu") ? ACT_GELU
             : !strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh") || !strcmp(act, "gelu_fast") ? ACT_GELU_TANH
             : !strcmp(act, "relu") ? ACT_RELU : !strcmp(act, "relu2") ? ACT_RELU2 : ACT_UNKNOWN;
    MoeSpec *m = &c->moe;
    m->n_experts = jint(r, root, "n_routed_experts", jnum(r, root, "num_experts", jnum(r, root, "num_local_experts", 0)));
    m->top_k = jint(r, root, "num_experts_per_tok", jint(r, root, "num_experts_per_token", 0));   /* Kimi-Linear's */
    m->norm_topk_prob = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "norm_topk_prob")) || row->router_norm_topk ||
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "moe_renormalize"));
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(root, "scoring_func");
    if (!sf) sf = cJSON_GetObjectItemCaseSensitive(root, "moe_router_activation_func");
    m->sigmoid = cJSON_IsString(sf) && !strcmp(sf->valuestring, "sigmoid");
    m->softmax = cJSON_IsString(sf) && !strcmp(sf->valuestring, "softmax");
    m->n_group = jint(r, root, "n_group", jint(r, root, "num_expert_group", 0));
    m->topk_group = jint(r, root, "topk_group", 0);
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(root, "topk_method");
    al_printable(cJSON_IsString(tm) ? tm->valuestring : "", m->topk_method, sizeof m->topk_method);
    m->n_shared = jint(r, root, "n_shared_experts", jint(r, root, "num_shared_experts",
                                                       jnum(r, root, "shared_expert_intermediate_size", 0) > 0 ? 1 : 0));
    m->shared_ffn = jint(r, root, "shared_expert_intermediate_size", 0);
    m->routed_scaling = jnum(r, root, "routed_scaling_factor", 1.0);
    m->first_dense = jint(r, root, "first_k_dense_replace", 0);
    m->layer_freq = jint(r, root, "moe_layer_freq", 1);
    if (m->layer_freq < 1) m->layer_freq = 1;
    m->sparse_step = jint(r, root, "decoder_sparse_step", 1);
    if (m->sparse_step < 1) m->sparse_step = 1;
    m->expert_ffn = jint(r, root, "moe_intermediate_size", 0);
    double only[64];
    m->n_mlp_only = jarray(r, root, "mlp_only_layers", only, 64);
    for (int i = 0; i < m->n_mlp_only; i++) m->mlp_only[i] = (int)only[i];
    c->mlp = c->ffn == FFN_CONV1D || c->ffn == FFN_NEOX || c->ffn == FFN_MIXER ? MLP_DENSE : MLP_GATED;
    for (int L = 0; L < c->n_layers; L++)
        if (cfg_moe_layer(c, L)) c->mlp = MLP_MOE;         /* some layer routes to experts */
    if (m->n_experts > 0)
        m->layout = row->moe;
    m->router = row->router;
    c->residual_mult = c->logits_div = 1;
    if (row->mup) parse_mup(r, root, c);
    c->swiglu_limit = row->swiglu_limit > 0 ? jnum(r, root, "swiglu_limit", row->swiglu_limit) : 0;
    c->swiglu_alpha = row->swiglu_alpha;
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
    if (!cJSON_IsString(td)) td = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    al_printable(cJSON_IsString(td) ? td->valuestring : "", c->torch_dtype, sizeof c->torch_dtype);
}

/* Kimi-Linear's linear_attn_config: kda_layers (1-based) are Kimi Delta Attention, the others MLA; num_heads of
 * head_dim for q, k and v alike, short_conv_kernel_size (KimiDeltaAttention). */
static void parse_kda(const cJSON *la, ModelConfig *c) {
    LinearSpec *l = &c->lin;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(la, "num_heads"), *d = cJSON_GetObjectItemCaseSensitive(la, "head_dim");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(la, "short_conv_kernel_size"), *e;
    l->k_heads = l->v_heads = cJSON_IsNumber(h) ? h->valueint : 32;
    l->dk = l->dv = cJSON_IsNumber(d) ? d->valueint : 128;
    l->conv = cJSON_IsNumber(k) ? k->valueint : 4;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(la, "kda_layers")) {
        int L = cJSON_IsNumber(e) ? e->valueint - 1 : -1;
        if (L < 0 || L >= c->n_layers || L >= CFG_MAX_LAYERS || l->layer[L]) continue;
        l->layer[L] = 1;
        l->n_linear++;
    }
}

/* A number under the first of two spellings present (Nemotron-H's and Granite's keys for one Mamba-2 dim). */
static int jint2(cfg_reader *r, const cJSON *root, const char *a, const char *b, int dflt) {
    return jint(r, root, cJSON_HasObjectItem(root, a) ? a : b, dflt);
}

static void mamba_check(cfg_reader *r, const cJSON *root, const ModelConfig *c);

/* A Mamba-2 hybrid's SSM layers: Nemotron-H's hybrid_override_pattern (M Mamba-2, * attention, - MLP, E MoE: one
 * mixer per block) or Granite 4.0-H's layer_types ("mamba" / "attention"), and the mixer's dims under either
 * family's keys (mamba_num_heads / mamba_n_heads, ...; Mamba2Config's defaults). */
static void parse_mamba(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    LinearSpec *l = &c->lin;
    l->mamba = true;
    l->v_heads = jint2(r, root, "mamba_num_heads", "mamba_n_heads", 128);
    l->dv = jint2(r, root, "mamba_head_dim", "mamba_d_head", 64);
    l->k_heads = jint2(r, root, "n_groups", "mamba_n_groups", 8);
    l->dk = jint2(r, root, "ssm_state_size", "mamba_d_state", 128);
    l->conv = jint2(r, root, "conv_kernel", "mamba_d_conv", 4);
    const cJSON *cb = cJSON_GetObjectItemCaseSensitive(root, "use_conv_bias");
    if (!cb) cb = cJSON_GetObjectItemCaseSensitive(root, "mamba_conv_bias");
    l->conv_bias = !cJSON_IsFalse(cb);
    l->proj_bias = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_bias")) ||
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mamba_proj_bias"));
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(root, "mamba_ssm_cache_dtype");
    l->state_f32 = cJSON_IsString(sd) && strcmp(sd->valuestring, "float32") == 0;
    bool nemotron = cfg_row(c)->lin == LIN_MAMBA2_NEMOTRON;   /* Zamba2RMSNormGated per group, dt >= time_step_min */
    l->norm_groups = nemotron ? l->k_heads : 1;
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(root, "time_step_limit");
    l->dt_min = nemotron ? jnum(r, root, "time_step_min", 0.001)
                         : cJSON_IsNumber(cJSON_GetArrayItem(lim, 0)) ? cJSON_GetArrayItem(lim, 0)->valuedouble : 0;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(root, "hybrid_override_pattern");
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    l->blocks = cJSON_IsString(pat);
    if (l->blocks) c->norm_eps = jnum(r, root, "layer_norm_epsilon", c->norm_eps);   /* NemotronHRMSNorm's eps */
    for (int L = 0; L < c->n_layers && L < CFG_MAX_LAYERS; L++) {
        if (l->blocks) {
            char b = L < (int)strlen(pat->valuestring) ? pat->valuestring[L] : '?';
            l->block[L] = b;
            l->layer[L] = b == 'M' ? 1 : b == '-' || b == 'E' ? 2 : 0;
        } else {
            const cJSON *e = cJSON_GetArrayItem(lt, L);
            l->layer[L] = cJSON_IsString(e) && !strcmp(e->valuestring, "mamba");
        }
        l->n_linear += l->layer[L] != 0;
        l->n_mlp_blocks += l->layer[L] == 2;
    }
    mamba_check(r, root, c);
    if (!l->blocks) return;
    c->moe.shared_ffn = jint(r, root, "moe_shared_expert_intermediate_size", c->moe.shared_ffn);
    l->moe_latent = jint(r, root, "moe_latent_size", 0);
    c->mlp = MLP_DENSE;                                /* the MoE blocks are the 'E' letters (cfg_moe_layer) */
    for (int L = 0; L < c->n_layers; L++)
        if (cfg_moe_layer(c, L)) c->mlp = MLP_MOE;
}

/* What a Mamba-2 hybrid's config must hold together (into r->badnum): a pattern or layer_types of one entry per
 * layer, from the letters / words the modeling code knows, heads a multiple of the groups. */
static void mamba_check(cfg_reader *r, const cJSON *root, const ModelConfig *c) {
    const LinearSpec *l = &c->lin;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(root, "hybrid_override_pattern");
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    char item[160] = "";
    int n = l->blocks ? (int)strlen(pat->valuestring) : cJSON_GetArraySize(lt);
    if (n != c->n_layers)
        snprintf(item, sizeof item, "%s (%d entries for %d layer%s)",
                 l->blocks ? "hybrid_override_pattern" : "layer_types", n, c->n_layers, al_s(c->n_layers));
    for (int L = 0; !item[0] && L < n && L < CFG_MAX_LAYERS; L++) {
        const cJSON *e = l->blocks ? NULL : cJSON_GetArrayItem(lt, L);
        if (l->blocks ? !strchr("M*-E", pat->valuestring[L])
                      : !cJSON_IsString(e) || (strcmp(e->valuestring, "mamba") && strcmp(e->valuestring, "attention")))
            snprintf(item, sizeof item, "%s entry %d (M * - E / \"mamba\" \"attention\")",
                     l->blocks ? "hybrid_override_pattern" : "layer_types", L);
    }
    if (!item[0] && (l->k_heads <= 0 || l->v_heads % l->k_heads))
        snprintf(item, sizeof item, "the Mamba-2 heads (%d) in n_groups (%d): a multiple", l->v_heads, l->k_heads);
    if (!item[0]) return;
    cfg_list_add(r->badnum, sizeof r->badnum, item);
    r->nbad++;
}

/* The linear-attention layers of a hybrid family (its row's lin): layer_types "linear_attention",
 * else all but every full_attention_interval-th layer (Qwen3NextConfig: 4); their dims; and the
 * output gate of the attention layers (attn_output_gate, the row's default). */
static void parse_linear(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    const FamilyRow *row = cfg_row(c);
    LinearSpec *l = &c->lin;
    c->attn_gate = row->attn_gate && cfg_bool(r, "attn_output_gate", true);
    if (row->lin == LIN_NONE) return;
    l->layout = row->lin;
    if (row->lin == LIN_KDA) {
        const cJSON *la = cJSON_GetObjectItemCaseSensitive(root, "linear_attn_config");
        l->full_rank_gate = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(la, "use_full_rank_gate"));   /* Kimi-K3 */
        l->mla_gate = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mla_use_output_gate"));
        parse_kda(la, c);
        return;
    }
    l->k_heads = jint(r, root, "linear_num_key_heads", 16);
    l->v_heads = jint(r, root, "linear_num_value_heads", 32);
    l->dk = jint(r, root, "linear_key_head_dim", 128);
    l->dv = jint(r, root, "linear_value_head_dim", 128);
    l->conv = jint(r, root, "linear_conv_kernel_dim", 4);
    if (row->lin == LIN_MAMBA2_NEMOTRON || row->lin == LIN_MAMBA2_GRANITE) {
        parse_mamba(r, root, c);
        return;
    }
    int every = jint(r, root, "full_attention_interval", 4);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    for (int L = 0; L < c->n_layers && L < CFG_MAX_LAYERS; L++) {
        const cJSON *e = cJSON_IsArray(lt) ? cJSON_GetArrayItem(lt, L) : NULL;
        l->layer[L] = e ? cJSON_IsString(e) && !strcmp(e->valuestring, "linear_attention")
                        : every > 0 && (L + 1) % every != 0;
        l->n_linear += l->layer[L];
    }
}

/* Llama 4 (Llama4TextConfig's defaults where a key is absent): chunked attention on the RoPE layers
 * (attention_chunk_size, null: none), the weightless q/k norm (use_qk_norm), temperature tuning on the NoPE
 * layers (attn_temperature_tuning: true or a number, floor_scale, attn_scale); the experts and the shared expert
 * intermediate_size wide, the dense layers intermediate_size_mlp; MoE on moe_layers, else every
 * interleave_moe_layer_step-th layer. */
static void parse_llama4(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    const FamilyRow *row = cfg_row(c);
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(root, "attention_chunk_size");
    if (row->chunked) c->attn_chunk = cJSON_IsNull(ch) ? 0 : jint(r, root, "attention_chunk_size", 8192);
    c->qk_l2 = row->qk_l2 && cfg_bool(r, "use_qk_norm", true);
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(root, "attn_temperature_tuning");
    bool tune = row->temp_tuning && (!tt || cJSON_IsTrue(tt) || (cJSON_IsNumber(tt) && tt->valuedouble != 0));
    c->temp_floor = tune ? jnum_in(r, root, "floor_scale", 8192, NUM_POS) : 0;
    c->temp_scale = tune ? jnum(r, root, "attn_scale", 0.1) : 0;
    if (!row->dense_ffn_key) return;
    MoeSpec *m = &c->moe;
    if (!cJSON_HasObjectItem(root, "num_local_experts")) m->n_experts = 16, m->layout = row->moe;   /* the class's */
    if (m->expert_ffn <= 0) m->expert_ffn = c->intermediate;
    c->intermediate = jint(r, root, row->dense_ffn_key, 16384);
    m->n_shared = 1;                                   /* Llama4TextMoe's shared_expert, intermediate_size wide */
    m->shared_ffn = m->expert_ffn;
    if (!cJSON_HasObjectItem(root, "num_experts_per_tok")) m->top_k = 1;
    m->sparse_step = jint(r, root, "interleave_moe_layer_step", 1);
    if (m->sparse_step < 1) m->sparse_step = 1;
    double on[CFG_MAX_LAYERS];
    int n = jarray(r, root, "moe_layers", on, CFG_MAX_LAYERS);
    m->listed = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "moe_layers"));
    for (int i = 0; i < n; i++)
        if (on[i] >= 0 && on[i] < CFG_MAX_LAYERS) m->on[(int)on[i]] = 1;
    c->mlp = MLP_GATED;
    for (int L = 0; L < c->n_layers; L++)
        if (cfg_moe_layer(c, L)) c->mlp = MLP_MOE;
}

/* True when the checkpoint names layer L's experts as c's MoE layout does (fused, or expert 0's gate). */
static bool experts_named(const ModelConfig *c, int L, bool (*has)(void *, const char *), void *ud) {
    char n[256];
    return (cfg_role_name(c, ROLE_EXPS_GATE_UP, L, -1, NULL, n, sizeof n) && has(ud, n)) ||
           (cfg_role_name(c, ROLE_EXP_GATE, L, 0, "weight", n, sizeof n) && has(ud, n));
}

void cfg_moe_pick(ModelConfig *c, bool (*has)(void *ud, const char *name), void *ud) {
    moe_layout alt = family_moe_alt(c->moe.layout), own = c->moe.layout;
    int L = 0;
    while (L < c->n_layers && !cfg_moe_layer(c, L)) L++;
    if (alt == own || L == c->n_layers || experts_named(c, L, has, ud)) return;
    c->moe.layout = alt;
    if (!experts_named(c, L, has, ud)) c->moe.layout = own;
}

size_t cfg_layer_chunk(const ModelConfig *c, int layer) {
    return c->attn_chunk > 0 && cfg_layer_rope(c, layer) ? (size_t)c->attn_chunk : 0;
}

bool cfg_layer_qk_l2(const ModelConfig *c, int layer) { return c->qk_l2 && cfg_layer_rope(c, layer); }

double cfg_q_temperature(const ModelConfig *c, int layer, size_t pos) {
    if (c->temp_scale == 0 || c->temp_floor <= 0 || c->rope == ROPE_NONE || cfg_layer_rope(c, layer)) return 1.0;
    return 1.0 + c->temp_scale * log1p(floor(((double)pos + 1.0) / c->temp_floor));
}

/* The per-layer-type attention of a row with per_type_attn (Gemma4TextConfig's keys and defaults): layer_types (absent:
 * every 6th layer full; the last layer is always full), rope_parameters per layer type (absent: sliding "default" theta
 * 1e4, full "proportional" 0.25 of theta 1e6), global_head_dim (512), num_global_key_value_heads (with
 * attention_k_eq_v), num_kv_shared_layers, use_double_wide_mlp, hidden_size_per_layer_input (256), enable_moe_block;
 * values RMS-normed without a weight, softmax scale 1 (Gemma4TextAttention.scaling). */
static void parse_per_type(cfg_reader *r, const cJSON *root, ModelConfig *c) {
    if (!cfg_row(c)->per_type_attn) return;
    RopeSpec *sp = &c->rope_spec;
    int L0 = c->n_layers < CFG_MAX_LAYERS ? c->n_layers : CFG_MAX_LAYERS;
    if (!c->has_layer_types)
        for (int L = 0; L < L0; L++) c->layer_sliding[L] = (L + 1) % 6 != 0;
    c->has_layer_types = true;
    if (L0 > 0) c->layer_sliding[L0 - 1] = 0;
    if (!cJSON_HasObjectItem(root, "sliding_window")) c->sliding_window = c->window_declared = 512;   /* the default */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    const cJSON *slide = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    const cJSON *ft = cJSON_GetObjectItemCaseSensitive(full, "rope_type");
    sp->theta = c->rope_theta = jnum_in(r, full, "rope_theta", 1e6, NUM_POS);
    sp->local_theta = jnum_in(r, slide, "rope_theta", 1e4, NUM_POS);
    bool prop = !cJSON_IsObject(rp) || (cJSON_IsString(ft) && !strcmp(ft->valuestring, "proportional"));
    sp->prop_factor = prop ? jnum_in(r, full, "partial_rotary_factor", cJSON_IsObject(rp) ? 1.0 : 0.25, NUM_POS) : 0;
    memset(&sp->scaling, 0, sizeof sp->scaling);
    sp->scaling.factor = 1.0;
    sp->scaling.attention_factor = NAN;
    double factor = jnum_in(r, full, "factor", 1.0, NUM_POS);
    if (factor != 1.0) {                               /* inv_freq /= factor on the full layers */
        sp->scaling.kind = RS_LINEAR;
        sp->scaling.factor = factor;
        snprintf(sp->scaling.type, sizeof sp->scaling.type, "%s", prop ? "proportional" : "linear");
    }
    c->scale_attn = false;
    c->v_norm = true;
    c->k_eq_v = cfg_bool(r, "attention_k_eq_v", false);
    bool nul = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "global_head_dim"));   /* None: head_dim */
    c->global_head_dim = nul ? 0 : jint(r, root, "global_head_dim", 512);
    c->global_kv_heads = c->k_eq_v ? jint(r, root, "num_global_key_value_heads", c->n_kv_heads) : c->n_kv_heads;
    if (c->global_kv_heads <= 0 || c->n_heads % c->global_kv_heads != 0 || c->global_head_dim % 2 != 0) {
        cfg_list_add(r->badnum, sizeof r->badnum, "num_global_key_value_heads / global_head_dim (KV heads must divide "
                     "num_attention_heads, the head dim be even)");
        r->nbad++;
    }
    int shared = jint(r, root, "num_kv_shared_layers", 0);
    c->kv_shared_from = shared > 0 ? c->n_layers - shared : 0;
    for (int L = c->kv_shared_from; shared > 0 && L < c->n_layers; L++)
        if (L <= 0 || cfg_kv_source(c, L) == L) {
            char item[160];
            snprintf(item, sizeof item, "num_kv_shared_layers = %d (layer %d has no earlier layer of its type to share)",
                     shared, L);
            cfg_list_add(r->badnum, sizeof r->badnum, item);
            r->nbad++;
            c->kv_shared_from = 0;
            break;
        }
    c->double_wide_mlp = cfg_bool(r, "use_double_wide_mlp", false);
    nul = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(root, "hidden_size_per_layer_input"));   /* None: no PLE */
    c->ple_dim = nul ? 0 : jint(r, root, "hidden_size_per_layer_input", 256);
    c->ple_vocab = jint(r, root, "vocab_size_per_layer_input", 262144);
    c->moe_block_experts = cfg_bool(r, "enable_moe_block", false) ? jint(r, root, "num_experts", 0) : 0;
    c->moe_block_topk = jint(r, root, "top_k_experts", 0);
    c->moe_block_ffn = jint(r, root, "moe_intermediate_size", jnum(r, root, "expert_intermediate_size", 0));
    if (c->moe_block_experts > 0 && (c->moe_block_topk <= 0 || c->moe_block_topk > c->moe_block_experts ||
                                     c->moe_block_ffn <= 0)) {
        cfg_list_add(r->badnum, sizeof r->badnum, "enable_moe_block: top_k_experts and moe_intermediate_size must be "
                     "positive, top_k_experts at most num_experts");
        r->nbad++;
    }
    c->moe.n_experts = 0;                              /* the experts beside the dense MLP are not MoeSpec's */
    if (c->mlp == MLP_MOE) c->mlp = MLP_GATED;
}

int cfg_attn_layers(const ModelConfig *c, char *buf, size_t cap) {
    int n = 0;
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (int L = 0; L < c->n_layers; L++) {
        if (cfg_layer_linear(c, L)) continue;
        int k = at < cap ? snprintf(buf + at, cap - at, "%s%d", n ? ", " : "", L) : 0;
        at += k > 0 ? (size_t)k : 0;
        n++;
    }
    return n;
}

int cfg_check_attn_layer(const ModelConfig *c, int layer, const char *what) {
    if (!cfg_layer_linear(c, layer)) return AL_OK;
    char list[256];
    cfg_attn_layers(c, list, sizeof list);
    if (c->lin.layer[layer] == 2)
        return al_err("%s: layer %d of this %s model is an %s block (hybrid_override_pattern '%c': no attention, no "
                      "KV cache); its softmax-attention layers are %s", what, layer, c->model_type,
                      c->lin.block[layer] == 'E' ? "MoE" : "MLP", c->lin.block[layer], list);
    return al_err("%s: layer %d of this %s model is a %s%s layer (a recurrence, no "
                  "Q/K/V heads, no KV cache); its softmax-attention layers are %s", what, layer, c->model_type,
                  c->lin.mamba ? "Mamba-2 (SSM)" : cfg_linear_name(c), c->lin.mamba ? "" : " linear-attention", list);
}

/* The description after the dims; what is not a number where one belongs goes to r->badnum. */
static void describe(cfg_reader *r, const cJSON *root, ModelConfig *cfg) {
    parse_rope(r, root, cfg);
    parse_attention(r, root, cfg);
    parse_blocks(r, root, cfg);
    parse_linear(r, root, cfg);
    parse_llama4(r, root, cfg);
    parse_per_type(r, root, cfg);
}

void model_config_describe(const cJSON *root, ModelConfig *cfg) {
    cfg_reader r = {.root = root, .where = ""};
    describe(&r, root, cfg);
}

/* ================================================================ parse */

void cfg_layouts_from_row(ModelConfig *c) {
    const FamilyRow *row = cfg_row(c);
    c->attn = row->attn;
    c->block = row->block;
    c->norms = row->norms;
    c->ffn = row->ffn;
    c->names = row->names;
    c->embed_scale = 1.0;
    snprintf(c->prefix, sizeof c->prefix, "%s", family_prefix(row->names));
}

static int text_tower(const cJSON *root, const char *where, const FamilyRow *row, cJSON **out);
static int config_describe_text(const cJSON *root, const char *where, ModelConfig *cfg);
static int describe_tower(const cJSON *root, const char *where, ModelConfig *cfg);

/* attnlab_kv_ranks (an attnlab_mla of per-layer ranks): one rank per layer, each 1 to kv_lora_rank. */
static int attnlab_kv_ranks(const cJSON *root, const char *where, ModelConfig *cfg) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "attnlab_kv_ranks");
    if (!a) return AL_OK;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != cfg->n_layers || cfg->n_layers > CFG_MAX_LAYERS)
        return al_err("%s: attnlab_kv_ranks is not a list of %d rank%s (one per layer)", where, cfg->n_layers, al_s(cfg->n_layers));
    for (int l = 0; l < cfg->n_layers; l++) {
        const cJSON *v = cJSON_GetArrayItem(a, l);
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > cfg->kv_lora_rank || v->valuedouble != (int)v->valuedouble)
            return al_err("%s: attnlab_kv_ranks[%d] is not a rank of 1 to kv_lora_rank %d", where, l, cfg->kv_lora_rank);
        cfg->layer_kv_rank[l] = (unsigned short)v->valueint;
    }
    return AL_OK;
}

/* attnlab_mla (`export DIR format attnlab`): the source family's description (its row: attnlab_source_model_type)
 * with the attention made MLA of the KEYS_MLA dims -- no latent norms, RoPE pairs interleaved over
 * qk_rope_head_dim, the key q/k norms none -- and the source's windows, sinks, soft-caps, blocks, MLP kept. */
static int config_attnlab_mla(const cJSON *root, const char *where, ModelConfig *cfg) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "attnlab_source_model_type");
    char shown[96];
    const cJSON *keep = cJSON_GetObjectItemCaseSensitive(root, "attnlab_qk_norm");
    bool kp = cJSON_IsString(keep) && !strcmp(keep->valuestring, "keep");
    if (!cJSON_IsString(st) || !family_find(st->valuestring, NULL, &cfg->family) || cfg_row(cfg)->keys != KEYS_HF ||
        (cfg_row(cfg)->text_config && !kp))
        return al_err("%s: an attnlab_mla config names its source in \"attnlab_source_model_type\" (a family read by "
                      "Llama-style keys; a multimodal one's text tower with qk-norm keep only), not %s", where,
                      cJSON_IsString(st) ? al_printable(st->valuestring, shown, sizeof shown) : "given");
    if (cfg_row(cfg)->text_config ? describe_tower(root, where, cfg) : config_describe_text(root, where, cfg)) return AL_ERR;
    cfg_reader r = {.root = root, .where = where};
    if (kp) {                                                         /* the source's attention, K / V rebuilt */
        cfg->kv_rebuild = cfg_int(&r, "attnlab_kv_cache_dim", 0, true);
        if (r.missing[0] || r.invalid[0] || cfg->attn != QKV_SPLIT || cfg->qk_norm == QKN_NONE || cfg->kv_rebuild <= 0)
            return al_err("%s: an attnlab_mla config of qk-norm keep needs attnlab_kv_cache_dim%s%s and a source with "
                          "q_proj / k_proj / v_proj and a q/k norm", where, r.missing, r.invalid);
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", family_row(FAM_ATTNLAB_MLA)->model_type);
        return AL_OK;
    }
    cfg->attn = QKV_MLA;
    cfg->n_kv_heads = cfg->n_heads;
    cfg->q_lora_rank = cfg_int(&r, "q_lora_rank", 0, false);
    cfg->kv_lora_rank = cfg_int(&r, "kv_lora_rank", 0, true);
    cfg->qk_nope_dim = cfg_int(&r, "qk_nope_head_dim", 0, true);
    cfg->qk_rope_dim = cfg_int(&r, "qk_rope_head_dim", 0, true);
    cfg->v_dim = cfg_int(&r, "v_head_dim", 0, true);
    if (r.missing[0] || r.invalid[0])
        return al_err("%s: an attnlab_mla config needs %s%s", where, r.missing, r.invalid);
    cfg->rope = cfg->rope_spec.layout = ROPE_INTERLEAVED;
    cfg->rope_first = false;
    cfg->rope_spec.head_dim = cfg->rope_spec.rotary_dim = cfg->qk_rope_dim;
    cfg->rope_spec.partial_factor = 1.0;
    cfg->rope_interleave = true;
    cfg->latent_norm = cfg_bool(&r, "qk_latent_layernorm", false);
    cfg->qkv_bias = cfg->o_bias = cfg_bool(&r, "attention_bias", false);
    cfg->layer_rope_freqs = cfg_bool(&r, "attnlab_layer_rope", false);
    if (attnlab_kv_ranks(root, where, cfg)) return AL_ERR;
    cfg->qk_norm = QKN_NONE;
    cfg->qk_l2 = false;
    snprintf(cfg->model_type, sizeof cfg->model_type, "%s", family_row(FAM_ATTNLAB_MLA)->model_type);
    return AL_OK;
}

/* The description from a parsed tree (its repeated keys, if any, were resolved by the caller). */
static int model_config_from_tree(const cJSON *root, const char *where, ModelConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    if (!cJSON_IsObject(root)) return al_err("%s: not a JSON object", where);
    cfg_reader r = {.root = root, .where = where};
    if (detect_family(&r, &cfg->family, cfg->model_type, sizeof cfg->model_type) != AL_OK) return AL_ERR;
    KimiK3Spec k3;                         /* Kimi-K3: its text_config's plan checked (kimik3.c), then read as the tower */
    if (cfg_row(cfg)->keys == KEYS_KIMI_K3 && kimik3_parse(root, where, &k3) != AL_OK) return AL_ERR;
    if (cfg_row(cfg)->keys == KEYS_ATTNLAB) return config_attnlab_mla(root, where, cfg);
    if (!cfg_row(cfg)->text_config) return config_describe_text(root, where, cfg);
    return describe_tower(root, where, cfg);
}

/* A multimodal row's text tower (text_config) described, with the top level's tie_word_embeddings and dtype. */
static int describe_tower(const cJSON *root, const char *where, ModelConfig *cfg) {
    cJSON *text = NULL;
    if (text_tower(root, where, cfg_row(cfg), &text) != AL_OK) return AL_ERR;
    int rc = config_describe_text(text, where, cfg);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (!cJSON_HasObjectItem(text, "tie_word_embeddings") && cJSON_IsBool(tie)) cfg->tie_embeddings = cJSON_IsTrue(tie);
    if (cfg_row(cfg)->final_softcap_off) cfg->final_softcap = 0;
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");   /* gemma-3-4b-it: at the top only */
    if (!cJSON_IsString(td)) td = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    if (!cfg->torch_dtype[0] && cJSON_IsString(td)) al_printable(td->valuestring, cfg->torch_dtype, sizeof cfg->torch_dtype);
    cJSON_Delete(text);
    return rc;
}

/* A multimodal checkpoint's text tower: a copy of text_config with the text config class's defaults
 * (the row's text_defaults) where it lacks them, read as a text-only config of the row's traits. */
static int text_tower(const cJSON *root, const char *where, const FamilyRow *row, cJSON **out) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(tc))
        return al_err("%s: a %s config keeps its text model under \"text_config\", which is %s", where,
                      row->model_type, tc ? "not an object" : "missing");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
    char shown[96];
    if (cJSON_IsString(tt) && strcmp(tt->valuestring, row->text_config))
        return al_err("%s: a %s config whose text_config has model_type '%s': attnlab reads the %s text tower "
                      "(text_config model_type %s) only", where, row->model_type,
                      al_printable(tt->valuestring, shown, sizeof shown), row->model_type, row->text_config);
    cJSON *text = cJSON_Duplicate(tc, true), *dflt = NULL, *e;
    char *obj = row->text_defaults ? al_asprintf("{%s}", row->text_defaults) : NULL;
    if (obj) dflt = cJSON_Parse(obj);
    free(obj);
    cJSON_ArrayForEach(e, dflt)
        if (text && !cJSON_HasObjectItem(text, e->string)) cJSON_AddItemToObject(text, e->string, cJSON_Duplicate(e, true));
    cJSON_Delete(dflt);
    if (!text) return al_err("out of memory reading %s's text_config", where);
    *out = text;
    return AL_OK;
}

/* DeepSeek-V4 (dsv4.h) over Llama's keys: each head [NoPE | RoPE] (qk_rope_head_dim last, adjacent pairs), the query
 * latent q_lora_rank, the grouped output (o_groups x o_lora_rank), one KV head of head_dim that is key and value, a
 * sink per head. The compressor, indexer and hyper-connections are dsv4.c's to describe. */
static int dsv4_dims(const cJSON *root, const char *where, ModelConfig *c) {
    Dsv4Spec s;
    if (dsv4_parse(root, where, &s) != AL_OK) return AL_ERR;
    if (s.kv_heads != 1 || s.rope_dim > s.head_dim || s.rope_dim % 2 || s.q_lora < 1 || s.o_lora < 1)
        return al_err("%s: deepseek_v4 reads one KV head (num_key_value_heads %d), an even qk_rope_head_dim no larger "
                      "than head_dim (%d, %d) and q_lora_rank, o_lora_rank >= 1 (%d, %d)", where, s.kv_heads, s.rope_dim,
                      s.head_dim, s.q_lora, s.o_lora);
    c->qk_rope_dim = s.rope_dim;
    c->qk_nope_dim = s.head_dim - s.rope_dim;
    c->v_dim = s.head_dim;
    c->q_lora_rank = s.q_lora;
    c->o_lora_rank = s.o_lora;
    c->o_groups = s.o_groups;
    c->index_heads = s.index_heads;
    c->index_head_dim = s.index_head_dim;
    c->index_topk = s.index_topk;
    for (int L = 0; L < s.layers && L < s.n_ratios; L++) c->compress[L] = (unsigned short)(s.ratio[L] < 65535 ? s.ratio[L] : 65535);
    return AL_OK;
}

/* The description of a text model's config object (the file's root, or a tower's text_config). */
static int config_describe_text(const cJSON *root, const char *where, ModelConfig *cfg) {
    cfg_reader r = {.root = root, .where = where};
    cfg->vocab = cfg_int(&r, "vocab_size", 0, false);
    cfg->dtype = DT_F32;
    cfg_layouts_from_row(cfg);
    config_keys keys = cfg_row(cfg)->keys;
    if (keys == KEYS_MLA || keys == KEYS_KIMI_K3) parse_deepseek(&r, cfg);   /* Kimi-K3's tower: kimi_linear's keys */
    else if (keys == KEYS_GPT2) parse_gpt2(&r, cfg);
    else if (keys == KEYS_NEOX) parse_neox(&r, cfg);
    else parse_gqa(&r, cfg);
    if (keys == KEYS_DSV4 && dsv4_dims(root, where, cfg) != AL_OK) return AL_ERR;
    if (r.invalid[0]) return al_err("%s: %s: these fields must be non-negative whole numbers", where, r.invalid);
    if (r.badnum[0]) return al_err("%s: %s: fix %s", where, r.badnum, r.nbad > 1 ? "these fields" : "this field");
    if (r.missing[0])
        return al_err("%s: a %s config needs %s, which %s missing", where, cfg->model_type, r.missing,
                      strchr(r.missing, ',') ? "are" : "is");
    if (cfg_validate(cfg, where) != AL_OK) return AL_ERR;
    describe(&r, root, cfg);
    if (r.badnum[0]) return al_err("%s: %s: fix %s", where, r.badnum, r.nbad > 1 ? "these fields" : "this field");
    return AL_OK;
}

typedef struct { cJSON *item; size_t pos; } keyed_item;

static int cmp_keyed(const void *a, const void *b) {
    const keyed_item *x = a, *y = b;
    int c = strcmp(x->item->string, y->item->string);
    return c ? c : x->pos < y->pos ? -1 : 1;
}

/* Keeps the last of each repeated key of every object under j (as Python's json and
 * Hugging Face do; cJSON alone would give the first), with a warning naming the key. */
static int keep_last_keys(cJSON *j, const char *where) {
    size_t n = 0, k = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, j) n++;
    if (cJSON_IsObject(j) && n > 1) {
        keyed_item *v = al_malloc3(n, 1, sizeof *v, "the config's keys");
        if (!v) return AL_ERR;
        cJSON_ArrayForEach(e, j) v[k] = (keyed_item){e, k}, k++;
        qsort(v, n, sizeof *v, cmp_keyed);
        for (size_t i = 0, run; i < n; i += run) {
            for (run = 1; i + run < n && strcmp(v[i].item->string, v[i + run].item->string) == 0; run++) {}
            if (run == 1) continue;
            char shown[96];
            al_warn("%s: key \"%s\" appears %zu time%s; attnlab uses the last, as Hugging Face does", where,
                    al_printable(v[i].item->string, shown, sizeof shown), run, al_s(run));
            for (size_t d = i; d + 1 < i + run; d++) cJSON_Delete(cJSON_DetachItemViaPointer(j, v[d].item));
        }
        free(v);
    }
    cJSON_ArrayForEach(e, j) if (keep_last_keys(e, where) != AL_OK) return AL_ERR;
    return AL_OK;
}

static cJSON *parse_config_json_std(const char *text, const char *where);

/* Python's json module writes the non-finite floats as the bare words NaN, Infinity and -Infinity
 * (real configs hold them: Mamba hybrids' "time_step_limit": [0.0, Infinity]); cJSON reads only
 * standard JSON. python_words_quoted copies text with each such word outside a string turned into
 * a marker string, and markers_to_numbers turns the markers back into numbers once parsed. */
#define NONFINITE_MARK "\\u0001attnlab-nonfinite:"
static const struct { const char *word, *mark; double value; } nonfinite[] = {
    {"-Infinity", "\"" NONFINITE_MARK "0\"", -INFINITY},
    {"Infinity", "\"" NONFINITE_MARK "1\"", INFINITY},
    {"NaN", "\"" NONFINITE_MARK "2\"", NAN},
};
enum { N_NONFINITE = sizeof nonfinite / sizeof *nonfinite };

static bool word_at(const char *p, const char *word) {
    size_t n = strlen(word);
    return !strncmp(p, word, n) && !isalnum((unsigned char)p[n]) && p[n] != '_';
}

static char *python_words_quoted(const char *text) {
    size_t n = strlen(text), cap = n + 1, k = 0;
    for (const char *p = text; *p; p++) if (*p == 'N' || *p == 'I') cap += 32;
    char *out = al_malloc3(cap, 1, 1, "the config's text");
    if (!out) return NULL;
    bool in_string = false;
    for (const char *p = text; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1]) out[k++] = *p++;
            else if (*p == '"') in_string = false;
        } else if (*p == '"') {
            in_string = true;
        } else {
            size_t w = 0;
            while (w < N_NONFINITE && !word_at(p, nonfinite[w].word)) w++;
            if (w < N_NONFINITE) {
                k += (size_t)sprintf(out + k, "%s", nonfinite[w].mark);
                p += strlen(nonfinite[w].word) - 1;
                continue;
            }
        }
        out[k++] = *p;
    }
    out[k] = 0;
    return out;
}

static void markers_to_numbers(cJSON *j) {
    for (cJSON *e = j ? j->child : NULL; e; e = e->next) {
        static const char decoded[] = "\001attnlab-nonfinite:";
        bool marked = cJSON_IsString(e) && !strncmp(e->valuestring, decoded, sizeof decoded - 1);
        const char *what = marked ? e->valuestring + sizeof decoded - 1 : "";
        if (marked && what[0] >= '0' && what[0] < '0' + N_NONFINITE && !what[1]) {
            double v = nonfinite[what[0] - '0'].value;
            cJSON_free(e->valuestring);
            e->valuestring = NULL;
            e->type = cJSON_Number;
            e->valuedouble = v;
            e->valueint = isnan(v) ? 0 : v > 0 ? INT_MAX : INT_MIN;
        } else {
            markers_to_numbers(e);
        }
    }
}

/* Parses text as one JSON value with nothing after it but whitespace; repeated keys keep the last;
 * Python's NaN, Infinity and -Infinity read as those numbers. */
static cJSON *parse_config_json(const char *text, const char *where) {
    char *quoted = python_words_quoted(text);
    if (!quoted) return NULL;
    cJSON *root = parse_config_json_std(quoted, where);
    free(quoted);
    if (root) markers_to_numbers(root);
    return root;
}

/* Parses standard JSON text as one value with nothing after it but whitespace. */
static cJSON *parse_config_json_std(const char *text, const char *where) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, false);
    if (!root) {
        char shown[64];
        const char *at = cJSON_GetErrorPtr();
        al_err("%s: not valid JSON (near '%s')", where, al_printable(at ? at : "", shown, 21));
        return NULL;
    }
    while (end && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end && *end) {
        char shown[64];
        al_err("%s: bytes after the JSON object (at byte %zu: '%s'): the file is damaged or two files were joined",
               where, (size_t)(end - text), al_printable(end, shown, 21));
        cJSON_Delete(root);
        return NULL;
    }
    if (keep_last_keys(root, where) != AL_OK) { cJSON_Delete(root); return NULL; }
    return root;
}

int model_config_parse_keep(const char *json_text, const char *where, ModelConfig *cfg, cJSON **tree) {
    memset(cfg, 0, sizeof *cfg);
    if (tree) *tree = NULL;
    cJSON *root = parse_config_json(json_text, where);
    if (!root) return AL_ERR;
    int rc = model_config_from_tree(root, where, cfg);
    if (tree) *tree = root;
    else cJSON_Delete(root);
    return rc;
}

int model_config_parse(const char *json_text, const char *where, ModelConfig *cfg) {
    return model_config_parse_keep(json_text, where, cfg, NULL);
}

void model_config_yarn_folded(cJSON *rs) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(t)) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "yarn")) return;
    const char *keys[] = {"mscale", "mscale_all_dim", "attention_factor"};
    for (size_t i = 0; i < 3; i++) cJSON_DeleteItemFromObjectCaseSensitive(rs, keys[i]);
    cJSON_AddNumberToObject(rs, "attention_factor", 1.0);
}

size_t config_tree_ids(const cJSON *root, const char *key, int *list, size_t n, size_t cap) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key), *e;
    if (!j) j = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "text_config"), key);
    if (cJSON_IsNumber(j) && n < cap) list[n++] = j->valueint;
    else if (cJSON_IsArray(j))
        cJSON_ArrayForEach(e, j) if (cJSON_IsNumber(e) && n < cap) list[n++] = e->valueint;
    return n;
}

/* ================================================================ per layer */

/* YaRN's mscale: 0.1 m ln(factor) + 1 (1 for factor <= 1). */
static double yarn_get_mscale(double factor, double m) { return factor <= 1 ? 1.0 : 0.1 * m * log(factor) + 1.0; }

double cfg_attn_scale(const ModelConfig *c, int layer) {
    double s = c->query_pre_attn_scalar > 0 ? 1.0 / sqrt(c->query_pre_attn_scalar) : 1.0 / sqrt((double)cfg_d_qk(c));
    if (!c->scale_attn) s = 1.0;
    if (c->attn_mult > 0) s = c->attn_mult;            /* Granite: attention_multiplier is the scale */
    const RopeScaling *rs = &c->rope_spec.scaling;
    if (cfg_is_mla(c) && c->qk_rope_dim > 0 && rs->kind == RS_YARN && rs->mscale_all_dim != 0) {
        double m2 = yarn_get_mscale(rs->factor, rs->mscale_all_dim);
        s *= m2 * m2;                                  /* DeepSeek: softmax scale times mscale^2 */
    }
    return c->scale_by_layer ? s / (double)(layer + 1) : s;
}

/* True when layer is a sliding-window layer by layer_types / sliding_window_pattern / max_window_layers. */
static bool layer_is_local(const ModelConfig *c, int layer) {
    if (c->has_layer_types) return layer < CFG_MAX_LAYERS && c->layer_sliding[layer];
    if (cfg_row(c)->window_on_nope) return layer < CFG_MAX_LAYERS && c->layer_nope[layer];   /* SmolLM3 */
    if (c->window_pattern > 0) return (layer + 1) % c->window_pattern != 0;
    return layer >= c->window_from;
}

size_t cfg_layer_window(const ModelConfig *c, int layer) {
    return c->sliding_window > 0 && layer_is_local(c, layer) ? (size_t)c->sliding_window : 0;
}

double cfg_layer_theta(const ModelConfig *c, int layer) {
    const RopeSpec *r = &c->rope_spec;
    return r->local_theta > 0 && c->sliding_window > 0 && layer_is_local(c, layer) ? r->local_theta : r->theta;
}

bool cfg_layer_rope_scaled(const ModelConfig *c, int layer) {
    return !(cfg_row(c)->local_rope_plain && c->sliding_window > 0 && layer_is_local(c, layer));
}

bool cfg_layer_rope(const ModelConfig *c, int layer) {
    if (c->rope == ROPE_NONE || c->qk_rope_dim <= 0) return false;
    return !(c->has_nope && layer >= 0 && layer < CFG_MAX_LAYERS && c->layer_nope[layer]);
}

int cfg_nope_layers(const ModelConfig *c, char *buf, size_t cap) {
    int n = 0;
    size_t at = 0;
    if (cap) buf[0] = 0;
    for (int L = 0; c->rope != ROPE_NONE && L < c->n_layers; L++) {
        if (cfg_layer_rope(c, L)) continue;
        int k = at < cap ? snprintf(buf + at, cap - at, "%s%d", n ? ", " : "", L) : 0;
        at += k > 0 ? (size_t)k : 0;
        n++;
    }
    return n;
}

bool cfg_layer_indexer(const ModelConfig *c, int layer) {
    return cfg_has_indexer(c) && layer >= 0 && !(layer < CFG_MAX_LAYERS && c->index_shared[layer]);
}

int cfg_kv_source(const ModelConfig *c, int layer) {
    if (c->kv_shared_from <= 0 || layer < c->kv_shared_from || layer >= c->n_layers) return layer;
    bool local = layer_is_local(c, layer);
    for (int s = c->kv_shared_from - 1; s >= 0; s--)
        if (layer_is_local(c, s) == local) return s;
    return layer;
}

bool cfg_layer_v_is_k(const ModelConfig *c, int layer) { return c->k_eq_v && !layer_is_local(c, layer); }

bool cfg_layer_full_type(const ModelConfig *c, int layer) {
    return cfg_row(c)->per_type_attn && layer >= 0 && layer < c->n_layers && !layer_is_local(c, layer);
}

void cfg_full_view(const ModelConfig *c, ModelConfig *out) {
    *out = *c;
    if (!cfg_row(c)->per_type_attn) return;
    int hd = c->global_head_dim > 0 ? c->global_head_dim : cfg_d_qk(c);
    out->qk_nope_dim = 0;
    out->qk_rope_dim = out->v_dim = out->rope_spec.head_dim = out->rope_spec.rotary_dim = hd;
    if (c->global_kv_heads > 0) out->n_kv_heads = c->global_kv_heads;
}

bool cfg_per_type_dims(const ModelConfig *c) {
    return cfg_row(c)->per_type_attn && ((c->global_head_dim > 0 && c->global_head_dim != cfg_d_qk(c)) ||
                                         (c->global_kv_heads > 0 && c->global_kv_heads != c->n_kv_heads));
}

bool cfg_moe_layer(const ModelConfig *c, int layer) {
    const MoeSpec *m = &c->moe;
    if (c->lin.blocks) return m->n_experts > 0 && layer >= 0 && layer < CFG_MAX_LAYERS && c->lin.block[layer] == 'E';
    if (m->listed) return m->n_experts > 0 && layer >= 0 && layer < CFG_MAX_LAYERS && m->on[layer];
    if (m->n_experts <= 0 || layer < m->first_dense || layer % m->layer_freq != 0 || (layer + 1) % m->sparse_step != 0)
        return false;
    for (int i = 0; i < m->n_mlp_only; i++)
        if (m->mlp_only[i] == layer) return false;
    return true;
}

/* ================================================================ tensors by role */

const RoleName *cfg_role(const ModelConfig *c, tensor_role r) {
    /* a role is named by the tables of one kind only, so the first that names it is the one: no
     * dependence on where the role sits in the enum */
    const RoleName *n = role_in_attn(c->attn, r);
    if (n && c->attn == QKV_SPLIT && (r == ROLE_KV_A || r == ROLE_KV_B) && !c->kv_rebuild) n = NULL;   /* keep's only */
    if (!n) n = role_in_linear(c->lin.layout, r);
    if (!n) n = role_in_norms(c->norms, r);
    if (!n) n = role_in_ffn(c->ffn, r);
    if (!n) n = role_in_moe(c->moe.layout, r);
    return n ? n : role_in_model(c->names, r);
}

void cfg_layer_prefix(const ModelConfig *c, int layer, char *buf, size_t cap) {
    char layer_part[48];
    snprintf(layer_part, sizeof layer_part, family_layer_pattern(c->names), layer);
    snprintf(buf, cap, "%s%s", c->prefix, layer_part);
}

bool cfg_role_name(const ModelConfig *c, tensor_role r, int layer, int expert, const char *what, char *buf, size_t cap) {
    const RoleName *rn = cfg_role(c, r);
    if (cap) buf[0] = 0;
    if (!rn) return false;
    char where[96] = "", base[160];
    if (r < ROLE_EMBED) cfg_layer_prefix(c, layer, where, sizeof where);
    else if (!rn->unprefixed) snprintf(where, sizeof where, "%s", c->prefix);
    if (strstr(rn->name, "%d")) snprintf(base, sizeof base, rn->name, expert);
    else snprintf(base, sizeof base, "%s", rn->name);
    snprintf(buf, cap, "%s%s%s%s", where, base, what ? "." : "", what ? what : "");
    return true;
}
