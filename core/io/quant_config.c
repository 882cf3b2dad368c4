/* quant_config.c -- the quantization config read once (config.json's quantization_config in its
 * publishers' forms, ModelOpt's hf_quant_config.json) and the stored modules checked against it.
 * Rules and sources in quant_config.h. */
#define _GNU_SOURCE
#include "quant_config.h"

#include <cjson/cJSON.h>
#include <fnmatch.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ENC_NAMES[QENC_COUNT] = {
    [QENC_NONE] = "unquantized", [QENC_FP8_BLOCK] = "FP8 with block scales (weight_scale_inv)",
    [QENC_FP8_SCALE] = "FP8 with per-tensor / per-channel weight_scale", [QENC_INT4] = "pack-quantized INT4",
    [QENC_MXFP4] = "MXFP4", [QENC_NVFP4] = "NVFP4 (ModelOpt)", [QENC_NVFP4_CT] = "NVFP4 (compressed-tensors)",
    [QENC_FP8_NOSCALE] = "F8_E4M3 without scales", [QENC_UNKNOWN] = "a scheme attnlab does not read"};

const char *quant_enc_name(quant_enc e) { return e >= 0 && e < QENC_COUNT ? ENC_NAMES[e] : "?"; }

/* The lists of modules left unquantized, by the key each publisher uses. */
static const char *const LIST_KEYS[] = {"ignore", "modules_to_not_convert", "exclude_modules", "ignored_layers"};

