/* safetensors.c -- mmap'ed, validated safetensors reader and an atomic writer.
 * See safetensors.h for the format.
 *
 * The reader accepts exactly what the reference implementation accepts (huggingface/safetensors,
 * safetensors/src/tensor.rs: SafeTensors::read_metadata, Metadata::validate, the serde derive of
 * HashMetadata / TensorInfo, read by serde_json::from_str; and the README's "Format" section):
 *  1. An 8-byte little-endian header length N, N <= 100,000,000 (decimal), 8 + N <= file size.
 *  2. The N header bytes are valid UTF-8 as Rust's str::from_utf8 has it (no overlong forms, no
 *     surrogates, nothing above U+10FFFF).
 *  3. They hold one JSON value as serde_json reads it: RFC 8259 grammar (no leading zeros, '+1',
 *     '.5', trailing commas, raw control characters in strings, unknown escapes or unpaired
 *     surrogates), containers nested at most 127 deep, and before and after the value only
 *     whitespace -- ' ', '\t', '\n', '\r'. So leading whitespace is accepted (the README says the
 *     header begins with '{', the code takes whitespace first), and so is trailing padding:
 *     writers pad the header with spaces to a multiple of 8 (the reference's serialize does,
 *     and so does st_header_build). Anything else after the value is refused.
 *  4. The value is an object. "__metadata__" appears at most once and is null (no metadata) or
 *     an object whose values are all strings; a key repeated inside it keeps its last value.
 *  5. Every other member is a tensor: an object with "dtype" (a dtype name), "shape" (an array
 *     of non-negative integers) and "data_offsets" (an array of exactly two), each at most once;
 *     other members are ignored. Integers are integer literals: 4.0, 4e0 and -0 are refused.
 *  6. end - begin = product(shape) x dtype size, computed without overflow.
 *  7. Sorted by (begin, end), the tensors tile the data section exactly: the first begins at 0,
 *     each begins where the one before ends, the last ends at the end of the file. No holes, no
 *     overlaps, no bytes after the last tensor; an empty tensor sits on a boundary.
 * Stricter than the reference, on purpose (each refused with its own message):
 *  - a tensor name twice (the README disallows duplicate keys; serde would keep the last one);
 *  - control characters in tensor names, and "\u0000" in any string (one-line messages; C
 *    strings end at NUL);
 *  - dtypes of the format that attnlab does not hold (U16 U32 U64 C64 F4 F6_* *FNUZ; F8_E8M0 is held, as scales),
 *    more than 8 dims, integers above 2^53 (cJSON keeps doubles: only an empty tensor's dim
 *    could be that large and still valid).
 * Not followed: serde's derive would also read a tensor entry written as an array [dtype, shape,
 * offsets] and a dtype written as {"F32": null}; undocumented, refused here. */
#define _GNU_SOURCE
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000u     /* the reference's MAX_HEADER_SIZE (bytes, decimal) */

struct st_file {
    char *path;
    const uint8_t *map;       /* whole file */
    size_t size;
    size_t data_off;          /* 8 + header length */
    bool owns_map;            /* st_open'ed (munmap on close) vs st_parse_buffer'ed */
    bool file_map;            /* the map is the file at path from its first byte (st_open) */
    st_entry *entries;        /* sorted by begin */
    size_t n;
    size_t *by_name;          /* indices sorted by name */
    char **meta_keys, **meta_vals;
    size_t n_meta;
};

/* ================================================================ the reference's UTF-8 and JSON */

/* Offset of the first byte that breaks UTF-8 as Rust's str::from_utf8 reads it, or len. */
static size_t utf8_bad(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                 : c >= 0xf0 && c <= 0xf4 ? 3 : 9;    /* continuation bytes; 9: no lead byte */
        if (k == 9 || len - i <= k) return i;
        uint8_t lo = 0x80, hi = 0xbf;                     /* the second byte's range */
        if (c == 0xe0) lo = 0xa0;                         /* no overlong 3-byte forms */
        else if (c == 0xed) hi = 0x9f;                    /* no surrogates */
        else if (c == 0xf0) lo = 0x90;                    /* no overlong 4-byte forms */
        else if (c == 0xf4) hi = 0x8f;                    /* nothing above U+10FFFF */
        for (size_t j = 1; j <= k; j++)
            if (s[i + j] < (j == 1 ? lo : 0x80) || s[i + j] > (j == 1 ? hi : 0xbf)) return i;
        i += k + 1;
    }
    return len;
}

/* A number in "shape" or "data_offsets" that is not an integer literal (4.0, 4e0, -0): cJSON
 * reads it as the same double as 4 or 0, serde_json refuses it for a usize. */
