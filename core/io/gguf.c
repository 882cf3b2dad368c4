/* gguf.c -- GGUF v3: the ggml tensor types attnlab writes (F32, F16, BF16, Q8_0; MXFP4), a writer that
 * serializes metadata as it is set and converts each tensor from float32 (or takes its bytes as stored:
 * MXFP4 blocks repacked from Hugging Face's layout, gg_mxfp4_from_hf) when the file is written, and a
 * reader that validates every field of a mapped file before exposing it. */
#define _GNU_SOURCE
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al.h"

/* ================================================================ ggml types */

const char *gg_type_name(gg_type t) {
    switch (t) {
    case GG_F32: return "F32";
    case GG_F16: return "F16";
    case GG_BF16: return "BF16";
    case GG_Q8_0: return "Q8_0";
    case GG_MXFP4: return "MXFP4";
    }
    return NULL;
}

int gg_type_parse(const char *s, gg_type *out) {
    static const struct { const char *n; gg_type t; } tab[] = {
        {"f32", GG_F32}, {"f16", GG_F16}, {"bf16", GG_BF16}, {"q8_0", GG_Q8_0}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcasecmp(s, tab[i].n) == 0) { *out = tab[i].t; return AL_OK; }
    return al_err("unknown GGUF tensor type '%s': use f32, f16, bf16 or q8_0", s);
}

static bool gg_known(uint32_t t) {
    return t == GG_F32 || t == GG_F16 || t == GG_BF16 || t == GG_Q8_0 || t == GG_MXFP4;
}

size_t gg_row_bytes(gg_type t, size_t n) {
    switch (t) {
    case GG_F32: return 4 * n;
    case GG_F16: case GG_BF16: return 2 * n;
    case GG_Q8_0: return n % GG_QK8_0 ? 0 : n / GG_QK8_0 * GG_Q8_0_BLOCK;
    case GG_MXFP4: return n % GG_QK8_0 ? 0 : n / GG_QK8_0 * GG_MXFP4_BLOCK;
    }
    return 0;
}

/* ggml's MXFP4 (block_mxfp4): per 32 values an E8M0 byte e and 16 bytes, value j < 16 in the low
 * nibble of byte j, value j + 16 in its high nibble; each code's kvalues_mxfp4 (E2M1 doubled) times
 * 2^(e - 128). */
static const int8_t MXFP4_K[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ggml's quantize_row_mxfp4_ref: e = floor(log2 amax) - 2 + 127, each value the nearest code (exact
 * for values that are E2M1 codes times one power of two per block, as decoded MXFP4 is). */
static void mxfp4_quantize(const float *x, size_t n, uint8_t *dst) {
    for (size_t b = 0; b < n / 32; b++, x += 32, dst += GG_MXFP4_BLOCK) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        uint8_t e = amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        float d = ldexpf(1.0f, (int)e - 128);
        dst[0] = e;
        memset(dst + 1, 0, 16);
        for (int j = 0; j < 32; j++) {
            int best = 0;
            for (int k = 1; k < 16; k++)
                if (fabsf(MXFP4_K[k] * d - x[j]) < fabsf(MXFP4_K[best] * d - x[j])) best = k;
            dst[1 + j % 16] |= (uint8_t)(j < 16 ? best : best << 4);
        }
    }
}

static void mxfp4_dequant(const uint8_t *src, size_t n, float *dst) {
    for (size_t b = 0; b < n / 32; b++, src += GG_MXFP4_BLOCK, dst += 32) {
        float d = ldexpf(1.0f, (int)src[0] - 128);
        for (int j = 0; j < 16; j++) {
            dst[j] = MXFP4_K[src[1 + j] & 15] * d;
            dst[j + 16] = MXFP4_K[src[1 + j] >> 4] * d;
        }
    }
}

void gg_mxfp4_to_hf(const uint8_t *blk, uint8_t *scale, uint8_t *codes) {
    *scale = blk[0];                        /* 2^(e - 128) x the doubled code = 2^(e - 127) x the E2M1 code */
    for (int k = 0; k < 16; k++) {
        int j0 = 2 * k, j1 = 2 * k + 1;     /* HF's byte k: value 2k in the low nibble, 2k + 1 in the high */
        uint8_t c0 = j0 < 16 ? blk[1 + j0] & 15 : blk[1 + j0 - 16] >> 4;
        uint8_t c1 = j1 < 16 ? blk[1 + j1] & 15 : blk[1 + j1 - 16] >> 4;
        codes[k] = (uint8_t)(c0 | c1 << 4);
    }
}

