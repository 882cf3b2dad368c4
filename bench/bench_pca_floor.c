/* bench_pca_floor.c -- issue 32's floor for `convert mla`'s PCA solves (not a test): per layer, the BLAS and LAPACK
 * calls TransMLA's conversion makes (core/methods/transmla.c), at the real sizes and in double as it makes them, timed
 * alone on the conversion's layout -- two lanes (tmla_lanes.c, min(2, ATTNLAB_THREADS) of them), each a thread of its
 * own with one BLAS thread, a layer each, side by side. Nothing else: no weights read, no Grams unpacked, no digest,
 * no copies between the calls. Inputs are random (the products' times do not depend on the values; the eigen-solves
 * get covariances formed by the same chain of products, as the conversion's are).
 *
 *   bench_pca_floor SHAPE [LAYERS] [REPS]                              SHAPE: scaled | 8b | 70b
 *   bench_pca_floor HIDDEN HEADS KV_HEADS HEAD_DIM [LAYERS] [REPS]     (a model's config.json values)
 *
 * kv-rank 512 ($BENCH_KV_RANK), freqfold 1 (rope dims = head_dim), both balances built (compare_balance, the
 * default), 64 report tokens. Per layer and lane, the parts:
 *   C_kv        W = [W_K W_V] (hidden, n = G (d + dv)): A = Σ W (dgemm hidden x n x hidden), C_kv = Wᵀ A (dgemm)
 *   RoRoPE      d / 2 frequency groups: dsyevd of each G x G covariance ('V')
 *   joint cov   C_J of the NoPE keys and values: three dgemms through the NoPE basis U[:, D:] (nk x nK)
 *   report in   the Cholesky of Σ - μμᵀ (dpotrf, hidden x hidden, once) and the 64 inputs' dtrmm
 *   joint PCA   dsyevd of the nJ x nJ balanced joint covariance ('V'), once per balance
 *   build       the query (a dgemm per head: hidden x D x d), W_KVA (hidden x D x nk, hidden x nK x nk,
 *               hidden x R x nJ), W_KVB (a dgemm per head: R x d x nK), once per balance
 *   measure     the report's attention products in float (sgemm): the source once, each balance's layer once
 * Prints each part's wall and thread CPU seconds on lane 0 (best round), the layer pair's wall, and the last line
 *   pca floor: S s for L layers (P lanes; a layer pair W s, best of R); CPU C s a layer
 * which bench/bench_pipeline_once.sh reads: ceil(L / P) rounds of P layers side by side; C is lane 0's thread CPU
 * seconds, the column to compare with the conversion's CPU on a loaded machine. The products' speed is OpenBLAS's:
 * OPENBLAS_VERBOSE=2 prints the core type it chose (a VM's CPU it does not know gets generic kernels). */
#define _GNU_SOURCE
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "al.h"
#include "tmla_lanes.h"

void openblas_set_num_threads(int);

enum { REPORT_TOKENS = 64, N_PARTS = 7 };
static const char *part_name[N_PARTS] = {"C_kv = W^T Sigma W (2 dgemm)", "RoRoPE (G x G dsyevd per frequency)",
                                         "joint covariance (3 dgemm)", "report inputs (dpotrf + dtrmm)",
                                         "joint PCA (dsyevd nJ, x2 balances)", "build (query, KVA, KVB; x2)",
                                         "measure (sgemm, 3 evaluations)"};

/* ================================================================ the shape */

typedef struct {
    size_t m, H, G, d, dv;   /* hidden, heads, KV heads, head dim, value dim */
    size_t R, D, T;          /* kv-rank, RoPE dims kept (freqfold 1: d), report tokens */
} Shape;

/* nk: key dims of all KV heads; n: keys and values; nK: NoPE key dims; nJ: the joint basis. */
static size_t s_nk(const Shape *s) { return s->G * s->d; }
static size_t s_n(const Shape *s) { return s->G * (s->d + s->dv); }
static size_t s_nK(const Shape *s) { return s_nk(s) - s->D; }
static size_t s_nJ(const Shape *s) { return s_nK(s) + s->G * s->dv; }