static void copy_str(char *dst, size_t cap, const cJSON *v) {
    snprintf(dst, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* rc, with the error message made one printable line when it echoes a key or entry holding control
 * characters (config.json's strings are the user's). */
static int one_line(int rc) {
    if (rc == AL_OK) return rc;
    char m[1024];
    snprintf(m, sizeof m, "%s", al_errmsg());
    bool bad = false;
    for (char *c = m; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) { *c = '?'; bad = true; }
    return bad ? al_err("%s", m) : rc;
}

/* ================================================================ matching list entries */

static bool is_quant(char c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

/* Python's \d \w \s as POSIX classes (compressed-tensors' patterns are Python regexes), a lazy
 * quantifier as the greedy one (the same strings match at the start). NULL for what glibc's regcomp
 * would blow up on (fuzzing found "a+++..." taking gigabytes): a quantifier after a quantifier, a
 * repeat count above 64, a pattern over 512 characters. */
static char *py_to_ere(const char *p) {
    size_t n = strlen(p);
    char *out = n <= 512 ? malloc(n * 12 + 1) : NULL, *o = out;
    if (!out) return NULL;
    for (char prev = 0; *p; p++) {
        const char *cls = p[0] == '\\' && p[1] == 'd' ? "[0-9]" : p[0] == '\\' && p[1] == 'w' ? "[A-Za-z0-9_]"
                        : p[0] == '\\' && p[1] == 's' ? "[[:space:]]" : NULL;
        bool q = is_quant(*p) && !cls;
        if (q && *p == '?' && (prev == '*' || prev == '+' || prev == '?' || prev == '}')) { prev = 0; continue; }
        char *e = NULL;
        long lo = *p == '{' ? strtol(p + 1, &e, 10) : 0, hi = e && *e == ',' ? strtol(e + 1, NULL, 10) : lo;
        if ((q && is_quant(prev)) || (q && prev == '}') || lo > 64 || hi > 64) { free(out); return NULL; }
        if (cls) { o += sprintf(o, "%s", cls); p++; prev = ']'; }
        else if (p[0] == '\\' && p[1]) { *o++ = *p++; *o++ = *p; prev = 'x'; }
        else {
            *o++ = *p;
            prev = *p == '{' ? '{' : *p;
            if (*p == '{') for (; p[1] && p[1] != '}'; p++) *o++ = p[1];   /* the count, then '}' next */
        }
    }
    *o = 0;
    return out;
}

/* Whether regex pat (Python syntax) matches mod at its start; -1 when it does not compile. */
static int regex_at_start(const char *pat, const char *mod) {
    char *ere = py_to_ere(pat);
    regex_t re;
    regmatch_t at;
    if (!ere || regcomp(&re, ere, REG_EXTENDED)) { free(ere); return -1; }
    free(ere);
    int hit = regexec(&re, mod, 1, &at, 0) == 0 && at.rm_so == 0;
    regfree(&re);
    return hit;
}

/* Whether glob or name pat names mod or a dotted prefix of it. */
static bool names_prefix(const char *pat, const char *mod, bool glob) {
    char buf[512];
    size_t n = strlen(mod);
    if (n >= sizeof buf) return false;
    memcpy(buf, mod, n + 1);
    for (;;) {
        if (glob ? fnmatch(pat, buf, 0) == 0 : strcmp(pat, buf) == 0) return true;
        char *dot = strrchr(buf, '.');
        if (!dot) return false;
        *dot = 0;
    }
}

/* Each "re:" entry of list (n) compiled once (read_list checked they compile); NULL + error when out
 * of memory. */
static void **compile_list(char **list, size_t n) {
    void **re = n ? calloc(n, sizeof *re) : NULL;
    for (size_t i = 0; re && i < n; i++) {
        char *ere = strncmp(list[i], "re:", 3) ? NULL : py_to_ere(list[i] + 3);
        regex_t *r = ere ? malloc(sizeof *r) : NULL;
        if (r && regcomp(r, ere, REG_EXTENDED) != 0) { free(r); r = NULL; }
        re[i] = r;
        free(ere);
    }
    return re;
}

static void free_list_re(void **re, size_t n) {
    for (size_t i = 0; re && i < n; i++)
        if (re[i]) { regfree(re[i]); free(re[i]); }
    free(re);
}

/* Entry pat of a list with its compiled form re (NULL: not a regex) names mod. */
static bool entry_match(const char *pat, const void *re, const char *mod) {
    regmatch_t at;
    if (re) return regexec(re, mod, 1, &at, 0) == 0 && at.rm_so == 0;
    return quant_entry_names(pat, mod);
}

bool quant_entry_names(const char *pat, const char *mod) {
    if (!strncmp(pat, "re:", 3)) return regex_at_start(pat + 3, mod) == 1;
    if (strpbrk(pat, "*?[")) return names_prefix(pat, mod, true);
    return names_prefix(pat, mod, false) || (*pat && strstr(mod, pat) != NULL);
}

const char *quant_ignored(const QuantConfig *q, const char *mod) {
    for (size_t i = 0; q->present && i < q->nignore; i++)
        if (entry_match(q->ignore[i], q->ignore_re ? q->ignore_re[i] : NULL, mod)) return q->ignore[i];
    return NULL;
}

/* ================================================================ reading */

/* A JSON list of strings into a NULL-free array; error naming `key` when it is not one. */
static int read_list(const cJSON *v, const char *key, char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!v || cJSON_IsNull(v)) return AL_OK;
    if (!cJSON_IsArray(v)) return al_err("quantization_config.%s should be a list of module names", key);
    size_t cnt = (size_t)cJSON_GetArraySize(v), i = 0;
    char **a = cnt ? al_calloc(cnt, sizeof *a, "a quantization list") : NULL;
    if (cnt && !a) return AL_ERR;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it)) {
            for (size_t k = 0; k < i; k++) free(a[k]);
            free(a);
            return al_err("quantization_config.%s entry %zu is not a string", key, i);
        }
        if (!strncmp(it->valuestring, "re:", 3) && regex_at_start(it->valuestring + 3, "") < 0) {
            for (size_t k = 0; k < i; k++) free(a[k]);
            free(a);
            return al_err("quantization_config.%s entry '%s' is not a regular expression attnlab can read", key, it->valuestring);
        }
        if (!(a[i] = al_strdup(it->valuestring))) {
            for (size_t k = 0; k < i; k++) free(a[k]);
            free(a);
            return AL_ERR;
        }
        i++;
    }
    *out = a;
    *n = i;
    return AL_OK;
}

