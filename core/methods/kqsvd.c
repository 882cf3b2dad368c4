/* kqsvd.c -- K-SVD, Eigen and KQ-SVD projections from calibration Grams, their Gram-based and
 * attention-output errors and the evaluation driver over the forward pass (the export is in
 * kqsvd_export.c). See
 * kqsvd.h for the math; every O(d³) step is BLAS / LAPACK in double, attention recomputation is
 * float sgemm like the forward pass. Owns nothing global. */
#define _GNU_SOURCE
#include "kqsvd.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"
#include "rope.h"
#include "safetensors.h"

#define QB 64                 /* query rows per attention block */

/* ================================================================ names */

const char *kq_method_name(kq_method m) {
    static const char *n[] = {"ksvd", "eigen", "kqsvd"};
    return m >= 0 && m < KQ_NMETHODS ? n[m] : "?";
}

const char *kq_method_label(kq_method m) {
    static const char *n[] = {"K-SVD", "Eigen", "KQ-SVD"};
    return m >= 0 && m < KQ_NMETHODS ? n[m] : "?";
}

/* ================================================================ one head */

int kq_eig(const double *G, size_t n, double *lambda, double *V) {
    if (n == 0) return AL_OK;
    if (n > INT_MAX) return al_err("kq_eig: matrix of order %zu is too large", n);
    double *W = al_malloc3(n, n, sizeof *W, "eigen-solve"), *w = al_malloc3(n, 1, sizeof *w, "eigen-solve");
    if (!W || !w) { free(W); free(w); return AL_ERR; }
    memcpy(W, G, n * n * sizeof *W);
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)n, W, (lapack_int)n, w);
    if (info != 0) { free(W); free(w); return al_err("LAPACKE_dsyevd failed (info %d) on a %zu x %zu Gram matrix", (int)info, n, n); }
    for (size_t k = 0; k < n; k++) {                /* ascending -> descending */
        double l = w[n - 1 - k];
        lambda[k] = l > 0 ? l : 0;
        for (size_t i = 0; i < n; i++) V[i * n + k] = W[i * n + n - 1 - k];
    }
    free(W);
    free(w);
    return AL_OK;
}

/* A = B = the first R columns of V (n x n). */
static void top_cols(const double *V, size_t n, size_t R, double *A, double *B) {
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < R; r++) {
            A[i * R + r] = V[i * n + r];
            if (B) B[i * R + r] = V[i * n + r];
        }
}

/* Square roots of eigenvalues above the numerical floor (0 below it) and their inverses. */
static void sqrt_floor(const double *lambda, size_t n, double *s, double *inv) {
    double tol = lambda[0] * (double)n * DBL_EPSILON * 8;
    for (size_t i = 0; i < n; i++) {
        bool ok = lambda[i] > tol && lambda[i] > 0;
        s[i] = ok ? sqrt(lambda[i]) : 0;
        if (inv) inv[i] = ok ? 1 / s[i] : 0;
    }
}

/* Theorem 2 from Grams (see kqsvd.h): A = V_K Λ_K^{+½} U'_R, B = V_K Λ_K^½ U'_R. */
static int proj_kqsvd(const double *G_K, const double *G_Q, size_t n, size_t R, double *A, double *B, double *sigma) {
    size_t nn = n * n;
    double *buf = al_malloc3(nn, 6, sizeof(double), "KQ-SVD scratch");
    double *vec = al_malloc3(n, 6, sizeof(double), "KQ-SVD scratch");
    if (!buf || !vec) { free(buf); free(vec); return AL_ERR; }
    double *VK = buf, *VQ = buf + nn, *C = buf + 2 * nn, *U = buf + 3 * nn, *VT = buf + 4 * nn, *T1 = buf + 5 * nn;
    double *lk = vec, *lq = vec + n, *sk = vec + 2 * n, *isk = vec + 3 * n, *sq = vec + 4 * n, *s = vec + 5 * n;
    int rc = kq_eig(G_K, n, lk, VK);
    if (rc == AL_OK) rc = kq_eig(G_Q, n, lq, VQ);
    if (rc == AL_OK) {
        sqrt_floor(lk, n, sk, isk);
        sqrt_floor(lq, n, sq, NULL);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, VK, (int)n, VQ, (int)n, 0.0, C,
                    (int)n);                                     /* V_Kᵀ V_Q */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) C[i * n + j] *= sk[i] * sq[j];
        lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'A', (lapack_int)n, (lapack_int)n, C, (lapack_int)n, s, U,
                                         (lapack_int)n, VT, (lapack_int)n);
        if (info != 0) rc = al_err("LAPACKE_dgesdd failed (info %d) on the %zu x %zu KQ-SVD core", (int)info, n, n);
    }
    if (rc == AL_OK) {
        if (sigma) memcpy(sigma, s, n * sizeof *s);
        if (s[0] <= 0) {                                         /* K Qᵀ = 0: any S is optimal; take K-SVD's */
            top_cols(VK, n, R, A, B);
        } else {
            for (size_t i = 0; i < n; i++)
                for (size_t r = 0; r < R; r++) T1[i * R + r] = isk[i] * U[i * n + r];
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)n, 1.0, VK, (int)n, T1, (int)R,
                        0.0, A, (int)R);
            for (size_t i = 0; i < n; i++)
                for (size_t r = 0; r < R; r++) T1[i * R + r] = sk[i] * U[i * n + r];
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)n, 1.0, VK, (int)n, T1, (int)R,
                        0.0, B, (int)R);
        }
    }
    free(buf);
    free(vec);
    return rc;
}

