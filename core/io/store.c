/* store.c -- tensors by name over one safetensors file or a sharded set, lazily converted to
 * float32, with DeepSeek FP8 block-scale and compressed-tensors FP8 per-tensor / per-channel
 * dequantization and the FP4 (MXFP4, NVFP4) weights' codes and scales found and checked. */
#define _GNU_SOURCE
#include "store.h"

#include "hub.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *name;         /* points into the entry */
    const st_entry *e;
    const st_file *f;
    bool warned;              /* its NaN/Inf warning was given (once per tensor; under warn_mu) */
    bool fp4_checked;         /* its FP4 block scales were all found finite (under warn_mu) */
    float *rscale;            /* compressed-tensors FP8: its per-row scales widened (owned; under warn_mu) */
    float *bscale;            /* FP8 block scales stored BF16 / E8M0, widened to F32 (owned; under warn_mu) */
    bool bscale_checked;      /* its FP8 block scales were all found finite (under warn_mu) */
    const void *lent;         /* a copy of its bytes held elsewhere (store_lend), or NULL: the mapping */
} store_item;

static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;

struct Store {
    char *dir;
    st_file **files;
    size_t nfiles;
    store_item *items;        /* sorted by name */
    size_t n;
    HubRemote *remote;        /* a model streamed from the Hub: bytes fetched on first use (hub.h), or NULL */
};

/* ================================================================ helpers */

static bool is_dir(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode); }
static bool is_file(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISREG(sb.st_mode); }

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_item(const void *a, const void *b) {
    return strcmp(((const store_item *)a)->name, ((const store_item *)b)->name);
}

/* Adds an opened file to the store (takes ownership). */
static int store_add_file(Store *s, st_file *f) {
    st_file **nf = realloc(s->files, (s->nfiles + 1) * sizeof *nf);
    if (!nf) { st_close(f); return al_err("out of memory"); }
    s->files = nf;
    s->files[s->nfiles++] = f;
    store_item *ni = realloc(s->items, (s->n + st_count(f) + 1) * sizeof *ni);
    if (!ni) return al_err("out of memory");
    s->items = ni;
    for (size_t i = 0; i < st_count(f); i++) {
        const st_entry *e = st_entry_at(f, i);
        s->items[s->n++] = (store_item){.name = e->name, .e = e, .f = f};
    }
    return AL_OK;
}

/* Sorts the name table and rejects a tensor present in two shards. */
static int store_index(Store *s) {
    if (s->n > 1) qsort(s->items, s->n, sizeof *s->items, cmp_item);     /* items is NULL when n is 0 */
    for (size_t i = 1; i < s->n; i++)
        if (strcmp(s->items[i].name, s->items[i - 1].name) == 0)
            return al_err("tensor '%s' is in two files: %s and %s", s->items[i].name, st_path(s->items[i - 1].f),
                          st_path(s->items[i].f));
    return AL_OK;
}

/* ================================================================ opening */

/* The control character in s, or 0 (names echoed in one-line messages must be printable). */
static int control_char(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return (unsigned char)*s;
    return 0;
}

/* Parses index.json's text: one JSON value and only whitespace after it. */
static cJSON *parse_index(const char *index_path, const char *text) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, false);
    if (!root) { al_err("%s: not valid JSON", index_path); return NULL; }
    while (end && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end && *end) {
        al_err("%s: not valid JSON: text after the JSON value at byte %zu", index_path, (size_t)(end - text));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* Opens the shards named by an index.json and checks each listed tensor is where it says. */
static int open_index(Store *s, const char *index_path) {
    size_t len = 0;
    char *text = al_read_file_max(index_path, &len, AL_CAP_INDEX, "index");
    if (!text) return AL_ERR;
    if (strlen(text) != len) {
        al_err("%s: not valid JSON: a NUL byte at byte %zu", index_path, strlen(text));
        free(text);
        return AL_ERR;
    }
    cJSON *root = parse_index(index_path, text);
    free(text);
    if (!root) return AL_ERR;
    int rc = AL_OK;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) { rc = al_err("%s: no \"weight_map\" object", index_path); goto done; }
    if (!wm->child) {
        rc = al_err("%s: \"weight_map\" is empty: the index lists no tensors (remove it to open the *.safetensors "
                    "files of the folder, or list each tensor's shard)", index_path);
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) {          /* open each distinct shard once */
        int cc = control_char(it->string);
        if (cc || (cJSON_IsString(it) && (cc = control_char(it->valuestring)))) {
            rc = al_err("%s: a weight_map name has control character 0x%02x (names must be printable)", index_path, cc);
            goto done;
        }
        if (!cJSON_IsString(it)) { rc = al_err("%s: weight_map['%s'] is not a file name", index_path, it->string); goto done; }
        if (strchr(it->valuestring, '/')) { rc = al_err("%s: shard name '%s' has a '/'", index_path, it->valuestring); goto done; }
        bool seen = false;
        for (size_t i = 0; i < s->nfiles && !seen; i++) seen = strcmp(basename((char *)st_path(s->files[i])), it->valuestring) == 0;
        if (seen) continue;
        char *p = al_asprintf("%s/%s", s->dir, it->valuestring);
        st_file *f;
        rc = p ? st_open(p, &f) : AL_ERR;
        free(p);
        if (rc != AL_OK) { al_err_ctx("%s lists a shard that cannot be read", index_path); goto done; }
        if ((rc = store_add_file(s, f)) != AL_OK) goto done;
    }
    if ((rc = store_index(s)) != AL_OK) goto done;
    cJSON_ArrayForEach(it, wm) {
        const st_entry *e = NULL; const st_file *f = NULL;
        if (store_entry(s, it->string, &e, &f) != AL_OK ||
            strcmp(basename((char *)st_path(f)), it->valuestring) != 0) {
            rc = al_err("%s: tensor '%s' should be in %s but that shard lacks it", index_path, it->string, it->valuestring);
            goto done;
        }
    }
done:
    cJSON_Delete(root);
    return rc;
}

