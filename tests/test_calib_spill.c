/* test_calib_spill.c -- the calibration's attention-input Grams G_X out of anonymous memory (issue 32's
 * 4 GB on the 8B shape): core/base/spill.c and calib_spill.
 *
 * 1. spill_copy: the bytes bit for bit in a shared file mapping, stores through it kept, counted in
 *    spill_mapped_bytes; with $TMPDIR not a folder, or on tmpfs (/dev/shm: no gain), it returns NULL and sets no
 *    error.
 *    spill_zeroed: zeros, the same way.
 * 2. calib_spill on 8 layers of hidden 1024 (G_X 33.6 MB, calloc'd: made with no file): RssAnon drops by the
 *    Grams' bytes (measured in normal builds; under ASan freed memory stays resident), every calib_gram is bit for bit the one of
 *    the same statistics left in memory, before and after more rows are added through the mapping, and
 *    after calib_save / calib_load (which spills too). With $TMPDIR unusable G_X stays in memory, the same.
 * 3. calib_run on stories260K ends with G_X spilled, its Grams those of a run with no file to spill to. */
#include "check.h"
#include "test_mem_util.h"
#include "calib.h"
#include "spill.h"
#include "tokenizer.h"

#include <stdio.h>
#include <string.h>

/* True when no error message is set. */
static bool no_error(void) { return !strcmp(al_errmsg(), "unknown error"); }

static void spill_basic(void) {
    enum { N = 1 << 20 };
    unsigned char *src = malloc(N);
    for (size_t i = 0; src && i < N; i++) src[i] = (unsigned char)(i * 2654435761u >> 13);
    size_t m0 = spill_mapped_bytes();
    unsigned char *p = src ? spill_copy(src, N) : NULL;
    CHECK(p && !memcmp(p, src, N), "spill_copy holds the bytes");
    CHECK(spill_mapped_bytes() == m0 + N, "mapped %zu, want %zu", spill_mapped_bytes(), m0 + (size_t)N);
    if (p) { p[N - 1] ^= 0xff; CHECK(p[N - 1] == (src[N - 1] ^ 0xff), "a store through the mapping"); }
    spill_free(p, N);
    CHECK(spill_mapped_bytes() == m0, "unmapped");
    setenv("TMPDIR", "/dev/null", 1);                   /* not a folder: no file */
    al_err_clear();
    p = spill_copy(src, N);
    CHECK(!p && no_error(), "no file: NULL and no error (%s)", al_errmsg());
    unsetenv("TMPDIR");
    struct stat sb;
    if (stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode)) {     /* tmpfs: its file would stay in memory */
        setenv("TMPDIR", "/dev/shm", 1);
        p = spill_copy(src, N);
        CHECK(!p && no_error(), "TMPDIR on tmpfs: NULL and no error (%s)", al_errmsg());
        spill_free(p, N);
        unsetenv("TMPDIR");
    }
    free(src);
    size_t m0z = spill_mapped_bytes();                  /* spill_zeroed: zeros, its blocks reserved */
    unsigned char *z = spill_zeroed(N);
    bool zero = z != NULL;
    for (size_t i = 0; zero && i < N; i++) zero = z[i] == 0;
    CHECK(zero && spill_mapped_bytes() == m0z + N, "spill_zeroed: %d zero bytes, counted", N);
    if (z) { z[7] = 9; CHECK(z[7] == 9, "a store through the zeroed mapping"); }
    spill_free(z, N);
    setenv("TMPDIR", "/dev/null", 1);
    al_err_clear();
    z = spill_zeroed(N);
    CHECK(!z && no_error() && spill_mapped_bytes() == m0z, "spill_zeroed, no file: NULL and no error");
    unsetenv("TMPDIR");
}

