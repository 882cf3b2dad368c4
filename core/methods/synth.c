/* synth.c -- the demo-model and test-data generator: small Hugging Face-layout checkpoints with
 * planted, documented low-rank attention structure, and DeepSeek-R1-shaped FP8 checkpoints.
 *
 * Owns: the PRNG (splitmix64 + Box-Muller, one stream per tensor name, so a tensor's values do not
 * depend on the dtype or on the order of generation), the planted head pairs, the four demo
 * layouts, the power-of-two FP8 block quantizer, how tensors are split into shards and config.json
 * (files, index and folder through core/io/ckpt_write.h).
 *
 * ---------------------------------------------------------------- planted structure
 * A "pair" is the two sides of a fused head map: VO (W_V[h]: d_in x d_v times W_O[h]: d_v x d)
 * or QK (W_Q[h] W_K[h]^T over the NoPE columns for MLA, all columns for GPT-2). Ranks below are
 * effective ranks (smallest r with sum_{j<=r} sigma_j^2 >= tau * sum sigma^2) at tau 0.999 / 0.99.
 *
 *   random      Gaussian entries (the "common case"); not planted, near full rank.
 *   flat        both sides orthonormal bases x one scale: every singular value equal.
 *               V, O, VO all exactly full rank (d_v) at every tau.
 *   bottleneck  the shared side (V, or K for QK) = c * S_in S_mid^T with S_in, S_mid signed
 *               Hadamard columns (entries 0/+-1, orthogonal), c a power of two: EXACT rank r
 *               with r equal singular values, and small integers x c, so F32, BF16 and FP8
 *               (power-of-two block scales) store it bit-exactly. The other side is flat and its
 *               first r basis directions are the same S_mid: fused rank exactly r (flat) at every
 *               tau in every dtype; the other side stays full rank.
 *   fused-low   "only low when fused": both sides share one value-space basis P and one spectrum
 *               s = (1 x r, beta x (d-r)), V = c A diag(s) P^T, O = c' P diag(s) B^T, so the fused
 *               map is A diag(s^2) B^T. V and O alone are high rank (their weak directions carry
 *               beta^2 of the energy each), but the weak directions of V meet the weak ones of O,
 *               so the product's tail carries beta^4: below 1e-4 of the energy.
 *               r=4, beta=0.055 (d=32): V, O (Q, K): 31 @0.999, 19 @0.99; fused 4 @ both
 *                                       (fused tail energy 6.4e-5).
 *               r=3, beta=0.050 (d=32): V, O: 31 @0.999, 20 @0.99; fused 3 @ both (tail 6.0e-5).
 *
 * demo-r1 (DeepSeek-V3 layout, MLA; hidden 320, 8 heads, q_lora 192, kv_lora 96, qk_nope 32,
 * qk_rope 16, v 32, 6 layers, vocab 256, dense MLP 576):
 *   layer  VO (W_V from kv_b_proj, W_O from o_proj)       QK NoPE (W_Q from q_b_proj, W_K kv_b_proj)
 *   0      random                                          random
 *   1      even heads bottleneck V rank 6; odd heads flat  bottleneck: K NoPE rank 8, all heads
 *   2      fused-low r=4 all heads                         fused-low r=4 all heads
 *   3      even heads bottleneck 6; odd heads fused-low 3  bottleneck staircase: head h rank 2(h+1)
 *   4      flat (V, O, VO exactly 32)                      flat (Q, K, QK exactly 32)
 *   5      random                                          random
 * demo-llama (Llama, GQA: hidden 256, 8 heads, 2 KV heads (groups of 4), head_dim 32, 4 layers,
 * rotate_half RoPE so QK is not fused): VO per query head h uses V[g], g = h / 4:
 *   0 random; 1 bottleneck V[0] rank 6 (heads 0-3 fused 6), V[1] flat (heads 4-7 fused 32);
 *   2 fused-low r=4 (each head's O aligned with its group's V); 3 random. Q and K random.
 * demo-gpt2 (GPT-2, MHA, no RoPE: n_embd 256, 8 heads x 32, 4 layers, vocab 256):
 *   0 random; 1 VO like demo-r1 layer 1, QK bottleneck K rank 8; 2 fused-low r=4 for VO and QK;
 *   3 random.
 * demo-kvnorm (Llama, GQA: hidden 256, 8 heads, 4 KV heads (groups of 2), head_dim 32, 2 layers,
 * rotate_half RoPE): the key-norm concentration of TransMLA's Figures 3a and 4a. In every layer the
 * RoPE frequency pairs 1, 6 and 13 (of 16; one per FreqFold-4 group) of KV head g carry keys about
 * 8 w_g times larger (RMS) than the other dims, w = (1, 0.35, 0.7, 0.2): an added part of rank 1
 * across the heads, which RoRoPE gathers into the first head's copy. The other key dims have RMS 1
 * under unit-variance inputs, the values RMS 1/8 (v_proj x 1/8, o_proj x 8: the VO maps are plain
 * random ones). Weight-based, layer 0: alpha (RMS NoPE key / RMS value) 7.8, RMS key / RMS value
 * over all key dims 20 (demo-llama: 0.83 and 0.90).
 * Under BF16 every planted rank above stays exact (rounding energy ~3e-6 of the total, far below
 * every margin). Under FP8 (demo-r1 only) the bottleneck and flat ranks, the fused-low fused
 * ranks (tail still < 1e-4) and the fused-low V/O/Q/K ranks at 0.999 stay exact; only those
 * individual ranks at 0.99 move (by one, from the FP8 noise of about 7e-4 of each matrix's
 * energy): see examples/README.md and tests/test_synth.c.
 *
 * ds-r1-shape: DeepSeek-R1 attention shapes, FP8 bytes drawn straight from a 256-entry table of
 * Gaussian E4M3 codes; in every layer heads 0, 8, 16, ... have V (kv_b_proj V rows) of exact rank
 * 16 (signed-Hadamard integers, FP8-exact), so their V and fused VO have rank 16. */
#define _GNU_SOURCE
#include "synth.h"
#include "synth_internal.h"
#include "ckpt_write.h"
#include "config.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ================================================================ PRNG */

static uint64_t rng_u64(Rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static double syn_rng_unit(Rng *r) { return ((double)(rng_u64(r) >> 11) + 0.5) * 0x1.0p-53; }

/* Standard normal deviate (Box-Muller, both outputs used). */
double syn_rng_gauss(Rng *r) {
    if (r->has_spare) { r->has_spare = false; return r->spare; }
    double u = syn_rng_unit(r), v = syn_rng_unit(r);
    double rad = sqrt(-2.0 * log(u)), th = 2.0 * M_PI * v;
    r->spare = rad * sin(th);
    r->has_spare = true;
    return rad * cos(th);
}

/* Uniform integer in [0, n). */
static size_t rng_below(Rng *r, size_t n) { return n ? (size_t)(rng_u64(r) % n) : 0; }

/* A stream for (seed, name): FNV-1a of the name mixed into the seed. */
void syn_rng_init(Rng *r, unsigned long seed, const char *stream) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = stream; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    r->s = (uint64_t)seed * 0x9e3779b97f4a7c15ULL ^ h;
    r->has_spare = false;
    rng_u64(r);
}

/* ================================================================ dense helpers (double) */

/* Row-major (r x c) double matrix of N(0, sd^2) deviates; caller frees. */
static double *gauss_d(Rng *rng, size_t r, size_t c, double sd) {
    double *a = al_malloc3(r, c, sizeof(double), "synthetic Gaussian matrix");
    if (a)
        for (size_t i = 0; i < r * c; i++) a[i] = sd * syn_rng_gauss(rng);
    return a;
}

/* Orthonormalizes the k columns of the row-major (n x k) matrix a in place (n >= k):
 * LAPACK geqrf + orgqr. */
static int qr_q(double *a, size_t n, size_t k) {
    double *tau = al_malloc3(k, 1, sizeof(double), "QR reflectors");
    if (!tau) return AL_ERR;
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)k, a, (lapack_int)k, tau);
    if (info == 0)
        info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)k, (lapack_int)k, a, (lapack_int)k, tau);
    free(tau);
    if (info != 0) return al_err("LAPACK dgeqrf/dorgqr failed (info %d) on a %zu x %zu matrix", (int)info, n, k);
    return AL_OK;
}

/* (n x k) matrix with orthonormal columns (QR of a Gaussian matrix); caller frees. */
static double *ortho_d(Rng *rng, size_t n, size_t k) {
    double *a = gauss_d(rng, n, k, 1.0);
    if (a && qr_q(a, n, k) != AL_OK) { free(a); return NULL; }
    return a;
}

