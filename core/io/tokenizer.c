/* tokenizer.c -- llama2.c tok*.bin and Hugging Face tokenizer.json (BPE, byte-level and
 * SentencePiece style): loading, encoding (pre-tokenizer split, BPE merges) and decoding.
 * See tokenizer.h for the formats and the exact rules followed. */
#define _GNU_SOURCE
#include "tokenizer.h"
#include "gguf.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wctype.h>

/* ================================================================ a string -> int hash map */

typedef struct {
    char *key;              /* owned, NUL-terminated copy (len bytes + NUL) */
    size_t len;
    int val;
} sm_slot;

typedef struct {
    sm_slot *s;             /* (cap) open addressing, linear probing; key NULL = empty */
    size_t cap, n;
} strmap;

static uint64_t sm_hash(const char *k, size_t len) {
    uint64_t h = 1469598103934665603ull;                      /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

static void sm_free(strmap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->s[i].key);
    free(m->s);
    memset(m, 0, sizeof *m);
}

static int sm_grow(strmap *m) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    sm_slot *ns = al_calloc(cap, sizeof *ns, "a tokenizer table");
    if (!ns) return AL_ERR;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->s[i].key) continue;
        size_t j = (size_t)sm_hash(m->s[i].key, m->s[i].len) & (cap - 1);
        while (ns[j].key) j = (j + 1) & (cap - 1);
        ns[j] = m->s[i];
    }
    free(m->s);
    m->s = ns;
    m->cap = cap;
    return AL_OK;
}

/* Value of key, or -1 when absent. */
static int sm_get(const strmap *m, const char *k, size_t len) {
    if (!m->cap) return -1;
    size_t j = (size_t)sm_hash(k, len) & (m->cap - 1);
    while (m->s[j].key) {
        if (m->s[j].len == len && memcmp(m->s[j].key, k, len) == 0) return m->s[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* Inserts key -> val; an existing key keeps its first value (the lowest id / rank). */
static int sm_put(strmap *m, const char *k, size_t len, int val) {
    if (2 * (m->n + 1) > m->cap && sm_grow(m) != AL_OK) return AL_ERR;
    size_t j = (size_t)sm_hash(k, len) & (m->cap - 1);
    while (m->s[j].key) {
        if (m->s[j].len == len && memcmp(m->s[j].key, k, len) == 0) return AL_OK;
        j = (j + 1) & (m->cap - 1);
    }
    char *c = al_malloc(len + 1, "a tokenizer piece");
    if (!c) return AL_ERR;
    memcpy(c, k, len);
    c[len] = 0;
    m->s[j] = (sm_slot){c, len, val};
    m->n++;
    return AL_OK;
}

/* ================================================================ a growable byte / int buffer */

typedef struct { char *p; size_t n, cap; } sbuf;
typedef struct { int *p; size_t n, cap; } ibuf;

static int sb_add(sbuf *b, const void *s, size_t n) {
    if (al_reserve(&b->p, &b->cap, b->n + n + 1, 1, "decoded text") != AL_OK) return AL_ERR;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return AL_OK;
}

static int ib_add(ibuf *b, int v) {
    if (al_reserve(&b->p, &b->cap, b->n + 1, sizeof *b->p, "token ids") != AL_OK) return AL_ERR;
    b->p[b->n++] = v;
    return AL_OK;
}

/* ================================================================ UTF-8 and character classes */

/* Decodes the code point at s[*i] (advancing *i); an invalid byte is returned as 0xFFFD and
 * consumes one byte. */
static uint32_t utf8_next(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s + *i;
    size_t left = len - *i;
    uint32_t c = u[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || n > left) { (*i)++; return 0xFFFD; }
    if (n == 1) { (*i)++; return c; }
    c &= 0x3Fu >> (n - 1);
    for (size_t k = 1; k < n; k++) {
        if ((u[k] & 0xC0) != 0x80) { (*i)++; return 0xFFFD; }
        c = (c << 6) | (u[k] & 0x3F);
    }
    *i += n;
    return c;
}

static size_t utf8_put(uint32_t c, char *out) {
    if (c < 0x80) { out[0] = (char)c; return 1; }
    if (c < 0x800) { out[0] = (char)(0xC0 | (c >> 6)); out[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12)); out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18)); out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F)); out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

enum { CL_OTHER, CL_LETTER, CL_NUMBER, CL_SPACE };

/* Unicode White_Space. */
static bool is_uspace(uint32_t c) {
    return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* \p{N}: ASCII digits, the decimal digit blocks of the common scripts, and number forms. */
static bool is_unumber(uint32_t c) {
    static const uint32_t nd[] = {0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6,
                                  0xD66, 0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0xFF10};
    if (c >= '0' && c <= '9') return true;
    if (c < 0xB2) return false;
    for (size_t i = 0; i < sizeof nd / sizeof *nd; i++)
        if (c >= nd[i] && c < nd[i] + 10) return true;
    return c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE) || (c >= 0x2070 && c <= 0x2079 && c != 0x2071 &&
           c != 0x2072 && c != 0x2073) || (c >= 0x2080 && c <= 0x2089) || (c >= 0x2150 && c <= 0x2189) ||
           (c >= 0x2460 && c <= 0x249B) || (c >= 0x24EA && c <= 0x24FF) || (c >= 0x2776 && c <= 0x2793) ||
           c == 0x3007 || (c >= 0x3021 && c <= 0x3029);
}

static locale_t utf8_locale(void) {
    static locale_t loc;
    static bool tried;
    if (!tried) {     /* benign race: both threads compute the same value */
        loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        tried = true;
    }
    return loc;
}

static int uclass(uint32_t c) {
    if (is_uspace(c)) return CL_SPACE;
    if (is_unumber(c)) return CL_NUMBER;
    if (c < 0x80) return ((c | 32) >= 'a' && (c | 32) <= 'z') ? CL_LETTER : CL_OTHER;
    locale_t l = utf8_locale();
    if (l && c != 0xFFFD && iswalpha_l((wint_t)c, l)) return CL_LETTER;
    return CL_OTHER;
}

/* ================================================================ the tokenizer */

typedef enum { PT_NONE, PT_GPT2, PT_LLAMA3, PT_QWEN2 } pretok_pattern;

typedef struct {
    char *s;                /* content, owned */
    size_t len;
    int id;
    bool special;
} added_tok;

struct Tokenizer {
    tok_kind kind;
    char *path;
    size_t n;               /* number of ids */
    char **piece;           /* (n) piece bytes (NUL-terminated, owned; NULL for an unused id) */
    size_t *plen;           /* (n) */
    float *score;           /* (n) llama2.c merge scores */
    strmap vocab;           /* piece -> id */
    strmap merges;          /* HF: "left right" -> rank */
    bool ignore_merges;     /* HF: a word found whole in the vocab is one token */
    bool byte_fallback;     /* HF SPM: <0xHH> tokens for unknown code points */
    int unk;                /* HF: unk id, or -1 */
    added_tok *added;       /* (nadded) HF added tokens, longest first */
    size_t nadded;
    int *pre, *post;        /* ids the post_processor adds before / after the text */
    size_t npre, npost;
    int bos, eos;
    bool embedded;          /* read from a GGUF's tokenizer.ggml.* keys */
    pretok_pattern pattern; /* byte-level split pattern */
    bool add_prefix_space;  /* byte-level: a space before a segment that starts without one */
    bool spm_prepend;       /* SPM: U+2581 before the first segment */
    bool spm_prepend_all;   /* ... before every segment (Prepend normalizer, prepend_scheme always) */
    bool spm_split;         /* SPM: Metaspace split = true */
    bool chunk_ok;          /* no piece has a space after a non-space: merges stay inside words */
    int byte_id[256];       /* SPM / llama2.c: id of <0xHH>, or -1 */
    uint32_t byte2cp[256];  /* byte-level alphabet */
    int16_t cp2byte[324];   /* its inverse (-1: not in the alphabet) */
};