/* The first list key present in obj. */
static int read_ignore(const cJSON *obj, QuantConfig *q) {
    for (size_t k = 0; k < sizeof LIST_KEYS / sizeof *LIST_KEYS; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, LIST_KEYS[k]);
        if (!v || cJSON_IsNull(v)) continue;
        snprintf(q->ignore_key, sizeof q->ignore_key, "%s", LIST_KEYS[k]);
        if (read_list(v, LIST_KEYS[k], &q->ignore, &q->nignore) != AL_OK) return AL_ERR;
        q->ignore_re = compile_list(q->ignore, q->nignore);
        return q->nignore && !q->ignore_re ? al_err("out of memory for quantization_config.%s", LIST_KEYS[k]) : AL_OK;
    }
    return AL_OK;
}

/* compressed-tensors' weights scheme as an encoding (format decides nvfp4 vs packed int). */
static quant_enc ct_enc(const QuantGroup *g) {
    if (g->num_bits == 8 && g->is_float) return QENC_FP8_SCALE;        /* tensor, channel, block: "<w>_scale" (store.h) */
    if (g->num_bits == 4 && g->is_float && g->group_size == 16) return QENC_NVFP4_CT;
    if (g->num_bits == 4 && !g->is_float && g->symmetric && !strcmp(g->strategy, "group")) return QENC_INT4;
    return QENC_UNKNOWN;
}

static int read_group(const cJSON *gj, QuantGroup *g) {
    snprintf(g->name, sizeof g->name, "%s", gj->string ? gj->string : "?");
    char key[96];
    snprintf(key, sizeof key, "config_groups.%s.targets", g->name);
    if (read_list(cJSON_GetObjectItemCaseSensitive(gj, "targets"), key, &g->targets, &g->ntargets) != AL_OK) return AL_ERR;
    g->target_re = compile_list(g->targets, g->ntargets);
    if (g->ntargets && !g->target_re) return al_err("out of memory for quantization_config.%s", key);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(gj, "weights");
    if (!cJSON_IsObject(w)) { g->enc = QENC_NONE; return AL_OK; }     /* activations only */
    const cJSON *nb = cJSON_GetObjectItemCaseSensitive(w, "num_bits"), *gs = cJSON_GetObjectItemCaseSensitive(w, "group_size");
    g->num_bits = cJSON_IsNumber(nb) ? nb->valueint : 0;
    g->group_size = cJSON_IsNumber(gs) ? gs->valueint : 0;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(w, "type"), *sy = cJSON_GetObjectItemCaseSensitive(w, "symmetric");
    g->is_float = cJSON_IsString(ty) && !strcmp(ty->valuestring, "float");
    g->symmetric = !cJSON_IsFalse(sy);
    copy_str(g->strategy, sizeof g->strategy, cJSON_GetObjectItemCaseSensitive(w, "strategy"));
    g->enc = ct_enc(g);
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(w, "block_structure");
    if (!strcmp(g->strategy, "block") && g->enc == QENC_FP8_SCALE &&
        !(cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2 && cJSON_GetArrayItem(bs, 0)->valuedouble == DT_FP8_BLOCK &&
          cJSON_GetArrayItem(bs, 1)->valuedouble == DT_FP8_BLOCK))
        return al_err("quantization_config.config_groups.%s.weights.block_structure should be [%d, %d]: the FP8 block "
                      "grids attnlab reads", g->name, DT_FP8_BLOCK, DT_FP8_BLOCK);
    return AL_OK;
}

