/* lint.c -- a checkpoint folder checked against what transformers, vLLM, SGLang and llama.cpp's
 * converter read: the families table, the folder's files (config, index, shards, tokenizer), the
 * tensors each family's loader expects with their shapes, dtypes, and the keys stock loaders
 * ignore. Findings only; nothing printed. See lint.h. */
#define _GNU_SOURCE
#include "lint.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "shapes.h"
#include "engines.h"
#include "gguf_arch.h"
#include "kqsvd.h"
#include "quant_config.h"
#include "quant_fused.h"
#include "safetensors.h"
#include "tpa.h"

/* ================================================================ names and the report */

static const char *const target_names[LINT_NTARGETS] = {"transformers", "vLLM", "SGLang", "llama.cpp"};

const char *lint_target_name(int i) { return i >= 0 && i < LINT_NTARGETS ? target_names[i] : "?"; }

const char *lint_severity_name(lint_severity s) {
    return s == LINT_ERROR ? "error" : s == LINT_WARNING ? "warning" : "advisory";
}

const char *lint_verdict_name(lint_verdict v) {
    return v == LINT_FAILS ? "will not load" : v == LINT_DIFFERENT ? "loads, but computes a different model"
           : v == LINT_LOADS_FLAGS ? "loads with --skip-tokenizer-init (or --tokenizer naming the source)" : "loads";
}

lint_verdict lint_verdict_of(const LintReport *r, unsigned target) {
    lint_verdict v = LINT_LOADS;
    for (size_t i = 0; i < r->n; i++) {
        const LintFinding *f = &r->f[i];
        if (f->sev != LINT_ERROR && (f->flags & target) && v == LINT_LOADS) v = LINT_LOADS_FLAGS;
        if (f->sev != LINT_ERROR || !(f->targets & target)) continue;
        if (!(f->loads & target)) return LINT_FAILS;
        v = LINT_DIFFERENT;
    }
    return v;
}

size_t lint_count(const LintReport *r, lint_severity s) {
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) n += r->f[i].sev == s;
    return n;
}

void lint_report_free(LintReport *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) free(r->f[i].msg);
    free(r->f);
    free(r->path);
    free(r);
}

/* One tensor of the folder's weight shards. */
typedef struct {
    const char *name;
    const st_entry *e;
    size_t file;          /* index into Lint.files */
    bool used;            /* placed by the family's layout (or known to be skipped) */
} LTensor;

/* Findings about many tensors of one pattern (layer and expert numbers -> N) become one line. */
typedef enum { AGG_MISSING, AGG_SHAPE, AGG_UNKNOWN, AGG_SKIPPED } agg_kind;
typedef struct {
    agg_kind kind;
    char pattern[160];
    char first[700];      /* the first instance (name, or the shape message) */
    size_t count;
} Agg;

typedef struct {
    LintReport *r;
    const char *dir;
    cJSON *tree;          /* config.json (NULL when absent or not JSON) */
    ModelConfig cfg;
    bool cfg_ok;          /* cfg describes the folder (an attnlab family) */
    st_file **files;
    char **fnames;        /* file names as found (no folder) */
    size_t nfiles, fcap, fncap;
    LTensor *t;
    size_t nt, tcap;
    Agg *agg;
    size_t nagg, aggcap;
    bool oom;
    size_t fp4_n, fp4_listed;     /* FP4 weights found; of them, in a not-quantized list */
    char fp4_first[300];          /* the first such listed module */
} Lint;

/* Adds a finding. Out of memory: remembered (lint_folder fails), never a crash. */
static void add(Lint *x, lint_severity sev, unsigned targets, unsigned loads, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add(Lint *x, lint_severity sev, unsigned targets, unsigned loads, const char *fmt, ...) {
    LintReport *r = x->r;
    if (al_reserve(&r->f, &r->cap, r->n + 1, sizeof *r->f, "lint findings") != AL_OK) { x->oom = true; return; }
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    va_end(ap);
    if (!msg) { x->oom = true; return; }
    r->f[r->n++] = (LintFinding){.sev = sev, .targets = targets, .loads = loads & targets, .msg = msg};
}

static bool is_file(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISREG(sb.st_mode); }
static bool is_dir(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode); }

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static bool has_file(const Lint *x, const char *name) {
    char *p = al_asprintf("%s/%s", x->dir, name);
    bool ok = p && is_file(p);
    free(p);
    return ok;
}

/* ================================================================ families */

/* The families lint knows: the family table's rows with engines (core/model/family.h: model_type,
 * the transformers class as architectures[0], which targets load it, llama.cpp's converter
 * architecture). */
static const FamilyRow *known_family(const char *model_type) {
    model_family f;
    return model_type && family_find(model_type, NULL, &f) && FAMILY[f].engines ? &FAMILY[f] : NULL;
}

static size_t known_families(void) {
    size_t n = 0;
    for (int f = 0; f < FAM_COUNT; f++) n += FAMILY[f].engines != 0;
    return n;
}

static const char *str_key(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* attnlab's own layout of a `convert mla` (`export DIR format attnlab`, core/export/attnlab_export.h): every engine
 * refuses its model_type; read as the DeepSeek-V3 checkpoint it resembles, each would compute a different model. */
static bool check_own_mla(Lint *x) {
    const char *mt = str_key(x->tree, "model_type"), *kept = str_key(x->tree, "attnlab_kept");
    const char *src = str_key(x->tree, "attnlab_source_model_type");
    if (!mt || strcmp(mt, family_row(FAM_ATTNLAB_MLA)->model_type)) return false;
    char k[256], sm[64];
    al_printable(kept && *kept ? kept : "", k, sizeof k);
    al_printable(src ? src : "?", sm, sizeof sm);
    const char *keep = str_key(x->tree, "attnlab_qk_norm");     /* qk-norm keep: K / V rebuilt, then the source's norm */
    bool kp = keep && !strcmp(keep, "keep");
    bool fr = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x->tree, "attnlab_layer_rope"));   /* MHA2MLA's pairs */
    add(x, LINT_ERROR, LT_ALL, 0, "attnlab's own layout of a convert mla of %s (model_type attnlab_mla, `export DIR "
        "format attnlab`): no engine implements attnlab_mla, so each refuses it by name; read as DeepSeek-V3 "
        "(deepseek_v3) it computes a different model: that layout %s%s%s%s and reads the source's other layers as "
        "DeepSeek's; `load DIR` runs it in attnlab, and `export DIR` without format writes the stock form where one "
        "exists", sm, k[0] ? "lacks what the source keeps (" : "", k[0] ? k : "", k[0] ? "), " : "",
        kp ? "has no kv_lora_rank here (qk-norm keep: kv_b_proj rebuilds each token's full keys and values from the "
             "cached kv_a_proj_with_mqa output, the source's k_norm and RoPE act on them, and the query is the "
             "source's with its q_norm), which no MLA attention computes,"
           : fr ? "normalises the KV latent (the conversion's has no norm, qk_latent_layernorm false), turns every "
                  "layer's RoPE key at the standard frequencies (its layers' own are in self_attn.rope_inv_freq, "
                  "which DeepSeek-V3 does not read)"
                : "normalises the KV latent (the conversion's has no norm, qk_latent_layernorm false)");
    return true;
}

/* Whether two families name their weights alike (each one's class finds the other's tensors). */
static bool same_layout(const FamilyRow *a, const FamilyRow *b) {
    return a->keys == b->keys && a->attn == b->attn && a->block == b->block && a->norms == b->norms &&
           a->ffn == b->ffn && a->moe == b->moe && a->lin == b->lin && a->names == b->names;
}

/* Appends one item to a "; "-separated list in buf (cut at cap). */
static void list_add(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void list_add(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n && n + 2 < cap) n += (size_t)snprintf(buf + n, cap - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (n < cap) vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

/* What the folder's config sets that the two families' rows read differently ("" when nothing):
 * a class built from either computes these its own way. */
static void trait_gaps(const Lint *x, const FamilyRow *a, const FamilyRow *b, char *buf, size_t cap) {
    buf[0] = 0;
    if (x->cfg_ok && x->cfg.window_declared > 0 && a->windowed != b->windowed)
        list_add(buf, cap, "its sliding window of %d token%s (%s's class applies it, %s's does not)",
                 x->cfg.window_declared, al_s(x->cfg.window_declared), a->windowed ? a->model_type : b->model_type,
                 a->windowed ? b->model_type : a->model_type);
    if (a->qkv_bias_always != b->qkv_bias_always || a->bias_default != b->bias_default ||
        a->o_bias_never != b->o_bias_never)
        list_add(buf, cap, "the attention biases");
    if (a->norm != b->norm || a->qk_norm != b->qk_norm) list_add(buf, cap, "the norms");
    if (a->embed_scaled != b->embed_scaled || a->mup != b->mup) list_add(buf, cap, "the embedding and residual scales");
    if (a->rope_adjacent != b->rope_adjacent || a->partial_rotary != b->partial_rotary) list_add(buf, cap, "RoPE");
    if (a->sinks != b->sinks || a->attn_gate != b->attn_gate) list_add(buf, cap, "the attention's sinks and gate");
}

/* architectures[0] names another class than model_type's (fam). transformers' AutoModelForCausalLM picks the class
 * by model_type alone (its config class; architectures only chooses among several classes of one config), vLLM,
 * SGLang and convert_hf_to_gguf.py by architectures[0]: an error for the engines that then refuse the folder -- the
 * class is not theirs, or its weights are named otherwise --, else a warning naming who builds which class. */
static void check_arch_other(Lint *x, const FamilyRow *fam) {
    LintReport *r = x->r;
    model_family bf;
    const FamilyRow *b = family_find(NULL, r->arch, &bf) && FAMILY[bf].engines ? &FAMILY[bf] : NULL;
    unsigned by_arch = LT_VLLM | LT_SGLANG | LT_LLAMACPP;
    if (!b) {
        add(x, LINT_WARNING, by_arch, 0, "architectures[0] is '%s', the class of no family lint knows, but model_type "
            "'%s' is %s: transformers builds %s (AutoModelForCausalLM picks the class by model_type), vLLM, SGLang and "
            "convert_hf_to_gguf.py look the class up by architectures[0] and refuse a name they do not register; "
            "make them agree ([\"%s\"])", r->arch, r->model_type, fam->arch, fam->arch, fam->arch);
        return;
    }
    if (b->llamacpp_arch) snprintf(r->gguf_arch, sizeof r->gguf_arch, "%s", b->llamacpp_arch);
    unsigned lack = by_arch & ~b->engines;
    if (lack)
        add(x, LINT_ERROR, lack, 0, "architectures[0] '%s' (model_type %s's class) has no implementation in this "
            "engine, which builds the class architectures[0] names; make it %s's %s", r->arch, b->model_type,
            r->model_type, fam->arch);
    if (!same_layout(fam, b)) {
        if (by_arch & b->engines)
            add(x, LINT_ERROR, by_arch & b->engines, 0, "architectures[0] is '%s' but model_type '%s' is %s: this engine "
                "builds %s (by architectures[0]), whose weights are named otherwise than this folder's (%s's layout); "
                "transformers builds %s (by model_type); make them agree ([\"%s\"])", r->arch, r->model_type,
                fam->arch, r->arch, r->model_type, fam->arch, fam->arch);
        return;
    }
    char gaps[400];
    trait_gaps(x, fam, b, gaps, sizeof gaps);
    add(x, LINT_WARNING, LT_ALL, 0, "architectures[0] is '%s' but model_type '%s' is %s: transformers builds %s "
        "(AutoModelForCausalLM picks the class by model_type), vLLM and SGLang build %s and convert_hf_to_gguf.py "
        "converts as %s (by architectures[0]); both families name their weights alike, so every engine loads "
        "them%s%s; make them agree ([\"%s\"])", r->arch, r->model_type, fam->arch, fam->arch, r->arch, r->arch,
        gaps[0] ? ", but the two families' classes differ in what this config sets: " : "", gaps, fam->arch);
}

/* model_type and architectures against the table. */
static void check_family(Lint *x) {
    LintReport *r = x->r;
    const char *mt = str_key(x->tree, "model_type");
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(x->tree, "architectures");
    const cJSON *a0 = cJSON_GetArrayItem(archs, 0);
    al_printable(mt ? mt : "", r->model_type, sizeof r->model_type);
    al_printable(cJSON_IsString(a0) ? a0->valuestring : "", r->arch, sizeof r->arch);
    if (check_own_mla(x)) return;
    const FamilyRow *fam = known_family(mt);
    if (!mt)
        add(x, LINT_ERROR, LT_ALL, 0, "config.json has no \"model_type\": transformers' AutoConfig and the engines pick "
            "the family by it; add it (e.g. \"llama\", \"deepseek_v3\")");
    else if (!fam)
        add(x, LINT_WARNING, LT_ALL, 0, "model_type '%s' is not among the families lint knows (%zu of them: llama, "
            "qwen2, deepseek_v3, gpt2, ...): whether each engine loads it is not checked", r->model_type, known_families());
    if (fam) snprintf(r->hf_class, sizeof r->hf_class, "%s", fam->arch);
    if (fam && fam->llamacpp_arch) snprintf(r->gguf_arch, sizeof r->gguf_arch, "%s", fam->llamacpp_arch);
    if (fam && ~fam->engines & LT_ALL)
        add(x, LINT_ERROR, ~fam->engines & LT_ALL, 0, "model_type '%s' has no implementation in this engine",
            r->model_type);
    if (!cJSON_IsString(a0))
        add(x, LINT_ERROR, LT_VLLM | LT_SGLANG | LT_LLAMACPP, 0, "config.json has no \"architectures\" list: vLLM and "
            "SGLang pick the model class from architectures[0], and convert_hf_to_gguf.py too; add [\"%s\"]",
            fam ? fam->arch : "<the family's class>");
    else if (fam && strcmp(a0->valuestring, fam->arch))
        check_arch_other(x, fam);
}

/* ================================================================ files */

static void check_tokenizer(Lint *x) {
    bool tok = has_file(x, "tokenizer.json") || has_file(x, "tokenizer.model") ||
               (has_file(x, "vocab.json") && has_file(x, "merges.txt"));
    if (!tok) {
        size_t at = x->r->n;
        add(x, LINT_WARNING, LT_HF | LT_VLLM | LT_SGLANG, 0, "no tokenizer (tokenizer.json, tokenizer.model, or "
            "vocab.json + merges.txt): the weights load, but vLLM and SGLang start only with --skip-tokenizer-init or "
            "--tokenizer naming the source model; copy the source's tokenizer files into the folder");
        if (x->r->n > at) x->r->f[at].flags = LT_VLLM | LT_SGLANG;   /* their verdict says it: one verdict */
        add(x, LINT_ERROR, LT_LLAMACPP, 0, "no tokenizer files: convert_hf_to_gguf.py writes the vocabulary from them "
            "and stops without; copy the source's tokenizer.json / tokenizer.model and tokenizer_config.json");
    } else if (!has_file(x, "tokenizer_config.json"))
        add(x, LINT_WARNING, LT_ALL, 0, "no tokenizer_config.json: AutoTokenizer falls back to defaults (special "
            "tokens, chat template); copy the source's");
}

/* Opens one safetensors file into x->files (a bad file is a finding). */
static void open_shard(Lint *x, const char *name) {
    char *p = al_asprintf("%s/%s", x->dir, name);
    st_file *f = NULL;
    if (!p) { x->oom = true; return; }
    if (st_open(p, &f) != AL_OK) {
        add(x, LINT_ERROR, LT_ALL, 0, "%s cannot be read: %s", name, al_errmsg());
        al_err_clear();
    } else if (al_reserve(&x->files, &x->fcap, x->nfiles + 1, sizeof *x->files, "lint") != AL_OK ||
               al_reserve(&x->fnames, &x->fncap, x->nfiles + 1, sizeof *x->fnames, "lint") != AL_OK) {
        x->oom = true;
        st_close(f);
    } else {
        x->fnames[x->nfiles] = al_strdup(name);
        x->files[x->nfiles++] = f;
    }
    free(p);
}

/* No control characters (names from the folder go into messages as they are). */
static bool printable(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The *.safetensors files of the folder, sorted (caller frees each and the array). */
static char **list_safetensors(const Lint *x, size_t *n) {
    *n = 0;
    DIR *d = opendir(x->dir);
    if (!d) return NULL;
    char **v = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (ends_with(e->d_name, ".safetensors") && e->d_name[0] != '.' && printable(e->d_name)) {
            if (al_reserve(&v, &cap, *n + 1, sizeof *v, "lint") != AL_OK) break;
            v[(*n)++] = al_strdup(e->d_name);
        }
    closedir(d);
    if (*n) qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* The folder's weights without an index: model.safetensors, else every *.safetensors. */
static void open_unindexed(Lint *x) {
    if (has_file(x, "model.safetensors")) { open_shard(x, "model.safetensors"); return; }
    size_t n;
    char **v = list_safetensors(x, &n);
    if (!n) {
        bool bin = has_file(x, "pytorch_model.bin") || has_file(x, "pytorch_model.bin.index.json");
        add(x, bin ? LINT_WARNING : LINT_ERROR, LT_ALL, 0, bin ? "weights only as pytorch_model.bin: engines read "
            "them, but lint checks safetensors only (re-save with safe_serialization)" : "no weights: no "
            "model.safetensors, no model.safetensors.index.json and no *.safetensors file");
    } else if (n > 1)
        add(x, LINT_ERROR, LT_HF, 0, "%zu *.safetensors files and no model.safetensors.index.json: transformers opens "
            "model.safetensors or the index only (vLLM and SGLang read every file); write an index", n);
    for (size_t i = 0; i < n; i++) open_shard(x, v[i]);
    free_list(v, n);
}

/* ================================================================ tensors */

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const LTensor *)a)->name, ((const LTensor *)b)->name);
}

