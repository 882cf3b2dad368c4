/* test_calib_gx_anon.c -- issue 32: the anonymous memory of `calibrate ... inputs on` does not grow with the
 * layers. The attention-input Grams G_X (packed, hidden (hidden + 1) / 2 doubles a layer: 4.2 MB at hidden 1024,
 * 67 MB at 8B's 4096) live in a spill mapping from calib_new on (core/base/spill.h), so rows accumulate into page
 * cache; they used to be calloc'd and accumulate in anonymous memory until calib_run's end moved them out.
 *
 * 1. calib_add, sequence by sequence over every layer (the forward pass's order), on 8 and on 16 layers of hidden
 *    1024: RssAnon grows by far less than the 8 extra layers' G_X (33.6 MB; asserted below 2 %: their G_K / G_Q /
 *    G_V, 1.5 MB, share one mapping -- one layer's, kqsvd's per-sequence scratch, stay in memory); every Gram
 *    (G_X, G_K, G_Q, G_V, S_X) is bit for bit the one accumulated in memory with no file to spill to
 *    (TMPDIR=/dev/null), which calib_new then callocs as before, with no error set; calib_save / calib_load: the same.
 * 2. calib_run through a model of hidden 1024 (written here, F32), 4 and 8 layers, 4 sequences: RssAnon sampled
 *    after every sequence (the progress callback) peaks above its start by far less than the 4 extra layers' G_X
 *    (16.8 MB; asserted below 15 %), and the Grams are those of a run with no file.
 * The sizes are checked in normal builds only (under ASan freed memory stays resident). */
#include "check.h"
#include "test_mem_util.h"
#include "test_transmla_util.h"
#include "calib.h"
#include "forward.h"
#include "model.h"
#include "spill.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

enum { N = 1024 };                                       /* hidden */

static bool no_error(void) { return !strcmp(al_errmsg(), "unknown error"); }

static double gx_kb(int layers) { return layers * (double)N * (N + 1) / 2 * sizeof(double) / 1024; }

/* True when every Gram and sum of a and b are the same bits. */
static bool same_stats(const CalibStats *a, const CalibStats *b) {
    const CalibShape *sh = &a->sh;
    double *ga = malloc((size_t)N * N * sizeof(double)), *gb = malloc((size_t)N * N * sizeof(double));
    bool same = ga && gb && !memcmp(a->sx, b->sx, (size_t)sh->n_layers * N * sizeof(double)) &&
                !memcmp(a->tokens, b->tokens, (size_t)sh->n_layers * sizeof(size_t));
    for (int l = 0; same && l < sh->n_layers; l++)
        for (calib_which w = CALIB_K; same && w <= CALIB_X; w++) {
            size_t n = w == CALIB_X ? N : w == CALIB_V ? (size_t)sh->d_v : (size_t)sh->d_qk;
            for (int g = 0; same && g < (w == CALIB_X ? 1 : sh->n_kv_heads); g++)
                same = calib_gram(a, w, l, g, ga) == AL_OK && calib_gram(b, w, l, g, gb) == AL_OK &&
                       !memcmp(ga, gb, n * n * sizeof(double));
        }
    free(ga); free(gb);
    return same;
}

/* Rows of sequence s: T x N floats in [-1, 1). */
static float *rows(unsigned s, size_t T) {
    float *x = malloc(T * N * sizeof(float));
    unsigned r = 7 + 131 * s;
    for (size_t i = 0; x && i < T * N; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = (float)((r >> 8) % 2001) / 1000.0f - 1.0f;
    }
    return x;
}

/* Statistics of L layers fed 3 sequences of T rows in the forward pass's order (each sequence through every
 * layer); *grown the RssAnon kB it added after layer 0 of the first (scratch and BLAS buffers in place). */
static CalibStats *calibrate_adds(int L, long *grown) {
    enum { T = 300, S = 3 };
    CalibShape sh = {.n_layers = L, .n_heads = 16, .n_kv_heads = 2, .d_qk = 64, .d_v = 64, .hidden = N};
    CalibStats *st = NULL;
    long a0 = 0;
    CHECK_OK(calib_new(&sh, true, &st));
    for (unsigned s = 0; st && s < S; s++) {
        float *x = rows(s, T);
        for (int l = 0; x && l < L; l++) {
            CHECK_OK(calib_add(st, CALIB_X, l, x, T, N));
            CHECK_OK(calib_add(st, CALIB_K, l, x, T, N));
            CHECK_OK(calib_add(st, CALIB_Q, l, x, T, N));
            CHECK_OK(calib_add(st, CALIB_V, l, x, T, N));
            calib_seq_done(st, l);
            if (s == 0 && l == 0) a0 = status_kb("RssAnon");
        }
        free(x);
    }
    *grown = status_kb("RssAnon") - a0;
    return st;
}