void gg_mxfp4_from_hf(uint8_t scale, const uint8_t *codes, uint8_t *blk) {
    blk[0] = scale;
    memset(blk + 1, 0, 16);
    for (int j = 0; j < 32; j++) {          /* value j: HF's byte j / 2 (low nibble even), ggml's byte j % 16 */
        uint8_t c = (uint8_t)(j & 1 ? codes[j / 2] >> 4 : codes[j / 2] & 15);
        blk[1 + j % 16] |= (uint8_t)(j < 16 ? c : c << 4);
    }
}

/* ggml's quantize_row_q8_0_ref: per block d = amax / 127, q = round(x / d). */
static void q8_0_quantize(const float *x, size_t n, uint8_t *dst) {
    for (size_t b = 0; b < n / GG_QK8_0; b++, x += GG_QK8_0, dst += GG_Q8_0_BLOCK) {
        float amax = 0;
        for (int j = 0; j < GG_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        uint16_t h = dt_f32_to_f16(d);
        memcpy(dst, &h, 2);
        for (int j = 0; j < GG_QK8_0; j++) dst[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

static void q8_0_dequant(const uint8_t *src, size_t n, float *dst) {
    for (size_t b = 0; b < n / GG_QK8_0; b++, src += GG_Q8_0_BLOCK, dst += GG_QK8_0) {
        uint16_t h;
        memcpy(&h, src, 2);
        float d = dt_f16_to_f32(h);
        for (int j = 0; j < GG_QK8_0; j++) dst[j] = (float)(int8_t)src[2 + j] * d;
    }
}

void gg_from_f32(gg_type t, const float *x, size_t n, void *dst) {
    switch (t) {
    case GG_F32: memcpy(dst, x, 4 * n); break;
    case GG_F16: dt_from_f32(DT_F16, x, n, dst); break;
    case GG_BF16: dt_from_f32(DT_BF16, x, n, dst); break;
    case GG_Q8_0: q8_0_quantize(x, n, dst); break;
    case GG_MXFP4: mxfp4_quantize(x, n, dst); break;
    }
}

void gg_to_f32(gg_type t, const void *src, size_t n, float *dst) {
    switch (t) {
    case GG_F32: memcpy(dst, src, 4 * n); break;
    case GG_F16: dt_to_f32(DT_F16, src, n, dst); break;
    case GG_BF16: dt_to_f32(DT_BF16, src, n, dst); break;
    case GG_Q8_0: q8_0_dequant(src, n, dst); break;
    case GG_MXFP4: mxfp4_dequant(src, n, dst); break;
    }
}

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* ================================================================ writer */

typedef struct {
    char *name;
    gg_type type;
    int ndim;
    uint64_t ne[GGUF_MAX_DIMS];
    size_t numel, nbytes, offset;
    gguf_fill_fn fill;
    gguf_fill_raw_fn raw;     /* or the bytes as stored */
    void *ud;
    float *owned;
} WTensor;

struct GgufWriter {
    uint8_t *kv;              /* the serialized KVs */
    size_t kvlen, kvcap, nkv;
    char **keys;
    size_t capkeys;
    WTensor *t;
    size_t nt, capt, data;    /* data: the data section's size so far */
};

GgufWriter *gguf_writer_new(void) { return al_calloc(1, sizeof(GgufWriter), "a GGUF writer"); }

void gguf_writer_free(GgufWriter *w) {
    if (!w) return;
    for (size_t i = 0; i < w->nkv; i++) free(w->keys[i]);
    for (size_t i = 0; i < w->nt; i++) { free(w->t[i].name); free(w->t[i].ud); free(w->t[i].owned); }
    free(w->keys);
    free(w->t);
    free(w->kv);
    free(w);
}

size_t gguf_writer_kv_count(const GgufWriter *w) { return w->nkv; }
size_t gguf_writer_tensor_count(const GgufWriter *w) { return w->nt; }
size_t gguf_writer_data_bytes(const GgufWriter *w) { return w->data; }

static int put(GgufWriter *w, const void *p, size_t n) {
    if (al_reserve(&w->kv, &w->kvcap, w->kvlen + n, 1, "GGUF metadata")) return AL_ERR;
    memcpy(w->kv + w->kvlen, p, n);
    w->kvlen += n;
    return AL_OK;
}
static int put_u32(GgufWriter *w, uint32_t v) { return put(w, &v, 4); }
static int put_u64(GgufWriter *w, uint64_t v) { return put(w, &v, 8); }
static int put_str(GgufWriter *w, const char *s, size_t n) { return put_u64(w, n) || put(w, s, n); }

/* Starts a KV: checks the key is new, writes it and the value type. */
static int kv_begin(GgufWriter *w, const char *key, gguf_vtype type) {
    for (size_t i = 0; i < w->nkv; i++)
        if (strcmp(w->keys[i], key) == 0) return al_err("GGUF writer: metadata key %s set twice", key);
    if (al_reserve(&w->keys, &w->capkeys, w->nkv + 1, sizeof *w->keys, "GGUF keys")) return AL_ERR;
    if (!(w->keys[w->nkv] = al_strdup(key))) return AL_ERR;
    w->nkv++;
    return put_str(w, key, strlen(key)) || put_u32(w, (uint32_t)type);
}

static const size_t VSIZE[GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static int set_scalar(GgufWriter *w, const char *key, gguf_vtype t, const void *v) {
    return kv_begin(w, key, t) || put(w, v, VSIZE[t]);
}
int gguf_set_u32(GgufWriter *w, const char *key, uint32_t v) { return set_scalar(w, key, GGUF_U32, &v); }
int gguf_set_i32(GgufWriter *w, const char *key, int32_t v) { return set_scalar(w, key, GGUF_I32, &v); }
int gguf_set_u64(GgufWriter *w, const char *key, uint64_t v) { return set_scalar(w, key, GGUF_U64, &v); }
int gguf_set_f32(GgufWriter *w, const char *key, float v) { return set_scalar(w, key, GGUF_F32, &v); }
int gguf_set_bool(GgufWriter *w, const char *key, bool v) {
    uint8_t b = v;
    return set_scalar(w, key, GGUF_BOOL, &b);
}
int gguf_set_str(GgufWriter *w, const char *key, const char *v) {
    return kv_begin(w, key, GGUF_STR) || put_str(w, v, strlen(v));
}

int gguf_set_arr(GgufWriter *w, const char *key, gguf_vtype elt, const void *data, size_t n) {
    if (elt >= GGUF_NTYPES || elt == GGUF_STR || elt == GGUF_ARR)
        return al_err("GGUF writer: %s: numeric arrays only (type %d)", key, (int)elt);
    return kv_begin(w, key, GGUF_ARR) || put_u32(w, (uint32_t)elt) || put_u64(w, n) || put(w, data, n * VSIZE[elt]);
}

int gguf_set_arr_str(GgufWriter *w, const char *key, const char *const *s, const size_t *len, size_t n) {
    if (kv_begin(w, key, GGUF_ARR) || put_u32(w, GGUF_STR) || put_u64(w, n)) return AL_ERR;
    for (size_t i = 0; i < n; i++)
        if (put_str(w, s[i], len ? len[i] : strlen(s[i]))) return AL_ERR;
    return AL_OK;
}

static int add_t(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, gguf_fill_fn fill,
                 void *ud, float *owned) {
    int rc = AL_OK;
    size_t numel = 1;
    if (ndim < 1 || ndim > GGUF_MAX_DIMS || !gg_type_name(type))
        rc = al_err("GGUF writer: tensor %s: %d dim%s or type %d not supported", name, ndim, al_s(ndim), (int)type);
    for (int i = 0; rc == AL_OK && i < ndim; i++)
        if (!ne[i]) rc = al_err("GGUF writer: tensor %s has an empty dim", name);
        else if (!al_mul_ok(numel, (size_t)ne[i], &numel, name)) rc = AL_ERR;
    if (rc == AL_OK && !gg_row_bytes(type, ne[0]))
        rc = al_err("GGUF writer: tensor %s: Q8_0 needs rows of a multiple of 32 values, ne[0] = %llu", name,
                    (unsigned long long)ne[0]);
    for (size_t i = 0; rc == AL_OK && i < w->nt; i++)
        if (strcmp(w->t[i].name, name) == 0) rc = al_err("GGUF writer: tensor %s added twice", name);
    if (rc == AL_OK) rc = al_reserve(&w->t, &w->capt, w->nt + 1, sizeof *w->t, "GGUF tensors");
    char *nm = rc == AL_OK ? al_strdup(name) : NULL;
    if (!nm) { free(ud); free(owned); return AL_ERR; }
    WTensor *t = &w->t[w->nt++];
    *t = (WTensor){.name = nm, .type = type, .ndim = ndim, .numel = numel, .fill = fill, .ud = ud, .owned = owned};
    for (int i = 0; i < GGUF_MAX_DIMS; i++) t->ne[i] = i < ndim ? ne[i] : 1;
    t->nbytes = gg_row_bytes(type, ne[0]) * (numel / ne[0]);
    t->offset = w->data;
    w->data = align_up(w->data + t->nbytes, GGUF_DEFAULT_ALIGN);
    return AL_OK;
}

int gguf_add_tensor(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, gguf_fill_fn fill,
                    void *ud) {
    return add_t(w, name, type, ndim, ne, fill, ud, NULL);
}

int gguf_add_tensor_raw(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, gguf_fill_raw_fn raw,
                        void *ud) {
    int rc = add_t(w, name, type, ndim, ne, NULL, ud, NULL);
    if (rc == AL_OK) w->t[w->nt - 1].raw = raw;
    return rc;
}

int gguf_add_tensor_f32(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, float *owned) {
    return add_t(w, name, type, ndim, ne, NULL, NULL, owned);
}

/* The header: magic, version, counts, KVs, tensor infos, padding to the data section. */
static uint8_t *header_build(GgufWriter *w, size_t *len) {
    GgufWriter h = {0};
    uint32_t v = GGUF_VERSION;
    int rc = put(&h, "GGUF", 4) || put(&h, &v, 4) || put_u64(&h, w->nt) || put_u64(&h, w->nkv) || put(&h, w->kv, w->kvlen);
    for (size_t i = 0; rc == AL_OK && i < w->nt; i++) {
        const WTensor *t = &w->t[i];
        rc = put_str(&h, t->name, strlen(t->name)) || put_u32(&h, (uint32_t)t->ndim) ||
             put(&h, t->ne, 8 * (size_t)t->ndim) || put_u32(&h, (uint32_t)t->type) || put_u64(&h, t->offset);
    }
    size_t pad = align_up(h.kvlen, GGUF_DEFAULT_ALIGN) - h.kvlen;
    static const uint8_t zero[GGUF_DEFAULT_ALIGN];
    if (rc == AL_OK) rc = put(&h, zero, pad);
    if (rc != AL_OK) { free(h.kv); return NULL; }
    *len = h.kvlen;
    return h.kv;
}

/* Writes t's nbytes from buf, then its padding. */
static int write_out(const WTensor *t, int fd, const char *where, const void *buf, size_t *written) {
    static const uint8_t zero[GGUF_DEFAULT_ALIGN];
    size_t pad = align_up(t->nbytes, GGUF_DEFAULT_ALIGN) - t->nbytes;
    *written += t->nbytes + pad;
    if (!al_write_all(fd, buf, t->nbytes) || !al_write_all(fd, zero, pad))
        return al_err("%s: write failed: %s", where, strerror(errno));
    return AL_OK;
}

/* Converts (or, raw, fills) and writes tensor t (and its padding). */
static int write_tensor(WTensor *t, int fd, const char *where, size_t *written) {
    float *x = t->owned;
    int rc = AL_OK;
    if (t->raw) {
        uint8_t *raw = al_malloc(t->nbytes ? t->nbytes : 1, t->name);
        rc = raw ? t->raw(t->ud, raw, t->nbytes) : AL_ERR;
        if (rc == AL_OK) rc = write_out(t, fd, where, raw, written);
        free(raw);
        return rc;
    }
    if (!x) {
        x = al_malloc3(t->numel, 1, sizeof *x, t->name);
        rc = !x ? AL_ERR : t->fill(t->ud, x, t->numel);
    }
    void *buf = rc == AL_OK ? (t->type == GG_F32 ? (void *)x : al_malloc(t->nbytes, t->name)) : NULL;
    if (buf && buf != x) gg_from_f32(t->type, x, t->numel, buf);
    if (!buf && rc == AL_OK) rc = AL_ERR;
    if (rc == AL_OK) rc = write_out(t, fd, where, buf, written);
    if (buf != x) free(buf);
    free(x);
    t->owned = NULL;
    return rc;
}

int gguf_write_fd(GgufWriter *w, int fd, const char *where) {
    size_t hlen;
    uint8_t *hdr = header_build(w, &hlen);
    if (!hdr) return AL_ERR;
    int rc = al_write_all(fd, hdr, hlen) ? AL_OK : al_err("%s: write failed: %s", where, strerror(errno));
    free(hdr);
    size_t written = 0;
    for (size_t i = 0; rc == AL_OK && i < w->nt; i++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        rc = write_tensor(&w->t[i], fd, where, &written);
        al_progress("tensor", i + 1, w->nt);
    }
    return rc;
}

int gguf_write_file(GgufWriter *w, const char *path) {
    char tmp[4096];
    int fd = al_temp_beside(path, tmp, sizeof tmp);
    if (fd < 0) return AL_ERR;
    int rc = gguf_write_fd(w, fd, path);
    if (rc == AL_OK && fsync(fd) != 0) rc = al_err("%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == AL_OK) rc = al_err("%s: close failed: %s", tmp, strerror(errno));
    if (rc == AL_OK && rename(tmp, path) != 0) rc = al_err("%s: cannot rename into place: %s", path, strerror(errno));
    if (rc != AL_OK) unlink(tmp);
    return rc;
}

/* ================================================================ reader */

struct GgufFile {
    char *path;
    const uint8_t *map;
    size_t size;
    bool owns_map;
    uint32_t version;
    size_t align, data_off;
    GgufKV *kv;
    size_t nkv;
    GgufTensor *t;
    size_t nt;
};

/* A cursor over the image; every read checks the bytes are there. */
typedef struct {
    const uint8_t *p;
    size_t size, off;
    const char *where;
} Cur;

static int need(Cur *c, size_t n, const char *what) {
    if (n > c->size - c->off)
        return al_err("%s: truncated GGUF: %s at byte %zu needs %zu byte%s, the file has %zu", c->where, what, c->off, n, al_s(n),
                      c->size);
    return AL_OK;
}
/* An array of count elements of at least each bytes that cannot fit in what is left (count * each may overflow). */
static int need_count(Cur *c, uint64_t count, size_t each, const char *what) {
    return al_err("%s: truncated GGUF, or corrupt: %s at byte %zu is an array of %llu elements of at least %zu byte%s "
                  "each; %zu byte%s are left (the file has %zu)", c->where, what, c->off, (unsigned long long)count,
                  each, al_s(each), c->size - c->off, al_s(c->size - c->off), c->size);
}
static int rd(Cur *c, void *dst, size_t n, const char *what) {
    if (need(c, n, what)) return AL_ERR;
    memcpy(dst, c->p + c->off, n);
    c->off += n;
    return AL_OK;
}
static int rd_u32(Cur *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static int rd_u64(Cur *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }
/* A string: *s points into the image. */
static int rd_str(Cur *c, const char **s, size_t *len, const char *what) {
    uint64_t n;
    if (rd_u64(c, &n, what) || need(c, n, what)) return AL_ERR;
    *s = (const char *)c->p + c->off;
    *len = (size_t)n;
    c->off += (size_t)n;
    return AL_OK;
}

static char *dup_n(const char *s, size_t n) {
    char *d = al_malloc(n + 1, "a GGUF string");
    if (d) { memcpy(d, s, n); d[n] = 0; }
    return d;
}

/* The value of one KV (type already read). */
/* Whether s holds a control character (keys and tensor names are echoed in messages: one line each). */
static bool has_control(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

static int rd_value(Cur *c, GgufKV *kv) {
    gguf_vtype t = kv->type;
    if (t == GGUF_STR) {
        const char *s;
        if (rd_str(c, &s, &kv->len, kv->key)) return AL_ERR;
        return (kv->str = dup_n(s, kv->len)) ? AL_OK : AL_ERR;
    }
    if (t != GGUF_ARR) {
        uint8_t b[8] = {0};
        if (rd(c, b, VSIZE[t], kv->key)) return AL_ERR;
        switch (t) {
        case GGUF_U8: case GGUF_BOOL: kv->v.u = b[0]; kv->v.i = b[0]; break;
        case GGUF_I8: kv->v.i = (int8_t)b[0]; break;
        case GGUF_U16: { uint16_t x; memcpy(&x, b, 2); kv->v.i = x; break; }
        case GGUF_I16: { int16_t x; memcpy(&x, b, 2); kv->v.i = x; break; }
        case GGUF_U32: { uint32_t x; memcpy(&x, b, 4); kv->v.i = x; break; }
        case GGUF_I32: { int32_t x; memcpy(&x, b, 4); kv->v.i = x; break; }
        case GGUF_U64: case GGUF_I64: memcpy(&kv->v.i, b, 8); break;
        case GGUF_F32: { float x; memcpy(&x, b, 4); kv->v.f = x; break; }
        case GGUF_F64: memcpy(&kv->v.f, b, 8); break;
        default: break;
        }
        return AL_OK;
    }
    uint32_t et;
    if (rd_u32(c, &et, kv->key) || rd_u64(c, &kv->n, kv->key)) return AL_ERR;
    if (et >= GGUF_NTYPES || et == GGUF_ARR)
        return al_err("%s: GGUF key %s: array of unsupported element type %u", c->where, kv->key, et);
    kv->arr_type = (gguf_vtype)et;
    if (et != GGUF_STR) {
        if (kv->n > (c->size - c->off) / VSIZE[et]) return need_count(c, kv->n, VSIZE[et], kv->key);
        kv->arr = c->p + c->off;
        c->off += (size_t)kv->n * VSIZE[et];
        return AL_OK;
    }
    if (kv->n > (c->size - c->off) / 8) return need_count(c, kv->n, 8, kv->key);   /* each string takes >= 8 bytes */
    kv->sarr = al_calloc((size_t)kv->n ? (size_t)kv->n : 1, sizeof *kv->sarr, "a GGUF string array");
    if (!kv->sarr) return AL_ERR;
    for (uint64_t i = 0; i < kv->n; i++) {
        const char *s;
        size_t len;
        kv->sarr[i] = c->p + c->off;
        if (rd_str(c, &s, &len, kv->key)) return AL_ERR;
    }
    return AL_OK;
}

static int rd_kvs(Cur *c, GgufFile *f, uint64_t nkv) {
    if (nkv > (c->size - c->off) / 12) return al_err("%s: truncated GGUF: the header claims %llu metadata keys, more than the file holds", c->where, (unsigned long long)nkv);
    f->kv = al_calloc((size_t)nkv ? (size_t)nkv : 1, sizeof *f->kv, "GGUF metadata");
    if (!f->kv) return AL_ERR;
    for (uint64_t i = 0; i < nkv; i++) {
        GgufKV *kv = &f->kv[f->nkv++];
        const char *k;
        size_t kl;
        uint32_t t;
        if (rd_str(c, &k, &kl, "a metadata key") || !(kv->key = dup_n(k, kl))) return AL_ERR;
        if (kl == 0 || strlen(kv->key) != kl || has_control(kv->key))
            return al_err("%s: GGUF metadata key %llu is empty or holds a NUL byte or a control character", c->where,
                          (unsigned long long)i);
        if (rd_u32(c, &t, kv->key)) return AL_ERR;
        if (t >= GGUF_NTYPES) return al_err("%s: GGUF key %s has unknown value type %u", c->where, kv->key, t);
        kv->type = (gguf_vtype)t;
        if (rd_value(c, kv)) return AL_ERR;
        for (size_t j = 0; j + 1 < f->nkv; j++)
            if (strcmp(f->kv[j].key, kv->key) == 0) return al_err("%s: GGUF key %s appears twice", c->where, kv->key);
    }
    return AL_OK;
}

/* One tensor info, checked on its own (dims, type, sizes). */
static int rd_tensor(Cur *c, GgufTensor *t) {
    const char *s;
    size_t len;
    uint32_t nd, ty;
    if (rd_str(c, &s, &len, "a tensor name") || !(t->name = dup_n(s, len))) return AL_ERR;
    if (len == 0 || strlen(t->name) != len || has_control(t->name))
        return al_err("%s: a GGUF tensor name is empty or holds a NUL byte or a control character", c->where);
    if (rd_u32(c, &nd, t->name)) return AL_ERR;
    if (nd < 1 || nd > GGUF_MAX_DIMS) return al_err("%s: GGUF tensor %s has %u dim%s (1 to 4 allowed)", c->where, t->name, nd, al_s(nd));
    t->ndim = (int)nd;
    t->numel = 1;
    for (int i = 0; i < GGUF_MAX_DIMS; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < nd; i++) {
        if (rd_u64(c, &t->ne[i], t->name)) return AL_ERR;
        if (t->ne[i] == 0 || t->ne[i] > c->size || !al_mul_ok(t->numel, t->ne[i], &t->numel, t->name))
            return al_err("%s: GGUF tensor %s: dim %u = %llu is impossible for a file of %zu byte%s", c->where, t->name, i,
                          (unsigned long long)t->ne[i], c->size, al_s(c->size));
    }
    if (rd_u32(c, &ty, t->name) || rd_u64(c, &t->offset, t->name)) return AL_ERR;
    if (!gg_known(ty))
        return al_err("%s: GGUF tensor %s has ggml type %u: attnlab reads F32 (0), F16 (1), Q8_0 (8) and BF16 (30)",
                      c->where, t->name, ty);
    t->type = (gg_type)ty;
    size_t row = gg_row_bytes(t->type, (size_t)t->ne[0]);
    if (!row) return al_err("%s: GGUF tensor %s: Q8_0 rows of %llu value%s are not whole blocks of 32", c->where, t->name, (unsigned long long)t->ne[0], al_s((unsigned long long)t->ne[0]));
    if (!al_mul_ok(row, t->numel / (size_t)t->ne[0], &t->nbytes, t->name)) return AL_ERR;
    return AL_OK;
}

static int cmp_off(const void *a, const void *b) {
    const GgufTensor *x = *(GgufTensor *const *)a, *y = *(GgufTensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Offsets aligned, inside the data section, no two tensors overlapping, names unique. */
static int check_layout(GgufFile *f, const char *where) {
    size_t avail = f->size - f->data_off;
    GgufTensor **s = al_calloc(f->nt ? f->nt : 1, sizeof *s, "GGUF tensor order");
    if (!s) return AL_ERR;
    int rc = AL_OK;
    for (size_t i = 0; i < f->nt && rc == AL_OK; i++) {
        GgufTensor *t = &f->t[i];
        s[i] = t;
        if (t->offset % f->align)
            rc = al_err("%s: GGUF tensor %s: offset %llu is not a multiple of the alignment %zu", where, t->name,
                        (unsigned long long)t->offset, f->align);
        else if (t->offset > avail || t->nbytes > avail - t->offset)
            rc = al_err("%s: truncated GGUF: tensor %s needs bytes %llu..%llu of the data section, which has %zu", where,
                        t->name, (unsigned long long)t->offset, (unsigned long long)(t->offset + t->nbytes), avail);
    }
    if (rc == AL_OK) qsort(s, f->nt, sizeof *s, cmp_off);
    for (size_t i = 1; i < f->nt && rc == AL_OK; i++)
        if (s[i - 1]->offset + s[i - 1]->nbytes > s[i]->offset)
            rc = al_err("%s: GGUF tensors %s and %s overlap", where, s[i - 1]->name, s[i]->name);
    for (size_t i = 0; i < f->nt && rc == AL_OK; i++)
        for (size_t j = 0; j < i && rc == AL_OK; j++)
            if (strcmp(f->t[i].name, f->t[j].name) == 0) rc = al_err("%s: GGUF tensor %s appears twice", where, f->t[i].name);
    free(s);
    return rc;
}

static int parse(GgufFile *f) {
    Cur c = {.p = f->map, .size = f->size, .where = f->path};
    char magic[4];
    uint64_t nt, nkv;
    if (rd(&c, magic, 4, "the magic") || memcmp(magic, "GGUF", 4) != 0)
        return al_err("%s: not a GGUF file (it does not start with \"GGUF\")", f->path);
    if (rd_u32(&c, &f->version, "the version")) return AL_ERR;
    if (f->version != 2 && f->version != 3)
        return al_err("%s: GGUF version %u: attnlab reads versions 2 and 3", f->path, f->version);
    if (rd_u64(&c, &nt, "the tensor count") || rd_u64(&c, &nkv, "the metadata count") || rd_kvs(&c, f, nkv)) return AL_ERR;
    f->align = GGUF_DEFAULT_ALIGN;
    const GgufKV *a = gguf_kv_find(f, "general.alignment");
    if (a) {
        if (a->type != GGUF_U32 || a->v.i == 0 || (a->v.i & (a->v.i - 1)))
            return al_err("%s: general.alignment must be a u32 power of two", f->path);
        f->align = (size_t)a->v.i;
    }
    if (nt > (c.size - c.off) / 24) return al_err("%s: truncated GGUF: the header claims %llu tensor%s, more than the file holds", f->path, (unsigned long long)nt, al_s((unsigned long long)nt));
    f->t = al_calloc((size_t)nt ? (size_t)nt : 1, sizeof *f->t, "GGUF tensor infos");
    if (!f->t) return AL_ERR;
    for (uint64_t i = 0; i < nt; i++)
        if (rd_tensor(&c, &f->t[f->nt++])) return AL_ERR;
    f->data_off = align_up(c.off, f->align);
    if (f->data_off > f->size && nt) return need(&c, f->data_off - c.off, "the padding before the data");
    if (f->data_off > f->size) f->data_off = f->size;
    return check_layout(f, f->path);
}

static int finish_open(GgufFile *f, GgufFile **out) {
    int rc = parse(f);
    if (rc != AL_OK) { gguf_close(f); return rc; }
    *out = f;
    return AL_OK;
}

int gguf_parse_buffer(const char *where, const uint8_t *buf, size_t size, GgufFile **out) {
    *out = NULL;
    GgufFile *f = al_calloc(1, sizeof *f, "a GGUF file");
    if (!f) return AL_ERR;
    f->map = buf;
    f->size = size;
    if (!(f->path = al_strdup(where))) { free(f); return AL_ERR; }
    return finish_open(f, out);
}

int gguf_open(const char *path, GgufFile **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return al_err("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) { close(fd); return al_err("%s: not a regular file", path); }
    if (sb.st_size < 24) { close(fd); return al_err("%s: truncated GGUF: %lld byte%s, the header alone has 24", path, (long long)sb.st_size, al_s((long long)sb.st_size)); }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return al_err("%s: cannot mmap: %s", path, strerror(errno));
    GgufFile *f = al_calloc(1, sizeof *f, "a GGUF file");
    if (!f || !(f->path = al_strdup(path))) { free(f); munmap(map, (size_t)sb.st_size); return AL_ERR; }
    f->map = map;
    f->size = (size_t)sb.st_size;
    f->owns_map = true;
    return finish_open(f, out);
}

void gguf_close(GgufFile *f) {
    if (!f) return;
    for (size_t i = 0; i < f->nkv; i++) { free(f->kv[i].key); free(f->kv[i].str); free(f->kv[i].sarr); }
    for (size_t i = 0; i < f->nt; i++) free(f->t[i].name);
    free(f->kv);
    free(f->t);
    if (f->owns_map) munmap((void *)f->map, f->size);
    free(f->path);
    free(f);
}

const char *gguf_path(const GgufFile *f) { return f->path; }
uint32_t gguf_version(const GgufFile *f) { return f->version; }
size_t gguf_alignment(const GgufFile *f) { return f->align; }
size_t gguf_kv_count(const GgufFile *f) { return f->nkv; }
const GgufKV *gguf_kv_at(const GgufFile *f, size_t i) { return i < f->nkv ? &f->kv[i] : NULL; }

const GgufKV *gguf_kv_find(const GgufFile *f, const char *key) {
    for (size_t i = 0; i < f->nkv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
    return NULL;
}

static bool is_int(gguf_vtype t) { return t <= GGUF_I32 || t == GGUF_BOOL || t == GGUF_U64 || t == GGUF_I64; }

int gguf_get_int(const GgufFile *f, const char *key, int64_t *out) {
    const GgufKV *kv = gguf_kv_find(f, key);
    if (!kv) return al_err("%s: GGUF metadata has no %s", f->path, key);
    if (!is_int(kv->type)) return al_err("%s: GGUF metadata %s is not an integer", f->path, key);
    *out = kv->v.i;
    return AL_OK;
}

int gguf_get_num(const GgufFile *f, const char *key, double *out) {
    const GgufKV *kv = gguf_kv_find(f, key);
    if (!kv) return al_err("%s: GGUF metadata has no %s", f->path, key);
    if (kv->type == GGUF_F32 || kv->type == GGUF_F64) *out = kv->v.f;
    else if (is_int(kv->type)) *out = (double)kv->v.i;
    else return al_err("%s: GGUF metadata %s is not a number", f->path, key);
    return AL_OK;
}

const char *gguf_get_str(const GgufFile *f, const char *key) {
    const GgufKV *kv = gguf_kv_find(f, key);
    return kv && kv->type == GGUF_STR ? kv->str : NULL;
}

void gguf_arr_str(const GgufKV *kv, size_t i, const char **s, size_t *len) {
    uint64_t n;
    memcpy(&n, kv->sarr[i], 8);
    *s = (const char *)kv->sarr[i] + 8;
    *len = (size_t)n;
}

double gguf_arr_num(const GgufKV *kv, size_t i) {
    const uint8_t *p = kv->arr + i * VSIZE[kv->arr_type];
    switch (kv->arr_type) {
    case GGUF_F32: { float x; memcpy(&x, p, 4); return x; }
    case GGUF_F64: { double x; memcpy(&x, p, 8); return x; }
    case GGUF_I8: return (int8_t)p[0];
    case GGUF_U8: case GGUF_BOOL: return p[0];
    case GGUF_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_I16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_U64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case GGUF_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    default: return 0;
    }
}

size_t gguf_tensor_count(const GgufFile *f) { return f->nt; }
const GgufTensor *gguf_tensor_at(const GgufFile *f, size_t i) { return i < f->nt ? &f->t[i] : NULL; }

const GgufTensor *gguf_tensor_find(const GgufFile *f, const char *name) {
    for (size_t i = 0; i < f->nt; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const void *gguf_tensor_data(const GgufFile *f, const GgufTensor *t) { return f->map + f->data_off + t->offset; }

void gguf_tensor_f32(const GgufFile *f, const GgufTensor *t, float *dst) {
    gg_to_f32(t->type, gguf_tensor_data(f, t), t->numel, dst);
}