static LTensor *find(const Lint *x, const char *name);
static bool lint_has(void *x, const char *name) { return find(x, name) != NULL; }

static LTensor *find(const Lint *x, const char *name) {
    LTensor key = {.name = name};
    return x->nt ? bsearch(&key, x->t, x->nt, sizeof *x->t, cmp_tensor) : NULL;
}

/* Every tensor of the opened files, sorted by name; a name in two files is a finding. */
static void collect_tensors(Lint *x) {
    for (size_t f = 0; f < x->nfiles; f++)
        for (size_t i = 0; i < st_count(x->files[f]); i++) {
            if (al_reserve(&x->t, &x->tcap, x->nt + 1, sizeof *x->t, "lint") != AL_OK) { x->oom = true; return; }
            const st_entry *e = st_entry_at(x->files[f], i);
            x->t[x->nt++] = (LTensor){.name = e->name, .e = e, .file = f};
        }
    if (x->nt) qsort(x->t, x->nt, sizeof *x->t, cmp_tensor);
    for (size_t i = 1; i < x->nt; i++)
        if (!strcmp(x->t[i].name, x->t[i - 1].name))
            add(x, LINT_ERROR, LT_ALL, 0, "tensor '%s' is in two files (%s and %s): loaders keep one or refuse; remove "
                "the duplicate", x->t[i].name, x->fnames[x->t[i - 1].file], x->fnames[x->t[i].file]);
    x->r->ntensors = x->nt;
    x->r->nfiles = x->nfiles;
}

/* ================================================================ the index */

/* weight_map against the shards: every named shard present, every listed tensor where it says,
 * every tensor listed, metadata.total_size the sum of tensor bytes. */
static void check_index_map(Lint *x, const cJSON *wm, const cJSON *root) {
    size_t unlisted = 0, total = 0, nk = 0;
    const char *first = NULL;
    const char **keys = al_calloc((size_t)cJSON_GetArraySize(wm) + 1, sizeof *keys, "lint");
    const cJSON *it;
    if (!keys) { x->oom = true; return; }
    cJSON_ArrayForEach(it, wm) keys[nk++] = it->string;     /* sorted: a lookup per tensor, not a scan */
    qsort(keys, nk, sizeof *keys, cmp_str);
    for (size_t i = 0; i < x->nt; i++) {
        total += x->t[i].e->end - x->t[i].e->begin;
        if (!bsearch(&x->t[i].name, keys, nk, sizeof *keys, cmp_str) && !unlisted++) first = x->t[i].name;
    }
    free(keys);
    if (unlisted)
        add(x, LINT_WARNING, LT_ALL, 0, "weight_map does not list %zu tensor%s the shards hold (first: %s): "
            "transformers reports them missing and loaders that plan from the index skip them; list every tensor",
            unlisted, al_s(unlisted), first);
    cJSON_ArrayForEach(it, wm) {
        char name[160];
        const LTensor *t = find(x, it->string);
        if (!t && cJSON_IsString(it))
            for (size_t f = 0; f < x->nfiles; f++)
                if (!strcmp(x->fnames[f], it->valuestring)) {   /* only shards that opened */
                    add(x, LINT_ERROR, LT_ALL, 0, "weight_map puts '%s' in %s, which lacks it: loaders stop at the "
                        "missing tensor; fix the index or the shard", al_printable(it->string, name, sizeof name),
                        x->fnames[f]);
                    break;
                }
        if (t && cJSON_IsString(it) && strcmp(x->fnames[t->file], it->valuestring))
            add(x, LINT_ERROR, LT_ALL, 0, "weight_map puts '%s' in %s but it is in %s: fix the index", t->name,
                al_printable(it->valuestring, name, sizeof name), x->fnames[t->file]);
    }
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"), "total_size");
    if (!cJSON_IsNumber(ts))
        add(x, LINT_ADVISORY, LT_ALL, 0, "the index has no metadata.total_size (%zu byte%s of tensors): loaders do not "
            "need it, tools that size downloads and device maps do", total, al_s(total));
    else if (ts->valuedouble != (double)total)
        add(x, LINT_WARNING, LT_ALL, 0, "the index's metadata.total_size is %.0f but the tensors hold %zu byte%s: "
            "accelerate's device maps and download tools trust it; write the sum of tensor bytes", ts->valuedouble,
            total, al_s(total));
}

/* The folder's *.safetensors files the index does not name (names[0..n)). */
static void note_unnamed(Lint *x, char **names, size_t n) {
    size_t nall;
    char **all = list_safetensors(x, &nall);
    for (size_t i = 0; i < nall; i++) {
        bool named = false;
        for (size_t j = 0; j < n && !named; j++) named = !strcmp(all[i], names[j]);
        if (!named) add(x, LINT_ADVISORY, LT_ALL, 0, "%s is not named by the index: loaders skip it", all[i]);
    }
    free_list(all, nall);
}

/* Opens the shards model.safetensors.index.json names (a missing or broken one is a finding). */
static void open_indexed(Lint *x, const char *index_path, cJSON **wm_out, cJSON **root_out) {
    char *text = al_read_file_max(index_path, NULL, AL_CAP_INDEX, "index");
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    bool read = text != NULL;
    free(text);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!root || !cJSON_IsObject(wm)) {
        add(x, LINT_ERROR, LT_ALL, 0, "model.safetensors.index.json %s: every loader reads the shards from its "
            "weight_map; rewrite it", !read ? al_errmsg() : !root ? "is not valid JSON" : "has no \"weight_map\" object");
        al_err_clear();
        cJSON_Delete(root);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) {
        const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
        char shown[160];
        if (s && !printable(s)) {
            add(x, LINT_ERROR, LT_ALL, 0, "the index names shard '%s', with a control character: no loader opens it; "
                "rewrite the index", al_printable(s, shown, sizeof shown));
            s = NULL;
        }
        bool seen = false;
        for (size_t i = 0; s && i < n && !seen; i++) seen = !strcmp(names[i], s);
        if (!s || seen) continue;
        if (al_reserve(&names, &cap, n + 1, sizeof *names, "lint") != AL_OK) { x->oom = true; break; }
        names[n++] = al_strdup(s);
    }
    for (size_t i = 0; i < n; i++) {
        if (strchr(names[i], '/') || !has_file(x, names[i]))
            add(x, LINT_ERROR, LT_ALL, 0, "the index names shard %s but the folder has no such file: every loader "
                "stops there; copy the shard or rewrite the index", names[i]);
        else open_shard(x, names[i]);
    }
    note_unnamed(x, names, n);
    free_list(names, n);
    *wm_out = (cJSON *)wm;
    *root_out = root;
}

/* ================================================================ shard metadata and dtypes */

/* __metadata__'s "format": transformers refuses a file whose metadata lacks pt / tf / flax / mlx
 * (recent versions accept a file with no __metadata__ at all, older ones refuse it too). */
static void check_shard_meta(Lint *x) {
    for (size_t f = 0; f < x->nfiles; f++) {
        const char *fmt = st_meta(x->files[f], "format");
        char shown[32];
        if (fmt && !strcmp(fmt, "pt")) continue;
        if (!fmt && !st_meta_count(x->files[f]))
            add(x, LINT_WARNING, LT_HF, 0, "%s has no __metadata__: recent transformers load it, older versions "
                "refuse it (\"does not contain the valid metadata\"); write {\"format\": \"pt\"}", x->fnames[f]);
        else if (fmt && (!strcmp(fmt, "tf") || !strcmp(fmt, "flax") || !strcmp(fmt, "mlx")))
            add(x, LINT_WARNING, LT_HF, 0, "%s: __metadata__ says format '%s': transformers loads it, but PyTorch "
                "checkpoints say \"pt\"", x->fnames[f], fmt);
        else
            add(x, LINT_ERROR, LT_HF, 0, "%s: __metadata__ has %s%s%s: transformers refuses it (\"does not contain the "
                "valid metadata\"); re-save it with {\"format\": \"pt\"}", x->fnames[f], fmt ? "format '" : "no \"format\"",
                fmt ? al_printable(fmt, shown, sizeof shown) : "", fmt ? "'" : "");
    }
}

/* torch_dtype against the weights' dtypes; FP8 weights need a quantization_config. */
static void check_dtypes(Lint *x) {
    size_t bytes[DT_COUNT] = {0};
    for (size_t i = 0; i < x->nt; i++)
        if (!ends_with(x->t[i].name, "_scale_inv") && x->t[i].e->dtype >= 0 && x->t[i].e->dtype < DT_COUNT &&
            !((x->t[i].e->dtype == DT_I32 && ends_with(x->t[i].name, "_packed")) ||
              ((x->t[i].e->dtype == DT_I64 || x->t[i].e->dtype == DT_I32) && ends_with(x->t[i].name, "_shape"))))
            bytes[x->t[i].e->dtype] += x->t[i].e->end - x->t[i].e->begin;   /* INT4 words and shapes: weights */
    char *hq = al_asprintf("%s/hf_quant_config.json", x->dir);       /* ModelOpt's unified checkpoint (quant_config.h) */
    bool quant = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(x->tree, "quantization_config")) || (hq && is_file(hq));
    free(hq);
    bool fp4 = false;                                /* U8 codes beside FP4 scales (tensor.h) */
    for (size_t i = 0; i < x->nt && !fp4; i++) {
        char sc[300];
        snprintf(sc, sizeof sc, "%s_scale", x->t[i].name);
        fp4 = x->t[i].e->dtype == DT_U8 &&
              (ends_with(x->t[i].name, "_blocks") || ends_with(x->t[i].name, "_packed") || find(x, sc));
    }
    if (fp4 && !quant)
        add(x, LINT_ERROR, LT_ALL, 0, "U8 tensors (packed FP4 codes?) but no quantization_config in config.json: "
            "engines would not decode them; MXFP4 needs {\"quant_method\": \"mxfp4\"}, NVFP4 ModelOpt's "
            "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"}");
    if (quant) bytes[DT_U8] = 0;                     /* packed codes the quantization_config describes */
    if ((bytes[DT_F8_E4M3] || bytes[DT_F8_E5M2]) && !quant)
        add(x, LINT_ERROR, LT_ALL, 0, "FP8 weights but no quantization_config in config.json: engines would read the "
            "FP8 codes as plain weights; add DeepSeek's {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
            "\"weight_block_size\": [128, 128], \"activation_scheme\": \"dynamic\"}");
    for (int d = DT_I8; d < DT_COUNT; d++)
        if (bytes[d])
            add(x, LINT_ADVISORY, LT_ALL, 0, "%zu byte%s of %s tensors: not weights any float loader reads", bytes[d], al_s(bytes[d]),
                dt_name((dt_type)d));
    dt_type main = DT_INVALID;                       /* the float dtype holding most bytes, FP8 aside */
    const dt_type floats[] = {DT_F32, DT_F16, DT_BF16, DT_F64};
    for (size_t i = 0; i < 4; i++)
        if (bytes[floats[i]] && (main == DT_INVALID || bytes[floats[i]] > bytes[main])) main = floats[i];
    const char *td = str_key(x->tree, "torch_dtype");
    if (!td) td = str_key(x->tree, "dtype");
    if (!td) {
        if (main != DT_INVALID)
            add(x, LINT_ADVISORY, LT_HF | LT_VLLM | LT_SGLANG, 0, "config.json has no torch_dtype: transformers loads "
                "in float32 unless told, vLLM's dtype auto picks its own; write \"torch_dtype\" (the weights are "
                "mostly %s)", dt_name(main));
        return;
    }
    dt_type want = dt_parse_torch(td);
    char shown[32];
    if (want == DT_INVALID && strcmp(td, "auto"))
        add(x, LINT_ERROR, LT_ALL, 0, "torch_dtype '%s' is not a dtype engines know (float32, float16, bfloat16)",
            al_printable(td, shown, sizeof shown));
    else if (main != DT_INVALID && want != DT_INVALID && want != main)
        add(x, LINT_WARNING, LT_HF | LT_VLLM | LT_SGLANG, 0, "torch_dtype is %s but most weights are %s: engines "
            "cast the weights to torch_dtype on load (vLLM's dtype auto follows it); write the weights' dtype or "
            "convert them", al_printable(td, shown, sizeof shown), dt_name(main));
}