int kq_proj(kq_method m, const double *G_K, const double *G_Q, size_t n, size_t R, double *A, double *B,
            double *sigma_kq) {
    if (n == 0) return AL_OK;
    if (R > n) R = n;
    if (R == 0) return al_err("KQ-SVD projection: rank 0; the rank must be at least 1");
    if (n > 65536) return al_err("KQ-SVD projection: head dim %zu is too large", n);
    if (m == KQ_KQSVD) {
        if (!G_Q) return al_err("KQ-SVD needs the query (or output) Gram matrix");
        return proj_kqsvd(G_K, G_Q, n, R, A, B, sigma_kq);
    }
    if (m != KQ_KSVD && m != KQ_EIGEN) return al_err("unknown projection method %d", (int)m);
    if (m == KQ_EIGEN && !G_Q) return al_err("Eigen needs the query Gram matrix");
    double *G = al_malloc3(n, n, sizeof *G, "projection scratch"), *V = al_malloc3(n, n, sizeof *V, "projection scratch");
    double *l = al_malloc3(n, 1, sizeof *l, "projection scratch");
    int rc = G && V && l ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        for (size_t i = 0; i < n * n; i++) G[i] = G_K[i] + (m == KQ_EIGEN ? G_Q[i] : 0);   /* [K ; Q] stacked */
        rc = kq_eig(G, n, l, V);
    }
    if (rc == AL_OK) top_cols(V, n, R, A, B);
    free(G); free(V); free(l);
    return rc;
}

/* Σ_ij X_ij Y_ij (= tr(Xᵀ Y)). */
static double dot_all(const double *X, const double *Y, size_t nn) {
    double s = 0;
    for (size_t i = 0; i < nn; i++) s += X[i] * Y[i];
    return s;
}

int kq_gram_err(const double *G_K, const double *G_Q, size_t n, const double *A, const double *B, size_t R,
                KqGramErr *e) {
    memset(e, 0, sizeof *e);
    if (n == 0) return AL_OK;
    size_t nn = n * n;
    double *E = al_malloc3(nn, 3, sizeof(double), "error scratch");
    if (!E) return AL_ERR;
    double *M1 = E + nn, *M2 = E + 2 * nn;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)R, -1.0, A, (int)R, B, (int)R, 0.0, E,
                (int)n);                                         /* E = I - A Bᵀ */
    for (size_t i = 0; i < n; i++) E[i * n + i] += 1.0;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, G_K, (int)n, E, (int)n, 0.0, M1,
                (int)n);                                         /* G_K E */
    e->k = dot_all(E, M1, nn);                                   /* tr(Eᵀ G_K E) */
    for (size_t i = 0; i < n; i++) e->nk += G_K[i * n + i];
    if (G_Q) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, E, (int)n, G_Q, (int)n, 0.0,
                    M2, (int)n);                                 /* E G_Q */
        e->q = dot_all(M2, E, nn);                               /* tr(E G_Q Eᵀ) */
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, E, (int)n, M1, (int)n, 0.0, M2,
                    (int)n);                                     /* Eᵀ G_K E */
        e->kq = dot_all(M2, G_Q, nn);                            /* tr(Eᵀ G_K E G_Q), G_Q symmetric */
        e->nkq = dot_all(G_K, G_Q, nn);                          /* tr(G_K G_Q) */
        for (size_t i = 0; i < n; i++) e->nq += G_Q[i * n + i];
    }
    /* Rounding can leave tiny negatives where the error is zero. */
    if (e->k < 0) e->k = 0;
    if (e->q < 0) e->q = 0;
    if (e->kq < 0) e->kq = 0;
    free(E);
    return AL_OK;
}

size_t kq_rank_eps(const double *lambdas, size_t nheads, size_t n, double eps) {
    if (n == 0) return 0;
    for (size_t R = 1; R <= n; R++) {
        double avg = 0;
        for (size_t h = 0; h < nheads; h++) {
            const double *l = lambdas + h * n;
            double tot = 0, kept = 0;
            for (size_t j = 0; j < n; j++) tot += l[j];
            for (size_t j = 0; j < R; j++) kept += l[j];
            avg += tot > 0 ? kept / tot : 1.0;
        }
        avg /= nheads ? (double)nheads : 1.0;
        if (avg >= 1.0 - eps - 1e-12) return R;
    }
    return n;
}

/* ================================================================ a model's projections */