/* Adds T rows of every kind to each layer of st (the same rows for the same seed). */
static void fill(CalibStats *st, unsigned seed, size_t T) {
    const CalibShape *sh = &st->sh;
    size_t D = (size_t)sh->hidden, w = (size_t)sh->n_heads * sh->d_qk;
    float *x = malloc(T * D * sizeof(float));
    for (size_t i = 0; x && i < T * D; i++) { seed = seed * 1103515245u + 12345u; x[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f; }
    for (int l = 0; x && l < sh->n_layers; l++) {
        CHECK_OK(calib_add(st, CALIB_X, l, x, T, D));
        CHECK_OK(calib_add(st, CALIB_K, l, x, T, w));
        CHECK_OK(calib_add(st, CALIB_Q, l, x, T, w));
        CHECK_OK(calib_add(st, CALIB_V, l, x, T, w));
    }
    free(x);
}

/* True when every layer's G_X (and G_K) of a and b are the same bits. */
static bool same_grams(const CalibStats *a, const CalibStats *b) {
    size_t D = (size_t)a->sh.hidden;
    double *ga = malloc(D * D * sizeof(double)), *gb = malloc(D * D * sizeof(double));
    bool same = ga && gb;
    for (int l = 0; same && l < a->sh.n_layers; l++)
        same = calib_gram(a, CALIB_X, l, 0, ga) == AL_OK && calib_gram(b, CALIB_X, l, 0, gb) == AL_OK &&
               !memcmp(ga, gb, D * D * sizeof(double)) && calib_gram(a, CALIB_K, l, 0, ga) == AL_OK &&
               calib_gram(b, CALIB_K, l, 0, gb) == AL_OK && !memcmp(ga, gb, (size_t)a->sh.d_qk * a->sh.d_qk * sizeof(double));
    free(ga); free(gb);
    return same;
}

static void spill_stats(void) {
    enum { L = 8, N = 1024, T = 200 };
    CalibShape sh = {.n_layers = L, .n_heads = 4, .n_kv_heads = 2, .d_qk = 16, .d_v = 16, .hidden = N};
    CalibStats *a = NULL, *b = NULL, *c = NULL;
    setenv("TMPDIR", "/dev/null", 1);                   /* G_X calloc'd (calib_new spills it where it can) */
    CHECK_OK(calib_new(&sh, true, &a));
    unsetenv("TMPDIR");
    CHECK_OK(calib_new(&sh, true, &b));
    if (!a || !b) return;
    fill(a, 3, T);
    fill(b, 3, T);
    size_t bytes = (size_t)L * N * (N + 1) / 2 * sizeof(double);
    long a0 = status_kb("RssAnon");
    calib_spill(a);
    long a1 = status_kb("RssAnon");
    printf("calib_spill of %zu bytes of G_X: RssAnon %ld -> %ld kB\n", bytes, a0, a1);
    CHECK(calib_spilled(a) && a->gx_spill == bytes, "spilled %zu bytes, want %zu", a->gx_spill, bytes);
    CHECK(!MEASURED || (a0 > 0 && a0 - a1 > (long)(0.9 * bytes / 1024)), "RssAnon fell %ld kB, G_X is %zu kB", a0 - a1,
          bytes / 1024);
    CHECK(same_grams(a, b), "the spilled Grams are the same bits");
    fill(a, 5, T);                                      /* stores through the mapping */
    fill(b, 5, T);
    CHECK(same_grams(a, b), "more rows: the same bits");
    char *path = al_asprintf("%s/spill.safetensors", test_tmpdir());
    CHECK_OK(calib_save(a, path));
    CHECK_OK(calib_load(path, &c));
    CHECK(c && calib_spilled(c) && same_grams(c, b), "calib_load spills and reads the same bits");
    calib_free(c);
    setenv("TMPDIR", "/dev/null", 1);
    al_err_clear();
    CHECK_OK(calib_load(path, &c));
    CHECK(c && !calib_spilled(c) && same_grams(c, b) && no_error(), "no file: G_X in memory, the same bits, no error");
    unsetenv("TMPDIR");
    calib_free(c);
    free(path);
    calib_free(a);
    calib_free(b);
}

/* calib_run over stories260K's first tokens (with TMPDIR as given); *out the statistics. */
static void run_stories(const char *models, CalibStats **out) {
    char *bin = al_asprintf("%s/stories260K/stories260K.bin", models);
    Model *m = NULL;
    Forward *f = NULL;
    CalibShape sh;
    *out = NULL;
    CHECK_OK(model_open(bin, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) CHECK_OK(calib_shape_of(m, &sh));
    int ids[96];
    for (int i = 0; i < 96; i++) ids[i] = 1 + (i * 37) % 500;
    if (f && calib_new(&sh, true, out) == AL_OK) CHECK_OK(calib_run(*out, f, ids, 3, 32));
    fwd_free(f);
    model_free(m);
    free(bin);
}

static void spill_run(const char *models) {
    CalibStats *a = NULL, *b = NULL;
    run_stories(models, &a);
    setenv("TMPDIR", "/dev/null", 1);
    run_stories(models, &b);
    unsetenv("TMPDIR");
    CHECK(a && calib_spilled(a), "calib_run ends with G_X spilled");
    CHECK(b && !calib_spilled(b), "no file: G_X in memory");
    CHECK(a && b && same_grams(a, b), "the same Grams either way");
    calib_free(a);
    calib_free(b);
}

int main(void) {
    spill_basic();
    spill_stats();
    const char *models = getenv("ATTNLAB_MODELS");
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/stories260K/stories260K.bin", models ? models : "");
    FILE *fp = models ? fopen(probe, "rb") : NULL;
    if (fp) { fclose(fp); spill_run(models); }
    else printf("skip calib_run: $ATTNLAB_MODELS/stories260K is absent\n");
    return check_done();
}