/* ================================================================ the family's layout */

/* name with every number between dots replaced by N (layers, experts). */
static void name_pattern(const char *name, char *buf, size_t cap) {
    size_t o = 0;
    for (const char *p = name; *p && o + 2 < cap;) {
        const char *q = p;
        while (isdigit((unsigned char)*q)) q++;
        bool field = q > p && (p == name || p[-1] == '.') && (*q == '.' || !*q);
        if (field) { buf[o++] = 'N'; p = q; }
        else buf[o++] = *p++;
    }
    buf[o] = 0;
}

static void agg_add(Lint *x, agg_kind kind, const char *name, const char *first) {
    char pat[160];
    name_pattern(name, pat, sizeof pat);
    for (size_t i = 0; i < x->nagg; i++)
        if (x->agg[i].kind == kind && !strcmp(x->agg[i].pattern, pat)) { x->agg[i].count++; return; }
    if (al_reserve(&x->agg, &x->aggcap, x->nagg + 1, sizeof *x->agg, "lint") != AL_OK) { x->oom = true; return; }
    Agg *a = &x->agg[x->nagg++];
    *a = (Agg){.kind = kind, .count = 1};
    snprintf(a->pattern, sizeof a->pattern, "%s", pat);
    snprintf(a->first, sizeof a->first, "%s", first);
}

static void shape_str(const st_entry *e, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < e->ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", e->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* compressed-tensors FP8 (tensor.h): "<name>_scale" F32/BF16/F16 of one value or [R, 1]; the
 * module's input_scale (the activations') is used too. False when there is no "<name>_scale". */
static bool expect_ct_scale(Lint *x, const char *name, const st_entry *w) {
    char sc[280];
    size_t n = strlen(name);
    snprintf(sc, sizeof sc, "%.*s.input_scale", (int)(n > 7 ? n - 7 : n), name);
    LTensor *in = ends_with(name, ".weight") ? find(x, sc) : NULL;
    snprintf(sc, sizeof sc, "%s_scale", name);
    LTensor *s = find(x, sc);
    if (!s) return false;
    s->used = true;
    if (in) in->used = true;
    const st_entry *e = s->e;
    size_t k = st_numel(e);
    bool dt_ok = e->dtype == DT_F32 || e->dtype == DT_BF16 || e->dtype == DT_F16;
    if (dt_ok && e->ndim <= 2 && (k == 1 || (k == w->shape[0] && (e->ndim == 1 || e->shape[1] == 1)))) return true;
    if (dt_ok && e->ndim == 2 && e->shape[0] == dt_fp8_nblocks(w->shape[0]) && e->shape[1] == dt_fp8_nblocks(w->shape[1]))
        return true;                                 /* strategy "block": one per 128 x 128 block (store.h) */
    char have[96], msg[700];
    shape_str(e, have, sizeof have);
    snprintf(msg, sizeof msg, "%s is %s %s; compressed-tensors FP8 scales of a [%zu, %zu] weight are F32, BF16 or F16 "
             "[] / [1] (per tensor), [%zu, 1] (per channel) or one per 128 x 128 block", sc, dt_name(e->dtype), have, w->shape[0], w->shape[1],
             w->shape[0]);
    agg_add(x, AGG_SHAPE, sc, msg);
    return true;
}

/* The block scales beside FP8 weight `name` (R, C): F32, BF16 or F8_E8M0 (ceil(R/128), ceil(C/128)). */
static void expect_scales(Lint *x, const char *name, const st_entry *w) {
    char sc[280];
    snprintf(sc, sizeof sc, "%s_scale_inv", name);
    LTensor *s = find(x, sc);
    if (!s && expect_ct_scale(x, name, w)) return;
    if (!s) { agg_add(x, AGG_MISSING, sc, sc); return; }
    s->used = true;
    size_t r = dt_fp8_nblocks(w->shape[0]), c = dt_fp8_nblocks(w->shape[1]);
    const st_entry *e = s->e;
    bool dt_ok = e->dtype == DT_F32 || e->dtype == DT_BF16 || e->dtype == DT_F8_E8M0;  /* Qwen3-FP8, DeepSeek-V4 (tensor.h) */
    if (!dt_ok || e->ndim != 2 || e->shape[0] != r || e->shape[1] != c) {
        char have[96], msg[700];
        shape_str(e, have, sizeof have);
        snprintf(msg, sizeof msg, "%s is %s %s; FP8 block scales of a [%zu, %zu] weight are F32 [%zu, %zu] (one per "
                 "128 x 128 block; BF16 or F8_E8M0 also read)", sc, dt_name(e->dtype), have, w->shape[0], w->shape[1], r, c);
        agg_add(x, AGG_SHAPE, sc, msg);
    }
}

/* A scale tensor `sname` of an FP4 weight: marked used; its dtype and 2-D shape [r, c] (c 0: one
 * value) checked. */
static void fp4_scale_ok(Lint *x, const char *sname, dt_type dt, size_t r, size_t c, const char *what) {
    LTensor *s = find(x, sname);
    if (!s) { agg_add(x, AGG_MISSING, sname, sname); return; }
    s->used = true;
    const st_entry *e = s->e;
    bool ok = e->dtype == dt && (c ? e->ndim == 2 && e->shape[0] == r && e->shape[1] == c : st_numel(e) == 1);
    if (ok) return;
    char have[96], msg[700];
    shape_str(e, have, sizeof have);
    if (c) snprintf(msg, sizeof msg, "%s is %s %s; %s are %s [%zu, %zu]", sname, dt_name(e->dtype), have, what, dt_name(dt), r, c);
    else snprintf(msg, sizeof msg, "%s is %s %s; %s is one %s value", sname, dt_name(e->dtype), have, what, dt_name(dt));
    agg_add(x, AGG_SHAPE, sname, msg);
}

/* quantization_config's lists of modules left unquantized, by the key each publisher uses. */
static const char *const NOT_QUANT_KEYS[] = {"modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"};

/* Whether list entry `pat` names module `m`: "re:" a POSIX extended regular expression matched at
 * the start (compressed-tensors' re.match), else a glob (ModelOpt, vLLM), the name itself, or a
 * part of it (transformers' modules_to_not_convert test: `key in name`). */
static bool names_module(const char *pat, const char *m) {
    return quant_entry_names(pat, m);    /* load's rules (quant_config.h), its guard against regexes regcomp blows up on */
}

/* The list entry naming module m, or NULL. */
static const char *listed_unquantized(const Lint *x, const char *m) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(x->tree, "quantization_config"), *it;
    for (size_t k = 0; cJSON_IsObject(q) && k < sizeof NOT_QUANT_KEYS / sizeof *NOT_QUANT_KEYS; k++)
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(q, NOT_QUANT_KEYS[k]))
            if (cJSON_IsString(it) && names_module(it->valuestring, m)) return it->valuestring;
    return NULL;
}

/* compressed-tensors' pack-quantized INT4 (tensor.h): "<name>_packed" I32 [d0, d1/8], "<name>_scale"
 * BF16/F16/F32 [d0, d1/32], "<name>_shape" I32/I64 [2]. False when `name` is not stored so. */
static bool expect_int4(Lint *x, const char *name, size_t d0, size_t d1, const char *why) {
    char n2[300], have[96], msg[700];
    snprintf(n2, sizeof n2, "%s_packed", name);
    LTensor *w = find(x, n2), *sc, *sh;
    if (!w || w->e->dtype != DT_I32) return false;
    w->used = true;
    snprintf(n2, sizeof n2, "%.*s", (int)(ends_with(name, ".weight") ? strlen(name) - 7 : strlen(name)), name);
    x->fp4_n++;
    if (listed_unquantized(x, n2) && x->fp4_listed++ == 0) snprintf(x->fp4_first, sizeof x->fp4_first, "%s", n2);
    const st_entry *e = w->e;
    if (e->ndim != 2 || e->shape[0] != d0 || e->shape[1] * 8 != d1 || d1 % 32) {
        shape_str(e, have, sizeof have);
        snprintf(msg, sizeof msg, "%s is I32 %s; config.json says [%zu, %zu] (%s): pack-quantized INT4 weights are "
                 "I32 [rows, cols/8] with cols a multiple of 32", w->name, have, d0, d1, why);
        agg_add(x, AGG_SHAPE, w->name, msg);
    }
    snprintf(n2, sizeof n2, "%s_scale", name);
    dt_type sdt = (sc = find(x, n2)) && (sc->e->dtype == DT_F16 || sc->e->dtype == DT_F32) ? sc->e->dtype : DT_BF16;
    fp4_scale_ok(x, n2, sdt, d0, d1 / 32, "INT4 group scales (one per 32 values)");
    snprintf(n2, sizeof n2, "%s_shape", name);
    if ((sh = find(x, n2))) sh->used = true;
    else agg_add(x, AGG_MISSING, n2, n2);
    return true;
}

/* An FP4 weight `name` of shape [d0, d1] (tensor.h): MXFP4 "<name>_blocks" U8 [d0, d1/32, 16] +
 * "<name>_scales" U8 [d0, d1/32], or NVFP4 "<name>" U8 [d0, d1/2] + "<name>_scale" F8_E4M3
 * [d0, d1/16] + "<name>_scale_2" F32 (and the module's input_scale, used), or compressed-tensors'
 * "<name>_packed" + "<name>_scale" + "<name>_global_scale" (input_global_scale). False when `name`
 * is stored otherwise. */
static bool expect_fp4(Lint *x, const char *name, size_t d0, size_t d1, const char *why) {
    char n2[300], have[96], msg[700];
    LTensor *w = find(x, name), *b = NULL;
    bool ct = false;                                 /* compressed-tensors' "<name>_packed" */
    snprintf(n2, sizeof n2, "%s_blocks", name);
    if (!w && !(b = find(x, n2))) {
        snprintf(n2, sizeof n2, "%s_packed", name);
        if (!(w = find(x, n2)) || w->e->dtype != DT_U8) return false;
        ct = true;
    }
    snprintf(n2, sizeof n2, "%s_scale", name);
    if (w && (w->e->dtype != DT_U8 || !find(x, n2))) return false;
    LTensor *codes = w ? w : b;
    const st_entry *e = codes->e;
    codes->used = true;
    bool mx = b != NULL;
    snprintf(n2, sizeof n2, "%.*s", (int)(ends_with(name, ".weight") ? strlen(name) - 7 : strlen(name)), name);
    x->fp4_n++;
    if (listed_unquantized(x, n2) && x->fp4_listed++ == 0) snprintf(x->fp4_first, sizeof x->fp4_first, "%s", n2);
    bool ok = e->dtype == DT_U8 && (mx ? e->ndim == 3 && e->shape[0] == d0 && e->shape[1] * 32 == d1 && e->shape[2] == 16
                                       : e->ndim == 2 && e->shape[0] == d0 && e->shape[1] * 2 == d1);
    if (!ok) {
        shape_str(e, have, sizeof have);
        snprintf(msg, sizeof msg, "%s is %s %s; config.json says [%zu, %zu] (%s): %s", codes->name, dt_name(e->dtype),
                 have, d0, d1, why, mx ? "MXFP4 blocks are U8 [rows, cols/32, 16]" : "NVFP4 weights are U8 [rows, cols/2]");
        agg_add(x, AGG_SHAPE, codes->name, msg);
    }
    snprintf(n2, sizeof n2, "%s%s", name, mx ? "_scales" : "_scale");
    fp4_scale_ok(x, n2, mx ? DT_U8 : DT_F8_E4M3, d0, d1 / (mx ? 32 : 16),
                 mx ? "MXFP4 scales (E8M0, one per 32 values)" : "NVFP4 block scales (one per 16 values)");
    if (mx) return true;
    snprintf(n2, sizeof n2, "%s%s", name, ct ? "_global_scale" : "_scale_2");
    fp4_scale_ok(x, n2, DT_F32, 1, 0, "NVFP4's per-tensor scale");
    size_t n = strlen(name);
    snprintf(n2, sizeof n2, "%.*s.%s", (int)(n > 7 ? n - 7 : n), name, ct ? "input_global_scale" : "input_scale");
    LTensor *in = ends_with(name, ".weight") ? find(x, n2) : NULL;
    if (in) in->used = true;
    return true;
}

/* One tensor the family's loader expects: shape [d0] (d1 = 0) or [d0, d1], `why` naming the config
 * keys that give it. FP8 weights bring their block scales along, FP4 ones theirs (expect_fp4). */
static void expect(Lint *x, bool optional, size_t d0, size_t d1, const char *why, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void expect(Lint *x, bool optional, size_t d0, size_t d1, const char *why, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (d1 && (expect_int4(x, name, d0, d1, why) || expect_fp4(x, name, d0, d1, why))) return;
    LTensor *t = find(x, name);
    if (!t) {
        if (!optional) agg_add(x, AGG_MISSING, name, name);
        return;
    }
    t->used = true;
    const st_entry *e = t->e;
    bool ok = d1 ? e->ndim == 2 && e->shape[0] == d0 && e->shape[1] == d1 : e->ndim == 1 && e->shape[0] == d0;
    if (!ok) {
        char have[96], msg[700];
        shape_str(e, have, sizeof have);
        if (d1) snprintf(msg, sizeof msg, "%s is %s; config.json says [%zu, %zu] (%s)", name, have, d0, d1, why);
        else snprintf(msg, sizeof msg, "%s is %s; config.json says [%zu] (%s)", name, have, d0, why);
        agg_add(x, AGG_SHAPE, name, msg);
    }
    if (e->dtype == DT_F8_E4M3 && ends_with(name, ".weight") && e->ndim == 2) expect_scales(x, name, e);
}

/* Which expected tensors may be absent (tied embeddings). */
static bool tied(const Lint *x) { return x->cfg.tie_embeddings; }

/* FP4 weights against quantization_config's lists: a module stored in FP4 but listed as not
 * quantized is an error (engines build it as a plain linear and read its codes as weights); a list
 * entry that names no module of the checkpoint a warning. */
static void check_fp4_lists(Lint *x) {
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(x->tree, "quantization_config"))) return;
    if (x->fp4_listed)
        add(x, LINT_ERROR, LT_HF | LT_VLLM | LT_SGLANG, 0, "%s is stored in FP4 but quantization_config lists it as not "
            "quantized ('%s'; %zu module%s like it): engines build a plain linear and read the packed codes as weights; "
            "remove it from the list", x->fp4_first, listed_unquantized(x, x->fp4_first), x->fp4_listed, al_s(x->fp4_listed));
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(x->tree, "quantization_config"), *it;
    for (size_t k = 0; k < sizeof NOT_QUANT_KEYS / sizeof *NOT_QUANT_KEYS; k++)
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(q, NOT_QUANT_KEYS[k])) {
            bool hit = !cJSON_IsString(it);
            char m[300];
            for (size_t i = 0; i < x->nt && !hit; i++) {
                const char *dot = strrchr(x->t[i].name, '.');
                snprintf(m, sizeof m, "%.*s", (int)(dot ? dot - x->t[i].name : 0), x->t[i].name);
                hit = names_module(it->valuestring, m);
            }
            char head[192] = "";                    /* tied: the output head has no tensor of its own */
            if (x->cfg_ok && tied(x)) cfg_role_name(&x->cfg, ROLE_LM_HEAD, 0, -1, NULL, head, sizeof head);
            if (!hit && !(head[0] && names_module(it->valuestring, head)))
                add(x, LINT_WARNING, LT_HF | LT_VLLM | LT_SGLANG, 0, "quantization_config.%s entry '%s' names no module "
                    "of the checkpoint: a typo, or a pattern in another syntax (globs, 're:' regexes)", NOT_QUANT_KEYS[k],
                    it->valuestring);
        }
}