void kq_proj_free(KqProj *p) {
    if (!p) return;
    for (int l = 0; l < p->sh.n_layers; l++) {
        if (p->A_K) free(p->A_K[l]);
        if (p->B_K) free(p->B_K[l]);
        if (p->A_V) free(p->A_V[l]);
        if (p->B_V) free(p->B_V[l]);
    }
    free(p->A_K); free(p->B_K); free(p->A_V); free(p->B_V);
    free(p->rank_k); free(p->rank_v);
    free(p->cal_k); free(p->cal_v);
    free(p);
}

int kq_wo_grams(Model *m, double **out) {
    *out = NULL;
    CalibShape sh;
    if (calib_shape_of(m, &sh)) return AL_ERR;
    size_t L = (size_t)sh.n_layers, G = (size_t)sh.n_kv_heads, dv = (size_t)sh.d_v, D = (size_t)sh.hidden;
    size_t per = G * dv * dv, n;
    if (!al_mul_ok(L, per, &n, "output Gram matrices")) return AL_ERR;
    double *GW = al_calloc(n, sizeof *GW, "output Gram matrices"), *W = al_malloc3(dv, D, sizeof *W, "W_O head");
    int rc = GW && W ? AL_OK : AL_ERR;
    for (size_t l = 0; rc == AL_OK && l < L; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        rc = model_layer_load(m, (int)l);
        for (int h = 0; rc == AL_OK && h < sh.n_heads; h++) {
            Mat *Wo = NULL;
            rc = model_head(m, HK_O, (int)l, h, PART_ALL, &Wo);
            if (rc) break;
            if (Wo->rows != dv || Wo->cols != D) {
                rc = al_err("%s layer %zu head %d: W_O is %zu x %zu, expected %zu x %zu", m->name, l, h, Wo->rows,
                            Wo->cols, dv, D);
                mat_free(Wo);
                break;
            }
            vec_f2d(Wo->data, dv * D, W);
            mat_free(Wo);
            double *C = GW + l * per + (size_t)(h / calib_group(&sh)) * dv * dv;
            cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)dv, (int)D, 1.0, W, (int)D, 1.0, C, (int)dv);
        }
        for (size_t g = 0; rc == AL_OK && g < G; g++) {                  /* mirror the upper triangle */
            double *C = GW + l * per + g * dv * dv;
            for (size_t i = 0; i < dv; i++)
                for (size_t j = i + 1; j < dv; j++) C[j * dv + i] = C[i * dv + j];
        }
    }
    free(W);
    if (rc) { free(GW); return rc; }
    *out = GW;
    return AL_OK;
}

/* Allocates the per-layer arrays of p. */
static int proj_alloc(KqProj *p) {
    size_t L = (size_t)p->sh.n_layers;
    p->rank_k = al_calloc(L, sizeof(int), "projection ranks");
    p->rank_v = al_calloc(L, sizeof(int), "projection ranks");
    p->A_K = al_calloc(L, sizeof(double *), "projections");
    p->B_K = al_calloc(L, sizeof(double *), "projections");
    p->A_V = al_calloc(L, sizeof(double *), "projections");
    p->B_V = al_calloc(L, sizeof(double *), "projections");
    p->cal_k = al_calloc(L, sizeof(KqGramErr), "projection errors");
    p->cal_v = al_calloc(L, sizeof(KqGramErr), "projection errors");
    return p->rank_k && p->rank_v && p->A_K && p->B_K && p->A_V && p->B_V && p->cal_k && p->cal_v ? AL_OK : AL_ERR;
}

static void err_add(KqGramErr *s, const KqGramErr *e) {
    s->k += e->k; s->q += e->q; s->kq += e->kq;
    s->nk += e->nk; s->nq += e->nq; s->nkq += e->nkq;
}

/* Eigenvalues of the G Grams of one kind (n x n each, consecutive) into lam (G, n), for rank-from-eps. */
static int head_spectra(const double *grams, size_t G, size_t n, double *lam, double *Vscr) {
    for (size_t g = 0; g < G; g++)
        if (kq_eig(grams + g * n * n, n, lam + g * n, Vscr)) return AL_ERR;
    return AL_OK;
}

