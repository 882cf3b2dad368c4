/* bench_scale.c -- DeepSeek-R1-scale FaRR sweeps: speed against the naive method and against the
 * kernel floor, and peak memory against the layer count (not a test; see bench/README.md).
 *
 *   bench_scale [--model DIR] [--layers N] [--naive H] [--reps R] [--keep] [--breakdown] [--cold] [--fast-only]
 *
 * Without --model it writes a DeepSeek-R1-shaped FP8 checkpoint (synth_ds_r1_shape: R1's exact
 * attention shapes, 128x128 block scales, sharded with an index) of N layers (default 4) into a
 * temporary folder, and removes it at the end unless --keep. On that data, in one run, it prints:
 *   1. seconds per layer of the full VO and QK sweeps (farr_layer_compute, stream route: Grams
 *      straight from the mapping, page cache warm), wall and CPU, and the 61-layer extrapolation;
 *   2. the naive method on H sampled heads per pair (form the fused matrix in double, dgesdd
 *      values only), one head at a time as the seed runs it and heads in parallel, and the ratio
 *      naive / attnlab per head;
 *   3. the floor: the bare kernels of every factor of a layer on the same shapes from memory (no
 *      I/O, no dequantization): the Gram products (dsyrk, double) alone, and with the values-only
 *      eigen-solves the method also cannot avoid; and attnlab / floor for both;
 *   4. peak resident memory (VmHWM) of a fresh process sweeping VO + QK over 2 and over 4 layers
 *      (and over all N when N > 4);
 *   5. the fast route (issue 18: BF16 Grams; FARR_ROUTE_RANKS: float reductions in the solves, bound to match)
 *      per layer, its certification at tau 0.999 (heads redone in double; heads open at 0.999, 0.99, 0.9), the
 *      double route, the float32 LAPACK route (ssyrk + ssyevd + spotrf per head) and the fast
 *      route's floor (its BF16 Gram kernel and the solves it uses, alone) on the same
 *      shapes from memory, with the ratios fast / float32 route, fast / floor and certified /
 *      double route (on a CPU with AMX-BF16 the Grams take its tiles; the fast sweep is also
 *      timed in the same rounds on the vdpbf16ps kernel, AMX off, with its ratio); the parts of the
 *      float32 route and the floor per layer, VO and QK (Grams, Cholesky + fused cores, eigen-solves;
 *      thread CPU time) and the fast sweep's CPU per pair; --cold also sweeps every layer with the checkpoint's page cache dropped
 *      (posix_fadvise DONTNEED) through the page cache, then warm, then cold again read past it (gram_ahead.h:
 *      O_DIRECT into the sweep's buffers, what a cold sweep takes), and the float32 route reading the file cold.
 *      --fast-only runs section 5 alone.
 * The first line says which OpenBLAS kernels run (blas_arch.h: attnlab's choice; OPENBLAS_CORETYPE=Prescott
 * gives the library's fallback on a CPU its table does not know, the kernels before s12).
 * Every parallel part runs on al_threads() workers with one BLAS thread each. The machine may be
 * shared: R rounds (default 3) each measure 1-3 back to back so they see the same load, each
 * figure is its best over the rounds, CPU seconds are printed beside wall seconds, and the load
 * average is printed at the start and the end. --breakdown first prints the single-thread cost of
 * each step for one head. */
#define _GNU_SOURCE
#include <cblas.h>
#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>

#include "blas_arch.h"
#include "farr.h"
#include "farr_internal.h"
#include "fused_core.h"
#include "gram.h"
#include "gram_ahead.h"
#include "gram_bf16.h"
#include "spectra.h"
#include "sweep.h"
#include "synth.h"
#include "symeig.h"

/* ================================================================ clocks */

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads). */
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void loadavg(const char *when) {
    char buf[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) strcpy(buf, "?");
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
    printf("load average %s: %s (%ld CPUs)\n", when, buf, sysconf(_SC_NPROCESSORS_ONLN));
}

static int fail(const char *what) {
    fprintf(stderr, "bench_scale: %s: %s\n", what, al_errmsg());
    return 1;
}

/* ================================================================ 1. the sweep */

typedef struct { double wall, cpu; } Time;

/* VO + QK spectra of layer L through farr_layer_compute (the stream route); the ranks are
 * summarized into *rmin / *rmax of the fused VO ranks at 0.999 on the way. */
static int sweep_layer(Model *m, int L, Time *vo, Time *qk, int *rmin, int *rmax) {
    for (int k = 0; k < 2; k++) {
        FarrLayer *l = NULL;
        double w0 = wall(), c0 = cpu();
        if (farr_layer_compute(m, (farr_kind)k, L, FARR_NO_OFFSET, &l) != AL_OK) return AL_ERR;
        Time t = { wall() - w0, cpu() - c0 };
        if (k == 0) {
            *vo = t;
            for (int h = 0; h < l->n_heads; h++) {
                int rf;
                farr_layer_ranks(l, h, 0.999, NULL, NULL, &rf);
                if (rf < *rmin) *rmin = rf;
                if (rf > *rmax) *rmax = rf;
            }
        } else {
            *qk = t;
        }
        farr_layer_free(l);
    }
    return AL_OK;
}

/* ================================================================ 2. the naive method */

typedef struct {
    Model *m;
    farr_kind kind;
    int layer;
    int *heads;
} NaiveJob;

static int naive_task(size_t i, int worker, void *ud) {
    (void)worker;
    NaiveJob *j = ud;
    Mat *A, *B;
    spectra_op op;
    if (farr_head_factors(j->m, j->kind, j->layer, j->heads[i], FARR_NO_OFFSET, &A, &B, &op) != AL_OK) return AL_ERR;
    Spectrum *s = NULL;
    int rc = spectra_dense_product_svd(A, B, op, 0, &s);
    spectrum_free(s);
    mat_free(A);
    mat_free(B);
    return rc;
}

/* Seconds per head of the naive method for `kind` on n heads spread over layer L (the factors
 * are read before the clock starts: model_layer_load). parallel: heads on al_threads() workers
 * with one BLAS thread each (the best throughput); else one head at a time with OpenBLAS using
 * every core, as the seed's notebook runs it. */
static int naive_per_head(Model *m, farr_kind kind, int L, int n, bool parallel, double *per_head) {
    int *heads = calloc((size_t)n, sizeof *heads);
    if (!heads) return al_err("out of memory");
    for (int i = 0; i < n; i++) heads[i] = (int)((long)i * m->cfg.n_heads / n);
    if (model_layer_load(m, L) != AL_OK) { free(heads); return AL_ERR; }
    NaiveJob j = { .m = m, .kind = kind, .layer = L, .heads = heads };
    int rc = AL_OK;
    double w0 = wall();
    if (parallel) {
        rc = sweep_run((size_t)n, 0, naive_task, &j);
    } else {
        openblas_set_num_threads(al_threads());
        for (int i = 0; i < n && rc == AL_OK; i++) rc = naive_task((size_t)i, 0, &j);
    }
    *per_head = (wall() - w0) / n;
    free(heads);
    return rc;
}

/* ================================================================ 3. the floor */