/* Opens every *.safetensors in a folder (sorted), for folders without an index. */
static int open_all_in_dir(Store *s) {
    struct dirent **list;
    int n = scandir(s->dir, &list, NULL, alphasort);
    if (n < 0) return al_err("%s: cannot list: %s", s->dir, strerror(errno));
    int rc = AL_OK, found = 0;
    for (int i = 0; i < n; i++) {
        if (rc == AL_OK && ends_with(list[i]->d_name, ".safetensors")) {
            char *p = al_asprintf("%s/%s", s->dir, list[i]->d_name);
            st_file *f;
            rc = p ? st_open(p, &f) : AL_ERR;
            free(p);
            if (rc == AL_OK) rc = store_add_file(s, f);
            found++;
        }
        free(list[i]);
    }
    free(list);
    if (rc == AL_OK && !found)
        rc = al_err("%s: no model.safetensors, no model.safetensors.index.json and no *.safetensors file", s->dir);
    return rc == AL_OK ? store_index(s) : rc;
}

int store_open(const char *path, Store **out) {
    *out = NULL;
    Store *s = al_calloc(1, sizeof *s, "a tensor store");
    if (!s) return AL_ERR;
    int rc;
    if (is_dir(path)) {
        s->dir = al_strdup(path);
        char *index = al_asprintf("%s/model.safetensors.index.json", path);
        char *single = al_asprintf("%s/model.safetensors", path);
        if (index && is_file(index)) rc = open_index(s, index);
        else if (single && is_file(single)) {
            st_file *f;
            rc = st_open(single, &f);
            if (rc == AL_OK) rc = store_add_file(s, f);
            if (rc == AL_OK) rc = store_index(s);
        } else rc = open_all_in_dir(s);
        free(index);
        free(single);
        if (rc == AL_OK) s->remote = hub_remote_for_dir(path);
    } else if (is_file(path)) {
        char *tmp = al_strdup(path);
        s->dir = al_strdup(dirname(tmp));
        free(tmp);
        st_file *f;
        rc = st_open(path, &f);
        if (rc == AL_OK) rc = store_add_file(s, f);
        if (rc == AL_OK) rc = store_index(s);
    } else {
        rc = al_err("%s: no such file or folder", path);
    }
    if (rc != AL_OK) { store_free(s); return rc; }
    *out = s;
    return AL_OK;
}

/* Wraps an st_file made elsewhere (llama2.c) as a one-file store; takes ownership. */
int store_from_file(st_file *f, const char *dir, Store **out) {
    *out = NULL;
    Store *s = al_calloc(1, sizeof *s, "a tensor store");
    if (!s) { st_close(f); return AL_ERR; }
    s->dir = al_strdup(dir);
    int rc = store_add_file(s, f);
    if (rc == AL_OK) rc = store_index(s);
    if (rc != AL_OK) { store_free(s); return rc; }
    *out = s;
    return AL_OK;
}

void store_free(Store *s) {
    if (!s) return;
    for (size_t i = 0; i < s->nfiles; i++) st_close(s->files[i]);
    for (size_t i = 0; i < s->n; i++) { free(s->items[i].rscale); free(s->items[i].bscale); }
    hub_remote_free(s->remote);
    free(s->files);
    free(s->items);
    free(s->dir);
    free(s);
}

/* ================================================================ lookup */