/* A projection the config quantizes (as encoding e) but the folder stores unquantized: attnlab reads
 * it as it lies, the engines build it quantized. transformers' FineGrainedFP8 quantizer raises "Expect
 * quantized weights but got an unquantized weight" (create_quantized_param of a pre-quantized
 * checkpoint); vLLM (and SGLang, its loader's rule) checks for weights the checkpoint lacks only
 * when the model is not quantized: an FP8 weight of the stored shape is cast into the FP8 parameter
 * and its scale is never set (a different model), a packed FP4 / INT4 parameter refuses the
 * unpacked shape (weight_loader's shape assert). The other transformers quantizers: not loadable as
 * the config says either (no packed codes or scales to load). */
static void stored_plain(Lint *x, const QuantConfig *q, const char *mod, quant_enc e, size_t n) {
    bool fp8 = e == QENC_FP8_BLOCK || e == QENC_FP8_SCALE;
    add(x, LINT_ERROR, LT_HF | LT_VLLM | LT_SGLANG, fp8 ? LT_VLLM | LT_SGLANG : 0, "%s.weight is stored unquantized "
        "but the quantization config (%s) makes it %s (%zu module%s like it): transformers %s; vLLM and SGLang skip "
        "their missing-weight check for a quantized model and %s; list it as not quantized", mod, q->where,
        quant_enc_name(e), n, al_s(n), !strcmp(q->method, "fp8") ? "refuses it (\"Expect quantized weights but got an "
        "unquantized weight\")" : "finds none of its codes or scales", fp8 ? "cast its values into the FP8 "
        "parameter, whose scale is never set" : "refuse its unpacked shape");
}

/* quant_method mxfp4 quantizes MoE experts only: transformers' Mxfp4 quantizer replaces the experts
 * alone and vLLM's Mxfp4Config gives every linear layer the unquantized method (older releases raise
 * NotImplementedError for one not in modules_to_not_convert). A linear module stored in MXFP4 there:
 * transformers finds no "<w>" and leaves it at its random initialisation, vLLM has no parameter
 * for "<w>_blocks". attnlab reads it (analyses), so it is the engines' verdict only. */
static void mxfp4_linears(Lint *x, const QuantConfig *q, const Store *s) {
    char first[300] = "";
    size_t n = 0;
    for (size_t i = 0; !strcmp(q->method, "mxfp4") && i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        if (!ends_with(name, ".weight_blocks") || strstr(name, ".experts")) continue;
        if (n++ == 0) snprintf(first, sizeof first, "%.*s", (int)(strlen(name) - 7), name);
    }
    if (n)
        add(x, LINT_ERROR, LT_HF | LT_VLLM | LT_SGLANG, LT_HF, "%s is stored in MXFP4 (%zu linear modules like it) but "
            "quant_method mxfp4 quantizes MoE experts only: transformers' Mxfp4 quantizer and vLLM's Mxfp4Config "
            "build it as a plain linear layer, which transformers leaves at its random initialisation (no '%s') "
            "and vLLM refuses (no parameter takes '%s_blocks'); store it dequantized (BF16)", first, n, first, first);
}

/* Bytes of FP4 / INT4 block / group scales scale_values reads (about 1/16 of an NVFP4 / INT4
 * checkpoint: lint stays a quick read of a large one; `load` and the forward pass check the rest
 * as they read them): 1 GiB, or $ATTNLAB_LINT_SCALE_BYTES. FP8 grids and per-tensor / per-channel
 * scales are always read. */
static size_t fp4_scale_budget(void) {
    const char *e = getenv("ATTNLAB_LINT_SCALE_BYTES");
    return e && *e ? (size_t)strtoull(e, NULL, 10) : (size_t)1 << 30;
}

/* The bytes of the block scales of FP4 / INT4 weight w (its "<w>_scales" or "<w>_scale"). */
static size_t fp4_scale_bytes(const Store *s, const char *w) {
    char sc[340];
    const st_entry *e;
    snprintf(sc, sizeof sc, "%s_scales", w);
    if (store_entry(s, sc, &e, NULL) != AL_OK) snprintf(sc, sizeof sc, "%s_scale", w);
    size_t n = store_entry(s, sc, &e, NULL) == AL_OK ? e->end - e->begin : 0;
    al_err_clear();
    return n;
}

/* The scales of stored tensor `name` (e) checked as `load` and the forward pass check them (store.c):
 * an FP4 / INT4 weight's pieces ("<w>_blocks", "<w>_packed", NVFP4's U8 "<w>") while *budget lasts
 * (*skipped counts those past it), an FP8 weight's per-tensor / per-channel scale or block grid.
 * AL_OK for anything else. */
static int weight_scales(const Store *s, const char *name, const st_entry *e, size_t *budget, size_t *skipped) {
    dt_fp4 q;
    char w[320];
    size_t k = strlen(name);
    bool piece = (ends_with(name, "_blocks") || ends_with(name, "_packed")) && k - 7 < sizeof w;
    if (piece || e->dtype == DT_U8) {
        snprintf(w, sizeof w, "%.*s", (int)(piece ? k - 7 : k), name);
        size_t nb = fp4_scale_bytes(s, w);
        if (nb > *budget) { ++*skipped; return AL_OK; }
        *budget -= nb;
        return store_fp4(s, w, &q);
    }
    if (e->dtype != DT_F8_E4M3 || e->ndim != 2) return AL_OK;
    const float *rs;
    int rc = store_fp8_rscale(s, name, e->shape[0], &rs);
    if (rc != AL_OK || rs) return rc;
    const st_entry *se;
    const void *g;
    size_t gc;
    snprintf(w, sizeof w, "%s_scale_inv", name);
    bool grid = store_entry(s, w, &se, NULL) == AL_OK;
    snprintf(w, sizeof w, "%s_scale", name);
    grid = grid || store_entry(s, w, &se, NULL) == AL_OK;
    al_err_clear();
    return grid ? store_fp8_scale(s, name, e->shape[0], e->shape[1], &g, &gc) : AL_OK;
}

/* Every quantized weight's scales (weight_scales): a NaN or infinite block / group / row scale or
 * a per-tensor scale <= 0, which attnlab refuses naming the tensor, is an error here too (the
 * engines load it and compute NaN). Only value errors: the shape checks above report shapes.
 * Stacked experts (4-D blocks) are not checked here. */
static void scale_values(Lint *x, const Store *s) {
    char first[400] = "";
    size_t n = 0, budget = fp4_scale_budget(), skipped = 0;
    for (size_t i = 0; i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        const st_entry *e;
        if (store_entry(s, name, &e, NULL) != AL_OK || e->ndim > 3) { al_err_clear(); continue; }
        if (weight_scales(s, name, e, &budget, &skipped) != AL_OK) {
            const char *m = al_errmsg();                  /* store.c's value errors, not its shape errors */
            if ((strstr(m, "must be finite") || strstr(m, "is NaN")) && n++ == 0) snprintf(first, sizeof first, "%s", m);
        }
        al_err_clear();
    }
    if (n)
        add(x, LINT_ERROR, LT_HF | LT_VLLM | LT_SGLANG, LT_HF | LT_VLLM | LT_SGLANG, "%zu quantized weight%s a NaN or "
            "infinite scale, or a per-tensor scale <= 0 (first: %s): the engines load it and compute NaN or "
            "infinite activations; attnlab's load refuses it", n, n == 1 ? " has" : "s have", first);
    if (skipped)
        add(x, LINT_ADVISORY, LT_ALL, LT_ALL, "the block scales of %zu FP4 / INT4 weights were not read (past lint's "
            "%zu byte%s of them): `ppl` or `calibrate` checks them as it reads them", skipped, fp4_scale_budget(), al_s(fp4_scale_budget()));
}

/* Whether module m is stored, in any encoding (quant_found: "<m>.weight", "_packed", "_blocks"). */
static bool module_stored(const Store *s, const char *m) { return quant_found(s, m) != QENC_UNKNOWN; }

/* Appends word w to the ", "-joined list buf. */
static void join_word(char *buf, size_t cap, const char *w) {
    size_t n = strlen(buf);
    if (n + strlen(w) + 3 < cap) snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", w);
}

/* The fused layer of module mod when its shards (quant_fused.h) are not all listed alike: listed /
 * plain get the shards' last names (", "-joined), true; false when alike, or when mod is not the first
 * stored shard of its layer (each layer once). */
static bool fused_split(const QuantConfig *q, const Store *s, const char *mod, char *listed, char *plain, size_t cap,
                        const char **fused) {
    char sh[QUANT_FUSED_MAX][256];
    int k = quant_fused_shards(mod, sh, fused), j = 0;
    while (j < k && !module_stored(s, sh[j])) j++;
    if (j == k || strcmp(sh[j], mod) != 0) return false;
    *listed = *plain = 0;
    for (; j < k; j++)
        if (module_stored(s, sh[j])) {
            const char *dot = strrchr(sh[j], '.');       /* a top-level "q_proj" has none */
            join_word(quant_ignored(q, sh[j]) ? listed : plain, cap, dot ? dot + 1 : sh[j]);
        }
    return *listed && *plain;
}

/* vLLM (and SGLang) fuse q/k/v_proj into qkv_proj and gate/up_proj into gate_up_proj (quant_fused.h)
 * and refuse a fused layer whose shards the config's list leaves some quantized and some not;
 * transformers builds each module alone and loads it. quant_method mxfp4 quantizes experts only. */
static void check_fused_lists(Lint *x, const QuantConfig *q, const Store *s) {
    char first[300] = "", listed[120] = "", plain[120] = "", l[120], p[120];
    const char *fused = NULL, *f;
    size_t n = 0;
    for (size_t i = 0; q->nignore && strcmp(q->method, "mxfp4") && i < store_count(s); i++) {
        const char *name = store_name_at(s, i), *w = strrchr(name, '.');
        if (!w || (strcmp(w, ".weight") && strcmp(w, ".weight_packed") && strcmp(w, ".weight_blocks"))) continue;
        char mod[256];
        if (snprintf(mod, sizeof mod, "%.*s", (int)(w - name), name) >= (int)sizeof mod) continue;
        if (!fused_split(q, s, mod, l, p, sizeof l, &f) || n++) continue;
        const char *dot = strrchr(mod, '.');
        snprintf(first, sizeof first, "%.*s", (int)(dot ? dot - mod : 11), dot ? mod : "(top level)");
        memcpy(listed, l, sizeof l), memcpy(plain, p, sizeof p), fused = f;
    }
    if (n)
        add(x, LINT_ERROR, LT_VLLM | LT_SGLANG, 0, "%s: the quantization config's %s leaves %s unquantized but not %s, "
            "which vLLM fuses with it into one %s layer (%zu fused layers like it): vLLM and SGLang refuse a fused layer "
            "whose shards are not all quantized alike (\"Detected some but not all shards ... are quantized\"; "
            "compressed-tensors: \"vLLM requires all to use the same scheme\"); transformers builds each module alone "
            "and loads it; list all of them or none", first, q->ignore_key, listed, plain, fused, n);
}

/* The stored modules against the quantization config read as `load` reads it (quant_config.h): what
 * load refuses is an error here too; a projection the config quantizes but the folder stores
 * unquantized too (stored_plain; attnlab reads it as it lies). */
static void check_quant_config(Lint *x) {
    QuantConfig q;
    Store *s = NULL;
    if (quant_config_read(x->tree, x->dir, &q) != AL_OK) {
        add(x, LINT_ERROR, LT_HF | LT_VLLM | LT_SGLANG, 0, "%s", al_errmsg());
        return;
    }
    if (q.present && store_open(x->dir, &s) == AL_OK) {
        char mod[300];
        quant_enc e = QENC_NONE;
        size_t n;
        if (quant_check_store(&q, s) != AL_OK) {
            if (!x->fp4_listed)                  /* check_fp4_lists said it already */
                add(x, LINT_ERROR, LT_HF | LT_VLLM | LT_SGLANG, 0, "%s", al_errmsg());
        } else if ((n = quant_unquantized(&q, s, mod, sizeof mod, &e)))
            stored_plain(x, &q, mod, e, n);
        mxfp4_linears(x, &q, s);
        scale_values(x, s);
        check_fused_lists(x, &q, s);
    }
    al_err_clear();
    store_free(s);
    quant_config_free(&q);
}

/* The SHAPE_IF_* conditions that hold for this folder's config. */
static unsigned conditions(const Lint *x) {
    const ModelConfig *c = &x->cfg;
    bool mlp_bias = c->ffn == FFN_NEOX ? c->mlp_bias             /* DeepSeek's MLPs never have biases */
                    : c->attn != QKV_MLA && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x->tree, "mlp_bias"));
    return shape_conditions(c, mlp_bias);
}

/* The tensor of role r (layer L, expert e; what "weight", "bias" or NULL) where the model's
 * layouts name it, with shape [d0] (d1 = 0) or [d0, d1]. A role the layouts lack: nothing. */
static void expect_role(Lint *x, bool optional, tensor_role r, int L, int e, const char *what, size_t d0, size_t d1,
                        const char *why) {
    char name[256];
    if (cfg_role_name(&x->cfg, r, L, e, what, name, sizeof name)) expect(x, optional, d0, d1, why, "%s", name);
}

/* A list of wants in layer L, those whose conditions hold (the indexer's: optional on the layers that
 * reuse another layer's selection, GLM-5.2's IndexShare). */
static void expect_wants(Lint *x, const ModelConfig *c, const RoleShape *w, int L, unsigned cond) {
    for (; w->why; w++) {
        bool kv = w->role == ROLE_K || w->role == ROLE_V || w->role == ROLE_K_NORM;   /* Gemma 4: KV-shared layers */
        if ((kv && cfg_kv_source(c, L) != L) || (w->role == ROLE_V && cfg_layer_v_is_k(c, L))) continue;   /* k_eq_v */
        if ((w->when & cond) == w->when)
            expect_role(x, (w->when & SHAPE_IF_INDEXER) && !cfg_layer_indexer(&x->cfg, L), w->role, L, 0,
                        w->bias ? "bias" : "weight", shape_dim(c, w->d0), shape_dim(c, w->d1), w->why);
    }
}

