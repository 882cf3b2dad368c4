/* farr.c -- Fuse and Rank Reduce (seed 000): fused head pairs of a model, their spectra and
 * effective ranks per layer, truncate-and-split plans with GQA group stacking, parameter and
 * KV-cache accounting, and the session cache (FarrState). See farr.h for the math. */
#define _GNU_SOURCE
#include "farr.h"
#include "farr_internal.h"
#include "analyses.h"
#include "fused_core.h"
#include "attn_eval.h"
#include "gram.h"
#include "gram_ahead.h"
#include "layersel.h"
#include "pad.h"
#include "pool.h"
#include "rope.h"
#include "symeig.h"
#include "sweep.h"

#include <cblas.h>
#include <immintrin.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ names */

const char *farr_kind_name(farr_kind k) { return k == FARR_VO ? "vo" : "qk"; }
const char *farr_side_name(farr_kind k, int side) {
    return k == FARR_VO ? (side == 0 ? "V" : "O") : (side == 0 ? "Q" : "K");
}
const char *farr_fused_name(farr_kind k) { return k == FARR_VO ? "VO" : "QK"; }

const char *farr_policy_name(farr_policy p) {
    return p == FARR_POLICY_HEAD ? "head" : p == FARR_POLICY_LAYER_MAX ? "layer-max" : "model-max";
}

int farr_policy_parse(const char *s, farr_policy *out) {
    if (strcmp(s, "head") == 0) *out = FARR_POLICY_HEAD;
    else if (strcmp(s, "layer-max") == 0) *out = FARR_POLICY_LAYER_MAX;
    else if (strcmp(s, "model-max") == 0) *out = FARR_POLICY_MODEL_MAX;
    else return al_err("unknown truncation policy '%s': use head, layer-max or model-max", s);
    return AL_OK;
}

/* ================================================================ one head */

int farr_fuse_mode(const ModelConfig *c, farr_kind kind, int offset, head_part *part, bool *rotate_k) {
    *part = PART_ALL;
    *rotate_k = false;
    if (kind == FARR_VO) {
        if (offset != FARR_NO_OFFSET)
            return al_err("offset applies to qk only: V and O have no RoPE between them");
        return AL_OK;
    }
    bool has_rope = c->rope != ROPE_NONE && c->qk_rope_dim > 0;
    if (!has_rope && cfg_is_mla(c) && c->qk_nope_dim > 0 && offset == FARR_NO_OFFSET) {
        *part = PART_NOPE;          /* MLA without RoPE (Kimi-Linear): the latent's part; the shared key reads x */
        return AL_OK;
    }
    if (!has_rope) {
        if (offset != FARR_NO_OFFSET)
            return al_err("this %s model has no RoPE: its QK heads fuse exactly, without an offset",
                          c->model_type);
        return AL_OK;                                   /* GPT-2: full QK */
    }
    if (c->qk_nope_dim > 0) {
        if (offset != FARR_NO_OFFSET)
            return al_err("this %s model has partial RoPE: qk fuses its %d NoPE column%s exactly; an "
                          "offset is only for full-RoPE families", c->model_type, c->qk_nope_dim, al_s(c->qk_nope_dim));
        *part = PART_NOPE;                              /* MLA, partial rotary: NoPE columns only */
        return AL_OK;
    }
    if (offset == FARR_NO_OFFSET)
        return al_err("QK fusion refused: this %s model applies RoPE to all %d Q/K dim%s, a rotation "
                      "that depends on the token position and sits between W_Q and W_K, so W_Q W_K^T "
                      "is not the map the model computes (seed 000, A.3). Add `offset D` to fuse at a "
                      "fixed position offset (RoPE at p=0 on Q, p=D on K) -- analysis only, it cannot "
                      "be truncated", c->model_type, c->qk_rope_dim, al_s(c->qk_rope_dim));
    if (offset < 0) return al_err("offset must be >= 0 (got %d)", offset);
    *rotate_k = true;
    return AL_OK;
}

bool farr_qk_dims(const ModelConfig *c, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!c->rope_first || c->qk_nope_dim <= 0 || c->qk_rope_dim <= 0) return false;
    int n0 = cfg_nope_col(c), r0 = cfg_rope_col(c), d = cfg_d_qk(c);
    snprintf(buf, cap, "NoPE dims %d-%d of each head (%d of %d; dims %d-%d carry RoPE)", n0, n0 + c->qk_nope_dim - 1,
             c->qk_nope_dim, d, r0, r0 + c->qk_rope_dim - 1);
    return true;
}

/* The whole W_Q of query head `head` (side 0) or W_K of its KV head (side 1). */
static int whole_side(Model *m, int side, int layer, int head, Mat **W) {
    if (model_check_head(m, HK_Q, layer, head)) return AL_ERR;
    return side == 0 ? model_head(m, HK_Q, layer, head, PART_ALL, W)
                     : model_head(m, HK_K, layer, cfg_kv_group(model_layer_cfg(m, layer), head), PART_ALL, W);
}

int farr_normed_side(Model *m, int side, int layer, int head, Spectrum **out) {
    *out = NULL;
    if (m->cfg.qk_norm == QKN_NONE) return AL_OK;
    Mat *W = NULL;
    int rc = whole_side(m, side, layer, head, &W);
    if (rc == AL_OK) rc = spectra_svd(W, 0, out);
    mat_free(W);
    return rc;
}

int farr_side_alone(Model *m, int side, int layer, int head, int offset, Mat **W) {
    const ModelConfig *c = model_layer_cfg(m, layer);
    *W = NULL;
    bool full_rope = cfg_layer_rope(c, layer) && c->qk_nope_dim == 0;
    if (c->qk_norm == QKN_NONE && !(full_rope && offset == FARR_NO_OFFSET)) return AL_OK;
    return whole_side(m, side, layer, head, W);
}

/* farr_fuse_mode on a loaded model, for layer (-1: every layer alike): QK fusion first asks
 * core/analyses (per-head Q/K norms between the projections and the scores make W_Q W_Kᵀ the wrong
 * map). A layer without RoPE in a RoPE model (SmolLM3's every fourth) fuses its whole heads
 * exactly: no offset is needed, and one given is not applied there. */
static int fuse_mode(const Model *m, farr_kind kind, int layer, int offset, head_part *part, bool *rotate_k) {
    if (kind != FARR_VO && analysis_check(m, AN_RANKS_QK) != AL_OK) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    if (kind != FARR_VO && layer >= 0 && c->rope != ROPE_NONE && !cfg_layer_rope(c, layer)) {
        if (offset != FARR_NO_OFFSET && offset < 0) return al_err("offset must be >= 0 (got %d)", offset);
        *part = PART_ALL;
        *rotate_k = false;
        return AL_OK;
    }
    int rc = farr_fuse_mode(c, kind, offset, part, rotate_k);
    char nope[128], msg[1024];
    int n = rc != AL_OK && kind != FARR_VO ? cfg_nope_layers(c, nope, sizeof nope) : 0;
    if (n) {
        snprintf(msg, sizeof msg, "%s; layer%s %s ha%s no RoPE (no_rope_layers) and fuse%s exactly without one",
                 al_errmsg(), al_s(n), nope, n == 1 ? "s" : "ve", n == 1 ? "s" : "");
        al_err("%s", msg);
    }
    return rc;
}

void farr_rope_rotate(Mat *W, rope_layout layout, double theta, double p) {
    size_t d = W->cols;
    if (layout == ROPE_NONE || d < 2 || p == 0) return;
    double *f = attn_rope_freqs((int)d, theta);
    if (f) rope_rotate_rows(W->data, W->rows, d, (int)d, layout, f, p, 1.0);
    free(f);
}

/* The factors of head h with the layer already loaded (thread-safe after model_layer_load). */
static int head_factors_loaded(Model *m, farr_kind kind, int layer, int head, head_part part,
                               bool rotate_k, int offset, Mat **A, Mat **B, spectra_op *op) {
    const ModelConfig *c = model_layer_cfg(m, layer);
    int g = cfg_kv_group(c, head);
    *A = *B = NULL;
    int rc;
    if (kind == FARR_VO) {
        *op = SPECTRA_AB;
        rc = model_head(m, HK_V, layer, g, PART_ALL, A);
        if (rc == AL_OK) rc = model_head(m, HK_O, layer, head, PART_ALL, B);
    } else {
        *op = SPECTRA_ABT;
        rc = model_head(m, HK_Q, layer, head, part, A);
        if (rc == AL_OK) rc = model_head(m, HK_K, layer, g, part, B);
        if (rc == AL_OK && rotate_k) farr_rope_rotate(*B, c->rope, c->rope_theta, (double)offset);
    }
    if (rc != AL_OK) { mat_free(*A); mat_free(*B); *A = *B = NULL; }
    return rc;
}

int farr_head_factors(Model *m, farr_kind kind, int layer, int head, int offset,
                      Mat **A, Mat **B, spectra_op *op) {
    *A = *B = NULL;
    head_part part;
    bool rot;
    if (fuse_mode(m, kind, layer, offset, &part, &rot) != AL_OK) return AL_ERR;
    if (model_check_head(m, HK_Q, layer, head) != AL_OK) return AL_ERR;
    /* one head: its blocks straight from the checkpoint (model_head), not the whole layer */
    return head_factors_loaded(m, kind, layer, head, part, rot, offset, A, B, op);
}

/* NaN/Inf in a head's factors: the error `ranks` gives for it, before LAPACK refuses the input. */
static int fused_finite(const FarrFused *f) {
    const Mat *M[2] = {f->A, f->B};
    for (int i = 0; i < 2; i++) {
        size_t at = mat_first_nonfinite(M[i]);
        if (at != (size_t)-1)
            return al_err("layer %d head %d (%s): its %s holds NaN/Inf (first at [%zu, %zu]): that head's spectra "
                          "are undefined (check the checkpoint; the warning names the tensor)", f->layer, f->head,
                          farr_fused_name(f->kind), farr_side_name(f->kind, i), at / M[i]->cols, at % M[i]->cols);
    }
    return AL_OK;
}

int farr_fuse(Model *m, farr_kind kind, int layer, int head, int offset, FarrFused **out) {
    *out = NULL;
    FarrFused *f = al_calloc(1, sizeof *f, "a fused head");
    if (!f) return AL_ERR;
    *f = (FarrFused){ .model = m, .kind = kind, .layer = layer, .head = head, .offset = offset };
    int rc = farr_head_factors(m, kind, layer, head, offset, &f->A, &f->B, &f->op);
    if (rc == AL_OK) rc = fused_finite(f);
    if (rc == AL_OK) rc = spectra_product_svd(f->A, f->B, f->op, SPECTRA_VECTORS, &f->s, &f->sa, &f->sb);
    if (rc != AL_OK) { farr_fused_free(f); return rc; }
    *out = f;
    return AL_OK;
}

void farr_fused_free(FarrFused *f) {
    if (!f) return;
    mat_free(f->A); mat_free(f->B);
    spectrum_free(f->s); spectrum_free(f->sa); spectrum_free(f->sb);
    free(f);
}

/* ================================================================ a layer's spectra */

void farr_layer_free(FarrLayer *l) {
    if (!l) return;
    for (int h = 0; h < l->n_heads; h++) {
        if (l->a) spectrum_free(l->a[h]);
        if (l->b) spectrum_free(l->b[h]);
        if (l->fused) spectrum_free(l->fused[h]);
    }
    free(l->a); free(l->b); free(l->fused); free(l->eps);
    free(l);
}

typedef struct {
    Model *m;
    FarrLayer *l;
    head_part part;
    bool rot;
} LayerJob;

static int layer_task(size_t h, int worker, void *ud) {
    (void)worker;
    LayerJob *j = ud;
    Mat *A, *B;
    spectra_op op;
    if (head_factors_loaded(j->m, j->l->kind, j->l->layer, (int)h, j->part, j->rot, j->l->offset,
                            &A, &B, &op) != AL_OK)
        return AL_ERR;
    int rc = spectra_product_svd(A, B, op, 0, &j->l->fused[h], &j->l->a[h], &j->l->b[h]);
    mat_free(A); mat_free(B);
    if (rc != AL_OK) return al_err_ctx("layer %d head %d (%s)", j->l->layer, (int)h, farr_fused_name(j->l->kind));
    return AL_OK;
}