size_t store_count(const Store *s) { return s->n; }
const char *store_name_at(const Store *s, size_t i) { return i < s->n ? s->items[i].name : NULL; }
size_t store_nfiles(const Store *s) { return s->nfiles; }
const char *store_file_at(const Store *s, size_t i) { return i < s->nfiles ? st_path(s->files[i]) : NULL; }
const char *store_dir(const Store *s) { return s->dir; }

static const store_item *find_item(const Store *s, const char *name) {
    store_item key = {.name = name};
    if (s->n == 0) return NULL;                           /* bsearch must not see a NULL base */
    return bsearch(&key, s->items, s->n, sizeof *s->items, cmp_item);
}

/* "<name><suf>"'s item, or NULL. */
static const store_item *find_suffixed(const Store *s, const char *name, const char *suf) {
    char buf[640];
    if ((size_t)snprintf(buf, sizeof buf, "%s%s", name, suf) >= sizeof buf) return NULL;
    return find_item(s, buf);
}

bool store_has(const Store *s, const char *name) {
    return find_item(s, name) != NULL || find_suffixed(s, name, "_blocks") != NULL ||
           find_suffixed(s, name, "_packed") != NULL;
}

int store_entry(const Store *s, const char *name, const st_entry **e, const st_file **f) {
    const store_item *it = find_item(s, name);
    if (!it) it = find_suffixed(s, name, "_blocks");        /* MXFP4: the codes stand for the weight */
    if (!it) it = find_suffixed(s, name, "_packed");        /* compressed-tensors' packed codes */
    if (!it) {
        if (s->nfiles == 1) return al_err("tensor '%s' not found in %s", name, st_path(s->files[0]));
        return al_err("tensor '%s' not found in any of the %zu shard%s in %s", name, s->nfiles, al_s(s->nfiles), s->dir);
    }
    *e = it->e;
    if (f) *f = it->f;       /* the caller will read the bytes: a streamed model fetches them now */
    if (f && s->remote && hub_remote_ensure(s->remote, st_path(it->f), it->e->begin, it->e->end, name) != AL_OK)
        return AL_ERR;
    return AL_OK;
}

void store_lend(const Store *s, const char *name, const void *bytes) {
    store_item *it = (store_item *)find_item(s, name);
    if (it) __atomic_store_n(&it->lent, bytes, __ATOMIC_RELEASE);
}

const void *store_bytes(const Store *s, const char *name, const st_entry *e, const st_file *f) {
    const store_item *it = find_item(s, name);
    const void *lent = it && it->e == e ? __atomic_load_n(&it->lent, __ATOMIC_ACQUIRE) : NULL;
    return lent ? lent : st_data(f, e);
}

bool store_local_bytes(const Store *s, uint64_t *local, uint64_t *total) {
    if (!s->remote) return false;
    hub_remote_local(s->remote, local, total);
    return true;
}

int store_shape2(const Store *s, const char *name, size_t *rows, size_t *cols) {
    const st_entry *e = NULL;
    dt_fp4 q;
    if (store_fp4(s, name, &q) != AL_OK) return AL_ERR;
    if (q.enc != DT_FP4_NONE) { *rows = q.rows; *cols = q.cols; return AL_OK; }
    if (store_entry(s, name, &e, NULL) != AL_OK) return AL_ERR;
    if (e->ndim == 1) { *rows = 1; *cols = e->shape[0]; return AL_OK; }
    if (e->ndim == 0) { *rows = 1; *cols = 1; return AL_OK; }
    if (e->ndim != 2) return al_err("tensor '%s' has %d dim%s, expected a matrix", name, e->ndim, al_s(e->ndim));
    *rows = e->shape[0];
    *cols = e->shape[1];
    return AL_OK;
}

void store_release_prefix(const Store *s, const char *prefix) {
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->items[i].name, prefix, pl) == 0) st_release(s->items[i].f, s->items[i].e);
}

/* ================================================================ reading */

/* An FP8 block-scale grid of n values at p (item it, under warn_mu), once: widened to F32 when it is
 * BF16 / E8M0 (it->bscale), every value finite (a NaN / Inf scale, E8M0's code 0xFF, is
 * refused naming the tensor and the block). */
