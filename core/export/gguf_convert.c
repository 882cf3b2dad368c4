/* gguf_convert.c -- a loaded Model written as GGUF through the family table (core/model/gguf_arch.h):
 * its tensors (transformed as the row says, latents made linear for MLA without latent norms),
 * its metadata and its tokenizer. */
#define _GNU_SOURCE
#include "gguf_convert.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al.h"
#include "ckpt_write.h"
#include "gguf_arch.h"
#include "tokenizer.h"

const char *gguf_arch_for(const Model *m, const char **why) {
    const ModelConfig *c = &m->cfg;
    const GgufArch *a = gguf_arch_row(c);
    *why = NULL;
    if (!a) *why = "no llama.cpp architecture is mapped for this family yet";
    else if (c->attn != cfg_row(c)->attn)         /* attnlab_mla: MLA attention in another family's model */
        *why = "attnlab's own layout (attnlab_mla: MLA attention in the source family's model, `export DIR format "
               "attnlab`): llama.cpp's architecture for the source family has no MLA attention, deepseek2 none of its "
               "other layers";
    else if (c->mlp == MLP_MOE && strcmp(a->arch, "gpt-oss") != 0)
        *why = "mixture-of-experts layers are not converted to GGUF yet (dense layouts and gpt-oss only)";
    else if (cfg_is_mla(c) && c->rope_spec.layout != ROPE_INTERLEAVED)
        *why = "rope_interleave false: llama.cpp's deepseek2 rotates interleaved pairs";
    else if (c->rope_spec.scaling.kind == RS_LONGROPE || c->rope_spec.scaling.kind == RS_OTHER)
        *why = "its rope_scaling type has no GGUF mapping here (none, linear, llama3 and yarn do)";
    else if (c->qk_norm != cfg_row(c)->qk_norm)
        *why = "its q/k norms are not the ones its llama.cpp architecture applies";
    else if (c->block != cfg_row(c)->block && !(c->block == BLOCK_PRE && cfg_row(c)->block != BLOCK_POST))
        *why = "its layers' norm arrangement is not the one its llama.cpp architecture runs";
    return *why ? NULL : a->arch;
}

/* ================================================================ names */

static char *hf_name(const Model *m, const GgufMap *t, int layer) { return gguf_hf_name(&m->cfg, t, layer); }

/* A name of role r's tensor in m (layer ignored for model-level roles; caller frees; NULL: none). */
static char *role_tensor(const Model *m, tensor_role r, int layer) {
    return hf_name(m, &(GgufMap){.role = r, .what = "weight"}, layer);
}

/* Whether t is an MLA latent norm (q_a_layernorm, kv_a_layernorm) and which. */
static bool is_latent_norm(const GgufMap *t, bool *q) {
    *q = t->role == ROLE_Q_A_NORM;
    return t->role == ROLE_Q_A_NORM || t->role == ROLE_KV_A_NORM;
}

/* ================================================================ tensor fills */

typedef struct {
    Model *m;
    char hf[256];
    gguf_xf xf;
    double s;                 /* latent scale (XF_LAT_*) or the constant of a generated norm */
    bool constant;            /* a generated tensor: every value s */
    bool fp4;                 /* gpt-oss's MXFP4 experts as released ("<hf>_blocks" / "_scales", W x) */
} Fill;


static bool xf_experts(gguf_xf xf) { return xf == XF_EXP_GATE || xf == XF_EXP_UP || xf == XF_EXP_DOWN; }

/* gpt-oss's MXFP4 experts as released: gate_up (E 2I rows [gate ; up] interleaved, D cols) or down
 * (E D rows, I cols), W x per expert: decoded (exact), gate / up rows picked; ggml's layout as is. */
static int fill_experts_fp4(Fill *f, float *dst, size_t numel) {
    size_t E;
    dt_fp4 q;
    if (store_fp4_experts(f->m->store, f->hf, &E, &q) != AL_OK) return AL_ERR;
    bool down = f->xf == XF_EXP_DOWN;
    size_t n = q.rows * q.cols, R = q.rows / E, C = q.cols, odd = f->xf == XF_EXP_UP;
    if (n != numel * (down ? 1 : 2)) return al_err("internal: %s has %zu value%s for %zu", f->hf, n, al_s(n), numel);
    if (down) { dt_fp4_dequant(&q, 0, q.rows, 0, C, dst, C); return AL_OK; }
    float *src = al_malloc3(n, 1, sizeof *src, "experts");
    if (!src) return AL_ERR;
    dt_fp4_dequant(&q, 0, q.rows, 0, C, src, C);
    for (size_t x = 0; x < E; x++)
        for (size_t i = 0; i < R / 2; i++) memcpy(dst + (x * (R / 2) + i) * C, src + (x * R + 2 * i + odd) * C, C * sizeof *dst);
    free(src);
    return AL_OK;
}

/* gpt-oss's MXFP4 experts kept as ggml's MXFP4: each block of the rows fill_experts_fp4 picks repacked as
 * stored (gguf.h: gg_mxfp4_from_hf), its codes and E8M0 byte bit for bit, as llama.cpp's converter does. */
static int fill_experts_mx(void *ud, uint8_t *dst, size_t nbytes) {
    Fill *f = ud;
    size_t E;
    dt_fp4 q;
    if (store_fp4_experts(f->m->store, f->hf, &E, &q) != AL_OK) return AL_ERR;
    bool down = f->xf == XF_EXP_DOWN;
    size_t R = q.rows / (E ? E : 1), G = q.cols / 32, n = down ? R : R / 2, odd = f->xf == XF_EXP_UP;
    if (q.enc != DT_FP4_MXFP4 || E * n * G * GG_MXFP4_BLOCK != nbytes)
        return al_err("internal: %s has %zu MXFP4 bytes for %zu", f->hf, E * n * G * GG_MXFP4_BLOCK, nbytes);
    for (size_t x = 0; x < E; x++)
        for (size_t i = 0; i < n; i++) {
            size_t r = x * R + (down ? i : 2 * i + odd);
            for (size_t g = 0; g < G; g++, dst += GG_MXFP4_BLOCK)
                gg_mxfp4_from_hf(q.scale[r * G + g], q.codes + (r * G + g) * 16, dst);
        }
    return AL_OK;
}

