/* llama2c.c -- llama2.c checkpoints (.bin): the 7-int header, float32 weights in run.c's order,
 * exposed as a tensor store with Hugging Face Llama names so the rest of attnlab sees one layout.
 *
 * Header: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len (int32); a negative
 * vocab_size means the classifier (wcls) is stored after the weights instead of shared with the
 * embedding. RoPE in llama2.c rotates interleaved pairs (2j, 2j+1) of each head. */
#define _GNU_SOURCE
#include "llama2c.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define L2C_HEADER 28

typedef struct {
    st_entry *e;
    size_t n, cap;
    size_t off;                 /* running byte offset after the header */
} l2c_layout;

/* |v| for a header int, without the overflow of abs(INT32_MIN). */
static int64_t l2c_abs(int32_t v) { return v < 0 ? -(int64_t)v : v; }

/* Appends a float32 tensor of shape (rows, cols) (cols 0: 1-D) at the running offset. */
static int l2c_add(l2c_layout *l, const char *name, size_t rows, size_t cols) {
    if (al_reserve(&l->e, &l->cap, l->n + 1, sizeof *l->e, "the tensor table")) return AL_ERR;
    st_entry *e = &l->e[l->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->dtype = DT_F32;
    e->ndim = cols ? 2 : 1;
    e->shape[0] = rows;
    e->shape[1] = cols;
    size_t numel = rows * (cols ? cols : 1);
    e->begin = l->off;
    e->end = l->off + numel * 4;
    l->off = e->end;
    l->n++;
    return e->name ? AL_OK : al_err("out of memory");
}

/* Adds role r's weight of every layer, in file order, under the name the model's layouts give it. */
static int l2c_add_layers(l2c_layout *l, const ModelConfig *c, tensor_role r, size_t rows, size_t cols) {
    char name[256];
    for (int i = 0; i < c->n_layers; i++) {
        cfg_role_name(c, r, i, -1, "weight", name, sizeof name);
        if (l2c_add(l, name, rows, cols) != AL_OK) return AL_ERR;
    }
    return AL_OK;
}

/* Adds the model-level role r's weight. */
static int l2c_add_global(l2c_layout *l, const ModelConfig *c, tensor_role r, size_t rows, size_t cols) {
    char name[256];
    cfg_role_name(c, r, -1, -1, "weight", name, sizeof name);
    return l2c_add(l, name, rows, cols);
}

/* Lays out run.c's weight order with the Hugging Face names of c's (Llama) layouts. */
static int l2c_layout_weights(l2c_layout *l, const ModelConfig *c, const int32_t h[7], bool shared) {
    size_t dim = (size_t)h[0], hid = (size_t)h[1], hs = dim / (size_t)h[3];
    size_t nq = (size_t)h[3] * hs, nkv = (size_t)h[4] * hs, vocab = (size_t)l2c_abs(h[5]), seq = (size_t)h[6];
    int rc = l2c_add_global(l, c, ROLE_EMBED, vocab, dim);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_NORM_ATTN_IN, dim, 0);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_Q, nq, dim);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_K, nkv, dim);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_V, nkv, dim);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_O, dim, nq);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_NORM_FFN_IN, dim, 0);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_FFN_GATE, hid, dim);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_FFN_DOWN, dim, hid);
    if (!rc) rc = l2c_add_layers(l, c, ROLE_FFN_UP, hid, dim);
    if (!rc) rc = l2c_add_global(l, c, ROLE_FINAL_NORM, dim, 0);
    if (!rc) l->off += seq * hs / 2 * 4 * 2;                    /* freq_cis_real, freq_cis_imag: unused */
    if (!rc && !shared) rc = l2c_add_global(l, c, ROLE_LM_HEAD, vocab, dim);
    return rc;
}

/* Validates the header ints; the message says which field is wrong. */
static int l2c_check_header(const char *path, const int32_t h[7]) {
    static const char *field[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) {
        int64_t v = i == 5 ? l2c_abs(h[i]) : h[i];      /* a negative vocab_size only flags an unshared classifier */
        if (v <= 0 || v > (1 << 24))
            return al_err("%s: llama2.c header field %s = %d is not a plausible size (not a llama2.c v0 checkpoint?)",
                          path, field[i], h[i]);
    }
    if (h[0] % h[3] != 0) return al_err("%s: dim %d is not a multiple of n_heads %d", path, h[0], h[3]);
    if (h[3] % h[4] != 0) return al_err("%s: n_kv_heads %d does not divide n_heads %d", path, h[4], h[3]);
    if ((h[0] / h[3]) % 2 != 0) return al_err("%s: head size %d is odd; RoPE needs pairs", path, h[0] / h[3]);
    return AL_OK;
}