/* One layer's floor: every worker runs the kernels of one head on the same in-memory factors. */
typedef struct {
    const GramView *v;      /* (4) the views: V, O, Q, K of one head */
    double **X;             /* (4) the blocks, dequantized once */
    double *G;              /* (threads, 4, 128, 128) Gram outputs */
    bool solves;            /* also the eigen-solves of both pairs */
} FloorJob;

static int floor_task(size_t h, int worker, void *ud) {
    (void)h;
    FloorJob *j = ud;
    double *G = j->G + (size_t)worker * 4 * 128 * 128;
    for (int f = 0; f < 4; f++) {
        const GramView *v = &j->v[f];
        int k = (int)gram_view_k(v), n = (int)gram_view_rows(v);
        if (v->row_gram)
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, k, n, 1.0, j->X[f], n, 0.0, G + f * 128 * 128, k);
        else
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, k, n, 1.0, j->X[f], k, 0.0, G + f * 128 * 128, k);
        if (j->solves)      /* full storage for the eigen-solves */
            for (int a = 0; a < k; a++)
                for (int b = a + 1; b < k; b++) G[f * 128 * 128 + b * k + a] = G[f * 128 * 128 + a * k + b];
    }
    if (!j->solves) return AL_OK;
    /* VO: V factored, O per head; QK: K factored, Q per head (as the stream route pairs them). */
    for (int pair = 0; pair < 2; pair++) {
        int fs = pair == 0 ? 0 : 3, fh = pair == 0 ? 1 : 2;
        size_t k = gram_view_k(&j->v[fs]), rs = gram_view_rows(&j->v[fs]), rh = gram_view_rows(&j->v[fh]);
        LinGramSide *sh = NULL, *own = NULL;
        Spectrum *f = NULL;
        int rc = spectra_gram_side_new(G + fs * 128 * 128, k, rs, true, &sh);
        if (rc == AL_OK) rc = spectra_gram_side_new(G + fh * 128 * 128, k, rh, false, &own);
        if (rc == AL_OK) rc = spectra_gram_fused(sh, G + fh * 128 * 128, rs, rh, &f);
        spectrum_free(f);
        spectra_gram_side_free(sh);
        spectra_gram_side_free(own);
        if (rc != AL_OK) return rc;
    }
    return AL_OK;
}

/* Seconds (wall and CPU) of the kernels of one layer (n_heads heads x V, O, Q, K) on the shapes
 * (and data) of head 1's factors, from memory, on the sweep's workers: the Gram products (dsyrk),
 * and with `solves` also the values-only eigen-solves of both pairs (spectra_gram_*: dpotrf, dtrmm,
 * dsytrd, dsterf). */
static int floor_layer(Model *m, int L, bool solves, Time *secs) {
    static const head_kind kinds[4] = {HK_V, HK_O, HK_Q, HK_K};
    GramView v[4];
    double *X[4] = {0};
    memset(v, 0, sizeof v);
    int rc = AL_OK;
    for (int f = 0; f < 4 && rc == AL_OK; f++) {
        rc = gram_view(m, kinds[f], L, 1, f >= 2 ? PART_NOPE : PART_ALL, &v[f]);
        if (rc == AL_OK && gram_view_k(&v[f]) > 128) rc = al_err("floor: head dims above 128 are not supported");
        if (rc == AL_OK && !(X[f] = al_malloc3(v[f].nr, v[f].nc, sizeof(double), "a factor"))) rc = AL_ERR;
        if (rc == AL_OK) rc = gram_read_block(m->store, v[f].tensor, v[f].r0, v[f].nr, v[f].c0, v[f].nc, X[f], v[f].nc);
    }
    int T = sweep_threads((size_t)m->cfg.n_heads, 0);
    double *G = rc == AL_OK ? al_malloc3((size_t)T * 4, 128 * 128, sizeof(double), "Grams") : NULL;
    if (rc == AL_OK && !G) rc = AL_ERR;
    if (rc == AL_OK) {
        FloorJob j = { .v = v, .X = X, .G = G, .solves = solves };
        double w0 = wall(), c0 = cpu();
        rc = sweep_run((size_t)m->cfg.n_heads, 0, floor_task, &j);
        *secs = (Time){ wall() - w0, cpu() - c0 };
    }
    for (int f = 0; f < 4; f++) { free(X[f]); gram_view_clear(&v[f]); }
    free(G);
    return rc;
}

/* ================================================================ 5. the fast route (issue 18) */

/* The fast route's own comparisons on one layer's shapes (head 1's factors, from memory, every
 * head of the layer on the sweep's workers):
 *   FAST_F32: the float32 LAPACK route -- ssyrk per factor, ssyevd (values) per factor, spotrf
 *     of the shared side, two strmm and ssyevd for the fused core;
 *   FAST_FLOOR: the fast route's own kernels alone -- the BF16 Gram kernel on pre-packed chunks
 *     (the FP8 scale taken out per chunk) and the solves the fast route uses (double: dpotrf,
 *     two dtrmm per pair; the six values-only solves of each head batched, FLOOR_BATCH heads to
 *     a symeig_values_f32_ws call: the reduction in float, as farr.c's solve_values). */
typedef enum { FAST_F32, FAST_FLOOR } fast_mode;

typedef struct {
    fast_mode mode;
    const GramView *v;      /* (4) V, O, Q, K */
    float **X;              /* (4) FAST_F32: the blocks as float */
    uint32_t **P;           /* (4) FAST_FLOOR: the blocks packed in BF16 pairs, chunk after chunk */
    float *scale;           /* (128) a chunk's scales (FP8), or NULL */
    int T;
    float *Gf;              /* (threads, 4, 128, 128) */
    double *Gd;             /* (threads, FLOOR_BATCH, 6, 128, 128): 4 Grams and 2 fused cores a head */
    double *wd;             /* (threads, FLOOR_BATCH, 6, 128) eigenvalues */
    SymeigWork *ws[64];     /* (threads) the eigen-solver's scratch */
    GbfWork *gw[64];        /* (threads) the AMX chunk's scratch */
    GbfAcc *acc[64];        /* (threads) its float accumulator (gram.c's, one G at a time) */
    double *cw[64];         /* (threads) fused_core_lower's scratch, as farr.c's fast route */
    double part[64][2][3];  /* (threads) thread CPU seconds per pair (VO, QK) and part (PARTS) */
} FastJob;

/* The parts of a head's work timed in FAST_F32 and FAST_FLOOR (thread CPU time), per pair; the
 * floor's solves run VO's and QK's matrices in one batch, so they are split evenly (same count,
 * same size). parts_sum[mode][pair][part]: summed over every fast_layer call, parts_calls counts them. */
enum { PART_GRAM, PART_CORE, PART_SOLVE, PARTS };
static const char *part_names[PARTS] = {"Grams", "Cholesky + fused cores", "eigen-solves"};
static double parts_sum[2][2][PARTS];
static int parts_calls[2];
static double fast_pair_cpu[2];   /* the fast sweep's process CPU seconds per pair (VO, QK), summed */
static int fast_pair_calls;

static double thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Values-only float eigen-solve of a k x k float matrix (copied): ssyevd 'N'. */
static void ssyevd_n(const float *A, int k, float *tmp, float *w) {
    memcpy(tmp, A, (size_t)k * k * sizeof(float));
    LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'N', 'L', k, tmp, k, w);
}