typedef struct {
    size_t member;            /* ordinal of the tensor among the header's members */
    int field;                /* 0 shape, 1 data_offsets */
    size_t index;
} st_nonint;

/* A strict JSON scan with serde_json's grammar, recording st_nonint cases for parse_entry. */
typedef struct {
    const char *s;
    size_t n, i;
    int depth;
    const char *why;          /* what is wrong at i (NULL: nothing) */
    size_t member;            /* current member of the root object */
    st_nonint *bad;
    size_t nbad;
} jscan;

enum { JS_ANY, JS_ROOT, JS_TENSOR, JS_SHAPE, JS_OFFSETS };
#define JS_MAX_DEPTH 127      /* serde_json's recursion limit: the 128th nested container fails */

static bool js_fail(jscan *j, const char *why) { if (!j->why) j->why = why; return false; }
static void js_ws(jscan *j) {
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r')) j->i++;
}
static bool js_at(const jscan *j, char c) { return j->i < j->n && j->s[j->i] == c; }
static bool js_digit(const jscan *j) { return j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9'; }

static int js_hex4(const jscan *j, size_t at) {
    if (at > j->n || j->n - at < 4) return -1;
    int v = 0;
    for (size_t k = at; k < at + 4; k++) {
        char c = j->s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* One escape at j->i (the backslash); the code unit it stands for, or -1. */
static int js_escape(jscan *j) {
    if (j->i + 1 >= j->n) return js_fail(j, "a string that does not end"), -1;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *p = j->s[j->i + 1] ? strchr(from, j->s[j->i + 1]) : NULL;
    if (p) { j->i += 2; return to[p - from]; }
    if (j->s[j->i + 1] != 'u') return js_fail(j, "an unknown escape in a string"), -1;
    int u = js_hex4(j, j->i + 2);
    if (u < 0) return js_fail(j, "a \\u escape without four hex digits"), -1;
    if (u == 0) return js_fail(j, "\\u0000 in a string (attnlab's strings end at NUL)"), -1;
    if (u >= 0xdc00 && u <= 0xdfff) return js_fail(j, "an unpaired surrogate in a \\u escape"), -1;
    if (u >= 0xd800 && u <= 0xdbff) {
        int l = j->i + 7 < j->n && j->s[j->i + 6] == '\\' && j->s[j->i + 7] == 'u' ? js_hex4(j, j->i + 8) : -1;
        if (l < 0xdc00 || l > 0xdfff) return js_fail(j, "an unpaired surrogate in a \\u escape"), -1;
        j->i += 6;
    }
    j->i += 6;
    return u;
}

/* A string at j->i; key[16] gets its text when that is ASCII and at most 15 bytes, else "". */
static bool js_string(jscan *j, char key[16]) {
    size_t kn = 0;
    bool ascii = true;
    j->i++;                                               /* the opening quote */
    while (j->i < j->n) {
        unsigned char c = (unsigned char)j->s[j->i];
        if (c == '"') {
            j->i++;
            key[ascii && kn < 16 ? kn : 0] = 0;
            return true;
        }
        if (c < 0x20) return js_fail(j, "a control character inside a string (it must be escaped)");
        int u = c;
        if (c == '\\') { if ((u = js_escape(j)) < 0) return false; }
        else j->i++;
        if (u >= 0x80) ascii = false;
        else if (kn < 15) key[kn] = (char)u;
        kn++;
    }
    return js_fail(j, "a string that does not end");
}

/* A number at j->i; *integer when it has no sign, fraction or exponent. */
static bool js_number(jscan *j, bool *integer) {
    *integer = !js_at(j, '-');
    if (js_at(j, '-')) j->i++;
    if (js_at(j, '0')) j->i++;
    else if (js_digit(j)) while (js_digit(j)) j->i++;
    else return js_fail(j, "an unexpected character where a value should be");
    if (js_at(j, '.')) {
        j->i++;
        *integer = false;
        if (!js_digit(j)) return js_fail(j, "a number with no digits after '.'");
        while (js_digit(j)) j->i++;
    }
    if (js_at(j, 'e') || js_at(j, 'E')) {
        j->i++;
        *integer = false;
        if (js_at(j, '+') || js_at(j, '-')) j->i++;
        if (!js_digit(j)) return js_fail(j, "a number with no digits in its exponent");
        while (js_digit(j)) j->i++;
    }
    return true;
}

static bool js_value(jscan *j, int ctx, size_t index);

/* The value context of a member named key inside an object of context ctx. */
static int js_member_ctx(int ctx, const char *key) {
    if (ctx == JS_ROOT) return strcmp(key, "__metadata__") == 0 ? JS_ANY : JS_TENSOR;
    if (ctx == JS_TENSOR)
        return strcmp(key, "shape") == 0 ? JS_SHAPE : strcmp(key, "data_offsets") == 0 ? JS_OFFSETS : JS_ANY;
    return JS_ANY;
}

/* An object or array at j->i (its opening bracket). */
static bool js_container(jscan *j, int ctx) {
    bool obj = j->s[j->i] == '{';
    char close = obj ? '}' : ']';
    if (++j->depth > JS_MAX_DEPTH) return js_fail(j, "containers nested more than 127 deep");
    j->i++;
    js_ws(j);
    if (js_at(j, close)) { j->i++; j->depth--; return true; }
    for (size_t k = 0;; k++) {
        int vctx = ctx == JS_SHAPE || ctx == JS_OFFSETS ? ctx + 10 : JS_ANY;   /* elements of shape/offsets */
        if (obj) {
            char key[16];
            if (!js_at(j, '"')) return js_fail(j, "an object key that is not a string");
            if (!js_string(j, key)) return false;
            js_ws(j);
            if (!js_at(j, ':')) return js_fail(j, "no ':' after an object key");
            j->i++;
            js_ws(j);
            vctx = js_member_ctx(ctx, key);
        }
        if (!js_value(j, vctx, k)) return false;
        if (ctx == JS_ROOT) j->member++;
        js_ws(j);
        if (js_at(j, close)) { j->i++; j->depth--; return true; }
        if (!js_at(j, ','))
            return js_fail(j, obj ? "no ',' or '}' after an object member" : "no ',' or ']' after an array element");
        j->i++;
        js_ws(j);
    }
}

/* Any value at j->i (after whitespace); ctx says where it is, index its place in an array. */
static bool js_value(jscan *j, int ctx, size_t index) {
    if (j->i >= j->n) return js_fail(j, "the text ends where a value should be");
    char c = j->s[j->i];
    if (c == '{' || c == '[') return js_container(j, c == '{' && ctx == JS_ANY && j->depth == 0 ? JS_ROOT : ctx);
    if (c == '"') { char key[16]; return js_string(j, key); }
    static const char *const lit[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++)
        if (j->n - j->i >= strlen(lit[k]) && memcmp(j->s + j->i, lit[k], strlen(lit[k])) == 0) {
            j->i += strlen(lit[k]);
            return true;
        }
    bool integer;
    if (!js_number(j, &integer)) return false;
    if (!integer && ctx >= JS_SHAPE + 10) {
        st_nonint *nb = realloc(j->bad, (j->nbad + 1) * sizeof *nb);
        if (!nb) return js_fail(j, "out of memory");
        j->bad = nb;
        j->bad[j->nbad++] = (st_nonint){j->member, ctx - 10 - JS_SHAPE, index};
    }
    return true;
}

/* Checks the header text as serde_json::from_str would: one value, whitespace around it. On
 * failure the error names the file, what is wrong and where. */
static int js_check(const char *path, jscan *j) {
    size_t bad = utf8_bad((const uint8_t *)j->s, j->n);
    if (bad < j->n)
        return al_err("%s: header is not valid UTF-8 (byte 0x%02x at byte %zu of %zu); the format requires UTF-8 JSON",
                      path, (unsigned)(unsigned char)j->s[bad], bad, j->n);
    js_ws(j);
    if (js_value(j, JS_ANY, 0)) {
        js_ws(j);
        if (j->i == j->n) return AL_OK;
        if (j->depth == 0)
            return al_err("%s: header is not valid JSON: bytes after the JSON value at byte %zu of %zu (only "
                          "whitespace may pad the header)", path, j->i, j->n);
    }
    return al_err("%s: header is not valid JSON: %s (byte %zu of %zu)", path,
                  j->why ? j->why : "an unexpected character", j->i, j->n);
}

/* ================================================================ header parsing */

/* Reads a JSON number that must be a non-negative integer that fits size_t. */
static bool json_size(const cJSON *j, size_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0) || d != floor(d) || d > 9007199254740992.0) return false;
    *out = (size_t)d;
    return true;
}

/* Refuses tensor names with control characters (a newline in a name would break every
 * one-line message that quotes it, and escape codes would reach the terminal). */
static int check_name(const char *path, const char *name) {
    for (size_t i = 0; name[i]; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return al_err("%s: a tensor name has control character 0x%02x at byte %zu (names must be printable)", path,
                          (unsigned)(unsigned char)name[i], i);
    return AL_OK;
}

/* Copies s into buf for a message: control characters become \xNN, long strings are cut. */
static const char *printable(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; s[i] && n + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
        else buf[n++] = (char)c;
    }
    buf[n] = 0;
    return buf;
}

/* True when the scan saw a non-integer literal in member's field (0 shape, 1 data_offsets) at
 * index (any index when index is (size_t)-1). */
static bool nonint(const jscan *j, size_t member, int field, size_t index) {
    for (size_t k = 0; k < j->nbad; k++)
        if (j->bad[k].member == member && j->bad[k].field == field && (index == (size_t)-1 || j->bad[k].index == index))
            return true;
    return false;
}

/* Refuses a field given twice in one tensor's entry (serde's derive does). */
static int check_fields_once(const char *path, const cJSON *item) {
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    for (int f = 0; f < 3; f++) {
        int count = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, item) count += strcmp(it->string, fields[f]) == 0;
        if (count > 1)
            return al_err("%s: tensor '%s': \"%s\" appears %d time%s in its entry", path, item->string, fields[f], count, al_s(count));
    }
    return AL_OK;
}