/* ---------------------------------------------------------------- the stream route */

/* G' = Rᵀ G R for K' = K R, R the RoPE rotation at position p (as farr_rope_rotate applies it to
 * the columns of K). G is k x k. */
static void gram_rotate(double *G, size_t k, rope_layout layout, double theta, double p) {
    if (layout == ROPE_NONE || k < 2 || p == 0) return;
    double *f = attn_rope_freqs((int)k, theta);
    if (f) rope_rotate_gram(G, k, layout, f, p);
    free(f);
}

/* One shared side of the fast route: its Gram's error bound, Frobenius norm and largest diagonal
 * entry (the bounds of fast_fused_err). */
typedef struct {
    double err, fro, dmax;
} FastSide;

typedef struct {
    Model *m;
    FarrLayer *l;
    head_part part;
    bool rot;
    bool fast;               /* the fast route: BF16/float Grams, bounds into l->eps */
    bool f32;                /* FARR_ROUTE_RANKS: its Householder reductions in float */
    size_t k;                /* the inner (head) dim of the pair */
    const size_t *gsel, *hsel;   /* the KV heads and query heads to compute (NULL: all) */
    LinGramSide **shared;    /* (n_kv) the K / V side of each group, factored */
    FastSide *fside;         /* (n_kv) the fast route's bounds of the shared sides */
    GramScratch **scr;       /* (threads) */
    double **G;              /* (threads) per worker a k x k Gram for each of job_batch heads */
    double **M, **w;         /* (threads) fast route: FAST_BATCH k x k fused cores and 2k eigenvalues */
    double **cw;             /* (threads) fast route: fused_core_lower's scratch (NULL where it does not fit) */
    SymeigWork **ew;         /* (threads) fast route: the eigen-solver's scratch */
    size_t ng, nh;           /* KV heads of phase 1, query heads of phase 2 */
    int T;                   /* threads */
} StreamJob;

/* Heads per task on the fast route: their matrices (a shared side each in phase 1, an own side and
 * a fused core each in phase 2) go to one solve_values call, which symeig solves in vector lanes,
 * 16 at a time (core/linalg/symeig.h: ~3x faster per matrix than one at a time). */
#define FAST_BATCH 16

static size_t job_batch(const StreamJob *j) { return j->fast ? FAST_BATCH : 1; }
static size_t job_tasks(const StreamJob *j, size_t n) { return (n + job_batch(j) - 1) / job_batch(j); }

/* ---------------------------------------------------------------- the fast route's solves */

/* The fast route's values-only eigen-solves, every one of them: the n symmetric matrices A[i]
 * (k[i] x k[i], full storage, column-major; not modified) to their ascending eigenvalues w[i], one
 * worker's batch (FAST_BATCH heads' own sides and fused cores, or shared sides). Matrices of one
 * size go to symeig together (batched in vector lanes; its error within eig_bwd's bound below,
 * or on FARR_ROUTE_RANKS, the Householder reduction in float, eig_f's). */
static int solve_values(SymeigWork *ws, size_t n, double *const *A, const size_t *k, double *const *w, bool f32) {
    const double *a[2 * FAST_BATCH];
    double *v[2 * FAST_BATCH];
    bool done[2 * FAST_BATCH] = {0};
    if (n > 2 * FAST_BATCH) return al_err("internal: %zu matrices in one solve batch", n);
    for (size_t i = 0; i < n; i++) {
        if (done[i]) continue;
        size_t c = 0;
        for (size_t t = i; t < n; t++)
            if (!done[t] && k[t] == k[i]) { a[c] = A[t]; v[c++] = w[t]; done[t] = true; }
        if ((f32 ? symeig_values_f32_ws : symeig_values_ws)(ws, c, k[i], a, v) != AL_OK) return AL_ERR;
        for (size_t t = 0; t < c; t++)                  /* descending -> ascending */
            for (size_t x = 0, y = k[i] ? k[i] - 1 : 0; x < y; x++, y--) {
                double tmp = v[t][x]; v[t][x] = v[t][y]; v[t][y] = tmp;
            }
    }
    return AL_OK;
}

/* ---------------------------------------------------------------- the fast route's bounds */

/* The fast route solves in double on Grams G' within err (Frobenius) of the double route's G
 * (gram_compute_fast). A bound eps on the l2 distance between the sorted squared singular values
 * of the two routes (spectra_rank_certain's eps) adds up: the Grams' error, carried through the
 * Cholesky factor and the fused core, and the double rounding of both routes' Cholesky factors,
 * triangular products and eigen-solves -- some 1e-13 of the values, kept to stay honest. */

static double unit_d(void) { return ldexp(1.0, -53); }
static double gam_d(double n) { double u = unit_d(); return n * u / (1 - n * u); }
/* The backward error of a values-only eigen-solve of an n x n matrix, times its ||.||_F:
 * Householder tridiagonalization and implicit QL are backward stable with c n u; generous. */
static double eig_bwd(size_t n) { return 8.0 * (double)n * (double)n * unit_d(); }

/* The 8 sums of fro_d over n / 8 * 8 entries in one AVX-512 register: lane a the same products
 * added in the same order as the scalar loop (each product rounded on its own: no fused
 * multiply-add, so the bits are the scalar loop's). */
