/* ckpt_write.c -- the one checkpoint writer: destination checks, the staging folder and its swap
 * into place, weight shards streamed from their sources with the index, method files, JSON
 * documents and the source's auxiliary files. See ckpt_write.h. */
#define _GNU_SOURCE
#include "ckpt_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

#define SHARD_TMP ".shard-%05zu"       /* a closed weight shard in staging, before it is named */

typedef struct {
    char *name;
    dt_type dtype;
    int ndim;
    size_t shape[ST_MAX_DIMS];
    const void *data;         /* borrowed or owned bytes */
    void *owned;              /* freed once written */
    size_t nbytes;
    ckpt_fill_fn fill;        /* lazy: computes the bytes at write time from ud (owned) */
    void *ud;
} Ent;

typedef struct {
    Ent *e;
    size_t n, cap;
    char **mk, **mv;          /* __metadata__ */
    size_t nm;
    char *relpath;            /* method file; NULL: a weight shard */
} StFile;

typedef struct {
    char *name;
    size_t shard;
} MapItem;

struct CkptWriter {
    char *dir, *parent, *staging;
    char *made;               /* the first ancestor ckpt_begin created (removed by abort), or NULL */
    bool force, always_index;
    StFile cur;
    size_t nshards, total, files;
    MapItem *map;
    size_t nmap, capmap;
    void *scratch;            /* the lazy tensors' bytes, one at a time (reused: no fresh pages per tensor) */
    size_t scratch_cap;
};

/* ================================================================ destination checks */

/* The resolved path of dir, or of its nearest existing ancestor when dir does not exist (*exact
 * false). Empty when nothing resolves. */
static void real_or_ancestor(const char *dir, char out[PATH_MAX], bool *exact) {
    *exact = realpath(dir, out) != NULL;
    if (*exact) return;
    out[0] = 0;
    char *p = al_strdup(dir);
    if (!p) return;
    for (;;) {
        char *slash = strrchr(p, '/');
        if (!slash) { if (!realpath(".", out)) out[0] = 0; break; }
        if (slash == p) { if (!realpath("/", out)) out[0] = 0; break; }
        *slash = 0;
        if (realpath(p, out)) break;
    }
    free(p);
}

/* True when path a is b or inside b (both resolved). */
static bool path_under(const char *a, const char *b) {
    size_t n = strlen(b);
    return a[0] && b[0] && !strncmp(a, b, n) && (a[n] == 0 || a[n] == '/' || b[n - 1] == '/');
}

/* dir must be neither the source's folder, nor inside it, nor (it would be replaced) hold it. */
static int check_source(const char *dir, const char *src_path) {
    char src[PATH_MAX], dst[PATH_MAX];
    struct stat sb;
    if (!src_path || !*src_path || !realpath(src_path, src)) return AL_OK;
    if (stat(src, &sb) == 0 && !S_ISDIR(sb.st_mode)) {        /* a file model: its folder */
        char *slash = strrchr(src, '/');
        if (slash) slash[slash == src ? 1 : 0] = 0;
    }
    bool exact;
    real_or_ancestor(dir, dst, &exact);
    if (path_under(dst, src) && exact && !strcmp(dst, src))
        return al_err("export folder %s is the source model's own folder: attnlab never writes into a source "
                      "checkpoint; give a new folder elsewhere", dir);
    if (path_under(dst, src))
        return al_err("export folder %s is inside the source model's folder %s: attnlab never writes into a "
                      "source checkpoint; give a new folder elsewhere", dir, src);
    if (exact && path_under(src, dst))
        return al_err("export folder %s holds the source model's folder %s: attnlab never replaces a source "
                      "checkpoint; give a new folder elsewhere", dir, src);
    return AL_OK;
}

static bool dir_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d))) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

/* Checks an export destination (creates nothing). */
static int check_dest(const char *dir, const CkptOpts *o) {
    if (!dir || !*dir) return al_err("no folder given: name the new folder to write");
    struct stat sb;
    bool exists = stat(dir, &sb) == 0;
    if (exists && !S_ISDIR(sb.st_mode))
        return al_err("export destination %s exists and is not a folder: give a new folder", dir);
    if (check_source(dir, o->src)) return AL_ERR;
    if (!exists || o->force || dir_empty(dir)) return AL_OK;
    if (access(dir, R_OK) != 0) return al_err("export folder %s cannot be read: %s", dir, strerror(errno));
    return al_err("folder %s already exists and is not empty (nothing was written): give a new or empty folder%s",
                  dir, o->can_force ? ", or add `force` to replace it as a whole" : "; remove it or pick another");
}