/* Largest power of two <= n (n >= 1). */
static size_t pow2_floor(size_t n) {
    size_t p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

/* Sylvester Hadamard entry H_p[i][j] = (-1)^popcount(i & j). */
static double hadamard(size_t i, size_t j) { return __builtin_popcountll((unsigned long long)(i & j)) & 1 ? -1.0 : 1.0; }

/* (n x k) matrix of signed Hadamard columns: k distinct columns of H_p (p = pow2_floor(n) >= k)
 * placed on p random rows with random row signs, zeros elsewhere. Columns are orthogonal with
 * squared norm p; entries are 0 / +-1. Caller frees. */
static double *signed_hadamard(Rng *rng, size_t n, size_t k) {
    size_t p = pow2_floor(n);
    if (k > p) { al_err("a signed Hadamard basis of %zu column%s needs at least %zu row%s, got %zu", k, al_s(k), k, al_s(k), n); return NULL; }
    double *a = al_calloc(n * k, sizeof(double), "signed Hadamard basis");
    size_t *rows = al_malloc3(n, 1, sizeof(size_t), "row permutation");
    size_t *cols = al_malloc3(p, 1, sizeof(size_t), "column permutation");
    if (!a || !rows || !cols) { free(a); free(rows); free(cols); return NULL; }
    for (size_t i = 0; i < n; i++) rows[i] = i;
    for (size_t i = 0; i < p; i++) cols[i] = i;
    for (size_t i = n; i > 1; i--) { size_t j = rng_below(rng, i), t = rows[i - 1]; rows[i - 1] = rows[j]; rows[j] = t; }
    for (size_t i = p; i > 1; i--) { size_t j = rng_below(rng, i), t = cols[i - 1]; cols[i - 1] = cols[j]; cols[j] = t; }
    for (size_t i = 0; i < p; i++) {
        double sg = rng_u64(rng) & 1 ? -1.0 : 1.0;
        for (size_t j = 0; j < k; j++) a[rows[i] * k + j] = sg * hadamard(i, cols[j]);
    }
    free(rows);
    free(cols);
    return a;
}

/* C (m x n) = alpha * A (m x k) @ B^T, B (n x k); caller frees. */
static double *mul_abt(const double *A, const double *B, size_t m, size_t n, size_t k, double alpha) {
    double *C = al_malloc3(m, n, sizeof(double), "synthetic product");
    if (C)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, alpha, A, (int)k, B, (int)k,
                    0.0, C, (int)n);
    return C;
}

/* Scales column j of the (n x k) matrix a by s[j]. */
static void scale_cols(double *a, size_t n, size_t k, const double *s) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) a[i * k + j] *= s[j];
}

/* Float copy of a row-major double matrix, as a Mat (rows x cols). */
static Mat *mat_from_d(const double *a, size_t rows, size_t cols) {
    Mat *m = mat_new(rows, cols);
    if (m)
        for (size_t i = 0; i < rows * cols; i++) m->data[i] = (float)a[i];
    return m;
}

/* ================================================================ planted pairs */


/* A planted pair: the shared side L (m x k) -- W_V[g], or W_K[g] for QK -- and G per-head sides
 * R[j] (n x k) -- W_O[h]^T, or W_Q[h] -- whose fused maps L R[j]^T have the spectrum of sp (see
 * the top of this file). Element RMS of L and R is about rms_l and rms_r. Caller frees L and
 * R[0..G). */
int syn_gen_pair(Rng *rng, const PairSpec *sp, size_t m, size_t n, size_t k, int G, double rms_l, double rms_r,
                    Mat **L, Mat **R) {
    double *l = NULL, *P = NULL, *s = NULL, *hs = NULL, *hk = NULL;
    int rc = AL_ERR;
    *L = NULL;
    for (int j = 0; j < G; j++) R[j] = NULL;
    if (sp->pat != PAT_RANDOM && (m < k || n < k))
        return al_err("a planted pair needs both sides at least %zu row%s (got %zu and %zu)", k, al_s(k), m, n);
    if (sp->pat == PAT_RANDOM) {
        l = gauss_d(rng, m, k, rms_l);
        if (!l || !(*L = mat_from_d(l, m, k))) goto out;
        for (int j = 0; j < G; j++) {
            double *r = gauss_d(rng, n, k, rms_r);
            R[j] = r ? mat_from_d(r, n, k) : NULL;
            free(r);
            if (!R[j]) goto out;
        }
        rc = AL_OK;
        goto out;
    }
    s = al_malloc3(k, 1, sizeof(double), "singular values");
    if (!s) goto out;
    if (sp->pat == PAT_BOTTLENECK) {
        /* L = c * Hs Hk^T: exact integers times a power of two. P completes Hk / sqrt(pk). */
        size_t r = (size_t)sp->r, pm = pow2_floor(m), pk = pow2_floor(k);
        if (r < 1 || r > k) { al_err("bottleneck rank %zu outside 1..%zu", r, k); goto out; }
        hs = signed_hadamard(rng, m, r);
        hk = signed_hadamard(rng, k, r);
        if (!hs || !hk) goto out;
        double c = exp2(round(log2(rms_l * sqrt((double)(m * k) / (double)(r * pm * pk)))));
        l = mul_abt(hs, hk, m, k, r, c);
        P = al_malloc3(k, k, sizeof(double), "value-space basis");
        if (!l || !P) goto out;
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < k; j++) P[i * k + j] = j < r ? hk[i * r + j] / sqrt((double)pk) : syn_rng_gauss(rng);
        if (qr_q(P, k, k) != AL_OK) goto out;
        for (size_t j = 0; j < k; j++) s[j] = 1.0;
    } else {
        size_t r = sp->pat == PAT_FLAT ? k : (size_t)sp->r;
        double e = 0;
        for (size_t j = 0; j < k; j++) { s[j] = j < r ? 1.0 : sp->beta; e += s[j] * s[j]; }
        double *A = ortho_d(rng, m, k);
        P = A ? ortho_d(rng, k, k) : NULL;
        if (!P) { free(A); goto out; }
        scale_cols(A, m, k, s);
        l = mul_abt(A, P, m, k, k, rms_l * sqrt((double)(m * k) / e));
        free(A);
        if (!l) goto out;
    }
    if (!(*L = mat_from_d(l, m, k))) goto out;
    double e = 0;
    for (size_t j = 0; j < k; j++) e += s[j] * s[j];
    for (int j = 0; j < G; j++) {
        double *B = ortho_d(rng, n, k);
        if (!B) goto out;
        scale_cols(B, n, k, s);
        double *r = mul_abt(B, P, n, k, k, rms_r * sqrt((double)(n * k) / e));
        free(B);
        R[j] = r ? mat_from_d(r, n, k) : NULL;
        free(r);
        if (!R[j]) goto out;
    }
    rc = AL_OK;
out:
    if (rc != AL_OK) {
        mat_free(*L);
        *L = NULL;
        for (int j = 0; j < G; j++) { mat_free(R[j]); R[j] = NULL; }
    }
    free(l);
    free(P);
    free(s);
    free(hs);
    free(hk);
    return rc;
}

/* ================================================================ tensor list */


void synlist_free(SynList *l) {
    for (size_t i = 0; i < l->n; i++) { free(l->t[i].name); mat_free(l->t[i].m); }
    free(l->t);
    memset(l, 0, sizeof *l);
}

/* Appends m (ownership taken, also on failure) under name with storage dtype. */
int synlist_add(SynList *l, const char *name, int ndim, Mat *m, dt_type dtype) {
    if (!m) return AL_ERR;
    if (al_reserve(&l->t, &l->cap, l->n + 1, sizeof *l->t, "the synthetic tensor list")) { mat_free(m); return AL_ERR; }
    SynTensor *t = &l->t[l->n];
    t->name = al_strdup(name);
    if (!t->name) { mat_free(m); return AL_ERR; }
    t->ndim = ndim;
    t->lead = 0;
    t->m = m;
    t->dtype = dtype;
    size_t R = m->rows, C = m->cols;
    if (dtype == DT_F8_E4M3)
        t->nbytes = R * C + dt_fp8_nblocks(R) * dt_fp8_nblocks(C) * sizeof(float);
    else
        t->nbytes = R * C * dt_size(dtype);
    l->n++;
    return AL_OK;
}

int synlist_add3(SynList *l, const char *name, size_t lead, Mat *m, dt_type dtype) {
    if (m && (lead == 0 || m->rows % lead || dtype == DT_F8_E4M3)) {
        mat_free(m);
        return al_err("internal: '%s' cannot be written as %zu block%s of rows", name, lead, al_s(lead));
    }
    int rc = synlist_add(l, name, 3, m, dtype);
    if (rc == AL_OK) l->t[l->n - 1].lead = lead;
    return rc;
}

/* A demo model's layer L added to l; spec is the model's own description (NULL for the fixed ones). */
typedef int (*syn_layer_fn)(SynList *l, const SynthOptions *o, const void *spec, int L);

/* Layers 0 .. n-1 through layer, polling Ctrl-C and reporting progress. */
static int syn_layers(SynList *l, const SynthOptions *o, int n, syn_layer_fn layer, const void *spec) {
    int rc = AL_OK;
    for (int L = 0; rc == AL_OK && L < n; L++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        rc = layer(l, o, spec, L);
        al_progress("layer", (size_t)L + 1, (size_t)n);
    }
    return rc;
}

/* Constant vector (1 x n). */
Mat *syn_vec_const(size_t n, float v) {
    Mat *m = mat_new(1, n);
    if (m)
        for (size_t i = 0; i < n; i++) m->data[i] = v;
    return m;
}

/* Gaussian matrix (rows x cols) with element RMS sd from the stream (seed, name). */
Mat *syn_gauss_named(unsigned long seed, const char *name, size_t rows, size_t cols, double sd) {
    Rng rng;
    syn_rng_init(&rng, seed, name);
    Mat *m = mat_new(rows, cols);
    if (m)
        for (size_t i = 0; i < rows * cols; i++) m->data[i] = (float)(sd * syn_rng_gauss(&rng));
    return m;
}