/* Bytes of weights the header implies (in double: headers of plausible-looking ints can imply
 * more than size_t holds; exact for any size a real file can have). */
static double l2c_needed_bytes(const int32_t h[7]) {
    double dim = h[0], hid = h[1], L = h[2], hs = (double)(h[0] / h[3]), nkv = h[4] * hs, V = (double)l2c_abs(h[5]);
    double per_layer = dim + dim * dim + 2 * nkv * dim + dim * dim + dim + 3 * hid * dim;   /* nq = dim */
    return 4.0 * (V * dim + L * per_layer + dim + (double)h[6] * hs + (h[5] < 0 ? V * dim : 0));
}

static void l2c_config(ModelConfig *cfg, const int32_t h[7]) {
    memset(cfg, 0, sizeof *cfg);
    cfg->family = FAM_LLAMA2C;
    snprintf(cfg->model_type, sizeof cfg->model_type, "llama2c");
    cfg->hidden = h[0];
    cfg->intermediate = h[1];
    cfg->n_layers = h[2];
    cfg->n_heads = h[3];
    cfg->n_kv_heads = h[4];
    cfg->vocab = (int)l2c_abs(h[5]);
    cfg->max_pos = h[6];
    cfg->qk_rope_dim = h[0] / h[3];
    cfg->v_dim = h[0] / h[3];
    cfg->rope = ROPE_INTERLEAVED;
    cfg->rope_theta = 10000.0;
    cfg->norm_eps = 1e-5;
    cfg->tie_embeddings = h[5] > 0;
    cfg->dtype = DT_F32;
    cfg_layouts_from_row(cfg);
    model_config_describe(NULL, cfg);
}

int llama2c_open(const char *path, Store **store, ModelConfig *cfg) {
    *store = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block: refused below */
    if (fd < 0) return al_err("%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return al_err("%s: not a regular file (a FIFO or a device is not a checkpoint)", path);
    }
    if ((size_t)sb.st_size < L2C_HEADER) {
        close(fd);
        return al_err("%s: truncated: a llama2.c checkpoint starts with a 28-byte header", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return al_err("%s: cannot mmap: %s", path, strerror(errno));
    int32_t h[7];
    memcpy(h, map, sizeof h);
    l2c_layout l = {0};
    int rc = l2c_check_header(path, h);
    if (rc == AL_OK && l2c_needed_bytes(h) > (double)(size - L2C_HEADER))   /* before laying out (maybe 16M layers) */
        rc = al_err("%s: truncated: the header (dim %d, %d layer%s, vocab %lld) needs %.0f bytes of weights, the file has %zu",
                    path, h[0], h[2], al_s(h[2]), (long long)l2c_abs(h[5]), l2c_needed_bytes(h), size - L2C_HEADER);
    if (rc == AL_OK) l2c_config(cfg, h);                        /* the names of its layouts */
    if (rc == AL_OK) rc = l2c_layout_weights(&l, cfg, h, h[5] > 0);
    if (rc == AL_OK && L2C_HEADER + l.off > size)
        rc = al_err("%s: truncated: the header (dim %d, %d layer%s, vocab %d) needs %zu byte%s of weights, the file has %zu",
                    path, h[0], h[2], al_s(h[2]), (int)l2c_abs(h[5]), l.off, al_s(l.off), size - L2C_HEADER);
    st_file *f = NULL;
    if (rc == AL_OK) {
        f = st_wrap(path, map, size, L2C_HEADER, l.e, l.n, true);
        if (!f) rc = AL_ERR;
    }
    for (size_t i = 0; i < l.n; i++) free(l.e[i].name);
    free(l.e);
    if (rc != AL_OK) { munmap(map, size); return rc; }
    char *tmp = strdup(path);
    rc = store_from_file(f, tmp ? dirname(tmp) : ".", store);
    free(tmp);
    return rc;
}