/* Fills e from one header entry (the header's member-th member; j: its scan); the message
 * names the tensor and the field. */
static int parse_entry(const char *path, const cJSON *item, st_entry *e, size_t data_size, const jscan *j,
                       size_t member) {
    const char *name = item->string;
    if (check_name(path, name) != AL_OK) return AL_ERR;
    if (!cJSON_IsObject(item)) return al_err("%s: tensor '%s': header entry is not an object", path, name);
    if (check_fields_once(path, item) != AL_OK) return AL_ERR;
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsString(jd)) return al_err("%s: tensor '%s': missing \"dtype\"", path, name);
    e->dtype = dt_parse(jd->valuestring);
    if (e->dtype == DT_INVALID) {
        char shown[64];
        return al_err("%s: tensor '%s': unknown dtype '%s' (known: F32 F16 BF16 F8_E4M3 F8_E5M2 F64 I8..I64 U8 BOOL)",
                      path, name, printable(jd->valuestring, shown, sizeof shown));
    }
    if (!cJSON_IsArray(js)) return al_err("%s: tensor '%s': missing \"shape\" array", path, name);
    int nd = cJSON_GetArraySize(js);
    if (nd > ST_MAX_DIMS) return al_err("%s: tensor '%s': %d dim%s, at most %d supported", path, name, nd, al_s(nd), ST_MAX_DIMS);
    e->ndim = nd;
    size_t numel = 1;
    for (int i = 0; i < nd; i++) {
        if (nonint(j, member, 0, (size_t)i) || !json_size(cJSON_GetArrayItem(js, i), &e->shape[i]))
            return al_err("%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, i);
        if (!al_mul_ok(numel, e->shape[i], &numel, name)) return al_err_ctx("%s: tensor '%s': shape", path, name);
    }
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || nonint(j, member, 1, (size_t)-1) ||
        !json_size(cJSON_GetArrayItem(jo, 0), &e->begin) ||
        !json_size(cJSON_GetArrayItem(jo, 1), &e->end))
        return al_err("%s: tensor '%s': \"data_offsets\" must be [begin, end] integers", path, name);
    if (e->end < e->begin) return al_err("%s: tensor '%s': data_offsets end %zu before begin %zu", path, name, e->end, e->begin);
    if (e->end > data_size)
        return al_err("%s: tensor '%s': data_offsets [%zu, %zu] beyond the data section (%zu byte%s): file truncated?",
                      path, name, e->begin, e->end, data_size, al_s(data_size));
    size_t nbytes;
    if (!al_mul_ok(numel, dt_size(e->dtype), &nbytes, name)) return al_err_ctx("%s: tensor '%s'", path, name);
    if (nbytes != e->end - e->begin)
        return al_err("%s: tensor '%s': shape x %s needs %zu byte%s but data_offsets give %zu", path, name,
                      dt_name(e->dtype), nbytes, al_s(nbytes), e->end - e->begin);
    e->name = strdup(name);
    if (!e->name) return al_err("out of memory");
    return AL_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int cmp_name_idx(const void *a, const void *b, void *base) {
    const st_entry *e = base;
    return strcmp(e[*(const size_t *)a].name, e[*(const size_t *)b].name);
}