__attribute__((target("avx512f"))) static void fro_sums_avx512(const double *A, size_t n, double s[8]) {
    __m512d acc = _mm512_setzero_pd();
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __m512d x = _mm512_loadu_pd(A + i);
        acc = _mm512_add_pd(acc, _mm512_mul_round_pd(x, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    _mm512_storeu_pd(s, acc);
}

static double fro_d(const double *A, size_t n) {
    double s[8] = {0};       /* 8 independent sums: one chain waited 4 cycles per entry (~3 % of a sweep) */
    size_t i = 0;
    if (__builtin_cpu_supports("avx512f")) {               /* the scalar loop took 2 % of a sweep: GCC -O2 does not vectorize it */
        fro_sums_avx512(A, n, s);
        i = n / 8 * 8;
    }
    for (; i + 8 <= n; i += 8)
        for (int a = 0; a < 8; a++) s[a] += A[i + a] * A[i + a];
    for (; i < n; i++) s[0] += A[i] * A[i];
    return sqrt(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
}

/* The fast route's own solve (symeig_values_f32_ws, the reduction in float), times its ||.||_F:
 * the distance of the sorted values from the exact ones, symeig_bound_f32 (c (n + 1) 2^-24). */
static double eig_f(size_t n) { return symeig_bound_f32(n, 1.0); }

/* The bound of this route's own solve of a k x k matrix, times its ||.||_F as computed. */
static double solve_err(size_t k, bool f32) { return f32 ? eig_f(k) * (1 + 1e-6) : eig_bwd(k); }

/* A factor's spectrum: eig(G') against eig(G) (Hoffman-Wielandt), this route's solve of G'
 * (||G'||_F = fro, as computed) and the double route's of G. */
static double fast_side_err(size_t k, double err, double fro, bool f32) {
    return err + solve_err(k, f32) * fro + eig_bwd(k) * (fro + err);
}

/* The fused spectrum of the shared side a (bounds fa) against a Gram Gb' (error gberr, Frobenius
 * norm gbfro, largest eigenvalue as computed gbmax); mfro: ||M||_F of the fused core. Its squared
 * values are eig(G_B^1/2 L Lᵀ G_B^1/2) = eig(Lᵀ G_B L): L Lᵀ off P G_A Pᵀ by lerr moves them by at
 * most ||G_B||_2 lerr, G_B' off G_B by ||L||_2^2 gberr. */
static double fast_fused_err(const LinGramSide *a, const FastSide *fa, double gberr, double gbfro, double gbmax,
                             double mfro, bool f32) {
    size_t k = a->k, r = a->r;
    double bw = eig_bwd(k), ef = solve_err(k, f32), lf2 = 0;
    for (size_t j = 0; j < r; j++)
        for (size_t i = j; i < k; i++) lf2 += a->L[j * k + i] * a->L[j * k + i];
    /* Cholesky: backward error gamma_{k+2} |L||Lᵀ| -- the textbook gamma_{k+1}, one more rounding where
     * l_ij is formed as (a_ij - sum) times fl(1 / l_jj) (fused_core_cholesky, and OpenBLAS's dtrsm
     * with its inverted diagonal) --; pivoted, the Schur complement left out (k - r diagonal entries
     * below dpstrf's tolerance k eps max diag, positive semi-definite) */
    double trunc = r < k ? (double)(k - r) * (double)k * ldexp(1.0, -52) * fa->dmax : 0;
    double chol = gam_d((double)k + 2) * lf2 + trunc;
    double amax = a->s->p ? a->s->sigma[0] * a->s->sigma[0] : 0;
    double l2 = fmin(amax + ef * fa->fro + chol, lf2);            /* >= ||L||_2^2 = ||L Lᵀ||_2 */
    double gbnorm = gbmax + ef * gbfro + gberr;                   /* >= ||G_B||_2 */
    /* the triangular products, |dW| <= gamma_k |Gp||L| and the same for Lᵀ W (in double on both
     * routes: in float, spectra_gram_fused_core's bound left 64 of 1024 R1 heads open at tau
     * 0.999, more than the float products saved); a bound on the computed M's error, while both
     * solves read M's lower triangle only, mirrored: sqrt(2) times it bounds that (the lower
     * entries counted twice) */
    double trmm = 2 * M_SQRT2 * gam_d((double)k + 1) * sqrt(lf2) *
                  (sqrt(l2) * gbfro + (gbmax + ef * gbfro) * sqrt(lf2)) * (1 + 1e-3);
    /* the Grams' errors; rounding twice (this route and the double route's own); the core's two
     * solves, this route's and the double one's (mfro is ||values||_2 as computed: ||M||_F <=
     * mfro / (1 - ef)) */
    double core = f32 ? (ef + bw) * mfro / (1 - ef) : 2 * bw * mfro;
    return l2 * gberr + gbnorm * (fa->err + 2 * chol) + trmm + core * (1 + 1e-6);
}

/* The Gram of one factor of the layer into G, with the factor's row count and, on the fast route,
 * the bound of its error (gram_compute_fast). */
static int stream_gram(StreamJob *j, head_kind kind, int head, int worker, double *G, size_t *rows, double *err) {
    GramView v;
    if (gram_view(j->m, kind, j->l->layer, head, j->part, &v) != AL_OK) return AL_ERR;
    int rc = gram_view_k(&v) == j->k ? AL_OK
                                     : al_err("internal: %s head %d has inner dim %zu, expected %zu", v.tensor, head,
                                              gram_view_k(&v), j->k);
    *err = 0;
    if (rc == AL_OK) rc = j->fast ? gram_compute_fast(j->m->store, &v, j->scr[worker], G, err)
                                  : gram_compute(j->m->store, &v, j->scr[worker], G);
    *rows = gram_view_rows(&v);
    gram_view_clear(&v);
    return rc;
}

/* The fast route's own Grams of query heads h[0..n) (W_O[h] or W_Q[h]) into G[i], with their row
 * counts and error bounds: GRAM_MANY adjacent heads to a gram_compute_fast_many call, which packs
 * o_proj's heads a tensor row at a time. */
static int stream_grams_fast(StreamJob *j, head_kind kind, const size_t *h, size_t n, int worker, double *const *G,
                             size_t *rows, double *err, size_t *bad) {
    int rc = AL_OK;
    for (size_t i = 0; i < n && rc == AL_OK; i += GRAM_MANY) {
        size_t c = n - i < GRAM_MANY ? n - i : GRAM_MANY, got = 0, failed = 0;
        GramView v[GRAM_MANY];
        for (; got < c && rc == AL_OK; got++) {
            *bad = h[i + got];
            if ((rc = gram_view(j->m, kind, j->l->layer, (int)h[i + got], j->part, &v[got])) != AL_OK) break;
            rows[i + got] = gram_view_rows(&v[got]);
            if (gram_view_k(&v[got]) != j->k)
                rc = al_err("internal: %s head %zu has inner dim %zu, expected %zu", v[got].tensor, h[i + got],
                            gram_view_k(&v[got]), j->k);
        }
        if (rc == AL_OK && (rc = gram_compute_fast_many(j->m->store, v, c, j->scr[worker], G + i, err + i, &failed)))
            *bad = h[i + failed];
        for (size_t x = 0; x < got; x++) gram_view_clear(&v[x]);
    }
    return rc;
}

/* The shared side of Gram G (k x k, finite: gram.c checked it) factored by fused_core_cholesky where it
 * runs and G is numerically positive definite; else (and on any doubt) spectra_gram_side_factor's
 * dpotrf / dpstrf. The spectrum's values come from the task's batch solve. */
static int fast_side_factor(const double *G, size_t k, size_t rows, LinGramSide **out) {
    *out = NULL;
    if (!fused_core_fits(k)) return spectra_gram_side_factor(G, k, rows, out);
    LinGramSide *s = al_calloc(1, sizeof *s, "a Gram factor");
    if (!s) return AL_ERR;
    *s = (LinGramSide){ .k = k, .rows = rows, .r = k };
    s->s = spectrum_new(rows, k, rows < k ? rows : k, false);
    s->L = al_malloc3(k, k, sizeof(double), "a Cholesky factor");
    if (!s->s || !s->L) { spectra_gram_side_free(s); return AL_ERR; }
    memcpy(s->L, G, k * k * sizeof(double));
    if (fused_core_cholesky(s->L, k)) { *out = s; return AL_OK; }
    spectra_gram_side_free(s);                      /* not positive definite: pivot (LAPACK) */
    return spectra_gram_side_factor(G, k, rows, out);
}

/* The fast route's shared side g from its Gram G: Cholesky factor and bounds (the eigenvalues
 * come from the task's batch solve). */
static int fast_shared(StreamJob *j, size_t g, const double *G, size_t rows, double err) {
    size_t k = j->k;
    FastSide *fs = &j->fside[g];
    fs->fro = fro_d(G, k * k);
    fs->dmax = 0;
    for (size_t i = 0; i < k; i++) fs->dmax = fmax(fs->dmax, G[i * k + i]);
    /* the RoPE offset's rotation keeps the error's norm, and rounds (in both routes) */
    fs->err = err + (j->rot ? 32 * unit_d() * fs->fro : 0);
    return fast_side_factor(G, k, rows, &j->shared[g]);
}

/* KV head g's Gram (W_V[g] or W_K[g]) into G, rotated to the offset, and its side: factored and
 * solved on the double route, factored (its solve batched by the caller) on the fast route. */
static int shared_one(StreamJob *j, size_t g, int worker, double *G) {
    const ModelConfig *c = model_layer_cfg(j->m, j->l->layer);
    double err;
    size_t rows;
    int rc = stream_gram(j, farr_shared_kind(j->l->kind), (int)g, worker, G, &rows, &err);
    /* the rotation is orthogonal: it keeps the error's Frobenius norm */
    if (rc == AL_OK && j->rot) gram_rotate(G, j->k, c->rope, c->rope_theta, (double)j->l->offset);
    if (rc == AL_OK) rc = j->fast ? fast_shared(j, g, G, rows, err) : spectra_gram_side_new(G, j->k, rows, true, &j->shared[g]);
    if (rc != AL_OK) return al_err_ctx("layer %d KV head %d (%s)", j->l->layer, (int)g, farr_fused_name(j->l->kind));
    return AL_OK;
}

/* Phase 1, task t: KV heads t*B .. (t+1)*B-1 (B = job_batch), their shared factors (W_V[g] or
 * W_K[g]): spectrum and Cholesky factor. */
static int stream_shared_task(size_t t, int worker, void *ud) {
    StreamJob *j = ud;
    size_t B = job_batch(j), i0 = t * B, nb = j->ng - i0 < B ? j->ng - i0 : B, k = j->k, kk[FAST_BATCH], g[FAST_BATCH];
    double *A[FAST_BATCH], *w[FAST_BATCH];
    int rc = AL_OK;
    for (size_t b = 0; rc == AL_OK && b < nb; b++) {
        g[b] = j->gsel ? j->gsel[i0 + b] : i0 + b;
        A[b] = j->G[worker] + b * k * k;
        w[b] = j->w[worker] + b * 2 * k;
        kk[b] = k;
        rc = shared_one(j, g[b], worker, A[b]);
    }
    if (rc != AL_OK || !j->fast) return rc;
    if (solve_values(j->ew[worker], nb, A, kk, w, j->f32) != AL_OK)
        return nb == 1 ? al_err_ctx("layer %d KV head %zu (%s)", j->l->layer, g[0], farr_fused_name(j->l->kind))
                       : al_err_ctx("layer %d KV heads %zu-%zu (%s)", j->l->layer, g[0], g[nb - 1], farr_fused_name(j->l->kind));
    for (size_t b = 0; b < nb; b++) spectrum_set_eigs(j->shared[g[b]]->s, w[b], k);
    return AL_OK;
}

/* Head h's factor spectra: a copy of the group's shared side and its own (taken over). */
static int put_sides(FarrLayer *l, size_t h, const Spectrum *shared, Spectrum **own) {
    bool vo = l->kind == FARR_VO;
    Spectrum *shs = spectrum_copy(shared);
    if (!shs) return AL_ERR;
    l->a[h] = vo ? shs : *own;
    l->b[h] = vo ? *own : shs;
    *own = NULL;
    return AL_OK;
}

/* One query head of a fast-route batch between its Gram and its solves. */
typedef struct {
    size_t h, g, rows;
    double err, gbfro;       /* its Gram's error bound and Frobenius norm */
    Spectrum *own, *fu;      /* its own side's and the fused spectrum (values set after the solves) */
} FastHead;

/* Phase 2 of the fast route, before the solves: head f->h's own Gram G (error bound err) and its
 * fused core M against the group's shared side. */
static int fast_head_prep(StreamJob *j, int worker, FastHead *f, const double *G, double err, double *M) {
    bool vo = j->l->kind == FARR_VO;
    size_t k = j->k, rows = f->rows;
    f->g = (size_t)cfg_kv_group(model_layer_cfg(j->m, j->l->layer), (int)f->h);
    const LinGramSide *sh = j->shared[f->g];
    f->err = err;
    f->gbfro = fro_d(G, k * k);
    /* VO: V (m = its rows) @ O (n = hidden); QK: Q (m = d_in_q) @ Kᵀ (n = d_in_kv). */
    size_t m = vo ? sh->rows : rows, n = vo ? rows : sh->rows, p = m < n ? m : n;
    f->own = spectrum_new(rows, k, rows < k ? rows : k, false);
    f->fu = spectrum_new(m, n, p < k ? p : k, false);
    if (!f->own || !f->fu) return AL_ERR;
    /* full rank: the lower triangle in one AVX-512 kernel (the solves read no more); else two dtrmm */
    if (!sh->piv && sh->r == k && j->cw[worker]) {
        fused_core_lower(sh->L, G, k, M, j->cw[worker]);
        return AL_OK;
    }
    return spectra_gram_fused_core(sh, G, M);
}

/* After the solves: the spectra from the own side's values wb (k) and the fused core's wm (r,
 * ascending), and the three bounds. */
static int fast_head_finish(StreamJob *j, FastHead *f, const double *wb, const double *wm) {
    FarrLayer *l = j->l;
    bool vo = l->kind == FARR_VO;
    size_t k = j->k, h = f->h;
    const LinGramSide *sh = j->shared[f->g];
    spectrum_set_eigs(f->own, wb, k);
    spectrum_set_eigs(f->fu, wm, sh->r);
    double gbmax = k ? wb[k - 1] : 0, mfro = fro_d(wm, sh->r);
    double es = fast_side_err(k, j->fside[f->g].err, j->fside[f->g].fro, j->f32);
    double eo = fast_side_err(k, f->err, f->gbfro, j->f32);
    l->eps[3 * h] = vo ? es : eo;
    l->eps[3 * h + 1] = vo ? eo : es;
    l->eps[3 * h + 2] = fast_fused_err(sh, &j->fside[f->g], f->err, f->gbfro, gbmax, mfro, j->f32);
    l->fused[h] = f->fu;
    f->fu = NULL;
    return put_sides(l, h, sh->s, &f->own);
}

/* Phase 2 on the double route for query head h from its own Gram G. */
static int double_head(StreamJob *j, size_t h, const double *G, size_t rows) {
    FarrLayer *l = j->l;
    bool vo = l->kind == FARR_VO;
    LinGramSide *own = NULL;
    const LinGramSide *sh = j->shared[cfg_kv_group(model_layer_cfg(j->m, j->l->layer), (int)h)];
    int rc = spectra_gram_side_new(G, j->k, rows, false, &own);
    /* VO: V (m = its rows) @ O (n = hidden); QK: Q (m = d_in_q) @ Kᵀ (n = d_in_kv). */
    if (rc == AL_OK) rc = spectra_gram_fused(sh, G, vo ? sh->rows : rows, vo ? rows : sh->rows, &l->fused[h]);
    if (rc == AL_OK) rc = put_sides(l, h, sh->s, &own->s);
    spectra_gram_side_free(own);
    return rc;
}

/* Phase 2 of the fast route for query heads f[0..nb) (their h set): the batch's own Grams, fused
 * cores, all 2 nb values-only solves in one call, then the spectra and bounds; *bad: the head an
 * error is about. */
static int fast_heads(StreamJob *j, FastHead *f, size_t nb, int worker, size_t *bad) {
    size_t k = j->k, hs[FAST_BATCH], rows[FAST_BATCH], kk[2 * FAST_BATCH] = {0};
    double *Gs[FAST_BATCH], *A[2 * FAST_BATCH] = {0}, *w[2 * FAST_BATCH] = {0}, err[FAST_BATCH];
    for (size_t b = 0; b < nb; b++) {
        hs[b] = f[b].h;
        A[2 * b] = Gs[b] = j->G[worker] + b * k * k;    /* its own Gram, then the fused core */
        A[2 * b + 1] = j->M[worker] + b * k * k;
        w[2 * b] = j->w[worker] + b * 2 * k;
        w[2 * b + 1] = w[2 * b] + k;
    }
    int rc = stream_grams_fast(j, farr_own_kind(j->l->kind), hs, nb, worker, Gs, rows, err, bad);
    for (size_t b = 0; rc == AL_OK && b < nb; b++) {
        *bad = f[b].h;
        f[b].rows = rows[b];
        rc = fast_head_prep(j, worker, &f[b], A[2 * b], err[b], A[2 * b + 1]);
        kk[2 * b] = k;
        kk[2 * b + 1] = j->shared[f[b].g]->r;
    }
    if (rc == AL_OK && solve_values(j->ew[worker], 2 * nb, A, kk, w, j->f32) != AL_OK) { *bad = f[0].h; return AL_ERR; }
    for (size_t b = 0; rc == AL_OK && b < nb; b++)
        if ((rc = fast_head_finish(j, &f[b], w[2 * b], w[2 * b + 1])) != AL_OK) *bad = f[b].h;
    return rc;
}

/* Phase 2, task t: query heads t*B .. (t+1)*B-1 (B = job_batch), each its own factor (W_O[h] or
 * W_Q[h]) and the fused spectrum against the group's shared side. */
static int stream_head_task(size_t t, int worker, void *ud) {
    StreamJob *j = ud;
    FarrLayer *l = j->l;
    size_t B = job_batch(j), i0 = t * B, nb = j->nh - i0 < B ? j->nh - i0 : B, bad = i0;
    FastHead f[FAST_BATCH] = {{0}};
    for (size_t b = 0; b < nb; b++) f[b].h = j->hsel ? j->hsel[i0 + b] : i0 + b;
    int rc = AL_OK;
    if (j->fast) rc = fast_heads(j, f, nb, worker, &bad);
    for (size_t b = 0; !j->fast && rc == AL_OK && b < nb; b++) {
        double *G = j->G[worker], err;
        bad = f[b].h;
        rc = stream_gram(j, farr_own_kind(l->kind), (int)f[b].h, worker, G, &f[b].rows, &err);
        if (rc == AL_OK) rc = double_head(j, f[b].h, G, f[b].rows);
    }
    for (size_t b = 0; b < nb; b++) { spectrum_free(f[b].own); spectrum_free(f[b].fu); }
    if (rc != AL_OK) return al_err_ctx("layer %d head %zu (%s)", l->layer, bad, farr_fused_name(l->kind));
    return AL_OK;
}

static void stream_job_free(StreamJob *j) {
    size_t G = (size_t)model_layer_cfg(j->m, j->l->layer)->n_kv_heads;
    for (size_t g = 0; g < G; g++) {
        if (j->shared) spectra_gram_side_free(j->shared[g]);
    }
    for (int w = 0; w < j->T; w++) {
        if (j->scr) gram_scratch_free(j->scr[w]);
        if (j->G) free(j->G[w]);
        if (j->M) free(j->M[w]);
        if (j->w) free(j->w[w]);
        if (j->ew) symeig_work_free(j->ew[w]);
        if (j->cw) free(j->cw[w]);
    }
    free(j->shared); free(j->fside); free(j->scr); free(j->G); free(j->M); free(j->w); free(j->ew); free(j->cw);
}

/* Runs phase 1 over ng KV heads and phase 2 over nh query heads (gsel / hsel: which ones, NULL:
 * all), then releases the layer's mapped pages. */
static int stream_run(Model *m, FarrLayer *l, head_part part, bool rot, farr_route route, const size_t *gsel,
                      size_t ng, const size_t *hsel, size_t nh) {
    size_t G = (size_t)model_layer_cfg(m, l->layer)->n_kv_heads;
    bool fast = route == FARR_ROUTE_FAST || route == FARR_ROUTE_RANKS;
    StreamJob j = { .m = m, .l = l, .part = part, .rot = rot, .fast = fast, .f32 = route == FARR_ROUTE_RANKS,
                    .k = (size_t)l->head_dim,
                    .gsel = gsel, .hsel = hsel, .ng = ng, .nh = nh };
    j.T = sweep_threads(job_tasks(&j, nh > ng ? nh : ng), 0);
    j.shared = al_calloc(G, sizeof *j.shared, "shared factors");
    j.fside = al_calloc(G, sizeof *j.fside, "shared factors");
    j.scr = al_calloc((size_t)j.T, sizeof *j.scr, "sweep scratch");
    j.G = al_calloc((size_t)j.T, sizeof *j.G, "sweep scratch");
    j.M = al_calloc((size_t)j.T, sizeof *j.M, "sweep scratch");
    j.w = al_calloc((size_t)j.T, sizeof *j.w, "sweep scratch");
    j.ew = al_calloc((size_t)j.T, sizeof *j.ew, "sweep scratch");
    j.cw = al_calloc((size_t)j.T, sizeof *j.cw, "sweep scratch");
    int rc = j.shared && j.fside && j.scr && j.G && j.M && j.w && j.ew && j.cw ? AL_OK : AL_ERR;
    size_t k1 = j.k ? j.k : 1;
    for (int w = 0; rc == AL_OK && w < j.T; w++) {
        j.scr[w] = gram_scratch_new();
        j.G[w] = al_malloc3(job_batch(&j) * k1, k1, sizeof(double), "Gram matrices");
        if (!j.scr[w] || !j.G[w]) rc = AL_ERR;
        if (!fast) continue;                  /* the fast route's batch: fused cores, values, solver */
        j.M[w] = al_malloc3(FAST_BATCH * k1, k1, sizeof(double), "fused cores");
        j.w[w] = al_malloc3(FAST_BATCH * 2 * k1, 1, sizeof(double), "eigenvalues");
        j.ew[w] = symeig_work_new(k1);
        if (fused_core_fits(j.k) && !(j.cw[w] = al_malloc3(fused_core_work(j.k), 1, sizeof(double), "fused cores")))
            rc = AL_ERR;
        if (!j.M[w] || !j.w[w] || !j.ew[w]) rc = AL_ERR;
    }
    if (rc == AL_OK) rc = pool_run(job_tasks(&j, ng), j.T, stream_shared_task, &j);     /* the persistent workers */
    if (rc == AL_OK) rc = pool_run(job_tasks(&j, nh), j.T, stream_head_task, &j);
    stream_job_free(&j);
    char *prefix = model_tensor_name(m, l->layer, "");
    if (prefix) store_release_prefix(m->store, prefix);
    free(prefix);
    return rc;
}

/* An empty layer record of kind (its arrays allocated, no spectra). */
static FarrLayer *layer_new(const ModelConfig *c, farr_kind kind, int layer, int offset, head_part part) {
    FarrLayer *l = al_calloc(1, sizeof *l, "layer spectra");
    if (!l) return NULL;
    l->kind = kind; l->layer = layer; l->offset = offset; l->n_heads = c->n_heads;
    l->head_dim = kind == FARR_VO ? c->v_dim : part == PART_NOPE ? c->qk_nope_dim : cfg_d_qk(c);
    size_t H = (size_t)c->n_heads;
    l->a = al_calloc(H, sizeof *l->a, "layer spectra");
    l->b = al_calloc(H, sizeof *l->b, "layer spectra");
    l->fused = al_calloc(H, sizeof *l->fused, "layer spectra");
    if (!l->a || !l->b || !l->fused) { farr_layer_free(l); return NULL; }
    return l;
}

int farr_layer_compute_route(Model *m, farr_kind kind, int layer, int offset, farr_route route, FarrLayer **out) {
    *out = NULL;
    const ModelConfig *c = model_layer_cfg(m, layer);   /* Gemma 4's full layers: their own head dims */
    LayerJob job = { .m = m };
    if (model_views_composite(m)) route = FARR_ROUTE_FACTORS;   /* DeepSeek-V4: views are products of blocks */
    if (fuse_mode(m, kind, layer, offset, &job.part, &job.rot) != AL_OK) return AL_ERR;
    if (layer < 0 || layer >= c->n_layers)
        return al_err("layer %d out of range: this model has layers 0-%d", layer, c->n_layers - 1);
    if (route == FARR_ROUTE_FACTORS && model_layer_load(m, layer) != AL_OK) return AL_ERR;
    FarrLayer *l = layer_new(c, kind, layer, offset, job.part);
    if (!l) return AL_ERR;
    size_t H = (size_t)c->n_heads;
    l->coarse = route == FARR_ROUTE_RANKS;
    if ((route == FARR_ROUTE_FAST || l->coarse) && !(l->eps = al_calloc(3 * H, sizeof(double), "error bounds"))) {
        farr_layer_free(l);
        return AL_ERR;
    }
    job.l = l;
    int rc = route == FARR_ROUTE_FACTORS ? pool_run(H, 0, layer_task, &job)
             : stream_run(m, l, job.part, job.rot, route, NULL, (size_t)c->n_kv_heads, NULL, H);
    if (rc != AL_OK) { farr_layer_free(l); return rc; }
    *out = l;
    return AL_OK;
}

/* Whether head h's three ranks at tau are certain under the fast route's bounds. */
static bool head_certain(const FarrLayer *l, int h, double tau) {
    if (!l->eps) return true;
    const double *e = l->eps + 3 * (size_t)h;
    return spectra_rank_certain(l->a[h], e[0], tau) && spectra_rank_certain(l->b[h], e[1], tau) &&
           spectra_rank_certain(l->fused[h], e[2], tau);
}

/* Recomputes the heads flagged in redo (n_heads) by the double stream route, in place. */
static int layer_redo(Model *m, FarrLayer *l, const bool *redo, size_t *redone) {
    const ModelConfig *c = model_layer_cfg(m, l->layer);
    head_part part;
    bool rot;
    if (fuse_mode(m, l->kind, l->layer, l->offset, &part, &rot) != AL_OK) return AL_ERR;
    size_t H = (size_t)l->n_heads, G = (size_t)c->n_kv_heads, nh = 0, ng = 0;
    size_t *hsel = al_calloc(H ? H : 1, sizeof *hsel, "heads"), *gsel = al_calloc(G ? G : 1, sizeof *gsel, "heads");
    FarrLayer *t = layer_new(c, l->kind, l->layer, l->offset, part);
    int rc = hsel && gsel && t ? AL_OK : AL_ERR;
    for (size_t h = 0; rc == AL_OK && h < H; h++) {
        if (!redo[h]) continue;
        hsel[nh++] = h;
        size_t g = (size_t)cfg_kv_group(c, (int)h);
        if (!ng || gsel[ng - 1] != g) gsel[ng++] = g;   /* heads of a group are consecutive */
    }
    if (rc == AL_OK && nh) rc = stream_run(m, t, part, rot, FARR_ROUTE_STREAM, gsel, ng, hsel, nh);
    for (size_t i = 0; rc == AL_OK && i < nh; i++) {
        size_t h = hsel[i];
        spectrum_free(l->a[h]); spectrum_free(l->b[h]); spectrum_free(l->fused[h]);
        l->a[h] = t->a[h]; l->b[h] = t->b[h]; l->fused[h] = t->fused[h];
        t->a[h] = t->b[h] = t->fused[h] = NULL;
        l->eps[3 * h] = l->eps[3 * h + 1] = l->eps[3 * h + 2] = 0;
    }
    if (rc == AL_OK && redone) *redone += nh;
    farr_layer_free(t);
    free(hsel); free(gsel);
    return rc;
}

int farr_layer_certify(Model *m, FarrLayer *l, double tau, size_t *redone) {
    if (!l->eps) return AL_OK;
    bool *redo = al_calloc((size_t)l->n_heads, sizeof(bool), "heads");
    if (!redo) return AL_ERR;
    size_t n = 0;
    for (int h = 0; h < l->n_heads; h++) n += redo[h] = !head_certain(l, h, tau);
    int rc = n ? layer_redo(m, l, redo, redone) : AL_OK;
    free(redo);
    return rc;
}

int farr_layer_exact(Model *m, FarrLayer *l, size_t *redone) {
    if (!l->eps) return AL_OK;
    bool *redo = al_calloc((size_t)l->n_heads, sizeof(bool), "heads");
    if (!redo) return AL_ERR;
    for (int h = 0; h < l->n_heads; h++) {
        const double *e = l->eps + 3 * (size_t)h;
        redo[h] = e[0] > 0 || e[1] > 0 || e[2] > 0;
    }
    int rc = layer_redo(m, l, redo, redone);
    free(redo);
    if (rc == AL_OK) { free(l->eps); l->eps = NULL; l->coarse = false; }
    return rc;
}

int farr_layer_compute(Model *m, farr_kind kind, int layer, int offset, FarrLayer **out) {
    return farr_layer_compute_route(m, kind, layer, offset, FARR_ROUTE_STREAM, out);
}

void farr_layer_ranks(const FarrLayer *l, int head, double tau, int *ra, int *rb, int *rf) {
    if (ra) *ra = (int)spectra_effective_rank(l->a[head]->sigma, l->a[head]->p, tau);
    if (rb) *rb = (int)spectra_effective_rank(l->b[head]->sigma, l->b[head]->p, tau);
    if (rf) *rf = (int)spectra_effective_rank(l->fused[head]->sigma, l->fused[head]->p, tau);
}

/* ================================================================ accounting */

size_t farr_params_pair(size_t m_a, size_t m_b, size_t d) { return (m_a + m_b) * d; }
size_t farr_params_separate(size_t m_a, size_t r_a, size_t m_b, size_t r_b, size_t d) {
    return m_a * r_a + r_a * d + m_b * r_b + r_b * d;
}
size_t farr_params_fused(size_t m_a, size_t m_b, size_t r) { return (m_a + m_b) * r; }

/* ================================================================ groups */

void farr_group_free(FarrGroup *g) {
    if (!g) return;
    mat_free(g->shared);
    if (g->head) for (int i = 0; i < g->n; i++) mat_free(g->head[i]);
    free(g->head); free(g->energy); free(g->err); free(g->cum); free(g->U);
    free(g);
}

/* Gram of one head's factor in the group's inner space (k x k, full symmetric):
 * VO: P P^T for P = W_O (k x n); QK: Q^T Q for Q = W_Q (n_q x k). */
static int head_gram(farr_kind kind, const Mat *P, double *G) {
    size_t k = kind == FARR_VO ? P->rows : P->cols;
    size_t n = kind == FARR_VO ? P->cols : P->rows;
    MatD *Pd = matd_from_mat(P);
    if (!Pd) return AL_ERR;
    cblas_dsyrk(CblasRowMajor, CblasUpper, kind == FARR_VO ? CblasNoTrans : CblasTrans, (int)k,
                (int)n, 1.0, Pd->data, kind == FARR_VO ? (int)n : (int)k, 0.0, G, (int)k);
    for (size_t i = 0; i < k; i++) for (size_t j = 0; j < i; j++) G[i * k + j] = G[j * k + i];
    matd_free(Pd);
    return AL_OK;
}

/* The SVD (with U) of S times the group's heads stacked: VO [W_O1 .. W_On] (k x n*cols), QK
 * [W_Q1; ..; W_Qn] (n*rows x k); the heads checked against S first. */
static int group_stack_svd(farr_kind kind, const Mat *S, const Mat *const *heads, int n, Spectrum **sp) {
    size_t m = S->rows, k = S->cols;
    *sp = NULL;
    if (n < 1) return al_err("a group needs at least one head");
    for (int i = 0; i < n; i++) {
        size_t hk = kind == FARR_VO ? heads[i]->rows : heads[i]->cols;
        if (hk != k || heads[i]->rows * heads[i]->cols != heads[0]->rows * heads[0]->cols)
            return al_err("group heads do not match the shared factor (%zux%zu)", m, k);
    }
    size_t hr = heads[0]->rows, hc = heads[0]->cols;
    Mat *stack = kind == FARR_VO ? mat_new(k, hc * (size_t)n) : mat_new(hr * (size_t)n, k);
    if (!stack) return AL_ERR;
    for (int i = 0; i < n; i++) {
        if (kind == FARR_VO)
            for (size_t a = 0; a < k; a++)
                memcpy(stack->data + a * stack->cols + (size_t)i * hc, heads[i]->data + a * hc, hc * sizeof(float));
        else
            memcpy(stack->data + (size_t)i * hr * k, heads[i]->data, hr * k * sizeof(float));
    }
    int rc = spectra_product_svd(S, stack, kind == FARR_VO ? SPECTRA_AB : SPECTRA_ABT, SPECTRA_VECTORS, sp, NULL, NULL);
    mat_free(stack);
    return rc;
}

/* A group of n heads over p singular values: its arrays allocated (cum (n, p), energy, err, head). */
static FarrGroup *group_new(int n, size_t p) {
    FarrGroup *g = al_calloc(1, sizeof *g, "a truncation group");
    if (g) {
        g->n = n;
        g->p = p;
        g->cum = al_malloc3((size_t)n, p ? p : 1, sizeof(double), "energy profiles");
        g->energy = al_calloc((size_t)n, sizeof(double), "energies");
        g->err = al_calloc((size_t)n, sizeof(double), "errors");
        g->head = al_calloc((size_t)n, sizeof(Mat *), "head factors");
    }
    if (!g || !g->cum || !g->energy || !g->err || !g->head) { farr_group_free(g); return NULL; }
    return g;
}

/* Each head's cumulative kept energy g->cum from the stack's U (m x p): e_j = ||u_j^T S P_i||^2 =
 * (Mt G_i Mt^T)_jj with Mt = U^T S (p x k), over the head's total ||S P_i||_F^2 = <S^T S, G_i>. */
static int group_profiles(FarrGroup *g, farr_kind kind, const Mat *S, const Mat *const *heads) {
    size_t m = S->rows, k = S->cols, p = g->p;
    MatD *Sd = matd_from_mat(S);
    double *Mt = al_malloc3(p ? p : 1, k, sizeof(double), "projections");
    double *GS = al_malloc3(k, k, sizeof(double), "a Gram matrix"), *Gi = al_malloc3(k, k, sizeof(double), "a Gram matrix");
    double *Y = al_malloc3(p ? p : 1, k, sizeof(double), "projections");
    int rc = (Sd && Mt && GS && Gi && Y) ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)p, (int)k, (int)m, 1.0, g->U,
                    (int)p, Sd->data, (int)k, 0.0, Mt, (int)k);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)k, (int)m, 1.0, Sd->data,
                    (int)k, Sd->data, (int)k, 0.0, GS, (int)k);
    }
    for (int i = 0; rc == AL_OK && i < g->n; i++) {
        if ((rc = head_gram(kind, heads[i], Gi)) != AL_OK) break;
        double total = 0;
        for (size_t t = 0; t < k * k; t++) total += GS[t] * Gi[t];
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p, (int)k, (int)k, 1.0, Mt,
                    (int)k, Gi, (int)k, 0.0, Y, (int)k);
        double cum = 0;
        for (size_t j = 0; j < p; j++) {
            double e = 0;
            for (size_t c = 0; c < k; c++) e += Y[j * k + c] * Mt[j * k + c];
            cum += e;
            g->cum[(size_t)i * p + j] = total > 0 ? cum / total : 1.0;
        }
    }
    matd_free(Sd); free(Mt); free(GS); free(Gi); free(Y);
    return rc;
}