const char *tok_kind_name(tok_kind k) {
    return k == TOK_LLAMA2C ? "llama2.c" : k == TOK_BYTELEVEL ? "byte-level BPE" : "sentencepiece BPE";
}
tok_kind tok_type(const Tokenizer *t) { return t->kind; }
bool tok_embedded(const Tokenizer *t) { return t->embedded; }
const char *tok_name(const Tokenizer *t) {
    if (t->embedded) return t->kind == TOK_LLAMA2C ? "GGUF llama: SentencePiece merged by score" : "GGUF gpt2: byte-level BPE";
    return tok_kind_name(t->kind);
}
const char *tok_path(const Tokenizer *t) { return t->path; }
size_t tok_vocab(const Tokenizer *t) { return t->n; }
int tok_bos(const Tokenizer *t) { return t->bos; }
int tok_eos(const Tokenizer *t) { return t->eos; }
const char *tok_piece(const Tokenizer *t, int id) {
    return id >= 0 && (size_t)id < t->n ? t->piece[id] : NULL;
}
float tok_score(const Tokenizer *t, int id) {
    return t->score && id >= 0 && (size_t)id < t->n ? t->score[id] : NAN;
}
int tok_piece_id(const Tokenizer *t, const char *piece) {
    for (size_t i = 0; i < t->nadded; i++)
        if (strcmp(t->added[i].s, piece) == 0) return t->added[i].id;
    return sm_get(&t->vocab, piece, strlen(piece));
}

void tok_free(Tokenizer *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->piece[i]);
    free(t->piece);
    free(t->plen);
    free(t->score);
    sm_free(&t->vocab);
    sm_free(&t->merges);
    for (size_t i = 0; i < t->nadded; i++) free(t->added[i].s);
    free(t->added);
    free(t->pre);
    free(t->post);
    free(t->path);
    free(t);
}

/* GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes for
 * U+0100 onwards in byte order. */
static void bytelevel_alphabet(Tokenizer *t) {
    uint32_t next = 256;
    for (int i = 0; i < 324; i++) t->cp2byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte2cp[b] = printable ? (uint32_t)b : next++;
        t->cp2byte[t->byte2cp[b]] = (int16_t)b;
    }
}

/* Allocates the id tables for n ids. */
static int tok_alloc_ids(Tokenizer *t, size_t n) {
    t->n = n;
    t->piece = al_calloc(n ? n : 1, sizeof *t->piece, "tokenizer pieces");
    t->plen = al_calloc(n ? n : 1, sizeof *t->plen, "tokenizer pieces");
    return t->piece && t->plen ? AL_OK : AL_ERR;
}

/* Sets piece id (copying len bytes) and enters it in the vocab map. */
static int tok_set_piece(Tokenizer *t, int id, const char *s, size_t len) {
    if (t->piece[id]) return AL_OK;
    t->piece[id] = al_malloc(len + 1, "a tokenizer piece");
    if (!t->piece[id]) return AL_ERR;
    memcpy(t->piece[id], s, len);
    t->piece[id][len] = 0;
    t->plen[id] = len;
    return sm_put(&t->vocab, s, len, id);
}

/* Fills byte_id from the <0xHH> pieces, and chunk_ok from the pieces (space character `sp`). */
static void tok_scan_pieces(Tokenizer *t, const char *sp) {
    size_t spl = strlen(sp);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = sm_get(&t->vocab, name, 6);
    }
    t->chunk_ok = true;
    for (size_t id = 0; id < t->n && t->chunk_ok; id++) {
        const char *p = t->piece[id];
        if (!p) continue;
        size_t len = t->plen[id];
        for (size_t j = 1; j + spl <= len; j++)
            if (memcmp(p + j, sp, spl) == 0 && !(j >= spl && memcmp(p + j - spl, sp, spl) == 0)) {
                t->chunk_ok = false;
                break;
            }
    }
}

/* ================================================================ llama2.c tok*.bin */

static int load_llama2c(Tokenizer *t, const unsigned char *buf, size_t size) {
    if (size < 4) return al_err("%s: truncated: a llama2.c tokenizer starts with an int32 max_token_length", t->path);
    int32_t maxlen;
    memcpy(&maxlen, buf, 4);
    if (maxlen <= 0 || maxlen > 65536)
        return al_err("%s: max_token_length %d is implausible (not a llama2.c tokenizer?)", t->path, maxlen);
    size_t n = 0;                                    /* first pass: count the pieces */
    for (size_t off = 4; off < size; n++) {
        int32_t len;
        if (off + 8 > size) return al_err("%s: truncated at piece %zu (byte %zu)", t->path, n, off);
        memcpy(&len, buf + off + 4, 4);
        if (len < 0 || len > maxlen || off + 8 + (size_t)len > size)
            return al_err("%s: piece %zu has length %d (max_token_length %d, %zu byte%s left): corrupt tokenizer",
                          t->path, n, len, maxlen, size - off - 8, al_s(size - off - 8));
        off += 8 + (size_t)len;
    }
    if (tok_alloc_ids(t, n) != AL_OK) return AL_ERR;
    t->score = al_calloc(n ? n : 1, sizeof *t->score, "tokenizer scores");
    if (!t->score) return AL_ERR;
    size_t off = 4;
    for (size_t i = 0; i < n; i++) {
        int32_t len;
        memcpy(&t->score[i], buf + off, 4);
        memcpy(&len, buf + off + 4, 4);
        if (tok_set_piece(t, (int)i, (const char *)buf + off + 8, (size_t)len) != AL_OK) return AL_ERR;
        off += 8 + (size_t)len;
    }
    t->kind = TOK_LLAMA2C;
    t->bos = n > 1 ? 1 : -1;
    t->eos = n > 2 ? 2 : -1;
    t->unk = -1;
    tok_scan_pieces(t, " ");
    if (t->bos >= 0) {
        t->pre = al_malloc(sizeof(int), "token ids");
        if (!t->pre) return AL_ERR;
        t->pre[0] = t->bos;
        t->npre = 1;
    }
    return AL_OK;
}

/* ================================================================ tokenizer.json */

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static bool jtype(const cJSON *o, const char *type) {
    const char *s = jstr(o, "type");
    return s && strcmp(s, type) == 0;
}

/* s (NULL: "?") for a message, control characters escaped; two rotating buffers, so two per message. */
static const char *esc(const char *s) {
    static _Thread_local char buf[2][96];
    static _Thread_local int k;
    k ^= 1;
    return al_printable(s ? s : "?", buf[k], sizeof buf[k]);
}

/* The id of a special token named in a post_processor (object "special_tokens" of a template,
 * or the token's own piece). */
static int special_ids(Tokenizer *t, const cJSON *specials, const char *name, ibuf *out) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(specials, name);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(sp, "ids");
    if (cJSON_IsArray(ids)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, ids) if (cJSON_IsNumber(e) && ib_add(out, e->valueint) != AL_OK) return AL_ERR;
        return AL_OK;
    }
    int id = tok_piece_id(t, name);
    if (id < 0) return al_err("%s: the post_processor adds token '%s', which is not in the vocabulary", t->path, esc(name));
    return ib_add(out, id);
}