/* gpt-oss's fused experts (gguf_arch.h: XF_EXP_*): [E, a, b] weights (x @ W) or [E, a] biases. */
static int fill_experts(Fill *f, float *dst, size_t numel) {
    const st_entry *e;
    const st_file *sf;
    if (f->fp4) return fill_experts_fp4(f, dst, numel);
    if (store_entry(f->m->store, f->hf, &e, &sf) != AL_OK) return AL_ERR;
    size_t E = e->shape[0], a = e->shape[1], b = e->ndim == 3 ? e->shape[2] : 0, n = E * a * (b ? b : 1);
    size_t odd = f->xf == XF_EXP_UP, I = b ? b / 2 : a / 2;
    if (n != numel * (f->xf == XF_EXP_DOWN ? 1 : 2)) return al_err("internal: %s has %zu value%s for %zu", f->hf, n, al_s(n), numel);
    float *src = al_malloc3(n, 1, sizeof *src, "experts");
    if (!src) return AL_ERR;
    if (dt_to_f32(e->dtype, st_data(sf, e), n, src) != AL_OK) {
        free(src);
        return al_err("tensor '%s': %s experts are not read here (F32, BF16, F16)", f->hf, dt_name(e->dtype));
    }
    for (size_t x = 0; x < E; x++) {
        if (!b)                                            /* gate / up bias: even / odd columns */
            for (size_t i = 0; i < I; i++) dst[x * I + i] = src[x * a + 2 * i + odd];
        else if (f->xf == XF_EXP_DOWN)                    /* (I, D) -> (D, I) */
            for (size_t i = 0; i < a; i++)
                for (size_t d = 0; d < b; d++) dst[(x * b + d) * a + i] = src[(x * a + i) * b + d];
        else                                               /* (D, 2I) -> (I, D), even / odd columns */
            for (size_t d = 0; d < a; d++)
                for (size_t i = 0; i < I; i++) dst[(x * I + i) * a + d] = src[(x * a + d) * b + 2 * i + odd];
    }
    free(src);
    return AL_OK;
}

static int fill_tensor(void *ud, float *dst, size_t numel) {
    Fill *f = ud;
    if (f->constant) {
        for (size_t i = 0; i < numel; i++) dst[i] = (float)f->s;
        return AL_OK;
    }
    if (xf_experts(f->xf)) return fill_experts(f, dst, numel);
    const ModelConfig *c = &f->m->cfg;
    Mat *w;
    if (store_read(f->m->store, f->hf, &w) != AL_OK) return AL_ERR;
    int rc = AL_OK;
    size_t R = w->rows, C = w->cols;
    bool kvb = f->xf == XF_K_B || f->xf == XF_V_B;
    size_t want = kvb ? (size_t)c->n_heads * (size_t)(c->qk_nope_dim + c->v_dim) * (size_t)c->kv_lora_rank : numel;
    if (R * C != want) rc = al_err("internal: %s has %zu value%s, GGUF expects %zu", f->hf, R * C, al_s(R * C), want);
    else if (f->xf == XF_PERM_Q || f->xf == XF_PERM_K) {
        size_t heads = (size_t)(f->xf == XF_PERM_Q ? c->n_heads : c->n_kv_heads);
        if (c->rope_spec.layout == ROPE_HALF) gguf_permute_rows(w->data, dst, heads, R == 1 ? C : R, R == 1 ? 1 : C, false);
        else memcpy(dst, w->data, numel * sizeof *dst);
    } else if (f->xf == XF_QKV_HEADS) {
        gguf_qkv_heads(w->data, dst, (size_t)c->n_heads, R == 1 ? C : R, R == 1 ? 1 : C, false);
    } else if (f->xf == XF_PLUS1) {
        for (size_t i = 0; i < numel; i++) dst[i] = w->data[i] + 1.0f;
    } else if (f->xf == XF_T) {
        for (size_t i = 0; i < R; i++)
            for (size_t j = 0; j < C; j++) dst[j * R + i] = w->data[i * C + j];
    } else if (f->xf == XF_K_B || f->xf == XF_V_B) {
        gguf_kv_b_split(c, w->data, dst, f->xf == XF_K_B);
    } else {
        memcpy(dst, w->data, numel * sizeof *dst);
        size_t lat = f->xf == XF_LAT_KV ? (size_t)c->kv_lora_rank : f->xf == XF_LAT_Q ? R : 0;
        if (f->s != 1.0)
            for (size_t i = 0; i < lat * C; i++) dst[i] = (float)(dst[i] * f->s);
    }
    mat_free(w);
    return rc;
}

/* ================================================================ latent scaling (MLA) */

/* max |x|^2 of the RMS-normalised attention input and |W_latent|_F^2: the bound of the latent's
 * mean square is hidden max(g^2) |W|_F^2 / r. Returns s with s^2 bound = 1e-6 eps. */
static int latent_scale(Model *m, int layer, const GgufMap *t, size_t rows, double *s) {
    char *nn = role_tensor(m, ROLE_NORM_ATTN_IN, layer), *wn = hf_name(m, t, layer);
    Mat *g = NULL, *w = NULL;
    int rc = nn && wn ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = store_read(m->store, nn, &g);
    if (rc == AL_OK) rc = store_read_rows(m->store, wn, 0, rows, &w);
    if (rc == AL_OK) {
        double gmax = 0, fro = 0;
        for (size_t i = 0; i < g->rows * g->cols; i++) gmax = fmax(gmax, (double)g->data[i] * g->data[i]);
        for (size_t i = 0; i < w->rows * w->cols; i++) fro += (double)w->data[i] * w->data[i];
        double bound = (double)m->cfg.hidden * gmax * fro / (double)rows;
        *s = bound > 0 ? sqrt(1e-6 * m->cfg.norm_eps / bound) : 1.0;
    }
    mat_free(g);
    mat_free(w);
    free(nn);
    free(wn);
    return rc;
}