/* ================================================================ staging */

/* dir without trailing slashes split into parent and base (caller frees both). */
static int split_dir(const char *dir, char **parent, char **base) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    char *a = strndup(dir, n), *b = strndup(dir, n);
    *parent = a ? al_strdup(dirname(a)) : NULL;
    *base = b ? al_strdup(basename(b)) : NULL;
    free(a); free(b);
    if (!*parent || !*base) { free(*parent); free(*base); return al_err("out of memory"); }
    if (!strcmp(*base, "/") || !strcmp(*base, ".") || !strcmp(*base, "..")) {
        free(*parent); free(*base);
        return al_err("export folder %s: give a new folder by name (not /, . or ..)", dir);
    }
    return AL_OK;
}

/* Creates parent with its missing ancestors; *made: the first one created (NULL: none). */
static int make_parent(const char *parent, char **made) {
    *made = NULL;
    struct stat sb;
    if (stat(parent, &sb) == 0) return AL_OK;
    char *p = al_strdup(parent);
    if (!p) return AL_ERR;
    for (;;) {                                        /* climb to the topmost missing ancestor */
        char *q = al_strdup(p);
        char *up = q ? dirname(q) : NULL;
        bool stop = !up || !strcmp(up, p) || stat(up, &sb) == 0;
        if (!stop) { free(p); p = al_strdup(up); }
        free(q);
        if (stop || !p) break;
    }
    *made = p;
    return al_mkdirs_here(parent);
}

/* Removes parent and its ancestors up to made (each only if empty). */
static void unmake_parent(const char *parent, const char *made) {
    if (!made) return;
    char *p = al_strdup(parent);
    while (p) {
        bool last = !strcmp(p, made);
        rmdir(p);
        char *up = last ? NULL : al_strdup(dirname(p));
        free(p);
        p = up;
    }
}

static char *join(const CkptWriter *w, const char *rel) { return al_asprintf("%s/%s", w->staging, rel); }

int ckpt_begin(const char *dir, const CkptOpts *opts, CkptWriter **out) {
    CkptOpts o = opts ? *opts : (CkptOpts){0};
    *out = NULL;
    if (check_dest(dir, &o)) return AL_ERR;
    CkptWriter *w = al_calloc(1, sizeof *w, "a checkpoint writer");
    char *base = NULL;
    if (!w) return AL_ERR;
    w->force = o.force;
    w->always_index = o.always_index;
    if (!(w->dir = al_strdup(dir)) || split_dir(dir, &w->parent, &base)) { ckpt_abort(w); return AL_ERR; }
    if (make_parent(w->parent, &w->made)) { free(base); ckpt_abort(w); return AL_ERR; }
    w->staging = al_asprintf("%s/.%s.staging-XXXXXX", w->parent, base);
    free(base);
    if (!w->staging || !mkdtemp(w->staging)) {
        int rc = al_err("cannot create a staging folder beside %s: %s", dir, strerror(errno));
        free(w->staging);
        w->staging = NULL;
        ckpt_abort(w);
        return rc;
    }
    *out = w;
    return AL_OK;
}

size_t ckpt_weight_bytes(const CkptWriter *w) { return w->total; }

static void stfile_clear(StFile *f) {
    for (size_t i = 0; i < f->n; i++) { free(f->e[i].name); free(f->e[i].owned); free(f->e[i].ud); }
    for (size_t i = 0; i < f->nm; i++) { free(f->mk[i]); free(f->mv[i]); }
    free(f->e); free(f->mk); free(f->mv); free(f->relpath);
    memset(f, 0, sizeof *f);
}

void ckpt_abort(CkptWriter *w) {
    if (!w) return;
    stfile_clear(&w->cur);
    if (w->staging) al_remove_tree(w->staging);
    if (w->parent) unmake_parent(w->parent, w->made);
    for (size_t i = 0; i < w->nmap; i++) free(w->map[i].name);
    free(w->map); free(w->dir); free(w->parent); free(w->staging); free(w->made); free(w->scratch);
    free(w);
}