/* Reads the post_processor: which ids come before and after the text of one sequence. */
static int load_post(Tokenizer *t, const cJSON *pp, ibuf *pre, ibuf *post) {
    if (!pp || cJSON_IsNull(pp)) return AL_OK;
    if (jtype(pp, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pp, "processors"))
            if (load_post(t, e, pre, post) != AL_OK) return AL_ERR;
        return AL_OK;
    }
    if (jtype(pp, "TemplateProcessing")) {
        const cJSON *specials = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens"), *e;
        bool after = false;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(pp, "single")) {
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) { after = true; continue; }
            const char *id = jstr(st, "id");
            if (id && special_ids(t, specials, id, after ? post : pre) != AL_OK) return AL_ERR;
        }
        return AL_OK;
    }
    if (jtype(pp, "RobertaProcessing") || jtype(pp, "BertProcessing")) {
        const cJSON *cls = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "cls"), 1);
        const cJSON *sep = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "sep"), 1);
        if (cJSON_IsNumber(cls) && ib_add(pre, cls->valueint) != AL_OK) return AL_ERR;
        if (cJSON_IsNumber(sep) && ib_add(post, sep->valueint) != AL_OK) return AL_ERR;
        return AL_OK;
    }
    if (jtype(pp, "ByteLevel")) return AL_OK;          /* offsets only */
    return al_err("%s: post_processor type '%s' is not supported (TemplateProcessing, ByteLevel, Roberta, Bert are)",
                  t->path, esc(jstr(pp, "type")));
}

/* Every id the post_processor adds must be one of the vocabulary's (0 .. n-1) and have a piece
 * (else encoding makes ids that decoding refuses). */
static int check_post_ids(const Tokenizer *t, const ibuf *ids) {
    for (size_t i = 0; i < ids->n; i++) {
        if (ids->p[i] < 0 || (size_t)ids->p[i] >= t->n)
            return al_err("%s: the post_processor adds token id %d, outside the vocabulary (ids 0-%zu); the file "
                          "is damaged", t->path, ids->p[i], t->n - 1);
        if (!t->piece[ids->p[i]])
            return al_err("%s: the post_processor adds token id %d, which has no piece in the vocabulary or "
                          "added_tokens; the file is damaged", t->path, ids->p[i]);
    }
    return AL_OK;
}

/* Which of the three known split patterns a Split pre-tokenizer uses. */
static int known_pattern(Tokenizer *t, const char *re, pretok_pattern *pt) {
    if (strstr(re, "\\p{N}{1,3}") && strstr(re, "(?i:'s|'t|'re|'ve|'m|'ll|'d)")) *pt = PT_LLAMA3;
    else if (strstr(re, "(?i:'s|'t|'re|'ve|'m|'ll|'d)") && strstr(re, "|\\p{N}|")) *pt = PT_QWEN2;
    else if (strstr(re, "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+")) *pt = PT_GPT2;
    else
        return al_err("%s: the pre-tokenizer's split pattern '%.80s' is not one attnlab implements (GPT-2, Llama-3 "
                      "and Qwen2 patterns are); tokenize elsewhere and use `ppl ids FILE`", t->path, re);
    return AL_OK;
}

/* One pre-tokenizer (or an element of a Sequence); sets the kind flags it implies. */
static int load_pretok(Tokenizer *t, const cJSON *p, bool *bytelevel, bool *metaspace) {
    if (!p || cJSON_IsNull(p)) return AL_OK;
    const char *type = jstr(p, "type");
    if (!type) return al_err("%s: a pre_tokenizer without a type", t->path);
    if (!strcmp(type, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(p, "pretokenizers"))
            if (load_pretok(t, e, bytelevel, metaspace) != AL_OK) return AL_ERR;
        return AL_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        *bytelevel = true;
        t->add_prefix_space = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space"));
        const cJSON *ur = cJSON_GetObjectItemCaseSensitive(p, "use_regex");
        if ((!ur || cJSON_IsTrue(ur)) && t->pattern == PT_NONE) t->pattern = PT_GPT2;
        return AL_OK;
    }
    if (!strcmp(type, "Split")) {
        const char *re = jstr(cJSON_GetObjectItemCaseSensitive(p, "pattern"), "Regex");
        if (!re) return al_err("%s: a Split pre-tokenizer without a Regex pattern is not supported", t->path);
        return known_pattern(t, re, &t->pattern);
    }
    if (!strcmp(type, "Metaspace")) {
        *metaspace = true;
        const char *scheme = jstr(p, "prepend_scheme");
        const cJSON *aps = cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space");
        t->spm_prepend = scheme ? strcmp(scheme, "never") != 0 : !aps || cJSON_IsTrue(aps);
        t->spm_prepend_all = scheme && !strcmp(scheme, "always");
        const cJSON *split = cJSON_GetObjectItemCaseSensitive(p, "split");
        t->spm_split = !split || cJSON_IsTrue(split);
        return AL_OK;
    }
    return al_err("%s: pre_tokenizer type '%s' is not supported (ByteLevel, Split, Metaspace are)", t->path, esc(type));
}

/* The normalizer: SentencePiece-style Prepend/Replace of U+2581, or NFC (taken as a no-op: text
 * is assumed to be NFC already). */
static int load_normalizer(Tokenizer *t, const cJSON *n, bool *metaspace) {
    if (!n || cJSON_IsNull(n)) return AL_OK;
    const char *type = jstr(n, "type");
    if (!type) return al_err("%s: a normalizer without a type", t->path);
    if (!strcmp(type, "Sequence")) {
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(n, "normalizers"))
            if (load_normalizer(t, e, metaspace) != AL_OK) return AL_ERR;
        return AL_OK;
    }
    if (!strcmp(type, "Prepend")) {
        *metaspace = true;
        t->spm_prepend = t->spm_prepend_all = true;
        return AL_OK;
    }
    if (!strcmp(type, "Replace")) {
        const char *pat = jstr(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String"), *to = jstr(n, "content");
        if (pat && to && !strcmp(pat, " ") && !strcmp(to, "\xe2\x96\x81")) { *metaspace = true; return AL_OK; }
        return al_err("%s: Replace normalizer ('%s' -> '%s') is not supported (only ' ' -> U+2581)", t->path,
                      esc(pat), esc(to));
    }
    if (!strcmp(type, "NFC")) return AL_OK;
    return al_err("%s: normalizer type '%s' is not supported (Prepend, Replace of spaces, NFC are)", t->path, esc(type));
}

static int cmp_added(const void *a, const void *b) {
    const added_tok *x = a, *y = b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : x->id - y->id;
}