/* ================================================================ tokenizer metadata */

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct {
    char **tok;
    size_t *len;
    float *score;
    int32_t *type;
    size_t n;
} Vocab;

static void vocab_free(Vocab *v) {
    for (size_t i = 0; v->tok && i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->len);
    free(v->score);
    free(v->type);
}

static int vocab_alloc(Vocab *v, size_t n) {
    v->n = n;
    v->tok = al_calloc(n, sizeof *v->tok, "GGUF tokens");
    v->len = al_calloc(n, sizeof *v->len, "GGUF tokens");
    v->score = al_calloc(n, sizeof *v->score, "GGUF scores");
    v->type = al_calloc(n, sizeof *v->type, "GGUF token types");
    return v->tok && v->len && v->score && v->type ? AL_OK : AL_ERR;
}

/* s with every ' ' as U+2581 (llama.cpp's SentencePiece pieces). */
static char *escape_spaces(const char *s, size_t *len) {
    size_t n = 0;
    for (const char *p = s; *p; p++) n += *p == ' ' ? 3 : 1;
    char *d = al_malloc(n + 1, "a token"), *q = d;
    if (!d) return NULL;
    for (const char *p = s; *p; p++)
        if (*p == ' ') { memcpy(q, "\xe2\x96\x81", 3); q += 3; } else *q++ = *p;
    *q = 0;
    *len = n;
    return d;
}

/* The type of piece id of a llama2.c / SentencePiece vocabulary (convert-llama2c's rules). */
static int spm_type(int id, const char *p, int unk, int bos, int eos) {
    unsigned b;
    char tail;
    if (id == unk) return TT_UNKNOWN;
    if (id == bos || id == eos || !*p) return TT_CONTROL;
    if (sscanf(p, "<0x%2X%c", &b, &tail) == 2 && tail == '>' && strlen(p) == 6) return TT_BYTE;
    return TT_NORMAL;
}

/* Tokens of t padded with [PADi] (UNUSED) to n; pieces as the tokenizer stores them, or escaped. */
static int vocab_fill(Vocab *v, const Tokenizer *t, size_t n, bool spm) {
    if (vocab_alloc(v, n)) return AL_ERR;
    bool l2c = tok_type(t) == TOK_LLAMA2C;
    for (size_t i = 0; i < n; i++) {
        const char *p = tok_piece(t, (int)i);
        char pad[32];
        if (!p) snprintf(pad, sizeof pad, "[PAD%zu]", i);
        if (l2c && i <= 2) p = i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>";
        v->tok[i] = spm && p ? escape_spaces(p, &v->len[i]) : al_strdup(p ? p : pad);
        if (!v->tok[i]) return AL_ERR;
        if (!spm || !p) v->len[i] = strlen(v->tok[i]);
        float sc = tok_score(t, (int)i);
        v->score[i] = isnan(sc) ? -(float)i : sc;
        v->type[i] = !p ? TT_UNUSED : spm ? spm_type((int)i, p, l2c ? 0 : -1, tok_bos(t), tok_eos(t)) : TT_NORMAL;
    }
    return AL_OK;
}

/* tokenizer.json: added tokens marked CONTROL (special) or USER_DEFINED; merges "a b". */
static int json_extras(GgufWriter *w, const char *path, Vocab *v, bool bytelevel) {
    size_t len;
    char *text = al_read_file_max(path, &len, (size_t)1 << 30, "tokenizer");
    if (!text) return AL_ERR;
    cJSON *root = cJSON_ParseWithLength(text, len);
    int rc = root ? AL_OK : al_err("%s: not valid JSON", path);
    cJSON *added = root ? cJSON_GetObjectItemCaseSensitive(root, "added_tokens") : NULL, *a;
    cJSON_ArrayForEach(a, added) {
        cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        if (cJSON_IsNumber(id) && id->valueint >= 0 && (size_t)id->valueint < v->n)
            v->type[id->valueint] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "special")) ? TT_CONTROL : TT_USER;
    }
    cJSON *model = root ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    size_t nm = (size_t)cJSON_GetArraySize(merges), i = 0;
    char **ms = al_calloc(nm ? nm : 1, sizeof *ms, "GGUF merges");
    if (!ms) rc = AL_ERR;
    cJSON *mg;
    cJSON_ArrayForEach(mg, merges) {
        if (rc) break;
        if (cJSON_IsString(mg)) ms[i] = al_strdup(mg->valuestring);
        else if (cJSON_GetArraySize(mg) == 2 && cJSON_IsString(cJSON_GetArrayItem(mg, 0)) && cJSON_IsString(cJSON_GetArrayItem(mg, 1)))
            ms[i] = al_asprintf("%s %s", cJSON_GetArrayItem(mg, 0)->valuestring, cJSON_GetArrayItem(mg, 1)->valuestring);
        else rc = al_err("%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", path, i);
        if (!rc && !ms[i]) rc = AL_ERR;
        i++;
    }
    if (!rc && bytelevel) rc = gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)ms, NULL, nm);
    for (size_t k = 0; k < nm; k++) free(ms[k]);
    free(ms);
    cJSON_Delete(root);
    free(text);
    return rc;
}

/* llama.cpp's pre-tokenizer name for a byte-level tokenizer.json, from its split pattern. */
static const char *bpe_pre(const char *path) {
    size_t len;
    char *text = al_read_file_max(path, &len, (size_t)1 << 30, "tokenizer");
    const char *pre = "gpt-2";
    if (text && strstr(text, "\\\\p{N}{1,3}")) pre = "llama-bpe";
    else if (text && strstr(text, "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+")) pre = "qwen2";
    free(text);
    al_err_clear();
    return pre;
}