/* ================================================================ FP8 (power-of-two block scales) */

/* Quantizes m (R x C) to F8_E4M3 with 128x128 block scales that are powers of two (the smallest
 * with amax / scale <= 448), so that small integers times a power of two stay exact. Fills q
 * (R*C bytes) and scale (ceil(R/128) x ceil(C/128) floats), both caller-allocated. */
static void fp8_quantize(const Mat *m, uint8_t *q, float *scale) {
    const size_t B = DT_FP8_BLOCK, R = m->rows, C = m->cols, sc = dt_fp8_nblocks(C);
    for (size_t bi = 0; bi < dt_fp8_nblocks(R); bi++)
        for (size_t bj = 0; bj < sc; bj++) {
            size_t i1 = (bi + 1) * B < R ? (bi + 1) * B : R, j1 = (bj + 1) * B < C ? (bj + 1) * B : C;
            float amax = 0;
            for (size_t i = bi * B; i < i1; i++)
                for (size_t j = bj * B; j < j1; j++) amax = fmaxf(amax, fabsf(m->data[i * C + j]));
            int e = amax > 0 ? (int)ceil(log2((double)amax / 448.0)) : 0;
            while (amax > 0 && ldexpf(448.0f, e) < amax) e++;
            float s = ldexpf(1.0f, e);
            scale[bi * sc + bj] = s;
            for (size_t i = bi * B; i < i1; i++)
                for (size_t j = bj * B; j < j1; j++) q[i * C + j] = dt_f32_to_e4m3(ldexpf(m->data[i * C + j], -e));
        }
}

/* Adds one listed tensor to a writer in its storage dtype (FP8: the weight and its
 * "<name minus .weight>.weight_scale_inv"). */
static int add_tensor(CkptWriter *w, const SynTensor *t) {
    const Mat *m = t->m;
    size_t shape[4] = {m->rows, m->cols, m->cols, 1}, n = m->rows * m->cols;
    if (t->ndim == 3) shape[1] = 1;                  /* a depthwise conv1d: [channels, 1, kernel] */
    if (t->ndim == 4) { shape[0] = shape[1] = 1; shape[2] = n; }   /* a vector as (1, 1, n, 1): KDA's A_log */
    if (t->ndim == 3 && t->lead) { shape[0] = t->lead; shape[1] = m->rows / t->lead; }   /* [E, rows / E, cols] */
    const size_t *sh = t->ndim == 1 ? shape + 1 : shape;
    int rc;
    if (t->dtype == DT_F8_E4M3) {
        size_t sr = dt_fp8_nblocks(m->rows), sc = dt_fp8_nblocks(m->cols);
        size_t sshape[2] = {sr, sc};
        uint8_t *q = al_malloc(n, t->name);
        float *scale = al_malloc3(sr, sc, sizeof(float), t->name);
        char *sname = al_asprintf("%s_scale_inv", t->name);
        if (!q || !scale || !sname) { free(q); free(scale); free(sname); return AL_ERR; }
        fp8_quantize(m, q, scale);
        rc = ckpt_add_owned(w, t->name, DT_F8_E4M3, 2, shape, q, n);
        rc = rc ? (free(scale), rc) : ckpt_add_owned(w, sname, DT_F32, 2, sshape, scale, sr * sc * sizeof(float));
        free(sname);
        return rc;
    }
    void *buf = al_malloc3(n, 1, dt_size(t->dtype), t->name);
    if (!buf) return AL_ERR;
    if (dt_from_f32(t->dtype, m->data, n, buf)) { free(buf); return AL_ERR; }
    return ckpt_add_owned(w, t->name, t->dtype, t->ndim, sh, buf, n * dt_size(t->dtype));
}

/* ================================================================ writing a model */

/* Writes the listed tensors into `shards` weight shards (split by size; a weight and its scale
 * stay together); the writer names them and writes the index when shards > 1. */
static int write_shards(CkptWriter *w, const SynList *l, int shards) {
    size_t total = 0;
    for (size_t i = 0; i < l->n; i++) total += l->t[i].nbytes;
    if (shards < 1 || (size_t)shards > l->n)
        return al_err("shards must be between 1 and %zu (the number of tensors), got %d", l->n, shards);
    int rc = AL_OK;
    size_t ti = 0, done = 0;
    for (int s = 0; rc == AL_OK && s < shards; s++) {
        /* this shard takes tensors until its share of the bytes is reached, leaving at least one
         * tensor for every later shard */
        size_t goal = (size_t)((double)total * (s + 1) / shards);
        bool first = true;
        while (rc == AL_OK && ti < l->n && (first || done + l->t[ti].nbytes <= goal || s == shards - 1) &&
               l->n - ti > (size_t)(shards - 1 - s)) {
            const SynTensor *t = &l->t[ti++];
            rc = add_tensor(w, t);
            done += t->nbytes;
            first = false;
        }
        if (rc == AL_OK) rc = ckpt_shard_end(w);
    }
    if (rc == AL_OK && ti != l->n) rc = al_err("internal error: %zu tensor%s left after sharding", l->n - ti, al_s(l->n - ti));
    return rc;
}

/* Starts a new model folder (no source, no force: dir must be new or empty); sharded: shard
 * names and an index even for one shard. */
static int begin_dir(const char *dir, bool sharded, CkptWriter **w) {
    if (!dir || !*dir) return al_err("no output folder given");
    return ckpt_begin(dir, &(CkptOpts){.always_index = sharded}, w);
}

/* Writes root as config.json and frees it. */
static int write_config(CkptWriter *w, cJSON *root) {
    int rc = root ? ckpt_write_json(w, "config.json", root) : al_err("out of memory writing config.json");
    cJSON_Delete(root);
    return rc;
}

void syn_add_num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }
void syn_add_str(cJSON *o, const char *k, const char *v) { cJSON_AddStringToObject(o, k, v); }

/* The "attnlab_synth" block every generated config carries (what made it). */
void syn_add_provenance(cJSON *root, const char *kind, unsigned long seed, dt_type dt) {
    cJSON *p = cJSON_AddObjectToObject(root, "attnlab_synth");
    syn_add_str(p, "kind", kind);
    syn_add_num(p, "seed", (double)seed);
    syn_add_str(p, "dtype", dt_name(dt));
    syn_add_num(p, "version", SYNTH_VERSION);
    syn_add_str(p, "recipe", "see attnlab examples/README.md and core/methods/synth.c");
}

int syn_write_model(const SynList *l, cJSON *cfg, const char *dir, int shards) {
    CkptWriter *w = NULL;
    int rc = begin_dir(dir, false, &w);
    if (rc != AL_OK) { cJSON_Delete(cfg); return rc; }
    rc = write_shards(w, l, shards);
    if (rc == AL_OK) rc = write_config(w, cfg);
    else cJSON_Delete(cfg);
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else ckpt_abort(w);
    return rc;
}

static void add_fp8_quant_config(cJSON *root) {
    cJSON *q = cJSON_AddObjectToObject(root, "quantization_config");
    syn_add_str(q, "activation_scheme", "dynamic");
    syn_add_str(q, "fmt", "e4m3");
    syn_add_str(q, "quant_method", "fp8");
    cJSON *bs = cJSON_AddArrayToObject(q, "weight_block_size");
    cJSON_AddItemToArray(bs, cJSON_CreateNumber(DT_FP8_BLOCK));
    cJSON_AddItemToArray(bs, cJSON_CreateNumber(DT_FP8_BLOCK));
}

/* ================================================================ tensor names */

/* The Hugging Face name of role r's `what` ("weight", "bias") in layer L (ignored for model-level
 * roles) of family f's layouts (core/model/family.h), written into buf; returns buf. */
static const char *syn_name(model_family f, tensor_role r, int L, const char *what, char *buf, size_t cap) {
    ModelConfig c = {.family = f};
    cfg_layouts_from_row(&c);
    cfg_role_name(&c, r, L, 0, what, buf, cap);
    return buf;
}

/* ================================================================ demo-r1 (DeepSeek-V3 layout) */

enum { R1_HIDDEN = 320, R1_HEADS = 8, R1_QLORA = 192, R1_KVLORA = 96, R1_NOPE = 32, R1_ROPE = 16, R1_V = 32,
       R1_LAYERS = 6, R1_VOCAB = 256, R1_INTER = 576 };

/* Planted VO / QK structure of demo-r1 (see the top of this file). */
static PairSpec r1_vo(int L, int h) {
    switch (L) {
    case 1: return h % 2 == 0 ? p_bottle(6) : p_flat();
    case 2: return p_low(4, 0.055);
    case 3: return h % 2 == 0 ? p_bottle(6) : p_low(3, 0.05);
    case 4: return p_flat();
    default: return p_random();
    }
}

static PairSpec r1_qk(int L, int h) {
    switch (L) {
    case 1: return p_bottle(8);
    case 2: return p_low(4, 0.055);
    case 3: return p_bottle(2 * (h + 1));
    case 4: return p_flat();
    default: return p_random();
    }
}