/* The model (vocab + merges) and the added tokens. */
static int load_bpe_model(Tokenizer *t, const cJSON *root) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!jtype(model, "BPE"))
        return al_err("%s: model type '%s' is not supported (BPE is; WordPiece and Unigram are not)", t->path,
                      esc(jstr(model, "type")));
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), *e;
    if (!cJSON_IsObject(vocab)) return al_err("%s: model.vocab is not an object", t->path);
    long maxid = -1;
    cJSON_ArrayForEach(e, vocab) if (cJSON_IsNumber(e) && e->valueint > maxid) maxid = e->valueint;
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id)) continue;
        if (id->valuedouble < 0 || id->valuedouble != (double)id->valueint)
            return al_err("%s: added token '%s' has id %g, which is not a token id (a whole number from 0); the "
                          "file is damaged", t->path, esc(jstr(e, "content")), id->valuedouble);
        if (id->valueint > maxid) maxid = id->valueint;
    }
    if (maxid < 0 || maxid > (1L << 24)) return al_err("%s: vocabulary ids are empty or beyond 2^24", t->path);
    if (tok_alloc_ids(t, (size_t)maxid + 1) != AL_OK) return AL_ERR;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valueint < 0 || e->valuedouble != (double)e->valueint)
            return al_err("%s: vocab entry '%s' has no valid id (a whole number from 0)", t->path, esc(e->string));
        if (tok_set_piece(t, e->valueint, e->string, strlen(e->string)) != AL_OK) return AL_ERR;
    }
    t->nadded = (size_t)cJSON_GetArraySize(added);
    t->added = al_calloc(t->nadded ? t->nadded : 1, sizeof *t->added, "added tokens");
    if (!t->added) return AL_ERR;
    size_t k = 0;
    cJSON_ArrayForEach(e, added) {
        const char *content = jstr(e, "content");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!content || !*content || !cJSON_IsNumber(id)) continue;
        t->added[k] = (added_tok){al_strdup(content), strlen(content), id->valueint,
                                  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"))};
        if (!t->added[k].s) return AL_ERR;
        if (!t->piece[id->valueint] && tok_set_piece(t, id->valueint, content, strlen(content)) != AL_OK) return AL_ERR;
        k++;
    }
    t->nadded = k;
    qsort(t->added, k, sizeof *t->added, cmp_added);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    int rank = 0;
    cJSON_ArrayForEach(e, merges) {
        char *key = NULL;
        if (cJSON_IsString(e)) key = al_strdup(e->valuestring);
        else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                 cJSON_IsString(cJSON_GetArrayItem(e, 1)))
            key = al_asprintf("%s %s", cJSON_GetArrayItem(e, 0)->valuestring, cJSON_GetArrayItem(e, 1)->valuestring);
        else
            return al_err("%s: merge %d is neither \"a b\" nor [\"a\", \"b\"]", t->path, rank);
        int rc = key ? sm_put(&t->merges, key, strlen(key), rank++) : AL_ERR;
        free(key);
        if (rc != AL_OK) return rc;
    }
    t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    t->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    const char *unk = jstr(model, "unk_token");
    t->unk = unk ? tok_piece_id(t, unk) : -1;
    return AL_OK;
}

/* The first of the usual end-of-text pieces present, or -1. */
static int guess_eos(const Tokenizer *t) {
    static const char *names[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<eos>"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int id = tok_piece_id(t, names[i]);
        if (id >= 0) return id;
    }
    return -1;
}

static int load_json(Tokenizer *t, const char *text) {
    cJSON *root = cJSON_Parse(text);
    char near[21];
    if (!root) return al_err("%s: not valid JSON (near '%s')", t->path, al_printable(cJSON_GetErrorPtr(), near, sizeof near));
    bool bytelevel = false, metaspace = false;
    ibuf pre = {0}, post = {0};
    int rc = load_bpe_model(t, root);
    if (rc == AL_OK) rc = load_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &metaspace);
    if (rc == AL_OK) rc = load_pretok(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &bytelevel, &metaspace);
    if (rc == AL_OK) rc = load_post(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &pre, &post);
    if (rc == AL_OK) rc = check_post_ids(t, &pre);
    if (rc == AL_OK) rc = check_post_ids(t, &post);
    if (rc == AL_OK && !bytelevel && !metaspace) {
        /* Older SentencePiece conversions say so only in the decoder. */
        const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
        char *d = dec ? cJSON_PrintUnformatted(dec) : NULL;
        if (d && strstr(d, "ByteLevel")) bytelevel = true;
        else if (d && strstr(d, "\xe2\x96\x81")) { metaspace = true; t->spm_prepend = true; }
        free(d);
        if (!bytelevel && !metaspace)
            rc = al_err("%s: neither a byte-level (ByteLevel pre-tokenizer) nor a SentencePiece-style (metaspace "
                        "U+2581) BPE tokenizer", t->path);
    }
    if (rc == AL_OK) {
        t->kind = bytelevel ? TOK_BYTELEVEL : TOK_SPM;
        if (bytelevel) bytelevel_alphabet(t);
        tok_scan_pieces(t, bytelevel ? "\xc4\xa0" : "\xe2\x96\x81");
        t->pre = pre.p; t->npre = pre.n;
        t->post = post.p; t->npost = post.n;
        pre.p = post.p = NULL;
        t->bos = t->npre ? t->pre[0] : -1;
        t->eos = t->npost ? t->post[0] : guess_eos(t);
    }
    free(pre.p);
    free(post.p);
    cJSON_Delete(root);
    return rc;
}

/* ================================================================ a GGUF's tokenizer.ggml.* keys */

/* As llama.cpp reads them (llama-vocab.cpp): tokenizer.ggml.model "llama" -- SentencePiece pieces with
 * U+2581 for a space, tokenizer.ggml.scores, encoded by merging the adjacent pair whose concatenation is
 * the piece of best score after a dummy-prefix space, bytes as <0xHH> pieces: run.c's rules, so it reads
 * as TOK_LLAMA2C with the spaces restored -- or "gpt2" -- byte-level pieces, tokenizer.ggml.merges "a b"
 * by rank and the pre-tokenizer by name (tokenizer.ggml.pre: "gpt-2" / "default", "llama-bpe",
 * "qwen2"). token_type CONTROL / USER_DEFINED pieces are added tokens, UNUSED ones unused ids;
 * bos_token_id is added when add_bos_token is true (its default for "llama"), eos_token_id the end,
 * unknown_token_id stands for a character with neither a piece nor a <0xHH> piece (llama2.c's byte + 3
 * rule is not assumed).
 * attnlab's GGUF export writes these (gguf_convert.c); its placeholder vocabulary ("[i]" pieces and no
 * merges, for a model with no tokenizer) is refused. */
static const GgufKV *gguf_arr_of(const GgufFile *f, const char *key, gguf_vtype elt, size_t n, const char *path) {
    const GgufKV *kv = gguf_kv_find(f, key);
    if (!kv || kv->type != GGUF_ARR || kv->arr_type != elt || (n && kv->n != n)) {
        al_err("%s: %s is %s", path, key, !kv ? "absent" : "not an array of the expected type and length");
        return NULL;
    }
    return kv;
}

/* Piece i of a GGUF's tokens (spaces as U+2581 in "llama": restored), typed ty. A CONTROL / USER_DEFINED
 * piece is its text to a NUL byte; an empty one is no added text (as tokenizer.json's empty content is
 * skipped): matched, it looped. */