/* Parses "__metadata__": null (no metadata) or an object of string values; a key given twice
 * keeps its last value (st_meta looks from the end). */
static int parse_meta(const char *path, st_file *f, const cJSON *meta, bool *seen) {
    if (*seen) return al_err("%s: \"__metadata__\" appears twice in the header", path);
    *seen = true;
    if (cJSON_IsNull(meta)) return AL_OK;
    if (!cJSON_IsObject(meta)) return al_err("%s: \"__metadata__\" is not an object (nor null)", path);
    int n = cJSON_GetArraySize(meta);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_vals = calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_vals) return al_err("out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, meta) {
        if (!cJSON_IsString(it)) {
            char shown[64];
            return al_err("%s: \"__metadata__\" value of '%s' is not a string (the format allows only string values)",
                          path, printable(it->string, shown, sizeof shown));
        }
        f->meta_keys[f->n_meta] = strdup(it->string);
        f->meta_vals[f->n_meta] = strdup(it->valuestring);
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_vals[f->n_meta - 1]) return al_err("out of memory");
    }
    return AL_OK;
}

/* Refuses two non-empty tensors on the same bytes: each is compared with the furthest-reaching
 * one before it (not just its neighbour: an empty tensor in between must not hide an overlap). */
static int check_overlaps(const st_file *f) {
    const st_entry *reach = NULL;
    for (size_t i = 0; i < f->n; i++) {
        const st_entry *e = &f->entries[i];
        if (e->end == e->begin) continue;
        if (reach && e->begin < reach->end)
            return al_err("%s: tensors '%s' and '%s' overlap in the data section ([%zu, %zu] and [%zu, %zu])", f->path,
                          reach->name, e->name, reach->begin, reach->end, e->begin, e->end);
        if (!reach || e->end > reach->end) reach = e;
    }
    return AL_OK;
}