static int fp8_grid_check(store_item *it, const void *p, size_t n) {
    const st_entry *e = it->e;
    size_t cols = e->shape[1];
    float *v = e->dtype == DT_F32 ? NULL : malloc(n * sizeof *v);
    if (e->dtype != DT_F32 && !v) return al_err("out of memory for the scales '%s'", it->name);
    for (size_t i = 0; i < n; i++) {
        float x;
        if (e->dtype == DT_F8_E8M0) x = dt_e8m0_to_f32(((const uint8_t *)p)[i]);
        else if (e->dtype == DT_F32) memcpy(&x, (const uint8_t *)p + 4 * i, 4);
        else dt_to_f32(e->dtype, (const uint8_t *)p + 2 * i, 1, &x);
        if (!isfinite(x)) {
            free(v);
            return al_err("'%s' block [%zu, %zu] is %g%s: an FP8 block scale must be finite", it->name, i / cols, i % cols,
                          (double)x, e->dtype == DT_F8_E8M0 ? " (E8M0 code 0xff)" : "");
        }
        if (v) v[i] = x;
    }
    it->bscale = v;
    it->bscale_checked = true;
    return AL_OK;
}

/* Finds and checks the block-scale tensor of an FP8 weight of shape (R, C). */
/* Whether "<name>_scale" of FP8 weight (R, C) is a 128 x 128 block grid (compressed-tensors' strategy
 * "block", FP8_BLOCK) rather than one scale per tensor or per row (a [1, 1] grid reads the same as
 * either). */
static bool ct_block_grid(const st_entry *e, size_t R, size_t C) {
    size_t sr = dt_fp8_nblocks(R), sc = dt_fp8_nblocks(C);
    bool per_row = e->ndim == 2 && e->shape[1] == 1 && (e->shape[0] == R || e->shape[0] == 1);
    return e->ndim == 2 && e->shape[0] == sr && e->shape[1] == sc && !per_row;
}

/* DeepSeek-V4's release names a weight's block scales "<stem>.scale" beside "<stem>.weight" (E8M0): that name into buf
 * when the store has it and no "<name>_scale_inv"; false otherwise. */
static bool v4_scale_name(const Store *s, const char *name, char *buf, size_t cap) {
    size_t n = strlen(name), w = strlen(".weight");
    if (n <= w || strcmp(name + n - w, ".weight") || find_suffixed(s, name, "_scale_inv") || n - w + 7 > cap) return false;
    snprintf(buf, cap, "%.*s.scale", (int)(n - w), name);
    return store_has(s, buf);
}

int store_fp8_scale(const Store *s, const char *name, size_t R, size_t C, const void **scale, size_t *scols) {
    const store_item *ct = find_suffixed(s, name, "_scale_inv") ? NULL : find_suffixed(s, name, "_scale");
    char v4[256];
    char *sname = v4_scale_name(s, name, v4, sizeof v4) ? al_strdup(v4)
                  : al_asprintf(ct && ct_block_grid(ct->e, R, C) ? "%s_scale" : "%s_scale_inv", name);
    if (!sname) return AL_ERR;
    const st_entry *se; const st_file *sf;
    int rc = store_entry(s, sname, &se, &sf);
    if (rc != AL_OK && store_has(s, sname)) { free(sname); return rc; }   /* there, but not readable (a streamed model's fetch) */
    if (rc != AL_OK) {
        rc = al_err("FP8 tensor '%s' has no block scales '%s' (DeepSeek FP8 checkpoints store them beside each weight)",
                    name, sname);
        free(sname);
        return rc;
    }
    size_t sr = dt_fp8_nblocks(R), sc = dt_fp8_nblocks(C);
    size_t er = se->ndim == 2 ? se->shape[0] : 0, ec = se->ndim == 2 ? se->shape[1] : 0;
    bool dt_ok = se->dtype == DT_F32 || se->dtype == DT_BF16 || se->dtype == DT_F8_E8M0;    /* tensor.h's publishers */
    if (!dt_ok || er != sr || ec != sc) {
        rc = al_err("'%s' should be F32 of shape [%zu, %zu] (ceil(%zu/128) x ceil(%zu/128); BF16 or F8_E8M0 also read), "
                    "found %s of shape [%zu, %zu]", sname, sr, sc, R, C, dt_name(se->dtype), er, ec);
        free(sname);
        return rc;
    }
    pthread_mutex_lock(&warn_mu);
    store_item *it = (store_item *)find_item(s, sname);
    rc = !it || it->bscale_checked ? AL_OK : fp8_grid_check(it, st_data(sf, se), sr * sc);
    *scale = it && it->bscale ? (const void *)it->bscale : st_data(sf, se);   /* F32 in the file may be unaligned: memcpy */
    pthread_mutex_unlock(&warn_mu);
    free(sname);
    *scols = sc;
    return rc;
}

/* The scale "<name>_scale" of a compressed-tensors FP8 weight (R rows) widened to R floats: [] or [1]
 * repeated, [R, 1] or [R] per row; F32, BF16 or F16; every value finite. */