/* The smallest r keeping >= tau of every head's energy (p if rounding keeps it below tau). */
static int group_rank_at(const FarrGroup *g, double tau) {
    size_t p = g->p;
    for (size_t r = 1; r <= p; r++) {
        bool ok = true;
        for (int i = 0; i < g->n && ok; i++) ok = g->cum[(size_t)i * p + r - 1] >= tau;
        if (ok) return (int)r;
    }
    return (int)p;
}

int farr_group_analyse(farr_kind kind, const Mat *S, const Mat *const *heads, int n, double tau,
                       FarrGroup **out) {
    *out = NULL;
    Spectrum *sp = NULL;
    int rc = group_stack_svd(kind, S, heads, n, &sp);
    if (rc != AL_OK) return rc;
    size_t p = sp->p;
    FarrGroup *g = group_new(n, p);
    if (!g) { spectrum_free(sp); return AL_ERR; }
    g->U = sp->U;                      /* (m x p), taken over */
    sp->U = NULL;
    if (n == 1) {
        spectra_cum_energy(sp->sigma, p, g->cum);
        g->rank_tau = (int)spectra_effective_rank(sp->sigma, p, tau);
    } else {
        if ((rc = group_profiles(g, kind, S, heads)) != AL_OK) { farr_group_free(g); spectrum_free(sp); return rc; }
        g->rank_tau = sp->total <= 0 ? 0 : group_rank_at(g, tau);
    }
    spectrum_free(sp);
    *out = g;
    return AL_OK;
}