static int gguf_piece(Tokenizer *t, int i, const char *s, size_t len, int ty, bool spm) {
    sbuf b = {0};
    int rc = sb_add(&b, "", 0);
    for (size_t k = 0; k < len && rc == AL_OK;)
        if (spm && k + 3 <= len && memcmp(s + k, "\xe2\x96\x81", 3) == 0) { rc = sb_add(&b, " ", 1); k += 3; }
        else rc = sb_add(&b, s + k++, 1);
    if (rc == AL_OK && ty == 5) rc = AL_OK;                                   /* UNUSED: no piece */
    else if (rc == AL_OK && (ty == 3 || ty == 4) && b.p[0]) {                 /* CONTROL, USER_DEFINED */
        size_t n = strlen(b.p);                 /* to a NUL byte, as the copies: plen past them overread */
        t->piece[i] = al_strdup(b.p);
        t->plen[i] = n;
        t->added[t->nadded] = (added_tok){al_strdup(b.p), n, i, ty == 3};
        rc = t->piece[i] && t->added[t->nadded].s ? AL_OK : AL_ERR;
        t->nadded += rc == AL_OK && !spm;                                    /* SPM: run.c matches no added text */
        if (spm) { free(t->added[t->nadded].s); t->added[t->nadded].s = NULL; }
    } else if (rc == AL_OK) rc = tok_set_piece(t, i, b.p, b.n);
    free(b.p);
    return rc;
}

static int gguf_pieces(Tokenizer *t, const GgufFile *f, bool spm) {
    const GgufKV *tk = gguf_arr_of(f, "tokenizer.ggml.tokens", GGUF_STR, 0, t->path);
    if (!tk || tk->n == 0 || tk->n > (1u << 24)) return tk ? al_err("%s: tokenizer.ggml.tokens holds %llu pieces", t->path,
                                                                    (unsigned long long)tk->n) : AL_ERR;
    const GgufKV *ty = gguf_kv_find(f, "tokenizer.ggml.token_type"), *sc = NULL;
    if (ty && !(ty = gguf_arr_of(f, "tokenizer.ggml.token_type", GGUF_I32, tk->n, t->path))) return AL_ERR;
    if (spm && !(sc = gguf_arr_of(f, "tokenizer.ggml.scores", GGUF_F32, tk->n, t->path))) return AL_ERR;
    if (tok_alloc_ids(t, tk->n) != AL_OK) return AL_ERR;
    t->added = al_calloc(tk->n, sizeof *t->added, "added tokens");
    t->score = spm ? al_calloc(tk->n, sizeof *t->score, "tokenizer scores") : NULL;
    if (!t->added || (spm && !t->score)) return AL_ERR;
    for (size_t i = 0; i < tk->n; i++) {
        const char *p;
        size_t len;
        gguf_arr_str(tk, i, &p, &len);
        if (spm) t->score[i] = (float)gguf_arr_num(sc, i);
        if (gguf_piece(t, (int)i, p, len, ty ? (int)gguf_arr_num(ty, i) : 1, spm) != AL_OK) return AL_ERR;
    }
    qsort(t->added, t->nadded, sizeof *t->added, cmp_added);
    return AL_OK;
}

static int gguf_merges(Tokenizer *t, const GgufFile *f) {
    const GgufKV *m = gguf_arr_of(f, "tokenizer.ggml.merges", GGUF_STR, 0, t->path);
    if (!m) return AL_ERR;
    if (m->n == 0) return al_err("%s: tokenizer.ggml.merges is empty: a placeholder vocabulary (attnlab's GGUF export "
                                 "of a model with no tokenizer), not one to encode text with", t->path);
    for (size_t i = 0; i < m->n; i++) {
        const char *p;
        size_t len;
        gguf_arr_str(m, i, &p, &len);
        if (!memchr(p, ' ', len)) return al_err("%s: tokenizer.ggml.merges[%zu] is not \"a b\"", t->path, i);
        if (sm_put(&t->merges, p, len, (int)i) != AL_OK) return AL_ERR;
    }
    const char *pre = gguf_get_str(f, "tokenizer.ggml.pre");
    if (!pre || !strcmp(pre, "gpt-2") || !strcmp(pre, "default")) t->pattern = PT_GPT2;
    else if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3")) t->pattern = PT_LLAMA3;
    else if (!strcmp(pre, "qwen2")) t->pattern = PT_QWEN2;
    else {
        char shown[64];
        return al_err("%s: tokenizer.ggml.pre '%s' is not a pre-tokenizer attnlab implements (gpt-2, llama-bpe, "
                      "qwen2); tokenize elsewhere and use `ppl ids FILE`", t->path, al_printable(pre, shown, sizeof shown));
    }
    return AL_OK;
}

/* The special ids: BOS added when add_bos_token says so (default: "llama" yes, "gpt2" no). */
static int gguf_specials(Tokenizer *t, const GgufFile *f, bool spm) {
    int64_t v;
    const GgufKV *ab = gguf_kv_find(f, "tokenizer.ggml.add_bos_token");
    bool add_bos = ab && ab->type == GGUF_BOOL ? ab->v.u != 0 : spm;
    t->bos = gguf_get_int(f, "tokenizer.ggml.bos_token_id", &v) == AL_OK && v >= 0 && (size_t)v < t->n ? (int)v : -1;
    t->eos = gguf_get_int(f, "tokenizer.ggml.eos_token_id", &v) == AL_OK && v >= 0 && (size_t)v < t->n ? (int)v : -1;
    t->unk = gguf_get_int(f, "tokenizer.ggml.unknown_token_id", &v) == AL_OK && v >= 0 && (size_t)v < t->n &&
             t->piece[v] ? (int)v : -1;
    al_err_clear();
    if (!add_bos) t->bos = -1;
    if (t->bos < 0) return AL_OK;
    if (!(t->pre = al_malloc(sizeof(int), "token ids"))) return AL_ERR;
    t->pre[0] = t->bos;
    t->npre = 1;
    return AL_OK;
}

static int load_gguf(Tokenizer *t) {
    GgufFile *f = NULL;
    if (gguf_open(t->path, &f) != AL_OK) return AL_ERR;
    const char *model = gguf_get_str(f, "tokenizer.ggml.model");
    bool spm = model && strcmp(model, "llama") == 0;
    char shown[64];
    int rc = !model ? al_err("%s: no tokenizer in the file (%s)", t->path, gguf_kv_find(f, "tokenizer.ggml.model")
                             ? "tokenizer.ggml.model is not a string" : "no tokenizer.ggml.model")
             : !spm && strcmp(model, "gpt2") ? al_err("%s: tokenizer.ggml.model '%s' is not one attnlab reads (llama, "
                                                     "gpt2)", t->path, al_printable(model, shown, sizeof shown))
             : gguf_pieces(t, f, spm);
    if (rc == AL_OK && !spm) rc = gguf_merges(t, f);
    if (rc == AL_OK) rc = gguf_specials(t, f, spm);
    if (rc == AL_OK) {
        t->kind = spm ? TOK_LLAMA2C : TOK_BYTELEVEL;
        t->embedded = true;
        if (!spm) bytelevel_alphabet(t);
        tok_scan_pieces(t, spm ? " " : "\xc4\xa0");
    }
    gguf_close(f);
    return rc;
}

static bool is_gguf_name(const char *path) {
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".gguf") == 0;
}

/* ================================================================ open / find */

int tok_open(const char *path, Tokenizer **out) {
    *out = NULL;
    Tokenizer *t = al_calloc(1, sizeof *t, "a tokenizer");
    if (!t) return AL_ERR;
    t->path = al_strdup(path);
    t->bos = t->eos = t->unk = -1;
    if (t->path && is_gguf_name(path)) {
        int rc = load_gguf(t);
        if (rc != AL_OK) { tok_free(t); return rc; }
        *out = t;
        return AL_OK;
    }
    size_t size = 0;
    char *buf = t->path ? al_read_file_max(path, &size, AL_CAP_TOKENIZER, "tokenizer") : NULL;
    int rc = buf ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        size_t i = 0;
        while (i < size && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')) i++;
        size_t pl = strlen(path);
        bool json = (i < size && buf[i] == '{') || (pl >= 5 && strcmp(path + pl - 5, ".json") == 0);
        rc = json ? load_json(t, buf) : load_llama2c(t, (const unsigned char *)buf, size);
    }
    free(buf);
    if (rc != AL_OK) { tok_free(t); return rc; }
    *out = t;
    return AL_OK;
}