/* One layer of kq_learn: Grams gk, gq (G, d, d), gv (G, dv, dv), gw (G, dv, dv) or NULL. */
static int learn_layer(KqProj *p, int l, const double *gk, const double *gq, const double *gv, const double *gw,
                       double *lam, double *Vscr) {
    const CalibShape *sh = &p->sh;
    size_t G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v;
    size_t Rk, Rv;
    if (p->spec.by_eps) {
        if (head_spectra(gk, G, d, lam, Vscr)) return AL_ERR;
        Rk = kq_rank_eps(lam, G, d, p->spec.eps);
        if (head_spectra(gv, G, dv, lam, Vscr)) return AL_ERR;
        Rv = kq_rank_eps(lam, G, dv, p->spec.eps);
    } else {
        Rk = (size_t)p->spec.rank < d ? (size_t)p->spec.rank : d;
        Rv = (size_t)p->spec.rank < dv ? (size_t)p->spec.rank : dv;
    }
    p->rank_k[l] = (int)Rk;
    p->rank_v[l] = (int)Rv;
    p->A_K[l] = al_malloc3(G * d, Rk, sizeof(double), "key projections");
    p->B_K[l] = al_malloc3(G * d, Rk, sizeof(double), "key projections");
    p->A_V[l] = al_malloc3(G * dv, Rv, sizeof(double), "value projections");
    p->B_V[l] = al_malloc3(G * dv, Rv, sizeof(double), "value projections");
    if (!p->A_K[l] || !p->B_K[l] || !p->A_V[l] || !p->B_V[l]) return AL_ERR;
    kq_method vm = p->method == KQ_KQSVD ? KQ_KQSVD : KQ_KSVD;
    for (size_t g = 0; g < G; g++) {
        const double *K = gk + g * d * d, *Q = gq + g * d * d, *V = gv + g * dv * dv, *W = gw ? gw + g * dv * dv : NULL;
        double *Ak = p->A_K[l] + g * d * Rk, *Bk = p->B_K[l] + g * d * Rk;
        double *Av = p->A_V[l] + g * dv * Rv, *Bv = p->B_V[l] + g * dv * Rv;
        KqGramErr e;
        if (kq_proj(p->method, K, Q, d, Rk, Ak, Bk, NULL) || kq_gram_err(K, Q, d, Ak, Bk, Rk, &e)) return AL_ERR;
        err_add(&p->cal_k[l], &e);
        if (kq_proj(vm, V, W, dv, Rv, Av, Bv, NULL) || kq_gram_err(V, W, dv, Av, Bv, Rv, &e)) return AL_ERR;
        err_add(&p->cal_v[l], &e);
    }
    return AL_OK;
}

int kq_learn(const CalibStats *st, const double *G_W, kq_method m, const KqSpec *spec, KqProj **out) {
    *out = NULL;
    const CalibShape *sh = &st->sh;
    if (m < 0 || m >= KQ_NMETHODS) return al_err("unknown projection method %d", (int)m);
    if (spec->by_eps && !(spec->eps > 0 && spec->eps < 1)) return al_err("eps %g must be in (0, 1)", spec->eps);
    if (!spec->by_eps && spec->rank < 1) return al_err("rank %d must be at least 1", spec->rank);
    if (!(spec->beta > 0) || !isfinite(spec->beta)) return al_err("beta %g must be a positive number", spec->beta);
    if (m == KQ_KQSVD && !G_W)
        return al_err("KQ-SVD's value projection needs the output-projection Grams W_O W_Oᵀ (kq_wo_grams)");
    KqProj *p = al_calloc(1, sizeof *p, "projections");
    if (!p) return AL_ERR;
    p->method = m;
    p->spec = *spec;
    p->sh = *sh;
    size_t G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v, n = d > dv ? d : dv;
    double *gk = al_malloc3(G * d, d, sizeof(double), "Grams"), *gq = al_malloc3(G * d, d, sizeof(double), "Grams");
    double *gv = al_malloc3(G * dv, dv, sizeof(double), "Grams"), *lam = al_malloc3(G, n, sizeof(double), "spectra");
    double *Vscr = al_malloc3(n, n, sizeof(double), "spectra");
    int rc = proj_alloc(p) == AL_OK && gk && gq && gv && lam && Vscr ? AL_OK : AL_ERR;
    double b2 = spec->beta * spec->beta;
    for (int l = 0; rc == AL_OK && l < sh->n_layers; l++) {
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        if (st->tokens[l] == 0) { rc = al_err("layer %d has no calibration tokens: run `calibrate` first", l); break; }
        for (size_t g = 0; rc == AL_OK && g < G; g++)
            rc = calib_gram(st, CALIB_K, l, (int)g, gk + g * d * d) || calib_gram(st, CALIB_Q, l, (int)g, gq + g * d * d) ||
                 calib_gram(st, CALIB_V, l, (int)g, gv + g * dv * dv);
        if (rc) break;
        if (b2 != 1.0)
            for (size_t i = 0; i < G * d * d; i++) { gk[i] *= b2; gq[i] /= b2; }
        rc = learn_layer(p, l, gk, gq, gv, G_W ? G_W + (size_t)l * G * dv * dv : NULL, lam, Vscr);
        al_progress("layer", (size_t)l + 1, (size_t)sh->n_layers);
    }
    al_progress(NULL, 0, 0);
    free(gk); free(gq); free(gv); free(lam); free(Vscr);
    if (rc) { kq_proj_free(p); return rc; }
    *out = p;
    return AL_OK;
}

/* ================================================================ evaluation */