static int fast_f32_head(FastJob *j, int worker) {
    float *G = j->Gf + (size_t)worker * 4 * 128 * 128;
    float tmp[128 * 128], L[128 * 128], w[128];
    double (*part)[PARTS] = j->part[worker], t0 = thread_cpu(), t1;
    for (int f = 0; f < 4; f++) {
        const GramView *v = &j->v[f];
        int k = (int)gram_view_k(v), n = (int)gram_view_rows(v);
        /* row-major upper = column-major lower of the same symmetric matrix */
        if (v->row_gram) cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, k, n, 1.0f, j->X[f], n, 0.0f, G + f * 16384, k);
        else cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, k, n, 1.0f, j->X[f], k, 0.0f, G + f * 16384, k);
        part[f / 2][PART_GRAM] += (t1 = thread_cpu()) - t0;
        t0 = t1;
    }
    for (int pair = 0; pair < 2; pair++) {
        int fs = pair == 0 ? 0 : 3, fh = pair == 0 ? 1 : 2, k = (int)gram_view_k(&j->v[fs]);
        ssyevd_n(G + fs * 16384, k, tmp, w);
        ssyevd_n(G + fh * 16384, k, tmp, w);
        part[pair][PART_SOLVE] += (t1 = thread_cpu()) - t0;
        t0 = t1;
        memcpy(L, G + fs * 16384, (size_t)k * k * sizeof(float));
        LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', k, L, k);
        for (int c = 0; c < k; c++) for (int r = 0; r < c; r++) L[c * k + r] = 0;
        for (int c = 0; c < k; c++) for (int r = c; r < k; r++) tmp[c * k + r] = tmp[r * k + c] = G[fh * 16384 + c * k + r];
        cblas_strmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, k, k, 1.0f, L, k, tmp, k);
        cblas_strmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, k, k, 1.0f, L, k, tmp, k);
        memcpy(L, tmp, (size_t)k * k * sizeof(float));
        part[pair][PART_CORE] += (t1 = thread_cpu()) - t0;
        ssyevd_n(L, k, tmp, w);
        part[pair][PART_SOLVE] += (t0 = thread_cpu()) - t1;
    }
    return AL_OK;
}

/* G (k x k, double, full) of view f from its packed chunks. */
static void floor_gram(const FastJob *j, int f, int worker, double *G) {
    const GramView *v = &j->v[f];
    size_t k = gram_view_k(v), n = gram_view_rows(v), ld = gbf_ld(k);
    memset(G, 0, k * k * sizeof(double));
    for (size_t c = 0; c < n; c += GBF_CHUNK) {
        size_t len = n - c < GBF_CHUNK ? n - c : GBF_CHUNK;
        gbf_chunk_bf16_acc(j->gw[worker], j->acc[worker], j->P[f] + c / 2 * ld, NULL, (len + 1) / 2, k, j->scale, G);
    }
    gbf_acc_flush(j->acc[worker], G);
    for (size_t a = 0; a < k; a++) for (size_t b = a + 1; b < k; b++) G[b * k + a] = G[a * k + b];
}

/* The floor's heads per task: as the fast route, their solves go to symeig in one call. */
#define FLOOR_BATCH 8

/* FLOOR_BATCH heads: the four Grams of each, the Cholesky factors of V and K and the two fused
 * cores, then all 6 x FLOOR_BATCH values-only solves in one symeig_values_f32_ws call (what
 * farr.c's solve_values runs). */
static int fast_floor_heads(FastJob *j, int worker) {
    double *G = j->Gd + (size_t)worker * FLOOR_BATCH * 6 * 16384, *w = j->wd + (size_t)worker * FLOOR_BATCH * 6 * 128;
    const double *A[FLOOR_BATCH * 6];
    double *W[FLOOR_BATCH * 6];
    size_t k = gram_view_k(&j->v[0]), n = 0;
    double (*part)[PARTS] = j->part[worker], t0 = thread_cpu(), t1;
    int rc = AL_OK;
    for (int b = 0; b < FLOOR_BATCH && rc == AL_OK; b++) {
        double *Gh = G + (size_t)b * 6 * 16384;
        for (int f = 0; f < 4; f++) {
            floor_gram(j, f, worker, Gh + f * 16384);
            part[f / 2][PART_GRAM] += (t1 = thread_cpu()) - t0;
            t0 = t1;
        }
        for (int pair = 0; pair < 2 && rc == AL_OK; pair++) {
            int fs = pair == 0 ? 0 : 3, fh = pair == 0 ? 1 : 2;
            LinGramSide *sh = NULL;
            rc = spectra_gram_side_factor(Gh + fs * 16384, k, gram_view_rows(&j->v[fs]), &sh);
            if (rc == AL_OK && sh->r != k) rc = al_err("floor: a rank-deficient factor (random data expected)");
            if (rc == AL_OK && j->cw[worker]) fused_core_lower(sh->L, Gh + fh * 16384, k, Gh + (4 + pair) * 16384, j->cw[worker]);
            else if (rc == AL_OK) rc = spectra_gram_fused_core(sh, Gh + fh * 16384, Gh + (4 + pair) * 16384);
            spectra_gram_side_free(sh);
            part[pair][PART_CORE] += (t1 = thread_cpu()) - t0;
            t0 = t1;
        }
        for (int f = 0; f < 6; f++, n++) { A[n] = Gh + f * 16384; W[n] = w + n * 128; }
    }
    if (rc == AL_OK) rc = symeig_values_f32_ws(j->ws[worker], n, k, A, W);
    t1 = thread_cpu() - t0;
    part[0][PART_SOLVE] += t1 / 2;
    part[1][PART_SOLVE] += t1 / 2;
    return rc;
}

static int fast_task(size_t h, int worker, void *ud) {
    (void)h;
    FastJob *j = ud;
    return j->mode == FAST_F32 ? fast_f32_head(j, worker) : fast_floor_heads(j, worker);
}

/* Packs a dequantized block (nr x nc, double) of view v into BF16 pairs along its contraction. */
static uint32_t *pack_view(const GramView *v, const double *X) {
    size_t k = gram_view_k(v), n = gram_view_rows(v), ld = gbf_ld(k);
    uint32_t *P = calloc(((n + 1) / 2 + 1) * ld, sizeof(uint32_t));
    if (!P) return NULL;
    uint16_t *P16 = (uint16_t *)P;
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < k; i++) {
            double x = v->row_gram ? X[i * n + t] : X[t * k + i];
            P16[((t >> 1) * ld + i) * 2 + (t & 1)] = dt_f32_to_bf16((float)x);
        }
    return P;
}

/* Every head's four factors of layer L read and decoded from the file into doubles (what a float32
 * route reading the checkpoint does first), timed into *t. */