static int read_ct(const cJSON *qc, QuantConfig *q) {
    copy_str(q->format, sizeof q->format, cJSON_GetObjectItemCaseSensitive(qc, "format"));
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups"), *gj;
    if (groups && !cJSON_IsObject(groups)) return al_err("quantization_config.config_groups should be an object");
    size_t n = groups ? (size_t)cJSON_GetArraySize(groups) : 0;
    q->groups = n ? al_calloc(n, sizeof *q->groups, "quantization groups") : NULL;
    if (n && !q->groups) return AL_ERR;
    cJSON_ArrayForEach(gj, groups) {
        if (!cJSON_IsObject(gj)) return al_err("quantization_config.config_groups.%s should be an object", gj->string);
        if (read_group(gj, &q->groups[q->ngroups++]) != AL_OK) return AL_ERR;
    }
    return AL_OK;
}

/* fp8's keys: weight_block_size [128, 128] (DT_FP8_BLOCK, what the decoders read), fmt e4m3. */
static int read_fp8(const cJSON *qc, QuantConfig *q) {
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
    copy_str(q->fmt, sizeof q->fmt, cJSON_GetObjectItemCaseSensitive(qc, "fmt"));
    copy_str(q->scale_fmt, sizeof q->scale_fmt, cJSON_GetObjectItemCaseSensitive(qc, "scale_fmt"));
    copy_str(q->activation_scheme, sizeof q->activation_scheme, cJSON_GetObjectItemCaseSensitive(qc, "activation_scheme"));
    q->enc = QENC_FP8_BLOCK;
    if (bs && !cJSON_IsNull(bs)) {
        if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(bs, 0)) ||
            !cJSON_IsNumber(cJSON_GetArrayItem(bs, 1)))
            return al_err("quantization_config.weight_block_size should be [rows, cols] of a weight's scale blocks");
        q->block[0] = cJSON_GetArrayItem(bs, 0)->valueint;
        q->block[1] = cJSON_GetArrayItem(bs, 1)->valueint;
        if (q->block[0] != DT_FP8_BLOCK || q->block[1] != DT_FP8_BLOCK)
            return al_err("quantization_config.weight_block_size is [%d, %d]: attnlab reads FP8 block scales of [%d, %d] "
                          "(DeepSeek, Qwen3, GLM, MiniMax)", q->block[0], q->block[1], DT_FP8_BLOCK, DT_FP8_BLOCK);
    } else {
        q->enc = QENC_FP8_SCALE;        /* transformers' FP8 without blocks: one scale per tensor */
    }
    if (q->fmt[0] && strcmp(q->fmt, "e4m3") && strcmp(q->fmt, "float8_e4m3fn"))
        return al_err("quantization_config.fmt is \"%s\": attnlab reads FP8 weights in E4M3 (\"e4m3\")", q->fmt);
    if (q->scale_fmt[0] && strcmp(q->scale_fmt, "ue8m0") && strcmp(q->scale_fmt, "fp32"))
        return al_err("quantization_config.scale_fmt is \"%s\": attnlab knows \"ue8m0\" (powers of two) and F32 scales",
                      q->scale_fmt);
    return AL_OK;
}

/* ModelOpt's quant_algo as an encoding. */
static quant_enc modelopt_enc(const char *algo) {
    return !strcmp(algo, "NVFP4") ? QENC_NVFP4 : !strcmp(algo, "FP8") ? QENC_FP8_SCALE : QENC_UNKNOWN;
}