struct KqEval {
    CalibShape sh;
    const KqProj *const *sets;
    size_t nsets;
    double *sum;              /* (nsets, L, 5) sums of relative errors: k, q, v, kq, out */
    size_t *cnt;              /* (L) sequences evaluated per layer */
    double ref_diff;
    CalibStats *seq;          /* one layer's per-sequence Grams */
    double *gk, *gq, *gv;     /* (G, d, d), (G, d, d), (G, dv, dv) full copies */
    float *Kt, *Vt;           /* (T, G d), (T, G dv) projected caches */
    float *Hx, *Ht;           /* (T, H dv) exact / approximate head outputs */
    float *Ox, *Ot;           /* (T, hidden) */
    float *S;                 /* (max(d, dv)²) one head's projection in float */
    float *scores;            /* (workers, QB, T) */
    size_t T_cap, hid_cap;
    int workers;
    /* the forward driver's copies of one layer (kq_eval_run) */
    float *Qb, *Kb, *Vb;
    size_t run_T;
    Model *m;
    float **W_O;              /* (L) (H dv, hidden) or NULL when not loaded */
    bool wo_keep;             /* keep every layer's W_O (it fits) */
    double *scale;            /* (L) */
    size_t *window;           /* (L) */
    Forward *f;               /* the pass kq_eval_run drives (its layers' sink logits) */
    const float *sinks;       /* (H) the current layer's sink logits (gpt-oss) or NULL */
};

int kq_eval_new(const CalibShape *sh, const KqProj *const *sets, size_t nsets, KqEval **out) {
    *out = NULL;
    for (size_t s = 0; s < nsets; s++) {
        const CalibShape *p = &sets[s]->sh;
        if (p->n_layers != sh->n_layers || p->n_kv_heads != sh->n_kv_heads || p->n_heads != sh->n_heads ||
            p->d_qk != sh->d_qk || p->d_v != sh->d_v)
            return al_err("evaluation: projection set %zu (%s) was learned for another shape", s,
                          kq_method_name(sets[s]->method));
    }
    KqEval *ev = al_calloc(1, sizeof *ev, "evaluator");
    if (!ev) return AL_ERR;
    ev->sh = *sh;
    ev->sets = sets;
    ev->nsets = nsets;
    size_t L = (size_t)sh->n_layers, G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v;
    size_t n = d > dv ? d : dv;
    CalibShape one = *sh;
    one.n_layers = 1;
    ev->sum = al_calloc(nsets ? nsets * L * 5 : 1, sizeof(double), "evaluation sums");
    ev->cnt = al_calloc(L, sizeof(size_t), "evaluation counts");
    ev->gk = al_malloc3(G * d, d, sizeof(double), "per-sequence Grams");
    ev->gq = al_malloc3(G * d, d, sizeof(double), "per-sequence Grams");
    ev->gv = al_malloc3(G * dv, dv, sizeof(double), "per-sequence Grams");
    ev->S = al_malloc3(n, n, sizeof(float), "projection");
    ev->workers = sweep_threads((size_t)sh->n_heads, 0);
    if (!ev->sum || !ev->cnt || !ev->gk || !ev->gq || !ev->gv || !ev->S || calib_new(&one, false, &ev->seq)) {
        kq_eval_free(ev);
        return AL_ERR;
    }
    *out = ev;
    return AL_OK;
}

void kq_eval_free(KqEval *ev) {
    if (!ev) return;
    free(ev->sum); free(ev->cnt);
    calib_free(ev->seq);
    free(ev->gk); free(ev->gq); free(ev->gv);
    free(ev->Kt); free(ev->Vt); free(ev->Hx); free(ev->Ht); free(ev->Ox); free(ev->Ot); free(ev->S); free(ev->scores);
    free(ev->Qb); free(ev->Kb); free(ev->Vb);
    if (ev->W_O)
        for (int l = 0; l < ev->sh.n_layers; l++) free(ev->W_O[l]);
    free(ev->W_O);
    free(ev->scale); free(ev->window);
    free(ev);
}

/* Grows *p to hold n floats. */
static int fit(float **p, size_t n, const char *what) {
    float *q = realloc(*p, (n ? n : 1) * sizeof **p);
    if (!q) return al_err("out of memory for %zu float%s of %s", n, al_s(n), what);
    *p = q;
    return AL_OK;
}

/* Scratch for T rows and width hidden. */
static int eval_fit(KqEval *ev, size_t T, size_t hidden) {
    if (T <= ev->T_cap && hidden <= ev->hid_cap) return AL_OK;
    size_t G = (size_t)ev->sh.n_kv_heads, H = (size_t)ev->sh.n_heads, d = (size_t)ev->sh.d_qk, dv = (size_t)ev->sh.d_v;
    size_t nKt, nVt, nH, nO, nS;
    if (!al_mul_ok(T, G * d, &nKt, "projected keys") || !al_mul_ok(T, G * dv, &nVt, "projected values") ||
        !al_mul_ok(T, H * dv, &nH, "head outputs") || !al_mul_ok(T, hidden, &nO, "attention outputs") ||
        !al_mul_ok((size_t)ev->workers * QB, T, &nS, "attention scores"))
        return AL_ERR;
    if (fit(&ev->Kt, nKt, "projected keys") || fit(&ev->Vt, nVt, "projected values") || fit(&ev->Hx, nH, "head outputs") ||
        fit(&ev->Ht, nH, "head outputs") || fit(&ev->Ox, nO, "attention outputs") || fit(&ev->Ot, nO, "attention outputs") ||
        fit(&ev->scores, nS, "attention scores"))
        return AL_ERR;
    ev->T_cap = T;
    ev->hid_cap = hidden;
    return AL_OK;
}