static bool is_file(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISREG(sb.st_mode); }
static bool is_dir(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode); }

/* Whether GGUF file path carries a tokenizer (tokenizer.ggml.model). */
static bool gguf_has_tokenizer(const char *path) {
    GgufFile *f = NULL;
    bool yes = is_file(path) && gguf_open(path, &f) == AL_OK && gguf_get_str(f, "tokenizer.ggml.model");
    gguf_close(f);
    al_err_clear();
    return yes;
}

int tok_find(const char *model_path, char **path_out) {
    *path_out = NULL;
    if (is_gguf_name(model_path) && gguf_has_tokenizer(model_path)) {
        *path_out = al_strdup(model_path);
        return *path_out ? AL_OK : AL_ERR;
    }
    char *dir;
    if (is_dir(model_path)) dir = al_strdup(model_path);
    else { char *c = al_strdup(model_path); dir = c ? al_strdup(dirname(c)) : NULL; free(c); }
    if (!dir) return AL_ERR;
    static const char *names[] = {"tokenizer.json", "tokenizer.bin"};
    for (size_t i = 0; i < 2; i++) {
        char *p = al_asprintf("%s/%s", dir, names[i]);
        if (p && is_file(p)) { *path_out = p; free(dir); return AL_OK; }
        free(p);
    }
    DIR *d = opendir(dir);
    char *best = NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "tok", 3) == 0 && n > 4 && strcmp(e->d_name + n - 4, ".bin") == 0 &&
            (!best || strcmp(e->d_name, best) < 0)) {
            free(best);
            best = al_strdup(e->d_name);
        }
    }
    if (d) closedir(d);
    int rc;
    if (best) {
        *path_out = al_asprintf("%s/%s", dir, best);
        rc = *path_out ? AL_OK : AL_ERR;
    } else
        rc = al_err("no tokenizer beside %s: looked for %s/tokenizer.json, %s/tokenizer.bin and %s/tok*.bin; set one "
                    "with `tokenizer FILE`, or give token ids (`ppl ids FILE`)", model_path, dir, dir, dir);
    free(best);
    free(dir);
    return rc;
}

/* ================================================================ BPE merges */

/* Merge priority of the adjacent symbols (a, b): lower is better; INT32_MAX / INFINITY when
 * they do not merge. *merged receives the id of the merged piece. */
static double pair_priority(const Tokenizer *t, int a, int b, int *merged, sbuf *tmp) {
    tmp->n = 0;
    size_t la = t->plen[a], lb = t->plen[b];
    if (t->kind == TOK_LLAMA2C) {
        if (sb_add(tmp, t->piece[a], la) || sb_add(tmp, t->piece[b], lb)) return INFINITY;
        int id = sm_get(&t->vocab, tmp->p, tmp->n);
        if (id < 0) return INFINITY;
        *merged = id;
        return -(double)t->score[id];
    }
    if (sb_add(tmp, t->piece[a], la) || sb_add(tmp, " ", 1) || sb_add(tmp, t->piece[b], lb)) return INFINITY;
    int rank = sm_get(&t->merges, tmp->p, tmp->n);
    if (rank < 0) return INFINITY;
    memmove(tmp->p + la, tmp->p + la + 1, lb);
    int id = sm_get(&t->vocab, tmp->p, la + lb);
    if (id < 0) return INFINITY;
    *merged = id;
    return rank;
}

/* Merges the symbols sym[0..n) in place (best pair first, leftmost on ties) until no pair
 * merges; returns the new count. */
static size_t bpe_merge(const Tokenizer *t, int *sym, size_t n, double *pri, int *mid, sbuf *tmp) {
    if (n < 2) return n;
    for (size_t i = 0; i + 1 < n; i++) pri[i] = pair_priority(t, sym[i], sym[i + 1], &mid[i], tmp);
    for (;;) {
        size_t best = n;
        for (size_t i = 0; i + 1 < n; i++)
            if (pri[i] < INFINITY && (best == n || pri[i] < pri[best])) best = i;
        if (best == n) return n;
        sym[best] = mid[best];
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        memmove(pri + best + 1, pri + best + 2, (n - best - 2) * sizeof *pri);
        memmove(mid + best + 1, mid + best + 2, (n - best - 2) * sizeof *mid);
        n--;
        if (best > 0) pri[best - 1] = pair_priority(t, sym[best - 1], sym[best], &mid[best - 1], tmp);
        if (best + 1 < n) pri[best] = pair_priority(t, sym[best], sym[best + 1], &mid[best], tmp);
    }
}

/* Scratch for one encode call. */
typedef struct {
    ibuf sym;
    double *pri;
    int *mid;
    size_t cap;
    sbuf tmp, word;
} enc_scratch;

static int scratch_fit(enc_scratch *s, size_t n) {
    if (n <= s->cap) return AL_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    double *p = realloc(s->pri, cap * sizeof *p);
    if (p) s->pri = p;
    int *m = realloc(s->mid, cap * sizeof *m);
    if (m) s->mid = m;
    if (!p || !m) return al_err("out of memory (tokenizing)");
    s->cap = cap;
    return AL_OK;
}

/* Merges the symbols in s->sym[from..] and appends the result to out. */
static int merge_append(const Tokenizer *t, enc_scratch *s, size_t from, ibuf *out) {
    size_t n = s->sym.n - from;
    if (n == 0) return AL_OK;                   /* nothing pushed (every piece empty): s->sym.p may be NULL */
    if (scratch_fit(s, n) != AL_OK) return AL_ERR;
    n = bpe_merge(t, s->sym.p + from, n, s->pri, s->mid, &s->tmp);
    for (size_t i = 0; i < n; i++)
        if (ib_add(out, s->sym.p[from + i]) != AL_OK) return AL_ERR;
    s->sym.n = from;
    return AL_OK;
}

/* Appends the symbol(s) for one code point's bytes w[0..len): its piece, else <0xHH> bytes
 * (llama2.c: byte + 3), else unk. */
static int push_codepoint(const Tokenizer *t, const char *w, size_t len, ibuf *sym) {
    int id = sm_get(&t->vocab, w, len);
    if (id >= 0) return ib_add(sym, id);
    for (size_t k = 0; k < len; k++) {
        unsigned char b = (unsigned char)w[k];
        int bid = t->kind == TOK_LLAMA2C ? (t->byte_id[b] >= 0 ? t->byte_id[b] : t->embedded ? -1 : (int)b + 3)
                  : t->byte_fallback ? t->byte_id[b] : -1;
        if (bid >= 0 && (size_t)bid < t->n) { if (ib_add(sym, bid) != AL_OK) return AL_ERR; continue; }
        if (t->unk >= 0) {
            if (sym->n && sym->p[sym->n - 1] == t->unk) return AL_OK;   /* fuse_unk */
            return ib_add(sym, t->unk);
        }
        return al_err("%s: the text has a character (U+%04X...) with no token, no byte fallback and no unk token",
                      t->path, (unsigned)b);
    }
    return AL_OK;
}