/* One quantization_config object (config.json's, or hf_quant_config.json's "quantization"). */
static int read_object(const cJSON *qc, QuantConfig *q) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
    copy_str(q->method, sizeof q->method, m);
    copy_str(q->algo, sizeof q->algo, cJSON_GetObjectItemCaseSensitive(qc, "quant_algo"));
    if (!q->method[0] && q->algo[0]) snprintf(q->method, sizeof q->method, "modelopt");
    if (read_ignore(qc, q) != AL_OK) return AL_ERR;
    if (!strcmp(q->method, "compressed-tensors")) return read_ct(qc, q);
    if (!strcmp(q->method, "fp8")) return read_fp8(qc, q);
    if (!strcmp(q->method, "mxfp4")) { q->enc = QENC_MXFP4; return AL_OK; }
    if (!strcmp(q->method, "modelopt")) {
        const cJSON *gs = cJSON_GetObjectItemCaseSensitive(qc, "group_size");
        q->enc = modelopt_enc(q->algo);
        if (q->enc == QENC_NVFP4 && cJSON_IsNumber(gs) && gs->valueint != 16)
            return al_err("quantization_config.group_size is %d: NVFP4 scales one block of 16 values", gs->valueint);
        if (cJSON_GetObjectItemCaseSensitive(qc, "config_groups")) return read_ct(qc, q);   /* ModelOpt 0.3x writes groups too */
        return AL_OK;
    }
    q->enc = QENC_UNKNOWN;
    return AL_OK;
}

static int read_hf_quant(const char *dir, QuantConfig *q) {
    char *path = al_asprintf("%s/hf_quant_config.json", dir);
    if (!path) return AL_ERR;
    FILE *f = fopen(path, "rb");
    if (!f) { free(path); return AL_OK; }
    fclose(f);
    size_t len = 0;
    char *text = al_read_file_max(path, &len, AL_CAP_CONFIG, "hf_quant_config");
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    const cJSON *qq = cJSON_GetObjectItemCaseSensitive(root, "quantization");
    int rc = !text ? AL_ERR : !cJSON_IsObject(qq) ? al_err("%s: no \"quantization\" object", path) : AL_OK;
    if (rc == AL_OK) {
        q->present = true;
        snprintf(q->where, sizeof q->where, "hf_quant_config.json quantization.quant_algo");
        rc = read_object(qq, q);
        if (rc != AL_OK) al_err_ctx("%s", path);
    }
    cJSON_Delete(root);
    free(text);
    free(path);
    return rc;
}

int quant_config_read(const cJSON *tree, const char *dir, QuantConfig *q) {
    memset(q, 0, sizeof *q);
    const cJSON *qc = tree ? cJSON_GetObjectItemCaseSensitive(tree, "quantization_config") : NULL;
    int rc = AL_OK;
    if (cJSON_IsObject(qc)) {
        q->present = true;
        rc = read_object(qc, q);
        bool by_method = cJSON_GetObjectItemCaseSensitive(qc, "quant_method") != NULL;
        snprintf(q->where, sizeof q->where, "config.json quantization_config.%s", by_method ? "quant_method" : "quant_algo");
        if (rc == AL_OK && !strcmp(q->method, "compressed-tensors") && q->ngroups)
            snprintf(q->where, sizeof q->where, "config.json quantization_config.config_groups");
    } else if (qc && !cJSON_IsNull(qc)) {
        rc = al_err("config.json: quantization_config should be an object");
    } else if (dir) {
        rc = read_hf_quant(dir, q);
    }
    if (rc != AL_OK) quant_config_free(q);
    return one_line(rc);
}

void quant_config_free(QuantConfig *q) {
    for (size_t i = 0; i < q->nignore; i++) free(q->ignore[i]);
    free_list_re(q->ignore_re, q->nignore);
    for (size_t g = 0; g < q->ngroups; g++) {
        for (size_t i = 0; i < q->groups[g].ntargets; i++) free(q->groups[g].targets[i]);
        free(q->groups[g].targets);
        free_list_re(q->groups[g].target_re, q->groups[g].ntargets);
    }
    free(q->ignore);
    free(q->groups);
    memset(q, 0, sizeof *q);
}

/* ================================================================ expected and found */

/* The module's last dotted component. */
static const char *last_part(const char *mod) {
    const char *last = strrchr(mod, '.');
    return last ? last + 1 : mod;
}