typedef struct {
    const float *Q, *K, *V;
    size_t ldq, ldk, ldv, T, m, d, dv, H;
    double scale;
    size_t window;
    double softcap;           /* attention logit soft-cap (0: none) */
    const float *sinks;       /* (H) sink logits or NULL */
    float *out;               /* (T, H dv) */
    float *scores;            /* (workers, QB, T) */
} AttnJob;

/* One query head h: out_h = softmax(causal(Q_h K_gᵀ scale)) V_g, in blocks of QB query rows. */
static int attn_task(size_t h, int worker, void *ud) {
    const AttnJob *j = ud;
    size_t g = h / j->m, T = j->T;
    const float *K = j->K + g * j->d, *V = j->V + g * j->dv;
    float *S = j->scores + (size_t)worker * QB * T;
    attn_head_causal(&(AttnHeadJob){.q = j->Q + h * j->d, .ldq = j->ldq, .K = K, .ldk = j->ldk, .V = V, .ldv = j->ldv,
                                     .T = T, .pos0 = 0, .d = j->d, .dv = j->dv, .scale = j->scale, .window = j->window,
                                     .softcap = j->softcap, .has_sink = j->sinks != NULL,
                                     .sink = j->sinks ? j->sinks[h] : 0, .qb = QB, .S = S, .out = j->out + h * j->dv,
                                     .ldo = j->H * j->dv});
    return AL_OK;
}

/* Causal attention of all heads into out (T, H dv); K (T, G d) and V (T, G dv) with strides. */
static int attend(KqEval *ev, size_t T, const float *Q, size_t ldq, const float *K, size_t ldk, const float *V, size_t ldv,
                  double scale, size_t window, float *out) {
    const CalibShape *sh = &ev->sh;
    AttnJob j = {.Q = Q, .K = K, .V = V, .ldq = ldq, .ldk = ldk, .ldv = ldv, .T = T,
                 .m = (size_t)calib_group(sh), .d = (size_t)sh->d_qk, .dv = (size_t)sh->d_v, .H = (size_t)sh->n_heads,
                 .scale = scale, .window = window, .softcap = ev->m ? ev->m->cfg.attn_softcap : 0, .sinks = ev->sinks,
                 .out = out, .scores = ev->scores};
    if (T * T >= 4096 && ev->workers > 1) return sweep_run((size_t)sh->n_heads, ev->workers, attn_task, &j);
    for (size_t h = 0; h < (size_t)sh->n_heads; h++) attn_task(h, 0, &j);
    return AL_OK;
}

/* dst (T, G n) = src (T, G n, stride ld) with each head's n columns times S_g = A_g B_gᵀ. */
static void project(KqEval *ev, const float *src, size_t ld, size_t T, size_t n, size_t R, const double *A,
                    const double *B, float *dst) {
    size_t G = (size_t)ev->sh.n_kv_heads;
    for (size_t g = 0; g < G; g++) {
        const double *a = A + g * n * R, *b = B + g * n * R;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < n; k++) {
                double s = 0;
                for (size_t r = 0; r < R; r++) s += a[i * R + r] * b[k * R + r];
                ev->S[i * n + k] = (float)s;
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)n, (int)n, 1.f, src + g * n, (int)ld, ev->S,
                    (int)n, 0.f, dst + g * n, (int)(G * n));
    }
}

/* ||X - Y||² and ||Y||² over n floats (double sums). */
static void diff2(const float *X, const float *Y, size_t n, double *num, double *den) {
    double a = 0, b = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)X[i] - (double)Y[i];
        a += e * e;
        b += (double)Y[i] * (double)Y[i];
    }
    *num = a;
    *den = b;
}