/* The reference's Metadata::validate and MetadataIncompleteBuffer: sorted by (begin, end), the
 * tensors tile the data section [0, data_size) with no hole and nothing after the last one. */
static int check_tiling(const st_file *f, size_t data_size) {
    size_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        const st_entry *e = &f->entries[i];
        if (e->begin > at)
            return al_err("%s: the data section has a hole: bytes [%zu, %zu) before tensor '%s' belong to no tensor "
                          "(the format requires the tensors to cover it exactly)", f->path, at, e->begin, e->name);
        if (e->begin < at)                               /* overlaps are refused before: an empty tensor */
            return al_err("%s: empty tensor '%s' at offset %zu lies inside tensor '%s' [%zu, %zu] (the format allows "
                          "empty tensors only between tensors)", f->path, e->name, e->begin, f->entries[i - 1].name,
                          f->entries[i - 1].begin, f->entries[i - 1].end);
        at = e->end;
    }
    if (at != data_size)
        return al_err("%s: %zu byte%s after the last tensor (the data section is %zu byte%s, the tensors cover %zu): the "
                      "format does not allow bytes no tensor owns", f->path, data_size - at, al_s(data_size - at), data_size, al_s(data_size), at);
    return AL_OK;
}

/* Validates the whole header of a mapped file and fills f's tables. */
static int parse_header(st_file *f, const char *json, size_t len) {
    const char *path = f->path;
    jscan j = {.s = json, .n = len};
    int rc = js_check(path, &j);
    if (rc != AL_OK) { free(j.bad); return rc; }
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) { free(j.bad); return al_err("%s: header is not valid JSON (near byte %zu of %zu)", path,
                                            (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - json : 0), len); }
    if (!cJSON_IsObject(root)) { rc = al_err("%s: header is not a JSON object", path); goto done; }
    size_t data_size = f->size - f->data_off, member = 0;
    int n = cJSON_GetArraySize(root);
    f->entries = calloc((size_t)n + 1, sizeof(st_entry));
    f->by_name = calloc((size_t)n + 1, sizeof(size_t));
    if (!f->entries || !f->by_name) { rc = al_err("out of memory"); goto done; }
    const cJSON *it;
    bool meta_seen = false;
    cJSON_ArrayForEach(it, root) {
        if (strcmp(it->string, "__metadata__") == 0) rc = parse_meta(path, f, it, &meta_seen);
        else if ((rc = parse_entry(path, it, &f->entries[f->n], data_size, &j, member)) == AL_OK) f->n++;
        if (rc != AL_OK) goto done;
        member++;
    }
    qsort(f->entries, f->n, sizeof(st_entry), cmp_begin);
    if ((rc = check_overlaps(f)) != AL_OK) goto done;
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = i;
    qsort_r(f->by_name, f->n, sizeof(size_t), cmp_name_idx, f->entries);
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->entries[f->by_name[i]].name, f->entries[f->by_name[i - 1]].name) == 0) {
            rc = al_err("%s: tensor '%s' appears twice in the header", path, f->entries[f->by_name[i]].name);
            goto done;
        }
    rc = check_tiling(f, data_size);
