/* check_inputs.c -- the recorded inputs of a conversion's check: the digest of its statistics,
 * their record in an export's manifest and side file, and reading them back. See check_inputs.h. */
#define _GNU_SOURCE
#include "check_inputs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al.h"
#include "safetensors.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ULL; }
    return h;
}

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL
#define WORD_LANES 8

/* FNV-1a over n 64-bit words in WORD_LANES interleaved chains (word i to chain i mod 8), each chain
 * started from h and its index, their states then folded into h byte-wise: ~8 words a cycle where
 * byte-wise FNV-1a takes ~4 cycles a byte. Every step (xor, multiply by an odd constant) is a
 * bijection of the state, so one changed word always changes its chain's end state. */
static uint64_t fnv_words(uint64_t h, const double *x, size_t n) {
    uint64_t s[WORD_LANES];
    for (int c = 0; c < WORD_LANES; c++) s[c] = (h ^ (uint64_t)(c + 1)) * FNV_PRIME;
    size_t i = 0;
    for (; i + WORD_LANES <= n; i += WORD_LANES)
        for (int c = 0; c < WORD_LANES; c++) {
            uint64_t w;
            memcpy(&w, x + i + c, sizeof w);
            s[c] = (s[c] ^ w) * FNV_PRIME;
        }
    for (int c = 0; i < n; i++, c++) {
        uint64_t w;
        memcpy(&w, x + i, sizeof w);
        s[c] = (s[c] ^ w) * FNV_PRIME;
    }
    return fnv(h, s, sizeof s);
}

uint64_t ci_digest_layer_kind(ci_digest_kind kind, uint64_t h, int l, int hidden, const double *sigma, const double *mu) {
    size_t D = (size_t)hidden;
    if (!h) h = FNV_OFFSET;
    h = fnv(h, &l, sizeof l);
    if (kind == CI_DIGEST_BYTES) {
        h = fnv(h, sigma, D * D * sizeof(double));
        if (mu) h = fnv(h, mu, D * sizeof(double));
    } else {
        h = fnv_words(h, sigma, D * D);
        if (mu) h = fnv_words(h, mu, D);
    }
    return h ? h : 1;
}

uint64_t ci_digest_layer(uint64_t h, int l, int hidden, const double *sigma, const double *mu) {
    return ci_digest_layer_kind(CI_DIGEST_WORDS, h, l, hidden, sigma, mu);
}

uint64_t ci_digest_kind_of(ci_digest_kind kind, int n_layers, int hidden, const double *const *sigma,
                           const double *const *mu) {
    if (!sigma) return 0;
    uint64_t h = FNV_OFFSET;
    for (int l = 0; l < n_layers; l++)
        if (sigma[l]) h = ci_digest_layer_kind(kind, h, l, hidden, sigma[l], mu ? mu[l] : NULL);
    return h ? h : 1;
}

uint64_t ci_digest(int n_layers, int hidden, const double *const *sigma, const double *const *mu) {
    return ci_digest_kind_of(CI_DIGEST_WORDS, n_layers, hidden, sigma, mu);
}

/* The manifest's names of the digest kinds ("digest_kind"; absent: bytes, every export before it). */
static const char *const kind_names[] = {[CI_DIGEST_WORDS] = "fnv1a64-words8", [CI_DIGEST_BYTES] = "fnv1a64-bytes"};

size_t ci_max_bytes(void) {
    const char *e = getenv("ATTNLAB_CI_MAX_BYTES");
    return e && *e ? (size_t)strtoull(e, NULL, 10) : (size_t)64 << 20;
}

uint64_t ci_layer_seed(const CheckInputs *ci, int l) { return ci->seed + (ci->plus_layer ? (uint64_t)l : 0); }

/* Bytes the statistics take in CI_FILE. */
static size_t stats_bytes(const CheckInputs *ci) {
    size_t D = (size_t)ci->hidden, n = 0;
    for (int l = 0; ci->sigma && l < ci->n_layers; l++)
        n += (ci->sigma[l] ? D * D : 0) + (ci->mu && ci->mu[l] ? D : 0);
    return n * sizeof(double);
}

bool ci_fits(const CheckInputs *ci) { return ci->sigma && stats_bytes(ci) <= CI_MAX_BYTES; }

static int write_file(CkptWriter *w, const CheckInputs *ci) {
    size_t D = (size_t)ci->hidden;
    int rc = ckpt_file_begin(w, CI_FILE, "attnlab-check-inputs");
    for (int l = 0; rc == AL_OK && l < ci->n_layers; l++) {
        char name[64];
        if (ci->sigma[l]) {
            snprintf(name, sizeof name, "layers.%d.sigma", l);
            rc = ckpt_add(w, name, DT_F64, 2, (size_t[]){D, D}, ci->sigma[l], D * D * sizeof(double));
        }
        if (rc == AL_OK && ci->mu && ci->mu[l]) {
            snprintf(name, sizeof name, "layers.%d.mu", l);
            rc = ckpt_add(w, name, DT_F64, 1, (size_t[]){D}, ci->mu[l], D * sizeof(double));
        }
    }
    return rc == AL_OK ? ckpt_file_end(w) : rc;
}