int farr_group_split(FarrGroup *g, farr_kind kind, const Mat *S, const Mat *const *heads, int r) {
    size_t m = S->rows, k = S->cols, p = g->p;
    if (!g->U) return al_err("internal: truncation group already split");
    if (r < 1) r = 1;
    if ((size_t)r > p) r = (int)p;
    size_t rr = (size_t)r;
    g->rank = r;
    mat_free(g->shared);
    g->shared = mat_new(m, rr);
    MatD *Sd = matd_from_mat(S);
    double *Mt = al_malloc3(rr, k, sizeof(double), "projections");
    if (!g->shared || !Sd || !Mt) { matd_free(Sd); free(Mt); return AL_ERR; }
    for (size_t i = 0; i < m; i++) vec_d2f(g->U + i * p, rr, g->shared->data + i * rr);
    /* Mt = U_r^T S (r x k) */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)rr, (int)k, (int)m, 1.0, g->U, (int)p,
                Sd->data, (int)k, 0.0, Mt, (int)k);
    int rc = AL_OK;
    for (int i = 0; i < g->n && rc == AL_OK; i++) {
        const Mat *P = heads[i];
        MatD *Pd = matd_from_mat(P);
        Mat *H = kind == FARR_VO ? mat_new(rr, P->cols) : mat_new(P->rows, rr);
        double *Hd = H ? al_malloc3(H->rows, H->cols, sizeof(double), "a head factor") : NULL;
        if (!Pd || !H || !Hd) { matd_free(Pd); mat_free(H); free(Hd); rc = AL_ERR; break; }
        if (kind == FARR_VO)     /* W_O' = Mt W_O (r x cols) */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rr, (int)P->cols, (int)k, 1.0,
                        Mt, (int)k, Pd->data, (int)P->cols, 0.0, Hd, (int)P->cols);
        else                     /* W_Q' = W_Q Mt^T (rows x r) */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)P->rows, (int)rr, (int)k, 1.0,
                        Pd->data, (int)k, Mt, (int)k, 0.0, Hd, (int)rr);
        vec_d2f(Hd, H->rows * H->cols, H->data);
        matd_free(Pd); free(Hd);
        mat_free(g->head[i]);
        g->head[i] = H;
        double e = p ? g->cum[(size_t)i * p + rr - 1] : 1.0;
        if (e > 1) e = 1;
        g->energy[i] = e;
        g->err[i] = sqrt(e < 1 ? 1 - e : 0);
    }
    matd_free(Sd); free(Mt);
    return rc;
}

/* ================================================================ truncation of a model */

static void trunc_layer_free(FarrTruncLayer *l) {
    if (!l) return;
    if (l->groups) for (int g = 0; g < l->n_kv; g++) farr_group_free(l->groups[g]);
    if (l->shared_bias) for (int g = 0; g < l->n_kv; g++) free(l->shared_bias[g]);
    if (l->head_bias) for (int h = 0; h < l->n_heads; h++) free(l->head_bias[h]);
    free(l->groups); free(l->shared_bias); free(l->head_bias); free(l->o_bias_delta);
    free(l);
}

void farr_plan_free(FarrPlan *p) {
    if (!p) return;
    if (p->layers) for (int i = 0; i <= p->hi - p->lo; i++) trunc_layer_free(p->layers[i]);
    free(p->layers);
    free(p->model_path);
    free(p);
}

const FarrTruncLayer *farr_plan_layer(const FarrPlan *p, int layer) {
    if (!p || layer < p->lo || layer > p->hi) return NULL;
    return p->layers[layer - p->lo];
}

int farr_pair_width(const ModelConfig *c, farr_kind k) {
    if (k == FARR_VO) return c->v_dim;
    return c->qk_nope_dim > 0 && c->qk_rope_dim > 0 ? c->qk_nope_dim : cfg_d_qk(c);
}

const FarrTruncLayer *farr_plan_cut_layer(const FarrPlan *p, const ModelConfig *c, farr_kind k, int layer) {
    const FarrTruncLayer *tl = farr_plan_layer(p, layer);
    for (int g = 0; tl && g < tl->n_kv; g++)
        if (tl->groups[g]->rank < farr_pair_width(c, k)) return tl;
    return NULL;
}

const FarrGroup *farr_plan_head(const FarrPlan *p, const ModelConfig *c, int layer, int head, int *idx) {
    const FarrTruncLayer *l = farr_plan_layer(p, layer);
    if (!l || head < 0 || head >= l->n_heads) return NULL;
    int g = cfg_kv_group(c, head), per = c->n_heads / c->n_kv_heads;
    if (idx) *idx = head - g * per;
    return l->groups[g];
}

/* VO of a model whose V bias cannot be folded exactly into o_proj's bias: no o_proj bias, or a
 * sink logit (gpt-oss) so that a softmax row's weights sum to less than 1 and b_V W_O is not a
 * constant. The V side is then the affine map [x, 1] @ [W_V; b_V] (m + 1 x k): the bias is one
 * more input row, stacked, truncated and split with the rest (exact at full rank even where
 * W_V is rank-deficient, which a least-squares move of b_V into W_V's row space is not). */
static bool vo_affine(const ModelConfig *c, farr_kind kind) {
    return kind == FARR_VO && c->qkv_bias && !cfg_is_mla(c) && (!c->o_bias || c->attn_sinks);
}

/* S (m x k) with b (k) appended as its last row (S replaced; b NULL: unchanged). */
static int append_bias_row(Mat **S, const float *b) {
    if (!b) return AL_OK;
    Mat *A = mat_new((*S)->rows + 1, (*S)->cols);
    if (!A) return AL_ERR;
    memcpy(A->data, (*S)->data, (*S)->rows * (*S)->cols * sizeof(float));
    memcpy(A->data + (*S)->rows * (*S)->cols, b, (*S)->cols * sizeof(float));
    mat_free(*S);
    *S = A;
    return AL_OK;
}