done:
    cJSON_Delete(root);
    free(j.bad);
    return rc;
}

/* ================================================================ open / close */

/* Parses an in-memory safetensors image (no copy; `buf` must outlive the file). Used by
 * st_open and by the fuzz target. */
int st_parse_buffer(const char *path, const uint8_t *buf, size_t size, st_file **out) {
    *out = NULL;
    st_file *f = calloc(1, sizeof *f);
    if (!f) return al_err("out of memory");
    f->path = strdup(path ? path : "(buffer)");
    f->map = buf;
    f->size = size;
    int rc;
    if (size < 8) {
        rc = al_err("%s: truncated: %zu byte%s, a safetensors file starts with an 8-byte header length", f->path, size, al_s(size));
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > size - 8) {
        rc = al_err("%s: header length %llu runs beyond the end of the file (%zu byte%s): truncated or not safetensors",
                    f->path, (unsigned long long)hlen, size, al_s(size));
        goto fail;
    }
    if (hlen > ST_MAX_HEADER) {
        rc = al_err("%s: header length %llu is larger than the 100,000,000 bytes the format allows", f->path,
                    (unsigned long long)hlen);
        goto fail;
    }
    f->data_off = 8 + (size_t)hlen;
    if ((rc = parse_header(f, (const char *)buf + 8, (size_t)hlen)) != AL_OK) goto fail;
    *out = f;
    return AL_OK;
fail:
    st_close(f);
    return rc;
}

int st_open(const char *path, st_file **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block: refused below */
    if (fd < 0) return al_err("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return al_err("%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    const uint8_t *map = NULL;
    if (size > 0) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) { close(fd); return al_err("%s: cannot mmap: %s", path, strerror(errno)); }
        /* pages read through this mapping come into the page cache as 2 MB folios where the file
         * system allows (Linux 6.x, THP "madvise" or "always"): a sweep reads o_proj a few hundred
         * bytes from every 16 KB row, and over 4 KB folios it spends ~25 % more time (TLB misses,
         * page faults; bench/README.md). A hint: where it is refused nothing changes. */
        madvise(p, size, MADV_HUGEPAGE);
        map = p;
    }
    close(fd);
    static const uint8_t empty[1];
    int rc = st_parse_buffer(path, map ? map : empty, size, out);
    if (rc != AL_OK) {
        if (map) munmap((void *)map, size);
        return rc;
    }
    if (!map) (*out)->map = NULL;
    (*out)->owns_map = map != NULL;
    (*out)->file_map = map != NULL;
    return AL_OK;
}

void st_close(st_file *f) {
    if (!f) return;
    if (f->owns_map) munmap((void *)f->map, f->size);
    for (size_t i = 0; i < f->n; i++) free(f->entries[i].name);
    for (size_t i = 0; i < f->n_meta; i++) { free(f->meta_keys[i]); free(f->meta_vals[i]); }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->entries);
    free(f->by_name);
    free(f->path);
    free(f);
}

const char *st_path(const st_file *f) { return f->path; }
size_t st_count(const st_file *f) { return f->n; }
const st_entry *st_entry_at(const st_file *f, size_t i) { return i < f->n ? &f->entries[i] : NULL; }

const st_entry *st_find(const st_file *f, const char *name) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->entries[f->by_name[mid]].name, name);
        if (c == 0) return &f->entries[f->by_name[mid]];
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

const void *st_data(const st_file *f, const st_entry *e) { return f->map + f->data_off + e->begin; }

size_t st_file_offset(const st_file *f, const st_entry *e, bool *ok) {
    *ok = f->file_map;
    return f->file_map ? f->data_off + e->begin : 0;
}