static void adds(void) {
    long g8, g16, gm;
    CalibStats *a8 = calibrate_adds(8, &g8);
    CalibStats *a16 = calibrate_adds(16, &g16);
    printf("calib_add, 3 sequences: RssAnon %+ld kB at 8 layers, %+ld kB at 16 (G_X of 8 layers %.0f kB)\n", g8, g16,
           gx_kb(8));
    CHECK(a8 && a16 && calib_spilled(a16) && a16->gx_spill == (size_t)(gx_kb(16) * 1024), "G_X spilled from calib_new");
    CHECK(!MEASURED || g16 - g8 < 0.02 * gx_kb(8), "8 more layers grew RssAnon by %ld kB; their G_X is %.0f kB",
          g16 - g8, gx_kb(8));                          /* their G_K / G_Q / G_V, 1.5 MB, mapped too */
    CHECK(a16 && a16->kqv_spill == 16 * 3 * 2 * 64 * 64 * sizeof(double), "G_K / G_Q / G_V in one mapping");
    CalibShape one = {.n_layers = 1, .n_heads = 16, .n_kv_heads = 2, .d_qk = 64, .d_v = 64, .hidden = N};
    CalibStats *o = NULL;
    CHECK_OK(calib_new(&one, false, &o));
    CHECK(o && !o->kqv_spill && !o->gx_spill, "one layer's K / Q / V Grams (kqsvd's scratch) stay in memory");
    calib_free(o);
    CHECK(!MEASURED || g16 < 0.10 * gx_kb(15), "16 layers grew RssAnon by %ld kB; G_X of 15 is %.0f kB", g16,
          gx_kb(15));
    setenv("TMPDIR", "/dev/null", 1);                   /* not a folder: no file, G_X calloc'd as before */
    al_err_clear();
    CalibStats *m16 = calibrate_adds(16, &gm);
    unsetenv("TMPDIR");
    printf("no file: RssAnon %+ld kB at 16 layers\n", gm);
    CHECK(m16 && !calib_spilled(m16) && no_error(), "no file: G_X in memory, no error (%s)", al_errmsg());
    CHECK(!MEASURED || gm > 0.9 * gx_kb(15), "no file: RssAnon +%ld kB, G_X of 15 layers %.0f kB", gm, gx_kb(15));
    CHECK(a16 && m16 && same_stats(a16, m16), "the Grams accumulated in the mapping are the bits of those in memory");
    char *path = al_asprintf("%s/gx.safetensors", test_tmpdir());
    CalibStats *c = NULL;
    if (a16) CHECK_OK(calib_save(a16, path));
    CHECK_OK(calib_load(path, &c));
    CHECK(c && m16 && calib_spilled(c) && same_stats(c, m16), "calib_save / calib_load: the same bits, spilled");
    calib_free(c);
    free(path);
    calib_free(a8); calib_free(a16); calib_free(m16);
}

/* ------------------------------------------------------------------ calib_run */

static long peak_anon;

static void sample(const char *label, size_t done, size_t total, void *ud) {
    (void)label; (void)done; (void)total; (void)ud;
    long a = status_kb("RssAnon");
    if (a > peak_anon) peak_anon = a;
}

/* The model of L layers (hidden 1024) calibrated over 4 sequences of 64 tokens after a warm run (the forward pass's
 * buffers in place); *grown the peak RssAnon kB above the start (before calib_new) sampled after each sequence. */
static CalibStats *calibrate_run(const char *tmp, int L, long *grown) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/m%d", tmp, L);
    TuModel tm = {.model_type = "llama", .layers = L, .hidden = N, .heads = 16, .kv_heads = 2, .head_dim = 64,
                  .inter = 64, .vocab = 64, .dtype = DT_F32};
    Model *m = NULL;
    Forward *f = NULL;
    CalibStats *warm = NULL, *st = NULL;
    CalibShape sh;
    int ids[256];
    for (int i = 0; i < 256; i++) ids[i] = (i * 37 + 11) % 64;
    struct stat sb;
    if (stat(dir, &sb) != 0) CHECK_OK(tu_write_model(dir, &tm));     /* written once: the no-file run reads the same */
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f && calib_shape_of(m, &sh) == AL_OK && calib_new(&sh, true, &warm) == AL_OK)
        CHECK_OK(calib_run(warm, f, ids, 1, 64));
    calib_free(warm);
    long a0 = status_kb("RssAnon");
    if (f && calib_new(&sh, true, &st) == AL_OK) {
        peak_anon = a0;
        al_set_progress(sample, NULL);
        CHECK_OK(calib_run(st, f, ids, 4, 64));
        al_set_progress(NULL, NULL);
        *grown = peak_anon - a0;
    }
    fwd_free(f);
    model_free(m);
    return st;
}

static void runs(void) {
    const char *tmp = test_tmpdir();
    long g4 = 0, g8 = 0, gm = 0;
    CalibStats *a4 = calibrate_run(tmp, 4, &g4), *a8 = calibrate_run(tmp, 8, &g8);
    printf("calib_run, 4 sequences: peak RssAnon %+ld kB at 4 layers, %+ld kB at 8 (G_X of 4 layers %.0f kB)\n", g4, g8,
           gx_kb(4));
    CHECK(!MEASURED || g8 - g4 < 0.15 * gx_kb(4), "4 more layers: peak RssAnon +%ld kB; their G_X is %.0f kB", g8 - g4,
          gx_kb(4));
    setenv("TMPDIR", "/dev/null", 1);
    CalibStats *m8 = calibrate_run(tmp, 8, &gm);
    unsetenv("TMPDIR");
    printf("no file: peak RssAnon %+ld kB at 8 layers\n", gm);
    CHECK(!MEASURED || gm - g8 > 0.8 * gx_kb(8), "no file: G_X in memory while it runs (+%ld kB against +%ld)", gm, g8);
    CHECK(a8 && m8 && calib_spilled(a8) && !calib_spilled(m8) && same_stats(a8, m8),
          "calib_run: the same Grams either way");
    calib_free(a4); calib_free(a8); calib_free(m8);
}

int main(void) {
    mallopt(M_MMAP_THRESHOLD, 1 << 20);       /* large buffers always mapped afresh and returned when freed: glibc's
                                                 dynamic threshold would serve them from freed heap, resident already */
    char probe[4096] = {0};
    void *p = spill_copy(probe, sizeof probe);         /* $TMPDIR on tmpfs or unwritable: nothing to measure */
    if (!p) check_skip("no spill file can be made under $TMPDIR (else /var/tmp, /tmp)");
    spill_free(p, sizeof probe);
    adds();
    runs();
    return check_done();
}