/* ================================================================ llama2.c encoding (run.c's rules) */

static int encode_llama2c(const Tokenizer *t, const char *text, size_t len, enc_scratch *s, ibuf *out) {
    if (len == 0) return AL_OK;
    int sp = sm_get(&t->vocab, " ", 1);
    size_t from = s->sym.n;
    if (sp >= 0 && ib_add(&s->sym, sp) != AL_OK) return AL_ERR;      /* the dummy prefix */
    bool prev_space = sp >= 0;
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;                                               /* run.c: a lead byte + continuations, max 4 */
        while (j < len && ((unsigned char)text[j] & 0xC0) == 0x80 && j - i < 4) j++;
        bool space = j - i == 1 && text[i] == ' ';
        if (t->chunk_ok && space && !prev_space && merge_append(t, s, from, out) != AL_OK) return AL_ERR;
        if (push_codepoint(t, text + i, j - i, &s->sym) != AL_OK) return AL_ERR;
        prev_space = space;
        i = j;
    }
    return merge_append(t, s, from, out);
}

/* ================================================================ SentencePiece-style HF BPE */

/* One word (already metaspace-normalized) through BPE. */
static int encode_spm_word(const Tokenizer *t, const char *w, size_t len, enc_scratch *s, ibuf *out) {
    if (len == 0) return AL_OK;
    if (t->ignore_merges) {
        int id = sm_get(&t->vocab, w, len);
        if (id >= 0) return ib_add(out, id);
    }
    size_t from = s->sym.n;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        utf8_next(w, len, &j);
        if (push_codepoint(t, w + i, j - i, &s->sym) != AL_OK) return AL_ERR;
        i = j;
    }
    return merge_append(t, s, from, out);
}

static int encode_spm(const Tokenizer *t, const char *text, size_t len, bool first, enc_scratch *s, ibuf *out) {
    static const char MS[] = "\xe2\x96\x81";
    sbuf *w = &s->word;
    w->n = 0;
    if (len == 0) return AL_OK;
    if (t->spm_prepend && (first || t->spm_prepend_all) && sb_add(w, MS, 3) != AL_OK) return AL_ERR;
    for (size_t i = 0; i < len; i++)
        if ((text[i] == ' ' ? sb_add(w, MS, 3) : sb_add(w, text + i, 1)) != AL_OK) return AL_ERR;
    /* Words start at a metaspace (split = true), or at a metaspace run after other text when no
     * piece holds a metaspace after other text (then merges never cross there). */
    size_t start = 0;
    bool split = t->spm_split || t->chunk_ok;
    for (size_t i = 0; i < w->n;) {
        bool ms = i + 3 <= w->n && memcmp(w->p + i, MS, 3) == 0;
        bool cut = ms && i > start && (t->spm_split || !(i >= 3 && memcmp(w->p + i - 3, MS, 3) == 0));
        if (split && cut) {
            if (encode_spm_word(t, w->p + start, i - start, s, out) != AL_OK) return AL_ERR;
            start = i;
        }
        i += ms ? 3 : 1;
    }
    return encode_spm_word(t, w->p + start, w->n - start, s, out);
}

/* ================================================================ byte-level HF BPE */

static bool is_contraction(const char *s, size_t len, size_t i, bool icase, size_t *end) {
    static const char *tails[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[i] != '\'') return false;
    for (size_t k = 0; k < 7; k++) {
        size_t n = strlen(tails[k]);
        if (i + 1 + n > len) continue;
        bool ok = icase ? strncasecmp(s + i + 1, tails[k], n) == 0 : strncmp(s + i + 1, tails[k], n) == 0;
        if (ok) { *end = i + 1 + n; return true; }
    }
    return false;
}

/* Code points of a segment with their classes and byte offsets. */
typedef struct {
    uint32_t *cp;
    int *cl;
    size_t *off;          /* (n + 1) byte offset of each code point, then len */
    size_t n;
} cps;

static int cps_build(const char *s, size_t len, cps *c) {
    c->cp = al_malloc3(len + 1, 1, sizeof *c->cp, "code points");
    c->cl = al_malloc3(len + 1, 1, sizeof *c->cl, "code points");
    c->off = al_malloc3(len + 1, 1, sizeof *c->off, "code points");
    if (!c->cp || !c->cl || !c->off) return AL_ERR;
    c->n = 0;
    for (size_t i = 0; i < len;) {
        c->off[c->n] = i;
        c->cp[c->n] = utf8_next(s, len, &i);
        c->cl[c->n] = uclass(c->cp[c->n]);
        c->n++;
    }
    c->off[c->n] = len;
    return AL_OK;
}

static void cps_free(cps *c) { free(c->cp); free(c->cl); free(c->off); }

/* End (code point index) of a run of class cl starting at i, at most max long. */
static size_t run_end(const cps *c, size_t i, int cl, size_t max) {
    size_t j = i;
    while (j < c->n && c->cl[j] == cl && j - i < max) j++;
    return j;
}

/* The pre-tokenizer pattern at code point i: returns the end of the match (code point index).
 * Implements the alternatives of the GPT-2, Llama-3 and Qwen2 patterns in order, with the
 * backtracking of \s+(?!\S) and \s*[\r\n]+ worked out by hand. */
static size_t pattern_match(pretok_pattern pt, const char *s, size_t len, const cps *c, size_t i) {
    size_t bend;
    bool gpt2 = pt == PT_GPT2;
    if (is_contraction(s, len, c->off[i], !gpt2, &bend)) {
        size_t j = i;
        while (j < c->n && c->off[j] < bend) j++;
        return j;
    }
    int cl = c->cl[i];
    bool nl = c->cp[i] == '\r' || c->cp[i] == '\n';
    bool has_next = i + 1 < c->n;
    if (gpt2) {
        for (int want = CL_LETTER; want <= CL_NUMBER; want++) {          /*  ?\p{L}+ and  ?\p{N}+ */
            if (cl == want) return run_end(c, i, want, SIZE_MAX);
            if (c->cp[i] == ' ' && has_next && c->cl[i + 1] == want) return run_end(c, i + 1, want, SIZE_MAX);
        }
    } else {
        if (cl == CL_LETTER) return run_end(c, i, CL_LETTER, SIZE_MAX);  /* [^\r\n\p{L}\p{N}]?\p{L}+ */
        if (!nl && cl != CL_NUMBER && has_next && c->cl[i + 1] == CL_LETTER) return run_end(c, i + 1, CL_LETTER, SIZE_MAX);
        if (cl == CL_NUMBER) return run_end(c, i, CL_NUMBER, pt == PT_LLAMA3 ? 3 : 1);
    }
    /*  ?[^\s\p{L}\p{N}]+ (Llama-3 / Qwen2: then [\r\n]*) */
    size_t o = cl == CL_OTHER ? i : (c->cp[i] == ' ' && has_next && c->cl[i + 1] == CL_OTHER) ? i + 1 : SIZE_MAX;
    if (o != SIZE_MAX) {
        size_t j = run_end(c, o, CL_OTHER, SIZE_MAX);
        if (!gpt2) while (j < c->n && (c->cp[j] == '\r' || c->cp[j] == '\n')) j++;
        return j;
    }
    if (cl != CL_SPACE) return i + 1;                                     /* not reached with these patterns */
    size_t e = run_end(c, i, CL_SPACE, SIZE_MAX);
    if (!gpt2) {                                                          /* \s*[\r\n]+ */
        size_t last = SIZE_MAX;
        for (size_t j = i; j < e; j++)
            if (c->cp[j] == '\r' || c->cp[j] == '\n') last = j;
        if (last != SIZE_MAX) return last + 1;
    }
    if (e == c->n || e - i == 1) return e;                                /* \s+(?!\S), else \s+ */
    return e - 1;
}