/* A norm of role r (layer L) of the family's kind: RMSNorm weight [h], LayerNorm weight and bias. */
static void expect_norm(Lint *x, tensor_role r, int L, const char *hidden_key) {
    size_t h = (size_t)x->cfg.hidden;
    expect_role(x, false, r, L, 0, "weight", h, 0, hidden_key);
    if (x->cfg.norm == NORM_LAYER) expect_role(x, false, r, L, 0, "bias", h, 0, hidden_key);
}

/* The 3-D tensor of role r in layer L (no ".weight": fused experts) with shape [d0, d1, d2], where the
 * model's layouts name it. */
static void expect_3d(Lint *x, tensor_role r, int L, size_t d0, size_t d1, size_t d2, const char *why) {
    char name[256];
    if (!cfg_role_name(&x->cfg, r, L, 0, NULL, name, sizeof name)) return;
    LTensor *t = find(x, name);
    if (!t) { agg_add(x, AGG_MISSING, name, name); return; }
    t->used = true;
    const st_entry *e = t->e;
    if (!(e->ndim == 3 && e->shape[0] == d0 && e->shape[1] == d1 && e->shape[2] == d2)) {
        char have[96], msg[700];
        shape_str(e, have, sizeof have);
        snprintf(msg, sizeof msg, "%s is %s; config.json says [%zu, %zu, %zu] (%s)", name, have, d0, d1, d2, why);
        agg_add(x, AGG_SHAPE, name, msg);
    }
}

/* The config key giving the experts' count of each MoE layout. */
static const char *const EXPERT_KEY[MOE_LAYOUT_COUNT] = {
    [MOE_MIXTRAL] = "num_local_experts", [MOE_QWEN] = "num_experts", [MOE_DEEPSEEK] = "n_routed_experts",
    [MOE_GPT_OSS] = "num_local_experts", [MOE_MINIMAX] = "num_local_experts", [MOE_QWEN_NEXT] = "num_experts",
    [MOE_QWEN3_5] = "num_experts", [MOE_QWEN3_VL] = "num_experts", [MOE_LLAMA4] = "num_local_experts",
    [MOE_NEMOTRON] = "n_routed_experts",
    [MOE_GRANITE] = "num_local_experts"};

/* Every expert in one tensor of role r in layer L: [E, d0, d1]; stored in MXFP4 (gpt-oss as
 * released: <name>_blocks, <name>_scales) both are taken as read (the weight-format decoder checks them). */
static void expect_experts3(Lint *x, tensor_role r, int L, size_t E, size_t d0, size_t d1, const char *why) {
    char name[256], blk[280], scl[280];
    if (!cfg_role_name(&x->cfg, r, L, -1, NULL, name, sizeof name)) return;
    snprintf(blk, sizeof blk, "%s_blocks", name);
    snprintf(scl, sizeof scl, "%s_scales", name);
    LTensor *b = find(x, name) ? NULL : find(x, blk), *sc = find(x, name) ? NULL : find(x, scl);
    if (!b && !sc) { expect_3d(x, r, L, E, d0, d1, why); return; }      /* as transformers dequantizes them */
    if (b) b->used = true;
    if (sc) sc->used = true;
}

/* gpt-oss's experts (MOE_GPT_OSS): the router with its bias, gate_up_proj [E, h, 2f] (x @ W),
 * down_proj [E, f, h] and their biases [E, 2f], [E, h]. */
static void layout_moe_fused(Lint *x, int L, size_t E, size_t h, size_t f) {
    const char *why = "num_local_experts, hidden_size, intermediate_size";
    expect_role(x, false, ROLE_ROUTER, L, 0, "weight", E, h, "num_local_experts, hidden_size");
    expect_role(x, false, ROLE_ROUTER, L, 0, "bias", E, 0, "num_local_experts");
    expect_experts3(x, ROLE_EXPS_GATE_UP, L, E, h, 2 * f, why);
    expect_experts3(x, ROLE_EXPS_DOWN, L, E, f, h, why);
    expect_role(x, false, ROLE_EXPS_GATE_UP_BIAS, L, 0, NULL, E, 2 * f, why);
    expect_role(x, false, ROLE_EXPS_DOWN_BIAS, L, 0, NULL, E, h, why);
}

/* The mixture-of-experts MLP of layer L, named as its moe_layout says: the router [E, h] (and
 * DeepSeek's score correction bias); E gated experts of width moe_intermediate_size
 * (intermediate_size where absent: Mixtral); the shared experts where the layout has them. */
static void layout_moe(Lint *x, int L) {
    const ModelConfig *c = &x->cfg;
    const MoeSpec *m = &c->moe;
    size_t h = (size_t)c->hidden, E = (size_t)m->n_experts;
    size_t f = (size_t)(m->expert_ffn > 0 ? m->expert_ffn : c->intermediate);
    const char *why = m->expert_ffn > 0 ? "moe_intermediate_size, hidden_size" : "intermediate_size, hidden_size";
    const char *ne = m->layout < MOE_LAYOUT_COUNT && EXPERT_KEY[m->layout] ? EXPERT_KEY[m->layout] : "num_experts";
    char why_gate[64];
    if (m->layout == MOE_GPT_OSS) { layout_moe_fused(x, L, E, h, f); return; }
    snprintf(why_gate, sizeof why_gate, "%s, hidden_size", ne);
    expect_role(x, false, ROLE_ROUTER, L, 0, "weight", E, h, why_gate);
    expect_role(x, true, ROLE_ROUTER_BIAS, L, 0, NULL, E, 0, ne);
    if (m->layout == MOE_QWEN3_VL || m->layout == MOE_LLAMA4) {   /* Qwen3-VL MoE, Llama 4: [E, h, 2f], [E, f, h] (x @ W) */
        expect_3d(x, ROLE_EXPS_GATE_UP, L, E, h, 2 * f, "num_experts, hidden_size, 2 x moe_intermediate_size");
        expect_3d(x, ROLE_EXPS_DOWN, L, E, f, h, "num_experts, moe_intermediate_size, hidden_size");
    } else {
        expect_3d(x, ROLE_EXPS_GATE_UP, L, E, 2 * f, h, "num_experts, 2 x moe_intermediate_size, hidden_size");
        expect_3d(x, ROLE_EXPS_DOWN, L, E, h, f, "num_experts, hidden_size, moe_intermediate_size");
    }
    for (int e = 0; e < (int)E; e++) {
        expect_role(x, false, ROLE_EXP_GATE, L, e, "weight", f, h, why);
        expect_role(x, false, ROLE_EXP_UP, L, e, "weight", f, h, why);
        expect_role(x, false, ROLE_EXP_DOWN, L, e, "weight", h, f, why);
    }
    if (m->n_shared <= 0) return;
    bool scaled = cfg_role(c, ROLE_SHEXP_SCALE) != NULL;     /* Qwen3-Next: shared_expert_intermediate_size */
    size_t fs = m->shared_ffn > 0 ? (size_t)m->shared_ffn : f * (size_t)m->n_shared;
    const char *why_sh = scaled ? "shared_expert_intermediate_size, hidden_size"
                                : "moe_intermediate_size x n_shared_experts, hidden_size";
    if (scaled) expect_role(x, false, ROLE_SHEXP_SCALE, L, 0, "weight", 1, h, "1, hidden_size");
    expect_role(x, false, ROLE_SHEXP_GATE, L, 0, "weight", fs, h, why_sh);
    expect_role(x, false, ROLE_SHEXP_UP, L, 0, "weight", fs, h, why_sh);
    expect_role(x, false, ROLE_SHEXP_DOWN, L, 0, "weight", h, fs, why_sh);
}

/* A linear-attention layer's tensors (shape_linear): A_log and dt_bias carry no ".weight"; conv1d
 * is [conv_dim, 1, linear_conv_kernel_dim]; KDA's A_log is [1, 1, num_heads, 1]. */
static void layout_linear(Lint *x, int L) {
    const ModelConfig *c = &x->cfg;
    unsigned cond = conditions(x);
    for (const RoleShape *w = shape_linear(c->lin.layout); w->why; w++) {
        bool plain = w->role == ROLE_LIN_A_LOG || w->role == ROLE_LIN_DT_BIAS || w->role == ROLE_LIN_D;
        bool kda_a = w->role == ROLE_LIN_A_LOG && c->lin.layout == LIN_KDA;
        if ((w->when & cond) != w->when) continue;
        if ((!shape_linear_conv(w->role) || w->bias) && !kda_a) {
            expect_role(x, false, w->role, L, 0, plain ? NULL : w->bias ? "bias" : "weight", shape_dim(c, w->d0),
                        shape_dim(c, w->d1), w->why);
            continue;
        }
        char name[256];
        cfg_role_name(c, w->role, L, 0, plain ? NULL : "weight", name, sizeof name);
        LTensor *t = find(x, name);
        if (!t) { agg_add(x, AGG_MISSING, name, name); continue; }
        t->used = true;
        const st_entry *e = t->e;
        size_t C = shape_dim(c, w->d0), K = (size_t)c->lin.conv;
        bool ok = kda_a ? e->ndim == 4 && e->shape[0] == 1 && e->shape[1] == 1 && e->shape[2] == C && e->shape[3] == 1
                        : e->ndim == 3 && e->shape[0] == C && e->shape[1] == 1 && e->shape[2] == K;
        if (!ok) {
            char have[96], want[64], msg[700];
            shape_str(e, have, sizeof have);
            if (kda_a) snprintf(want, sizeof want, "[1, 1, %zu, 1]", C);
            else snprintf(want, sizeof want, "[%zu, 1, %zu]", C, K);
            snprintf(msg, sizeof msg, "%s is %s; config.json says %s (%s)", name, have, want, w->why);
            agg_add(x, AGG_SHAPE, name, msg);
        }
    }
}

/* Gemma 4's MoE block of layer L: router.proj [E, h], router.scale [h], router.per_expert_scale [E], experts [E, 2I, h]
 * and [E, h, I], its three norms [h]. */
static void expect_moe_block(Lint *x, int L) {
    const ModelConfig *c = &x->cfg;
    size_t h = (size_t)c->hidden, E = (size_t)c->moe_block_experts, NI = (size_t)c->moe_block_ffn;
    expect_role(x, false, ROLE_G4_ROUTER, L, 0, "weight", E, h, "num_experts, hidden_size");
    expect_role(x, false, ROLE_G4_ROUTER_SCALE, L, 0, NULL, h, 0, "hidden_size");
    expect_role(x, false, ROLE_G4_EXPERT_SCALE, L, 0, NULL, E, 0, "num_experts");
    expect_3d(x, ROLE_G4_EXPS_GATE_UP, L, E, 2 * NI, h, "num_experts, 2 x moe_intermediate_size, hidden_size");
    expect_3d(x, ROLE_G4_EXPS_DOWN, L, E, h, NI, "num_experts, hidden_size, moe_intermediate_size");
    for (tensor_role r = ROLE_NORM_FFN_OUT1; r <= ROLE_NORM_FFN_IN2; r++) expect_role(x, false, r, L, 0, "weight", h, 0, "hidden_size");
}

/* Gemma 4's per-layer embeddings: the model's (L < 0) or layer L's tensors. */
static void expect_ple(Lint *x, int L) {
    const ModelConfig *c = &x->cfg;
    size_t h = (size_t)c->hidden, P = (size_t)c->ple_dim, LP = P * (size_t)c->n_layers;
    const char *why = "hidden_size_per_layer_input x num_hidden_layers";
    if (L < 0) {
        expect_role(x, false, ROLE_PLE_EMBED, 0, 0, "weight", (size_t)c->ple_vocab, LP, "vocab_size_per_layer_input");
        expect_role(x, false, ROLE_PLE_MODEL_PROJ, 0, 0, "weight", LP, h, why);
        expect_role(x, false, ROLE_PLE_MODEL_NORM, 0, 0, "weight", P, 0, "hidden_size_per_layer_input");
        return;
    }
    expect_role(x, false, ROLE_PLE_GATE, L, 0, "weight", P, h, "hidden_size_per_layer_input, hidden_size");
    expect_role(x, false, ROLE_PLE_PROJ, L, 0, "weight", h, P, "hidden_size, hidden_size_per_layer_input");
    expect_role(x, false, ROLE_PLE_NORM, L, 0, "weight", h, 0, "hidden_size");
}

/* DeepSeek-V4's paths the attention analyses leave out (the compressor, the indexer, hyper-connections): their tensors
 * that attnlab names (the roles of its attention layout) are placed; their shapes are not checked. */
static void dsv4_extras(Lint *x, int L) {
    static const struct { tensor_role r; const char *what; } extra[] = {
        {ROLE_CMP_WKV, "weight"}, {ROLE_IDX_Q_B, "weight"}, {ROLE_IDX_W, "weight"}, {ROLE_HC_ATTN_FN, NULL}};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        char name[256];
        LTensor *t = cfg_role_name(&x->cfg, extra[i].r, L, 0, extra[i].what, name, sizeof name) ? find(x, name) : NULL;
        if (t) t->used = true;
    }
}

/* Every tensor the family's loader expects, walked over the roles of the model's layouts: the
 * embeddings (GPT-2: and positions), the head (absent when tied), the final norm; per layer the
 * norms of its norm layout, its attention layout's tensors, a dense MLP or the experts. */
static void layout_walk(Lint *x) {
    const ModelConfig *c = &x->cfg;
    size_t h = (size_t)c->hidden, V = (size_t)c->vocab;
    const char *hk = cfg_row(c)->keys == KEYS_GPT2 ? "n_embd" : "hidden_size";
    char why_v[48], why_p[48];
    snprintf(why_v, sizeof why_v, "vocab_size x %s", hk);
    snprintf(why_p, sizeof why_p, "n_positions x %s", hk);
    unsigned cond = conditions(x);
    ModelConfig full, wide = *c;                        /* Gemma 4's full layers: their own head dims; */
    cfg_full_view(c, &full);
    wide.intermediate *= 2;                             /* use_double_wide_mlp on the KV-shared layers */
    expect_role(x, false, ROLE_EMBED, 0, 0, "weight", V, h, why_v);
    expect_role(x, false, ROLE_POS_EMBED, 0, 0, "weight", (size_t)c->max_pos, h, why_p);
    expect_role(x, tied(x), ROLE_LM_HEAD, 0, 0, "weight", V, h, why_v);
    expect_norm(x, ROLE_FINAL_NORM, 0, hk);
    if (c->ple_dim > 0) expect_ple(x, -1);
    for (int L = 0; L < c->n_layers; L++) {
        for (tensor_role r = ROLE_NORM_ATTN_IN; r <= ROLE_NORM_FFN_OUT; r++) expect_norm(x, r, L, hk);
        expect_role(x, false, ROLE_LAYER_SCALAR, L, 0, NULL, 1, 0, "one scalar per layer");   /* Gemma 4 */
        if (c->ple_dim > 0) expect_ple(x, L);
        if (c->moe_block_experts > 0) expect_moe_block(x, L);
        if (cfg_layer_linear(c, L)) {
            if (c->lin.layer[L] == 1) layout_linear(x, L);     /* Nemotron-H's MLP blocks (2): no mixer */
        } else
            expect_wants(x, cfg_layer_full_type(c, L) ? &full : c, shape_attn(c->attn), L, cond);
        if (c->attn_sinks) expect_role(x, false, ROLE_SINKS, L, 0, NULL, (size_t)c->n_heads, 0, "num_attention_heads");
        if (c->attn == QKV_DSV4) dsv4_extras(x, L);
        if (c->lin.mla_gate && !cfg_layer_linear(c, L))         /* Kimi-K3: the MLA layers' output gate */
            expect_role(x, false, ROLE_ATTN_GATE, L, 0, "weight", (size_t)c->n_heads * (size_t)c->v_dim, h,
                        "num_attention_heads x v_head_dim, hidden_size (mla_use_output_gate)");
        if (!cfg_layer_mlp(c, L)) continue;                    /* Nemotron-H's mixer blocks */
        if (cfg_moe_layer(c, L)) layout_moe(x, L);
        if (!cfg_moe_layer(c, L) || c->moe.layout == MOE_GRANITE) expect_wants(x, c->double_wide_mlp && cfg_kv_source(c, L) != L ? &wide : c, shape_ffn(c->ffn), L, cond);
    }
}