/* ================================================================ safetensors files */

int ckpt_meta(CkptWriter *w, const char *key, const char *value) {
    StFile *f = &w->cur;
    for (size_t i = 0; i < f->nm; i++)
        if (!strcmp(f->mk[i], key)) {
            char *v = al_strdup(value);
            if (!v) return AL_ERR;
            free(f->mv[i]);
            f->mv[i] = v;
            return AL_OK;
        }
    char **k = realloc(f->mk, (f->nm + 1) * sizeof *k);
    if (k) f->mk = k;
    char **v = realloc(f->mv, (f->nm + 1) * sizeof *v);
    if (v) f->mv = v;
    if (!k || !v) return al_err("out of memory");
    f->mk[f->nm] = al_strdup(key);
    f->mv[f->nm] = al_strdup(value);
    f->nm++;
    return f->mk[f->nm - 1] && f->mv[f->nm - 1] ? AL_OK : AL_ERR;
}

static int add_ent(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, const void *data,
                   void *owned, size_t nbytes) {
    StFile *f = &w->cur;
    size_t numel = 1, need;
    int rc = AL_OK;
    if (ndim < 0 || ndim > ST_MAX_DIMS) rc = al_err("tensor '%s': %d dim%s, at most %d", name, ndim, al_s(ndim), ST_MAX_DIMS);
    for (int i = 0; rc == AL_OK && i < ndim; i++)
        if (!al_mul_ok(numel, shape[i], &numel, name)) rc = AL_ERR;
    if (rc == AL_OK && !al_mul_ok(numel, dt_size(dtype), &need, name)) rc = AL_ERR;
    if (rc == AL_OK && need != nbytes)
        rc = al_err("tensor '%s': shape x %s is %zu byte%s, got %zu", name, dt_name(dtype), need, al_s(need), nbytes);
    for (size_t i = 0; rc == AL_OK && i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) rc = al_err("tensor '%s' added twice", name);
    if (rc == AL_OK) rc = al_reserve(&f->e, &f->cap, f->n + 1, sizeof *f->e, "the tensor table");
    char *nm = rc == AL_OK ? al_strdup(name) : NULL;
    if (!nm) { free(owned); return AL_ERR; }
    Ent *e = &f->e[f->n++];
    *e = (Ent){.name = nm, .dtype = dtype, .ndim = ndim, .data = data, .owned = owned, .nbytes = nbytes};
    if (ndim) memcpy(e->shape, shape, (size_t)ndim * sizeof(size_t));
    if (!f->relpath) w->total += nbytes;
    return AL_OK;
}

int ckpt_add(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, const void *data,
             size_t nbytes) {
    return add_ent(w, name, dtype, ndim, shape, data, NULL, nbytes);
}

int ckpt_add_owned(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, void *buf,
                   size_t nbytes) {
    return add_ent(w, name, dtype, ndim, shape, buf, buf, nbytes);
}

int ckpt_add_lazy(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, size_t nbytes,
                  ckpt_fill_fn fill, void *ud) {
    if (add_ent(w, name, dtype, ndim, shape, NULL, NULL, nbytes)) { free(ud); return AL_ERR; }
    w->cur.e[w->cur.n - 1].fill = fill;
    w->cur.e[w->cur.n - 1].ud = ud;
    return AL_OK;
}