/* Each part's FLOPs (the products' 2 m n k; dsyevd ~ 9 n³ with vectors, dpotrf n³ / 3). */
static void part_flops(const Shape *s, double *f) {
    double m = (double)s->m, n = (double)s_n(s), nk = (double)s_nk(s), nK = (double)s_nK(s), nJ = (double)s_nJ(s);
    double H = (double)s->H, G = (double)s->G, d = (double)s->d, D = (double)s->D, R = (double)s->R, T = (double)s->T;
    double dv = (double)s->dv, dq = d + D;
    f[0] = 2 * m * m * n + 2 * n * n * m;
    f[1] = (d / 2) * 9 * G * G * G;
    f[2] = 2 * nk * nK * nk + 2 * nK * nK * nk + 2 * nK * (G * dv) * nk;
    f[3] = m * m * m / 3 + T * m * m;
    f[4] = 2 * 9 * nJ * nJ * nJ;
    f[5] = 2 * (H * 2 * m * D * d + 2 * m * D * nk + 2 * m * nK * nk + 2 * m * R * nJ + H * 2 * R * d * nK);
    f[6] = 2 * T * m * (H * d + 2 * G * d + H * dv)
           + 2 * 2 * T * (m * H * dq + m * (R + D) + R * H * (d + dv) + H * dv * m);
}

/* ================================================================ inputs and buffers */

static double urand(unsigned *st) { *st = *st * 1103515245u + 12345u; return (double)(*st >> 8) / 16777216.0 - 0.5; }

static double *dbuf(size_t r, size_t c, unsigned *st) {
    double *p = malloc(r * c * sizeof(double));
    if (!p) { fprintf(stderr, "out of memory (%zu x %zu doubles)\n", r, c); exit(1); }
    for (size_t i = 0; i < r * c; i++) p[i] = st ? urand(st) : 0;
    return p;
}

static float *fbuf(size_t r, size_t c, unsigned *st) {
    float *p = malloc(r * c * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory (%zu x %zu floats)\n", r, c); exit(1); }
    for (size_t i = 0; i < r * c; i++) p[i] = st ? (float)urand(st) : 0;
    return p;
}

/* The inputs every lane reads: Σ (m, m: symmetric, diagonally dominant, so positive definite), W (m, n), the merged
 * key basis U (nk, nk), the report's float weights. */
typedef struct {
    Shape s;
    double *Sigma, *W, *U;
    float *Wq, *Wkv, *Wo, *Wqm, *Wkva, *Wkvb, *X;   /* the source's and the built layer's float weights, X (T, m) */
} Inputs;

static void inputs_make(Inputs *in) {
    const Shape *s = &in->s;
    size_t m = s->m, nk = s_nk(s), dq = s->d + s->D;
    unsigned st = 12345;
    in->Sigma = dbuf(m, m, &st);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < i; j++) in->Sigma[i * m + j] = in->Sigma[j * m + i];
    for (size_t i = 0; i < m; i++) in->Sigma[i * m + i] = (double)m;
    in->W = dbuf(m, s_n(s), &st);
    in->U = dbuf(nk, nk, &st);
    in->Wq = fbuf(m, s->H * s->d, &st);
    in->Wkv = fbuf(m, s_n(s), &st);
    in->Wo = fbuf(s->H * s->dv, m, &st);
    in->Wqm = fbuf(m, s->H * dq, &st);
    in->Wkva = fbuf(m, s->R + s->D, &st);
    in->Wkvb = fbuf(s->R, s->H * (s->d + s->dv), &st);
    in->X = fbuf(s->T, m, &st);
}

static void inputs_free(Inputs *in) {
    free(in->Sigma); free(in->W); free(in->U);
    free(in->Wq); free(in->Wkv); free(in->Wo); free(in->Wqm); free(in->Wkva); free(in->Wkvb); free(in->X);
}

/* ================================================================ one layer's calls */

static double now(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const Inputs *in;
    pthread_barrier_t *start;
    double wall[N_PARTS], cpu[N_PARTS], total;
    int info;                 /* a LAPACK call's nonzero info */
} Lane;

/* C_kv = Wᵀ (Σ W) (feature_cov's two dgemms); returns C_kv (n, n). */
static double *part_ckv(const Inputs *in) {
    const Shape *s = &in->s;
    size_t m = s->m, n = s_n(s);
    double *A = dbuf(m, n, NULL), *C = dbuf(n, n, NULL);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)m, 1.0, in->Sigma, (int)m, in->W, (int)n,
                0.0, A, (int)n);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)m, 1.0, in->W, (int)n, A, (int)n, 0.0, C,
                (int)n);
    free(A);
    return C;
}

