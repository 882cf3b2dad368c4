/* testutil.h -- helpers shared by several tests/test_*.c (static inline, so a test uses what it
 * needs without unused-function warnings):
 *   random numbers: urand / nrand (xorshift64 from TU_RNG_SEED, define it before the include for
 *     another stream), randn (float Mat of normals), orth (orthonormal columns, double);
 *   randm / randv: normal matrices / vectors from attn_random_input with a running seed starting
 *     at TU_SEED_CTR0;
 *   tpath: "<dir>/<a>[/<b>]" under the test's scratch folder tu_dir (main fills it);
 *   fwd_mean_nll / export_nll: perplexity of a model and of a TransMLA result exported to disk;
 *   now: monotonic seconds; slurp: a whole file as a NUL-terminated string;
 *   tu_open_synth: a demo model (synth_demo_name) written with a seed under a folder and opened. */
#ifndef TEST_TESTUTIL_H
#define TEST_TESTUTIL_H

#include "check.h"
#include "attn_eval.h"
#include "forward.h"
#include "mla_export.h"
#include "model.h"
#include "synth.h"

#include <stdint.h>
#include <time.h>

/* ---------------------------------------------------------------- xorshift normals */

#ifndef TU_RNG_SEED
#define TU_RNG_SEED 0x9E3779B97F4A7C15ULL
#endif

static unsigned long long rng_state = TU_RNG_SEED;

/* Uniform on (0, 1). */
static inline double urand(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}

/* Standard normal (Box-Muller). */
static inline double nrand(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }

/* A fresh (r x c) matrix of normals times scale; caller frees. */
static inline Mat *randn(size_t r, size_t c, double scale) {
    Mat *m = mat_new(r, c);
    for (size_t i = 0; i < r * c; i++) m->data[i] = (float)(scale * nrand());
    return m;
}

/* Orthonormal columns Q (n x r, row-major double), n >= r, by modified Gram-Schmidt (two passes)
 * on a random matrix; caller frees. */
static inline double *orth(size_t n, size_t r) {
    double *Q = malloc(n * r * sizeof(double));
    for (size_t i = 0; i < n * r; i++) Q[i] = nrand();
    for (size_t j = 0; j < r; j++) {
        for (int pass = 0; pass < 2; pass++)
            for (size_t t = 0; t < j; t++) {
                double d = 0;
                for (size_t i = 0; i < n; i++) d += Q[i * r + j] * Q[i * r + t];
                for (size_t i = 0; i < n; i++) Q[i * r + j] -= d * Q[i * r + t];
            }
        double nn = 0;
        for (size_t i = 0; i < n; i++) nn += Q[i * r + j] * Q[i * r + j];
        nn = sqrt(nn);
        for (size_t i = 0; i < n; i++) Q[i * r + j] /= nn;
    }
    return Q;
}

/* ---------------------------------------------------------------- seeded matrices */

#ifndef TU_SEED_CTR0
#define TU_SEED_CTR0 1000
#endif

static uint64_t seed_ctr = TU_SEED_CTR0;

/* A fresh standard-normal matrix (r x c) times sc, next seed; caller frees. */
static inline Mat *randm(size_t r, size_t c, double sc) {
    Mat *m = attn_random_input(r, (int)c, seed_ctr++);
    for (size_t i = 0; i < r * c; i++) m->data[i] *= (float)sc;
    return m;
}

/* The same as a bare float vector of n; caller frees. */
static inline float *randv(size_t n, double sc) {
    Mat *m = randm(1, n, sc);
    float *v = m->data;
    m->data = NULL;
    mat_free(m);
    return v;
}

/* ---------------------------------------------------------------- scratch paths */

static char tu_dir[2048];

/* "<tu_dir>/<a>[/<b>]" in one of a few rotating buffers (valid for the next 7 calls). */
static inline const char *tpath(const char *a, const char *b) {
    static char buf[8][4400];
    static int k;
    k = (k + 1) % 8;
    if (b) snprintf(buf[k], sizeof buf[k], "%s/%s/%s", tu_dir, a, b);
    else snprintf(buf[k], sizeof buf[k], "%s/%s", tu_dir, a);
    return buf[k];
}

/* ---------------------------------------------------------------- files and clocks */

/* Monotonic clock in seconds. */
static inline double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The whole file at path, NUL-terminated, its length in *len (len may be NULL); NULL when it
 * cannot be read. Caller frees. */
static inline char *slurp(const char *path, size_t *len) { return al_read_file(path, len); }

/* ---------------------------------------------------------------- perplexities */

/* Mean NLL of ids (n tokens, windows of seqlen) with the real forward pass of m. */
static inline double fwd_mean_nll(Model *m, const int *ids, size_t n, size_t seqlen) {
    Forward *f = NULL;
    FwdPpl p = {.nll = NAN};
    CHECK_OK(fwd_new(m, NULL, &f));
    if (f) CHECK_OK(fwd_ppl(f, ids, n, seqlen, &p));
    fwd_free(f);
    return p.nll;
}

/* Exports r (F32) into folder dir_, reopens it and returns its mean NLL on ids. */
static inline double export_nll(const TmlaResult *r, const char *dir_, const int *ids, size_t n,
                                size_t seqlen) {
    MlaExportOpts eo = {.dtype = DT_F32};
    Model *ex = NULL;
    double nll = NAN;
    CHECK_OK(mla_export(r, dir_, &eo));
    CHECK_OK(model_open(dir_, &ex));
    if (ex) nll = fwd_mean_nll(ex, ids, n, seqlen);
    model_free(ex);
    return nll;
}

/* ---------------------------------------------------------------- synthetic demo models */

/* Demo `name` (demo-r1, demo-llama-bf16, ...) written with `seed` (SYNTH_DEFAULT_SEED: the demo's
 * own) into a fresh folder under root and opened; NULL (a failed check) when that fails. */
static inline Model *tu_open_synth(const char *root, const char *name, unsigned long seed) {
    static int serial;
    SynthOptions opt;
    if (!synth_demo_name(name, &opt)) { CHECK(0, "not a demo name: %s", name); return NULL; }
    opt.seed = seed;
    char *dir = al_asprintf("%s/%s-%d", root, name, serial++);
    Model *m = NULL;
    int rc = synth_write(&opt, dir);
    CHECK(rc == AL_OK, "synth_write %s: %s", name, rc ? al_errmsg() : "");
    if (rc == AL_OK) CHECK_OK(model_open(dir, &m));
    free(dir);
    return m;
}

#endif