int ckpt_add_mat(CkptWriter *w, const char *name, dt_type dtype, const Mat *m, int ndim) {
    size_t n = m->rows * m->cols, shape[2] = {m->rows, m->cols};
    if (dtype == DT_F8_E4M3) {
        size_t sr = dt_fp8_nblocks(m->rows), sc = dt_fp8_nblocks(m->cols), sshape[2] = {sr, sc};
        uint8_t *q = al_malloc3(m->rows, m->cols, 1, name);
        float *scale = al_malloc3(sr ? sr : 1, sc ? sc : 1, sizeof(float), name);
        char *sname = al_asprintf("%s_scale_inv", name);
        if (!q || !scale || !sname) { free(q); free(scale); free(sname); return AL_ERR; }
        st_fp8_blocks(m, q, scale);
        int rc = ckpt_add_owned(w, name, DT_F8_E4M3, 2, shape, q, n);
        rc = rc ? (free(scale), rc) : ckpt_add_owned(w, sname, DT_F32, 2, sshape, scale, sr * sc * sizeof(float));
        free(sname);
        return rc;
    }
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return al_err("tensor '%s': cannot write a computed tensor as %s (give f32, f16, bf16 or F8_E4M3)", name,
                      dt_name(dtype));
    void *buf = al_malloc3(n, 1, dt_size(dtype), name);
    if (!buf) return AL_ERR;
    if (dt_from_f32(dtype, m->data, n, buf)) { free(buf); return AL_ERR; }
    return ckpt_add_owned(w, name, dtype, ndim == 1 ? 1 : 2, ndim == 1 ? shape + 1 : shape, buf, n * dt_size(dtype));
}

enum { TB = 32 };

/* n <= TB floats as dt_from_f32 writes them (BF16 without a call per value, so it vectorises). */
static void put_run(dt_type dt, const float *f, size_t n, uint8_t *d) {
    if (dt != DT_BF16) { dt_from_f32(dt, f, n, d); return; }
    uint32_t u[TB];
    uint16_t h[TB];
    memcpy(u, f, n * 4);
    for (size_t i = 0; i < n; i++)      /* dt_f32_to_bf16: round to nearest even, a NaN made quiet */
        h[i] = (u[i] & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u[i] >> 16) | 0x40)
                                                  : (uint16_t)((u[i] + 0x7fffu + ((u[i] >> 16) & 1u)) >> 16);
    memcpy(d, h, n * 2);
}

/* Rows [i0, i0+ni) x cols [j0, j0+nj) of m (ni, nj <= TB) transposed into dst (cols, rows) in dt:
 * through a float tile, so each output row is written in one contiguous run. */
static void put_tile(const Mat *m, size_t i0, size_t ni, size_t j0, size_t nj, dt_type dt, uint8_t *dst) {
    float t[TB][TB];
    size_t es = dt_size(dt);
    for (size_t i = 0; i < ni; i++)
        for (size_t j = 0; j < nj; j++) t[j][i] = m->data[(i0 + i) * m->cols + j0 + j];
    for (size_t j = 0; j < nj; j++) put_run(dt, t[j], ni, dst + ((j0 + j) * m->rows + i0) * es);
}

typedef struct {
    const Mat *m;
    dt_type dt;
} MatT;

/* The bytes of dt_from_f32(mat_transpose(m)), without the transposed float copy. */
static int fill_t(void *ud, void *dst, size_t nbytes) {
    const MatT *j = ud;
    const Mat *m = j->m;
    if (m->rows * m->cols * dt_size(j->dt) != nbytes) return al_err("internal: a new tensor changed size");
    for (size_t i0 = 0; i0 < m->rows; i0 += TB)
        for (size_t j0 = 0; j0 < m->cols; j0 += TB)
            put_tile(m, i0, m->rows - i0 < TB ? m->rows - i0 : TB, j0, m->cols - j0 < TB ? m->cols - j0 : TB, j->dt, dst);
    return AL_OK;
}

int ckpt_add_mat_t(CkptWriter *w, const char *name, dt_type dtype, const Mat *m) {
    if (dtype != DT_F32 && dtype != DT_F16 && dtype != DT_BF16)
        return al_err("tensor '%s': cannot write a computed tensor as %s (give f32, f16 or bf16)", name, dt_name(dtype));
    MatT *j = al_malloc(sizeof *j, name);
    if (!j) return AL_ERR;
    *j = (MatT){.m = m, .dt = dtype};
    size_t shape[2] = {m->cols, m->rows};
    bool one = m->cols == 1;
    return ckpt_add_lazy(w, name, dtype, one ? 1 : 2, one ? shape + 1 : shape, m->rows * m->cols * dt_size(dtype), fill_t, j);
}