int syn_mla_heads(unsigned long seed, const char *kind, int L, const MlaDims *d, syn_pair_fn vo_fn,
                  syn_pair_fn qk_fn, Mat **qbp, Mat **kvbp, Mat **opp) {
    const size_t D = d->D, H = d->H, QL = d->QL, KL = d->KL, NP = d->NP, RP = d->RP, V = d->V;
    char stream[96];
    Mat *qb = mat_new(H * (NP + RP), QL), *kvb = mat_new(H * (NP + V), KL), *op = mat_new(D, H * V);
    int rc = qb && kvb && op ? AL_OK : AL_ERR;
    for (size_t h = 0; rc == AL_OK && h < H; h++) {
        Rng rng;
        Mat *Lv = NULL, *Ro = NULL, *Lk = NULL, *Rq = NULL;
        PairSpec vo = vo_fn(L, (int)h), qk = qk_fn(L, (int)h);
        snprintf(stream, sizeof stream, "%s.L%d.h%zu.vo", kind, L, h);
        syn_rng_init(&rng, seed, stream);
        rc = syn_gen_pair(&rng, &vo, KL, D, V, 1, 1 / sqrt((double)KL), 1 / sqrt((double)(H * V)), &Lv, &Ro);
        snprintf(stream, sizeof stream, "%s.L%d.h%zu.qk", kind, L, h);
        syn_rng_init(&rng, seed, stream);
        if (rc == AL_OK) rc = syn_gen_pair(&rng, &qk, KL, QL, NP, 1, 1 / sqrt((double)KL), 1 / sqrt((double)QL), &Lk, &Rq);
        if (rc == AL_OK) {
            /* q_b_proj rows of head h: NoPE rows = W_Q^T (Rq: QL x NP), then RoPE rows (random) */
            for (size_t i = 0; i < NP; i++)
                for (size_t j = 0; j < QL; j++) *mat_at(qb, h * (NP + RP) + i, j) = *mat_at(Rq, j, i);
            for (size_t i = 0; i < RP; i++)
                for (size_t j = 0; j < QL; j++)
                    *mat_at(qb, h * (NP + RP) + NP + i, j) = (float)(syn_rng_gauss(&rng) / sqrt((double)QL));
            /* kv_b_proj rows of head h: K NoPE rows = W_K^T (Lk: KL x NP), then V rows = W_V^T */
            for (size_t i = 0; i < NP; i++)
                for (size_t j = 0; j < KL; j++) *mat_at(kvb, h * (NP + V) + i, j) = *mat_at(Lk, j, i);
            for (size_t i = 0; i < V; i++)
                for (size_t j = 0; j < KL; j++) *mat_at(kvb, h * (NP + V) + NP + i, j) = *mat_at(Lv, j, i);
            /* o_proj columns of head h: W_O^T = Ro (D x V) */
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < V; j++) *mat_at(op, i, h * V + j) = *mat_at(Ro, i, j);
        }
        mat_free(Lv); mat_free(Ro); mat_free(Lk); mat_free(Rq);
    }
    if (rc != AL_OK) { mat_free(qb); mat_free(kvb); mat_free(op); qb = kvb = op = NULL; }
    *qbp = qb;
    *kvbp = kvb;
    *opp = op;
    return rc;
}

/* Layer L of demo-r1: attention with planted heads, norms, dense MLP. */
static int r1_layer(SynList *l, const SynthOptions *o, const void *spec, int L) {
    (void)spec;
    const dt_type wt = o->dtype, nt = o->dtype == DT_F8_E4M3 ? DT_BF16 : o->dtype;
    const size_t D = R1_HIDDEN, QL = R1_QLORA, KL = R1_KVLORA, RP = R1_ROPE;
    const MlaDims dims = {D, R1_HEADS, QL, KL, R1_NOPE, RP, R1_V};
    char name[160];
    Mat *qb, *kvb, *op;
    int rc = syn_mla_heads(o->seed, "demo-r1", L, &dims, r1_vo, r1_qk, &qb, &kvb, &op);
    if (rc != AL_OK) return rc;
#define ADD(role, nd, mat, dt) \
    (syn_name(FAM_DEEPSEEK, role, L, "weight", name, sizeof name), synlist_add(l, name, nd, mat, dt))
#define ADD_GAUSS(role, r, c, sd) \
    (syn_name(FAM_DEEPSEEK, role, L, "weight", name, sizeof name), \
     synlist_add(l, name, 2, syn_gauss_named(o->seed, name, r, c, sd), wt))
    const double sd_d = 1 / sqrt((double)D);
    rc = ADD(ROLE_NORM_ATTN_IN, 1, syn_vec_const(D, 1), nt);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_Q_A, QL, D, sd_d);
    if (rc == AL_OK) rc = ADD(ROLE_Q_A_NORM, 1, syn_vec_const(QL, 1), nt);
    if (rc == AL_OK) rc = ADD(ROLE_Q_B, 2, qb, wt); else mat_free(qb);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_KV_A, KL + RP, D, sd_d);
    if (rc == AL_OK) rc = ADD(ROLE_KV_A_NORM, 1, syn_vec_const(KL, 1), nt);
    if (rc == AL_OK) rc = ADD(ROLE_KV_B, 2, kvb, wt); else mat_free(kvb);
    if (rc == AL_OK) rc = ADD(ROLE_O, 2, op, wt); else mat_free(op);
    if (rc == AL_OK) rc = ADD(ROLE_NORM_FFN_IN, 1, syn_vec_const(D, 1), nt);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_FFN_GATE, R1_INTER, D, sd_d);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_FFN_UP, R1_INTER, D, sd_d);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_FFN_DOWN, D, R1_INTER, 1 / sqrt((double)R1_INTER));
#undef ADD
#undef ADD_GAUSS
    return rc;
}

/* One DeepSeek-V3 config.json (demo-r1 and ds-r1-shape) in the key order of the real one: the
 * shape, the MoE settings (demo-r1 keeps every layer dense), and `hub`: the keys only DeepSeek-R1's
 * own file carries (aux loss, expert parallelism, YaRN, seq_aux, use_cache). */
typedef struct {
    int hidden, heads, qlora, kvlora, nope, rope, v, layers, vocab, inter, max_pos;
    int first_dense, moe_inter, n_group, n_routed, per_tok, nextn, topk_group;
    double routed_scale;
    bool hub;
    const char *kind;           /* attnlab_synth.kind */
    unsigned long seed;
    dt_type dtype;              /* storage; F8_E4M3 adds quantization_config */
} DsConfig;

static void ds_add_yarn(cJSON *c) {
    cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
    syn_add_num(rs, "beta_fast", 32);
    syn_add_num(rs, "beta_slow", 1);
    syn_add_num(rs, "factor", 40);
    syn_add_num(rs, "mscale", 1.0);
    syn_add_num(rs, "mscale_all_dim", 1.0);
    syn_add_num(rs, "original_max_position_embeddings", 4096);
    syn_add_str(rs, "type", "yarn");
}

/* The keys up to num_nextn_predict_layers (architectures .. MoE). */
static void ds_config_head(cJSON *c, const DsConfig *d) {
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("DeepseekV3ForCausalLM"));
    cJSON_AddFalseToObject(c, "attention_bias");
    syn_add_num(c, "attention_dropout", 0.0);
    if (d->hub) syn_add_num(c, "aux_loss_alpha", 0.001);
    syn_add_num(c, "bos_token_id", 0);
    syn_add_num(c, "eos_token_id", 1);
    if (d->hub) syn_add_num(c, "ep_size", 1);
    syn_add_num(c, "first_k_dense_replace", d->first_dense);
    syn_add_str(c, "hidden_act", "silu");
    syn_add_num(c, "hidden_size", d->hidden);
    syn_add_num(c, "initializer_range", 0.02);
    syn_add_num(c, "intermediate_size", d->inter);
    syn_add_num(c, "kv_lora_rank", d->kvlora);
    syn_add_num(c, "max_position_embeddings", d->max_pos);
    syn_add_str(c, "model_type", "deepseek_v3");
    syn_add_num(c, "moe_intermediate_size", d->moe_inter);
    syn_add_num(c, "moe_layer_freq", 1);
    syn_add_num(c, "n_group", d->n_group);
    syn_add_num(c, "n_routed_experts", d->n_routed);
    syn_add_num(c, "n_shared_experts", 1);
    cJSON_AddTrueToObject(c, "norm_topk_prob");
    syn_add_num(c, "num_attention_heads", d->heads);
    syn_add_num(c, "num_experts_per_tok", d->per_tok);
    syn_add_num(c, "num_hidden_layers", d->layers);
    syn_add_num(c, "num_key_value_heads", d->heads);
    syn_add_num(c, "num_nextn_predict_layers", d->nextn);
}

static cJSON *ds_config(const DsConfig *d) {
    cJSON *c = cJSON_CreateObject();
    ds_config_head(c, d);
    syn_add_num(c, "q_lora_rank", d->qlora);
    syn_add_num(c, "qk_nope_head_dim", d->nope);
    syn_add_num(c, "qk_rope_head_dim", d->rope);
    if (d->dtype == DT_F8_E4M3) add_fp8_quant_config(c);
    syn_add_num(c, "rms_norm_eps", 1e-6);
    if (d->hub) ds_add_yarn(c);
    else cJSON_AddNullToObject(c, "rope_scaling");
    syn_add_num(c, "rope_theta", 10000);
    syn_add_num(c, "routed_scaling_factor", d->routed_scale);
    syn_add_str(c, "scoring_func", "sigmoid");
    if (d->hub) cJSON_AddTrueToObject(c, "seq_aux");
    if (d->hub) cJSON_AddFalseToObject(c, "tie_word_embeddings");
    syn_add_num(c, "topk_group", d->topk_group);
    syn_add_str(c, "topk_method", "noaux_tc");
    if (!d->hub) cJSON_AddFalseToObject(c, "tie_word_embeddings");
    syn_add_str(c, "torch_dtype", d->dtype == DT_F32 ? "float32" : "bfloat16");
    if (d->hub) cJSON_AddTrueToObject(c, "use_cache");
    syn_add_num(c, "v_head_dim", d->v);
    syn_add_num(c, "vocab_size", d->vocab);
    syn_add_provenance(c, d->kind, d->seed, d->dtype);
    return c;
}