static int fp8_rscale_build(const store_item *sc, const char *name, size_t R, float **out) {
    const st_entry *e = sc->e;
    size_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
    bool shape_ok = (e->ndim == 0 || (e->ndim == 1 && (n == 1 || n == R)) || (e->ndim == 2 && e->shape[1] == 1 && (n == 1 || n == R)));
    if (!shape_ok || (e->dtype != DT_F32 && e->dtype != DT_BF16 && e->dtype != DT_F16))
        return al_err("'%s' should be F32, BF16 or F16 of shape [], [1] or [%zu, 1] (the scale of FP8 weight '%s', %zu row%s), "
                      "found %s with %zu value%s", sc->name, R, name, R, al_s(R), dt_name(e->dtype), n, al_s(n));
    float *v = malloc(R * sizeof *v), one;
    if (!v) return al_err("out of memory for the scales of '%s'", name);
    if (dt_to_f32(e->dtype, st_data(sc->f, e), n, n == 1 ? &one : v) != AL_OK) { free(v); return AL_ERR; }
    if (n == 1) for (size_t r = 0; r < R; r++) v[r] = one;
    for (size_t r = 0; r < R; r++)
        if (!isfinite(v[r])) {
            float bad = v[r];
            free(v);
            return al_err("'%s' row %zu is %g: the scale of FP8 weight '%s' must be finite", sc->name, r, (double)bad, name);
        }
    *out = v;
    return AL_OK;
}

int store_fp8_rscale(const Store *s, const char *name, size_t R, const float **rscale) {
    *rscale = NULL;
    const store_item *w = find_item(s, name), *sc = find_suffixed(s, name, "_scale");
    if (!w || w->e->dtype != DT_F8_E4M3 || !sc || find_suffixed(s, name, "_scale_inv")) return AL_OK;
    if (w->e->ndim == 2 && ct_block_grid(sc->e, w->e->shape[0], w->e->shape[1])) return AL_OK;   /* store_fp8_scale's */
    const st_entry *e; const st_file *f;
    char *sname = al_asprintf("%s_scale", name);
    int rc = sname ? store_entry(s, sname, &e, &f) : AL_ERR;     /* a streamed model fetches its bytes */
    free(sname);
    if (rc != AL_OK) return rc;
    pthread_mutex_lock(&warn_mu);
    if (!w->rscale) rc = fp8_rscale_build(sc, name, R, &((store_item *)w)->rscale);
    *rscale = w->rscale;
    pthread_mutex_unlock(&warn_mu);
    return rc;
}

/* ---------------------------------------------------------------- FP4 weights */