/* The JSON header of f (st_header_build; caller frees). */
static char *st_header(const StFile *f, size_t *len) {
    st_desc *d = al_calloc(f->n, sizeof *d, "a safetensors header");
    if (!d) return NULL;
    for (size_t i = 0; i < f->n; i++)
        d[i] = (st_desc){.name = f->e[i].name, .dtype = f->e[i].dtype, .ndim = f->e[i].ndim, .shape = f->e[i].shape,
                         .nbytes = f->e[i].nbytes};
    char *h = st_header_build(d, f->n, (const char *const *)f->mk, (const char *const *)f->mv, f->nm, len);
    free(d);
    return h;
}

/* Opens staging/rel exclusively. */
static int open_new(CkptWriter *w, const char *rel, char **path) {
    *path = join(w, rel);
    if (!*path) return -1;
    char *slash = strrchr(rel, '/');
    if (slash) {                                       /* a method file in a subfolder */
        char *sub = al_asprintf("%s/%.*s", w->staging, (int)(slash - rel), rel);
        int rc = sub ? al_mkdirs(sub) : AL_ERR;
        free(sub);
        if (rc) return -1;
    }
    return al_create_excl(*path);
}

/* Closes fd; on failure removes the file and sets an error. */
static int close_file(int fd, char *path, bool ok, int rc) {
    int e = errno;
    if (ok && fsync(fd) != 0) { ok = false; e = errno; }
    if (close(fd) != 0 && ok) { ok = false; e = errno; }
    if (!ok || rc) unlink(path);
    if (!ok && !rc) rc = al_err("%s: write failed: %s", path, strerror(e));
    free(path);
    return rc;
}

/* A weight file written and its writeback started a piece at a time: the disk busy from the first piece on, as dd's
 * is, instead of idle until the kernel's background threshold of dirty pages (a tenth of the memory: gigabytes) is
 * reached after each shard's fsync. Nothing is waited for here: close_file's fsync still makes the file durable before
 * it counts as written, and the folder appears only by the staging folder's rename (ckpt_commit). */
enum { WB_PIECE = 32 << 20 };

typedef struct {
    int fd;
    size_t off, kicked;       /* bytes written; bytes whose writeback was started */
} WbFile;

static bool wb_write(WbFile *f, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        size_t k = len < WB_PIECE ? len : WB_PIECE;
        if (!al_write_all(f->fd, p, k)) return false;
        p += k; len -= k; f->off += k;
        if (f->off - f->kicked >= WB_PIECE) {   /* a hint: a failure here shows at fsync */
            (void)sync_file_range(f->fd, (off_t)f->kicked, (off_t)(f->off - f->kicked), SYNC_FILE_RANGE_WRITE);
            f->kicked = f->off;
        }
    }
    return true;
}

/* Writes the current file: header, then each tensor's bytes from where they are. */
static int write_cur(CkptWriter *w, const char *rel) {
    StFile *f = &w->cur;
    size_t hlen;
    char *hdr = st_header(f, &hlen), *path = NULL;
    if (!hdr) return al_err("out of memory building a safetensors header");
    int fd = open_new(w, rel, &path);
    if (fd < 0) { free(hdr); free(path); return AL_ERR; }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    WbFile wf = {.fd = fd};
    bool ok = wb_write(&wf, len8, 8) && wb_write(&wf, hdr, hlen);
    free(hdr);
    int rc = AL_OK;
    for (size_t i = 0; ok && rc == AL_OK && i < f->n; i++) {
        Ent *e = &f->e[i];
        if (e->fill && (e->nbytes > w->scratch_cap || !w->scratch)) {   /* computed now into the one scratch buffer, written */
            free(w->scratch);
            w->scratch = al_malloc(e->nbytes, e->name);
            w->scratch_cap = w->scratch ? e->nbytes : 0;
            if (!w->scratch) rc = AL_ERR;
        }
        if (e->fill && rc == AL_OK) rc = e->fill(e->ud, w->scratch, e->nbytes);
        if (e->fill) e->data = w->scratch;
        ok = rc != AL_OK || e->nbytes == 0 || wb_write(&wf, e->data, e->nbytes);
        free(e->owned);
        e->owned = NULL;
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    if (rc == AL_OK) w->files++;
    return close_file(fd, path, ok, rc);
}

int ckpt_shard_end(CkptWriter *w) {
    StFile *f = &w->cur;
    if (f->relpath) return al_err("internal: ckpt_shard_end with a method file open");
    if (f->n == 0) { stfile_clear(f); return AL_OK; }
    char rel[64];
    snprintf(rel, sizeof rel, SHARD_TMP, w->nshards);
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < f->n; i++) {
        if ((rc = al_reserve(&w->map, &w->capmap, w->nmap + 1, sizeof *w->map, "the index"))) break;
        char *n = al_strdup(f->e[i].name);
        if (!n) { rc = AL_ERR; break; }
        w->map[w->nmap++] = (MapItem){.name = n, .shard = w->nshards};
    }
    if (rc == AL_OK) {
        bool has_format = false;
        for (size_t i = 0; i < f->nm; i++) has_format |= !strcmp(f->mk[i], "format");
        if (!has_format) rc = ckpt_meta(w, "format", "pt");
    }
    if (rc == AL_OK) rc = write_cur(w, rel);
    if (rc == AL_OK) { w->nshards++; w->files--; }        /* shards are counted at commit */
    stfile_clear(f);
    return rc;
}