static int tok_ids(GgufWriter *w, const Model *m, const Tokenizer *t) {
    int bos = tok_bos(t), eos = tok_eos(t), ids[4];
    if (model_config_ids(m, "bos_token_id", ids, 0, 1) == 1) bos = ids[0];
    if (model_config_ids(m, "eos_token_id", ids, 0, 1) == 1) eos = ids[0];
    int rc = AL_OK;
    if (bos >= 0) rc = gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (!rc && eos >= 0) rc = gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (!rc && tok_type(t) == TOK_LLAMA2C) rc = gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!rc) rc = gguf_set_bool(w, "tokenizer.ggml.add_bos_token", tok_bos(t) >= 0);
    if (!rc) rc = gguf_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    return rc;
}

/* No tokenizer beside the model: a BPE vocabulary of placeholder pieces "[i]" without merges (the
 * config's BOS / EOS as <s> / </s>, CONTROL) so that llama.cpp loads the file and runs ids; text it
 * cannot tokenize is dropped, never an error (BPE skips unknown bytes, SentencePiece would not). */
static int kv_synthetic_vocab(GgufWriter *w, const Model *m) {
    int bos = -1, eos = -1;
    model_config_ids(m, "bos_token_id", &bos, 0, 1);
    model_config_ids(m, "eos_token_id", &eos, 0, 1);
    Vocab v = {0};
    int rc = vocab_alloc(&v, (size_t)m->cfg.vocab);
    for (size_t i = 0; rc == AL_OK && i < v.n; i++) {
        bool b = (int)i == bos, e = (int)i == eos;
        v.tok[i] = b ? al_strdup("<s>") : e ? al_strdup("</s>") : al_asprintf("[%zu]", i);
        if (!v.tok[i]) rc = AL_ERR;
        else v.len[i] = strlen(v.tok[i]);
        v.type[i] = b || e ? TT_CONTROL : TT_NORMAL;
    }
    if (!rc) rc = gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!rc) rc = gguf_set_str(w, "tokenizer.ggml.pre", "default");
    if (!rc) rc = gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, v.len, v.n);
    if (!rc) rc = gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, v.type, v.n);
    if (!rc) rc = gguf_set_arr_str(w, "tokenizer.ggml.merges", NULL, NULL, 0);
    if (!rc && bos >= 0) rc = gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (!rc && eos >= 0) rc = gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (!rc) rc = gguf_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    vocab_free(&v);
    return rc;
}

/* One tokenizer.ggml.* key of a source GGUF, copied as it is (scalars and arrays). */
static int kv_copy_one(GgufWriter *w, const GgufKV *kv) {
    if (kv->type == GGUF_STR) return gguf_set_str(w, kv->key, kv->str);
    if (kv->type == GGUF_BOOL) return gguf_set_bool(w, kv->key, kv->v.u != 0);
    if (kv->type == GGUF_U32) return gguf_set_u32(w, kv->key, (uint32_t)kv->v.u);
    if (kv->type == GGUF_I32) return gguf_set_i32(w, kv->key, (int32_t)kv->v.i);
    if (kv->type == GGUF_F32) return gguf_set_f32(w, kv->key, (float)kv->v.f);
    if (kv->type != GGUF_ARR) return al_err("%s: type %d not copied", kv->key, (int)kv->type);
    if (kv->arr_type != GGUF_STR) return gguf_set_arr(w, kv->key, kv->arr_type, kv->arr, kv->n);
    const char **sv = al_calloc(kv->n ? kv->n : 1, sizeof *sv, "GGUF strings");
    size_t *lv = al_calloc(kv->n ? kv->n : 1, sizeof *lv, "GGUF strings");
    int rc = sv && lv ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < kv->n; i++) gguf_arr_str(kv, i, &sv[i], &lv[i]);
    if (rc == AL_OK) rc = gguf_set_arr_str(w, kv->key, sv, lv, kv->n);
    free(sv);
    free(lv);
    return rc;
}

/* A GGUF source's own tokenizer (tokenizer.h: tok_embedded): its tokenizer.ggml.* keys copied. */
static int kv_copy_tokenizer(GgufWriter *w, const char *path, const char **kind) {
    GgufFile *f = NULL;
    int rc = gguf_open(path, &f);
    for (size_t i = 0; rc == AL_OK && i < gguf_kv_count(f); i++)
        if (strncmp(gguf_kv_at(f, i)->key, "tokenizer.ggml.", 15) == 0) rc = kv_copy_one(w, gguf_kv_at(f, i));
    const char *model = f ? gguf_get_str(f, "tokenizer.ggml.model") : NULL;
    *kind = model && strcmp(model, "llama") == 0 ? "llama" : "gpt2";
    gguf_close(f);
    return rc;
}

/* The tokenizer beside the model as llama.cpp's tokenizer.ggml.* keys; *kind what was written. */
static int kv_tokenizer(GgufWriter *w, const Model *m, const char **kind) {
    char *path = NULL;
    Tokenizer *t = NULL;
    if (tok_find(m->path, &path) == AL_OK && tok_open(path, &t) == AL_OK && tok_embedded(t)) {
        int rc = kv_copy_tokenizer(w, path, kind);
        tok_free(t);
        free(path);
        return rc;
    }
    tok_free(t);
    t = NULL;
    free(path);
    path = NULL;
    al_err_clear();
    if (tok_find(m->path, &path) != AL_OK || tok_open(path, &t) != AL_OK) {
        al_err_clear();
        free(path);
        *kind = "synthetic";
        return kv_synthetic_vocab(w, m);
    }
    bool bytelevel = tok_type(t) == TOK_BYTELEVEL, spm = !bytelevel;
    size_t n = (size_t)m->cfg.vocab;             /* llama.cpp sizes token_embd by the token list */
    Vocab v = {0};
    *kind = bytelevel ? "gpt2" : "llama";
    int rc = gguf_set_str(w, "tokenizer.ggml.model", *kind);
    if (!rc) rc = gguf_set_str(w, "tokenizer.ggml.pre", bytelevel ? bpe_pre(path) : "default");
    if (!rc) rc = vocab_fill(&v, t, n, spm);
    if (!rc && tok_type(t) != TOK_LLAMA2C) rc = json_extras(w, path, &v, bytelevel);
    if (!rc) rc = gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, v.len, v.n);
    if (!rc && spm) rc = gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, v.score, v.n);
    if (!rc) rc = gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, v.type, v.n);
    if (!rc) rc = tok_ids(w, m, t);
    vocab_free(&v);
    tok_free(t);
    free(path);
    return rc;
}