static cJSON *r1_config(const SynthOptions *o) {
    return ds_config(&(DsConfig){
        .hidden = R1_HIDDEN, .heads = R1_HEADS, .qlora = R1_QLORA, .kvlora = R1_KVLORA, .nope = R1_NOPE,
        .rope = R1_ROPE, .v = R1_V, .layers = R1_LAYERS, .vocab = R1_VOCAB, .inter = R1_INTER, .max_pos = 4096,
        .first_dense = R1_LAYERS,   /* every layer dense: no MoE */
        .moe_inter = 64, .n_group = 1, .n_routed = 4, .per_tok = 2, .nextn = 0, .topk_group = 1,
        .routed_scale = 1.0, .kind = "demo-r1", .seed = o->seed, .dtype = o->dtype});
}

/* All tensors of demo-r1 in file order. */
static int r1_tensors(SynList *l, const SynthOptions *o) {
    const dt_type et = o->dtype == DT_F8_E4M3 ? DT_BF16 : o->dtype;
    char name[160];
    syn_name(FAM_DEEPSEEK, ROLE_EMBED, 0, "weight", name, sizeof name);
    int rc = synlist_add(l, name, 2, syn_gauss_named(o->seed, name, R1_VOCAB, R1_HIDDEN, 1.0), et);
    if (rc == AL_OK) rc = syn_layers(l, o, R1_LAYERS, r1_layer, NULL);
    if (rc == AL_OK)
        rc = synlist_add(l, syn_name(FAM_DEEPSEEK, ROLE_FINAL_NORM, 0, "weight", name, sizeof name), 1,
                         syn_vec_const(R1_HIDDEN, 1), et);
    if (rc == AL_OK && syn_name(FAM_DEEPSEEK, ROLE_LM_HEAD, 0, "weight", name, sizeof name))
        rc = synlist_add(l, name, 2, syn_gauss_named(o->seed, name, R1_VOCAB, R1_HIDDEN, 1 / sqrt((double)R1_HIDDEN)),
                         et);
    return rc;
}

/* ================================================================ demo-llama */

enum { LL_HIDDEN = 256, LL_HEADS = 8, LL_KV = 2, LL_HD = 32, LL_LAYERS = 4, LL_VOCAB = 256, LL_INTER = 688 };

static PairSpec llama_vo(int L, int g) {
    switch (L) {
    case 1: return g == 0 ? p_bottle(6) : p_flat();
    case 2: return p_low(4, 0.055);
    default: return p_random();
    }
}

int syn_gqa_vo(unsigned long seed, const char *kind, int L, const GqaDims *d, syn_pair_fn vo_fn, Mat **vpp,
               Mat **opp) {
    const size_t D = d->D, H = d->H, KV = d->KV, HD = d->HD, G = H / KV;
    char stream[96];
    Mat *vp = mat_new(KV * HD, D), *op = mat_new(D, H * HD), **Ro = al_calloc(G, sizeof *Ro, "planted heads");
    int rc = vp && op && Ro ? AL_OK : AL_ERR;
    for (size_t g = 0; rc == AL_OK && g < KV; g++) {
        Rng rng;
        Mat *Lv = NULL;
        PairSpec vo = vo_fn(L, (int)g);
        snprintf(stream, sizeof stream, "%s.L%d.g%zu.vo", kind, L, g);
        syn_rng_init(&rng, seed, stream);
        rc = syn_gen_pair(&rng, &vo, D, D, HD, (int)G, 1 / sqrt((double)D), 1 / sqrt((double)(H * HD)), &Lv, Ro);
        if (rc == AL_OK) {
            for (size_t i = 0; i < HD; i++)
                for (size_t j = 0; j < D; j++) *mat_at(vp, g * HD + i, j) = *mat_at(Lv, j, i);
            for (size_t k = 0; k < G; k++)
                for (size_t i = 0; i < D; i++)
                    for (size_t j = 0; j < HD; j++) *mat_at(op, i, (g * G + k) * HD + j) = *mat_at(Ro[k], i, j);
        }
        mat_free(Lv);
        for (size_t k = 0; k < G; k++) { mat_free(Ro[k]); Ro[k] = NULL; }
    }
    free(Ro);
    if (rc != AL_OK) { mat_free(vp); mat_free(op); vp = op = NULL; }
    *vpp = vp;
    *opp = op;
    return rc;
}

/* A Llama-layout demo: its dims, its name (the RNG streams of its planted heads and the provenance
 * in config.json) and how its keys and values are made. demo-llama and demo-kvnorm are two rows. */
typedef struct LlamaSpec {
    const char *kind;
    size_t D, H, KV, HD, inter;
    int layers, vocab;
    syn_pair_fn vo;
    /* k_proj (KV HD x D) of layer L, named name; NULL: Gaussian with element RMS 1 / sqrt(D) */
    Mat *(*k_proj)(const struct LlamaSpec *sp, unsigned long seed, int L, const char *name);
    double v_scale;       /* v_proj times this, o_proj divided by it (the VO maps stay the same) */
} LlamaSpec;

/* v_proj (KV HD x D) times v_scale, o_proj (D x H HD) divided by it. */
static void scale_vo(const LlamaSpec *sp, Mat *vp, Mat *op) {
    if (sp->v_scale == 1.0) return;
    for (size_t i = 0; i < vp->rows * vp->cols; i++) vp->data[i] = (float)(vp->data[i] * sp->v_scale);
    for (size_t i = 0; i < op->rows * op->cols; i++) op->data[i] = (float)(op->data[i] / sp->v_scale);
}

static int llama_layer(SynList *l, const SynthOptions *o, const void *spec, int L) {
    const LlamaSpec *sp = spec;
    const dt_type dt = o->dtype;
    const size_t D = sp->D, H = sp->H, KV = sp->KV, HD = sp->HD;
    const GqaDims dims = {D, H, KV, HD};
    char name[160];
    Mat *vp, *op;
    int rc = syn_gqa_vo(o->seed, sp->kind, L, &dims, sp->vo, &vp, &op);
    if (rc != AL_OK) return rc;
    scale_vo(sp, vp, op);
#define ADD(role, nd, mat) \
    (syn_name(FAM_LLAMA, role, L, "weight", name, sizeof name), synlist_add(l, name, nd, mat, dt))
#define ADD_GAUSS(role, r, c, sd) \
    (syn_name(FAM_LLAMA, role, L, "weight", name, sizeof name), \
     synlist_add(l, name, 2, syn_gauss_named(o->seed, name, r, c, sd), dt))
    const double sd_d = 1 / sqrt((double)D);
    rc = ADD(ROLE_NORM_ATTN_IN, 1, syn_vec_const(D, 1));
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_Q, H * HD, D, sd_d);
    if (rc == AL_OK && !sp->k_proj) rc = ADD_GAUSS(ROLE_K, KV * HD, D, sd_d);
    else if (rc == AL_OK) {
        syn_name(FAM_LLAMA, ROLE_K, L, "weight", name, sizeof name);
        rc = synlist_add(l, name, 2, sp->k_proj(sp, o->seed, L, name), dt);
    }
    if (rc == AL_OK) rc = ADD(ROLE_V, 2, vp); else mat_free(vp);
    if (rc == AL_OK) rc = ADD(ROLE_O, 2, op); else mat_free(op);
    if (rc == AL_OK) rc = ADD(ROLE_NORM_FFN_IN, 1, syn_vec_const(D, 1));
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_FFN_GATE, sp->inter, D, sd_d);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_FFN_UP, sp->inter, D, sd_d);
    if (rc == AL_OK) rc = ADD_GAUSS(ROLE_FFN_DOWN, D, sp->inter, 1 / sqrt((double)sp->inter));
#undef ADD
#undef ADD_GAUSS
    return rc;
}

static cJSON *llama_config(const SynthOptions *o, const LlamaSpec *sp) {
    cJSON *c = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("LlamaForCausalLM"));
    cJSON_AddFalseToObject(c, "attention_bias");
    syn_add_num(c, "attention_dropout", 0.0);
    syn_add_num(c, "bos_token_id", 1);
    syn_add_num(c, "eos_token_id", 2);
    syn_add_num(c, "head_dim", (double)sp->HD);
    syn_add_str(c, "hidden_act", "silu");
    syn_add_num(c, "hidden_size", (double)sp->D);
    syn_add_num(c, "initializer_range", 0.02);
    syn_add_num(c, "intermediate_size", (double)sp->inter);
    syn_add_num(c, "max_position_embeddings", 2048);
    cJSON_AddFalseToObject(c, "mlp_bias");
    syn_add_str(c, "model_type", "llama");
    syn_add_num(c, "num_attention_heads", (double)sp->H);
    syn_add_num(c, "num_hidden_layers", sp->layers);
    syn_add_num(c, "num_key_value_heads", (double)sp->KV);
    syn_add_num(c, "rms_norm_eps", 1e-5);
    cJSON_AddNullToObject(c, "rope_scaling");
    syn_add_num(c, "rope_theta", 10000);
    cJSON_AddFalseToObject(c, "tie_word_embeddings");
    syn_add_str(c, "torch_dtype", o->dtype == DT_F32 ? "float32" : "bfloat16");
    syn_add_num(c, "vocab_size", sp->vocab);
    syn_add_provenance(c, sp->kind, o->seed, o->dtype);
    return c;
}