/* The LM head, by the ending every layout's name of it shares (its names are the family table's). */
static bool is_lm_head(const char *mod) { return ends_with(last_part(mod), "_head"); }

/* A module that transformers' quantizers replace as a Linear: a projection ("*_proj",
 * "kv_a_proj_with_mqa") or the LM head. */
static bool linear_like(const char *mod) {
    const char *last = last_part(mod);
    return ends_with(last, "_proj") || ends_with(last, "_proj_with_mqa") || is_lm_head(mod);
}

/* compressed-tensors: the group whose targets name mod ("Linear": a linear-like module). */
static const QuantGroup *ct_group(const QuantConfig *q, const char *mod) {
    for (size_t g = 0; g < q->ngroups; g++)
        for (size_t t = 0; t < q->groups[g].ntargets; t++) {
            const char *tg = q->groups[g].targets[t];
            if (!strcmp(tg, "Linear") ? linear_like(mod) : entry_match(tg, q->groups[g].target_re[t], mod)) return &q->groups[g];
        }
    return NULL;
}

/* quant_expected with the list entry ig that names mod (quant_ignored's answer) already known. */
static quant_enc expected_with(const QuantConfig *q, const char *mod, const char *ig, char *why, size_t cap) {
    if (why && cap) why[0] = 0;
    if (!q->present) return QENC_UNKNOWN;
    if (ig) {
        if (why) snprintf(why, cap, "quantization_config.%s entry '%s'", q->ignore_key, ig);
        return QENC_NONE;
    }
    if (q->ngroups) {
        const QuantGroup *g = ct_group(q, mod);
        if (why) snprintf(why, cap, g ? "quantization_config.config_groups.%s" : "quantization_config.config_groups (no group "
                          "targets it)", g ? g->name : "");
        return g ? g->enc : linear_like(mod) ? QENC_NONE : QENC_UNKNOWN;
    }
    if (why) snprintf(why, cap, "%s", q->where);
    if (q->enc == QENC_MXFP4) return strstr(mod, ".experts") ? QENC_MXFP4 : QENC_UNKNOWN;
    if (!linear_like(mod)) return QENC_UNKNOWN;
    if (is_lm_head(mod) && (q->enc == QENC_FP8_BLOCK || q->enc == QENC_FP8_SCALE) && !strcmp(q->method, "fp8"))
        return QENC_UNKNOWN;                 /* transformers leaves lm_head out by default */
    return q->enc;
}

quant_enc quant_expected(const QuantConfig *q, const char *mod, char *why, size_t cap) {
    return expected_with(q, mod, quant_ignored(q, mod), why, cap);
}

/* Whether "<mod><suf>" is stored. */
static bool has(const Store *s, const char *mod, const char *suf) {
    char n[600];
    return (size_t)snprintf(n, sizeof n, "%s%s", mod, suf) < sizeof n && store_has(s, n);
}

static dt_type dtype_of(const Store *s, const char *mod, const char *suf) {
    char n[600];
    const st_entry *e = NULL;
    if ((size_t)snprintf(n, sizeof n, "%s%s", mod, suf) >= sizeof n || store_entry(s, n, &e, NULL) != AL_OK) {
        al_err_clear();
        return DT_INVALID;
    }
    return e->dtype;
}

quant_enc quant_found(const Store *s, const char *mod) {
    if (has(s, mod, "_blocks") || has(s, mod, ".weight_blocks")) return QENC_MXFP4;
    dt_type p = has(s, mod, ".weight_packed") ? dtype_of(s, mod, ".weight_packed") : DT_INVALID;
    if (p == DT_I32) return QENC_INT4;
    if (p == DT_U8) return QENC_NVFP4_CT;
    dt_type w = dtype_of(s, mod, ".weight");
    if (w == DT_F8_E4M3)
        return has(s, mod, ".weight_scale_inv") ? QENC_FP8_BLOCK : has(s, mod, ".weight_scale") ? QENC_FP8_SCALE
                                                                                             : QENC_FP8_NOSCALE;
    if (w == DT_U8 && has(s, mod, ".weight_scale")) return QENC_NVFP4;
    return w == DT_INVALID ? QENC_UNKNOWN : QENC_NONE;
}