/* ================================================================ tensors */

typedef struct {
    GgufWriter *w;
    Model *m;
    const GgufArch *a;
    const GgufExportOpts *o;
    GgufExportReport *rep;
    bool *used;               /* per store tensor (store_name_at order) */
    bool linearize;           /* MLA without latent norms: scale the latents (see the header) */
    double s_q, s_kv;         /* this layer's latent scales */
} Ctx;

static bool is_norm(const char *gg) {
    size_t n = strlen(gg);
    return n > 12 && strcmp(gg + n - 12, "_norm.weight") == 0;
}

static void mark_used(Ctx *x, const char *name) {
    size_t lo = 0, hi = store_count(x->m->store);
    while (lo < hi) {                                  /* names are sorted */
        size_t mid = (lo + hi) / 2;
        int c = strcmp(store_name_at(x->m->store, mid), name);
        if (c == 0) { x->used[mid] = true; return; }
        if (c < 0) lo = mid + 1; else hi = mid;
    }
}

/* The storage type of a tensor: 1-D, biases, norms and scaled latents F32; Q8_0 rows not whole blocks F16. */
static gg_type pick_type(Ctx *x, const char *gg, int ndim, const uint64_t *ne, gguf_xf xf) {
    size_t n = strlen(gg);                 /* biases F32 (gpt-oss's experts' are 2-D: ggml adds only F32) */
    bool bias = n > 5 && strcmp(gg + n - 5, ".bias") == 0;
    if (ndim == 1 || bias || is_norm(gg) || (x->linearize && (xf == XF_LAT_KV || xf == XF_LAT_Q))) return GG_F32;
    if (x->o->dtype == GG_Q8_0 && ne[0] % GG_QK8_0) { x->rep->f16_fallback++; return GG_F16; }
    return x->o->dtype;
}

static int add_fill(Ctx *x, const char *gg, int ndim, const uint64_t *ne, gg_type type, Fill *f) {
    Fill *ud = al_malloc(sizeof *ud, "a GGUF tensor");
    if (!ud) return AL_ERR;
    *ud = *f;
    x->rep->tensors++;
    return gguf_add_tensor(x->w, gg, type, ndim, ne, fill_tensor, ud);
}

/* The latent norm llama.cpp will apply, made linear: weight sqrt(eps) / s. */
static int add_linear_norm(Ctx *x, const char *gg, size_t n, double s) {
    uint64_t ne[1] = {n};
    Fill f = {.m = x->m, .constant = true, .s = sqrt(x->m->cfg.norm_eps) / s};
    return add_fill(x, gg, 1, ne, GG_F32, &f);
}

/* The output head of a tied model where llama.cpp b5415 requires one: the embeddings' name. */
static char *tied_output(Ctx *x, const GgufMap *t, int layer) {
    if (layer >= 0 || t->role != ROLE_LM_HEAD || !gguf_arch_output_required(x->a->arch)) return NULL;
    char *emb = role_tensor(x->m, ROLE_EMBED, -1);
    if (emb && !store_has(x->m->store, emb)) { free(emb); emb = NULL; }
    return emb;
}

/* gpt-oss's MXFP4 experts as released (store_fp4_experts): ne (C, R / 2, E) for gate / up, (C, R, E) for
 * down, R and C each expert's stored rows and columns; the codes and scales marked used. */
static int add_experts_fp4(Ctx *x, const GgufMap *t, const char *hf, const char *gg) {
    size_t E = 0;
    dt_fp4 q;
    if (store_fp4_experts(x->m->store, hf, &E, &q) != AL_OK) return AL_ERR;
    if (q.enc == DT_FP4_NONE || !E)
        return al_err("%s: no tensor %s (nor its MXFP4 _blocks), which llama.cpp's %s needs as %s", x->m->name, hf,
                      x->a->arch, gg);
    char n[300];
    snprintf(n, sizeof n, "%s_blocks", hf);
    mark_used(x, n);
    snprintf(n, sizeof n, "%s_scales", hf);
    mark_used(x, n);
    size_t R = q.rows / E;
    uint64_t ne[3] = {q.cols, t->xf == XF_EXP_DOWN ? R : R / 2, E};
    Fill f = {.m = x->m, .xf = t->xf, .s = 1.0, .fp4 = true};
    snprintf(f.hf, sizeof f.hf, "%s", hf);     /* kept MXFP4 (bit for bit), as the converter does, but in an F32 file */
    bool keep = x->o->dtype != GG_F32 && q.enc == DT_FP4_MXFP4 && q.cols % 32 == 0;
    *(keep ? &x->rep->mxfp4_kept : &x->rep->mxfp4_f32) += 1;
    if (!keep) return add_fill(x, gg, 3, ne, pick_type(x, gg, 3, ne, t->xf), &f);
    Fill *ud = al_malloc(sizeof *ud, "a GGUF tensor");
    if (!ud) return AL_ERR;
    *ud = f;
    x->rep->tensors++;
    return gguf_add_tensor_raw(x->w, gg, GG_MXFP4, 3, ne, fill_experts_mx, ud);
}

/* A tensor of gpt-oss's fused experts: ne (a, b / 2, E) for gate / up, (a, b, E) for down (stored
 * [E, a, b]), (a / 2, E) for a gate / up bias (stored [E, a]). */