static int read_layer(Model *m, int L, Time *t) {
    static const head_kind kinds[4] = {HK_V, HK_O, HK_Q, HK_K};
    double w0 = wall(), c0 = cpu(), *X = NULL;
    size_t cap = 0;
    int rc = AL_OK;
    for (int h = 0; rc == AL_OK && h < m->cfg.n_heads; h++)
        for (int f = 0; rc == AL_OK && f < 4; f++) {
            GramView v;
            if ((rc = gram_view(m, kinds[f], L, h, f >= 2 ? PART_NOPE : PART_ALL, &v)) != AL_OK) break;
            if (v.nr * v.nc > cap) {
                free(X);
                cap = v.nr * v.nc;
                if (!(X = al_malloc3(v.nr, v.nc, sizeof(double), "a factor"))) rc = AL_ERR;
            }
            if (rc == AL_OK) rc = gram_read_block(m->store, v.tensor, v.r0, v.nr, v.c0, v.nc, X, v.nc);
            gram_view_clear(&v);
        }
    free(X);
    t->wall += wall() - w0;
    t->cpu += cpu() - c0;
    return rc;
}

/* Seconds of one layer's heads through mode (see FastJob). */
static int fast_layer(Model *m, int L, fast_mode mode, Time *secs) {
    static const head_kind kinds[4] = {HK_V, HK_O, HK_Q, HK_K};
    GramView v[4];
    double *X[4] = {0};
    float *Xf[4] = {0};
    uint32_t *P[4] = {0};
    float scale[128];
    for (int i = 0; i < 128; i++) scale[i] = 1.0f + (float)i / 1024;
    memset(v, 0, sizeof v);
    int rc = AL_OK;
    for (int f = 0; f < 4 && rc == AL_OK; f++) {
        rc = gram_view(m, kinds[f], L, 1, f >= 2 ? PART_NOPE : PART_ALL, &v[f]);
        if (rc == AL_OK && gram_view_k(&v[f]) > 128) rc = al_err("head dims above 128 are not supported");
        if (rc == AL_OK && !(X[f] = al_malloc3(v[f].nr, v[f].nc, sizeof(double), "a factor"))) rc = AL_ERR;
        if (rc == AL_OK) rc = gram_read_block(m->store, v[f].tensor, v[f].r0, v[f].nr, v[f].c0, v[f].nc, X[f], v[f].nc);
        if (rc == AL_OK && mode == FAST_F32) {
            if (!(Xf[f] = malloc(v[f].nr * v[f].nc * sizeof(float)))) rc = al_err("out of memory");
            for (size_t i = 0; rc == AL_OK && i < v[f].nr * v[f].nc; i++) Xf[f][i] = (float)X[f][i];
        }
        if (rc == AL_OK && mode == FAST_FLOOR && !(P[f] = pack_view(&v[f], X[f]))) rc = al_err("out of memory");
    }
    FastJob j = { .mode = mode, .v = v, .X = Xf, .P = P, .scale = m->cfg.dtype == DT_F8_E4M3 ? scale : NULL,
                  .T = sweep_threads((size_t)m->cfg.n_heads, 0) };
    j.Gf = calloc((size_t)j.T * 4 * 16384, sizeof(float));
    j.Gd = calloc((size_t)j.T * FLOOR_BATCH * 6 * 16384, sizeof(double));
    j.wd = calloc((size_t)j.T * FLOOR_BATCH * 6 * 128, sizeof(double));
    if (rc == AL_OK && (!j.Gf || !j.Gd || !j.wd)) rc = al_err("out of memory");
    if (rc == AL_OK && j.T > 64) rc = al_err("more than 64 workers");
    for (int w = 0; rc == AL_OK && w < j.T; w++)
        if (!(j.ws[w] = symeig_work_new(128)) || !(j.gw[w] = gbf_work_new()) || !(j.acc[w] = gbf_acc_new(128)) ||
            (fused_core_fits(128) && !(j.cw[w] = malloc(fused_core_work(128) * sizeof(double)))))
            rc = al_err("out of memory");
    if (rc == AL_OK) {
        double w0 = wall(), c0 = cpu();
        size_t H = (size_t)m->cfg.n_heads, tasks = mode == FAST_FLOOR ? (H + FLOOR_BATCH - 1) / FLOOR_BATCH : H;
        rc = sweep_run(tasks, j.T, fast_task, &j);
        *secs = (Time){ wall() - w0, cpu() - c0 };
        for (int w = 0; w < j.T; w++)
            for (int pr = 0; pr < 2; pr++)
                for (int q = 0; q < PARTS; q++) parts_sum[mode][pr][q] += j.part[w][pr][q];
        parts_calls[mode]++;
    }
    for (int f = 0; f < 4; f++) { free(X[f]); free(Xf[f]); free(P[f]); gram_view_clear(&v[f]); }
    free(j.Gf); free(j.Gd); free(j.wd);
    for (int w = 0; w < j.T && w < 64; w++) { symeig_work_free(j.ws[w]); gbf_work_free(j.gw[w]); gbf_acc_free(j.acc[w]); free(j.cw[w]); }
    return rc;
}

static const double open_taus[3] = {0.999, 0.99, 0.9};

/* The fast route's sweep of layer L, VO + QK (FARR_ROUTE_RANKS, what `ranks` runs), and separately its certification
 * at tau (heads the bound leaves open redone in double; *redone counts them); open[t] counts the
 * heads the bound leaves open at open_taus[t]. */
static int fast_sweep_layer(Model *m, int L, double tau, Time *sweep, Time *cert, size_t *redone, size_t *heads,
                            size_t open[3]) {
    *sweep = *cert = (Time){0, 0};
    for (int k = 0; k < 2; k++) {
        FarrLayer *l = NULL;
        double w0 = wall(), c0 = cpu();
        /* as farr_state_sweep: the layer's pair read and mapped first (there on a thread, while the
         * layer before computes; here before, its time counted) */
        gram_prefetch_end(gram_prefetch_start(m, L, farr_shared_kind((farr_kind)k), farr_own_kind((farr_kind)k), NULL), false);
        if (farr_layer_compute_route(m, (farr_kind)k, L, FARR_NO_OFFSET, FARR_ROUTE_RANKS, &l) != AL_OK) return AL_ERR;
        double w1 = wall(), c1 = cpu();
        fast_pair_cpu[k] += c1 - c0;
        fast_pair_calls += k;
        for (int t = 0; t < 3; t++)
            for (int h = 0; h < l->n_heads; h++) {
                const double *e = l->eps + 3 * (size_t)h;
                open[t] += !(spectra_rank_certain(l->a[h], e[0], open_taus[t]) && spectra_rank_certain(l->b[h], e[1], open_taus[t]) &&
                             spectra_rank_certain(l->fused[h], e[2], open_taus[t]));
            }
        double w2 = wall(), c2 = cpu();
        int rc = farr_layer_certify(m, l, tau, redone);
        sweep->wall += w1 - w0; sweep->cpu += c1 - c0;
        cert->wall += wall() - w2; cert->cpu += cpu() - c2;
        *heads += (size_t)l->n_heads;
        farr_layer_free(l);
        if (rc != AL_OK) return rc;
    }
    return AL_OK;
}

/* The double route's sweep of layer L, VO + QK (FARR_ROUTE_STREAM), for the certified fast route's ratio. */
static int double_sweep_layer(Model *m, int L, Time *t) {
    double w0 = wall(), c0 = cpu();
    for (int k = 0; k < 2; k++) {
        FarrLayer *l = NULL;
        if (farr_layer_compute_route(m, (farr_kind)k, L, FARR_NO_OFFSET, FARR_ROUTE_STREAM, &l) != AL_OK) return AL_ERR;
        farr_layer_free(l);
    }
    *t = (Time){ wall() - w0, cpu() - c0 };
    return AL_OK;
}