/* ================================================================ the check */

/* A scale tensor beside an unquantized weight, or NULL. */
static const char *stray_scale(const Store *s, const char *mod) {
    static const char *const sufs[] = {".weight_scale_inv", ".weight_scale", ".weight_scale_2", ".weight_global_scale"};
    for (size_t i = 0; i < sizeof sufs / sizeof *sufs; i++)
        if (has(s, mod, sufs[i])) return sufs[i];
    return NULL;
}

/* scale_fmt ue8m0: every block scale of FP8 module mod a power of two (what the engines' E8M0 holds). */
static int check_ue8m0(const Store *s, const char *mod) {
    char n[600];
    const st_entry *e;
    const void *sc;
    size_t scols;
    snprintf(n, sizeof n, "%s.weight", mod);
    if (store_entry(s, n, &e, NULL) != AL_OK || e->ndim != 2) return AL_ERR;
    if (store_fp8_scale(s, n, e->shape[0], e->shape[1], &sc, &scols) != AL_OK) return AL_ERR;
    size_t nr = dt_fp8_nblocks(e->shape[0]);
    for (size_t i = 0; i < nr * scols; i++) {
        float v;
        int ex;
        memcpy(&v, (const uint8_t *)sc + i * sizeof v, sizeof v);
        if (!(v > 0) || !isfinite(v) || frexpf(v, &ex) != 0.5f)
            return al_err("'%s_scale_inv' block [%zu, %zu] is %g, not a power of two, but quantization_config.scale_fmt is "
                          "\"ue8m0\" (engines read these scales as E8M0 exponents)", n, i / scols, i % scols, (double)v);
    }
    return AL_OK;
}

/* The module's stored encoding against the config's. */
static int check_module(const QuantConfig *q, const Store *s, const char *mod, bool streamed) {
    char why[200];
    const char *ig = quant_ignored(q, mod);
    quant_enc found = quant_found(s, mod), exp = expected_with(q, mod, ig, why, sizeof why);
    const char *stray = found == QENC_NONE ? stray_scale(s, mod) : NULL;
    if (ig && found != QENC_NONE && found != QENC_UNKNOWN)
        return al_err("'%s' is stored as %s but %s lists it as not quantized", mod, quant_enc_name(found), why);
    if (stray)
        return al_err("'%s.weight' is not quantized but carries '%s%s'%s%s", mod, mod, stray, ig ? ", and " : "", ig ? why : "");
    quant_enc fp8 = exp == QENC_UNKNOWN && !q->ngroups ? q->enc : exp;      /* what the method expects elsewhere */
    if (found == QENC_FP8_NOSCALE && (fp8 == QENC_FP8_BLOCK || fp8 == QENC_FP8_SCALE)) {
        bool block = fp8 == QENC_FP8_BLOCK;
        return al_err("'%s.weight' is F8_E4M3 but its scales '%s.weight_%s' are missing (%s: %s)", mod, mod,
                      block ? "scale_inv" : "scale", why[0] ? why : q->where, quant_enc_name(fp8));
    }
    if (exp == QENC_UNKNOWN || found == QENC_UNKNOWN || found == exp) {
        if (found == QENC_FP8_BLOCK && !strcmp(q->scale_fmt, "ue8m0") && !streamed) return check_ue8m0(s, mod);
        return AL_OK;
    }
    if (found == QENC_NONE)         /* attnlab reads it as it lies; lint says engines would not (quant_expected) */
        return AL_OK;
    return al_err("'%s' is stored as %s but %s says %s", mod, quant_enc_name(found), why, quant_enc_name(exp));
}