static int llama_tensors(SynList *l, const SynthOptions *o, const LlamaSpec *sp) {
    const size_t D = sp->D, V = (size_t)sp->vocab;
    char name[160];
    syn_name(FAM_LLAMA, ROLE_EMBED, 0, "weight", name, sizeof name);
    int rc = synlist_add(l, name, 2, syn_gauss_named(o->seed, name, V, D, 1.0), o->dtype);
    if (rc == AL_OK) rc = syn_layers(l, o, sp->layers, llama_layer, sp);
    if (rc == AL_OK)
        rc = synlist_add(l, syn_name(FAM_LLAMA, ROLE_FINAL_NORM, 0, "weight", name, sizeof name), 1,
                         syn_vec_const(D, 1), o->dtype);
    if (rc == AL_OK && syn_name(FAM_LLAMA, ROLE_LM_HEAD, 0, "weight", name, sizeof name))
        rc = synlist_add(l, name, 2, syn_gauss_named(o->seed, name, V, D, 1 / sqrt((double)D)), o->dtype);
    return rc;
}

static const LlamaSpec LLAMA_SPEC = {"demo-llama", LL_HIDDEN, LL_HEADS, LL_KV, LL_HD, LL_INTER, LL_LAYERS, LL_VOCAB,
                                     llama_vo, NULL, 1.0};

/* ================================================================ demo-kvnorm */

enum { KN_HIDDEN = 256, KN_HEADS = 8, KN_KV = 4, KN_HD = 32, KN_LAYERS = 2, KN_VOCAB = 256, KN_INTER = 512 };
#define KN_AMP 8.0          /* RMS of an outlier pair's key dims over the others' (KV head weight 1) */
#define KN_V_SCALE 0.125    /* value RMS over the ordinary key dims' */
/* The outlier RoPE frequency pairs (of HD / 2 = 16), one in each of three FreqFold-4 groups, and
 * how strongly each KV head carries them. */
static const int KN_PAIRS[] = {1, 6, 13};
static const double KN_HEAD_W[KN_KV] = {1.0, 0.35, 0.7, 0.2};

static PairSpec kvnorm_vo(int L, int g) { (void)L; (void)g; return p_random(); }

/* k_proj of demo-kvnorm (KV HD x D): Gaussian rows of RMS 1 / sqrt(D) (key RMS 1 under
 * unit-variance inputs), and on the real and imaginary rows (rotate_half: dims l and l + HD / 2) of
 * the pairs KN_PAIRS in every KV head g also KN_AMP w_g a_l and KN_AMP w_g b_l, with a_l, b_l
 * Gaussian (stream "demo-kvnorm.L<L>.k.pair<l>") shared by the KV heads. That part has rank 1
 * across the heads, so RoRoPE (one PCA per frequency over the KV heads) moves it into the first
 * head's copy and leaves the others ordinary (RMS about 1). */
static Mat *kvnorm_k_proj(const LlamaSpec *sp, unsigned long seed, int L, const char *name) {
    const size_t D = sp->D, HD = sp->HD;
    Mat *k = syn_gauss_named(seed, name, sp->KV * HD, D, 1 / sqrt((double)D));
    for (size_t i = 0; k && i < sizeof KN_PAIRS / sizeof *KN_PAIRS; i++) {
        char stream[96];
        Rng rng;
        size_t l = (size_t)KN_PAIRS[i];
        snprintf(stream, sizeof stream, "%s.L%d.k.pair%zu", sp->kind, L, l);
        syn_rng_init(&rng, seed, stream);
        double *ab = gauss_d(&rng, 2, D, KN_AMP / sqrt((double)D));   /* rows a_l, b_l */
        if (!ab) { mat_free(k); return NULL; }
        for (size_t g = 0; g < sp->KV; g++)
            for (size_t j = 0; j < D; j++) {
                *mat_at(k, g * HD + l, j) += (float)(KN_HEAD_W[g] * ab[j]);
                *mat_at(k, g * HD + l + HD / 2, j) += (float)(KN_HEAD_W[g] * ab[D + j]);
            }
        free(ab);
    }
    return k;
}

static const LlamaSpec KVNORM_SPEC = {"demo-kvnorm", KN_HIDDEN, KN_HEADS, KN_KV, KN_HD, KN_INTER, KN_LAYERS, KN_VOCAB,
                                      kvnorm_vo, kvnorm_k_proj, KN_V_SCALE};

/* ================================================================ demo-gpt2 */

enum { G2_HIDDEN = 256, G2_HEADS = 8, G2_HD = 32, G2_LAYERS = 4, G2_VOCAB = 256, G2_POS = 128 };

static PairSpec gpt2_vo(int L, int h) {
    switch (L) {
    case 1: return h % 2 == 0 ? p_bottle(6) : p_flat();
    case 2: return p_low(4, 0.055);
    default: return p_random();
    }
}

static PairSpec gpt2_qk(int L) {
    switch (L) {
    case 1: return p_bottle(8);
    case 2: return p_low(4, 0.055);
    default: return p_random();
    }
}

static int gpt2_layer(SynList *l, const SynthOptions *o, const void *spec, int L) {
    (void)spec;
    const dt_type dt = o->dtype;
    const size_t D = G2_HIDDEN, H = G2_HEADS, HD = G2_HD;
    char name[160], stream[64];
    /* Conv1D stores (in, out): c_attn (D, 3D) = [Q | K | V] columns; c_proj (D, D), rows h*HD.. = W_O[h] */
    Mat *ca = mat_new(D, 3 * D), *cp = mat_new(D, D);
    int rc = ca && cp ? AL_OK : AL_ERR;
    for (size_t h = 0; rc == AL_OK && h < H; h++) {
        Rng rng;
        Mat *Lv = NULL, *Ro = NULL, *Lk = NULL, *Rq = NULL;
        PairSpec vo = gpt2_vo(L, (int)h), qk = gpt2_qk(L);
        snprintf(stream, sizeof stream, "demo-gpt2.L%d.h%zu.vo", L, h);
        syn_rng_init(&rng, o->seed, stream);
        rc = syn_gen_pair(&rng, &vo, D, D, HD, 1, 1 / sqrt((double)D), 1 / sqrt((double)D), &Lv, &Ro);
        snprintf(stream, sizeof stream, "demo-gpt2.L%d.h%zu.qk", L, h);
        syn_rng_init(&rng, o->seed, stream);
        if (rc == AL_OK) rc = syn_gen_pair(&rng, &qk, D, D, HD, 1, 1 / sqrt((double)D), 1 / sqrt((double)D), &Lk, &Rq);
        if (rc == AL_OK)
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < HD; j++) {
                    *mat_at(ca, i, h * HD + j) = *mat_at(Rq, i, j);          /* W_Q[h] */
                    *mat_at(ca, i, D + h * HD + j) = *mat_at(Lk, i, j);      /* W_K[h] */
                    *mat_at(ca, i, 2 * D + h * HD + j) = *mat_at(Lv, i, j);  /* W_V[h] */
                    *mat_at(cp, h * HD + j, i) = *mat_at(Ro, i, j);          /* W_O[h] = Ro^T */
                }
        mat_free(Lv); mat_free(Ro); mat_free(Lk); mat_free(Rq);
    }
    if (rc != AL_OK) { mat_free(ca); mat_free(cp); return rc; }
#define ADD(role, what, nd, mat) \
    (syn_name(FAM_GPT2, role, L, what, name, sizeof name), synlist_add(l, name, nd, mat, dt))
#define GAUSS(role, what, r, c, sd) \
    (syn_name(FAM_GPT2, role, L, what, name, sizeof name), syn_gauss_named(o->seed, name, r, c, sd))
    rc = ADD(ROLE_NORM_ATTN_IN, "weight", 1, syn_vec_const(D, 1));
    if (rc == AL_OK) rc = ADD(ROLE_NORM_ATTN_IN, "bias", 1, syn_vec_const(D, 0));
    if (rc == AL_OK) rc = ADD(ROLE_QKV, "weight", 2, ca); else mat_free(ca);
    if (rc == AL_OK) rc = ADD(ROLE_QKV, "bias", 1, GAUSS(ROLE_QKV, "bias", 1, 3 * D, 0.02));
    if (rc == AL_OK) rc = ADD(ROLE_O, "weight", 2, cp); else mat_free(cp);
    if (rc == AL_OK) rc = ADD(ROLE_O, "bias", 1, GAUSS(ROLE_O, "bias", 1, D, 0.02));
    if (rc == AL_OK) rc = ADD(ROLE_NORM_FFN_IN, "weight", 1, syn_vec_const(D, 1));
    if (rc == AL_OK) rc = ADD(ROLE_NORM_FFN_IN, "bias", 1, syn_vec_const(D, 0));
    if (rc == AL_OK) rc = ADD(ROLE_FFN_UP, "weight", 2, GAUSS(ROLE_FFN_UP, "weight", D, 4 * D, 1 / sqrt((double)D)));
    if (rc == AL_OK) rc = ADD(ROLE_FFN_UP, "bias", 1, GAUSS(ROLE_FFN_UP, "bias", 1, 4 * D, 0.02));
    if (rc == AL_OK) rc = ADD(ROLE_FFN_DOWN, "weight", 2, GAUSS(ROLE_FFN_DOWN, "weight", 4 * D, D, 1 / sqrt(4.0 * D)));
    if (rc == AL_OK) rc = ADD(ROLE_FFN_DOWN, "bias", 1, GAUSS(ROLE_FFN_DOWN, "bias", 1, D, 0.02));