static int add_experts(Ctx *x, const GgufMap *t, const char *hf, const char *gg) {
    const st_entry *e = NULL;
    size_t qE;
    dt_fp4 q;
    if (store_fp4_experts(x->m->store, hf, &qE, &q) != AL_OK) return AL_ERR;
    if (q.enc != DT_FP4_NONE) return add_experts_fp4(x, t, hf, gg);
    if (store_entry(x->m->store, hf, &e, NULL) != AL_OK) return AL_ERR;
    bool w = e->ndim == 3;
    if (!w && (e->ndim != 2 || t->xf == XF_EXP_DOWN))
        return al_err("%s: %s has %d dim%s: expected [experts, rows, cols]", x->m->name, hf, e->ndim, al_s(e->ndim));
    uint64_t E = e->shape[0], a = e->shape[1], b = w ? e->shape[2] : 0;
    uint64_t ne[3] = {w ? a : a / 2, t->xf == XF_EXP_DOWN ? b : b / 2, E};
    if (!w) ne[1] = E;
    Fill f = {.m = x->m, .xf = t->xf, .s = 1.0};
    snprintf(f.hf, sizeof f.hf, "%s", hf);
    int ndim = w ? 3 : 2;
    return add_fill(x, gg, ndim, ne, pick_type(x, gg, ndim, ne, t->xf), &f);
}

static int add_one(Ctx *x, const GgufMap *t, int layer) {
    const ModelConfig *c = &x->m->cfg;
    char *hf = hf_name(x->m, t, layer), *gg = gguf_layer_name(t, layer);
    int rc = hf && gg ? AL_OK : AL_ERR;
    if (rc == AL_OK && !store_has(x->m->store, hf)) {
        char *emb = tied_output(x, t, layer);
        if (emb) { free(hf); hf = emb; x->rep->tied_output = true; }
    }
    bool q, latnorm = is_latent_norm(t, &q), has = rc == AL_OK && store_has(x->m->store, hf);
    if (has) mark_used(x, hf);
    if (rc == AL_OK && latnorm && x->linearize) {
        if (!q || c->q_lora_rank > 0)
            rc = add_linear_norm(x, gg, (size_t)(q ? c->q_lora_rank : c->kv_lora_rank), q ? x->s_q : x->s_kv);
    } else if (rc == AL_OK && !has && xf_experts(t->xf)) {
        rc = add_experts_fp4(x, t, hf, gg);
    } else if (rc == AL_OK && !has) {
        if (!t->opt) rc = al_err("%s: no tensor %s, which llama.cpp's %s needs as %s", x->m->name, hf, x->a->arch, gg);
    } else if (rc == AL_OK && xf_experts(t->xf)) {
        rc = add_experts(x, t, hf, gg);
    } else if (rc == AL_OK) {
        size_t R, C;
        rc = store_shape2(x->m->store, hf, &R, &C);
        const st_entry *e = NULL;
        if (!rc) rc = store_entry(x->m->store, hf, &e, NULL);
        Fill f = {.m = x->m, .xf = t->xf, .s = 1.0};
        snprintf(f.hf, sizeof f.hf, "%s", hf);
        int ndim = e && e->ndim == 1 ? 1 : 2;
        uint64_t ne[3] = {C, R, 1};
        if (t->xf == XF_T) { ne[0] = R; ne[1] = C; }
        size_t H = (size_t)c->n_heads, r = (size_t)c->kv_lora_rank;
        if (t->xf == XF_K_B) { ndim = 3; ne[0] = (uint64_t)c->qk_nope_dim; ne[1] = r; ne[2] = H; }
        if (t->xf == XF_V_B) { ndim = 3; ne[0] = r; ne[1] = (uint64_t)c->v_dim; ne[2] = H; }
        if (!rc && x->linearize && (t->xf == XF_LAT_KV || t->xf == XF_LAT_Q)) {
            double *s = t->xf == XF_LAT_KV ? &x->s_kv : &x->s_q;
            rc = latent_scale(x->m, layer, t, t->xf == XF_LAT_KV ? r : R, s);
            f.s = *s;
        }
        if (!rc) rc = add_fill(x, gg, ndim, ne, pick_type(x, gg, ndim, ne, t->xf), &f);
    }
    free(hf);
    free(gg);
    return rc;
}