int ckpt_file_begin(CkptWriter *w, const char *relpath, const char *format) {
    if (w->cur.n || w->cur.relpath) return al_err("internal: ckpt_file_begin with a file open");
    stfile_clear(&w->cur);
    if (!(w->cur.relpath = al_strdup(relpath))) return AL_ERR;
    return ckpt_meta(w, "format", format ? format : "pt");
}

int ckpt_file_end(CkptWriter *w) {
    if (!w->cur.relpath) return al_err("internal: ckpt_file_end without ckpt_file_begin");
    char *rel = w->cur.relpath;
    w->cur.relpath = NULL;
    int rc = write_cur(w, rel);
    free(rel);
    stfile_clear(&w->cur);
    return rc;
}

/* ================================================================ other files */

void ckpt_json_num(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

void ckpt_json_fields(cJSON *o, const void *rec, const CkptJsonField *fields) {
    for (const CkptJsonField *f = fields; f->key; f++) {
        double v;
        memcpy(&v, (const char *)rec + f->offset, sizeof v);
        ckpt_json_num(o, f->key, v);
    }
}

int ckpt_json_merge(cJSON *o, const char *members) {
    char *text = al_asprintf("{%s}", members);
    cJSON *src = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!cJSON_IsObject(src)) {
        cJSON_Delete(src);
        return al_err("JSON members are not an object's: %.60s", members);
    }
    while (src->child) {
        cJSON *item = cJSON_DetachItemViaPointer(src, src->child);
        cJSON_AddItemToObject(o, item->string, item);
    }
    cJSON_Delete(src);
    return AL_OK;
}

void ckpt_json_hf_shape(cJSON *o, const CkptHfShape *s) {
    const struct { const char *key; double v; } keys[] = {
        {"hidden_size", s->hidden}, {"intermediate_size", s->inter}, {"num_attention_heads", s->heads},
        {"num_hidden_layers", s->layers}, {"vocab_size", s->vocab}, {"max_position_embeddings", s->max_pos}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(o, keys[i].key)) cJSON_AddNumberToObject(o, keys[i].key, keys[i].v);
}

int ckpt_write_text(CkptWriter *w, const char *relpath, const char *text, size_t len) {
    char *path = NULL;
    int fd = open_new(w, relpath, &path);
    if (fd < 0) { free(path); return AL_ERR; }
    int rc = close_file(fd, path, al_write_all(fd, text, len), AL_OK);
    if (rc == AL_OK) w->files++;
    return rc;
}

int ckpt_write_stream(CkptWriter *w, const char *relpath, ckpt_stream_fn fn, void *ud) {
    char *path = NULL;
    int fd = open_new(w, relpath, &path);
    if (fd < 0) { free(path); return AL_ERR; }
    int rc = fn(ud, fd, path);
    rc = close_file(fd, path, rc == AL_OK, rc);
    if (rc == AL_OK) w->files++;
    return rc;
}

/* Members transformers' config classes declare float (never int alone): its strict dataclass check refuses an
 * integer there ("final_logit_softcapping expected float, got int (value: 10)"), and cJSON prints 10.0 as 10. */