#undef ADD
#undef GAUSS
    return rc;
}

static cJSON *gpt2_config(const SynthOptions *o) {
    cJSON *c = cJSON_CreateObject();
    syn_add_str(c, "activation_function", "gelu_new");
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    syn_add_num(c, "attn_pdrop", 0.1);
    syn_add_num(c, "bos_token_id", 0);
    syn_add_num(c, "embd_pdrop", 0.1);
    syn_add_num(c, "eos_token_id", 0);
    syn_add_num(c, "initializer_range", 0.02);
    syn_add_num(c, "layer_norm_epsilon", 1e-5);
    syn_add_str(c, "model_type", "gpt2");
    syn_add_num(c, "n_ctx", G2_POS);
    syn_add_num(c, "n_embd", G2_HIDDEN);
    syn_add_num(c, "n_head", G2_HEADS);
    cJSON_AddNullToObject(c, "n_inner");
    syn_add_num(c, "n_layer", G2_LAYERS);
    syn_add_num(c, "n_positions", G2_POS);
    syn_add_num(c, "resid_pdrop", 0.1);
    cJSON_AddTrueToObject(c, "scale_attn_weights");
    cJSON_AddTrueToObject(c, "tie_word_embeddings");
    syn_add_str(c, "torch_dtype", o->dtype == DT_F32 ? "float32" : "bfloat16");
    syn_add_num(c, "vocab_size", G2_VOCAB);
    syn_add_provenance(c, "demo-gpt2", o->seed, o->dtype);
    return c;
}

static int gpt2_tensors(SynList *l, const SynthOptions *o) {
    char name[160];
    syn_name(FAM_GPT2, ROLE_EMBED, 0, "weight", name, sizeof name);
    int rc = synlist_add(l, name, 2, syn_gauss_named(o->seed, name, G2_VOCAB, G2_HIDDEN, 0.1), o->dtype);
    if (rc == AL_OK && syn_name(FAM_GPT2, ROLE_POS_EMBED, 0, "weight", name, sizeof name))
        rc = synlist_add(l, name, 2, syn_gauss_named(o->seed, name, G2_POS, G2_HIDDEN, 0.01), o->dtype);
    if (rc == AL_OK) rc = syn_layers(l, o, G2_LAYERS, gpt2_layer, NULL);
    if (rc == AL_OK)
        rc = synlist_add(l, syn_name(FAM_GPT2, ROLE_FINAL_NORM, 0, "weight", name, sizeof name), 1,
                         syn_vec_const(G2_HIDDEN, 1), o->dtype);
    if (rc == AL_OK)
        rc = synlist_add(l, syn_name(FAM_GPT2, ROLE_FINAL_NORM, 0, "bias", name, sizeof name), 1,
                         syn_vec_const(G2_HIDDEN, 0), o->dtype);
    return rc;
}

/* ================================================================ public: demo models */

static const char *kind_names[] = {"demo-r1", "demo-llama", "demo-gpt2", "demo-kvnorm"};

int synth_write(const SynthOptions *opt, const char *dir) {
    if (!opt || opt->kind < SYNTH_DEMO_R1 || opt->kind > SYNTH_DEMO_KVNORM)
        return al_err("synth: unknown demo kind %d", opt ? (int)opt->kind : -1);
    const char *kind = kind_names[opt->kind];
    if (opt->dtype != DT_F32 && opt->dtype != DT_BF16 && opt->dtype != DT_F8_E4M3)
        return al_err("synth %s: dtype %s is not offered; use f32, bf16 or fp8", kind, dt_name(opt->dtype));
    if (opt->dtype == DT_F8_E4M3 && opt->kind != SYNTH_DEMO_R1)
        return al_err("synth %s: fp8 is only written for the DeepSeek layout (demo-r1), as real checkpoints are; "
                      "use f32 or bf16", kind);
    if (opt->shards < 1 || opt->shards > 99) return al_err("synth %s: shards must be 1..99, got %d", kind, opt->shards);
    SynList l = {0};
    cJSON *cfg = NULL;
    int rc;
    switch (opt->kind) {
    case SYNTH_DEMO_R1: rc = r1_tensors(&l, opt); cfg = r1_config(opt); break;
    case SYNTH_DEMO_LLAMA: rc = llama_tensors(&l, opt, &LLAMA_SPEC); cfg = llama_config(opt, &LLAMA_SPEC); break;
    case SYNTH_DEMO_KVNORM: rc = llama_tensors(&l, opt, &KVNORM_SPEC); cfg = llama_config(opt, &KVNORM_SPEC); break;
    default: rc = gpt2_tensors(&l, opt); cfg = gpt2_config(opt); break;
    }
    if (rc == AL_OK) { rc = syn_write_model(&l, cfg, dir, opt->shards); cfg = NULL; }
    cJSON_Delete(cfg);
    synlist_free(&l);
    if (rc == AL_ERR) al_err_ctx("synth %s", kind);
    return rc;
}

static const struct { const char *base; synth_kind kind; dt_type dflt; int shards; bool fp8; } demo_table[] = {
    {"demo-r1", SYNTH_DEMO_R1, DT_F8_E4M3, 3, true},
    {"demo-llama", SYNTH_DEMO_LLAMA, DT_BF16, 1, false},
    {"demo-gpt2", SYNTH_DEMO_GPT2, DT_F32, 1, false},
    {"demo-kvnorm", SYNTH_DEMO_KVNORM, DT_BF16, 1, false},
};
static const char *const demo_sufs[] = {"", "-f32", "-bf16", "-fp8"};   /* "-fp8" only where .fp8 */

bool synth_demo_name(const char *name, SynthOptions *opt) {
    if (!name) return false;
    for (size_t i = 0; i < sizeof demo_table / sizeof *demo_table; i++) {
        size_t n = strlen(demo_table[i].base);
        if (strncmp(name, demo_table[i].base, n) != 0) continue;
        const char *suf = name + n;
        dt_type dt;
        if (!*suf) dt = demo_table[i].dflt;
        else if (!strcmp(suf, "-f32")) dt = DT_F32;
        else if (!strcmp(suf, "-bf16")) dt = DT_BF16;
        else if (!strcmp(suf, "-fp8") && demo_table[i].fp8) dt = DT_F8_E4M3;
        else continue;
        if (opt) *opt = (SynthOptions){demo_table[i].kind, dt, demo_table[i].shards, SYNTH_DEFAULT_SEED};
        return true;
    }
    return false;
}

bool synth_demo_at(size_t i, char *buf, size_t cap) {
    const size_t nsuf = sizeof demo_sufs / sizeof *demo_sufs;
    for (size_t k = 0; k < sizeof demo_table / sizeof *demo_table * nsuf; k++) {
        const char *suf = demo_sufs[k % nsuf];
        if (!strcmp(suf, "-fp8") && !demo_table[k / nsuf].fp8) continue;
        if (i-- == 0) { snprintf(buf, cap, "%s%s", demo_table[k / nsuf].base, suf); return true; }
    }
    return false;
}

const char *synth_kind_name(synth_kind k) {
    return k >= SYNTH_DEMO_R1 && k <= SYNTH_DEMO_KVNORM ? kind_names[k] : "?";
}

/* ================================================================ DeepSeek-R1 shapes */

enum { DS_HIDDEN = 7168, DS_HEADS = 128, DS_QLORA = 1536, DS_KVLORA = 512, DS_NOPE = 128, DS_ROPE = 64, DS_V = 128,
       DS_LAYERS_PER_SHARD = 2, DS_LOWV_EVERY = 8, DS_LOWV_RANK = 16 };

/* 256 E4M3 codes of N(0, 64^2) deviates (a fixed table; bytes index it). */
static void ds_code_table(uint8_t table[256]) {
    Rng rng;
    syn_rng_init(&rng, 0x5eed, "ds-r1-shape codes");
    for (int i = 0; i < 256; i++) table[i] = dt_f32_to_e4m3((float)(64.0 * syn_rng_gauss(&rng)));
}

/* One FP8 weight of ds-r1-shape and where its bytes come from: the stream (seed, name) draws
 * the codes, then the block scales, then the planted heads. The weight and its scales are lazy
 * tensors (each computed only while its shard is written, one at a time), so a shard of R1 shapes
 * never sits in memory: each fill replays the stream, skipping the other's draws. */
typedef struct {
    unsigned long seed;
    uint8_t table[256];   /* the E4M3 codes bytes index (ds_code_table) */
    char name[96];        /* "<prefix><what>.weight": the RNG stream */
    size_t R, C;
    double rms;
    bool plant;           /* kv_b_proj: heads h % 8 == 0 get the planted V */
} DsWeight;