/* fast_sweep_layer on the vdpbf16ps kernel (gbf_amx_allow(false)), its sweep time / nl added to *x. */
static int amx_off_sweep(Model *m, int L, double tau, Time *x, int nl) {
    Time a, b;
    size_t redone = 0, heads = 0, open[3] = {0, 0, 0};
    double keep[2] = {fast_pair_cpu[0], fast_pair_cpu[1]};    /* the AMX route's per-pair sums only */
    int kept = fast_pair_calls;
    gbf_amx_allow(false);
    int rc = fast_sweep_layer(m, L, tau, &a, &b, &redone, &heads, open);
    gbf_amx_allow(true);
    fast_pair_cpu[0] = keep[0]; fast_pair_cpu[1] = keep[1]; fast_pair_calls = kept;
    x->wall += a.wall / nl; x->cpu += a.cpu / nl;
    return rc;
}

static void keep_best(Time *best, Time t) { if (t.wall < best->wall) *best = t; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* out = min, median, max of x[0..n) (x is sorted in place). */
static void spread(double *x, int n, double out[3]) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    out[0] = x[0];
    out[1] = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
    out[2] = x[n - 1];
}

/* Drops the page cache of every file of the checkpoint folder (written back first). */
static void drop_cache(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = al_asprintf("%s/%s", dir, e->d_name);
        int fd = p ? open(p, O_RDONLY) : -1;
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
        free(p);
    }
    if (d) closedir(d);
}

/* The parts of FAST_F32 and FAST_FLOOR per layer (mean over the calls), VO and QK. */
static void print_parts(void) {
    if (fast_pair_calls && parts_calls[FAST_F32]) {
        double f[2], r[2];
        for (int pr = 0; pr < 2; pr++) {
            f[pr] = fast_pair_cpu[pr] / fast_pair_calls;
            r[pr] = 0;
            for (int q = 0; q < PARTS; q++) r[pr] += parts_sum[FAST_F32][pr][q] / parts_calls[FAST_F32];
        }
        printf("   fast route sweep per pair (process CPU s, mean of %d layers): VO %.4f, QK %.4f; / the float32 route's "
               "parts below: VO %.2f, QK %.2f\n", fast_pair_calls, f[0], f[1], f[0] / r[0], f[1] / r[1]);
    }
    for (int md = 0; md < 2; md++) {
        if (!parts_calls[md]) continue;
        printf("   parts per layer (thread CPU s, mean of %d), %s:\n", parts_calls[md],
               md == FAST_F32 ? "float32 LAPACK route"
                              : "floor (AMX / vdpbf16ps Grams, double cores, float-reduction solves)");
        for (int pr = 0; pr < 2; pr++) {
            double sum = 0;
            printf("     %s:", pr ? "QK" : "VO");
            for (int q = 0; q < PARTS; q++) {
                printf(" %s %.4f;", part_names[q], parts_sum[md][pr][q] / parts_calls[md]);
                sum += parts_sum[md][pr][q] / parts_calls[md];
            }
            printf(" total %.4f\n", sum);
        }
    }
}

/* Section 5: the fast route against the float32 LAPACK route, its floor and the double route, in
 * rounds (best of each), all four on every layer in turn (each layer's from-memory routes read
 * that layer's head 1); with `cold`, the sweeps of every layer after dropping the page cache. */