static const char *const FLOAT_KEYS[] = {
    "attention_dropout", "attention_multiplier", "attn_logit_softcapping", "embedding_multiplier",
    "final_logit_softcapping", "hidden_dropout", "logits_scaling", "partial_rotary_factor", "resid_pdrop",
    "residual_multiplier", "rope_theta", "routed_scaling_factor", "router_aux_loss_coef", "swiglu_limit", NULL};

static bool float_key(const char *k) {
    for (size_t i = 0; k && FLOAT_KEYS[i]; i++)
        if (!strcmp(k, FLOAT_KEYS[i])) return true;
    return false;
}

/* Every integral number under a FLOAT_KEYS member of o (recursively) made a raw "N.0". */
static void json_float_members(cJSON *o) {
    for (cJSON *e = o ? o->child : NULL; e; e = e->next) {
        double v = e->valuedouble;
        char num[48];
        if (cJSON_IsNumber(e) && float_key(e->string) && v == floor(v) && fabs(v) < 1e15) {
            snprintf(num, sizeof num, "%.1f", v);
            cJSON *raw = cJSON_CreateRaw(num);
            if (raw && (raw->string = strdup(e->string)) && cJSON_ReplaceItemViaPointer(o, e, raw)) e = raw;
            else cJSON_Delete(raw);
        } else if (cJSON_IsObject(e) || cJSON_IsArray(e)) {
            json_float_members(e);
        }
    }
}

int ckpt_write_json(CkptWriter *w, const char *relpath, const cJSON *doc) {
    cJSON *copy = doc ? cJSON_Duplicate(doc, true) : NULL;
    const char *base = strrchr(relpath, '/');
    if (!strcmp(base ? base + 1 : relpath, "config.json")) json_float_members(copy);   /* transformers reads it */
    char *text = copy ? cJSON_Print(copy) : NULL;
    cJSON_Delete(copy);
    int rc = text ? ckpt_write_text(w, relpath, text, strlen(text)) : al_err("out of memory writing %s", relpath);
    free(text);
    return rc;
}

bool ckpt_is_aux(const char *n) {
    static const char *const exact[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json", "tokenizer.model", "added_tokens.json",
                                        "vocab.json", "vocab.txt", "merges.txt", NULL};
    for (size_t i = 0; exact[i]; i++)
        if (!strcmp(n, exact[i])) return true;
    size_t len = strlen(n);
    if (!strncmp(n, "tok", 3) && len > 7 && !strcmp(n + len - 4, ".bin")) return true;
    return !strncasecmp(n, "license", 7) || !strncasecmp(n, "licence", 7);
}

/* Streams regular file from into staging/name. */
static int copy_stream(CkptWriter *w, const char *from, const char *name) {
    int in = open(from, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (in < 0) return al_err("%s: cannot open: %s", from, strerror(errno));
    if (fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode)) { close(in); return AL_OK; }   /* not a plain file: skip */
    char *path = NULL;
    int fd = open_new(w, name, &path);
    char *buf = fd >= 0 ? al_malloc(1 << 20, "a copy buffer") : NULL;
    bool ok = buf != NULL;
    int rc = fd < 0 ? AL_ERR : AL_OK;
    for (ssize_t k; ok && rc == AL_OK && (k = read(in, buf, 1 << 20)) != 0;) {
        if (k < 0) { if (errno == EINTR) continue; rc = al_err("%s: read error: %s", from, strerror(errno)); break; }
        ok = al_write_all(fd, buf, (size_t)k);
        if (al_interrupted()) rc = AL_INTERRUPTED;
    }
    free(buf);
    close(in);
    if (fd < 0) { free(path); return AL_ERR; }
    rc = close_file(fd, path, ok, rc);
    if (rc == AL_OK) w->files++;
    return rc;
}