const char *st_meta(const st_file *f, const char *key) {
    for (size_t i = f->n_meta; i-- > 0;)                /* the last of a repeated key, as serde keeps it */
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

size_t st_meta_count(const st_file *f) { return f->n_meta; }

size_t st_numel(const st_entry *e) {
    size_t n = 1;
    for (int i = 0; i < e->ndim; i++) n *= e->shape[i];
    return n;
}

void st_release(const st_file *f, const st_entry *e) {
    if (!f->owns_map || e->end == e->begin) return;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)(f->map + f->data_off + e->begin), b = (uintptr_t)(f->map + f->data_off + e->end);
    a = (a + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    b &= ~((uintptr_t)page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* ================================================================ writer */

typedef struct {
    char *name;
    dt_type dtype;
    int ndim;
    size_t shape[ST_MAX_DIMS];
    uint8_t *bytes;
    size_t nbytes;
} w_entry;

struct st_writer {
    w_entry *e;
    size_t n, cap;
    char **meta_k, **meta_v;
    size_t n_meta;
    size_t total;
};

st_writer *st_writer_new(void) { return al_calloc(1, sizeof(st_writer), "a safetensors writer"); }

void st_writer_free(st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) { free(w->e[i].name); free(w->e[i].bytes); }
    for (size_t i = 0; i < w->n_meta; i++) { free(w->meta_k[i]); free(w->meta_v[i]); }
    free(w->e);
    free(w->meta_k);
    free(w->meta_v);
    free(w);
}

int st_writer_add(st_writer *w, const char *name, dt_type dtype, int ndim, const size_t *shape,
                  const void *data, size_t nbytes) {
    if (ndim < 0 || ndim > ST_MAX_DIMS) return al_err("tensor '%s': %d dim%s, at most %d", name, ndim, al_s(ndim), ST_MAX_DIMS);
    size_t numel = 1, need;
    for (int i = 0; i < ndim; i++)
        if (!al_mul_ok(numel, shape[i], &numel, name)) return AL_ERR;
    if (!al_mul_ok(numel, dt_size(dtype), &need, name)) return AL_ERR;
    if (need != nbytes) return al_err("tensor '%s': shape x %s is %zu byte%s, got %zu", name, dt_name(dtype), need, al_s(need), nbytes);
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0) return al_err("tensor '%s' added twice", name);
    if (al_reserve(&w->e, &w->cap, w->n + 1, sizeof *w->e, "the tensor table")) return AL_ERR;
    w_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->bytes = al_malloc(nbytes, name);
    if (!e->name || !e->bytes) { free(e->name); free(e->bytes); return al_err("out of memory for tensor '%s'", name); }
    if (nbytes) memcpy(e->bytes, data, nbytes);
    e->dtype = dtype;
    e->ndim = ndim;
    if (ndim) memcpy(e->shape, shape, (size_t)ndim * sizeof(size_t));   /* a 0-d tensor may pass shape NULL */
    e->nbytes = nbytes;
    w->total += nbytes;
    w->n++;
    return AL_OK;
}

int st_writer_add_mat(st_writer *w, const char *name, dt_type dtype, const Mat *m) {
    if (dtype == DT_F8_E4M3) return st_writer_add_fp8(w, name, m);
    size_t n = m->rows * m->cols, shape[2] = {m->rows, m->cols};
    void *buf = al_malloc3(n, 1, dt_size(dtype), name);
    if (!buf) return AL_ERR;
    int rc = dt_from_f32(dtype, m->data, n, buf);
    if (rc == AL_OK) rc = st_writer_add(w, name, dtype, m->rows == 1 ? 1 : 2, m->rows == 1 ? shape + 1 : shape, buf,
                                        n * dt_size(dtype));
    free(buf);
    return rc;
}

void st_fp8_blocks(const Mat *m, uint8_t *q, float *scale) {
    const size_t B = DT_FP8_BLOCK, R = m->rows, C = m->cols;
    size_t sr = dt_fp8_nblocks(R), sc = dt_fp8_nblocks(C);
    for (size_t bi = 0; bi < sr; bi++)
        for (size_t bj = 0; bj < sc; bj++) {
            float amax = 0;
            for (size_t i = bi * B; i < R && i < (bi + 1) * B; i++)
                for (size_t j = bj * B; j < C && j < (bj + 1) * B; j++) amax = fmaxf(amax, fabsf(m->data[i * C + j]));
            float s = amax > 0 ? amax / 448.0f : 1.0f;
            scale[bi * sc + bj] = s;
            for (size_t i = bi * B; i < R && i < (bi + 1) * B; i++)
                for (size_t j = bj * B; j < C && j < (bj + 1) * B; j++) q[i * C + j] = dt_f32_to_e4m3(m->data[i * C + j] / s);
        }
}

int st_writer_add_fp8(st_writer *w, const char *name, const Mat *m) {
    const size_t R = m->rows, C = m->cols;
    size_t sr = dt_fp8_nblocks(R), sc = dt_fp8_nblocks(C);
    uint8_t *q = al_malloc3(R, C, 1, name);
    float *scale = al_malloc3(sr ? sr : 1, sc ? sc : 1, sizeof(float), name);
    int rc = AL_ERR;
    if (!q || !scale) goto out;
    st_fp8_blocks(m, q, scale);
    size_t shape[2] = {R, C}, sshape[2] = {sr, sc};
    char *sname = al_asprintf("%s_scale_inv", name);
    if (!sname) goto out;
    rc = st_writer_add(w, name, DT_F8_E4M3, 2, shape, q, R * C);
    if (rc == AL_OK) rc = st_writer_add(w, sname, DT_F32, 2, sshape, scale, sr * sc * sizeof(float));
    free(sname);
out:
    free(q);
    free(scale);
    return rc;
}

int st_writer_meta(st_writer *w, const char *key, const char *value) {
    char **k = realloc(w->meta_k, (w->n_meta + 1) * sizeof(char *));
    if (!k) return al_err("out of memory");
    w->meta_k = k;
    char **v = realloc(w->meta_v, (w->n_meta + 1) * sizeof(char *));
    if (!v) return al_err("out of memory");
    w->meta_v = v;
    w->meta_k[w->n_meta] = strdup(key);
    w->meta_v[w->n_meta] = strdup(value);
    w->n_meta++;
    return AL_OK;
}

size_t st_writer_bytes(const st_writer *w) { return w->total; }

char *st_header_build(const st_desc *d, size_t n, const char *const *mk, const char *const *mv, size_t nm,
                      size_t *len) {
    cJSON *root = cJSON_CreateObject();
    if (nm) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        for (size_t i = 0; i < nm; i++) cJSON_AddStringToObject(meta, mk[i], mv[i]);
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(root, d[i].name);
        cJSON_AddStringToObject(t, "dtype", dt_name(d[i].dtype));
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (int k = 0; k < d[i].ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)d[i].shape[k]));
        cJSON *of = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + d[i].nbytes)));
        off += d[i].nbytes;
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!js) return NULL;
    size_t k = strlen(js), padded = (k + 7) & ~(size_t)7;
    char *out = malloc(padded + 1);
    if (out) {
        memcpy(out, js, k);
        memset(out + k, ' ', padded - k);
        out[padded] = 0;
        *len = padded;
    }
    free(js);
    return out;
}