/* tmla_rorope's eigen-solves: one G x G covariance per frequency group (freqfold 1: d / 2 groups). */
static int part_rorope(const Shape *s, const double *C_kv) {
    size_t k = s->G, n = s_n(s);
    double *Cs = dbuf(k, k, NULL), *w = dbuf(k, 1, NULL);
    int info = 0;
    for (size_t g = 0; g < s->d / 2 && !info; g++) {
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < k; j++) Cs[j * k + i] = C_kv[(i * s->d + 2 * g) * n + j * s->d + 2 * g];
        info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)k, Cs, (lapack_int)k, w);
    }
    free(Cs); free(w);
    return info;
}

/* tmla_joint_cov's three dgemms; returns C_J (nJ, nJ). */
static double *part_joint_cov(const Inputs *in, const double *C_kv) {
    const Shape *s = &in->s;
    size_t nk = s_nk(s), nK = s_nK(s), nJ = s_nJ(s), nv = s->G * s->dv, n = s_n(s);
    double *A = dbuf(nk, nK, NULL), *C = dbuf(nJ, nJ, NULL);
    const double *Un = in->U + s->D;   /* U[:, D:] in place of its copy: (nk, nK), leading dimension nk */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nk, (int)nK, (int)nk, 1.0, C_kv, (int)n, Un, (int)nk, 0.0,
                A, (int)nK);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nK, (int)nK, (int)nk, 1.0, Un, (int)nk, A, (int)nK, 0.0, C,
                (int)nJ);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nK, (int)nv, (int)nk, 1.0, Un, (int)nk, C_kv + nk, (int)n,
                0.0, C + nK, (int)nJ);
    for (size_t i = 0; i < nK; i++)
        for (size_t a = 0; a < nv; a++) C[(nK + a) * nJ + i] = C[i * nJ + nK + a];
    for (size_t a = 0; a < nv; a++) memcpy(C + (nK + a) * nJ + nK, C_kv + (nk + a) * n + nk, nv * sizeof(double));
    free(A);
    return C;
}

/* shape_inputs: the Cholesky of Σ (its lower triangle, column-major) and Z Lᵀ for the report's T inputs. */
static int part_report_inputs(const Inputs *in) {
    const Shape *s = &in->s;
    size_t m = s->m, T = s->T;
    double *A = dbuf(m, m, NULL), *Z = dbuf(T, m, NULL);
    memcpy(A, in->Sigma, m * m * sizeof(double));
    int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, A, (lapack_int)m);
    cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)T, (int)m, 1.0, A, (int)m, Z,
                (int)m);
    free(A); free(Z);
    return info;
}

/* tmla_joint_lowrank's eigen-solve of one balance's C_J (copied: LAPACK overwrites it); the top R vectors into RKV. */
static int part_joint_pca(const Shape *s, const double *C_J, double *RKV) {
    size_t nJ = s_nJ(s);
    double *V = dbuf(nJ, nJ, NULL), *w = dbuf(nJ, 1, NULL);
    memcpy(V, C_J, nJ * nJ * sizeof(double));
    int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)nJ, V, (lapack_int)nJ, w);
    for (size_t i = 0; i < nJ; i++)
        for (size_t r = 0; r < s->R; r++) RKV[i * s->R + r] = V[(nJ - 1 - r) * nJ + i];
    free(V); free(w);
    return info;
}

/* build_query's and build_kv's products for one balance. */
static void part_build(const Inputs *in, const double *RKV) {
    const Shape *s = &in->s;
    size_t m = s->m, d = s->d, D = s->D, nk = s_nk(s), nK = s_nK(s), nJ = s_nJ(s), R = s->R, grp = s->H / s->G;
    size_t ldb = s->H * (d + s->dv);
    double *Wh = dbuf(m, d, NULL), *Wr = dbuf(m, D, NULL), *A = dbuf(m, R + D, NULL), *WJ = dbuf(m, nJ, NULL);
    double *B = dbuf(R, ldb, NULL);
    for (size_t h = 0; h < s->H; h++)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)D, (int)d, 1.0, Wh, (int)d,
                    in->U + (h / grp) * d * nk, (int)nk, 0.0, Wr, (int)D);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)D, (int)nk, 1.0, in->W, (int)s_n(s), in->U,
                (int)nk, 0.0, A + R, (int)(R + D));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)nK, (int)nk, 1.0, in->W, (int)s_n(s), in->U + D,
                (int)nk, 0.0, WJ, (int)nJ);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)R, (int)nJ, 1.0, WJ, (int)nJ, RKV, (int)R, 0.0, A,
                (int)(R + D));
    for (size_t h = 0; h < s->H; h++)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasTrans, (int)R, (int)d, (int)nK, 1.0, RKV, (int)R,
                    in->U + (h / grp) * d * nk + D, (int)nk, 0.0, B + h * (d + s->dv), (int)ldb);
    free(Wh); free(Wr); free(A); free(WJ); free(B);
}