int ckpt_copy_aux(CkptWriter *w, const char *src_dir, size_t *n) {
    if (n) *n = 0;
    struct stat sb;
    if (!src_dir || stat(src_dir, &sb) != 0) return AL_OK;
    char *dirp = S_ISDIR(sb.st_mode) ? al_strdup(src_dir) : NULL;
    if (!S_ISDIR(sb.st_mode)) {
        char *t = al_strdup(src_dir);
        dirp = t ? al_strdup(dirname(t)) : NULL;
        free(t);
    }
    DIR *d = dirp ? opendir(dirp) : NULL;
    int rc = AL_OK;
    for (struct dirent *e; d && rc == AL_OK && (e = readdir(d));) {
        if (!ckpt_is_aux(e->d_name)) continue;
        char *from = al_asprintf("%s/%s", dirp, e->d_name);
        size_t before = w->files;
        rc = from ? copy_stream(w, from, e->d_name) : AL_ERR;
        if (n) *n += w->files - before;
        free(from);
    }
    if (d) closedir(d);
    free(dirp);
    return rc;
}

/* ================================================================ commit */

static int cmp_map(const void *a, const void *b) { return strcmp(((const MapItem *)a)->name, ((const MapItem *)b)->name); }

/* Gives the shards their final names and writes the index when there are several. */
static int name_shards(CkptWriter *w) {
    size_t N = w->nshards;
    bool single = N == 1 && !w->always_index;
    for (size_t i = 0; i < N; i++) {
        char from[64], to[80];
        snprintf(from, sizeof from, SHARD_TMP, i);
        if (single) snprintf(to, sizeof to, "model.safetensors");
        else snprintf(to, sizeof to, "model-%05zu-of-%05zu.safetensors", i + 1, N);
        char *a = join(w, from), *b = join(w, to);
        int rc = a && b && rename(a, b) == 0 ? AL_OK : al_err("cannot name shard %s: %s", to, strerror(errno));
        free(a); free(b);
        if (rc) return rc;
        w->files++;
    }
    if (single || N == 0) return AL_OK;
    if (w->nmap) qsort(w->map, w->nmap, sizeof *w->map, cmp_map);
    cJSON *idx = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(idx, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)w->total);
    cJSON *map = cJSON_AddObjectToObject(idx, "weight_map");
    for (size_t i = 0; i < w->nmap; i++) {
        char to[80];
        snprintf(to, sizeof to, "model-%05zu-of-%05zu.safetensors", w->map[i].shard + 1, N);
        cJSON_AddStringToObject(map, w->map[i].name, to);
    }
    int rc = ckpt_write_json(w, "model.safetensors.index.json", idx);
    cJSON_Delete(idx);
    return rc;
}

/* Renames staging onto dir; with force an existing folder is moved aside first, then removed. */
static int swap_in(CkptWriter *w) {
    struct stat sb;
    bool exists = lstat(w->dir, &sb) == 0;
    if (!exists || (S_ISDIR(sb.st_mode) && dir_empty(w->dir))) {
        if (rename(w->staging, w->dir) == 0) return AL_OK;
        return al_err("cannot move the finished folder into place as %s: %s", w->dir, strerror(errno));
    }
    if (!w->force)
        return al_err("folder %s appeared while writing and is not empty: nothing was written", w->dir);
    char *aside = al_asprintf("%s/.old.XXXXXX", w->parent);
    if (!aside || !mkdtemp(aside)) { free(aside); return al_err("cannot set %s aside: %s", w->dir, strerror(errno)); }
    int rc = AL_OK;
    if (rename(w->dir, aside) != 0) {
        rc = al_err("cannot set the old %s aside: %s", w->dir, strerror(errno));
        rmdir(aside);
    } else if (rename(w->staging, w->dir) != 0) {
        rc = al_err("cannot move the finished folder into place as %s: %s", w->dir, strerror(errno));
        rename(aside, w->dir);                         /* put the old one back */
    } else {
        al_remove_tree(aside);
    }
    free(aside);
    return rc;
}

int ckpt_commit(CkptWriter *w, size_t *files) {
    int rc = w->cur.relpath ? al_err("internal: a method file was left open") : ckpt_shard_end(w);
    if (rc == AL_OK) rc = name_shards(w);
    if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    if (rc == AL_OK && chmod(w->staging, 0755) != 0) rc = al_err("%s: %s", w->staging, strerror(errno));
    if (rc == AL_OK) rc = swap_in(w);
    if (files) *files = rc == AL_OK ? w->files : 0;
    if (rc == AL_OK) {                                 /* in place: nothing left to remove */
        free(w->staging);
        w->staging = NULL;
        free(w->made);
        w->made = NULL;
    }
    ckpt_abort(w);
    return rc;
}