int ci_write(CkptWriter *w, cJSON *manifest, const CheckInputs *ci) {
    cJSON *o = cJSON_AddObjectToObject(manifest, "check_inputs");
    if (!o) return al_err("out of memory writing the manifest");
    char hex[32];
    cJSON_AddNumberToObject(o, "seed", (double)ci->seed);
    cJSON_AddStringToObject(o, "seed_rule", ci->plus_layer ? "plus_layer" : "same");
    cJSON_AddNumberToObject(o, "tokens", (double)ci->tokens);
    cJSON_AddNumberToObject(o, "layers", ci->n_layers);
    cJSON_AddNumberToObject(o, "hidden", ci->hidden);
    cJSON_AddStringToObject(o, "statistics", !ci->stats ? "none" : ci->mu ? "second_moment_and_mean" : "second_moment");
    if (!ci->stats) return AL_OK;
    snprintf(hex, sizeof hex, "%016" PRIx64, ci->digest);
    cJSON_AddStringToObject(o, "digest", hex);
    cJSON_AddStringToObject(o, "digest_kind", kind_names[ci->digest_kind]);
    cJSON_AddStringToObject(o, "calibration", ci->calib);
    size_t bytes = stats_bytes(ci);
    if (ci_fits(ci)) {
        cJSON_AddStringToObject(o, "file", CI_FILE);
        return write_file(w, ci);
    }
    cJSON_AddNullToObject(o, "file");
    char note[160];
    snprintf(note, sizeof note, ci->sigma ? "the statistics (%zu MiB) are over the %zu MiB kept in the folder"
                                          : "the statistics were not at hand at export (%zu / %zu MiB)",
             bytes >> 20, CI_MAX_BYTES >> 20);
    cJSON_AddStringToObject(o, "file_note", note);
    return AL_OK;
}

void ci_free(CheckInputs *ci) {
    for (int l = 0; l < ci->n_layers; l++) {
        if (ci->sigma) free(ci->sigma[l]);
        if (ci->mu) free(ci->mu[l]);
    }
    free(ci->sigma);
    free(ci->mu);
    ci->sigma = ci->mu = NULL;
}

/* A copy of n doubles (NULL for NULL). */
static int dup_vec(const double *v, size_t n, double **out) {
    *out = NULL;
    if (!v) return AL_OK;
    if (!(*out = al_malloc3(n, 1, sizeof(double), "check statistics"))) return AL_ERR;
    memcpy(*out, v, n * sizeof(double));
    return AL_OK;
}

int ci_copy(const CheckInputs *ci, CheckInputs *out) {
    *out = *ci;
    out->sigma = out->mu = NULL;
    out->from_file = false;
    if (!ci_fits(ci)) return AL_OK;
    size_t L = (size_t)ci->n_layers, D = (size_t)ci->hidden;
    bool any_mu = false;
    for (int l = 0; ci->mu && l < ci->n_layers; l++) any_mu |= ci->mu[l] != NULL;
    out->sigma = al_calloc(L, sizeof *out->sigma, "check statistics");
    out->mu = any_mu ? al_calloc(L, sizeof *out->mu, "check statistics") : NULL;
    int rc = out->sigma && (out->mu || !any_mu) ? AL_OK : AL_ERR;
    for (size_t l = 0; rc == AL_OK && l < L; l++) {
        rc = dup_vec(ci->sigma[l], D * D, &out->sigma[l]);
        if (rc == AL_OK && any_mu) rc = dup_vec(ci->mu[l], D, &out->mu[l]);
    }
    if (rc) ci_free(out);
    return rc;
}

/* A copy of tensor name (n doubles) from f, or NULL when absent; an error when its size is wrong. */
static int read_vec(const st_file *f, const char *name, size_t n, double **out) {
    *out = NULL;
    const st_entry *e = st_find(f, name);
    if (!e) return AL_OK;
    if (e->dtype != DT_F64 || st_numel(e) != n) return al_err("%s: %s must be F64 with %zu value%s", st_path(f), name, n, al_s(n));
    if (!(*out = al_malloc3(n, 1, sizeof(double), "check statistics"))) return AL_ERR;
    memcpy(*out, st_data(f, e), n * sizeof(double));
    return AL_OK;
}