/* y (T, cols) = X (T, rows) W (rows, cols), float. */
static void sgemm_tw(size_t T, size_t rows, size_t cols, const float *X, const float *W, float *y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)cols, (int)rows, 1.0f, X, (int)rows, W,
                (int)cols, 0.0f, y, (int)cols);
}

/* measure's attention products: the source's projections once, each balance's built layer once (attention itself,
 * T x T per head, is left out: a few MFLOP). */
static void part_measure(const Inputs *in) {
    const Shape *s = &in->s;
    size_t m = s->m, T = s->T, dq = s->d + s->D, n = s_n(s);
    size_t widest = s->H * dq > n ? s->H * dq : n;
    if (s->H * (s->d + s->dv) > widest) widest = s->H * (s->d + s->dv);
    float *y = fbuf(T, widest, NULL), *c = fbuf(T, s->R + s->D, NULL), *o = fbuf(T, m, NULL);
    sgemm_tw(T, m, s->H * s->d, in->X, in->Wq, y);
    sgemm_tw(T, m, n, in->X, in->Wkv, y);
    sgemm_tw(T, s->H * s->dv, m, y, in->Wo, o);
    for (int b = 0; b < 2; b++) {
        sgemm_tw(T, m, s->H * dq, in->X, in->Wqm, y);
        sgemm_tw(T, m, s->R + s->D, in->X, in->Wkva, c);
        sgemm_tw(T, s->R, s->H * (s->d + s->dv), c, in->Wkvb, y);
        sgemm_tw(T, s->H * s->dv, m, y, in->Wo, o);
    }
    free(y); free(c); free(o);
}

#define TIMED(lane, k, body) do { \
        double w0_ = now(CLOCK_MONOTONIC), c0_ = now(CLOCK_THREAD_CPUTIME_ID); \
        body; \
        (lane)->wall[k] = now(CLOCK_MONOTONIC) - w0_; (lane)->cpu[k] = now(CLOCK_THREAD_CPUTIME_ID) - c0_; \
    } while (0)

/* One layer's calls on this lane, each part timed. */
static void *lane_layer(void *ud) {
    Lane *ln = ud;
    const Inputs *in = ln->in;
    const Shape *s = &in->s;
    double *C_kv = NULL, *C_J = NULL, *RKV = dbuf(s_nJ(s), s->R, NULL);
    int info = 0;
    pthread_barrier_wait(ln->start);
    double t0 = now(CLOCK_MONOTONIC);
    TIMED(ln, 0, C_kv = part_ckv(in));
    TIMED(ln, 1, info |= part_rorope(s, C_kv));
    TIMED(ln, 2, C_J = part_joint_cov(in, C_kv));
    TIMED(ln, 3, info |= part_report_inputs(in));
    ln->wall[4] = ln->cpu[4] = ln->wall[5] = ln->cpu[5] = 0;
    for (int b = 0; b < 2; b++) {                 /* the other balance, then the kept one */
        double w4 = ln->wall[4], c4 = ln->cpu[4], w5 = ln->wall[5], c5 = ln->cpu[5];
        TIMED(ln, 4, info |= part_joint_pca(s, C_J, RKV));
        ln->wall[4] += w4, ln->cpu[4] += c4;
        TIMED(ln, 5, part_build(in, RKV));
        ln->wall[5] += w5, ln->cpu[5] += c5;
    }
    TIMED(ln, 6, part_measure(in));
    ln->total = now(CLOCK_MONOTONIC) - t0;
    ln->info = info;
    free(C_kv); free(C_J); free(RKV);
    return NULL;
}

/* ================================================================ main */