/* The module a stored tensor's name stands for, or false when it is not a weight's primary tensor. */
static bool module_of(const char *name, char *mod, size_t cap) {
    static const char *const sufs[] = {".weight_packed", ".weight_blocks", ".weight", "_blocks"};
    for (size_t i = 0; i < sizeof sufs / sizeof *sufs; i++)
        if (ends_with(name, sufs[i])) {
            size_t n = strlen(name) - strlen(sufs[i]);
            if (n >= cap) return false;
            memcpy(mod, name, n);
            mod[n] = 0;
            return true;
        }
    return false;
}

int quant_check_store(const QuantConfig *q, const Store *s) {
    uint64_t local, total;
    bool streamed = store_local_bytes(s, &local, &total);
    char mod[512];
    for (size_t i = 0; i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        if (!module_of(name, mod, sizeof mod)) continue;
        if (ends_with(name, ".weight") && (has(s, mod, ".weight_packed") || has(s, mod, ".weight_blocks"))) continue;
        if (check_module(q, s, mod, streamed) != AL_OK) return one_line(AL_ERR);
    }
    return AL_OK;
}

size_t quant_unquantized(const QuantConfig *q, const Store *s, char *first, size_t cap, quant_enc *exp) {
    char mod[512];
    size_t n = 0;
    for (size_t i = 0; q->present && i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        if (!ends_with(name, ".weight") || !module_of(name, mod, sizeof mod) || quant_found(s, mod) != QENC_NONE) continue;
        quant_enc e = quant_expected(q, mod, NULL, 0);
        if (e == QENC_NONE || e == QENC_UNKNOWN || !linear_like(mod)) continue;
        if (n++ == 0) { snprintf(first, cap, "%s", mod); *exp = e; }
    }
    return n;
}

void quant_describe(const QuantConfig *q, char *buf, size_t cap) {
    if (!q->present) { snprintf(buf, cap, "none"); return; }
    size_t at = (size_t)snprintf(buf, cap, "%s%s%s", q->method, q->algo[0] ? " " : "", q->algo);
    if (q->format[0] && at < cap) at += (size_t)snprintf(buf + at, cap - at, " %s", q->format);
    for (size_t g = 0; g < q->ngroups && at < cap; g++)
        at += (size_t)snprintf(buf + at, cap - at, "%s %s: %s", g ? ";" : ",", q->groups[g].name,
                               quant_enc_name(q->groups[g].enc));
    if (!q->ngroups && q->enc != QENC_NONE && at < cap)
        at += (size_t)snprintf(buf + at, cap - at, ": %s", quant_enc_name(q->enc));
    if (q->scale_fmt[0] && at < cap) at += (size_t)snprintf(buf + at, cap - at, ", scale_fmt %s", q->scale_fmt);
    if (at < cap) at += (size_t)snprintf(buf + at, cap - at, " (%s)", q->where);
    if (q->nignore && at < cap)
        snprintf(buf + at, cap - at, ", %s: %zu entr%s", q->ignore_key, q->nignore, q->nignore == 1 ? "y" : "ies");
}

int quant_config_plain_lists(cJSON *q, cJSON **lists, bool *created) {
    static const char *const keys[] = {"modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules"};
    bool own = false;                                   /* compressed-tensors / ModelOpt name their own */
    int n = 0;
    *created = false;
    for (int k = 2; k < 4; k++) own |= cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(q, keys[k])) > 0;
    for (int k = own ? 1 : 0; k < 4; k++) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(q, keys[k]);
        if (k >= 1 && !(cJSON_IsArray(a) && cJSON_GetArraySize(a) > 0)) continue;   /* only a non-empty one */
        if (!cJSON_IsArray(a)) {
            cJSON_DeleteItemFromObjectCaseSensitive(q, keys[k]);
            a = cJSON_AddArrayToObject(q, keys[k]);
            *created = a != NULL;
        }
        if (a) lists[n++] = a;
    }
    return n;
}