/* GPT-2's embeddings without the "transformer." prefix (GPT2Model saved bare) when the folder has
 * them: the name in buf. */
static bool bare_embeddings(const Lint *x, char *buf, size_t cap) {
    const RoleName *e = cfg_role(&x->cfg, ROLE_EMBED);
    if (x->cfg.names != NAMES_GPT2 || !e) return false;
    snprintf(buf, cap, "%s.weight", e->name);
    return find(x, buf) != NULL;
}

/* Tensors engines skip on purpose: rotary caches, GPT-2's and GPT-NeoX's attention-mask buffers,
 * DeepSeek's and GLM-4 MoE's multi-token-prediction layers past num_hidden_layers, and those a
 * family keeps apart (its row's mtp_layers: MiMo's model.mtp_layers.N.). */
static bool skipped(const Lint *x, const char *name) {
    if (ends_with(name, "rotary_emb.inv_freq") || ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"))
        return true;

    if (x->cfg.attn == QKV_HEADS && (ends_with(name, ".attention.bias") || ends_with(name, ".attention.masked_bias")))
        return true;
    int L;
    char layer[64];                                 /* "model.layers.%d." */
    snprintf(layer, sizeof layer, "%s%s", x->cfg.prefix, family_layer_pattern(x->cfg.names));
    const cJSON *mtp = cJSON_GetObjectItemCaseSensitive(x->tree, "num_nextn_predict_layers");
    const char *apart = cfg_row(&x->cfg)->mtp_layers;
    size_t np = strlen(x->cfg.prefix);
    if (apart && cJSON_IsNumber(mtp) && mtp->valuedouble > 0 && !strncmp(name, x->cfg.prefix, np) &&
        !strncmp(name + np, apart, strlen(apart)))
        return true;
    return cJSON_IsNumber(mtp) && mtp->valuedouble > 0 &&
           sscanf(name, layer, &L) == 1 && L >= x->cfg.n_layers;
}

/* The aggregates of one kind as "A, B (6 tensors like it: P), ..." (at most 8, then a count);
 * *norm set when a kv_a_layernorm is among them. Caller frees; NULL when there are none (or memory
 * ran out: x->oom). */
static char *agg_list(Lint *x, agg_kind kind, bool *norm) {
    char *s = NULL;
    size_t shown = 0, more = 0;
    const RoleName *kv_norm = cfg_role(&x->cfg, ROLE_KV_A_NORM);
    for (size_t i = 0; i < x->nagg; i++) {
        const Agg *a = &x->agg[i];
        if (a->kind != kind) continue;
        if (norm && kv_norm && strstr(a->pattern, kv_norm->name)) *norm = true;
        if (shown == 8) { more++; continue; }
        char like[224] = "";
        if (a->count > 1) snprintf(like, sizeof like, " (%zu tensor%s like it: %s)", a->count, al_s(a->count), a->pattern);
        char *n = al_asprintf("%s%s%s%s", s ? s : "", s ? ", " : "", a->first, like);
        free(s);
        if (!(s = n)) { x->oom = true; return NULL; }
        shown++;
    }
    if (more) {
        char *n = al_asprintf("%s and %zu more kind%s", s, more, al_s(more));
        free(s);
        if (!(s = n)) x->oom = true;
    }
    return s;
}

/* Loaders' behaviour on a missing and on an unplaced tensor, in one finding each. */
static void emit_aggs(Lint *x) {
    bool norm = false;
    char *miss = agg_list(x, AGG_MISSING, &norm), *unk = agg_list(x, AGG_UNKNOWN, NULL), *skip = agg_list(x, AGG_SKIPPED, NULL);
    if (miss)
        add(x, LINT_ERROR, LT_ALL, LT_HF | LT_SGLANG, "missing %s: transformers and SGLang initialise what is missing "
            "(norms to one, projections at random: a different model), vLLM refuses weights the checkpoint lacks, "
            "llama.cpp's loader needs every tensor%s", miss, norm ? "; without kv_a_layernorm, stock DeepSeek-V3 "
            "code still normalises the latent, with unit weight: export it with the norm present and accounted for" : "");
    if (unk)
        add(x, LINT_ERROR, LT_ALL, LT_HF | LT_SGLANG, "%s: no tensor%s of %s: transformers and SGLang drop them (a "
            "different model if they mattered), vLLM and convert_hf_to_gguf.py stop at a tensor they cannot place",
            unk, strchr(unk, ',') || strstr(unk, "tensors like it") ? "s" : "",
            x->r->hf_class[0] ? x->r->hf_class : x->cfg.model_type);
    if (skip) add(x, LINT_ADVISORY, LT_ALL, 0, "%s: engines skip it", skip);
    for (size_t i = 0; i < x->nagg; i++)
        if (x->agg[i].kind == AGG_SHAPE) {
            const Agg *a = &x->agg[i];
            char like[224] = "";
            if (a->count > 1) snprintf(like, sizeof like, " (%zu tensor%s like it: %s)", a->count, al_s(a->count), a->pattern);
            add(x, LINT_ERROR, LT_ALL, 0, "%s%s: loaders refuse a size mismatch; fix config.json or the tensor",
                a->first, like);
        }
    free(miss);
    free(unk);
    free(skip);
}

/* tie_word_embeddings with an lm_head of its own: engines use the embeddings as the head. */
static void check_tied_head(Lint *x) {
    char emb[160], head[160];
    if (!bare_embeddings(x, emb, sizeof emb)) cfg_role_name(&x->cfg, ROLE_EMBED, 0, 0, "weight", emb, sizeof emb);
    cfg_role_name(&x->cfg, ROLE_LM_HEAD, 0, 0, "weight", head, sizeof head);
    const LTensor *h = find(x, head), *e = find(x, emb);
    if (!x->cfg.tie_embeddings || !h || !e) return;
    size_t n = h->e->end - h->e->begin;
    bool same = n == e->e->end - e->e->begin && h->e->dtype == e->e->dtype &&
                !memcmp(st_data(x->files[h->file], h->e), st_data(x->files[e->file], e->e), n);
    if (same)
        add(x, LINT_ADVISORY, LT_ALL, 0, "%s repeats %s (tie_word_embeddings): engines tie them and skip the copy",
            head, emb);
    else
        add(x, LINT_ERROR, LT_ALL, LT_ALL, "tie_word_embeddings is true but %s differs from %s: engines use the "
            "embeddings as the output head and drop %s; set tie_word_embeddings false", head, emb, head);
}

/* Expected tensors for the families attnlab describes, then the tensors nothing placed. */
static void check_layout(Lint *x) {
    if (!x->cfg_ok || !x->nt) return;
    const ModelConfig *c = &x->cfg;                 /* a config far beyond the folder: say so, do not walk it */
    double want = (double)c->n_layers * (16.0 + 3.0 * (c->moe.n_experts + c->moe.n_shared));
    if (want > 4.0 * (double)x->nt + 1e4) {
        add(x, LINT_ERROR, LT_ALL, 0, "config.json describes about %.0f tensors (num_hidden_layers %d%s) but the "
            "folder holds %zu: check num_hidden_layers and the expert counts", want, c->n_layers,
            c->moe.n_experts ? ", with routed experts" : "", x->nt);
        return;
    }
    if (cfg_row(c)->keys == KEYS_LLAMA2C) return;             /* not a folder family */
    char bare[96], full[160];                        /* GPT2Model saved bare: both load */
    if (bare_embeddings(x, bare, sizeof bare) && cfg_role_name(c, ROLE_EMBED, 0, 0, "weight", full, sizeof full) &&
        !find(x, full))
        x->cfg.prefix[0] = 0;
    model_names alt = family_names_alt(c->names);     /* a text tower under the other prefix: both load */
    if (alt != c->names && cfg_role_name(c, ROLE_EMBED, 0, 0, "weight", full, sizeof full) && !find(x, full)) {
        ModelConfig t = *c;
        t.names = alt;
        snprintf(t.prefix, sizeof t.prefix, "%s", family_prefix(alt));
        if (cfg_role_name(&t, ROLE_EMBED, 0, 0, "weight", full, sizeof full) && find(x, full)) {
            x->cfg.names = alt;
            snprintf(x->cfg.prefix, sizeof x->cfg.prefix, "%s", family_prefix(alt));
        }
    }
    cfg_moe_pick(&x->cfg, lint_has, x);              /* Llama 4's experts fused or one Linear per expert: both load */
    layout_walk(x);
    check_tied_head(x);
    for (size_t i = 0; i < x->nt; i++)             /* a text tower's vision tower and projector: the multimodal class's */
        if (cfg_row(c)->text_config && strncmp(x->t[i].name, x->cfg.prefix, strlen(x->cfg.prefix))) x->t[i].used = true;
    for (size_t i = 0; i < x->nt; i++)
        if (!x->t[i].used) agg_add(x, skipped(x, x->t[i].name) ? AGG_SKIPPED : AGG_UNKNOWN, x->t[i].name, x->t[i].name);
    emit_aggs(x);
}

/* ================================================================ a static FP8 KV cache's scales */

/* Per layer, the KV cache scales found (quant_fused.h: quant_kv_scale), as bits: 1 k, 2 v (a kv_scale
 * both); each one placed (vLLM and SGLang put it on the layer's attention, transformers' compressed-tensors
 * too, and skip what they cannot place with a warning). NULL when there are none. */
static unsigned char *kv_scale_bits(Lint *x) {
    unsigned char *bits = NULL;
    char layer[64];
    snprintf(layer, sizeof layer, "%s%s", x->cfg.prefix, family_layer_pattern(x->cfg.names));
    for (size_t i = 0; i < x->nt; i++) {
        int side = quant_kv_scale(x->t[i].name), L;
        if (!side || sscanf(x->t[i].name, layer, &L) != 1 || L < 0 || L >= x->cfg.n_layers) continue;
        x->t[i].used = true;
        if (side == 'q') continue;
        if (!bits && !(bits = calloc((size_t)x->cfg.n_layers, 1))) { x->oom = true; return NULL; }
        bits[L] |= side == 'k' ? 1 : side == 'v' ? 2 : 3;
    }
    return bits;
}

/* The layers of an attnlab FaRR export (farr_manifest.json) whose cached keys (QK) or values (VO) its
 * cut changed, as bits 1 / 2 per layer into cut (n_layers); false when dir holds none. */
static bool farr_cut_layers(const Lint *x, unsigned char *cut) {
    char *path = al_asprintf("%s/farr_manifest.json", x->dir);
    char *text = path && is_file(path) ? al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL, *t, *l;
    bool any = false;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "truncations")) {
        const char *kind = str_key(t, "kind");
        cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(t, "per_layer")) {
            const cJSON *L = cJSON_GetObjectItemCaseSensitive(l, "layer");
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(l, "params_before");
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(l, "params_after");
            if (!kind || !cJSON_IsNumber(L) || L->valueint < 0 || L->valueint >= x->cfg.n_layers ||
                !cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble >= b->valuedouble) continue;
            cut[L->valueint] |= strcmp(kind, "qk") == 0 ? 1 : 2;
            any = true;
        }
    }
    cJSON_Delete(root);
    free(text);
    free(path);
    al_err_clear();
    return any;
}

/* "3, 5, 7" (the first 8, then a count) of the layers whose bits pass want; their count. */
static int layer_words(const unsigned char *bits, int n, bool (*want)(unsigned), char *buf, size_t cap) {
    int k = 0;
    size_t at = 0;
    buf[0] = 0;
    for (int L = 0; L < n; L++) {
        if (!want(bits[L])) continue;
        if (k < 8 && at < cap) at += (size_t)snprintf(buf + at, cap - at, "%s%d", k ? ", " : "", L);
        else if (k == 8 && at < cap) at += (size_t)snprintf(buf + at, cap - at, ", ...");
        k++;
    }
    return k;
}
static bool kv_half(unsigned b) { return b == 1 || b == 2; }
static bool kv_none(unsigned b) { return b == 0; }
static bool kv_some(unsigned b) { return b != 0; }

/* A static FP8 KV cache's k_scale / v_scale (vLLM's BaseKVCacheMethod): a layer with one of the two
 * (vLLM copies it to the other: the other side's values quantized at the wrong scale), attention layers
 * with neither beside layers that have them (vLLM and SGLang take 1.0 there), and the scales an attnlab
 * FaRR export kept on layers its cut changed (calibrated on the source's keys / values). */
static void check_kv_scales(Lint *x) {
    unsigned char *bits = x->cfg_ok ? kv_scale_bits(x) : NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(x->tree, "quantization_config");
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(q, "kv_cache_scheme");
    if (!bits && cJSON_IsObject(kv) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kv, "dynamic")))
        add(x, LINT_WARNING, LT_VLLM | LT_SGLANG, LT_VLLM | LT_SGLANG, "KV cache scales: quantization_config.kv_cache_scheme "
            "is static but no layer has a k_scale / v_scale: with an FP8 KV cache vLLM and SGLang use 1.0 in every "
            "layer (their default); recalibrate them, or drop the scheme");
    if (!bits) return;
    int n = x->cfg.n_layers, attn = 0;
    char w[160];
    if (layer_words(bits, n, kv_half, w, sizeof w))
        add(x, LINT_WARNING, LT_VLLM | LT_SGLANG, LT_VLLM | LT_SGLANG, "KV cache scales: layer%s %s ha%s only one of "
            "k_scale / v_scale: with an FP8 KV cache vLLM and SGLang use it for both keys and values (an older vLLM "
            "stops at an assertion on a v_scale alone)", strchr(w, ',') ? "s" : "", w, strchr(w, ',') ? "ve" : "s");
    for (int L = 0; L < n; L++) {                       /* layers without softmax attention hold no cache */
        if (cfg_layer_linear(&x->cfg, L)) bits[L] = 3;
        else attn++;
    }
    int k = layer_words(bits, n, kv_none, w, sizeof w);
    if (k && k < attn)
        add(x, LINT_WARNING, LT_VLLM | LT_SGLANG, LT_VLLM | LT_SGLANG, "KV cache scales: layer%s %s ha%s no k_scale / "
            "v_scale while the other attention layers have them: with an FP8 KV cache vLLM and SGLang use 1.0 there "
            "(their default)", k > 1 ? "s" : "", w, k > 1 ? "ve" : "s");
    unsigned char *cut = calloc((size_t)n, 1);         /* MLA caches its latent, which no cut changes */
    if (cut && x->cfg.attn != QKV_MLA && farr_cut_layers(x, cut)) {
        for (int L = 0; L < n; L++) cut[L] = bits[L] && cut[L] && !cfg_layer_linear(&x->cfg, L);
        if ((k = layer_words(cut, n, kv_some, w, sizeof w)))
            add(x, LINT_WARNING, LT_VLLM | LT_SGLANG, LT_VLLM | LT_SGLANG, "KV cache scales: layer%s %s keep%s k_scale / "
                "v_scale calibrated on the source's keys and values, which this FaRR export's cut changed "
                "(farr_manifest.json): with an FP8 KV cache vLLM and SGLang quantize the new ones at the old scale; "
                "drop them (vLLM then takes 1.0) or recalibrate", k > 1 ? "s" : "", w, k > 1 ? "" : "s");
    }
    free(cut);
    free(bits);
}