static int parse_shape(int argc, char **argv, Shape *s, int *layers, int *reps) {
    const char *kv = getenv("BENCH_KV_RANK");
    *s = (Shape){.dv = 0, .R = kv ? (size_t)atoi(kv) : 512, .T = REPORT_TOKENS};
    int rest;
    if (argc >= 2 && !strcmp(argv[1], "8b")) { s->m = 4096; s->H = 32; s->G = 8; s->d = 128; *layers = 32; rest = 2; }
    else if (argc >= 2 && !strcmp(argv[1], "70b")) { s->m = 8192; s->H = 64; s->G = 8; s->d = 128; *layers = 80; rest = 2; }
    else if (argc >= 2 && !strcmp(argv[1], "scaled")) { s->m = 2048; s->H = 16; s->G = 8; s->d = 128; *layers = 8; rest = 2; }
    else if (argc >= 5 && atoi(argv[1]) > 0) {
        s->m = (size_t)atoi(argv[1]); s->H = (size_t)atoi(argv[2]); s->G = (size_t)atoi(argv[3]);
        s->d = (size_t)atoi(argv[4]); *layers = 1; rest = 5;
    } else return -1;
    if (argc > rest && atoi(argv[rest]) > 0) *layers = atoi(argv[rest]);
    *reps = argc > rest + 1 && atoi(argv[rest + 1]) > 0 ? atoi(argv[rest + 1]) : 2;
    s->dv = s->d;
    s->D = s->d;                                  /* freqfold 1: the head's rotary dims */
    if (!s->H || !s->G || s->H % s->G || s->R < 1 || s->R > s_nJ(s)) return -1;
    return 0;
}

int main(int argc, char **argv) {
    Inputs in = {0};
    int layers, reps;
    if (parse_shape(argc, argv, &in.s, &layers, &reps)) {
        fprintf(stderr, "usage: bench_pca_floor scaled|8b|70b [LAYERS] [REPS]\n"
                        "       bench_pca_floor HIDDEN HEADS KV_HEADS HEAD_DIM [LAYERS] [REPS]\n");
        return 2;
    }
    const Shape *s = &in.s;
    int lanes = tmla_lanes_count((size_t)layers, 0);
    openblas_set_num_threads(1);
    printf("shape: hidden %zu, %zu heads, %zu KV heads, head_dim %zu; kv-rank %zu, rope dims %zu, joint basis %zu; "
           "%d lane(s) x 1 BLAS thread; %d layers\n", s->m, s->H, s->G, s->d, s->R, s->D, s_nJ(s), lanes, layers);
    inputs_make(&in);
    double flops[N_PARTS], best = 1e30;
    part_flops(s, flops);
    Lane lane[2], keep = {0};
    pthread_barrier_t start;
    for (int r = 0; r < reps; r++) {
        pthread_barrier_init(&start, NULL, (unsigned)lanes);
        pthread_t th[2];
        for (int i = 0; i < lanes; i++) {
            lane[i] = (Lane){.in = &in, .start = &start};
            if (i) pthread_create(&th[i], NULL, lane_layer, &lane[i]);
        }
        lane_layer(&lane[0]);
        for (int i = 1; i < lanes; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        double pair = 0;
        for (int i = 0; i < lanes; i++) {
            if (lane[i].info) { fprintf(stderr, "a LAPACK call failed (info %d)\n", lane[i].info); return 1; }
            pair = fmax(pair, lane[i].total);
        }
        printf("round %d: %d layer(s) side by side in %.3f s (lane 0 %.3f s)\n", r + 1, lanes, pair, lane[0].total);
        if (pair < best) { best = pair; keep = lane[0]; }
    }
    printf("%-38s %8s %8s %8s %8s\n", "part (one layer, lane 0, best round)", "GFLOP", "wall_s", "cpu_s", "GFLOP/s");
    double fs = 0, ws = 0, cs = 0;
    for (int k = 0; k < N_PARTS; k++) {
        printf("%-38s %8.1f %8.3f %8.3f %8.1f\n", part_name[k], flops[k] / 1e9, keep.wall[k], keep.cpu[k],
               keep.cpu[k] > 0 ? flops[k] / 1e9 / keep.cpu[k] : 0);
        fs += flops[k]; ws += keep.wall[k]; cs += keep.cpu[k];
    }
    printf("%-38s %8.1f %8.3f %8.3f %8.1f\n", "one layer", fs / 1e9, ws, cs, cs > 0 ? fs / 1e9 / cs : 0);
    int rounds = (layers + lanes - 1) / lanes;
    printf("pca floor: %.3f s for %d layers (%d lanes; a layer pair %.3f s, best of %d); CPU %.3f s a layer\n",
           best * rounds, layers, lanes, best, reps, cs);
    inputs_free(&in);
    return 0;
}