static int fast_section(Model *m, const char *dir, int nl, int reps, bool cold) {
    double tau = 0.999;
    Time sw = {1e30, 1e30}, ce = {1e30, 1e30}, f32 = {1e30, 1e30}, fl = {1e30, 1e30}, db = {1e30, 1e30};
    Time vx = {1e30, 1e30};  /* the fast sweep on the vdpbf16ps kernel (AMX off), where the CPU has AMX */
    bool amx = gbf_amx_now();
    size_t redone = 0, heads = 0, open[3];
    double *ratio = calloc((size_t)nl, sizeof *ratio), rspread[3] = {0, 0, 0};
    if (!ratio) return fail("out of memory");
    for (int r = 0; r < reps; r++) {
        Time s = {0, 0}, c = {0, 0}, d = {0, 0}, f = {0, 0}, o = {0, 0}, x = {0, 0};
        redone = heads = 0;
        memset(open, 0, sizeof open);
        /* Every layer's four measurements back to back, so that all four see the same load: on a
         * shared machine (or a VM whose host is busy) the speed drifts by 20-30 % over minutes. */
        for (int L = 0; L < nl; L++) {
            Time a, b, e, g, h;
            if (fast_sweep_layer(m, L, tau, &a, &b, &redone, &heads, open) != AL_OK) return fail("fast sweep");
            if (double_sweep_layer(m, L, &e) != AL_OK) return fail("double sweep");
            if (fast_layer(m, L, FAST_F32, &g) != AL_OK || fast_layer(m, L, FAST_FLOOR, &h) != AL_OK) return fail("fast floor");
            s.wall += a.wall / nl; s.cpu += a.cpu / nl; c.wall += b.wall / nl; c.cpu += b.cpu / nl;
            d.wall += e.wall / nl; d.cpu += e.cpu / nl;
            f.wall += g.wall / nl; f.cpu += g.cpu / nl; o.wall += h.wall / nl; o.cpu += h.cpu / nl;
            ratio[L] = a.cpu / g.cpu;
            if (amx && amx_off_sweep(m, L, tau, &x, nl) != AL_OK) return fail("fast sweep, AMX off");
        }
        if (amx) keep_best(&vx, x);
        keep_best(&sw, s); keep_best(&ce, c); keep_best(&db, d); keep_best(&f32, f); keep_best(&fl, o);
        if (s.wall <= sw.wall) spread(ratio, nl, rspread);
    }
    printf("\n5. the fast route for ranks (BF16 dot products, float reductions in the solves; %s Gram kernel), VO + QK per "
           "layer, best of %d:\n",
           gbf_path_now() != GBF_BF16 ? "float (no AVX-512 BF16)" : amx ? "AMX BF16" : "AVX-512 BF16", reps);
    printf("   fast route sweep:                       %.3f s wall (%.3f s CPU); 61 layers %.1f s\n", sw.wall, sw.cpu,
           61 * sw.wall);
    if (amx)
        printf("   the same on the vdpbf16ps kernel (AMX off): %.3f s wall (%.3f s CPU): AMX / vdpbf16ps %.2f CPU, "
               "fast(vdpbf16ps) / float32 route %.2f CPU\n", vx.wall, vx.cpu, sw.cpu / vx.cpu, vx.cpu / f32.cpu);
    printf("   + certification at tau %g:           %.3f s wall (%.3f s CPU; %zu of %zu heads redone in double)\n", tau,
           ce.wall, ce.cpu, redone, heads);
    printf("   heads the bound leaves open: %zu at tau 0.999, %zu at 0.99, %zu at 0.9 (of %zu)\n", open[0], open[1],
           open[2], heads);
    printf("   double route sweep (stream, dsyrk + LAPACK dsytrd + dsterf solves):  %.3f s wall (%.3f s CPU)\n", db.wall,
           db.cpu);
    printf("   float32 LAPACK route (ssyrk + ssyevd + spotrf + strmm, from memory): %.3f s wall (%.3f s CPU)\n", f32.wall,
           f32.cpu);
    printf("   floor (its BF16 Gram kernel + the solves it uses, alone, from memory): %.3f s wall (%.3f s CPU)\n",
           fl.wall, fl.cpu);
    printf("   ratios (CPU): fast / float32 route = %.2f (target <= 0.5); fast / floor = %.2f (target <= 1.2); certified "
           "(fast + certification) / double route = %.2f\n", sw.cpu / f32.cpu, sw.cpu / fl.cpu, (sw.cpu + ce.cpu) / db.cpu);
    printf("   ratios (wall): fast / float32 route = %.2f; fast / floor = %.2f; certified / double route = %.2f\n",
           sw.wall / f32.wall, sw.wall / fl.wall, (sw.wall + ce.wall) / db.wall);
    printf("   fast / float32 route (CPU) layer by layer, in the best round: min %.2f, median %.2f, max %.2f over %d layers\n",
           rspread[0], rspread[1], rspread[2], nl);
    print_parts();
    free(ratio);
    if (!cold) return 0;
    /* three passes: cold through the page cache (the reads as before gram_ahead's direct path), then
     * warm (the page cache as the first pass left it), then cold again past the page cache (O_DIRECT
     * into the sweep's own buffers: what a sweep of a cold file now takes) */
    double t[3], tc[3];
    const gram_direct how[3] = {GRAM_DIRECT_NEVER, GRAM_DIRECT_AUTO, GRAM_DIRECT_AUTO};
    size_t lent0 = gram_direct_reads();
    for (int pass = 0; pass < 3; pass++) {
        if (pass != 1) drop_cache(dir);
        gram_direct_set(how[pass]);
        /* as `ranks vo all` then `ranks qk all` sweep: farr_state_sweep, which reads the next
         * layer ahead (gram_prefetch_start) while it computes one */
        FarrState *st = farr_state_new();
        double w0 = wall(), c0 = cpu();
        for (int k = 0; k < 2 && st; k++)
            if (farr_state_sweep(st, &(FarrQuery){ .m = m, .kind = (farr_kind)k, .lo = 0, .hi = nl - 1,
                                                   .offset = FARR_NO_OFFSET, .ranks_only = true }) != AL_OK)
                return fail("cold sweep");
        t[pass] = (wall() - w0) / nl;
        tc[pass] = (cpu() - c0) / nl;
        farr_state_free(st);
    }
    gram_direct_set(GRAM_DIRECT_AUTO);
    printf("   --cold: the sweeps (farr_state_sweep VO then QK, next layer read ahead) per layer with the page cache "
           "dropped (posix_fadvise DONTNEED): read past the page cache (O_DIRECT, %zu tensors) %.3f s, through the "
           "page cache %.3f s; warm %.3f s (cold / warm %.2f and %.2f)\n", gram_direct_reads() - lent0, t[2], t[0], t[1],
           t[2] / t[1], t[0] / t[1]);
    /* The float32 route's figures above are from memory (and every head from head 1's block). Cold, it
     * reads the file: every head's four factors read and decoded (gram_read_block, FP8 scales applied)
     * with the page cache dropped first, then its solves as above. */
    drop_cache(dir);
    Time rd = {0, 0}, cf = {0, 0};
    for (int L = 0; L < nl; L++) {
        Time g;
        if (read_layer(m, L, &rd) != AL_OK || fast_layer(m, L, FAST_F32, &g) != AL_OK) return fail("cold float32 route");
        cf.wall += g.wall; cf.cpu += g.cpu;
    }
    cf = (Time){ (cf.wall + rd.wall) / nl, (cf.cpu + rd.cpu) / nl };
    printf("   --cold, process CPU a layer: the sweep cold %.3f s (through the page cache %.3f s; warm %.3f s); the float32 "
           "route cold, its read and decode of the weights from the file included, %.3f s wall (%.3f s CPU, of which "
           "reading %.3f)\n", tc[2], tc[0], tc[1], cf.wall, cf.cpu, rd.cpu / nl);
    printf("   ratios cold: sweep / float32 route read from the file = %.2f CPU, %.2f wall; sweep cold / float32 route from "
           "memory = %.2f CPU, %.2f wall (through the page cache: %.2f CPU, %.2f wall)\n", tc[2] / cf.cpu, t[2] / cf.wall,
           tc[2] / f32.cpu, t[2] / f32.wall, tc[0] / f32.cpu, t[0] / f32.wall);
    return 0;
}

/* ================================================================ breakdown */

/* var = the best of n (x 20 calls) of one run of body, in ms. */
#define TIME_CALL(var, body) do { \
        double b_ = 1e9; \
        for (int r_ = 0; r_ < n; r_++) { \
            double t_ = wall(); \
            for (int q_ = 0; q_ < 20; q_++) { body; } \
            b_ = fmin(b_, (wall() - t_) / 20); \
        } \
        var = 1e3 * b_; \
    } while (0)

/* The 128x128 steps by each LAPACK route worth considering, on real Grams (Go: an O head's, Gv: a
 * V head's; both full storage, k = 128), one thread. */
static void solver_table(const double *Go, const double *Gv, int n) {
    enum { K = 128 };
    static double A[K * K], B[K * K], w[K], e[K], tau[K], work[64 * K];
    static lapack_int iwork[1], piv[K];
    lapack_int m_, rank;
    double t[9];
    TIME_CALL(t[0], memcpy(A, Go, sizeof A); LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'U', K, A, K, w));
    TIME_CALL(t[1], memcpy(A, Go, sizeof A); LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'N', 'A', 'L', K, A, K, 0, 0, 0, 0, 0, &m_, w,
                                                              NULL, 1, iwork));
    TIME_CALL(t[2], memcpy(A, Go, sizeof A);
              LAPACKE_dsytrd_work(LAPACK_COL_MAJOR, 'L', K, A, K, w, e, tau, work, 32 * K); LAPACKE_dsterf_work(K, w, e));
    TIME_CALL(t[3], memcpy(A, Go, sizeof A); spectra_sym_eigvals(A, K, w));
    TIME_CALL(t[4], memcpy(A, Go, sizeof A); LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', K, A, K);
              LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', K, K, A, K, w, NULL, 1, NULL, 1));
    TIME_CALL(t[5], memcpy(A, Gv, sizeof A); LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', K, A, K));
    TIME_CALL(t[6], memcpy(A, Gv, sizeof A); LAPACKE_dpstrf_work(LAPACK_COL_MAJOR, 'L', K, A, K, piv, &rank, -1.0, work));
    memcpy(B, Gv, sizeof B);
    LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', K, B, K);
    TIME_CALL(t[7], memcpy(A, Go, sizeof A); LAPACKE_dsygst_work(LAPACK_COL_MAJOR, 2, 'L', K, A, K, B, K));
    TIME_CALL(t[8], memcpy(A, Go, sizeof A);
              cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, K, K, 1.0, B, K, A, K);
              cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, K, K, 1.0, B, K, A, K));
    printf("  128x128 steps (ms): eigenvalues: dsyevd N (LAPACKE, row-major) %.3f, dsyevr N %.3f, dsytrd nb 32 + dsterf "
           "%.3f, dsytrd nb 8 + dsterf (used) %.3f, Cholesky + dgesdd N %.3f\n", t[0], t[1], t[2], t[3], t[4]);
    printf("                      Cholesky: dpotrf (used) %.3f, pivoted dpstrf %.3f; core Lᵀ G L: dsygst %.3f, two dtrmm "
           "(used) %.3f\n", t[5], t[6], t[7], t[8]);
}