/* ================================================================ semantics and kernels */

static bool absent(const Lint *x, const char *key) { return !cJSON_GetObjectItemCaseSensitive(x->tree, key); }

/* Keys a deepseek_v3 config leaves to DeepSeek-V3's own defaults (transformers'
 * DeepseekV3Config, which vLLM and SGLang read too) where attnlab reads another value: q_lora_rank
 * (1536: a q latent), first_k_dense_replace (3) and n_routed_experts (256), and on MoE layers
 * the routing keys. */
static void check_ds_defaults(Lint *x) {
    const ModelConfig *c = &x->cfg;
    if (strcmp(c->model_type, "deepseek_v3")) return;
    if (absent(x, "q_lora_rank"))
        add(x, LINT_ERROR, LT_ALL, 0, "config.json has no q_lora_rank: DeepSeek-V3's default 1536 makes engines "
            "build q_a_proj / q_b_proj; write \"q_lora_rank\": null for a plain q_proj");
    if (absent(x, "first_k_dense_replace") || absent(x, "n_routed_experts")) {
        const cJSON *fk = cJSON_GetObjectItemCaseSensitive(x->tree, "first_k_dense_replace");
        int first = cJSON_IsNumber(fk) ? (int)fk->valuedouble : 3, L = 0;
        while (L < c->n_layers && (L >= first) == cfg_moe_layer(c, L)) L++;
        if (L < c->n_layers)
            add(x, LINT_ERROR, LT_ALL, 0, "config.json leaves %s to DeepSeek-V3's defaults (first_k_dense_replace 3, "
                "n_routed_experts 256): engines build layer %d's MLP as %s, attnlab reads %s; write both "
                "(first_k_dense_replace = num_hidden_layers for a dense model)",
                absent(x, "first_k_dense_replace") ? "first_k_dense_replace" : "n_routed_experts", L,
                L >= first ? "a mixture of experts" : "a dense MLP", L >= first ? "a dense MLP" : "experts");
    }
    static const char *const moe_keys[] = {"n_shared_experts", "moe_intermediate_size", "num_experts_per_tok",
                                           "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", NULL};
    char missing[256] = "";
    for (size_t i = 0; c->mlp == MLP_MOE && moe_keys[i]; i++)
        if (absent(x, moe_keys[i]))
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", *missing ? ", " : "", moe_keys[i]);
    if (*missing)
        add(x, LINT_ERROR, LT_ALL, LT_ALL, "config.json leaves %s to DeepSeek-V3's defaults (1, 2048, 8, 2.5, 8, 4, "
            "true) where attnlab reads none: the experts are routed differently; write them", missing);
    if (absent(x, "bos_token_id") || absent(x, "eos_token_id"))
        add(x, LINT_ADVISORY, LT_ALL, 0, "config.json has no bos_token_id / eos_token_id: DeepSeek-V3's defaults 0 "
            "and 1 apply in generation; write the tokenizer's");
}

/* ---- stock engine semantics: the rows of core/model/engines.h (the ones `check` evaluates), engine i
 * being lint target bit 1 << i */

/* The targets (LT_* bits) of the engines for which pred holds. */
static unsigned engines_where(const Lint *x, bool (*pred)(const Lint *, const Engine *)) {
    unsigned t = 0;
    for (int i = 0; i < ENG_N; i++)
        if (pred(x, engine_row(i))) t |= 1u << i;
    return t;
}
static bool eng_drops_bias(const Lint *x, const Engine *e) { (void)x; return !e->attn_bias; }
static bool eng_ignores_interleave(const Lint *x, const Engine *e) { (void)x; return !e->rope_interleave; }
static bool eng_yarn_only(const Lint *x, const Engine *e) { (void)x; return !e->rope_scaling; }
static bool eng_sigmoid_only(const Lint *x, const Engine *e) { (void)x; return !e->scoring_func; }
static bool eng_needs_shared(const Lint *x, const Engine *e) { (void)x; return !e->shared_null; }


/* "vLLM and SGLang": the names of targets t, into buf. */
static const char *target_list(unsigned t, char *buf, size_t cap) {
    int n = 0, k = 0;
    for (int i = 0; i < LINT_NTARGETS; i++) n += (t >> i) & 1;
    buf[0] = 0;
    for (int i = 0; i < LINT_NTARGETS; i++)
        if ((t >> i) & 1)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", k++ ? (k == n ? " and " : ", ") : "", target_names[i]);
    return buf;
}

/* The attnlab manifest's latent_norm ("linear", "calibrated"; "" when none) and latent_norm_eps,
 * the eps its latent norms were built for (*eps NaN when none). */
static void manifest_latent_norm(const Lint *x, char *buf, size_t cap, double *eps) {
    char *path = al_asprintf("%s/attnlab_manifest.json", x->dir);
    char *text = path && is_file(path) ? al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "latent_norm");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "latent_norm_eps");
    snprintf(buf, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
    *eps = cJSON_IsNumber(e) && e->valuedouble > 0 ? e->valuedouble : NAN;
    cJSON_Delete(root);
    free(text);
    free(path);
    al_err_clear();
}

/* An attnlab export whose latent norms were built for eps built (its manifest): the engines that
 * normalise them with another eps compute another model (linear: scaled by sqrt(eps / built), an
 * error; calibrated: slightly, a warning), attnlab's own reading too when rms_norm_eps is not built. */
static void latent_eps_built(Lint *x, bool linear, double built) {
    double rms = x->cfg.norm_eps, common = engine_common_eps();
    unsigned t = engine_latent_eps_off(rms, built);
    if (!t) return;
    char ph[160];
    bool cfg_off = fabs(rms - built) > 1e-9 * built;
    add(x, linear ? LINT_ERROR : LINT_WARNING, t, t, "%s, but this export built its MLA latent norms (kv_a_layernorm, "
        "q_a_layernorm) for eps %g (attnlab_manifest.json latent_norm_eps; rms_norm_eps is %g%s): %s (`check` shows it "
        "in the engine's column); %s so that every engine computes the model built",
        engine_eps_phrase(t, rms, ph, sizeof ph), built, rms, cfg_off ? ", which attnlab reads for them too" : "",
        linear ? "the linear latent norm scales the latents by sqrt(eps / built eps): a different model"
               : "the calibrated norm's output moves by about the eps difference over 2 mean(latent^2), relative",
        fabs(built - common) <= 1e-9 * common ? "write that eps back as rms_norm_eps in config.json"
            : "export the conversion again with `export DIR` (its default builds the latent norms for 1e-06 and writes "
              "rms_norm_eps 1e-06)");
}

/* The MLA latent RMSNorms' eps: engines with a fixed eps of their own (transformers' 1e-6) compute
 * another model than rms_norm_eps describes (core/model/engines.h: engine_latent_eps_off); an attnlab
 * export is judged against the eps its latent norms were built for (latent_eps_built). Elsewhere
 * the latents differ by (eps - 1e-6) / (2 mean(c^2)) relative, small for latents of unit scale (a
 * warning). */
static void check_latent_eps(Lint *x) {
    char how[32];
    double built;
    manifest_latent_norm(x, how, sizeof how, &built);
    bool linear = !strcmp(how, "linear");
    if (how[0] && !isnan(built)) { latent_eps_built(x, linear, built); return; }
    unsigned t = engine_latent_eps_off(x->cfg.norm_eps, x->cfg.norm_eps), rest = ~t & (LT_HF | LT_VLLM | LT_SGLANG);
    if (!t) return;
    char names[64], others[64];
    double fixed = engine_common_eps();
    add(x, linear ? LINT_ERROR : LINT_WARNING, t, t, "rms_norm_eps is %g but %s normalise%s the MLA latents "
        "(kv_a_layernorm, q_a_layernorm) with %g, where %s use rms_norm_eps: %s; write rms_norm_eps %g (attnlab's "
        "TransMLA export does by default) so that every engine computes the same model", x->cfg.norm_eps,
        target_list(t, names, sizeof names), __builtin_popcount(t) > 1 ? "" : "s", fixed,
        target_list(rest, others, sizeof others),
        linear ? "this folder is an attnlab export with the linear latent norm, whose output the eps scales by "
                 "sqrt(rms_norm_eps / 1e-6): a different model (`check` shows it in its transformers column)"
               : "the latents differ by about (rms_norm_eps - 1e-6) / (2 mean(latent^2)) relative, small for latents "
                 "of unit scale", fixed);
}

/* A DeepSeek MoE router written as softmax top-k (attnlab's MoE exports: scoring_func softmax, no shared
 * experts): the engines that score with a sigmoid anyway, or fail on n_shared_experts null. */
static void check_ds_router(Lint *x) {
    const ModelConfig *c = &x->cfg;
    if (c->mlp != MLP_MOE || c->moe.router != ROUTER_DS_V3) return;
    char l1[64], l2[64];
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(x->tree, "n_shared_experts");
    unsigned t = cJSON_IsNull(ns) ? engines_where(x, eng_needs_shared) : 0;
    if (t)
        add(x, LINT_ERROR, t, 0, "n_shared_experts: null: %s build%s shared experts of moe_intermediate_size x "
            "n_shared_experts and fail%s on null (%s build none)", target_list(t, l1, sizeof l1),
            __builtin_popcount(t) > 1 ? "" : "s", __builtin_popcount(t) > 1 ? "" : "s",
            target_list(~t & (LT_HF | LT_VLLM | LT_SGLANG), l2, sizeof l2));
    unsigned s = c->moe.softmax ? engines_where(x, eng_sigmoid_only) : 0;
    if (s)
        add(x, LINT_ERROR, s, s & ~t, "scoring_func 'softmax': %s score%s the DeepSeek-V3 router with a sigmoid whatever "
            "scoring_func says, a different routing (%s compute the softmax top-k the config names%s)",
            target_list(s, l1, sizeof l1), __builtin_popcount(s) > 1 ? "" : "s",
            target_list(~s & (LT_HF | LT_VLLM | LT_SGLANG), l2, sizeof l2),
            c->moe.norm_topk_prob ? ", renormalised" : "");
}

/* DeepSeek keys whose meaning a stock loader does not share, and FlashMLA's shapes. */
static void check_mla(Lint *x) {
    const ModelConfig *c = &x->cfg;
    if (!x->cfg_ok || !cfg_is_mla(c)) return;
    check_ds_defaults(x);
    const cJSON *lln = cJSON_GetObjectItemCaseSensitive(x->tree, "qk_latent_layernorm");
    if (cJSON_IsFalse(lln))
        add(x, LINT_ERROR, LT_ALL, LT_ALL, "config.json sets qk_latent_layernorm: false, a key only attnlab reads: "
            "stock DeepSeek-V3 code ignores it and applies kv_a_layernorm (and q_a_layernorm) to the latent anyway; "
            "re-export for stock semantics (the norm present and accounted for, the key in the manifest only)");
    if (c->kv_lora_rank > 0) check_latent_eps(x);
    check_ds_router(x);
    char l1[64], l2[64];
    unsigned t = engines_where(x, eng_ignores_interleave);
    if (t && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(x->tree, "rope_interleave")))
        add(x, LINT_ERROR, t, t, "rope_interleave: false: %s always rotate interleaved pairs in their DeepSeek "
            "attention (%s read the key); store the RoPE columns interleaved and drop the key", target_list(t, l1, sizeof l1),
            target_list(~t & (LT_HF | LT_VLLM | LT_SGLANG), l2, sizeof l2));
    t = engines_where(x, eng_drops_bias);
    if (t && c->qkv_bias)
        add(x, LINT_ERROR, t, t, "attention_bias: true: %s build DeepSeek attention without biases and skip the "
            "bias tensors (%s add them to q_a_proj, kv_a_proj_with_mqa and o_proj); fold the biases away or expect a "
            "different model there", target_list(t, l1, sizeof l1), target_list(~t & (LT_HF | LT_VLLM | LT_SGLANG), l2,
            sizeof l2));
    rope_scaling_kind rs = c->rope_spec.scaling.kind;
    t = engines_where(x, eng_yarn_only);
    if (t && rs != RS_NONE && rs != RS_YARN)
        add(x, LINT_ERROR, t, t, "rope_scaling '%s': %s run every rope_scaling type but the default as "
            "DeepSeek's YaRN in their DeepSeek attention (%s compute '%s'); only YaRN or no scaling means the same model there",
            rope_scaling_name(&c->rope_spec.scaling), target_list(t, l1, sizeof l1),
            target_list(~t & (LT_HF | LT_VLLM | LT_SGLANG), l2, sizeof l2), rope_scaling_name(&c->rope_spec.scaling));
    if (c->kv_lora_rank == 512 && c->qk_rope_dim == 64)
        add(x, LINT_ADVISORY, LT_VLLM | LT_SGLANG, 0, "MLA shapes kv_lora_rank 512 + qk_rope_head_dim 64 qualify for "
            "FlashMLA (vLLM's and SGLang's fastest MLA decode kernel on Hopper)");
    else
        add(x, LINT_ADVISORY, LT_VLLM | LT_SGLANG, 0, "FlashMLA needs kv_lora_rank 512 and qk_rope_head_dim 64 (this "
            "folder: %d and %d): vLLM and SGLang fall back to their Triton / FlashInfer MLA backends, slower",
            c->kv_lora_rank, c->qk_rope_dim);
}

/* ---- readers that compute another model than the release (s12's run through transformers 5.17) */

/* Qwen3-VL MoE's fused experts as released, gate_up_proj [E, D, 2I] and down_proj [E, I, D] used as x @ W:
 * transformers 5 keeps [E, 2I, D] / [E, D, I] (F.linear) and transposes at load only where the stored shape is
 * not its own (conversion_mapping.py, Transpose(1, 2, check_dims=True)), so a square tensor -- down_proj when
 * I = D, gate_up_proj when D = 2I -- is read untransposed. */