/* One pre-token's bytes through the byte alphabet and BPE. */
static int encode_bytelevel_word(const Tokenizer *t, const char *w, size_t len, enc_scratch *s, ibuf *out) {
    sbuf *m = &s->word;
    m->n = 0;
    for (size_t i = 0; i < len; i++) {
        char u[4];
        if (sb_add(m, u, utf8_put(t->byte2cp[(unsigned char)w[i]], u)) != AL_OK) return AL_ERR;
    }
    if (t->ignore_merges) {
        int id = sm_get(&t->vocab, m->p, m->n);
        if (id >= 0) return ib_add(out, id);
    }
    size_t from = s->sym.n;
    for (size_t i = 0; i < m->n;) {
        size_t j = i;
        utf8_next(m->p, m->n, &j);
        if (push_codepoint(t, m->p + i, j - i, &s->sym) != AL_OK) return AL_ERR;
        i = j;
    }
    return merge_append(t, s, from, out);
}

static int encode_bytelevel(const Tokenizer *t, const char *text, size_t len, enc_scratch *s, ibuf *out) {
    if (len == 0) return AL_OK;
    char *buf = NULL;
    if (t->add_prefix_space && text[0] != ' ') {
        buf = al_malloc(len + 2, "text");
        if (!buf) return AL_ERR;
        buf[0] = ' ';
        memcpy(buf + 1, text, len);
        text = buf;
        len++;
    }
    cps c = {0};
    int rc = cps_build(text, len, &c);
    for (size_t i = 0; rc == AL_OK && i < c.n;) {
        size_t j = t->pattern == PT_NONE ? c.n : pattern_match(t->pattern, text, len, &c, i);
        rc = encode_bytelevel_word(t, text + c.off[i], c.off[j] - c.off[i], s, out);
        i = j;
    }
    cps_free(&c);
    free(buf);
    return rc;
}

/* ================================================================ encode / decode */

/* The earliest added token in text[0..len) (longest at the same place): its start and index. */
static bool find_added(const Tokenizer *t, const char *text, size_t len, size_t *at, size_t *which) {
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < t->nadded; k++) {
        const char *p = memmem(text, len, t->added[k].s, t->added[k].len);
        if (p && (size_t)(p - text) < best) { best = (size_t)(p - text); *which = k; }   /* longest first: ties keep it */
    }
    *at = best;
    return best != SIZE_MAX;
}

int tok_encode(const Tokenizer *t, const char *text, size_t len, bool add_special, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    ibuf out = {0};
    enc_scratch s = {0};
    int rc = AL_OK;
    if (add_special)
        for (size_t i = 0; i < t->npre && rc == AL_OK; i++) rc = ib_add(&out, t->pre[i]);
    bool first = true;
    while (rc == AL_OK && (len > 0 || first)) {
        size_t at = len, which = 0;
        bool hit = t->kind != TOK_LLAMA2C && find_added(t, text, len, &at, &which);
        size_t seg = hit ? at : len;
        if (t->kind == TOK_LLAMA2C) rc = encode_llama2c(t, text, seg, &s, &out);
        else if (t->kind == TOK_SPM) rc = encode_spm(t, text, seg, first, &s, &out);
        else rc = encode_bytelevel(t, text, seg, &s, &out);
        first = false;
        if (rc != AL_OK || !hit) break;
        rc = ib_add(&out, t->added[which].id);
        text += at + t->added[which].len;
        len -= at + t->added[which].len;
    }
    if (add_special)
        for (size_t i = 0; i < t->npost && rc == AL_OK; i++) rc = ib_add(&out, t->post[i]);
    free(s.sym.p);
    free(s.pri);
    free(s.mid);
    free(s.tmp.p);
    free(s.word.p);
    if (rc != AL_OK) { free(out.p); return rc; }
    if (!out.p) out.p = al_malloc(sizeof(int), "token ids");
    if (!out.p) return AL_ERR;
    *ids = out.p;
    *n = out.n;
    return AL_OK;
}

/* True for "<0xHH>" pieces; *b receives the byte. */
static bool byte_piece(const char *p, size_t len, unsigned char *b) {
    if (len != 6 || strncmp(p, "<0x", 3) != 0 || p[5] != '>') return false;
    char hex[3] = {p[3], p[4], 0}, *end;
    unsigned long v = strtoul(hex, &end, 16);
    if (*end) return false;
    *b = (unsigned char)v;
    return true;
}

static bool is_added_special(const Tokenizer *t, int id) {
    if (id == t->bos || id == t->eos) return true;
    for (size_t k = 0; k < t->nadded; k++)
        if (t->added[k].id == id) return t->added[k].special;
    return false;
}

static bool is_added(const Tokenizer *t, int id) {
    for (size_t k = 0; k < t->nadded; k++)
        if (t->added[k].id == id) return true;
    return false;
}

int tok_decode(const Tokenizer *t, const int *ids, size_t n, bool skip_special, char **text) {
    *text = NULL;
    sbuf b = {0};
    int rc = sb_add(&b, "", 0);
    bool at_start = true;          /* SPM: nothing decoded yet (its leading space is dropped) */
    for (size_t i = 0; i < n && rc == AL_OK; i++) {
        int id = ids[i];
        if (id < 0 || (size_t)id >= t->n || !t->piece[id]) {
            rc = al_err("token id %d is not in the tokenizer (%s: ids 0-%zu)", id, t->path, t->n - 1);
            break;
        }
        if (skip_special && is_added_special(t, id)) continue;
        const char *p = t->piece[id];
        size_t len = t->plen[id];
        unsigned char byte;
        if (t->kind == TOK_LLAMA2C) {
            if (i > 0 && ids[i - 1] == t->bos && p[0] == ' ') { p++; len--; }  /* run.c: after BOS */
            rc = byte_piece(p, len, &byte) ? sb_add(&b, &byte, 1) : sb_add(&b, p, len);
        } else if (is_added(t, id)) {
            rc = sb_add(&b, p, len);
            at_start = false;
        } else if (t->kind == TOK_BYTELEVEL) {
            for (size_t k = 0; k < len && rc == AL_OK;) {
                uint32_t cp = utf8_next(p, len, &k);
                int v = cp < 324 ? t->cp2byte[cp] : -1;
                char u[4];
                if (v >= 0) { byte = (unsigned char)v; rc = sb_add(&b, &byte, 1); }
                else rc = sb_add(&b, u, utf8_put(cp, u));
            }
        } else {
            if (byte_piece(p, len, &byte)) { rc = sb_add(&b, &byte, 1); at_start = false; continue; }
            for (size_t k = 0; k < len && rc == AL_OK;) {
                if (k + 3 <= len && memcmp(p + k, "\xe2\x96\x81", 3) == 0) {
                    if (!(at_start && k == 0 && t->spm_prepend)) rc = sb_add(&b, " ", 1);
                    k += 3;
                } else
                    rc = sb_add(&b, p + k++, 1);
            }
            at_start = false;
        }
    }
    if (rc != AL_OK) { free(b.p); return rc; }
    *text = b.p;
    return AL_OK;
}