int kq_eval_layer(KqEval *ev, int layer, const KqLayerIn *in) {
    size_t T = in->tokens, ldq = in->ldq, ldk = in->ldk, ldv = in->ldv, hidden = in->hidden, ld_ref = in->ld_ref;
    const float *Q = in->Q, *K = in->K, *V = in->V, *W_O = in->W_O, *attn_ref = in->attn_ref;
    const CalibShape *sh = &ev->sh;
    if (layer < 0 || layer >= sh->n_layers) return al_err("evaluation: layer %d is out of range", layer);
    if (T == 0) return AL_OK;
    size_t G = (size_t)sh->n_kv_heads, H = (size_t)sh->n_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v;
    size_t L = (size_t)sh->n_layers;
    if (eval_fit(ev, T, hidden)) return AL_ERR;
    /* Per-sequence Grams (the error formulas of kqsvd.h). */
    CalibStats *q = ev->seq;
    memset(q->gk, 0, G * d * d * sizeof(double));
    memset(q->gq, 0, G * d * d * sizeof(double));
    memset(q->gv, 0, G * dv * dv * sizeof(double));
    if (calib_add(q, CALIB_K, 0, K, T, ldk) || calib_add(q, CALIB_Q, 0, Q, T, ldq) || calib_add(q, CALIB_V, 0, V, T, ldv))
        return AL_ERR;
    for (size_t g = 0; g < G; g++)
        if (calib_gram(q, CALIB_K, 0, (int)g, ev->gk + g * d * d) || calib_gram(q, CALIB_Q, 0, (int)g, ev->gq + g * d * d) ||
            calib_gram(q, CALIB_V, 0, (int)g, ev->gv + g * dv * dv))
            return AL_ERR;
    /* The exact output. */
    int rc = attend(ev, T, Q, ldq, K, ldk, V, ldv, in->scale, in->window, ev->Hx);
    if (rc) return rc;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hidden, (int)(H * dv), 1.f, ev->Hx, (int)(H * dv),
                W_O, (int)hidden, 0.f, ev->Ox, (int)hidden);
    if (attn_ref) {
        double num = 0, den = 0;
        for (size_t t = 0; t < T; t++) {
            double a, b;
            diff2(ev->Hx + t * H * dv, attn_ref + t * ld_ref, H * dv, &a, &b);
            num += a;
            den += b;
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel > ev->ref_diff) ev->ref_diff = rel;
    }
    for (size_t s = 0; s < ev->nsets; s++) {
        const KqProj *p = ev->sets[s];
        size_t Rk = (size_t)p->rank_k[layer], Rv = (size_t)p->rank_v[layer];
        KqGramErr ek = {0}, ev_ = {0}, e;
        for (size_t g = 0; g < G; g++) {
            if (kq_gram_err(ev->gk + g * d * d, ev->gq + g * d * d, d, p->A_K[layer] + g * d * Rk,
                            p->B_K[layer] + g * d * Rk, Rk, &e))
                return AL_ERR;
            err_add(&ek, &e);
            if (kq_gram_err(ev->gv + g * dv * dv, NULL, dv, p->A_V[layer] + g * dv * Rv, p->B_V[layer] + g * dv * Rv, Rv, &e))
                return AL_ERR;
            err_add(&ev_, &e);
        }
        project(ev, K, ldk, T, d, Rk, p->A_K[layer], p->B_K[layer], ev->Kt);
        project(ev, V, ldv, T, dv, Rv, p->A_V[layer], p->B_V[layer], ev->Vt);
        if ((rc = attend(ev, T, Q, ldq, ev->Kt, G * d, ev->Vt, G * dv, in->scale, in->window, ev->Ht))) return rc;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)hidden, (int)(H * dv), 1.f, ev->Ht,
                    (int)(H * dv), W_O, (int)hidden, 0.f, ev->Ot, (int)hidden);
        double on, od;
        diff2(ev->Ot, ev->Ox, T * hidden, &on, &od);
        double *acc = ev->sum + (s * L + (size_t)layer) * 5;
        acc[0] += kq_rel(ek.k, ek.nk);
        acc[1] += kq_rel(ek.q, ek.nq);
        acc[2] += kq_rel(ev_.k, ev_.nk);
        acc[3] += kq_rel(ek.kq, ek.nkq);
        acc[4] += kq_rel(on, od);
    }
    ev->cnt[layer]++;
    return AL_OK;
}

void kq_eval_result(const KqEval *ev, size_t s, int layer, KqErr *out) {
    memset(out, 0, sizeof *out);
    if (s >= ev->nsets || layer < 0 || layer >= ev->sh.n_layers) return;
    size_t n = ev->cnt[layer];
    out->n_seq = n;
    if (!n) return;
    const double *a = ev->sum + (s * (size_t)ev->sh.n_layers + (size_t)layer) * 5;
    out->k = a[0] / (double)n;
    out->q = a[1] / (double)n;
    out->v = a[2] / (double)n;
    out->kq = a[3] / (double)n;
    out->out = a[4] / (double)n;
}

double kq_eval_ref_diff(const KqEval *ev) { return ev->ref_diff; }

/* ---------------------------------------------------------------- the forward-pass driver */

/* Layer l's W_O (H dv, hidden) as one float matrix, loaded on first use. */
static int wo_layer(KqEval *ev, int l, const float **out) {
    if (ev->W_O[l]) { *out = ev->W_O[l]; return AL_OK; }
    if (!ev->wo_keep)
        for (int i = 0; i < ev->sh.n_layers; i++) { free(ev->W_O[i]); ev->W_O[i] = NULL; }
    size_t H = (size_t)ev->sh.n_heads, dv = (size_t)ev->sh.d_v, D = (size_t)ev->sh.hidden;
    float *W = al_malloc3(H * dv, D, sizeof *W, "W_O");
    if (!W) return AL_ERR;
    int rc = model_layer_load(ev->m, l);
    for (size_t h = 0; rc == AL_OK && h < H; h++) {
        Mat *Wo = NULL;
        if ((rc = model_head(ev->m, HK_O, l, (int)h, PART_ALL, &Wo))) break;
        if (Wo->rows != dv || Wo->cols != D)
            rc = al_err("%s layer %d head %zu: W_O is %zu x %zu, expected %zu x %zu", ev->m->name, l, h, Wo->rows,
                        Wo->cols, dv, D);
        else
            memcpy(W + h * dv * D, Wo->data, dv * D * sizeof *W);
        mat_free(Wo);
    }
    if (rc) { free(W); return rc; }
    ev->W_O[l] = W;
    *out = W;
    return AL_OK;
}