/* llama3 rope scaling as llama.cpp's rope_freqs tensor (LlamaModel.generate_extra_tensors). */
static int add_rope_freqs(Ctx *x) {
    const ModelConfig *c = &x->m->cfg;
    const RopeScaling *s = &c->rope_spec.scaling;
    size_t n = (size_t)c->qk_rope_dim / 2;
    float *f = al_malloc3(n, 1, sizeof *f, "rope_freqs");
    if (!f) return AL_ERR;
    double lo = s->orig_max_pos / s->low_freq_factor, hi = s->orig_max_pos / s->high_freq_factor;
    for (size_t i = 0; i < n; i++) {
        double freq = 1.0 / pow(c->rope_theta, 2.0 * (double)i / (double)c->qk_rope_dim), wl = 2 * M_PI / freq;
        double sm = (s->orig_max_pos / wl - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
        f[i] = (float)(wl < hi ? 1.0 : wl > lo ? s->factor : 1.0 / ((1 - sm) / s->factor + sm));
    }
    uint64_t ne[1] = {n};
    x->rep->tensors++;
    return gguf_add_tensor_f32(x->w, "rope_freqs.weight", GG_F32, 1, ne, f);
}

/* Whether a tensor name is of an MLA latent norm (any layer). */
static bool latent_norm_name(const ModelConfig *c, const char *name) {
    const RoleName *q = cfg_role(c, ROLE_Q_A_NORM), *kv = cfg_role(c, ROLE_KV_A_NORM);
    return (q && strstr(name, q->name)) || (kv && strstr(name, kv->name));
}

static bool ignorable(const char *name) {
    static const char *const sfx[] = {"rotary_emb.inv_freq", "attn.bias", "attn.masked_bias", NULL};
    size_t n = strlen(name);
    for (size_t i = 0; sfx[i]; i++)
        if (n >= strlen(sfx[i]) && strcmp(name + n - strlen(sfx[i]), sfx[i]) == 0) return true;
    return false;
}

/* The scales of an FP8 weight (DeepSeek's "<w>_scale_inv"; compressed-tensors' "<w>_scale" and the
 * module's "input_scale"): store_read dequantizes the weight with them, so the GGUF holds the
 * dequantized values in the chosen dtype and no scale tensor. */
static bool fp8_scale(const Store *s, const char *name) {
    static const char *const sfx[] = {"_scale_inv", ".input_scale", "_scale"};
    size_t n = strlen(name), i = 0;
    while (i < 3 && (n <= strlen(sfx[i]) || strcmp(name + n - strlen(sfx[i]), sfx[i]) != 0)) i++;
    if (i == 3) return false;
    char *w = al_asprintf("%.*s%s", (int)(n - strlen(sfx[i])), name, sfx[i][0] == '.' ? ".weight" : "");
    const st_entry *e = NULL;
    bool fp8 = w && store_has(s, w) && store_entry(s, w, &e, NULL) == AL_OK && e->dtype == DT_F8_E4M3;
    free(w);
    al_err_clear();
    return fp8;
}

/* The codes or scales of an FP4 weight (tensor.h: MXFP4 "<w>_blocks" / "<w>_scales", NVFP4
 * "<w>_scale" / "<w>_scale_2", compressed-tensors' "<w>_packed" / "<w>_global_scale", and the
 * module's "input_scale" / "input_global_scale"): store_read decodes the weight, so
 * the GGUF holds its values in the chosen dtype and none of these. */
static bool fp4_part(const Store *s, const char *name) {
    static const char *const sfx[] = {"_blocks", "_packed", "_scales", "_scale_2", ".input_global_scale",
                                      "_global_scale", ".input_scale", "_scale", "_shape"};     /* longer suffixes first */
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
        size_t k = strlen(sfx[i]);
        if (n <= k || strcmp(name + n - k, sfx[i]) != 0) continue;
        char w[512];
        dt_fp4 q;
        if ((size_t)snprintf(w, sizeof w, "%.*s%s", (int)(n - k), name, sfx[i][0] == '.' ? ".weight" : "") >= sizeof w)
            return false;
        bool fp4 = store_fp4(s, w, &q) == AL_OK && q.enc != DT_FP4_NONE;
        al_err_clear();
        return fp4;
    }
    return false;
}

/* Whether name lies in the multi-token-prediction layers the family keeps apart (its row's
 * mtp_layers under the model's prefix: MiMo's model.mtp_layers.N.). */
static bool mtp_tensor(const ModelConfig *c, const char *name) {
    const char *apart = cfg_row(c)->mtp_layers;
    size_t np = strlen(c->prefix);
    return apart && !strncmp(name, c->prefix, np) && !strncmp(name + np, apart, strlen(apart));
}

static int add_tensors(Ctx *x) {
    int rc = AL_OK;
    for (const GgufMap *t = x->a->glob; rc == AL_OK && t->what; t++) rc = add_one(x, t, -1);
    for (int L = 0; rc == AL_OK && L < x->m->cfg.n_layers; L++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        for (const GgufMap *t = x->a->layer; rc == AL_OK && t->what; t++) rc = add_one(x, t, L);
    }
    if (rc == AL_OK && x->m->cfg.rope_spec.scaling.kind == RS_LLAMA3) rc = add_rope_freqs(x);
    for (size_t i = 0; rc == AL_OK && i < store_count(x->m->store); i++) {
        const char *n = store_name_at(x->m->store, i);
        bool latnorm = x->linearize && latent_norm_name(&x->m->cfg, n);
        const ModelConfig *c = &x->m->cfg;           /* a text tower's GGUF leaves the vision tower out */
        bool vision = cfg_row(c)->text_config && strncmp(n, c->prefix, strlen(c->prefix));
        if (!x->used[i] && mtp_tensor(c, n)) x->rep->mtp_skipped++;   /* MiMo's: the logits never read them */
        else if (!x->used[i] && !ignorable(n) && !latnorm && !vision && !fp8_scale(x->m->store, n) &&
                 !fp4_part(x->m->store, n))
            rc = al_err("%s: tensor %s has no name in llama.cpp's %s architecture (not exported: nothing was written)",
                        x->m->name, n, x->a->arch);
    }
    return rc;
}

/* ================================================================ export */

static uint32_t file_type(gg_type t) { return t == GG_F32 ? 0 : t == GG_F16 ? 1 : t == GG_Q8_0 ? 7 : 32; }

/* What llama.cpp computes otherwise than the keys written say: its exaone4 reads the window and the
 * NoPE global layers only for 64 layers; no architecture but grok reads rope.scaling.yarn_attn_factor
 * (written as the converter writes it), each takes YaRN's default 0.1 ln(factor) + 1; no GGUF key
 * says YaRN's truncate, and ggml always rounds the correction dims. */