/* Loads one group's factors in layer L: S (W_V[g] or W_K[g]; [W_V[g]; b_V[g]] where vo_affine)
 * and its query heads' factors. */
static int group_factors(Model *m, farr_kind kind, int layer, int g, head_part part, Mat **S,
                         Mat ***heads, int *n) {
    const ModelConfig *c = &m->cfg;
    int per = c->n_heads / c->n_kv_heads;
    *S = NULL; *heads = NULL; *n = per;
    if (model_head(m, farr_shared_kind(kind), layer, g, part, S) != AL_OK) return AL_ERR;
    if (vo_affine(c, kind)) {
        float *bv = NULL;
        size_t nb = 0;
        int rc = model_head_bias(m, HK_V, layer, g, &bv, &nb);
        if (rc == AL_OK && bv && nb != (*S)->cols)
            rc = al_err("layer %d: V bias of KV head %d has %zu value%s, not %zu", layer, g, nb, al_s((long long)nb),
                        (*S)->cols);
        if (rc == AL_OK) rc = append_bias_row(S, bv);
        free(bv);
        if (rc != AL_OK) { mat_free(*S); *S = NULL; return AL_ERR; }
    }
    *heads = al_calloc((size_t)per, sizeof(Mat *), "group heads");
    if (!*heads) { mat_free(*S); *S = NULL; return AL_ERR; }
    for (int i = 0; i < per; i++)
        if (model_head(m, farr_own_kind(kind), layer, g * per + i, part, &(*heads)[i]) != AL_OK) {
            for (int j = 0; j < i; j++) mat_free((*heads)[j]);
            free(*heads); *heads = NULL; mat_free(*S); *S = NULL;
            return AL_ERR;
        }
    return AL_OK;
}

static void group_factors_free(Mat *S, Mat **heads, int n) {
    mat_free(S);
    if (heads) for (int i = 0; i < n; i++) mat_free(heads[i]);
    free(heads);
}

/* QK: b_K' = 0 (its score term is constant per query: softmax-invariant); b_Q' = b_Q W_K^T U_r
 * for each query head of group g, into tl->head_bias. */
static int group_bias_qk(Model *m, int layer, int g, const FarrGroup *grp, const Mat *S, FarrTruncLayer *tl) {
    const ModelConfig *c = &m->cfg;
    size_t r = (size_t)grp->rank, k = S->cols, mrows = S->rows, p = grp->p;
    int per = grp->n;
    if (!tl->head_bias) {
        tl->head_bias = al_calloc((size_t)tl->n_heads, sizeof(float *), "biases");
        if (!tl->head_bias) return AL_ERR;
    }
    MatD *Sd = matd_from_mat(S);
    double *KtU = al_malloc3(k, r, sizeof(double), "a projection");
    if (!Sd || !KtU) { matd_free(Sd); free(KtU); return AL_ERR; }
    /* KtU = W_K^T U_r (k x r) */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)k, (int)r, (int)mrows, 1.0, Sd->data,
                (int)k, grp->U, (int)p, 0.0, KtU, (int)r);
    matd_free(Sd);
    int rc = AL_OK;
    for (int i = 0; i < per && rc == AL_OK; i++) {
        int h = g * per + i;
        float *b = NULL;
        size_t nb = 0;
        if ((rc = model_head_bias(m, HK_Q, layer, h, &b, &nb)) != AL_OK) break;
        tl->head_bias[h] = al_calloc(r, sizeof(float), "a bias");
        if (!tl->head_bias[h]) { free(b); rc = AL_ERR; break; }
        size_t off = k < nb ? (size_t)cfg_nope_col(c) : 0;     /* the NoPE part's slice of the bias */
        for (size_t j = 0; j < r && b && nb >= off + k; j++) {
            double v = 0;
            for (size_t a = 0; a < k; a++) v += b[off + a] * KtU[a * r + j];
            tl->head_bias[h][j] = (float)v;
        }
        free(b);
    }
    free(KtU);
    return rc;
}

/* VO with an output bias, exact: sum_j alpha_j = 1, so b_V W_O[h] is a constant output: folded
 * into tl->o_bias_delta (hidden); b_V' stays 0. bv (k), heads[i] (k x hidden). */
static int group_bias_fold_o(const ModelConfig *c, const float *bv, size_t k, Mat *const *heads, int per,
                             FarrTruncLayer *tl) {
    size_t D = (size_t)c->hidden;
    if (!tl->o_bias_delta && !(tl->o_bias_delta = al_calloc(D, sizeof(float), "a bias"))) return AL_ERR;
    for (int i = 0; i < per; i++)
        for (size_t col = 0; col < D; col++) {
            double v = 0;
            for (size_t a = 0; a < k; a++) v += (double)bv[a] * heads[i]->data[a * D + col];
            tl->o_bias_delta[col] += (float)v;
        }
    return AL_OK;
}

/* VO where vo_affine: the split's shared factor is [W_V'; b_V'] ((m + 1) x r, from the affine
 * stack); its last row becomes tl->shared_bias[g] and W_V' keeps the first m rows. */
static int group_bias_affine(Model *m, int layer, int g, FarrGroup *grp, FarrTruncLayer *tl) {
    size_t rows = (size_t)cfg_d_in_kv(&m->cfg), r = (size_t)grp->rank;
    if (grp->shared->rows == rows) return AL_OK;             /* the layer has no V bias stored */
    if (grp->shared->rows != rows + 1 || grp->shared->cols != r)
        return al_err("internal: layer %d KV head %d: affine V factor is %zux%zu, not %zux%zu", layer, g,
                      grp->shared->rows, grp->shared->cols, rows + 1, r);
    memcpy(tl->shared_bias[g], grp->shared->data + rows * r, r * sizeof(float));
    grp->shared->rows = rows;
    return AL_OK;
}

/* Bias adjustments of one group after its split (see FarrTruncLayer). */
static int group_bias(Model *m, farr_kind kind, int layer, int g, FarrGroup *grp, const Mat *S,
                      Mat *const *heads, FarrTruncLayer *tl) {
    const ModelConfig *c = &m->cfg;
    if (!c->qkv_bias || cfg_is_mla(c)) return AL_OK;
    if (!tl->shared_bias) {
        tl->shared_bias = al_calloc((size_t)tl->n_kv, sizeof(float *), "biases");
        if (!tl->shared_bias) return AL_ERR;
    }
    tl->shared_bias[g] = al_calloc((size_t)grp->rank, sizeof(float), "a bias");
    if (!tl->shared_bias[g]) return AL_ERR;
    if (kind == FARR_QK) return group_bias_qk(m, layer, g, grp, S, tl);
    if (vo_affine(c, kind)) return group_bias_affine(m, layer, g, grp, tl);
    float *bv = NULL;
    size_t nb = 0;
    if (model_head_bias(m, HK_V, layer, g, &bv, &nb) != AL_OK) return AL_ERR;
    if (!bv) return AL_OK;
    int rc = group_bias_fold_o(c, bv, S->cols, heads, grp->n, tl);     /* o_proj bias, no sinks */
    free(bv);
    return rc;
}

typedef struct {
    Model *m;
    farr_kind kind;
    head_part part;
    int layer;
    double tau;
    int fixed;               /* >0: split every group at this rank; 0: analyse only; -1: per policy */
    farr_policy policy;
    FarrTruncLayer *tl;
} TruncJob;

static int trunc_analyse_task(size_t g, int worker, void *ud) {
    (void)worker;
    TruncJob *j = ud;
    Mat *S, **heads;
    int n;
    if (group_factors(j->m, j->kind, j->layer, (int)g, j->part, &S, &heads, &n) != AL_OK) return AL_ERR;
    int rc = farr_group_analyse(j->kind, S, (const Mat *const *)heads, n, j->tau, &j->tl->groups[g]);
    group_factors_free(S, heads, n);
    if (rc != AL_OK) return al_err_ctx("layer %d KV head %d (%s)", j->layer, (int)g, farr_fused_name(j->kind));
    return AL_OK;
}

static int trunc_split_task(size_t g, int worker, void *ud) {
    (void)worker;
    TruncJob *j = ud;
    FarrGroup *grp = j->tl->groups[g];
    int r = j->fixed;
    if (r <= 0) {
        r = grp->rank_tau;
        if (j->policy == FARR_POLICY_LAYER_MAX)
            for (int t = 0; t < j->tl->n_kv; t++) if (j->tl->groups[t]->rank_tau > r) r = j->tl->groups[t]->rank_tau;
    }
    Mat *S, **heads;
    int n;
    if (group_factors(j->m, j->kind, j->layer, (int)g, j->part, &S, &heads, &n) != AL_OK) return AL_ERR;
    int rc = farr_group_split(grp, j->kind, S, (const Mat *const *)heads, r);
    group_factors_free(S, heads, n);
    return rc;
}

static void layer_accounting(const ModelConfig *c, farr_kind kind, head_part part, FarrTruncLayer *tl) {
    size_t H = (size_t)c->n_heads, G = (size_t)c->n_kv_heads;
    size_t k = kind == FARR_VO ? (size_t)c->v_dim : part == PART_NOPE ? (size_t)c->qk_nope_dim : (size_t)cfg_d_qk(c);
    size_t ms = (size_t)cfg_d_in_kv(c);                                 /* rows of W_V / W_K */
    size_t mh = kind == FARR_VO ? (size_t)c->hidden : (size_t)cfg_d_in_q(c);   /* W_O cols / W_Q rows */
    size_t per = H / G;
    tl->params_before = G * ms * k + H * mh * k;
    tl->params_after = 0;
    size_t kv_after = 0, nh = 0;
    double emin = 1, esum = 0, emax_err = 0, errsum = 0;
    for (size_t g = 0; g < G; g++) {
        const FarrGroup *grp = tl->groups[g];
        size_t r = (size_t)grp->rank;
        tl->params_after += ms * r + per * mh * r;
        kv_after += r;
        for (int i = 0; i < grp->n; i++, nh++) {
            if (grp->energy[i] < emin) emin = grp->energy[i];
            esum += grp->energy[i];
            if (grp->err[i] > emax_err) emax_err = grp->err[i];
            errsum += grp->err[i];
        }
    }
    tl->energy_min = emin;
    tl->energy_mean = nh ? esum / (double)nh : 1;
    tl->err_max = emax_err;
    tl->err_mean = nh ? errsum / (double)nh : 0;
    if (cfg_is_mla(c)) tl->kv_before = tl->kv_after = 0;    /* the cache holds the latent */
    else { tl->kv_before = G * k; tl->kv_after = kv_after; }
}

/* Analyses (and, unless only_ranks, splits) one layer. *max_rank receives the largest rank a
 * group needs at tau. */
static int truncate_layer(Model *m, const FarrTruncOpts *o, head_part part, int layer, int fixed,
                          bool only_ranks, FarrTruncLayer **out, int *max_rank) {
    const ModelConfig *c = &m->cfg;
    *out = NULL;
    /* no whole-layer float copy: each group reads its heads' blocks from the mapping (model_head),
       and the layer's mapped pages are released at the end */
    FarrTruncLayer *tl = al_calloc(1, sizeof *tl, "a truncated layer");
    if (!tl) return AL_ERR;
    tl->layer = layer; tl->n_heads = c->n_heads; tl->n_kv = c->n_kv_heads;
    tl->groups = al_calloc((size_t)tl->n_kv, sizeof(FarrGroup *), "truncation groups");
    TruncJob job = { .m = m, .kind = o->kind, .part = part, .layer = layer, .tau = o->tau,
                     .fixed = fixed, .policy = o->policy, .tl = tl };
    int rc = tl->groups ? sweep_run((size_t)tl->n_kv, 0, trunc_analyse_task, &job) : AL_ERR;
    int mr = 0;
    if (rc == AL_OK)
        for (int g = 0; g < tl->n_kv; g++) if (tl->groups[g]->rank_tau > mr) mr = tl->groups[g]->rank_tau;
    if (max_rank) *max_rank = mr;
    if (rc == AL_OK && !only_ranks) {
        rc = sweep_run((size_t)tl->n_kv, 0, trunc_split_task, &job);
        /* Biases (small, and they share output buffers): one group at a time. */
        for (int g = 0; rc == AL_OK && g < tl->n_kv && c->qkv_bias && !cfg_is_mla(c); g++) {
            Mat *S, **heads;
            int n;
            if ((rc = group_factors(m, o->kind, layer, g, part, &S, &heads, &n)) != AL_OK) break;
            rc = group_bias(m, o->kind, layer, g, tl->groups[g], S, heads, tl);
            group_factors_free(S, heads, n);
        }
        for (int g = 0; g < tl->n_kv; g++) { free(tl->groups[g]->U); tl->groups[g]->U = NULL; }
        if (rc == AL_OK) layer_accounting(c, o->kind, part, tl);
    }
    char *prefix = model_tensor_name(m, layer, "");
    if (prefix) store_release_prefix(m->store, prefix);
    free(prefix);
    if (rc != AL_OK || only_ranks) { trunc_layer_free(tl); return rc; }
    *out = tl;
    return AL_OK;
}