static int read_file(const char *dir, CheckInputs *ci) {
    char *path = al_asprintf("%s/%s", dir, CI_FILE);
    st_file *f = NULL;
    size_t D = (size_t)ci->hidden, L = (size_t)ci->n_layers;
    int rc = path ? st_open(path, &f) : AL_ERR;
    free(path);
    if (rc == AL_OK) {
        ci->sigma = al_calloc(L, sizeof *ci->sigma, "check statistics");
        ci->mu = al_calloc(L, sizeof *ci->mu, "check statistics");
        if (!ci->sigma || !ci->mu) rc = AL_ERR;
    }
    bool any_mu = false;
    for (int l = 0; rc == AL_OK && l < ci->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.sigma", l);
        rc = read_vec(f, name, D * D, &ci->sigma[l]);
        snprintf(name, sizeof name, "layers.%d.mu", l);
        if (rc == AL_OK) rc = read_vec(f, name, D, &ci->mu[l]);
        any_mu |= ci->mu[l] != NULL;
    }
    if (f) st_close(f);
    if (rc == AL_OK && !any_mu) { free(ci->mu); ci->mu = NULL; }
    if (rc == AL_OK && ci_digest_kind_of(ci->digest_kind, ci->n_layers, ci->hidden, (const double *const *)ci->sigma,
                                         (const double *const *)ci->mu) != ci->digest)
        rc = al_err("%s/%s does not hold the statistics its manifest's digest names", dir, CI_FILE);
    if (rc) ci_free(ci);
    ci->from_file = rc == AL_OK;
    return rc;
}

int ci_read(const char *dir, const cJSON *manifest, CheckInputs *ci, bool *found) {
    memset(ci, 0, sizeof *ci);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(manifest, "check_inputs");
    *found = cJSON_IsObject(o);
    if (!*found) return AL_OK;
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed"), *tok = cJSON_GetObjectItemCaseSensitive(o, "tokens");
    const cJSON *rule = cJSON_GetObjectItemCaseSensitive(o, "seed_rule");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "statistics");
    const cJSON *nl = cJSON_GetObjectItemCaseSensitive(o, "layers"), *hd = cJSON_GetObjectItemCaseSensitive(o, "hidden");
    if (!cJSON_IsNumber(nl) || nl->valuedouble < 1 || nl->valuedouble > 1e5 || !cJSON_IsNumber(hd) ||
        hd->valuedouble < 1 || hd->valuedouble > 1e6)
        return al_err("%s: the manifest's check_inputs needs layers and hidden", dir);
    ci->n_layers = nl->valueint;
    ci->hidden = hd->valueint;
    if (!cJSON_IsNumber(seed) || seed->valuedouble < 0 || !cJSON_IsNumber(tok) || tok->valuedouble < 1 ||
        tok->valuedouble > 1e7 || !cJSON_IsString(rule) || !cJSON_IsString(st))
        return al_err("%s: the manifest's check_inputs needs seed, seed_rule, tokens and statistics", dir);
    ci->seed = (uint64_t)seed->valuedouble;
    ci->plus_layer = !strcmp(rule->valuestring, "plus_layer");
    ci->tokens = (size_t)tok->valuedouble;
    ci->stats = strcmp(st->valuestring, "none") != 0;
    if (!ci->stats) return AL_OK;
    const cJSON *dg = cJSON_GetObjectItemCaseSensitive(o, "digest"), *cal = cJSON_GetObjectItemCaseSensitive(o, "calibration");
    if (!cJSON_IsString(dg) || sscanf(dg->valuestring, "%" SCNx64, &ci->digest) != 1)
        return al_err("%s: the manifest's check_inputs has statistics but no digest", dir);
    const cJSON *dk = cJSON_GetObjectItemCaseSensitive(o, "digest_kind");
    ci->digest_kind = CI_DIGEST_BYTES;
    if (dk && !cJSON_IsString(dk)) return al_err("%s: the manifest's check_inputs digest_kind is not a string", dir);
    if (dk && !strcmp(dk->valuestring, kind_names[CI_DIGEST_WORDS])) ci->digest_kind = CI_DIGEST_WORDS;
    else if (dk && strcmp(dk->valuestring, kind_names[CI_DIGEST_BYTES]))
        return al_err("%s: the manifest's check_inputs digest_kind \"%s\" is not one this attnlab knows (%s, %s): "
                      "it was written by a newer attnlab", dir, dk->valuestring, kind_names[CI_DIGEST_WORDS],
                      kind_names[CI_DIGEST_BYTES]);
    if (cJSON_IsString(cal)) snprintf(ci->calib, sizeof ci->calib, "%s", cal->valuestring);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file");
    return cJSON_IsString(file) ? read_file(dir, ci) : AL_OK;
}

int ci_read_dir(const char *dir, const char *manifest, CheckInputs *ci, bool *found) {
    memset(ci, 0, sizeof *ci);
    *found = false;
    char *path = al_asprintf("%s/%s", dir, manifest);
    char *text = path ? al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    int rc = !text ? AL_ERR : root ? ci_read(dir, root, ci, found) : al_err("%s: not valid JSON", path);
    cJSON_Delete(root);
    free(text);
    free(path);
    return rc;
}
