/* bench_farr.c -- speed of fused-head spectra at DeepSeek-R1 shapes (not a test).
 *
 *   bench_farr [heads] [threads]          (default 128 heads = one R1 layer, al_threads())
 *   bench_farr --model DIR [layer]        farr_layer_compute on a checkpoint (e.g. one written by
 *                                         synth_ds_r1_shape), VO and QK, cold and cached
 *   bench_farr --write-r1 DIR [layers]    writes a DeepSeek-R1-shaped FP8 checkpoint there first
 *
 * Per head: VO = W_V (512 x 128) @ W_O (128 x 7168), QK = W_Q (1536 x 128) @ W_K (512 x 128)ᵀ.
 * Times the Gram route (syrk + syevd + gesdd of the core, double), the QR route (geqrf), both
 * over a head sweep with one BLAS thread per worker, and the naive dense route (form the
 * product, gesdd) on a few heads, extrapolated. Also reports the worst singular-value error of
 * each route against the dense reference on those heads. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "farr.h"
#include "spectra.h"
#include "sweep.h"
#include "synth.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned long long rs = 88172645463325252ULL;
static double nrand(void) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
        u[i] = ((rs >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

static Mat *randn(size_t r, size_t c, double decay) {
    Mat *m = mat_new(r, c);
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) m->data[i * c + j] = (float)(nrand() * exp(-decay * (double)j));
    return m;
}

typedef struct {
    Mat **A, **B;
    spectra_op op;
    unsigned flags;
} Job;

static int task(size_t i, int worker, void *ud) {
    (void)worker;
    Job *j = ud;
    Spectrum *s = NULL;
    int rc = spectra_product_svd(j->A[i], j->B[i], j->op, j->flags, &s, NULL, NULL);
    spectrum_free(s);
    return rc;
}

static double worst_err(const Mat *A, const Mat *B, spectra_op op, unsigned flags, const Spectrum *ref) {
    Spectrum *s = NULL;
    if (spectra_product_svd(A, B, op, flags, &s, NULL, NULL) != AL_OK) return INFINITY;
    double w = 0;
    for (size_t i = 0; i < ref->p && i < s->p; i++) w = fmax(w, fabs(s->sigma[i] - ref->sigma[i]) / ref->sigma[0]);
    spectrum_free(s);
    return w;
}

static int bench_shapes(int heads, int threads) {
    const struct { const char *name; size_t m, k, n; spectra_op op; } pairs[] = {
        { "VO 512x128 @ 128x7168", 512, 128, 7168, SPECTRA_AB },
        { "QK 1536x128 @ (512x128)T", 1536, 128, 512, SPECTRA_ABT },
    };
    printf("%d heads per layer, %d worker threads (1 BLAS thread each)\n", heads, sweep_threads((size_t)heads, threads));
    for (size_t p = 0; p < 2; p++) {
        Job j = { .op = pairs[p].op };
        j.A = calloc((size_t)heads, sizeof(Mat *));
        j.B = calloc((size_t)heads, sizeof(Mat *));
        for (int h = 0; h < heads; h++) {
            j.A[h] = randn(pairs[p].m, pairs[p].k, 0.02);
            j.B[h] = pairs[p].op == SPECTRA_AB ? randn(pairs[p].k, pairs[p].n, 0.0) : randn(pairs[p].n, pairs[p].k, 0.01);
        }
        double t0 = now();
        j.flags = 0;
        if (sweep_run((size_t)heads, threads, task, &j) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        double t_gram = now() - t0;
        t0 = now();
        j.flags = SPECTRA_QR;
        if (sweep_run((size_t)heads, threads, task, &j) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        double t_qr = now() - t0;
        t0 = now();
        j.flags = 0;
        if (sweep_run((size_t)heads, 1, task, &j) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        double t_gram1 = now() - t0;
        int nd = heads < 2 ? heads : 2;
        double wg = 0, wq = 0;
        t0 = now();
        for (int h = 0; h < nd; h++) {
            Spectrum *ref = NULL;
            if (spectra_dense_product_svd(j.A[h], j.B[h], pairs[p].op, 0, &ref) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
            wg = fmax(wg, worst_err(j.A[h], j.B[h], pairs[p].op, 0, ref));
            wq = fmax(wq, worst_err(j.A[h], j.B[h], pairs[p].op, SPECTRA_QR, ref));
            spectrum_free(ref);
        }
        double t_dense = (now() - t0) / nd * heads;
        printf("%-26s gram %.3f s (1 thread %.3f s)  qr %.3f s  dense (formed, extrapolated) %.2f s\n",
               pairs[p].name, t_gram, t_gram1, t_qr, t_dense);
        printf("%-26s worst |sigma - dense| / sigma_max: gram %.2g, qr %.2g\n", "", wg, wq);
        for (int h = 0; h < heads; h++) { mat_free(j.A[h]); mat_free(j.B[h]); }
        free(j.A); free(j.B);
    }
    return 0;
}

static int bench_model(const char *dir, int layer) {
    Model *m = NULL;
    if (model_open(dir, &m) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    FarrState *st = farr_state_new();
    for (int k = 0; k < 2; k++) {
        const FarrLayer *l;
        double t0 = now();
        if (farr_state_layer(st, m, (farr_kind)k, layer, FARR_NO_OFFSET, &l) != AL_OK) {
            fprintf(stderr, "%s\n", al_errmsg());
            farr_state_free(st); model_free(m);
            return 1;
        }
        double t1 = now();
        farr_state_layer(st, m, (farr_kind)k, layer, FARR_NO_OFFSET, &l);
        double t2 = now();
        int mn = 1 << 30, mx = 0;
        for (int h = 0; h < l->n_heads; h++) {
            int rf;
            farr_layer_ranks(l, h, 0.999, NULL, NULL, &rf);
            if (rf < mn) mn = rf;
            if (rf > mx) mx = rf;
        }
        printf("%s layer %d (%d heads): %.3f s (load + dequantize + spectra), cached %.6f s; fused ranks %d-%d\n",
               farr_fused_name((farr_kind)k), layer, l->n_heads, t1 - t0, t2 - t1, mn, mx);
    }
    farr_state_free(st);
    model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--write-r1") == 0) {
        double t0 = now();
        if (synth_ds_r1_shape(argv[2], argc > 3 ? atoi(argv[3]) : 1, 1) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        printf("wrote %s in %.1f s\n", argv[2], now() - t0);
        return bench_model(argv[2], 0);
    }
    if (argc >= 3 && strcmp(argv[1], "--model") == 0) return bench_model(argv[2], argc > 3 ? atoi(argv[3]) : 0);
    int heads = argc > 1 ? atoi(argv[1]) : 128, threads = argc > 2 ? atoi(argv[2]) : 0;
    if (heads < 1) heads = 1;
    return bench_shapes(heads, threads);
}