/* o's layer range resolved (hi < 0: the last layer) and checked with its rank or tau; *part: the
 * part of each head the pair fuses. */
static int truncate_opts(Model *m, FarrTruncOpts *o, head_part *part) {
    const ModelConfig *c = &m->cfg;
    bool rot;
    if (o->layer_hi < 0) o->layer_hi = c->n_layers - 1;
    if (o->layer_lo < 0 || o->layer_lo > o->layer_hi || o->layer_hi >= c->n_layers)
        return al_err("layers %d-%d out of range: this model has layers 0-%d", o->layer_lo, o->layer_hi,
                      c->n_layers - 1);
    /* a hybrid's linear-attention layers stay as they are (their plan layers NULL) */
    if (layersel_range(c, "truncate", &o->layer_lo, &o->layer_hi, NULL, 0) != AL_OK) return AL_ERR;
    /* each layer's own fusion (fuse_mode: a RoPE model's NoPE layers fuse exactly, SmolLM3's), so a
     * range of those alone truncates; the range's layers share one head part */
    for (int L = o->layer_lo; L <= o->layer_hi; L = layersel_next(c, L + 1, o->layer_hi))
        if (fuse_mode(m, o->kind, L, FARR_NO_OFFSET, part, &rot) != AL_OK) return AL_ERR;
    if (model_views_composite(m))
        return al_err("truncate: this %s model's one KV projection is both W_V and W_K (a V-O truncation changes Q-K) and "
                      "each head's W_O is a product through its group's wo_a and the shared wo_b: folding a plan back "
                      "into those tensors is not built (the ranks and spectra are)", c->model_type);
    if (o->by_rank && o->rank < 1) return al_err("rank must be >= 1 (got %d)", o->rank);
    if (!o->by_rank && !(o->tau > 0 && o->tau <= 1)) return al_err("tau must be in (0, 1] (got %g)", o->tau);
    return AL_OK;
}

/* Policy model-max's first pass: the largest rank any group of the range needs at tau (at least
 * 1) into *fixed, progress reported as the first half of 2 N. */
static int truncate_model_max(Model *m, const FarrTruncOpts *o, head_part part, int *fixed) {
    const ModelConfig *c = &m->cfg;
    int N = layersel_count(c, o->layer_lo, o->layer_hi), mr = 0, i = 0;
    for (int L = o->layer_lo; L <= o->layer_hi; L = layersel_next(c, L + 1, o->layer_hi), i++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        al_progress("layer", (size_t)i, (size_t)(2 * N));
        int lr = 0;
        FarrTruncLayer *none;
        int rc = truncate_layer(m, o, part, L, 0, true, &none, &lr);
        if (rc != AL_OK) return rc;
        if (lr > mr) mr = lr;
    }
    *fixed = mr > 0 ? mr : 1;
    return AL_OK;
}

/* An empty plan of m for o's layers (each NULL until truncated). */
static FarrPlan *plan_new(const Model *m, const FarrTruncOpts *o) {
    FarrPlan *p = al_calloc(1, sizeof *p, "a truncation plan");
    if (!p) return NULL;
    p->opts = *o;
    p->model_path = al_strdup(m->path);
    p->n_layers_model = m->cfg.n_layers;
    p->lo = o->layer_lo; p->hi = o->layer_hi;
    p->layers = al_calloc((size_t)(o->layer_hi - o->layer_lo + 1), sizeof *p->layers, "a truncation plan");
    if (!p->model_path || !p->layers) { farr_plan_free(p); return NULL; }
    return p;
}

/* p's totals over its layers: parameters and KV cache, the largest rank and whether every group
 * has the same, the energy kept and the error (min / max and means over the heads). */
static void plan_totals(FarrPlan *p) {
    double emin = 1, esum = 0, emax = 0, errsum = 0;
    size_t nh = 0;
    int r0 = -1;
    p->uniform = true;
    for (int i = 0; i <= p->hi - p->lo; i++) {
        FarrTruncLayer *l = p->layers[i];
        if (!l) continue;                    /* a hybrid's linear-attention layer: not truncated */
        p->params_before += l->params_before; p->params_after += l->params_after;
        p->kv_before += l->kv_before; p->kv_after += l->kv_after;
        for (int g = 0; g < l->n_kv; g++) {
            FarrGroup *grp = l->groups[g];
            if (grp->rank > p->rank_max) p->rank_max = grp->rank;
            if (r0 < 0) r0 = grp->rank;
            else if (grp->rank != r0) p->uniform = false;
            for (int t = 0; t < grp->n; t++, nh++) {
                if (grp->energy[t] < emin) emin = grp->energy[t];
                esum += grp->energy[t];
                if (grp->err[t] > emax) emax = grp->err[t];
                errsum += grp->err[t];
            }
        }
    }
    p->energy_min = emin; p->energy_mean = nh ? esum / (double)nh : 1;
    p->err_max = emax; p->err_mean = nh ? errsum / (double)nh : 0;
}

/* Gemma 4: whether truncating layer L's W_V would change another layer or W_K, or its plan is sized otherwise. */
static bool trunc_refused(const Model *m, int L) {
    return cfg_kv_source(&m->cfg, L) != L || cfg_layer_v_is_k(&m->cfg, L) || model_layer_cfg(m, L) != &m->cfg;
}

/* The first run of layers truncate takes, as "layers A-B" (or "layer A") into buf. */
static const char *trunc_run(const Model *m, char *buf, size_t cap) {
    int a = 0, b;
    while (a < m->cfg.n_layers && trunc_refused(m, a)) a++;
    for (b = a; b + 1 < m->cfg.n_layers && !trunc_refused(m, b + 1);) b++;
    if (b > a) snprintf(buf, cap, "layers %d-%d", a, b);
    else snprintf(buf, cap, "layer %d", a);
    return buf;
}

int farr_truncate(Model *m, const FarrTruncOpts *opts, FarrPlan **out) {
    *out = NULL;
    FarrTruncOpts o = *opts;
    head_part part;
    if (truncate_opts(m, &o, &part) != AL_OK) return AL_ERR;
    int N = layersel_count(&m->cfg, o.layer_lo, o.layer_hi), i = 0;
    char run[48];
    for (int L = o.layer_lo; L <= o.layer_hi; L++)     /* Gemma 4: a truncated W_V would change another layer or W_K */
        if (trunc_refused(m, L))
            return al_err("truncate: layer %d of %s %s (truncating its W_V would change %s); truncate the other layers "
                          "(`%s`, ...)", L, m->cfg.model_type,
                          cfg_kv_source(&m->cfg, L) != L ? "reads an earlier layer's K / V (num_kv_shared_layers)"
                          : cfg_layer_v_is_k(&m->cfg, L) ? "takes V from k_proj (attention_k_eq_v)"
                                                         : "has its layer type's own head dims (global_head_dim)",
                          cfg_kv_source(&m->cfg, L) != L ? "that layer" : cfg_layer_v_is_k(&m->cfg, L) ? "its keys too"
                                                                        : "a plan sized by the other layers",
                          trunc_run(m, run, sizeof run));
    int fixed = o.by_rank ? o.rank : -1;
    bool two = !o.by_rank && o.policy == FARR_POLICY_MODEL_MAX;
    if (two) {
        int rc = truncate_model_max(m, &o, part, &fixed);
        if (rc != AL_OK) return rc;
    }
    FarrPlan *p = plan_new(m, &o);
    if (!p) return AL_ERR;
    for (int L = o.layer_lo; L <= o.layer_hi; L = layersel_next(&m->cfg, L + 1, o.layer_hi), i++) {
        if (al_interrupted()) { farr_plan_free(p); return AL_INTERRUPTED; }
        al_progress("layer", (size_t)(two ? N + i : i), (size_t)(two ? 2 * N : N));
        int rc = truncate_layer(m, &o, part, L, fixed, false, &p->layers[L - o.layer_lo], NULL);
        if (rc != AL_OK) { farr_plan_free(p); return rc; }
    }
    al_progress("layer", (size_t)(two ? 2 * N : N), (size_t)(two ? 2 * N : N));
    plan_totals(p);
    *out = p;
    return AL_OK;
}

/* ================================================================ session cache */

typedef struct {
    const Model *m;
    farr_kind kind;
    int layer, offset;
    FarrLayer *l;
} CacheEntry;

typedef struct {
    const Model *m;
    FarrPlan *plan[2];       /* by farr_kind */
} WorkEntry;

struct FarrState {
    CacheEntry *e;
    size_t n, cap;
    WorkEntry *w;
    size_t nw, capw;
    size_t hits, computed;
    size_t redone;           /* fast-route heads recomputed in double (certification, exact views) */
    FarrFused *fused;        /* the kept fused head, or NULL */
};

FarrState *farr_state_new(void) { return al_calloc(1, sizeof(FarrState), "the FaRR state"); }

void farr_state_free(FarrState *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) farr_layer_free(st->e[i].l);
    for (size_t i = 0; i < st->nw; i++) { farr_plan_free(st->w[i].plan[0]); farr_plan_free(st->w[i].plan[1]); }
    free(st->e); free(st->w);
    farr_fused_free(st->fused);
    free(st);
}

void farr_state_drop_model(FarrState *st, const Model *m) {
    if (!st) return;
    size_t j = 0;
    for (size_t i = 0; i < st->n; i++) {
        if (st->e[i].m == m) farr_layer_free(st->e[i].l);
        else st->e[j++] = st->e[i];
    }
    st->n = j;
    j = 0;
    for (size_t i = 0; i < st->nw; i++) {
        if (st->w[i].m == m) { farr_plan_free(st->w[i].plan[0]); farr_plan_free(st->w[i].plan[1]); }
        else st->w[j++] = st->w[i];
    }
    st->nw = j;
    if (st->fused && st->fused->model == m) { farr_fused_free(st->fused); st->fused = NULL; }
}

static CacheEntry *cache_find(const FarrState *st, const Model *m, farr_kind kind, int layer, int offset) {
    for (size_t i = 0; i < st->n; i++) {
        CacheEntry *e = &st->e[i];
        if (e->m == m && e->kind == kind && e->layer == layer && e->offset == offset) return e;
    }
    return NULL;
}

const FarrLayer *farr_state_get_layer(const FarrState *st, const Model *m, farr_kind kind, int layer, int offset) {
    if (!st) return NULL;
    CacheEntry *e = cache_find(st, m, kind, layer, offset);
    return e ? e->l : NULL;
}

/* Rank tables take the fast route, certified at tau, where the CPU has AVX-512 BF16 (faster than
 * the double route on the R1 shape and the demos, bench/README.md); the double (stream) route
 * when forced (tests, benchmarks) or where the fast Grams would take the float path (slower than
 * dsyrk as it stands). */
static bool force_double = false;

void farr_force_double(bool on) { force_double = on; }

/* The layer from the cache or computed: `exact` asks for the double route's spectra (a cached
 * fast-route layer is made exact in place), otherwise the sweep's route -- FARR_ROUTE_RANKS when
 * the caller reads ranks only; a cached coarse layer asked for its values is computed again. */