/* Copies a chunk of an activation into buf (T_total rows of width heads x head_dim). */
static int copy_act(const FwdAct *a, float **buf, size_t T_total) {
    size_t w = a->heads * a->head_dim;
    if (a->t0 == 0 && fit(buf, T_total * w, fwd_act_name(a->kind))) return AL_ERR;
    for (size_t t = 0; t < a->T; t++) memcpy(*buf + (a->t0 + t) * w, a->x + t * a->ld, w * sizeof(float));
    return AL_OK;
}

static int eval_hook(const FwdAct *a, void *ud) {
    KqEval *ev = ud;
    const CalibShape *sh = &ev->sh;
    size_t T = ev->run_T;
    size_t want_h = a->kind == FWD_Q_ROPE || a->kind == FWD_ATTN_OUT ? (size_t)sh->n_heads : (size_t)sh->n_kv_heads;
    size_t want_d = a->kind == FWD_V || a->kind == FWD_ATTN_OUT ? (size_t)sh->d_v : (size_t)sh->d_qk;
    if (a->heads != want_h || a->head_dim != want_d)
        return al_err("evaluation: the forward pass gives %s as %zu head%s x %zu, expected %zu x %zu", fwd_act_name(a->kind),
                      a->heads, al_s(a->heads), a->head_dim, want_h, want_d);
    switch (a->kind) {
    case FWD_Q_ROPE: return copy_act(a, &ev->Qb, T);
    case FWD_K_ROPE: return copy_act(a, &ev->Kb, T);
    case FWD_V: return copy_act(a, &ev->Vb, T);
    case FWD_ATTN_OUT: {
        if (a->t0 != 0 || a->T != T) return al_err("evaluation: the attention output came in chunks (internal)");
        const float *W;
        if (wo_layer(ev, a->layer, &W)) return AL_ERR;
        ev->sinks = ev->f ? fwd_attn_sinks(ev->f, a->layer) : NULL;     /* gpt-oss: the softmax's sinks */
        size_t H = (size_t)sh->n_heads, G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v;
        return kq_eval_layer(ev, a->layer, &(KqLayerIn){.tokens = T, .Q = ev->Qb, .ldq = H * d, .K = ev->Kb, .ldk = G * d,
                                                        .V = ev->Vb, .ldv = G * dv, .W_O = W, .hidden = (size_t)sh->hidden,
                                                        .scale = ev->scale[a->layer], .window = ev->window[a->layer],
                                                        .attn_ref = a->x, .ld_ref = a->ld});
    }
    default: return AL_OK;
    }
}

int kq_eval_run(KqEval *ev, Model *m, Forward *f, const int *tokens, size_t nseq, size_t seqlen) {
    const CalibShape *sh = &ev->sh;
    CalibShape msh;
    if (calib_shape_of(m, &msh)) return AL_ERR;
    if (msh.n_layers != sh->n_layers || msh.n_heads != sh->n_heads || msh.n_kv_heads != sh->n_kv_heads ||
        msh.d_qk != sh->d_qk || msh.d_v != sh->d_v || msh.hidden != sh->hidden)
        return al_err("evaluation: model %s does not have the shape the projections were learned for", m->name);
    if (seqlen == 0 || nseq == 0) return al_err("evaluation needs at least one sequence");
    if (seqlen > fwd_max_ctx(f))
        return al_err("evaluation: seqlen %zu is longer than the model's context %zu", seqlen, fwd_max_ctx(f));
    size_t L = (size_t)sh->n_layers;
    ev->m = m;
    if (!ev->W_O && !(ev->W_O = al_calloc(L, sizeof(float *), "W_O cache"))) return AL_ERR;
    double wo_bytes = (double)L * sh->n_heads * sh->d_v * (double)sh->hidden * sizeof(float);
    ev->wo_keep = wo_bytes <= 1024.0 * 1024 * 1024;
    free(ev->scale); free(ev->window);
    ev->scale = al_calloc(L, sizeof(double), "attention scales");
    ev->window = al_calloc(L, sizeof(size_t), "attention windows");
    if (!ev->scale || !ev->window) return AL_ERR;
    for (size_t l = 0; l < L; l++) {
        ev->scale[l] = fwd_attn_scale(f, (int)l);
        ev->window[l] = fwd_attn_window(f, (int)l);
    }
    ev->run_T = seqlen;
    ev->f = f;
    FwdHooks h = {.mask = FWD_Q_ROPE | FWD_K_ROPE | FWD_V | FWD_ATTN_OUT, .fn = eval_hook, .ud = ev, .chunk = 0,
                  .whole_seqs = true};      /* Ctrl-C after a whole sequence: every layer averages the same ones */
    int rc = fwd_run_hooked(f, &h, tokens, nseq, seqlen);
    ev->f = NULL;
    ev->sinks = NULL;
    return rc;
}