/* Single-thread cost per head of each step of the stream route on layer L, head 1 (best of n). */
static int breakdown(Model *m, int L, int n) {
    static const head_kind kinds[4] = {HK_V, HK_O, HK_Q, HK_K};
    static const char *names[4] = {"V", "O", "Q", "K"};
    openblas_set_num_threads(1);
    GramScratch *scr = gram_scratch_new();
    double *G[4];
    for (int f = 0; f < 4; f++) G[f] = malloc(128 * 128 * sizeof(double));
    printf("breakdown, one thread, layer %d head 1 (ms, best of %d):\n", L, n);
    double total_gram = 0, total_floor = 0;
    for (int f = 0; f < 4; f++) {
        GramView v;
        if (gram_view(m, kinds[f], L, 1, f >= 2 ? PART_NOPE : PART_ALL, &v) != AL_OK) return fail("gram_view");
        double *X = malloc(v.nr * v.nc * sizeof(double));
        gram_read_block(m->store, v.tensor, v.r0, v.nr, v.c0, v.nc, X, v.nc);
        double tg = 1e9, td = 1e9, ts = 1e9;
        int k = (int)gram_view_k(&v), rows = (int)gram_view_rows(&v);
        for (int r = 0; r < n; r++) {
            double t0 = wall();
            gram_compute(m->store, &v, scr, G[f]);
            double t1 = wall();
            gram_read_block(m->store, v.tensor, v.r0, v.nr, v.c0, v.nc, X, v.nc);
            double t2 = wall();
            if (v.row_gram) cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, k, rows, 1.0, X, rows, 0.0, G[f], k);
            else cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, k, rows, 1.0, X, k, 0.0, G[f], k);
            double t3 = wall();
            tg = fmin(tg, t1 - t0); td = fmin(td, t2 - t1); ts = fmin(ts, t3 - t2);
        }
        gram_compute(m->store, &v, scr, G[f]);
        printf("  %s (%5d x %3d)  gram_compute %.3f   [dequantize whole block %.3f, bare dsyrk %.3f]\n", names[f],
               rows, k, 1e3 * tg, 1e3 * td, 1e3 * ts);
        total_gram += tg;
        total_floor += ts;
        free(X);
        gram_view_clear(&v);
    }
    double te = 1e9, tf = 1e9, tc = 1e9;
    for (int r = 0; r < n; r++) {
        LinGramSide *a = NULL, *b = NULL;
        Spectrum *s = NULL;
        double t0 = wall();
        spectra_gram_side_new(G[1], 128, 7168, false, &b);
        double t1 = wall();
        spectra_gram_side_new(G[0], 128, 512, true, &a);
        double t2 = wall();
        spectra_gram_fused(a, G[1], 512, 7168, &s);
        double t3 = wall();
        te = fmin(te, t1 - t0); tf = fmin(tf, t2 - t1); tc = fmin(tc, t3 - t2);
        spectra_gram_side_free(a); spectra_gram_side_free(b); spectrum_free(s);
    }
    double solves = 2 * te + 2 * tf + 2 * tc;
    printf("  per factor: eigenvalues %.3f (with its Cholesky factor %.3f); per pair: fused core %.3f\n", 1e3 * te,
           1e3 * tf, 1e3 * tc);
    printf("  per head (VO + QK): Grams %.3f (bare dsyrk %.3f) + solves %.3f = %.3f ms -> %.2fx the bare dsyrk\n",
           1e3 * total_gram, 1e3 * total_floor, 1e3 * solves, 1e3 * (total_gram + solves),
           (total_gram + solves) / total_floor);
    solver_table(G[1], G[0], n);
    for (int f = 0; f < 4; f++) free(G[f]);
    gram_scratch_free(scr);
    return 0;
}

/* ================================================================ 4. peak memory */

/* Child mode: sweep VO + QK over layers 0..n-1 and print VmHWM in kB. */
static int rss_child(const char *dir, int n) {
    Model *m = NULL;
    if (model_open(dir, &m) != AL_OK) return fail("model_open");
    for (int L = 0; L < n; L++)
        for (int k = 0; k < 2; k++) {
            FarrLayer *l = NULL;
            if (farr_layer_compute(m, (farr_kind)k, L, FARR_NO_OFFSET, &l) != AL_OK) return fail("sweep");
            farr_layer_free(l);
        }
    model_free(m);
    long hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) hwm = atol(line + 6);
    if (f) fclose(f);
    printf("%ld\n", hwm);
    return 0;
}

/* Runs this program as a fresh process in child mode; returns VmHWM in kB or -1. */
static long rss_of(const char *self, const char *dir, int n) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        char nbuf[16];
        snprintf(nbuf, sizeof nbuf, "%d", n);
        execl(self, self, "--rss-child", dir, nbuf, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = {0};
    ssize_t got = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return atol(buf);
}

/* ================================================================ main */