static void check_square_experts(Lint *x) {
    const ModelConfig *c = &x->cfg;
    long h = c->hidden, f = c->moe.expert_ffn > 0 ? c->moe.expert_ffn : c->intermediate;
    int L = 0;
    while (L < c->n_layers && !cfg_moe_layer(c, L)) L++;
    char name[192];
    if (c->mlp != MLP_MOE || c->moe.layout != MOE_QWEN3_VL || (f != h && 2 * f != h) || L == c->n_layers ||
        !cfg_role_name(c, f == h ? ROLE_EXPS_DOWN : ROLE_EXPS_GATE_UP, L, -1, NULL, name, sizeof name))
        return;
    add(x, LINT_ERROR, LT_HF, LT_HF, "moe_intermediate_size %ld with hidden_size %ld makes %s (and its like on every "
        "MoE layer) square: transformers 5 transposes Qwen3-VL MoE's stored experts ([E, D, 2I] and [E, I, D], used as "
        "x @ W) to its own layout only where the shapes differ (conversion_mapping.py: Transpose(1, 2, check_dims=True)), "
        "so it reads this one untransposed: a different model (vLLM and llama.cpp's converter always transpose; the "
        "released checkpoints, I = 768 of D = 2048, are read right everywhere)", f, h, name);
}

/* MiniMax-M2's rotary_dim without partial_rotary_factor (the release's config.json): transformers 5.17's
 * MiniMaxM2Config reads no rotary_dim and rotates every head dim; the release's code, vLLM, SGLang and llama.cpp's
 * converter the first rotary_dim. (Both keys present and disagreeing: config.c refuses the folder.) */
static void check_rotary_dim(Lint *x) {
    const ModelConfig *c = &x->cfg;
    const cJSON *rd = cJSON_GetObjectItemCaseSensitive(x->tree, "rotary_dim");
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(x->tree, "rope_parameters");
    bool factor = cJSON_GetObjectItemCaseSensitive(x->tree, "partial_rotary_factor") ||
                  (cJSON_IsObject(rp) && cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor"));
    int hd = cfg_d_qk(c);
    if (!cfg_row(c)->rotary_dim_key || !cJSON_IsNumber(rd) || factor || rd->valuedouble >= hd) return;
    add(x, LINT_ERROR, LT_HF, LT_HF, "rotary_dim %g without partial_rotary_factor: transformers 5.17's MiniMaxM2Config "
        "reads no rotary_dim and rotates all %d dims of each head, where the release's code (and vLLM, SGLang, llama.cpp's "
        "converter) rotates the first %g: a different model; add \"partial_rotary_factor\": %g (rotary_dim / head_dim) "
        "so that every reader rotates the same dims", rd->valuedouble, hd, rd->valuedouble, rd->valuedouble / hd);
}

/* GLM-5's interleaved RoPE (MLA and indexer): transformers' first GlmMoeDsa rotated both by rotate_half. */
static void check_glm_rope(Lint *x) {
    const ModelConfig *c = &x->cfg;
    if (!cfg_row(c)->indexer_rope_interleave || !cfg_has_indexer(c) || c->rope_spec.layout != ROPE_INTERLEAVED) return;
    add(x, LINT_ADVISORY, LT_HF, 0, "transformers before PR #46372 (June 2026) rotated GLM-5's MLA and indexer RoPE "
        "dims by rotate_half (its first GlmMoeDsa): a different model from the release's; later versions (5.17 checked) "
        "rotate interleaved pairs, as vLLM, SGLang and llama.cpp do and attnlab reads");
}

/* config.json: present, JSON, described (attnlab's families) -- the rest of lint needs it. */
static void read_config(Lint *x) {
    char *path = al_asprintf("%s/config.json", x->dir);
    if (!path) { x->oom = true; return; }
    if (!is_file(path)) {
        add(x, LINT_ERROR, LT_ALL, 0, "no config.json: every engine reads the architecture and dims from it; copy the "
            "source's, or export with attnlab (which writes one)");
        free(path);
        return;
    }
    size_t len = 0;
    char *text = al_read_file_max(path, &len, AL_CAP_CONFIG, "config");
    int rc = !text ? AL_ERR : strlen(text) != len ? al_err("%s: a NUL byte at byte %zu", path, strlen(text))
                                                 : model_config_parse_keep(text, path, &x->cfg, &x->tree);
    if (!x->tree) {
        add(x, LINT_ERROR, LT_ALL, 0, "config.json cannot be read as JSON: %s", al_errmsg());
    } else if (rc == AL_OK) x->cfg_ok = true;
    else {
        const char *mt = str_key(x->tree, "model_type");
        bool ours = known_family(mt) != NULL;   /* every family lint knows is one attnlab describes */
        if (ours) add(x, LINT_ERROR, LT_ALL, 0, "config.json: %s", al_errmsg());
        else
            add(x, LINT_ADVISORY, LT_ALL, 0, "tensor names and shapes are checked for the families lint knows "
                "only; this one's are not (%s)", al_errmsg());
    }
    al_err_clear();
    free(text);
    free(path);
}

/* ================================================================ lint_folder */

static void lint_free(Lint *x) {
    for (size_t i = 0; i < x->nfiles; i++) { st_close(x->files[i]); free(x->fnames[i]); }
    free(x->files);
    free(x->fnames);
    free(x->t);
    free(x->agg);
    cJSON_Delete(x->tree);
}

/* attnlab's own export layouts, which no engine reads (the findings about them follow). */
static void check_own_layouts(Lint *x) {
    if (has_file(x, "config.json")) return;
    if (has_file(x, TPA_MANIFEST))
        add(x, LINT_ERROR, LT_ALL, 0, "an attnlab TPA export (%s): attnlab's own layout, which no engine reads; "
            "`check DIR` evaluates it in attnlab", TPA_MANIFEST);
    if (has_file(x, KQ_MANIFEST))
        add(x, LINT_ERROR, LT_ALL, 0, "KQ-SVD projections (%s), not a model: engines load the source model; the "
            "projections are attnlab's", KQ_MANIFEST);
}

static void lint_dir(Lint *x) {
    check_own_layouts(x);
    read_config(x);
    if (x->tree) check_family(x);
    cJSON *wm = NULL, *index = NULL;
    char *ip = al_asprintf("%s/model.safetensors.index.json", x->dir);
    if (ip && is_file(ip)) open_indexed(x, ip, &wm, &index);
    else if (ip) open_unindexed(x);
    free(ip);
    collect_tensors(x);
    if (wm) check_index_map(x, wm, index);
    cJSON_Delete(index);
    check_shard_meta(x);
    if (x->tree) check_dtypes(x);
    check_kv_scales(x);
    check_layout(x);
    if (x->tree) check_fp4_lists(x);
    check_quant_config(x);
    if (!x->tree || strcmp(x->r->model_type, family_row(FAM_ATTNLAB_MLA)->model_type)) check_mla(x);   /* stock MLA keys */
    if (x->cfg_ok) { check_square_experts(x); check_rotary_dim(x); check_glm_rope(x); }
    check_tokenizer(x);
}

/* llama.cpp's architecture names (llama-arch.cpp) that decoder checkpoints use, beside those the family
 * table's rows name (llamacpp_knows). */
static const char *const GGUF_ARCHS[] = {
    "llama", "llama4", "mistral3", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "phi2", "phi3",
    "phimoe", "gptneox", "gpt2", "olmo", "olmo2", "olmoe", "deepseek", "deepseek2", "falcon", "starcoder", "starcoder2",
    "mpt", "bloom", "stablelm", "internlm2", "minicpm", "command-r", "cohere2", "granite", "granitemoe", "exaone",
    "chatglm", "glm4", "baichuan", "orion", "mamba", "rwkv6", "jamba", "dbrx", "arctic", "nemotron", "gpt-oss", "smollm3",
    NULL};

/* A GGUF file, through the validated reader (core/io/gguf.h): an architecture llama.cpp knows, the
 * metadata keys it requires of every architecture, a vocabulary (llama.cpp refuses a file
 * without one), and the tensors of the architectures attnlab maps (core/model/gguf_arch.h). */
/* deepseek2: the keys llama.cpp's loader requires (b5415 .. b6845, node-llama-cpp 3.8.1 .. 3.14.2:
 * expert_shared_count and expert_weights_scale even for dense models, b5415 also
 * rope.scaling.yarn_log_multiplier; q_lora_rank unless 27 layers)
 * and those builds' query path: without a query latent they build q_proj only for 27 layers. */
static void lint_gguf_ds2(Lint *x, const GgufFile *f) {
    static const char *const req[] = {"attention.layer_norm_rms_epsilon", "attention.kv_lora_rank",
                                      "expert_feed_forward_length", "expert_shared_count", "expert_weights_scale",
                                      "rope.scaling.yarn_log_multiplier", NULL};
    char key[160];
    for (size_t i = 0; req[i]; i++) {
        snprintf(key, sizeof key, "deepseek2.%s", req[i]);
        if (!gguf_kv_find(f, key))
            add(x, LINT_ERROR, LT_LLAMACPP, 0, "no metadata key %s: llama.cpp b5415 .. b6845 (node-llama-cpp 3.8.1 .. 3.14.2) "
                "stop at \"key not found in model\"; convert_hf_to_gguf.py writes it also for dense models", key);
    }
    int64_t q = 0, L = 0;
    if (gguf_get_int(f, "deepseek2.attention.q_lora_rank", &q) != AL_OK) q = 0;
    if (gguf_get_int(f, "deepseek2.block_count", &L) != AL_OK) L = 0;
    al_err_clear();
    if (q == 0 && L != 27)
        add(x, LINT_WARNING, LT_LLAMACPP, 0, "no query latent (q_lora_rank %s): llama.cpp v0.5.0 (node-llama-cpp 3.22) builds "
            "its q_proj, but b6845 and older (node-llama-cpp 3.8.1 .. 3.14.2) do so only for 27-layer models (DeepSeek-V2-Lite) "
            "and stop at \"missing tensor 'blk.0.attn_q_a_norm.weight'\"; convert mla with q-rank for those builds",
            gguf_kv_find(f, "deepseek2.attention.q_lora_rank") ? "0" : "absent");
}

/* Whether llama.cpp knows architecture arch: a name of GGUF_ARCHS or of a family row (its converter's or
 * attnlab's export's), so a family added to the table is known here too. */
static bool llamacpp_knows(const char *arch) {
    for (size_t i = 0; arch && GGUF_ARCHS[i]; i++)
        if (!strcmp(arch, GGUF_ARCHS[i])) return true;
    for (int f = 0; arch && f < FAM_COUNT; f++)
        if ((FAMILY[f].llamacpp_arch && !strcmp(arch, FAMILY[f].llamacpp_arch)) ||
            (FAMILY[f].gguf_arch && !strcmp(arch, FAMILY[f].gguf_arch))) return true;
    return false;
}

static void lint_gguf(Lint *x, const char *path) {
    GgufFile *f = NULL;
    if (gguf_open(path, &f) != AL_OK) {
        add(x, LINT_ERROR, LT_LLAMACPP, 0, "not a readable GGUF: %s", al_errmsg());
        return;
    }
    const char *arch = gguf_get_str(f, "general.architecture");
    if (arch) snprintf(x->r->gguf_arch, sizeof x->r->gguf_arch, "%s", arch);
    x->r->ntensors = gguf_tensor_count(f);
    x->r->nfiles = 1;
    bool known = llamacpp_knows(arch);
    if (!arch) add(x, LINT_ERROR, LT_LLAMACPP, 0, "no general.architecture: llama.cpp cannot pick the model graph");
    else if (!known) add(x, LINT_ERROR, LT_LLAMACPP, 0, "general.architecture '%s' is no llama.cpp architecture", arch);
    const char *keys[] = {"block_count", "context_length", "embedding_length", "attention.head_count"};
    char key[160];
    for (size_t i = 0; arch && i < sizeof keys / sizeof *keys; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, keys[i]);
        if (!gguf_kv_find(f, key)) add(x, LINT_ERROR, LT_LLAMACPP, 0, "no metadata key %s, which llama.cpp requires", key);
    }
    if (arch && !strcmp(arch, "deepseek2")) lint_gguf_ds2(x, f);
    if (gguf_arch_output_required(arch) && !gguf_tensor_find(f, "output.weight"))
        add(x, LINT_WARNING, LT_LLAMACPP, 0, "no output.weight (tied embeddings): llama.cpp b5415 (node-llama-cpp 3.8.1) "
            "requires it for %s and stops at \"missing tensor 'output.weight'\" (newer builds fall back to token_embd for "
            "deepseek2); export it again with this attnlab, which writes the embeddings as output.weight", arch);
    if (!gguf_kv_find(f, "tokenizer.ggml.model") || !gguf_kv_find(f, "tokenizer.ggml.tokens"))
        add(x, LINT_ERROR, LT_LLAMACPP, 0, "no tokenizer.ggml.model / tokenizer.ggml.tokens: llama.cpp loads no model "
            "without its vocabulary");
    bool checked = false;
    if (arch && known && gguf_check_tensors(f, &checked) != AL_OK)
        add(x, LINT_ERROR, LT_LLAMACPP, 0, "%s", al_errmsg());
    else if (arch && known && !checked) {
        char mapped[256];
        gguf_arch_list(mapped, sizeof mapped);
        add(x, LINT_ADVISORY, LT_LLAMACPP, 0, "the tensors of llama.cpp's %s are not checked (attnlab maps %s)", arch, mapped);
    }
    al_err_clear();
    gguf_close(f);
}

/* Errors first, then warnings, then advisories; the order found within each (a stable sort). */
static void sort_findings(LintReport *r) {
    for (size_t i = 1; i < r->n; i++) {
        LintFinding f = r->f[i];
        size_t j = i;
        for (; j > 0 && r->f[j - 1].sev > f.sev; j--) r->f[j] = r->f[j - 1];
        r->f[j] = f;
    }
}

int lint_folder(const char *path, LintReport **out) {
    *out = NULL;
    if (!is_dir(path) && !is_file(path)) return al_err("lint: %s: no such folder or file", path);
    LintReport *r = al_calloc(1, sizeof *r, "lint report");
    if (!r || !(r->path = al_strdup(path))) { free(r); return al_err("out of memory"); }
    Lint x = {.r = r, .dir = path};
    if (is_dir(path)) lint_dir(&x);
    else if (ends_with(path, ".gguf")) lint_gguf(&x, path);
    else
        add(&x, LINT_ERROR, LT_ALL, 0, "%s is a file: engines load a checkpoint folder (config.json, weights, "
            "tokenizer); lint the folder holding it", path);
    lint_free(&x);
    sort_findings(r);
    if (x.oom) { lint_report_free(r); return al_err("lint: out of memory"); }
    *out = r;
    return AL_OK;
}