/* The writer's JSON header (st_header_build). Caller frees. */
static char *writer_header(const st_writer *w, size_t *len) {
    st_desc *d = al_calloc(w->n, sizeof *d, "a safetensors header");
    if (!d) return NULL;
    for (size_t i = 0; i < w->n; i++)
        d[i] = (st_desc){.name = w->e[i].name, .dtype = w->e[i].dtype, .ndim = w->e[i].ndim, .shape = w->e[i].shape,
                         .nbytes = w->e[i].nbytes};
    char *h = st_header_build(d, w->n, (const char *const *)w->meta_k, (const char *const *)w->meta_v, w->n_meta, len);
    free(d);
    return h;
}

int st_writer_write(st_writer *w, const char *path) {
    size_t hlen;
    char *hdr = writer_header(w, &hlen);
    if (!hdr) return al_err("out of memory building the header of %s", path);
    char tmp[4096];
    int fd = al_temp_beside(path, tmp, sizeof tmp);
    if (fd < 0) { free(hdr); return AL_ERR; }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    bool ok = al_write_all(fd, len8, 8) && al_write_all(fd, hdr, hlen);
    for (size_t i = 0; ok && i < w->n; i++) ok = al_write_all(fd, w->e[i].bytes, w->e[i].nbytes);
    free(hdr);
    return al_temp_finish(fd, tmp, path, ok);
}

/* ================================================================ wrapping other layouts */

st_file *st_wrap(const char *path, const uint8_t *map, size_t size, size_t data_off, const st_entry *entries,
                 size_t n, bool owns_map) {
    st_file *f = calloc(1, sizeof *f);
    if (!f) { al_err("out of memory"); return NULL; }
    f->path = strdup(path);
    f->map = map;
    f->size = size;
    f->data_off = data_off;
    f->entries = calloc(n + 1, sizeof(st_entry));
    f->by_name = calloc(n + 1, sizeof(size_t));
    if (!f->path || !f->entries || !f->by_name) { st_close(f); al_err("out of memory"); return NULL; }
    for (size_t i = 0; i < n; i++) {
        f->entries[i] = entries[i];
        f->entries[i].name = strdup(entries[i].name);
        f->n++;
        if (!f->entries[i].name) { st_close(f); al_err("out of memory"); return NULL; }
    }
    qsort(f->entries, f->n, sizeof(st_entry), cmp_begin);
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = i;
    qsort_r(f->by_name, f->n, sizeof(size_t), cmp_name_idx, f->entries);
    f->owns_map = owns_map;
    return f;
}