static void llamacpp_note(const Model *m, const GgufArch *a, char *buf, size_t cap) {
    const ModelConfig *c = &m->cfg;
    const RopeScaling *s = &c->rope_spec.scaling;
    int n = 0;
    buf[0] = 0;
    if (!strcmp(a->arch, "exaone4") && c->sliding_window > 0 && c->n_layers != 64)
        n = snprintf(buf, cap, "llama.cpp's exaone4 reads the window and the global layers without RoPE only for 64 layers "
                               "(EXAONE-4.0-32B): with %d it runs every layer in full, with RoPE", c->n_layers);
    double def = s->factor > 1 ? 0.1 * log(s->factor) + 1 : 1;
    if (s->kind == RS_YARN && isfinite(s->attention_factor) && fabs(s->attention_factor - def) > 1e-6 * def && n >= 0 &&
        (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "%sllama.cpp reads no YaRN attention_factor (%g, written as "
                      "yarn_attn_factor): it scales by 0.1 ln(factor) + 1 = %.6g, so its logits differ", n ? "; " : "",
                      s->attention_factor, def);
    if (s->kind == RS_YARN && !s->truncate && n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "%sYaRN with truncate false (gpt-oss's): llama.cpp rounds the correction "
                 "range (floor / ceil, as truncate true), so its RoPE frequencies and logits differ", n ? "; " : "");
}

static int build(Model *m, const GgufArch *a, const GgufExportOpts *o, GgufExportReport *rep, GgufWriter *w) {
    Ctx x = {.w = w, .m = m, .a = a, .o = o, .rep = rep};
    x.linearize = cfg_is_mla(&m->cfg) && !m->cfg.latent_norm;
    if (x.linearize && !(m->cfg.norm_eps > 0))
        return al_err("%s: rms_norm_eps is 0: the latent norm llama.cpp applies cannot be made linear", m->name);
    rep->latent_scaled = x.linearize;
    rep->q_less_old = cfg_is_mla(&m->cfg) && m->cfg.q_lora_rank <= 0 && m->cfg.n_layers != 27;
    llamacpp_note(m, a, rep->note, sizeof rep->note);
    const char *slash = strrchr(m->name, '/');
    int rc = gguf_set_str(w, "general.architecture", a->arch);
    if (!rc) rc = gguf_set_str(w, "general.type", "model");
    if (!rc) rc = gguf_set_str(w, "general.name", slash && slash[1] ? slash + 1 : m->name);
    if (!rc) rc = gguf_set_u32(w, "general.file_type", file_type(o->dtype));
    if (!rc) rc = gguf_set_u32(w, "general.quantization_version", 2);
    if (!rc) rc = a->kv(w, &m->cfg, m->config_tree, a);
    if (!rc) rc = kv_tokenizer(w, m, &rep->tokenizer);
    x.used = rc ? NULL : al_calloc(store_count(m->store) + 1, 1, "tensor flags");
    if (!rc && !x.used) rc = AL_ERR;
    if (!rc) rc = add_tensors(&x);
    free(x.used);
    rep->kvs = gguf_writer_kv_count(w);
    rep->bytes = gguf_writer_data_bytes(w);
    return rc;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int write_stream(void *ud, int fd, const char *path) { return gguf_write_fd(ud, fd, path); }

/* *src = the real folder dest must stay out of (o->src, a file's folder, or m's store). */
static bool src_folder(const Model *m, const GgufExportOpts *o, char src[4096]) {
    struct stat ss;
    if (!realpath(o->src ? o->src : store_dir(m->store), src)) return false;
    if (o->src && stat(src, &ss) == 0 && !S_ISDIR(ss.st_mode)) {   /* a file: its folder */
        char *cut = strrchr(src, '/');
        if (cut) cut[cut == src] = 0;
    }
    return true;
}

int gguf_dest_check(const Model *m, const char *dest, const GgufExportOpts *o) {
    struct stat sb;
    bool file = ends_with(dest, ".gguf");
    if (file && !o->force && lstat(dest, &sb) == 0) return al_err("%s exists: give `force` to replace it", dest);
    if (file && lstat(dest, &sb) == 0 && !S_ISREG(sb.st_mode)) return al_err("%s exists and is not a regular file", dest);
    char *d = al_strdup(dest), parent[4096], src[4096];
    if (!d) return AL_ERR;
    bool found = false;                 /* the nearest existing folder above dest */
    for (char *slash = strrchr(d, '/'); !found; slash = strrchr(d, '/')) {
        if (!slash) { found = realpath(".", parent) != NULL; break; }
        *slash = 0;
        found = realpath(*d ? d : "/", parent) != NULL;
    }
    free(d);
    bool same = found && src_folder(m, o, src) && strncmp(parent, src, strlen(src)) == 0 &&
                (parent[strlen(src)] == 0 || parent[strlen(src)] == '/');
    if (same) return al_err("%s is inside the folder of %s (%s): write the GGUF elsewhere", dest, m->name, src);
    return AL_OK;
}

/* A .gguf file: refused when it exists (without force) or lies in the source model's folder. */
static int write_single(Model *m, GgufWriter *w, const char *dest, const GgufExportOpts *o) {
    int rc = gguf_dest_check(m, dest, o);
    char *d = rc ? NULL : al_strdup(dest), *slash = d ? strrchr(d, '/') : NULL;
    if (rc || !d) return AL_ERR;
    if (slash) *slash = 0;
    rc = slash && *d && al_mkdirs_here(d) ? AL_ERR : AL_OK;
    free(d);
    return rc ? rc : gguf_write_file(w, dest);
}

int gguf_export(Model *m, const char *dest, const GgufExportOpts *o, GgufExportReport *rep) {
    GgufExportReport local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);
    const char *why;
    const char *arch = gguf_arch_for(m, &why);
    if (!arch) return al_err("%s (%s) cannot be written as GGUF: %s", m->name, m->cfg.model_type, why);
    rep->arch = arch;
    GgufWriter *w = gguf_writer_new();
    if (!w) return AL_ERR;
    int rc = build(m, gguf_arch_row(&m->cfg), o, rep, w);
    bool file = ends_with(dest, ".gguf");
    snprintf(rep->path, sizeof rep->path, file ? "%s" : "%s/model.gguf", dest);
    if (rc == AL_OK && file) rc = write_single(m, w, dest, o);
    else if (rc == AL_OK) {
        CkptWriter *cw = NULL;
        CkptOpts co = {.src = o->src ? o->src : m->path, .force = o->force, .can_force = true};
        rc = ckpt_begin(dest, &co, &cw);
        if (rc == AL_OK) {
            rc = ckpt_write_stream(cw, "model.gguf", write_stream, w);
            if (rc == AL_OK) rc = ckpt_commit(cw, NULL);
            else ckpt_abort(cw);
        }
    }
    gguf_writer_free(w);
    return rc;
}