static int state_layer(FarrState *st, Model *m, farr_kind kind, int layer, int offset, bool exact, bool ranks_only,
                       const FarrLayer **out) {
    *out = NULL;
    CacheEntry *e = cache_find(st, m, kind, layer, offset);
    if (e && e->l->coarse && !exact && !ranks_only) {
        FarrLayer *l;
        int rc = farr_layer_compute_route(m, kind, layer, offset, FARR_ROUTE_FAST, &l);
        if (rc != AL_OK) return rc;
        farr_layer_free(e->l);
        e->l = l;
        *out = l;
        return AL_OK;
    }
    if (e) {
        st->hits++;
        if (exact && e->l->eps) {
            int rc = farr_layer_exact(m, e->l, &st->redone);
            if (rc != AL_OK) return rc;
        }
        *out = e->l;
        return AL_OK;
    }
    FarrLayer *l;
    farr_route route = exact || force_double || !gram_fast_pays() ? FARR_ROUTE_STREAM
                       : ranks_only                                 ? FARR_ROUTE_RANKS
                                                                    : FARR_ROUTE_FAST;
    int rc = farr_layer_compute_route(m, kind, layer, offset, route, &l);
    if (rc != AL_OK) return rc;
    if (al_reserve(&st->e, &st->cap, st->n + 1, sizeof *st->e, "the FaRR cache")) {
        farr_layer_free(l);
        return AL_ERR;
    }
    st->e[st->n++] = (CacheEntry){ .m = m, .kind = kind, .layer = layer, .offset = offset, .l = l };
    st->computed++;
    *out = l;
    return AL_OK;
}

int farr_state_layer(FarrState *st, Model *m, farr_kind kind, int layer, int offset, const FarrLayer **out) {
    return state_layer(st, m, kind, layer, offset, true, false, out);
}

/* The next uncached layer `layer` of the sweep's range read on a thread (gram_prefetch_start: into
 * one of slots where its pages are not in the page cache); NULL past q->hi or when cached. */
static GramAhead *sweep_ahead(FarrState *st, const FarrQuery *q, int layer, GramSlots *slots) {
    layer = layersel_next(&q->m->cfg, layer, q->hi);
    if (layer > q->hi || cache_find(st, q->m, q->kind, layer, q->offset)) return NULL;
    return gram_prefetch_start(q->m, layer, farr_shared_kind(q->kind), farr_own_kind(q->kind), slots);
}

int farr_state_sweep(FarrState *st, const FarrQuery *q) {
    const ModelConfig *c = &q->m->cfg;
    int lo = q->lo, hi = q->hi;
    if (hi >= lo && layersel_range(c, farr_fused_name(q->kind), &lo, &hi, NULL, 0) != AL_OK) return AL_ERR;
    int N = layersel_count(c, lo, hi), rc = AL_OK, i = 0;
    GramSlots *slots = gram_slots_new(gram_direct_get());
    GramAhead *ahead = sweep_ahead(st, q, lo, slots);
    for (int L = lo; L <= hi && rc == AL_OK; L = layersel_next(c, L + 1, hi), i++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        al_progress("layer", (size_t)i, (size_t)N);
        /* this layer's reads done (they ran while the last one computed), the next one's begin */
        GramAhead *now = ahead;
        gram_prefetch_wait(now);
        ahead = sweep_ahead(st, q, L + 1, slots);
        const FarrLayer *l;
        rc = state_layer(st, q->m, q->kind, L, q->offset, false, q->ranks_only, &l);
        gram_prefetch_end(now, false);
    }
    gram_prefetch_end(ahead, true);
    gram_slots_free(slots);
    if (rc == AL_OK) al_progress("layer", (size_t)N, (size_t)N);
    return rc;
}

int farr_state_certify(FarrState *st, const FarrQuery *q, double tau) {
    /* A Ctrl-C that stopped the sweep is held back: certifying the layers it kept redoes a few
     * heads at most, so their rank table still comes (a new Ctrl-C stops it). */
    sig_atomic_t held = al_interrupt_flag;
    al_interrupt_flag = 0;
    int rc = AL_OK;
    for (int L = layersel_next(&q->m->cfg, q->lo, q->hi); L <= q->hi && rc == AL_OK;
         L = layersel_next(&q->m->cfg, L + 1, q->hi)) {
        CacheEntry *e = cache_find(st, q->m, q->kind, L, q->offset);
        if (!e) rc = al_err("layer %d has no %s spectra yet (sweep it first)", L, farr_fused_name(q->kind));
        else if (e->l->eps && al_interrupted()) rc = AL_INTERRUPTED;
        else if (e->l->eps) rc = farr_layer_certify(q->m, e->l, tau, &st->redone);   /* exact: nothing to redo */
    }
    if (held) al_interrupt_flag = held;
    return rc;
}

int farr_state_rank_table(FarrState *st, const FarrQuery *q, double tau, FarrRankRow **rows, size_t *n) {
    *rows = NULL;
    *n = 0;
    if (q->hi < q->lo) return al_err("empty layer range %d-%d", q->lo, q->hi);
    int rc = farr_state_certify(st, q, tau);
    if (rc != AL_OK) return rc;
    const ModelConfig *c = &q->m->cfg;
    size_t cap = (size_t)layersel_count(c, q->lo, q->hi) * (size_t)c->n_heads;
    FarrRankRow *r = al_calloc(cap ? cap : 1, sizeof *r, "a rank table");
    if (!r) return AL_ERR;
    size_t k = 0;
    for (int L = layersel_next(c, q->lo, q->hi); L <= q->hi; L = layersel_next(c, L + 1, q->hi)) {
        const FarrLayer *l = farr_state_get_layer(st, q->m, q->kind, L, q->offset);
        for (int h = 0; h < l->n_heads && k < cap; h++, k++) {
            r[k].layer = L;
            r[k].head = h;
            farr_layer_ranks(l, h, tau, &r[k].rank_a, &r[k].rank_b, &r[k].rank_fused);
        }
    }
    *rows = r;
    *n = k;
    return AL_OK;
}

size_t farr_state_redone(const FarrState *st) { return st ? st->redone : 0; }

void farr_state_stats(const FarrState *st, size_t *hits, size_t *computed) {
    if (hits) *hits = st ? st->hits : 0;
    if (computed) *computed = st ? st->computed : 0;
}

int farr_state_set_plan(FarrState *st, const Model *m, FarrPlan *plan) {
    WorkEntry *w = NULL;
    for (size_t i = 0; i < st->nw; i++) if (st->w[i].m == m) w = &st->w[i];
    if (!w) {
        if (al_reserve(&st->w, &st->capw, st->nw + 1, sizeof *st->w, "the kept truncations")) {
            farr_plan_free(plan);
            return AL_ERR;
        }
        w = &st->w[st->nw++];
        *w = (WorkEntry){ .m = m };
    }
    farr_plan_free(w->plan[plan->opts.kind]);
    w->plan[plan->opts.kind] = plan;
    return AL_OK;
}

const FarrPlan *farr_state_plan(const FarrState *st, const Model *m, farr_kind kind) {
    if (!st) return NULL;
    for (size_t i = 0; i < st->nw; i++) if (st->w[i].m == m) return st->w[i].plan[kind];
    return NULL;
}

void farr_state_set_fused(FarrState *st, FarrFused *f) {
    farr_fused_free(st->fused);
    st->fused = f;
}

const FarrFused *farr_state_fused(const FarrState *st) { return st ? st->fused : NULL; }

/* ================================================================ the working copy as a layer */

/* The working copy's heads are written as their export writes them: pad.h (zeros past each rank). */

/* True when group g keeps its full rank (w: the pair's width) and the layer adjusts no bias: its weights stay the
 * source's, as the export keeps them (export.c's keep_group). An output gate or v_norm acts on each value dim, so a
 * full-rank group in another basis would not be the source's map there. */
static bool keep_source(const FarrTruncLayer *tl, int g, int w) {
    return !tl->shared_bias && !tl->head_bias && !tl->o_bias_delta && tl->groups[g]->rank >= w;
}

/* VO of one layer (see farr_attn_layer). */
static int fold_vo(const ModelConfig *c, const FarrTruncLayer *tl, AttnLayer *L) {
    size_t dv = (size_t)c->v_dim, kvrow = (size_t)(c->qk_nope_dim + c->v_dim);
    bool mla = L->kind == ATTN_MLA;
    for (int g = 0; g < tl->n_kv; g++) {
        const FarrGroup *grp = tl->groups[g];
        if (keep_source(tl, g, c->v_dim)) continue;
        PadSrc V = pad_src(grp->shared, true, 1.0f);
        if (mla) { pad_cols(L->W_KVB, 0, (size_t)g * kvrow + (size_t)c->qk_nope_dim, dv, V); continue; }
        pad_cols(L->W_V, 0, (size_t)g * dv, dv, V);
        if (L->b_V) pad_vec(L->b_V + (size_t)g * dv, dv, tl->shared_bias ? tl->shared_bias[g] : NULL, (size_t)grp->rank);
    }
    for (int h = 0; h < c->n_heads; h++) {
        int g = cfg_kv_group(c, h), per = c->n_heads / tl->n_kv;
        if (!keep_source(tl, g, c->v_dim))
            pad_rows(L->W_O, 0, (size_t)h * dv, dv, pad_src(tl->groups[g]->head[h - g * per], false, 1.0f));
    }
    if (tl->o_bias_delta) {
        size_t D = (size_t)c->hidden;
        if (!L->b_O && !(L->b_O = al_calloc(D, sizeof(float), "the output bias"))) return AL_ERR;
        for (size_t i = 0; i < D; i++) L->b_O[i] += tl->o_bias_delta[i];
    }
    return AL_OK;
}

/* QK of one layer over the fused part of each head (see farr_attn_layer). */
static void fold_qk(const ModelConfig *c, const FarrTruncLayer *tl, AttnLayer *L) {
    bool mla = L->kind == ATTN_MLA, nope = mla || (c->qk_nope_dim > 0 && c->qk_rope_dim > 0);
    size_t d = (size_t)cfg_d_qk(c), off = mla ? 0 : nope ? (size_t)cfg_nope_col(c) : 0;
    size_t w = nope ? (size_t)c->qk_nope_dim : d, kstride = mla ? (size_t)(c->qk_nope_dim + c->v_dim) : d;
    for (int g = 0; g < tl->n_kv; g++) {
        if (keep_source(tl, g, (int)w)) continue;
        pad_cols(mla ? L->W_KVB : L->W_K, 0, (size_t)g * kstride + off, w, pad_src(tl->groups[g]->shared, true, 1.0f));
        if (!mla && L->b_K) pad_vec(L->b_K + (size_t)g * d + off, w, NULL, 0);      /* b_K' = 0: constant per query */
    }
    for (int h = 0; h < c->n_heads; h++) {
        int g = cfg_kv_group(c, h), per = c->n_heads / tl->n_kv;
        const Mat *F = tl->groups[g]->head[h - g * per];
        if (keep_source(tl, g, (int)w)) continue;
        pad_cols(L->W_QB ? L->W_QB : L->W_Q, 0, (size_t)h * d + off, w, pad_src(F, true, 1.0f));
        if (!mla && L->b_Q) pad_vec(L->b_Q + (size_t)h * d + off, w, tl->head_bias ? tl->head_bias[h] : NULL, F->cols);
    }
}

int farr_attn_layer(Model *m, const FarrPlan *vo, const FarrPlan *qk, int layer, AttnLayer **out) {
    *out = NULL;
    const FarrTruncLayer *tv = farr_plan_layer(vo, layer), *tq = farr_plan_layer(qk, layer);
    if (!tv && !tq) return AL_OK;
    AttnLayer *L = NULL;
    if (attn_layer_load(m, layer, &L)) return AL_ERR;
    int rc = tv ? fold_vo(&m->cfg, tv, L) : AL_OK;
    if (rc == AL_OK && tq) fold_qk(&m->cfg, tq, L);
    if (rc == AL_OK) rc = attn_layer_validate(L);
    if (rc) { attn_layer_free(L); return al_err_ctx("the truncated layer %d", layer); }
    *out = L;
    return AL_OK;
}