int main(int argc, char **argv) {
    const char *model = NULL;
    int layers = 4, naive_n = 4, reps = 3;
    bool keep = false, brk = false, cold = false, fast_only = false;
    if (argc == 4 && strcmp(argv[1], "--rss-child") == 0) return rss_child(argv[2], atoi(argv[3]));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--naive") && i + 1 < argc) naive_n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep")) keep = true;
        else if (!strcmp(argv[i], "--breakdown")) brk = true;
        else if (!strcmp(argv[i], "--cold")) cold = true;
        else if (!strcmp(argv[i], "--fast-only")) fast_only = true;
        else {
            fprintf(stderr, "usage: bench_scale [--model DIR] [--layers N] [--naive H] [--reps R] [--keep] [--breakdown] "
                            "[--cold] [--fast-only]\n");
            return 2;
        }
    }
    if (layers < 1) layers = 1;
    if (reps < 1) reps = 1;
    if (naive_n < 1) naive_n = 1;
    printf("%s\n", blas_arch_choose());     /* the OpenBLAS kernels that run (blas_arch.h) */
    loadavg("at start");
    char tmpl[] = "/tmp/attnlab-bench-XXXXXX";
    char *dir = NULL;
    if (!model) {
        if (!mkdtemp(tmpl)) { perror("mkdtemp"); return 1; }
        dir = al_asprintf("%s/ds-r1-shape", tmpl);
        double w0 = wall();
        if (synth_ds_r1_shape(dir, layers, 1) != AL_OK) return fail("synth ds-r1-shape");
        double w = wall() - w0;
        printf("wrote a DeepSeek-R1-shaped FP8 checkpoint of %d layers to %s in %.2f s (%.2f s per layer)\n", layers, dir,
               w, w / layers);
        /* read back from disk, as a checkpoint one opens is: the pages the writes left in the page
         * cache sit in small folios, those read through the mapping in 2 MB ones (st_open's hint),
         * and the sweep's speed differs by ~25 % between the two */
        drop_cache(dir);
        model = dir;
    }
    Model *m = NULL;
    if (model_open(model, &m) != AL_OK) return fail("model_open");
    const ModelConfig *c = &m->cfg;
    if (!cfg_is_mla(c) || c->n_layers < 1) { fprintf(stderr, "bench_scale: needs an MLA (DeepSeek) checkpoint\n"); return 1; }
    int nl = c->n_layers < layers ? c->n_layers : layers;
    printf("model %s: %d layers, %d heads, hidden %d, q_lora %d, kv_lora %d, nope %d, rope %d, v %d, %s; %d workers x 1 BLAS thread\n",
           model, c->n_layers, c->n_heads, c->hidden, c->q_lora_rank, c->kv_lora_rank, c->qk_nope_dim, c->qk_rope_dim,
           c->v_dim, dt_name(c->dtype), sweep_threads((size_t)c->n_heads, 0));
    if (brk) breakdown(m, 0, reps > 3 ? reps : 3);
    if (fast_only) {
        int frc = fast_section(m, model, nl, reps, cold);
        model_free(m);
        loadavg("at end");
        if (dir && !keep) {
            char *cmd = al_asprintf("rm -rf '%s'", tmpl);
            if (cmd && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpl);
            free(cmd);
        }
        free(dir);
        return frc;
    }

    /* Rounds: each measures the sweep of every layer, the floor and the naive method, so that all
     * three see the same load; each figure is its best over the rounds. */
    Time *lay = calloc((size_t)nl * 2, sizeof *lay);
    Time fl = {1e30, 1e30}, fl2 = {1e30, 1e30};
    double nseq[2] = {1e30, 1e30}, npar[2] = {1e30, 1e30};
    int rmin = 1 << 30, rmax = 0;
    if (!lay) return 1;
    for (int L = 0; L < nl; L++) lay[2 * L] = lay[2 * L + 1] = (Time){1e30, 1e30};
    for (int r = 0; r < reps; r++) {
        for (int L = 0; L < nl; L++) {
            Time a, b;
            if (sweep_layer(m, L, &a, &b, &rmin, &rmax) != AL_OK) return fail("sweep");
            if (a.wall < lay[2 * L].wall) lay[2 * L] = a;
            if (b.wall < lay[2 * L + 1].wall) lay[2 * L + 1] = b;
        }
        Time f = {0, 0}, f2 = {0, 0};
        if (floor_layer(m, 0, false, &f) != AL_OK || floor_layer(m, 0, true, &f2) != AL_OK) return fail("floor");
        if (f.wall < fl.wall) fl = f;
        if (f2.wall < fl2.wall) fl2 = f2;
        for (int k = 0; k < 2; k++) {
            double a, b;
            if (naive_per_head(m, (farr_kind)k, 0, naive_n, false, &a) != AL_OK ||
                naive_per_head(m, (farr_kind)k, 0, naive_n, true, &b) != AL_OK)
                return fail("naive");
            nseq[k] = fmin(nseq[k], a);
            npar[k] = fmin(npar[k], b);
        }
    }
    double vo = 0, qk = 0, cvo = 0, cqk = 0;
    for (int L = 0; L < nl; L++) {
        vo += lay[2 * L].wall; qk += lay[2 * L + 1].wall;
        cvo += lay[2 * L].cpu; cqk += lay[2 * L + 1].cpu;
    }
    free(lay);
    double per_layer = (vo + qk) / nl, per_layer_cpu = (cvo + cqk) / nl;
    printf("\n1. sweep (stream route: Grams straight from the mapping, page cache warm), per layer, mean over %d "
           "layers of each layer's best of %d:\n", nl, reps);
    printf("   VO %.3f s + QK %.3f s = %.3f s wall (%.3f s CPU); fused VO ranks at 0.999: %d-%d\n", vo / nl, qk / nl,
           per_layer, per_layer_cpu, rmin, rmax);
    printf("   61 layers (extrapolated from the per-layer figure): %.1f s\n", 61 * per_layer);

    /* For comparison, once: the factor route (the layer dequantized to float up front, per-head
     * copies, spectra_product_svd on the Gram route with vectors of the small factors). */
    {
        double w0 = wall();
        for (int k = 0; k < 2; k++) {
            FarrLayer *l = NULL;
            if (farr_layer_compute_route(m, (farr_kind)k, 0, FARR_NO_OFFSET, FARR_ROUTE_FACTORS, &l) != AL_OK)
                return fail("factor route");
            farr_layer_free(l);
        }
        printf("   for comparison, the factor route (layer dequantized to float first, per-head copies): %.3f s "
               "for layer 0 (once)\n", wall() - w0);
    }

    double ours = per_layer / c->n_heads;
    printf("\n2. naive (form the fused matrix in double, dgesdd values only) on %d heads per pair, best of %d:\n",
           naive_n, reps);
    printf("   one head at a time, BLAS on every core (as the seed runs it): VO %.3f s + QK %.3f s = %.3f s per head\n",
           nseq[0], nseq[1], nseq[0] + nseq[1]);
    printf("   heads in parallel, one BLAS thread each (best throughput):    VO %.3f s + QK %.3f s = %.3f s per head\n",
           npar[0], npar[1], npar[0] + npar[1]);
    printf("   attnlab: %.5f s per head (VO + QK: the layer's time / %d heads)\n", ours, c->n_heads);
    printf("   naive / attnlab per head: %.0fx (seed-style naive), %.0fx (parallel naive)\n", (nseq[0] + nseq[1]) / ours,
           (npar[0] + npar[1]) / ours);

    printf("\n3. floor: the bare kernels of a layer on the same shapes, from memory (no I/O, no dequantization), "
           "%d heads x V, O, Q, K, best of %d:\n", c->n_heads, reps);
    printf("   Gram products only (dsyrk, double):      %.3f s wall (%.3f s CPU) -> attnlab / floor = %.2fx wall (%.2fx CPU)\n",
           fl.wall, fl.cpu, per_layer / fl.wall, per_layer_cpu / fl.cpu);
    printf("   + the values-only eigen-solves (LAPACK): %.3f s wall (%.3f s CPU) -> attnlab / floor = %.2fx wall (%.2fx CPU)\n",
           fl2.wall, fl2.cpu, per_layer / fl2.wall, per_layer_cpu / fl2.cpu);

    if (fast_section(m, model, nl, reps, cold) != 0) return 1;

    /* 4. Peak memory. */
    int n_layers = c->n_layers;
    model_free(m);
    c = NULL;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl > 0) {
        self[sl] = 0;
        printf("\n4. peak resident memory (VmHWM) of a fresh process sweeping VO + QK:\n");
        int counts[3] = {2, 4, nl}, nc = nl > 4 ? 3 : 2;
        for (int i = 0; i < nc; i++) {
            if (counts[i] > n_layers) { printf("   %d layers: (the checkpoint has %d)\n", counts[i], n_layers); continue; }
            long kb = rss_of(self, model, counts[i]);
            printf("   %d layers: %.0f MB\n", counts[i], kb / 1024.0);
        }
    }
    printf("\n");
    loadavg("at end");
    if (dir && !keep) {
        char *cmd = al_asprintf("rm -rf '%s'", tmpl);
        if (cmd && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpl);
        free(cmd);
    } else if (dir) {
        printf("kept %s\n", dir);
    }
    free(dir);
    return 0;
}