/* "[a, b, c]" of an entry's shape (and its dtype before it). */
static const char *shape_str(const st_entry *e, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "%s [", dt_name(e->dtype));
    for (int k = 0; k < e->ndim && at < n; k++) at += (size_t)snprintf(buf + at, n - at, k ? ", %zu" : "%zu", e->shape[k]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

/* MXFP4: "<name>_blocks" U8 (R, G, 16) and "<name>_scales" U8 (R, G). */
static int fp4_mxfp4(const Store *s, const char *name, const store_item *b, dt_fp4 *q) {
    char sh[128];
    const st_entry *e = b->e;
    if (e->dtype != DT_U8 || e->ndim != 3 || e->shape[2] != 16)
        return al_err("MXFP4 tensor '%s' should be U8 of shape [rows, cols/32, 16], found %s%s", b->name,
                      shape_str(e, sh, sizeof sh), e->ndim == 4 ? " (stacked experts: the forward pass reads them per expert)" : "");
    const store_item *sc = find_suffixed(s, name, "_scales");
    if (!sc) return al_err("MXFP4 tensor '%s' has no block scales '%s_scales'", b->name, name);
    size_t R = e->shape[0], G = e->shape[1];
    if (sc->e->dtype != DT_U8 || sc->e->ndim != 2 || sc->e->shape[0] != R || sc->e->shape[1] != G)
        return al_err("'%s' should be U8 (E8M0) of shape [%zu, %zu] (one per 32 values of '%s'), found %s", sc->name, R,
                      G, b->name, shape_str(sc->e, sh, sizeof sh));
    *q = (dt_fp4){.enc = DT_FP4_MXFP4, .rows = R, .cols = G * 32, .codes = st_data(b->f, e),
                  .scale = st_data(sc->f, sc->e), .gscale = 1.0f};
    return AL_OK;
}

/* NVFP4: codes w (ModelOpt: "<name>"; compressed-tensors: "<name>_packed") U8 (R, C/2),
 * "<name>_scale" F8_E4M3 (R, C/16), the global scale "<name>_scale_2" (ModelOpt, multiplies) or
 * "<name>_global_scale" (compressed-tensors, divides) F32 of one value. */
static int fp4_nvfp4(const Store *s, const char *name, const store_item *w, const store_item *sc, dt_fp4 *q) {
    char sh[128];
    bool ct = strcmp(w->name, name) != 0;
    if (w->e->dtype != DT_U8 || w->e->ndim != 2 || (w->e->shape[1] * 2) % 16)
        return al_err("NVFP4 tensor '%s' should be U8 of shape [rows, cols/2] with cols a multiple of 16, found %s",
                      w->name, shape_str(w->e, sh, sizeof sh));
    size_t R = w->e->shape[0], C = w->e->shape[1] * 2;
    if (sc->e->dtype != DT_F8_E4M3 || sc->e->ndim != 2 || sc->e->shape[0] != R || sc->e->shape[1] != C / 16)
        return al_err("'%s' should be F8_E4M3 of shape [%zu, %zu] (one per 16 values of '%s', [%zu, %zu]), found %s",
                      sc->name, R, C / 16, name, R, C, shape_str(sc->e, sh, sizeof sh));
    const char *gs_suf = ct ? "_global_scale" : "_scale_2";
    const store_item *g = find_suffixed(s, name, gs_suf);
    if (!g) return al_err("NVFP4 tensor '%s' has no per-tensor scale '%s%s'", name, name, gs_suf);
    if (g->e->dtype != DT_F32 || st_numel(g->e) != 1)
        return al_err("'%s' should be F32 of one value, found %s", g->name, shape_str(g->e, sh, sizeof sh));
    float gs;
    memcpy(&gs, st_data(g->f, g->e), sizeof gs);
    if (!isfinite(gs) || gs <= 0)
        return al_err("'%s' is %g: the per-tensor scale of '%s' must be finite and positive", g->name, (double)gs, name);
    *q = (dt_fp4){.enc = DT_FP4_NVFP4, .rows = R, .cols = C, .codes = st_data(w->f, w->e),
                  .scale = st_data(sc->f, sc->e), .gscale = gs, .gdiv = ct};
    return AL_OK;
}

/* compressed-tensors' pack-quantized INT4 (tensor.h): "<name>_packed" I32 (R, C/8), "<name>_scale"
 * BF16/F16/F32 (R, C/32), "<name>_shape" I32/I64 [2] = (R, C); no "<name>_zero_point". */
static int fp4_int4(const Store *s, const char *name, const store_item *w, dt_fp4 *q) {
    const store_item *sc = find_suffixed(s, name, "_scale"), *sh = find_suffixed(s, name, "_shape");
    if (!sc || !sh) return al_err("INT4 tensor '%s' has no %s '%s%s'", w->name, sc ? "shape" : "group scales", name,
                                  sc ? "_shape" : "_scale");
    if (find_suffixed(s, name, "_zero_point"))
        return al_err("INT4 tensor '%s' has a zero point: asymmetric pack-quantized weights are not read", w->name);
    const st_entry *e = w->e, *se = sc->e, *he = sh->e;
    int64_t d[2] = {0, 0};
    if ((he->dtype != DT_I64 && he->dtype != DT_I32) || st_numel(he) != 2)
        return al_err("'%s' should be I64 or I32 of 2 values (the weight's shape), found %s", sh->name, dt_name(he->dtype));
    for (int i = 0; i < 2; i++) {
        int32_t v32;
        if (he->dtype == DT_I64) memcpy(&d[i], (const uint8_t *)st_data(sh->f, he) + 8 * i, 8);
        else memcpy(&v32, (const uint8_t *)st_data(sh->f, he) + 4 * i, 4), d[i] = v32;
    }
    if (d[0] <= 0 || d[1] <= 0 || d[1] % 32 || e->ndim != 2 || e->shape[0] != (size_t)d[0] || e->shape[1] != (size_t)d[1] / 8)
        return al_err("INT4 tensor '%s' should be I32 of shape [rows, cols/8] with cols a multiple of 32 for its shape "
                      "[%lld, %lld] ('%s')", w->name, (long long)d[0], (long long)d[1], sh->name);
    size_t R = (size_t)d[0], C = (size_t)d[1];
    if ((se->dtype != DT_BF16 && se->dtype != DT_F16 && se->dtype != DT_F32) || se->ndim != 2 || se->shape[0] != R ||
        se->shape[1] != C / 32)
        return al_err("'%s' should be BF16, F16 or F32 of shape [%zu, %zu] (one per 32 values of '%s', [%zu, %zu]), found %s",
                      sc->name, R, C / 32, name, R, C, dt_name(se->dtype));
    *q = (dt_fp4){.enc = DT_FP4_INT4, .rows = R, .cols = C, .codes = st_data(w->f, e), .scale = st_data(sc->f, se),
                  .gscale = 1.0f, .sdt = se->dtype};
    return AL_OK;
}

/* Every block scale of q finite (once per tensor: the flag of item it). */
static int fp4_check_scales(const store_item *it, const char *name, const dt_fp4 *q) {
    pthread_mutex_lock(&warn_mu);
    bool done = it->fp4_checked;
    pthread_mutex_unlock(&warn_mu);
    if (done) return AL_OK;
    size_t nb = q->cols / dt_fp4_traits(q->enc)->block;
    for (size_t r = 0; r < q->rows; r++)
        for (size_t b = 0; b < nb; b++)
            if (!isfinite(dt_fp4_block_scale(q, r, b)) && q->enc == DT_FP4_INT4)
                return al_err("INT4 tensor '%s': group scale [%zu, %zu] is %g; a scale must be finite", name, r, b,
                              (double)dt_fp4_block_scale(q, r, b));
            else if (!isfinite(dt_fp4_block_scale(q, r, b)))
                return al_err("%s tensor '%s': block scale [%zu, %zu] (code 0x%02x) is NaN; a NaN scale is not a weight",
                              dt_fp4_traits(q->enc)->name, name, r, b, q->scale[r * nb + b]);
    pthread_mutex_lock(&warn_mu);
    ((store_item *)it)->fp4_checked = true;
    pthread_mutex_unlock(&warn_mu);
    return AL_OK;
}

int store_fp4(const Store *s, const char *name, dt_fp4 *q) {
    memset(q, 0, sizeof *q);
    q->enc = DT_FP4_NONE;
    const store_item *w = find_item(s, name), *sc;
    int rc = AL_OK;
    if (!w && (w = find_suffixed(s, name, "_blocks"))) rc = fp4_mxfp4(s, name, w, q);
    else if (w && w->e->dtype == DT_U8 && (sc = find_suffixed(s, name, "_scale"))) rc = fp4_nvfp4(s, name, w, sc, q);
    else if (!w && (w = find_suffixed(s, name, "_packed")) && w->e->dtype == DT_U8 && find_suffixed(s, name, "_global_scale") &&
             (sc = find_suffixed(s, name, "_scale")))
        rc = fp4_nvfp4(s, name, w, sc, q);      /* compressed-tensors' nvfp4-pack-quantized */
    else if (w && w->e->dtype == DT_I32 && ends_with(w->name, "_packed")) rc = fp4_int4(s, name, w, q);
    else return AL_OK;
    if (rc == AL_OK) rc = fp4_check_scales(w, name, q);
    if (rc != AL_OK) q->enc = DT_FP4_NONE;
    return rc;
}

int store_fp4_experts(const Store *s, const char *name, size_t *E, dt_fp4 *q) {
    char sh[128];
    memset(q, 0, sizeof *q);
    q->enc = DT_FP4_NONE;
    const store_item *b = find_item(s, name) ? NULL : find_suffixed(s, name, "_blocks");
    if (!b || b->e->ndim != 4) return AL_OK;
    const st_entry *e = b->e;
    if (e->dtype != DT_U8 || e->shape[3] != 16)
        return al_err("MXFP4 experts '%s' should be U8 of shape [experts, rows, cols/32, 16], found %s", b->name,
                      shape_str(e, sh, sizeof sh));
    const store_item *sc = find_suffixed(s, name, "_scales");
    if (!sc) return al_err("MXFP4 experts '%s' have no block scales '%s_scales'", b->name, name);
    const st_entry *se = sc->e;
    if (se->dtype != DT_U8 || se->ndim != 3 || se->shape[0] != e->shape[0] || se->shape[1] != e->shape[1] ||
        se->shape[2] != e->shape[2])
        return al_err("'%s' should be U8 (E8M0) of shape [%zu, %zu, %zu] (one per 32 values of '%s'), found %s", sc->name,
                      e->shape[0], e->shape[1], e->shape[2], b->name, shape_str(se, sh, sizeof sh));
    *E = e->shape[0];
    *q = (dt_fp4){.enc = DT_FP4_MXFP4, .rows = e->shape[0] * e->shape[1], .cols = e->shape[2] * 32,
                  .codes = st_data(b->f, e), .scale = st_data(sc->f, se), .gscale = 1.0f};
    int rc = fp4_check_scales(b, name, q);
    if (rc != AL_OK) q->enc = DT_FP4_NONE;
    return rc;
}

/* The block as float32, dequantized, without the NaN/Inf check (store_read_block's reader). */
static int read_block(const Store *s, const char *name, size_t r0, size_t nr, size_t c0, size_t nc, Mat **out) {
    *out = NULL;
    const st_entry *e; const st_file *f;
    size_t R = 0, C = 0;
    if (store_entry(s, name, &e, &f) != AL_OK || store_shape2(s, name, &R, &C) != AL_OK) return AL_ERR;
    if (r0 > R || nr > R - r0) return al_err("tensor '%s': rows %zu..%zu out of range (it has %zu row%s)", name, r0, r0 + nr, R, al_s(R));
    if (c0 > C || nc > C - c0) return al_err("tensor '%s': columns %zu..%zu out of range (it has %zu)", name, c0, c0 + nc, C);
    dt_fp4 q;
    if (store_fp4(s, name, &q) != AL_OK) return AL_ERR;
    if (q.enc == DT_FP4_NONE && !dt_is_float(e->dtype))
        return al_err("tensor '%s' is %s, not a float weight", name, dt_name(e->dtype));
    Mat *m = mat_new(nr, nc);
    if (!m) return al_err_ctx("tensor '%s'", name);
    const uint8_t *base = st_data(f, e);
    int rc = AL_OK;
    if (q.enc != DT_FP4_NONE) {
        dt_fp4_dequant(&q, r0, nr, c0, nc, m->data, nc);
    } else if (e->dtype == DT_F8_E4M3) {
        const void *scale = NULL; size_t scols = 0;
        const float *rs = NULL;
        rc = store_fp8_rscale(s, name, R, &rs);
        if (rc == AL_OK && rs) dt_fp8_dequant_rows(base, C, rs, r0, nr, c0, nc, m->data, nc);
        else if (rc == AL_OK) rc = store_fp8_scale(s, name, R, C, &scale, &scols);
        if (rc == AL_OK && !rs) dt_fp8_dequant(base, C, scale, scols, r0, nr, c0, nc, m->data, nc);
    } else if (nc == C) {
        rc = dt_to_f32(e->dtype, base + r0 * C * dt_size(e->dtype), nr * C, m->data);
    } else {
        for (size_t i = 0; i < nr && rc == AL_OK; i++)   /* one row's column range at a time */
            rc = dt_to_f32(e->dtype, base + ((r0 + i) * C + c0) * dt_size(e->dtype), nc, m->data + i * nc);
    }
    if (rc != AL_OK) { mat_free(m); return al_err_ctx("tensor '%s'", name); }
    *out = m;
    return AL_OK;
}

/* NaN/Inf values of the whole tensor: their count and the first one's position, read 256 rows at a
 * time (only on the error path: a block read found one). */
static void count_nonfinite(const Store *s, const char *name, size_t R, size_t C, size_t *count, size_t *r, size_t *c) {
    *count = 0;
    for (size_t r0 = 0; r0 < R; r0 += 256) {
        Mat *m;
        size_t nr = R - r0 < 256 ? R - r0 : 256;
        if (read_block(s, name, r0, nr, 0, C, &m) != AL_OK) { al_err_clear(); return; }
        for (size_t k = 0; k < nr * C; k++)
            if (!isfinite(m->data[k]) && (*count)++ == 0) { *r = r0 + k / C; *c = k % C; }
        mat_free(m);
    }
}

/* Warns once per tensor when a block read from it holds NaN or Inf: the whole tensor's count and
 * first bad element, so reading it head by head (or stripe by stripe) gives one warning, not one
 * per block. */
static void warn_nonfinite(const Store *s, const char *name, const Mat *m) {
    if (mat_first_nonfinite(m) == (size_t)-1) return;
    store_item *it = (store_item *)find_item(s, name);
    pthread_mutex_lock(&warn_mu);
    bool first = it && !it->warned;
    if (it) it->warned = true;
    pthread_mutex_unlock(&warn_mu);
    if (!first) return;
    size_t R = 0, C = 0, count = 0, r = 0, c = 0;
    if (store_shape2(s, name, &R, &C) == AL_OK) count_nonfinite(s, name, R, C, &count, &r, &c);
    al_warn("tensor '%s' has %zu NaN/Inf values (first at [%zu, %zu]); spectra and ranks of heads that use it are meaningless",
            name, count, r, c);
}

int store_read_block(const Store *s, const char *name, size_t r0, size_t nr, size_t c0, size_t nc, Mat **out) {
    int rc = read_block(s, name, r0, nr, c0, nc, out);
    if (rc == AL_OK) warn_nonfinite(s, name, *out);
    return rc;
}

int store_read_rows(const Store *s, const char *name, size_t r0, size_t nr, Mat **out) {
    size_t R = 0, C = 0;
    if (store_shape2(s, name, &R, &C) != AL_OK) { *out = NULL; return AL_ERR; }
    return store_read_block(s, name, r0, nr, 0, C, out);
}

int store_read(const Store *s, const char *name, Mat **out) {
    size_t R = 0, C = 0;
    if (store_shape2(s, name, &R, &C) != AL_OK) { *out = NULL; return AL_ERR; }
    return store_read_rows(s, name, 0, R, out);
}