/* Skips n draws of rng_u64 (splitmix64's state advances by one constant per draw). */
static void rng_skip(Rng *r, uint64_t n) { r->s += n * 0x9e3779b97f4a7c15ULL; }

/* n table codes, 8 per draw (one draw more for the tail: n / 8 + 1 draws). */
static void ds_codes(Rng *rng, const uint8_t table[256], uint8_t *q, size_t n) {
    size_t i = 0;
    while (i + 8 <= n) {
        uint64_t u = rng_u64(rng);
        for (int k = 0; k < 8; k++) q[i++] = table[(u >> (8 * k)) & 0xff];
    }
    uint64_t u = rng_u64(rng);
    for (int k = 0; i < n; k++) q[i++] = table[(u >> (8 * k)) & 0xff];
}

/* Replaces the V rows of head h in kv_b_proj codes (rows h*256+128 .. +128, 512 columns, i.e.
 * 4 whole scale blocks) by an exact rank-16 signed-Hadamard pattern: codes of 16 * (integers in
 * [-16, 16]), all exactly representable, with one scale for the 4 blocks. q or scale may be NULL
 * (that half is not computed; the scales do not depend on the stream). */
static int ds_plant_v(Rng *rng, uint8_t *q, float *scale, size_t h, double rms) {
    const size_t V = DS_V, KL = DS_KVLORA, r = DS_LOWV_RANK, row0 = h * (DS_NOPE + DS_V) + DS_NOPE;
    /* entries have RMS 4 (sums of 16 signs), codes RMS 64 */
    for (size_t j = 0; scale && j < KL / DT_FP8_BLOCK; j++)
        scale[(row0 / DT_FP8_BLOCK) * (KL / DT_FP8_BLOCK) + j] = (float)(rms / 64.0);
    if (!q) return AL_OK;
    double *hs = signed_hadamard(rng, V, r), *hk = signed_hadamard(rng, KL, r);
    double *w = hs && hk ? mul_abt(hs, hk, V, KL, r, 1.0) : NULL;   /* (V x KL) = W_V^T, integers */
    if (w)
        for (size_t i = 0; i < V; i++)
            for (size_t j = 0; j < KL; j++) q[(row0 + i) * KL + j] = dt_f32_to_e4m3((float)(16.0 * w[i * KL + j]));
    free(hs);
    free(hk);
    int rc = w ? AL_OK : AL_ERR;
    free(w);
    return rc;
}

/* Computes the codes (q: R*C bytes) or the block scales (scale: scale_inv = rms / 64 * (1 +- 25%)
 * per block, so the dequantized element RMS is about rms) of d; the other is NULL. */
static int ds_gen(const DsWeight *d, uint8_t *q, float *scale) {
    Rng rng;
    syn_rng_init(&rng, d->seed, d->name);
    size_t n = d->R * d->C, ns = dt_fp8_nblocks(d->R) * dt_fp8_nblocks(d->C);
    if (q) ds_codes(&rng, d->table, q, n);
    else rng_skip(&rng, n / 8 + 1);
    for (size_t b = 0; b < ns; b++) {
        double u = syn_rng_unit(&rng);
        if (scale) scale[b] = (float)(d->rms / 64.0 * (0.75 + 0.5 * u));
    }
    int rc = AL_OK;
    for (size_t h = 0; d->plant && rc == AL_OK && h < DS_HEADS; h += DS_LOWV_EVERY) rc = ds_plant_v(&rng, q, scale, h, d->rms);
    return rc;
}

static int ds_fill_codes(void *ud, void *dst, size_t nbytes) { (void)nbytes; return ds_gen(ud, dst, NULL); }
static int ds_fill_scales(void *ud, void *dst, size_t nbytes) { (void)nbytes; return ds_gen(ud, NULL, dst); }

/* Adds one FP8 weight "<base>.weight" (R x C) of table codes and its "<base>.weight_scale_inv"
 * to w, both lazy. */
static int ds_add_weight(CkptWriter *w, unsigned long seed, const uint8_t table[256], const char *base, size_t R,
                         size_t C, double rms, bool plant) {
    size_t sr = dt_fp8_nblocks(R), sc = dt_fp8_nblocks(C), shape[2] = {R, C}, sshape[2] = {sr, sc};
    DsWeight *d = al_calloc(1, sizeof *d, base), *ds = al_malloc(sizeof *ds, base);
    char *sname = al_asprintf("%s.weight_scale_inv", base);
    if (!d || !ds || !sname) { free(d); free(ds); free(sname); return AL_ERR; }
    *d = (DsWeight){.seed = seed, .R = R, .C = C, .rms = rms, .plant = plant};
    memcpy(d->table, table, sizeof d->table);
    snprintf(d->name, sizeof d->name, "%s.weight", base);
    *ds = *d;
    int rc = ckpt_add_lazy(w, d->name, DT_F8_E4M3, 2, shape, R * C, ds_fill_codes, d);
    if (rc == AL_OK) rc = ckpt_add_lazy(w, sname, DT_F32, 2, sshape, sr * sc * sizeof(float), ds_fill_scales, ds);
    else free(ds);
    free(sname);
    return rc;
}

/* Adds a BF16 norm weight of ones, "<base>.weight". */
static int ds_add_norm(CkptWriter *w, const char *base, size_t n) {
    uint16_t *b = al_malloc3(n, 1, sizeof(uint16_t), base);
    char *name = al_asprintf("%s.weight", base);
    int rc = b && name ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        for (size_t i = 0; i < n; i++) b[i] = dt_f32_to_bf16(1.0f);
        rc = ckpt_add_owned(w, name, DT_BF16, 1, &n, b, n * sizeof(uint16_t));
        b = NULL;
    }
    free(b);
    free(name);
    return rc;
}

static cJSON *ds_shape_config(int layers, unsigned long seed) {
    return ds_config(&(DsConfig){
        .hidden = DS_HIDDEN, .heads = DS_HEADS, .qlora = DS_QLORA, .kvlora = DS_KVLORA, .nope = DS_NOPE,
        .rope = DS_ROPE, .v = DS_V, .layers = layers, .vocab = 129280, .inter = 18432, .max_pos = 163840,
        .first_dense = 3, .moe_inter = 2048, .n_group = 8, .n_routed = 256, .per_tok = 8, .nextn = 1,
        .topk_group = 4, .routed_scale = 2.5, .hub = true, .kind = "ds-r1-shape", .seed = seed,
        .dtype = DT_F8_E4M3});
}

/* Adds layer L's attention tensors (R1 shapes) to w. */
static int ds_layer(CkptWriter *w, unsigned long seed, const uint8_t table[256], int L) {
    char n[160];
#define NAME(role) syn_name(FAM_DEEPSEEK, role, L, NULL, n, sizeof n)
    const size_t D = DS_HIDDEN, H = DS_HEADS;
    /* element RMS 1/sqrt(fan-in) */
    const double sd_d = 1 / sqrt((double)D), sd_q = 1 / sqrt((double)DS_QLORA), sd_kv = 1 / sqrt((double)DS_KVLORA),
                 sd_o = 1 / sqrt((double)(H * DS_V));
    int rc = ds_add_weight(w, seed, table, NAME(ROLE_Q_A), DS_QLORA, D, sd_d, false);
    if (rc == AL_OK) rc = ds_add_norm(w, NAME(ROLE_Q_A_NORM), DS_QLORA);
    if (rc == AL_OK) rc = ds_add_weight(w, seed, table, NAME(ROLE_Q_B), H * (DS_NOPE + DS_ROPE), DS_QLORA, sd_q, false);
    if (rc == AL_OK) rc = ds_add_weight(w, seed, table, NAME(ROLE_KV_A), DS_KVLORA + DS_ROPE, D, sd_d, false);
    if (rc == AL_OK) rc = ds_add_norm(w, NAME(ROLE_KV_A_NORM), DS_KVLORA);
    if (rc == AL_OK) rc = ds_add_weight(w, seed, table, NAME(ROLE_KV_B), H * (DS_NOPE + DS_V), DS_KVLORA, sd_kv, true);
    if (rc == AL_OK) rc = ds_add_weight(w, seed, table, NAME(ROLE_O), D, H * DS_V, sd_o, false);
#undef NAME
    return rc;
}

int synth_ds_r1_shape(const char *dir, int layers, unsigned long seed) {
    if (layers < 1 || layers > 61) return al_err("synth ds-r1-shape: layers must be 1..61 (R1 has 61), got %d", layers);
    uint8_t table[256];
    ds_code_table(table);
    CkptWriter *w;
    if (begin_dir(dir, true, &w)) return al_err_ctx("synth ds-r1-shape");
    int rc = AL_OK;
    for (int L = 0; rc == AL_OK && L < layers; L++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        rc = ds_layer(w, seed, table, L);
        if (rc == AL_OK && ((L + 1) % DS_LAYERS_PER_SHARD == 0 || L == layers - 1)) rc = ckpt_shard_end(w);
        al_progress("layer", (size_t)L + 1, (size_t)layers);
    }
    if (rc == AL_OK) rc = write_config(w, ds_shape_config(layers, seed));
    if (rc == AL_OK) rc = ckpt_commit(w, NULL);
    else ckpt_abort(w);
    if (rc == AL_ERR) al_err_ctx("synth ds-r1-shape");
    return rc;
}
